# SPDX-License-Identifier: Apache-2.0
"""The load profile, parameters and thresholds shared by the Python load generator (loadgen.py)
and the k6 scripts (e2e/k6/lib/profile.js holds the same values; e2e/test_k6.py checks that the
two agree, by parsing the JavaScript and by running its pure helpers under node).

The peak profile is one afternoon of an inference service, 2 PM to 8 PM, compressed into
DURATION: PEAK_RPS x 0.3 at 2 PM, ramping to 0.5 at 3 PM and to the peak at 4 PM, held until
6 PM, back to 0.5 at 7 PM and 0.3 at 8 PM.  Rates are k6 ramping-arrival-rate stages in
requests per minute (timeUnit 1m, rounded half up, so small peaks keep their shape) and stage
durations whole seconds (DURATION x hours / 6, rounded half up); in between the rate ramps
linearly.  Thresholds: p(99) of http_req_duration below SLA_MS, http_req_failed rate below
MAX_ERROR_RATE.
"""

import math
import re

# Environment variables of the k6 scripts and their defaults (the local cluster's Service).
DEFAULTS = {
    "TARGET_URL": "http://127.0.0.2:8080",
    "SLA_MS": 2000,
    "PEAK_RPS": 20,
    "DURATION": "10m",
    "MODEL": "fake-model",
    "MAX_TOKENS": 16,
    "MAX_ERROR_RATE": 0.01,
    "MAX_VUS": 300,
    "RATE": 5,
    "SUMMARY_PATH": "k6-summary.json",
}

# Rate as a fraction of PEAK_RPS; stage lengths in (compressed) hours of the afternoon.
SHAPE = {
    "clock_start": "14:00",
    "start": 0.3,
    "stages": [
        {"hours": 1, "target": 0.5},
        {"hours": 1, "target": 1.0},
        {"hours": 2, "target": 1.0},
        {"hours": 1, "target": 0.5},
        {"hours": 1, "target": 0.3},
    ],
}

PROMPT = "Write one sentence about autoscaling GPU inference servers."


def round_half_up(x):
    """JavaScript's Math.round for the non-negative numbers used here."""
    return int(math.floor(x + 0.5))


def parse_duration(s):
    """k6 durations ('10m', '90s', '1h30m', '1500ms') or a bare number of seconds -> seconds."""
    if isinstance(s, (int, float)):
        return float(s)
    s = str(s).strip()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|h|m|s)", s):
        if m.start() != pos:
            raise ValueError("bad duration: %r" % s)
        total += float(m.group(1)) * {"ms": 0.001, "h": 3600.0, "m": 60.0, "s": 1.0}[m.group(2)]
        pos = m.end()
    if pos == 0 or pos != len(s):
        raise ValueError("bad duration: %r" % s)
    return total


def build_stages(peak_rps, duration_s, shape=None):
    """The ramping-arrival-rate scenario: {"startRate", "timeUnit", "stages": [{duration,
    target}]}, rates per minute, durations like '100s' (same arithmetic as profile.js)."""
    shape = shape or SHAPE
    hours = 0
    for st in shape["stages"]:
        hours += st["hours"]
    stages = []
    for st in shape["stages"]:
        stages.append({"duration": "%ds" % round_half_up(duration_s * st["hours"] / hours),
                       "target": round_half_up(peak_rps * 60 * st["target"])})
    return {"startRate": round_half_up(peak_rps * 60 * shape["start"]), "timeUnit": "1m",
            "stages": stages}


def thresholds(sla_ms, max_error_rate):
    """k6 thresholds, same strings as profile.js."""
    return {"http_req_duration": ["p(99)<%s" % _js_num(sla_ms)],
            "http_req_failed": ["rate<%s" % _js_num(max_error_rate)]}


def _js_num(v):
    """A number as JavaScript's String(n) prints it (for the values used here)."""
    f = float(v)
    if f == int(f) and abs(f) < 1e21:
        return str(int(f))
    return repr(f)


class RateProfile:
    """Piecewise-linear arrival rate in requests/s over [0, duration)."""

    def __init__(self, points):
        """points: [(t_seconds, rps)] with increasing t; linear in between; the last t is the
        end of the run."""
        self.points = [(float(t), float(r)) for t, r in points]
        self.duration = self.points[-1][0] if self.points else 0.0

    def rate(self, t):
        pts = self.points
        if not pts or t < 0 or t >= self.duration:
            return 0.0
        lo, hi = 0, len(pts) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if pts[mid][0] <= t:
                lo = mid
            else:
                hi = mid
        (t0, r0), (t1, r1) = pts[lo], pts[hi]
        if t1 <= t0:
            return r1
        return r0 + (r1 - r0) * (t - t0) / (t1 - t0)

    def max_rate(self):
        return max((r for _, r in self.points), default=0.0)

    def expected(self, t0=0.0, t1=None):
        """Integral of the rate over [t0, t1] (expected arrivals)."""
        t1 = self.duration if t1 is None else t1
        total = 0.0
        for (a, ra), (b, rb) in zip(self.points, self.points[1:]):
            lo, hi = max(a, t0), min(b, t1)
            if hi <= lo or b <= a:
                continue
            r_lo = ra + (rb - ra) * (lo - a) / (b - a)
            r_hi = ra + (rb - ra) * (hi - a) / (b - a)
            total += (r_lo + r_hi) / 2.0 * (hi - lo)
        return total

    @classmethod
    def from_scenario(cls, scenario):
        unit = parse_duration(scenario.get("timeUnit", "1s"))
        t, r = 0.0, scenario["startRate"] / unit
        pts = [(t, r)]
        for st in scenario["stages"]:
            t += parse_duration(st["duration"])
            pts.append((t, st["target"] / unit))
        return cls(pts)

    @classmethod
    def peak(cls, peak_rps, duration_s, shape=None):
        return cls.from_scenario(build_stages(peak_rps, duration_s, shape))

    @classmethod
    def constant(cls, rps, duration_s):
        return cls([(0.0, rps), (float(duration_s), rps)])

    @classmethod
    def ramp(cls, stages, start_rps=0.0):
        """stages: [(duration_s, target_rps)], linear ramps as k6 stages."""
        t, pts = 0.0, [(0.0, float(start_rps))]
        for d, target in stages:
            t += float(d)
            pts.append((t, float(target)))
        return cls(pts)

    @classmethod
    def steps(cls, steps):
        """steps: [(duration_s, rps)], constant within each step."""
        t, pts = 0.0, []
        for d, r in steps:
            pts.append((t, float(r)))
            t += float(d)
            pts.append((t - 1e-9, float(r)))
        pts.append((t, pts[-1][1] if pts else 0.0))
        return cls(pts)

    @classmethod
    def from_trace(cls, path, compress=1.0, peak_rps=None, scale=1.0, start_s=0.0,
                   duration_s=None):
        """A trace CSV `t_seconds,requests` (gpuscaler's format: equal buckets, optional header,
        '#' comments, extra columns ignored, skipped buckets are zero; .gz accepted) played
        `compress` times faster: the window [start_s, start_s + duration_s) of trace time lasts
        duration_s / compress seconds.  Rates are the trace's requests/s times `scale`, or
        rescaled so the window's highest bucket is peak_rps."""
        rows = read_trace(path)
        if len(rows) < 2:
            raise ValueError("%s: a trace needs at least two rows" % path)
        dt = rows[1][0] - rows[0][0]
        if dt <= 0:
            raise ValueError("%s: times must increase" % path)
        t0 = rows[0][0]
        buckets = {}
        for t, n in rows:
            buckets[int(round((t - t0) / dt))] = n
        last = max(buckets)
        end = (last + 1) * dt if duration_s is None else start_s + duration_s
        pts, rates = [], []
        i = int(math.floor(start_s / dt))
        while i * dt < end:
            b0 = max(i * dt, start_s)
            b1 = min((i + 1) * dt, end)
            rates.append((b0, b1, buckets.get(i, 0.0) / dt))
            i += 1
        if not rates:
            raise ValueError("%s: empty window" % path)
        top = max(r for _, _, r in rates)
        k = (peak_rps / top) if (peak_rps and top > 0) else scale
        for b0, b1, r in rates:
            a, b = (b0 - start_s) / compress, (b1 - start_s) / compress
            pts.append((a, r * k))
            pts.append((b - 1e-9 if b - 1e-9 > a else b, r * k))
        pts.append(((end - start_s) / compress, rates[-1][2] * k))
        return cls(pts)


def read_trace(path):
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    rows = []
    with opener(path, "rt") as f:
        for ln in f:
            ln = ln.strip()
            if not ln or ln.startswith("#"):
                continue
            cols = ln.split(",")
            try:
                rows.append((float(cols[0]), float(cols[1])))
            except (ValueError, IndexError):
                if rows:
                    raise ValueError("%s: bad row %r" % (path, ln))
                continue    # header
    return rows


# ---------------------------------------------------------------- thresholds

_THRESH = re.compile(r"^\s*(avg|min|max|med|rate|count|p\((\d+(?:\.\d+)?)\))\s*(<=|<|>=|>|==)\s*"
                     r"(-?\d+(?:\.\d+)?)\s*$")


def percentile(sorted_vals, pct):
    """k6's Trend percentile: linear interpolation at rank pct*(n-1) (pct in 0..1)."""
    n = len(sorted_vals)
    if n == 0:
        return 0.0
    if n == 1:
        return sorted_vals[0]
    i = pct * (n - 1)
    lo, hi = int(math.floor(i)), int(math.ceil(i))
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (i - lo)


def eval_threshold(expr, values):
    """Evaluate one k6 threshold expression ('p(99)<2000', 'rate<0.01') against a dict of the
    metric's values ({'p(99)': ..., 'rate': ...}).  Returns (ok, value)."""
    m = _THRESH.match(expr)
    if not m:
        raise ValueError("unsupported threshold %r" % expr)
    agg, op, limit = m.group(1), m.group(3), float(m.group(4))
    v = values[agg]
    ok = {"<": v < limit, "<=": v <= limit, ">": v > limit, ">=": v >= limit,
          "==": v == limit}[op]
    return ok, v

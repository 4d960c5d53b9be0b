#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""An open-loop load generator for the local cluster (and any OpenAI-style endpoint): Poisson
arrivals at a rate that follows the peak profile of e2e/k6/peak.js (same stages, parameters and
thresholds: see profile.py), a constant rate as e2e/k6/baseline.js, k6-style --stages
(linear ramps between DURATION:RPS points), or a trace CSV
`t_seconds,requests` played time-compressed.

Arrivals do not wait for responses (open loop); a bounded number of requests may be in flight
(--concurrency) to keep the machine safe: an arrival beyond it is dropped and counted, as k6
counts dropped_iterations.  Each request is POST /v1/completions with {"model", "prompt",
"max_tokens"} over keep-alive connections; its latency is from sending to the last body byte
(k6's http_req_duration).  A request fails (http_req_failed) on a status outside 200-399, a
connection error or the --timeout.

Output: JSON lines (stdout or --out), one {"type": "interval", ...} every --interval seconds
(requests completed in that interval: counts, error rate, p50/p95/p99/max in ms, the target
rate) and a final {"type": "summary", ...} in the same shape as the k6 scripts' handleSummary
JSON (pass, thresholds, http_req_duration_ms, http_req_failed_rate, http_reqs,
dropped_iterations).  Percentiles are k6's (linear interpolation at rank p*(n-1)).  Exit code 0
when every threshold holds, 99 when one fails (as k6), 2 on bad arguments.
"""

import argparse
import asyncio
import json
import os
import random
import sys
import time
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)
if E2E not in sys.path:
    sys.path.insert(0, E2E)

from cluster import profile as P  # noqa: E402

MAX_HEADER = 64 * 1024


class Config:
    """Everything one run needs.  Defaults are profile.DEFAULTS, overridden by the same
    environment variables the k6 scripts read, overridden by arguments."""

    def __init__(self, **kw):
        env = os.environ

        def d(name, conv=str):
            v = env.get(name)
            return conv(v) if v not in (None, "") else conv(P.DEFAULTS[name])

        self.target_url = d("TARGET_URL")
        self.sla_ms = d("SLA_MS", float)
        self.peak_rps = d("PEAK_RPS", float)
        self.duration = d("DURATION")
        self.model = d("MODEL")
        self.max_tokens = d("MAX_TOKENS", int)
        self.max_error_rate = d("MAX_ERROR_RATE", float)
        self.rate = d("RATE", float)
        self.profile = "peak"          # peak | constant | stages | trace | custom
        self.stages = None             # [(duration_s, target_rps)] for profile "stages"
        self.start_rps = 0.0
        self.trace = None
        self.compress = 1.0
        self.trace_peak_rps = None
        self.trace_scale = 1.0
        self.trace_start = 0.0
        self.trace_duration = None
        self.rate_profile = None       # a profile.RateProfile for profile "custom"
        self.concurrency = 256
        self.timeout = 60.0
        self.interval = 5.0
        self.graceful_stop = 30.0
        self.seed = 1
        self.path = "/v1/completions"
        for k, v in kw.items():
            if not hasattr(self, k):
                raise TypeError("unknown load generator setting %r" % k)
            setattr(self, k, v)

    def build_profile(self):
        dur = P.parse_duration(self.duration)
        if self.profile == "peak":
            return P.RateProfile.peak(self.peak_rps, dur)
        if self.profile == "constant":
            return P.RateProfile.constant(self.rate, dur)
        if self.profile == "stages":
            if not self.stages:
                raise ValueError("profile stages needs stages")
            return P.RateProfile.ramp(self.stages, self.start_rps)
        if self.profile == "trace":
            if not self.trace:
                raise ValueError("profile trace needs a trace file")
            return P.RateProfile.from_trace(self.trace, self.compress, self.trace_peak_rps,
                                            self.trace_scale, self.trace_start,
                                            self.trace_duration)
        if self.profile == "custom":
            if self.rate_profile is None:
                raise ValueError("profile custom needs rate_profile")
            return self.rate_profile
        raise ValueError("unknown profile %r" % self.profile)

    def thresholds(self):
        return P.thresholds(self.sla_ms, self.max_error_rate)


def arrivals(rp, seed):
    """Poisson arrival times (s from start) for the time-varying rate rp (thinning)."""
    rng = random.Random(seed)
    lam = rp.max_rate()
    if lam <= 0:
        return
    t = 0.0
    while True:
        t += rng.expovariate(lam)
        if t >= rp.duration:
            return
        if rng.random() * lam < rp.rate(t):
            yield t


class Pool:
    """Keep-alive HTTP/1.1 connections to one host:port."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.idle = []

    async def request(self, method, path, body, headers):
        req = ["%s %s HTTP/1.1" % (method, path), "Host: %s:%d" % (self.host, self.port),
               "Content-Length: %d" % len(body), "Connection: keep-alive"] + \
              ["%s: %s" % kv for kv in headers]
        data = ("\r\n".join(req) + "\r\n\r\n").encode("latin-1") + body
        for attempt in range(2):
            reused = bool(self.idle)
            if reused:
                r, w = self.idle.pop()
            else:
                r, w = await asyncio.open_connection(self.host, self.port, limit=MAX_HEADER)
            t0 = time.monotonic()
            try:
                w.write(data)
                await w.drain()
                head = await r.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError):
                w.close()
                if reused and attempt == 0:
                    continue
                raise
            break
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        clen, close, hdrs = None, False, {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            k, v = k.strip().lower(), v.strip()
            if k:
                hdrs[k] = v
            if k == "content-length":
                clen = int(v)
            elif k == "connection" and v.lower() == "close":
                close = True
        try:
            payload = await (r.readexactly(clen) if clen is not None else r.read())
        except BaseException:
            w.close()
            raise
        if close or clen is None:
            w.close()
        else:
            self.idle.append((r, w))
        return status, hdrs, payload, t0

    def close(self):
        for _, w in self.idle:
            w.close()
        self.idle = []


class Window:
    """Latencies and counts of requests completed in one reporting interval."""

    def __init__(self):
        self.lat = []
        self.ok = 0
        self.errors = 0
        self.sent = 0
        self.dropped = 0


def stats(lat_ms):
    s = sorted(lat_ms)
    if not s:
        return {"p50_ms": None, "p90_ms": None, "p95_ms": None, "p99_ms": None,
                "max_ms": None, "mean_ms": None}
    return {"p50_ms": round(P.percentile(s, 0.50), 3), "p90_ms": round(P.percentile(s, 0.90), 3),
            "p95_ms": round(P.percentile(s, 0.95), 3), "p99_ms": round(P.percentile(s, 0.99), 3),
            "max_ms": round(s[-1], 3), "mean_ms": round(sum(s) / len(s), 3)}


async def run_async(cfg, emit, raw=None, stop_event=None):
    """Run one load test; emit(record) for each interval and the summary (returned too);
    raw(record) per request when given."""
    rp = cfg.build_profile()
    u = urlsplit(cfg.target_url)
    if u.scheme != "http":
        raise ValueError("only http:// targets are supported (got %s)" % cfg.target_url)
    pool = Pool(u.hostname, u.port or 80)
    path = (u.path.rstrip("/") or "") + cfg.path if u.path not in ("", "/") else cfg.path
    body = json.dumps({"model": cfg.model, "prompt": P.PROMPT, "max_tokens": cfg.max_tokens,
                       "temperature": 0}).encode()
    hdrs = [("Content-Type", "application/json")]
    loop = asyncio.get_running_loop()
    start = time.monotonic()
    start_wall = time.time()
    all_lat, codes = [], {}
    tot = {"ok": 0, "errors": 0, "sent": 0, "dropped": 0, "interrupted": 0}
    win = [Window()]
    inflight = set()

    async def one(t_arr):
        status, err = 0, None
        t0 = time.monotonic()
        try:
            status, _, _, t0 = await asyncio.wait_for(
                pool.request("POST", path, body, hdrs), cfg.timeout)
        except asyncio.TimeoutError:
            err = "timeout"
        except Exception as e:   # connection errors, malformed answers: a failed request
            err = type(e).__name__
        t1 = time.monotonic()
        lat = (t1 - t0) * 1000.0
        ok = err is None and 200 <= status < 400
        key = str(status) if err is None else err
        codes[key] = codes.get(key, 0) + 1
        w = win[0]
        w.lat.append(lat)
        all_lat.append(lat)
        if ok:
            w.ok += 1
            tot["ok"] += 1
        else:
            w.errors += 1
            tot["errors"] += 1
        if raw is not None:
            raw({"t_arrival": round(t_arr, 6), "t_start": round(t0 - start, 6),
                 "t_end": round(t1 - start, 6), "latency_ms": round(lat, 3),
                 "status": status, "error": err})

    def report(t_end, t_begin):
        w, win[0] = win[0], Window()
        rec = {"type": "interval", "t": round(t_end, 3), "t_start": round(t_begin, 3),
               "ts": round(start_wall + t_end, 3),
               "target_rps": round(rp.rate((t_begin + t_end) / 2.0), 4),
               "expected": round(rp.expected(t_begin, t_end), 3),
               "sent": w.sent, "dropped": w.dropped, "completed": len(w.lat), "ok": w.ok,
               "errors": w.errors, "inflight": len(inflight),
               "error_rate": round(w.errors / len(w.lat), 6) if w.lat else 0.0}
        rec.update(stats(w.lat))
        emit(rec)

    async def reporter():
        k = 1
        while True:
            due = start + k * cfg.interval
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            report(k * cfg.interval, (k - 1) * cfg.interval)
            k += 1

    rep = loop.create_task(reporter())
    try:
        for t in arrivals(rp, cfg.seed):
            if stop_event is not None and stop_event.is_set():
                break
            delay = start + t - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tot["sent"] += 1
            win[0].sent += 1
            if len(inflight) >= cfg.concurrency:
                tot["dropped"] += 1
                win[0].dropped += 1
                continue
            task = loop.create_task(one(t))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        rest = start + rp.duration - time.monotonic()
        if rest > 0 and not (stop_event is not None and stop_event.is_set()):
            await asyncio.sleep(rest)
        if inflight:
            done, pending = await asyncio.wait(set(inflight), timeout=cfg.graceful_stop)
            for task in pending:
                task.cancel()
            tot["interrupted"] = len(pending)
    finally:
        rep.cancel()
        pool.close()
    elapsed = time.monotonic() - start
    k = int(elapsed // cfg.interval)
    if win[0].lat or win[0].sent or elapsed - k * cfg.interval > 1e-3:
        report(elapsed, k * cfg.interval)
    n = tot["ok"] + tot["errors"]
    s = sorted(all_lat)
    dur = {"avg": (sum(s) / n) if n else 0.0, "min": s[0] if s else 0.0,
           "med": P.percentile(s, 0.5), "max": s[-1] if s else 0.0,
           "p(90)": P.percentile(s, 0.90), "p(95)": P.percentile(s, 0.95),
           "p(99)": P.percentile(s, 0.99)}
    failed_rate = tot["errors"] / n if n else 0.0
    th = cfg.thresholds()
    results, passed = {}, True
    for metric, exprs in th.items():
        vals = dur if metric == "http_req_duration" else {"rate": failed_rate}
        results[metric] = {}
        for e in exprs:
            ok, _ = P.eval_threshold(e, vals)
            results[metric][e] = ok
            passed &= ok
    summary = {"type": "summary", "tool": "gpuscaler-loadgen", "profile": cfg.profile,
               "target_url": cfg.target_url, "pass": passed, "thresholds": results,
               "http_req_duration_ms": {k2: round(v, 3) for k2, v in dur.items()},
               "http_req_failed_rate": round(failed_rate, 6), "http_reqs": n,
               "dropped_iterations": tot["dropped"], "interrupted": tot["interrupted"],
               "sent": tot["sent"], "ok": tot["ok"], "errors": tot["errors"],
               "status_codes": codes, "duration_s": round(elapsed, 3),
               "expected_requests": round(rp.expected(), 3),
               "achieved_rps": round(n / elapsed, 3) if elapsed > 0 else 0.0,
               "sla_ms": cfg.sla_ms, "max_error_rate": cfg.max_error_rate,
               "concurrency": cfg.concurrency, "seed": cfg.seed}
    summary.update(stats(all_lat))
    emit(summary)
    return summary


def run(cfg, emit=None, raw=None, stop_event=None):
    """Blocking wrapper of run_async; returns the summary dict."""
    return asyncio.run(run_async(cfg, emit or (lambda r: None), raw, stop_event))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    c = Config()
    ap.add_argument("--target-url", default=c.target_url, help="env TARGET_URL")
    ap.add_argument("--profile", choices=("peak", "constant", "stages", "trace"),
                    default="peak")
    ap.add_argument("--stages", help="profile stages: k6-style linear ramps, "
                    "DURATION:RPS[,DURATION:RPS...], e.g. 30s:10,1m:40,30s:40")
    ap.add_argument("--start-rps", type=float, default=0.0, help="stages: rate at t=0")
    ap.add_argument("--peak-rps", type=float, default=c.peak_rps, help="env PEAK_RPS")
    ap.add_argument("--duration", default=c.duration, help="env DURATION (k6 syntax: 10m, 90s)")
    ap.add_argument("--rate", type=float, default=c.rate, help="constant profile: env RATE")
    ap.add_argument("--trace", help="trace CSV t_seconds,requests (.gz accepted)")
    ap.add_argument("--compress", type=float, default=1.0, help="trace time compression factor")
    ap.add_argument("--trace-peak-rps", type=float, help="rescale the trace to this peak rate")
    ap.add_argument("--trace-scale", type=float, default=1.0, help="multiply trace rates")
    ap.add_argument("--trace-start", type=float, default=0.0, help="trace window start (s)")
    ap.add_argument("--trace-duration", type=float, help="trace window length (trace s)")
    ap.add_argument("--sla-ms", type=float, default=c.sla_ms, help="env SLA_MS")
    ap.add_argument("--max-error-rate", type=float, default=c.max_error_rate,
                    help="env MAX_ERROR_RATE")
    ap.add_argument("--model", default=c.model, help="env MODEL")
    ap.add_argument("--max-tokens", type=int, default=c.max_tokens, help="env MAX_TOKENS")
    ap.add_argument("--concurrency", type=int, default=c.concurrency,
                    help="in-flight cap; arrivals beyond it are dropped")
    ap.add_argument("--timeout", type=float, default=c.timeout, help="per request (s)")
    ap.add_argument("--interval", type=float, default=c.interval, help="report interval (s)")
    ap.add_argument("--graceful-stop", type=float, default=c.graceful_stop)
    ap.add_argument("--seed", type=int, default=c.seed)
    ap.add_argument("--out", default="-", help="JSON lines output ('-' = stdout)")
    ap.add_argument("--raw", help="also write one JSON line per request here")
    ap.add_argument("--summary", help="also write the summary JSON here")
    a = ap.parse_args(argv)
    stages = None
    if a.stages:
        try:
            stages = [(P.parse_duration(d), float(r)) for d, r in
                      (item.split(":") for item in a.stages.split(","))]
        except ValueError as e:
            sys.stderr.write("loadgen: bad --stages: %s\n" % e)
            return 2
    cfg = Config(stages=stages, start_rps=a.start_rps,target_url=a.target_url, profile=a.profile, peak_rps=a.peak_rps,
                 duration=a.duration, rate=a.rate, trace=a.trace, compress=a.compress,
                 trace_peak_rps=a.trace_peak_rps, trace_scale=a.trace_scale,
                 trace_start=a.trace_start, trace_duration=a.trace_duration, sla_ms=a.sla_ms,
                 max_error_rate=a.max_error_rate, model=a.model, max_tokens=a.max_tokens,
                 concurrency=a.concurrency, timeout=a.timeout, interval=a.interval,
                 graceful_stop=a.graceful_stop, seed=a.seed)
    try:
        cfg.build_profile()
    except (ValueError, OSError) as e:
        sys.stderr.write("loadgen: %s\n" % e)
        return 2
    out = sys.stdout if a.out == "-" else open(a.out, "a")
    rawf = open(a.raw, "a") if a.raw else None

    def emit(rec):
        out.write(json.dumps(rec) + "\n")
        out.flush()

    def raw(rec):
        rawf.write(json.dumps(rec) + "\n")

    import signal
    import threading
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        summary = run(cfg, emit, raw if rawf else None, stop)
    except KeyboardInterrupt:
        return 130
    finally:
        if rawf:
            rawf.close()
        if out is not sys.stdout:
            out.close()
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if summary["pass"] else 99


if __name__ == "__main__":
    sys.exit(main())

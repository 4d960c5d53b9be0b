#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Closed-loop end-to-end scenarios: under real load the service keeps its p99 SLA with as few GPUs
as possible, proven end to end on one machine.

Everything runs on the local cluster of e2e/cluster (fakekube + kubelet + fakeserve pods on
127.N.x.y + Service fronts + the open-loop load generator), with `gpuscaler run` (GPUSCALER_BIN)
scaling the Deployments through the Kubernetes API only.  Every load run is measured by the
client, as k6 would (the load generator keeps k6's percentiles, thresholds and summary shape):
p99 per phase, GPU-seconds (sum over time of the Deployment's status.replicas x GPUs), reaction
time, time to SLA compliance and direction changes of spec.replicas.  Each scenario prints its
figures and asserts them against the bounds written next to them.

Compressed time (the whole file must finish within meson's 900 s timeout on 2 cores): decisions every
second, scrape every 500 ms over a 3 s rate window, scale-out after 3 s, scale-in after 10 s,
cold start 3 s.  A pod is 1 GPU x 2 slots x 200 ms (lognormal sigma 0.25): 10 req/s at most,
profiled at 8 req/s within the SLA (gpuscaler.io/capacity-per-gpu), sized at 80 % = 6.4 req/s.
SLA: p99 < 1000 ms, errors < 1 % (the k6 scripts' thresholds with SLA_MS=1000).

Scenarios: 1 ramp to 3x capacity, 2 a daily peak with the predictive policy against the reactive
one side by side, 3 load drop and stepwise scale-in, 4 API and metrics faults, 5 leader failover,
6 HPA mode through the external metrics API and hpaemu, 7 the Prometheus-server source, 8 the
3x step measured on a real control plane (20 s cold start, 5 s ticks) against a trivial
stand-in autoscaler, 9 capacity-per-gpu learned and checked, 10 GPU capacity exhausted (pods
Pending/Unschedulable beyond a node's GPUs: hold, Warning, status, metric; resume when GPUs come),
11 token-aware demand (demand-unit tokens) against a requests policy while the prompt-length mix
shifts.

Scenario 2 needs a clock-minute boundary (the forecaster's buckets are fixed 1 min wide), so it
is measured on a second local cluster in a thread started with the module and asserted after
scenario 4 (ORDER).  Known gpuscaler limitations are expectedFailure tests naming the cause.
The whole file took 494 s in one run on the shared 2-core machine (scenario 8: 132 s, 11: 97 s,
4: 58 s, the others 24-34 s), so meson runs it as two parts side by side (GPUSCALER_E2E_PART
"1/2" and "2/2": PARTS below, about 250 s each, each with its own local cluster on its own
GPUSCALER_E2E_OCTETS range).

Run: /usr/bin/python3 e2e/test_closed_loop.py   (every scenario; meson tests 'closed-loop-1' and
'closed-loop-2' run the two parts; GPUSCALER_BIN)
"""

import base64
import datetime
import json
import math
import os
import random
import re
import shutil
import signal
import sys
import threading
import time
import traceback
import unittest
import urllib.request

E2E = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("GPUSCALER_SRC") or os.path.dirname(E2E)
sys.path.insert(0, E2E)

from checkpoint import checkpoint_name, history_state  # noqa: E402
from cluster import procs  # noqa: E402
from cluster import profile as P  # noqa: E402
from cluster.harness import LocalCluster, log_size, logged_port, octet_range  # noqa: E402
from fakekube import harness as fkh  # noqa: E402
from fakekube.kubeclient import Client  # noqa: E402

BIN = os.environ.get("GPUSCALER_BIN") or os.path.join(SRC, "build", "cmd", "gpuscaler",
                                                      "gpuscaler")

# ---------------------------------------------------------------- the compressed setting

SLA_MS = 1000.0                 # p99 SLA (k6 SLA_MS)
MAX_ERROR_RATE = 0.01           # k6 MAX_ERROR_RATE
POD_RPS = 10.0                  # what one pod really serves: 1 GPU x 2 slots / 0.2 s
CAPACITY = 8.0                  # gpuscaler.io/capacity-per-gpu (profiled at the SLA)
TARGET = 0.8                    # gpuscaler.io/target-utilization (default)
PER_REPLICA = TARGET * CAPACITY  # 6.4 req/s per replica at the target
SCALE_OUT_AFTER = 3.0
SCALE_IN_AFTER = 10.0
RATE_WINDOW = 3.0
COLD_START = 3.0
POD = dict(gpus=1, slots=2, service_ms=200, service_sigma=0.25, cold_start=COLD_START)

NS = "default"
GS_USER = "system:serviceaccount:gpuscaler-system:gpuscaler"
HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"

CONFIG = {"decision-interval": "1s", "leader-election": {"enabled": False},
          "scrape": {"interval": "500ms", "timeout": "1s", "rate-window": "%ds" % RATE_WINDOW},
          "log": {"format": "json", "level": "info"}}

REASONS = ("WithinBand", "AboveTargetWaiting", "BelowTargetWaiting", "ScaleOutPending",
           "AtMaxReplicas", "AtMinReplicas", "ScaleInBlockedByLatency", "MetricsUnavailable",
           "ScaledOut", "PredictiveScaleOut", "LatencyScaleOut", "SLAScaleOut", "ScaledIn",
           "PredictiveScaleIn", "OutsideReplicaBounds", "AtGPUCapacity")
SCALE_OUT = ("ScaledOut", "PredictiveScaleOut", "LatencyScaleOut", "SLAScaleOut")


def annotations(**kw):
    """gpuscaler.io/* annotations of the compressed setting; kw overrides (key with - as _)."""
    a = {"enabled": "true", "capacity-per-gpu": "%g" % CAPACITY,
         "scale-out-after": "%ds" % SCALE_OUT_AFTER, "scale-in-after": "%ds" % SCALE_IN_AFTER,
         "cold-start": "%ds" % COLD_START, "metrics-stale-after": "5s",
         "min-replicas": "1", "max-replicas": "8", "predictive": "false"}
    for k, v in kw.items():
        a[k.replace("_", "-")] = v
    return {"gpuscaler.io/" + k: v for k, v in a.items()}


def need(rate):
    """Replicas gpuscaler sizes for `rate` req/s at the target utilization (no SLA given)."""
    return int(math.ceil(rate / PER_REPLICA - 1e-9))


def erlang_c(c, a):
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1 - b)) if a < c else 1.0


def sla_rho(slots, replica_rps, service_s, target_s):
    """The utilisation whose M/M/c p99 meets target_s (docs/policy.md, "Size from the SLA")."""
    lo, hi = 0.0, 0.999
    for _ in range(60):
        mid = (lo + hi) / 2
        pw = erlang_c(slots, mid * slots)
        p = service_s if pw <= 0.01 else service_s + math.log(pw / 0.01) / (replica_rps * (1 - mid))
        lo, hi = (mid, hi) if p <= target_s else (lo, mid)
    return lo


# With p99-latency-target, capacity-per-gpu is the saturation throughput (10 req/s here) and the
# replicas are the fewest whose modelled p99 meets the SLA: 2 slots, 0.2 s, p99 <= 1 s. The
# demand is sized 5 % below that rate (POLICY_SCALE_IN_MARGIN, docs/policy.md "Size").
SLA_PER_REPLICA = sla_rho(2, POD_RPS, POD["service_ms"] / 1000.0, SLA_MS / 1000.0) * POD_RPS
SLA_DEMAND_PER_REPLICA = SLA_PER_REPLICA * 0.95


def need_sla(rate):
    """Replicas gpuscaler sizes for a demand of `rate` req/s from the SLA."""
    return int(math.ceil(rate / SLA_DEMAND_PER_REPLICA - 1e-9))


LC = None
SCALERS = []
FIGURES = {}
T_START = time.monotonic()

# ---------------------------------------------------------------- measurement helpers


def wait_for(pred, timeout, interval=0.1, what="condition"):
    end = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = pred()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - transient errors while polling
            last = e
        if time.monotonic() > end:
            raise AssertionError("timed out after %.0fs waiting for %s (last: %r)"
                                 % (timeout, what, last))
        time.sleep(interval)


def iso_ts(s):
    s = s.rstrip("Z")
    fmt = "%Y-%m-%dT%H:%M:%S.%f" if "." in s else "%Y-%m-%dT%H:%M:%S"
    return datetime.datetime.strptime(s, fmt).replace(
        tzinfo=datetime.timezone.utc).timestamp()


def p99(lat):
    return P.percentile(sorted(lat), 0.99) if lat else None


def fmt_ms(v):
    return "-" if v is None else "%.0f ms" % v


class Load:
    """A LoadRun with wall-clock helpers (per-request arrival times from the raw records)."""

    def __init__(self, run):
        self.run = run
        self._raw = None

    def start_wall(self):
        ivs = wait_for(self.run.intervals, 10, what="the load generator's first interval")
        return ivs[0]["ts"] - ivs[0]["t"]

    def raw(self):
        if self._raw is None or self.run.running():
            t0 = self.start_wall()
            self._raw = [dict(r, ts=t0 + r["t_arrival"]) for r in self.run.raw()]
        return self._raw

    def p99(self, a=None, b=None):
        """p99 (ms) of the requests that arrived in [a, b) (wall clock)."""
        return p99([r["latency_ms"] for r in self.raw()
                    if (a is None or r["ts"] >= a) and (b is None or r["ts"] < b)])

    def count(self, a=None, b=None):
        return len([1 for r in self.raw() if (a is None or r["ts"] >= a) and
                    (b is None or r["ts"] < b)])

    def compliant_since(self, after, step=1.0):
        """Start of the first 1 s arrival window (at or after `after`) from which every window
        to the end has p99 < SLA; None when the last window is over it."""
        recs = [r for r in self.raw() if r["ts"] >= after]
        if not recs:
            return None
        end = max(r["ts"] for r in recs)
        n = int((end - after) // step) + 1
        wins = [[] for _ in range(n)]
        for r in recs:
            wins[min(n - 1, int((r["ts"] - after) // step))].append(r["latency_ms"])
        since = None
        for i in range(n - 1, -1, -1):
            if wins[i] and p99(wins[i]) >= SLA_MS:
                break
            since = after + i * step
        return since

    def recent_ok(self, seconds):
        """Completed intervals of the last `seconds` all under the SLA (and some requests)."""
        ivs = [iv for iv in self.run.intervals()][-int(seconds):]
        return len(ivs) >= int(seconds) and all(
            iv["p99_ms"] is not None and iv["p99_ms"] < SLA_MS for iv in ivs)

    def k6(self):
        """One line in the terms of k6's end-of-test summary and the scripts' thresholds."""
        s = self.run.summary
        d = s["http_req_duration_ms"]
        th = ", ".join("%s %s" % (e, "ok" if ok else "FAILED")
                       for m in s["thresholds"].values() for e, ok in m.items())
        return ("k6-style: http_reqs=%d (%.1f/s) http_req_duration p(90)=%.0fms p(95)=%.0fms "
                "p(99)=%.0fms max=%.0fms http_req_failed=%.2f%% dropped_iterations=%d; "
                "thresholds: %s"
                % (s["http_reqs"], s["achieved_rps"], d["p(90)"], d["p(95)"], d["p(99)"],
                   d["max"], 100 * s["http_req_failed_rate"], s["dropped_iterations"], th))


def start_load(name, stages, start_rps, seed, profile="stages", lc=None, **kw):
    run = (lc or LC).start_load(name, profile=profile, stages=stages, start_rps=start_rps,
                                interval=1, concurrency=600, sla_ms=int(SLA_MS),
                                max_error_rate=MAX_ERROR_RATE, seed=seed, raw=True, timeout=30,
                                **kw)
    return Load(run)


def history(name, lc=None):
    return (lc or LC).replica_history(name)


def value_at(hist, ts, key):
    v = 0
    for h in hist:
        if h["ts"] <= ts:
            v = h[key]
        else:
            break
    return v


def gpu_seconds(hist, a, b, gpus=1):
    """Integral of status.replicas x GPUs over [a, b] (wall clock): GPUs held, including pods
    in their cold start."""
    total, t, v = 0.0, a, value_at(hist, a, "replicas")
    for h in hist:
        if a < h["ts"] < b:
            total += v * (h["ts"] - t)
            t, v = h["ts"], h["replicas"]
    return (total + v * (b - t)) * gpus


def spec_changes(hist, a=None, b=None):
    """[(ts, spec)] each time spec.replicas changed within [a, b]."""
    out, last = [], None
    for h in hist:
        if h["spec"] != last:
            if (a is None or h["ts"] >= a) and (b is None or h["ts"] <= b):
                out.append((h["ts"], h["spec"]))
            last = h["spec"]
    return out


def reversals(values):
    """Direction changes in a sequence of replica counts (a flap is up then down or down then
    up)."""
    dirs = []
    for x, y in zip(values, values[1:]):
        if y != x:
            d = 1 if y > x else -1
            if not dirs or dirs[-1] != d:
                dirs.append(d)
    return max(0, len(dirs) - 1)


def first_ts(hist, pred):
    for h in hist:
        if pred(h):
            return h["ts"]
    return None


def scale_writes(since=0, name=None):
    """PATCH/PUT of deployments/*/scale seen by the fake API server."""
    reqs, _ = LC.fk.requests(since)
    return [r for r in reqs if r.get("resource") == "deployments" and
            r.get("subresource") == "scale" and r.get("verb") in ("patch", "update") and
            (name is None or r.get("name") == name)]


def request_seq():
    _, nxt = LC.fk.requests(10 ** 12)
    return nxt


def record(scenario, **figs):
    FIGURES.setdefault(scenario, {}).update(figs)
    print("  [%s] %s" % (scenario, ", ".join("%s=%s" % kv for kv in figs.items())), flush=True)


# ---------------------------------------------------------------- gpuscaler processes

class Scaler:
    """One `gpuscaler run` with its own kubeconfig (a ServiceAccount-like token user), config
    file, metrics port and JSON log; stopped by PID."""

    def __init__(self, tag, config=None, kubeconfig=None, ident=None, extra=(), lc=None):
        lc = lc or LC
        self.tag = tag
        self._metrics_port = None
        self.log = os.path.join(lc.state_dir, "gpuscaler-%s.log" % tag)
        cfg = os.path.join(lc.state_dir, "gpuscaler-%s.yaml" % tag)
        with open(cfg, "w") as f:
            json.dump(config or CONFIG, f, indent=1)     # JSON is YAML
        self.cmd = [BIN, "run", "--kubeconfig", kubeconfig or KUBECONFIG, "--config", cfg,
                    "--namespace", NS, "--metrics-addr", "127.0.0.1:0",
                    "--health-addr", "127.0.0.1:0",
                    "--id", ident or "gpuscaler-" + tag] + list(extra)
        env = {k: v for k, v in os.environ.items() if k not in ("POD_NAMESPACE", "POD_NAME",
                                                                 "KUBECONFIG")}
        self.log_offset = log_size(self.log)
        self.proc = procs.spawn(self.cmd, self.log, env=env)
        self.pid = self.proc.pid
        SCALERS.append(self)

    @property
    def metrics_port(self):
        """The metrics listener's port, bound on port 0 and read from the log once served."""
        if self._metrics_port is None:
            self._metrics_port = logged_port(self.log, self.proc, "metrics", self.log_offset)
        return self._metrics_port

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM):
        if sig == signal.SIGKILL:
            if self.alive():
                os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(5)
            return self.proc.returncode
        return procs.stop(self.proc, 8, sig)

    def text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def lines(self):
        out = []
        for ln in self.text().splitlines():
            try:
                out.append(json.loads(ln))
            except ValueError:
                pass
        return out

    def decisions(self, name):
        """[(ts, reason, message)] of the decisions logged for a Deployment (logged when the
        reason or the count changes, and for every action)."""
        out = []
        for d in self.lines():
            if d.get("deployment") != name:
                continue
            reason, _, _ = d.get("msg", "").partition(":")
            if reason in REASONS:
                out.append((iso_ts(d["time"]), reason, d["msg"]))
        return out

    def metrics(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port,
                                        timeout=5) as r:
                return r.read().decode()
        except OSError as e:
            # say why: the process gone (its exit status and last log lines) or not listening
            tail = "\n".join(self.text().splitlines()[-30:])
            raise AssertionError("gpuscaler %s: /metrics on port %d: %s (%s); log tail:\n%s"
                                 % (self.tag, self.metrics_port, e,
                                    "running" if self.alive() else
                                    "exited with %s" % self.proc.poll(), tail)) from e

    def metric(self, name, labels=None):
        """Value of one sample (labels: dict that must match exactly the given pairs)."""
        for ln in self.metrics().splitlines():
            if ln.startswith("#"):
                continue
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", ln)
            if not m or m.group(1) != name:
                continue
            lab = dict(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            if all(lab.get(k) == v for k, v in (labels or {}).items()):
                return float(m.group(4))
        return None

    def healthy(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.metrics_port,
                                        timeout=3) as r:
                return r.status == 200
        except OSError:
            return False


def add_identity(user, tag, lc=None):
    """A bearer token for `user` and a kubeconfig with it (verifying the fake's CA)."""
    lc = lc or LC
    token = "%s-%s" % (tag, os.urandom(8).hex())
    lc.fk.add_token(token, user, ["system:serviceaccounts", "system:authenticated"])
    return fkh.write_kubeconfig(os.path.join(lc.state_dir, "kubeconfig-%s.yaml" % tag),
                                lc.fk.url, ca_file=lc.fk.pki["ca"], token=token, namespace=NS)


KUBECONFIG = None


def setUpModule():
    global LC, KUBECONFIG
    if not os.access(BIN, os.X_OK):
        raise unittest.SkipTest("gpuscaler binary not found at %s (set GPUSCALER_BIN)" % BIN)
    # LocalCluster starts fakekube with the harness defaults; the HPA scenario also needs the
    # front-proxy PKI and a fast aggregator resync, so add them to that one call.
    orig = fkh.start

    def start_fk(**kw):
        kw.update(front_proxy=True, aggregator_resync="1s")
        return orig(**kw)
    fkh.start = start_fk
    lo, hi = octet_range()
    octet = random.randint(lo, hi - 1)   # and octet + 1 for scenario 2's cluster
    try:
        LC = LocalCluster(namespace=NS, ip_prefix="127.%d" % octet,
                          bookmark_interval="1s").start()
    finally:
        fkh.start = orig
    KUBECONFIG = add_identity(GS_USER, "gpuscaler")
    if "test_2_daily_peak_predictive_vs_reactive" in selected():
        DAILY["thread"] = threading.Thread(target=run_daily_peak,
                                           args=("127.%d" % (octet + 1),),
                                           name="scenario-2", daemon=True)
        DAILY["thread"].start()


def tearDownModule():
    th = DAILY.get("thread")
    if th is not None:
        th.join(240)
    for s in SCALERS:
        try:
            s.stop()
        except Exception:  # noqa: BLE001 - best effort, by PID
            pass
    if LC is not None:
        LC.stop()
    print("\nclosed-loop figures (last run):")
    for k in sorted(FIGURES):
        print("  %s: %s" % (k, json.dumps(FIGURES[k], sort_keys=True)))
    print("closed-loop: whole file took %.1fs" % (time.monotonic() - T_START), flush=True)


# ---------------------------------------------------------------- scenario 2, measured aside

DAILY = {}


def run_daily_peak(ip_prefix):
    """Scenario 2's measurement on a second local cluster, in a thread: the forecaster's
    buckets are clock minutes (1 min, fixed) and its season at least 1 h, so a day cannot be
    replayed in 90 s and its peak must start on a minute boundary; waiting for that boundary
    runs beside scenarios 1, 3, 4.  History: two earlier 1 h "days" (60 one-minute buckets
    each, +-4 % noise, observed every 2 s) go through the real forecaster
    (e2e/tools/forecast-history) into the checkpoint ConfigMap; gpuscaler restores it, with
    the plans the history resolved, so its plan is trusted from the start.  The live replay is the afternoon shoulder (0.4 x peak) and the onset of the 4 PM
    peak, the same load to both Deployments."""
    lc = gs = None
    try:
        peak, shoulder_frac = 25.0, 0.4
        shoulder = shoulder_frac * peak
        names = ("pred", "react")
        lc = LocalCluster(namespace=NS, ip_prefix=ip_prefix, bookmark_interval="1s").start()
        kubeconfig = add_identity(GS_USER, "gpuscaler", lc)
        # a slow read of the checkpoint (300 ms) must not let the first save overwrite it
        lc.fk.fault({"action": "latency", "ms": 300, "verb": "get", "resource": "configmaps",
                     "count": None})

        def day_shape(minute):       # minute of the 1 h "day": 1 minute = 24 minutes of a day
            hour = minute * 24 / 60.0
            if 16 <= hour < 18:
                return 1.0
            if 7 <= hour < 16:
                return shoulder_frac
            if 18 <= hour < 21:
                return 0.5
            return 0.2
        now = time.time()
        c_now = int(now // 60)
        c_peak = int(math.ceil((now + 22) / 60))      # the next minute at least 22 s away
        t_peak = c_peak * 60.0
        rng = random.Random(7)
        # two "days" of history up to now, observed every 2 s as the controller would
        obs = []
        for k in range(c_now - 120, c_now):
            v = peak * day_shape((k - c_peak + 40) % 60)
            obs += [(k * 60000 + j * 2000, v * (1 + rng.uniform(-0.04, 0.04)))
                    for j in range(30)]
        state = history_state(obs, CAPACITY, "1h")
        cm_name, cm_key = checkpoint_name(NS, "pred")
        lc.client.create("configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm_name,
                         "labels": {"app.kubernetes.io/managed-by": "gpuscaler"}},
            "binaryData": {cm_key: base64.b64encode(state).decode()}}, NS)
        for i, n in enumerate(names):
            lc.create_deployment(n, replicas=need(shoulder), seed=200 + i, annotations=annotations(
                predictive="true" if n == "pred" else "false", seasonality="1h",
                cold_start="5s"), **POD)
            lc.expose(n)
        for n in names:
            lc.wait_ready(n, need(shoulder))
        gs = Scaler("daily", kubeconfig=kubeconfig, lc=lc)
        pre = t_peak - time.time()
        if pre < 10:
            raise AssertionError("setup took too long for this minute's peak (%.1fs left)" % pre)
        stages = [(pre, shoulder), (3, peak), (15, peak), (3, shoulder), (2, shoulder)]
        loads = {n: start_load(n, stages, shoulder, seed=2, lc=lc) for n in names}
        for ld in loads.values():
            ld.run.wait(pre + 60)
        t_end = time.time()
        t0 = min(ld.start_wall() for ld in loads.values())
        t_on = loads["pred"].start_wall() + pre        # where the ramp really began
        restored = [d["msg"] for d in gs.lines() if d.get("deployment") == "pred" and
                    "restored forecaster" in d.get("msg", "")]
        figs = {"peak_at": "+%.1fs after the load started" % (t_on - t0),
                "history": "2 days x 60 one-minute buckets, peak %.0f req/s" % peak,
                "restored": restored[:1]}
        res = {"peak": peak, "shoulder": shoulder, "restored": " ".join(restored)}
        for n in names:
            hist, ld, dec = history(n, lc), loads[n], gs.decisions(n)
            outs = [d for d in dec if d[1] in SCALE_OUT]
            # the sustained clock's start: the last AboveTargetWaiting logged before the
            # first scale-out (a decision is logged when its reason changes)
            waits = [d[0] for d in dec if outs and d[0] <= outs[0][0] and
                     d[1] == "AboveTargetWaiting"]
            t_need = first_ts(hist, lambda h: h["ready"] >= need(peak))
            r = res[n] = dict(
                first_scale_out_s=None if not outs else round(outs[0][0] - t_on, 1),
                first_reason=None if not outs else outs[0][1],
                sustained_s=None if not waits else round(outs[0][0] - waits[-1], 2),
                ready_at_peak=value_at(hist, t_on, "ready"),
                ready_need_s=None if t_need is None else round(t_need - t_on, 1),
                p99_shoulder=ld.p99(t0 + 5, t_on), p99_onset=ld.p99(t_on, t_on + 15),
                p99_peak=ld.p99(t_on, t_on + 18), p99_all=ld.p99(),
                gpu_s=gpu_seconds(hist, t0, t_end),
                replicas=[x for _, x in spec_changes(hist, t0, t_end)],
                error_rate=ld.run.summary["http_req_failed_rate"], k6=ld.k6())
            figs[n] = {"first_scale_out_vs_peak_s": r["first_scale_out_s"],
                       "first_reason": r["first_reason"], "sustained_s": r["sustained_s"],
                       "ready_at_peak": r["ready_at_peak"],
                       "needed_ready_vs_peak_s": r["ready_need_s"],
                       "p99_shoulder": fmt_ms(r["p99_shoulder"]),
                       "p99_first_15s_of_peak": fmt_ms(r["p99_onset"]),
                       "p99_peak": fmt_ms(r["p99_peak"]), "p99_run": fmt_ms(r["p99_all"]),
                       "gpu_seconds": round(r["gpu_s"], 1), "replicas": r["replicas"]}
        p, r = res["pred"], res["react"]
        figs["gpu_seconds_pred_minus_react"] = round(p["gpu_s"] - r["gpu_s"], 1)
        figs["p99_onset_react_minus_pred_ms"] = round(r["p99_onset"] - p["p99_onset"])
        res["figures"] = figs
        DAILY["result"] = res
    except BaseException:  # noqa: BLE001 - reported by test_2
        DAILY["error"] = traceback.format_exc()
    finally:
        if gs is not None:
            gs.stop()
        if lc is not None:
            lc.stop()


def stand_in(name, stop, tick=5.0, window=30.0, per_pod=8.0):
    """The trivial stand-in autoscaler of scenario 8: every `tick` s, replicas =
    ceil(completions over the last `window` s / per_pod), from the ready pods' own counters
    (fakeserve's state), written through /scale."""
    samples = []  # (t, total successes of the pods seen)
    while not stop.wait(tick):
        try:
            total = sum(LC.pod_state(p)["success"] for p in LC.ready_pods(name))
        except Exception:  # noqa: BLE001 - a pod went away mid-read: next tick
            continue
        now = time.time()
        samples.append((now, total))
        old = [x for x in samples if x[0] >= now - window]
        if len(old) < 2 or old[-1][0] - old[0][0] <= 0:
            continue
        rate = max(0.0, (old[-1][1] - old[0][1]) / (old[-1][0] - old[0][0]))
        want = max(1, min(8, int(math.ceil(rate / per_pod - 1e-9))))
        try:
            if LC.deployment(name)["spec"]["replicas"] != want:
                LC.scale(name, want)
        except Exception:  # noqa: BLE001 - transient API error: next tick
            pass


# ---------------------------------------------------------------- scenarios

class ClosedLoop(unittest.TestCase):
    def setUp(self):
        self._t0 = time.monotonic()

    def tearDown(self):
        print("  (%s: %.1fs)" % (self._testMethodName, time.monotonic() - self._t0), flush=True)

    def cleanup_deployment(self, *names):
        def rm():
            for n in names:
                try:
                    LC.delete_deployment(n)
                except Exception:  # noqa: BLE001 - already gone
                    pass
        self.addCleanup(rm)

    def scaler(self, tag, **kw):
        s = Scaler(tag, **kw)
        self.addCleanup(s.stop)
        return s

    # ------------------------------------------------------------ 1
    def test_1_ramp_to_3x_capacity(self):
        """1 replica (10 req/s) at 4 req/s, then a 3 s ramp to 30 req/s = 3x its capacity.

        Why 4: the queueing model lets one replica carry about 5.5 req/s within the 1 s p99,
        and the SLA rule acts on the first tick whose demand (3 s of completions plus the
        backlog's growth) needs more. At a base of 5 that was 1.5 requests of backlog growth
        in 3 s: on a loaded 2-core machine a fake pod starved of CPU for a moment built that
        much, and gpuscaler scaled before the ramp (demand 7.98 req/s, one run of four beside
        two busy loops). At 4 it takes 4.5 (three runs beside two busy loops passed). The base
        load's Poisson arrivals still put about 7 in one second, 3 s after it began, while the
        rate window held idle time (3 req/s): a full CI run scaled on that once in four. The
        last tick's rate now counts only past 3 standard errors of the count's square root
        over the span its scrapes cover (1 s, not the 1.25 s looked back): 10.5 req/s there."""
        name, base, peak, base_s = "ramp", 4.0, 3 * POD_RPS, 6.0
        # with the p99 target, capacity-per-gpu is the pod's saturation throughput and the
        # queueing model sizes the replicas (need_sla)
        LC.create_deployment(name, replicas=1, annotations=annotations(
            p99_latency_target="%dms" % SLA_MS, capacity_per_gpu="%g" % POD_RPS), seed=101,
            **POD)
        self.cleanup_deployment(name)
        LC.expose(name)
        LC.wait_ready(name, 1)
        gs = self.scaler("ramp")
        load = start_load(name, [(base_s, base), (3, peak), (50, peak)], base, seed=1)
        t_ramp = load.start_wall() + base_s
        want = need_sla(peak)
        # stop once the needed capacity is ready and the last 8 s were all within the SLA
        wait_for(lambda: (value_at(history(name), time.time(), "ready") >= want and
                          time.time() > t_ramp + 10 and load.recent_ok(8)) or
                 not load.run.running(), 62, interval=0.5, what="SLA compliance after the ramp")
        load.run.stop()
        load.run.wait(40)
        t_end = time.time()
        hist = history(name)
        dec = gs.decisions(name)
        outs = [d for d in dec if d[1] in SCALE_OUT]
        self.assertTrue(outs, "no scale-out at all:\n%s" % dec)
        reaction = outs[0][0] - t_ramp
        t_cap = first_ts(hist, lambda h: h["ts"] > t_ramp and h["ready"] >= want)
        t_ok = load.compliant_since(t_ramp)
        changes = spec_changes(hist, t_ramp - base_s, t_end)
        figs = dict(
            reaction_s=round(reaction, 1),
            first_scale=outs[0][2].split(": ", 1)[1],
            first_target=int(re.search(r"-> (\d+)", outs[0][2]).group(1)),
            # what was asked for once the rate window (3 s) has seen the ramp's peak: sized
            # from arrivals it is need (6); from the saturated completions (10 req/s) it is 2
            target_after_ramp=value_at(hist, t_ramp + 3 + RATE_WINDOW + 0.5, "spec"),
            needed_ready_after_s=None if t_cap is None else round(t_cap - t_ramp, 1),
            time_to_compliance_s=None if t_ok is None else round(t_ok - t_ramp, 1),
            p99_base=fmt_ms(load.p99(t_ramp - base_s, t_ramp)),
            p99_until_capacity=fmt_ms(load.p99(t_ramp, t_cap)),
            p99_capacity_to_compliance=fmt_ms(load.p99(t_cap, t_ok)),
            p99_after_compliance=fmt_ms(load.p99(t_ok, None)),
            replicas=[s for _, s in changes], peak_replicas=max(s for _, s in changes),
            needed=want, gpu_seconds=round(gpu_seconds(hist, t_ramp, t_end), 1),
            gpu_seconds_at_need=round(want * (t_end - t_ramp), 1),
            flaps=reversals([s for _, s in changes]), error_rate=load.run.summary[
                "http_req_failed_rate"])
        record("1-ramp-3x", **figs)
        print("  " + load.k6())
        # bounds
        pre = [d for d in dec if d[0] < t_ramp]
        self.assertFalse([d for d in pre if d[1] in SCALE_OUT], "scaled before the ramp")
        self.assertLess(load.p99(t_ramp - base_s + 2, t_ramp), SLA_MS,
                        "the SLA must hold at the base load (else the setting is wrong)")
        # sized from the SLA: the demand's need acts once it held for a decision interval (two
        # ticks of 1 s, the first of which may come just after the ramp began), not after the
        # sustained window
        self.assertGreaterEqual(reaction, 0.5, "scaled before the demand was confirmed")
        self.assertLessEqual(reaction, SCALE_OUT_AFTER + RATE_WINDOW + 3.0)
        self.assertIsNotNone(t_cap, "never reached %d ready replicas" % want)
        self.assertLessEqual(t_cap - t_ramp, 30.0)
        self.assertGreater(load.p99(t_ramp, t_cap), SLA_MS,
                           "the ramp did not overload the single replica")
        self.assertIsNotNone(t_ok, "p99 never came back under the SLA")
        # once the capacity is ready, the backlog queued on the old pods drains: bounded
        self.assertLessEqual(t_ok - t_cap, 25.0)
        self.assertLess(load.p99(t_ok, None), SLA_MS)
        self.assertGreaterEqual(t_end - t_ok, 6.0, "too short a compliant tail to judge")
        self.assertLessEqual(figs["peak_replicas"], 8)
        self.assertLess(load.run.summary["http_req_failed_rate"], MAX_ERROR_RATE)
        self.assertTrue(gs.alive())

    def test_1b_ramp_sizing_follows_demand(self):
        """Scenario 1's run: once the rate window has seen the 3 s ramp's peak, the ask covers
        the offered load (at least need - 1 replicas), not the saturated completion rate (which
        asks for 2), and the peak stays within need + 2.  The first scale-out itself comes a
        tick into the ramp and sizes for what the ramp has reached by then; the newest 1.25 s
        of arrivals count before the window only when they are 3 standard errors above it,
        which at 30 req/s over 1.25 s is 15 req/s.  The peak's
        allowance is the queue's drain: with a 3 s cold start the look-ahead is 4 s, and
        draining the 60-odd requests queued by then within it asks 15 req/s more, 2-3 replicas
        above need, which go once the queue is gone.  (A new pod's queue, sent it by the
        Service while it warmed up, used to count as one tick's arrivals when the pod was first
        counted: 50 req/s where 30 arrive, and asks for 10 capped at max-replicas 8.  The
        backlog now sums every pod scraped lately, warming ones included.)"""
        f = FIGURES.get("1-ramp-3x")
        if not f or "target_after_ramp" not in f:
            self.skipTest("scenario 1 did not produce its figures")
        self.assertGreaterEqual(f["target_after_ramp"], f["needed"] - 1,
                                "scale-out sized from the saturated completion rate")
        self.assertLessEqual(f["peak_replicas"], f["needed"] + 2,
                             "overshoot from the backlog's drain rate")

    # ------------------------------------------------------------ 2
    def test_2_daily_peak_predictive_vs_reactive(self):
        """A synthetic day (1 h season, the minimum gpuscaler.io/seasonality) whose 4-6 PM peak
        is 2.5x the afternoon: two earlier days are the forecaster's history, the live replay is
        the afternoon shoulder and the onset of the peak, to two Deployments side by side with
        the same load: predictive "true" and "false".  Measured on its own local cluster in a
        thread started with the module (the peak must start on a clock minute, see
        run_daily_peak); asserted here."""
        th = DAILY.get("thread")
        self.assertIsNotNone(th, "scenario 2 was not started")
        th.join(240)
        self.assertFalse(th.is_alive(), "scenario 2 still running after 240 s")
        if DAILY.get("error"):
            self.fail("scenario 2 failed while measuring:\n" + DAILY["error"])
        res = DAILY["result"]
        for n in ("pred", "react"):
            print("  %s: %s" % (n, res[n]["k6"]))
        record("2-daily-peak", **res["figures"])
        p, r = res["pred"], res["react"]
        peak, shoulder = res["peak"], res["shoulder"]
        self.assertIn("(119 buckets of history)", res["restored"],
                      "the forecaster history was not restored")
        # predictive: capacity before the peak, from the forecast
        self.assertEqual(p["first_reason"], "PredictiveScaleOut")
        self.assertLess(p["first_scale_out_s"], 0, "the predictive policy did not act ahead")
        self.assertGreater(p["first_scale_out_s"], -(5 + 1 + 4),
                           "acted earlier than one look-ahead (cold-start 5s + 1 interval)")
        self.assertGreaterEqual(p["ready_at_peak"], need(peak) - 1)
        self.assertIsNotNone(p["ready_need_s"])
        self.assertLessEqual(p["ready_need_s"], 1.0)
        # reactive: only after the load rose, after the sustained window.  Its clock can start
        # a little before the ramp: at the shoulder (0.625 of capacity, Poisson arrivals) a
        # 3 s rate window's mean is over the 0.8 target about 6 % of the time, and the ramp
        # then keeps it there (one CI run scaled out 2.6 s after the ramp began, 3 s after
        # its clock started).  So the window is checked against the clock's own start.
        self.assertIn(r["first_reason"], ("ScaledOut", "LatencyScaleOut"))
        self.assertGreaterEqual(r["first_scale_out_s"], SCALE_OUT_AFTER - 1.5,
                                "the reactive policy acted ahead of the ramp")
        if r["first_reason"] == "ScaledOut":
            self.assertIsNotNone(r["sustained_s"], "no AboveTargetWaiting before ScaledOut")
            self.assertGreaterEqual(r["sustained_s"], SCALE_OUT_AFTER - 0.2,
                                    "scaled out before the sustained window")
        self.assertEqual(r["ready_at_peak"], need(shoulder))
        # the difference the user sees
        self.assertLess(p["p99_onset"], SLA_MS, "predictive missed the SLA at the peak onset")
        self.assertGreater(r["p99_onset"], p["p99_onset"])
        for x in (p, r):
            self.assertLess(x["p99_shoulder"], SLA_MS)
            self.assertLess(x["error_rate"], MAX_ERROR_RATE)
        # predictive pays for its head start, boundedly
        self.assertLess(p["gpu_s"], 1.5 * r["gpu_s"])

    # ------------------------------------------------------------ 3
    def test_3_load_drop_scale_in_stepwise(self):
        """4 replicas at 20 req/s (5 req/s per GPU, inside the band), then the load drops to
        4 req/s: one scale-in step per full 10 s window, 4 -> 2 -> 1, no flapping."""
        name, high, low, high_s = "drop", 20.0, 4.0, 6.0
        LC.create_deployment(name, replicas=4, annotations=annotations(), seed=301, **POD)
        self.cleanup_deployment(name)
        LC.expose(name)
        LC.wait_ready(name, 4)
        gs = self.scaler("drop")
        load = start_load(name, [(high_s, high), (0.5, low), (60, low)], high, seed=3)
        t_drop = load.start_wall() + high_s
        wait_for(lambda: (value_at(history(name), time.time(), "ready") == 1 and
                          value_at(history(name), time.time(), "replicas") == 1) or
                 not load.run.running(), 50, interval=0.3, what="scale-in to 1")
        time.sleep(2.0)          # would a flap follow?
        load.run.stop()
        load.run.wait(30)
        t_end = time.time()
        hist = history(name)
        changes = spec_changes(hist, load.start_wall(), t_end)
        ins = [(ts, s) for ts, s in changes]
        steps = [round(ts - t_drop, 1) for ts, _ in ins]
        seq = [4] + [s for _, s in ins]
        figs = dict(replicas=seq, step_times_after_drop_s=steps,
                    gaps_between_steps_s=[round(b - a, 1) for a, b in zip(steps, steps[1:])],
                    flaps=reversals(seq), p99_high=fmt_ms(load.p99(None, t_drop)),
                    p99_during_scale_in=fmt_ms(load.p99(t_drop, None)),
                    gpu_seconds_after_drop=round(gpu_seconds(hist, t_drop, t_end), 1),
                    gpu_seconds_if_held=round(4 * (t_end - t_drop), 1),
                    error_rate=load.run.summary["http_req_failed_rate"])
        record("3-load-drop", **figs)
        print("  " + load.k6())
        self.assertEqual(reversals(seq), 0, "flapped: %s" % seq)
        self.assertEqual(seq, sorted(seq, reverse=True))
        self.assertEqual(seq[-1], 1)
        self.assertGreaterEqual(len(ins), 2, "not stepwise: %s" % seq)
        self.assertGreaterEqual(steps[0], SCALE_IN_AFTER, "scaled in before the window")
        self.assertLessEqual(steps[0], SCALE_IN_AFTER + RATE_WINDOW + 3)
        for a, b in zip(steps, steps[1:]):
            self.assertGreaterEqual(b - a, SCALE_IN_AFTER - 0.5, "a step without a full window")
        self.assertFalse([d for d in gs.decisions(name) if d[1] in SCALE_OUT])
        self.assertLess(load.p99(), SLA_MS, "scale-in hurt the SLA")
        self.assertLess(load.run.summary["http_req_failed_rate"], MAX_ERROR_RATE)

    # ------------------------------------------------------------ 4
    def test_4_faults(self):
        """API server restart mid-watch, 410 (compaction + dropped watches), a 409 on the scale
        patch and a 429 storm while the load needs a scale-out, then pods whose metrics hang
        or are garbage while the load falls: gpuscaler stays up, holds instead of scaling in,
        and converges after recovery."""
        name, base, high, low = "faulty", 9.0, 22.0, 3.0
        fk = LC.fk
        LC.create_deployment(name, replicas=2, annotations=annotations(), seed=401, **POD)
        self.cleanup_deployment(name)
        LC.expose(name)
        LC.wait_ready(name, 2)
        gs = self.scaler("faults")
        self.addCleanup(fk.clear_faults)
        seq0 = request_seq()
        load = start_load(name, [(300, base)], base, seed=4, profile="stages")
        self.addCleanup(lambda: load.run.running() and load.run.stop())
        wait_for(lambda: [d for d in gs.decisions(name) if d[1] == "WithinBand"], 15,
                 what="a first decision within the band")
        # (a) restart the API server under the open watches (they break, reconnect and
        # resume from their resourceVersion)
        t_restart = time.time()
        fk.restart(delay=1.0)
        time.sleep(1.0)
        # (b) 410: while gpuscaler cannot watch (its watch requests fail), the Deployment
        # changes (min-replicas 2 -> 3) and history is compacted past what it saw; its watch
        # resumes from a resourceVersion that is gone: 410 Expired, relist, and the change
        # must still take effect
        block = fk.fault({"action": "error", "status": 500, "user": GS_USER,
                          "verb": ["list", "watch"], "count": None})[0]
        fk.drop_watches()
        time.sleep(0.5)
        LC.client.patch("deployments", name, {"metadata": {"annotations": {
            "gpuscaler.io/min-replicas": "3"}}}, NS)
        fk.compact()
        t_410 = time.time()
        fk.admin("DELETE", "/fake/faults?id=%d" % block["id"])
        # the watch's retries back off as client-go's reflector's do (0.8 s doubling, with
        # jitter, up to 30 s), and the restart and the block fail several: 8.4 s in local
        # runs, one more doubling on a loaded CI machine went past the 15 s this waited
        wait_for(lambda: LC.deployment(name)["spec"]["replicas"] == 3, 35,
                 what="the change made while the watch was gone (min-replicas 3)")
        t_clamped = time.time()
        # (b) load up; the first scale patch answers 409, and a 429 storm on everything
        # gpuscaler sends covers the moment it wants to scale
        fk.fault({"action": "error", "status": 409, "verb": "patch", "resource": "deployments",
                  "subresource": "scale", "name": name, "user": GS_USER, "count": 1})
        loadset = start_load(name, [(300, high - base)], high - base, seed=44)
        self.addCleanup(lambda: loadset.run.running() and loadset.run.stop())
        t_up = loadset.start_wall()
        time.sleep(1.5)
        storm = fk.fault({"action": "error", "status": 429, "retryAfter": 1, "user": GS_USER,
                          "count": None})[0]
        t_storm = time.time()
        time.sleep(6.0)
        fk.admin("DELETE", "/fake/faults?id=%d" % storm["id"])
        t_storm_end = time.time()
        want = need(high)
        wait_for(lambda: LC.deployment(name)["spec"]["replicas"] >= want, 25,
                 what="the scale-out after the faults")
        t_scaled = time.time()

        def settled():      # spec unchanged for 2 s and every replica ready
            h = history(name)
            return (h and time.time() - h[-1]["ts"] > 2.0 and
                    h[-1]["ready"] == h[-1]["spec"] == h[-1]["replicas"]) and h[-1]["spec"]
        held = wait_for(settled, 20, what="the scale-out settled")
        self.assertTrue(gs.alive(), "gpuscaler died")
        # (c) metrics: one pod hangs, one answers garbage (2 of 4 > missing-fraction 0.3),
        # and the load falls far below the scale-in threshold for longer than the window
        pods = sorted(LC.ready_pods(name), key=lambda p: p["metadata"]["name"])
        LC.fault(pods[0], metrics="hang")
        LC.fault(pods[1], metrics="garbage")
        t_mfault = time.time()
        loadset.run.stop()
        load.run.stop()
        low_load = start_load(name, [(300, low)], low, seed=45)
        self.addCleanup(lambda: low_load.run.running() and low_load.run.stop())
        spec_during = []
        while time.time() < t_mfault + SCALE_IN_AFTER + RATE_WINDOW:
            spec_during.append(LC.deployment(name)["spec"]["replicas"])
            time.sleep(0.5)
        held_reasons = sorted({d[1] for d in gs.decisions(name) if d[0] >= t_mfault})
        # (d) recovery: metrics back, gpuscaler scales in after a full window
        for p in pods[:2]:
            LC.fault(p, metrics="none")
        t_rec = time.time()
        wait_for(lambda: LC.deployment(name)["spec"]["replicas"] < held, SCALE_IN_AFTER + 15,
                 what="scale-in once the metrics are back")
        t_in = time.time()
        low_load.run.stop()
        for ld in (load, loadset, low_load):
            ld.run.wait(30)
        hist = history(name)
        reqs, _ = fk.requests(seq0)
        mine = [r for r in reqs if r.get("user") == GS_USER]
        patches = [r for r in mine if r.get("subresource") == "scale" and r["verb"] == "patch"]
        relists = [r for r in mine if r["verb"] == "list" and r["time"] > t_410 and
                   r.get("resource") in ("deployments", "pods")]
        figs = dict(
            min_replicas_change_seen_after_s=round(t_clamped - t_410, 1),
            scale_out_after_load_up_s=round(t_scaled - t_up, 1),
            storm_s=round(t_storm_end - t_storm, 1),
            answered_429=len([r for r in mine if r["status"] == 429]),
            scale_patches={str(s): len([r for r in patches if r["status"] == s])
                           for s in sorted({r["status"] for r in patches})},
            relists_after_410=len(relists),
            conflicts_metric=gs.metric("gpuscaler_scale_conflicts_total"),
            spec_while_metrics_broken=sorted(set(spec_during)),
            decisions_while_broken=held_reasons,
            scale_in_after_recovery_s=round(t_in - t_rec, 1),
            replicas=[s for _, s in spec_changes(hist, t_restart, time.time())],
            p99_before_faults=fmt_ms(load.p99(None, t_restart)))
        record("4-faults", **figs)
        self.assertTrue(gs.alive() and gs.healthy(), "gpuscaler is not up")
        self.assertTrue([r for r in patches if r["status"] == 409], "the 409 never happened")
        self.assertTrue([r for r in patches if r["status"] == 200])
        self.assertGreaterEqual(figs["answered_429"], 3)
        self.assertTrue(relists, "no relist after the 410")
        self.assertEqual(set(spec_during), {held},
                         "replicas changed while metrics were missing: %s" % spec_during)
        self.assertIn("MetricsUnavailable", held_reasons)
        self.assertFalse([r for r in patches if t_mfault < r["time"] < t_rec],
                         "scaled while metrics were missing")
        self.assertGreaterEqual(t_in - t_rec, SCALE_IN_AFTER - 1.0,
                                "scaled in without a full window of fresh data")
        self.assertLessEqual(t_scaled - t_up, 6.0 + (t_storm_end - t_storm) + 8.0)

    # ------------------------------------------------------------ 5
    def test_5_leader_failover(self):
        """Two instances with leader election (lease 4s, renew deadline 3s, retry 500ms) under
        the k6 peak profile; the leader is killed with SIGKILL while the load climbs."""
        name, peak, dur = "elect", 24.0, 24.0
        lease = "closed-loop"
        cfg = dict(CONFIG, **{"leader-election": {
            "enabled": True, "namespace": NS, "lease-name": lease, "lease-duration": "4s",
            "renew-deadline": "3s", "retry-period": "500ms"}})
        LC.create_deployment(name, replicas=2, annotations=annotations(min_replicas="2"),
                             seed=501, **POD)
        self.cleanup_deployment(name)
        LC.expose(name)
        LC.wait_ready(name, 2)
        users = {"a": GS_USER + "-a", "b": GS_USER + "-b"}
        a = self.scaler("leader-a", config=cfg, ident="loop-a",
                        kubeconfig=add_identity(users["a"], "gpuscaler-a"))
        holder = lambda: (LC.client.get_or_none("leases", lease, NS) or {}).get(  # noqa: E731
            "spec", {}).get("holderIdentity")
        wait_for(lambda: holder() == "loop-a", 15, what="loop-a leading")
        b = self.scaler("leader-b", config=cfg, ident="loop-b",
                        kubeconfig=add_identity(users["b"], "gpuscaler-b"))
        wait_for(lambda: b.metric("gpuscaler_leader") == 0 and a.metric("gpuscaler_leader") == 1,
                 10, what="exactly one leader")
        seq0 = request_seq()
        # the k6 peak.js shape: 0.3 -> 0.5 -> 1.0 x PEAK_RPS, held, and down again
        load = Load(LC.start_load(name, profile="peak", peak_rps=peak, duration="%ds" % dur,
                                  interval=1, concurrency=600, sla_ms=int(SLA_MS),
                                  max_error_rate=MAX_ERROR_RATE, seed=5, raw=True))
        t0 = load.start_wall()
        # kill the leader once the load is above the target (its scale-out clock running)
        wait_for(lambda: [d for d in a.decisions(name) if d[1] == "AboveTargetWaiting"],
                 dur, interval=0.1, what="loop-a seeing the load above the target")
        t_kill = time.time()
        a.stop(signal.SIGKILL)
        wait_for(lambda: holder() == "loop-b", 10, interval=0.05, what="takeover by loop-b")
        t_take = time.time()
        wait_for(lambda: b.metric("gpuscaler_leader") == 1, 5, what="loop-b leader metric")
        load.run.wait(dur + 30)
        t_end = time.time()
        hist = history(name)
        writes = scale_writes(seq0, name)
        by = {k: [w for w in writes if w.get("user") == u] for k, u in users.items()}
        ok = [w for w in writes if w["status"] == 200]
        changes = spec_changes(hist, t0, t_end)
        figs = dict(takeover_s=round(t_take - t_kill, 2), lease_holder_after="loop-b",
                    scale_patches_a=[(round(w["time"] - t_kill, 1), w["status"])
                                     for w in by["a"]],
                    scale_patches_b=[(round(w["time"] - t_kill, 1), w["status"])
                                     for w in by["b"]],
                    replicas=[2] + [s for _, s in changes], needed=need(peak),
                    p99=fmt_ms(load.p99()), p99_before_kill=fmt_ms(load.p99(None, t_kill - 2)),
                    p99_around_failover=fmt_ms(load.p99(t_kill - 2,
                                                                              t_take + 8)),
                    gpu_seconds=round(gpu_seconds(hist, t0, t_end), 1))
        record("5-leader-failover", **figs)
        print("  " + load.k6())
        self.assertLessEqual(t_take - t_kill, 4.0 + 0.5 + 1.0, "takeover slower than the lease")
        self.assertFalse([w for w in by["a"] if w["time"] > t_kill], "a dead leader wrote")
        self.assertFalse([w for w in by["b"] if w["time"] < t_take - 0.5],
                         "the follower wrote while the other instance held the lease")
        specs = [s for _, s in changes]
        # every change of spec.replicas is one successful PATCH of the instance leading at
        # that moment, carrying the target of one of its own decisions: nobody doubled it
        targets = []
        for ts, reason, msg in b.decisions(name):
            m = re.search(r"-> (\d+) replicas", msg)
            if "follower: not acting" in msg:
                continue
            if reason in SCALE_OUT + ("ScaledIn",) and m and ts >= t_take - 1 and \
                    (not targets or targets[-1] != int(m.group(1))):
                targets.append(int(m.group(1)))
        self.assertEqual(len(ok), len(specs), "a scale PATCH without a change, or a change "
                                              "nobody patched: %s %s" % (ok, specs))
        self.assertEqual(specs, targets, "replica changes that no decision of the leader asked "
                                         "for: %s vs %s" % (specs, targets))
        top = specs.index(max(specs)) + 1 if specs else 0
        self.assertEqual(specs[:top], sorted(set(specs[:top])), "flapping: %s" % specs)
        self.assertEqual(reversals([2] + specs), 0 if top == len(specs) else 1)
        self.assertGreaterEqual(max(specs), need(peak), "under-scaled: %s" % specs)
        self.assertTrue(b.alive())
        b.stop()
        spec = LC.client.get("leases", lease, NS)["spec"]
        self.assertEqual(spec.get("holderIdentity") or "", "", "graceful stop keeps the lease")

    # ------------------------------------------------------------ 6
    def test_6_hpa_mode(self):
        """gpuscaler in external-metric mode behind the fake's aggregator; hpaemu (the HPA v2
        controller) scales the Deployment on gpuscaler_desired_replicas, AverageValue 1."""
        try:
            import hpaemu
        except ImportError as e:
            self.skipTest("e2e/hpaemu.py is not available: %s" % e)
        name, base, peak = "hpa", 5.0, 15.0
        fk, c = LC.fk, LC.client
        sysns = "gpuscaler-system"
        if c.get_or_none("namespaces", sysns) is None:
            c.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": sysns}})
        hpa_client = Client.from_kubeconfig(add_identity(HPA_USER, "hpa"),
                                            user_agent="kube-controller-manager/v1.31.0 hpaemu")
        self.addCleanup(hpa_client.close)
        if c.get_or_none("configmaps", "extension-apiserver-authentication",
                         "kube-system") is None:
            c.create("configmaps", fkh.requestheader_configmap(fk.front_proxy["ca"],
                                                               fk.pki["ca"]), "kube-system")
        pki = os.path.join(LC.state_dir, "serving-pki")
        ca = fkh.make_ca(pki, "serving-ca", "gpuscaler-serving-ca")
        cert, key = fkh.make_cert(pki, ca, "serving", "gpuscaler", usage="serverAuth",
                                  dns=("gpuscaler.%s.svc" % sysns,), ips=("127.0.0.1",))
        c.create("services", {"apiVersion": "v1", "kind": "Service",
                              "metadata": {"name": "gpuscaler"},
                              "spec": {"selector": {"app": "gpuscaler"}, "ports": [
                                  {"name": "https", "port": 443, "targetPort": 6443}]}}, sysns)
        with open(ca[0], "rb") as f:
            bundle = base64.b64encode(f.read()).decode()
        apisvc = "v1beta1.external.metrics.k8s.io"
        c.create("apiservices", {
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": apisvc},
            "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1",
                     "service": {"namespace": sysns, "name": "gpuscaler", "port": 443},
                     "caBundle": bundle, "groupPriorityMinimum": 100, "versionPriority": 100}})
        self.addCleanup(lambda: c.delete("apiservices", apisvc))
        LC.create_deployment(name, replicas=1, seed=601, annotations=annotations(
            mode="external-metric"), **POD)
        self.cleanup_deployment(name)
        LC.expose(name)
        LC.wait_ready(name, 1)
        # Scrapes every 1 s, not 0.5 s: with 0.5 s the last tick counts arrivals over about
        # 1 s (a standard error of 4 req/s at 15), and while the one ready replica is short the
        # demand stage sizes on that count (docs/policy.md, "Demand"). One CI run asked 5 for a
        # need of 3 and then scaled in, most likely on such a count (its log is gone). Over
        # 2 s, as in scenario 8, the standard error is 0.7x that.
        cfg = dict(CONFIG, scrape={"interval": "1s", "timeout": "1s",
                                   "rate-window": "%ds" % RATE_WINDOW})
        gs = self.scaler("hpa", config=cfg, extra=[
            "--external-metrics=true", "--external-metrics-addr", "127.0.0.1:0",
            "--tls-cert-file", cert, "--tls-key-file", key])
        # the Service's endpoint once the pod serves, as its readiness would publish it
        fk.set_service_endpoint(sysns, "gpuscaler", "127.0.0.1:%d" % logged_port(
            gs.log, gs.proc, "extmetrics", gs.log_offset))

        def available():
            st = c.get("apiservices", apisvc).get("status") or {}
            return any(x["type"] == "Available" and x["status"] == "True"
                       for x in st.get("conditions") or [])
        wait_for(available, 20, what="the APIService Available")
        c.create("horizontalpodautoscalers", {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": name},
                     "minReplicas": 1, "maxReplicas": 8,
                     "metrics": [{"type": "External", "external": {
                         "metric": {"name": "gpuscaler_desired_replicas",
                                    "selector": {"matchLabels": {"deployment": name}}},
                         "target": {"type": "AverageValue", "averageValue": "1"}}}],
                     "behavior": {
                         "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                     "policies": [{"type": "Percent", "value": 1000,
                                                   "periodSeconds": 15}]},
                         "scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                       "policies": [{"type": "Percent", "value": 100,
                                                     "periodSeconds": 15}]}}}}, NS)
        self.addCleanup(lambda: c.delete("horizontalpodautoscalers", name, NS))
        hpa = hpaemu.HPAController(hpa_client, NS, name, sync_period=1.0).start()
        self.addCleanup(hpa.stop)
        seq0 = request_seq()
        base_s = 6.0
        load = start_load(name, [(base_s, base), (3, peak), (45, peak)], base, seed=6)
        t_ramp = load.start_wall() + base_s
        labels = {"namespace": NS, "deployment": name}

        def converged():
            want = gs.metric("gpuscaler_desired_replicas", labels)
            d = LC.deployment(name)
            st = d.get("status") or {}
            return (time.time() > t_ramp + 5 and want is not None and want >= need(peak) and
                    d["spec"]["replicas"] == want and st.get("readyReplicas") == want and
                    load.recent_ok(5)) and want
        # converged, and staying there for 3 s (a count still moving is not converged); the
        # assertions below then allow no reversal and no count past need + 2
        wants, deadline = [], time.time() + 60
        while True:
            want = wait_for(converged, 50, interval=0.5, what="the HPA converging on gpuscaler")
            wants.append(want)
            time.sleep(3.0)
            t_conv = time.time()
            final = LC.deployment(name)["spec"]["replicas"]
            desired = gs.metric("gpuscaler_desired_replicas", labels)
            if final == want or time.time() > deadline:
                break
        load.run.stop()
        load.run.wait(30)
        t_end = time.time()
        hist = history(name)
        writes = scale_writes(seq0, name)
        hpa_st = c.get("horizontalpodautoscalers", name, NS).get("status") or {}
        recs = hpa.records()
        figs = dict(gpuscaler_desired=desired, deployment_replicas=final, converged_on=wants,
                    hpa_desired=hpa_st.get("desiredReplicas"),
                    converged_after_ramp_s=round(t_conv - 3.0 - t_ramp, 1),
                    replicas=[s for _, s in spec_changes(hist, t_ramp - base_s, t_end)],
                    scale_writes_by_user={u: len([w for w in writes if w.get("user") == u])
                                          for u in sorted({w.get("user") for w in writes})},
                    hpa_syncs=len(recs), hpa_metric_gets=hpa.metric_requests,
                    p99_base=fmt_ms(load.p99(None, t_ramp)),
                    p99_after_convergence=fmt_ms(load.p99(t_conv - 3.0, None)),
                    gpu_seconds=round(gpu_seconds(hist, t_ramp, t_end), 1))
        record("6-hpa-mode", **figs)
        print("  " + load.k6())
        self.assertEqual(final, want)
        self.assertEqual(desired, final, "the HPA did not settle on gpuscaler's count")
        self.assertEqual(hpa_st.get("desiredReplicas"), final)
        self.assertFalse([w for w in writes if w.get("user") == GS_USER],
                         "gpuscaler wrote /scale in external-metric mode")
        self.assertTrue([w for w in writes if w.get("user") == HPA_USER and
                         w["status"] == 200])
        self.assertEqual(reversals([s for _, s in spec_changes(hist, t_ramp, t_end)]), 0)
        # an overshoot stays within need + 2, as scenario 1b's
        self.assertLessEqual(max([s for _, s in spec_changes(hist, t_ramp, t_end)], default=1),
                             need(peak) + 2)
        self.assertLess(load.p99(t_conv - 3.0, None), SLA_MS)

    # ------------------------------------------------------------ 7
    def test_7_prometheus_source(self):
        """The same ramp to two Deployments side by side: one read through a real Prometheus
        (gpuscaler.io/metrics-source: prometheus, 1 s scrape interval, 4 s rate window), one
        scraped directly; the difference of their reaction times is the source's extra lag.
        The default busy-time query answers through Prometheus too (status inService)."""
        if not shutil.which("prometheus"):
            self.skipTest("prometheus is not installed (Debian package prometheus)")
        names, base, peak, base_s = ("promsrc", "scrapesrc"), 5.0, 14.0, 8.0
        prom = LC.start_prometheus(scrape_interval="1s")
        window = "4s"
        sel = 'namespace="{{namespace}}",pod=~"{{pods}}"'
        LC.create_deployment("promsrc", replicas=1, seed=701, annotations=annotations(**{
            "metrics_source": "prometheus",
            "promql_rate": "sum(rate(vllm:request_success_total{%s}[%s]))" % (sel, window),
            "promql_p99": "histogram_quantile(0.99, sum by (le) (rate("
                          "vllm:e2e_request_latency_seconds_bucket{%s}[%s])))" % (sel, window)}),
            **POD)
        LC.create_deployment("scrapesrc", replicas=1, seed=702, annotations=annotations(), **POD)
        self.cleanup_deployment(*names)
        cfg = dict(CONFIG, prometheus={"url": prom})
        gs = self.scaler("prom", config=cfg)
        first = wait_for(lambda: [d for d in gs.decisions("promsrc")], 15,
                         what="a first decision for promsrc")[0]
        if "not available in this build" in first[2]:
            self.skipTest("gpuscaler has no Prometheus metrics source yet: its decision says "
                          "%r (pkg/controller/ctl.c decide() does not call pkg/promql)"
                          % first[2].split(": ", 1)[1])
        for n in names:
            LC.expose(n)
            LC.wait_ready(n, 1)
        loads = {n: start_load(n, [(base_s, base), (3, peak), (40, peak)], base, seed=7)
                 for n in names}
        t_ramp = loads["promsrc"].start_wall() + base_s
        # both reacted and got their first new replica ready
        wait_for(lambda: all(value_at(history(n), time.time(), "ready") >= 2
                             for n in names) or not loads["promsrc"].run.running(), 40,
                 interval=0.5, what="both Deployments scaled out")
        for ld in loads.values():
            ld.run.stop()
            ld.run.wait(30)
        react = {}
        for n in names:
            outs = [d for d in gs.decisions(n) if d[1] in SCALE_OUT and d[0] > t_ramp]
            react[n] = outs[0][0] - t_ramp if outs else None
        figs = {n: dict(reaction_s=None if react[n] is None else round(react[n], 1),
                        p99_after_ramp=fmt_ms(loads[n].p99(t_ramp, None)),
                        replicas=[s for _, s in spec_changes(history(n), t_ramp)])
                for n in names}
        self.assertIsNotNone(react["promsrc"], "no scale-out through Prometheus")
        self.assertIsNotNone(react["scrapesrc"])
        figs["extra_lag_s"] = round(react["promsrc"] - react["scrapesrc"], 1)
        record("7-prometheus-source", **figs)
        self.assertGreaterEqual(react["promsrc"], SCALE_OUT_AFTER)
        self.assertLessEqual(figs["extra_lag_s"], 1.0 + 4.0 + 2.0,
                             "more lag than a scrape interval plus the longer window")
        # the default busy-time query (no promql-busy annotation) answered through the
        # controller: the requests in service came from the pods' busy-time counter
        st = json.loads(LC.deployment("promsrc")["metadata"]["annotations"]
                        .get("gpuscaler.io/status") or "{}")
        self.assertEqual((st.get("capacity") or {}).get("inService"), "busy-time", str(st))


    # ------------------------------------------------------------ 8
    def test_8_step_3x_like_the_real_cluster(self):
        """The step measured on a real control plane: 6 -> 18 req/s on pods of 10 req/s (0.2 s
        service time), 20 s cold start, scale-out-after 20 s, 5 s decision ticks, round-robin
        Services; then the load falls back to 6 req/s.  gpuscaler (predictive, p99 target 2 s)
        on one Deployment, a trivial stand-in autoscaler on the other (every 5 s: replicas =
        ceil(completions over the last 30 s / 8 req/s), from the pods' own counters), the same
        load on both."""
        names, base, step = ("step-gs", "step-si"), 6.0, 18.0
        pod = dict(POD, cold_start=20.0)
        LC.create_deployment("step-gs", replicas=1, seed=801, **pod, annotations=annotations(
            capacity_per_gpu="%g" % POD_RPS, scale_out_after="20s", scale_in_after="10s",
            cold_start="20s", p99_latency_target="2s", predictive="true", max_replicas="8"))
        LC.create_deployment("step-si", replicas=1, seed=802, **pod)
        self.cleanup_deployment(*names)
        for n in names:
            LC.expose(n, policy="round-robin")
        for n in names:
            LC.wait_ready(n, 1, timeout=40)
        cfg = dict(CONFIG, **{"decision-interval": "5s",
                              "scrape": {"interval": "1s", "timeout": "1s",
                                         "rate-window": "10s"}})
        gs = self.scaler("step", config=cfg)
        stop = threading.Event()
        standin = threading.Thread(target=stand_in, args=("step-si", stop), daemon=True)
        standin.start()
        self.addCleanup(stop.set)
        base_s, step_s, fall_s, tail_s = 20.0, 50.0, 10.0, 25.0
        stages = [(base_s, base), (1, step), (step_s, step), (fall_s, base), (tail_s, base)]
        loads = {n: start_load(n, stages, base, seed=8) for n in names}
        for ld in loads.values():
            ld.run.wait(base_s + step_s + fall_s + tail_s + 40)
        stop.set()
        t_step = loads["step-gs"].start_wall() + base_s
        t_fall = t_step + 1 + step_s
        figs = {}
        for n in names:
            hist, ld = history(n), loads[n]
            ch = spec_changes(hist, t_step - base_s, None)
            first = next(((ts, v) for ts, v in ch if ts > t_step - 1), None)
            figs[n] = dict(
                first_write_s=None if first is None else round(first[0] - t_step, 1),
                first_ask=None if first is None else first[1],
                # the asks of the first tick (5 s apart) that saw 4.5 s or more of the step
                asks_4_10s=[v for ts, v in ch if t_step + 4.5 <= ts < t_step + 10.5],
                ask_10s=value_at(hist, t_step + 10.5, "spec"),
                ask_26s=value_at(hist, t_step + 26, "spec"),
                replicas=[v for _, v in ch], peak=max(v for _, v in ch),
                p99_step=ld.p99(t_step, t_fall), p99_all=ld.p99(),
                grew_while_falling=any(b > a for (_, a), (t, b) in zip(ch, ch[1:])
                                       if t > t_fall + 1),
                gpu_s=round(gpu_seconds(hist, t_step - base_s, t_fall + fall_s + tail_s), 1))
        g, si = figs["step-gs"], figs["step-si"]
        record("8-step-3x", **{"gpuscaler": dict(g, p99_step=fmt_ms(g["p99_step"])),
                               "stand-in": dict(si, p99_step=fmt_ms(si["p99_step"])),
                               "pre_step_writes": [v for t, v in spec_changes(
                                   history("step-gs"), None, t_step - 1)][1:]})
        print("  " + loads["step-gs"].k6())
        self.assertTrue(gs.alive())
        # the step's onset is known to the load generator's clock within a fraction of a
        # second: a write in the second before it is the step's
        self.assertEqual([v for t, v in spec_changes(history("step-gs"), None, t_step - 1)],
                         [1], "gpuscaler scaled before the step")
        self.assertIsNotNone(g["first_write_s"], "gpuscaler never scaled out")
        self.assertLessEqual(g["first_write_s"], 26.0)
        # what the step needs (3) is asked for by the first tick (5 s apart) that has seen 4.5 s
        # or more of it: the last tick's arrivals are well past what the one ready replica
        # carries, though not past the window's noise (half of its 10 s are from before the
        # step). A write at the step's onset, on the little of it seen by then, may ask for 2
        # first; whatever the ticks' phase, the next one comes 4.5-10.5 s after the step and
        # writes 3 or more if anything.
        self.assertTrue(all(v >= 3 for v in g["asks_4_10s"]), g)
        self.assertGreaterEqual(g["ask_10s"], 3)
        self.assertGreaterEqual(g["ask_26s"], 3)
        self.assertLessEqual(g["peak"], 4)
        self.assertFalse(g["grew_while_falling"], "scaled out as the load fell: %s" % g)
        self.assertLess(g["p99_step"], si["p99_step"], "stand-in served the step better")

    # ------------------------------------------------------------ 9
    def test_9_capacity_learned_and_checked(self):
        """Pods of 2 slots and 0.2 s (10 req/s each).  "cap-auto" has capacity-per-gpu: auto
        (with slots-per-gpu 2, as vLLM's max-num-seqs would be given): it learns its capacity
        within 10 %.  "cap-high" says capacity-per-gpu 20, twice the truth: the evidence
        contradicts it and a CapacityMismatch Warning Event says so, with the status.

        Why 10 %: the pods' vllm:request_inference_time_seconds_sum (the time requests spent
        in a slot) gives the time-averaged requests in service over the rate window, so the
        estimate is slots over the mean time in service of the requests completed, with no
        sampling noise: nine runs, three of them beside two busy loops, learned 9.86 to 9.93
        (docs/policy.md). The `running` gauge it used before, read once a tick, shows 0, 1 or
        2 for a pod of 2 slots: runs then learned 7.8 to 11.7, and this allowed 30 %."""
        names = ("cap-auto", "cap-high")
        LC.create_deployment("cap-auto", replicas=2, seed=901, **POD, annotations=annotations(
            capacity_per_gpu="auto", slots_per_gpu="2", max_replicas="4"))
        LC.create_deployment("cap-high", replicas=2, seed=902, **POD, annotations=annotations(
            capacity_per_gpu="20", slots_per_gpu="2", max_replicas="4"))
        self.cleanup_deployment(*names)
        for n in names:
            LC.expose(n)
            LC.wait_ready(n, 2)
        gs = self.scaler("cap")
        loads = {n: start_load(n, [(40, 12.0)], 12.0, seed=9) for n in names}

        def learned(n):
            st = json.loads((LC.client.get("deployments", n, NS)["metadata"]["annotations"]
                             .get("gpuscaler.io/status")) or "{}")
            return st.get("capacity") or {}

        def event(n):
            evs = LC.client.list("events", NS)["items"]
            return [e for e in evs if e.get("reason") == "CapacityMismatch" and
                    e["involvedObject"]["name"] == n]

        # 16 utilisation samples (all the estimator keeps): one per steady 1 s tick once the
        # 3 s window is full
        wait_for(lambda: learned("cap-auto").get("samples", 0) >= 16 and
                 learned("cap-auto").get("source") == "learned" and event("cap-high"), 35,
                 interval=0.5, what="a learned capacity and a CapacityMismatch Event")
        for ld in loads.values():
            ld.run.stop()
            ld.run.wait(30)
        auto, high = learned("cap-auto"), learned("cap-high")
        ev = event("cap-high")
        m = gs.metric("gpuscaler_capacity_per_gpu", {"deployment": "cap-auto",
                                                      "source": "learned"})
        record("9-capacity", auto=auto, high=high, event=ev[0]["message"] if ev else None,
               metric=m)
        self.assertTrue(gs.alive())
        self.assertAlmostEqual(auto["learned"] / POD_RPS, 1.0, delta=0.1, msg=str(auto))
        self.assertEqual(auto.get("inService"), "busy-time", str(auto))
        self.assertEqual(auto["perGPU"], auto["learned"])
        self.assertAlmostEqual(m, auto["learned"], delta=0.01 * auto["learned"] + 0.001)
        self.assertEqual(high["source"], "configured")
        self.assertEqual(high.get("mismatch"), "configured-too-high", str(high))
        self.assertEqual(ev[0]["type"], "Warning")
        self.assertIn("capacity-per-gpu 20 is", ev[0]["message"])
        self.assertIn("above what the pods' metrics show", ev[0]["message"])
        self.assertFalse(event("cap-auto"), "auto has nothing to mismatch")

    # ------------------------------------------------------------ 10
    def test_10_gpu_capacity_exhausted(self):
        """The Deployment's pods may only go to one node of 2 GPUs (nodeSelector; the fake
        kubelet leaves pods beyond its GPUs Pending, PodScheduled=False/Unschedulable, with the
        scheduler's message).  Load 14 req/s (needs 3 replicas), then 24 (needs 4): gpuscaler
        scales out past the 2 GPUs once (the ramp may take it to 2 first), sees the replicas
        that cannot be scheduled and holds there, with a GPUCapacityExhausted Warning, the
        shortfall in status and metrics, and no further scale-out as the load grows.  Then the node gets 8 GPUs (as a cluster autoscaler's capacity
        would arrive): the pending pods are bound, gpuscaler resumes and reaches the need."""
        name, low, high, low_s = "gpucap", 14.0, 24.0, 12.0
        node, sel = "gpu-cap-a", {"e2e.gpuscaler.io/pool": "gpu-capacity"}
        LC.set_gpu_node(node, 2, labels=sel)
        self.addCleanup(LC.delete_node, node)
        LC.create_deployment(name, replicas=1, seed=1001, annotations=annotations(),
                             node_selector=sel, **POD)
        self.cleanup_deployment(name)
        LC.expose(name)
        LC.wait_ready(name, 1)
        gs = self.scaler("gpucap")
        labels = {"namespace": NS, "deployment": name}
        load = start_load(name, [(low_s, low), (1, high), (60, high)], low, seed=10)
        t0 = load.start_wall()
        t_high = t0 + low_s + 1

        def status():
            return json.loads(LC.deployment(name)["metadata"].get("annotations", {})
                              .get("gpuscaler.io/status") or "{}")

        def events():
            return [e for e in LC.client.list("events", NS)["items"]
                    if e.get("reason") == "GPUCapacityExhausted" and
                    e["involvedObject"]["name"] == name]
        # the hold, with the load at its higher level for a while
        wait_for(lambda: time.time() > t_high + 6 and status().get("reason") == "AtGPUCapacity"
                 and status().get("wantReplicas", 0) >= need(high), 40, interval=0.5,
                 what="gpuscaler holding at the GPU capacity with the higher load's need")
        held, spec_held = status(), LC.deployment(name)["spec"]["replicas"]
        unsched_metric = gs.metric("gpuscaler_unschedulable_replicas", labels)
        want_metric = gs.metric("gpuscaler_want_replicas", labels)
        ev = wait_for(events, 10, what="a GPUCapacityExhausted Event")
        pend = [p for p in LC.pods(name, include_terminating=False)
                if not p["spec"].get("nodeName")]
        t_raise = time.time()
        LC.set_gpu_node(node, 8, labels=sel)
        # resumed: the need ready, and the load served within the SLA again
        wait_for(lambda: value_at(history(name), time.time(), "ready") >= need(high) and
                 load.recent_ok(4), 40, interval=0.5, what="the need ready after the GPUs came")
        t_need = first_ts(history(name), lambda h: h["ts"] > t_raise and
                          h["ready"] >= need(high))
        time.sleep(1.5)
        after = status()
        load.run.stop()
        load.run.wait(40)
        hist, dec = history(name), gs.decisions(name)
        outs = [d for d in dec if d[1] in SCALE_OUT]
        first_out = outs[0] if outs else None
        # the hold starts with the scale-out that asked past the 2 GPUs (the ramp may take
        # 1 -> 2 first while the rate window fills)
        past = next((d for d in outs if d[0] < t_raise and
                     int(re.search(r"-> (\d+) replicas", d[2]).group(1)) > 2), None)
        resumed = next((d for d in outs if d[0] > t_raise), None)
        changes = spec_changes(hist, t0, None)
        held_changes = spec_changes(hist, past[0] + 0.5, t_raise) if past else []
        sched = gs.metric("gpuscaler_learned_schedule_delay_seconds", labels)
        loadt = gs.metric("gpuscaler_learned_load_seconds", labels)
        m = re.search(r"(\d+) replicas? cannot be scheduled: no node has a free "
                      r"nvidia.com/gpu; holding at (\d+) \((\d+) placed\); the load needs (\d+)",
                      ev[0]["message"])
        record("10-gpu-capacity", first_scale_out=None if not first_out else
               first_out[2].split(": ", 1)[1],
               first_scale_out_s=None if not first_out else round(first_out[0] - t0, 1),
               scale_out_past_gpus=None if not past else past[2].split(": ", 1)[1],
               scale_out_past_gpus_s=None if not past else round(past[0] - t0, 1),
               spec_held=spec_held, placed=2, pending_at_hold=len(pend),
               status_at_hold={k: held.get(k) for k in (
                   "reason", "unschedulableReplicas", "wantReplicas", "needReplicas")},
               metric_unschedulable=unsched_metric, metric_want=want_metric,
               event=ev[0]["message"], events=len(ev),
               held_for_s=round(t_raise - past[0], 1) if past else None,
               resume_after_raise_s=None if not resumed else round(resumed[0] - t_raise, 1),
               resume=None if not resumed else resumed[2].split(": ", 1)[1],
               need_ready_after_raise_s=None if t_need is None else round(t_need - t_raise, 1),
               replicas=[v for _, v in changes], learned_schedule_delay_s=sched,
               learned_load_s=loadt, cold_start=after.get("coldStart"),
               unschedulable_after=after.get("unschedulableReplicas"),
               p99_hold=fmt_ms(load.p99(t_high, t_raise)),
               p99_after_need=fmt_ms(load.p99(t_need, None)))
        print("  " + load.k6())
        self.assertTrue(gs.alive())
        self.assertIsNotNone(past, "no scale-out past the 2 GPUs:\n%s" % dec)
        # held: one scale-out asked past the 2 GPUs, then no more while pods were pending,
        # though the load grew from a need of 3 to one of 4
        self.assertGreater(spec_held, 2)
        self.assertEqual(held_changes, [], "raised the count while replicas were pending")
        self.assertEqual([d for d in outs if past[0] < d[0] < t_raise], [])
        self.assertLessEqual(max(h["ready"] for h in hist if h["ts"] < t_raise), 2)
        self.assertEqual(len(pend), spec_held - 2)
        self.assertEqual(held["unschedulableReplicas"], spec_held - 2)
        self.assertTrue(held["atGPUCapacity"])
        self.assertGreaterEqual(held["wantReplicas"], need(high))
        self.assertEqual(unsched_metric, spec_held - 2)
        self.assertGreaterEqual(want_metric, need(high))
        self.assertEqual(ev[0]["type"], "Warning")
        self.assertIsNotNone(m, ev[0]["message"])
        self.assertEqual(int(m.group(3)), 2)
        self.assertEqual(int(m.group(1)) + int(m.group(3)), int(m.group(2)))
        self.assertGreater(int(m.group(4)), 2, "the Event's need is above what is placed")
        # resumed once the GPUs came, and reached the need; nothing left pending
        self.assertIsNotNone(resumed, "no scale-out after the GPUs came:\n%s" % dec)
        self.assertLessEqual(resumed[0] - t_raise, 5.0)
        self.assertGreater(max(v for _, v in changes), spec_held)
        self.assertIsNotNone(t_need)
        self.assertEqual(after["unschedulableReplicas"], 0)
        self.assertEqual(gs.metric("gpuscaler_unschedulable_replicas", labels), 0)
        # the pods that waited for a GPU taught the scheduling delay, apart from the load time
        self.assertGreaterEqual(sched, 5.0)
        self.assertGreaterEqual(loadt, COLD_START - 0.5)
        self.assertLessEqual(loadt, COLD_START + 5)
        self.assertLess(load.p99(t_need + 5, None) or 0, SLA_MS)

    # ------------------------------------------------------------ 11
    def test_11_token_demand_prompt_mix_shift(self):
        """LLM load is not requests.  Pods whose cost follows the tokens (fakeserve
        --token-cost-ms 0.5: a slot spends 0.5 ms per weighted token, a prompt token weighing
        0.25 of a generated one) serve 18 req/s constant while the prompt-length mix shifts at
        +20 s from 400 to 1600 prompt tokens (100 generated): 200 -> 500 weighted tokens, so a
        pod's 20 req/s become 8.  "tok-req" is sized in requests (capacity-per-gpu 16 req/s,
        profiled at 80 % on the first mix), "tok-tok" in tokens (demand-unit tokens,
        capacity-per-gpu 3200 weighted tokens/s: the same profile); everything else alike.
        The requests policy sees the same 18 req/s, within its capacity, and misses the SLA
        after the shift; the tokens one scales out to the new need and holds it."""
        names = ("tok-req", "tok-tok")
        rps, base_s, after_s, settle_s = 18.0, 20.0, 40.0, 15.0
        cap_rps, tok_a, tok_b = 16.0, 200.0, 500.0   # 0.25 x 400 + 100, 0.25 x 1600 + 100
        t_shift = time.time() + 30.0 + base_s      # the load starts base_s before it
        pod = dict(POD, service_ms=100)
        # the switch time is known before the pods start: every pod, also those created by
        # a scale-out, shifts at the same wall-clock moment
        tann = {"e2e.gpuscaler.io/token-cost-ms": "0.5",
                "e2e.gpuscaler.io/prompt-token-cost": "0.25",
                "e2e.gpuscaler.io/prompt-mix": "400:100@0,1600:100@%.3f" % t_shift}
        LC.create_deployment("tok-req", replicas=2, seed=1101, **pod, template_annotations=tann,
                             annotations=annotations(capacity_per_gpu="%g" % cap_rps,
                                                     max_replicas="12"))
        LC.create_deployment("tok-tok", replicas=2, seed=1102, **pod, template_annotations=tann,
                             annotations=annotations(demand_unit="tokens",
                                                     capacity_per_gpu="%g" % (cap_rps * tok_a),
                                                     max_replicas="12"))
        self.cleanup_deployment(*names)
        for n in names:
            LC.expose(n)
        for n in names:
            LC.wait_ready(n, 2)
        gs = self.scaler("tok")
        lead = t_shift - base_s - time.time()
        self.assertGreater(lead, 0, "set-up took longer than the lead before the shift")
        time.sleep(lead)
        loads = {n: start_load(n, [(base_s + after_s, rps)], rps, seed=11) for n in names}
        for ld in loads.values():
            ld.run.wait(base_s + after_s + 40)

        def status(n):
            return json.loads((LC.client.get("deployments", n, NS)["metadata"]["annotations"]
                               .get("gpuscaler.io/status")) or "{}")
        figs = {}
        for n in names:
            hist, ld = history(n), loads[n]
            t0 = ld.start_wall()
            end = t0 + base_s + after_s
            ch = spec_changes(hist, t0, end)
            figs[n] = dict(
                shift_s=round(t_shift - t0, 1),
                p99_before=ld.p99(t0 + 5, t_shift), p99_after=ld.p99(t_shift, end),
                p99_settled=ld.p99(t_shift + settle_s, end),
                replicas=[v for _, v in ch], peak=max([v for _, v in ch] or [0]),
                at_end=value_at(hist, end, "spec"),
                gpu_s=round(gpu_seconds(hist, t0, end), 1),
                compliant_after_s=(lambda c: None if c is None else round(c - t_shift, 1))(
                    ld.compliant_since(t_shift)))
        st = status("tok-tok")
        unit = gs.metric("gpuscaler_demand_unit", {"deployment": "tok-tok", "unit": "tokens"})
        tpr = gs.metric("gpuscaler_tokens_per_request", {"deployment": "tok-tok"})
        r, t = figs["tok-req"], figs["tok-tok"]
        record("11-tokens", requests=dict(r, p99_before=fmt_ms(r["p99_before"]),
                                          p99_after=fmt_ms(r["p99_after"]),
                                          p99_settled=fmt_ms(r["p99_settled"])),
               tokens=dict(t, p99_before=fmt_ms(t["p99_before"]),
                           p99_after=fmt_ms(t["p99_after"]),
                           p99_settled=fmt_ms(t["p99_settled"])),
               status_unit=st.get("demandUnit"), tokens_per_request=tpr, unit_metric=unit,
               message=st.get("message"))
        print("  requests: " + loads["tok-req"].k6())
        print("  tokens:   " + loads["tok-tok"].k6())
        self.assertTrue(gs.alive())
        # before the shift both size the same load alike and hold the SLA
        for f in (r, t):
            self.assertLess(f["p99_before"], SLA_MS, str(f))
        # after it the requests policy still sees 18 req/s, 9 per GPU of its 16: it misses
        # the SLA (2 pods serve 16 req/s now); the tokens one needs 18 x 500 / (0.8 x 3200)
        # = 3.5 -> 4 replicas
        self.assertGreater(r["p99_settled"], SLA_MS, "the requests policy held the SLA: %s" % r)
        self.assertLess(t["p99_settled"], SLA_MS, "the tokens policy missed the SLA: %s" % t)
        self.assertGreaterEqual(t["at_end"], 4, str(t))
        # above the 4 the settled load needs: the backlog built while the new pods started
        # is drained too, and the slower the pods the more it asks for (6 with this scenario
        # alone; 7 and 8 at the end of whole runs, with max-replicas 8 then), but never more
        # than twice the settled need (max-replicas is 12, so the bound is not the cap's)
        self.assertLessEqual(t["peak"], 8, str(t))
        self.assertEqual(st.get("demandUnit"), "tokens", str(st))
        self.assertEqual(unit, 1.0)
        self.assertIsNotNone(tpr)
        self.assertAlmostEqual(tpr / tok_b, 1.0, delta=0.1)
        self.assertIn("tok", st.get("message", ""))

ORDER = ("test_1_ramp_to_3x_capacity", "test_1b_ramp_sizing_follows_demand",
         "test_3_load_drop_scale_in_stepwise", "test_4_faults",
         # scenario 2 measures in a thread from the start; by now it is (nearly) done
         "test_2_daily_peak_predictive_vs_reactive",
         "test_5_leader_failover", "test_6_hpa_mode", "test_7_prometheus_source",
         "test_8_step_3x_like_the_real_cluster", "test_9_capacity_learned_and_checked",
         "test_10_gpu_capacity_exhausted", "test_11_token_demand_prompt_mix_shift")


# GPUSCALER_E2E_PART "k/2": the scenarios of part k, in ORDER, about 250 s each (the times
# measured above); scenario 2's thread starts only in the part that asserts it, after its
# part's scenarios 1-4 as in the whole file
PARTS = (("test_1_ramp_to_3x_capacity", "test_1b_ramp_sizing_follows_demand",
          "test_3_load_drop_scale_in_stepwise", "test_4_faults",
          "test_2_daily_peak_predictive_vs_reactive", "test_5_leader_failover",
          "test_11_token_demand_prompt_mix_shift"),
         ("test_6_hpa_mode", "test_7_prometheus_source", "test_8_step_3x_like_the_real_cluster",
          "test_9_capacity_learned_and_checked", "test_10_gpu_capacity_exhausted"))
PART = os.environ.get("GPUSCALER_E2E_PART", "")


def selected():
    """The scenarios this process runs, in ORDER: all of them, or part k of PARTS."""
    if not PART:
        return ORDER
    k, _, n = PART.partition("/")
    if int(n) != len(PARTS) or not 1 <= int(k) <= len(PARTS):
        raise SystemExit("closed-loop: GPUSCALER_E2E_PART %r: want k/%d" % (PART, len(PARTS)))
    mine = PARTS[int(k) - 1]
    return tuple(t for t in ORDER if t in mine)


def load_tests(loader, tests, pattern):
    """Run in ORDER (unittest would sort by name), the part's scenarios only."""
    names = loader.getTestCaseNames(ClosedLoop)
    assert sorted(names) == sorted(ORDER), names
    assert sorted(sum(PARTS, ())) == sorted(ORDER), PARTS
    return unittest.TestSuite(ClosedLoop(n) for n in selected())


if __name__ == "__main__":
    prog = unittest.main(exit=False, verbosity=2)
    r = prog.result
    import testsummary
    passed, failed, skipped, expected = testsummary.counts(r)
    print("closed-loop: %d passed, %d failed, %d skipped, %d expected failures (known "
          "gpuscaler limitations)" % (passed, failed, skipped, expected))
    sys.exit(1 if failed or r.testsRun == 0 else 0)

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""soak: `gpuscaler run` against the fake API server under random bad input, for a release check.

For DURATION seconds, six Deployments on fake pods (loopback, 127.0.10-15.N) see, a few times
a second at random: new request rates; annotations set to good and bad values (`abc`, `-1`,
`1e309`, a max below the min, unknown modes); Deployments deleted and created again; replicas
changed by hand; pods whose /metrics answers garbage, hangs or fails; API faults (500, 429,
409, 503, latency, dropped connections, dropped watches, compaction, API server restarts).
Every 20 actions the daemon must be alive and answer /healthz. Then the faults stop, the
annotations are made good, a Deployment left at 0 by hand (parked, as the HPA leaves one) is
scaled to 1 by hand, and each Deployment gets a steady rate: within 90 s each must hold a
count in the sustained rule's band for that rate (8 req/s a replica at most, 5 at least). With the ASan+UBSan build (GPUSCALER_BIN), no sanitizer report
may appear in the log. Exit 0 when all holds, 1 otherwise.

    GPUSCALER_BIN=build-asan/cmd/gpuscaler/gpuscaler e2e/tools/soak.py --seed 3 --duration 300

Not part of the test suite (it takes minutes); results in docs/operations.md."""
import argparse
import os
import random
import sys
import threading
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
from ctlharness import (FAST_ANNOTATIONS, FAST_CONFIG, Gpuscaler, MetricsPods,  # noqa: E402
                        MiniKubelet, deployment, now_rfc3339, wait_for)
from fakekube import harness, kubeclient  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--duration", type=float, default=300, help="seconds of random actions")
ARGS = ap.parse_args()
SEED, DURATION = ARGS.seed, ARGS.duration
rnd = random.Random(SEED)

CONFIG = FAST_CONFIG
BASE = FAST_ANNOTATIONS
VALUES = {
    "gpuscaler.io/capacity-per-gpu": ["10", "abc", "-1", "0", "1e309", "", "5", "nan", "auto"],
    "gpuscaler.io/min-replicas": ["1", "0", "9", "-3", "x", "99999999999"],
    "gpuscaler.io/max-replicas": ["8", "1", "0", "3", "y", "1000000"],
    "gpuscaler.io/scale-out-after": ["4s", "0s", "-1s", "1h", "abc", "1ms"],
    "gpuscaler.io/predictive": ["true", "false", "maybe"],
    "gpuscaler.io/p99-latency-target": ["2s", "0s", "x", "100ms"],
    "gpuscaler.io/service-time": ["500ms", "0", "3s", "bad"],
    "gpuscaler.io/forecast-quantile": ["0.9", "1.5", "0", "x"],
    "gpuscaler.io/mode": ["scale", "external-metric", "external-metrics", "bogus"],
    "gpuscaler.io/demand-unit": ["requests", "tokens", "joules"],
    "gpuscaler.io/metrics-port": ["8000", "metrics", "0", "70000", "nope"],
    "gpuscaler.io/metrics-path": ["/metrics", "", "no-slash", "/%zz"],
    "gpuscaler.io/gpus-per-replica": ["1", "2", "0", "-1"],
    "gpuscaler.io/seasonality": ["1d", "0", "x"],
    "gpuscaler.io/enabled": ["true", "false", "yes"],
    "gpuscaler.io/cold-start": ["2s", "auto", "-1s"],
    "gpuscaler.io/metrics-profile": ["vllm", "sglang", "nim", "tgi", "llamacpp"],
    "gpuscaler.io/request-metric": ["vllm:request_success_total",
                                    'vllm:request_success_total{model_name="m"}',
                                    'vllm:request_success_total{model_name!="m"}',
                                    'vllm:request_success_total{model_name=~"m|o.*"}',
                                    'vllm:request_success_total{model_name!~"(?i)[^m]"}',
                                    'vllm:request_success_total{model_name=~"m(?=x)"}',
                                    'x{a="b"', ""],
}


def retry(fn, tries=30, exists_ok=False):
    """fn() until it succeeds, is NotFound (done already), or AlreadyExists with exists_ok."""
    for _ in range(tries):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            if "NotFound" in str(e) or (exists_ok and "AlreadyExists" in str(e)):
                return None
            time.sleep(0.5)
    raise RuntimeError("gave up after %d tries" % tries)


class Kubelet(MiniKubelet):
    """MiniKubelet whose pod deletions and Ready status writes are retried until the API takes
    them (a ReplicaSet controller's and a kubelet's retries), so that faults leave no orphan
    or never-ready pods behind."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.doomed = []
        self.unready = []   # (pod name, ip) whose Ready status write failed

    def _ready(self, pname, ip):
        st = {"status": {"phase": "Running", "podIP": ip, "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339()}]}}
        try:
            self.c.patch("pods", pname, st, self.ns, subresource="status")
        except Exception as e:  # noqa: BLE001
            if "NotFound" not in str(e):
                self.unready.append((pname, ip))

    def start(self):
        # the first sync may meet a fault too: the thread retries it
        try:
            self.sync()
        except Exception:  # noqa: BLE001
            pass
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def sync(self):
        for pname, ip in list(self.unready):
            self.unready.remove((pname, ip))
            if (pname, ip) in self.pods:
                self._ready(pname, ip)
        for pname in list(self.doomed):
            try:
                self.c.delete("pods", pname, self.ns)
                self.doomed.remove(pname)
            except Exception as e:  # noqa: BLE001
                if "NotFound" in str(e):
                    self.doomed.remove(pname)
        d = self.c.get("deployments", self.name, self.ns)
        want = d["spec"].get("replicas", 1)
        while len(self.pods) > want:
            pname, ip = self.pods.pop()
            self.metrics.remove(ip)
            self.doomed.append(pname)
        return super().sync()


def main():
    fk = harness.start(bookmark_interval="1s")
    c = kubeclient.Client.from_kubeconfig(fk.kubeconfig)
    ns = "soak-%d" % SEED
    c.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    metrics = MetricsPods()
    g = Gpuscaler(fk.kubeconfig, CONFIG, ident="soak")
    names = ["w%d" % i for i in range(6)]
    kubelets = {}

    generation = {}

    def make(i, name):
        retry(lambda: c.create("deployments", deployment(name, 2, dict(BASE), metrics.port), ns),
              exists_ok=True)
        k = Kubelet(c, ns, name, metrics, subnet=10 + i, port=metrics.port,
                    cold_start=rnd.choice([0.0, 1.0, 3.0]))
        # a Deployment made again gets pod names and addresses of its own: the previous
        # kubelet's thread may still be finishing a request when this one starts
        generation[name] = generation.get(name, -1) + 1
        k.next_ip = 1 + 40 * (generation[name] % 6)
        kubelets[name] = k
        k.start()

    for i, n in enumerate(names):
        make(i, n)
        metrics.set_rate(n, rnd.uniform(0, 60))
    t_end = time.time() + DURATION
    actions = 0
    checks = 0
    ok = alive = False
    try:
        while time.time() < t_end:
            time.sleep(rnd.uniform(0.1, 1.0))
            a = rnd.random()
            name = rnd.choice(names)
            actions += 1
            try:
                if a < 0.25:
                    metrics.set_rate(name, rnd.choice([0, 1, 5, 20, 60, 200, 1e6]))
                elif a < 0.5:
                    k = rnd.choice(list(VALUES))
                    v = rnd.choice(VALUES[k])
                    c.patch("deployments", name, {"metadata": {"annotations": {k: v}}}, ns)
                elif a < 0.55:
                    c.patch("deployments", name, {"metadata": {"annotations": dict(BASE)}}, ns)
                elif a < 0.6:
                    # delete and recreate, as a user would: each call retried through
                    # the faults (the garbage collector deletes the pods)
                    old = kubelets[name]
                    old.stop()
                    retry(lambda: c.delete("deployments", name, ns))
                    for pname in [p for p, _ in old.pods] + old.doomed:
                        retry(lambda: c.delete("pods", pname, ns))
                    time.sleep(rnd.uniform(0, 2))
                    make(names.index(name), name)
                elif a < 0.65:
                    c.patch("deployments", name, {"spec": {"replicas": rnd.randint(0, 12)}}, ns)
                elif a < 0.75:
                    ips = [ip for ip, st in metrics.pods.items()]
                    if ips:
                        metrics.set_mode(rnd.choice(ips),
                                         rnd.choice([None, None, "garbage", "hang", "500"]))
                elif a < 0.85:
                    spec = rnd.choice([
                        {"action": "error", "status": 500, "count": rnd.randint(1, 5)},
                        {"action": "error", "status": 429, "count": 3},
                        {"action": "error", "status": 409, "verb": "patch", "count": 2},
                        {"action": "latency", "ms": rnd.uniform(100, 3000), "count": 5},
                        {"action": "reset", "count": rnd.randint(1, 4)},
                        {"action": "error", "status": 503, "resource": "pods", "count": 3},
                    ])
                    fk.fault(spec)
                elif a < 0.9:
                    fk.fault(rnd.choice([{"action": "drop-watches"}, {"action": "compact"},
                                         {"action": "clear"}]))
                elif a < 0.92:
                    fk.restart(delay=rnd.uniform(0.1, 2), wait=False)
                else:
                    pass
            except Exception as e:  # noqa: BLE001
                print("action error (ok):", type(e).__name__, str(e)[:120])
            if actions % 20 == 0:
                checks += 1
                if not g.alive():
                    print("the daemon died")
                    break
                try:
                    code, _ = g.get("/healthz", g.health_port)
                    if code != 200:
                        print("healthz", code)
                except Exception as e:  # noqa: BLE001
                    print("healthz error", e)
        # converge: clean state
        fk.clear_faults()
        for ip in list(metrics.pods):
            metrics.set_mode(ip, None)
        # what the garbage collector would have removed: pods no fake kubelet serves (of a
        # Deployment deleted while faults failed their deletion, or created by a request
        # whose answer was lost)
        tracked = {pn for k in kubelets.values() for pn, _ in k.pods}
        for attempt in range(10):
            try:
                for pod in c.list("pods", ns)["items"]:
                    if pod["metadata"]["name"] not in tracked:
                        c.delete("pods", pod["metadata"]["name"], ns)
                break
            except Exception as e:  # noqa: BLE001
                print("orphan cleanup retry", e)
                time.sleep(1)
        want = {}
        for i, n in enumerate(names):
            ann = dict(BASE)
            for k in VALUES:
                if k not in ann:
                    ann[k] = None
            for attempt in range(10):
                try:
                    c.patch("deployments", n, {"metadata": {"annotations": ann}}, ns)
                    break
                except Exception as e:  # noqa: BLE001
                    print("patch retry", e)
                    time.sleep(1)
            # at 0 by hand with min-replicas 1 it is parked: resume it as a user would
            for attempt in range(10):
                try:
                    if c.get("deployments", n, ns)["spec"]["replicas"] == 0:
                        c.patch("deployments", n, {"spec": {"replicas": 1}}, ns)
                    break
                except Exception as e:  # noqa: BLE001
                    print("unpark retry", e)
                    time.sleep(1)
            r = rnd.choice([4, 12, 30, 45])
            metrics.set_rate(n, r)
            # the band: at least what 8 req/s a replica needs (the target), at most what
            # keeps 5 a replica (below that the hysteresis rule scales in); min 1, max 8
            lo = max(1, min(8, -(-r // 8)))
            want[n] = (lo, max(lo, min(8, r // 5)))
        ok = True
        for n in names:
            try:
                wait_for(lambda: want[n][0] <= c.get("deployments", n, ns)["spec"]["replicas"]
                         <= want[n][1], 90, what="%s -> %d..%d" % (n, want[n][0], want[n][1]))
            except Exception as e:  # noqa: BLE001
                ok = False
                d = c.get("deployments", n, ns)
                print("NOT CONVERGED", n, d["spec"]["replicas"], want[n], e)
                print("  status:", (d["metadata"].get("annotations") or {}).get(
                    "gpuscaler.io/status"))
                for pod in c.list("pods", ns)["items"]:
                    if pod["metadata"]["name"].startswith(n + "-"):
                        print("  pod", pod["metadata"]["name"], pod.get("status", {}).get(
                            "podIP"), [cd.get("status") for cd in pod.get("status", {}).get(
                                "conditions", []) if cd.get("type") == "Ready"])
                print("  kubelet pods", kubelets[n].pods, "doomed", kubelets[n].doomed,
                      "alive", kubelets[n].thread and kubelets[n].thread.is_alive())
        print("actions", actions, "checks", checks, "alive", g.alive(), "converged", ok)
    finally:
        for k in kubelets.values():
            k.stop()
        alive = g.alive()
        g.stop()
        txt = g.text()
        bad = [ln for ln in txt.splitlines() if "runtime error" in ln or "AddressSanitizer" in ln
               or "LeakSanitizer" in ln or "ERROR" in ln and "Sanitizer" in ln]
        print("sanitizer lines:", len(bad))
        for ln in bad[:20]:
            print(ln)
        print("log lines", len(txt.splitlines()), "log", g.logpath, "alive at end", alive)
        metrics.close()
        fk.stop()
    return 0 if alive and ok and not bad else 1


sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/controller: gpuscaler's cost with 1,000 annotated Deployments and
10,000 pods in the (fake) API server.

Creates the objects in e2e/fakekube (started here, on loopback), starts
`gpuscaler run` against it, and prints:
  - the initial list+sync: wall time and CPU seconds until every Deployment
    has been decided once,
  - steady state over a measurement window: CPU % of one core and RSS (MiB).
Pods get loopback addresses 127.0.x.y; with --serve the C fake exposition
server of bench-scrape answers for all of them (one listener on 0.0.0.0), so
the steady state includes scraping every ready pod every scrape interval;
without it scraping is set to a long interval and the figure is the
controller and its caches alone.

usage: bench/controller.py [--deployments 1000] [--pods-per 10] [--window 60]
                           [--scrape-interval 5s] [--serve]
Needs a build: GPUSCALER_BIN (default build/cmd/gpuscaler/gpuscaler) and,
for --serve, GPUSCALER_BUILD/bench/bench-scrape.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "e2e"))
from fakekube import harness  # noqa: E402

BUILD = os.environ.get("GPUSCALER_BUILD", os.path.join(ROOT, "build"))
BIN = os.environ.get("GPUSCALER_BIN", os.path.join(BUILD, "cmd", "gpuscaler", "gpuscaler"))
HZ = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / HZ  # utime + stime


def proc_rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def create_all(c, ns, ndep, per, port):
    def worker(lo, hi):
        for i in range(lo, hi):
            name = "model-%04d" % i
            labels = {"app": name}
            c.create("deployments", {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "labels": labels, "annotations": {
                    "gpuscaler.io/enabled": "true", "gpuscaler.io/capacity-per-gpu": "4",
                    "gpuscaler.io/max-replicas": "40", "gpuscaler.io/metrics-port": str(port)}},
                "spec": {"replicas": per, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                             "name": "s", "image": "vllm",
                             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}, ns)
            for k in range(per):
                n = i * per + k
                ip = "127.%d.%d.%d" % (1 + n // 65000, (n // 250) % 250, 1 + n % 250)
                pname = "%s-%d" % (name, k)
                c.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": pname, "labels": labels},
                                  "spec": {"containers": [{
                                      "name": "s", "image": "vllm",
                                      "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}, ns)
                c.patch("pods", pname, {"status": {"phase": "Running", "podIP": ip, "conditions": [
                    {"type": "Ready", "status": "True",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, ns, subresource="status")
    threads = []
    step = max(1, ndep // 4)
    for lo in range(0, ndep, step):
        t = threading.Thread(target=worker, args=(lo, min(ndep, lo + step)))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deployments", type=int, default=1000)
    ap.add_argument("--pods-per", type=int, default=10)
    ap.add_argument("--window", type=int, default=60)
    ap.add_argument("--scrape-interval", default="5s")
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    fk = harness.start(bookmark_interval="10s", history=30000)
    server = None
    g = None
    tmp = tempfile.mkdtemp(prefix="bench-controller-")
    try:
        port = 18080
        if a.serve:
            server = subprocess.Popen([os.path.join(BUILD, "bench", "bench-scrape"), "--serve",
                                       str(port)], stdout=subprocess.DEVNULL)
        c = fk.client()
        ns = "bench"
        c.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        t0 = time.time()
        create_all(c, ns, a.deployments, a.pods_per, port)
        print("created %d Deployments and %d pods in %.0fs" % (
            a.deployments, a.deployments * a.pods_per, time.time() - t0))
        cfg = os.path.join(tmp, "config.yaml")
        with open(cfg, "w") as f:
            f.write("leader-election: {enabled: false}\nscrape: {interval: %s}\n" %
                    (a.scrape_interval if a.serve else "1h"))
        mport = 19090
        log = open(os.path.join(tmp, "log"), "wb")
        start = time.time()
        g = subprocess.Popen([BIN, "run", "--kubeconfig", fk.kubeconfig, "--config", cfg,
                              "--metrics-addr", "127.0.0.1:%d" % mport,
                              "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT)
        # initial sync: until every Deployment has a decision
        def tracked():
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("gpuscaler_tracked_deployments "):
                        return int(float(line.split()[1]))
            return 0
        while True:
            try:
                if tracked() >= a.deployments:
                    break
            except OSError:
                pass
            if time.time() - start > 300:
                raise SystemExit("gpuscaler did not sync within 300 s")
            time.sleep(0.2)
        sync_wall = time.time() - start
        sync_cpu = proc_cpu(g.pid)
        print("initial list + first decisions: %.2fs wall, %.2fs CPU, RSS %.1f MiB" % (
            sync_wall, sync_cpu, proc_rss_mib(g.pid)))
        time.sleep(10)  # let first scrapes and writes settle
        c0, w0 = proc_cpu(g.pid), time.time()
        peak = 0.0
        while time.time() - w0 < a.window:
            time.sleep(1)
            peak = max(peak, proc_rss_mib(g.pid))
        c1, w1 = proc_cpu(g.pid), time.time()
        cpu_pct = 100.0 * (c1 - c0) / (w1 - w0)
        mode = ("scraping %d pods every %s" % (a.deployments * a.pods_per, a.scrape_interval)
                if a.serve else "scraping off (controller and caches only)")
        print("steady state over %ds, %s: CPU %.2f%% of one core, RSS %.1f MiB (peak %.1f)" % (
            a.window, mode, cpu_pct, proc_rss_mib(g.pid), peak))
        print(json.dumps({"deployments": a.deployments, "pods": a.deployments * a.pods_per,
                          "sync_wall_s": round(sync_wall, 2), "sync_cpu_s": round(sync_cpu, 2),
                          "steady_cpu_pct": round(cpu_pct, 2), "rss_mib": round(peak, 1),
                          "scraping": a.serve}))
    finally:
        if g:
            g.terminate()
            try:
                g.wait(10)
            except subprocess.TimeoutExpired:
                g.kill()
        if server:
            server.terminate()
            server.wait(5)
        fk.stop()


if __name__ == "__main__":
    main()

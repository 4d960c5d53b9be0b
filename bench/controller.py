#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/controller: gpuscaler's cost with 1,000 annotated Deployments and
10,000 pods in the (fake) API server.

Creates the objects in e2e/fakekube (started here, on loopback), starts
`gpuscaler run` against it, and prints:
  - the initial list+sync: wall time and CPU seconds until every Deployment
    has been decided once,
  - steady state over a measurement window: CPU % of one core, RSS (MiB)
    split into libraries (file-backed) and anonymous memory, and the budget
    by component from gpuscaler's own gpuscaler_memory_bytes gauges.
Pods get loopback addresses 127.x.y.z; with --serve the C fake exposition
server of bench-scrape answers for all of them (one listener on 0.0.0.0, on
a free port it reports), so the steady state includes scraping every ready
pod every scrape interval; without it scraping is set to a long interval and
the figure is the controller and its caches alone.

Every port is picked free at run time. The bench stops with a message, and
exit status 1, when the fake server does not start or answer, when gpuscaler
exits, or when more than 1% of the scrapes in the window failed (a result
measured against refused scrapes would say nothing).

usage: bench/controller.py [--deployments 1000] [--pods-per 10] [--window 60]
                           [--scrape-interval 5s] [--serve]
Needs a build: GPUSCALER_BIN (default build/cmd/gpuscaler/gpuscaler) and,
for --serve, GPUSCALER_BUILD/bench/bench-scrape.

The functions here are also used by e2e/test_memory.py.
"""
import argparse
import json
import os
import select
import shutil
import socket
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


class BenchError(Exception):
    pass


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / HZ  # utime + stime


def proc_mem(pid):
    """{"rss", "anon", "file"} in MiB from /proc/PID/smaps_rollup."""
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("Rss", "Anonymous"):
                out[k] = int(rest.split()[0]) / 1024.0
    return {"rss": out.get("Rss", 0.0), "anon": out.get("Anonymous", 0.0),
            "file": out.get("Rss", 0.0) - out.get("Anonymous", 0.0)}


def proc_rss_mib(pid):
    return proc_mem(pid)["rss"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pod_ip(n):
    """The loopback address of pod number n (0..~16 million)."""
    return "127.%d.%d.%d" % (1 + n // 62500, (n // 250) % 250, 1 + n % 250)


def start_fake_server(build=BUILD, timeout=10):
    """bench-scrape --serve 0: returns (process, port) once it listens and
    answers a scrape on a pod address, or raises BenchError saying why."""
    exe = os.path.join(build, "bench", "bench-scrape")
    if not os.path.exists(exe):
        raise BenchError("%s not built" % exe)
    p = subprocess.Popen([exe, "--serve", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    deadline = time.time() + timeout
    line = b""
    while time.time() < deadline and not line.endswith(b"\n"):
        r, _, _ = select.select([p.stdout], [], [], 0.2)
        if r:
            ch = os.read(p.stdout.fileno(), 1)
            if not ch:
                break
            line += ch
        elif p.poll() is not None:
            break
    if not line.startswith(b"listening on "):
        p.kill()
        err = p.stderr.read().decode(errors="replace").strip()
        raise BenchError("the fake metrics server did not start: %s" % (err or "no output"))
    port = int(line.split(b":")[-1])
    url = "http://%s:%d/metrics" % (pod_ip(0), port)
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read()
        if r.status != 200 or b"vllm:request_success_total" not in body:
            raise BenchError("the fake metrics server answered %s with HTTP %d" % (url, r.status))
    except OSError as e:
        p.kill()
        raise BenchError("the fake metrics server does not answer %s: %s" % (url, e))
    return p, port


def stop(p):
    if not p:
        return
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for f in (p.stdout, p.stderr):
        if f:
            f.close()


def deployment_name(i):
    return "model-%04d" % i


def create_deployments(c, ns, lo, hi, replicas, port, threads=4):
    def worker(a, b):
        for i in range(a, b):
            name = deployment_name(i)
            labels = {"app": name}
            c.create("deployments", {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "labels": labels, "annotations": {
                    "gpuscaler.io/enabled": "true", "gpuscaler.io/capacity-per-gpu": "4",
                    "gpuscaler.io/max-replicas": "40", "gpuscaler.io/metrics-port": str(port)}},
                "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                             "name": "s", "image": "vllm",
                             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}, ns)
    parallel(worker, lo, hi, threads)


def create_pods(c, ns, ndep, k_lo, k_hi, threads=4):
    """Pods k_lo..k_hi-1 of each of Deployments 0..ndep-1, Running and Ready,
    pod (i, k) at pod_ip(k * ndep + i)."""
    def worker(a, b):
        for n in range(a, b):
            k, i = divmod(n, ndep)
            name = deployment_name(i)
            pname = "%s-%d" % (name, k)
            c.create("pods", {"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": pname, "labels": {"app": name}},
                              "spec": {"containers": [{
                                  "name": "s", "image": "vllm",
                                  "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}, ns)
            c.patch("pods", pname, {"status": {"phase": "Running", "podIP": pod_ip(n),
                                               "conditions": [{
                                                   "type": "Ready", "status": "True",
                                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
                    ns, subresource="status")
    parallel(worker, k_lo * ndep, k_hi * ndep, threads)


def parallel(worker, lo, hi, threads):
    ts = []
    step = max(1, (hi - lo + threads - 1) // threads)
    for a in range(lo, hi, step):
        t = threading.Thread(target=worker, args=(a, min(hi, a + step)))
        t.start()
        ts.append(t)
    for t in ts:
        t.join()


def create_all(c, ns, ndep, per, port):
    create_deployments(c, ns, 0, ndep, per, port)
    create_pods(c, ns, ndep, 0, per)


class Daemon:
    """`gpuscaler run` on a fakekube, with its /metrics and health ports free."""

    def __init__(self, kubeconfig, scrape_interval, tmp, extra_config=""):
        self.mport, self.hport = free_port(), free_port()
        cfg = os.path.join(tmp, "config.yaml")
        with open(cfg, "w") as f:
            f.write("leader-election: {enabled: false}\nscrape: {interval: %s}\n%s" %
                    (scrape_interval, extra_config))
        self.log_path = os.path.join(tmp, "gpuscaler.log")
        self.log = open(self.log_path, "wb")
        self.p = subprocess.Popen([BIN, "run", "--kubeconfig", kubeconfig, "--config", cfg,
                                   "--metrics-addr", "127.0.0.1:%d" % self.mport,
                                   "--health-addr", "127.0.0.1:%d" % self.hport,
                                   "--log-level", "warn"],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.p.pid

    def log_tail(self, n=20):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return b"".join(f.readlines()[-n:]).decode(errors="replace")

    def alive(self):
        if self.p.poll() is not None:
            raise BenchError("gpuscaler exited with status %d:\n%s" % (self.p.returncode,
                                                                      self.log_tail()))

    def metrics(self):
        """{series: value} of /metrics."""
        self.alive()
        out = {}
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.mport, timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#"):
                    k, _, v = line.rpartition(" ")
                    try:
                        out[k] = float(v)
                    except ValueError:
                        pass
        return out

    def wait_tracked(self, n, timeout=300):
        start = time.time()
        while True:
            try:
                if self.metrics().get("gpuscaler_tracked_deployments", 0) >= n:
                    return time.time() - start
            except OSError:
                pass
            if time.time() - start > timeout:
                raise BenchError("gpuscaler did not sync within %d s" % timeout)
            time.sleep(0.2)

    def stop(self):
        stop(self.p)
        self.log.close()


COMPONENTS = ["scrape", "libcurl", "kube_cache", "forecast"]


def budget(m, mem):
    """Lines of the memory budget from /metrics values and proc_mem()."""
    mib = 1048576.0
    heap = m.get("gpuscaler_heap_bytes", 0) / mib
    parts = [(c, m.get('gpuscaler_memory_bytes{component="%s"}' % c, 0) / mib)
             for c in COMPONENTS]
    lines = ["RSS %.1f MiB = libraries and code (file-backed) %.1f + anonymous %.1f" % (
        mem["rss"], mem["file"], mem["anon"]),
        "  heap in use %.1f MiB:" % heap]
    for c, v in parts:
        lines.append("    %-28s %6.1f MiB" % (c, v))
    lines.append("    %-28s %6.1f MiB" % ("other (controller, TLS, ...)",
                                             heap - sum(v for _, v in parts)))
    lines.append("  anonymous not in use by the heap (free chunks, stacks) %.1f MiB" % (
        mem["anon"] - heap))
    return lines, dict(parts, heap=heap)


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
        port = 9  # discard: nothing answers when not serving
        if a.serve:
            server, port = start_fake_server()
            print("fake metrics server on 0.0.0.0:%d" % port)
        c = fk.client()
        ns = "bench"
        c.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        t0 = time.time()
        create_all(c, ns, a.deployments, a.pods_per, port)
        print("created %d Deployments and %d pods in %.0fs" % (
            a.deployments, a.deployments * a.pods_per, time.time() - t0))
        g = Daemon(fk.kubeconfig, a.scrape_interval if a.serve else "1h", tmp)
        sync_wall = g.wait_tracked(a.deployments)
        sync_cpu = proc_cpu(g.pid)
        print("initial list + first decisions: %.2fs wall, %.2fs CPU, RSS %.1f MiB" % (
            sync_wall, sync_cpu, proc_rss_mib(g.pid)))
        time.sleep(10)  # let first scrapes and writes settle
        m0 = g.metrics()
        c0, w0 = proc_cpu(g.pid), time.time()
        peak = 0.0
        while time.time() - w0 < a.window:
            time.sleep(1)
            g.alive()
            peak = max(peak, proc_rss_mib(g.pid))
        c1, w1 = proc_cpu(g.pid), time.time()
        m1, mem = g.metrics(), proc_mem(g.pid)
        cpu_pct = 100.0 * (c1 - c0) / (w1 - w0)
        scrapes = m1.get("gpuscaler_scrapes_total", 0) - m0.get("gpuscaler_scrapes_total", 0)
        failed = (m1.get("gpuscaler_scrape_failures_total", 0) -
                  m0.get("gpuscaler_scrape_failures_total", 0))
        late = m1.get("gpuscaler_scrape_late_total", 0) - m0.get("gpuscaler_scrape_late_total", 0)
        mode = ("scraping %d pods every %s" % (a.deployments * a.pods_per, a.scrape_interval)
                if a.serve else "scraping off (controller and caches only)")
        print("steady state over %ds, %s: CPU %.2f%% of one core, RSS %.1f MiB (peak %.1f)" % (
            a.window, mode, cpu_pct, mem["rss"], peak))
        print("scrapes in the window: %d (%.0f/s), %d failed, %d late" % (
            scrapes, scrapes / (w1 - w0), failed, late))
        lines, parts = budget(m1, mem)
        print("memory budget:")
        for line in lines:
            print("  " + line)
        print(json.dumps({"deployments": a.deployments, "pods": a.deployments * a.pods_per,
                          "sync_wall_s": round(sync_wall, 2), "sync_cpu_s": round(sync_cpu, 2),
                          "steady_cpu_pct": round(cpu_pct, 2), "rss_mib": round(peak, 1),
                          "rss_file_mib": round(mem["file"], 1),
                          "budget_mib": {k: round(v, 2) for k, v in parts.items()},
                          "scrapes": int(scrapes), "scrape_failures": int(failed),
                          "scraping": a.serve}))
        if a.serve and (scrapes == 0 or failed > 0.01 * scrapes):
            raise BenchError("%d of %d scrapes failed: the figures above do not measure "
                             "scraping. gpuscaler's log:\n%s" % (failed, scrapes, g.log_tail()))
    except BenchError as e:
        print("bench/controller: %s" % e, file=sys.stderr)
        sys.exit(1)
    finally:
        if g:
            g.stop()
        stop(server)
        fk.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

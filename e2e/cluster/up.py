#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Bring up gpuscaler's local cluster on loopback, with no real Kubernetes: fakekube (the API
server, HTTPS + kubeconfig), the fake kubelet (Deployments -> Pods -> one fakeserve process per
pod on 127.N.x.y), a Service front on 127.0.0.2:8080, an example annotated Deployment `llm`,
optionally gpuscaler itself and a real Prometheus.  Prints the service URL and the kubeconfig
path, then runs (printing each replica change) until Ctrl-C / SIGTERM, and tears everything
down by PID.

    python3 e2e/cluster/up.py                                   # cluster + example + service
    python3 e2e/cluster/up.py --with-gpuscaler build/cmd/gpuscaler/gpuscaler --prometheus
    python3 e2e/cluster/up.py down                              # from another terminal
    python3 e2e/cluster/up.py status

Everything lives in --state-dir (default /tmp/gpuscaler-local-cluster): kubeconfig, logs,
pids.json, up.pid, env.sh (source it for KUBECONFIG and TARGET_URL).
"""

import argparse
import json
import os
import shutil
import signal
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)
if E2E not in sys.path:
    sys.path.insert(0, E2E)

from cluster import procs  # noqa: E402
from cluster.harness import LocalCluster  # noqa: E402

DEFAULT_STATE = "/tmp/gpuscaler-local-cluster"


def example_annotations(a):
    capacity = a.slots / (a.service_ms / 1000.0)        # req/s one GPU serves at saturation
    return {
        "gpuscaler.io/enabled": "true",
        "gpuscaler.io/mode": "scale",
        "gpuscaler.io/capacity-per-gpu": "%g" % round(capacity * 0.75, 2),
        "gpuscaler.io/min-replicas": "1",
        "gpuscaler.io/max-replicas": str(a.max_replicas),
        "gpuscaler.io/scale-out-after": "30s",
        "gpuscaler.io/scale-in-after": "2m",
        "gpuscaler.io/cold-start": "%gs" % a.cold_start,
        "gpuscaler.io/p99-latency-target": "2s",
        "gpuscaler.io/metrics-source": "prometheus" if a.prometheus and a.gpuscaler_prometheus
        else "scrape",
        "gpuscaler.io/metrics-profile": a.profile,
        "gpuscaler.io/metrics-port": str(a.port),
    }


def cmd_up(a):
    pidpath = os.path.join(a.state_dir, "up.pid")
    old = procs.read_pidfile(pidpath).get("up")
    if old and procs.alive(old):
        sys.stderr.write("a local cluster is already running (pid %d); run `%s down` first\n"
                         % (old, sys.argv[0]))
        return 1
    if os.path.isdir(a.state_dir):
        shutil.rmtree(a.state_dir)
    os.makedirs(a.state_dir)
    procs.write_pidfile(pidpath, {"up": os.getpid()})
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    lc = LocalCluster(namespace=a.namespace, state_dir=a.state_dir)
    try:
        lc.start()
        say("API server   %s (fakekube pid %d)" % (lc.fk.url, lc.fk.pid))
        say("kubeconfig   %s" % lc.kubeconfig)
        if not a.no_example:
            lc.create_deployment(a.name, replicas=a.replicas, gpus=a.gpus, slots=a.slots,
                                 service_ms=a.service_ms, profile=a.profile,
                                 cold_start=a.cold_start, port=a.port,
                                 annotations=example_annotations(a))
            url = lc.expose(a.name, listen=a.service)
            say("deployment   %s/%s: %d replica(s), %d GPU x %d slots, %g ms, cold start %gs, "
                "capacity %.1f req/s per pod" % (a.namespace, a.name, a.replicas, a.gpus,
                                                  a.slots, a.service_ms, a.cold_start,
                                                  a.gpus * a.slots * 1000.0 / a.service_ms))
            say("service URL  %s   (POST /v1/completions; GET /_service/endpoints)" % url)
        else:
            url = ""
        if a.prometheus:
            say("prometheus   %s" % lc.start_prometheus(scrape_interval=a.prometheus_interval))
        if a.with_gpuscaler:
            config = None
            if a.prometheus:
                config = {"prometheus": {"url": lc.prometheus_url}}
            p = lc.start_gpuscaler(a.with_gpuscaler, decision_interval=a.decision_interval,
                                   config=config, extra_args=a.gpuscaler_arg or ())
            say("gpuscaler    pid %d, metrics %s, log %s" % (p.pid, lc.gpuscaler_metrics,
                                                              lc.gpuscaler_log))
        with open(os.path.join(a.state_dir, "env.sh"), "w") as f:
            f.write("export KUBECONFIG=%s\n" % lc.kubeconfig)
            if url:
                f.write("export TARGET_URL=%s\n" % url)
        say("env          source %s/env.sh" % a.state_dir)
        say("load         python3 %s/loadgen.py --target-url %s --peak-rps 20 --duration 5m "
            "--interval 5" % (os.path.relpath(HERE), url or "URL"))
        say("stop         Ctrl-C, or python3 %s down --state-dir %s" % (
            os.path.relpath(os.path.abspath(__file__)), a.state_dir))
        seen = 0
        gs_reported = False
        while not done.wait(1.0):
            if not a.quiet and not a.no_example:
                h = lc.replica_history(a.name)
                for r in h[seen:]:
                    say("t=%7.1fs  %s: spec %d, pods %d, ready %d" % (
                        r["t"], a.name, r["spec"], r["replicas"], r["ready"]))
                seen = len(h)
            if lc.gpuscaler is not None and lc.gpuscaler.poll() is not None and \
                    not gs_reported:
                gs_reported = True
                say("gpuscaler exited with %s; its log:\n%s" % (
                    lc.gpuscaler.returncode, lc.gpuscaler_output()[-2000:]))
            if lc.kubelet.poll() is not None:
                say("kubelet exited with %s (see %s)" % (lc.kubelet.returncode,
                                                         lc.kubelet_log))
                break
    except Exception as e:
        sys.stderr.write("up: %s\n" % e)
        return 1
    finally:
        say("tearing down")
        lc.stop()
        try:
            os.unlink(pidpath)
        except OSError:
            pass
    return 0


def cmd_down(a):
    pidpath = os.path.join(a.state_dir, "up.pid")
    up = procs.read_pidfile(pidpath).get("up")
    if up and procs.alive(up):
        procs.stop(up, 30)
    left = []
    for f in ("pids.json", "kubelet-pids.json"):
        data = procs.read_pidfile(os.path.join(a.state_dir, f))
        data.pop("harness", None)
        for pid in procs.pids_in(data):
            if pid != os.getpid() and procs.alive(pid) and _ours(pid):
                left.append(pid)
    for pid in left:
        procs.stop(pid, 3)
    say("down: stopped %s%s" % ("up.py pid %d" % up if up else "nothing running",
                                "; killed %d leftover process(es)" % len(left) if left else ""))
    return 0


def _ours(pid):
    """Only kill processes that are plausibly ours (python3 helpers, prometheus, gpuscaler)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return any(s in cmd for s in ("fakeserve", "kubelet.py", "service.py", "loadgen.py",
                                  "fakekube", "prometheus", "gpuscaler"))


def cmd_status(a):
    up = procs.read_pidfile(os.path.join(a.state_dir, "up.pid")).get("up")
    if not up or not procs.alive(up):
        say("no local cluster running (state dir %s)" % a.state_dir)
        return 1
    say("up.py pid %d" % up)
    data = procs.read_pidfile(os.path.join(a.state_dir, "pids.json"))
    pods = procs.read_pidfile(os.path.join(a.state_dir, "kubelet-pids.json")).get("pods", {})
    say(json.dumps({"processes": data, "pods": pods}, indent=1, sort_keys=True))
    return 0


def say(msg):
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", nargs="?", default="up", choices=("up", "down", "status"))
    ap.add_argument("--state-dir", default=DEFAULT_STATE)
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--service", default="127.0.0.2:8080", help="Service front address")
    ap.add_argument("--with-gpuscaler", metavar="PATH", help="also run `PATH run ...`")
    ap.add_argument("--gpuscaler-arg", action="append", help="extra flag for gpuscaler run")
    ap.add_argument("--decision-interval", default="5s")
    ap.add_argument("--prometheus", action="store_true",
                    help="run a real prometheus (Debian package) scraping the pods")
    ap.add_argument("--prometheus-interval", default="2s")
    ap.add_argument("--gpuscaler-prometheus", action="store_true",
                    help="annotate the example with metrics-source: prometheus")
    ap.add_argument("--no-example", action="store_true", help="no example Deployment")
    ap.add_argument("--name", default="llm", help="example Deployment name")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--max-replicas", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--service-ms", type=float, default=500.0)
    ap.add_argument("--cold-start", type=float, default=10.0)
    ap.add_argument("--profile", choices=("vllm", "triton", "tgi", "sglang", "nim", "tei"),
                    default="vllm")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--quiet", action="store_true", help="do not print replica changes")
    a = ap.parse_args(argv)
    a.state_dir = os.path.abspath(a.state_dir)
    return {"up": cmd_up, "down": cmd_down, "status": cmd_status}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())

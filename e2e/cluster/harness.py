# SPDX-License-Identifier: Apache-2.0
"""The Python API of the local cluster, for closed-loop e2e tests and for up.py.

    from cluster.harness import LocalCluster
    lc = LocalCluster().start()                  # fakekube + kubelet (+ replica-history watch)
    try:
        lc.create_deployment("llm", replicas=1, gpus=1, slots=4, service_ms=200, cold_start=2,
                             annotations={"gpuscaler.io/enabled": "true",
                                          "gpuscaler.io/capacity-per-gpu": "16"})
        url = lc.expose("llm")                   # Service front on 127.0.0.2:<free port>
        lc.wait_ready("llm", 1)
        lc.start_gpuscaler(os.environ["GPUSCALER_BIN"])          # optional
        run = lc.start_load("llm", profile="peak", peak_rps=40, duration="60s", interval=1)
        run.wait(120)
        run.intervals(), run.summary               # per-interval and overall p50/p95/p99
        lc.replica_history("llm")                  # [{"t", "ts", "spec", "replicas", "ready"}]
    finally:
        lc.stop()                                  # everything killed by PID

Every process (fakekube, kubelet, Service fronts, load generators, gpuscaler, prometheus, and
through the kubelet each fakeserve) is a child started by PID, listed in STATE/pids.json, and
stopped by PID in stop() (also at interpreter exit).  Times: "t" is seconds since start()
(monotonic), "ts" wall-clock seconds (the load generator's records carry "ts" too).
"""

import atexit
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)
if E2E not in sys.path:
    sys.path.insert(0, E2E)

from fakekube import harness as fkh  # noqa: E402
from fakekube.kubeclient import ApiError, wait_for  # noqa: E402
from cluster import procs  # noqa: E402
from cluster.informer import Informer  # noqa: E402
from cluster.kubelet import LABEL, parse_duration, put_gpu_node  # noqa: E402

KUBELET = os.path.join(HERE, "kubelet.py")
SERVICE = os.path.join(HERE, "service.py")
LOADGEN = os.path.join(HERE, "loadgen.py")
PYTHON = sys.executable or "/usr/bin/python3"
_live = []


# what gpuscaler logs once a listener is bound (cmd/gpuscaler/run.c, at level info), and
# Prometheus (its web package; 2.x writes component=web before msg, 3.x after), the address
# next, its port last
LISTEN_LINES = {"metrics": re.escape("serving /metrics on "),
                "health": re.escape("serving /healthz /livez /readyz on "),
                "extmetrics": re.escape("serving external.metrics.k8s.io/v1beta1 on "),
                "prometheus": r'msg="Listening on"[^\n]*?address='}


def logged_port(log, proc, what, offset=0, timeout=30.0):
    """The port of a listener (a key of LISTEN_LINES: gpuscaler's, or Prometheus'), read from
    the process's log past offset (the log's size before it started). Tests start servers on
    port 0 and read the port back: a free port picked and released for a server to bind later
    is free only until it is released, and another test process running beside this one could
    bind it first."""
    pat = re.compile(LISTEN_LINES[what] + r"[^\s\"]*:(\d+)")
    deadline = time.monotonic() + timeout
    while True:
        exited = proc.poll() is not None     # before the read: its last lines are in the file
        try:
            with open(log, "rb") as f:
                f.seek(offset)
                m = pat.search(f.read().decode(errors="replace"))
        except OSError:
            m = None
        if m:
            return int(m.group(1))
        if exited:
            raise RuntimeError("pid %d exited with %s before serving %s%s"
                               % (proc.pid, proc.returncode, what, _tail(log)))
        if time.monotonic() > deadline:
            raise RuntimeError("pid %d did not serve %s in %.0fs%s"
                               % (proc.pid, what, timeout, _tail(log)))
        time.sleep(0.02)


def log_size(path):
    """The size of an appended log before a process starts writing it (0 if none yet)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _wait_file(path, proc, timeout, what, log=None):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %s%s" % (what, proc.returncode, _tail(log)))
        if time.monotonic() > deadline:
            raise RuntimeError("%s did not start in %.0fs%s" % (what, timeout, _tail(log)))
        time.sleep(0.02)
    with open(path) as f:
        return f.read().strip()


def _tail(path, n=3000):
    if not path:
        return ""
    try:
        with open(path, errors="replace") as f:
            return ":\n" + f.read()[-n:]
    except OSError:
        return ""


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for ln in f:
                ln = ln.strip()
                if ln:
                    try:
                        out.append(json.loads(ln))
                    except ValueError:
                        pass        # a line being written
    except OSError:
        pass
    return out


class LoadRun:
    """A load generator process (loadgen.py) writing JSON lines to a file."""

    def __init__(self, proc, out_path, raw_path, log_path):
        self.proc = proc
        self.pid = proc.pid
        self.out_path = out_path
        self.raw_path = raw_path
        self.log_path = log_path

    def records(self):
        return read_jsonl(self.out_path)

    def intervals(self):
        """Interval records so far: t, ts, target_rps, sent, completed, ok, errors, dropped,
        inflight, error_rate, p50_ms, p90_ms, p95_ms, p99_ms, max_ms, mean_ms."""
        return [r for r in self.records() if r.get("type") == "interval"]

    @property
    def summary(self):
        s = [r for r in self.records() if r.get("type") == "summary"]
        return s[-1] if s else None

    def raw(self):
        """Per-request records (t_arrival, t_start, t_end, latency_ms, status, error)."""
        return read_jsonl(self.raw_path) if self.raw_path else []

    def running(self):
        return self.proc.poll() is None

    def wait(self, timeout):
        """Wait for the end of the run; returns the summary (raises TimeoutError)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError("load generator still running after %.0fs" % timeout)
        if self.summary is None:
            raise RuntimeError("load generator exited %s without a summary%s"
                               % (self.proc.returncode, _tail(self.log_path)))
        return self.summary

    def stop(self):
        """Stop early (SIGTERM: it stops sending, waits for in-flight requests, summarises)."""
        procs.stop(self.proc, 40)


def octet_range():
    """The second octets (127.N.x.y) this test process may give its fake pods: the
    GPUSCALER_E2E_OCTETS range "LO-HI" that e2e/meson.build gives each test file, so test files
    that run at the same time never share an address; 64-250 when run alone."""
    lo, hi = 64, 250
    r = os.environ.get("GPUSCALER_E2E_OCTETS", "")
    if r:
        a, _, b = r.partition("-")
        lo, hi = int(a), int(b)
    return lo, hi


class LocalCluster:
    def __init__(self, namespace="default", state_dir=None, ip_prefix=None, kubelet_all=False,
                 bookmark_interval="5s", control_token=None):
        self.namespace = namespace
        self._own_dir = state_dir is None
        self.state_dir = os.path.abspath(state_dir or tempfile.mkdtemp(prefix="localcluster-"))
        os.makedirs(self.state_dir, exist_ok=True)
        self.ip_prefix = ip_prefix or "127.%d" % random.randint(*octet_range())
        self.kubelet_all = kubelet_all
        self.bookmark_interval = bookmark_interval
        self.control_token = control_token or "fake-" + os.urandom(8).hex()
        self.fk = None
        self.client = None
        self.kubelet = None
        self.services = {}          # deployment -> {"proc", "url", "host", "port", "log"}
        self.loads = []
        self.gpuscaler = None
        self.gpuscaler_log = None
        self.gpuscaler_metrics = None
        self.prometheus = None
        self.prometheus_url = None
        self._prom_inf = None
        self._history = {}
        self._hist_lock = threading.Lock()
        self._hist_inf = None
        self.t0 = None
        self.stopped = False

    # ------------------------------------------------------------ lifecycle

    @property
    def kubeconfig(self):
        return self.fk.kubeconfig

    @property
    def events_path(self):
        return os.path.join(self.state_dir, "kubelet-events.jsonl")

    def start(self, kubelet_timeout=20.0):
        """Start fakekube (HTTPS, token kubeconfig) and the kubelet; returns self."""
        _live.append(self)
        self.t0 = time.monotonic()
        try:
            self.fk = fkh.start(tmpdir=os.path.join(self.state_dir, "fakekube"),
                                bookmark_interval=self.bookmark_interval)
            self.client = self.fk.client(timeout=10)
            if self.namespace != "default" and \
                    self.client.get_or_none("namespaces", self.namespace) is None:
                self.client.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": self.namespace}})
            log = os.path.join(self.state_dir, "kubelet.log")
            cmd = [PYTHON, KUBELET, "--kubeconfig", self.kubeconfig, "--namespace",
                   self.namespace, "--state-dir", self.state_dir, "--ip-prefix", self.ip_prefix,
                   "--control-token", self.control_token]
            if self.kubelet_all:
                cmd.append("--all")
            self.kubelet = procs.spawn(cmd, log)
            self.kubelet_log = log
            pidfile = os.path.join(self.state_dir, "kubelet-pids.json")
            _wait_file(pidfile, self.kubelet, kubelet_timeout, "kubelet", log)
            # assigned before it starts: its first list calls _record_history,
            # which reads self._hist_inf
            self._hist_inf = Informer(self.client, "deployments", self.namespace, None,
                                      self._record_history, name="harness-history")
            self._hist_inf.start()
            self._hist_inf.wait_synced(20)
            self._write_pids()
        except BaseException:
            self.stop()
            raise
        return self

    def _write_pids(self):
        data = {"harness": os.getpid()}
        if self.fk is not None and self.fk.pid:
            data["fakekube"] = self.fk.pid
        if self.kubelet is not None:
            data["kubelet"] = self.kubelet.pid
        data["services"] = {k: v["proc"].pid for k, v in self.services.items()}
        data["loadgen"] = [r.pid for r in self.loads if r.running()]
        if self.gpuscaler is not None:
            data["gpuscaler"] = self.gpuscaler.pid
        if self.prometheus is not None:
            data["prometheus"] = self.prometheus.pid
        procs.write_pidfile(os.path.join(self.state_dir, "pids.json"), data)

    def stop(self):
        """Stop everything by PID: load generators, gpuscaler, Service fronts, the kubelet (which
        stops its fakeserve processes), any pod process left, prometheus, fakekube."""
        if self.stopped:
            return
        self.stopped = True
        for r in self.loads:
            procs.stop(r.proc, 5)
        if self.gpuscaler is not None:
            procs.stop(self.gpuscaler, 5)
        for s in self.services.values():
            procs.stop(s["proc"], 3)
        if self.kubelet is not None:
            procs.stop(self.kubelet, 10)
        for pid in procs.pids_in(procs.read_pidfile(
                os.path.join(self.state_dir, "kubelet-pids.json")).get("pods", {})):
            procs.stop(pid, 2)
        if self._prom_inf is not None:
            self._prom_inf.stop()
        if self.prometheus is not None:
            procs.stop(self.prometheus, 5)
        if self._hist_inf is not None:
            self._hist_inf.stop()
        if self.client is not None:
            self.client.close()
        if self.fk is not None:
            self.fk.stop(keep_dir=True)
        if self._own_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        if self in _live:
            _live.remove(self)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def now(self):
        return time.monotonic() - self.t0

    # ------------------------------------------------------------ deployments

    def create_deployment(self, name, replicas=1, gpus=1, slots=4, service_ms=500.0,
                          service_sigma=0.25, profile="vllm", cold_start=2.0, port=8000,
                          model=None, annotations=None, template_annotations=None, labels=None,
                          grace=10, pre_stop=0.3, metrics_fault="none", max_queue=None,
                          seed=None, port_name="http", node_selector=None):
        """Create a Deployment the kubelet runs with fakeserve pods.  annotations go on the
        Deployment (gpuscaler.io/* keys); the fakeserve settings become template annotations
        e2e.gpuscaler.io/*; the container asks for `gpus` nvidia.com/gpu; node_selector becomes
        the pod template's spec.nodeSelector (the kubelet places such pods only on matching
        Nodes, within their GPUs: set_gpu_node).  Returns the object."""
        app = {"app": name}
        tann = {ANN("gpus"): str(gpus), ANN("slots"): str(slots),
                ANN("service-ms"): str(service_ms), ANN("service-sigma"): str(service_sigma),
                ANN("profile"): profile, ANN("cold-start"): "%gs" % parse_duration(cold_start),
                ANN("metrics-fault"): metrics_fault, ANN("pre-stop"): "%gs" % pre_stop}
        if model:
            tann[ANN("model")] = model
        if max_queue is not None:
            tann[ANN("max-queue")] = str(max_queue)
        if seed is not None:
            tann[ANN("seed")] = str(seed)
        tann.update(template_annotations or {})
        dlabels = dict(labels or {}, **app)
        dlabels[LABEL] = "true"
        dep = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": self.namespace, "labels": dlabels,
                            "annotations": dict(annotations or {})},
               "spec": {"replicas": replicas, "selector": {"matchLabels": dict(app)},
                        "template": {
                            "metadata": {"labels": dict(app), "annotations": tann},
                            "spec": {"terminationGracePeriodSeconds": grace,
                                     "containers": [{
                                         "name": "server", "image": "gpuscaler/fakeserve:e2e",
                                         "ports": [{"name": port_name, "containerPort": port,
                                                    "protocol": "TCP"}],
                                         "resources": {"limits": {"nvidia.com/gpu": gpus},
                                                       "requests": {"cpu": "100m"}}}]}}}}
        if node_selector:
            dep["spec"]["template"]["spec"]["nodeSelector"] = dict(node_selector)
        if not dep["metadata"]["annotations"]:
            del dep["metadata"]["annotations"]
        return self.client.create("deployments", dep, self.namespace)

    def set_gpu_node(self, name, gpus, labels=None, resource="nvidia.com/gpu"):
        """Create or update a Node with `gpus` allocatable `resource` (and `labels`): the
        kubelet's GPU budget there.  Raising it, or adding a Node, is what a cluster
        autoscaler's new capacity looks like; the kubelet then binds the pending pods."""
        put_gpu_node(self.client, name, gpus, labels, resource)

    def delete_node(self, name):
        try:
            self.client.delete("nodes", name)
        except ApiError as e:
            if e.code != 404:
                raise

    def delete_deployment(self, name):
        self.client.delete("deployments", name, self.namespace)

    def scale(self, name, replicas):
        """Set spec.replicas through the /scale subresource (as gpuscaler does)."""
        return self.client.patch_scale("deployments", name, replicas, self.namespace)

    def deployment(self, name):
        return self.client.get("deployments", name, self.namespace)

    def pods(self, name=None, include_terminating=True):
        """Pods of a deployment (by its selector) or of the namespace."""
        sel = None
        if name is not None:
            ml = (self.deployment(name)["spec"].get("selector") or {}).get("matchLabels") or {}
            sel = ",".join("%s=%s" % kv for kv in sorted(ml.items()))
        items = self.client.list("pods", self.namespace, label_selector=sel)["items"]
        if not include_terminating:
            items = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return items

    def ready_pods(self, name=None):
        from cluster.service import pod_ready
        return [p for p in self.pods(name) if pod_ready(p)]

    def wait_ready(self, name, n, timeout=30.0, exact=True):
        """Wait until the deployment has n Ready pods (and, with exact, n pods in all, none
        terminating) and status.readyReplicas == n; returns the Ready pods."""
        def ok():
            st = self.deployment(name).get("status") or {}
            if (st.get("readyReplicas") or 0) != n:
                return False
            pods = self.pods(name)
            ready = self.ready_pods(name)
            if len(ready) != n or (exact and len(pods) != n):
                return False
            return ready
        return wait_for(ok, timeout, interval=0.05,
                        message="%d ready pod(s) of %s" % (n, name))

    def wait_replicas(self, name, spec=None, ready=None, at_least=True, timeout=60.0):
        """Wait until spec.replicas and/or status.readyReplicas reach the given values (at
        least them, or exactly with at_least=False), e.g. after gpuscaler scaled; returns the
        Deployment."""
        def cmp(v, want):
            return want is None or (v >= want if at_least else v == want)

        def ok():
            d = self.deployment(name)
            st = d.get("status") or {}
            return d if cmp(d["spec"].get("replicas", 0), spec) and \
                cmp(st.get("readyReplicas") or 0, ready) else None
        return wait_for(ok, timeout, interval=0.1,
                        message="%s: spec %s ready %s" % (name, spec, ready))

    def pod_url(self, pod):
        port = pod["spec"]["containers"][0]["ports"][0]["containerPort"]
        return "http://%s:%d" % (pod["status"]["podIP"], port)

    def pod_metrics(self, pod, timeout=3.0, path="/metrics"):
        """GET the metrics (at path: NIM's are at /v1/metrics) of one pod (dict or name)."""
        if isinstance(pod, str):
            pod = self.client.get("pods", pod, self.namespace)
        with urllib.request.urlopen(self.pod_url(pod) + path, timeout=timeout) as r:
            return r.read().decode()

    def fault(self, pod, metrics=None, metrics_delay_ms=None, service_ms=None):
        """Harness-only fault control of one pod's fakeserve: metrics 'hang', 'garbage', 'slow'
        or 'none'; metrics_delay_ms for 'slow'; service_ms changes the mean service time."""
        if isinstance(pod, str):
            pod = self.client.get("pods", pod, self.namespace)
        body = {}
        if metrics is not None:
            body["metrics"] = metrics
        if metrics_delay_ms is not None:
            body["metrics_delay_ms"] = metrics_delay_ms
        if service_ms is not None:
            body["service_ms"] = service_ms
        return self._control(pod, "POST", "/_fake/fault", body)

    def pod_state(self, pod):
        """fakeserve's own counters (requests, success, running, waiting, capacity_rps...)."""
        if isinstance(pod, str):
            pod = self.client.get("pods", pod, self.namespace)
        return self._control(pod, "GET", "/_fake/state")

    def _control(self, pod, method, path, body=None):
        req = urllib.request.Request(self.pod_url(pod) + path, method=method,
                                     data=json.dumps(body).encode() if body is not None
                                     else None,
                                     headers={"X-Fake-Token": self.control_token,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    # ------------------------------------------------------------ history / events

    def _record_history(self):
        now, ts = self.now(), time.time()
        for d in self._hist_inf.snapshot().values():
            name = d["metadata"]["name"]
            st = d.get("status") or {}
            rec = {"spec": (d.get("spec") or {}).get("replicas", 0),
                   "replicas": st.get("replicas") or 0, "ready": st.get("readyReplicas") or 0}
            with self._hist_lock:
                h = self._history.setdefault(name, [])
                if not h or {k: h[-1][k] for k in rec} != rec:
                    h.append(dict(rec, t=round(now, 3), ts=round(ts, 3)))

    def replica_history(self, name):
        """Every change of (spec.replicas, status.replicas, status.readyReplicas) seen by a
        watch since start(): [{"t", "ts", "spec", "replicas", "ready"}]."""
        with self._hist_lock:
            return [dict(r) for r in self._history.get(name, [])]

    def events(self, kind=None, deployment=None):
        """The kubelet's lifecycle events (pod-created, pod-ready with cold_start_measured,
        pod-terminating, process-exit, pod-deleted, process-restart)."""
        return [e for e in read_jsonl(self.events_path)
                if (kind is None or e.get("event") == kind) and
                (deployment is None or e.get("deployment") == deployment)]

    # ------------------------------------------------------------ service front

    def expose(self, name, listen="127.0.0.2:0", policy="least-conn", timeout=20.0):
        """Create a Service object for the deployment and start a Service front on listen
        (port 0 = a free port); returns its URL (also self.services[name]["url"])."""
        dep = self.deployment(name)
        ml = (dep["spec"].get("selector") or {}).get("matchLabels") or {}
        cport = dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]
        host, _, port = listen.rpartition(":")
        svc = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": self.namespace},
               "spec": {"selector": dict(ml), "ports": [{
                   "name": "http", "port": int(port) or 80,
                   "targetPort": cport["containerPort"], "protocol": "TCP"}]}}
        try:
            self.client.create("services", svc, self.namespace)
        except ApiError as e:
            if e.code != 409:
                raise
        log = os.path.join(self.state_dir, "service-%s.log" % name)
        pf = os.path.join(self.state_dir, "service-%s.port" % name)
        if os.path.exists(pf):
            os.unlink(pf)
        proc = procs.spawn([PYTHON, SERVICE, "--kubeconfig", self.kubeconfig, "--namespace",
                            self.namespace, "--service", name, "--listen", listen, "--policy",
                            policy, "--port-file", pf], log)
        self.services[name] = {"proc": proc, "log": log, "host": host}
        self._write_pids()
        p = int(_wait_file(pf, proc, timeout, "service front for %s" % name, log))
        url = "http://%s:%d" % (host, p)
        self.services[name].update(port=p, url=url)
        return url

    def service_url(self, name):
        return self.services[name]["url"]

    def service_state(self, name):
        with urllib.request.urlopen(self.service_url(name) + "/_service/endpoints",
                                    timeout=5) as r:
            return json.loads(r.read())

    # ------------------------------------------------------------ load

    def start_load(self, target, profile="peak", peak_rps=None, duration=None, rate=None,
                   stages=None, start_rps=0.0, trace=None, compress=1.0, trace_peak_rps=None, trace_start=0.0,
                   trace_duration=None, interval=1.0, sla_ms=None, max_error_rate=None,
                   concurrency=128, timeout=30.0, seed=1, model=None, max_tokens=None,
                   raw=False, graceful_stop=None):
        """Start loadgen.py against a deployment's Service front (name) or a URL.  profile:
        'peak' (the k6 peak.js shape, peak_rps over duration), 'constant' (rate over
        duration), 'stages' (stages=[(duration_s, target_rps)], linear ramps from start_rps,
        as k6 stages), 'trace' (CSV, compress, trace_peak_rps).  Call it from a thread that
        outlives the run (children die with the thread that started them).  Returns a
        LoadRun."""
        url = self.services[target]["url"] if target in self.services else target
        n = len(self.loads)
        out = os.path.join(self.state_dir, "load-%d.jsonl" % n)
        rawp = os.path.join(self.state_dir, "load-%d-raw.jsonl" % n) if raw else None
        log = os.path.join(self.state_dir, "load-%d.log" % n)
        cmd = [PYTHON, LOADGEN, "--target-url", url, "--profile", profile, "--interval",
               str(interval), "--concurrency", str(concurrency), "--timeout", str(timeout),
               "--seed", str(seed), "--out", out]
        opt = {"--peak-rps": peak_rps, "--duration": duration, "--rate": rate,
               "--trace": trace, "--trace-peak-rps": trace_peak_rps,
               "--trace-duration": trace_duration, "--sla-ms": sla_ms,
               "--max-error-rate": max_error_rate, "--model": model,
               "--max-tokens": max_tokens, "--raw": rawp, "--graceful-stop": graceful_stop}
        for k, v in opt.items():
            if v is not None:
                cmd += [k, str(v)]
        if profile == "trace":
            cmd += ["--compress", str(compress), "--trace-start", str(trace_start)]
        if profile == "stages":
            cmd += ["--stages", ",".join("%gs:%g" % (d, r) for d, r in stages),
                    "--start-rps", str(start_rps)]
        run = LoadRun(procs.spawn(cmd, log), out, rawp, log)
        self.loads.append(run)
        self._write_pids()
        return run

    # ------------------------------------------------------------ gpuscaler

    def start_gpuscaler(self, binary, args=None, extra_args=(), decision_interval="1s",
                        log_format="json", config=None, env=None):
        """Start `gpuscaler run` against this cluster's kubeconfig.  args replaces the default
        flags entirely; extra_args are appended.  config (dict) is written as YAML-compatible
        JSON and passed with --config.  Returns the Popen (log: self.gpuscaler_log); with the
        default flags it listens on port 0 and self.gpuscaler_metrics is its URL once bound (None
        with a warn or error --log-level in extra_args: the line it is read from is info's)."""
        if self.gpuscaler is not None and self.gpuscaler.poll() is None:
            raise RuntimeError("gpuscaler already running (pid %d)" % self.gpuscaler.pid)
        self.gpuscaler_metrics = None
        default = args is None
        if default:
            args = ["run", "--kubeconfig", self.kubeconfig, "--leader-elect=false",
                    "--namespace", self.namespace, "--decision-interval", decision_interval,
                    "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0",
                    "--log-format", log_format]
            if config:
                path = os.path.join(self.state_dir, "gpuscaler-config.yaml")
                with open(path, "w") as f:
                    json.dump(config, f, indent=1)   # JSON is YAML
                args += ["--config", path]
        self.gpuscaler_log = os.path.join(self.state_dir, "gpuscaler.log")
        offset = log_size(self.gpuscaler_log)
        e = dict(os.environ)
        e.update(env or {})
        self.gpuscaler = procs.spawn([binary] + list(args) + list(extra_args),
                                     self.gpuscaler_log, env=e)
        self._write_pids()
        # bound on port 0: the URL once it listens (read from its info-level line, which a
        # quieter level leaves out)
        quiet = any(a in ("warn", "error") or a.startswith("--log-level=w") or
                    a.startswith("--log-level=e") for a in extra_args)
        if default and not quiet:
            self.gpuscaler_metrics = "http://127.0.0.1:%d" % logged_port(
                self.gpuscaler_log, self.gpuscaler, "metrics", offset)
        return self.gpuscaler

    def stop_gpuscaler(self, grace=5.0):
        if self.gpuscaler is not None:
            return procs.stop(self.gpuscaler, grace)
        return None

    def gpuscaler_output(self):
        return _tail(self.gpuscaler_log, 10 ** 7)[2:]

    # ------------------------------------------------------------ prometheus

    def start_prometheus(self, binary="prometheus", scrape_interval="2s", timeout=30.0):
        """Start a real Prometheus scraping every Ready pod's /metrics (file_sd targets kept up
        to date from a pod watch, labels namespace/pod/deployment); returns its URL."""
        path = shutil.which(binary) or binary
        if not os.path.exists(path):
            raise RuntimeError("prometheus binary %r not found (apt-get install prometheus)"
                               % binary)
        d = os.path.join(self.state_dir, "prometheus")
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        targets = os.path.join(d, "targets.json")
        self._write_targets(targets, [])
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: %s\n  scrape_timeout: %s\n"
                    "scrape_configs:\n  - job_name: fakeserve\n    file_sd_configs:\n"
                    "      - files: [%s]\n        refresh_interval: 1s\n"
                    % (scrape_interval, scrape_interval, json.dumps(targets)))
        log = os.path.join(d, "prometheus.log")
        offset = log_size(log)
        self.prometheus = procs.spawn([path, "--config.file", os.path.join(d, "prometheus.yml"),
                                       "--storage.tsdb.path", os.path.join(d, "data"),
                                       "--web.listen-address", "127.0.0.1:0",
                                       "--storage.tsdb.retention.time", "1d"], log)
        self._write_pids()
        self.prometheus_url = "http://127.0.0.1:%d" % logged_port(
            log, self.prometheus, "prometheus", offset, timeout)
        from cluster.service import pod_ready, pod_port

        def update():
            groups = []
            for p in self._prom_inf.snapshot().values():
                if not pod_ready(p):
                    continue
                owner = (p["metadata"].get("ownerReferences") or [{}])[0].get("name", "")
                groups.append({"targets": ["%s:%d" % (p["status"]["podIP"],
                                                      pod_port(p, None) or 8000)],
                               "labels": {"namespace": self.namespace,
                                          "pod": p["metadata"]["name"],
                                          "deployment": owner.rsplit("-", 1)[0]}})
            self._write_targets(targets, groups)

        # assigned before it starts: its first list calls update(), which reads
        # self._prom_inf (started first, a list that won the race found None
        # there, and pods already ready were never written as targets)
        self._prom_inf = Informer(self.client, "pods", self.namespace, None, update,
                                  name="harness-prometheus-sd")
        self._prom_inf.start()

        def ready():
            try:
                with urllib.request.urlopen(self.prometheus_url + "/-/ready", timeout=1) as r:
                    return r.status == 200
            except (OSError, urllib.error.URLError):
                if self.prometheus.poll() is not None:
                    raise RuntimeError("prometheus exited%s" % _tail(log))
                return False
        wait_for(ready, timeout, interval=0.2, message="prometheus ready")
        return self.prometheus_url

    @staticmethod
    def _write_targets(path, groups):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(groups, f)
        os.replace(tmp, path)

    def prom_query(self, expr):
        """Instant query against the started Prometheus; returns data.result."""
        from urllib.parse import urlencode
        with urllib.request.urlopen(self.prometheus_url + "/api/v1/query?" +
                                    urlencode({"query": expr}), timeout=5) as r:
            return json.loads(r.read())["data"]["result"]


def ANN(key):
    return "e2e.gpuscaler.io/" + key


@atexit.register
def _stop_all():
    for lc in list(_live):
        try:
            lc.stop()
        except Exception:   # best effort at interpreter exit
            pass

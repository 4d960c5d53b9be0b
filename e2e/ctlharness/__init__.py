# SPDX-License-Identifier: Apache-2.0
"""Helpers for the controller's end-to-end tests (e2e/test_controller.py).

Everything here talks to the API server only through the Kubernetes API (the
kubeconfig), so the same tests run against a real cluster when KUBECONFIG is
given. Pieces:

- MetricsPods: one plain-HTTP listener on 0.0.0.0:PORT that answers for every
  pod address 127.0.9.N (all of 127/8 is loopback), serving a vLLM-shaped
  exposition whose request counter grows at a rate the test sets, split
  evenly over the pods that are registered.
- MiniKubelet: keeps a Deployment's pods equal to spec.replicas (creating Pod
  objects with their IPs and Ready status through the API, deleting the
  newest on scale-in) and keeps Deployment status up to date.
- Gpuscaler: runs the daemon as a subprocess, logs to a file, stops by PID.
- deploy_manifests / create_objects: the objects of deploy/*.yaml, created through the API
  (the RBAC tests run gpuscaler under them).
"""
import http.server
import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GPUSCALER_BIN") or os.path.join(ROOT, "build", "cmd", "gpuscaler",
                                                      "gpuscaler")


def deploy_manifests(*files, edit=None):
    """The objects of deploy/<file> for each file, in order; edit(text) rewrites a file's text
    before it is read."""
    import yaml
    docs = []
    for f in files:
        with open(os.path.join(ROOT, "deploy", f)) as fh:
            text = fh.read()
        docs += [d for d in yaml.safe_load_all(edit(text) if edit else text) if d]
    return docs


def create_objects(client, docs):
    """Create each object through the API, in order, as `kubectl create -f` does."""
    from fakekube import kubeclient
    plural = {v[3]: k for k, v in kubeclient.KNOWN.items()}
    for d in docs:
        client.create(plural[d["kind"]], d, namespace=d["metadata"].get("namespace"))


# Durations compressed for tests: decisions every second, scrapes every 500 ms
# over a 3 s rate window; scale-out after 4 s above target, scale-in after 6 s
# below; no leader election, no forecaster.
FAST_CONFIG = """decision-interval: 1s
leader-election: {enabled: false}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
"""
FAST_ANNOTATIONS = {
    "gpuscaler.io/enabled": "true",
    "gpuscaler.io/capacity-per-gpu": "10",
    "gpuscaler.io/scale-out-after": "4s",
    "gpuscaler.io/scale-in-after": "6s",
    "gpuscaler.io/min-replicas": "1",
    "gpuscaler.io/max-replicas": "8",
    "gpuscaler.io/predictive": "false",
    "gpuscaler.io/metrics-stale-after": "5s",
}


class MetricsPods:
    """Fake serving pods' /metrics, keyed by the local address a scrape hits."""

    def __init__(self, port=None):
        self.port = port          # None: any free port, known once bound (below)
        self.lock = threading.Lock()
        self.rates = {}          # group (deployment) -> total requests/s over its pods
        self.other = {}          # group -> requests/s of a second model's series (none if absent)
        self.shape = {}          # group -> "nim" (NIM's names, at /v1/metrics only), "tei",
        #                          "triton" (the second rate its REJECTED failures); else vLLM's
        self.pods = {}           # ip -> {"count": float, "other": float, "t": time, "group": str}
        self.mode = {}           # ip -> None | "garbage" | "hang" | "500"
        self.scrapes = 0
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                ip = self.connection.getsockname()[0]
                body, status = outer._render(ip, self.path)
                if status is None:          # hang: never answer (bounded)
                    time.sleep(5)
                    return
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class S(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        # port 0 unless one was asked for: a port picked first and bound later can be taken
        # meanwhile by a test running beside this one
        self.server = S(("0.0.0.0", self.port or 0), H)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _advance(self, now):
        sizes = {}
        for st in self.pods.values():
            sizes[st["group"]] = sizes.get(st["group"], 0) + 1
        for st in self.pods.values():
            g = st["group"]
            st["count"] += (now - st["t"]) * self.rates.get(g, 0.0) / sizes[g]
            st["other"] += (now - st["t"]) * self.other.get(g, 0.0) / sizes[g]
            st["t"] = now

    def _render(self, ip, path):
        with self.lock:
            self.scrapes += 1
            self._advance(time.time())
            st = self.pods.get(ip)
            mode = self.mode.get(ip)
        if st is None:
            return "not a pod\n", 404
        if mode == "hang":
            return None, None
        if mode == "garbage":
            return "vllm:request_success_total{{{ this is not prometheus\n\x00\x01", 200
        if mode == "500":
            return "boom\n", 500
        if self.shape.get(st["group"]) == "nim":
            if path != "/v1/metrics":
                return "Not Found\n", 404
            return ("# TYPE request_success_total counter\n"
                    'request_success_total{model_name="m"} %.3f\n'
                    "# TYPE request_failure_total counter\n"
                    'request_failure_total{model_name="m"} %.3f\n'
                    "# TYPE num_requests_running gauge\n"
                    'num_requests_running{model_name="m"} 1\n'
                    "# TYPE num_requests_waiting gauge\n"
                    'num_requests_waiting{model_name="m"} 0\n' % (st["count"], st["count"])), 200
        if self.shape.get(st["group"]) == "tei":
            # metrics-rs: series appear with their first use, so a pod that has served nothing
            # shows only the backend's gauge; inputs arrive in HTTP batches of 8
            body = "# TYPE te_backend_replicas_healthy gauge\nte_backend_replicas_healthy 1\n"
            if st["count"] > 0:
                body += ("\n# TYPE te_request_success counter\n"
                         'te_request_success{method="batch"} %.3f\n'
                         "\n# TYPE te_embed_success counter\nte_embed_success %.3f\n"
                         "\n# TYPE te_queue_size gauge\nte_queue_size 0\n"
                         % (st["count"] / 8, st["count"]))
            return body, 200
        if self.shape.get(st["group"]) == "triton":
            # prometheus-cpp: no _total; a failure series per reason, created with the model;
            # the refused requests are the other rate, and as many BACKEND failures twice over
            body = "# TYPE nv_inference_request_success counter\n"
            body += 'nv_inference_request_success{model="m",version="1"} %.3f\n' % st["count"]
            body += "# TYPE nv_inference_request_failure counter\n"
            for reason, n in (("REJECTED", st["other"]), ("CANCELED", 0),
                              ("BACKEND", 2 * st["other"]), ("OTHER", 0)):
                body += ('nv_inference_request_failure{model="m",reason="%s",version="1"} %.3f\n'
                         % (reason, n))
            body += ("# TYPE nv_inference_pending_request_count gauge\n"
                     'nv_inference_pending_request_count{model="m",version="1"} 0\n')
            return body, 200
        other = ""
        if st["group"] in self.other:   # a second model served by the same pods
            other = ('vllm:request_success_total{engine="0",finished_reason="stop",'
                     'model_name="other"} %.3f\n' % st["other"])
        body = ("# HELP vllm:request_success_total Count of successfully processed requests.\n"
                "# TYPE vllm:request_success_total counter\n"
                'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} %.3f\n'
                "%s"
                "# TYPE vllm:num_requests_running gauge\n"
                'vllm:num_requests_running{engine="0",model_name="m"} 1\n'
                "# TYPE vllm:num_requests_waiting gauge\n"
                'vllm:num_requests_waiting{engine="0",model_name="m"} 0\n' % (st["count"], other))
        return body, 200

    def set_rate(self, group, rate):
        with self.lock:
            self._advance(time.time())
            self.rates[group] = float(rate)

    def set_other_rate(self, group, rate):
        """The group's pods also count a second model's requests (model_name="other")."""
        with self.lock:
            self._advance(time.time())
            self.other[group] = float(rate)

    def set_shape(self, group, shape):
        """The group's pods answer in another engine's shape ("nim", "tei", "triton"), or
        vLLM's (None)."""
        with self.lock:
            self.shape[group] = shape

    def add(self, ip, group):
        with self.lock:
            self._advance(time.time())
            self.pods.setdefault(ip, {"count": 0.0, "other": 0.0, "t": time.time(),
                                      "group": group})

    def remove(self, ip):
        with self.lock:
            self._advance(time.time())
            self.pods.pop(ip, None)

    def set_mode(self, ip, mode):
        with self.lock:
            self.mode[ip] = mode

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def container_ports(port, port_name="metrics", extra_port=None):
    """The server container's ports: the metrics one (unnamed when port_name is None), and
    another unnamed one when extra_port is given."""
    ports = [{"containerPort": port} if port_name is None
             else {"name": port_name, "containerPort": port}]
    if extra_port:
        ports.append({"containerPort": extra_port})
    return ports


def deployment(name, replicas, annotations, port, gpus=1, port_name="metrics", extra_port=None):
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "server", "image": "vllm/vllm-openai:latest",
                    "ports": container_ports(port, port_name, extra_port),
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }]},
            },
        },
    }


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class MiniKubelet:
    """Reconciles pods of one Deployment to spec.replicas, through the API only."""

    def __init__(self, client, ns, name, metrics, subnet=9, gpus=1, port=8000, cold_start=0.0,
                 port_name="metrics", extra_port=None, labels=None, owner=None):
        """labels: the pods' (default app=<name>); owner: the name of a ReplicaSet, owned by
        the Deployment, that it creates and that the pods' controller ownerReference names,
        as the Deployment controller's pods have (default none). A fake API server only:
        a real cluster's ReplicaSet controller would manage it."""
        self.c, self.ns, self.name, self.metrics = client, ns, name, metrics
        self.labels = dict(labels or {"app": name})
        self.owner = owner
        self.port_name, self.extra_port = port_name, extra_port
        self.subnet, self.gpus, self.port = subnet, gpus, port
        self.cold_start = cold_start  # seconds from Pod creation to Ready
        self.next_ip = 1
        self.pods = []      # [(pod name, ip)], oldest first
        self.history = []   # (time, spec replicas) whenever it changes
        self.stop_flag = False
        self.thread = None
        self.owner_uid = None

    def _owner_ref(self):
        """The ReplicaSet self.owner (created on first use) as the pods' ownerReference: the
        garbage collector deletes pods whose owner does not exist."""
        if self.owner_uid is None:
            d = self.c.get("deployments", self.name, self.ns)
            rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": self.owner, "labels": dict(self.labels),
                               "ownerReferences": [{
                                   "apiVersion": "apps/v1", "kind": "Deployment",
                                   "name": self.name, "uid": d["metadata"]["uid"],
                                   "controller": True, "blockOwnerDeletion": True}]},
                  "spec": {"replicas": 0, "selector": {"matchLabels": dict(self.labels)},
                           "template": {"metadata": {"labels": dict(self.labels)},
                                        "spec": {"containers": [{"name": "server",
                                                                 "image": "x"}]}}}}
            self.owner_uid = self.c.create("replicasets", rs, self.ns)["metadata"]["uid"]
        return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": self.owner,
                "uid": self.owner_uid, "controller": True, "blockOwnerDeletion": True}

    def sync(self):
        d = self.c.get("deployments", self.name, self.ns)
        want = d["spec"].get("replicas", 1)
        if not self.history or self.history[-1][1] != want:
            self.history.append((time.time(), want))
        while len(self.pods) < want:
            ip = "127.0.%d.%d" % (self.subnet, self.next_ip)
            pname = "%s-%d" % (self.name, self.next_ip)
            self.next_ip += 1
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": pname, "labels": dict(self.labels)},
                   "spec": {"containers": [{
                       "name": "server", "image": "x",
                       "ports": container_ports(self.port, self.port_name, self.extra_port),
                       "resources": {"limits": {"nvidia.com/gpu": str(self.gpus)}}}]}}
            if self.owner:
                pod["metadata"]["ownerReferences"] = [self._owner_ref()]
            self.c.create("pods", pod, self.ns)
            self.metrics.add(ip, self.name)
            self.pods.append((pname, ip))
            if self.cold_start > 0:
                t = threading.Timer(self.cold_start, self._ready, (pname, ip))
                t.daemon = True
                t.start()
            else:
                self._ready(pname, ip)
        while len(self.pods) > want:
            pname, ip = self.pods.pop()
            self.metrics.remove(ip)
            self.c.delete("pods", pname, self.ns)
        st = {"status": {"replicas": want, "readyReplicas": want, "availableReplicas": want,
                         "updatedReplicas": want, "observedGeneration": d["metadata"].get("generation", 1)}}
        self.c.patch("deployments", self.name, st, self.ns, subresource="status")
        return want

    def _ready(self, pname, ip):
        st = {"status": {"phase": "Running", "podIP": ip, "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339()}]}}
        try:
            self.c.patch("pods", pname, st, self.ns, subresource="status")
        except Exception:  # noqa: BLE001 - deleted meanwhile
            pass

    def _run(self):
        while not self.stop_flag:
            try:
                self.sync()
            except Exception:  # the API server may be restarting in a fault test
                pass
            time.sleep(0.3)

    def start(self):
        self.sync()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self):
        self.stop_flag = True
        if self.thread:
            self.thread.join(5)
        for _, ip in self.pods:
            self.metrics.remove(ip)

    def replicas_changes(self):
        return [r for _, r in self.history]


class Gpuscaler:
    """gpuscaler run as a subprocess; log in a temp file; stopped by PID."""

    def __init__(self, kubeconfig, config_yaml, extra=(), ident="gpuscaler-e2e", env=None):
        self.dir = tempfile.mkdtemp(prefix="gpuscaler-e2e-")
        # config and log stay readable after stop(); removed when the test
        # process exits (GPUSCALER_E2E_KEEP=1 keeps them for a post-mortem)
        if not os.environ.get("GPUSCALER_E2E_KEEP"):
            atexit.register(shutil.rmtree, self.dir, True)
        self.config = os.path.join(self.dir, "config.yaml")
        with open(self.config, "w") as f:
            f.write(config_yaml)
        self.ports = {}
        self.logpath = os.path.join(self.dir, "log")
        self.log = open(self.logpath, "wb")
        # listeners on port 0, their ports read from the log (cluster.harness.logged_port)
        args = [BIN, "run", "--kubeconfig", kubeconfig, "--config", self.config,
                "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", "--id", ident,
                "--log-level", "debug"] + list(extra)
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **env) if env else None)
        self.pid = self.proc.pid

    def port(self, what):
        """The port of a listener (metrics, health, extmetrics) once it serves."""
        if what not in self.ports:
            from cluster.harness import logged_port
            self.ports[what] = logged_port(self.logpath, self.proc, what)
        return self.ports[what]

    @property
    def metrics_port(self):
        return self.port("metrics")

    @property
    def health_port(self):
        return self.port("health")

    def text(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def get(self, path, port=None):
        """(status, body) of a GET on the metrics listener (or on port, e.g. health_port)."""
        import urllib.error
        import urllib.request
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port or self.metrics_port, path),
                                        timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metrics(self):
        return self.get("/metrics")[1]

    def metric(self, name, labels=""):
        for line in self.metrics().splitlines():
            if line.startswith(name + labels + " ") or line.startswith(name + labels + "{") and not labels:
                return float(line.rsplit(" ", 1)[1])
        return None

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            os.kill(self.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()
        return self.proc.returncode


def wait_for(pred, timeout, interval=0.2, what="condition"):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            last = pred()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - transient API errors while polling
            last = e
        time.sleep(interval)
    raise AssertionError("timed out after %.0fs waiting for %s (last: %r)" % (timeout, what, last))

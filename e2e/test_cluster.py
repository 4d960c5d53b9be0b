#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Tests of the local cluster (e2e/cluster, e2e/fakeserve) without gpuscaler: scaling through the
/scale subresource creates pods with distinct 127.x.y.z addresses that turn Ready only after the
cold start and serve /metrics in the vLLM, Triton, TGI, SGLang and NIM shapes; metric faults; the Service
front balances over Ready pods only; scale-in is graceful (newest first, in-flight requests
finish, deletionTimestamp while draining); a crashed pod process is restarted; an overloaded
fakeserve's p99 is far above its light-load p99; the load generator's percentiles, counts and
profile shape are consistent with its raw records and the server's own counters; pods beyond a
node's GPUs stay Pending/Unschedulable until GPUs free up; everything stops by PID.  Bounded: about 40 s, loopback only.

Run: /usr/bin/python3 e2e/test_cluster.py   (meson test 'cluster')
"""

import http.client
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

E2E = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, E2E)

from cluster import loadgen, procs  # noqa: E402
from cluster import profile as P  # noqa: E402
from cluster.harness import LocalCluster  # noqa: E402
from fakekube.kubeclient import wait_for  # noqa: E402

LC = None


def setUpModule():
    global LC
    LC = LocalCluster().start()


def tearDownModule():
    if LC is not None:
        LC.stop()


# ---------------------------------------------------------------- helpers

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prom(text):
    """Strict enough Prometheus text parser: {name: [(labels, value)]}, {family: (help, type)}.
    Raises ValueError on a malformed line."""
    series, meta = {}, {}
    for ln in text.split("\n"):
        if not ln:
            continue
        if ln.startswith("# HELP ") or ln.startswith("# TYPE "):
            parts = ln.split(" ", 3)
            if len(parts) < 4:
                raise ValueError("bad comment %r" % ln)
            h, t = meta.get(parts[2], (None, None))
            if parts[1] == "HELP":
                h = parts[3]
            else:
                if parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                    raise ValueError("bad type %r" % ln)
                t = parts[3]
            meta[parts[2]] = (h, t)
            continue
        if ln.startswith("#"):
            continue
        m = _SAMPLE.match(ln)
        if not m:
            raise ValueError("bad sample %r" % ln)
        labels = {}
        if m.group(3):
            body = m.group(3)
            rebuilt = ",".join('%s="%s"' % kv for kv in _LABEL.findall(body))
            if rebuilt != body:
                raise ValueError("bad labels %r" % ln)
            labels = dict(_LABEL.findall(body))
        v = m.group(4)
        value = math.inf if v == "+Inf" else float(v)
        series.setdefault(m.group(1), []).append((labels, value))
    return series, meta


def one(series, name, **labels):
    hits = [v for lab, v in series.get(name, []) if all(lab.get(k) == x for k, x in
                                                          labels.items())]
    if len(hits) != 1:
        raise AssertionError("%s%s: %d series" % (name, labels, len(hits)))
    return hits[0]


def post(url, timeout=30.0, body=None):
    """POST /v1/completions; returns (status, headers, json or None, seconds)."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    t0 = time.monotonic()
    try:
        c.request("POST", "/v1/completions", body=json.dumps(body or {
            "model": "m", "prompt": "hello", "max_tokens": 4}),
            headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        dt = time.monotonic() - t0
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        return r.status, {k.lower(): v for k, v in r.getheaders()}, doc, dt
    finally:
        c.close()


def get(url, timeout=3.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def ready_cond(pod):
    return next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")


# ---------------------------------------------------------------- tests

class Scaling(unittest.TestCase):
    def test_scale_subresource_creates_pods_ready_after_cold_start(self):
        cold = 1.5
        LC.create_deployment("scale", replicas=0, gpus=2, slots=3, service_ms=50,
                             cold_start=cold, port=8100)
        t_scale = time.time()
        LC.scale("scale", 3)
        pods = wait_for(lambda: len(LC.pods("scale")) == 3 and all(
            p["status"].get("podIP") for p in LC.pods("scale")) and LC.pods("scale"), 10)
        # Just created: Running, with an address, not Ready (cold start not over)
        ips = [p["status"]["podIP"] for p in pods]
        self.assertEqual(len(set(ips)), 3, ips)
        for p in pods:
            self.assertRegex(p["status"]["podIP"], r"^127\.\d+\.\d+\.\d+$")
            self.assertTrue(p["status"]["podIP"].startswith(LC.ip_prefix + "."))
            self.assertEqual(p["status"]["phase"], "Running")
            if time.time() - t_scale < cold - 0.3:
                self.assertEqual(ready_cond(p)["status"], "False")
                self.assertIn(get_status(LC.pod_url(p) + "/health"), (0, 503))
            self.assertEqual(p["metadata"]["labels"]["app"], "scale")
            self.assertIn("pod-template-hash", p["metadata"]["labels"])
            ref = p["metadata"]["ownerReferences"][0]
            self.assertEqual((ref["kind"], ref["controller"]), ("ReplicaSet", True))
            rs = LC.client.get("replicasets", ref["name"], LC.namespace)
            self.assertEqual(rs["metadata"]["ownerReferences"][0]["name"], "scale")
            c = p["spec"]["containers"][0]
            self.assertEqual(c["resources"]["limits"]["nvidia.com/gpu"], 2)
            self.assertEqual(c["ports"][0]["containerPort"], 8100)
        ready = LC.wait_ready("scale", 3, 15)
        t_ready = time.time()
        self.assertGreaterEqual(t_ready - t_scale, cold)
        for p in ready:
            rc = ready_cond(p)
            self.assertEqual(rc["status"], "True")
            self.assertRegex(rc["lastTransitionTime"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertEqual(get_status(LC.pod_url(p) + "/health"), 200)
        evs = LC.events("pod-ready", "scale")
        self.assertEqual(len(evs), 3)
        for e in evs:
            self.assertGreaterEqual(e["cold_start_measured"], cold)
        created = {e["pod"]: e["ts"] for e in LC.events("pod-created", "scale")}
        for e in evs:
            self.assertGreaterEqual(e["ts"] - created[e["pod"]], cold)
        LC.wait_replicas("scale", spec=3, ready=3, at_least=False, timeout=5)
        st = LC.deployment("scale")["status"]
        self.assertEqual((st["replicas"], st["readyReplicas"], st["updatedReplicas"],
                          st["availableReplicas"]), (3, 3, 3, 3))
        self.assertEqual(st["observedGeneration"], LC.deployment("scale")["metadata"]["generation"])
        self.assertEqual(LC.client.get_scale("deployments", "scale", LC.namespace)
                         ["status"]["replicas"], 3)
        hist = LC.replica_history("scale")
        self.assertEqual((hist[-1]["spec"], hist[-1]["ready"]), (3, 3))
        self.assertTrue(any(h["spec"] == 3 and h["ready"] == 0 for h in hist), hist)
        # capacity of one pod is what the annotations say: G*S/mean
        self.assertAlmostEqual(LC.pod_state(ready[0])["capacity_rps"], 2 * 3 / 0.05, 6)

    def test_crashed_process_is_restarted(self):
        LC.create_deployment("crash", replicas=1, service_ms=20, cold_start=0.3, port=8200)
        pod = LC.wait_ready("crash", 1, 10)[0]
        pid = LC.pod_state(pod)["pid"]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: ready_cond(LC.client.get("pods", pod["metadata"]["name"],
                                                  LC.namespace))["status"] == "False", 10)
        again = LC.wait_ready("crash", 1, 15)[0]
        self.assertEqual(again["metadata"]["name"], pod["metadata"]["name"])
        self.assertEqual(again["status"]["containerStatuses"][0]["restartCount"], 1)
        self.assertNotEqual(LC.pod_state(again)["pid"], pid)
        LC.delete_deployment("crash")
        wait_for(lambda: not [p for p in LC.pods()
                              if p["metadata"]["labels"].get("app") == "crash"], 15)


class GPUBudget(unittest.TestCase):
    """The kubelet's scheduler part: pods beyond a node's GPUs stay Pending, Unschedulable, with
    the kube-scheduler's message; more GPUs (a raised allocatable) bind them; scale-in removes
    the pending ones first; a deleted pod's GPUs go to the next one."""

    def test_fit_error_is_the_schedulers_format(self):
        from cluster.kubelet import fit_error
        # kubernetes pkg/scheduler/framework/types.go FitError.Error(): "%v %v" per reason,
        # sort.Strings'ed ("1 I..." before "1 n..."), then DefaultPreemption's message
        self.assertEqual(
            fit_error(2, {"node(s) didn't match Pod's node affinity/selector": 1,
                          "Insufficient nvidia.com/gpu": 1},
                      {"Preemption is not helpful for scheduling": 1,
                       "No preemption victims found for incoming pod": 1}),
            "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match "
            "Pod's node affinity/selector. preemption: 0/2 nodes are available: 1 No preemption "
            "victims found for incoming pod, 1 Preemption is not helpful for scheduling.")

    def test_pods_beyond_the_gpus_stay_pending_until_gpus_free(self):
        sel = {"e2e.gpuscaler.io/pool": "budget-test"}
        LC.set_gpu_node("gpu-budget-a", 2, labels=sel)
        self.addCleanup(LC.delete_node, "gpu-budget-a")
        LC.create_deployment("budget", replicas=3, gpus=1, service_ms=20, cold_start=0.3,
                             port=8300, node_selector=sel)
        self.addCleanup(LC.delete_deployment, "budget")
        LC.wait_ready("budget", 2, 10, exact=False)

        def pending():
            return [p for p in LC.pods("budget", include_terminating=False)
                    if not p["spec"].get("nodeName")]
        pend = wait_for(lambda: len(pending()) == 1 and [
            c for c in pending()[0]["status"].get("conditions") or []
            if c["type"] == "PodScheduled"] and pending(), 10)[0]
        st = pend["status"]
        self.assertEqual(st["phase"], "Pending")
        self.assertNotIn("podIP", st)
        cond = [c for c in st["conditions"] if c["type"] == "PodScheduled"][0]
        self.assertEqual((cond["status"], cond["reason"]), ("False", "Unschedulable"))
        self.assertEqual(cond["message"],
                         "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) "
                         "didn't match Pod's node affinity/selector. preemption: 0/2 nodes are "
                         "available: 1 No preemption victims found for incoming pod, 1 "
                         "Preemption is not helpful for scheduling.")
        time.sleep(1.0)         # and it stays so: 2 GPUs, 2 pods running
        self.assertEqual(len(pending()), 1)
        self.assertEqual(len(LC.ready_pods("budget")), 2)
        LC.wait_replicas("budget", spec=3, ready=2, at_least=False, timeout=5)
        self.assertEqual(LC.deployment("budget")["status"]["replicas"], 3)
        self.assertTrue(LC.events("pod-unschedulable", "budget"))

        # a third GPU: the pending pod is bound there and starts
        t_raise = time.time()
        LC.set_gpu_node("gpu-budget-a", 3, labels=sel)
        ready = LC.wait_ready("budget", 3, 10)
        bound = [p for p in ready if p["metadata"]["name"] == pend["metadata"]["name"]][0]
        self.assertEqual(bound["spec"]["nodeName"], "gpu-budget-a")
        sched = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"][0]
        self.assertEqual(sched["status"], "True")
        # scheduled when the GPU came, not when the pod was created: that is the delay
        self.assertGreaterEqual(iso(sched["lastTransitionTime"]),
                                iso(bound["metadata"]["creationTimestamp"]) + 1)
        self.assertGreaterEqual(iso(sched["lastTransitionTime"]), math.floor(t_raise))
        ev = LC.events("pod-scheduled", "budget")
        self.assertEqual([e["pod"] for e in ev], [pend["metadata"]["name"]])
        self.assertGreater(ev[0]["waited_s"], 1.0)

        # one more than fits, then scale in: the pending pod goes first
        running = sorted(p["metadata"]["name"] for p in ready)
        LC.scale("budget", 4)
        wait_for(lambda: len(pending()) == 1, 10)
        LC.scale("budget", 3)
        wait_for(lambda: not pending() and len(LC.pods("budget")) == 3, 10)
        self.assertEqual(sorted(p["metadata"]["name"] for p in LC.pods("budget")), running)

        # a deleted pod's GPU goes to its replacement
        victim = running[0]
        LC.client.delete("pods", victim, LC.namespace)
        wait_for(lambda: victim not in [p["metadata"]["name"] for p in LC.pods("budget")] and
                 len(LC.ready_pods("budget")) == 3, 15)
        self.assertTrue(all(p["spec"].get("nodeName") == "gpu-budget-a"
                            for p in LC.pods("budget")))


def iso(s):
    import calendar
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


def get_status(url):
    """HTTP status of a GET, 0 when nothing listens yet."""
    try:
        return get(url)[0]
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return 0


class Metrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        profs = ("vllm", "triton", "tgi", "sglang", "nim", "tei", "fault")
        for prof, port in zip(profs, (8301, 8302, 8303, 8304, 8306, 8307, 8305)):
            LC.create_deployment("m-" + prof, replicas=1, slots=1, service_ms=320,
                                 service_sigma=0, profile="vllm" if prof == "fault" else prof,
                                 cold_start=0.2, port=port, model="llama-" + prof)
        cls.pods = {prof: LC.wait_ready("m-" + prof, 1, 15)[0] for prof in profs}

    def load(self, pod, n=3, path="/metrics"):
        """n concurrent requests on a 1-slot pod (320 ms each); returns the metrics (at path)
        taken once all n are in the server (one running, n-1 waiting), and the responses."""
        url = LC.pod_url(pod)
        results = []
        ts = [threading.Thread(target=lambda: results.append(post(url)))
              for _ in range(n)]
        for t in ts:
            t.start()
        mid = None
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            if LC.pod_state(pod)["waiting"] == n - 1:
                mid = LC.pod_metrics(pod, path=path)
                break
            time.sleep(0.01)
        for t in ts:
            t.join(10)
        self.assertEqual([r[0] for r in results], [200] * n)
        self.assertIsNotNone(mid, "the %d requests never queued together" % n)
        return mid, results

    def test_vllm_shape(self):
        pod = self.pods["vllm"]
        mid, res = self.load(pod)
        s, meta = parse_prom(mid)
        m = {"model_name": "llama-vllm"}
        self.assertEqual(one(s, "vllm:num_requests_running", **m), 1.0)
        self.assertEqual(one(s, "vllm:num_requests_waiting", **m), 2.0)
        s, meta = parse_prom(LC.pod_metrics(pod))
        self.assertEqual(one(s, "vllm:request_success_total", finished_reason="stop", **m), 3.0)
        self.assertEqual(one(s, "vllm:num_requests_running", **m), 0.0)
        for fam, typ in (("vllm:request_success_total", "counter"),
                         ("vllm:num_requests_running", "gauge"),
                         ("vllm:num_requests_waiting", "gauge"),
                         ("vllm:e2e_request_latency_seconds", "histogram")):
            self.assertEqual(meta[fam][1], typ)
            self.assertTrue(meta[fam][0])
        buckets = [(lab["le"], v) for lab, v in s["vllm:e2e_request_latency_seconds_bucket"]]
        les = [float(le) for le, _ in buckets]
        self.assertEqual(les[:-1], [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                                    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0,
                                    7680.0])
        self.assertEqual(buckets[-1], ("+Inf", 3.0))
        self.assertEqual(one(s, "vllm:e2e_request_latency_seconds_count", **m), 3.0)
        # queueing is real: 320 ms each on one slot, the last one waited for two others
        self.assertEqual(one(s, "vllm:e2e_request_latency_seconds_bucket", le="0.3", **m), 0.0)
        self.assertEqual(one(s, "vllm:e2e_request_latency_seconds_bucket", le="1.0", **m), 3.0)
        total = one(s, "vllm:e2e_request_latency_seconds_sum", **m)
        self.assertGreater(total, 3 * 0.32 + 0.32)
        self.assertLess(total, 0.32 + 0.64 + 0.96 + 0.3)
        queued = sorted(float(r[1]["x-queue-ms"]) for r in res)
        self.assertLess(queued[0], 50)
        self.assertGreater(queued[2], 320)

    def test_triton_shape(self):
        pod = self.pods["triton"]
        mid, _ = self.load(pod)
        s, meta = parse_prom(mid)
        m = {"model": "llama-triton", "version": "1"}
        self.assertEqual(one(s, "nv_inference_pending_request_count", **m), 2)
        s, meta = parse_prom(LC.pod_metrics(pod))
        self.assertEqual(one(s, "nv_inference_request_success", **m), 3)
        self.assertEqual(one(s, "nv_inference_count", **m), 3)
        self.assertEqual(one(s, "nv_inference_pending_request_count", **m), 0)
        compute = one(s, "nv_inference_compute_infer_duration_us", **m)
        queue = one(s, "nv_inference_queue_duration_us", **m)
        self.assertGreater(compute, 3 * 315e3)
        self.assertLess(compute, 3 * 450e3)
        self.assertGreater(queue, 320e3)
        for fam, typ in (("nv_inference_request_success", "counter"),
                         ("nv_inference_count", "counter"),
                         ("nv_inference_queue_duration_us", "counter"),
                         ("nv_inference_compute_infer_duration_us", "counter"),
                         ("nv_inference_pending_request_count", "gauge")):
            self.assertEqual(meta[fam][1], typ)

    def test_tgi_shape(self):
        pod = self.pods["tgi"]
        mid, _ = self.load(pod)
        s, meta = parse_prom(mid)
        self.assertEqual(one(s, "tgi_queue_size"), 2)
        self.assertEqual(one(s, "tgi_batch_current_size"), 1)
        s, meta = parse_prom(LC.pod_metrics(pod))
        self.assertEqual(one(s, "tgi_request_count"), 3)
        self.assertEqual(one(s, "tgi_request_success"), 3)
        self.assertEqual(one(s, "tgi_request_duration_count"), 3)
        les = [lab["le"] for lab, _ in s["tgi_request_duration_bucket"]]
        self.assertEqual(les[0], "0.00015000000000000001")
        self.assertEqual(les[-2], "145.61096060497135")
        self.assertEqual(len(les), 36)
        self.assertEqual(meta["tgi_request_duration"][1], "histogram")
        self.assertEqual(meta["tgi_request_count"][1], "counter")
        self.assertEqual(meta["tgi_queue_size"][1], "gauge")

    def test_sglang_shape(self):
        pod = self.pods["sglang"]
        mid, _ = self.load(pod)
        s, meta = parse_prom(mid)
        sched = {"model_name": "llama-sglang", "tp_rank": "0", "engine_type": "unified"}
        self.assertEqual(one(s, "sglang:num_running_reqs", **sched), 1.0)
        self.assertEqual(one(s, "sglang:num_queue_reqs", **sched), 2.0)
        s, meta = parse_prom(LC.pod_metrics(pod))
        m = {"model_name": "llama-sglang"}
        self.assertEqual(one(s, "sglang:num_requests_total", **m), 3.0)
        self.assertEqual(one(s, "sglang:e2e_request_latency_seconds_count", **m), 3.0)
        les = [float(lab["le"]) for lab, _ in s["sglang:e2e_request_latency_seconds_bucket"]]
        self.assertEqual(les[:8], [0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0])
        self.assertEqual(len(les), 23)
        self.assertGreater(one(s, "sglang:generation_tokens_total", **m), 0)
        self.assertNotIn("sglang:num_requests_created", s)  # multiprocess mode
        for fam, typ in (("sglang:num_requests_total", "counter"),
                         ("sglang:num_running_reqs", "gauge"),
                         ("sglang:num_queue_reqs", "gauge"),
                         ("sglang:e2e_request_latency_seconds", "histogram")):
            self.assertEqual(meta[fam][1], typ)

    def test_nim_shape(self):
        pod = self.pods["nim"]
        mid, _ = self.load(pod, path="/v1/metrics")
        s, meta = parse_prom(mid)
        m = {"model_name": "llama-nim"}
        self.assertEqual(one(s, "num_requests_running", **m), 1.0)
        self.assertEqual(one(s, "num_requests_waiting", **m), 2.0)
        self.assertEqual(one(s, "num_request_max", **m), 1.0)  # 1 GPU x 1 slot
        s, meta = parse_prom(LC.pod_metrics(pod, path="/v1/metrics"))
        self.assertEqual(one(s, "request_success_total", **m), 3.0)
        self.assertEqual(one(s, "request_failure_total", **m), 0.0)
        self.assertEqual(one(s, "request_finish_total", finished_reason="length", **m), 3.0)
        self.assertEqual(one(s, "e2e_request_latency_seconds_count", **m), 3.0)
        les = [float(lab["le"]) for lab, _ in s["e2e_request_latency_seconds_bucket"]]
        self.assertEqual(les[:4], [1.0, 2.5, 5.0, 10.0])
        self.assertEqual(len(les), 11)
        self.assertGreater(one(s, "generation_tokens_total", **m), 0)
        for fam, typ in (("request_success_total", "counter"),
                         ("num_requests_running", "gauge"),
                         ("num_requests_waiting", "gauge"),
                         ("e2e_request_latency_seconds", "histogram")):
            self.assertEqual(meta[fam][1], typ)
        with self.assertRaises(urllib.error.HTTPError) as cm:  # NIM serves /v1/metrics only
            LC.pod_metrics(pod)
        self.assertEqual(cm.exception.code, 404)

    def test_tei_shape(self):
        pod = self.pods["tei"]
        mid, _ = self.load(pod)
        s, meta = parse_prom(mid)
        self.assertEqual(one(s, "te_queue_size"), 2.0)
        self.assertEqual(one(s, "te_request_count", method="single"), 3.0)
        s, meta = parse_prom(LC.pod_metrics(pod))
        self.assertEqual(one(s, "te_embed_success"), 3.0)
        self.assertEqual(one(s, "te_request_success", method="single"), 3.0)
        self.assertEqual(one(s, "te_request_duration_count"), 3.0)
        les = [float(lab["le"]) for lab, _ in s["te_request_duration_bucket"]]
        self.assertEqual(len(les), 36)                      # 35 geometric bounds and +Inf
        self.assertAlmostEqual(les[0], 1.5e-05)
        self.assertNotIn("te_request_failure", s)           # a series appears with its first use
        for fam, typ in (("te_embed_success", "counter"), ("te_queue_size", "gauge"),
                         ("te_request_duration", "histogram")):
            self.assertEqual(meta[fam][1], typ)

    def test_metric_faults_by_control_endpoint(self):
        pod = self.pods["fault"]
        url = LC.pod_url(pod) + "/metrics"
        try:
            LC.fault(pod, metrics="hang")
            t0 = time.monotonic()
            with self.assertRaises((OSError, urllib.error.URLError)):
                get(url, timeout=0.5)
            self.assertGreaterEqual(time.monotonic() - t0, 0.45)
            self.assertEqual(post(LC.pod_url(pod))[0], 200)      # serving goes on
            LC.fault(pod, metrics="garbage")
            with self.assertRaises(ValueError):
                parse_prom(get(url)[1].decode("latin-1"))
            LC.fault(pod, metrics="slow", metrics_delay_ms=600)
            t0 = time.monotonic()
            parse_prom(get(url, timeout=5)[1].decode())
            self.assertGreaterEqual(time.monotonic() - t0, 0.55)
        finally:
            LC.fault(pod, metrics="none")
        t0 = time.monotonic()
        parse_prom(get(url)[1].decode())
        self.assertLess(time.monotonic() - t0, 0.5)
        # the control endpoint is harness-only
        req = urllib.request.Request(LC.pod_url(pod) + "/_fake/fault", data=b'{"metrics":"hang"}',
                                     method="POST")
        with self.assertRaises(urllib.error.HTTPError) as cm:
            urllib.request.urlopen(req, timeout=3)
        self.assertEqual(cm.exception.code, 401)

    def test_metric_fault_by_annotation(self):
        LC.create_deployment("m-garbage", replicas=1, cold_start=0.2, port=8304,
                             metrics_fault="garbage")
        pod = LC.wait_ready("m-garbage", 1, 10)[0]
        with self.assertRaises(ValueError):
            parse_prom(LC.pod_metrics(pod))
        LC.delete_deployment("m-garbage")


class ServiceFront(unittest.TestCase):
    def test_balances_over_ready_pods_only_and_scale_in_is_graceful(self):
        LC.create_deployment("svc", replicas=3, slots=2, service_ms=30, cold_start=0.3,
                             port=8400, grace=10)
        url = LC.expose("svc")
        self.assertTrue(url.startswith("http://127.0.0.2:"))
        pods = LC.wait_ready("svc", 3, 15)
        names = {p["metadata"]["name"] for p in pods}
        wait_for(lambda: len(LC.service_state("svc")["endpoints"]) == 3, 10)
        seen = {}
        for _ in range(30):
            code, h, doc, _ = post(url)
            self.assertEqual(code, 200)
            self.assertEqual(h["x-backend-pod"], h["x-pod-name"])
            seen[h["x-backend-pod"]] = seen.get(h["x-backend-pod"], 0) + 1
        self.assertEqual(set(seen), names)
        self.assertGreaterEqual(min(seen.values()), 8, seen)    # round robin among ties

        # a pod in its cold start gets nothing
        LC.client.patch("deployments", "svc", {"spec": {"template": {"metadata": {
            "annotations": {"e2e.gpuscaler.io/cold-start": "2.5s"}}}}}, LC.namespace)
        LC.scale("svc", 4)
        new = wait_for(lambda: [p for p in LC.pods("svc")
                                if p["metadata"]["name"] not in names], 10)[0]
        for _ in range(12):
            code, h, _, _ = post(url)
            self.assertEqual(code, 200)
            self.assertNotEqual(h["x-backend-pod"], new["metadata"]["name"])
        self.assertEqual(ready_cond(LC.client.get("pods", new["metadata"]["name"],
                                                  LC.namespace))["status"], "False")
        LC.wait_ready("svc", 4, 15)
        wait_for(lambda: len(LC.service_state("svc")["endpoints"]) == 4, 10)
        got = set()
        for _ in range(16):
            got.add(post(url)[1]["x-backend-pod"])
        self.assertIn(new["metadata"]["name"], got)

        # scale-in: newest first, graceful: in-flight requests finish
        order = sorted(LC.events("pod-created", "svc"), key=lambda e: e["ts"])
        oldest = order[0]["pod"]
        for p in LC.ready_pods("svc"):
            LC.fault(p, service_ms=1500)
        results = []
        threads = [threading.Thread(target=lambda: results.append(post(url)))
                   for _ in range(8)]
        for t in threads:
            t.start()
        wait_for(lambda: sum(e["active"] for e in LC.service_state("svc")["endpoints"]) == 8,
                 5)
        t_scale = time.monotonic()
        LC.scale("svc", 1)

        def terminating():
            ps = LC.pods("svc")
            dying = [p for p in ps if p["metadata"].get("deletionTimestamp")]
            return dying if len(dying) == 3 else None
        dying = wait_for(terminating, 5)
        for p in dying:
            self.assertEqual(ready_cond(p)["status"], "False")
            self.assertIn("e2e.gpuscaler.io/fake-kubelet", p["metadata"]["finalizers"])
        self.assertNotIn(oldest, [p["metadata"]["name"] for p in dying])
        self.assertIn(new["metadata"]["name"], [p["metadata"]["name"] for p in dying])
        for t in threads:
            t.join(20)
        self.assertEqual([r[0] for r in results], [200] * 8, results)
        self.assertGreater(max(r[3] for r in results), 1.2)
        remaining = LC.wait_ready("svc", 1, 20)
        self.assertEqual(remaining[0]["metadata"]["name"], oldest)
        self.assertGreater(time.monotonic() - t_scale, 1.0)   # they drained, not killed
        exits = [e for e in LC.events("process-exit", "svc") if not e.get("unexpected")]
        self.assertEqual(sorted(e["pod"] for e in exits),
                         sorted(p["metadata"]["name"] for p in dying))
        for e in exits:
            self.assertEqual(e["code"], 0)
        self.assertEqual(LC.events("pod-killed", "svc"), [])
        wait_for(lambda: len(LC.service_state("svc")["endpoints"]) == 1, 10)
        LC.fault(remaining[0], service_ms=30)
        for _ in range(5):
            code, h, _, _ = post(url)
            self.assertEqual((code, h["x-backend-pod"]), (200, oldest))
        st = LC.deployment("svc")["status"]
        self.assertEqual((st["replicas"], st["readyReplicas"]), (1, 1))

    def test_shorter_grace_period_kills_sooner(self):
        """A DELETE with a shorter period than the pod's terminationGracePeriodSeconds (kubectl
        delete --grace-period=1) is what the kubelet kills by: a request still in flight after
        it is cut off; the pod object is gone once the process is, its replacement started."""
        LC.create_deployment("short", replicas=1, slots=1, service_ms=30, cold_start=0.2,
                             port=8410, grace=30)
        url = LC.expose("short")
        pod = LC.wait_ready("short", 1, 15)[0]
        name = pod["metadata"]["name"]
        wait_for(lambda: len(LC.service_state("short")["endpoints"]) == 1, 10)
        LC.fault(pod, service_ms=20000)
        results = []
        t = threading.Thread(target=lambda: results.append(post(url)))
        t.start()
        wait_for(lambda: sum(e["active"] for e in LC.service_state("short")["endpoints"]) == 1,
                 5)
        t0 = time.monotonic()
        out = LC.client.delete("pods", name, LC.namespace, grace_period_seconds=1)
        self.assertEqual(out["metadata"]["deletionGracePeriodSeconds"], 1)
        wait_for(lambda: name not in [p["metadata"]["name"] for p in LC.pods("short")], 10)
        self.assertLess(time.monotonic() - t0, 8)     # not the 20 s request, nor 30 s
        self.assertEqual([e["pod"] for e in LC.events("pod-killed", "short")], [name])
        t.join(10)
        self.assertNotEqual(results[0][0], 200, results)
        LC.wait_ready("short", 1, 15)
        LC.delete_deployment("short")

    def test_no_ready_endpoint_is_503(self):
        LC.create_deployment("empty", replicas=0, port=8500)
        url = LC.expose("empty")
        code, _, _, dt = post(url)
        self.assertEqual(code, 503)
        self.assertLess(dt, 1.0)


class Load(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # one pod: 1 GPU x 2 slots x 100 ms -> capacity 20 req/s; Triton counters
        LC.create_deployment("load", replicas=1, gpus=1, slots=2, service_ms=100,
                             service_sigma=0.2, profile="triton", cold_start=0.2, port=8600,
                             model="load")
        cls.pod = LC.wait_ready("load", 1, 10)[0]
        cls.url = LC.pod_url(cls.pod)

    def server_counts(self):
        s, _ = parse_prom(LC.pod_metrics(self.pod))
        m = {"model": "load", "version": "1"}
        return (one(s, "nv_inference_request_success", **m),
                one(s, "nv_inference_request_duration_us", **m))

    def run_load(self, rate, duration, seed, raw=None):
        recs = []
        cfg = loadgen.Config(target_url=self.url, profile="constant", rate=rate,
                             duration=duration, interval=1.0, seed=seed, sla_ms=1000,
                             concurrency=200, timeout=30)
        summary = loadgen.run(cfg, recs.append, raw)
        return summary, [r for r in recs if r["type"] == "interval"]

    def test_overload_p99_far_above_light_load_and_percentiles_consistent(self):
        n0, us0 = self.server_counts()
        raw = []
        light, light_iv = self.run_load(5, "3s", 11, raw.append)
        n1, us1 = self.server_counts()
        heavy, heavy_iv = self.run_load(40, "3s", 12)
        # light load (25 % of capacity): latency is about the service time
        self.assertLess(light["p99_ms"], 400)
        self.assertGreater(light["p50_ms"], 60)
        self.assertTrue(light["pass"])
        # 2x capacity: the queue grows by ~20 req/s for 3 s -> seconds of wait
        self.assertGreater(heavy["p99_ms"], 1500)
        self.assertGreater(heavy["p99_ms"], 5 * light["p99_ms"])
        self.assertFalse(heavy["pass"])
        self.assertFalse(heavy["thresholds"]["http_req_duration"]["p(99)<1000"])
        self.assertEqual(heavy["errors"], 0)
        # throughput is capped by capacity: the run lasts until the backlog drains
        self.assertLessEqual(heavy["http_reqs"] / heavy["duration_s"], 20 * 1.25)
        self.assertGreater(heavy["duration_s"], 3.0 + 1.5)
        # per-interval latency climbs while overloaded
        p99s = [iv["p99_ms"] for iv in heavy_iv if iv["p99_ms"] is not None]
        self.assertGreater(p99s[-1], p99s[0] * 3)

        for s, ivs in ((light, light_iv), (heavy, heavy_iv)):
            self.assertEqual(sum(iv["completed"] for iv in ivs), s["http_reqs"])
            self.assertEqual(sum(iv["sent"] for iv in ivs), s["sent"])
            self.assertEqual(s["http_reqs"], s["ok"] + s["errors"])
            self.assertEqual(s["sent"], s["http_reqs"] + s["dropped_iterations"] +
                             s["interrupted"])
            for rec in ivs + [s]:
                if rec["p50_ms"] is not None:
                    self.assertLessEqual(rec["p50_ms"], rec["p95_ms"])
                    self.assertLessEqual(rec["p95_ms"], rec["p99_ms"])
                    self.assertLessEqual(rec["p99_ms"], rec["max_ms"])
            # Poisson count within 5 sigma of the expected count
            exp = s["expected_requests"]
            self.assertLess(abs(s["sent"] - exp), 5 * math.sqrt(exp) + 1, s)
        # percentiles recomputed from the raw per-request records
        lat = sorted(r["latency_ms"] for r in raw)
        self.assertEqual(len(lat), light["http_reqs"])
        for q, key in ((0.5, "p50_ms"), (0.95, "p95_ms"), (0.99, "p99_ms")):
            self.assertAlmostEqual(P.percentile(lat, q), light[key], delta=0.01)
        self.assertAlmostEqual(light["http_req_duration_ms"]["p(99)"], light["p99_ms"],
                               delta=0.01)
        # the server counted exactly the requests the client saw succeed; the client's mean
        # latency contains the server's
        self.assertEqual(n1 - n0, light["ok"])
        server_mean_ms = (us1 - us0) / 1000.0 / (n1 - n0)
        self.assertGreaterEqual(light["mean_ms"], server_mean_ms)
        self.assertLess(light["mean_ms"], server_mean_ms + 250)
        n2, _ = self.server_counts()
        self.assertEqual(n2 - n1, heavy["ok"])

    def test_peak_profile_shape_through_service(self):
        LC.create_deployment("peak", replicas=2, slots=8, service_ms=20, cold_start=0.2,
                             port=8700)
        url = LC.expose("peak")
        self.assertEqual(url, LC.service_url("peak"))
        LC.wait_ready("peak", 2, 10)
        wait_for(lambda: len(LC.service_state("peak")["endpoints"]) == 2, 10)
        run = LC.start_load("peak", profile="peak", peak_rps=30, duration="6s", interval=1,
                            seed=5, raw=True)
        s = run.wait(40)
        ivs = run.intervals()
        self.assertEqual(s["errors"], 0)
        self.assertTrue(s["pass"], s)
        # the stages of peak.js for PEAK_RPS=30, DURATION=6s: 9/min*... -> rps 9, 15, 30, 30,
        # 15, 9 at the stage boundaries
        sc = P.build_stages(30, 6)
        self.assertEqual(sc["startRate"], 540)
        self.assertEqual([st["target"] for st in sc["stages"]], [900, 1800, 1800, 900, 540])
        targets = [iv["target_rps"] for iv in ivs[:6]]
        self.assertAlmostEqual(targets[0], 12.0, delta=0.01)     # mid of 9 -> 15
        self.assertAlmostEqual(targets[2], 30.0, delta=0.01)     # the 4-6 PM plateau
        self.assertAlmostEqual(targets[5], 12.0, delta=0.01)
        self.assertEqual(max(targets), targets[2])
        # sent follows the shape: the plateau seconds carry more than the shoulders
        sent = [iv["sent"] for iv in ivs[:6]]
        self.assertGreater(sent[2] + sent[3], sent[0] + sent[5])
        self.assertLess(abs(s["sent"] - s["expected_requests"]),
                        5 * math.sqrt(s["expected_requests"]) + 1)
        st = LC.service_state("peak")
        self.assertEqual(sum(e["requests"] for e in st["endpoints"]), s["http_reqs"])
        self.assertTrue(all(e["requests"] > s["http_reqs"] * 0.3 for e in st["endpoints"]), st)
        self.assertEqual(len(run.raw()), s["http_reqs"])


class Profiles(unittest.TestCase):
    def test_trace_csv_time_compressed(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("t_seconds,requests\n# comment\n0,60\n60,120\n180,30\n")
            path = f.name
        try:
            rp = P.RateProfile.from_trace(path, compress=60)
            self.assertAlmostEqual(rp.duration, 4.0)
            self.assertAlmostEqual(rp.rate(0.5), 1.0)         # 60 req / 60 s
            self.assertAlmostEqual(rp.rate(1.5), 2.0)
            self.assertAlmostEqual(rp.rate(2.5), 0.0)         # the skipped bucket
            self.assertAlmostEqual(rp.rate(3.5), 0.5)
            rp = P.RateProfile.from_trace(path, compress=60, peak_rps=10)
            self.assertAlmostEqual(rp.rate(1.5), 10.0)
            self.assertAlmostEqual(rp.rate(0.5), 5.0)
            self.assertAlmostEqual(rp.expected(), 5 + 10 + 0 + 2.5, places=3)
        finally:
            os.unlink(path)

    def test_thinning_follows_the_rate(self):
        rp = P.RateProfile.ramp([(50, 100.0)], start_rps=0.0)
        ts = list(loadgen.arrivals(rp, 7))
        first, second = sum(1 for t in ts if t < 25), sum(1 for t in ts if t >= 25)
        self.assertAlmostEqual(first, rp.expected(0, 25), delta=5 * math.sqrt(625))
        self.assertAlmostEqual(second, rp.expected(25, 50), delta=5 * math.sqrt(1875))
        self.assertEqual(ts, sorted(ts))
        self.assertEqual(ts, list(loadgen.arrivals(rp, 7)))   # seeded


@unittest.skipUnless(shutil.which("prometheus"), "prometheus not installed (Debian package)")
class PrometheusScrape(unittest.TestCase):
    def test_real_prometheus_scrapes_ready_pods(self):
        LC.create_deployment("prom", replicas=2, slots=2, service_ms=20, cold_start=0.2,
                             port=8900)
        pods = LC.wait_ready("prom", 2, 10)
        for p in pods:
            for _ in range(2):
                self.assertEqual(post(LC.pod_url(p))[0], 200)
        LC.start_prometheus(scrape_interval="1s")
        q = 'sum(vllm:request_success_total{deployment="prom",finished_reason="stop"})'

        def scraped():
            up = LC.prom_query('up{deployment="prom"} == 1')
            total = LC.prom_query(q)
            return len(up) == 2 and total and float(total[0]["value"][1]) == 4.0
        wait_for(scraped, 25, interval=0.3, message="prometheus scraping both pods")
        names = {r["metric"]["pod"] for r in LC.prom_query('up{deployment="prom"}')}
        self.assertEqual(names, {p["metadata"]["name"] for p in pods})


class Teardown(unittest.TestCase):
    def test_everything_stops_by_pid(self):
        lc = LocalCluster().start()
        lc.create_deployment("t", replicas=2, cold_start=0.2, port=8800)
        lc.expose("t")
        lc.wait_ready("t", 2, 10)
        run = lc.start_load("t", profile="stages", stages=[(30, 8)], start_rps=4)
        wait_for(lambda: run.intervals(), 5)          # running, and reporting
        self.assertTrue(run.running())
        self.assertGreater(run.intervals()[0]["target_rps"], 4)
        pids = procs.pids_in(procs.read_pidfile(os.path.join(lc.state_dir, "pids.json")))
        pods = procs.pids_in(procs.read_pidfile(os.path.join(lc.state_dir,
                                                             "kubelet-pids.json"))["pods"])
        self.assertEqual(len(pods), 2)
        self.assertIn(run.pid, pids)
        pids = [p for p in pids if p != os.getpid()]
        self.assertGreaterEqual(len(pids), 4)        # fakekube, kubelet, service, loadgen
        t0 = time.monotonic()
        lc.stop()
        self.assertLess(time.monotonic() - t0, 20)
        for pid in pids + pods:
            self.assertFalse(procs.alive(pid), pid)
        self.assertFalse(os.path.exists(lc.state_dir))


if __name__ == "__main__":
    t0 = time.monotonic()
    prog = unittest.main(exit=False, verbosity=2)
    r = prog.result
    import testsummary
    passed, failed, skipped, _ = testsummary.counts(r)
    print("cluster tests took %.1fs" % (time.monotonic() - t0))
    print("cluster: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.exit(1 if failed or r.testsRun == 0 else 0)

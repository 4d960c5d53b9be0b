#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of `gpuscaler run` against an API server reached only
through the Kubernetes API: the fake in e2e/fakekube (started here), or a real
cluster when KUBECONFIG is set (fault-injection tests are skipped then).

Durations are compressed through annotations and the config file: decisions
every second, scale-out after 4 s above target, scale-in after 6 s below.
Serving pods are fake metrics endpoints on their own loopback addresses
(127.0.9.N); the test sets the total request rate. The Prometheus source's tests
(10-14) answer from a fake Prometheus on loopback (e2e/fakeprom)."""
import base64
import calendar
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from checkpoint import checkpoint_key, checkpoint_name, history_state  # noqa: E402
from ctlharness import (BIN, FAST_ANNOTATIONS, FAST_CONFIG, Gpuscaler,  # noqa: E402
                        MetricsPods, MiniKubelet, create_objects, deploy_manifests, deployment,
                        now_rfc3339, wait_for)
from fakekube import harness, kubeclient  # noqa: E402
from fakeprom import FakePrometheus  # noqa: E402

REAL = bool(os.environ.get("KUBECONFIG")) and not os.environ.get("GPUSCALER_E2E_FAKE")
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

CONFIG = FAST_CONFIG
ANNOTATIONS = FAST_ANNOTATIONS
# "k/n": run the k-th of n parts of this file (e2e/meson.build runs two at once); "" all
PART = os.environ.get("GPUSCALER_E2E_PART", "")


# a predictive Deployment whose metrics come from Prometheus (tests 10-14)
PROM_ANNOTATIONS = {"gpuscaler.io/metrics-source": "prometheus",
                    "gpuscaler.io/predictive": "true"}


def events(c, ns, name, reason):
    items = c.list("events", ns)["items"]
    return [e for e in items if e.get("reason") == reason
            and e.get("involvedObject", {}).get("name") == name]


class ControllerE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if REAL:
            cls.fk = None
            cls.kubeconfig = os.environ["KUBECONFIG"]
        else:
            cls.fk = harness.start(bookmark_interval="1s")
            cls.kubeconfig = cls.fk.kubeconfig
        cls.c = kubeclient.Client.from_kubeconfig(cls.kubeconfig)
        # the two parts e2e/meson.build runs at once start in the same second
        cls.ns = "gpuscaler-e2e-%s%d" % (PART.replace("/", "of") + "-" if PART else "",
                                         int(time.time()) % 100000)
        cls.c.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": cls.ns}})
        cls.metrics = MetricsPods()
        cls.procs = []

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            p.stop()
        # no request of gpuscaler drew a warning from the API server (a deprecated API, a
        # dropped field, an admission warning): gpuscaler logs each one, here or on a cluster
        warned = [ln for p in cls.procs for ln in p.text().splitlines()
                  if "API server warning:" in ln]
        cls.metrics.close()
        try:
            cls.c.delete("namespaces", cls.ns)
        except Exception:  # noqa: BLE001
            pass
        unknown = []
        if cls.fk:
            # every object gpuscaler wrote had only fields its kind has (the API server drops
            # any other with a Warning: a misspelt field would be lost silently)
            unknown = [w for w in cls.fk.writes()["writes"]
                       if w.get("warnings") and
                       w.get("userAgent", "").split("/")[0] == "gpuscaler"]
            cls.fk.stop()
        if unknown:
            raise AssertionError("gpuscaler wrote unknown fields: %s" % unknown[:5])
        if warned:
            raise AssertionError("the API server warned gpuscaler: %s" % warned[:5])

    def setUp(self):
        self._t0 = time.monotonic()

    def tearDown(self):
        # each test's wall time, for balancing the parts e2e/meson.build runs side by side
        print("  (%s: %.1fs)" % (self._testMethodName, time.monotonic() - self._t0), flush=True)

    def start(self, config=CONFIG, extra=(), ident="gpuscaler-e2e", env=None):
        g = Gpuscaler(self.kubeconfig, config, extra, ident, env)
        self.procs.append(g)
        return g

    def make(self, name, replicas, subnet, annotations=None, cold_start=0.0,
             port_name="metrics", extra_port=None):
        ann = dict(ANNOTATIONS)
        ann.update(annotations or {})
        self.c.create("deployments", deployment(name, replicas, ann, self.metrics.port,
                                                port_name=port_name, extra_port=extra_port),
                      self.ns)
        k = MiniKubelet(self.c, self.ns, name, self.metrics, subnet=subnet,
                        port=self.metrics.port, cold_start=cold_start, port_name=port_name,
                        extra_port=extra_port)
        k.start()
        self.addCleanup(k.stop)
        return k

    def replicas(self, name):
        return self.c.get("deployments", name, self.ns)["spec"]["replicas"]

    def status(self, name):
        """The Deployment's gpuscaler.io/status annotation, parsed, or None."""
        d = self.c.get("deployments", name, self.ns)
        st = (d["metadata"].get("annotations") or {}).get("gpuscaler.io/status")
        return json.loads(st) if st else None

    def measured_status(self, name, timeout=20):
        """The status annotation once it carries a measured requestsPerGPU."""
        return wait_for(lambda: (lambda s: s if s and s.get("requestsPerGPU") else None)(
            self.status(name)), timeout, what="%s: requests per GPU" % name)

    # ---- scenarios -------------------------------------------------------

    def test_1_scale_out_after_window_then_in_stepwise(self):
        k = self.make("llama", 2, subnet=9, cold_start=2.0)
        record = tempfile.mkdtemp(prefix="gpuscaler-record-")
        self.addCleanup(shutil.rmtree, record, True)
        g = self.start(extra=("--record", record))
        try:
            self.metrics.set_rate("llama", 10)  # 5 req/s per GPU: within the band
            wait_for(lambda: "WithinBand" in g.text(), 20, what="a first decision")
            # the probes have their own listener (and are still answered on /metrics' port)
            for port in (g.health_port, None):
                self.assertEqual(g.get("/healthz", port), (200, "ok\n"))
                self.assertEqual(g.get("/livez", port)[0], 200)
                code, body = g.get("/readyz", port)
                self.assertEqual(code, 200)
                self.assertIn("synced", body)
            self.assertEqual(g.get("/metrics", g.health_port)[0], 404)
            # the pods took 2 s from creation to Ready: that is learned
            cs = g.metric("gpuscaler_learned_cold_start_seconds",
                          '{namespace="%s",deployment="llama"}' % self.ns)
            self.assertTrue(cs is not None and 1.0 <= cs <= 8.0, "learned cold start %r" % cs)
            self.assertEqual(self.replicas("llama"), 2)
            t0 = time.time()
            self.metrics.set_rate("llama", 38)  # 19 req/s per GPU > 8: above target; needs ceil(38/8) = 5
            wait_for(lambda: self.replicas("llama") == 5, 30, what="scale-out to 5")
            took = time.time() - t0
            print("scale-out after %.1fs (window 4s + rate window)" % took)
            self.assertGreaterEqual(took, 4.0, "scaled before the sustained window")
            ev = wait_for(lambda: events(self.c, self.ns, "llama", "ScaledOut"), 10,
                          what="ScaledOut event")
            self.assertIn("-> 5 replicas", ev[0]["message"])
            st = wait_for(lambda: self.c.get("deployments", "llama", self.ns)["metadata"]
                          ["annotations"].get("gpuscaler.io/status"), 10, what="status")
            self.assertIn('"desired"', st)
            # load drops: scale in only after the window, stepwise, never flapping
            self.metrics.set_rate("llama", 4)
            t1 = time.time()
            wait_for(lambda: self.replicas("llama") == 1, 60, what="scale-in to 1")
            print("scale-in to 1 after %.1fs; replica history %s" % (time.time() - t1,
                                                                      k.replicas_changes()))
            hist = k.replicas_changes()
            i5 = hist.index(5)
            tail = hist[i5:]
            self.assertEqual(tail, sorted(tail, reverse=True), "flapped: %s" % hist)
            self.assertGreaterEqual(len(tail), 3, "scale-in was not stepwise: %s" % hist)
            self.assertTrue(events(self.c, self.ns, "llama", "ScaledIn"))
            self.assertTrue(g.alive())
            # the status annotation never raced this instance's own /scale writes
            self.assertEqual(g.metric("gpuscaler_scale_conflicts_total"), 0)
            m = g.metrics()
            self.assertIn('gpuscaler_desired_replicas{namespace="%s",deployment="llama"} 1'
                          % self.ns, m)
            # no forecaster (predictive: false): no plan, so neither plan source
            self.assertIn('gpuscaler_forecast_plan_recent_peaks{namespace="%s",deployment="llama"} '
                          'NaN' % self.ns, m)
            self.assertIn('gpuscaler_forecast_plan_learned{namespace="%s",deployment="llama"} '
                          'NaN' % self.ns, m)
            self.assertIn('gpuscaler_forecast_plan_recent_seasons{namespace="%s",'
                          'deployment="llama"} NaN' % self.ns, m)
            # --record wrote a trace that `gpuscaler simulate` replays
            trace = os.path.join(record, "%s_llama.csv" % self.ns)
            rows = [r for r in open(trace).read().splitlines() if r and r[0].isdigit()]
            self.assertGreater(len(rows), 20)
            self.assertTrue(any(float(r.split(",")[1]) > 30 for r in rows), "no high-load rows")
            sim = subprocess.run([BIN, "simulate", "--trace", trace, "--capacity-per-gpu", "10",
                                  "--gpus-per-replica", "1", "--cold-start", "5s",
                                  "--warmup", "0", "--min-replicas", "1", "--p99-latency-target", "2s"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            self.assertEqual(sim.returncode, 0, sim.stderr.decode())
            self.assertIn("predictive", sim.stdout.decode())
            # the forecaster was checkpointed; a restart restores it
            g.stop()
            g2 = self.start()
            wait_for(lambda: "restored forecaster" in g2.text(), 20, what="checkpoint restore")
            g2.stop()
        finally:
            g.stop()
            self.c.delete("deployments", "llama", self.ns)

    def test_2_invalid_annotation_event_and_no_scaling(self):
        self.make("bad", 3, subnet=10, annotations={"gpuscaler.io/capacity-per-gpu": "lots"})
        g = self.start()
        try:
            self.metrics.set_rate("bad", 100)
            ev = wait_for(lambda: events(self.c, self.ns, "bad", "InvalidAnnotation"), 20,
                          what="InvalidAnnotation event")
            self.assertIn("gpuscaler.io/capacity-per-gpu", ev[0]["message"])
            self.assertEqual(ev[0]["type"], "Warning")
            time.sleep(6)
            self.assertEqual(self.replicas("bad"), 3)
            self.assertEqual(len(events(self.c, self.ns, "bad", "InvalidAnnotation")), 1,
                             "the same invalid annotation was reported more than once")
            # fixing it resumes scaling
            self.c.patch("deployments", "bad",
                         {"metadata": {"annotations": {"gpuscaler.io/capacity-per-gpu": "10"}}},
                         self.ns)
            wait_for(lambda: self.replicas("bad") > 3, 30, what="scaling after the fix")
        finally:
            g.stop()
            self.c.delete("deployments", "bad", self.ns)

    def test_3_missing_metrics_hold_never_scale_in(self):
        k = self.make("hold", 4, subnet=11)
        g = self.start()
        try:
            self.metrics.set_rate("hold", 38)
            wait_for(lambda: "WithinBand" in g.text() or "AboveTarget" in g.text(), 20,
                     what="a decision")
            for _, ip in k.pods:
                self.metrics.set_mode(ip, "garbage")
            self.metrics.set_rate("hold", 0)
            ev = wait_for(lambda: events(self.c, self.ns, "hold", "MetricsUnavailable"), 20,
                          what="MetricsUnavailable event")
            self.assertIn("holding", ev[0]["message"])
            time.sleep(10)  # > scale-in window: still held
            self.assertEqual(self.replicas("hold"), 4)
            self.assertTrue(g.alive())
            # the replica bounds still act without metrics, and their Event says so at once
            # (the hold's Warning a moment ago does not keep it back for its 10 minutes)
            self.c.patch("deployments", "hold", {"metadata": {"annotations": {
                "gpuscaler.io/max-replicas": "3"}}}, self.ns)
            bounds = wait_for(lambda: [e for e in events(self.c, self.ns, "hold",
                                                         "MetricsUnavailable")
                                       if "only the replica bounds" in e["message"]], 20,
                              what="MetricsUnavailable event of the bounds")
            self.assertEqual(len(bounds), 1, bounds)
            self.assertIn("; not sizing, only the replica bounds: 4 -> 3", bounds[0]["message"])
            wait_for(lambda: self.replicas("hold") == 3, 20, what="max-replicas applied")
            time.sleep(6)  # more ticks without metrics: no second Event of that change
            self.assertEqual(len([e for e in events(self.c, self.ns, "hold", "MetricsUnavailable")
                                  if "only the replica bounds" in e["message"]]), 1)
            self.assertEqual(self.replicas("hold"), 3)
            # held at 3 since (a "holding" tick between), the same change again is news again:
            # the count set back to 4 by hand is brought to 3 with a second such Event
            self.c.patch("deployments", "hold", {"spec": {"replicas": 4}}, self.ns)
            wait_for(lambda: len([e for e in events(self.c, self.ns, "hold", "MetricsUnavailable")
                                  if "only the replica bounds: 4 -> 3" in e["message"]]) == 2,
                     20, what="a second MetricsUnavailable event of the bounds")
            wait_for(lambda: self.replicas("hold") == 3, 20, what="max-replicas applied again")
            for _, ip in k.pods:
                self.metrics.set_mode(ip, None)
            wait_for(lambda: self.replicas("hold") < 3, 40, what="scale-in once data is back")
        finally:
            g.stop()
            self.c.delete("deployments", "hold", self.ns)

    @unittest.skipIf(REAL, "fault injection needs the fake API server")
    def test_4_conflict_restart_and_410_survived(self):
        self.make("faulty", 2, subnet=12)
        self.metrics.set_rate("faulty", 10)
        g = self.start()
        try:
            wait_for(lambda: "WithinBand" in g.text(), 20, what="a first decision")
            # the next PATCH of the scale subresource answers 409
            self.fk.fault({"action": "error", "verb": "patch", "resource": "deployments",
                           "subresource": "scale", "status": 409, "count": 1})
            # restart the API server mid-watch and compact history (resume gets 410)
            self.fk.restart(delay=0.5)
            self.fk.compact()
            self.fk.drop_watches()
            self.metrics.set_rate("faulty", 38)
            wait_for(lambda: self.replicas("faulty") == 5, 40, what="scale-out after faults")
            self.assertGreaterEqual(g.metric("gpuscaler_scale_conflicts_total") or 0, 1)
            reqs, _ = self.fk.requests()
            patches = [r for r in reqs if r["verb"] == "patch" and r["subresource"] == "scale"]
            self.assertTrue(any(r["status"] == 409 for r in patches))
            self.assertTrue(any(r["status"] == 200 for r in patches))
            # a change made while watches were broken is still seen
            self.c.patch("deployments", "faulty",
                         {"metadata": {"annotations": {"gpuscaler.io/max-replicas": "3"}}},
                         self.ns)
            wait_for(lambda: self.replicas("faulty") == 3, 30, what="clamp to the new max")
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "faulty", self.ns)

    @unittest.skipIf(REAL, "fault injection needs the fake API server")
    def test_33_failed_status_write_is_written_again(self):
        """A status annotation write that fails is not taken for written: the next tick writes
        it again as a decision, rather than leave the old decision on the Deployment (and, with
        sharding, served to the HPA by the other replicas) until a budgeted refresh, or, with
        unchanged figures, the refresh interval of 4 minutes."""
        self.make("st-retry", 2, subnet=45)
        self.metrics.set_rate("st-retry", 10)
        g = self.start(ident="inst-st-retry")
        try:
            wait_for(lambda: (self.status("st-retry") or {}).get("desired") == 2, 20,
                     what="a first status")
            # the next annotation PATCH (not /scale) of the Deployment answers 500
            self.fk.fault({"action": "error", "verb": "patch", "resource": "deployments",
                           "name": "st-retry", "path": "^[^?]*/st-retry$", "status": 500,
                           "count": 1})
            self.metrics.set_rate("st-retry", 38)  # the policy wants 5
            wait_for(lambda: self.replicas("st-retry") == 5, 30, what="scale-out to 5")
            wait_for(lambda: (self.status("st-retry") or {}).get("desired") == 5, 15,
                     what="the status written again after the failed write")
            reqs, _ = self.fk.requests()
            failed = [r for r in reqs if r["verb"] == "patch" and not r["subresource"]
                      and r["status"] == 500]
            self.assertEqual(len(failed), 1, failed)

        finally:
            g.stop()
            self.c.delete("deployments", "st-retry", self.ns)

    @unittest.skipIf(REAL, "the write ordering is read from the fake API server's request log")
    def test_6_status_annotation_never_races_the_scale_write(self):
        """A Deployment and its /scale share one resourceVersion, and the status annotation
        changes it. The annotation write of a tick must not be in flight between the /scale
        read and the /scale patch (preconditioned on the version read), or the tick conflicts
        with itself. Annotation PATCHes are slowed down (as a real apiserver's writes are
        slower than its reads) so an overlap cannot go unseen."""
        self.make("order", 2, subnet=14)
        self.metrics.set_rate("order", 10)
        self.fk.fault({"action": "latency", "ms": 300, "verb": "patch", "resource": "deployments",
                       "subresource": "", "name": "order", "count": None})
        self.addCleanup(self.fk.clear_faults)
        g = self.start()
        try:
            wait_for(lambda: "WithinBand" in g.text(), 20, what="a first decision")
            self.metrics.set_rate("order", 38)
            wait_for(lambda: self.replicas("order") == 5, 30, what="scale-out to 5")
            self.metrics.set_rate("order", 4)
            wait_for(lambda: self.replicas("order") == 1, 60, what="scale-in to 1")
            wait_for(lambda: '"desired":1' in (self.c.get("deployments", "order", self.ns)
                                               ["metadata"]["annotations"]
                                               .get("gpuscaler.io/status") or ""),
                     10, what="the status annotation of the last decision")
            reqs, _ = self.fk.requests()
            mine = [r for r in reqs if r.get("name") == "order" and r.get("namespace") == self.ns
                    and r.get("resource") == "deployments"]
            gets = [r for r in mine if r["verb"] == "get" and r["subresource"] == "scale"]
            scale_patches = [r for r in mine if r["verb"] == "patch" and r["subresource"] == "scale"]
            status_patches = [r for r in mine if r["verb"] == "patch" and not r["subresource"]]
            self.assertGreaterEqual(len([r for r in scale_patches if r["status"] == 200]), 3,
                                    "want several scale actions")
            self.assertTrue(status_patches, "no status annotation written")
            for p in scale_patches:
                read = max((r for r in gets if r["seq"] < p["seq"] and r["time"] <= p["time"]),
                           key=lambda r: r["seq"])
                lo, hi = read["time"], p["time"] + p["ms"] / 1000.0
                for s_ in status_patches:
                    s_lo, s_hi = s_["time"], s_["time"] + s_["ms"] / 1000.0
                    # the fake stamps a request's end after writing its response, so the next
                    # request of the same client can be stamped up to a few ms before it
                    eps = 0.01
                    self.assertFalse(s_lo < hi - eps and s_hi > lo + eps,
                                     "status annotation PATCH (%.3f..%.3f) in flight during the "
                                     "/scale read+patch (%.3f..%.3f)" % (s_lo, s_hi, lo, hi))
            self.assertEqual([r["status"] for r in scale_patches if r["status"] != 200], [])
            self.assertEqual(g.metric("gpuscaler_scale_conflicts_total"), 0)
            print("%d scale writes, %d status writes, no overlap, 0 conflicts"
                  % (len(scale_patches), len(status_patches)))
        finally:
            g.stop()
            self.c.delete("deployments", "order", self.ns)

    def test_5_leader_election_and_failover(self):
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-lease,
                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
""" % self.ns
        self.make("elect", 2, subnet=13)
        self.metrics.set_rate("elect", 10)
        a = self.start(cfg, ident="inst-a")
        time.sleep(1.5)
        b = self.start(cfg, ident="inst-b")
        try:
            lease = wait_for(lambda: self.c.get("leases", "e2e-lease", self.ns)["spec"]
                             .get("holderIdentity"), 15, what="a lease holder")
            self.assertEqual(lease, "inst-a")
            wait_for(lambda: a.metric("gpuscaler_leader") == 1 and b.metric("gpuscaler_leader") == 0,
                     10, what="exactly one leader")
            # leader dies without releasing: takeover within the lease time
            a.stop(sig=9)
            t0 = time.time()
            wait_for(lambda: self.c.get("leases", "e2e-lease", self.ns)["spec"]
                     ["holderIdentity"] == "inst-b", 15, what="takeover")
            took = time.time() - t0
            print("failover took %.1fs (lease 4s)" % took)
            self.assertLess(took, 4 + 2.5)
            self.metrics.set_rate("elect", 38)
            wait_for(lambda: self.replicas("elect") == 5, 30, what="the new leader scales")
            # graceful stop releases the lease at once
            b.stop()
            spec = self.c.get("leases", "e2e-lease", self.ns)["spec"]
            self.assertEqual(spec.get("holderIdentity", ""), "")
        finally:
            a.stop()
            b.stop()
            self.c.delete("deployments", "elect", self.ns)

    @unittest.skipIf(REAL, "the outage is a fault rule of the fake API server")
    def test_7_lost_lease_is_logged_once(self):
        """An API server outage long enough for the renew deadline to pass while the Lease
        request hangs: "stopped leading" is logged once, with the reason, gpuscaler_leader
        drops to 0, and after the outage the next term is logged as "became leader"."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-outage,
                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
""" % self.ns
        g = self.start(cfg, ident="inst-outage")
        try:
            wait_for(lambda: "became leader" in g.text(), 15, what="leadership")
            self.assertEqual(g.metric("gpuscaler_leader"), 1)
            # every Lease request hangs 6 s (longer than renew-deadline 3 s)
            self.fk.fault({"action": "latency", "ms": 6000, "resource": "leases",
                           "count": None})
            self.addCleanup(self.fk.clear_faults)
            t0 = time.time()
            wait_for(lambda: "stopped leading" in g.text(), 10, what="stopped leading")
            took = time.time() - t0
            self.assertEqual(g.metric("gpuscaler_leader"), 0)
            self.fk.clear_faults()
            wait_for(lambda: g.text().count("became leader") == 2, 20, what="leading again")
            self.assertEqual(g.metric("gpuscaler_leader"), 1)
            time.sleep(2)
            log = g.text()
            stopped = [ln for ln in log.splitlines() if "stopped leading" in ln]
            print("stopped leading %.1fs into the outage: %s" % (took, stopped))
            self.assertEqual(len(stopped), 1, stopped)
            self.assertIn("renew deadline passed", stopped[0])
            self.assertIn("level=warn", stopped[0])
            self.assertLess(took, 3 + 2.5, "logged long after the renew deadline")
            self.assertEqual(log.count("became leader"), 2)
            self.assertTrue(g.alive())
            g.stop()
            self.assertEqual(g.text().count("stopped leading"), 2, "shutdown ends the term too")
        finally:
            g.stop()

    def test_8_checkpoints_in_fixed_configmaps(self):
        """Checkpoints live in checkpoint.configmaps fixed ConfigMaps <prefix>-<i> (i = FNV-1a 64
        of namespace/name mod the count), two binaryData keys per Deployment, written with
        merge patches: keys that are not gpuscaler's stay, entries of Deployments that are gone
        are removed, a restart restores every Deployment, and a ConfigMap over the API server's
        1 MiB is reported (not retried forever, nothing else lost)."""
        import base64
        import zlib

        prefix, n = "ckpt-e2e", 2

        def where(name):
            return checkpoint_name(self.ns, name, prefix, n)[0]

        def keys(cm):
            try:
                return self.c.get("configmaps", cm, self.ns).get("binaryData") or {}
            except kubeclient.ApiError:
                return {}
        cfg = """decision-interval: 1s
leader-election: {enabled: false, namespace: %s}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
checkpoint: {configmap: %s, configmaps: %d}
""" % (self.ns, prefix, n)
        names = ("cka", "ckb", "ckc")
        # a key that is not gpuscaler's, and the entries of Deployments that no longer exist:
        # of a plain name, a dotted one and one too long for a key (cut and hashed); beside
        # them the entries of two tracked ones (without pods: they hold), dotted and long,
        # which stay
        stale = "forecast.%s_long-gone" % self.ns
        long_gone = ".".join(["gone" + "x" * 56] * 4)  # 243 characters
        long_here = ".".join(["here" + "x" * 56] * 4)
        stale_more = [checkpoint_key("forecast", self.ns, "long.gone.v1"),
                      checkpoint_key("capacity", self.ns, long_gone)]
        live = {dn: checkpoint_key("forecast", self.ns, dn) for dn in ("keep.me.v1", long_here)}
        self.assertEqual(len(stale_more[1]), 253)
        self.assertEqual(len(live[long_here]), 253)
        for dn in live:
            d = deployment(dn, 1, dict(ANNOTATIONS), self.metrics.port)
            d["metadata"]["labels"] = d["spec"]["selector"]["matchLabels"] = \
                d["spec"]["template"]["metadata"]["labels"] = {"app": "ckpt-live"}
            self.c.create("deployments", d, self.ns)
            self.addCleanup(self.c.delete, "deployments", dn, self.ns)
        seeded = {where("long-gone"): {"note": "aGVsbG8=", stale: "AAAA"}}
        for k in stale_more:
            seeded[where("long-gone")][k] = "AAAA"
        for dn, k in live.items():
            seeded.setdefault(where(dn), {})[k] = "AAAA"
        for cm, data in seeded.items():
            self.c.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": cm}, "binaryData": data}, self.ns)
        for i, name in enumerate(names):
            self.make(name, 1, subnet=40 + i)
            self.metrics.set_rate(name, 5)
        g = self.start(cfg, ident="ckpt-1")
        try:
            for name in names:
                wait_for(lambda: "deployment=%s " % name in g.text() and "WithinBand" in g.text(),
                         20, what="%s decided" % name)
            time.sleep(1.5)
            self.assertEqual(g.stop(), 0)
            for name in names:
                got = keys(where(name))
                data = self.c.get("configmaps", where(name), self.ns).get("data") or {}
                self.assertEqual(data.get("unit.%s_%s" % (self.ns, name)), "requests")
                self.assertEqual(data.get("uid.%s_%s" % (self.ns, name)),
                                 self.c.get("deployments", name, self.ns)["metadata"]["uid"])
                for what in ("forecast", "capacity"):
                    k = "%s.%s_%s" % (what, self.ns, name)
                    self.assertIn(k, got, "%s missing from %s" % (k, where(name)))
                    raw = base64.b64decode(got[k])
                    if what == "forecast":
                        # packed (pkg/forecast/pack.c): magic, the state's length, one zlib
                        # stream of the state
                        self.assertEqual(raw[:4], b"GSFZ")
                        plain = zlib.decompress(raw[8:])
                        self.assertEqual(len(plain), int.from_bytes(raw[4:8], "little"))
                        self.assertEqual(plain[:4], b"GSFC")
                        self.assertGreater(len(plain), 100)
                    else:
                        self.assertGreater(len(raw), 8)
            cm0 = keys(where("long-gone"))
            self.assertEqual(cm0.get("note"), "aGVsbG8=", "a key not gpuscaler's was touched")
            self.assertNotIn(stale, cm0, "the entry of a Deployment that is gone stayed")
            for k in stale_more:
                self.assertNotIn(k, cm0, "the entry of a Deployment that is gone stayed")
            for dn, k in live.items():
                self.assertIn(k, keys(where(dn)), "the entry of %s was removed" % dn)
            self.assertEqual({c["metadata"]["name"] for c in self.c.list(
                "configmaps", self.ns)["items"] if c["metadata"]["name"].startswith(prefix)},
                {where(x) for x in names + ("long-gone",)})
            # restart: every Deployment restored but one whose entry was learned in another
            # demand unit, and one deleted and made again under its name (another uid) while
            # gpuscaler was away; one deleted while running loses its entry
            self.c.patch("configmaps", where("ckb"), {"data": {
                "unit.%s_ckb" % self.ns: "tokens;prompt-token-weight=0.25"}}, self.ns)
            old_uid = self.c.get("deployments", "ckc", self.ns)["metadata"]["uid"]
            self.c.delete("deployments", "ckc", self.ns)
            wait_for(lambda: "ckc" not in {d["metadata"]["name"] for d in self.c.list(
                "deployments", self.ns)["items"]}, 20, what="ckc gone")
            self.c.create("deployments", deployment("ckc", 1, dict(ANNOTATIONS),
                                                    self.metrics.port), self.ns)
            new_uid = self.c.get("deployments", "ckc", self.ns)["metadata"]["uid"]
            self.assertNotEqual(old_uid, new_uid)
            g = self.start(cfg, ident="ckpt-2")
            wait_for(lambda: "ignoring checkpoint in %s: written for demand unit tokens;"
                     "prompt-token-weight=0.25, now requests" % where("ckb") in g.text(), 20,
                     what="ckb's checkpoint of another unit ignored")
            wait_for(lambda: "ignoring checkpoint in %s: written for a Deployment of that name "
                     "deleted since (uid %s, now %s)" % (where("ckc"), old_uid, new_uid)
                     in g.text(), 20, what="the old ckc's checkpoint ignored")
            for name in ("ckb", "ckc"):
                self.assertEqual([ln for ln in g.text().splitlines()
                                  if "deployment=%s " % name in ln and "restored" in ln], [])
            for name in ("cka",):
                wait_for(lambda: [ln for ln in g.text().splitlines()
                                  if "restored forecaster from %s " % where(name) in ln
                                  and "deployment=%s " % name in ln], 20,
                         what="%s restored" % name)
            # each ConfigMap read is reported with the size the API server counts against
            # its 1 MiB: data and decoded binaryData
            for cm in {where(x) for x in names}:
                obj = self.c.get("configmaps", cm, self.ns)
                size = sum(len(v.encode()) for v in (obj.get("data") or {}).values()) + sum(
                    len(base64.b64decode(v)) for v in (obj.get("binaryData") or {}).values())
                self.assertEqual(g.metric("gpuscaler_checkpoint_configmap_bytes",
                                          '{configmap="%s"}' % cm), size)
            self.c.delete("deployments", "ckc", self.ns)
            wait_for(lambda: "no longer tracked" in g.text(), 20, what="ckc untracked")
            self.assertEqual(g.stop(), 0)
            self.assertNotIn("forecast.%s_ckc" % self.ns, keys(where("ckc")))
            self.assertNotIn("capacity.%s_ckc" % self.ns, keys(where("ckc")))
            self.assertNotIn("unit.%s_ckc" % self.ns, self.c.get(
                "configmaps", where("ckc"), self.ns).get("data") or {})
            for name in ("cka", "ckb"):
                self.assertIn("forecast.%s_%s" % (self.ns, name), keys(where(name)))
            # a ConfigMap that cannot take the state: said so, the daemon carries on
            full = "ckpt-full"
            self.c.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": full + "-0"},
                                         "binaryData": {"other": base64.b64encode(
                                             b"x" * (1024 * 1024 - 64)).decode()}}, self.ns)
            g = self.start(cfg.replace("configmap: %s, configmaps: %d" % (prefix, n),
                                       "configmap: %s, configmaps: 1" % full), ident="ckpt-3")
            wait_for(lambda: "WithinBand" in g.text(), 20, what="a decision")
            # the full one's size, as read: what an alert on 1 MiB would see
            self.assertGreaterEqual(g.metric("gpuscaler_checkpoint_configmap_bytes",
                                             '{configmap="%s-0"}' % full), 1024 * 1024 - 64)
            self.assertEqual(g.stop(), 0)
            log = g.text()
            full_lines = [ln for ln in log.splitlines() if "is full" in ln]
            self.assertEqual(len(full_lines), 1, full_lines)
            self.assertIn("checkpoint ConfigMap %s-0 is full" % full, full_lines[0])
            self.assertIn("raise checkpoint.configmaps (now 1)", full_lines[0])
            self.assertIn("level=warn", full_lines[0])
            self.assertEqual(sorted(keys(full + "-0")), ["other"])
        finally:
            g.stop()


    def test_9_tokens_refused_for_triton_and_held_without_token_metrics(self):
        """demand-unit tokens, through the API only: with metrics-profile triton it is an
        InvalidAnnotation naming demand-unit and Triton (replicas held); on vLLM pods whose
        exposition lacks the token counters it is MetricsUnavailable, and replicas are held
        even when the request rate drops to nothing (never scale in on missing metrics)."""
        tok = {"gpuscaler.io/demand-unit": "tokens", "gpuscaler.io/capacity-per-gpu": "4000"}
        self.make("tok-triton", 2, subnet=18,
                  annotations=dict(tok, **{"gpuscaler.io/metrics-profile": "triton"}))
        self.make("tok-nometric", 3, subnet=19, annotations=tok)
        g = self.start()
        try:
            self.metrics.set_rate("tok-triton", 100)
            self.metrics.set_rate("tok-nometric", 0)
            ev = wait_for(lambda: events(self.c, self.ns, "tok-triton", "InvalidAnnotation"),
                          20, what="InvalidAnnotation event")
            self.assertEqual(ev[0]["type"], "Warning")
            self.assertIn("gpuscaler.io/demand-unit", ev[0]["message"])
            self.assertIn("Triton exposes no token counters", ev[0]["message"])
            mu = wait_for(lambda: events(self.c, self.ns, "tok-nometric", "MetricsUnavailable"),
                          25, what="MetricsUnavailable event")
            self.assertIn("token metric vllm:generation_tokens_total not found",
                          mu[0]["message"])
            time.sleep(8)  # > scale-in-after: still held
            self.assertEqual(self.replicas("tok-triton"), 2)
            self.assertEqual(self.replicas("tok-nometric"), 3)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "tok-triton", self.ns)
            self.c.delete("deployments", "tok-nometric", self.ns)

    @staticmethod
    def daily(t):
        """The fake Prometheus's rate at unix time t: a daily cycle of 20 to 80 req/s."""
        import math
        return 50 + 30 * math.sin(2 * math.pi * t / 86400)

    def prometheus(self, range_delay=0.0):
        """A fake Prometheus on loopback: any range is the daily cycle (answered after
        range_delay seconds), any instant query a fixed rate of 40 req/s (a p99 of 0.5 s)."""
        def slow_ranges(path, params):
            if path == "/api/v1/query_range" and range_delay:
                time.sleep(range_delay)
            return None
        prom = FakePrometheus(self.daily, lambda q: 0.5 if "histogram_quantile" in q else 40,
                              reply=slow_ranges)
        self.addCleanup(prom.close)
        return prom

    def checkpointed(self, name, prefix, minutes, prom):
        """A config with prometheus.url and one checkpoint ConfigMap <prefix>-0 in the test
        namespace, which already holds `name`'s forecaster after `minutes` one-minute buckets
        of the daily cycle up to now (made by the real forecaster). Returns (config, the
        ConfigMap's name)."""
        import base64
        cfg = ("decision-interval: 1s\n"
               "leader-election: {enabled: false, namespace: %s}\n"
               "scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}\n"
               "checkpoint: {configmap: %s, configmaps: 1}\n"
               "prometheus: {url: \"%s\"}\n") % (self.ns, prefix, prom.url)
        now_min = int(time.time() // 60)
        obs = [(k * 60000, self.daily(k * 60.0)) for k in range(now_min - minutes, now_min)]
        cm, key = checkpoint_name(self.ns, name, prefix, 1)
        self.c.create("configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm},
            "binaryData": {key: base64.b64encode(history_state(obs, 10, "24h")).decode()}},
            self.ns)
        self.addCleanup(self.c.delete, "configmaps", cm, self.ns)
        return cfg, cm

    def seed_in_flight(self, name, subnet, ident):
        """A Deployment `name` with metrics-source prometheus and gpuscaler started for it
        against a fake Prometheus that holds every range answer 0.4 s; returns (the
        Prometheus, the gpuscaler) once the first seed's first range request came."""
        prom = self.prometheus(range_delay=0.4)
        cfg = CONFIG + "prometheus: {url: \"%s\"}\n" % prom.url
        self.make(name, 2, subnet=subnet, annotations=PROM_ANNOTATIONS)
        g = self.start(config=cfg, ident=ident)
        try:
            wait_for(lambda: prom.ranges(), 20, what="the first seed's first range request")
        except BaseException:
            g.stop()
            self.c.delete("deployments", name, self.ns)
            raise
        return prom, g

    def test_10_prometheus_seed_covers_the_forecasters_history(self):
        """With metrics-source: prometheus, the forecaster is seeded at start-up from
        query_range: all the history it uses (7 days and 30 minutes for the daily season, the
        recent seasons' plan's) plus an hour, at 60 s steps, in requests of at most a day
        (1,440 steps), oldest first, without gaps. Every query carries the configured tenant
        header and basic auth, the password read from its file."""
        prom = self.prometheus()
        secrets = tempfile.mkdtemp(prefix="gpuscaler-prom-")
        self.addCleanup(shutil.rmtree, secrets, True)
        pw = os.path.join(secrets, "password")
        with open(pw, "w") as f:
            f.write("s3cret\n")
        cfg = CONFIG + ("prometheus: {url: \"%s\", headers: {X-Scope-OrgID: ml-serving}, "
                        "username: gpuscaler, password-file: %s}\n") % (prom.url, pw)
        self.make("seeded", 2, subnet=20, annotations=PROM_ANNOTATIONS)
        t0 = time.time()
        g = self.start(config=cfg)
        try:
            line = wait_for(lambda: [ln for ln in g.text().splitlines()
                                     if "forecaster seeded from Prometheus" in ln], 30,
                            what="the seed's log line")[0]
            got = sorted(prom.ranges())
            self.assertEqual(len(got), 8, got)  # 10,171 steps in days of 1,440
            for a, b, st in got:
                self.assertEqual(st, 60)
                self.assertLessEqual(round((b - a) / st) + 1, 1440)
            for (_, b, _), (a, _, _) in zip(got, got[1:]):
                self.assertEqual(a, b + 60)  # contiguous, no overlap
            span = got[-1][1] - got[0][0]
            self.assertEqual(span, (7 * 1440 + 90) * 60)  # 7 days, 30 min and the hour
            self.assertLessEqual(abs(got[-1][1] - t0), 30)
            import re
            m = re.search(r"(\d+) points, (\d+) buckets", line)
            self.assertIsNotNone(m, line)
            self.assertEqual(int(m.group(1)), 7 * 1440 + 91)
            self.assertGreaterEqual(int(m.group(2)), 7 * 1440 + 90)
            wait_for(lambda: [p for p, _ in prom.requests if p == "/api/v1/query"], 30,
                     what="an instant query")
            with prom.lock:
                seen = list(prom.headers)
            self.assertGreater(len(seen), 8)
            for h in seen:  # base64("gpuscaler:s3cret")
                self.assertEqual(h.get("x-scope-orgid"), "ml-serving", h)
                self.assertEqual(h.get("authorization"), "Basic Z3B1c2NhbGVyOnMzY3JldA==", h)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "seeded", self.ns)

    def test_11_no_prometheus_seed_over_a_longer_checkpoint(self):
        """A checkpoint that holds more history than the seed could bring (8 days of minutes,
        where the seed brings 7 days and 1.5 hours) is restored, and Prometheus is asked for
        no range at all: the seed waits for the checkpoint's read. Instant queries go on."""
        prom = self.prometheus()
        cfg, _ = self.checkpointed("kept", "seedskip", 8 * 1440, prom)
        self.make("kept", 2, subnet=21, annotations=PROM_ANNOTATIONS)
        g = self.start(config=cfg, ident="seedskip")
        try:
            line = wait_for(lambda: [ln for ln in g.text().splitlines()
                                     if "restored forecaster" in ln], 30,
                            what="the checkpoint's restore")[0]
            import re
            m = re.search(r"\((\d+) buckets of history\)", line)
            self.assertIsNotNone(m, line)
            self.assertGreater(int(m.group(1)), 7 * 1440 + 91)  # more than the seed brings
            wait_for(lambda: "no seed from Prometheus" in g.text(), 10, what="the skip's line")
            # decisions go on from instant queries, and still no range is asked for
            n0 = len(prom.queries())
            wait_for(lambda: len(prom.queries()) >= n0 + 4, 15, what="more instant queries")
            self.assertEqual(prom.ranges(), [])
            self.assertNotIn("seeded from Prometheus", g.text())
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "kept", self.ns)

    @unittest.skipIf(REAL, "fault injection needs the fake API server")
    def test_12_seed_over_a_checkpoint_that_could_not_be_read(self):
        """A checkpoint ConfigMap that cannot be read (HTTP 500 six times: its reads fail for
        about 6 s at 1 s ticks, time for the seed to finish first even on a loaded machine)
        does not hold the Prometheus seed back, and when the read succeeds at last, the seeded
        forecaster's 7 days are kept over the checkpoint's 2 hours."""
        import re
        prom = self.prometheus()
        cfg, cm = self.checkpointed("late", "seedfail", 120, prom)
        self.fk.fault({"action": "error", "status": 500, "verb": "get", "resource": "configmaps",
                       "namespace": self.ns, "name": cm, "count": 6})
        self.make("late", 2, subnet=22, annotations=PROM_ANNOTATIONS)
        g = self.start(config=cfg, ident="seedfail")
        try:
            line = wait_for(lambda: [ln for ln in g.text().splitlines()
                                     if "keeping the forecaster's" in ln], 30,
                            what="the checkpoint read at last, and the seed kept")[0]
            m = re.search(r"keeping the forecaster's (\d+) buckets of history over the (\d+) of "
                          r"the checkpoint in " + cm, line)
            self.assertIsNotNone(m, line)
            self.assertGreaterEqual(int(m.group(1)), 7 * 1440 + 90)
            self.assertLessEqual(int(m.group(2)), 120)
            text = g.text()
            self.assertGreaterEqual(text.count("reading checkpoint ConfigMap %s failed: HTTP 500"
                                               % cm), 1, text)
            self.assertIn("forecaster seeded from Prometheus", text)
            self.assertLess(text.index("forecaster seeded from Prometheus"),
                            text.index("keeping the forecaster's"))
            self.assertNotIn("restored forecaster", text)
            self.assertEqual(len(prom.ranges()), 8)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "late", self.ns)

    def test_13_a_changed_forecaster_is_seeded_again(self):
        """A configuration that starts the forecaster afresh (here forecast-quantile 0.9 ->
        0.8) seeds it from Prometheus again, and a seed still being fetched under the old
        configuration is discarded, not adopted. Every range answer is held 0.4 s, so the
        first seed is in flight when the annotation changes."""
        import re
        prom, g = self.seed_in_flight("reseeded", 23, "reseed")
        try:
            self.c.patch("deployments", "reseeded", {"metadata": {"annotations": {
                "gpuscaler.io/forecast-quantile": "0.8"}}}, self.ns)
            line = wait_for(lambda: [ln for ln in g.text().splitlines()
                                     if "forecaster seeded from Prometheus" in ln], 40,
                            what="the second seed")[0]
            text = g.text()
            self.assertIn("forecaster seed from Prometheus discarded: the forecaster's "
                          "configuration changed while it was fetched", text)
            self.assertLess(text.index("discarded"), text.index("forecaster seeded from"))
            self.assertEqual(text.count("forecaster seeded from Prometheus"), 1, text)
            m = re.search(r"(\d+) points, (\d+) buckets", line)
            self.assertIsNotNone(m, line)
            self.assertEqual(int(m.group(1)), 7 * 1440 + 91)
            got = prom.ranges()
            self.assertEqual(len(got), 16, got)  # both seeds asked for all 8 chunks
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "reseeded", self.ns)

    def test_14_a_seed_for_a_deleted_deployment_is_not_adopted(self):
        """A Deployment deleted while its seed is in flight and created again under the same
        name with another seasonality (12h) is seeded for its own settings: the first seed,
        fetched for the daily season, is discarded when it arrives."""
        import re
        prom, g = self.seed_in_flight("again", 24, "recreate")
        try:
            self.c.delete("deployments", "again", self.ns)
            wait_for(lambda: "no longer tracked" in g.text(), 10, what="the Deployment dropped")
            full = dict(ANNOTATIONS)
            full.update(PROM_ANNOTATIONS)
            full["gpuscaler.io/seasonality"] = "12h"
            self.c.create("deployments", deployment("again", 2, full, self.metrics.port),
                          self.ns)
            line = wait_for(lambda: [ln for ln in g.text().splitlines()
                                     if "forecaster seeded from Prometheus" in ln], 40,
                            what="the new Deployment's seed")[0]
            text = g.text()
            self.assertIn("forecaster seed from Prometheus discarded: the Deployment was "
                          "deleted and created again while it was fetched", text)
            self.assertNotIn("configuration changed while it was fetched", text)
            self.assertEqual(text.count("forecaster seeded from Prometheus"), 1, text)
            m = re.search(r"(\d+) points", line)
            self.assertIsNotNone(m, line)
            # 7 seasons of 12 h, 30 minutes and the hour: 5,131 steps, not the daily 10,171
            self.assertEqual(int(m.group(1)), 7 * 720 + 91)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "again", self.ns)

    def test_67_a_seed_of_a_changed_query_is_not_adopted(self):
        """The promql-rate annotation changes while the forecaster's seed is in flight (a
        week of the old query's rate, a day a request): that seed is discarded when it
        arrives, and the new query's history is asked for and adopted instead (the old
        one's was adopted)."""
        prom, g = self.seed_in_flight("reseed", 78, "inst-reseed")
        try:
            self.c.patch("deployments", "reseed", {"metadata": {"annotations": {
                "gpuscaler.io/promql-rate": 'sum(rate(reseed_new_total[2m]))'}}}, self.ns)
            wait_for(lambda: "forecaster seeded from Prometheus" in g.text(), 40,
                     what="reseed: the new query's seed")
            text = g.text()
            self.assertIn("forecaster seed from Prometheus discarded: the queries changed while "
                          "it was fetched; asked again", text)
            self.assertEqual(text.count("forecaster seeded from Prometheus"), 1, text)
            with prom.lock:
                ranges = [p.get("query", "") for path, p in prom.requests
                          if path == "/api/v1/query_range"]
            last = [q for q in ranges[-8:]]
            self.assertTrue(all("reseed_new_total" in q for q in last), last)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "reseed", self.ns)

    def stops_under_slow_leases(self, cfg, ident, ready, what):
        """Start gpuscaler with cfg three times; once ready(g), slow every Lease request to
        0.8 s and stop it gracefully 1.3 to 1.9 s later, so that a renewal or a round is in
        flight. Yields (the instance, seconds its stop took) after each stop."""
        for attempt in range(3):
            g = self.start(cfg, ident=ident)
            try:
                wait_for(lambda: ready(g), 20, what=what)
                self.fk.fault({"action": "latency", "ms": 800, "resource": "leases",
                               "count": None})
                time.sleep(1.3 + 0.3 * attempt)
                t0 = time.time()
                g.stop()
                took = time.time() - t0
            finally:
                g.stop()
                self.fk.clear_faults()
            yield g, took

    @unittest.skipIf(REAL, "the slow API server is a fault rule of the fake API server")
    def test_15_release_waits_for_a_renewal_in_flight(self):
        """A graceful stop while a Lease renewal is in flight (every Lease request takes 0.8 s,
        the retry period is 0.5 s, so one nearly always is): the release goes after the renewal
        answers, over its resourceVersion. Sent at once with the same resourceVersion, one of the
        two would conflict; when the renewal won, the Lease stayed held until it expired."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-release,
                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}
""" % self.ns
        for g, took in self.stops_under_slow_leases(cfg, "inst-release",
                                                    lambda g: "became leader" in g.text(),
                                                    "leadership"):
            spec = self.c.get("leases", "e2e-release", self.ns)["spec"]
            self.assertEqual(spec.get("holderIdentity", ""), "", g.text()[-2000:])
            self.assertIn("released the lease", g.text())
            self.assertNotIn("releasing the lease failed", g.text())
            self.assertLess(took, 5)

    @unittest.skipIf(REAL, "the slow API server is a fault rule of the fake API server")
    def test_16_sharded_release_waits_for_renewals_in_flight(self):
        """test_15 with sharding on: a graceful stop while the round's list or shard renewals
        are in flight (every Lease request 0.8 s). Every shard Lease and the member Lease is
        released after they answer, over their resourceVersions: none conflicts, none is left
        held until it expires."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-duration: 4s, renew-deadline: 3s,
                  retry-period: 500ms}
sharding: {enabled: true, shards: 4, lease-prefix: e2e-srel}
""" % self.ns
        names = ["e2e-srel-%d" % s for s in range(4)] + ["e2e-srel-member-inst-srel"]
        for g, took in self.stops_under_slow_leases(
                cfg, "inst-srel", lambda g: g.metric("gpuscaler_shards_held") == 4,
                "all four shards held"):
            text = g.text()
            for n in names:
                spec = self.c.get("leases", n, self.ns)["spec"]
                self.assertEqual(spec.get("holderIdentity", ""), "", "%s: %s" % (n, text[-2000:]))
            self.assertEqual(text.count("shard released: shard="), 4, text[-2000:])
            self.assertNotIn("writing lease", text)
            self.assertLess(took, 5)

    @unittest.skipIf(REAL, "the throttling is a fault rule of the fake API server")
    def test_17_stop_under_throttling_ends_in_time(self):
        """A graceful stop while the API server throttles every Lease request (429 with
        Retry-After: 4): the renewal in flight and the release are sent again only while the
        wait ends within 10 s of SIGTERM, so gpuscaler exits by itself well within the pod's
        30 s grace period (it took 10 waits of 4 s per request before, 40 s and more)."""
        # a renew-deadline longer than the waits, which the Lease requests' own deadline
        # would cut short otherwise (test_35): here the shutdown's budget must end them
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-throttled,
                  lease-duration: 20s, renew-deadline: 15s, retry-period: 500ms}
""" % self.ns
        g = self.start(cfg, ident="inst-throttled")
        try:
            wait_for(lambda: "became leader" in g.text(), 20, what="leadership")
            self.fk.fault({"action": "error", "status": 429, "retryAfter": 4,
                           "resource": "leases", "count": None})
            time.sleep(0.7)  # a renewal is answered 429 and waits
            t0 = time.time()
            rc = g.stop(timeout=45)
            took = time.time() - t0
        finally:
            g.stop()
            self.fk.clear_faults()
        text = g.text()
        self.assertEqual(rc, 0, text[-2000:])
        self.assertLess(took, 14, text[-2000:])
        self.assertIn("ends after the shutdown's budget", text)

    @unittest.skipIf(REAL, "the plugin hands out the fake API server's token")
    def test_18_exec_credential_plugin(self):
        """A kubeconfig whose user is an exec credential plugin, as EKS, GKE and AKS write
        them (the command beside the kubeconfig, its env entries, interactiveMode Never):
        gpuscaler runs it, authenticates with the token it prints, watches and scales as with
        any other credential, and counts the runs."""
        d = tempfile.mkdtemp(prefix="gpuscaler-exec-")
        self.addCleanup(shutil.rmtree, d, True)
        runs = os.path.join(d, "runs")
        with open(os.path.join(d, "get-token"), "w") as f:
            f.write("#!/bin/sh\n"
                    "[ \"$1\" = --cluster ] || exit 9\n"
                    "echo \"$KUBERNETES_EXEC_INFO\" >> \"$RUNS\"\n"
                    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",'\n"
                    "printf '\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$TOKEN\"\n")
        os.chmod(os.path.join(d, "get-token"), 0o755)
        with open(self.fk.pki["ca"], "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        kc = harness.write_kubeconfig(
            os.path.join(d, "kubeconfig"), self.fk.url, ca_file=self.fk.pki["ca"],
            user_extra={"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                 "command": "./get-token", "args": ["--cluster", "fake"],
                                 "env": [{"name": "TOKEN", "value": self.fk.token},
                                         {"name": "RUNS", "value": runs}],
                                 "interactiveMode": "Never", "provideClusterInfo": True}})
        with self.scaled_out(kc, "execd", 30, "inst-exec") as g:
            ok = g.metric("gpuscaler_api_exec_plugin_runs_total", '{result="ok"}')
            self.assertTrue(ok is not None and ok >= 1, g.text()[-2000:])
            self.assertEqual(g.metric("gpuscaler_api_exec_plugin_runs_total",
                                      '{result="error"}'), 0)
            with open(runs) as f:
                info = json.loads(f.readline())
            self.assertEqual(info["kind"], "ExecCredential")
            self.assertFalse(info["spec"]["interactive"])
            self.assertEqual(info["spec"]["cluster"]["server"], self.fk.url)
            self.assertEqual(info["spec"]["cluster"]["certificate-authority-data"], ca)

    @contextlib.contextmanager
    def scaled_out(self, kubeconfig, name, subnet, ident, env=None):
        """A Deployment `name` of 2 replicas and gpuscaler started with `kubeconfig`: the
        load rises to 38 req/s (ceil(38/8) = 5 replicas) and this yields the instance once it
        scaled out; then it is stopped and the Deployment deleted."""
        self.make(name, 2, subnet=subnet)
        g = Gpuscaler(kubeconfig, CONFIG, (), ident, env)
        self.procs.append(g)
        try:
            self.metrics.set_rate(name, 38)
            wait_for(lambda: self.replicas(name) == 5, 40, what="scale-out of " + name)
            yield g
        finally:
            g.stop()
            self.c.delete("deployments", name, self.ns)

    def tunnels_to_server(self, seen):
        """Every request line a connect_proxy() received opened a tunnel to the API server."""
        target = "CONNECT %s HTTP/1.1" % self.fk.url.split("://", 1)[1]
        self.assertTrue(seen and all(x == target for x in seen), seen)

    def connect_proxy(self):
        """An HTTP CONNECT proxy on loopback for this test: (its port, the request lines it
        received)."""
        import socket
        import socketserver
        import threading

        seen = []

        class Connect(socketserver.BaseRequestHandler):
            def handle(self):
                head = b""
                while b"\r\n\r\n" not in head:
                    b = self.request.recv(4096)
                    if not b:
                        return
                    head += b
                line = head.split(b"\r\n", 1)[0].decode()
                seen.append(line)
                method, target, _ = line.split(" ", 2)
                if method != "CONNECT":
                    self.request.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                    return
                host, port = target.rsplit(":", 1)
                up = socket.create_connection((host, int(port)), timeout=5)
                up.settimeout(None)
                self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

                def pump(a, b):
                    try:
                        while True:
                            d = a.recv(65536)
                            if not d:
                                break
                            b.sendall(d)
                    except OSError:
                        pass
                    for s_ in (a, b):
                        try:
                            s_.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass

                t = threading.Thread(target=pump, args=(up, self.request), daemon=True)
                t.start()
                pump(self.request, up)
                t.join(5)
                up.close()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        proxy = Server(("127.0.0.1", 0), Connect)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        self.addCleanup(proxy.server_close)
        self.addCleanup(proxy.shutdown)
        return proxy.server_address[1], seen

    @unittest.skipIf(REAL, "the proxy is a local one in front of the fake API server")
    def test_19_kubeconfig_proxy_url(self):
        """A kubeconfig cluster with proxy-url (GKE's recipe for a private cluster behind a
        bastion): every request of gpuscaler, watches included, goes through the proxy with
        HTTP CONNECT, and it scales as usual; NO_PROXY naming the server changes nothing (the
        kubeconfig's proxy carries every request, as client-go's: libcurl went around it)."""
        port, seen = self.connect_proxy()
        d = tempfile.mkdtemp(prefix="gpuscaler-proxy-")
        self.addCleanup(shutil.rmtree, d, True)
        kc = harness.write_kubeconfig(
            os.path.join(d, "kubeconfig"), self.fk.url, ca_file=self.fk.pki["ca"],
            token=self.fk.token, cluster_extra={"proxy-url": "http://127.0.0.1:%d" % port})
        with self.scaled_out(kc, "proxied", 31, "inst-proxy",
                             {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}):
            self.tunnels_to_server(seen)

    @unittest.skipIf(REAL, "the certificate's names are the fake API server's")
    def test_20_kubeconfig_tls_server_name(self):
        """A kubeconfig cluster with tls-server-name: the server is given by an address the
        certificate does not have to name, and TLS checks the name instead. With the name
        the certificate holds (localhost) gpuscaler scales; with another (not resolvable
        either) the connection still goes to the server's address and fails on the name. Through
        a proxy, the tunnel goes to the server's address too."""
        d = tempfile.mkdtemp(prefix="gpuscaler-tlsname-")
        self.addCleanup(shutil.rmtree, d, True)

        def kubeconfig(name, **extra):
            extra["tls-server-name"] = name
            return harness.write_kubeconfig(os.path.join(d, name), self.fk.url,
                                            ca_file=self.fk.pki["ca"], token=self.fk.token,
                                            cluster_extra=extra)

        self.assertTrue(self.fk.url.startswith("https://127.0.0.1:"), self.fk.url)
        bad = Gpuscaler(kubeconfig("nope.invalid"), CONFIG, (), "inst-tlsname-bad")
        self.procs.append(bad)
        try:
            wait_for(lambda: "nope.invalid" in bad.text(), 20, what="a failed handshake")
            text = bad.text()
            line = [ln for ln in text.splitlines() if "nope.invalid" in ln][0]
            self.assertIn("certificate", line)  # the name check failed, not a lookup
            self.assertNotIn("resolve", text.lower(), text[-2000:])
            self.assertEqual(bad.get("/readyz", bad.health_port)[0], 503)
        finally:
            bad.stop()
        # the good name, through a proxy too: the tunnel goes to the server's address
        port, seen = self.connect_proxy()
        kc = kubeconfig("localhost", **{"proxy-url": "http://127.0.0.1:%d" % port})
        _, since = self.fk.requests()
        with self.scaled_out(kc, "tlsname", 32, "inst-tlsname"):
            self.tunnels_to_server(seen)
            # the Host header names the server as the kubeconfig gives it (as client-go
            # sends it); the name is for TLS only
            hosts = {r["host"] for r in self.fk.requests(since)[0]
                     if r["userAgent"].startswith("gpuscaler")}
            self.assertEqual(hosts, {self.fk.url.split("://", 1)[1]})

    def test_21_statuses_keep_up_beyond_the_report_budget(self):
        """More Deployments decided in one tick than the report budget (32 writes in flight):
        each status annotation still goes out in that tick, the ones over the budget as the
        earlier writes end, not a tick later. 40 Deployments without pods, 8 s ticks: every
        status carries the first tick's time (to the second)."""
        from ctlharness import deployment
        names = ["budget-%02d" % i for i in range(40)]
        for n in names:
            self.c.create("deployments", deployment(n, 1, dict(ANNOTATIONS), self.metrics.port),
                          self.ns)
        self.addCleanup(lambda: [self.c.delete("deployments", n, self.ns) for n in names])
        cfg = CONFIG.replace("decision-interval: 1s", "decision-interval: 8s")
        g = self.start(cfg, ident="inst-budget")

        def statuses():
            out = {}
            for d in self.c.list("deployments", self.ns)["items"]:
                st = (d["metadata"].get("annotations") or {}).get("gpuscaler.io/status")
                if d["metadata"]["name"] in names and st:
                    out[d["metadata"]["name"]] = json.loads(st)
            return out
        try:
            got = wait_for(lambda: (lambda s: s if len(s) == len(names) else None)(statuses()),
                           30, interval=0.5, what="a status on every Deployment")
            times = sorted({st["time"] for st in got.values()})
            # one tick's decisions: within a second or two, where the next tick is 8 s later
            first, last = (calendar.timegm(time.strptime(t, "%Y-%m-%dT%H:%M:%SZ"))
                           for t in (times[0], times[-1]))
            self.assertLessEqual(last - first, 2, times)
            self.assertEqual({st["reason"] for st in got.values()}, {"MetricsUnavailable"})
            # nothing is left waiting
            for q in ("decision", "refresh"):
                self.assertEqual(g.metric("gpuscaler_status_writes_waiting",
                                          '{queue="%s"}' % q), 0.0)
        finally:
            g.stop()

    def test_22_unchanged_statuses_rewritten_within_the_serving_limit(self):
        """An unchanged status is rewritten every status.refresh-interval, within the age at
        which other replicas stop serving it (5/4 of the interval plus three ticks), however
        many refreshes wait before it: one still waiting at 9/8 of the interval is written as
        a decision, past the refreshes' rate. 40 Deployments without pods (unchanged
        MetricsUnavailable statuses, all due at once), a refresh interval of 8 s and 2
        refreshes a second: at that rate the last would wait 20 s (a gap of 28 s between its
        writes, where the serving limit is 13 s); promoted, every gap is at most 9 s plus a
        tick."""
        from ctlharness import deployment
        names = ["keepalive-%02d" % i for i in range(40)]
        for n in names:
            self.c.create("deployments", deployment(n, 1, dict(ANNOTATIONS), self.metrics.port),
                          self.ns)
        self.addCleanup(lambda: [self.c.delete("deployments", n, self.ns) for n in names])
        cfg = CONFIG + "status: {refresh-interval: 8s, writes-per-second: 2}\n"
        g = self.start(cfg, ident="inst-keepalive")

        def stamp(t):
            return calendar.timegm(time.strptime(t, "%Y-%m-%dT%H:%M:%SZ"))

        try:
            seen = {n: [] for n in names}  # each Deployment's distinct status times
            deadline, first = time.monotonic() + 60, None
            while time.monotonic() < deadline:
                for d in self.c.list("deployments", self.ns)["items"]:
                    n = d["metadata"]["name"]
                    st = (d["metadata"].get("annotations") or {}).get("gpuscaler.io/status")
                    if n in seen and st:
                        t = stamp(json.loads(st)["time"])
                        if not seen[n] or seen[n][-1] != t:
                            seen[n].append(t)
                if first is None and all(seen.values()):
                    first = time.monotonic()
                    w0 = g.metric("gpuscaler_status_writes_total", '{kind="refresh"}')
                if first is not None and time.monotonic() - first > 24:
                    break
                time.sleep(0.2)
            self.assertIsNotNone(first, "a status on every Deployment")
            elapsed = time.monotonic() - first
            refreshes = g.metric("gpuscaler_status_writes_total", '{kind="refresh"}') - w0
            decisions = g.metric("gpuscaler_status_writes_total", '{kind="decision"}')
            gaps = [b - a for ts in seen.values() for a, b in zip(ts, ts[1:])]
            # each rewritten at least twice in 24 s, none older than 9 s + a tick (the times
            # are whole seconds: one more), within the serving limit of 10 s + 3 ticks
            self.assertTrue(all(len(ts) >= 3 for ts in seen.values()), seen)
            self.assertLessEqual(max(gaps), 11, sorted(gaps))
            self.assertGreaterEqual(min(gaps), 8, sorted(gaps))  # not before they are due
            # the refreshes kept their rate (a burst of 2, then 2 a second); the rest went
            # out as decisions: more than the 40 first statuses
            self.assertLessEqual(refreshes, 2 * elapsed + 2 + 2, (refreshes, elapsed))
            self.assertGreater(decisions, 40 + 20, decisions)
            print("FIGURES test_22 gaps_max_s=%d refreshes=%d decisions=%d elapsed_s=%.1f"
                  % (max(gaps), refreshes, decisions, elapsed))
        finally:
            g.stop()

    def test_23_metrics_port_by_name(self):
        """gpuscaler.io/metrics-port may name a container port, as a PodMonitor does: each pod
        is scraped on its own port of that name. A name no container port has is reported
        (log and status) and the metrics are unavailable: replicas are held. Without the
        annotation and without a port named metrics or http, a pod's only container port is
        scraped, named or not (vLLM's own manifests leave it unnamed); with two unnamed ports
        there is none to pick, and the Event says to set gpuscaler.io/metrics-port."""
        self.make("named", 2, subnet=23, port_name="prom",
                  annotations={"gpuscaler.io/metrics-port": "prom"})
        self.make("unnamed", 2, subnet=24, port_name="prom",
                  annotations={"gpuscaler.io/metrics-port": "nope"})
        self.make("sole", 2, subnet=38, port_name=None)
        self.make("two-ports", 2, subnet=39, port_name=None, extra_port=9)
        for n in ("named", "unnamed", "sole", "two-ports"):
            self.metrics.set_rate(n, 10)
        g = self.start(ident="inst-portname")

        try:
            # 10 req/s over 2 pods of 1 GPU: 5 per GPU, read through the port named prom
            st = self.measured_status("named")
            self.assertAlmostEqual(st["requestsPerGPU"], 5, delta=1.5)
            self.assertNotEqual(st["reason"], "MetricsUnavailable")
            st = wait_for(lambda: (lambda s: s if s else None)(self.status("unnamed")), 20,
                          what="unnamed: a status")
            self.assertEqual(st["reason"], "MetricsUnavailable", st)
            self.assertEqual(self.replicas("unnamed"), 2)
            wait_for(lambda: [ln for ln in g.text().splitlines()
                              if "deployment=unnamed" in ln
                              and "no container port named nope" in ln], 10,
                     what="the missing port's name in the log")
            st = self.measured_status("sole")
            self.assertAlmostEqual(st["requestsPerGPU"], 5, delta=1.5)
            mu = wait_for(lambda: events(self.c, self.ns, "two-ports", "MetricsUnavailable"), 25,
                          what="two-ports: MetricsUnavailable")
            self.assertIn("could not be scraped (no metrics port: 2); set "
                          "gpuscaler.io/metrics-port", mu[0]["message"])
            self.assertEqual(self.replicas("two-ports"), 2)
        finally:
            g.stop()
            for n in ("named", "unnamed", "sole", "two-ports"):
                self.c.delete("deployments", n, self.ns)

    def test_25_stalled_replicas_are_reported(self):
        """A replica placed but not ready for three cold starts (a crash loop, an image that
        does not pull) is stalled: not coming capacity. It is counted in
        gpuscaler_stalled_replicas and the status (stalledReplicas), once that long has
        passed, and not before."""
        k = self.make("stuck", 2, subnet=26, cold_start=1.0,
                      annotations={"gpuscaler.io/cold-start": "1s"})
        self.metrics.set_rate("stuck", 4)
        g = self.start(ident="inst-stalled")
        labels = '{namespace="%s",deployment="stuck"}' % self.ns

        try:
            wait_for(lambda: g.metric("gpuscaler_stalled_replicas", labels) == 0, 20,
                     what="no stalled replica")
            # from now on new pods never become ready; min-replicas 3 asks for a third
            k.cold_start = 3600
            t0 = time.time()
            self.c.patch("deployments", "stuck",
                         {"metadata": {"annotations": {"gpuscaler.io/min-replicas": "3"}}},
                         self.ns)
            wait_for(lambda: self.replicas("stuck") == 3, 20, what="scaled to min-replicas 3")
            # the look-ahead is the cold start (1 s, or the 1 s learned) plus the 1 s tick: the
            # third replica is stalled after 3 x 2 s of not being ready
            wait_for(lambda: g.metric("gpuscaler_stalled_replicas", labels) == 1, 30,
                     what="one stalled replica")
            took = time.time() - t0
            # (creation times are whole seconds: up to 1 s early)
            self.assertGreaterEqual(took, 4.5, "stalled before three cold starts")
            st = wait_for(lambda: (lambda s: s if s and s.get("stalledReplicas") else None)(
                self.status("stuck")), 20, what="stalledReplicas in the status")
            self.assertEqual(st["stalledReplicas"], 1)
            self.assertEqual(self.replicas("stuck"), 3)
        finally:
            g.stop()
            self.c.delete("deployments", "stuck", self.ns)

    def test_26_failing_pods_are_stalled_at_once(self):
        """A replica whose container the kubelet reports in CrashLoopBackOff is stalled at
        once, long before three cold starts, and a Warning Event ReplicasStalled on the
        Deployment names the pod and the kubelet's reason."""
        # a 10-minute cold start: the time rule would take 30 minutes
        k = self.make("crashy", 2, subnet=27,
                      annotations={"gpuscaler.io/cold-start": "10m"})
        self.metrics.set_rate("crashy", 4)
        g = self.start(ident="inst-failing")
        labels = '{namespace="%s",deployment="crashy"}' % self.ns
        try:
            wait_for(lambda: g.metric("gpuscaler_stalled_replicas", labels) == 0, 20,
                     what="no stalled replica")
            k.cold_start = 3600  # new pods never become ready
            self.c.patch("deployments", "crashy",
                         {"metadata": {"annotations": {"gpuscaler.io/min-replicas": "3"}}},
                         self.ns)
            wait_for(lambda: self.replicas("crashy") == 3 and len(k.pods) == 3, 20,
                     what="scaled to min-replicas 3")
            pname = k.pods[-1][0]
            time.sleep(2)  # two ticks: a pod merely starting is not stalled
            self.assertEqual(g.metric("gpuscaler_stalled_replicas", labels), 0)
            # what the kubelet writes when the server exits and restarts keep failing
            self.c.patch("pods", pname, {"status": {"phase": "Running", "containerStatuses": [{
                "name": "server", "image": "x", "imageID": "", "ready": False,
                "restartCount": 4, "started": False,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message":
                                      "back-off 1m20s restarting failed container=server "
                                      "pod=%s_%s(uid)" % (pname, self.ns)}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                             "startedAt": now_rfc3339(),
                                             "finishedAt": now_rfc3339()}}}]}},
                         self.ns, subresource="status")
            t0 = time.time()
            wait_for(lambda: g.metric("gpuscaler_stalled_replicas", labels) == 1, 10,
                     what="the crash-looping replica stalled")
            self.assertLess(time.time() - t0, 10)
            ev = wait_for(lambda: events(self.c, self.ns, "crashy", "ReplicasStalled"), 10,
                          what="a ReplicasStalled Event")
            self.assertEqual(ev[0]["type"], "Warning")
            self.assertIn(pname, ev[0]["message"])
            self.assertIn("CrashLoopBackOff", ev[0]["message"])
            self.assertEqual(self.replicas("crashy"), 3, "a stalled replica is not replaced")
        finally:
            g.stop()
            self.c.delete("deployments", "crashy", self.ns)

    def test_27_scale_to_zero_and_back(self):
        """min-replicas 0, with a rate counted where the requests arrive (a promql-rate over a
        gateway's counter, from a fake Prometheus): after scale-in-after without a request the
        Deployment goes to 0; min-replicas raised to 1 then raises it (a zero gpuscaler made
        is not parked); the first requests wake it at once, sized for them, long before
        scale-out-after. Scaled to 0 by hand under min-replicas 1 it is parked: left there,
        as the HPA does, until it is scaled up by hand."""
        rate = {"v": 0.0}

        def answer(q):
            if "gateway_requests_total" in q:
                return rate["v"]
            return 0.5 if "histogram_quantile" in q else 0
        prom = FakePrometheus(self.daily, answer)
        self.addCleanup(prom.close)
        ann = {"gpuscaler.io/metrics-source": "prometheus", "gpuscaler.io/min-replicas": "0",
               "gpuscaler.io/promql-rate":
                   'sum(rate(gateway_requests_total{route="{{deployment}}"}[1m]))',
               "gpuscaler.io/scale-out-after": "60s"}
        self.make("idle", 1, subnet=28, annotations=ann)
        g = self.start(config=CONFIG + 'prometheus: {url: "%s"}\n' % prom.url,
                       ident="inst-zero")

        def status():
            d = self.c.get("deployments", "idle", self.ns)
            st = (d["metadata"].get("annotations") or {}).get("gpuscaler.io/status")
            return json.loads(st) if st else {}
        try:
            t0 = time.time()
            wait_for(lambda: self.replicas("idle") == 0, 30, what="scaled to zero")
            # scale-in-after (6 s) of idleness first (less a tick: the clock starts at the first)
            self.assertGreaterEqual(time.time() - t0, 4.5)
            time.sleep(3)
            self.assertEqual(self.replicas("idle"), 0, "stays at zero while idle")
            self.assertEqual(status().get("reason"), "AtMinReplicas")
            # min-replicas raised to keep a replica warm: a zero gpuscaler made is no
            # Deployment parked by hand, so it goes to 1 (the HPA would leave it at 0)
            self.c.patch("deployments", "idle",
                         {"metadata": {"annotations": {"gpuscaler.io/min-replicas": "1"}}},
                         self.ns)
            wait_for(lambda: self.replicas("idle") == 1, 15, what="raised to min-replicas 1")
            self.assertNotEqual(status().get("reason"), "Parked")
            self.c.patch("deployments", "idle",
                         {"metadata": {"annotations": {"gpuscaler.io/min-replicas": "0"}}},
                         self.ns)
            wait_for(lambda: self.replicas("idle") == 0, 30, what="back to zero")
            # 25 req/s arrive at the gateway: 25 / 8 per replica -> 4, at once
            rate["v"] = 25.0
            t1 = time.time()
            wait_for(lambda: self.replicas("idle") == 4, 15, what="woken up to 4")
            self.assertLess(time.time() - t1, 15, "woke before scale-out-after (60 s)")
            ev = wait_for(lambda: [e for e in events(self.c, self.ns, "idle", "ScaledOut")
                                   if "arrive at 0 replicas" in e["message"]], 10,
                          what="the ScaledOut Event of the wake-up")
            self.assertIn("0 -> 4", ev[0]["message"])
            # parked: min-replicas 1, scaled to 0 by hand, with requests arriving
            self.c.patch("deployments", "idle",
                         {"metadata": {"annotations": {"gpuscaler.io/min-replicas": "1"}}},
                         self.ns)
            self.c.patch("deployments", "idle", {"spec": {"replicas": 0}}, self.ns)
            wait_for(lambda: status().get("reason") == "Parked", 15, what="reason Parked")
            ev = wait_for(lambda: events(self.c, self.ns, "idle", "Parked"), 10,
                          what="a Parked Event")
            self.assertEqual(ev[0]["type"], "Normal")
            self.assertIn("min-replicas 1", ev[0]["message"])
            time.sleep(3)
            self.assertEqual(self.replicas("idle"), 0, "a parked Deployment is left at zero")
            # scaled up by hand: the rules resume (25 req/s on 1 replica: above the target,
            # the sustained rule's clock runs)
            self.c.patch("deployments", "idle", {"spec": {"replicas": 1}}, self.ns)
            wait_for(lambda: status().get("reason") == "AboveTargetWaiting", 15,
                     what="the rules resumed after parking")
        finally:
            g.stop()
            self.c.delete("deployments", "idle", self.ns)

    def test_28_label_matchers_select_series(self):
        """A metric annotation with label matchers reads only the series they select: pods that
        also count a second model's requests (3x the rate) are sized on their own model's. A
        matcher no series meets is MetricsUnavailable (held, the selector named). A regex matcher
        is anchored as in PromQL ("m|o" is not "other"); one POSIX would read differently (a
        lookahead) is an InvalidAnnotation naming the key; so is a name with a non-ASCII letter,
        whose Event quotes the value cut mid-character (the message stays valid UTF-8)."""
        sel = 'vllm:request_success_total{model_name="m",finished_reason!="abort"}'
        self.make("sel-m", 2, subnet=29, annotations={"gpuscaler.io/request-metric": sel})
        self.make("sel-none", 2, subnet=30, annotations={
            "gpuscaler.io/request-metric": 'vllm:request_success_total{model_name="gone"}'})
        self.make("sel-regex", 2, subnet=31, annotations={
            "gpuscaler.io/request-metric": 'vllm:request_success_total{model_name=~"m|o"}'})
        self.make("sel-lookahead", 2, subnet=35, annotations={
            "gpuscaler.io/request-metric": 'vllm:request_success_total{model_name=~"m(?=x)"}'})
        self.make("sel-utf8", 2, subnet=32, annotations={
            "gpuscaler.io/request-metric": "a" * 59 + "\u00e9"})
        names = ("sel-m", "sel-none", "sel-regex", "sel-lookahead", "sel-utf8")
        for n in names:
            self.metrics.set_rate(n, 10)
            self.metrics.set_other_rate(n, 30)
        g = self.start(ident="inst-selectors")

        try:
            # 10 req/s of model m over 2 pods of 1 GPU: 5 per GPU (20 with the other model's)
            st = self.measured_status("sel-m")
            self.assertAlmostEqual(st["requestsPerGPU"], 5, delta=1.5)
            mu = wait_for(lambda: events(self.c, self.ns, "sel-none", "MetricsUnavailable"), 25,
                          what="sel-none: MetricsUnavailable")
            self.assertIn('request metric vllm:request_success_total{model_name="gone"} not found',
                          mu[0]["message"])
            st = self.measured_status("sel-regex")
            self.assertAlmostEqual(st["requestsPerGPU"], 5, delta=1.5)
            ev = wait_for(lambda: events(self.c, self.ns, "sel-lookahead", "InvalidAnnotation"),
                          20, what="sel-lookahead: InvalidAnnotation")
            self.assertIn("gpuscaler.io/request-metric", ev[0]["message"])
            self.assertIn("(?= is not supported when scraping", ev[0]["message"])
            ev = wait_for(lambda: events(self.c, self.ns, "sel-utf8", "InvalidAnnotation"), 20,
                          what="sel-utf8: InvalidAnnotation")
            self.assertIn("byte 0xc3 after the name", ev[0]["message"])
            self.assertIn("a" * 59 + "?'", ev[0]["message"])  # cut mid-character: scrubbed
            time.sleep(7)  # past scale-in-after: the unmeasured ones are held
            self.assertEqual(self.replicas("sel-none"), 2)
            self.assertEqual(self.replicas("sel-lookahead"), 2)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            for n in names:
                self.c.delete("deployments", n, self.ns)

    def test_29_nim_profile_scrapes_its_own_path(self):
        """metrics-profile nim reads NIM's unprefixed names at /v1/metrics (failed requests not
        counted); with metrics-path /metrics, where NIM answers 404, the pods cannot be scraped:
        MetricsUnavailable naming the HTTP error, and the replicas are held."""
        nim = {"gpuscaler.io/metrics-profile": "nim"}
        self.make("nim-a", 2, subnet=33, annotations=nim)
        self.make("nim-old", 2, subnet=34,
                  annotations=dict(nim, **{"gpuscaler.io/metrics-path": "/metrics"}))
        for n in ("nim-a", "nim-old"):
            self.metrics.set_shape(n, "nim")
            self.metrics.set_rate(n, 10)
        g = self.start(ident="inst-nim")
        try:
            # 10 req/s over 2 pods of 1 GPU: 5 per GPU (the failure counter, as large, not read)
            st = self.measured_status("nim-a")
            self.assertAlmostEqual(st["requestsPerGPU"], 5, delta=1.5)
            mu = wait_for(lambda: events(self.c, self.ns, "nim-old", "MetricsUnavailable"), 25,
                          what="nim-old: MetricsUnavailable")
            self.assertIn("HTTP error", mu[0]["message"])
            time.sleep(7)  # past scale-in-after: held
            self.assertEqual(self.replicas("nim-old"), 2)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            for n in ("nim-a", "nim-old"):
                self.c.delete("deployments", n, self.ns)

    def test_30_tei_profile_counts_inputs(self):
        """metrics-profile tei counts the inputs embedded (te_embed_success), not the HTTP requests
        that carried them in batches; pods that have served nothing expose no counter yet (TEI
        creates its series with their first use), which is not read as zero load: while no pod
        has it, MetricsUnavailable names the metric and the replicas are held."""
        tei = {"gpuscaler.io/metrics-profile": "tei"}
        self.make("tei-a", 2, subnet=36, annotations=tei)
        self.make("tei-idle", 3, subnet=37, annotations=tei)
        for n in ("tei-a", "tei-idle"):
            self.metrics.set_shape(n, "tei")
        self.metrics.set_rate("tei-a", 16)
        g = self.start(ident="inst-tei")
        try:
            # 16 inputs/s over 2 pods of 1 GPU: 8 per GPU (the HTTP requests, 1 per GPU, not read)
            st = self.measured_status("tei-a")
            self.assertAlmostEqual(st["requestsPerGPU"], 8, delta=2)
            mu = wait_for(lambda: events(self.c, self.ns, "tei-idle", "MetricsUnavailable"), 25,
                          what="tei-idle: MetricsUnavailable")
            self.assertIn("te_embed_success not found", mu[0]["message"])
            time.sleep(7)  # past scale-in-after: held, not scaled in as idle
            self.assertEqual(self.replicas("tei-idle"), 3)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            for n in ("tei-a", "tei-idle"):
                self.c.delete("deployments", n, self.ns)

    def test_69_refused_requests_are_demand(self):
        """Requests a Triton pod refuses (its failures with reason REJECTED: a full queue, a
        queue timeout) arrived all the same: the demand is the completions plus them, so an
        overloaded Deployment is sized for what came in one step. Other failures (BACKEND:
        the model failed a request) are not demand."""
        tri = {"gpuscaler.io/metrics-profile": "triton"}
        self.make("tri", 2, subnet=80, annotations=tri)
        self.metrics.set_shape("tri", "triton")
        self.metrics.set_rate("tri", 16)      # 8 finished per GPU: within the band alone
        self.metrics.set_other_rate("tri", 14)  # and 14 refused, 28 BACKEND failures
        g = self.start(ident="inst-tri")
        try:
            # (16 + 14) / 8 per GPU at 80 % of 10: 4 replicas; counting the BACKEND failures
            # too it would be 9 (max 8), counting completions alone 3 (8 a GPU is the edge)
            wait_for(lambda: self.replicas("tri") != 2, 30, what="tri: a scale-out")
            self.assertEqual(self.replicas("tri"), 4, g.text()[-3000:])
            ev = wait_for(lambda: events(self.c, self.ns, "tri", "ScaledOut"), 10,
                          what="tri: ScaledOut")
            self.assertIn("-> 4 replicas", ev[0]["message"])
            demand = g.metric("gpuscaler_demand_requests_per_second",
                              '{namespace="%s",deployment="tri"}' % self.ns)
            self.assertAlmostEqual(demand, 30, delta=4)
            # the status says how much of it was refused
            st = wait_for(lambda: (lambda s: s if s and s.get("desired") == 4 else None)(
                self.status("tri")), 10, what="tri: the status of the scale-out")
            self.assertAlmostEqual(st["refusedRequestsPerSecond"], 14, delta=3, msg=st)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "tri", self.ns)

    def test_70_the_first_answer_waits_for_the_lag(self):
        """The first answer after a start is asked before Prometheus' lag is known: its
        2-minute rate, evaluated 45-55 s past the newest samples, reads 35-40 % low (rate()
        extrapolates over a scrape interval at most). That answer is dropped and the tick
        holds; the next is asked where the samples end, so the first decision sees the load
        as it is (it decided on 3.1 requests/GPU of 5 before)."""
        _, g = self.start_lagging("lagfirst", 4, 81, 45.0, scrape=10, reads_low=True)
        try:
            first = wait_for(lambda: re.findall(r"requests/GPU ([0-9.]+)", g.text()), 30,
                             what="lagfirst: a first decision")
            self.assertAlmostEqual(float(first[0]), 5.0, delta=0.2, msg=g.text()[-3000:])
            dropped = re.findall(r"Prometheus answer dropped: its rate was asked (\d+) s ahead",
                                 g.text())
            self.assertEqual(len(dropped), 1, dropped)
            self.assertTrue(45 <= int(dropped[0]) <= 55, dropped)
            time.sleep(3)
            self.assertAlmostEqual(self.status("lagfirst")["requestsPerGPU"], 5.0, delta=0.01)
            self.assertEqual(self.replicas("lagfirst"), 4)
        finally:
            g.stop()
            self.c.delete("deployments", "lagfirst", self.ns)

    def test_71_a_lag_that_grows_is_followed_at_once(self):
        """Prometheus' newest samples were 5 s behind (scrapes every 10 s, the 4 pods' a
        quarter of that apart), and fall 20 s and then 45 s behind: a remote write backs up. The rate queries, still asked where the
        samples ended, miss 15-50 s of their 2-minute window's end and read 8-40 % low (rate()
        extrapolates over 1.1 scrape intervals at most); they were asked there for up to 5
        minutes, the least lag of two 2.5-minute periods, and the 20 s step scaled in under
        the load. An answer whose rate was asked more than 1.1 scrape intervals past a pod's
        newest sample is dropped and asked again at once an interval past it, and the
        estimate follows at once (the most the oldest pod's lag less an interval has been over
        two intervals): no decision sees the load low, the replicas stay, and the sawtooth
        before the growth drops nothing."""
        lag = [5.0]
        prom, g = self.start_lagging("laggrow", 4, 82, lag, scrape=10, reads_low=True,
                                     phased=True)
        try:
            # 20 req/s on 4 GPUs once the lag is known (the first answer, asked at the
            # tick's time, may miss up to 15 s of its window's end and read a little low)
            wait_for(lambda: (self.status("laggrow") or {}).get("requestsPerGPU") == 5.0, 30,
                     what="laggrow: 5 requests/GPU")
            time.sleep(12)  # a whole scrape interval's sawtooth: the interval is known
            self.assertNotIn("the lag grew", g.text())
            for x in self.rate_behind(prom)[-3:]:
                self.assertAlmostEqual(x, 5.0, delta=1.5)
            for step, (new, after) in enumerate(((20.0, 25), (45.0, 35))):
                lag[0] = new
                seen, end = set(), time.time() + after
                while time.time() < end:  # every decision's reading, each for 1 s at least
                    seen.add((self.status("laggrow") or {}).get("requestsPerGPU"))
                    time.sleep(0.25)
                text = g.text()
                print("requests/GPU after the growth to %g s: %s" % (new, sorted(seen, key=str)))
                # an answer asked past 1.1 intervals of a pod's samples is asked again
                self.assertTrue(all(x is None or 4.99 <= x <= 5.01 for x in seen), seen)
                grew = re.findall(r"level=(\w+) .*asked (\d+) s past a pod's newest sample, "
                                  r"more than 1.1 scrape intervals \((\d+) s\): the lag grew "
                                  r"to (\d+) s; asked again (\d+) s back", text)
                print("drops: %s" % grew[-8:])
                self.assertTrue(grew and all(int(x[2]) == 10 for x in grew), grew)
                # the oldest pod's lag (up to 3/4 of an interval behind the freshest, and an
                # interval's sawtooth), asked again an interval less
                self.assertTrue(all(new - 20 <= int(x[3]) <= new + 20 and
                                    int(x[4]) >= int(x[3]) - 11 for x in grew[-1:]), grew)
                # each dropped answer is logged at debug (once at info when one is 15 s past
                # the sawtooth: a jump, not this ramp); a delay of 30 s and more is told
                self.assertLessEqual(len([x for x in grew if x[0] == "info"]), step + 1, grew)
                told = re.findall(r"Prometheus' newest samples are (\d+) s behind", text)
                self.assertEqual(len(told), step, told)
                # the estimate, the least lag of two scrape intervals, once the ramp is over
                # (1 s a second) and two intervals have passed
                wait_for(lambda: all(abs(x - new) < 1.5 for x in self.rate_behind(prom)[-3:]),
                         30, what="laggrow: the rate asked %g s back" % new)
                print("the rate asked this far behind the per-pod query: %s"
                      % [round(x, 1) for x in self.rate_behind(prom)[-12:]])
                self.assertEqual(self.replicas("laggrow"), 4)
        finally:
            g.stop()
            self.c.delete("deployments", "laggrow", self.ns)

    def test_31_scaler_conflict_names_the_other_scaler(self):
        """In mode scale, gpuscaler does not fight another scaler of the Deployment: a plain
        HorizontalPodAutoscaler is named in the ScalerConflict Event, and an HPA that KEDA made
        (its controller owner a ScaledObject) is named by its ScaledObject, with the fix that
        works (deleting KEDA's HPA does not: KEDA makes it again). The status says what was not
        done, and the replicas stay. In mode external-metric, while this gpuscaler does not serve
        the external metrics API, nothing can scale the Deployment: a Warning says so."""
        def hpa(name, target, meta=None):
            obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                   "metadata": dict({"name": name}, **(meta or {})),
                   "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                               "name": target},
                            "minReplicas": 1, "maxReplicas": 8,
                            "metrics": [{"type": "Resource", "resource": {
                                "name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 80}}}]}}
            self.c.create("horizontalpodautoscalers", obj, self.ns)
            self.addCleanup(lambda: self.c.delete("horizontalpodautoscalers", name, self.ns))
        self.make("conf-hpa", 2, subnet=41)
        self.make("conf-keda", 2, subnet=42)
        self.make("conf-extm", 2, subnet=43,
                  annotations={"gpuscaler.io/mode": "external-metric"})
        hpa("conf-hpa-cpu", "conf-hpa")
        # KEDA's HPA has both; each is enough. A real cluster's garbage collector would delete
        # an HPA whose owner does not exist, so there the labels alone say it
        hpa("keda-hpa-chat-so", "conf-keda", {
            "labels": {"app.kubernetes.io/managed-by": "keda-operator",
                       "app.kubernetes.io/part-of": "chat-so"}} if REAL else {
            "ownerReferences": [{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                                 "name": "chat-so", "controller": True,
                                 "blockOwnerDeletion": True,
                                 "uid": "6f1c2b9e-0d5a-4e43-9a61-2b7f0c1d9e11"}]})
        for n in ("conf-hpa", "conf-keda", "conf-extm"):
            self.metrics.set_rate(n, 38)  # 19 req/s per GPU: the policy wants 5
        g = self.start(ident="inst-conflict")
        try:
            ev = wait_for(lambda: events(self.c, self.ns, "conf-hpa", "ScalerConflict"), 30,
                          what="conf-hpa: ScalerConflict")
            self.assertEqual(ev[0]["type"], "Warning")
            self.assertIn("the HorizontalPodAutoscaler conf-hpa-cpu also targets this "
                          "Deployment", ev[0]["message"])
            self.assertIn("remove it or set gpuscaler.io/mode: external-metric", ev[0]["message"])
            ev = wait_for(lambda: events(self.c, self.ns, "conf-keda", "ScalerConflict"), 30,
                          what="conf-keda: ScalerConflict")
            self.assertIn("the KEDA ScaledObject chat-so (through its HorizontalPodAutoscaler "
                          "keda-hpa-chat-so) also targets this Deployment", ev[0]["message"])
            self.assertIn("delete the ScaledObject", ev[0]["message"])
            st = self.status("conf-keda")
            self.assertTrue(st["message"].startswith("not acting: the KEDA ScaledObject chat-so"),
                            st)
            self.assertEqual(st["desired"], 2)
            ev = wait_for(lambda: events(self.c, self.ns, "conf-extm",
                                         "ExternalMetricsNotServed"), 30,
                          what="conf-extm: ExternalMetricsNotServed")
            self.assertEqual(ev[0]["type"], "Warning")
            self.assertIn("does not serve external.metrics.k8s.io", ev[0]["message"])
            self.assertFalse(events(self.c, self.ns, "conf-hpa", "ExternalMetricsNotServed"))
            for n in ("conf-hpa", "conf-keda", "conf-extm"):
                self.assertEqual(self.replicas(n), 2)
        finally:
            g.stop()
            for n in ("conf-hpa", "conf-keda", "conf-extm"):
                self.c.delete("deployments", n, self.ns)

    def test_32_paused_holds_and_resumes(self):
        """gpuscaler.io/paused: "true" freezes the count: the policy still decides and the status
        says what it wanted, a Paused Event too, but the replicas stay; removing it resumes, and
        the next decisions act on the load then."""
        self.make("frozen", 2, subnet=44, annotations={"gpuscaler.io/paused": "true"})
        self.metrics.set_rate("frozen", 38)  # 19 req/s per GPU: the policy wants 5
        g = self.start(ident="inst-paused")
        try:
            ev = wait_for(lambda: events(self.c, self.ns, "frozen", "Paused"), 30,
                          what="frozen: Paused")
            self.assertEqual(ev[0]["type"], "Normal")
            self.assertIn("not acting: paused by gpuscaler.io/paused (policy wanted 5 replicas)",
                          ev[0]["message"])
            st = self.status("frozen")
            self.assertTrue(st["message"].startswith("not acting: paused"), st)
            self.assertEqual(st["desired"], 2)
            self.assertEqual(self.replicas("frozen"), 2)
            self.c.patch("deployments", "frozen",
                         {"metadata": {"annotations": {"gpuscaler.io/paused": None}}}, self.ns)
            wait_for(lambda: self.replicas("frozen") == 5, 30, what="resumed: scale-out to 5")
        finally:
            g.stop()
            self.c.delete("deployments", "frozen", self.ns)

    @unittest.skipIf(REAL, "the slow Lease write is a fault rule of the fake API server")
    def test_34_one_slow_lease_write_costs_only_its_shard(self):
        """Sharded: one shard Lease's renewal hangs 20 s. Every Lease request ends within
        renew-deadline, and a write in flight holds back only its own Lease, so the other
        shards keep being renewed and stay held throughout; the slow one lapses and is taken
        again. (A round used to wait for every request of the last one: the 20 s write lost
        every shard.)"""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-duration: 4s, renew-deadline: 3s,
                  retry-period: 500ms}
sharding: {enabled: true, shards: 4, lease-prefix: e2e-slow}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
""" % self.ns
        g = self.start(cfg, ident="inst-slowshard")
        try:
            wait_for(lambda: g.metric("gpuscaler_shards_held") == 4, 20, what="4 shards held")
            self.fk.fault({"action": "latency", "ms": 20000, "verb": "update",
                           "resource": "leases", "name": "e2e-slow-1", "count": 1})
            self.addCleanup(self.fk.clear_faults)
            held = []
            t0 = time.time()
            while time.time() - t0 < 9:
                held.append(g.metric("gpuscaler_shards_held"))
                time.sleep(0.25)
            log = g.text()
            lost = re.findall(r"shard lost: shard=(\d+)", log)
            print("held while one write hung: min %s; lost: %s" % (min(held), lost))
            self.assertGreaterEqual(min(held), 3, held)
            self.assertEqual(set(lost), {"1"}, lost)
            wait_for(lambda: g.metric("gpuscaler_shards_held") == 4, 10,
                     what="the slow shard held again")
            self.assertTrue(g.alive())
        finally:
            g.stop()

    @unittest.skipIf(REAL, "the outage is a fault rule of the fake API server")
    def test_35_lease_requests_end_at_the_renew_deadline(self):
        """Every Lease request hangs 20 s for 4 s: leadership lapses at renew-deadline, and
        once the API server answers again it is taken back within a few retry periods, not
        when the hung read times out (the client's 30 s, or the server's 20 s)."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-hung,
                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
""" % self.ns
        g = self.start(cfg, ident="inst-hung")
        try:
            wait_for(lambda: "became leader" in g.text(), 15, what="leadership")
            self.fk.fault({"action": "latency", "ms": 20000, "resource": "leases",
                           "count": None})
            self.addCleanup(self.fk.clear_faults)
            wait_for(lambda: "stopped leading" in g.text(), 10, what="stopped leading")
            time.sleep(1)
            self.fk.clear_faults()
            t0 = time.time()
            wait_for(lambda: g.text().count("became leader") == 2, 20, what="leading again")
            took = time.time() - t0
            print("leading again %.1fs after the API server answered again" % took)
            # a read sent just before the fault cleared hangs to its renew deadline (3 s)
            self.assertLess(took, 3 + 3 * 0.5 + 1.5)
            self.assertEqual(g.metric("gpuscaler_leader"), 1)
        finally:
            g.stop()

    @unittest.skipIf(REAL, "the failing watch is a fault rule of the fake API server")
    def test_36_failing_pod_watch_holds(self):
        """The pod list+watch fails for longer than 30 s: the pods seen may be out of date
        (started or gone since), so the rate and the ready count may be part of the truth.
        Every Deployment holds, as on missing metrics: a load that would scale in does not,
        the status says why, and the metric gpuscaler_kube_cache_down_seconds counts the
        outage. When the watch works again, decisions resume and the scale-in comes."""
        self.make("blind", 3, subnet=46)
        self.metrics.set_rate("blind", 20)  # 6.7 req/s per GPU: 3 replicas stay
        g = self.start(ident="inst-blind")
        try:
            self.measured_status("blind", timeout=30)
            self.fk.fault({"action": "error", "status": 500, "resource": "pods",
                           "verb": ["list", "watch"], "count": None},
                          {"action": "drop-watches"})
            self.addCleanup(self.fk.clear_faults)
            t0 = time.time()
            ev = wait_for(lambda: [e for e in events(self.c, self.ns, "blind",
                                                     "MetricsUnavailable")
                                   if "pods seen may be out of date" in e["message"]],
                          45, what="blind: held on the failing watch")
            took = time.time() - t0
            print("held %.1fs after the watch failed: %s" % (took, ev[0]["message"]))
            self.assertGreaterEqual(took, 25)
            self.assertIn("holding 3 replicas: the watch of /api/v1/pods has failed for more "
                          "than 30s", ev[0]["message"])
            st = self.status("blind")
            self.assertEqual(st["reason"], "MetricsUnavailable")
            self.assertIn("never scaling in without data): the watch of /api/v1/pods has failed",
                          st["message"])
            self.assertGreaterEqual(g.metric("gpuscaler_kube_cache_down_seconds"), 30)
            self.assertIn("the Deployments it covers hold their replicas", g.text())
            self.metrics.set_rate("blind", 2)  # would need 1 replica
            time.sleep(12)  # two scale-in-after periods
            self.assertEqual(self.replicas("blind"), 3)
            self.fk.clear_faults()
            wait_for(lambda: self.replicas("blind") < 3, 40, what="blind: scale-in once current")
            self.assertEqual(g.metric("gpuscaler_kube_cache_down_seconds"), 0)
            self.assertIn("the Kubernetes caches are current again", g.text())
        finally:
            g.stop()
            self.c.delete("deployments", "blind", self.ns)

    def test_65_an_answer_to_changed_queries_is_dropped(self):
        """The promql-rate annotation changes while Prometheus is still answering the old
        query: that answer measured another metric, so it is dropped, not decided on at the
        next tick (it was, once: 9 req/s per GPU read off a query no longer configured).
        The Deployment holds until the new query answers, and its status says why."""
        slow = {"armed": False, "asked": threading.Event()}

        def answer(q):
            if "old_requests_total" in q:
                if slow["armed"]:
                    slow["armed"] = False
                    slow["asked"].set()
                    time.sleep(4)  # answered after the annotation changed
                    return 36
                return 20
            if "new_requests_total" in q:
                return 28
            return 0.5 if "histogram_quantile" in q else 0
        prom = FakePrometheus(lambda t: 20.0, answer)
        self.addCleanup(prom.close)
        ann = {"gpuscaler.io/metrics-source": "prometheus",
               "gpuscaler.io/min-replicas": "4", "gpuscaler.io/max-replicas": "4",
               "gpuscaler.io/promql-rate": 'sum(rate(old_requests_total{app="{{deployment}}"}[1m]))'}
        self.make("requery", 4, subnet=76, annotations=ann)
        g = self.start(config=CONFIG + 'prometheus: {url: "%s"}\n' % prom.url,
                       ident="inst-requery")
        try:
            st = self.measured_status("requery", timeout=30)
            self.assertAlmostEqual(st["requestsPerGPU"], 5.0, delta=0.01)  # 20 req/s, 4 GPUs
            slow["armed"] = True
            self.assertTrue(slow["asked"].wait(10), "the old query was not asked again")
            self.c.patch("deployments", "requery", {"metadata": {"annotations": {
                "gpuscaler.io/promql-rate":
                    'sum(rate(new_requests_total{app="{{deployment}}"}[1m]))'}}}, self.ns)
            seen, reasons = [], set()
            t_end = time.time() + 12  # the slow answer comes 4 s after it was asked
            while time.time() < t_end:
                s = self.status("requery") or {}
                if s.get("requestsPerGPU") is not None:
                    seen.append(round(s["requestsPerGPU"], 2))
                reasons.add(s.get("message", ""))
                time.sleep(0.1)
            print("requests per GPU seen after the change: %s" % sorted(set(seen)))
            self.assertNotIn(9.0, seen, "decided on the answer to the old query")
            self.assertEqual(seen[-1], 7.0)  # 28 req/s, 4 GPUs
            self.assertTrue(any("answer to the changed queries" in m for m in reasons), reasons)
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "requery", self.ns)

    def test_37_prometheus_answers_are_a_tick_old_not_stale(self):
        """An answer from Prometheus serves the tick after the one that asked, so it is one
        decision interval old by design: with a decision-interval of 3 s and
        metrics-stale-after of 3 s, the Deployment decides on it (its metrics-stale-after
        counts a decision interval more for this source) instead of holding on metrics it
        calls stale at every tick."""
        prom = self.prometheus()
        cfg = ("decision-interval: 3s\nleader-election: {enabled: false}\n"
               "scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}\n"
               "prometheus: {url: \"%s\"}\n") % prom.url
        ann = dict(PROM_ANNOTATIONS)
        ann["gpuscaler.io/metrics-stale-after"] = "3s"
        self.make("tickold", 4, subnet=47, annotations=ann)
        g = self.start(config=cfg, ident="inst-tickold")
        try:
            st = wait_for(lambda: (lambda s: s if s and s.get("requestsPerGPU") else None)(
                self.status("tickold")), 30, what="tickold: a decision on Prometheus' rate")
            self.assertAlmostEqual(st["requestsPerGPU"], 10.0, delta=0.01)  # 40 req/s, 4 GPUs
            time.sleep(10)  # three more ticks: none of them stale
            stale = [ln for ln in g.text().splitlines()
                     if "deployment=tickold " in ln and "metrics stale" in ln]
            self.assertEqual(stale, [])
            self.assertNotEqual(self.status("tickold")["reason"], "MetricsUnavailable")
        finally:
            g.stop()
            self.c.delete("deployments", "tickold", self.ns)

    @unittest.skipIf(REAL, "the slow scale write is a fault rule of the fake API server")
    def test_38_a_hand_change_during_the_scale_write_wins(self):
        """An operator parks the Deployment at 0 (kubectl scale --replicas=0) while gpuscaler's
        scale-out is on its way: the /scale patch fails its resourceVersion precondition, and
        the read after the 409 finds a count the decision did not see, so nothing is written
        (it used to patch its target over the operator's 0) and the next tick decides on 0:
        Parked."""
        self.make("handy", 2, subnet=48)
        self.metrics.set_rate("handy", 40)  # 20 req/s per GPU: the policy wants 5
        # gpuscaler's /scale patch waits 4 s in the API server; the operator's change below
        # goes to the Deployment itself, so that the rule cannot delay it instead
        self.fk.fault({"action": "latency", "ms": 4000, "verb": "patch",
                       "resource": "deployments", "subresource": "scale", "name": "handy",
                       "count": 1})
        self.addCleanup(self.fk.clear_faults)
        g = self.start(ident="inst-handy")
        try:
            wait_for(lambda: [ln for ln in g.text().splitlines()
                              if "deployment=handy " in ln and "ScaledOut" in ln], 30,
                     what="handy: the scale-out decided")
            self.c.patch("deployments", "handy", {"spec": {"replicas": 0}}, self.ns)
            wait_for(lambda: re.search(r"replicas changed to 0 since the decision to scale "
                                       r"2 -> [3-9]", g.text()), 15,
                     what="handy: the write given up")
            time.sleep(4)  # a few ticks on the operator's 0
            self.assertEqual(self.replicas("handy"), 0)
            self.assertEqual(self.status("handy")["reason"], "Parked")
        finally:
            g.stop()
            self.c.delete("deployments", "handy", self.ns)

    def test_39_prometheus_seeds_four_at_a_time(self):
        """Six Deployments on the Prometheus source start at once: their forecaster seeds
        (a week of query_range each) go at most four at a time, so a start or a takeover does
        not flood Prometheus beside the instant queries, and every one is seeded."""
        import threading
        lock = threading.Lock()
        now, peak = [0], [0]

        def slow_ranges(path, params):
            if path == "/api/v1/query_range":
                with lock:
                    now[0] += 1
                    peak[0] = max(peak[0], now[0])
                time.sleep(0.3)
                with lock:
                    now[0] -= 1
            return None
        prom = FakePrometheus(self.daily, lambda q: 0.5 if "histogram_quantile" in q else 40,
                              reply=slow_ranges)
        self.addCleanup(prom.close)
        cfg = CONFIG + "prometheus: {url: \"%s\"}\n" % prom.url
        names = ["seedq%d" % i for i in range(6)]
        for i, n in enumerate(names):
            self.make(n, 2, subnet=49 + i, annotations=PROM_ANNOTATIONS)
        g = self.start(config=cfg, ident="inst-seedq")
        try:
            for n in names:
                wait_for(lambda: "deployment=%s msg=\"forecaster seeded from Prometheus" % n
                         in g.text(), 60, what="%s seeded" % n)
            print("range requests in flight at most: %d" % peak[0])
            self.assertLessEqual(peak[0], 4)
            self.assertGreaterEqual(peak[0], 2)
        finally:
            g.stop()
            for n in names:
                self.c.delete("deployments", n, self.ns)

    def pods_prometheus(self, answer, timed=False):
        """A fake Prometheus whose instant answers come from answer(kind), kind one of
        "pods" (the per-pod query: a list of (labels, value)), "p99", "busy" and "rate";
        timed: answer(kind, t), t the evaluation time."""
        def instant(q, t=None):
            kind = ("pods" if "gpuscaler_part" in q else "p99" if "histogram_quantile" in q
                    else "busy" if "inference_time" in q else "rate")
            return answer(kind, t) if timed else answer(kind)
        prom = FakePrometheus(self.daily, instant, timed=timed)
        self.addCleanup(prom.close)
        return prom

    def lagging_prometheus(self, k, lag, scrape=0, running=None, reads_low=False,
                           phased=False):
        """A fake Prometheus whose samples of k[0]'s pods arrive lag seconds late (lag[0]
        when a list, which the test may change: raised, the newest sample stays until the
        samples are that late; on a grid of scrape seconds when given, the i-th pod's
        shifted by i/4 of it when phased, as Prometheus spreads its targets' scrapes):
        each counted, 5 req/s, running `running` when given; a rate of 20 req/s and a p99
        of 0.5 s. reads_low: the 2-minute rate evaluated past the newest samples reads low,
        as rate() does: it extrapolates each series over at most 1.1 scrape intervals at the
        window's end, else half of one (the series furthest past its samples decides).
        With scrape, each pod's samples in the 2-minute window and the newest before it are
        answered too, as a real Prometheus does."""
        newest = {}

        def sample_times(names, ahead=0.0):
            """Each pod's newest visible sample time; ahead: as it will be that much later
            (not kept)."""
            out = {}
            for i, p in enumerate(names):
                off = scrape * (i % 4) / 4.0 if phased and scrape else 0.0
                at = time.time() + ahead - (lag[0] if isinstance(lag, list) else lag) - off
                if scrape:
                    at = int(at / scrape) * float(scrape)
                # a sample once visible stays so: a lag that grows freezes the newest
                # sample and ramps, one second a second, as a remote write backing up does
                out[p] = max(at + off, newest.get(p, 0.0))
                if not ahead:
                    newest[p] = out[p]
            return out

        def window_parts(names, ats):
            """Each pod's samples in the 2-minute window and the newest sample before it,
            on the scrape grid, as Prometheus has them (the per-pod query is asked now)."""
            out = []
            for i, p in enumerate(names):
                off = scrape * (i % 4) / 4.0 if phased and scrape else 0.0
                before = int((time.time() - 120.0 - off) / scrape) * float(scrape) + off \
                    if scrape else 0.0
                if scrape and ats[p] > before:
                    out += [({"gpuscaler_part": "samples", "pod": p},
                             round((ats[p] - before) / scrape)),
                            ({"gpuscaler_part": "before", "pod": p}, before)]
            return out

        def answer(kind, t=None):
            names = [n for n, _ in k[0].pods]
            # a tick's queries are served one after the other: the rate sees the samples
            # the per-pod query served just after it may see (a real Prometheus can serve a
            # sample to one and not the other; this test is of the estimate, not that race)
            ats = sample_times(names, 0.5 if kind == "rate" else 0.0)
            if kind == "pods":
                return ([({"gpuscaler_part": "counted", "pod": p}, 1) for p in names] +
                        ([({"gpuscaler_part": "running", "pod": p}, running) for p in names]
                         if running is not None else []) +
                        [({"gpuscaler_part": "requests", "pod": p}, 5.0 * ats[p])
                         for p in names] +
                        [({"gpuscaler_part": part, "pod": p}, ats[p]) for p in names
                         for part in ("at", "at_min")] + window_parts(names, ats))
            if kind == "p99":
                return 0.5
            if kind == "busy":
                return []
            oldest = min(ats.values()) if ats else time.time()
            gap = (t - oldest) if reads_low and t is not None else 0.0
            if gap <= 1.1 * max(scrape, 1):
                return 20.0
            return 20.0 * min(1.0, (120.0 - gap + max(scrape, 1) / 2.0) / 120.0)
        return self.pods_prometheus(answer, timed=True)

    @staticmethod
    def rate_behind(prom):
        """How far each tick's rate query was asked behind its per-pod query, on a fake
        Prometheus: a tick's queries arrive together (in any order: each has its own
        connection), a decision interval after the tick before; those of an answer dropped
        and asked again at once come just after them and are left out."""
        with prom.lock:
            reqs = [(at, p) for (path, p), at in zip(prom.requests, prom.arrived)
                    if path == "/api/v1/query"]
        ticks, last = [], None
        for at, p in reqs:
            if last is None or at - last > 0.3:
                ticks.append({})
            last = at
            q = p.get("query", "")
            kind = ("pods" if "gpuscaler_part" in q else "other"
                    if "histogram_quantile" in q or "inference_time" in q else "rate")
            ticks[-1].setdefault(kind, p["time"])
        return [tk["pods"] - tk["rate"] for tk in ticks if "pods" in tk and "rate" in tk]

    def start_on(self, prom, k, name, replicas, subnet, reactive=True, annotations=None):
        """A Deployment `name` of `replicas` pods on the Prometheus source at prom (the
        fake's answers read its pods from k[0], set here), with PROM_ANNOTATIONS and
        `annotations`, predictive off when reactive; once its pods are up, gpuscaler started
        on it: g."""
        ann = dict(PROM_ANNOTATIONS, **(annotations or {}))
        if reactive:
            ann["gpuscaler.io/predictive"] = "false"
        k[0] = self.make(name, replicas, subnet=subnet, annotations=ann)
        wait_for(lambda: len(k[0].pods) == replicas, 10, what="%s: %d pods" % (name, replicas))
        return self.start(config=CONFIG + 'prometheus: {url: "%s"}\n' % prom.url,
                          ident="inst-" + name)

    def start_lagging(self, name, replicas, subnet, lag, reactive=True, **prom_kw):
        """A Deployment of `replicas` pods read from lagging_prometheus(lag, **prom_kw), with
        a 60 s metrics-stale-after (and predictive off when reactive), and gpuscaler started
        on it: (prom, g)."""
        k = [None]
        prom = self.lagging_prometheus(k, lag, **prom_kw)
        return prom, self.start_on(prom, k, name, replicas, subnet, reactive,
                                   {"gpuscaler.io/metrics-stale-after": "60s"})

    def test_66_a_lagging_prometheus_is_asked_where_its_samples_end(self):
        """Prometheus' newest samples lie 45 s behind (a remote write, an ingestion
        pipeline), plus up to a 10 s scrape interval: a 2-minute rate evaluated now has no
        samples in its last 45-55 s and reads 30-60 % low. The per-pod query, asked now,
        shows how far behind they are, and the rate, p99 and busy queries are then
        evaluated the least of that back, the delay without the scrapes' sawtooth (they
        were evaluated now). The answers are 45 s old, within a 60 s metrics-stale-after:
        decisions go on. A promql-rate of the user's own is asked at the tick's time again
        (no sample times measure its delay)."""
        lag = 45.0
        prom, g = self.start_lagging("laggy", 4, 77, lag, scrape=10, running=2)

        def behind():
            return self.rate_behind(prom)
        try:
            st = self.measured_status("laggy", 30)
            self.assertAlmostEqual(st["requestsPerGPU"], 5.0, delta=0.01)  # 20 req/s, 4 GPUs
            time.sleep(12)  # a whole scrape interval's sawtooth seen
            got = behind()
            print("the rate asked this far behind the per-pod query: %s"
                  % [round(x, 1) for x in got[-12:]])
            self.assertGreaterEqual(len(got), 10)
            self.assertAlmostEqual(got[0], 0.0, delta=0.5)  # nothing measured yet
            for x in got[-3:]:
                self.assertAlmostEqual(x, lag, delta=1.5)
            # logged once at its first estimate: 45 s and up to a 10 s scrape's sawtooth
            told = re.findall(r"Prometheus' newest samples are (\d+) s behind", g.text())
            self.assertEqual(len(told), 1, told)
            self.assertTrue(45 <= int(told[0]) <= 55, told)
            self.assertAlmostEqual(g.metric("gpuscaler_prometheus_lag_seconds",
                                            '{namespace="%s",deployment="laggy"}' % self.ns),
                                   lag, delta=1.5)
            st = self.status("laggy")
            self.assertNotEqual(st.get("reason"), "MetricsUnavailable", st)
            self.assertAlmostEqual(st["requestsPerGPU"], 5.0, delta=0.01)
            # a rate query of the user's own: no sample times, asked at the tick's time
            n = len(got)
            self.c.patch("deployments", "laggy", {"metadata": {"annotations": {
                "gpuscaler.io/promql-rate": 'sum(rate(laggy_requests_total[2m]))'}}}, self.ns)
            wait_for(lambda: len(behind()) >= n + 4, 20, what="laggy: ticks on its own query")
            self.assertLess(abs(behind()[-1]), 0.5)
            self.assertTrue(math.isnan(g.metric("gpuscaler_prometheus_lag_seconds",
                                                '{namespace="%s",deployment="laggy"}'
                                                % self.ns)))
        finally:
            g.stop()
            self.c.delete("deployments", "laggy", self.ns)

    def test_68_a_seed_ends_where_a_lagging_prometheus_does(self):
        """The forecaster's seed, behind a Prometheus whose samples arrive 45 s late, asks
        for the history up to where they end, as the rate queries do: it waits for the first
        per-pod answer, which tells the delay (its range ended at the tick's time, and its
        last minute read low)."""
        lag = 45.0
        prom, g = self.start_lagging("lagseed", 2, 79, lag, reactive=False)
        try:
            wait_for(lambda: "forecaster seeded from Prometheus" in g.text(), 30,
                     what="lagseed: the seed")
            with prom.lock:
                ticks = [p["time"] for path, p in prom.requests
                         if path == "/api/v1/query" and "gpuscaler_part" in p.get("query", "")]
            ends = [e for _, e, _ in prom.ranges()]
            # the newest range ends 45 s before the tick that asked for it
            off = min(abs((t - lag) - ends[-1]) for t in ticks)
            print("the seed ends %.1f s from a tick's time less the delay" % off)
            self.assertLess(off, 1.0)
            self.assertTrue(all(abs(t - ends[-1]) > lag - 2 for t in ticks), (ticks, ends[-1]))
        finally:
            g.stop()
            self.c.delete("deployments", "lagseed", self.ns)

    def test_40_prometheus_new_pods_are_warming_not_idle(self):
        """Right after a scale-out Prometheus' rate counts only the pods it has scraped
        twice: 4 pods Ready, 8 req/s each, the rate says 16. The 2 it does not count yet are
        replicas still warming, so requests per GPU read 8 (16 / 2), not 4 (16 / 4), and the
        Deployment is not scaled in under the very load it was scaled out for (it used to be,
        after scale-in-after). Once Prometheus counts all 4 at 4 req/s each, the same 16
        req/s are idle capacity and it scales in."""
        state = {"counted": 2, "per_pod": 8.0}
        k = [None]

        def answer(kind):
            names = [n for n, _ in k[0].pods]
            n = min(state["counted"], len(names))
            if kind == "pods":
                return ([({"gpuscaler_part": "counted", "pod": p}, 1) for p in names[:n]] +
                        [({"gpuscaler_part": "running", "pod": p}, 1) for p in names])
            if kind == "p99":
                return 0.5
            if kind == "busy":
                return []
            return state["per_pod"] * n
        g = self.start_on(self.pods_prometheus(answer), k, "pqwarm", 4, 55)
        try:
            st = wait_for(lambda: (lambda s: s if s and s.get("requestsPerGPU") else None)(
                self.status("pqwarm")), 30, what="pqwarm: a decision on Prometheus' rate")
            self.assertAlmostEqual(st["requestsPerGPU"], 8.0, delta=0.01)
            time.sleep(10)  # past scale-in-after (6 s)
            self.assertEqual(self.replicas("pqwarm"), 4)
            self.assertNotIn("ScaledIn", "".join(ln for ln in g.text().splitlines()
                                                 if "deployment=pqwarm " in ln))
            state.update(counted=4, per_pod=4.0)
            wait_for(lambda: self.replicas("pqwarm") < 4, 25, what="pqwarm: the scale-in")
        finally:
            g.stop()
            self.c.delete("deployments", "pqwarm", self.ns)

    def test_72_a_pod_scraped_twice_is_told(self):
        """Prometheus has one pod's request counter from two scrape targets at one address
        (a PodMonitor beside a ServiceMonitor): a plain sum over it reads twice what it
        serves (the default queries count the address once where `instance` is the
        address). The per-pod query's `dup`
        part says so, and a DuplicateScrape Warning on the Deployment and a log line count
        the pods and name it; once the duplicate is gone, a log line says so. The decisions
        go on."""
        state = {"dup": True}
        k = [None]

        def answer(kind):
            names = sorted(n for n, _ in k[0].pods)
            if kind == "pods":
                return ([({"gpuscaler_part": "counted", "pod": p}, 1) for p in names] +
                        [({"gpuscaler_part": "running", "pod": p}, 1) for p in names] +
                        ([({"gpuscaler_part": "dup", "pod": names[1]}, 1)]
                         if state["dup"] else []))
            if kind == "p99":
                return 0.5
            if kind == "busy":
                return []
            return 8.0
        g = self.start_on(self.pods_prometheus(answer), k, "pqdup", 2, 83)
        try:
            pod = sorted(n for n, _ in k[0].pods)[1]
            ev = wait_for(lambda: events(self.c, self.ns, "pqdup", "DuplicateScrape"), 20,
                          what="pqdup: a DuplicateScrape Warning")
            msg = ev[0]["message"]
            print(msg)
            self.assertEqual(ev[0]["type"], "Warning")
            self.assertIn("1 of 2 pods' request counter is scraped by more than one target", msg)
            self.assertIn("default queries count such an address once", msg)
            self.assertIn("(pod %s)" % pod, msg)
            lines = [ln for ln in g.text().splitlines()
                     if "deployment=pqdup " in ln and "scraped by more than one target" in ln]
            self.assertEqual(len(lines), 1, lines)
            self.assertIn("level=warn", lines[0])
            self.assertIsNotNone((self.status("pqdup") or {}).get("requestsPerGPU"))
            state["dup"] = False
            wait_for(lambda: "no pod's request counter is scraped by more than one target now"
                     in g.text(), 10, what="pqdup: the duplicate gone")
            self.assertEqual(len(events(self.c, self.ns, "pqdup", "DuplicateScrape")), 1)
        finally:
            g.stop()
            self.c.delete("deployments", "pqdup", self.ns)

    def test_41_prometheus_queue_counts_as_demand(self):
        """A saturated Deployment on the Prometheus source: its 2 pods complete 8 req/s each
        (80 % of capacity, not above it), while each one's waiting requests grow by 5 a
        second. Arrivals are the completions plus the backlog's growth (26 req/s), so it
        scales out to at least 4; on completions alone it held at 2 while the queue grew."""
        t0 = time.time()
        k = [None]

        def answer(kind):
            names = [n for n, _ in k[0].pods]
            if kind == "pods":
                w = 5.0 * (time.time() - t0)
                return ([({"gpuscaler_part": "counted", "pod": p}, 1) for p in names] +
                        [({"gpuscaler_part": "running", "pod": p}, 8) for p in names[:2]] +
                        [({"gpuscaler_part": "waiting", "pod": p}, w) for p in names[:2]])
            if kind == "p99":
                return 0.5
            if kind == "busy":
                return []
            return 16.0
        g = self.start_on(self.pods_prometheus(answer), k, "pqqueue", 2, 56)
        try:
            wait_for(lambda: self.replicas("pqqueue") >= 4, 30, what="pqqueue: the scale-out")
            line = [ln for ln in g.text().splitlines()
                    if "deployment=pqqueue " in ln and "ScaledOut" in ln]
            self.assertTrue(line, "no ScaledOut line")
            print(line[0])
        finally:
            g.stop()
            self.c.delete("deployments", "pqqueue", self.ns)

    def test_43_prometheus_step_seen_at_the_newest_scrapes(self):
        """A saturating step on the Prometheus source: 2 pods complete 8 req/s each (80 % of
        capacity) from the start; 20 s on, at a scrape, each one's queue starts to grow by 20
        requests a second. Prometheus "scrapes" every 5 s (each pod's counter and gauges carry
        that sample's time). The two newest samples of each pod show the arrivals, 56 req/s, one scrape
        after the step, so the first scale-out asks for 7 replicas (56 / 8). On the 2-minute
        window alone the queue's growth is averaged over all the history there is, and the
        first write asked for 3."""
        t0 = time.time()
        step = [None]
        k = [None]

        def answer(kind):
            names = [n for n, _ in k[0].pods][:2]
            at = int(time.time() / 5) * 5.0
            if kind == "pods":
                w = 20.0 * (at - step[0]) if step[0] and at > step[0] else 0.0
                return ([({"gpuscaler_part": "counted", "pod": p}, 1) for p in names] +
                        [({"gpuscaler_part": "running", "pod": p}, 8) for p in names] +
                        [({"gpuscaler_part": "waiting", "pod": p}, w) for p in names] +
                        [({"gpuscaler_part": "requests", "pod": p}, 8.0 * (at - t0 + 100))
                         for p in names] +
                        [({"gpuscaler_part": part, "pod": p}, at) for p in names
                         for part in ("at", "at_min")])
            if kind == "p99":
                return 0.5
            if kind == "busy":
                return []
            return 16.0
        g = self.start_on(self.pods_prometheus(answer), k, "pqstep", 2, 58)
        try:
            self.measured_status("pqstep", 30)
            time.sleep(20)
            self.assertEqual(self.replicas("pqstep"), 2)
            step[0] = (int(time.time() / 5) + 1) * 5.0  # at a scrape: the first after it
            wait_for(lambda: self.replicas("pqstep") > 2, 30, what="pqstep: the scale-out")
            line = [ln for ln in g.text().splitlines()
                    if "deployment=pqstep " in ln and "ScaledOut" in ln][0]
            print(line)
            got = int(re.search(r"2 -> (\d+) replicas", line).group(1))
            self.assertGreaterEqual(got, 6, line)
        finally:
            g.stop()
            self.c.delete("deployments", "pqstep", self.ns)

    @unittest.skipIf(REAL, "the slow status write is a fault rule of the fake API server")
    def test_42_a_status_write_does_not_land_on_a_new_deployment(self):
        """A status annotation PATCH is on its way when the Deployment is deleted and made
        again under its name (not opted in now). The patch carries the old Deployment's uid,
        which the API server refuses on the new one (422, metadata.uid is immutable), so the
        new Deployment gets no gpuscaler.io/status of its predecessor's; the refusal is logged
        as what it is. It used to be written there."""
        self.make("recr", 2, subnet=57)
        self.metrics.set_rate("recr", 10)
        g = self.start(ident="inst-recr")
        try:
            self.measured_status("recr", 30)
            # the next status write waits 5 s in the API server
            self.fk.fault({"action": "latency", "ms": 5000, "verb": "patch",
                           "resource": "deployments", "subresource": "", "name": "recr",
                           "count": 1})
            self.addCleanup(self.fk.clear_faults)
            self.metrics.set_rate("recr", 14)  # new numbers: written at once
            # a rule is gone once its count is used up: the write is held from then
            wait_for(lambda: not [f for f in self.fk.faults() if f.get("name") == "recr"], 20,
                     what="recr: the status write held")
            self.c.delete("deployments", "recr", self.ns)
            wait_for(lambda: "recr" not in {d["metadata"]["name"] for d in self.c.list(
                "deployments", self.ns)["items"]}, 20, what="recr gone")
            self.c.create("deployments", deployment("recr", 1, {}, self.metrics.port), self.ns)
            wait_for(lambda: "deployment=recr " in g.text() and
                     "status annotation not written: the Deployment was deleted and made again"
                     in g.text(), 20, what="recr: the refused write logged")
            ann = self.c.get("deployments", "recr", self.ns)["metadata"].get("annotations") or {}
            self.assertNotIn("gpuscaler.io/status", ann)
        finally:
            g.stop()
            self.c.delete("deployments", "recr", self.ns)

    def test_44_an_invalid_spell_keeps_the_forecaster(self):
        """An annotation made invalid and fixed a little later, with the forecast's settings
        as they were, keeps the forecaster and its history: it is not seeded from
        Prometheus again; nor is it after capacity-per-gpu changes (10 -> 12, which sets the
        forecaster's rate floor: it keeps the one it was made with). Both used to start it
        afresh (and a checkpoint then made that for good where no Prometheus has the
        history)."""
        prom = self.prometheus()
        cfg = CONFIG + 'prometheus: {url: "%s"}\n' % prom.url
        self.make("spell", 2, subnet=59, annotations=PROM_ANNOTATIONS)
        g = self.start(config=cfg, ident="inst-spell")
        try:
            wait_for(lambda: "forecaster seeded from Prometheus" in g.text(), 30,
                     what="the first seed")
            self.c.patch("deployments", "spell", {"metadata": {"annotations": {
                "gpuscaler.io/min-replicas": "two"}}}, self.ns)
            wait_for(lambda: "invalid annotation gpuscaler.io/min-replicas" in g.text(), 15,
                     what="the invalid annotation")
            self.c.patch("deployments", "spell", {"metadata": {"annotations": {
                "gpuscaler.io/min-replicas": "1"}}}, self.ns)
            wait_for(lambda: "annotations valid again" in g.text(), 15, what="valid again")
            self.c.patch("deployments", "spell", {"metadata": {"annotations": {
                "gpuscaler.io/capacity-per-gpu": "12"}}}, self.ns)
            n = len(prom.ranges())
            time.sleep(4)  # several ticks: a reset forecaster would be seeded at once
            text = g.text()
            self.assertEqual(text.count("forecaster seeded from Prometheus"), 1, text)
            self.assertEqual(len(prom.ranges()), n, "no second seed asked for")
            self.assertTrue(g.alive())
        finally:
            g.stop()
            self.c.delete("deployments", "spell", self.ns)

    @unittest.skipUnless(os.path.exists(FAKETIME), "needs libfaketime (scripts/setup.sh test)")
    def test_45_a_wall_clock_step_keeps_the_rules_clocks(self):
        """The wall clock set 40 s forward, then back again (libfaketime: gpuscaler's wall
        clock alone, not its monotonic nor its boot clock) while the scale-in rule's clock runs
        (scale-in-after 30 s): gpuscaler logs and counts each step, and the rule's clock moves
        with it (the status's belowSince 40 s later, then back), so the rule still waits its
        30 s of measured time; taken at its word, the wall clock would have fired it at once
        (the build before scaled 10 -> 6 on the step). The scraped metrics read on across both
        steps (metrics-stale-after 5 s, rate window 3 s): the scraper stamps its samples with
        the boot clock (the build before held, MetricsUnavailable, after either step:
        samples 40 s old after the step forward, new ones refused for 40 s after the step
        back)."""
        stamp_dir = tempfile.mkdtemp(prefix="faketime-")
        stamp = os.path.join(stamp_dir, "offset")

        def set_offset(text):  # whole at once: libfaketime rereads the file at every call
            with open(stamp + ".new", "w") as f:
                f.write(text)
            os.replace(stamp + ".new", stamp)
        set_offset("+0\n")
        cfg = ("decision-interval: 1s\nleader-election: {enabled: false}\n"
               "scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}\n")
        # 4 req/s a replica: below 5 (50 % of 10), so the rule's clock runs
        self.make("clockstep", 10, subnet=60, annotations={
            "gpuscaler.io/max-replicas": "12", "gpuscaler.io/scale-in-after": "30s"})
        self.metrics.set_rate("clockstep", 40.0)
        g = self.start(cfg, ident="inst-clock", env={
            "LD_PRELOAD": FAKETIME, "FAKETIME_TIMESTAMP_FILE": stamp, "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"})

        def below_since(st):
            return calendar.timegm(time.strptime(st["belowSince"], "%Y-%m-%dT%H:%M:%SZ"))

        def watch(seconds):
            reasons = set()
            t_end = time.monotonic() + seconds
            while time.monotonic() < t_end:
                st = self.status("clockstep")
                self.assertEqual(self.replicas("clockstep"), 10, "scaled in on the step: %s" % st)
                reasons.add(st.get("reason"))
                time.sleep(0.5)
            self.assertEqual(reasons, {"BelowTargetWaiting"})
            return self.status("clockstep")
        try:
            before = wait_for(lambda: (lambda s: s if s and s.get("reason") ==
                                       "BelowTargetWaiting" else None)(self.status("clockstep")),
                              30, what="the scale-in rule's clock running")
            time.sleep(1)
            set_offset("+40\n")
            wait_for(lambda: g.metric("gpuscaler_clock_steps_total") == 1, 10,
                     what="the step forward counted")
            line = [ln for ln in g.text().splitlines() if "the wall clock was set" in ln]
            self.assertIn("set forward by 40.", line[0])
            self.assertIn("level=warn", line[0])
            ahead = watch(4)
            self.assertTrue(39 <= below_since(ahead) - below_since(before) <= 41,
                            (before["belowSince"], ahead["belowSince"]))
            set_offset("+0\n")
            wait_for(lambda: g.metric("gpuscaler_clock_steps_total") == 2, 10,
                     what="the step back counted")
            line = [ln for ln in g.text().splitlines() if "the wall clock was set" in ln]
            self.assertIn("set back by 40.", line[1])
            back = watch(4)
            self.assertTrue(-1 <= below_since(back) - below_since(before) <= 1,
                            (before["belowSince"], back["belowSince"]))
        finally:
            g.stop()
            self.c.delete("deployments", "clockstep", self.ns)
            shutil.rmtree(stamp_dir, ignore_errors=True)

    def test_46_overlapping_selectors_split_by_owner(self):
        """A canary Deployment "ovl-canary" beside "ovl", whose pods the selector of "ovl"
        (app=ovl) also matches, as a canary rollout makes: gpuscaler counts for "ovl" the pods
        its ReplicaSet controls (ovl-5d8f7), not the canary's (ovl-canary-7c9b4). ovl: 2 pods
        at 6 req/s each, 6 per GPU, within the band (5-8); the canary: 2 pods at 15 each.
        Counted by the selector, ovl would read 4 pods and 42 req/s, 10.5 per GPU: a
        scale-out after scale-out-after (4 s), which the build before made."""
        if REAL:
            self.skipTest("its ReplicaSets are the test's: a real cluster's ReplicaSet "
                          "controller would manage them and their pods")
        canary_labels = {"app": "ovl", "track": "canary"}
        canary = deployment("ovl-canary", 2, {}, self.metrics.port)
        canary["metadata"]["labels"] = dict(canary_labels)
        canary["spec"]["selector"] = {"matchLabels": dict(canary_labels)}
        canary["spec"]["template"]["metadata"]["labels"] = dict(canary_labels)
        self.c.create("deployments", deployment("ovl", 2, dict(ANNOTATIONS), self.metrics.port),
                      self.ns)
        self.c.create("deployments", canary, self.ns)
        for name, subnet, labels, owner in (("ovl", 61, None, "ovl-5d8f7"),
                                            ("ovl-canary", 62, canary_labels,
                                             "ovl-canary-7c9b4")):
            k = MiniKubelet(self.c, self.ns, name, self.metrics, subnet=subnet,
                            port=self.metrics.port, labels=labels, owner=owner)
            k.start()
            self.addCleanup(k.stop)
        self.metrics.set_rate("ovl", 12.0)
        self.metrics.set_rate("ovl-canary", 30.0)
        g = self.start(ident="inst-ovl")
        try:
            st = self.measured_status("ovl")
            t_end = time.monotonic() + 6
            while time.monotonic() < t_end:
                self.assertEqual(self.replicas("ovl"), 2, "scaled for the canary's pods: %s" % st)
                st = self.status("ovl")
                self.assertTrue(5.0 <= st["requestsPerGPU"] <= 7.0, st)
                time.sleep(0.5)
            self.assertEqual(st["reason"], "WithinBand", st)
        finally:
            g.stop()
            for name in ("ovl", "ovl-canary"):
                self.c.delete("deployments", name, self.ns)

    def test_24_least_privilege_rbac(self):
        """gpuscaler works with exactly the permissions deploy/rbac.yaml grants it (the chart's,
        checked equal by the deploy and helm checks), on an API server that enforces RBAC:
        as its ServiceAccount it lists and watches, elects a leader, scales through /scale,
        writes the status annotation and Events and, when it stops, its checkpoint, and is
        refused nothing."""
        if REAL:
            self.skipTest("needs its own fake API server in RBAC mode")
        fk = harness.start(bookmark_interval="1s", extra_args=("--authorization-mode", "RBAC"))
        self.addCleanup(fk.stop)
        adm = fk.client()
        self.addCleanup(adm.close)
        create_objects(adm, deploy_manifests("namespace.yaml", "serviceaccount.yaml",
                                             "rbac.yaml"))
        sa = "system:serviceaccount:gpuscaler:gpuscaler"
        tok = "sa-" + os.urandom(6).hex()
        fk.add_token(tok, sa, ("system:serviceaccounts", "system:serviceaccounts:gpuscaler"))
        kc = os.path.join(fk.tmpdir, "kubeconfig-gpuscaler-sa.yaml")
        harness.write_kubeconfig(kc, fk.url, ca_file=fk.pki["ca"], token=tok)
        ns = "rbac-e2e"
        adm.create("namespaces", {"metadata": {"name": ns}})
        ann = dict(ANNOTATIONS)
        adm.create("deployments", deployment("rbac", 2, ann, self.metrics.port), ns)
        k = MiniKubelet(adm, ns, "rbac", self.metrics, subnet=25, port=self.metrics.port)
        k.start()
        self.addCleanup(k.stop)
        self.metrics.set_rate("rbac", 30)  # 15 req/s per GPU over 2: above 80 % of 10
        cfg = ("decision-interval: 1s\n"
               "leader-election: {enabled: true, namespace: gpuscaler, lease-name: gpuscaler,"
               " lease-duration: 4s, renew-deadline: 3s, retry-period: 1s}\n"
               "namespaces: [%s]\n"
               "scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}\n" % ns)
        since = fk.requests()[1]
        g = Gpuscaler(kc, cfg, (), "gpuscaler-rbac")
        try:
            wait_for(lambda: adm.get("deployments", "rbac", ns)["spec"]["replicas"] > 2, 30,
                     what="a scale-out through /scale")
            st = wait_for(lambda: (adm.get("deployments", "rbac", ns)["metadata"]
                                   .get("annotations") or {}).get("gpuscaler.io/status"), 10,
                          what="the status annotation")
            self.assertIn(json.loads(st)["reason"], ("ScaledOut", "ScaleOutPending",
                                                     "WithinBand", "SLAScaleOut"))
            wait_for(lambda: events(adm, ns, "rbac", "ScaledOut"), 10, what="a ScaledOut Event")
            lease = adm.get("leases", "gpuscaler", "gpuscaler")
            self.assertTrue(lease["spec"].get("holderIdentity"))
        finally:
            g.stop()
        # the graceful stop saved the forecaster's state in a checkpoint ConfigMap
        cms = [c["metadata"]["name"] for c in adm.list("configmaps", "gpuscaler")["items"]]
        self.assertTrue(any(n.startswith("gpuscaler-state-") for n in cms), cms)
        reqs = [r for r in fk.requests(since)[0] if r.get("user") == sa]
        refused = ["%s %s %s" % (r["method"], r["path"], r["query"]) for r in reqs
                   if r.get("status") == 403]
        self.assertEqual(refused, [], "refused to gpuscaler under deploy/rbac.yaml")
        verbs = {(r.get("verb"), r.get("resource"), r.get("subresource")) for r in reqs
                 if r.get("status") and 200 <= r["status"] < 300}
        # (a watch is logged when it ends, a refused one at once)
        for want in (("list", "deployments", None), ("list", "pods", None),
                     ("list", "horizontalpodautoscalers", None),
                     ("patch", "deployments", "scale"), ("patch", "deployments", None),
                     ("create", "events", None), ("update", "leases", None)):
            self.assertIn(want, verbs)
        self.assertTrue({("create", "configmaps", None), ("patch", "configmaps", None)} & verbs)

    @unittest.skipIf(REAL, "the slow /scale read is a fault rule of the fake API server")
    def test_47_a_scale_write_in_flight_yields_to_a_newer_hold(self):
        """A read of /scale that answers late (an overloaded API server) spans ticks. When
        the ticks meanwhile hold (the metrics went missing), the count decided before is not
        patched once the read comes back: no scale-in on missing metrics. The build before
        patched it, 4 -> 1 with no metrics."""
        k = self.make("slowscale", 4, subnet=61)
        self.metrics.set_rate("slowscale", 2)  # 0.5 req/s per GPU: 1 replica is enough
        # every read of its /scale answers 12 s late
        self.fk.fault({"action": "latency", "ms": 12000, "resource": "deployments",
                       "subresource": "scale", "verb": "get", "name": "slowscale",
                       "count": None})
        self.addCleanup(self.fk.clear_faults)
        g = self.start(ident="inst-slowscale")

        def logged(*words):
            return any("slowscale" in ln and all(w in ln for w in words)
                       for ln in g.text().splitlines())
        try:
            # the scale-in is decided (after scale-in-after, 6 s) and its read goes out ...
            wait_for(lambda: logged("ScaledIn"), 30, what="slowscale: the scale-in decided")
            t_decided = time.time()
            # ... and the metrics go missing while it is out (stale after 5 s)
            for _, ip in k.pods:
                self.metrics.set_mode(ip, "garbage")
            wait_for(lambda: logged("a newer decision holds 4 replicas; not scaling 4 -> "),
                     25, what="slowscale: the late read not patched")
            print("slowscale: the read answered %.1fs after the decision; not patched"
                  % (time.time() - t_decided))
            self.assertTrue(logged("MetricsUnavailable"))
            self.assertEqual(self.replicas("slowscale"), 4)
            time.sleep(2)
            self.assertEqual(self.replicas("slowscale"), 4)
            self.assertFalse(logged("scaled to"))
            # the metrics back, the reads prompt: the scale-in goes
            self.fk.clear_faults()
            for _, ip in k.pods:
                self.metrics.set_mode(ip, None)
            wait_for(lambda: self.replicas("slowscale") < 4, 40,
                     what="slowscale: the scale-in once the metrics are back")
        finally:
            g.stop()
            self.c.delete("deployments", "slowscale", self.ns)

    @unittest.skipIf(REAL, "the failing status write is a fault rule of the fake API server")
    def test_48_invalid_annotations_status_retried_and_each_error_told(self):
        """Annotations turning invalid: the InvalidAnnotation status replaces the last
        decision's even when its first write fails (written again at a later tick; the build
        before left the last valid decision's status, which other replicas serve as valid),
        and another error within the Warning interval (10 minutes) gets its own Event (the
        build before told only the first)."""
        self.make("badspell", 2, subnet=62)
        self.metrics.set_rate("badspell", 12)
        g = self.start(ident="inst-badspell")

        def spell(value):
            # a PUT, not a PATCH: the fault below fails gpuscaler's PATCH only
            for _ in range(10):
                d = self.c.get("deployments", "badspell", self.ns)
                d["metadata"]["annotations"]["gpuscaler.io/capacity-per-gpu"] = value
                try:
                    self.c.update("deployments", d, self.ns)
                    return
                except kubeclient.ApiError as e:
                    if e.code != 409:
                        raise
            raise AssertionError("badspell: the annotation edit kept conflicting")

        def invalid_status(word):
            return wait_for(lambda: (lambda s: s if s and s.get("reason") == "InvalidAnnotation"
                                     and word in s.get("message", "") else None)(
                self.status("badspell")), 20, what="badspell: InvalidAnnotation (%s)" % word)
        try:
            self.measured_status("badspell", timeout=30)
            # gpuscaler's writes of its annotations fail until its InvalidAnnotation status
            # has failed once (once the annotation is invalid it writes no other status)
            self.fk.fault({"action": "error", "status": 500, "verb": "patch",
                           "resource": "deployments", "subresource": "", "name": "badspell",
                           "count": None})
            self.addCleanup(self.fk.clear_faults)
            spell("lots")

            def invalid_write_failed():
                text = g.text()
                at = text.find("invalid annotation gpuscaler.io/capacity-per-gpu")
                return at >= 0 and "writing the status annotation failed: HTTP 500" in text[at:]
            wait_for(invalid_write_failed, 15, what="badspell: the InvalidAnnotation write failed")
            self.fk.clear_faults()
            st = invalid_status("lots")
            self.assertEqual(st["key"], "gpuscaler.io/capacity-per-gpu")
            spell("many")
            ev = wait_for(lambda: [e for e in events(self.c, self.ns, "badspell",
                                                     "InvalidAnnotation")
                                   if "many" in e["message"]], 15,
                          what="badspell: the second error's Event")
            self.assertIn("replicas are held until it is fixed", ev[0]["message"])
            invalid_status("many")
            # a Deployment's name cut to 200 bytes for its Event's name ends in '-' here: the
            # Event's name must still be valid (the build before wrote "...-.<hex>", refused)
            long = "a" * 199 + "-" + "b" * 20
            dep = deployment(long, 0, dict(ANNOTATIONS, **{
                "gpuscaler.io/capacity-per-gpu": "lots"}), self.metrics.port)
            dep["metadata"]["labels"] = dep["spec"]["selector"]["matchLabels"] = \
                dep["spec"]["template"]["metadata"]["labels"] = {"app": "long-name"}
            self.c.create("deployments", dep, self.ns)
            self.addCleanup(self.c.delete, "deployments", long, self.ns)
            ev = wait_for(lambda: events(self.c, self.ns, long, "InvalidAnnotation"), 15,
                          what="the long-named Deployment's Event")
            self.assertTrue(ev[0]["metadata"]["name"].startswith("a" * 199 + "."))
            spell("10")
            wait_for(lambda: (self.status("badspell") or {}).get("reason") not in
                     (None, "InvalidAnnotation"), 20, what="badspell: a decision's status again")
        finally:
            g.stop()
            self.c.delete("deployments", "badspell", self.ns)

    def test_49_sharded_replicas_yield_to_a_single_leader(self):
        """A rollout that turns sharding on or off runs old and new replicas side by side.
        A sharded replica takes no shard while a replica with sharding off holds the single
        leader's Lease (both would act on every Deployment: two writers for minutes before),
        takes them once it is released; and hands them all back at once when a single leader
        appears again (sharding turned off)."""
        lease = "leader-election: {enabled: true, namespace: %s, lease-name: e2e-mix,\n" \
                "                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}\n" \
                % self.ns
        single_cfg = "decision-interval: 1s\n" + lease
        sharded_cfg = single_cfg + "sharding: {enabled: true, shards: 2, lease-prefix: e2e-mix-s}\n"

        def holders():
            return [(self.c.get_or_none("leases", "e2e-mix-s-%d" % s, self.ns) or {}).get(
                "spec", {}).get("holderIdentity", "") for s in range(2)]

        a = self.start(single_cfg, ident="inst-mix-a")
        b = c = None
        try:
            wait_for(lambda: "became leader" in a.text(), 20, what="the single leader")
            b = self.start(sharded_cfg, ident="inst-mix-b")
            wait_for(lambda: "holding no shard until it is released" in b.text(), 20,
                     what="the sharded replica waiting")
            time.sleep(3)  # rounds of 0.5 s, past its member Lease's two rounds
            self.assertEqual(holders(), ["", ""], b.text()[-2000:])
            self.assertEqual(b.metric("gpuscaler_shards_held"), 0)
            self.assertEqual(a.stop(timeout=15), 0)  # released: the sharded one takes both
            wait_for(lambda: holders() == ["inst-mix-b"] * 2, 15, what="both shards taken")
            # sharding turned off again: a new single leader; the shards are handed back
            c = self.start(single_cfg, ident="inst-mix-c")
            wait_for(lambda: "became leader" in c.text(), 20, what="the new single leader")
            wait_for(lambda: holders() == ["", ""], 10, what="both shards handed back")
            self.assertIn("handed over to the single leader inst-mix-c", b.text())
            self.assertEqual(b.metric("gpuscaler_shards_held"), 0)
        finally:
            for g in (a, b, c):
                if g:
                    g.stop()

    @unittest.skipIf(REAL, "the throttling and the hanging Leases are fault rules of the fake")
    def test_50_throttled_writes_end_with_the_term(self):
        """A write the API server throttles (429, Retry-After 2 s) is sent again only within
        the term that allowed it: once the Lease cannot be renewed (its requests hang), no
        status or /scale patch of gpuscaler's reaches the API server after the renew deadline
        (each was sent again up to 10 times, 20 s, before: over a new leader's writes)."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-term,
                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
""" % self.ns
        self.make("term", 2, subnet=63)
        self.metrics.set_rate("term", 10)
        g = self.start(cfg, ident="inst-term")
        try:
            wait_for(lambda: "became leader" in g.text() and self.status("term"), 20,
                     what="leading, and a status written")
            self.fk.fault({"action": "error", "status": 429, "retryAfter": 2,
                           "resource": "deployments", "verb": "patch", "count": None})
            self.addCleanup(self.fk.clear_faults)
            self.metrics.set_rate("term", 45)  # a new decision: status and /scale writes
            wait_for(lambda: any(r.get("resource") == "deployments" and r.get("verb") == "patch"
                                 and r.get("status") == 429 and
                                 r["userAgent"].split("/")[0] == "gpuscaler"
                                 for r in self.fk.requests()[0]),
                     15, what="a throttled write of gpuscaler's")
            self.fk.fault({"action": "latency", "ms": 8000, "resource": "leases",
                           "count": None})
            wait_for(lambda: "stopped leading" in g.text(), 10, what="the term's end")
            t_end = time.time()
            time.sleep(6)  # three more Retry-After waits
            late = [r for r in self.fk.requests()[0]
                    if r.get("resource") == "deployments" and r.get("verb") == "patch"
                    and r["userAgent"].split("/")[0] == "gpuscaler" and r["time"] > t_end + 0.5]
            self.assertEqual(late, [], g.text()[-2000:])
        finally:
            g.stop()
            self.fk.clear_faults()
            self.c.delete("deployments", "term", self.ns)

    @unittest.skipIf(REAL, "the failing list is a fault rule of the fake API server")
    def test_51_a_sharded_replica_joins_once_synced(self):
        """A sharded replica writes its member Lease, and so takes shards, only once its
        caches have listed every Deployment and Pod: before, the others handed shards over to
        a replica that could not decide yet (its first list can take tens of seconds), and,
        one that crashed in that list, again at each restart."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-duration: 4s, renew-deadline: 3s,
                  retry-period: 500ms}
sharding: {enabled: true, shards: 2, lease-prefix: e2e-sync}
""" % self.ns
        self.fk.fault({"action": "error", "status": 500, "resource": "pods", "verb": "list",
                       "count": None})
        self.addCleanup(self.fk.clear_faults)
        g = self.start(cfg, ident="inst-sync")
        try:
            wait_for(lambda: "joining the shard members once the Kubernetes caches are synced"
                     in g.text(), 15, what="the wait for the caches")
            time.sleep(3)  # six rounds
            self.assertIsNone(self.c.get_or_none("leases", "e2e-sync-member-inst-sync", self.ns))
            self.assertEqual(g.metric("gpuscaler_shards_held"), 0)
            self.fk.clear_faults()
            wait_for(lambda: g.metric("gpuscaler_shards_held") == 2, 30,
                     what="both shards once synced")
            self.assertIsNotNone(self.c.get_or_none("leases", "e2e-sync-member-inst-sync",
                                                    self.ns))
        finally:
            g.stop()
            self.fk.clear_faults()

    def test_53_stale_member_leases_hide_no_replica(self):
        """Sharded replicas follow at most 256 member Leases. Released ones left behind
        (where gpuscaler may not delete them, as under an older chart's RBAC) filled the table
        and hid the live replicas from each other: each then planned for itself alone. A held
        member Lease now takes a released one's place, and the replicas split the shards."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-slot-single,
                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}
sharding: {enabled: true, shards: 2, lease-prefix: e2e-slot}
""" % self.ns
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        names = ["e2e-slot-member-a-%03d" % i for i in range(260)]
        for n in names:
            self.c.create("leases", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                     "metadata": {"name": n},
                                     "spec": {"holderIdentity": "", "leaseDurationSeconds": 1,
                                              "renewTime": now}}, self.ns)
        a = self.start(cfg, ident="inst-slot-1")
        b = self.start(cfg, ident="inst-slot-2")
        try:
            def split():
                return (a.metric("gpuscaler_shards_held"), b.metric("gpuscaler_shards_held"))
            wait_for(lambda: split() == (1, 1), 15, what="one shard each")
            self.assertIn("member Leases (e2e-slot-member-*) not followed", a.text() + b.text())
        finally:
            a.stop()
            b.stop()
            for n in names:
                self.c.delete("leases", n, self.ns)

    @unittest.skipIf(REAL, "the refused lists are a fault rule of the fake API server")
    def test_52_a_failing_namespace_does_not_stop_the_others(self):
        """Of the namespaces configured, one whose pods cannot be listed (403: its
        RoleBinding missing) holds only its own Deployments: the others are decided as soon as
        their own caches have listed (nothing was, until every namespace had)."""
        locked = self.ns + "-locked"
        self.fk.fault({"action": "error", "status": 403, "resource": "pods",
                       "namespace": locked, "count": None})
        self.addCleanup(self.fk.clear_faults)
        self.make("wide", 2, subnet=64)
        self.metrics.set_rate("wide", 38)
        g = self.start(CONFIG + "namespaces: [%s, %s]\n" % (self.ns, locked))
        try:
            wait_for(lambda: self.replicas("wide") > 2, 30, what="scaling in the namespace "
                     "whose caches listed")
            self.assertIn("/api/v1/namespaces/%s/pods" % locked, g.text())
            self.assertEqual(g.metric("gpuscaler_caches_synced"), 0)
            # Ready once that namespace's lists have failed for 30 s (it holds; the others serve)
            self.assertEqual(g.get("/readyz", g.health_port)[0], 503)
            ready = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(
                g.get("/readyz", g.health_port)), 45, what="Ready after 30 s of refused lists")
            self.assertIn("caches synced but a namespace's, whose lists fail", ready[1])
        finally:
            g.stop()
            self.fk.clear_faults()
            self.c.delete("deployments", "wide", self.ns)

    @unittest.skipIf(REAL, "the slow API server is a fault rule of the fake API server")
    def test_54_the_lease_is_released_after_the_checkpoint_saves(self):
        """A graceful stop saves the checkpoints and releases the Lease only once those saves
        have answered (each ends within 5 s): the next leader reads the state as of the stop.
        Every checkpoint write takes 1.5 s here; before, the release went at once, and the
        next leader could read a checkpoint up to 10 minutes old."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-ckrel,
                  lease-duration: 8s, renew-deadline: 6s, retry-period: 500ms}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
checkpoint: {configmap: ckrel-e2e, configmaps: 1}
""" % self.ns
        self.make("ckrel", 1, subnet=65)
        self.metrics.set_rate("ckrel", 5)
        g = self.start(cfg, ident="inst-ckrel")
        try:
            wait_for(lambda: "became leader" in g.text() and self.status("ckrel"), 20,
                     what="leading, and a decision")
            time.sleep(1)  # the checkpoint's read has answered
            self.assertIsNone(self.c.get_or_none("configmaps", "ckrel-e2e-0", self.ns))
            self.fk.fault({"action": "latency", "ms": 1500, "resource": "configmaps",
                           "method": ["PATCH", "POST"], "count": None})
            seq0 = max([w["seq"] for w in self.fk.writes()["writes"]] + [0])
            t0 = time.time()
            g.stop()
            took = time.time() - t0
        finally:
            g.stop()
            self.fk.clear_faults()
            self.c.delete("deployments", "ckrel", self.ns)
        text = g.text()
        ws = self.fk.writes(since=seq0)["writes"]
        saved = [w["seq"] for w in ws if w["resource"] == "configmaps"
                 and w["name"] == "ckrel-e2e-0"]
        released = [w["seq"] for w in ws if w["resource"] == "leases"
                    and w["name"] == "e2e-ckrel" and w.get("holderIdentity") == ""]
        self.assertTrue(saved and released, "%s\n%s" % (ws, text[-2000:]))
        self.assertLess(saved[0], released[0], "%s\n%s" % (ws, text[-2000:]))
        self.assertIn("releasing the lease once 1 checkpoint ConfigMap saves and 0 status or "
                      "/scale writes have answered",
                      text)
        self.assertIn("releasing the lease now (the checkpoints are saved and the writes in "
                      "flight ended)", text)
        self.assertLess(took, 6)
        cm = self.c.get("configmaps", "ckrel-e2e-0", self.ns)
        self.assertIn(checkpoint_key("forecast", self.ns, "ckrel"), cm.get("binaryData") or {})

    @unittest.skipIf(REAL, "the slow API server is a fault rule of the fake API server")
    def test_55_a_checkpoint_created_meanwhile_is_patched_at_the_stop(self):
        """The stop's checkpoint save finds no ConfigMap and creates it; another replica
        creates it first (409 AlreadyExists): the save patches it with what it carried, and
        the Lease is released after that. Before, the save was built again after the stop had
        ended the term, found nothing this replica decides for, and was lost."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-ckrace,
                  lease-duration: 8s, renew-deadline: 6s, retry-period: 500ms}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
checkpoint: {configmap: ckrace-e2e, configmaps: 1}
""" % self.ns
        self.make("ckrace", 1, subnet=66)
        self.metrics.set_rate("ckrace", 5)
        g = self.start(cfg, ident="inst-ckrace")
        # the other replica: a user of its own, so that only gpuscaler's create waits
        tok = "other-" + os.urandom(6).hex()
        self.fk.add_token(tok, "other-replica", ("system:masters",))
        kc = os.path.join(self.fk.tmpdir, "kubeconfig-other-replica.yaml")
        harness.write_kubeconfig(kc, self.fk.url, ca_file=self.fk.pki["ca"], token=tok)
        oc = self.fk.client(kc)
        self.addCleanup(oc.close)
        other = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "ckrace-e2e-0"}, "binaryData": {"note": "aGVsbG8="}}
        timer = threading.Timer(0.5, oc.create, ("configmaps", other, self.ns))
        try:
            wait_for(lambda: "became leader" in g.text() and self.status("ckrace"), 20,
                     what="leading, and a decision")
            time.sleep(1)  # the checkpoint's read has answered
            self.fk.fault({"action": "latency", "ms": 1500, "resource": "configmaps",
                           "method": "POST", "user": "e2e-admin", "count": None})
            timer.start()  # while gpuscaler's create waits
            g.stop()
        finally:
            timer.cancel()
            g.stop()
            self.fk.clear_faults()
            self.c.delete("deployments", "ckrace", self.ns)
        text = g.text()
        # the create met the other replica's: 409, then the patch of what it carried
        mine = [r for r in self.fk.requests()[0] if r.get("resource") == "configmaps" and
                (r.get("name") or "") in ("ckrace-e2e-0", "") and
                r["userAgent"].split("/")[0] == "gpuscaler" and r.get("verb") != "get"]
        seen = [(r.get("verb"), r.get("status")) for r in mine]
        self.assertIn(("create", 409), seen, "%s\n%s" % (seen, text[-2000:]))
        after = seen[seen.index(("create", 409)) + 1:]
        self.assertIn(("patch", 200), after, seen)
        cm = self.c.get("configmaps", "ckrace-e2e-0", self.ns)
        keys = cm.get("binaryData") or {}
        self.assertEqual(keys.get("note"), "aGVsbG8=", text[-2000:])
        self.assertIn(checkpoint_key("forecast", self.ns, "ckrace"), keys, text[-2000:])
        self.assertIn("releasing the lease now (the checkpoints are saved and the writes in "
                      "flight ended)", text)
        spec = self.c.get("leases", "e2e-ckrace", self.ns)["spec"]
        self.assertEqual(spec.get("holderIdentity", ""), "")

    @unittest.skipIf(REAL, "the certificates are signed with the fake API server's CA")
    def test_56_a_rotated_client_certificate_is_used(self):
        """A kubeconfig's client-certificate and client-key files are read again when they
        change (as client-go's rotating dialer does): new connections present the renewed
        certificate. libcurl reused connections by the files' names, and a certificate
        cert-manager renewed was never used: every request got 401 once the old expired."""
        pki = os.path.join(self.fk.tmpdir, "rot-pki")
        ca = (self.fk.pki["ca"], self.fk.pki["ca_key"])
        c1, k1 = harness.make_cert(pki, ca, "rot-a", "rot-a", orgs=("system:masters",))
        c2, k2 = harness.make_cert(pki, ca, "rot-b", "rot-b", orgs=("system:masters",))
        d = tempfile.mkdtemp(prefix="rot-", dir=self.fk.tmpdir)
        shutil.copy(c1, os.path.join(d, "client.crt"))
        shutil.copy(k1, os.path.join(d, "client.key"))
        kc = os.path.join(d, "kubeconfig.yaml")
        with open(kc, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "x",
                       "clusters": [{"name": "c", "cluster": {
                           "server": self.fk.url, "certificate-authority": self.fk.pki["ca"]}}],
                       "users": [{"name": "u", "user": {"client-certificate": "client.crt",
                                                        "client-key": "client.key"}}],
                       "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]},
                      f)
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-rot,
                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}
""" % self.ns
        g = Gpuscaler(kc, cfg, (), "inst-rot", None)
        self.procs.append(g)

        def users():
            return {r.get("user") for r in self.fk.requests()[0]
                    if r["userAgent"].split("/")[0] == "gpuscaler" and r.get("resource") ==
                    "leases" and (r.get("name") or "") == "e2e-rot"}
        try:
            wait_for(lambda: "rot-a" in users(), 20, what="requests as rot-a")
            for src, dst in ((c2, "client.crt"), (k2, "client.key")):
                shutil.copy(src, os.path.join(d, dst + ".new"))
            os.replace(os.path.join(d, "client.key.new"), os.path.join(d, "client.key"))
            os.replace(os.path.join(d, "client.crt.new"), os.path.join(d, "client.crt"))
            wait_for(lambda: "rot-b" in users(), 20, what="requests as rot-b")
            self.assertIn("client.crt changed: new connections use it", g.text())
        finally:
            g.stop()

    @unittest.skipIf(REAL, "the conflict is a fault rule of the fake API server")
    def test_57_a_release_that_conflicts_reads_the_lease_again(self):
        """A graceful stop whose release meets a 409 (a renewal that timed out here but was
        applied there moved the Lease on): the Lease is read again and released over the new
        resourceVersion while it still names this replica. The build before gave up, and the
        Lease stayed held until it expired: no replica acted meanwhile."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-relconf,
                  lease-duration: 20s, renew-deadline: 15s, retry-period: 5s}
""" % self.ns
        g = self.start(cfg, ident="inst-relconf")
        try:
            wait_for(lambda: "became leader" in g.text(), 20, what="leadership")
            time.sleep(0.5)  # the first renewal is 5 s away: the next Lease write is the release
            self.fk.fault({"action": "error", "status": 409, "verb": "update",
                           "resource": "leases", "name": "e2e-relconf", "count": 1})
            rc = g.stop(timeout=20)
        finally:
            g.stop()
            self.fk.clear_faults()
        text = g.text()
        self.assertEqual(rc, 0, text[-2000:])
        self.assertIn("it changed since it was read (409); reading it again", text)
        self.assertIn("released the lease", text)
        spec = self.c.get("leases", "e2e-relconf", self.ns)["spec"]
        self.assertEqual(spec.get("holderIdentity", ""), "", text[-2000:])

    def test_58_sharded_a_deployment_being_deleted_forgets_its_checkpoint(self):
        """Sharded, a Deployment deleted while a finalizer holds it (a foreground delete, or any
        finalizer: it stays, with a deletionTimestamp) is no longer tracked, and its checkpoint
        entries go at the next save, as those of a Deployment that is gone. The build before
        kept them as if its shard had moved to another replica; once the object was gone no
        workload was left to remove them, and they stayed in the ConfigMap."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-duration: 4s, renew-deadline: 3s,
                  retry-period: 500ms}
sharding: {enabled: true, shards: 2, lease-prefix: e2e-sdel}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
checkpoint: {configmap: sdel-e2e, configmaps: 1}
""" % self.ns
        name, fin = "sdel", "e2e.gpuscaler.io/hold"
        key = checkpoint_key("forecast", self.ns, name)
        # an entry from before (restored as nothing: not a state), kept while it is tracked
        self.c.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "sdel-e2e-0"},
                                     "binaryData": {key: "AAAA", "note": "aGVsbG8="}}, self.ns)
        self.make(name, 1, subnet=66)
        self.metrics.set_rate(name, 5)
        self.c.patch("deployments", name, {"metadata": {"finalizers": [fin]}}, self.ns)

        def release():
            d = self.c.get_or_none("deployments", name, self.ns)
            if d and d["metadata"].get("finalizers"):
                self.c.patch("deployments", name, {"metadata": {"finalizers": None}}, self.ns)
            if self.c.get_or_none("deployments", name, self.ns):
                self.c.delete("deployments", name, self.ns)
        self.addCleanup(release)
        g = self.start(cfg, ident="inst-sdel")
        try:
            wait_for(lambda: g.metric("gpuscaler_shards_held") == 2 and
                     "deployment=%s " % name in g.text() and self.status(name), 30,
                     what="both shards held, and a decision")
            self.c.delete("deployments", name, self.ns)
            d = self.c.get("deployments", name, self.ns)
            self.assertTrue(d["metadata"].get("deletionTimestamp"))
            wait_for(lambda: "no longer tracked" in g.text(), 10, what="no longer tracked")
            self.assertEqual(g.stop(), 0)  # the stop saves
        finally:
            g.stop()
        text = g.text()
        data = self.c.get("configmaps", "sdel-e2e-0", self.ns).get("binaryData") or {}
        self.assertNotIn(key, data, "the entry of a Deployment being deleted stayed:\n%s"
                         % text[-2000:])
        self.assertEqual(data.get("note"), "aGVsbG8=")
        self.assertNotIn("no longer tracked here: shard", text)

    def test_59_no_gpu_limit_is_said(self):
        """A pod template without an nvidia.com/gpu or amd.com/gpu limit (MIG slices, Gaudi,
        TPU, Neuron) is sized as 1 GPU a replica, and a Warning Event NoGPULimit says so and
        names gpuscaler.io/gpus-per-replica (the fallback was written only in policy.h); with
        that annotation set, no Event. 2 pods at 15 req/s: 15 per GPU, each pod one GPU."""
        for name, subnet, ann in (("nogpu", 67, {}),
                                  ("nogpu-set", 68, {"gpuscaler.io/gpus-per-replica": "2"})):
            dep = deployment(name, 2, dict(ANNOTATIONS, **ann), self.metrics.port)
            dep["spec"]["template"]["spec"]["containers"][0]["resources"] = {
                "limits": {"habana.ai/gaudi": "2"}}
            self.c.create("deployments", dep, self.ns)
            k = MiniKubelet(self.c, self.ns, name, self.metrics, subnet=subnet,
                            port=self.metrics.port, gpus=0)
            k.start()
            self.addCleanup(k.stop)
            self.metrics.set_rate(name, 30)
        g = self.start(ident="inst-nogpu")
        try:
            ev = wait_for(lambda: events(self.c, self.ns, "nogpu", "NoGPULimit"), 30,
                          what="nogpu: NoGPULimit")
            self.assertEqual(ev[0]["type"], "Warning")
            self.assertIn("no nvidia.com/gpu or amd.com/gpu limit: sizing as 1 GPU per replica",
                          ev[0]["message"])
            self.assertIn("gpuscaler.io/gpus-per-replica", ev[0]["message"])
            st = self.measured_status("nogpu")
            self.assertAlmostEqual(st["requestsPerGPU"], 15, delta=3)
            st = self.measured_status("nogpu-set")
            self.assertAlmostEqual(st["requestsPerGPU"], 7.5, delta=1.5)
            self.assertEqual(events(self.c, self.ns, "nogpu-set", "NoGPULimit"), [])
            self.assertEqual(len([ln for ln in g.text().splitlines()
                                  if "nogpu " in ln and "sizing as 1 GPU" in ln]), 1, g.text())
        finally:
            g.stop()
            for name in ("nogpu", "nogpu-set"):
                self.c.delete("deployments", name, self.ns)

    @unittest.skipIf(REAL, "fault injection needs the fake API server")
    def test_60_the_action_event_follows_the_write(self):
        """A /scale write the API server refuses (a webhook's 422) gets a Warning FailedScale
        naming the counts and the status; the action's Event is sent once the write has changed
        the count, after the successful PATCH (it was sent before the write, and said "2 -> 5"
        on a Deployment the refused write left at 2), and once."""
        self.make("failscale", 2, subnet=69)
        self.metrics.set_rate("failscale", 10)
        g = self.start(ident="inst-failscale")
        try:
            wait_for(lambda: "WithinBand" in g.text(), 20, what="a first decision")
            seq0 = max([w["seq"] for w in self.fk.writes()["writes"]] + [0])
            self.fk.fault({"action": "error", "verb": "patch", "resource": "deployments",
                           "subresource": "scale", "status": 422, "count": 1})
            self.metrics.set_rate("failscale", 38)  # 19 req/s per GPU: the policy wants 5
            wait_for(lambda: self.replicas("failscale") == 5, 30, what="scale-out to 5")
            failed = wait_for(lambda: events(self.c, self.ns, "failscale", "FailedScale"), 10,
                              what="FailedScale")
            self.assertEqual(failed[0]["type"], "Warning")
            self.assertIn("scaling 2 -> 5 failed: the API server refused the write: HTTP 422",
                          failed[0]["message"])
            writes = self.fk.writes(since=seq0, namespace=self.ns)["writes"]
            patched = [w["seq"] for w in writes if w["resource"] == "deployments"
                       and w["subresource"] == "scale" and w["name"] == "failscale"]
            self.assertEqual(len(patched), 1, writes)
            told = []
            for w in writes:
                if w["resource"] == "events" and w["verb"] == "create":
                    ev = self.c.get_or_none("events", w["name"], self.ns)
                    if ev and ev["involvedObject"]["name"] == "failscale" and \
                            ev["type"] == "Normal":
                        told.append((w["seq"], ev["reason"], ev.get("count", 1)))
            self.assertEqual(len(told), 1, told)
            self.assertGreater(told[0][0], patched[0], "the action told before its write")
            self.assertEqual(told[0][2], 1)
        finally:
            g.stop()
            self.c.delete("deployments", "failscale", self.ns)

    def test_61_replicas_above_a_million_are_brought_to_max(self):
        """A Deployment at 2,000,000 replicas (Kubernetes allows up to 2^31-1) is brought to
        max-replicas. The cache clamps counts at 1,000,000, and the /scale read found 2,000,000,
        took it for a hand change since the decision, and never wrote. No pods: the bounds
        apply without metrics."""
        self.c.create("deployments", deployment("huge", 2000000, ANNOTATIONS, self.metrics.port),
                      self.ns)
        g = self.start(ident="inst-huge")
        try:
            wait_for(lambda: self.replicas("huge") == 8, 30, what="2000000 -> max-replicas 8")
            self.assertNotIn("replicas changed to 2000000", g.text())
        finally:
            g.stop()
            self.c.delete("deployments", "huge", self.ns)


    def test_62_a_new_term_reads_the_state_saved_at_the_last_stop(self):
        """A warm standby read the checkpoints at its start (none yet); the leader saves its
        state as it stops, and holds the Lease for that save: the standby, leading now, reads
        it before its first save. Before, it never read a checkpoint again, and its first save
        overwrote the stopped leader's history with its own."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-newterm,
                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
checkpoint: {configmap: term-e2e, configmaps: 1}
""" % self.ns
        self.make("newterm", 1, subnet=70, annotations={"gpuscaler.io/predictive": "true"})
        self.metrics.set_rate("newterm", 5)
        a = self.start(cfg, ident="inst-term-a")
        b = None
        try:
            wait_for(lambda: "became leader" in a.text() and self.status("newterm"), 20,
                     what="a leads, and a decision")
            b = self.start(cfg, ident="inst-term-b")
            time.sleep(2)  # b read the (absent) checkpoint as a standby
            self.assertNotIn("became leader", b.text())
            a.stop()
            cm = self.c.get("configmaps", "term-e2e-0", self.ns)
            self.assertIn(checkpoint_key("forecast", self.ns, "newterm"), cm.get("binaryData") or {})

            def read_again():
                t = b.text()
                i = t.find("became leader")
                return i >= 0 and re.search(r"restored forecaster from term-e2e-0|keeping the "
                                            r"forecaster's \d+ buckets", t[i:])
            wait_for(read_again, 20, what="b leads and reads the state a saved at its stop")
        finally:
            a.stop()
            if b:
                b.stop()
            self.c.delete("deployments", "newterm", self.ns)

    @unittest.skipIf(REAL, "the failing watch is a fault rule of the fake API server")
    def test_63_a_failing_deployment_watch_prunes_no_checkpoint(self):
        """A standby whose Deployment watch fails after its first list misses a Deployment made
        meanwhile, which the leader tracks and saves at its stop. The standby takes over and
        reads the checkpoints while its watch still fails: it keeps the keys of that
        Deployment, which its view lacks, and of one truly gone, and its stop saves them as
        they were. The next leader, its view current, keeps the first and removes the second.
        Before, the keys of every Deployment missing from a namespace's cache once it had
        listed were taken for a gone one's, and the standby's save removed the saved history
        for good."""
        cfg = """decision-interval: 1s
leader-election: {enabled: true, namespace: %s, lease-name: e2e-prune,
                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
checkpoint: {configmap: prune-e2e, configmaps: 1}
""" % self.ns
        cm = "prune-e2e-0"
        late = [checkpoint_key(w, self.ns, "prune-late") for w in ("forecast", "capacity")]
        gone = checkpoint_key("forecast", self.ns, "prune-gone")

        def saved():
            return sorted(self.c.get("configmaps", cm, self.ns).get("binaryData") or {})

        def restored(g, name):
            t = g.text()
            i = t.find("became leader")
            return i >= 0 and re.search(r"deployment=%s msg=\"(restored forecaster from %s|"
                                        r"keeping the forecaster's \d+ buckets)" % (name, cm),
                                        t[i:])
        self.c.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": cm},
                                     "binaryData": {"note": "aGVsbG8="}}, self.ns)
        self.make("prune-seen", 1, subnet=71)
        self.metrics.set_rate("prune-seen", 5)
        # the standby under a user of its own, so that only its Deployment watch fails
        tok = "standby-" + os.urandom(6).hex()
        self.fk.add_token(tok, "standby-replica", ("system:masters",))
        kc = os.path.join(self.fk.tmpdir, "kubeconfig-standby-replica.yaml")
        harness.write_kubeconfig(kc, self.fk.url, ca_file=self.fk.pki["ca"], token=tok)
        a = self.start(cfg, ident="inst-prune-a")
        b = n = None
        try:
            wait_for(lambda: "became leader" in a.text() and self.status("prune-seen"), 20,
                     what="a leads, and a decision")
            b = Gpuscaler(kc, cfg, (), "inst-prune-b", None)
            self.procs.append(b)
            wait_for(lambda: b.metric("gpuscaler_caches_synced") == 1, 20, what="b synced")
            self.fk.fault({"action": "error", "status": 500, "resource": "deployments",
                           "verb": ["list", "watch"], "user": "standby-replica", "count": None},
                          {"action": "drop-watches", "resource": "deployments"})
            self.addCleanup(self.fk.clear_faults)
            wait_for(lambda: b.metric("gpuscaler_kube_cache_down_seconds") > 0, 10,
                     what="b's Deployment watch failing")
            seq0 = self.fk.requests()[1]

            def read_by_a():
                return [r for r in self.fk.requests(seq0)[0]
                        if r.get("verb") == "get" and r.get("resource") == "configmaps" and
                        r.get("name") == cm and r.get("user") != "standby-replica" and
                        r["userAgent"].split("/")[0] == "gpuscaler"]
            self.c.create("deployments", deployment("prune-late", 1, ANNOTATIONS,
                                                    self.metrics.port), self.ns)
            wait_for(lambda: self.status("prune-late") and read_by_a(), 20,
                     what="a decides and reads prune-late")
            time.sleep(0.5)  # a's read has answered: a never sees gone's key (it would prune it)
            self.c.patch("configmaps", cm, {"binaryData": {gone: "AAAA"}}, self.ns)
            a.stop()  # saves both Deployments' states
            self.assertTrue(set(late + [gone]) <= set(saved()), saved())
            wait_for(lambda: restored(b, "prune-seen"), 20,
                     what="b leads and reads the checkpoints")
            self.assertGreater(b.metric("gpuscaler_kube_cache_down_seconds"), 0)
            self.assertNotIn("prune-late", b.text())  # b never saw it
            self.assertEqual(b.stop(), 0)  # the stop saves
            have = saved()
            for k in late + [gone]:
                self.assertIn(k, have, "b removed a key while its view was out of date:\n%s"
                              % b.text()[-2000:])
            # current again: the next leader reads prune-late's state and prunes gone's
            self.fk.clear_faults()
            n = self.start(cfg, ident="inst-prune-n")
            wait_for(lambda: restored(n, "prune-late"), 20,
                     what="the next leader restores prune-late's state")
            self.assertEqual(n.stop(), 0)
        finally:
            for g in (a, b, n):
                if g:
                    g.stop()
            self.fk.clear_faults()
            for name in ("prune-seen", "prune-late"):
                self.c.delete("deployments", name, self.ns)
        have = saved()
        self.assertTrue(set(late) <= set(have), have)
        self.assertNotIn(gone, have)
        self.assertIn("note", have)


# The tests that took 10 s or more in one run of the whole file (the number after "test_"; the
# others took 1-9 s, counted as 5): what the parts are balanced on. A stale figure only
# unbalances the parts, it never drops a test.
SECONDS = {1: 30, 2: 12, 3: 32, 4: 12, 5: 11, 6: 30, 8: 11, 9: 14, 16: 14, 22: 25, 27: 20,
           28: 12, 29: 13, 30: 12, 34: 11, 36: 77, 37: 13, 38: 14, 40: 19, 43: 34, 45: 13,
           47: 29, 50: 16, 52: 30, 65: 14, 66: 18, 67: 10, 71: 80}


def part_of(names, k, n):
    """Part k of n: each test, longest first, goes to the part with the fewest seconds so far
    (on a tie the lowest part), so the parts, run side by side, end about together."""
    def secs(name):
        return SECONDS.get(int(re.match(r"test_(\d+)", name).group(1)), 5)
    load, mine = [0] * n, set()
    for name in sorted(names, key=lambda x: (-secs(x), x)):
        i = load.index(min(load))
        load[i] += secs(name)
        if i == k - 1:
            mine.add(name)
    return [x for x in names if x in mine]


if __name__ == "__main__":
    argv = sys.argv
    if PART and len(sys.argv) == 1:
        # part k of n: the tests the longest-first split of SECONDS gives part k, in
        # unittest's order. On a real cluster (one API server for both parts, whose
        # gpuscalers watch every namespace) part 1 runs them all and the others none
        k, n = (int(x) for x in PART.split("/"))
        names = unittest.defaultTestLoader.getTestCaseNames(ControllerE2E)
        mine = part_of(names, k, n) if not REAL else names if k == 1 else []
        if not mine:
            print("controller e2e: part %s on a real cluster: part 1 runs every test" % PART)
            print("controller e2e: 0 passed, 0 failed, 0 skipped")
            sys.exit(0)
        argv = sys.argv + ["ControllerE2E." + m for m in mine]
        print("controller e2e: part %s, %d of %d tests" % (PART, len(mine), len(names)))
    import testsummary
    r = unittest.main(argv=argv, verbosity=2, exit=False).result
    print("controller e2e: %d passed, %d failed, %d skipped" % testsummary.counts(r)[:3])
    sys.exit(0 if r.wasSuccessful() else 1)

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of gpuscaler's HPA mode: `gpuscaler run --external-metrics=true` serves
external.metrics.k8s.io/v1beta1 over TLS, fakekube proxies it as kube-aggregator does (an
APIService with a caBundle, the front-proxy client certificate, X-Remote-User/Group, the
availability check), and hpaemu (an emulation of the HPA controller) scales a Deployment from
gpuscaler_desired_replicas with an AverageValue target of 1.

Everything runs on loopback and is stopped by PID: fakekube (harness), gpuscaler (ctlharness),
fake serving pods (MetricsPods on 127.0.14-18.N) and their MiniKubelet.  Durations are compressed:
gpuscaler decides every second (scale-out after 4 s, scale-in after 6 s), the HPA syncs every
second, the aggregator re-checks availability every second. Test 7 runs two more replicas
with leader election in a namespace of their own: the standby serves the leader's decisions.

Run: /usr/bin/python3 e2e/test_extmetrics.py  (meson test 'extmetrics'; GPUSCALER_BIN)
"""
import base64
import calendar
import http.client
import json
import math
import os
import re
import shutil
import signal
import socket
import ssl
import statistics
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from fakeprom import FakePrometheus  # noqa: E402
from ctlharness import (FAST_ANNOTATIONS, Gpuscaler, MetricsPods, MiniKubelet,  # noqa: E402
                        create_objects, deploy_manifests, deployment, wait_for)
from fakekube import harness, kubeclient  # noqa: E402
import hpaemu  # noqa: E402
from hpaemu import TestHPAArithmetic  # noqa: E402,F401  (the emulation's own tests run here too)

SYSTEM_NS = "gpuscaler-system"
GPUSCALER_USER = "system:serviceaccount:%s:gpuscaler" % SYSTEM_NS
# test_7's standby: a ServiceAccount of its own, bound as deploy/rbac.yaml binds gpuscaler's,
# so that a fault rule can fail its requests alone
STANDBY_USER = "system:serviceaccount:%s:gpuscaler-standby" % SYSTEM_NS
HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
APISERVICE = "v1beta1.external.metrics.k8s.io"
EM = "/apis/external.metrics.k8s.io/v1beta1"
METRICS = ["gpuscaler_desired_replicas", "gpuscaler_requests_per_gpu",
           "gpuscaler_forecast_requests_per_gpu", "gpuscaler_utilization"]
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")

CONFIG = """decision-interval: 1s
leader-election: {enabled: false, namespace: %s}
scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}
""" % SYSTEM_NS

ANNOTATIONS = dict(FAST_ANNOTATIONS, **{"gpuscaler.io/mode": "external-metric"})

# the HPA of docs/external-metrics.md section 3
HPA_BEHAVIOR = {
    "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 1000, "periodSeconds": 15}]},
    "scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                  "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
}

T0 = time.monotonic()


def status_of(body):
    try:
        return json.loads(body)
    except ValueError:
        return {"text": body.decode(errors="replace")}


class ExtMetricsE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.procs = []
        # RBAC enforced: gpuscaler has what deploy/rbac.yaml grants (its namespace renamed),
        # the HPA controller its bootstrap role
        cls.fk = harness.start(front_proxy=True, aggregator_resync="1s", bookmark_interval="1s",
                               extra_args=("--authorization-mode", "RBAC"))
        fk = cls.fk
        cls.c = fk.client()
        cls.ns = "hpa-e2e-%d" % (int(time.time()) % 100000)
        for ns in (SYSTEM_NS, cls.ns):
            cls.c.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": ns}})
        cls.apply_rbac()
        # identities: gpuscaler's ServiceAccount and the HPA controller's
        sa = ["system:serviceaccounts", "system:authenticated"]
        cls.gpuscaler_token = "gpuscaler-" + os.urandom(8).hex()
        cls.hpa_token = "hpa-" + os.urandom(8).hex()
        fk.add_token(cls.gpuscaler_token, GPUSCALER_USER,
                     sa + ["system:serviceaccounts:" + SYSTEM_NS])
        fk.add_token(cls.hpa_token, HPA_USER, sa + ["system:serviceaccounts:kube-system"])
        cls.standby_token = "standby-" + os.urandom(8).hex()
        fk.add_token(cls.standby_token, STANDBY_USER, sa + ["system:serviceaccounts:" + SYSTEM_NS])
        d = fk.tmpdir
        cls.standby_kubeconfig = harness.write_kubeconfig(
            os.path.join(d, "kubeconfig-standby.yaml"), fk.url, ca_file=fk.pki["ca"],
            token=cls.standby_token)
        cls.gpuscaler_kubeconfig = harness.write_kubeconfig(
            os.path.join(d, "kubeconfig-gpuscaler.yaml"), fk.url, ca_file=fk.pki["ca"],
            token=cls.gpuscaler_token)
        cls.hpa_kubeconfig = harness.write_kubeconfig(
            os.path.join(d, "kubeconfig-hpa.yaml"), fk.url, ca_file=fk.pki["ca"],
            token=cls.hpa_token)
        cls.hpa_client = kubeclient.Client.from_kubeconfig(cls.hpa_kubeconfig,
                                                           user_agent="kube-controller-manager/"
                                                           "v1.31.0 (linux/amd64) hpaemu")
        # the trust ConfigMap kube-apiserver publishes (created here through the API)
        cls.c.create("configmaps", harness.requestheader_configmap(
            fk.front_proxy["ca"], fk.pki["ca"]), "kube-system")
        # gpuscaler's serving certificate, and the client certificates of the auth tests
        pki = os.path.join(d, "e2e-pki")
        serving_ca = harness.make_ca(pki, "serving-ca", "gpuscaler-serving-ca")
        cls.serving_ca = serving_ca[0]
        cls.serving = harness.make_cert(pki, serving_ca, "serving", "gpuscaler",
                                        usage="serverAuth",
                                        dns=("gpuscaler.%s.svc" % SYSTEM_NS, "localhost"),
                                        ips=("127.0.0.1",))
        fp_ca = (fk.front_proxy["ca"], fk.front_proxy["ca_key"])
        rogue_ca = harness.make_ca(pki, "rogue-ca", "front-proxy-ca")
        cls.certs = {
            "valid": (fk.front_proxy["client_cert"], fk.front_proxy["client_key"]),
            "rogue": harness.make_cert(pki, rogue_ca, "rogue", "front-proxy-client"),
            "expired": harness.make_cert(pki, fp_ca, "expired", "front-proxy-client",
                                         expired=True),
            "wrong-cn": harness.make_cert(pki, fp_ca, "wrong-cn", "not-the-front-proxy"),
        }
        # register the APIService and its Service before gpuscaler listens: their endpoint a
        # port this process holds bound, not listening (refused, and no other process can
        # take it), until gpuscaler serves on a port of its own
        held = socket.socket()
        held.bind(("127.0.0.1", 0))
        cls.down_port = held.getsockname()[1]
        cls.c.create("services", {"apiVersion": "v1", "kind": "Service",
                                  "metadata": {"name": "gpuscaler"},
                                  "spec": {"selector": {"app": "gpuscaler"}, "ports": [
                                      {"name": "https", "port": 443, "targetPort": 6443}]}},
                     SYSTEM_NS)
        fk.set_service_endpoint(SYSTEM_NS, "gpuscaler", "127.0.0.1:%d" % cls.down_port)
        with open(cls.serving_ca, "rb") as f:
            bundle = base64.b64encode(f.read()).decode()
        cls.c.create("apiservices", {
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": APISERVICE},
            "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1",
                     "service": {"namespace": SYSTEM_NS, "name": "gpuscaler", "port": 443},
                     "caBundle": bundle, "groupPriorityMinimum": 100, "versionPriority": 100}})
        cls.down_cond = wait_for(lambda: cls.available_cond(False), 15,
                                 what="FailedDiscoveryCheck before gpuscaler runs")
        cls.down_answer = cls.c.raw("GET", EM)
        cls.metrics = MetricsPods()
        # for Deployments with metrics-source: prometheus, 20 req/s
        cls.prom = FakePrometheus(lambda t: 20.0,
                                  lambda q: 0.5 if "histogram_quantile" in q else 20.0)
        # its first reads of the front proxy's settings fail (an API server blip): read
        # again 1, 2, 4 and 8 s later, not at the next minute's refresh (test_1)
        fk.fault({"action": "error", "status": 500, "resource": "configmaps",
                  "namespace": "kube-system", "name": "extension-apiserver-authentication",
                  "user": GPUSCALER_USER, "count": 4})
        t = time.monotonic()
        # only the tests' namespace: test_7's replicas decide for their own
        cls.g = Gpuscaler(cls.gpuscaler_kubeconfig,
                          CONFIG + "prometheus: {url: \"%s\"}\nnamespaces: [%s]\n"
                          % (cls.prom.url, cls.ns), [
            "--external-metrics=true", "--external-metrics-addr", "127.0.0.1:0",
            "--tls-cert-file", cls.serving[0], "--tls-key-file", cls.serving[1]],
            ident="gpuscaler-hpa-e2e")
        cls.procs.append(cls.g)
        cls.port = cls.g.port("extmetrics")
        held.close()
        # not Ready while those settings are unread (the aggregator's requests would get
        # 401), then Ready (test_1)
        def readyz():
            return cls.g.get("/readyz", cls.g.health_port)
        cls.unready = wait_for(lambda: (lambda r: r if "synced" in r[1] and "front-proxy" in r[1]
                                        else None)(readyz()),
                               15, interval=0.1, what="/readyz waiting for the front proxy")
        # the HTTPS listener's own /readyz says the same (no credentials)
        def em_readyz():
            ctx = ssl.create_default_context(cafile=cls.serving_ca)
            conn = http.client.HTTPSConnection("127.0.0.1", cls.port, context=ctx, timeout=10)
            try:
                conn.request("GET", "/readyz")
                r = conn.getresponse()
                return r.status, r.read().decode()
            finally:
                conn.close()
        cls.em_unready = wait_for(lambda: (lambda r: r if "front-proxy" in r[1] else None)(
            em_readyz()), 15, interval=0.1, what="the listener's /readyz waiting for it")
        cls.ready = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(readyz()), 30,
                             interval=0.1, what="/readyz 200 once the front proxy is read")
        cls.em_ready = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(em_readyz()), 10,
                                interval=0.1, what="the listener's /readyz 200")
        # the Service's endpoint once the pod is Ready, as its readiness publishes it
        fk.set_service_endpoint(SYSTEM_NS, "gpuscaler", "127.0.0.1:%d" % cls.port)
        cls.up_cond = wait_for(lambda: cls.available_cond(True), 30,
                               what="APIService Available after gpuscaler started")
        cls.available_after = time.monotonic() - t
        # test_8's Deployment no HPA targets, made now so that the grace before it is told
        # passes while the other tests run (no pods: nothing scrapes it)
        cls.c.create("deployments", deployment("unscaled", 1, ANNOTATIONS, cls.metrics.port),
                     cls.ns)
        cls.t_unscaled = time.time()

    @classmethod
    def apply_rbac(cls):
        def edit(t):
            return t.replace("namespace: gpuscaler\n", "namespace: %s\n" % SYSTEM_NS)
        create_objects(cls.c, deploy_manifests("serviceaccount.yaml", "rbac.yaml", edit=edit))
        # the same bindings for the standby's ServiceAccount (test_7)
        binds = [d for d in deploy_manifests("rbac.yaml", edit=edit)
                 if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
        for d in binds:
            d["metadata"]["name"] += "-standby"
            for sub in d["subjects"]:
                if sub["kind"] == "ServiceAccount" and sub["name"] == "gpuscaler":
                    sub["name"] = "gpuscaler-standby"
        create_objects(cls.c, binds)

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            p.stop()
            shutil.rmtree(p.dir, ignore_errors=True)
        # the API server refused gpuscaler (under deploy/rbac.yaml) and the HPA controller
        # (under its bootstrap role) nothing
        reqs = cls.fk.requests()[0]
        refused = ["%s %s %s %s" % (r.get("user"), r["method"], r["path"], r["query"])
                   for r in reqs if r.get("status") == 403 and
                   r.get("user") in (GPUSCALER_USER, STANDBY_USER, HPA_USER) and
                   "fault" not in r]
        cls.metrics.close()
        cls.prom.close()
        cls.hpa_client.close()
        cls.c.close()
        cls.fk.stop()
        print("extmetrics e2e: %.1fs in all; %d API requests, %d refused to gpuscaler or the "
              "HPA controller" % (time.monotonic() - T0, len(reqs), len(refused)))
        if refused:
            raise AssertionError("refused under RBAC: %s" % refused[:5])

    @classmethod
    def available_cond(cls, want):
        st = cls.c.get("apiservices", APISERVICE).get("status") or {}
        for cond in st.get("conditions") or []:
            if cond["type"] == "Available" and (cond["status"] == "True") == want:
                return cond
        return None

    # ---- helpers -------------------------------------------------------------------

    def em_get(self, metric, selector=None, ns=None, client=None):
        """GET one external metric through the fake (the aggregator): (code, document)."""
        params = {"labelSelector": selector} if selector is not None else None
        code, _, body = (client or self.c).raw("GET", "%s/namespaces/%s/%s"
                                               % (EM, ns or self.ns, metric), params=params)
        return code, status_of(body)

    def direct(self, path, cert=None, headers=None, port=None):
        """GET against gpuscaler's own port (or another instance's), verifying its serving
        certificate."""
        ctx = ssl.create_default_context(cafile=self.serving_ca)
        if cert:
            ctx.load_cert_chain(*cert)
        conn = http.client.HTTPSConnection("127.0.0.1", port or self.port, context=ctx,
                                           timeout=10)
        try:
            conn.request("GET", path, headers=headers or {})
            r = conn.getresponse()
            return r.status, status_of(r.read())
        finally:
            conn.close()

    def desired(self, name):
        code, doc = self.em_get("gpuscaler_desired_replicas", "deployment=" + name)
        if code != 200:
            return None
        return hpaemu.milli_value(doc["items"][0]["value"]) / 1000.0

    def replicas(self, name):
        return self.c.get("deployments", name, self.ns)["spec"]["replicas"]

    def follow(self, name, hold, timeout):
        """Poll gpuscaler's desired count and the Deployment's replicas until they are equal
        and unchanged for hold seconds.  Returns (count, steps): steps lists each desired count
        gpuscaler served and the seconds until the Deployment had it (None: superseded)."""
        end = time.monotonic() + timeout
        steps, last, since = [], None, time.monotonic()
        while time.monotonic() < end:
            d, r = self.desired(name), self.replicas(name)
            now = time.monotonic()
            d = int(round(d)) if d is not None else None
            if d is not None and (not steps or steps[-1][0] != d):
                steps.append([d, now, None])
            if steps and steps[-1][2] is None and r == steps[-1][0]:
                steps[-1][2] = now
            if (d, r) != last:
                last, since = (d, r), now
            if d is not None and d == r and now - since >= hold:
                return d, [(v, None if ta is None else ta - ts) for v, ts, ta in steps]
            time.sleep(0.25)
        raise AssertionError("%s: gpuscaler and the HPA did not settle in %ds (last %s, "
                             "steps %s)" % (name, timeout, last, steps))

    def make(self, name, replicas, subnet, rate, annotations=None):
        self.c.create("deployments", deployment(name, replicas,
                                                dict(ANNOTATIONS, **(annotations or {})),
                                                self.metrics.port), self.ns)
        k = MiniKubelet(self.c, self.ns, name, self.metrics, subnet=subnet,
                        port=self.metrics.port)
        k.start()
        self.addCleanup(k.stop)
        self.metrics.set_rate(name, rate)
        return k

    # ---- scenarios -------------------------------------------------------------------

    def test_1_registration_discovery_and_availability(self):
        # before gpuscaler listened: FailedDiscoveryCheck, and the proxy refuses with 503
        self.assertEqual(self.down_cond["reason"], "FailedDiscoveryCheck")
        self.assertIn("failing or missing response from https://127.0.0.1:%d/apis/"
                      "external.metrics.k8s.io/v1beta1" % self.down_port, self.down_cond["message"])
        self.assertEqual((self.down_answer[0], self.down_answer[2]),
                         (503, b"service unavailable\n"))
        self.assertEqual((self.up_cond["reason"], self.up_cond["message"]),
                         ("Passed", "all checks passed"))
        print("APIService Available %.2fs after gpuscaler started" % self.available_after)
        # its first read of the front proxy's settings failed (setUpClass): read again in 1 s
        self.assertIn("reading kube-system/extension-apiserver-authentication failed: HTTP 500",
                      self.g.text())
        self.assertIn("read again in 1s", self.g.text())
        self.assertIn("read again in 8s", self.g.text())
        self.assertLess(self.available_after, 30)  # the next refresh: 60 s
        # and the pod was not Ready until it was read
        self.assertEqual(self.unready[0], 503)
        self.assertRegex(self.unready[1], r"^not ready \(caches synced, (leader|follower), "
                                          r"no front-proxy trust yet\)\n$")
        self.assertRegex(self.ready[1], r"^ok \(caches synced, (leader|follower)\)\n$")
        self.assertEqual(self.em_unready, (503, "not ready: no front-proxy trust yet"))
        self.assertEqual(self.em_ready, (200, "ok"))
        groups = {g["name"]: g for g in self.c.request("GET", "/apis")["groups"]}
        self.assertEqual(groups["external.metrics.k8s.io"]["preferredVersion"],
                         {"groupVersion": "external.metrics.k8s.io/v1beta1",
                          "version": "v1beta1"})
        self.assertEqual(self.c.request("GET", "/apis/external.metrics.k8s.io")["kind"],
                         "APIGroup")
        # the per-version list is gpuscaler's, through the aggregator, as the HPA's identity
        for client in (self.c, self.hpa_client):
            rl = client.request("GET", EM)
            self.assertEqual((rl["kind"], rl["groupVersion"]),
                             ("APIResourceList", "external.metrics.k8s.io/v1beta1"))
            self.assertEqual(sorted(r["name"] for r in rl["resources"]), sorted(METRICS))
            for r in rl["resources"]:
                self.assertEqual((r["namespaced"], r["kind"], r["verbs"]),
                                 (True, "ExternalMetricValueList", ["get"]))
        # the availability probes reached gpuscaler as system:kube-aggregator (system:masters)
        self.assertIn("serving external.metrics.k8s.io/v1beta1 on 127.0.0.1:%d" % self.port,
                      self.g.text())

    def test_2_metric_values_through_the_aggregator(self):
        self.make("llama", 2, subnet=14, rate=10)
        t = time.monotonic()
        wait_for(lambda: self.em_get("gpuscaler_requests_per_gpu", "deployment=llama")[0] == 200,
                 30, what="gpuscaler_requests_per_gpu for llama")
        print("first measured value served %.1fs after the Deployment was created"
              % (time.monotonic() - t))
        code, doc = self.em_get("gpuscaler_desired_replicas", "deployment=llama")
        self.assertEqual(code, 200, doc)
        self.assertEqual((doc["kind"], doc["apiVersion"]),
                         ("ExternalMetricValueList", "external.metrics.k8s.io/v1beta1"))
        self.assertEqual(len(doc["items"]), 1, doc)
        it = doc["items"][0]
        self.assertEqual(it["metricName"], "gpuscaler_desired_replicas")
        self.assertEqual(it["metricLabels"].get("deployment"), "llama")
        self.assertNotIn("namespace", it["metricLabels"])
        self.assertRegex(it["timestamp"], RFC3339)
        ts = time.mktime(time.strptime(it["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        self.assertLess(abs(time.time() - ts), 30, it["timestamp"])
        self.assertRegex(it["value"], r"^-?\d+[numkMGTPE]?$")  # canonical Quantity
        self.assertEqual(hpaemu.milli_value(it["value"]) % 1000, 0, "replicas are whole")
        self.assertNotIn("window", it, "a replica count is not a rate")
        self.assertGreaterEqual(hpaemu.milli_value(it["value"]), 1000)
        # the metric name is matched case-insensitively
        code, doc2 = self.em_get("Gpuscaler_Desired_Replicas", "deployment=llama")
        self.assertEqual(code, 200, doc2)
        self.assertEqual([i["metricLabels"]["deployment"] for i in doc2["items"]], ["llama"])
        self.assertEqual(doc2["items"][0]["value"], it["value"])
        # the Deployment's own labels are metricLabels too, so an HPA can select on them
        self.assertEqual(it["metricLabels"], {"app": "llama", "deployment": "llama"})
        code, by_app = self.em_get("gpuscaler_desired_replicas", "app=llama")
        self.assertEqual(code, 200, by_app)
        self.assertEqual([i["metricLabels"]["deployment"] for i in by_app["items"]], ["llama"])
        # ... and follow the Deployment's edits
        self.c.patch("deployments", "llama", {"metadata": {"labels": {"team": "ml-infra"}}},
                     self.ns)
        code, by_team = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(
            self.em_get("gpuscaler_desired_replicas", "team=ml-infra,app=llama")), 10,
            what="the new label served")
        self.assertEqual(by_team["items"][0]["metricLabels"],
                         {"app": "llama", "team": "ml-infra", "deployment": "llama"})
        # the rates carry their window: scrape.rate-window for scraped pods, the PromQL
        # queries' [2m] for a Deployment whose metrics come from Prometheus
        code, rpg = self.em_get("gpuscaler_requests_per_gpu", "deployment=llama")
        self.assertEqual(code, 200, rpg)
        self.assertEqual(rpg["items"][0].get("window"), 3, rpg)
        self.make("llama-prom", 2, subnet=19, rate=0,
                  annotations={"gpuscaler.io/metrics-source": "prometheus"})
        code, rpg = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(
            self.em_get("gpuscaler_requests_per_gpu", "deployment=llama-prom")), 30,
            what="gpuscaler_requests_per_gpu for llama-prom")
        self.assertEqual(rpg["items"][0].get("window"), 120, rpg)
        self.assertEqual(hpaemu.milli_value(rpg["items"][0]["value"]), 10000, rpg)  # 20 / 2
        self.c.delete("deployments", "llama-prom", self.ns)
        # unknown metric, namespace, or a selector matching nothing: Status 404
        for metric, ns, sel in (("gpuscaler_nonsense", None, "deployment=llama"),
                                ("gpuscaler_desired_replicas", "kube-public",
                                 "deployment=llama"),
                                ("gpuscaler_desired_replicas", None, "deployment=nope")):
            code, st = self.em_get(metric, sel, ns)
            self.assertEqual(code, 404, (metric, ns, sel, st))
            self.assertEqual((st.get("kind"), st.get("code"), st.get("reason")),
                             ("Status", 404, "NotFound"), st)
        # a selector that does not parse: 400
        code, st = self.em_get("gpuscaler_desired_replicas", "deployment in (")
        self.assertEqual((code, st.get("reason")), (400, "BadRequest"), st)
        # latency of the aggregated path against the direct one
        via, direct = [], []
        path = "%s/namespaces/%s/gpuscaler_desired_replicas?labelSelector=deployment%%3Dllama" \
            % (EM, self.ns)
        for _ in range(20):
            t = time.monotonic()
            self.assertEqual(self.em_get("gpuscaler_desired_replicas", "deployment=llama",
                                         client=self.hpa_client)[0], 200)
            via.append(time.monotonic() - t)
            t = time.monotonic()
            self.assertEqual(self.direct(path, self.certs["valid"],
                                         {"X-Remote-User": HPA_USER})[0], 200)
            direct.append(time.monotonic() - t)
        print("GET gpuscaler_desired_replicas: median %.1f ms through the aggregator (keep-alive "
              "client, new TLS to gpuscaler), %.1f ms direct (new TLS each)"
              % (statistics.median(via) * 1000, statistics.median(direct) * 1000))

    def test_3_hpa_follows_gpuscaler(self):
        k = self.make("qwen", 2, subnet=15, rate=10)
        self.c.create("horizontalpodautoscalers", {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "qwen"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "qwen"},
                     "minReplicas": 1, "maxReplicas": 8,
                     "metrics": [{"type": "External", "external": {
                         "metric": {"name": "gpuscaler_desired_replicas",
                                    "selector": {"matchLabels": {"deployment": "qwen"}}},
                         "target": {"type": "AverageValue", "averageValue": "1"}}}],
                     "behavior": HPA_BEHAVIOR}}, self.ns)
        hpa = hpaemu.HPAController(self.hpa_client, self.ns, "qwen", sync_period=1.0).start()
        self.addCleanup(hpa.stop)
        wait_for(lambda: self.desired("qwen") == 2, 30, what="gpuscaler's first decision (2)")
        time.sleep(2.5)
        self.assertEqual(self.replicas("qwen"), 2, "the HPA moved a Deployment at its target")
        # load up: gpuscaler decides, the HPA applies it
        t0 = time.monotonic()
        self.metrics.set_rate("qwen", 38)    # 19 req/s per GPU against a target of 8
        wait_for(lambda: (lambda v: v and v > 2)(self.desired("qwen")), 30,
                 what="gpuscaler raising gpuscaler_desired_replicas")
        t_decided = time.monotonic()
        # gpuscaler may take more than one step while the load spreads over the new pods; the
        # HPA must follow each step and end on the count gpuscaler settles on
        want, steps = self.follow("qwen", hold=4.0, timeout=45)
        t_settled = time.monotonic()
        self.assertGreaterEqual(want, math.ceil(38 / 8.0), "38 req/s at 8 req/s per GPU")
        lags = [lag for _, lag in steps if lag is not None]
        self.assertTrue(lags, steps)
        self.assertLess(max(lags), 5.0, "the HPA (1 s sync) lagged gpuscaler: %s" % steps)
        self.assertEqual(self.g.metric("gpuscaler_desired_replicas",
                                       '{namespace="%s",deployment="qwen"}' % self.ns), want)
        st = self.c.get("horizontalpodautoscalers", "qwen", self.ns)["status"]
        self.assertEqual((st["currentReplicas"], st["desiredReplicas"]), (want, want))
        self.assertEqual(st["currentMetrics"][0]["external"]["current"]["averageValue"], "1")
        conds = {c["type"]: c for c in st["conditions"]}
        self.assertEqual((conds["ScalingActive"]["status"], conds["ScalingActive"]["reason"]),
                         ("True", "ValidMetricFound"))
        print("scale-out: gpuscaler raised desired %.1fs after the load rose; steps (desired, "
              "seconds until the HPA applied it): %s; settled on %d replicas %.1fs after the "
              "load rose (4 s hold included)"
              % (t_decided - t0, [(d, None if lag is None else round(lag, 1)) for d, lag in steps],
                 want, t_settled - t0))
        # a metric the HPA cannot read: it holds the scale although gpuscaler now wants less
        self.fk.fault({"action": "error", "status": 503, "user": HPA_USER,
                       "path": "^%s/namespaces/%s/" % (EM, self.ns), "count": None})
        self.metrics.set_rate("qwen", 4)
        wait_for(lambda: (lambda v: v is not None and v < want)(self.desired("qwen")), 30,
                 what="gpuscaler lowering desired")
        time.sleep(3)
        self.assertEqual(self.replicas("qwen"), want, "scaled on a failed metric")
        failed = [r for r in hpa.records() if "503" in r.get("error", "")]
        self.assertTrue(failed, hpa.records()[-3:])
        self.fk.clear_faults()
        # load down: the HPA follows gpuscaler down to 1, never up again
        t1 = time.monotonic()
        wait_for(lambda: self.replicas("qwen") == 1 and self.desired("qwen") == 1, 60,
                 what="scale-in to 1")
        hist = wait_for(lambda: (lambda h: h if h[-1] == 1 else None)(k.replicas_changes()), 5,
                        what="the kubelet seeing 1 replica")
        tail = hist[hist.index(max(hist)):]
        self.assertEqual(tail, sorted(tail, reverse=True), "flapped: %s" % hist)
        print("scale-in to 1 %.1fs after the metric came back; replica history %s"
              % (time.monotonic() - t1, hist))
        recs = hpa.records()
        print("hpaemu: %d syncs, %d external metric GETs, %d failed syncs, %d rescales"
              % (len(recs), hpa.metric_requests, len([r for r in recs if r.get("error")]),
                 len([r for r in recs if r.get("rescaled")])))
        # gpuscaler never writes /scale in this mode; the HPA did, with its own identity
        reqs, _ = self.fk.requests()
        scale_writes = [r for r in reqs if r.get("resource") == "deployments" and
                        r.get("subresource") == "scale" and r["verb"] in ("patch", "update")]
        self.assertEqual([r for r in scale_writes if r.get("user") == GPUSCALER_USER], [])
        self.assertTrue([r for r in scale_writes if r.get("user") == HPA_USER and
                         r["status"] == 200])
        proxied = [r for r in reqs if r.get("aggregated") == APISERVICE and
                   r.get("user") == HPA_USER and "/namespaces/" in r["path"]]
        self.assertTrue(proxied and all(r["verb"] == "list" for r in proxied))
        self.assertTrue(any(r["status"] == 200 for r in proxied))
        # the emulated controller's events
        ev = [e for e in self.c.list("events", self.ns)["items"]
              if e.get("involvedObject", {}).get("name") == "qwen" and
              e.get("involvedObject", {}).get("kind") == "HorizontalPodAutoscaler"]
        self.assertIn("New size: %d; reason: external metric gpuscaler_desired_replicas" % want,
                      " ".join(e["message"] for e in ev if e["reason"] == "SuccessfulRescale"))
        self.assertTrue([e for e in ev if e["reason"] == "FailedGetExternalMetric"])
        # gpuscaler authorized the HPA's reads with SubjectAccessReviews of its own
        sars = [r for r in reqs if r.get("resource") == "subjectaccessreviews"]
        self.assertTrue(sars and all(r["user"] == GPUSCALER_USER for r in sars))
        self.assertTrue(self.g.alive())

    # Client certificates signed by the cluster's client CA (client-ca-file in the
    # extension-apiserver-authentication ConfigMap) are identities: CN the user, O the groups,
    # authorized by SubjectAccessReview; a front-proxy user's extra reaches that review too.
    def test_4_client_certificates_and_extra(self):
        self.make("phi", 1, subnet=17, rate=5)
        wait_for(lambda: self.em_get("gpuscaler_desired_replicas", "deployment=phi")[0] == 200,
                 30, what="a value for phi")
        pki = os.path.join(self.fk.tmpdir, "e2e-pki")
        client_ca = (self.fk.pki["ca"], self.fk.pki["ca_key"])
        reader = harness.make_cert(pki, client_ca, "cert-reader", "cert-reader",
                                   orgs=("cert-readers",))
        stranger = harness.make_cert(pki, client_ca, "cert-stranger", "cert-stranger")
        self.fk.set_sar(rules=[
            {"user": "cert-reader", "groupMember": "cert-readers", "allowed": True},
            {"user": "scoped-user", "extra": {"scopes": "metrics"}, "allowed": True},
            {"user": "scoped-user", "allowed": False, "reason": "needs scope metrics"},
        ])
        self.addCleanup(self.fk.set_sar, rules=[])
        path = "%s/namespaces/%s/gpuscaler_desired_replicas?labelSelector=deployment%%3Dphi" % (
            EM, self.ns)
        _, before = self.fk.requests()
        # gpuscaler reads the ConfigMap every 60 s and at start: it was there at start
        code, doc = self.direct(path, reader)
        self.assertEqual(code, 200, doc)
        self.assertEqual(doc["items"][0]["metricLabels"]["deployment"], "phi")
        code, st = self.direct(path, stranger)
        self.assertEqual((code, st.get("reason")), (403, "Forbidden"), st)
        self.assertIn('User "cert-stranger" cannot list', st.get("message", ""))
        # a client certificate is no proxy: its X-Remote-User is ignored
        code, st = self.direct(path, stranger, {"X-Remote-User": GPUSCALER_USER,
                                                "X-Remote-Group": "system:masters"})
        self.assertEqual(code, 403, st)
        # the front proxy's extra headers: allowed only with the scope the rule asks for
        proxy = self.certs["valid"]
        code, doc = self.direct(path, proxy, {"X-Remote-User": "scoped-user",
                                              "X-Remote-Extra-Scopes": "metrics"})
        self.assertEqual(code, 200, doc)
        code, st = self.direct(path, proxy, {"X-Remote-User": "scoped-user",
                                             "X-Remote-Extra-Scopes": "logs"})
        self.assertEqual(code, 403, st)
        self.assertIn("needs scope metrics", st.get("message", ""))
        reqs, _ = self.fk.requests(before)
        sars = [r for r in reqs if r.get("resource") == "subjectaccessreviews"]
        self.assertGreaterEqual(len(sars), 4, sars)
        self.assertTrue(all(r["user"] == GPUSCALER_USER and r["status"] == 201 for r in sars))

    # A decision that merely held the replica count because the metrics are failing is not
    # served: 404, so the HPA holds (docs/external-metrics.md, "Stale data is not served").
    def test_5_stale_metrics_are_not_served(self):
        k = self.make("mixtral", 3, subnet=16, rate=10)
        wait_for(lambda: self.em_get("gpuscaler_requests_per_gpu", "deployment=mixtral")[0] == 200,
                 30, what="a value from valid metrics")
        for _, ip in k.pods:
            self.metrics.set_mode(ip, "garbage")
        t = time.monotonic()
        code, st = wait_for(lambda: (lambda r: r if r[0] == 404 else None)(
            self.em_get("gpuscaler_desired_replicas", "deployment=mixtral")), 20,
            what="a 404 once the pods' metrics are garbage")
        print("stale: 404 %.1fs after the metrics broke: %s" % (time.monotonic() - t,
                                                               st.get("message")))
        self.assertIn("stale", st.get("message", ""))
        for _, ip in k.pods:
            self.metrics.set_mode(ip, None)
        wait_for(lambda: self.em_get("gpuscaler_desired_replicas",
                                     "deployment=mixtral")[0] == 200, 30,
                 what="served again once the metrics are back")

    def test_6_paused_serves_the_current_count(self):
        """gpuscaler.io/paused in HPA mode: the desired count served is the current one, so the
        HPA holds too; unpaused, the policy's count is served."""
        self.make("frozen", 2, subnet=18, rate=38,    # 19 req/s per GPU: the policy wants 5
                  annotations={"gpuscaler.io/paused": "true"})
        wait_for(lambda: self.desired("frozen") is not None, 30, what="a served value")
        t_end = time.monotonic() + 6                  # past the 4 s sustained window
        while time.monotonic() < t_end:
            self.assertEqual(self.desired("frozen"), 2.0)
            time.sleep(0.5)
        self.c.patch("deployments", "frozen",
                     {"metadata": {"annotations": {"gpuscaler.io/paused": "false"}}}, self.ns)
        wait_for(lambda: self.desired("frozen") == 5.0, 30, what="unpaused: 5 served")


    def test_7_a_standby_serves_the_leaders_decisions(self):
        """Two replicas with leader election, as the chart runs them: the aggregator reaches
        either through the Service, so the standby serves the leader's decisions (from their
        gpuscaler.io/status annotations), not its own, whose clocks and forecaster, kept warm
        for a takeover, can lead or lag the leader's; an HPA reading both would flip between
        them. Here the two are made to differ outright: the standby's config defaults
        target-utilization to 0.4, the leader's to 0.8. Once the leader is killed and its
        Lease expires, the standby serves its own. A Deployment with invalid annotations in a
        selector makes the whole selector stale (404) on both: a sum without it would
        under-count. While the standby's own watches fail for longer than 30 s, the status
        annotations it has may be out of date, so it serves the Deployment as stale (the
        leader still serves its count), and serves the count again once they work."""
        ns = self.ns + "-ha"
        self.c.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": ns}})
        procs = {}

        def start(ident, util, kubeconfig):
            cfg = ("decision-interval: 1s\n"
                   "leader-election: {enabled: true, namespace: %s, lease-name: gpuscaler,\n"
                   "                  lease-duration: 4s, renew-deadline: 3s, retry-period: 500ms}\n"
                   "scrape: {interval: 500ms, timeout: 1s, rate-window: 3s}\n"
                   "namespaces: [%s]\n"
                   "defaults: {target-utilization: \"%s\", scale-in-utilization: \"0.2\"}\n"
                   % (SYSTEM_NS, ns, util))
            g = Gpuscaler(kubeconfig, cfg, [
                "--external-metrics=true", "--external-metrics-addr",
                "127.0.0.1:0", "--tls-cert-file", self.serving[0],
                "--tls-key-file", self.serving[1]], ident=ident)
            self.procs.append(g)
            procs[ident] = g
            return g

        def served(ident, selector):
            """(code, desired count or the Status message) from one replica, asked as the
            aggregator asks (front-proxy certificate, the HPA controller's identity)."""
            code, doc = self.direct("%s/namespaces/%s/gpuscaler_desired_replicas?"
                                    "labelSelector=%s" % (EM, ns, selector),
                                    self.certs["valid"], {"X-Remote-User": HPA_USER,
                                                          "X-Remote-Group": "system:"
                                                          "serviceaccounts"},
                                    port=procs[ident].port("extmetrics"))
            if code != 200:
                return code, doc.get("message")
            return code, sum(hpaemu.milli_value(i["value"]) for i in doc["items"]) / 1000.0

        def own(g):
            return g.metric("gpuscaler_desired_replicas",
                            '{namespace="%s",deployment="ha-llm"}' % ns)

        def lease_holder():
            return (self.c.get_or_none("leases", "gpuscaler", SYSTEM_NS) or {}).get(
                "spec", {}).get("holderIdentity")

        def status_desired():
            d = self.c.get("deployments", "ha-llm", ns)
            st = (d["metadata"].get("annotations") or {}).get("gpuscaler.io/status")
            return json.loads(st).get("desired") if st else None

        try:
            self.c.create("deployments", deployment("ha-llm", 3, ANNOTATIONS,
                                                    self.metrics.port), ns)
            self.c.create("deployments", deployment("ha-bad", 1, dict(
                ANNOTATIONS, **{"gpuscaler.io/capacity-per-gpu": "ten"}), self.metrics.port),
                ns)
            for n in ("ha-llm", "ha-bad"):
                self.c.patch("deployments", n, {"metadata": {"labels": {"tier": "ha"}}}, ns)
            k = MiniKubelet(self.c, ns, "ha-llm", self.metrics, subnet=20,
                            port=self.metrics.port)
            k.start()
            self.addCleanup(k.stop)
            self.metrics.set_rate("ha-llm", 20)  # 3 replicas at 0.8 (2.5), 5 at 0.4
            a = start("ha-a", "0.8", self.gpuscaler_kubeconfig)
            wait_for(lambda: lease_holder() == "ha-a", 15, what="ha-a leading")
            b = start("ha-b", "0.4", self.standby_kubeconfig)
            wait_for(lambda: status_desired() == 3 and own(a) == 3 and own(b) == 5, 40,
                     what="the leader deciding 3, the standby 5 for itself")
            self.assertEqual(self.replicas_in(ns, "ha-llm"), 3)  # external-metric: no write
            t_end = time.monotonic() + 4
            while time.monotonic() < t_end:
                self.assertEqual(served("ha-a", "deployment%3Dha-llm"), (200, 3.0))
                self.assertEqual(served("ha-b", "deployment%3Dha-llm"), (200, 3.0),
                                 "the standby served its own decision (%s)" % own(b))
                time.sleep(0.5)
            for ident in ("ha-a", "ha-b"):
                code, msg = served(ident, "tier%3Dha")
                self.assertEqual(code, 404, msg)
                self.assertIn('"ha-bad"', msg)
                self.assertIn("stale", msg)
            # the standby's Deployment (and pod) watches fail; the leader's work
            self.fk.fault({"action": "error", "status": 500, "user": STANDBY_USER,
                           "resource": ["deployments", "pods"], "verb": ["list", "watch"],
                           "count": None}, {"action": "drop-watches"})
            self.addCleanup(self.fk.clear_faults)
            t_fail = time.monotonic()
            code, msg = wait_for(lambda: (lambda r: r if r[0] != 200 else None)(
                served("ha-b", "deployment%3Dha-llm")), 45, interval=0.5,
                what="the standby serving ha-llm as stale on its failing watches")
            took = time.monotonic() - t_fail
            print("standby: ha-llm served as stale %.1fs after its watches failed" % took)
            self.assertGreaterEqual(took, 25)
            self.assertEqual(code, 404, msg)
            self.assertIn('"ha-llm"', msg)
            self.assertIn("stale", msg)
            self.assertEqual(served("ha-a", "deployment%3Dha-llm"), (200, 3.0))
            # logged at the standby's next tick (the view reads the failing time itself)
            wait_for(lambda: "the Deployments it covers hold their replicas" in b.text(), 5,
                     what="the standby's hold logged")
            self.fk.clear_faults()
            t_back, last = time.monotonic(), []

            def back():
                last[:] = [served("ha-b", "deployment%3Dha-llm")]
                return last[0] == (200, 3.0)
            try:
                # its lists retry after a backoff of up to 30 s, jittered up to twice that
                wait_for(back, 90, interval=0.5, what="the standby serving the leader's count")
            except AssertionError as e:
                raise AssertionError("%s; it served %r; its log:\n%s"
                                     % (e, last, b.text()[-4000:])) from e
            print("standby: the count served again %.1fs after its watches worked"
                  % (time.monotonic() - t_back))
            a.stop(signal.SIGKILL)
            t_kill = time.monotonic()
            wait_for(lambda: served("ha-b", "deployment%3Dha-llm") == (200, 5.0), 15,
                     interval=0.25, what="the standby serving its own count once the leader "
                                         "is gone")
            print("standby: its own count served %.1fs after the leader was killed (lease 4s)"
                  % (time.monotonic() - t_kill))
            wait_for(lambda: lease_holder() == "ha-b", 10, what="ha-b leading")
            self.assertEqual(served("ha-b", "deployment%3Dha-llm"), (200, 5.0))
        finally:
            for g in procs.values():
                g.stop()

    def test_8_hpa_settings_are_checked(self):
        """The HPA applies gpuscaler's count in this mode, and what keeps it from doing so is
        told where users look: an HPASettings Warning on the Deployment (and a log line). An
        HPA that caps below max-replicas with the default 5-minute scale-down window and
        scales up by the least of the default policies (selectPolicy Min, the policies filled
        in by the API server), and a
        Deployment no HPA targets (made at the start of the class; told at the list made 30 s
        after the first that saw none, not before: one made just after its Deployment is not
        missing), each get one; the documented HPA
        gets none. Each HPA exists before its Deployment, which gpuscaler then checks within a
        tick, not at its next minute's list."""
        def hpa(name, max_replicas, behavior=None):
            spec = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": name},
                    "minReplicas": 1, "maxReplicas": max_replicas,
                    "metrics": [{"type": "External", "external": {
                        "metric": {"name": "gpuscaler_desired_replicas",
                                   "selector": {"matchLabels": {"deployment": name}}},
                        "target": {"type": "AverageValue", "averageValue": "1"}}}]}
            if behavior:
                spec["behavior"] = behavior
            self.c.create("horizontalpodautoscalers", {
                "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": name}, "spec": spec}, self.ns)
            self.addCleanup(lambda: self.c.delete("horizontalpodautoscalers", name, self.ns))

        def warnings(name):
            return [e["message"] for e in self.c.list("events", self.ns)["items"]
                    if e.get("reason") == "HPASettings" and
                    e["involvedObject"]["name"] == name]

        # FAST_ANNOTATIONS: max-replicas 8
        hpa("capped", 4, {"scaleUp": {"selectPolicy": "Min"}})
        hpa("calm", 8, HPA_BEHAVIOR)                  # the documented one
        t0 = time.monotonic()
        for i, name in enumerate(("capped", "calm")):
            self.make(name, 1, subnet=21 + i, rate=5)
        got = wait_for(lambda: warnings("capped"), 20, what="an HPASettings Warning on capped")
        took = time.monotonic() - t0
        print("HPASettings told %.1fs after the Deployment was created: %s" % (took, got[0]))
        self.assertIn("the HorizontalPodAutoscaler capped: its maxReplicas 4 is below "
                      "max-replicas 8: gpuscaler's counts above 4 are not applied", got[0])
        self.assertIn("its scale-down stabilization window (300 s, the default)", got[0])
        # 1 -> 2 -> 4 -> 8 under Min; 1 -> 5 -> 8 under Max
        self.assertIn("under its scaleUp policies with selectPolicy Min it takes 30 s to go from "
                      "1 to 8 replicas (15 s under the defaults)", got[0])
        self.assertLess(took, 15, "checked at the next minute's list, not within a tick")
        lone = wait_for(lambda: [e for e in self.c.list("events", self.ns)["items"]
                                 if e.get("reason") == "HPASettings" and
                                 e["involvedObject"]["name"] == "unscaled"], 45, interval=1,
                        what="an HPASettings Warning on unscaled")
        told = calendar.timegm(time.strptime(lone[0]["firstTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))
        print("no HPA told %ds after the Deployment was created" % (told - self.t_unscaled))
        self.assertGreaterEqual(told, int(self.t_unscaled) + 30, "told before the grace")
        self.assertIn("no HorizontalPodAutoscaler targets this Deployment", lone[0]["message"])
        self.assertIn("level=warn", [ln for ln in self.g.text().splitlines()
                                     if "deployment=capped" in ln and
                                     "maxReplicas 4" in ln][0])
        time.sleep(2)
        self.assertEqual(warnings("calm"), [])

    def test_9_a_parked_deployment_is_not_served(self):
        """A Deployment scaled to 0 by hand under min-replicas 1 is parked, as the HPA
        leaves it; its 0 is not served (404 stale): served, an HPA reading it as the count is
        raised by hand again would scale that count down to its minReplicas."""
        self.make("parked", 1, subnet=24, rate=5)
        wait_for(lambda: self.desired("parked") == 1, 30, what="a served count of 1")
        self.c.patch("deployments", "parked", {"spec": {"replicas": 0}}, self.ns)
        code, st = wait_for(lambda: (lambda r: r if r[0] == 404 else None)(
            self.em_get("gpuscaler_desired_replicas", "deployment=parked")), 20,
            what="404 once parked")
        self.assertIn("stale", st.get("message", ""))
        self.assertIn("Parked", self.c.get("deployments", "parked", self.ns)["metadata"]
                      ["annotations"].get("gpuscaler.io/status", ""))
        t_end = time.monotonic() + 3
        while time.monotonic() < t_end:
            self.assertEqual(self.em_get("gpuscaler_desired_replicas",
                                         "deployment=parked")[0], 404)
            time.sleep(0.5)
        self.c.patch("deployments", "parked", {"spec": {"replicas": 2}}, self.ns)
        wait_for(lambda: self.desired("parked") == 2, 30, what="served again once resumed")

    def test_9b_front_proxy_settings_forbidden_then_absent(self):
        """A replica that may not read kube-system/extension-apiserver-authentication (403:
        the RoleBinding to extension-apiserver-authentication-reader missing) is not Ready and
        says how to fix it; a cluster without that ConfigMap (404: no front proxy) trusts none,
        as the apiserver's delegated authentication reads it, and is Ready: the aggregator
        cannot reach it, which it says, but it serves clients of its own."""
        cm = {"action": "error", "resource": "configmaps", "namespace": "kube-system",
              "name": "extension-apiserver-authentication", "user": STANDBY_USER, "count": 1}
        self.fk.fault(dict(cm, status=403))
        self.fk.fault(dict(cm, status=404))
        # a namespace with nothing in it (it does not exist): this replica has no leader
        # election and must not decide for the tests' Deployments
        g = Gpuscaler(self.standby_kubeconfig, CONFIG + "namespaces: [%s-none]\n" % self.ns, [
            "--external-metrics=true", "--external-metrics-addr", "127.0.0.1:0",
            "--tls-cert-file", self.serving[0], "--tls-key-file", self.serving[1]],
            ident="gpuscaler-no-front-proxy")
        self.procs.append(g)
        try:
            wait_for(lambda: "read again in 1s" in g.text(), 20, what="the 403 logged")
            self.assertIn("HTTP 403", g.text())
            self.assertIn("needs the Role extension-apiserver-authentication-reader in "
                          "kube-system", g.text())
            self.assertIn("and the pod is not Ready", g.text())
            ready = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(
                g.get("/readyz", g.health_port)), 20, what="Ready once the 404 is read")
            self.assertRegex(ready[1], r"^ok \(caches synced, (leader|follower)\)\n$")
            self.assertIn("kube-system/extension-apiserver-authentication does not exist: no "
                          "front proxy is trusted", g.text())
            # no front proxy trusted: the aggregator's certificate asserts no one
            code, _ = self.direct("%s/namespaces/%s-none/gpuscaler_desired_replicas" % (EM, self.ns),
                                  self.certs["valid"], {"X-Remote-User": HPA_USER},
                                  port=g.port("extmetrics"))
            self.assertEqual(code, 401)
        finally:
            g.stop()

    def test_9c_request_bodies_are_small(self):
        """The three listeners serve GETs only: a request body over 4 KiB is refused with 413
        as its headers arrive, before authentication, and the answer says the limit (httpd's
        default of 1 MiB was buffered per connection first: the metrics port answered a POST
        of 5000 bytes 200, the external metrics port 405)."""
        def post(port, path, tls=False):
            if tls:
                ctx = ssl.create_default_context(cafile=self.serving_ca)
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
            else:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("POST", path, body=b"x" * 5000,
                             headers={"Content-Type": "text/plain"})
                r = conn.getresponse()
                return r.status, r.read().decode()
            finally:
                conn.close()
        for port, path, tls in ((self.g.metrics_port, "/metrics", False),
                                (self.g.health_port, "/healthz", False),
                                (self.port, EM, True)):
            code, body = post(port, path, tls)
            self.assertEqual(code, 413, (port, path, body[:200]))
            self.assertIn("at most 4096 bytes", body)
        self.assertTrue(self.g.alive())

    def replicas_in(self, ns, name):
        return self.c.get("deployments", name, ns)["spec"]["replicas"]


if __name__ == "__main__":
    import testsummary
    r = unittest.main(verbosity=2, exit=False).result
    passed, failed, skipped, _ = testsummary.counts(r)
    print("extmetrics e2e: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.exit(0 if r.wasSuccessful() and r.testsRun > 0 else 1)

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Tests of fakekube, the fake kube-apiserver of gpuscaler's e2e tests, over real HTTPS through
kubeclient.py: authentication, CRUD and selectors, conflicts and validation, the scale
subresource, watch semantics (resume, bookmarks, timeouts, 410, selector leave/enter), fault
injection and restarts, leases, events, discovery.  Every server is started by PID and killed.

Run: /usr/bin/python3 e2e/test_fakekube.py   (meson test 'fakekube')
"""

import base64
import datetime
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import unittest

E2E = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, E2E)

from fakekube import harness, server  # noqa: E402
from fakekube import store as store_mod  # noqa: E402
from fakekube.kubeclient import ApiError, Client, KubeConfig, WatchBroken, wait_for  # noqa: E402

FK = None   # the shared server (TLS, token + cert kubeconfigs, 0.3 s bookmarks)
_ns_counter = [0]


def setUpModule():
    global FK
    FK = harness.start(bookmark_interval="0.3s",
                       users=(("e2e-admin", ("system:masters",)),
                              ("alice", ("team-a", "team-b"))))


def tearDownModule():
    if FK is not None:
        FK.stop()


def deployment(name, labels=None, replicas=1, selector=None):
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"replicas": replicas,
                     "selector": selector or {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)},
                                  "spec": {"containers": [{"name": "server",
                                                           "image": "vllm/vllm-openai:v0.6.0"}]}}}}


def pod(name, labels=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}


def cm(name, labels=None, data=None):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels or {}}, "data": data or {"k": "v"}}


class Base(unittest.TestCase):
    def setUp(self):
        self.c = FK.client(max_retries=0)
        _ns_counter[0] += 1
        self.ns = "t%d-%s" % (_ns_counter[0], self._testMethodName.replace("_", "-")[5:30]
                              .strip("-").lower())
        self.c.create("namespaces", {"metadata": {"name": self.ns}})

    def tearDown(self):
        self.c.close()

    def write_after(self, since, verb, **match):
        """The newest successful write of `verb` logged after seq `since` whose fields equal
        match. The fake logs a request after it has answered it, so this waits for it (at most
        5 s)."""
        end = time.time() + 5
        while True:
            got = [w for w in FK.writes(since, **match)["writes"] if w["verb"] == verb]
            if got or time.time() > end:
                self.assertTrue(got, "no %s logged after seq %d for %s" % (verb, since, match))
                return got[-1]
            time.sleep(0.02)

    def assertApiError(self, code, reason, fn, *args, **kw):
        with self.assertRaises(ApiError) as cm_:
            fn(*args, **kw)
        e = cm_.exception
        self.assertEqual(e.code, code, e)
        self.assertEqual(e.reason, reason, e)
        st = e.status
        self.assertEqual(st["kind"], "Status")
        self.assertEqual(st["apiVersion"], "v1")
        self.assertEqual(st["metadata"], {})
        self.assertEqual(st["status"], "Failure")
        self.assertEqual(st["code"], code)
        return e


class TestAuth(Base):
    def test_token_and_client_cert(self):
        who = self.c.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                             {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}})
        self.assertEqual(who["spec"]["user"], "e2e-admin")
        self.assertTrue(who["status"]["allowed"])
        cc = FK.client(FK.cert_kubeconfig)
        self.assertEqual(KubeConfig.load(FK.cert_kubeconfig).bearer(), None)
        who = cc.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                         {"spec": {"nonResourceAttributes": {"verb": "get", "path": "/x"}}})
        self.assertEqual(who["spec"]["user"], "e2e-admin")
        self.assertIn("system:masters", who["spec"]["groups"])
        cc.close()
        # A second client certificate: CN is the user, every O a group.
        cert, key = FK.pki["clients"]["alice"]
        path = harness.write_kubeconfig(os.path.join(FK.tmpdir, "alice.yaml"), FK.url,
                                        ca_file=FK.pki["ca"], cert_file=cert, key_file=key)
        ac = Client.from_kubeconfig(path)
        who = ac.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                         {"spec": {"resourceAttributes": {"verb": "list", "resource": "pods"}}})
        self.assertEqual(who["spec"]["user"], "alice")
        self.assertEqual(who["spec"]["groups"], ["team-a", "team-b", "system:authenticated"])
        ac.close()

    def test_rejected_without_credentials(self):
        ctx = ssl.create_default_context(cafile=FK.pki["ca"])
        for headers in ({}, {"Authorization": "Bearer wrong-token"}):
            conn = http.client.HTTPSConnection("127.0.0.1", FK.port, context=ctx, timeout=5)
            conn.request("GET", "/api/v1/namespaces", headers=headers)
            r = conn.getresponse()
            body = json.loads(r.read())
            conn.close()
            self.assertEqual(r.status, 401)
            self.assertEqual(r.getheader("Content-Type"), "application/json")
            self.assertEqual(body, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Failure", "message": "Unauthorized",
                                    "reason": "Unauthorized", "code": 401})
        # Health endpoints need no credentials; the control API is not reachable with a
        # Kubernetes token.
        conn = http.client.HTTPSConnection("127.0.0.1", FK.port, context=ctx, timeout=5)
        conn.request("GET", "/readyz")
        r = conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"ok"))
        conn.request("GET", "/fake/state", headers={"Authorization": "Bearer " + FK.token})
        r = conn.getresponse()
        r.read()
        self.assertEqual(r.status, 401)
        conn.close()

    def test_token_review_and_sar(self):
        tr = self.c.create("tokenreviews", {"apiVersion": "authentication.k8s.io/v1",
                                            "kind": "TokenReview",
                                            "spec": {"token": FK.token}})
        self.assertTrue(tr["status"]["authenticated"])
        self.assertEqual(tr["status"]["user"]["username"], "e2e-admin")
        tr = self.c.create("tokenreviews", {"spec": {"token": "nope"}})
        self.assertFalse(tr["status"].get("authenticated", False))
        sar = {"spec": {"user": "e2e-admin", "resourceAttributes": {
            "verb": "patch", "group": "apps", "resource": "deployments", "subresource": "scale",
            "namespace": self.ns}}}
        self.assertTrue(self.c.create("subjectaccessreviews", sar)["status"]["allowed"])
        stranger = json.loads(json.dumps(sar))
        stranger["spec"]["user"] = "system:serviceaccount:x:y"
        # AlwaysAllow, as kube-apiserver's authorizer: anyone, without a reason (the fake
        # denied users it did not know)
        self.assertEqual(self.c.create("subjectaccessreviews", stranger)["status"],
                         {"allowed": True})
        FK.set_sar(default="known")
        try:
            self.assertEqual(self.c.create("subjectaccessreviews", stranger)["status"],
                             {"allowed": False, "reason": "fakekube default: deny"})
        finally:
            FK.set_sar(default="mode")
        FK.set_sar(rules=[{"user": "e2e-admin", "resource": "deployments", "allowed": False,
                           "reason": "denied by test"}])
        try:
            st = self.c.create("subjectaccessreviews", sar)["status"]
            self.assertEqual(st, {"allowed": False, "reason": "denied by test"})
        finally:
            FK.set_sar(rules=[])
        e = self.assertApiError(422, "Invalid", self.c.create, "subjectaccessreviews",
                                {"spec": {"user": "x"}})
        self.assertIn("exactly one of nonResourceAttributes or resourceAttributes",
                      e.message)


class TestCrud(Base):
    def test_create_get_list_selectors(self):
        for name, labels in (("a", {"tier": "gpu", "model": "llama"}),
                             ("b", {"tier": "gpu", "model": "mistral"}),
                             ("c", {"tier": "cpu"}),
                             ("d", {})):
            created = self.c.create("configmaps", cm(name, labels), namespace=self.ns)
            meta = created["metadata"]
            self.assertEqual(created["kind"], "ConfigMap")
            self.assertEqual(meta["namespace"], self.ns)
            self.assertTrue(meta["uid"])
            self.assertTrue(meta["creationTimestamp"].endswith("Z"))
            self.assertTrue(meta["resourceVersion"].isdigit())
            # the writer's fields, as kube-apiserver's field manager records a create
            mf = meta["managedFields"]
            self.assertEqual([(e["manager"], e["operation"], e["apiVersion"], e["fieldsType"])
                              for e in mf],
                             [("gpuscaler-e2e-kubeclient", "Update", "v1", "FieldsV1")])
            self.assertEqual(mf[0]["time"], meta["creationTimestamp"])
        # ObjectMeta's labels and annotations are omitempty: an empty map is not served
        # back, on a create or an update
        d = self.c.get("configmaps", "d", self.ns)
        self.assertNotIn("labels", d["metadata"])
        d["metadata"]["annotations"] = {}
        d["metadata"]["labels"] = {}
        d = self.c.update("configmaps", d, self.ns)
        self.assertNotIn("annotations", d["metadata"])
        self.assertNotIn("labels", self.c.get("configmaps", "d", self.ns)["metadata"])
        got = self.c.get("configmaps", "a", self.ns)
        self.assertEqual(got["metadata"]["managedFields"][0]["fieldsV1"],
                         {"f:data": {".": {}, "f:k": {}},
                          "f:metadata": {"f:labels": {".": {}, "f:model": {}, "f:tier": {}}}})
        self.assertEqual(got["data"], {"k": "v"})

        def names(**kw):
            lst = self.c.list("configmaps", self.ns, **kw)
            self.assertEqual(lst["kind"], "ConfigMapList")
            self.assertEqual(lst["apiVersion"], "v1")
            for it in lst["items"]:
                self.assertNotIn("kind", it)
            return [i["metadata"]["name"] for i in lst["items"]]

        self.assertEqual(names(), ["a", "b", "c", "d"])
        self.assertEqual(names(label_selector="tier=gpu"), ["a", "b"])
        self.assertEqual(names(label_selector="tier==gpu,model!=llama"), ["b"])
        self.assertEqual(names(label_selector="tier!=gpu"), ["c", "d"])
        self.assertEqual(names(label_selector="model in (llama, mistral)"), ["a", "b"])
        self.assertEqual(names(label_selector="model notin (llama)"), ["b", "c", "d"])
        self.assertEqual(names(label_selector="model"), ["a", "b"])
        self.assertEqual(names(label_selector="!model"), ["c", "d"])
        self.assertEqual(names(field_selector="metadata.name=c"), ["c"])
        self.assertEqual(names(field_selector="metadata.name!=c,metadata.namespace=" + self.ns),
                         ["a", "b", "d"])
        self.assertApiError(400, "BadRequest", self.c.list, "configmaps", self.ns,
                            label_selector="tier in gpu")
        e = self.assertApiError(400, "BadRequest", self.c.list, "configmaps", self.ns,
                                field_selector="data.k=v")
        # a kind without field labels of its own: runtime.DefaultMetaV1FieldSelectorConversion
        self.assertEqual(e.message, '"data.k" is not a known field selector: only '
                                    '"metadata.name", "metadata.namespace"')
        # list RV is the global counter
        rv = int(self.c.list("configmaps", self.ns)["metadata"]["resourceVersion"])
        self.c.create("configmaps", cm("e"), namespace=self.ns)
        self.assertEqual(int(self.c.list("configmaps", self.ns)["metadata"]["resourceVersion"]),
                         rv + 1)
        # pagination
        page = self.c.list("configmaps", self.ns, limit=2)
        self.assertEqual(len(page["items"]), 2)
        self.assertEqual(page["metadata"]["remainingItemCount"], 3)
        items, _ = self.c.list_all("configmaps", self.ns)
        self.assertEqual([i["metadata"]["name"] for i in items], ["a", "b", "c", "d", "e"])
        # pod status.phase field selector (status written through /status)
        self.c.create("pods", pod("p1"), namespace=self.ns)
        p2 = self.c.create("pods", pod("p2"), namespace=self.ns)
        self.assertEqual(p2["status"]["phase"], "Pending")
        p2["status"]["phase"] = "Running"
        self.c.update("pods", p2, namespace=self.ns, subresource="status")
        running = self.c.list("pods", self.ns, field_selector="status.phase=Running")
        self.assertEqual([i["metadata"]["name"] for i in running["items"]], ["p2"])

    def test_all_namespaces_list(self):
        other = self.ns + "-b"
        self.c.create("namespaces", {"metadata": {"name": other}})
        for ns in (self.ns, other):
            self.c.create("deployments", deployment("web", {"app": "web", "run": self.ns}),
                          namespace=ns)
            self.c.create("pods", pod("p", {"run": self.ns}), namespace=ns)
        for res in ("deployments", "pods"):
            lst = self.c.list(res, None, label_selector="run=" + self.ns)
            self.assertEqual(sorted(i["metadata"]["namespace"] for i in lst["items"]),
                             sorted([self.ns, other]))
        raw = self.c.request("GET", "/apis/apps/v1/deployments",
                             params={"labelSelector": "run=" + self.ns})
        self.assertEqual(len(raw["items"]), 2)
        self.assertApiError(404, "NotFound", self.c.create, "pods", pod("x"), namespace="nope")

    def test_conflicts(self):
        self.c.create("configmaps", cm("x"), namespace=self.ns)
        e = self.assertApiError(409, "AlreadyExists", self.c.create, "configmaps", cm("x"),
                                namespace=self.ns)
        self.assertEqual(e.message, 'configmaps "x" already exists')
        self.assertEqual(e.status["details"], {"name": "x", "kind": "configmaps"})
        d = self.c.create("deployments", deployment("web"), namespace=self.ns)
        e = self.assertApiError(409, "AlreadyExists", self.c.create, "deployments",
                                deployment("web"), namespace=self.ns)
        self.assertEqual(e.status["details"], {"name": "web", "group": "apps",
                                               "kind": "deployments"})
        stale = json.loads(json.dumps(d))
        d["spec"]["replicas"] = 3
        updated = self.c.update("deployments", d, namespace=self.ns)
        self.assertEqual(updated["metadata"]["generation"], 2)
        self.assertGreater(int(updated["metadata"]["resourceVersion"]),
                           int(stale["metadata"]["resourceVersion"]))
        stale["spec"]["replicas"] = 7
        e = self.assertApiError(409, "Conflict", self.c.update, "deployments", stale,
                                namespace=self.ns)
        self.assertEqual(e.message, 'Operation cannot be fulfilled on deployments.apps "web": '
                         'the object has been modified; please apply your changes to the latest '
                         'version and try again')
        self.assertApiError(409, "Conflict", self.c.patch, "deployments", "web",
                            {"metadata": {"resourceVersion": stale["metadata"]
                                          ["resourceVersion"]}, "spec": {"replicas": 9}},
                            namespace=self.ns)
        # a no-op update keeps the resourceVersion
        same = self.c.update("deployments", updated, namespace=self.ns)
        self.assertEqual(same["metadata"]["resourceVersion"],
                         updated["metadata"]["resourceVersion"])
        e = self.assertApiError(404, "NotFound", self.c.get, "deployments", "nope", self.ns)
        self.assertEqual(e.message, 'deployments.apps "nope" not found')
        self.assertApiError(404, "NotFound", self.c.patch, "configmaps", "nope", {"data": {}},
                            namespace=self.ns)
        # delete with a stale precondition (rest.BeforeDelete names the kind), then for real
        e = self.assertApiError(409, "Conflict", self.c.delete, "deployments", "web", self.ns,
                                preconditions={"resourceVersion": stale["metadata"]
                                               ["resourceVersion"]})
        self.assertEqual(e.message, 'Operation cannot be fulfilled on Deployment.apps "web": the '
                                    'ResourceVersion in the precondition (%s) does not match the '
                                    'ResourceVersion in record (%s). The object might have been '
                                    'modified' % (stale["metadata"]["resourceVersion"],
                                                  updated["metadata"]["resourceVersion"]))
        self.assertEqual(e.status["details"], {"name": "web", "group": "apps",
                                               "kind": "Deployment"})
        e = self.assertApiError(409, "Conflict", self.c.delete, "deployments", "web", self.ns,
                                preconditions={"uid": "other"})
        self.assertIn('the UID in the precondition (other) does not match the UID in record (%s).'
                      ' The object might have been deleted and then recreated'
                      % updated["metadata"]["uid"], e.message)
        st = self.c.delete("deployments", "web", self.ns)
        self.assertEqual((st["kind"], st["status"], st["details"]["kind"]),
                         ("Status", "Success", "deployments"))
        self.assertApiError(404, "NotFound", self.c.get, "deployments", "web", self.ns)

    def test_validation_422(self):
        e = self.assertApiError(422, "Invalid", self.c.create, "configmaps", cm("Bad_Name"),
                                namespace=self.ns)
        self.assertTrue(e.message.startswith('ConfigMap "Bad_Name" is invalid: metadata.name: '
                                             'Invalid value: "Bad_Name": a lowercase RFC 1123 '
                                             'subdomain'), e.message)
        self.assertEqual(e.status["details"]["causes"][0]["field"], "metadata.name")
        bad = deployment("web")
        del bad["spec"]["selector"]
        e = self.assertApiError(422, "Invalid", self.c.create, "deployments", bad,
                                namespace=self.ns)
        self.assertEqual(e.message, 'Deployment.apps "web" is invalid: spec.selector: Required '
                                    'value')
        self.assertEqual(e.status["details"], {
            "name": "web", "group": "apps", "kind": "Deployment",
            "causes": [{"reason": "FieldValueRequired", "message": "Required value",
                        "field": "spec.selector"}]})
        bad = deployment("web")
        bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
        e = self.assertApiError(422, "Invalid", self.c.create, "deployments", bad,
                                namespace=self.ns)
        self.assertIn("spec.template.metadata.labels: Invalid value: "
                      "map[string]string{\"app\":\"other\"}: `selector` does not match template "
                      "`labels`", e.message)
        bad = deployment("web", replicas=-1)
        del bad["spec"]["template"]["spec"]["containers"][0]["image"]
        e = self.assertApiError(422, "Invalid", self.c.create, "deployments", bad,
                                namespace=self.ns)
        self.assertEqual(sorted(c["field"] for c in e.status["details"]["causes"]),
                         ["spec.replicas", "spec.template.spec.containers[0].image"])
        self.assertTrue(e.message.startswith('Deployment.apps "web" is invalid: ['))
        self.c.create("deployments", deployment("web"), namespace=self.ns)
        e = self.assertApiError(422, "Invalid", self.c.patch, "deployments", "web",
                                {"spec": {"selector": {"matchLabels": {"app": "x"}},
                                          "template": {"metadata": {"labels": {"app": "x"}}}}},
                                namespace=self.ns)
        self.assertIn("field is immutable", e.message)
        self.assertApiError(422, "Invalid", self.c.create, "namespaces",
                            {"metadata": {"name": "a.b"}})
        d = self.c.get("deployments", "web", self.ns)
        self.assertEqual(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%")
        self.assertEqual(d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
                         "IfNotPresent")
        self.assertEqual(d["status"], {})
        # annotations at most 256 KiB, counted in bytes (Go's len of a string): 140,000 "é"
        # are 280,000 bytes
        e = self.assertApiError(422, "Invalid", self.c.patch, "deployments", "web",
                                {"metadata": {"annotations": {"note": "\u00e9" * 140000}}},
                                namespace=self.ns)
        self.assertEqual(e.message, 'Deployment.apps "web" is invalid: metadata.annotations: '
                                    'Too long: must have at most 262144 bytes')
        self.c.patch("deployments", "web", {"metadata": {"annotations": {"note": "e" * 140000}}},
                     namespace=self.ns)

    def test_configmap_size_and_binarydata_merge_patch(self):
        """data + binaryData at most 1 MiB (binaryData counted decoded), as core validation
        (ValidateConfigMap, MaxSecretSize) has it; a merge patch of binaryData keeps the keys it
        does not name and removes those set to null (gpuscaler's checkpoint ConfigMaps)."""
        import base64 as b64
        blob = b64.b64encode(b"x" * (600 * 1024)).decode()
        obj = cm("big")
        obj["binaryData"] = {"a": blob}
        rv = self.c.create("configmaps", obj, namespace=self.ns)["metadata"]["resourceVersion"]
        e = self.assertApiError(422, "Invalid", self.c.patch, "configmaps", "big",
                                {"binaryData": {"b": blob}}, self.ns)
        # field.NewPath("") prints as "[]"
        self.assertEqual(e.message, 'ConfigMap "big" is invalid: []: Too long: must have at '
                                    'most 1048576 bytes')
        self.assertEqual(e.status["details"]["causes"],
                         [{"reason": "FieldValueTooLong", "field": "[]",
                           "message": "Too long: must have at most 1048576 bytes"}])
        got = self.c.get("configmaps", "big", self.ns)
        self.assertEqual(got["metadata"]["resourceVersion"], rv, "a refused patch changed it")
        small = b64.b64encode(b"y" * 100).decode()
        out = self.c.patch("configmaps", "big", {"binaryData": {"b": small}}, self.ns)
        self.assertEqual(sorted(out["binaryData"]), ["a", "b"])
        self.assertGreater(int(out["metadata"]["resourceVersion"]), int(rv))
        out = self.c.patch("configmaps", "big", {"binaryData": {"a": None}}, self.ns)
        self.assertEqual(out["binaryData"], {"b": small})
        # exactly 1 MiB is allowed
        obj = cm("edge")
        obj.pop("data", None)
        obj["binaryData"] = {"a": b64.b64encode(b"z" * (1024 * 1024)).decode()}
        self.c.create("configmaps", obj, namespace=self.ns)
        # binaryData that is not base64 does not decode ([]byte in encoding/json): a create
        # is a 400 from the decoding, a patch a 422 about the patched object
        bad = cm("bad64")
        bad["binaryData"] = {"a": "QUJD!!"}
        e = self.assertApiError(400, "BadRequest", self.c.create, "configmaps", bad,
                                namespace=self.ns)
        self.assertEqual(e.message, 'ConfigMap in version "v1" cannot be handled as a '
                                    'ConfigMap: illegal base64 data at input byte 4')
        for text, at in (("QUJ", 0), ("QUJDRA=", 7), ("QQ==QQ==", 4), ("Q===", 1)):
            e = self.assertApiError(422, "Invalid", self.c.patch, "configmaps", "big",
                                    {"binaryData": {"c": text}}, self.ns)
            self.assertTrue(e.message.startswith(' "" is invalid: patch: Invalid value: "'),
                            e.message)
            self.assertTrue(e.message.endswith(": illegal base64 data at input byte %d" % at),
                            (text, e.message))
            self.assertEqual(e.status["details"]["causes"][0]["field"], "patch")
        ok = self.c.patch("configmaps", "big", {"binaryData": {"c": "QUJD\nRA=="}}, self.ns)
        self.assertEqual(ok["binaryData"]["c"], "QUJDRA==", "CR and LF are skipped")

    def test_patch_types(self):
        d = deployment("web")
        d["spec"]["template"]["spec"]["containers"].append({"name": "sidecar",
                                                            "image": "envoy:1"})
        self.c.create("deployments", d, namespace=self.ns)
        out = self.c.patch("deployments", "web", {"spec": {"template": {"spec": {"containers": [
            {"name": "server", "image": "vllm/vllm-openai:v0.7.0"}]}}}}, self.ns, "strategic")
        imgs = [(c["name"], c["image"]) for c in out["spec"]["template"]["spec"]["containers"]]
        self.assertEqual(imgs, [("server", "vllm/vllm-openai:v0.7.0"), ("sidecar", "envoy:1")])
        out = self.c.patch("deployments", "web", {"spec": {"template": {"spec": {"containers": [
            {"name": "server", "image": "x:1"}]}}}}, self.ns, "merge")
        self.assertEqual(len(out["spec"]["template"]["spec"]["containers"]), 1)
        out = self.c.patch("deployments", "web", [
            {"op": "test", "path": "/spec/replicas", "value": 1},
            {"op": "replace", "path": "/spec/replicas", "value": 4},
            {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "c"}}],
            self.ns, "json")
        self.assertEqual(out["spec"]["replicas"], 4)
        self.assertEqual(out["metadata"]["generation"], 4)
        out = self.c.patch("deployments", "web", {"metadata": {"annotations": {"a/b": None}}},
                           self.ns)
        self.assertNotIn("a/b", out["metadata"].get("annotations") or {})
        self.assertApiError(422, "Invalid", self.c.patch, "deployments", "web",
                            [{"op": "test", "path": "/spec/replicas", "value": 99}], self.ns,
                            "json")
        self.assertApiError(415, "UnsupportedMediaType", self.c.patch, "deployments", "web",
                            {"spec": {}}, self.ns, "application/xml")


class TestWriteLog(Base):
    def test_writes_record_who_wrote_what(self):
        """GET /fake/writes: each successful write with the writer's user (from its own
        token), the object and the resourceVersion it produced; failed writes and reads are
        not in it."""
        tok = "writer-" + os.urandom(4).hex()
        FK.add_token(tok, "system:serviceaccount:x:writer")
        kc = os.path.join(FK.tmpdir, "kubeconfig-writer.yaml")
        harness.write_kubeconfig(kc, FK.url, ca_file=FK.pki["ca"], token=tok)
        w = FK.client(kc, max_retries=0)
        since = FK.writes()["next"]
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "l1"}, "spec": {"holderIdentity": "pod-a",
                                                       "leaseDurationSeconds": 4}}
        made = w.create("leases", lease, namespace=self.ns)
        self.assertApiError(409, "AlreadyExists", w.create, "leases", lease, namespace=self.ns)
        made["spec"]["holderIdentity"] = "pod-b"
        upd = self.c.update("leases", made, self.ns)
        self.c.get("leases", "l1", self.ns)
        got = FK.writes(since, namespace=self.ns)["writes"]
        self.assertEqual([(x["user"], x["verb"], x["resource"], x["name"], x["holderIdentity"],
                           x["resourceVersion"]) for x in got],
                         [("system:serviceaccount:x:writer", "create", "leases", "l1", "pod-a",
                           made["metadata"]["resourceVersion"]),
                          ("e2e-admin", "update", "leases", "l1", "pod-b",
                           upd["metadata"]["resourceVersion"])])
        self.assertLess(got[0]["seq"], got[1]["seq"])
        self.assertLessEqual(got[0]["time"], got[1]["time"])
        only = FK.writes(since, namespace=self.ns, user="e2e-admin")["writes"]
        self.assertEqual([x["verb"] for x in only], ["update"])
        w.close()


class TestRBAC(unittest.TestCase):
    """--authorization-mode=RBAC: requests are allowed by the stored Roles and bindings as
    kube-apiserver's RBAC authorizer allows them, and refused with its 403."""

    def test_rbac_authorization(self):
        fk = harness.start(tls=False, extra_args=("--authorization-mode", "RBAC"))
        try:
            self._check(fk)
        finally:
            fk.stop()

    def _check(self, fk):
        adm = fk.client(max_retries=0)  # system:masters: anything
        ns, sa = "rbac-t", "system:serviceaccount:rbac-t:scaler"
        adm.create("namespaces", {"metadata": {"name": ns}})
        adm.create("configmaps", cm("a"), namespace=ns)
        adm.create("configmaps", cm("b"), namespace=ns)
        adm.create("deployments", deployment("llm"), namespace=ns)
        rbac = "rbac.authorization.k8s.io/v1"
        adm.create("roles", {"apiVersion": rbac, "kind": "Role", "metadata": {"name": "cm-a"},
                             "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                        "resourceNames": ["a"],
                                        "verbs": ["get", "list", "watch", "patch"]}]},
                   namespace=ns)
        adm.create("rolebindings", {  # a service account of the binding's namespace
            "apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "cm-a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-a"},
            "subjects": [{"kind": "ServiceAccount", "name": "scaler"}]}, namespace=ns)
        adm.create("clusterroles", {"apiVersion": rbac, "kind": "ClusterRole",
                                    "metadata": {"name": "scale"},
                                    "rules": [{"apiGroups": ["apps"],
                                               "resources": ["deployments/scale"],
                                               "verbs": ["get", "update"]},
                                              {"apiGroups": ["*"], "resources": ["*/status"],
                                               "verbs": ["get"]},
                                              {"nonResourceURLs": ["/metrics*"],
                                               "verbs": ["get"]}]})
        adm.create("clusterrolebindings", {
            "apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "scale"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "scale"},
            "subjects": [{"kind": "Group", "name": "scalers"}]})
        tok = "sa-" + os.urandom(4).hex()
        fk.add_token(tok, sa, ("system:serviceaccounts", "scalers"))
        kc = os.path.join(fk.tmpdir, "kubeconfig-sa.yaml")
        harness.write_kubeconfig(kc, fk.url, token=tok)
        c = fk.client(kc, max_retries=0)

        def refused(msg, method, path, params=None, body=None):
            st, _, raw = c.raw(method, path, body=body, params=params,
                               content_type="application/merge-patch+json"
                               if method == "PATCH" else None)
            self.assertEqual(st, 403, raw)
            doc = json.loads(raw)
            self.assertEqual((doc["kind"], doc["reason"], doc["code"]),
                             ("Status", "Forbidden", 403), doc)
            self.assertEqual(doc["message"], msg)
            return doc
        try:
            # the Role: configmap "a" by name, also a list or watch naming it
            self.assertEqual(c.get("configmaps", "a", ns)["metadata"]["name"], "a")
            c.patch("configmaps", "a", {"data": {"k": "2"}}, ns)
            got = c.request("GET", "/api/v1/namespaces/%s/configmaps" % ns,
                            params={"fieldSelector": "metadata.name=a"})
            self.assertEqual([i["metadata"]["name"] for i in got["items"]], ["a"])
            u = 'User "%s" cannot ' % sa
            d = refused('configmaps "b" is forbidden: ' + u + 'get resource "configmaps" in API '
                        'group "" in the namespace "rbac-t"',
                        "GET", "/api/v1/namespaces/%s/configmaps/b" % ns)
            self.assertEqual(d["details"], {"name": "b", "kind": "configmaps"})
            refused("configmaps is forbidden: " + u + 'list resource "configmaps" in API group '
                    '"" in the namespace "rbac-t"', "GET", "/api/v1/namespaces/%s/configmaps" % ns)
            refused("configmaps is forbidden: " + u + 'list resource "configmaps" in API group '
                    '"" at the cluster scope', "GET", "/api/v1/configmaps")
            refused('configmaps "a" is forbidden: ' + u + 'delete resource "configmaps" in API '
                    'group "" in the namespace "rbac-t"',
                    "DELETE", "/api/v1/namespaces/%s/configmaps/a" % ns)
            # the ClusterRole through a group: the scale subresource, not the Deployment
            sc = c.get("deployments", "llm", ns, subresource="scale")
            sc["spec"]["replicas"] = 3
            self.assertEqual(c.update("deployments", sc, ns, subresource="scale")
                             ["spec"]["replicas"], 3)
            d = refused('deployments.apps "llm" is forbidden: ' + u + 'patch resource '
                        '"deployments/scale" in API group "apps" in the namespace "rbac-t"',
                        "PATCH", "/apis/apps/v1/namespaces/%s/deployments/llm/scale" % ns,
                        body={"spec": {"replicas": 2}})
            self.assertEqual(d["details"], {"name": "llm", "group": "apps", "kind": "deployments"})
            refused('deployments.apps "llm" is forbidden: ' + u + 'get resource "deployments" in '
                    'API group "apps" in the namespace "rbac-t"',
                    "GET", "/apis/apps/v1/namespaces/%s/deployments/llm" % ns)
            c.get("deployments", "llm", ns, subresource="status")  # */status
            # non-resource URLs: a prefix rule, and the discovery every user has
            refused('forbidden: ' + u + 'get path "/openid/v1/jwks"', "GET", "/openid/v1/jwks")
            for path in ("/version", "/api", "/apis/apps/v1"):
                self.assertEqual(c.raw("GET", path)[0], 200, path)
            # a SubjectAccessReview is answered by the same rules, naming the binding
            def sar(ra, groups=("system:serviceaccounts", "scalers", "system:authenticated")):
                return adm.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                   {"spec": {"user": sa, "groups": list(groups),
                                             "resourceAttributes": ra}})["status"]
            self.assertEqual(sar({"namespace": ns, "verb": "get", "resource": "configmaps",
                                  "name": "a"}),
                             {"allowed": True, "reason": 'RBAC: allowed by RoleBinding '
                              '"cm-a/rbac-t" of Role "cm-a" to ServiceAccount "scaler/rbac-t"'})
            self.assertEqual(sar({"namespace": ns, "verb": "update", "group": "apps",
                                  "resource": "deployments", "subresource": "scale",
                                  "name": "llm"}),
                             {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding '
                              '"scale" of ClusterRole "scale" to Group "scalers"'})
            self.assertEqual(sar({"namespace": ns, "verb": "update", "group": "apps",
                                  "resource": "deployments", "subresource": "scale"},
                                 groups=("system:authenticated",)), {"allowed": False})
            # a binding to a role that does not exist says so
            adm.create("rolebindings", {
                "apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "ghost"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "ghost"},
                "subjects": [{"kind": "User", "name": sa}]}, namespace=ns)
            refused("secrets is forbidden: " + u + 'list resource "secrets" in API group "" in '
                    'the namespace "rbac-t": RBAC: clusterrole.rbac.authorization.k8s.io "ghost" '
                    'not found', "GET", "/api/v1/namespaces/%s/secrets" % ns)
            # bindings change what is allowed at once
            adm.delete("rolebindings", "cm-a", ns)
            refused('configmaps "a" is forbidden: ' + u + 'get resource "configmaps" in API '
                    'group "" in the namespace "rbac-t": RBAC: clusterrole.rbac.authorization.k8s.io'
                    ' "ghost" not found', "GET", "/api/v1/namespaces/%s/configmaps/a" % ns)
        finally:
            c.close()
            adm.close()


class TestScale(Base):
    def test_patch_decodes_before_its_resource_version_is_compared(self):
        """A patch whose result does not decode is refused as such (422) even with a stale
        resourceVersion: the patch is applied and decoded before the version is compared
        (the fake answered 409)."""
        self.c.create("deployments", deployment("dec", {"app": "dec"}, replicas=1),
                      namespace=self.ns)
        self.c.patch_scale("deployments", "dec", 2, self.ns)
        bad = {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": "x"}}
        self.assertApiError(422, "Invalid", self.c.patch, "deployments", "dec", bad, self.ns)
        stale = {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 3}}
        self.assertApiError(409, "Conflict", self.c.patch, "deployments", "dec", stale, self.ns)
        # a patch that removes or changes the name: 400 (checkName on the patched object),
        # before its resourceVersion is compared
        for meta in ({"name": None}, {"name": "other", "resourceVersion": "1"}):
            self.assertApiError(400, "BadRequest", self.c.patch, "deployments", "dec",
                                {"metadata": meta}, self.ns)

    def test_deployment_status_write_keeps_metadata_but_labels(self):
        """A Deployment's /status write keeps the spec and the labels as they were and
        writes the rest of metadata as sent (apps deploymentStatusStrategy), without moving
        the generation; the fake threw every metadata change away."""
        self.c.create("deployments", deployment("st", {"app": "st"}, replicas=1),
                      namespace=self.ns)
        dep = self.c.get("deployments", "st", self.ns)
        gen = dep["metadata"]["generation"]
        dep["status"] = {"replicas": 1}
        dep["metadata"].setdefault("annotations", {})["via-status"] = "yes"
        dep["metadata"].setdefault("labels", {})["via-status"] = "yes"
        dep["spec"]["replicas"] = 7
        self.c.update("deployments", dep, self.ns, subresource="status")
        got = self.c.get("deployments", "st", self.ns)
        self.assertEqual(got["metadata"]["annotations"].get("via-status"), "yes")
        self.assertNotIn("via-status", got["metadata"].get("labels") or {})
        self.assertEqual(got["spec"]["replicas"], 1)
        self.assertEqual(got["status"]["replicas"], 1)
        self.assertEqual(got["metadata"]["generation"], gen)

    def test_scale_subresource(self):
        d = deployment("llm", {"app": "llm"}, replicas=2,
                       selector={"matchLabels": {"app": "llm"},
                                 "matchExpressions": [{"key": "tier", "operator": "NotIn",
                                                       "values": ["cpu", "batch"]}]})
        self.c.create("deployments", d, namespace=self.ns)
        dep = self.c.get("deployments", "llm", self.ns)
        dep["status"] = {"replicas": 2, "readyReplicas": 2}
        self.c.update("deployments", dep, self.ns, subresource="status")
        sc = self.c.get_scale("deployments", "llm", self.ns)
        self.assertEqual(sc["kind"], "Scale")
        self.assertEqual(sc["apiVersion"], "autoscaling/v1")
        self.assertEqual(sc["spec"], {"replicas": 2})
        self.assertEqual(sc["status"], {"replicas": 2,
                                        "selector": "app=llm,tier notin (batch,cpu)"})
        gen = self.c.get("deployments", "llm", self.ns)["metadata"]["generation"]
        out = self.c.patch_scale("deployments", "llm", 5, self.ns)
        self.assertEqual(out["spec"]["replicas"], 5)
        dep = self.c.get("deployments", "llm", self.ns)
        self.assertEqual(dep["spec"]["replicas"], 5)
        self.assertEqual(dep["metadata"]["generation"], gen + 1)
        self.assertEqual(dep["status"]["replicas"], 2)
        self.assertEqual(out["metadata"]["resourceVersion"], dep["metadata"]["resourceVersion"])
        out = self.c.update_scale("deployments", "llm", 3, self.ns,
                                  resource_version=out["metadata"]["resourceVersion"])
        self.assertEqual(out["spec"]["replicas"], 3)
        e = self.assertApiError(409, "Conflict", self.c.update_scale, "deployments", "llm", 8,
                                self.ns, resource_version=sc["metadata"]["resourceVersion"])
        self.assertIn('deployments.apps "llm"', e.message)
        self.assertEqual(self.c.get("deployments", "llm", self.ns)["spec"]["replicas"], 3)
        e = self.assertApiError(422, "Invalid", self.c.patch_scale, "deployments", "llm", -1,
                                self.ns)
        self.assertEqual(e.message, 'Scale.autoscaling "llm" is invalid: spec.replicas: Invalid '
                                    'value: -1: must be greater than or equal to 0')
        e = self.assertApiError(404, "NotFound", self.c.get_scale, "deployments", "nope", self.ns)
        # ScaleREST.Get names the subresource (a PATCH names deployments.apps)
        self.assertEqual(e.message, 'deployments/scale.apps "nope" not found')
        self.assertEqual(e.status["details"], {"name": "nope", "group": "apps",
                                               "kind": "deployments/scale"})
        res = self.c.request("GET", "/apis/apps/v1")["resources"]
        scale = [r for r in res if r["name"] == "deployments/scale"][0]
        self.assertEqual((scale["group"], scale["version"], scale["kind"]),
                         ("autoscaling", "v1", "Scale"))
        # at 0 a Scale's spec is empty (ScaleSpec.replicas is omitempty), its status
        # replicas stays; a PUT of a Scale must name it (checkName)
        out = self.c.patch_scale("deployments", "llm", 0, self.ns)
        self.assertEqual(out["spec"], {})
        self.assertEqual(out["status"]["replicas"], 2)
        self.assertEqual(self.c.get_scale("deployments", "llm", self.ns)["spec"], {})
        e = self.assertApiError(400, "BadRequest", self.c.request, "PUT",
                                "/apis/apps/v1/namespaces/%s/deployments/llm/scale" % self.ns,
                                {"kind": "Scale", "apiVersion": "autoscaling/v1",
                                 "spec": {"replicas": 2}})
        self.assertEqual(e.message, "the name of the object (llm based on URL) was "
                                    "undeterminable: name must be provided")
        self.c.patch_scale("deployments", "llm", 3, self.ns)
        # an unchanged replica count writes nothing
        rv = self.c.get("deployments", "llm", self.ns)["metadata"]["resourceVersion"]
        self.c.patch_scale("deployments", "llm", 3, self.ns)
        self.assertEqual(self.c.get("deployments", "llm", self.ns)["metadata"]
                         ["resourceVersion"], rv)
        # metadata.uid is a precondition (scaleUpdatedObjectInfo), checked after the Scale's
        # validation and before the resourceVersion: a Deployment deleted and made again is
        # not scaled by a write meant for the one before
        uid = self.c.get("deployments", "llm", self.ns)["metadata"]["uid"]
        e = self.assertApiError(409, "Conflict", self.c.patch, "deployments", "llm",
                                {"metadata": {"uid": "0d6e6f6e-0000-4000-8000-000000000000",
                                              "resourceVersion": "1"},
                                 "spec": {"replicas": 4}}, self.ns, subresource="scale")
        self.assertEqual(e.message, 'Operation cannot be fulfilled on deployments/scale.apps '
                                    '"llm": Precondition failed: UID in precondition: '
                                    '0d6e6f6e-0000-4000-8000-000000000000, UID in object meta: '
                                    '%s' % uid)
        self.assertApiError(422, "Invalid", self.c.patch, "deployments", "llm",
                            {"metadata": {"uid": "x"}, "spec": {"replicas": -2}}, self.ns,
                            subresource="scale")
        out = self.c.patch("deployments", "llm", {"metadata": {"uid": uid},
                                                  "spec": {"replicas": 4}}, self.ns,
                           subresource="scale")
        self.assertEqual(out["spec"]["replicas"], 4)
        # a PUT's uid is a storage precondition, before the Scale's validation
        e = self.assertApiError(409, "Conflict", self.c.request, "PUT",
                                "/apis/apps/v1/namespaces/%s/deployments/llm/scale" % self.ns,
                                {"kind": "Scale", "apiVersion": "autoscaling/v1",
                                 "metadata": {"name": "llm", "uid": "x"},
                                 "spec": {"replicas": -1}})
        self.assertEqual(e.message, 'Operation cannot be fulfilled on deployments.apps "llm": '
                                    'StorageError: invalid object, Code: 4, Key: '
                                    '/registry/deployments/%s/llm, ResourceVersion: 0, '
                                    'AdditionalErrorMsg: Precondition failed: UID in '
                                    'precondition: x, UID in object meta: %s' % (self.ns, uid))

    def test_the_objects_uid_is_not_changed(self):
        """An update may not change metadata.uid. A PUT's uid is a storage precondition
        (409, before the resourceVersion); a patch sets none, so the uid it changes is
        refused by ValidateObjectMetaUpdate (422 field is immutable) after the object meta's
        own errors and before the kind's. The same uid, or none, writes."""
        self.c.create("deployments", deployment("uidd", {"app": "uidd"}, replicas=1), self.ns)
        d = self.c.get("deployments", "uidd", self.ns)
        uid = d["metadata"]["uid"]
        other = "0d6e6f6e-0000-4000-8000-000000000001"
        e = self.assertApiError(422, "Invalid", self.c.patch, "deployments", "uidd",
                                {"metadata": {"uid": other, "annotations": {"a": "b"}}}, self.ns)
        self.assertEqual(e.message, 'Deployment.apps "uidd" is invalid: metadata.uid: Invalid '
                                    'value: "%s": field is immutable' % other)
        e = self.assertApiError(422, "Invalid", self.c.patch, "deployments", "uidd",
                                {"metadata": {"uid": other, "labels": {"-x": "y"}},
                                 "spec": {"replicas": -1}}, self.ns)
        # the causes list the uid twice (the common checks', then ValidateDeploymentUpdate's);
        # the message once
        fields = [c["field"] for c in e.status["details"]["causes"]]
        self.assertEqual(fields[1:], ["metadata.uid", "metadata.uid", "spec.replicas"], fields)
        self.assertEqual(e.message.count("metadata.uid"), 1, e.message)
        self.assertEqual(self.c.get("deployments", "uidd", self.ns)["metadata"]
                         ["resourceVersion"], d["metadata"]["resourceVersion"])
        out = self.c.patch("deployments", "uidd", {"metadata": {"uid": uid,
                                                                "annotations": {"a": "b"}}},
                           self.ns)
        self.assertEqual(out["metadata"]["annotations"]["a"], "b")
        body = dict(out)
        body["metadata"] = dict(out["metadata"], uid="x", resourceVersion="1")
        e = self.assertApiError(409, "Conflict", self.c.request, "PUT",
                                "/apis/apps/v1/namespaces/%s/deployments/uidd" % self.ns, body)
        self.assertEqual(e.message, 'Operation cannot be fulfilled on deployments.apps "uidd": '
                                    'StorageError: invalid object, Code: 4, Key: '
                                    '/registry/deployments/%s/uidd, ResourceVersion: 0, '
                                    'AdditionalErrorMsg: Precondition failed: UID in '
                                    'precondition: x, UID in object meta: %s' % (self.ns, uid))
        # a PUT that would create (a Lease) is checked against the empty object
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "uidl", "uid": "y"}, "spec": {}}
        e = self.assertApiError(409, "Conflict", self.c.request, "PUT",
                                "/apis/coordination.k8s.io/v1/namespaces/%s/leases/uidl"
                                % self.ns, lease)
        self.assertIn("Key: /registry/leases/%s/uidl, ResourceVersion: 0, AdditionalErrorMsg: "
                      "Precondition failed: UID in precondition: y, UID in object meta: "
                      % self.ns, e.message)
        self.assertTrue(e.message.endswith("UID in object meta: "), e.message)
        # a Service's key is under services/specs
        self.c.create("services", {"apiVersion": "v1", "kind": "Service",
                                   "metadata": {"name": "uids"},
                                   "spec": {"ports": [{"port": 80}]}}, self.ns)
        svc = self.c.get("services", "uids", self.ns)
        svc["metadata"]["uid"] = "z"
        e = self.assertApiError(409, "Conflict", self.c.request, "PUT",
                                "/api/v1/namespaces/%s/services/uids" % self.ns, svc)
        self.assertIn("Key: /registry/services/specs/%s/uids," % self.ns, e.message)

    def test_annotation_patch_bumps_the_scale_resource_version(self):
        """As in kube-apiserver, a Deployment and its /scale subresource are one object with
        one resourceVersion: a metadata-only change (an annotation) bumps it, so a /scale
        write preconditioned on the version read before it conflicts. A patch that changes
        nothing writes nothing and keeps the version."""
        self.c.create("deployments", deployment("ann", {"app": "ann"}, replicas=2),
                      namespace=self.ns)
        before = self.c.get_scale("deployments", "ann", self.ns)["metadata"]["resourceVersion"]
        ann = {"metadata": {"annotations": {"gpuscaler.io/status": '{"desired":3}'}}}
        out = self.c.patch("deployments", "ann", ann, self.ns)
        after = out["metadata"]["resourceVersion"]
        self.assertGreater(int(after), int(before))
        self.assertEqual(self.c.get_scale("deployments", "ann", self.ns)["metadata"]
                         ["resourceVersion"], after)
        # a Deployment's annotations bump its generation (they are copied to its
        # ReplicaSets: apps deploymentStrategy.PrepareForUpdate); its labels do not
        self.assertEqual(self.c.get("deployments", "ann", self.ns)["metadata"]["generation"], 2,
                         "an annotation change bumps a Deployment's generation")
        out = self.c.patch("deployments", "ann", {"metadata": {"labels": {"x": "y"}}}, self.ns)
        self.assertEqual(out["metadata"]["generation"], 2, "a label change does not")
        after = out["metadata"]["resourceVersion"]
        # the /scale merge patch gpuscaler sends, with the version read before the annotation
        stale = {"metadata": {"resourceVersion": before}, "spec": {"replicas": 3}}
        e = self.assertApiError(409, "Conflict", self.c.patch, "deployments", "ann", stale,
                                self.ns, "merge", "scale")
        self.assertIn("the object has been modified", e.message)
        fresh = {"metadata": {"resourceVersion": after}, "spec": {"replicas": 3}}
        self.assertEqual(self.c.patch("deployments", "ann", fresh, self.ns, "merge", "scale")
                         ["spec"]["replicas"], 3)
        # the same annotation again: no change, no new resourceVersion
        rv = self.c.get("deployments", "ann", self.ns)["metadata"]["resourceVersion"]
        self.assertEqual(self.c.patch("deployments", "ann", ann, self.ns)["metadata"]
                         ["resourceVersion"], rv)


class TestManagedFields(Base):
    def test_managers_own_what_they_wrote(self):
        """metadata.managedFields as kube-apiserver's field manager keeps them: an entry per
        manager (?fieldManager=, else the User-Agent up to "/"), operation and subresource; a
        write takes the fields it changes from the others; a field removed leaves every set;
        a write that changes nothing records nothing."""
        helm = FK.client(max_retries=0, user_agent="Helm/3.16.2")
        gs = FK.client(max_retries=0, user_agent="gpuscaler/0.1.0 (linux)")
        d = deployment("mf", {"app": "mf", "team": "ml"}, replicas=2)
        created = helm.create("deployments", d, namespace=self.ns,
                              params={"fieldManager": "helm"})
        (e,) = created["metadata"]["managedFields"]
        self.assertEqual((e["manager"], e["operation"], e["apiVersion"]),
                         ("helm", "Update", "apps/v1"))
        self.assertNotIn("subresource", e)
        f = e["fieldsV1"]
        self.assertEqual(f["f:metadata"], {"f:labels": {".": {}, "f:app": {}, "f:team": {}}})
        self.assertEqual(f["f:spec"]["f:replicas"], {})
        self.assertEqual(f["f:spec"]["f:selector"], {})  # atomic: owned whole
        ctr = f["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"server"}']
        self.assertEqual((ctr["."], ctr["f:name"], ctr["f:image"]), ({}, {}, {}))
        for k in ("f:uid", "f:resourceVersion", "f:creationTimestamp", "f:generation"):
            self.assertNotIn(k, f["f:metadata"])
        # gpuscaler's /scale patch: an entry of its own for the scale subresource, and helm
        # no longer owns the replicas
        gs.patch_scale("deployments", "mf", 4, self.ns)
        # its status annotation: another entry of gpuscaler's, on the main resource
        out = gs.patch("deployments", "mf", {"metadata": {"annotations": {
            "gpuscaler.io/status": '{"desired":4}'}}}, self.ns)
        by = {(m["manager"], m.get("subresource", "")): m for m in
              out["metadata"]["managedFields"]}
        self.assertEqual(set(by), {("helm", ""), ("gpuscaler", "scale"), ("gpuscaler", "")})
        self.assertEqual(by[("gpuscaler", "scale")]["fieldsV1"], {"f:spec": {"f:replicas": {}}})
        self.assertNotIn("f:replicas", by[("helm", "")]["fieldsV1"]["f:spec"])
        self.assertEqual(by[("gpuscaler", "")]["fieldsV1"], {"f:metadata": {"f:annotations": {
            ".": {}, "f:gpuscaler.io/status": {}}}})
        # the same annotation again changes nothing: no write, the same entries and times
        again = gs.patch("deployments", "mf", {"metadata": {"annotations": {
            "gpuscaler.io/status": '{"desired":4}'}}}, self.ns)
        self.assertEqual(again["metadata"]["resourceVersion"], out["metadata"]["resourceVersion"])
        self.assertEqual(again["metadata"]["managedFields"], out["metadata"]["managedFields"])
        # a label removed by another manager leaves helm's set; a status write has its own
        gs.patch("deployments", "mf", {"metadata": {"labels": {"team": None}}}, self.ns)
        dep = self.c.get("deployments", "mf", self.ns)
        dep["status"] = {"replicas": 4, "readyReplicas": 4}
        st = self.c.update("deployments", dep, self.ns, subresource="status")
        by = {(m["manager"], m.get("subresource", "")): m for m in
              st["metadata"]["managedFields"]}
        self.assertEqual(by[("helm", "")]["fieldsV1"]["f:metadata"],
                         {"f:labels": {".": {}, "f:app": {}}})
        self.assertEqual(by[("gpuscaler-e2e-kubeclient", "status")]["fieldsV1"],
                         {"f:status": {"f:readyReplicas": {}, "f:replicas": {}}})
        # an apply patch: operation Apply, owning its configuration's fields
        cfg = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "mf", "labels": {"owner": "platform"}}}
        out = self.c.patch("deployments", "mf", cfg, self.ns, "apply",
                           params={"fieldManager": "kubectl"})
        ap = [m for m in out["metadata"]["managedFields"] if m["manager"] == "kubectl"]
        self.assertEqual([(m["operation"], m["fieldsV1"]) for m in ap],
                         [("Apply", {"f:metadata": {"f:labels": {"f:owner": {}}}})])


class TestWatch(Base):
    def test_watch_from_a_version_not_reached_yet(self):
        """A watch from a resourceVersion the server has not reached opens (200) and
        delivers the events after it as they come, as kube-apiserver's watch cache does
        without sendInitialEvents (the fake waited and answered 504); a list at one still
        waits and answers 504 Too large resource version, with Retry-After."""
        rv = int(self.c.create("configmaps", cm("f0"), namespace=self.ns)
                 ["metadata"]["resourceVersion"])
        w = self.c.watch("configmaps", self.ns, resource_version=str(rv + 2), timeout_seconds=10)
        got = []
        for i in range(1, 5):
            got.append(int(self.c.create("configmaps", cm("f%d" % i), namespace=self.ns)
                           ["metadata"]["resourceVersion"]))
        seen = []
        while True:
            ev = w.next_event(1.0)
            if ev is None:
                break
            seen.append(int(ev["object"]["metadata"]["resourceVersion"]))
        self.assertEqual(seen, [v for v in got if v > rv + 2])
        w.close()
        e = self.assertApiError(504, "Timeout", self.c.list, "configmaps", self.ns,
                                resource_version=str(rv + 10 ** 9))
        self.assertEqual(e.headers.get("Retry-After"), "1")

    def test_watch_from_rv_replays_history_then_live(self):
        rvs = []
        for i in range(4):
            rvs.append(self.c.create("configmaps", cm("m%d" % i), namespace=self.ns)
                       ["metadata"]["resourceVersion"])
        w = self.c.watch("configmaps", self.ns, resource_version=rvs[1], timeout_seconds=10)
        seen = []
        for i in range(2):
            ev = w.next_event(5)
            seen.append((ev["type"], ev["object"]["metadata"]["name"]))
        self.assertEqual(seen, [("ADDED", "m2"), ("ADDED", "m3")])
        self.assertEqual(w.next_event(0.3), None)
        self.c.patch("configmaps", "m0", {"data": {"k": "2"}}, self.ns)
        self.c.delete("configmaps", "m1", self.ns)
        ev1, ev2 = w.next_event(5), w.next_event(5)
        self.assertEqual((ev1["type"], ev1["object"]["metadata"]["name"],
                          ev1["object"]["data"]), ("MODIFIED", "m0", {"k": "2"}))
        self.assertEqual(ev1["object"]["kind"], "ConfigMap")
        self.assertEqual((ev2["type"], ev2["object"]["metadata"]["name"]), ("DELETED", "m1"))
        self.assertEqual(int(ev2["object"]["metadata"]["resourceVersion"]),
                         int(ev1["object"]["metadata"]["resourceVersion"]) + 1)
        w.close()
        # "0" and "" start with synthetic ADDED events of the current state
        for rv in ("0", None):
            w = self.c.watch("configmaps", self.ns, resource_version=rv, timeout_seconds=1)
            evs = list(w)
            self.assertEqual(w.ended, "clean")
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                             [("ADDED", "m0"), ("ADDED", "m2"), ("ADDED", "m3")])

    def test_chunked_framing_and_timeout(self):
        """Raw HTTP/1.1: chunked encoding, one JSON line per chunk, clean end on timeout."""
        self.c.create("configmaps", cm("a"), namespace=self.ns)
        self.c.create("configmaps", cm("b"), namespace=self.ns)
        ctx = ssl.create_default_context(cafile=FK.pki["ca"])
        sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", FK.port), timeout=10),
                               server_hostname="localhost")
        req = ("GET /api/v1/namespaces/%s/configmaps?watch=1&resourceVersion=0&"
               "timeoutSeconds=1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"
               "Accept: application/json\r\n\r\n" % (self.ns, FK.token))
        t0 = time.monotonic()
        sock.sendall(req.encode())
        f = sock.makefile("rb")
        status = f.readline()
        self.assertEqual(status, b"HTTP/1.1 200 OK\r\n")
        headers = {}
        while True:
            line = f.readline()
            if line == b"\r\n":
                break
            k, v = line.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()
        self.assertEqual(headers["transfer-encoding"], "chunked")
        self.assertEqual(headers["content-type"], "application/json")
        self.assertNotIn("content-length", headers)
        chunks = []
        while True:
            size = int(f.readline().strip(), 16)
            if size == 0:
                self.assertEqual(f.readline(), b"\r\n")
                break
            data = f.read(size)
            self.assertEqual(f.read(2), b"\r\n")
            chunks.append(data)
        elapsed = time.monotonic() - t0
        self.assertEqual(len(chunks), 2)
        for ch, name in zip(chunks, ("a", "b")):
            self.assertTrue(ch.endswith(b"\n"))
            self.assertEqual(ch.count(b"\n"), 1)
            ev = json.loads(ch)
            self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", name))
        self.assertGreaterEqual(elapsed, 0.9)
        self.assertLess(elapsed, 3.0)
        # keep-alive: the same connection serves the next request
        sock.sendall(("GET /version HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s"
                      "\r\n\r\n" % FK.token).encode())
        self.assertEqual(f.readline(), b"HTTP/1.1 200 OK\r\n")
        f.close()
        sock.close()

    def test_bookmarks(self):
        self.c.create("configmaps", cm("a"), namespace=self.ns)
        w = self.c.watch("configmaps", self.ns, resource_version="0", timeout_seconds=2,
                         allow_bookmarks=True)
        evs = list(w)
        self.assertEqual(evs[0]["type"], "ADDED")
        bms = [e for e in evs if e["type"] == "BOOKMARK"]
        self.assertGreaterEqual(len(bms), 3)  # 0.3 s interval over 2 s
        cur = self.c.list("configmaps", self.ns)["metadata"]["resourceVersion"]
        for b in bms:
            self.assertEqual(set(b["object"]), {"kind", "apiVersion", "metadata"})
            self.assertEqual(b["object"]["kind"], "ConfigMap")
            self.assertEqual(list(b["object"]["metadata"]), ["resourceVersion"])
            self.assertLessEqual(int(b["object"]["metadata"]["resourceVersion"]), int(cur))
        self.assertEqual(w.last_rv, bms[-1]["object"]["metadata"]["resourceVersion"])
        w = self.c.watch("configmaps", self.ns, resource_version="0", timeout_seconds=1)
        self.assertEqual([e["type"] for e in w], ["ADDED"])
        # streaming lists: initial events end with an annotated bookmark
        w = self.c.watch("configmaps", self.ns, allow_bookmarks=True, send_initial_events=True,
                         timeout_seconds=10)
        ev, bm = w.next_event(5), w.next_event(5)
        w.close()
        self.assertEqual(ev["type"], "ADDED")
        self.assertEqual(bm["type"], "BOOKMARK")
        self.assertEqual(bm["object"]["metadata"]["annotations"],
                         {"k8s.io/initial-events-end": "true"})
        # without bookmarks: the initial events all the same, and no bookmark to end them
        # (the cacher's isListWatchRequest wants both)
        w = self.c.watch("configmaps", self.ns, send_initial_events=True, timeout_seconds=1)
        self.assertEqual([e["type"] for e in w], ["ADDED"])

    def test_410_after_compaction_and_small_window(self):
        rv = self.c.create("configmaps", cm("a"), namespace=self.ns)["metadata"]["resourceVersion"]
        self.c.patch("configmaps", "a", {"data": {"k": "2"}}, self.ns)
        FK.compact()
        w = self.c.watch("configmaps", self.ns, resource_version=rv, timeout_seconds=5)
        evs = list(w)
        self.assertEqual(w.ended, "clean")
        self.assertEqual(len(evs), 1)
        self.assertEqual(evs[0]["type"], "ERROR")
        st = evs[0]["object"]
        self.assertEqual((st["kind"], st["code"], st["reason"], st["status"]),
                         ("Status", 410, "Expired", "Failure"))
        self.assertTrue(st["message"].startswith("too old resource version: %s (" % rv))
        # the current RV still resumes fine
        cur = self.c.list("configmaps", self.ns)["metadata"]["resourceVersion"]
        w = self.c.watch("configmaps", self.ns, resource_version=cur, timeout_seconds=1)
        self.assertEqual(list(w), [])
        # a bounded history window expires on its own; this server also checks plain HTTP,
        # --token-file, --faults and --verbose request logging
        tmp = os.path.join(FK.tmpdir, "small")
        os.makedirs(tmp)
        with open(os.path.join(tmp, "tokens.csv"), "w") as f:
            f.write('bob-token,bob,uid-7,"ops,viewers"\n')
        small = harness.start(tls=False, history=3, verbose=True, extra_args=(
            "--token-file", os.path.join(tmp, "tokens.csv")), faults=[
            {"action": "error", "verb": "delete", "status": 503, "retryAfter": 2}])
        try:
            self.assertTrue(small.url.startswith("http://"))
            sc = small.client()
            first = sc.create("configmaps", cm("x0"), namespace="default")["metadata"]
            for i in range(1, 6):
                sc.create("configmaps", cm("x%d" % i), namespace="default")
            evs = list(sc.watch("configmaps", "default", resource_version=first
                                ["resourceVersion"], timeout_seconds=2))
            self.assertEqual([e["type"] for e in evs], ["ERROR"])
            self.assertEqual(evs[0]["object"]["code"], 410)
            # windows are per resource, like the watch cache: secrets can still resume
            w = sc.watch("secrets", "default", resource_version=first["resourceVersion"],
                         timeout_seconds=5)
            self.assertIsNone(w.next_event(0.3))
            self.assertIsNone(w.ended)
            w.close()
            e = self.assertApiError(503, "ServiceUnavailable", sc.delete, "configmaps", "x1",
                                    "default")
            self.assertEqual(e.retry_after, 2)
            sc.delete("configmaps", "x1", "default")
            sc.close()
            path = harness.write_kubeconfig(os.path.join(tmp, "bob.yaml"), small.url,
                                            token="bob-token")
            bob = Client.from_kubeconfig(path)
            who = bob.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                              {"spec": {"resourceAttributes": {"verb": "get"}}})
            self.assertEqual((who["spec"]["user"], who["spec"]["groups"]),
                             ("bob", ["ops", "viewers", "system:authenticated"]))
            bob.close()
            log = small.log()
            self.assertRegex(log, r"fakekube: DELETE /api/v1/namespaces/default/configmaps/x1 "
                                  r"503 [0-9.]+ms user=e2e-admin")
            self.assertRegex(log, r"fakekube: POST /api/v1/namespaces/default/configmaps 201 ")
        finally:
            small.stop()
        self.assertFalse(small.alive())
        self.assertFalse(os.path.exists(small.tmpdir))

    def test_selector_watch_leave_and_enter(self):
        self.c.create("configmaps", cm("a", {"app": "llm"}), namespace=self.ns)
        self.c.create("configmaps", cm("b", {"app": "other"}), namespace=self.ns)
        w = self.c.watch("configmaps", self.ns, resource_version="0", label_selector="app=llm",
                         timeout_seconds=10)
        ev = w.next_event(5)
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "a"))
        left = self.c.patch("configmaps", "a", {"metadata": {"labels": {"app": "moved"}}},
                            self.ns)
        ev = w.next_event(5)
        self.assertEqual(ev["type"], "DELETED")
        self.assertEqual(ev["object"]["metadata"]["labels"], {"app": "llm"})
        self.assertEqual(ev["object"]["metadata"]["resourceVersion"],
                         left["metadata"]["resourceVersion"])
        self.c.patch("configmaps", "b", {"data": {"k": "ignored"}}, self.ns)
        self.c.patch("configmaps", "b", {"metadata": {"labels": {"app": "llm"}}}, self.ns)
        ev = w.next_event(5)
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "b"))
        self.c.patch("configmaps", "b", {"data": {"k": "x"}}, self.ns)
        ev = w.next_event(5)
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("MODIFIED", "b"))
        w.close()
        # field selector on one name, via the watch of a single object
        w = self.c.watch("configmaps", self.ns, resource_version="0", name="b",
                         timeout_seconds=1)
        self.assertEqual([e["object"]["metadata"]["name"] for e in w], ["b"])


class TestFaults(Base):
    def test_429_retry_after_and_other_errors(self):
        self.c.create("deployments", deployment("web"), namespace=self.ns)
        _, since = FK.requests()
        FK.fault({"action": "error", "verb": "patch", "resource": "deployments",
                  "subresource": "scale", "namespace": self.ns, "status": 429,
                  "retryAfter": 1, "count": 2})
        e = self.assertApiError(429, "TooManyRequests", self.c.patch_scale, "deployments", "web",
                                4, self.ns)
        self.assertEqual(e.retry_after, 1)
        self.assertEqual(e.headers.get("Retry-After"), "1")
        self.assertEqual(e.status["details"], {"retryAfterSeconds": 1})
        self.assertEqual(e.message, "Too many requests, please try again later.")
        # reads are not affected by the rule
        self.assertEqual(self.c.get_scale("deployments", "web", self.ns)["spec"]["replicas"], 1)
        retrying = FK.client(max_retries=3)
        t0 = time.monotonic()
        out = retrying.patch_scale("deployments", "web", 4, self.ns)
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertEqual(out["spec"]["replicas"], 4)
        retrying.close()
        # the fake logs a request once its response is sent (as an audit log's
        # ResponseComplete stage), so the last entry may trail the client by a moment

        def scale_patches():
            reqs, _ = FK.requests(since)
            return [(r["status"], r.get("fault") is not None) for r in reqs
                    if r["verb"] == "patch" and r["subresource"] == "scale"]
        deadline = time.monotonic() + 5
        while len(scale_patches()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(scale_patches(), [(429, True), (429, True), (200, False)])
        self.assertEqual(FK.faults(), [])
        # 500 and 409 with the real shapes; latency; reset
        FK.fault({"action": "error", "path": "/configmaps$", "verb": "list", "status": 500})
        e = self.assertApiError(500, "InternalError", self.c.list, "configmaps", self.ns)
        self.assertEqual(e.status["details"], {"causes": [{"message": "injected fault"}]})
        FK.fault({"action": "error", "verb": "update", "resource": "deployments", "status": 409})
        dep = self.c.get("deployments", "web", self.ns)
        self.assertApiError(409, "Conflict", self.c.update, "deployments", dep, self.ns)
        FK.fault({"action": "latency", "verb": "get", "resource": "deployments", "ms": 400,
                  "count": 1})
        t0 = time.monotonic()
        self.c.get("deployments", "web", self.ns)
        self.assertGreaterEqual(time.monotonic() - t0, 0.38)
        # a reset on a reused keep-alive connection is retried once on a new one, as Go does
        _, since = FK.requests()
        FK.fault({"action": "reset", "verb": "get", "resource": "configmaps", "count": 2})
        with self.assertRaises(ConnectionError):
            self.c.get("configmaps", "x", self.ns)

        def resets():  # the log entry of the second reset may trail the client's error
            reqs, _ = FK.requests(since)
            return [r["status"] for r in reqs if r["resource"] == "configmaps"]
        deadline = time.monotonic() + 5
        while len(resets()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(resets(), [0, 0])
        self.assertApiError(404, "NotFound", self.c.get, "configmaps", "x", self.ns)

    def test_drop_watches(self):
        w = self.c.watch("configmaps", self.ns, resource_version="0", timeout_seconds=30)
        w2 = self.c.watch("configmaps", self.ns, resource_version="0", timeout_seconds=30)
        wait_for(lambda: FK.state()["watches"] >= 2, 5)
        FK.drop_watches(clean=True, resource="configmaps")
        self.assertEqual(list(w), [])
        self.assertEqual(w.ended, "clean")
        self.assertEqual(list(w2), [])
        w = self.c.watch("configmaps", self.ns, resource_version="0", timeout_seconds=30)
        wait_for(lambda: FK.state()["watches"] >= 1, 5)
        FK.drop_watches()
        with self.assertRaises(WatchBroken):
            list(w)
        self.assertEqual(w.ended, "broken")

    def test_server_notices_closed_watch(self):
        base = FK.state()["watches"]
        w = self.c.watch("configmaps", self.ns, resource_version="0", timeout_seconds=60)
        wait_for(lambda: FK.state()["watches"] == base + 1, 5)
        w.close()
        wait_for(lambda: FK.state()["watches"] == base, 5, message="watch unregistered")

    def test_restart_mid_watch_and_resume(self):
        fk = harness.start(bookmark_interval="0.3s")
        try:
            c = fk.client()
            c.create("deployments", deployment("web"), namespace="default")
            w = c.watch("deployments", "default", resource_version="0", timeout_seconds=30)
            ev = w.next_event(5)
            self.assertEqual(ev["type"], "ADDED")
            c.patch_scale("deployments", "web", 2, "default")
            ev = w.next_event(5)
            self.assertEqual((ev["type"], ev["object"]["spec"]["replicas"]), ("MODIFIED", 2))
            last = w.last_rv
            fk.restart(delay=0.5, wait=False)
            with self.assertRaises(WatchBroken):
                while True:
                    if w.next_event(5) is None and w.ended == "clean":
                        self.fail("watch ended cleanly on restart")
            # while the listener is down requests fail; once it is back, state is intact
            got = wait_for(lambda: c.get("deployments", "web", "default"), 10, interval=0.1)
            self.assertEqual(got["spec"]["replicas"], 2)
            self.assertEqual(fk.state()["restarts"], 1)
            c.patch_scale("deployments", "web", 3, "default")
            c.create("deployments", deployment("api"), namespace="default")
            c.delete("deployments", "api", "default")
            w = c.watch("deployments", "default", resource_version=last, timeout_seconds=10)
            seen = [w.next_event(5) for _ in range(3)]
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in seen],
                             [("MODIFIED", "web"), ("ADDED", "api"), ("DELETED", "api")])
            self.assertEqual(seen[0]["object"]["spec"]["replicas"], 3)
            rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in seen]
            self.assertEqual(rvs, sorted(rvs))
            self.assertEqual(rvs[0], int(last) + 1)
            w.close()
            c.close()
        finally:
            fk.stop()
        self.assertFalse(fk.alive())


class TestKubeconfig(unittest.TestCase):
    def test_yaml_subset(self):
        from fakekube.kubeclient import parse_yaml_subset
        text = """# written by kubectl
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLQ==
    server: https://10.0.0.1:6443   # comment
  name: prod
- cluster:
    insecure-skip-tls-verify: true
    server: 'https://127.0.0.1:1'
  name: "dev"
contexts:
- context:
    cluster: dev
    namespace: gpu
    user: dev-user
  name: dev
current-context: dev
kind: Config
preferences: {}
users:
- name: dev-user
  user:
    token: "abc:def"
    extra:
      - a
      - b
"""
        doc = parse_yaml_subset(text)
        self.assertEqual(doc["clusters"][0], {"cluster": {
            "certificate-authority-data": "LS0tLQ==", "server": "https://10.0.0.1:6443"},
            "name": "prod"})
        self.assertEqual(doc["clusters"][1]["cluster"]["insecure-skip-tls-verify"], True)
        self.assertEqual(doc["clusters"][1]["name"], "dev")
        self.assertEqual(doc["preferences"], {})
        self.assertEqual(doc["users"][0]["user"], {"token": "abc:def", "extra": ["a", "b"]})
        path = os.path.join(FK.tmpdir, "dev.yaml")
        with open(path, "w") as f:
            f.write(text)
        kc = KubeConfig.load(path)
        self.assertEqual((kc.server, kc.namespace, kc.bearer(), kc.insecure),
                         ("https://127.0.0.1:1", "gpu", "abc:def", True))
        # the kubeconfig fakekube writes itself (--write-kubeconfig) loads too
        kc = KubeConfig.load(FK.token_kubeconfig)
        self.assertEqual((kc.server, kc.bearer()), (FK.url, FK.token))
        self.assertTrue(kc.ca_data.startswith(b"-----BEGIN CERTIFICATE-----"))


class TestKinds(Base):
    def test_pod_graceful_deletion(self):
        """A pod is deleted as the pod strategy's CheckGracefulDelete and rest.BeforeDelete
        say: one bound to a node is only marked (deletionTimestamp now plus its period,
        deletionGracePeriodSeconds) until a DELETE with period 0 (the kubelet's), which writes
        the period first and then deletes it; a later DELETE may only shorten the period.
        One not bound, or ended, is deleted at once, its period 0 written first too."""
        def stamp(o):
            return datetime.datetime.strptime(o["metadata"]["deletionTimestamp"],
                                              "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=datetime.timezone.utc).timestamp()

        def bound(name, **spec):
            p = pod(name)
            p["spec"].update(nodeName="gpu-node-1", **spec)
            return self.c.create("pods", p, self.ns)

        # not bound: the period written (MODIFIED), then DELETED; answered with the pod
        rv = self.c.create("pods", pod("u"), self.ns)["metadata"]["resourceVersion"]
        w = self.c.watch("pods", self.ns, resource_version=rv, name="u")
        try:
            out = self.c.delete("pods", "u", self.ns)
            self.assertEqual(out["metadata"]["deletionGracePeriodSeconds"], 0)
            evs = [w.next_event(5), w.next_event(5)]
        finally:
            w.close()
        self.assertEqual([e["type"] for e in evs], ["MODIFIED", "DELETED"])
        self.assertEqual(evs[0]["object"]["metadata"]["deletionGracePeriodSeconds"], 0)
        self.assertLess(int(rv), int(evs[0]["object"]["metadata"]["resourceVersion"]))
        self.assertLess(int(evs[0]["object"]["metadata"]["resourceVersion"]),
                        int(evs[1]["object"]["metadata"]["resourceVersion"]))
        self.assertApiError(404, "NotFound", self.c.get, "pods", "u", self.ns)
        # bound: marked with its spec's period (30 by default), and kept
        bound("b")
        t0 = time.time()
        out = self.c.delete("pods", "b", self.ns)
        self.assertEqual(out["metadata"]["deletionGracePeriodSeconds"], 30)
        self.assertLess(abs(stamp(out) - (t0 + 30)), 3)
        got = self.c.get("pods", "b", self.ns)
        self.assertEqual(got["metadata"], out["metadata"])
        # a DELETE without a period, or with a longer one, answers it as it is
        self.assertEqual(self.c.delete("pods", "b", self.ns)["metadata"], got["metadata"])
        again = self.c.delete("pods", "b", self.ns, grace_period_seconds=45)
        self.assertEqual(again["metadata"], got["metadata"])
        # ... its options' GC finalizers not applied (202: orphanDependents false)
        code, _, body = self.c.raw("DELETE", self.c.path("pods", self.ns, "b"),
                                   {"orphanDependents": False})
        self.assertEqual((code, json.loads(body)["metadata"]), (202, got["metadata"]))
        # a shorter one moves deletionTimestamp back by the difference
        short = self.c.delete("pods", "b", self.ns, grace_period_seconds=10)
        self.assertEqual(short["metadata"]["deletionGracePeriodSeconds"], 10)
        self.assertEqual(stamp(short), stamp(got) - 20)
        # removing everything else leaves it: only a DELETE ends a graceful period
        self.c.patch("pods", "b", {"metadata": {"labels": {"x": "y"}}}, self.ns)
        self.assertEqual(self.c.get("pods", "b", self.ns)["metadata"]["labels"], {"x": "y"})
        # the kubelet's DELETE with period 0 deletes it
        gone = self.c.delete("pods", "b", self.ns, grace_period_seconds=0)
        self.assertEqual(gone["metadata"]["deletionGracePeriodSeconds"], 0)
        self.assertApiError(404, "NotFound", self.c.get, "pods", "b", self.ns)
        # a finalizer holds it after its period is over, until the period-0 DELETE
        bound("f", terminationGracePeriodSeconds=5)
        self.c.patch("pods", "f", {"metadata": {"finalizers": ["example.com/f"]}}, self.ns)
        out = self.c.delete("pods", "f", self.ns)
        self.assertEqual(out["metadata"]["deletionGracePeriodSeconds"], 5)
        self.c.patch("pods", "f", {"metadata": {"finalizers": None}}, self.ns)
        self.assertNotIn("finalizers", self.c.get("pods", "f", self.ns)["metadata"])
        self.c.delete("pods", "f", self.ns, grace_period_seconds=0)
        self.assertApiError(404, "NotFound", self.c.get, "pods", "f", self.ns)
        # and with the finalizer still on, the period-0 DELETE only marks it
        bound("g")
        self.c.patch("pods", "g", {"metadata": {"finalizers": ["example.com/f"]}}, self.ns)
        out = self.c.delete("pods", "g", self.ns, grace_period_seconds=0)
        self.assertEqual(out["metadata"]["deletionGracePeriodSeconds"], 0)
        self.c.patch("pods", "g", {"metadata": {"finalizers": None}}, self.ns)
        self.assertApiError(404, "NotFound", self.c.get, "pods", "g", self.ns)
        # a negative period is 1 s; an ended pod goes at once
        bound("n")
        self.assertEqual(self.c.delete("pods", "n", self.ns, grace_period_seconds=-5)
                         ["metadata"]["deletionGracePeriodSeconds"], 1)
        bound("s")
        self.c.patch("pods", "s", {"status": {"phase": "Succeeded"}}, self.ns,
                     subresource="status")
        self.c.delete("pods", "s", self.ns)
        self.assertApiError(404, "NotFound", self.c.get, "pods", "s", self.ns)

    def test_pod_binding(self):
        """pods/binding, as the scheduler assigns a pod: once, never again, create only."""
        self.c.create("pods", pod("p"), self.ns)
        path = self.c.path("pods", self.ns, "p", "binding")
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1"}}
        # the scheduler said it cannot place it; then a node came
        self.c.patch("pods", "p", {"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
             "lastProbeTime": None, "lastTransitionTime": "2024-05-01T10:00:00Z"}]}},
            self.ns, subresource="status")
        uid = self.c.get("pods", "p", self.ns)["metadata"]["uid"]
        e = self.assertApiError(409, "Conflict", self.c.request, "POST", path,
                                dict(binding, metadata={"name": "p", "uid": "other"}))
        self.assertEqual(e.message, 'Operation cannot be fulfilled on pods "p": Precondition '
                                    'failed: UID in precondition: other, UID in object meta: '
                                    '%s' % uid)
        t0 = time.time()
        st = self.c.request("POST", path, dict(binding, metadata={"name": "p", "uid": uid}))
        self.assertEqual((st["kind"], st["status"], st["code"]), ("Status", "Success", 201))
        got = self.c.get("pods", "p", self.ns)
        self.assertEqual(got["spec"]["nodeName"], "gpu-node-1")
        # in the same update, as the real BindingREST: PodScheduled=True, reason and message
        # gone, its transition time the binding's
        conds = [c for c in got["status"]["conditions"] if c["type"] == "PodScheduled"]
        self.assertEqual(len(conds), 1)
        self.assertEqual(conds[0]["status"], "True")
        self.assertNotIn("reason", conds[0])
        self.assertNotIn("message", conds[0])
        ts = datetime.datetime.strptime(conds[0]["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")
        self.assertLess(abs(ts.replace(tzinfo=datetime.timezone.utc).timestamp() - t0), 3)
        e = self.assertApiError(409, "Conflict", self.c.request, "POST", path, binding)
        self.assertEqual(e.message, 'Operation cannot be fulfilled on pods/binding "p": pod p '
                                    'is already assigned to node "gpu-node-1"')
        self.assertApiError(405, "MethodNotAllowed", self.c.request, "GET", path)
        self.assertApiError(422, "Invalid", self.c.request, "POST",
                            self.c.path("pods", self.ns, "p", "binding"), {"target": {}})
        self.assertApiError(404, "NotFound", self.c.request, "POST",
                            self.c.path("pods", self.ns, "nope", "binding"), binding)
        subs = {r["name"]: r for r in self.c.request("GET", "/api/v1")["resources"]}
        self.assertEqual(subs["pods/binding"]["verbs"], ["create"])
        # a pod still gated is not bound
        gated = pod("g")
        gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
        self.c.create("pods", gated, self.ns)
        e = self.assertApiError(409, "Conflict", self.c.request, "POST",
                                self.c.path("pods", self.ns, "g", "binding"),
                                dict(binding, metadata={"name": "g"}))
        self.assertEqual(e.message, 'Operation cannot be fulfilled on pods/binding "g": pod g '
                                    'has non-empty .spec.schedulingGates')

    def test_leases(self):
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "gpuscaler-leader"},
                 "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                          "acquireTime": "2024-01-01T00:00:00.000000Z",
                          "renewTime": "2024-01-01T00:00:00.000000Z", "leaseTransitions": 0}}
        created = self.c.create("leases", lease, namespace=self.ns)
        other = FK.client(FK.cert_kubeconfig)
        mine = self.c.get("leases", "gpuscaler-leader", self.ns)
        theirs = other.get("leases", "gpuscaler-leader", self.ns)
        mine["spec"]["renewTime"] = "2024-01-01T00:00:05.000000Z"
        renewed = self.c.update("leases", mine, self.ns)
        self.assertNotEqual(renewed["metadata"]["resourceVersion"],
                            created["metadata"]["resourceVersion"])
        theirs["spec"]["holderIdentity"] = "b"
        theirs["spec"]["leaseTransitions"] = 1
        e = self.assertApiError(409, "Conflict", other.update, "leases", theirs, self.ns)
        self.assertIn('leases.coordination.k8s.io "gpuscaler-leader"', e.message)
        self.assertEqual(self.c.get("leases", "gpuscaler-leader", self.ns)["spec"]
                         ["holderIdentity"], "a")
        self.assertNotIn("generation", renewed["metadata"])
        bad = json.loads(json.dumps(lease))
        bad["metadata"]["name"] = "bad"
        bad["spec"]["leaseDurationSeconds"] = 0
        e = self.assertApiError(422, "Invalid", self.c.create, "leases", bad, self.ns)
        self.assertIn("spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                      e.message)
        other.close()

    def test_lease_put_creates_and_needs_a_resource_version(self):
        """Lease's registry strategy: a PUT of a missing Lease creates it (201, whatever
        resourceVersion the body carries: AllowCreateOnUpdate), and a PUT without
        metadata.resourceVersion is refused (AllowUnconditionalUpdate false). A ConfigMap is the
        other way round: 404, and an unconditional update is taken."""
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "l", "resourceVersion": "12345"},
                 "spec": {"holderIdentity": "a", "leaseDurationSeconds": 4}}
        code, _, payload = self.c.raw("PUT", self.c.path("leases", self.ns, "l"), lease)
        self.assertEqual(code, 201, payload)
        made = json.loads(payload)
        got = self.c.get("leases", "l", self.ns)
        self.assertEqual(got["metadata"]["uid"], made["metadata"]["uid"])
        self.assertEqual(got["spec"]["holderIdentity"], "a")
        # once it exists, the same PUT is an update: its stale resourceVersion conflicts
        code, _, payload = self.c.raw("PUT", self.c.path("leases", self.ns, "l"), lease)
        self.assertEqual(code, 409, payload)
        del got["metadata"]["resourceVersion"]
        e = self.assertApiError(422, "Invalid", self.c.update, "leases", got, self.ns)
        self.assertEqual(e.message, 'leases.coordination.k8s.io "l" is invalid: '
                                    'metadata.resourceVersion: Invalid value: 0x0: must be '
                                    'specified for an update')
        self.assertEqual(e.status["details"]["causes"],
                         [{"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                           "message": "Invalid value: 0x0: must be specified for an update"}])
        e = self.assertApiError(400, "BadRequest", self.c.request, "PUT",
                                self.c.path("leases", self.ns, "n"),
                                dict(lease, metadata={"name": "m"}))
        self.assertEqual(e.message, "the name of the object (m) does not match the name on "
                                    "the URL (n)")
        self.assertIsNone(self.c.get_or_none("leases", "n", self.ns))
        self.assertApiError(404, "NotFound", self.c.update, "configmaps", cm("x"), self.ns)
        self.c.create("configmaps", cm("y"), namespace=self.ns)
        self.assertEqual(self.c.update("configmaps", cm("y", data={"k": "w"}), self.ns)["data"],
                         {"k": "w"})

    def test_unknown_fields_are_dropped_with_a_warning(self):
        """fieldValidation Warn, the default: a field the kind's Go type does not have is dropped
        from what is stored and named in a Warning header (here a misspelt Lease field, which
        a fake that kept it would hand back on the next read)."""
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "w"},
                 "spec": {"holderIdentity": "a", "leaseDurationSecond": 4}}
        code, headers, payload = self.c.raw("POST", self.c.path("leases", self.ns), lease)
        self.assertEqual(code, 201, payload)
        self.assertEqual(headers.get("Warning"),
                         '299 - "unknown field \\"spec.leaseDurationSecond\\""')
        got = self.c.get("leases", "w", self.ns)
        self.assertEqual(got["spec"], {"holderIdentity": "a"})
        got["bogus"] = 1
        got["metadata"]["colour"] = "red"
        got["spec"]["leaseDurationSeconds"] = 4
        code, headers, payload = self.c.raw("PUT", self.c.path("leases", self.ns, "w"), got)
        self.assertEqual(code, 200, payload)
        self.assertIn(headers.get("Warning"), ('299 - "unknown field \\"bogus\\""',
                                               '299 - "unknown field \\"metadata.colour\\""'))
        got = self.c.get("leases", "w", self.ns)
        self.assertNotIn("bogus", got)
        self.assertNotIn("colour", got["metadata"])
        self.assertEqual(got["spec"]["leaseDurationSeconds"], 4)
        code, headers, payload = self.c.raw("PATCH", self.c.path("configmaps", self.ns, "none"),
                                            {"x": 1}, content_type="application/merge-patch+json")
        self.assertEqual(code, 404, payload)
        self.c.create("configmaps", cm("c"), namespace=self.ns)
        since = FK.writes()["next"]
        code, headers, payload = self.c.raw("PATCH", self.c.path("configmaps", self.ns, "c"),
                                            {"datum": {"a": "b"}},
                                            content_type="application/merge-patch+json")
        self.assertEqual(code, 200, payload)
        self.assertEqual(headers.get("Warning"), '299 - "unknown field \\"datum\\""')
        self.assertNotIn("datum", self.c.get("configmaps", "c", self.ns))
        # the write log says which writes had fields dropped
        last = self.write_after(since, "patch", namespace=self.ns, name="c")
        self.assertEqual(last["warnings"], ['299 - "unknown field \\"datum\\""'])
        code, headers, payload = self.c.raw("PATCH", self.c.path("configmaps", self.ns, "c"),
                                            {"data": {"a": "b"}},
                                            content_type="application/merge-patch+json")
        self.assertEqual(code, 200, payload)
        self.assertNotIn("Warning", headers)

    def test_maps_are_served_in_key_order(self):
        """A map (labels, annotations, a ConfigMap's data, a selector's matchLabels) comes back
        with its keys sorted, as encoding/json writes a Go map, whatever order the body had,
        after a patch too."""
        body = (b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "order", '
                b'"labels": {"z": "1", "a": "2", "m": "3"}, "annotations": {"y/b": "1", '
                b'"x/a": "2"}}, "data": {"b": "1", "a": "2", "B": "3"}}')
        code, _, payload = self.c.raw("POST", self.c.path("configmaps", self.ns), body)
        self.assertEqual(code, 201, payload)
        for raw in (payload, self.c.raw("GET", self.c.path("configmaps", self.ns, "order"))[2]):
            got = json.loads(raw)   # a dict keeps the order the text has
            self.assertEqual(list(got["metadata"]["labels"]), ["a", "m", "z"])
            self.assertEqual(list(got["metadata"]["annotations"]), ["x/a", "y/b"])
            self.assertEqual(list(got["data"]), ["B", "a", "b"])   # byte order
            self.assertEqual(list(got["metadata"])[:2], ["name", "namespace"])
        # a merge patch adding a key: still in order
        code, _, payload = self.c.raw("PATCH", self.c.path("configmaps", self.ns, "order"),
                                      {"metadata": {"labels": {"b": "4"}}},
                                      content_type="application/merge-patch+json")
        self.assertEqual(code, 200, payload)
        got = json.loads(payload)
        self.assertEqual(list(got["metadata"]["labels"]), ["a", "b", "m", "z"])
        self.assertEqual(list(got["data"]), ["B", "a", "b"])

    def test_repeated_fields(self):
        """A field a body names twice: the last value is kept (merged into the first where both
        are objects) and it is named as sigs.k8s.io/json names it, in the order the body has
        them, among the unknown fields (the messages of kube-apiserver's own
        field_validation_test.go for these bodies, less the Pod spec's unknown field, whose
        type the fake does not transcribe). A patch names its own repeated fields first, then
        the patched object's unknown ones in sorted order; a JSON patch its operations'."""
        body = b"""{"apiVersion": "apps/v1", "kind": "Deployment",
          "metadata": {"name": "dupename", "name": "rep", "unknownMeta": "metaVal",
                       "labels": {"app": "rep"}},
          "metadata": {"annotations": {"a": "1"}},
          "spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
                   "paused": true, "paused": false, "replicas": 1,
                   "selector": {"matchLabels": {"app": "rep"}},
                   "template": {"metadata": {"labels": {"app": "rep"}},
                                "spec": {"containers": [{"name": "nginx", "image": "nginx",
                                                         "imagePullPolicy": "Always",
                                                         "imagePullPolicy": "Never"}]}}}}"""
        expect = ['duplicate field "metadata.name"', 'unknown field "metadata.unknownMeta"',
                  'duplicate field "metadata"', 'unknown field "spec.unknown1"',
                  'unknown field "spec.unknownDupe"', 'duplicate field "spec.paused"',
                  'duplicate field '
                  '"spec.template.spec.containers[0].imagePullPolicy"']
        path = self.c.path("deployments", self.ns)
        code, _, payload = self.c.raw("POST", path, body, params={"fieldValidation": "Strict"})
        self.assertEqual(code, 400, payload)
        self.assertEqual(json.loads(payload)["message"],
                         'Deployment in version "v1" cannot be handled as a Deployment: strict '
                         'decoding error: ' + ", ".join(expect))
        self.assertIsNone(self.c.get_or_none("deployments", "rep", self.ns))
        since = FK.writes()["next"]
        code, headers, payload = self.c.raw("POST", path, body)
        self.assertEqual(code, 201, payload)
        warned = self.write_after(since, "create", namespace=self.ns, name="rep")["warnings"]
        self.assertEqual(warned, ['299 - "%s"' % e.replace('"', '\\"') for e in expect])
        got = self.c.get("deployments", "rep", self.ns)
        # the second metadata merged into the first; the last of each scalar kept
        self.assertEqual(got["metadata"]["labels"], {"app": "rep"})
        self.assertEqual(got["metadata"]["annotations"], {"a": "1"})
        self.assertIs(got["spec"]["paused"], False)
        self.assertNotIn("unknown1", got["spec"])
        self.assertEqual(got["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
                         "Never")
        # Ignore: no warning
        ign = body.replace(b'"rep"', b'"rep2"')
        code, headers, payload = self.c.raw("POST", path, ign, params={"fieldValidation":
                                                                        "Ignore"})
        self.assertEqual(code, 201, payload)
        self.assertNotIn("Warning", headers)
        # a merge patch: its repeated fields (unknown ones too: it is decoded as a map),
        # then the patched object's unknown fields, sorted
        dpath = self.c.path("deployments", self.ns, "rep")
        patch = b"""{"spec": {"unknown1": "val1", "unknownDupe": "valDupe",
                              "unknownDupe": "valDupe2", "paused": true, "paused": false,
                              "template": {"spec": {"containers": [{"name": "nginx",
                                  "image": "nginx", "imagePullPolicy": "Always",
                                  "imagePullPolicy": "IfNotPresent"}]}}}}"""
        pexpect = ['duplicate field "spec.unknownDupe"', 'duplicate field "spec.paused"',
                   'duplicate field "spec.template.spec.containers[0].imagePullPolicy"',
                   'unknown field "spec.unknown1"', 'unknown field "spec.unknownDupe"']
        for ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            code, _, payload = self.c.raw("PATCH", dpath, patch, content_type=ctype,
                                          params={"fieldValidation": "Strict"})
            self.assertEqual(code, 422, payload)
            self.assertTrue(json.loads(payload)["message"].endswith(
                '": strict decoding error: ' + ", ".join(pexpect)), payload)
            since = FK.writes()["next"]
            code, _, payload = self.c.raw("PATCH", dpath, patch, content_type=ctype)
            self.assertEqual(code, 200, payload)
            warned = self.write_after(since, "patch", namespace=self.ns,
                                      name="rep").get("warnings")
            self.assertEqual(warned, ['299 - "%s"' % e.replace('"', '\\"') for e in pexpect])
        got = self.c.get("deployments", "rep", self.ns)
        self.assertEqual(got["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
                         "IfNotPresent")
        # a JSON patch: its operations' unknown and repeated fields
        ops = b"""[{"op": "add", "path": "/spec/unknown1", "value": "val1", "foo": "bar"},
                   {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3",
                    "value": "val1"},
                   {"op": "add", "path": "/spec/paused", "value": true}]"""
        since = FK.writes()["next"]
        code, _, payload = self.c.raw("PATCH", dpath, ops,
                                      content_type="application/json-patch+json")
        self.assertEqual(code, 200, payload)
        warned = self.write_after(since, "patch", namespace=self.ns, name="rep").get("warnings")
        self.assertEqual(warned, ['299 - "json patch unknown field \\"[0].foo\\""',
                                  '299 - "json patch duplicate field \\"[1].path\\""',
                                  '299 - "unknown field \\"spec.unknown1\\""',
                                  '299 - "unknown field \\"spec.unknown3\\""'])
        self.assertIs(self.c.get("deployments", "rep", self.ns)["spec"]["paused"], True)
        # the scale subresource decodes a Scale as strictly
        spath = self.c.path("deployments", self.ns, "rep", "scale")
        since = FK.writes()["next"]
        code, _, payload = self.c.raw("PATCH", spath,
                                      b'{"spec": {"replicas": 3, "replicas": 4, "replica": 1}}',
                                      content_type="application/merge-patch+json")
        self.assertEqual(code, 200, payload)
        self.assertEqual(json.loads(payload)["spec"]["replicas"], 4)
        warned = self.write_after(since, "patch", namespace=self.ns, name="rep").get("warnings")
        self.assertEqual(warned, ['299 - "duplicate field \\"spec.replicas\\""',
                                  '299 - "unknown field \\"spec.replica\\""'])
        code, _, payload = self.c.raw("PUT", spath,
                                      b'{"kind": "Scale", "apiVersion": "autoscaling/v1", '
                                      b'"metadata": {"name": "rep"}, "spec": {"replicas": 2}, '
                                      b'"spec": {"replicaz": 5}}',
                                      params={"fieldValidation": "Strict"})
        self.assertEqual(code, 400, payload)
        self.assertEqual(json.loads(payload)["message"],
                         'Scale in version "v1" cannot be handled as a Scale: strict decoding '
                         'error: duplicate field "spec", unknown field "spec.replicaz"')

    def test_type_errors(self):
        """A value that Go cannot decode into its field fails the write as kube-apiserver's
        decoder fails it (400 `json: cannot unmarshal ... into Go struct field
        DeploymentSpec.spec.replicas of type int32`; a patch: 422 about `patch`), whatever the
        fieldValidation; a null where Go keeps a zero value is stored as that value."""
        def refused(path, body, message, method="POST"):
            code, _, payload = self.c.raw(method, path, body,
                                          params={"fieldValidation": "Ignore"})
            self.assertEqual(code, 400, payload)
            st = json.loads(payload)
            self.assertEqual(st["reason"], "BadRequest")
            self.assertEqual(st["message"], message)
        cms = self.c.path("configmaps", self.ns)
        head = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        refused(cms, {"metadata": {"name": "a", "annotations": {"k": 1}}},
                head + "number into Go struct field ObjectMeta.metadata.annotations of type "
                "string")
        refused(cms, {"metadata": {"name": "a"}, "data": ["x"]},
                head + "array into Go struct field ConfigMap.data of type map[string]string")
        refused(cms, {"metadata": {"name": "a", "generation": "1"}},
                head + "string into Go struct field ObjectMeta.metadata.generation of type int64")
        refused(cms, {"metadata": "a"},
                head + "string into Go struct field ConfigMap.metadata of type v1.ObjectMeta")
        refused(cms, {"metadata": {"name": "a", "finalizers": ["x/y", 2]}},
                head + "number into Go struct field ObjectMeta.metadata.finalizers of type string")
        # the first in the body's order
        refused(cms, b'{"immutable": "no", "metadata": {"name": "a", "labels": {"k": true}}}',
                head + "string into Go struct field ConfigMap.immutable of type bool")
        self.assertEqual(self.c.list("configmaps", self.ns)["items"], [])
        got = self.c.create("configmaps", {"metadata": {"name": "n"}, "data": {"a": None},
                                           "immutable": None}, namespace=self.ns)
        self.assertEqual(got["data"], {"a": ""})
        self.assertNotIn("immutable", got)
        # binaryData: base64, or an array of bytes as Go decodes a []byte
        refused(cms, {"metadata": {"name": "b"}, "binaryData": {"x": 5}},
                head + "number into Go struct field ConfigMap.binaryData of type []uint8")
        refused(cms, {"metadata": {"name": "b"}, "binaryData": {"x": [104, 256]}},
                head + "number 256 into Go struct field ConfigMap.binaryData of type uint8")
        got = self.c.create("configmaps", {"metadata": {"name": "b"},
                                           "binaryData": {"x": [104, 105]}}, namespace=self.ns)
        self.assertEqual(got["binaryData"], {"x": "aGk="})
        deps = self.c.path("deployments", self.ns)
        head = ('Deployment in version "v1" cannot be handled as a Deployment: json: cannot '
                'unmarshal ')
        for value, what in (("3", "string"), (3.5, "number 3.5"),
                            (3000000000, "number 3000000000")):
            d = deployment("d")
            d["spec"]["replicas"] = value
            refused(deps, d, head + "%s into Go struct field DeploymentSpec.spec.replicas of "
                    "type int32" % what)
        refused(deps, json.dumps(deployment("d")).replace('"replicas": 1', '"replicas": 1.0')
                .encode(),
                head + "number 1.0 into Go struct field DeploymentSpec.spec.replicas of type int32")
        d = deployment("d")
        d["spec"]["template"]["metadata"]["labels"] = {"app": 1}
        refused(deps, d, head + "number into Go struct field ObjectMeta.spec.template.metadata."
                "labels of type string")
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": "15"}}
        refused(self.c.path("leases", self.ns), lease,
                'Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal '
                'string into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32')
        # PUT and PATCH of an existing object, and the scale subresource
        self.c.create("deployments", deployment("d"), namespace=self.ns)
        cur = self.c.get("deployments", "d", self.ns)
        cur["spec"]["paused"] = "yes"
        refused(self.c.path("deployments", self.ns, "d"), cur, head + "string into Go struct "
                "field DeploymentSpec.spec.paused of type bool", method="PUT")
        for path, patch, msg in (
                (self.c.path("deployments", self.ns, "d"), {"spec": {"replicas": "2"}},
                 "json: cannot unmarshal string into Go struct field DeploymentSpec.spec."
                 "replicas of type int32"),
                (self.c.path("deployments", self.ns, "d", "scale"), {"spec": {"replicas": "2"}},
                 "json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas "
                 "of type int32")):
            code, _, payload = self.c.raw("PATCH", path, patch,
                                          content_type="application/merge-patch+json")
            self.assertEqual(code, 422, payload)
            st = json.loads(payload)
            self.assertTrue(st["message"].startswith(' "" is invalid: patch: Invalid value: '),
                            st["message"])
            self.assertTrue(st["message"].endswith('": ' + msg), st["message"])
        code, _, payload = self.c.raw("PUT", self.c.path("deployments", self.ns, "d", "scale"),
                                      {"kind": "Scale", "apiVersion": "autoscaling/v1",
                                       "metadata": {"name": "d"}, "spec": {"replicas": 2.5}})
        self.assertEqual(code, 400, payload)
        self.assertEqual(json.loads(payload)["message"],
                         'Scale in version "v1" cannot be handled as a Scale: json: cannot '
                         'unmarshal number 2.5 into Go struct field ScaleSpec.spec.replicas of '
                         'type int32')
        self.assertEqual(self.c.get("deployments", "d", self.ns)["spec"]["replicas"], 1)

    def test_strategic_merge_patch_converts(self):
        """A strategic merge patch's object is not decoded from JSON but converted from a map
        (runtime.DefaultUnstructuredConverter), with that converter's rules and messages: a
        whole float fits an integer field (3.0 is 3), an integer is truncated to its field's
        width (4294967298 into an int32 is 2), other mismatches fail with the converter's
        error, not the JSON decoder's (a 422 about `patch` showing the patch's Go map); the
        converter's unknown fields come sorted by their messages."""
        smp = "application/strategic-merge-patch+json"
        self.c.create("deployments", deployment("d"), namespace=self.ns)
        dpath = self.c.path("deployments", self.ns, "d")
        spath = self.c.path("deployments", self.ns, "d", "scale")

        def refused(path, patch, shown, msg, params=None):
            code, _, payload = self.c.raw("PATCH", path, patch, content_type=smp,
                                          params=params)
            self.assertEqual(code, 422, payload)
            st = json.loads(payload)
            self.assertEqual(st["reason"], "Invalid")
            self.assertEqual(st["message"], ' "" is invalid: patch: Invalid value: %s: %s'
                             % (json.dumps(shown), msg))
            self.assertEqual(st["details"]["causes"][0]["field"], "patch")

        for path in (dpath, spath):
            refused(path, {"spec": {"replicas": "2"}}, "map[spec:map[replicas:2]]",
                    "unrecognized type: int32")
            refused(path, {"spec": {"replicas": 2.5}}, "map[spec:map[replicas:2.5]]",
                    "cannot convert float64 to int32")
            refused(path, {"spec": {"replicas": True}}, "map[spec:map[replicas:true]]",
                    "unrecognized type: int32")
        refused(dpath, {"spec": "x"}, "map[spec:x]", "cannot restore struct from: string")
        refused(dpath, {"spec": {"paused": 1}}, "map[spec:map[paused:1]]",
                "unrecognized type: bool")
        refused(dpath, {"metadata": {"labels": {"a": 1}}}, "map[metadata:map[labels:map[a:1]]]",
                "cannot convert int64 to string")
        refused(dpath, {"metadata": {"finalizers": "x"}}, "map[metadata:map[finalizers:x]]",
                "cannot restore slice from string")
        # the Go type's field order, not the map's: spec.replicas before spec.paused
        refused(dpath, {"spec": {"paused": "no", "replicas": "1"}},
                "map[spec:map[paused:no replicas:1]]", "unrecognized type: int32")
        # the JSON decoder's message for the same patch sent as a merge patch
        code, _, payload = self.c.raw("PATCH", dpath, {"spec": {"replicas": 3.0}},
                                      content_type="application/merge-patch+json")
        self.assertEqual(code, 422, payload)
        self.assertTrue(json.loads(payload)["message"].endswith(
            "json: cannot unmarshal number 3.0 into Go struct field DeploymentSpec.spec.replicas "
            "of type int32"), payload)
        self.assertEqual(self.c.get("deployments", "d", self.ns)["spec"]["replicas"], 1)
        # what converts: a whole float, an int64 truncated to int32
        for path, value, want in ((dpath, 3.0, 3), (dpath, 4294967298, 2), (spath, 5.0, 5),
                                  (spath, 4294967300, 4)):
            code, _, payload = self.c.raw("PATCH", path, {"spec": {"replicas": value}},
                                          content_type=smp)
            self.assertEqual(code, 200, payload)
            self.assertEqual(json.loads(payload)["spec"]["replicas"], want)
            self.assertEqual(self.c.get("deployments", "d", self.ns)["spec"]["replicas"], want)
        # a ConfigMap's maps: a number for a string, bad base64 for a []byte
        self.c.create("configmaps", cm("c"), namespace=self.ns)
        cpath = self.c.path("configmaps", self.ns, "c")
        refused(cpath, {"data": {"a": 5}}, "map[data:map[a:5]]",
                "cannot convert int64 to string")
        refused(cpath, {"data": {"a": 0.5}}, "map[data:map[a:0.5]]",
                "unrecognized type: string")
        refused(cpath, {"binaryData": {"x": "!!"}}, "map[binaryData:map[x:!!]]",
                "error decoding from json: illegal base64 data at input byte 0")
        code, _, payload = self.c.raw("PATCH", cpath, {"binaryData": {"x": [104, 361]}},
                                      content_type=smp)
        self.assertEqual(code, 200, payload)
        self.assertEqual(json.loads(payload)["binaryData"], {"x": "aGk="})   # 361 is 105
        # a number past float64 is refused as util/json refuses it, never stored (as Infinity)
        for ctype in (smp, "application/merge-patch+json"):
            code, _, payload = self.c.raw("PATCH", cpath, b'{"data":{"a":"b"},"x":1e400}',
                                          content_type=ctype)
            self.assertEqual(code, 400, payload)
            self.assertEqual(json.loads(payload)["message"],
                             "json: cannot unmarshal number 1e400 into Go value of type float64")
        code, _, payload = self.c.raw(
            "POST", self.c.path("pods", self.ns),
            b'{"metadata":{"name":"inf"},"spec":{"containers":[{"name":"a","image":"b"}]},'
            b'"status":{"x":-1e999}}')
        self.assertEqual(code, 400, payload)
        self.assertTrue(json.loads(payload)["message"].endswith(
            "json: cannot unmarshal number -1e999 into Go value of type float64"), payload)
        # unknown fields sorted by message ("metadata-x" before "metadata.foo"), the merge
        # patch's in the order of the sorted keys
        for ctype, order in ((smp, ('metadata-x', 'metadata.foo')),
                             ("application/merge-patch+json", ('metadata.foo', 'metadata-x'))):
            code, _, payload = self.c.raw(
                "PATCH", cpath, {"metadata": {"foo": 1}, "metadata-x": 1},
                content_type=ctype, params={"fieldValidation": "Strict"})
            self.assertEqual(code, 422, payload)
            self.assertTrue(json.loads(payload)["message"].endswith(
                ': strict decoding error: unknown field "%s", unknown field "%s"' % order),
                payload)

    def test_times(self):
        """metav1.Time and MicroTime fields decode as the API server decodes them: a string
        time.Parse takes with RFC 3339 (MicroTime: exactly six fractional digits), else the write
        fails with time.Parse's own error, which ends the decoding (it wins over an earlier type
        error); what is stored is encoded again, in UTC, at whole seconds or six digits."""
        lpath = self.c.path("leases", self.ns)

        def lease(name, **spec):
            return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name}, "spec": spec}

        def refused(path, body, msg, method="POST", ctype=None, code=400):
            got, _, payload = self.c.raw(method, path, body, content_type=ctype)
            self.assertEqual(got, code, payload)
            self.assertTrue(json.loads(payload)["message"].endswith(msg), payload)

        head = 'Lease in version "v1" cannot be handled as a Lease: '
        micro = '"2006-01-02T15:04:05.000000Z07:00"'
        refused(lpath, lease("a", renewTime="2026-11-29T17:11:54Z"),
                head + 'parsing time "2026-11-29T17:11:54Z" as %s: cannot parse "Z" as '
                '".000000"' % micro)
        refused(lpath, lease("a", renewTime="2026-11-29T17:11:54.123Z"),
                'cannot parse ".123Z" as ".000000"')
        refused(lpath, lease("a", acquireTime="2026-02-30T00:00:00.000000Z"),
                head + 'parsing time "2026-02-30T00:00:00.000000Z": day out of range')
        refused(lpath, lease("a", renewTime=5),
                head + "json: cannot unmarshal number into Go value of type string")
        # the time's error, though a type error comes first in the body
        refused(lpath, lease("a", holderIdentity=7, renewTime="now"),
                head + 'parsing time "now" as %s: cannot parse "now" as "2006"' % micro)
        refused(lpath, lease("a", holderIdentity=7, renewTime="2026-11-29T17:11:54.000001Z"),
                head + "json: cannot unmarshal number into Go struct field LeaseSpec.spec."
                "holderIdentity of type string")
        # stored in UTC; a MicroTime with six digits
        got = self.c.create("leases", lease("a", holderIdentity="x",
                                            renewTime="2026-11-29T18:11:54.123456+01:00",
                                            acquireTime="2026-11-29T17:11:54.000000Z"),
                            namespace=self.ns)
        self.assertEqual(got["spec"]["renewTime"], "2026-11-29T17:11:54.123456Z")
        self.assertEqual(got["spec"]["acquireTime"], "2026-11-29T17:11:54.000000Z")
        # an Event's Times: RFC 3339 with any fraction, stored at whole seconds
        epath = self.c.path("events", self.ns)
        ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
              "involvedObject": {"kind": "Pod", "name": "p", "namespace": self.ns},
              "reason": "R", "message": "m", "type": "Normal", "source": {"component": "c"},
              "firstTimestamp": "2026-11-29T12:00:00.75-05:30",
              "lastTimestamp": "2026-11-29T17:30:01Z", "count": 1}
        got = self.c.create("events", ev, namespace=self.ns)
        self.assertEqual(got["firstTimestamp"], "2026-11-29T17:30:00Z")
        self.assertEqual(got["lastTimestamp"], "2026-11-29T17:30:01Z")
        bad = dict(ev, metadata={"name": "f"}, lastTimestamp="2026-11-29T17:30:01")
        refused(epath, bad, 'Event in version "v1" cannot be handled as a Event: parsing time '
                '"2026-11-29T17:30:01" as "2006-01-02T15:04:05Z07:00": cannot parse "" as '
                '"Z07:00"')
        bad = dict(ev, metadata={"name": "f", "creationTimestamp": "2026-11-29T25:00:00Z"})
        refused(epath, bad, 'parsing time "2026-11-29T25:00:00Z": hour out of range')
        # a patch: 422 about "patch", the same message from the merge patch's decoder and the
        # strategic merge patch's converter
        one = self.c.path("leases", self.ns, "a")
        for ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            refused(one, {"spec": {"renewTime": "2026-11-29"}},
                    ': parsing time "2026-11-29" as %s: cannot parse "" as "T"' % micro,
                    method="PATCH", ctype=ctype, code=422)
            refused(one, {"spec": {"renewTime": True}},
                    ": json: cannot unmarshal bool into Go value of type string",
                    method="PATCH", ctype=ctype, code=422)
        self.assertEqual(self.c.get("leases", "a", self.ns)["spec"]["renewTime"],
                         "2026-11-29T17:11:54.123456Z")

    def test_mutated_bodies_never_fail_inside(self):
        """Bad input is answered as the API server answers it, never by an internal error: a
        valid object of each kind with one value replaced (null, a bool, an int, a float, a
        string, a list, an object, at any path or under a new key) is POSTed, PUT over an
        existing object and sent as a merge, strategic merge and JSON patch. Every answer is a
        success or a 400/404/409/422 Status (2,100 writes, a fixed seed; before the fields'
        types were checked as the decoder checks them, 138 of them were 500s: a pod spec of
        0, a container name of -1, a patched metadata that is a list ...)."""
        import copy
        import random
        values = [None, True, False, 0, -1, 7, 2 ** 40, 1.5, 3.0, "", "x", "15", [], [1],
                  ["a"], [None], {}, {"a": 1}, {"a": "b"}, {"a": None}, [{"a": 1}]]

        def paths(v, p=()):
            yield p
            if isinstance(v, dict):
                for k, x in v.items():
                    yield from paths(x, p + (k,))
                yield p + ("zz",)
            elif isinstance(v, list):
                for i, x in enumerate(v):
                    yield from paths(x, p + (i,))

        def replaced(v, p, value):
            if not p:
                return copy.deepcopy(value)
            v = copy.deepcopy(v)
            cur = v
            for k in p[:-1]:
                cur = cur[k]
            cur[p[-1]] = copy.deepcopy(value)
            return v

        valid = {
            "configmaps": cm("keep"), "deployments": deployment("keep"), "pods": pod("keep"),
            "leases": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "keep"},
                       "spec": {"holderIdentity": "a", "leaseDurationSeconds": 4}},
            "events": {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "keep"},
                       "involvedObject": {"kind": "Pod", "name": "p", "namespace": self.ns},
                       "reason": "R", "message": "m", "type": "Normal", "count": 1},
            "services": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "keep"},
                         "spec": {"ports": [{"port": 80, "targetPort": 8080}],
                                  "selector": {"a": "b"}}},
            "secrets": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keep"},
                        "data": {"k": "dg=="}, "type": "Opaque"}}
        rnd = random.Random(20261129)
        seen, bad = 0, []
        for kind, obj in valid.items():
            self.c.create(kind, obj, namespace=self.ns)
            where = list(paths(obj))
            for i in range(60):
                p, value = rnd.choice(where), rnd.choice(values)
                body = replaced(obj, p, value)
                if isinstance(body, dict) and isinstance(body.get("metadata"), dict) and \
                        p[:2] != ("metadata", "name"):
                    body["metadata"]["name"] = "m%d" % i
                cur = self.c.get_or_none(kind, "keep", self.ns)
                if cur is None:
                    cur = self.c.create(kind, obj, namespace=self.ns)
                put = copy.deepcopy(body)
                if isinstance(put, dict) and isinstance(put.get("metadata"), dict):
                    put["metadata"].update(name="keep",
                                           resourceVersion=cur["metadata"]["resourceVersion"])
                one = self.c.path(kind, self.ns, "keep")
                op = {"op": "replace" if i % 2 else "add", "value": value,
                      "path": "/" + "/".join(str(x) for x in p)}
                for method, path, ctype, b in (
                        ("POST", self.c.path(kind, self.ns), None, body),
                        ("PUT", one, None, put),
                        ("PATCH", one, "application/merge-patch+json", body),
                        ("PATCH", one, "application/strategic-merge-patch+json", body),
                        ("PATCH", one, "application/json-patch+json", [op])):
                    code, _, payload = self.c.raw(method, path, b, content_type=ctype)
                    seen += 1
                    if code not in (200, 201, 400, 404, 409, 422):
                        bad.append((kind, method, ctype, p, value, code, payload[:200]))
                    elif code >= 400:
                        self.assertEqual(json.loads(payload).get("kind"), "Status", payload)
        self.assertEqual(seen, 2100)
        self.assertEqual(bad, [])

    def test_field_validation_directives(self):
        """The fieldValidation parameter of a write: Strict fails on an unknown field (create
        and update: a 400 from the decoder; patch: a 422 Invalid of "patch"), Ignore drops it
        without a warning, and any other value is refused before the body is read."""
        def lease(name, **spec):
            return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name}, "spec": spec}
        strict, ignore = {"fieldValidation": "Strict"}, {"fieldValidation": "Ignore"}
        path = self.c.path("leases", self.ns)
        bad = lease("s", holderIdentity="a", leaseDurationSecond=4, renewTimes=1)
        code, _, payload = self.c.raw("POST", path, bad, params=strict)
        self.assertEqual(code, 400, payload)
        st = json.loads(payload)
        self.assertEqual(st["reason"], "BadRequest")
        self.assertEqual(st["message"], 'Lease in version "v1" cannot be handled as a Lease: '
                         'strict decoding error: unknown field "spec.leaseDurationSecond", '
                         'unknown field "spec.renewTimes"')
        self.assertIsNone(self.c.get_or_none("leases", "s", self.ns))
        # Ignore: created, the field dropped, no Warning
        code, headers, payload = self.c.raw("POST", path, bad, params=ignore)
        self.assertEqual(code, 201, payload)
        self.assertNotIn("Warning", headers)
        got = self.c.get("leases", "s", self.ns)
        self.assertEqual(got["spec"], {"holderIdentity": "a"})
        # Strict on a valid object, and on an update that adds a field
        code, _, payload = self.c.raw("POST", path, lease("t", holderIdentity="b"),
                                      params=strict)
        self.assertEqual(code, 201, payload)
        got["metadata"]["colour"] = "red"
        code, _, payload = self.c.raw("PUT", self.c.path("leases", self.ns, "s"), got,
                                      params=strict)
        self.assertEqual(code, 400, payload)
        self.assertIn('strict decoding error: unknown field "metadata.colour"',
                      json.loads(payload)["message"])
        # patch: the patched object shown as JSON (merge), as the patch's Go map (strategic)
        self.c.create("configmaps", cm("p"), namespace=self.ns)
        cpath = self.c.path("configmaps", self.ns, "p")
        for ctype, shown in (
                ("application/merge-patch+json", None),
                ("application/strategic-merge-patch+json",
                 "map[data:map[x:y] datum:map[a:b n:1e+06 z:7]]")):
            code, _, payload = self.c.raw(
                "PATCH", cpath, {"datum": {"a": "b", "n": 1e6, "z": 7}, "data": {"x": "y"}},
                content_type=ctype, params=strict)
            self.assertEqual(code, 422, payload)
            st = json.loads(payload)
            self.assertEqual(st["reason"], "Invalid")
            self.assertTrue(st["message"].startswith(' "" is invalid: patch: Invalid value: "'),
                            st["message"])
            self.assertTrue(st["message"].endswith(
                '": strict decoding error: unknown field "datum"'), st["message"])
            self.assertEqual(st["details"]["causes"][0]["field"], "patch")
            if shown:
                self.assertIn(json.dumps(shown), st["message"])
            else:
                self.assertIn('\\"datum\\":{\\"a\\":\\"b\\",', st["message"])
        self.assertEqual(self.c.get("configmaps", "p", self.ns)["data"], {"k": "v"})
        code, headers, payload = self.c.raw("PATCH", cpath, {"datum": 1, "data": {"k": "w"}},
                                            content_type="application/merge-patch+json",
                                            params=ignore)
        self.assertEqual(code, 200, payload)
        self.assertNotIn("Warning", headers)
        self.assertEqual(self.c.get("configmaps", "p", self.ns)["data"], {"k": "w"})
        # an unsupported directive: the options' 422, before the body is decoded
        for method, p, kind in (("POST", path, "CreateOptions"),
                                ("PUT", self.c.path("leases", self.ns, "s"), "UpdateOptions"),
                                ("PATCH", cpath, "PatchOptions")):
            code, _, payload = self.c.raw(method, p, b"{not json",
                                          content_type="application/merge-patch+json"
                                          if method == "PATCH" else None,
                                          params={"fieldValidation": "strict"})
            self.assertEqual(code, 422, payload)
            st = json.loads(payload)
            self.assertEqual(st["message"], '%s.meta.k8s.io "" is invalid: fieldValidation: '
                             'Unsupported value: "strict": supported values: "", "Ignore", '
                             '"Strict", "Warn"' % kind)
            self.assertEqual(st["details"]["kind"], kind)
            self.assertEqual(st["details"]["group"], "meta.k8s.io")

    def test_continued_list_is_a_snapshot(self):
        """A continued list reads at its first page's resourceVersion (etcd's WithRev): what
        changed after the first page is not in the later ones, and every page says that
        resourceVersion."""
        for n in "abcde":
            self.c.create("configmaps", cm(n), namespace=self.ns)
        first = self.c.list("configmaps", self.ns, limit=2)
        rv = first["metadata"]["resourceVersion"]
        c = self.c.get("configmaps", "c", self.ns)
        c["data"] = {"k": "changed"}
        self.c.update("configmaps", c, self.ns)
        self.c.delete("configmaps", "d", self.ns)
        self.c.create("configmaps", cm("f"), namespace=self.ns)
        rest, cont = [], first["metadata"]["continue"]
        while cont:
            page = self.c.list("configmaps", self.ns, limit=2, continue_token=cont)
            self.assertEqual(page["metadata"]["resourceVersion"], rv)
            rest += page["items"]
            cont = page["metadata"].get("continue")
        self.assertEqual([i["metadata"]["name"] for i in first["items"] + rest],
                         ["a", "b", "c", "d", "e"])
        self.assertEqual(rest[0]["data"], {"k": "v"})
        for i in first["items"] + rest:
            self.assertLessEqual(int(i["metadata"]["resourceVersion"]), int(rv))
        now, _ = self.c.list_all("configmaps", self.ns)
        self.assertEqual([i["metadata"]["name"] for i in now], ["a", "b", "c", "e", "f"])

    def test_a_full_page_with_keys_after_it_has_a_continue_token(self):
        """etcd3's GetList: once a page is full, any key after its last item makes a continue
        token, whether or not it matches the selector (etcd says More); the page after it is
        then empty, without one. A page that is not full has none. (A token was given only
        when more items matched.)"""
        for n, lab in (("a", "y"), ("b", "n"), ("c", "n")):
            self.c.create("configmaps", cm(n, {"k": lab}), namespace=self.ns)
        first = self.c.list("configmaps", self.ns, limit=1, label_selector="k=y")
        self.assertEqual([i["metadata"]["name"] for i in first["items"]], ["a"])
        cont = first["metadata"].get("continue")
        self.assertTrue(cont, first["metadata"])
        self.assertNotIn("remainingItemCount", first["metadata"])
        rest = self.c.list("configmaps", self.ns, limit=1, label_selector="k=y",
                           continue_token=cont)
        self.assertEqual(rest["items"], [])
        self.assertNotIn("continue", rest["metadata"])
        whole = self.c.list("configmaps", self.ns, limit=2, label_selector="k=y")
        self.assertEqual(len(whole["items"]), 1)
        self.assertNotIn("continue", whole["metadata"])
        # without a selector the count of what is left comes with it
        page = self.c.list("configmaps", self.ns, limit=1)
        self.assertEqual(page["metadata"]["remainingItemCount"], 2)

    def test_a_json_patch_that_does_not_apply_is_the_generic_422(self):
        """applyJSPatch: an operation that does not apply (a failed test, a missing path) is
        NewGenericServerResponse's 422 Invalid, whose message is its own and whose details are
        empty (jsonpatch's text was passed on); a patch that does not decode is a 400."""
        self.c.create("configmaps", cm("jp"), namespace=self.ns)
        path = self.c.path("configmaps", self.ns, "jp")
        for ops in ([{"op": "test", "path": "/data/k", "value": "other"}],
                    [{"op": "replace", "path": "/data/missing", "value": "x"}],
                    [{"op": "remove", "path": "/metadata/labels/none"}]):
            code, _, payload = self.c.raw("PATCH", path, ops,
                                          content_type="application/json-patch+json")
            self.assertEqual(code, 422, payload)
            st = json.loads(payload)
            self.assertEqual((st["reason"], st["message"], st["details"]),
                             ("Invalid", "the server rejected our request due to an error in "
                                         "our request", {}), ops)
        code, _, payload = self.c.raw("PATCH", path, {"op": "test"},
                                      content_type="application/json-patch+json")
        self.assertEqual(code, 400, payload)
        self.assertEqual(self.c.get("configmaps", "jp", self.ns)["data"], {"k": "v"})

    def test_a_patch_that_is_not_json_gets_gos_error(self):
        """A patch body that is not JSON is a 400 with encoding/json's text: a merge patch's
        prefixed "error decoding patch: ", a strategic merge patch's and a JSON patch's as it
        is (Python's text was passed on)."""
        self.c.create("configmaps", cm("nj"), namespace=self.ns)
        path = self.c.path("configmaps", self.ns, "nj")
        go = "invalid character 'b' looking for beginning of object key string"
        for ctype, want in (("application/merge-patch+json", "error decoding patch: " + go),
                            ("application/strategic-merge-patch+json", go),
                            ("application/json-patch+json", go)):
            code, _, payload = self.c.raw("PATCH", path, b"{bad", content_type=ctype)
            self.assertEqual(code, 400, payload)
            st = json.loads(payload)
            self.assertEqual((st["reason"], st["message"]), ("BadRequest", want), ctype)

    def test_list_resource_version_semantics(self):
        """A list's resourceVersion as kube-apiserver reads it (what client-go's reflector
        relies on): X with a limit, or with resourceVersionMatch Exact, reads exactly at X;
        X without a limit is at least as new as X (the present); a resourceVersion not yet
        reached waits and then answers 504 Too large resource version."""
        self.c.create("configmaps", cm("old"), namespace=self.ns)
        _, rv = self.c.list_all("configmaps", self.ns)
        self.c.delete("configmaps", "old", self.ns)
        self.c.create("configmaps", cm("new"), namespace=self.ns)

        def names(lst):
            return [i["metadata"]["name"] for i in lst["items"]]
        exact = self.c.list("configmaps", self.ns, limit=500, resource_version=rv)
        self.assertEqual(exact["metadata"]["resourceVersion"], rv)
        self.assertIn("old", names(exact))
        self.assertNotIn("new", names(exact))
        exact2 = self.c.request("GET", self.c.path("configmaps", self.ns), params={
            "resourceVersion": rv, "resourceVersionMatch": "Exact"})
        self.assertEqual(names(exact2), names(exact))
        for params in ({"resourceVersion": rv},
                       {"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"},
                       {"resourceVersion": "0"}, {}):
            now = self.c.request("GET", self.c.path("configmaps", self.ns), params=params)
            self.assertNotIn("old", names(now), params)
            self.assertIn("new", names(now), params)
            self.assertGreater(int(now["metadata"]["resourceVersion"]), int(rv), params)
        t0 = time.time()
        e = self.assertApiError(504, "Timeout", self.c.list, "configmaps", self.ns,
                                resource_version=str(int(rv) + 10 ** 9))
        self.assertGreaterEqual(time.time() - t0, 2.5)
        self.assertIn("Too large resource version", e.status["message"])
        self.assertEqual(e.status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge")
        # ValidateListOptions' failures are 422 Invalid ListOptions, each one named
        e = self.assertApiError(422, "Invalid", self.c.request, "GET",
                                self.c.path("configmaps", self.ns),
                                params={"resourceVersion": rv, "resourceVersionMatch": "Newest"})
        self.assertEqual(e.status["details"]["kind"], "ListOptions")
        self.assertIn('resourceVersionMatch: Unsupported value: "Newest"', e.message)
        e = self.assertApiError(422, "Invalid", self.c.request, "GET",
                                self.c.path("configmaps", self.ns),
                                params={"resourceVersionMatch": "NotOlderThan"})
        self.assertIn("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
                      "unless resourceVersion is provided", e.message)
        e = self.assertApiError(422, "Invalid", self.c.request, "GET",
                                self.c.path("configmaps", self.ns),
                                params={"resourceVersion": "0", "resourceVersionMatch": "Exact"})
        self.assertIn('resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                      e.message)

    def test_events_both_apis(self):
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "web.1"},
              "involvedObject": {"kind": "Deployment", "namespace": self.ns, "name": "web",
                                 "apiVersion": "apps/v1"},
              "reason": "ScaledUp", "message": "scaled to 3", "type": "Normal",
              "source": {"component": "gpuscaler"}, "count": 1,
              "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z"}
        self.c.create("events", ev, namespace=self.ns)
        v1 = self.c.get("events.k8s.io/v1/events", "web.1", self.ns)
        self.assertEqual(v1["apiVersion"], "events.k8s.io/v1")
        self.assertEqual(v1["regarding"]["name"], "web")
        self.assertEqual(v1["note"], "scaled to 3")
        self.assertEqual(v1["deprecatedSource"], {"component": "gpuscaler"})
        new = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
               "metadata": {"name": "web.2"}, "eventTime": "2024-01-01T00:00:01.000000Z",
               "reportingController": "gpuscaler.io/controller", "reportingInstance": "pod-1",
               "action": "Scale", "reason": "ScaledDown", "type": "Normal",
               "regarding": {"kind": "Deployment", "namespace": self.ns, "name": "web"},
               "note": "scaled to 1"}
        self.c.create("events.k8s.io/v1/events", new, namespace=self.ns)
        core = self.c.get("events", "web.2", self.ns)
        self.assertEqual((core["message"], core["involvedObject"]["name"],
                          core["reportingComponent"]),
                         ("scaled to 1", "web", "gpuscaler.io/controller"))
        lst = self.c.list("events", self.ns, field_selector="involvedObject.name=web,"
                          "reason=ScaledUp")
        self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["web.1"])
        lst = self.c.list("events.k8s.io/v1/events", self.ns,
                          field_selector="regarding.name=web")
        self.assertEqual(len(lst["items"]), 2)
        bad = dict(new, metadata={"name": "web.3"})
        del bad["reportingController"]
        e = self.assertApiError(422, "Invalid", self.c.create, "events.k8s.io/v1/events", bad,
                                namespace=self.ns)
        self.assertIn("reportingController: Required value", e.message)

    def test_namespace_delete_cascades(self):
        """A DELETE marks the namespace Terminating and answers it; 5 s later the namespace
        controller deletes its content (each object its own DELETED event), sets its deletion
        conditions and finalizes it, which deletes it. Meanwhile nothing new may be created in
        it (403 NamespaceTerminating, a pod's binding too, the namespace again: 409), what is
        there may still be written (the namespace too, which an update does not delete while
        spec.finalizers holds anything, and whose spec.finalizers only /finalize changes), and
        another DELETE answers it as it is. default may not be deleted at all."""
        self.c.create("configmaps", cm("a"), namespace=self.ns)
        self.c.create("deployments", deployment("web"), namespace=self.ns)
        self.c.create("pods", pod("p"), self.ns)
        # a finalizer of someone else's holds one object, and with it the namespace
        held = cm("held")
        held["metadata"]["finalizers"] = ["example.com/hold"]
        self.c.create("configmaps", held, namespace=self.ns)
        w = self.c.watch("configmaps", self.ns, resource_version="0", timeout_seconds=40)
        self.assertEqual(w.next_event(5)["type"], "ADDED")
        self.assertEqual(w.next_event(5)["type"], "ADDED")
        nsw = self.c.watch("namespaces", field_selector="metadata.name=" + self.ns,
                           resource_version="0", timeout_seconds=40)
        self.assertEqual(nsw.next_event(5)["type"], "ADDED")
        e = self.assertApiError(403, "Forbidden", self.c.delete, "namespaces", "default")
        self.assertEqual(e.message, 'namespaces "default" is forbidden: this namespace may not '
                         'be deleted')
        t0 = time.time()
        out = self.c.delete("namespaces", self.ns)
        self.assertEqual((out["kind"], out["status"]["phase"], out["spec"]["finalizers"]),
                         ("Namespace", "Terminating", ["kubernetes"]))
        self.assertTrue(out["metadata"]["deletionTimestamp"])
        e = self.assertApiError(403, "Forbidden", self.c.create, "configmaps", cm("b"),
                                namespace=self.ns)
        self.assertEqual(e.message, 'configmaps "b" is forbidden: unable to create new content '
                         'in namespace %s because it is being terminated' % self.ns)
        self.assertEqual(e.status["details"]["causes"], [{
            "reason": "NamespaceTerminating", "field": "metadata.namespace",
            "message": "namespace %s is being terminated" % self.ns}])
        gen = cm("")
        gen["metadata"] = {"generateName": "g-"}
        e = self.assertApiError(403, "Forbidden", self.c.create, "configmaps", gen,
                                namespace=self.ns)
        self.assertTrue(e.message.startswith('configmaps "g-" is forbidden: '), e.message)
        self.assertApiError(403, "Forbidden", self.c.create, "events", {
            "metadata": {"name": "e1"}, "involvedObject": {"kind": "Deployment", "name": "web",
                                                           "namespace": self.ns},
            "reason": "ScaledUp", "message": "x"}, namespace=self.ns)
        e = self.assertApiError(403, "Forbidden", self.c.request, "POST",
                                self.c.path("pods", self.ns, "p", "binding"),
                                {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                                 "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})
        self.assertTrue(e.message.startswith('pods "p" is forbidden: unable to create new '
                                             'content in namespace'), e.message)
        e = self.assertApiError(409, "AlreadyExists", self.c.create, "namespaces",
                                {"metadata": {"name": self.ns}})
        self.assertEqual(e.message, 'object is being deleted: namespaces "%s" already exists'
                         % self.ns)
        # another DELETE: answered as it is
        again = self.c.delete("namespaces", self.ns)
        self.assertEqual(again["metadata"]["resourceVersion"], out["metadata"]["resourceVersion"])
        # an update of the terminating namespace: kept, its spec.finalizers as they were
        nsobj = self.c.get("namespaces", self.ns)
        nsobj["metadata"].setdefault("labels", {})["x"] = "y"
        nsobj["spec"]["finalizers"] = []
        upd = self.c.update("namespaces", nsobj)
        self.assertEqual((upd["spec"]["finalizers"], upd["metadata"]["labels"]["x"]),
                         (["kubernetes"], "y"))
        self.assertEqual(self.c.get("namespaces", self.ns)["status"]["phase"], "Terminating")
        deleted = set()
        for _ in range(2):   # "a" deleted; "held" marked (MODIFIED), and kept
            ev = w.next_event(15)
            deleted.add((ev["type"], ev["object"]["metadata"]["name"]))
        waited = time.time() - t0
        self.assertEqual(deleted, {("DELETED", "a"), ("MODIFIED", "held")})
        self.assertGreater(waited, 4.5)   # the controller's grace period
        self.assertApiError(404, "NotFound", self.c.get, "deployments", "web", self.ns)
        self.assertApiError(404, "NotFound", self.c.get, "pods", "p", self.ns)
        # the conditions say what holds it; it stays while the finalizer does
        end = time.time() + 5
        while True:
            st = self.c.get("namespaces", self.ns)["status"]
            conds = {c["type"]: c for c in st.get("conditions") or []}
            if conds.get("NamespaceFinalizersRemaining", {}).get("status") == "True" or \
                    time.time() > end:
                break
            time.sleep(0.05)
        self.assertEqual(st["phase"], "Terminating")
        self.assertEqual(len(conds), 5, conds)
        self.assertEqual((conds["NamespaceContentRemaining"]["status"],
                          conds["NamespaceContentRemaining"]["reason"],
                          conds["NamespaceContentRemaining"]["message"]),
                         ("True", "SomeResourcesRemain",
                          "Some resources are remaining: configmaps. has 1 resource instances"))
        self.assertEqual(conds["NamespaceFinalizersRemaining"]["message"],
                         "Some content in the namespace has finalizers remaining: "
                         "example.com/hold in 1 resource instances")
        self.assertEqual(conds["NamespaceDeletionDiscoveryFailure"]["status"], "False")
        # an update in the terminating namespace is allowed: the finalizer let go
        obj = self.c.get("configmaps", "held", self.ns)
        obj["metadata"]["finalizers"] = []
        self.c.update("configmaps", obj, namespace=self.ns)
        ev = w.next_event(5)
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("DELETED", "held"))
        w.close()
        # at the controller's next look (5 s after its status write): the conditions all
        # False, then /finalize,
        # which deletes it (the DELETED event carries it as stored, its finalizer still there)
        seen = []
        while True:
            ev = nsw.next_event(15)
            self.assertIsNotNone(ev, [x["type"] for x in seen])
            seen.append(ev)
            if ev["type"] == "DELETED":
                break
        nsw.close()
        last = seen[-1]["object"]
        self.assertEqual(last["spec"]["finalizers"], ["kubernetes"])
        self.assertEqual({c["type"]: c["status"] for c in last["status"]["conditions"]},
                         {t: "False" for t in ("NamespaceDeletionDiscoveryFailure",
                                               "NamespaceDeletionGroupVersionParsingFailure",
                                               "NamespaceDeletionContentFailure",
                                               "NamespaceContentRemaining",
                                               "NamespaceFinalizersRemaining")})
        self.assertApiError(404, "NotFound", self.c.get, "namespaces", self.ns)
        self.assertApiError(404, "NotFound", self.c.create, "configmaps", cm("c"),
                            namespace=self.ns)
        fin = [x for x in FK.writes(0, resource="namespaces", name=self.ns)["writes"]
               if x["user"] == "system:serviceaccount:kube-system:namespace-controller"]
        self.assertEqual([(x["verb"], x["subresource"]) for x in fin][-2:],
                         [("update", "status"), ("update", "finalize")])

    def test_namespace_delete_options(self):
        """The namespace REST's Delete: its preconditions worded its own way; the first DELETE
        sets the GC finalizer its options ask for (Orphan: orphan; orphanDependents false:
        foregroundDeletion, answered 202), which the garbage collector then removes; the
        namespace controller deletes it after that as before. A DELETE once spec.finalizers
        is empty goes through the generic store: its options' GC finalizer holds it too."""
        a, b, c = self.ns + "-oa", self.ns + "-ob", self.ns + "-oc"
        uid = self.c.create("namespaces", {"metadata": {"name": a}})["metadata"]["uid"]
        self.c.create("namespaces", {"metadata": {"name": b}})
        self.c.create("namespaces", {"metadata": {"name": c, "finalizers": ["example.com/m"]}})
        self.c.delete("namespaces", c)
        owned = cm("dep")
        owned["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Namespace",
                                                  "name": a, "uid": uid}]
        self.c.create("configmaps", owned, namespace=a)
        e = self.assertApiError(409, "Conflict", self.c.delete, "namespaces", a,
                                preconditions={"uid": "nope"})
        self.assertEqual(e.message, 'Operation cannot be fulfilled on namespaces "%s": '
                         'Precondition failed: UID in precondition: nope, UID in object meta: '
                         '%s' % (a, uid))
        self.assertEqual(e.status["details"], {"name": a, "kind": "namespaces"})
        rv = self.c.get("namespaces", a)["metadata"]["resourceVersion"]
        e = self.assertApiError(409, "Conflict", self.c.delete, "namespaces", a,
                                preconditions={"resourceVersion": "1"})
        self.assertEqual(e.message, 'Operation cannot be fulfilled on namespaces "%s": '
                         'Precondition failed: ResourceVersion in precondition: 1, '
                         'ResourceVersion in object meta: %s' % (a, rv))
        out = self.c.delete("namespaces", a, propagation_policy="Orphan")
        self.assertEqual((out["status"]["phase"], out["metadata"]["finalizers"]),
                         ("Terminating", ["orphan"]))
        code, _, body = self.c.raw("DELETE", self.c.path("namespaces", None, b),
                                   {"orphanDependents": False})
        self.assertEqual((code, json.loads(body)["metadata"]["finalizers"]),
                         (202, ["foregroundDeletion"]))
        # the garbage collector lets the dependent go, then removes its finalizer; the
        # namespace stays, Terminating, until the namespace controller finalizes it
        end = time.time() + 5
        while self.c.get("namespaces", a)["metadata"].get("finalizers") or \
                self.c.get("namespaces", b)["metadata"].get("finalizers"):
            self.assertLess(time.time(), end, "the GC finalizers stayed")
            time.sleep(0.05)
        self.assertNotIn("ownerReferences", self.c.get("configmaps", "dep", a)["metadata"])
        self.assertEqual(self.c.get("namespaces", a)["spec"]["finalizers"], ["kubernetes"])
        # a DELETE while it terminates does not change its finalizers
        again = self.c.delete("namespaces", b, propagation_policy="Orphan")
        self.assertNotIn("finalizers", again["metadata"])
        end = time.time() + 20
        while self.c.get_or_none("namespaces", a) or self.c.get_or_none("namespaces", b) or \
                self.c.get("namespaces", c)["spec"].get("finalizers"):
            self.assertLess(time.time(), end, "the namespaces were never deleted")
            time.sleep(0.1)
        # finalized, held by its own finalizer: a DELETE is the generic store's, whose
        # options' GC finalizer it takes (markAsDeleting: deletionGracePeriodSeconds 0)
        out = self.c.delete("namespaces", c, propagation_policy="Orphan")
        self.assertEqual(sorted(out["metadata"]["finalizers"]), ["example.com/m", "orphan"])
        self.assertEqual(out["metadata"]["deletionGracePeriodSeconds"], 0)
        end = time.time() + 5
        while "orphan" in self.c.get("namespaces", c)["metadata"]["finalizers"]:
            self.assertLess(time.time(), end, "the orphan finalizer stayed")
            time.sleep(0.05)
        self.c.patch("namespaces", c, {"metadata": {"finalizers": None}})
        self.assertIsNone(self.c.get_or_none("namespaces", c))

    def test_namespace_with_a_bound_pod(self):
        """A bound pod only marked by the namespace controller's DELETE: the controller allows
        its terminationGracePeriodSeconds from the namespace's deletion, then reports it as
        unexpected (NamespaceDeletionContentFailure) and retries until its kubelet's DELETE
        with period 0 lets the namespace go. Its deletes are
        a deletecollection a kind (Background), which also takes the foregroundDeletion
        finalizer from an owner waiting for a dependent, and so deletes it."""
        name = self.ns + "-bp"
        self.c.create("namespaces", {"metadata": {"name": name}})
        p = pod("p")
        p["spec"].update(nodeName="gpu-node-1", terminationGracePeriodSeconds=6)
        self.c.create("pods", p, name)
        # an owner deleted in the foreground, waiting for a dependent a finalizer holds
        uid = self.c.create("configmaps", cm("o"), namespace=name)["metadata"]["uid"]
        d = cm("d")
        d["metadata"].update(finalizers=["example.com/d"], ownerReferences=[{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": uid,
            "blockOwnerDeletion": True}])
        self.c.create("configmaps", d, namespace=name)
        self.c.delete("configmaps", "o", name, propagation_policy="Foreground")
        end = time.time() + 5
        while not self.c.get("configmaps", "d", name)["metadata"].get("deletionTimestamp"):
            self.assertLess(time.time(), end, "the dependent was never deleted")
            time.sleep(0.05)
        self.assertEqual(self.c.get("configmaps", "o", name)["metadata"]["finalizers"],
                         ["foregroundDeletion"])
        since = FK.writes()["next"]
        self.c.delete("namespaces", name)

        def cond(t):
            got = self.c.get("namespaces", name).get("status") or {}
            return next((c for c in got.get("conditions") or [] if c["type"] == t), None)
        end = time.time() + 10
        while not self.c.get("pods", "p", name)["metadata"].get("deletionTimestamp"):
            self.assertLess(time.time(), end, "the pod was never deleted")
            time.sleep(0.1)
        t0 = time.time()
        while (cond("NamespaceDeletionContentFailure") or {}).get("status") != "True":
            self.assertLess(time.time(), end + 10, "no content failure")
            time.sleep(0.1)
        # not at the first pass (5 s after the namespace's deletion, within the pod's 6 s):
        # at the next, 5 s after that pass's status write
        self.assertGreater(time.time() - t0, 2.5)
        self.assertEqual(cond("NamespaceDeletionContentFailure")["message"],
                         "Failed to delete all resource types, 1 remaining: unexpected items "
                         "still remain in namespace: %s for gvr: /v1, Resource=pods" % name)
        self.assertEqual(cond("NamespaceContentRemaining")["message"],
                         "Some resources are remaining: configmaps. has 1 resource instances, "
                         "pods. has 1 resource instances")
        self.assertIsNone(self.c.get_or_none("configmaps", "o", name))
        ctl = "system:serviceaccount:kube-system:namespace-controller"
        wrote = FK.writes(since, namespace=name, user=ctl)["writes"]
        self.assertIn(("deletecollection", "pods"), [(w["verb"], w["resource"]) for w in wrote])
        self.assertNotIn("delete", [w["verb"] for w in wrote])
        self.c.patch("configmaps", "d", {"metadata": {"finalizers": None}}, name)
        self.c.delete("pods", "p", name, grace_period_seconds=0)
        end = time.time() + 20  # the retry backoff may have reached seconds
        while self.c.get_or_none("namespaces", name):
            self.assertLess(time.time(), end, "the namespace was never deleted")
            time.sleep(0.1)

    def test_namespace_held_by_another_finalizer(self):
        """A namespace created with a finalizer of its own gets "kubernetes" beside it; once
        deleted, the namespace controller empties it and removes only its own, and the
        namespace stays Terminating until the other's holder finalizes it with an empty
        spec (as client-go's Finalize sends it), which deletes it: that PUT is answered with
        the namespace as it was stored."""
        name = self.ns + "-x"
        out = self.c.create("namespaces", {"metadata": {"name": name},
                                           "spec": {"finalizers": ["example.com/x"]}})
        self.assertEqual(out["spec"]["finalizers"], ["example.com/x", "kubernetes"])
        self.c.create("configmaps", cm("a"), namespace=name)
        self.c.delete("namespaces", name)
        end = time.time() + 15
        while self.c.get("namespaces", name)["spec"].get("finalizers") != ["example.com/x"]:
            self.assertLess(time.time(), end, "the namespace controller never finalized it")
            time.sleep(0.1)
        self.assertEqual(self.c.list("configmaps", name)["items"], [])
        got = self.c.get("namespaces", name)
        self.assertEqual(got["status"]["phase"], "Terminating")
        got["spec"] = {}
        ans = self.c.update("namespaces", got, subresource="finalize")
        self.assertEqual(ans["spec"]["finalizers"], ["example.com/x"])
        self.assertApiError(404, "NotFound", self.c.get, "namespaces", name)

    def test_other_kinds(self):
        kinds = [
            ("secrets", {"metadata": {"name": "s"}, "stringData": {"token": "abc"}}),
            ("services", {"metadata": {"name": "svc"},
                          "spec": {"selector": {"app": "x"}, "ports": [{"port": 8080}]}}),
            ("serviceaccounts", {"metadata": {"name": "gpuscaler"}}),
            ("horizontalpodautoscalers", {"metadata": {"name": "h"}, "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"},
                "maxReplicas": 4, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}),
            ("roles", {"metadata": {"name": "r"}, "rules": [
                {"apiGroups": ["apps"], "resources": ["deployments/scale"],
                 "verbs": ["get", "patch"]}]}),
            ("rolebindings", {"metadata": {"name": "rb"}, "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "ServiceAccount", "name": "gpuscaler"}]}),
            ("poddisruptionbudgets", {"metadata": {"name": "pdb"}, "spec": {
                "minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}),
        ]
        for res, obj in kinds:
            out = self.c.create(res, obj, namespace=self.ns)
            self.assertEqual(out["metadata"]["namespace"], self.ns, res)
            self.c.get(res, obj["metadata"]["name"], self.ns)
        self.assertEqual(self.c.get("secrets", "s", self.ns)["data"], {"token": "YWJj"})
        svc = self.c.get("services", "svc", self.ns)
        self.assertEqual(svc["spec"]["ports"][0]["targetPort"], 8080)
        self.assertTrue(svc["spec"]["clusterIP"])
        hpa = self.c.get("horizontalpodautoscalers", "h", self.ns)
        self.assertEqual(hpa["spec"]["minReplicas"], 1)
        self.assertEqual(hpa["spec"]["behavior"]["scaleUp"]["policies"],
                         [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}])
        self.assertEqual(hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 60)
        cluster = [
            ("clusterroles", {"metadata": {"name": "gpuscaler:" + self.ns}, "rules": []}),
            ("clusterrolebindings", {"metadata": {"name": "gpuscaler:" + self.ns}, "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "system:auth-delegator"}, "subjects": [
                {"kind": "ServiceAccount", "name": "gpuscaler", "namespace": self.ns}]}),
            ("apiservices", {"metadata": {"name": "v1beta1.external.metrics.k8s.io"}, "spec": {
                "group": "external.metrics.k8s.io", "version": "v1beta1",
                "groupPriorityMinimum": 100, "versionPriority": 100,
                "service": {"namespace": self.ns, "name": "svc", "port": 443},
                "insecureSkipTLSVerify": True}}),
        ]
        for res, obj in cluster:
            out = self.c.create(res, obj)
            self.assertNotIn("namespace", out["metadata"])
            self.c.delete(res, obj["metadata"]["name"])
        self.assertApiError(422, "Invalid", self.c.create, "apiservices",
                            {"metadata": {"name": "wrong"}, "spec": {
                                "group": "external.metrics.k8s.io", "version": "v1beta1",
                                "groupPriorityMinimum": 100, "versionPriority": 100}})

    def test_discovery(self):
        api = self.c.request("GET", "/api")
        self.assertEqual((api["kind"], api["versions"]), ("APIVersions", ["v1"]))
        groups = {g["name"]: g for g in self.c.request("GET", "/apis")["groups"]}
        for g in ("apps", "autoscaling", "coordination.k8s.io", "events.k8s.io",
                  "apiregistration.k8s.io", "rbac.authorization.k8s.io", "policy",
                  "authentication.k8s.io", "authorization.k8s.io"):
            self.assertIn(g, groups)
        self.assertEqual(groups["autoscaling"]["preferredVersion"]["groupVersion"],
                         "autoscaling/v2")
        core = self.c.request("GET", "/api/v1")
        self.assertEqual((core["kind"], core["groupVersion"]), ("APIResourceList", "v1"))
        pods = [r for r in core["resources"] if r["name"] == "pods"][0]
        self.assertEqual((pods["namespaced"], pods["kind"], pods["singularName"]),
                         (True, "Pod", "pod"))
        self.assertIn("watch", pods["verbs"])
        apps = self.c.request("GET", "/apis/apps/v1")
        self.assertIn("deployments/scale", [r["name"] for r in apps["resources"]])
        self.assertEqual(self.c.request("GET", "/apis/coordination.k8s.io")["kind"], "APIGroup")
        self.assertEqual(self.c.version()["major"], "1")
        self.assertEqual(self.c.request("GET", "/healthz"), "ok")
        e = self.assertApiError(404, "NotFound", self.c.request, "GET", "/apis/nope/v1/things")
        self.assertEqual(e.message, "the server could not find the requested resource")
        self.assertApiError(405, "MethodNotAllowed", self.c.request, "PUT",
                            "/apis/authentication.k8s.io/v1/tokenreviews/x", {})
        # PUT and PATCH on a collection, POST on an object: routes kube-apiserver has not
        cms = "/api/v1/namespaces/%s/configmaps" % self.ns
        self.assertApiError(405, "MethodNotAllowed", self.c.request, "PUT", cms,
                            {"metadata": {"name": "x"}})
        self.assertApiError(405, "MethodNotAllowed", self.c.request, "PATCH", cms, {},
                            content_type="application/merge-patch+json")
        self.assertApiError(405, "MethodNotAllowed", self.c.request, "POST", cms + "/x",
                            {"metadata": {"name": "x"}})

    def test_cli_entry_points(self):
        for cmd in ([sys.executable, "-m", "fakekube", "--help"],
                    [sys.executable, os.path.join(E2E, "fakekube", "server.py"), "--help"]):
            r = subprocess.run(cmd, cwd=E2E, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=20)
            self.assertEqual(r.returncode, 0, r.stderr)
            for flag in (b"--listen", b"--tls-cert", b"--client-ca", b"--token",
                         b"--write-kubeconfig", b"--history", b"--bookmark-interval",
                         b"--faults", b"--admin-listen", b"--verbose"):
                self.assertIn(flag, r.stdout)

    def test_concurrent_clients(self):
        """Several threads writing at once: every write gets its own resourceVersion."""
        errors, rvs = [], []
        lock = threading.Lock()

        def work(i):
            cl = FK.client()
            try:
                for j in range(10):
                    o = cl.create("configmaps", cm("c%d-%d" % (i, j)), namespace=self.ns)
                    with lock:
                        rvs.append(int(o["metadata"]["resourceVersion"]))
            except Exception as e:  # collected and asserted below
                errors.append(e)
            finally:
                cl.close()
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        self.assertEqual(errors, [])
        self.assertEqual(len(set(rvs)), 40)


class _EchoBackend:
    """A TLS server standing in for an aggregated API server: records what arrives (headers,
    query, client certificate CN) and answers discovery with a configurable status."""

    def __init__(self, cert, key, client_ca):
        import http.server
        self.seen = []
        self.discovery_status = 200
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self):
                peer = self.connection.getpeercert() or {}
                cn = [v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"]
                rec = {"path": self.path, "cn": cn[0] if cn else None,
                       "headers": [(k, v) for k, v in self.headers.items()]}
                outer.seen.append(rec)
                if self.path.rstrip("/") == "/apis/echo.example.com/v1":
                    code, body = outer.discovery_status, {
                        "kind": "APIResourceList", "apiVersion": "v1",
                        "groupVersion": "echo.example.com/v1", "resources": []}
                else:
                    code, body = 200, {"kind": "Echo", "record": rec}
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Backend", "echo")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        import http.server as hs

        class S(hs.ThreadingHTTPServer):
            daemon_threads = True

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.load_verify_locations(client_ca)
        ctx.verify_mode = ssl.CERT_OPTIONAL
        self.server = S(("127.0.0.1", 0), H)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class TestAggregator(unittest.TestCase):
    """APIServices with a service are proxied like kube-aggregator does, with availability."""

    def test_proxy_and_availability(self):
        import base64
        fk = harness.start(front_proxy=True, aggregator_resync="0.3s")
        backend = None
        c = fk.client()
        try:
            ns = "agg"
            c.create("namespaces", {"metadata": {"name": ns}})
            pki = os.path.join(fk.tmpdir, "echo-pki")
            ca = harness.make_ca(pki, "echo-ca", "echo-ca")
            cert, key = harness.make_cert(pki, ca, "echo", "echo", usage="serverAuth",
                                          dns=("echo.%s.svc" % ns,))
            other_ca = harness.make_ca(pki, "other-ca", "other-ca")
            backend = _EchoBackend(cert, key, fk.front_proxy["ca"])
            with open(ca[0], "rb") as f:
                bundle = base64.b64encode(f.read()).decode()
            c.create("apiservices", {"metadata": {"name": "v1.echo.example.com"}, "spec": {
                "group": "echo.example.com", "version": "v1", "groupPriorityMinimum": 100,
                "versionPriority": 100, "caBundle": bundle,
                "service": {"namespace": ns, "name": "echo", "port": 443}}})

            def cond():
                st = c.get("apiservices", "v1.echo.example.com").get("status") or {}
                return {x["type"]: x for x in st.get("conditions", [])}.get("Available")
            wait_for(lambda: (cond() or {}).get("reason") == "ServiceNotFound", 5)
            c.create("services", {"metadata": {"name": "echo"}, "spec": {
                "ports": [{"port": 443, "targetPort": 6443}]}}, ns)
            wait_for(lambda: (cond() or {}).get("reason") == "EndpointsNotFound", 5)
            code, hdrs, body = c.raw("GET", "/apis/echo.example.com/v1/namespaces/x/things")
            self.assertEqual((code, body), (503, b"service unavailable\n"))
            groups = [g["name"] for g in c.request("GET", "/apis")["groups"]]
            self.assertIn("echo.example.com", groups)   # listed even while unavailable
            self.assertEqual(c.request("GET", "/apis/echo.example.com")["preferredVersion"],
                             {"groupVersion": "echo.example.com/v1", "version": "v1"})

            fk.set_service_endpoint(ns, "echo", "127.0.0.1:%d" % backend.port)
            wait_for(lambda: (cond() or {}).get("status") == "True", 5)
            self.assertEqual((cond()["reason"], cond()["message"]), ("Passed",
                                                                     "all checks passed"))
            probe = [r for r in backend.seen if r["path"] == "/apis/echo.example.com/v1"][0]
            self.assertEqual(probe["cn"], "front-proxy-client")
            self.assertIn(("X-Remote-User", "system:kube-aggregator"), probe["headers"])
            self.assertIn(("X-Remote-Group", "system:masters"), probe["headers"])

            code, hdrs, body = c.raw("GET", "/apis/echo.example.com/v1/namespaces/x/things",
                                     params={"zeta": "1", "labelSelector": "a=b,c in (d)"},
                                     headers={"X-Remote-User": "spoofed"})
            self.assertEqual(code, 200, body)
            self.assertEqual(hdrs.get("X-Backend"), "echo")
            rec = json.loads(body)["record"]
            self.assertEqual(rec["cn"], "front-proxy-client")
            self.assertEqual(rec["path"], "/apis/echo.example.com/v1/namespaces/x/things"
                                          "?labelSelector=a%3Db%2Cc+in+%28d%29&zeta=1")
            h = rec["headers"]
            self.assertEqual([v for k, v in h if k == "X-Remote-User"], ["e2e-admin"])
            self.assertEqual([v for k, v in h if k == "X-Remote-Group"],
                             ["system:masters", "system:authenticated"])
            self.assertFalse([k for k, v in h if k.lower() == "authorization"])
            log, _ = fk.requests()
            proxied = [r for r in log if r.get("aggregated") == "v1.echo.example.com"]
            self.assertTrue(proxied and proxied[-1]["user"] == "e2e-admin")
            self.assertEqual(proxied[-1]["verb"], "list")
            # unauthenticated callers never reach the backend
            before = len(backend.seen)
            anon = Client(KubeConfig(fk.url, ca_file=fk.pki["ca"]))
            self.assertEqual(anon.raw("GET", "/apis/echo.example.com/v1")[0], 401)
            anon.close()
            self.assertEqual([r for r in backend.seen[before:]
                              if r["path"] == "/apis/echo.example.com/v1" and
                              ("X-Remote-User", "system:kube-aggregator") not in r["headers"]],
                             [])

            # a caBundle that does not sign the backend: the proxy refuses it (503), while the
            # availability check, which does not verify, still passes
            with open(other_ca[0], "rb") as f:
                c.patch("apiservices", "v1.echo.example.com",
                        {"spec": {"caBundle": base64.b64encode(f.read()).decode()}})
            time.sleep(0.5)
            code, _, body = c.raw("GET", "/apis/echo.example.com/v1/namespaces/x/things")
            self.assertEqual(code, 503)
            self.assertIn(b"certificate verify failed", body)
            self.assertEqual(cond()["status"], "True")

            backend.discovery_status = 500
            wait_for(lambda: (cond() or {}).get("reason") == "FailedDiscoveryCheck", 5)
            self.assertIn("bad status from https://127.0.0.1:%d/apis/echo.example.com/v1: 500"
                          % backend.port, cond()["message"])
            self.assertEqual(cond()["status"], "False")
        finally:
            c.close()
            if backend:
                backend.close()
            fk.stop()

class TestUpstreamOptionsAndRules(Base):
    """Query options, DeleteOptions, selectors and validation rules read, checked and worded
    as kube-apiserver does (each against the upstream Go source it names)."""

    def get_error(self, path, params=None, method="GET", body=None):
        """The Status of a refused request (raw: the query may repeat a parameter)."""
        code, _, payload = self.c.raw(method, path, body=body, params=params)
        self.assertGreaterEqual(code, 400, payload)
        st = json.loads(payload)
        self.assertEqual(st["code"], code)
        return st

    def test_list_watch_options_are_decoded_and_validated_as_upstream(self):
        """handlers/get.go ListResource: DecodeParameters (strconv.ParseInt for limit and
        timeoutSeconds: 400), ValidateListOptions (meta/internalversion/validation: 422
        ListOptions.meta.k8s.io, the watch rules of sendInitialEvents and
        resourceVersionMatch), bools as runtime.Convert_Slice_string_To_bool reads them, a
        parameter's first value, and an object's GET that ignores ?watch."""
        for n in "abc":
            self.c.create("configmaps", cm(n), namespace=self.ns)
        path = self.c.path("configmaps", self.ns)
        for params, msg in (({"limit": "abc"}, 'strconv.ParseInt: parsing "abc": invalid syntax'),
                            ({"limit": ""}, 'strconv.ParseInt: parsing "": invalid syntax'),
                            ({"limit": "99999999999999999999"}, 'strconv.ParseInt: parsing '
                             '"99999999999999999999": value out of range'),
                            ({"timeoutSeconds": "1.5"},
                             'strconv.ParseInt: parsing "1.5": invalid syntax'),
                            ({"watch": "true", "timeoutSeconds": "abc"},
                             'strconv.ParseInt: parsing "abc": invalid syntax')):
            st = self.get_error(path, params)
            self.assertEqual((st["code"], st["reason"], st["message"]), (400, "BadRequest", msg))
        # a negative limit is none (Limit > 0): the whole list
        lst = self.c.request("GET", path, params={"limit": "-1"})
        self.assertEqual(len(lst["items"]), 3)
        self.assertNotIn("continue", lst["metadata"])
        # the first of a repeated parameter
        lst = self.c.request("GET", path + "?limit=1&limit=abc")
        self.assertEqual(len(lst["items"]), 1)

        def invalid(params, message):
            st = self.get_error(path, params)
            self.assertEqual((st["code"], st["reason"]), (422, "Invalid"), st)
            self.assertEqual(st["message"], 'ListOptions.meta.k8s.io "" is invalid: ' + message)
            self.assertEqual(st["details"]["group"], "meta.k8s.io")
            self.assertEqual(st["details"]["kind"], "ListOptions")
            self.assertNotIn("name", st["details"])   # StatusDetails.name is omitempty
            return st
        invalid({"sendInitialEvents": "true"},
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
        invalid({"watch": "true", "sendInitialEvents": "true", "allowWatchBookmarks": "true"},
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                "resourceVersionMatch to NotOlderThan")
        invalid({"watch": "1", "resourceVersionMatch": "NotOlderThan"},
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
                "unless sendInitialEvents is provided")
        st = invalid({"watch": "true", "sendInitialEvents": "false",
                      "resourceVersionMatch": "Exact"},
                     '[resourceVersionMatch: Forbidden: sendInitialEvents requires setting '
                     'resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported '
                     'value: "Exact": supported values: "NotOlderThan"]')
        self.assertEqual([c["reason"] for c in st["details"]["causes"]],
                         ["FieldValueForbidden", "FieldValueNotSupported"])
        # sendInitialEvents=false: no initial events, even from "0"; what comes after does
        w = self.c.watch("configmaps", self.ns, resource_version="0",
                         send_initial_events=False, timeout_seconds=5)
        self.assertIsNone(w.next_event(0.5))
        self.c.create("configmaps", cm("d"), namespace=self.ns)
        ev = w.next_event(5)
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "d"))
        w.close()
        # ?watch=True is a watch (any value but false and 0); an object's GET ignores it
        code, headers, payload = self.c.raw("GET", path, params={"watch": "True",
                                                                 "timeoutSeconds": "1"})
        self.assertEqual(code, 200)
        self.assertEqual([json.loads(x)["type"] for x in payload.splitlines()], ["ADDED"] * 4)
        got = self.c.request("GET", self.c.path("configmaps", self.ns, "a"),
                             params={"watch": "true"})
        self.assertEqual((got["kind"], got["metadata"]["name"]), ("ConfigMap", "a"))
        # one object's watch (a /watch/ path): a field selector must select that name
        one = path.replace("/api/v1/", "/api/v1/watch/") + "/a"
        st = self.get_error(one, {"fieldSelector": "metadata.name=b", "timeoutSeconds": "1"})
        self.assertEqual((st["code"], st["message"]),
                         (400, "fieldSelector metadata.name doesn't match requested name"))

    def test_delete_options_as_upstream(self):
        """handlers/delete.go: DeleteOptions from the body when there is one (the query is
        then not read), else from the query (gracePeriodSeconds by strconv.ParseInt: 400);
        ValidateDeleteOptions (meta/v1/validation): 422 DeleteOptions.meta.k8s.io, before the
        object is looked up."""
        for n in "abc":
            self.c.create("configmaps", cm(n), namespace=self.ns)
        one = self.c.path("configmaps", self.ns, "a")

        def invalid(message, params=None, body=None, path=one, method="DELETE"):
            st = self.get_error(path, params, method, body)
            self.assertEqual((st["code"], st["reason"]), (422, "Invalid"), st)
            self.assertEqual(st["message"], 'DeleteOptions.meta.k8s.io "" is invalid: ' + message)
            self.assertEqual((st["details"]["group"], st["details"]["kind"]),
                             ("meta.k8s.io", "DeleteOptions"))
            self.assertNotIn("name", st["details"])
            return st
        bogus = ('propagationPolicy: Unsupported value: "Bogus": supported values: '
                 '"Foreground", "Background", "Orphan", "nil"')
        st = invalid(bogus, {"propagationPolicy": "Bogus"})
        self.assertEqual(st["details"]["causes"],
                         [{"reason": "FieldValueNotSupported", "field": "propagationPolicy",
                           "message": bogus.split(": ", 1)[1]}])
        invalid(bogus, body={"propagationPolicy": "Bogus"})
        invalid(bogus, {"propagationPolicy": "Bogus"},
                path=self.c.path("configmaps", self.ns, "missing"))
        invalid(bogus, {"propagationPolicy": "Bogus"}, path=self.c.path("configmaps", self.ns))
        invalid('propagationPolicy: Invalid value: "Foreground": orphanDependents and '
                'deletionPropagation cannot be both set',
                body={"orphanDependents": True, "propagationPolicy": "Foreground"})
        invalid('propagationPolicy: Invalid value: "Orphan": orphanDependents and '
                'deletionPropagation cannot be both set',
                {"orphanDependents": "false", "propagationPolicy": "Orphan"})
        invalid('dryRun: Unsupported value: []string{"true"}: supported values: "All"',
                {"dryRun": "true"})
        st = self.get_error(one, {"gracePeriodSeconds": "soon"}, "DELETE")
        self.assertEqual((st["code"], st["reason"], st["message"]),
                         (400, "BadRequest", 'strconv.ParseInt: parsing "soon": invalid syntax'))
        self.assertEqual(self.c.get("configmaps", "a", self.ns)["metadata"]["name"], "a")
        # a body: the query is not read at all
        code, _, payload = self.c.raw("DELETE", one, body={"propagationPolicy": "Background"},
                                      params={"propagationPolicy": "Bogus", "dryRun": "All"})
        self.assertEqual(code, 200, payload)
        self.assertIsNone(self.c.get_or_none("configmaps", "a", self.ns))
        # no body: the query's options (a dry run here, answered as the delete would be:
        # the object marked with the orphan finalizer, which is not stored)
        code, _, payload = self.c.raw("DELETE", self.c.path("configmaps", self.ns, "b"),
                                      params={"propagationPolicy": "Orphan", "dryRun": "All"})
        self.assertEqual(code, 200, payload)
        got = json.loads(payload)
        self.assertEqual(got["metadata"]["finalizers"], ["orphan"])
        self.assertIn("deletionTimestamp", got["metadata"])
        stored = self.c.get_or_none("configmaps", "b", self.ns)
        self.assertIsNotNone(stored)
        self.assertNotIn("finalizers", stored["metadata"])
        self.assertNotIn("deletionTimestamp", stored["metadata"])
        # a dry run of a delete that would remove it: the Status a ConfigMap's gets
        code, _, payload = self.c.raw("DELETE", self.c.path("configmaps", self.ns, "b"),
                                      params={"dryRun": "All"})
        self.assertEqual(code, 200, payload)
        got = json.loads(payload)
        self.assertEqual((got["kind"], got["status"], got["details"]["name"],
                          got["details"]["kind"]), ("Status", "Success", "b", "configmaps"))
        self.assertIsNotNone(self.c.get_or_none("configmaps", "b", self.ns))

    def test_event_validation_as_upstream(self):
        """core/validation/events.go: a core/v1 Event passes legacyValidateEvent alone (no
        type check; its name a path segment, checked by rest.BeforeCreate after the
        strategy); an events.k8s.io/v1 one the strict rules too, with the internal type's
        paths (involvedObject, message) and its wording."""
        ns = self.ns
        old = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"},
               "involvedObject": {"kind": "Deployment", "namespace": ns, "name": "web",
                                  "apiVersion": "apps/v1"},
               "reason": "ScaledUp", "message": "scaled to 3", "type": "Normal",
               "source": {"component": "gpuscaler"}, "count": 1,
               "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z"}

        def refused(resource, obj, message, name=None):
            e = self.assertApiError(422, "Invalid", self.c.create, resource, obj, namespace=ns)
            qual = "Event" if resource == "events" else "Event.events.k8s.io"
            self.assertEqual(e.message, '%s "%s" is invalid: %s'
                             % (qual, name or obj["metadata"]["name"], message))
            return e
        # an old Event (no eventTime) whose object has no namespace: only in "" or default
        bad = dict(old, involvedObject={"kind": "Node", "name": "n1"})
        refused("events", bad, 'involvedObject.namespace: Invalid value: "": does not match '
                               'event.namespace')
        refused("events", dict(old, involvedObject=dict(old["involvedObject"], namespace="x")),
                'involvedObject.namespace: Invalid value: "x": does not match event.namespace')
        # any type, and a name that is only a path segment
        got = self.c.create("events", dict(old, type="Custom",
                                           metadata={"name": "Web_Event.1"}), namespace=ns)
        self.assertEqual(got["type"], "Custom")
        # with an eventTime: the reporting fields, action and reason, lengths in bytes
        new_core = dict(old, metadata={"name": "web.2"}, eventTime="2024-01-01T00:00:01.000000Z",
                        reportingComponent="gpuscaler", reportingInstance="x" * 129,
                        action="Scale", type="Custom")
        e = refused("events", new_core, 'reportingInstance: Invalid value: "": can have at most '
                                        '128 characters')
        self.assertEqual(e.status["details"]["causes"][0]["field"], "reportingInstance")
        # a core/v1 request's errors name its own field, reportingComponent (1.25 on)
        e = refused("events", dict(new_core, reportingInstance="pod-1", reportingComponent=""),
                    '[reportingComponent: Required value, reportingComponent: Invalid value: '
                    '"": name part must be non-empty, reportingComponent: Invalid value: "": '
                    'name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\', '
                    'and must start and end with an alphanumeric character (e.g. \'MyName\',  or '
                    '\'my.name\',  or \'123-abc\', regex used for validation is '
                    '\'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\')]')
        self.c.create("events", dict(new_core, reportingInstance="pod-1"), namespace=ns)

        new = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
               "metadata": {"name": "web.3"}, "eventTime": "2024-01-01T00:00:01.000000Z",
               "reportingController": "gpuscaler.io/controller", "reportingInstance": "pod-1",
               "action": "Scale", "reason": "ScaledDown", "type": "Normal",
               "regarding": {"kind": "Deployment", "namespace": ns, "name": "web"},
               "note": "scaled to 1"}
        v1 = "events.k8s.io/v1/events"
        refused(v1, dict(new, type="Bogus"), 'type: Invalid value: "": has invalid value: Bogus')
        refused(v1, dict(new, note="n" * 1025), 'message: Invalid value: "": can have at most '
                                                '1024 characters')
        refused(v1, dict(new, deprecatedCount=2, deprecatedSource={"component": "c"}),
                '[count: Invalid value: "": needs to be unset, source: Invalid value: "": needs '
                'to be unset]')
        refused(v1, dict(new, series={"count": 1, "lastObservedTime":
                                      "2024-01-01T00:00:02.000000Z"}),
                'series.count: Invalid value: "": should be at least 2')
        e = refused(v1, dict(new, reportingController=""),
                    '[reportingController: Required value, reportingController: Invalid value: '
                    '"": name part must be non-empty, reportingController: Invalid value: "": '
                    'name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\', '
                    'and must start and end with an alphanumeric character (e.g. \'MyName\',  or '
                    '\'my.name\',  or \'123-abc\', regex used for validation is '
                    '\'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\')]')
        # the name rule of events.k8s.io is ObjectMeta's DNS subdomain, after the legacy ones
        e = refused(v1, dict(new, metadata={"name": "Web_3"}),
                    'metadata.name: Invalid value: "Web_3": a lowercase RFC 1123 subdomain must '
                    'consist of lower case alphanumeric characters, \'-\' or \'.\', and must '
                    'start and end with an alphanumeric character (e.g. \'example.com\', regex '
                    'used for validation is \'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]'
                    '([-a-z0-9]*[a-z0-9])?)*\')', name="Web_3")
        # with an eventTime, an object in another namespace is not checked
        got = self.c.create(v1, dict(new, regarding=dict(new["regarding"], namespace="other")),
                            namespace=ns)
        self.assertEqual(got["regarding"]["namespace"], "other")
        # an update may not change what happened (reason is checked twice upstream)
        got["reason"] = "Other"
        e = self.assertApiError(422, "Invalid", self.c.update, v1, got, ns)
        self.assertEqual(e.message, 'Event.events.k8s.io "web.3" is invalid: reason: Invalid '
                                    'value: "Other": field is immutable')
        self.assertEqual([c["field"] for c in e.status["details"]["causes"]],
                         ["reason", "reason"])
        got = self.c.get(v1, "web.3", ns)
        got["series"] = {"count": 2, "lastObservedTime": "2024-01-01T00:00:05.000000Z"}
        self.assertEqual(self.c.update(v1, got, ns)["series"]["count"], 2)

    def test_configmap_keys_as_upstream(self):
        """core/validation ValidateConfigMap: each key of data and binaryData passes
        IsConfigMapKey (its path data[key], one error per message: at most 253 bytes,
        [-._a-zA-Z0-9]+, not "." or "..", not starting with ".."), a key in both maps is
        data[key]'s error; an update of an immutable one names `immutable` first."""
        regex = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                 "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
                 "is '[-._a-zA-Z0-9]+')")
        long = "k" * 254
        for key, msgs in (("a b", [regex]), (".", ["must not be '.'"]),
                          ("..", ["must not be '..'"]), ("..x", ["must not start with '..'"]),
                          (long, ["must be no more than 253 characters"]),
                          ("../x", [regex, "must not start with '..'"])):
            obj = cm("c1", data={key: "v"})
            e = self.assertApiError(422, "Invalid", self.c.create, "configmaps", obj,
                                    namespace=self.ns)
            errs = ["data[%s]: Invalid value: \"%s\": %s" % (key, key, m) for m in msgs]
            self.assertEqual(e.message, 'ConfigMap "c1" is invalid: ' +
                             (errs[0] if len(errs) == 1 else "[%s]" % ", ".join(errs)))
            self.assertEqual([(c["field"], c["reason"]) for c in e.status["details"]["causes"]],
                             [("data[%s]" % key, "FieldValueInvalid")] * len(msgs))
        obj = cm("c1", data={"k": "v"})
        obj["binaryData"] = {"k": "dg==", "bad key": "dg=="}
        e = self.assertApiError(422, "Invalid", self.c.create, "configmaps", obj,
                                namespace=self.ns)
        self.assertEqual(e.message, 'ConfigMap "c1" is invalid: [data[k]: Invalid value: "k": '
                                    'duplicate of key present in binaryData, binaryData[bad key]: '
                                    'Invalid value: "bad key": ' + regex + ']')
        # a Secret's keys are IsConfigMapKey's too
        sec = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
               "data": {"a b": "dg=="}}
        e = self.assertApiError(422, "Invalid", self.c.create, "secrets", sec, namespace=self.ns)
        self.assertEqual(e.message, 'Secret "s1" is invalid: data[a b]: Invalid value: "a b": '
                         + regex)
        # ValidateConfigMapUpdate: immutable, then data, then binaryData
        frozen = cm("frozen", data={"k": "v"})
        frozen["immutable"] = True
        got = self.c.create("configmaps", frozen, namespace=self.ns)
        got["immutable"] = False
        got["data"] = {"k": "w"}
        e = self.assertApiError(422, "Invalid", self.c.update, "configmaps", got, self.ns)
        self.assertEqual([c["field"] for c in e.status["details"]["causes"]],
                         ["immutable", "data"])

    def test_list_at_resource_version_0_ignores_limit(self):
        """cacher.go shouldDelegateList: a list at resourceVersion "0" without a continue
        token is served from the watch cache, which ignores the limit: the whole list, with no
        continue token and no remainingItemCount."""
        for n in "abc":
            self.c.create("configmaps", cm(n), namespace=self.ns)
        path = self.c.path("configmaps", self.ns)
        for params in ({"resourceVersion": "0", "limit": "1"},
                       {"resourceVersion": "0", "resourceVersionMatch": "NotOlderThan",
                        "limit": "1"}):
            lst = self.c.request("GET", path, params=params)
            self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["a", "b", "c"])
            self.assertEqual(list(lst["metadata"]), ["resourceVersion"], params)
        # without it a limit pages, and a continued list may say "0"
        first = self.c.request("GET", path, params={"limit": "1"})
        self.assertEqual(len(first["items"]), 1)
        nxt = self.c.request("GET", path, params={"limit": "1", "resourceVersion": "0",
                                                  "continue": first["metadata"]["continue"]})
        self.assertEqual([i["metadata"]["name"] for i in nxt["items"]], ["b"])
        self.assertIn("continue", nxt["metadata"])

    def test_selector_errors_as_upstream(self):
        """labels/selector.go Parse and fields/selector.go ParseSelector, their errors as the
        400's message: a requirement's errors wrapped in "unable to parse requirement", the
        key checked at once with no field path (<nil>), NewRequirement's errors aggregated;
        field selectors' terms sorted, values unescaped; then scheme.ConvertFieldLabel: a kind
        without field labels of its own takes only metadata.name and metadata.namespace."""
        path = self.c.path("configmaps", self.ns)
        qname = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                 "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                 "or '123-abc', regex used for validation is "
                 "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
        value = ("a valid label must be an empty string or consist of alphanumeric characters, "
                 "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                 "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                 "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
        subdomain = ("prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                     "alphanumeric characters, '-' or '.', and must start and end with an "
                     "alphanumeric character (e.g. 'example.com', regex used for validation is "
                     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
        req = "unable to parse requirement: "
        for sel, msg in (
                ("tier in gpu", req + "found 'gpu' expected: '('"),
                ("a=b c", "found 'c', expected: ',' or 'end of string'"),
                ("a,", "found '', expected: identifier after ','"),
                (",a", "found ',', expected: !, identifier, or 'end of string'"),
                ("!", req + "found '', expected: identifier"),
                ("a b", req + "found 'b', expected: in, notin, =, ==, !=, gt, lt"),
                ("x in (a b)", req + "found 'b', expected: ',' or ')'"),
                ("x in (a,", req + "found '', expected: ',', or identifier"),
                ("x in (", req + "found '', expected: ',', ')' or identifier"),
                ("a=(", req + "found '(', expected: identifier"),
                ("-bad", req + '<nil>: Invalid value: "-bad": ' + qname),
                ("Foo.com/", req + '<nil>: Invalid value: "Foo.com/": ' + subdomain +
                 "; name part must be non-empty; " + qname),
                ("k>abc", req + 'values[0]: Invalid value: "abc": for \'Gt\', \'Lt\' operators, '
                                'the value must be an integer'),
                ("x in (-b,-a)", req + '[values[0][x]: Invalid value: "-a": %s, values[1][x]: '
                                       'Invalid value: "-b": %s]' % (value, value)),
                ("metadata.name", "invalid selector: 'metadata.name'; can't understand "
                                  "'metadata.name'"),
        ):
            params = {"fieldSelector": sel} if sel == "metadata.name" else {"labelSelector": sel}
            st = self.get_error(path, params)
            self.assertEqual((st["code"], st["reason"], st["message"]),
                             (400, "BadRequest", msg), sel)
        # "in" is an identifier where a key is expected; an operator's neighbours need no space
        self.c.create("configmaps", cm("a", {"in": "x", "n": "5"}), namespace=self.ns)
        for sel in ("in=x", "in in (x)", "n>4", "n<6,in"):
            self.assertEqual(len(self.c.list("configmaps", self.ns, label_selector=sel)["items"]),
                             1, sel)
        for sel, msg in (
                ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
                ("metadata.name=a\\x", "invalid field selector: invalid escape sequence: \\x"),
                ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
                ("spec.foo=1", '"spec.foo" is not a known field selector: only '
                               '"metadata.name", "metadata.namespace"'),
                (" metadata.name=a", '" metadata.name" is not a known field selector: only '
                                     '"metadata.name", "metadata.namespace"')):
            st = self.get_error(path, {"fieldSelector": sel})
            self.assertEqual((st["code"], st["message"]), (400, msg), sel)
        self.assertEqual(len(self.c.list("configmaps", self.ns,
                                         field_selector="metadata.name=a\\,b,=")["items"]), 0)
        # the terms are sorted: the first unsupported label in that order is named
        st = self.get_error(self.c.path("pods", self.ns), {"fieldSelector": "z=1,y=2"})
        self.assertEqual(st["message"], "field label not supported: y")
        # events.k8s.io/v1 names its own labels (events/v1 AddFieldLabelConversionsForEvent)
        st = self.get_error(self.c.path("events.k8s.io/v1/events", self.ns),
                            {"fieldSelector": "involvedObject.name=x"})
        self.assertEqual(st["message"], "field label not supported: involvedObject.name")
        ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
              "eventTime": "2024-01-01T00:00:01.000000Z", "reportingController": "ctl",
              "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal",
              "regarding": {"kind": "Pod", "namespace": self.ns, "name": "p"}}
        self.c.create("events.k8s.io/v1/events", ev, namespace=self.ns)
        # "source" is the source component, else the reporting controller
        self.assertEqual([i["metadata"]["name"] for i in self.c.list(
            "events", self.ns, field_selector="source=ctl")["items"]], ["e1"])
        self.assertEqual(len(self.c.list("events.k8s.io/v1/events", self.ns,
                                         field_selector="source=ctl,regarding.name=p")["items"]),
                         1)
        # a Service's spec.type and spec.clusterIP (core/v1 AddFieldLabelConversionsForService)
        self.assertEqual(self.c.list("services", self.ns,
                                     field_selector="spec.type=ClusterIP")["items"], [])


class TestUpstreamEdges(Base):
    """Requests at the edges of what kube-apiserver 1.31 takes, answered as it answers them
    (each against the upstream Go source it names)."""

    def error(self, path, params=None, method="GET", body=None, content_type=None):
        code, _, payload = self.c.raw(method, path, body=body, params=params,
                                      content_type=content_type)
        self.assertGreaterEqual(code, 400, payload[:500])
        st = json.loads(payload)
        self.assertEqual((st["kind"], st["apiVersion"], st["status"], st["code"]),
                         ("Status", "v1", "Failure", code))
        return st

    def unknown_500(self, st, message):
        """A plain error, not an API status (ErrorToAPIStatus): 500, StatusReasonUnknown ("",
        omitted), no details."""
        self.assertEqual(st["code"], 500, st)
        self.assertNotIn("reason", st)
        self.assertNotIn("details", st)
        self.assertEqual(st["message"], message)

    def test_negative_watch_timeout_ends_at_once(self):
        """handlers/get.go: only a timeoutSeconds of 0 takes the random default; a negative
        one makes a context already expired, and the watch ends at once (the fake kept it
        open for --min-request-timeout)."""
        self.c.create("configmaps", cm("a"), namespace=self.ns)
        path = self.c.path("configmaps", self.ns)
        for rv in (None, "0"):
            t0 = time.monotonic()
            code, _, payload = self.c.raw("GET", path, params={
                "watch": "true", "timeoutSeconds": "-1", "resourceVersion": rv}, timeout=5)
            self.assertLess(time.monotonic() - t0, 2.5)
            self.assertEqual((code, payload), (200, b""))
        # 0 is the default: the watch stays open
        w = self.c.watch("configmaps", self.ns, timeout_seconds=0)
        self.assertEqual(w.next_event(2)["type"], "ADDED")
        self.assertIsNone(w.next_event(0.5))
        self.assertIsNone(w.ended)
        w.close()

    def test_malformed_resource_versions(self):
        """A resourceVersion that strconv.ParseUint refuses (APIObjectVersioner): served from
        the watch cache (a watch; a list without a limit) the storage InvalidError reaches
        the client as it is, a 500 with no reason; a list etcd serves (a limit, Exact)
        answers 400 "invalid resource version: ..." (etcd3 GetList)."""
        self.c.create("configmaps", cm("a"), namespace=self.ns)
        path = self.c.path("configmaps", self.ns)

        def invalid(text, why="invalid syntax"):
            return 'resourceVersion: Invalid value: "%s": strconv.ParseUint: parsing "%s": %s' \
                % (text, text, why)
        for params, text, why in (
                ({"resourceVersion": "abc"}, "abc", "invalid syntax"),
                ({"resourceVersion": "-1"}, "-1", "invalid syntax"),
                ({"resourceVersion": "+5"}, "+5", "invalid syntax"),
                ({"resourceVersion": "99999999999999999999"}, "99999999999999999999",
                 "value out of range"),
                ({"resourceVersion": "1_0", "resourceVersionMatch": "NotOlderThan"}, "1_0",
                 "invalid syntax"),
                ({"resourceVersion": "abc", "limit": "0"}, "abc", "invalid syntax"),
                ({"watch": "true", "resourceVersion": "abc"}, "abc", "invalid syntax"),
                ({"watch": "true", "resourceVersion": "x", "sendInitialEvents": "true",
                  "resourceVersionMatch": "NotOlderThan"}, "x", "invalid syntax")):
            self.unknown_500(self.error(path, params), invalid(text, why))
        # a GET's is cacher.Get's: 500 as well; one not reached yet is waited for (504)
        one = self.c.path("configmaps", self.ns, "a")
        self.unknown_500(self.error(one, {"resourceVersion": "x1"}), invalid("x1"))
        cur = int(FK.state()["resourceVersion"])
        st = self.error(one, {"resourceVersion": str(cur + 1000)})
        self.assertEqual((st["code"], st["reason"]), (504, "Timeout"))
        self.assertTrue(st["message"].startswith("Timeout: Too large resource version: %d, "
                                                 "current: " % (cur + 1000)), st)
        self.assertEqual(self.c.request("GET", one, params={"resourceVersion": str(cur)})
                         ["metadata"]["name"], "a")
        for params in ({"resourceVersion": "abc", "limit": "1"},
                       {"resourceVersion": "-1", "resourceVersionMatch": "Exact"},
                       {"resourceVersion": "abc", "limit": "5", "continue": "x"}):
            st = self.error(path, params)
            self.assertEqual((st["code"], st["reason"], st["message"]),
                             (400, "BadRequest", "invalid resource version: " + invalid(
                                 params["resourceVersion"])), params)

    def test_malformed_continue_tokens(self):
        """A continue token is etcd3's (storage.EncodeContinue: base64url of {"v", "rv",
        "start"}, the start key relative to the list's key prefix) and is read by
        storage.DecodeContinue: its errors are 400 "invalid continue token: ...", before the
        resourceVersion that may not come with one."""
        for n in ("a", "b", "c"):
            self.c.create("configmaps", cm(n), namespace=self.ns)
        path = self.c.path("configmaps", self.ns)
        first = self.c.list("configmaps", self.ns, limit=1)
        tok = first["metadata"]["continue"]
        data = json.loads(base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4)))
        self.assertEqual(data, {"v": "meta.k8s.io/v1",
                                "rv": int(first["metadata"]["resourceVersion"]),
                                "start": "a\x00"})
        self.assertNotIn("=", tok)
        rest = self.c.list("configmaps", self.ns, limit=5, continue_token=tok)
        self.assertEqual([i["metadata"]["name"] for i in rest["items"]], ["b", "c"])

        def enc(obj):
            raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
            return base64.urlsafe_b64encode(raw).decode().rstrip("=")
        generic = "invalid continue token: continue key is not valid"
        rv = int(first["metadata"]["resourceVersion"])
        for token, msg in (
                ("abc=", generic + ": illegal base64 data at input byte 3"),
                ("a", generic + ": illegal base64 data at input byte 0"),
                ("ab!d", generic + ": illegal base64 data at input byte 2"),
                (enc(b"{bad"), generic + ": invalid character 'b' looking for beginning of "
                                         "object key string"),
                (enc(b'{"v":1'), generic + ": unexpected end of JSON input"),
                (enc(b"[]"), generic + ": json: cannot unmarshal array into Go value of type "
                                       "storage.continueToken"),
                (enc({"v": "meta.k8s.io/v1", "rv": "5", "start": "a"}),
                 generic + ": json: cannot unmarshal string into Go struct field "
                           "continueToken.rv of type int64"),
                (enc({"v": "meta.k8s.io/v2", "rv": rv, "start": "a"}),
                 generic + ": server does not recognize this encoded version meta.k8s.io/v2"),
                (enc({"v": "meta.k8s.io/v1", "rv": 0, "start": "a"}),
                 generic + ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
                (enc({"v": "meta.k8s.io/v1", "rv": rv, "start": ""}),
                 generic + ": encoded start key empty (version meta.k8s.io/v1)"),
                (enc({"v": "meta.k8s.io/v1", "rv": rv, "start": "../other/a"}),
                 generic + ": ../other/a")):
            for params in ({"continue": token, "limit": "1"},
                           {"continue": token, "resourceVersion": "7"}):
                st = self.error(path, params)
                self.assertEqual((st["code"], st["reason"], st["message"]),
                                 (400, "BadRequest", msg), (token, params))
        st = self.error(path, {"continue": tok, "resourceVersion": "7"})
        self.assertEqual(st["message"], "specifying resource version is not allowed when "
                                        "using continue")
        # an all-namespaces list pages in etcd's key order ("a-b/x" before "a/x")
        other = self.ns + "-z"
        self.c.create("namespaces", {"metadata": {"name": other}})
        self.c.create("configmaps", cm("a"), namespace=other)
        names, cont = [], None
        while True:
            page = self.c.list("configmaps", None, limit=50, continue_token=cont)
            names += ["%s/%s" % (i["metadata"]["namespace"], i["metadata"]["name"])
                      for i in page["items"]]
            cont = page["metadata"].get("continue")
            if not cont:
                break
        mine = [n for n in names if n.split("/")[0] in (self.ns, other)]
        self.assertEqual(mine, [other + "/a", self.ns + "/a", self.ns + "/b", self.ns + "/c"])
        # compacted past the token's resourceVersion: 410 with a token to go on from the same
        # key at the latest one (handleCompactedErrorForPaging: rv -1)
        self.c.create("configmaps", cm("d"), namespace=self.ns)
        FK.compact()
        st = self.error(path, {"continue": tok, "limit": "5"})
        self.assertEqual((st["code"], st["reason"]), (410, "Expired"))
        again = st["metadata"]["continue"]
        self.assertEqual(json.loads(base64.urlsafe_b64decode(again + "=" * (-len(again) % 4))),
                         {"v": "meta.k8s.io/v1", "rv": -1, "start": "a\x00"})
        rest = self.c.list("configmaps", self.ns, limit=5, continue_token=again)
        self.assertEqual([i["metadata"]["name"] for i in rest["items"]], ["b", "c", "d"])

    def test_send_initial_events_waits_for_its_resource_version(self):
        """cacher.go waitUntilWatchCacheFreshAndForceAllEvents: with sendInitialEvents=true a
        resourceVersion not reached yet is waited for (3 s), and the initial events are the
        state at it; past the wait the watch opens with one ERROR event, the 504 Too large
        resource version (the fake sent the present state at once)."""
        rv = int(self.c.create("configmaps", cm("a"), namespace=self.ns)
                 ["metadata"]["resourceVersion"])
        want = rv + 1
        def later():
            c = FK.client()
            c.create("configmaps", cm("b"), namespace=self.ns)
            c.close()
        timer = threading.Timer(0.5, later)
        timer.start()
        try:
            w = self.c.watch("configmaps", self.ns, resource_version=str(want),
                             send_initial_events=True, allow_bookmarks=True, timeout_seconds=10)
        finally:
            timer.join()
        got = []
        while True:
            ev = w.next_event(5)
            self.assertIsNotNone(ev)
            if ev["type"] == "BOOKMARK":
                break
            got.append((ev["type"], ev["object"]["metadata"]["name"]))
        w.close()
        self.assertEqual(sorted(got), [("ADDED", "a"), ("ADDED", "b")])
        self.assertGreaterEqual(int(ev["object"]["metadata"]["resourceVersion"]), want)
        self.assertEqual(ev["object"]["metadata"]["annotations"],
                         {"k8s.io/initial-events-end": "true"})
        # never reached: 200, one ERROR event, the end
        cur = int(FK.state()["resourceVersion"])
        t0 = time.monotonic()
        code, _, payload = self.c.raw("GET", self.c.path("configmaps", self.ns), params={
            "watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
            "resourceVersion": str(cur + 1000), "timeoutSeconds": "10"}, timeout=15)
        self.assertGreaterEqual(time.monotonic() - t0, 2.9)
        self.assertLess(time.monotonic() - t0, 6)
        self.assertEqual(code, 200)
        events = [json.loads(x) for x in payload.splitlines()]
        self.assertEqual([e["type"] for e in events], ["ERROR"])
        st = events[0]["object"]
        self.assertEqual((st["code"], st["reason"]), (504, "Timeout"))
        self.assertRegex(st["message"], r"^Timeout: Too large resource version: %d, current: "
                                        r"\d+$" % (cur + 1000))
        self.assertEqual(st["details"], {"causes": [{"reason": "ResourceVersionTooLarge",
                                                     "message": "Too large resource version"}],
                                         "retryAfterSeconds": 1})

    def test_delete_body_decode_errors(self):
        """handlers/delete.go decodes a body with the serializer: its errors are plain errors
        that scope.err answers with a 500 without reason in 1.31 (400 from 1.35): Interpret's
        "couldn't get version/kind; json parse error: ..." (encoding/json), then the
        DeleteOptions' type errors (sigs.k8s.io/json). The object stays."""
        self.c.create("configmaps", cm("a"), namespace=self.ns)
        one = self.c.path("configmaps", self.ns, "a")
        kind = ('couldn\'t get version/kind; json parse error: ')
        find = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string '
                '"json:\\"kind,omitempty\\"" }')
        for body, msg in (
                (b"{bad", kind + "invalid character 'b' looking for beginning of object key "
                                 "string"),
                (b" ", kind + "unexpected end of JSON input"),
                (b'{"propagationPolicy": "Orphan"} x',
                 kind + "invalid character 'x' after top-level value"),
                (b"[1]", kind + "json: cannot unmarshal array into Go value of type " + find),
                (b'{"apiVersion": true}', kind + "json: cannot unmarshal bool into Go struct "
                                                 "field .apiVersion of type string"),
                (b'{"gracePeriodSeconds": "30"}', "json: cannot unmarshal string into Go "
                 "struct field DeleteOptions.gracePeriodSeconds of type int64"),
                (b'{"gracePeriodSeconds": 1.5}', "json: cannot unmarshal number 1.5 into Go "
                 "struct field DeleteOptions.gracePeriodSeconds of type int64"),
                (b'{"dryRun": "All"}', "json: cannot unmarshal string into Go struct field "
                 "DeleteOptions.dryRun of type []string"),
                (b'{"orphanDependents": "yes"}', "json: cannot unmarshal string into Go struct "
                 "field DeleteOptions.orphanDependents of type bool"),
                (b'{"preconditions": {"uid": 5}}', "json: cannot unmarshal number into Go "
                 "struct field Preconditions.preconditions.uid of type types.UID")):
            self.unknown_500(self.error(one, method="DELETE", body=body,
                                        content_type="application/json"), msg)
        self.assertIsNotNone(self.c.get_or_none("configmaps", "a", self.ns))
        # a deletecollection reads its list options first, then its body
        coll = self.c.path("configmaps", self.ns)
        st = self.error(coll, {"limit": "x"}, "DELETE", b"{bad", "application/json")
        self.assertEqual((st["code"], st["message"]),
                         (400, 'strconv.ParseInt: parsing "x": invalid syntax'))
        self.unknown_500(self.error(coll, None, "DELETE", b"{bad", "application/json"),
                         kind + "invalid character 'b' looking for beginning of object key "
                                "string")
        self.assertIsNotNone(self.c.get_or_none("configmaps", "a", self.ns))
        # unknown fields are dropped; null is no value
        code, _, payload = self.c.raw("DELETE", one, body={"bogus": 1, "preconditions": None,
                                                           "gracePeriodSeconds": None})
        self.assertEqual(code, 200, payload)

    def test_write_body_that_is_not_json(self):
        """A create's or update's body the serializer cannot interpret (its apiVersion and kind,
        read by encoding/json) is rest.go transformDecodeError's 400: the error, then the body
        summarized (summarizeData: an object's first 30 bytes, else their hex)."""
        path = self.c.path("configmaps", self.ns)
        head = ("the object provided is unrecognized (must be of type %s): couldn't get "
                "version/kind; json parse error: ")
        find = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string '
                '"json:\\"kind,omitempty\\"" }')
        long = b'{"metadata": {"name": "x"}, "data": {"k": 1,}}'
        for body, msg in (
                (b"{bad", "invalid character 'b' looking for beginning of object key string "
                          "({bad)"),
                (b"[1]", "json: cannot unmarshal array into Go value of type %s (5b315d)"
                 % find),
                (b'{"kind": 5}', 'json: cannot unmarshal number into Go struct field .kind of '
                                 'type string ({"kind": 5})'),
                (long, "invalid character '}' looking for beginning of object key string "
                       "(%s ...)" % long[:30].decode())):
            st = self.error(path, method="POST", body=body, content_type="application/json")
            self.assertEqual((st["code"], st["reason"], st["message"]),
                             (400, "BadRequest", head % "ConfigMap" + msg), body)
        self.c.create("deployments", deployment("web"), namespace=self.ns)
        st = self.error(self.c.path("deployments", self.ns, "web") + "/scale", method="PUT",
                        body=b"{bad", content_type="application/json")
        self.assertEqual(st["message"], head % "Scale" + "invalid character 'b' looking for "
                         "beginning of object key string ({bad)")

    def test_delete_preconditions(self):
        """rest.BeforeDelete: a precondition set (a pointer: an empty one too) that the object
        does not meet is 409 Conflict, named by kind (GroupResource{Resource: Kind})."""
        obj = self.c.create("configmaps", cm("a"), namespace=self.ns)
        uid, rv = obj["metadata"]["uid"], obj["metadata"]["resourceVersion"]
        one = self.c.path("configmaps", self.ns, "a")
        for pre, why in (
                ({"uid": ""}, "the UID in the precondition () does not match the UID in record "
                              "(%s). The object might have been deleted and then recreated"
                 % uid),
                ({"uid": "x"}, "the UID in the precondition (x) does not match the UID in record "
                               "(%s). The object might have been deleted and then recreated"
                 % uid),
                ({"resourceVersion": ""}, "the ResourceVersion in the precondition () does not "
                 "match the ResourceVersion in record (%s). The object might have been modified"
                 % rv),
                ({"uid": uid, "resourceVersion": "1"}, "the ResourceVersion in the precondition "
                 "(1) does not match the ResourceVersion in record (%s). The object might have "
                 "been modified" % rv)):
            st = self.error(one, method="DELETE", body={"preconditions": pre})
            self.assertEqual((st["code"], st["reason"], st["message"]),
                             (409, "Conflict", 'Operation cannot be fulfilled on ConfigMap "a": '
                              + why), pre)
            self.assertEqual(st["details"], {"name": "a", "kind": "ConfigMap"})
        dep = self.c.create("deployments", deployment("web"), namespace=self.ns)
        st = self.error(self.c.path("deployments", self.ns, "web"), method="DELETE",
                        body={"preconditions": {"uid": ""}})
        self.assertTrue(st["message"].startswith(
            'Operation cannot be fulfilled on Deployment.apps "web": the UID in the '
            'precondition () does not match'), st)
        self.assertEqual(st["details"], {"name": "web", "group": "apps", "kind": "Deployment"})
        code, _, payload = self.c.raw("DELETE", one, body={"preconditions": {
            "uid": uid, "resourceVersion": rv}})
        self.assertEqual(code, 200, payload)
        self.assertIsNone(self.c.get_or_none("configmaps", "a", self.ns))
        self.assertIsNotNone(dep)

    def test_dry_run_values_on_writes(self):
        """ValidateCreateOptions (UpdateOptions, PatchOptions): ValidateDryRun takes "All"
        only, every value of the repeated parameter, else 422 Invalid CreateOptions.meta.k8s.io
        (with the fieldValidation error, aggregated); dryRun=All writes nothing and moves no
        resourceVersion, the scale subresource and pods/binding included."""
        path = self.c.path("configmaps", self.ns)

        def invalid(opts, message, method="POST", p=path, body=None, ctype=None, query=""):
            st = self.error(p + query, method=method, body=body or cm("x"),
                            content_type=ctype)
            self.assertEqual((st["code"], st["reason"]), (422, "Invalid"), st)
            self.assertEqual(st["message"], '%s.meta.k8s.io "" is invalid: %s' % (opts, message))
            self.assertEqual(st["details"]["kind"], opts)
            return st
        unsupported = 'dryRun: Unsupported value: []string{%s}: supported values: "All"'
        invalid("CreateOptions", unsupported % '"true"', query="?dryRun=true")
        invalid("CreateOptions", unsupported % '""', query="?dryRun=")
        invalid("CreateOptions", unsupported % '"All", "x"', query="?dryRun=All&dryRun=x")
        st = invalid("CreateOptions", "[" + unsupported % '"1"' + ', fieldValidation: '
                     'Unsupported value: "bogus": supported values: "", "Ignore", "Strict", '
                     '"Warn"]', query="?dryRun=1&fieldValidation=bogus")
        self.assertEqual([c["field"] for c in st["details"]["causes"]],
                         ["dryRun", "fieldValidation"])
        self.assertIsNone(self.c.get_or_none("configmaps", "x", self.ns))
        obj = self.c.create("configmaps", cm("x"), namespace=self.ns)
        one = self.c.path("configmaps", self.ns, "x")
        invalid("UpdateOptions", unsupported % '"yes"', "PUT", one, obj, query="?dryRun=yes")
        invalid("PatchOptions", unsupported % '"yes"', "PATCH", one, {"data": {"k": "w"}},
                "application/merge-patch+json", query="?dryRun=yes")
        before = FK.state()["resourceVersion"]
        made = self.c.create("configmaps", cm("y"), namespace=self.ns, params={"dryRun": "All"})
        self.assertNotIn("resourceVersion", made["metadata"])
        self.assertTrue(made["metadata"]["uid"])
        self.assertIsNone(self.c.get_or_none("configmaps", "y", self.ns))
        changed = dict(obj, data={"k": "changed"})
        got = self.c.request("PUT", one, changed, params={"dryRun": "All"})
        self.assertEqual((got["data"], got["metadata"]["resourceVersion"]),
                         ({"k": "changed"}, obj["metadata"]["resourceVersion"]))
        self.assertEqual(FK.state()["resourceVersion"], before)
        dep = self.c.create("deployments", deployment("web", replicas=1), namespace=self.ns)
        before = FK.state()["resourceVersion"]
        scale = self.c.path("deployments", self.ns, "web") + "/scale"
        got = self.c.request("PATCH", scale, {"spec": {"replicas": 5}},
                             params={"dryRun": "All"},
                             content_type="application/merge-patch+json")
        self.assertEqual(got["spec"]["replicas"], 5)
        got = self.c.request("PUT", scale, dict(got, spec={"replicas": 7}),
                             params={"dryRun": "All"})
        self.assertEqual(got["spec"]["replicas"], 7)
        self.assertEqual(FK.state()["resourceVersion"], before)
        self.c.create("pods", pod("p"), namespace=self.ns)
        before = FK.state()["resourceVersion"]
        self.c.request("POST", self.c.path("pods", self.ns, "p") + "/binding",
                       {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}},
                       params={"dryRun": "All"})
        self.assertEqual(FK.state()["resourceVersion"], before)
        self.assertNotIn("nodeName", self.c.get("pods", "p", self.ns)["spec"])
        now = self.c.get("deployments", "web", self.ns)
        self.assertEqual((now["spec"]["replicas"], now["metadata"]["resourceVersion"]),
                         (1, dep["metadata"]["resourceVersion"]))
        self.assertEqual(self.c.get("configmaps", "x", self.ns)["data"], {"k": "v"})

    def test_pod_field_selectors(self):
        """core/v1 conversion.go's Pod field labels: spec.host is spec.nodeName; status.podIPs
        is taken but no selectable field has it (""); status.podIP is the internal
        PodIPs[0] (pod strategy ToSelectableFields); anything else is 400."""
        p1 = dict(pod("p1"), spec={"nodeName": "n1",
                                   "containers": [{"name": "c", "image": "busybox:1.36"}]})
        self.c.create("pods", p1, namespace=self.ns)
        p2 = self.c.create("pods", pod("p2"), namespace=self.ns)
        p2["status"] = {"phase": "Running", "podIPs": [{"ip": "10.1.2.3"}]}
        self.c.request("PUT", self.c.path("pods", self.ns, "p2") + "/status", p2)

        def names(sel):
            return sorted(i["metadata"]["name"] for i in self.c.list(
                "pods", self.ns, field_selector=sel)["items"])
        self.assertEqual(names("spec.host=n1"), ["p1"])
        self.assertEqual(names("spec.host!=n1"), ["p2"])
        self.assertEqual(names("status.podIPs="), ["p1", "p2"])
        self.assertEqual(names("status.podIPs=10.1.2.3"), [])
        self.assertEqual(names("status.podIP=10.1.2.3"), ["p2"])
        self.assertEqual(names("spec.hostNetwork=false,status.phase=Running"), ["p2"])
        for label in ("status.hostIP", "spec.hostname", "metadata.uid"):
            st = self.error(self.c.path("pods", self.ns), {"fieldSelector": label + "=x"})
            self.assertEqual((st["code"], st["message"]),
                             (400, "field label not supported: " + label))

    def test_label_errors_one_per_message(self):
        """ValidateLabels: one error per message of IsQualifiedName (the key) and of
        IsValidLabelValue (the value), the 422's message naming each distinct one once; a
        selector's matchExpressions key is ValidateLabelName'd too; annotations' keys
        likewise (ValidateAnnotations, in lower case)."""
        qname = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                 "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                 "'123-abc', regex used for validation is "
                 "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
        value = ("a valid label must be an empty string or consist of alphanumeric characters, "
                 "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                 "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                 "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
        subdomain = ("prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                     "alphanumeric characters, '-' or '.', and must start and end with an "
                     "alphanumeric character (e.g. 'example.com', regex used for validation is "
                     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
        long = "-" * 64
        body = cm("x", labels={"Foo.com/": "ok", "k": long, "j": "-v", "i": "-v"})
        st = self.error(self.c.path("configmaps", self.ns), method="POST", body=body)
        lab = 'metadata.labels: Invalid value: "%s": %s'
        # the decoder sorted the map's keys: Foo.com/, i, j, k
        msgs = [lab % ("Foo.com/", subdomain), lab % ("Foo.com/", "name part must be non-empty"),
                lab % ("Foo.com/", "name part " + qname), lab % ("-v", value),
                lab % (long, "must be no more than 63 characters"), lab % (long, value)]
        self.assertEqual((st["code"], st["reason"]), (422, "Invalid"))
        self.assertEqual(st["message"], 'ConfigMap "x" is invalid: [%s]' % ", ".join(msgs))
        self.assertEqual(len(st["details"]["causes"]), 7)   # "-v" twice
        body = cm("x")
        body["metadata"]["annotations"] = {"Foo.com/": "v"}
        st = self.error(self.c.path("configmaps", self.ns), method="POST", body=body)
        ann = 'metadata.annotations: Invalid value: "Foo.com/": '
        self.assertEqual(st["message"], 'ConfigMap "x" is invalid: [%sname part must be '
                         'non-empty, %sname part %s]' % (ann, ann, qname))
        dep = deployment("web")
        dep["spec"]["selector"]["matchExpressions"] = [{"key": "-bad", "operator": "Exists"}]
        st = self.error(self.c.path("deployments", self.ns), method="POST", body=dep)
        self.assertIn('spec.selector.matchExpressions[0].key: Invalid value: "-bad": name part '
                      + qname, st["message"])

    def test_secret_size_limit(self):
        """ValidateSecret: the decoded data (stringData merged into it) at most
        core.MaxSecretSize: "data: Too long: must have at most 1048576 bytes"."""
        mib = 1024 * 1024

        def secret(name, size, string=False):
            body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}}
            if string:
                body["stringData"] = {"a": "x" * size}
            else:
                body["data"] = {"a": base64.b64encode(b"x" * size).decode()}
            return body
        self.c.create("secrets", secret("fits", mib), namespace=self.ns)
        for body in (secret("big", mib + 1), secret("big", mib + 1, string=True)):
            st = self.error(self.c.path("secrets", self.ns), method="POST", body=body)
            self.assertEqual((st["code"], st["reason"], st["message"]),
                             (422, "Invalid", 'Secret "big" is invalid: data: Too long: must '
                              'have at most 1048576 bytes'))
            self.assertEqual(st["details"]["causes"], [{
                "reason": "FieldValueTooLong", "message": "Too long: must have at most "
                "1048576 bytes", "field": "data"}])
        self.assertIsNone(self.c.get_or_none("secrets", "big", self.ns))

    def test_names_reject_a_trailing_newline(self):
        """Go's regexes match the whole name ("^...$" has no newline exception, as Python's $
        has), and lengths are bytes (len())."""
        label = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                 "or '-', and must start and end with an alphanumeric character (e.g. "
                 "'my-name',  or '123-abc', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
        value = ("a valid label must be an empty string or consist of alphanumeric characters, "
                 "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                 "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                 "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
        st = self.error(self.c.path("namespaces"), method="POST",
                        body={"metadata": {"name": self.ns + "-x\n"}})
        # (SetDefaults_Namespace made the name its kubernetes.io/metadata.name label too)
        self.assertEqual(st["message"], 'Namespace "%s-x\\n" is invalid: [metadata.name: '
                         'Invalid value: "%s-x\\n": %s, metadata.labels: Invalid value: '
                         '"%s-x\\n": %s]' % (self.ns, self.ns, label, self.ns, value))
        for resource, body in (("configmaps", cm("web\n")),
                               ("services", {"metadata": {"name": "web\n"},
                                             "spec": {"ports": [{"port": 80}]}})):
            st = self.error(self.c.path(resource, self.ns), method="POST", body=body)
            self.assertEqual(st["code"], 422)
            self.assertIn('metadata.name: Invalid value: "web\\n"', st["message"])
        st = self.error(self.c.path("configmaps", self.ns), method="POST",
                        body=cm("\u00e9" * 130))
        self.assertEqual([c["message"].split(": ", 2)[2][:30] for c in st["details"]["causes"]],
                         ["must be no more than 253 chara", "a lowercase RFC 1123 subdomain"])
        self.assertEqual([i["metadata"]["name"] for i in self.c.list("configmaps",
                                                                     self.ns)["items"]], [])


def core_event(name, ns):
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Deployment", "namespace": ns, "name": "web",
                               "apiVersion": "apps/v1"},
            "reason": "ScaledUp", "message": "scaled", "type": "Normal"}


class TestEventsWithoutWatchCache(Base):
    """kube-apiserver serves Events without a watch cache (DefaultWatchCacheSizes: events and
    events.k8s.io/events at 0): every list, GET at a resourceVersion and watch of them is
    etcd3's (store.go, watcher.go), where the fake served them as the cacher serves the
    other kinds."""

    error = TestUpstreamEdges.error
    unknown_500 = TestUpstreamEdges.unknown_500

    def test_lists_and_gets_are_etcds(self):
        """etcd pages a list at resourceVersion "0" (the cache ignores the limit), waits for
        no resourceVersion (504 at once, with no retry: validateMinimumResourceVersion), reads
        Exact at a revision not reached as etcd's ErrFutureRev (500), and parses a
        resourceVersion as GetList and Get do (400). The lists the cacher delegates to etcd
        (a limit, Exact) wait for nothing either."""
        for n in "abc":
            self.c.create("events", core_event(n, self.ns), namespace=self.ns)
        cur = int(FK.state()["resourceVersion"])
        for res in ("events", "events.k8s.io/v1/events"):
            path = self.c.path(res, self.ns)
            lst = self.c.request("GET", path, params={"resourceVersion": "0", "limit": "1"})
            self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["a"], res)
            self.assertIn("continue", lst["metadata"], res)
            self.assertEqual(lst["metadata"]["remainingItemCount"], 2, res)
            nxt = self.c.request("GET", path, params={"limit": "5", "continue":
                                                      lst["metadata"]["continue"]})
            self.assertEqual([i["metadata"]["name"] for i in nxt["items"]], ["b", "c"], res)
            for params in ({"resourceVersion": str(cur + 1000)},
                           {"resourceVersion": str(cur + 1000),
                            "resourceVersionMatch": "NotOlderThan"}):
                t0 = time.monotonic()
                code, headers, payload = self.c.raw("GET", path, params=params)
                self.assertLess(time.monotonic() - t0, 1.5, params)
                st = json.loads(payload)
                self.assertEqual((code, st["reason"]), (504, "Timeout"), params)
                self.assertRegex(st["message"], r"^Timeout: Too large resource version: %d, "
                                                r"current: \d+$" % (cur + 1000))
                self.assertEqual(st["details"], {"causes": [
                    {"reason": "ResourceVersionTooLarge",
                     "message": "Too large resource version"}]}, params)
                self.assertNotIn("Retry-After", headers)
            for params in ({"resourceVersion": str(cur + 1000), "resourceVersionMatch": "Exact"},
                           {"resourceVersion": str(cur + 1000), "limit": "2"}):
                t0 = time.monotonic()
                self.unknown_500(self.error(path, params),
                                 "etcdserver: mvcc: required revision is a future revision")
                self.assertLess(time.monotonic() - t0, 1.5, params)
            # a resourceVersion that does not parse: etcd3 GetList's 400 (the cacher's 500)
            st = self.error(path, {"resourceVersion": "abc"})
            self.assertEqual((st["code"], st["reason"], st["message"]), (
                400, "BadRequest", 'invalid resource version: resourceVersion: Invalid value: '
                '"abc": strconv.ParseUint: parsing "abc": invalid syntax'))
            # a GET at a resourceVersion is etcd3 Get's: parsed (400), not waited for (504)
            one = self.c.path(res, self.ns, "a")
            st = self.error(one, {"resourceVersion": "x1"})
            self.assertEqual((st["code"], st["reason"]), (400, "BadRequest"))
            self.assertTrue(st["message"].startswith("invalid resource version: "), st)
            t0 = time.monotonic()
            st = self.error(self.c.path(res, self.ns, "missing"),
                            {"resourceVersion": str(cur + 1000)})
            self.assertLess(time.monotonic() - t0, 1.5)
            self.assertEqual((st["code"], st["reason"]), (504, "Timeout"))
            self.assertNotIn("retryAfterSeconds", st["details"])
            self.assertEqual(self.c.request("GET", one, params={"resourceVersion": str(cur)})
                             ["metadata"]["name"], "a")
        # a list the cacher delegates to etcd waits for nothing either
        self.c.create("configmaps", cm("a"), namespace=self.ns)
        path = self.c.path("configmaps", self.ns)
        cur = int(FK.state()["resourceVersion"])
        t0 = time.monotonic()
        self.unknown_500(self.error(path, {"resourceVersion": str(cur + 1000),
                                           "resourceVersionMatch": "Exact"}),
                         "etcdserver: mvcc: required revision is a future revision")
        st = self.error(path, {"resourceVersion": str(cur + 1000), "limit": "1",
                               "resourceVersionMatch": "NotOlderThan"})
        self.assertEqual((st["code"], st["reason"]), (504, "Timeout"))
        self.assertNotIn("retryAfterSeconds", st["details"])
        self.assertLess(time.monotonic() - t0, 1.5)

    def test_watches_are_etcds(self):
        """etcd3's watcher: no periodic BOOKMARK (the registry asks for no progress
        notifications), only the initial events' end; with sendInitialEvents a
        resourceVersion not reached yet is one ERROR event at once (a jittered 1-3 s retry),
        not after the cacher's 3 s wait."""
        self.c.create("events", core_event("a", self.ns), namespace=self.ns)
        w = self.c.watch("events", self.ns, resource_version="0", allow_bookmarks=True,
                         timeout_seconds=10)
        ev = w.next_event(3)
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "a"))
        self.assertIsNone(w.next_event(1.2))   # 4 bookmark intervals of this server
        self.c.create("events", core_event("b", self.ns), namespace=self.ns)
        ev = w.next_event(3)
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "b"))
        w.close()
        # a configmap watch of the same server does get them
        w = self.c.watch("configmaps", self.ns, resource_version="0", allow_bookmarks=True,
                         timeout_seconds=10)
        self.assertEqual(w.next_event(3)["type"], "BOOKMARK")
        w.close()
        w = self.c.watch("events.k8s.io/v1/events", self.ns, send_initial_events=True,
                         allow_bookmarks=True, timeout_seconds=10)
        got = [w.next_event(3) for _ in range(3)]
        self.assertEqual([e["type"] for e in got], ["ADDED", "ADDED", "BOOKMARK"])
        self.assertEqual(got[2]["object"]["metadata"]["annotations"],
                         {"k8s.io/initial-events-end": "true"})
        self.assertIsNone(w.next_event(1.2))
        w.close()
        cur = int(FK.state()["resourceVersion"])
        t0 = time.monotonic()
        code, _, payload = self.c.raw("GET", self.c.path("events", self.ns), params={
            "watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
            "resourceVersion": str(cur + 1000), "timeoutSeconds": "10"}, timeout=15)
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assertEqual(code, 200)
        events = [json.loads(x) for x in payload.splitlines()]
        self.assertEqual([e["type"] for e in events], ["ERROR"])
        st = events[0]["object"]
        self.assertEqual((st["code"], st["reason"]), (504, "Timeout"))
        self.assertIn(st["details"].pop("retryAfterSeconds"), (1, 2, 3))
        self.assertEqual(st["details"], {"causes": [{"reason": "ResourceVersionTooLarge",
                                                     "message": "Too large resource version"}]})

    def test_watch_cache_window_starts_before_its_first_event(self):
        """The watch cache's window once events have left it (getAllEventsSinceLocked): a
        watch from the first kept event's resourceVersion less one resumes; one from before
        that, even a resourceVersion between the last dropped and the first kept events
        (other kinds' writes), is 410 "too old resource version: N (first - 1)". (The fake
        resumed from the last dropped event's resourceVersion on, and named it.)"""
        small = harness.start(tls=False, history=3)
        try:
            sc = small.client()
            rvs, between = [], []
            for i in range(6):
                rvs.append(int(sc.create("configmaps", cm("w%d" % i),
                                         namespace="default")["metadata"]["resourceVersion"]))
                between.append(int(sc.create("secrets", {"metadata": {"name": "s%d" % i}},
                                             namespace="default")["metadata"]
                                   ["resourceVersion"]))
                sc.create("secrets", {"metadata": {"name": "t%d" % i}}, namespace="default")
            # kept: w3, w4, w5; dropped: w0, w1, w2
            evs = list(sc.watch("configmaps", "default", resource_version=str(between[2]),
                                timeout_seconds=1))
            self.assertEqual([e["type"] for e in evs], ["ERROR"])
            self.assertEqual(evs[0]["object"]["code"], 410)
            self.assertEqual(evs[0]["object"]["message"], "too old resource version: %d (%d)"
                             % (between[2], rvs[3] - 1))
            evs = list(sc.watch("configmaps", "default", resource_version=str(rvs[3] - 1),
                                timeout_seconds=1))
            self.assertEqual([e["object"]["metadata"]["name"] for e in evs], ["w3", "w4", "w5"])
            sc.close()
        finally:
            small.stop()

    def test_history_is_etcds_until_its_compaction(self):
        """No watch cache window: a watch of Events resumes from any revision etcd still has
        (the fake cut them at --history, as the cache does), until kube-apiserver's periodic
        compaction (--etcd-compaction-interval), after which it is etcd's ErrCompacted: 410
        "The resourceVersion for the provided watch is too old.". The compactor's ticks are
        driven by the admin hook (interval 0: no timer), so none can fall inside the setup."""
        small = harness.start(tls=False, history=3,
                              extra_args=("--etcd-compaction-interval", "0"))
        try:
            sc = small.client()
            first = sc.create("events", core_event("e0", "default"), namespace="default")
            rv0 = first["metadata"]["resourceVersion"]
            for i in range(1, 6):
                sc.create("events", core_event("e%d" % i, "default"), namespace="default")
                sc.create("configmaps", cm("c%d" % i), namespace="default")
            evs = list(sc.watch("configmaps", "default", resource_version=rv0,
                                timeout_seconds=1))
            self.assertEqual([e["type"] for e in evs], ["ERROR"])
            self.assertTrue(evs[0]["object"]["message"].startswith("too old resource version"))
            evs = list(sc.watch("events", "default", resource_version=rv0, timeout_seconds=1))
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                             [("ADDED", "e%d" % i) for i in range(1, 6)])
            # an exact list at rv0 is still served too
            lst = sc.list("events", "default", limit=10, resource_version=rv0)
            self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["e0"])
            # the first tick only puts compact_rev_key (a revision of its own): no compaction
            before = int(small.state()["resourceVersion"])
            t1 = small.etcd_compaction_tick()
            self.assertEqual((int(t1["resourceVersion"]), t1["etcdCompactedTo"]),
                             (before + 1, "0"))
            self.assertEqual(int(small.state()["resourceVersion"]), before + 1)
            e6 = sc.create("events", core_event("e6", "default"), namespace="default")
            self.assertEqual(int(e6["metadata"]["resourceVersion"]), before + 2)
            evs = list(sc.watch("events", "default", resource_version=rv0, timeout_seconds=1))
            self.assertEqual([e["object"]["metadata"]["name"] for e in evs],
                             ["e%d" % i for i in range(1, 7)])
            # the second compacts to the first one's revision
            t2 = small.etcd_compaction_tick()
            self.assertEqual(t2["etcdCompactedTo"], t1["resourceVersion"])
            self.assertEqual(int(t2["resourceVersion"]), before + 3)
            evs = list(sc.watch("events", "default", resource_version=rv0, timeout_seconds=1))
            self.assertEqual([e["type"] for e in evs], ["ERROR"])
            st = evs[0]["object"]
            self.assertEqual((st["code"], st["reason"], st["message"]), (
                410, "Expired", "The resourceVersion for the provided watch is too old."))
            e = self.assertApiError(410, "Expired", sc.list, "events", "default", limit=10,
                                    resource_version=rv0)
            self.assertEqual(e.status["message"],
                             "The resourceVersion for the provided list is too old.")
            # etcd3's watcher starts at resourceVersion + 1: from the revision before the
            # compaction's it still resumes, from the one before that it is compacted; a
            # list reads at the resourceVersion itself, so only from the compaction's on
            mark = int(t1["resourceVersion"])
            evs = list(sc.watch("events", "default", resource_version=str(mark - 1),
                                timeout_seconds=1))
            self.assertEqual([e["object"]["metadata"]["name"] for e in evs], ["e6"])
            evs = list(sc.watch("events", "default", resource_version=str(mark - 2),
                                timeout_seconds=1))
            self.assertEqual([e["object"]["code"] for e in evs], [410])
            self.assertApiError(410, "Expired", sc.list, "events", "default", limit=10,
                                resource_version=str(mark - 1))
            lst = sc.list("events", "default", limit=10, resource_version=str(mark))
            self.assertEqual([i["metadata"]["name"] for i in lst["items"]],
                             ["e%d" % i for i in range(6)])
            cur = sc.list("events", "default")["metadata"]["resourceVersion"]
            self.assertEqual(int(cur), before + 3)
            w = sc.watch("events", "default", resource_version=cur, timeout_seconds=5)
            self.assertIsNone(w.next_event(0.3))
            self.assertIsNone(w.ended)
            w.close()
            sc.close()
        finally:
            small.stop()

    def test_compaction_interval_flag(self):
        """--etcd-compaction-interval is a Go duration (pflag's time.ParseDuration: "5m0s"
        as kube-apiserver prints its default), and 0 starts no compactor: the
        resourceVersion stays where the writes leave it."""
        self.assertEqual(server.parse_duration("5m0s"), 300.0)
        self.assertEqual(server.parse_duration("1h2m3.5s"), 3723.5)
        self.assertEqual(server.parse_duration("250ms"), 0.25)
        for bad in ("5x", "5m3", "m", "1..5s", ""):
            with self.assertRaises(ValueError, msg=bad):
                server.parse_duration(bad)
        fk = harness.start(tls=False, extra_args=("--etcd-compaction-interval", "5m0s"))
        try:
            self.assertTrue(fk.alive())
            rv = fk.state()["resourceVersion"]
            self.assertEqual(fk.client().list("events")["metadata"]["resourceVersion"], rv)
        finally:
            fk.stop()

    def test_negative_compaction_interval_compacts_back_to_back(self):
        """A negative --etcd-compaction-interval is not refused (EtcdOptions.Validate checks
        nothing of it) and is not "none" either: etcd3.newCompactor starts its loop for any
        interval but 0, and clock.After of a negative duration fires at once, so the
        compactor ticks back to back, each tick compacting to the previous one's revision.
        The fake ticks at each read or write: a watch of Events from any earlier
        resourceVersion is 410."""
        fk = harness.start(tls=False, extra_args=("--etcd-compaction-interval", "-1s"))
        try:
            self.assertTrue(fk.alive())
            c = fk.client()
            e0 = c.create("events", core_event("e0", "default"), namespace="default")
            c.create("events", core_event("e1", "default"), namespace="default")
            rv0 = int(e0["metadata"]["resourceVersion"])
            rv = int(c.list("events", "default")["metadata"]["resourceVersion"])
            self.assertGreater(rv, rv0 + 2, "ticks of their own between the writes")
            evs = list(c.watch("events", "default", resource_version=str(rv0),
                               timeout_seconds=1))
            self.assertEqual([e["object"].get("code") for e in evs], [410])
            c.close()
        finally:
            fk.stop()


def owned(name, *owners, block=True, labels=None, finalizers=None):
    """A ConfigMap whose ownerReferences name the given ConfigMaps (as they were created)."""
    obj = cm(name, labels)
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"],
         "uid": o["metadata"]["uid"], "blockOwnerDeletion": block} for o in owners]
    if finalizers:
        obj["metadata"]["finalizers"] = list(finalizers)
    return obj


class TestGarbageCollection(Base):
    """Cascading deletion as kube-apiserver (registry/generic/registry/store.go:
    deletionFinalizersForGarbageCollection, markAsDeleting) and kube-controller-manager's
    garbage collector (pkg/controller/garbagecollector) make it, seen only through the API:
    each of the collector's steps is its own write, with its own resourceVersion and watch
    event. ConfigMaps own ConfigMaps here, so that no other controller of a real cluster
    takes part."""

    def family(self, *dependents, owner_finalizers=None):
        o = cm("owner", {"role": "owner"})
        if owner_finalizers:
            o["metadata"]["finalizers"] = list(owner_finalizers)
        owner = self.c.create("configmaps", o, self.ns)
        for name, kw in dependents:
            self.c.create("configmaps", owned(name, owner, **kw), self.ns)
        _, rv = self.c.list_all("configmaps", self.ns)
        return owner, rv

    def events_until(self, w, done, timeout=10):
        """The watch's events (type, name, resourceVersion, finalizers, owner uids) until
        done(that list) is true."""
        out = []
        end = time.monotonic() + timeout
        while not done(out):
            ev = w.next_event(max(0.1, end - time.monotonic()))
            self.assertIsNotNone(ev, "no more events after %s" % out)
            m = ev["object"]["metadata"]
            out.append((ev["type"], m["name"], int(m["resourceVersion"]),
                        m.get("finalizers"), [r["uid"] for r in m.get("ownerReferences", [])]))
        return out

    def test_foreground_deletes_the_dependents_then_the_owner(self):
        owner, rv = self.family(("d1", {}), ("d2", {}))
        w = self.c.watch("configmaps", self.ns, resource_version=rv)
        self.addCleanup(w.close)
        code, _, payload = self.c.raw("DELETE", self.c.path("configmaps", self.ns, "owner"),
                                      body={"propagationPolicy": "Foreground"})
        self.assertEqual(code, 200, payload)
        got = json.loads(payload)
        # marked, not deleted: the finalizer, a deletionTimestamp, a grace period of 0
        self.assertEqual(got["kind"], "ConfigMap")
        self.assertEqual(got["metadata"]["finalizers"], ["foregroundDeletion"])
        self.assertIn("deletionTimestamp", got["metadata"])
        self.assertEqual(got["metadata"]["deletionGracePeriodSeconds"], 0)
        evs = self.events_until(w, lambda e: ("DELETED", "owner") in [x[:2] for x in e])
        self.assertEqual(evs[0][:4], ("MODIFIED", "owner", int(got["metadata"]["resourceVersion"]),
                                      ["foregroundDeletion"]))
        self.assertEqual(sorted(e[:2] for e in evs[1:3]), [("DELETED", "d1"), ("DELETED", "d2")])
        self.assertEqual(evs[3][:2], ("DELETED", "owner"))
        self.assertEqual(len(evs), 4, evs)
        rvs = [e[2] for e in evs]
        self.assertEqual(rvs, sorted(set(rvs)), "each step its own resourceVersion")
        for n in ("owner", "d1", "d2"):
            self.assertIsNone(self.c.get_or_none("configmaps", n, self.ns))

    def test_foreground_waits_for_a_blocking_dependent(self):
        """A dependent with blockOwnerDeletion held by a finalizer of its own keeps the owner
        (with foregroundDeletion) until it is gone; one without it does not."""
        owner, _ = self.family(("held", {"finalizers": ["example.com/hold"]}),
                               ("loose", {"block": False}))
        self.c.delete("configmaps", "owner", self.ns, propagation_policy="Foreground")
        wait_for(lambda: self.c.get_or_none("configmaps", "loose", self.ns) is None, 10)
        held = wait_for(lambda: (self.c.get("configmaps", "held", self.ns)["metadata"]
                                 .get("deletionTimestamp") and
                                 self.c.get("configmaps", "held", self.ns)), 10)
        self.assertEqual(held["metadata"]["finalizers"], ["example.com/hold"])
        time.sleep(0.5)
        o = self.c.get("configmaps", "owner", self.ns)
        self.assertEqual(o["metadata"]["finalizers"], ["foregroundDeletion"])
        self.c.patch("configmaps", "held", {"metadata": {"finalizers": None}}, self.ns)
        wait_for(lambda: self.c.get_or_none("configmaps", "owner", self.ns) is None, 10)

    def test_background_on_an_owner_waiting_for_its_dependents_deletes_it_now(self):
        """DELETE with Background takes the foregroundDeletion finalizer away (the options
        win over the object's GC finalizer); with no finalizer left it deletes at once."""
        self.family(("held", {"finalizers": ["example.com/hold"]}))
        self.c.delete("configmaps", "owner", self.ns, propagation_policy="Foreground")
        wait_for(lambda: self.c.get("configmaps", "held", self.ns)["metadata"]
                 .get("deletionTimestamp"), 10)
        code, _, _ = self.c.raw("DELETE", self.c.path("configmaps", self.ns, "owner"),
                                body={"propagationPolicy": "Background"})
        self.assertEqual(code, 200)
        self.assertIsNone(self.c.get_or_none("configmaps", "owner", self.ns))
        self.c.patch("configmaps", "held", {"metadata": {"finalizers": None}}, self.ns)
        wait_for(lambda: self.c.get_or_none("configmaps", "held", self.ns) is None, 10)

    def test_orphan_keeps_the_dependents_without_the_owner_reference(self):
        keeper = self.c.create("configmaps", cm("keeper"), self.ns)
        owner, rv = self.family(("d1", {}))
        self.c.create("configmaps", owned("d2", owner, keeper), self.ns)
        _, rv = self.c.list_all("configmaps", self.ns)
        w = self.c.watch("configmaps", self.ns, resource_version=rv)
        self.addCleanup(w.close)
        got = self.c.delete("configmaps", "owner", self.ns, propagation_policy="Orphan")
        self.assertEqual(got["metadata"]["finalizers"], ["orphan"])
        self.assertIn("deletionTimestamp", got["metadata"])
        evs = self.events_until(w, lambda e: ("DELETED", "owner") in [x[:2] for x in e])
        self.assertEqual(evs[0][:2], ("MODIFIED", "owner"))
        self.assertEqual(sorted(e[:2] for e in evs[1:3]), [("MODIFIED", "d1"),
                                                             ("MODIFIED", "d2")])
        self.assertEqual(evs[3][:2], ("DELETED", "owner"))
        self.assertEqual(len(evs), 4, evs)
        d1 = self.c.get("configmaps", "d1", self.ns)
        self.assertNotIn("ownerReferences", d1["metadata"])
        d2 = self.c.get("configmaps", "d2", self.ns)
        self.assertEqual([r["uid"] for r in d2["metadata"]["ownerReferences"]],
                         [keeper["metadata"]["uid"]])

    def test_orphan_dependents_true_is_orphan(self):
        """The deprecated orphanDependents=true (the query's here) is Orphan."""
        self.family(("d1", {}))
        code, _, payload = self.c.raw("DELETE", self.c.path("configmaps", self.ns, "owner"),
                                      params={"orphanDependents": "true"})
        self.assertEqual(code, 200, payload)
        self.assertEqual(json.loads(payload)["metadata"]["finalizers"], ["orphan"])
        wait_for(lambda: self.c.get_or_none("configmaps", "owner", self.ns) is None, 10)
        self.assertNotIn("ownerReferences", self.c.get("configmaps", "d1", self.ns)["metadata"])

    def test_background_deletes_the_owner_at_once_and_the_dependents_after(self):
        keeper = self.c.create("configmaps", cm("keeper"), self.ns)
        owner, _ = self.family(("d1", {}), ("d2", {}))
        self.c.create("configmaps", owned("shared", owner, keeper), self.ns)
        code, _, payload = self.c.raw("DELETE", self.c.path("configmaps", self.ns, "owner"))
        self.assertEqual(code, 200, payload)
        st = json.loads(payload)
        self.assertEqual((st["kind"], st["status"]), ("Status", "Success"))
        self.assertIsNone(self.c.get_or_none("configmaps", "owner", self.ns))
        wait_for(lambda: all(self.c.get_or_none("configmaps", n, self.ns) is None
                             for n in ("d1", "d2")), 10)
        # a dependent with another owner left is kept, without the deleted owner's reference
        shared = wait_for(lambda: (len(self.c.get("configmaps", "shared", self.ns)["metadata"]
                                       ["ownerReferences"]) == 1 and
                                   self.c.get("configmaps", "shared", self.ns)), 10)
        self.assertEqual(shared["metadata"]["ownerReferences"][0]["uid"],
                         keeper["metadata"]["uid"])

    def test_delete_options_on_an_object_being_deleted_update_its_finalizers(self):
        """The options still set the GC finalizers of an object whose deletion waits for
        another finalizer; the first deletionTimestamp stays; a DELETE that changes nothing
        writes nothing; orphanDependents=false on an object not deleted at once is 202."""
        o = cm("held")
        o["metadata"]["finalizers"] = ["example.com/hold"]
        self.c.create("configmaps", o, self.ns)
        first = self.c.delete("configmaps", "held", self.ns)
        self.assertEqual(first["metadata"]["finalizers"], ["example.com/hold"])
        again = self.c.delete("configmaps", "held", self.ns)
        self.assertEqual(again["metadata"]["resourceVersion"],
                         first["metadata"]["resourceVersion"])
        orphan = self.c.delete("configmaps", "held", self.ns, propagation_policy="Orphan")
        self.assertEqual(orphan["metadata"]["finalizers"], ["example.com/hold", "orphan"])
        self.assertEqual(orphan["metadata"]["deletionTimestamp"],
                         first["metadata"]["deletionTimestamp"])
        self.assertGreater(int(orphan["metadata"]["resourceVersion"]),
                           int(first["metadata"]["resourceVersion"]))
        # the collector orphans its (no) dependents and takes its finalizer away
        wait_for(lambda: self.c.get("configmaps", "held", self.ns)["metadata"]["finalizers"]
                 == ["example.com/hold"], 10)
        code, _, payload = self.c.raw("DELETE", self.c.path("configmaps", self.ns, "held"),
                                      body={"orphanDependents": False})
        self.assertEqual(code, 202, payload)
        self.assertEqual(json.loads(payload)["metadata"]["finalizers"], ["example.com/hold"])
        self.c.patch("configmaps", "held", {"metadata": {"finalizers": None}}, self.ns)
        self.assertIsNone(self.c.get_or_none("configmaps", "held", self.ns))

    def test_an_owner_that_does_not_exist_is_collected(self):
        """An object created naming an owner that never existed (or another object's name with
        a uid not its own) is deleted by the collector, as when its owner goes; one with an
        owner left loses only the references to absent owners; one whose owner's kind is not
        served is left alone (the controller retries it for ever). The collector's writes are
        in the write log under its own user."""
        since = FK.writes()["next"]
        keeper = self.c.create("configmaps", cm("keeper"), self.ns)
        ghost = {"metadata": {"name": "ghost", "uid": "0f0e0d0c-0000-4000-8000-000000000001"}}
        impostor = {"metadata": {"name": "keeper",
                                 "uid": "0f0e0d0c-0000-4000-8000-000000000002"}}
        _, rv = self.c.list_all("configmaps", self.ns)
        w = self.c.watch("configmaps", self.ns, resource_version=rv)
        self.addCleanup(w.close)
        self.c.create("configmaps", owned("orphan1", ghost), self.ns)
        self.c.create("configmaps", owned("orphan2", impostor), self.ns)
        mixed = self.c.create("configmaps", owned("mixed", ghost, keeper), self.ns)
        alien = cm("alien")
        alien["metadata"]["ownerReferences"] = [
            {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
             "uid": "0f0e0d0c-0000-4000-8000-000000000003"}]
        self.c.create("configmaps", alien, self.ns)
        evs = self.events_until(w, lambda e: {("DELETED", "orphan1"), ("DELETED", "orphan2"),
                                               ("MODIFIED", "mixed")} <= {x[:2] for x in e})
        got = self.c.get("configmaps", "mixed", self.ns)
        self.assertEqual([r["uid"] for r in got["metadata"]["ownerReferences"]],
                         [keeper["metadata"]["uid"]])
        self.assertGreater(int(got["metadata"]["resourceVersion"]),
                           int(mixed["metadata"]["resourceVersion"]))
        rvs = [e[2] for e in evs]
        self.assertEqual(rvs, sorted(set(rvs)), "each step its own resourceVersion")
        gc_user = "system:serviceaccount:kube-system:generic-garbage-collector"
        wrote = FK.writes(since, namespace=self.ns, user=gc_user)["writes"]
        self.assertEqual(sorted((x["verb"], x["resource"], x["name"]) for x in wrote),
                         [("delete", "configmaps", "orphan1"), ("delete", "configmaps", "orphan2"),
                          ("patch", "configmaps", "mixed")])
        self.assertIn(got["metadata"]["resourceVersion"], [x["resourceVersion"] for x in wrote])
        time.sleep(0.3)
        self.assertIsNotNone(self.c.get_or_none("configmaps", "alien", self.ns))
        self.assertIsNotNone(self.c.get_or_none("configmaps", "keeper", self.ns))
        # naming an owner that exists, by an update: kept as it is
        self.c.patch("configmaps", "alien", {"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper",
             "uid": keeper["metadata"]["uid"]}]}}, self.ns)
        time.sleep(0.3)
        self.assertEqual(len(self.c.get("configmaps", "alien", self.ns)["metadata"]
                             ["ownerReferences"]), 1)

    def test_events_take_no_gc_finalizer(self):
        """Events' DefaultGarbageCollectionPolicy is Unsupported: Foreground deletes at once."""
        self.c.create("events", core_event("e1", self.ns), self.ns)
        code, _, payload = self.c.raw("DELETE", self.c.path("events", self.ns, "e1"),
                                      body={"propagationPolicy": "Foreground"})
        self.assertEqual(code, 200, payload)
        self.assertIsNone(self.c.get_or_none("events", "e1", self.ns))

    def test_deletecollection_passes_its_options_to_each_delete(self):
        self.family(("d1", {"labels": {"x": "d"}}))
        code, _, payload = self.c.raw(
            "DELETE", self.c.path("configmaps", self.ns),
            params={"labelSelector": "role=owner"}, body={"propagationPolicy": "Orphan"})
        self.assertEqual(code, 200, payload)
        items = json.loads(payload)["items"]
        self.assertEqual([i["metadata"].get("finalizers") for i in items], [["orphan"]])
        wait_for(lambda: self.c.get_or_none("configmaps", "owner", self.ns) is None, 10)
        self.assertNotIn("ownerReferences", self.c.get("configmaps", "d1", self.ns)["metadata"])


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class TestEtcdCompactor(unittest.TestCase):
    """store.Store's model of kube-apiserver's compactor (etcd3/compact.go): a tick every
    interval, each putting compact_rev_key (a revision of its own) and compacting to the
    revision the tick before got; none with an interval of 0. On a fake clock."""

    def store(self, interval):
        self.clock = FakeClock()
        return store_mod.Store(history_size=2, uncached=("events",),
                               compaction_interval=interval, clock=self.clock)

    @staticmethod
    def put(st, name):
        return int(st.put("events", {"metadata": {"name": name, "namespace": "ns"}})
                   ["metadata"]["resourceVersion"])

    @staticmethod
    def names(st):
        return [ev.obj["metadata"]["name"] for ev in st.history["events"]]

    def test_missed_ticks_are_each_run_on_schedule(self):
        st = self.store(10)
        self.assertEqual(self.put(st, "a"), 1)
        self.clock.t += 25          # two ticks missed (at +10 and +20): both run
        self.assertEqual(self.put(st, "b"), 4)      # after the ticks' revisions 2 and 3
        self.assertEqual(st.etcd_compacted, 2)      # the second compacted to the first's
        self.assertEqual(self.names(st), ["b"])
        self.clock.t += 4.9         # the next tick is at +30, not 10 s after the late run
        self.assertEqual(st.current_rv(), 4)
        self.clock.t += 0.1
        self.assertEqual(st.current_rv(), 5)
        self.assertEqual(st.etcd_compacted, 3)
        # and the resourceVersion goes on by one a tick with no object written
        self.clock.t += 30
        self.assertEqual(st.current_rv(), 8)
        self.assertEqual(st.etcd_compacted, 7)
        self.assertEqual(self.names(st), [])
        self.assertEqual(st.window_start("events"), 7)

    def test_a_late_tick_comes_before_the_write_that_notices_it(self):
        st = self.store(10)
        self.put(st, "a")
        self.clock.t += 10
        rv_b = self.put(st, "b")    # the tick (revision 2) was due before this write
        self.assertEqual(rv_b, 3)
        self.clock.t += 10          # compacts to 2: "a" goes, "b" stays
        self.assertEqual(st.current_rv(), 4)
        self.assertEqual(self.names(st), ["b"])
        w, backlog, err = st.register("events", None, rv_b - 1)
        self.assertIsNone(err)
        self.assertEqual([ev.obj["metadata"]["name"] for ev in w.queue], ["b"])
        st.unregister(w)

    def test_negative_interval_ticks_back_to_back(self):
        """etcd3/compact.go: clock.After(negative) fires at once: a tick before every read
        or write of the store, whatever the clock says."""
        st = self.store(-1)
        self.assertEqual(self.put(st, "a"), 2)      # after the first tick (revision 1)
        self.assertEqual(self.put(st, "b"), 4)      # a tick (3), compacting to 1
        self.assertEqual(st.etcd_compacted, 1)
        self.assertEqual(self.put(st, "c"), 6)
        self.assertEqual(st.etcd_compacted, 3)
        self.assertEqual(self.names(st), ["b", "c"])
        self.assertEqual(st.current_rv(), 7)
        self.assertEqual(self.names(st), ["c"])

    def test_interval_zero_never_compacts(self):
        for interval in (0,):
            st = self.store(interval)
            for n in "abc":
                self.put(st, n)
            for _ in range(3):
                self.clock.t += 1000
                self.assertEqual(st.current_rv(), 3)
            self.assertEqual(self.names(st), ["a", "b", "c"])
            self.assertEqual(st.window_start("events"), 0)


class TestFieldManagerOption(Base):
    """metav1 validation ValidateFieldManager, called by ValidateCreateOptions,
    ValidateUpdateOptions and ValidatePatchOptions before the body is decoded: at most 128
    bytes, printable runes only; an apply patch needs one, and only an apply patch takes
    force. Each failure a 422 Invalid of CreateOptions (UpdateOptions, PatchOptions)
    meta.k8s.io, named with every other option's."""

    def invalid(self, kind, fn, *args, **kw):
        e = self.assertApiError(422, "Invalid", fn, *args, **kw)
        self.assertEqual(e.status["details"]["kind"], kind)
        self.assertEqual(e.status["details"]["group"], "meta.k8s.io")
        return e

    def test_field_manager_is_checked_on_every_write(self):
        created = self.c.create("configmaps", cm("a"), namespace=self.ns)
        rv = created["metadata"]["resourceVersion"]
        too_long = "m" * 129
        for params, messages in (
                ({"fieldManager": too_long},
                 ["fieldManager: Too long: must have at most 128 bytes"]),
                # bytes, as Go's len(): 65 two-byte runes are 130
                ({"fieldManager": "\u00e9" * 65},
                 ["fieldManager: Too long: must have at most 128 bytes"]),
                ({"fieldManager": "a\x00b\u00e9\x7f"},
                 ['fieldManager: Invalid value: "a\\x00b\u00e9\\x7f": invalid character '
                  'U+0000 (at position 1)',
                  'fieldManager: Invalid value: "a\\x00b\u00e9\\x7f": invalid character '
                  'U+007F (at position 5)']),
                ({"fieldManager": "x\u00a0y\u2028", "dryRun": "Some"},
                 ['fieldManager: Invalid value: "x\\u00a0y\\u2028": invalid character '
                  'U+00A0 (at position 1)',
                  'fieldManager: Invalid value: "x\\u00a0y\\u2028": invalid character '
                  'U+2028 (at position 4)',
                  'dryRun: Unsupported value: []string{"Some"}: supported values: "All"'])):
            for kind, fn, args in (
                    ("CreateOptions", self.c.create, ("configmaps", cm("b"), self.ns)),
                    ("UpdateOptions", self.c.update, ("configmaps", created, self.ns)),
                    ("PatchOptions", self.c.patch, ("configmaps", "a", {"data": {"k": "2"}},
                                                    self.ns))):
                e = self.invalid(kind, fn, *args, params=params)
                self.assertEqual([c["field"] + ": " + c["message"]
                                  for c in e.status["details"]["causes"]], messages, params)
        # the subresources and the create-only kinds check it as well
        self.c.create("deployments", deployment("web"), namespace=self.ns)
        scale = self.c.get_scale("deployments", "web", self.ns)
        self.invalid("UpdateOptions", self.c.update, "deployments", scale, self.ns,
                     subresource="scale", params={"fieldManager": too_long})
        self.invalid("CreateOptions", self.c.request, "POST",
                     "/apis/authentication.k8s.io/v1/tokenreviews",
                     {"spec": {"token": "x"}}, params={"fieldManager": "\t"})
        # a Go string's bytes: an invalid UTF-8 byte is one rune (printable U+FFFD), quoted
        # \xff, and the offsets count bytes
        code, _, payload = self.c.raw("POST", self.c.path("configmaps", self.ns) +
                                      "?fieldManager=%FF%01%C3%A9%02", body=cm("c"))
        st = json.loads(payload)
        self.assertEqual((code, [c["message"] for c in st["details"]["causes"]]), (422, [
            'Invalid value: "\\xff\\x01\u00e9\\x02": invalid character U+0001 (at position 1)',
            'Invalid value: "\\xff\\x01\u00e9\\x02": invalid character U+0002 (at position 4)']))
        # at the limit, printable: taken, and the manager of record
        ok = "\u00e9" * 64
        self.c.patch("configmaps", "a", {"data": {"k": "3"}}, self.ns, params={"fieldManager": ok})
        got = self.c.get("configmaps", "a", self.ns)
        self.assertIn(ok, [m["manager"] for m in got["metadata"]["managedFields"]])
        # nothing refused was written
        self.assertEqual([i["metadata"]["name"] for i in
                          self.c.list("configmaps", self.ns)["items"]], ["a"])
        self.assertNotEqual(got["metadata"]["resourceVersion"], rv)

    def test_printable_is_go_1_22s_unicode_15(self):
        """unicode.IsPrint of Go 1.22 (kube-apiserver 1.31) is Unicode 15.0's: what 15.0
        assigned is printable (U+1F6DC WIRELESS, Kawi), its gaps, its format controls
        (U+13439, Cf) and what 16.0 assigned (U+11F5A) are not; strconv.Quote keeps the
        printable ones in the value it quotes."""
        ok = "\U0001F6DC\U00011F00\U00031350\U0001E4D0"
        self.c.create("configmaps", cm("a"), namespace=self.ns, params={"fieldManager": ok})
        got = self.c.get("configmaps", "a", self.ns)
        self.assertEqual([m["manager"] for m in got["metadata"]["managedFields"]], [ok])
        for bad, quoted in (("\U00011F11", "\\U00011f11"), ("\U00011F5A", "\\U00011f5a"),
                            ("\U00013439", "\\U00013439")):
            e = self.invalid("CreateOptions", self.c.create, "configmaps", cm("b"), self.ns,
                             params={"fieldManager": "x" + bad})
            self.assertEqual([c["message"] for c in e.status["details"]["causes"]], [
                'Invalid value: "x%s": invalid character U+%04X (at position 1)'
                % (quoted, ord(bad))])
        e = self.invalid("CreateOptions", self.c.create, "configmaps", cm("b"), self.ns,
                         params={"fieldManager": "\U0001F6DC\x00"})
        self.assertEqual([c["message"] for c in e.status["details"]["causes"]], [
            'Invalid value: "\U0001F6DC\\x00": invalid character U+0000 (at position 4)'])

    def test_patch_content_type_is_matched_as_patch_go(self):
        """patch.go cuts the Content-Type at its first ";" when that is past index 0 and
        then needs a patch type exactly: case-sensitive, nothing trimmed before the ";"."""
        self.c.create("configmaps", cm("a"), namespace=self.ns)
        path = self.c.path("configmaps", self.ns, "a")
        body = {"data": {"k": "x"}}
        for ctype, want in (("application/merge-patch+json; charset=utf-8", 200),
                            ("application/merge-patch+json;", 200),
                            ("application/merge-patch+json;charset=utf-8;x=y", 200),
                            ("Application/Merge-Patch+JSON", 415),
                            ("APPLICATION/MERGE-PATCH+JSON; charset=utf-8", 415),
                            ("application/merge-patch+json ; charset=utf-8", 415),
                            ("application/apply-patch+yaml ; charset=utf-8", 415),
                            (";application/merge-patch+json", 415)):
            code, _, payload = self.c.raw("PATCH", path, body=body, content_type=ctype,
                                          params={"fieldManager": "m"})
            self.assertEqual(code, want, (ctype, payload))
            if want == 415:
                self.assertEqual(json.loads(payload)["reason"], "UnsupportedMediaType")

    def test_apply_needs_a_manager_and_only_apply_takes_force(self):
        self.c.create("configmaps", cm("a"), namespace=self.ns)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                "data": {"k": "applied"}}
        for params, messages in (
                (None, ["fieldManager: Required value: is required for apply patch"]),
                ({"fieldManager": "", "dryRun": "x", "fieldValidation": "Loud"},
                 ["fieldManager: Required value: is required for apply patch",
                  'dryRun: Unsupported value: []string{"x"}: supported values: "All"',
                  'fieldValidation: Unsupported value: "Loud"'])):
            e = self.invalid("PatchOptions", self.c.patch, "configmaps", "a", body, self.ns,
                             patch_type="apply", params=params)
            got = [c["field"] + ": " + c["message"] for c in e.status["details"]["causes"]]
            self.assertEqual(len(got), len(messages))
            for g, m in zip(got, messages):
                self.assertTrue(g.startswith(m), (g, m))
        # force is for apply patches only (any value: it is a *bool)
        for ptype in ("merge", "strategic", "json"):
            patch = [{"op": "add", "path": "/data/x", "value": "1"}] if ptype == "json" \
                else {"data": {"x": "1"}}
            e = self.invalid("PatchOptions", self.c.patch, "configmaps", "a", patch, self.ns,
                             patch_type=ptype, params={"force": "false"})
            self.assertEqual(e.status["message"], 'PatchOptions.meta.k8s.io "" is invalid: '
                             'force: Forbidden: may not be specified for non-apply patch')
        got = self.c.patch("configmaps", "a", body, self.ns, patch_type="apply",
                           params={"fieldManager": "me", "force": "true"})
        self.assertEqual(got["data"], {"k": "applied"})
        # the media type is checked first (415), then the options
        e = self.assertApiError(415, "UnsupportedMediaType", self.c.patch, "configmaps", "a",
                                {"data": {}}, self.ns, patch_type="application/xml",
                                params={"fieldManager": "\x00"})

if __name__ == "__main__":
    t0 = time.monotonic()
    prog = unittest.main(exit=False, verbosity=2)
    r = prog.result
    import testsummary
    passed, failed, skipped, _ = testsummary.counts(r)
    print("fakekube tests took %.1fs" % (time.monotonic() - t0))
    print("fakekube: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.exit(1 if failed or r.testsRun == 0 else 0)

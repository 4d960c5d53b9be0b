#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks of the plain manifests in deploy/.

- Every YAML file parses; kustomization.yaml lists every install manifest (not the examples)
  and sets no namespace (it would move the kube-system RoleBinding).
- Every object has apiVersion, kind, metadata.name and the app.kubernetes.io labels.
- RBAC is exactly the least-privilege set; the Deployment, Service, APIService, PDB and the
  config file agree with each other (ports, names, lease, checkpoint, TLS paths), the config
  file has every key gpuscaler reads and no other, and the pods are "restricted".
- The examples: a vLLM Deployment with valid gpuscaler.io annotations, and an autoscaling/v2
  HPA on the external metric gpuscaler_desired_replicas for that Deployment.
- The Grafana dashboard queries only gpuscaler's own metrics, and all of them.
- gen-certs.sh makes a CA and a serving certificate for the Service that verify with openssl.
- Every object is created in the fake API server (e2e/fakekube) and read back.

Run: /usr/bin/python3 e2e/test_deploy.py
"""

import base64
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import helmcheck as H  # noqa: E402

if H.yaml is not None:
    from helmcheck import chart as C  # noqa: E402

NS = "gpuscaler"
EXAMPLES = ("example-vllm-deployment.yaml", "example-hpa.yaml")
LABELS = {"app.kubernetes.io/name": "gpuscaler", "app.kubernetes.io/instance": "gpuscaler",
          "app.kubernetes.io/part-of": "gpuscaler", "app.kubernetes.io/version": "0.1.0"}
SELECTOR = {"app.kubernetes.io/name": "gpuscaler", "app.kubernetes.io/instance": "gpuscaler"}


def deploy_path(name):
    return os.path.join(H.DEPLOY, name)


def yaml_files():
    return sorted(os.path.basename(p) for p in glob.glob(deploy_path("*.yaml")))


class DeployTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if H.yaml is None:
            raise unittest.SkipTest("python3-yaml is not installed (apt-get install python3-yaml)")
        cls.docs = {f: H.load_file_docs(deploy_path(f)) for f in yaml_files()}
        cls.objs = [o for f, d in cls.docs.items() if f != "kustomization.yaml" for o in d]
        cls.install = [o for f, d in cls.docs.items()
                       if f not in EXAMPLES and f != "kustomization.yaml" for o in d]

    def one(self, kind, name=None, objs=None):
        found = [o for o in (objs or self.objs) if o["kind"] == kind
                 and (name is None or o["metadata"]["name"] == name)]
        self.assertEqual(len(found), 1, "want exactly one %s %s" % (kind, name or ""))
        return found[0]

    # ------------------------------------------------------------ files and objects

    def test_expected_files(self):
        want = {"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "deployment.yaml",
                "service.yaml", "apiservice.yaml", "pdb.yaml", "configmap.yaml",
                "example-vllm-deployment.yaml", "example-hpa.yaml", "kustomization.yaml"}
        self.assertLessEqual(want, set(yaml_files()))
        self.assertTrue(os.path.isfile(deploy_path("grafana-dashboard.json")))

    def test_kustomization(self):
        k = self.docs["kustomization.yaml"][0]
        self.assertEqual(k["kind"], "Kustomization")
        self.assertNotIn("namespace", k, "a kustomize namespace would move the kube-system "
                                         "RoleBinding")
        listed = k["resources"]
        for f in listed:
            self.assertTrue(os.path.isfile(deploy_path(f)), f)
        want = [f for f in yaml_files() if f not in EXAMPLES and f != "kustomization.yaml"]
        self.assertEqual(sorted(listed), want, "kustomization must list every install manifest")

    def test_every_object_has_identity_and_labels(self):
        cluster = {"Namespace", "ClusterRole", "ClusterRoleBinding", "APIService"}
        for o in self.objs:
            with self.subTest(obj=H.ident(o)):
                self.assertTrue(o.get("apiVersion") and o.get("kind"))
                self.assertTrue(o["metadata"].get("name"))
                if o in self.install:
                    self.assertEqual(H.label_problems(o, LABELS), [])
                    if o["kind"] in cluster:
                        self.assertNotIn("namespace", o["metadata"])
                    elif not (o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "kube-system"):
                        self.assertEqual(o["metadata"].get("namespace"), NS)
                else:
                    self.assertNotIn("namespace", o["metadata"],
                                     "examples apply to the namespace given with -n")

    # ------------------------------------------------------------ RBAC

    def test_rbac_least_privilege(self):
        cr = self.one("ClusterRole", "gpuscaler")
        have = {(g, r): v for (g, r, names), v in C.rules_table(cr["rules"]).items()}
        want = dict(C.CLUSTER_RULES)
        want.update(C.REVIEW_RULES)
        self.assertEqual(have, want)
        cfg = self.config()
        role = self.one("Role", "gpuscaler")
        self.assertEqual(role["metadata"]["namespace"], NS)
        self.assertEqual(C.rules_table(role["rules"]), {
            # list: a new leader term waits for shard Leases held by sharded replicas
            ("coordination.k8s.io", "leases", ()): {"create", "list"},
            ("coordination.k8s.io", "leases", (cfg["leader-election"]["lease-name"],)):
                {"get", "update"},
            ("", "configmaps", ()): {"create"},  # create cannot be limited by name
            ("", "configmaps", tuple("%s-%d" % (cfg["checkpoint"]["configmap"], i)
                                     for i in range(cfg["checkpoint"]["configmaps"]))):
                {"get", "patch"},
        })
        reader = self.one("ClusterRole", "gpuscaler-external-metrics-reader")
        self.assertEqual(C.rules_table(reader["rules"]),
                         {("external.metrics.k8s.io", "*", ()): {"get", "list"}})
        sa = [{"kind": "ServiceAccount", "name": "gpuscaler", "namespace": NS}]
        bindings = [
            ("ClusterRoleBinding", "gpuscaler", "ClusterRole", "gpuscaler", None, sa),
            ("RoleBinding", "gpuscaler", "Role", "gpuscaler", NS, sa),
            ("RoleBinding", "gpuscaler-auth-reader", "Role",
             "extension-apiserver-authentication-reader", "kube-system", sa),
            ("ClusterRoleBinding", "gpuscaler:system:auth-delegator", "ClusterRole",
             "system:auth-delegator", None, sa),
            ("ClusterRoleBinding", "gpuscaler-external-metrics-reader", "ClusterRole",
             "gpuscaler-external-metrics-reader", None,
             [{"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler",
               "namespace": "kube-system"}]),
        ]
        for kind, name, rkind, rname, ns, subjects in bindings:
            with self.subTest(binding=name):
                b = self.one(kind, name)
                self.assertEqual(b["metadata"].get("namespace"), ns)
                self.assertEqual(b["roleRef"], {"apiGroup": "rbac.authorization.k8s.io",
                                                "kind": rkind, "name": rname})
                self.assertEqual(b["subjects"], subjects)
        self.assertEqual(len([o for o in self.objs if o["kind"].endswith("Binding")]),
                         len(bindings), "no other bindings")
        for o in self.objs:
            for r in o.get("rules") or []:
                self.assertNotIn("*", r.get("verbs", []), "%s: wildcard verb" % H.ident(o))
                self.assertNotIn("secrets", r.get("resources", []), "%s: secrets" % H.ident(o))

    # ------------------------------------------------------------ workload

    def config(self):
        cm = self.one("ConfigMap", "gpuscaler-config")
        return H.yaml.safe_load(cm["data"]["config.yaml"])

    def pod(self):
        return self.one("Deployment", "gpuscaler", self.install)["spec"]["template"]

    def test_config_file_has_every_key(self):
        cm = self.one("ConfigMap", "gpuscaler-config")
        text = cm["data"]["config.yaml"]
        cfg = H.yaml.safe_load(text)
        self.assertEqual(H.config_key_problems(cfg), [])
        self.assertEqual(H.config_missing_keys(cfg), [])
        self.assertIs(cfg["leader-election"]["enabled"], True)
        self.assertIs(cfg["external-metrics"]["enabled"], True)
        lines = text.splitlines()
        for i, ln in enumerate(lines):
            m = re.match(r"^([a-z-]+):", ln)
            if m:
                self.assertTrue(i > 0 and lines[i - 1].lstrip().startswith("#") or "#" in ln,
                                "config key %s has no comment" % m.group(1))

    def test_deployment(self):
        dep = self.one("Deployment", "gpuscaler", self.install)
        self.assertEqual(dep["spec"]["replicas"], 2)
        self.assertEqual(dep["spec"]["selector"]["matchLabels"], SELECTOR)
        tmpl = self.pod()
        for k, v in SELECTOR.items():
            self.assertEqual(tmpl["metadata"]["labels"][k], v)
        pod = tmpl["spec"]
        self.assertEqual(pod["serviceAccountName"], "gpuscaler")
        self.assertEqual(pod["securityContext"]["runAsNonRoot"], True)
        self.assertEqual(pod["securityContext"]["runAsUser"], 65532)
        self.assertEqual(pod["securityContext"]["seccompProfile"], {"type": "RuntimeDefault"})
        (c,) = pod["containers"]
        sc = c["securityContext"]
        self.assertEqual((sc["runAsNonRoot"], sc["runAsUser"], sc["readOnlyRootFilesystem"],
                          sc["allowPrivilegeEscalation"], sc["capabilities"],
                          sc["seccompProfile"]),
                         (True, 65532, True, False, {"drop": ["ALL"]}, {"type": "RuntimeDefault"}))
        self.assertEqual(c["resources"], {"requests": {"cpu": "100m", "memory": "64Mi"},
                                          "limits": {"cpu": "500m", "memory": "256Mi"}})
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]
               if "valueFrom" in e}
        self.assertEqual(env.get("POD_NAME"), "metadata.name")
        self.assertEqual(env.get("POD_NAMESPACE"), "metadata.namespace")
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"metrics": 9090, "health": 8081, "https": 6443})
        self.assertEqual(c["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "health"})
        self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "health"})
        self.assertNotIn("command", c, "keep the image ENTRYPOINT")
        self.assertEqual(c["args"][0], "run")
        tsc = pod["topologySpreadConstraints"]
        self.assertEqual(tsc[0]["topologyKey"], "kubernetes.io/hostname")
        self.assertEqual(tsc[0]["labelSelector"]["matchLabels"], SELECTOR)
        # The volumes and the config file agree.
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        vols = {v["name"]: v for v in pod["volumes"]}
        cfg_arg = [a for a in c["args"] if a.startswith("--config=")]
        self.assertEqual(len(cfg_arg), 1)
        cfg_path = cfg_arg[0].split("=", 1)[1]
        self.assertEqual(os.path.dirname(cfg_path), mounts["config"])
        self.assertEqual(vols["config"]["configMap"]["name"], "gpuscaler-config")
        self.assertIn(os.path.basename(cfg_path),
                      self.one("ConfigMap", "gpuscaler-config")["data"])
        self.assertEqual(mounts["tmp"], "/tmp")
        self.assertIn("emptyDir", vols["tmp"])
        cfg = self.config()
        em = cfg["external-metrics"]
        for f in (em["tls-cert-file"], em["tls-key-file"]):
            self.assertEqual(os.path.dirname(f), mounts["tls"])
        self.assertEqual(vols["tls"]["secret"]["secretName"], "gpuscaler-tls")
        self.assertEqual(cfg["listen"]["metrics"].rsplit(":", 1)[1], str(ports["metrics"]))
        self.assertEqual(cfg["listen"]["health"].rsplit(":", 1)[1], str(ports["health"]))
        self.assertEqual(cfg["listen"]["external-metrics"].rsplit(":", 1)[1], str(ports["https"]))

    def test_service_and_apiservice(self):
        svc = self.one("Service", "gpuscaler")
        self.assertEqual(svc["spec"]["selector"], SELECTOR)
        ports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
        self.assertEqual(ports, {"https": (443, "https"), "metrics": (9090, "metrics")})
        api = self.one("APIService", "v1beta1.external.metrics.k8s.io")
        s = api["spec"]
        self.assertEqual((s["group"], s["version"]), ("external.metrics.k8s.io", "v1beta1"))
        self.assertEqual(s["service"], {"name": "gpuscaler", "namespace": NS, "port": 443})
        self.assertEqual((s["groupPriorityMinimum"], s["versionPriority"]), (100, 100))
        self.assertNotIn("insecureSkipTLSVerify", s)
        base64.b64decode(s["caBundle"], validate=True)
        with open(deploy_path("apiservice.yaml"), encoding="utf-8") as f:
            self.assertRegex(f.read(), r"(?i)#.*placeholder", "caBundle placeholder comment")

    def test_pdb(self):
        pdb = self.one("PodDisruptionBudget", "gpuscaler")
        self.assertEqual(pdb["spec"], {"minAvailable": 1, "selector": {"matchLabels": SELECTOR}})

    def test_namespace_enforces_restricted(self):
        ns = self.one("Namespace", NS)
        self.assertEqual(ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce"),
                         "restricted")

    # ------------------------------------------------------------ examples

    def test_example_vllm_deployment(self):
        dep = self.one("Deployment", None, self.docs["example-vllm-deployment.yaml"])
        ann = dep["metadata"]["annotations"]
        keys = [k.split("/", 1)[1] for k in ann if k.startswith("gpuscaler.io/")]
        unknown = set(keys) - set(H.ANNOTATION_KEYS)
        self.assertFalse(unknown, "unknown gpuscaler.io annotations %s" % unknown)
        for k, v in ann.items():
            self.assertIsInstance(v, str, "annotation %s must be a string" % k)
        self.assertEqual(ann["gpuscaler.io/enabled"], "true")
        self.assertGreater(float(ann["gpuscaler.io/capacity-per-gpu"]), 0)
        self.assertIn(ann["gpuscaler.io/mode"], ("scale", "external-metric"))
        self.assertIn(ann["gpuscaler.io/metrics-profile"], ("vllm", "triton", "tgi", "sglang", "nim", "tei", "generic"))
        (c,) = dep["spec"]["template"]["spec"]["containers"]
        self.assertTrue(c["image"].startswith("vllm/vllm-openai"))
        self.assertEqual(str(c["resources"]["limits"]["nvidia.com/gpu"]), "1")
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertTrue({"http", "metrics"} & set(ports), "port named http or metrics")
        self.assertIn(8000, ports.values())
        mp = ann["gpuscaler.io/metrics-port"]
        self.assertTrue(mp in ports or int(mp) in ports.values(), "metrics-port names a port")

    def test_example_hpa(self):
        hpa = self.one("HorizontalPodAutoscaler", None, self.docs["example-hpa.yaml"])
        dep = self.one("Deployment", None, self.docs["example-vllm-deployment.yaml"])
        self.assertEqual(hpa["apiVersion"], "autoscaling/v2")
        self.assertEqual(hpa["spec"]["scaleTargetRef"],
                         {"apiVersion": "apps/v1", "kind": "Deployment",
                          "name": dep["metadata"]["name"]})
        (m,) = hpa["spec"]["metrics"]
        self.assertEqual(m["type"], "External")
        self.assertEqual(m["external"]["metric"], {
            "name": "gpuscaler_desired_replicas",
            "selector": {"matchLabels": {"deployment": dep["metadata"]["name"]}}})
        self.assertEqual(m["external"]["target"], {"type": "AverageValue", "averageValue": "1"})
        self.assertEqual(hpa["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"], 0)
        self.assertEqual(hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 0)

    # ------------------------------------------------------------ dashboard

    def test_grafana_dashboard(self):
        with open(deploy_path("grafana-dashboard.json"), encoding="utf-8") as f:
            dash = json.load(f)
        exprs = []

        def walk(panels):
            for p in panels:
                exprs.extend(t["expr"] for t in p.get("targets", []))
                walk(p.get("panels", []))
        walk(dash["panels"])
        self.assertTrue(exprs)
        used = set()
        for e in exprs:
            for name in re.findall(r"\b(gpuscaler_[a-z_]+)", e):
                base = re.sub(r"_(bucket|sum|count)$", "", name) \
                    if name.startswith("gpuscaler_api_request_duration_seconds") else name
                self.assertIn(base, H.DASHBOARD_METRICS, "unknown metric %s in %r" % (name, e))
                used.add(base)
            self.assertRegex(e, r"gpuscaler_", "every query is on gpuscaler's own metrics")
        self.assertEqual(used, set(H.DASHBOARD_METRICS), "every gpuscaler metric has a panel")
        self.assertTrue(any("by (reason)" in e and "gpuscaler_decisions_total" in e for e in exprs))
        self.assertTrue(any("histogram_quantile" in e and "_bucket" in e for e in exprs))
        ids = [p["id"] for p in dash["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids unique")
        names = [v["name"] for v in dash["templating"]["list"]]
        self.assertIn("datasource", names)

    def test_alert_rules_pass_promtool(self):
        """The suggested alerts parse, and fire and stay quiet where e2e/rules says they must
        (promtool test rules; prometheus is a test dependency, scripts/setup.sh test)."""
        promtool = shutil.which("promtool")
        if not promtool:
            self.skipTest("promtool is not installed (Debian package prometheus)")
        out = subprocess.run([promtool, "check", "rules", deploy_path("gpuscaler.rules.yml")],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")
        out = subprocess.run([promtool, "test", "rules", "gpuscaler.rules.test.yml"],
                             capture_output=True, text=True, timeout=60, cwd=tests)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("SUCCESS", out.stdout)

    # ------------------------------------------------------------ certificates

    def test_gen_certs(self):
        if not shutil.which("openssl"):
            self.skipTest("openssl is not installed")
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run(["sh", deploy_path("gen-certs.sh"), "-n", "ops", "-s", "scaler",
                                "-d", "2", d], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("kubectl -n ops create secret tls scaler-tls", r.stdout)
            v = subprocess.run(["openssl", "verify", "-CAfile", os.path.join(d, "ca.crt"),
                                os.path.join(d, "tls.crt")], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
            t = subprocess.run(["openssl", "x509", "-in", os.path.join(d, "tls.crt"), "-noout",
                                "-text"], capture_output=True, text=True, timeout=30).stdout
            self.assertIn("DNS:scaler.ops.svc", t)
            self.assertIn("TLS Web Server Authentication", t)

            def pub(args):
                return subprocess.run(["openssl"] + args, capture_output=True,
                                      timeout=30).stdout
            self.assertEqual(pub(["x509", "-in", os.path.join(d, "tls.crt"), "-noout", "-pubkey"]),
                             pub(["pkey", "-in", os.path.join(d, "tls.key"), "-pubout"]))
            self.assertEqual(os.stat(os.path.join(d, "tls.key")).st_mode & 0o077, 0)

    # ------------------------------------------------------------ fake API server

    def test_fake_api_server_accepts_every_object(self):
        ok, why = H.fakekube_available()
        if not ok:
            self.skipTest("fake API server not available: " + why)
        from helmcheck import fake as F
        rep = F.apply_and_read_back(self.objs)
        self.assertEqual(rep.errors, [], "\n  ".join(rep.errors))
        self.assertEqual(rep.skipped, [], "deploy/ uses only kinds the fake serves")
        self.assertEqual(len(rep.applied), len(self.objs))
        print("\n  %d objects accepted and read back" % len(rep.applied), file=sys.stderr)


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import testsummary
    return testsummary.run()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks of the Helm chart helm/gpuscaler.

1. values.yaml validates against values.schema.json (draft-07, python3-jsonschema), and
   every file in e2e/helmcheck/bad-values/ (each a wrong type or unknown key) is rejected.
2. The chart renders with helmrender (a `helm template` stand-in) for every values file in
   e2e/helmcheck/values/; each output parses as YAML, every object has apiVersion, kind,
   metadata.name and the app.kubernetes.io labels, and its content matches the values
   (helmcheck/chart.py). Bad values are rejected by helmrender too; invalid combinations
   fail with a message.
3. The rendered objects of the kinds the fake API server serves are created in it and
   read back (kinds from other projects' CRDs are skipped by name: helmcheck.NOT_SERVED_KINDS).

helmrender comes from env HELMRENDER or ../shared/tools/helmrender beside the repository
(built on first use); without it part 2-3 are skipped with the reason, part 1 still runs.

Run: /usr/bin/python3 e2e/test_helm.py
"""

import glob
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import helmcheck as H  # noqa: E402

try:
    import jsonschema
except ImportError:
    jsonschema = None

if H.yaml is not None:
    from helmcheck import chart as C  # noqa: E402

RELEASE = "gs"
NAMESPACE = "gpuscaler"


def need_yaml(test):
    if H.yaml is None:
        test.skipTest("python3-yaml is not installed (apt-get install python3-yaml)")


def values_files():
    return sorted(glob.glob(os.path.join(H.VALUES_DIR, "*.yaml")))


def bad_values_files():
    return sorted(glob.glob(os.path.join(H.BAD_VALUES_DIR, "*.yaml")))


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return H.yaml.safe_load(f)


def schema():
    with open(os.path.join(H.CHART, "values.schema.json"), encoding="utf-8") as f:
        return json.load(f)


class ChartFilesTest(unittest.TestCase):
    def setUp(self):
        need_yaml(self)

    def test_chart_yaml(self):
        c = load_yaml(os.path.join(H.CHART, "Chart.yaml"))
        self.assertEqual(c["apiVersion"], "v2")
        self.assertEqual(c["name"], "gpuscaler")
        self.assertEqual(str(c["appVersion"]), "0.1.0")
        self.assertEqual(c.get("type", "application"), "application")
        self.assertRegex(str(c["version"]), r"^\d+\.\d+\.\d+")

    def assert_chart_copy(self, folder, name):
        # A chart reads only files inside it, so it keeps copies of deploy/ files.
        with open(os.path.join(H.DEPLOY, name), "rb") as f:
            a = f.read()
        with open(os.path.join(H.CHART, folder, name), "rb") as f:
            b = f.read()
        self.assertEqual(a, b, "helm/gpuscaler/%s/%s must be a byte-identical copy of "
                               "deploy/%s" % (folder, name, name))

    def test_dashboard_copy_is_identical(self):
        self.assert_chart_copy("dashboards", "grafana-dashboard.json")

    def test_rules_copy_is_identical(self):
        # the alert rules the PrometheusRule carries
        self.assert_chart_copy("rules", "gpuscaler.rules.yml")

    def test_rules_match_the_docs(self):
        # docs/operations.md shows the rules file; the two never drift apart.
        rules = load_yaml(os.path.join(H.DEPLOY, "gpuscaler.rules.yml"))
        with open(os.path.join(H.REPO, "docs", "operations.md"), encoding="utf-8") as f:
            doc = f.read()
        sect = doc[doc.index("## Suggested alerts"):]
        block = sect[sect.index("```yaml\n") + 8:]
        block = block[:block.index("```")]
        self.assertEqual(H.yaml.safe_load(block), rules)
        names = [r["alert"] for r in rules["groups"][0]["rules"]]
        self.assertEqual(len(names), len(set(names)))
        self.assertTrue(all(n.startswith("Gpuscaler") for n in names), names)

    def test_templates_use_shared_labels(self):
        for path in glob.glob(os.path.join(H.CHART, "templates", "*.yaml")):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            kinds = len(re.findall(r"^kind:", text, re.M))
            uses = text.count('include "gpuscaler.labels"')
            self.assertGreaterEqual(uses, kinds, "%s: every object must take gpuscaler.labels"
                             % os.path.basename(path))

    def test_notes_exist(self):
        self.assertTrue(os.path.isfile(os.path.join(H.CHART, "templates", "NOTES.txt")))

    def test_values_yaml_is_commented(self):
        # Every top-level key has a comment just above it, or on its first child.
        with open(os.path.join(H.CHART, "values.yaml"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        undocumented = []
        for i, ln in enumerate(lines):
            m = re.match(r"^([A-Za-z][\w-]*):", ln)
            if not m:
                continue
            above = lines[i - 1].strip() if i else ""
            below = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if not above.startswith("#") and not below.startswith("#"):
                undocumented.append(m.group(1))
        self.assertEqual(undocumented, [], "values.yaml keys without a comment")


class SchemaTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if H.yaml is None:
            raise unittest.SkipTest("python3-yaml is not installed (apt-get install python3-yaml)")
        if jsonschema is None:
            raise unittest.SkipTest("python3-jsonschema is not installed "
                                    "(apt-get install python3-jsonschema)")
        cls.schema = schema()
        cls.defaults = C.chart_values()
        cls.validator = jsonschema.Draft7Validator(cls.schema)

    def test_schema_is_valid_draft7(self):
        jsonschema.Draft7Validator.check_schema(self.schema)
        self.assertIs(self.schema.get("additionalProperties"), False,
                      "top level must reject unknown keys")
        self.assertEqual(set(self.schema["properties"]) - {"global"}, set(self.defaults),
                         "schema properties and values.yaml keys must match")

    def test_values_yaml_validates(self):
        errs = [e.message for e in self.validator.iter_errors(self.defaults)]
        self.assertEqual(errs, [])

    def test_values_files_validate(self):
        files = values_files()
        self.assertGreaterEqual(len(files), 7)
        for path in files:
            with self.subTest(values=os.path.basename(path)):
                merged = C.coalesce(self.defaults, load_yaml(path))
                errs = ["%s: %s" % ("/".join(map(str, e.path)), e.message)
                        for e in self.validator.iter_errors(merged)]
                self.assertEqual(errs, [])

    def test_bad_values_rejected(self):
        files = bad_values_files()
        self.assertGreaterEqual(len(files), 15)
        for path in files:
            with self.subTest(values=os.path.basename(path)):
                merged = C.coalesce(self.defaults, load_yaml(path))
                errs = list(self.validator.iter_errors(merged))
                self.assertTrue(errs, "schema accepted %s" % os.path.basename(path))


class RenderTest(unittest.TestCase):
    """Renders with helmrender; skipped (with the reason) when it cannot be found or built."""

    @classmethod
    def setUpClass(cls):
        if H.yaml is None:
            raise unittest.SkipTest("python3-yaml is not installed (apt-get install python3-yaml)")
        cls.helmrender, why = H.find_helmrender()
        if not cls.helmrender:
            raise unittest.SkipTest("helmrender not available, render checks skipped: " + why)
        cls.defaults = C.chart_values()
        cls.renders = {}
        for path in values_files():
            cls.renders[os.path.basename(path)] = H.render(cls.helmrender, [path],
                                                           release=RELEASE, namespace=NAMESPACE)

    def objects(self, name):
        out = self.renders[name]
        self.assertEqual(out.returncode, 0, "%s: helmrender failed: %s" % (name, out.stderr))
        return H.load_docs(out.stdout)

    def test_every_values_file_renders_and_matches(self):
        for path in values_files():
            name = os.path.basename(path)
            with self.subTest(values=name):
                objs = self.objects(name)
                self.assertTrue(objs)
                values = C.coalesce(self.defaults, load_yaml(path))
                probs = C.check_render(objs, values, RELEASE, NAMESPACE)
                self.assertEqual(probs, [], "%s:\n  %s" % (name, "\n  ".join(probs)))

    def test_default_is_restricted_and_highly_available(self):
        objs = self.objects("default.yaml")
        dep = [o for o in objs if o["kind"] == "Deployment"][0]
        pod = dep["spec"]["template"]["spec"]
        c = pod["containers"][0]
        self.assertEqual(dep["spec"]["replicas"], 2)
        self.assertIs(pod["securityContext"]["runAsNonRoot"], True)
        self.assertEqual(pod["securityContext"]["seccompProfile"], {"type": "RuntimeDefault"})
        sc = c["securityContext"]
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertEqual(sc["capabilities"], {"drop": ["ALL"]})
        self.assertEqual(sc["runAsUser"], 65532)
        self.assertTrue(c["resources"]["requests"] and c["resources"]["limits"])
        kinds = sorted(o["kind"] for o in objs)
        self.assertNotIn("APIService", kinds, "external metrics are opt-in")
        self.assertIn("PodDisruptionBudget", kinds)

    def test_config_change_rolls_pods(self):
        base = self.objects("default.yaml")
        other = H.render(self.helmrender, sets=["config.decision-interval=30s"],
                         release=RELEASE, namespace=NAMESPACE)
        self.assertEqual(other.returncode, 0, other.stderr)

        def checksum(objs):
            dep = [o for o in objs if o["kind"] == "Deployment"][0]
            return dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        self.assertNotEqual(checksum(base), checksum(H.load_docs(other.stdout)))

    def test_release_name_containing_chart_name(self):
        out = H.render(self.helmrender, release="gpuscaler", namespace="ops")
        self.assertEqual(out.returncode, 0, out.stderr)
        objs = H.load_docs(out.stdout)
        probs = C.check_render(objs, self.defaults, "gpuscaler", "ops")
        self.assertEqual(probs, [])
        self.assertIn(("Deployment", "gpuscaler"), [(o["kind"], o["metadata"]["name"]) for o in objs])

    def test_notes_say_what_next(self):
        out = self.renders["default.yaml"]
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("NOTES:", out.stderr)
        notes = out.stderr.split("NOTES:", 1)[1]
        self.assertIn("kubectl -n %s rollout status deployment/%s-gpuscaler" % (NAMESPACE, RELEASE),
                      notes)
        self.assertIn("gpuscaler.io/enabled=true", notes)
        em = self.renders["external-cert-manager.yaml"].stderr.split("NOTES:", 1)[1]
        self.assertIn("kubectl get apiservice v1beta1.external.metrics.k8s.io", em)
        self.assertIn("cert-manager", em)

    def test_bad_values_rejected_by_helmrender(self):
        for path in bad_values_files():
            with self.subTest(values=os.path.basename(path)):
                out = H.render(self.helmrender, [path], release=RELEASE, namespace=NAMESPACE)
                self.assertNotEqual(out.returncode, 0, "rendered with %s" % path)
                self.assertIn("values don't meet the specifications of the schema", out.stderr)

    def test_invalid_combinations_fail_with_a_message(self):
        cases = [
            (["leaderElection.enabled=false"], "needs leaderElection.enabled=true"),
            (["leaderElection.enabled=false", "replicaCount=1", "sharding.enabled=true"],
             "sharding.enabled needs leaderElection.enabled=true"),
            (["externalMetrics.enabled=true", "externalMetrics.certManager.enabled=false"],
             "externalMetrics.tls.secretName is required"),
            (["externalMetrics.enabled=true", "externalMetrics.certManager.enabled=false",
              "externalMetrics.tls.secretName=x"], "externalMetrics.tls.caBundle"),
            (["healthPort=9090"], "healthPort must differ from service.metricsPort"),
            (["externalMetrics.enabled=true", "healthPort=6443"],
             "healthPort must differ from service.metricsPort and externalMetrics.port"),
            # durations the schema's pattern passes and gpuscaler would refuse at start-up
            (["config.decision-interval=500ms"],
             "config.decision-interval: 500ms is out of range (1s to 1h"),
            (["config.scrape.interval=50ms"], "config.scrape.interval: 50ms is out of range"),
            (["config.scrape.timeout=0.05s"], "config.scrape.timeout: 0.05s is out of range"),
            (["config.scrape.rate-window=1d"], "config.scrape.rate-window"),
            (["config.scrape.rate-window=25h"], "config.scrape.rate-window: 25h is out of range"),
            (["config.status.refresh-interval=1h0m1s"],
             "config.status.refresh-interval: 1h0m1s is out of range"),
            (["leaderElection.renewDeadline=20s"],
             "need retryPeriod < renewDeadline < leaseDuration (have 2s, 20s, 15s)"),
            # refused by gpuscaler with leader election off too
            (["leaderElection.enabled=false", "leaderElection.renewDeadline=20s"],
             "need retryPeriod < renewDeadline < leaseDuration (have 2s, 20s, 15s)"),
            (["config.scrape.interval=1s", "config.scrape.rate-window=5m"],
             "config.scrape.rate-window: 5m is more than 254 config.scrape.intervals (1s)"),
            (["config.scrape.rate-window=30m"],
             "config.scrape.rate-window: 30m is more than 254 config.scrape.intervals (5s)"),
            (["externalMetrics.enabled=true", "externalMetrics.port=9090"],
             "externalMetrics.port must differ from service.metricsPort"),
        ]
        for sets, msg in cases:
            with self.subTest(sets=sets):
                out = H.render(self.helmrender, sets=sets, release=RELEASE, namespace=NAMESPACE)
                self.assertNotEqual(out.returncode, 0)
                self.assertIn(msg, out.stderr)

    def test_durations_at_the_edges_of_their_ranges_render(self):
        sets = ["config.decision-interval=1s", "config.scrape.interval=100ms",
                "config.scrape.timeout=0.1s", "config.scrape.rate-window=25.4s",
                "config.status.refresh-interval=1h", "leaderElection.leaseDuration=1h",
                "leaderElection.renewDeadline=59m59.5s", "leaderElection.retryPeriod=1m30s"]
        out = H.render(self.helmrender, sets=sets, release=RELEASE, namespace=NAMESPACE)
        self.assertEqual(out.returncode, 0, out.stderr)
        # the longest window, at an interval that holds it in 254 (24h / 254 = 5m40.2s)
        sets = ["config.scrape.interval=5m41s", "config.scrape.timeout=1h",
                "config.scrape.rate-window=24h"]
        out = H.render(self.helmrender, sets=sets, release=RELEASE, namespace=NAMESPACE)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_fake_api_server_accepts_rendered_objects(self):
        ok, why = H.fakekube_available()
        if not ok:
            self.skipTest("fake API server not available: " + why)
        from helmcheck import fake as F
        for path in values_files():
            name = os.path.basename(path)
            with self.subTest(values=name):
                objs = self.objects(name)
                report = F.apply_and_read_back(objs)
                self.assertEqual(report.errors, [], "%s:\n  %s" % (name, "\n  ".join(report.errors)))
                self.assertTrue(report.applied)
                print("  %s: %d objects accepted and read back, skipped %s"
                      % (name, len(report.applied), sorted(set(report.skipped)) or "none"),
                      file=sys.stderr)


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import testsummary
    return testsummary.run()


if __name__ == "__main__":
    sys.exit(main())

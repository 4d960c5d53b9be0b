#!/usr/bin/env python3
"""Every annotation key and config key in the code is documented, and every
documented key exists in the code. Keys are read from the C tables that the
parsers use (pkg/policy/config.c, pkg/controller/workload.c,
pkg/controller/config.c), so the check cannot drift from what is parsed.

The bundled demos' outputs quoted in README.md, docs/policy.md and
docs/planning.md are what this build's `gpuscaler simulate` and `gpuscaler
plan` print (GPUSCALER_BIN, set by meson), so a change of the policy cannot
leave them stale."""
import decimal
import json
import os
import re
import subprocess
import sys
import unittest

SRC = os.environ.get("GPUSCALER_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(rel):
    with open(os.path.join(SRC, rel), encoding="utf-8") as f:
        return f.read()


def table(rel, start, rows=True):
    """Key names of the C table after `start`: the first string of each
    {row} when rows, else every string literal."""
    text = read(rel)
    i = text.index(start)
    j = text.index("};", i)
    body = text[i:j]
    if rows:
        return re.findall(r'\{\s*"([a-z0-9.-]+)"', body)
    return re.findall(r'"([a-z0-9.-]+)"', body)


class DocsKeys(unittest.TestCase):
    def setUp(self):
        self.policy = set(table("pkg/policy/config.c", "static const struct key keys[]"))
        self.ctl = set(table("pkg/controller/workload.c", "static const char *const ctl_keys[]", rows=False))
        self.cfg = set(table("pkg/controller/config.c", "static const struct key keys[]"))
        self.assertGreater(len(self.policy), 10)
        self.assertGreater(len(self.ctl), 10)
        self.assertGreater(len(self.cfg), 20)
        self.ann_doc = read("docs/annotations.md")
        self.cfg_doc = read("docs/configuration.md")

    def test_annotation_keys_documented(self):
        for k in sorted(self.policy | self.ctl):
            self.assertIn("`gpuscaler.io/%s`" % k, self.ann_doc, "annotation %s undocumented" % k)

    def test_documented_annotations_exist(self):
        documented = set(re.findall(r"^\| `gpuscaler\.io/([a-z0-9-]+)`", self.ann_doc, re.M))
        self.assertEqual(documented - (self.policy | self.ctl), set(), "documented but not in code")
        self.assertEqual((self.policy | self.ctl) - documented, set(), "in code but no table row")

    def test_chart_check_knows_every_annotation(self):
        # the chart and deploy checks (e2e/helmcheck) accept exactly the keys the parsers do
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import helmcheck
        self.assertEqual(set(helmcheck.ANNOTATION_KEYS), (self.policy | self.ctl) - {"status"})

    def test_chart_schema_knows_every_annotation(self):
        # values.schema.json's config.defaults accepts exactly the same keys: a key the
        # daemon reads but the schema lacks fails `helm install` with a schema error
        schema = json.loads(read("helm/gpuscaler/values.schema.json"))
        enum = (schema["properties"]["config"]["properties"]["defaults"]["propertyNames"]
                ["enum"])
        self.assertEqual(len(enum), len(set(enum)), "duplicate keys in the schema's enum")
        self.assertEqual(set(enum), (self.policy | self.ctl) - {"status"})

    def test_config_keys_documented(self):
        documented = set(re.findall(r"^\| `([a-z0-9.-]+)`", self.cfg_doc, re.M))
        self.assertEqual(self.cfg - documented, set(), "config keys in code but undocumented")
        self.assertEqual(documented - self.cfg, set(), "documented config keys not in code")

    def test_config_example_uses_only_known_keys(self):
        # every dotted leaf path in the example block is a known key (or under defaults)
        block = self.cfg_doc.split("```yaml", 1)[1].split("```", 1)[0]
        stack = []
        for line in block.splitlines():
            m = re.match(r"^( *)([a-z0-9-]+):", line)
            if not m:
                continue
            depth = len(m.group(1)) // 2
            stack = stack[:depth] + [m.group(2)]
            path = ".".join(stack)
            if stack[0] == "defaults":
                if depth == 1:
                    self.assertIn(stack[1], self.policy | self.ctl)
                continue
            is_prefix = any(k.startswith(path + ".") for k in self.cfg)
            self.assertTrue(path in self.cfg or is_prefix, "example key %s unknown" % path)


class DocsDemo(unittest.TestCase):
    """The demo outputs the docs quote are the binary's, line for line."""

    @classmethod
    def setUpClass(cls):
        cls.bin = os.environ.get("GPUSCALER_BIN")
        if not cls.bin:
            raise unittest.SkipTest("GPUSCALER_BIN not set")

    def run_bin(self, *args):
        # each demo takes about 1 s in a release build, a few under ASan+UBSan
        r = subprocess.run([self.bin, *args], capture_output=True, text=True, timeout=100)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [line.rstrip() for line in r.stdout.splitlines()]

    def quoted(self, rel, command):
        """The lines of the code block of `rel` that starts with `$ command`."""
        m = re.search(r"^```\n\$ %s\n(.*?)^```" % re.escape(command), read(rel), re.M | re.S)
        self.assertIsNotNone(m, "%s quotes no `$ %s` block" % (rel, command))
        lines = [line.rstrip() for line in m.group(1).splitlines()]
        self.assertGreaterEqual(len(lines), 5)
        return lines

    def assertQuoted(self, quoted, out, what):
        for i in range(len(out) - len(quoted) + 1):
            if out[i:i + len(quoted)] == quoted:
                return
        # the first line that differs, for the message
        first = next((q for q in quoted if q not in out), quoted[0])
        self.fail("%s is stale: %r is not in the output:\n%s" % (what, first, "\n".join(out)))

    def test_simulate_demo_quoted(self):
        out = self.run_bin("simulate")
        self.assertQuoted(self.quoted("docs/policy.md", "gpuscaler simulate"), out,
                          "docs/policy.md's demo block")
        rows = {f[0]: f for f in (line.split() for line in out) if f and f[0] in
                ("predictive", "reactive", "hpa", "oracle")}
        self.assertEqual(len(rows), 4, out)
        # rounded half up, as a reader rounds 7418.5
        gpu_h = {k: int(decimal.Decimal(v[1]).quantize(1, decimal.ROUND_HALF_UP))
                 for k, v in rows.items()}
        minutes = {k: int(v[3].split("/")[0]) for k, v in rows.items()}
        readme = read("README.md")
        m = re.search(r"predictive (\d+) GPU-hours / (\d+) min over SLA, reactive (\d+) / (\d+), "
                      r"hpa (\d+) / (\d+), perfect-foresight oracle (\d+)", readme)
        self.assertIsNotNone(m, "README.md has no demo line")
        self.assertEqual(tuple(int(x) for x in m.groups()),
                         (gpu_h["predictive"], minutes["predictive"], gpu_h["reactive"],
                          minutes["reactive"], gpu_h["hpa"], minutes["hpa"], gpu_h["oracle"]),
                         "README.md's demo line is stale")

    def test_plan_demo_quoted(self):
        out = self.run_bin("plan")
        self.assertQuoted(self.quoted("docs/planning.md", "gpuscaler plan"), out,
                          "docs/planning.md's worked example")


if __name__ == "__main__":
    unittest.main(verbosity=2)

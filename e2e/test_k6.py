#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks of the k6 load tests in e2e/k6 (k6 itself is not installed here): every script parses
as an ES module (`node --check` on a .mjs copy, nothing stubbed), and the k6 scripts and the
Python load generator (e2e/cluster/loadgen.py, profile.py) agree on the environment variables
and their defaults, the peak profile's shape and stages, the thresholds and the summary a CI job
gates on: by parsing the JavaScript and by running the pure helpers of e2e/k6/lib/profile.js
under node against the Python functions.

Run: /usr/bin/python3 e2e/test_k6.py   (meson test 'k6')
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

E2E = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, E2E)

from cluster import loadgen  # noqa: E402
from cluster import profile as P  # noqa: E402

K6 = os.path.join(E2E, "k6")
SCRIPTS = ("peak.js", "baseline.js", os.path.join("lib", "profile.js"))
NODE = shutil.which("node")
REQUIRED_ENV = ("TARGET_URL", "SLA_MS", "PEAK_RPS", "DURATION", "MODEL")


def read(rel):
    with open(os.path.join(K6, rel), encoding="utf-8") as f:
        return f.read()


def js_object(src, name):
    """The JSON literal assigned to `export const NAME = {...};`."""
    m = re.search(r"export const %s = (\{.*?\n\});" % name, src, re.S)
    if not m:
        raise AssertionError("no JSON literal for %s" % name)
    return json.loads(m.group(1))


class Mjs:
    """The k6 folder copied with .js -> .mjs (imports rewritten to match)."""

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="k6check-")
        for rel in SCRIPTS:
            dst = os.path.join(self.dir, rel[:-3] + ".mjs")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            src = read(rel).replace("./lib/profile.js", "./lib/profile.mjs")
            with open(dst, "w") as f:
                f.write(src)
        return self

    def path(self, rel):
        return os.path.join(self.dir, rel[:-3] + ".mjs")

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)


def node_eval(mjs, code):
    """Run an ES module snippet importing lib/profile.mjs; returns its JSON stdout."""
    prog = "import * as L from %s;\n%s" % (json.dumps("file://" + mjs.path(
        os.path.join("lib", "profile.js"))), code)
    r = subprocess.run([NODE, "--input-type=module", "-e", prog], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    if r.returncode != 0:
        raise AssertionError("node failed: %s" % r.stderr.decode())
    return json.loads(r.stdout)


@unittest.skipUnless(NODE, "node not installed")
class Syntax(unittest.TestCase):
    def test_node_check_each_script(self):
        with Mjs() as m:
            for rel in SCRIPTS:
                r = subprocess.run([NODE, "--check", m.path(rel)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=30)
                self.assertEqual(r.returncode, 0, "%s: %s" % (rel, r.stderr.decode()))

    def test_node_check_rejects_a_broken_script(self):
        # the check above is not vacuous
        with Mjs() as m:
            bad = m.path("peak.js")
            with open(bad, "a") as f:
                f.write("\nexport function handleSummary( {\n")
            r = subprocess.run([NODE, "--check", bad], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=30)
            self.assertNotEqual(r.returncode, 0)


class Parsed(unittest.TestCase):
    def setUp(self):
        self.lib = read(os.path.join("lib", "profile.js"))
        self.peak = read("peak.js")
        self.base = read("baseline.js")

    def test_defaults_and_shape_literals_match_python(self):
        self.assertEqual(js_object(self.lib, "DEFAULTS"), P.DEFAULTS)
        self.assertEqual(js_object(self.lib, "SHAPE"), P.SHAPE)
        m = re.search(r'export const PROMPT = ("[^"]*");', self.lib)
        self.assertEqual(json.loads(m.group(1)), P.PROMPT)
        for k in REQUIRED_ENV:
            self.assertIn(k, P.DEFAULTS)

    def test_shape_is_the_afternoon_peak(self):
        sh = P.SHAPE
        self.assertEqual(sum(st["hours"] for st in sh["stages"]), 6)       # 2 PM - 8 PM
        rates = [sh["start"]] + [st["target"] for st in sh["stages"]]
        self.assertEqual(max(rates), 1.0)
        # the peak is held from 4 PM to 6 PM
        hour, plateau = 14, []
        for st, prev in zip(sh["stages"], rates):
            if st["target"] == 1.0 and prev == 1.0:
                plateau.append((hour, hour + st["hours"]))
            hour += st["hours"]
        self.assertEqual(plateau, [(16, 18)])

    def test_scripts_use_the_shared_helpers_and_env(self):
        for src, executor in ((self.peak, "ramping-arrival-rate"),
                              (self.base, "constant-arrival-rate")):
            self.assertIn('from "./lib/profile.js"', src)
            self.assertIn("params(__ENV)", src)
            self.assertIn('executor: "%s"' % executor, src)
            self.assertIn("thresholds: thresholds(P.slaMs, P.maxErrorRate)", src)
            self.assertRegex(src, r"export function handleSummary\(data\)")
            self.assertIn("out[P.summaryPath] =", src)
            self.assertIn('"p(99)"', src)                   # summaryTrendStats has p(99)
            self.assertIn('"/v1/completions"', src)
            # every environment variable named in the header is a known parameter
            header = src.split("import ", 1)[0]
            named = set(re.findall(r"\b([A-Z][A-Z_]{2,})\b", header.split("Parameters", 1)[1]))
            named.discard("DEFAULTS")
            self.assertTrue(named)
            self.assertEqual(named - set(P.DEFAULTS), set())
        self.assertIn("buildStages(P.peakRps, P.durationS)", self.peak)
        for k in REQUIRED_ENV:
            self.assertIn(k, self.peak.split("import ", 1)[0])
        # the library reads exactly the DEFAULTS keys from the environment
        used = set(re.findall(r'get\("([A-Z_]+)"\)', self.lib))
        self.assertEqual(used, set(P.DEFAULTS))
        code = "\n".join(ln for ln in self.lib.splitlines() if not ln.lstrip().startswith("//"))
        self.assertFalse("__ENV" in code or "k6" in code.split("export", 1)[0],
                         "lib/profile.js must stay pure (env passed in, no k6 import)")

    def test_python_thresholds_are_k6_syntax(self):
        th = P.thresholds(P.DEFAULTS["SLA_MS"], P.DEFAULTS["MAX_ERROR_RATE"])
        self.assertEqual(th, {"http_req_duration": ["p(99)<2000"],
                              "http_req_failed": ["rate<0.01"]})
        self.assertEqual(P.eval_threshold("p(99)<2000", {"p(99)": 1999.9}), (True, 1999.9))
        self.assertEqual(P.eval_threshold("p(99)<2000", {"p(99)": 2000}), (False, 2000))
        self.assertEqual(P.eval_threshold("rate<0.01", {"rate": 0.02})[0], False)


@unittest.skipUnless(NODE, "node not installed")
class Agreement(unittest.TestCase):
    CASES = [(20, "10m"), (30, "6s"), (1, "90s"), (7.5, "1h30m"), (0.4, "12m"), (250, "45m")]

    def test_stages_agree(self):
        with Mjs() as m:
            js = node_eval(m, "console.log(JSON.stringify(%s.map(([p, d]) => "
                              "L.buildStages(p, L.parseDuration(d)))));"
                           % json.dumps([list(c) for c in self.CASES]))
        for (peak, dur), got in zip(self.CASES, js):
            self.assertEqual(got, P.build_stages(peak, P.parse_duration(dur)),
                             (peak, dur))
        # default profile: PEAK_RPS 20 over 10m -> 100 s per afternoon hour
        d = P.build_stages(P.DEFAULTS["PEAK_RPS"], P.parse_duration(P.DEFAULTS["DURATION"]))
        self.assertEqual(d, {"startRate": 360, "timeUnit": "1m", "stages": [
            {"duration": "100s", "target": 600}, {"duration": "100s", "target": 1200},
            {"duration": "200s", "target": 1200}, {"duration": "100s", "target": 600},
            {"duration": "100s", "target": 360}]})

    def test_durations_and_thresholds_agree(self):
        durs = ["10m", "90s", "1h30m", "1500ms", "45", "2m30s", "0.5s"]
        ths = [[2000, 0.01], [1500.5, 0.05], [250, 0]]
        with Mjs() as m:
            js = node_eval(m, "console.log(JSON.stringify({d: %s.map(L.parseDuration), "
                              "t: %s.map(([a, b]) => L.thresholds(a, b)), "
                              "bad: ['10x', 'm', '5m5'].map((s) => { try { L.parseDuration(s);"
                              " return 'ok'; } catch (e) { return 'err'; } })}));"
                           % (json.dumps(durs), json.dumps(ths)))
        self.assertEqual(js["d"], [P.parse_duration(s) for s in durs])
        self.assertEqual(js["t"], [P.thresholds(a, b) for a, b in ths])
        self.assertEqual(js["bad"], ["err"] * 3)
        for s in ("10x", "m", "5m5"):
            with self.assertRaises(ValueError):
                P.parse_duration(s)

    def test_env_parameters_agree_with_loadgen(self):
        env = {"TARGET_URL": "http://llm.example:8000/", "SLA_MS": "1500", "PEAK_RPS": "12",
               "DURATION": "7m", "MODEL": "meta-llama/Meta-Llama-3-8B-Instruct",
               "MAX_ERROR_RATE": "0.02", "MAX_TOKENS": "64"}
        with Mjs() as m:
            js = node_eval(m, "console.log(JSON.stringify([{}, %s].map((e) => { "
                              "const p = L.params(e); "
                              "return [p, L.thresholds(p.slaMs, p.maxErrorRate)]; })));"
                           % json.dumps(env))
        for (got, th), e in ((js[0], {}), (js[1], env)):
            saved = {k: os.environ.pop(k) for k in list(os.environ) if k in P.DEFAULTS}
            try:
                os.environ.update(e)
                cfg = loadgen.Config()
            finally:
                for k in e:
                    os.environ.pop(k, None)
                os.environ.update(saved)
            self.assertEqual(got["targetUrl"], cfg.target_url.rstrip("/"))
            self.assertEqual(got["slaMs"], cfg.sla_ms)
            self.assertEqual(got["peakRps"], cfg.peak_rps)
            self.assertEqual(got["duration"], cfg.duration)
            self.assertEqual(got["model"], cfg.model)
            self.assertEqual(got["maxErrorRate"], cfg.max_error_rate)
            self.assertEqual(got["maxTokens"], cfg.max_tokens)
            self.assertEqual(got["rate"], cfg.rate)
            self.assertEqual(th, cfg.thresholds())
            rp = cfg.build_profile()
            self.assertEqual(rp.duration, got["durationS"])

    def test_gate_summary_has_the_loadgen_summary_shape(self):
        # what k6 passes to handleSummary (metrics with values and threshold results)
        data = {"state": {"testRunDurationMs": 600123},
                "metrics": {
                    "http_req_duration": {"type": "trend", "values": {
                        "avg": 800.5, "min": 300.1, "med": 700.2, "max": 2600.0,
                        "p(90)": 1200.0, "p(95)": 1500.0, "p(99)": 2100.0},
                        "thresholds": {"p(99)<2000": {"ok": False}}},
                    "http_req_failed": {"type": "rate", "values": {"rate": 0.004},
                                        "thresholds": {"rate<0.01": {"ok": True}}},
                    "http_reqs": {"type": "counter", "values": {"count": 9000, "rate": 15}},
                    "dropped_iterations": {"type": "counter", "values": {"count": 3}}}}
        with Mjs() as m:
            s = node_eval(m, "const p = L.params({}); const s = L.gateSummary(%s, p, 'peak');"
                             "console.log(JSON.stringify({s: s, text: L.textSummary(s)}));"
                          % json.dumps(data))
        k6s, text = s["s"], s["text"]
        self.assertFalse(k6s["pass"])
        self.assertEqual(k6s["thresholds"], {"http_req_duration": {"p(99)<2000": False},
                                             "http_req_failed": {"rate<0.01": True}})
        self.assertEqual(k6s["http_req_duration_ms"]["p(99)"], 2100.0)
        self.assertEqual((k6s["http_reqs"], k6s["dropped_iterations"]), (9000, 3))
        self.assertIn("FAIL", text)
        self.assertIn("CROSSED", text)
        # the Python generator's summary line has the same gate keys and shapes
        cfg = loadgen.Config(target_url="http://127.0.0.1:9", profile="constant", rate=0,
                             duration="0.05s", interval=1)
        py = loadgen.run(cfg)
        for k in ("type", "tool", "profile", "target_url", "pass", "thresholds",
                  "http_req_duration_ms", "http_req_failed_rate", "http_reqs",
                  "dropped_iterations", "duration_s", "sla_ms", "max_error_rate"):
            self.assertIn(k, k6s)
            self.assertIn(k, py)
        self.assertEqual(set(k6s["http_req_duration_ms"]), set(py["http_req_duration_ms"]))
        self.assertEqual({m: set(v) for m, v in py["thresholds"].items()},
                         {m: set(v) for m, v in k6s["thresholds"].items()})
        self.assertTrue(py["pass"])       # nothing sent: no threshold crossed
        self.assertEqual(py["http_reqs"], 0)


if __name__ == "__main__":
    t0 = time.monotonic()
    prog = unittest.main(exit=False, verbosity=2)
    r = prog.result
    import testsummary
    passed, failed, skipped, _ = testsummary.counts(r)
    print("k6 tests took %.1fs" % (time.monotonic() - t0))
    print("k6: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.exit(1 if failed or r.testsRun == 0 else 0)

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The messages of `gpuscaler run` for bad configuration, without a cluster:
each bad value of the config file fails at load time (exit 2, before the
"starting" line), naming the key and FILE:LINE; a flag's bad value names the
flag and the valid values; file and line are printed once.

Needs GPUSCALER_BIN (set by meson). Files are written to a temporary folder."""
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("GPUSCALER_BIN", "gpuscaler")
TIMEOUT = 20

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
"""


class RunCli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.kubeconfig = self.write("kubeconfig", KUBECONFIG)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        p = os.path.join(self.dir, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def run_bad(self, *args, config=None):
        cmd = [BIN, "run", "--kubeconfig", self.kubeconfig, "--leader-elect=false",
               "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0"]
        if config is not None:
            cmd += ["--config", self.write("config.yaml", config)]
        r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(r.returncode, 2, (args, config, r.stdout, r.stderr))
        # no log line at all: the daemon never logged "gpuscaler X starting"
        self.assertNotIn("level=", r.stdout + r.stderr, "failed after starting")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        return r.stderr.strip()

    def test_config_values_fail_at_load_with_key_and_line(self):
        cases = [
            ("decision-interval: 15s\nlisten:\n  metrics: notanaddr\n", 3,
             "listen.metrics: 'notanaddr' is not HOST:PORT"),
            ("prometheus:\n  url: ftp://x\n", 2,
             "prometheus.url: 'ftp://x' is not an http:// or https:// URL"),
            ("checkpoint:\n  configmap: Bad_Name\n", 2,
             "checkpoint.configmap: 'Bad_Name' is not a valid Kubernetes name (a DNS-1123 "
             "subdomain"),
            ("log:\n  level: verbose\n", 2,
             "log.level: 'verbose' is not one of debug, info, warn, error"),
            ("scrape:\n  interval: 100000h\n", 2, "scrape.interval: 100000h is out of range"),
            ("namespaces: [ml, ML]\n", 1, "namespaces: 'ML' is not a valid namespace name"),
            ("prometheus:\n  url: http://p:9090\n  token-file: /nonexistent/t\n", 3,
             "prometheus.token-file: cannot read /nonexistent/t: No such file or directory"),
            ("prometheus:\n  url: http://p:9090\n  headers:\n    Authorization: Bearer x\n", 4,
             "prometheus.headers: header Authorization is set by gpuscaler itself"),
            ("prometheus:\n  url: http://p:9090\n  username: gpu\n"
             "  password-file: /nonexistent/p\n", 4,
             "prometheus.password-file: cannot read /nonexistent/p: No such file"),
        ]
        for yaml, line, msg in cases:
            err = self.run_bad(config=yaml)
            path = os.path.join(self.dir, "config.yaml")
            self.assertTrue(err.startswith("gpuscaler run: %s:%d: %s" % (path, line, msg)), err)

    def test_missing_config_named_once(self):
        p = os.path.join(self.dir, "nope.yaml")
        err = self.run_bad("--config", p)
        self.assertEqual(err, "gpuscaler run: %s: No such file or directory" % p)

    def test_kubeconfig_error_line_once(self):
        self.kubeconfig = self.write("kc.yaml", "apiVersion: v1\nclusters: [\n")
        err = self.run_bad()
        self.assertIn("kc.yaml:3: ", err)
        self.assertNotIn("(line 3)", err)
        self.assertNotIn("line 3 column", err)
        self.kubeconfig = self.write("kc2.yaml", KUBECONFIG.replace("current-context: x",
                                                                  "current-context: nope"))
        err = self.run_bad()
        self.assertRegex(err, r"kc2\.yaml:\d+: context \"nope\" not found in kubeconfig$")
        # an exec plugin client-go would refuse: the line of its exec block
        self.kubeconfig = self.write("kc3.yaml", KUBECONFIG.replace(
            "user: {token: abc}", "user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, "
            "command: aws, interactiveMode: Always}"))
        err = self.run_bad()
        self.assertRegex(err, r"kc3\.yaml:9: context \"x\" user \"u\": exec: interactiveMode "
                              r"Always needs a terminal")

    def test_flag_values_name_the_flag_and_the_choices(self):
        self.assertEqual(self.run_bad("--log-level", "verbose"),
                         "gpuscaler run: --log-level: 'verbose' is not one of debug, info, warn, "
                         "error")
        self.assertEqual(self.run_bad("--log-format", "xml"),
                         "gpuscaler run: --log-format: 'xml' is not one of json, logfmt")
        self.assertIn("--metrics-addr: 'localhost:9090' is not HOST:PORT",
                      self.run_bad("--metrics-addr", "localhost:9090"))
        self.assertIn("--decision-interval: 100000h is out of range (1s to 1h)",
                      self.run_bad("--decision-interval", "100000h"))
        self.assertIn("--lease-name: 'Bad_Name' is not a valid Kubernetes name",
                      self.run_bad("--lease-name", "Bad_Name"))
        self.assertIn("external-metrics.tls-key-file: cannot read /nonexistent/k",
                      self.run_bad("--external-metrics", "--tls-cert-file", self.kubeconfig,
                                   "--tls-key-file", "/nonexistent/k"))
        # a recorded trace's rows are whole seconds, one per decision interval
        self.assertEqual(self.run_bad("--record", self.dir, "--decision-interval", "2500ms"),
                         "gpuscaler run: --record: decision-interval must be a whole number of "
                         "seconds (the trace's bucket width)")
        # the recordings' folder is checked at start, not at each workload's first row
        nodir = os.path.join(self.dir, "nope")
        self.assertEqual(self.run_bad("--record", nodir),
                         "gpuscaler run: --record: %s is not a directory gpuscaler can write "
                         "to" % nodir)
        # "" as a Lease holder reads as free, and as held by every "" replica
        self.assertIn("--id: empty", self.run_bad("--id="))

    def test_flags_complete_the_file_before_the_checks_across_keys(self):
        """The checks across keys run on the file and the flags together: a flag may
        complete or change what the file says (they ran on the file alone and refused it).
        A --record folder that does not exist, checked right after them, ends each run."""
        nodir = os.path.join(self.dir, "nope")
        past = "gpuscaler run: --record: %s is not a directory" % nodir
        cert = self.write("c.pem", "x")
        # the file's TLS certificate, its key as a flag
        err = self.run_bad("--tls-key-file", cert, "--record", nodir,
                           config="external-metrics:\n  tls-cert-file: %s\n" % cert)
        self.assertTrue(err.startswith(past), err)
        # without the flag, the pair's check names the file's line
        err = self.run_bad("--record", nodir,
                           config="external-metrics:\n  tls-cert-file: %s\n" % cert)
        self.assertIn("config.yaml:2: external-metrics.tls-cert-file: set without "
                      "external-metrics.tls-key-file", err)
        # sharding in the file, leader election from a flag
        err = self.run_bad("--leader-elect=true", "--record", nodir,
                           config="leader-election: {enabled: false}\n"
                                  "sharding: {enabled: true}\n")
        self.assertTrue(err.startswith(past), err)
        # listeners that would collide fail at load, not after the start
        cmd = [BIN, "run", "--kubeconfig", self.kubeconfig, "--config",
               self.write("l.yaml", "listen: {metrics: '127.0.0.1:19090', "
                                    "health: '127.0.0.1:19090'}\n")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("l.yaml:1: listen.health: 127.0.0.1:19090 overlaps listen.metrics "
                      "127.0.0.1:19090", r.stderr)
        self.assertNotIn("level=", r.stderr)

    def test_flags_are_spelled_in_full(self):
        """getopt_long took any unambiguous prefix: `--nam BAD` set --namespace. As
        simulate and plan, run takes a flag only as it is spelled."""
        for args, full in ((["--nam", "BAD"], "namespace"), (["--dry"], "dry-run"),
                           (["--kubeconf=x"], "kubeconfig"),
                           (["--leader-election", "x"], "leader-election-namespace")):
            err = self.run_bad(*args)
            self.assertEqual(err, "gpuscaler run: unknown flag '--%s': flags are spelled in "
                             "full (--%s?)" % (args[0][2:].split("=")[0], full))
        # the value of a flag that takes one is not read as a flag
        err = self.run_bad("--context", "--nam", "--namespace", "Bad_NS")
        self.assertIn("--namespace: 'Bad_NS' is not a valid namespace name", err)

    def test_help(self):
        for flag in ("-h", "--help"):
            r = subprocess.run([BIN, "run", flag], capture_output=True, text=True,
                               timeout=TIMEOUT)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith("usage: gpuscaler run"), r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)

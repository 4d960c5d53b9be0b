#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Regex label matchers against Prometheus' own reading: Go's regexp (which Prometheus matches
`label=~"pattern"` with, anchored and with (?s)) and the scraper's translation to the C
library's POSIX regular expressions (pkg/scrape/regex.c, through e2e/tools/regex-match) answer
the same random patterns on the same values. Every pattern the scraper accepts must match
exactly what Go matches; every pattern Go refuses, the scraper must refuse too; and the subset
accepted must be most of the patterns written from its documented constructs. Needs `go` (the
test setup installs golang-go); skipped, with the reason, without it."""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testsummary  # noqa: E402

SRC = os.environ.get("GPUSCALER_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("GPUSCALER_BUILD") or os.path.join(SRC, "build")
MATCH_BIN = os.environ.get("REGEX_MATCH_BIN") or os.path.join(BUILD, "e2e", "regex-match")
CASES = 40000

# Pieces of patterns: the documented subset, and what lies just outside it.
SUBSET = ["a", "b", "c", "x", "A", "-", "_", "/", ".", "\\d", "\\D", "\\w", "\\W", "\\s", "\\S",
          "\\.", "\\-", "\\\\", "\\]", "\\[", "\\*", "\\^", "\\$", "[ab]", "[^a]", "[a-c]",
          "[^\\d]", "[]a]", "[a-]", "[^-a]", "[[:digit:]]", "[[:alpha:]x]", "[\\w-]", "[^^]",
          "[\\^-]", "[.[]", "{", "}", "]", "(?:a|b)", "(a|b)", "|", "(", ")", "*", "+", "?",
          "{2}", "{1,2}", "{2,}", "*?", "+?", "??", "{,2}", "\\t", "\\n"]
OUTSIDE = ["é", "^", "$", "(?i)", "\\b", "\\pL", "(?P<n>a)", "(?=a)", "\\1", "[[:word:]]",
           "\\z", "\n"]
VALUES = ["", "a", "b", "ab", "abc", "aa", "aaa", "é", "a\nb", "-", "\\", "]", "^", "[", "1",
          "12", "a1", "A", "x", "{", "}", "éa", "aé", "a-b", " ", "\t", "_", "bb", "abab", "a.b",
          "aéb", "€", "llama-3.1-8b", "meta/llama"]


def cases(seed, n):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        pieces = SUBSET if rnd.random() < 0.85 else SUBSET + OUTSIDE
        p = "".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 6)))
        if rnd.random() < 0.2:
            p = "^" + p + ("$" if rnd.random() < 0.5 else "")
        if rnd.random() < 0.1:
            p = "(?i)" + p
        v = "".join(rnd.choice(VALUES) for _ in range(rnd.randint(1, 3)))
        out.append((p, v))
    return out


def run(cmd, lines, timeout=120):
    r = subprocess.run(cmd, input="".join(lines), capture_output=True, text=True,
                       timeout=timeout, check=False)
    if r.returncode != 0:
        raise AssertionError("%s: exit %d: %s" % (cmd[0], r.returncode, r.stderr[-300:]))
    return r.stdout.splitlines()


class RegexAgainstGo(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpuscaler-regexdiff-")
        cls.go_bin = None
        go = shutil.which("go")
        if not go:
            return
        env = dict(os.environ, GOFLAGS="-mod=mod", GO111MODULE="on",
                   GOCACHE=os.environ.get("GOCACHE") or os.path.join(cls.tmp, "gocache"))
        env.setdefault("HOME", cls.tmp)
        out = os.path.join(cls.tmp, "regexdiff")
        r = subprocess.run([go, "build", "-o", out, os.path.join(SRC, "e2e", "regexdiff",
                                                                  "main.go")],
                           capture_output=True, text=True, env=env, timeout=300, check=False)
        if r.returncode != 0:
            raise AssertionError("go build regexdiff: %s" % r.stderr[-500:])
        cls.go_bin = out

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        if not self.go_bin:
            self.skipTest("no go in PATH (scripts/setup.sh test installs golang-go)")
        self.assertTrue(os.access(MATCH_BIN, os.X_OK), MATCH_BIN)

    def answers(self, pairs):
        lines = ["%s %s\n" % (p.encode().hex(), v.encode().hex()) for p, v in pairs]
        go = run([self.go_bin], lines)
        ours = run([MATCH_BIN], lines)
        self.assertEqual(len(go), len(pairs))
        self.assertEqual(len(ours), len(pairs))
        return go, ours

    def test_random_patterns_answer_as_go(self):
        pairs = cases(20261130, CASES)
        go, ours = self.answers(pairs)
        wrong = [(p, v, g, o) for (p, v), g, o in zip(pairs, go, ours)
                 if o != "refused" and g != o]
        self.assertEqual(wrong[:10], [], "%d cases answered unlike Go's regexp" % len(wrong))
        lenient = [(p, v) for (p, v), g, o in zip(pairs, go, ours) if g == "err" and o != "refused"]
        self.assertEqual(lenient[:10], [], "patterns Go refuses were accepted")
        valid = [(g, o) for g, o in zip(go, ours) if g != "err"]
        accepted = [o for g, o in valid if o != "refused"]
        # most valid patterns are in the subset; both answers occur (not a vacuous comparison)
        self.assertGreater(len(accepted), 0.75 * len(valid), "too much of RE2 refused")
        self.assertGreater(accepted.count("1"), 300)
        self.assertGreater(accepted.count("0"), 300)

    def test_documented_examples(self):
        pairs = [("llama.*", "llama-3-8b"), ("llama", "llama-3"), ("meta/llama-3\\.1-.*",
                  "meta/llama-3.1-8b-instruct"), ("a.b", "aéb"), ("[^a]", "€"), ("(?i)LLAMA",
                  "llama"), ("prod|staging-.*", "staging-eu"), ("^(a|b)$", "b"), (".*", "a\nb")]
        go, ours = self.answers(pairs)
        self.assertEqual(ours, go)
        self.assertEqual(go, ["1", "0", "1", "1", "1", "1", "1", "1", "1"])


if __name__ == "__main__":
    sys.exit(testsummary.run())

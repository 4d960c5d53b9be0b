#!/usr/bin/env python3
"""The written style, checked (docs/dev/STYLE-CHECK in ../shared/STYLE.md rule 19):
no sprintf/strcpy/strcat/strtok/atoi/gets and no raw allocation calls outside
util's wrapper in pkg/ and cmd/; every C file opens with an SPDX line and a
comment saying what it is for; no .c file over 1,500 lines. A line may opt out
of the allocation rule with the marker `style: allow` (memory owned by a
foreign library, e.g. jansson's json_dumps, must go back through free).
No assert() from <assert.h> anywhere in pkg/, cmd/, bench/ or fuzz/: release
builds define NDEBUG, which removes the assertion and any call inside it (a
bind() in an assert() broke the release build); tests use cmocka's assert_*
and setup steps that check their return code."""
import os
import re
import unittest

SRC = os.environ.get("GPUSCALER_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BANNED = re.compile(r"(?<![A-Za-z0-9_])(sprintf|vsprintf|strcpy|strcat|strtok|strtok_r|atoi|atol|gets)\s*\(")
ASSERT = re.compile(r"(?<![A-Za-z0-9_])assert\s*\(|#\s*include\s*<assert\.h>")
RAW = re.compile(r"(?<![A-Za-z0-9_>.])(malloc|calloc|realloc|free|strdup|strndup)\s*\(")


def c_files(tops=("pkg", "cmd")):
    for top in tops:
        for root, _, files in os.walk(os.path.join(SRC, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.join(root, f)


def code_lines(path):
    """Lines with comments and string literals blanked (simple, good enough)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    raw = text.splitlines()
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return list(zip(text.splitlines(), raw))


class Style(unittest.TestCase):
    def test_banned_functions(self):
        bad = []
        for p in c_files():
            for n, (code, raw) in enumerate(code_lines(p), 1):
                code = code.split("//")[0]
                if BANNED.search(code):
                    bad.append("%s:%d: %s" % (os.path.relpath(p, SRC), n, raw.strip()))
        self.assertEqual(bad, [])

    def test_no_assert_macro(self):
        bad = []
        for p in c_files(("pkg", "cmd", "bench", "fuzz")):
            for n, (code, raw) in enumerate(code_lines(p), 1):
                if ASSERT.search(code.split("//")[0]):
                    bad.append("%s:%d: %s" % (os.path.relpath(p, SRC), n, raw.strip()))
        self.assertEqual(bad, [], "assert() vanishes under NDEBUG (release builds); check the "
                         "result explicitly")

    def test_allocation_through_wrapper(self):
        bad = []
        for p in c_files():
            if p.endswith(os.path.join("util", "util.c")) or "/test-" in p:
                continue
            for n, (code, raw) in enumerate(code_lines(p), 1):
                if "style: allow" in raw:
                    continue
                if RAW.search(code.split("//")[0]):
                    bad.append("%s:%d: %s" % (os.path.relpath(p, SRC), n, raw.strip()))
        self.assertEqual(bad, [])

    def test_file_headers_and_size(self):
        bad = []
        for p in c_files():
            with open(p, encoding="utf-8") as f:
                lines = f.read().splitlines()
            if not lines or "SPDX-License-Identifier" not in lines[0]:
                bad.append("%s: first line must be the SPDX line" % p)
            elif len(lines) < 2 or not lines[1].lstrip().startswith("/*"):
                bad.append("%s: second line must open the comment saying what it is for" % p)
            if p.endswith(".c") and len(lines) > 1500:
                bad.append("%s: %d lines (split it)" % (p, len(lines)))
        self.assertEqual(bad, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)

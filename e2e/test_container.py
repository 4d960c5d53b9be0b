#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the Dockerfile against the built gpuscaler binary, without building an image.

The runtime stage must install exactly the Debian packages that hold the shared
libraries the binary links (its DT_NEEDED entries, resolved with ldd and mapped
with dpkg -S), less what debian:12-slim already has; and everything else ldd
pulls in must come with those packages' dependencies. The Dockerfile must have
two stages (debian:12, debian:12-slim), a numeric non-root USER and
ENTRYPOINT ["gpuscaler"].

Run: GPUSCALER_BIN=build/cmd/gpuscaler/gpuscaler /usr/bin/python3 e2e/test_container.py
Skips the binary checks (not the Dockerfile checks) when GPUSCALER_BIN is unset.
"""

import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import unittest

SRC = os.environ.get("GPUSCALER_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCKERFILE = os.path.join(SRC, "Dockerfile")
TIMEOUT = 30  # seconds for any one ldd/dpkg call

# Packages of debian:12-slim (bookworm). The official image is a debootstrap
# --variant=minbase of bookworm with docs trimmed, so this is the package list of
# `debootstrap --variant=minbase bookworm` (dpkg-query -W in that root, 88 packages).
# A library whose package is here needs no apt-get install in the runtime stage.
DEBIAN_12_SLIM_PACKAGES = frozenset("""
adduser apt base-files base-passwd bash bsdutils coreutils dash debconf
debian-archive-keyring debianutils diffutils dpkg e2fsprogs findutils gcc-12-base gpgv grep
gzip hostname init-system-helpers libacl1 libapt-pkg6.0 libattr1 libaudit-common libaudit1
libblkid1 libbz2-1.0 libc-bin libc6 libcap-ng0 libcap2 libcom-err2 libcrypt1 libdb5.3
libdebconfclient0 libext2fs2 libffi8 libgcc-s1 libgcrypt20 libgmp10 libgnutls30
libgpg-error0 libhogweed6 libidn2-0 liblz4-1 liblzma5 libmd0 libmount1 libnettle8
libp11-kit0 libpam-modules libpam-modules-bin libpam-runtime libpam0g libpcre2-8-0
libseccomp2 libselinux1 libsemanage-common libsemanage2 libsepol2 libsmartcols1 libss2
libstdc++6 libsystemd0 libtasn1-6 libtinfo6 libudev1 libunistring2 libuuid1 libxxhash0
libzstd1 login logsave mawk mount ncurses-base ncurses-bin passwd perl-base sed
sysvinit-utils tar tzdata usr-is-merged util-linux util-linux-extra zlib1g
""".split())


# ---------------------------------------------------------------- Dockerfile

def read_dockerfile():
    """Logical lines of the Dockerfile (continuations joined, comments dropped)."""
    with open(DOCKERFILE, encoding="utf-8") as f:
        raw = f.read().splitlines()
    lines, cur = [], ""
    for line in raw:
        s = line.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if cur and s.startswith("#"):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        lines.append(cur.strip())
        cur = ""
    if cur:
        lines.append(cur.strip())
    return lines


def stages(lines):
    """[(image, alias, [instructions...])] per FROM."""
    out = []
    for ln in lines:
        word, _, rest = ln.partition(" ")
        if word.upper() == "FROM":
            parts = rest.split()
            alias = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            out.append((parts[0], alias, []))
        elif out:
            out[-1][2].append(ln)
    return out


def arg_value(instructions, name):
    """The default of ARG name in one stage, or None."""
    for ln in instructions:
        m = re.match(r"ARG\s+%s=(.*)$" % re.escape(name), ln, re.I)
        if m:
            v = m.group(1).strip()
            return shlex.split(v)[0] if v[:1] in "\"'" else v
    return None


# ---------------------------------------------------------------- ELF, ldd, dpkg

def elf_needed(path):
    """DT_NEEDED sonames of an ELF file, read from its .dynamic section."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        raise ValueError("%s is not an ELF file" % path)
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
        sh_fmt, dyn_fmt = end + "IIQQQQIIQQ", end + "qQ"
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
        sh_fmt, dyn_fmt = end + "IIIIIIIIII", end + "iI"
    sections = [struct.unpack_from(sh_fmt, data, shoff + i * shentsize) for i in range(shnum)]
    needed = []
    for sh in sections:
        sh_type, sh_offset, sh_size, sh_link = sh[1], sh[4], sh[5], sh[6]
        if sh_type != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[sh_link]
        str_off = strtab[4]
        step = struct.calcsize(dyn_fmt)
        for off in range(sh_offset, sh_offset + sh_size, step):
            tag, val = struct.unpack_from(dyn_fmt, data, off)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                s = data[str_off + val:data.index(b"\0", str_off + val)]
                needed.append(s.decode())
    return needed


def ldd(path):
    """{soname or path: resolved path} for every library ldd lists; fails on 'not found'."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=TIMEOUT)
    if out.returncode != 0:
        raise AssertionError("ldd %s failed: %s" % (path, out.stderr.strip() or out.stdout))
    libs = {}
    for line in out.stdout.splitlines():
        line = line.strip()
        m = re.match(r"(\S+) => (not found|\S+)", line)
        if m:
            if m.group(2) == "not found":
                raise AssertionError("ldd: %s not found" % m.group(1))
            libs[m.group(1)] = m.group(2)
            continue
        m = re.match(r"(/\S+) \(0x", line)  # the dynamic loader
        if m:
            libs[os.path.basename(m.group(1))] = m.group(1)
    return libs


def dpkg_owner(path):
    """Debian package (without :arch) that ships path, trying the /usr-merged aliases."""
    cands = [path, os.path.realpath(path)]
    for p in list(cands):
        if p.startswith("/usr/lib/"):
            cands.append(p[len("/usr"):])
        elif p.startswith("/lib/"):
            cands.append("/usr" + p)
    for p in cands:
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True, timeout=TIMEOUT)
        if r.returncode == 0:
            for line in r.stdout.splitlines():
                pkgs, _, owned = line.partition(": ")
                if owned.strip() == p and "diversion" not in pkgs:
                    return pkgs.split(",")[0].strip().split(":")[0]
    raise AssertionError("dpkg -S: no package ships %s" % path)


def depends_closure(pkgs):
    """The installed packages pkgs depend on (Depends, Pre-Depends), transitively."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Depends}, ${Pre-Depends}", p],
                           capture_output=True, text=True, timeout=TIMEOUT)
        if r.returncode != 0:
            continue
        for clause in r.stdout.split(","):
            for alt in clause.split("|"):
                name = re.sub(r"\(.*?\)", "", alt).strip().split(":")[0]
                if not name:
                    continue
                inst = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", name],
                                      capture_output=True, text=True, timeout=TIMEOUT)
                if inst.returncode == 0 and "install ok installed" in inst.stdout:
                    todo.append(name)
                    break
    return seen


def partial_build():
    """True when meson built gpuscaler with a stub subcommand (a module is missing)."""
    build = os.environ.get("GPUSCALER_BUILD")
    if not build:
        return False
    try:
        with open(os.path.join(build, "meson-info", "intro-targets.json"), encoding="utf-8") as f:
            targets = json.load(f)
    except (OSError, ValueError):
        return False
    for t in targets:
        if t.get("name") == "gpuscaler" and t.get("type") == "executable":
            for src in t.get("target_sources", []):
                if any(s.endswith("-stub.c") for s in src.get("sources", [])):
                    return True
    return False


# ---------------------------------------------------------------- tests

class DockerfileTest(unittest.TestCase):
    """The Dockerfile's shape, read as text."""

    @classmethod
    def setUpClass(cls):
        cls.lines = read_dockerfile()
        cls.stages = stages(cls.lines)

    def test_two_debian_stages(self):
        images = [s[0] for s in self.stages]
        self.assertEqual(images, ["debian:12", "debian:12-slim"],
                         "want a debian:12 build stage and a debian:12-slim runtime stage")

    def test_build_stage_runs_meson_release(self):
        run = " ".join(ln for ln in self.stages[0][2] if ln.upper().startswith("RUN"))
        for dep in ["build-essential", "meson", "ninja-build", "pkg-config", "libuv1-dev",
                    "libcurl4-openssl-dev", "libjansson-dev", "libyaml-dev", "libssl-dev",
                    "zlib1g-dev", "node-llhttp"]:
            self.assertRegex(run, r"(^|\s)%s(\s|$)" % re.escape(dep), "build dep %s" % dep)
        self.assertIn("meson setup build -Dtests=disabled --buildtype=release", run)
        self.assertIn("ninja -C build", run)

    def test_runtime_stage(self):
        image, _, instr = self.stages[-1]
        copies = [ln for ln in instr if ln.upper().startswith("COPY")]
        self.assertTrue(any("--from=build" in c and c.endswith("/usr/local/bin/gpuscaler")
                            for c in copies), copies)
        users = [ln.split(None, 1)[1] for ln in instr if ln.upper().startswith("USER ")]
        self.assertEqual(len(users), 1, "one USER in the runtime stage")
        m = re.fullmatch(r"(\d+)(?::(\d+))?", users[0])
        self.assertIsNotNone(m, "USER must be numeric uid[:gid], got %r" % users[0])
        self.assertNotEqual(int(m.group(1)), 0, "USER must not be root")
        if m.group(2) is not None:
            self.assertNotEqual(int(m.group(2)), 0, "group must not be root")
        ep = [ln for ln in instr if ln.upper().startswith("ENTRYPOINT")]
        self.assertEqual(len(ep), 1)
        self.assertEqual(json.loads(ep[0].split(None, 1)[1]), ["gpuscaler"])
        cmd = [ln for ln in instr if ln.upper().startswith("CMD")]
        self.assertEqual(len(cmd), 1)
        self.assertEqual(json.loads(cmd[0].split(None, 1)[1]), ["run"])

    def test_runtime_installs_exactly_the_listed_packages(self):
        instr = self.stages[-1][2]
        libs = arg_value(instr, "RUNTIME_PACKAGES")
        data = arg_value(instr, "RUNTIME_DATA_PACKAGES")
        self.assertTrue(libs, "ARG RUNTIME_PACKAGES in the runtime stage")
        self.assertEqual(data, "ca-certificates")
        runs = " ".join(ln for ln in instr if ln.upper().startswith("RUN"))
        m = re.search(r"apt-get install ([^&;]*)", runs)
        self.assertIsNotNone(m, "runtime stage runs apt-get install")
        args = [a for a in m.group(1).split() if not a.startswith("-")]
        self.assertEqual(args, ["${RUNTIME_PACKAGES}", "${RUNTIME_DATA_PACKAGES}"],
                         "the runtime apt-get install must take only the two ARG lists")
        self.assertIn("--no-install-recommends", m.group(1))
        self.assertNotRegex(runs, r"-dev(\s|$)", "no -dev package in the runtime stage")


class BinaryPackagesTest(unittest.TestCase):
    """RUNTIME_PACKAGES against the libraries the built binary really needs."""

    @classmethod
    def setUpClass(cls):
        cls.bin = os.environ.get("GPUSCALER_BIN")
        if not cls.bin or not os.path.isfile(cls.bin):
            raise unittest.SkipTest("GPUSCALER_BIN is not set to a built gpuscaler binary: "
                                    "skipping the ldd/dpkg checks")
        for tool in ("ldd", "dpkg", "dpkg-query"):
            if not shutil.which(tool):
                raise unittest.SkipTest("%s is not installed: skipping the ldd/dpkg checks" % tool)
        st = stages(read_dockerfile())
        cls.declared = set(arg_value(st[-1][2], "RUNTIME_PACKAGES").split())
        cls.needed = elf_needed(cls.bin)
        cls.resolved = ldd(cls.bin)
        cls.direct = {}
        for soname in cls.needed:
            if soname not in cls.resolved:
                raise AssertionError("ldd did not resolve NEEDED %s" % soname)
            cls.direct[soname] = dpkg_owner(cls.resolved[soname])
        cls.derived = {p for p in cls.direct.values() if p not in DEBIAN_12_SLIM_PACKAGES}
        print("\n  NEEDED -> package: %s" % ", ".join(
            "%s->%s" % kv for kv in sorted(cls.direct.items())), file=sys.stderr)
        print("  derived runtime packages: %s" % (" ".join(sorted(cls.derived)) or "(none)"),
              file=sys.stderr)

    def test_declared_covers_needed(self):
        missing = self.derived - self.declared
        self.assertFalse(missing, "binary links libraries from %s, not in RUNTIME_PACKAGES"
                         % sorted(missing))

    def test_declared_equals_needed(self):
        extra = self.declared - self.derived
        if extra and partial_build():
            self.skipTest("partial build (a stub subcommand is linked), so %s are not linked "
                          "yet; checked only that RUNTIME_PACKAGES covers what is linked"
                          % sorted(extra))
        self.assertEqual(self.declared, self.derived,
                         "RUNTIME_PACKAGES must equal the packages of the linked libraries")

    def test_transitive_libraries_come_with_declared_packages(self):
        closure = depends_closure(self.derived | DEBIAN_12_SLIM_PACKAGES)
        stray = {}
        for name, path in self.resolved.items():
            if name == "linux-vdso.so.1":
                continue
            pkg = dpkg_owner(path)
            if pkg not in closure:
                stray[name] = pkg
        self.assertFalse(stray, "libraries not brought in by RUNTIME_PACKAGES or the base: %s"
                         % stray)

    def test_zlib_linked_and_provided(self):
        """The binary links zlib (gzip traces); its package comes with the base image,
        so the runtime stage needs no install of it."""
        libz = [n for n in self.needed if n.startswith("libz.so")]
        self.assertEqual(libz, ["libz.so.1"], self.needed)
        self.assertEqual(self.direct["libz.so.1"], "zlib1g")
        self.assertIn("zlib1g", DEBIAN_12_SLIM_PACKAGES)
        self.assertNotIn("zlib1g", self.derived)

    def test_version_runs(self):
        r = subprocess.run([self.bin, "version"], capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^gpuscaler \S+")


def main():
    if not os.path.isfile(DOCKERFILE):
        print("no Dockerfile at %s" % DOCKERFILE)
        print("0 passed, 1 failed")
        return 1
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import testsummary
    return testsummary.run()


if __name__ == "__main__":
    sys.exit(main())

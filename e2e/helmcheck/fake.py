# SPDX-License-Identifier: Apache-2.0
"""Apply manifests to a fresh fake API server (e2e/fakekube) and read each object back.

Every object's resource is found through the server's discovery documents by apiVersion and
kind, so an object of a kind the server does not serve is an error unless its kind is listed
in helmcheck.NOT_SERVED_KINDS (other projects' CRDs), in which case it is reported as skipped.
Each read-back object must contain everything that was sent (the server may add defaults and
metadata, but may not drop or change a field).
"""

import sys

from . import E2E, NOT_SERVED_KINDS, ident

if E2E not in sys.path:
    sys.path.insert(0, E2E)

from fakekube import harness, kubeclient  # noqa: E402

START_TIMEOUT = 20.0


class Report:
    def __init__(self):
        self.applied = []   # ident of every object created and read back
        self.skipped = []   # "apiVersion kind" of objects of not-served kinds
        self.errors = []


def subset_diff(sent, got, path=""):
    """Where got lacks or changes something of sent (None when sent is contained in got)."""
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return "%s: sent a mapping, read back %r" % (path or ".", got)
        for k, v in sent.items():
            if k not in got:
                return "%s.%s: dropped" % (path, k)
            d = subset_diff(v, got[k], "%s.%s" % (path, k))
            if d:
                return d
        return None
    if isinstance(sent, list):
        if not isinstance(got, list) or len(got) != len(sent):
            return "%s: sent %r, read back %r" % (path, sent, got)
        for i, (a, b) in enumerate(zip(sent, got)):
            d = subset_diff(a, b, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    if sent != got:
        return "%s: sent %r, read back %r" % (path, sent, got)
    return None


class _Discovery:
    """(apiVersion, kind) -> "group/version/plural" and whether it is namespaced."""

    def __init__(self, client):
        self.client = client
        self.cache = {}

    def lookup(self, api_version, kind):
        if api_version not in self.cache:
            base = "/api/v1" if api_version == "v1" else "/apis/" + api_version
            try:
                rl = self.client.request("GET", base)
            except kubeclient.ApiError as e:
                if e.code != 404:
                    raise
                rl = {"resources": []}
            self.cache[api_version] = {r["kind"]: (r["name"], r["namespaced"])
                                       for r in rl.get("resources", []) if "/" not in r["name"]}
        found = self.cache[api_version].get(kind)
        if not found:
            return None
        plural, namespaced = found
        group, _, version = api_version.rpartition("/")
        return "%s/%s/%s" % (group, version, plural) if group else "%s/%s" % (version, plural), \
            namespaced


def apply_and_read_back(objs, default_namespace="default"):
    """Create objs (namespaces first) in a new fakekube, GET each back; returns a Report."""
    rep = Report()
    fk = harness.start(tls=False, ready_timeout=START_TIMEOUT)
    try:
        c = fk.client(timeout=10)
        disc = _Discovery(c)
        todo = []
        for o in objs:
            found = disc.lookup(o["apiVersion"], o["kind"])
            if found is None:
                if (o["apiVersion"], o["kind"]) in NOT_SERVED_KINDS:
                    rep.skipped.append("%s %s" % (o["apiVersion"], o["kind"]))
                else:
                    rep.errors.append("%s: %s is not served by the fake API server"
                                      % (ident(o), o["apiVersion"]))
                continue
            todo.append((o, found[0], found[1]))
        # Namespaces first: the ones in the manifests, then any other one referenced.
        todo.sort(key=lambda t: t[0]["kind"] != "Namespace")
        created_ns = {o["metadata"]["name"] for o, _, _ in todo if o["kind"] == "Namespace"}
        wanted_ns = {(o["metadata"].get("namespace") or default_namespace)
                     for o, _, namespaced in todo if namespaced}
        for ns in sorted(wanted_ns - created_ns):
            if c.get_or_none("namespaces", ns) is None:
                c.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": ns}})
        for o, resource, namespaced in todo:
            ns = (o["metadata"].get("namespace") or default_namespace) if namespaced else None
            name = o["metadata"]["name"]
            try:
                c.create(resource, o, namespace=ns)
                got = c.get(resource, name, namespace=ns)
            except kubeclient.ApiError as e:
                rep.errors.append("%s: %s %s" % (ident(o), e.code, (e.status or {}).get(
                    "message", e.body[:300].decode("utf-8", "replace"))))
                continue
            d = subset_diff(o, got)
            if d:
                rep.errors.append("%s: read back differs at %s" % (ident(o), d))
                continue
            rep.applied.append(ident(o))
        c.close()
    except Exception as e:  # report, with the server's log, instead of a bare traceback
        rep.errors.append("fakekube: %s: %s\n%s" % (type(e).__name__, e, fk.log()[-2000:]))
    finally:
        fk.stop()
    return rep


if __name__ == "__main__":
    # Manual use: python3 -m helmcheck.fake FILE.yaml...
    from . import load_file_docs
    docs = [d for f in sys.argv[1:] for d in load_file_docs(f)]
    r = apply_and_read_back(docs)
    print("applied %d, skipped %s, errors:\n%s" % (len(r.applied), r.skipped,
                                                  "\n".join(r.errors) or "none"))
    sys.exit(1 if r.errors else 0)

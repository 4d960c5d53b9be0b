# SPDX-License-Identifier: Apache-2.0
"""The three PATCH formats of the Kubernetes API: JSON merge patch (RFC 7386), JSON patch
(RFC 6902) and a strategic merge patch that merges the lists Kubernetes merges by key.

All functions take and return plain JSON values and never modify their inputs.  Errors raise
PatchError (the server maps them to 422 or 400 as kube-apiserver does).
"""

import copy


class PatchError(ValueError):
    """The patch could not be applied."""

    def __init__(self, message, code=422):
        super().__init__(message)
        self.code = code


def merge_patch(target, patch):
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# List fields merged by key in strategic merge patch (field name -> merge key).  The Kubernetes
# types declare these with patchStrategy:"merge" patchMergeKey:"..."; this covers the ones the
# workloads we handle use.  None means a list of scalars merged as a set.
_SMP_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "conditions": "type",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "finalizers": None,
}


def _smp_ports_key(items):
    for it in items:
        if isinstance(it, dict) and "containerPort" in it:
            return "containerPort"
    return "port"


def strategic_merge_patch(target, patch, field=None):
    """Strategic merge patch, with the directives $patch (replace/delete/merge),
    $deleteFromPrimitiveList/<field>, $setElementOrder/<field> (ignored) and $retainKeys
    (ignored)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            if isinstance(result.get(name), list) and isinstance(v, list):
                result[name] = [x for x in result[name] if x not in v]
            continue
        if v is None:
            result.pop(k, None)
            continue
        cur = result.get(k)
        if isinstance(v, list) and isinstance(cur, list) and (k in _SMP_KEYS or k == "ports"):
            key = _SMP_KEYS.get(k) if k != "ports" else _smp_ports_key(cur + v)
            result[k] = _smp_list(cur, v, key)
        elif isinstance(v, dict):
            merged = strategic_merge_patch(cur, v, k)
            if merged is None:
                result.pop(k, None)
            else:
                result[k] = merged
        else:
            result[k] = copy.deepcopy(v)
    return result


def _smp_list(cur, patch, key):
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    if key is None:
        out = list(cur)
        for p in patch:
            if p not in out:
                out.append(copy.deepcopy(p))
        return out
    out = [copy.deepcopy(c) for c in cur]
    for p in patch:
        if not isinstance(p, dict) or key not in p:
            out.append(copy.deepcopy(p))
            continue
        idx = next((i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == p[key]),
                   None)
        if p.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append({kk: copy.deepcopy(vv) for kk, vv in p.items() if kk != "$patch"})
        else:
            out[idx] = strategic_merge_patch(out[idx], p)
    return out


# ---------------------------------------------------------------- RFC 6902

def _unescape(tok):
    return tok.replace("~1", "/").replace("~0", "~")


def _split_pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("JSON pointer %r must start with /" % path)
    return [_unescape(t) for t in path[1:].split("/")]


def _resolve_parent(doc, tokens, op):
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError("doc is missing path: \"/%s\": missing value" % "/".join(tokens))
            cur = cur[t]
        elif isinstance(cur, list):
            try:
                i = int(t)
            except ValueError:
                raise PatchError("invalid array index %r in %s" % (t, op))
            if i < 0 or i >= len(cur):
                raise PatchError("doc is missing path: \"/%s\": missing value" % "/".join(tokens))
            cur = cur[i]
        else:
            raise PatchError("doc is missing path: \"/%s\": missing value" % "/".join(tokens))
    return cur


def _get(doc, tokens):
    cur = doc
    for t in tokens:
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list):
            try:
                cur = cur[int(t)]
            except (ValueError, IndexError):
                raise PatchError("doc is missing path: \"/%s\"" % "/".join(tokens))
        else:
            raise PatchError("doc is missing path: \"/%s\"" % "/".join(tokens))
    return cur


def _add(doc, tokens, value, replace=False):
    if not tokens:
        return value
    parent = _resolve_parent(doc, tokens, "add")
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError("replace operation does not apply: doc is missing key: /%s: missing "
                             "value" % "/".join(tokens))
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
            return doc
        try:
            i = int(last)
        except ValueError:
            raise PatchError("invalid array index %r" % last)
        if replace:
            if i < 0 or i >= len(parent):
                raise PatchError("replace operation does not apply: doc is missing key: /%s"
                                 % "/".join(tokens))
            parent[i] = value
        else:
            if i < 0 or i > len(parent):
                raise PatchError("add operation does not apply: index out of bounds: %d" % i)
            parent.insert(i, value)
    else:
        raise PatchError("add operation does not apply: doc is missing path: /%s"
                         % "/".join(tokens))
    return doc


def _remove(doc, tokens):
    if not tokens:
        raise PatchError("remove operation does not apply: cannot remove the whole document")
    parent = _resolve_parent(doc, tokens, "remove")
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError("remove operation does not apply: doc is missing path: \"/%s\": "
                             "missing value" % "/".join(tokens))
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            i = int(last)
            return parent.pop(i)
        except (ValueError, IndexError):
            raise PatchError("remove operation does not apply: doc is missing path: \"/%s\""
                             % "/".join(tokens))
    raise PatchError("remove operation does not apply: doc is missing path: \"/%s\""
                     % "/".join(tokens))


def json_patch(target, ops):
    """RFC 6902 JSON patch; ops is the decoded list of operations."""
    if not isinstance(ops, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch",
                         code=400)
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError("Unexpected kind: <nil>")
        kind = op["op"]
        path = op.get("path")
        if not isinstance(path, str):
            raise PatchError("%s operation missing path" % kind)
        tokens = _split_pointer(path)
        if kind == "add":
            if "value" not in op:
                raise PatchError("add operation missing value")
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, tokens)
        elif kind == "replace":
            if "value" not in op:
                raise PatchError("replace operation missing value")
            if not tokens:
                doc = copy.deepcopy(op["value"])
            else:
                doc = _add(doc, tokens, copy.deepcopy(op["value"]), replace=True)
        elif kind in ("move", "copy"):
            src = _split_pointer(op.get("from", ""))
            if kind == "move":
                val = _remove(doc, src)
            else:
                val = copy.deepcopy(_get(doc, src))
            doc = _add(doc, tokens, val)
        elif kind == "test":
            if _get(doc, tokens) != op.get("value"):
                raise PatchError("testing value /%s failed: test failed" % "/".join(tokens))
        else:
            raise PatchError("Unexpected kind: %s" % kind)
    return doc

"""metadata.managedFields, as kube-apiserver's field manager writes them for create, update,
patch and the status and scale subresources (k8s.io/apiserver/pkg/endpoints/handlers/
fieldmanager over sigs.k8s.io/structured-merge-diff, operation "Update"):

- the manager is the request's fieldManager, else the User-Agent up to its first "/"
  (managerOrUserAgent), at most 128 characters;
- an entry per (manager, operation, subresource): apiVersion, time, fieldsType FieldsV1 and
  the fields it owns, as a FieldsV1 tree ("f:<field>", "k:{<keys>}" for an item of a list
  keyed by its fields, "v:<json>" for a member of a set, "." for a map or a list item itself);
- an update gives its manager the fields it added or changed, takes those from the other
  managers, and takes removed fields from everyone; a manager left owning nothing is dropped.
  Fields the server sets (name, namespace, uid, resourceVersion, generation,
  creationTimestamp, deletion fields, managedFields) are not tracked.

The schema knowledge is the few list keys and map fields of the kinds fakekube serves; a
field not named here is a struct field (no ".") or an atomic list (owned whole)."""

import json
import time

# metadata fields the server owns: never in a fields set
_SERVER_META = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink")

# map-typed fields (a "." for the map itself): labels, selectors' matchLabels, resource lists,
# ConfigMap and Secret data
_MAPS = frozenset(("labels", "annotations", "matchLabels", "nodeSelector", "limits", "requests",
                   "data", "binaryData", "stringData", "capacity", "allocatable", "hard", "used",
                   "overhead", "parameters"))

# lists of maps with merge keys (listType=map), by field name: the key fields of an item
_KEYED = {
    "containers": ("name",), "initContainers": ("name",), "ephemeralContainers": ("name",),
    "volumes": ("name",), "env": ("name",), "imagePullSecrets": ("name",),
    "volumeMounts": ("mountPath",), "volumeDevices": ("devicePath",),
    "ports": None, "conditions": ("type",),
    "ownerReferences": ("uid",), "containerStatuses": ("name",),
    "initContainerStatuses": ("name",), "podIPs": ("ip",), "hostIPs": ("ip",),
}

# lists of scalars that are sets (listType=set)
_SETS = frozenset(("finalizers",))

# struct fields that are atomic (structType=atomic): owned whole
_ATOMIC = frozenset(("selector",))


def unmanaged(obj):
    """obj without metadata.managedFields (a copy when it has them)."""
    meta = obj.get("metadata") or {}
    if "managedFields" not in meta:
        return obj
    out = dict(obj)
    out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return out


def manager_of(query, user_agent):
    """The request's manager: ?fieldManager=, else the User-Agent's prefix."""
    m = (query or {}).get("fieldManager") or ""
    if not m:
        m = (user_agent or "").split("/")[0]
    return m[:128]


def _key(item, names, field):
    if field == "ports":  # a container's (containerPort) or a Service's (port)
        names = ("containerPort" if "containerPort" in item else "port", "protocol")
    keys = {}
    for n in names:
        if n in item:
            keys[n] = item[n]
        elif field == "ports" and n == "protocol":
            keys[n] = "TCP"  # defaulted before the fields are computed
    return "k:" + json.dumps(keys, separators=(",", ":"), sort_keys=True)


def _tree(value, field=None, maps=True):
    """The FieldsV1 tree of one field's value; maps: a map itself is a member (an Update's
    object has it; an applied configuration owns only the keys it names)."""
    if isinstance(value, dict) and value and field not in _ATOMIC:
        out = {".": {}} if field in _MAPS and maps else {}
        for k, v in value.items():
            out["f:" + k] = _tree(v, k, maps)
        return out
    if isinstance(value, list) and value and field in _KEYED:
        out = {}
        for item in value:
            if isinstance(item, dict):
                t = _tree(item, None, maps)
                t["."] = {}
                out[_key(item, _KEYED[field], field)] = t
        return out
    if isinstance(value, list) and value and field in _SETS:
        return {"v:" + json.dumps(v, separators=(",", ":")): {} for v in value}
    return {}


def fields_of(obj, maps=True):
    """The FieldsV1 tree of a whole object (stored form), server-owned fields left out."""
    top = {}
    for k, v in obj.items():
        if k in ("apiVersion", "kind"):
            continue
        if k == "metadata" and isinstance(v, dict):
            meta = {f: x for f, x in v.items() if f not in _SERVER_META}
            if meta:
                top["f:metadata"] = _tree(meta, None, maps)
            continue
        top["f:" + k] = _tree(v, k, maps)
    return top


def _paths(tree, prefix=()):
    """The set's members as paths (tuples of path elements): the leaves, and the nodes that
    carry "." (a map, a list item)."""
    out = set()
    for k, sub in tree.items():
        if k == ".":
            out.add(prefix)
            continue
        p = prefix + (k,)
        if not sub:
            out.add(p)
        else:
            out |= _paths(sub, p)
    return out


def _values(obj, tree, prefix=()):
    """Path -> the value at that path of obj (its JSON), for the leaves of tree: what tells a
    changed field from an unchanged one."""
    out = {}
    for k, sub in tree.items():
        if k == ".":
            continue
        p = prefix + (k,)
        if k.startswith("f:") and isinstance(obj, dict):
            v = obj.get(k[2:])
        elif k.startswith("k:") and isinstance(obj, list):
            want = json.loads(k[2:])
            v = next((i for i in obj if isinstance(i, dict) and all(
                i.get(n, "TCP" if n == "protocol" else None) == x for n, x in want.items())),
                None)
        else:
            v = None
        if sub:
            out.update(_values(v, sub, p))
        else:
            out[p] = json.dumps(v, sort_keys=True)
    return out


def _to_tree(paths):
    """The FieldsV1 tree of a set of paths: a member with members below it carries "."."""
    root = {}
    for p in sorted(paths, key=len):  # a node before what is below it
        node = root
        for el in p:
            node = node.setdefault(el, {})
        if p and node == {} and any(len(q) > len(p) and q[:len(p)] == p for q in paths):
            node["."] = {}
    return _sort(root)


def _sort(tree):
    return {k: _sort(tree[k]) for k in sorted(tree, key=lambda k: (k != ".", k))}


def _members(obj):
    """Paths of obj's fields set, with the map and list-item nodes themselves as members."""
    tree = fields_of(obj)
    return _paths(tree), tree


def update(old, new, manager, api_version, subresource=None, now=None, applied=None):
    """Set new["metadata"]["managedFields"] for a write of new over old (None: a create).
    applied: an apply patch's configuration, whose fields its manager then owns (operation
    Apply; conflicts are not modelled: as with force, the others lose what it changed)."""
    meta = new.setdefault("metadata", {})
    entries = [] if old is None else [dict(e) for e in
                                      (old.get("metadata") or {}).get("managedFields") or []]
    old_paths, old_tree = _members(old) if old is not None else (set(), {})
    new_paths, new_tree = _members(new)
    old_vals = _values(old, old_tree) if old is not None else {}
    new_vals = _values(new, new_tree)
    added = new_paths - old_paths
    removed = old_paths - new_paths
    changed = {p for p in new_paths & old_paths
               if p in new_vals and old_vals.get(p) != new_vals[p]}
    took = added | changed
    op = "Apply" if isinstance(applied, dict) else "Update"
    ident = (manager, op, subresource or "")
    mine, kept = set(), []
    for e in entries:
        owned = _paths(e.get("fieldsV1") or {})
        if (e.get("manager"), e.get("operation"), e.get("subresource", "")) == ident:
            mine = owned
            continue
        owned = owned - took - removed
        if owned:
            e["fieldsV1"] = _to_tree(owned)
            kept.append(e)
    if op == "Apply":  # the configuration's fields, whatever it owned before
        mine = _paths(fields_of(applied, maps=False)) & new_paths
    else:
        mine = ((mine - removed) | took) & new_paths
    if mine:
        entry = {"manager": manager, "operation": op, "apiVersion": api_version,
                 "time": now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "fieldsType": "FieldsV1",
                 "fieldsV1": _to_tree(mine)}
        if subresource:
            entry["subresource"] = subresource
        kept.append(entry)
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)

# SPDX-License-Identifier: Apache-2.0
"""The fields of the served kinds' Go types, so that the decoder finds any other, as
kube-apiserver's does, and the fields a body names twice. What becomes of one is the write's
fieldValidation (api.py Api.begin_write): with Warn (the default since 1.25) an unknown field is
dropped from the object and named in a Warning header (`299 - "unknown field \\"spec.x\\""`), a
repeated one keeps its last value (merged into the first where both are objects, as Go decodes
the second into the same struct) and is named too (`duplicate field "spec.paused"`); with Ignore
both pass silently; with Strict the write fails.

The messages are sigs.k8s.io/json's (UnmarshalStrict): a path of field names joined by dots and
list indexes in brackets (`spec.template.spec.containers[0].imagePullPolicy`), each message once,
at most 100. A create or update names them in the order the body has them; a field both unknown
and repeated is named as unknown only. A merge or strategic merge patch names the patch's own
repeated fields first (the patch is decoded as a map, so its unknown fields count too), then the
patched object's unknown fields in the order of its sorted keys (it is marshalled from a Go map
before it is decoded); a JSON patch names its operations' unknown and repeated fields first
(`json patch unknown field "[0].foo"`).

Transcribed from k8s.io/api (ObjectMeta, the kinds' top-level fields, LeaseSpec, DeploymentSpec
and DeploymentStatus, Scale); a value of ANY is not checked further here (the nested types of a
Pod spec are not transcribed), though a field it repeats is found."""

import json

ANY = None

OBJECT_META = {k: ANY for k in (
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields")}

SPEC_STATUS = {"spec": ANY, "status": ANY}

LEASE_SPEC = {k: ANY for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime",
                               "renewTime", "leaseTransitions", "strategy", "preferredHolder")}

CORE_EVENT = {k: ANY for k in (
    "involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
    "type", "eventTime", "series", "action", "related", "reportingComponent",
    "reportingInstance")}

EVENTS_V1_EVENT = {k: ANY for k in (
    "eventTime", "series", "reportingController", "reportingInstance", "action", "reason",
    "regarding", "related", "note", "type", "deprecatedSource", "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp", "deprecatedCount")}

DEPLOYMENT = {
    "spec": {k: ANY for k in ("replicas", "selector", "strategy", "minReadySeconds",
                              "revisionHistoryLimit", "paused", "progressDeadlineSeconds")}
    | {"template": {"metadata": OBJECT_META, "spec": ANY}},
    "status": {k: ANY for k in (
        "observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
        "availableReplicas", "unavailableReplicas", "terminatingReplicas", "conditions",
        "collisionCount")}}

# (group, kind) -> the type's fields besides apiVersion, kind and metadata
KNOWN = {
    ("", "Namespace"): SPEC_STATUS,
    ("", "Pod"): SPEC_STATUS,
    ("", "Event"): CORE_EVENT,
    ("", "ConfigMap"): {"data": ANY, "binaryData": ANY, "immutable": ANY},
    ("", "Secret"): {"data": ANY, "stringData": ANY, "type": ANY, "immutable": ANY},
    ("", "Service"): SPEC_STATUS,
    ("", "ServiceAccount"): {"secrets": ANY, "imagePullSecrets": ANY,
                             "automountServiceAccountToken": ANY},
    ("", "Node"): SPEC_STATUS,
    ("apps", "Deployment"): DEPLOYMENT,
    ("apps", "ReplicaSet"): SPEC_STATUS,
    ("apps", "StatefulSet"): SPEC_STATUS,
    ("autoscaling", "HorizontalPodAutoscaler"): SPEC_STATUS,
    ("autoscaling", "Scale"): {"spec": {"replicas": ANY},
                               "status": {"replicas": ANY, "selector": ANY}},
    ("coordination.k8s.io", "Lease"): {"spec": LEASE_SPEC},
    ("apiregistration.k8s.io", "APIService"): SPEC_STATUS,
    ("rbac.authorization.k8s.io", "ClusterRole"): {"rules": ANY, "aggregationRule": ANY},
    ("rbac.authorization.k8s.io", "Role"): {"rules": ANY},
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): {"subjects": ANY, "roleRef": ANY},
    ("rbac.authorization.k8s.io", "RoleBinding"): {"subjects": ANY, "roleRef": ANY},
    ("policy", "PodDisruptionBudget"): SPEC_STATUS,
    ("events.k8s.io", "Event"): EVENTS_V1_EVENT,
}


def prune(group, kind, obj):
    """Drop the fields of obj (a dict, changed in place) that its kind does not have; return
    their paths ("spec.leaseDurationSecond"), in the order met. Kinds not in KNOWN keep all."""
    top = KNOWN.get((group, kind))
    if top is None:
        return []
    schema = dict(top, apiVersion=ANY, kind=ANY, metadata=OBJECT_META)
    dropped = []
    _walk(obj, schema, "", dropped)
    return dropped


def _walk(obj, schema, prefix, dropped):
    for k in list(obj):
        if k not in schema:
            dropped.append(prefix + k)
            del obj[k]
        elif schema[k] is not ANY and isinstance(obj[k], dict):
            _walk(obj[k], schema[k], prefix + k + ".", dropped)


# ------------------------------------------------------------ the body as decoded

MAX_STRICT_ERRORS = 100     # kube's saveStrictError keeps at most 100


class Obj(dict):
    """A JSON object of a request body: the dict Go's decoder ends with (a repeated key's last
    value, merged into the earlier one where both are objects or lists), and .members, every
    (key, value) in the order the body has them, repeats included."""
    __slots__ = ("members",)


def go_merge(old, new):
    """What Go's decoder leaves when it decodes new into a field that already holds old: an
    object's fields are decoded into the existing struct (merged), a list's elements into the
    existing elements (merged pairwise, then cut to new's length), anything else replaced."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for k, v in new.items():
            out[k] = go_merge(out[k], v) if k in out else v
        return out
    if isinstance(old, list) and isinstance(new, list):
        return [go_merge(old[i], v) if i < len(old) else v for i, v in enumerate(new)]
    return new


def _object(pairs):
    o = Obj()
    for k, v in pairs:
        o[k] = go_merge(o[k], v) if k in o else v
    o.members = pairs
    return o


def loads(text):
    """A request body's JSON, its objects as Obj (raises ValueError as json.loads does)."""
    return json.loads(text, object_pairs_hook=_object)


def plain(v):
    """v with every Obj made a plain dict (what is stored and served)."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def _members(v, sort):
    if sort:
        return sorted(v.items())
    return v.members if isinstance(v, Obj) else list(v.items())


def _strict(v, schema, path, out, sort):
    """Append to out the ("unknown"|"duplicate", path) of v's fields, in document order (sorted
    keys when sort)."""
    if isinstance(v, list):
        for i, e in enumerate(v):
            _strict(e, ANY, "%s[%d]" % (path, i), out, sort)
        return
    if not isinstance(v, dict):
        return
    seen = set()
    for k, x in _members(v, sort):
        p = path + "." + k if path else k
        if schema is not ANY and k not in schema:
            out.append(("unknown", p))
            continue
        if k in seen:
            out.append(("duplicate", p))
        seen.add(k)
        _strict(x, ANY if schema is ANY else schema[k], p, out, sort)


def _schema(group, kind):
    top = KNOWN.get((group, kind))
    return ANY if top is None else dict(top, apiVersion=ANY, kind=ANY, metadata=OBJECT_META)


def _messages(found, prefix=""):
    out = []
    for what, p in found:
        m = '%s%s field "%s"' % (prefix, what, p)
        if m not in out and len(out) < MAX_STRICT_ERRORS:
            out.append(m)
    return out


def strict_errors(group, kind, body):
    """The strict decoding errors of a create's or update's body (an Obj from loads, or a
    plain dict) as kind: its unknown and repeated fields, in the order the body has them."""
    found = []
    _strict(body, _schema(group, kind), "", found, False)
    return _messages(found)


def patched_unknown(group, kind, obj):
    """The unknown fields of a patched object, in the order of its sorted keys."""
    found = []
    _strict(obj, _schema(group, kind), "", found, True)
    return _messages(found)


def patch_duplicates(patch):
    """The repeated fields of a merge or strategic merge patch's body (an Obj tree)."""
    found = []
    _strict(patch, ANY, "", found, False)
    return _messages(found)


JSON_PATCH_OP = {"op": ANY, "path": ANY, "from": ANY, "value": ANY}


def json_patch_errors(ops):
    """The unknown and repeated fields of a JSON patch's operations (an Obj tree: a list of
    operations; anything else has none), prefixed "json patch " as patch.go prefixes them."""
    found = []
    if isinstance(ops, list):
        for i, op in enumerate(ops):
            if isinstance(op, dict):
                _strict(op, JSON_PATCH_OP, "[%d]" % i, found, False)
    return _messages(found, "json patch ")

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

A value of the wrong type (a string for an int32, a number for a map's string) fails the write
whatever the directive, with the decoder's UnmarshalTypeError (type_error below), and a null
becomes what Go keeps (prune). A strategic merge patch's result is converted from a map instead
(convert_error below: other rules, other messages), in the order of the Go type's fields, which
the structs below list in that order.

Transcribed from k8s.io/api (ObjectMeta, the kinds' top-level fields, LeaseSpec, DeploymentSpec
and DeploymentStatus, Scale, the Events, LabelSelector, ObjectReference), with the types of
their scalar, map and list fields; of other nested types (a pod spec, its containers, a
Service's spec) only the fields the fake itself reads, as open structs: their types are
checked, and no other field of theirs is taken for unknown. A value of ANY is not checked
further, though a field it repeats is found. Times (TIME, MICRO_TIME) are parsed as Go parses
them (gotime.py), and stored as metav1 encodes them."""

import json
import math

from . import gotime
from .goparse import json_kind as _json_kind
from .validation import go_base64_error

ANY = None      # a field whose type is not transcribed: neither checked nor pruned below it


class GoType:
    """The Go type of a field: go, its name as Go prints it in an UnmarshalTypeError; kind, how
    JSON decodes into it (string, int, bool, map, slice, bytes); bits of an int; elem of a map
    or slice."""

    def __init__(self, go, kind, bits=0, elem=None):
        self.go, self.kind, self.bits, self.elem = go, kind, bits, elem


class Struct(dict):
    """A transcribed Go struct: its JSON field names -> GoType, Struct or ANY; .name the Go
    type's name, as an UnmarshalTypeError names the struct holding the field, .go as it names
    its type (package.Name). An open one lists only some of its fields, those the fake reads:
    their types are checked, and no field is taken for unknown."""
    __slots__ = ("name", "go", "open")

    def __init__(self, name, fields, pkg="v1", open=False):
        super().__init__(fields)
        self.name, self.go, self.open = name, pkg + "." + name, open


STR = GoType("string", "string")
INT32 = GoType("int32", "int", 32)
INT64 = GoType("int64", "int", 64)
BOOL = GoType("bool", "bool")
MAP_STR = GoType("map[string]string", "map", elem=STR)
MAP_BYTES = GoType("map[string][]uint8", "map", elem=GoType("[]uint8", "bytes"))
LIST_STR = GoType("[]string", "slice", elem=STR)


def _struct(go_name, /, **fields):
    return Struct(go_name, fields)


def _open(go_name, /, pkg="v1", **fields):
    return Struct(go_name, fields, pkg=pkg, open=True)


def _list_of(st):
    return GoType("[]" + st.go, "slice", elem=st)


# times decode through their own UnmarshalJSON: a JSON string that time.Parse takes with the
# layout (gotime.py), or null; a failure ends the decoding at once (time_error below)
TIME = GoType("v1.Time", "time")
MICRO_TIME = GoType("v1.MicroTime", "microtime")
LAYOUTS = {"time": gotime.RFC3339, "microtime": gotime.RFC3339_MICRO}

OBJECT_META = _struct(
    "ObjectMeta", name=STR, generateName=STR, namespace=STR, selfLink=STR, uid=STR,
    resourceVersion=STR, generation=INT64, creationTimestamp=TIME, deletionTimestamp=TIME,
    deletionGracePeriodSeconds=INT64, labels=MAP_STR, annotations=MAP_STR,
    ownerReferences=ANY, finalizers=LIST_STR, managedFields=ANY)


def _spec_status(kind, spec=ANY):
    return _struct(kind, spec=spec, status=ANY)


# the nested types the fake reads (validation.py, resources.py), open: only those fields
LABEL_SELECTOR = _struct(
    "LabelSelector", matchLabels=MAP_STR,
    matchExpressions=_list_of(_struct("LabelSelectorRequirement", key=STR,
                                      operator=GoType("v1.LabelSelectorOperator", "string"),
                                      values=LIST_STR)))
PROTOCOL = GoType("v1.Protocol", "string")
CONTAINER = _open("Container", name=STR, image=STR,
                  ports=_list_of(_open("ContainerPort", name=STR, hostPort=INT32,
                                       containerPort=INT32, protocol=PROTOCOL, hostIP=STR)))
POD_SPEC = _open("PodSpec", initContainers=_list_of(CONTAINER), containers=_list_of(CONTAINER),
                 restartPolicy=GoType("v1.RestartPolicy", "string"), serviceAccountName=STR,
                 nodeName=STR)
OBJECT_REFERENCE = _struct("ObjectReference", kind=STR, namespace=STR, name=STR,
                           uid=GoType("types.UID", "string"), apiVersion=STR,
                           resourceVersion=STR, fieldPath=STR)


LEASE_SPEC = _struct("LeaseSpec", holderIdentity=STR, leaseDurationSeconds=INT32,
                     acquireTime=MICRO_TIME, renewTime=MICRO_TIME, leaseTransitions=INT32,
                     strategy=GoType("v1.CoordinatedLeaseStrategy", "string"),
                     preferredHolder=STR)

EVENT_SERIES = _struct("EventSeries", count=INT32, lastObservedTime=MICRO_TIME)

CORE_EVENT = _struct(
    "Event", involvedObject=OBJECT_REFERENCE, reason=STR, message=STR,
    source=_struct("EventSource", component=STR, host=STR), firstTimestamp=TIME,
    lastTimestamp=TIME, count=INT32, type=STR, eventTime=MICRO_TIME, series=EVENT_SERIES,
    action=STR, related=ANY, reportingComponent=STR, reportingInstance=STR)

EVENTS_V1_EVENT = _struct(
    "Event", eventTime=MICRO_TIME, series=EVENT_SERIES, reportingController=STR,
    reportingInstance=STR, action=STR, reason=STR, regarding=OBJECT_REFERENCE, related=ANY,
    note=STR, type=STR, deprecatedSource=ANY, deprecatedFirstTimestamp=TIME,
    deprecatedLastTimestamp=TIME, deprecatedCount=INT32)

DEPLOYMENT = _struct(
    "Deployment",
    spec=_struct("DeploymentSpec", replicas=INT32, selector=LABEL_SELECTOR,
                 template=_struct("PodTemplateSpec", metadata=OBJECT_META, spec=POD_SPEC),
                 strategy=_open("DeploymentStrategy",
                                type=GoType("v1.DeploymentStrategyType", "string")),
                 minReadySeconds=INT32, revisionHistoryLimit=INT32, paused=BOOL,
                 progressDeadlineSeconds=INT32),
    status=_struct("DeploymentStatus", observedGeneration=INT64, replicas=INT32,
                   updatedReplicas=INT32, readyReplicas=INT32, availableReplicas=INT32,
                   unavailableReplicas=INT32, terminatingReplicas=INT32, conditions=ANY,
                   collisionCount=INT32))

# (group, kind) -> the type's fields besides apiVersion, kind and metadata
KNOWN = {
    ("", "Namespace"): _spec_status("Namespace"),
    ("", "Pod"): _spec_status("Pod", POD_SPEC),
    ("", "Event"): CORE_EVENT,
    ("", "ConfigMap"): _struct("ConfigMap", immutable=BOOL, data=MAP_STR, binaryData=MAP_BYTES),
    ("", "Secret"): _struct("Secret", immutable=BOOL, data=MAP_BYTES, stringData=MAP_STR,
                            type=GoType("v1.SecretType", "string")),
    ("", "Service"): _spec_status("Service", _open(
        "ServiceSpec",
        ports=_list_of(_open("ServicePort", name=STR, protocol=PROTOCOL, appProtocol=STR,
                             port=INT32, targetPort=ANY, nodePort=INT32)),
        selector=MAP_STR, clusterIP=STR, clusterIPs=LIST_STR,
        type=GoType("v1.ServiceType", "string"))),
    ("", "ServiceAccount"): _struct("ServiceAccount", secrets=ANY, imagePullSecrets=ANY,
                                    automountServiceAccountToken=BOOL),
    ("", "Node"): _spec_status("Node"),
    ("apps", "Deployment"): DEPLOYMENT,
    ("apps", "ReplicaSet"): _spec_status("ReplicaSet", _open(
        "ReplicaSetSpec", replicas=INT32, selector=LABEL_SELECTOR,
        template=_struct("PodTemplateSpec", metadata=OBJECT_META, spec=POD_SPEC))),
    ("apps", "StatefulSet"): _spec_status("StatefulSet", _open(
        "StatefulSetSpec", replicas=INT32, selector=LABEL_SELECTOR,
        template=_struct("PodTemplateSpec", metadata=OBJECT_META, spec=POD_SPEC),
        updateStrategy=_open("StatefulSetUpdateStrategy",
                             type=GoType("v1.StatefulSetUpdateStrategyType", "string")))),
    ("autoscaling", "HorizontalPodAutoscaler"): _spec_status("HorizontalPodAutoscaler", _open(
        "HorizontalPodAutoscalerSpec", pkg="v2",
        scaleTargetRef=_struct("CrossVersionObjectReference", kind=STR, name=STR,
                               apiVersion=STR),
        minReplicas=INT32, maxReplicas=INT32,
        metrics=GoType("[]v2.MetricSpec", "slice", elem=_open(
            "MetricSpec", pkg="v2", type=GoType("v2.MetricSourceType", "string"))))),
    ("autoscaling", "Scale"): _struct("Scale", spec=_struct("ScaleSpec", replicas=INT32),
                                      status=_struct("ScaleStatus", replicas=INT32,
                                                     selector=STR)),
    ("coordination.k8s.io", "Lease"): _struct("Lease", spec=LEASE_SPEC),
    ("apiregistration.k8s.io", "APIService"): _spec_status("APIService", _open(
        "APIServiceSpec",
        service=_struct("ServiceReference", namespace=STR, name=STR, port=INT32),
        group=STR, version=STR, insecureSkipTLSVerify=BOOL, groupPriorityMinimum=INT32,
        versionPriority=INT32)),
    ("rbac.authorization.k8s.io", "ClusterRole"): _struct("ClusterRole", rules=ANY,
                                                          aggregationRule=ANY),
    ("rbac.authorization.k8s.io", "Role"): _struct("Role", rules=ANY),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _struct("ClusterRoleBinding",
                                                                 subjects=ANY, roleRef=ANY),
    ("rbac.authorization.k8s.io", "RoleBinding"): _struct("RoleBinding", subjects=ANY,
                                                          roleRef=ANY),
    ("policy", "PodDisruptionBudget"): _spec_status("PodDisruptionBudget", _open(
        "PodDisruptionBudgetSpec", minAvailable=ANY, selector=LABEL_SELECTOR,
        maxUnavailable=ANY)),
    ("events.k8s.io", "Event"): EVENTS_V1_EVENT,
}


def _schema(group, kind):
    top = KNOWN.get((group, kind))
    if top is None:
        return ANY
    # Go's order: TypeMeta (inline), ObjectMeta, then the kind's own fields
    return Struct(top.name, dict(kind=ANY, apiVersion=ANY, metadata=OBJECT_META, **top))


def prune(group, kind, obj):
    """Drop the fields of obj (a dict, changed in place) that its kind does not have, and make
    a null in a typed field what Go's decoder leaves (an absent field; an empty string as a
    map's or list's string element). A typed map's keys are sorted: the API server encodes a
    Go map, whose keys encoding/json writes in sorted order, whatever order the body had (the
    store sorts every kind's labels and annotations). Kinds not in KNOWN keep all."""
    schema = _schema(group, kind)
    if schema is not ANY:
        _walk(obj, schema)


def _elem_struct(t):
    """The Struct of a list of structs' elements, else None."""
    if isinstance(t, GoType) and t.kind == "slice" and isinstance(t.elem, Struct):
        return t.elem
    return None


def _walk(obj, schema):
    for k in list(obj):
        t = schema.get(k, False)
        if t is False:
            if not schema.open:
                del obj[k]
        elif t is ANY:
            continue
        elif obj[k] is None:
            del obj[k]      # nil pointer, map or slice; a primitive keeps its zero value
        elif isinstance(t, Struct):
            if isinstance(obj[k], dict):
                _walk(obj[k], t)
        elif _elem_struct(t) and isinstance(obj[k], list):
            for i, e in enumerate(obj[k]):
                if e is None:
                    obj[k][i] = {}      # a struct element: its zero value
                elif isinstance(e, dict):
                    _walk(e, t.elem)
        elif t.kind in LAYOUTS:
            # encoded again as metav1 encodes it: UTC, at whole seconds (Time) or with six
            # digits (MicroTime); the zero time is dropped (the API server shows it as null)
            instant = gotime.parse(LAYOUTS[t.kind], obj[k])[0] \
                if isinstance(obj[k], str) else None
            if instant is None or gotime.is_zero(instant):
                del obj[k]
            else:
                obj[k] = gotime.format_utc(instant, micro=t.kind == "microtime")
        elif t.kind in ("map", "slice") and t.elem.kind == "string":
            v = obj[k]
            for i in (v if isinstance(v, dict) else range(len(v)) if isinstance(v, list)
                      else ()):
                if v[i] is None:
                    v[i] = ""
        if k in obj and isinstance(t, GoType) and t.kind == "map" and isinstance(obj[k], dict):
            obj[k] = dict(sorted(obj[k].items()))   # encoding/json sorts a map's keys


# ------------------------------------------------------------ types, as Go's decoder checks them

class LitFloat(float):
    """A JSON number that is not an integer, with .lit its text as the body had it."""


def _lit_float(text):
    f = LitFloat(text)
    f.lit = text
    return f


def _type_error(v, t, struct, path):
    """Go's UnmarshalTypeError for v decoded into a field of type t (go name), or None."""
    if v is None:
        return None
    if isinstance(t, Struct):
        ok, go = isinstance(v, dict), t.go
    elif t.kind in LAYOUTS:
        return None     # time_error's
    else:
        go = t.go
        if t.kind == "int" and isinstance(v, (int, float)) and not isinstance(v, bool):
            lim = 1 << (t.bits - 1)
            if isinstance(v, float) or not -lim <= v < lim:
                return ("json: cannot unmarshal number %s into Go struct field %s.%s of type %s"
                        % (getattr(v, "lit", repr(v)), struct, path, go))
            return None
        if t.kind == "bytes" and isinstance(v, list):
            # a []byte also decodes from an array of numbers, each a uint8
            for e in v:
                if e is None:
                    continue
                if isinstance(e, bool) or not isinstance(e, (int, float)):
                    return ("json: cannot unmarshal %s into Go struct field %s.%s of type "
                            "uint8" % (_json_kind(e), struct, path))
                if not (isinstance(e, int) and 0 <= e < 256):
                    return ("json: cannot unmarshal number %s into Go struct field %s.%s of "
                            "type uint8" % (getattr(e, "lit", repr(e)), struct, path))
            return None
        ok = {"string": isinstance(v, str), "int": False, "bool": isinstance(v, bool),
              "map": isinstance(v, dict), "slice": isinstance(v, list),
              "bytes": isinstance(v, str)}[t.kind]
    if ok:
        return None
    return ("json: cannot unmarshal %s into Go struct field %s.%s of type %s"
            % (_json_kind(v), struct, path, go))


def type_error(group, kind, body, sort=False):
    """The error of body decoded as kind (in the order the body has its fields, or in sorted
    order for a patched object), as sigs.k8s.io/json reports it, or None when it decodes. A
    time that does not parse ends the decoding where it is, so the first one is the error (its
    UnmarshalJSON's, unwrapped: `parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse
    "x" as "2006"`); else the first value of the wrong type, which the decoder notes and goes
    on: "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type
    int32" (the struct holding the field, the path of field names from the object's root; a
    map's key or a list's index is not in it)."""
    schema = _schema(group, kind)
    if schema is ANY:
        return None
    return _times(body, schema, sort) or _types(body, schema, "", sort)


def struct_type_error(v, schema):
    """The first UnmarshalTypeError of v (an object from loads) decoded into the Struct
    schema, in the order v has its fields, or None."""
    return _types(v, schema, "", False)


def _time_error(v, t):
    """The error metav1.Time's (t: or MicroTime's) UnmarshalJSON gives for v, or None."""
    if v is None:
        return None
    if not isinstance(v, str):
        return "json: cannot unmarshal %s into Go value of type string" % _json_kind(v)
    return gotime.parse(LAYOUTS[t.kind], v)[1]


def _times(v, schema, sort):
    """The first time error of v (a dict of schema's type), in the decoder's order."""
    for k, x in _members(v, sort):
        t = schema.get(k, ANY)
        err = None
        if t is ANY or x is None:
            continue
        if isinstance(t, Struct):
            err = _times(x, t, sort) if isinstance(x, dict) else None
        elif _elem_struct(t):
            items = x if isinstance(x, list) else ()
            err = next(filter(None, (_times(e, t.elem, sort) for e in items
                                     if isinstance(e, dict))), None)
        elif t.kind in LAYOUTS:
            err = _time_error(x, t)
        if err:
            return err
    return None


def _types(v, schema, path, sort):
    for k, x in _members(v, sort):
        t = schema.get(k, ANY)
        if t is ANY:
            continue
        p = path + "." + k if path else k
        err = _type_error(x, t, schema.name, p)
        if err:
            return err
        if isinstance(t, Struct):
            if isinstance(x, dict):
                err = _types(x, t, p, sort)
        elif _elem_struct(t):
            for e in x if isinstance(x, list) else ():
                err = _type_error(e, t.elem, schema.name, p) or \
                    (_types(e, t.elem, p, sort) if isinstance(e, dict) else None)
                if err:
                    break
        elif t.kind in ("map", "slice"):
            items = x.values() if isinstance(x, dict) else x if isinstance(x, list) else ()
            err = next(filter(None, (_type_error(e, t.elem, schema.name, p) for e in items)),
                       None)
        if err:
            return err
    return None


# ------------------------------------------------------------ a strategic merge patch's object

UINT8 = GoType("uint8", "uint", 8)
INT64_MIN = -(1 << 63)


def _go_value(v):
    """The Go kind of a value of the map a strategic merge patch yields (its patch decoded by
    util/json with ints preserved: a whole JSON number in int64's range is an int64, any other
    a float64), and the value as Go holds it."""
    if isinstance(v, bool):
        return "bool", v
    if isinstance(v, int):
        if INT64_MIN <= v < -INT64_MIN:
            return "int64", v
        try:
            return "float64", float(v)
        except OverflowError:
            return "float64", float("inf") if v > 0 else float("-inf")
    if isinstance(v, float):
        return "float64", v
    if isinstance(v, str):
        return "string", v
    return ("map" if isinstance(v, dict) else "slice"), v


def _wrap(n, t):
    """An int64 converted to t as Go's reflect converts it: truncated to t's width."""
    m = 1 << t.bits
    n %= m
    return n - m if t.kind == "int" and n >= m >> 1 else n


def _scalar(v, t):
    """(what a field of scalar type t holds for v, the converter's error or None): converter.go
    fromUnstructured's simple types, where JSON's four groups (bools, integers, floats, strings)
    do not convert into each other, except a whole float into an integer. A value of another
    group that Go could convert (an int64 into a string type) is "cannot convert"; one it could
    not is "unrecognized type"."""
    kind, v = _go_value(v)
    if t.kind == "string":
        if kind == "string":
            return v, None
        if kind == "int64":
            return v, "cannot convert int64 to %s" % t.go
    elif t.kind == "bool":
        if kind == "bool":
            return v, None
    elif kind == "int64":
        return _wrap(v, t), None
    elif kind == "float64":
        if math.isnan(v) or (math.isfinite(v) and v != math.trunc(v)):
            return v, "cannot convert float64 to %s" % t.go
        # reflect converts a float through int64 (amd64: out of its range, its minimum)
        n = int(v) if INT64_MIN <= v < -INT64_MIN else INT64_MIN
        return _wrap(n, t), None
    base = {"string": "string", "bool": "bool"}.get(t.kind) or \
        ("int%d" % t.bits if t.kind == "int" else "uint%d" % t.bits)
    return v, "unrecognized type: " + base


def _convert(v, t):
    """(what a field of type t holds for v, the first error or None), in the order of the Go
    type's fields; a list's or map's elements are converted in place."""
    if v is None or t is ANY:
        return v, None
    kind = _go_value(v)[0]
    if isinstance(t, Struct):
        if kind != "map":
            return v, "cannot restore struct from: " + kind
        for k, ft in t.items():
            if k in v:
                v[k], err = _convert(v[k], ft)
                if err:
                    return v, err
        return v, None
    if t.kind in LAYOUTS:
        return v, _time_error(v, t)     # through JSON and its UnmarshalJSON
    if t.kind == "map":
        if kind != "map":
            return v, "cannot restore map from " + kind
        items = list(v)
    elif t.kind in ("slice", "bytes"):
        if t.kind == "bytes" and kind == "string":
            # a []byte from a string: JSON's base64
            err = go_base64_error(v) if v else None
            return v, err and "error decoding from json: " + err
        if kind != "slice":
            return v, "cannot restore slice from " + kind
        items = range(len(v))
    else:
        return _scalar(v, t)
    elem = UINT8 if t.kind == "bytes" else t.elem
    for i in items:
        v[i], err = _convert(v[i], elem)
        if err:
            return v, err
    return v, None


def convert_error(group, kind, obj):
    """The error runtime.DefaultUnstructuredConverter.FromUnstructured gives for obj as kind (a
    strategic merge patch's result is converted so, not decoded from JSON), or None; obj's
    numbers are changed in place to what the typed object holds: an integer truncated to its
    field's width (4294967299 into an int32 is 3), a whole float its integer (3.0 is 3).
    Fields are visited in the Go type's order (KNOWN lists them so), a map's in the order its
    keys have here (Go's is random); the error has no path: "unrecognized type: int32" for a
    string into spec.replicas, "cannot convert float64 to int32" for 2.5."""
    schema = _schema(group, kind)
    return None if schema is ANY else _convert(obj, schema)[1]


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
    """A request body's JSON, its objects as Obj and its numbers that are not integers as
    LitFloat (raises ValueError as json.loads does)."""
    return json.loads(text, object_pairs_hook=_object, parse_float=_lit_float)


def overflow(v):
    """The literal of the first number of a decoded body (an Obj tree from loads) that a
    float64 cannot hold (1e400), in the body's order, or None. Go's decoder refuses it
    wherever it is decoded as a number ("json: cannot unmarshal number 1e400 into Go value
    of type float64"); stored, it would be served as JSON's invalid Infinity."""
    if isinstance(v, dict):
        for _, x in (v.members if isinstance(v, Obj) else v.items()):
            lit = overflow(x)
            if lit:
                return lit
    elif isinstance(v, list):
        for x in v:
            lit = overflow(x)
            if lit:
                return lit
    elif isinstance(v, float) and not isinstance(v, bool) and math.isinf(v):
        return getattr(v, "lit", repr(v))
    elif isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 1 << 1024:
        return str(v)
    return None


def plain(v):
    """v with every Obj made a plain dict (what is stored and served)."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, LitFloat):
        return float(v)
    return v


def _members(v, sort):
    if sort:
        return sorted(v.items())
    return v.members if isinstance(v, Obj) else list(v.items())


def _strict(v, schema, path, out, sort):
    """Append to out the ("unknown"|"duplicate", path) of v's fields, in document order (sorted
    keys when sort). schema: v's Struct, or ANY."""
    if isinstance(v, list):
        for i, e in enumerate(v):
            _strict(e, ANY, "%s[%d]" % (path, i), out, sort)
        return
    if not isinstance(v, dict):
        return
    seen = set()
    for k, x in _members(v, sort):
        p = path + "." + k if path else k
        t = schema.get(k, ANY) if schema is not ANY else ANY
        if schema is not ANY and not schema.open and k not in schema:
            out.append(("unknown", p))
            continue
        if k in seen:
            out.append(("duplicate", p))
        seen.add(k)
        elem = _elem_struct(t)
        if elem and isinstance(x, list):
            for i, e in enumerate(x):
                _strict(e, elem, "%s[%d]" % (p, i), out, sort)
        else:
            _strict(x, t if isinstance(t, Struct) else ANY, p, out, sort)


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


JSON_PATCH_OP = _struct("jsonPatchOp", op=ANY, path=ANY, value=ANY, **{"from": ANY})


def json_patch_errors(ops):
    """The unknown and repeated fields of a JSON patch's operations (an Obj tree: a list of
    operations; anything else has none), prefixed "json patch " as patch.go prefixes them."""
    found = []
    if isinstance(ops, list):
        for i, op in enumerate(ops):
            if isinstance(op, dict):
                _strict(op, JSON_PATCH_OP, "[%d]" % i, found, False)
    return _messages(found, "json patch ")

# SPDX-License-Identifier: Apache-2.0
"""The verbs of the Kubernetes API over the store: create, get, list, update, patch, delete,
deletecollection, the scale and status subresources, pods/binding (what the scheduler POSTs to
assign a pod to a node), and the watch event filter.

Handlers here are transport-free: they take parsed request parts and return (code, body) or
raise StatusError, which carries a Status object shaped exactly as kube-apiserver's.
"""

import base64
import copy
import datetime
import decimal
import json
import random
import threading
import time
import types
import uuid

from . import fields as F
from . import gc as GC
from . import goparse as G
from . import managed as M
from . import patch as P
from .kselectors import (FieldSelector, LabelSelector, SelectorError, go_is_print, go_parse_int,
                         go_quote)
from .validation import FieldError, GoLiteral, go_base64_error, validate_meta


class StatusError(Exception):
    """An API error; .status() is the Status object, .code the HTTP status."""

    def __init__(self, code, reason, message, details=None, headers=None, list_meta=None):
        super().__init__(message)
        self.list_meta = list_meta or {}
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        # responsewriters.ErrorNegotiated: details.retryAfterSeconds is the header too
        retry = (details or {}).get("retryAfterSeconds")
        if retry and "Retry-After" not in self.headers:
            self.headers["Retry-After"] = str(int(retry))

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.list_meta),
              "status": "Failure", "message": self.message}
        if self.reason:
            st["reason"] = self.reason
        if self.details is not None:
            st["details"] = self.details
        st["code"] = self.code
        return st


def _details(res, name, kind=None):
    d = {}
    if name:
        d["name"] = name
    if res is not None and res.group:
        d["group"] = res.group
    d["kind"] = kind if kind is not None else (res.plural if res is not None else "")
    return d


def not_found(res, name):
    return StatusError(404, "NotFound", '%s "%s" not found' % (res.group_resource, name),
                       _details(res, name))


def ns_not_found(ns):
    return StatusError(404, "NotFound", 'namespaces "%s" not found' % ns,
                       {"name": ns, "kind": "namespaces"})


def already_exists(res, name):
    return StatusError(409, "AlreadyExists", '%s "%s" already exists' % (res.group_resource, name),
                       _details(res, name))


def conflict(res, name, why="the object has been modified; please apply your changes to the "
                            "latest version and try again"):
    return StatusError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                       % (res.group_resource, name, why), _details(res, name))


# etcd key prefixes that are not /registry/<resource> (the registries' own prefixes)
_STORAGE_PREFIX = {"services": "services/specs", "nodes": "minions",
                   "apiservices": "apiregistration.k8s.io/apiservices"}


def storage_key(res, ns, name):
    """The object's key in etcd, as a StorageError names it."""
    prefix = _STORAGE_PREFIX.get(res.plural, res.plural)
    return "/registry/%s/%s%s" % (prefix, ns + "/" if ns else "", name)


def bad_request(msg):
    return StatusError(400, "BadRequest", msg)


# []byte fields: JSON carries them as base64, which the decoding checks (encoding/json)
BYTES_FIELDS = {("", "ConfigMap"): ("binaryData",), ("", "Secret"): ("data",)}


# the values of the fieldValidation parameter (metav1.FieldValidation*), sorted as
# allowedFieldValidationValues.List() lists them
FIELD_VALIDATION = ("", "Ignore", "Strict", "Warn")

# the kind the scale subresource reads and writes (its decoding errors name it)
SCALE = types.SimpleNamespace(group="autoscaling", kind="Scale", version="v1")


def patch_shown(ptype, patch, patched):
    """What patch.go's field.Invalid of "patch" shows: the patched JSON (a Go map's, keys
    sorted), or for a strategic merge patch the patch's map as Go's %+v prints it."""
    if ptype == "strategic":
        return go_map_repr(patch)
    return json.dumps(patched, separators=(",", ":"), sort_keys=True)


def go_map_repr(v):
    """A JSON value decoded by k8s.io/apimachinery/pkg/util/json as Go's %+v prints it:
    maps with their keys sorted, strings bare, integers as int64, other numbers as float64."""
    if isinstance(v, dict):
        return "map[" + " ".join("%s:%s" % (k, go_map_repr(v[k])) for k in sorted(v)) + "]"
    if isinstance(v, list):
        return "[" + " ".join(go_map_repr(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "<nil>"
    if isinstance(v, int) and -(1 << 63) <= v < 1 << 63:
        return str(v)   # util/json decodes a whole JSON number in int64's range as an int64
    if isinstance(v, int):
        try:
            return go_float(float(v))
        except OverflowError:
            return "+Inf" if v > 0 else "-Inf"   # past float64: Go's %v of an infinity
    if isinstance(v, float):
        return go_float(v)
    return str(v)


def go_float(f):
    """A float64 as Go's %v prints it (strconv's 'g' at the shortest precision, whose
    exponent form is used below 1e-4 and from 1e6 up: 1000000 prints as 1e+06)."""
    if f == 0:
        return "0"
    t = decimal.Decimal(repr(abs(f))).normalize().as_tuple()
    digits = "".join(str(d) for d in t.digits)
    exp = len(digits) + t.exponent - 1
    sign = "-" if f < 0 else ""
    if exp < -4 or exp >= 6:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return "%s%se%s%02d" % (sign, mant, "-" if exp < 0 else "+", abs(exp))
    if exp < 0:
        return sign + "0." + "0" * (-exp - 1) + digits
    whole = digits[:exp + 1].ljust(exp + 1, "0")
    frac = digits[exp + 1:]
    return sign + whole + ("." + frac if frac else "")


def decode_error(res, verb, shown, err):
    """A body that does not decode as res's kind: for a patch, patch.go's 422 (the patched
    object does not decode; field.Invalid of "patch" showing `shown`), else rest.go's
    transformDecodeError, a 400."""
    if verb == "patch":
        msg = "Invalid value: %s: %s" % (json.dumps(shown), err)
        # NewInvalid(schema.GroupKind{}, "", ...): an empty kind's "%s %q is invalid: %v"
        # starts with a space
        return StatusError(422, "Invalid", ' "" is invalid: patch: ' + msg,
                           {"causes": [{"reason": "FieldValueInvalid", "message": msg,
                                        "field": "patch"}]})
    return bad_request("%s in version %s cannot be handled as a %s: %s"
                       % (res.kind, json.dumps(res.version), res.kind, err))


def invalid(kind, group, name, errs):
    qual = kind if not group else "%s.%s" % (kind, group)
    # field.ErrorList.ToAggregate: a message already in the list is not repeated (the
    # causes keep every error)
    msgs = []
    for e in errs:
        if str(e) not in msgs:
            msgs.append(str(e))
    if len(msgs) == 1:
        agg = msgs[0]
    else:
        agg = "[" + ", ".join(msgs) + "]"
    # StatusDetails.name is omitempty: the options' errors (ListOptions, DeleteOptions) have none
    details = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": e.reason, "message": e.body(), "field": e.field}
                         for e in errs]
    return StatusError(422, "Invalid", "%s %s is invalid: %s" % (qual, go_quote(name), agg),
                       details)


def method_not_allowed():
    return StatusError(405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource", {})


def internal(msg):
    return StatusError(500, "InternalError", "Internal error occurred: %s" % msg,
                       {"causes": [{"message": msg}]})


def expired(msg):
    return StatusError(410, "Expired", msg)


def too_large_rv(want, cur, retry=1):
    """storage.NewTooLargeResourceVersionError: the watch cache's answer to a resourceVersion
    it has not reached after waiting (waitUntilFreshAndBlock, retry 1 s); etcd3's at once,
    with no retry (validateMinimumResourceVersion: 0, omitted, and no Retry-After header)
    or, for a watch's initial events, a jittered one (1 to 3 s)."""
    details = {"causes": [{"reason": "ResourceVersionTooLarge",
                           "message": "Too large resource version"}]}
    if retry:
        details["retryAfterSeconds"] = retry
    return StatusError(504, "Timeout", "Timeout: Too large resource version: %d, current: %d"
                       % (want, cur), details)


def etcd_future_rv():
    """etcd's answer to a read at a revision it has not reached (mvcc ErrFutureRev), which no
    layer converts: 500, no reason."""
    return StatusError(500, "", "etcdserver: mvcc: required revision is a future revision")


def wait_for_rv(store, want, seconds=3.0):
    """Wait (outside the store's lock) until the store reached resourceVersion want, as the
    watch cache waits up to 3 s for a list or watch at a resourceVersion it has not seen;
    else the 504 above."""
    deadline = time.monotonic() + seconds
    while want > store.current_rv() and time.monotonic() < deadline:
        time.sleep(0.05)
    cur = store.current_rv()
    if want > cur:
        raise too_large_rv(want, cur)


def now_rfc3339():
    return format_rfc3339(datetime.datetime.now(datetime.timezone.utc))


def format_rfc3339(when):
    """metav1.Time as it is serialized: UTC, whole seconds."""
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text):
    """A metav1.Time written by format_rfc3339 (or with an offset) as an aware datetime."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


_META_ORDER = ["name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
               "generation", "creationTimestamp", "deletionTimestamp",
               "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
               "finalizers", "managedFields"]
_TOP_ORDER = ["kind", "apiVersion", "metadata"]

PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": None,
}
RETURN_DELETED = {"pods", "services", "namespaces", "nodes"}
# namespaces the NamespaceLifecycle admission plugin never lets go
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")


def patch_type_of(content_type):
    """A PATCH's patch type from its Content-Type, or 415 for one patch.go does not take.
    patch.go cuts the value at its first ";" when that is not at index 0, and then needs one
    of the types exactly: case-sensitive, no space trimmed before the ";". Only the header
    value's own leading and trailing blanks are gone (Go's textproto drops them)."""
    ctype = (content_type or "").strip(" \t")
    idx = ctype.find(";")
    if idx > 0:
        ctype = ctype[:idx]
    if ctype not in PATCH_TYPES or PATCH_TYPES[ctype] is None:
        raise StatusError(415, "UnsupportedMediaType",
                          "the body of the request was in an unknown format - accepted media "
                          "types include: application/json-patch+json, "
                          "application/merge-patch+json, application/apply-patch+yaml, "
                          "application/strategic-merge-patch+json")
    return PATCH_TYPES[ctype]


def ordered(obj):
    """Key order of kube's JSON encoding: kind, apiVersion, metadata (in field order), rest."""
    out = {}
    for k in _TOP_ORDER:
        if k in obj:
            out[k] = obj[k]
    for k, v in obj.items():
        if k not in out:
            out[k] = v
    meta = out.get("metadata")
    if isinstance(meta, dict):
        m = {k: meta[k] for k in _META_ORDER if k in meta}
        for k, v in meta.items():
            if k not in m:
                m[k] = v
        out["metadata"] = m
    return out


def _rand_suffix(n=5):
    return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))


def parse_rv(text, delegated=False):
    """A list's or watch's resourceVersion as APIObjectVersioner.ParseResourceVersion reads it
    ("" and "0" are 0, else strconv.ParseUint). One that does not parse is a storage
    InvalidError: where etcd3's GetList parses it (a list the watch cache delegates) a 400
    "invalid resource version: ...", in the watch cache (a watch, other lists) the error as
    it is, which ErrorToAPIStatus makes a 500 with no reason (StatusReasonUnknown)."""
    if text in ("", "0"):
        return 0
    try:
        return G.parse_uint(text)
    except ValueError as e:
        msg = "resourceVersion: Invalid value: %s: %s" % (go_quote(text), e)
        if delegated:
            raise bad_request("invalid resource version: " + msg)
        raise StatusError(500, "", msg)


def query_bool(v):
    """runtime.Convert_Slice_string_To_bool: only "false" (any case) and "0" are false; any
    other value, the empty one too, is true."""
    return not (v == "0" or v.lower() == "false")


class Query(dict):
    """A request's query parameters: each one's first value, as the conversions read
    url.Values ((*in)[0]); .multi every value, for the []string ones (dryRun)."""

    def __init__(self, pairs=()):
        super().__init__()
        self.multi = {}
        for k, v in pairs:
            self.setdefault(k, v)
            self.multi.setdefault(k, []).append(v)


def query_list(query, key):
    """Every value of a []string parameter (runtime.Convert_Slice_string_To_Slice_string)."""
    multi = getattr(query, "multi", None)
    if multi is not None:
        return list(multi.get(key, []))
    return [query[key]] if query and key in query else []


def dry_run_error(dry):
    """ValidateDryRun (meta/v1/validation): only "All"; the whole []string shown as %#v."""
    if all(d == "All" for d in dry):
        return None
    return FieldError("notsupported", "dryRun", GoLiteral(
        "[]string{%s}" % ", ".join(go_quote(str(d)) for d in dry)), supported=["All"])


FIELD_MANAGER_MAX = 128   # metav1 validation.FieldManagerMaxLength


def go_runes(raw):
    """A Go string's `for i, r := range s`: (byte offset, rune, text as strconv.Quote writes
    it inside its quotes); an invalid UTF-8 byte is utf8.RuneError (U+FFFD, printable) of
    width 1, quoted \\xNN."""
    i = 0
    while i < len(raw):
        for n in (1, 2, 3, 4):
            try:
                ch = raw[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            yield i, ch, go_quote(ch)[1:-1]
            i += n
            break
        else:
            yield i, "\ufffd", "\\x%02x" % raw[i]
            i += 1


def field_manager_errors(query, apply=None):
    """ValidatePatchOptions' apply rule when apply is not None (a non-apply patch may not
    set force; an apply patch must name its manager), then ValidateFieldManager: at most
    128 bytes (Go's len), every rune printable (unicode.IsPrint on Go 1.22's Unicode 15.0:
    go_is_print), each other one named with its byte offset. The parameter's raw bytes
    are read (query.raw, as the server decoded it), so offsets and quoting are Go's."""
    errs = []
    value = (query or {}).get("fieldManager", "")
    if apply is False and "force" in (query or {}):
        errs.append(FieldError("forbidden", "force",
                               detail="may not be specified for non-apply patch"))
    if apply and not value:
        errs.append(FieldError("required", "fieldManager", detail="is required for apply patch"))
    raw_q = getattr(query, "raw", None)
    raw = (raw_q.get("fieldManager", "").encode("latin-1") if raw_q is not None
           else value.encode("utf-8", "surrogateescape"))
    if len(raw) > FIELD_MANAGER_MAX:
        errs.append(FieldError("toolong", "fieldManager", detail=str(FIELD_MANAGER_MAX)))
    runes = list(go_runes(raw))
    quoted = GoLiteral('"%s"' % "".join(q for _, _, q in runes))
    for i, ch, _ in runes:
        if not go_is_print(ch):
            errs.append(FieldError("invalid", "fieldManager", quoted,
                                   "invalid character U+%04X (at position %d)" % (ord(ch), i)))
    return errs


def query_int64(query, key):
    """An int64 query parameter (runtime.Convert_Slice_string_To_int64: strconv.ParseInt, whose
    error DecodeParameters answers with a 400), or None when it is absent."""
    if key not in query:
        return None
    try:
        return go_parse_int(query[key])
    except ValueError as e:
        raise bad_request(str(e))


def validate_list_options(o):
    """ValidateListOptions (apimachinery/pkg/apis/meta/internalversion/validation/
    validation.go), with the WatchList feature on (fakekube serves sendInitialEvents). o: the
    options as list_options reads them."""
    errs = []
    path = "resourceVersionMatch"
    if o.watch:
        if o.send_initial is not None and o.match != "NotOlderThan":
            errs.append(FieldError("forbidden", path, detail=(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")))
        if o.match:
            if o.send_initial is None:
                errs.append(FieldError("forbidden", path, detail=(
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided")))
            if o.match != "NotOlderThan":
                errs.append(FieldError("notsupported", path, o.match, supported=["NotOlderThan"]))
            if o.cont:
                errs.append(FieldError("forbidden", path, detail=(
                    "resourceVersionMatch is forbidden when continue is provided")))
        return errs
    if o.match:
        if not o.rv:
            errs.append(FieldError("forbidden", path, detail=(
                "resourceVersionMatch is forbidden unless resourceVersion is provided")))
        if o.cont:
            errs.append(FieldError("forbidden", path, detail=(
                "resourceVersionMatch is forbidden when continue is provided")))
        if o.match not in ("Exact", "NotOlderThan"):
            errs.append(FieldError("notsupported", path, o.match,
                                   supported=["Exact", "NotOlderThan", ""]))
        if o.match == "Exact" and o.rv == "0":
            errs.append(FieldError("forbidden", path, detail=(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")))
    if o.send_initial is not None:
        errs.append(FieldError("forbidden", "sendInitialEvents",
                               detail="sendInitialEvents is forbidden for list"))
    return errs


DELETE_PROPAGATION = ("Foreground", "Background", "Orphan")

# metav1.DeleteOptions as sigs.k8s.io/json decodes it (its TypeMeta read before, by Interpret)
DELETE_OPTIONS = F.Struct("DeleteOptions", {
    "kind": F.ANY, "apiVersion": F.ANY, "gracePeriodSeconds": F.INT64,
    "preconditions": F.Struct("Preconditions", {"uid": F.GoType("types.UID", "string"),
                                                "resourceVersion": F.STR}),
    "orphanDependents": F.BOOL,
    "propagationPolicy": F.GoType("v1.DeletionPropagation", "string"),
    "dryRun": F.LIST_STR})

# json.SimpleMetaFactory.Interpret's struct, as encoding/json prints its type
_FIND_KIND = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string '
              '"json:\\"kind,omitempty\\"" }')


def interpret_error(raw):
    """The error of json.SimpleMetaFactory.Interpret, the serializer's first look at a body
    (encoding/json into a struct of apiVersion and kind): "couldn't get version/kind; json parse
    error: ..." for a body that is not JSON, not an object (or null), or whose apiVersion or
    kind is not a string; else None."""
    err = G.json_syntax_error(raw)
    if err:
        return "couldn't get version/kind; json parse error: " + err
    body = F.loads(raw.decode("utf-8", "replace"))
    if body is not None and not isinstance(body, dict):
        return ("couldn't get version/kind; json parse error: json: cannot unmarshal %s into "
                "Go value of type %s" % (G.json_kind(body), _FIND_KIND))
    for k, v in (body or {}).items():
        # encoding/json matches a field without regard to case
        if k.lower() in ("apiversion", "kind") and v is not None and not isinstance(v, str):
            return ("couldn't get version/kind; json parse error: json: cannot unmarshal %s "
                    "into Go struct field .%s of type string"
                    % (G.json_kind(v), "apiVersion" if k.lower() == "apiversion" else "kind"))
    return None


def summarize_data(raw, n=30):
    """rest.go summarizeData: a body as a decoding error quotes it (an object's first n bytes,
    else their hex)."""
    if not raw:
        return "<empty>"
    more = " ..." if len(raw) > n else ""
    if raw[:1] == b"{":
        return raw[:n].decode("utf-8", "replace") + more
    return raw[:n].hex() + more


def decode_delete_body(raw):
    """A DELETE's body decoded as handlers/delete.go decodes it: the serializer's Interpret
    first (interpret_error), then the DeleteOptions (sigs.k8s.io/json: "json: cannot unmarshal
    string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"). Either error
    is a plain error, not an API status, which scope.err answers with a 500 and no reason
    (kube-apiserver 1.31; 400 from 1.35, kubernetes#132359). An unknown field is dropped."""
    err = interpret_error(raw)
    if err:
        raise StatusError(500, "", err)
    body = F.loads(raw.decode("utf-8", "replace"))
    if body is None:
        return {}
    err = F.struct_type_error(body, DELETE_OPTIONS)
    if err:
        raise StatusError(500, "", err)
    return F.plain(body)


def validate_delete_options(opts):
    """ValidateDeleteOptions (apimachinery/pkg/apis/meta/v1/validation/validation.go). The
    values are pointers there: a field.Error prints what they point to."""
    errs = []
    pp = opts.get("propagationPolicy")
    if opts.get("orphanDependents") is not None and pp is not None:
        errs.append(FieldError("invalid", "propagationPolicy", pp,
                               "orphanDependents and deletionPropagation cannot be both set"))
    if pp is not None and pp not in DELETE_PROPAGATION:
        errs.append(FieldError("notsupported", "propagationPolicy", pp,
                               supported=list(DELETE_PROPAGATION) + ["nil"]))
    dry = opts.get("dryRun") or []
    err = dry_run_error([dry] if isinstance(dry, str) else dry)
    if err:
        errs.append(err)
    return errs


def selector_string(sel):
    """status.selector of a Scale: the selector in labels.Selector String() form."""
    try:
        s = LabelSelector.from_label_selector(sel or {})
    except SelectorError:
        return ""
    return str(s) if s is not None else ""


class Api:
    def __init__(self, store, registry):
        self.store = store
        self.registry = registry
        self.cluster_ip_next = 10
        self._tls = threading.local()   # the unknown fields of this thread's request

    def take_warnings(self):
        """The Warning header values of the request this thread served last (unknown fields
        dropped), and forget them; the request's field manager too, so that a later write
        this thread makes on fakekube's own account records none."""
        w = getattr(self._tls, "warnings", None) or []
        self._tls.warnings = []
        self._tls.manager = None
        self._tls.applied = None
        return w

    def begin_write(self, verb, query, user_agent="", content_type=None):
        """A create, update or patch begins on this thread: its options are checked before
        its body is decoded, as the handlers do (ValidateCreateOptions and the like: a 422 of
        meta.k8s.io's CreateOptions, UpdateOptions or PatchOptions), and its fieldValidation
        directive is kept for the decoding: Warn (the default) drops an unknown field and
        names it in a Warning header, Ignore drops it silently, Strict fails the request.
        A patch's media type is checked first (415, patch.go)."""
        self._tls.warnings = []
        apply = None
        if verb == "patch":
            apply = patch_type_of(content_type) == "apply"
        # ValidateCreateOptions (UpdateOptions, PatchOptions): a patch's force and apply
        # rules, fieldManager, dryRun, fieldValidation, every failure named
        errs = field_manager_errors(query, apply)
        errs += [e for e in (dry_run_error(query_list(query, "dryRun")),) if e]
        v = (query or {}).get("fieldValidation", "")
        if v not in FIELD_VALIDATION:
            errs.append(FieldError("notsupported", "fieldValidation", v,
                                   supported=list(FIELD_VALIDATION)))
        if errs:
            raise invalid({"create": "CreateOptions", "update": "UpdateOptions",
                           "patch": "PatchOptions"}[verb], "meta.k8s.io", "", errs)
        self._tls.directive = v or "Warn"
        self._tls.manager = M.manager_of(query, user_agent)

    # ------------------------------------------------------------ helpers

    def _manage(self, res, old, new, subresource=None, now=None):
        """new's managedFields for this request's manager (managed.py); writes fakekube makes
        itself (bootstrap objects, its controllers) record none. An apply patch's manager
        owns the fields of its configuration (operation Apply). now: the entry's time (a
        create's is its creationTimestamp, taken in the same request, never a second apart)."""
        manager = getattr(self._tls, "manager", None)
        if manager is not None:
            M.update(old, new, manager, res.api_version, subresource, now=now,
                     applied=getattr(self._tls, "applied", None))

    def external(self, res, stored, with_type=True):
        obj = res.from_storage(stored) if res.from_storage else copy.deepcopy(stored)
        if with_type:
            obj["kind"] = res.kind
            obj["apiVersion"] = res.api_version
        else:
            obj.pop("kind", None)
            obj.pop("apiVersion", None)
        return ordered(obj)

    def _decode(self, res, body, verb, shown=None, patch_errors=(), converted=False):
        """The object of a request's body, with the kind's unknown and repeated fields handled
        as the request's fieldValidation directive says (fields.py). For a patch, body is the
        patched object, shown the value its errors show (what patch.go's field.Invalid of
        "patch" prints) and patch_errors the strict errors of the patch itself; converted: a
        strategic merge patch's object, which the unstructured converter turns into the typed
        object (fields.convert_error) where the others are decoded from JSON."""
        if not isinstance(body, dict):
            raise bad_request("the object provided is unrecognized (must be of type %s): "
                              "json: cannot unmarshal into Go value of type %s"
                              % (res.kind, res.kind))
        kind = body.get("kind")
        if kind and kind != res.kind:
            raise bad_request("the object provided is unrecognized (must be of type %s): "
                              "kind %s does not match %s" % (res.kind, kind, res.kind))
        av = body.get("apiVersion")
        if av and av != res.api_version and verb == "create":
            # kube-apiserver converts between served versions; we serve one per resource.
            raise bad_request("the API version in the data (%s) does not match the expected API "
                              "version (%s)" % (av, res.api_version))
        out = F.plain(body)
        # a value Go cannot decode into its field: the first one, before any strict error
        if converted:
            err = F.convert_error(res.group, res.kind, out)
        else:
            err = F.type_error(res.group, res.kind, out if verb == "patch" else body,
                               sort=verb == "patch")
        if err:
            raise decode_error(res, verb, shown, err)
        lit = F.overflow(body) if verb != "patch" else None
        if lit:
            # past float64 in a field whose type is not transcribed (a typed one failed above)
            raise decode_error(res, verb, shown, "json: cannot unmarshal number %s into Go "
                               "value of type float64" % lit)
        if not isinstance(body.get("metadata", {}), dict):
            raise bad_request("metadata must be an object")
        for field in BYTES_FIELDS.get((res.group, res.kind), ()):
            values = out.get(field)
            for k, v in (values.items() if isinstance(values, dict) else ()):
                if isinstance(v, list):
                    # an array of uint8s (checked above) decodes as those bytes
                    values[k] = base64.b64encode(bytes(e or 0 for e in v)).decode()
                    continue
                if not isinstance(v, str):
                    continue
                err = go_base64_error(v)
                if err is None:
                    # decoded, then encoded again when served: line breaks are gone
                    values[k] = base64.b64encode(base64.b64decode(
                        v.replace("\r", "").replace("\n", ""))).decode()
                    continue
                raise decode_error(res, verb, shown, err)
        self._strict(res, verb, shown, body, out, patch_errors, converted)
        F.prune(res.group, res.kind, out)
        return out

    def _strict(self, res, verb, shown, body, out, patch_errors=(), converted=False):
        """The strict decoding errors of a write of res's kind (fields.py) under the request's
        fieldValidation: Strict raises them (runtime.NewStrictDecodingError; non-strict errors
        came first), Warn names each in a Warning header, Ignore neither. body: a create's or
        update's decoded body; out: a patch's patched object (converted: a strategic merge
        patch's, whose unknown fields the converter sorts by their messages)."""
        directive = getattr(self._tls, "directive", "Warn")
        if directive == "Ignore":
            return
        if verb == "patch":
            unknown = F.patched_unknown(res.group, res.kind, out)
            errs = list(patch_errors) + (sorted(unknown) if converted else unknown)
        else:
            errs = F.strict_errors(res.group, res.kind, body)
        if errs and directive == "Strict":
            raise decode_error(res, verb, shown, "strict decoding error: " + ", ".join(errs))
        self._tls.warnings = (getattr(self._tls, "warnings", None) or []) + [
            '299 - "%s"' % e.replace("\\", "\\\\").replace('"', '\\"') for e in errs]

    def _to_storage(self, res, obj):
        stored = res.to_storage(obj) if res.to_storage else obj
        stored["kind"] = self.registry.storage_of(res.storage).kind if \
            res.to_storage else res.kind
        canonical = self.registry.storage_of(res.storage) or res
        stored["apiVersion"] = canonical.api_version
        return stored, canonical

    def _validate(self, res, canonical, obj, old, name, meta_errs=()):
        """The kind's validation of obj (its stored form; old: the object updated, or None),
        with the request's resource's validator where it has its own (events.k8s.io's
        Events). meta_errs: ValidateObjectMetaUpdate's errors."""
        validate = res.validate or canonical.validate
        meta = validate_meta(obj.get("metadata") or {}, res.name_style, res.namespaced)
        if res.validate_first:
            # rest.BeforeCreate runs the strategy's Validate alone, and the common ObjectMeta
            # check (its names path segments) only once that passed; BeforeUpdate puts the
            # common fields' errors first. For the kinds whose Validate checks no ObjectMeta.
            kind_errs = validate(obj, old)
            errs = (kind_errs or meta) if old is None else meta + list(meta_errs) + kind_errs
        else:
            errs = meta + list(meta_errs)
            if validate:
                # a kind's ValidateXUpdate starts with ValidateObjectMetaUpdate again
                errs.extend(meta_errs)
                errs.extend(validate(obj, old))
        if errs:
            raise invalid(res.kind, res.group, name, errs)

    def _check_namespace(self, res, ns, name):
        """The NamespaceLifecycle admission plugin, for a create: the namespace must exist
        and not be terminating."""
        if not res.namespaced:
            return
        stored = self.store.get("core/namespaces", "", ns)
        if stored is None:
            raise ns_not_found(ns)
        if (stored.get("status") or {}).get("phase") == "Terminating":
            details = _details(res, name)
            details["causes"] = [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                  "message": "namespace %s is being terminated" % ns}]
            raise StatusError(403, "Forbidden", '%s "%s" is forbidden: unable to create new '
                              "content in namespace %s because it is being terminated"
                              % (res.group_resource, name, ns), details)

    def _default(self, canonical, obj):
        if canonical.default:
            canonical.default(obj)
        if canonical.plural == "services":
            spec = obj.get("spec") or {}
            if spec.get("type") != "ExternalName" and not spec.get("clusterIP"):
                self.cluster_ip_next += 1
                n = self.cluster_ip_next
                spec["clusterIP"] = "10.96.%d.%d" % (n // 250, n % 250 + 1)
            if spec.get("clusterIP"):
                spec.setdefault("clusterIPs", [spec["clusterIP"]])
                if spec["clusterIP"] != "None":
                    spec.setdefault("ipFamilies", ["IPv4"])
                    spec.setdefault("ipFamilyPolicy", "SingleStack")

    # ------------------------------------------------------------ reads

    def read_at(self, query, res=None):
        """A GET's resourceVersion (GetOptions), as cacher.Get reads it: "" from etcd, else
        parsed (500 when it does not parse, parse_rv) and waited for (WaitUntilFreshAndGet:
        3 s, then 504 Too large resource version). A resource without a watch cache is read
        by etcd3's Get (validateMinimumResourceVersion): 400 "invalid resource version", and
        one not reached yet 504 at once, with no retry."""
        etcd = res is not None and not res.watch_cache
        want = parse_rv((query or {}).get("resourceVersion", ""), delegated=etcd)
        if want and etcd:
            cur = self.store.current_rv()
            if want > cur:
                raise too_large_rv(want, cur, retry=0)
        elif want:
            wait_for_rv(self.store, want)

    def get(self, res, ns, name, query=None):
        self.read_at(query, res)
        stored = self.store.get(res.storage, ns if res.namespaced else "", name)
        if stored is None:
            raise not_found(res, name)
        return 200, self.external(res, stored)

    def list_options(self, res, query):
        """The ListOptions of a list, watch or deletecollection, read as the handlers read them
        (handlers/get.go ListResource, delete.go DeleteCollection): DecodeParameters first, whose
        failures are 400 (an int64 strconv.ParseInt refuses: timeoutSeconds, then limit; then a
        label selector, then a field selector that does not parse); then ValidateListOptions (422
        Invalid ListOptions.meta.k8s.io, every failure named); then the field selector's labels
        converted for the kind (scheme.ConvertFieldLabel, 400). The selectors' terms are kept in
        the order fields.ParseSelector sorts them, so the first failure is upstream's."""
        timeout = query_int64(query, "timeoutSeconds")
        limit = query_int64(query, "limit") or 0
        try:
            ls = LabelSelector.parse(query.get("labelSelector", ""))
            fs = FieldSelector.parse(query.get("fieldSelector", ""))
        except SelectorError as e:
            raise bad_request(str(e))
        opts = types.SimpleNamespace(
            ls=ls, fs=fs, timeout=timeout, limit=limit,
            watch=query_bool(query["watch"]) if "watch" in query else False,
            bookmarks=query_bool(query["allowWatchBookmarks"])
            if "allowWatchBookmarks" in query else False,
            send_initial=query_bool(query["sendInitialEvents"])
            if "sendInitialEvents" in query else None,
            rv=query.get("resourceVersion", ""), match=query.get("resourceVersionMatch", ""),
            cont=query.get("continue", ""))
        errs = validate_list_options(opts)
        if errs:
            raise invalid("ListOptions", "meta.k8s.io", "", errs)
        for i, (label, op, value) in enumerate(fs.terms):
            try:
                fs.terms[i] = (res.convert_field_label(label), op, value)
            except ValueError as e:
                raise bad_request(str(e))
        return opts

    def matches(self, res, stored, ls, fs):
        if stored is None:
            return False
        if not ls.matches((stored.get("metadata") or {}).get("labels")):
            return False
        return fs.matches(res.fields_of(stored)) if fs.terms else True

    def list(self, res, ns, query):
        """resourceVersion semantics as kube-apiserver's (api-concepts, "the resourceVersion
        parameter"): unset, the most recent (a quorum read); "0", any (this fake gives the
        most recent); X with resourceVersionMatch NotOlderThan, or unset without a limit, at
        least as new as X (waited for, else 504); X with Exact, or unset with a limit (the
        legacy exact read of a paged list), exactly at X (410 once compacted).

        Where it is served decides its errors (cacher.go shouldDelegateList): a continue token,
        a limit (but at "0") or Exact go to etcd (etcd3 store.go GetList), whose resourceVersion
        that does not parse is 400 "invalid resource version: ...", then a continue token that
        does not decode 400 "invalid continue token: ..." (storage.DecodeContinue), then a
        resourceVersion beside a continue token 400; the rest to the watch cache, whose
        resourceVersion that does not parse is the storage layer's InvalidError, which no
        handler converts: 500, no reason.

        What etcd serves (the delegated lists, and every list of a resource without a watch
        cache: Events) waits for nothing: a read at a revision not reached yet (Exact, or a
        limit's legacy exact read) is etcd's ErrFutureRev, a 500; one at least as new as it
        (NotOlderThan, or none with no limit) 504 Too large resource version at once, with no
        retry (validateMinimumResourceVersion); and a limit pages it, at "0" too."""
        o = self.list_options(res, query)
        ls, fs, cont, rvq, match = o.ls, o.fs, o.cont, o.rv, o.match
        delegated = bool(cont) or (o.limit > 0 and rvq != "0") or match == "Exact"
        etcd = delegated or not res.watch_cache
        want = parse_rv(rvq, etcd)
        scope = ns if res.namespaced else None
        key_prefix = storage_key(res, scope or "", "")
        start_key = cont_rv = None
        if cont:
            try:
                start_key, cont_rv = G.decode_continue(cont, key_prefix)
            except ValueError as e:
                raise bad_request("invalid continue token: %s" % e)
            if rvq not in ("", "0"):
                raise bad_request("specifying resource version is not allowed when using "
                                  "continue")
        # a limit pages the list unless it is served from the watch cache, which ignores it:
        # resourceVersion "0" without a continue token (cacher.go shouldDelegateList), the
        # whole list then, with no continue token; a negative limit is none (Limit > 0)
        lim = o.limit if o.limit > 0 and etcd else None
        exact_rv = None
        if want:
            if match == "Exact" or (not match and lim is not None and not cont):
                exact_rv = want
            if not etcd:
                wait_for_rv(self.store, want)
            else:
                cur = self.store.current_rv()
                if want > cur:
                    raise etcd_future_rv() if exact_rv is not None else \
                        too_large_rv(want, cur, retry=0)
        with self.store.lock:
            rv = self.store.current_rv()
            if cont_rv is not None and cont_rv > 0:
                rv = cont_rv   # below 0: the token of a compacted list, at the latest
                if rv > self.store.rv:
                    raise StatusError(500, "", "etcdserver: mvcc: required revision is a "
                                               "future revision")
                if rv < self.store.window_start(res.storage):
                    # handleCompactedErrorForPaging: with a token to go on at the latest
                    # resourceVersion (-1) from the same key
                    e = expired("The provided continue parameter is too old to display a "
                                "consistent list result. You can start a new list without "
                                "the continue parameter, or use the continue token in this "
                                "response to retrieve the remainder of the results. "
                                "Continuing with the provided token results in an "
                                "inconsistent list - objects that were created, modified, or "
                                "deleted between the time the first chunk was returned and "
                                "now may show up in the list.")
                    e.list_meta = {"continue": G.encode_continue(start_key, key_prefix, -1)}
                    raise e
            if exact_rv is not None:
                if exact_rv < self.store.window_start(res.storage):
                    raise expired("The resourceVersion for the provided list is too old.")
                rv = exact_rv
            items = []
            remaining = 0
            next_key = None
            # a continued list reads at its first page's resourceVersion (etcd's WithRev)
            stored_items = (self.store.items_at(res.storage, scope, rv)
                            if (cont_rv or 0) > 0 or exact_rv is not None
                            else self.store.items(res.storage, scope))
            for stored in stored_items:
                meta = stored["metadata"]
                key = storage_key(res, meta.get("namespace", ""), meta["name"])
                if start_key is not None and key.encode() < start_key.encode():
                    continue
                # etcd3's GetList: once the page is full, any key after the last one
                # returned (a match or not) makes a continue token (etcd's More)
                if lim is not None and len(items) >= lim:
                    remaining += 1
                    continue
                if not self.matches(res, stored, ls, fs):
                    continue
                items.append(self.external(res, stored, with_type=False))
                next_key = key
            lst = {"kind": res.kind + "List", "apiVersion": res.api_version,
                   "metadata": {"resourceVersion": str(rv)}, "items": items}
            if remaining:
                lst["metadata"]["continue"] = G.encode_continue(next_key + "\x00", key_prefix,
                                                                rv)
                if not fs.terms and ls.empty():
                    lst["metadata"]["remainingItemCount"] = remaining
            return 200, lst

    # ------------------------------------------------------------ create

    def create(self, res, ns, body, query=None):
        obj = self._decode(res, body, "create")
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        stored, canonical = self._to_storage(res, obj)
        meta = stored["metadata"]
        # admission names the object before generateName makes its name
        asked = meta.get("name") or meta.get("generateName") or "Unknown"
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + _rand_suffix()
        name = meta.get("name", "")
        with self.store.lock:
            self._check_namespace(res, ns, asked)
            self._default(canonical, stored)
            if canonical.prepare_create:
                canonical.prepare_create(stored)
            self._validate(res, canonical, stored, None, name)
            if meta.get("resourceVersion"):
                raise internal("resourceVersion should not be set on objects to be created")
            for attempt in range(10):
                if self.store.get(res.storage, meta.get("namespace", ""), meta["name"]) is None:
                    break
                if not meta.get("generateName") or attempt == 9:
                    err = already_exists(res, meta["name"])
                    there = self.store.get(res.storage, meta.get("namespace", ""), meta["name"])
                    if there["metadata"].get("deletionTimestamp"):
                        # registry.Store.Create
                        err.message = "object is being deleted: " + err.message
                    raise err
                meta["name"] = meta["generateName"] + _rand_suffix()
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields",
                      "selfLink"):
                meta.pop(k, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            for k in ("finalizers", "ownerReferences", "labels", "annotations"):  # omitempty
                if not meta.get(k):
                    meta.pop(k, None)
            if canonical.generation:
                meta["generation"] = 1
            else:
                meta.pop("generation", None)
            self._manage(res, None, stored, now=meta["creationTimestamp"])
            if query_list(query, "dryRun"):
                # DryRunnableStorage.Create: the object as it would be stored, never written,
                # so with no resourceVersion (omitempty: absent)
                meta.pop("resourceVersion", None)
                return 201, self.external(res, stored)
            self.store.put(res.storage, stored)
            return 201, self.external(res, stored)

    # ------------------------------------------------------------ update / patch

    def _finish_update(self, res, canonical, ns, name, old, new, subresource,
                       dry_run=False, meta_errs=()):
        """Common tail of PUT and PATCH once the new (stored-form) object is known. meta_errs:
        ValidateObjectMetaUpdate's errors (after the object meta's own, before the kind's)."""
        meta = new.setdefault("metadata", {})  # its name and namespace checked (_check_name)
        ometa = old["metadata"]
        if subresource == "status":
            status = new.get("status")
            sent_meta = new.get("metadata") or {}
            new = copy.deepcopy(old)
            if canonical.plural == "deployments":
                # apps deploymentStatusStrategy.PrepareForUpdate keeps only spec and labels:
                # the rest of metadata (annotations, finalizers, owners) is written as sent
                labels = new["metadata"].get("labels")
                new["metadata"] = copy.deepcopy(sent_meta)
                if labels is None:
                    new["metadata"].pop("labels", None)
                else:
                    new["metadata"]["labels"] = labels
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            meta = new["metadata"]
        elif res.has_status or canonical.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        meta["name"] = name
        if res.namespaced:
            meta["namespace"] = ns
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if k in ometa:
                meta[k] = ometa[k]
            else:
                meta.pop(k, None)
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        meta["resourceVersion"] = ometa.get("resourceVersion")
        if ometa.get("deletionTimestamp"):
            newf = set(meta.get("finalizers") or [])
            if newf - set(ometa.get("finalizers") or []):
                raise invalid(res.kind, res.group, name, [FieldError(
                    "forbidden", "metadata.finalizers",
                    detail="no new finalizers can be added if the object is being deleted")])
        self._default(canonical, new)
        if canonical.plural == "namespaces" and subresource != "status":
            new["status"] = copy.deepcopy(old.get("status", {}))
            if subresource != "finalize":
                # namespaceStrategy.PrepareForUpdate: spec.finalizers only through /finalize
                fins = (old.get("spec") or {}).get("finalizers")
                spec = new.setdefault("spec", {})
                if fins is None:
                    spec.pop("finalizers", None)
                else:
                    spec["finalizers"] = copy.deepcopy(fins)
        self._validate(res, canonical, new, old, name, meta_errs)
        if canonical.generation:
            gen = ometa.get("generation", 1)
            # a Deployment's annotations move it too (apps deploymentStrategy.PrepareForUpdate:
            # they are copied to its ReplicaSets); a status write changes neither
            annotations_moved = (canonical.plural == "deployments" and subresource != "status"
                                 and (meta.get("annotations") or {}) !=
                                 (ometa.get("annotations") or {}))
            if new.get("spec") != old.get("spec") or annotations_moved or (
                    meta.get("deletionTimestamp") and not ometa.get("deletionTimestamp")):
                gen += 1
            meta["generation"] = gen
        else:
            meta.pop("generation", None)
        # omitempty: an empty list or map is not kept
        for k in ("finalizers", "ownerReferences", "labels", "annotations"):
            if not meta.get(k):
                meta.pop(k, None)
        if new == M.unmanaged(old):
            return 200, self.external(res, old)
        self._manage(res, old, new, subresource)
        if dry_run:
            return 200, self.external(res, new)
        if ometa.get("deletionTimestamp") and not meta.get("finalizers") and \
                not ometa.get("deletionGracePeriodSeconds") and not (
                canonical.plural == "namespaces" and (new.get("spec") or {}).get("finalizers")):
            # ShouldDeleteDuringUpdate (a namespace's: its spec.finalizers empty too): not
            # during a graceful period, which only a DELETE (a kubelet's, with period 0) ends;
            # deleteWithoutFinalizers answers the object as it was stored, as the DELETED
            # event carries it
            self.store.remove(res.storage, old)
            return 200, self.external(res, old)
        self.store.put(res.storage, new, old)
        return 200, self.external(res, new)

    @staticmethod
    def _check_name(res, ns, name, obj):
        """The update handler's checks of a PUT body, before any storage step:
        EnsureObjectNamespaceMatchesRequestNamespace, then checkName."""
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        if res.namespaced and meta.get("namespace", ns) not in (ns, ""):
            raise bad_request("the namespace of the provided object does not match the "
                              "namespace sent on the request")
        if not meta.get("name"):
            raise bad_request("the name of the object (%s based on URL) was undeterminable: "
                              "name must be provided" % name)
        if meta["name"] != name:
            raise bad_request("the name of the object (%s) does not match the name on the URL "
                              "(%s)" % (meta["name"], name))

    def update(self, res, ns, name, body, subresource=None, query=None):
        if subresource == "scale":
            return self.update_scale(res, ns, name, body, bool(query_list(query, "dryRun")))
        obj = self._decode(res, body, "update")
        self._check_name(res, ns, name, obj)
        stored, canonical = self._to_storage(res, obj)
        ns = ns if res.namespaced else ""
        with self.store.lock:
            old = self.store.get(res.storage, ns, name)
            if old is None and (not res.create_on_update or subresource):
                raise not_found(res, name)
            # the body's uid is a storage precondition (DefaultUpdatedObjectInfo's
            # Preconditions), checked by GuaranteedUpdate before the update function
            # compares resourceVersions, against an empty object where one may be created
            uid = (stored.get("metadata") or {}).get("uid")
            ouid = old["metadata"].get("uid", "") if old is not None else ""
            if uid and uid != ouid:
                raise conflict(res, name, "StorageError: invalid object, Code: 4, Key: "
                               "%s, ResourceVersion: 0, AdditionalErrorMsg: Precondition "
                               "failed: UID in precondition: %s, UID in object meta: %s"
                               % (storage_key(res, ns, name), uid, ouid))
            if old is None:
                return self._create_on_update(res, ns, name, obj, query)
            rv = (stored.get("metadata") or {}).get("resourceVersion")
            if not rv and not res.unconditional_update:
                # registry.Store.Update: the error names the resource as its kind
                raise invalid(res.plural, res.group, name, [FieldError(
                    "invalid", "metadata.resourceVersion", GoLiteral("0x0"),
                    "must be specified for an update")])
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            return self._finish_update(res, canonical, ns, name, old, stored, subresource,
                                       dry_run=bool(query_list(query, "dryRun")))

    def _create_on_update(self, res, ns, name, obj, query):
        """PUT of a missing object whose strategy allows create-on-update (Lease, Event):
        created as a POST would create it, 201, whatever resourceVersion the body carries
        (the storage layer clears it), once its name matches the URL's (the update handler's
        checkName). obj is the decoded body."""
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        if meta.get("name", "") != name:
            raise bad_request("the name of the object (%s) does not match the name on the URL "
                              "(%s)" % (meta.get("name", ""), name))
        meta.pop("resourceVersion", None)
        return self.create(res, ns, obj, query)

    def _apply_patch(self, ptype, current, patch):
        try:
            if ptype == "json":
                return P.json_patch(current, patch)
            if not isinstance(patch, dict):
                raise P.PatchError("json: cannot unmarshal array into Go value of type "
                                   "map[string]interface {}", code=400)
            if ptype == "strategic":
                return P.strategic_merge_patch(current, patch)
            return P.merge_patch(current, patch)
        except P.PatchError as e:
            if e.code == 400:
                raise bad_request(str(e))
            if ptype == "json":
                # applyJSPatch: an operation that does not apply is NewGenericServerResponse's
                # 422, whose message drops jsonpatch's
                raise StatusError(422, "Invalid", "the server rejected our request due to an "
                                  "error in our request", details={})
            raise StatusError(422, "Invalid", str(e))

    def patch(self, res, ns, name, body_bytes, content_type, subresource=None, query=None):
        query = query or {}
        ptype = patch_type_of(content_type)
        try:
            patch = F.loads(body_bytes.decode("utf-8") if body_bytes else "null")
        except (ValueError, UnicodeDecodeError) as e:
            if ptype == "apply":
                raise StatusError(415, "UnsupportedMediaType",
                                  "fakekube accepts apply patches only in their JSON form: %s" % e)
            # Go's encoding/json error (patch.go: a merge patch's decode says "error decoding
            # patch: "; a strategic one's json.Unmarshal and a JSON patch's DecodePatch pass it
            # as it is)
            why = G.json_syntax_error(body_bytes or b"") or str(e)
            raise bad_request(("error decoding patch: " if ptype == "merge" else "") + why)
        lit = F.overflow(patch)
        if lit:
            # a strategic merge patch is decoded into a Go map first (util/json): this is its
            # error; the other types carry numbers raw until the patched object is decoded,
            # where a typed field names itself: not modelled, the same error for them
            raise bad_request("json: cannot unmarshal number %s into Go value of type float64"
                              % lit)
        if ptype == "apply":
            # its fieldManager is required (ValidatePatchOptions, in begin_write)
            self._tls.applied = patch
        # patch.go decodes a merge patch as a map, and a JSON patch's operations, strictly
        # before applying them (not under Ignore); what they repeat comes first
        patch_errors = []
        if getattr(self._tls, "directive", "Warn") != "Ignore":
            patch_errors = F.json_patch_errors(patch) if ptype == "json" else \
                F.patch_duplicates(patch) if ptype in ("merge", "strategic") else []
        patch = F.plain(patch)
        if subresource == "scale":
            return self.patch_scale(res, ns, name, ptype, patch, patch_errors,
                                    bool(query_list(query, "dryRun")))
        ns = ns if res.namespaced else ""
        with self.store.lock:
            old = self.store.get(res.storage, ns, name)
            if old is None:
                if ptype == "apply":
                    body = dict(patch)
                    body.setdefault("metadata", {})["name"] = name
                    return self.create(res, ns, body, query)
                raise not_found(res, name)
            current = self.external(res, old)
            new_ext = self._apply_patch("merge" if ptype == "apply" else ptype, current, patch)
            if not isinstance(new_ext, dict):
                raise bad_request("patch produced a non-object")
            meta = new_ext.get("metadata")
            rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
            # decoded first (objInfo.UpdatedObject: a body that does not decode is its
            # error), then registry.Store.Update compares the resourceVersion (409), and
            # only then is the object validated (422)
            obj = self._decode(res, new_ext, "patch", patch_shown(ptype, patch, new_ext),
                               patch_errors, converted=ptype == "strategic")
            self._check_name(res, ns, name, obj)  # the patched object's, as applyPatch does
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            stored, canonical = self._to_storage(res, obj)
            # a patch sets no precondition: a uid it changes reaches BeforeUpdate, whose
            # ValidateObjectMetaUpdate refuses it first (a Deployment deleted and made again
            # is not written by a patch meant for the one before)
            uid = (stored.get("metadata") or {}).get("uid")
            meta_errs = []
            if uid and uid != old["metadata"].get("uid", ""):
                meta_errs.append(FieldError("invalid", "metadata.uid", uid, "field is immutable"))
            return self._finish_update(res, canonical, ns, name, old, stored, subresource,
                                       dry_run=bool(query_list(query, "dryRun")),
                                       meta_errs=meta_errs)

    # ------------------------------------------------------------ pods/binding

    def bind_pod(self, res, ns, name, body, query=None):
        """POST pods/NAME/binding: set spec.nodeName of an unassigned pod, as the scheduler
        does (the pod spec is otherwise immutable), and in the same update the condition
        PodScheduled=True (reason and message cleared, lastTransitionTime now when it was not
        True), as BindingREST.setPodHostAndAnnotations does.  The Binding's metadata.uid and
        resourceVersion, when given, are preconditions.  201 with a Success Status."""
        with self.store.lock:
            self._check_namespace(res, ns, name)   # admission, before the Binding's checks
        target = (body or {}).get("target") if isinstance(body, dict) else None
        node = (target or {}).get("name") if isinstance(target, dict) else None
        if not node or not isinstance(node, str):
            raise invalid("Binding", "", name, [FieldError("required", "target.name")])
        bmeta = (body.get("metadata") if isinstance(body.get("metadata"), dict) else {})
        with self.store.lock:
            old = self.store.get(res.storage, ns, name)
            if old is None:
                raise not_found(res, name)
            ometa = old["metadata"]
            if bmeta.get("uid") and bmeta["uid"] != ometa.get("uid"):
                raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in "
                                          "object meta: %s" % (bmeta["uid"], ometa.get("uid")))
            if bmeta.get("resourceVersion") and \
                    bmeta["resourceVersion"] != ometa["resourceVersion"]:
                raise conflict(res, name, "the ResourceVersion in the precondition (%s) does not "
                                          "match the ResourceVersion in record (%s). The object "
                                          "might have been modified"
                               % (bmeta["resourceVersion"], ometa["resourceVersion"]))
            why = None
            spec = old.get("spec") or {}
            if ometa.get("deletionTimestamp"):
                why = "pod %s is being deleted, cannot be assigned to a host" % name
            elif spec.get("nodeName"):
                why = 'pod %s is already assigned to node "%s"' % (name, spec["nodeName"])
            elif spec.get("schedulingGates"):
                why = "pod %s has non-empty .spec.schedulingGates" % name
            if why:
                raise StatusError(409, "Conflict", 'Operation cannot be fulfilled on '
                                  'pods/binding "%s": %s' % (name, why),
                                  {"name": name, "kind": "pods/binding"})
            new = copy.deepcopy(old)
            new.setdefault("spec", {})["nodeName"] = node
            conds = new.setdefault("status", {}).setdefault("conditions", [])
            cond = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                    "lastTransitionTime": now_rfc3339()}
            for i, c in enumerate(conds):
                if isinstance(c, dict) and c.get("type") == "PodScheduled":
                    if c.get("status") == "True" and c.get("lastTransitionTime"):
                        cond["lastTransitionTime"] = c["lastTransitionTime"]
                    conds[i] = cond
                    break
            else:
                conds.append(cond)
            if not query_list(query, "dryRun"):   # BindingREST.Create's assignPod
                self.store.put(res.storage, new, old)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                     "code": 201}

    # ------------------------------------------------------------ scale subresource

    def scale_of(self, res, stored):
        meta = stored["metadata"]
        spec = stored.get("spec") or {}
        status = stored.get("status") or {}
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                  "creationTimestamp") if k in meta},
                # autoscaling/v1 ScaleSpec.replicas and ScaleStatus.selector are omitempty
                "spec": {k: v for k, v in (("replicas", spec.get("replicas", 0)),) if v},
                "status": {k: v for k, v in (("replicas", status.get("replicas", 0)),
                                             ("selector", selector_string(spec.get("selector"))))
                           if v or k == "replicas"}}

    def get_scale(self, res, ns, name, query=None):
        self.read_at(query)
        stored = self.store.get(res.storage, ns, name)
        if stored is None:
            # ScaleREST.Get: NewNotFound(apps.Resource("deployments/scale"), name) (a PATCH or
            # PUT goes through Store.Update, which names the kind's own resource)
            kind = res.plural + "/scale"
            raise StatusError(404, "NotFound", '%s%s "%s" not found'
                              % (kind, "." + res.group if res.group else "", name),
                              _details(res, name, kind))
        return 200, self.scale_of(res, stored)

    def _write_scale(self, res, ns, name, old, scale, dry_run=False):
        if not isinstance(scale, dict):
            raise bad_request("the object provided is unrecognized (must be of type Scale)")
        smeta = scale.get("metadata") or {}
        if smeta.get("name", "") != name:
            raise bad_request("the name of the object (%s) does not match the name on the URL "
                              "(%s)" % (smeta.get("name", ""), name))
        # scaleUpdatedObjectInfo.UpdatedObject: the Scale validated, then its uid
        # precondition, then (registry.Store.Update) the resourceVersion
        # its type was checked as the body was decoded (fields.py); null decodes as 0
        replicas = (scale.get("spec") or {}).get("replicas") or 0
        if replicas < 0:
            raise invalid("Scale", "autoscaling", name, [FieldError(
                "invalid", "spec.replicas", replicas, "must be greater than or equal to 0")])
        uid, ouid = smeta.get("uid"), old["metadata"].get("uid", "")
        if uid and uid != ouid:
            sub = res.plural + "/scale"
            raise StatusError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": '
                              "Precondition failed: UID in precondition: %s, UID in object "
                              "meta: %s" % (sub + ("." + res.group if res.group else ""), name,
                                            uid, ouid), _details(res, name, sub))
        rv = smeta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        if (old.get("spec") or {}).get("replicas") == replicas:
            return 200, self.scale_of(res, old)
        new = copy.deepcopy(old)
        new.setdefault("spec", {})["replicas"] = replicas
        new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        self._manage(res, old, new, "scale")
        if not dry_run:
            self.store.put(res.storage, new, old)
        return 200, self.scale_of(res, new)

    def update_scale(self, res, ns, name, body, dry_run=False):
        with self.store.lock:
            old = self.store.get(res.storage, ns, name)
            if old is None:
                raise not_found(res, name)
            if isinstance(body, dict) and body.get("kind") not in (None, "Scale"):
                raise bad_request("the object provided is unrecognized (must be of type Scale): "
                                  "kind %s" % body.get("kind"))
            if isinstance(body, dict):
                self._decode_scale("update", None, body)
                self._check_name(res, ns, name, body)  # decoded first, as UpdateResource
                # a PUT's own uid is a storage precondition (DefaultUpdatedObjectInfo's
                # Preconditions), checked by GuaranteedUpdate before the Scale is even
                # validated, and reported as InterpretUpdateError makes of it
                uid = (body.get("metadata") or {}).get("uid")
                ouid = old["metadata"].get("uid", "")
                if uid and uid != ouid:
                    raise conflict(res, name, "StorageError: invalid object, Code: 4, Key: "
                                   "%s, ResourceVersion: 0, AdditionalErrorMsg: Precondition "
                                   "failed: UID in precondition: %s, UID in object meta: %s"
                                   % (storage_key(res, ns, name), uid, ouid))
            return self._write_scale(res, ns, name, old, body, dry_run)

    def patch_scale(self, res, ns, name, ptype, patch, patch_errors=(), dry_run=False):
        with self.store.lock:
            old = self.store.get(res.storage, ns, name)
            if old is None:
                raise not_found(res, name)
            current = self.scale_of(res, old)
            new = self._apply_patch("merge" if ptype == "apply" else ptype, current, patch)
            if isinstance(new, dict):
                self._decode_scale("patch", patch_shown(ptype, patch, new), new, patch_errors,
                                   converted=ptype == "strategic")
            return self._write_scale(res, ns, name, old, new, dry_run)

    def _decode_scale(self, verb, shown, scale, patch_errors=(), converted=False):
        """A Scale as the decoder (or for a strategic merge patch the converter) takes it: its
        first type error raised, then its strict errors as the fieldValidation says (scale: an
        update's body, or a patched Scale, whose numbers the converter may change in place)."""
        if converted:
            err = F.convert_error(SCALE.group, SCALE.kind, scale)
        else:
            err = F.type_error(SCALE.group, SCALE.kind, scale, sort=verb == "patch")
        if err:
            raise decode_error(SCALE, verb, shown, err)
        self._strict(SCALE, verb, shown, scale, scale, patch_errors, converted)

    # ------------------------------------------------------------ delete

    def _delete_options(self, body, query):
        """DeleteOptions as the delete handlers read them (handlers/delete.go): from the body
        when there is one, and then the query is not read at all; else from the query
        (DecodeParameters: a gracePeriodSeconds that strconv.ParseInt refuses is 400). Then
        ValidateDeleteOptions: 422 Invalid DeleteOptions.meta.k8s.io, before the object is
        looked up."""
        if body is not None:
            opts = {k: v for k, v in body.items() if v is not None}
        else:
            opts = {}
            grace = query_int64(query, "gracePeriodSeconds")
            if grace is not None:
                opts["gracePeriodSeconds"] = grace
            if "orphanDependents" in query:
                opts["orphanDependents"] = query_bool(query["orphanDependents"])
            if "propagationPolicy" in query:
                opts["propagationPolicy"] = query["propagationPolicy"]
            if "dryRun" in query:
                opts["dryRun"] = query_list(query, "dryRun")
        errs = validate_delete_options(opts)
        if errs:
            raise invalid("DeleteOptions", "meta.k8s.io", "", errs)
        return opts

    def delete(self, res, ns, name, body, query):
        opts = self._delete_options(body, query)
        ns = ns if res.namespaced else ""
        if res.storage == "core/namespaces" and name in IMMORTAL_NAMESPACES:
            # the NamespaceLifecycle admission plugin
            raise StatusError(403, "Forbidden", 'namespaces "%s" is forbidden: this namespace '
                              "may not be deleted" % name, _details(res, name))
        with self.store.lock:
            old = self.store.get(res.storage, ns, name)
            if old is None:
                raise not_found(res, name)
            if res.storage == "core/namespaces":
                answer = self._delete_namespace(res, old, opts)
                if answer is not None:
                    return answer
                # one terminating with spec.finalizers empty: registry.Store.Delete
            pre = opts.get("preconditions") or {}
            ometa = old["metadata"]
            # rest.BeforeDelete: the Conflict names the kind, not the resource
            # (pointers there: an empty one set is compared too)
            why = None
            if pre.get("uid") is not None and pre["uid"] != ometa.get("uid"):
                why = ("the UID in the precondition (%s) does not match the UID in record (%s). "
                       "The object might have been deleted and then recreated"
                       % (pre["uid"], ometa.get("uid")))
            elif pre.get("resourceVersion") is not None and \
                    pre["resourceVersion"] != ometa["resourceVersion"]:
                why = ("the ResourceVersion in the precondition (%s) does not match the "
                       "ResourceVersion in record (%s). The object might have been modified"
                       % (pre["resourceVersion"], ometa["resourceVersion"]))
            if why:
                qual = res.kind if not res.group else "%s.%s" % (res.kind, res.group)
                raise StatusError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                                  % (qual, name, why), _details(res, name, res.kind))
            # a dry run answers what the delete would (the object marked, or the
            # deleted object's Status) and writes nothing: the storage's dryRun
            dry = bool(opts.get("dryRun"))
            graceful, pending = self._before_delete(res, old, opts)
            code = 202 if opts.get("orphanDependents") is False else 200
            if pending:
                # a graceful deletion under way, not shortened: answered as it is, the
                # options' finalizers not applied (registry.Store.Delete's finalizeDelete)
                return code, self.external(res, old)
            # registry.Store.Delete: the GC finalizers the options (else the object's own,
            # else the kind's default policy) ask for, even on an object being deleted already;
            # with any finalizer the object is only marked (markAsDeleting, unless the deletion
            # is graceful: the first deletionTimestamp kept, the generation moved once) and
            # answered 200, or 202 when orphanDependents was false (handlers/delete.go); a
            # no-op writes nothing
            _, finalizers = GC.deletion_finalizers(res, ometa, opts)
            if graceful:
                # updateForGracefulDeletionAndFinalizers: the grace period written first (a
                # MODIFIED event), then, with no finalizer and a period of 0, the delete
                new = copy.deepcopy(old)
                new["metadata"].update(graceful)
                if finalizers:
                    new["metadata"]["finalizers"] = finalizers
                else:
                    new["metadata"].pop("finalizers", None)
                kept = finalizers or graceful["deletionGracePeriodSeconds"]
                if dry:  # a dry run's deletion answers the object as the update left it
                    return (code if kept else 200), self.external(res, new)
                self.store.put(res.storage, new, old)
                if kept:
                    return code, self.external(res, new)
                final = self.store.remove(res.storage, self.store.get(res.storage, ns, name))
                return 200, self._deleted_response(res, final)
            if finalizers:
                new = copy.deepcopy(old)
                nmeta = new["metadata"]
                nmeta["finalizers"] = finalizers
                if not ometa.get("deletionTimestamp"):
                    nmeta["deletionTimestamp"] = now_rfc3339()
                    if res.generation or (self.registry.storage_of(res.storage) or res).generation:
                        nmeta["generation"] = ometa.get("generation", 1) + 1
                nmeta["deletionGracePeriodSeconds"] = 0
                if new == old:
                    return code, self.external(res, old)
                if dry:
                    return code, self.external(res, new)
                self.store.put(res.storage, new, old)
                return code, self.external(res, new)
            # no finalizer (or the options took the last one away: errDeleteNow)
            if dry:
                return 200, self._deleted_response(res, old)
            final = self.store.remove(res.storage, old)
            return 200, self._deleted_response(res, final)

    @staticmethod
    def _before_delete(res, old, opts):
        """rest.BeforeDelete with the pod strategy's CheckGracefulDelete (pods are the one
        kind here that deletes gracefully): (the metadata a graceful deletion writes, or None;
        whether a graceful deletion is pending). A pod's period is the options' (a negative
        one is 1), else its spec.terminationGracePeriodSeconds; 0 when it is not bound to a
        node or has ended (Succeeded, Failed). deletionTimestamp is now plus the period. On a
        pod being deleted with a period above 0 the options may only shorten it (the
        deletionTimestamp moved back by the difference); without a shorter one the deletion
        is pending."""
        if res.storage != "core/pods":
            return None, False
        meta = old["metadata"]
        grace = opts.get("gracePeriodSeconds")
        if grace is not None and grace < 0:
            grace = 1
        if meta.get("deletionTimestamp"):
            period = meta.get("deletionGracePeriodSeconds")
            if period is not None and period < 0:
                period = 1
            if not period:
                return None, False
            if grace is None or grace >= period:
                return None, True
            when = parse_rfc3339(meta["deletionTimestamp"]) - datetime.timedelta(
                seconds=period - grace)
            return {"deletionTimestamp": format_rfc3339(when),
                    "deletionGracePeriodSeconds": grace}, False
        spec, status = old.get("spec") or {}, old.get("status") or {}
        period = grace if grace is not None else (spec.get("terminationGracePeriodSeconds") or 0)
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            period = 0
        period = 1 if period < 0 else period
        out = {"deletionTimestamp": format_rfc3339(
            datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=period)),
            "deletionGracePeriodSeconds": period}
        if meta.get("generation", 0) > 0:
            out["generation"] = meta["generation"] + 1
        return out, False

    def _deleted_response(self, res, final):
        if res.plural in RETURN_DELETED and not res.group:
            return self.external(res, final)
        details = {"name": final["metadata"]["name"]}
        if res.group:
            details["group"] = res.group
        details["kind"] = res.plural
        details["uid"] = final["metadata"].get("uid", "")
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": details}

    def _delete_namespace(self, res, old, opts):
        """The namespace REST's Delete: its own preconditions (the namespace's UID always one,
        a conflict worded its own way); the first DELETE marks it (deletionTimestamp, phase
        Terminating, the GC finalizers the options ask for: shouldHaveOrphanFinalizer,
        shouldHaveDeleteDependentsFinalizer) and answers it (202 when orphanDependents was
        false); a later one answers it as it is while spec.finalizers holds anything, and
        else returns None: registry.Store.Delete goes on with the options (the nsctl.py
        controller then finalizes it, which deletes it once no finalizer is left)."""
        meta = old["metadata"]
        pre = opts.get("preconditions") or {}
        why = None
        if pre.get("uid") is not None and pre["uid"] != meta.get("uid"):
            why = "UID in precondition: %s, UID in object meta: %s" % (pre["uid"], meta.get("uid"))
        elif pre.get("resourceVersion") is not None and \
                pre["resourceVersion"] != meta["resourceVersion"]:
            why = "ResourceVersion in precondition: %s, ResourceVersion in object meta: %s" % (
                pre["resourceVersion"], meta["resourceVersion"])
        if why:
            raise StatusError(409, "Conflict", 'Operation cannot be fulfilled on namespaces '
                              '"%s": Precondition failed: %s' % (meta["name"], why),
                              _details(res, meta["name"]))
        code = 202 if opts.get("orphanDependents") is False else 200
        if not meta.get("deletionTimestamp"):
            new = copy.deepcopy(old)
            nmeta = new["metadata"]
            nmeta["deletionTimestamp"] = now_rfc3339()
            new.setdefault("status", {})["phase"] = "Terminating"
            fins = nmeta.get("finalizers") or []
            orphan, foreground = GC.ORPHAN in fins, GC.FOREGROUND in fins
            if opts.get("orphanDependents") is not None:
                orphan = bool(opts["orphanDependents"])
                foreground = not orphan
            elif opts.get("propagationPolicy") is not None:
                orphan = opts["propagationPolicy"] == "Orphan"
                foreground = opts["propagationPolicy"] == "Foreground"
            want = [f for f in fins if f not in (GC.ORPHAN, GC.FOREGROUND)] + \
                [GC.ORPHAN] * orphan + [GC.FOREGROUND] * foreground
            if set(want) != set(fins):
                nmeta["finalizers"] = want  # (a Go map's order there; this one is stable)
            if not nmeta.get("finalizers"):
                nmeta.pop("finalizers", None)
            if not opts.get("dryRun"):
                self.store.put(res.storage, new, old)
            return code, self.external(res, new)
        if (old.get("spec") or {}).get("finalizers"):
            return code, self.external(res, old)
        return None

    def delete_collection(self, res, ns, body, query):
        # DeleteCollection reads the ListOptions first, then the DeleteOptions
        lo = self.list_options(res, query)
        ls, fs = lo.ls, lo.fs
        if callable(body):
            body = body()   # the server's decoding of the body, read after the list options
        opts = self._delete_options(body, query)
        with self.store.lock:
            items = []
            for stored in list(self.store.items(res.storage, ns if res.namespaced else None)):
                if not self.matches(res, stored, ls, fs):
                    continue
                if opts.get("dryRun"):
                    items.append(self.external(res, stored, with_type=False))
                    continue
                # each item with the request's DeleteOptions (registry.Store.DeleteCollection)
                _, obj = self.delete(res, stored["metadata"].get("namespace", ""),
                                     stored["metadata"]["name"], dict(opts), {})
                if obj.get("kind") == "Status":
                    obj = self.external(res, stored, with_type=False)
                obj.pop("kind", None)
                obj.pop("apiVersion", None)
                items.append(obj)
            return 200, {"kind": res.kind + "List", "apiVersion": res.api_version,
                         "metadata": {"resourceVersion": str(self.store.current_rv())},
                         "items": items}

    # ------------------------------------------------------------ watch filtering

    def watch_filter(self, res, ls, fs):
        """Return f(event) -> (type, external object) or None, applying the selectors to both
        the new and the previous state, as the watch cache does: an update that makes an object
        leave the selection is sent as DELETED (with the previous state and the event's RV) and
        one that makes it enter as ADDED."""
        everything = ls.empty() and not fs.terms

        def f(ev):
            if everything:
                return ev.type, self.external(res, ev.obj)
            if ev.type == "DELETED":
                return (ev.type, self.external(res, ev.obj)) if self.matches(
                    res, ev.obj, ls, fs) else None
            cur = self.matches(res, ev.obj, ls, fs)
            old = ev.prev is not None and self.matches(res, ev.prev, ls, fs)
            if cur and old:
                return "MODIFIED", self.external(res, ev.obj)
            if cur:
                return "ADDED", self.external(res, ev.obj)
            if old:
                prev = copy.deepcopy(ev.prev)
                prev["metadata"]["resourceVersion"] = str(ev.rv)
                return "DELETED", self.external(res, prev)
            return None
        return f

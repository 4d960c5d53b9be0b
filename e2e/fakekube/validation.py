# SPDX-License-Identifier: Apache-2.0
"""Field errors and the object validation rules of kube-apiserver for the kinds fakekube serves.

Validators return a list of FieldError; the server turns a non-empty list into a 422 Invalid
Status whose message and causes read like the real server's ("spec.selector: Required value").
Only the rules that matter to gpuscaler's workloads are implemented, but each one uses the
upstream wording.
"""

import base64
import binascii
import json
import re

from .kselectors import (LabelSelector, SelectorError, go_quote, label_value_errors,
                         qualified_name_errors)

# used with fullmatch only: Go's ^...$ match the whole text, where Python's $ also matches
# before a final "\n" (a name "web\n" passed)
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")

MSG_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
MSG_LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
             "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
             "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
MSG_1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character (e.g. "
            "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


_B64 = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def go_base64_error(text):
    """The error Go's base64.StdEncoding.Decode gives for text ("illegal base64 data at input
    byte N", as encoding/json reports it for a []byte field), or None when it decodes.  Go
    skips CR and LF anywhere, wants '=' padding to a multiple of 4, and stops after it."""
    src = text.encode("utf-8", "surrogatepass")
    si, n = 0, len(src)
    bad = "illegal base64 data at input byte %d"
    while True:
        j = 0
        while j < 4:
            if si == n:
                if j == 0:
                    return None
                return bad % (si - j)
            c = src[si]
            si += 1
            if c in _B64:
                j += 1
                continue
            if c in (0x0A, 0x0D):
                continue
            if c != 0x3D:
                return bad % (si - 1)
            if j in (0, 1):
                return bad % (si - 1)
            if j == 2:
                while si < n and src[si] in (0x0A, 0x0D):
                    si += 1
                if si == n:
                    return bad % n
                if src[si] != 0x3D:
                    return bad % (si - 1)
                si += 1
            while si < n and src[si] in (0x0A, 0x0D):
                si += 1
            if si < n:
                return bad % si
            return None


class GoLiteral(str):
    """A value already in the form Go prints it (a uint64 0 by %#v is 0x0)."""


def go_repr(v):
    """Format a value roughly as Go's %#v does in field.Invalid messages."""
    if isinstance(v, GoLiteral):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, (int, float)):
        return str(v)
    if v is None:
        return "null"
    if isinstance(v, dict) and all(isinstance(x, str) for x in v.values()):
        return "map[string]string{%s}" % ", ".join(
            "%s:%s" % (json.dumps(k), json.dumps(x)) for k, x in sorted(v.items()))
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


class FieldError:
    """One validation failure, shaped like k8s.io/apimachinery/pkg/util/validation/field.Error."""

    REASONS = {
        "required": "FieldValueRequired",
        "invalid": "FieldValueInvalid",
        "notsupported": "FieldValueNotSupported",
        "forbidden": "FieldValueForbidden",
        "duplicate": "FieldValueDuplicate",
        "toolong": "FieldValueTooLong",
    }

    def __init__(self, kind, field, value=None, detail="", supported=None):
        self.kind = kind
        self.field = field
        self.value = value
        self.detail = detail
        self.supported = supported or []

    @property
    def reason(self):
        return self.REASONS[self.kind]

    def body(self):
        if self.kind == "required":
            s = "Required value"
        elif self.kind == "invalid":
            s = "Invalid value: %s" % go_repr(self.value)
        elif self.kind == "notsupported":
            s = "Unsupported value: %s" % go_repr(self.value)
            if self.supported:
                s += ": supported values: " + ", ".join(go_quote(x) for x in self.supported)
        elif self.kind == "forbidden":
            s = "Forbidden"
        elif self.kind == "duplicate":
            s = "Duplicate value: %s" % go_repr(self.value)
        else:
            # field.TooLong: "must have at most N bytes"
            return "Too long: must have at most %s bytes" % self.detail
        if self.detail:
            s += ": " + self.detail
        return s

    def __str__(self):
        return "%s: %s" % (self.field, self.body())


def validate_name(name, style):
    """Return a list of messages for an invalid object name under the given naming style."""
    if style == "path":
        if name in (".", ".."):
            return ["may not be '%s'" % name]
        out = []
        for ch in ("/", "%"):
            if ch in name:
                out.append("may not contain '%s'" % ch)
        return out
    # lengths are Go's len(): bytes
    if style == "label":
        out = []
        if len(name.encode()) > 63:
            out.append("must be no more than 63 characters")
        if not DNS1123_LABEL.fullmatch(name):
            out.append(MSG_LABEL)
        return out
    if style == "1035":
        out = []
        if len(name.encode()) > 63:
            out.append("must be no more than 63 characters")
        if not DNS1035_LABEL.fullmatch(name):
            out.append(MSG_1035)
        return out
    out = []
    if len(name.encode()) > 253:
        out.append("must be no more than 253 characters")
    if not DNS1123_SUBDOMAIN.fullmatch(name):
        out.append(MSG_SUBDOMAIN)
    return out


def validate_meta(meta, name_style, namespaced):
    errs = []
    name = meta.get("name") or ""
    if not name and not meta.get("generateName"):
        errs.append(FieldError("required", "metadata.name", detail="name or generateName is required"))
    elif name:
        for m in validate_name(name, name_style):
            errs.append(FieldError("invalid", "metadata.name", name, m))
    if namespaced and not meta.get("namespace"):
        errs.append(FieldError("required", "metadata.namespace"))
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        errs.append(FieldError("invalid", "metadata.labels", labels, "must be a map"))
        labels = {}
    errs.extend(label_errors(labels, "metadata.labels"))
    ann = meta.get("annotations") or {}
    total = 0
    for k, v in ann.items():
        # ValidateAnnotations: IsQualifiedName of the key in lower case, each message
        for e in qualified_name_errors(k.lower()):
            errs.append(FieldError("invalid", "metadata.annotations", k, e))
        # Go's len(): bytes of the UTF-8 text, not characters
        total += len(k.encode()) + len((v if isinstance(v, str) else json.dumps(v)).encode())
    if total > 256 * 1024:
        errs.append(FieldError("toolong", "metadata.annotations", detail="262144"))
    return errs


def label_errors(labels, path):
    """ValidateLabels (meta/v1/validation): for each label, one error per message of
    IsQualifiedName for its key, then one per message of IsValidLabelValue for its value
    (Go ranges over the map in no order; fakekube in the body's). The 422's message names each
    distinct message once (field.ErrorList.ToAggregate), its causes every error."""
    errs = []
    for k, v in labels.items():
        for e in qualified_name_errors(k):
            errs.append(FieldError("invalid", path, k, e))
        v = "" if v is None else v
        for e in label_value_errors(v if isinstance(v, str) else str(v)):
            errs.append(FieldError("invalid", path, v, e))
    return errs


def selector_of(sel):
    """LabelSelector from a metav1.LabelSelector dict, or None when it does not parse."""
    try:
        return LabelSelector.from_label_selector(sel)
    except SelectorError:
        return None


def validate_label_selector(sel, path):
    errs = []
    if not isinstance(sel, dict):
        return [FieldError("invalid", path, sel, "must be an object")]
    errs.extend(label_errors(sel.get("matchLabels") or {}, path + ".matchLabels"))
    for i, ex in enumerate(sel.get("matchExpressions") or []):
        p = "%s.matchExpressions[%d]" % (path, i)
        op = ex.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            errs.append(FieldError("invalid", p + ".operator", op, "not a valid selector operator"))
        elif op in ("In", "NotIn") and not ex.get("values"):
            errs.append(FieldError("required", p + ".values",
                                   detail="must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and ex.get("values"):
            errs.append(FieldError("forbidden", p + ".values",
                                   detail="may not be specified when `operator` is 'Exists' or "
                                          "'DoesNotExist'"))
        # ValidateLabelSelectorRequirement: then ValidateLabelName of the key
        key = ex.get("key")
        key = "" if key is None else str(key)
        for e in qualified_name_errors(key):
            errs.append(FieldError("invalid", p + ".key", key, e))
    return errs


def validate_pod_spec(spec, path):
    errs = []
    if not isinstance(spec, dict):
        return [FieldError("required", path)]
    containers = spec.get("containers")
    if not containers:
        errs.append(FieldError("required", path + ".containers"))
        containers = []
    seen = set()
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            p = "%s.%s[%d]" % (path, group, i)
            n = c.get("name") or ""
            if not n:
                errs.append(FieldError("required", p + ".name"))
            else:
                for m in validate_name(n, "label"):
                    errs.append(FieldError("invalid", p + ".name", n, m))
                if n in seen:
                    errs.append(FieldError("duplicate", p + ".name", n))
                seen.add(n)
            if not c.get("image"):
                errs.append(FieldError("required", p + ".image"))
            for j, port in enumerate(c.get("ports") or []):
                cp = port.get("containerPort")
                if not isinstance(cp, int) or not 1 <= cp <= 65535:
                    errs.append(FieldError("invalid", "%s.ports[%d].containerPort" % (p, j), cp,
                                           "must be between 1 and 65535, inclusive"))
    rp = spec.get("restartPolicy")
    if rp not in (None, "Always", "OnFailure", "Never"):
        errs.append(FieldError("notsupported", path + ".restartPolicy", rp,
                               supported=["Always", "OnFailure", "Never"]))
    return errs


def nonneg(obj, key, path, errs, positive=False):
    v = obj.get(key)
    if v is None:
        return
    if not isinstance(v, int) or isinstance(v, bool):
        errs.append(FieldError("invalid", path, v, "must be an integer"))
    elif positive and v <= 0:
        errs.append(FieldError("invalid", path, v, "must be greater than 0"))
    elif v < 0:
        errs.append(FieldError("invalid", path, v, "must be greater than or equal to 0"))


def validate_workload(obj, old, needs_template_match=True):
    """Deployment / ReplicaSet / StatefulSet (apps/v1) spec rules."""
    errs = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [FieldError("required", "spec.selector"),
                FieldError("required", "spec.template.spec.containers")]
    nonneg(spec, "replicas", "spec.replicas", errs)
    sel = spec.get("selector")
    if sel is None:
        errs.append(FieldError("required", "spec.selector"))
    else:
        serrs = validate_label_selector(sel, "spec.selector")
        errs.extend(serrs)
        parsed = selector_of(sel)
        if not serrs and parsed is not None and parsed.empty():
            errs.append(FieldError("invalid", "spec.selector", sel,
                                   "empty selector is invalid for deployment"))
        tmpl = spec.get("template") or {}
        tlabels = (tmpl.get("metadata") or {}).get("labels") or {}
        if not serrs and parsed is not None and not parsed.empty() and needs_template_match:
            if not parsed.matches(tlabels):
                errs.append(FieldError("invalid", "spec.template.metadata.labels", tlabels,
                                       "`selector` does not match template `labels`"))
        if old is not None and (old.get("spec") or {}).get("selector") != sel:
            errs.append(FieldError("invalid", "spec.selector", sel, "field is immutable"))
    tmpl = spec.get("template")
    if not isinstance(tmpl, dict):
        errs.append(FieldError("required", "spec.template.spec.containers"))
    else:
        errs.extend(validate_meta_labels_only(tmpl.get("metadata") or {},
                                              "spec.template.metadata"))
        errs.extend(validate_pod_spec(tmpl.get("spec"), "spec.template.spec"))
        rp = (tmpl.get("spec") or {}).get("restartPolicy")
        if rp not in (None, "Always"):
            errs.append(FieldError("notsupported", "spec.template.spec.restartPolicy", rp,
                                   supported=["Always"]))
    nonneg(spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", errs)
    nonneg(spec, "minReadySeconds", "spec.minReadySeconds", errs)
    strat = spec.get("strategy") or {}
    if strat.get("type") not in (None, "RollingUpdate", "Recreate") and "replicas" in spec \
            and obj.get("kind", "Deployment") == "Deployment":
        errs.append(FieldError("notsupported", "spec.strategy.type", strat.get("type"),
                               supported=["Recreate", "RollingUpdate"]))
    return errs


def validate_meta_labels_only(meta, path):
    return label_errors(meta.get("labels") or {}, path + ".labels")


def validate_hpa(obj, old):
    errs = []
    spec = obj.get("spec") or {}
    ref = spec.get("scaleTargetRef") or {}
    if not ref.get("kind"):
        errs.append(FieldError("required", "spec.scaleTargetRef.kind"))
    if not ref.get("name"):
        errs.append(FieldError("required", "spec.scaleTargetRef.name"))
    mn = spec.get("minReplicas", 1)
    mx = spec.get("maxReplicas")
    if isinstance(mn, int) and mn < 1:
        errs.append(FieldError("invalid", "spec.minReplicas", mn,
                               "must be greater than or equal to 1"))
    if not isinstance(mx, int) or mx < 1:
        errs.append(FieldError("invalid", "spec.maxReplicas", mx, "must be greater than 0"))
    elif isinstance(mn, int) and mx < mn:
        errs.append(FieldError("invalid", "spec.maxReplicas", mx,
                               "must be greater than or equal to `minReplicas`"))
    for i, m in enumerate(spec.get("metrics") or []):
        t = m.get("type")
        if t not in ("Object", "Pods", "Resource", "External", "ContainerResource"):
            errs.append(FieldError("notsupported", "spec.metrics[%d].type" % i, t,
                                   supported=["ContainerResource", "External", "Object", "Pods",
                                              "Resource"]))
    return errs


def validate_pdb(obj, old):
    spec = obj.get("spec") or {}
    errs = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errs.append(FieldError("invalid", "spec", spec,
                               "minAvailable and maxUnavailable cannot be both set"))
    if spec.get("selector") is not None:
        errs.extend(validate_label_selector(spec["selector"], "spec.selector"))
    return errs


def validate_lease(obj, old):
    spec = obj.get("spec") or {}
    errs = []
    nonneg(spec, "leaseDurationSeconds", "spec.leaseDurationSeconds", errs, positive=True)
    nonneg(spec, "leaseTransitions", "spec.leaseTransitions", errs)
    return errs


MSG_CONFIG_KEY = ("a valid config key must consist of alphanumeric characters, '-', '_' or "
                  "'.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                  "validation is '[-._a-zA-Z0-9]+')")


def config_key_errors(key):
    """validation.IsConfigMapKey's messages (util/validation/validation.go): at most 253
    bytes, [-._a-zA-Z0-9]+, and hasChDirPrefix: not ".", not "..", not starting with ".."."""
    errs = []
    if len(key.encode()) > 253:
        errs.append("must be no more than 253 characters")
    if not CONFIG_KEY.fullmatch(key):
        errs.append(MSG_CONFIG_KEY)
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _binary_len(v):
    """The decoded length of a []byte value (base64 by now: the decoding refused the rest)."""
    try:
        return len(base64.b64decode(v, validate=True))
    except (ValueError, binascii.Error):
        return len(v) * 3 // 4


def validate_configmap(obj, old):
    """ValidateConfigMap, after ValidateConfigMapUpdate's immutability checks on an update
    (core/validation/validation.go). Each bad key is data[key] or binaryData[key], one error
    per IsConfigMapKey message (Go ranges over a map in no order; fakekube in key order); a
    key in both maps is data[key]'s error. data and binaryData together at most 1 MiB
    (core.MaxSecretSize), binaryData counted decoded; that error is about the whole object:
    field.NewPath(""), which prints "[]"."""
    errs = _immutable_data(obj, old, ("data", "binaryData"))
    data = obj.get("data") or {}
    binary = obj.get("binaryData") or {}
    total = 0
    for k in sorted(data):
        for m in config_key_errors(k):
            errs.append(FieldError("invalid", "data[%s]" % k, k, m))
        if k in binary:
            errs.append(FieldError("invalid", "data[%s]" % k, k,
                                   "duplicate of key present in binaryData"))
        if isinstance(data[k], str):
            total += len(data[k].encode())
    for k in sorted(binary):
        for m in config_key_errors(k):
            errs.append(FieldError("invalid", "binaryData[%s]" % k, k, m))
        if isinstance(binary[k], str):
            total += _binary_len(binary[k])
    if total > MAX_CONFIGMAP_BYTES:
        errs.append(FieldError("toolong", "[]", detail=str(MAX_CONFIGMAP_BYTES)))
    return errs


MAX_CONFIGMAP_BYTES = 1024 * 1024


def _immutable_data(obj, old, fields):
    """An update of an object whose `immutable` is set: the flag first, then each field."""
    errs = []
    if old is not None and old.get("immutable"):
        if not obj.get("immutable"):
            errs.append(FieldError("forbidden", "immutable",
                                   detail="field is immutable when `immutable` is set"))
        for f in fields:
            if (obj.get(f) or {}) != (old.get(f) or {}):
                errs.append(FieldError("forbidden", f,
                                       detail="field is immutable when `immutable` is set"))
    return errs


def validate_secret(obj, old):
    """ValidateSecret's keys (IsConfigMapKey, as a ConfigMap's) and its size (the decoded data,
    stringData merged into it, at most 1 MiB), after ValidateSecretUpdate's checks of type and
    immutability on an update."""
    errs = []
    if old is not None and old.get("type") != obj.get("type"):
        errs.append(FieldError("invalid", "type", obj.get("type"), "field is immutable"))
    errs.extend(_immutable_data(obj, old, ("data",)))
    data = obj.get("data") or {}
    total = 0
    for k in sorted(data):
        for m in config_key_errors(k):
            errs.append(FieldError("invalid", "data[%s]" % k, k, m))
        if isinstance(data[k], str):
            total += _binary_len(data[k])
    # ValidateSecret: the decoded values together at most core.MaxSecretSize, 1 MiB
    # ("data: Too long: must have at most 1048576 bytes")
    if total > MAX_CONFIGMAP_BYTES:
        errs.append(FieldError("toolong", "data", detail=str(MAX_CONFIGMAP_BYTES)))
    return errs


def validate_service(obj, old):
    errs = []
    spec = obj.get("spec") or {}
    headless = spec.get("clusterIP") == "None"
    stype = spec.get("type", "ClusterIP")
    if stype not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        errs.append(FieldError("notsupported", "spec.type", stype,
                               supported=["ClusterIP", "ExternalName", "LoadBalancer",
                                          "NodePort"]))
    ports = spec.get("ports") or []
    if not ports and not headless and stype != "ExternalName":
        errs.append(FieldError("required", "spec.ports"))
    names = set()
    for i, p in enumerate(ports):
        port = p.get("port")
        if not isinstance(port, int) or not 1 <= port <= 65535:
            errs.append(FieldError("invalid", "spec.ports[%d].port" % i, port,
                                   "must be between 1 and 65535, inclusive"))
        if len(ports) > 1 and not p.get("name"):
            errs.append(FieldError("required", "spec.ports[%d].name" % i))
        if p.get("name") in names:
            errs.append(FieldError("duplicate", "spec.ports[%d].name" % i, p.get("name")))
        names.add(p.get("name"))
    if old is not None:
        oip = (old.get("spec") or {}).get("clusterIP")
        if oip and spec.get("clusterIP") not in (oip, None) and stype != "ExternalName":
            errs.append(FieldError("invalid", "spec.clusterIPs[0]", spec.get("clusterIP"),
                                   "may not change once set"))
    return errs


def validate_pod(obj, old):
    errs = validate_pod_spec(obj.get("spec"), "spec")
    if old is not None and not errs:
        def strip(spec):
            s = json.loads(json.dumps(spec or {}))
            for group in ("containers", "initContainers"):
                for c in s.get(group) or []:
                    c.pop("image", None)
            s.pop("activeDeadlineSeconds", None)
            s.pop("tolerations", None)
            return s
        if strip(obj.get("spec")) != strip(old.get("spec")):
            errs.append(FieldError("forbidden", "spec", detail=(
                "pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                "`spec.tolerations` (only additions to existing tolerations),"
                "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                "previously negative)")))
    return errs


# core/validation/events.go: ReportingInstanceLengthLimit, ActionLengthLimit, ReasonLengthLimit
EVENT_LIMITS = (("reportingInstance", 128), ("action", 128), ("reason", 128))
NOTE_LENGTH_LIMIT = 1024


def _legacy_event(ev, controller_field="reportingController"):
    """legacyValidateEvent (core/validation/events.go), which every Event passes whichever API
    wrote it; ev is the stored (core/v1) form, and the paths are the internal type's. An Event
    without an eventTime is an old one: only its namespace and its object's must agree (an
    object without one: the Event in "" or default). With an eventTime, an object without a
    namespace is for default and kube-system only, and the reporting fields, action and reason
    are required (lengths in bytes, as Go's len). Its type is not checked here. The reporting
    controller's errors name controller_field: "reportingComponent" for a core/v1 request,
    the field it has there (kubernetes#111506, 1.25)."""
    errs = []
    ns = (ev.get("metadata") or {}).get("namespace") or ""
    io = ev.get("involvedObject") if isinstance(ev.get("involvedObject"), dict) else {}
    ions = io.get("namespace") or ""
    mismatch = FieldError("invalid", "involvedObject.namespace", ions,
                          "does not match event.namespace")
    if not ev.get("eventTime"):
        if (ions and ions != ns) or (not ions and ns not in ("", "default")):
            errs.append(mismatch)
    else:
        if not ions and ns not in ("default", "kube-system"):
            errs.append(mismatch)
        rc = ev.get("reportingComponent") or ""
        if not rc:
            errs.append(FieldError("required", controller_field))
        for m in qualified_name_errors(rc):
            errs.append(FieldError("invalid", controller_field, rc, m))
        for f, limit in EVENT_LIMITS:
            v = ev.get(f) or ""
            if not v:
                errs.append(FieldError("required", f))
            if len(v.encode()) > limit:
                errs.append(FieldError("invalid", f, "", "can have at most %d characters" % limit))
        if len((ev.get("message") or "").encode()) > NOTE_LENGTH_LIMIT:
            errs.append(FieldError("invalid", "message", "", "can have at most %d characters"
                                   % NOTE_LENGTH_LIMIT))
    for m in validate_name(ns, "subdomain"):
        errs.append(FieldError("invalid", "namespace", ns, m))
    return errs


def validate_core_event(obj, old):
    """ValidateEventCreate and ValidateEventUpdate for a core/v1 request: the legacy rules
    alone, for backwards compatibility (no type, no immutability)."""
    return _legacy_event(obj, "reportingComponent")


def _event_series(ev):
    """validateV1EventSeries."""
    series = ev.get("series")
    if not isinstance(series, dict):
        return []
    errs = []
    if (series.get("count") or 0) < 2:
        errs.append(FieldError("invalid", "series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        errs.append(FieldError("required", "series.lastObservedTime"))
    return errs


_OBJECT_REFERENCE = (("Kind", "kind"), ("Namespace", "namespace"), ("Name", "name"),
                     ("UID", "uid"), ("APIVersion", "apiVersion"),
                     ("ResourceVersion", "resourceVersion"), ("FieldPath", "fieldPath"))
_EVENT_SOURCE = (("Component", "component"), ("Host", "host"))


def _go_struct(type_name, fields, d):
    """Go's %#v of a struct of strings (core.ObjectReference, core.EventSource), as a
    field.Error prints a value it has no better form for."""
    d = d if isinstance(d, dict) else {}
    return GoLiteral("%s{%s}" % (type_name, ", ".join(
        "%s:%s" % (go, go_quote(str(d.get(k) or ""))) for go, k in fields)))


def _go_time(v):
    """time.Time.String() of a stored Time or MicroTime (UTC, fraction without its trailing
    zeros), as a field.Error prints a fmt.Stringer; the zero time when unset."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.(\d+))?Z", v or "")
    if not m:
        return GoLiteral("0001-01-01 00:00:00 +0000 UTC")
    frac = (m.group(3) or "").rstrip("0")
    return GoLiteral("%s %s%s +0000 UTC" % (m.group(1), m.group(2), "." + frac if frac else ""))


def _event_value(ev, path):
    """An Event's field as ValidateImmutableField compares and prints it."""
    v = ev.get("reportingComponent" if path == "reportingController" else path)
    if path == "involvedObject":
        return _go_struct("core.ObjectReference", _OBJECT_REFERENCE, v)
    if path == "related":
        return _go_struct("core.ObjectReference", _OBJECT_REFERENCE, v) \
            if isinstance(v, dict) else None
    if path == "source":
        return _go_struct("core.EventSource", _EVENT_SOURCE, v)
    if path in ("firstTimestamp", "lastTimestamp", "eventTime"):
        return _go_time(v)
    if path == "count":
        return v or 0
    return v or ""


# ValidateEventUpdate's immutable fields, in its order (reason is checked twice there)
EVENT_IMMUTABLE = ("involvedObject", "reason", "message", "source", "firstTimestamp",
                   "lastTimestamp", "count", "reason", "type", "eventTime", "action", "related",
                   "reportingController", "reportingInstance")


def validate_events_v1(obj, old):
    """ValidateEventCreate and ValidateEventUpdate for an events.k8s.io/v1 request, on the
    stored (core/v1) form, so with the internal type's paths (involvedObject, message): the
    legacy rules, then on create the ObjectMeta (a DNS subdomain name), the series, a
    required eventTime, a type Normal or Warning, and the deprecated fields unset; on update
    the series if it changed, and the fields that may not change."""
    errs = _legacy_event(obj)
    if old is not None:
        if obj.get("series") != old.get("series"):
            errs.extend(_event_series(obj))
        for path in EVENT_IMMUTABLE:
            v = _event_value(obj, path)
            if v != _event_value(old, path):
                errs.append(FieldError("invalid", path, v, "field is immutable"))
        return errs
    errs.extend(validate_meta(obj.get("metadata") or {}, "subdomain", True))
    errs.extend(_event_series(obj))
    if not obj.get("eventTime"):
        errs.append(FieldError("required", "eventTime"))
    t = obj.get("type") or ""
    if t not in ("Normal", "Warning"):
        errs.append(FieldError("invalid", "type", "", "has invalid value: %s" % t))
    for f in ("firstTimestamp", "lastTimestamp", "count"):
        if obj.get(f):
            errs.append(FieldError("invalid", f, "", "needs to be unset"))
    src = obj.get("source") if isinstance(obj.get("source"), dict) else {}
    if src.get("component") or src.get("host"):
        errs.append(FieldError("invalid", "source", "", "needs to be unset"))
    return errs


def validate_apiservice(obj, old):
    errs = []
    spec = obj.get("spec") or {}
    group = spec.get("group", "")
    version = spec.get("version", "")
    name = (obj.get("metadata") or {}).get("name", "")
    if name != "%s.%s" % (version, group):
        errs.append(FieldError("invalid", "metadata.name", name,
                               "must be `spec.version+\".\"+spec.group`: %s"
                               % json.dumps("%s.%s" % (version, group))))
    if not version:
        errs.append(FieldError("required", "spec.version"))
    gpm = spec.get("groupPriorityMinimum", 0)
    if not isinstance(gpm, int) or gpm <= 0 or gpm > 20000:
        errs.append(FieldError("invalid", "spec.groupPriorityMinimum", gpm,
                               "must be positive and less than 20000"))
    vp = spec.get("versionPriority", 0)
    if not isinstance(vp, int) or vp <= 0 or vp > 1000:
        errs.append(FieldError("invalid", "spec.versionPriority", vp,
                               "must be positive and less than 1000"))
    if spec.get("service") is None:
        if not group.endswith("k8s.io") and group not in ("", "apps", "autoscaling", "policy",
                                                           "batch"):
            pass
        if spec.get("insecureSkipTLSVerify") or spec.get("caBundle"):
            errs.append(FieldError("forbidden", "spec.insecureSkipTLSVerify",
                                   detail="must not be set when no service is referenced"))
    else:
        svc = spec["service"]
        if not svc.get("namespace"):
            errs.append(FieldError("required", "spec.service.namespace"))
        if not svc.get("name"):
            errs.append(FieldError("required", "spec.service.name"))
        if spec.get("insecureSkipTLSVerify") and spec.get("caBundle"):
            errs.append(FieldError("invalid", "spec.insecureSkipTLSVerify", True,
                                   "may not be true if caBundle is present"))
    return errs


def validate_rbac_role(obj, old):
    errs = []
    for i, r in enumerate(obj.get("rules") or []):
        if not r.get("verbs"):
            errs.append(FieldError("required", "rules[%d].verbs" % i,
                                   detail="verbs must contain at least one value"))
        if not r.get("nonResourceURLs") and not r.get("resources") and \
                obj.get("kind") != "ClusterRole":
            errs.append(FieldError("required", "rules[%d].resources" % i,
                                   detail="resource rules must supply at least one resource"))
    return errs


def validate_rbac_binding(obj, old):
    errs = []
    ref = obj.get("roleRef") or {}
    if ref.get("kind") not in ("Role", "ClusterRole"):
        errs.append(FieldError("notsupported", "roleRef.kind", ref.get("kind"),
                               supported=["Role", "ClusterRole"]))
    if not ref.get("name"):
        errs.append(FieldError("required", "roleRef.name"))
    if ref.get("apiGroup") != "rbac.authorization.k8s.io":
        errs.append(FieldError("notsupported", "roleRef.apiGroup", ref.get("apiGroup"),
                               supported=["rbac.authorization.k8s.io"]))
    if old is not None and old.get("roleRef") != obj.get("roleRef"):
        errs.append(FieldError("invalid", "roleRef", ref, "cannot change roleRef"))
    for i, s in enumerate(obj.get("subjects") or []):
        k = s.get("kind")
        if k not in ("ServiceAccount", "User", "Group"):
            errs.append(FieldError("notsupported", "subjects[%d].kind" % i, k,
                                   supported=["ServiceAccount", "User", "Group"]))
        if not s.get("name"):
            errs.append(FieldError("required", "subjects[%d].name" % i))
        if k == "ServiceAccount" and not s.get("namespace") and obj.get("kind") == \
                "ClusterRoleBinding":
            errs.append(FieldError("required", "subjects[%d].namespace" % i))
    return errs


def validate_sar(obj, self_review=False):
    errs = []
    spec = obj.get("spec") or {}
    ra = spec.get("resourceAttributes")
    na = spec.get("nonResourceAttributes")
    if (ra is None) == (na is None):
        errs.append(FieldError("invalid", "spec.resourceAttributes", ra,
                               "exactly one of nonResourceAttributes or resourceAttributes must "
                               "be specified"))
    if not self_review and not spec.get("user") and not spec.get("groups"):
        errs.append(FieldError("invalid", "spec.user", spec.get("user", ""),
                               "at least one of user or group must be specified"))
    return errs

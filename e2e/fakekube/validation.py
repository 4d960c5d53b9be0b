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

from .kselectors import LabelSelector, SelectorError, label_value_error, qualified_name_error

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

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
        return json.dumps(v)
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
                s += ": supported values: " + ", ".join(json.dumps(x) for x in self.supported)
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
    if style == "label":
        out = []
        if len(name) > 63:
            out.append("must be no more than 63 characters")
        if not DNS1123_LABEL.match(name):
            out.append(MSG_LABEL)
        return out
    if style == "1035":
        out = []
        if len(name) > 63:
            out.append("must be no more than 63 characters")
        if not DNS1035_LABEL.match(name):
            out.append(MSG_1035)
        return out
    out = []
    if len(name) > 253:
        out.append("must be no more than 253 characters")
    if not DNS1123_SUBDOMAIN.match(name):
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
    for k, v in labels.items():
        e = qualified_name_error(k)
        if e:
            errs.append(FieldError("invalid", "metadata.labels", k, e))
        if not isinstance(v, str):
            errs.append(FieldError("invalid", "metadata.labels", v, "must be a string"))
            continue
        e = label_value_error(v)
        if e:
            errs.append(FieldError("invalid", "metadata.labels", v, e))
    ann = meta.get("annotations") or {}
    total = 0
    for k, v in ann.items():
        e = qualified_name_error(k.lower())
        if e:
            errs.append(FieldError("invalid", "metadata.annotations", k, e))
        # Go's len(): bytes of the UTF-8 text, not characters
        total += len(k.encode()) + len((v if isinstance(v, str) else json.dumps(v)).encode())
    if total > 256 * 1024:
        errs.append(FieldError("toolong", "metadata.annotations", detail="262144"))
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
    for k, v in (sel.get("matchLabels") or {}).items():
        e = qualified_name_error(k)
        if e:
            errs.append(FieldError("invalid", path + ".matchLabels", k, e))
        e = label_value_error(str(v))
        if e:
            errs.append(FieldError("invalid", path + ".matchLabels", v, e))
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
    errs = []
    for k, v in (meta.get("labels") or {}).items():
        e = qualified_name_error(k)
        if e:
            errs.append(FieldError("invalid", path + ".labels", k, e))
        e = label_value_error(str(v))
        if e:
            errs.append(FieldError("invalid", path + ".labels", v, e))
    return errs


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


def validate_configmap(obj, old):
    errs = []
    keys = set()
    for field in ("data", "binaryData"):
        d = obj.get(field) or {}
        for k, v in d.items():
            if len(k) > 253 or not CONFIG_KEY.match(k):
                errs.append(FieldError("invalid", field, k,
                                       "a valid config key must consist of alphanumeric "
                                       "characters, '-', '_' or '.' (e.g. 'key.name',  or "
                                       "'KEY_NAME',  or 'key-name', regex used for validation is "
                                       "'[-._a-zA-Z0-9]+')"))
            if k in keys:
                errs.append(FieldError("invalid", field, k,
                                       "duplicate of key present in data"))
            keys.add(k)
    # data and binaryData together at most 1 MiB (core.MaxSecretSize), binaryData counted
    # decoded; the error is about the whole object: field.NewPath(""), which prints "[]"
    # (binaryData that is not base64 never gets here: the decoding refuses it first)
    total = sum(len(v.encode()) for v in (obj.get("data") or {}).values()
                if isinstance(v, str))
    for v in (obj.get("binaryData") or {}).values():
        if isinstance(v, str):
            try:
                total += len(base64.b64decode(v, validate=True))
            except (ValueError, binascii.Error):
                total += len(v) * 3 // 4
    if total > MAX_CONFIGMAP_BYTES:
        errs.append(FieldError("toolong", "[]", detail=str(MAX_CONFIGMAP_BYTES)))
    errs.extend(_immutable_data(obj, old, ("data", "binaryData")))
    return errs


MAX_CONFIGMAP_BYTES = 1024 * 1024


def _immutable_data(obj, old, fields):
    errs = []
    if old is not None and old.get("immutable"):
        for f in fields:
            if (obj.get(f) or {}) != (old.get(f) or {}):
                errs.append(FieldError("forbidden", f,
                                       detail="field is immutable when `immutable` is set"))
        if not obj.get("immutable"):
            errs.append(FieldError("forbidden", "immutable",
                                   detail="field is immutable when `immutable` is set"))
    return errs


def validate_secret(obj, old):
    errs = []
    for k, v in (obj.get("data") or {}).items():
        if len(k) > 253 or not CONFIG_KEY.match(k):
            errs.append(FieldError("invalid", "data[%s]" % k, k, "a valid config key must "
                                   "consist of alphanumeric characters, '-', '_' or '.'"))
        try:
            base64.b64decode(v, validate=True)
        except (binascii.Error, TypeError, ValueError):
            errs.append(FieldError("invalid", "data[%s]" % k, v, "illegal base64 data"))
    errs.extend(_immutable_data(obj, old, ("data",)))
    if old is not None and old.get("type") != obj.get("type"):
        errs.append(FieldError("invalid", "type", obj.get("type"), "field is immutable"))
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


def validate_core_event(obj, old):
    errs = []
    io = obj.get("involvedObject") or {}
    ns = (obj.get("metadata") or {}).get("namespace", "")
    if io.get("namespace") and io.get("namespace") != ns:
        errs.append(FieldError("invalid", "involvedObject.namespace", io.get("namespace"),
                               "does not match event.namespace"))
    t = obj.get("type")
    # as upstream legacyValidateEvent: the strict (events.k8s.io) rules apply to
    # a core/v1 Event only when it carries an eventTime; client-go's legacy
    # recorder sets reportingComponent without one
    if obj.get("eventTime"):
        errs.extend(_events_v1_rules(obj, "reportingComponent", "type"))
    elif t not in (None, "", "Normal", "Warning"):
        errs.append(FieldError("notsupported", "type", t, supported=["Normal", "Warning"]))
    return errs


def _events_v1_rules(obj, controller_field, type_field):
    errs = []
    if not obj.get("eventTime"):
        errs.append(FieldError("required", "eventTime"))
    t = obj.get(type_field)
    if t not in ("Normal", "Warning"):
        errs.append(FieldError("notsupported", "type", t, supported=["Normal", "Warning"]))
    rc = obj.get(controller_field)
    if not rc:
        errs.append(FieldError("required", "reportingController"))
    else:
        e = qualified_name_error(rc)
        if e:
            errs.append(FieldError("invalid", "reportingController", rc, e))
    ri = obj.get("reportingInstance")
    if not ri:
        errs.append(FieldError("required", "reportingInstance"))
    elif len(ri) > 128:
        errs.append(FieldError("toolong", "reportingInstance", detail="128"))
    for f in ("action", "reason"):
        v = obj.get(f)
        if not v:
            errs.append(FieldError("required", f))
        elif len(v) > 128:
            errs.append(FieldError("toolong", f, detail="128"))
    note = obj.get("note") if "note" in obj else obj.get("message")
    if note and len(note) > 1024:
        errs.append(FieldError("toolong", "note", detail="1024"))
    return errs


def validate_events_v1(obj, old):
    """events.k8s.io/v1 Event rules (checked on the events.k8s.io form before storage)."""
    errs = _events_v1_rules(obj, "reportingController", "type")
    reg = obj.get("regarding") or {}
    ns = (obj.get("metadata") or {}).get("namespace", "")
    if reg.get("namespace") and reg.get("namespace") != ns:
        errs.append(FieldError("invalid", "regarding.namespace", reg.get("namespace"),
                               "does not match event.namespace"))
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

# SPDX-License-Identifier: Apache-2.0
"""The table of API resources fakekube serves: group/version/kind, scope, verbs, defaulting,
validation, field labels and (for events) conversion between API versions.

Each Resource names a storage key; two resources with the same key (events in v1 and
events.k8s.io/v1) share storage and watch history, and convert to and from the stored form
(the core v1 form) on the way in and out, as kube-apiserver does.
"""

import copy

from . import validation as V
from .kselectors import go_quote

STANDARD_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                  "watch"]

# The storage keys kube-apiserver serves without a watch cache (pkg/kubeapiserver
# DefaultWatchCacheSizes: events and events.k8s.io/events at size 0): their reads and watches
# are etcd's (api.py, store.py), not the cacher's.
NO_WATCH_CACHE = frozenset({"core/events"})


class Resource:
    """One served resource (plural) of one group/version."""

    def __init__(self, group, version, plural, kind, namespaced, *, singular=None,
                 short_names=(), verbs=None, subresources=(), storage=None, name_style="subdomain",
                 validate=None, default=None, prepare_create=None, generation=False,
                 field_labels=None, to_storage=None, from_storage=None, create_only=False,
                 categories=(), validate_first=False, create_on_update=False,
                 unconditional_update=True, field_label_aliases=None):
        self.group = group
        self.version = version
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced
        self.singular = singular or kind.lower()
        self.short_names = list(short_names)
        self.verbs = list(verbs or STANDARD_VERBS)
        self.subresources = list(subresources)
        self.storage = storage or ((group or "core") + "/" + plural)
        self.name_style = name_style
        self.validate = validate
        self.default = default
        self.prepare_create = prepare_create
        self.generation = generation
        self.field_labels = field_labels or {}
        # labels the conversion function takes and renames, or takes with no selectable
        # field behind them (value None): the selector sees "" for those
        self.field_label_aliases = field_label_aliases or {}
        self.to_storage = to_storage
        self.from_storage = from_storage
        self.create_only = create_only
        self.categories = list(categories)
        # the kind's Validate checks no ObjectMeta (the Events' strategy): on create it runs
        # alone first, the common ObjectMeta check only when it passed (see Api._validate)
        self.validate_first = validate_first
        # the registry strategy's AllowCreateOnUpdate (a PUT of a missing object creates it)
        # and AllowUnconditionalUpdate (a PUT without metadata.resourceVersion is accepted)
        self.create_on_update = create_on_update
        self.unconditional_update = unconditional_update
        # served through kube-apiserver's watch cache, or straight from etcd (NO_WATCH_CACHE)
        self.watch_cache = self.storage not in NO_WATCH_CACHE

    @property
    def api_version(self):
        return self.version if not self.group else "%s/%s" % (self.group, self.version)

    @property
    def group_resource(self):
        """The qualified resource as it appears in error messages: pods, deployments.apps."""
        return self.plural if not self.group else "%s.%s" % (self.plural, self.group)

    @property
    def has_status(self):
        return "status" in self.subresources

    def fields_of(self, stored):
        """The field-selector attributes of a stored object."""
        meta = stored.get("metadata") or {}
        out = {"metadata.name": meta.get("name", "")}
        if self.namespaced:
            out["metadata.namespace"] = meta.get("namespace", "")
        for label, getter in self.field_labels.items():
            try:
                v = getter(stored)
            except (AttributeError, KeyError, TypeError, IndexError):
                v = None
            out[label] = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
        return out

    def convert_field_label(self, label):
        """scheme.ConvertFieldLabel of a field selector's label: the label, or ValueError with
        upstream's message. The kinds with field labels of their own are those whose API group
        registers a conversion function (core/v1 conversion.go: Pod, Node, Namespace, Secret,
        Service, Event; events/v1 for its Event), which takes metadata.namespace only for a
        namespaced kind; the others get runtime.DefaultMetaV1FieldSelectorConversion, which
        takes metadata.name and metadata.namespace."""
        if not self.field_labels:
            if label in ("metadata.name", "metadata.namespace"):
                return label
            raise ValueError('%s is not a known field selector: only "metadata.name", '
                             '"metadata.namespace"' % go_quote(label))
        if label == "metadata.name" or (self.namespaced and label == "metadata.namespace") \
                or label in self.field_labels:
            return label
        if label in self.field_label_aliases:
            return self.field_label_aliases[label] or label
        raise ValueError("field label not supported: %s" % label)

    def discovery(self):
        out = []
        main = {"name": self.plural, "singularName": self.singular, "namespaced": self.namespaced,
                "kind": self.kind, "verbs": self.verbs}
        if self.short_names:
            main["shortNames"] = self.short_names
        if self.categories:
            main["categories"] = self.categories
        out.append(main)
        for sub in self.subresources:
            if sub == "binding":
                out.append({"name": self.plural + "/binding", "singularName": "",
                            "namespaced": self.namespaced, "kind": "Binding",
                            "verbs": ["create"]})
            elif sub == "scale":
                out.append({"name": self.plural + "/scale", "singularName": "",
                            "namespaced": self.namespaced, "group": "autoscaling",
                            "version": "v1", "kind": "Scale",
                            "verbs": ["get", "patch", "update"]})
            else:
                out.append({"name": "%s/%s" % (self.plural, sub), "singularName": "",
                            "namespaced": self.namespaced, "kind": self.kind,
                            "verbs": ["get", "patch", "update"]})
        return out


def _get(obj, *path):
    for p in path:
        if obj is None:
            return None
        obj = obj.get(p)
    return obj


# ---------------------------------------------------------------- defaulting

def _image_pull_policy(image):
    ref = image.split("@")[0]
    last = ref.rsplit("/", 1)[-1]
    if "@" in image:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def default_pod_spec(spec):
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            if not isinstance(c, dict):
                continue
            c.setdefault("resources", {})
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            if c.get("image"):
                c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
            for p in c.get("ports") or []:
                p.setdefault("protocol", "TCP")


def default_deployment(obj):
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    strat = spec.setdefault("strategy", {})
    strat.setdefault("type", "RollingUpdate")
    if strat["type"] == "RollingUpdate":
        ru = strat.setdefault("rollingUpdate", {})
        ru.setdefault("maxUnavailable", "25%")
        ru.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    default_pod_spec(_get(spec, "template", "spec"))


def default_replicaset(obj):
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    default_pod_spec(_get(spec, "template", "spec"))


def default_statefulset(obj):
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("revisionHistoryLimit", 10)
    us = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if us.get("type") == "RollingUpdate":
        us.setdefault("rollingUpdate", {"partition": 0})
    spec.setdefault("persistentVolumeClaimRetentionPolicy",
                    {"whenDeleted": "Retain", "whenScaled": "Retain"})
    default_pod_spec(_get(spec, "template", "spec"))


def default_pod(obj):
    default_pod_spec(obj.setdefault("spec", {}))
    spec = obj["spec"]
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    if spec.get("serviceAccountName"):
        spec.setdefault("serviceAccount", spec["serviceAccountName"])


def _qos_class(spec):
    req_any = lim_all = False
    guaranteed = True
    for c in (spec or {}).get("containers") or []:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            req_any = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
        lim_all = True
    if not req_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed and lim_all else "Burstable"


def prepare_pod(obj):
    obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj.get("spec"))}


def default_hpa(obj):
    spec = obj.setdefault("spec", {})
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    beh = spec.get("behavior")
    if isinstance(beh, dict):
        up = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
              "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                           {"type": "Percent", "value": 100, "periodSeconds": 15}]}
        down = {"selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
        for key, base in (("scaleUp", up), ("scaleDown", down)):
            given = beh.get(key) or {}
            for f in ("selectPolicy", "stabilizationWindowSeconds", "policies", "tolerance"):
                if given.get(f) is not None:
                    base[f] = given[f]
            beh[key] = base


def default_service(obj):
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    for p in spec.get("ports") or []:
        p.setdefault("protocol", "TCP")
        if "port" in p:
            p.setdefault("targetPort", p["port"])


def default_secret(obj):
    obj.setdefault("type", "Opaque")
    sd = obj.pop("stringData", None)
    if isinstance(sd, dict):
        import base64
        data = obj.setdefault("data", {})
        for k, v in sd.items():
            data[k] = base64.b64encode(str(v).encode()).decode()


def default_namespace(obj):
    meta = obj.setdefault("metadata", {})
    name = meta.get("name")
    if name:
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name


def prepare_namespace(obj):
    """namespaceStrategy.PrepareForCreate: status Active, and the finalizer "kubernetes"
    added to spec.finalizers (on create only: it goes once the namespace controller is done)."""
    obj["status"] = {"phase": "Active"}
    fins = obj.setdefault("spec", {}).setdefault("finalizers", [])
    if "kubernetes" not in fins:
        fins.append("kubernetes")


def default_pdb(obj):
    pass


def default_rbac_binding(obj):
    for s in obj.get("subjects") or []:
        if s.get("kind") in ("User", "Group"):
            s.setdefault("apiGroup", "rbac.authorization.k8s.io")


def default_apiservice(obj):
    pass


def clear_status(obj):
    obj["status"] = {}


# ---------------------------------------------------------------- events conversion

_EV_MAP = [  # (core v1 field, events.k8s.io/v1 field)
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
]
_EV_SAME = ["eventTime", "series", "reportingInstance", "action", "reason", "related", "type"]


def event_core_to_v1(stored):
    out = {"kind": "Event", "apiVersion": "events.k8s.io/v1",
           "metadata": copy.deepcopy(stored.get("metadata") or {})}
    for f in _EV_SAME:
        if f in stored:
            out[f] = copy.deepcopy(stored[f])
    out.setdefault("eventTime", None)
    for core, new in _EV_MAP:
        if core in stored and stored[core] not in (None, "", 0, {}):
            out[new] = copy.deepcopy(stored[core])
    if "series" in out and isinstance(out["series"], dict):
        out["series"] = {k: v for k, v in out["series"].items() if k in
                         ("count", "lastObservedTime")}
    return out


def event_v1_to_core(obj):
    out = {"kind": "Event", "apiVersion": "v1",
           "metadata": copy.deepcopy(obj.get("metadata") or {})}
    for f in _EV_SAME:
        if f in obj:
            out[f] = copy.deepcopy(obj[f])
    for core, new in _EV_MAP:
        if new in obj:
            out[core] = copy.deepcopy(obj[new])
    out.setdefault("involvedObject", {})
    out.setdefault("source", {})
    return out


def _core_event_passthrough(obj):
    return obj


# ---------------------------------------------------------------- the table

def _pod_ip(o):
    """The internal PodStatus's PodIPs[0] (pod strategy ToSelectableFields): v1's podIP, which
    the conversion makes the first of podIPs, else the first of podIPs."""
    ip = _get(o, "status", "podIP")
    if ip:
        return ip
    ips = _get(o, "status", "podIPs")
    return ips[0].get("ip") if isinstance(ips, list) and ips and isinstance(ips[0], dict) \
        else None


# pod strategy.go ToSelectableFields; the v1 conversion (core/v1 conversion.go) also takes
# status.podIPs, which selects nothing of its own (""), and spec.host as spec.nodeName
POD_FIELDS = {
    "spec.nodeName": lambda o: _get(o, "spec", "nodeName"),
    "spec.restartPolicy": lambda o: _get(o, "spec", "restartPolicy"),
    "spec.schedulerName": lambda o: _get(o, "spec", "schedulerName"),
    "spec.serviceAccountName": lambda o: _get(o, "spec", "serviceAccountName"),
    "spec.hostNetwork": lambda o: bool(_get(o, "spec", "hostNetwork")),
    "status.phase": lambda o: _get(o, "status", "phase"),
    "status.podIP": _pod_ip,
    "status.nominatedNodeName": lambda o: _get(o, "status", "nominatedNodeName"),
}
POD_FIELD_ALIASES = {"spec.host": "spec.nodeName", "status.podIPs": None}

EVENT_FIELDS = {
    "involvedObject.kind": lambda o: _get(o, "involvedObject", "kind"),
    "involvedObject.namespace": lambda o: _get(o, "involvedObject", "namespace"),
    "involvedObject.name": lambda o: _get(o, "involvedObject", "name"),
    "involvedObject.uid": lambda o: _get(o, "involvedObject", "uid"),
    "involvedObject.apiVersion": lambda o: _get(o, "involvedObject", "apiVersion"),
    "involvedObject.resourceVersion": lambda o: _get(o, "involvedObject", "resourceVersion"),
    "involvedObject.fieldPath": lambda o: _get(o, "involvedObject", "fieldPath"),
    "reason": lambda o: o.get("reason"),
    "reportingComponent": lambda o: o.get("reportingComponent"),
    # registry/core/event ToSelectableFields: the source component, else the controller
    "source": lambda o: _get(o, "source", "component") or o.get("reportingComponent"),
    "type": lambda o: o.get("type"),
}
# events/v1 AddFieldLabelConversionsForEvent: its own names of the core labels, and those only
EVENT_V1_FIELDS = {k: EVENT_FIELDS[k] for k in ("reason", "source", "type")}
for _k in list(EVENT_FIELDS):
    if _k.startswith("involvedObject."):
        EVENT_V1_FIELDS["regarding." + _k.split(".", 1)[1]] = EVENT_FIELDS[_k]
EVENT_V1_FIELDS["reportingController"] = EVENT_FIELDS["reportingComponent"]

SERVICE_FIELDS = {  # core/v1 AddFieldLabelConversionsForService
    "spec.clusterIP": lambda o: _get(o, "spec", "clusterIP"),
    "spec.type": lambda o: _get(o, "spec", "type"),
}

REVIEW_VERBS = ["create"]


def build_resources():
    R = Resource
    sts = ["status"]
    res = [
        R("", "v1", "namespaces", "Namespace", False, short_names=["ns"], subresources=["status",
          "finalize"], name_style="label", default=default_namespace,
          prepare_create=prepare_namespace,
          verbs=["create", "delete", "get", "list", "patch", "update", "watch"],
          field_labels={"status.phase": lambda o: _get(o, "status", "phase")}),
        R("", "v1", "pods", "Pod", True, short_names=["po"], subresources=["status", "binding"],
          default=default_pod, prepare_create=prepare_pod, validate=V.validate_pod,
          field_labels=POD_FIELDS, field_label_aliases=POD_FIELD_ALIASES,
          categories=["all"]),
        R("", "v1", "events", "Event", True, short_names=["ev"], validate=V.validate_core_event,
          storage="core/events", field_labels=EVENT_FIELDS, name_style="path",
          validate_first=True, create_on_update=True),
        R("", "v1", "configmaps", "ConfigMap", True, short_names=["cm"],
          validate=V.validate_configmap),
        R("", "v1", "secrets", "Secret", True, default=default_secret,
          validate=V.validate_secret, field_labels={"type": lambda o: o.get("type")}),
        R("", "v1", "services", "Service", True, short_names=["svc"], subresources=sts,
          name_style="1035", default=default_service, validate=V.validate_service,
          field_labels=SERVICE_FIELDS,
          prepare_create=lambda o: o.__setitem__("status", {"loadBalancer": {}}),
          verbs=["create", "delete", "deletecollection", "get", "list", "patch", "update",
                 "watch"], categories=["all"]),
        R("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=["sa"]),
        R("", "v1", "nodes", "Node", False, short_names=["no"], subresources=sts,
          field_labels={"spec.unschedulable": lambda o: bool(_get(o, "spec", "unschedulable"))}),
        R("apps", "v1", "deployments", "Deployment", True, short_names=["deploy"],
          subresources=["scale", "status"], default=default_deployment,
          prepare_create=clear_status, validate=V.validate_workload, generation=True,
          categories=["all"]),
        R("apps", "v1", "replicasets", "ReplicaSet", True, short_names=["rs"],
          subresources=["scale", "status"], default=default_replicaset,
          prepare_create=clear_status, validate=V.validate_workload, generation=True,
          categories=["all"]),
        R("apps", "v1", "statefulsets", "StatefulSet", True, short_names=["sts"],
          subresources=["scale", "status"], default=default_statefulset,
          prepare_create=clear_status, validate=V.validate_workload, generation=True,
          categories=["all"]),
        R("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True,
          short_names=["hpa"], subresources=sts, default=default_hpa, prepare_create=clear_status,
          validate=V.validate_hpa, generation=True, categories=["all"]),
        R("coordination.k8s.io", "v1", "leases", "Lease", True, validate=V.validate_lease,
          create_on_update=True, unconditional_update=False),
        R("apiregistration.k8s.io", "v1", "apiservices", "APIService", False,
          subresources=sts, name_style="path", validate=V.validate_apiservice,
          prepare_create=clear_status, categories=["api-extensions"]),
        R("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False,
          name_style="path", validate=V.validate_rbac_role),
        R("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
          name_style="path", validate=V.validate_rbac_binding, default=default_rbac_binding),
        R("rbac.authorization.k8s.io", "v1", "roles", "Role", True, name_style="path",
          validate=V.validate_rbac_role),
        R("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True,
          name_style="path", validate=V.validate_rbac_binding, default=default_rbac_binding),
        R("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
          short_names=["pdb"], subresources=sts, validate=V.validate_pdb,
          prepare_create=clear_status, generation=True),
        R("events.k8s.io", "v1", "events", "Event", True, short_names=["ev"],
          storage="core/events", to_storage=event_v1_to_core, from_storage=event_core_to_v1,
          validate=V.validate_events_v1, field_labels=EVENT_V1_FIELDS, name_style="path",
          validate_first=True, create_on_update=True),
        R("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False,
          verbs=REVIEW_VERBS, create_only=True),
        R("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False,
          verbs=REVIEW_VERBS, create_only=True),
        R("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
          False, verbs=REVIEW_VERBS, create_only=True),
        R("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview",
          True, verbs=REVIEW_VERBS, create_only=True),
    ]
    return res


class Registry:
    """Lookup of resources by (group, version, plural) plus the discovery documents."""

    def __init__(self, resources=None):
        self.resources = resources or build_resources()
        self.by_gvr = {(r.group, r.version, r.plural): r for r in self.resources}
        self.group_order = []
        for r in self.resources:
            if r.group and r.group not in self.group_order:
                self.group_order.append(r.group)

    def lookup(self, group, version, plural):
        return self.by_gvr.get((group, version, plural))

    def versions_of(self, group):
        out = []
        for r in self.resources:
            if r.group == group and r.version not in out:
                out.append(r.version)
        return out

    def api_group(self, group):
        versions = [{"groupVersion": "%s/%s" % (group, v), "version": v}
                    for v in self.versions_of(group)]
        if not versions:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions,
                "preferredVersion": versions[0]}

    def api_group_list(self):
        groups = []
        for g in self.group_order:
            grp = self.api_group(g)
            grp.pop("kind")
            grp.pop("apiVersion")
            groups.append(grp)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def resource_list(self, group, version):
        rs = [r for r in self.resources if r.group == group and r.version == version]
        if not rs:
            return None
        out = []
        for r in rs:
            out.extend(r.discovery())
        gv = version if not group else "%s/%s" % (group, version)
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": out}

    def storage_of(self, storage):
        """The first resource (the canonical form) using a storage key."""
        for r in self.resources:
            if r.storage == storage and r.from_storage is None:
                return r
        return None

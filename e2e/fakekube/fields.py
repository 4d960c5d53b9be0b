# SPDX-License-Identifier: Apache-2.0
"""The fields of the served kinds' Go types, so that the decoder finds any other, as
kube-apiserver's does. What becomes of one is the write's fieldValidation (api.py
Api.begin_write): with Warn (the default since 1.25) it is dropped from the object and named in
a Warning header (`299 - "unknown field \\"spec.x\\""`), with Ignore dropped silently, with
Strict the write fails.

Transcribed from k8s.io/api (ObjectMeta, the kinds' top-level fields, LeaseSpec); a value of
ANY is not checked further here (the nested types of a Pod or Deployment spec are not
transcribed)."""

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
    ("apps", "Deployment"): SPEC_STATUS,
    ("apps", "ReplicaSet"): SPEC_STATUS,
    ("apps", "StatefulSet"): SPEC_STATUS,
    ("autoscaling", "HorizontalPodAutoscaler"): SPEC_STATUS,
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

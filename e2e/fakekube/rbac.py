# SPDX-License-Identifier: Apache-2.0
"""RBAC authorization, as kube-apiserver's `--authorization-mode=RBAC` decides it, over the
Roles, ClusterRoles, RoleBindings and ClusterRoleBindings stored in the fake.

Follows plugin/pkg/auth/authorizer/rbac (rbac.go) and pkg/registry/rbac/validation (rule.go):
a request is allowed when a rule of a role bound to the user allows it. ClusterRoleBindings
apply in every namespace and at the cluster scope; RoleBindings in their namespace, to a Role of
that namespace or a ClusterRole. A rule allows a resource request when its verbs, apiGroups,
resources (`*`, `resource`, `resource/subresource`, or `*/subresource`) and resourceNames
(none, or the request's name) match; a non-resource request when its verbs and
nonResourceURLs (exact, `*`, or a `prefix*`) match. Subjects are users, groups, and service
accounts (`system:serviceaccount:<ns>:<name>`, the namespace defaulting to the binding's).

Besides the stored objects, the bootstrap policy every cluster has: `system:masters` may do
anything (the privileged group and the `cluster-admin` binding), and every authenticated user
holds `system:discovery`, `system:public-info-viewer` and `system:basic-user` (discovery,
`/healthz`, `/version` and the like, and self reviews). The two roles add-on API servers bind
to, `system:auth-delegator` and `kube-system/extension-apiserver-authentication-reader`, and the
HPA controller's `system:controller:horizontal-pod-autoscaler` with its binding to
`kube-system/horizontal-pod-autoscaler`, are created at start (BOOTSTRAP_OBJECTS). ClusterRoles with an aggregationRule
are not aggregated (the controller that fills them in does not run here).

A denial is the apiserver's 403: `deployments.apps "x" is forbidden: User "u" cannot patch
resource "deployments/scale" in API group "apps" in the namespace "ns"`, with `: RBAC: ...`
appended when a binding refers to a role that does not exist.
"""

RBAC_GROUP = "rbac.authorization.k8s.io"

# the bootstrap ClusterRoles bound to system:authenticated (plugin/pkg/auth/authorizer/rbac/
# bootstrappolicy/policy.go): system:discovery, system:public-info-viewer, system:basic-user
BOOTSTRAP_AUTHENTICATED = [
    {"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz",
                                           "/livez", "/openapi", "/openapi/*", "/readyz",
                                           "/version", "/version/"]},
    {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
     "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
    {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
     "resources": ["selfsubjectreviews"]},
]


# Objects of kube-apiserver's bootstrap policy, made at start in RBAC mode: the roles add-on
# API servers bind to (ClusterRole system:auth-delegator, Role kube-system/
# extension-apiserver-authentication-reader) and the HPA controller's role and binding.
BOOTSTRAP_OBJECTS = [
    ("clusterroles", "", {
        "apiVersion": RBAC_GROUP + "/v1", "kind": "ClusterRole",
        "metadata": {"name": "system:auth-delegator",
                     "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "rules": [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
                   "verbs": ["create"]},
                  {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
                   "verbs": ["create"]}]}),
    # the HPA controller's own (controller_policy.go), as the controller-manager uses it
    # with --use-service-account-credentials
    ("clusterroles", "", {
        "apiVersion": RBAC_GROUP + "/v1", "kind": "ClusterRole",
        "metadata": {"name": "system:controller:horizontal-pod-autoscaler",
                     "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "rules": [{"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"],
                   "verbs": ["get", "list", "watch"]},
                  {"apiGroups": ["autoscaling"],
                   "resources": ["horizontalpodautoscalers/status"], "verbs": ["update"]},
                  {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get", "update"]},
                  {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                  {"apiGroups": ["metrics.k8s.io"], "resources": ["pods"], "verbs": ["list"]},
                  {"apiGroups": ["custom.metrics.k8s.io"], "resources": ["*"],
                   "verbs": ["get", "list"]},
                  {"apiGroups": ["external.metrics.k8s.io"], "resources": ["*"],
                   "verbs": ["get", "list"]},
                  {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
                   "verbs": ["create", "update", "patch"]}]}),
    ("clusterrolebindings", "", {
        "apiVersion": RBAC_GROUP + "/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "system:controller:horizontal-pod-autoscaler",
                     "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole",
                    "name": "system:controller:horizontal-pod-autoscaler"},
        "subjects": [{"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler",
                      "namespace": "kube-system"}]}),
    ("roles", "kube-system", {
        "apiVersion": RBAC_GROUP + "/v1", "kind": "Role",
        "metadata": {"name": "extension-apiserver-authentication-reader",
                     "namespace": "kube-system",
                     "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "resourceNames": ["extension-apiserver-authentication"],
                   "verbs": ["get", "list", "watch"]}]}),
]


def _has(values, want):
    return "*" in (values or []) or want in (values or [])


def _resource_matches(rule, resource, sub):
    combined = resource + "/" + sub if sub else resource
    for r in rule.get("resources") or []:
        if r == "*" or r == combined:
            return True
        if sub and r == "*/" + sub:
            return True
    return False


def _url_matches(rule, path):
    for u in rule.get("nonResourceURLs") or []:
        if u == "*" or u == path or (u.endswith("*") and path.startswith(u[:-1])):
            return True
    return False


def rule_allows(rule, attrs):
    """RuleAllows of rule.go for one request's attributes."""
    if not _has(rule.get("verbs"), attrs["verb"]):
        return False
    if attrs["resource_request"]:
        if not _has(rule.get("apiGroups"), attrs["group"]):
            return False
        if not _resource_matches(rule, attrs["resource"], attrs["subresource"]):
            return False
        names = rule.get("resourceNames") or []
        return not names or (attrs["name"] != "" and attrs["name"] in names)
    return _url_matches(rule, attrs["path"])


def _describe(subject, binding_ns):
    """describeSubject of rbac.go."""
    if subject.get("kind") == "ServiceAccount":
        return 'ServiceAccount "%s/%s"' % (subject.get("name"),
                                           subject.get("namespace") or binding_ns)
    return '%s "%s"' % (subject.get("kind"), subject.get("name"))


def _applies(subject, user, groups, namespace):
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or namespace
        return bool(ns) and "system:serviceaccount:%s:%s" % (ns, name) == user
    return False


class Authorizer:
    def __init__(self, store, registry):
        self.store = store
        self.storage = {plural: registry.lookup(RBAC_GROUP, "v1", plural).storage
                        for plural in ("roles", "clusterroles", "rolebindings",
                                       "clusterrolebindings")}

    def _items(self, plural, namespace=None):
        return self.store.items(self.storage[plural], namespace)

    def _role(self, plural, namespace, name):
        return self.store.get(self.storage[plural], namespace, name)

    def authorize(self, user, groups, attrs):
        """(allowed, reason): allowed, the binding that allows it (`RBAC: allowed by
        ClusterRoleBinding "b" of ClusterRole "r" to User "u"`); refused, the roles bindings
        refer to but that are missing, or ""."""
        if "system:masters" in groups:
            return True, ""
        if "system:authenticated" in groups and any(rule_allows(r, attrs)
                                                     for r in BOOTSTRAP_AUTHENTICATED):
            return True, ""
        errors = []
        bindings = [("clusterrolebindings", b) for b in self._items("clusterrolebindings")]
        if attrs["namespace"]:
            bindings += [("rolebindings", b)
                         for b in self._items("rolebindings", attrs["namespace"])]
        for plural, b in bindings:
            bns = (b.get("metadata") or {}).get("namespace") or ""
            subject = next((s for s in b.get("subjects") or []
                            if _applies(s, user, groups, bns)), None)
            if subject is None:
                continue
            ref = b.get("roleRef") or {}
            if ref.get("kind") == "Role" and plural == "rolebindings":
                role = self._role("roles", bns, ref.get("name"))
                what = 'role.rbac.authorization.k8s.io "%s"' % ref.get("name")
            else:
                role = self._role("clusterroles", "", ref.get("name"))
                what = 'clusterrole.rbac.authorization.k8s.io "%s"' % ref.get("name")
            if role is None:
                errors.append("%s not found" % what)
                continue
            if any(rule_allows(r, attrs) for r in role.get("rules") or []):
                bname = (b.get("metadata") or {}).get("name")
                if plural == "rolebindings":
                    return True, 'RBAC: allowed by RoleBinding "%s/%s" of %s "%s" to %s' % (
                        bname, bns, ref.get("kind"), ref.get("name"), _describe(subject, bns))
                return True, 'RBAC: allowed by ClusterRoleBinding "%s" of %s "%s" to %s' % (
                    bname, ref.get("kind"), ref.get("name"), _describe(subject, ""))
        if not errors:
            return False, ""
        return False, "RBAC: " + (errors[0] if len(errors) == 1
                                  else "[" + ", ".join(errors) + "]")


def attributes(info, query, path):
    """The authorizer's attributes of a request (apiserver's RequestInfo): a list or watch
    with fieldSelector metadata.name=X names X; a namespace's namespace is its name."""
    resource_request = info.get("kind") == "resource"
    name = info.get("name") or ""
    ns = info.get("namespace") or ""
    if resource_request and info.get("verb") in ("list", "watch") and not name:
        for term in (query.get("fieldSelector") or "").split(","):
            k, _, v = term.partition("=")
            if k.strip() == "metadata.name" and v and not v.startswith("="):
                name = v.strip()
    if resource_request and info.get("resource") == "namespaces" and name:
        ns = name
    return {"resource_request": resource_request, "verb": info.get("verb") or "",
            "group": info.get("group") or "", "version": info.get("version") or "",
            "resource": info.get("resource") or "", "subresource": info.get("subresource") or "",
            "namespace": ns, "name": name, "path": path}


def forbidden_message(user, attrs, reason):
    """forbiddenMessage and apierrors.NewForbidden of the apiserver, as one message."""
    if not attrs["resource_request"]:
        msg = 'User "%s" cannot %s path "%s"' % (user, attrs["verb"], attrs["path"])
    else:
        res = attrs["resource"] + ("/" + attrs["subresource"] if attrs["subresource"] else "")
        msg = 'User "%s" cannot %s resource "%s" in API group "%s"' % (
            user, attrs["verb"], res, attrs["group"])
        msg += (' in the namespace "%s"' % attrs["namespace"] if attrs["namespace"]
                else " at the cluster scope")
    if reason:
        msg += ": " + reason
    if not attrs["resource_request"] or not attrs["resource"]:
        return "forbidden: " + msg
    gr = attrs["resource"] + ("." + attrs["group"] if attrs["group"] else "")
    if attrs["name"]:
        return '%s "%s" is forbidden: %s' % (gr, attrs["name"], msg)
    return "%s is forbidden: %s" % (gr, msg)

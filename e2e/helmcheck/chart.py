# SPDX-License-Identifier: Apache-2.0
"""What a rendering of helm/gpuscaler must contain for given values: the expectations are
computed from the merged values (chart defaults + the values file), so every values
combination is checked by the same rules rather than by hand-written expected output.
"""

import copy
import json
import os

from . import (CHART, CONFIG_KEYS, config_key_problems, ident, label_problems, yaml)

APP_VERSION = "0.1.0"
CHART_LABEL = "gpuscaler-0.1.0"

# The cluster-wide rules of the controller (apiGroup, resource) -> verbs; the
# external-metrics ones only when externalMetrics.enabled.
CLUSTER_RULES = {
    ("apps", "deployments"): {"get", "list", "watch", "patch"},
    ("apps", "deployments/scale"): {"get", "patch", "update"},
    ("", "pods"): {"list", "watch"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("autoscaling", "horizontalpodautoscalers"): {"list", "watch"},
}
REVIEW_RULES = {
    ("authentication.k8s.io", "tokenreviews"): {"create"},
    ("authorization.k8s.io", "subjectaccessreviews"): {"create"},
}


def coalesce(base, over):
    """Helm's values merge: maps merge recursively, null deletes, anything else replaces."""
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = coalesce(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def chart_values():
    with open(os.path.join(CHART, "values.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def fullname(values, release):
    if values.get("fullnameOverride"):
        return values["fullnameOverride"][:63].rstrip("-")
    name = values.get("nameOverride") or "gpuscaler"
    if name in release:
        return release[:63].rstrip("-")
    return ("%s-%s" % (release, name))[:63].rstrip("-")


def rules_table(rules):
    """{(apiGroup, resource, resourceNames tuple): verbs} of an RBAC rule list."""
    out = {}
    for r in rules or []:
        for g in r.get("apiGroups") or [""]:
            for res in r.get("resources") or []:
                key = (g, res, tuple(r.get("resourceNames") or ()))
                out.setdefault(key, set()).update(r.get("verbs") or [])
    return out


class Rendered:
    """Objects of one rendering, indexed by (kind, name)."""

    def __init__(self, objs):
        self.objs = objs
        self.by = {}
        for o in objs:
            self.by.setdefault((o.get("kind"), o["metadata"].get("name")), []).append(o)

    def get(self, kind, name):
        found = self.by.get((kind, name)) or []
        return found[0] if len(found) == 1 else None

    def kinds(self, kind):
        return [o for o in self.objs if o.get("kind") == kind]


def check_render(objs, values, release, namespace):
    """Problems (strings) of a rendering against the values it was rendered with."""
    p = []
    r = Rendered(objs)
    fn = fullname(values, release)
    em = values["externalMetrics"]
    labels = {"app.kubernetes.io/name": "gpuscaler", "app.kubernetes.io/instance": release,
              "app.kubernetes.io/version": APP_VERSION, "app.kubernetes.io/managed-by": "Helm",
              "app.kubernetes.io/part-of": "gpuscaler", "helm.sh/chart": CHART_LABEL}
    selector = {"app.kubernetes.io/name": "gpuscaler", "app.kubernetes.io/instance": release}

    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "APIService", "Namespace"}
    seen = set()
    for o in objs:
        meta = o.get("metadata") or {}
        for f in ("apiVersion", "kind"):
            if not o.get(f):
                p.append("object without %s: %r" % (f, meta))
        if not meta.get("name"):
            p.append("%s without metadata.name" % o.get("kind"))
        p += ["%s: %s" % (ident(o), e) for e in label_problems(o, labels)]
        if o.get("kind") in cluster_scoped:
            if meta.get("namespace"):
                p.append("%s: cluster-scoped object with a namespace" % ident(o))
        elif not meta.get("namespace"):
            p.append("%s: namespaced object without metadata.namespace" % ident(o))
        key = (o.get("apiVersion"), o.get("kind"), meta.get("namespace"), meta.get("name"))
        if key in seen:
            p.append("%s: rendered twice" % ident(o))
        seen.add(key)

    # ServiceAccount
    sa_name = (values["serviceAccount"]["name"] or fn) if values["serviceAccount"]["create"] \
        else (values["serviceAccount"]["name"] or "default")
    sas = r.kinds("ServiceAccount")
    if values["serviceAccount"]["create"]:
        sa = r.get("ServiceAccount", sa_name)
        if sa is None:
            p.append("ServiceAccount %s missing" % sa_name)
        elif (sa["metadata"].get("annotations") or {}) != values["serviceAccount"]["annotations"]:
            p.append("ServiceAccount annotations differ from values")
    elif sas:
        p.append("serviceAccount.create=false but ServiceAccounts rendered")

    # Deployment and pod
    dep = r.get("Deployment", fn)
    if dep is None:
        return p + ["Deployment %s missing" % fn]
    spec = dep["spec"]
    if spec.get("replicas") != values["replicaCount"]:
        p.append("Deployment replicas %r, want %r" % (spec.get("replicas"), values["replicaCount"]))
    if spec["selector"].get("matchLabels") != selector:
        p.append("Deployment selector %r, want %r" % (spec["selector"], selector))
    tmpl = spec["template"]
    tl = tmpl["metadata"].get("labels") or {}
    for k, v in list(selector.items()) + list(values["podLabels"].items()):
        if tl.get(k) != v:
            p.append("pod label %s=%r, want %r" % (k, tl.get(k), v))
    ann = tmpl["metadata"].get("annotations") or {}
    if len(ann.get("checksum/config", "")) != 64:
        p.append("pod annotation checksum/config missing")
    for k, v in values["podAnnotations"].items():
        if ann.get(k) != v:
            p.append("pod annotation %s missing" % k)
    pod = tmpl["spec"]
    if pod.get("serviceAccountName") != sa_name:
        p.append("pod serviceAccountName %r, want %r" % (pod.get("serviceAccountName"), sa_name))
    for field in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets",
                  "priorityClassName"):
        want = values[field]
        have = pod.get(field)
        if (want or None) != (have or None):
            p.append("pod %s = %r, want %r" % (field, have, want))
    if pod.get("securityContext") != values["podSecurityContext"]:
        p.append("pod securityContext differs from values.podSecurityContext")
    spread = pod.get("topologySpreadConstraints")
    want_spread = values["spreadAcrossNodes"] and values["replicaCount"] > 1
    if bool(spread) != want_spread:
        p.append("topologySpreadConstraints present=%s, want %s" % (bool(spread), want_spread))
    if spread and spread[0]["labelSelector"]["matchLabels"] != selector:
        p.append("topologySpreadConstraints selects other pods")
    ctrs = pod.get("containers") or []
    if len(ctrs) != 1:
        return p + ["want 1 container, got %d" % len(ctrs)]
    c = ctrs[0]
    want_image = "%s:%s" % (values["image"]["repository"], values["image"]["tag"] or APP_VERSION)
    if c.get("image") != want_image:
        p.append("image %r, want %r" % (c.get("image"), want_image))
    if c.get("imagePullPolicy") != values["image"]["pullPolicy"]:
        p.append("imagePullPolicy %r" % c.get("imagePullPolicy"))
    want_args = ["run", "--config=/etc/gpuscaler/config.yaml"] + list(values["extraArgs"])
    if c.get("args") != want_args:
        p.append("args %r, want %r" % (c.get("args"), want_args))
    if c.get("command"):
        p.append("container overrides the image ENTRYPOINT with command")
    env = {e["name"]: e for e in c.get("env") or []}
    for name, field in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")):
        ref = ((env.get(name) or {}).get("valueFrom") or {}).get("fieldRef") or {}
        if ref.get("fieldPath") != field:
            p.append("env %s not from the downward API %s" % (name, field))
    for e in values["extraEnv"]:
        if env.get(e["name"]) != e:
            p.append("extraEnv %s missing" % e["name"])
    ports = {pt["name"]: pt for pt in c.get("ports") or []}
    if (ports.get("metrics") or {}).get("containerPort") != values["service"]["metricsPort"]:
        p.append("container port metrics != service.metricsPort")
    if (ports.get("health") or {}).get("containerPort") != values["healthPort"]:
        p.append("container port health != healthPort")
    if em["enabled"] != ("https" in ports):
        p.append("container port https present=%s, want %s" % ("https" in ports, em["enabled"]))
    if em["enabled"] and ports["https"]["containerPort"] != em["port"]:
        p.append("container port https != externalMetrics.port")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        hg = (c.get(probe) or {}).get("httpGet") or {}
        if hg.get("path") != path or hg.get("port") not in ("health", values["healthPort"]):
            p.append("%s is not GET %s on the health port: %r" % (probe, path, hg))
    if c.get("resources") != values["resources"]:
        p.append("container resources differ from values.resources")
    if c.get("securityContext") != values["securityContext"]:
        p.append("container securityContext differs from values.securityContext")
    mounts = {m["name"]: m for m in c.get("volumeMounts") or []}
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    if (mounts.get("config") or {}).get("mountPath") != "/etc/gpuscaler":
        p.append("config volume not mounted at /etc/gpuscaler")
    if (vols.get("config") or {}).get("configMap", {}).get("name") != fn + "-config":
        p.append("config volume is not ConfigMap %s-config" % fn)
    if (mounts.get("tmp") or {}).get("mountPath") != "/tmp" or "emptyDir" not in vols.get("tmp", {}):
        p.append("no emptyDir at /tmp for the read-only root filesystem")
    tls_secret = None
    if em["enabled"]:
        tls_secret = (fn + "-tls") if em["certManager"]["enabled"] else em["tls"]["secretName"]
        if (mounts.get("tls") or {}).get("mountPath") != "/var/run/gpuscaler/tls":
            p.append("tls volume not mounted at /var/run/gpuscaler/tls")
        if (vols.get("tls") or {}).get("secret", {}).get("secretName") != tls_secret:
            p.append("tls volume is not Secret %s" % tls_secret)
    elif "tls" in mounts or "tls" in vols:
        p.append("tls volume without externalMetrics")
    if em["enabled"] and em["upstream"]["secretName"]:
        if (vols.get("upstream") or {}).get("secret", {}).get("secretName") != em["upstream"]["secretName"]:
            p.append("upstream Secret not mounted")
    for v in values["extraVolumes"]:
        if vols.get(v["name"]) != v:
            p.append("extraVolume %s missing" % v["name"])
    for m in values["extraVolumeMounts"]:
        if mounts.get(m["name"]) != m:
            p.append("extraVolumeMount %s missing" % m["name"])

    # ConfigMap with the config file
    cm = r.get("ConfigMap", fn + "-config")
    if cm is None:
        p.append("ConfigMap %s-config missing" % fn)
    else:
        try:
            cfg = yaml.safe_load(cm["data"]["config.yaml"])
        except (KeyError, yaml.YAMLError) as e:
            cfg = None
            p.append("config.yaml does not parse: %s" % e)
        if cfg is not None:
            p += ["config.yaml: " + e for e in config_key_problems(cfg, CONFIG_KEYS)]
            le = cfg.get("leader-election") or {}
            lev = values["leaderElection"]
            want_le = {"enabled": lev["enabled"], "namespace": namespace,
                       "lease-name": lev["leaseName"], "lease-duration": lev["leaseDuration"],
                       "renew-deadline": lev["renewDeadline"], "retry-period": lev["retryPeriod"]}
            if le != want_le:
                p.append("config leader-election %r, want %r" % (le, want_le))
            sh = values["sharding"]
            # the prefix with sharding off too: the single leader's fence looks for the
            # shard Leases of its own release only
            want_sh = {"enabled": bool(sh["enabled"]), "shards": sh["shards"],
                       "lease-prefix": lev["leaseName"] + "-shard"}
            if cfg.get("sharding") != want_sh:
                p.append("config sharding %r, want %r" % (cfg.get("sharding"), want_sh))
            emc = cfg.get("external-metrics") or {}
            if emc.get("enabled") is not em["enabled"]:
                p.append("config external-metrics.enabled %r" % emc.get("enabled"))
            if em["enabled"] and (emc.get("tls-cert-file"), emc.get("tls-key-file")) != \
                    ("/var/run/gpuscaler/tls/tls.crt", "/var/run/gpuscaler/tls/tls.key"):
                p.append("config TLS files do not point into the tls volume")
            up = emc.get("upstream")
            if em["upstream"]["url"]:
                want_up = {"url": em["upstream"]["url"], "ca-file": em["upstream"]["caFile"],
                           "cert-file": em["upstream"]["certFile"],
                           "key-file": em["upstream"]["keyFile"],
                           "token-file": em["upstream"]["tokenFile"]}
                if up != want_up:
                    p.append("config upstream %r, want %r" % (up, want_up))
            elif up:
                p.append("config upstream set without externalMetrics.upstream.url")
            listen = cfg.get("listen") or {}
            host = "[::]" if values.get("listenHost") == "::" else "0.0.0.0"
            if listen.get("metrics") != "%s:%d" % (host, values["service"]["metricsPort"]):
                p.append("config listen.metrics %r" % listen.get("metrics"))
            if listen.get("health") != "%s:%d" % (host, values["healthPort"]):
                p.append("config listen.health %r" % listen.get("health"))
            if listen.get("external-metrics") != "%s:%d" % (host, em["port"]):
                p.append("config listen.external-metrics %r" % listen.get("external-metrics"))
            for k, v in values["config"].items():
                if k == "defaults":
                    want = {dk: (str(dv).lower() if isinstance(dv, bool) else str(dv))
                            for dk, dv in v.items()}
                    if cfg.get(k) != want:
                        p.append("config defaults %r, want %r" % (cfg.get(k), want))
                elif cfg.get(k) != v:
                    p.append("config %s = %r, want %r" % (k, cfg.get(k), v))

    # RBAC
    rbac_kinds = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    if not values["rbac"]["create"]:
        if any(r.kinds(k) for k in rbac_kinds):
            p.append("rbac.create=false but RBAC objects rendered")
    else:
        want = dict(CLUSTER_RULES)
        if em["enabled"]:
            want.update(REVIEW_RULES)
        cr = r.get("ClusterRole", fn)
        have = {(g, res): v for (g, res, names), v in rules_table((cr or {}).get("rules")).items()}
        if have != want:
            p.append("ClusterRole %s rules %r, want %r" % (fn, have, want))
        role = r.get("Role", fn)
        rt = rules_table((role or {}).get("rules"))
        cp = values["config"]["checkpoint"]
        want_role = {("", "configmaps", ()): {"create"},  # create cannot be limited by name
                     ("", "configmaps", tuple("%s-%d" % (cp["configmap"], i)
                                              for i in range(cp["configmaps"]))):
                     {"get", "patch"}}
        if values["leaderElection"]["enabled"] and values["sharding"]["enabled"]:
            # shard and member Leases: names not known at install time
            want_role[("coordination.k8s.io", "leases", ())] = {"create", "get", "list", "update",
                                                                "delete"}
        elif values["leaderElection"]["enabled"]:
            # list: a new leader term waits for shard Leases held by sharded replicas
            want_role[("coordination.k8s.io", "leases", ())] = {"create", "list"}
            want_role[("coordination.k8s.io", "leases", (values["leaderElection"]["leaseName"],))] = \
                {"get", "update"}
        if rt != want_role:
            p.append("Role rules %r, want %r" % (rt, want_role))
        if role is not None and role["metadata"].get("namespace") != namespace:
            p.append("Role not in the release namespace")
        bindings = {("ClusterRoleBinding", fn): ("ClusterRole", fn),
                    ("RoleBinding", fn): ("Role", fn)}
        if em["enabled"]:
            bindings[("RoleBinding", fn + "-auth-reader")] = \
                ("Role", "extension-apiserver-authentication-reader")
            bindings[("ClusterRoleBinding", fn + ":system:auth-delegator")] = \
                ("ClusterRole", "system:auth-delegator")
            # forwarding with gpuscaler's own token: the upstream checks gpuscaler's identity
            if em["upstream"]["url"] and em["upstream"]["tokenFile"]:
                bindings[("ClusterRoleBinding", fn + "-upstream-metrics-reader")] = \
                    ("ClusterRole", fn + "-external-metrics-reader")
        if r.get("ClusterRoleBinding", fn + "-upstream-metrics-reader") is not None and not (
                em["enabled"] and em["upstream"]["url"] and em["upstream"]["tokenFile"]):
            p.append("upstream-metrics-reader rendered without an upstream and its token")
        for (kind, name), (rkind, rname) in bindings.items():
            b = r.get(kind, name)
            if b is None:
                p.append("%s %s missing" % (kind, name))
                continue
            if b["roleRef"] != {"apiGroup": "rbac.authorization.k8s.io", "kind": rkind, "name": rname}:
                p.append("%s %s roleRef %r" % (kind, name, b["roleRef"]))
            if b["subjects"] != [{"kind": "ServiceAccount", "name": sa_name, "namespace": namespace}]:
                p.append("%s %s subjects %r" % (kind, name, b["subjects"]))
        ar = r.get("RoleBinding", fn + "-auth-reader")
        if ar is not None and ar["metadata"].get("namespace") != "kube-system":
            p.append("auth-reader RoleBinding must be in kube-system")
        reader = r.get("ClusterRole", fn + "-external-metrics-reader")
        rb = r.get("ClusterRoleBinding", fn + "-external-metrics-reader")
        if em["enabled"]:
            if reader is None or rules_table(reader["rules"]) != \
                    {("external.metrics.k8s.io", "*", ()): {"get", "list"}}:
                p.append("external-metrics-reader ClusterRole missing or wrong")
            hpa = em["hpaServiceAccount"]
            if rb is None or rb["subjects"] != [{"kind": "ServiceAccount", "name": hpa["name"],
                                                 "namespace": hpa["namespace"]}]:
                p.append("external-metrics-reader not bound to the HPA controller's account")
        elif reader is not None or rb is not None or r.get("RoleBinding", fn + "-auth-reader"):
            p.append("external-metrics RBAC rendered without externalMetrics.enabled")

    # Service
    svc = r.get("Service", fn)
    if svc is None:
        p.append("Service %s missing" % fn)
    else:
        if svc["spec"].get("selector") != selector:
            p.append("Service selector %r" % svc["spec"].get("selector"))
        sp = {x["name"]: x for x in svc["spec"]["ports"]}
        if (sp.get("metrics") or {}).get("port") != values["service"]["metricsPort"]:
            p.append("Service port metrics wrong")
        if em["enabled"]:
            if (sp.get("https") or {}).get("port") != 443 or sp["https"].get("targetPort") != "https":
                p.append("Service https 443 -> https missing")
        elif "https" in sp:
            p.append("Service https port without externalMetrics")

    # PodDisruptionBudget
    pdb = r.get("PodDisruptionBudget", fn)
    want_pdb = values["podDisruptionBudget"]["enabled"] and values["replicaCount"] > 1
    if (pdb is not None) != want_pdb:
        p.append("PodDisruptionBudget present=%s, want %s" % (pdb is not None, want_pdb))
    if pdb is not None and (pdb["spec"].get("minAvailable") != values["podDisruptionBudget"]["minAvailable"]
                            or pdb["spec"]["selector"].get("matchLabels") != selector):
        p.append("PodDisruptionBudget spec wrong: %r" % pdb["spec"])

    # APIService, cert-manager
    api = r.get("APIService", "v1beta1.external.metrics.k8s.io")
    want_api = em["enabled"] and em["apiService"]["create"]
    if (api is not None) != want_api:
        p.append("APIService present=%s, want %s" % (api is not None, want_api))
    cm_on = em["enabled"] and em["certManager"]["enabled"]
    cert = r.get("Certificate", fn + "-serving")
    if (cert is not None) != cm_on:
        p.append("Certificate present=%s, want %s" % (cert is not None, cm_on))
    if api is not None:
        s = api["spec"]
        if s.get("service") != {"name": fn, "namespace": namespace, "port": 443}:
            p.append("APIService service %r" % s.get("service"))
        if (s.get("group"), s.get("version")) != ("external.metrics.k8s.io", "v1beta1"):
            p.append("APIService group/version wrong")
        if (s.get("groupPriorityMinimum"), s.get("versionPriority")) != \
                (em["apiService"]["groupPriorityMinimum"], em["apiService"]["versionPriority"]):
            p.append("APIService priorities differ from values")
        if s.get("insecureSkipTLSVerify"):
            p.append("APIService uses insecureSkipTLSVerify")
        inject = (api["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from")
        if cm_on:
            if inject != "%s/%s-serving" % (namespace, fn):
                p.append("APIService cainjector annotation %r" % inject)
            if s.get("caBundle"):
                p.append("APIService caBundle set although cainjector fills it")
        else:
            if inject:
                p.append("cainjector annotation without cert-manager")
            if s.get("caBundle") != "".join(em["tls"]["caBundle"].split()):
                p.append("APIService caBundle differs from externalMetrics.tls.caBundle")
    if cert is not None:
        cs = cert["spec"]
        if cs.get("secretName") != tls_secret:
            p.append("Certificate secretName %r, want %r" % (cs.get("secretName"), tls_secret))
        if "%s.%s.svc" % (fn, namespace) not in (cs.get("dnsNames") or []):
            p.append("Certificate lacks DNS name %s.%s.svc" % (fn, namespace))
        if len(cs.get("commonName") or "") > 64:
            p.append("Certificate commonName over cert-manager's 64 bytes")
        issuer = em["certManager"]["issuerRef"]
        if issuer.get("name"):
            want_ref = {"name": issuer["name"], "kind": issuer.get("kind") or "Issuer",
                        "group": issuer.get("group") or "cert-manager.io"}
            if r.kinds("Issuer"):
                p.append("self-signed Issuer rendered although issuerRef is given")
        else:
            # the release's CA: self-signed, a CA Certificate, an Issuer of it for the
            # serving certificate (whose renewals then keep the caBundle)
            want_ref = {"name": fn + "-ca", "kind": "Issuer", "group": "cert-manager.io"}
            iss = r.get("Issuer", fn + "-selfsigned")
            if iss is None or iss["spec"] != {"selfSigned": {}}:
                p.append("self-signed Issuer missing")
            ca = r.get("Certificate", fn + "-ca")
            if ca is None or ca["spec"].get("isCA") is not True or \
                    ca["spec"].get("secretName") != fn + "-ca" or \
                    ca["spec"].get("issuerRef") != {"name": fn + "-selfsigned",
                                                   "kind": "Issuer",
                                                   "group": "cert-manager.io"} or \
                    len(ca["spec"].get("commonName") or "") > 64:
                p.append("CA Certificate %s-ca missing or wrong: %r" % (fn, ca))
            ca_iss = r.get("Issuer", fn + "-ca")
            if ca_iss is None or ca_iss["spec"] != {"ca": {"secretName": fn + "-ca"}}:
                p.append("CA Issuer %s-ca missing or wrong" % fn)
        if cs.get("issuerRef") != want_ref:
            p.append("Certificate issuerRef %r, want %r" % (cs.get("issuerRef"), want_ref))

    # ServiceMonitor
    sm = r.kinds("ServiceMonitor")
    smv = values["serviceMonitor"]
    if bool(sm) != smv["enabled"]:
        p.append("ServiceMonitor present=%s, want %s" % (bool(sm), smv["enabled"]))
    if sm:
        m = sm[0]
        if m["apiVersion"] != "monitoring.coreos.com/v1":
            p.append("ServiceMonitor apiVersion %s" % m["apiVersion"])
        if m["metadata"]["namespace"] != (smv["namespace"] or namespace):
            p.append("ServiceMonitor namespace %s" % m["metadata"]["namespace"])
        for k, v in smv["labels"].items():
            if m["metadata"]["labels"].get(k) != v:
                p.append("ServiceMonitor label %s missing" % k)
        if m["spec"]["selector"]["matchLabels"] != selector or \
                m["spec"]["namespaceSelector"] != {"matchNames": [namespace]}:
            p.append("ServiceMonitor does not select the Service")
        ep = m["spec"]["endpoints"][0]
        if (ep.get("port"), ep.get("path"), ep.get("interval"), ep.get("scrapeTimeout")) != \
                ("metrics", "/metrics", smv["interval"], smv["scrapeTimeout"]):
            p.append("ServiceMonitor endpoint %r" % ep)

    # PrometheusRule: the rules file's groups, on the job the ServiceMonitor gives
    pr = r.kinds("PrometheusRule")
    prv = values["prometheusRule"]
    if bool(pr) != prv["enabled"]:
        p.append("PrometheusRule present=%s, want %s" % (bool(pr), prv["enabled"]))
    if pr:
        m = pr[0]
        if m["apiVersion"] != "monitoring.coreos.com/v1" or m["metadata"]["name"] != fn:
            p.append("PrometheusRule apiVersion/name %s %s" % (m["apiVersion"],
                                                              m["metadata"]["name"]))
        if m["metadata"]["namespace"] != (prv["namespace"] or namespace):
            p.append("PrometheusRule namespace %s" % m["metadata"]["namespace"])
        for k, v in prv["labels"].items():
            if m["metadata"]["labels"].get(k) != v:
                p.append("PrometheusRule label %s missing" % k)
        job = prv["job"] or r.kinds("Service")[0]["metadata"]["name"]
        with open(os.path.join(CHART, "rules", "gpuscaler.rules.yml"), encoding="utf-8") as f:
            text = f.read()
        want = yaml.safe_load(text.replace('job="gpuscaler"', 'job="%s"' % job))
        if m["spec"] != want:
            p.append("PrometheusRule spec differs from rules/gpuscaler.rules.yml on job %s"
                     % job)
        exprs = [rl["expr"] for g in m["spec"]["groups"] for rl in g["rules"]]
        if len([e for e in exprs if 'job="%s"' % job in e]) < 10 or \
                (job != "gpuscaler" and any('job="gpuscaler"' in e for e in exprs)):
            p.append("PrometheusRule expressions are not on job %s" % job)
        if not any("{{ $labels.namespace }}" in rl["annotations"]["summary"]
                   for g in m["spec"]["groups"] for rl in g["rules"]):
            p.append("PrometheusRule summaries lost their {{ $labels }} templates")

    # Dashboard
    dash = r.get("ConfigMap", fn + "-dashboard")
    dv = values["dashboard"]
    if (dash is not None) != dv["enabled"]:
        p.append("dashboard ConfigMap present=%s, want %s" % (dash is not None, dv["enabled"]))
    if dash is not None:
        if dash["metadata"]["namespace"] != (dv["namespace"] or namespace):
            p.append("dashboard namespace wrong")
        for k, v in dv["labels"].items():
            if dash["metadata"]["labels"].get(k) != v:
                p.append("dashboard label %s=%s missing" % (k, v))
        with open(os.path.join(CHART, "dashboards", "grafana-dashboard.json"), encoding="utf-8") as f:
            want_dash = json.load(f)
        try:
            have_dash = json.loads(dash["data"]["gpuscaler.json"])
        except (KeyError, ValueError) as e:
            have_dash = None
            p.append("dashboard JSON does not parse: %s" % e)
        if have_dash is not None and have_dash != want_dash:
            p.append("dashboard ConfigMap JSON differs from dashboards/grafana-dashboard.json")
    return p

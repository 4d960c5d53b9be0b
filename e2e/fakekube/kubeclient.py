# SPDX-License-Identifier: Apache-2.0
"""A small Kubernetes API client on the Python standard library, for e2e tests.

It talks to ANY API server (fakekube or a real cluster) given a kubeconfig: bearer token or
token file, client certificate/key (inline data or files), CA (data or file) or
insecure-skip-tls-verify, tls-server-name.  It uses only the standard Kubernetes API: no
fakekube control endpoint is reachable through it.

    c = Client.from_kubeconfig(path)           # or Client() for $KUBECONFIG / ~/.kube/config
    c.create("deployments", obj, namespace="ns")
    c.patch("deployments", "web", {"spec": {"replicas": 3}}, namespace="ns", subresource="scale")
    for ev in c.watch("pods", namespace="ns", resource_version=rv, timeout_seconds=30): ...
    wait_for(lambda: c.get("deployments", "web", "ns")["status"].get("replicas") == 3, 10)

Errors from the server raise ApiError (code, reason, status dict, headers, retry_after).
"""

import base64
import http.client
import json
import os
import queue
import socket
import ssl
import tempfile
import threading
import time
from urllib.parse import quote, urlencode, urlsplit

# plural -> (group, version, namespaced, kind); anything else is found through discovery.
KNOWN = {
    "namespaces": ("", "v1", False, "Namespace"),
    "nodes": ("", "v1", False, "Node"),
    "pods": ("", "v1", True, "Pod"),
    "events": ("", "v1", True, "Event"),
    "configmaps": ("", "v1", True, "ConfigMap"),
    "secrets": ("", "v1", True, "Secret"),
    "services": ("", "v1", True, "Service"),
    "serviceaccounts": ("", "v1", True, "ServiceAccount"),
    "endpoints": ("", "v1", True, "Endpoints"),
    "deployments": ("apps", "v1", True, "Deployment"),
    "replicasets": ("apps", "v1", True, "ReplicaSet"),
    "statefulsets": ("apps", "v1", True, "StatefulSet"),
    "horizontalpodautoscalers": ("autoscaling", "v2", True, "HorizontalPodAutoscaler"),
    "leases": ("coordination.k8s.io", "v1", True, "Lease"),
    "apiservices": ("apiregistration.k8s.io", "v1", False, "APIService"),
    "clusterroles": ("rbac.authorization.k8s.io", "v1", False, "ClusterRole"),
    "clusterrolebindings": ("rbac.authorization.k8s.io", "v1", False, "ClusterRoleBinding"),
    "roles": ("rbac.authorization.k8s.io", "v1", True, "Role"),
    "rolebindings": ("rbac.authorization.k8s.io", "v1", True, "RoleBinding"),
    "poddisruptionbudgets": ("policy", "v1", True, "PodDisruptionBudget"),
    "tokenreviews": ("authentication.k8s.io", "v1", False, "TokenReview"),
    "subjectaccessreviews": ("authorization.k8s.io", "v1", False, "SubjectAccessReview"),
    "selfsubjectaccessreviews": ("authorization.k8s.io", "v1", False, "SelfSubjectAccessReview"),
    "localsubjectaccessreviews": ("authorization.k8s.io", "v1", True,
                                  "LocalSubjectAccessReview"),
    "customresourcedefinitions": ("apiextensions.k8s.io", "v1", False,
                                  "CustomResourceDefinition"),
}

PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


class ApiError(Exception):
    """A non-2xx answer.  .code, .reason, .status (the decoded Status or None), .headers,
    .retry_after (seconds or None), .body (raw bytes)."""

    def __init__(self, code, body, headers):
        self.code = code
        self.body = body
        self.headers = headers
        try:
            self.status = json.loads(body)
        except (ValueError, TypeError):
            self.status = None
        st = self.status if isinstance(self.status, dict) else {}
        self.reason = st.get("reason", "")
        self.message = st.get("message", body.decode("utf-8", "replace") if body else "")
        ra = headers.get("Retry-After") if headers else None
        try:
            self.retry_after = int(ra) if ra is not None else None
        except ValueError:
            self.retry_after = None
        super().__init__("%d %s: %s" % (code, self.reason, self.message))


class WatchBroken(Exception):
    """The watch stream ended without its terminating chunk (connection dropped)."""


# ---------------------------------------------------------------- kubeconfig

class _YamlError(ValueError):
    pass


def _yaml_scalar(s):
    s = s.strip()
    if not s:
        return None
    if s[0] == '"':
        end = 1
        while end < len(s):
            if s[end] == "\\":
                end += 2
                continue
            if s[end] == '"':
                break
            end += 1
        return json.loads(s[:end + 1])
    if s[0] == "'":
        end = 1
        while end < len(s):
            if s[end] == "'" and s[end + 1:end + 2] == "'":
                end += 2
                continue
            if s[end] == "'":
                break
            end += 1
        return s[1:end].replace("''", "'")
    if s[0] in "{[":
        try:
            return json.loads(s)
        except ValueError:
            raise _YamlError("flow collection not supported: %r" % s)
    if s[0] in "|>":
        raise _YamlError("block scalars not supported")
    i = s.find(" #")
    if i >= 0:
        s = s[:i].rstrip()
    if s in ("null", "~", "Null", "NULL"):
        return None
    if s in ("true", "True", "TRUE"):
        return True
    if s in ("false", "False", "FALSE"):
        return False
    try:
        return int(s)
    except ValueError:
        return s


def _yaml_split_key(text):
    if text[0] in "\"'":
        q = text[0]
        end = text.index(q, 1)
        key = _yaml_scalar(text[:end + 1])
        rest = text[end + 1:].lstrip()
        if not rest.startswith(":"):
            raise _YamlError("expected ':' after key in %r" % text)
        return key, rest[1:]
    for i, ch in enumerate(text):
        if ch == ":" and (i + 1 == len(text) or text[i + 1] in " \t"):
            return text[:i].strip(), text[i + 1:]
    return None, None


def parse_yaml_subset(text):
    """Parse the YAML subset kubeconfigs use: block mappings and sequences, plain and quoted
    scalars, {} / [] / JSON flow values.  Raises ValueError on anything else."""
    lines = []
    for raw in text.splitlines():
        if raw.strip() in ("---", "...") and not raw.startswith(" "):
            continue
        stripped = raw.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        if "\t" in raw[:len(raw) - len(stripped)]:
            raise _YamlError("tabs in indentation")
        lines.append([len(raw) - len(stripped), stripped.rstrip()])
    if not lines:
        return None

    def is_item(i):
        t = lines[i][1]
        return t == "-" or t.startswith("- ")

    def node(i, indent):
        if is_item(i):
            return seq(i, indent)
        key, _ = _yaml_split_key(lines[i][1])
        if key is None:
            return _yaml_scalar(lines[i][1]), i + 1
        return mapping(i, indent)

    def seq(i, indent):
        out = []
        while i < len(lines) and lines[i][0] == indent and is_item(i):
            rest = lines[i][1][1:]
            if not rest.strip():
                if i + 1 < len(lines) and lines[i + 1][0] > indent:
                    v, i = node(i + 1, lines[i + 1][0])
                else:
                    v, i = None, i + 1
                out.append(v)
                continue
            col = indent + 1 + (len(rest) - len(rest.lstrip(" ")))
            lines[i] = [col, rest.strip()]
            key, _ = _yaml_split_key(lines[i][1]) if lines[i][1][0] not in "{[" else (None, None)
            if key is None or is_item(i):
                if is_item(i):
                    v, i = seq(i, col)
                else:
                    v, i = _yaml_scalar(lines[i][1]), i + 1
            else:
                v, i = mapping(i, col)
            out.append(v)
        return out, i

    def mapping(i, indent):
        out = {}
        while i < len(lines) and lines[i][0] == indent and not is_item(i):
            key, rest = _yaml_split_key(lines[i][1])
            if key is None:
                raise _YamlError("expected 'key: value', got %r" % lines[i][1])
            i += 1
            if rest.strip() and not rest.strip().startswith("#"):
                out[key] = _yaml_scalar(rest)
            elif i < len(lines) and (lines[i][0] > indent or
                                     (lines[i][0] == indent and is_item(i))):
                out[key], i = node(i, lines[i][0])
            else:
                out[key] = None
        return out, i

    value, i = node(0, lines[0][0])
    if i != len(lines):
        raise _YamlError("unexpected content at %r" % lines[i][1])
    return value


def load_yaml_or_json(text):
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return parse_yaml_subset(text)
    except (ValueError, IndexError):
        try:
            import yaml  # optional; only for kubeconfigs beyond the subset
        except ImportError:
            raise
        return yaml.safe_load(text)


class KubeConfig:
    """Resolved connection settings for one context of a kubeconfig."""

    def __init__(self, server, *, ca_data=None, ca_file=None, insecure=False, token=None,
                 token_file=None, cert_data=None, key_data=None, cert_file=None, key_file=None,
                 namespace="default", tls_server_name=None):
        self.server = server.rstrip("/")
        self.ca_data = ca_data
        self.ca_file = ca_file
        self.insecure = insecure
        self.token = token
        self.token_file = token_file
        self.cert_data = cert_data
        self.key_data = key_data
        self.cert_file = cert_file
        self.key_file = key_file
        self.namespace = namespace or "default"
        self.tls_server_name = tls_server_name

    @staticmethod
    def default_path():
        env = os.environ.get("KUBECONFIG")
        if env:
            return env.split(os.pathsep)[0]
        return os.path.expanduser("~/.kube/config")

    @classmethod
    def load(cls, path=None, context=None):
        path = path or cls.default_path()
        with open(path) as f:
            doc = load_yaml_or_json(f.read()) or {}
        base = os.path.dirname(os.path.abspath(path))

        def find(section, name):
            for item in doc.get(section) or []:
                if item.get("name") == name:
                    return item
            raise ValueError("kubeconfig %s: no %s named %r" % (path, section, name))

        ctx_name = context or doc.get("current-context")
        if not ctx_name:
            raise ValueError("kubeconfig %s: no current-context" % path)
        ctx = find("contexts", ctx_name).get("context") or {}
        cluster = find("clusters", ctx.get("cluster")).get("cluster") or {}
        user = {}
        if ctx.get("user"):
            user = find("users", ctx["user"]).get("user") or {}

        def rel(p):
            return p if not p or os.path.isabs(p) else os.path.join(base, p)

        def data(v):
            return base64.b64decode(v) if v else None

        if user.get("exec") or user.get("auth-provider"):
            raise ValueError("kubeconfig %s: exec/auth-provider credentials are not supported"
                             % path)
        return cls(cluster["server"],
                   ca_data=data(cluster.get("certificate-authority-data")),
                   ca_file=rel(cluster.get("certificate-authority")),
                   insecure=bool(cluster.get("insecure-skip-tls-verify")),
                   token=user.get("token"), token_file=rel(user.get("tokenFile")),
                   cert_data=data(user.get("client-certificate-data")),
                   key_data=data(user.get("client-key-data")),
                   cert_file=rel(user.get("client-certificate")),
                   key_file=rel(user.get("client-key")),
                   namespace=ctx.get("namespace") or "default",
                   tls_server_name=cluster.get("tls-server-name"))

    def ssl_context(self):
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            if self.ca_data:
                ctx.load_verify_locations(cadata=self.ca_data.decode())
            if self.ca_file:
                ctx.load_verify_locations(cafile=self.ca_file)
        if self.cert_data or self.cert_file:
            tmp = []
            try:
                cert, key = self.cert_file, self.key_file
                if self.cert_data:
                    cert = self._tmpfile(self.cert_data, tmp)
                if self.key_data:
                    key = self._tmpfile(self.key_data, tmp)
                ctx.load_cert_chain(cert, key)
            finally:
                for p in tmp:
                    os.unlink(p)
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    @staticmethod
    def _tmpfile(data, tmp):
        fd, p = tempfile.mkstemp(prefix="kubeclient-")
        tmp.append(p)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return p

    def bearer(self):
        if self.token:
            return self.token
        if self.token_file:
            with open(self.token_file) as f:
                return f.read().strip()
        return None


# ---------------------------------------------------------------- client

class Client:
    """A client for one API server.  Thread-safe: requests share one keep-alive connection
    under a lock; each watch has its own connection."""

    def __init__(self, config=None, kubeconfig=None, context=None, timeout=15.0, max_retries=0,
                 user_agent="gpuscaler-e2e-kubeclient/1"):
        self.config = config or KubeConfig.load(kubeconfig, context)
        u = urlsplit(self.config.server)
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.user_agent = user_agent
        self.namespace = self.config.namespace
        self._ssl = self.config.ssl_context() if self.scheme == "https" else None
        self._conn = None
        self._lock = threading.Lock()
        self._discovered = {}

    @classmethod
    def from_kubeconfig(cls, path=None, context=None, **kw):
        return cls(KubeConfig.load(path, context), **kw)

    def _connect(self, timeout):
        if self.scheme == "https":
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=self._ssl)
            if self.config.tls_server_name:
                sni = self.config.tls_server_name
                ctx = self._ssl

                def connect(c=conn):
                    sock = socket.create_connection((c.host, c.port), c.timeout)
                    c.sock = ctx.wrap_socket(sock, server_hostname=sni)
                conn.connect = connect
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        return conn

    def _headers(self, content_type=None, accept="application/json"):
        h = {"Accept": accept, "User-Agent": self.user_agent}
        tok = self.config.bearer()
        if tok:
            h["Authorization"] = "Bearer " + tok
        if content_type:
            h["Content-Type"] = content_type
        return h

    def raw(self, method, path, body=None, params=None, content_type=None, timeout=None,
            headers=None):
        """One HTTP exchange; returns (status, headers dict, body bytes).  Retries once on a
        fresh connection if a reused keep-alive connection turns out dead."""
        url = self.prefix + path
        if params:
            url += "?" + urlencode({k: v for k, v in params.items() if v is not None})
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            content_type = content_type or "application/json"
        h = self._headers(content_type)
        if headers:
            h.update(headers)
        with self._lock:
            for attempt in (0, 1):
                reused = self._conn is not None
                if self._conn is None:
                    self._conn = self._connect(timeout or self.timeout)
                conn = self._conn
                try:
                    conn.timeout = timeout or self.timeout
                    if conn.sock is not None:
                        conn.sock.settimeout(conn.timeout)
                    conn.request(method, url, body=data, headers=h)
                    resp = conn.getresponse()
                    payload = resp.read()
                    if resp.will_close:
                        conn.close()
                        self._conn = None
                    return resp.status, dict(resp.getheaders()), payload
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                        http.client.CannotSendRequest, http.client.BadStatusLine,
                        ssl.SSLEOFError) as e:
                    conn.close()
                    self._conn = None
                    if not reused or attempt == 1:
                        raise ConnectionError("%s %s: %s" % (method, path, e)) from e
                except BaseException:
                    conn.close()
                    self._conn = None
                    raise

    def request(self, method, path, body=None, params=None, content_type=None, timeout=None):
        """Like raw() but decodes JSON, raises ApiError on >= 400 and retries 429 and 5xx
        answers that carry Retry-After up to max_retries times (as client-go does)."""
        tries = 0
        while True:
            code, headers, payload = self.raw(method, path, body, params, content_type, timeout)
            if code < 400:
                if not payload:
                    return None
                ctype = headers.get("Content-Type", "")
                return json.loads(payload) if "json" in ctype else payload.decode()
            err = ApiError(code, payload, headers)
            if tries < self.max_retries and (code == 429 or (code >= 500 and
                                                             err.retry_after is not None)):
                tries += 1
                time.sleep(err.retry_after if err.retry_after is not None else 1)
                continue
            raise err

    def close(self):
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # ------------------------------------------------------------ paths

    def resolve(self, resource):
        """'deployments', 'deployments.apps', 'apps/v1/deployments' or 'v1/pods' ->
        (group, version, plural, namespaced)."""
        parts = resource.split("/")
        if len(parts) == 3:
            g, v, plural = parts
            known = KNOWN.get(plural)
            if known and known[0] == g:
                return g, v, plural, known[2]
            return self._discover(g, v, plural)
        if len(parts) == 2:
            v, plural = parts
            known = KNOWN.get(plural)
            if known and known[0] == "":
                return "", v, plural, known[2]
            return self._discover("", v, plural)
        plural, _, group = resource.partition(".")
        known = KNOWN.get(plural)
        if known and (not group or group == known[0]):
            return known[0], known[1], plural, known[2]
        return self._discover(group, None, plural)

    def _discover(self, group, version, plural):
        key = (group, version, plural)
        if key in self._discovered:
            return self._discovered[key]
        if version is None:
            if group:
                g = self.request("GET", "/apis/" + group)
                version = g["preferredVersion"]["version"]
            else:
                version = "v1"
        base = "/api/" + version if not group else "/apis/%s/%s" % (group, version)
        rl = self.request("GET", base)
        for r in rl.get("resources", []):
            if r["name"] == plural:
                out = (group, version, plural, r["namespaced"])
                self._discovered[key] = out
                return out
        raise ApiError(404, json.dumps({"message": "resource %s not found in %s"
                                        % (plural, base), "reason": "NotFound"}).encode(), {})

    def path(self, resource, namespace=None, name=None, subresource=None, all_namespaces=False):
        g, v, plural, namespaced = self.resolve(resource)
        p = "/api/" + v if not g else "/apis/%s/%s" % (g, v)
        if namespaced and not all_namespaces:
            p += "/namespaces/" + quote(namespace or self.namespace, safe="")
        p += "/" + plural
        if name is not None:
            p += "/" + quote(name, safe="")
        if subresource:
            p += "/" + subresource
        return p

    # ------------------------------------------------------------ verbs

    def get(self, resource, name, namespace=None, subresource=None):
        return self.request("GET", self.path(resource, namespace, name, subresource))

    def get_or_none(self, resource, name, namespace=None):
        try:
            return self.get(resource, name, namespace)
        except ApiError as e:
            if e.code == 404:
                return None
            raise

    def list(self, resource, namespace=None, label_selector=None, field_selector=None,
             limit=None, continue_token=None, resource_version=None, all_namespaces=None):
        """List; namespace None lists across all namespaces for namespaced resources."""
        params = {"labelSelector": label_selector, "fieldSelector": field_selector,
                  "limit": limit, "continue": continue_token,
                  "resourceVersion": resource_version}
        allns = namespace is None if all_namespaces is None else all_namespaces
        return self.request("GET", self.path(resource, namespace, all_namespaces=allns),
                            params=params)

    def list_all(self, resource, namespace=None, label_selector=None, field_selector=None,
                 page=500):
        """All items, following continue tokens; returns (items, resourceVersion)."""
        items, cont = [], None
        while True:
            lst = self.list(resource, namespace, label_selector, field_selector, limit=page,
                            continue_token=cont)
            items.extend(lst.get("items") or [])
            cont = (lst.get("metadata") or {}).get("continue")
            if not cont:
                return items, lst["metadata"].get("resourceVersion")

    def create(self, resource, obj, namespace=None, params=None):
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        return self.request("POST", self.path(resource, ns), body=obj, params=params)

    def update(self, resource, obj, namespace=None, subresource=None, params=None):
        meta = obj.get("metadata") or {}
        ns = namespace or meta.get("namespace")
        return self.request("PUT", self.path(resource, ns, meta["name"], subresource), body=obj,
                            params=params)

    def patch(self, resource, name, patch, namespace=None, patch_type="merge", subresource=None,
              params=None):
        """patch_type: merge, strategic, json or apply (apply needs params fieldManager)."""
        ctype = PATCH_CONTENT_TYPES.get(patch_type, patch_type)
        return self.request("PATCH", self.path(resource, namespace, name, subresource),
                            body=patch, content_type=ctype, params=params)

    def delete(self, resource, name, namespace=None, propagation_policy=None,
               preconditions=None, grace_period_seconds=None):
        body = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if preconditions:
            body["preconditions"] = preconditions
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        return self.request("DELETE", self.path(resource, namespace, name), body=body)

    def delete_collection(self, resource, namespace=None, label_selector=None):
        return self.request("DELETE", self.path(resource, namespace),
                            params={"labelSelector": label_selector})

    # scale subresource

    def get_scale(self, resource, name, namespace=None):
        return self.get(resource, name, namespace, "scale")

    def patch_scale(self, resource, name, replicas, namespace=None):
        return self.patch(resource, name, {"spec": {"replicas": replicas}}, namespace,
                          "merge", "scale")

    def update_scale(self, resource, name, replicas, namespace=None, resource_version=None):
        ns = namespace or self.namespace
        body = {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": name, "namespace": ns}, "spec": {"replicas": replicas}}
        if resource_version:
            body["metadata"]["resourceVersion"] = resource_version
        return self.request("PUT", self.path(resource, ns, name, "scale"), body=body)

    # discovery

    def version(self):
        return self.request("GET", "/version")

    def server_groups(self):
        return self.request("GET", "/apis")

    # watch

    def watch(self, resource, namespace=None, resource_version=None, label_selector=None,
              field_selector=None, timeout_seconds=None, allow_bookmarks=False,
              read_timeout=None, name=None, send_initial_events=None):
        """Open a watch; returns a Watch (iterate it for event dicts).  namespace None watches
        all namespaces of a namespaced resource.  name restricts to one object (via
        fieldSelector metadata.name)."""
        params = {"watch": "true", "resourceVersion": resource_version,
                  "labelSelector": label_selector, "fieldSelector": field_selector,
                  "timeoutSeconds": timeout_seconds,
                  "allowWatchBookmarks": "true" if allow_bookmarks else None}
        if name is not None:
            sel = "metadata.name=" + name
            params["fieldSelector"] = sel if not field_selector else field_selector + "," + sel
        if send_initial_events is not None:
            params["sendInitialEvents"] = "true" if send_initial_events else "false"
            params["resourceVersionMatch"] = "NotOlderThan"
        path = self.path(resource, namespace, all_namespaces=namespace is None)
        if read_timeout is None:
            read_timeout = (timeout_seconds or 60) + 30
        return Watch(self, path, params, read_timeout)


class Watch:
    """An open watch stream.  Iterating yields {"type", "object"} dicts until the server ends
    the stream cleanly (StopIteration); a dropped connection raises WatchBroken.
    .last_rv is the resourceVersion of the last ADDED/MODIFIED/DELETED/BOOKMARK object
    consumed (the one to resume from).  next_event(timeout) returns None if nothing arrived in
    time.  A reader thread decodes the stream into a queue, so timeouts never disturb it."""

    _END = object()

    def __init__(self, client, path, params, read_timeout):
        self.client = client
        self.last_rv = params.get("resourceVersion") or None
        self.ended = None
        self.read_timeout = read_timeout
        self._queue = queue.Queue()
        self._end_reason = None
        self._closing = False
        url = client.prefix + path + "?" + urlencode(
            {k: v for k, v in params.items() if v is not None})
        self.conn = client._connect(read_timeout)
        try:
            self.conn.request("GET", url, headers=client._headers())
            self.resp = self.conn.getresponse()
        except BaseException:
            self.conn.close()
            raise
        self.status = self.resp.status
        self.headers = dict(self.resp.getheaders())
        if self.resp.status != 200:
            body = self.resp.read()
            self.conn.close()
            raise ApiError(self.resp.status, body, self.headers)
        self._reader = threading.Thread(target=self._read_loop, daemon=True,
                                        name="kubeclient-watch")
        self._reader.start()

    def _read_loop(self):
        buf = b""
        outcome = ("clean", None)
        try:
            while True:
                data = self.resp.read1(65536)
                if not data:
                    if buf.strip():
                        outcome = ("broken", "stream ended inside an event")
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        self._queue.put(json.loads(line))
        except socket.timeout:
            outcome = ("broken", "read timeout after %ss" % self.read_timeout)
        except (http.client.IncompleteRead, ConnectionError, ssl.SSLError, OSError, ValueError,
                AttributeError) as e:
            outcome = ("broken", "%s: %s" % (type(e).__name__, e))
        if self._closing:
            outcome = ("closed", None)
        self._queue.put((self._END, outcome))

    def __iter__(self):
        return self

    def __next__(self):
        ev = self.next_event(None)
        if ev is None:
            raise StopIteration
        return ev

    def next_event(self, timeout):
        """Next event; None on a clean end of stream (see .ended) or, with a timeout, when no
        event arrived in time (.ended stays None then).  Raises WatchBroken if the connection
        dropped before the terminating chunk."""
        if self.ended:
            if self.ended == "broken":
                raise WatchBroken(self._end_reason)
            return None
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, tuple) and item and item[0] is self._END:
            self.ended, self._end_reason = item[1]
            self.close()
            if self.ended == "broken":
                raise WatchBroken(self._end_reason)
            return None
        if item.get("type") != "ERROR":
            rv = ((item.get("object") or {}).get("metadata") or {}).get("resourceVersion")
            if rv:
                self.last_rv = rv
        return item

    def close(self):
        self._closing = True
        try:
            sock = self.conn.sock
            if sock is not None:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass
        try:
            self.conn.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_for(predicate, timeout, interval=0.05, message=None):
    """Call predicate until it returns a truthy value (returned) or timeout seconds pass
    (TimeoutError).  ApiError and ConnectionError inside predicate count as 'not yet'."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = predicate()
            if v:
                return v
        except (ApiError, ConnectionError) as e:
            last_exc = e
        if time.monotonic() >= deadline:
            raise TimeoutError("timed out after %.1fs waiting for %s%s" % (
                timeout, message or getattr(predicate, "__name__", "condition"),
                " (last error: %s)" % last_exc if last_exc else ""))
        time.sleep(interval)

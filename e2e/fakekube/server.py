# SPDX-License-Identifier: Apache-2.0
"""fakekube: a kube-apiserver subset over real HTTP/1.1 and HTTPS for gpuscaler's e2e tests.

Design: a ThreadingHTTPServer (one thread per connection, keep-alive) routes Kubernetes paths to
api.Api over one store.Store; watches stream newline-delimited JSON events with chunked transfer
encoding from a per-watch queue the store fills.  Authentication is by bearer token or client
certificate (CN = user, O = groups); everything else gets 401.  A harness-only control surface
(/fake/..., guarded by a separate admin token, also served on its own plain-HTTP port with
--admin-listen) injects faults, compacts history, drops watches and restarts the listener.
APIServices with a service are proxied to a harness-given endpoint as kube-aggregator does
(aggregator.py).

Run: python3 -m fakekube --help (from e2e/) or python3 e2e/fakekube/server.py --help.
"""

import os
import sys

if __package__ in (None, ""):
    # Run as a script: make the package importable and keep this directory off sys.path.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))
    __package__ = "fakekube"  # noqa: A001

import argparse  # noqa: E402
import base64
import json
import random
import re
import select
import signal
import socket
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit

from fakekube import api as A  # noqa: E402
from fakekube import fields as F  # noqa: E402
from fakekube.aggregator import Aggregator, parse_endpoint  # noqa: E402
from fakekube import gc as GC  # noqa: E402
from fakekube import nsctl as NS  # noqa: E402
from fakekube.faults import IMMEDIATE_ACTIONS, Faults, FaultSpecError, fault_error  # noqa: E402
from fakekube import rbac as RBAC  # noqa: E402
from fakekube.resources import NO_WATCH_CACHE, Registry  # noqa: E402
from fakekube.store import Store  # noqa: E402
from fakekube.validation import validate_sar  # noqa: E402

MAX_BODY = 3 * 1024 * 1024
VERSION_INFO = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fakekube",
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean", "buildDate": "2024-08-13T00:00:00Z",
                "goVersion": "go1.22.5", "compiler": "gc", "platform": "linux/amd64"}
HEALTH_PATHS = ("/healthz", "/readyz", "/livez", "/version")
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


_GO_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3,
                      "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_DURATION_RE = re.compile(r"([0-9]*(?:\.[0-9]*)?)([^0-9.]+)")


def parse_duration(s):
    """A duration flag -> seconds (float): Go's time.ParseDuration, as kube-apiserver's
    pflag.Duration flags read it ('500ms', '2m', '5m0s', '1h2m3.5s', '-1s', '0'), or a bare
    number of seconds ('10'). ValueError with Go's message for anything else."""
    orig = str(s)
    s = orig.strip()
    if re.fullmatch(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", s):
        return float(s)
    sign = -1.0 if s[:1] == "-" else 1.0
    body = s[1:] if s[:1] in "+-" else s
    total, pos = 0.0, 0
    for m in _GO_DURATION_RE.finditer(body):
        num, unit = m.groups()
        if m.start() != pos or num in ("", ".") or unit not in _GO_DURATION_UNITS:
            break
        total += float(num) * _GO_DURATION_UNITS[unit]
        pos = m.end()
    else:
        if body and pos == len(body):
            return sign * total
    raise ValueError('time: invalid duration "%s"' % orig)


def parse_hostport(s):
    host, _, port = s.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port or 0)


# ---------------------------------------------------------------- authentication

class Identity:
    def __init__(self, user, uid="", groups=()):
        self.user = user
        self.uid = uid
        self.groups = list(groups)
        if "system:authenticated" not in self.groups:
            self.groups.append("system:authenticated")

    def as_user_info(self):
        d = {"username": self.user}
        if self.uid:
            d["uid"] = self.uid
        d["groups"] = self.groups
        return d


class Authenticator:
    def __init__(self):
        self.lock = threading.Lock()
        self.tokens = {}
        self.known_users = set()

    def add_token(self, token, user="fakekube-admin", groups=("system:masters",), uid=""):
        with self.lock:
            self.tokens[token] = Identity(user, uid, groups)
            self.known_users.add(user)

    def load_token_file(self, path):
        """kube-apiserver --token-auth-file format: token,user,uid,"group1,group2"."""
        import csv
        with open(path, newline="") as f:
            for row in csv.reader(f):
                if not row or row[0].startswith("#"):
                    continue
                groups = row[3].split(",") if len(row) > 3 and row[3] else []
                self.add_token(row[0], row[1] if len(row) > 1 else row[0],
                               groups, row[2] if len(row) > 2 else "")

    def by_token(self, token):
        with self.lock:
            return self.tokens.get(token)

    def from_cert(self, cert):
        if not cert:
            return None
        cn, orgs = None, []
        for rdn in cert.get("subject", ()):
            for k, v in rdn:
                if k == "commonName" and cn is None:
                    cn = v
                elif k == "organizationName":
                    orgs.append(v)
        if not cn:
            return None
        with self.lock:
            self.known_users.add(cn)
        return Identity(cn, "", orgs)


# ---------------------------------------------------------------- the server object

class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, handler, app, ssl_ctx, admin):
        self.app = app
        self.ssl_ctx = ssl_ctx
        self.admin_only = admin
        super().__init__(addr, handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.ssl_ctx is not None:
            sock = self.ssl_ctx.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        if self.app.verbose:
            super().handle_error(request, client_address)


class FakeKube:
    """The whole fake API server: state, listeners, faults, request log."""

    def __init__(self, args):
        self.args = args
        self.verbose = args.verbose
        self.registry = Registry()
        self.store = Store(args.history, uncached=NO_WATCH_CACHE,
                           compaction_interval=parse_duration(args.etcd_compaction_interval))
        self.api = A.Api(self.store, self.registry)
        # kube-controller-manager's garbage collector (cascading deletion), on its own thread
        self.gc = GC.GarbageCollector(self.api)
        self.gc.on_write = self._worker_wrote
        # and its namespace controller (deleting a namespace's content, then the namespace)
        self.nsctl = NS.NamespaceController(self.api)
        self.nsctl.on_write = self._worker_wrote
        self.faults = Faults()
        self.auth = Authenticator()
        # --authorization-mode: AlwaysAllow (every authenticated request) or RBAC
        self.authz = (RBAC.Authorizer(self.store, self.registry)
                      if args.authorization_mode == "RBAC" else None)
        self.bookmark_interval = parse_duration(args.bookmark_interval)
        self.min_request_timeout = parse_duration(args.min_request_timeout)
        self.admin_token = args.admin_token or base64.urlsafe_b64encode(os.urandom(18)).decode()
        self.conns = set()
        self.conns_lock = threading.Lock()
        self.reqlog = []
        self.reqlog_seq = 0
        self.reqlog_lock = threading.Lock()
        self.writelog = []
        self.writelog_seq = 0
        self.sar_rules = []
        self.sar_default = args.sar_default
        self.restarting = threading.Lock()
        self.restarts = 0
        self.httpd = None
        self.admin_httpd = None
        self.host, self.port = parse_hostport(args.listen)
        self.ssl_ctx = self._ssl_context()
        self.aggregator = Aggregator(self, args.proxy_client_cert, args.proxy_client_key,
                                     parse_duration(args.aggregator_resync),
                                     args.service_endpoint or ())
        for t in args.token or []:
            parts = t.split(":", 2)
            groups = parts[2].split(",") if len(parts) > 2 and parts[2] else ["system:masters"]
            self.auth.add_token(parts[0], parts[1] if len(parts) > 1 and parts[1] else
                                "fakekube-admin", groups)
        if args.token_file:
            self.auth.load_token_file(args.token_file)
        for ns in BUILTIN_NAMESPACES:
            self.api.create(self.registry.lookup("", "v1", "namespaces"), "",
                            {"metadata": {"name": ns}})
        if self.authz is not None:
            for plural, ns, obj in RBAC.BOOTSTRAP_OBJECTS:
                self.api.create(self.registry.lookup(RBAC.RBAC_GROUP, "v1", plural), ns,
                                json.loads(json.dumps(obj)))
        if args.faults:
            text = args.faults
            if text.startswith("@") or os.path.isfile(text):
                with open(text.lstrip("@")) as f:
                    text = f.read()
            specs = json.loads(text)
            for spec in specs if isinstance(specs, list) else [specs]:
                self.apply_fault(spec)

    @property
    def scheme(self):
        return "https" if self.ssl_ctx else "http"

    def _ssl_context(self):
        a = self.args
        if not a.tls_cert:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key or a.tls_cert)
        if a.client_ca:
            ctx.load_verify_locations(a.client_ca)
            ctx.verify_mode = ssl.CERT_OPTIONAL
        try:
            ctx.set_alpn_protocols(["http/1.1"])
        except NotImplementedError:
            pass
        return ctx

    # ------------------------------------------------------------ listeners

    def _serve(self, srv):
        t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1},
                             daemon=True)
        t.start()

    def start(self):
        self.httpd = _HTTPServer((self.host, self.port), Handler, self, self.ssl_ctx, False)
        self.port = self.httpd.server_address[1]
        self._serve(self.httpd)
        self.aggregator.start()
        self.gc.start()
        self.nsctl.start()
        if self.args.admin_listen:
            h, p = parse_hostport(self.args.admin_listen)
            self.admin_httpd = _HTTPServer((h, p), Handler, self, None, True)
            self._serve(self.admin_httpd)
        self._announce()

    def _write_atomic(self, path, text, mode=0o644):
        tmp = path + ".tmp%d" % os.getpid()
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)

    def _announce(self):
        a = self.args
        if a.write_kubeconfig:
            self._write_atomic(a.write_kubeconfig, self.kubeconfig_text(), 0o600)
        if a.admin_token_file:
            self._write_atomic(a.admin_token_file, self.admin_token + "\n", 0o600)
        if a.admin_port_file and self.admin_httpd:
            self._write_atomic(a.admin_port_file, "%d\n" % self.admin_httpd.server_address[1])
        if a.port_file:
            self._write_atomic(a.port_file, "%d\n" % self.port)
        print("fakekube listening on %s://%s:%d" % (self.scheme, self.host, self.port),
              flush=True)
        if self.admin_httpd:
            print("fakekube admin on http://%s:%d" % self.admin_httpd.server_address[:2],
                  flush=True)

    def kubeconfig_text(self):
        a = self.args
        host = self.host if ":" not in self.host else "[%s]" % self.host
        server = "%s://%s:%d" % (self.scheme, host, self.port)
        cluster = ['    server: "%s"' % server]
        if self.ssl_ctx:
            if a.kubeconfig_ca:
                with open(a.kubeconfig_ca, "rb") as f:
                    cluster.append('    certificate-authority-data: "%s"'
                                   % base64.b64encode(f.read()).decode())
            else:
                cluster.append("    insecure-skip-tls-verify: true")
        user = []
        if a.kubeconfig_client_cert:
            for flag, key in ((a.kubeconfig_client_cert, "client-certificate-data"),
                              (a.kubeconfig_client_key, "client-key-data")):
                with open(flag, "rb") as f:
                    user.append('    %s: "%s"' % (key, base64.b64encode(f.read()).decode()))
        else:
            with self.auth.lock:
                tokens = list(self.auth.tokens)
            if tokens:
                user.append("    token: %s" % json.dumps(tokens[0]))
        return "\n".join([
            "apiVersion: v1", "kind: Config", "clusters:", "- name: fakekube", "  cluster:",
            *cluster, "contexts:", "- name: fakekube", "  context:", "    cluster: fakekube",
            "    user: fakekube-user", "    namespace: default", "current-context: fakekube",
            "preferences: {}", "users:", "- name: fakekube-user", "  user:",
            *(user or ["    {}"]), ""])

    def stop(self):
        self.aggregator.stop()
        self.gc.stop()
        self.nsctl.stop()
        self.store.close_watchers("abort")
        for srv in (self.httpd, self.admin_httpd):
            if srv is not None:
                srv.shutdown()
                srv.server_close()
        self._kill_connections(admin=None)

    def _kill_connections(self, admin=False):
        with self.conns_lock:
            conns = [c for c, is_admin in self.conns if admin is None or is_admin == admin]
        for c in conns:
            try:
                socket.socket.shutdown(c, socket.SHUT_RDWR)
            except OSError:
                pass

    def restart(self, delay):
        """Close the listener and every API connection, keep the state, listen again on the
        same port after delay seconds.  The admin port stays up."""
        with self.restarting:
            srv = self.httpd
            srv.shutdown()
            srv.server_close()
            self.store.close_watchers("abort")
            self._kill_connections(admin=False)
            time.sleep(delay)
            for attempt in range(50):
                try:
                    self.httpd = _HTTPServer((self.host, self.port), Handler, self, self.ssl_ctx,
                                             False)
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                raise RuntimeError("cannot listen again on port %d" % self.port)
            self._serve(self.httpd)
            self.restarts += 1
            if self.verbose:
                print("fakekube: restarted listener on port %d" % self.port, file=sys.stderr,
                      flush=True)

    # ------------------------------------------------------------ faults / control

    def apply_fault(self, spec):
        if not isinstance(spec, dict):
            raise FaultSpecError("a fault is a JSON object")
        action = spec.get("action")
        if action in IMMEDIATE_ACTIONS:
            if action == "drop-watches":
                storage = None
                if spec.get("resource"):
                    for r in self.registry.resources:
                        if r.plural == spec["resource"]:
                            storage = r.storage
                n = self.store.close_watchers("clean" if spec.get("clean") else "abort", storage)
                return {"action": action, "dropped": n}
            if action == "compact":
                self.store.compact()
                return {"action": action, "compactedTo": str(self.store.current_rv())}
            if action == "etcd-compaction-tick":
                with self.store.lock:
                    self.store.compaction_tick()
                    return {"action": action, "resourceVersion": str(self.store.rv),
                            "etcdCompactedTo": str(self.store.etcd_compacted)}
            if action == "clear":
                return {"action": action, "cleared": self.faults.clear()}
            delay = spec.get("delay", spec.get("delayMs", 1000) / 1000.0)
            threading.Thread(target=self.restart, args=(float(delay),), daemon=True).start()
            return {"action": action, "delay": float(delay)}
        return self.faults.add(spec)

    def log_request(self, entry):
        with self.reqlog_lock:
            self.reqlog_seq += 1
            entry["seq"] = self.reqlog_seq
            self.reqlog.append(entry)
            if len(self.reqlog) > self.args.request_log_size:
                del self.reqlog[:len(self.reqlog) - self.args.request_log_size]
        if self.verbose:
            print("fakekube: %s %s %s %.1fms user=%s" % (
                entry["method"], entry["path"] + ("?" + entry["query"] if entry["query"] else ""),
                entry["status"], entry["ms"], entry.get("user") or "-"),
                file=sys.stderr, flush=True)

    def log_write(self, entry, obj):
        """Record a successful write: who (user from the credentials, User-Agent), what (verb,
        resource, subresource, namespace, name, the resourceVersion it produced) and when; for
        Leases also the holderIdentity written.  Queried at GET /fake/writes, outside the
        Kubernetes API paths."""
        meta = obj.get("metadata") or {} if isinstance(obj, dict) else {}
        w = {"time": entry["time"], "user": entry.get("user") or "",
             "userAgent": entry.get("userAgent", ""), "verb": entry.get("verb"),
             "resource": entry.get("resource"), "subresource": entry.get("subresource"),
             "namespace": entry.get("namespace") or meta.get("namespace") or "",
             "name": entry.get("name") or meta.get("name") or "",
             "resourceVersion": meta.get("resourceVersion", "")}
        if isinstance(obj, dict) and obj.get("kind") == "Lease":
            w["holderIdentity"] = (obj.get("spec") or {}).get("holderIdentity") or ""
        if entry.get("warnings"):
            w["warnings"] = entry["warnings"]
        with self.reqlog_lock:
            self.writelog_seq += 1
            w["seq"] = self.writelog_seq
            self.writelog.append(w)
            if len(self.writelog) > self.args.write_log_size:
                del self.writelog[:len(self.writelog) - self.args.write_log_size]

    def _worker_wrote(self, user, user_agent, verb, resource, subresource, ns, name, obj):
        """A controller's writes (gc.py, nsctl.py) in the write log, as its requests would be."""
        self.log_write({"time": time.time(), "user": user, "userAgent": user_agent,
                        "verb": verb, "resource": resource, "subresource": subresource,
                        "namespace": ns, "name": name}, obj)

    # ------------------------------------------------------------ reviews

    def token_review(self, body):
        spec = (body or {}).get("spec") or {}
        token = spec.get("token") or ""
        if not token:
            raise A.bad_request("token is required for TokenReview in authentication")
        ident = self.auth.by_token(token)
        status = {}
        if ident is not None:
            status = {"authenticated": True, "user": ident.as_user_info()}
            if spec.get("audiences"):
                status["audiences"] = spec["audiences"]
        else:
            status = {"user": {}, "error": "invalid bearer token"}
        return {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}

    def access_review(self, res, ns, body, ident):
        body = body if isinstance(body, dict) else {}
        spec = dict(body.get("spec") or {})
        if res.plural == "selfsubjectaccessreviews":
            spec["user"] = ident.user
            spec["groups"] = ident.groups
        errs = validate_sar({"spec": spec}, res.plural == "selfsubjectaccessreviews")
        if errs:
            raise A.invalid(res.kind, res.group, "", errs)
        if res.plural == "localsubjectaccessreviews":
            ra = spec.get("resourceAttributes") or {}
            if ra.get("namespace") != ns:
                raise A.bad_request("spec.resourceAttributes.namespace must match namespace: %s"
                                    % ns)
        ra = spec.get("resourceAttributes") or {}
        na = spec.get("nonResourceAttributes") or {}
        attrs = {"user": spec.get("user", ""), "verb": ra.get("verb", na.get("verb", "")),
                 "group": ra.get("group", ""), "resource": ra.get("resource", ""),
                 "subresource": ra.get("subresource", ""), "namespace": ra.get("namespace", ""),
                 "name": ra.get("name", ""), "path": na.get("path", "")}
        status = None
        for rule in list(self.sar_rules):
            ok = True
            for k in ("user", "verb", "group", "resource", "subresource", "namespace", "name",
                      "path"):
                want = rule.get(k)
                if want not in (None, "*") and want != attrs[k]:
                    ok = False
            if rule.get("groupMember") and rule["groupMember"] not in (spec.get("groups") or []):
                ok = False
            for k, v in (rule.get("extra") or {}).items():  # spec.extra[k] must hold v
                if v not in ((spec.get("extra") or {}).get(k) or []):
                    ok = False
            if ok:
                status = {"allowed": bool(rule.get("allowed", False))}
                if not status["allowed"] and rule.get("denied"):
                    status["denied"] = True
                if rule.get("reason"):
                    status["reason"] = rule["reason"]
                break
        if status is None and self.authz is not None:
            # RBAC mode: the answer is the authorizer's, as kube-apiserver's
            ok, why = self.authz.authorize(attrs["user"], list(spec.get("groups") or []), {
                "resource_request": bool(ra), "verb": attrs["verb"], "group": attrs["group"],
                "resource": attrs["resource"], "subresource": attrs["subresource"],
                "namespace": attrs["namespace"], "name": attrs["name"], "path": attrs["path"]})
            status = {"allowed": ok}
            if why:
                status["reason"] = why
        if status is None and self.sar_default == "mode":
            # the authorization mode's answer: AlwaysAllow allows every request, without a
            # reason (RBAC answered above)
            status = {"allowed": True}
        if status is None:
            allowed = self.sar_default == "allow" or (
                self.sar_default == "known" and (
                    attrs["user"] in self.auth.known_users or
                    "system:masters" in (spec.get("groups") or [])))
            status = {"allowed": allowed}
            status["reason"] = "fakekube default: %s" % ("allow" if allowed else "deny")
        meta = {"creationTimestamp": None}
        if res.namespaced:
            meta["namespace"] = ns
        return {"kind": res.kind, "apiVersion": res.api_version, "metadata": meta,
                "spec": spec, "status": status}


# ---------------------------------------------------------------- request handling

class _Abort(Exception):
    """Drop the connection without an answer."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakekube/1"
    sys_version = ""
    timeout = 300

    def setup(self):
        try:
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        super().setup()
        self.app = self.server.app
        with self.app.conns_lock:
            self.app.conns.add((self.connection, self.server.admin_only))

    def finish(self):
        with self.app.conns_lock:
            self.app.conns.discard((self.connection, self.server.admin_only))
        try:
            super().finish()
        except OSError:
            pass

    def handle(self):
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.settimeout(10)
                self.connection.do_handshake()
                self.connection.settimeout(self.timeout)
            except (OSError, ssl.SSLError):
                self.close_connection = True
                return
        try:
            super().handle()
        except (ConnectionError, ssl.SSLError, socket.timeout, OSError):
            self.close_connection = True

    def log_message(self, fmt, *args):
        pass

    def version_string(self):
        return self.server_version

    def do_GET(self):
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    # ------------------------------------------------------------ plumbing

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks, total = [], 0
            while True:
                line = self.rfile.readline(1024)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > MAX_BODY:
                    raise A.StatusError(413, "RequestEntityTooLarge",
                                        "Request entity too large: limit is 3145728")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(1024)
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.close_connection = True
            raise A.StatusError(413, "RequestEntityTooLarge",
                                "Request entity too large: limit is 3145728")
        return self.rfile.read(n) if n else b""

    def _send(self, code, body, ctype="application/json", headers=None, warnings=()):
        if isinstance(body, bytes):
            data = body
        elif ctype == "application/json":
            data = (json.dumps(body, separators=(",", ":")) + "\n").encode()
        else:
            data = body.encode()
        self._sent = body if isinstance(body, dict) else None
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", self._audit_id)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        for w in warnings:
            self.send_header("Warning", w)
        self._warnings = list(warnings)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        if self.command != "HEAD":
            self._headers_buffer.append(b"\r\n" + data)
            self.flush_headers()
        else:
            self.end_headers()
        self._status = code

    def _send_error(self, err):
        self._send(err.code, err.status(), headers=err.headers)

    def _authenticate(self):
        authz = self.headers.get("Authorization") or ""
        if authz.lower().startswith("bearer "):
            return self.app.auth.by_token(authz[7:].strip())
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                return self.app.auth.from_cert(self.connection.getpeercert())
            except (ValueError, ssl.SSLError):
                return None
        return None

    def _is_admin(self):
        authz = self.headers.get("Authorization") or ""
        return authz == "Bearer " + self.app.admin_token

    # ------------------------------------------------------------ dispatch

    def _dispatch(self):
        t0 = time.monotonic()
        self._status = None
        self._sent = None
        self._warnings = []
        self._audit_id = str(uuid.uuid4())
        self.server.app.api.take_warnings()  # nothing of a failed request before lingers
        url = urlsplit(self.path)
        path = url.path
        # a parameter given twice is its first value, as the API server's conversions read
        # url.Values ((*in)[0])
        query = A.Query(parse_qsl(url.query, keep_blank_values=True))
        # the same, each value's bytes as one latin-1 character each: what Go's string holds
        query.raw = A.Query(parse_qsl(url.query, keep_blank_values=True, encoding="latin-1"))
        entry = {"time": time.time(), "method": self.command, "path": path, "query": url.query,
                 "userAgent": self.headers.get("User-Agent", ""),
                 "contentType": self.headers.get("Content-Type", ""),
                 "accept": self.headers.get("Accept", ""), "host": self.headers.get("Host", "")}
        admin = path.startswith("/fake/") or path == "/fake"
        try:
            body = self._read_body()
            if admin or self.server.admin_only:
                self._admin(path, query, body)
                return
            info = self._request_info(path, query)
            entry.update({k: info.get(k) for k in ("verb", "resource", "subresource",
                                                   "namespace", "name")})
            ident = None
            if path not in HEALTH_PATHS:
                ident = self._authenticate()
                if ident is None:
                    raise A.StatusError(401, "Unauthorized", "Unauthorized")
                entry["user"] = ident.user
                if self.app.authz is not None:
                    self._authorize(ident, info, query, path)
            req = dict(info, method=self.command, path=path, query=url.query,
                       user=ident.user if ident else "")
            latency, rule = self.app.faults.check(req)
            if latency:
                time.sleep(latency)
            if rule is not None:
                entry["fault"] = rule.id
                if rule.action == "reset":
                    raise _Abort()
                raise fault_error(rule, req, info.get("res"))
            agg = self.app.aggregator.match(path) if ident is not None else None
            if agg is not None:
                # kube-aggregator: proxied to the APIService's Service, which negotiates itself
                entry["aggregated"] = agg["metadata"]["name"]
                self.app.aggregator.proxy(self, agg, path, url.query, ident, body)
                return
            accept = self.headers.get("Accept") or ""
            if accept and not any(t in accept for t in ("json", "*/*", "application/*")):
                raise A.StatusError(406, "NotAcceptable",
                                    "only the following media types are accepted: "
                                    "application/json, application/yaml")
            self._route(path, query, body, info, ident)
        except _Abort:
            self.close_connection = True
            try:
                socket.socket.shutdown(self.connection, socket.SHUT_RDWR)
            except OSError:
                pass
            self._status = 0
        except A.StatusError as e:
            self._send_error(e)
        except (ConnectionError, BrokenPipeError, socket.timeout, ssl.SSLError):
            self.close_connection = True
        except Exception as e:  # a bug in fakekube: answer like the server would
            if self.app.verbose:
                import traceback
                traceback.print_exc()
            try:
                self._send_error(A.internal("%s: %s" % (type(e).__name__, e)))
            except OSError:
                self.close_connection = True
        finally:
            if not admin and not self.server.admin_only:
                entry["status"] = self._status
                entry["ms"] = round((time.monotonic() - t0) * 1000.0, 3)
                if self._warnings:
                    entry["warnings"] = self._warnings
                self.app.log_request(entry)
                if (entry.get("verb") in WRITE_VERBS and self._status
                        and 200 <= self._status < 300 and entry.get("resource")
                        and not entry.get("aggregated")):
                    self.app.log_write(entry, self._sent)

    def _authorize(self, ident, info, query, path):
        """--authorization-mode=RBAC: a 403 as kube-apiserver's, before anything else (faults,
        the aggregator's proxy, the handlers) sees the request."""
        attrs = RBAC.attributes(info, query, path)
        ok, why = self.app.authz.authorize(ident.user, ident.groups, attrs)
        if ok:
            return
        details = {k: v for k, v in (("name", attrs["name"]), ("group", attrs["group"]),
                                     ("kind", attrs["resource"]))
                   if v and attrs["resource_request"]}
        raise A.StatusError(403, "Forbidden", RBAC.forbidden_message(ident.user, attrs, why),
                            details)

    def _request_info(self, path, query):
        """Parse a path like apiserver's RequestInfoFactory."""
        parts = [unquote(p) for p in path.strip("/").split("/") if p != ""]
        info = {"verb": self.command.lower(), "resource": None, "subresource": None,
                "namespace": None, "name": None, "res": None, "kind": "nonresource"}
        if len(parts) < 2 or parts[0] not in ("api", "apis"):
            return info
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) < 3:
                return info
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            return info
        legacy_watch = False
        if rest[0] == "watch":
            legacy_watch = True
            rest = rest[1:]
        ns = None
        if rest and rest[0] == "namespaces" and len(rest) > 1:
            ns = rest[1]
            if len(rest) > 2 and rest[2] not in ("status", "finalize"):
                rest = rest[2:]
        if not rest:
            return info
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if resource == "namespaces":
            ns = None
        res = self.app.registry.lookup(group, version, resource)
        m = self.command
        if m in ("GET", "HEAD"):
            # ?watch on a collection is read as a bool (anything but "false" and "0", the
            # empty value too); an object's GET ignores it: only /watch/ paths watch one
            watch = legacy_watch or (not name and "watch" in query and A.query_bool(query["watch"]))
            verb = "watch" if watch else ("get" if name else "list")
        elif m == "POST":
            verb = "create"
        elif m == "PUT":
            verb = "update"
        elif m == "PATCH":
            verb = "patch"
        elif m == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            verb = m.lower()
        info.update({"kind": "resource", "group": group, "version": version, "verb": verb,
                     "resource": resource, "subresource": sub, "namespace": ns, "name": name,
                     "res": res, "extra": rest[3:]})
        return info

    def _route(self, path, query, body, info, ident):
        app = self.app
        if info["kind"] == "nonresource":
            return self._nonresource(path)
        res = info["res"]
        if res is None or info["extra"]:
            raise A.StatusError(404, "NotFound", "the server could not find the requested "
                                "resource", {})
        ns, name, sub, verb = info["namespace"], info["name"], info["subresource"], info["verb"]
        if res.namespaced and name is not None and ns is None:
            raise A.StatusError(404, "NotFound", "the server could not find the requested "
                                "resource", {})
        if not res.namespaced and ns is not None and res.plural != "namespaces":
            raise A.StatusError(404, "NotFound", "the server could not find the requested "
                                "resource", {})
        if sub is not None and sub not in res.subresources:
            raise A.StatusError(404, "NotFound", "the server could not find the requested "
                                "resource", {})
        if verb not in res.verbs and not (sub and verb in ("get", "update", "patch")):
            raise A.method_not_allowed()
        if sub == "binding" and verb != "create":
            raise A.method_not_allowed()      # pods/binding is create-only
        # the routes kube-apiserver installs: PUT and PATCH on an object, POST on a
        # collection (or a subresource); the others are 405
        if (verb in ("update", "patch") and name is None) or (
                verb == "create" and name is not None and sub is None):
            raise A.method_not_allowed()
        ns = ns or ""
        if res.plural == "namespaces" and name is not None:
            ns = ""
        if res.create_only:
            app.api.begin_write("create", query, self.headers.get("User-Agent", ""))
            obj = self._json(body, kind=res.kind)
            if res.plural == "tokenreviews":
                return self._send(201, app.token_review(obj))
            return self._send(201, app.access_review(res, ns, obj, ident))
        if verb in ("create",) and res.namespaced and not info["namespace"]:
            raise A.method_not_allowed()
        if verb == "watch":
            return self._watch(res, info["namespace"], name, query)
        if verb == "list":
            return self._send(*app.api.list(res, info["namespace"], query))
        if verb == "get":
            if sub == "scale":
                return self._send(*app.api.get_scale(res, ns, name, query))
            return self._send(*app.api.get(res, ns, name, query))
        if verb == "create" and sub == "binding":
            app.api.begin_write("create", query, self.headers.get("User-Agent", ""))
            return self._send(*app.api.bind_pod(res, ns, name, self._json(body, kind="Binding"),
                                                query))
        if verb in ("create", "update", "patch"):
            app.api.begin_write(verb, query, self.headers.get("User-Agent", ""),
                                self.headers.get("Content-Type"))
            if verb == "create":
                code, obj = app.api.create(res, ns, self._json(body, kind=res.kind), query)
            elif verb == "update":
                code, obj = app.api.update(res, ns, name, self._json(
                    body, kind="Scale" if sub == "scale" else res.kind), sub, query)
            else:
                code, obj = app.api.patch(res, ns, name, body, self.headers.get("Content-Type"),
                                          sub, query)
            warnings = app.api.take_warnings()
            # one Warning header per dropped field, as kube-apiserver sends them
            return self._send(code, obj, warnings=warnings)
        if verb == "delete":
            return self._send(*app.api.delete(res, ns, name, self._delete_body(body), query))
        if verb == "deletecollection":
            # its list options are read first, then the body (delete.go DeleteCollection)
            return self._send(*app.api.delete_collection(res, info["namespace"],
                                                         lambda: self._delete_body(body), query))
        raise A.method_not_allowed()

    def _delete_body(self, body):
        """A DELETE's body, DeleteOptions (None without one): its media type negotiated as
        _json's, then decoded as delete.go decodes it (api.decode_delete_body)."""
        if not body:
            return None
        self._check_media_type()
        return A.decode_delete_body(body)

    def _check_media_type(self):
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype not in ("application/json", "*/*", ""):
            raise A.StatusError(415, "UnsupportedMediaType",
                                'the body of the request was in an unknown format - accepted '
                                'media types include: application/json, application/yaml, '
                                'application/vnd.kubernetes.protobuf, application/cbor')

    def _json(self, body, optional=False, kind=None):
        """A write's body as JSON. kind: the type it decodes into, whose serializer first
        interprets its apiVersion and kind: a body that does not pass is rest.go
        transformDecodeError's 400 `the object provided is unrecognized (must be of type
        ConfigMap): couldn't get version/kind; json parse error: ... ({bad)`."""
        if not body:
            if optional:
                return None
            raise A.bad_request("the body of the request is empty")
        self._check_media_type()
        err = A.interpret_error(body) if kind else None
        if err:
            raise A.bad_request("the object provided is unrecognized (must be of type %s): %s "
                                "(%s)" % (kind, err, A.summarize_data(body)))
        try:
            return F.loads(body)
        except ValueError as e:
            raise A.bad_request("couldn't get version/kind; json parse error: %s" % e)

    def _nonresource(self, path):
        reg = self.app.registry
        p = path.rstrip("/") or "/"
        if p in ("/healthz", "/readyz", "/livez") or p.startswith(("/healthz/", "/readyz/",
                                                                      "/livez/")):
            return self._send(200, "ok", "text/plain; charset=utf-8")
        if p == "/version":
            return self._send(200, VERSION_INFO)
        if p == "/api":
            addr = "%s:%d" % (self.app.host, self.app.port)
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [
                                        {"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]})
        if p == "/apis":
            groups = reg.api_group_list()
            groups["groups"].extend(self.app.aggregator.api_groups(set(reg.group_order)))
            return self._send(200, groups)
        parts = p.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            rl = reg.resource_list("", parts[1])
            if rl:
                return self._send(200, rl)
        if parts[0] == "apis" and len(parts) == 2:
            g = reg.api_group(parts[1]) or self.app.aggregator.api_group(parts[1],
                                                                         set(reg.group_order))
            if g:
                return self._send(200, g)
        if parts[0] == "apis" and len(parts) == 3:
            rl = reg.resource_list(parts[1], parts[2])
            if rl:
                return self._send(200, rl)
        if p == "/":
            paths = sorted({"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz",
                            "/version"} | {"/apis/" + g for g in reg.group_order} |
                           {"/apis/%s/%s" % (r.group, r.version) for r in reg.resources
                            if r.group} | self.app.aggregator.paths(set(reg.group_order)))
            return self._send(200, {"paths": paths})
        raise A.StatusError(404, "NotFound", "the server could not find the requested resource",
                            {})

    # ------------------------------------------------------------ watch

    def _write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _write_event(self, etype, obj):
        self._write_chunk((json.dumps({"type": etype, "object": obj}, separators=(",", ":"))
                           + "\n").encode())

    def _client_gone(self):
        """True once the watch client closed its side (EOF, reset or TLS close_notify).  A
        watch client sends nothing while the stream is open, so readable means going away."""
        sock = self.connection
        try:
            r, _, _ = select.select([sock], [], [], 0)
            if not r:
                return False
            if not isinstance(sock, ssl.SSLSocket):
                return socket.socket.recv(sock, 1, socket.MSG_PEEK) == b""
            sock.setblocking(False)
            try:
                return sock.recv(1) == b""
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return False
            finally:
                sock.settimeout(self.timeout)
        except (OSError, ValueError, ssl.SSLError):
            return True

    def _watch(self, res, ns, name, query):
        """A watch as ListResource serves it (its options read and validated by list_options).
        Initial events: without sendInitialEvents, for resourceVersion "" and "0"; with
        sendInitialEvents=true, always, ended by the annotated bookmark only when bookmarks are
        allowed (the cacher's isListWatchRequest); with sendInitialEvents=false, none, and ""
        or "0" start at the present.

        As cacher.Watch: a resourceVersion that does not parse (unless "" without
        sendInitialEvents, which etcd serves) is a 500 (api.parse_rv); with
        sendInitialEvents=true one not reached yet is waited for (waitUntilFreshAndBlock, 3 s),
        then the watch opens with one ERROR event, the 504 Too large resource version. A
        negative timeoutSeconds is kept (only 0 takes the random default): the watch's context
        has expired, and it ends at once, with no event.

        A resource without a watch cache (Events) is watched in etcd (etcd3/watcher.go): the
        ERROR event comes at once, with a jittered retry (1 to 3 s); a resourceVersion
        compacted away is etcd's ErrCompacted (410 "The resourceVersion for the provided
        watch is too old."), with no window but the compaction's; and no BOOKMARK comes but
        the initial events' end (the registry asks etcd for no progress notifications)."""
        app = self.app
        opts = app.api.list_options(res, query)
        ls, fs, rv, send_initial = opts.ls, opts.fs, opts.rv, opts.send_initial
        if name:
            # one object's watch selects it by name; a field selector must ask for that name
            if not fs.terms:
                fs.terms.append(("metadata.name", "=", name))
            elif next((v for k, op, v in fs.terms if k == "metadata.name" and op == "="),
                      None) != name:
                raise A.bad_request("fieldSelector metadata.name doesn't match requested name")
        timeout = opts.timeout or 0
        if timeout == 0:
            timeout = app.min_request_timeout * (1.0 + random.random())
        want = A.parse_rv(rv)
        failed = None
        if send_initial is True and want and not res.watch_cache:
            cur = app.store.current_rv()
            if want > cur:
                # startWatching: wait.Jitter(1 s, 3) truncated to whole seconds
                failed = A.too_large_rv(want, cur, retry=int(1 + 3 * random.random())).status()
        elif send_initial is True and want:
            try:
                A.wait_for_rv(app.store, want)
            except A.StatusError as e:
                failed = e.status()
        if timeout < 0 or failed is not None:
            w, snap, err = None, None, None
        elif send_initial is True or (send_initial is None and rv in ("", "0")):
            w, snap, err = app.store.register(res.storage, ns, None)
        elif rv in ("", "0"):
            w, snap, err = app.store.register(res.storage, ns, "now")
        else:
            # one not reached yet: the events after it, when they come
            w, snap, err = app.store.register(res.storage, ns, want)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Audit-Id", self._audit_id)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._status = 200
            if err is not None:
                failed = A.expired("too old resource version: %d (%d)" % err
                                   if res.watch_cache else
                                   "The resourceVersion for the provided watch is too old."
                                   ).status()
            if failed is not None:
                self._write_event("ERROR", failed)
            if w is None or failed is not None:
                self.wfile.write(b"0\r\n\r\n")
                return
            self._stream(res, w, snap, ls, fs, timeout, opts.bookmarks and res.watch_cache,
                         send_initial is True and opts.bookmarks)
        finally:
            if w is not None:
                app.store.unregister(w)

    def _bookmark(self, res, rv, initial_end=False):
        meta = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        self._write_event("BOOKMARK", {"kind": res.kind, "apiVersion": res.api_version,
                                       "metadata": meta})

    def _stream(self, res, w, snap, ls, fs, timeout, bookmarks, initial_end):
        app = self.app
        filt = app.api.watch_filter(res, ls, fs)
        if snap is not None:
            objs, snap_rv = snap
            for stored in objs:
                if app.api.matches(res, stored, ls, fs):
                    self._write_event("ADDED", app.api.external(res, stored))
            if initial_end:
                self._bookmark(res, snap_rv, initial_end=True)
        now = time.monotonic()
        deadline = now + timeout
        interval = max(0.05, app.bookmark_interval)
        next_bm = now + interval
        next_check = now + 1.0
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            wait = deadline - now
            if bookmarks:
                wait = min(wait, max(0.0, next_bm - now))
            wait = min(wait, max(0.0, next_check - now))
            ev, closed = w.pop(wait)
            if ev is not None:
                out = filt(ev)
                if out is not None:
                    self._write_event(out[0], out[1])
                continue
            if closed == "abort":
                raise _Abort()
            if closed:
                break
            now = time.monotonic()
            if bookmarks and now >= next_bm:
                brv = app.store.bookmark_rv(w)
                if brv is not None:
                    self._bookmark(res, brv)
                # the next one an interval on, sent or not (none at or behind the watch's
                # version: waiting at once again spun the thread)
                next_bm = now + interval
            if now >= next_check:
                next_check = now + 1.0
                if self._client_gone():
                    raise ConnectionError("watch client went away")
        self.wfile.write(b"0\r\n\r\n")

    # ------------------------------------------------------------ harness control

    def _admin(self, path, query, body):
        app = self.app
        p = path.rstrip("/")
        if p in ("/fake/healthz", "/healthz"):
            return self._send(200, "ok", "text/plain; charset=utf-8")
        if not self._is_admin():
            raise A.StatusError(401, "Unauthorized", "Unauthorized (fakekube admin token needed)")
        if p.startswith("/fake"):
            p = p[len("/fake"):]
        m = self.command
        try:
            data = json.loads(body) if body else None
        except ValueError as e:
            raise A.bad_request("bad JSON: %s" % e)
        try:
            if p == "/faults" and m == "POST":
                specs = data if isinstance(data, list) else [data]
                return self._send(200, {"results": [app.apply_fault(s) for s in specs]})
            if p == "/faults" and m == "GET":
                return self._send(200, {"faults": app.faults.list()})
            if p == "/faults" and m == "DELETE":
                if "id" in query:
                    return self._send(200, {"removed": app.faults.remove(int(query["id"]))})
                return self._send(200, {"cleared": app.faults.clear()})
        except (FaultSpecError, ValueError, TypeError) as e:
            raise A.bad_request("bad fault: %s" % e)
        if p == "/requests" and m == "GET":
            since = int(query.get("since", "0"))
            with app.reqlog_lock:
                items = [e for e in app.reqlog if e["seq"] > since]
                nxt = app.reqlog_seq
            return self._send(200, {"requests": items, "next": nxt})
        if p == "/writes" and m == "GET":
            since = int(query.get("since", "0"))
            keys = [k for k in ("resource", "namespace", "name", "user") if k in query]
            with app.reqlog_lock:
                items = [w for w in app.writelog if w["seq"] > since
                         and all(w.get(k) == query[k] for k in keys)]
                nxt = app.writelog_seq
            return self._send(200, {"writes": items, "next": nxt})
        if p == "/writes" and m == "DELETE":
            with app.reqlog_lock:
                app.writelog = []
            return self._send(200, {"cleared": True})
        if p == "/requests" and m == "DELETE":
            with app.reqlog_lock:
                app.reqlog = []
            return self._send(200, {"cleared": True})
        if p == "/state" and m == "GET":
            with app.store.lock:
                st = {"resourceVersion": str(app.store.current_rv()),
                      "compactedTo": str(app.store.compacted),
                      "history": {k: {"length": len(h),
                                      "windowStart": str(app.store.window_start(k))}
                                  for k, h in sorted(app.store.history.items())},
                      "watches": len(app.store.watchers)}
            with app.conns_lock:
                st["connections"] = sum(1 for _, adm in app.conns if not adm)
            st.update({"port": app.port, "scheme": app.scheme, "restarts": app.restarts,
                       "listening": not app.restarting.locked()})
            return self._send(200, st)
        if p == "/tokens" and m == "POST" and isinstance(data, dict) and data.get("token"):
            app.auth.add_token(data["token"], data.get("user", "fakekube-user"),
                               data.get("groups", []), data.get("uid", ""))
            return self._send(200, {"added": data.get("user", "fakekube-user")})
        if p == "/sar" and m in ("PUT", "POST") and isinstance(data, dict):
            if "default" in data:
                if data["default"] not in ("mode", "allow", "deny", "known"):
                    raise A.bad_request("default must be mode, allow, deny or known")
                app.sar_default = data["default"]
            if "rules" in data:
                app.sar_rules = list(data["rules"])
            return self._send(200, {"default": app.sar_default, "rules": app.sar_rules})
        if p == "/service-endpoints" and m == "GET":
            return self._send(200, {"endpoints": app.aggregator.endpoints_view(),
                                    "aggregator": app.aggregator.status()})
        if p == "/service-endpoints" and m in ("PUT", "POST") and isinstance(data, dict):
            items = data.get("endpoints")
            if items is None:
                items = {"%s/%s" % (data.get("namespace", ""), data.get("name", "")):
                         data.get("address")}
            if not isinstance(items, dict):
                raise A.bad_request("endpoints must map NS/NAME to HOST:PORT (or null)")
            try:
                for key, addr in items.items():
                    ns, _, name = key.partition("/")
                    if not ns or not name:
                        raise ValueError("bad key %r" % key)
                    if addr:
                        parse_endpoint("%s=%s" % (key, addr))
                    app.aggregator.set_endpoint(ns, name, addr)
            except ValueError as e:
                raise A.bad_request("bad service endpoint: %s" % e)
            return self._send(200, {"endpoints": app.aggregator.endpoints_view()})
        if p == "/kubeconfig" and m == "GET":
            return self._send(200, app.kubeconfig_text(), "application/yaml")
        raise A.StatusError(404, "NotFound", "no such fakekube control endpoint: %s %s"
                            % (m, path), {})


# ---------------------------------------------------------------- CLI

def build_parser():
    ap = argparse.ArgumentParser(prog="fakekube", description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", default="127.0.0.1:0",
                    help="HOST:PORT for the API (port 0 picks a free one) [127.0.0.1:0]")
    ap.add_argument("--port-file", help="write the chosen API port here once listening")
    ap.add_argument("--tls-cert", help="server certificate (PEM); enables HTTPS")
    ap.add_argument("--tls-key", help="server private key (PEM)")
    ap.add_argument("--client-ca", help="CA bundle (PEM) for client certificate authentication")
    ap.add_argument("--token", action="append",
                    help="accept bearer token: TOKEN[:USER[:GROUP,GROUP]] (repeatable; "
                         "default user fakekube-admin in system:masters)")
    ap.add_argument("--token-file", help="kube-apiserver token file: token,user,uid,\"g1,g2\"")
    ap.add_argument("--admin-token", help="token for the harness-only /fake/ control surface "
                                          "(default: random, see --admin-token-file)")
    ap.add_argument("--admin-token-file", help="write the admin token here")
    ap.add_argument("--admin-listen", help="HOST:PORT of a plain-HTTP harness-only control port "
                                           "that stays up across restarts")
    ap.add_argument("--admin-port-file", help="write the chosen admin port here")
    ap.add_argument("--write-kubeconfig", metavar="PATH",
                    help="write a kubeconfig pointing at this server")
    ap.add_argument("--kubeconfig-ca", help="CA (PEM) to embed as certificate-authority-data "
                                            "(else insecure-skip-tls-verify)")
    ap.add_argument("--kubeconfig-client-cert", help="client cert (PEM) to embed in the "
                                                     "kubeconfig instead of a token")
    ap.add_argument("--kubeconfig-client-key", help="client key (PEM) for the kubeconfig")
    ap.add_argument("--history", type=int, default=1000,
                    help="watch history window, in events per resource [1000]")
    ap.add_argument("--etcd-compaction-interval", default="5m",
                    help="as kube-apiserver's (a Go duration; 0: no compaction; negative, "
                         "not refused: ticks back to back, one at every read or write): the "
                         "history of a resource served without a watch cache (events) is cut "
                         "to the previous tick's revision [5m]")
    ap.add_argument("--bookmark-interval", default="10s",
                    help="BOOKMARK period for watches with allowWatchBookmarks [10s]")
    ap.add_argument("--min-request-timeout", default="1800s",
                    help="watches without timeoutSeconds last between this and twice this [1800s]")
    ap.add_argument("--faults", help="initial fault rules: JSON list, or @FILE")
    ap.add_argument("--authorization-mode", choices=("AlwaysAllow", "RBAC"),
                    default="AlwaysAllow",
                    help="authorize requests as kube-apiserver's mode of that name: every "
                    "authenticated request (the default), or by the stored RBAC objects")
    ap.add_argument("--sar-default", choices=("mode", "allow", "deny", "known"), default="mode",
                    help="SubjectAccessReview answer when no rule matches: the authorization "
                         "mode's (AlwaysAllow: allowed, no reason), allow, deny, or allow only "
                         "known users / system:masters [mode]")
    ap.add_argument("--service-endpoint", action="append", metavar="NS/NAME=HOST:PORT",
                    help="where Service NS/NAME is reachable (stands for its EndpointSlices); "
                         "APIServices naming it are proxied there (repeatable)")
    ap.add_argument("--proxy-client-cert", help="front-proxy client certificate (PEM) the "
                                                "aggregator presents to APIService backends")
    ap.add_argument("--proxy-client-key", help="its private key (PEM)")
    ap.add_argument("--aggregator-resync", default="30s",
                    help="period of the APIService availability checks [30s]")
    ap.add_argument("--write-log-size", type=int, default=500000,
                    help="successful writes kept for GET /fake/writes (who wrote what, when)")
    ap.add_argument("--request-log-size", type=int, default=20000,
                    help="requests kept for GET /fake/requests [20000]")
    ap.add_argument("--verbose", "-v", action="store_true",
                    help="log one line per request to stderr")
    ap.add_argument("--parent-pid", type=int,
                    help="exit when this process is gone (harness safety net)")
    return ap


def pflag_argv(ap, argv):
    """pflag takes the argument after a long flag that needs a value as its value whatever it
    looks like (`--etcd-compaction-interval -1s`), where argparse takes one starting with "-"
    for a flag: such pairs are joined as `--flag=value`."""
    takes_value = {s for a in ap._actions if a.nargs is None and a.option_strings
                   for s in a.option_strings if s.startswith("--")}
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in takes_value and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(a + "=" + argv[i + 1])
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(pflag_argv(ap, sys.argv[1:] if argv is None else list(argv)))
    if not args.token and not args.token_file and not args.client_ca:
        print("fakekube: warning: no --token, --token-file or --client-ca: every API request "
              "will get 401", file=sys.stderr)
    app = FakeKube(args)
    app.start()
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not done.wait(0.5):
        if args.parent_pid:
            try:
                os.kill(args.parent_pid, 0)
            except ProcessLookupError:
                print("fakekube: parent %d is gone, exiting" % args.parent_pid,
                      file=sys.stderr, flush=True)
                break
            except PermissionError:
                pass
    app.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: Apache-2.0
"""kube-aggregator emulation: APIService objects with spec.service are served by proxying to
that Service, as kube-apiserver's aggregation layer does.

The fake has no Service networking, so the harness says where a Service lives
(--service-endpoint NS/NAME=HOST:PORT, or PUT /fake/service-endpoints); that mapping stands for
the Service's EndpointSlices.  Behaviour follows staging/src/k8s.io/kube-aggregator:

- handler_proxy.go: a request for /apis/<group>/<version>[/...] whose APIService has a service is
  proxied after the normal authentication (and fault rules) of the fake.  When the APIService is
  not Available the answer is 503 "service unavailable" (text/plain, from http.Error).  The proxy
  opens TLS to the endpoint, verifies it with spec.caBundle against the name
  <service>.<namespace>.svc (or skips verification with spec.insecureSkipTLSVerify), presents the
  front-proxy client certificate (--proxy-client-cert/--proxy-client-key), drops the caller's
  Authorization header (the apiserver's authentication filter removes it) and any X-Remote-*
  header, sets X-Remote-User / X-Remote-Group (repeated) / X-Remote-Extra-<key> from the
  authenticated caller (transport.SetAuthProxyHeaders), re-encodes the query sorted by key
  (url.Values.Encode) and streams the status, headers and body back.  A transport error is a 503
  whose text is the error (responder.Error).
- handler_apis.go: /apis lists the groups of all APIServices (available or not) after the
  built-in ones; /apis/<group> is answered from the APIServices of that group.
- controllers/status/remote/remote_available_controller.go: every APIService with a service is
  checked on change and every --aggregator-resync (30 s upstream): the Service must exist
  (ServiceNotFound), a ClusterIP Service must have the port (ServicePortError), it must have
  endpoints (EndpointsNotFound), and 5 parallel GETs of /apis/<group>/<version> with TLS
  verification off, the front-proxy certificate, user system:kube-aggregator in group
  system:masters and a 5 s timeout must give at least one 2xx (FailedDiscoveryCheck otherwise,
  retried with exponential backoff from 5 ms up to 30 s).  The Available condition is written
  with PUT .../status only when it changed; lastTransitionTime moves only when its status flips.
"""

import base64
import binascii
import copy
import http.client
import json
import queue
import socket
import ssl
import threading
import time
from urllib.parse import parse_qsl, urlencode

APISERVICES = "apiregistration.k8s.io/apiservices"
SERVICES = "core/services"
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
              "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"}
DISCOVERY_ATTEMPTS = 5
DISCOVERY_TIMEOUT = 5.0
BACKOFF_BASE = 0.005
BACKOFF_MAX = 30.0


def parse_endpoint(text):
    """'NS/NAME=HOST:PORT' -> (ns, name, host, port)."""
    key, sep, addr = text.partition("=")
    ns, slash, name = key.partition("/")
    host, colon, port = addr.rpartition(":")
    if not (sep and slash and colon and ns and name and host):
        raise ValueError("service endpoint must be NS/NAME=HOST:PORT, not %r" % text)
    return ns, name, host.strip("[]"), int(port)


def _now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _available(stored):
    for c in (stored.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Available":
            return c.get("status") == "True"
    return False


def _escape_extra_key(k):
    """transport.SetAuthProxyHeaders: extra keys are percent-escaped (url.PathEscape)."""
    out = []
    for ch in k.encode():
        c = chr(ch)
        if c.isalnum() or c in "-._~!$&'()*+,;=:@":
            out.append(c)
        else:
            out.append("%%%02X" % ch)
    return "".join(out)


class Aggregator:
    def __init__(self, app, proxy_cert=None, proxy_key=None, resync=30.0, endpoints=()):
        self.app = app
        self.proxy_cert = proxy_cert
        self.proxy_key = proxy_key
        self.resync = max(0.05, float(resync))
        self.lock = threading.Lock()
        self.endpoints = {}       # (ns, name) -> (host, port)
        self.state = {}           # apiservice name -> {"sig", "next", "failures"}
        self.stop_ev = threading.Event()
        self.kick_ev = threading.Event()
        self.thread = None
        self.checks = 0
        for spec in endpoints:
            ns, name, host, port = parse_endpoint(spec)
            self.endpoints[(ns, name)] = (host, port)

    # ------------------------------------------------------------ lifecycle

    def start(self):
        self.thread = threading.Thread(target=self._loop, name="aggregator", daemon=True)
        self.thread.start()

    def stop(self):
        self.stop_ev.set()
        self.kick_ev.set()
        if self.thread is not None:
            self.thread.join(10)

    # ------------------------------------------------------------ endpoints (harness only)

    def set_endpoint(self, ns, name, address):
        """address 'HOST:PORT', or None/'' to forget the endpoint."""
        with self.lock:
            if address:
                host, _, port = str(address).rpartition(":")
                self.endpoints[(ns, name)] = (host.strip("[]"), int(port))
            else:
                self.endpoints.pop((ns, name), None)
        self.kick_ev.set()

    def endpoint(self, ns, name):
        with self.lock:
            return self.endpoints.get((ns, name))

    def endpoints_view(self):
        with self.lock:
            return {"%s/%s" % k: "%s:%d" % v for k, v in sorted(self.endpoints.items())}

    def status(self):
        with self.lock:
            return {"checks": self.checks,
                    "apiservices": {k: {"failures": v["failures"]} for k, v in
                                    sorted(self.state.items())}}

    # ------------------------------------------------------------ lookups

    def _apiservices(self):
        return self.app.store.items(APISERVICES)

    def match(self, path):
        """The stored APIService (with a service) that serves path, or None."""
        parts = [p for p in path.split("/") if p]
        if len(parts) < 3 or parts[0] != "apis":
            return None
        stored = self.app.store.get(APISERVICES, "", "%s.%s" % (parts[2], parts[1]))
        if stored is None or not (stored.get("spec") or {}).get("service"):
            return None
        return stored

    def _sorted_groups(self, local):
        """APIServices by group (groupPriorityMinimum desc, then name) and version
        (versionPriority desc, then name), like helper.SortedByGroupAndVersion, skipping the
        legacy group and groups the fake serves itself."""
        by_group = {}
        for s in self._apiservices():
            spec = s.get("spec") or {}
            g = spec.get("group", "")
            if not g or g in local:
                continue
            by_group.setdefault(g, []).append(spec)
        order = sorted(by_group, key=lambda g: (-max(sp.get("groupPriorityMinimum", 0)
                                                     for sp in by_group[g]), g))
        return [(g, sorted(by_group[g], key=lambda sp: (-sp.get("versionPriority", 0),
                                                        sp.get("version", ""))))
                for g in order]

    def api_groups(self, local):
        out = []
        for g, specs in self._sorted_groups(local):
            versions = [{"groupVersion": "%s/%s" % (g, sp.get("version", "")),
                         "version": sp.get("version", "")} for sp in specs]
            out.append({"name": g, "versions": versions, "preferredVersion": versions[0]})
        return out

    def api_group(self, group, local):
        for g in self.api_groups(local):
            if g["name"] == group:
                return dict({"kind": "APIGroup", "apiVersion": "v1"}, **g)
        return None

    def paths(self, local):
        out = set()
        for g, specs in self._sorted_groups(local):
            out.add("/apis/" + g)
            for sp in specs:
                out.add("/apis/%s/%s" % (g, sp.get("version", "")))
        return out

    # ------------------------------------------------------------ TLS

    def _client_context(self, spec, verify):
        """The transport of BuildTransportConfig: CA from caBundle (or insecure), client
        certificate = the front-proxy certificate."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if verify and not spec.get("insecureSkipTLSVerify"):
            bundle = spec.get("caBundle") or ""
            try:
                pem = base64.b64decode(bundle, validate=True).decode() if bundle else ""
            except (binascii.Error, UnicodeDecodeError, ValueError) as e:
                raise ValueError("caBundle is not base64 PEM: %s" % e)
            if pem:
                ctx.load_verify_locations(cadata=pem)
            else:
                ctx.load_default_certs()
        else:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.proxy_cert:
            ctx.load_cert_chain(self.proxy_cert, self.proxy_key or self.proxy_cert)
        try:
            ctx.set_alpn_protocols(["http/1.1"])
        except NotImplementedError:
            pass
        return ctx

    @staticmethod
    def _connection(host, port, ctx, server_name, timeout):
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)

        def connect(c=conn):
            sock = socket.create_connection((host, port), timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.sock = ctx.wrap_socket(sock, server_hostname=server_name)
        conn.connect = connect
        return conn

    # ------------------------------------------------------------ the proxy

    def proxy(self, h, stored, path, raw_query, ident, body):
        """Serve one request through the APIService's backend on handler h."""
        spec = stored["spec"]
        svc = spec["service"]
        ns, name = svc.get("namespace", ""), svc.get("name", "")
        if not _available(stored):
            return self._http_error(h, 503, "service unavailable")
        ep = self.endpoint(ns, name)
        if ep is None or self.app.store.get(SERVICES, ns, name) is None:
            return self._http_error(h, 503, "service unavailable")
        try:
            ctx = self._client_context(spec, verify=True)
        except (ValueError, ssl.SSLError, OSError) as e:
            return self._http_error(h, 500, str(e))
        host, port = ep
        pairs = parse_qsl(raw_query or "", keep_blank_values=True)
        pairs.sort(key=lambda kv: kv[0])  # stable: values of one key keep their order
        target = path + ("?" + urlencode(pairs) if pairs else "")
        conn = self._connection(host, port, ctx, "%s.%s.svc" % (name, ns), 30.0)
        try:
            conn.putrequest(h.command, target, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", "%s:%d" % (host, port))
            for k, v in h.headers.items():
                lk = k.lower()
                if lk in HOP_BY_HOP or lk in ("host", "authorization", "content-length") or \
                        lk.startswith("x-remote-") or lk == "x-forwarded-for":
                    continue
                conn.putheader(k, v)
            conn.putheader("X-Remote-User", ident.user)
            for g in ident.groups:
                conn.putheader("X-Remote-Group", g)
            for k, vals in sorted(getattr(ident, "extra", {}).items()):
                for v in vals:
                    conn.putheader("X-Remote-Extra-" + _escape_extra_key(k), v)
            conn.putheader("X-Forwarded-For", h.client_address[0])
            if body or h.command in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(body or b"")))
            conn.endheaders(body or None)
            resp = conn.getresponse()
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            conn.close()
            return self._http_error(h, 503, "error trying to reach service: %s" % e)
        try:
            self._relay(h, resp)
        finally:
            conn.close()

    @staticmethod
    def _relay(h, resp):
        length = resp.getheader("Content-Length")
        h.send_response(resp.status, resp.reason)
        if resp.getheader("Audit-Id") is None:
            h.send_header("Audit-Id", h._audit_id)
        for k, v in resp.getheaders():
            lk = k.lower()
            if lk in HOP_BY_HOP or lk in ("content-length", "date", "server"):
                continue
            h.send_header(k, v)
        chunked = length is None and h.command != "HEAD"
        if chunked:
            h.send_header("Transfer-Encoding", "chunked")
        elif length is not None:
            h.send_header("Content-Length", length)
        h.end_headers()
        h._status = resp.status
        while True:
            data = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
            if not data:
                break
            if chunked:
                h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            else:
                h.wfile.write(data)
            h.wfile.flush()
        if chunked:
            h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

    @staticmethod
    def _http_error(h, code, text):
        """Go's http.Error: text/plain, nosniff, the text and a newline."""
        data = (text + "\n").encode()
        h.send_response(code)
        h.send_header("Content-Type", "text/plain; charset=utf-8")
        h.send_header("X-Content-Type-Options", "nosniff")
        h.send_header("Audit-Id", h._audit_id)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)
        h._status = code

    # ------------------------------------------------------------ availability

    def _signature(self, stored):
        spec = (stored.get("spec") or {})
        svc = spec.get("service") or {}
        ns, name = svc.get("namespace", ""), svc.get("name", "")
        service = self.app.store.get(SERVICES, ns, name)
        return (json.dumps(spec, sort_keys=True),
                service["metadata"]["resourceVersion"] if service else None,
                self.endpoint(ns, name))

    def _loop(self):
        while not self.stop_ev.is_set():
            self.kick_ev.wait(0.2)
            self.kick_ev.clear()
            if self.stop_ev.is_set():
                return
            try:
                self._tick()
            except Exception as e:  # noqa: BLE001 - the loop must survive a bug
                if self.app.verbose:
                    import traceback
                    traceback.print_exc()
                print("fakekube: aggregator: %s: %s" % (type(e).__name__, e), flush=True)

    def _tick(self):
        now = time.monotonic()
        live = set()
        for stored in self._apiservices():
            name = stored["metadata"]["name"]
            if not (stored.get("spec") or {}).get("service"):
                continue
            live.add(name)
            sig = self._signature(stored)
            with self.lock:
                st = self.state.setdefault(name, {"sig": None, "next": 0.0, "failures": 0})
                due = st["sig"] != sig or now >= st["next"]
                st["sig"] = sig
            if not due:
                continue
            ok = self.check(name)
            with self.lock:
                st["failures"] = 0 if ok else st["failures"] + 1
                # workqueue's ItemExponentialFailureRateLimiter: 5 ms, 10 ms, ... up to 30 s
                delay = self.resync if ok else min(
                    self.resync, BACKOFF_MAX, BACKOFF_BASE * (2 ** min(st["failures"] - 1, 20)))
                st["next"] = time.monotonic() + delay
        with self.lock:
            for name in list(self.state):
                if name not in live:
                    del self.state[name]

    def check(self, name):
        """One sync of the remote availability controller for APIService name.  Returns True
        when the check passed."""
        with self.lock:
            self.checks += 1
        stored = self.app.store.get(APISERVICES, "", name)
        if stored is None or not (stored.get("spec") or {}).get("service"):
            return True
        spec = stored["spec"]
        svc = spec["service"]
        ns, sname = svc.get("namespace", ""), svc.get("name", "")
        port = svc.get("port") or 443
        cond = {"type": "Available", "status": "True", "lastTransitionTime": _now_rfc3339()}
        service = self.app.store.get(SERVICES, ns, sname)
        ep = self.endpoint(ns, sname)
        if service is None:
            cond.update(status="False", reason="ServiceNotFound",
                        message="service/%s in %s is not present" % (sname, json.dumps(ns)))
        elif (service.get("spec") or {}).get("type", "ClusterIP") == "ClusterIP" and not any(
                p.get("port") == port for p in (service.get("spec") or {}).get("ports") or []):
            cond.update(status="False", reason="ServicePortError",
                        message="service/%s in %s is not listening on port %d"
                        % (sname, json.dumps(ns), port))
        elif ep is None:
            cond.update(status="False", reason="EndpointsNotFound",
                        message="cannot find endpointslices for service/%s in %s"
                        % (sname, json.dumps(ns)))
        else:
            err = self._discovery_check(spec, ep)
            if err is None:
                cond.update(reason="Passed", message="all checks passed")
            else:
                cond.update(status="False", reason="FailedDiscoveryCheck", message=err)
        self._write_condition(name, stored, cond)
        return cond["status"] == "True"

    def _discovery_check(self, spec, ep):
        host, port = ep
        url = "https://%s:%d/apis/%s/%s" % (host if ":" not in host else "[%s]" % host, port,
                                            spec.get("group", ""), spec.get("version", ""))
        path = "/apis/%s/%s" % (spec.get("group", ""), spec.get("version", ""))
        try:
            ctx = self._client_context(spec, verify=False)
        except (ValueError, ssl.SSLError, OSError) as e:
            return "failing or missing response from %s: %s" % (url, e)
        results = queue.Queue()

        def attempt():
            conn = http.client.HTTPSConnection(host, port, timeout=DISCOVERY_TIMEOUT, context=ctx)
            try:
                conn.request("GET", path, headers={"X-Remote-User": "system:kube-aggregator",
                                                   "X-Remote-Group": "system:masters",
                                                   "Accept-Encoding": "gzip"})
                resp = conn.getresponse()
                resp.read()
                if resp.status < 200 or resp.status >= 300:
                    results.put("failing or missing response from %s: bad status from %s: %d"
                                % (url, url, resp.status))
                else:
                    results.put(None)
            except (OSError, ssl.SSLError, http.client.HTTPException) as e:
                results.put("failing or missing response from %s: Get \"%s\": %s" % (url, url, e))
            finally:
                conn.close()

        for _ in range(DISCOVERY_ATTEMPTS):
            threading.Thread(target=attempt, daemon=True).start()
        last = None
        for _ in range(DISCOVERY_ATTEMPTS):
            try:
                last = results.get(timeout=DISCOVERY_TIMEOUT + 1.0)
            except queue.Empty:
                last = "timed out waiting for %s" % url
            if last is None:
                return None
        return last

    def _write_condition(self, name, stored, cond):
        """SetAPIServiceCondition + updateAPIServiceStatus: write only on a change."""
        new = copy.deepcopy(stored)
        status = new.setdefault("status", {})
        conds = status.setdefault("conditions", [])
        cur = next((c for c in conds if c.get("type") == "Available"), None)
        if cur is None:
            conds.append(cond)
        else:
            if cur.get("status") != cond["status"]:
                cur["status"] = cond["status"]
                cur["lastTransitionTime"] = cond["lastTransitionTime"]
            cur["reason"] = cond.get("reason", "")
            cur["message"] = cond.get("message", "")
        if new.get("status") == stored.get("status"):
            return
        res = self.app.registry.lookup("apiregistration.k8s.io", "v1", "apiservices")
        body = self.app.api.external(res, new)
        try:
            self.app.api.update(res, "", name, body, subresource="status")
        except Exception as e:  # noqa: BLE001 - a conflict or a deletion: retried next sync
            if self.app.verbose:
                print("fakekube: aggregator: status of %s not written: %s" % (name, e),
                      flush=True)
        else:
            if self.app.verbose:
                print("fakekube: aggregator: APIService %s Available=%s (%s)"
                      % (name, cond["status"], cond.get("reason")), flush=True)


#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The local cluster's Service front: one fixed loopback address:port (e.g. 127.0.0.2:8080) that
balances HTTP requests over the Ready pods of a selector, as a Service (with an L7 proxy in front,
per request rather than per connection, so scaling out spreads keep-alive load at once).

Endpoints come from the Kubernetes API only: a list+watch of the namespace's pods matching the
selector (given, or read from a Service object with --service), keeping those with a podIP,
condition Ready=True and no deletionTimestamp.  The target port is --target-port, the Service's
targetPort, or the pod's first container port named http.  Policy: least outstanding requests
with round robin among ties (--policy least-conn, the default) or plain round robin.  No Ready
endpoint: 503 at once.  A connection refused by a backend is retried on another one.  Each
response carries X-Backend-Pod and X-Backend-Addr.  GET /_service/endpoints answers the current
endpoints and per-backend counts as JSON (for tests and people).
"""

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)
if E2E not in sys.path:
    sys.path.insert(0, E2E)

from fakekube.kubeclient import Client  # noqa: E402
from cluster.informer import Informer  # noqa: E402

MAX_HEADER = 64 * 1024
MAX_BODY = 8 * 1024 * 1024
POOL_PER_BACKEND = 256


def pod_ready(p):
    meta = p.get("metadata") or {}
    st = p.get("status") or {}
    if meta.get("deletionTimestamp") or not st.get("podIP"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in st.get("conditions") or [])


def pod_port(p, target_port):
    if isinstance(target_port, int) and target_port > 0:
        return target_port
    cs = ((p.get("spec") or {}).get("containers")) or []
    for c in cs:
        for port in c.get("ports") or []:
            if isinstance(target_port, str) and target_port and port.get("name") == target_port:
                return int(port["containerPort"])
    for c in cs:
        for port in c.get("ports") or []:
            if port.get("name") == "http":
                return int(port["containerPort"])
    for c in cs:
        for port in c.get("ports") or []:
            return int(port["containerPort"])
    return None


class Backend:
    def __init__(self, pod, ip, port):
        self.pod, self.ip, self.port = pod, ip, port
        self.active = 0
        self.requests = 0
        self.errors = 0
        self.idle = []           # pooled (reader, writer)


class Front:
    def __init__(self, host, port, policy="least-conn", timeout=120.0):
        self.host, self.port = host, port
        self.policy = policy
        self.timeout = timeout
        self.backends = {}       # (ip, port) -> Backend  (current endpoints)
        self.order = []          # keys in stable order
        self.rr = 0
        self.no_endpoint = 0
        self.total = 0
        self.server = None
        self.gone = {}           # removed backends still finishing requests

    # ------------------------------------------------------------ endpoints

    def set_endpoints(self, eps):
        """eps: list of (pod, ip, port) that are Ready."""
        new = {(ip, port): pod for pod, ip, port in eps}
        for key in list(self.backends):
            if key not in new:
                b = self.backends.pop(key)
                for _, w in b.idle:
                    w.close()
                b.idle = []
        for key, pod in new.items():
            if key not in self.backends:
                self.backends[key] = Backend(pod, key[0], key[1])
            else:
                self.backends[key].pod = pod
        self.order = sorted(self.backends, key=lambda k: (self.backends[k].pod, k))

    def pick(self, exclude=()):
        keys = [k for k in self.order if k not in exclude]
        if not keys:
            return None
        n = len(keys)
        start = self.rr % n
        self.rr += 1
        rotated = keys[start:] + keys[:start]
        if self.policy == "round-robin":
            return self.backends[rotated[0]]
        return min((self.backends[k] for k in rotated), key=lambda b: b.active)

    def state(self):
        return {"listen": "%s:%d" % (self.host, self.port), "policy": self.policy,
                "total": self.total, "no_endpoint": self.no_endpoint,
                "endpoints": [{"pod": b.pod, "ip": b.ip, "port": b.port, "active": b.active,
                               "requests": b.requests, "errors": b.errors}
                              for b in (self.backends[k] for k in self.order)]}

    # ------------------------------------------------------------ HTTP

    async def serve(self):
        self.server = await asyncio.start_server(self.handle, self.host, self.port,
                                                 limit=MAX_HEADER, backlog=1024)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.server

    async def handle(self, reader, writer):
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                if len(parts) != 3:
                    await self.reply(writer, 400, b"bad request line\n", False)
                    return
                method, target, version = parts
                headers = []
                clen = 0
                keep = version == "HTTP/1.1"
                for ln in lines[1:]:
                    if not ln:
                        continue
                    k, _, v = ln.partition(":")
                    lk = k.strip().lower()
                    if lk == "content-length":
                        try:
                            clen = int(v.strip())
                        except ValueError:
                            clen = -1
                    elif lk == "transfer-encoding":
                        await self.reply(writer, 411, b"chunked bodies not supported\n", False)
                        return
                    elif lk == "connection":
                        keep = v.strip().lower() != "close" and (
                            version == "HTTP/1.1" or v.strip().lower() == "keep-alive")
                        continue
                    elif lk in ("keep-alive", "proxy-connection"):
                        continue
                    headers.append((k.strip(), v.strip()))
                if clen < 0 or clen > MAX_BODY:
                    await self.reply(writer, 413, b"bad body length\n", False)
                    return
                body = await reader.readexactly(clen) if clen else b""
                if target.startswith("/_service/"):
                    await self.reply(writer, 200, (json.dumps(self.state()) + "\n").encode(),
                                     keep, "application/json")
                else:
                    await self.proxy(writer, method, target, headers, body, keep)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def reply(self, writer, code, payload, keep, ctype="text/plain", extra=()):
        reason = {200: "OK", 400: "Bad Request", 411: "Length Required", 413: "Payload Too Large",
                  502: "Bad Gateway", 503: "Service Unavailable",
                  504: "Gateway Timeout"}.get(code, "Status")
        hdr = ["HTTP/1.1 %d %s" % (code, reason), "Content-Type: " + ctype,
               "Content-Length: %d" % len(payload),
               "Connection: " + ("keep-alive" if keep else "close")] + \
              ["%s: %s" % kv for kv in extra]
        writer.write(("\r\n".join(hdr) + "\r\n\r\n").encode("latin-1") + payload)
        await writer.drain()

    async def proxy(self, writer, method, target, headers, body, keep):
        self.total += 1
        tried = []
        for _ in range(3):
            b = self.pick(exclude=tried)
            if b is None:
                break
            tried.append((b.ip, b.port))
            b.active += 1
            b.requests += 1
            try:
                status_line, rheaders, rbody = await asyncio.wait_for(
                    self.forward(b, method, target, headers, body), self.timeout)
            except (ConnectionRefusedError, ConnectionResetError) as e:
                b.errors += 1
                if isinstance(e, ConnectionRefusedError):
                    continue        # never reached the pod: another one may take it
                await self.reply(writer, 502, b"backend reset the connection\n", keep,
                                 extra=[("X-Backend-Pod", b.pod)])
                return
            except asyncio.TimeoutError:
                b.errors += 1
                await self.reply(writer, 504, b"backend timeout\n", keep,
                                 extra=[("X-Backend-Pod", b.pod)])
                return
            except (OSError, asyncio.IncompleteReadError, ValueError) as e:
                b.errors += 1
                await self.reply(writer, 502, ("backend error: %s\n" % e).encode(), keep,
                                 extra=[("X-Backend-Pod", b.pod)])
                return
            finally:
                b.active -= 1
            out = [status_line]
            for k, v in rheaders:
                if k.lower() not in ("connection", "keep-alive", "transfer-encoding",
                                     "content-length"):
                    out.append("%s: %s" % (k, v))
            out += ["Content-Length: %d" % len(rbody),
                    "Connection: " + ("keep-alive" if keep else "close"),
                    "X-Backend-Pod: " + b.pod, "X-Backend-Addr: %s:%d" % (b.ip, b.port)]
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + rbody)
            await writer.drain()
            return
        self.no_endpoint += 1
        await self.reply(writer, 503, b"no ready endpoints\n", keep)

    async def forward(self, b, method, target, headers, body):
        """One request to backend b over a pooled keep-alive connection."""
        req = ["%s %s HTTP/1.1" % (method, target)] + ["%s: %s" % kv for kv in headers] + \
              ["Content-Length: %d" % len(body), "Connection: keep-alive"]
        data = ("\r\n".join(req) + "\r\n\r\n").encode("latin-1") + body
        for attempt in range(2):
            reused = bool(b.idle)
            if reused:
                r, w = b.idle.pop()
            else:
                r, w = await asyncio.open_connection(b.ip, b.port, limit=MAX_HEADER)
            try:
                w.write(data)
                await w.drain()
                head = await r.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError):
                w.close()
                if reused and attempt == 0:
                    continue        # a stale pooled connection: retry on a fresh one
                raise
            break
        lines = head.decode("latin-1").split("\r\n")
        status_line = lines[0]
        rheaders = []
        clen = None
        close = False
        for ln in lines[1:]:
            if not ln:
                continue
            k, _, v = ln.partition(":")
            k, v = k.strip(), v.strip()
            if k.lower() == "content-length":
                clen = int(v)
            elif k.lower() == "connection" and v.lower() == "close":
                close = True
            rheaders.append((k, v))
        try:
            if clen is None:
                rbody = await r.read()
                close = True
            else:
                rbody = await r.readexactly(clen)
        except BaseException:
            w.close()
            raise
        if close or (b.ip, b.port) not in self.backends or len(b.idle) >= POOL_PER_BACKEND:
            w.close()
        else:
            b.idle.append((r, w))
        return status_line, rheaders, rbody


def selector_string(sel):
    if isinstance(sel, dict):
        return ",".join("%s=%s" % kv for kv in sorted(sel.items()))
    return sel or ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", default="default")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--service", help="read selector and targetPort from this Service object")
    g.add_argument("--selector", help="label selector of the pods, e.g. app=llm")
    ap.add_argument("--target-port", default="", help="port number or container port name")
    ap.add_argument("--listen", default="127.0.0.2:8080")
    ap.add_argument("--policy", choices=("least-conn", "round-robin"), default="least-conn")
    ap.add_argument("--timeout", type=float, default=120.0, help="backend response timeout (s)")
    ap.add_argument("--port-file", help="write the bound port here once listening")
    a = ap.parse_args(argv)
    host, _, port = a.listen.rpartition(":")
    client = Client.from_kubeconfig(a.kubeconfig, timeout=10)
    target_port = int(a.target_port) if a.target_port.isdigit() else a.target_port
    selector = a.selector
    if a.service:
        svc = client.get("services", a.service, a.namespace)
        selector = selector_string((svc.get("spec") or {}).get("selector"))
        ports = (svc.get("spec") or {}).get("ports") or []
        if not target_port and ports:
            target_port = ports[0].get("targetPort") or ports[0].get("port")
    front = Front(host, int(port), a.policy, a.timeout)

    async def amain():
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        def on_change():
            eps = []
            for p in inf.snapshot().values():
                if pod_ready(p):
                    pp = pod_port(p, target_port)
                    if pp:
                        eps.append((p["metadata"]["name"], p["status"]["podIP"], pp))
            loop.call_soon_threadsafe(front.set_endpoints, eps)

        inf = Informer(client, "pods", a.namespace, selector, on_change, name="service-pods")
        await front.serve()
        inf.start()
        await loop.run_in_executor(None, inf.wait_synced, 20)
        if a.port_file:
            with open(a.port_file + ".tmp", "w") as f:
                f.write(str(front.port))
            os.replace(a.port_file + ".tmp", a.port_file)
        sys.stderr.write("%s service: %s:%d -> pods %s (%s)\n" % (
            time.strftime("%H:%M:%S"), host, front.port, selector, a.policy))
        sys.stderr.flush()
        await stop.wait()
        front.server.close()
        threading.Thread(target=inf.stop, daemon=True).start()

    asyncio.run(amain())
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""fakeserve server: one fake GPU inference server (one pod) on asyncio.

Model: --gpus G x --slots S concurrency slots shared by one FIFO queue.  Each request waits for
a slot, holds it for a service time drawn from a seeded lognormal with mean --service-ms (and
shape --service-sigma), then answers.  Latency is queue wait + service time, so it stays near
the service time at light load, grows as load nears capacity G*S/mean and explodes past it: the
sleeping is real.  With --token-cost-ms the mean service time follows the request's tokens
instead: (--prompt-token-cost x prompt tokens + generated tokens) x --token-cost-ms, so a slot
serves 1000 / token-cost-ms weighted tokens/s whatever the mix (capacity limited in tokens), and
the vLLM token counters count those tokens.  --prompt-mix "P:G@T,..." overrides each request's
prompt and generated token counts by wall clock: from UNIX time T on, P prompt and G generated
tokens (before the first T, the first entry), so every pod, old or new, shifts at the same moment.
Until --cold-start seconds have passed /health answers 503 (the kubelet's
readiness probe) and completions are refused, as a server still loading weights would.

Routes: POST /v1/completions and /v1/chat/completions (OpenAI-style JSON), GET /v1/models,
GET /health (and /v2/health/ready), GET /metrics (--profile vllm|triton|tgi|sglang|tei; NIM's at
/v1/metrics).  Harness only,
with header X-Fake-Token equal to --control-token: GET /_fake/state, POST /_fake/fault with
{"metrics": "none"|"hang"|"garbage"|"slow", "metrics_delay_ms": N, "service_ms": M}.

SIGTERM/SIGINT: stop accepting, close idle keep-alive connections, answer new requests on open
connections 503 (Connection: close), let queued and running requests finish within --grace
seconds, then exit 0.
"""

import argparse
import asyncio
import collections
import json
import math
import os
import random
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import metrics as M  # noqa: E402

MAX_HEADER = 64 * 1024
MAX_BODY = 1024 * 1024
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           405: "Method Not Allowed", 411: "Length Required", 413: "Payload Too Large",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}


class Slots:
    """G*S slots handed out strictly first come, first served."""

    def __init__(self, n):
        self.free = n
        self.waiters = collections.deque()

    async def acquire(self):
        if self.free > 0 and not self.waiters:
            self.free -= 1
            return
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()
            else:
                try:
                    self.waiters.remove(fut)
                except ValueError:
                    pass
            raise

    def release(self):
        while self.waiters:
            f = self.waiters.popleft()
            if not f.done():
                f.set_result(None)
                return
        self.free += 1


class FakeServer:
    def __init__(self, args):
        self.args = args
        self.stats = M.Stats()
        self.slots = Slots(args.gpus * args.slots)
        self.rng = random.Random(args.seed)
        self.service_ms = args.service_ms
        self.sigma = args.service_sigma
        self.metrics_fault = args.metrics_fault
        self.metrics_delay = args.metrics_delay_ms / 1000.0
        self.started = time.monotonic()
        self.loaded_at = self.started + args.cold_start
        self.draining = False
        self.inflight = 0            # queued + running requests
        self.idle_event = asyncio.Event()
        self.idle_event.set()
        self.conns = {}              # writer -> busy flag
        self.server = None
        self.next_id = 0
        self.exit_event = asyncio.Event()

    # ------------------------------------------------------------ model

    def loaded(self):
        return time.monotonic() >= self.loaded_at

    def tokens(self, prompt_tokens, max_tokens, now=None):
        """The (prompt, generated) tokens a request costs: the --prompt-mix entry of the wall
        clock, else what the request says."""
        mix = self.args.prompt_mix
        if not mix:
            return prompt_tokens, max_tokens
        now = time.time() if now is None else now
        cur = mix[0]
        for e in mix:
            if e[2] <= now:
                cur = e
        return cur[0], cur[1]

    def mean_service_s(self, prompt_tokens, gen_tokens):
        if self.args.token_cost_ms > 0:
            w = self.args.prompt_token_cost * prompt_tokens + gen_tokens
            return max(w, 1.0) * self.args.token_cost_ms / 1000.0
        return self.service_ms / 1000.0

    def draw_service(self, mean=None):
        mean = self.service_ms / 1000.0 if mean is None else mean
        if self.sigma <= 0:
            return mean
        mu = math.log(mean) - self.sigma * self.sigma / 2.0
        return self.rng.lognormvariate(mu, self.sigma)

    async def infer(self, prompt_tokens, max_tokens):
        """Queue, hold a slot for one service time; returns (queued_s, service_s)."""
        st = self.stats
        self.inflight += 1
        self.idle_event.clear()
        st.waiting += 1
        t0 = time.monotonic()
        try:
            try:
                await self.slots.acquire()
            finally:
                st.waiting -= 1
            t1 = time.monotonic()
            st.running += 1
            try:
                service = self.draw_service(self.mean_service_s(prompt_tokens, max_tokens))
                await asyncio.sleep(service)
            finally:
                st.running -= 1
                self.slots.release()
            t2 = time.monotonic()
            st.finished(t1 - t0, t2 - t1, prompt_tokens, max_tokens)
            return t1 - t0, t2 - t1
        finally:
            self.inflight -= 1
            if self.inflight == 0:
                self.idle_event.set()

    # ------------------------------------------------------------ HTTP

    async def handle_conn(self, reader, writer):
        self.conns[writer] = False
        try:
            while True:
                req = await self.read_request(reader, writer)
                if req is None:
                    return
                method, path, headers, body = req
                self.conns[writer] = True
                keep = headers.get("connection", "").lower() != "close"
                try:
                    code, ctype, payload, extra = await self.route(method, path, headers, body)
                except Exception as e:  # a bug here must not kill the server
                    code, ctype, payload, extra = 500, "text/plain", ("%s\n" % e).encode(), {}
                if code is None:
                    return   # hang fault: the connection is dropped by the caller or at exit
                if self.draining:
                    keep = False
                await self.write_response(writer, code, ctype, payload, keep, extra)
                self.conns[writer] = False
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self.conns.pop(writer, None)
            try:
                writer.close()
            except Exception:
                pass

    async def read_request(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError:
            await self.write_response(writer, 431, "text/plain", b"headers too large\n", False)
            return None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            await self.write_response(writer, 400, "text/plain", b"bad request line\n", False)
            return None
        method, target, _ = parts
        headers = {}
        for ln in lines[1:]:
            if not ln:
                continue
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        body = b""
        if headers.get("transfer-encoding"):
            await self.write_response(writer, 411, "text/plain", b"chunked not supported\n",
                                      False)
            return None
        n = headers.get("content-length")
        if n:
            try:
                n = int(n)
            except ValueError:
                n = -1
            if n < 0 or n > MAX_BODY:
                await self.write_response(writer, 413, "text/plain", b"bad body length\n", False)
                return None
            body = await reader.readexactly(n)
        return method, target.split("?", 1)[0], headers, body

    async def write_response(self, writer, code, ctype, payload, keep, extra=None):
        hdr = ["HTTP/1.1 %d %s" % (code, REASONS.get(code, "Status")),
               "Content-Type: " + ctype, "Content-Length: %d" % len(payload),
               "Connection: " + ("keep-alive" if keep else "close")]
        for k, v in (extra or {}).items():
            hdr.append("%s: %s" % (k, v))
        writer.write(("\r\n".join(hdr) + "\r\n\r\n").encode("latin-1") + payload)
        await writer.drain()

    @staticmethod
    def _json(code, obj, extra=None):
        return code, "application/json", (json.dumps(obj) + "\n").encode(), extra or {}

    def _error(self, code, msg, typ="server_error"):
        return self._json(code, {"object": "error", "message": msg, "type": typ, "code": code})

    async def route(self, method, path, headers, body):
        if path.startswith("/_fake/"):
            return self.control(method, path, headers, body)
        if path == M.metrics_path(self.args.profile):
            if method != "GET":
                return self._error(405, "GET only")
            return await self.metrics()
        if path in ("/health", "/v2/health/ready", "/ready"):
            if self.loaded() and not self.draining:
                return 200, "text/plain", b"", {}
            return 503, "text/plain", (b"draining\n" if self.draining else b"loading\n"), {}
        if path == "/v1/models":
            return self._json(200, {"object": "list", "data": [
                {"id": self.args.model, "object": "model", "owned_by": "fakeserve",
                 "created": int(self.stats.created)}]})
        if path in ("/v1/completions", "/v1/chat/completions", "/generate"):
            if method != "POST":
                return self._error(405, "POST only", "invalid_request_error")
            return await self.completion(path, body)
        return self._error(404, "no route %s" % path, "invalid_request_error")

    async def completion(self, path, body):
        st = self.stats
        st.requests += 1
        if self.draining:
            st.failure += 1
            return self._error(503, "server is shutting down")
        if not self.loaded():
            st.failure += 1
            return self._error(503, "model is still loading")
        try:
            req = json.loads(body or b"{}")
            if not isinstance(req, dict):
                raise ValueError("body must be a JSON object")
            max_tokens = int(req.get("max_tokens") or 16)
        except (ValueError, TypeError) as e:
            st.failure += 1
            return self._error(400, "invalid request: %s" % e, "invalid_request_error")
        if st.waiting >= self.args.max_queue:
            st.failure += 1
            return self._error(503, "queue full (%d waiting)" % st.waiting)
        prompt = req.get("prompt") if "messages" not in req else json.dumps(req["messages"])
        prompt_tokens = max(1, len(str(prompt or "").split()))
        prompt_tokens, max_tokens = self.tokens(prompt_tokens, max_tokens)
        queued, service = await self.infer(prompt_tokens, max_tokens)
        self.next_id += 1
        model = req.get("model") or self.args.model
        text = " fake" * min(max_tokens, 64)
        created = int(time.time())
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                 "total_tokens": prompt_tokens + max_tokens}
        extra = {"X-Queue-Ms": "%.3f" % (queued * 1000), "X-Service-Ms": "%.3f" % (service * 1000),
                 "X-Pod-Name": self.args.pod_name or "", "X-Pod-Ip": self.args.host}
        if path == "/v1/chat/completions":
            return self._json(200, {
                "id": "chatcmpl-%s-%d" % (self.args.pod_name or "fake", self.next_id),
                "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "logprobs": None, "finish_reason": "stop"}],
                "usage": usage}, extra)
        return self._json(200, {
            "id": "cmpl-%s-%d" % (self.args.pod_name or "fake", self.next_id),
            "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
            "usage": usage}, extra)

    async def metrics(self):
        fault = self.metrics_fault
        if fault == "hang":
            await asyncio.sleep(86400)
        if fault == "slow":
            await asyncio.sleep(self.metrics_delay)
        if fault == "garbage":
            return 200, "text/plain; version=0.0.4", M.GARBAGE.encode("latin-1"), {}
        text = M.render(self.args.profile, self.stats, self.args.model,
                        self.args.gpus * self.args.slots)
        return 200, "text/plain; version=0.0.4; charset=utf-8", text.encode(), {}

    def control(self, method, path, headers, body):
        tok = self.args.control_token
        if not tok or headers.get("x-fake-token") != tok:
            return self._error(401, "control token required")
        if path == "/_fake/state" and method == "GET":
            st = self.stats
            return self._json(200, {
                "pid": os.getpid(), "loaded": self.loaded(), "draining": self.draining,
                "requests": st.requests, "success": st.success, "failure": st.failure,
                "running": st.running, "waiting": st.waiting, "inflight": self.inflight,
                "capacity_rps": self.capacity(), "service_ms": self.service_ms,
                "metrics_fault": self.metrics_fault, "profile": self.args.profile,
                "connections": len(self.conns)})
        if path == "/_fake/fault" and method == "POST":
            try:
                spec = json.loads(body or b"{}")
                if "metrics" in spec:
                    if spec["metrics"] not in ("none", "hang", "garbage", "slow"):
                        raise ValueError("metrics must be none, hang, garbage or slow")
                    self.metrics_fault = spec["metrics"]
                if "metrics_delay_ms" in spec:
                    self.metrics_delay = float(spec["metrics_delay_ms"]) / 1000.0
                if "service_ms" in spec:
                    v = float(spec["service_ms"])
                    if v <= 0:
                        raise ValueError("service_ms must be > 0")
                    self.service_ms = v
            except (ValueError, TypeError, AttributeError) as e:
                return self._error(400, str(e), "invalid_request_error")
            return self._json(200, {"metrics": self.metrics_fault,
                                    "metrics_delay_ms": self.metrics_delay * 1000,
                                    "service_ms": self.service_ms})
        return self._error(404, "no control route %s %s" % (method, path))

    def capacity(self):
        """req/s at full load (with --token-cost-ms: at the current --prompt-mix entry, or
        the mean service time when there is none)."""
        mean = self.service_ms / 1000.0
        if self.args.token_cost_ms > 0 and self.args.prompt_mix:
            mean = self.mean_service_s(*self.tokens(0, 0))
        return self.args.gpus * self.args.slots / mean

    # ------------------------------------------------------------ lifecycle

    async def run(self):
        loop = asyncio.get_running_loop()
        self.server = await asyncio.start_server(self.handle_conn, self.args.host, self.args.port,
                                                 limit=MAX_HEADER, backlog=1024)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.begin_drain)
        log("listening on %s:%d profile=%s gpus=%d slots=%d service_ms=%g cold_start=%gs "
            "capacity=%.2f req/s" % (self.args.host, self.args.port, self.args.profile,
                                     self.args.gpus, self.args.slots, self.service_ms,
                                     self.args.cold_start, self.capacity()))
        await self.exit_event.wait()

    def begin_drain(self):
        if self.draining:
            return
        self.draining = True
        log("SIGTERM: draining %d in-flight request(s), grace %gs" % (self.inflight,
                                                                     self.args.grace))
        self.server.close()
        for w, busy in list(self.conns.items()):
            if not busy:
                w.close()
        asyncio.get_running_loop().create_task(self.finish_drain())

    async def finish_drain(self):
        try:
            await asyncio.wait_for(self.idle_event.wait(), self.args.grace)
            log("drained; exiting")
        except asyncio.TimeoutError:
            log("grace period over with %d request(s) in flight; exiting" % self.inflight)
        await asyncio.sleep(0.05)   # let the last responses flush
        self.exit_event.set()


def log(msg):
    sys.stderr.write("%s fakeserve[%d] %s\n" % (time.strftime("%H:%M:%S"), os.getpid(), msg))
    sys.stderr.flush()


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", default="127.0.0.1:8000", help="IP:PORT to bind")
    ap.add_argument("--gpus", type=int, default=1, help="GPUs of this server (G)")
    ap.add_argument("--slots", type=int, default=4, help="concurrent requests per GPU (S)")
    ap.add_argument("--service-ms", type=float, default=500.0, help="mean service time")
    ap.add_argument("--service-sigma", type=float, default=0.25,
                    help="lognormal shape (0 = constant service time)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", choices=M.PROFILES, default="vllm")
    ap.add_argument("--model", default="fake-model")
    ap.add_argument("--cold-start", type=float, default=0.0, help="seconds before /health is 200")
    ap.add_argument("--grace", type=float, default=10.0, help="SIGTERM drain time limit (s)")
    ap.add_argument("--max-queue", type=int, default=100000, help="503 when this many wait")
    ap.add_argument("--metrics-fault", choices=("none", "hang", "garbage", "slow"),
                    default="none")
    ap.add_argument("--metrics-delay-ms", type=float, default=3000.0,
                    help="delay of the 'slow' metrics fault")
    ap.add_argument("--token-cost-ms", type=float, default=0.0,
                    help="ms of slot time per weighted token (0: --service-ms per request)")
    ap.add_argument("--prompt-token-cost", type=float, default=0.25,
                    help="a prompt token's cost in generated tokens (with --token-cost-ms)")
    ap.add_argument("--prompt-mix", default="",
                    help="P:G@UNIX_TS,... prompt and generated tokens per request by wall clock")
    ap.add_argument("--control-token", default="", help="enables /_fake/ with this token")
    ap.add_argument("--pod-name", default="")
    a = ap.parse_args(argv)
    host, _, port = a.listen.rpartition(":")
    a.host, a.port = host.strip("[]"), int(port)
    if a.gpus < 1 or a.slots < 1 or a.service_ms <= 0:
        ap.error("--gpus and --slots must be >= 1 and --service-ms > 0")
    if a.token_cost_ms < 0 or a.prompt_token_cost < 0:
        ap.error("--token-cost-ms and --prompt-token-cost must be >= 0")
    a.prompt_mix = parse_mix(a.prompt_mix, ap.error)
    return a


def parse_mix(spec, error):
    """"P:G@T,..." -> [(P, G, T)] sorted by T; [] for ""."""
    out = []
    for part in filter(None, (x.strip() for x in spec.split(","))):
        try:
            pg, _, t = part.partition("@")
            p, _, g = pg.partition(":")
            e = (int(p), int(g), float(t or 0))
        except ValueError:
            error("--prompt-mix: %r is not P:G@UNIX_TS" % part)
        if e[0] < 0 or e[1] < 1:
            error("--prompt-mix: %r needs P >= 0 and G >= 1" % part)
        out.append(e)
    return sorted(out, key=lambda e: e[2])


def main(argv=None):
    args = parse_args(argv)

    async def amain():
        srv = FakeServer(args)
        await srv.run()

    try:
        asyncio.run(amain())
    except OSError as e:
        log("cannot listen on %s: %s" % (args.listen, e))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

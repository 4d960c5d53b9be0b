# SPDX-License-Identifier: Apache-2.0
"""A fake Prometheus HTTP API on loopback for the end-to-end tests of the
Prometheus source (`gpuscaler run` with metrics-source: prometheus, and
`gpuscaler plan --prometheus`).

It answers the two endpoints gpuscaler calls, as Prometheus does:

- /api/v1/query_range: a matrix with one series, a sample at start + i x step
  for every step up to end, whose value is range_value(t);
- /api/v1/query: a vector with one sample, instant_value(query), or one series
  per (labels, value) when instant_value returns a list of them (404 when the
  server was given none), stamped with the query's time (now without one).

A request is a GET, or a POST of the same parameters form-encoded (which
gpuscaler sends when the URL would be long, as the per-pod query's is). Every
request is recorded as (path, params) with params the first value of
each parameter (a POST's body first, then its URL's), parsed to float for start, end, step and time, and its
headers (a dict, names in lower case) in the same order in `headers`, its arrival
(time.monotonic()) in `arrived`. A hook may
answer a request itself (for error responses): reply(path, params) returns
None to let the default answer it, or (status, body dict).

    prom = FakePrometheus(lambda t: 50.0)
    ... prom.url ...
    prom.ranges()     # [(start, end, step)] of the query_range calls, in arrival order
    prom.close()
"""
import http.server
import json
import threading
import time
import urllib.parse


def _fmt(v):
    """A sample value as Prometheus writes it: the shortest form that reads back the same
    (strconv.FormatFloat(v, 'f', -1, 64); Python's repr, which may use an exponent)."""
    return repr(float(v))


class FakePrometheus:
    def __init__(self, range_value, instant_value=None, reply=None, timed=False):
        """timed: instant_value(query, t) is given the evaluation time too (the `time`
        parameter, else now)."""
        self.lock = threading.Lock()
        self.requests = []   # (path, params)
        self.headers = []    # {name.lower(): value} of each request
        self.arrived = []    # time.monotonic() of each request's arrival
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                self._serve(b"")

            def do_POST(self):
                # the same parameters in a form-encoded body, as Prometheus' API takes them
                # (Go's ParseForm: the body's values before the URL's; the media type's case
                # does not matter; gpuscaler sends no other, so a multipart body, which
                # Prometheus reads too, is not read here)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                form = self.headers.get("Content-Type", "").split(";")[0].strip().lower() == \
                    "application/x-www-form-urlencoded"
                self._serve(body if form else b"")

            def _serve(self, form):
                u = urllib.parse.urlparse(self.path)
                params = {k: v[0] for k, v in urllib.parse.parse_qs(u.query).items()}
                params.update({k: v[0] for k, v in
                               urllib.parse.parse_qs(form.decode("utf-8", "replace")).items()})
                for k in ("start", "end", "step", "time"):
                    if k in params:
                        params[k] = float(params[k])
                with outer.lock:
                    outer.requests.append((u.path, params))
                    outer.arrived.append(time.monotonic())
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                got = reply(u.path, params) if reply else None
                if got is None:
                    got = outer._answer(u.path, params, range_value, instant_value, timed)
                if got is None:
                    self.send_error(404)
                    return
                status, doc = got
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def _answer(path, params, range_value, instant_value, timed=False):
        if path == "/api/v1/query_range":
            a, b, st = params["start"], params["end"], params["step"]
            n = int(round((b - a) / st)) + 1
            vals = [[a + i * st, "%.6f" % range_value(a + i * st)] for i in range(n)]
            data = {"resultType": "matrix", "result": [{"metric": {}, "values": vals}]}
        elif path == "/api/v1/query" and instant_value is not None:
            # an instant vector's samples carry the evaluation time, as Prometheus' do
            at = params.get("time", time.time())
            q = params.get("query", "")
            v = instant_value(q, at) if timed else instant_value(q)
            if isinstance(v, list):  # [(labels, value)]: a vector of that many series
                res = [{"metric": m, "value": [at, _fmt(x)]} for m, x in v]
            else:
                res = [{"metric": {}, "value": [at, _fmt(v)]}]
            data = {"resultType": "vector", "result": res}
        else:
            return None
        return 200, {"status": "success", "data": data}

    def queries(self):
        """The PromQL of every request, in arrival order."""
        with self.lock:
            return [p.get("query", "") for _, p in self.requests]

    def ranges(self):
        """(start, end, step) of every query_range request, in arrival order."""
        with self.lock:
            return [(p["start"], p["end"], p["step"]) for path, p in self.requests
                    if path == "/api/v1/query_range"]

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()

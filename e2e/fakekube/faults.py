# SPDX-License-Identifier: Apache-2.0
"""Fault injection rules for the harness (never part of the Kubernetes API surface).

A rule matches requests by HTTP method, Kubernetes verb, resource, namespace, user and regular
expressions on the path and query string, and either delays them ("latency"), answers them with
an error Status ("error": 429 with Retry-After, 500, 409, ...) or drops the connection without
an answer ("reset").  "count" bounds how many requests a rule hits; null means until cleared.
Immediate actions (drop-watches, compact, restart, clear) are carried out by the server.
"""

import itertools
import re
import threading

from .api import StatusError

RULE_ACTIONS = ("error", "latency", "reset")
IMMEDIATE_ACTIONS = ("drop-watches", "compact", "etcd-compaction-tick", "restart", "clear")
_MATCH_KEYS = ("method", "verb", "resource", "subresource", "namespace", "name", "user")


class FaultSpecError(ValueError):
    pass


def _as_list(v):
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    return [str(v)]


class Rule:
    def __init__(self, rid, spec):
        self.id = rid
        self.spec = dict(spec)
        self.action = spec.get("action")
        if self.action not in RULE_ACTIONS:
            raise FaultSpecError("unknown fault action %r (rules: %s; immediate: %s)"
                                 % (self.action, ", ".join(RULE_ACTIONS),
                                    ", ".join(IMMEDIATE_ACTIONS)))
        try:
            self.path_re = re.compile(spec.get("path") or "")
            self.query_re = re.compile(spec.get("query") or "")
        except re.error as e:
            raise FaultSpecError("bad regular expression: %s" % e)
        self.match = {k: _as_list(spec.get(k)) for k in _MATCH_KEYS}
        if self.match["method"]:
            self.match["method"] = [m.upper() for m in self.match["method"]]
        count = spec.get("count", None if self.action == "latency" else 1)
        if count is not None and (not isinstance(count, int) or count < 0):
            raise FaultSpecError("count must be a non-negative integer or null")
        self.remaining = count
        self.hits = 0
        if self.action == "error":
            st = spec.get("status", 500)
            if not isinstance(st, int) or not 100 <= st <= 599:
                raise FaultSpecError("status must be an HTTP status code")
            self.status = st
        if self.action == "latency":
            ms = spec.get("ms", spec.get("latencyMs"))
            if not isinstance(ms, (int, float)) or ms < 0:
                raise FaultSpecError("latency needs ms >= 0")
            self.ms = float(ms)

    def matches(self, req):
        if self.remaining == 0:
            return False
        for k in _MATCH_KEYS:
            want = self.match[k]
            if want is not None and str(req.get(k) or "") not in want:
                return False
        if not self.path_re.search(req.get("path", "")):
            return False
        if not self.query_re.search(req.get("query", "")):
            return False
        return True

    def describe(self):
        d = dict(self.spec)
        d["id"] = self.id
        d["remaining"] = self.remaining
        d["hits"] = self.hits
        return d


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.ids = itertools.count(1)

    def add(self, spec):
        with self.lock:
            r = Rule(next(self.ids), spec)
            self.rules.append(r)
            return r.describe()

    def clear(self):
        with self.lock:
            n = len(self.rules)
            self.rules = []
            return n

    def remove(self, rid):
        with self.lock:
            before = len(self.rules)
            self.rules = [r for r in self.rules if r.id != rid]
            return before - len(self.rules)

    def list(self):
        with self.lock:
            return [r.describe() for r in self.rules]

    def check(self, req):
        """Return (latency_seconds, rule or None) for a request; consumes counts."""
        latency = 0.0
        hit = None
        with self.lock:
            for r in self.rules:
                if not r.matches(req):
                    continue
                if r.action == "latency":
                    if latency == 0.0:
                        latency = r.ms / 1000.0
                        r.hits += 1
                        if r.remaining is not None:
                            r.remaining -= 1
                elif hit is None:
                    hit = r
                    r.hits += 1
                    if r.remaining is not None:
                        r.remaining -= 1
            self.rules = [r for r in self.rules if r.remaining != 0]
        return latency, hit


def fault_error(rule, req, res):
    """The StatusError an "error" rule answers with, shaped as the real server's."""
    spec = rule.spec
    code = rule.status
    name = req.get("name") or ""
    gr = res.group_resource if res is not None else (req.get("resource") or "")
    retry = spec.get("retryAfter", spec.get("retryAfterSeconds"))
    headers = {}
    details = None
    if code == 429:
        retry = 1 if retry is None else retry
        reason, msg = "TooManyRequests", "Too many requests, please try again later."
        details = {"retryAfterSeconds": int(retry)}
    elif code == 500:
        reason = "InternalError"
        msg = "Internal error occurred: %s" % spec.get("message", "injected fault")
        details = {"causes": [{"message": spec.get("message", "injected fault")}]}
    elif code == 503:
        reason, msg = "ServiceUnavailable", "the server is currently unable to handle the request"
    elif code == 504:
        reason = "Timeout"
        msg = ("the server was unable to return a response in the time allotted, but may still "
               "be processing the request")
    elif code == 409:
        reason = "Conflict"
        msg = ('Operation cannot be fulfilled on %s "%s": the object has been modified; please '
               'apply your changes to the latest version and try again' % (gr, name))
        details = {"name": name, "kind": res.plural if res else gr}
        if res is not None and res.group:
            details = {"name": name, "group": res.group, "kind": res.plural}
    elif code == 404:
        reason, msg = "NotFound", '%s "%s" not found' % (gr, name)
        details = {"name": name, "kind": res.plural if res else gr}
    elif code == 403:
        reason = "Forbidden"
        what = req.get("resource") or ""
        if req.get("subresource"):
            what += "/" + req["subresource"]
        msg = ('%s "%s" is forbidden: User "%s" cannot %s resource "%s" in API group "%s"'
               % (gr, name, req.get("user") or "", req.get("verb") or "", what,
                  res.group if res is not None else ""))
        if req.get("namespace"):
            msg += ' in the namespace "%s"' % req["namespace"]
        details = {"name": name, "kind": res.plural if res else gr}
    elif code == 401:
        reason, msg = "Unauthorized", "Unauthorized"
    elif code == 410:
        reason, msg = "Expired", "too old resource version"
    elif code == 400:
        reason, msg = "BadRequest", "injected bad request"
    else:
        reason, msg = "", "injected fault"
    if retry is not None:
        headers["Retry-After"] = str(int(retry))
    reason = spec.get("reason", reason)
    msg = spec.get("message", msg) if code != 500 else msg
    return StatusError(code, reason, msg, details, headers)

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""hpaemu: an emulation of the Kubernetes HorizontalPodAutoscaler controller (autoscaling/v2) for
External metrics, so gpuscaler's HPA mode can be tested end to end without a
kube-controller-manager.

It follows pkg/controller/podautoscaler of kubernetes/kubernetes:

- horizontal.go reconcileAutoscaler: read the HPA and the target's /scale; a target at 0
  replicas with minReplicas > 0 is not scaled ("ScalingDisabled"); a current count above max or
  below min goes straight to max/min; otherwise computeReplicasForMetrics (the max over the
  metrics; when every metric fails, or one fails and the others would scale down, there is no
  scaling at all), then normalizeDesiredReplicas (no behavior: downscale stabilization and
  convertDesiredReplicasWithRules' scale-up limit max(2 x current, 4)) or
  normalizeDesiredReplicasWithBehaviors (stabilizeRecommendationWithBehaviors, then
  convertDesiredReplicasWithBehaviorRate with calculateScaleUpLimitWithScalingRules /
  calculateScaleDownLimitWithBehaviors over the remembered scale events), then PUT /scale,
  storeScaleEvent, and the status written only when it changed (updateStatusIfNeeded).
- replica_calculator.go GetExternalPerPodMetricReplicas (target AverageValue):
  ratio = sum / (target x status.replicas); outside the tolerance desired = ceil(sum / target).
  GetExternalMetricReplicas + getUsageRatioReplicaCount (target Value): ratio = sum / target;
  outside the tolerance desired = ceil(ratio x ready pods) (ceil(ratio) from 0 replicas).
  Tolerances.isWithin: (1 - scaleDown) <= ratio <= (1 + scaleUp), 0.1 by default, per direction
  from behavior.scaleUp/scaleDown.tolerance (KEP-4951).
- metrics/rest_metrics_client.go GetExternalMetric: GET
  /apis/external.metrics.k8s.io/v1beta1/namespaces/<ns>/<metric lower-cased by client-go>
  ?labelSelector=<metav1.LabelSelectorAsSelector(selector).String()>, values are
  Quantity.MilliValue() (rounded away from zero), an empty list is the error
  "no metrics returned from external metrics API".
- apis/autoscaling/v2 defaults (GenerateHPAScaleUpRules / GenerateHPAScaleDownRules): scale-up
  window 0 s, policies Pods 4 and Percent 100 per 15 s, selectPolicy Max; scale-down policy
  Percent 100 per 15 s, selectPolicy Max, window nil = the controller's
  --horizontal-pod-autoscaler-downscale-stabilization (300 s).

The pure functions (quantities, selectors, tolerance, replica counts, stabilization, rate
limits) take the time as an argument; the tests at the bottom drive them with literal times
(run: /usr/bin/python3 e2e/hpaemu.py).  HPAController does the I/O: it talks to the API server
only through a kubeclient.Client built from the HPA's own kubeconfig/token, reconciles every
sync period (15 s by default, the controller's --horizontal-pod-autoscaler-sync-period) on a
thread, and records what it did in .history.
"""

import datetime
import json
import math
import sys
import threading
import time
import unittest
from fractions import Fraction

MAX_INT32 = 2 ** 31 - 1
MAX_INT64 = 2 ** 63 - 1
DEFAULT_TOLERANCE = 0.1
DEFAULT_SYNC_PERIOD = 15.0
DEFAULT_DOWNSCALE_STABILIZATION = 300.0
EXTERNAL_METRICS = "/apis/external.metrics.k8s.io/v1beta1"
# kube-controller-manager's default --kube-api-content-type: client-go asks for protobuf first
HPA_ACCEPT = "application/vnd.kubernetes.protobuf, */*"

# ---------------------------------------------------------------- quantities

_DECIMAL = {"n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000),
            "": Fraction(1), "k": Fraction(10 ** 3), "M": Fraction(10 ** 6),
            "G": Fraction(10 ** 9), "T": Fraction(10 ** 12), "P": Fraction(10 ** 15),
            "E": Fraction(10 ** 18)}
_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
           "Ei": 2 ** 60}


def parse_quantity(s):
    """A resource.Quantity string ("1", "10500m", "1.5Gi", "2e3") as an exact Fraction."""
    s = str(s).strip()
    i = 0
    if i < len(s) and s[i] in "+-":
        i += 1
    while i < len(s) and (s[i].isdigit() or s[i] == "."):
        i += 1
    num, suffix = s[:i], s[i:]
    if num in ("", "+", "-", ".") or num.count(".") > 1:
        raise ValueError("quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': %r" % s)
    value = Fraction(num)
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    if suffix in _DECIMAL:
        return value * _DECIMAL[suffix]
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        try:
            return value * Fraction(10) ** int(suffix[1:])
        except ValueError:
            pass
    raise ValueError("unable to parse quantity's suffix: %r" % s)


def milli_value(s):
    """Quantity.MilliValue(): the value in milli-units; a finer value is rounded away from
    zero (ScaledValue rounds up, see negativeScaleInt64 / inf.RoundUp)."""
    q = parse_quantity(s) * 1000
    if q.denominator == 1:
        return int(q)
    return math.ceil(q) if q > 0 else math.floor(q)


def format_milli(v):
    """resource.NewMilliQuantity(v, DecimalSI).String() for the status: canonical form."""
    if v == 0:
        return "0"
    suffixes = ["m", "", "k", "M", "G", "T", "P", "E"]
    i = 0
    while v % 1000 == 0 and i < len(suffixes) - 1:
        v //= 1000
        i += 1
    return "%d%s" % (v, suffixes[i])


# ---------------------------------------------------------------- label selectors

def label_selector_string(sel):
    """metav1.LabelSelectorAsSelector(sel).String(): requirements sorted by key, matchLabels as
    key=value, In/NotIn with sorted values, Exists as key, DoesNotExist as !key.  A nil or empty
    selector is "" (the client then sends no labelSelector)."""
    if not sel:
        return ""
    reqs = []
    for k, v in (sel.get("matchLabels") or {}).items():
        reqs.append((k, "%s=%s" % (k, v)))
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], sorted(e.get("values") or [])
        if op == "In":
            reqs.append((k, "%s in (%s)" % (k, ",".join(vals))))
        elif op == "NotIn":
            reqs.append((k, "%s notin (%s)" % (k, ",".join(vals))))
        elif op == "Exists":
            reqs.append((k, k))
        elif op == "DoesNotExist":
            reqs.append((k, "!" + k))
        else:
            raise ValueError("%r is not a valid label selector operator" % op)
    reqs.sort(key=lambda r: r[0])
    return ",".join(r for _, r in reqs)


# ---------------------------------------------------------------- replica_calculator.go

class Tolerances:
    """replica_calculator.go Tolerances: the ratio band with no scaling."""

    def __init__(self, scale_down=DEFAULT_TOLERANCE, scale_up=DEFAULT_TOLERANCE):
        self.scale_down = scale_down
        self.scale_up = scale_up

    def within(self, ratio):
        """isWithin: (1.0 - scaleDown) <= ratio <= (1.0 + scaleUp) (False for NaN)."""
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)

    def __repr__(self):
        return "[down:%.1f%%, up:%.1f%%]" % (self.scale_down * 100.0, self.scale_up * 100.0)


def tolerances_for(behavior, default=DEFAULT_TOLERANCE):
    """horizontal.go tolerancesForHpa: the controller's --horizontal-pod-autoscaler-tolerance,
    overridden per direction by behavior.scaleUp/scaleDown.tolerance (KEP-4951)."""
    t = Tolerances(default, default)
    if behavior:
        down = (behavior.get("scaleDown") or {}).get("tolerance")
        up = (behavior.get("scaleUp") or {}).get("tolerance")
        if down is not None:
            t.scale_down = float(parse_quantity(down))
        if up is not None:
            t.scale_up = float(parse_quantity(up))
    return t


def _fdiv(a, b):
    """Go float64 division: x/0 is +-Inf, 0/0 is NaN."""
    a, b = float(a), float(b)
    if b == 0.0:
        if a == 0.0:
            return math.nan
        return math.copysign(math.inf, a)
    return a / b


def _sum_usage(values_milli):
    usage = 0
    for v in values_milli:
        usage += v
        if usage > MAX_INT64:   # the only way: an int64 overflow, capped upstream
            return MAX_INT64
    return usage


def external_per_pod_replicas(status_replicas, target_milli, values_milli, tol):
    """GetExternalPerPodMetricReplicas (target type AverageValue): returns
    (replicaCount, usage per replica in milli-units)."""
    usage = _sum_usage(values_milli)
    replicas = status_replicas
    ratio = _fdiv(usage, float(target_milli) * float(status_replicas))
    if not tol.within(ratio):
        r = math.ceil(usage / target_milli)
        replicas = MAX_INT32 if r > MAX_INT32 else int(r)
    if usage >= MAX_INT64:
        avg = MAX_INT64
    else:
        q = _fdiv(usage, status_replicas)
        avg = int(math.ceil(q)) if math.isfinite(q) else MAX_INT64
    return replicas, avg


def external_value_replicas(current_replicas, target_milli, values_milli, tol, ready_pods):
    """GetExternalMetricReplicas + getUsageRatioReplicaCount (target type Value): returns
    (replicaCount, usage).  ready_pods() counts Running and Ready pods of the target (it is
    only asked when the ratio is outside the tolerance, and raises when there are no pods)."""
    usage = _sum_usage(values_milli)
    ratio = _fdiv(usage, target_milli)
    if current_replicas != 0:
        if tol.within(ratio):
            return current_replicas, usage
        f = ratio * float(ready_pods())
        return (MAX_INT32 if f > MAX_INT32 else int(math.ceil(f))), usage
    return int(math.ceil(ratio)), usage


# ---------------------------------------------------------------- horizontal.go normalization

def default_behavior(behavior):
    """autoscaling/v2 SetDefaults_HorizontalPodAutoscalerBehavior for a non-nil behavior:
    GenerateHPAScaleUpRules / GenerateHPAScaleDownRules fill what is missing (the scale-down
    window stays None: the controller's downscale stabilization applies)."""
    if behavior is None:
        return None
    up = dict(behavior.get("scaleUp") or {})
    down = dict(behavior.get("scaleDown") or {})
    up.setdefault("stabilizationWindowSeconds", 0)
    up.setdefault("selectPolicy", "Max")
    if not up.get("policies"):
        up["policies"] = [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}]
    down.setdefault("stabilizationWindowSeconds", None)
    down.setdefault("selectPolicy", "Max")
    if not down.get("policies"):
        down["policies"] = [{"type": "Percent", "value": 100, "periodSeconds": 15}]
    for r in (up, down):
        if r.get("selectPolicy") is None:
            r["selectPolicy"] = "Max"
    return {"scaleUp": up, "scaleDown": down}


class ScalerState:
    """What horizontal.go keeps per HPA key in memory: recommendations (value, time) and the
    scale-up / scale-down events (change, time, outdated)."""

    def __init__(self):
        self.recommendations = []
        self.up_events = []
        self.down_events = []


def record_initial_recommendation(st, current, now):
    """recordInitialRecommendation."""
    if not st.recommendations:
        st.recommendations = [[current, now]]


def stabilize_recommendation(st, desired, now, window):
    """stabilizeRecommendation (no behavior): the max over the downscale window; an old sample
    is replaced by the new one, else it is appended."""
    best = desired
    old = None
    cutoff = now - window
    for i, (rec, ts) in enumerate(st.recommendations):
        if ts < cutoff:
            old = i
        elif rec > best:
            best = rec
    if old is not None:
        st.recommendations[old] = [desired, now]
    else:
        st.recommendations.append([desired, now])
    return best


def calculate_scale_up_limit(current):
    """calculateScaleUpLimit: max(2 x current, 4)."""
    return int(max(2.0 * current, 4.0))


def convert_desired_replicas_with_rules(current, desired, min_replicas, max_replicas):
    """convertDesiredReplicasWithRules: returns (replicas, condition reason, message)."""
    up_limit = calculate_scale_up_limit(current)
    if max_replicas > up_limit:
        maximum, reason, msg = up_limit, "ScaleUpLimit", \
            "the desired replica count is increasing faster than the maximum scale rate"
    else:
        maximum, reason, msg = max_replicas, "TooManyReplicas", \
            "the desired replica count is more than the maximum replica count"
    if desired < min_replicas:
        return min_replicas, "TooFewReplicas", \
            "the desired replica count is less than the minimum replica count"
    if desired > maximum:
        return maximum, reason, msg
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def get_replicas_change_per_period(period_seconds, events, now):
    """getReplicasChangePerPeriod: the sum of the changes after now - period."""
    cutoff = now - period_seconds
    return sum(e[0] for e in events if e[1] > cutoff)


def calculate_scale_up_limit_with_rules(current, up_events, down_events, rules, now):
    """calculateScaleUpLimitWithScalingRules."""
    sp = rules.get("selectPolicy") or "Max"
    if sp == "Disabled":
        return current
    if sp == "Min":
        result, pick = MAX_INT32, min
    else:
        result, pick = -MAX_INT32 - 1, max
    for p in rules.get("policies") or []:
        added = get_replicas_change_per_period(p["periodSeconds"], up_events, now)
        deleted = get_replicas_change_per_period(p["periodSeconds"], down_events, now)
        start = current - added + deleted
        if p["type"] == "Pods":
            proposed = start + p["value"]
        else:  # Percent: rounded up so that a small percentage still adds a pod
            proposed = int(math.ceil(start * (1 + p["value"] / 100.0)))
        result = pick(result, proposed)
    return result


def calculate_scale_down_limit_with_rules(current, up_events, down_events, rules, now):
    """calculateScaleDownLimitWithBehaviors."""
    sp = rules.get("selectPolicy") or "Max"
    if sp == "Disabled":
        return current
    if sp == "Min":
        result, pick = -MAX_INT32 - 1, max
    else:
        result, pick = MAX_INT32, min
    for p in rules.get("policies") or []:
        added = get_replicas_change_per_period(p["periodSeconds"], up_events, now)
        deleted = get_replicas_change_per_period(p["periodSeconds"], down_events, now)
        start = current - added + deleted
        if p["type"] == "Pods":
            proposed = start - p["value"]
        else:  # Percent: int32() truncates
            proposed = int(start * (1 - p["value"] / 100.0))
        result = pick(result, proposed)
    return result


def stabilize_recommendation_with_behaviors(st, current, desired, up_window, down_window, now):
    """stabilizeRecommendationWithBehaviors: the lowest recommendation of the scale-up window
    bounds from below, the highest of the scale-down window from above; the unstabilized
    recommendation is recorded (replacing one older than both windows)."""
    up_rec = desired
    down_rec = desired
    up_cut = now - up_window
    down_cut = now - down_window
    old = None
    for i, (rec, ts) in enumerate(st.recommendations):
        if ts > up_cut:
            up_rec = min(rec, up_rec)
        if ts > down_cut:
            down_rec = max(rec, down_rec)
        if ts < up_cut and ts < down_cut:
            old = i
    recommendation = current
    if recommendation < up_rec:
        recommendation = up_rec
    if recommendation > down_rec:
        recommendation = down_rec
    if old is not None:
        st.recommendations[old] = [desired, now]
    else:
        st.recommendations.append([desired, now])
    if desired >= current:
        return recommendation, "ScaleUpStabilized", ("recent recommendations were lower than "
                                                     "current one, applying the lowest recent "
                                                     "recommendation")
    return recommendation, "ScaleDownStabilized", ("recent recommendations were higher than "
                                                   "current one, applying the highest recent "
                                                   "recommendation")


def convert_desired_replicas_with_behavior_rate(st, current, desired, min_replicas,
                                                max_replicas, up_rules, down_rules, now):
    """convertDesiredReplicasWithBehaviorRate: returns (replicas, reason, message)."""
    if desired > current:
        limit = calculate_scale_up_limit_with_rules(current, st.up_events, st.down_events,
                                                    up_rules, now)
        if limit < current:
            limit = current
        maximum = max_replicas
        if maximum > limit:
            maximum, reason, msg = limit, "ScaleUpLimit", \
                "the desired replica count is increasing faster than the maximum scale rate"
        else:
            reason, msg = "TooManyReplicas", \
                "the desired replica count is more than the maximum replica count"
        if desired > maximum:
            return maximum, reason, msg
    elif desired < current:
        limit = calculate_scale_down_limit_with_rules(current, st.up_events, st.down_events,
                                                      down_rules, now)
        if limit > current:
            limit = current
        minimum = min_replicas
        if minimum < limit:
            minimum, reason, msg = limit, "ScaleDownLimit", \
                "the desired replica count is decreasing faster than the maximum scale rate"
        else:
            reason, msg = "TooFewReplicas", \
                "the desired replica count is less than the minimum replica count"
        if desired < minimum:
            return minimum, reason, msg
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def _longest_period(rules):
    return max([p["periodSeconds"] for p in rules.get("policies") or []] or [0])


def store_scale_event(st, behavior, prev, new, now):
    """storeScaleEvent: remember a rescale (only with a behavior), reusing an event older than
    the longest policy period of its direction (markScaleEventsOutdated)."""
    if behavior is None:
        return
    if new > prev:
        events, rules, change = st.up_events, behavior["scaleUp"], new - prev
    else:
        events, rules, change = st.down_events, behavior["scaleDown"], prev - new
    cutoff = now - _longest_period(rules)
    old = None
    for i, e in enumerate(events):
        if e[1] < cutoff:
            e[2] = True
        if e[2]:
            old = i
    if old is not None:
        events[old] = [change, now, False]
    else:
        events.append([change, now, False])


def normalize(st, behavior, current, desired, min_replicas, max_replicas, now,
              downscale_stabilization=DEFAULT_DOWNSCALE_STABILIZATION):
    """normalizeDesiredReplicas / normalizeDesiredReplicasWithBehaviors: returns (replicas,
    AbleToScale reason, message, ScalingLimited status, reason, message)."""
    if behavior is None:
        stab = stabilize_recommendation(st, desired, now, downscale_stabilization)
        if stab != desired:
            able = ("ScaleDownStabilized", "recent recommendations were higher than current "
                    "one, applying the highest recent recommendation")
        else:
            able = ("ReadyForNewScale", "recommended size matches current size")
        out, reason, msg = convert_desired_replicas_with_rules(current, stab, min_replicas,
                                                               max_replicas)
    else:
        down_window = behavior["scaleDown"].get("stabilizationWindowSeconds")
        if down_window is None:  # maybeInitScaleDownStabilizationWindow
            down_window = downscale_stabilization
        up_window = behavior["scaleUp"].get("stabilizationWindowSeconds") or 0
        stab, r, m = stabilize_recommendation_with_behaviors(st, current, desired, up_window,
                                                             down_window, now)
        able = (r, m) if stab != desired else ("ReadyForNewScale",
                                               "recommended size matches current size")
        out, reason, msg = convert_desired_replicas_with_behavior_rate(
            st, current, stab, min_replicas, max_replicas, behavior["scaleUp"],
            behavior["scaleDown"], now)
    return out, able[0], able[1], ("False" if out == stab else "True"), reason, msg


# ---------------------------------------------------------------- the controller (I/O)

class MetricError(Exception):
    pass


def _rfc3339(t=None):
    return datetime.datetime.fromtimestamp(time.time() if t is None else t,
                                           datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conds, ctype, status, reason, message, now_str):
    """setConditionInList: lastTransitionTime moves only when the status changes."""
    for c in conds:
        if c["type"] == ctype:
            if c["status"] != status:
                c["lastTransitionTime"] = now_str
            c.update(status=status, reason=reason, message=message)
            return conds
    conds.append({"type": ctype, "status": status, "lastTransitionTime": now_str,
                  "reason": reason, "message": message})
    return conds


_SCALE_RESOURCES = {"Deployment": "deployments", "ReplicaSet": "replicasets",
                    "StatefulSet": "statefulsets"}


class HPAController:
    """Reconciles one HorizontalPodAutoscaler object (autoscaling/v2) of the API server on a
    thread, every sync_period seconds, with the client's credentials (the HPA controller's
    own token).  .history holds one dict per reconcile: time, current, desired, usage, error,
    rescaled."""

    def __init__(self, client, namespace, name, sync_period=DEFAULT_SYNC_PERIOD,
                 tolerance=DEFAULT_TOLERANCE,
                 downscale_stabilization=DEFAULT_DOWNSCALE_STABILIZATION, verbose=False):
        self.c = client
        self.ns = namespace
        self.name = name
        self.sync_period = sync_period
        self.tolerance = tolerance
        self.downscale_stabilization = downscale_stabilization
        self.verbose = verbose
        self.state = ScalerState()
        self.history = []
        self.metric_requests = 0
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.thread = None
        self.last_event = {}

    # ---------------------------------------------------------- loop

    def start(self):
        self.thread = threading.Thread(target=self._run, name="hpaemu", daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.stop_ev.set()
        if self.thread is not None:
            self.thread.join(self.sync_period + 20)

    def _run(self):
        t = time.monotonic()
        while not self.stop_ev.is_set():
            try:
                self.reconcile()
            except Exception as e:  # noqa: BLE001 - the workqueue retries; so do we
                self._record({"time": time.time(), "error": "%s: %s" % (type(e).__name__, e)})
            t += self.sync_period
            self.stop_ev.wait(max(0.0, t - time.monotonic()))

    def _log(self, msg):
        if self.verbose:
            print("hpaemu %s/%s: %s" % (self.ns, self.name, msg), flush=True)

    def _record(self, rec):
        with self.lock:
            self.history.append(rec)
        self._log(json.dumps(rec, sort_keys=True))

    def records(self):
        with self.lock:
            return list(self.history)

    # ---------------------------------------------------------- API helpers

    def _event(self, hpa, etype, reason, message):
        """The event recorder, without aggregation (a repeat of the last identical event is
        not sent again)."""
        if self.last_event.get(reason) == message:
            return
        self.last_event[reason] = message
        now = _rfc3339()
        meta = hpa["metadata"]
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "%s.%x" % (self.name, time.time_ns())},
              "involvedObject": {"kind": "HorizontalPodAutoscaler", "namespace": self.ns,
                                 "name": self.name, "uid": meta.get("uid", ""),
                                 "apiVersion": "autoscaling/v2",
                                 "resourceVersion": meta.get("resourceVersion", "")},
              "reason": reason, "message": message, "type": etype,
              "source": {"component": "horizontal-pod-autoscaler"},
              "firstTimestamp": now, "lastTimestamp": now, "count": 1,
              "reportingComponent": "horizontal-pod-autoscaler", "reportingInstance": ""}
        try:
            self.c.create("events", ev, self.ns)
        except Exception as e:  # noqa: BLE001 - events are best effort, as upstream
            self._log("event %s not recorded: %s" % (reason, e))

    def get_external_metric(self, metric_name, selector):
        """rest_metrics_client.go GetExternalMetric: (milli-values, timestamp of item 0)."""
        params = {}
        sel = label_selector_string(selector)
        if sel:
            params["labelSelector"] = sel
        path = "%s/namespaces/%s/%s" % (EXTERNAL_METRICS, self.ns, metric_name.lower())
        self.metric_requests += 1
        code, headers, body = self.c.raw("GET", path, params=params or None,
                                         headers={"Accept": HPA_ACCEPT})
        if code != 200:
            msg = body.decode(errors="replace").strip()
            try:
                msg = json.loads(body).get("message", msg)
            except ValueError:
                pass
            raise MetricError("unable to get external metric %s/%s/%s: %s (%d)"
                              % (self.ns, metric_name, json.dumps(selector), msg, code))
        lst = json.loads(body)
        items = lst.get("items") or []
        if not items:
            raise MetricError("unable to get external metric %s/%s/%s: no metrics returned "
                              "from external metrics API"
                              % (self.ns, metric_name, json.dumps(selector)))
        return [milli_value(it["value"]) for it in items], items[0].get("timestamp")

    def _ready_pods(self, selector):
        pods = self.c.list("pods", self.ns, label_selector=selector)["items"]
        if not pods:
            raise MetricError("unable to calculate ready pods: no pods returned by selector "
                              "while calculating replica count")
        n = 0
        for p in pods:
            st = p.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in st.get("conditions") or [])
            if st.get("phase") == "Running" and ready:
                n += 1
        return n

    # ---------------------------------------------------------- reconcile

    def _metric_replicas(self, hpa, spec, spec_replicas, status_replicas, selector, tol):
        if spec.get("type") != "External":
            raise MetricError("unknown metric source type %r (hpaemu serves External only)"
                              % spec.get("type"))
        ext = spec["external"]
        metric = ext["metric"]
        target = ext.get("target") or {}
        values, ts = self.get_external_metric(metric["name"], metric.get("selector"))
        if target.get("type") == "AverageValue" and target.get("averageValue") is not None:
            replicas, avg = external_per_pod_replicas(
                status_replicas, milli_value(target["averageValue"]), values, tol)
            current = {"averageValue": format_milli(avg)}
        elif target.get("type") == "Value" and target.get("value") is not None:
            replicas, usage = external_value_replicas(
                spec_replicas, milli_value(target["value"]), values, tol,
                lambda: self._ready_pods(selector))
            current = {"value": format_milli(usage)}
        else:
            raise MetricError("invalid external metric source: neither a value target nor an "
                              "average value target was set")
        status = {"type": "External", "external": {"metric": metric, "current": current}}
        return replicas, status, sum(values), ts

    def reconcile(self):
        """One reconcileAutoscaler; returns the history record."""
        now = time.time()
        now_str = _rfc3339(now)
        try:
            hpa = self.c.get("horizontalpodautoscalers", self.name, self.ns)
        except Exception as e:  # noqa: BLE001
            if getattr(e, "code", None) == 404:
                self.state = ScalerState()   # reconcileKey: forget a deleted HPA
            raise
        spec = hpa["spec"]
        old_status = json.loads(json.dumps(hpa.get("status") or {}))
        status = json.loads(json.dumps(old_status))
        conds = status.setdefault("conditions", [])
        behavior = default_behavior(spec.get("behavior"))
        ref = spec["scaleTargetRef"]
        # the controller maps the group and kind (any version) to a resource: these kinds are
        # the apps group's only
        group = ref.get("apiVersion", "").rpartition("/")[0] if "/" in ref.get("apiVersion", "") \
            else ""
        resource = _SCALE_RESOURCES.get(ref.get("kind")) if group == "apps" else None
        rec = {"time": now}
        try:
            if resource is None:
                raise MetricError("no matches for kind %r in group %r" % (ref.get("kind"), group))
            scale = self.c.get(resource, ref["name"], self.ns, subresource="scale")
        except Exception as e:  # noqa: BLE001
            self._event(hpa, "Warning", "FailedGetScale", str(e))
            set_condition(conds, "AbleToScale", "False", "FailedGetScale",
                          "the HPA controller was unable to get the target's current scale: %s"
                          % e, now_str)
            self._update_status(hpa, old_status, status)
            rec["error"] = "FailedGetScale: %s" % e
            self._record(rec)
            return rec
        set_condition(conds, "AbleToScale", "True", "SucceededGetScale",
                      "the HPA controller was able to get the target's current scale", now_str)
        current = scale["spec"].get("replicas", 0)
        record_initial_recommendation(self.state, current, now)
        min_replicas = spec.get("minReplicas", 1)
        max_replicas = spec["maxReplicas"]
        rec["current"] = current
        rescale, desired, reason = True, 0, ""
        metric_statuses = status.get("currentMetrics")
        if current == 0 and min_replicas != 0:
            rescale = False
            set_condition(conds, "ScalingActive", "False", "ScalingDisabled",
                          "scaling is disabled since the replica count of the target is zero",
                          now_str)
        elif current > max_replicas:
            reason, desired = "Current number of replicas above Spec.MaxReplicas", max_replicas
        elif current < min_replicas:
            reason, desired = "Current number of replicas below Spec.MinReplicas", min_replicas
        else:
            try:
                proposal, metric_name, metric_statuses, usage = self._compute_replicas(
                    hpa, scale, behavior, conds, now_str)
            except MetricError as e:
                status["currentReplicas"] = current
                self._event(hpa, "Warning", "FailedComputeMetricsReplicas", str(e))
                self._update_status(hpa, old_status, status)
                rec["error"] = str(e)
                self._record(rec)
                return rec
            rec["usage_milli"] = usage
            rec["proposal"] = proposal
            if proposal > desired:
                desired = proposal
            if desired > current:
                reason = "%s above target" % metric_name
            if desired < current:
                reason = "All metrics below target"
            desired, able_r, able_m, lim_s, lim_r, lim_m = normalize(
                self.state, behavior, current, desired, min_replicas, max_replicas, now,
                self.downscale_stabilization)
            set_condition(conds, "AbleToScale", "True", able_r, able_m, now_str)
            set_condition(conds, "ScalingLimited", lim_s, lim_r, lim_m, now_str)
            rescale = desired != current
        rec["desired"] = desired if rescale else current
        if rescale:
            scale["spec"]["replicas"] = desired
            try:
                self.c.update(resource, scale, self.ns, subresource="scale")
            except Exception as e:  # noqa: BLE001 - e.g. 409: retried next sync
                self._event(hpa, "Warning", "FailedRescale", "New size: %d; reason: %s; error: %s"
                            % (desired, reason, e))
                set_condition(conds, "AbleToScale", "False", "FailedUpdateScale",
                              "the HPA controller was unable to update the target scale: %s" % e,
                              now_str)
                status["currentReplicas"] = current
                self._update_status(hpa, old_status, status)
                rec["error"] = "FailedRescale: %s" % e
                self._record(rec)
                return rec
            set_condition(conds, "AbleToScale", "True", "SucceededRescale",
                          "the HPA controller was able to update the target scale to %d"
                          % desired, now_str)
            self._event(hpa, "Normal", "SuccessfulRescale", "New size: %d; reason: %s"
                        % (desired, reason))
            store_scale_event(self.state, behavior, current, desired, now)
            status["lastScaleTime"] = now_str
            rec["rescaled"] = True
        else:
            desired = current
        status["currentReplicas"] = current
        status["desiredReplicas"] = desired
        if metric_statuses is not None:
            status["currentMetrics"] = metric_statuses
        self._update_status(hpa, old_status, status)
        self._record(rec)
        return rec

    def _compute_replicas(self, hpa, scale, behavior, conds, now_str):
        """computeReplicasForMetrics."""
        sel = (scale.get("status") or {}).get("selector") or ""
        if not sel:
            self._event(hpa, "Warning", "SelectorRequired", "selector is required")
            set_condition(conds, "ScalingActive", "False", "InvalidSelector",
                          "the HPA target's scale is missing a selector", now_str)
            raise MetricError("selector is required")
        spec_replicas = scale["spec"].get("replicas", 0)
        status_replicas = (scale.get("status") or {}).get("replicas", 0)
        tol = tolerances_for(hpa["spec"].get("behavior"), self.tolerance)
        specs = hpa["spec"].get("metrics") or []
        replicas, name, statuses, usage = 0, "", [], 0
        invalid, first_err, first_cond = 0, None, None
        for m in specs:
            try:
                r, st, u, _ = self._metric_replicas(hpa, m, spec_replicas, status_replicas,
                                                    sel, tol)
            except MetricError as e:
                statuses.append({"type": ""})
                if first_err is None:
                    first_err = e
                    reason = "FailedGetExternalMetric" if m.get("type") == "External" \
                        else "InvalidMetricSourceType"
                    self._event(hpa, "Warning", reason, str(e))
                    first_cond = ("ScalingActive", "False", reason,
                                  "the HPA was unable to compute the replica count: %s" % e)
                invalid += 1
                continue
            statuses.append(st)
            if replicas == 0 or r > replicas:
                replicas, usage = r, u
                name = "external metric %s(%s)" % (m["external"]["metric"]["name"],
                                                   json.dumps(m["external"]["metric"]
                                                              .get("selector")))
        if invalid >= len(specs) or (invalid > 0 and replicas < spec_replicas):
            if first_cond:
                set_condition(conds, *first_cond, now_str)
            raise MetricError("invalid metrics (%d invalid out of %d), first error is: %s"
                              % (invalid, len(specs), first_err))
        set_condition(conds, "ScalingActive", "True", "ValidMetricFound",
                      "the HPA was able to successfully calculate a replica count from %s" % name,
                      now_str)
        return replicas, name, statuses, usage

    def _update_status(self, hpa, old_status, status):
        """updateStatusIfNeeded: PUT .../status only when it changed."""
        if status == old_status:
            return
        obj = dict(hpa)
        obj["status"] = status
        try:
            self.c.update("horizontalpodautoscalers", obj, self.ns, subresource="status")
        except Exception as e:  # noqa: BLE001
            self._event(hpa, "Warning", "FailedUpdateStatus", str(e))


# ---------------------------------------------------------------- tests of the arithmetic

class TestHPAArithmetic(unittest.TestCase):
    """The pure functions against values worked out from the upstream code."""

    def test_quantities(self):
        for s, milli in (("1", 1000), ("0", 0), ("10500m", 10500), ("1.5", 1500),
                         ("0.0001", 1), ("-0.0001", -1), ("1k", 1000000), ("1Ki", 1024000),
                         ("1e3", 1000000), ("2E-3", 2), ("1n", 1), ("100u", 1), ("3m", 3),
                         ("+7", 7000), ("1.0005", 1001)):
            self.assertEqual(milli_value(s), milli, s)
        for bad in ("", "abc", "1x", "1..2", "m"):
            with self.assertRaises(ValueError, msg=bad):
                milli_value(bad)
        for v, s in ((0, "0"), (1000, "1"), (3000000, "3k"), (12500, "12500m"), (1, "1m")):
            self.assertEqual(format_milli(v), s)

    def test_selector_string(self):
        self.assertEqual(label_selector_string(None), "")
        self.assertEqual(label_selector_string({}), "")
        self.assertEqual(label_selector_string({"matchLabels": {"deployment": "llama",
                                                                "app": "x"}}),
                         "app=x,deployment=llama")
        self.assertEqual(label_selector_string({"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "zz", "operator": "DoesNotExist"}, {"key": "gpu", "operator": "Exists"}]}),
            "env notin (prod),gpu,tier in (a,b),!zz")

    def test_tolerance(self):
        t = Tolerances()
        self.assertTrue(t.within(1.1) and t.within(0.9) and t.within(1.0))
        self.assertFalse(t.within(1.1000001) or t.within(0.8999) or t.within(math.nan))
        t = tolerances_for({"scaleUp": {"tolerance": "10m"}, "scaleDown": {"tolerance": "0.2"}})
        self.assertEqual((t.scale_up, t.scale_down), (0.01, 0.2))
        self.assertEqual(tolerances_for(None, 0.05).scale_up, 0.05)

    def test_average_value(self):
        tol = Tolerances()
        # AverageValue 1 on a desired-replicas metric: desired = ceil(sum / 1)
        self.assertEqual(external_per_pod_replicas(2, 1000, [5000], tol), (5, 2500))
        self.assertEqual(external_per_pod_replicas(5, 1000, [4000], tol), (4, 800))
        # 11 / (1 x 10) = 1.1: inside the tolerance, no change
        self.assertEqual(external_per_pod_replicas(10, 1000, [11000], tol)[0], 10)
        self.assertEqual(external_per_pod_replicas(10, 1000, [12000], tol)[0], 12)
        # the items are summed; fractions round up
        self.assertEqual(external_per_pod_replicas(1, 1000, [1500, 1200], tol)[0], 3)
        self.assertEqual(external_per_pod_replicas(3, 500, [2100], tol)[0], 5)
        # status.replicas 0: the ratio is +Inf, so desired = ceil(sum / target)
        self.assertEqual(external_per_pod_replicas(0, 1000, [3000], tol)[0], 3)
        self.assertEqual(external_per_pod_replicas(0, 1000, [0], tol)[0], 0)

    def test_value(self):
        tol = Tolerances()
        calls = []

        def ready():
            calls.append(1)
            return 2
        self.assertEqual(external_value_replicas(2, 1000, [5000], tol, ready), (10, 5000))
        self.assertEqual(external_value_replicas(4, 1000, [1050], tol, ready), (4, 1050))
        self.assertEqual(len(calls), 1)   # ready pods are only counted outside the tolerance
        self.assertEqual(external_value_replicas(0, 1000, [2500], tol, ready)[0], 3)

    def test_legacy_normalization(self):
        st = ScalerState()
        record_initial_recommendation(st, 3, 0.0)
        # scale-up limit max(2 x current, 4)
        self.assertEqual(convert_desired_replicas_with_rules(1, 10, 1, 20)[:2],
                         (4, "ScaleUpLimit"))
        self.assertEqual(convert_desired_replicas_with_rules(3, 10, 1, 20)[0], 6)
        self.assertEqual(convert_desired_replicas_with_rules(3, 10, 1, 5)[:2],
                         (5, "TooManyReplicas"))
        self.assertEqual(convert_desired_replicas_with_rules(3, 0, 1, 5)[:2],
                         (1, "TooFewReplicas"))
        # downscale stabilization: the max of the last 300 s
        self.assertEqual(normalize(st, None, 3, 1, 1, 10, 10.0)[0], 3)
        self.assertEqual(normalize(st, None, 3, 1, 1, 10, 301.0)[0], 1)

    def test_behavior_defaults_and_rate(self):
        b = default_behavior({})
        self.assertEqual(b["scaleUp"]["policies"],
                         [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}])
        self.assertIsNone(b["scaleDown"]["stabilizationWindowSeconds"])
        st = ScalerState()
        up, down = b["scaleUp"], b["scaleDown"]
        # max(+4 pods, +100 %)
        self.assertEqual(calculate_scale_up_limit_with_rules(2, [], [], up, 0.0), 6)
        self.assertEqual(calculate_scale_up_limit_with_rules(10, [], [], up, 0.0), 20)
        self.assertEqual(calculate_scale_up_limit_with_rules(
            10, [], [], dict(up, selectPolicy="Min"), 0.0), 14)
        self.assertEqual(calculate_scale_up_limit_with_rules(
            10, [], [], dict(up, selectPolicy="Disabled"), 0.0), 10)
        # a scale-up of 4 at t=100 counts against the next 15 s
        store_scale_event(st, b, 2, 6, 100.0)
        self.assertEqual(convert_desired_replicas_with_behavior_rate(
            st, 6, 20, 1, 50, up, down, 110.0)[:2], (6, "ScaleUpLimit"))
        self.assertEqual(convert_desired_replicas_with_behavior_rate(
            st, 6, 20, 1, 50, up, down, 115.5)[0], 12)
        # scale-down 100 % per 15 s: straight to min
        self.assertEqual(calculate_scale_down_limit_with_rules(8, [], [], down, 0.0), 0)
        self.assertEqual(convert_desired_replicas_with_behavior_rate(
            ScalerState(), 8, 0, 2, 10, up, down, 0.0)[:2], (2, "TooFewReplicas"))
        pods_down = {"selectPolicy": "Max",
                     "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}
        st2 = ScalerState()
        store_scale_event(st2, {"scaleUp": up, "scaleDown": pods_down}, 8, 7, 0.0)
        self.assertEqual(calculate_scale_down_limit_with_rules(7, [], st2.down_events,
                                                               pods_down, 30.0), 7)
        self.assertEqual(calculate_scale_down_limit_with_rules(7, [], st2.down_events,
                                                               pods_down, 61.0), 6)
        # an outdated event slot is reused
        store_scale_event(st2, {"scaleUp": up, "scaleDown": pods_down}, 7, 6, 70.0)
        self.assertEqual(len(st2.down_events), 1)

    def test_stabilization_with_behaviors(self):
        st = ScalerState()
        record_initial_recommendation(st, 5, 0.0)
        # scale-down window 300 s: a drop to 2 is held at 5
        self.assertEqual(stabilize_recommendation_with_behaviors(st, 5, 2, 0, 300, 10.0)[:2],
                         (5, "ScaleDownStabilized"))
        self.assertEqual(stabilize_recommendation_with_behaviors(st, 5, 2, 0, 300, 311.0)[0],
                         2)
        # scale-up window 60 s: the lowest recent recommendation bounds the increase
        st = ScalerState()
        record_initial_recommendation(st, 2, 0.0)
        self.assertEqual(stabilize_recommendation_with_behaviors(st, 2, 8, 60, 0, 10.0)[:2],
                         (2, "ScaleUpStabilized"))
        self.assertEqual(stabilize_recommendation_with_behaviors(st, 2, 8, 60, 0, 75.0)[0], 8)
        # windows of 0: the recommendation goes through
        st = ScalerState()
        record_initial_recommendation(st, 4, 0.0)
        self.assertEqual(normalize(st, default_behavior({"scaleDown": {
            "stabilizationWindowSeconds": 0}}), 4, 1, 1, 10, 1.0)[0], 1)
        # the controller default (300 s) applies when the behavior leaves it unset
        st = ScalerState()
        record_initial_recommendation(st, 4, 0.0)
        self.assertEqual(normalize(st, default_behavior({}), 4, 1, 1, 10, 1.0)[:2],
                         (4, "ScaleDownStabilized"))


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)

# SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the packaging checks (test_helm.py, test_deploy.py): finding and
running helmrender, reading multi-document YAML, the label and config-key rules every
manifest must follow, and applying objects to the fake API server.

helmrender is /work/shared/tools/helmrender's `helm template` stand-in. It is found
through env HELMRENDER (a binary, or a source folder with build.sh), else
../shared/tools/helmrender beside the repository; a source folder is built once into
a cache folder. Nothing here needs /work/shared at a fixed path.
"""

import os
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:  # pragma: no cover - the tests skip with a message
    yaml = None

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.environ.get("GPUSCALER_SRC") or os.path.dirname(os.path.dirname(HERE))
E2E = os.path.join(REPO, "e2e")
CHART = os.path.join(REPO, "helm", "gpuscaler")
DEPLOY = os.path.join(REPO, "deploy")
VALUES_DIR = os.path.join(HERE, "values")
BAD_VALUES_DIR = os.path.join(HERE, "bad-values")

BUILD_TIMEOUT = 200   # seconds to build helmrender (may apt-get its Go packages first)
RENDER_TIMEOUT = 60   # seconds for one helmrender run

# The keys of gpuscaler's config file (`gpuscaler run --config`), as the daemon
# defines them; None marks a leaf, "defaults" takes any annotation key.
CONFIG_KEYS = {
    "decision-interval": None,
    "namespaces": None,
    "log": {"format": None, "level": None},
    "leader-election": {"enabled": None, "namespace": None, "lease-name": None,
                        "lease-duration": None, "renew-deadline": None, "retry-period": None},
    "sharding": {"enabled": None, "shards": None, "lease-prefix": None},
    "listen": {"metrics": None, "health": None, "external-metrics": None},
    "external-metrics": {"enabled": None, "tls-cert-file": None, "tls-key-file": None,
                         "upstream": {"url": None, "ca-file": None, "cert-file": None,
                                      "key-file": None, "token-file": None}},
    "prometheus": {"url": None, "ca-file": None, "cert-file": None, "key-file": None,
                   "token-file": None, "username": None, "password-file": None,
                   "headers": "headers"},
    "scrape": {"interval": None, "timeout": None, "missing-fraction": None, "rate-window": None},
    "status": {"refresh-interval": None, "writes-per-second": None},
    "checkpoint": {"configmap": None, "configmaps": None},
    "defaults": "annotations",
}

# Annotation keys a Deployment may carry (prefix gpuscaler.io/); gpuscaler writes "status".
ANNOTATION_KEYS = [
    "enabled", "capacity-per-gpu", "target-utilization", "scale-in-utilization",
    "scale-out-after", "scale-in-after", "min-replicas", "max-replicas", "max-scale-up-step",
    "max-scale-down-step", "cold-start", "predictive", "seasonality", "forecast-quantile",
    "p99-latency-target", "metrics-stale-after", "gpus-per-replica", "mode", "metrics-source",
    "metrics-profile", "metrics-port", "metrics-path", "metrics-scheme", "request-metric",
    "inflight-metric", "queue-metric", "latency-metric", "missing-fraction", "promql-rate",
    "promql-p99", "capacity-start", "demand-unit", "prompt-token-weight", "prompt-token-metric",
    "generation-token-metric", "busy-time-metric", "scale-in-stabilization", "service-time",
    "slots-per-gpu", "promql-busy", "paused", "rejected-metric",
]

# gpuscaler's own metrics that the Grafana dashboard is built on.
DASHBOARD_METRICS = [
    "gpuscaler_decisions_total", "gpuscaler_desired_replicas", "gpuscaler_want_replicas",
    "gpuscaler_unschedulable_replicas", "gpuscaler_stalled_replicas", "gpuscaler_requests_per_gpu",
    "gpuscaler_forecast_requests_per_gpu", "gpuscaler_utilization",
    "gpuscaler_watch_restarts_total", "gpuscaler_api_request_duration_seconds",
    "gpuscaler_api_errors_total", "gpuscaler_api_retries_total", "gpuscaler_api_warnings_total",
    "gpuscaler_scrape_failures_total", "gpuscaler_leader",
]

# Kinds the fake API server does not serve (CRDs of other projects): skipped
# explicitly when applying, everything else must be accepted.
NOT_SERVED_KINDS = {
    ("cert-manager.io/v1", "Certificate"),
    ("cert-manager.io/v1", "Issuer"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}


def load_docs(text):
    """Every non-empty document of a YAML stream, in order."""
    return [d for d in yaml.safe_load_all(text) if d is not None]


def load_file_docs(path):
    with open(path, encoding="utf-8") as f:
        return load_docs(f.read())


def config_key_problems(cfg, spec=CONFIG_KEYS, where=""):
    """Keys of a parsed config file that gpuscaler does not define (it rejects them)."""
    probs = []
    if not isinstance(cfg, dict):
        return ["%s: want a mapping, got %s" % (where or "config", type(cfg).__name__)]
    for k, v in cfg.items():
        path = "%s.%s" % (where, k) if where else k
        if k not in spec:
            probs.append("%s: unknown config key" % path)
        elif spec[k] == "annotations":
            if not isinstance(v, dict):
                probs.append("%s: want a mapping" % path)
                continue
            for ak, av in v.items():
                if ak not in ANNOTATION_KEYS:
                    probs.append("%s.%s: not an annotation key" % (path, ak))
                if not isinstance(av, str):
                    probs.append("%s.%s: value %r is not a string" % (path, ak, av))
        elif spec[k] == "headers":
            if not isinstance(v, dict):
                probs.append("%s: want a mapping" % path)
                continue
            for hk, hv in v.items():
                if not isinstance(hv, str):
                    probs.append("%s.%s: value %r is not a string" % (path, hk, hv))
        elif isinstance(spec[k], dict):
            probs += config_key_problems(v, spec[k], path)
        elif isinstance(v, dict):
            probs.append("%s: want a scalar or list, got a mapping" % path)
    return probs


def config_missing_keys(cfg, spec=CONFIG_KEYS, where=""):
    """Keys of spec absent from cfg (for the fully commented example config)."""
    miss = []
    for k, sub in spec.items():
        path = "%s.%s" % (where, k) if where else k
        if not isinstance(cfg, dict) or k not in cfg:
            miss.append(path)
        elif isinstance(sub, dict):
            miss += config_missing_keys(cfg[k], sub, path)
    return miss


# ---------------------------------------------------------------- helmrender

def _cache_dir():
    build = os.environ.get("GPUSCALER_BUILD")
    if build and os.path.isdir(build):
        return os.path.join(build, "helmrender")
    return os.path.join(tempfile.gettempdir(), "gpuscaler-helmrender-%d" % os.getuid())


def _build(src):
    """Build helmrender from its source folder into the cache; (path, None) or (None, why)."""
    out_dir = _cache_dir()
    out = os.path.join(out_dir, "helmrender")
    newest = max(os.path.getmtime(os.path.join(src, f)) for f in os.listdir(src)
                 if f.endswith(".go") or f == "build.sh")
    if os.access(out, os.X_OK) and os.path.getmtime(out) >= newest:
        return out, None
    os.makedirs(out_dir, exist_ok=True)
    print("helmcheck: building helmrender from %s into %s" % (src, out), file=sys.stderr)
    try:
        r = subprocess.run(["sh", os.path.join(src, "build.sh"), out], capture_output=True,
                           text=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, "building helmrender took over %d s" % BUILD_TIMEOUT
    if r.returncode != 0 or not os.access(out, os.X_OK):
        return None, "building helmrender failed: %s" % (r.stderr.strip()[-600:] or r.returncode)
    return out, None


def find_helmrender():
    """(path, None) for a runnable helmrender, or (None, reason to skip)."""
    cands = []
    env = os.environ.get("HELMRENDER")
    if env:
        cands.append(("HELMRENDER", env))
    cands.append(("repository's ../shared",
                  os.path.join(os.path.dirname(os.path.abspath(REPO)), "shared", "tools",
                               "helmrender")))
    why = []
    for origin, p in cands:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p, None
        if os.path.isdir(p):
            binary = os.path.join(p, "helmrender")
            if os.path.isfile(binary) and os.access(binary, os.X_OK):
                return binary, None
            if os.path.isfile(os.path.join(p, "build.sh")):
                path, err = _build(p)
                if path:
                    return path, None
                why.append("%s (%s): %s" % (origin, p, err))
                continue
        why.append("%s: no helmrender binary or source at %s" % (origin, p))
    return None, "; ".join(why)


def render(helmrender, values_files=(), sets=(), release="gs", namespace="gpuscaler",
           extra=()):
    """Run helmrender on the chart; returns the CompletedProcess (stdout = manifests)."""
    cmd = [helmrender, "--check", "--notes", "--strict", "-n", namespace,
           "--release-name", release]
    for f in values_files:
        cmd += ["-f", f]
    for s in sets:
        cmd += ["--set", s]
    cmd += list(extra)
    cmd.append(CHART)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=RENDER_TIMEOUT)


# ---------------------------------------------------------------- object rules

def label_problems(obj, required):
    """Labels in required (key -> value, or None for any non-empty) missing on obj."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    probs = []
    for k, want in required.items():
        have = labels.get(k)
        if not have:
            probs.append("label %s missing" % k)
        elif want is not None and have != want:
            probs.append("label %s=%r, want %r" % (k, have, want))
    return probs


def ident(obj):
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return "%s %s%s" % (obj.get("kind"), (ns + "/") if ns else "", meta.get("name"))


# ---------------------------------------------------------------- fake API server

def fakekube_available():
    """(True, None) when e2e/fakekube has its harness and client, else (False, why)."""
    for f in ("harness.py", "kubeclient.py"):
        if not os.path.isfile(os.path.join(E2E, "fakekube", f)):
            return False, "e2e/fakekube/%s does not exist yet" % f
    return True, None

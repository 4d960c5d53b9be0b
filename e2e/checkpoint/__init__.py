# SPDX-License-Identifier: Apache-2.0
"""Where gpuscaler keeps a Deployment's checkpoint, and how a test makes one.

- fnv1a64(s): the hash pkg/shard uses for shards and checkpoint ConfigMaps;
- checkpoint_name(ns, name, prefix, configmaps): the ConfigMap and binaryData key
  that hold a Deployment's forecaster (pkg/controller/checkpoint.c);
- history_state(obs, capacity, seasonality): the forecaster checkpoint gpuscaler
  would have after observing obs, [(t_unix_ms, req/s)], made by the real
  forecaster (e2e/tools/forecast-history, configured as the controller configures
  a workload with these annotations), so a test gives a Deployment days of history
  in seconds.
"""
import os
import subprocess

SRC = os.environ.get("GPUSCALER_SRC") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORECAST_HISTORY = os.environ.get("FORECAST_HISTORY_BIN") or os.path.join(
    SRC, "build", "e2e", "forecast-history")


def fnv1a64(s):
    h = 0xcbf29ce484222325  # FNV-1a 64 offset basis
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def checkpoint_name(ns, name, prefix="gpuscaler-state", configmaps=64):
    """The ConfigMap gpuscaler keeps a Deployment's forecaster in, and its key there
    (FNV-1a 64 of namespace/name mod checkpoint.configmaps)."""
    return ("%s-%d" % (prefix, fnv1a64(ns + "/" + name) % configmaps),
            "forecast.%s_%s" % (ns, name))


def checkpoint_key(what, ns, name):
    """The key of a Deployment's entry: <what>.<ns>_<name>, or past 253 characters the name
    cut and .<FNV-1a 64 of namespace/name in hex> appended, 253 characters in all."""
    k = "%s.%s_%s" % (what, ns, name)
    if len(k) <= 253:
        return k
    keep = max(253 - len(what) - 1 - len(ns) - 1 - 17, 0)
    return "%s.%s_%s.%016x" % (what, ns, name[:keep], fnv1a64(ns + "/" + name))


def history_state(obs, capacity, seasonality):
    """The serialised forecaster after `obs`; raises AssertionError when the tool refuses."""
    p = subprocess.run([FORECAST_HISTORY, "%g" % capacity, seasonality],
                       input="".join("%d %.6f\n" % o for o in obs).encode(),
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("forecast-history: %s" % p.stderr.decode())
    return p.stdout

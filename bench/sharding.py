#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/sharding: sharding across replicas at full scale: 3 replicas, 3,000
Deployments and 30,000 pods in e2e/fakekube, scraped from bench-scrape
--serve every decision interval (5 s).

Runs the scenario of e2e/test_sharding.py (which CI runs at 300 Deployments
and 3,000 pods) with these sizes and prints its figures: the split of shards,
Deployments and pods, each replica's peak RSS and CPU share of one core over
the steady window, the takeover time after a SIGKILL, the longest time a
shard had no valid holder, and the write counts behind the check that every
Deployment write came from the holder of its shard's Lease. The replicas keep
one checkpoint ConfigMap per 15 Deployments (at least 64), as
docs/configuration.md sizes them.

usage: bench/sharding.py [--deployments 3000] [--pods-per 10] [--shards 48]
                         [--tick 5] [--window 60]
Needs a build: GPUSCALER_BUILD (default build/) with cmd/gpuscaler/gpuscaler
and bench/bench-scrape.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deployments", type=int, default=3000)
    ap.add_argument("--pods-per", type=int, default=10)
    ap.add_argument("--shards", type=int, default=48)
    ap.add_argument("--tick", type=float, default=5.0)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--rss-budget", type=float, default=256.0,
                    help="MiB each replica must stay under (default: the chart's limit)")
    a = ap.parse_args()
    build = os.environ.get("GPUSCALER_BUILD", os.path.join(ROOT, "build"))
    env = dict(os.environ,
               GPUSCALER_BUILD=build,
               GPUSCALER_BIN=os.environ.get("GPUSCALER_BIN", os.path.join(
                   build, "cmd", "gpuscaler", "gpuscaler")),
               GPUSCALER_SHARD_DEPLOYMENTS=str(a.deployments),
               GPUSCALER_SHARD_PODS_PER=str(a.pods_per),
               GPUSCALER_SHARD_SHARDS=str(a.shards),
               GPUSCALER_SHARD_TICK=str(a.tick),
               GPUSCALER_SHARD_WINDOW=str(a.window),
               GPUSCALER_SHARD_RSS_BUDGET=str(a.rss_budget))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "e2e", "test_sharding.py")],
                       env=env, capture_output=True, text=True)
    figures = {}
    for line in p.stdout.splitlines() + p.stderr.splitlines():
        if line.startswith("FIGURES "):
            figures = json.loads(line[len("FIGURES "):])
    print("sharding: %d replicas, %d Deployments, %d pods, %d shards, tick %gs" % (
        3, a.deployments, a.deployments * a.pods_per, a.shards, a.tick))
    for k in sorted(figures):
        print("  %-36s %s" % (k, json.dumps(figures[k], sort_keys=True)))
    print("checks: %s" % ("passed" if p.returncode == 0 else "FAILED"))
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())

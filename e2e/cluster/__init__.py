# SPDX-License-Identifier: Apache-2.0
"""The loopback "local cluster" of gpuscaler's closed-loop e2e tests.

fakekube (the API server) + kubelet (Deployments -> Pods -> one fakeserve process per pod on its
own 127.x.y.z address) + service (a Service front balancing over Ready pods) + loadgen (an
open-loop Poisson load generator, same profile and thresholds as e2e/k6/) + harness (the Python
API the tests use) + up.py (one command for people).  Standard library only.
"""

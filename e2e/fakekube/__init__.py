# SPDX-License-Identifier: Apache-2.0
"""fakekube: a faithful kube-apiserver subset for gpuscaler's end-to-end tests.

Modules: server (the HTTP(S) server and CLI), api/store/resources/validation/selectors/patch
(the API semantics), faults (harness-only fault injection), kubeclient (a stdlib client for any
API server given a kubeconfig) and harness (start/stop the fake server with generated TLS).
"""

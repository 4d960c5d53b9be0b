# SPDX-License-Identifier: Apache-2.0
"""fakeserve: a fake GPU inference server for gpuscaler's end-to-end tests.

One process per pod: G GPUs x S concurrency slots behind one FIFO queue, a seeded lognormal
service time, real sleeping (an overloaded server is really slow), an OpenAI-style
POST /v1/completions and GET /metrics in the vLLM, Triton, TGI or SGLang shape, metric faults (hang,
garbage, slow) by flag or by the token-guarded /_fake/ control endpoint, and graceful SIGTERM.
Run: /usr/bin/python3 e2e/fakeserve/server.py --listen 127.0.9.2:8000 --gpus 1 --slots 4
"""

# SPDX-License-Identifier: Apache-2.0
"""fakeserve metrics: the counters one fake server keeps and their rendering in the Prometheus
text format in the shape of vLLM (V1 engine, prometheus_client), Triton (src/metrics.cc), TGI
(router, metrics crate), SGLang (python/sglang/srt/metrics/collector.py, prometheus_client in
multiprocess mode) or NVIDIA NIM for LLMs (its Observability page; served at /v1/metrics), with
# HELP / # TYPE lines and the engines' histogram buckets.
"""

import math
import time

# vLLM V1 request_latency_buckets (vllm/v1/metrics/loggers.py).
VLLM_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                        50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


def _tgi_buckets(start=0.0001):
    """TGI: 35 exponential buckets, 0.0001 s multiplied by 1.5 each step (router/src/server.rs),
    computed the same way so the le strings match the engine's to the last digit."""
    out, b = [], start
    for _ in range(35):
        b *= 1.5
        out.append(b)
    return tuple(out)


TGI_DURATION_BUCKETS = _tgi_buckets()

# TEI (router/src/prometheus.rs): the same Suffix("duration") rule from 0.00001 s.
TEI_DURATION_BUCKETS = _tgi_buckets(0.00001)

# SGLang's default bucket_e2e_request_latency (TokenizerMetricsCollector).
SGLANG_LATENCY_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0,
                          60.0, 80.0, 100.0, 200.0, 400.0, 600.0, 1200.0, 1800.0, 2400.0)

# NIM for LLMs' e2e_request_latency_seconds buckets.
NIM_LATENCY_BUCKETS = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)

PROFILES = ("vllm", "triton", "tgi", "sglang", "nim", "tei")


def metrics_path(profile):
    """Where the engine serves its metrics: NIM at /v1/metrics, the others at /metrics."""
    return "/v1/metrics" if profile == "nim" else "/metrics"


class Histogram:
    """A cumulative histogram over fixed upper bounds (seconds)."""

    def __init__(self, bounds):
        self.bounds = tuple(bounds)
        self.counts = [0] * len(self.bounds)
        self.count = 0
        self.sum = 0.0

    def observe(self, v):
        self.count += 1
        self.sum += v
        for i, b in enumerate(self.bounds):
            if v <= b:
                self.counts[i] += 1
                break

    def cumulative(self):
        out, acc = [], 0
        for b, c in zip(self.bounds, self.counts):
            acc += c
            out.append((b, acc))
        return out


class Stats:
    """Everything a fake server counts.  Times are in seconds."""

    def __init__(self):
        self.created = time.time()
        self.requests = 0          # requests received on the inference routes
        self.success = 0           # answered 200
        self.failure = 0           # rejected (queue full, draining, bad input)
        self.running = 0           # holding a slot
        self.waiting = 0           # queued for a slot
        self.queue_time = 0.0      # cumulative
        self.compute_time = 0.0    # cumulative
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.vllm_latency = Histogram(VLLM_LATENCY_BUCKETS)
        self.vllm_inference = Histogram(VLLM_LATENCY_BUCKETS)  # RUNNING phase
        self.tgi_inference = Histogram(TGI_DURATION_BUCKETS)
        self.tgi_duration = Histogram(TGI_DURATION_BUCKETS)
        self.tgi_queue = Histogram(TGI_DURATION_BUCKETS)
        self.sglang_latency = Histogram(SGLANG_LATENCY_BUCKETS)
        self.nim_latency = Histogram(NIM_LATENCY_BUCKETS)
        self.tei_duration = Histogram(TEI_DURATION_BUCKETS)

    def finished(self, queued_s, service_s, prompt_tokens, completion_tokens):
        self.success += 1
        self.queue_time += queued_s
        self.compute_time += service_s
        self.prompt_tokens += prompt_tokens
        self.generation_tokens += completion_tokens
        total = queued_s + service_s
        self.vllm_latency.observe(total)
        self.vllm_inference.observe(service_s)
        self.tgi_inference.observe(service_s)
        self.tgi_duration.observe(total)
        self.tgi_queue.observe(queued_s)
        self.sglang_latency.observe(total)
        self.nim_latency.observe(total)
        self.tei_duration.observe(total)


def _num(v):
    if isinstance(v, float):
        if math.isinf(v):
            return "+Inf" if v > 0 else "-Inf"
        return repr(v)
    return str(v)


def _le(b):
    return "+Inf" if math.isinf(b) else repr(float(b))


def _labels(pairs):
    return "{" + ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"'))
                          for k, v in pairs) + "}"


class _Out:
    def __init__(self):
        self.lines = []

    def family(self, name, typ, help_text):
        self.lines.append("# HELP %s %s" % (name, help_text))
        self.lines.append("# TYPE %s %s" % (name, typ))

    def sample(self, name, labels, value):
        self.lines.append("%s%s %s" % (name, _labels(labels) if labels else "", _num(value)))

    def histogram(self, name, help_text, h, labels, le_first=False):
        self.family(name, "histogram", help_text)
        for b, c in h.cumulative() + [(math.inf, h.count)]:
            if le_first:
                lab = [("le", _le(b))] + list(labels)
            else:   # prometheus_client sorts label names: engine, le, model_name
                lab = sorted(list(labels) + [("le", _le(b))])
            self.sample(name + "_bucket", lab, float(c) if not le_first else c)
        self.sample(name + "_sum", labels, float(h.sum))
        self.sample(name + "_count", labels, float(h.count) if not le_first else h.count)

    def text(self):
        return "\n".join(self.lines) + "\n"


def render_vllm(s, model, kv_usage=0.0):
    o = _Out()
    m = [("engine", "0"), ("model_name", model)]
    o.family("vllm:num_requests_running", "gauge",
             "Number of requests in model execution batches.")
    o.sample("vllm:num_requests_running", m, float(s.running))
    o.family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
    o.sample("vllm:num_requests_waiting", m, float(s.waiting))
    o.family("vllm:kv_cache_usage_perc", "gauge",
             "KV-cache usage. 1 means 100 percent usage.")
    o.sample("vllm:kv_cache_usage_perc", m, float(kv_usage))
    o.family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.")
    o.sample("vllm:prompt_tokens_total", m, float(s.prompt_tokens))
    o.family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.")
    o.sample("vllm:generation_tokens_total", m, float(s.generation_tokens))
    o.family("vllm:request_success_total", "counter",
             "Count of successfully processed requests.")
    for reason, v in (("stop", s.success), ("length", 0), ("abort", 0)):
        o.sample("vllm:request_success_total",
                 [("engine", "0"), ("finished_reason", reason), ("model_name", model)], float(v))
    o.family("vllm:request_success_created", "gauge",
             "Count of successfully processed requests.")
    for reason in ("stop", "length", "abort"):
        o.sample("vllm:request_success_created",
                 [("engine", "0"), ("finished_reason", reason), ("model_name", model)],
                 float(s.created))
    o.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                s.vllm_latency, m)
    o.histogram("vllm:request_inference_time_seconds",
                "Histogram of time spent in RUNNING phase for request.", s.vllm_inference, m)
    return o.text()


def render_triton(s, model, version="1"):
    o = _Out()
    m = [("model", model), ("version", version)]
    us = lambda sec: int(round(sec * 1e6))  # noqa: E731
    o.family("nv_inference_request_success", "counter",
             "Number of successful inference requests, all batch sizes")
    o.sample("nv_inference_request_success", m, s.success)
    o.family("nv_inference_request_failure", "counter",
             "Number of failed inference requests, all batch sizes")
    o.sample("nv_inference_request_failure", m, s.failure)
    o.family("nv_inference_count", "counter",
             "Number of inferences performed (does not include cached requests)")
    o.sample("nv_inference_count", m, s.success)
    o.family("nv_inference_exec_count", "counter",
             "Number of model executions performed (does not include cached requests)")
    o.sample("nv_inference_exec_count", m, s.success)
    o.family("nv_inference_request_duration_us", "counter",
             "Cumulative inference request duration in microseconds (includes cached requests)")
    o.sample("nv_inference_request_duration_us", m, us(s.queue_time + s.compute_time))
    o.family("nv_inference_queue_duration_us", "counter",
             "Cumulative inference queuing duration in microseconds (includes cached requests)")
    o.sample("nv_inference_queue_duration_us", m, us(s.queue_time))
    o.family("nv_inference_compute_infer_duration_us", "counter",
             "Cumulative compute inference duration in microseconds (does not include cached "
             "requests)")
    o.sample("nv_inference_compute_infer_duration_us", m, us(s.compute_time))
    o.family("nv_inference_pending_request_count", "gauge",
             "Instantaneous number of pending requests awaiting execution per-model.")
    o.sample("nv_inference_pending_request_count", m, s.waiting)
    return o.text()


def render_tgi(s):
    o = _Out()
    blocks = []
    o.family("tgi_request_count", "counter", "Total number of requests")
    o.sample("tgi_request_count", [], s.requests)
    blocks.append(o.text())
    o = _Out()
    o.family("tgi_request_success", "counter", "Number of successful requests")
    o.sample("tgi_request_success", [], s.success)
    blocks.append(o.text())
    o = _Out()
    o.family("tgi_queue_size", "gauge", "Current queue size")
    o.sample("tgi_queue_size", [], s.waiting)
    blocks.append(o.text())
    o = _Out()
    o.family("tgi_batch_current_size", "gauge", "Current batch size")
    o.sample("tgi_batch_current_size", [], s.running)
    blocks.append(o.text())
    o = _Out()
    o.histogram("tgi_request_duration", "Request total duration in seconds", s.tgi_duration, [],
                le_first=True)
    blocks.append(o.text())
    o = _Out()
    o.histogram("tgi_request_queue_duration", "Time spent in the queue per request",
                s.tgi_queue, [], le_first=True)
    blocks.append(o.text())
    o = _Out()
    o.histogram("tgi_request_inference_duration", "Request inference duration in seconds",
                s.tgi_inference, [], le_first=True)
    blocks.append(o.text())
    return "\n".join(blocks)


def render_sglang(s, model):
    """The tokenizer manager's counters (per finished request) and one scheduler's gauges (TP
    rank 0, which alone reports by default). Multiprocess mode: no _created samples."""
    o = _Out()
    m = [("model_name", model)]
    o.family("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.")
    o.sample("sglang:prompt_tokens_total", m, float(s.prompt_tokens))
    o.family("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.")
    o.sample("sglang:generation_tokens_total", m, float(s.generation_tokens))
    o.family("sglang:num_requests_total", "counter", "Number of requests processed.")
    o.sample("sglang:num_requests_total", m, float(s.success))
    o.family("sglang:num_aborted_requests_total", "counter", "Number of requests aborted.")
    o.sample("sglang:num_aborted_requests_total", m, float(s.failure))
    o.histogram("sglang:e2e_request_latency_seconds",
                "Histogram of End-to-end request latency in seconds", s.sglang_latency, m)
    sched = [("engine_type", "unified"), ("model_name", model), ("moe_ep_rank", "0"),
             ("pp_rank", "0"), ("tp_rank", "0")]
    o.family("sglang:num_running_reqs", "gauge", "The number of running requests.")
    o.sample("sglang:num_running_reqs", sched, float(s.running))
    o.family("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.")
    o.sample("sglang:num_queue_reqs", sched, float(s.waiting))
    return o.text()


def render_nim(s, model, max_running):
    """NIM for LLMs: unprefixed names, each labelled model_name; the finish counter per
    finished_reason, and successes and failures apart."""
    o = _Out()
    m = [("model_name", model)]
    o.family("num_requests_running", "gauge", "Number of requests currently running on GPU.")
    o.sample("num_requests_running", m, float(s.running))
    o.family("num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
    o.sample("num_requests_waiting", m, float(s.waiting))
    o.family("num_request_max", "gauge", "Max number of concurrently running requests.")
    o.sample("num_request_max", m, float(max_running))
    o.family("prompt_tokens_total", "counter", "Number of prefill tokens processed.")
    o.sample("prompt_tokens_total", m, float(s.prompt_tokens))
    o.family("generation_tokens_total", "counter", "Number of generation tokens processed.")
    o.sample("generation_tokens_total", m, float(s.generation_tokens))
    o.histogram("e2e_request_latency_seconds",
                "Histogram of end to end request latency in seconds.", s.nim_latency, m)
    o.family("request_finish_total", "counter",
             "Count of finished requests, differentiated by finish reason as label.")
    o.sample("request_finish_total", [("finished_reason", "length")] + m, float(s.success))
    o.family("request_success_total", "counter", "Count of successful requests.")
    o.sample("request_success_total", m, float(s.success))
    o.family("request_failure_total", "counter", "Count of failed requests.")
    o.sample("request_failure_total", m, float(s.failure))
    return o.text()


def render_tei(s):
    """Text Embeddings Inference (metrics-rs, no HELP lines, a blank line after each family):
    every series appears with its first use, so a server that has served nothing shows only the
    backend's gauge. Each request here carries one input: te_embed_success counts it, and
    te_request_success counts it as a "single" request."""
    blocks = ["# TYPE te_backend_replicas_healthy gauge\nte_backend_replicas_healthy 1\n"]
    if s.requests:
        blocks.append("# TYPE te_request_count counter\n"
                      'te_request_count{method="single"} %d\n' % s.requests)
    if s.success:
        blocks.append("# TYPE te_request_success counter\n"
                      'te_request_success{method="single"} %d\n' % s.success)
        blocks.append("# TYPE te_embed_success counter\nte_embed_success %d\n" % s.success)
    if s.failure:
        blocks.append("# TYPE te_request_failure counter\n"
                      'te_request_failure{err="overloaded"} %d\n' % s.failure)
    if s.requests:
        blocks.append("# TYPE te_queue_size gauge\nte_queue_size %d\n" % s.waiting)
    if s.tei_duration.count:
        o = _Out()
        o.lines.append("# TYPE te_request_duration histogram")
        for b, c in s.tei_duration.cumulative() + [(math.inf, s.tei_duration.count)]:
            o.sample("te_request_duration_bucket", [("le", _le(b))], c)
        o.sample("te_request_duration_sum", [], float(s.tei_duration.sum))
        o.sample("te_request_duration_count", [], s.tei_duration.count)
        blocks.append(o.text())
    return "\n".join(blocks)


def render(profile, stats, model, max_running=0):
    if profile == "vllm":
        return render_vllm(stats, model)
    if profile == "triton":
        return render_triton(stats, model)
    if profile == "tgi":
        return render_tgi(stats)
    if profile == "sglang":
        return render_sglang(stats, model)
    if profile == "nim":
        return render_nim(stats, model, max_running)
    if profile == "tei":
        return render_tei(stats)
    raise ValueError("unknown profile %r" % profile)


GARBAGE = ("vllm:num_requests_running{model_name=\"x\" 12 13 14\n"
           "# TYPE nv_inference_count counter counter\n"
           "tgi_queue_size{le=} NaNx\n"
           "\x00\x01{{{{ not prometheus at all }}}}\n")

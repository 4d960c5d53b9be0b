/* SPDX-License-Identifier: Apache-2.0 */
/* scrape/profile: which metrics each serving engine exposes for requests,
 * in-flight and queued requests, latency and time in service
 * (docs/metrics.md lists them with their sources). Pure. */
#include "scrape.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

struct profile_names {
    const char *name;
    const char *request, *inflight, *queue, *latency;
    const char *prompt_tokens, *generation_tokens; /* "" none */
    const char *busy;                              /* "" none */
    const char *rejected;                          /* "" none */
    const char *path;                              /* where the engine serves them */
};

/* vLLM V1: vllm/v1/metrics/loggers.py (prometheus_client adds _total to
 * counters; the busy time is the RUNNING phase's histogram); Triton:
 * src/metrics.cc (no token counters; durations are cumulative microsecond
 * counters); TGI: router/src (metrics crate; the request counter is
 * tgi_request_success, requests finished, as every profile's counts:
 * tgi_request_count counts arrivals, those refused with 429 too, and the
 * demand stage adds the backlog's growth to completions; tokens are the
 * _sum of the per-request length histograms, the busy time the inference
 * duration's);
 * SGLang: python/sglang/srt/metrics/collector.py (the request and token
 * counters count finished requests; no busy-time counter: its e2e latency
 * includes the queue); NVIDIA NIM for LLMs: its Observability page (the
 * unprefixed names below, each series labelled model_name, served at
 * /v1/metrics; no busy-time counter); Hugging Face Text Embeddings Inference:
 * core/src/infer.rs, core/src/queue.rs and router/src/http/server.rs (the
 * metrics crate; te_embed_success counts each input of a batch request, as
 * te_request_success does not, and appears with the first one served; the
 * queue gauge counts inputs; the latency is the HTTP request's, whatever the
 * route; no in-flight gauge, no token counters, no busy-time counter).
 * Refused requests: Triton core's failure counter with reason REJECTED
 * (metric_model_reporter.cc; a full queue, max_queue_size, or a queue
 * timeout), TGI's with err "overloaded" (the concurrency limit's 429s, from
 * the first of which the series exists); the other engines queue what they
 * cannot serve at once. */
static const struct profile_names profiles[] = {
    [SCRAPE_VLLM] = {"vllm", "vllm:request_success_total", "vllm:num_requests_running",
                     "vllm:num_requests_waiting", "vllm:e2e_request_latency_seconds",
                     "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                     "vllm:request_inference_time_seconds_sum", "", "/metrics"},
    [SCRAPE_TRITON] = {"triton", "nv_inference_request_success", "",
                       "nv_inference_pending_request_count", "", "", "",
                       "nv_inference_compute_infer_duration_us",
                       "nv_inference_request_failure{reason=\"REJECTED\"}", "/metrics"},
    [SCRAPE_TGI] = {"tgi", "tgi_request_success", "tgi_batch_current_size", "tgi_queue_size",
                    "tgi_request_duration", "tgi_request_input_length_sum",
                    "tgi_request_generated_tokens_sum", "tgi_request_inference_duration_sum",
                    "tgi_request_failure{err=\"overloaded\"}", "/metrics"},
    [SCRAPE_SGLANG] = {"sglang", "sglang:num_requests_total", "sglang:num_running_reqs",
                       "sglang:num_queue_reqs", "sglang:e2e_request_latency_seconds",
                       "sglang:prompt_tokens_total", "sglang:generation_tokens_total", "", "",
                       "/metrics"},
    [SCRAPE_NIM] = {"nim", "request_success_total", "num_requests_running", "num_requests_waiting",
                    "e2e_request_latency_seconds", "prompt_tokens_total", "generation_tokens_total",
                    "", "", "/v1/metrics"},
    [SCRAPE_TEI] = {"tei", "te_embed_success", "", "te_queue_size", "te_request_duration", "", "",
                    "", "", "/metrics"},
    [SCRAPE_GENERIC] = {"generic", "", "", "", "", "", "", "", "", "/metrics"},
};

int scrape_profile_parse(const char *s, enum scrape_profile *out)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(profiles); i++) {
        if (strcmp(s, profiles[i].name) == 0) {
            *out = (enum scrape_profile)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *scrape_profile_name(enum scrape_profile p)
{
    return (unsigned)p < UTIL_ARRAY_LEN(profiles) ? profiles[p].name : "unknown";
}

void scrape_spec_init(struct scrape_spec *s, enum scrape_profile p)
{
    memset(s, 0, sizeof(*s));
    if ((unsigned)p >= UTIL_ARRAY_LEN(profiles))
        p = SCRAPE_GENERIC;
    s->profile = p;
    snprintf(s->scheme, sizeof(s->scheme), "http");
    snprintf(s->path, sizeof(s->path), "%s", profiles[p].path);
    snprintf(s->request_metric, sizeof(s->request_metric), "%s", profiles[p].request);
    snprintf(s->inflight_metric, sizeof(s->inflight_metric), "%s", profiles[p].inflight);
    snprintf(s->queue_metric, sizeof(s->queue_metric), "%s", profiles[p].queue);
    snprintf(s->latency_metric, sizeof(s->latency_metric), "%s", profiles[p].latency);
    snprintf(s->busy_metric, sizeof(s->busy_metric), "%s", profiles[p].busy);
    snprintf(s->rejected_metric, sizeof(s->rejected_metric), "%s", profiles[p].rejected);
    s->missing_fraction = 0.3;
}

int scrape_spec_want_tokens(struct scrape_spec *s)
{
    enum scrape_profile p = (unsigned)s->profile < UTIL_ARRAY_LEN(profiles) ? s->profile
                                                                             : SCRAPE_GENERIC;
    if (!s->generation_token_metric[0] && !profiles[p].generation_tokens[0])
        return -ENOTSUP;
    if (!s->generation_token_metric[0])
        snprintf(s->generation_token_metric, sizeof(s->generation_token_metric), "%s",
                 profiles[p].generation_tokens);
    if (!s->prompt_token_metric[0])
        snprintf(s->prompt_token_metric, sizeof(s->prompt_token_metric), "%s",
                 profiles[p].prompt_tokens);
    return 0;
}

void scrape_config_init(struct scrape_config *c)
{
    memset(c, 0, sizeof(*c));
    c->interval_ms = 5000;
    c->timeout_ms = 2000;
    c->rate_window_ms = 60000;
    c->max_bytes = (size_t)16 << 20;
}

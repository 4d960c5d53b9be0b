/* SPDX-License-Identifier: Apache-2.0 */
/* test-fakepod: fake serving pods for the scrape tests, each a tiny
 * keep-alive HTTP/1.1 server on its own loopback address (127.0.0.N, an
 * ephemeral port) on the test's loop.
 *
 * A pod serves a vLLM-, Triton-, TGI-, SGLang-, NIM- or TEI-shaped exposition whose request
 * counter advances at a set rate in loop time (counter = rate x seconds since
 * start), or misbehaves on purpose: garbage, a truncated body, no answer, an
 * oversized body, HTTP 500. The vLLM pod can also answer in OpenMetrics (the
 * Content-Type says which). Test code only: failures abort. */
#ifndef GPUSCALER_TEST_FAKEPOD_H
#define GPUSCALER_TEST_FAKEPOD_H

#include <stddef.h>
#include <uv.h>

enum fakepod_mode {
    FAKEPOD_VLLM,
    FAKEPOD_TRITON,
    FAKEPOD_TGI,
    FAKEPOD_GARBAGE,   /**< 200 with an HTML page */
    FAKEPOD_TRUNCATED, /**< Content-Length promises more than is sent, then close */
    FAKEPOD_SLOW,      /**< reads the request, never answers */
    FAKEPOD_HUGE,      /**< a valid but 1 MiB exposition */
    FAKEPOD_HTTP500,
    FAKEPOD_VLLM_OM,    /**< vLLM in OpenMetrics, Content-Type application/openmetrics-text */
    FAKEPOD_TEXT_AS_OM, /**< the 0.0.4 vLLM body labelled application/openmetrics-text */
    FAKEPOD_HELD,       /**< reads the request, answers only at fakepod_release() */
    FAKEPOD_SGLANG,     /**< latency p99 3 s, one more running request than asked */
    FAKEPOD_NIM,        /**< NIM's names, failures counted apart; 404 but at /v1/metrics */
    FAKEPOD_TEI,        /**< TEI: `rate` inputs/s in batches of 8; series appear once used */
};

struct fakepod;

/**
 * Start a pod on 127.0.0.<octet>. rate is requests/s of its counter;
 * running/waiting its gauges. The latency histogram follows a fixed
 * distribution whose p99 is 3.75 s (see fakepod_p99_ms). The vLLM pod's
 * busy-time counter (vllm:request_inference_time_seconds_sum) advances at
 * `running` seconds per second; the OpenMetrics vLLM pod has none.
 */
struct fakepod *fakepod_start(uv_loop_t *loop, int octet, enum fakepod_mode mode, double rate,
                              double running, double waiting);
const char *fakepod_ip(const struct fakepod *p);
int fakepod_port(const struct fakepod *p);
unsigned fakepod_accepts(const struct fakepod *p);
unsigned fakepod_requests(const struct fakepod *p);
/** Requests that carried "Connection: close". */
unsigned fakepod_close_requests(const struct fakepod *p);
void fakepod_set_mode(struct fakepod *p, enum fakepod_mode mode);
/** Answer, as FAKEPOD_VLLM, the requests FAKEPOD_HELD holds on connections
 *  still open, and serve as FAKEPOD_VLLM from now on. */
void fakepod_release(struct fakepod *p);
/** The process restarted: its counters start again from 0 now. */
void fakepod_restart(struct fakepod *p);
/** Close the listener and all connections (memory goes in close callbacks). */
void fakepod_stop(struct fakepod *p);

/** p99 of the served latency histogram, in ms. */
double fakepod_p99_ms(void);

#endif

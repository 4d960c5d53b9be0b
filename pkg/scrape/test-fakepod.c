/* SPDX-License-Identifier: Apache-2.0 */
/* test-fakepod: loopback fake serving pods for the scrape tests (see
 * test-fakepod.h). Test code: a setup step that fails aborts with its error,
 * in every build type (never assert(), which NDEBUG compiles away together
 * with the call inside it). */
#include "test-fakepod.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

struct fconn {
    uv_tcp_t tcp;
    struct fakepod *pod;
    struct fconn *next;
    struct util_buf in;
    bool closed;
    bool held; /* FAKEPOD_HELD: a request waits for fakepod_release */
};

struct fakepod {
    uv_loop_t *loop;
    uv_tcp_t listener;
    enum fakepod_mode mode;
    double rate, running, waiting;
    uint64_t t0;
    char ip[32];
    int port;
    unsigned accepts, requests;
    unsigned close_requests; /* requests that asked for Connection: close */
    struct fconn *conns;
    int open;
    bool stopping;
};

struct wreq {
    uv_write_t w;
    char *data;
};

struct sreq {
    uv_shutdown_t s;
};

/* The latency distribution: cumulative fraction per bound (p99 = 3.75 s). */
static const double vllm_le[] = {0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50,
                                 60, 120, 240, 480, 960, 1920, 7680};
static const double vllm_cdf[] = {0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.98, 1, 1, 1, 1, 1, 1, 1,
                                  1, 1, 1, 1, 1, 1, 1};
static const double tgi_le[] = {0.5, 1, 2.5, 5, 10};
static const double tgi_cdf[] = {0.3, 0.7, 0.98, 1, 1};
/* SGLang's lower default bounds: p99 = 3 s */
static const double sglang_le[] = {0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10};
static const double sglang_cdf[] = {0, 0.05, 0.2, 0.4, 0.6, 0.7, 0.98, 1, 1, 1, 1};

double fakepod_p99_ms(void)
{
    return (2.5 + (5.0 - 2.5) * (0.99 - 0.98) / (1.0 - 0.98)) * 1000.0;
}

static void maybe_free(struct fakepod *p)
{
    if (!p->stopping || p->open)
        return;
    while (p->conns) {
        struct fconn *c = p->conns;
        p->conns = c->next;
        util_buf_free(&c->in);
        xfree(c);
    }
    xfree(p);
}

static void on_closed(uv_handle_t *h)
{
    struct fakepod *p = h->data;
    p->open--;
    maybe_free(p);
}

static void on_conn_closed(uv_handle_t *h)
{
    struct fconn *c = h->data;
    c->pod->open--;
    maybe_free(c->pod);
}

static void conn_close(struct fconn *c)
{
    if (c->closed)
        return;
    c->closed = true;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_written(uv_write_t *w, int status)
{
    struct wreq *wr = util_container_of(w, struct wreq, w);
    (void)status;
    xfree(wr->data);
    xfree(wr);
}

static void conn_write(struct fconn *c, const char *data, size_t len)
{
    if (c->closed)
        return;
    struct wreq *wr = xcalloc(1, sizeof(*wr));
    wr->data = xmalloc(len);
    memcpy(wr->data, data, len);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)len);
    if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
        xfree(wr->data);
        xfree(wr);
    }
}

static void on_shutdown(uv_shutdown_t *s, int status)
{
    struct fconn *c = s->handle->data;
    (void)status;
    xfree(util_container_of(s, struct sreq, s));
    conn_close(c);
}

static void hist(struct util_buf *b, const char *name, const char *labels, const double *le,
                 const double *cdf, size_t n, double count)
{
    util_buf_printf(b, "# HELP %s Request latency.\n# TYPE %s histogram\n", name, name);
    util_buf_printf(b, "%s_sum{%s} %.17g\n", name, labels, count * 1.2);
    for (size_t i = 0; i < n; i++)
        util_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %.17g\n", name, labels, labels[0] ? "," : "",
                        le[i], count * cdf[i]);
    util_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %.17g\n", name, labels, labels[0] ? "," : "",
                    count);
    util_buf_printf(b, "%s_count{%s} %.17g\n", name, labels, count);
}

static void exposition(const struct fakepod *p, struct util_buf *b)
{
    double secs = (double)(uv_now(p->loop) - p->t0) / 1000.0;
    double c = p->rate * secs;
    switch (p->mode) {
    case FAKEPOD_VLLM:
    case FAKEPOD_HUGE:
    case FAKEPOD_TEXT_AS_OM:
        util_buf_puts(b, "# HELP python_gc_objects_collected_total Objects collected during gc\n"
                         "# TYPE python_gc_objects_collected_total counter\n"
                         "python_gc_objects_collected_total{generation=\"0\"} 12345.0\n");
        util_buf_printf(b,
                        "# HELP vllm:num_requests_running Number of requests in model execution "
                        "batches.\n# TYPE vllm:num_requests_running gauge\n"
                        "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} %g\n"
                        "# HELP vllm:num_requests_waiting Number of requests waiting to be "
                        "processed.\n# TYPE vllm:num_requests_waiting gauge\n"
                        "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %g\n"
                        "# HELP vllm:kv_cache_usage_perc KV-cache usage.\n"
                        "# TYPE vllm:kv_cache_usage_perc gauge\n"
                        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.42\n",
                        p->running, p->waiting);
        util_buf_printf(b,
                        "# HELP vllm:request_success_total Count of successfully processed "
                        "requests.\n# TYPE vllm:request_success_total counter\n"
                        "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\","
                        "model_name=\"m\"} %.17g\n"
                        "vllm:request_success_total{engine=\"0\",finished_reason=\"length\","
                        "model_name=\"m\"} %.17g\n"
                        "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\","
                        "model_name=\"m\"} 0.0\n"
                        "# HELP vllm:request_success_created Count of successfully processed "
                        "requests.\n# TYPE vllm:request_success_created gauge\n"
                        "vllm:request_success_created{engine=\"0\",finished_reason=\"stop\","
                        "model_name=\"m\"} 1.7e9\n"
                        /* a gauge under the counter's family name, with the
                         * labels of one of its series: never a request */
                        "# TYPE vllm:request_success gauge\n"
                        "vllm:request_success{engine=\"0\",finished_reason=\"stop\","
                        "model_name=\"m\"} 1e6\n",
                        c * 0.75, c * 0.25);
        hist(b, "vllm:e2e_request_latency_seconds", "engine=\"0\",model_name=\"m\"", vllm_le,
             vllm_cdf, UTIL_ARRAY_LEN(vllm_le), c);
        hist(b, "vllm:time_to_first_token_seconds", "engine=\"0\",model_name=\"m\"", vllm_le,
             vllm_cdf, UTIL_ARRAY_LEN(vllm_le), c);
        /* busy time: `running` requests in service all along (the OpenMetrics pod has none) */
        util_buf_printf(b,
                        "# HELP vllm:request_inference_time_seconds Time in the RUNNING phase.\n"
                        "# TYPE vllm:request_inference_time_seconds summary\n"
                        "vllm:request_inference_time_seconds_sum{engine=\"0\",model_name=\"m\"}"
                        " %.17g\n"
                        "vllm:request_inference_time_seconds_count{engine=\"0\",model_name="
                        "\"m\"} %.17g\n",
                        p->running * secs, c);
        if (p->mode == FAKEPOD_HUGE)
            while (b->len < ((size_t)1 << 20))
                util_buf_puts(b, "# filler filler filler filler filler filler filler filler\n");
        break;
    case FAKEPOD_VLLM_OM:
        /* what prometheus_client writes for an OpenMetrics Accept: counter
         * families without _total, _created inside the family, # UNIT,
         * exemplars, # EOF; plus a label value with a backslash that is no
         * 0.0.4 escape (a Windows path), kept as is */
        util_buf_printf(b,
                        "# HELP vllm:num_requests_running Number of requests in model execution "
                        "batches.\n# TYPE vllm:num_requests_running gauge\n"
                        "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} %g\n"
                        "# HELP vllm:num_requests_waiting Number of requests waiting to be "
                        "processed.\n# TYPE vllm:num_requests_waiting gauge\n"
                        "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %g\n"
                        "# TYPE vllm:kv_cache_usage_perc gauge\n"
                        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\","
                        "cache_dir=\"C:\\models\\m\"} 0.42\n"
                        "# HELP vllm:request_success Count of successfully processed requests.\n"
                        "# TYPE vllm:request_success counter\n"
                        "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\","
                        "model_name=\"m\"} %.17g # {trace_id=\"abc\"} 1.0 1.7e9\n"
                        "vllm:request_success_created{engine=\"0\",finished_reason=\"stop\","
                        "model_name=\"m\"} 1.7e9\n"
                        "vllm:request_success_total{engine=\"0\",finished_reason=\"length\","
                        "model_name=\"m\"} %.17g\n"
                        "vllm:request_success_created{engine=\"0\",finished_reason=\"length\","
                        "model_name=\"m\"} 1.7e9\n",
                        p->running, p->waiting, c * 0.75, c * 0.25);
        util_buf_puts(b, "# UNIT vllm:e2e_request_latency_seconds seconds\n");
        hist(b, "vllm:e2e_request_latency_seconds", "engine=\"0\",model_name=\"m\"", vllm_le,
             vllm_cdf, UTIL_ARRAY_LEN(vllm_le), c);
        util_buf_puts(b, "# EOF\n");
        break;
    case FAKEPOD_TRITON:
        util_buf_printf(b,
                        "# HELP nv_inference_request_success Number of successful inference "
                        "requests, all batch sizes\n# TYPE nv_inference_request_success counter\n"
                        "nv_inference_request_success{model=\"a\",version=\"1\"} %.17g\n"
                        "nv_inference_request_success{model=\"b\",version=\"1\"} %.17g\n"
                        "# HELP nv_inference_pending_request_count Instantaneous number of "
                        "pending requests awaiting execution per-model.\n"
                        "# TYPE nv_inference_pending_request_count gauge\n"
                        "nv_inference_pending_request_count{model=\"a\",version=\"1\"} %g\n"
                        "nv_inference_pending_request_count{model=\"b\",version=\"1\"} 0\n"
                        "# HELP nv_inference_request_duration_us Cumulative inference request "
                        "duration in microseconds\n# TYPE nv_inference_request_duration_us "
                        "counter\nnv_inference_request_duration_us{model=\"a\",version=\"1\"} "
                        "%.17g\n",
                        c * 0.5, c * 0.5, p->waiting, c * 1000.0);
        break;
    case FAKEPOD_TGI:
        util_buf_printf(b,
                        "# TYPE tgi_request_count counter\ntgi_request_count %.17g\n"
                        "# TYPE tgi_request_success counter\ntgi_request_success %.17g\n"
                        "# TYPE tgi_queue_size gauge\ntgi_queue_size %g\n"
                        "# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size %g\n",
                        /* arrivals: those refused with 429 too */
                        1.5 * c, c, p->waiting, p->running);
        hist(b, "tgi_request_duration", "", tgi_le, tgi_cdf, UTIL_ARRAY_LEN(tgi_le), c);
        break;
    case FAKEPOD_SGLANG:
        /* prometheus_client in multiprocess mode (no _created); a gauge per
         * data-parallel scheduler; aborted requests counted apart */
        util_buf_printf(b,
                        "# HELP sglang:num_requests_total Number of requests processed.\n"
                        "# TYPE sglang:num_requests_total counter\n"
                        "sglang:num_requests_total{model_name=\"m\"} %.17g\n"
                        "# TYPE sglang:num_aborted_requests_total counter\n"
                        "sglang:num_aborted_requests_total{model_name=\"m\"} %.17g\n"
                        "# TYPE sglang:num_running_reqs gauge\n"
                        "sglang:num_running_reqs{dp_rank=\"0\",model_name=\"m\",tp_rank=\"0\"} %g\n"
                        "sglang:num_running_reqs{dp_rank=\"1\",model_name=\"m\",tp_rank=\"0\"} 1\n"
                        "# TYPE sglang:num_queue_reqs gauge\n"
                        "sglang:num_queue_reqs{dp_rank=\"0\",model_name=\"m\",tp_rank=\"0\"} %g\n"
                        "sglang:num_queue_reqs{dp_rank=\"1\",model_name=\"m\",tp_rank=\"0\"} 0\n",
                        c, c * 0.5, p->running, p->waiting);
        hist(b, "sglang:e2e_request_latency_seconds", "model_name=\"m\"", sglang_le, sglang_cdf,
             UTIL_ARRAY_LEN(sglang_le), c);
        break;
    case FAKEPOD_NIM:
        /* NIM for LLMs (its Observability page): unprefixed names labelled
         * model_name; failed requests counted apart */
        util_buf_printf(b,
                        "# HELP num_requests_running Number of requests currently running on "
                        "GPU.\n# TYPE num_requests_running gauge\n"
                        "num_requests_running{model_name=\"m\"} %g\n"
                        "# TYPE num_requests_waiting gauge\n"
                        "num_requests_waiting{model_name=\"m\"} %g\n"
                        "# TYPE num_request_max gauge\nnum_request_max{model_name=\"m\"} 256\n"
                        "# TYPE request_success_total counter\n"
                        "request_success_total{model_name=\"m\"} %.17g\n"
                        "# TYPE request_failure_total counter\n"
                        "request_failure_total{model_name=\"m\"} %.17g\n",
                        p->running, p->waiting, c, c * 0.5);
        hist(b, "e2e_request_latency_seconds", "model_name=\"m\"", tgi_le, tgi_cdf,
             UTIL_ARRAY_LEN(tgi_le), c);
        break;
    case FAKEPOD_TEI:
        /* Text Embeddings Inference (metrics-rs): every series appears with
         * its first use, so a pod that has served nothing shows only the
         * backend's gauge; inputs come in HTTP batches of 8; the per-input
         * duration has another shape than the request's */
        util_buf_puts(b, "# TYPE te_backend_replicas_healthy gauge\n"
                         "te_backend_replicas_healthy 1\n\n");
        if (c <= 0)
            break;
        util_buf_printf(b,
                        "# TYPE te_request_success counter\n"
                        "te_request_success{method=\"batch\"} %.17g\n"
                        "te_request_success{method=\"single\"} %.17g\n\n"
                        "# TYPE te_embed_success counter\nte_embed_success %.17g\n\n"
                        "# TYPE te_queue_size gauge\nte_queue_size %g\n\n",
                        c / 8 * 0.75, c / 8 * 0.25, c, p->waiting);
        hist(b, "te_request_duration", "", tgi_le, tgi_cdf, UTIL_ARRAY_LEN(tgi_le), c / 8);
        hist(b, "te_embed_duration", "", sglang_le, sglang_cdf, UTIL_ARRAY_LEN(sglang_le), c);
        break;
    default:
        break;
    }
}

static void respond(struct fconn *c, bool found)
{
    struct fakepod *p = c->pod;
    struct util_buf body = {0}, msg = {0};
    if (!found) {
        util_buf_puts(&msg, "HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\n"
                            "Content-Type: text/plain\r\n\r\nNot Found\n");
        conn_write(c, msg.data, msg.len);
        util_buf_free(&msg);
        return;
    }
    switch (p->mode) {
    case FAKEPOD_SLOW:
        return;
    case FAKEPOD_HELD:
        c->held = true;
        return;
    case FAKEPOD_HTTP500:
        util_buf_puts(&msg, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n"
                            "Content-Type: text/plain\r\n\r\noops\n");
        conn_write(c, msg.data, msg.len);
        break;
    case FAKEPOD_GARBAGE:
        util_buf_puts(&body, "<html><body><h1>Welcome</h1></body></html>\n");
        /* fall through */
    default:
        if (!body.len)
            exposition(p, &body);
        util_buf_printf(&msg, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                        p->mode == FAKEPOD_VLLM_OM || p->mode == FAKEPOD_TEXT_AS_OM
                            ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                            : "text/plain; version=0.0.4",
                        body.len + (p->mode == FAKEPOD_TRUNCATED ? 1000 : 0));
        util_buf_append(&msg, body.data, p->mode == FAKEPOD_TRUNCATED ? body.len / 2 : body.len);
        conn_write(c, msg.data, msg.len);
        if (p->mode == FAKEPOD_TRUNCATED) {
            struct sreq *s = xcalloc(1, sizeof(*s));
            if (uv_shutdown(&s->s, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
                xfree(s);
                conn_close(c);
            }
        }
        break;
    }
    util_buf_free(&body);
    util_buf_free(&msg);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    static char slab[65536]; /* the loop is single-threaded; read_cb copies it out */
    *buf = uv_buf_init(slab, sizeof(slab));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct fconn *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    util_buf_append(&c->in, buf->base, (size_t)n);
    char *end;
    while (c->in.len && (end = strstr(c->in.data, "\r\n\r\n")) != NULL) {
        size_t used = (size_t)(end + 4 - c->in.data);
        *end = '\0';
        if (strcasestr(c->in.data, "\r\nConnection: close"))
            c->pod->close_requests++;
        /* NIM serves /v1/metrics only; the others answer any path */
        bool found = c->pod->mode != FAKEPOD_NIM || strncmp(c->in.data, "GET /v1/metrics ", 16) == 0;
        memmove(c->in.data, c->in.data + used, c->in.len - used + 1);
        c->in.len -= used;
        c->pod->requests++;
        respond(c, found);
    }
}

/* Abort the test binary when a libuv setup call fails. */
static void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "fakepod: %s: %s\n", what, uv_strerror(rc));
        abort();
    }
}

static void on_conn(uv_stream_t *l, int status)
{
    struct fakepod *p = l->data;
    if (status < 0)
        return; /* listener error: nothing to accept */
    struct fconn *c = xcalloc(1, sizeof(*c));
    c->pod = p;
    uv_tcp_init(p->loop, &c->tcp);
    c->tcp.data = c;
    p->open++;
    c->next = p->conns;
    p->conns = c;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    p->accepts++;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

struct fakepod *fakepod_start(uv_loop_t *loop, int octet, enum fakepod_mode mode, double rate,
                              double running, double waiting)
{
    struct fakepod *p = xcalloc(1, sizeof(*p));
    p->loop = loop;
    p->mode = mode;
    p->rate = rate;
    p->running = running;
    p->waiting = waiting;
    p->t0 = uv_now(loop);
    snprintf(p->ip, sizeof(p->ip), "127.0.0.%d", octet);
    struct sockaddr_in sa;
    must(uv_ip4_addr(p->ip, 0, &sa), "address");
    must(uv_tcp_init(loop, &p->listener), "uv_tcp_init");
    p->listener.data = p;
    p->open = 1;
    must(uv_tcp_bind(&p->listener, (const struct sockaddr *)&sa, 0), "bind");
    must(uv_listen((uv_stream_t *)&p->listener, 128, on_conn), "listen");
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    must(uv_tcp_getsockname(&p->listener, (struct sockaddr *)&ss, &len), "getsockname");
    p->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return p;
}

const char *fakepod_ip(const struct fakepod *p)
{
    return p->ip;
}

int fakepod_port(const struct fakepod *p)
{
    return p->port;
}

unsigned fakepod_accepts(const struct fakepod *p)
{
    return p->accepts;
}

unsigned fakepod_close_requests(const struct fakepod *p)
{
    return p->close_requests;
}

unsigned fakepod_requests(const struct fakepod *p)
{
    return p->requests;
}

void fakepod_set_mode(struct fakepod *p, enum fakepod_mode mode)
{
    p->mode = mode;
}

void fakepod_release(struct fakepod *p)
{
    p->mode = FAKEPOD_VLLM;
    for (struct fconn *c = p->conns; c; c = c->next) {
        if (c->held && !c->closed) {
            c->held = false;
            respond(c, true);
        }
    }
}

void fakepod_restart(struct fakepod *p)
{
    p->t0 = uv_now(p->loop);
}

void fakepod_stop(struct fakepod *p)
{
    p->stopping = true;
    uv_close((uv_handle_t *)&p->listener, on_closed);
    for (struct fconn *c = p->conns; c; c = c->next)
        conn_close(c);
}

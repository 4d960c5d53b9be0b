/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for httpc against testsrv on the same loop: each test counts
 * callbacks, runs the loop to completion and asserts it closes cleanly. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "httpc/httpc.h"
#include "httpc/testsrv.h"
#include "util/util.h"

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    struct testsrv *srv;
    int done_calls;
    int close_calls;
    int last_err;
    long last_status;
    char last_body[4096];
    char last_errmsg[256];
    char last_hdr[128];
    char last_ctype[128];
    int64_t retry_after;
    struct util_buf streamed;
    int chunks;
    char stream_ctype[128]; /* httpc_req_content_type() in the data callback */
    int ctype_mismatch;     /* chunks that saw another value than the first */
    bool done_ctype_null;   /* ...and NULL from the completion callback */
    struct testsrv_conn *held;
    struct httpc_req *req;
    int remaining; /* keep-alive chain */
    bool no_reuse; /* ...with httpc_opts.no_reuse */
    int close_hdrs; /* requests that carried Connection: close */
    uv_timer_t timer;
    int want; /* run_until_requests()'s target */
};

static struct fx *fx_new(testsrv_handler h)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpc_new(&f->loop, &f->http), 0);
    f->srv = testsrv_start(&f->loop, h, f);
    uv_timer_init(&f->loop, &f->timer);
    f->timer.data = f;
    return f;
}

static bool requests_reached(void *arg)
{
    struct fx *f = arg;
    return testsrv_requests(f->srv) >= (unsigned)f->want;
}

/* Run the loop until n completions were seen (the server's keep-alive
 * connections keep the loop alive, so UV_RUN_DEFAULT would not return). */
static void run_until(struct fx *f, int n)
{
    assert_true(testsrv_run_until_count(&f->loop, &f->done_calls, n, 10000));
}

/* ...or until the server has seen n requests. */
static void run_until_requests(struct fx *f, int n)
{
    f->want = n;
    assert_true(testsrv_run_until(&f->loop, requests_reached, f, 10000));
}

static void on_client_closed(void *arg)
{
    ((struct fx *)arg)->close_calls++;
}

/* Close everything, run the loop dry, check it closes. */
static void fx_finish(struct fx *f)
{
    httpc_close(f->http, on_client_closed, f);
    testsrv_stop(f->srv);
    uv_close((uv_handle_t *)&f->timer, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->close_calls, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    util_buf_free(&f->streamed);
    xfree(f);
}

static void on_done(struct httpc_req *req, int err, const struct httpc_resp *resp, void *arg)
{
    struct fx *f = arg;
    (void)req;
    f->done_calls++;
    f->last_err = err;
    f->last_status = resp->status;
    snprintf(f->last_body, sizeof(f->last_body), "%.*s", (int)resp->body_len, resp->body);
    snprintf(f->last_errmsg, sizeof(f->last_errmsg), "%s", resp->errmsg);
    const char *h = httpc_resp_header(resp, "x-test");
    snprintf(f->last_hdr, sizeof(f->last_hdr), "%s", h ? h : "");
    snprintf(f->last_ctype, sizeof(f->last_ctype), "%s",
             resp->content_type ? resp->content_type : "");
    f->retry_after = httpc_resp_retry_after_ms(resp, 0);
    f->done_ctype_null = httpc_req_content_type(req) == NULL;
    f->req = NULL;
}

/* ---- handlers ----------------------------------------------------------- */

static void h_echo(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    char auth[128] = "", ct[64] = "", custom[64] = "", conn[32] = "";
    if (testsrv_req_header(r, "Connection", conn, sizeof(conn)) && strcmp(conn, "close") == 0)
        ((struct fx *)arg)->close_hdrs++;
    testsrv_req_header(r, "Authorization", auth, sizeof(auth));
    testsrv_req_header(r, "Content-Type", ct, sizeof(ct));
    testsrv_req_header(r, "X-Custom", custom, sizeof(custom));
    char *body = xasprintf("%s %s|%s|%s|%s|%.*s", r->method, r->target, auth, ct, custom,
                           (int)r->body_len, r->body);
    if (strcmp(r->target, "/429") == 0)
        testsrv_respond(c, 429, "text/plain", "slow down", 9, "Retry-After: 3\r\n");
    else if (strcmp(r->target, "/big") == 0) {
        char *big = xcalloc(1, 100000);
        memset(big, 'x', 99999);
        testsrv_respond(c, 200, "text/plain", big, 99999, NULL);
        xfree(big);
    } else if (strcmp(r->target, "/bigchunked") == 0) {
        char blk[1000];
        memset(blk, 'y', sizeof(blk));
        testsrv_stream_begin(c, 200, "text/plain");
        for (int i = 0; i < 50; i++)
            testsrv_stream_chunk(c, blk, sizeof(blk));
        testsrv_stream_end(c);
    } else
        testsrv_respond(c, 200, "text/plain; charset=utf-8", body, strlen(body),
                        "X-Test: yes\r\n");
    xfree(body);
}

static void h_hold(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    (void)r;
    ((struct fx *)arg)->held = c; /* never answers */
}

/* ---- tests -------------------------------------------------------------- */

static void test_get(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_echo);
    char *url = xasprintf("%s/hello?x=1", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .timeout_ms = 5000};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    assert_int_equal(f->done_calls, 0); /* never from inside httpc_request */
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 1);
    assert_int_equal(f->last_err, 0);
    assert_int_equal(f->last_status, 200);
    assert_string_equal(f->last_body, "GET /hello?x=1||||");
    assert_string_equal(f->last_hdr, "yes");
    assert_string_equal(f->last_ctype, "text/plain; charset=utf-8");
    assert_int_equal(f->retry_after, -1);
    xfree(url);
    fx_finish(f);
}

static void test_post_and_methods(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_echo);
    char *url = xasprintf("%s/obj", testsrv_url(f->srv));
    const char *hdrs[] = {"X-Custom: 42", NULL};
    struct httpc_opts o = {.url = url, .body = "{\"a\":1}", .body_len = 7,
                           .content_type = "application/json", .bearer = "tok123",
                           .headers = hdrs};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 1);
    assert_int_equal(f->last_err, 0);
    assert_string_equal(f->last_body,
                        "POST /obj|Bearer tok123|application/json|42|{\"a\":1}");

    o.method = "PATCH";
    o.content_type = "application/merge-patch+json";
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 2);
    assert_string_equal(f->last_body,
                        "PATCH /obj|Bearer tok123|application/merge-patch+json|42|{\"a\":1}");

    struct httpc_opts d = {.url = url, .method = "DELETE"};
    assert_int_equal(httpc_request(f->http, &d, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 3);
    assert_string_equal(f->last_body, "DELETE /obj||||");
    xfree(url);
    fx_finish(f);
}

/* Streams "chunk-0\n" .. "chunk-4\n" 20 ms apart. */
static int stream_i;
static struct testsrv_conn *stream_conn;
static void on_stream_tick(uv_timer_t *t)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "chunk-%d\n", stream_i++);
    testsrv_stream_chunk(stream_conn, buf, (size_t)n);
    if (stream_i == 5) {
        testsrv_stream_end(stream_conn);
        uv_timer_stop(t);
    }
}

static void h_stream(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    struct fx *f = arg;
    if (strcmp(r->target, "/missing") == 0) {
        testsrv_respond(c, 404, "application/json", "{\"code\":404}", 12, NULL);
        return;
    }
    if (strcmp(r->target, "/forever") == 0) {
        testsrv_stream_begin(c, 200, "application/json");
        stream_conn = c;
        stream_i = -1000000; /* never ends */
        uv_timer_start(&f->timer, on_stream_tick, 5, 5);
        return;
    }
    const char *ct = "application/json";
    if (strcmp(r->target, "/openmetrics") == 0)
        ct = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    else if (strcmp(r->target, "/no-content-type") == 0)
        ct = NULL;
    testsrv_stream_begin(c, 200, ct);
    stream_conn = c;
    stream_i = 0;
    uv_timer_start(&f->timer, on_stream_tick, 20, 20);
}

static int on_data(struct httpc_req *req, long status, const char *data, size_t len, void *arg)
{
    struct fx *f = arg;
    assert_int_equal(status, 200);
    const char *ct = httpc_req_content_type(req);
    if (f->chunks == 0)
        snprintf(f->stream_ctype, sizeof(f->stream_ctype), "%s", ct ? ct : "(null)");
    else if (strcmp(f->stream_ctype, ct ? ct : "(null)") != 0)
        f->ctype_mismatch++;
    f->chunks++;
    util_buf_append(&f->streamed, data, len);
    return 0;
}

static void test_streaming(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_stream);
    char *url = xasprintf("%s/watch", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .on_data = on_data};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 1);
    assert_int_equal(f->last_err, 0);
    assert_int_equal(f->last_status, 200);
    assert_string_equal(f->streamed.data, "chunk-0\nchunk-1\nchunk-2\nchunk-3\nchunk-4\n");
    assert_true(f->chunks >= 2); /* delivered as it arrived, not at the end */
    assert_string_equal(f->last_body, "");
    /* the data callback sees the Content-Type from the first chunk on */
    assert_string_equal(f->stream_ctype, "application/json");
    assert_int_equal(f->ctype_mismatch, 0);
    assert_true(f->done_ctype_null); /* only inside a data callback */

    /* e.g. a pod answering OpenMetrics, or nothing at all */
    static const struct {
        const char *path, *want;
    } ctypes[] = {
        {"/openmetrics", "application/openmetrics-text; version=1.0.0; charset=utf-8"},
        {"/no-content-type", "(null)"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(ctypes); i++) {
        xfree(url);
        url = xasprintf("%s%s", testsrv_url(f->srv), ctypes[i].path);
        o.url = url;
        f->chunks = 0;
        util_buf_reset(&f->streamed);
        int before = f->done_calls;
        assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
        run_until(f, before + 1);
        assert_int_equal(f->last_err, 0);
        assert_string_equal(f->streamed.data, "chunk-0\nchunk-1\nchunk-2\nchunk-3\nchunk-4\n");
        assert_string_equal(f->stream_ctype, ctypes[i].want);
        assert_int_equal(f->ctype_mismatch, 0);
    }

    /* A non-2xx answer is buffered for the completion callback instead. */
    xfree(url);
    url = xasprintf("%s/missing", testsrv_url(f->srv));
    o.url = url;
    f->chunks = 0;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 4);
    assert_int_equal(f->chunks, 0);
    assert_int_equal(f->last_status, 404);
    assert_string_equal(f->last_body, "{\"code\":404}");
    xfree(url);
    fx_finish(f);
}

static int data_cancel_after_3(struct httpc_req *req, long status, const char *data, size_t len,
                               void *arg)
{
    struct fx *f = arg;
    (void)status;
    util_buf_append(&f->streamed, data, len);
    if (++f->chunks == 3) {
        assert_int_equal(httpc_cancel(req), 0);
        assert_int_equal(httpc_cancel(req), -EALREADY);
    }
    return 0;
}

static int data_abort(struct httpc_req *req, long status, const char *data, size_t len, void *arg)
{
    (void)req, (void)status, (void)data, (void)len;
    struct fx *f = arg;
    return ++f->chunks == 2 ? -EBADMSG : 0;
}

static void test_stream_cancel_from_callback(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_stream);
    char *url = xasprintf("%s/forever", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .on_data = data_cancel_after_3};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 1);
    assert_int_equal(f->done_calls, 1);
    assert_int_equal(f->last_err, -ECANCELED);
    assert_string_equal(f->last_errmsg, "request cancelled");
    assert_int_equal(f->chunks, 3);

    /* A data callback's error aborts the transfer and is reported. */
    f->chunks = 0;
    o.on_data = data_abort;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 2);
    assert_int_equal(f->last_err, -EBADMSG);
    assert_non_null(strstr(f->last_errmsg, "data callback"));
    assert_int_equal(f->chunks, 2);
    uv_timer_stop(&f->timer);
    xfree(url);
    fx_finish(f);
}

static void test_timeout(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_hold);
    char *url = xasprintf("%s/slow", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .timeout_ms = 200};
    uint64_t t0 = uv_hrtime();
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    assert_int_equal(f->done_calls, 1);
    assert_int_equal(f->last_err, -ETIMEDOUT);
    assert_true(f->last_errmsg[0] != '\0');
    assert_true(ms >= 150 && ms < 3000);
    xfree(url);
    fx_finish(f);
}

static void on_cancel_timer(uv_timer_t *t)
{
    struct fx *f = t->data;
    assert_non_null(f->req);
    assert_int_equal(httpc_cancel(f->req), 0);
    assert_int_equal(f->done_calls, 0); /* the callback comes later, from the loop */
}

static void test_cancel(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_hold);
    char *url = xasprintf("%s/slow", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .timeout_ms = 10000};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, &f->req), 0);
    uv_timer_start(&f->timer, on_cancel_timer, 50, 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 1);
    assert_int_equal(f->last_err, -ECANCELED);
    assert_int_equal(httpc_inflight(f->http), 0);
    xfree(url);
    fx_finish(f);
}

static void test_close_with_inflight(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_hold);
    char *url = xasprintf("%s/slow", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    /* Let both connect and reach the server. */
    run_until_requests(f, 2);
    httpc_close(f->http, on_client_closed, f);
    /* No new requests once closing; the callback is never called for them. */
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), -ESHUTDOWN);
    testsrv_stop(f->srv);
    uv_close((uv_handle_t *)&f->timer, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->done_calls, 2);
    assert_int_equal(f->last_err, -ECANCELED);
    assert_int_equal(f->close_calls, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(url);
    xfree(f);
}

static void test_connection_refused(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_echo);
    /* Port 1 on loopback: privileged and unused, so nothing of ours (or of a
     * test running in parallel) can be listening there. A freshly freed
     * ephemeral port could be taken by another test's server meanwhile. */
    int port = 1;
    char *url = xasprintf("http://127.0.0.1:%d/", port);
    struct httpc_opts o = {.url = url, .timeout_ms = 5000};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 1);
    assert_int_equal(f->last_err, -ECONNREFUSED);
    assert_int_equal(f->last_status, 0);
    assert_true(strlen(f->last_errmsg) > 0);
    xfree(url);

    /* Bad arguments fail synchronously and never call back. */
    struct httpc_opts bad = {.url = NULL};
    assert_int_equal(httpc_request(f->http, &bad, on_done, f, NULL), -EINVAL);
    struct httpc_opts ftp = {.url = "ftp://127.0.0.1/"};
    assert_int_equal(httpc_request(f->http, &ftp, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 2);
    assert_int_equal(f->last_err, -ENOTSUP);
    fx_finish(f);
}

static void on_chain(struct httpc_req *req, int err, const struct httpc_resp *resp, void *arg)
{
    struct fx *f = arg;
    on_done(req, err, resp, arg);
    assert_int_equal(err, 0);
    if (--f->remaining > 0) {
        char *url = xasprintf("%s/n%d", testsrv_url(f->srv), f->remaining);
        struct httpc_opts o = {.url = url, .no_reuse = f->no_reuse};
        assert_int_equal(httpc_request(f->http, &o, on_chain, f, NULL), 0);
        xfree(url);
    }
}

static void test_keepalive_reuse(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_echo);
    f->remaining = 5;
    char *url = xasprintf("%s/n5", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url};
    assert_int_equal(httpc_request(f->http, &o, on_chain, f, NULL), 0);
    run_until(f, 5);
    assert_int_equal(f->done_calls, 5);
    assert_int_equal(testsrv_requests(f->srv), 5);
    assert_int_equal(testsrv_accepts(f->srv), 1); /* one TCP connection for all five */
    xfree(url);
    fx_finish(f);
}

/* no_reuse: "Connection: close" on every request and a new connection for
 * each; the easy handle of a finished request is reset and reused (the
 * pool never holds more than its size); the receive buffer option is
 * clamped and does not change what is received; libcurl's own heap bytes
 * are counted. */
static void test_no_reuse_pool_buffers(void **state)
{
    (void)state;
    size_t base = httpc_memory_bytes();
    struct fx *f = fx_new(h_echo);
    assert_true(httpc_memory_bytes() > base); /* the multi handle */
    f->remaining = 5;
    f->no_reuse = true;
    char *url = xasprintf("%s/n5", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .no_reuse = true};
    assert_int_equal(httpc_request(f->http, &o, on_chain, f, NULL), 0);
    run_until(f, 5);
    assert_int_equal(testsrv_requests(f->srv), 5);
    assert_int_equal(f->close_hdrs, 5);
    assert_int_equal(testsrv_accepts(f->srv), 5); /* one connection per request */
    /* each request of the chain starts in its predecessor's callback, before
     * that one's handle is released: two handles, taking turns */
    assert_int_equal(httpc_pooled_handles(f->http), 2);
    xfree(url);

    /* eight at once: eight handles, four kept afterwards */
    url = xasprintf("%s/big", testsrv_url(f->srv));
    static const size_t bufs[] = {0, 1, 1000, 16384, 100000, 1 << 20, 3, 65536};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bufs); i++) {
        struct httpc_opts b = {.url = url, .recv_buffer = bufs[i]};
        assert_int_equal(httpc_request(f->http, &b, on_done, f, NULL), 0);
    }
    size_t busy = httpc_memory_bytes();
    run_until(f, 13);
    assert_int_equal(f->last_err, 0);
    assert_int_equal(strlen(f->last_body), sizeof(f->last_body) - 1); /* 99999 x, truncated */
    assert_int_equal(httpc_pooled_handles(f->http), HTTPC_DEFAULT_HANDLE_POOL);
    assert_true(busy > base);
    size_t pooled = httpc_memory_bytes();
    assert_int_equal(httpc_set_handle_pool(f->http, 0), 0);
    assert_int_equal(httpc_pooled_handles(f->http), 0);
    assert_true(httpc_memory_bytes() < pooled); /* the handles and their buffers are gone */
    xfree(url);
    fx_finish(f);
}

static void test_body_cap_and_headers(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_echo);
    char *url = xasprintf("%s/big", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .max_body = 10000};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->last_err, -EMSGSIZE);
    assert_string_equal(f->last_errmsg, "response body larger than the cap of 10000 bytes");
    xfree(url);

    /* Without Content-Length the cap is enforced as bytes arrive; the message
     * says so, not what curl says of the write we refused. */
    url = xasprintf("%s/bigchunked", testsrv_url(f->srv));
    o.url = url;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 2);
    assert_int_equal(f->last_err, -EMSGSIZE);
    assert_string_equal(f->last_errmsg, "response body larger than the cap of 10000 bytes");
    /* Under the cap it is fine. */
    o.max_body = 60000;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->last_err, 0);
    assert_int_equal(strlen(f->last_body), sizeof(f->last_body) - 1);
    xfree(url);

    url = xasprintf("%s/429", testsrv_url(f->srv));
    o.url = url;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->last_err, 0);
    assert_int_equal(f->last_status, 429);
    assert_int_equal(f->retry_after, 3000);
    xfree(url);
    fx_finish(f);
}

static void test_tls_errors(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_echo);
    /* TLS against a plain-HTTP server fails the handshake. */
    char *url = xasprintf("https://127.0.0.1:%d/", testsrv_port(f->srv));
    struct httpc_tls tls = {.ca_file = "/nonexistent/ca.pem"};
    struct httpc_opts o = {.url = url, .tls = &tls, .timeout_ms = 5000};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 1);
    assert_true(f->last_err == -EPROTO || f->last_err == -ECONNRESET);
    assert_true(f->last_errmsg[0] != '\0');
    tls = (struct httpc_tls){.insecure = true, .ca_blob = "garbage", .ca_blob_len = 7};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, f->done_calls + 1);
    assert_int_equal(f->done_calls, 2);
    assert_true(f->last_err == -EPROTO || f->last_err == -ECONNRESET);
    xfree(url);
    fx_finish(f);
}

static void test_errno_mapping(void **state)
{
    (void)state;
    assert_int_equal(httpc_curl_errno(0), 0);
    assert_int_equal(httpc_curl_errno(28), -ETIMEDOUT);   /* CURLE_OPERATION_TIMEDOUT */
    assert_int_equal(httpc_curl_errno(7), -ECONNREFUSED); /* CURLE_COULDNT_CONNECT */
    assert_int_equal(httpc_curl_errno(60), -EPROTO);      /* CURLE_PEER_FAILED_VERIFICATION */
    assert_int_equal(httpc_curl_errno(56), -ECONNRESET);  /* CURLE_RECV_ERROR */
}

/* A one-shot plain GET to an IP literal (no_reuse, no_compression) goes
 * through h1.c, not curl: no easy handle is ever taken. The same contract
 * holds there: headers, Content-Type while streaming, buffered non-2xx
 * bodies, the body cap, timeouts, cancel, close and refused connections. */
static void test_h1_one_shot(void **state)
{
    (void)state;
    static const char *const hdrs[] = {"X-Custom: v", "Content-Type:", NULL};
    struct fx *f = fx_new(h_echo);
    char *url = xasprintf("%s/hello?x=1", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .timeout_ms = 5000, .no_reuse = true,
                           .no_compression = true, .headers = hdrs};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    assert_int_equal(f->done_calls, 0); /* never from inside httpc_request */
    run_until(f, 1);
    assert_int_equal(f->last_err, 0);
    assert_int_equal(f->last_status, 200);
    assert_string_equal(f->last_body, "GET /hello?x=1|||v|"); /* "Content-Type:" left out */
    assert_string_equal(f->last_hdr, "yes");
    assert_string_equal(f->last_ctype, "text/plain; charset=utf-8");
    assert_int_equal(f->close_hdrs, 1);
    assert_int_equal(httpc_pooled_handles(f->http), 0); /* curl was not involved */
    xfree(url);

    /* the body cap, without Content-Length */
    url = xasprintf("%s/bigchunked", testsrv_url(f->srv));
    o = (struct httpc_opts){.url = url, .no_reuse = true, .no_compression = true,
                            .max_body = 10000};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 2);
    assert_int_equal(f->last_err, -EMSGSIZE);
    assert_string_equal(f->last_errmsg, "response body larger than the cap of 10000 bytes");
    o.max_body = 60000;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 3);
    assert_int_equal(f->last_err, 0);
    assert_int_equal(strlen(f->last_body), sizeof(f->last_body) - 1);
    xfree(url);

    /* refused: a port nothing listens on */
    o = (struct httpc_opts){.url = "http://127.0.0.1:1/metrics", .no_reuse = true,
                            .no_compression = true, .timeout_ms = 5000};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 4);
    assert_int_equal(f->last_err, -ECONNREFUSED);
    assert_int_equal(f->last_status, 0);
    assert_true(f->last_errmsg[0] != '\0');
    assert_int_equal(httpc_pooled_handles(f->http), 0);
    fx_finish(f);

    /* streaming, and a non-2xx answer buffered */
    f = fx_new(h_stream);
    url = xasprintf("%s/watch", testsrv_url(f->srv));
    o = (struct httpc_opts){.url = url, .on_data = on_data, .no_reuse = true,
                            .no_compression = true, .recv_buffer = 1};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 1);
    assert_int_equal(f->last_err, 0);
    assert_string_equal(f->streamed.data, "chunk-0\nchunk-1\nchunk-2\nchunk-3\nchunk-4\n");
    assert_true(f->chunks >= 2);
    assert_string_equal(f->stream_ctype, "application/json");
    assert_int_equal(f->ctype_mismatch, 0);
    assert_true(f->done_ctype_null);
    xfree(url);
    url = xasprintf("%s/missing", testsrv_url(f->srv));
    o.url = url;
    f->chunks = 0;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 2);
    assert_int_equal(f->chunks, 0);
    assert_int_equal(f->last_status, 404);
    assert_string_equal(f->last_body, "{\"code\":404}");
    xfree(url);
    /* a data callback's error, and a cancel from inside one */
    url = xasprintf("%s/forever", testsrv_url(f->srv));
    o.url = url;
    o.on_data = data_abort;
    f->chunks = 0;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 3);
    assert_int_equal(f->last_err, -EBADMSG);
    assert_non_null(strstr(f->last_errmsg, "data callback"));
    o.on_data = data_cancel_after_3;
    f->chunks = 0;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 4);
    assert_int_equal(f->last_err, -ECANCELED);
    assert_string_equal(f->last_errmsg, "request cancelled");
    assert_int_equal(f->chunks, 3);
    uv_timer_stop(&f->timer);
    assert_int_equal(httpc_pooled_handles(f->http), 0);
    xfree(url);
    fx_finish(f);

    /* timeout, cancel, and close with requests in flight */
    f = fx_new(h_hold);
    url = xasprintf("%s/slow", testsrv_url(f->srv));
    o = (struct httpc_opts){.url = url, .timeout_ms = 200, .no_reuse = true,
                            .no_compression = true};
    uint64_t t0 = uv_hrtime();
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 1);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    assert_int_equal(f->last_err, -ETIMEDOUT);
    assert_non_null(strstr(f->last_errmsg, "200 milliseconds"));
    assert_true(ms >= 150 && ms < 3000);
    o.timeout_ms = 10000;
    f->done_calls = 0; /* on_cancel_timer checks that none came yet */
    assert_int_equal(httpc_request(f->http, &o, on_done, f, &f->req), 0);
    uv_timer_start(&f->timer, on_cancel_timer, 50, 0);
    run_until(f, 1);
    assert_int_equal(f->last_err, -ECANCELED);
    assert_int_equal(httpc_inflight(f->http), 0);
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until_requests(f, 4);
    httpc_close(f->http, on_client_closed, f);
    testsrv_stop(f->srv);
    uv_close((uv_handle_t *)&f->timer, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0); /* every socket closed */
    assert_int_equal(f->done_calls, 3);
    assert_int_equal(f->last_err, -ECANCELED);
    assert_int_equal(f->close_calls, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(url);
    xfree(f);
}

/* A proxy that answers every request itself (and refuses CONNECT). */
static void h_proxy(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    (void)arg;
    if (strcmp(r->method, "CONNECT") == 0)
        testsrv_respond(c, 404, NULL, "", 0, NULL);
    else
        testsrv_respond(c, 200, "text/plain", "via proxy", 9, NULL);
}

static const char *const proxy_env[] = {"http_proxy", "https_proxy", "HTTPS_PROXY", "no_proxy",
                                        "NO_PROXY"};

/* no_proxy: the request goes to its host even with http_proxy/https_proxy
 * in the environment (as a pod scrape must), over curl for http and https
 * alike; without it the environment's proxy carries the request. */
static void test_no_proxy(void **state)
{
    (void)state;
    char *saved[UTIL_ARRAY_LEN(proxy_env)];
    for (size_t i = 0; i < UTIL_ARRAY_LEN(proxy_env); i++) {
        const char *v = getenv(proxy_env[i]);
        saved[i] = v ? xstrdup(v) : NULL;
        unsetenv(proxy_env[i]);
    }
    struct fx *f = fx_new(h_echo);
    struct testsrv *proxy = testsrv_start(&f->loop, h_proxy, f);
    setenv("http_proxy", testsrv_url(proxy), 1);
    setenv("https_proxy", testsrv_url(proxy), 1);
    char *url = xasprintf("%s/direct", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .timeout_ms = 5000};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 1);
    assert_int_equal(f->last_err, 0);
    assert_string_equal(f->last_body, "via proxy"); /* the environment is honoured... */
    o.no_proxy = true;
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 2);
    assert_int_equal(f->last_err, 0);
    assert_string_equal(f->last_body, "GET /direct||||"); /* ...unless told otherwise */
    /* h1.c never takes a proxy */
    o = (struct httpc_opts){.url = url, .timeout_ms = 5000, .no_reuse = true,
                            .no_compression = true, .no_proxy = true};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 3);
    assert_string_equal(f->last_body, "GET /direct||||");
    assert_int_equal(testsrv_requests(proxy), 1);
    xfree(url);

    /* https: the handshake with the plain server fails, but on its socket */
    url = xasprintf("https://127.0.0.1:%d/", testsrv_port(f->srv));
    static const struct httpc_tls tls = {.insecure = true};
    o = (struct httpc_opts){.url = url, .timeout_ms = 5000, .tls = &tls, .no_proxy = true};
    unsigned direct = testsrv_accepts(f->srv), via = testsrv_accepts(proxy);
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 4);
    assert_true(f->last_err == -EPROTO || f->last_err == -ECONNRESET);
    assert_int_equal(testsrv_accepts(f->srv), direct + 1);
    assert_int_equal(testsrv_accepts(proxy), via);
    o.no_proxy = false; /* the environment's https_proxy gets the CONNECT */
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), 0);
    run_until(f, 5);
    assert_int_not_equal(f->last_err, 0);
    assert_int_equal(testsrv_accepts(f->srv), direct + 1);
    assert_int_equal(testsrv_accepts(proxy), via + 1);
    /* a proxy and no proxy at once is a contradiction */
    o = (struct httpc_opts){.url = url, .proxy = "http://127.0.0.1:1", .no_proxy = true};
    assert_int_equal(httpc_request(f->http, &o, on_done, f, NULL), -EINVAL);
    xfree(url);
    testsrv_stop(proxy);
    fx_finish(f);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(proxy_env); i++) {
        if (saved[i])
            setenv(proxy_env[i], saved[i], 1);
        else
            unsetenv(proxy_env[i]);
        xfree(saved[i]);
    }
}

/* testsrv_run_until() returns when a timer that is already due when it starts
 * makes the condition true: uv_run(UV_RUN_ONCE) would run that timer and then
 * sleep in the poll, which the listening server keeps waiting forever. */
static void on_due(uv_timer_t *t)
{
    ((struct fx *)t->data)->done_calls++;
}

static void test_run_until_due_timer(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_echo);
    uv_update_time(&f->loop);
    uv_timer_start(&f->timer, on_due, 1, 0);
    uint64_t t0 = uv_hrtime();
    while (uv_hrtime() - t0 < 5000000) /* let the loop's clock fall 5 ms behind */
        ;
    run_until(f, 1);
    assert_int_equal(f->done_calls, 1);
    /* A condition that never holds ends at the time limit. */
    t0 = uv_hrtime();
    assert_false(testsrv_run_until_count(&f->loop, &f->done_calls, 2, 50));
    assert_true(uv_hrtime() - t0 >= 45000000);
    fx_finish(f);
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_until_due_timer),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_post_and_methods),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_stream_cancel_from_callback),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_close_with_inflight),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_keepalive_reuse),
        cmocka_unit_test(test_no_reuse_pool_buffers),
        cmocka_unit_test(test_body_cap_and_headers),
        cmocka_unit_test(test_tls_errors),
        cmocka_unit_test(test_errno_mapping),
        cmocka_unit_test(test_h1_one_shot),
        cmocka_unit_test(test_no_proxy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

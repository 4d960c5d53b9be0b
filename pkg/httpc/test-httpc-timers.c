/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for httpc's timers against testsrv on the same loop: a request
 * queued behind the per-host connection cap still times out (libcurl 7.88
 * does not time out a transfer without a connection), so does one with only
 * a connect timeout (a watch) while one that connected is never cut, nor is
 * one curl sent again on a new connection in time (one whose new connect
 * queues is), h1.c's connect timeout bounds only the connect and defaults to
 * curl's 300 s, and deadlines count from the real time, not from a loop
 * clock left behind by a slow callback.
 * Each test counts callbacks and asserts the loop closes cleanly. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "httpc/httpc.h"
#include "httpc/testsrv.h"
#include "util/util.h"

struct fx;

/* One request's outcome. */
struct slot {
    struct fx *f;
    struct httpc_req *req;
    int calls;
    int err;
    long status;
    uint64_t ms; /* from fx.t0 to the callback, real time */
    size_t streamed; /* bytes a streaming request got */
    char body[256];
    char errmsg[256];
};

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    struct testsrv *srv;
    uv_timer_t timer;
    struct testsrv_conn *held;
    struct testsrv_conn *primed;  /* h_drop's kept-alive connection... */
    struct testsrv_conn *dropped; /* ...which a request came on, for the test to close */
    uint64_t wait_ms;             /* after_ms() */
    uint64_t t0;       /* uv_hrtime() at the start of the case */
    int done_calls;
    int close_calls;
    struct httpc_opts late_opts; /* what on_late_start requests... */
    struct slot *late_slot;      /* ...and where its outcome goes */
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

static void on_client_closed(void *arg)
{
    ((struct fx *)arg)->close_calls++;
}

static void fx_finish(struct fx *f)
{
    httpc_close(f->http, on_client_closed, f);
    testsrv_stop(f->srv);
    uv_close((uv_handle_t *)&f->timer, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->close_calls, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0); /* every timer of every request closed */
    xfree(f);
}

static void on_done(struct httpc_req *req, int err, const struct httpc_resp *resp, void *arg)
{
    struct slot *s = arg;
    (void)req;
    s->calls++;
    s->err = err;
    s->status = resp->status;
    s->ms = (uv_hrtime() - s->f->t0) / 1000000;
    snprintf(s->body, sizeof(s->body), "%.*s", (int)resp->body_len, resp->body);
    snprintf(s->errmsg, sizeof(s->errmsg), "%s", resp->errmsg);
    s->req = NULL;
    s->f->done_calls++;
}

static void start(struct fx *f, const struct httpc_opts *o, struct slot *s)
{
    *s = (struct slot){.f = f};
    assert_int_equal(httpc_request(f->http, o, on_done, s, &s->req), 0);
}

static void h_hold(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    (void)r;
    ((struct fx *)arg)->held = c; /* never answers */
}

static void h_echo(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    (void)arg;
    testsrv_respond(c, 200, "text/plain", r->target, strlen(r->target), NULL);
}

static void on_answer_late(uv_timer_t *t)
{
    struct fx *f = t->data;
    testsrv_respond(f->held, 200, "text/plain", "late", 4, NULL);
}

/* Answers 300 ms after the request arrived. */
static void h_late(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    struct fx *f = arg;
    (void)r;
    f->held = c;
    uv_timer_start(&f->timer, on_answer_late, 300, 0);
}

/* ---- a request queued for a connection ---------------------------------- */

/* With one connection per host, a request that holds it (a stream without a
 * timeout) keeps the next one queued inside curl, which on libcurl 7.88
 * never times it out: httpc's own timer ends it at timeout + 1 s. */
static void test_queued_request_times_out(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_hold);
    assert_int_equal(httpc_set_max_host_connections(f->http, 1), 0);
    char *url = xasprintf("%s/held", testsrv_url(f->srv));
    struct slot a, b;
    struct httpc_opts oa = {.url = url};
    struct httpc_opts ob = {.url = url, .timeout_ms = 500};
    f->t0 = uv_hrtime();
    start(f, &oa, &a);
    start(f, &ob, &b);
    assert_true(testsrv_run_until_count(&f->loop, &b.calls, 1, 4000));
    assert_int_equal(b.err, -ETIMEDOUT);
    assert_non_null(strstr(b.errmsg, "500 milliseconds"));
    assert_non_null(strstr(b.errmsg, "waiting for a connection"));
    assert_true(b.ms >= 450 && b.ms < 2500);
    assert_int_equal(a.calls, 0); /* still holding the connection */
    assert_int_equal(testsrv_accepts(f->srv), 1);
    assert_int_equal(httpc_inflight(f->http), 1);
    assert_int_equal(httpc_cancel(a.req), 0);
    assert_true(testsrv_run_until_count(&f->loop, &a.calls, 1, 4000));
    assert_int_equal(a.err, -ECANCELED);

    /* Two with 500 ms, one connected and one queued: both end in time. The
     * connected one keeps curl's own message. */
    oa.timeout_ms = 500;
    f->t0 = uv_hrtime();
    start(f, &oa, &a);
    start(f, &ob, &b);
    assert_true(testsrv_run_until_count(&f->loop, &f->done_calls, 4, 4000));
    assert_int_equal(a.err, -ETIMEDOUT);
    assert_int_equal(b.err, -ETIMEDOUT);
    assert_true(a.ms >= 450 && a.ms < 2500);
    assert_true(b.ms >= 450 && b.ms < 2500);
    assert_null(strstr(a.errmsg, "waiting for a connection"));

    /* A queued request cancelled, and others closed with the client: their
     * timers go with them (fx_finish checks that the loop closes). */
    start(f, &(struct httpc_opts){.url = url}, &a);
    start(f, &ob, &b);
    struct slot c;
    start(f, &(struct httpc_opts){.url = url, .timeout_ms = 60000}, &c);
    assert_int_equal(httpc_cancel(b.req), 0);
    assert_true(testsrv_run_until_count(&f->loop, &b.calls, 1, 4000));
    assert_int_equal(b.err, -ECANCELED);
    assert_string_equal(b.errmsg, "request cancelled");
    httpc_close(f->http, on_client_closed, f);
    testsrv_stop(f->srv);
    uv_close((uv_handle_t *)&f->timer, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(a.err, -ECANCELED);
    assert_int_equal(c.err, -ECANCELED);
    assert_int_equal(f->close_calls, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(f);
    xfree(url);
}

/* A stream's chunk: counts the bytes, keeps the stream going. */
static int on_stream_data(struct httpc_req *req, long status, const char *data, size_t len,
                          void *arg)
{
    struct slot *s = arg;
    (void)req;
    (void)data;
    s->status = status;
    s->streamed += len;
    return 0;
}

/* /watch: a stream that sends one event and stays open; /slow: a whole
 * answer 1.8 s after the request; anything else: never answered. */
static void h_watch(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    struct fx *f = arg;
    if (strcmp(r->target, "/watch") == 0) {
        testsrv_stream_begin(c, 200, "application/json");
        testsrv_stream_chunk(c, "{\"type\":\"ADDED\"}\n", 17);
    } else if (strcmp(r->target, "/slow") == 0) {
        f->held = c;
        uv_timer_start(&f->timer, on_answer_late, 1800, 0);
    } else {
        f->held = c;
    }
}

static bool after_2500_ms(void *arg)
{
    return (uv_hrtime() - ((struct fx *)arg)->t0) / 1000000 >= 2500;
}

/* A watch has a connect timeout and no total one. Queued behind the per-host
 * cap (libcurl 7.88 never times out a transfer without a connection, its
 * connect timeout included), it ends at connect timeout + 1 s; the watch
 * that holds the connection, and a request that connected in time and waits
 * longer than that for its answer, go on. */
static void test_queued_watch_connect_times_out(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_watch);
    assert_int_equal(httpc_set_max_host_connections(f->http, 1), 0);
    char *watch = xasprintf("%s/watch", testsrv_url(f->srv));
    char *url_held = xasprintf("%s/held", testsrv_url(f->srv));
    char *slow = xasprintf("%s/slow", testsrv_url(f->srv));
    struct slot a, b;
    f->t0 = uv_hrtime();
    start(f, &(struct httpc_opts){.url = watch, .connect_timeout_ms = 300,
                                  .on_data = on_stream_data}, &a);
    start(f, &(struct httpc_opts){.url = url_held, .connect_timeout_ms = 300}, &b);
    assert_true(testsrv_run_until_count(&f->loop, &b.calls, 1, 4000));
    if (b.err != -ETIMEDOUT)
        print_error("queued: %d %s after %llu ms\n", b.err, b.errmsg, (unsigned long long)b.ms);
    assert_int_equal(b.err, -ETIMEDOUT);
    assert_non_null(strstr(b.errmsg, "300 milliseconds"));
    assert_non_null(strstr(b.errmsg, "waiting for a connection"));
    assert_true(b.ms >= 250 && b.ms < 2500);
    assert_int_equal(testsrv_accepts(f->srv), 1);
    assert_int_equal(testsrv_requests(f->srv), 1); /* b never reached the server */
    /* the watch streams on, well past its connect timeout + 1 s */
    assert_true(testsrv_run_until(&f->loop, after_2500_ms, f, 4000));
    assert_int_equal(a.calls, 0);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.streamed, 17);
    assert_int_equal(httpc_cancel(a.req), 0);
    assert_true(testsrv_run_until_count(&f->loop, &a.calls, 1, 4000));
    assert_int_equal(a.err, -ECANCELED);

    /* connected in time: an answer 1.8 s later still arrives */
    f->t0 = uv_hrtime();
    start(f, &(struct httpc_opts){.url = slow, .connect_timeout_ms = 300}, &b);
    assert_true(testsrv_run_until_count(&f->loop, &b.calls, 1, 4000));
    assert_int_equal(b.err, 0);
    assert_string_equal(b.body, "late");
    assert_true(b.ms >= 1700);
    xfree(watch);
    xfree(url_held);
    xfree(slow);
    fx_finish(f);
}

/* A request that completes, one that fails and one that times out on its
 * connection close their timers too. */
static void test_request_timer_closed(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_echo);
    char *url = xasprintf("%s/ok", testsrv_url(f->srv));
    struct slot a, b;
    start(f, &(struct httpc_opts){.url = url, .timeout_ms = 5000}, &a);
    start(f, &(struct httpc_opts){.url = "http://127.0.0.1:1/", .timeout_ms = 5000}, &b);
    assert_true(testsrv_run_until_count(&f->loop, &f->done_calls, 2, 4000));
    assert_int_equal(a.err, 0);
    assert_string_equal(a.body, "/ok");
    assert_int_equal(b.err, -ECONNREFUSED);
    xfree(url);
    fx_finish(f);
}

/* ---- h1.c's connect timeout --------------------------------------------- */

static void find_long_timer(uv_handle_t *h, void *arg)
{
    uint64_t *longest = arg;
    if (h->type == UV_TIMER && uv_is_active(h) && !uv_is_closing(h)) {
        uint64_t due = uv_timer_get_due_in((uv_timer_t *)h);
        if (due > *longest)
            *longest = due;
    }
}

static uint64_t longest_timer(uv_loop_t *loop)
{
    uint64_t longest = 0;
    uv_walk(loop, find_long_timer, &longest);
    return longest;
}

static bool held(void *arg)
{
    return ((struct fx *)arg)->held != NULL;
}

/* A connect timeout without a whole-request one bounds the connect only: an
 * answer slower than it still arrives. Without either, the connect has
 * curl's 300 s bound and the request none once connected. */
static void test_h1_connect_timeout(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_late);
    char *url = xasprintf("%s/slow", testsrv_url(f->srv));
    struct httpc_opts o = {.url = url, .no_reuse = true, .no_compression = true,
                           .connect_timeout_ms = 100};
    struct slot a;
    f->t0 = uv_hrtime();
    start(f, &o, &a);
    assert_true(testsrv_run_until_count(&f->loop, &a.calls, 1, 4000));
    assert_int_equal(a.err, 0);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "late");
    assert_true(a.ms >= 250);
    assert_int_equal(httpc_pooled_handles(f->http), 0); /* it went through h1.c */
    xfree(url);
    fx_finish(f);

    f = fx_new(h_hold);
    url = xasprintf("%s/held", testsrv_url(f->srv));
    o = (struct httpc_opts){.url = url, .no_reuse = true, .no_compression = true};
    start(f, &o, &a);
    uint64_t due = longest_timer(&f->loop);
    assert_true(due > 290000 && due <= 300000); /* the connect's bound */
    assert_true(testsrv_run_until(&f->loop, held, f, 4000));
    assert_true(longest_timer(&f->loop) < 1000); /* connected: no bound left */
    assert_int_equal(a.calls, 0);
    assert_int_equal(httpc_cancel(a.req), 0);
    assert_true(testsrv_run_until_count(&f->loop, &a.calls, 1, 4000));
    assert_int_equal(a.err, -ECANCELED);
    /* a connect timeout longer than the whole request's is cut to it */
    o.timeout_ms = 400;
    o.connect_timeout_ms = 100000;
    start(f, &o, &a);
    due = longest_timer(&f->loop);
    assert_true(due > 300 && due <= 400);
    assert_true(testsrv_run_until_count(&f->loop, &a.calls, 1, 4000));
    assert_int_equal(a.err, -ETIMEDOUT);
    assert_non_null(strstr(a.errmsg, "400 milliseconds"));
    xfree(url);
    fx_finish(f);
}

/* Without either timeout the connect phase has curl's 300 s bound, queued
 * or not: a request waiting for a connection has a timer due then (+ 1 s). */
static void test_queued_default_connect_bound(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_watch);
    assert_int_equal(httpc_set_max_host_connections(f->http, 1), 0);
    char *url = xasprintf("%s/held", testsrv_url(f->srv));
    struct slot a, b;
    start(f, &(struct httpc_opts){.url = url}, &a);
    assert_true(testsrv_run_until(&f->loop, held, f, 4000));
    start(f, &(struct httpc_opts){.url = url}, &b);
    uint64_t due = longest_timer(&f->loop);
    assert_true(due > 300000 && due <= 301000);
    assert_int_equal(a.calls + b.calls, 0);
    xfree(url);
    fx_finish(f);
    assert_int_equal(a.err, -ECANCELED);
    assert_int_equal(b.err, -ECANCELED);
}

/* ---- a watch sent again on a new connection ---------------------------- */

/* /prime: a whole answer on a kept-alive connection; /watch on that
 * connection: held, for the test to close (the kept-alive connection dying
 * under a request sent on it), on any other a stream; anything else: held. */
static void h_drop(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    struct fx *f = arg;
    if (strcmp(r->target, "/prime") == 0) {
        f->primed = c;
        testsrv_respond(c, 200, "text/plain", "ok", 2, NULL);
    } else if (strcmp(r->target, "/watch") == 0 && c == f->primed) {
        f->dropped = c;
    } else if (strcmp(r->target, "/watch") == 0) {
        testsrv_stream_begin(c, 200, "application/json");
        testsrv_stream_chunk(c, "{\"type\":\"ADDED\"}\n", 17);
    } else {
        f->held = c;
    }
}

static bool dropped(void *arg)
{
    return ((struct fx *)arg)->dropped != NULL;
}

static bool after_ms(void *arg)
{
    struct fx *f = arg;
    return (uv_hrtime() - f->t0) / 1000000 >= f->wait_ms;
}

/* A watch (a connect timeout only) sent on a kept-alive connection that dies
 * before any answer: curl sends it again on a new connection, a connect phase
 * again. Connected again in time, it streams on; queued behind the per-host
 * cap instead, it ends at its connect timeout + 1 s from the retry, where
 * libcurl 7.88 kept it queued (the backstop had stopped at the first
 * connection). On HTTP/1.1 the retry takes the place its dead connection
 * left (on HTTP/2 that one counts until its other streams end), so the test
 * lowers the cap to one while another request holds a connection. */
static void test_retried_watch_connect_times_out(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_drop);
    char *prime = xasprintf("%s/prime", testsrv_url(f->srv));
    char *watch = xasprintf("%s/watch", testsrv_url(f->srv));
    char *url_held = xasprintf("%s/held", testsrv_url(f->srv));
    for (int queue = 0; queue < 2; queue++) {
        struct slot p, a, b;
        f->primed = f->dropped = f->held = NULL;
        assert_int_equal(httpc_set_max_host_connections(f->http, 16), 0);
        start(f, &(struct httpc_opts){.url = prime, .timeout_ms = 2000}, &p);
        assert_true(testsrv_run_until_count(&f->loop, &p.calls, 1, 4000));
        assert_int_equal(p.err, 0);
        unsigned conns = testsrv_accepts(f->srv);
        /* the watch reuses the idle connection, the held request opens another */
        start(f, &(struct httpc_opts){.url = watch, .connect_timeout_ms = 300,
                                      .on_data = on_stream_data}, &a);
        assert_true(testsrv_run_until(&f->loop, dropped, f, 4000));
        start(f, &(struct httpc_opts){.url = url_held, .connect_timeout_ms = 300}, &b);
        assert_true(testsrv_run_until(&f->loop, held, f, 4000));
        assert_int_equal(testsrv_accepts(f->srv), conns + 1);
        if (queue)
            assert_int_equal(httpc_set_max_host_connections(f->http, 1), 0);
        f->t0 = uv_hrtime();
        testsrv_conn_close(f->dropped);
        f->wait_ms = 2600;
        if (!queue) {
            /* sent again on a new connection in time: streams on past 300 ms + 1 s */
            assert_true(testsrv_run_until(&f->loop, after_ms, f, 5000));
            assert_int_equal(a.calls, 0);
            assert_int_equal(a.status, 200);
            assert_int_equal(a.streamed, 17);
            assert_int_equal(testsrv_accepts(f->srv), conns + 2);
        } else {
            testsrv_run_until_count(&f->loop, &a.calls, 1, 2600);
            if (a.calls != 1 || a.err != -ETIMEDOUT)
                fail_msg("the retried watch: %d calls, %d %s after %llu ms", a.calls, a.err,
                         a.errmsg, (unsigned long long)a.ms);
            assert_non_null(strstr(a.errmsg, "waiting for a connection"));
            assert_true(a.ms >= 1250 && a.ms < 2500); /* 300 ms + 1 s from the retry */
            assert_int_equal(a.streamed, 0);
        }
        assert_int_equal(b.calls, 0); /* the held request was never cut */
        if (a.req)
            assert_int_equal(httpc_cancel(a.req), 0);
        assert_int_equal(httpc_cancel(b.req), 0);
        assert_true(testsrv_run_until_count(&f->loop, &f->done_calls, 3 * (queue + 1), 4000));
    }
    xfree(prime);
    xfree(watch);
    xfree(url_held);
    fx_finish(f);
}

/* ---- deadlines from the real time --------------------------------------- */

/* A callback that kept the loop busy, then starts a request: the loop's
 * cached clock is behind by the time it took. */
static void on_late_start(uv_timer_t *t)
{
    struct fx *f = t->data;
    uv_sleep(1200);
    f->t0 = uv_hrtime();
    start(f, &f->late_opts, f->late_slot);
}

/* A 200 ms timeout started after the loop was blocked for 1.2 s must not
 * fire at once: neither h1.c's nor httpc's own timer for queued requests
 * (timeout + 1 s) may count from the stale loop time. */
static void test_deadline_after_busy_callback(void **state)
{
    (void)state;
    struct fx *f = fx_new(h_echo);
    char *url = xasprintf("%s/fast", testsrv_url(f->srv));
    struct slot a;
    const struct httpc_opts via[] = {
        {.url = url, .timeout_ms = 200, .no_reuse = true, .no_compression = true}, /* h1.c */
        {.url = url, .timeout_ms = 200},                                           /* curl */
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(via); i++) {
        f->late_opts = via[i];
        f->late_slot = &a;
        a = (struct slot){.f = f};
        uv_timer_start(&f->timer, on_late_start, 1, 0);
        assert_true(testsrv_run_until_count(&f->loop, &a.calls, 1, 6000));
        if (a.err != 0)
            print_error("case %zu: %d %s after %llu ms\n", i, a.err, a.errmsg,
                        (unsigned long long)a.ms);
        assert_int_equal(a.err, 0);
        assert_string_equal(a.body, "/fast");
    }
    xfree(url);
    fx_finish(f);
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queued_request_times_out),
        cmocka_unit_test(test_queued_watch_connect_times_out),
        cmocka_unit_test(test_queued_default_connect_bound),
        cmocka_unit_test(test_retried_watch_connect_times_out),
        cmocka_unit_test(test_request_timer_closed),
        cmocka_unit_test(test_h1_connect_timeout),
        cmocka_unit_test(test_deadline_after_busy_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

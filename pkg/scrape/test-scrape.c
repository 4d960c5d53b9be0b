/* SPDX-License-Identifier: Apache-2.0 */
/* Async tests of the scraper against fake pods on loopback (127.0.0.N), all
 * on one loop: real requests through httpc, counters advancing in loop time,
 * the scraper's clock injected as the same loop time. Each test runs the
 * loop for a bounded time, checks scrape_get and the stats, then closes
 * everything, counts the close callbacks and asserts uv_loop_close == 0. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "httpc/httpc.h"
#include "httpc/testsrv.h"
#include "scrape/scrape.h"
#include "test-fakepod.h"
#include "util/util.h"

#define MAXPODS 24

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    struct scrape *s;
    struct fakepod *pods[MAXPODS];
    int npods;
    uv_timer_t timer;
    bool fired;
    int closes;
    FILE *log;
};

static int64_t loop_clock(void *arg)
{
    return (int64_t)uv_now(arg);
}

static struct fx *fx_new_limit(int64_t interval, int64_t timeout, size_t max_bytes,
                               size_t max_inflight)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpc_new(&f->loop, &f->http), 0);
    struct scrape_config c;
    scrape_config_init(&c);
    c.interval_ms = interval;
    c.timeout_ms = timeout;
    c.rate_window_ms = 10 * interval;
    if (max_bytes)
        c.max_bytes = max_bytes;
    c.clock = loop_clock;
    c.clock_arg = &f->loop;
    c.max_inflight = max_inflight;
    assert_int_equal(scrape_new(&f->loop, f->http, &c, &f->s), 0);
    uv_timer_init(&f->loop, &f->timer);
    f->timer.data = f;
    f->log = tmpfile();
    assert_non_null(f->log);
    util_log_set_stream(f->log);
    return f;
}

static struct fx *fx_new(int64_t interval, int64_t timeout, size_t max_bytes)
{
    return fx_new_limit(interval, timeout, max_bytes, 0);
}

static struct fakepod *fx_pod(struct fx *f, enum fakepod_mode mode, double rate, double running,
                              double waiting)
{
    assert_true(f->npods < MAXPODS);
    struct fakepod *p = fakepod_start(&f->loop, 10 + f->npods, mode, rate, running, waiting);
    f->pods[f->npods++] = p;
    return p;
}

static void on_fire(uv_timer_t *t)
{
    ((struct fx *)t->data)->fired = true;
}

/* Run the loop for ms of loop time (the pods' keep-alive connections keep
 * it alive, so UV_RUN_DEFAULT would not return). */
static void run_for(struct fx *f, uint64_t ms)
{
    f->fired = false;
    uv_timer_start(&f->timer, on_fire, ms, 0);
    assert_true(testsrv_run_until_flag(&f->loop, &f->fired, ms + 10000));
}

static void on_closed(void *arg)
{
    ((struct fx *)arg)->closes++;
}

static void fx_finish(struct fx *f)
{
    util_log_set_stream(NULL);
    fclose(f->log);
    scrape_close(f->s, on_closed, f);
    httpc_close(f->http, on_closed, f);
    for (int i = 0; i < f->npods; i++)
        fakepod_stop(f->pods[i]);
    uv_close((uv_handle_t *)&f->timer, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closes, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(f);
}

/* Declare pods[0..n) of workload name with names name-0, name-1, ... */
static void targets_at(struct fx *f, const char *name, enum scrape_profile prof,
                       const char *path, struct fakepod **pods, int n, const bool *ready)
{
    struct scrape_spec spec;
    scrape_spec_init(&spec, prof);
    if (path)
        snprintf(spec.path, sizeof(spec.path), "%s", path);
    struct scrape_pod sp[MAXPODS];
    char names[MAXPODS][64];
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "%s-%s", name, fakepod_ip(pods[i]));
        sp[i] = (struct scrape_pod){
            .name = names[i],
            .ip = fakepod_ip(pods[i]),
            .port = fakepod_port(pods[i]),
            .ready = ready ? ready[i] : true,
            .gpus = 2,
        };
    }
    scrape_set_targets(f->s, "ns1", name, &spec, sp, (size_t)n);
}

/* Targets at the profile's default path. */
static void targets(struct fx *f, const char *name, enum scrape_profile prof,
                    struct fakepod **pods, int n, const bool *ready)
{
    targets_at(f, name, prof, NULL, pods, n, ready);
}

static struct scrape_result get(struct fx *f, const char *name)
{
    struct scrape_result r;
    assert_int_equal(scrape_get(f->s, "ns1", name, (int64_t)uv_now(&f->loop), &r), 0);
    return r;
}

static void assert_near(double got, double want, double rel)
{
    if (fabs(got - want) > rel * fabs(want))
        fail_msg("got %g, want %g (+-%g%%)", got, want, rel * 100);
}

static char *read_log(struct fx *f)
{
    fflush(f->log);
    long n = ftell(f->log);
    char *s = xcalloc(1, (size_t)n + 1);
    rewind(f->log);
    assert_int_equal(fread(s, 1, (size_t)n, f->log), (size_t)n);
    return s;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* The lines of hay that hold both a and b. */
static int count_lines(const char *hay, const char *a, const char *b)
{
    int n = 0;
    for (const char *p = hay; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *line = xstrndup(p, len);
        n += strstr(line, a) && strstr(line, b);
        xfree(line);
        p += len + (end != NULL);
    }
    return n;
}

/* vLLM pods: the rate is the sum of the counters' rates, gauges are summed,
 * p99 comes from the summed bucket increases, and each scrape of a
 * plain-HTTP pod uses its own connection (asking the pod to close it), so no
 * idle connection per pod is kept between scrapes. */
static void test_vllm_pods(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 300, 0);
    for (int i = 0; i < 4; i++)
        fx_pod(f, FAKEPOD_VLLM, 10.0 * (i + 1), i + 1, 2 * i);
    targets(f, "chat", SCRAPE_VLLM, f->pods, 4, NULL);
    run_for(f, 1000);

    struct scrape_result r = get(f, "chat");
    assert_true(r.valid);
    assert_int_equal(r.pods_ready, 4);
    assert_int_equal(r.pods_counted, 4);
    assert_int_equal(r.pods_failed, 0);
    assert_int_equal(r.pods_stale, 0);
    assert_near(r.request_rate, 100, 0.05);
    assert_near(r.inflight, 10, 1e-9);
    assert_near(r.queued, 12, 1e-9);
    assert_near(r.p99_ms, fakepod_p99_ms(), 0.01);
    assert_near(r.gpus_ready, 8, 1e-9);
    assert_true(r.time_ms > 0 && r.time_ms <= (int64_t)uv_now(&f->loop));

    struct scrape_stats st;
    scrape_stats(f->s, &st);
    assert_true(st.scrapes_ok >= 4 * 8);
    assert_int_equal(st.scrapes_failed, 0);
    assert_int_equal(st.late, 0);
    assert_true(st.bytes > 4 * 8 * 1000);
    assert_int_equal(st.pods, 4);
    assert_int_equal(st.scheduled, 4);
    for (int i = 0; i < 4; i++) {
        unsigned req = fakepod_requests(f->pods[i]);
        assert_true(req >= 8);
        assert_int_equal(fakepod_close_requests(f->pods[i]), req);
        assert_true(fakepod_accepts(f->pods[i]) >= req); /* a new connection per scrape */
    }
    assert_true(st.inflight_peak >= 1 && st.inflight_peak <= st.inflight_limit);
    assert_true(st.memory_bytes > 4 * sizeof(struct scrape_pod));
    fx_finish(f);
}

/* Triton, TGI, SGLang, NIM and TEI profiles read their own names (NIM at its
 * own path). */
static void test_triton_tgi(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 300, 0);
    struct fakepod *tr[2] = {fx_pod(f, FAKEPOD_TRITON, 5, 0, 3),
                             fx_pod(f, FAKEPOD_TRITON, 15, 0, 4)};
    struct fakepod *tg[2] = {fx_pod(f, FAKEPOD_TGI, 7, 2, 1), fx_pod(f, FAKEPOD_TGI, 3, 5, 0)};
    struct fakepod *sg[2] = {fx_pod(f, FAKEPOD_SGLANG, 4, 6, 2),
                             fx_pod(f, FAKEPOD_SGLANG, 8, 3, 0)};
    targets(f, "triton", SCRAPE_TRITON, tr, 2, NULL);
    targets(f, "tgi", SCRAPE_TGI, tg, 2, NULL);
    targets(f, "sglang", SCRAPE_SGLANG, sg, 2, NULL);
    struct fakepod *nim[2] = {fx_pod(f, FAKEPOD_NIM, 6, 2, 1), fx_pod(f, FAKEPOD_NIM, 3, 4, 2)};
    targets(f, "nim", SCRAPE_NIM, nim, 2, NULL);
    targets_at(f, "nim-old-path", SCRAPE_NIM, "/metrics", nim, 2, NULL);
    struct fakepod *tei[2] = {fx_pod(f, FAKEPOD_TEI, 16, 0, 5), fx_pod(f, FAKEPOD_TEI, 0, 0, 0)};
    targets(f, "tei", SCRAPE_TEI, tei, 2, NULL);
    run_for(f, 1000);

    struct scrape_result r = get(f, "triton");
    assert_true(r.valid);
    assert_near(r.request_rate, 20, 0.05);
    assert_near(r.queued, 7, 1e-9);
    assert_true(r.inflight < 0); /* no in-flight gauge in the Triton profile */
    assert_true(r.p99_ms < 0);   /* nor a histogram */

    r = get(f, "tgi");
    assert_true(r.valid);
    assert_near(r.request_rate, 10, 0.05);
    assert_near(r.queued, 1, 1e-9);
    assert_near(r.inflight, 7, 1e-9);
    assert_near(r.p99_ms, fakepod_p99_ms(), 0.01);

    r = get(f, "sglang"); /* aborted requests not counted; both ranks' gauges summed */
    assert_true(r.valid);
    assert_near(r.request_rate, 12, 0.05);
    assert_near(r.queued, 2, 1e-9);
    assert_near(r.inflight, 6 + 1 + 3 + 1, 1e-9);
    assert_near(r.p99_ms, 3000, 0.01);

    r = get(f, "nim"); /* at /v1/metrics by default; failed requests not counted */
    assert_true(r.valid);
    assert_near(r.request_rate, 9, 0.05);
    assert_near(r.queued, 3, 1e-9);
    assert_near(r.inflight, 6, 1e-9);
    assert_near(r.p99_ms, fakepod_p99_ms(), 0.01);
    r = get(f, "nim-old-path"); /* a path the server does not serve */
    assert_false(r.valid);
    assert_string_equal(r.why, "2 of 2 ready pods could not be scraped (HTTP error: 2)");
    char *log = read_log(f);
    assert_non_null(strstr(log, "HTTP status 404"));
    xfree(log);

    /* TEI: inputs embedded, not the HTTP requests that carried them (2/s);
     * a pod that has served nothing has no counter yet and counts 0 */
    r = get(f, "tei");
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 2);
    assert_near(r.request_rate, 16, 0.05);
    assert_near(r.queued, 5, 1e-9);
    assert_true(r.inflight < 0); /* no in-flight gauge */
    assert_near(r.p99_ms, fakepod_p99_ms(), 0.01); /* the request's, not the input's 3 s */
    fx_finish(f);
}

/* A pod restart resets its counters: the rate neither goes negative nor
 * jumps, as Prometheus rate() handles resets. */
static void test_counter_reset(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 300, 0);
    fx_pod(f, FAKEPOD_VLLM, 50, 1, 0);
    fx_pod(f, FAKEPOD_VLLM, 50, 1, 0);
    targets(f, "chat", SCRAPE_VLLM, f->pods, 2, NULL);
    run_for(f, 1000);
    assert_near(get(f, "chat").request_rate, 100, 0.05);
    fakepod_restart(f->pods[0]);
    for (int i = 0; i < 6; i++) {
        run_for(f, 100);
        struct scrape_result r = get(f, "chat");
        assert_true(r.valid);
        assert_int_equal(r.pods_failed, 0);
        assert_near(r.request_rate, 100, 0.12);
        assert_near(r.p99_ms, fakepod_p99_ms(), 0.05);
    }
    fx_finish(f);
}

/* Pods come and go: a new pod is warming (stale, not invalidating), then
 * counted; a removed or not-ready pod is not counted, but the requests it
 * served stay in the rate until they age out of the window. */
static void test_pods_appear_vanish(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 300, 0);
    for (int i = 0; i < 3; i++)
        fx_pod(f, FAKEPOD_VLLM, 10, 1, 0);
    targets(f, "chat", SCRAPE_VLLM, f->pods, 2, NULL);
    run_for(f, 600);
    struct scrape_result r = get(f, "chat");
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 2);

    targets(f, "chat", SCRAPE_VLLM, f->pods, 3, NULL);
    r = get(f, "chat");
    assert_true(r.valid); /* warming alone does not invalidate */
    assert_int_equal(r.pods_ready, 3);
    assert_int_equal(r.pods_counted, 2);
    assert_int_equal(r.pods_stale, 1);
    assert_near(r.request_rate, 20, 0.05);

    run_for(f, 500);
    r = get(f, "chat");
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 3);
    assert_int_equal(r.pods_stale, 0);
    /* the new pod's requests are spread over the observed window (it served
     * for about half of it): 20 + 10 x ~0.5, not 30 at once */
    assert_true(r.request_rate > 22 && r.request_rate < 28);
    run_for(f, 1000); /* once it is older than the window it counts fully */
    r = get(f, "chat");
    assert_near(r.request_rate, 30, 0.05);

    targets(f, "chat", SCRAPE_VLLM, f->pods + 1, 2, NULL); /* pod 0 is gone */
    r = get(f, "chat");
    assert_int_equal(r.pods_ready, 2);
    assert_int_equal(r.pods_counted, 2);
    /* what it served in the window still counts, spread over the window, as
     * Prometheus' sum(rate()) keeps a series that ended within it (these
     * fake pods do not share a load; behind a balancer the others take its
     * share from now on, and the sum stays the demand) */
    assert_near(r.request_rate, 30, 0.05);
    struct scrape_stats st;
    scrape_stats(f->s, &st);
    assert_int_equal(st.pods, 2);
    unsigned before = fakepod_requests(f->pods[0]);
    run_for(f, 500);
    r = get(f, "chat");
    assert_true(r.request_rate > 22 && r.request_rate < 28); /* half aged out */
    run_for(f, 600);
    r = get(f, "chat");
    assert_near(r.request_rate, 20, 0.05);
    scrape_stats(f->s, &st);
    size_t kept = st.memory_bytes; /* pod 0's samples, until the next targets */

    bool ready[2] = {false, true};
    targets(f, "chat", SCRAPE_VLLM, f->pods + 1, 2, ready);
    run_for(f, 300);
    r = get(f, "chat");
    assert_int_equal(r.pods_ready, 1);
    assert_int_equal(r.pods_counted, 1);
    assert_true(r.request_rate > 15 && r.request_rate < 20); /* pod 1's last 0.7 s */
    run_for(f, 1000);
    r = get(f, "chat");
    assert_near(r.request_rate, 10, 0.05);
    scrape_stats(f->s, &st);
    assert_int_equal(st.pods, 2);
    assert_int_equal(st.scheduled, 1);
    assert_true(st.memory_bytes < kept); /* pod 0's samples were let go */
    assert_true(fakepod_requests(f->pods[0]) <= before + 1); /* no longer scraped */

    scrape_forget(f->s, "ns1", "chat");
    assert_int_equal(scrape_get(f->s, "ns1", "chat", 0, &r), -ENOENT);
    scrape_stats(f->s, &st);
    assert_int_equal(st.pods, 0);
    fx_finish(f);
}

/* Declare pods named r-0, r-1, ... at the addresses of the given fake pods
 * (a NULL one: no port), with the spec given. */
static void named_targets(struct fx *f, const struct scrape_spec *spec, struct fakepod **at,
                          int n, const bool *ready)
{
    struct scrape_pod sp[4];
    char names[4][16];
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "r-%d", i);
        sp[i] = (struct scrape_pod){names[i], at[i] ? fakepod_ip(at[i]) : "127.0.0.99",
                                    at[i] ? fakepod_port(at[i]) : 0, ready ? ready[i] : true, 2};
    }
    scrape_set_targets(f->s, "ns1", "r", spec, sp, (size_t)n);
}

/* The requests a pod served in the window count while its history cannot:
 * a pod Ready again after a spell out warms up anew (its rate is not used
 * yet), and a pod made again under its name at a new address starts afresh;
 * each counted what it served, as a pod that left does (both read as load
 * gone before: half the rate, the result valid). A pod without a port stays
 * failed, with its hint, when the metrics change. */
static void test_history_kept_while_warming(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 300, 0);
    for (int i = 0; i < 3; i++)
        fx_pod(f, FAKEPOD_VLLM, 10, 1, 0);
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct fakepod *at[3] = {f->pods[0], f->pods[1], NULL};
    named_targets(f, &spec, at, 2, NULL);
    run_for(f, 1200);
    struct scrape_result r = get(f, "r");
    assert_near(r.request_rate, 20, 0.05);

    bool out[2] = {false, true};
    named_targets(f, &spec, at, 2, out);
    run_for(f, 200);
    named_targets(f, &spec, at, 2, NULL); /* Ready again */
    r = get(f, "r");
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 1);
    assert_int_equal(r.pods_warming, 1);
    assert_true(r.request_rate > 16); /* 10 + what r-0 served in the window */
    run_for(f, 1200);
    r = get(f, "r");
    assert_int_equal(r.pods_counted, 2);
    assert_near(r.request_rate, 20, 0.05);

    at[0] = f->pods[2]; /* r-0 made again, at another address */
    named_targets(f, &spec, at, 2, NULL);
    r = get(f, "r");
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 1);
    assert_int_equal(r.pods_warming, 1);
    assert_near(r.request_rate, 20, 0.05);

    at[0] = NULL; /* no port */
    named_targets(f, &spec, at, 2, NULL);
    run_for(f, 300);
    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "vllm:request_queue_time_seconds");
    named_targets(f, &spec, at, 2, NULL); /* other metrics: the history starts afresh */
    r = get(f, "r");
    assert_int_equal(r.pods_failed, 1);
    assert_non_null(strstr(r.why, "gpuscaler.io/metrics-port"));
    fx_finish(f);
}

/* A pod that leaves the backlog (deleted, no longer Ready, or no good scrape
 * for 3 intervals) hands its latest running and waiting requests to the
 * departed sum: they finish unseen, and backlog + departed, whose growth the
 * controller counts as arrivals, does not drop at a scale-in. A pod Ready
 * again counts its gauges from its next scrape, which gives back what it
 * departed: its counter, read again, counts what it finished meanwhile (kept
 * departed they counted twice: backlog + departed rose by its 6 at the
 * return, as arrivals). Its counter restarted instead, they were lost and
 * stay departed. */
static void test_departed(void **state)
{
    (void)state;
    struct fx *f = fx_new(200, 300, 0); /* stale after 600 ms: a loaded CI has time */
    for (int i = 0; i < 3; i++)
        fx_pod(f, FAKEPOD_VLLM, 10, 4, 2);
    targets(f, "chat", SCRAPE_VLLM, f->pods, 3, NULL);
    run_for(f, 600);
    struct scrape_result r = get(f, "chat");
    assert_true(r.valid);
    assert_true(r.backlog == 18 && r.waiting == 6 && r.departed == 0);

    targets(f, "chat", SCRAPE_VLLM, f->pods + 1, 2, NULL); /* pod 0 is deleted */
    r = get(f, "chat");
    assert_true(r.backlog == 12 && r.waiting == 4 && r.departed == 6);
    assert_true(r.backlog + r.departed == 18);

    bool ready[2] = {false, true}; /* pod 1 is no longer Ready */
    targets(f, "chat", SCRAPE_VLLM, f->pods + 1, 2, ready);
    run_for(f, 200);
    r = get(f, "chat");
    assert_true(r.backlog == 6 && r.waiting == 2 && r.departed == 12);

    ready[0] = true; /* Ready again: its gauges are spent until it is scraped */
    targets(f, "chat", SCRAPE_VLLM, f->pods + 1, 2, ready);
    r = get(f, "chat");
    assert_true(r.backlog == 6 && r.departed == 12);
    run_for(f, 500);
    r = get(f, "chat");
    assert_true(r.backlog == 12 && r.waiting == 4 && r.departed == 6);
    assert_true(r.backlog + r.departed == 18); /* as before it left */

    /* out of Ready while its process restarts: what it held was lost */
    ready[0] = false;
    targets(f, "chat", SCRAPE_VLLM, f->pods + 1, 2, ready);
    r = get(f, "chat");
    assert_true(r.backlog == 6 && r.departed == 12);
    fakepod_restart(f->pods[1]);
    run_for(f, 100);
    ready[0] = true;
    targets(f, "chat", SCRAPE_VLLM, f->pods + 1, 2, ready);
    run_for(f, 500);
    r = get(f, "chat");
    assert_true(r.backlog == 12 && r.departed == 12);

    /* no longer Ready, then deleted: its requests depart once */
    ready[0] = false;
    targets(f, "chat", SCRAPE_VLLM, f->pods + 1, 2, ready);
    targets(f, "chat", SCRAPE_VLLM, f->pods + 2, 1, NULL);
    r = get(f, "chat");
    assert_true(r.backlog == 6 && r.departed == 18);

    fx_finish(f);
}

/* A Ready pod that stops answering leaves the backlog after 3 intervals
 * without a good scrape (within the missing fraction, the result stays
 * valid), and the gauges of its last good scrape depart then, once: backlog +
 * departed does not drop. When it answers again they move back (its new
 * gauges are in the backlog, and what it finished meanwhile in its counter);
 * deleted while stale, they stay departed. */
static void test_departed_stale(void **state)
{
    (void)state;
    struct fx *f = fx_new(200, 300, 0); /* stale after 600 ms: a loaded CI has time */
    for (int i = 0; i < 4; i++)
        fx_pod(f, FAKEPOD_VLLM, 10, 4, 2);
    targets(f, "chat", SCRAPE_VLLM, f->pods, 4, NULL);
    run_for(f, 600);
    struct scrape_result r = get(f, "chat");
    assert_true(r.valid);
    assert_true(r.backlog == 24 && r.waiting == 8 && r.departed == 0);

    fakepod_set_mode(f->pods[0], FAKEPOD_HTTP500);
    run_for(f, 1000);
    r = get(f, "chat");
    assert_true(r.valid);
    assert_int_equal(r.pods_failed, 1);
    assert_true(r.backlog == 18 && r.waiting == 6 && r.departed == 6);
    run_for(f, 300);
    r = get(f, "chat");
    assert_true(r.backlog == 18 && r.departed == 6); /* once */

    fakepod_set_mode(f->pods[0], FAKEPOD_VLLM);
    run_for(f, 500);
    r = get(f, "chat");
    assert_true(r.valid);
    assert_true(r.backlog == 24 && r.waiting == 8 && r.departed == 0);

    fakepod_set_mode(f->pods[0], FAKEPOD_HTTP500);
    run_for(f, 1000);
    r = get(f, "chat");
    assert_true(r.backlog == 18 && r.departed == 6);
    targets(f, "chat", SCRAPE_VLLM, f->pods + 1, 3, NULL); /* deleted while stale */
    r = get(f, "chat");
    assert_true(r.backlog == 18 && r.departed == 6);
    fx_finish(f);
}

struct held {
    struct fakepod *pod;
    unsigned before;
};

static bool pod_asked(void *arg)
{
    const struct held *h = arg;
    return fakepod_requests(h->pod) > h->before;
}

/* A pod whose scrape is still running when it stops being Ready: its
 * requests depart then, and the answer, which would count them once more
 * (its gauges, and what of them finished in its counter), does not count.
 * Ready again, the pod counts from its next scrape, which gives back what it
 * departed (its counter goes on). (This was a race in test_departed on a
 * loaded machine: a scrape in flight at the change.) */
static void test_departed_inflight(void **state)
{
    (void)state;
    struct fx *f = fx_new(200, 5000, 0); /* the held scrape must not time out */
    for (int i = 0; i < 2; i++)
        fx_pod(f, FAKEPOD_VLLM, 10, 4, 2);
    targets(f, "chat", SCRAPE_VLLM, f->pods, 2, NULL);
    run_for(f, 600);
    struct scrape_result r = get(f, "chat");
    assert_true(r.valid);
    assert_true(r.backlog == 12 && r.departed == 0);

    struct held h = {f->pods[1], fakepod_requests(f->pods[1])};
    fakepod_set_mode(f->pods[1], FAKEPOD_HELD);
    assert_true(testsrv_run_until(&f->loop, pod_asked, &h, 5000)); /* its scrape waits */
    struct scrape_stats st;
    scrape_stats(f->s, &st);
    assert_true(st.inflight >= 1);

    bool ready[2] = {true, false}; /* pod 1 is no longer Ready */
    targets(f, "chat", SCRAPE_VLLM, f->pods, 2, ready);
    r = get(f, "chat");
    assert_true(r.backlog == 6 && r.departed == 6);
    run_for(f, 100); /* the pod sees its connection closed */
    fakepod_release(f->pods[1]);
    run_for(f, 100); /* an answer still wanted would be in by now */

    ready[1] = true;
    targets(f, "chat", SCRAPE_VLLM, f->pods, 2, ready);
    r = get(f, "chat");
    assert_true(r.backlog == 6 && r.departed == 6); /* not 12 and 6 */
    run_for(f, 500);
    r = get(f, "chat");
    assert_true(r.backlog == 12 && r.departed == 0);
    fx_finish(f);
}

/* The metrics change while a pod's scrape is running: its answer, read for
 * the old request metric, must not be the first sample of the new one (the
 * busy-time summary's count, the same 10 req/s), or the next scrape finds
 * only series its first sample did not have, which count from 0: the new
 * counter's whole life as one interval's increase (a rate many times 10). */
static void test_spec_change_inflight(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 5000, 0); /* the held scrape must not time out */
    fx_pod(f, FAKEPOD_VLLM, 10, 1, 0);
    targets(f, "chat", SCRAPE_VLLM, f->pods, 1, NULL);
    run_for(f, 2000);
    assert_near(get(f, "chat").request_rate, 10, 0.05);

    struct held h = {f->pods[0], fakepod_requests(f->pods[0])};
    fakepod_set_mode(f->pods[0], FAKEPOD_HELD);
    assert_true(testsrv_run_until(&f->loop, pod_asked, &h, 5000)); /* its scrape waits */
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "vllm:request_inference_time_seconds_count");
    char name[64];
    snprintf(name, sizeof(name), "chat-%s", fakepod_ip(f->pods[0]));
    struct scrape_pod sp = {name, fakepod_ip(f->pods[0]), fakepod_port(f->pods[0]), true, 1};
    scrape_set_targets(f->s, "ns1", "chat", &spec, &sp, 1);
    run_for(f, 100);
    fakepod_set_mode(f->pods[0], FAKEPOD_VLLM);
    fakepod_release(f->pods[0]);
    run_for(f, 600);
    struct scrape_result r = get(f, "chat");
    assert_true(r.valid);
    assert_near(r.request_rate, 10, 0.1);
    fx_finish(f);
}

/* Over the missing fraction the result is invalid with a reason and no
 * rate; under it the failed pods are excluded and counted. */
static void test_missing_fraction(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 300, 0);
    for (int i = 0; i < 5; i++)
        fx_pod(f, FAKEPOD_VLLM, 10, 1, 0);
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_pod sp[4];
    const char *names[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        sp[i] = (struct scrape_pod){.name = names[i], .ip = fakepod_ip(f->pods[i]),
                                    .port = fakepod_port(f->pods[i]), .ready = true, .gpus = 1};
    /* nothing listens on 127.0.0.250: connection refused */
    sp[2].ip = "127.0.0.250";
    sp[3].ip = "127.0.0.250";
    scrape_set_targets(f->s, "ns1", "half", &spec, sp, 4);
    sp[2].ip = fakepod_ip(f->pods[2]);
    scrape_set_targets(f->s, "ns1", "quarter", &spec, sp, 4);
    run_for(f, 600);

    struct scrape_result r = get(f, "half");
    assert_false(r.valid);
    assert_true(isnan(r.request_rate));
    assert_int_equal(r.pods_failed, 2);
    assert_string_equal(r.why, "2 of 4 ready pods could not be scraped (connection refused: 2)");

    r = get(f, "quarter");
    assert_true(r.valid);
    assert_int_equal(r.pods_failed, 1);
    assert_int_equal(r.pods_counted, 3);
    assert_near(r.request_rate, 30, 0.05);
    assert_near(r.gpus_ready, 3, 1e-9);

    spec.missing_fraction = 0.2; /* 1 of 4 is now too many */
    scrape_set_targets(f->s, "ns1", "quarter", &spec, sp, 4);
    r = get(f, "quarter");
    assert_false(r.valid);
    assert_string_equal(r.why, "1 of 4 ready pods could not be scraped (connection refused: 1)");
    fx_finish(f);
}

/* Each kind of broken endpoint fails that pod with a clear reason, logged
 * once (rate limited) with namespace and deployment; nothing crashes. */
static void test_bad_endpoints(void **state)
{
    (void)state;
    struct fx *f = fx_new(150, 100, 256 << 10);
    static const struct {
        enum fakepod_mode mode;
        const char *why, *logged;
    } cases[] = {
        {FAKEPOD_GARBAGE, "1 of 1 ready pods could not be scraped (unparsable: 1)", "(unparsable)"},
        {FAKEPOD_TRUNCATED, "1 of 1 ready pods could not be scraped (truncated: 1)", "(truncated)"},
        {FAKEPOD_SLOW, "1 of 1 ready pods could not be scraped (timeout: 1)", "(timeout)"},
        {FAKEPOD_HUGE, "1 of 1 ready pods could not be scraped (too big: 1)", "(too big)"},
        {FAKEPOD_HTTP500, "1 of 1 ready pods could not be scraped (HTTP error: 1)", "(HTTP error)"},
    };
    char name[UTIL_ARRAY_LEN(cases)][32];
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        struct fakepod *p = fx_pod(f, cases[i].mode, 10, 1, 0);
        snprintf(name[i], sizeof(name[i]), "bad%zu", i);
        targets(f, name[i], SCRAPE_VLLM, &p, 1, NULL);
    }
    /* a healthy workload with one pod that turns to garbage and back */
    struct fakepod *mixed[4];
    for (int i = 0; i < 4; i++)
        mixed[i] = fx_pod(f, FAKEPOD_VLLM, 10, 1, 0);
    targets(f, "mixed", SCRAPE_VLLM, mixed, 4, NULL);
    run_for(f, 800);

    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        struct scrape_result r = get(f, name[i]);
        assert_false(r.valid);
        assert_int_equal(r.pods_failed, 1);
        assert_string_equal(r.why, cases[i].why);
    }
    struct scrape_result r = get(f, "mixed");
    assert_true(r.valid);
    assert_near(r.request_rate, 40, 0.05);

    fakepod_set_mode(mixed[0], FAKEPOD_GARBAGE);
    run_for(f, 400);
    r = get(f, "mixed");
    assert_true(r.valid); /* 1 of 4 <= 0.3 */
    assert_int_equal(r.pods_failed, 1);
    assert_int_equal(r.pods_counted, 3);
    assert_near(r.request_rate, 30, 0.05);

    fakepod_set_mode(mixed[0], FAKEPOD_VLLM);
    run_for(f, 600);
    r = get(f, "mixed");
    assert_int_equal(r.pods_counted, 4);
    assert_near(r.request_rate, 40, 0.05);

    struct scrape_stats st;
    scrape_stats(f->s, &st);
    assert_true(st.scrapes_failed >= 5 * 4);

    /* several failures per bad pod, one warning line (plus the mixed pod's
     * failure and its recovery). A reason that changes is news, logged too:
     * on a loaded machine the 256 KiB answer once timed out between two "too
     * big" (3 lines). So: its own reason, logged once more only after each
     * timeout line, and no other */
    char *log = read_log(f);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        char needle[64];
        snprintf(needle, sizeof(needle), "deployment=bad%zu ", i);
        int own = count_lines(log, needle, cases[i].logged);
        int timeouts = cases[i].mode == FAKEPOD_SLOW ? 0 : count_lines(log, needle, "(timeout)");
        int all = count_lines(log, needle, "failed (");
        if (own != 1 && !(own >= 1 && own <= 1 + timeouts)) /* say why: the lines */
            print_message("%s %s: %d lines in the log:\n%s\n", needle, cases[i].logged, own, log);
        assert_true(own >= 1 && own <= 1 + timeouts);
        assert_int_equal(all, own + timeouts);
    }
    assert_int_equal(count(log, "deployment=mixed"), 2);
    /* every line about a workload names its namespace too */
    assert_int_equal(count(log, "namespace=ns1"), count(log, "deployment="));
    assert_true(count(log, "namespace=ns1") >= 7);
    assert_non_null(strstr(log, "not a Prometheus exposition"));
    assert_non_null(strstr(log, "larger than 262144 bytes"));
    assert_non_null(strstr(log, "scraped again"));
    xfree(log);
    fx_finish(f);
}

/* Pods answering OpenMetrics are read as OpenMetrics (picked from the
 * Content-Type, before the first body byte is parsed) and give the same
 * numbers as 0.0.4 pods; a 0.0.4 body mislabelled as OpenMetrics fails
 * (no # EOF), which shows the label is what decides. */
static void test_openmetrics_pods(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 300, 0);
    struct fakepod *om[3];
    for (int i = 0; i < 3; i++)
        om[i] = fx_pod(f, FAKEPOD_VLLM_OM, 10.0 * (i + 1), i + 1, 2 * i);
    targets(f, "om", SCRAPE_VLLM, om, 3, NULL);
    struct fakepod *liar = fx_pod(f, FAKEPOD_TEXT_AS_OM, 10, 1, 0);
    targets(f, "liar", SCRAPE_VLLM, &liar, 1, NULL);
    run_for(f, 1000);

    struct scrape_result r = get(f, "om");
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 3);
    assert_int_equal(r.pods_failed, 0);
    assert_near(r.request_rate, 60, 0.05);
    assert_near(r.inflight, 6, 1e-9);
    assert_near(r.queued, 6, 1e-9);
    assert_near(r.p99_ms, fakepod_p99_ms(), 0.01);

    r = get(f, "liar");
    assert_false(r.valid);
    assert_int_equal(r.pods_failed, 1);
    assert_string_equal(r.why, "1 of 1 ready pods could not be scraped (unparsable: 1)");
    char *log = read_log(f);
    assert_non_null(strstr(log, "not an OpenMetrics exposition"));
    assert_non_null(strstr(log, "missing # EOF"));
    assert_int_equal(count(log, "deployment=om"), 0);
    xfree(log);

    /* the same pod switching format between scrapes is read right each time */
    fakepod_set_mode(om[0], FAKEPOD_VLLM);
    fakepod_set_mode(liar, FAKEPOD_VLLM_OM);
    run_for(f, 600);
    r = get(f, "om");
    assert_int_equal(r.pods_counted, 3);
    assert_near(r.request_rate, 60, 0.05);
    r = get(f, "liar");
    assert_int_equal(r.pods_failed, 0);
    fx_finish(f);
}

/* Closing with scrapes in flight cancels them and still closes cleanly. */
static void test_close_inflight(void **state)
{
    (void)state;
    struct fx *f = fx_new(50, 1000, 0);
    for (int i = 0; i < 3; i++)
        fx_pod(f, FAKEPOD_SLOW, 1, 0, 0);
    targets(f, "slow", SCRAPE_VLLM, f->pods, 3, NULL);
    run_for(f, 120);
    struct scrape_stats st;
    scrape_stats(f->s, &st);
    assert_int_equal(st.inflight, 3);
    fx_finish(f);
}

/* A workload whose metric names change starts its history afresh (a rate
 * and a p99 of the new metrics only, after two scrapes); one that shares the
 * old spec keeps its own; a change of the missing fraction alone keeps it. */
static void test_spec_change(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 300, 0);
    for (int i = 0; i < 4; i++)
        fx_pod(f, FAKEPOD_VLLM, 10, 1, 0);
    targets(f, "a", SCRAPE_VLLM, f->pods, 2, NULL);
    targets(f, "b", SCRAPE_VLLM, f->pods + 2, 2, NULL);
    run_for(f, 600);
    assert_near(get(f, "a").p99_ms, fakepod_p99_ms(), 0.01);

    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    spec.missing_fraction = 0.5; /* not a metric: the history stays */
    struct scrape_pod sp[2];
    char names[2][64];
    for (int i = 0; i < 2; i++) {
        snprintf(names[i], sizeof(names[i]), "a-%s", fakepod_ip(f->pods[i]));
        sp[i] = (struct scrape_pod){names[i], fakepod_ip(f->pods[i]), fakepod_port(f->pods[i]),
                                    true, 2};
    }
    scrape_set_targets(f->s, "ns1", "a", &spec, sp, 2);
    struct scrape_result r = get(f, "a");
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 2);

    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "vllm:request_queue_time_seconds");
    scrape_set_targets(f->s, "ns1", "a", &spec, sp, 2);
    r = get(f, "a");
    assert_int_equal(r.pods_counted, 0); /* history gone: warming up again */
    assert_true(r.p99_ms < 0);
    r = get(f, "b");
    assert_true(r.valid); /* b shared the old spec: untouched */
    assert_near(r.p99_ms, fakepod_p99_ms(), 0.01);
    run_for(f, 400);
    r = get(f, "a");
    assert_true(r.valid);
    assert_near(r.request_rate, 20, 0.05);
    assert_true(r.p99_ms < 0); /* the fake pods have no such histogram: none left over */
    fx_finish(f);
}

static void on_block(uv_timer_t *t)
{
    (void)t;
    uv_sleep(250); /* a loop busy with something else: every pod falls due */
}

/* Scrapes in flight never pass the limit: after the loop was blocked for
 * longer than the interval, the due pods start as others finish (counted as
 * deferred) instead of all at once, and all of them are still scraped. */
static void test_inflight_limit(void **state)
{
    (void)state;
    struct fx *f = fx_new_limit(100, 300, 0, 2);
    for (int i = 0; i < 8; i++)
        fx_pod(f, FAKEPOD_VLLM, 10, 1, 0);
    targets(f, "chat", SCRAPE_VLLM, f->pods, 8, NULL);
    run_for(f, 500);
    uv_timer_t block;
    uv_timer_init(&f->loop, &block);
    uv_timer_start(&block, on_block, 10, 0);
    unsigned before[8];
    for (int i = 0; i < 8; i++)
        before[i] = fakepod_requests(f->pods[i]);
    run_for(f, 600);
    uv_close((uv_handle_t *)&block, NULL);

    struct scrape_stats st;
    scrape_stats(f->s, &st);
    assert_int_equal(st.inflight_limit, 2);
    assert_true(st.inflight_peak <= 2);
    assert_true(st.deferred > 0);
    assert_int_equal(st.scrapes_failed, 0);
    for (int i = 0; i < 8; i++)
        assert_true(fakepod_requests(f->pods[i]) >= before[i] + 3);
    struct scrape_result r = get(f, "chat");
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 8);
    assert_near(r.request_rate, 80, 0.05);
    fx_finish(f);
}

/* Pods that never answer hold a slot until their timeout; the limit grows
 * with the mean duration, so the healthy pods are still scraped on time. */
static void test_slow_pods_do_not_starve(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 300, 0);
    for (int i = 0; i < 12; i++)
        fx_pod(f, FAKEPOD_SLOW, 1, 0, 0);
    for (int i = 0; i < 4; i++)
        fx_pod(f, FAKEPOD_VLLM, 10, 1, 0);
    targets(f, "slow", SCRAPE_VLLM, f->pods, 12, NULL);
    targets(f, "ok", SCRAPE_VLLM, f->pods + 12, 4, NULL);
    run_for(f, 1500);
    struct scrape_result r = get(f, "ok");
    assert_true(r.valid);
    assert_near(r.request_rate, 40, 0.05);
    r = get(f, "slow");
    assert_false(r.valid);
    assert_int_equal(r.pods_failed, 12);
    struct scrape_stats st;
    scrape_stats(f->s, &st);
    assert_true(st.inflight_peak <= st.inflight_limit);
    assert_true(st.duration_ms > 50); /* the timeouts count in the mean */
    /* no scrape waited for a slot, and the healthy pods kept their pace (15 slots in
     * 1.5 s; counted, not timed: a loaded machine may delay a slot, never drop one) */
    assert_int_equal(st.deferred, 0);
    for (int i = 12; i < 16; i++)
        assert_true(fakepod_requests(f->pods[i]) >= 12);
    fx_finish(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_pods),        cmocka_unit_test(test_triton_tgi),
        cmocka_unit_test(test_counter_reset),    cmocka_unit_test(test_pods_appear_vanish),
        cmocka_unit_test(test_missing_fraction), cmocka_unit_test(test_bad_endpoints),
        cmocka_unit_test(test_close_inflight),   cmocka_unit_test(test_openmetrics_pods),
        cmocka_unit_test(test_inflight_limit),   cmocka_unit_test(test_slow_pods_do_not_starve),
        cmocka_unit_test(test_spec_change),
        cmocka_unit_test(test_spec_change_inflight),      cmocka_unit_test(test_history_kept_while_warming),
        cmocka_unit_test(test_departed),
        cmocka_unit_test(test_departed_stale),   cmocka_unit_test(test_departed_inflight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

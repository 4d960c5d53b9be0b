/* SPDX-License-Identifier: Apache-2.0 */
/* Async tests of the reflector and the caches against testsrv on the same
 * loop: a scripted API server serving paged lists and chunked watches, with
 * bookmarks, 410s (event and HTTP), a 429 and a broken stream. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "httpc/testsrv.h"
#include "kube/kube-int.h"
#include "util/util.h"

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    struct kube *k;
    struct testsrv *srv;
    struct kube_reflector *r;
    struct kube_cache *cache;
    struct kube_store *store; /* the reflector test's sink */
    int list_begins, list_ends, events;
    int step;                 /* requests seen */
    char targets[16][256];
    uint64_t at[16];          /* when each arrived (loop time) */
    bool done;                /* the script reached its end */
    int closes;
    int changed;
    struct testsrv_conn *held[4];
    int nheld;
    struct testsrv_conn *pend; /* the pod request the test answers */
    int pod_reqs;
    uv_timer_t *drop;          /* h_dropped's: drops the connection held */
};

static void on_closed(void *arg)
{
    ((struct fx *)arg)->closes++;
}

static void run_until(struct fx *f, bool *flag)
{
    if (!testsrv_run_until_flag(&f->loop, flag, 20000))
        fail_msg("timed out at step %d", f->step);
}

static void on_tick(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* Run the loop for ms milliseconds. */
static void run_for(struct fx *f, uint64_t ms)
{
    bool flag = false;
    uv_timer_t t;
    uv_timer_init(&f->loop, &t);
    t.data = &flag;
    uv_timer_start(&t, on_tick, ms, 0);
    run_until(f, &flag);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
}

static void fx_init(struct fx *f, testsrv_handler h)
{
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpc_new(&f->loop, &f->http), 0);
    f->srv = testsrv_start(&f->loop, h, f);
    struct kube_config cfg = {.server = (char *)testsrv_url(f->srv), .token = "t0k"};
    assert_int_equal(kube_new(&f->loop, f->http, &cfg, NULL, &f->k), 0);
}

static void fx_finish(struct fx *f, int want_closes)
{
    kube_close(f->k, on_closed, f);
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closes, want_closes);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static bool has(const char *target, const char *param)
{
    return strstr(target, param) != NULL;
}

static void json_respond(struct testsrv_conn *c, int status, const char *body)
{
    testsrv_respond(c, status, "application/json", body, strlen(body), NULL);
}

#define POD(name, rv) \
    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"" name "\",\"resourceVersion\":\"" rv "\"}}"
#define EV(type, obj) "{\"type\":\"" type "\",\"object\":" obj "}\n"
/* a pod with a NUL byte in an annotation, as Go's encoder writes it */
#define POD_NUL(name, rv)                                                                     \
    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"" name "\",\"resourceVersion\":\"" rv \
    "\",\"annotations\":{\"x\":\"a\\u0000b\"}}}"

/* ---- reflector script --------------------------------------------------- */

static void h_script(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16)
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
    char auth[64] = "";
    testsrv_req_header(req, "Authorization", auth, sizeof(auth));
    assert_string_equal(auth, "Bearer t0k");
    switch (n) {
    case 0: /* first page */
        json_respond(c, 200, "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"100\","
                             "\"continue\":\"c1\"},\"items\":[" POD("p1", "1") "," POD("p2", "2")
                             "]}");
        break;
    case 1: /* second page */
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
                             POD_NUL("p3", "3") "]}");
        break;
    case 2: /* watch: events split oddly across chunks, a bookmark, then the server's timeout */
        testsrv_stream_begin(c, 200, "application/json");
        {
            const char *s = EV("ADDED", POD_NUL("p4", "101")) EV("MODIFIED", POD("p1", "102"))
                EV("BOOKMARK", "{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"150\"}}");
            size_t len = strlen(s);
            testsrv_stream_chunk(c, s, 7);
            testsrv_stream_chunk(c, s + 7, len / 2 - 7);
            testsrv_stream_chunk(c, s + len / 2, len - len / 2);
        }
        testsrv_stream_end(c);
        break;
    case 3: /* resumed from the bookmark; the server says it is too old */
        testsrv_stream_begin(c, 200, "application/json");
        {
            const char *s = EV("ERROR", "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":"
                                        "\"Expired\",\"code\":410}");
            testsrv_stream_chunk(c, s, strlen(s));
        }
        testsrv_stream_end(c);
        break;
    case 4: /* relist (unpaged answer): only p1 remains */
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"200\"},\"items\":[" POD("p1", "102")
                             "]}");
        break;
    case 5: /* watch refused with an HTTP 410 */
        json_respond(c, 410, "{\"kind\":\"Status\",\"reason\":\"Gone\",\"code\":410}");
        break;
    case 6:
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"300\"},\"items\":[" POD("p1", "102")
                             "]}");
        break;
    case 7: /* throttled */
        testsrv_respond(c, 429, "application/json", "{}", 2, "Retry-After: 1\r\n");
        break;
    case 8: /* unavailable, with Retry-After (client-go waits on any 5xx that has one) */
        testsrv_respond(c, 503, "application/json", "{}", 2, "Retry-After: 1\r\n");
        break;
    case 9: /* broken JSON mid-stream */
        testsrv_stream_begin(c, 200, "application/json");
        {
            const char *s = EV("ADDED", POD("p5", "301")) "{\"type\":\"ADDED\",\"object\":{oops\n";
            testsrv_stream_chunk(c, s, strlen(s));
        }
        testsrv_stream_end(c);
        break;
    case 10:
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"400\"},\"items\":[" POD("p1", "102")
                             "]}");
        break;
    default: /* the final watch: held open until the test closes */
        f->held[f->nheld++] = c;
        f->done = true;
        break;
    }
}

static void s_begin(void *arg)
{
    struct fx *f = arg;
    f->list_begins++;
    kube_store_list_begin(f->store, KUBE_KIND_POD, NULL);
}

static void s_event(void *arg, enum kube_event_type t, json_t *obj)
{
    struct fx *f = arg;
    f->events++;
    kube_store_apply(f->store, KUBE_KIND_POD, t, obj);
}

static void s_end(void *arg)
{
    struct fx *f = arg;
    f->list_ends++;
    kube_store_list_end(f->store, KUBE_KIND_POD, NULL);
}

static const struct kube_sink sink = {s_begin, s_event, s_end};

static void test_reflector_script(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_script);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.min_timeout_s = 5, .max_timeout_s = 10, .backoff_initial_ms = 20,
                                .backoff_max_ms = 100, .page_limit = 2, .min_watch_ms = 1,
                                .seed = 42};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", "app=llm", &o, &sink, f, &f->r), 0);
    assert_false(kube_reflector_synced(f->r));
    assert_string_equal(kube_reflector_rv(f->r), "");
    uint64_t t0 = uv_now(&f->loop);
    run_until(f, &f->done);
    uint64_t took = uv_now(&f->loop) - t0;

    const char *const *t = (const char *const *)f->targets;
    (void)t;
    /* Paged list, selector passed through, no resourceVersion on lists. */
    assert_string_equal(f->targets[0], "/api/v1/pods?limit=2&labelSelector=app%3Dllm");
    assert_string_equal(f->targets[1], "/api/v1/pods?limit=2&continue=c1&labelSelector=app%3Dllm");
    /* Watch from the list's resourceVersion, with bookmarks and a 5-10 min-style timeout. */
    assert_true(has(f->targets[2], "watch=1&allowWatchBookmarks=true&resourceVersion=100&"));
    const char *ts = strstr(f->targets[2], "timeoutSeconds=");
    assert_non_null(ts);
    int secs = (int)strtol(ts + 15, NULL, 10);
    assert_true(secs >= 5 && secs <= 10);
    /* Resumed from the bookmark's resourceVersion, not the last event's. */
    assert_true(has(f->targets[3], "resourceVersion=150&"));
    /* ERROR 410 -> fresh list; then watch from its resourceVersion. */
    assert_false(has(f->targets[4], "watch=1"));
    assert_false(has(f->targets[4], "continue="));
    assert_true(has(f->targets[5], "resourceVersion=200&"));
    /* HTTP 410 -> list again. */
    assert_false(has(f->targets[6], "watch=1"));
    assert_true(has(f->targets[7], "resourceVersion=300&"));
    /* 429, then 503, each with Retry-After: 1 -> the same watch after a second each (the
     * backoff alone is at most 100 ms here) */
    assert_true(has(f->targets[8], "resourceVersion=300&"));
    assert_true(has(f->targets[9], "resourceVersion=300&"));
    assert_true(took >= 2000);
    /* Broken stream -> a relist (after a backoff), then a watch. */
    assert_false(has(f->targets[10], "watch=1"));
    assert_true(has(f->targets[11], "resourceVersion=400&"));

    assert_true(kube_reflector_synced(f->r));
    assert_string_equal(kube_reflector_rv(f->r), "400");
    const struct kube_reflector_stats *st = kube_reflector_stats(f->r);
    assert_int_equal(st->gone, 2);
    assert_int_equal(st->bookmarks, 1);
    assert_int_equal(st->relists, 3);
    assert_int_equal(st->watches, 7);
    assert_true(st->errors >= 1);
    assert_int_equal(f->list_begins, 4);
    assert_int_equal(f->list_ends, 4);
    /* The relists swept what disappeared: only p1 is left. */
    assert_int_equal(kube_store_npods(f->store), 1);
    assert_non_null(kube_store_pod(f->store, "ml", "p1"));

    /* Close with the final watch in flight: no sink call after, the loop closes. */
    int events = f->events;
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    assert_int_equal(f->events, events);
    kube_store_free(f->store);
    xfree(f);
}

/* ---- an expired continue token -------------------------------------------- */

static void h_expired(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16) {
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
        f->at[n] = uv_now(&f->loop);
    }
    switch (n) {
    case 0: /* first page */
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"100\",\"continue\":\"c1\"},"
                             "\"items\":[" POD("p1", "1") "," POD("p2", "2") "]}");
        break;
    case 1: /* etcd compacted past revision 100 meanwhile */
        json_respond(c, 410, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}");
        break;
    case 2: /* the list again, in one request */
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"200\"},\"items\":["
                             POD("p1", "1") "," POD("p2", "2") "," POD("p3", "3") "]}");
        break;
    case 3: /* watch: too old, relist */
        testsrv_stream_begin(c, 200, "application/json");
        {
            const char *s = EV("ERROR", "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}");
            testsrv_stream_chunk(c, s, strlen(s));
        }
        testsrv_stream_end(c);
        break;
    case 4: /* paged again */
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"300\"},\"items\":["
                             POD("p1", "1") "]}");
        break;
    default:
        f->held[f->nheld++] = c;
        f->done = true;
        break;
    }
}

/* A continue token that expires (the list took longer than etcd's
 * compaction) makes the next list one unpaged request, as client-go's pager
 * does: paged again it could expire for ever. The list after is paged. */
static void test_reflector_expired_continue(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_expired);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.min_timeout_s = 5, .max_timeout_s = 10, .backoff_initial_ms = 300,
                                .backoff_max_ms = 1000, .page_limit = 2, .min_watch_ms = 1,
                                .seed = 7};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    run_until(f, &f->done);
    assert_string_equal(f->targets[0], "/api/v1/pods?limit=2");
    assert_string_equal(f->targets[1], "/api/v1/pods?limit=2&continue=c1");
    assert_string_equal(f->targets[2], "/api/v1/pods");
    assert_true(has(f->targets[3], "watch=1&allowWatchBookmarks=true&resourceVersion=200&"));
    assert_string_equal(f->targets[4], "/api/v1/pods?limit=2");
    assert_true(has(f->targets[5], "resourceVersion=300&"));
    /* the watch's 410 relists after the backoff (300-600 ms here; a request
     * takes about 50 ms), as client-go does, and is no error; the expired
     * continue token lists again at once */
    assert_true(f->at[4] - f->at[3] >= 300);
    assert_int_equal(kube_reflector_stats(f->r)->errors, 0);
    assert_int_equal(kube_reflector_stats(f->r)->gone, 2);
    assert_int_equal(f->list_ends, 2);
    assert_int_equal(kube_store_npods(f->store), 1);
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* ---- a watch on a dead connection ----------------------------------------- */

static void h_stall(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16)
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
    if (n == 0) {
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
                             POD("p1", "1") "]}");
        return;
    }
    if (n == 1) { /* a watch whose connection then carries nothing, as a dead peer's */
        testsrv_stream_begin(c, 200, "application/json");
        f->held[f->nheld++] = c;
        return;
    }
    f->held[f->nheld++] = c;
    f->done = true;
}

/* With a stall limit set, a watch stream that receives nothing for stall_ms
 * (no event, no bookmark) is ended and the watch resumes from the same
 * resourceVersion. */
static void test_reflector_stalled_watch(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_stall);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.min_timeout_s = 60, .max_timeout_s = 60, .backoff_initial_ms = 20,
                                .backoff_max_ms = 100, .min_watch_ms = 1, .stall_ms = 1000,
                                .seed = 3};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    uint64_t t0 = uv_now(&f->loop);
    run_until(f, &f->done);
    uint64_t took = uv_now(&f->loop) - t0;
    assert_true(has(f->targets[1], "watch=1&allowWatchBookmarks=true&resourceVersion=100&"));
    assert_true(has(f->targets[2], "watch=1&allowWatchBookmarks=true&resourceVersion=100&"));
    assert_true(took >= 1000 && took < 30000); /* the stall, not the 90 s deadline */
    assert_int_equal(f->list_ends, 1);         /* resumed, not listed again */
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* ---- a quiet watch once the server has shown periodic bookmarks ----------- */

static void h_bookmark_then_dead(struct testsrv_conn *c, const struct testsrv_req *req,
                                 void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16)
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
    if (n == 0) {
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
                             POD("p1", "1") "]}");
        return;
    }
    if (n == 1) { /* a bookmark at once (long before the deadline), then a clean end */
        testsrv_stream_begin(c, 200, "application/json");
        const char *s = EV("BOOKMARK", "{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"120\"}}");
        testsrv_stream_chunk(c, s, strlen(s));
        testsrv_stream_end(c);
        return;
    }
    if (n == 2) { /* then a watch that carries nothing, as a dead peer's behind a proxy */
        testsrv_stream_begin(c, 200, "application/json");
        f->held[f->nheld++] = c;
        return;
    }
    f->held[f->nheld++] = c;
    f->done = true;
}

/* Without a stall limit set, a quiet watch is left open (the test above),
 * until the server has sent a bookmark well before a watch's end, as
 * kube-apiserver's watch cache does about every minute: then a watch silent
 * for bookmark_stall_ms is dead or hung where TCP keepalives do not see it
 * (behind a proxy they reach the proxy only), and it resumes. */
static void test_reflector_stall_after_periodic_bookmarks(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_bookmark_then_dead);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.min_timeout_s = 60, .max_timeout_s = 60, .backoff_initial_ms = 20,
                                .backoff_max_ms = 100, .min_watch_ms = 1,
                                .bookmark_stall_ms = 1000, .seed = 5};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    uint64_t t0 = uv_now(&f->loop);
    run_until(f, &f->done);
    uint64_t took = uv_now(&f->loop) - t0;
    assert_true(has(f->targets[2], "watch=1&allowWatchBookmarks=true&resourceVersion=120&"));
    assert_true(has(f->targets[3], "watch=1&allowWatchBookmarks=true&resourceVersion=120&"));
    assert_true(took >= 1000 && took < 30000); /* the stall, not the 90 s deadline */
    assert_int_equal(f->list_ends, 1);
    assert_int_equal(kube_reflector_stats(f->r)->bookmarks, 1);
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* ---- a watch cut inside its first event every time ------------------------ */

static void h_cut(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16)
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
    if (n == 0 || n == 6) {
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
                             POD("p1", "1") "]}");
        return;
    }
    if (n < 6) { /* half an event, then a clean end: a proxy's size limit on one object */
        testsrv_stream_begin(c, 200, "application/json");
        const char *s = "{\"type\":\"ADDED\",\"object\":{\"meta";
        testsrv_stream_chunk(c, s, strlen(s));
        testsrv_stream_end(c);
        return;
    }
    f->held[f->nheld++] = c;
    f->done = true;
}

/* A watch cut inside its first event each time would be resumed from the
 * same resourceVersion for ever, the view frozen: after 5 such ends in a
 * row it lists again, as after 5 failed watches. */
static void test_reflector_cut_every_time_lists_again(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_cut);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.min_timeout_s = 60, .max_timeout_s = 60, .backoff_initial_ms = 20,
                                .backoff_max_ms = 100, .min_watch_ms = 1, .seed = 11};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    run_until(f, &f->done);
    for (int i = 1; i <= 5; i++)
        assert_true(has(f->targets[i], "watch=1&allowWatchBookmarks=true&resourceVersion=100&"));
    assert_false(has(f->targets[6], "watch=1"));
    assert_int_equal(f->list_ends, 2);
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* ---- a watch that ends cleanly inside an event ---------------------------- */

static void h_partial(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16)
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
    if (n == 0) {
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
                             POD("p1", "1") "]}");
        return;
    }
    if (n == 1) { /* one whole event, then half of the next, then a clean end */
        testsrv_stream_begin(c, 200, "application/json");
        const char *s = EV("ADDED", POD("p2", "101")) "{\"type\":\"ADDED\",\"object\":{\"meta";
        testsrv_stream_chunk(c, s, strlen(s));
        testsrv_stream_end(c);
        return;
    }
    f->held[f->nheld++] = c;
    f->done = true;
}

/* A watch the server (or a proxy) ends cleanly inside an event resumes from
 * the last whole event's resourceVersion, as client-go's reflector resumes
 * any clean end; the partial event is dropped (it comes again). It relisted,
 * as for a broken stream. */
static void test_reflector_partial_event(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_partial);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.min_timeout_s = 60, .max_timeout_s = 60, .backoff_initial_ms = 20,
                                .backoff_max_ms = 100, .min_watch_ms = 1, .seed = 9};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    run_until(f, &f->done);
    assert_true(has(f->targets[1], "watch=1&allowWatchBookmarks=true&resourceVersion=100&"));
    assert_true(has(f->targets[2], "watch=1&allowWatchBookmarks=true&resourceVersion=101&"));
    assert_int_equal(f->list_ends, 1);
    assert_int_equal(kube_reflector_stats(f->r)->relists, 0);
    assert_int_equal(kube_reflector_stats(f->r)->errors, 0);
    assert_int_equal(kube_store_npods(f->store), 2);
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* A quiet watch is healthy: an API server without periodic bookmarks (its
 * watch cache off) sends nothing while the collection does not change, and
 * client-go has no stall limit on an open stream. So the default has none;
 * a dead connection is left to TCP keepalives and the watch's deadline
 * (timeoutSeconds + 30 s). With the 150 s default such watches were torn
 * down as stalled every 150 s. */
static void test_reflector_quiet_watch_default(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_stall);
    f->store = kube_store_new();
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, NULL, &sink, f, &f->r), 0);
    assert_true(kube_reflector_opts(f->r)->stall_ms <= 0);
    assert_int_equal(kube_reflector_opts(f->r)->min_timeout_s, 300);
    assert_int_equal(kube_reflector_opts(f->r)->max_timeout_s, 600);
    run_for(f, 1500); /* the list, then the quiet watch held open */
    assert_int_equal(f->step, 2);
    assert_int_equal(kube_reflector_stats(f->r)->watches, 1);
    assert_int_equal(kube_reflector_stats(f->r)->errors, 0);
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* A list the API server takes longer to answer than the client's request
 * timeout (a page of a large cluster, or the unpaged list after an expired
 * continue token) still completes: lists have no deadline on the whole
 * transfer, as client-go's, only the stall's. With the 30 s request timeout
 * such a list failed and was sent again for ever. */
static void h_slow_list(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16)
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
    if (n == 0) { /* answered by the test, later than the client's timeout */
        f->held[f->nheld++] = c;
        return;
    }
    f->held[f->nheld++] = c; /* the watch */
    f->done = true;
}

static void test_reflector_slow_list(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpc_new(&f->loop, &f->http), 0);
    f->srv = testsrv_start(&f->loop, h_slow_list, f);
    struct kube_config cfg = {.server = (char *)testsrv_url(f->srv), .token = "t0k"};
    struct kube_opts ko = {.request_timeout_ms = 200};
    assert_int_equal(kube_new(&f->loop, f->http, &cfg, &ko, &f->k), 0);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.backoff_initial_ms = 20, .backoff_max_ms = 100, .seed = 5};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    run_for(f, 600); /* three request timeouts */
    assert_int_equal(f->step, 1); /* the one list, not sent again */
    json_respond(f->held[0], 200, "{\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
                                  POD("p1", "1") "]}");
    run_until(f, &f->done);
    assert_int_equal(f->list_ends, 1);
    assert_true(has(f->targets[1], "watch=1"));
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* ---- backoff on a dead server -------------------------------------------- */

static void h_fail(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    (void)req;
    f->step++;
    json_respond(c, 500, "{\"kind\":\"Status\",\"message\":\"etcd is sad\",\"code\":500}");
    if (f->step == 5)
        f->done = true;
}

static void test_reflector_backoff(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_fail);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.backoff_initial_ms = 40, .backoff_max_ms = 200, .seed = 7};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    uint64_t t0 = uv_now(&f->loop);
    run_until(f, &f->done);
    uint64_t took = uv_now(&f->loop) - t0;
    const struct kube_reflector_stats *st = kube_reflector_stats(f->r);
    assert_int_equal(st->errors, 4);
    /* Waits of >= 40, 80, 160, 200 (capped) ms: at least 480 ms in all, jitter at most 2x. */
    assert_true(took >= 480);
    assert_true(st->last_delay_ms <= 200);
    assert_false(kube_reflector_synced(f->r));
    assert_int_equal(f->list_begins, 0);
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* Failures the server will repeat list again, as client-go's reflector and
 * pager: a page refused (400) restarts the list from its first page (the
 * same continue token was sent again for ever); a watch's 504 Too large
 * resource version (etcd restored from a snapshot) and 5 failed watches in
 * a row from one resourceVersion list again (the watch resumed from it for
 * ever, the view frozen); an HTTP 504 Too large resource version lists again
 * though it carries a Retry-After. */
static void h_repeat(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16)
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
    static const char status500[] = "{\"kind\":\"Status\",\"message\":\"etcd is sad\",\"code\":500}";
    if (n == 0) {
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"100\",\"continue\":\"c1\"},"
                             "\"items\":[" POD("p1", "1") "]}");
    } else if (n == 1) {
        json_respond(c, 400, "{\"kind\":\"Status\",\"message\":\"continue key is not valid\","
                             "\"reason\":\"BadRequest\",\"code\":400}");
    } else if (n == 2 || n == 4 || n == 10 || n == 12) {
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
                             POD("p1", "1") "]}");
        if (n == 12)
            f->done = true;
    } else if (n == 11) { /* as kube-apiserver answers it: a Retry-After beside */
        static const char tl[] = "{\"kind\":\"Status\",\"message\":\"Too large resource "
                                 "version: 100, current: 50\",\"reason\":\"Timeout\","
                                 "\"details\":{\"retryAfterSeconds\":1},\"code\":504}";
        testsrv_respond(c, 504, "application/json", tl, strlen(tl), "Retry-After: 1\r\n");
    } else if (n == 3) {
        testsrv_stream_begin(c, 200, "application/json");
        const char *s = EV("ERROR", "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":"
                                    "\"Too large resource version: 100, current: 50\","
                                    "\"reason\":\"Timeout\",\"code\":504}");
        testsrv_stream_chunk(c, s, strlen(s));
        testsrv_stream_end(c);
    } else {
        json_respond(c, 500, status500);
    }
}

static void test_reflector_lists_again(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_repeat);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.backoff_initial_ms = 10, .backoff_max_ms = 40, .page_limit = 1,
                                .min_watch_ms = 1, .seed = 7};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    run_until(f, &f->done);
    assert_string_equal(f->targets[1], "/api/v1/pods?limit=1&continue=c1");
    assert_string_equal(f->targets[2], "/api/v1/pods?limit=1"); /* from the first page */
    assert_true(has(f->targets[3], "watch=1"));
    assert_false(has(f->targets[4], "watch=1")); /* the 504: listed again */
    for (int k = 5; k < 10; k++)
        assert_true(has(f->targets[k], "watch=1&allowWatchBookmarks=true&resourceVersion=100&"));
    assert_false(has(f->targets[10], "watch=1")); /* 5 failures from one version */
    assert_true(has(f->targets[11], "watch=1"));
    assert_false(has(f->targets[12], "watch=1")); /* the 504 with a Retry-After: listed again */
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* A watch the server ends at once without an event (a proxy that closes
 * every long request): client-go's reflector calls it a "very short watch",
 * an error, and lists again after the backoff; resumed from the same
 * resourceVersion for ever, the view never learnt of a change. */
static void h_short(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16)
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
    if (!has(req->target, "watch=1")) {
        json_respond(c, 200, n == 0 ? "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}"
                                    : "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":["
                                      POD("p1", "15") "]}");
    } else if (n < 3) {
        testsrv_stream_begin(c, 200, "application/json");
        testsrv_stream_end(c); /* no event */
    } else {
        f->held[f->nheld++] = c;
        f->done = true;
    }
}

static void test_reflector_short_watch_lists_again(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_short);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.backoff_initial_ms = 10, .backoff_max_ms = 40,
                                .min_watch_ms = 1000, .seed = 5};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    run_until(f, &f->done);
    assert_false(has(f->targets[0], "watch=1"));
    assert_true(has(f->targets[1], "watch=1&allowWatchBookmarks=true&resourceVersion=10&"));
    assert_false(has(f->targets[2], "watch=1")); /* listed again, and learnt of p1 */
    assert_true(has(f->targets[3], "resourceVersion=20&"));
    assert_int_equal(f->list_ends, 2);
    assert_non_null(kube_store_pod(f->store, "ml", "p1"));
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* How long the view has been out of date: 0 after the list, growing from
 * the first failed watch, 0 again at the next bookmark; a quiet watch that
 * stays open healthy_ms counts as current too. */
static void h_down(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16)
        f->at[n] = uv_now(&f->loop);
    if (n == 0) {
        assert_false(has(req->target, "watch=1"));
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}");
    } else if (n < 4) {
        assert_true(has(req->target, "watch=1"));
        json_respond(c, 500, "{\"kind\":\"Status\",\"message\":\"etcd is sad\",\"code\":500}");
    } else if (n == 4) {
        testsrv_stream_begin(c, 200, "application/json");
        const char *s = EV("BOOKMARK", "{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"20\"}}");
        testsrv_stream_chunk(c, s, strlen(s));
        testsrv_stream_end(c); /* ended early, after the bookmark: resumed */
    } else if (n < 7) {
        json_respond(c, 500, "{\"kind\":\"Status\",\"message\":\"etcd is sad\",\"code\":500}");
    } else {
        testsrv_stream_begin(c, 200, "application/json"); /* open, quiet */
        f->held[f->nheld++] = c;
    }
    if (n == 3)
        f->done = true;
}

static void test_reflector_down(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_down);
    f->store = kube_store_new();
    struct kube_watch_opts o = {.backoff_initial_ms = 100, .backoff_max_ms = 400, .seed = 3,
                                .min_watch_ms = 1, .healthy_ms = 1500};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    assert_int_equal(kube_reflector_down_ms(f->r), 0);
    while (kube_reflector_stats(f->r)->errors == 0) /* the list, then the first failure */
        uv_run(&f->loop, UV_RUN_ONCE);
    /* down from that moment on, also within the millisecond (the loop's time) it failed in:
     * a checkpoint prune asks for 0 (read 0 there before) */
    assert_true(kube_reflector_down_ms(f->r) > 0);
    run_until(f, &f->done); /* then two more failed watches */
    assert_true(kube_reflector_synced(f->r));
    int64_t down = kube_reflector_down_ms(f->r);
    /* counted from the first failure (request 1), not the latest (3) */
    assert_true(down >= (int64_t)(uv_now(&f->loop) - f->at[1]) - 5);
    assert_true(down >= 300 - 5); /* two backoffs of >= 100 and 200 ms in between */
    while (f->step < 5) /* the next watch delivers a bookmark */
        run_for(f, 5);
    run_for(f, 5);
    assert_int_equal(kube_reflector_stats(f->r)->bookmarks, 1);
    /* cleared by the bookmark (the next watch may have failed since: counted from then,
     * not from the first failure over 300 ms ago) */
    assert_true(kube_reflector_down_ms(f->r) < 250);
    while (f->nheld == 0) /* two more failures, then a quiet watch held open */
        run_for(f, 20);
    uint64_t opened = f->at[7];
    assert_true(kube_reflector_down_ms(f->r) > 0);
    while (uv_now(&f->loop) - opened < 1400)
        run_for(f, 50);
    assert_true(kube_reflector_down_ms(f->r) > 0); /* not yet healthy_ms open */
    run_for(f, 200);
    assert_int_equal(kube_reflector_down_ms(f->r), 0);
    kube_reflector_close(f->r, on_closed, f);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* ---- a working watch whose connection drops ------------------------------- */

static void drop_held(uv_timer_t *t)
{
    struct fx *f = t->data;
    if (f->nheld > 0)
        testsrv_conn_close(f->held[--f->nheld]);
}

static void h_dropped(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    int n = f->step++;
    if (n < 16) {
        f->at[n] = uv_now(&f->loop);
        snprintf(f->targets[n], sizeof(f->targets[n]), "%s", req->target);
    }
    if (n == 0) {
        json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"100\"},\"items\":[]}");
        return;
    }
    f->held[f->nheld++] = c;
    if (n == 7) {
        f->done = true;
        return;
    }
    /* one event, then (as a proxy's idle timeout, or an API server's restart) the
     * connection is dropped mid-stream; once the silence before it is a second,
     * without an event */
    testsrv_stream_begin(c, 200, "application/json");
    char ev[200];
    snprintf(ev, sizeof(ev), EV("ADDED", "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"p%d\","
                                         "\"resourceVersion\":\"%d\"}}"), n, 100 + n);
    if (n != 6)
        testsrv_stream_chunk(c, ev, strlen(ev));
    uv_timer_start(f->drop, drop_held, n == 6 ? 1200 : 300, 0);
}

/* A watch that delivered events, or stayed open past min_watch_ms, and then
 * lost its connection ended as client-go's StreamWatcher ends a stream on a
 * probable EOF (a reset, a dropped connection): normally, the next watch
 * started at once from the last resourceVersion, no error counted and the
 * view not down. It was counted a failure and backed off: a proxy's idle
 * timeout every minute doubled the wait, up to 30 s, each time with no watch
 * open. */
static void test_reflector_dropped_connection_resumes_at_once(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    uv_timer_t drop;
    fx_init(f, h_dropped);
    uv_timer_init(&f->loop, &drop);
    drop.data = f;
    f->drop = &drop;
    f->store = kube_store_new();
    struct kube_watch_opts o = {.backoff_initial_ms = 1000, .backoff_max_ms = 8000,
                                .min_watch_ms = 1000, .healthy_ms = 5000, .seed = 3};
    assert_int_equal(kube_reflector_new(f->k, "/api/v1/pods", NULL, &o, &sink, f, &f->r), 0);
    run_until(f, &f->done);
    for (int i = 2; i <= 7; i++) {
        uint64_t open_ms = i == 7 ? 1200 : 300;
        char rv[40];
        snprintf(rv, sizeof(rv), "resourceVersion=%d&", i == 7 ? 105 : 100 + i - 1);
        if (!has(f->targets[i], rv))
            fail_msg("watch %d: %s, want %s", i, f->targets[i], rv);
        if (f->at[i] - f->at[i - 1] > open_ms + 800) /* backed off: at least open + 1000 */
            fail_msg("watch %d came %llu ms after the one before, open %llu ms", i,
                     (unsigned long long)(f->at[i] - f->at[i - 1]), (unsigned long long)open_ms);
    }
    assert_int_equal(kube_reflector_stats(f->r)->errors, 0);
    assert_int_equal(f->list_ends, 1);
    assert_int_equal(kube_reflector_down_ms(f->r), 0);
    assert_int_equal(kube_store_npods(f->store), 5);
    kube_reflector_close(f->r, on_closed, f);
    uv_close((uv_handle_t *)&drop, NULL);
    fx_finish(f, 3);
    kube_store_free(f->store);
    xfree(f);
}

/* ---- the caches ------------------------------------------------------------ */

#define DEP(name, enabled, app)                                                                \
    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"" name "\",\"resourceVersion\":\"5\","    \
    "\"annotations\":{\"gpuscaler.io/enabled\":\"" enabled "\"}},\"spec\":{\"replicas\":2,"    \
    "\"selector\":{\"matchLabels\":{\"app\":\"" app "\"}}}}"
#define LPOD(name, app)                                                                        \
    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"" name "\",\"labels\":{\"app\":\"" app     \
    "\"}},\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.9\"}}"

static void h_cache(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    f->step++;
    bool deps = has(req->target, "/deployments");
    assert_true(has(req->target, "/namespaces/ml/"));
    if (!has(req->target, "watch=1")) {
        if (deps)
            json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":["
                                 DEP("llama", "true", "llama") "," DEP("web", "false", "web") "]}");
        else
            json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":["
                                 LPOD("llama-1", "llama") "," LPOD("web-1", "web") "]}");
        return;
    }
    testsrv_stream_begin(c, 200, "application/json");
    const char *s = deps ? EV("MODIFIED", DEP("web", "true", "web"))
                         : EV("ADDED", LPOD("llama-2", "llama"));
    testsrv_stream_chunk(c, s, strlen(s));
    f->held[f->nheld++] = c; /* the streams stay open */
    if (f->nheld == 2)
        f->done = true;
}

static void on_changed(struct kube_cache *c, void *arg)
{
    struct fx *f = arg;
    (void)c;
    f->changed++;
}

static void test_cache(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_cache);
    /* a namespace named twice is listed and watched once (one watch request
     * of each kind below) */
    const char *nss[] = {"ml", "ml", NULL};
    struct kube_cache_opts o = {.namespaces = nss, .watch = {.seed = 1}};
    assert_int_equal(kube_cache_new(f->k, &o, on_changed, f, &f->cache), 0);
    assert_false(kube_cache_synced(f->cache));
    assert_false(kube_cache_ns_synced(f->cache, "ml"));
    assert_false(kube_cache_settled(f->cache, 1000));
    run_until(f, &f->done);
    /* Let the watch events be applied and the notification run. */
    run_for(f, 200);
    assert_true(kube_cache_synced(f->cache));
    assert_true(kube_cache_ns_synced(f->cache, "ml"));
    assert_true(kube_cache_settled(f->cache, 1000));
    assert_int_equal(kube_cache_ns_down_ms(f->cache, "ml", NULL), 0);
    assert_true(f->changed >= 1);
    size_t n;
    kube_cache_deployments(f->cache, &n);
    assert_int_equal(n, 2); /* llama, and web once its watch event enabled it */
    const struct kube_deployment *d = kube_cache_deployment(f->cache, "ml", "llama");
    assert_non_null(d);
    assert_int_equal(d->spec_replicas, 2);
    const struct kube_pod *const *pods = kube_cache_deployment_pods(f->cache, d, &n);
    assert_int_equal(n, 2);
    assert_string_equal(pods[0]->ip, "10.0.0.9");
    d = kube_cache_deployment(f->cache, "ml", "web");
    assert_non_null(d);
    kube_cache_deployment_pods(f->cache, d, &n);
    assert_int_equal(n, 1);
    assert_int_equal(kube_cache_npods(f->cache), 3);
    assert_non_null(kube_cache_pod(f->cache, "ml", "web-1"));

    struct util_buf m = {0};
    kube_cache_write_metrics(f->cache, &m);
    assert_non_null(strstr(m.data, "gpuscaler_kube_cache_synced 1\n"));
    assert_non_null(strstr(m.data, "gpuscaler_kube_cache_objects{kind=\"pod\"} 3\n"));
    assert_non_null(strstr(m.data, "gpuscaler_kube_watch_requests_total{kind=\"deployment\"} 1\n"));
    assert_non_null(strstr(m.data, "gpuscaler_kube_watch_events_total{kind=\"pod\"} 1\n"));
    util_buf_free(&m);

    /* Closing with both watch streams open cancels them and frees everything. */
    kube_cache_close(f->cache, on_closed, f);
    fx_finish(f, 3);
    xfree(f);
}

/* ---- a relist applied at once ---------------------------------------------- */

#define IPOD(name, rv, ip)                                                                     \
    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"" name "\",\"resourceVersion\":\"" rv   \
    "\",\"labels\":{\"app\":\"llama\"}},\"status\":{\"phase\":\"Running\",\"podIP\":\"" ip  \
    "\"}}"

/* Deployments: an empty list and a quiet watch; pods: held for the test. */
static void h_relist(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    if (has(req->target, "/deployments")) {
        if (!has(req->target, "watch=1")) {
            json_respond(c, 200, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}");
        } else {
            testsrv_stream_begin(c, 200, "application/json");
            f->held[f->nheld++] = c;
        }
        return;
    }
    if (f->pod_reqs < 16)
        snprintf(f->targets[f->pod_reqs], sizeof(f->targets[0]), "%s", req->target);
    f->pend = c;
    f->pod_reqs++;
}

static void wait_pod_req(struct fx *f, int n)
{
    if (!testsrv_run_until_count(&f->loop, &f->pod_reqs, n, 20000))
        fail_msg("timed out waiting for pod request %d (%d seen)", n, f->pod_reqs);
}

static const char *pod_ip(struct fx *f, const char *name)
{
    const struct kube_pod *p = kube_cache_pod(f->cache, "ml", name);
    return p ? p->ip : NULL;
}

/* A relist (after a watch's 410) is applied at once when its last page is
 * in, as client-go's reflector gathers a list's pages for one store.Replace:
 * between pages a reader sees the old state (a changed pod as it was, a new
 * one absent, a deleted one present), and pages of a list that failed and
 * started over are never seen. Applied page by page, the reader saw a's new
 * address and d while c, deleted, was still there. */
static void test_cache_relist_atomic(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_relist);
    const char *nss[] = {"ml", NULL};
    struct kube_cache_opts o = {.namespaces = nss,
                                .watch = {.seed = 3, .page_limit = 2, .backoff_initial_ms = 10,
                                          .backoff_max_ms = 40, .min_watch_ms = 1,
                                          .min_timeout_s = 5, .max_timeout_s = 10}};
    assert_int_equal(kube_cache_new(f->k, &o, on_changed, f, &f->cache), 0);
    /* the first list, in two pages */
    wait_pod_req(f, 1);
    json_respond(f->pend, 200, "{\"metadata\":{\"resourceVersion\":\"100\",\"continue\":\"c1\"},"
                               "\"items\":[" IPOD("a", "1", "10.0.0.1") "," IPOD("b", "2", "10.0.0.2")
                               "]}");
    wait_pod_req(f, 2);
    assert_null(pod_ip(f, "a")); /* the first list is staged too: nothing before it is whole */
    json_respond(f->pend, 200, "{\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
                               IPOD("c", "3", "10.0.0.3") "]}");
    /* its watch: the resourceVersion is too old */
    wait_pod_req(f, 3);
    assert_true(has(f->targets[2], "watch=1&allowWatchBookmarks=true&resourceVersion=100&"));
    assert_true(kube_cache_synced(f->cache));
    assert_int_equal(kube_cache_npods(f->cache), 3);
    testsrv_stream_begin(f->pend, 200, "application/json");
    const char *gone = EV("ERROR", "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}");
    testsrv_stream_chunk(f->pend, gone, strlen(gone));
    testsrv_stream_end(f->pend);
    /* the relist's first page: a changed, d new */
    wait_pod_req(f, 4);
    assert_string_equal(f->targets[3], "/api/v1/namespaces/ml/pods?limit=2");
    run_for(f, 20);
    int changed = f->changed;
    json_respond(f->pend, 200, "{\"metadata\":{\"resourceVersion\":\"200\",\"continue\":\"c2\"},"
                               "\"items\":[" IPOD("a", "11", "10.0.1.1") "," IPOD("d", "4", "10.0.0.4")
                               "]}");
    wait_pod_req(f, 5);
    assert_string_equal(f->targets[4], "/api/v1/namespaces/ml/pods?limit=2&continue=c2");
    assert_string_equal(pod_ip(f, "a"), "10.0.0.1");
    assert_null(pod_ip(f, "d"));
    assert_non_null(pod_ip(f, "c"));
    assert_int_equal(kube_cache_npods(f->cache), 3);
    assert_true(kube_cache_memory(f->cache) > 0);
    /* the second page fails: a 503 is retried from that page, and the view
     * stays as it was meanwhile */
    json_respond(f->pend, 503, "{\"kind\":\"Status\",\"code\":503}");
    wait_pod_req(f, 6);
    assert_string_equal(f->targets[5], "/api/v1/namespaces/ml/pods?limit=2&continue=c2");
    assert_string_equal(pod_ip(f, "a"), "10.0.0.1");
    assert_null(pod_ip(f, "d"));
    /* then refused (a 400): the list starts over, the first page's items void */
    json_respond(f->pend, 400, "{\"kind\":\"Status\",\"reason\":\"BadRequest\",\"code\":400}");
    wait_pod_req(f, 7);
    assert_string_equal(f->targets[6], "/api/v1/namespaces/ml/pods?limit=2");
    assert_string_equal(pod_ip(f, "a"), "10.0.0.1");
    assert_null(pod_ip(f, "d"));
    assert_non_null(pod_ip(f, "c"));
    assert_int_equal(f->changed, changed); /* nothing to tell so far */
    json_respond(f->pend, 200, "{\"metadata\":{\"resourceVersion\":\"300\"},\"items\":["
                               IPOD("a", "12", "10.0.2.1") "," IPOD("b", "2", "10.0.0.2") "]}");
    /* whole: applied at once, before the watch is sent */
    wait_pod_req(f, 8);
    assert_true(has(f->targets[7], "watch=1&allowWatchBookmarks=true&resourceVersion=300&"));
    assert_string_equal(pod_ip(f, "a"), "10.0.2.1");
    assert_string_equal(pod_ip(f, "b"), "10.0.0.2");
    assert_null(pod_ip(f, "c"));
    assert_null(pod_ip(f, "d"));
    assert_int_equal(kube_cache_npods(f->cache), 2);
    testsrv_stream_begin(f->pend, 200, "application/json");
    f->held[f->nheld++] = f->pend;
    run_for(f, 20);
    assert_true(f->changed > changed);
    assert_true(kube_cache_synced(f->cache));

    kube_cache_close(f->cache, on_closed, f);
    fx_finish(f, 3);
    xfree(f);
}

/* Closed in the middle of a relist: the staged pages are freed with it. */
static void test_cache_close_mid_list(void **state)
{
    (void)state;
    struct fx *f = xcalloc(1, sizeof(*f));
    fx_init(f, h_relist);
    struct kube_cache_opts o = {.watch = {.seed = 3, .page_limit = 2}};
    assert_int_equal(kube_cache_new(f->k, &o, on_changed, f, &f->cache), 0);
    wait_pod_req(f, 1);
    json_respond(f->pend, 200, "{\"metadata\":{\"resourceVersion\":\"100\",\"continue\":\"c1\"},"
                               "\"items\":[" IPOD("a", "1", "10.0.0.1") "," IPOD("b", "2", "10.0.0.2")
                               "]}");
    wait_pod_req(f, 2);
    assert_int_equal(kube_cache_npods(f->cache), 0);
    assert_false(kube_cache_synced(f->cache));
    kube_cache_close(f->cache, on_closed, f);
    fx_finish(f, 3);
    xfree(f);
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reflector_script),
        cmocka_unit_test(test_reflector_expired_continue),
        cmocka_unit_test(test_reflector_stalled_watch),
        cmocka_unit_test(test_reflector_partial_event),
        cmocka_unit_test(test_reflector_stall_after_periodic_bookmarks),
        cmocka_unit_test(test_reflector_cut_every_time_lists_again),
        cmocka_unit_test(test_reflector_quiet_watch_default),
        cmocka_unit_test(test_reflector_slow_list),
        cmocka_unit_test(test_reflector_backoff),
        cmocka_unit_test(test_reflector_lists_again),
        cmocka_unit_test(test_reflector_short_watch_lists_again),
        cmocka_unit_test(test_reflector_down),
        cmocka_unit_test(test_reflector_dropped_connection_resumes_at_once),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_cache_relist_atomic),
        cmocka_unit_test(test_cache_close_mid_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

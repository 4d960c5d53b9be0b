/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the /scale write (scale.c) against a loopback API server
 * (testsrv) that keeps one Deployment's replicas and resourceVersion and
 * answers a PATCH whose resourceVersion precondition fails with 409: what is
 * written after a conflict whose re-read finds a count changed by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/controller-int.h"
#include "httpc/testsrv.h"
#include "kube/kube.h"

#define SCALE_PATH "/apis/apps/v1/namespaces/a/deployments/x/scale"

struct api {
    int replicas, rv;
    int gets, patches, conflicts;
    int hand_at_patch; /* before the PATCH numbered so, someone scales to `hand` */
    int hand;
    void (*on_conflict)(void *arg); /* after a 409 is sent */
    void *arg;
};

static void h_api(struct testsrv_conn *conn, const struct testsrv_req *r, void *arg)
{
    struct api *a = arg;
    char body[256];
    if (strcmp(r->target, SCALE_PATH) != 0) {
        testsrv_respond(conn, 404, "application/json", "{}", 2, NULL);
        return;
    }
    if (strcmp(r->method, "GET") == 0) {
        a->gets++;
        snprintf(body, sizeof(body),
                 "{\"kind\":\"Scale\",\"metadata\":{\"uid\":\"u\",\"resourceVersion\":\"%d\"},"
                 "\"spec\":{\"replicas\":%d}}", a->rv, a->replicas);
        testsrv_respond(conn, 200, "application/json", body, strlen(body), NULL);
        return;
    }
    assert_string_equal(r->method, "PATCH");
    a->patches++;
    if (a->patches == a->hand_at_patch) { /* kubectl scale got there first */
        a->replicas = a->hand;
        a->rv++;
    }
    json_error_t e;
    json_t *p = json_loadb(r->body, r->body_len, 0, &e);
    assert_non_null(p);
    const char *rv = json_string_value(
        json_object_get(json_object_get(p, "metadata"), "resourceVersion"));
    json_int_t want = json_integer_value(json_object_get(json_object_get(p, "spec"), "replicas"));
    char cur[16];
    snprintf(cur, sizeof(cur), "%d", a->rv);
    if (!rv || strcmp(rv, cur) != 0) {
        json_decref(p);
        a->conflicts++;
        const char *c = "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"message\":\"the object "
                        "has been modified\",\"code\":409}";
        testsrv_respond(conn, 409, "application/json", c, strlen(c), NULL);
        if (a->on_conflict)
            a->on_conflict(a->arg);
        return;
    }
    json_decref(p);
    a->replicas = (int)want;
    a->rv++;
    snprintf(body, sizeof(body),
             "{\"kind\":\"Scale\",\"metadata\":{\"uid\":\"u\",\"resourceVersion\":\"%d\"},"
             "\"spec\":{\"replicas\":%d}}", a->rv, a->replicas);
    testsrv_respond(conn, 200, "application/json", body, strlen(body), NULL);
}

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    struct testsrv *srv;
    struct controller *c;
    struct ctl_wl *w;
    struct api api;
    int closes;
};

static void on_closed(void *arg)
{
    ((struct fx *)arg)->closes++;
}

static struct fx *fx_new(void)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpc_new(&f->loop, &f->http), 0);
    f->srv = testsrv_start(&f->loop, h_api, &f->api);
    struct kube_config cfg = {.server = (char *)testsrv_url(f->srv), .token = "t"};
    struct controller *c = xcalloc(1, sizeof(*c));
    c->loop = &f->loop;
    c->identity = "test";
    assert_int_equal(kube_new(&f->loop, f->http, &cfg, NULL, &c->kube), 0);
    struct ctl_wl *w = xcalloc(1, sizeof(*w));
    w->ns = xstrdup("a");
    w->name = xstrdup("x");
    w->uid = xstrdup("u");
    w->want_target = -1;
    /* in every bucket: ctl_wl_find's hash is ctl.c's own */
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        c->table[b] = w;
    f->c = c;
    f->w = w;
    f->api.arg = f;
    return f;
}

static void fx_finish(struct fx *f)
{
    kube_close(f->c->kube, on_closed, f);
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closes, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(f->w->ns);
    xfree(f->w->name);
    xfree(f->w->uid);
    xfree(f->w);
    xfree(f->c);
    xfree(f);
}

static bool io_done(void *arg)
{
    return ((struct fx *)arg)->c->pending_io == 0;
}

/* A tick of the decision loop that writes target from the count it saw
 * (ctl_act's write). */
static void tick_writes(struct fx *f, int32_t from, int32_t target)
{
    f->w->want_target = target;
    ctl_scale_write(f->c, f->w, from, target);
}

/* The newer tick comes while the write is in flight, having seen the hand
 * scale (the Deployment watch's 3): the same target, from another count. */
static void newer_tick_on_hand_count(void *arg)
{
    struct fx *f = arg;
    tick_writes(f, f->api.hand, 4);
}

/* A write 2 -> 4 meets a 409 (scaled to 3 by hand meanwhile); its re-read
 * finds 3, a count its decision did not see, and it gives up. A newer tick
 * decided 3 -> 4 while it was in flight: the same target, but from the
 * count there now, so a real change that is written (it was dropped as
 * "this write's count" until the next tick). */
static void test_hand_scale_after_conflict_then_same_target(void **st)
{
    (void)st;
    struct fx *f = fx_new();
    f->api.replicas = 2;
    f->api.rv = 1;
    f->api.hand_at_patch = 1;
    f->api.hand = 3;
    f->api.on_conflict = newer_tick_on_hand_count;
    tick_writes(f, 2, 4);
    assert_true(f->w->scaling);
    assert_true(testsrv_run_until(&f->loop, io_done, f, 10000));
    assert_int_equal(f->api.conflicts, 1);
    assert_int_equal(f->api.replicas, 4);
    assert_int_equal(f->api.patches, 2);
    assert_int_equal(f->api.gets, 3); /* the read, the re-read, the newer tick's read */
    assert_false(f->w->scaling);
    assert_false(f->w->scale_waiting);
    assert_int_equal((int)f->c->scale_patches, 1);
    fx_finish(f);
}

/* The newer tick had not seen the hand scale (it decided from 2, as the
 * write in flight did): its write would find the same 3 and give up too, so
 * it is not sent; the next tick decides on 3. */
static void newer_tick_on_old_count(void *arg)
{
    struct fx *f = arg;
    tick_writes(f, 2, 4);
}

static void test_same_decision_after_conflict_waits_for_the_next_tick(void **st)
{
    (void)st;
    struct fx *f = fx_new();
    f->api.replicas = 2;
    f->api.rv = 1;
    f->api.hand_at_patch = 1;
    f->api.hand = 3;
    f->api.on_conflict = newer_tick_on_old_count;
    tick_writes(f, 2, 4);
    assert_true(testsrv_run_until(&f->loop, io_done, f, 10000));
    assert_int_equal(f->api.replicas, 3);
    assert_int_equal(f->api.patches, 1);
    assert_int_equal(f->api.gets, 2);
    assert_false(f->w->scaling);
    assert_false(f->w->scale_waiting);
    fx_finish(f);
}

/* No hand change: the conflict (another writer's resourceVersion bump) is
 * retried and the target written; a newer tick's same count is not written
 * twice. */
static void bump_rv_and_repeat(void *arg)
{
    struct fx *f = arg;
    tick_writes(f, 2, 4);
}

static void test_conflict_retried_same_target_written_once(void **st)
{
    (void)st;
    struct fx *f = fx_new();
    f->api.replicas = 2;
    f->api.rv = 1;
    f->api.hand_at_patch = 1;
    f->api.hand = 2; /* an annotation write: the version moves, the count does not */
    f->api.on_conflict = bump_rv_and_repeat;
    tick_writes(f, 2, 4);
    assert_true(testsrv_run_until(&f->loop, io_done, f, 10000));
    assert_int_equal(f->api.replicas, 4);
    assert_int_equal(f->api.patches, 2);
    assert_int_equal(f->api.gets, 2);
    assert_int_equal((int)f->c->scale_patches, 1);
    assert_int_equal((int)f->c->scale_conflicts, 1);
    fx_finish(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_scale_after_conflict_then_same_target),
        cmocka_unit_test(test_same_decision_after_conflict_waits_for_the_next_tick),
        cmocka_unit_test(test_conflict_retried_same_target_written_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

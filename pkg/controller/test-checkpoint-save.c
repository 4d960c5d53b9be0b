/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint saves (checkpoint.c) against a loopback API server (testsrv)
 * that keeps one checkpoint ConfigMap, applies merge patches to it as
 * kube-apiserver does and refuses one that would take it past 1 MiB with
 * kube-apiserver's 422 "Too long": a save refused so because another
 * replica grew the ConfigMap since it was read here is read again and
 * saved again with what then fits, once; a second refusal is not read
 * again, and a 422 of another kind is not retried. It refuses a key in both
 * data and binaryData as ConfigMap validation does: a save that writes a
 * tracked Deployment's key removes its copy in the other map, however many
 * removals wait before it; a map a read adds to a queued removal while a
 * save is in flight stays queued, as does a removal queued again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/checkpoint-testutil.h"
#include "controller/controller-int.h"
#include "httpc/testsrv.h"
#include "kube/kube.h"

#define MiB (1024 * 1024)

struct api {
    char path[256];         /* the ConfigMap's */
    json_t *cm;             /* the ConfigMap, NULL while there is none */
    char log[256];          /* the requests, "PATCH GET PATCH " */
    int patches;
    json_t *patch_bodies;   /* every PATCH's body, in order */
    /* before PATCH i + 1 is applied, another replica's writes make
     * data.other grow_to[i] bytes (0: nothing changes) */
    size_t grow_to[4];
    const char *refuse_with; /* every PATCH refused with this 422 message */
};

static void respond_json(struct testsrv_conn *conn, int status, json_t *body)
{
    char *s = json_dumps(body, JSON_COMPACT);
    assert_non_null(s);
    testsrv_respond(conn, status, "application/json", s, strlen(s), NULL);
    free(s);
}

static void respond_status(struct testsrv_conn *conn, int code, const char *reason,
                           const char *message)
{
    json_t *st = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion",
                           "v1", "status", "Failure", "reason", reason, "message", message,
                           "code", code);
    respond_json(conn, code, st);
    json_decref(st);
}

static void grow(struct api *a, size_t to)
{
    char *fill = malloc(to + 1);
    assert_non_null(fill);
    memset(fill, 'x', to);
    fill[to] = '\0';
    json_t *data = json_object_get(a->cm, "data");
    if (!data) {
        data = json_object();
        json_object_set_new(a->cm, "data", data);
    }
    json_object_set_new(data, "other", json_string(fill));
    free(fill);
}

static void h_api(struct testsrv_conn *conn, const struct testsrv_req *r, void *arg)
{
    struct api *a = arg;
    if (strcmp(r->target, a->path) != 0) {
        respond_status(conn, 404, "NotFound", "not here");
        return;
    }
    size_t n = strlen(a->log);
    snprintf(a->log + n, sizeof(a->log) - n, "%s ", r->method);
    if (strcmp(r->method, "GET") == 0) {
        if (!a->cm)
            respond_status(conn, 404, "NotFound", "configmaps \"ckpt-0\" not found");
        else
            respond_json(conn, 200, a->cm);
        return;
    }
    assert_string_equal(r->method, "PATCH");
    a->patches++;
    json_t *p = json_loadb(r->body, r->body_len, 0, NULL);
    assert_non_null(p);
    json_array_append(a->patch_bodies, p);
    if (a->patches <= (int)UTIL_ARRAY_LEN(a->grow_to) && a->grow_to[a->patches - 1])
        grow(a, a->grow_to[a->patches - 1]);
    if (a->refuse_with) {
        respond_status(conn, 422, "Invalid", a->refuse_with);
        json_decref(p);
        return;
    }
    json_t *next = json_deep_copy(a->cm);
    ctl_ckpt_test_merge(next, json_object_get(p, "binaryData"), json_object_get(p, "data"));
    json_decref(p);
    /* ValidateConfigMap (kubernetes pkg/apis/core/validation): a data key
     * also in binaryData */
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(next, "data"), key, v) {
        if (!json_object_get(json_object_get(next, "binaryData"), key))
            continue;
        char msg[600];
        snprintf(msg, sizeof(msg), "ConfigMap \"ckpt-0\" is invalid: data[%s]: Invalid value: "
                                   "\"%s\": duplicate of key present in binaryData", key, key);
        json_decref(next);
        respond_status(conn, 422, "Invalid", msg);
        return;
    }
    long long size = ctl_ckpt_test_size(next);
    assert_true(size >= 0);
    if (size > MiB) { /* ValidateConfigMap, on the object the patch makes */
        json_decref(next);
        respond_status(conn, 422, "Invalid", "ConfigMap \"ckpt-0\" is invalid: []: Too long: "
                                             "must have at most 1048576 bytes");
        return;
    }
    json_decref(a->cm);
    a->cm = next;
    respond_json(conn, 200, a->cm);
}

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    struct testsrv *srv;
    struct ctl_config cfg;
    struct controller *c;
    struct api api;
    int closes;
};

static void on_closed(void *arg)
{
    ((struct fx *)arg)->closes++;
}

/* A controller of one checkpoint ConfigMap, tracking ns/small (an hour of
 * history) and ns/large (two days), both read already; the API server
 * holds the ConfigMap with data.other of 1 byte, as read here. */
static struct fx *fx_new(void)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpc_new(&f->loop, &f->http), 0);
    f->srv = testsrv_start(&f->loop, h_api, &f->api);
    struct kube_config kc = {.server = (char *)testsrv_url(f->srv), .token = "t"};
    ctl_config_init(&f->cfg);
    f->cfg.checkpoint_configmaps = 1;
    struct controller *c = xcalloc(1, sizeof(*c));
    c->loop = &f->loop;
    c->cfg = &f->cfg;
    c->identity = "test";
    c->checkpoint_prefix = "ckpt";
    assert_int_equal(kube_new(&f->loop, f->http, &kc, NULL, &c->kube), 0);
    ctl_checkpoint_init(c);
    const char *names[] = {"small", "large"};
    const int obs[] = {60, 2880};
    for (size_t i = 0; i < 2; i++) {
        struct ctl_wl *w = ctl_ckpt_test_wl_new("ns", names[i], "u-1");
        assert_int_equal(ctl_ckpt_test_wl_history(w, obs[i]), 0);
        w->checkpoint_loaded = w->checkpoint_ready = true;
        ctl_ckpt_test_table_add(c, w);
    }
    f->c = c;
    snprintf(f->api.path, sizeof(f->api.path), "/api/v1/namespaces/%s/configmaps/ckpt-0",
             f->cfg.leader.namespace_);
    f->api.cm = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                          "ConfigMap", "metadata", "name", "ckpt-0", "data", "other", "x");
    f->api.patch_bodies = json_array();
    ctl_checkpoint_noted(c, 0, f->api.cm); /* the read */
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
    ctl_ckpt_test_table_free(f->c);
    ctl_checkpoint_free(f->c);
    xfree(f->c);
    ctl_config_free(&f->cfg);
    json_decref(f->api.cm);
    json_decref(f->api.patch_bodies);
    xfree(f);
}

static bool io_done(void *arg)
{
    return ((struct fx *)arg)->c->pending_io == 0;
}

/* The bytes the API server counts of each Deployment's entries (the four
 * keys) in a save: small's and large's, built without sending it. */
static void entry_sizes(struct fx *f, long long *small, long long *large)
{
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 2);
    long long n[2] = {0, 0};
    const char *names[] = {"small", "large"};
    for (size_t i = 0; i < 2; i++) {
        json_t *one = json_object();
        json_t *bin = json_object(), *text = json_object();
        static const char *const whats[] = {"forecast", "capacity", "unit", "uid"};
        for (size_t k = 0; k < 4; k++) {
            char key[64];
            snprintf(key, sizeof(key), "%s.ns_%s", whats[k], names[i]);
            json_t *v = json_object_get(k < 2 ? s.bin : s.text, key);
            assert_non_null(v);
            json_object_set(k < 2 ? bin : text, key, v);
        }
        ctl_ckpt_test_merge(one, bin, text);
        n[i] = ctl_ckpt_test_size(one);
        json_decref(bin);
        json_decref(text);
        json_decref(one);
    }
    ctl_checkpoint_save_free(&s);
    *small = n[0];
    *large = n[1];
    assert_true(*large > 2 * *small); /* the room below fits small alone */
}

static bool carries(const json_t *patch, const char *key)
{
    const json_t *v = json_object_get(json_object_get(patch, "binaryData"), key);
    return json_is_string(v);
}

/* The ConfigMap grew (another replica's entries) after it was read here,
 * leaving room for small's state but not for both: the save of both is
 * refused as too long; the ConfigMap is read again and small's state saved
 * at once, large's left out (its state saved before stays). */
static void test_refused_as_too_long_read_and_saved_again(void **st)
{
    (void)st;
    struct fx *f = fx_new();
    long long small, large;
    entry_sizes(f, &small, &large);
    f->api.grow_to[0] = (size_t)(MiB - small - large / 2); /* before the first PATCH */
    uv_update_time(&f->loop);
    ctl_checkpoint_tick(f->c, util_now_unix_ms(), true);
    assert_true(testsrv_run_until(&f->loop, io_done, f, 10000));
    assert_string_equal(f->api.log, "PATCH GET PATCH ");
    json_t *first = json_array_get(f->api.patch_bodies, 0),
           *second = json_array_get(f->api.patch_bodies, 1);
    assert_true(carries(first, "forecast.ns_small") && carries(first, "forecast.ns_large"));
    assert_true(carries(second, "forecast.ns_small"));
    assert_false(carries(second, "forecast.ns_large"));
    /* stored: small's entries beside the other replica's, within the 1 MiB */
    json_t *bin = json_object_get(f->api.cm, "binaryData");
    json_t *text = json_object_get(f->api.cm, "data");
    assert_non_null(json_object_get(bin, "forecast.ns_small"));
    assert_non_null(json_object_get(bin, "capacity.ns_small"));
    assert_string_equal(json_string_value(json_object_get(text, "uid.ns_small")), "u-1");
    assert_null(json_object_get(bin, "forecast.ns_large"));
    assert_int_equal(json_string_length(json_object_get(text, "other")), f->api.grow_to[0]);
    assert_true(ctl_ckpt_test_size(f->api.cm) <= MiB);
    assert_int_equal(ctl_checkpoint_saving(f->c), 0);
    fx_finish(f);
}

/* Grown again before the save after the read: that one is refused too, and
 * not read again (once: the next save is the interval's). */
static void test_refused_twice_read_once(void **st)
{
    (void)st;
    struct fx *f = fx_new();
    long long small, large;
    entry_sizes(f, &small, &large);
    /* the read answers with room for small; another replica takes it before the save */
    f->api.grow_to[0] = (size_t)(MiB - small - large / 2);
    f->api.grow_to[1] = (size_t)(MiB - small / 2);
    uv_update_time(&f->loop);
    ctl_checkpoint_tick(f->c, util_now_unix_ms(), true);
    assert_true(testsrv_run_until(&f->loop, io_done, f, 10000));
    assert_string_equal(f->api.log, "PATCH GET PATCH ");
    assert_null(json_object_get(f->api.cm, "binaryData"));
    assert_int_equal(ctl_checkpoint_saving(f->c), 0);
    fx_finish(f);
}

/* A 422 that is not about the size (a key the API server refuses) is not
 * read again: a save after a read would be refused the same way. */
static void test_other_refusal_not_read_again(void **st)
{
    (void)st;
    struct fx *f = fx_new();
    f->api.refuse_with = "ConfigMap \"ckpt-0\" is invalid: data[x]: Invalid value: \"x\": a "
                         "valid config key must consist of alphanumeric characters";
    uv_update_time(&f->loop);
    ctl_checkpoint_tick(f->c, util_now_unix_ms(), true);
    assert_true(testsrv_run_until(&f->loop, io_done, f, 10000));
    assert_string_equal(f->api.log, "PATCH ");
    assert_int_equal(ctl_checkpoint_saving(f->c), 0);
    fx_finish(f);
}

static bool all_synced(const void *arg, const char *ns)
{
    (void)arg;
    (void)ns;
    return true;
}

/* The read of the ConfigMap the API server holds now (its size, and the keys
 * pruned against the Deployments small and large). */
static void read_again(struct fx *f)
{
    struct kube_deployment d[] = {{.ns = "ns", .name = "small"}, {.ns = "ns", .name = "large"}};
    const struct kube_deployment *ds[] = {&d[0], &d[1]};
    ctl_checkpoint_noted(f->c, 0, f->api.cm);
    ctl_checkpoint_prune(f->c, 0, f->api.cm, ds, 2, all_synced, NULL);
}

static void save_now(struct fx *f)
{
    uv_update_time(&f->loop);
    ctl_checkpoint_tick(f->c, util_now_unix_ms(), true);
    assert_true(testsrv_run_until(&f->loop, io_done, f, 10000));
}

/* A copy of a tracked Deployment's key in the other map (capacity.ns_small
 * in data) behind more than 4,096 removals queued before it (the keys of
 * Deployments gone, in binaryData: a read lists those first): the first
 * save writes binaryData.capacity.ns_small and removes the copy in data at
 * once. It was removed only when its turn in the queue came, so the key
 * stood in both maps after the patch: the API server refused that save, and
 * every later one, the same way (a 422 that is not "Too long"). */
static void test_wrong_map_copy_behind_the_queue_removed(void **st)
{
    (void)st;
    enum { NGONE = 5000 };
    struct fx *f = fx_new();
    json_t *bin = json_object();
    char key[64];
    for (int i = 0; i < NGONE; i++) {
        snprintf(key, sizeof(key), "forecast.ns_gone-%d", i);
        json_object_set_new(bin, key, json_string("AAAA"));
    }
    json_object_set_new(f->api.cm, "binaryData", bin);
    json_object_set_new(json_object_get(f->api.cm, "data"), "capacity.ns_small",
                        json_string("AAAA"));
    read_again(f);
    save_now(f);
    assert_string_equal(f->api.log, "PATCH ");
    bin = json_object_get(f->api.cm, "binaryData");
    json_t *text = json_object_get(f->api.cm, "data");
    assert_true(json_is_string(json_object_get(bin, "capacity.ns_small")));
    assert_null(json_object_get(text, "capacity.ns_small"));
    assert_true(json_is_string(json_object_get(text, "uid.ns_small")));
    /* the oldest 4,096 removals went with it, the rest wait */
    assert_null(json_object_get(bin, "forecast.ns_gone-0"));
    assert_int_equal(json_object_size(bin), NGONE - 4096 + 4);
    /* the next save takes the rest, and is taken too */
    save_now(f);
    assert_string_equal(f->api.log, "PATCH PATCH ");
    bin = json_object_get(f->api.cm, "binaryData");
    assert_int_equal(json_object_size(bin), 4);
    struct ctl_ckpt_save s;
    ctl_checkpoint_build(f->c, 0, &s);
    assert_int_equal(s.queued, 0);
    ctl_checkpoint_save_free(&s);
    fx_finish(f);
}

/* A read answered while a save was in flight found a key queued for removal
 * from binaryData in data too: once the save is written, the key stays
 * queued for data (the save settled binaryData only), and the next save
 * removes it there. The whole entry left the queue, and the copy in data
 * stayed until a later read found it again. */
static void test_map_added_in_flight_stays_queued(void **st)
{
    (void)st;
    struct fx *f = fx_new();
    json_object_set_new(f->api.cm, "binaryData",
                        json_pack("{s:s}", "forecast.ns_gone", "AAAA"));
    read_again(f);
    uv_update_time(&f->loop);
    ctl_checkpoint_tick(f->c, util_now_unix_ms(), true);
    assert_int_equal(ctl_checkpoint_saving(f->c), 1);
    /* meanwhile another writer put a copy in data, and a read saw it */
    json_object_set_new(json_object_get(f->api.cm, "data"), "forecast.ns_gone",
                        json_string("AAAA"));
    read_again(f);
    assert_true(testsrv_run_until(&f->loop, io_done, f, 10000));
    assert_string_equal(f->api.log, "PATCH ");
    assert_null(json_object_get(json_object_get(f->api.cm, "binaryData"), "forecast.ns_gone"));
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.queued, 1);
    assert_true(json_is_null(json_object_get(s.text, "forecast.ns_gone")));
    /* the read, answered with the save in flight, found it in binaryData too
     * (maybe before the save was applied): queued again there, it is removed
     * again, which is no change on the API server */
    json_t *again = json_object_get(s.bin, "forecast.ns_gone");
    assert_true(!again || json_is_null(again));
    ctl_checkpoint_save_free(&s);
    save_now(f);
    assert_null(json_object_get(json_object_get(f->api.cm, "data"), "forecast.ns_gone"));
    ctl_checkpoint_build(f->c, 0, &s);
    assert_int_equal(s.queued, 0);
    ctl_checkpoint_save_free(&s);
    fx_finish(f);
}

/* A Deployment removed (its keys queued for removal) and created again
 * before a save: the save writes its keys, tracked again, and settles their
 * removal. Removed again while that save is in flight, its keys are queued
 * again: once the save is written they stay queued, and the next save
 * removes them. The save's answer settled the removal queued after it was
 * built, so the keys it wrote stayed in the ConfigMap for good. */
static void test_removed_again_in_flight_stays_queued(void **st)
{
    (void)st;
    struct fx *f = fx_new();
    struct ctl_ckpt *k = &f->c->ckpt[0];
    static const char *const keys[] = {"forecast.ns_small", "capacity.ns_small",
                                       "unit.ns_small", "uid.ns_small"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(keys); i++)
        ctl_ckpt_drop(k, keys[i], ctl_ckpt_home(keys[i]));
    uv_update_time(&f->loop);
    ctl_checkpoint_tick(f->c, util_now_unix_ms(), true);
    assert_int_equal(ctl_checkpoint_saving(f->c), 1);
    /* removed again: out of the table (the sweep), its keys queued */
    struct ctl_wl *gone = NULL;
    for (size_t b = 0; b < CTL_WL_BUCKETS && !gone; b++)
        for (struct ctl_wl **pp = &f->c->table[b]; *pp; pp = &(*pp)->next)
            if (strcmp((*pp)->name, "small") == 0) {
                gone = *pp;
                *pp = gone->next;
                break;
            }
    assert_non_null(gone);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(keys); i++)
        ctl_ckpt_drop(k, keys[i], ctl_ckpt_home(keys[i]));
    assert_true(testsrv_run_until(&f->loop, io_done, f, 10000));
    assert_string_equal(f->api.log, "PATCH ");
    json_t *bin = json_object_get(f->api.cm, "binaryData");
    assert_true(json_is_string(json_object_get(bin, "forecast.ns_small")));
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.queued, 4);
    ctl_checkpoint_save_free(&s);
    save_now(f);
    bin = json_object_get(f->api.cm, "binaryData");
    json_t *text = json_object_get(f->api.cm, "data");
    for (size_t i = 0; i < UTIL_ARRAY_LEN(keys); i++) {
        assert_null(json_object_get(bin, keys[i]));
        assert_null(json_object_get(text, keys[i]));
    }
    assert_true(json_is_string(json_object_get(bin, "forecast.ns_large")));
    ctl_checkpoint_build(f->c, 0, &s);
    assert_int_equal(s.queued, 0);
    ctl_checkpoint_save_free(&s);
    ctl_ckpt_test_wl_free(gone);
    fx_finish(f);
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_as_too_long_read_and_saved_again),
        cmocka_unit_test(test_refused_twice_read_once),
        cmocka_unit_test(test_other_refusal_not_read_again),
        cmocka_unit_test(test_wrong_map_copy_behind_the_queue_removed),
        cmocka_unit_test(test_map_added_in_flight_stays_queued),
        cmocka_unit_test(test_removed_again_in_flight_stays_queued),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

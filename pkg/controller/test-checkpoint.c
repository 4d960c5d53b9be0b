/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoint saves and reads (checkpoint.c), on a controller built by hand
 * (no API server): the keys a read prunes, on many keys; the removals queued
 * once each; a save that would pass the ConfigMap's 1 MiB keeps as many
 * Deployments' states as fit; a Deployment whose term is about to end
 * (CKPT_MIN_TERM_MS) is left out of a save; a checkpoint of another release's
 * format is not saved over for its hour; keys of ours in the other map than
 * theirs are removed from it; a capacity state that took a gauge of 1e300
 * restores. (test-checkpoint-save.c: saves against a loopback API server.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <inttypes.h>

#include "controller/checkpoint-testutil.h"
#include "controller/controller-int.h"
#include "forecast/forecast.h"
#include "kube/kube.h"
#include "shard/shard.h"
#include "util/util.h"

/* CKPT_MIN_TERM_MS in checkpoint.c: a term ending sooner leaves its Deployments out */
#define MIN_TERM_MS 1000
#define MiB (1024 * 1024)

static double secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct fixture {
    struct ctl_config cfg;
    struct controller *c;
    uv_loop_t loop;
};

static struct fixture *fx_new(size_t nckpt)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    ctl_config_init(&f->cfg);
    f->cfg.checkpoint_configmaps = (int64_t)nckpt;
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->c = calloc(1, sizeof(*f->c));
    assert_non_null(f->c);
    f->c->cfg = &f->cfg;
    f->c->loop = &f->loop;
    f->c->identity = "test";
    f->c->checkpoint_prefix = "ckpt";
    ctl_checkpoint_init(f->c);
    return f;
}

/* A Deployment tracked here, its state read, with a history of n
 * observations (checkpoint-testutil.c): states of different sizes. */
static struct ctl_wl *wl_new(const char *ns, const char *name, int observations)
{
    struct ctl_wl *w = ctl_ckpt_test_wl_new(ns, name, "u-1");
    assert_int_equal(ctl_ckpt_test_wl_history(w, observations), 0);
    w->checkpoint_loaded = w->checkpoint_ready = true;
    return w;
}

static void fx_free(struct fixture *f)
{
    ctl_ckpt_test_table_free(f->c);
    ctl_checkpoint_free(f->c);
    free(f->c);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    ctl_config_free(&f->cfg);
    free(f);
}

/* What the API server counts of a save's entry: a data value's bytes, a
 * binaryData value's decoded bytes. */
static size_t value_bytes(json_t *v, bool binary)
{
    if (!binary)
        return json_string_length(v);
    char *raw = NULL;
    size_t len = 0;
    assert_int_equal(kube_base64_decode(json_string_value(v), json_string_length(v), &raw, &len),
                     0);
    xfree(raw);
    return len;
}

/* The bytes a save carries for ns/name (its four keys). */
static size_t entry_bytes(const struct ctl_ckpt_save *s, const char *ns, const char *name)
{
    static const char *const whats[] = {"forecast", "capacity", "unit", "uid"};
    size_t n = 0;
    char key[300];
    for (size_t i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "%s.%s_%s", whats[i], ns, name);
        json_t *v = json_object_get(i < 2 ? s->bin : s->text, key);
        if (v)
            n += value_bytes(v, i < 2);
    }
    return n;
}

/* A key of the hashed form, as docs/operations.md describes it: the name cut
 * so that the key is 253 long, then '.' and the 16 hex digits of the hash. */
static void hashed_key(const char *what, const char *ns, const char *name, char *out, size_t len)
{
    int keep = 253 - (int)strlen(what) - 1 - (int)strlen(ns) - 1 - 17;
    snprintf(out, len, "%s.%s_%.*s.%016" PRIx64, what, ns, keep, name, shard_hash(ns, name));
    assert_int_equal(strlen(out), 253);
}

static bool synced_but_lagging(const void *arg, const char *ns)
{
    (void)arg;
    return strcmp(ns, "lagging") != 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys a read prunes, on a ConfigMap of 80,000 keys: exactly those of
 * Deployments that are gone or belong to another ConfigMap, of plain, dotted
 * and hashed names; never a key that is not gpuscaler's, nor one of a
 * namespace not listed in full. Each key was matched by a scan of every
 * Deployment, and queued by a scan of the queue: about 3e9 comparisons. */
static void test_prune_many_keys(void **state)
{
    (void)state;
    enum { NLIVE = 4000, NGONE = 16000, NCKPT = 4 };
    static const char *const whats[] = {"forecast", "capacity", "unit", "uid"};
    const size_t idx = 1;
    json_t *body = json_pack("{s:{}, s:{}}", "binaryData", "data");
    json_t *bin = json_object_get(body, "binaryData"), *text = json_object_get(body, "data");
    struct kube_deployment *d = calloc(NLIVE + 2, sizeof(*d));
    const struct kube_deployment **ds = calloc(NLIVE + 2, sizeof(*ds));
    char **names = calloc(NLIVE + 2, sizeof(*names));
    assert_true(d && ds && names);
    char key[300], name[260];
    size_t nwant = 0, wcap = 4 * (NGONE + NLIVE + 2);
    char **want = calloc(wcap, sizeof(*want));
    size_t nkeys = 0;
    /* Deployments: of ConfigMap idx or another, a dotted name, a long one */
    for (size_t i = 0; i < NLIVE + 2; i++) {
        if (i == NLIVE)
            snprintf(name, sizeof(name), "%s", "keep.me.v1");
        else if (i == NLIVE + 1)
            snprintf(name, sizeof(name), "here%0240d", 7);
        else
            snprintf(name, sizeof(name), "live-%zu", i);
        names[i] = xstrdup(name);
        d[i].ns = "ns";
        d[i].name = names[i];
        ds[i] = &d[i];
        bool mine = ctl_checkpoint_index("ns", names[i], NCKPT) == idx;
        for (size_t k = 0; k < 4; k++) {
            if (strlen(names[i]) > 200)
                hashed_key(whats[k], "ns", names[i], key, sizeof(key));
            else
                snprintf(key, sizeof(key), "%s.ns_%s", whats[k], names[i]);
            json_object_set_new(k < 2 ? bin : text, key, json_string("AAAA"));
            nkeys++;
            if (!mine) /* kept in another ConfigMap than its own */
                want[nwant++] = xstrdup(key);
        }
    }
    /* Deployments that are gone: plain, dotted and long names */
    for (size_t i = 0; i < NGONE; i++) {
        if (i % 1000 == 1)
            snprintf(name, sizeof(name), "gone%0240zu", i);
        else if (i % 1000 == 2)
            snprintf(name, sizeof(name), "gone.%zu.v1", i);
        else
            snprintf(name, sizeof(name), "gone-%zu", i);
        for (size_t k = 0; k < 4; k++) {
            if (strlen(name) > 200)
                hashed_key(whats[k], "ns", name, key, sizeof(key));
            else
                snprintf(key, sizeof(key), "%s.ns_%s", whats[k], name);
            json_object_set_new(k < 2 ? bin : text, key, json_string("AAAA"));
            nkeys++;
            want[nwant++] = xstrdup(key);
        }
    }
    /* never pruned: keys not gpuscaler's, and a namespace whose lists lag */
    json_object_set_new(bin, "note", json_string("aGVsbG8="));
    json_object_set_new(bin, "forecast.nounderscore", json_string("AAAA"));
    json_object_set_new(text, "other.ns_gone-5", json_string("x"));
    json_object_set_new(bin, "forecast.lagging_gone", json_string("AAAA"));
    nkeys += 4;
    assert_true(nkeys >= 80000);

    char **got = NULL;
    double t0 = secs();
    size_t n = ctl_checkpoint_stale(body, idx, NCKPT, ds, NLIVE + 2, synced_but_lagging, NULL,
                                    &got, NULL);
    double took = secs() - t0;
    print_message("pruning %zu keys against %d Deployments: %.1f ms\n", nkeys, NLIVE + 2,
                  took * 1e3);
    qsort(got, n, sizeof(*got), cmp_str);
    qsort(want, nwant, sizeof(*want), cmp_str);
    for (size_t i = 0; i < n && i < nwant; i++)
        if (strcmp(got[i], want[i]) != 0)
            fail_msg("pruned %s, expected %s", got[i], want[i]);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++)
        xfree(got[i]);
    xfree(got);
    for (size_t i = 0; i < nwant; i++)
        free(want[i]);
    free(want);
    for (size_t i = 0; i < NLIVE + 2; i++)
        xfree(names[i]);
    free(names);
    free(ds);
    free(d);
    json_decref(body);
}

/* The removals of Deployments no longer tracked are queued once each (here
 * 80,000 keys of 20,000 Deployments, half of them told twice), and a save
 * carries at most 4,096 of them (a patch of all made 5 MB, over what the API
 * server takes in a request), the oldest first. */
static void test_removals_queued_once(void **state)
{
    (void)state;
    enum { N = 20000 };
    struct fixture *f = fx_new(1);
    struct ctl_wl w;
    memset(&w, 0, sizeof(w));
    w.ns = "ns";
    w.checkpoint_ready = true;
    char name[64];
    double t0 = secs();
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < N; i += pass + 1) {
            snprintf(name, sizeof(name), "gone-%d", i);
            w.name = name;
            ctl_checkpoint_forget(f->c, &w);
        }
    print_message("queueing %d removals (%d again): %.1f ms\n", 4 * N, 2 * N,
                  (secs() - t0) * 1e3);
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.queued, 4 * N);
    assert_int_equal(s.ndrop, 4096);
    assert_int_equal(s.n, 0);
    /* the oldest: gone-0 .. gone-1023, four keys each */
    assert_true(json_is_null(json_object_get(s.bin, "forecast.ns_gone-0")));
    assert_true(json_is_null(json_object_get(s.text, "uid.ns_gone-1023")));
    assert_null(json_object_get(s.bin, "forecast.ns_gone-1024"));
    assert_int_equal(json_object_size(s.bin) + json_object_size(s.text), 4096);
    ctl_checkpoint_save_free(&s);
    fx_free(f);
}

/* A save that would take the ConfigMap past the API server's 1 MiB (which
 * then refused the whole patch: every Deployment of it lost its save) keeps
 * as many Deployments' states as fit: those that grow it least, a
 * Deployment whose state is already stored before one that adds a new one;
 * the others keep the state saved before. */
static void test_over_full_save_keeps_what_fits(void **state)
{
    (void)state;
    enum { N = 12 };
    struct fixture *f = fx_new(1);
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "d%02d", i);
        ctl_ckpt_test_table_add(f->c, wl_new("ns", name, 30 + 97 * i));
    }
    /* nothing stored yet: every one is saved, each measured */
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, N);
    assert_int_equal(s.nleft, 0);
    size_t size[N], total = 0;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "d%02d", i);
        size[i] = entry_bytes(&s, "ns", name);
        assert_true(size[i] > 100);
        total += size[i];
    }
    assert_int_equal(s.bytes, total);
    size_t order[N]; /* by size */
    for (int i = 0; i < N; i++)
        order[i] = (size_t)i;
    for (int i = 1; i < N; i++)
        for (int j = i; j > 0 && size[order[j]] < size[order[j - 1]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    print_message("states of %zu to %zu bytes\n", size[order[0]], size[order[N - 1]]);

    /* the ConfigMap as read: another key leaves room for the 5 smallest
     * states and half of the sixth */
    size_t room = size[order[5]] / 2;
    for (int i = 0; i < 5; i++)
        room += size[order[i]];
    json_t *body = json_pack("{s:{s:s}}", "data", "other", "");
    char *fill = malloc(MiB + 1);
    assert_non_null(fill);
    memset(fill, 'x', MiB - room);
    fill[MiB - room] = '\0';
    json_object_set_new(json_object_get(body, "data"), "other", json_string(fill));
    ctl_checkpoint_noted(f->c, 0, body);
    json_decref(body);
    ctl_checkpoint_save_free(&s);
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 5);
    assert_int_equal(s.nleft, N - 5);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "d%02d", i);
        char key[64];
        snprintf(key, sizeof(key), "forecast.ns_%s", name);
        bool small = false;
        for (int k = 0; k < 5; k++)
            small = small || order[k] == (size_t)i;
        if ((json_object_get(s.bin, key) != NULL) != small)
            fail_msg("%s (%zu bytes): saved %d", name, size[i],
                     json_object_get(s.bin, key) != NULL);
    }
    size_t carried = 0;
    for (int k = 0; k < 5; k++)
        carried += size[order[k]];
    assert_int_equal(s.bytes, carried);
    assert_int_equal(s.projected, (int64_t)(MiB - room + carried));
    assert_true(s.projected <= MiB);
    ctl_checkpoint_save_free(&s);

    /* stored already: the ConfigMap holds the entries of the 4 largest (as
     * saved before) and fills the rest but 100 bytes; saving them again
     * grows it by a few bytes at most, so they are saved, and no other fits */
    body = json_pack("{s:{}, s:{}}", "binaryData", "data");
    size_t held = 0;
    {
        /* their entries, as a save with room writes them */
        struct fixture *g = fx_new(1);
        for (int k = N - 4; k < N; k++) {
            snprintf(name, sizeof(name), "d%02d", (int)order[k]);
            ctl_ckpt_test_table_add(g->c, wl_new("ns", name, 30 + 97 * (int)order[k]));
        }
        struct ctl_ckpt_save all;
        assert_true(ctl_checkpoint_build(g->c, 0, &all));
        json_object_update(json_object_get(body, "binaryData"), all.bin);
        json_object_update(json_object_get(body, "data"), all.text);
        held = all.bytes;
        ctl_checkpoint_save_free(&all);
        fx_free(g);
    }
    memset(fill, 'x', MiB - held - 100);
    fill[MiB - held - 100] = '\0';
    json_object_set_new(json_object_get(body, "data"), "other", json_string(fill));
    ctl_checkpoint_noted(f->c, 0, body);
    json_decref(body);
    free(fill);
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 4);
    assert_int_equal(s.nleft, N - 4);
    for (int k = 0; k < N; k++) {
        char key[64];
        snprintf(key, sizeof(key), "capacity.ns_d%02d", (int)order[k]);
        assert_int_equal(json_object_get(s.bin, key) != NULL, k >= N - 4);
    }
    for (size_t i = 0; i < s.nleft; i++) {
        bool large = false;
        for (int k = N - 4; k < N; k++) {
            snprintf(name, sizeof(name), "d%02d", (int)order[k]);
            large = large || strcmp(s.left[i]->name, name) == 0;
        }
        assert_false(large);
    }
    assert_true(s.projected <= MiB);
    ctl_checkpoint_save_free(&s);
    fx_free(f);
}

/* When not all fit, the least recently saved Deployments go first: with
 * growths that never change, the smallest were saved every time and the
 * others never again (their restored states ever older). And
 * one forgotten (its keys queued for removal) and tracked again keeps its
 * stored state while it is left out: its keys are taken off the queue, not
 * removed. */
static void test_over_full_rotates_and_keeps(void **state)
{
    (void)state;
    enum { N = 8 };
    struct fixture *f = fx_new(1);
    struct ctl_wl *ws[N];
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "r%02d", i);
        ws[i] = wl_new("ns", name, 40 + 61 * i);
        ctl_ckpt_test_table_add(f->c, ws[i]);
    }
    /* r07 was forgotten once (opted out) and is tracked again */
    ctl_checkpoint_forget(f->c, ws[N - 1]);
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    size_t size[N], most = 0;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "r%02d", i);
        size[i] = entry_bytes(&s, "ns", name);
        most = size[i] > most ? size[i] : most;
    }
    /* saved with room: its keys carry its state, not a removal */
    assert_true(json_is_string(json_object_get(s.text, "uid.ns_r07")));
    ctl_checkpoint_save_free(&s);
    ctl_checkpoint_forget(f->c, ws[N - 1]); /* forgotten and tracked again once more */

    /* room for the largest one alone: a few are saved each time */
    json_t *body = json_pack("{s:{s:s}}", "data", "other", "");
    char *fill = malloc(MiB + 1);
    assert_non_null(fill);
    memset(fill, 'x', MiB - most - 10);
    fill[MiB - most - 10] = '\0';
    json_object_set_new(json_object_get(body, "data"), "other", json_string(fill));
    free(fill);
    bool saved[N] = {false};
    bool kept_r07 = false;
    for (int round = 0; round < N; round++) {
        ctl_checkpoint_noted(f->c, 0, body); /* nothing written: the same ConfigMap */
        assert_true(ctl_checkpoint_build(f->c, 0, &s));
        assert_true(s.n >= 1);
        assert_true(s.projected <= MiB);
        for (int i = 0; i < N; i++) {
            char key[64];
            snprintf(key, sizeof(key), "forecast.ns_r%02d", i);
            const json_t *v = json_object_get(s.bin, key);
            assert_true(v == NULL || json_is_string(v)); /* never a removal */
            saved[i] = saved[i] || v != NULL;
        }
        if (!json_object_get(s.text, "uid.ns_r07"))
            kept_r07 = true; /* left out this time, and not removed */
        ctl_checkpoint_save_free(&s);
    }
    json_decref(body);
    for (int i = 0; i < N; i++)
        if (!saved[i])
            fail_msg("r%02d (%zu bytes) never saved in %d saves", i, size[i], N);
    assert_true(kept_r07);
    fx_free(f);
}

/* A Deployment whose term ends within CKPT_MIN_TERM_MS (its renewal late)
 * is left out of a save, which would be cut short by the term (every
 * entry's save with it); with at least that much left it is saved, the save
 * bounded by the term; without leader election there is no term. */
static void test_min_term(void **state)
{
    (void)state;
    struct fixture *f = fx_new(1);
    ctl_ckpt_test_table_add(f->c, wl_new("ns", "d", 30));
    struct ctl_ckpt_save s;
    /* no election: saved, no deadline */
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 1);
    assert_int_equal(s.within, 0);
    ctl_checkpoint_save_free(&s);

    f->c->leader_elect = true;
    struct ctl_leader *l = &f->c->leader;
    l->leading = true;
    l->renew_deadline_ms = 10000;
    /* a term ending sooner than the bound (time only shortens it further) */
    uv_update_time(&f->loop);
    l->last_renew_ok_ms = (int64_t)uv_now(&f->loop) - l->renew_deadline_ms + (MIN_TERM_MS - 1);
    assert_false(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 0);
    assert_null(json_object_get(s.bin, "forecast.ns_d"));
    ctl_checkpoint_save_free(&s);
    /* just over the bound (50 ms for the time the build takes) */
    uv_update_time(&f->loop);
    l->last_renew_ok_ms = (int64_t)uv_now(&f->loop) - l->renew_deadline_ms + (MIN_TERM_MS + 50);
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 1);
    assert_non_null(json_object_get(s.bin, "forecast.ns_d"));
    assert_true(s.within >= MIN_TERM_MS && s.within <= MIN_TERM_MS + 50);
    ctl_checkpoint_save_free(&s);
    /* a term long gone: not acting, nothing saved */
    l->last_renew_ok_ms -= 60000;
    assert_false(ctl_checkpoint_build(f->c, 0, &s));
    ctl_checkpoint_save_free(&s);
    fx_free(f);
}

/* A checkpoint of another release's format (a newer one's, in a rollback or
 * beside newer replicas) is not saved over for CTL_CKPT_FOREIGN_HOLD_MS after
 * it was read, so that the release that wrote it still finds it; another
 * Deployment of that ConfigMap is saved meanwhile; after the hour it is. */
static void test_foreign_hold_not_saved_over(void **state)
{
    (void)state;
    struct fixture *f = fx_new(1);
    struct ctl_wl *w = wl_new("ns", "d", 30), *other = wl_new("ns", "e", 30);
    ctl_ckpt_test_table_add(f->c, w);
    ctl_ckpt_test_table_add(f->c, other);
    struct capacity cap;
    capacity_init(&cap);
    uint8_t buf[CAPACITY_STATE_SIZE];
    assert_int_equal(capacity_encode(&cap, buf, sizeof(buf)), CAPACITY_STATE_SIZE);
    buf[4] = 200; /* a later release's version */
    char *b64 = kube_base64_encode(buf, sizeof(buf));
    json_t *body = json_pack("{s:{s:s, s:s}, s:{s:s}}", "data", "uid.ns_d", "u-1", "unit.ns_d",
                             "requests", "binaryData", "capacity.ns_d", b64);
    xfree(b64);
    ctl_checkpoint_restore(w, body, "ckpt-0");
    json_decref(body);
    assert_true(w->ckpt_foreign_until > util_now_unix_ms());

    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 1);
    assert_null(json_object_get(s.bin, "capacity.ns_d"));
    assert_null(json_object_get(s.bin, "forecast.ns_d"));
    assert_null(json_object_get(s.text, "unit.ns_d"));
    assert_non_null(json_object_get(s.bin, "capacity.ns_e"));
    ctl_checkpoint_save_free(&s);
    /* a minute before the hour is up: still held */
    w->ckpt_foreign_until -= CTL_CKPT_FOREIGN_HOLD_MS - 60000;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 1);
    assert_null(json_object_get(s.bin, "capacity.ns_d"));
    ctl_checkpoint_save_free(&s);
    /* the hour is up: saved again */
    w->ckpt_foreign_until -= 60000 + 1;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 2);
    assert_non_null(json_object_get(s.bin, "capacity.ns_d"));
    assert_non_null(json_object_get(s.bin, "forecast.ns_d"));
    ctl_checkpoint_save_free(&s);
    fx_free(f);
}

static bool all_synced(const void *arg, const char *ns)
{
    (void)arg;
    (void)ns;
    return true;
}

/* A key of ours in the other map than the one a save writes it to: the
 * entries of a Deployment that is gone found in data (forecast., capacity.)
 * or in binaryData (unit., uid.), and a tracked Deployment's stray copy
 * there (never read), are removed from that map by the next save; the
 * tracked one's own entries are saved, and keys not gpuscaler's stay. A
 * stale key in data was nulled in binaryData only, and stayed for good. The
 * size the save projects is the ConfigMap's after it: a copy removed from
 * one map only was counted as its key's bytes in both, or not at all. */
static void test_stale_keys_in_the_other_map_removed(void **state)
{
    (void)state;
    struct fixture *f = fx_new(1);
    ctl_ckpt_test_table_add(f->c, wl_new("ns", "d", 30));
    json_t *cm = json_pack("{s:{s:s, s:s, s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s}}",
                           "binaryData", "forecast.ns_d", "AAAA", "capacity.ns_gone", "AAAA",
                           "unit.ns_gone", "cmVxdWVzdHM=", "note", "aGVsbG8=",
                           "data", "forecast.ns_gone", "AAAA", "capacity.ns_gone2", "AAAA",
                           "capacity.ns_d", "AAAA", "unit.ns_d", "requests", "uid.ns_gone", "u",
                           "other", "x", "forecast.nounderscore", "x");
    assert_non_null(cm);
    struct kube_deployment d = {.ns = "ns", .name = "d"};
    const struct kube_deployment *ds[] = {&d};
    ctl_checkpoint_noted(f->c, 0, cm); /* its size, as read */
    ctl_checkpoint_prune(f->c, 0, cm, ds, 1, all_synced, NULL);
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.n, 1);
    assert_int_equal(s.ndrop, 6);
    int64_t projected = s.projected;
    /* each removal in the map the key was found in, and only there */
    static const char *const gone_text[] = {"forecast.ns_gone", "capacity.ns_gone2",
                                            "capacity.ns_d", "uid.ns_gone"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(gone_text); i++) {
        if (!json_is_null(json_object_get(s.text, gone_text[i])))
            fail_msg("%s not removed from data", gone_text[i]);
        assert_false(json_is_null(json_object_get(s.bin, gone_text[i]))); /* not there */
    }
    assert_true(json_is_null(json_object_get(s.bin, "capacity.ns_gone")));
    assert_true(json_is_null(json_object_get(s.bin, "unit.ns_gone")));
    assert_null(json_object_get(s.text, "capacity.ns_gone"));
    assert_null(json_object_get(s.text, "unit.ns_gone"));
    /* d's own entries saved, in their maps */
    assert_true(json_is_string(json_object_get(s.bin, "forecast.ns_d")));
    assert_true(json_is_string(json_object_get(s.bin, "capacity.ns_d")));
    assert_true(json_is_string(json_object_get(s.text, "unit.ns_d")));
    assert_true(json_is_string(json_object_get(s.text, "uid.ns_d")));
    /* the ConfigMap after the patch: d's four entries, and what is not ours */
    ctl_ckpt_test_merge(cm, s.bin, s.text);
    ctl_checkpoint_save_free(&s);
    assert_int_equal(projected, ctl_ckpt_test_size(cm));
    json_t *bin = json_object_get(cm, "binaryData"), *text = json_object_get(cm, "data");
    assert_int_equal(json_object_size(bin), 3);
    assert_non_null(json_object_get(bin, "forecast.ns_d"));
    assert_non_null(json_object_get(bin, "capacity.ns_d"));
    assert_string_equal(json_string_value(json_object_get(bin, "note")), "aGVsbG8=");
    assert_int_equal(json_object_size(text), 4);
    assert_string_equal(json_string_value(json_object_get(text, "unit.ns_d")), "requests");
    assert_string_equal(json_string_value(json_object_get(text, "uid.ns_d")), "u-1");
    assert_string_equal(json_string_value(json_object_get(text, "other")), "x");
    assert_string_equal(json_string_value(json_object_get(text, "forecast.nounderscore")), "x");
    /* read again: nothing more to prune, the queue empty once the save is done */
    char **keys = NULL;
    assert_int_equal(ctl_checkpoint_stale(cm, 0, 1, ds, 1, all_synced, NULL, &keys, NULL), 0);
    assert_null(keys);
    json_decref(cm);
    fx_free(f);
}

/* A Deployment no longer tracked whose entries a writer put in the other
 * maps (forecast. and capacity. in data, unit. in binaryData): forgetting it
 * queues its keys for their own maps, where they are not; the save's
 * projected size keeps their bytes (they stay until a read prunes them),
 * and takes off those of the Deployment's keys that are in their own maps.
 * Their bytes were taken off whichever map they were in. */
static void test_forget_counts_the_maps_removed_from(void **state)
{
    (void)state;
    struct fixture *f = fx_new(1);
    json_t *cm = json_pack("{s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}}",
                           "binaryData", "unit.ns_x", "cmVxdWVzdHM=", "forecast.ns_y",
                           "AAAAAAAA", "note", "aGVsbG8=",
                           "data", "forecast.ns_x", "0123456789abcdef", "capacity.ns_x",
                           "0123456789", "uid.ns_x", "u-1");
    assert_non_null(cm);
    ctl_checkpoint_noted(f->c, 0, cm);
    struct ctl_wl w;
    memset(&w, 0, sizeof(w));
    w.ns = "ns";
    w.checkpoint_ready = true;
    w.name = "x";
    ctl_checkpoint_forget(f->c, &w);
    w.name = "y";
    ctl_checkpoint_forget(f->c, &w);
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    assert_int_equal(s.ndrop, 8);
    int64_t projected = s.projected;
    ctl_ckpt_test_merge(cm, s.bin, s.text);
    ctl_checkpoint_save_free(&s);
    /* left: x's copies in the other maps, the note */
    assert_non_null(json_object_get(json_object_get(cm, "data"), "forecast.ns_x"));
    assert_null(json_object_get(json_object_get(cm, "binaryData"), "forecast.ns_y"));
    assert_null(json_object_get(json_object_get(cm, "data"), "uid.ns_x"));
    assert_int_equal(projected, ctl_ckpt_test_size(cm));
    json_decref(cm);
    fx_free(f);
}

/* Keys of gpuscaler's form that no Deployment could own (a namespace with
 * a dot or upper case, or longer than 63, a name with upper case or '_', a
 * label starting or ending with '-' or '.') are a user's: never pruned, in
 * either map, with no Deployment tracked; keys of ours (plain, dotted,
 * hashed, a name's label longer than 63, as the API server allows) are. They were
 * removed as keys of Deployments gone, or as copies in the wrong map. */
static void test_user_keys_never_touched(void **state)
{
    (void)state;
    static const char *const user[] = {
        "forecast.a.b_c", "capacity.team_Q3_notes", "unit.Team_d", "uid.ns_d_e",
        "forecast.-ns_d", "capacity.ns-_d", "unit.ns_d-", "uid.ns_-d", "forecast.ns_d..e",
        "capacity.ns_d.-e", "unit.ns_.d", "uid.ns_d.", "forecast.ns_d/e", "capacity.ns_d e",
        "unit.n234567890123456789012345678901234567890123456789012345678901234_d",
    };
    json_t *body = json_pack("{s:{}, s:{}}", "binaryData", "data");
    json_t *maps[2] = {json_object_get(body, "binaryData"), json_object_get(body, "data")};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(user); i++)
        for (size_t m = 0; m < 2; m++)
            json_object_set_new(maps[m], user[i], json_string("AAAA"));
    char hashed[300], name[260];
    snprintf(name, sizeof(name), "gone%0240d", 1);
    hashed_key("capacity", "ns", name, hashed, sizeof(hashed));
    char label70[80];
    snprintf(label70, sizeof(label70), "uid.ns_%070d.x", 7);
    const char *ours[] = {"forecast.ns_gone", "capacity.ns_gone.v1", "unit.ns-1_d-2", hashed,
                          label70};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(ours); i++)
        json_object_set_new(maps[1], ours[i], json_string("AAAA"));
    char **keys = NULL;
    bool *in_data = NULL;
    size_t n = ctl_checkpoint_stale(body, 0, 1, NULL, 0, all_synced, NULL, &keys, &in_data);
    for (size_t i = 0; i < n; i++) {
        for (size_t u = 0; u < UTIL_ARRAY_LEN(user); u++)
            if (strcmp(keys[i], user[u]) == 0)
                fail_msg("user key %s pruned from %s", user[u],
                         in_data[i] ? "data" : "binaryData");
        assert_true(in_data[i]);
        xfree(keys[i]);
    }
    assert_int_equal(n, UTIL_ARRAY_LEN(ours));
    xfree(keys);
    xfree(in_data);
    /* and a save after the read removes ours only */
    struct fixture *f = fx_new(1);
    ctl_checkpoint_prune(f->c, 0, body, NULL, 0, all_synced, NULL);
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    ctl_ckpt_test_merge(body, s.bin, s.text);
    ctl_checkpoint_save_free(&s);
    for (size_t m = 0; m < 2; m++)
        assert_int_equal(json_object_size(json_object_get(body, m ? "data" : "binaryData")),
                         UTIL_ARRAY_LEN(user));
    json_decref(body);
    fx_free(f);
}

/* A capacity estimator that took a pod's gauge of 1e300 running requests at
 * saturation (the slot count a float cannot hold) saves a state that
 * restores, to the very state saved. The slot sample was infinite, and
 * every restore refused the state ("capacity state out of range"): the
 * estimator started afresh after each restart. (The fix is in
 * capacity_observe; fuzz/corpus/capacity-state/regress-slots-inf is its
 * seed.) */
static void test_capacity_after_a_huge_gauge_restores(void **state)
{
    (void)state;
    struct fixture *f = fx_new(1);
    struct ctl_wl *w = wl_new("ns", "inf", 30);
    ctl_ckpt_test_table_add(f->c, w);
    const int64_t tick = 5000, window = 60000;
    int64_t t0 = util_now_unix_ms() - 40 * tick;
    for (int i = 0; i < 40; i++) {
        struct capacity_obs o = {.now_ms = t0 + i * tick, .window_ms = window, .steady = true,
                                 .gpus = 1, .completions_rps = 40, .running = 1e300,
                                 .waiting = 1e300};
        capacity_observe(&w->cap, &o);
    }
    assert_true(w->cap.nsat > 0);    /* sampled at saturation: the 1e300 was taken */
    assert_true(w->cap.lower > 0);
    struct capacity want = w->cap;
    capacity_forget_runs(&want); /* as a restore does */
    uint8_t a[CAPACITY_STATE_SIZE], b[CAPACITY_STATE_SIZE];
    assert_int_equal(capacity_encode(&want, a, sizeof(a)), CAPACITY_STATE_SIZE);

    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    json_t *cm = json_object();
    ctl_ckpt_test_merge(cm, s.bin, s.text);
    ctl_checkpoint_save_free(&s);
    /* the bytes saved decode */
    const char *enc = json_string_value(json_object_get(json_object_get(cm, "binaryData"),
                                                        "capacity.ns_inf"));
    assert_non_null(enc);
    char *raw = NULL, err[160] = "";
    size_t len = 0;
    assert_int_equal(kube_base64_decode(enc, strlen(enc), &raw, &len), 0);
    struct capacity back;
    if (capacity_decode(&back, (const uint8_t *)raw, len, err, sizeof(err)) != 0)
        fail_msg("the saved capacity state does not decode: %s", err);
    xfree(raw);
    /* and a Deployment restored from the ConfigMap holds that very state */
    struct ctl_wl *r = ctl_ckpt_test_wl_new("ns", "inf", "u-1");
    ctl_checkpoint_restore(r, cm, "ckpt-0");
    assert_int_equal(capacity_encode(&r->cap, b, sizeof(b)), CAPACITY_STATE_SIZE);
    assert_memory_equal(a, b, sizeof(a));
    assert_int_equal(r->cap.nsat, w->cap.nsat);
    assert_int_equal(r->cap.total, w->cap.total);
    assert_int_equal(r->ckpt_foreign_until, 0);
    ctl_ckpt_test_wl_free(r);
    json_decref(cm);
    fx_free(f);
}

/* One seed: the mode byte, then the body's JSON. */
static void put_seed(const char *dir, const char *name, uint8_t mode, json_t *body)
{
    char path[512], *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(text);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputc(mode, f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    free(text);
    json_decref(body);
}

/* The body a save of these Deployments writes, as a ConfigMap read back. */
static json_t *saved_body(struct fixture *f)
{
    struct ctl_ckpt_save s;
    assert_true(ctl_checkpoint_build(f->c, 0, &s));
    json_t *body = json_pack("{s:s, s:s, s:{s:s}, s:O, s:O}", "apiVersion", "v1", "kind",
                             "ConfigMap", "metadata", "name", "ckpt-0", "binaryData", s.bin,
                             "data", s.text);
    ctl_checkpoint_save_free(&s);
    return body;
}

/* --write-corpus DIR: seeds for fuzz/fuzz-checkpoint.c, valid and broken
 * ConfigMaps of states this release saves. */
static int write_corpus(const char *dir)
{
    struct fixture *f = fx_new(1);
    ctl_ckpt_test_table_add(f->c, wl_new("ns", "d", 400));
    ctl_ckpt_test_table_add(f->c, wl_new("ns", "e", 20));
    json_t *good = saved_body(f);
    put_seed(dir, "valid", 0, json_deep_copy(good));
    put_seed(dir, "valid-uids", 4, json_deep_copy(good));
    /* the same, with the keys of Deployments gone, dotted and hashed names,
     * keys not gpuscaler's, kept in the other of two ConfigMaps */
    json_t *b = json_deep_copy(good);
    json_t *bin = json_object_get(b, "binaryData"), *text = json_object_get(b, "data");
    char key[300], name[260];
    json_object_set_new(bin, "forecast.ns_gone", json_string("AAAA"));
    json_object_set_new(bin, "capacity.ns_gone.v1", json_string("AAAA"));
    json_object_set_new(text, "unit.ns_gone", json_string("requests"));
    json_object_set_new(text, "uid.other_x", json_string("u-9"));
    snprintf(name, sizeof(name), "gone%0240d", 1);
    hashed_key("forecast", "ns", name, key, sizeof(key));
    json_object_set_new(bin, key, json_string("AAAA"));
    json_object_set_new(bin, "note", json_string("aGVsbG8="));
    json_object_set_new(bin, "forecast._x", json_string("AAAA"));
    json_object_set_new(bin, "forecast.ns_", json_string("AAAA"));
    json_object_set_new(text, "forecast.ns_d", json_string("in data"));
    put_seed(dir, "stale-keys", 1, json_deep_copy(b));
    put_seed(dir, "stale-keys-lagging", 8 | 3, b);
    /* keys of ours in the other map than theirs: a gone Deployment's, live ones' */
    b = json_deep_copy(good);
    bin = json_object_get(b, "binaryData");
    text = json_object_get(b, "data");
    json_object_set_new(text, "forecast.ns_gone", json_string("AAAA"));
    json_object_set_new(text, "capacity.ns_d", json_string("AAAA"));
    json_object_set_new(bin, "unit.ns_gone", json_string("cmVxdWVzdHM="));
    json_object_set_new(bin, "uid.ns_e", json_string("dS0x"));
    json_object_set_new(bin, "capacity.ns_gone", json_string("AAAA"));
    put_seed(dir, "stale-keys-other-map", 0, b);
    /* a copy of a tracked Deployment's key in data behind 5,000 removals of
     * binaryData keys (more than a save carries), and keys of gpuscaler's
     * form no Deployment could own (a user's), in both maps */
    b = json_deep_copy(good);
    bin = json_object_get(b, "binaryData");
    text = json_object_get(b, "data");
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof(key), "forecast.ns_gone-%d", i);
        json_object_set_new(bin, key, json_string("AAAA"));
    }
    json_object_set_new(text, "capacity.ns_d", json_string("AAAA"));
    put_seed(dir, "wrong-map-behind-queue", 0, b);
    b = json_deep_copy(good);
    static const char *const user[] = {"forecast.a.b_c", "capacity.team_Q3_notes",
                                       "uid.ns_d_e", "unit.ns_d-", "forecast.ns_d..e"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(user); i++) {
        json_object_set_new(json_object_get(b, "binaryData"), user[i], json_string("AAAA"));
        json_object_set_new(json_object_get(b, "data"), user[i], json_string("x"));
    }
    put_seed(dir, "user-keys", 0, b);
    /* names of a label longer than 63 (valid: the API server limits only a
     * subdomain's whole length): four Deployments the harness tracks, the
     * first of such a name, then a gone one's key of such a name */
    b = json_deep_copy(good);
    bin = json_object_get(b, "binaryData");
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "forecast.ns_a%d-%070d.x", i, i == 0 || i == 4);
        json_object_set_new(bin, key, json_string("AAAA"));
    }
    put_seed(dir, "long-labels", 0, b);
    /* another release's formats: a capacity state of version 200, a forecaster's 8 */
    b = json_deep_copy(good);
    bin = json_object_get(b, "binaryData");
    struct capacity cap;
    capacity_init(&cap);
    uint8_t cb[CAPACITY_STATE_SIZE];
    capacity_encode(&cap, cb, sizeof(cb));
    cb[4] = 200;
    char *b64 = kube_base64_encode(cb, sizeof(cb));
    json_object_set_new(bin, "capacity.ns_d", json_string(b64));
    xfree(b64);
    uint8_t *fs = NULL;
    size_t flen = 0;
    struct ctl_wl *w = wl_new("ns", "e", 50);
    forecast_serialize(w->fc, &fs, &flen);
    ctl_ckpt_test_wl_free(w);
    fs[4] = 8;
    b64 = kube_base64_encode(fs, flen);
    xfree(fs);
    json_object_set_new(bin, "forecast.ns_e", json_string(b64));
    xfree(b64);
    put_seed(dir, "foreign-formats", 0, b);
    /* another Deployment of the name, another demand unit */
    b = json_deep_copy(good);
    json_object_set_new(json_object_get(b, "data"), "uid.ns_d", json_string("u-old"));
    json_object_set_new(json_object_get(b, "data"), "unit.ns_e",
                        json_string("tokens;prompt-token-weight=0.25"));
    put_seed(dir, "other-uid-unit", 0, b);
    /* broken: not base64, not strings, wrong shapes */
    b = json_deep_copy(good);
    json_object_set_new(json_object_get(b, "binaryData"), "forecast.ns_d",
                        json_string("not base64!"));
    json_object_set_new(json_object_get(b, "binaryData"), "capacity.ns_e", json_integer(7));
    json_object_set_new(json_object_get(b, "data"), "uid.ns_e", json_null());
    put_seed(dir, "broken-values", 0, b);
    put_seed(dir, "binarydata-array", 0, json_pack("{s:[s], s:{s:[]}}", "binaryData", "x",
                                                   "data", "unit.ns_d"));
    put_seed(dir, "not-an-object", 2, json_pack("[s, i]", "forecast.ns_d", 3));
    put_seed(dir, "empty", 0, json_object());
    json_decref(good);
    fx_free(f);
    return 0;
}

int main(int argc, char **argv)
{
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
        return write_corpus(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prune_many_keys),
        cmocka_unit_test(test_removals_queued_once),
        cmocka_unit_test(test_over_full_save_keeps_what_fits),
        cmocka_unit_test(test_over_full_rotates_and_keeps),
        cmocka_unit_test(test_min_term),
        cmocka_unit_test(test_foreign_hold_not_saved_over),
        cmocka_unit_test(test_stale_keys_in_the_other_map_removed),
        cmocka_unit_test(test_forget_counts_the_maps_removed_from),
        cmocka_unit_test(test_user_keys_never_touched),
        cmocka_unit_test(test_capacity_after_a_huge_gauge_restores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the checkpoint ConfigMaps' read side
 * (pkg/controller/checkpoint.c): their contents come from the API server,
 * and anyone who may edit a ConfigMap in gpuscaler's namespace writes them.
 *
 * Input: a mode byte, then the ConfigMap's JSON. Mode bits 0-1: the
 * ConfigMaps (1 to 4) and the one read; bit 2: the Deployments take the
 * uids the body names (else "u-1"); bit 3: namespace "ns" is not listed in
 * full. The Deployments are ns/d, ns/e and up to four named by the body's
 * keys. Each one's state is restored from the body: what is taken must be
 * a state that encodes and decodes again, not ahead of the clock, and a
 * hold of another release's format must keep the Deployment out of the
 * next save. The save built then must fit the 1 MiB with what the body
 * holds, and restore, from a body made of it, to the very states saved. The
 * keys pruned must be gpuscaler's keys of the body, none of a Deployment of
 * this ConfigMap in the map it is written to (a copy in the other map is
 * pruned), and for plain keys exactly those a direct reading of the rule
 * names; the save after the pruning removes each from the map it was found
 * in, and nothing else, leaves no key it writes in both maps, and projects
 * the very size of the ConfigMap after it. Seeds: fuzz/corpus/checkpoint/ (written by
 * test-controller-checkpoint --write-corpus). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/checkpoint-testutil.h"
#include "controller/controller-int.h"
#include "forecast/forecast.h"
#include "kube/kube.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXWL 6

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-checkpoint: invariant violated: %s\n", what);
        abort();
    }
}

static bool lagging_ns(const void *arg, const char *ns)
{
    return !(*(const bool *)arg && strcmp(ns, "ns") == 0);
}

/* The forecaster's and the capacity estimator's states, as saved. */
static void states(const struct ctl_wl *w, uint8_t **fc, size_t *fclen, uint8_t *cap)
{
    forecast_serialize(w->fc, fc, fclen);
    check(capacity_encode(&w->cap, cap, CAPACITY_STATE_SIZE) == CAPACITY_STATE_SIZE,
          "a capacity state encodes");
}

/* A DNS-1123 label, read directly: a namespace's name (at most 63), or
 * one label of a subdomain (max 0: no limit of its own). */
static bool is_label(const char *s, size_t n, size_t max)
{
    if (n < 1 || (max && n > max))
        return false;
    for (size_t i = 0; i < n; i++) {
        bool alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');
        if (!alnum && (s[i] != '-' || i == 0 || i == n - 1))
            return false;
    }
    return true;
}

/* A DNS-1123 subdomain, as the API server validates a Deployment's name
 * (IsDNS1123Subdomain): at most 253 in all, labels joined by '.', and no
 * limit on one label's length (a name of a 70-character label is valid). */
static bool is_subdomain(const char *s)
{
    if (strlen(s) > 253)
        return false;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (!is_label(s, n, 0))
            return false;
        if (!dot)
            return true;
        s = dot + 1;
    }
}

/* The plain-key rule, read directly: <what>.<ns>_<name> of one of the four
 * whats, ns a namespace's name (a DNS-1123 label) and name a Deployment's (a
 * DNS-1123 subdomain), the whole at most 253 characters and not of the
 * hashed form; in the other map than its what's (in_data: found in data)
 * whoever it names; -1 for a key this reading does not decide. */
static int plain_stale(const char *key, bool in_data, size_t idx, size_t nckpt,
                       const struct kube_deployment *const *ds, size_t nds, bool lag)
{
    if (strlen(key) >= 253)
        return -1; /* maybe hashed, or too long for a key of ours */
    static const char *const whats[] = {"forecast.", "capacity.", "unit.", "uid."};
    const char *rest = NULL;
    bool text = false;
    for (size_t i = 0; i < 4; i++)
        if (strncmp(key, whats[i], strlen(whats[i])) == 0) {
            rest = key + strlen(whats[i]);
            text = i >= 2;
        }
    if (!rest)
        return 0; /* not ours: never pruned */
    const char *us = strchr(rest, '_');
    if (!us || !is_label(rest, (size_t)(us - rest), 63) || !is_subdomain(us + 1))
        return 0; /* no Deployment's: a user's key */
    if (text != in_data)
        return 1; /* never read there */
    char ns[256];
    snprintf(ns, sizeof(ns), "%.*s", (int)(us - rest), rest);
    if (lag && strcmp(ns, "ns") == 0)
        return 0;
    const char *name = us + 1;
    for (size_t i = 0; i < nds; i++)
        if (strcmp(ds[i]->ns, ns) == 0 && strcmp(ds[i]->name, name) == 0)
            return ctl_checkpoint_index(ns, name, nckpt) == idx ? 0 : 1;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 512 * 1024)
        return 0;
    uint8_t mode = data[0];
    json_t *body = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, NULL);
    if (!body)
        return 0;
    static bool quiet;
    if (!quiet) {
        util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
        quiet = true;
    }
    size_t nckpt = (size_t)(mode & 3) + 1;
    bool lag = mode & 8;

    struct ctl_config cfg;
    ctl_config_init(&cfg);
    cfg.checkpoint_configmaps = (int64_t)nckpt;
    struct controller *c = xcalloc(1, sizeof(*c));
    c->cfg = &cfg;
    c->identity = "fuzz";
    c->checkpoint_prefix = "ckpt";
    ctl_checkpoint_init(c);

    /* the Deployments: two fixed ones and those the body's keys name */
    struct ctl_wl *wl[MAXWL];
    size_t nwl = 0;
    const char *uid_d = json_string_value(json_object_get(json_object_get(body, "data"),
                                                          "uid.ns_d"));
    wl[nwl++] = ctl_ckpt_test_wl_new("ns", "d", (mode & 4) && uid_d ? uid_d : "u-1");
    wl[nwl++] = ctl_ckpt_test_wl_new("ns", "e", "u-1");
    static const char *const fields[] = {"binaryData", "data"};
    for (size_t f = 0; f < 2; f++) {
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(body, fields[f]), key, v) {
            const char *dot = strchr(key, '.'), *us = dot ? strchr(dot + 1, '_') : NULL;
            if (nwl == MAXWL || !us || us == dot + 1 || !us[1] || strlen(key) > 253)
                continue;
            char ns[254];
            snprintf(ns, sizeof(ns), "%.*s", (int)(us - dot - 1), dot + 1);
            bool dup = false;
            for (size_t i = 0; i < nwl; i++)
                dup = dup || (strcmp(wl[i]->ns, ns) == 0 && strcmp(wl[i]->name, us + 1) == 0);
            if (dup)
                continue;
            char ukey[300];
            snprintf(ukey, sizeof(ukey), "uid.%s_%s", ns, us + 1);
            const char *uid = json_string_value(json_object_get(json_object_get(body, "data"),
                                                                ukey));
            wl[nwl++] = ctl_ckpt_test_wl_new(ns, us + 1, (mode & 4) && uid ? uid : "u-1");
        }
    }
    size_t idx = ctl_checkpoint_index(wl[0]->ns, wl[0]->name, nckpt);

    /* restore each, as a read of its ConfigMap does */
    int64_t now = util_now_unix_ms();
    for (size_t i = 0; i < nwl; i++) {
        struct ctl_wl *w = wl[i];
        ctl_checkpoint_restore(w, body, "ckpt-0");
        check(w->fc != NULL, "a forecaster after the restore");
        uint8_t *fc = NULL, cap[CAPACITY_STATE_SIZE];
        size_t fclen = 0;
        states(w, &fc, &fclen, cap);
        struct capacity back;
        char err[160];
        check(capacity_decode(&back, cap, sizeof(cap), err, sizeof(err)) == 0,
              "the capacity state taken decodes again");
        check(capacity_newest_ms(&w->cap) <= now + 60000 + 1000,
              "no capacity state ahead of the clock");
        check(w->cap.queue_since_ms == -1 && w->cap.nrecent == 0, "its runs forgotten");
        struct forecast_config fcfg;
        controller_forecast_config(&w->cfg.policy, &fcfg);
        struct forecast *g = forecast_deserialize_own_floor(&fcfg, fc, fclen, err, sizeof(err));
        check(g != NULL, "the forecaster taken serialises to a state that restores");
        forecast_free(g);
        check(forecast_last_ms(w->fc) <= util_now_unix_ms() + fcfg.bucket_ms,
              "no forecaster ahead of the clock");
        check(w->ckpt_foreign_until == 0 ||
                  (w->ckpt_foreign_until > now &&
                   w->ckpt_foreign_until <= util_now_unix_ms() + CTL_CKPT_FOREIGN_HOLD_MS),
              "a foreign-format hold of an hour");
        xfree(fc);
        w->checkpoint_loaded = w->checkpoint_ready = true;
        ctl_ckpt_test_table_add(c, w);
    }

    /* the read's size and pruning (no cache here: prune is checked below) */
    ctl_checkpoint_noted(c, idx, body);
    struct ctl_ckpt_save s;
    bool any = ctl_checkpoint_build(c, idx, &s);
    size_t eligible = 0;
    for (size_t i = 0; i < nwl; i++) {
        struct ctl_wl *w = wl[i];
        char key[300];
        snprintf(key, sizeof(key), "capacity.%s_%s", w->ns, w->name);
        bool in = json_object_get(s.bin, key) != NULL;
        bool here = ctl_checkpoint_index(w->ns, w->name, nckpt) == idx;
        if (w->ckpt_foreign_until > util_now_unix_ms() || !here)
            check(!in || strlen(key) > 253, "held or elsewhere: not saved");
        eligible += here && w->ckpt_foreign_until <= util_now_unix_ms();
    }
    check(s.n + s.nleft == eligible, "every Deployment of it saved or left out");
    check(any == (s.n > 0), "something to send exactly when a state is carried");
    if (s.n > 0)
        check(s.projected <= 1024 * 1024, "a save fits the 1 MiB");

    /* restored from a body of what was saved: the very states */
    json_t *saved = json_pack("{s:O, s:O}", "binaryData", s.bin, "data", s.text);
    for (size_t i = 0; saved && i < nwl; i++) {
        struct ctl_wl *w = wl[i];
        char key[300];
        snprintf(key, sizeof(key), "forecast.%s_%s", w->ns, w->name);
        if (strlen(key) > 253 || !json_object_get(s.bin, key))
            continue;
        struct ctl_wl *r = ctl_ckpt_test_wl_new(w->ns, w->name, w->uid);
        ctl_checkpoint_restore(r, saved, "ckpt-0");
        uint8_t *f1 = NULL, *f2 = NULL, c1[CAPACITY_STATE_SIZE], c2[CAPACITY_STATE_SIZE];
        size_t l1 = 0, l2 = 0;
        states(w, &f1, &l1, c1);
        states(r, &f2, &l2, c2);
        check(memcmp(c1, c2, sizeof(c1)) == 0, "the capacity state saved restores as it was");
        check(l1 == l2 && memcmp(f1, f2, l1) == 0, "the forecaster saved restores as it was");
        check(r->ckpt_foreign_until == 0, "a state of ours is no foreign one");
        xfree(f1);
        xfree(f2);
        ctl_ckpt_test_wl_free(r);
    }
    json_decref(saved);
    ctl_checkpoint_save_free(&s);

    /* pruning against these Deployments */
    struct kube_deployment dd[MAXWL];
    const struct kube_deployment *ds[MAXWL];
    memset(dd, 0, sizeof(dd));
    for (size_t i = 0; i < nwl; i++) {
        dd[i].ns = wl[i]->ns;
        dd[i].name = wl[i]->name;
        ds[i] = &dd[i];
    }
    char **stale = NULL;
    bool *stale_in_data = NULL;
    size_t nstale = ctl_checkpoint_stale(body, idx, nckpt, ds, nwl, lagging_ns, &lag, &stale,
                                         &stale_in_data);
    json_t *seen[2] = {json_object(), json_object()}; /* pruned in binaryData, in data */
    for (size_t i = 0; i < nstale; i++) {
        const char *k = stale[i];
        bool in_data = stale_in_data[i];
        check(json_object_get(json_object_get(body, fields[in_data]), k) != NULL,
              "a key pruned is one of the body's, in the map it was found in");
        if (plain_stale(k, in_data, idx, nckpt, ds, nwl, lag) == 0) {
            fprintf(stderr, "fuzz-checkpoint: pruned from %s: \"%s\"\n", fields[in_data], k);
            check(false, "no live or foreign key pruned");
        }
        for (size_t j = 0; j < nwl && !in_data; j++) {
            char key[300];
            snprintf(key, sizeof(key), "forecast.%s_%s", wl[j]->ns, wl[j]->name);
            if (ctl_checkpoint_index(wl[j]->ns, wl[j]->name, nckpt) == idx)
                check(strcmp(k, key) != 0, "the key of a Deployment of this ConfigMap kept");
        }
        json_object_set_new(seen[in_data], k, json_true());
    }
    for (size_t f = 0; f < 2; f++) {
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(body, fields[f]), key, v) {
            int want = plain_stale(key, f == 1, idx, nckpt, ds, nwl, lag);
            if (want >= 0)
                check((json_object_get(seen[f], key) != NULL) == (want == 1),
                      "a plain key pruned exactly when the rule says");
        }
    }
    /* the save after the pruning removes only keys pruned, each from the map
     * it was found in, and never the entries of a Deployment of it tracked here */
    ctl_checkpoint_prune(c, idx, body, ds, nwl, lagging_ns, &lag);
    ctl_checkpoint_build(c, idx, &s);
    json_t *maps[2] = {s.bin, s.text};
    for (size_t f = 0; f < 2; f++) {
        const char *key;
        json_t *v;
        json_object_foreach(maps[f], key, v) {
            if (!json_is_null(v))
                continue;
            check(json_object_get(seen[f], key) != NULL, "a key removed was pruned there");
            for (size_t j = 0; j < nwl; j++) {
                if (ctl_checkpoint_index(wl[j]->ns, wl[j]->name, nckpt) != idx)
                    continue; /* kept here, it is another ConfigMap's */
                char own[300];
                snprintf(own, sizeof(own), "%s.%s_%s", f ? "unit" : "forecast", wl[j]->ns,
                         wl[j]->name);
                check(strcmp(key, own) != 0, "a tracked Deployment's entry never removed");
            }
        }
    }
    /* no key it writes stays in the other map when that copy was pruned (the
     * API server refuses a key in both maps), wherever it waits in the queue */
    for (size_t f = 0; f < 2; f++) {
        const char *key;
        json_t *v;
        json_object_foreach(maps[f], key, v)
            if (json_is_string(v) && json_object_get(seen[1 - f], key))
                check(json_is_null(json_object_get(maps[1 - f], key)),
                      "a key written is removed from the other map");
    }
    /* the size it projects is the ConfigMap's after it, when the body's
     * values are what an API server returns (strings, canonical base64) */
    bool canonical = json_is_object(body);
    for (size_t f = 0; f < 2 && canonical; f++) {
        json_t *m = json_object_get(body, fields[f]);
        canonical = !m || json_is_object(m);
        const char *key;
        json_t *v;
        json_object_foreach(m, key, v) {
            canonical = canonical && json_is_string(v);
            if (!canonical || f == 1)
                continue;
            char *raw = NULL;
            size_t rawlen = 0;
            canonical = kube_base64_decode(json_string_value(v), json_string_length(v), &raw,
                                           &rawlen) == 0;
            char *again = canonical ? kube_base64_encode((const uint8_t *)raw, rawlen) : NULL;
            canonical = again && strcmp(again, json_string_value(v)) == 0;
            xfree(again);
            xfree(raw);
        }
    }
    if (canonical) {
        json_t *after = json_deep_copy(body);
        ctl_ckpt_test_merge(after, s.bin, s.text);
        check(s.projected == ctl_ckpt_test_size(after), "the size projected is the size after");
        json_decref(after);
    }
    /* and every key pruned is removed from the map it was found in (with all
     * the removals queued in this one save) */
    for (size_t f = 0; f < 2 && s.ndrop == s.queued; f++) {
        const char *key;
        json_t *v;
        json_object_foreach(seen[f], key, v)
            check(json_is_null(json_object_get(maps[f], key)),
                  "a key pruned is removed from the map it was found in");
    }
    ctl_checkpoint_save_free(&s);
    json_decref(seen[0]);
    json_decref(seen[1]);
    for (size_t i = 0; i < nstale; i++)
        xfree(stale[i]);
    xfree(stale);
    xfree(stale_in_data);

    ctl_ckpt_test_table_free(c);
    ctl_checkpoint_free(c);
    xfree(c);
    ctl_config_free(&cfg);
    json_decref(body);
    return 0;
}

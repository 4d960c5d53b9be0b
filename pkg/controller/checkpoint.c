/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forecaster and capacity checkpoints, kept in a fixed set of ConfigMaps in
 * gpuscaler's namespace: <checkpoint.configmap>-0 .. -<checkpoint.configmaps - 1>.
 * A Deployment's state lives in the ConfigMap numbered by a stable hash of
 * namespace/name, as two binaryData keys, forecast.<ns>_<name> (the
 * forecaster's state packed with zlib, forecast_serialize_packed(); a plain
 * state of an earlier release is read too) and capacity.<ns>_<name>, and the
 * demand unit they were learned in as the data key unit.<ns>_<name> (absent:
 * requests). The names are known when RBAC is written, so the Role
 * can list them (resourceNames) instead of reaching every ConfigMap.
 *
 * Reads: one GET per ConfigMap serves every Deployment of it that is waiting
 * for its state. Writes: each ConfigMap is merge-patched once per interval
 * with the keys of the Deployments this instance acts on (keys it does not
 * carry are left alone, so instances owning different Deployments never
 * overwrite each other); a Deployment that stops being tracked has its keys
 * removed (null) in the next patch. The first patch of a missing ConfigMap
 * becomes a create. (checkpoint-keys.c: the keys; checkpoint-drop.c: the
 * queue of removals and the size accounting.)
 */
#include "controller-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"
#include "shard/shard.h"

#define SUB "controller"
#define CHECKPOINT_INTERVAL_MS (10LL * 60 * 1000)
#define KEY_MAX CTL_CKPT_KEY_MAX
/* "full" is logged at most once an hour per ConfigMap */
#define FULL_LOG_EVERY_MS (3600LL * 1000)
/* What the API server lets a ConfigMap hold: its data's and decoded binaryData's
 * values (core validation's MaxSecretSize) */
#define CKPT_MAX_BYTES (1024LL * 1024)
/* Removals a save carries at most (the rest wait for the next saves): 80,000
 * keys made a patch of 5 MB, over the 3 MiB an API server takes in a request */
#define CKPT_MAX_DROPS 4096
/* checkpoint ConfigMap reads in flight at most (each serves all its waiting Deployments) */
#define CKPT_MAX_READS 16
/* a Deployment whose term ends sooner is left out of a save (see save_one) */
#define CKPT_MIN_TERM_MS 1000
/* A capacity state whose newest time lies further ahead of this clock than
 * this was saved under one that ran ahead: refused. */
#define CKPT_AHEAD_MS 60000

/* ---- names and keys ------------------------------------------------------------ */

static void cm_name(const struct controller *c, size_t i, char *out, size_t len)
{
    snprintf(out, len, "%.200s-%zu", c->checkpoint_prefix, i);
}

static bool budget(const struct controller *c)
{
    return c->report_inflight < CTL_REPORT_MAX_INFLIGHT;
}

void ctl_checkpoint_init(struct controller *c)
{
    c->nckpt = (size_t)c->cfg->checkpoint_configmaps;
    if (c->nckpt < 1)
        c->nckpt = 1;
    c->ckpt = xcalloc(c->nckpt, sizeof(*c->ckpt));
}

void ctl_checkpoint_free(struct controller *c)
{
    for (size_t i = 0; i < c->nckpt; i++)
        ctl_ckpt_drops_free(&c->ckpt[i]);
    xfree(c->ckpt);
    c->ckpt = NULL;
    c->nckpt = 0;
}

void ctl_checkpoint_write_metrics(const struct controller *c, struct util_buf *b)
{
    util_buf_puts(b, "# HELP gpuscaler_checkpoint_configmap_bytes Bytes the API server counts in "
                     "a checkpoint ConfigMap (data and decoded binaryData; at most 1 MiB), as "
                     "last read or written by this instance.\n"
                     "# TYPE gpuscaler_checkpoint_configmap_bytes gauge\n");
    for (size_t i = 0; i < c->nckpt; i++) {
        if (!c->ckpt[i].size_known)
            continue;
        char cm[256];
        cm_name(c, i, cm, sizeof(cm));
        util_buf_printf(b, "gpuscaler_checkpoint_configmap_bytes{configmap=\"%s\"} %lld\n", cm,
                        (long long)c->ckpt[i].size);
    }
}

void ctl_checkpoint_forget(struct controller *c, const struct ctl_wl *w)
{
    if (!c->ckpt || !w->checkpoint_ready || c->dry_run || !controller_leading(c))
        return; /* never read (nothing of ours there), or not ours to write */
    struct ctl_ckpt *k = &c->ckpt[ctl_checkpoint_index(w->ns, w->name, c->nckpt)];
    char key[KEY_MAX + 1];
    ctl_checkpoint_key("forecast", w->ns, w->name, key, sizeof(key));
    ctl_ckpt_drop(k, key, CTL_CKPT_IN_BIN);
    ctl_checkpoint_key("capacity", w->ns, w->name, key, sizeof(key));
    ctl_ckpt_drop(k, key, CTL_CKPT_IN_BIN);
    ctl_checkpoint_key("unit", w->ns, w->name, key, sizeof(key));
    ctl_ckpt_drop(k, key, CTL_CKPT_IN_TEXT);
    ctl_checkpoint_key("uid", w->ns, w->name, key, sizeof(key));
    ctl_ckpt_drop(k, key, CTL_CKPT_IN_TEXT);
}

/* ---- reading -------------------------------------------------------------------- */

struct cm_req {
    struct controller *c;
    size_t idx;
    char cm[256];
    bool patch;                   /**< a save (else a read) */
    bool created;                 /**< the save's create (after the patch's 404) */
    json_t *bin, *text;           /**< the save's binaryData and data (for a create after
                                       404): the patch shares them, so they are not copied */
    json_t *done;                 /**< the queued removals it settles (ctl_ckpt_save.done) */
    uint64_t until;               /**< loop time by which the save must have ended (the
                                       terms of the Deployments it carries), 0: none */
    bool resave;                  /**< a read after a save refused as too long: save
                                       again once it answered */
    bool second;                  /**< a save made so: a refusal is not read again */
};

static void req_free(struct cm_req *r)
{
    struct controller *c = r->c;
    if (r->patch)
        c->report_inflight--;
    else
        c->ckpt_reads--;
    json_decref(r->bin);
    json_decref(r->text);
    json_decref(r->done);
    bool saved = r->patch;
    xfree(r);
    ctl_status_pump(c); /* the report budget has room again */
    if (saved)
        ctl_release_hold_check(c); /* before ctl_io_end may free c */
    ctl_io_end(c);
}

static struct cm_req *req_new(struct controller *c, size_t idx, bool patch)
{
    struct cm_req *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->idx = idx;
    r->patch = patch;
    cm_name(c, idx, r->cm, sizeof(r->cm));
    if (patch)
        c->report_inflight++;
    else
        c->ckpt_reads++;
    ctl_io_begin(c);
    return r;
}

/* A state refused for its format version may be a newer release's (a
 * rollback, a rolling upgrade beside older replicas): it is not overwritten
 * by this one's for CTL_CKPT_FOREIGN_HOLD_MS, so that the release that
 * wrote it can still read it. */
static void keep_foreign(struct ctl_wl *w, const char *why)
{
    if (!strstr(why, "version"))
        return;
    w->ckpt_foreign_until = util_now_unix_ms() + CTL_CKPT_FOREIGN_HOLD_MS;
    LOGW_WARN(SUB, w->ns, w->name, "the checkpoint is of another gpuscaler release: not "
              "overwritten for %lld minutes", (long long)(CTL_CKPT_FOREIGN_HOLD_MS / 60000));
}

void ctl_checkpoint_restore(struct ctl_wl *w, json_t *body, const char *cm)
{
    json_t *bin = json_object_get(body, "binaryData");
    char key[KEY_MAX + 1], err[160], unit[64];
    /* the state of a Deployment deleted and made again under the same name
     * (another model, other GPUs) is not this one's; checkpoints written
     * before the uid was stored carry none and are taken */
    ctl_checkpoint_key("uid", w->ns, w->name, key, sizeof(key));
    const char *suid = json_string_value(json_object_get(json_object_get(body, "data"), key));
    if (suid && strcmp(suid, w->uid) != 0) {
        LOGW_INFO(SUB, w->ns, w->name, "ignoring checkpoint in %s: written for a Deployment of "
                  "that name deleted since (uid %.64s, now %s)", cm, suid, w->uid);
        return;
    }
    /* nothing stored for it: nothing to say (a token-unit Deployment was told
     * its absent checkpoint was "written for demand unit requests") */
    ctl_checkpoint_key("capacity", w->ns, w->name, key, sizeof(key));
    bool has_cap = json_object_get(bin, key) != NULL;
    ctl_checkpoint_key("forecast", w->ns, w->name, key, sizeof(key));
    if (!has_cap && !json_object_get(bin, key))
        return;
    /* rates and capacities learned in another demand unit mean nothing here */
    ctl_checkpoint_key("unit", w->ns, w->name, key, sizeof(key));
    const char *su = json_string_value(json_object_get(json_object_get(body, "data"), key));
    ctl_demand_unit_label(&w->cfg.policy, unit, sizeof(unit));
    if (strcmp(su ? su : "requests", unit) != 0) {
        LOGW_INFO(SUB, w->ns, w->name, "ignoring checkpoint in %s: written for demand unit "
                  "%.60s, now %s", cm, su ? su : "requests", unit);
        return;
    }
    ctl_checkpoint_key("capacity", w->ns, w->name, key, sizeof(key));
    const char *cs = json_string_value(json_object_get(bin, key));
    char *raw = NULL;
    size_t rawlen = 0;
    if (cs && kube_base64_decode(cs, strlen(cs), &raw, &rawlen) == 0) {
        /* decoded aside: a state refused leaves what the estimator learned */
        struct capacity *cap = xmalloc(sizeof(*cap));
        int64_t now = util_now_unix_ms();
        int rc = capacity_decode(cap, (const uint8_t *)raw, rawlen, err, sizeof(err));
        if (rc == 0 && capacity_newest_ms(cap) > now + CKPT_AHEAD_MS) {
            /* saved under a clock that ran ahead: its lower bound would not
             * decay until this clock caught up */
            snprintf(err, sizeof(err), "its times lie %lld s ahead of this clock",
                     (long long)((capacity_newest_ms(cap) - now) / 1000));
            rc = -1;
        }
        if (rc == 0) {
            /* a queue that stood at the save has not stood since: its run starts anew */
            capacity_forget_runs(cap);
            w->cap = *cap;
            LOGW_INFO(SUB, w->ns, w->name, "restored the capacity estimator from %s", cm);
        } else {
            LOGW_WARN(SUB, w->ns, w->name, "ignoring the capacity state in %s: %s", cm, err);
            keep_foreign(w, err);
        }
        xfree(cap);
    }
    xfree(raw);
    raw = NULL;
    ctl_checkpoint_key("forecast", w->ns, w->name, key, sizeof(key));
    const char *s = json_string_value(json_object_get(bin, key));
    if (!s || !w->fc)
        return; /* nothing stored yet */
    struct forecast_config fc;
    controller_forecast_config(&w->cfg.policy, &fc);
    struct forecast *f = NULL;
    err[0] = '\0';
    if (kube_base64_decode(s, strlen(s), &raw, &rawlen) == 0)
        f = forecast_deserialize_own_floor(&fc, (const uint8_t *)raw, rawlen, err, sizeof(err));
    else
        snprintf(err, sizeof(err), "not base64");
    xfree(raw);
    int64_t ahead = f ? forecast_last_ms(f) - util_now_unix_ms() : 0;
    if (f && ahead > fc.bucket_ms) {
        /* saved under a clock that ran ahead: it would refuse every
         * observation until this one caught up */
        snprintf(err, sizeof(err), "its newest observation lies %lld s ahead of this clock",
                 (long long)(ahead / 1000));
        forecast_free(f);
        f = NULL;
    }
    if (f && !ctl_floor_kept(forecast_rate_floor(f), fc.rate_floor)) {
        snprintf(err, sizeof(err), "rate floor %.4g, over %gx from the configuration's %.4g",
                 forecast_rate_floor(f), CTL_FLOOR_KEPT, fc.rate_floor);
        forecast_free(f);
        f = NULL;
    }
    if (!f) {
        LOGW_WARN(SUB, w->ns, w->name, "ignoring forecaster checkpoint %s: %s", cm, err);
        keep_foreign(w, err);
        return;
    }
    if (strncmp(err, "ok; ", 4) == 0) /* taken, in part (another quantile's) */
        LOGW_INFO(SUB, w->ns, w->name, "forecaster checkpoint %s: %s", cm, err + 4);
    /* A forecaster seeded from Prometheus while this read was failing may
     * hold more history than the checkpoint: the longer history is kept, as
     * the seed keeps it (observe.c). */
    struct forecast_result fr, cur;
    int64_t now = util_now_unix_ms();
    forecast_predict(f, now, 0, &fr);
    if (forecast_predict(w->fc, now, 0, &cur) == 0 && cur.buckets_seen > fr.buckets_seen) {
        LOGW_INFO(SUB, w->ns, w->name, "keeping the forecaster's %lld buckets of history over "
                  "the %lld of the checkpoint in %s", (long long)cur.buckets_seen,
                  (long long)fr.buckets_seen, cm);
        forecast_free(f);
        return;
    }
    forecast_free(w->fc);
    w->fc = f;
    LOGW_INFO(SUB, w->ns, w->name, "restored forecaster from %s (%lld buckets of history)", cm,
              (long long)fr.buckets_seen);
}

/* Whether the cache holds namespace ns's Deployments whole and current: its
 * lists finished, and no list+watch covering it has failed since without
 * catching up (kube_cache_ns_down_ms). A Deployment made meanwhile, perhaps
 * tracked and saved by the leader before a handover, is missing from a view
 * out of date: its keys, taken for a gone one's, would be removed for good. */
static bool cache_current(const void *arg, const char *ns)
{
    return kube_cache_ns_synced(arg, ns) && kube_cache_ns_down_ms(arg, ns, NULL) == 0;
}

void ctl_checkpoint_prune(struct controller *c, size_t idx, const json_t *body,
                          const struct kube_deployment *const *ds, size_t nds,
                          bool (*synced)(const void *arg, const char *ns), const void *arg)
{
    char **keys;
    bool *in_data;
    size_t n = ctl_checkpoint_stale(body, idx, c->nckpt, ds, nds, synced, arg, &keys, &in_data);
    for (size_t i = 0; i < n; i++) {
        /* removed from the map it was found in, data as well as binaryData (a
         * patch's null in its own map only left one in the other for good) */
        ctl_ckpt_drop(&c->ckpt[idx], keys[i], in_data[i] ? CTL_CKPT_IN_TEXT : CTL_CKPT_IN_BIN);
        xfree(keys[i]);
    }
    xfree(keys);
    xfree(in_data);
}

/* Keys of Deployments gpuscaler no longer tracks (deleted or opted out while it was not
 * running), kept in another ConfigMap than theirs, or in the other map than theirs:
 * removed in the next save, of dotted and of hashed names too (they used to stay for
 * good). A namespace's keys only while its view is current (cache_current): those of
 * one whose watch fails go with a read once it is current again. */
static void prune(struct controller *c, size_t idx, json_t *body)
{
    if (c->dry_run || !c->cache || !controller_leading(c))
        return;
    size_t nds = 0;
    const struct kube_deployment *const *ds = kube_cache_deployments(c->cache, &nds);
    ctl_checkpoint_prune(c, idx, body, ds, nds, cache_current, c->cache);
}

void ctl_checkpoint_noted(struct controller *c, size_t idx, json_t *body)
{
    ctl_ckpt_note_size(&c->ckpt[idx], body);
    prune(c, idx, body);
}

/* After a read answered: the next reads for Deployments still waiting for
 * their state, within the budget. A tick starts at most CKPT_MAX_READS of
 * them; without this, 200 ConfigMaps took 13 ticks to read after a start or a
 * takeover (a minute at 5 s ticks), each Deployment planning without its
 * history and unable to be saved before a handover meanwhile. A failed read
 * waits for the next tick instead. */
static void load_waiting(struct controller *c)
{
    for (size_t b = 0; b < CTL_WL_BUCKETS && c->ckpt_reads < CKPT_MAX_READS; b++)
        for (struct ctl_wl *w = c->table[b]; w && c->ckpt_reads < CKPT_MAX_READS; w = w->next)
            if (w->fc && !w->checkpoint_loaded)
                ctl_checkpoint_load(c, w);
}

static void save_one(struct controller *c, size_t idx);

static void cm_read(const struct kube_result *res, void *arg)
{
    struct cm_req *r = arg;
    struct controller *c = r->c;
    c->ckpt[r->idx].get_inflight = false;
    json_t *body = res->err == 0 ? res->body : NULL;
    if (res->err != 0 && res->err != -ENOENT)
        LOG_WARN(SUB, "reading checkpoint ConfigMap %s failed: HTTP %ld %s (read again next "
                      "tick)", r->cm, res->status, res->message);
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        for (struct ctl_wl *w = c->table[b]; w; w = w->next) {
            if (!w->checkpoint_loaded || w->checkpoint_ready ||
                ctl_checkpoint_index(w->ns, w->name, c->nckpt) != r->idx)
                continue;
            if (res->err != 0 && res->err != -ENOENT) {
                w->checkpoint_loaded = false; /* never overwrite it unread */
                w->checkpoint_failed = true;
                continue;
            }
            ctl_checkpoint_restore(w, body, r->cm);
            w->checkpoint_ready = true; /* read, or nothing stored: saves may write it now */
        }
    if (body)
        ctl_checkpoint_noted(c, r->idx, body);
    if (r->resave && res->err == 0 && !c->closing && !c->ckpt[r->idx].patch_inflight &&
        controller_leading(c)) {
        c->ckpt[r->idx].resave = true; /* send_save marks the save */
        save_one(c, r->idx);
        c->ckpt[r->idx].resave = false;
    }
    bool more = !c->closing && (res->err == 0 || res->err == -ENOENT);
    req_free(r);
    if (more)
        load_waiting(c);
}

void ctl_checkpoint_load(struct controller *c, struct ctl_wl *w)
{
    size_t idx = ctl_checkpoint_index(w->ns, w->name, c->nckpt);
    struct ctl_ckpt *k = &c->ckpt[idx];
    if (k->get_inflight) {
        w->checkpoint_loaded = true; /* the read in flight serves it */
        return;
    }
    /* reads have a budget of their own: the status writes of a tick (a shard just taken
     * over) must not hold a Deployment's state back for ticks, since nothing is saved for
     * a Deployment before its state was read */
    if (c->ckpt_reads >= CKPT_MAX_READS)
        return; /* retried next tick */
    w->checkpoint_loaded = true;
    k->get_inflight = true;
    struct cm_req *r = req_new(c, idx, false);
    if (kube_configmap_get(c->kube, c->cfg->leader.namespace_, r->cm, cm_read, r) != 0) {
        k->get_inflight = false;
        w->checkpoint_loaded = false;
        w->checkpoint_failed = true;
        req_free(r);
    }
}

/* ---- writing -------------------------------------------------------------------- */

static void send_save(struct controller *c, size_t idx, json_t *bin, json_t *text, json_t *done,
                      uint64_t until);

/* What is left of a save's deadline: 0 for none, -1 when it has passed. */
static int64_t left_of(const struct controller *c, uint64_t until)
{
    if (until == 0)
        return 0;
    uint64_t now = uv_now(c->loop);
    return until > now ? (int64_t)(until - now) : -1;
}

static void cm_written(const struct kube_result *res, void *arg)
{
    struct cm_req *r = arg;
    struct controller *c = r->c;
    struct ctl_ckpt *k = &c->ckpt[r->idx];
    int64_t left = left_of(c, r->until);
    if (res->err == -ENOENT && !r->created && left >= 0) {
        /* the first save (maybe at shutdown): create it with what the patch carried, without
         * the removals; shutdown waits for it */
        json_t *maps[] = {r->bin, r->text};
        for (size_t i = 0; i < UTIL_ARRAY_LEN(maps); i++) {
            const char *key;
            void *tmp;
            json_t *v;
            json_object_foreach_safe(maps[i], tmp, key, v) {
                if (json_is_null(v))
                    json_object_del(maps[i], key);
            }
        }
        json_t *obj = json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:O,s:O}", "apiVersion", "v1",
                                "kind", "ConfigMap", "metadata", "name", r->cm, "namespace",
                                c->cfg->leader.namespace_, "labels",
                                "app.kubernetes.io/managed-by", "gpuscaler", "binaryData",
                                r->bin, "data", r->text);
        r->created = true;
        if (obj && kube_configmap_create(c->kube, c->cfg->leader.namespace_, obj, left,
                                         cm_written, r) == 0) {
            json_decref(obj);
            return;
        }
        json_decref(obj);
        k->patch_inflight = false;
        ctl_ckpt_drops_done(k, NULL);
        req_free(r);
        return;
    }
    k->patch_inflight = false;
    /* the removals it carried are done (later ones stay queued) */
    ctl_ckpt_drops_done(k, res->err == 0 ? r->done : NULL);
    if (res->err == 0) {
        ctl_ckpt_note_size(k, res->body);
    } else if (res->err == -EEXIST && res->status == 409 && r->created && left >= 0) {
        /* created meanwhile by another instance (two replicas handing shards over at
         * once): patch it now with what the create carried (a handover or the close may
         * have ended the terms meanwhile, so it is not built again); its removals stay
         * queued for the next save */
        send_save(c, r->idx, json_incref(r->bin), json_incref(r->text), NULL,
                  r->until); /* before req_free: c stays alive while a request runs */
        req_free(r);
        return;
    } else if (res->status == 422 && res->message && strstr(res->message, "Too long")) {
        /* what it holds grew since it was read here (another replica's keys): read it
         * again, and save again what then fits (once) */
        if (!r->second && !c->closing && !k->get_inflight) {
            k->get_inflight = true;
            struct cm_req *g = req_new(c, r->idx, false);
            g->resave = true;
            if (kube_configmap_get(c->kube, c->cfg->leader.namespace_, g->cm, cm_read, g) !=
                0) {
                k->get_inflight = false;
                req_free(g);
            }
        }
        int64_t now = util_now_unix_ms();
        if (now - k->full_logged_ms >= FULL_LOG_EVERY_MS) {
            k->full_logged_ms = now;
            LOG_WARN(SUB, "checkpoint ConfigMap %s is full: its Deployments' state is over the "
                          "1 MiB a ConfigMap may hold, so their forecasters are not saved; "
                          "raise checkpoint.configmaps (now %zu): %s",
                     r->cm, c->nckpt, res->message);
        }
    } else if (res->err != 0) {
        LOG_WARN(SUB, "writing checkpoint ConfigMap %s failed: HTTP %ld %s", r->cm, res->status,
                 res->message);
    }
    req_free(r);
}

/* Add w's entries to bin (binaryData) and text (data); false when it has nothing to save. */
static bool add_entries(json_t *bin, json_t *text, const struct ctl_wl *w, size_t *bytes)
{
    if (!w->fc || !w->checkpoint_ready || util_now_unix_ms() < w->ckpt_foreign_until)
        return false;
    uint8_t *buf = NULL;
    size_t len = 0;
    char key[KEY_MAX + 1];
    forecast_serialize_packed(w->fc, &buf, &len);
    char *enc = kube_base64_encode(buf, len);
    xfree(buf);
    ctl_checkpoint_key("forecast", w->ns, w->name, key, sizeof(key));
    json_object_set_new(bin, key, json_string(enc));
    xfree(enc);
    *bytes += len;
    uint8_t cbuf[CAPACITY_STATE_SIZE];
    size_t clen = capacity_encode(&w->cap, cbuf, sizeof(cbuf));
    enc = kube_base64_encode(cbuf, clen);
    ctl_checkpoint_key("capacity", w->ns, w->name, key, sizeof(key));
    json_object_set_new(bin, key, json_string(enc));
    xfree(enc);
    *bytes += clen;
    char unit[64];
    ctl_demand_unit_label(&w->cfg.policy, unit, sizeof(unit));
    ctl_checkpoint_key("unit", w->ns, w->name, key, sizeof(key));
    json_object_set_new(text, key, json_string(unit));
    *bytes += strlen(unit);
    if (w->uid[0]) {
        ctl_checkpoint_key("uid", w->ns, w->name, key, sizeof(key));
        json_object_set_new(text, key, json_string(w->uid));
        *bytes += strlen(w->uid);
    }
    return true;
}

/* Merge-patch ConfigMap idx with bin and text (taken: the request holds
 * them, and done, the queued removals they settle, NULL none), ending by
 * until. */
static void send_save(struct controller *c, size_t idx, json_t *bin, json_t *text, json_t *done,
                      uint64_t until)
{
    struct ctl_ckpt *k = &c->ckpt[idx];
    json_t *patch = json_pack("{s:{s:{s:s}},s:O,s:O}", "metadata", "labels",
                              "app.kubernetes.io/managed-by", "gpuscaler", "binaryData", bin,
                              "data", text);
    struct cm_req *r = req_new(c, idx, true);
    r->bin = bin;
    r->text = text;
    r->done = done;
    r->until = until;
    r->second = k->resave;
    k->patch_inflight = true;
    int64_t left = left_of(c, until);
    int rc = patch && left >= 0 ? kube_configmap_patch(c->kube, c->cfg->leader.namespace_, r->cm,
                                                       patch, left, cm_written, r)
                                : -ENOMEM;
    json_decref(patch);
    if (rc != 0) {
        k->patch_inflight = false;
        ctl_ckpt_drops_done(k, NULL);
        req_free(r);
    }
}

/* One Deployment's entries of a save, apart until the fit is chosen. */
struct cand {
    struct ctl_wl *w;
    json_t *bin, *text;
    size_t bytes;   /**< what the API server counts of them */
    int64_t old;    /**< ... of its entries in the ConfigMap now (as last read or written) */
    int64_t left;   /**< its term left, 0 none */
};

static const char *const whats[] = {"forecast", "capacity", "unit", "uid"};

/* The Deployment's keys (all it may have saved) into the set. */
static void add_keys(json_t *set, const struct ctl_wl *w)
{
    char key[KEY_MAX + 1];
    for (size_t i = 0; i < UTIL_ARRAY_LEN(whats); i++) {
        ctl_checkpoint_key(whats[i], w->ns, w->name, key, sizeof(key));
        json_object_set_new(set, key, json_true());
    }
}

/* The bytes of w's entries in the maps a save writes them to (a copy in
 * the other map is removed apart: see ctl_checkpoint_build). */
static int64_t old_size(const struct ctl_ckpt *k, const struct ctl_wl *w)
{
    char key[KEY_MAX + 1];
    int64_t n = 0;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(whats); i++) {
        ctl_checkpoint_key(whats[i], w->ns, w->name, key, sizeof(key));
        n += ctl_ckpt_share(k, key, ctl_ckpt_home(key));
    }
    return n;
}

/* The least recently saved first, so that when not all fit none waits for
 * ever behind the others' smaller growths (their restored states ever
 * older); then the growth a save of the Deployment makes, smallest first,
 * then by name. */
static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->w->ckpt_saved_seq != y->w->ckpt_saved_seq)
        return x->w->ckpt_saved_seq < y->w->ckpt_saved_seq ? -1 : 1;
    int64_t dx = (int64_t)x->bytes - x->old, dy = (int64_t)y->bytes - y->old;
    if (dx != dy)
        return dx < dy ? -1 : 1;
    int r = strcmp(x->w->ns, y->w->ns);
    return r ? r : strcmp(x->w->name, y->w->name);
}

bool ctl_checkpoint_build(struct controller *c, size_t idx, struct ctl_ckpt_save *s)
{
    struct ctl_ckpt *k = &c->ckpt[idx];
    memset(s, 0, sizeof(*s));
    k->builds++;
    s->bin = json_object();
    s->text = json_object();
    struct cand *cs = NULL;
    size_t nc = 0, cap = 0;
    json_t *carried = json_object(); /* every key the candidates carry */
    json_t *tracked = json_object(); /* every key of a Deployment tracked here */
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        for (struct ctl_wl *w = c->table[b]; w; w = w->next) {
            if (ctl_checkpoint_index(w->ns, w->name, c->nckpt) != idx)
                continue;
            add_keys(tracked, w);
            /* only what this replica still decides for: a shard lapsed since
             * the last tick (its Deployments not yet swept) is its new owner's */
            if (!ctl_acting_for(c, w->ns, w->name))
                continue;
            /* a term about to lapse (its renewal late) would cut every entry's save
             * short: its Deployments are left to the next save, or their next owner */
            int64_t left = ctl_acting_left_ms(c, w->ns, w->name);
            if (left > 0 && left < CKPT_MIN_TERM_MS)
                continue;
            struct cand x = {.w = w, .bin = json_object(), .text = json_object(), .left = left};
            if (!add_entries(x.bin, x.text, w, &x.bytes)) {
                json_decref(x.bin);
                json_decref(x.text);
                continue;
            }
            x.old = old_size(k, w);
            json_object_update(carried, x.bin);
            json_object_update(carried, x.text);
            if (nc == cap) {
                cap = cap ? 2 * cap : 16;
                cs = xrealloc(cs, cap * sizeof(*cs));
            }
            cs[nc++] = x;
        }
    s->queued = k->ndrop;
    s->ndrop = k->ndrop < CKPT_MAX_DROPS ? k->ndrop : CKPT_MAX_DROPS;
    s->done = json_object();
    /* The ConfigMap after the patch, as the API server counts it against its
     * 1 MiB: what it holds now less the removals carried, each Deployment's
     * entries as they are, then the growth of each one saved, the smallest
     * first, while it fits: as many are saved as fit. One left out keeps the
     * entries saved before (its older state restores). */
    int64_t size = k->size_known ? k->size : 0;
    json_t *nulls[2] = {json_object(), json_object()};
    size -= ctl_ckpt_drops_plan(k, s->ndrop, tracked, carried, nulls, s->done);
    json_decref(carried);
    if (nc > 1)
        qsort(cs, nc, sizeof(*cs), cand_cmp);
    for (size_t i = 0; i < nc; i++) {
        int64_t grow = (int64_t)cs[i].bytes - cs[i].old;
        if (size + grow > CKPT_MAX_BYTES) {
            if (!s->left)
                s->left = xcalloc(nc, sizeof(*s->left));
            s->left[s->nleft++] = cs[i].w;
        } else {
            size += grow;
            cs[i].w->ckpt_saved_seq = k->builds;
            json_object_update(s->bin, cs[i].bin);
            json_object_update(s->text, cs[i].text);
            s->n++;
            s->bytes += cs[i].bytes;
            if (cs[i].left > 0 && (s->within == 0 || cs[i].left < s->within))
                s->within = cs[i].left;
        }
        json_decref(cs[i].bin);
        json_decref(cs[i].text);
    }
    xfree(cs);
    s->projected = size;
    json_object_update_missing(s->bin, nulls[0]);
    json_object_update_missing(s->text, nulls[1]);
    json_decref(nulls[0]);
    json_decref(nulls[1]);
    json_decref(tracked);
    return s->n > 0 || s->ndrop > 0;
}

void ctl_checkpoint_save_free(struct ctl_ckpt_save *s)
{
    json_decref(s->bin);
    json_decref(s->text);
    json_decref(s->done);
    xfree(s->left);
    memset(s, 0, sizeof(*s));
}

/* Deployments left out of a save for want of room: said at most once an hour
 * per ConfigMap, each by name. */
static void log_left_out(struct controller *c, size_t idx, const struct ctl_ckpt_save *s,
                         const char *cm)
{
    struct ctl_ckpt *k = &c->ckpt[idx];
    int64_t now = util_now_unix_ms();
    if (now - k->full_logged_ms < FULL_LOG_EVERY_MS)
        return;
    k->full_logged_ms = now;
    LOG_WARN(SUB, "checkpoint ConfigMap %s is full: %zu of its Deployments' states do not fit "
                  "in the 1 MiB a ConfigMap may hold, so they are not saved (%zu are); raise "
                  "checkpoint.configmaps (now %zu)",
             cm, s->nleft, s->n, c->nckpt);
    for (size_t i = 0; i < s->nleft; i++)
        LOGW_WARN(SUB, s->left[i]->ns, s->left[i]->name, "checkpoint not saved: no room for "
                  "its state in ConfigMap %s (1 MiB at most); the state saved before stays", cm);
}

static void save_one(struct controller *c, size_t idx)
{
    struct ctl_ckpt_save s;
    bool any = ctl_checkpoint_build(c, idx, &s);
    char cm[256];
    cm_name(c, idx, cm, sizeof(cm));
    if (s.nleft > 0)
        log_left_out(c, idx, &s, cm);
    if (!any) {
        ctl_checkpoint_save_free(&s);
        return;
    }
    LOG_DEBUG(SUB, "saving checkpoint ConfigMap %s: %zu Deployments, %zu bytes, %zu removed, "
                   "%zu left out, %lld bytes after it",
              cm, s.n, s.bytes, s.ndrop, s.nleft, (long long)s.projected);
    /* a save past the term would overwrite what a new owner saved since; the close's
     * saves end before the Leases are released (controller_close) */
    int64_t within = s.within;
    if (c->closing && (within == 0 || within > CTL_CLOSE_SAVE_WAIT_MS))
        within = CTL_CLOSE_SAVE_WAIT_MS;
    send_save(c, idx, s.bin, s.text, s.done,
              within > 0 ? uv_now(c->loop) + (uint64_t)within : 0);
    s.bin = s.text = s.done = NULL; /* the request holds them */
    ctl_checkpoint_save_free(&s);
}

size_t ctl_checkpoint_saving(const struct controller *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->nckpt; i++)
        n += c->ckpt[i].patch_inflight;
    return n;
}

void ctl_checkpoint_tick(struct controller *c, int64_t now_ms, bool all)
{
    if (c->dry_run || !controller_leading(c))
        return;
    for (size_t i = 0; i < c->nckpt; i++) {
        struct ctl_ckpt *k = &c->ckpt[i];
        if (k->next_save_ms == 0) /* spread the ConfigMaps over the interval */
            k->next_save_ms = now_ms + CHECKPOINT_INTERVAL_MS * (int64_t)(i + 1) /
                                           (int64_t)c->nckpt;
        if (k->patch_inflight || (!all && (now_ms < k->next_save_ms || !budget(c))))
            continue;
        k->next_save_ms = now_ms + CHECKPOINT_INTERVAL_MS;
        save_one(c, i);
    }
}

size_t ctl_checkpoint_flush_shard(struct controller *c, uint32_t shard, bool start)
{
    if (c->dry_run || !c->nshards || !c->nckpt)
        return 0;
    uint8_t *mark = xcalloc(c->nckpt, 1);
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        for (struct ctl_wl *w = c->table[b]; w; w = w->next)
            if (shard_of(w->ns, w->name, c->nshards) == shard)
                mark[ctl_checkpoint_index(w->ns, w->name, c->nckpt)] = 1;
    size_t pending = 0, nmarked = 0;
    for (size_t i = 0; i < c->nckpt; i++) {
        if (!mark[i])
            continue;
        nmarked++;
        if (start && !c->ckpt[i].patch_inflight) {
            c->ckpt[i].next_save_ms = 0; /* the periodic save starts its interval again */
            save_one(c, i);
        }
        pending += c->ckpt[i].patch_inflight;
    }
    xfree(mark);
    if (start)
        LOG_INFO(SUB, "shard %u: saving the checkpoints of its Deployments before the handover: "
                      "%zu ConfigMaps, %zu being written", shard, nmarked, pending);
    return pending;
}

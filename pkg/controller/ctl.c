/* SPDX-License-Identifier: Apache-2.0 */
/* controller/ctl: the decision loop. Every decision interval it walks the
 * tracked Deployments in the kube cache and runs each one's tick
 * (ctl_decide: configure, observe, demand, forecast, act, report; decide.c),
 * then forgets the Deployments that are gone.
 *
 * The loop recomputes from the cache on every tick and never acts on event
 * deltas, nor for a Deployment before its namespace's caches synced (STYLE
 * rule 15). Workload state lives in
 * a hash table keyed by namespace/name; a Deployment that disappears or is
 * replaced (new uid) loses its state. Requests in flight carry copies of the
 * workload's key, never pointers to it, so a workload may vanish meanwhile. */
#include "controller-int.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"
#include "promql/promql.h"
#include "scrape/scrape.h"
#include "shard/shard.h"

#define SUB "controller"

/* ---- workload table --------------------------------------------------- */

static unsigned wl_hash(const char *ns, const char *name)
{
    unsigned h = 2166136261u;
    for (const char *p = ns; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    h = (h ^ '/') * 16777619u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % CTL_WL_BUCKETS;
}

struct ctl_wl *ctl_wl_find(struct controller *c, const char *ns, const char *name)
{
    for (struct ctl_wl *w = c->table[wl_hash(ns, name)]; w; w = w->next)
        if (strcmp(w->ns, ns) == 0 && strcmp(w->name, name) == 0)
            return w;
    return NULL;
}

static void wl_free(struct ctl_wl *w)
{
    ctl_record_close(w);
    forecast_free(w->fc);
    xfree(w->ns);
    xfree(w->name);
    xfree(w->uid);
    xfree(w->status_written);
    xfree(w->hpa_told);
    ctl_backlog_reset(w); /* frees the Prometheus source's per-pod state */
    ctl_cold_start_free(w);
    xfree(w);
}

/* The learned cold start the Deployment's status annotation has (the
 * replica that acted before this one wrote it), in w->prior_*. */
static void prior_cold_start(struct ctl_wl *w, const struct kube_deployment *d)
{
    int64_t at = 0;
    json_t *st = ctl_status_read(d, &at);
    const json_t *cs = json_object_get(st, "coldStart");
    double sched = json_number_value(json_object_get(cs, "scheduleSeconds"));
    double load = json_number_value(json_object_get(cs, "loadSeconds"));
    /* as cold_start_of() bounds a pod's (observe.c): under an hour */
    if (isfinite(sched) && isfinite(load) && sched >= 0 && load > 0 && sched + load < 3600 &&
        at != 0) {
        w->prior_schedule_ms = (int64_t)(sched * 1000.0);
        w->prior_load_ms = (int64_t)(load * 1000.0);
        w->prior_at_ms = at;
    }
    json_decref(st);
}

static struct ctl_wl *wl_new(struct controller *c, const struct kube_deployment *d)
{
    struct ctl_wl *w = xcalloc(1, sizeof(*w));
    w->ns = xstrdup(d->ns);
    w->name = xstrdup(d->name);
    w->uid = xstrdup(d->uid ? d->uid : "");
    w->record_fd = -1;
    w->want_target = -1;
    w->told_from = w->told_to = -1;
    w->last_event_reason = POLICY_REASON_COUNT;
    policy_state_init(&w->pst);
    capacity_init(&w->cap);
    w->cap_in_use = NAN;
    w->refused_rps = NAN;
    prior_cold_start(w, d);
    unsigned h = wl_hash(d->ns, d->name);
    w->next = c->table[h];
    c->table[h] = w;
    c->nwl++;
    return w;
}

static void wl_remove(struct controller *c, struct ctl_wl *w)
{
    struct ctl_wl **pp = &c->table[wl_hash(w->ns, w->name)];
    while (*pp && *pp != w)
        pp = &(*pp)->next;
    if (*pp)
        *pp = w->next;
    c->nwl--;
    if (c->scrape)
        scrape_forget(c->scrape, w->ns, w->name);
    ctl_status_forget(c, w);
    wl_free(w);
}

void ctl_io_begin(struct controller *c)
{
    c->pending_io++;
}

static void maybe_finish_close(struct controller *c);

void ctl_io_end(struct controller *c)
{
    c->pending_io--;
    if (c->closing)
        maybe_finish_close(c);
}

/* The wall clock set forward or back (an NTP step; a paused VM's clock
 * corrected) by more than CTL_CLOCK_STEP_MS between two ticks, measured
 * against util_now_boot_ms (which a machine's sleep advances too: that is
 * time that passed, not a step): the policy's clocks and the times kept per
 * Deployment move with it, so that each keeps the time it measured
 * (policy_state_shift, capacity_shift, the backlog's samples), and so do
 * the deadlines kept in wall time (the checkpoints' next saves, the status'
 * refresh). The
 * scraper's clock is the boot one, which the step does not move (observe.c
 * asks it at tick_boot_ms); Prometheus' answers carry its times. */
void ctl_clock_step(struct controller *c, int64_t now, int64_t boot)
{
    int64_t prev = c->tick_wall_ms, prev_boot = c->tick_boot_ms;
    c->tick_wall_ms = now;
    c->tick_boot_ms = boot;
    if (!prev)
        return;
    int64_t step = (now - prev) - (boot - prev_boot);
    if (step <= CTL_CLOCK_STEP_MS && step >= -CTL_CLOCK_STEP_MS)
        return;
    c->clock_steps++;
    LOG_WARN(SUB, "the wall clock was set %s by %.1f s between two ticks: the rules' clocks move "
                  "with it",
             step > 0 ? "forward" : "back", (double)(step > 0 ? step : -step) / 1000.0);
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++) {
        for (struct ctl_wl *w = c->table[b]; w; w = w->next) {
            policy_state_shift(&w->pst, step);
            capacity_shift(&w->cap, step);
            /* the forecaster's buckets too: set back, it refused every
             * observation until the clock caught up (a time past its range:
             * the next tick's ctl_forecast starts it afresh) */
            if (w->fc && forecast_shift(w->fc, step) != 0)
                ctl_forecast_restart(c, w, "the wall clock step moves its times out of range");
            for (size_t i = 0; i < CTL_BACKLOG_SAMPLES; i++)
                w->bl_t[i] += step; /* the arrivals' backlog growth */
            /* Prometheus' lags: its sample times did not move, so the lags
             * measured before are off by the step; the interval is not */
            w->pq_lag_win = w->pq_need_win = (struct ctl_win2){0};
            if (w->pq_iv_win.start)
                w->pq_iv_win.start += step;
            w->tracked_since_ms += step;
            if (w->hpa.none_since_ms)
                w->hpa.none_since_ms += step; /* the grace before "no HPA" */
            if (w->have_last)
                w->last_decision_ms += step;
            for (size_t i = 0; i < UTIL_ARRAY_LEN(w->last_event_ms); i++)
                if (w->last_event_ms[i]) /* the Events' rate limits */
                    w->last_event_ms[i] += step;
            /* the status' refresh, and the hold on another release's state */
            if (w->status_written_ms)
                w->status_written_ms += step;
            if (w->ckpt_foreign_until)
                w->ckpt_foreign_until += step;
        }
    }
    /* the checkpoints' next saves: set back by 40 minutes, none was saved
     * for 50, and a crash meanwhile lost that much history */
    for (size_t i = 0; i < c->nckpt; i++) {
        if (c->ckpt[i].next_save_ms)
            c->ckpt[i].next_save_ms += step;
        if (c->ckpt[i].full_logged_ms)
            c->ckpt[i].full_logged_ms += step;
    }
}

/* Whether the caches covering namespace ns are current enough to act on:
 * their list+watches have not failed for CTL_CACHE_DOWN_HOLD_MS; *what (may
 * be NULL) gets the failing one's path. */
static bool ns_current(const struct controller *c, const char *ns, const char **what)
{
    return kube_cache_ns_down_ms(c->cache, ns, what) < CTL_CACHE_DOWN_HOLD_MS;
}

void controller_tick(struct controller *c)
{
    /* each Deployment once its namespace's caches listed (below): one
     * namespace whose lists fail must not stop the others */
    if (c->closing)
        return;
    uint64_t t0 = uv_hrtime();
    int64_t now = util_now_unix_ms();
    ctl_clock_step(c, now, util_now_boot_ms());
    bool leading = controller_leading(c);
    c->cache_down_ms = kube_cache_down_ms(c->cache, &c->cache_down_what);
    bool held = c->cache_down_ms >= CTL_CACHE_DOWN_HOLD_MS;
    if (held != c->cache_held) {
        if (held)
            LOG_WARN(SUB, "the watch of %s has failed for %llds: the pods seen may be out of "
                     "date; the Deployments it covers hold their replicas until it is current "
                     "again", c->cache_down_what, (long long)(c->cache_down_ms / 1000));
        else
            LOG_INFO(SUB, "the Kubernetes caches are current again: decisions resume");
        c->cache_held = held;
    }
    bool sharded = c->shards != NULL;
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        for (struct ctl_wl *w = c->table[b]; w; w = w->next)
            w->seen = false;
    size_t n = 0;
    const struct kube_deployment *const *ds = kube_cache_deployments(c->cache, &n);
    for (size_t i = 0; i < n; i++) {
        const struct kube_deployment *d = ds[i];
        if (d->deleting)
            continue;
        if (!kube_cache_ns_synced(c->cache, d->ns))
            continue; /* its namespace's pods not all listed yet */
        struct ctl_wl *w = ctl_wl_find(c, d->ns, d->name);
        if (sharded) {
            /* only the shards held: another replica scrapes and decides the
             * rest (the sweep below forgets those this one no longer holds) */
            leading = ctl_acting_for(c, d->ns, d->name);
            if (!leading)
                continue;
        }
        if (w && strcmp(w->uid, d->uid ? d->uid : "") != 0) {
            LOGW_INFO(SUB, d->ns, d->name, "Deployment was replaced (new uid): state reset");
            wl_remove(c, w);
            w = NULL;
        }
        if (!w) {
            w = wl_new(c, d);
            w->tracked_since_ms = now;
            LOGW_INFO(SUB, d->ns, d->name, "tracking");
            c->hpa_soon = true;
        }
        w->seen = true;
        w->cache_held = !ns_current(c, d->ns, &w->cache_down_what);
        w->conflict[0] = '\0';
        for (size_t k = 0; k < c->n_hpa_targets; k++) {
            const char *t = c->hpa_targets[k], *tab = strchr(t, '\t');
            size_t nl = strlen(d->ns), dl = strlen(d->name);
            if (tab && strncmp(t, d->ns, nl) == 0 && t[nl] == '/' &&
                (size_t)(tab - t) == nl + 1 + dl && strncmp(t + nl + 1, d->name, dl) == 0)
                snprintf(w->conflict, sizeof(w->conflict), "%s", tab + 1);
        }
        /* a shard being handed over decides as a follower does: its writes
         * would be refused, its Events told again by the next owner (it is
         * still tracked: its checkpoint saves and writes in flight end first) */
        ctl_decide(c, w, d, now, leading && !ctl_handing_over(c, d->ns, d->name));
        /* no HPA seen for the grace: look again now, not at the next minute */
        if (w->hpa.listed && w->hpa.count == 0 && !w->hpa.none_confirmed &&
            !w->hpa.recheck_asked && now - w->hpa.none_since_ms >= CTL_HPA_NONE_GRACE_MS) {
            w->hpa.recheck_asked = true;
            c->hpa_soon = true;
        }
    }
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++) {
        struct ctl_wl *w = c->table[b];
        while (w) {
            struct ctl_wl *next = w->next;
            if (!w->seen) {
                /* a Deployment whose shard moved to another replica keeps its
                 * checkpoint for the new owner; one gone, opted out or being
                 * deleted (a foreground delete keeps it in the cache until
                 * its ReplicaSets are gone, and no workload is left then to
                 * forget it) does not */
                const struct kube_deployment *d =
                    sharded ? kube_cache_deployment(c->cache, w->ns, w->name) : NULL;
                bool moved = d && !d->deleting;
                if (moved)
                    LOGW_INFO(SUB, w->ns, w->name, "no longer tracked here: shard %u not held",
                              shard_of(w->ns, w->name, c->nshards));
                else
                    LOGW_INFO(SUB, w->ns, w->name, "no longer tracked");
                if (!moved)
                    ctl_checkpoint_forget(c, w);
                wl_remove(c, w);
            }
            w = next;
        }
    }
    /* a new Deployment's HPAs are known before it can act (its rate needs
     * two scrapes): another scaler of it in mode scale, the one applying its
     * count in mode external-metric */
    if (c->hpa_soon && !c->hpa_lists_pending) {
        c->hpa_soon = false;
        ctl_hpa_refresh(c);
    }
    ctl_checkpoint_tick(c, now, false);
    ctl_status_pump(c);
    c->ticks++;
#ifdef __GLIBC__
    /* give bursts of freed response buffers back to the OS once a minute */
    if (now - c->last_trim_ms >= 60000) {
        malloc_trim(0);
        c->last_trim_ms = now;
    }
#endif
    c->last_tick_seconds = (double)(uv_hrtime() - t0) / 1e9;
}

static void tick_cb(uv_timer_t *t)
{
    controller_tick(util_container_of(t, struct controller, tick_timer));
}

static void hpa_cb(uv_timer_t *t)
{
    ctl_hpa_refresh(util_container_of(t, struct controller, hpa_timer));
}

/* ---- lifecycle ----------------------------------------------------------- */

int controller_new(uv_loop_t *loop, struct kube *k, struct kube_cache *cache, struct scrape *s,
                   const struct ctl_config *cfg, const struct ctl_opts *o,
                   struct controller **out)
{
    struct controller *c = xcalloc(1, sizeof(*c));
    c->loop = loop;
    c->kube = k;
    c->cache = cache;
    c->scrape = s;
    c->promql = o ? o->promql : NULL;
    c->cfg = cfg;
    c->identity = xstrdup(o && o->identity ? o->identity : "gpuscaler");
    c->dry_run = o && o->dry_run;
    c->leader_elect = o ? o->leader_elect : true;
    c->record_dir = o && o->record_dir ? xstrdup(o->record_dir) : NULL;
    c->checkpoint_prefix = cfg->checkpoint_configmap;
    ctl_checkpoint_init(c);
    ctl_leader_init(&c->leader, c->identity, cfg->leader.lease_duration_ms,
                    cfg->leader.renew_deadline_ms, cfg->leader.retry_period_ms);
    uv_timer_init(loop, &c->tick_timer);
    uv_timer_init(loop, &c->elect_timer);
    uv_timer_init(loop, &c->hpa_timer);
    uv_timer_init(loop, &c->hold_timer);
    c->hold_timer.data = c;
    ctl_status_init(c);
    c->open_handles = 5;
    uint64_t iv = (uint64_t)cfg->decision_interval_ms;
    uv_timer_start(&c->tick_timer, tick_cb, iv, iv);
    uv_timer_start(&c->hpa_timer, hpa_cb, 1000, 60000);
    if (c->leader_elect && cfg->sharding.enabled)
        ctl_shards_start(c);
    else if (c->leader_elect)
        ctl_elect_start(c);
    *out = c;
    return 0;
}

bool controller_synced(const struct controller *c)
{
    return kube_cache_synced(c->cache);
}

bool controller_ready(const struct controller *c)
{
    return kube_cache_settled(c->cache, CTL_CACHE_DOWN_HOLD_MS);
}

bool controller_leading(const struct controller *c)
{
    if (c->closing && c->released)
        return false;
    if (!c->leader_elect)
        return true;
    if (c->shards)
        return ctl_shards_held(c) > 0;
    uv_update_time(c->loop); /* a check right before a write: not the iteration's start */
    return ctl_leader_is_leading(&c->leader, (int64_t)uv_now(c->loop));
}

static void free_controller(struct controller *c)
{
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++) {
        struct ctl_wl *w = c->table[b];
        while (w) {
            struct ctl_wl *next = w->next;
            wl_free(w);
            w = next;
        }
        c->table[b] = NULL;
    }
    for (size_t i = 0; i < c->n_hpa_targets; i++)
        xfree(c->hpa_targets[i]);
    xfree(c->hpa_targets);
    for (size_t i = 0; i < c->n_hpa_targets_next; i++)
        xfree(c->hpa_targets_next[i]);
    xfree(c->hpa_targets_next);
    for (size_t i = 0; i < c->n_hpa_failed_ns; i++)
        xfree(c->hpa_failed_ns[i]);
    xfree(c->hpa_failed_ns);
    ctl_checkpoint_free(c);
    ctl_shards_free(c);
    controller_close_cb cb = c->close_cb;
    void *arg = c->close_arg;
    xfree(c->identity);
    xfree(c->record_dir);
    xfree(c);
    if (cb)
        cb(arg);
}

static void maybe_finish_close(struct controller *c)
{
    if (c->open_handles == 0 && c->pending_io == 0)
        free_controller(c);
}

static void handle_closed(uv_handle_t *h)
{
    struct controller *c = h->data;
    c->open_handles--;
    maybe_finish_close(c);
}

void ctl_release_hold_end(struct controller *c, const char *why)
{
    if (!c->release_hold)
        return;
    c->release_hold = false;
    LOG_INFO(SUB, "shutting down: releasing the lease now (%s)", why);
    uv_close((uv_handle_t *)&c->hold_timer, handle_closed);
    if (c->shards)
        ctl_shards_release_resume(c);
    else
        ctl_elect_release_resume(c);
}

void ctl_release_hold_check(struct controller *c)
{
    if (c->release_hold && ctl_checkpoint_saving(c) == 0 && ctl_writes_inflight(c, -1) == 0)
        ctl_release_hold_end(c, "the checkpoints are saved and the writes in flight ended");
}

static void hold_expired(uv_timer_t *t)
{
    struct controller *c = t->data;
    char why[160];
    snprintf(why, sizeof(why), "%zu checkpoint ConfigMap saves and %zu status or /scale writes "
             "still unanswered after %d ms", ctl_checkpoint_saving(c), ctl_writes_inflight(c, -1),
             CTL_CLOSE_SAVE_WAIT_MS);
    ctl_release_hold_end(c, why);
}

/* The close: the last checkpoint saves go first, and the Leases are released
 * once they have answered (at most CTL_CLOSE_SAVE_WAIT_MS later), so that the
 * next owner of a Deployment reads its state as of now, not of up to a
 * checkpoint interval ago. Acting (scale and status writes) stops at once. */
void controller_close(struct controller *c, controller_close_cb cb, void *arg)
{
    if (c->closing)
        return;
    c->closing = true;
    c->close_cb = cb;
    c->close_arg = arg;
    ctl_checkpoint_tick(c, util_now_unix_ms(), true);
    /* and once the status and /scale writes in flight have ended: a resend
     * after a 429 would land over the next owner's */
    size_t saving = c->leader_elect ? ctl_checkpoint_saving(c) : 0;
    size_t writes = c->leader_elect ? ctl_writes_inflight(c, -1) : 0;
    if (saving + writes > 0) {
        c->release_hold = true;
        LOG_INFO(SUB, "shutting down: releasing the lease once %zu checkpoint ConfigMap saves "
                      "and %zu status or /scale writes have answered (at most %d ms)", saving,
                 writes, CTL_CLOSE_SAVE_WAIT_MS);
        uv_timer_start(&c->hold_timer, hold_expired, CTL_CLOSE_SAVE_WAIT_MS, 0);
    }
    if (c->leader_elect && c->shards)
        ctl_shards_release(c);
    else if (c->leader_elect)
        ctl_elect_release(c);
    uv_handle_t *hs[] = {(uv_handle_t *)&c->tick_timer, (uv_handle_t *)&c->elect_timer,
                         (uv_handle_t *)&c->hpa_timer, (uv_handle_t *)&c->status_timer};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(hs); i++) {
        hs[i]->data = c;
        uv_close(hs[i], handle_closed);
    }
    if (!c->release_hold)
        uv_close((uv_handle_t *)&c->hold_timer, handle_closed);
}

/* ---- views ------------------------------------------------------------------ */


/* The metrics source of a Deployment another replica decides for: its
 * annotation, else the config file's defaults (invalid ones are not served). */
static enum ctl_source source_of(const struct controller *c, const struct kube_deployment *d)
{
    const char *v = kube_labels_get(&d->annotations, CTL_ANNOTATION_PREFIX "metrics-source");
    for (size_t i = 0; !v && i < c->cfg->n_defaults; i++)
        if (strcmp(c->cfg->defaults[i].key, "metrics-source") == 0)
            v = c->cfg->defaults[i].value;
    return v && strcmp(v, "prometheus") == 0 ? CTL_SOURCE_PROMETHEUS : CTL_SOURCE_SCRAPE;
}

static double status_num(const json_t *st, const char *key)
{
    const json_t *v = json_object_get(st, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Served from the informer cache's copy of the status. live: also that
 * this cache is current (a failed watch would serve an old decision as the
 * owner's). A status of invalid annotations is served as stale (below), as
 * are the reasons not served (ctl_reason_served). */
bool ctl_status_view(const struct controller *c, const struct kube_deployment *d, int64_t now,
                     bool live, struct ctl_workload_view *v)
{
    int64_t at = 0;
    json_t *st = ctl_status_read(d, &at);
    const char *reason = json_string_value(json_object_get(st, "reason"));
    const json_t *desired = json_object_get(st, "desired");
    bool ok = reason && at != 0;
    bool invalid = ok && strcmp(reason, "InvalidAnnotation") == 0;
    /* a count no replica wrote (an edit by hand: negative, past int32) is
     * none, not one served */
    ok = ok && (invalid || (json_is_integer(desired) && json_integer_value(desired) >= 0 &&
                            json_integer_value(desired) <= INT32_MAX));
    if (ok) {
        int64_t tick = c->cfg->decision_interval_ms;
        /* rewritten whenever any number in it changes, and refreshed at
         * least every status.refresh-interval when nothing does (status.c);
         * while the owner is alive (its Lease valid), an unchanged
         * annotation is its decision as of its last tick (a new decision's
         * write goes first), so that is the time served */
        int64_t max_age = ctl_status_max_age_ms(c->cfg) + 3 * tick;
        *v = (struct ctl_workload_view){
            .ns = d->ns,
            .name = d->name,
            .valid = live && !invalid &&
                     strcmp(reason, policy_reason_name(POLICY_METRICS_UNAVAILABLE)) != 0 &&
                     strcmp(reason, policy_reason_name(POLICY_HOLD_PARKED)) != 0 &&
                     now - at <= max_age,
            .time_ms = live && at < now - tick ? now - tick : at,
            .window_s = ctl_rate_window_ms(c, source_of(c, d)) / 1000,
            .desired = invalid ? 0 : (int32_t)json_integer_value(desired),
            .requests_per_gpu = status_num(st, "requestsPerGPU"),
            .forecast_requests_per_gpu = status_num(st, "forecastRequestsPerGPU"),
            .utilization = status_num(st, "utilization"),
        };
    }
    json_decref(st);
    return ok;
}

/* This replica's own decision for w, served as the status annotation tells
 * the other replicas (ctl_reason_served). Invalid annotations are served as
 * stale. */
static void own_view(const struct controller *c, const struct ctl_wl *w, int64_t now,
                     struct ctl_workload_view *v)
{
    int64_t max_age = 3 * c->cfg->decision_interval_ms;
    bool decided = w->config_ok && w->have_last;
    *v = (struct ctl_workload_view){
        .ns = w->ns,
        .name = w->name,
        .valid = decided && ctl_reason_served(w->last.reason) &&
                 now - w->last_decision_ms <= max_age,
        .time_ms = decided ? w->last_decision_ms : now,
        .window_s = ctl_rate_window_ms(c, w->cfg.source) / 1000,
        .desired = decided ? w->last.desired : 0,
        .requests_per_gpu = decided ? w->last.requests_per_gpu : NAN,
        .forecast_requests_per_gpu = decided ? w->last.forecast_requests_per_gpu : NAN,
        .utilization = decided ? w->last.utilization : NAN,
    };
}

/* Any replica answers for any Deployment, with the decision of the replica
 * that acts for it, so that an HPA reading through a Service sees one count
 * whichever replica answers:
 * - sharded: its own shards' from its decisions, the others' from their
 *   owners' status annotations;
 * - leader election: the leader from its decisions, a standby from the
 *   leader's status annotations (its own clocks and forecaster, kept warm
 *   for a takeover, can lead or lag the leader's by ticks), or its own while
 *   no leader is alive (a takeover under way; not in dry-run, where no status
 *   is written).
 * A Deployment with invalid annotations is served as stale: an HPA summing a
 * selector over several Deployments then holds rather than count without it.
 * One not decided yet is left out. */
size_t controller_visit(struct controller *c, const char *ns, ctl_view_cb cb, void *arg)
{
    size_t n = 0;
    int64_t now = util_now_unix_ms();
    struct ctl_workload_view v;
    if (c->shards) {
        size_t nd = 0;
        const struct kube_deployment *const *ds = kube_cache_deployments(c->cache, &nd);
        for (size_t i = 0; i < nd; i++) {
            const struct kube_deployment *d = ds[i];
            if (d->deleting || (ns && strcmp(ns, d->ns) != 0) || ctl_wl_find(c, d->ns, d->name) ||
                !ctl_status_view(c, d, now,
                             ns_current(c, d->ns, NULL) &&
                                 ctl_shards_owner_live(c, d->ns, d->name),
                             &v))
                continue;
            cb(&v, arg);
            n++;
        }
    }
    bool standby = c->leader_elect && !c->shards && !c->dry_run && !controller_leading(c) &&
                   ctl_leader_held_live(&c->leader, (int64_t)uv_now(c->loop), true);
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++) {
        for (struct ctl_wl *w = c->table[b]; w; w = w->next) {
            if (ns && strcmp(ns, w->ns) != 0)
                continue;
            if (standby) {
                const struct kube_deployment *d = kube_cache_deployment(c->cache, w->ns, w->name);
                if (!d || d->deleting || !ctl_status_view(c, d, now, ns_current(c, d->ns, NULL), &v))
                    continue;
            } else if (w->config_ok && !w->have_last) {
                continue;
            } else {
                own_view(c, w, now, &v);
            }
            cb(&v, arg);
            n++;
        }
    }
    return n;
}

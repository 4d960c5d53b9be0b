/* SPDX-License-Identifier: Apache-2.0 */
/* controller/ctl: the decision loop. Every decision interval it walks the
 * tracked Deployments in the kube cache, turns annotations into a workload
 * config, reads the workload's metrics, feeds the forecaster, asks the policy
 * and, when leading, writes the new replica count through the /scale
 * subresource (read, patch with the read resourceVersion, retry on 409).
 *
 * The loop recomputes from the cache on every tick and never acts on event
 * deltas or before the caches synced (STYLE rule 15). Workload state lives in
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

#define SUB "controller"
#define MAX_SCALE_ATTEMPTS 4
#define MAX_COLD_START_MS (3600LL * 1000)

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
    xfree(w);
}

static struct ctl_wl *wl_new(struct controller *c, const struct kube_deployment *d)
{
    struct ctl_wl *w = xcalloc(1, sizeof(*w));
    w->ns = xstrdup(d->ns);
    w->name = xstrdup(d->name);
    w->uid = xstrdup(d->uid ? d->uid : "");
    w->record_fd = -1;
    w->last_event_reason = POLICY_REASON_COUNT;
    policy_state_init(&w->pst);
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

/* ---- scale writes ---------------------------------------------------------- */

struct scale_req {
    struct controller *c;
    char *ns, *name;
    int32_t target;
};

static void scale_get(struct controller *c, struct scale_req *r);

static void scale_req_done(struct scale_req *r, bool ok)
{
    struct controller *c = r->c;
    struct ctl_wl *w = ctl_wl_find(c, r->ns, r->name);
    if (w) {
        w->scaling = false;
        if (!ok)
            w->scale_attempts = 0;
        /* the status of this tick's decision waited for the scale write */
        if (w->status_deferred && !c->closing && controller_leading(c)) {
            w->status_deferred = false;
            ctl_status_update(c, w, util_now_unix_ms());
        }
    }
    xfree(r->ns);
    xfree(r->name);
    xfree(r);
    ctl_io_end(c);
}

static void scale_patched(const struct kube_result *res, void *arg)
{
    struct scale_req *r = arg;
    struct controller *c = r->c;
    struct ctl_wl *w = ctl_wl_find(c, r->ns, r->name);
    if (res->err == 0) {
        c->scale_patches++;
        LOGW_INFO(SUB, r->ns, r->name, "scaled to %d replicas", r->target);
        scale_req_done(r, true);
        return;
    }
    if (res->err == -EEXIST && w && !c->closing && w->scale_attempts < MAX_SCALE_ATTEMPTS) {
        c->scale_conflicts++;
        LOGW_INFO(SUB, r->ns, r->name, "scale conflict (%s): re-reading and retrying",
                  res->message);
        scale_get(c, r);
        return;
    }
    c->scale_errors++;
    LOGW_ERROR(SUB, r->ns, r->name, "scaling to %d failed: HTTP %ld %s %s", r->target,
               res->status, res->reason, res->message);
    scale_req_done(r, false);
}

static void scale_read(const struct kube_result *res, void *arg)
{
    struct scale_req *r = arg;
    struct controller *c = r->c;
    struct ctl_wl *w = ctl_wl_find(c, r->ns, r->name);
    if (res->err != 0 || !w || c->closing) {
        if (res->err != 0) {
            c->scale_errors++;
            LOGW_ERROR(SUB, r->ns, r->name, "reading the scale subresource failed: HTTP %ld %s",
                       res->status, res->message);
        }
        scale_req_done(r, false);
        return;
    }
    /* a leader that lost the lease meanwhile must not write */
    if (!controller_leading(c)) {
        LOGW_WARN(SUB, r->ns, r->name, "lost leadership before scaling; not writing");
        scale_req_done(r, false);
        return;
    }
    json_t *rv = json_object_get(json_object_get(res->body, "metadata"), "resourceVersion");
    json_int_t cur = json_integer_value(json_object_get(json_object_get(res->body, "spec"),
                                                        "replicas"));
    if (!json_is_string(rv)) {
        c->scale_errors++;
        LOGW_ERROR(SUB, r->ns, r->name, "scale subresource without a resourceVersion");
        scale_req_done(r, false);
        return;
    }
    if (cur == r->target) {
        scale_req_done(r, true);
        return;
    }
    w->scale_attempts++;
    json_t *patch = json_pack("{s:{s:O},s:{s:i}}", "metadata", "resourceVersion", rv, "spec",
                              "replicas", (json_int_t)r->target);
    char path[600];
    snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/deployments/%s/scale", r->ns,
             r->name);
    int rc = kube_patch_merge(c->kube, path, patch, scale_patched, r);
    json_decref(patch);
    if (rc != 0) {
        c->scale_errors++;
        LOGW_ERROR(SUB, r->ns, r->name, "cannot send the scale patch: %s", strerror(-rc));
        scale_req_done(r, false);
    }
}

static void scale_get(struct controller *c, struct scale_req *r)
{
    int rc = kube_scale_get(c->kube, r->ns, r->name, scale_read, r);
    if (rc != 0) {
        LOGW_ERROR(SUB, r->ns, r->name, "cannot read the scale subresource: %s", strerror(-rc));
        scale_req_done(r, false);
    }
}

static void scale_write(struct controller *c, struct ctl_wl *w, int32_t target)
{
    if (w->scaling)
        return;
    if (w->status_inflight) { /* after it, or the read resourceVersion goes stale */
        w->scale_waiting = true;
        w->scale_target = target;
        return;
    }
    w->scale_waiting = false;
    struct scale_req *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->ns = xstrdup(w->ns);
    r->name = xstrdup(w->name);
    r->target = target;
    w->scaling = true;
    w->scale_target = target;
    w->scale_attempts = 0;
    ctl_io_begin(c);
    scale_get(c, r);
}

void ctl_scale_resume(struct controller *c, struct ctl_wl *w)
{
    if (!w->scale_waiting)
        return;
    w->scale_waiting = false;
    if (c->closing || !controller_leading(c) || w->status_inflight)
        return; /* the next tick decides again */
    scale_write(c, w, w->scale_target);
}

/* ---- the Prometheus-server source ------------------------------------------ */

struct pq_req {
    struct controller *c;
    char *ns, *name;
    struct forecast *seed; /* promql_seed fills this; adopted if still useful */
};

static struct pq_req *pq_req_new(struct controller *c, const struct ctl_wl *w)
{
    struct pq_req *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->ns = xstrdup(w->ns);
    r->name = xstrdup(w->name);
    ctl_io_begin(c);
    return r;
}

static void pq_req_free(struct pq_req *r)
{
    struct controller *c = r->c;
    forecast_free(r->seed);
    xfree(r->ns);
    xfree(r->name);
    xfree(r);
    ctl_io_end(c);
}

static void pq_answered(const struct scrape_result *res, void *arg)
{
    struct pq_req *r = arg;
    struct ctl_wl *w = ctl_wl_find(r->c, r->ns, r->name);
    if (w) {
        w->pq_inflight = false;
        w->pq_last = *res;
        w->pq_have = true;
    }
    pq_req_free(r);
}

static void pq_seeded(const struct promql_seed_result *res, void *arg)
{
    struct pq_req *r = arg;
    struct ctl_wl *w = ctl_wl_find(r->c, r->ns, r->name);
    struct forecast_result cur, got;
    if (!w || !w->fc) {
        pq_req_free(r);
        return;
    }
    if (res->err != 0) {
        LOGW_WARN(SUB, r->ns, r->name, "seeding the forecaster from Prometheus failed: %s",
                  res->why);
    } else {
        forecast_predict(w->fc, util_now_unix_ms(), 0, &cur);
        forecast_predict(r->seed, util_now_unix_ms(), 0, &got);
        if (got.buckets_seen > cur.buckets_seen) { /* more history than we had */
            forecast_free(w->fc);
            w->fc = r->seed;
            r->seed = NULL;
            LOGW_INFO(SUB, r->ns, r->name,
                      "forecaster seeded from Prometheus: %zu points, %lld buckets of history",
                      res->observed, (long long)got.buckets_seen);
        }
    }
    pq_req_free(r);
}

/* Ask Prometheus for this workload (the answer serves the next tick) and,
 * once, seed the forecaster from its history. r gets the last answer. */
static void pq_measure(struct controller *c, struct ctl_wl *w, int64_t now,
                       struct scrape_result *r)
{
    const struct ctl_workload_config *cfg = &w->cfg;
    struct promql_target t = {.ns = w->ns, .deployment = w->name, .spec = &cfg->scrape,
                              .rate_tmpl = cfg->promql_rate, .p99_tmpl = cfg->promql_p99};
    char err[200];
    if (!w->pq_inflight) {
        struct pq_req *q = pq_req_new(c, w);
        if (promql_get(c->promql, &t, now, pq_answered, q, err, sizeof(err)) == 0) {
            w->pq_inflight = true;
        } else {
            pq_req_free(q);
            if (!w->pq_have) {
                w->pq_last.valid = false;
                snprintf(w->pq_last.why, sizeof(w->pq_last.why), "PromQL: %.180s", err);
                w->pq_have = true;
            }
        }
    }
    if (!w->pq_seeded && w->fc) {
        w->pq_seeded = true;
        struct forecast_config fc;
        forecast_config_init(&fc);
        fc.season_ms = cfg->policy.seasonality_ms;
        fc.quantile = cfg->policy.forecast_quantile;
        struct pq_req *q = pq_req_new(c, w);
        q->seed = forecast_new(&fc);
        if (!q->seed || promql_seed(c->promql, &t, now, 2 * cfg->policy.seasonality_ms + 3600000,
                                    60000, q->seed, pq_seeded, q, err, sizeof(err)) != 0)
            pq_req_free(q);
    }
    if (w->pq_have) {
        *r = w->pq_last;
    } else {
        r->valid = false;
        snprintf(r->why, sizeof(r->why), "waiting for the first Prometheus answer");
    }
}

/* ---- demand ----------------------------------------------------------------- */

/* The request counters count finished requests. A saturated service finishes
 * at most its capacity while requests pile up, and a draining backlog finishes
 * faster than requests arrive, so the completion rate alone under-sizes a
 * scale-out and then overshoots. Arrivals = completions + growth of the
 * backlog (running + queued requests, both scraped), over the rate window. */
static double demand_rate(struct ctl_wl *w, int64_t now, int64_t window_ms,
                          const struct scrape_result *r)
{
    if (!r->valid || (r->inflight < 0 && r->queued < 0))
        return r->request_rate;
    double bl = (r->inflight > 0 ? r->inflight : 0) + (r->queued > 0 ? r->queued : 0);
    int last = (w->bl_head + w->bl_n - 1) % CTL_BACKLOG_SAMPLES;
    if (w->bl_n == 0 || now > w->bl_t[last]) {
        int i = (w->bl_head + w->bl_n) % CTL_BACKLOG_SAMPLES;
        if (w->bl_n == CTL_BACKLOG_SAMPLES)
            w->bl_head = (w->bl_head + 1) % CTL_BACKLOG_SAMPLES;
        else
            w->bl_n++;
        w->bl_t[i] = now;
        w->bl_v[i] = bl;
    }
    /* the oldest sample inside the window */
    for (int k = 0; k < w->bl_n; k++) {
        int i = (w->bl_head + k) % CTL_BACKLOG_SAMPLES;
        if (now - w->bl_t[i] <= window_ms && now - w->bl_t[i] > 0) {
            double growth = (bl - w->bl_v[i]) / ((double)(now - w->bl_t[i]) / 1000.0);
            double d = r->request_rate + growth;
            return d > 0 ? d : 0;
        }
    }
    return r->request_rate;
}

/* ---- one workload, one tick ------------------------------------------------ */

static bool has_keda_owner(const struct kube_deployment *d)
{
    return kube_labels_get(&d->labels, "scaledobject.keda.sh/name") != NULL;
}

static void configure(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                      int64_t now, bool leading)
{
    const char *keys[64], *vals[64];
    size_t n = 0;
    for (size_t i = 0; i < d->annotations.n && n < 64; i++) {
        keys[n] = d->annotations.items[i].key;
        vals[n] = d->annotations.items[i].value;
        n++;
    }
    struct ctl_workload_config cfg;
    char bad[160], err[200];
    if (ctl_workload_parse(c->cfg, keys, vals, n, &cfg, bad, sizeof(bad), err, sizeof(err))) {
        char full[400];
        snprintf(full, sizeof(full), "%.150s: %.200s", bad, err);
        bool same = !w->config_ok && strcmp(full, w->config_error) == 0;
        if (same && (w->invalid_reported || !leading))
            return; /* already reported (a follower leaves it to the leader) */
        w->config_ok = false;
        if (!same) {
            snprintf(w->config_error, sizeof(w->config_error), "%s", full);
            c->invalid_annotations++;
            LOGW_WARN(SUB, w->ns, w->name, "invalid annotation %s: %s; holding replicas", bad,
                      err);
            w->invalid_reported = false;
        }
        if (c->scrape)
            scrape_forget(c->scrape, w->ns, w->name);
        if (!leading)
            return;
        w->invalid_reported = true;
        char msg[420];
        snprintf(msg, sizeof(msg),
                 "invalid annotation %.150s: %.200s; replicas are held until it is fixed", bad, err);
        ctl_event(c, w, "Warning", "InvalidAnnotation", msg);
        ctl_status_invalid(c, w, bad, err, now);
        return;
    }
    bool season_changed = w->fc && (!w->config_ok ||
                                    cfg.policy.seasonality_ms != w->cfg.policy.seasonality_ms ||
                                    cfg.policy.forecast_quantile != w->cfg.policy.forecast_quantile);
    if (w->config_ok == false && w->config_error[0])
        LOGW_INFO(SUB, w->ns, w->name, "annotations valid again");
    w->config_error[0] = '\0';
    w->config_ok = true;
    w->cfg = cfg;
    if (season_changed) {
        forecast_free(w->fc);
        w->fc = NULL;
    }
    if (!w->fc) {
        struct forecast_config fc;
        forecast_config_init(&fc);
        fc.season_ms = cfg.policy.seasonality_ms;
        fc.quantile = cfg.policy.forecast_quantile;
        w->fc = forecast_new(&fc);
        if (!w->fc)
            LOGW_WARN(SUB, w->ns, w->name, "forecaster unavailable for this seasonality");
    }
    if (w->fc && !w->checkpoint_loaded)
        ctl_checkpoint_load(c, w);
}

static void decide(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                   int64_t now, bool leading)
{
    configure(c, w, d, now, leading);
    if (!w->config_ok)
        return;
    const struct ctl_workload_config *cfg = &w->cfg;

    /* pods: ready ones are scraped; every ready pod teaches the cold start */
    size_t np = 0;
    const struct kube_pod *const *pods = kube_cache_deployment_pods(c->cache, d, &np);
    struct scrape_pod *sp = xcalloc(np ? np : 1, sizeof(*sp));
    size_t ns = 0;
    int32_t ready = 0;
    int64_t cold = 0;
    for (size_t i = 0; i < np; i++) {
        const struct kube_pod *p = pods[i];
        if (p->deleting || p->phase != KUBE_POD_RUNNING)
            continue;
        bool ok = p->ready && p->ip[0];
        if (ok)
            ready++;
        if (p->ready && p->ready_transition_ms > p->created_ms) {
            int64_t cs = p->ready_transition_ms - p->created_ms;
            if (cs < MAX_COLD_START_MS && cs > cold)
                cold = cs;
        }
        int port = cfg->scrape.port ? cfg->scrape.port
                   : p->metrics_port ? p->metrics_port
                   : d->metrics_port ? d->metrics_port
                                     : d->http_port;
        sp[ns++] = (struct scrape_pod){.name = p->name, .ip = p->ip, .port = port, .ready = ok,
                                       .gpus = p->gpus > 0 ? p->gpus : d->gpus_per_replica};
    }
    if (cold > 0)
        w->learned_cold_start_ms = cold;
    double gpus = cfg->policy.gpus_per_replica > 0 ? cfg->policy.gpus_per_replica
                  : d->gpus_per_replica > 0        ? d->gpus_per_replica
                                                   : 1;

    struct scrape_result r;
    memset(&r, 0, sizeof(r));
    if (cfg->source == CTL_SOURCE_SCRAPE && c->scrape) {
        scrape_set_targets(c->scrape, w->ns, w->name, &cfg->scrape, sp, ns);
        if (scrape_get(c->scrape, w->ns, w->name, now, &r) != 0) {
            r.valid = false;
            snprintf(r.why, sizeof(r.why), "no scrape data yet");
        }
    } else if (cfg->source == CTL_SOURCE_PROMETHEUS && c->promql) {
        pq_measure(c, w, now, &r);
    } else {
        snprintf(r.why, sizeof(r.why), "metrics-source %s is not configured (%s)",
                 cfg->source == CTL_SOURCE_PROMETHEUS ? "prometheus" : "scrape",
                 cfg->source == CTL_SOURCE_PROMETHEUS ? "set prometheus.url in the config file"
                                                      : "no scraper");
    }
    xfree(sp);
    /* The rate sums the pods that were counted. A pod whose scrape failed
     * still serves: assume it takes an average share and count it. A pod
     * that just turned Ready (warming, not enough samples) serves little
     * yet: leave it out of both the rate and the serving replicas, as a
     * replica still starting, so it neither dilutes requests/GPU nor
     * inflates the rate. */
    int32_t serving = ready;
    if (r.valid && cfg->source == CTL_SOURCE_SCRAPE && r.pods_counted > 0) {
        serving = r.pods_counted + r.pods_failed;
        if (r.pods_failed > 0)
            r.request_rate *= (double)serving / r.pods_counted;
    }

    if (r.valid)
        r.request_rate = demand_rate(w, now, c->cfg->scrape.rate_window_ms, &r);

    struct policy_input in = {
        .now_ms = now,
        .current_replicas = d->spec_replicas,
        .ready_replicas = serving,
        .gpus_per_replica = gpus,
        .metrics_valid = r.valid,
        .metrics_time_ms = r.valid ? r.time_ms : POLICY_NEVER,
        .request_rate = r.request_rate,
        .p99_latency_ms = r.valid ? r.p99_ms : -1,
        .queue_depth = r.valid ? r.queued : -1,
    };
    if (w->fc && r.valid)
        forecast_observe(w->fc, now, r.request_rate);
    struct forecast_result fr;
    if (w->fc && cfg->policy.predictive &&
        forecast_predict(w->fc, now, policy_horizon_ms(&cfg->policy, w->learned_cold_start_ms),
                         &fr) == 0 &&
        fr.method != FORECAST_NONE) {
        in.have_forecast = true;
        in.forecast_rate = fr.upper;
    }
    struct policy_decision dec;
    policy_decide(&cfg->policy, &w->pst, &in, &dec);
    c->decisions[dec.reason]++;
    bool changed = !w->have_last || w->last.reason != dec.reason || w->last.desired != dec.desired;
    w->last = dec;
    w->have_last = true;
    w->last_decision_ms = now;
    w->last_valid = r.valid;
    w->spec_replicas = d->spec_replicas;
    if (changed || policy_reason_is_action(dec.reason))
        LOGW_INFO(SUB, w->ns, w->name, "%s: %s%s%s%s", policy_reason_name(dec.reason), dec.explain,
                  r.valid ? "" : ": ", r.valid ? "" : r.why,
                  leading ? "" : " (follower: not acting)");

    if (r.valid && c->record_dir)
        ctl_record(c, w, now, r.request_rate);
    if (!leading)
        return;
    /* right after tracking starts there is no rate yet (two samples needed):
     * that is not worth an Event */
    int64_t grace = c->cfg->scrape.rate_window_ms + 3 * c->cfg->scrape.interval_ms;
    if (!r.valid && now - w->tracked_since_ms > grace) {
        char msg[300];
        snprintf(msg, sizeof(msg), "holding %d replicas: %s", dec.desired, r.why);
        ctl_event(c, w, "Warning", "MetricsUnavailable", msg);
    }
    ctl_checkpoint_save(c, w, now);
    if (c->dry_run) {
        if (policy_reason_is_action(dec.reason) && dec.desired != d->spec_replicas)
            LOGW_INFO(SUB, w->ns, w->name, "dry-run: would scale %d -> %d", d->spec_replicas,
                      dec.desired);
        return;
    }
    bool conflict = cfg->mode == CTL_MODE_SCALE && (w->hpa_conflict || has_keda_owner(d));
    if (conflict) {
        /* the status must not claim an action that is not taken */
        snprintf(w->last.explain, sizeof(w->last.explain),
                 "not acting: an %s also targets this Deployment (policy wanted %d replicas)",
                 has_keda_owner(d) ? "KEDA ScaledObject" : "HorizontalPodAutoscaler", dec.desired);
        w->last.desired = d->spec_replicas;
    }
    /* In mode external-metric the HPA writes replicas from
     * gpuscaler_desired_replicas. */
    bool act = dec.desired != d->spec_replicas && policy_reason_is_action(dec.reason) &&
               cfg->mode != CTL_MODE_EXTERNAL_METRIC;
    if (act && conflict) {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "an %s also targets this Deployment; gpuscaler (mode scale) will not fight it: "
                 "remove it or set gpuscaler.io/mode: external-metric",
                 has_keda_owner(d) ? "KEDA ScaledObject" : "HorizontalPodAutoscaler");
        ctl_event(c, w, "Warning", "ScalerConflict", msg);
    } else if (act) {
        const char *reason = dec.reason == POLICY_SCALED_IN ? "ScaledIn"
                             : dec.reason == POLICY_PREDICTIVE_SCALE_OUT ? "PredictiveScaleOut"
                                                                         : "ScaledOut";
        if (dec.reason == POLICY_CLAMPED)
            reason = dec.desired > d->spec_replicas ? "ScaledOut" : "ScaledIn";
        ctl_event(c, w, "Normal", reason, dec.explain);
        scale_write(c, w, dec.desired);
    }
    /* The status goes out after the /scale write, never during it: the
     * annotation bumps the resourceVersion the scale patch is
     * preconditioned on (ctl_status_update defers while it is in flight). */
    ctl_status_update(c, w, now);
}

void controller_tick(struct controller *c)
{
    if (c->closing || !kube_cache_synced(c->cache))
        return;
    uint64_t t0 = uv_hrtime();
    int64_t now = util_now_unix_ms();
    bool leading = controller_leading(c);
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        for (struct ctl_wl *w = c->table[b]; w; w = w->next)
            w->seen = false;
    size_t n = 0;
    const struct kube_deployment *const *ds = kube_cache_deployments(c->cache, &n);
    for (size_t i = 0; i < n; i++) {
        const struct kube_deployment *d = ds[i];
        if (d->deleting)
            continue;
        struct ctl_wl *w = ctl_wl_find(c, d->ns, d->name);
        if (w && strcmp(w->uid, d->uid ? d->uid : "") != 0) {
            LOGW_INFO(SUB, d->ns, d->name, "Deployment was replaced (new uid): state reset");
            wl_remove(c, w);
            w = NULL;
        }
        if (!w) {
            w = wl_new(c, d);
            w->tracked_since_ms = now;
            LOGW_INFO(SUB, d->ns, d->name, "tracking");
        }
        w->seen = true;
        w->hpa_conflict = false;
        for (size_t k = 0; k < c->n_hpa_targets; k++) {
            const char *t = c->hpa_targets[k];
            size_t nl = strlen(d->ns);
            if (strncmp(t, d->ns, nl) == 0 && t[nl] == '/' && strcmp(t + nl + 1, d->name) == 0)
                w->hpa_conflict = true;
        }
        decide(c, w, d, now, leading);
    }
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++) {
        struct ctl_wl *w = c->table[b];
        while (w) {
            struct ctl_wl *next = w->next;
            if (!w->seen) {
                LOGW_INFO(SUB, w->ns, w->name, "no longer tracked");
                wl_remove(c, w);
            }
            w = next;
        }
    }
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
    ctl_leader_init(&c->leader, c->identity, cfg->leader.lease_duration_ms,
                    cfg->leader.renew_deadline_ms, cfg->leader.retry_period_ms);
    uv_timer_init(loop, &c->tick_timer);
    uv_timer_init(loop, &c->elect_timer);
    uv_timer_init(loop, &c->hpa_timer);
    c->open_handles = 3;
    uint64_t iv = (uint64_t)cfg->decision_interval_ms;
    uv_timer_start(&c->tick_timer, tick_cb, iv, iv);
    uv_timer_start(&c->hpa_timer, hpa_cb, 1000, 60000);
    if (c->leader_elect)
        ctl_elect_start(c);
    *out = c;
    return 0;
}

bool controller_synced(const struct controller *c)
{
    return kube_cache_synced(c->cache);
}

bool controller_leading(const struct controller *c)
{
    if (c->closing && c->released)
        return false;
    if (!c->leader_elect)
        return true;
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

void controller_close(struct controller *c, controller_close_cb cb, void *arg)
{
    if (c->closing)
        return;
    c->closing = true;
    c->close_cb = cb;
    c->close_arg = arg;
    int64_t now = util_now_unix_ms();
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        for (struct ctl_wl *w = c->table[b]; w; w = w->next)
            if (controller_leading(c))
                ctl_checkpoint_save(c, w, now + 24LL * 3600 * 1000);
    if (c->leader_elect)
        ctl_elect_release(c);
    uv_handle_t *hs[] = {(uv_handle_t *)&c->tick_timer, (uv_handle_t *)&c->elect_timer,
                         (uv_handle_t *)&c->hpa_timer};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(hs); i++) {
        hs[i]->data = c;
        uv_close(hs[i], handle_closed);
    }
}

/* ---- views ------------------------------------------------------------------ */

size_t controller_visit(struct controller *c, const char *ns, ctl_view_cb cb, void *arg)
{
    size_t n = 0;
    int64_t now = util_now_unix_ms();
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++) {
        for (struct ctl_wl *w = c->table[b]; w; w = w->next) {
            if (ns && strcmp(ns, w->ns) != 0)
                continue;
            if (!w->config_ok || !w->have_last)
                continue;
            int64_t max_age = 3 * c->cfg->decision_interval_ms;
            struct ctl_workload_view v = {
                .ns = w->ns,
                .name = w->name,
                .valid = w->last_valid && now - w->last_decision_ms <= max_age,
                .time_ms = w->last_decision_ms,
                .window_s = c->cfg->scrape.rate_window_ms / 1000,
                .desired = w->last.desired,
                .requests_per_gpu = w->last.requests_per_gpu,
                .forecast_requests_per_gpu = w->last.forecast_requests_per_gpu,
                .utilization = w->last.utilization,
            };
            cb(&v, arg);
            n++;
        }
    }
    return n;
}

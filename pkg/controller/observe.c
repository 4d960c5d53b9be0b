/* SPDX-License-Identifier: Apache-2.0 */
/* controller/observe: the observe stage of a tick: what one workload looks
 * like now. The Deployment's pods from the kube cache (ready and serving
 * replicas, GPUs, the cold start each Ready pod took as scheduling delay and
 * model-load time, the pods Pending because no node has a free GPU), its
 * serving metrics from the scraper or from a Prometheus server (promsrc.c),
 * and what those imply about the traffic:
 *  - arrivals = completions + growth of the backlog (running + waiting
 *    requests). The request counters count finished requests: a saturated
 *    service finishes at most its capacity while requests pile up, and a
 *    draining backlog finishes faster than requests arrive, so completions
 *    alone under-size a scale-out and then overshoot. Both over the rate
 *    window and over the newest scrapes (what a step looks like before the
 *    window sees it);
 *  - the service time by Little's law: running requests / completions, when
 *    the engine reports running requests (vLLM, TGI, Triton's in-flight
 *    gauge), smoothed over ticks;
 *  - with demand-unit tokens, completions are weighted tokens/s
 *    (prompt-token-weight x prompt tokens + generated tokens), and the
 *    backlog, counted in requests, becomes tokens at the measured weighted
 *    tokens per completed request (the request size). The service time stays
 *    per request. */
#include "controller-int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"
#include "promql/promql.h"
#include "scrape/scrape.h"

#define SUB "controller"
#define MAX_COLD_START_MS (3600LL * 1000)
/* Weight of one tick's Little's-law measurement in the learned service time. */
#define SERVICE_EWMA 0.1

/* ---- arrivals ----------------------------------------------------------------- */

void ctl_backlog_push(struct ctl_wl *w, int64_t now, double bl)
{
    int last = (w->bl_head + w->bl_n - 1) % CTL_BACKLOG_SAMPLES;
    if (w->bl_n > 0 && now <= w->bl_t[last])
        return;
    int i = (w->bl_head + w->bl_n) % CTL_BACKLOG_SAMPLES;
    if (w->bl_n == CTL_BACKLOG_SAMPLES)
        w->bl_head = (w->bl_head + 1) % CTL_BACKLOG_SAMPLES;
    else
        w->bl_n++;
    w->bl_t[i] = now;
    w->bl_v[i] = bl;
}

double ctl_backlog_growth(const struct ctl_wl *w, int64_t now, int64_t window_ms,
                          int64_t slack_ms, double bl)
{
    for (int k = 0; k < w->bl_n; k++) {
        int i = (w->bl_head + k) % CTL_BACKLOG_SAMPLES;
        if (now - w->bl_t[i] <= window_ms + slack_ms && now - w->bl_t[i] > 0)
            return (bl - w->bl_v[i]) / ((double)(now - w->bl_t[i]) / 1000.0);
    }
    return 0;
}

/* Completions in the demand unit, and the request size that converts
 * requests into it. */
static void completions(struct ctl_wl *w, struct ctl_obs *o)
{
    const struct scrape_result *r = &o->m;
    const struct policy_config *p = &w->cfg.policy;
    o->completions = r->request_rate;
    o->recent_rps = r->recent_rate;
    o->request_size = 1;
    if (p->demand_unit != POLICY_UNIT_TOKENS)
        return;
    double wt = p->prompt_token_weight;
    o->completions =
        r->valid ? policy_token_demand(r->prompt_token_rate, r->generation_token_rate, wt) : NAN;
    o->recent_rps =
        r->valid ? policy_token_demand(r->prompt_token_recent, r->generation_token_recent, wt)
                 : NAN;
    /* a window without completions keeps the last size measured */
    if (isfinite(o->completions) && isfinite(r->request_rate) && r->request_rate > 0 &&
        o->completions > 0)
        w->request_size = o->completions / r->request_rate;
    o->request_size = w->request_size > 0 ? w->request_size : 1;
}

/* The shortest span the recent arrivals count over: two service times (the
 * annotation's, else the one learned so far), within the rate window. A
 * surge the slots absorb within a service time is no demand to size for,
 * and the forecaster keeps the peaks of this rate (docs/policy.md, Observe). */
int64_t ctl_recent_min_ms(const struct controller *c, const struct ctl_wl *w)
{
    /* a service time learned from the in-flight gauge runs ahead of the
     * window's completions as load rises (the gauge follows a step within a
     * service time): it would lengthen the span, and slow A_new, just then */
    double learned = w->service_from_busy ? w->service_ms : 0;
    return policy_recent_span_ms(&w->cfg.policy, learned, ctl_rate_window_ms(c, w->cfg.source));
}

/* The window the rate counts over: the scraper's, or the default queries'. */
int64_t ctl_rate_window_ms(const struct controller *c, enum ctl_source source)
{
    if (source != CTL_SOURCE_PROMETHEUS)
        return c->cfg->scrape.rate_window_ms;
    return c->promql ? promql_window_ms(c->promql) : PROMQL_WINDOW_S * 1000LL;
}

void ctl_recent_spans(int64_t scrape_interval_ms, int64_t decision_ms, int64_t min_ms,
                      int64_t measured_span_ms, bool prometheus, int64_t *recent_ms,
                      int64_t *span_ms)
{
    /* The recent arrivals are the completions of the newest two scrape
     * intervals plus the backlog's growth over as long: together they count
     * over about a decision interval, or the longer span */
    int64_t rec = 2 * scrape_interval_ms + scrape_interval_ms / 2;
    if (rec < decision_ms)
        rec = decision_ms;
    /* and over two service times at least, as the completions (ctl_recent_min_ms) */
    if (rec < min_ms)
        rec = min_ms;
    /* two intervals of 500 ms between samples count over about 1 s, not the
     * 1.25 s looked back: the Poisson noise is the shorter span's */
    int64_t span = measured_span_ms > 0 && measured_span_ms < rec ? measured_span_ms : rec;
    /* from Prometheus: each pod's newest sample and an older one, a scrape
     * interval apart or two service times (ctl_pq_match), count the
     * completions; the backlog's growth over as long (the pods' own samples,
     * or the ticks' when a pod's are not known) */
    if (prometheus && measured_span_ms > 0)
        rec = span = measured_span_ms;
    *recent_ms = rec;
    *span_ms = span;
}

static void arrivals(struct controller *c, struct ctl_wl *w, int64_t now, struct ctl_obs *o)
{
    const struct scrape_result *r = &o->m;
    completions(w, o);
    double comp = o->completions, size = o->request_size;
    /* the requests the pods refused (a full queue, a concurrency limit) came
     * too: no completion or queue counts them, and under overload they are
     * what a count sized from completions misses */
    w->refused_rps = r->valid && isfinite(r->rejected_rate) ? size * r->rejected_rate : NAN;
    if (r->valid && isfinite(r->rejected_rate) && r->rejected_rate > 0)
        comp += size * r->rejected_rate;
    if (isfinite(o->recent_rps) && isfinite(r->rejected_recent) && r->rejected_recent > 0)
        o->recent_rps += size * r->rejected_recent;
    o->arrival_rps = comp;
    o->rate_window_ms = ctl_rate_window_ms(c, w->cfg.source);
    ctl_recent_spans(c->cfg->scrape.interval_ms, c->cfg->decision_interval_ms,
                     ctl_recent_min_ms(c, w), r->recent_span_ms,
                     w->cfg.source == CTL_SOURCE_PROMETHEUS, &o->recent_ms, &o->recent_span_ms);
    /* the backlog of every pod scraped lately, warming ones included: a new
     * pod's queue counts as it builds, not all at once when the pod is
     * first counted; and with what the pods that left held, which finishes
     * unseen: a scale-in is no drop in arrivals (docs/metrics.md) */
    if (!r->valid || r->backlog < 0)
        return;
    double bl = r->backlog + (r->departed > 0 ? r->departed : 0);
    ctl_backlog_push(w, now, bl);
    int64_t slack = c->cfg->decision_interval_ms / 2;
    double g = size * ctl_backlog_growth(w, now, o->rate_window_ms, slack, bl);
    o->arrival_rps = comp + g > 0 ? comp + g : 0;
    if (isfinite(o->recent_rps)) {
        double gr = o->recent_growth_known
                        ? size * o->recent_growth
                        : size * ctl_backlog_growth(w, now, o->recent_ms, slack, bl);
        o->recent_rps = o->recent_rps + gr > 0 ? o->recent_rps + gr : 0;
    }
}

/* Little's law: the running requests over their completion rate. A ratio of
 * smoothed sums, not a smoothed ratio: a tick with a barely measured rate
 * (a fresh pod, the first samples of a window) would otherwise teach a
 * service time many times the real one and take dozens of ticks to forget.
 * The running requests are the busy time's average where the pods have it,
 * else the in-flight gauge read at the scrape. */
static void learn_service_time(struct ctl_wl *w, struct ctl_obs *o)
{
    const struct scrape_result *r = &o->m;
    double run = r->busy >= 0 ? r->busy : r->inflight;
    if (r->valid && run >= 0 && isfinite(r->request_rate) && r->request_rate > 0) {
        w->svc_inflight = (1 - SERVICE_EWMA) * w->svc_inflight + SERVICE_EWMA * run;
        w->svc_rate = (1 - SERVICE_EWMA) * w->svc_rate + SERVICE_EWMA * r->request_rate;
        double s = 1000.0 * w->svc_inflight / w->svc_rate;
        if (w->svc_inflight > 0 && s > 0 && s < 3600e3) {
            w->service_ms = s;
            w->service_from_busy = r->busy >= 0;
        }
    }
    o->service_ms = w->service_ms;
}

void ctl_obs_serving(struct ctl_obs *o)
{
    struct scrape_result *r = &o->m;
    /* a Ready pod without a recent good scrape (not one warming up) serves
     * as a failed one does: left out, its share of the load would read as
     * load gone */
    int lagging = r->pods_stale - r->pods_warming;
    int unread = r->pods_failed + (lagging > 0 ? lagging : 0);
    o->serving = r->pods_counted + unread;
    if (unread <= 0 || r->pods_counted <= 0)
        return;
    double k = (double)o->serving / r->pods_counted;
    /* the counted pods' part of the rates; the pods gone serve no share */
    scrape_result_scale_up(r, k);
    /* and the gauges beside the rate (the service time's running requests,
     * the capacity's slots in use and queue share) are the serving pods',
     * as the GPUs they are set against; the backlog and the queue to drain
     * sum the pods' own gauges */
    if (r->inflight >= 0)
        r->inflight *= k;
    if (r->queued >= 0)
        r->queued *= k;
}

/* ---- cold start: scheduling delay and model load -------------------------------- */

/* The cold start of the Ready pods, in two parts: creation to PodScheduled
 * (waiting for a node with a free GPU: none, or minutes while a cluster
 * autoscaler adds one) and PodScheduled to Ready (pulling the image, loading
 * the model). Each is the longest of the pods; a pod without a PodScheduled
 * time counts all of it as load. A pod's are taken when it is first seen
 * Ready and kept while it exists: the Ready condition's transition time of
 * a pod whose readiness probe failed under load and passed again is no
 * start (it read as a cold start of 40 minutes, the look-ahead with it). A
 * pod already Ready when gpuscaler starts is taken as it is then. */
static void cold_start_of(const struct kube_pod *p, struct ctl_cold_pod *e)
{
    e->schedule_ms = e->load_ms = -1;
    if (p->ready_transition_ms <= p->created_ms ||
        p->ready_transition_ms - p->created_ms >= MAX_COLD_START_MS)
        return;
    int64_t bound = p->scheduled_ms >= p->created_ms && p->scheduled_ms <= p->ready_transition_ms
                        ? p->scheduled_ms
                        : p->created_ms;
    e->schedule_ms = bound - p->created_ms;
    e->load_ms = p->ready_transition_ms - bound;
}

static int cold_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ctl_cold_pod *)a)->name, ((const struct ctl_cold_pod *)b)->name);
}

void ctl_cold_start_learn(struct ctl_wl *w, const struct kube_pod *const *pods, size_t np)
{
    struct ctl_cold_pod *nv = xmalloc((np ? np : 1) * sizeof(*nv));
    size_t nn = 0;
    int64_t sched = -1, load = -1;
    for (size_t i = 0; i < np; i++) {
        const struct kube_pod *p = pods[i];
        struct ctl_cold_pod key = {.name = (char *)p->name};
        struct ctl_cold_pod *o =
            w->cold_pods_n
                ? bsearch(&key, w->cold_pods, w->cold_pods_n, sizeof(key), cold_cmp)
                : NULL;
        if (o && o->created_ms != p->created_ms)
            o = NULL; /* another pod of that name */
        struct ctl_cold_pod e;
        if (o) {
            e = *o;
            e.name = xstrdup(p->name);
        } else if (p->ready && !p->deleting && p->phase == KUBE_POD_RUNNING) {
            e = (struct ctl_cold_pod){.name = xstrdup(p->name), .created_ms = p->created_ms};
            cold_start_of(p, &e);
            /* Ready before tracking began (a restart, a shard moved here): its
             * Ready condition may be a later readiness flap's, not its first
             * Ready; what the replica acting before learned bounds it, if the
             * pod was there when it wrote that (a pod made later may be of
             * another model, that loads for longer) */
            if (e.load_ms >= 0 && w->prior_load_ms > 0 &&
                p->ready_transition_ms < w->tracked_since_ms && p->created_ms <= w->prior_at_ms) {
                e.schedule_ms = e.schedule_ms < w->prior_schedule_ms ? e.schedule_ms
                                                                     : w->prior_schedule_ms;
                e.load_ms = e.load_ms < w->prior_load_ms ? e.load_ms : w->prior_load_ms;
            }
        } else {
            continue; /* not Ready yet: its start is still to come */
        }
        if (p->ready && !p->deleting && p->phase == KUBE_POD_RUNNING && e.load_ms >= 0) {
            sched = e.schedule_ms > sched ? e.schedule_ms : sched;
            load = e.load_ms > load ? e.load_ms : load;
        }
        nv[nn++] = e;
    }
    ctl_cold_start_free(w);
    qsort(nv, nn, sizeof(*nv), cold_cmp);
    w->cold_pods = nv;
    w->cold_pods_n = nn;
    if (load >= 0) {
        w->learned_schedule_ms = sched;
        w->learned_load_ms = load;
        w->learned_cold_start_ms = sched + load;
    }
}

void ctl_cold_start_free(struct ctl_wl *w)
{
    for (size_t i = 0; i < w->cold_pods_n; i++)
        xfree(w->cold_pods[i].name);
    xfree(w->cold_pods);
    w->cold_pods = NULL;
    w->cold_pods_n = 0;
}

/* The pod's container port of this name (gpuscaler.io/metrics-port), 0 if none. */
static int named_port(const struct kube_pod *p, const char *name)
{
    const char *v = kube_labels_get(&p->ports, name);
    int64_t port = 0;
    return v && util_parse_int64(v, &port) == 0 && port > 0 && port < 65536 ? (int)port : 0;
}

bool ctl_pod_stalled(const struct kube_pod *p, int64_t now, int64_t stall_ms)
{
    if (p->deleting || p->ready || p->unschedulable_gpu ||
        (p->phase != KUBE_POD_PENDING && p->phase != KUBE_POD_RUNNING))
        return false;
    if (p->failing != KUBE_FAILING_NONE)
        return true;
    int64_t since = UTIL_MAX(p->created_ms, UTIL_MAX(p->scheduled_ms, p->ready_transition_ms));
    return since > 0 && stall_ms > 0 && now - since >= stall_ms;
}

/* ---- the stage ---------------------------------------------------------------- */

/* Whether a Deployment at 0 replicas got there under gpuscaler's management
 * (at min-replicas 0, where scaling to zero and back is gpuscaler's, not a
 * Deployment parked by hand): seen at 0 while min-replicas was 0, and its
 * replicas not changed since (the cache's count of their changes: a hand
 * scale to 4 and back to 0 between two ticks is a new zero; not
 * metadata.generation, which every change of a Deployment's annotations
 * moves too, the one raising min-replicas and gpuscaler's status). Sticky through
 * decisions not applied yet. Raising min-replicas then wakes it instead of
 * parking it. Not known (a restart at 0 under min-replicas 1 or more): its
 * status annotation tells, when fresh: at 0 under min-replicas 1 or more
 * gpuscaler's status is always Parked, so a recent one that is not says the
 * zero was made under min-replicas 0. */
static bool zero_managed(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                         int64_t now)
{
    if (d->spec_replicas > 0) {
        w->zero_managed = false;
    } else if (w->cfg.policy.min_replicas == 0) {
        w->zero_managed = true;
        w->zero_changes = d->replicas_changes;
    } else if (!w->zero_known) {
        int64_t at = 0;
        json_t *st = ctl_status_read(d, &at);
        const json_t *desired = json_object_get(st, "desired");
        const char *reason = json_string_value(json_object_get(st, "reason"));
        w->zero_managed = json_is_integer(desired) && json_integer_value(desired) == 0 &&
                          reason && strcmp(reason, policy_reason_name(POLICY_HOLD_PARKED)) != 0 &&
                          strcmp(reason, "InvalidAnnotation") != 0 && at != 0 &&
                          now - at <= ctl_status_max_age_ms(c->cfg);
        w->zero_changes = d->replicas_changes;
        json_decref(st);
    }
    w->zero_known = true;
    return d->spec_replicas == 0 && w->zero_managed && d->replicas_changes == w->zero_changes;
}

void ctl_observe(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                 int64_t now, struct ctl_obs *o)
{
    const struct ctl_workload_config *cfg = &w->cfg;
    memset(o, 0, sizeof(*o));
    o->spec = d->spec_replicas;
    o->zero_ours = zero_managed(c, w, d, now);

    /* pods: ready ones are scraped; every ready pod teaches the cold start
     * (at its first Ready);
     * pending ones no node has a GPU for are not coming, nor are those failing
     * to start or not ready for a few cold starts */
    const int64_t stall_ms =
        POLICY_STALL_COLD_STARTS * policy_horizon_ms(&cfg->policy, w->learned_cold_start_ms);
    size_t np = 0;
    const struct kube_pod *const *pods = kube_cache_deployment_pods(c->cache, d, &np);
    struct scrape_pod *sp = xcalloc(np ? np : 1, sizeof(*sp));
    size_t ns = 0;
    int32_t ready = 0;
    ctl_cold_start_learn(w, pods, np);
    for (size_t i = 0; i < np; i++) {
        const struct kube_pod *p = pods[i];
        if (!p->deleting && p->phase == KUBE_POD_PENDING && p->unschedulable_gpu) {
            o->unschedulable++;
            w->unsched_gpu = p->unschedulable_gpu;
        }
        if (ctl_pod_stalled(p, now, stall_ms)) {
            o->stalled++;
            if (!o->stalled_pod[0] || (p->failing && !o->stalled_failing)) {
                snprintf(o->stalled_pod, sizeof(o->stalled_pod), "%s", p->name);
                o->stalled_failing = p->failing;
            }
        }
        if (p->deleting || p->phase != KUBE_POD_RUNNING)
            continue;
        bool ok = p->ready && p->ip[0];
        if (ok)
            ready++;
        int port = cfg->scrape.port ? cfg->scrape.port
                   : cfg->scrape.port_name[0] ? named_port(p, cfg->scrape.port_name)
                   : p->metrics_port ? p->metrics_port
                   : d->metrics_port ? d->metrics_port
                   : d->http_port    ? d->http_port
                                     : d->sole_port;
        sp[ns++] = (struct scrape_pod){.name = p->name, .ip = p->ip, .port = port, .ready = ok,
                                       .gpus = p->gpus > 0 ? p->gpus : d->gpus_per_replica};
    }
    o->gpus = cfg->policy.gpus_per_replica > 0 ? cfg->policy.gpus_per_replica
              : d->gpus_per_replica > 0        ? d->gpus_per_replica
                                               : 1;

    struct scrape_result *r = &o->m;
    if (cfg->source == CTL_SOURCE_SCRAPE && c->scrape) {
        /* the scraper's clock is util_now_boot_ms (a wall clock step
         * neither ages its samples nor refuses new ones): asked at the
         * tick's time on it, its newest sample's time told on the wall */
        int64_t boot = c->tick_boot_ms;
        scrape_set_targets(c->scrape, w->ns, w->name, &cfg->scrape, sp, ns);
        if (scrape_get_recent(c->scrape, w->ns, w->name, boot, ctl_recent_min_ms(c, w), r) !=
            0) {
            r->valid = false;
            snprintf(r->why, sizeof(r->why), "no scrape data yet");
        } else if (r->time_ms > 0) {
            r->time_ms = now - (boot - r->time_ms);
        }
    } else if (cfg->source == CTL_SOURCE_PROMETHEUS && c->promql) {
        ctl_pq_measure(c, w, now, r);
        r->recent_rate = NAN; /* one instant query per tick: no fresher rate */
    } else {
        r->recent_rate = NAN;
        snprintf(r->why, sizeof(r->why), "metrics-source %s is not configured (%s)",
                 cfg->source == CTL_SOURCE_PROMETHEUS ? "prometheus" : "scrape",
                 cfg->source == CTL_SOURCE_PROMETHEUS ? "set prometheus.url in the config file"
                                                      : "no scraper");
    }
    xfree(sp);
    /* pods started or gone since the watch failed are not in the view: the
     * rate and the ready count may be a part of the truth, so hold */
    if (w->cache_held && r->valid) {
        r->valid = false;
        /* the same text every tick: one Event, counted, not one per second */
        snprintf(r->why, sizeof(r->why),
                 "the watch of %.100s has failed for more than %ds: the pods seen may be out "
                 "of date", w->cache_down_what, CTL_CACHE_DOWN_HOLD_MS / 1000);
    }
    /* The rate sums the pods that were counted. A pod whose scrape failed
     * still serves: assume it takes an average share and count it. A pod
     * that just turned Ready (warming, not enough samples) serves little
     * yet: leave it out of both the rate and the serving replicas, as a
     * replica still starting, so it neither dilutes requests/GPU nor
     * inflates the rate. */
    o->serving = ready;
    if (cfg->source == CTL_SOURCE_PROMETHEUS) {
        struct ctl_pq_match m;
        int64_t grace = ctl_rate_window_ms(c, cfg->source) + c->cfg->decision_interval_ms;
        ctl_pq_match(w, pods, np, now, grace, ctl_recent_min_ms(c, w), &m);
        ctl_pq_apply(&m, cfg->scrape.missing_fraction, grace, o);
    }
    if (r->valid && cfg->source == CTL_SOURCE_SCRAPE && r->pods_counted > 0)
        ctl_obs_serving(o);
    arrivals(c, w, now, o);
    learn_service_time(w, o);
}

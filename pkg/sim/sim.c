/* SPDX-License-Identifier: Apache-2.0 */
/* sim: the replay loop. One pass per policy over the same arrivals, in 1 s
 * steps of simulated time: replicas become ready, the policy decides on its
 * tick, the serving model serves the second, and the scored window
 * accumulates GPU-seconds, SLA misses and one timeline point per interval.
 *
 * What each policy sees is what it would see live:
 *  - predictive/reactive: every decision interval (15 s), the request rate
 *    over the last rate window (60 s), the ready and asked-for replicas, the
 *    p99 of the last rate window when an SLA target is set, the queue; the
 *    predictive one also feeds that rate to the forecaster (forecast_observe)
 *    and passes the upper quantile at now + policy_horizon_ms() as
 *    policy_input.forecast_rate;
 *  - hpa: every sync period, per pod the rate of its request counter over
 *    [now - delay - window, now - delay] (prometheus-adapter's rate(...[2m])
 *    served ~30 s late); a pod has a value once it has been ready for a
 *    scrape interval before that window's end, others count as missing.
 * Replicas are a stack of ready times in creation order; scale-down removes
 * the newest first (starting pods before ready ones), as a ReplicaSet does.
 * With gpu-limit the GPUs are a fixed budget: the pods past what it places
 * are Pending, unschedulable, and never ready; the policies see them as
 * unschedulable replicas (policy_input.unschedulable_replicas), the HPA as
 * Pending pods (0 on scale-up), the oracle plans within the budget, and they
 * hold no GPU, so they cost no GPU-hours. The newest go first on scale-down,
 * as a ReplicaSet removes unscheduled pods first.
 *
 * Times: the policies, the forecaster and the estimator see the trace's
 * times, moved by whole seasons (the policy's seasonality, so the
 * forecaster's phases stay those of the trace's clock) to start at 0 or
 * after when the trace starts before 0 (a trace may have negative
 * t_seconds; the forecaster takes UNIX times, and refused every observation
 * before 0: "predictive" ran without a forecast), and a forecaster's seed,
 * whose times are the trace's, with them (forecast_shift). What is reported
 * (changes, timeline, hooks, the scored span) is in the trace's own times. */
#include "sim-int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "capacity/capacity.h"
#include "forecast/forecast.h"
#include "util/util.h"

/* Generated at build time from data/ by embed-trace.py. */
extern const char sim_demo_trace_csv[];
extern const size_t sim_demo_trace_csv_len;

const char *sim_demo_trace(size_t *len)
{
    *len = sim_demo_trace_csv_len;
    return sim_demo_trace_csv;
}

const char *sim_demo_trace_name(void)
{
    return "bundled demo: ServeGen M-small (Alibaba Bailian), days 0-6, 10 s buckets";
}

#define READY_FOREVER (INT64_MIN / 4)
#define READY_NEVER INT64_MAX /* unschedulable: no GPU for it */

struct pods {
    int64_t *ready_at; /* ms, creation order, non-decreasing */
    int32_t n, cap, nready;
    int32_t place;     /* the first this many can be placed (gpu-limit) */
};

static void pods_push(struct pods *p, int64_t ready_at)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->ready_at = xrealloc(p->ready_at, (size_t)p->cap * sizeof(int64_t));
    }
    p->ready_at[p->n] = p->n < p->place ? ready_at : READY_NEVER;
    p->n++;
}

/* Replicas asked for that hold a GPU (ready or starting). */
static int32_t pods_placed(const struct pods *p)
{
    return p->n < p->place ? p->n : p->place;
}

static void pods_advance(struct pods *p, int64_t now_ms)
{
    while (p->nready < p->n && p->ready_at[p->nready] != READY_NEVER &&
           p->ready_at[p->nready] <= now_ms)
        p->nready++;
}

static void pods_resize(struct pods *p, int32_t want, int64_t now_ms, int64_t cold_start_ms)
{
    while (p->n < want)
        pods_push(p, now_ms + cold_start_ms);
    if (want < p->n) {
        p->n = want < 0 ? 0 : want;
        if (p->nready > p->n)
            p->nready = p->n;
    }
    pods_advance(p, now_ms);
}

/* Prefix sums by absolute second, kept for the last `n` seconds. */
struct ring {
    double *v;
    int64_t n;
};

static double ring_get(const struct ring *r, int64_t s)
{
    return r->v[s % r->n];
}

static void ring_set(struct ring *r, int64_t s, double x)
{
    r->v[s % r->n] = x;
}

/* The fixed inputs of one replay. */
struct replay {
    const struct sim_config *cfg;
    const struct trace *tr;
    struct sim_model model;
    double gpus;
    int64_t dt_s;         /* trace bucket width */
    int64_t s_begin;      /* first simulated second (index from the trace start) */
    int64_t s_score;      /* first scored second */
    int64_t s_end;        /* one past the last */
    int64_t tick_s;       /* decision interval */
    int64_t sync_s;       /* HPA sync period */
    int64_t interval_s;
    int64_t rate_s;       /* rate window */
    double sla_s;
    int32_t initial;
    int64_t t0_ms;        /* the trace's first time as the policies see it: moved by whole
                             seasons to 0 or after when it is before 0 */
};

static double arrivals_at(const struct replay *rp, int64_t s)
{
    return rp->tr->requests[s / rp->dt_s] * rp->cfg->scale / (double)rp->dt_s;
}

/* The time the policies see at second s. */
static int64_t now_of(const struct replay *rp, int64_t s)
{
    return rp->t0_ms + s * 1000;
}

/* The trace's own time of second s (ms), the one reported. */
static int64_t trace_ms(const struct replay *rp, int64_t s)
{
    return rp->tr->t0_ms + s * 1000;
}

/* Per-policy state of one pass. */
struct pass {
    const struct replay *rp;
    enum sim_policy pol;
    const int32_t *plan;  /* oracle/static-peak: desired per scored second */
    int64_t last_change_s;/* second and direction (+1/-1) of the last change */
    int last_dir;
    size_t changes_cap;
    struct policy_config pcfg;
    struct policy_state pst;
    struct forecast *fc;
    struct sim_hpa *hpa;
    struct pods pods;
    struct sim_queue q;
    struct ring arr;      /* prefix of arrivals */
    struct ring served;   /* prefix of completions (capacity-per-gpu auto) */
    struct capacity cap;  /* capacity-per-gpu auto: the estimator */
    struct ring per_pod;  /* prefix of arrivals per ready pod */
    struct sim_second *recent; /* last rate_s seconds, for the observed p99 */
    double *values;       /* HPA metric values, one per pod */
    int32_t values_cap;
    double forecast_rps;  /* newest planned forecast, NAN without */
    const struct sim_hooks *hooks;
    struct sim_policy_result *res;
};

static void log_desired(struct pass *ps, int64_t s, int32_t desired)
{
    struct sim_policy_result *res = ps->res;
    if (res->nchanges == ps->changes_cap) {
        ps->changes_cap = ps->changes_cap ? ps->changes_cap * 2 : 64;
        res->changes = xrealloc(res->changes, ps->changes_cap * sizeof(*res->changes));
    }
    double t = (double)trace_ms(ps->rp, s) / 1000.0;
    if (res->nchanges > 0 && res->changes[res->nchanges - 1].t_s == t)
        res->nchanges--; /* a change at the window's first second replaces its start */
    res->changes[res->nchanges++] = (struct sim_change){.t_s = t, .desired = desired};
}

static void record_change(struct pass *ps, int64_t s, int32_t from, int32_t to,
                          const char *reason)
{
    struct sim_policy_result *res = ps->res;
    int dir = to > from ? 1 : -1;
    bool flap = ps->last_dir != 0 && dir != ps->last_dir &&
                (s - ps->last_change_s) * 1000 < ps->pcfg.cold_start_ms;
    ps->last_dir = dir;
    ps->last_change_s = s;
    if (s >= ps->rp->s_score) {
        log_desired(ps, s, to);
        res->scaling_actions++;
        res->flaps += flap;
        size_t i = 0;
        while (i < res->nreasons && strcmp(res->reasons[i].name, reason) != 0)
            i++;
        if (i == res->nreasons && i < SIM_MAX_REASONS) {
            snprintf(res->reasons[i].name, sizeof(res->reasons[i].name), "%s", reason);
            res->nreasons++;
        }
        if (i < res->nreasons)
            res->reasons[i].count++;
    }
    if (ps->hooks && ps->hooks->on_scale)
        ps->hooks->on_scale(ps->pol, trace_ms(ps->rp, s), from, to, reason, ps->hooks->arg);
}

/* capacity-per-gpu auto: the estimator sees the serving model as the
 * controller sees pods (completions, busy slots by Little's law, the queue);
 * *use gets the policy configuration with the capacity in use. False when
 * there is none yet: the caller holds. */
static bool capacity_tick(struct pass *ps, int64_t s, int64_t win, double waiting,
                          struct policy_config *use)
{
    const struct replay *rp = ps->rp;
    *use = ps->pcfg;
    if (!ps->pcfg.capacity_auto)
        return true;
    int64_t now = now_of(rp, s);
    int32_t ready = ps->pods.nready;
    double done = win > 0 ? (ring_get(&ps->served, s) - ring_get(&ps->served, s - win)) / win
                          : NAN;
    double busy = done * rp->model.service_s;
    if (busy > (double)rp->model.servers * ready)
        busy = (double)rp->model.servers * ready;
    struct capacity_obs o = {.now_ms = now, .window_ms = win * 1000,
                             .steady = win > 0 && ready > 0 && ready == pods_placed(&ps->pods),
                             .gpus = ready * rp->gpus, .completions_rps = done, .running = busy,
                             .waiting = waiting, .slots_per_gpu = ps->pcfg.slots_per_gpu};
    capacity_observe(&ps->cap, &o);
    struct capacity_estimate e;
    capacity_estimate(&ps->cap, now, ps->pcfg.slots_per_gpu, &e);
    enum capacity_source src;
    double c = capacity_in_use(&e, true, 0, ps->pcfg.capacity_start,
                               ps->pcfg.target_utilization, &src);
    ps->res->capacity_learned = e.value;
    ps->res->capacity_source = capacity_source_name(src);
    if (!(c > 0))
        return false;
    use->capacity_rps_per_gpu = c;
    return true;
}

static void decide_policy(struct pass *ps, int64_t s)
{
    const struct replay *rp = ps->rp;
    int64_t now = now_of(rp, s);
    int64_t elapsed = s - rp->s_begin;
    int64_t win = elapsed < rp->rate_s ? elapsed : rp->rate_s;
    int64_t tick = elapsed < rp->tick_s ? elapsed : rp->tick_s;
    struct policy_input in = {0};
    in.now_ms = now;
    in.current_replicas = ps->pods.n;
    in.ready_replicas = ps->pods.nready;
    in.unschedulable_replicas = ps->pods.n - pods_placed(&ps->pods);
    in.gpus_per_replica = rp->gpus;
    in.metrics_valid = win > 0;
    in.metrics_time_ms = win > 0 ? now : POLICY_NEVER;
    in.request_rate = win > 0 ? (ring_get(&ps->arr, s) - ring_get(&ps->arr, s - win)) / win : 0;
    in.rate_window_ms = win * 1000;
    /* the last tick's arrivals, or two service times' when longer, as the
     * controller counts them from its scrapes (policy_recent_span_ms; the
     * simulated service time is known, as an annotation gives it) */
    int64_t rs = (policy_recent_span_ms(&ps->pcfg, 1000 * rp->model.service_s,
                                        rp->rate_s * 1000) + 999) / 1000;
    int64_t recent = UTIL_MIN(UTIL_MAX(tick, rs), elapsed);
    in.recent_rate =
        recent > 0 ? (ring_get(&ps->arr, s) - ring_get(&ps->arr, s - recent)) / recent : NAN;
    in.recent_window_ms = recent * 1000;
    in.p99_latency_ms = -1;
    if (win > 0 && ps->pcfg.p99_latency_target_ms > 0)
        in.p99_latency_ms = 1000 * sim_latency_quantile(ps->recent, (size_t)rp->rate_s, 0.99);
    double lq = 0;
    if (ps->pods.nready > 0) {
        double cap = ps->pods.nready * rp->gpus * rp->model.cap_gpu;
        double rho = ps->q.rate / cap;
        if (rho > SIM_RHO_MAX)
            rho = SIM_RHO_MAX; /* overload is the backlog's */
        lq = ps->pods.nready * sim_model_wait_prob(&rp->model, rho) * rho / (1 - rho);
    }
    in.queue_depth = ps->q.backlog + lq;
    in.service_time_ms = (double)rp->cfg->policy.service_time_ms;
    if (ps->fc && tick > 0) {
        forecast_observe(ps->fc, now, in.recent_rate);
        struct forecast_result fr;
        int64_t horizon = policy_horizon_ms(&ps->pcfg, ps->pcfg.cold_start_ms);
        if (forecast_predict(ps->fc, now, horizon, &fr) == 0) {
            in.have_forecast = true;
            in.forecast_rate = fr.upper;
            in.forecast_likely = fr.likely;
            in.forecast_model_rate = fr.upper_model;
            in.forecast_trusted = fr.trusted;
            in.forecast_seasonal = fr.seasonal;
            ps->forecast_rps = fr.upper;
            ps->res->plan_coverage = fr.coverage;
            ps->res->plan_margin = fr.margin;
            ps->res->plan_resolved = fr.coverage_n;
        }
    }
    struct policy_config use;
    if (!capacity_tick(ps, s, win, in.queue_depth, &use))
        return; /* capacity-per-gpu auto with nothing seen yet: hold */
    struct policy_decision d;
    policy_decide(&use, &ps->pst, &in, &d);
    if (d.desired != ps->pods.n) {
        int32_t from = ps->pods.n;
        pods_resize(&ps->pods, d.desired, now, ps->pcfg.cold_start_ms);
        record_change(ps, s, from, d.desired, policy_reason_name(d.reason));
    }
}

static void decide_hpa(struct pass *ps, int64_t s)
{
    const struct replay *rp = ps->rp;
    const struct sim_hpa_config *h = &rp->cfg->hpa;
    int64_t now = now_of(rp, s);
    int64_t te = s - h->metric_delay_ms / 1000;
    int64_t w = h->metric_window_ms / 1000, scrape = h->scrape_interval_ms / 1000;
    if (ps->values_cap < ps->pods.n) {
        ps->values_cap = ps->pods.n;
        ps->values = xrealloc(ps->values, (size_t)ps->values_cap * sizeof(double));
    }
    size_t nv = 0;
    int32_t missing = 0, pending = ps->pods.n - pods_placed(&ps->pods);
    for (int32_t i = 0; i < pods_placed(&ps->pods); i++) {
        if (i >= ps->pods.nready || te < rp->s_begin) {
            missing++; /* Running, not ready yet: no metric */
            continue;
        }
        int64_t ts = te - w;
        if (ts < rp->s_begin)
            ts = rp->s_begin;
        int64_t ra = ps->pods.ready_at[i];
        if (ra > READY_FOREVER) {
            int64_t rs = (ra - rp->t0_ms + 999) / 1000; /* first full second ready */
            if (rs > ts)
                ts = rs;
        }
        if (te - ts < scrape) {
            missing++; /* too new for two samples in the window */
            continue;
        }
        ps->values[nv++] =
            (ring_get(&ps->per_pod, te) - ring_get(&ps->per_pod, ts)) / (double)(te - ts);
    }
    double target = h->target_per_pod > 0
                        ? h->target_per_pod
                        : ps->pcfg.target_utilization * rp->model.cap_gpu * rp->gpus;
    int32_t calc =
        sim_hpa_calc(h->tolerance, ps->pods.n, target, ps->values, nv, missing, pending);
    const char *reason = NULL;
    int32_t desired = sim_hpa_sync(ps->hpa, now, ps->pods.n, calc, &reason);
    if (desired != ps->pods.n) {
        int32_t from = ps->pods.n;
        pods_resize(&ps->pods, desired, now, ps->pcfg.cold_start_ms);
        record_change(ps, s, from, desired, reason);
    }
}

static void finish_interval(struct pass *ps, int64_t s_start, const struct sim_second *secs,
                            int64_t len, double demand, double ready_gpu_s, double cap_s)
{
    const struct replay *rp = ps->rp;
    struct sim_policy_result *res = ps->res;
    struct sim_point *pt = &res->points[res->npoints++];
    pt->t_s = (double)trace_ms(rp, s_start) / 1000.0;
    pt->desired = ps->pods.n;
    pt->ready = ps->pods.nready;
    pt->demand_rps = demand / (double)len;
    pt->capacity_rps = cap_s / (double)len;
    pt->rps_per_gpu = ready_gpu_s > 0 ? demand / ready_gpu_s : 0;
    pt->forecast_rps = ps->forecast_rps;
    pt->p99_ms = 1000 * sim_latency_quantile(secs, (size_t)len, 0.99);
    res->intervals++;
    if (pt->p99_ms > rp->sla_s * 1000)
        res->sla_intervals++;
    if (pt->p99_ms > res->max_p99_ms)
        res->max_p99_ms = pt->p99_ms;
}

/* Follow a precomputed plan (oracle, static-peak) at second s. */
static void follow_plan(struct pass *ps, int64_t s)
{
    int32_t want = ps->plan[s - ps->rp->s_score];
    if (want != ps->pods.n) {
        int32_t from = ps->pods.n;
        pods_resize(&ps->pods, want, now_of(ps->rp, s), ps->pcfg.cold_start_ms);
        record_change(ps, s, from, want, want > from ? "PlannedScaleOut" : "PlannedScaleIn");
    }
}

static int run_pass(const struct replay *rp, enum sim_policy pol, const int32_t *plan,
                    const struct sim_hooks *hooks, struct sim_policy_result *res, char *err,
                    size_t errlen)
{
    const struct sim_config *cfg = rp->cfg;
    struct pass ps = {.rp = rp, .pol = pol, .plan = plan, .hooks = hooks, .res = res};
    struct sim_second *secs = NULL;
    int rc = 0;
    res->policy = pol;
    res->plan_coverage = res->plan_margin = NAN;
    ps.pcfg = cfg->policy;
    ps.pcfg.predictive = pol == SIM_PREDICTIVE;
    ps.forecast_rps = NAN;
    ps.pods.place = sim_config_placeable(cfg);
    policy_state_init(&ps.pst);
    if (pol == SIM_PREDICTIVE) {
        struct forecast_config fcfg;
        sim_forecast_config(cfg, &fcfg);
        if (cfg->forecast_seed) {
            char why[160];
            ps.fc = forecast_deserialize(&fcfg, cfg->forecast_seed, cfg->forecast_seed_len, why,
                                         sizeof(why));
            if (!ps.fc) {
                snprintf(err, errlen, "forecast seed: %s", why);
                rc = -EINVAL;
                goto out;
            }
            /* the seed's times are the trace's: moved as the replay's are */
            if (forecast_shift(ps.fc, rp->t0_ms - rp->tr->t0_ms) != 0) {
                snprintf(err, errlen, "forecast seed: its times cannot move with the trace's");
                rc = -EINVAL;
                goto out;
            }
        } else {
            ps.fc = forecast_new(&fcfg);
        }
        if (!ps.fc) {
            snprintf(err, errlen,
                     "seasonality/forecast-quantile: the forecaster rejects them (season must be "
                     "a whole number of minutes, quantile above 0.5)");
            rc = -EINVAL;
            goto out;
        }
    }
    if (pol == SIM_HPA)
        ps.hpa = sim_hpa_new(&cfg->hpa, ps.pcfg.min_replicas, ps.pcfg.max_replicas);

    /* the longest look back: the rate window, the HPA's window and delay, and
     * a tick (the recent rate's; two service times are at most half the rate
     * window). Without the tick, a decision interval longer than the others
     * read the recent rate across the ring's wrap. */
    int64_t span = UTIL_MAX(UTIL_MAX(rp->rate_s, (cfg->hpa.metric_window_ms +
                                                  cfg->hpa.metric_delay_ms) / 1000),
                            rp->tick_s) + 2;
    ps.arr.n = ps.per_pod.n = ps.served.n = span;
    ps.arr.v = xcalloc((size_t)span, sizeof(double));
    ps.served.v = xcalloc((size_t)span, sizeof(double));
    capacity_init(&ps.cap);
    res->capacity_learned = NAN;
    ps.per_pod.v = xcalloc((size_t)span, sizeof(double));
    ps.recent = xcalloc((size_t)rp->rate_s, sizeof(*ps.recent));
    secs = xcalloc((size_t)rp->interval_s, sizeof(*secs));
    int64_t nint = (rp->s_end - rp->s_score + rp->interval_s - 1) / rp->interval_s;
    res->points = xcalloc((size_t)nint, sizeof(*res->points));

    /* Planned schedules start warm at the scored window with their first
     * count; the policies replay the warm-up from rp->initial. */
    int64_t s_first = plan ? rp->s_score : rp->s_begin;
    int32_t initial = plan ? plan[0] : rp->initial;
    for (int32_t i = 0; i < initial; i++)
        pods_push(&ps.pods, READY_FOREVER);
    ps.pods.nready = pods_placed(&ps.pods);
    if (s_first == rp->s_score)
        log_desired(&ps, s_first, initial);

    double gpu_s = 0, replica_s = 0, pending_s = 0, demand = 0, ready_gpu_s = 0, cap_s = 0;
    int64_t in_int = 0, int_start = rp->s_score;
    for (int64_t s = s_first; s < rp->s_end; s++) {
        int64_t now = now_of(rp, s);
        int64_t el = s - rp->s_begin;
        pods_advance(&ps.pods, now);
        if (s == rp->s_score && s_first < s)
            log_desired(&ps, s, ps.pods.n);
        if (plan) {
            follow_plan(&ps, s);
        } else if (pol == SIM_HPA) {
            if (el % rp->sync_s == 0)
                decide_hpa(&ps, s);
        } else if (el % rp->tick_s == 0) {
            decide_policy(&ps, s);
        }
        double a = arrivals_at(rp, s);
        struct sim_second sec;
        int32_t ready = ps.pods.nready;
        double backlog = ps.q.backlog;
        sim_serve_second(&rp->model, &ps.q, ready, a, &sec);
        ps.recent[s % rp->rate_s] = sec;
        ring_set(&ps.arr, s + 1, ring_get(&ps.arr, s) + a);
        ring_set(&ps.served, s + 1, ring_get(&ps.served, s) + a + backlog - ps.q.backlog);
        ring_set(&ps.per_pod, s + 1, ring_get(&ps.per_pod, s) + (ready > 0 ? a / ready : 0));
        if (s < rp->s_score)
            continue;
        double held = pods_placed(&ps.pods); /* a Pending pod holds no GPU */
        gpu_s += held * rp->gpus;
        replica_s += held;
        if (ps.pods.n > res->peak_replicas)
            res->peak_replicas = ps.pods.n;
        int32_t pending = ps.pods.n - pods_placed(&ps.pods);
        pending_s += pending;
        if (pending > res->peak_unschedulable)
            res->peak_unschedulable = pending;
        res->requests += a;
        if (a > 0)
            res->requests_over_sla += a * sim_second_frac_over(&sec, rp->sla_s);
        secs[in_int++] = sec;
        demand += a;
        ready_gpu_s += ready * rp->gpus;
        cap_s += ready * rp->gpus * rp->model.cap_gpu;
        if (in_int == rp->interval_s || s + 1 == rp->s_end) {
            finish_interval(&ps, int_start, secs, in_int, demand, ready_gpu_s, cap_s);
            in_int = 0;
            int_start = s + 1;
            demand = ready_gpu_s = cap_s = 0;
        }
    }
    double scored = (double)(rp->s_end - rp->s_score);
    res->gpu_hours = gpu_s / 3600.0;
    res->pending_replica_hours = pending_s / 3600.0;
    res->mean_replicas = scored > 0 ? replica_s / scored : 0;
out:
    forecast_free(ps.fc);
    sim_hpa_free(ps.hpa);
    xfree(ps.pods.ready_at);
    xfree(ps.arr.v);
    xfree(ps.served.v);
    xfree(ps.per_pod.v);
    xfree(ps.recent);
    xfree(ps.values);
    xfree(secs);
    return rc;
}

void sim_result_free(struct sim_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        xfree(r->pol[i].points);
        xfree(r->pol[i].changes);
    }
    xfree(r);
}

static void sweep_point(const struct sim_policy_result *x, double q, bool configured,
                        struct sim_sweep_point *pt)
{
    *pt = (struct sim_sweep_point){
        .quantile = q,
        .configured = configured,
        .gpu_hours = x->gpu_hours,
        .gpu_hours_vs_oracle = x->gpu_hours_vs_oracle,
        .intervals = x->intervals,
        .sla_intervals = x->sla_intervals,
        .requests = x->requests,
        .requests_over_sla = x->requests_over_sla,
        .scaling_actions = x->scaling_actions,
        .flaps = x->flaps,
        .plan_coverage = x->plan_coverage,
    };
}

/* quantile-sweep: predictive at each value and at the configured
 * forecast-quantile, ascending. The configured one is the predictive
 * policy's own pass when that ran (the same replay gives the same result). */
static int run_sweep(struct replay *rp, struct sim_result *r, char *err, size_t errlen)
{
    const struct sim_config *cfg = rp->cfg;
    double qs[SIM_MAX_SWEEP + 1];
    size_t n = 0;
    double mine = cfg->policy.forecast_quantile;
    bool placed = false;
    for (size_t i = 0; i < cfg->nsweep; i++) {
        double q = cfg->quantile_sweep[i];
        if (!placed && mine <= q) {
            qs[n++] = mine;
            placed = true;
        }
        if (q != mine)
            qs[n++] = q;
    }
    if (!placed)
        qs[n++] = mine;
    const struct sim_policy_result *own = NULL;
    for (size_t i = 0; i < r->n; i++)
        if (r->pol[i].policy == SIM_PREDICTIVE)
            own = &r->pol[i];
    struct sim_config c = *cfg;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bool configured = qs[i] == mine;
        if (configured && own) {
            sweep_point(own, qs[i], true, &r->sweep[r->nsweep++]);
            continue;
        }
        struct sim_policy_result x = {0};
        c.policy.forecast_quantile = qs[i];
        rp->cfg = &c;
        rc = run_pass(rp, SIM_PREDICTIVE, NULL, NULL, &x, err, errlen);
        rp->cfg = cfg;
        if (rc == 0) {
            x.gpu_hours_vs_oracle =
                r->oracle_gpu_hours > 0 ? x.gpu_hours / r->oracle_gpu_hours : NAN;
            sweep_point(&x, qs[i], configured, &r->sweep[r->nsweep++]);
        }
        xfree(x.points);
        xfree(x.changes);
    }
    return rc;
}

int sim_run(const struct sim_config *cfg, const struct trace *tr, const struct sim_hooks *hooks,
            struct sim_result **out, char *err, size_t errlen)
{
    struct replay rp = {.cfg = cfg, .tr = tr};
    struct sim_result *r = NULL;
    double *arr = NULL;
    int32_t *oracle = NULL, *peak = NULL;
    int rc = 0;
    if (!tr || tr->n == 0 || tr->dt_ms <= 0 || tr->dt_ms % 1000 != 0) {
        snprintf(err, errlen, "trace: the bucket width must be a whole number of seconds");
        return -EINVAL;
    }
    rp.dt_s = tr->dt_ms / 1000;
    rp.t0_ms = tr->t0_ms;
    if (tr->t0_ms < 0) { /* |t0| <= 1e15 ms (trace.c): no overflow */
        int64_t season = cfg->policy.seasonality_ms > 0 ? cfg->policy.seasonality_ms
                                                        : 24LL * 3600 * 1000;
        rp.t0_ms = tr->t0_ms + (-tr->t0_ms + season - 1) / season * season;
    }
    int64_t total_s = (int64_t)tr->n * rp.dt_s;
    int64_t start_s = cfg->start_ms / 1000;
    if (start_s >= total_s) {
        char a[32], b[32];
        util_format_duration(cfg->start_ms, a, sizeof(a));
        util_format_duration(total_s * 1000, b, sizeof(b));
        snprintf(err, errlen, "start: %s is past the end of the trace (%s long)", a, b);
        return -EINVAL;
    }
    rp.s_score = start_s;
    rp.s_end = cfg->duration_ms > 0 ? UTIL_MIN(total_s, start_s + cfg->duration_ms / 1000)
                                     : total_s;
    if (rp.s_end - rp.s_score > SIM_MAX_SCORED_S) {
        /* the oracle and the timelines take tens of bytes per scored second:
         * a year is gigabytes, and a timestamp typo makes one of an hour */
        snprintf(err, errlen,
                 "the scored span is %.1f days; at most %d are scored at once (set start and "
                 "duration; a row's t_seconds far past the others would make such a span)",
                 (double)(rp.s_end - rp.s_score) / 86400.0, (int)(SIM_MAX_SCORED_S / 86400));
        return -E2BIG;
    }
    rp.s_begin = UTIL_MAX((int64_t)0, start_s - cfg->warmup_ms / 1000);
    rp.tick_s = cfg->policy.decision_interval_ms / 1000;
    rp.sync_s = cfg->hpa.sync_period_ms / 1000;
    rp.interval_s = cfg->interval_ms / 1000;
    rp.rate_s = cfg->rate_window_ms / 1000;
    rp.sla_s = sim_config_sla_ms(cfg) / 1000.0;
    rp.gpus = sim_config_gpus(cfg);
    if (rp.tick_s < 1 || rp.sync_s < 1 || rp.interval_s < 1 || rp.rate_s < 1) {
        snprintf(err, errlen, "decision-interval, hpa-sync-period, interval and rate-window "
                              "must be at least 1s");
        return -EINVAL;
    }
    if (sim_model_init(&rp.model, rp.gpus, sim_config_capacity(cfg),
                       cfg->policy.service_time_ms / 1000.0, cfg->policy.slots_per_gpu) != 0) {
        snprintf(err, errlen, "serving model: capacity, GPUs, service time and slots must be "
                              "positive (and at most 100000 slots per replica)");
        return -EINVAL;
    }
    rp.initial = cfg->initial_replicas;
    if (rp.initial <= 0) {
        /* What the first rate window's load needs at the target utilisation. */
        double sum = 0;
        int64_t w = UTIL_MIN(rp.rate_s, rp.s_end - rp.s_begin);
        for (int64_t s = rp.s_begin; s < rp.s_begin + w; s++)
            sum += arrivals_at(&rp, s);
        double per = cfg->policy.target_utilization * rp.model.cap_gpu * rp.gpus;
        double need = ceil(sum / (double)w / per - 1e-9);
        rp.initial = need < cfg->policy.min_replicas   ? cfg->policy.min_replicas
                     : need > cfg->policy.max_replicas ? cfg->policy.max_replicas
                                                       : (int32_t)need;
    }

    r = xcalloc(1, sizeof(*r));
    r->t_begin_s = (double)trace_ms(&rp, rp.s_score) / 1000.0;
    r->t_end_s = (double)trace_ms(&rp, rp.s_end) / 1000.0;
    r->warmup_s = (double)(rp.s_score - rp.s_begin);

    /* The oracle always runs: every policy's GPU-hours are reported against it. */
    size_t n = (size_t)(rp.s_end - rp.s_score);
    arr = xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        arr[i] = arrivals_at(&rp, rp.s_score + (int64_t)i);
    /* perfect foresight of the trace, within the GPUs there are; a replica
     * asked for at second s serves from the first whole second after its cold
     * start (a cold start of 60.5 s planned as 60 came a second late) */
    int32_t hi = UTIL_MIN(cfg->policy.max_replicas, sim_config_placeable(cfg));
    oracle = sim_oracle_plan(&rp.model, arr, n, (cfg->policy.cold_start_ms + 999) / 1000, rp.sla_s,
                             UTIL_MIN(cfg->policy.min_replicas, hi), hi, &r->oracle_peak_need,
                             &r->peak_need);
    peak = xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++)
        peak[i] = r->oracle_peak_need;
    struct sim_policy_result oracle_res = {0};
    rc = run_pass(&rp, SIM_ORACLE, oracle, hooks, &oracle_res, err, errlen);
    r->oracle_gpu_hours = oracle_res.gpu_hours;
    if (rc != 0 || !(cfg->policies & (1u << SIM_ORACLE))) {
        xfree(oracle_res.points);
        xfree(oracle_res.changes);
        if (rc != 0)
            goto out;
    }
    for (int p = 0; p < SIM_POLICY_COUNT; p++) {
        if (!(cfg->policies & (1u << p)))
            continue;
        struct sim_policy_result *res = &r->pol[r->n++];
        if (p == SIM_ORACLE)
            *res = oracle_res;
        else
            rc = run_pass(&rp, (enum sim_policy)p, p == SIM_STATIC_PEAK ? peak : NULL, hooks,
                          res, err, errlen);
        if (rc != 0)
            goto out;
        res->gpu_hours_vs_oracle =
            r->oracle_gpu_hours > 0 ? res->gpu_hours / r->oracle_gpu_hours : NAN;
    }
    if (r->n > 0) {
        r->requests = r->pol[0].requests;
        for (size_t i = 0; i < r->pol[0].npoints; i++)
            if (r->pol[0].points[i].demand_rps > r->peak_demand_rps)
                r->peak_demand_rps = r->pol[0].points[i].demand_rps;
    }
    if (cfg->nsweep > 0 && (rc = run_sweep(&rp, r, err, errlen)) != 0)
        goto out;
    *out = r;
    r = NULL;
out:
    xfree(arr);
    xfree(oracle);
    xfree(peak);
    sim_result_free(r);
    sim_model_free(&rp.model);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* plan/replay: runs the policy that will run on the forecast, through
 * sim_run(), the code behind `gpuscaler simulate`.
 *
 * The replayed traffic is the model's smooth forecast times the history's
 * own residuals at the history's resolution: for a bucket at time of day x
 * of a replayed day, exp(z(x) + e(x)) - floor, where e is the residual of
 * the bucket at x on a day of the history. Residual days are whole days of
 * the last two weeks of history; the representative one is the day whose
 * mean |e| is the median's closest, so an outage or a launch day is not
 * chosen. Bursts, noise and unexplained swings thus reach the policy as they
 * did, on the forecast's level.
 *
 * The predictive forecaster is seeded with plan_seed_days() of that
 * traffic (8 days for a daily season: the recent seasons' plan looks 7
 * days back) before the replay, observations every decision interval as
 * the replay itself makes them; then the policy replays one hour unscored
 * before the scored window. The seed only observes; its 8 days, about
 * 11 ms each, are about a third of a predictive plan's CPU.
 *
 * A replay that starts before 0 (a history with negative t_seconds) is run
 * with its times moved by whole seasons to start at 0 or after, as sim_run
 * moves such a trace (sim.c), and its results moved back: the forecaster
 * takes UNIX times and refuses every observation before 0, and the seed,
 * which sim_run takes in the trace's own times, would have been empty.
 *
 * PLAN_SIM_DAY replays one day at the horizon's middle level and, per step
 * of the day, takes k = GPUs held / GPUs the smooth demand needs at the
 * target utilisation; each step of each scenario then holds
 * k x need(forecast) GPUs within [min, max] replicas (steps where the replay
 * sat at a bound take the day's median k). Whole-horizon replays
 * (PLAN_SIM_HORIZON) give the curves directly and validate that shortcut. */
#include "plan-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "forecast/forecast.h"
#include "policy/policy.h"

#define CANDIDATE_DAYS 14
#define WARMUP_MS (3600 * 1000LL)

int64_t plan_seed_days(const struct sim_config *sc)
{
    struct forecast_config fc;
    sim_forecast_config(sc, &fc);
    int64_t d = (forecast_history_ms(&fc) + PLAN_DAY_MS - 1) / PLAN_DAY_MS;
    return d < PLAN_SEED_DAYS_MAX ? d : PLAN_SEED_DAYS_MAX;
}

/* Residual days of the history at its bucket width. */
struct resid {
    int64_t dt_ms;
    size_t per_day;     /* buckets per day */
    size_t n;
    int64_t day[CANDIDATE_DAYS];
    double *e[CANDIDATE_DAYS];
    double spread[CANDIDATE_DAYS];
};

static void resid_free(struct resid *r)
{
    for (size_t i = 0; i < r->n; i++)
        xfree(r->e[i]);
    r->n = 0;
}

/* The last CANDIDATE_DAYS whole days of the history (90 % of the buckets
 * with data), with the residual of every bucket. */
static void resid_build(const struct trace *h, double scale, const struct plan_model *m,
                        struct resid *r)
{
    memset(r, 0, sizeof(*r));
    r->dt_ms = h->dt_ms;
    r->per_day = (size_t)((PLAN_DAY_MS + h->dt_ms - 1) / h->dt_ms);
    double dt_s = (double)h->dt_ms / 1000.0;
    int64_t t1 = h->t0_ms + (int64_t)h->n * h->dt_ms;
    int64_t dfirst = util_floor_div(h->t0_ms + PLAN_DAY_MS - 1, PLAN_DAY_MS);
    int64_t dlast = util_floor_div(t1, PLAN_DAY_MS) - 1;
    for (int64_t day = dlast; day >= dfirst && r->n < CANDIDATE_DAYS; day--) {
        int64_t start = day * PLAN_DAY_MS;
        size_t have = 0;
        double *e = xmalloc(r->per_day * sizeof(double));
        double sum = 0;
        for (size_t j = 0; j < r->per_day; j++) {
            int64_t t = start + (int64_t)j * h->dt_ms + h->dt_ms / 2;
            int64_t i = util_floor_div(t - h->t0_ms, h->dt_ms);
            double c = i >= 0 && i < (int64_t)h->n ? h->requests[i] : NAN;
            if (isnan(c)) {
                e[j] = 0;
                continue;
            }
            have++;
            e[j] = plan_model_log(m, c * scale / dt_s) -
                   plan_model_z(m, h->t0_ms + i * h->dt_ms + h->dt_ms / 2);
            sum += fabs(e[j]);
        }
        if ((double)have < 0.9 * (double)r->per_day) {
            xfree(e);
            continue;
        }
        /* newest first for now; reversed below */
        r->day[r->n] = day;
        r->e[r->n] = e;
        r->spread[r->n] = sum / (double)have;
        r->n++;
    }
    for (size_t i = 0; i < r->n / 2; i++) {
        size_t j = r->n - 1 - i;
        int64_t d = r->day[i];
        r->day[i] = r->day[j];
        r->day[j] = d;
        double *e = r->e[i];
        r->e[i] = r->e[j];
        r->e[j] = e;
        double s = r->spread[i];
        r->spread[i] = r->spread[j];
        r->spread[j] = s;
    }
}

/* The residual days of a day-mode replay: the PLAN_REP_DAYS most typical
 * (mean |e| closest to the median) are scored, the next nseed seed; each
 * group in chronological order. With fewer days, days repeat. */
static void resid_pick(const struct resid *r, size_t scored[PLAN_REP_DAYS], size_t *seed,
                       size_t nseed)
{
    double s[CANDIDATE_DAYS];
    size_t idx[CANDIDATE_DAYS];
    memcpy(s, r->spread, r->n * sizeof(double));
    double med = plan_quantile(s, r->n, 0.5);
    for (size_t i = 0; i < r->n; i++)
        idx[i] = i;
    for (size_t i = 1; i < r->n; i++) /* insertion sort by distance, stable */
        for (size_t j = i; j > 0 && fabs(r->spread[idx[j]] - med) <
                                        fabs(r->spread[idx[j - 1]] - med); j--) {
            size_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    for (size_t k = 0; k < PLAN_REP_DAYS; k++)
        scored[k] = idx[k % r->n];
    for (size_t k = 0; k < nseed; k++)
        seed[k] = idx[(PLAN_REP_DAYS + k) % r->n];
    /* chronological within each group (indexes are in day order) */
    for (size_t i = 1; i < PLAN_REP_DAYS; i++)
        for (size_t j = i; j > 0 && scored[j] < scored[j - 1]; j--) {
            size_t t = scored[j];
            scored[j] = scored[j - 1];
            scored[j - 1] = t;
        }
    for (size_t i = 1; i < nseed; i++)
        for (size_t j = i; j > 0 && seed[j] < seed[j - 1]; j--) {
            size_t t = seed[j];
            seed[j] = seed[j - 1];
            seed[j - 1] = t;
        }
}

/* What the replayed traffic is made of. */
struct gen {
    const struct plan_model *m;
    const struct resid *r;
    bool flat;          /* day mode: level + profile only */
    double level;       /* day mode: z level */
    double growth;      /* horizon mode: scenario growth */
    int64_t h0_ms, h_ms;/* horizon mode: the horizon */
    int64_t day0;       /* the first day of the replay */
    size_t map_scored[PLAN_REP_DAYS];   /* day mode: residual days scored, */
    size_t map_seed[PLAN_SEED_DAYS_MAX]; /* and seeding (nseed of them) */
    size_t nseed;
};

static double gen_z(const struct gen *g, int64_t t)
{
    if (g->flat)
        return g->level + plan_model_profile_at(g->m, t);
    return plan_model_z(g->m, t);
}

/* The request rate at t with the residual e (log space) and the scenario's
 * growth, which multiplies the rate itself: in z = ln(rate + floor) it would
 * multiply the floor too (x1.8 gave 2.68x the requests, and growth out of an
 * idle history). */
static double gen_rate(const struct gen *g, int64_t t, double e)
{
    double r = plan_model_rate(g->m, gen_z(g, t) + e);
    return g->flat ? r : r * plan_growth_at(g->growth, t, g->h0_ms, g->h_ms);
}

/* Smooth rate (no residual) averaged over [t, t + len). */
static double gen_smooth_mean(const struct gen *g, int64_t t, int64_t len)
{
    double sum = 0;
    for (int i = 0; i < 8; i++)
        sum += gen_rate(g, t + (int64_t)((i + 0.5) * (double)len / 8), 0);
    return sum / 8;
}

static const double *gen_resid_day(const struct gen *g, int64_t day)
{
    if (g->flat) {
        int64_t back = g->day0 - day; /* the scored days start at day0 */
        if (back <= 0)
            return g->r->e[g->map_scored[(size_t)(-back) % PLAN_REP_DAYS]];
        return g->r->e[g->map_seed[g->nseed - 1 - (size_t)(back - 1) % g->nseed]];
    }
    int64_t j = day - g->day0;
    return g->r->e[(size_t)(((j % (int64_t)g->r->n) + (int64_t)g->r->n) % (int64_t)g->r->n)];
}

/* Fill tr (t0, dt, n set) with the generated traffic. */
static void gen_fill(const struct gen *g, struct trace *tr)
{
    double dt_s = (double)tr->dt_ms / 1000.0;
    for (size_t i = 0; i < tr->n; i++) {
        int64_t t = tr->t0_ms + (int64_t)i * tr->dt_ms;
        int64_t day = util_floor_div(t, PLAN_DAY_MS);
        size_t j = (size_t)((t - day * PLAN_DAY_MS) / g->r->dt_ms);
        if (j >= g->r->per_day)
            j = g->r->per_day - 1;
        double e = gen_resid_day(g, day)[j];
        tr->requests[i] = gen_rate(g, t + tr->dt_ms / 2, e) * dt_s;
    }
}

/* Arrivals of tr in [0, x) seconds, for x that never decreases from one
 * call to the next: whole buckets plus the part of the next. */
struct arr_cursor {
    size_t bi;
    double cum;
};

static double arrivals_before(const struct trace *tr, struct arr_cursor *c, int64_t x)
{
    int64_t dt_s = tr->dt_ms / 1000;
    while ((int64_t)(c->bi + 1) * dt_s <= x && c->bi < tr->n)
        c->cum += tr->requests[c->bi++];
    double part = c->bi < tr->n ? tr->requests[c->bi] * (double)(x - (int64_t)c->bi * dt_s) /
                                      (double)dt_s
                                : 0;
    return c->cum + (part > 0 ? part : 0);
}

/* Seed a forecaster with the traffic of the replay trace before second
 * s_begin, one observation per decision interval as sim.c makes them: the
 * rate over the interval, or over two service times when longer
 * (policy_recent_span_ms). */
static int seed_forecaster(const struct sim_config *sc, const struct trace *tr, int64_t s_begin,
                           uint8_t **out, size_t *outlen, char *err, size_t errlen)
{
    struct forecast_config fcfg;
    sim_forecast_config(sc, &fcfg);
    struct forecast *f = forecast_new(&fcfg);
    if (!f) {
        snprintf(err, errlen, "seasonality/forecast-quantile: the forecaster rejects them");
        return -EINVAL;
    }
    int64_t tick = sc->policy.decision_interval_ms / 1000;
    int64_t rs = (policy_recent_span_ms(&sc->policy, (double)sc->policy.service_time_ms,
                                        sc->rate_window_ms) + 999) / 1000;
    int64_t span = rs > tick ? rs : tick;
    struct arr_cursor now = {0}, back = {0};
    for (int64_t s = tick; s <= s_begin; s += tick) {
        int64_t from = s - span > 0 ? s - span : 0;
        double at = arrivals_before(tr, &now, s), was = arrivals_before(tr, &back, from);
        forecast_observe(f, tr->t0_ms + s * 1000, (at - was) / (double)(s - from));
    }
    forecast_serialize(f, out, outlen);
    forecast_free(f);
    return 0;
}

void plan_curve_from_changes(const struct sim_policy_result *pr, double gpus, int32_t placeable,
                             int64_t t0_ms, int64_t step_ms, size_t n, double *mean,
                             double *max)
{
    size_t c = 0;
    double cap = (double)placeable; /* the rest stay Pending under a gpu-limit */
    double held = pr->nchanges ? UTIL_MIN((double)pr->changes[0].desired, cap) : 0;
    for (size_t k = 0; k < n; k++) {
        double a = (double)(t0_ms + (int64_t)k * step_ms) / 1000.0;
        double b = a + (double)step_ms / 1000.0;
        double area = 0, hi = held, t = a;
        while (c < pr->nchanges && pr->changes[c].t_s <= t) {
            held = UTIL_MIN((double)pr->changes[c].desired, cap);
            c++;
            hi = held;
        }
        while (c < pr->nchanges && pr->changes[c].t_s < b) {
            area += held * (pr->changes[c].t_s - t);
            t = pr->changes[c].t_s;
            held = UTIL_MIN((double)pr->changes[c].desired, cap);
            c++;
            if (held > hi)
                hi = held;
        }
        area += held * (b - t);
        mean[k] = area / (b - a) * gpus;
        max[k] = hi * gpus;
    }
}

/* Minutes over the SLA per step of [t0, t0 + n step). */
static void sla_per_step(const struct sim_policy_result *pr, int64_t sla_ms, int64_t interval_ms,
                         int64_t t0_ms, int64_t step_ms, size_t n, double *out)
{
    memset(out, 0, n * sizeof(double));
    for (size_t i = 0; i < pr->npoints; i++) {
        if (!(pr->points[i].p99_ms > (double)sla_ms))
            continue;
        int64_t k = util_floor_div((int64_t)llround(pr->points[i].t_s * 1000) - t0_ms, step_ms);
        if (k >= 0 && k < (int64_t)n)
            out[k] += (double)interval_ms / 60000.0;
    }
}

/* The requests of the replay's intervals, added up per step. */
static void requests_per_step(const struct sim_policy_result *pr, int64_t interval_ms,
                              int64_t t0_ms, int64_t step_ms, size_t n, double *out)
{
    memset(out, 0, n * sizeof(double));
    for (size_t i = 0; i < pr->npoints; i++) {
        int64_t k = util_floor_div((int64_t)llround(pr->points[i].t_s * 1000) - t0_ms, step_ms);
        if (k >= 0 && k < (int64_t)n)
            out[k] += pr->points[i].demand_rps * (double)interval_ms / 1000.0;
    }
}

/* The results' times moved by -shift_s (what replay() moved the trace by). */
static void unshift(struct sim_result *r, double shift_s)
{
    r->t_begin_s -= shift_s;
    r->t_end_s -= shift_s;
    for (size_t p = 0; p < r->n; p++) {
        struct sim_policy_result *pr = &r->pol[p];
        for (size_t i = 0; i < pr->npoints; i++)
            pr->points[i].t_s -= shift_s;
        for (size_t i = 0; i < pr->nchanges; i++)
            pr->changes[i].t_s -= shift_s;
    }
}

/* One replay: trace over [t0, t0 + seed + warm-up... + scored), sim_run. */
static int replay(const struct plan_workload *w, const struct gen *g, int64_t t0_ms,
                  int64_t seed_ms, int64_t scored_ms, int64_t dt_ms, struct sim_result **res,
                  struct plan_replay *info, char *err, size_t errlen)
{
    struct trace tr = {.t0_ms = t0_ms, .dt_ms = dt_ms};
    uint8_t *seed = NULL;
    size_t seedlen = 0;
    struct sim_config sc = w->sim;
    int rc = 0;
    tr.n = (size_t)((seed_ms + scored_ms + dt_ms - 1) / dt_ms);
    tr.requests = xmalloc(tr.n * sizeof(double));
    gen_fill(g, &tr); /* at the history's own times */
    /* before 0: by whole seasons to 0 or after, as sim_run would (sim.c),
     * so that the seed is made at the times the replay observes */
    int64_t shift_ms = 0;
    if (tr.t0_ms < 0) {
        int64_t season = sc.policy.seasonality_ms > 0 ? sc.policy.seasonality_ms : PLAN_DAY_MS;
        shift_ms = (-tr.t0_ms + season - 1) / season * season;
        tr.t0_ms += shift_ms;
    }
    sc.scale = 1;
    sc.policies = 1u << w->policy;
    sc.start_ms = seed_ms;
    sc.warmup_ms = WARMUP_MS;
    sc.duration_ms = scored_ms;
    sc.initial_replicas = 0;
    sc.forecast_seed = NULL;
    if (w->policy == SIM_PREDICTIVE) {
        rc = seed_forecaster(&sc, &tr, (seed_ms - WARMUP_MS) / 1000, &seed, &seedlen, err,
                             errlen);
        if (rc != 0)
            goto out;
        sc.forecast_seed = seed;
        sc.forecast_seed_len = seedlen;
        info->seeded_s += (double)(seed_ms - WARMUP_MS) / 1000.0;
    }
    rc = sim_run(&sc, &tr, NULL, res, err, errlen);
    if (rc == 0 && shift_ms)
        unshift(*res, (double)shift_ms / 1000.0);
    info->simulated_s += (double)(scored_ms + WARMUP_MS) / 1000.0;
out:
    xfree(seed);
    xfree(tr.requests);
    return rc;
}

/* The share of a step in which the policy would want more than max GPUs,
 * given the GPUs it wants on average (want) and at most (wmax) in it: the
 * wanted GPUs taken as spread evenly over [2 want - wmax, wmax]. */
static double short_share(double want, double wmax, double maxG)
{
    if (want >= maxG * (1 + 1e-9))
        return 1;
    if (wmax <= maxG * (1 + 1e-9) || wmax <= want)
        return 0;
    double f = (wmax - maxG) / (2 * (wmax - want));
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

static double need_gpus(const struct plan_workload *w, double rps)
{
    return rps / (w->sim.policy.target_utilization * sim_config_capacity(&w->sim));
}

static int replay_day(const struct plan_workload *w,
                      const struct plan_model *m, struct gen *g, int64_t seed_ms,
                      struct plan_result *r, char *err, size_t errlen)
{
    size_t P = m->steps_per_day, KP = PLAN_REP_DAYS * P;
    int32_t placeable = sim_config_placeable(&w->sim); /* a gpu-limit's: the rest Pending */
    double G = r->gpus_per_replica, minG = UTIL_MIN(r->min_replicas, placeable) * G,
           maxG = UTIL_MIN(r->max_replicas, placeable) * G;
    int64_t D0 = util_floor_div(r->t_begin_ms + PLAN_DAY_MS - 1, PLAN_DAY_MS) * PLAN_DAY_MS;
    struct sim_result *res = NULL;
    double *H = xmalloc(P * sizeof(double)), *Hmax = xmalloc(P * sizeof(double));
    double *V = xmalloc(P * sizeof(double)), *S = xmalloc(P * sizeof(double));
    double *k = xmalloc(P * sizeof(double)), *kmax = xmalloc(P * sizeof(double));
    double *tmp = xmalloc(P * sizeof(double));
    double *Hall = xmalloc(KP * sizeof(double)), *Mall = xmalloc(KP * sizeof(double));
    double *Vall = xmalloc(KP * sizeof(double));
    g->flat = true;
    /* the trend's level at the middle of the horizon */
    int64_t mid = r->t_begin_ms + (int64_t)r->nsteps * r->step_ms / 2;
    g->level = m->level + plan_model_trend(m, (double)(mid - m->origin_ms) / (double)PLAN_DAY_MS);
    g->day0 = D0 / PLAN_DAY_MS;
    g->h0_ms = r->t_begin_ms; /* the scenarios' growth ramps over the horizon */
    g->h_ms = (int64_t)r->nsteps * r->step_ms;
    int rc = replay(w, g, D0 - seed_ms, seed_ms, PLAN_REP_DAYS * PLAN_DAY_MS, g->r->dt_ms, &res,
                    &r->replay, err, errlen);
    if (rc != 0)
        goto out;
    const struct sim_policy_result *pr = &res->pol[0];
    plan_curve_from_changes(pr, G, placeable, D0, m->step_ms, KP, Hall, Mall);
    sla_per_step(pr, r->sla_ms, w->sim.interval_ms, D0, m->step_ms, KP, Vall);
    /* per step of the day: mean GPUs, the most GPUs, mean SLA minutes */
    for (size_t p = 0; p < P; p++) {
        H[p] = Hmax[p] = V[p] = 0;
        for (size_t j = 0; j < PLAN_REP_DAYS; j++) {
            H[p] += Hall[j * P + p] / PLAN_REP_DAYS;
            V[p] += Vall[j * P + p] / PLAN_REP_DAYS;
            Hmax[p] = UTIL_MAX(Hmax[p], Mall[j * P + p]);
        }
    }
    double smooth = 0;
    size_t nk = 0;
    for (size_t p = 0; p < P; p++) {
        S[p] = gen_smooth_mean(g, D0 + (int64_t)p * m->step_ms, m->step_ms);
        smooth += S[p] * (double)m->step_ms / 1000.0 * PLAN_REP_DAYS;
        double need = need_gpus(w, S[p]);
        bool pinned = need <= 0 || H[p] <= minG * (1 + 1e-9) || H[p] >= maxG * (1 - 1e-9);
        k[p] = pinned ? NAN : H[p] / need;
        kmax[p] = pinned ? NAN : Hmax[p] / need;
        if (!pinned)
            tmp[nk++] = k[p];
    }
    double kbar = nk ? plan_quantile(tmp, nk, 0.5) : 1 / w->sim.policy.target_utilization;
    nk = 0;
    for (size_t p = 0; p < P; p++)
        if (!isnan(kmax[p]))
            tmp[nk++] = kmax[p];
    double kmaxbar = nk ? plan_quantile(tmp, nk, 0.5) : kbar;
    r->replay.gpus_per_need = kbar;
    /* the replayed day's requests over its smooth forecast: the residuals' mean */
    double req_ratio = smooth > 0 ? pr->requests / smooth : 1;
    double step_min = (double)m->step_ms / 60000.0;
    int64_t k0 = r->t_begin_ms / m->step_ms;
    for (size_t s = 0; s < r->nscen; s++) {
        struct plan_scenario_result *sr = &r->scen[s];
        struct gen gs = *g;
        gs.flat = false;
        gs.growth = sr->growth;
        sr->requests = 0;
        sr->sla_minutes = 0;
        for (size_t i = 0; i < r->nsteps; i++) {
            int64_t t = r->t_begin_ms + (int64_t)i * m->step_ms;
            size_t p = (size_t)(((k0 + (int64_t)i) % (int64_t)P + (int64_t)P) % (int64_t)P);
            double D = gen_smooth_mean(&gs, t, m->step_ms);
            double need = need_gpus(w, D);
            double want = (isnan(k[p]) ? kbar : k[p]) * need;
            double wmax = (isnan(kmax[p]) ? kmaxbar : kmax[p]) * need;
            sr->demand[i] = D;
            sr->gpus[i] = UTIL_MAX(minG, UTIL_MIN(maxG, want));
            sr->gpus_max[i] = UTIL_MAX(sr->gpus[i], UTIL_MAX(minG, UTIL_MIN(maxG, wmax)));
            sr->step_requests[i] = D * (double)m->step_ms / 1000.0 * req_ratio;
            sr->step_sla_minutes[i] = UTIL_MAX(V[p], step_min * short_share(want, wmax, maxG));
            sr->requests += sr->step_requests[i];
            sr->sla_minutes += sr->step_sla_minutes[i];
        }
    }
out:
    sim_result_free(res);
    xfree(H);
    xfree(Hmax);
    xfree(V);
    xfree(S);
    xfree(k);
    xfree(kmax);
    xfree(tmp);
    xfree(Hall);
    xfree(Mall);
    xfree(Vall);
    return rc;
}

static int replay_horizon(const struct plan_workload *w, const struct plan_model *m,
                          struct gen *g, int64_t seed_ms, struct plan_result *r, char *err,
                          size_t errlen)
{
    int64_t h_ms = (int64_t)r->nsteps * m->step_ms;
    int rc = 0;
    g->flat = false;
    g->h0_ms = r->t_begin_ms;
    g->h_ms = h_ms;
    g->day0 = util_floor_div(r->t_begin_ms - seed_ms, PLAN_DAY_MS);
    for (size_t s = 0; s < r->nscen && rc == 0; s++) {
        struct plan_scenario_result *sr = &r->scen[s];
        struct sim_result *res = NULL;
        g->growth = sr->growth;
        rc = replay(w, g, r->t_begin_ms - seed_ms, seed_ms, h_ms, g->r->dt_ms, &res, &r->replay,
                    err, errlen);
        if (rc != 0)
            break;
        const struct sim_policy_result *pr = &res->pol[0];
        plan_curve_from_changes(pr, r->gpus_per_replica, sim_config_placeable(&w->sim),
                                r->t_begin_ms, m->step_ms, r->nsteps, sr->gpus, sr->gpus_max);
        sla_per_step(pr, r->sla_ms, w->sim.interval_ms, r->t_begin_ms, m->step_ms, r->nsteps,
                     sr->step_sla_minutes);
        requests_per_step(pr, w->sim.interval_ms, r->t_begin_ms, m->step_ms, r->nsteps,
                          sr->step_requests);
        sr->sla_minutes = 0;
        for (size_t i = 0; i < r->nsteps; i++) {
            sr->demand[i] = gen_smooth_mean(g, r->t_begin_ms + (int64_t)i * m->step_ms,
                                            m->step_ms);
            sr->sla_minutes += sr->step_sla_minutes[i];
        }
        sr->requests = pr->requests;
        sim_result_free(res);
    }
    return rc;
}

int plan_replay_run(const struct plan_config *cfg, const struct plan_workload *w,
                    const struct trace *h, const struct plan_model *m, struct plan_result *r,
                    char *err, size_t errlen)
{
    struct resid rs;
    resid_build(h, w->sim.scale, m, &rs);
    if (rs.n == 0) {
        snprintf(err, errlen, "too little history: no whole day with data at the trace's "
                              "resolution to take residuals from");
        return -EINVAL;
    }
    /* the forecaster's seed (whole days) plus the hour of warm-up */
    int64_t seed_days = plan_seed_days(&w->sim);
    struct gen g = {.m = m, .r = &rs, .nseed = (size_t)seed_days};
    resid_pick(&rs, g.map_scored, g.map_seed, g.nseed);
    for (size_t i = 0; i < PLAN_REP_DAYS; i++)
        r->replay.residual_days[i] = rs.day[g.map_scored[i]];
    r->replay.policy = w->policy;
    r->replay.mode = cfg->sim;
    int64_t seed_ms = w->policy == SIM_PREDICTIVE ? seed_days * PLAN_DAY_MS : 0;
    seed_ms += WARMUP_MS;
    int rc = cfg->sim == PLAN_SIM_DAY
                 ? replay_day(w, m, &g, seed_ms, r, err, errlen)
                 : replay_horizon(w, m, &g, seed_ms, r, err, errlen);
    resid_free(&rs);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* plan: one Deployment's plan from its history (plan_run), the total of
 * several (plan_total) and the backtest that holds out the last horizon.
 *
 * plan_run: history -> steps -> model (model.c) -> forecast band -> replay
 * of the policy per scenario (replay.c) -> GPU-hours, peaks, baseline and
 * the three commitments (cost.c). The horizon starts at the first step
 * boundary at or after the end of the history. */
#include "plan-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

#define Z90 1.2815515655446004 /* the normal's 90 % quantile */

/* "7d (7.0 days)", or "6.5 days" when not whole days. */
static void fmt_days(int64_t ms, char *out, size_t len)
{
    if (ms % PLAN_DAY_MS == 0)
        snprintf(out, len, "%lldd (%.1f days)", (long long)(ms / PLAN_DAY_MS),
                 (double)ms / (double)PLAN_DAY_MS);
    else
        snprintf(out, len, "%.1f days", (double)ms / (double)PLAN_DAY_MS);
}

/* Round GPUs up to whole replicas. */
static int64_t whole_replicas(double gpus, double G)
{
    if (!(G > 0))
        G = 1;
    return (int64_t)llround(ceil(gpus / G - 1e-9) * G);
}

void plan_result_finish(const struct plan_config *cfg, struct plan_result *r)
{
    plan_prices_resolve(cfg, &r->prices);
    r->margin = cfg->margin;
    r->baseline_share = cfg->baseline_share;
    r->rule_share = cfg->rule_share;
    double step_h = (double)r->step_ms / 3600e3;
    const double *curves[PLAN_MAX_SCENARIOS];
    double weights[PLAN_MAX_SCENARIOS];
    r->ref = 0;
    for (size_t s = 0; s < r->nscen; s++) {
        struct plan_scenario_result *sr = &r->scen[s];
        double hours = 0, peak = 0;
        for (size_t i = 0; i < r->nsteps; i++) {
            hours += sr->gpus[i] * step_h;
            peak = UTIL_MAX(peak, sr->gpus_max[i]);
        }
        sr->gpu_hours = hours;
        sr->peak_gpus = whole_replicas(peak, r->gpus_per_replica);
        sr->margin_gpus = whole_replicas((double)sr->peak_gpus * (1 + cfg->margin),
                                         r->gpus_per_replica);
        sr->baseline_gpus = plan_baseline(sr->gpus, r->nsteps, r->step_ms, cfg->baseline_share);
        curves[s] = sr->gpus;
        weights[s] = sr->weight;
        /* the scenario nearest no growth (x1 when listed), the lower on a tie:
         * not the first listed, which made `1.5,1.2` and `1.2,1.5` differ */
        double d = fabs(sr->growth - 1), dref = fabs(r->scen[r->ref].growth - 1);
        if (d < dref || (d == dref && sr->growth < r->scen[r->ref].growth))
            r->ref = s;
    }
    int64_t opt = plan_commit_optimal(&r->prices, curves, weights, r->nscen, r->nsteps, step_h,
                                      NULL);
    int64_t rule = (int64_t)floor(cfg->rule_share * (double)r->scen[r->ref].baseline_gpus + 1e-9);
    char name[40];
    plan_choice_eval(r, "cost-optimal", opt, &r->choice[PLAN_CHOICE_OPTIMAL]);
    snprintf(name, sizeof(name), "%.0f%% of baseline", cfg->rule_share * 100);
    plan_choice_eval(r, name, rule, &r->choice[PLAN_CHOICE_RULE]);
    plan_choice_eval(r, "none (all flexible)", 0, &r->choice[PLAN_CHOICE_NONE]);
}

static void alloc_scenarios(const struct plan_config *cfg, struct plan_result *r)
{
    r->nscen = cfg->nscenarios;
    for (size_t s = 0; s < r->nscen; s++) {
        struct plan_scenario_result *sr = &r->scen[s];
        sr->growth = cfg->scenarios[s].growth;
        sr->weight = cfg->scenarios[s].weight;
        sr->demand = xcalloc(r->nsteps, sizeof(double));
        sr->gpus = xcalloc(r->nsteps, sizeof(double));
        sr->gpus_max = xcalloc(r->nsteps, sizeof(double));
        sr->step_requests = xcalloc(r->nsteps, sizeof(double));
        sr->step_sla_minutes = xcalloc(r->nsteps, sizeof(double));
    }
}

/* Mean of the model's rate over a step with the log shifted by dz. */
static double step_rate(const struct plan_model *m, int64_t t, double dz)
{
    double sum = 0;
    for (int i = 0; i < 8; i++)
        sum += plan_model_rate(m, plan_model_z(m, t + (int64_t)((i + 0.5) * (double)m->step_ms /
                                                               8)) + dz);
    return sum / 8;
}

int plan_run(const struct plan_config *cfg, const struct plan_workload *w,
             const struct trace *h, struct plan_result **out, char *err, size_t errlen)
{
    struct plan_steps st = {0};
    struct plan_result *r = NULL;
    int rc;
    *out = NULL;
    if (!h || h->n == 0 || h->dt_ms <= 0 || h->dt_ms % 1000 != 0) {
        snprintf(err, errlen, "the history's buckets must be whole seconds");
        return -EINVAL;
    }
    int64_t span = (int64_t)h->n * h->dt_ms;
    if (span > PLAN_MAX_HISTORY_DAYS * PLAN_DAY_MS + h->dt_ms) {
        snprintf(err, errlen,
                 "the history spans %.1f days; a plan reads at most %d (a mistyped time?)",
                 (double)span / (double)PLAN_DAY_MS, PLAN_MAX_HISTORY_DAYS);
        return -EINVAL;
    }
    if ((double)cfg->horizon_ms > PLAN_MAX_HORIZON_RATIO * (double)span) {
        char a[64], b[64];
        fmt_days(cfg->horizon_ms, a, sizeof(a));
        fmt_days(span, b, sizeof(b));
        snprintf(err, errlen,
                 "horizon: %s is longer than the history, %s: a plan looks ahead at most as far "
                 "as its history reaches back (the trend is not extrapolated beyond the span it "
                 "was fitted on); give more history or a shorter horizon", a, b);
        return -EINVAL;
    }
    if ((rc = plan_steps_build(h, w->sim.scale, cfg->step_ms, &st, err, errlen)) != 0)
        return rc;
    r = xcalloc(1, sizeof(*r));
    r->name = xstrdup(w->name ? w->name : "");
    int64_t origin = h->t0_ms + span;
    rc = plan_model_fit(&st, cfg->season, cfg->trend, policy_rate_floor(&w->sim.policy), origin,
                        &r->model, err, errlen);
    if (rc != 0)
        goto out;
    const struct plan_model *m = &r->model;
    r->hist_t0_ms = h->t0_ms;
    r->hist_t1_ms = origin;
    r->hist_dt_ms = h->dt_ms;
    for (size_t i = 0; i < h->n; i++)
        if (!isnan(h->requests[i]))
            r->hist_requests += h->requests[i] * w->sim.scale;
    r->nhist = st.n;
    r->hist_rate = st.rate;
    r->hist_step0_ms = st.t0_ms;
    st.rate = NULL;
    r->step_ms = cfg->step_ms;
    r->t_begin_ms = util_floor_div(origin + cfg->step_ms - 1, cfg->step_ms) * cfg->step_ms;
    r->nsteps = (size_t)(cfg->horizon_ms / cfg->step_ms);
    r->gpus_per_replica = sim_config_gpus(&w->sim);
    r->min_replicas = w->sim.policy.min_replicas;
    r->max_replicas = w->sim.policy.max_replicas;
    r->sla_ms = sim_config_sla_ms(&w->sim);
    r->band_lo = xmalloc(r->nsteps * sizeof(double));
    r->band_mid = xmalloc(r->nsteps * sizeof(double));
    r->band_hi = xmalloc(r->nsteps * sizeof(double));
    for (size_t i = 0; i < r->nsteps; i++) {
        int64_t t = r->t_begin_ms + (int64_t)i * r->step_ms;
        double tau = (double)(t + r->step_ms / 2 - origin) / (double)PLAN_DAY_MS;
        /* the slope's uncertainty, carried as far as the slope itself is */
        double widen = m->slope != 0 ? Z90 * m->slope_se * fabs(plan_model_trend(m, tau) /
                                                                m->slope)
                                     : Z90 * m->slope_se * tau * m->damping;
        r->band_mid[i] = step_rate(m, t, 0);
        r->band_lo[i] = step_rate(m, t, m->resid_lo - widen);
        r->band_hi[i] = step_rate(m, t, m->resid_hi + widen);
    }
    alloc_scenarios(cfg, r);
    if ((rc = plan_replay_run(cfg, w, h, m, r, err, errlen)) != 0)
        goto out;
    plan_result_finish(cfg, r);
    *out = r;
    r = NULL;
out:
    plan_steps_free(&st);
    plan_result_free(r);
    return rc;
}

int plan_total(const struct plan_config *cfg, struct plan_result *const *parts, size_t n,
               struct plan_result **out, char *err, size_t errlen)
{
    /* the steps every plan covers: from the latest first step to the
     * earliest end (the plans' steps sit on one grid, cfg's step from 0) */
    int64_t b = INT64_MIN, e = INT64_MAX;
    size_t late = 0, early = 0;
    for (size_t p = 0; p < n; p++) {
        const struct plan_result *x = parts[p];
        int64_t end = x->t_begin_ms + (int64_t)x->nsteps * x->step_ms;
        if (x->step_ms != cfg->step_ms || x->t_begin_ms % cfg->step_ms != 0) {
            snprintf(err, errlen, "total: %s is not planned in steps of the config's",
                     x->name);
            return -EINVAL;
        }
        if (x->t_begin_ms > b) {
            b = x->t_begin_ms;
            late = p;
        }
        if (end < e) {
            e = end;
            early = p;
        }
    }
    if (n > 0 && e <= b) {
        snprintf(err, errlen,
                 "total: the plans share no hour: %s's horizon ends before %s's begins "
                 "(their histories end further apart than the horizon); plan them apart or "
                 "give histories that end together",
                 parts[early]->name, parts[late]->name);
        return -EINVAL;
    }
    struct plan_result *r = xcalloc(1, sizeof(*r));
    r->name = xstrdup("total");
    r->nparts = n;
    r->step_ms = cfg->step_ms;
    r->nsteps = n ? (size_t)((e - b) / cfg->step_ms) : 0;
    r->t_begin_ms = n ? b : 0;
    r->gpus_per_replica = 1;
    alloc_scenarios(cfg, r);
    for (size_t p = 0; p < n; p++) {
        const struct plan_result *x = parts[p];
        size_t off = (size_t)((b - x->t_begin_ms) / cfg->step_ms);
        r->hist_requests += x->hist_requests;
        r->min_replicas += x->min_replicas;
        r->max_replicas += x->max_replicas;
        r->replay.simulated_s += x->replay.simulated_s;
        r->replay.seeded_s += x->replay.seeded_s;
        for (size_t s = 0; s < r->nscen && s < x->nscen; s++) {
            struct plan_scenario_result *sr = &r->scen[s];
            const struct plan_scenario_result *xs = &x->scen[s];
            for (size_t i = 0; i < r->nsteps; i++) {
                sr->gpus[i] += xs->gpus[off + i];
                sr->gpus_max[i] += xs->gpus_max[off + i];
                sr->step_requests[i] += xs->step_requests[off + i];
                sr->step_sla_minutes[i] += xs->step_sla_minutes[off + i];
                sr->requests += xs->step_requests[off + i];
                sr->sla_minutes += xs->step_sla_minutes[off + i];
            }
        }
    }
    for (size_t s = 0; s < r->nscen; s++) {
        xfree(r->scen[s].demand);
        r->scen[s].demand = NULL; /* request rates of different services do not add */
    }
    plan_result_finish(cfg, r);
    *out = r;
    return 0;
}

void plan_result_free(struct plan_result *r)
{
    if (!r)
        return;
    xfree(r->name);
    plan_model_clear(&r->model);
    xfree(r->hist_rate);
    xfree(r->band_lo);
    xfree(r->band_mid);
    xfree(r->band_hi);
    for (size_t s = 0; s < r->nscen; s++) {
        xfree(r->scen[s].demand);
        xfree(r->scen[s].gpus);
        xfree(r->scen[s].gpus_max);
        xfree(r->scen[s].step_requests);
        xfree(r->scen[s].step_sla_minutes);
    }
    xfree(r);
}

/* ---- backtest ------------------------------------------------------------ */

int plan_backtest_window(const struct trace *h, int64_t horizon_ms, int64_t step_ms,
                         struct plan_window *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!h || h->n == 0 || h->dt_ms <= 0 || step_ms <= 0) {
        snprintf(err, errlen, "the history is empty");
        return -EINVAL;
    }
    int64_t span = (int64_t)h->n * h->dt_ms, t1 = h->t0_ms + span;
    int64_t c = util_floor_div(t1 - horizon_ms, step_ms) * step_ms;
    int64_t train = c > h->t0_ms ? (c - h->t0_ms) / h->dt_ms : 0;
    int64_t need = horizon_ms + (int64_t)((double)horizon_ms / PLAN_MAX_HORIZON_RATIO);
    if (train <= 0 ||
        (double)horizon_ms > PLAN_MAX_HORIZON_RATIO * (double)(train * h->dt_ms)) {
        char a[64], b[64], c2[64];
        fmt_days(horizon_ms, a, sizeof(a));
        fmt_days(need, b, sizeof(b));
        fmt_days(span, c2, sizeof(c2));
        snprintf(err, errlen,
                 "backtest: holding out the last %s leaves too little to plan from: the plan "
                 "needs as much history as its horizon, so the backtest needs at least %s and "
                 "the history is %s; give a shorter horizon", a, b, c2);
        return -EINVAL;
    }
    out->train_buckets = (size_t)train;
    out->test_begin_ms = c;
    out->test_offset_ms = c - h->t0_ms;
    out->test_ms = horizon_ms;
    return 0;
}

int plan_backtest(const struct plan_config *cfg, const struct plan_workload *w,
                  const struct trace *history, struct plan_backtest *out,
                  struct plan_result **plan, char *err, size_t errlen)
{
    struct plan_result *p = NULL;
    struct sim_result *res = NULL;
    double *a_mean = NULL, *a_max = NULL;
    struct trace full = *history;
    full.requests = NULL;
    memset(out, 0, sizeof(*out));
    *plan = NULL;
    int rc = plan_backtest_window(history, cfg->horizon_ms, cfg->step_ms, &out->win, err, errlen);
    if (rc != 0)
        return rc;
    struct trace train = *history;
    train.n = out->win.train_buckets;
    if ((rc = plan_run(cfg, w, &train, &p, err, errlen)) != 0)
        goto out;
    /* the held-out traffic, missing buckets as no traffic */
    full.requests = xmalloc(history->n * sizeof(double));
    int64_t test0 = out->win.test_offset_ms / history->dt_ms;
    for (size_t i = 0; i < history->n; i++) {
        bool miss = isnan(history->requests[i]);
        full.requests[i] = miss ? 0 : history->requests[i];
        if (miss && (int64_t)i >= test0)
            out->missing_buckets++;
    }
    struct sim_config sc = w->sim;
    sc.policies = 1u << w->policy;
    sc.start_ms = out->win.test_offset_ms;
    sc.duration_ms = cfg->horizon_ms;
    sc.warmup_ms = w->policy == SIM_PREDICTIVE
                       ? plan_seed_days(&w->sim) * PLAN_DAY_MS
                       : 3600 * 1000LL;
    sc.initial_replicas = 0;
    sc.forecast_seed = NULL;
    if ((rc = sim_run(&sc, &full, NULL, &res, err, errlen)) != 0)
        goto out;
    const struct sim_policy_result *pr = &res->pol[0];
    double G = p->gpus_per_replica, step_h = (double)cfg->step_ms / 3600e3;
    a_mean = xmalloc(p->nsteps * sizeof(double));
    a_max = xmalloc(p->nsteps * sizeof(double));
    int32_t placeable = sim_config_placeable(&w->sim);
    plan_curve_from_changes(pr, G, placeable, out->win.test_begin_ms, cfg->step_ms, p->nsteps,
                            a_mean, a_max);
    const struct plan_scenario_result *ref = &p->scen[p->ref];
    out->planned_gpu_hours = ref->gpu_hours;
    out->actual_gpu_hours = pr->gpu_hours;
    out->gpu_hours_error =
        pr->gpu_hours > 0 ? ref->gpu_hours / pr->gpu_hours - 1 : NAN;
    out->planned_requests = ref->requests;
    out->actual_requests = pr->requests;
    out->planned_peak = ref->peak_gpus;
    out->actual_peak = (int64_t)llround(UTIL_MIN(pr->peak_replicas, placeable) * G);
    out->planned_baseline = ref->baseline_gpus;
    out->actual_baseline = plan_baseline(a_mean, p->nsteps, cfg->step_ms, cfg->baseline_share);
    out->planned_sla_minutes = ref->sla_minutes;
    out->actual_sla_minutes = (double)pr->sla_intervals * (double)sc.interval_ms / 60000.0;
    double mape = 0;
    size_t nm = 0;
    for (size_t i = 0; i < p->nsteps; i++)
        if (a_mean[i] > 0) {
            mape += fabs(ref->gpus[i] - a_mean[i]) / a_mean[i];
            nm++;
        }
    out->step_mape = nm ? mape / (double)nm : NAN;
    out->reserved = p->choice[PLAN_CHOICE_OPTIMAL].reserved;
    out->cost_actual = plan_cost(&p->prices, a_mean, p->nsteps, step_h, out->reserved, NULL, NULL);
    const double *curves[1] = {a_mean};
    double one = 1;
    out->reserved_hindsight =
        plan_commit_optimal(&p->prices, curves, &one, 1, p->nsteps, step_h, &out->cost_hindsight);
    *plan = p;
    p = NULL;
out:
    plan_result_free(p);
    sim_result_free(res);
    xfree(full.requests);
    xfree(a_mean);
    xfree(a_max);
    return rc;
}

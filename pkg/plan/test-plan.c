/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the planner: the demand model on synthetic histories with
 * known seasonality and trend, the refusals (too little history, a horizon
 * beyond it), the backtest window, a backtest on a stationary history, the
 * representative-day replay against the whole-horizon replay, totals, and
 * the plan file parser with its errors. Histories are synthetic; nothing
 * outside the test is read. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "plan/plan-int.h"

#define DAY_S 86400

/* A history of `days` at dt_s buckets: rate = base x exp(slope t) x daily x
 * weekly x (1 + noise), daily = 1 + 0.5 cos(2 pi (hour - 15) / 24), weekly
 * = 0.8 on day index mod 7 in {5, 6}. Deterministic noise. */
static struct trace *synth(double days, int64_t dt_s, double base, double slope, bool weekly,
                           double noise, int64_t t0_s)
{
    struct trace *t = xcalloc(1, sizeof(*t));
    t->t0_ms = t0_s * 1000;
    t->dt_ms = dt_s * 1000;
    t->n = (size_t)(days * DAY_S / (double)dt_s);
    t->requests = xmalloc(t->n * sizeof(double));
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < t->n; i++) {
        double ts = (double)t0_s + (double)i * (double)dt_s + (double)dt_s / 2;
        double day = floor(ts / DAY_S), hour = fmod(ts, DAY_S) / 3600;
        double r = base * exp(slope * (ts - (double)t0_s) / DAY_S) *
                   (1 + 0.5 * cos(2 * M_PI * (hour - 15) / 24)) *
                   (weekly && ((int64_t)day % 7 == 5 || (int64_t)day % 7 == 6) ? 0.8 : 1);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0 - 0.5;
        t->requests[i] = r * (1 + 2 * noise * u) * (double)dt_s;
    }
    return t;
}

static void workload(struct plan_workload *w, enum sim_policy p)
{
    plan_workload_init(w);
    w->policy = p;
    w->sim.policy.capacity_rps_per_gpu = 5;
    w->sim.policy.gpus_per_replica = 2;
    w->sim.policy.service_time_ms = 2000;
    w->sim.policy.p99_latency_target_ms = 6000;
    w->sim.policy.min_replicas = 1;
    w->sim.policy.max_replicas = 500;
    char err[200];
    assert_int_equal(plan_workload_validate(w, err, sizeof(err)), 0);
}

/* ---- the model ----------------------------------------------------------- */

static void fit(const struct trace *t, enum plan_season season, enum plan_trend trend,
                int64_t step_ms, struct plan_model *m)
{
    struct plan_steps st;
    char err[300];
    assert_int_equal(plan_steps_build(t, 1, step_ms, &st, err, sizeof(err)), 0);
    int64_t origin = t->t0_ms + (int64_t)t->n * t->dt_ms;
    int rc = plan_model_fit(&st, season, trend, 1, origin, m, err, sizeof(err));
    if (rc != 0)
        fail_msg("fit: %s", err);
    plan_steps_free(&st);
}

/* Without noise the fit recovers the trend, the weekday levels and the
 * daily profile (all in log terms; the floor of 1 req/s bends the profile
 * by at most 1/base). */
static void test_model_recovers_known_components(void **state)
{
    (void)state;
    struct trace *t = synth(28, 600, 400, 0.01, true, 0, 0);
    struct plan_model m;
    fit(t, PLAN_SEASON_AUTO, PLAN_TREND_LINEAR, 3600 * 1000, &m);
    assert_int_equal(m.season, PLAN_SEASON_WEEKLY);
    assert_int_equal(m.whole_days, 28);
    assert_float_equal(m.slope, 0.01, 0.0005);
    assert_float_equal(m.slope_fit, 0.01, 0.0005);
    /* weekend offset: ln 0.8 against the weekdays, the mean of the seven at 0 */
    double wk = (m.week[0] + m.week[1] + m.week[2] + m.week[3] + m.week[4]) / 5;
    assert_float_equal(m.week[5] - wk, log(0.8), 0.01);
    assert_float_equal(m.week[6] - wk, log(0.8), 0.01);
    /* profile: peak at 15:00 (step 15), trough at 03:00, ln(1.5 / 0.5) apart */
    assert_float_equal(m.profile[15] - m.profile[3], log(1.5 / 0.5), 0.03);
    /* the level at the end of the history: base x e^(0.28) on a weekday, mean profile */
    double z = plan_model_z(&m, t->t0_ms + (int64_t)t->n * t->dt_ms + 15 * 3600 * 1000LL);
    assert_float_equal(exp(z), 400 * exp(0.01 * 28.625) * 1.5 + 1, 400 * 0.03);
    /* residuals are tiny */
    assert_true(m.resid_hi - m.resid_lo < 0.02);
    plan_model_clear(&m);
    trace_free(t);
}

/* The damped trend carries a significant slope forward, less and less;
 * the trend "none" carries nothing and refits the level as the median day. */
static void test_trend_modes(void **state)
{
    (void)state;
    struct trace *t = synth(21, 600, 400, 0.02, false, 0.02, 0);
    struct plan_model lin, damp, none;
    fit(t, PLAN_SEASON_DAILY, PLAN_TREND_LINEAR, 3600 * 1000, &lin);
    fit(t, PLAN_SEASON_DAILY, PLAN_TREND_DAMPED, 3600 * 1000, &damp);
    fit(t, PLAN_SEASON_DAILY, PLAN_TREND_NONE, 3600 * 1000, &none);
    assert_float_equal(lin.slope, 0.02, 0.001);
    /* clearly significant: barely shrunk */
    assert_true(damp.slope > 0.9 * lin.slope && damp.slope <= lin.slope);
    assert_float_equal(none.slope, 0, 0);
    /* 30 days ahead: linear 30 b, damped b phi (1 - phi^30) / (1 - phi) < 9 b */
    assert_float_equal(plan_model_trend(&lin, 30), 30 * lin.slope, 1e-9);
    double phi = PLAN_TREND_DAMPING;
    assert_float_equal(plan_model_trend(&damp, 30),
                       damp.slope * phi * (1 - pow(phi, 30)) / (1 - phi), 1e-9);
    assert_true(plan_model_trend(&damp, 1000) < damp.slope * phi / (1 - phi) + 1e-9);
    assert_float_equal(plan_model_trend(&none, 30), 0, 0);
    /* the past is fitted linearly in every mode */
    assert_float_equal(plan_model_trend(&damp, -3), -3 * damp.slope, 1e-12);
    /* no trend: the level is the median day's, 10 days back on a 2 %/day ramp */
    assert_float_equal(none.level, lin.level - 0.02 * 10.5, 0.03);
    plan_model_clear(&lin);
    plan_model_clear(&damp);
    plan_model_clear(&none);
    trace_free(t);
}

/* A slope inside its noise is not carried forward by the damped trend. */
static void test_insignificant_trend_is_dropped(void **state)
{
    (void)state;
    /* day-to-day levels that wander +-15 % without a trend */
    struct trace *t = synth(7, 600, 400, 0, false, 0.01, 0);
    static const double lv[7] = {1.0, 0.88, 1.12, 1.15, 0.9, 1.1, 1.02};
    for (size_t i = 0; i < t->n; i++)
        t->requests[i] *= lv[(i * 600) / DAY_S];
    struct plan_model m;
    fit(t, PLAN_SEASON_DAILY, PLAN_TREND_DAMPED, 3600 * 1000, &m);
    assert_true(fabs(m.slope_fit) > 0);
    assert_true(fabs(m.slope_fit) < 2 * m.slope_se);
    assert_float_equal(m.slope, 0, 0);
    plan_model_clear(&m);
    trace_free(t);
}

/* An outage (two days at zero) does not drag the level down: medians. */
static void test_outage_does_not_bend_the_level(void **state)
{
    (void)state;
    struct trace *t = synth(21, 600, 400, 0, false, 0.02, 0);
    struct plan_model clean, hit;
    fit(t, PLAN_SEASON_DAILY, PLAN_TREND_DAMPED, 3600 * 1000, &clean);
    for (size_t i = 10 * DAY_S / 600; i < 12 * DAY_S / 600; i++)
        t->requests[i] = 0;
    fit(t, PLAN_SEASON_DAILY, PLAN_TREND_DAMPED, 3600 * 1000, &hit);
    assert_float_equal(hit.level, clean.level, 0.02);
    assert_float_equal(hit.slope, 0, 0.002);
    plan_model_clear(&clean);
    plan_model_clear(&hit);
    trace_free(t);
}

/* Steps average the buckets they cover; missing buckets (NAN) are skipped
 * and a step with less than half its time covered is missing. */
static void test_steps(void **state)
{
    (void)state;
    double req[12] = {600, 600, 600, 1200, 1200, 1200, NAN, NAN, NAN, NAN, 60, 60};
    struct trace t = {.t0_ms = 0, .dt_ms = 600 * 1000, .n = 12, .requests = req};
    struct plan_steps st;
    char err[200];
    assert_int_equal(plan_steps_build(&t, 2, 3600 * 1000, &st, err, sizeof(err)), 0);
    assert_int_equal(st.n, 2);
    assert_float_equal(st.rate[0], 3, 1e-12); /* (3 x 600 + 3 x 1200) x 2 / 3600 s */
    assert_true(isnan(st.rate[1]));            /* 2 of 6 buckets: under half */
    plan_steps_free(&st);
    req[6] = req[7] = 60;
    assert_int_equal(plan_steps_build(&t, 1, 3600 * 1000, &st, err, sizeof(err)), 0);
    assert_float_equal(st.rate[1], 0.1, 1e-12);
    plan_steps_free(&st);
    /* a step finer than the buckets is refused */
    assert_int_equal(plan_steps_build(&t, 1, 300 * 1000, &st, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "finer than the history's 10m buckets"));
}

/* A mistyped time years ahead (30 days of data, then one day ~485 years on)
 * left the history spanning 177,000 days: the slope's buffer was sized by
 * their square (125 GB, an abort), not by the 31 days with data. */
static void test_model_sized_by_days_with_data(void **state)
{
    (void)state;
    struct plan_steps st = {.t0_ms = 0, .step_ms = DAY_S * 1000LL, .n = 177000};
    st.rate = xmalloc(st.n * sizeof(double));
    for (size_t k = 0; k < st.n; k++)
        st.rate[k] = k < 30 ? 100 + (double)k : NAN;
    st.rate[st.n - 1] = 130;
    struct plan_model m;
    char err[300];
    int64_t origin = (int64_t)st.n * st.step_ms;
    assert_int_equal(plan_model_fit(&st, PLAN_SEASON_DAILY, PLAN_TREND_LINEAR, 1, origin, &m, err,
                                    sizeof(err)),
                     0);
    assert_int_equal(m.whole_days, 31);
    assert_int_equal(m.steps_used, 31);
    assert_true(isfinite(m.slope) && isfinite(m.level));
    plan_model_clear(&m);
    plan_steps_free(&st);
}

/* ---- refusals -------------------------------------------------------------- */

static void expect_refusal(const struct plan_config *c, const struct trace *t, const char *what)
{
    struct plan_workload w;
    struct plan_result *r = NULL;
    char err[400] = "";
    workload(&w, SIM_REACTIVE);
    assert_int_equal(plan_run(c, &w, t, &r, err, sizeof(err)), -EINVAL);
    assert_null(r);
    if (!strstr(err, what))
        fail_msg("'%s' lacks '%s'", err, what);
    plan_workload_clear(&w);
}

static void test_refusals(void **state)
{
    (void)state;
    struct plan_config c;
    plan_config_init(&c);
    c.horizon_ms = 2 * DAY_S * 1000LL;
    /* 2.5 days: daily seasonality needs 3 whole days, and says so */
    struct trace *t = synth(2.5, 600, 100, 0, false, 0.02, 0);
    expect_refusal(&c, t, "daily seasonality needs 3 whole days");
    expect_refusal(&c, t, "has 2 (2.5 days)");
    trace_free(t);
    /* weekly asked for with 10 days */
    t = synth(10, 600, 100, 0, false, 0.02, 0);
    c.season = PLAN_SEASON_WEEKLY;
    expect_refusal(&c, t, "weekly seasonality needs 14 whole days");
    c.season = PLAN_SEASON_AUTO;
    /* a horizon beyond the history */
    c.horizon_ms = 11 * DAY_S * 1000LL;
    expect_refusal(&c, t, "horizon: 11d (11.0 days) is longer than the history, 10d (10.0 days)");
    /* a step finer than the buckets */
    c.horizon_ms = 7 * DAY_S * 1000LL;
    c.step_ms = 5 * 60 * 1000;
    expect_refusal(&c, t, "step: 5m is finer than the history's 10m buckets");
    trace_free(t);
    /* buckets coarser than any step: say so (it told to raise the step, which
     * the step's range then refused) */
    c.step_ms = 3600 * 1000;
    t = synth(10, 7200, 100, 0, false, 0.02, 0);
    expect_refusal(&c, t, "the history's 2h buckets are coarser than the coarsest step, 1h: a "
                          "plan needs buckets of 1h or finer");
    trace_free(t);
    /* a history longer than a plan reads (the trace reader refuses its row first) */
    c.step_ms = 3600 * 1000;
    t = synth(10, 600, 100, 0, false, 0.02, 0);
    t->dt_ms = 1000LL * DAY_S;
    t->n = 402;
    expect_refusal(&c, t, "the history spans 402.0 days; a plan reads at most 400");
    t->n = 10;
    trace_free(t);
    /* a horizon that is not whole steps */
    char err[200];
    plan_config_init(&c);
    assert_int_equal(plan_config_set(&c, "horizon", "1d30m", err, sizeof(err)), 0);
    assert_int_equal(plan_config_validate(&c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "whole number of steps"));
    assert_int_equal(plan_config_set(&c, "step", "7m", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "does not divide 1h"));
}

/* ---- backtest windows ---------------------------------------------------- */

static void test_backtest_window(void **state)
{
    (void)state;
    struct plan_window win;
    char err[400];
    /* 14 days from t = 0 at 10 s, hold out 7 d: the split is at day 7 exactly */
    struct trace t = {.t0_ms = 0, .dt_ms = 10000, .n = 14 * 8640};
    assert_int_equal(plan_backtest_window(&t, 7 * DAY_S * 1000LL, 3600000, &win, err,
                                          sizeof(err)), 0);
    assert_int_equal(win.train_buckets, 7 * 8640);
    assert_int_equal(win.test_begin_ms, 7 * DAY_S * 1000LL);
    assert_int_equal(win.test_offset_ms, 7 * DAY_S * 1000LL);
    assert_int_equal(win.test_ms, 7 * DAY_S * 1000LL);
    /* a trace starting off the grid and ending mid-hour: the split is the
     * last step boundary leaving a whole horizon, the plan sees only buckets
     * that end by it */
    t.t0_ms = 1234567;    /* 20m34.567s */
    t.n = 14 * 8640 + 500; /* ends 5000 s past the 14th day */
    assert_int_equal(plan_backtest_window(&t, 7 * DAY_S * 1000LL, 3600000, &win, err,
                                          sizeof(err)), 0);
    int64_t t1 = t.t0_ms + (int64_t)t.n * t.dt_ms;
    assert_int_equal(win.test_begin_ms % 3600000, 0);
    assert_true(win.test_begin_ms + win.test_ms <= t1);
    assert_true(win.test_begin_ms + win.test_ms + 3600000 > t1);
    assert_true(t.t0_ms + (int64_t)win.train_buckets * t.dt_ms <= win.test_begin_ms);
    assert_true(t.t0_ms + (int64_t)(win.train_buckets + 1) * t.dt_ms > win.test_begin_ms);
    assert_int_equal(win.test_offset_ms, win.test_begin_ms - t.t0_ms);
    /* too little left to plan from: says how much the backtest needs */
    t.t0_ms = 0;
    t.n = 10 * 8640;
    assert_int_equal(plan_backtest_window(&t, 7 * DAY_S * 1000LL, 3600000, &win, err,
                                          sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "needs at least 14d (14.0 days)"));
    assert_non_null(strstr(err, "history is 10d (10.0 days)"));
    t.n = 5000;
    assert_int_equal(plan_backtest_window(&t, 7 * DAY_S * 1000LL, 3600000, &win, err,
                                          sizeof(err)), -EINVAL);
}

/* On a stationary history the plan from the first half matches what the
 * policy needs on the second within a few percent. */
static void test_backtest_stationary(void **state)
{
    (void)state;
    struct trace *t = synth(8, 60, 300, 0, false, 0.05, 0);
    struct plan_config c;
    struct plan_workload w;
    struct plan_backtest bt;
    struct plan_result *p = NULL;
    char err[400];
    plan_config_init(&c);
    c.horizon_ms = 4 * DAY_S * 1000LL;
    c.nscenarios = 1;
    c.scenarios[0] = (struct plan_scenario){1, 1};
    workload(&w, SIM_REACTIVE);
    int rc = plan_backtest(&c, &w, t, &bt, &p, err, sizeof(err));
    if (rc != 0)
        fail_msg("backtest: %s", err);
    assert_int_equal(bt.win.train_buckets, 4 * 1440);
    assert_int_equal(bt.win.test_begin_ms, 4 * DAY_S * 1000LL);
    assert_int_equal(p->t_begin_ms, bt.win.test_begin_ms);
    assert_int_equal(p->nsteps, 96);
    assert_true(bt.actual_gpu_hours > 0);
    print_message("planned %.1f actual %.1f GPU-hours (%+.1f%%), requests %.4g / %.4g\n",
                  bt.planned_gpu_hours, bt.actual_gpu_hours, bt.gpu_hours_error * 100,
                  bt.planned_requests, bt.actual_requests);
    assert_true(fabs(bt.gpu_hours_error) < 0.05);
    assert_float_equal(bt.planned_requests / bt.actual_requests, 1, 0.03);
    assert_true(bt.cost_actual >= bt.cost_hindsight - 1e-6);
    assert_int_equal(bt.missing_buckets, 0);
    plan_result_free(p);
    plan_workload_clear(&w);
    trace_free(t);
}

/* ---- the replay ------------------------------------------------------------ */

/* The representative days scaled to the horizon agree with replaying the
 * whole horizon, and growth raises GPUs where it should: at the end. */
static void test_day_replay_matches_horizon_replay(void **state)
{
    (void)state;
    struct trace *t = synth(7, 60, 250, 0, false, 0.08, 0);
    struct plan_config c;
    struct plan_workload w;
    struct plan_result *day = NULL, *hor = NULL;
    char err[400];
    plan_config_init(&c);
    c.horizon_ms = 3 * DAY_S * 1000LL;
    c.nscenarios = 2;
    c.scenarios[0] = (struct plan_scenario){1, 0.5};
    c.scenarios[1] = (struct plan_scenario){2, 0.5};
    workload(&w, SIM_PREDICTIVE);
    assert_int_equal(plan_run(&c, &w, t, &day, err, sizeof(err)), 0);
    c.sim = PLAN_SIM_HORIZON;
    assert_int_equal(plan_run(&c, &w, t, &hor, err, sizeof(err)), 0);
    for (size_t s = 0; s < 2; s++) {
        print_message("x%g: day %.1f, horizon %.1f GPU-hours; peak %lld / %lld\n",
                      day->scen[s].growth, day->scen[s].gpu_hours, hor->scen[s].gpu_hours,
                      (long long)day->scen[s].peak_gpus, (long long)hor->scen[s].peak_gpus);
        assert_float_equal(day->scen[s].gpu_hours / hor->scen[s].gpu_hours, 1, 0.05);
        assert_float_equal(day->scen[s].requests / hor->scen[s].requests, 1, 0.03);
    }
    /* x2 at the end: the last day needs about twice the first day's GPUs
     * more than x1 does (the ramp is linear over the horizon) */
    double first = 0, last = 0, first1 = 0, last1 = 0;
    for (size_t i = 0; i < 24; i++) {
        first += day->scen[1].gpus[i];
        last += day->scen[1].gpus[day->nsteps - 24 + i];
        first1 += day->scen[0].gpus[i];
        last1 += day->scen[0].gpus[day->nsteps - 24 + i];
    }
    assert_float_equal(first / first1, 1 + 1.0 / 6, 0.05);      /* mid-day 1: 1 + 1/6 */
    assert_float_equal(last / last1, 1 + 5.0 / 6, 0.08);        /* mid-day 3: 1 + 5/6 */
    assert_true(day->scen[1].peak_gpus > day->scen[0].peak_gpus);
    assert_true(day->scen[1].margin_gpus >= day->scen[1].peak_gpus * 1.2);
    assert_int_equal(day->scen[1].margin_gpus % 2, 0); /* whole 2-GPU replicas */
    /* the plan's own choices are consistent */
    const struct plan_choice *o = &day->choice[PLAN_CHOICE_OPTIMAL];
    for (int k = 0; k < PLAN_NCHOICES; k++)
        assert_true(o->expected_cost <= day->choice[k].expected_cost + 1e-6);
    assert_int_equal(day->choice[PLAN_CHOICE_NONE].reserved, 0);
    assert_int_equal(day->choice[PLAN_CHOICE_RULE].reserved,
                     (int64_t)floor(0.7 * (double)day->scen[0].baseline_gpus + 1e-9));
    plan_result_free(day);
    plan_result_free(hor);
    plan_workload_clear(&w);
    trace_free(t);
}

/* A growth scenario multiplies the demand, as planning.md says, even where
 * the rate is small next to the model's floor (one GPU's rate, 4 req/s here):
 * growth applied in z = ln(rate + floor) grew the floor too, and a history of
 * 1 req/s at x2 came out at 3.5x. Linear from 1 to g over the horizon: the
 * requests are about (1 + g) / 2 times x1's. */
static void test_growth_multiplies_the_demand(void **state)
{
    (void)state;
    struct trace *t = synth(7, 60, 1, 0, false, 0, 0);
    struct plan_config c;
    struct plan_workload w;
    struct plan_result *r = NULL;
    char err[400];
    plan_config_init(&c);
    c.horizon_ms = 2 * DAY_S * 1000LL;
    c.sim = PLAN_SIM_HORIZON;
    c.nscenarios = 2;
    c.scenarios[0] = (struct plan_scenario){1, 0.5};
    c.scenarios[1] = (struct plan_scenario){2, 0.5};
    workload(&w, SIM_REACTIVE);
    assert_int_equal(plan_run(&c, &w, t, &r, err, sizeof(err)), 0);
    double ratio = r->scen[1].requests / r->scen[0].requests;
    print_message("x2 / x1 requests: %.4f\n", ratio);
    assert_true(r->scen[0].requests > 0);
    assert_float_equal(ratio, 1.5, 0.03);
    plan_result_free(r);
    plan_workload_clear(&w);
    trace_free(t);
}

/* The predictive replay seeds its forecaster with the history it uses, in
 * whole days: 8 for a daily season (the recent seasons' plan's 7 days and
 * its level), two seasons for a longer one; the other policies need none. */
static void test_seed_days(void **state)
{
    (void)state;
    const int64_t H = 3600 * 1000LL;
    const struct {
        int64_t season_ms, days;
    } cases[] = {
        {24 * H, 8},  /* 7 days and 30 min */
        {12 * H, 4},  /* 7 seasons of 12 h and 30 min: 3.52 days */
        {1 * H, 1},   /* 7.5 hours */
        {96 * H, 8},  /* too long for the recent seasons' plan: two seasons */
        {100 * H, 9}, /* 200 hours */
        {168 * H, 14},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sim_config sc;
        sim_config_init(&sc);
        sc.policy.seasonality_ms = cases[i].season_ms;
        assert_int_equal(plan_seed_days(&sc), cases[i].days);
    }
    struct trace *t = synth(4, 60, 250, 0, false, 0.08, 0);
    struct plan_config c;
    struct plan_workload w;
    struct plan_result *r = NULL;
    char err[400];
    plan_config_init(&c);
    c.horizon_ms = 2 * DAY_S * 1000LL;
    workload(&w, SIM_PREDICTIVE);
    assert_int_equal(plan_run(&c, &w, t, &r, err, sizeof(err)), 0);
    /* more seed than history: the seed's days repeat the history's */
    assert_float_equal(r->replay.seeded_s, 8.0 * DAY_S, 0);
    plan_result_free(r);
    c.sim = PLAN_SIM_HORIZON; /* a seed per scenario */
    assert_int_equal(plan_run(&c, &w, t, &r, err, sizeof(err)), 0);
    assert_float_equal(r->replay.seeded_s, 8.0 * DAY_S * (double)r->nscen, 0);
    plan_result_free(r);
    plan_workload_clear(&w);
    workload(&w, SIM_REACTIVE);
    c.sim = PLAN_SIM_DAY;
    assert_int_equal(plan_run(&c, &w, t, &r, err, sizeof(err)), 0);
    assert_float_equal(r->replay.seeded_s, 0, 0);
    plan_result_free(r);
    plan_workload_clear(&w);
    trace_free(t);
}

/* A history's replay does not depend on where its clock starts: moved by
 * whole weeks to before 0 (t_seconds may be negative), it plans the same.
 * The predictive replay seeds its forecaster with the history's times, and
 * the forecaster refuses times before 0: such a replay ran unseeded
 * (667.68 vs 668.44 GPU-hours for a history moved back 150 weeks). */
static void test_replay_of_a_history_before_0(void **state)
{
    (void)state;
    const int64_t WEEK_MS = 7LL * DAY_S * 1000;
    struct trace *t = synth(9, 60, 250, 0, true, 0.08, 0);
    struct trace moved = *t;
    struct plan_config c;
    struct plan_workload w;
    char err[400];
    plan_config_init(&c);
    c.horizon_ms = 2 * DAY_S * 1000LL;
    workload(&w, SIM_PREDICTIVE);
    for (int sim = 0; sim < 2; sim++) {
        c.sim = sim ? PLAN_SIM_HORIZON : PLAN_SIM_DAY;
        struct plan_result *a = NULL, *b = NULL;
        moved.t0_ms = t->t0_ms + 3 * WEEK_MS; /* after 0 either way */
        assert_int_equal(plan_run(&c, &w, &moved, &a, err, sizeof(err)), 0);
        /* back 150 weeks: its seed (and the scored days) lie before 0 */
        moved.t0_ms = t->t0_ms - 150 * WEEK_MS;
        assert_int_equal(plan_run(&c, &w, &moved, &b, err, sizeof(err)), 0);
        assert_true(a->replay.seeded_s > 0);
        assert_float_equal(a->replay.seeded_s, b->replay.seeded_s, 0);
        assert_int_equal(a->nscen, b->nscen);
        for (size_t s = 0; s < a->nscen; s++) {
            print_message("%s x%g: %.2f / %.2f GPU-hours\n", sim ? "horizon" : "day",
                          a->scen[s].growth, a->scen[s].gpu_hours, b->scen[s].gpu_hours);
            assert_float_equal(a->scen[s].gpu_hours, b->scen[s].gpu_hours,
                               1e-9 * a->scen[s].gpu_hours);
            assert_float_equal(a->scen[s].requests, b->scen[s].requests,
                               1e-9 * a->scen[s].requests);
            assert_float_equal(a->scen[s].sla_minutes, b->scen[s].sla_minutes, 1e-9);
            assert_int_equal(a->scen[s].peak_gpus, b->scen[s].peak_gpus);
            for (size_t i = 0; i < a->nsteps; i++)
                assert_float_equal(a->scen[s].gpus[i], b->scen[s].gpus[i], 1e-9);
        }
        plan_result_free(a);
        plan_result_free(b);
    }
    plan_workload_clear(&w);
    trace_free(t);
}

/* The total adds the curves step by step; one pool reserves at most what
 * the Deployments would reserve apart, and pays no more. */
static void test_total(void **state)
{
    (void)state;
    struct trace *a = synth(6, 300, 200, 0, false, 0.05, 0);
    struct trace *b = synth(6, 300, 120, 0, false, 0.05, 0);
    struct plan_config c;
    struct plan_workload wa, wb;
    struct plan_result *r[2];
    char err[400];
    plan_config_init(&c);
    c.horizon_ms = 3 * DAY_S * 1000LL;
    workload(&wa, SIM_HPA);
    workload(&wb, SIM_REACTIVE);
    assert_int_equal(plan_run(&c, &wa, a, &r[0], err, sizeof(err)), 0);
    assert_int_equal(plan_run(&c, &wb, b, &r[1], err, sizeof(err)), 0);
    struct plan_result *t = NULL;
    assert_int_equal(plan_total(&c, r, 2, &t, err, sizeof(err)), 0);
    assert_int_equal(t->nparts, 2);
    assert_int_equal(t->nsteps, r[0]->nsteps);
    for (size_t s = 0; s < t->nscen; s++) {
        assert_float_equal(t->scen[s].gpu_hours, r[0]->scen[s].gpu_hours + r[1]->scen[s].gpu_hours,
                           1e-6);
        assert_true(t->scen[s].peak_gpus <= r[0]->scen[s].peak_gpus + r[1]->scen[s].peak_gpus);
        assert_true(t->scen[s].baseline_gpus >=
                    r[0]->scen[s].baseline_gpus + r[1]->scen[s].baseline_gpus);
        assert_null(t->scen[s].demand);
    }
    double apart = r[0]->choice[0].expected_cost + r[1]->choice[0].expected_cost;
    assert_true(t->choice[PLAN_CHOICE_OPTIMAL].expected_cost <= apart + 1e-6);
    struct util_buf out = {0};
    plan_report_table(&out, &c, NULL, NULL, t);
    assert_non_null(strstr(out.data, "total of 2 Deployments"));
    plan_result_free(t);
    plan_result_free(r[0]);
    plan_result_free(r[1]);
    util_buf_free(&out);
    plan_workload_clear(&wa);
    plan_workload_clear(&wb);
    trace_free(a);
    trace_free(b);
}

/* Histories that end 12 h apart: the total adds the steps of the same clock
 * time over the 2.5 days both plans cover (it added step i to step i, one
 * service's daily peak to the other's trough: a pool peak of about 2/3 of
 * the real one). A history ending past the other's horizon shares no step:
 * refused. */
static void test_total_by_clock_time(void **state)
{
    (void)state;
    struct trace *a = synth(6, 300, 200, 0, false, 0.05, 0);
    struct trace *b = synth(6, 300, 200, 0, false, 0.05, 12 * 3600);
    struct trace *late = synth(6, 300, 200, 0, false, 0.05, 4 * DAY_S);
    struct plan_config c;
    struct plan_workload w;
    struct plan_result *r[3], *t = NULL;
    char err[400];
    plan_config_init(&c);
    c.horizon_ms = 3 * DAY_S * 1000LL;
    workload(&w, SIM_HPA);
    assert_int_equal(plan_run(&c, &w, a, &r[0], err, sizeof(err)), 0);
    assert_int_equal(plan_run(&c, &w, b, &r[1], err, sizeof(err)), 0);
    assert_int_equal(plan_run(&c, &w, late, &r[2], err, sizeof(err)), 0);
    assert_int_equal(r[1]->t_begin_ms - r[0]->t_begin_ms, 12 * 3600 * 1000LL);
    assert_int_equal(plan_total(&c, r, 2, &t, err, sizeof(err)), 0);
    size_t off = (size_t)(12 * 3600 * 1000LL / c.step_ms);
    assert_int_equal(t->t_begin_ms, r[1]->t_begin_ms);
    assert_int_equal(t->nsteps, r[0]->nsteps - off);
    double sum = 0, by_index = 0;
    for (size_t i = 0; i < t->nsteps; i++) {
        assert_float_equal(t->scen[0].gpus[i], r[0]->scen[0].gpus[i + off] + r[1]->scen[0].gpus[i],
                           1e-9);
        sum += r[0]->scen[0].step_requests[i + off] + r[1]->scen[0].step_requests[i];
        by_index = UTIL_MAX(by_index, r[0]->scen[0].gpus_max[i] + r[1]->scen[0].gpus_max[i]);
    }
    assert_float_equal(t->scen[0].requests, sum, 1e-6 * sum);
    /* the same traffic by the clock: the peaks coincide */
    assert_true((double)t->scen[0].peak_gpus >= 0.9 * (double)(r[0]->scen[0].peak_gpus +
                                                               r[1]->scen[0].peak_gpus));
    assert_true((double)t->scen[0].peak_gpus > 1.2 * by_index);
    struct util_buf out = {0};
    plan_report_table(&out, &c, NULL, NULL, t);
    if (!strstr(out.data, "horizon   60h from"))
        fail_msg("%s", out.data);
    assert_non_null(strstr(out.data, "the histories end at different times"));
    util_buf_free(&out);
    plan_result_free(t);
    t = NULL;
    struct plan_result *apart[2] = {r[0], r[2]};
    assert_int_equal(plan_total(&c, apart, 2, &t, err, sizeof(err)), -EINVAL);
    assert_null(t);
    assert_non_null(strstr(err, "the plans share no hour"));
    for (size_t i = 0; i < 3; i++)
        plan_result_free(r[i]);
    plan_workload_clear(&w);
    trace_free(a);
    trace_free(b);
    trace_free(late);
}

/* The reference scenario (the rule of thumb's, the backtest's) is the
 * growth nearest 1, the lower on a tie, whatever the list's order (it was
 * the first listed when x1 was not: 1.5,1.2 and 1.2,1.5 planned apart). */
static void test_reference_scenario(void **state)
{
    (void)state;
    struct trace *t = synth(4, 300, 200, 0, false, 0.05, 0);
    struct plan_workload w;
    workload(&w, SIM_HPA);
    static const double lists[][3] = {{1.5, 1.2, 2}, {1.2, 1.5, 2}, {2, 0.8, 1.2}, {3, 1, 0.9}};
    static const double want[] = {1.2, 1.2, 0.8, 1};
    for (size_t k = 0; k < UTIL_ARRAY_LEN(lists); k++) {
        struct plan_config c;
        struct plan_result *r = NULL;
        char err[400];
        plan_config_init(&c);
        c.horizon_ms = DAY_S * 1000LL;
        c.nscenarios = 3;
        for (size_t s = 0; s < 3; s++)
            c.scenarios[s] = (struct plan_scenario){lists[k][s], 1.0 / 3};
        assert_int_equal(plan_run(&c, &w, t, &r, err, sizeof(err)), 0);
        assert_float_equal(r->scen[r->ref].growth, want[k], 0);
        int64_t rule = (int64_t)floor(c.rule_share * (double)r->scen[r->ref].baseline_gpus + 1e-9);
        assert_int_equal(r->choice[PLAN_CHOICE_RULE].reserved, rule);
        plan_result_free(r);
    }
    plan_workload_clear(&w);
    trace_free(t);
}

/* Same inputs, byte-identical reports. */
static void test_deterministic_reports(void **state)
{
    (void)state;
    struct trace *t = synth(4, 60, 150, 0, false, 0.1, 0);
    struct plan_config c;
    struct plan_workload w;
    plan_config_init(&c);
    c.horizon_ms = 2 * DAY_S * 1000LL;
    workload(&w, SIM_PREDICTIVE);
    struct util_buf out[2] = {{0}, {0}};
    for (int i = 0; i < 2; i++) {
        struct plan_result *r = NULL;
        char err[400];
        assert_int_equal(plan_run(&c, &w, t, &r, err, sizeof(err)), 0);
        struct plan_report_info info = {.source = "synthetic"};
        const struct plan_workload *wp = &w;
        plan_report_table(&out[i], &c, &w, &info, r);
        plan_report_json(&out[i], &c, &wp, &info, &r, 1, NULL, NULL);
        plan_report_svg(&out[i], &c, &r, 1, NULL);
        plan_result_free(r);
    }
    assert_int_equal(out[0].len, out[1].len);
    assert_memory_equal(out[0].data, out[1].data, out[0].len);
    assert_non_null(strstr(out[0].data, "\"recommended_reserved_gpus\":"));
    assert_non_null(strstr(out[0].data, "<svg"));
    util_buf_free(&out[0]);
    util_buf_free(&out[1]);
    plan_workload_clear(&w);
    trace_free(t);
}

/* ---- the plan file --------------------------------------------------------- */

static void test_plan_file(void **state)
{
    (void)state;
    static const char ok[] = "horizon: 14d\n"
                             "growth: [1.0, 1.3]\n"
                             "price-reserved: 35%\n"
                             "capacity-per-gpu: 5\n"
                             "p99-latency-target: 6s\n"
                             "prometheus: http://prom:9090\n"
                             "deployments:\n"
                             "  - name: chat\n"
                             "    trace: chat.csv\n"
                             "    gpus-per-replica: 2\n"
                             "  - name: embed\n"
                             "    query: sum(rate(x[5m]))\n"
                             "    policy: hpa\n";
    struct plan_file f;
    struct plan_error e;
    assert_int_equal(plan_file_parse(ok, strlen(ok), &f, &e), 0);
    assert_true(f.has_deployments);
    assert_int_equal(f.ndeployments, 2);
    assert_string_equal(f.deployments[1].name, "embed");
    assert_int_equal(f.top.n, 6);
    assert_string_equal(f.top.v[1].key, "growth");
    assert_string_equal(f.top.v[1].value, "1.0,1.3");
    assert_int_equal(f.top.v[1].line, 2);
    assert_int_equal(f.deployments[0].n, 3);
    assert_int_equal(f.deployments[1].line, 11);
    plan_file_clear(&f);
    plan_file_clear(&f); /* twice is harmless */

    static const struct {
        const char *yaml;
        int line;
        const char *msg;
    } bad[] = {
        {"horizon: 14d\nbogus: 1\n", 2, "unknown key 'bogus'"},
        {"horizon: soon\n", 1, "horizon: 'soon' is not a duration"},
        {"growth: [1, {a: 1}]\n", 1, "growth: expected a value"},
        {"price-reserved: 1.2\nprice-on-demand: 0\n", 2, "price-on-demand: 0 is out of range"},
        {"deployments:\n  - name: a\n    trace: a.csv\n    horizon: 3d\n", 4,
         "horizon: a plan-wide key; set it at the top level"},
        {"deployments:\n  - name: a\n    trace: a.csv\n  - name: a\n    trace: b.csv\n", 4,
         "name 'a' is used twice"},
        {"deployments:\n  - name: a\n", 2, "needs a trace or a query"},
        {"deployments:\n  - trace: a.csv\n", 2, "no name"},
        {"deployments:\n  - name: a\n    trace: a.csv\n    query: up\n", 2, "not both"},
        {"deployments: []\n", 1, "the list is empty"},
        {"deployments: x\n", 1, "expected a list"},
        {"deployments:\n  - just-a-string\n", 2, "expected a map"},
        {"name: top\n", 1, "only inside a deployments entry"},
        {"report: x.svg\n", 1, "only a flag"},
        {"start: 2d\n", 1, "not a plan key"},
        {"policy: oracle\n", 1, "predictive, reactive, hpa"},
        {"deployments:\n  - name: Bad_Name!\n    trace: a\n", 2, "not a Deployment name"},
        {"- a\n- b\n", 1, "expected a map"},
        {"a: [\n", 2, "did not find expected node content"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&e, 0, sizeof(e));
        assert_int_equal(plan_file_parse(bad[i].yaml, strlen(bad[i].yaml), &f, &e), -EINVAL);
        if (e.line != bad[i].line || !strstr(e.msg, bad[i].msg))
            fail_msg("case %zu: line %d '%s', want line %d '%s'", i, e.line, e.msg, bad[i].line,
                     bad[i].msg);
        assert_int_equal(f.ndeployments, 0);
        assert_int_equal(f.top.n, 0);
    }
}

/* Workload keys: the sources, the one policy, and the replay window refused. */
static void test_workload_keys(void **state)
{
    (void)state;
    struct plan_workload w;
    char err[200];
    plan_workload_init(&w);
    assert_int_equal(plan_workload_set(&w, "policy", "reactive", err, sizeof(err)), 0);
    assert_int_equal(w.policy, SIM_REACTIVE);
    assert_int_equal(plan_workload_set(&w, "policy", "predictive,hpa", err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(plan_workload_set(&w, "since", "14d", err, sizeof(err)), 0);
    assert_int_equal(w.since_ms, 14 * DAY_S * 1000LL);
    assert_int_equal(plan_workload_set(&w, "since", "10m", err, sizeof(err)), -EINVAL);
    assert_int_equal(plan_workload_set(&w, "query-step", "1.5s", err, sizeof(err)), -EINVAL);
    assert_int_equal(plan_workload_set(&w, "prometheus", "ftp://x", err, sizeof(err)), -EINVAL);
    assert_int_equal(plan_workload_set(&w, "capacity-per-gpu", "7", err, sizeof(err)), 0);
    assert_float_equal(w.sim.policy.capacity_rps_per_gpu, 7, 0);
    assert_int_equal(plan_workload_set(&w, "warmup", "1d", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "not a plan key"));
    /* the plan replays one policy at one quantile: no sweep */
    assert_int_equal(plan_workload_set(&w, "quantile-sweep", "0.8", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "quantile-sweep: not a plan key"));
    assert_int_equal(w.sim.nsweep, 0);
    assert_int_equal(plan_workload_set(&w, "nonsense", "1", err, sizeof(err)), -ENOENT);
    assert_true(plan_workload_key("trace"));
    assert_true(plan_workload_key("cold-start"));
    assert_false(plan_workload_key("start"));
    assert_false(plan_workload_key("horizon"));
    plan_workload_clear(&w);
    plan_workload_clear(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_recovers_known_components),
        cmocka_unit_test(test_trend_modes),
        cmocka_unit_test(test_insignificant_trend_is_dropped),
        cmocka_unit_test(test_outage_does_not_bend_the_level),
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_model_sized_by_days_with_data),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_backtest_window),
        cmocka_unit_test(test_backtest_stationary),
        cmocka_unit_test(test_growth_multiplies_the_demand),
        cmocka_unit_test(test_day_replay_matches_horizon_replay),
        cmocka_unit_test(test_seed_days),
        cmocka_unit_test(test_replay_of_a_history_before_0),
        cmocka_unit_test(test_total),
        cmocka_unit_test(test_total_by_clock_time),
        cmocka_unit_test(test_reference_scenario),
        cmocka_unit_test(test_deterministic_reports),
        cmocka_unit_test(test_plan_file),
        cmocka_unit_test(test_workload_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

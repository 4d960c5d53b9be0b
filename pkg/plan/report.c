/* SPDX-License-Identifier: Apache-2.0 */
/* plan/report: the plan as a table for a person and as JSON for tools.
 * Output depends only on the inputs (no clock); times are shown on the
 * trace's clock like `simulate` does: UTC dates for UNIX time, "day N hh:mm"
 * for a relative clock. */
#include "plan-int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* 2000-01-01: a trace whose times start later is on UNIX time. */
#define ABSOLUTE_FROM_MS (946684800LL * 1000)

static void when(int64_t t_ms, bool absolute, char *out, size_t len)
{
    int64_t day = util_floor_div(t_ms, PLAN_DAY_MS);
    int64_t sod = (t_ms - day * PLAN_DAY_MS) / 1000;
    time_t tt = (time_t)(day * 86400);
    struct tm tm;
    if (absolute && gmtime_r(&tt, &tm))
        snprintf(out, len, "%04d-%02d-%02d %02lld:%02lld UTC", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, (long long)(sod / 3600),
                 (long long)(sod / 60 % 60));
    else
        snprintf(out, len, "day %lld %02lld:%02lld", (long long)day, (long long)(sod / 3600),
                 (long long)(sod / 60 % 60));
}

static void day_name(int64_t day, bool absolute, char *out, size_t len)
{
    time_t tt = (time_t)(day * 86400);
    struct tm tm;
    if (absolute && gmtime_r(&tt, &tm))
        snprintf(out, len, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
    else
        snprintf(out, len, "day %lld", (long long)day);
}

static void dur(int64_t ms, char *out, size_t len)
{
    if (ms > 0 && ms % PLAN_DAY_MS == 0)
        snprintf(out, len, "%lldd", (long long)(ms / PLAN_DAY_MS));
    else
        util_format_duration(ms, out, len);
}

static const char *season_name(enum plan_season s)
{
    return s == PLAN_SEASON_WEEKLY ? "weekly" : s == PLAN_SEASON_DAILY ? "daily" : "auto";
}

static void money(double v, char *out, size_t len)
{
    if (v >= 1e6)
        snprintf(out, len, "%.0f", v);
    else
        snprintf(out, len, "%.1f", v);
}

static void prices_line(struct util_buf *b, const struct plan_result *r)
{
    const struct plan_prices *p = &r->prices;
    util_buf_printf(b, "  prices    per GPU-hour: on-demand %g, reserved %g (%.0f%% off)",
                    p->on_demand, p->reserved, (1 - p->reserved / p->on_demand) * 100);
    if (p->spot > 0)
        util_buf_printf(b, ", spot %g with %.0f%% interrupted", p->spot,
                        p->spot_interruption * 100);
    util_buf_printf(b, "; above the commitment %g (%s)\n", p->flexible,
                    p->flexible < p->on_demand ? "spot" : "on-demand");
}

void plan_report_table(struct util_buf *b, const struct plan_config *cfg,
                       const struct plan_workload *w, const struct plan_report_info *info,
                       const struct plan_result *r)
{
    char a[64], c[64], d[64], e[64];
    bool total = r->nparts > 0 || !w;
    bool abs_clock = r->t_begin_ms >= ABSOLUTE_FROM_MS;
    if (total) {
        util_buf_printf(b, "gpuscaler plan: total of %zu Deployments (one pool of GPUs)\n",
                        r->nparts);
    } else {
        util_buf_printf(b, "gpuscaler plan: %s%s%s\n", r->name[0] ? r->name : "",
                        r->name[0] ? ": " : "", info && info->source ? info->source : "");
        const struct plan_model *m = &r->model;
        when(r->hist_t0_ms, abs_clock, a, sizeof(a));
        when(r->hist_t1_ms, abs_clock, c, sizeof(c));
        dur(r->hist_dt_ms, d, sizeof(d));
        util_buf_printf(b, "  history   %s -> %s (%.1f days, %s buckets), %.4g requests",
                        a, c, (double)(r->hist_t1_ms - r->hist_t0_ms) / (double)PLAN_DAY_MS, d,
                        r->hist_requests);
        if (w->sim.scale != 1)
            util_buf_printf(b, " (counts x%g)", w->sim.scale);
        util_buf_puts(b, "\n");
        dur(m->step_ms, a, sizeof(a));
        util_buf_printf(b,
                        "  model     %s season, %s steps, %zu whole days; residuals 10-90%%: "
                        "%+.1f%% .. %+.1f%%\n",
                        season_name(m->season), a, m->whole_days, (exp(m->resid_lo) - 1) * 100,
                        (exp(m->resid_hi) - 1) * 100);
        util_buf_printf(b, "  trend     fitted %+.2f%%/day (standard error %.2f), carried forward "
                           "%+.2f%%/day %s\n",
                        (exp(m->slope_fit) - 1) * 100, m->slope_se * 100,
                        (exp(m->slope) - 1) * 100,
                        m->trend == PLAN_TREND_LINEAR ? "(linear)"
                        : m->trend == PLAN_TREND_NONE ? "(trend none)"
                                                      : "(damped)");
        const struct policy_config *p = &w->sim.policy;
        dur(p->cold_start_ms, a, sizeof(a));
        dur(r->sla_ms, c, sizeof(c));
        util_buf_printf(b,
                        "  policy    %s; %g GPUs/replica x %g req/s per GPU, target %g, "
                        "replicas %d..%d, cold start %s, p99 <= %s\n",
                        sim_policy_name(w->policy), r->gpus_per_replica, sim_config_capacity(&w->sim),
                        p->target_utilization, p->min_replicas, p->max_replicas, a, c);
        if (r->replay.mode == PLAN_SIM_DAY) {
            util_buf_printf(b, "  replay    %d representative days (residuals of ", PLAN_REP_DAYS);
            for (size_t i = 0; i < PLAN_REP_DAYS; i++) {
                day_name(r->replay.residual_days[i], abs_clock, a, sizeof(a));
                util_buf_printf(b, "%s%s", i ? ", " : "", a);
            }
            util_buf_printf(b, "), GPUs held %.2fx what the demand needs at the target, scaled "
                               "to every step\n", r->replay.gpus_per_need);
        } else {
            util_buf_printf(b, "  replay    the whole horizon of every scenario (%.0f s at 1 s)\n",
                            r->replay.simulated_s);
        }
    }
    when(r->t_begin_ms, abs_clock, a, sizeof(a));
    dur((int64_t)r->nsteps * r->step_ms, c, sizeof(c));
    util_buf_printf(b, "  horizon   %s from %s; growth", c, a);
    for (size_t s = 0; s < r->nscen; s++)
        util_buf_printf(b, "%s x%g (%.0f%%)", s ? "," : "", r->scen[s].growth,
                        r->scen[s].weight * 100);
    util_buf_puts(b, " at its end\n");
    if (total && (int64_t)r->nsteps * r->step_ms < cfg->horizon_ms) {
        dur(cfg->horizon_ms, c, sizeof(c));
        util_buf_printf(b,
                        "  shared    the hours every plan covers, added at the same clock time: "
                        "the histories end at different times, so the %s horizons overlap "
                        "for less\n",
                        c);
    }
    prices_line(b, r);

    util_buf_printf(b, "\n%-10s %12s %11s %9s %9s %9s %9s\n", "scenario", "requests",
                    "GPU-hours", "peak GPUs", "peak+", "baseline", "min>SLA");
    snprintf(d, sizeof(d), "%.0f%%", r->margin * 100);
    snprintf(e, sizeof(e), "%.0f%% h", r->baseline_share * 100);
    util_buf_printf(b, "%-10s %12s %11s %9s %9s %9s %9s\n", "", "", "", "", d, e, "");
    for (size_t s = 0; s < r->nscen; s++) {
        const struct plan_scenario_result *sr = &r->scen[s];
        snprintf(a, sizeof(a), "x%g", sr->growth);
        util_buf_printf(b, "%-10s %12.4g %11.1f %9lld %9lld %9lld %9.0f\n", a, sr->requests,
                        sr->gpu_hours, (long long)sr->peak_gpus, (long long)sr->margin_gpus,
                        (long long)sr->baseline_gpus, sr->sla_minutes);
    }
    size_t lo = 0, hi = 0;
    for (size_t s = 0; s < r->nscen; s++) {
        if (r->scen[s].growth < r->scen[lo].growth)
            lo = s;
        if (r->scen[s].growth > r->scen[hi].growth)
            hi = s;
    }
    util_buf_printf(b, "\n%-22s %8s %13s", "commitment", "reserved", "expected cost");
    for (size_t s = 0; s < r->nscen; s++) {
        snprintf(a, sizeof(a), "cost x%g", r->scen[s].growth);
        util_buf_printf(b, " %11s", a);
    }
    snprintf(a, sizeof(a), "stranded x%g", r->scen[lo].growth);
    snprintf(c, sizeof(c), "flexible x%g", r->scen[hi].growth);
    util_buf_printf(b, " %14s %14s\n", a, c);
    for (int k = 0; k < PLAN_NCHOICES; k++) {
        const struct plan_choice *ch = &r->choice[k];
        money(ch->expected_cost, a, sizeof(a));
        util_buf_printf(b, "%-22s %8lld %13s", ch->name, (long long)ch->reserved, a);
        for (size_t s = 0; s < r->nscen; s++) {
            money(ch->cost[s], a, sizeof(a));
            util_buf_printf(b, " %11s", a);
        }
        util_buf_printf(b, " %11.0f GPU-h %11.0f GPU-h\n", ch->stranded_gpu_hours[lo],
                        ch->flexible_gpu_hours[hi]);
    }
    const struct plan_choice *o = &r->choice[PLAN_CHOICE_OPTIMAL];
    const struct plan_choice *rule = &r->choice[PLAN_CHOICE_RULE];
    const struct plan_choice *none = &r->choice[PLAN_CHOICE_NONE];
    money(o->expected_cost, a, sizeof(a));
    money(rule->expected_cost, c, sizeof(c));
    money(none->expected_cost, d, sizeof(d));
    dur((int64_t)r->nsteps * r->step_ms, e, sizeof(e));
    util_buf_printf(b,
                    "\nReserve %lld GPUs for the %s: expected cost %s, against %s with %s "
                    "(%lld GPUs) and %s with none.\n",
                    (long long)o->reserved, e, a, c, rule->name, (long long)rule->reserved, d);
    util_buf_printf(b,
                    "Risk: if growth stays at x%g, %.0f reserved GPU-hours go unused; at x%g, "
                    "%.0f GPU-hours run above the commitment.\n",
                    r->scen[lo].growth, o->stranded_gpu_hours[lo], r->scen[hi].growth,
                    o->flexible_gpu_hours[hi]);
    util_buf_printf(b, "Capacity to secure for the peak with a %.0f%% margin: %lld GPUs (x%g).\n",
                    r->margin * 100, (long long)r->scen[hi].margin_gpus, r->scen[hi].growth);
    (void)cfg;
}

void plan_report_backtest(struct util_buf *b, const struct plan_backtest *bt,
                          const struct plan_result *r)
{
    char a[64], c[64], d[64];
    bool abs_clock = bt->win.test_begin_ms >= ABSOLUTE_FROM_MS;
    when(bt->win.test_begin_ms, abs_clock, a, sizeof(a));
    when(bt->win.test_begin_ms + bt->win.test_ms, abs_clock, c, sizeof(c));
    dur(bt->win.test_ms, d, sizeof(d));
    util_buf_printf(b,
                    "\nbacktest: planned from the history before %s, replayed the policy on the "
                    "held-out %s (%s -> %s)\n",
                    a, d, a, c);
    char planned[40];
    snprintf(planned, sizeof(planned), "planned x%g", r->scen[r->ref].growth);
    util_buf_printf(b, "  %-22s %12s %12s %9s\n", "", planned, "actual", "error");
    util_buf_printf(b, "  %-22s %12.1f %12.1f %+8.1f%%\n", "GPU-hours", bt->planned_gpu_hours,
                    bt->actual_gpu_hours, bt->gpu_hours_error * 100);
    util_buf_printf(b, "  %-22s %12.4g %12.4g %+8.1f%%\n", "requests", bt->planned_requests,
                    bt->actual_requests,
                    bt->actual_requests > 0
                        ? (bt->planned_requests / bt->actual_requests - 1) * 100
                        : 0.0);
    util_buf_printf(b, "  %-22s %12lld %12lld\n", "peak GPUs", (long long)bt->planned_peak,
                    (long long)bt->actual_peak);
    snprintf(d, sizeof(d), "baseline (%.0f%% h)", r->baseline_share * 100);
    util_buf_printf(b, "  %-22s %12lld %12lld\n", d, (long long)bt->planned_baseline,
                    (long long)bt->actual_baseline);
    util_buf_printf(b, "  %-22s %12.0f %12.0f\n", "minutes over SLA", bt->planned_sla_minutes,
                    bt->actual_sla_minutes);
    util_buf_printf(b, "  GPUs per step: mean absolute error %.1f%%\n", bt->step_mape * 100);
    money(bt->cost_actual, a, sizeof(a));
    money(bt->cost_hindsight, c, sizeof(c));
    util_buf_printf(b,
                    "  the plan's commitment (%lld GPUs) cost %s on the actual GPUs; the best in "
                    "hindsight (%lld GPUs) %s (%+.1f%%)\n",
                    (long long)bt->reserved, a, (long long)bt->reserved_hindsight, c,
                    bt->cost_hindsight > 0 ? (bt->cost_actual / bt->cost_hindsight - 1) * 100
                                           : 0.0);
    if (bt->missing_buckets)
        util_buf_printf(b, "  %zu held-out buckets without data were replayed as no traffic\n",
                        bt->missing_buckets);
}

/* ---- JSON ---------------------------------------------------------------- */

static void jnum(struct util_buf *b, double v)
{
    if (isfinite(v))
        util_buf_printf(b, "%.10g", v);
    else
        util_buf_puts(b, "null");
}

/* ,"key":v */
static void jfield(struct util_buf *b, const char *key, double v)
{
    util_buf_printf(b, ",\"%s\":", key);
    jnum(b, v);
}

static void jarr(struct util_buf *b, const double *v, size_t n)
{
    util_buf_puts(b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            util_buf_puts(b, ",");
        if (v && isfinite(v[i]))
            util_buf_printf(b, "%.6g", v[i]);
        else /* no data (a gap in the history): not zero traffic */
            util_buf_puts(b, "null");
    }
    util_buf_puts(b, "]");
}

static void json_plan(struct util_buf *b, const struct plan_workload *w,
                      const struct plan_report_info *info, const struct plan_result *r)
{
    util_buf_puts(b, "{\"name\":");
    util_buf_json_str(b, r->name);
    util_buf_puts(b, ",\"source\":");
    util_buf_json_str(b, info && info->source ? info->source : "");
    if (w) {
        util_buf_puts(b, ",\"policy\":");
        util_buf_json_str(b, sim_policy_name(w->policy));
        const struct plan_model *m = &r->model;
        util_buf_printf(b, ",\"history\":{\"begin_s\":%.3f,\"end_s\":%.3f,\"bucket_s\":%.3f,"
                           "\"requests\":",
                        (double)r->hist_t0_ms / 1000, (double)r->hist_t1_ms / 1000,
                        (double)r->hist_dt_ms / 1000);
        jnum(b, r->hist_requests);
        util_buf_printf(b, ",\"step_begin_s\":%.3f,\"rate\":", (double)r->hist_step0_ms / 1000);
        jarr(b, r->hist_rate, r->nhist);
        util_buf_printf(b, "},\"model\":{\"season\":\"%s\",\"step_s\":%.0f,\"whole_days\":%zu,"
                           "\"trend_per_day\":",
                        season_name(m->season), (double)m->step_ms / 1000, m->whole_days);
        jnum(b, exp(m->slope) - 1);
        jfield(b, "trend_fitted_per_day", exp(m->slope_fit) - 1);
        util_buf_printf(b, ",\"trend\":\"%s\"", m->trend == PLAN_TREND_LINEAR ? "linear"
                                                 : m->trend == PLAN_TREND_NONE   ? "none"
                                                                                 : "damped");
        jfield(b, "trend_se", m->slope_se);
        jfield(b, "residual_p10", exp(m->resid_lo) - 1);
        jfield(b, "residual_p90", exp(m->resid_hi) - 1);
        jfield(b, "rate_floor", m->floor);
        util_buf_printf(b, "},\"replay\":{\"mode\":\"%s\",\"simulated_s\":%.0f,\"seeded_s\":%.0f,"
                           "\"residual_days\":[",
                        r->replay.mode == PLAN_SIM_DAY ? "day" : "horizon", r->replay.simulated_s,
                        r->replay.seeded_s);
        for (size_t i = 0; i < PLAN_REP_DAYS; i++)
            util_buf_printf(b, "%s%lld", i ? "," : "", (long long)r->replay.residual_days[i]);
        util_buf_puts(b, "],\"gpus_per_need\":");
        jnum(b, r->replay.gpus_per_need);
        util_buf_puts(b, "},\"forecast\":{\"lo\":");
        jarr(b, r->band_lo, r->nsteps);
        util_buf_puts(b, ",\"mid\":");
        jarr(b, r->band_mid, r->nsteps);
        util_buf_puts(b, ",\"hi\":");
        jarr(b, r->band_hi, r->nsteps);
        util_buf_puts(b, "}");
    } else {
        util_buf_printf(b, ",\"deployments\":%zu", r->nparts);
    }
    util_buf_printf(b, ",\"horizon\":{\"begin_s\":%.3f,\"step_s\":%.0f,\"steps\":%zu}",
                    (double)r->t_begin_ms / 1000, (double)r->step_ms / 1000, r->nsteps);
    jfield(b, "gpus_per_replica", r->gpus_per_replica);
    util_buf_puts(b, ",\"scenarios\":[");
    for (size_t s = 0; s < r->nscen; s++) {
        const struct plan_scenario_result *sr = &r->scen[s];
        util_buf_printf(b, "%s{\"growth\":", s ? "," : "");
        jnum(b, sr->growth);
        jfield(b, "weight", sr->weight);
        jfield(b, "requests", sr->requests);
        jfield(b, "gpu_hours", sr->gpu_hours);
        util_buf_printf(b, ",\"peak_gpus\":%lld,\"margin_gpus\":%lld,\"baseline_gpus\":%lld,"
                           "\"sla_minutes\":",
                        (long long)sr->peak_gpus, (long long)sr->margin_gpus,
                        (long long)sr->baseline_gpus);
        jnum(b, sr->sla_minutes);
        util_buf_puts(b, ",\"gpus\":");
        jarr(b, sr->gpus, r->nsteps);
        util_buf_puts(b, ",\"gpus_max\":");
        jarr(b, sr->gpus_max, r->nsteps);
        if (sr->demand) {
            util_buf_puts(b, ",\"demand\":");
            jarr(b, sr->demand, r->nsteps);
        }
        util_buf_puts(b, "}");
    }
    util_buf_printf(b, "],\"reference_scenario\":%zu,\"prices\":{\"on_demand\":", r->ref);
    jnum(b, r->prices.on_demand);
    jfield(b, "reserved", r->prices.reserved);
    jfield(b, "spot", r->prices.spot > 0 ? r->prices.spot : NAN);
    jfield(b, "spot_interruption", r->prices.spot_interruption);
    jfield(b, "flexible", r->prices.flexible);
    util_buf_puts(b, "},\"commitments\":[");
    for (int k = 0; k < PLAN_NCHOICES; k++) {
        const struct plan_choice *ch = &r->choice[k];
        util_buf_printf(b, "%s{\"name\":", k ? "," : "");
        util_buf_json_str(b, ch->name);
        util_buf_printf(b, ",\"reserved_gpus\":%lld,\"expected_cost\":", (long long)ch->reserved);
        jnum(b, ch->expected_cost);
        util_buf_puts(b, ",\"scenarios\":[");
        for (size_t s = 0; s < r->nscen; s++) {
            util_buf_printf(b, "%s{\"growth\":", s ? "," : "");
            jnum(b, r->scen[s].growth);
            jfield(b, "cost", ch->cost[s]);
            jfield(b, "stranded_gpu_hours", ch->stranded_gpu_hours[s]);
            jfield(b, "flexible_gpu_hours", ch->flexible_gpu_hours[s]);
            util_buf_puts(b, "}");
        }
        util_buf_puts(b, "]}");
    }
    util_buf_printf(b, "],\"recommended_reserved_gpus\":%lld}",
                    (long long)r->choice[PLAN_CHOICE_OPTIMAL].reserved);
}

static void json_backtest(struct util_buf *b, const struct plan_backtest *bt)
{
    util_buf_printf(b, "{\"test_begin_s\":%.3f,\"test_s\":%.0f,\"train_buckets\":%zu,",
                    (double)bt->win.test_begin_ms / 1000, (double)bt->win.test_ms / 1000,
                    bt->win.train_buckets);
    util_buf_puts(b, "\"planned_gpu_hours\":");
    jnum(b, bt->planned_gpu_hours);
    jfield(b, "actual_gpu_hours", bt->actual_gpu_hours);
    jfield(b, "gpu_hours_error", bt->gpu_hours_error);
    jfield(b, "planned_requests", bt->planned_requests);
    jfield(b, "actual_requests", bt->actual_requests);
    util_buf_printf(b, ",\"planned_peak_gpus\":%lld,\"actual_peak_gpus\":%lld,"
                       "\"planned_baseline_gpus\":%lld,\"actual_baseline_gpus\":%lld,",
                    (long long)bt->planned_peak, (long long)bt->actual_peak,
                    (long long)bt->planned_baseline, (long long)bt->actual_baseline);
    util_buf_puts(b, "\"planned_sla_minutes\":");
    jnum(b, bt->planned_sla_minutes);
    jfield(b, "actual_sla_minutes", bt->actual_sla_minutes);
    jfield(b, "step_mape", bt->step_mape);
    util_buf_printf(b, ",\"reserved_gpus\":%lld,\"cost_actual\":", (long long)bt->reserved);
    jnum(b, bt->cost_actual);
    util_buf_printf(b, ",\"reserved_hindsight_gpus\":%lld,\"cost_hindsight\":",
                    (long long)bt->reserved_hindsight);
    jnum(b, bt->cost_hindsight);
    util_buf_printf(b, ",\"missing_buckets\":%zu}", bt->missing_buckets);
}

void plan_report_json(struct util_buf *b, const struct plan_config *cfg,
                      const struct plan_workload *const *workloads,
                      const struct plan_report_info *infos, struct plan_result *const *results,
                      size_t n, const struct plan_result *total,
                      const struct plan_backtest *backtests)
{
    util_buf_printf(b, "{\"config\":{\"horizon_s\":%.0f,\"step_s\":%.0f,\"season\":\"%s\","
                       "\"sim\":\"%s\",\"margin\":",
                    (double)cfg->horizon_ms / 1000, (double)cfg->step_ms / 1000,
                    season_name(cfg->season), cfg->sim == PLAN_SIM_DAY ? "day" : "horizon");
    jnum(b, cfg->margin);
    jfield(b, "baseline_share", cfg->baseline_share);
    jfield(b, "reserve_share", cfg->rule_share);
    util_buf_puts(b, ",\"growth\":[");
    for (size_t s = 0; s < cfg->nscenarios; s++) {
        util_buf_printf(b, "%s{\"growth\":", s ? "," : "");
        jnum(b, cfg->scenarios[s].growth);
        jfield(b, "weight", cfg->scenarios[s].weight);
        util_buf_puts(b, "}");
    }
    util_buf_puts(b, "]},\"plans\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            util_buf_puts(b, ",");
        json_plan(b, workloads[i], &infos[i], results[i]);
    }
    util_buf_puts(b, "],\"total\":");
    if (total)
        json_plan(b, NULL, NULL, total);
    else
        util_buf_puts(b, "null");
    if (backtests) {
        util_buf_puts(b, ",\"backtests\":[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                util_buf_puts(b, ",");
            json_backtest(b, &backtests[i]);
        }
        util_buf_puts(b, "]");
    }
    util_buf_puts(b, "}\n");
}

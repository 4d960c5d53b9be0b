/* SPDX-License-Identifier: Apache-2.0 */
/* sim/report: the text outputs of a run: the parameter header and result
 * table (stdout), the per-interval timeline CSV and the JSON document for
 * scripts. All append to a util_buf with fixed formats, so the same result
 * always gives the same bytes. The SVG chart is svg.c. */
#include "sim-int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

static void dur(int64_t ms, char *out, size_t len)
{
    util_format_duration(ms < 0 ? 0 : ms, out, len);
}

/* A time on the trace's axis: "2023-11-14 22:13 UTC" when the window starting
 * at t0_s is on UNIX time, else "day 2 06:30" (t = 0 taken as midnight). */
static void day_time(double t_s, double t0_s, char *out, size_t len)
{
    sim_clock_time(t_s, sim_clock_absolute(t0_s), out, len);
}

static void count(double n, char *out, size_t len)
{
    if (n >= 1e9)
        snprintf(out, len, "%.2fG", n / 1e9);
    else if (n >= 1e6)
        snprintf(out, len, "%.2fM", n / 1e6);
    else if (n >= 1e4)
        snprintf(out, len, "%.1fk", n / 1e3);
    else
        snprintf(out, len, "%.0f", n);
}

static double hpa_target(const struct sim_config *cfg)
{
    return cfg->hpa.target_per_pod > 0 ? cfg->hpa.target_per_pod
                                       : cfg->policy.target_utilization *
                                             sim_config_capacity(cfg) * sim_config_gpus(cfg);
}

static double slots(const struct sim_config *cfg)
{
    double s = cfg->policy.slots_per_gpu;
    if (!(s > 0))
        s = sim_config_capacity(cfg) * cfg->policy.service_time_ms / 1e3;
    double c = round(sim_config_gpus(cfg) * s);
    return c < 1 ? 1 : c;
}

/* The cells the policy table and the quantile sweep's share: GPU-hours
 * against the oracle's, the intervals over the SLA, the share of requests
 * over it. */
struct cells {
    char vs[24], miss[40], pct[24];
};

static void shared_cells(double vs_oracle, int64_t sla_intervals, int64_t intervals,
                         double requests, double over, struct cells *c)
{
    if (isfinite(vs_oracle))
        snprintf(c->vs, sizeof(c->vs), "%.3fx", vs_oracle);
    else
        snprintf(c->vs, sizeof(c->vs), "-");
    snprintf(c->miss, sizeof(c->miss), "%lld/%lld", (long long)sla_intervals,
             (long long)intervals);
    snprintf(c->pct, sizeof(c->pct), "%.3f%%", requests > 0 ? 100.0 * over / requests : 0);
}

int sim_hour_digits(double h)
{
    if (!(h > 0) || h >= 0.05)
        return 1;
    int d = (int)ceil(-log10(h)) + 2;
    return d > 9 ? 9 : d;
}

void sim_report_table(struct util_buf *b, const struct sim_config *cfg,
                      const struct sim_report_info *info, const struct sim_result *r)
{
    const struct policy_config *p = &cfg->policy;
    char a[64], c[64], d[64], e[64], f[64];
    double g = sim_config_gpus(cfg);

    util_buf_printf(b, "gpuscaler simulate: %s\n", info->trace_name);
    dur((int64_t)(info->trace_dt_s * 1000), a, sizeof(a));
    dur((int64_t)(info->trace_span_s * 1000), c, sizeof(c));
    day_time(r->t_begin_s, r->t_begin_s, d, sizeof(d));
    day_time(r->t_end_s, r->t_begin_s, e, sizeof(e));
    dur((int64_t)((r->t_end_s - r->t_begin_s) * 1000), f, sizeof(f));
    util_buf_printf(b, "  trace     %s buckets over %s, counts x%g; scored %s -> %s (%s)", a, c,
                    cfg->scale, d, e, f);
    if (r->warmup_s > 0) {
        dur((int64_t)(r->warmup_s * 1000), a, sizeof(a));
        util_buf_printf(b, " after a %s warm-up", a);
    }
    util_buf_puts(b, "\n");
    if (info->trace_missing > 0)
        util_buf_printf(b, "  missing   %zu of the trace's %zu buckets have no row (replayed as no "
                           "traffic)\n",
                        info->trace_missing, info->trace_buckets);
    dur(cfg->policy.service_time_ms, a, sizeof(a));
    dur(p->cold_start_ms, c, sizeof(c));
    double cap = sim_config_capacity(cfg);
    util_buf_printf(b,
                    "  serving   %g GPUs/replica x %g req/s per GPU = %g req/s per replica; "
                    "service time %s; %g slots/replica; cold start %s\n",
                    g, cap, g * cap, a, slots(cfg), c);
    if (cfg->gpu_limit > 0)
        util_buf_printf(b,
                        "  gpus      gpu-limit %d: at most %d replicas placed; the rest stay "
                        "Pending (unschedulable), hold no GPU and never serve\n",
                        cfg->gpu_limit, sim_config_placeable(cfg));
    if (p->capacity_auto) {
        util_buf_printf(b, "  capacity  capacity-per-gpu auto (start %g req/s per GPU%s); learned:",
                        p->capacity_start, p->capacity_start > 0 ? "" : ": none");
        for (size_t i = 0; i < r->n; i++) {
            const struct sim_policy_result *pr = &r->pol[i];
            if ((pr->policy == SIM_PREDICTIVE || pr->policy == SIM_REACTIVE) &&
                isfinite(pr->capacity_learned))
                util_buf_printf(b, " %s %.3g (%s)", sim_policy_name(pr->policy),
                                pr->capacity_learned, pr->capacity_source);
            else if (pr->policy == SIM_PREDICTIVE || pr->policy == SIM_REACTIVE)
                util_buf_printf(b, " %s none (%s)", sim_policy_name(pr->policy),
                                pr->capacity_source);
        }
        util_buf_puts(b, "\n");
    }
    dur(sim_config_sla_ms(cfg), a, sizeof(a));
    dur(cfg->interval_ms, c, sizeof(c));
    count(r->requests, d, sizeof(d));
    util_buf_printf(b,
                    "  SLA       p99 <= %s per %s interval; demand peak %.1f req/s, %s requests\n",
                    a, c, r->peak_demand_rps, d);
    dur(p->scale_out_after_ms, a, sizeof(a));
    dur(p->scale_in_after_ms, c, sizeof(c));
    dur(p->decision_interval_ms, d, sizeof(d));
    dur(cfg->rate_window_ms, e, sizeof(e));
    util_buf_printf(b,
                    "  policy    target-utilization %g, scale-in-utilization %g, scale-out-after "
                    "%s, scale-in-after %s,\n"
                    "            replicas %d..%d, max-scale-up-step %d, max-scale-down-step %d, "
                    "decision every %s on the %s rate,\n",
                    p->target_utilization, p->scale_in_utilization, a, c, p->min_replicas,
                    p->max_replicas, p->max_scale_up_step, p->max_scale_down_step, d, e);
    dur(p->seasonality_ms, a, sizeof(a));
    dur(p->p99_latency_target_ms, c, sizeof(c));
    util_buf_printf(b,
                    "            predictive: forecast quantile %g, season %s; "
                    "p99-latency-target %s\n",
                    p->forecast_quantile, a, p->p99_latency_target_ms > 0 ? c : "none");
    const struct sim_hpa_config *h = &cfg->hpa;
    dur(h->sync_period_ms, a, sizeof(a));
    dur(h->downscale_window_ms, c, sizeof(c));
    dur(h->metric_window_ms, d, sizeof(d));
    dur(h->metric_delay_ms, e, sizeof(e));
    util_buf_printf(b,
                    "  hpa       Pods metric req/s per pod, AverageValue target %g, tolerance %g, "
                    "sync %s, scale-down stabilization %s,\n",
                    hpa_target(cfg), h->tolerance, a, c);
    dur(h->scale_up_period_ms, a, sizeof(a));
    dur(h->scale_down_period_ms, c, sizeof(c));
    util_buf_printf(b,
                    "            scale-up max(%d pods, %d%%) per %s, scale-down %d%% per %s, "
                    "metric rate[%s] seen %s late\n\n",
                    h->scale_up_pods, h->scale_up_percent, a, h->scale_down_percent, c, d, e);

    bool minutes = cfg->interval_ms == 60000;
    util_buf_printf(b, "%-12s %10s %9s %14s %9s %8s %6s %5s %6s %9s\n", "policy", "GPU-hours",
                    "vs oracle", minutes ? "min p99>SLA" : "int p99>SLA", "req>SLA", "actions",
                    "flaps", "peak", "mean", "worst p99");
    for (size_t i = 0; i < r->n; i++) {
        const struct sim_policy_result *x = &r->pol[i];
        struct cells cl;
        shared_cells(x->gpu_hours_vs_oracle, x->sla_intervals, x->intervals, x->requests,
                     x->requests_over_sla, &cl);
        char worst[24];
        if (x->max_p99_ms >= SIM_LATENCY_MAX_S * 1000)
            snprintf(worst, sizeof(worst), ">1h");
        else
            snprintf(worst, sizeof(worst), "%.1fs", x->max_p99_ms / 1000);
        util_buf_printf(b, "%-12s %10.*f %9s %14s %9s %8lld %6lld %5d %6.1f %9s\n",
                        sim_policy_name(x->policy), sim_hour_digits(x->gpu_hours), x->gpu_hours,
                        cl.vs, cl.miss, cl.pct,
                        (long long)x->scaling_actions, (long long)x->flaps, x->peak_replicas,
                        x->mean_replicas, worst);
    }
    if (r->nsweep > 0) {
        util_buf_printf(b,
                        "\nforecast-quantile trade-off (quantile-sweep: predictive replayed at "
                        "each; * = the configured one)\n");
        util_buf_printf(b, "%-12s %10s %9s %14s %9s %8s %6s %9s\n", "quantile", "GPU-hours",
                        "vs oracle", minutes ? "min p99>SLA" : "int p99>SLA", "req>SLA",
                        "actions", "flaps", "coverage");
        for (size_t i = 0; i < r->nsweep; i++) {
            const struct sim_sweep_point *x = &r->sweep[i];
            struct cells cl;
            shared_cells(x->gpu_hours_vs_oracle, x->sla_intervals, x->intervals, x->requests,
                         x->requests_over_sla, &cl);
            char q[24], cov[24];
            snprintf(q, sizeof(q), "%g%s", x->quantile, x->configured ? " *" : "");
            if (isfinite(x->plan_coverage))
                snprintf(cov, sizeof(cov), "%.1f%%", 100.0 * x->plan_coverage);
            else
                snprintf(cov, sizeof(cov), "-");
            util_buf_printf(b, "%-12s %10.*f %9s %14s %9s %8lld %6lld %9s\n", q,
                            sim_hour_digits(x->gpu_hours), x->gpu_hours,
                            cl.vs, cl.miss, cl.pct, (long long)x->scaling_actions,
                            (long long)x->flaps, cov);
        }
    }
    char need[48]; /* the busiest second's need, or "more than" what the oracle searched */
    snprintf(need, sizeof(need), "%s%d", r->peak_need >= SIM_ORACLE_MAX_NEED ? "more than " : "",
             r->peak_need);
    if (cfg->gpu_limit > 0) {
        util_buf_puts(b, "\nunschedulable (gpu-limit): replica-hours Pending, most at once:");
        for (size_t i = 0; i < r->n; i++)
            util_buf_printf(b, "%s %s %.1f (%d)", i ? "," : "", sim_policy_name(r->pol[i].policy),
                            r->pol[i].pending_replica_hours, r->pol[i].peak_unschedulable);
        util_buf_puts(b, "\n");
        if (r->peak_need > sim_config_placeable(cfg))
            util_buf_printf(b,
                            "warning: gpu-limit %d places %d replicas, the SLA needs %s at the "
                            "busiest second: every policy is short of GPUs there\n",
                            cfg->gpu_limit, sim_config_placeable(cfg), need);
    }
    if (r->peak_need > cfg->policy.max_replicas)
        util_buf_printf(b,
                        "\nwarning: max-replicas %d cannot carry this trace's peak: the SLA "
                        "needs %s replicas at the busiest second; every policy is capped below "
                        "it (raise max-replicas)\n",
                        cfg->policy.max_replicas, need);
    if (r->oracle_gpu_hours > 0)
        util_buf_printf(b,
                        "\nvs oracle: GPU-hours / %.*f, the oracle's (perfect foresight of the "
                        "trace, same serving model and cold start, p99 within the SLA every "
                        "second)\n",
                        sim_hour_digits(r->oracle_gpu_hours), r->oracle_gpu_hours);
}

/* Shortest exact-enough decimal for CSV/JSON: integers without a point;
 * others to six significant digits, and from a million to 1e15 to a thousandth,
 * so that no digit of the integer part is lost (a time of 1700000000.5 and
 * a count of 95439775.6 were printed as 1.7e+09 and 9.54398e+07). */
static void num(struct util_buf *b, double v)
{
    if (!isfinite(v))
        return;
    if (v == floor(v) && fabs(v) < 1e15) {
        util_buf_printf(b, "%.0f", v);
    } else if (fabs(v) < 1e6 || fabs(v) >= 1e15) {
        util_buf_printf(b, "%.6g", v);
    } else {
        char s[64];
        int n = snprintf(s, sizeof(s), "%.3f", v);
        while (n > 0 && s[n - 1] == '0')
            s[--n] = '\0';
        if (n > 0 && s[n - 1] == '.')
            s[--n] = '\0';
        util_buf_puts(b, s);
    }
}

void sim_report_scale_log_csv(struct util_buf *b, const struct sim_result *r)
{
    util_buf_puts(b, "t_seconds,policy,desired_replicas\n");
    for (size_t i = 0; i < r->n; i++) {
        const struct sim_policy_result *x = &r->pol[i];
        for (size_t k = 0; k < x->nchanges; k++) {
            num(b, x->changes[k].t_s);
            util_buf_printf(b, ",%s,%d\n", sim_policy_name(x->policy), x->changes[k].desired);
        }
    }
}

void sim_report_timeline_csv(struct util_buf *b, const struct sim_result *r)
{
    util_buf_puts(b, "t_seconds,policy,desired_replicas,ready_replicas,demand_rps,"
                     "requests_per_gpu,forecast_rps,p99_ms\n");
    for (size_t i = 0; i < r->n; i++) {
        const struct sim_policy_result *x = &r->pol[i];
        for (size_t k = 0; k < x->npoints; k++) {
            const struct sim_point *pt = &x->points[k];
            num(b, pt->t_s);
            util_buf_printf(b, ",%s,%d,%d,", sim_policy_name(x->policy), pt->desired, pt->ready);
            num(b, pt->demand_rps);
            util_buf_puts(b, ",");
            num(b, pt->rps_per_gpu);
            util_buf_puts(b, ",");
            num(b, pt->forecast_rps);
            util_buf_puts(b, ",");
            num(b, round(pt->p99_ms * 10) / 10);
            util_buf_puts(b, "\n");
        }
    }
}

static void jnum(struct util_buf *b, double v)
{
    if (!isfinite(v))
        util_buf_puts(b, "null");
    else
        num(b, v);
}

static void jkv_num(struct util_buf *b, const char *k, double v, bool comma)
{
    util_buf_json_str(b, k);
    util_buf_puts(b, ": ");
    jnum(b, v);
    if (comma)
        util_buf_puts(b, ", ");
}

static void jkv_dur(struct util_buf *b, const char *k, int64_t ms, bool comma)
{
    char d[32];
    dur(ms, d, sizeof(d));
    util_buf_json_str(b, k);
    util_buf_puts(b, ": ");
    util_buf_json_str(b, d);
    if (comma)
        util_buf_puts(b, ", ");
}

void sim_report_json(struct util_buf *b, const struct sim_config *cfg,
                     const struct sim_report_info *info, const struct sim_result *r)
{
    const struct policy_config *p = &cfg->policy;
    const struct sim_hpa_config *h = &cfg->hpa;
    util_buf_puts(b, "{\n  \"trace\": {");
    util_buf_json_str(b, "name");
    util_buf_puts(b, ": ");
    util_buf_json_str(b, info->trace_name);
    util_buf_puts(b, ", ");
    jkv_num(b, "bucket_seconds", info->trace_dt_s, true);
    jkv_num(b, "span_seconds", info->trace_span_s, true);
    jkv_num(b, "missing_buckets", (double)info->trace_missing, true);
    jkv_num(b, "scale", cfg->scale, false);
    util_buf_puts(b, "},\n  \"window\": {");
    jkv_num(b, "start_seconds", r->t_begin_s, true);
    jkv_num(b, "end_seconds", r->t_end_s, true);
    jkv_num(b, "warmup_seconds", r->warmup_s, true);
    jkv_num(b, "requests", r->requests, true);
    jkv_num(b, "peak_demand_rps", r->peak_demand_rps, true);
    jkv_num(b, "oracle_gpu_hours", round(r->oracle_gpu_hours * 1000) / 1000, true);
    jkv_num(b, "oracle_peak_need", r->oracle_peak_need, true);
    jkv_num(b, "peak_need_unbounded", r->peak_need, true);
    util_buf_json_str(b, "max_replicas_too_low");
    util_buf_puts(b, r->peak_need > cfg->policy.max_replicas ? ": true" : ": false");
    util_buf_puts(b, "},\n  \"parameters\": {");
    if (p->capacity_auto) {
        util_buf_json_str(b, "capacity-per-gpu");
        util_buf_puts(b, ": \"auto\", ");
        jkv_num(b, "capacity-start", p->capacity_start, true);
    } else
        jkv_num(b, "capacity-per-gpu", p->capacity_rps_per_gpu, true);
    jkv_num(b, "serve-capacity-per-gpu", sim_config_capacity(cfg), true);
    jkv_num(b, "gpus-per-replica", sim_config_gpus(cfg), true);
    if (cfg->gpu_limit > 0)
        jkv_num(b, "gpu-limit", cfg->gpu_limit, true);
    jkv_dur(b, "service-time", cfg->policy.service_time_ms, true);
    jkv_num(b, "slots-per-replica", slots(cfg), true);
    jkv_dur(b, "cold-start", p->cold_start_ms, true);
    jkv_dur(b, "sla", sim_config_sla_ms(cfg), true);
    jkv_dur(b, "p99-latency-target", p->p99_latency_target_ms, true);
    jkv_num(b, "target-utilization", p->target_utilization, true);
    jkv_num(b, "scale-in-utilization", p->scale_in_utilization, true);
    jkv_dur(b, "scale-out-after", p->scale_out_after_ms, true);
    jkv_dur(b, "scale-in-after", p->scale_in_after_ms, true);
    jkv_num(b, "min-replicas", p->min_replicas, true);
    jkv_num(b, "max-replicas", p->max_replicas, true);
    jkv_num(b, "max-scale-up-step", p->max_scale_up_step, true);
    jkv_num(b, "max-scale-down-step", p->max_scale_down_step, true);
    jkv_dur(b, "decision-interval", p->decision_interval_ms, true);
    jkv_dur(b, "rate-window", cfg->rate_window_ms, true);
    jkv_dur(b, "seasonality", p->seasonality_ms, true);
    jkv_num(b, "forecast-quantile", p->forecast_quantile, true);
    jkv_dur(b, "interval", cfg->interval_ms, true);
    jkv_num(b, "hpa-target", hpa_target(cfg), true);
    jkv_num(b, "hpa-tolerance", h->tolerance, true);
    jkv_dur(b, "hpa-sync-period", h->sync_period_ms, true);
    jkv_dur(b, "hpa-downscale-stabilization", h->downscale_window_ms, true);
    jkv_dur(b, "hpa-upscale-stabilization", h->upscale_window_ms, true);
    jkv_num(b, "hpa-scale-up-pods", h->scale_up_pods, true);
    jkv_num(b, "hpa-scale-up-percent", h->scale_up_percent, true);
    jkv_dur(b, "hpa-scale-up-period", h->scale_up_period_ms, true);
    jkv_num(b, "hpa-scale-down-percent", h->scale_down_percent, true);
    jkv_dur(b, "hpa-scale-down-period", h->scale_down_period_ms, true);
    jkv_dur(b, "hpa-metric-window", h->metric_window_ms, true);
    jkv_dur(b, "hpa-metric-delay", h->metric_delay_ms, true);
    jkv_dur(b, "hpa-scrape-interval", h->scrape_interval_ms, false);
    util_buf_puts(b, "},\n  \"policies\": [");
    for (size_t i = 0; i < r->n; i++) {
        const struct sim_policy_result *x = &r->pol[i];
        util_buf_puts(b, i ? ",\n    {" : "\n    {");
        util_buf_json_str(b, "name");
        util_buf_puts(b, ": ");
        util_buf_json_str(b, sim_policy_name(x->policy));
        util_buf_puts(b, ", ");
        jkv_num(b, "gpu_hours", round(x->gpu_hours * 1000) / 1000, true);
        jkv_num(b, "gpu_hours_vs_oracle", round(x->gpu_hours_vs_oracle * 10000) / 10000, true);
        if (x->policy == SIM_PREDICTIVE) {
            jkv_num(b, "plan_coverage", x->plan_coverage, true);
            jkv_num(b, "plan_margin", x->plan_margin, true);
            jkv_num(b, "plans_resolved", (double)x->plan_resolved, true);
        }
        if (cfg->policy.capacity_auto && x->capacity_source) {
            jkv_num(b, "capacity_learned", x->capacity_learned, true);
            util_buf_json_str(b, "capacity_source");
            util_buf_puts(b, ": ");
            util_buf_json_str(b, x->capacity_source);
            util_buf_puts(b, ", ");
        }
        jkv_num(b, "intervals", (double)x->intervals, true);
        jkv_num(b, "sla_violating_intervals", (double)x->sla_intervals, true);
        jkv_num(b, "requests", round(x->requests), true);
        jkv_num(b, "requests_over_sla", round(x->requests_over_sla * 10) / 10, true);
        jkv_num(b, "requests_over_sla_pct",
                x->requests > 0 ? 100.0 * x->requests_over_sla / x->requests : 0, true);
        jkv_num(b, "scaling_actions", (double)x->scaling_actions, true);
        jkv_num(b, "flaps", (double)x->flaps, true);
        jkv_num(b, "peak_replicas", x->peak_replicas, true);
        jkv_num(b, "mean_replicas", x->mean_replicas, true);
        jkv_num(b, "max_p99_ms", round(x->max_p99_ms * 10) / 10, true);
        if (cfg->gpu_limit > 0) {
            jkv_num(b, "pending_replica_hours", round(x->pending_replica_hours * 1000) / 1000,
                    true);
            jkv_num(b, "peak_unschedulable", x->peak_unschedulable, true);
        }
        util_buf_puts(b, "\"actions_by_reason\": {");
        for (size_t k = 0; k < x->nreasons; k++)
            jkv_num(b, x->reasons[k].name, (double)x->reasons[k].count, k + 1 < x->nreasons);
        util_buf_puts(b, "}}");
    }
    util_buf_puts(b, "\n  ]");
    if (r->nsweep > 0) {
        util_buf_puts(b, ",\n  \"quantile_sweep\": [");
        for (size_t i = 0; i < r->nsweep; i++) {
            const struct sim_sweep_point *x = &r->sweep[i];
            util_buf_puts(b, i ? ",\n    {" : "\n    {");
            jkv_num(b, "forecast_quantile", x->quantile, true);
            util_buf_json_str(b, "configured");
            util_buf_puts(b, x->configured ? ": true, " : ": false, ");
            jkv_num(b, "gpu_hours", round(x->gpu_hours * 1000) / 1000, true);
            jkv_num(b, "gpu_hours_vs_oracle", round(x->gpu_hours_vs_oracle * 10000) / 10000,
                    true);
            jkv_num(b, "intervals", (double)x->intervals, true);
            jkv_num(b, "sla_violating_intervals", (double)x->sla_intervals, true);
            jkv_num(b, "requests_over_sla_pct",
                    x->requests > 0 ? 100.0 * x->requests_over_sla / x->requests : 0, true);
            jkv_num(b, "scaling_actions", (double)x->scaling_actions, true);
            jkv_num(b, "flaps", (double)x->flaps, true);
            jkv_num(b, "plan_coverage", x->plan_coverage, false);
            util_buf_puts(b, "}");
        }
        util_buf_puts(b, "\n  ]");
    }
    util_buf_puts(b, "\n}\n");
}

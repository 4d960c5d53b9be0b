/* SPDX-License-Identifier: Apache-2.0 */
/* controller/metrics: gpuscaler's own Prometheus metrics (text format
 * 0.0.4): decisions by reason, scale writes, events, leadership and the
 * per-workload numbers behind each decision. */
#include "controller-int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"

static void family(struct util_buf *b, const char *name, const char *type, const char *help)
{
    util_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* label values are Kubernetes names (no quotes or backslashes), but escape anyway */
static void label_value(struct util_buf *b, const char *v)
{
    for (const char *p = v; *p; p++) {
        if (*p == '\\' || *p == '"')
            util_buf_puts(b, "\\");
        if (*p == '\n') {
            util_buf_puts(b, "\\n");
            continue;
        }
        util_buf_append(b, p, 1);
    }
}

static void wl_sample(struct util_buf *b, const char *name, const struct ctl_wl *w, double v)
{
    util_buf_printf(b, "%s{namespace=\"", name);
    label_value(b, w->ns);
    util_buf_puts(b, "\",deployment=\"");
    label_value(b, w->name);
    if (isfinite(v))
        util_buf_printf(b, "\"} %.6g\n", v);
    else if (isinf(v)) /* load on no ready GPU: not the NaN of no usable metrics */
        util_buf_puts(b, v > 0 ? "\"} +Inf\n" : "\"} -Inf\n");
    else
        util_buf_puts(b, "\"} NaN\n");
}

/* gpuscaler_capacity_per_gpu: the configured value (source="configured")
 * and what the pods' metrics show (source="learned"), each when there is
 * one; with auto and nothing learned yet, the value sized with
 * (source="start" or "observed"). */
/* A Deployment's series: once decided, and while its annotations are valid
 * (invalid ones stop the decisions: the last one's numbers would be served
 * for as long, as if still made) */
static bool exported(const struct ctl_wl *w)
{
    return w->have_last && w->config_ok;
}

static void write_capacity(const struct controller *c, struct util_buf *b)
{
    family(b, "gpuscaler_capacity_per_gpu", "gauge",
           "Demand one GPU serves (requests/s, or weighted tokens/s: gpuscaler_demand_unit): "
           "configured, or learned from the pods' metrics.");
    for (size_t i = 0; i < CTL_WL_BUCKETS; i++) {
        for (struct ctl_wl *w = c->table[i]; w; w = w->next) {
            if (!exported(w))
                continue;
            double v[3] = {NAN, w->cap_est.value, NAN};
            const char *src[3] = {"configured", "learned",
                                  capacity_source_name(w->cap_source)};
            if (w->cap_source == CAPACITY_SOURCE_CONFIGURED)
                v[0] = w->cap_in_use;
            else if (w->cap_source != CAPACITY_SOURCE_LEARNED)
                v[2] = w->cap_in_use;
            for (int k = 0; k < 3; k++) {
                if (!isfinite(v[k]))
                    continue;
                util_buf_puts(b, "gpuscaler_capacity_per_gpu{namespace=\"");
                label_value(b, w->ns);
                util_buf_puts(b, "\",deployment=\"");
                label_value(b, w->name);
                util_buf_printf(b, "\",source=\"%s\"} %.6g\n", src[k], v[k]);
            }
        }
    }
}

/* Per-Deployment gauges: each reads its value from the workload; false
 * leaves the Deployment out of that family. */
struct wl_gauge {
    const char *name, *help;
    bool (*get)(const struct ctl_wl *w, double *v);
};

static bool g_desired(const struct ctl_wl *w, double *v) { *v = w->last.desired; return true; }
static bool g_rpg(const struct ctl_wl *w, double *v) { *v = w->last.requests_per_gpu; return true; }
static bool g_frpg(const struct ctl_wl *w, double *v)
{
    *v = w->last.forecast_requests_per_gpu;
    return true;
}
static bool g_util(const struct ctl_wl *w, double *v) { *v = w->last.utilization; return true; }
static bool g_cold(const struct ctl_wl *w, double *v)
{
    *v = (double)w->learned_cold_start_ms / 1000.0;
    return true;
}
static bool g_demand(const struct ctl_wl *w, double *v) { *v = w->last.demand_rps; return true; }
static bool g_pq_lag(const struct ctl_wl *w, double *v)
{
    *v = w->cfg.source == CTL_SOURCE_PROMETHEUS && w->pq_lag_known && !w->cfg.promql_rate[0]
             ? (double)w->pq_lag_ms / 1000.0
             : NAN;
    return true;
}
static bool g_coverage(const struct ctl_wl *w, double *v)
{
    *v = w->plan_resolved > 0 ? w->plan_coverage : NAN;
    return true;
}
static bool g_recent(const struct ctl_wl *w, double *v)
{
    *v = w->plan_resolved > 0 ? (w->plan_recent ? 1 : 0) : NAN;
    return true;
}
static bool g_learned(const struct ctl_wl *w, double *v)
{
    *v = w->plan_resolved > 0 ? (w->plan_learned ? 1 : 0) : NAN;
    return true;
}
static bool g_seasons(const struct ctl_wl *w, double *v)
{
    *v = w->plan_resolved > 0 ? (w->plan_seasons ? 1 : 0) : NAN;
    return true;
}
static bool g_service(const struct ctl_wl *w, double *v)
{
    *v = w->service_ms > 0 ? w->service_ms / 1000.0 : NAN;
    return true;
}
static bool g_want(const struct ctl_wl *w, double *v)
{
    *v = w->last.want > 0 ? w->last.want : w->last.desired;
    return true;
}
static bool g_tokens(const struct ctl_wl *w, double *v)
{
    *v = w->request_size > 0 ? w->request_size : NAN;
    return w->cfg.policy.demand_unit == POLICY_UNIT_TOKENS;
}
static bool g_unsched(const struct ctl_wl *w, double *v)
{
    *v = (double)w->last.unschedulable;
    return true;
}
static bool g_stalled(const struct ctl_wl *w, double *v)
{
    *v = (double)w->last.stalled;
    return true;
}
static bool g_sched(const struct ctl_wl *w, double *v)
{
    *v = (double)w->learned_schedule_ms / 1000.0;
    return true;
}
static bool g_load(const struct ctl_wl *w, double *v)
{
    *v = (double)w->learned_load_ms / 1000.0;
    return true;
}

static void write_gauges(const struct controller *c, struct util_buf *b,
                         const struct wl_gauge *g, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        family(b, g[k].name, "gauge", g[k].help);
        for (size_t i = 0; i < CTL_WL_BUCKETS; i++) {
            for (struct ctl_wl *w = c->table[i]; w; w = w->next) {
                double v;
                if (exported(w) && g[k].get(w, &v))
                    wl_sample(b, g[k].name, w, v);
            }
        }
    }
}

void controller_write_metrics(struct controller *c, struct util_buf *b)
{
    family(b, "gpuscaler_decisions_total", "counter", "Policy decisions by reason.");
    for (int r = 0; r < POLICY_REASON_COUNT; r++)
        util_buf_printf(b, "gpuscaler_decisions_total{reason=\"%s\"} %llu\n",
                        policy_reason_name((enum policy_reason)r),
                        (unsigned long long)c->decisions[r]);
    family(b, "gpuscaler_scale_patches_total", "counter", "Successful writes of /scale.");
    util_buf_printf(b, "gpuscaler_scale_patches_total %llu\n",
                    (unsigned long long)c->scale_patches);
    family(b, "gpuscaler_scale_conflicts_total", "counter", "409 Conflicts on /scale, retried.");
    util_buf_printf(b, "gpuscaler_scale_conflicts_total %llu\n",
                    (unsigned long long)c->scale_conflicts);
    family(b, "gpuscaler_scale_errors_total", "counter", "Failed /scale reads or writes.");
    util_buf_printf(b, "gpuscaler_scale_errors_total %llu\n", (unsigned long long)c->scale_errors);
    family(b, "gpuscaler_events_total", "counter", "Kubernetes Events by outcome.");
    util_buf_printf(b, "gpuscaler_events_total{outcome=\"sent\"} %llu\n",
                    (unsigned long long)c->events_sent);
    util_buf_printf(b, "gpuscaler_events_total{outcome=\"suppressed\"} %llu\n",
                    (unsigned long long)c->events_suppressed);
    family(b, "gpuscaler_status_writes_waiting", "gauge",
           "Status annotation writes waiting for the report budget.");
    util_buf_printf(b, "gpuscaler_status_writes_waiting{queue=\"decision\"} %zu\n",
                    c->status_q[0].len);
    util_buf_printf(b, "gpuscaler_status_writes_waiting{queue=\"refresh\"} %zu\n",
                    c->status_q[1].len);
    family(b, "gpuscaler_status_writes_total", "counter",
           "Status annotation writes sent, by kind (decision first, refresh rate-limited).");
    util_buf_printf(b, "gpuscaler_status_writes_total{kind=\"decision\"} %llu\n",
                    (unsigned long long)c->status_writes[0]);
    util_buf_printf(b, "gpuscaler_status_writes_total{kind=\"refresh\"} %llu\n",
                    (unsigned long long)c->status_writes[1]);
    family(b, "gpuscaler_invalid_annotations_total", "counter",
           "Workloads found with invalid annotations.");
    util_buf_printf(b, "gpuscaler_invalid_annotations_total %llu\n",
                    (unsigned long long)c->invalid_annotations);
    family(b, "gpuscaler_invalid_deployments", "gauge",
           "Tracked Deployments held now because an annotation is invalid.");
    unsigned invalid = 0;
    for (size_t i = 0; i < CTL_WL_BUCKETS; i++)
        for (const struct ctl_wl *w = c->table[i]; w; w = w->next)
            invalid += !w->config_ok;
    util_buf_printf(b, "gpuscaler_invalid_deployments %u\n", invalid);
    family(b, "gpuscaler_leader", "gauge", "1 while this instance leads and acts.");
    util_buf_printf(b, "gpuscaler_leader %d\n", controller_leading(c) ? 1 : 0);
    if (c->shards) {
        family(b, "gpuscaler_shards_held", "gauge",
               "Shards whose Lease this replica holds and renewed within renew-deadline.");
        util_buf_printf(b, "gpuscaler_shards_held %u\n", ctl_shards_held(c));
        family(b, "gpuscaler_shards", "gauge", "Shards configured (sharding.shards).");
        util_buf_printf(b, "gpuscaler_shards %u\n", c->nshards);
        family(b, "gpuscaler_shard_members", "gauge",
               "Live replicas (unexpired member Leases) seen at the last round.");
        util_buf_printf(b, "gpuscaler_shard_members %zu\n", ctl_shards_members(c));
        uint64_t h[3];
        ctl_shards_handovers(c, h);
        family(b, "gpuscaler_shard_handovers_total", "counter",
               "Handovers of this replica's shards: acquired, released, lost.");
        static const char *const kinds[] = {"acquired", "released", "lost"};
        for (int k = 0; k < 3; k++)
            util_buf_printf(b, "gpuscaler_shard_handovers_total{kind=\"%s\"} %llu\n", kinds[k],
                            (unsigned long long)h[k]);
    }
    family(b, "gpuscaler_caches_synced", "gauge", "1 once the Kubernetes caches synced.");
    util_buf_printf(b, "gpuscaler_caches_synced %d\n", controller_synced(c) ? 1 : 0);
    family(b, "gpuscaler_tracked_deployments", "gauge", "Deployments opted in.");
    util_buf_printf(b, "gpuscaler_tracked_deployments %zu\n", c->nwl);
    family(b, "gpuscaler_decision_round_seconds", "gauge", "Duration of the last decision round.");
    util_buf_printf(b, "gpuscaler_decision_round_seconds %.6f\n", c->last_tick_seconds);
    family(b, "gpuscaler_clock_steps_total", "counter",
           "Wall clock steps (set forward or back by more than 2 s) seen between two ticks.");
    util_buf_printf(b, "gpuscaler_clock_steps_total %llu\n", (unsigned long long)c->clock_steps);
    ctl_checkpoint_write_metrics(c, b);
    ctl_write_workload_metrics(c, b);
}

void ctl_write_workload_metrics(const struct controller *c, struct util_buf *b)
{
    static const struct wl_gauge per[] = {
        {"gpuscaler_desired_replicas", "Replicas the policy chose.", g_desired},
        {"gpuscaler_requests_per_gpu",
         "Demand per ready GPU per second, in the demand unit (gpuscaler_demand_unit).", g_rpg},
        {"gpuscaler_forecast_requests_per_gpu",
         "Planned forecast demand per GPU per second, in the demand unit.", g_frpg},
        {"gpuscaler_utilization", "Demand per GPU over capacity per GPU.", g_util},
        {"gpuscaler_learned_cold_start_seconds",
         "Learned cold start: scheduling delay + model-load time of the Ready pods.", g_cold},
        {"gpuscaler_prometheus_lag_seconds",
         "How far Prometheus' newest sample of the request counter lay behind the query's "
         "time (metrics-source prometheus, default queries): the rate, p99 and busy queries "
         "are evaluated that much earlier. NaN when not measured.",
         g_pq_lag},
        {"gpuscaler_demand_requests_per_second",
         "Arrivals (completions + refused requests + backlog growth) plus the queue's drain "
         "rate, in the demand unit.",
         g_demand},
        {"gpuscaler_forecast_plan_coverage",
         "Share of resolved forecast plans whose realised peak stayed within them.", g_coverage},
        {"gpuscaler_forecast_plan_recent_peaks",
         "1 when the plan is the quantile of the recent window peaks (it has planned better "
         "lately than the model), 0 when it is the model's, NaN before a plan resolved.",
         g_recent},
        {"gpuscaler_forecast_plan_learned",
         "1 when the upper plan is the learned quantile regression of the window peak (after "
         "about 3.3 hours of history), 0 before, NaN before a plan resolved.",
         g_learned},
        {"gpuscaler_forecast_plan_recent_seasons",
         "1 when the recent seasons' plan (the same time on the last 7 days, at today's level) "
         "raised the likely peak, 0 when not, NaN before a plan resolved.",
         g_seasons},
        {"gpuscaler_learned_service_time_seconds",
         "Service time learned by Little's law (running requests / completions).", g_service},
        {"gpuscaler_want_replicas", "Replicas the acting or waiting rule asks for, before bounds.",
         g_want},
        {"gpuscaler_tokens_per_request",
         "demand-unit tokens: weighted tokens per completed request last measured.", g_tokens},
    };
    write_gauges(c, b, per, UTIL_ARRAY_LEN(per));
    write_capacity(c, b);
    /* pods no node has a free GPU for, and the learned cold start's two parts
     * (the look-ahead is their sum) */
    static const struct wl_gauge gpu[] = {
        {"gpuscaler_unschedulable_replicas",
         "Replicas asked for that no node can place: Pending, Unschedulable for lack of a GPU.",
         g_unsched},
        {"gpuscaler_stalled_replicas",
         "Replicas placed but failing to start (CrashLoopBackOff, ImagePullBackOff, ...) or not "
         "ready for 3 cold starts: not counted as coming capacity.",
         g_stalled},
        {"gpuscaler_learned_schedule_delay_seconds",
         "Longest creation-to-PodScheduled time of the Ready pods.", g_sched},
        {"gpuscaler_learned_load_seconds",
         "Longest PodScheduled-to-Ready (model load) time of the Ready pods.", g_load},
    };
    write_gauges(c, b, gpu, UTIL_ARRAY_LEN(gpu));
    family(b, "gpuscaler_demand_unit", "gauge",
           "1 for the unit the workload's demand, capacity and rates are counted in.");
    for (size_t i = 0; i < CTL_WL_BUCKETS; i++) {
        for (struct ctl_wl *w = c->table[i]; w; w = w->next) {
            if (!exported(w))
                continue;
            util_buf_puts(b, "gpuscaler_demand_unit{namespace=\"");
            label_value(b, w->ns);
            util_buf_puts(b, "\",deployment=\"");
            label_value(b, w->name);
            util_buf_printf(b, "\",unit=\"%s\"} 1\n",
                            policy_demand_unit_name(w->cfg.policy.demand_unit));
        }
    }
}

size_t controller_forecast_memory(const struct controller *c)
{
    size_t n = 0;
    for (size_t i = 0; i < CTL_WL_BUCKETS; i++)
        for (const struct ctl_wl *w = c->table[i]; w; w = w->next)
            if (w->fc)
                n += forecast_memory(w->fc);
    return n;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* policy/explain: the report stage's words: one human line per decision,
 * written from the same figures the decision used (reason, desired, the
 * rule's want, demand, plan, per-replica rate), so an Event, the status
 * annotation and a log line never disagree with what was decided. */
#include "policy-int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

static void dur(int64_t ms, char *buf, size_t len)
{
    util_format_duration(ms < 0 ? 0 : ms, buf, len);
}

/* How the demand is sized: "8 req/s per replica, 95% of the 8.42 that keeps
 * p99 <= 8s" or "8 req/s per replica at 80% of capacity" */
static void sizing(const struct policy_tick *t, char *buf, size_t len)
{
    char a[32];
    if (t->sz.from_sla) {
        dur(t->cfg->p99_latency_target_ms, a, sizeof(a));
        snprintf(buf, len, "%.3g req/s per replica, %.0f%% of the %.3g that keeps p99 <= %s",
                 t->sz_in.per_replica_rps, (1 - POLICY_SCALE_IN_MARGIN) * 100,
                 t->sz.per_replica_rps, a);
    } else {
        snprintf(buf, len, "%.3g req/s per replica at %.0f%% of capacity",
                 t->sz.per_replica_rps, t->cfg->target_utilization * 100);
    }
}

/* In place: the unit words of a line written in requests, for demand-unit
 * tokens ("req/s" -> "tok/s", "requests/GPU" -> "tokens/GPU"). Never longer. */
static void unit_words(const struct policy_config *cfg, char *e)
{
    if (cfg->demand_unit != POLICY_UNIT_TOKENS)
        return;
    static const struct {
        const char *from, *to;
    } words[] = {{"req/s", "tok/s"}, {"requests/GPU", "tokens/GPU"}};
    for (size_t w = 0; w < UTIL_ARRAY_LEN(words); w++) {
        size_t fl = strlen(words[w].from), tl = strlen(words[w].to);
        char *p = e;
        while ((p = strstr(p, words[w].from)) != NULL) {
            memcpy(p, words[w].to, tl);
            memmove(p + tl, p + fl, strlen(p + fl) + 1);
            p += tl;
        }
    }
}

static void explain_words(const struct policy_tick *t, const struct policy_state *st,
                          struct policy_decision *out);

void policy_explain(const struct policy_tick *t, const struct policy_state *st,
                    struct policy_decision *out)
{
    explain_words(t, st, out);
    unit_words(t->cfg, out->explain);
}

void policy_explain_stale(const struct policy_config *cfg, const struct policy_input *in,
                          struct policy_decision *out)
{
    char a[32], b[32], why[96];
    int32_t cur = in->current_replicas < 0 ? 0 : in->current_replicas;
    if (!(cfg->capacity_rps_per_gpu > 0 && cfg->capacity_rps_per_gpu <= 1e9)) {
        snprintf(why, sizeof(why), "no capacity-per-gpu to size with (auto: nothing learned yet)");
    } else if (!in->metrics_valid || in->metrics_time_ms == POLICY_NEVER ||
               !isfinite(in->request_rate) || in->request_rate < 0) {
        snprintf(why, sizeof(why), "metrics unavailable");
    } else {
        dur(in->now_ms - in->metrics_time_ms, a, sizeof(a));
        dur(cfg->metrics_stale_after_ms, b, sizeof(b));
        snprintf(why, sizeof(why), "metrics stale (last %s ago, limit %s)", a, b);
    }
    if (out->reason == POLICY_CLAMPED)
        snprintf(out->explain, sizeof(out->explain),
                 "%s, but %d replicas are outside the bounds [%d, %d]: %d -> %d", why, cur,
                 cfg->min_replicas, cfg->max_replicas, cur, out->desired);
    else
        snprintf(out->explain, sizeof(out->explain),
                 "%s: holding %d replicas (never scaling in without data)", why, out->desired);
}

static void explain_words(const struct policy_tick *t, const struct policy_state *st,
                          struct policy_decision *out)
{
    const struct policy_config *cfg = t->cfg;
    char *e = out->explain;
    const size_t n = sizeof(out->explain);
    char a[32], b[32], sz[128], h[32];
    double rpg = out->requests_per_gpu, cap = t->cap;
    sizing(t, sz, sizeof(sz));
    dur(policy_horizon_ms(cfg, 0), h, sizeof(h));

    switch (out->reason) {
    case POLICY_CLAMPED:
        snprintf(e, n, "%d replicas outside the bounds [%d, %d]: %d -> %d", t->cur, t->lo, t->hi,
                 t->cur, out->desired);
        return;
    case POLICY_SCALED_OUT:
        if (t->wake) {
            snprintf(e, n, "%.4g req/s arrive at 0 replicas (queue %.4g), the demand needs "
                           "%lld: %d -> %d",
                     t->in->request_rate, t->in->queue_depth > 0 ? t->in->queue_depth : 0,
                     (long long)t->need_now, t->cur, out->desired);
            return;
        }
        dur(t->now - st->above_since_ms, a, sizeof(a));
        snprintf(e, n, "requests/GPU %.3g above %.3g (%.0f%% of %.3g) for %s: %d -> %d replicas",
                 rpg, cfg->target_utilization * cap, cfg->target_utilization * 100, cap, a,
                 t->cur, out->desired);
        return;
    case POLICY_SLA_SCALE_OUT: {
        int k = snprintf(e, n, "demand %.4g req/s needs %lld replicas (%s): %d -> %d",
                         t->dem.rate_rps, (long long)t->need_now, sz, t->cur, out->desired);
        if (t->dem.ramp && k > 0 && (size_t)k < n) {
            char c[32];
            dur(cfg->cold_start_ms, c, sizeof(c));
            k += snprintf(e + k, n - (size_t)k, "; arrivals are on a ramp, sized %s ahead", c);
        } else if (t->dem.rising && k > 0 && (size_t)k < n) {
            k += snprintf(e + k, n - (size_t)k,
                          "; arrivals %.4g req/s in the last tick (window %.4g)",
                          t->dem.arrival_rps, t->in->request_rate);
        }
        if (t->dem.drain_rps > 0 && k > 0 && (size_t)k < n)
            k += snprintf(e + k, n - (size_t)k,
                          "; %.4g req/s of it drains, at full capacity, within %s the %.0f "
                          "requests queued when new replicas serve",
                          t->dem.drain_rps, h, t->dem.queue);
        if (t->plan_out_ok && t->need_out > t->need_now && out->desired > t->need_now && k > 0 &&
            (size_t)k < n)
            snprintf(e + k, n - (size_t)k, "; the forecast peak %.4g req/s within %s needs %lld",
                     t->outer_rps, h, (long long)t->need_out);
        return;
    }
    case POLICY_PREDICTIVE_SCALE_OUT:
        snprintf(e, n, "likely forecast peak %.4g req/s within %s needs %lld replicas: %d -> %d "
                       "ahead of load",
                 out->forecast_likely_rps, h, (long long)t->need_likely, t->cur, out->desired);
        return;
    case POLICY_LATENCY_SCALE_OUT:
        dur(cfg->p99_latency_target_ms, a, sizeof(a));
        snprintf(e, n, "p99 %.0fms above the %s target for a full window: %d -> %d replicas",
                 t->in->p99_latency_ms, a, t->cur, out->desired);
        return;
    case POLICY_SCALED_IN:
        dur(cfg->scale_in_after_ms, a, sizeof(a));
        snprintf(e, n, "requests/GPU %.3g below %.3g (%.0f%% of %.3g) for %s: %d -> %d replicas",
                 rpg, cfg->scale_in_utilization * cap, cfg->scale_in_utilization * 100, cap, a,
                 t->cur, out->desired);
        return;
    case POLICY_PREDICTIVE_SCALE_IN:
        snprintf(e, n, "demand %.4g req/s and forecast peak %.4g req/s within %s need %d "
                       "replicas: %d -> %d",
                 t->dem.rate_rps, t->in->forecast_rate, h, out->want, t->cur, out->desired);
        return;
    case POLICY_HOLD_AT_MAX:
        snprintf(e, n, "load needs %d replicas but already at max-replicas %d", out->want,
                 t->hi);
        return;
    case POLICY_HOLD_GPU_CAPACITY:
        snprintf(e, n,
                 "load needs %d replicas but %d of the %d asked for cannot be scheduled (no "
                 "node has a free GPU): holding %d, %d placed",
                 out->want, t->unsched, t->cur, t->cur, t->cur - t->unsched);
        return;
    case POLICY_HOLD_SCALE_OUT_PENDING:
        if (t->stalled > 0)
            snprintf(e, n,
                     "requests/GPU %.3g above target but %d replicas asked for cover the load "
                     "(%d ready, %d stalled: failing to start, or not ready for %d cold "
                     "starts): waiting for them",
                     rpg, t->cur, t->ready, t->stalled, POLICY_STALL_COLD_STARTS);
        else
            snprintf(e, n,
                     "requests/GPU %.3g above target but %d replicas asked for cover the load "
                     "(%d ready): waiting for them",
                     rpg, t->cur, t->ready);
        return;
    case POLICY_HOLD_LATENCY:
        snprintf(e, n, "load fits %d replicas but %s: not scaling in", out->want,
                 t->lat_above ? "p99 is above target" : "requests are queueing");
        return;
    case POLICY_HOLD_AT_MIN:
        snprintf(e, n, "load low; at min-replicas %d", t->lo);
        return;
    case POLICY_HOLD_BELOW_WAITING:
        if (t->none_ready) {
            snprintf(e, n, "no replica of %d is ready: requests/GPU is not measured, no "
                           "scale-in: holding %d",
                     t->cur, t->cur);
        } else if (t->zero_wait == ZERO_WAIT_COMING) {
            snprintf(e, n, "nothing arrives, but %d of %d replicas %s: not scaling to zero "
                           "before they serve",
                     t->starting + t->unsched, t->cur,
                     t->unsched > 0 ? "wait for a GPU or start" : "are starting");
        } else if (t->zero_wait) {
            dur(st->idle_since_ms == POLICY_NEVER ? 0 : t->now - st->idle_since_ms, a,
                sizeof(a));
            dur(cfg->scale_in_after_ms, b, sizeof(b));
            snprintf(e, n, "no request for %s of the %s scale-in-after that scaling to zero "
                           "waits for: holding %d",
                     a, b, t->cur);
        } else if (out->rule == POLICY_PREDICTIVE_SCALE_IN && t->starting > 0) {
            snprintf(e, n,
                     "demand %.4g req/s and forecast peak %.4g req/s fit %lld replicas, but %d of "
                     "%d are still starting: holding %d",
                     t->dem.rate_rps, t->in->forecast_rate, (long long)t->floor, t->starting,
                     t->cur, t->cur);
        } else if (out->rule == POLICY_PREDICTIVE_SCALE_IN && t->floors_short) {
            dur(st->floor_since_ms == POLICY_NEVER ? 0 : t->now - st->floor_since_ms, a,
                sizeof(a));
            dur(cfg->scale_in_stabilization_ms, b, sizeof(b));
            snprintf(e, n,
                     "demand %.4g req/s and forecast peak %.4g req/s fit %lld replicas, but "
                     "floors are known for %s of the %s scale-in-stabilization (since the "
                     "start, or since metrics came back): holding %d",
                     t->dem.rate_rps, t->in->forecast_rate, (long long)t->floor, a, b, t->cur);
        } else if (out->rule == POLICY_PREDICTIVE_SCALE_IN) {
            dur(cfg->scale_in_stabilization_ms, b, sizeof(b));
            snprintf(e, n,
                     "demand %.4g req/s and forecast peak %.4g req/s fit %lld replicas, but the "
                     "last %s needed %d: holding %d",
                     t->dem.rate_rps, t->in->forecast_rate, (long long)t->floor, b, out->want,
                     t->cur);
        } else if (out->rule == POLICY_SCALED_IN && out->want >= t->cur) {
            snprintf(e, n, "requests/GPU %.3g low but demand needs %d replicas: holding %d", rpg,
                     out->want, t->cur);
        } else {
            dur(t->now - st->below_since_ms, a, sizeof(a));
            dur(cfg->scale_in_after_ms, b, sizeof(b));
            snprintf(e, n, "requests/GPU %.3g below %.3g for %s of %s: holding %d replicas",
                     rpg, cfg->scale_in_utilization * cap, a, b, t->cur);
        }
        return;
    case POLICY_HOLD_ABOVE_WAITING:
        dur(t->now - st->above_since_ms, a, sizeof(a));
        dur(cfg->scale_out_after_ms, b, sizeof(b));
        snprintf(e, n, "requests/GPU %.3g above %.3g for %s of %s: holding %d replicas", rpg,
                 cfg->target_utilization * cap, a, b, t->cur);
        return;
    case POLICY_HOLD_WITHIN_BAND:
    default:
        if (t->plan)
            snprintf(e, n,
                     "demand %.4g req/s needs %lld replicas, the likely forecast peak %.4g "
                     "req/s within %s %lld, its upper bound %.4g req/s keeps %lld: holding %d",
                     t->dem.rate_rps, (long long)UTIL_MAX((int64_t)t->lo, t->need_now),
                     out->forecast_likely_rps, h, (long long)t->need_likely,
                     t->in->forecast_rate, (long long)t->floor, t->cur);
        else
            snprintf(e, n, "requests/GPU %.3g within [%.3g, %.3g]: holding %d replicas", rpg,
                     cfg->scale_in_utilization * cap, cfg->target_utilization * cap, t->cur);
        return;
    }
}

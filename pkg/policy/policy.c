/* SPDX-License-Identifier: Apache-2.0 */
/* policy: the scaling decision for one workload at one tick.
 *
 * policy_decide() is a pure function of (config, clocks, observation): it
 * updates the two sustained-rule clocks in policy_state and returns the
 * replica count with a reason. Order of precedence: missing/stale metrics
 * (hold), bounds (clamp into [min, max]), scale-out (sustained rule, then
 * forecast, then latency guard), scale-in (sustained rule with hysteresis),
 * hold. See docs/policy.md. */
#include "policy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

static const char *const reason_names[POLICY_REASON_COUNT] = {
    [POLICY_HOLD_WITHIN_BAND] = "WithinBand",
    [POLICY_HOLD_ABOVE_WAITING] = "AboveTargetWaiting",
    [POLICY_HOLD_BELOW_WAITING] = "BelowTargetWaiting",
    [POLICY_HOLD_SCALE_OUT_PENDING] = "ScaleOutPending",
    [POLICY_HOLD_AT_MAX] = "AtMaxReplicas",
    [POLICY_HOLD_AT_MIN] = "AtMinReplicas",
    [POLICY_HOLD_LATENCY] = "ScaleInBlockedByLatency",
    [POLICY_METRICS_UNAVAILABLE] = "MetricsUnavailable",
    [POLICY_SCALED_OUT] = "ScaledOut",
    [POLICY_PREDICTIVE_SCALE_OUT] = "PredictiveScaleOut",
    [POLICY_LATENCY_SCALE_OUT] = "LatencyScaleOut",
    [POLICY_SCALED_IN] = "ScaledIn",
    [POLICY_CLAMPED] = "OutsideReplicaBounds",
};

const char *policy_reason_name(enum policy_reason r)
{
    return (unsigned)r < POLICY_REASON_COUNT ? reason_names[r] : "Unknown";
}

bool policy_reason_is_action(enum policy_reason r)
{
    return r == POLICY_SCALED_OUT || r == POLICY_PREDICTIVE_SCALE_OUT ||
           r == POLICY_LATENCY_SCALE_OUT || r == POLICY_SCALED_IN || r == POLICY_CLAMPED;
}

void policy_state_init(struct policy_state *st)
{
    st->above_since_ms = POLICY_NEVER;
    st->below_since_ms = POLICY_NEVER;
    st->latency_above_since_ms = POLICY_NEVER;
    st->forecast_above_since_ms = POLICY_NEVER;
    st->last_scale_ms = POLICY_NEVER;
}

static int32_t clamp_i32(int64_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : v > hi ? hi : (int32_t)v;
}

/* Replicas needed to serve rate at the per-replica target; ceil with a small
 * tolerance so that exactly-at-target does not round up. */
static int64_t replicas_for(double rate, double per_replica)
{
    if (!(rate > 0))
        return 0;
    double r = rate / per_replica;
    if (r > 1e7)
        return 10000000;
    return (int64_t)ceil(r - 1e-9);
}

static void tick_clock(int64_t *since, bool cond, int64_t now)
{
    if (!cond)
        *since = POLICY_NEVER;
    else if (*since == POLICY_NEVER)
        *since = now;
}

static bool clock_fired(int64_t since, int64_t window, int64_t now)
{
    return since != POLICY_NEVER && now - since >= window;
}

static void fmt_dur(int64_t ms, char *buf, size_t len)
{
    util_format_duration(ms < 0 ? 0 : ms, buf, len);
}

void policy_decide(const struct policy_config *cfg, struct policy_state *st,
                   const struct policy_input *in, struct policy_decision *out)
{
    memset(out, 0, sizeof(*out));
    const int64_t now = in->now_ms;
    const int32_t cur = in->current_replicas < 0 ? 0 : in->current_replicas;
    const int32_t lo = cfg->min_replicas, hi = cfg->max_replicas;
    double gpus = cfg->gpus_per_replica > 0 ? cfg->gpus_per_replica : in->gpus_per_replica;
    if (!(gpus > 0))
        gpus = 1;
    const double cap = cfg->capacity_rps_per_gpu;
    const double per_replica = cfg->target_utilization * cap * gpus;
    char a[32], b[32];

    out->desired = clamp_i32(cur, lo, hi);
    out->requests_per_gpu = NAN;
    out->utilization = NAN;
    out->forecast_requests_per_gpu = NAN;
    out->above_since_ms = out->below_since_ms = POLICY_NEVER;
    out->scale_out_at_ms = out->scale_in_at_ms = POLICY_NEVER;

    /* 1. No trustworthy data: hold (bounds still apply), restart the clocks so
     * no rule fires on evidence gathered before the gap. */
    bool stale = !in->metrics_valid || !isfinite(in->request_rate) || in->request_rate < 0 ||
                 in->metrics_time_ms == POLICY_NEVER ||
                 now - in->metrics_time_ms > cfg->metrics_stale_after_ms;
    if (stale) {
        st->above_since_ms = st->below_since_ms = st->latency_above_since_ms = POLICY_NEVER;
        st->forecast_above_since_ms = POLICY_NEVER;
        out->reason = POLICY_METRICS_UNAVAILABLE;
        if (!in->metrics_valid || in->metrics_time_ms == POLICY_NEVER) {
            snprintf(out->explain, sizeof(out->explain),
                     "metrics unavailable: holding %d replicas (never scaling in without data)",
                     out->desired);
        } else {
            fmt_dur(now - in->metrics_time_ms, a, sizeof(a));
            fmt_dur(cfg->metrics_stale_after_ms, b, sizeof(b));
            snprintf(out->explain, sizeof(out->explain),
                     "metrics stale (last %s ago, limit %s): holding %d replicas", a, b,
                     out->desired);
        }
        if (out->desired != cur)
            out->reason = POLICY_CLAMPED;
        return;
    }

    const double rate = in->request_rate;
    const int32_t ready = in->ready_replicas < 0 ? 0 : in->ready_replicas;
    double rpg = ready > 0 ? rate / (ready * gpus) : (rate > 0 ? INFINITY : 0);
    out->requests_per_gpu = rpg;
    out->utilization = rpg / cap;
    int64_t need_now = replicas_for(rate, per_replica);
    int64_t need_fc = 0;
    bool have_fc = cfg->predictive && in->have_forecast && isfinite(in->forecast_rate) &&
                   in->forecast_rate >= 0;
    if (have_fc)
        need_fc = replicas_for(in->forecast_rate, per_replica);
    out->need_now = clamp_i32(need_now, 0, INT32_MAX);
    out->need_forecast = clamp_i32(need_fc, 0, INT32_MAX);

    /* 2. Clocks. Strictly above the target starts the scale-out clock;
     * strictly below the hysteresis threshold starts the scale-in clock. */
    bool above = out->utilization > cfg->target_utilization;
    bool below = out->utilization < cfg->scale_in_utilization;
    tick_clock(&st->above_since_ms, above, now);
    tick_clock(&st->below_since_ms, below, now);
    bool lat_known = cfg->p99_latency_target_ms > 0 && in->p99_latency_ms >= 0 &&
                     isfinite(in->p99_latency_ms);
    bool lat_above = lat_known && in->p99_latency_ms > (double)cfg->p99_latency_target_ms;
    tick_clock(&st->latency_above_since_ms, lat_above, now);
    tick_clock(&st->forecast_above_since_ms, need_fc > cur && need_fc > need_now, now);
    out->above_since_ms = st->above_since_ms;
    out->below_since_ms = st->below_since_ms;
    if (st->above_since_ms != POLICY_NEVER)
        out->scale_out_at_ms = st->above_since_ms + cfg->scale_out_after_ms;
    if (st->below_since_ms != POLICY_NEVER)
        out->scale_in_at_ms = st->below_since_ms + cfg->scale_in_after_ms;

    /* 3. Bounds. */
    if (cur < lo || cur > hi) {
        int64_t want = cur < lo ? UTIL_MAX((int64_t)lo, UTIL_MAX(need_now, need_fc)) : hi;
        out->desired = clamp_i32(want, lo, hi);
        out->reason = POLICY_CLAMPED;
        snprintf(out->explain, sizeof(out->explain),
                 "%d replicas outside the bounds [%d, %d]: set to %d", cur, lo, hi, out->desired);
        st->last_scale_ms = now;
        return;
    }

    /* 4. Scale out. */
    bool fired_out = clock_fired(st->above_since_ms, cfg->scale_out_after_ms, now);
    int64_t want = cur;
    enum policy_reason reason = POLICY_HOLD_WITHIN_BAND;
    if (fired_out && UTIL_MAX(need_now, need_fc) > cur) {
        want = UTIL_MAX(need_now, need_fc);
        reason = POLICY_SCALED_OUT;
    } else if (need_fc > cur && need_fc > need_now &&
               clock_fired(st->forecast_above_since_ms, cfg->decision_interval_ms, now)) {
        want = need_fc;
        reason = POLICY_PREDICTIVE_SCALE_OUT;
    } else if (clock_fired(st->latency_above_since_ms, cfg->scale_out_after_ms, now) &&
               ready >= cur && !below) {
        want = (int64_t)cur + 1;
        reason = POLICY_LATENCY_SCALE_OUT;
    }
    if (reason != POLICY_HOLD_WITHIN_BAND) {
        if (cfg->max_scale_up_step > 0 && want > (int64_t)cur + cfg->max_scale_up_step)
            want = (int64_t)cur + cfg->max_scale_up_step;
        if (cur >= hi) {
            out->desired = cur;
            out->reason = POLICY_HOLD_AT_MAX;
            snprintf(out->explain, sizeof(out->explain),
                     "load needs %lld replicas but already at max-replicas %d",
                     (long long)UTIL_MAX(want, UTIL_MAX(need_now, need_fc)), hi);
            return;
        }
        out->desired = clamp_i32(want, lo, hi);
        out->reason = reason;
        st->last_scale_ms = now;
        st->below_since_ms = POLICY_NEVER;
        out->below_since_ms = out->scale_in_at_ms = POLICY_NEVER;
        if (reason == POLICY_LATENCY_SCALE_OUT)
            st->latency_above_since_ms = now; /* one replica per window */
        out->forecast_requests_per_gpu =
            have_fc ? in->forecast_rate / (out->desired * gpus) : NAN;
        if (reason == POLICY_SCALED_OUT) {
            fmt_dur(now - st->above_since_ms, a, sizeof(a));
            snprintf(out->explain, sizeof(out->explain),
                     "requests/GPU %.3g above %.3g (%.0f%% of %.3g) for %s: %d -> %d replicas",
                     rpg, cfg->target_utilization * cap, cfg->target_utilization * 100, cap, a,
                     cur, out->desired);
        } else if (reason == POLICY_PREDICTIVE_SCALE_OUT) {
            fmt_dur(policy_horizon_ms(cfg, 0), a, sizeof(a));
            snprintf(out->explain, sizeof(out->explain),
                     "forecast %.4g req/s within %s needs %lld replicas: %d -> %d ahead of load",
                     in->forecast_rate, a, (long long)need_fc, cur, out->desired);
        } else {
            fmt_dur(cfg->p99_latency_target_ms, a, sizeof(a));
            snprintf(out->explain, sizeof(out->explain),
                     "p99 %.0fms above the %s target for a full window: %d -> %d replicas",
                     in->p99_latency_ms, a, cur, out->desired);
        }
        return;
    }
    if (fired_out) {
        out->desired = cur;
        out->reason = cur >= hi && need_now > hi ? POLICY_HOLD_AT_MAX : POLICY_HOLD_SCALE_OUT_PENDING;
        snprintf(out->explain, sizeof(out->explain),
                 "requests/GPU %.3g above target but %d replicas asked for cover the load "
                 "(%d ready): waiting for them",
                 rpg, cur, ready);
        return;
    }

    /* 5. Scale in, one bounded step per full window below the threshold. */
    if (clock_fired(st->below_since_ms, cfg->scale_in_after_ms, now)) {
        bool queue_high = in->queue_depth > (double)(ready > 0 ? ready : 1);
        if (lat_above || queue_high) {
            out->reason = POLICY_HOLD_LATENCY;
            snprintf(out->explain, sizeof(out->explain),
                     "load low but %s: not scaling in",
                     lat_above ? "p99 above target" : "requests are queueing");
            return;
        }
        int64_t step = cfg->max_scale_down_step > 0 ? cfg->max_scale_down_step
                                                    : UTIL_MAX(1, cur / 2);
        int64_t floor_ = (int64_t)cur - step;
        int64_t w = UTIL_MAX(UTIL_MAX(need_now, need_fc), UTIL_MAX((int64_t)lo, floor_));
        if (w < cur) {
            out->desired = clamp_i32(w, lo, hi);
            out->reason = POLICY_SCALED_IN;
            st->last_scale_ms = now;
            st->below_since_ms = now; /* the next step needs another full window */
            out->below_since_ms = now;
            out->scale_in_at_ms = now + cfg->scale_in_after_ms;
            out->forecast_requests_per_gpu =
                have_fc ? in->forecast_rate / (out->desired * gpus) : NAN;
            fmt_dur(cfg->scale_in_after_ms, a, sizeof(a));
            snprintf(out->explain, sizeof(out->explain),
                     "requests/GPU %.3g below %.3g (%.0f%% of %.3g) for %s: %d -> %d replicas",
                     rpg, cfg->scale_in_utilization * cap, cfg->scale_in_utilization * 100, cap,
                     a, cur, out->desired);
            return;
        }
        out->reason = cur <= lo ? POLICY_HOLD_AT_MIN : POLICY_HOLD_BELOW_WAITING;
        snprintf(out->explain, sizeof(out->explain),
                 cur <= lo ? "load low; at min-replicas %d"
                           : "load low but the forecast needs %d replicas: holding",
                 cur <= lo ? lo : (int)need_fc);
        return;
    }

    if (have_fc && out->desired > 0)
        out->forecast_requests_per_gpu = in->forecast_rate / (out->desired * gpus);
    if (above) {
        out->reason = POLICY_HOLD_ABOVE_WAITING;
        fmt_dur(now - st->above_since_ms, a, sizeof(a));
        fmt_dur(cfg->scale_out_after_ms, b, sizeof(b));
        snprintf(out->explain, sizeof(out->explain),
                 "requests/GPU %.3g above %.3g for %s of %s: holding %d replicas", rpg,
                 cfg->target_utilization * cap, a, b, cur);
    } else if (below) {
        out->reason = POLICY_HOLD_BELOW_WAITING;
        fmt_dur(now - st->below_since_ms, a, sizeof(a));
        fmt_dur(cfg->scale_in_after_ms, b, sizeof(b));
        snprintf(out->explain, sizeof(out->explain),
                 "requests/GPU %.3g below %.3g for %s of %s: holding %d replicas", rpg,
                 cfg->scale_in_utilization * cap, a, b, cur);
    } else {
        out->reason = POLICY_HOLD_WITHIN_BAND;
        snprintf(out->explain, sizeof(out->explain),
                 "requests/GPU %.3g within [%.3g, %.3g]: holding %d replicas", rpg,
                 cfg->scale_in_utilization * cap, cfg->target_utilization * cap, cur);
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* policy: the act stage of a tick: from the observation, the demand, the
 * size and the trusted plan, the replica count with a reason.
 *
 * policy_decide() is a pure function of (config, clocks, observation). Order
 * of precedence: missing/stale metrics (hold), bounds (clamp into [min,
 * max]), scale-out (sustained rule, SLA-sized demand, trusted plan, observed
 * latency), scale-in (with a trusted plan as soon as plan and demand fit in
 * fewer replicas; else the hysteresis rule), hold. Replicas the scheduler
 * cannot place are neither capacity nor "starting": while there are any, a
 * scale-out rule holds (AtGPUCapacity) instead of asking for more pods that
 * would only wait too, and a hold whose need is above what is placed says
 * so; the asked-for count is never lowered for it. Every decision's reason,
 * figures and explanation describe the same rule (explain.c words them).
 * See docs/policy.md. */
#include "policy-int.h"

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
    [POLICY_SLA_SCALE_OUT] = "SLAScaleOut",
    [POLICY_SCALED_IN] = "ScaledIn",
    [POLICY_PREDICTIVE_SCALE_IN] = "PredictiveScaleIn",
    [POLICY_CLAMPED] = "OutsideReplicaBounds",
    [POLICY_HOLD_GPU_CAPACITY] = "AtGPUCapacity",
    [POLICY_HOLD_PARKED] = "Parked",
};

const char *policy_reason_name(enum policy_reason r)
{
    return (unsigned)r < POLICY_REASON_COUNT ? reason_names[r] : "Unknown";
}

bool policy_reason_is_action(enum policy_reason r)
{
    return r == POLICY_SCALED_OUT || r == POLICY_PREDICTIVE_SCALE_OUT ||
           r == POLICY_LATENCY_SCALE_OUT || r == POLICY_SLA_SCALE_OUT ||
           r == POLICY_SCALED_IN || r == POLICY_PREDICTIVE_SCALE_IN || r == POLICY_CLAMPED;
}

void policy_state_init(struct policy_state *st)
{
    memset(st, 0, sizeof(*st));
    st->above_since_ms = POLICY_NEVER;
    st->below_since_ms = POLICY_NEVER;
    st->latency_above_since_ms = POLICY_NEVER;
    st->idle_since_ms = POLICY_NEVER;
    st->last_scale_ms = POLICY_NEVER;
    st->floor_since_ms = POLICY_NEVER;
    st->act_to = -1;
}

static void shift(int64_t *t, int64_t delta_ms)
{
    if (*t != POLICY_NEVER)
        *t += delta_ms;
}

void policy_state_shift(struct policy_state *st, int64_t delta_ms)
{
    int64_t *clocks[] = {&st->above_since_ms, &st->below_since_ms, &st->latency_above_since_ms,
                         &st->idle_since_ms, &st->last_scale_ms, &st->floor_since_ms,
                         &st->undo_below_since_ms,
                         &st->undo_latency_above_since_ms, &st->undo_last_scale_ms};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(clocks); i++)
        shift(clocks[i], delta_ms);
    for (size_t i = 0; i < POLICY_FLOOR_TICKS; i++)
        shift(&st->floor_t_ms[i], delta_ms);
    for (size_t i = 0; i < POLICY_TREND_SAMPLES; i++)
        shift(&st->trend_t_ms[i], delta_ms);
}

/* Requests a seasonal plan's likely peak makes within the look-ahead that
 * keep one replica from zero, and that wake one at zero (min-replicas 0). */
#define ZERO_KEEP_REQUESTS 1.0
#define ZERO_WAKE_REQUESTS 3.0

static int32_t clamp_i32(int64_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : v > hi ? hi : (int32_t)v;
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

/* Record the tick's floor. When the window is longer than the ring's
 * entries at one a tick, a tick in the newest entry's slot (a 1/(entries -
 * 1) of the window) raises that entry instead: the ring then spans the
 * window, each entry's time the newest of its slot (a floor is kept up to
 * a slot longer, never shorter). */
static void floor_push(struct policy_state *st, int64_t now, int64_t floor_, int64_t window)
{
    int32_t v = (int32_t)UTIL_MIN(floor_, (int64_t)INT32_MAX);
    if (st->floor_len == 0)
        st->floor_since_ms = now;
    int64_t slot = window > 0 ? (window + POLICY_FLOOR_TICKS - 2) / (POLICY_FLOOR_TICKS - 1) : 0;
    if (st->floor_len > 0 && slot > 0) {
        int32_t k = (st->floor_pos + POLICY_FLOOR_TICKS - 1) % POLICY_FLOOR_TICKS;
        if (util_floor_div(st->floor_t_ms[k], slot) == util_floor_div(now, slot)) {
            st->floor_hist[k] = UTIL_MAX(st->floor_hist[k], v);
            st->floor_t_ms[k] = now;
            return;
        }
    }
    st->floor_hist[st->floor_pos] = v;
    st->floor_t_ms[st->floor_pos] = now;
    st->floor_pos = (st->floor_pos + 1) % POLICY_FLOOR_TICKS;
    if (st->floor_len < POLICY_FLOOR_TICKS)
        st->floor_len++;
}

/* Highest floor of the ticks in (now - window, now]. */
static int64_t floor_max(const struct policy_state *st, int64_t now, int64_t window)
{
    int64_t m = 0;
    for (int32_t i = 0; i < st->floor_len; i++) {
        int32_t k = (st->floor_pos + POLICY_FLOOR_TICKS - 1 - i) % POLICY_FLOOR_TICKS;
        if (st->floor_t_ms[k] <= now - window)
            break;
        if (st->floor_hist[k] > m)
            m = st->floor_hist[k];
    }
    return m;
}

static void reset_clocks(struct policy_state *st)
{
    st->above_since_ms = st->below_since_ms = st->latency_above_since_ms = POLICY_NEVER;
    st->idle_since_ms = POLICY_NEVER; /* idleness before a gap is no evidence either */
    /* floors measured before a gap say nothing, and the plan's scale-in
     * waits for a whole window of new ones (scale_in) */
    st->floor_len = 0;
    st->trend_len = 0; /* nor do rates: a line across a gap is not a ramp */
}

static void observe(const struct policy_config *cfg, struct policy_state *st,
                    const struct policy_input *in, struct policy_tick *t,
                    struct policy_decision *out)
{
    t->cfg = cfg;
    t->in = in;
    t->now = in->now_ms;
    t->cur = in->current_replicas < 0 ? 0 : in->current_replicas;
    t->ready = in->ready_replicas < 0 ? 0 : in->ready_replicas;
    t->unsched = clamp_i32(in->unschedulable_replicas, 0, t->cur);
    t->stalled = clamp_i32(in->stalled_replicas, 0, UTIL_MAX(0, t->cur - t->unsched - t->ready));
    t->starting = clamp_i32((int64_t)t->cur - t->unsched - t->stalled - t->ready, 0, INT32_MAX);
    t->lo = cfg->min_replicas;
    t->hi = cfg->max_replicas;
    t->gpus = cfg->gpus_per_replica > 0 ? cfg->gpus_per_replica : in->gpus_per_replica;
    if (!(t->gpus > 0))
        t->gpus = 1;
    t->cap = cfg->capacity_rps_per_gpu;

    /* demand -> size */
    /* New capacity serves a cold start from now. While replicas asked for
     * are starting, the queue is projected to the end of the newest ask's
     * cold start with only the ready replicas serving (none when this state
     * did not ask, as after a restart): when the starting ones serve is not
     * known, a pod may take longer than cold-start. A tick that asks nothing
     * new projects the queue it projected before (it grew as projected), so
     * a queue that only waits for replicas on their way is not asked for
     * twice; while arrivals outgrow the projection, each new ask re-bases
     * it and the ask grows with the queue (docs/policy.md, "Demand"). */
    int64_t lead = cfg->cold_start_ms;
    if (t->starting > 0)
        lead = st->last_scale_ms == POLICY_NEVER
                   ? 0
                   : UTIL_MAX((int64_t)0, UTIL_MIN(lead, st->last_scale_ms + lead - t->now));
    /* The ramp is a look-ahead: followed only by the predictive policy. The
     * window's rate is a mean over its span, on a ramp the rate of half the
     * span ago: the line through those rates is that far behind the
     * arrivals, and is followed that much further than the cold start. */
    policy_trend_push(st, t->now, in->request_rate);
    int64_t behind = in->rate_window_ms > 0 ? in->rate_window_ms / 2 : 0;
    double ramp = cfg->predictive ? policy_trend(st, t->now, cfg->cold_start_ms + behind) : 0;
    policy_sizing(cfg, st, in, &t->sz);
    /* The scale-in size: POLICY_SCALE_IN_MARGIN below the per-replica rate.
     * With a p99 target the demand is sized at it for scale-out too: the
     * demand is a mean over the rate window, and at the SLA's edge its own
     * peaks go over the target, and a ramp crosses the edge before the
     * replica it asks for serves (docs/policy.md, section 5). */
    t->sz_in = t->sz;
    t->sz_in.per_replica_rps *= 1 - POLICY_SCALE_IN_MARGIN;
    /* the demand's size: what the ready replicas carry, and what it needs */
    const struct policy_sizing *dsz = t->sz.from_sla ? &t->sz_in : &t->sz;
    double carry = t->ready * dsz->per_replica_rps;
    policy_demand(in, ramp, policy_horizon_ms(cfg, 0), lead, t->cap * t->gpus, carry, &t->dem);
    t->need_now = policy_need(dsz, &t->dem, t->cap * t->gpus);
    t->plan = cfg->predictive && in->have_forecast && in->forecast_trusted &&
              isfinite(in->forecast_rate) && in->forecast_rate >= 0;
    t->need_fc = t->plan ? policy_size(&t->sz, in->forecast_rate) : 0;
    /* Scale-out plans for the wider of the learned and the model's upper
     * plans (a ramp or a burst is where a linear fit misses); the hold, the
     * floor below, for the learned one (section 2 of docs/policy.md). */
    double outer = t->plan && isfinite(in->forecast_model_rate) &&
                           in->forecast_model_rate > in->forecast_rate
                       ? in->forecast_model_rate
                       : in->forecast_rate;
    t->need_out = t->plan ? policy_size(&t->sz, outer) : 0;
    t->outer_rps = outer;
    double likely = isfinite(in->forecast_likely) && in->forecast_likely >= 0 &&
                            in->forecast_likely <= outer
                        ? in->forecast_likely
                        : in->forecast_rate;
    t->need_likely = t->plan ? policy_size(&t->sz, likely) : 0;
    /* A level-only plan (no season yet) must not add capacity while the
     * measured load falls: that is a trend that is not there. */
    bool falling = isfinite(in->recent_rate) && in->recent_rate >= 0 &&
                   in->recent_rate < in->request_rate;
    t->plan_out_ok = t->plan && (in->forecast_seasonal || !falling);

    double rate = in->request_rate;
    double rpg = t->ready > 0 ? rate / (t->ready * t->gpus) : (rate > 0 ? INFINITY : 0);
    out->requests_per_gpu = rpg;
    out->utilization = rpg / t->cap;
    out->demand_rps = t->dem.rate_rps;
    out->per_replica_rps = t->sz.per_replica_rps;
    out->sla_sized = t->sz.from_sla;
    out->need_now = clamp_i32(t->need_now, 0, INT32_MAX);
    out->need_forecast = clamp_i32(t->need_fc, 0, INT32_MAX);
    out->need_likely = clamp_i32(t->need_likely, 0, INT32_MAX);
    if (t->plan)
        out->forecast_likely_rps = likely;
    if (t->plan)
        out->forecast_rps = in->forecast_rate;

    t->above = out->utilization > cfg->target_utilization;
    t->below = out->utilization < cfg->scale_in_utilization;
    t->lat_above = cfg->p99_latency_target_ms > 0 && in->p99_latency_ms >= 0 &&
                   isfinite(in->p99_latency_ms) &&
                   in->p99_latency_ms > (double)cfg->p99_latency_target_ms;
    t->queue_high = in->queue_depth > (double)(t->ready > 0 ? t->ready : 1);
    /* Zero replicas (min-replicas 0) serve nothing: any arrival wakes the
     * Deployment at once, not after scale-out-after; and the step to zero
     * waits until nothing has arrived for scale-in-after. */
    t->idle = !(rate > 0) && !(in->queue_depth >= POLICY_QUEUED);
    t->wake = t->cur == 0 && !t->idle;
    /* A season's likely peak that makes requests within the look-ahead: the
     * one plan that keeps a replica from zero (one request: it would wait a
     * cold start), or wakes one (three, so that a likely peak hovering at one
     * does not wake and drop a replica every few minutes of a quiet night);
     * with demand-unit tokens the plan is in tokens/s, and a request carries
     * request_size of them. */
    double req_size = isfinite(in->request_size) && in->request_size > 0 ? in->request_size : 1;
    t->expects = t->plan && in->forecast_seasonal &&
                 likely / req_size * (double)policy_horizon_ms(cfg, 0) / 1000 >=
                     (t->cur == 0 ? ZERO_WAKE_REQUESTS : ZERO_KEEP_REQUESTS);

    /* Clocks. Strictly above the target starts the sustained clock; strictly
     * below the hysteresis threshold the scale-in one. */
    /* The scale-in floor: what demand and plan need, sized with a margin
     * below the plan's scale-out size (hysteresis), never below
     * min-replicas. */
    int64_t floor_ = policy_need(&t->sz_in, &t->dem, t->cap * t->gpus);
    if (t->plan)
        floor_ = UTIL_MAX(floor_, policy_size(&t->sz_in, in->forecast_rate));
    /* what the likely peak adds, it keeps while that peak stands: it may
     * sit above the learned upper plan (bounded by the model's), and a
     * floor of that plan alone scaled in what it had just added, to add it
     * again at the next tick */
    if (t->plan_out_ok && (t->cur > 0 || t->expects))
        floor_ = UTIL_MAX(floor_, t->need_likely);
    floor_ = UTIL_MAX(floor_, (int64_t)t->lo);
    tick_clock(&st->above_since_ms, t->above, t->now);
    tick_clock(&st->below_since_ms, t->below, t->now);
    tick_clock(&st->latency_above_since_ms, t->lat_above, t->now);
    tick_clock(&st->idle_since_ms, t->idle, t->now);
    /* Idle for scale-in-after, and no season that expects a request within
     * the look-ahead: nothing needs a replica, whatever the plan's margin
     * (a plan's residuals outlive the traffic by an hour). */
    t->zero_ok = t->lo == 0 && clock_fired(st->idle_since_ms, cfg->scale_in_after_ms, t->now) &&
                 !t->expects;
    if (t->zero_ok)
        floor_ = 0;
    t->floor = floor_;
    floor_push(st, t->now, floor_, cfg->scale_in_stabilization_ms);
    out->above_since_ms = st->above_since_ms;
    out->below_since_ms = st->below_since_ms;
    if (st->above_since_ms != POLICY_NEVER)
        out->scale_out_at_ms = st->above_since_ms + cfg->scale_out_after_ms;
    if (st->below_since_ms != POLICY_NEVER)
        out->scale_in_at_ms = st->below_since_ms + cfg->scale_in_after_ms;
}

/* Scale-out rules; returns true when one acted (or is pinned at max). */
static bool scale_out(struct policy_state *st, const struct policy_tick *t,
                      struct policy_decision *out)
{
    const struct policy_config *cfg = t->cfg;
    const int64_t now = t->now, cur = t->cur;
    int64_t need = UTIL_MAX(t->need_now, t->plan_out_ok ? t->need_out : 0);
    int64_t want = cur;
    enum policy_reason reason = POLICY_HOLD_WITHIN_BAND;
    bool fired_out = clock_fired(st->above_since_ms, cfg->scale_out_after_ms, now);
    if (t->wake) {
        want = UTIL_MAX((int64_t)1, need);
        reason = POLICY_SCALED_OUT;
    } else if (fired_out && need > cur) {
        want = need;
        reason = POLICY_SCALED_OUT;
    } else if (t->sz.from_sla && t->need_now > cur) {
        want = need;
        reason = POLICY_SLA_SCALE_OUT;
    } else if (t->plan_out_ok && t->need_likely > cur && (cur > 0 || t->expects)) {
        want = UTIL_MAX(t->need_now, t->need_likely);
        reason = POLICY_PREDICTIVE_SCALE_OUT;
    } else if (clock_fired(st->latency_above_since_ms, cfg->scale_out_after_ms, now) &&
               t->ready + t->stalled >= cur && !t->below) {
        want = UTIL_MAX(cur + 1, t->need_now);
        reason = POLICY_LATENCY_SCALE_OUT;
    }
    if (reason == POLICY_HOLD_WITHIN_BAND) {
        if (!fired_out)
            return false;
        out->desired = t->cur;
        /* the replicas asked for cover the load only if they can be placed */
        out->reason = t->unsched > 0 && need > cur - t->unsched ? POLICY_HOLD_GPU_CAPACITY
                      : cur >= t->hi && need > t->hi            ? POLICY_HOLD_AT_MAX
                                                                : POLICY_HOLD_SCALE_OUT_PENDING;
        out->want = (int32_t)UTIL_MIN(need, (int64_t)INT32_MAX);
        policy_explain(t, st, out);
        return true;
    }
    if (cfg->max_scale_up_step > 0 && want > cur + cfg->max_scale_up_step)
        want = cur + cfg->max_scale_up_step;
    out->want = (int32_t)UTIL_MIN(UTIL_MAX(want, need), (int64_t)INT32_MAX);
    if (t->unsched > 0) {
        /* More pods would wait for a GPU too: hold what is asked for (the
         * pending ones are what a cluster autoscaler acts on), keep the want. */
        out->desired = t->cur;
        out->reason = POLICY_HOLD_GPU_CAPACITY;
        out->rule = reason;
        policy_explain(t, st, out);
        return true;
    }
    if (cur >= t->hi) {
        out->desired = t->cur;
        out->reason = POLICY_HOLD_AT_MAX;
        out->rule = reason;
        policy_explain(t, st, out);
        return true;
    }
    out->desired = clamp_i32(want, t->lo, t->hi);
    out->reason = reason;
    st->last_scale_ms = now;
    st->below_since_ms = POLICY_NEVER;
    out->below_since_ms = out->scale_in_at_ms = POLICY_NEVER;
    if (reason == POLICY_LATENCY_SCALE_OUT)
        st->latency_above_since_ms = now; /* one replica per window */
    policy_explain(t, st, out);
    return true;
}

/* Scale-in rules; returns true when one decided (acted or held for a reason). */
static bool scale_in(struct policy_state *st, struct policy_tick *t,
                     struct policy_decision *out)
{
    const struct policy_config *cfg = t->cfg;
    const int64_t now = t->now, cur = t->cur;
    int64_t floor_ = t->floor;
    int64_t step = cfg->max_scale_down_step > 0 ? cfg->max_scale_down_step
                                                : UTIL_MAX((int64_t)1, cur / 2);
    enum policy_reason act = t->plan ? POLICY_PREDICTIVE_SCALE_IN : POLICY_SCALED_IN;
    if (t->plan) {
        /* With a trusted plan: as soon as demand and the plan over the next
         * cold start fit in fewer replicas, but not while replicas asked for
         * are still starting (placed, not ready: the plan asked for them over
         * this very look-ahead; unschedulable ones are not coming), and not
         * below the highest floor of the stabilization window (a scale-in the
         * next minute's plan would undo is a flap), which needs a whole window
         * of floors: after missing metrics one tick's dip is no evidence. */
        if (floor_ >= cur)
            return false;
        out->rule = act;
        out->want = (int32_t)UTIL_MIN(floor_, (int64_t)INT32_MAX);
        int64_t held = floor_max(st, now, cfg->scale_in_stabilization_ms);
        t->floors_short = st->floor_since_ms == POLICY_NEVER ||
                          now - st->floor_since_ms < cfg->scale_in_stabilization_ms;
        if (t->floors_short)
            held = cur;
        if (t->starting > 0 || held >= cur) {
            out->reason = POLICY_HOLD_BELOW_WAITING;
            out->want = (int32_t)UTIL_MIN(UTIL_MAX(floor_, t->starting > 0 ? floor_ : held),
                                          (int64_t)INT32_MAX);
            policy_explain(t, st, out);
            return true;
        }
        floor_ = UTIL_MAX(floor_, held);
    } else {
        /* The hysteresis rule: below scale-in-utilization for scale-in-after. */
        if (st->below_since_ms == POLICY_NEVER)
            return false;
        out->rule = act;
        out->want = (int32_t)UTIL_MIN(floor_, (int64_t)INT32_MAX);
        if (!clock_fired(st->below_since_ms, cfg->scale_in_after_ms, now))
            return false; /* the hold text says how long is left */
    }
    if (t->lat_above || t->queue_high) {
        out->reason = POLICY_HOLD_LATENCY;
        policy_explain(t, st, out);
        return true;
    }
    int64_t w = UTIL_MAX(floor_, cur - step);
    /* Zero serves nothing: only after scale-in-after without a request, and
     * never while a replica is on its way (starting, or Pending for a GPU a
     * node autoscaler is adding): a woken Deployment gets to serve once,
     * instead of losing its pod to the very wait it was woken for. */
    if (w <= 0 && cur > 0) {
        if (t->starting > 0 || t->unsched > 0)
            t->zero_wait = ZERO_WAIT_COMING;
        else if (!clock_fired(st->idle_since_ms, cfg->scale_in_after_ms, now))
            t->zero_wait = ZERO_WAIT_IDLE;
        if (t->zero_wait)
            w = 1;
    }
    if (w >= cur) {
        out->reason = cur <= t->lo ? POLICY_HOLD_AT_MIN : POLICY_HOLD_BELOW_WAITING;
        policy_explain(t, st, out);
        return true;
    }
    /* The hysteresis rule with no replica ready while some are starting
     * (loading a model): requests/GPU is not measured, so no scale-in but the
     * step to zero (whose evidence is that nothing arrived; it waits for them
     * itself). Replicas Pending for a GPU or stalled are not coming, as for
     * the plan's scale-in: kept, they serve no sooner. Valid metrics here are
     * a rate that is not the pods' own: the controller holds on those. */
    if (!t->plan && t->ready == 0 && t->starting > 0 && w > 0) {
        t->none_ready = true;
        out->reason = POLICY_HOLD_BELOW_WAITING;
        policy_explain(t, st, out);
        return true;
    }
    out->desired = clamp_i32(w, t->lo, t->hi);
    out->reason = act;
    st->last_scale_ms = now;
    if (!t->plan) { /* the next step needs another full window */
        st->below_since_ms = now;
        out->below_since_ms = now;
        out->scale_in_at_ms = now + cfg->scale_in_after_ms;
    }
    policy_explain(t, st, out);
    return true;
}

static void decide(const struct policy_config *cfg, struct policy_state *st,
                   const struct policy_input *in, struct policy_decision *out);

/* An action restarts clocks (the hysteresis scale-in's window, the latency
 * rule's, the time of the last scale). One the next decision finds not
 * applied (the count still the one it scaled from: a scale write that
 * failed or was dropped, an HPA that has not synced, a follower, a dry run)
 * gets them back, so its rule fires again instead of waiting another window
 * (and in external-metric mode the HPA is served the action until it acts,
 * not for one tick). */
void policy_decide(const struct policy_config *cfg, struct policy_state *st,
                   const struct policy_input *in, struct policy_decision *out)
{
    const int32_t cur = in->current_replicas < 0 ? 0 : in->current_replicas;
    if (st->act_to >= 0 && cur == st->act_from && cur != st->act_to) {
        st->below_since_ms = st->undo_below_since_ms;
        st->latency_above_since_ms = st->undo_latency_above_since_ms;
        st->last_scale_ms = st->undo_last_scale_ms;
    }
    st->act_to = -1;
    int64_t below = st->below_since_ms, lat = st->latency_above_since_ms;
    int64_t last = st->last_scale_ms;
    decide(cfg, st, in, out);
    if (policy_reason_is_action(out->reason) && out->desired != cur) {
        st->act_from = cur;
        st->act_to = out->desired;
        st->undo_below_since_ms = below;
        st->undo_latency_above_since_ms = lat;
        st->undo_last_scale_ms = last;
    }
}

static void decide(const struct policy_config *cfg, struct policy_state *st,
                   const struct policy_input *in, struct policy_decision *out)
{
    memset(out, 0, sizeof(*out));
    const int32_t cur = in->current_replicas < 0 ? 0 : in->current_replicas;
    out->desired = clamp_i32(cur, cfg->min_replicas, cfg->max_replicas);
    out->requests_per_gpu = out->utilization = NAN;
    out->forecast_requests_per_gpu = out->forecast_rps = out->demand_rps = NAN;
    out->forecast_likely_rps = NAN;
    out->per_replica_rps = NAN;
    out->above_since_ms = out->below_since_ms = POLICY_NEVER;
    out->scale_out_at_ms = out->scale_in_at_ms = POLICY_NEVER;
    out->rule = POLICY_REASON_COUNT;
    /* reported whatever the rule, a hold on stale metrics included */
    out->unschedulable = clamp_i32(in->unschedulable_replicas, 0, cur);
    out->stalled = clamp_i32(in->stalled_replicas, 0,
                             UTIL_MAX(0, cur - out->unschedulable -
                                             UTIL_MAX(0, in->ready_replicas)));

    /* 0. Parked: scaled to zero by hand while min-replicas asks for more.
     * As the HPA does, leave it there (a way to take a model off its GPUs
     * without removing the annotations); scaling it up by hand resumes. A
     * zero this policy made (min-replicas 0 then, raised since) is not one
     * parked by hand: the bounds below raise it. */
    if (cur == 0 && cfg->min_replicas > 0 && !in->zero_by_policy) {
        reset_clocks(st);
        out->desired = 0;
        out->reason = POLICY_HOLD_PARKED;
        snprintf(out->explain, sizeof(out->explain),
                 "0 replicas with min-replicas %d: parked (scaled to 0 by hand), as the HPA "
                 "does; scale to 1 or more to resume",
                 cfg->min_replicas);
        return;
    }

    /* 1. No trustworthy data, or no capacity to size with (capacity-per-gpu
     * auto before anything was learned): hold (bounds still apply), restart
     * the clocks so no rule fires on evidence gathered before the gap. */
    bool fresh = in->metrics_valid && isfinite(in->request_rate) && in->request_rate >= 0 &&
                 in->metrics_time_ms != POLICY_NEVER &&
                 in->now_ms - in->metrics_time_ms <= cfg->metrics_stale_after_ms;
    bool stale = !fresh || !(cfg->capacity_rps_per_gpu > 0 && cfg->capacity_rps_per_gpu <= 1e9);
    if (stale && fresh && cur == 0 &&
        (in->request_rate > 0 || in->queue_depth >= POLICY_QUEUED)) {
        /* requests arrive, or wait, at zero replicas with nothing to size them
         * with (capacity-per-gpu auto, nothing learned): one replica to learn
         * from (a queue alone, arrivals seen in stale ticks, held at zero) */
        reset_clocks(st);
        out->desired = clamp_i32(1, cfg->min_replicas, cfg->max_replicas);
        out->reason = POLICY_SCALED_OUT;
        st->last_scale_ms = in->now_ms;
        if (in->request_rate > 0)
            snprintf(out->explain, sizeof(out->explain),
                     "%.4g req/s arrive at 0 replicas, and no capacity-per-gpu to size with "
                     "(auto: nothing learned yet): 0 -> %d",
                     in->request_rate, out->desired);
        else
            snprintf(out->explain, sizeof(out->explain),
                     "%.4g requests wait at 0 replicas, and no capacity-per-gpu to size with "
                     "(auto: nothing learned yet): 0 -> %d",
                     in->queue_depth, out->desired);
        return;
    }
    if (stale) {
        reset_clocks(st);
        out->reason = out->desired != cur ? POLICY_CLAMPED : POLICY_METRICS_UNAVAILABLE;
        policy_explain_stale(cfg, in, out);
        if (out->reason == POLICY_CLAMPED)
            st->last_scale_ms = in->now_ms;
        return;
    }

    struct policy_tick t;
    memset(&t, 0, sizeof(t));
    observe(cfg, st, in, &t, out);

    /* 2. Bounds. */
    if (cur < t.lo || cur > t.hi) {
        int64_t want = cur < t.lo ? UTIL_MAX((int64_t)t.lo, UTIL_MAX(t.need_now, t.need_fc))
                                  : t.hi;
        /* up to min-replicas at once; what the load needs above it within
         * max-scale-up-step, as every scale-out (1 -> 40 in one write) */
        if (cur < t.lo && cfg->max_scale_up_step > 0)
            want = UTIL_MAX((int64_t)t.lo,
                            UTIL_MIN(want, (int64_t)cur + cfg->max_scale_up_step));
        out->desired = clamp_i32(want, t.lo, t.hi);
        out->reason = POLICY_CLAMPED;
        st->last_scale_ms = t.now;
        policy_explain(&t, st, out);
        return;
    }

    /* 3. Scale out, 4. scale in, 5. hold. */
    if (!scale_out(st, &t, out) && !scale_in(st, &t, out)) {
        int64_t need = UTIL_MAX(t.need_now, t.plan_out_ok ? t.need_likely : 0);
        if (t.unsched > 0 && need > (int64_t)t.cur - t.unsched) {
            /* what is placed falls short and the rest cannot be placed */
            out->reason = POLICY_HOLD_GPU_CAPACITY;
            out->want = (int32_t)UTIL_MIN(need, (int64_t)INT32_MAX);
        } else {
            out->reason = t.cur == 0 ? POLICY_HOLD_AT_MIN /* idle at zero */
                          : t.above  ? POLICY_HOLD_ABOVE_WAITING
                          : t.below && !t.plan ? POLICY_HOLD_BELOW_WAITING
                                               : POLICY_HOLD_WITHIN_BAND;
        }
        policy_explain(&t, st, out);
    }
    if (t.plan && out->desired > 0)
        out->forecast_requests_per_gpu = in->forecast_rate / (out->desired * t.gpus);
}

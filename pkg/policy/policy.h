/* SPDX-License-Identifier: Apache-2.0 */
/* policy: the pure scaling decision core shared by the live controller and the
 * simulator.
 *
 * Nothing here does I/O or reads a clock: every call takes `now` (milliseconds
 * on any monotonic or wall timeline the caller chooses) and the observed
 * metrics, and returns a decision with a machine-readable reason and a
 * one-line explanation. The same inputs always give the same decision, which
 * is what makes `gpuscaler simulate` a faithful preview of `gpuscaler run`.
 *
 * One tick is a pipeline of named stages (docs/policy.md has the math):
 *   observe   the caller fills struct policy_input (rates, queue, replicas,
 *             the forecaster's plan);
 *   demand    policy_demand(): the arrival rate now (the fresher of the
 *             window and the last-tick rate; with predictive, a
 *             significant ramp's rate a cold start ahead, policy_trend())
 *             plus the rate that drains the queue within the look-ahead;
 *   forecast  pkg/forecast: the planned peak over the next cold start (the
 *             likely one and the upper one at forecast-quantile, with a
 *             measured coverage); used only once trusted;
 *   size      policy_sizing() / policy_size(): replicas for a rate: the
 *             fewest whose modelled p99 (M/M/c per replica) meets
 *             p99-latency-target, or target-utilization without an SLA;
 *   act       policy_decide(): the rules below;
 *   report    the decision's reason, figures and explanation (the caller
 *             turns them into Events, status and metrics).
 * The rules of policy_decide(): hold on missing or stale metrics; clamp into
 * [min, max]; scale out when requests/GPU stays above target-utilization for
 * scale-out-after (the sustained rule), when the SLA-sized need of the
 * current demand exceeds the count, when the likely peak of the trusted plan
 * needs more replicas, or when the observed p99 stays above the target;
 * scale in, with a trusted forecast, as soon as the current demand and the
 * upper plan over the next cold start fit in fewer replicas (none starting,
 * none needed in the stabilization window), else by the hysteresis rule
 * (below scale-in-utilization for scale-in-after). Scaling out to the likely
 * peak and holding for the upper one is hysteresis in the forecast's terms.
 * Replicas the scheduler cannot place (no node has a free GPU) are not
 * coming capacity: they neither stand in for the queue's drain nor block a
 * scale-in as "still starting", and while there are any no rule raises the
 * count past what is asked for already (hold AtGPUCapacity, the shortfall in
 * want and the needs); when they are placed the rules resume. Replicas placed
 * but failing to start (a container in CrashLoopBackOff, ImagePullBackOff,
 * ...) or not ready for POLICY_STALL_COLD_STARTS look-aheads (stalled) are
 * not coming either: they do not block a scale-in as "still starting" nor
 * keep the p99 rule waiting, and no rule replaces them.
 *
 * Zero replicas: with min-replicas 0, any arrival (or queue) at zero scales
 * out at once, and a seasonal plan that expects requests wakes the count a
 * cold start ahead; the step to zero waits for scale-in-after without a
 * request, for no replica starting or waiting for a GPU, and for no season
 * expecting a request. With min-replicas 1 or more, zero is parked: scaled
 * there by hand and left there (POLICY_HOLD_PARKED), as the HPA does.
 *
 * Configuration keys are shared with annotations (gpuscaler.io/<key>), the
 * YAML config file and the simulator's policy file: policy_config_set() is the
 * single parser of their values. */
#ifndef GPUSCALER_POLICY_H
#define GPUSCALER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** A time that has not happened ("clock not running"). */
#define POLICY_NEVER INT64_MIN
/** Requests queued (policy_input.queue_depth, a mean of gauges or a model's
 *  expectation) from which a queue counts as one: not idle, and at zero
 *  replicas a reason to wake. */
#define POLICY_QUEUED 0.5

/** What demand and capacity are counted in (demand-unit). */
enum policy_demand_unit {
    POLICY_UNIT_REQUESTS, /**< requests/s (default) */
    POLICY_UNIT_TOKENS,   /**< weighted tokens/s: prompt-token-weight x prompt tokens +
                               generated tokens, from the engine's token counters */
};

/** "requests" or "tokens". */
const char *policy_demand_unit_name(enum policy_demand_unit u);

/**
 * Demand-unit tokens: the weighted token rate prompt_weight x prompt_rate +
 * generation_rate (tokens/s, "generated-token equivalents"). NAN when a rate
 * is not finite or negative, or the weight is (missing metrics never make a
 * rate).
 */
double policy_token_demand(double prompt_rate, double generation_rate, double prompt_weight);

/** The default prompt-token-weight: a prompt token costs a quarter of a generated one
 *  (docs/policy.md, "Token-aware demand", says why). */
#define POLICY_DEFAULT_PROMPT_TOKEN_WEIGHT 0.25

/** Tunables of one workload; defaults from policy_config_init(). */
struct policy_config {
    double capacity_rps_per_gpu;   /**< max sustainable demand per GPU, in the demand unit
                                        (requests/s, or weighted tokens/s); required (> 0)
                                        unless capacity_auto */
    enum policy_demand_unit demand_unit; /**< demand-unit, default requests */
    double prompt_token_weight;    /**< with tokens: cost of a prompt token in generated
                                        tokens, default POLICY_DEFAULT_PROMPT_TOKEN_WEIGHT */
    bool capacity_auto;            /**< capacity-per-gpu: auto (learned, pkg/capacity) */
    double capacity_start;         /**< with auto: the value until one is learned, 0 none */
    double target_utilization;     /**< scale-out threshold and sizing target, default 0.8 */
    double scale_in_utilization;   /**< hysteresis: scale in below this, default 0.5 */
    int64_t scale_out_after_ms;    /**< default 2 min */
    int64_t scale_in_after_ms;     /**< default 10 min */
    int32_t min_replicas;          /**< default 1 */
    int32_t max_replicas;          /**< default 10 */
    int32_t max_scale_up_step;     /**< replicas added per decision, 0 = unlimited (default) */
    int32_t max_scale_down_step;   /**< replicas removed per step, 0 = at most half (default) */
    int64_t cold_start_ms;         /**< time for a new replica to become ready, default 3 min */
    int64_t decision_interval_ms;  /**< controller tick, default 15 s */
    bool predictive;               /**< use the forecast look-ahead, default true */
    int64_t seasonality_ms;        /**< forecast season, default 24 h */
    double forecast_quantile;      /**< plan for this quantile of the forecast, default 0.9 */
    int64_t p99_latency_target_ms; /**< SLA on p99 latency, 0 = none (default) */
    int64_t metrics_stale_after_ms;/**< metrics older than this are missing, default 60 s */
    int64_t scale_in_stabilization_ms; /**< with a trusted plan: scale in no lower than the
                                            highest floor of this window, default 2 min */
    double gpus_per_replica;       /**< override of the pod spec's GPU count, 0 = from pods */
    int64_t service_time_ms;       /**< latency of one request on an idle replica; 0 = learned
                                        from the latency histograms (default) */
    double slots_per_gpu;          /**< concurrent requests per GPU; 0 = capacity x service
                                        time (default) */
};

/** Fill in every default. capacity_rps_per_gpu is left 0 (must be set). */
void policy_config_init(struct policy_config *cfg);

/** The number of configuration keys and their names, for docs checks. */
size_t policy_config_key_count(void);
const char *policy_config_key_name(size_t i);

/**
 * Set one key (without the gpuscaler.io/ prefix, e.g. "capacity-per-gpu") from
 * its string value. On error returns -EINVAL (bad value: message says why and
 * the accepted range) or -ENOENT (unknown key), writes a one-line message to
 * err (if errlen > 0) and leaves cfg unchanged.
 */
int policy_config_set(struct policy_config *cfg, const char *key, const char *value, char *err,
                      size_t errlen);

/**
 * Check cross-field constraints (capacity set, min <= max, scale-in below
 * target, ...). Returns 0 or -EINVAL with a message naming the key.
 */
int policy_config_validate(const struct policy_config *cfg, char *err, size_t errlen);

/** The forecaster's rate floor for this workload (forecast_config.rate_floor):
 *  one GPU's rate at the target utilization, below which differences do not
 *  change a replica count (with capacity-per-gpu auto: of capacity-start, or
 *  1 req/s without one; a floor that moved with the estimate would reset the
 *  forecaster). */
double policy_rate_floor(const struct policy_config *cfg);

/** A placed replica not ready for this many cold starts (policy_horizon_ms())
 *  is stalled (policy_input.stalled_replicas): it is not coming. */
#define POLICY_STALL_COLD_STARTS 3

/** Look-ahead horizon: max(cold start, learned cold start) + decision interval. */
int64_t policy_horizon_ms(const struct policy_config *cfg, int64_t learned_cold_start_ms);

/**
 * The shortest span a recent arrival rate (policy_input.recent_rate, and the
 * rate the forecaster keeps the peaks of) should count over: two service
 * times (cfg's, else learned_service_ms), at most half of max_ms (the rate
 * window: the recent rate stays the fresher one); 0 when neither is known. A surge shorter than about a service time is absorbed by the slots
 * a replica frees within it, and the queue it leaves is drained within the
 * SLA's slack; a rate over a shorter span (a 1 s tick's) follows such surges
 * and sizes, and the forecaster plans, for them (docs/policy.md, Observe).
 */
int64_t policy_recent_span_ms(const struct policy_config *cfg, double learned_service_ms,
                              int64_t max_ms);

/** Entries of scale-in floor history kept: one per tick, or, when the
 *  stabilization window is longer than POLICY_FLOOR_TICKS - 1 ticks, the
 *  highest floor of each 1/(POLICY_FLOOR_TICKS - 1) of the window (at 1 s
 *  ticks, 2 min in slots of 2 s), so that the whole window is kept. */
#define POLICY_FLOOR_TICKS 64

/** The scale-in floor is sized at this fraction below the per-replica rate
 *  that the plan's scale-out sizes at: a plan hovering at a replica boundary
 *  does not add and remove that replica every minute. With a p99 target the
 *  demand is sized at it for scale-out too (a mean at the SLA's edge leaves
 *  its own peaks over the target). */
#define POLICY_SCALE_IN_MARGIN 0.05

/** The last tick's arrival rate replaces the window's only when it is this
 *  many Poisson standard errors above it, in the square root of the count
 *  (policy_demand()). */
#define POLICY_RECENT_SIGMAS 3.0

/** The ramp (policy_trend()): the measured rate of the last
 *  POLICY_TREND_WINDOW_MS is kept in at most POLICY_TREND_SAMPLES samples;
 *  its least-squares line counts as a ramp when its slope is more than
 *  POLICY_TREND_SIGMAS standard errors above zero and it rises by at most
 *  POLICY_TREND_MAX_PER_MIN of its rate a minute (steeper is a burst's
 *  onset), and is then followed a cold start ahead. */
#define POLICY_TREND_WINDOW_MS (5 * 60 * 1000)
#define POLICY_TREND_SAMPLES 32
#define POLICY_TREND_SIGMAS 3.0
#define POLICY_TREND_MAX_PER_MIN 0.05

/** Per-workload memory of the policy: the rules' clocks and the cached SLA
 *  utilisation. Zero-init is NOT valid. */
struct policy_state {
    int64_t above_since_ms;         /**< utilization above target since, or POLICY_NEVER */
    int64_t below_since_ms;         /**< utilization below scale-in threshold since */
    int64_t latency_above_since_ms; /**< p99 above target since */
    int64_t idle_since_ms;          /**< no arrivals and no queue since (the last step to
                                         zero waits scale-in-after of it), or POLICY_NEVER */
    int64_t last_scale_ms;          /**< last time the decision changed replicas */
    /* the scale-in floor (replicas that demand and plan need) of recent ticks */
    int32_t floor_hist[POLICY_FLOOR_TICKS];
    int64_t floor_t_ms[POLICY_FLOOR_TICKS];
    int32_t floor_pos, floor_len;
    int64_t floor_since_ms; /**< the oldest floor since the history last started (at
                                 the first tick, or after missing metrics) */
    /* the measured rate of recent ticks, for the ramp (policy_trend()) */
    double trend_rate[POLICY_TREND_SAMPLES];
    int64_t trend_t_ms[POLICY_TREND_SAMPLES];
    int32_t trend_pos, trend_len;
    /* the last action (act_from -> act_to; act_to -1: none) and the clocks
     * it restarted, given back when the next decision finds it not applied */
    int32_t act_from, act_to;
    int64_t undo_below_since_ms, undo_latency_above_since_ms, undo_last_scale_ms;
    /* cache of policy_sla_utilization() for these inputs */
    int32_t sla_servers;
    double sla_service_s, sla_target_s, sla_replica_rps, sla_util;
};

void policy_state_init(struct policy_state *st);

/**
 * Move every time the state holds by delta_ms. The caller's clock stepped
 * (the wall clock set forward or back) by delta_ms more than the time that
 * passed: shifted with it, each rule's clock keeps the time it measured, so
 * a step forward does not fire the rules waiting on it, nor empty the
 * scale-in stabilization window, and a step back does not hold them.
 */
void policy_state_shift(struct policy_state *st, int64_t delta_ms);

/** What the caller observed at `now`. */
struct policy_input {
    int64_t now_ms;
    int32_t current_replicas; /**< replicas asked for (spec) */
    bool zero_by_policy;      /**< current_replicas is 0, reached under min-replicas 0
                                   (this policy's to scale to zero and back, not parked by
                                   hand): at min-replicas 1 or more since, a count to raise */
    int32_t ready_replicas;   /**< replicas ready and serving */
    int32_t unschedulable_replicas; /**< replicas asked for that no node can place (Pending,
                                         PodScheduled False: no free GPU); never coming
                                         capacity while so. 0: none */
    int32_t stalled_replicas; /**< replicas placed but failing to start (a container in
                                   CrashLoopBackOff, ImagePullBackOff, ...) or not ready
                                   for longer than POLICY_STALL_COLD_STARTS cold starts (a
                                   readiness probe that never passes): not coming
                                   capacity, so they do not hold a scale-in back as "still
                                   starting" (a scale-in removes them first). 0: none */
    double gpus_per_replica;  /**< GPUs of one replica (>= 1 for GPU pods; 0 -> 1) */
    bool metrics_valid;       /**< false when the collector could not measure */
    int64_t metrics_time_ms;  /**< when request_rate was measured */
    double request_rate;      /**< demand over the whole deployment, in the demand unit
                                   (requests/s, or weighted tokens/s) */
    int64_t rate_window_ms;   /**< the span request_rate averages over (on a ramp it is the
                                   rate of half that span ago); 0: unknown, taken as now */
    double recent_rate;       /**< the same over the last tick only, < 0 or NAN unknown */
    int64_t recent_window_ms; /**< the span recent_rate counts over; 0: unknown (trusted as is) */
    double p99_latency_ms;    /**< observed p99, < 0 unknown */
    double queue_depth;       /**< requests waiting for a slot, < 0 unknown (always requests) */
    double request_size;      /**< demand units one request carries: 1 for requests, the
                                   measured weighted tokens per request for tokens; converts
                                   the queue and the slots (both counted in requests) into the
                                   demand unit. <= 0 or NAN: 1 */
    double service_time_ms;   /**< learned service time (used when the config has none),
                                   <= 0 unknown */
    bool have_forecast;       /**< forecast_rate is meaningful */
    double forecast_rate;     /**< planned peak rate over [now, now + horizon] (the upper plan) */
    double forecast_likely;   /**< the likely peak (forecast_result.likely); NAN: the upper */
    double forecast_model_rate; /**< the model's upper plan when forecast_rate is the learned
                                     one (forecast_result.upper_model): a scale-out asks for the
                                     wider of the two; NAN, 0 or below forecast_rate: unused */
    bool forecast_trusted;    /**< enough evidence backs it (forecast_result.trusted) */
    bool forecast_seasonal;   /**< it has a season (else: level only, on short history) */
};

enum policy_reason {
    POLICY_HOLD_WITHIN_BAND,       /**< between the two thresholds */
    POLICY_HOLD_ABOVE_WAITING,     /**< above target, clock running */
    POLICY_HOLD_BELOW_WAITING,     /**< below scale-in threshold, clock running */
    POLICY_HOLD_SCALE_OUT_PENDING, /**< already asked for enough replicas; waiting for them */
    POLICY_HOLD_AT_MAX,            /**< would scale out but at max_replicas */
    POLICY_HOLD_AT_MIN,            /**< would scale in but at min_replicas */
    POLICY_HOLD_LATENCY,           /**< scale-in blocked: p99 or queue above target */
    POLICY_METRICS_UNAVAILABLE,    /**< missing or stale metrics: hold, never scale in */
    POLICY_SCALED_OUT,             /**< sustained-rule scale-out */
    POLICY_PREDICTIVE_SCALE_OUT,   /**< forecast scale-out ahead of load */
    POLICY_LATENCY_SCALE_OUT,      /**< sustained p99 above the SLA */
    POLICY_SLA_SCALE_OUT,          /**< the SLA-sized need of the current demand */
    POLICY_SCALED_IN,              /**< sustained-rule scale-in */
    POLICY_PREDICTIVE_SCALE_IN,    /**< plan and demand fit in fewer replicas */
    POLICY_CLAMPED,                /**< current replicas outside [min, max] */
    POLICY_HOLD_GPU_CAPACITY,      /**< the load needs more than is placed, but replicas
                                        asked for cannot be scheduled (no free GPU): hold */
    POLICY_HOLD_PARKED,            /**< at 0 replicas with min-replicas >= 1: scaled to zero
                                        by hand, left there (as the HPA does) */
    POLICY_REASON_COUNT
};

/** CamelCase name of a reason ("ScaledOut", "MetricsUnavailable", ...). */
const char *policy_reason_name(enum policy_reason r);
/** True for reasons that change the replica count. */
bool policy_reason_is_action(enum policy_reason r);

struct policy_decision {
    int32_t desired;                 /**< replicas to run */
    enum policy_reason reason;
    enum policy_reason rule;         /**< for a hold: the rule that would act (e.g. why
                                          AtMaxReplicas), POLICY_REASON_COUNT if none */
    int32_t want;                    /**< replicas the acting or waiting rule asks for
                                          before bounds and step limits, 0 if none */
    double forecast_rps;             /**< the trusted (upper) plan's peak rate; NAN without */
    double forecast_likely_rps;      /**< its likely peak; NAN without */
    double requests_per_gpu;         /**< current, over ready replicas; NAN when unknown */
    double utilization;              /**< requests_per_gpu / capacity */
    double forecast_requests_per_gpu;/**< forecast over desired replicas; NAN without one */
    double demand_rps;               /**< the demand stage's rate (arrivals + drain); NAN */
    double per_replica_rps;          /**< what one replica may carry (SLA or target) */
    bool sla_sized;                  /**< per_replica_rps comes from the p99 target */
    int32_t need_now;                /**< replicas the current demand needs */
    int32_t need_forecast;           /**< replicas the trusted (upper) plan needs, 0 without */
    int32_t need_likely;             /**< replicas its likely peak needs, 0 without */
    int32_t unschedulable;           /**< in->unschedulable_replicas within [0, current] */
    int32_t stalled;                 /**< in->stalled_replicas within [0, current less
                                          the unschedulable and the ready] */
    int64_t above_since_ms;          /**< copy of the clock, POLICY_NEVER when stopped */
    int64_t scale_out_at_ms;         /**< when the scale-out rule fires, POLICY_NEVER */
    int64_t below_since_ms;
    int64_t scale_in_at_ms;
    char explain[384];               /**< one human line */
};

/**
 * Decide for one tick. Updates st (the clocks) and fills out. Never returns a
 * count outside [min_replicas, max_replicas], but leaves a Deployment parked
 * at 0 (current_replicas 0 with min_replicas >= 1: POLICY_HOLD_PARKED); never
 * lower than current_replicas when metrics are missing or stale. cfg must
 * have passed policy_config_validate().
 */
void policy_decide(const struct policy_config *cfg, struct policy_state *st,
                   const struct policy_input *in, struct policy_decision *out);

/* ---- stages ------------------------------------------------------------- */

/** The demand stage's answer. */
struct policy_demand {
    double arrival_rps;  /**< arrivals now: the window's, or the last tick's if well above */
    double drain_rps;    /**< extra rate that drains the waiting queue within the horizon */
    double rate_rps;     /**< arrival + drain: what the replicas must serve */
    double queue;        /**< requests queued when new capacity serves (0: none to drain) */
    bool rising;         /**< the last tick's rate wins: significantly above the window's, or
                              above it and significantly above what the ready replicas carry */
    bool ramp;           /**< arrival_rps is the ramp's rate a cold start ahead */
};

/** Keep the tick's measured rate for the ramp: at most one sample per
 *  POLICY_TREND_WINDOW_MS / POLICY_TREND_SAMPLES; NaN and negative rates are
 *  not kept. */
void policy_trend_push(struct policy_state *st, int64_t now_ms, double rate);

/**
 * The ramp: the rate lead_ms from now on the least-squares line through the
 * rates kept over the last POLICY_TREND_WINDOW_MS, when its slope is more
 * than POLICY_TREND_SIGMAS standard errors above zero; no further ahead than
 * the samples span. 0 when the rate does not rise significantly, when the
 * line rises by more than POLICY_TREND_MAX_PER_MIN of its rate now a minute
 * (a burst's onset), or when fewer than half a window (and 6 samples) are
 * kept. Pure:
 * reads st only.
 */
double policy_trend(const struct policy_state *st, int64_t now_ms, int64_t lead_ms);

/**
 * Demand from an observation: in->request_rate and in->recent_rate (the
 * fresher wins when it is higher than the window's by more than
 * POLICY_RECENT_SIGMAS standard errors of a Poisson count at the window's
 * rate over recent_window_ms, the span its samples cover, measured in the
 * count's square root (whose standard error is 1/2 at any mean), so a step
 * is sized at once but one noisy second is not, and a dip is not trusted
 * before the window sees it; it wins too, when higher than the window's, if
 * it is that far above carry_rps, what the ready replicas are sized to
 * carry: they are short now, and a window partly from before a step
 * under-sizes them; NaN: not known), or ramp_rps (policy_trend(), 0 for none) where
 * that is higher (demand.ramp says so), plus the rate that drains, within
 * horizon_ms, the queue as it will be when new capacity serves, lead_ms from
 * now (the cold start; while replicas asked for are starting, what remains
 * of the newest ask's): in->queue_depth, less what the ready replicas'
 * headroom (ready x replica_rps, their saturated throughput, less the
 * arrivals measured, not the ramp's) drains by then, or plus what piles up
 * while the arrivals exceed it. Unknown inputs count as 0; with no queue
 * seen (queue_depth 0, negative or NaN) there is no drain. horizon_ms > 0.
 */
void policy_demand(const struct policy_input *in, double ramp_rps, int64_t horizon_ms,
                   int64_t lead_ms, double replica_rps, double carry_rps,
                   struct policy_demand *out);

/** The size stage's constants for one workload. */
struct policy_sizing {
    double per_replica_rps; /**< rate one replica may carry */
    double utilization;     /**< per_replica_rps / (capacity x GPUs) */
    bool from_sla;          /**< from the p99 target and the queueing model */
    double service_s;       /**< service time used (s), 0 when none */
    int32_t servers;        /**< concurrent requests per replica (slots) */
};

/**
 * Largest utilisation rho of one replica (servers concurrent slots, at most
 * replica_rps requests/s, service_s seconds per request on an idle replica)
 * at which the M/M/c p99 latency, service_s + max(0, ln(C(c, rho c) / 0.01) /
 * (replica_rps (1 - rho))) with C Erlang's C formula, stays within target_s.
 * 0 when even an idle replica misses the target (service_s >= target_s).
 * Costs O(c) per bisection step: cache it (policy_sizing does, in st).
 */
double policy_sla_utilization(int32_t servers, double replica_rps, double service_s,
                              double target_s);

/**
 * The size stage for cfg, in->gpus_per_replica and the learned service time
 * (in->service_time_ms when cfg has none): per-replica rate from the p99
 * target when both a target and a service time are known, else
 * target-utilization x capacity x GPUs. The SLA utilisation is cached in st.
 */
void policy_sizing(const struct policy_config *cfg, struct policy_state *st,
                   const struct policy_input *in, struct policy_sizing *out);

/** Replicas for rate (ceil, exact fits do not round up); 0 for no load. */
int64_t policy_size(const struct policy_sizing *sz, double rate);

/**
 * Replicas the demand needs: the arrivals sized by sz, and at least what
 * serves arrivals plus the queue's drain at replica_rps each (saturated:
 * G x C), whichever is more.
 */
int64_t policy_need(const struct policy_sizing *sz, const struct policy_demand *d,
                    double replica_rps);

/* ---- counter rates ------------------------------------------------------ */

#define POLICY_COUNTER_SAMPLES 32

/**
 * Samples of one cumulative counter (one pod's request counter), kept for the
 * rate window. Fixed size, no allocation. Zero-init is valid.
 */
struct policy_counter {
    int64_t t_ms[POLICY_COUNTER_SAMPLES];
    double v[POLICY_COUNTER_SAMPLES];
    int head; /**< index of the oldest sample */
    int n;
};

/**
 * Record a sample. Out-of-order or duplicate timestamps are ignored, as are
 * NaN and negative values; returns 0 if recorded, -EINVAL otherwise.
 */
int policy_counter_add(struct policy_counter *c, int64_t t_ms, double value);

/**
 * Per-second rate over the samples in (now - window, now], as Prometheus
 * rate(): counter resets (a decrease) count the new value as the increase.
 * Returns -ENODATA with fewer than two samples in the window.
 */
int policy_counter_rate(const struct policy_counter *c, int64_t now_ms, int64_t window_ms,
                        double *out_rate);

/**
 * The counter's increase over the samples in (now - window, now] (resets
 * handled as in policy_counter_rate) and the time those samples span. Summing
 * increases of several counters and dividing by the longest span gives their
 * combined throughput over the window even when some counters are younger
 * than it (a pod that just started): averaging per-counter rates would count
 * the young counter's short span as if it covered the whole window.
 * -ENODATA with fewer than two samples in the window.
 */
int policy_counter_increase(const struct policy_counter *c, int64_t now_ms, int64_t window_ms,
                            double *out_increase, int64_t *out_span_ms);

/** Time of the newest sample, or POLICY_NEVER. */
int64_t policy_counter_last_ms(const struct policy_counter *c);

#endif

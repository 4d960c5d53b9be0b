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
 * The rule (docs/policy.md has the math):
 *   requests/GPU = request rate / (ready replicas x GPUs per replica)
 *   scale out when requests/GPU > target_utilization x capacity continuously
 *   for scale_out_after; scale in when it is < scale_in_utilization x capacity
 *   continuously for scale_in_after, at most max_scale_down_step (or half the
 *   replicas) per step, one step per window; hold on missing or stale metrics.
 *   With a forecast: scale out ahead of load when the upper-quantile forecast
 *   needs more replicas for a full decision interval (two ticks in a row, so
 *   one noisy forecast does not add capacity); never scale in below what the
 *   forecast needs (a lower floor would be undone by the next predictive
 *   scale-out: flapping).
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

/** Tunables of one workload; defaults from policy_config_init(). */
struct policy_config {
    double capacity_rps_per_gpu;   /**< max sustainable requests/s per GPU; required (> 0) */
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
    double gpus_per_replica;       /**< override of the pod spec's GPU count, 0 = from pods */
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

/** Look-ahead horizon: max(cold start, learned cold start) + decision interval. */
int64_t policy_horizon_ms(const struct policy_config *cfg, int64_t learned_cold_start_ms);

/** Per-workload memory of the policy: the sustained-rule clocks. Zero-init is NOT valid. */
struct policy_state {
    int64_t above_since_ms;         /**< utilization above target since, or POLICY_NEVER */
    int64_t below_since_ms;         /**< utilization below scale-in threshold since */
    int64_t latency_above_since_ms; /**< p99 above target since */
    int64_t forecast_above_since_ms;/**< forecast need above current replicas since */
    int64_t last_scale_ms;          /**< last time the decision changed replicas */
};

void policy_state_init(struct policy_state *st);

/** What the caller observed at `now`. */
struct policy_input {
    int64_t now_ms;
    int32_t current_replicas; /**< replicas asked for (spec) */
    int32_t ready_replicas;   /**< replicas ready and serving */
    double gpus_per_replica;  /**< GPUs of one replica (>= 1 for GPU pods; 0 -> 1) */
    bool metrics_valid;       /**< false when the collector could not measure */
    int64_t metrics_time_ms;  /**< when request_rate was measured */
    double request_rate;      /**< requests/s over the whole deployment */
    double p99_latency_ms;    /**< observed p99, < 0 unknown */
    double queue_depth;       /**< queued requests, < 0 unknown */
    bool have_forecast;       /**< forecast_rate is meaningful */
    double forecast_rate;     /**< planned (upper-quantile) rate at now + horizon */
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
    POLICY_SCALED_IN,              /**< sustained-rule scale-in */
    POLICY_CLAMPED,                /**< current replicas outside [min, max] */
    POLICY_REASON_COUNT
};

/** CamelCase name of a reason ("ScaledOut", "MetricsUnavailable", ...). */
const char *policy_reason_name(enum policy_reason r);
/** True for reasons that change the replica count. */
bool policy_reason_is_action(enum policy_reason r);

struct policy_decision {
    int32_t desired;                 /**< replicas to run */
    enum policy_reason reason;
    double requests_per_gpu;         /**< current, over ready replicas; NAN when unknown */
    double utilization;              /**< requests_per_gpu / capacity */
    double forecast_requests_per_gpu;/**< forecast over desired replicas; NAN without one */
    int32_t need_now;                /**< replicas the current load needs at target */
    int32_t need_forecast;           /**< replicas the forecast needs, 0 without one */
    int64_t above_since_ms;          /**< copy of the clock, POLICY_NEVER when stopped */
    int64_t scale_out_at_ms;         /**< when the scale-out rule fires, POLICY_NEVER */
    int64_t below_since_ms;
    int64_t scale_in_at_ms;
    char explain[256];               /**< one human line */
};

/**
 * Decide for one tick. Updates st (the clocks) and fills out. Never returns a
 * count outside [min_replicas, max_replicas]; never lower than
 * current_replicas when metrics are missing or stale. cfg must have passed
 * policy_config_validate().
 */
void policy_decide(const struct policy_config *cfg, struct policy_state *st,
                   const struct policy_input *in, struct policy_decision *out);

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

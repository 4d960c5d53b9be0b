/* SPDX-License-Identifier: Apache-2.0 */
/* sim: the trace-replay simulator behind `gpuscaler simulate`. It replays a
 * request trace on simulated time through the same policy code the live
 * controller runs (policy_decide, fed by the Holt-Winters forecaster) and
 * through a model of the Kubernetes HPA, over a serving model of GPU
 * replicas, and reports GPU-hours and SLA misses of each.
 *
 * Design. The simulation steps at 1 s. Every policy sees the same arrivals
 * (the trace, scaled, with coarser buckets spread uniformly over their
 * seconds) and gets its own copy of the serving model: replicas of G GPUs,
 * each GPU serving C requests/s, new replicas ready one cold start after they
 * are asked for (with gpu-limit, those beyond the GPUs there are stay
 * Pending, unschedulable, and never serve), removed ones gone at once; a fluid backlog carried from
 * second to second plus M/M/c queueing inside each replica gives every
 * second's latency distribution, from which the p99 of every interval
 * (1 min) and the share of requests over the SLA follow. docs/policy.md has
 * the model and its equations.
 *
 * Everything is deterministic: no clock, no randomness; the same config and
 * trace give byte-identical results and outputs. Nothing here does file I/O
 * but sim_file_load() (the YAML file, through pkg/conf): the report writers
 * append to a util_buf that the caller writes out.
 *
 * Ownership: sim_run() returns a result owned by the caller (sim_result_free);
 * the config and trace are only read during the call. */
#ifndef GPUSCALER_SIM_H
#define GPUSCALER_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "trace/trace.h"
#include "util/util.h"

/** Most seconds one run scores (400 days: plan's longest horizon, 365,
 *  replayed whole): the oracle and the timelines take tens of bytes per
 *  scored second, so a timestamp typo years ahead is refused, not swapped. */
#define SIM_MAX_SCORED_S ((int64_t)400 * 86400)

/** The policies a run can compare. */
enum sim_policy {
    SIM_PREDICTIVE, /**< policy_decide with predictive=true and the forecaster */
    SIM_REACTIVE,   /**< the same rule with predictive=false */
    SIM_HPA,        /**< the Kubernetes HPA v2 algorithm with its defaults */
    SIM_ORACLE,     /**< perfect foresight: the cheapest schedule within the SLA (oracle.c) */
    SIM_STATIC_PEAK,/**< the oracle's peak need, held for the whole window */
    SIM_POLICY_COUNT
};

/** "predictive", "reactive", "hpa", "oracle" or "static-peak". */
const char *sim_policy_name(enum sim_policy p);

/**
 * Parse a comma-separated list of policy names ("predictive,hpa") into a bit
 * set (bit 1u << enum sim_policy). Duplicates are allowed, an empty list or
 * an unknown name is -EINVAL.
 */
int sim_policy_parse_list(const char *s, unsigned *out);

/** The HPA model's settings; defaults are Kubernetes' (sim_config_init). */
struct sim_hpa_config {
    int64_t sync_period_ms;        /**< controller sync period, 15 s */
    double tolerance;              /**< no change while |ratio - 1| <= this, 0.1 */
    int64_t downscale_window_ms;   /**< scaleDown stabilization window, 300 s */
    int64_t upscale_window_ms;     /**< scaleUp stabilization window, 0 */
    int32_t scale_up_pods;         /**< scaleUp Pods policy: add this many per period, 4 */
    int32_t scale_up_percent;      /**< scaleUp Percent policy: add this % per period, 100 */
    int64_t scale_up_period_ms;    /**< period of both scale-up policies, 15 s */
    int32_t scale_down_percent;    /**< scaleDown Percent policy, 100 */
    int64_t scale_down_period_ms;  /**< 15 s */
    double target_per_pod;         /**< AverageValue target in requests/s per pod;
                                        0 = target-utilization x capacity x GPUs */
    int64_t metric_window_ms;      /**< the adapter's rate() window, 2 min */
    int64_t metric_delay_ms;       /**< scrape + adapter + API lag, 30 s */
    int64_t scrape_interval_ms;    /**< a new pod has a rate after this much data, 15 s */
};

/** Most values quantile-sweep takes. */
#define SIM_MAX_SWEEP 8

/** Everything one run needs besides the trace. */
struct sim_config {
    struct policy_config policy;   /**< predictive/reactive rule; min/max bound the HPA too;
                                        its service-time and slots-per-gpu are also the
                                        simulated servers' */
    int64_t sla_ms;                /**< scored p99 SLA; 0 = p99-latency-target */
    double scale;                  /**< multiply the trace's counts by this */
    int64_t start_ms;              /**< scored window starts this far into the trace */
    int64_t duration_ms;           /**< scored window length; 0 = to the end of the trace */
    int64_t warmup_ms;             /**< replayed before start but not scored (forecaster,
                                        clocks and replicas settle); cut at the trace start */
    int32_t initial_replicas;      /**< ready at the first second; 0 = what the load needs */
    double serve_capacity;         /**< the simulated GPUs' true requests/s; 0 = the policy's
                                        capacity-per-gpu (required with capacity-per-gpu auto) */
    int32_t gpu_limit;             /**< GPUs the cluster can give the Deployment: replicas
                                        beyond floor(gpu_limit / G) stay Pending, unschedulable
                                        (never ready, no GPU-hours); 0 = no limit */
    int64_t rate_window_ms;        /**< the controller's rate window, 60 s */
    int64_t interval_ms;           /**< report interval for p99, timeline and SLA minutes, 60 s */
    unsigned policies;             /**< bit set of enum sim_policy to run */
    double quantile_sweep[SIM_MAX_SWEEP]; /**< quantile-sweep: predictive replayed again at
                                        each of these forecast-quantile values, ascending,
                                        distinct (the trade-off of GPU-hours against SLA
                                        minutes on this trace) */
    size_t nsweep;                 /**< how many; 0 = no sweep (default) */
    struct sim_hpa_config hpa;
    /** predictive: start its forecaster from this forecast_serialize() output
     *  instead of empty, as `gpuscaler run` seeds it from Prometheus history
     *  (pkg/plan seeds it from the days before its window). Not a key; NULL
     *  (default) = empty. Borrowed for the call; built with the config of
     *  sim_forecast_config() and with times before the replay's first second. */
    const uint8_t *forecast_seed;
    size_t forecast_seed_len;
};

/** Defaults: policy_config_init(), Kubernetes' HPA defaults, all three policies,
 *  service time 1 s, scale 1, no warm-up. capacity-per-gpu and an SLA are not set. */
void sim_config_init(struct sim_config *cfg);

/**
 * The parameters of the bundled demo (sim_demo_trace): a GPU service sized to
 * need on the order of 10-60 replicas over the trace's daily cycle, a 3 min
 * cold start, a p99 SLA, and a two-day warm-up for the forecaster. Applied on
 * top of sim_config_init() when no trace is given; flags and files override.
 */
void sim_config_demo(struct sim_config *cfg);

/** The simulated GPUs' true capacity: serve_capacity, else capacity-per-gpu. */
double sim_config_capacity(const struct sim_config *cfg);

/**
 * Set one key from its string value: any key of policy_config_set() (through
 * it), or a simulator key (sim_config_key_name). Returns 0; -ENOENT for an
 * unknown key; -EINVAL for a bad value, with a one-line message naming the
 * key and the accepted range in err. A failed set leaves cfg unchanged.
 */
int sim_config_set(struct sim_config *cfg, const char *key, const char *value, char *err,
                   size_t errlen);

/** The simulator's own keys (not the policy's), for usage text and docs. */
size_t sim_config_key_count(void);
const char *sim_config_key_name(size_t i);
const char *sim_config_key_help(size_t i);

/**
 * Cross-field checks: policy_config_validate(), an SLA present, every period
 * a whole number of seconds, a scored span of at most SIM_MAX_SCORED_S,
 * cold start at most one day, initial replicas
 * within bounds. 0 or -EINVAL with a message naming the key.
 */
int sim_config_validate(const struct sim_config *cfg, char *err, size_t errlen);

/* ---- the YAML file (`simulate --config`, yaml.c) ------------------------- */

/** One `key: value` of a simulator file, with its line. */
struct sim_file_setting {
    char *key;          /**< owned */
    char *value;        /**< owned: a scalar as written, a sequence's items joined with commas */
    int line;           /**< 1-based line of the value */
};

/** A simulator file: its settings, in file order, and its trace. */
struct sim_file {
    struct sim_file_setting *v; /**< owned; every key but `trace`, unchecked (sim_config_set
                                     checks them as they are applied) */
    size_t n;
    char *trace;        /**< the `trace` value as written (a relative path is the caller's to
                             resolve from the file's folder), owned; NULL without one */
    int trace_line;
};

/** Where a simulator file is wrong. */
struct sim_file_error {
    int line;           /**< 1-based, 0 when not about a line (the file cannot be read) */
    char msg[240];      /**< without the file's name, unless line is 0 */
};

/**
 * Parse a simulator file: a YAML map (conf_parse's rules: core tags only and
 * fitting their nodes, no anchors, no duplicate keys) whose values are
 * scalars or sequences of scalars. `trace` must be a non-empty scalar. On
 * success *out holds the settings (sim_file_clear). On error returns
 * -EINVAL (or conf_parse's code) with err filled, *out empty.
 */
int sim_file_parse(const char *buf, size_t len, struct sim_file *out, struct sim_file_error *err);

/** Read and parse a file: sim_file_parse's results, plus -errno when it
 *  cannot be read (err->line 0, the message names the file). */
int sim_file_load(const char *path, struct sim_file *out, struct sim_file_error *err);

/** Free the settings; f is left empty (safe to clear twice). */
void sim_file_clear(struct sim_file *f);

/** The scored SLA: sla_ms, else the policy's p99-latency-target. */
int64_t sim_config_sla_ms(const struct sim_config *cfg);

/** GPUs per replica the simulator uses: the policy's gpus-per-replica, or 1. */
double sim_config_gpus(const struct sim_config *cfg);

/** Replicas gpu-limit can place: floor(gpu_limit / GPUs per replica), or
 *  INT32_MAX without a limit. */
int32_t sim_config_placeable(const struct sim_config *cfg);

struct forecast_config;
/** The forecaster configuration the predictive policy's replay uses: the
 *  defaults with the policy's seasonality, forecast-quantile and rate floor. */
void sim_forecast_config(const struct sim_config *cfg, struct forecast_config *out);

/** The bundled demo trace (CSV text, not NUL-terminated) and its description. */
const char *sim_demo_trace(size_t *len);
const char *sim_demo_trace_name(void);

/** One report interval of one policy. */
struct sim_point {
    double t_s;             /**< interval start, seconds on the trace's time axis */
    int32_t desired;        /**< replicas asked for at the interval's end */
    int32_t ready;          /**< replicas ready at the interval's end */
    double demand_rps;      /**< arrivals / interval length */
    double capacity_rps;    /**< ready capacity, time-averaged (ready x G x C) */
    double rps_per_gpu;     /**< arrivals per ready GPU-second */
    double forecast_rps;    /**< newest planned forecast (predictive), else NAN */
    double p99_ms;          /**< p99 latency of the interval's arrivals, 0 without any */
};

/** One change of a policy's desired replica count (the first entry is the
 *  count at the start of the scored window). */
struct sim_change {
    double t_s;             /**< seconds on the trace's time axis */
    int32_t desired;
};

/** Scaling actions of one kind (a policy_reason_name or an HPA reason). */
struct sim_reason_count {
    char name[32];
    int64_t count;
};

#define SIM_MAX_REASONS 16

/** Totals of one policy over the scored window. */
struct sim_policy_result {
    enum sim_policy policy;
    double gpu_hours;           /**< GPUs held (ready or starting) x time */
    int64_t intervals;          /**< scored intervals */
    int64_t sla_intervals;      /**< intervals whose p99 is above the SLA */
    double requests;            /**< scored arrivals */
    double requests_over_sla;   /**< expected number of them slower than the SLA */
    int64_t scaling_actions;    /**< changes of the desired replica count */
    int64_t flaps;              /**< changes that reverse the previous one's direction
                                     within one cold start (out then in, or in then out) */
    int32_t peak_replicas;      /**< highest desired count */
    double mean_replicas;       /**< time-averaged replicas held */
    double max_p99_ms;          /**< worst interval p99 */
    size_t nreasons;            /**< scaling actions by reason, in order of first use */
    struct sim_reason_count reasons[SIM_MAX_REASONS];
    double gpu_hours_vs_oracle; /**< gpu_hours / the oracle's; NAN without an oracle */
    double plan_coverage;       /**< predictive: share of resolved plans that held; NAN */
    double plan_margin;         /**< predictive: mean plan / realised peak - 1; NAN */
    double capacity_learned;    /**< capacity-per-gpu auto: the estimate at the end; NAN */
    double pending_replica_hours; /**< gpu-limit: replicas asked for but unschedulable x time */
    int32_t peak_unschedulable; /**< gpu-limit: most replicas unschedulable at once */
    const char *capacity_source;/**< and where the capacity in use came from then */
    int64_t plan_resolved;      /**< predictive: plans resolved (whole replay) */
    size_t npoints;
    struct sim_point *points;   /**< one per scored interval, owned */
    size_t nchanges;
    struct sim_change *changes; /**< every desired-count change in the scored window, owned */
};

/** predictive at one forecast-quantile of the sweep (quantile-sweep). */
struct sim_sweep_point {
    double quantile;            /**< its forecast-quantile */
    bool configured;            /**< the configured forecast-quantile (the main run's) */
    double gpu_hours;
    double gpu_hours_vs_oracle; /**< NAN without an oracle */
    int64_t intervals;          /**< scored intervals */
    int64_t sla_intervals;      /**< intervals whose p99 is above the SLA */
    double requests;            /**< scored arrivals */
    double requests_over_sla;   /**< expected number of them slower than the SLA */
    int64_t scaling_actions;
    int64_t flaps;
    double plan_coverage;       /**< share of resolved plans that held; NAN */
};

struct sim_result {
    double t_begin_s;           /**< scored window on the trace's time axis */
    double t_end_s;
    double warmup_s;            /**< replayed before t_begin_s */
    double requests;            /**< scored arrivals (the same for every policy) */
    double peak_demand_rps;     /**< highest interval demand */
    double oracle_gpu_hours;    /**< the oracle's GPU-hours (always computed), 0 if none */
    int32_t oracle_peak_need;   /**< replicas the busiest second needs within max-replicas
                                     (static-peak's count) */
    int32_t peak_need;          /**< ... without max-replicas: above it, max-replicas cannot
                                     carry the trace's peak within the SLA */
    size_t n;                   /**< policies run, in enum order */
    struct sim_policy_result pol[SIM_POLICY_COUNT];
    size_t nsweep;              /**< quantile-sweep's points: its values and the configured
                                     forecast-quantile, ascending; 0 without a sweep */
    struct sim_sweep_point sweep[SIM_MAX_SWEEP + 1];
};

/** Optional observer of every replica change (tests, debugging). */
struct sim_hooks {
    void (*on_scale)(enum sim_policy p, int64_t now_ms, int32_t from, int32_t to,
                     const char *reason, void *arg);
    void *arg;
};

/**
 * Replay tr through every policy in cfg->policies. cfg must have passed
 * sim_config_validate(). On success *out is a new result. Returns -EINVAL
 * when the trace cannot be replayed as asked (bucket width not whole
 * seconds, start past the end, an empty window), with the reason in err.
 * hooks may be NULL; they see the policies' passes, not the sweep's.
 * With a quantile-sweep, predictive is replayed once more for each of its
 * values (the configured forecast-quantile's point is the predictive
 * policy's own run when it is among the policies).
 */
int sim_run(const struct sim_config *cfg, const struct trace *tr, const struct sim_hooks *hooks,
            struct sim_result **out, char *err, size_t errlen);

void sim_result_free(struct sim_result *r);

/* ---- reports (append to b; deterministic) ----------------------------- */

/** What the reports say about the input. */
struct sim_report_info {
    const char *trace_name;     /**< path or description of the trace */
    double trace_dt_s;          /**< its bucket width */
    double trace_span_s;        /**< its length */
    size_t trace_missing;       /**< its buckets without a row (trace.nmissing), replayed
                                     as no traffic */
    size_t trace_buckets;       /**< all its buckets (trace.n) */
};

/** Header with every parameter, then the table of the policies. */
void sim_report_table(struct util_buf *b, const struct sim_config *cfg,
                      const struct sim_report_info *info, const struct sim_result *r);

/** CSV: t_seconds,policy,desired_replicas,ready_replicas,demand_rps,
 *  requests_per_gpu,forecast_rps,p99_ms (one row per interval and policy). */
void sim_report_timeline_csv(struct util_buf *b, const struct sim_result *r);

/** CSV: t_seconds,policy,desired_replicas: each policy's count at the start
 *  of the scored window and at every change after it (a step function, the
 *  format replica-timeline scorers read). */
void sim_report_scale_log_csv(struct util_buf *b, const struct sim_result *r);

/** The parameters and results as one JSON object. */
void sim_report_json(struct util_buf *b, const struct sim_config *cfg,
                     const struct sim_report_info *info, const struct sim_result *r);

/** A standalone SVG chart: demand vs ready capacity per policy, replicas,
 *  p99 against the SLA, with the totals in the legend. */
void sim_report_svg(struct util_buf *b, const struct sim_config *cfg,
                    const struct sim_report_info *info, const struct sim_result *r);

#endif

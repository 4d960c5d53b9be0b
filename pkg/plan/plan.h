/* SPDX-License-Identifier: Apache-2.0 */
/* plan: GPU capacity and cost planning behind `gpuscaler plan`. From the
 * request-rate history of a Deployment it forecasts demand over a horizon,
 * replays the policy that will run on that forecast (sim_run, the code of
 * `gpuscaler simulate`) under growth scenarios, and turns the GPUs it holds
 * into GPU-hours, peaks, an always-on baseline, SLA minutes, costs and the
 * reserved commitment that minimises the expected cost.
 *
 * The demand model (model.c) works on z = ln(rate + floor) at a coarse step
 * (1 h by default): a robust linear trend (Theil-Sen over daily means), a
 * day-of-week level when the history has two weeks, and a daily profile
 * (medians per step of the day). The policy is replayed at 1 s on traces
 * built from that forecast times the history's own residuals at the
 * history's resolution (its bursts and noise), with the predictive
 * forecaster seeded from the days before, as `gpuscaler run` seeds it from
 * Prometheus. By default three representative days are replayed and the GPUs
 * they hold per step, relative to the demand, are scaled to every step of every
 * scenario (PLAN_SIM_DAY); PLAN_SIM_HORIZON replays the whole horizon of
 * every scenario instead. docs/planning.md has the method.
 *
 * Pure: no I/O, no clock. Everything is deterministic. Config parsing follows
 * the simulator's: one flat set of keys shared by flags and the YAML file,
 * unknown keys are errors, a failed set leaves the config unchanged.
 * Ownership: plan_run() and plan_total() return results owned by the caller
 * (plan_result_free); inputs are only read during the call. */
#ifndef GPUSCALER_PLAN_H
#define GPUSCALER_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/sim.h"
#include "trace/trace.h"
#include "util/util.h"

/** Most growth scenarios one plan compares. */
#define PLAN_MAX_SCENARIOS 8

/** Whole days of history (midnight to midnight on the trace's clock) each
 *  seasonality needs: the daily profile takes medians over at least 3 days,
 *  the day-of-week levels need every weekday twice. */
#define PLAN_MIN_DAYS_DAILY 3
#define PLAN_MIN_DAYS_WEEKLY 14

/** The longest history a plan reads, in days (the simulator's longest scored
 *  window, SIM_MAX_SCORED_S): a trace row further from the first is refused
 *  with its line (`gpuscaler plan` reads traces with this limit), a longer
 *  history by plan_run(). `--since` asks Prometheus for at most 365 days. */
#define PLAN_MAX_HISTORY_DAYS 400

/** The horizon may be at most this many times the history's span: the trend
 *  is not extrapolated further than the span it was fitted on. */
#define PLAN_MAX_HORIZON_RATIO 1.0

enum plan_season {
    PLAN_SEASON_AUTO,   /**< weekly with 14 whole days of history, else daily */
    PLAN_SEASON_DAILY,  /**< daily profile only */
    PLAN_SEASON_WEEKLY, /**< daily profile plus a level per day of the week */
};

enum plan_trend {
    PLAN_TREND_DAMPED,  /**< the fitted slope, damped by PLAN_TREND_DAMPING per day ahead */
    PLAN_TREND_LINEAR,  /**< the fitted slope extrapolated as it is */
    PLAN_TREND_NONE,    /**< the level at the end of the history, no trend */
};

/** Per day ahead, the damped trend keeps this share of the previous day's
 *  growth: after tau days the trend has moved the log level by
 *  slope x (phi + phi^2 + ... + phi^tau), at most slope x phi / (1 - phi). */
#define PLAN_TREND_DAMPING 0.9

/** A damped trend is shrunk by its significance first: the fitted slope b
 *  with standard error se becomes b (1 - (k se / b)^2), or 0 when that is
 *  negative, with k = PLAN_TREND_SHRINK. */
#define PLAN_TREND_SHRINK 2.0

/** Representative days a day-mode replay scores, each with the residuals of
 *  another day of the history (the most typical ones). */
#define PLAN_REP_DAYS 3

enum plan_sim_mode {
    PLAN_SIM_DAY,       /**< replay PLAN_REP_DAYS representative days, scaled to every step */
    PLAN_SIM_HORIZON,   /**< replay the whole horizon of every scenario */
};

/** One growth scenario: demand multiplied by a factor that rises linearly
 *  from 1 at the horizon's start to `growth` at its end. */
struct plan_scenario {
    double growth;
    double weight;      /**< probability; the weights of a plan sum to 1 */
};

/** Plan-wide settings (the keys of plan_config_set). */
struct plan_config {
    int64_t horizon_ms;         /**< how far ahead, default 30 d */
    int64_t step_ms;            /**< model step, default 1 h; 1 min to 1 h, divides 1 h */
    enum plan_season season;
    enum plan_trend trend;      /**< default damped */
    size_t nscenarios;
    struct plan_scenario scenarios[PLAN_MAX_SCENARIOS]; /**< default x1.0, x1.5, x2.0 */
    double price_on_demand;     /**< per GPU-hour, default 1 (costs in on-demand GPU-hours) */
    double price_reserved;      /**< per GPU-hour when reserved_discount < 0 */
    double reserved_discount;   /**< share off on-demand (0.4), or < 0 when a price is given */
    double price_spot;          /**< per GPU-hour when spot_discount < 0; 0 = no spot */
    double spot_discount;       /**< share off on-demand, or < 0 */
    double spot_interruption;   /**< share of spot GPU-hours interrupted and re-run on demand */
    double margin;              /**< safety margin over the peak, default 0.2 */
    double baseline_share;      /**< baseline = GPUs held in at least this share of hours, 0.95 */
    double rule_share;          /**< the rule of thumb reserves this share of the baseline, 0.7 */
    enum plan_sim_mode sim;
};

/** Defaults as documented above. */
void plan_config_init(struct plan_config *cfg);
/** The demo's: a 7-day horizon (the bundled trace has 7 days). */
void plan_config_demo(struct plan_config *cfg);

/**
 * Set one plan-wide key from its string value: horizon, step, season,
 * growth ("1.0,1.5,2.0" or with weights "1.0:0.6,1.5:0.3,2.0:0.1"),
 * price-on-demand, price-reserved and price-spot (a price per GPU-hour, or a
 * discount off on-demand written "40%"), spot-interruption, margin,
 * baseline, reserve-share (shares as "20%" or 0.2), sim ("day" or
 * "horizon"). Returns 0; -ENOENT for an unknown key; -EINVAL for a bad value
 * with a one-line message naming the key and the accepted range in err. A
 * failed set leaves cfg unchanged.
 */
int plan_config_set(struct plan_config *cfg, const char *key, const char *value, char *err,
                    size_t errlen);

/** Cross-field checks (prices: reserved and spot below on-demand). 0 or -EINVAL. */
int plan_config_validate(const struct plan_config *cfg, char *err, size_t errlen);

/** Plan-wide keys, for usage text. */
size_t plan_config_key_count(void);
const char *plan_config_key_name(size_t i);
const char *plan_config_key_help(size_t i);

/** The resolved prices of a validated config. */
struct plan_prices {
    double on_demand;           /**< per GPU-hour */
    double reserved;            /**< per GPU-hour, paid for every hour of the horizon */
    double spot;                /**< per GPU-hour, 0 = none */
    double spot_interruption;
    double flexible;            /**< what a GPU-hour above the commitment costs: on-demand,
                                     or spot when cheaper once interruptions re-run on demand */
};
void plan_prices_resolve(const struct plan_config *cfg, struct plan_prices *out);

/* ---- one Deployment ------------------------------------------------------ */

/** What is planned: the policy and serving keys, the policy, where the
 *  history comes from. */
struct plan_workload {
    char *name;                 /**< owned; "" for a single Deployment */
    char *trace;                /**< path of the history (trace CSV), or NULL */
    char *query;                /**< PromQL of the request rate (req/s), or NULL */
    char *prometheus;           /**< base URL, or NULL */
    int64_t since_ms;           /**< history asked of Prometheus, default 30 d */
    int64_t query_step_ms;      /**< its resolution, default 1 min */
    /** How to reach Prometheus, as the daemon's prometheus.* settings (owned or
     *  NULL): the `prometheus-ca-file`, `-cert-file`, `-key-file`, `-token-file`,
     *  `-username` and `-password-file` keys. The client checks them
     *  (promql_config_check) before the query. */
    char *prom_ca_file, *prom_cert_file, *prom_key_file, *prom_token_file, *prom_username,
        *prom_password_file;
    /** `prometheus-header` "Name: value", owned, as name and value: each set
     *  adds one, or replaces the one of the same name (case-insensitive); at
     *  most 32. */
    char *prom_header_names[32], *prom_header_values[32];
    size_t n_prom_headers;
    enum sim_policy policy;     /**< the policy that will run: predictive (default),
                                     reactive or hpa */
    struct sim_config sim;      /**< policy, serving model, `scale` of the history */
};

/** Defaults: sim_config_init(), predictive. */
void plan_workload_init(struct plan_workload *w);
/** The bundled demo's serving parameters (sim_config_demo without its window). */
void plan_workload_demo(struct plan_workload *w);
/** Free the strings; w is left initialised-empty (safe to clear twice). */
void plan_workload_clear(struct plan_workload *w);

/**
 * Set one key of a Deployment: name, trace, query, prometheus, since,
 * query-step, the prometheus-* keys above, policy (one of predictive,
 * reactive, hpa), or any simulator or
 * policy key of sim_config_set() except those of the replay window (start,
 * duration, warmup, initial-replicas), which the plan sets itself. Same
 * returns as plan_config_set().
 */
int plan_workload_set(struct plan_workload *w, const char *key, const char *value, char *err,
                      size_t errlen);

/** sim_config_validate() of the workload. 0 or -EINVAL with the message. */
int plan_workload_validate(const struct plan_workload *w, char *err, size_t errlen);

/** True for a key plan_workload_set() knows. */
bool plan_workload_key(const char *key);

/* ---- the plan file ------------------------------------------------------- */

/** One key: value of the file, with its line. */
struct plan_setting {
    char *key;
    char *value;                /**< a sequence of scalars is joined with commas */
    int line;
};

/** The settings of one scope, in file order. */
struct plan_scope {
    char *name;                 /**< the Deployment's name (deployments only) */
    int line;
    size_t n;
    struct plan_setting *v;
};

/**
 * A parsed plan file. Top-level keys are plan-wide keys or Deployment keys;
 * without `deployments` they describe the one Deployment planned, with it
 * they are defaults for every entry of the list. Every value has been
 * checked by its setter, so applying them cannot fail.
 */
struct plan_file {
    struct plan_scope top;
    bool has_deployments;
    size_t ndeployments;
    struct plan_scope *deployments;
};

struct plan_error {
    int line;                   /**< 1-based, 0 when not about a line */
    char msg[240];
};

/**
 * Parse a plan file (YAML, through pkg/conf). Errors (-EINVAL, line and
 * message in err): not a map; an unknown key; a bad value; a plan-wide key
 * inside a deployment; a deployment that is not a map, has no name, repeats
 * a name, or has neither a trace nor a query (its own or the top level's);
 * `deployments` empty or with more than PLAN_MAX_WORKLOADS entries. Pure;
 * never logs. On error *out is empty. Free with plan_file_clear().
 */
int plan_file_parse(const char *buf, size_t len, struct plan_file *out, struct plan_error *err);
void plan_file_clear(struct plan_file *f);

/** Most Deployments one plan file lists. */
#define PLAN_MAX_WORKLOADS 256

/* ---- the plan ------------------------------------------------------------ */

/** The fitted demand model (log scale: z = ln(rate + floor)). */
struct plan_model {
    enum plan_season season;    /**< daily or weekly (auto resolved) */
    int64_t step_ms;
    size_t steps_per_day;
    double floor;               /**< req/s added before the log: policy_rate_floor() */
    int64_t origin_ms;          /**< t = 0 of the trend: the end of the history */
    double level;               /**< z of the trend at the origin */
    double slope;               /**< z per day carried forward (growth per day = exp(slope) - 1) */
    double slope_fit;           /**< the fitted slope, before shrinking */
    double slope_se;            /**< its standard error */
    enum plan_trend trend;      /**< how the slope is extrapolated past the origin */
    double damping;             /**< phi per day (damped), 1 (linear) or 0 (none) */
    double week[7];             /**< day-of-week offsets (0 when daily), by day index mod 7 */
    double *profile;            /**< steps_per_day offsets of the daily profile, owned */
    double resid_lo, resid_hi;  /**< 10 % and 90 % quantiles of the step residuals */
    double resid_mad;           /**< their median absolute deviation */
    size_t whole_days;          /**< whole days of history used */
    size_t steps_used;          /**< steps with data */
};

/** The result of one scenario. */
struct plan_scenario_result {
    double growth, weight;
    double requests;            /**< forecast requests over the horizon */
    double gpu_hours;           /**< GPUs held x time */
    int64_t peak_gpus;          /**< most GPUs held at once (whole replicas) */
    int64_t margin_gpus;        /**< peak x (1 + margin), rounded up to whole replicas */
    int64_t baseline_gpus;      /**< GPUs held in at least baseline_share of the hours */
    double sla_minutes;         /**< expected minutes whose p99 is above the SLA */
    double *demand;             /**< per step: forecast demand (req/s, smooth), owned */
    double *gpus;               /**< per step: mean GPUs held, owned */
    double *gpus_max;           /**< per step: most GPUs held, owned */
    double *step_requests;      /**< per step: forecast requests, owned */
    double *step_sla_minutes;   /**< per step: expected minutes over the SLA, owned */
};

/** A reserved commitment and what it costs and risks in each scenario. */
struct plan_choice {
    char name[40];
    int64_t reserved;           /**< GPUs reserved for the whole horizon */
    double expected_cost;       /**< weighted over the scenarios */
    double cost[PLAN_MAX_SCENARIOS];
    double stranded_gpu_hours[PLAN_MAX_SCENARIOS]; /**< reserved but not used */
    double flexible_gpu_hours[PLAN_MAX_SCENARIOS]; /**< used above the commitment */
};

enum { PLAN_CHOICE_OPTIMAL, PLAN_CHOICE_RULE, PLAN_CHOICE_NONE, PLAN_NCHOICES };

/** The replay behind the plan: what the policy did on the forecast. */
struct plan_replay {
    enum sim_policy policy;
    enum plan_sim_mode mode;
    double simulated_s;         /**< scored seconds replayed at 1 s (all scenarios) */
    double seeded_s;            /**< seconds of forecaster seeding (predictive) */
    double gpus_per_need;       /**< median GPUs held / GPUs the demand needs at the target */
    int64_t residual_days[PLAN_REP_DAYS]; /**< day mode: the history's days whose residuals
                                               were replayed in the scored days */
};

struct plan_result {
    char *name;                 /**< owned; the Deployment, "total" for plan_total */
    struct plan_model model;    /**< zeroed in a total */
    int64_t hist_t0_ms;         /**< the history: first bucket */
    int64_t hist_t1_ms;         /**<   end of the last */
    int64_t hist_dt_ms;
    double hist_requests;
    size_t nhist;               /**< the history per step (req/s, NAN without data) */
    double *hist_rate;          /**< owned; starts at floor(hist_t0 / step) * step */
    int64_t hist_step0_ms;
    int64_t t_begin_ms;         /**< the horizon: first step */
    int64_t step_ms;
    size_t nsteps;
    double *band_lo, *band_mid, *band_hi; /**< forecast (x1.0) per step, 10-90 %, owned */
    double gpus_per_replica;
    int32_t min_replicas, max_replicas;
    int64_t sla_ms;
    size_t nscen;
    struct plan_scenario_result scen[PLAN_MAX_SCENARIOS];
    size_t ref;                 /**< the reference scenario: the growth nearest 1 (the lower
                                     on a tie) */
    struct plan_choice choice[PLAN_NCHOICES];
    struct plan_prices prices;
    double margin, baseline_share, rule_share;
    struct plan_replay replay;
    size_t nparts;              /**< plan_total: the Deployments summed */
};

/**
 * Plan one Deployment from its history (buckets of whole seconds; a NAN
 * count is a missing bucket, e.g. a gap in Prometheus data). cfg and w must
 * have passed validation. Returns 0 with *out, or -EINVAL with the reason in
 * err: too little history for the seasonality (the message says how much is
 * needed), a horizon longer than PLAN_MAX_HORIZON_RATIO times the history, a
 * step finer than the history's buckets or not a whole number of them, or a
 * replay that fails.
 */
int plan_run(const struct plan_config *cfg, const struct plan_workload *w,
             const struct trace *history, struct plan_result **out, char *err, size_t errlen);

/**
 * Sum plans hour by hour (by time: the steps at the same clock time) into a
 * total with its own baseline, peaks and commitment, the reserved GPUs being
 * one pool. The total covers the steps every plan covers: histories that end
 * at different times leave it shorter than the horizon. The plans must share
 * the config's step (plan_run of one cfg). Returns 0 and a new result in
 * *out, or -EINVAL with a message when the plans share no step.
 */
int plan_total(const struct plan_config *cfg, struct plan_result *const *parts, size_t n,
               struct plan_result **out, char *err, size_t errlen);

void plan_result_free(struct plan_result *r);

/* ---- costs (pure arithmetic, cost.c) ------------------------------------- */

/**
 * Cost of reserving `reserved` GPUs over n steps of step_h hours with the GPU
 * curve gpus[] (mean GPUs held per step): reserved x hours x reserved price
 * plus the GPU-hours above the commitment at the flexible price. *stranded
 * and *flexible (may be NULL) get the reserved GPU-hours left unused and the
 * GPU-hours above the commitment.
 */
double plan_cost(const struct plan_prices *p, const double *gpus, size_t n, double step_h,
                 int64_t reserved, double *stranded, double *flexible);

/**
 * The integer commitment that minimises the expected cost over scenarios
 * (curves[s] with weight weights[s], n steps each), exactly: the expected
 * cost is convex and piecewise linear in the commitment, and every integer
 * from 0 to the highest GPU count is evaluated in one sweep over the sorted
 * values. Ties go to the smaller commitment. *expected (may be NULL) gets
 * its cost.
 */
int64_t plan_commit_optimal(const struct plan_prices *p, const double *const *curves,
                            const double *weights, size_t nscen, size_t n, double step_h,
                            double *expected);

/** GPUs held in at least `share` of the hours of the curve (floor of the
 *  (1 - share) quantile of its hourly means; steps are grouped by hour). */
int64_t plan_baseline(const double *gpus, size_t n, int64_t step_ms, double share);

/** Fill a choice for `reserved` GPUs over the result's scenarios. */
void plan_choice_eval(const struct plan_result *r, const char *name, int64_t reserved,
                      struct plan_choice *out);

/* ---- backtest ------------------------------------------------------------ */

/** Where a backtest splits the history. */
struct plan_window {
    size_t train_buckets;       /**< the plan sees buckets [0, train_buckets) */
    int64_t test_begin_ms;      /**< the held-out horizon starts here (a step boundary) */
    int64_t test_offset_ms;     /**<   ... this far into the trace */
    int64_t test_ms;            /**< and lasts the horizon */
};

/**
 * The split for holding out the last `horizon` of the history: the held-out
 * part starts at the latest step boundary that leaves a whole horizon before
 * the end, the plan sees every bucket that starts before it. -EINVAL with
 * the reason when what is left is shorter than the horizon or the daily
 * seasonality needs (the message says how much history the backtest needs).
 */
int plan_backtest_window(const struct trace *history, int64_t horizon_ms, int64_t step_ms,
                         struct plan_window *out, char *err, size_t errlen);

struct plan_backtest {
    struct plan_window win;
    double planned_gpu_hours;   /**< the reference scenario's */
    double actual_gpu_hours;    /**< the policy replayed on the held-out traffic */
    double gpu_hours_error;     /**< planned / actual - 1 */
    double planned_requests, actual_requests;
    int64_t planned_peak, actual_peak;
    int64_t planned_baseline, actual_baseline;
    double planned_sla_minutes, actual_sla_minutes;
    double step_mape;           /**< mean |planned - actual| / actual of the GPUs per step */
    int64_t reserved;           /**< the plan's cost-optimal commitment */
    double cost_actual;         /**< what it cost on the actual GPU curve */
    int64_t reserved_hindsight; /**< the best commitment knowing the actual curve */
    double cost_hindsight;
    size_t missing_buckets;     /**< held-out buckets without data, replayed as 0 */
};

/**
 * Plan from the history minus its last horizon, replay the policy on the
 * held-out part (as many days of warm-up before it as the plan seeds its
 * forecaster with, as much as exists), and compare. *plan gets the plan made from the shorter history
 * (owned by the caller). Same errors as plan_backtest_window and plan_run.
 */
int plan_backtest(const struct plan_config *cfg, const struct plan_workload *w,
                  const struct trace *history, struct plan_backtest *out,
                  struct plan_result **plan, char *err, size_t errlen);

/* ---- reports (append to b; deterministic) -------------------------------- */

struct plan_report_info {
    const char *source;         /**< the history's path or description */
};

/** The person's table of one plan (or a total). */
void plan_report_table(struct util_buf *b, const struct plan_config *cfg,
                       const struct plan_workload *w, const struct plan_report_info *info,
                       const struct plan_result *r);
/** The backtest's lines. */
void plan_report_backtest(struct util_buf *b, const struct plan_backtest *bt,
                          const struct plan_result *r);
/**
 * JSON: {"config": ..., "plans": [...], "total": ... or null, "backtests":
 * [...] or absent}. results[i] belong to workloads[i]; total may be NULL;
 * backtests may be NULL (else one per plan).
 */
void plan_report_json(struct util_buf *b, const struct plan_config *cfg,
                      const struct plan_workload *const *workloads,
                      const struct plan_report_info *infos, struct plan_result *const *results,
                      size_t n, const struct plan_result *total,
                      const struct plan_backtest *backtests);
/** A standalone SVG: the history and forecast band, then the planned GPUs of
 *  every scenario with the cost-optimal commitment's reserved and flexible
 *  areas (one pair of panels per plan given, the total first when given). */
void plan_report_svg(struct util_buf *b, const struct plan_config *cfg,
                     struct plan_result *const *results, size_t n,
                     const struct plan_result *total);

#endif

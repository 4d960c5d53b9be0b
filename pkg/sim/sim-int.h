/* SPDX-License-Identifier: Apache-2.0 */
/* sim internals shared by the simulator's files and its unit tests: the
 * serving model (serving.c) and the HPA model (hpa.c). No other module
 * includes this file.
 *
 * Both models are plain functions of their inputs plus a small state struct,
 * so the tests can drive them second by second with literal numbers. */
#ifndef GPUSCALER_SIM_INT_H
#define GPUSCALER_SIM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim.h"

/** Latencies are capped here (a request nobody serves waits "forever"). */
#define SIM_LATENCY_MAX_S 3600.0
/** Highest utilisation the stationary queueing term is evaluated at: past it
 *  the load is overload, which the fluid backlog carries (a burst costs the
 *  time its backlog takes to drain, not an M/M/c wait near rho = 1, which
 *  would read as many minutes for any saturated second). */
#define SIM_RHO_MAX 0.98
/** Points of the Erlang C table over [0, SIM_RHO_MAX]. */
#define SIM_ERLANG_GRID 2048
/** Time constant (s) of the smoothed arrival rate the queueing term uses. */
#define SIM_RATE_TAU_S 10.0

/* ---- serving model ----------------------------------------------------- */

/** Constants of the serving model. */
struct sim_model {
    double gpus;         /**< G, GPUs per replica */
    double cap_gpu;      /**< C, requests/s one GPU sustains */
    double service_s;    /**< base latency of one request */
    int servers;         /**< c, concurrent requests per replica = max(1, round(G x slots)) */
    double *erlang;      /**< Erlang C(c, rho c) on SIM_ERLANG_GRID + 1 points, owned */
};

/**
 * Build the model (and its Erlang C table). slots_per_gpu <= 0 means
 * cap_gpu x service time (Little's law). Returns 0 or -EINVAL for
 * non-positive or non-finite constants, or more than 100000 servers.
 */
int sim_model_init(struct sim_model *m, double gpus, double cap_gpu, double service_s,
                   double slots_per_gpu);
void sim_model_free(struct sim_model *m);

/** Exact Erlang C: probability that an arrival waits in M/M/c with offered
 *  load a = lambda / mu Erlangs (a < c), by the Erlang B recursion. */
double sim_erlang_c(int c, double a);

/** Erlang C at utilisation rho (clamped to [0, SIM_RHO_MAX]) from the table. */
double sim_model_wait_prob(const struct sim_model *m, double rho);

/** Queue state of one policy's deployment, carried from second to second. */
struct sim_queue {
    double backlog;      /**< requests waiting beyond what capacity served */
    double rate;         /**< smoothed arrival rate (req/s) */
    bool primed;         /**< rate holds a value */
};

/**
 * Latency of the requests that arrived in one second: L = base + W, with
 * P(W > t) = pw * exp(-theta t). n is their number (the mixture weight).
 */
struct sim_second {
    double n;
    double base_s;       /**< service time + time to drain the backlog ahead */
    double pw;           /**< probability of waiting for a slot */
    double theta;        /**< decay rate of that wait (1/s) */
};

/**
 * Serve one second: arrivals requests arrive at a deployment with `ready`
 * ready replicas. Updates q (backlog, smoothed rate) and describes the
 * second's latency in *out. ready 0 means nobody serves: the requests wait
 * at SIM_LATENCY_MAX_S.
 */
void sim_serve_second(const struct sim_model *m, struct sim_queue *q, int32_t ready,
                      double arrivals, struct sim_second *out);

/** P(L > x) for one second's requests. */
double sim_second_frac_over(const struct sim_second *s, double x);

/**
 * The q-quantile (0 < q < 1) of the latency over several seconds' requests
 * (a mixture weighted by n): the smallest x with P(L > x) <= 1 - q. Returns
 * 0 when no request arrived.
 */
double sim_latency_quantile(const struct sim_second *s, size_t n, double q);

/* ---- oracle ------------------------------------------------------------ */

/** How far the oracle searches for what an over-large peak needs: a
 *  need at it is "more than" it (reports say so). */
#define SIM_ORACLE_MAX_NEED 10000000

/**
 * The oracle's schedule for n scored seconds with arrivals arr[0..n): the
 * desired replica count per second (owned by the caller, xfree), built as
 * oracle.c describes with cold start cold_start_s and the p99 SLA sla_s,
 * clamped to [lo, hi]. *peak_need gets the highest per-second need within
 * the bounds, *need_unbounded the highest without the upper bound (larger
 * only when max-replicas cannot carry the trace).
 */
int32_t *sim_oracle_plan(const struct sim_model *m, const double *arr, size_t n,
                         int64_t cold_start_s, double sla_s, int32_t lo, int32_t hi,
                         int32_t *peak_need, int32_t *need_unbounded);

/* ---- HPA model ---------------------------------------------------------- */

/**
 * replica_calculator.go calcPlainMetricReplicas for a Pods metric with an
 * AverageValue target: values are the metric of the pods that have one
 * (ready, Running), nmissing the Running pods without a metric, nunready the
 * Pending ones. Returns the proposed count (current when within tolerance or
 * when the missing pods would flip the direction), or -ENODATA when no pod
 * has a metric (the HPA then does not scale).
 */
int32_t sim_hpa_calc(double tolerance, int32_t current, double target, const double *values,
                     size_t nvalues, int32_t nmissing, int32_t nunready);

/** The HPA controller's memory for one target: recommendations and scale
 *  events, as in horizontal.go. */
struct sim_hpa;

struct sim_hpa *sim_hpa_new(const struct sim_hpa_config *cfg, int32_t min_replicas,
                            int32_t max_replicas);
void sim_hpa_free(struct sim_hpa *h);

/**
 * One sync of horizontal.go's reconcileAutoscaler at now_ms: bounds first,
 * else sim_hpa_calc, then normalizeDesiredReplicasWithBehaviors
 * (stabilization, then the scale-up/-down rate policies) and the scale event
 * bookkeeping. `calc` is sim_hpa_calc's answer (negative: no metrics, hold).
 * Returns the new desired count; *reason (if not NULL) gets a short
 * CamelCase reason: for a change "ScaleUp"/"ScaleDown", or the limit that cut
 * it ("ScaleUpLimit", "ScaleDownLimit", "TooManyReplicas", "TooFewReplicas",
 * "AboveMaxReplicas", "BelowMinReplicas"); without a change the HPA
 * condition reason ("DesiredWithinRange", "ScaleDownStabilized",
 * "ScaleUpStabilized", "FailedGetPodsMetric").
 */
int32_t sim_hpa_sync(struct sim_hpa *h, int64_t now_ms, int32_t current, int32_t calc,
                     const char **reason);

/* ---- report.c: shared by the reports --------------------------------------- */

/** Decimals to show GPU-hours with: a tenth, or three significant digits
 *  under 0.05 (a run of minutes held 0.03 GPU-hours, which read as 0.0). */
int sim_hour_digits(double gpu_hours);

/* ---- clock.c: time labels of the reports ---------------------------------- */

/** Times from this one on (2000-01-01T00:00:00Z, in seconds) are UNIX time. */
#define SIM_CLOCK_ABSOLUTE_FROM_S 946684800.0

/** True when a report whose time axis starts at t0_s shows calendar dates:
 *  the trace's clock is UNIX time (as `run --record` writes), not relative. */
bool sim_clock_absolute(double t0_s);

/** A time: "2023-11-14 22:13 UTC" (absolute) or "day 2 06:30" (relative,
 *  t = 0 taken as midnight). */
void sim_clock_time(double t_s, bool absolute, char *out, size_t len);

/** The day of a time, for the axis at midnight: "2023-11-14" or "day 2". */
void sim_clock_day(double t_s, bool absolute, char *out, size_t len);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* plan internals shared by the module's files and its unit tests: the demand
 * model's functions (model.c), the replay (replay.c) and the step
 * arithmetic. No other module includes this file. */
#ifndef GPUSCALER_PLAN_INT_H
#define GPUSCALER_PLAN_INT_H

#include <math.h>

#include "plan.h"

#define PLAN_DAY_MS (86400LL * 1000)

/** Whole days a predictive replay seeds its forecaster with: the history
 *  every stage of it uses (forecast_history_ms: 7 days and 30 minutes for a
 *  daily season, the recent seasons' plan's, and two seasons for one longer
 *  than a day), rounded up, so the plan replays a forecaster that has run
 *  that long, as `gpuscaler run` seeds one from Prometheus. At most
 *  PLAN_SEED_DAYS_MAX (two of the longest seasons, 7 days). */
#define PLAN_SEED_DAYS_MAX 14
int64_t plan_seed_days(const struct sim_config *sc);

/** The history per model step: mean rate over the covered part of each step
 *  (NAN when less than half of it has data), steps aligned to the clock. */
struct plan_steps {
    int64_t t0_ms;              /**< start of step 0 (a multiple of step_ms) */
    int64_t step_ms;
    size_t n;
    double *rate;               /**< owned */
};

/** Aggregate history (scaled by `scale`) into steps. 0 or -EINVAL (message). */
int plan_steps_build(const struct trace *h, double scale, int64_t step_ms, struct plan_steps *out,
                     char *err, size_t errlen);
void plan_steps_free(struct plan_steps *s);

/**
 * Fit the model to the steps. season AUTO picks weekly with
 * PLAN_MIN_DAYS_WEEKLY whole days. floor is the rate floor; origin_ms the
 * end of the history. -EINVAL (message says how many days are needed) when
 * the history has too few whole days for the seasonality.
 */
int plan_model_fit(const struct plan_steps *s, enum plan_season season, enum plan_trend trend,
                   double floor, int64_t origin_ms, struct plan_model *out, char *err,
                   size_t errlen);

/** How far the trend moves the log level tau days from the origin: slope x
 *  tau before it (the fit), the damped, linear or no extrapolation after. */
double plan_model_trend(const struct plan_model *m, double tau);
void plan_model_clear(struct plan_model *m);

/** The model's log rate at time t (ms): trend + day of week + daily profile,
 *  the profile interpolated linearly between step centres (cyclically). */
double plan_model_z(const struct plan_model *m, int64_t t_ms);

/** The daily profile alone at time t (interpolated). */
double plan_model_profile_at(const struct plan_model *m, int64_t t_ms);

/** Rate (req/s, >= 0) for a log value. */
static inline double plan_model_rate(const struct plan_model *m, double z)
{
    double r = exp(z) - m->floor;
    return r > 0 ? r : 0;
}

/** ln(rate + floor). */
static inline double plan_model_log(const struct plan_model *m, double rate)
{
    return log(rate + m->floor);
}

/** The growth multiplier of scenario g at time t of a horizon [t0, t0 + h). */
double plan_growth_at(double growth, int64_t t_ms, int64_t t0_ms, int64_t h_ms);

/** Quantile q of v[0..n) (sorts v in place); NAN for n = 0. */
double plan_quantile(double *v, size_t n, double q);

/** Day of the week index for a day number (day 0 = t 0), 0..6. */
static inline int plan_dow(int64_t day)
{
    int64_t r = day % 7;
    return (int)(r < 0 ? r + 7 : r);
}

/**
 * Replay the policy for the plan (replay.c): fills every scenario's
 * demand/gpus/gpus_max/sla and r->replay. The residual days are chosen from
 * the history h (scaled). 0 or -EINVAL with the sim's message.
 */
int plan_replay_run(const struct plan_config *cfg, const struct plan_workload *w,
                    const struct trace *h, const struct plan_model *m, struct plan_result *r,
                    char *err, size_t errlen);

/** GPUs held per step from a sim result's desired-count changes: mean and
 *  max over each step of [t0, t0 + n * step). At most placeable replicas
 *  hold GPUs (sim_config_placeable: the others stay Pending under a
 *  gpu-limit, as simulate counts them). */
void plan_curve_from_changes(const struct sim_policy_result *pr, double gpus, int32_t placeable,
                             int64_t t0_ms, int64_t step_ms, size_t n, double *mean,
                             double *max);

/** Summaries of a result's scenario curves (gpu_hours, peaks, baseline) and
 *  its three choices; called once the curves are filled. */
void plan_result_finish(const struct plan_config *cfg, struct plan_result *r);

#endif

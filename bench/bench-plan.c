/* SPDX-License-Identifier: Apache-2.0 */
/* bench-plan: CPU cost of `gpuscaler plan` for the target, a 90-day
 * plan at hourly resolution for 10 Deployments: each has 90 days of hourly
 * history (synthetic: daily and weekly cycles, a trend, deterministic
 * noise, a different size and policy per Deployment), the horizon is 90
 * days with the default growth scenarios (x1, x1.5, x2) and the default
 * replay (PLAN_REP_DAYS representative days per Deployment), and the total is
 * planned too. Prints CPU seconds (getrusage, user + system) per Deployment
 * and in total; the target is under 2 s. With `horizon` as the argument it
 * replays the whole horizon of every scenario instead (much slower; the
 * reference the representative day is checked against). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "plan/plan.h"
#include "util/util.h"

#define DEPLOYMENTS 10
#define DAYS 90

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* 90 days of hourly counts ending at a midnight of UNIX time. */
static struct trace *history(int d)
{
    const size_t n = DAYS * 24;
    struct trace *t = xcalloc(1, sizeof(*t));
    t->dt_ms = 3600 * 1000;
    t->t0_ms = (int64_t)(19700 - DAYS) * 86400 * 1000; /* days since 1970 */
    t->n = n;
    t->requests = xmalloc(n * sizeof(double));
    uint64_t x = 88172645463325252ull + (uint64_t)d * 7919;
    double base = 40 + 25 * d, peak_hour = 14 + d % 6;
    for (size_t i = 0; i < n; i++) {
        double day = (double)(i / 24), hour = (double)(i % 24);
        int dow = (int)((i / 24 + 19700 - DAYS + 3) % 7); /* 1970-01-01 was a Thursday */
        double daily = 1 + 0.6 * cos(2 * M_PI * (hour - peak_hour) / 24);
        double weekly = dow >= 5 ? 0.7 : 1.0;
        double trend = exp(0.004 * day);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0;
        t->requests[i] = floor(base * daily * weekly * trend * (0.9 + 0.2 * u) * 3600);
    }
    return t;
}

int main(int argc, char **argv)
{
    struct plan_config cfg;
    plan_config_init(&cfg);
    cfg.horizon_ms = (int64_t)DAYS * 86400 * 1000;
    if (argc > 1 && strcmp(argv[1], "horizon") == 0)
        cfg.sim = PLAN_SIM_HORIZON;
    char err[512];
    if (plan_config_validate(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench-plan: %s\n", err);
        return 2;
    }
    static const enum sim_policy pols[] = {SIM_PREDICTIVE, SIM_PREDICTIVE, SIM_PREDICTIVE,
                                           SIM_REACTIVE, SIM_HPA};
    struct trace *tr[DEPLOYMENTS];
    struct plan_workload w[DEPLOYMENTS];
    struct plan_result *res[DEPLOYMENTS];
    for (int d = 0; d < DEPLOYMENTS; d++) {
        tr[d] = history(d);
        plan_workload_init(&w[d]);
        w[d].policy = pols[d % 5];
        w[d].sim.policy.capacity_rps_per_gpu = 5;
        w[d].sim.policy.gpus_per_replica = 1 + d % 2;
        w[d].sim.policy.service_time_ms = 2000;
        w[d].sim.policy.p99_latency_target_ms = 6000;
        w[d].sim.policy.min_replicas = 2;
        w[d].sim.policy.max_replicas = 1000;
        if (plan_workload_validate(&w[d], err, sizeof(err)) != 0) {
            fprintf(stderr, "bench-plan: %s\n", err);
            return 2;
        }
    }
    printf("bench-plan: %d Deployments, %d days of hourly history each, %d-day horizon, %zu "
           "scenarios, replay: %s\n",
           DEPLOYMENTS, DAYS, DAYS, cfg.nscenarios,
           cfg.sim == PLAN_SIM_DAY ? "representative days" : "the whole horizon");
    double t0 = cpu_seconds(), sim_s = 0, seed_s = 0;
    for (int d = 0; d < DEPLOYMENTS; d++) {
        double a = cpu_seconds();
        if (plan_run(&cfg, &w[d], tr[d], &res[d], err, sizeof(err)) != 0) {
            fprintf(stderr, "bench-plan: %s\n", err);
            return 1;
        }
        sim_s += res[d]->replay.simulated_s;
        seed_s += res[d]->replay.seeded_s;
        printf("  deployment %d (%-10s) %6.3f s CPU  %9.1f GPU-hours x1, reserve %lld GPUs\n", d,
               sim_policy_name(w[d].policy), cpu_seconds() - a, res[d]->scen[0].gpu_hours,
               (long long)res[d]->choice[PLAN_CHOICE_OPTIMAL].reserved);
    }
    struct plan_result *total = NULL;
    if (plan_total(&cfg, res, DEPLOYMENTS, &total, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench-plan: %s\n", err);
        return 1;
    }
    double cpu = cpu_seconds() - t0;
    printf("  total: %.3f s CPU for the 10 plans and their total (target: under 2 s); "
           "%.0f s replayed at 1 s, %.0f s of forecaster seeding; reserve %lld GPUs\n",
           cpu, sim_s, seed_s, (long long)total->choice[PLAN_CHOICE_OPTIMAL].reserved);
    plan_result_free(total);
    for (int d = 0; d < DEPLOYMENTS; d++) {
        plan_result_free(res[d]);
        plan_workload_clear(&w[d]);
        trace_free(tr[d]);
    }
    return cpu < 2.0 ? 0 : 1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* bench-simulate: CPU cost of `gpuscaler simulate` per policy on a 7-day
 * trace at 1 s resolution (604800 steps). Without arguments it generates a
 * synthetic diurnal trace (deterministic noise); with a path it replays that
 * CSV instead (e.g. a shared trace decompressed to /tmp), scaled so its
 * busiest minute needs about 50 replicas. Prints CPU seconds (getrusage,
 * user + system) of each policy's replay. Target: under 1 s per policy. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "sim/sim.h"
#include "trace/trace.h"
#include "util/util.h"

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* 7 days at 1 s: a daily cycle between ~60 and ~420 req/s with an evening
 * peak, a morning bump, per-second noise and a few short bursts. */
static struct trace *synthetic(void)
{
    const size_t n = 7 * 86400;
    struct trace *t = xcalloc(1, sizeof(*t));
    t->t0_ms = 0;
    t->dt_ms = 1000;
    t->n = n;
    t->requests = xmalloc(n * sizeof(double));
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        double day = (double)(i % 86400) / 86400.0;
        double base = 240 - 150 * cos(2 * M_PI * (day - 0.83)) +
                      60 * exp(-pow((day - 0.4) / 0.05, 2));
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0;
        double burst = (i % 20000) < 120 ? 1.6 : 1.0;
        t->requests[i] = floor(base * burst * (0.9 + 0.2 * u));
    }
    return t;
}

int main(int argc, char **argv)
{
    struct trace *tr = NULL;
    struct trace_error terr = {0};
    const char *name = "synthetic diurnal, 7 days at 1 s";
    if (argc > 1) {
        int rc = trace_load_file(argv[1], &tr, &terr);
        if (rc != 0) {
            fprintf(stderr, "bench-simulate: %s:%zu: %s\n", argv[1], terr.line, terr.msg);
            return 2;
        }
        name = argv[1];
    } else {
        tr = synthetic();
    }

    struct sim_config cfg;
    sim_config_init(&cfg);
    sim_config_demo(&cfg);
    cfg.start_ms = 0;
    cfg.warmup_ms = 0;
    cfg.scale = 1;
    cfg.policy.max_replicas = 1000;
    int64_t dt_s = tr->dt_ms / 1000;
    if (argc > 1) {
        /* Busiest minute -> ~50 replicas of 10 req/s at the 0.8 target. */
        double peak = 0, sum = 0;
        size_t per_min = dt_s > 0 && dt_s < 60 ? (size_t)(60 / dt_s) : 1;
        for (size_t i = 0; i < tr->n; i++) {
            sum += tr->requests[i];
            if ((i + 1) % per_min == 0 || i + 1 == tr->n) {
                double rate = sum / (double)(per_min * (size_t)dt_s);
                peak = rate > peak ? rate : peak;
                sum = 0;
            }
        }
        cfg.scale = peak > 0 ? 400.0 / peak : 1;
    }
    if (cfg.duration_ms == 0 && (int64_t)tr->n * dt_s > 7 * 86400)
        cfg.duration_ms = 7 * 86400 * 1000LL;
    char err[256];
    if (sim_config_validate(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench-simulate: %s\n", err);
        return 2;
    }
    double steps = (double)(cfg.duration_ms ? cfg.duration_ms / 1000 : (int64_t)tr->n * dt_s);
    printf("bench-simulate: %s; %.0f simulated seconds, counts x%.4g\n", name, steps, cfg.scale);
    int status = 0;
    for (int p = 0; p < SIM_POLICY_COUNT; p++) {
        cfg.policies = 1u << p;
        struct sim_result *r = NULL;
        double t0 = cpu_seconds();
        if (sim_run(&cfg, tr, NULL, &r, err, sizeof(err)) != 0) {
            fprintf(stderr, "bench-simulate: %s\n", err);
            status = 1;
            break;
        }
        double cpu = cpu_seconds() - t0;
        printf("  %-10s %6.3f s CPU  (%.2f us per simulated second)  %8.1f GPU-hours, %lld "
               "min over SLA\n",
               sim_policy_name((enum sim_policy)p), cpu, cpu / steps * 1e6, r->pol[0].gpu_hours,
               (long long)r->pol[0].sla_intervals);
        sim_result_free(r);
    }
    trace_free(tr);
    return status;
}

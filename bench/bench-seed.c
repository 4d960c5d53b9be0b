/* SPDX-License-Identifier: Apache-2.0 */
/* bench-seed: CPU cost of seeding a Deployment's forecaster from Prometheus
 * at start-up, as `gpuscaler run` does (pkg/controller/observe.c): the
 * history the forecaster uses (forecast_history_ms: 7 days and 30 minutes
 * for the default daily season) plus an hour, one point a minute, observed
 * in chunks of a day as promql_seed hands them over, one loop callback
 * each. Synthetic rate: a daily cycle with deterministic noise and a burst
 * a day. Prints CPU milliseconds per Deployment and the costliest chunk,
 * which is how long one callback holds the event loop. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "forecast/forecast.h"

#define STEP_MS 60000LL
#define CHUNK 1440 /* promql_seed's chunk at 60 s steps */

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 20;
    if (runs < 1) {
        fprintf(stderr, "usage: bench-seed [RUNS]\n");
        return 2;
    }
    struct forecast_config cfg;
    forecast_config_init(&cfg);
    int64_t span = forecast_history_ms(&cfg) + 3600 * 1000LL;
    int64_t n = span / STEP_MS, t0 = 1767571200000LL;
    double total = 0, worst = 0;
    uint64_t x = 88172645463325252ull;
    for (int k = 0; k < runs; k++) {
        struct forecast *f = forecast_new(&cfg);
        if (!f)
            return 1;
        for (int64_t i = 0; i < n; i += CHUNK) {
            double a = cpu_ms();
            for (int64_t j = i; j < i + CHUNK && j < n; j++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                double u = (double)(x >> 11) / 9007199254740992.0;
                double day = (double)(j % 1440) / 1440.0;
                double y = (200 - 120 * cos(2 * M_PI * (day - 0.6))) * (0.9 + 0.2 * u);
                if (j % 1440 >= 800 && j % 1440 < 805)
                    y *= 3;
                forecast_observe(f, t0 + j * STEP_MS, y);
            }
            double d = cpu_ms() - a;
            total += d;
            worst = d > worst ? d : worst;
        }
        forecast_free(f);
    }
    printf("bench-seed: %lld points a Deployment (%.2f days at 60 s), chunks of %d, %d runs\n",
           (long long)n, (double)span / 86400e3, CHUNK, runs);
    printf("  %.1f ms CPU per Deployment, costliest chunk %.1f ms; 1,000 Deployments: %.0f s\n",
           total / runs, worst, total / runs);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* forecast-history: test tool that turns an observation history into the
 * forecaster checkpoint gpuscaler would have written after seeing it, so an
 * end-to-end test can give a Deployment days of history in seconds.
 *
 *   forecast-history CAPACITY_PER_GPU SEASONALITY [FORECAST_QUANTILE] < obs > state
 *
 * stdin: lines "t_unix_ms rate" (times ascending); stdout: the serialised
 * state (forecast_serialize), for the checkpoint ConfigMap's binaryData
 * "forecast". The forecaster is configured exactly as the controller
 * configures a workload with these annotations (controller_forecast_config),
 * so gpuscaler restores it. Exit 2 with a message on bad input. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "controller/controller.h"
#include "forecast/forecast.h"
#include "policy/policy.h"
#include "util/util.h"

int main(int argc, char **argv)
{
    struct policy_config p;
    char err[200];
    policy_config_init(&p);
    if (argc < 3 || argc > 4 ||
        policy_config_set(&p, "capacity-per-gpu", argv[1], err, sizeof(err)) != 0 ||
        policy_config_set(&p, "seasonality", argv[2], err, sizeof(err)) != 0 ||
        (argc == 4 && policy_config_set(&p, "forecast-quantile", argv[3], err, sizeof(err)))) {
        fprintf(stderr, "usage: forecast-history CAPACITY_PER_GPU SEASONALITY [QUANTILE] "
                        "< obs > state\n");
        return 2;
    }
    struct forecast_config fc;
    controller_forecast_config(&p, &fc);
    struct forecast *f = forecast_new(&fc);
    if (!f) {
        fprintf(stderr, "forecast-history: the forecaster rejects this configuration\n");
        return 2;
    }
    int64_t t;
    double v;
    size_t line = 0;
    int rc;
    while ((rc = scanf("%" SCNd64 " %lf", &t, &v)) == 2) {
        line++;
        if (forecast_observe(f, t, v) != 0) {
            fprintf(stderr, "forecast-history: line %zu: observation refused\n", line);
            forecast_free(f);
            return 2;
        }
    }
    if (rc != EOF) {
        fprintf(stderr, "forecast-history: line %zu: not \"t_unix_ms rate\"\n", line + 1);
        forecast_free(f);
        return 2;
    }
    uint8_t *buf;
    size_t len;
    forecast_serialize(f, &buf, &len);
    int out = fwrite(buf, 1, len, stdout) == len ? 0 : 1;
    xfree(buf);
    forecast_free(f);
    return out;
}

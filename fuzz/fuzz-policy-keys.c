/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: policy configuration values (annotation values arrive from any
 * user who can edit a Deployment). Input: lines "key=value"; each is set, the
 * config validated, and when valid one decision is computed with it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keylines.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void set_one(void *ctx, const char *key, const char *value)
{
    struct policy_config *cfg = ctx, before = *cfg;
    char err[256];
    if (policy_config_set(cfg, key, value, err, sizeof(err)) != 0 &&
        memcmp(&before, cfg, sizeof(*cfg)) != 0)
        abort(); /* a failed set must leave the config unchanged */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct policy_config cfg;
    policy_config_init(&cfg);
    if (fuzz_keylines(data, size, set_one, &cfg) != 0)
        return 0;
    char err[256];
    if (policy_config_validate(&cfg, err, sizeof(err)) == 0) {
        struct policy_state st;
        policy_state_init(&st);
        struct policy_input in = {.now_ms = 0, .current_replicas = 3, .ready_replicas = 2,
                                  .gpus_per_replica = 2, .metrics_valid = true,
                                  .metrics_time_ms = 0, .request_rate = 1000,
                                  .p99_latency_ms = 50, .queue_depth = 3, .have_forecast = true,
                                  .forecast_rate = 5000};
        struct policy_decision d;
        for (int t = 0; t < 4; t++) {
            in.now_ms = in.metrics_time_ms = (int64_t)t * 3600 * 1000;
            policy_decide(&cfg, &st, &in, &d);
            if (d.desired < cfg.min_replicas || d.desired > cfg.max_replicas)
                abort();
            in.current_replicas = d.desired;
        }
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: `gpuscaler simulate`'s keys (flags and its YAML file: any value
 * a user types, the simulator's own keys and, through them, the policy's).
 * Input: lines "key=value"; each is set (a failed set must leave the config
 * as it was), then the config is validated. quantile-sweep must hold at most
 * SIM_MAX_SWEEP values, ascending and distinct, each a valid
 * forecast-quantile. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keylines.h"
#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void set_one(void *ctx, const char *key, const char *value)
{
    struct sim_config *cfg = ctx, before = *cfg;
    char err[512];
    int rc = sim_config_set(cfg, key, value, err, sizeof(err));
    if (rc != 0 && memcmp(&before, cfg, sizeof(*cfg)) != 0)
        abort(); /* a failed set must leave the config unchanged */
    if (rc != 0 && !memchr(err, '\0', sizeof(err)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sim_config cfg;
    sim_config_init(&cfg);
    if (fuzz_keylines(data, size, set_one, &cfg) != 0)
        return 0;
    if (cfg.nsweep > SIM_MAX_SWEEP)
        abort();
    for (size_t i = 0; i < cfg.nsweep; i++) {
        double q = cfg.quantile_sweep[i];
        if (!(q >= 0.5 && q < 1) || (i > 0 && !(q > cfg.quantile_sweep[i - 1])))
            abort();
    }
    char err[512];
    (void)sim_config_validate(&cfg, err, sizeof(err));
    return 0;
}

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

#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    struct sim_config cfg;
    sim_config_init(&cfg);
    char err[512];
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        struct sim_config before = cfg;
        int rc = sim_config_set(&cfg, line, eq + 1, err, sizeof(err));
        if (rc != 0 && memcmp(&before, &cfg, sizeof(cfg)) != 0)
            abort(); /* a failed set must leave the config unchanged */
        if (rc != 0 && !memchr(err, '\0', sizeof(err)))
            abort();
    }
    if (cfg.nsweep > SIM_MAX_SWEEP)
        abort();
    for (size_t i = 0; i < cfg.nsweep; i++) {
        double q = cfg.quantile_sweep[i];
        if (!(q >= 0.5 && q < 1) || (i > 0 && !(q > cfg.quantile_sweep[i - 1])))
            abort();
    }
    (void)sim_config_validate(&cfg, err, sizeof(err));
    free(buf);
    return 0;
}

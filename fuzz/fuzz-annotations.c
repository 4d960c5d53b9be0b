/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: a Deployment's annotations (anyone who can edit a Deployment
 * writes them). Input: lines "key=value"; keys get the gpuscaler.io/ prefix
 * unless they already carry one. They are parsed over default config; a
 * success must give a config that passes validation, and the status JSON of a
 * decision made with it must be one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    char *buf = xstrndup((const char *)data, size);
    const char *keys[64], *vals[64];
    char *owned[64];
    size_t n = 0;
    char *line = buf;
    while (line && n < 64) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char *eq = strchr(line, '=');
        if (eq) {
            *eq = '\0';
            owned[n] = strchr(line, '/') ? xstrdup(line) : xasprintf("gpuscaler.io/%s", line);
            keys[n] = owned[n];
            vals[n] = eq + 1;
            n++;
        }
        line = nl ? nl + 1 : NULL;
    }
    struct ctl_config cfg;
    ctl_config_init(&cfg);
    struct ctl_workload_config w;
    char bad[160], err[256];
    if (ctl_workload_parse(&cfg, keys, vals, n, &w, bad, sizeof(bad), err, sizeof(err)) == 0) {
        if (policy_config_validate(&w.policy, err, sizeof(err)) != 0)
            abort();
        struct policy_state st;
        policy_state_init(&st);
        struct policy_input in = {.now_ms = 1700000000000LL, .current_replicas = 2,
                                  .ready_replicas = 2, .gpus_per_replica = 1,
                                  .metrics_valid = true, .metrics_time_ms = 1700000000000LL,
                                  .request_rate = 50, .p99_latency_ms = -1, .queue_depth = -1};
        struct policy_decision d;
        policy_decide(&w.policy, &st, &in, &d);
        char *j = ctl_status_json(in.now_ms, &d, NULL);
        if (strchr(j, '\n'))
            abort();
        xfree(j);
    } else if (!bad[0] || !err[0]) {
        abort(); /* a rejection always names the key and the reason */
    }
    ctl_config_free(&cfg);
    for (size_t i = 0; i < n; i++)
        xfree(owned[i]);
    xfree(buf);
    return 0;
}

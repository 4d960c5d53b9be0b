/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: a Deployment's annotations (anyone who can edit a Deployment
 * writes them). Input: lines "key=value"; keys get the gpuscaler.io/ prefix
 * unless they already carry one. They are parsed over default config; a
 * success must give a config that passes validation (with demand-unit
 * tokens, a generation-token metric to scrape; with requests, none), a
 * metrics port that is a number or a valid port name, its own capacity-start
 * only beside capacity-per-gpu auto, and the
 * status JSON of a decision made with it must be one line, and the default
 * PromQL built from its metric names must expand. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller.h"
#include "promql/promql.h"
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
        /* a port is a number or a name Kubernetes allows (IANA_SVC_NAME), never both */
        size_t pn = strlen(w.scrape.port_name);
        if (w.scrape.port < 0 || w.scrape.port > 65535 || (pn > 0 && w.scrape.port != 0) ||
            pn > 15 || (pn > 0 && strspn(w.scrape.port_name,
                                         "abcdefghijklmnopqrstuvwxyz0123456789-") != pn) ||
            (pn > 0 && (w.scrape.port_name[0] == '-' || w.scrape.port_name[pn - 1] == '-' ||
                        strstr(w.scrape.port_name, "--") ||
                        !strpbrk(w.scrape.port_name, "abcdefghijklmnopqrstuvwxyz"))))
            abort();
        bool tokens = w.policy.demand_unit == POLICY_UNIT_TOKENS;
        if (tokens != (w.scrape.generation_token_metric[0] != '\0'))
            abort();
        /* a Deployment's own capacity-start is accepted only where it
         * applies: beside capacity-per-gpu auto (a number ignored it) */
        bool own_start = false;
        for (size_t i = 0; i < n; i++)
            own_start |= strcmp(keys[i], "gpuscaler.io/capacity-start") == 0;
        if (own_start && w.policy.capacity_start > 0 && !w.policy.capacity_auto)
            abort();
        struct policy_state st;
        policy_state_init(&st);
        struct policy_input in = {.now_ms = 1700000000000LL, .current_replicas = 2,
                                  .ready_replicas = 2, .gpus_per_replica = 1,
                                  .metrics_valid = true, .metrics_time_ms = 1700000000000LL,
                                  .request_rate = 50, .p99_latency_ms = -1, .queue_depth = 3,
                                  .request_size = tokens ? 700 : 1};
        struct policy_decision d;
        policy_decide(&w.policy, &st, &in, &d);
        char *j = ctl_status_json(in.now_ms, &d, NULL, NULL);
        if (strchr(j, '\n'))
            abort();
        xfree(j);
        /* a replica no node can place: never raised past, never lowered for */
        in.current_replicas = 3;
        in.unschedulable_replicas = 1;
        in.now_ms += 1000;
        in.metrics_time_ms = in.now_ms;
        policy_decide(&w.policy, &st, &in, &d);
        if (d.reason != POLICY_CLAMPED && d.desired > 3)
            abort();
        if (d.reason == POLICY_HOLD_GPU_CAPACITY && d.desired != 3)
            abort();
        /* the default PromQL built from accepted metric names always expands */
        void (*const defaults[])(const struct scrape_spec *, char *, size_t) = {
            promql_default_rate, promql_default_p99, promql_default_busy};
        for (size_t i = 0; i < UTIL_ARRAY_LEN(defaults); i++) {
            char tmpl[PROMQL_MAX_QUERY], q[PROMQL_MAX_QUERY];
            defaults[i](&w.scrape, tmpl, sizeof(tmpl));
            if (tmpl[0] &&
                promql_expand(tmpl, "ns", "chat", "2m", q, sizeof(q), err, sizeof(err)) != 0)
                abort();
        }
    } else if (!bad[0] || !err[0]) {
        abort(); /* a rejection always names the key and the reason */
    }
    ctl_config_free(&cfg);
    for (size_t i = 0; i < n; i++)
        xfree(owned[i]);
    xfree(buf);
    return 0;
}

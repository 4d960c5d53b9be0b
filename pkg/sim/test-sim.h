/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers of the simulator's whole-replay tests (test-sim.c, test-sim-edges.c):
 * a config, a step trace and a log of one policy's scale changes. Test code
 * only. */
#ifndef GPUSCALER_TEST_SIM_H
#define GPUSCALER_TEST_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "sim/sim.h"
#include "trace/trace.h"

#define S(x) ((int64_t)((x) * 1000))

struct scale_log {
    enum sim_policy only; /* record this policy's changes only */
    int n;
    int64_t t_ms[64];
    int32_t to[64];
    enum sim_policy pol[64];
    char reason[64][32];
};

static inline void on_scale(enum sim_policy p, int64_t now_ms, int32_t from, int32_t to,
                     const char *reason, void *arg)
{
    (void)from;
    struct scale_log *l = arg;
    if (l->n >= 64 || p != l->only)
        return;
    l->pol[l->n] = p;
    l->t_ms[l->n] = now_ms;
    l->to[l->n] = to;
    snprintf(l->reason[l->n], sizeof(l->reason[0]), "%s", reason);
    l->n++;
}

static inline void base_cfg(struct sim_config *c)
{
    sim_config_init(c);
    c->policy.capacity_rps_per_gpu = 10;
    c->policy.gpus_per_replica = 1;
    c->policy.min_replicas = 1;
    c->policy.max_replicas = 100;
    c->policy.service_time_ms = 1000;
    c->sla_ms = 5000;
}

/* 1 s buckets: `low` req/s, then `high` from step_s on. */
static inline struct trace step_trace(double *buf, size_t n, size_t step_s, double low, double high)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = i < step_s ? low : high;
    return (struct trace){.t0_ms = 0, .dt_ms = 1000, .n = n, .requests = buf};
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Table-driven policy tests (test-pending.c, test-zero.c): one row a tick,
 * run in order on one policy state, each checked against the decision
 * expected. 1 GPU a replica; recent rate, p99 and likely peak unknown. */
#ifndef GPUSCALER_POLICY_TEST_TABLE_H
#define GPUSCALER_POLICY_TEST_TABLE_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "policy/policy.h"

#define S(x) ((int64_t)((x) * 1000))
#define MISSING (-1.0) /* a row's rate: the metrics are invalid */
#define NOFC (-1.0)    /* a row's plan: none */

struct ptick {
    double t_s;
    int cur, ready, unsched; /* unsched: Pending for want of a GPU */
    double rate, queue, plan; /* queue < 0: unknown */
    int desired;
    enum policy_reason reason;
    int want;         /* expected d.want, 0: not checked */
    const char *says; /* a phrase of the explanation, or NULL */
};

/* Run rows in order; the plan, when a row has one, is trusted, and seasonal
 * or not as told. */
static inline void ptable_run(const struct policy_config *cfg, const struct ptick *rows,
                              size_t n, bool seasonal)
{
    struct policy_state st;
    policy_state_init(&st);
    char err[128];
    assert_int_equal(policy_config_validate(cfg, err, sizeof(err)), 0);
    for (size_t i = 0; i < n; i++) {
        const struct ptick *r = &rows[i];
        struct policy_input in = {
            .now_ms = S(r->t_s), .current_replicas = r->cur, .ready_replicas = r->ready,
            .unschedulable_replicas = r->unsched, .gpus_per_replica = 1,
            .metrics_valid = r->rate != MISSING, .metrics_time_ms = S(r->t_s),
            .request_rate = r->rate == MISSING ? 0 : r->rate, .recent_rate = -1,
            .p99_latency_ms = -1, .queue_depth = r->queue, .have_forecast = r->plan != NOFC,
            .forecast_rate = r->plan, .forecast_likely = NAN,
            .forecast_trusted = r->plan != NOFC, .forecast_seasonal = seasonal};
        struct policy_decision d;
        policy_decide(cfg, &st, &in, &d);
        if (d.desired != r->desired || d.reason != r->reason || (r->want && d.want != r->want) ||
            (r->says && !strstr(d.explain, r->says)))
            fail_msg("row %zu (t=%gs): got %d %s want %d, expected %d %s want %d (%s)", i,
                     r->t_s, d.desired, policy_reason_name(d.reason), d.want, r->desired,
                     policy_reason_name(r->reason), r->want, d.explain);
        assert_int_equal(d.unschedulable, r->unsched < r->cur ? r->unsched : r->cur);
        /* never below what is asked for because of unschedulable replicas */
        if (r->unsched > 0 && d.reason == POLICY_HOLD_GPU_CAPACITY)
            assert_int_equal(d.desired, r->cur);
    }
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Policy tests of replicas asked for that are not coming: those no node has a
 * free GPU for (unschedulable) and those placed but not ready for a few cold
 * starts (stalled). 10 req/s per GPU, 1 GPU per replica: 8 req/s per replica
 * at the target, 5 below which the hysteresis rule scales in. */
#include "test-table.h"

#include "util/util.h"

static void base_cfg(struct policy_config *c)
{
    policy_config_init(c);
    c->capacity_rps_per_gpu = 10;
    c->min_replicas = 1;
    c->max_replicas = 20;
}

/* Replicas the scheduler cannot place (no free GPU) are not coming capacity:
 * no rule raises the count past them, a hold says how short what is placed
 * falls, and once they are placed the rules resume. 8 req/s per replica. */
static void test_gpu_capacity(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = false;
    /* t, cur, ready, unschedulable, rate, queue, plan, desired, reason, want */
    const struct ptick sustained[] = {
        {0, 4, 4, 0, 36, -1, NOFC, 4, POLICY_HOLD_ABOVE_WAITING, 0, NULL},
        /* 2 min above: 36 / 8 -> 5 */
        {120, 4, 4, 0, 36, -1, NOFC, 5, POLICY_SCALED_OUT, 5, NULL},
        /* the new pod is Pending, no node has a GPU: the 5 asked for do not
         * cover 36 req/s (4 placed), and that is not "waiting for them" */
        {135, 5, 4, 1, 36, -1, NOFC, 5, POLICY_HOLD_GPU_CAPACITY, 5, NULL},
        /* the load grows: 50 / 8 -> 7, but 2 more pods would only wait too */
        {150, 5, 4, 1, 50, -1, NOFC, 5, POLICY_HOLD_GPU_CAPACITY, 7, NULL},
        /* a queue no replica that is coming drains: it counts, as it will be
         * when new capacity serves (10 req/s more than the 4 placed serve,
         * for the 180 s cold start), drained within the horizon (195 s) at
         * full capacity: (50 + (5850 + 1800) / 195) / 10 -> 9 */
        {165, 5, 4, 1, 50, 5850, NOFC, 5, POLICY_HOLD_GPU_CAPACITY, 9, NULL},
        /* a node arrives, the pod is bound (starting): the rule resumes at once */
        {180, 5, 4, 0, 50, -1, NOFC, 7, POLICY_SCALED_OUT, 7, NULL},
        /* without the unschedulable pod the same tick would wait for it */
        {195, 7, 4, 0, 50, -1, NOFC, 7, POLICY_HOLD_SCALE_OUT_PENDING, 7, NULL},
    };
    ptable_run(&c, sustained, UTIL_ARRAY_LEN(sustained), true);

    /* the boundary: what is placed covers the need -> no GPU hold; one
     * request/s more (need 5 > 4 placed) -> the hold, never a scale-in */
    const struct ptick edge[] = {
        {0, 6, 4, 2, 32, -1, NOFC, 6, POLICY_HOLD_WITHIN_BAND, 0, NULL},
        {15, 6, 4, 2, 33, -1, NOFC, 6, POLICY_HOLD_GPU_CAPACITY, 5, NULL},
        /* all unschedulable: a fresh Deployment on a full cluster; no load yet */
        {30, 6, 0, 6, 0, -1, NOFC, 6, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {45, 6, 0, 6, 9, -1, NOFC, 6, POLICY_HOLD_GPU_CAPACITY, 2, NULL},
        /* more unschedulable than asked for is read as all of them */
        {60, 6, 0, 8, 9, -1, NOFC, 6, POLICY_HOLD_GPU_CAPACITY, 2, NULL},
    };
    ptable_run(&c, edge, UTIL_ARRAY_LEN(edge), true);

    /* pinned at max-replicas with pods pending on GPUs: the GPUs are the
     * binding limit (raising max-replicas would not help) */
    c.max_replicas = 5;
    const struct ptick atmax[] = {
        {0, 5, 3, 2, 48, -1, NOFC, 5, POLICY_HOLD_GPU_CAPACITY, 6, NULL},
        /* placed at last: max-replicas is the limit again */
        {120, 5, 5, 0, 48, -1, NOFC, 5, POLICY_HOLD_AT_MAX, 6, NULL},
    };
    ptable_run(&c, atmax, UTIL_ARRAY_LEN(atmax), true);

    /* with a trusted plan: the plan's scale-out holds too, and unschedulable
     * replicas do not block a scale-in as "still starting" (placed ones do) */
    base_cfg(&c);
    const struct ptick plan[] = {
        {0, 4, 3, 1, 24, -1, 48, 4, POLICY_HOLD_GPU_CAPACITY, 6, NULL},
    };
    ptable_run(&c, plan, UTIL_ARRAY_LEN(plan), true);
    const struct ptick plan_starting[] = {
        {0, 4, 3, 0, 24, -1, 48, 6, POLICY_PREDICTIVE_SCALE_OUT, 6, NULL},
    };
    ptable_run(&c, plan_starting, UTIL_ARRAY_LEN(plan_starting), true);
    const struct ptick in_pending[] = {
        /* 2 of 6 pending on GPUs, the load fits 4: down to 4 (the pending
         * ones go first, as a ReplicaSet removes unscheduled pods first),
         * once a stabilization window of floors is known */
        {0, 6, 4, 2, 24, -1, 20, 6, POLICY_HOLD_BELOW_WAITING, 6, "floors are known for 0s"},
        {120, 6, 4, 2, 24, -1, 20, 4, POLICY_PREDICTIVE_SCALE_IN, 4, NULL},
    };
    ptable_run(&c, in_pending, UTIL_ARRAY_LEN(in_pending), true);
    const struct ptick in_starting[] = {
        {0, 6, 4, 0, 24, -1, 20, 6, POLICY_HOLD_BELOW_WAITING, 4, NULL},
    };
    ptable_run(&c, in_starting, UTIL_ARRAY_LEN(in_starting), true);

    /* the explanation says who is short of what */
    struct policy_state st;
    policy_state_init(&st);
    struct policy_input in = {.now_ms = 0, .current_replicas = 5, .ready_replicas = 3,
                              .unschedulable_replicas = 2, .gpus_per_replica = 1,
                              .metrics_valid = true, .metrics_time_ms = 0, .request_rate = 60,
                              .recent_rate = -1, .p99_latency_ms = -1, .queue_depth = -1};
    c.predictive = false;
    c.scale_out_after_ms = 0;
    struct policy_decision d;
    policy_decide(&c, &st, &in, &d);
    assert_int_equal(d.reason, POLICY_HOLD_GPU_CAPACITY);
    assert_int_equal(d.rule, POLICY_SCALED_OUT);
    assert_int_equal(d.desired, 5);
    assert_int_equal(d.want, 8);
    assert_int_equal(d.need_now, 8);
    assert_string_equal(d.explain, "load needs 8 replicas but 2 of the 5 asked for cannot be "
                                   "scheduled (no node has a free GPU): holding 5, 3 placed");
    assert_string_equal(policy_reason_name(POLICY_HOLD_GPU_CAPACITY), "AtGPUCapacity");
    assert_false(policy_reason_is_action(POLICY_HOLD_GPU_CAPACITY));
    /* a hold on missing metrics still reports the pods waiting for GPUs (the
     * status and gpuscaler_unschedulable_replicas must not read 0 then) */
    in.metrics_valid = false;
    policy_decide(&c, &st, &in, &d);
    assert_int_equal(d.reason, POLICY_METRICS_UNAVAILABLE);
    assert_int_equal(d.desired, 5);
    assert_int_equal(d.unschedulable, 2);
    in.metrics_valid = true;
    /* the bounds still apply: min-replicas is raised even onto a full cluster */
    c.min_replicas = 7;
    policy_decide(&c, &st, &in, &d);
    assert_int_equal(d.reason, POLICY_CLAMPED);
    assert_int_equal(d.desired, 8);
}

/* Stalled replicas (placed, not ready for a few cold starts: a crash loop)
 * are not coming: they do not hold a scale-in back as "still starting", and
 * they do not keep the p99 rule waiting for capacity that never arrives. */
static void test_stalled_replicas(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.scale_in_stabilization_ms = 0; /* one decision a fresh state: no window of floors */
    struct policy_state st;
    struct policy_decision d;
    /* a trusted plan; 6 asked for, 4 ready; the load and the plan fit 4 */
    struct policy_input in = {.current_replicas = 6, .ready_replicas = 4, .gpus_per_replica = 1,
                              .metrics_valid = true, .request_rate = 24, .recent_rate = -1,
                              .p99_latency_ms = -1, .queue_depth = -1, .have_forecast = true,
                              .forecast_rate = 20, .forecast_likely = NAN,
                              .forecast_trusted = true, .forecast_seasonal = true};
    for (int stalled = 0; stalled <= 3; stalled++) {
        policy_state_init(&st);
        in.stalled_replicas = stalled;
        policy_decide(&c, &st, &in, &d);
        assert_int_equal(d.stalled, stalled > 2 ? 2 : stalled); /* at most cur - ready */
        if (stalled < 2) {
            /* one of the two is still on its way: wait for it */
            assert_int_equal(d.desired, 6);
            assert_int_equal(d.reason, POLICY_HOLD_BELOW_WAITING);
            assert_non_null(strstr(d.explain, "still starting"));
        } else {
            /* neither is coming: down to 4 (a ReplicaSet removes the not-ready pods first) */
            assert_int_equal(d.desired, 4);
            assert_int_equal(d.reason, POLICY_PREDICTIVE_SCALE_IN);
        }
    }
    /* stalled and unschedulable together never count more than asked for */
    in.unschedulable_replicas = 5;
    in.stalled_replicas = 5;
    policy_state_init(&st);
    policy_decide(&c, &st, &in, &d);
    assert_int_equal(d.unschedulable, 5);
    assert_int_equal(d.stalled, 0); /* 6 asked for: 5 unschedulable, 4 ready */
    in.unschedulable_replicas = 0;

    /* the p99 rule adds a replica a window while every replica asked for is
     * ready or stalled; one on its way makes it wait */
    c.predictive = false;
    c.p99_latency_target_ms = 2000;
    in = (struct policy_input){.current_replicas = 5, .ready_replicas = 4, .gpus_per_replica = 1,
                               .metrics_valid = true, .request_rate = 28, .recent_rate = -1,
                               .p99_latency_ms = 3500, .queue_depth = -1};
    for (int stalled = 0; stalled <= 1; stalled++) {
        policy_state_init(&st);
        in.stalled_replicas = stalled;
        for (int t = 0; t <= 120; t += 15) {
            in.now_ms = in.metrics_time_ms = S(t);
            policy_decide(&c, &st, &in, &d);
        }
        assert_int_equal(d.desired, stalled ? 6 : 5);
        if (stalled)
            assert_int_equal(d.reason, POLICY_LATENCY_SCALE_OUT);
    }

    /* the sustained rule's "waiting for them" says which are not coming */
    c.p99_latency_target_ms = 0;
    c.scale_out_after_ms = 0;
    in = (struct policy_input){.current_replicas = 5, .ready_replicas = 3, .gpus_per_replica = 1,
                               .stalled_replicas = 2, .metrics_valid = true, .request_rate = 36,
                               .recent_rate = -1, .p99_latency_ms = -1, .queue_depth = -1};
    policy_state_init(&st);
    policy_decide(&c, &st, &in, &d);
    assert_int_equal(d.desired, 5);
    assert_int_equal(d.reason, POLICY_HOLD_SCALE_OUT_PENDING);
    assert_non_null(strstr(d.explain, "2 stalled"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_capacity),
        cmocka_unit_test(test_stalled_replicas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

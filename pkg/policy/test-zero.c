/* SPDX-License-Identifier: Apache-2.0 */
/* Policy tests of zero replicas: with min-replicas 0 the Deployment wakes at
 * the first request and goes to zero only after scale-in-after without one;
 * with min-replicas 1 or more, zero is parked (scaled there by hand, left
 * there, as the HPA does), unless the policy made it (min-replicas raised
 * since: raised to it). 10 req/s per GPU, 1 GPU per replica: 8 req/s per
 * replica at the target, 5 below which the hysteresis rule scales in. */
#include "test-table.h"

#include "util/util.h"

static void base_cfg(struct policy_config *c)
{
    policy_config_init(c);
    c->capacity_rps_per_gpu = 10;
    c->min_replicas = 0;
    c->max_replicas = 20;
    c->scale_in_after_ms = S(300);
    c->predictive = false;
}

static void run_ztable(const struct policy_config *cfg, const struct ptick *rows, size_t n)
{
    ptable_run(cfg, rows, n, true);
}

/* min-replicas 0, the hysteresis rule: down to one replica as usual, to zero
 * only after scale-in-after without a request; back up at the first one,
 * sized for the demand, without waiting for scale-out-after. */
static void test_zero_reactive(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    const struct ptick rows[] = {
        {0, 1, 1, 0, 2, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        /* below for scale-in-after, but a request came at 200 s: not idle long enough */
        {200, 1, 1, 0, 0.1, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {215, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {300, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0,
         "scaling to zero waits for: holding 1"},
        /* an unknown queue is no queue; a known one is not idle (and blocks a scale-in) */
        {400, 1, 1, 0, 0, 2, NOFC, 1, POLICY_HOLD_LATENCY, 0, NULL},
        {415, 1, 1, 0, 0, 0, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {714, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {715, 1, 1, 0, 0, -1, NOFC, 0, POLICY_SCALED_IN, 0, "1 -> 0"},
        {730, 0, 0, 0, 0, -1, NOFC, 0, POLICY_HOLD_AT_MIN, 0, NULL},
        {3600, 0, 0, 0, 0, -1, NOFC, 0, POLICY_HOLD_AT_MIN, 0, NULL},
        /* 30 req/s arrive: at once to what they need (30 / 8 -> 4), not after 2 min */
        {3615, 0, 0, 0, 30, -1, NOFC, 4, POLICY_SCALED_OUT, 0, "arrive at 0 replicas"},
        {3630, 4, 0, 0, 30, -1, NOFC, 4, POLICY_HOLD_ABOVE_WAITING, 0, NULL},
    };
    run_ztable(&c, rows, UTIL_ARRAY_LEN(rows));
    /* woken, its replica waits for a GPU node, the clients give up: it is not
     * scaled to zero before it serves (the scale-to-zero that kills the pod
     * the node was coming for); once Ready and still idle, it is */
    const struct ptick coming[] = {
        {0, 0, 0, 0, 5, -1, NOFC, 1, POLICY_SCALED_OUT, 0, NULL},
        {15, 1, 0, 1, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {1215, 1, 0, 1, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0,
         "1 of 1 replicas wait for a GPU or start: not scaling to zero"},
        {1230, 1, 0, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, "are starting"},
        {1245, 1, 1, 0, 0, -1, NOFC, 0, POLICY_SCALED_IN, 0, "1 -> 0"},
    };
    run_ztable(&c, coming, UTIL_ARRAY_LEN(coming));
    /* 8 replicas loading a model, none ready, nothing arriving (a gateway's
     * rate): no scale-in past scale-in-after, the step to zero waits for
     * them; a queue blocks it first */
    const struct ptick loading[] = {
        {0, 8, 0, 0, 0, -1, NOFC, 8, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {300, 8, 0, 0, 0, -1, NOFC, 8, POLICY_HOLD_BELOW_WAITING, 0, "no replica of 8 is ready"},
        {900, 8, 0, 0, 0, -1, NOFC, 8, POLICY_HOLD_BELOW_WAITING, 0, "no replica of 8 is ready"},
        {915, 8, 0, 0, 0, 9, NOFC, 8, POLICY_HOLD_LATENCY, 0, NULL},
        /* one serves: the others are capacity on its way, the rule acts */
        {930, 8, 1, 0, 0, -1, NOFC, 4, POLICY_SCALED_IN, 0, NULL},
    };
    run_ztable(&c, loading, UTIL_ARRAY_LEN(loading));
    /* a queue alone wakes it too (requests waiting at a router) */
    const struct ptick q[] = {
        {0, 0, 0, 0, 0, 3, NOFC, 1, POLICY_SCALED_OUT, 0, "(queue 3)"},
    };
    run_ztable(&c, q, UTIL_ARRAY_LEN(q));
}

/* With a trusted plan: the plan's floor already keeps a replica while it
 * expects requests; at zero, a plan that expects some wakes the Deployment a
 * cold start ahead of them; the step to zero waits for idleness too. */
static void test_zero_predictive(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = true;
    const struct ptick rows[] = {
        /* the first scale-in waits for a stabilization window of floors */
        {0, 2, 2, 0, 0, -1, 0, 2, POLICY_HOLD_BELOW_WAITING, 0, "floors are known for 0s"},
        {120, 2, 2, 0, 0, -1, 0, 1, POLICY_PREDICTIVE_SCALE_IN, 0, NULL},
        {135, 1, 1, 0, 0, -1, 0, 1, POLICY_HOLD_BELOW_WAITING, 0, "scaling to zero waits"},
        {299, 1, 1, 0, 0, -1, 0, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {300, 1, 1, 0, 0, -1, 0, 0, POLICY_PREDICTIVE_SCALE_IN, 0, "1 -> 0"},
        /* the morning: the plan expects 12 req/s within a cold start, none arrive yet */
        {3600, 0, 0, 0, 0, -1, 12, 2, POLICY_PREDICTIVE_SCALE_OUT, 0, "ahead of load"},
    };
    run_ztable(&c, rows, UTIL_ARRAY_LEN(rows));
    /* a season that expects a little (0.5 req/s: 97 requests within the 3m15s
     * look-ahead) keeps one replica */
    const struct ptick keep[] = {
        {0, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_WITHIN_BAND, 0, NULL},
        {900, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_WITHIN_BAND, 0, NULL},
    };
    run_ztable(&c, keep, UTIL_ARRAY_LEN(keep));
    /* ... not a plan without a season (its residuals outlive the traffic), nor
     * a season that expects under one request within the look-ahead; and
     * neither wakes it */
    const struct ptick go[] = {
        {0, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_WITHIN_BAND, 0, NULL},
        {299, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_WITHIN_BAND, 0, NULL},
        {300, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL}, /* the last 2m needed 1 */
        {420, 1, 1, 0, 0, -1, 0.5, 0, POLICY_PREDICTIVE_SCALE_IN, 0, NULL},
        {435, 0, 0, 0, 0, -1, 0.5, 0, POLICY_HOLD_AT_MIN, 0, NULL},
        {3600, 0, 0, 0, 0, -1, 3, 0, POLICY_HOLD_AT_MIN, 0, NULL},
    };
    ptable_run(&c, go, UTIL_ARRAY_LEN(go), false);
    const struct ptick few[] = {
        {0, 1, 1, 0, 0, -1, 0.004, 1, POLICY_HOLD_WITHIN_BAND, 0, NULL},
        {420, 1, 1, 0, 0, -1, 0.004, 0, POLICY_PREDICTIVE_SCALE_IN, 0, NULL},
        {3600, 0, 0, 0, 0, -1, 0.004, 0, POLICY_HOLD_AT_MIN, 0, NULL},
    };
    run_ztable(&c, few, UTIL_ARRAY_LEN(few));
    /* hysteresis: a likely peak of 0.01 req/s (2 requests within 3m15s) keeps a
     * replica but does not wake one; 0.02 (4 requests) wakes one */
    const struct ptick band[] = {
        {0, 1, 1, 0, 0, -1, 0.01, 1, POLICY_HOLD_WITHIN_BAND, 0, NULL},
        {900, 1, 1, 0, 0, -1, 0.01, 1, POLICY_HOLD_WITHIN_BAND, 0, NULL},
        {915, 1, 1, 0, 0, -1, 0.001, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {1100, 1, 1, 0, 0, -1, 0.001, 0, POLICY_PREDICTIVE_SCALE_IN, 0, NULL},
        {1115, 0, 0, 0, 0, -1, 0.01, 0, POLICY_HOLD_AT_MIN, 0, NULL},
        {1130, 0, 0, 0, 0, -1, 0.02, 1, POLICY_PREDICTIVE_SCALE_OUT, 0, NULL},
    };
    run_ztable(&c, band, UTIL_ARRAY_LEN(band));
}

/* Missing metrics never scale to zero, nor wake it; a gap restarts the
 * idleness; requests at zero with no capacity learned yet ask for one. */
static void test_zero_missing_metrics(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    const struct ptick rows[] = {
        {0, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {290, 1, 1, 0, MISSING, -1, NOFC, 1, POLICY_METRICS_UNAVAILABLE, 0, NULL},
        {300, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {599, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {600, 1, 1, 0, 0, -1, NOFC, 0, POLICY_SCALED_IN, 0, NULL},
        {700, 0, 0, 0, MISSING, -1, NOFC, 0, POLICY_METRICS_UNAVAILABLE, 0, NULL},
    };
    run_ztable(&c, rows, UTIL_ARRAY_LEN(rows));
    struct policy_config a;
    base_cfg(&a);
    a.capacity_rps_per_gpu = 0;
    a.capacity_auto = true;
    const struct ptick learn[] = {
        {0, 0, 0, 0, 0, -1, NOFC, 0, POLICY_METRICS_UNAVAILABLE, 0, "no capacity-per-gpu"},
        {15, 0, 0, 0, 5, -1, NOFC, 1, POLICY_SCALED_OUT, 0, "nothing learned yet): 0 -> 1"},
        {30, 1, 0, 0, 5, -1, NOFC, 1, POLICY_METRICS_UNAVAILABLE, 0, NULL},
    };
    run_ztable(&a, learn, UTIL_ARRAY_LEN(learn));
    /* a queue without arrivals (they came in stale ticks) wakes it too, as
     * it does with a capacity; it was held at zero */
    const struct ptick queued[] = {
        {0, 0, 0, 0, 0, -1, NOFC, 0, POLICY_METRICS_UNAVAILABLE, 0, "no capacity-per-gpu"},
        {15, 0, 0, 0, 0, 0.4, NOFC, 0, POLICY_METRICS_UNAVAILABLE, 0, NULL},
        {30, 0, 0, 0, 0, 5, NOFC, 1, POLICY_SCALED_OUT, 0, "5 requests wait at 0 replicas"},
    };
    run_ztable(&a, queued, UTIL_ARRAY_LEN(queued));
}

/* min-replicas 1 or more and 0 replicas: parked. Nothing scales it, whatever
 * the load or the metrics; scaled up by hand, the rules resume. */
static void test_parked(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.min_replicas = 2;
    const struct ptick rows[] = {
        {0, 0, 0, 0, 50, -1, NOFC, 0, POLICY_HOLD_PARKED, 0, "parked"},
        {600, 0, 0, 0, MISSING, -1, NOFC, 0, POLICY_HOLD_PARKED, 0, "min-replicas 2"},
        {615, 0, 0, 0, 0, 5, 40, 0, POLICY_HOLD_PARKED, 0, NULL},
        {630, 1, 0, 0, MISSING, -1, NOFC, 2, POLICY_CLAMPED, 0, NULL},
        {645, 2, 2, 0, 2, -1, NOFC, 2, POLICY_HOLD_BELOW_WAITING, 0, NULL},
    };
    run_ztable(&c, rows, UTIL_ARRAY_LEN(rows));
    assert_string_equal(policy_reason_name(POLICY_HOLD_PARKED), "Parked");
    assert_false(policy_reason_is_action(POLICY_HOLD_PARKED));

    /* a zero this policy made (min-replicas 0 then) and min-replicas raised
     * to 2 since: not parked, raised to 2, with metrics or without */
    for (int valid = 0; valid < 2; valid++) {
        struct policy_state st;
        policy_state_init(&st);
        struct policy_input in = {.now_ms = S(700), .current_replicas = 0,
                                  .zero_by_policy = true, .gpus_per_replica = 1,
                                  .metrics_valid = valid, .metrics_time_ms = S(700),
                                  .request_rate = 0, .recent_rate = -1, .p99_latency_ms = -1,
                                  .queue_depth = -1, .forecast_likely = NAN};
        struct policy_decision d;
        policy_decide(&c, &st, &in, &d);
        assert_int_equal(d.desired, 2);
        assert_int_equal(d.reason, POLICY_CLAMPED);
        in.zero_by_policy = false; /* by hand: parked */
        policy_decide(&c, &st, &in, &d);
        assert_int_equal(d.desired, 0);
        assert_int_equal(d.reason, POLICY_HOLD_PARKED);
    }
}

/* An action the next decision finds not applied (the count still the one it
 * scaled from: a write that failed, an HPA not synced yet) fires again: the
 * hysteresis scale-in does not wait another scale-in-after, and in
 * external-metric mode the HPA is served it until it acts. Applied, the
 * next step waits a full window as before. */
static void test_action_not_applied(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.min_replicas = 1;
    const struct ptick rows[] = {
        {0, 4, 4, 0, 2, -1, NOFC, 4, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {300, 4, 4, 0, 2, -1, NOFC, 2, POLICY_SCALED_IN, 0, "4 -> 2"},
        {315, 4, 4, 0, 2, -1, NOFC, 2, POLICY_SCALED_IN, 0, "4 -> 2"}, /* not applied */
        {330, 4, 4, 0, 2, -1, NOFC, 2, POLICY_SCALED_IN, 0, NULL},
        {345, 2, 2, 0, 2, -1, NOFC, 2, POLICY_HOLD_BELOW_WAITING, 0, NULL},
    };
    run_ztable(&c, rows, UTIL_ARRAY_LEN(rows));
    /* applied at once: the next step of the rule waits scale-in-after again */
    const struct ptick applied[] = {
        {0, 4, 4, 0, 2, -1, NOFC, 4, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {300, 4, 4, 0, 2, -1, NOFC, 2, POLICY_SCALED_IN, 0, "4 -> 2"},
        {315, 2, 2, 0, 2, -1, NOFC, 2, POLICY_HOLD_BELOW_WAITING, 0, NULL},
        {599, 2, 2, 0, 2, -1, NOFC, 2, POLICY_HOLD_BELOW_WAITING, 0, NULL},
    };
    run_ztable(&c, applied, UTIL_ARRAY_LEN(applied));
}

/* One run of a load that falls, rises and falls again, through the
 * hysteresis rule and, predictive, the trusted plan's scale-in with its
 * stabilization window and the ramp; the replicas follow the decisions. At
 * step_at_s the caller's clock is set forward or back by step_s: shifted,
 * the state keeps the durations it measured. Returns the decisions. */
static size_t clock_run(bool predictive, double step_at_s, double step_s, bool shifted,
                        struct policy_decision *out, size_t max)
{
    struct policy_config c;
    base_cfg(&c);
    c.min_replicas = 1;
    c.predictive = predictive;
    c.p99_latency_target_ms = predictive ? 8000 : 0;
    c.service_time_ms = predictive ? 6400 : 0;
    struct policy_state st;
    policy_state_init(&st);
    int cur = 6;
    double off = 0;
    size_t n = 0;
    for (double t = 0; t < 3600 && n < max; t += 15, n++) {
        if (t >= step_at_s && off == 0) {
            off = step_s;
            if (shifted)
                policy_state_shift(&st, S(step_s));
        }
        double rate = t < 900 ? 40 : t < 1500 ? 12 : t < 2400 ? 12 + (t - 1500) / 30 : 20;
        struct policy_input in = {
            .now_ms = S(t + off), .current_replicas = cur, .ready_replicas = cur,
            .gpus_per_replica = 1, .metrics_valid = true, .metrics_time_ms = S(t + off),
            .request_rate = rate, .recent_rate = -1, .p99_latency_ms = -1, .queue_depth = 0,
            .have_forecast = predictive, .forecast_rate = rate * 1.1,
            .forecast_likely = rate, .forecast_trusted = predictive,
            .forecast_seasonal = true};
        policy_decide(&c, &st, &in, &out[n]);
        cur = out[n].desired;
    }
    return n;
}

/* A wall clock set forward by 10 minutes, or back by 5, while the rules'
 * clocks run: with the state shifted by the step, every decision is the one
 * made without a step; without the shift, a step forward fires the scale-in
 * at once. */
static void test_clock_step_shifted(void **s)
{
    (void)s;
    enum { N = 240 };
    static struct policy_decision ref[N], got[N];
    for (int predictive = 0; predictive <= 1; predictive++) {
        for (int k = 0; k < 2; k++) {
            double at = 960 + 15 * k * 3, step = k == 0 ? 600 : -300;
            size_t n = clock_run(predictive, 1e9, 0, false, ref, N);
            assert_int_equal(clock_run(predictive, at, step, true, got, N), n);
            for (size_t i = 0; i < n; i++)
                if (got[i].desired != ref[i].desired || got[i].reason != ref[i].reason)
                    fail_msg("predictive %d, step %+gs at %gs: tick %zu: %d %s, without a "
                             "step %d %s",
                             predictive, step, at, i, got[i].desired,
                             policy_reason_name(got[i].reason), ref[i].desired,
                             policy_reason_name(ref[i].reason));
        }
        /* not shifted: the step forward is taken for 10 minutes of evidence */
        clock_run(predictive, 960, 600, false, got, N);
        size_t differ = 0;
        for (size_t i = 0; i < N; i++)
            differ += got[i].desired != ref[i].desired;
        assert_true(differ > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_reactive),
        cmocka_unit_test(test_zero_predictive),
        cmocka_unit_test(test_zero_missing_metrics),
        cmocka_unit_test(test_parked),
        cmocka_unit_test(test_action_not_applied),
        cmocka_unit_test(test_clock_step_shifted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

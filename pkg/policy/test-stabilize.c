/* SPDX-License-Identifier: Apache-2.0 */
/* Policy tests of the plan's scale-in stabilization: the window is kept
 * whole whatever the tick (the floor ring held 64 ticks, so at 1 s ticks a
 * 2-minute window was 64 s, and at 15 s ticks a 30-minute one 16 min), and
 * a scale-in waits for a whole window of floors at the start and after
 * missing metrics (one fresh tick after a stale one halved the count). And
 * with demand-unit tokens, the requests a plan must expect to keep or wake a
 * replica at min-replicas 0 are requests, not tokens. 10 req/s per GPU. */
#include "test-table.h"

#include "util/util.h"

/* One tick at t_ms of 6 replicas under a trusted seasonal plan of 10 req/s
 * (needs 2 replicas): rate req/s, or missing metrics when rate < 0. */
static void tick(const struct policy_config *c, struct policy_state *st, int64_t t_ms,
                 double rate, struct policy_decision *d)
{
    struct policy_input in = {
        .now_ms = t_ms, .current_replicas = 6, .ready_replicas = 6, .gpus_per_replica = 1,
        .metrics_valid = rate >= 0, .metrics_time_ms = t_ms, .request_rate = rate < 0 ? 0 : rate,
        .recent_rate = NAN, .p99_latency_ms = -1, .queue_depth = 0, .request_size = 1,
        .have_forecast = true, .forecast_rate = 10, .forecast_likely = 10,
        .forecast_model_rate = NAN, .forecast_trusted = true, .forecast_seasonal = true};
    policy_decide(c, st, &in, d);
}

static void cfg_at(struct policy_config *c, int64_t interval_ms, int64_t window_ms)
{
    policy_config_init(c);
    c->capacity_rps_per_gpu = 10;
    c->min_replicas = 1;
    c->max_replicas = 20;
    c->predictive = true;
    c->decision_interval_ms = interval_ms;
    c->scale_in_stabilization_ms = window_ms;
}

/* 46 req/s (7 replicas' floor) for the first window, then 10: the scale-in
 * to 3 (half a step) comes one window after the last tick that needed 7,
 * not before, at 1 s, 2 s, 15 s and 60 s ticks and windows of 2 and 30 min. */
static void test_window_kept_whole(void **s)
{
    (void)s;
    static const struct {
        int64_t interval, window;
    } cases[] = {{1000, 120000}, {2000, 120000}, {15000, 120000}, {15000, 1800000},
                 {60000, 3600000}, {1000, 3600000}};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        struct policy_config c;
        cfg_at(&c, cases[i].interval, cases[i].window);
        struct policy_state st;
        policy_state_init(&st);
        struct policy_decision d;
        int64_t iv = cases[i].interval, w = cases[i].window, last_high = w;
        for (int64_t t = 0;; t += iv) {
            tick(&c, &st, t, t <= last_high ? 46 : 10, &d);
            if (d.desired == 6)
                continue;
            /* held while a tick of the last window needed 7 (a slot's
             * length longer at most: the ring keeps the newest of a slot) */
            if (t < last_high + w || t > last_high + w + (w + 62) / 63 + iv)
                fail_msg("case %zu (%llds ticks, %llds window): %d %s at t=%llds, want it "
                         "within a slot of %llds (%s)",
                         i, (long long)iv / 1000, (long long)w / 1000, d.desired,
                         policy_reason_name(d.reason), (long long)t / 1000,
                         (long long)(last_high + w) / 1000, d.explain);
            assert_int_equal(d.reason, POLICY_PREDICTIVE_SCALE_IN);
            assert_int_equal(d.desired, 3);
            break;
        }
    }
}

/* Missing metrics forget the floors (measured before the gap), and the
 * scale-in waits for a whole window of new ones: a dip on the first tick
 * back is no evidence. */
static void test_gap_waits_a_window(void **s)
{
    (void)s;
    struct policy_config c;
    cfg_at(&c, 15000, 120000);
    struct policy_state st;
    policy_state_init(&st);
    struct policy_decision d;
    for (int64_t t = 0; t <= 240000; t += 15000) {
        tick(&c, &st, t, 46, &d);
        assert_int_equal(d.desired, 6);
    }
    tick(&c, &st, 255000, -1, &d);
    assert_int_equal(d.reason, POLICY_METRICS_UNAVAILABLE);
    for (int64_t t = 270000; t < 390000; t += 15000) {
        tick(&c, &st, t, 10, &d);
        if (d.desired != 6 || !strstr(d.explain, "floors are known for"))
            fail_msg("t=%llds: %d %s (%s)", (long long)t / 1000, d.desired,
                     policy_reason_name(d.reason), d.explain);
    }
    tick(&c, &st, 390000, 10, &d);
    assert_int_equal(d.reason, POLICY_PREDICTIVE_SCALE_IN);
    assert_int_equal(d.desired, 3);
    /* the explanation of the wait says how much of the window is known */
    policy_state_init(&st);
    tick(&c, &st, 0, 10, &d);
    assert_int_equal(d.desired, 6);
    assert_non_null(strstr(d.explain, "floors are known for 0s of the 2m"));
}

/* demand-unit tokens, 500 weighted tokens a request, min-replicas 0: the
 * plan is in tokens/s, and keeps one replica or wakes it only when it
 * expects requests (1 within the look-ahead to keep, 3 to wake), not
 * tokens: 1 token/s is 0.39 requests in 3m15s. */
static void test_tokens_zero(void **s)
{
    (void)s;
    struct policy_config c;
    policy_config_init(&c);
    c.demand_unit = POLICY_UNIT_TOKENS;
    c.capacity_rps_per_gpu = 3200;
    c.min_replicas = 0;
    c.max_replicas = 20;
    c.scale_in_after_ms = S(600);
    c.predictive = true;
    static const struct {
        double likely; /* tokens/s */
        int cur, want;
    } rows[] = {
        {1, 1, 0},     /* 0.39 requests: nothing keeps the replica */
        {3, 1, 1},     /* 1.17: kept */
        {2, 0, 0},     /* 0.78 at zero: no wake (it woke at 3 tokens in 195 s) */
        {8, 0, 1},     /* 3.1: woken ahead of load */
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(rows); i++) {
        struct policy_state st;
        policy_state_init(&st);
        struct policy_decision d;
        for (int64_t t = 0; t <= S(800); t += S(15)) {
            struct policy_input in = {
                .now_ms = t, .current_replicas = rows[i].cur, .ready_replicas = rows[i].cur,
                .zero_by_policy = rows[i].cur == 0, .gpus_per_replica = 1,
                .metrics_valid = true, .metrics_time_ms = t, .request_rate = 0,
                .recent_rate = 0, .p99_latency_ms = -1, .queue_depth = 0, .request_size = 500,
                .have_forecast = true, .forecast_rate = rows[i].likely,
                .forecast_likely = rows[i].likely, .forecast_model_rate = NAN,
                .forecast_trusted = true, .forecast_seasonal = true};
            policy_decide(&c, &st, &in, &d);
        }
        if (d.desired != rows[i].want)
            fail_msg("row %zu: %g tokens/s at %d replicas: %d %s, want %d (%s)", i,
                     rows[i].likely, rows[i].cur, d.desired, policy_reason_name(d.reason),
                     rows[i].want, d.explain);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_kept_whole),
        cmocka_unit_test(test_gap_waits_a_window),
        cmocka_unit_test(test_tokens_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Policy tests as tables: each row is one tick (time, replicas, ready, rate,
 * forecast) with the decision and reason expected at that tick. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "policy/policy.h"
#include "util/util.h"

#define S(x) ((int64_t)((x) * 1000))
#define NOFC (-1.0)
#define MISSING (-2.0)

struct tick {
    double t_s;      /* now, seconds */
    int cur, ready;  /* replicas asked for / ready */
    double rate;     /* req/s; MISSING = metrics invalid */
    double forecast; /* NOFC = none */
    int want;        /* expected desired */
    enum policy_reason reason;
};

/* capacity 10 req/s/GPU, 1 GPU per replica: threshold 8 req/s per replica,
 * scale-in below 5 req/s per replica. */
static void base_cfg(struct policy_config *c)
{
    policy_config_init(c);
    c->capacity_rps_per_gpu = 10;
    c->min_replicas = 1;
    c->max_replicas = 20;
}

static void run_table(const struct policy_config *cfg, const struct tick *rows, size_t n)
{
    struct policy_state st;
    policy_state_init(&st);
    char err[128];
    assert_int_equal(policy_config_validate(cfg, err, sizeof(err)), 0);
    for (size_t i = 0; i < n; i++) {
        const struct tick *r = &rows[i];
        struct policy_input in = {
            .now_ms = S(r->t_s),
            .current_replicas = r->cur,
            .ready_replicas = r->ready,
            .gpus_per_replica = 1,
            .metrics_valid = r->rate != MISSING,
            .metrics_time_ms = S(r->t_s),
            .request_rate = r->rate == MISSING ? 0 : r->rate,
            .p99_latency_ms = -1,
            .queue_depth = -1,
            .have_forecast = r->forecast != NOFC,
            .forecast_rate = r->forecast,
        };
        struct policy_decision d;
        policy_decide(cfg, &st, &in, &d);
        if (d.desired != r->want || d.reason != r->reason)
            fail_msg("row %zu (t=%gs): got %d %s, want %d %s (%s)", i, r->t_s, d.desired,
                     policy_reason_name(d.reason), r->want, policy_reason_name(r->reason),
                     d.explain);
        assert_true(d.desired >= cfg->min_replicas && d.desired <= cfg->max_replicas);
        assert_true(strlen(d.explain) > 10 && strchr(d.explain, '\n') == NULL);
    }
}

static void test_sustained_scale_out_boundary(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = false;
    /* 4 replicas at 9 req/s each = 36 req/s > 32 threshold from t=0. */
    const struct tick rows[] = {
        {0, 4, 4, 36, NOFC, 4, POLICY_HOLD_ABOVE_WAITING},
        {60, 4, 4, 36, NOFC, 4, POLICY_HOLD_ABOVE_WAITING},
        {119.999, 4, 4, 36, NOFC, 4, POLICY_HOLD_ABOVE_WAITING},
        /* exactly 2 min: fires; 36 / 8 per replica -> 5 replicas */
        {120, 4, 4, 36, NOFC, 5, POLICY_SCALED_OUT},
        /* new replica warming: over ready replicas still above, but 5 asked cover it */
        {135, 5, 4, 36, NOFC, 5, POLICY_HOLD_SCALE_OUT_PENDING},
        /* load grows while warming: the clock is still running, scale further */
        {150, 5, 4, 50, NOFC, 7, POLICY_SCALED_OUT},
    };
    run_table(&c, rows, UTIL_ARRAY_LEN(rows));
}

static void test_dip_restarts_clock(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = false;
    const struct tick rows[] = {
        {0, 4, 4, 36, NOFC, 4, POLICY_HOLD_ABOVE_WAITING},
        {100, 4, 4, 36, NOFC, 4, POLICY_HOLD_ABOVE_WAITING},
        /* exactly at the threshold is not above: clock stops */
        {105, 4, 4, 32, NOFC, 4, POLICY_HOLD_WITHIN_BAND},
        {110, 4, 4, 36, NOFC, 4, POLICY_HOLD_ABOVE_WAITING},
        {229.9, 4, 4, 36, NOFC, 4, POLICY_HOLD_ABOVE_WAITING},
        {230, 4, 4, 36, NOFC, 5, POLICY_SCALED_OUT},
    };
    run_table(&c, rows, UTIL_ARRAY_LEN(rows));
}

static void test_hysteresis_and_scale_in_steps(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = false;
    c.max_scale_down_step = 2;
    const struct tick rows[] = {
        /* 10 replicas at 6 req/s each: between 5 and 8, no clock */
        {0, 10, 10, 60, NOFC, 10, POLICY_HOLD_WITHIN_BAND},
        {1000, 10, 10, 60, NOFC, 10, POLICY_HOLD_WITHIN_BAND},
        /* drop to 2 req/s each: below 5 */
        {1015, 10, 10, 20, NOFC, 10, POLICY_HOLD_BELOW_WAITING},
        {1614.9, 10, 10, 20, NOFC, 10, POLICY_HOLD_BELOW_WAITING},
        /* 10 min: needs ceil(20/8)=3 but steps of 2 */
        {1615, 10, 10, 20, NOFC, 8, POLICY_SCALED_IN},
        /* next step needs another full window */
        {1630, 8, 8, 20, NOFC, 8, POLICY_HOLD_BELOW_WAITING},
        {2214.9, 8, 8, 20, NOFC, 8, POLICY_HOLD_BELOW_WAITING},
        {2215, 8, 8, 20, NOFC, 6, POLICY_SCALED_IN},
        /* 20/6 = 3.3 per replica still below 5 */
        {2815, 6, 6, 20, NOFC, 4, POLICY_SCALED_IN},
        /* 20/4 = 5: not below -> band, no more scale-in */
        {3415, 4, 4, 20, NOFC, 4, POLICY_HOLD_WITHIN_BAND},
        {9999, 4, 4, 20, NOFC, 4, POLICY_HOLD_WITHIN_BAND},
    };
    run_table(&c, rows, UTIL_ARRAY_LEN(rows));
}

static void test_default_step_halves_and_min(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = false;
    c.min_replicas = 3;
    const struct tick rows[] = {
        {0, 16, 16, 0.5, NOFC, 16, POLICY_HOLD_BELOW_WAITING},
        {600, 16, 16, 0.5, NOFC, 8, POLICY_SCALED_IN},
        {1200, 8, 8, 0.5, NOFC, 4, POLICY_SCALED_IN},
        {1800, 4, 4, 0.5, NOFC, 3, POLICY_SCALED_IN},
        {2400, 3, 3, 0.5, NOFC, 3, POLICY_HOLD_AT_MIN},
    };
    run_table(&c, rows, UTIL_ARRAY_LEN(rows));
}

static void test_bounds_and_up_step(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = false;
    c.max_replicas = 6;
    c.max_scale_up_step = 1;
    c.scale_out_after_ms = 0;
    const struct tick rows[] = {
        /* out of bounds either way is corrected at once */
        {0, 0, 0, 0, NOFC, 1, POLICY_CLAMPED},
        {15, 9, 9, 10, NOFC, 6, POLICY_CLAMPED},
        /* 100 req/s needs 13 but steps of one, and never above 6 */
        {30, 4, 4, 100, NOFC, 5, POLICY_SCALED_OUT},
        {45, 5, 5, 100, NOFC, 6, POLICY_SCALED_OUT},
        {60, 6, 6, 100, NOFC, 6, POLICY_HOLD_AT_MAX},
    };
    run_table(&c, rows, UTIL_ARRAY_LEN(rows));
}

static void test_missing_metrics_hold(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = false;
    const struct tick rows[] = {
        {0, 10, 10, 1, NOFC, 10, POLICY_HOLD_BELOW_WAITING},
        {590, 10, 10, 1, NOFC, 10, POLICY_HOLD_BELOW_WAITING},
        /* the collector fails right before the window ends: hold, reset */
        {600, 10, 10, MISSING, NOFC, 10, POLICY_METRICS_UNAVAILABLE},
        {615, 10, 10, 1, NOFC, 10, POLICY_HOLD_BELOW_WAITING},
        /* must wait a whole new window after the gap */
        {1214, 10, 10, 1, NOFC, 10, POLICY_HOLD_BELOW_WAITING},
        {1215, 10, 10, 1, NOFC, 5, POLICY_SCALED_IN},
    };
    run_table(&c, rows, UTIL_ARRAY_LEN(rows));

    /* stale timestamp: same hold */
    struct policy_state st;
    policy_state_init(&st);
    struct policy_input in = {.now_ms = S(1000), .current_replicas = 10, .ready_replicas = 10,
                              .gpus_per_replica = 1, .metrics_valid = true,
                              .metrics_time_ms = S(1000 - 61), .request_rate = 0,
                              .p99_latency_ms = -1, .queue_depth = -1};
    struct policy_decision d;
    policy_decide(&c, &st, &in, &d);
    assert_int_equal(d.desired, 10);
    assert_int_equal(d.reason, POLICY_METRICS_UNAVAILABLE);
    assert_non_null(strstr(d.explain, "stale"));
    /* NaN rate is treated as missing */
    in.metrics_time_ms = S(1000);
    in.request_rate = NAN;
    policy_decide(&c, &st, &in, &d);
    assert_int_equal(d.reason, POLICY_METRICS_UNAVAILABLE);
    assert_int_equal(d.desired, 10);
}

static void test_predictive(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    const struct tick rows[] = {
        /* load fine now; forecast needs 6: one forecast alone does not act, a
         * forecast that holds for a full decision interval does */
        {0, 4, 4, 24, 48, 4, POLICY_HOLD_WITHIN_BAND},
        {15, 4, 4, 24, 48, 6, POLICY_PREDICTIVE_SCALE_OUT},
        {30, 6, 4, 24, 48, 6, POLICY_HOLD_WITHIN_BAND},
        /* forecast low never scales in below what current load needs:
         * 6 ready at 24 req/s = 4 each (< 5) -> after 10 min scale in to
         * ceil(24/8) = 3 even though the forecast says 0 */
        {30, 6, 6, 24, 0, 6, POLICY_HOLD_BELOW_WAITING},
        {630, 6, 6, 24, 0, 3, POLICY_SCALED_IN},
        /* a high forecast blocks scale-in */
        {700, 8, 8, 8, 60, 8, POLICY_HOLD_BELOW_WAITING},
        {1300, 8, 8, 8, 60, 8, POLICY_HOLD_BELOW_WAITING},
    };
    run_table(&c, rows, UTIL_ARRAY_LEN(rows));

    /* a forecast blip that does not last a decision interval is ignored */
    const struct tick blip[] = {
        {0, 4, 4, 24, 48, 4, POLICY_HOLD_WITHIN_BAND},
        {10, 4, 4, 24, 20, 4, POLICY_HOLD_WITHIN_BAND},
        {20, 4, 4, 24, 48, 4, POLICY_HOLD_WITHIN_BAND},
        {34.9, 4, 4, 24, 48, 4, POLICY_HOLD_WITHIN_BAND},
        {35, 4, 4, 24, 48, 6, POLICY_PREDICTIVE_SCALE_OUT},
    };
    run_table(&c, blip, UTIL_ARRAY_LEN(blip));

    /* predictive off ignores the forecast */
    c.predictive = false;
    const struct tick off[] = {{0, 4, 4, 24, 48, 4, POLICY_HOLD_WITHIN_BAND}};
    run_table(&c, off, UTIL_ARRAY_LEN(off));
}

static void test_latency_guard(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = false;
    c.p99_latency_target_ms = 2000;
    struct policy_state st;
    policy_state_init(&st);
    struct policy_decision d;
    struct policy_input in = {.current_replicas = 4, .ready_replicas = 4, .gpus_per_replica = 1,
                              .metrics_valid = true, .request_rate = 28, .p99_latency_ms = 3500,
                              .queue_depth = -1};
    for (int t = 0; t <= 120; t += 15) {
        in.now_ms = in.metrics_time_ms = S(t);
        policy_decide(&c, &st, &in, &d);
        if (t < 120)
            assert_int_equal(d.desired, 4);
    }
    assert_int_equal(d.desired, 5);
    assert_int_equal(d.reason, POLICY_LATENCY_SCALE_OUT);

    /* queueing blocks scale-in */
    policy_state_init(&st);
    in.current_replicas = in.ready_replicas = 10;
    in.request_rate = 5;
    in.p99_latency_ms = 100;
    in.queue_depth = 50;
    for (int t = 0; t <= 700; t += 15) {
        in.now_ms = in.metrics_time_ms = S(t);
        policy_decide(&c, &st, &in, &d);
        assert_int_equal(d.desired, 10);
    }
    assert_int_equal(d.reason, POLICY_HOLD_LATENCY);
}

static void test_multi_gpu_and_zero_ready(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.predictive = false;
    c.scale_out_after_ms = 0;
    struct policy_state st;
    policy_state_init(&st);
    struct policy_decision d;
    /* 2 replicas x 4 GPUs at 100 req/s = 12.5 req/s/GPU; target 8/GPU = 32/replica */
    struct policy_input in = {.now_ms = 0, .current_replicas = 2, .ready_replicas = 2,
                              .gpus_per_replica = 4, .metrics_valid = true, .request_rate = 100,
                              .p99_latency_ms = -1, .queue_depth = -1};
    policy_decide(&c, &st, &in, &d);
    assert_true(fabs(d.requests_per_gpu - 12.5) < 1e-9);
    assert_true(fabs(d.utilization - 1.25) < 1e-9);
    assert_int_equal(d.desired, 4);
    assert_int_equal(d.reason, POLICY_SCALED_OUT);
    /* no ready replica but traffic: infinitely above */
    in.ready_replicas = 0;
    in.current_replicas = 1;
    policy_decide(&c, &st, &in, &d);
    assert_int_equal(d.desired, 4);
}

static void test_config_keys(void **s)
{
    (void)s;
    struct policy_config c, before;
    char err[160];
    policy_config_init(&c);
    assert_int_equal(policy_config_validate(&c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "capacity-per-gpu"));
    assert_int_equal(policy_config_set(&c, "capacity-per-gpu", "12.5", err, sizeof(err)), 0);
    assert_true(c.capacity_rps_per_gpu == 12.5);
    assert_int_equal(policy_config_set(&c, "scale-out-after", "90s", err, sizeof(err)), 0);
    assert_int_equal(c.scale_out_after_ms, 90000);
    assert_int_equal(policy_config_set(&c, "predictive", "false", err, sizeof(err)), 0);
    assert_false(c.predictive);
    assert_int_equal(policy_config_set(&c, "max-replicas", "40", err, sizeof(err)), 0);
    assert_int_equal(c.max_replicas, 40);
    assert_int_equal(policy_config_validate(&c, err, sizeof(err)), 0);

    static const struct {
        const char *k, *v, *msg;
        int rc;
    } bad[] = {
        {"capacity-per-gpu", "0", "out of range", -EINVAL},
        {"capacity-per-gpu", "ten", "not a number", -EINVAL},
        {"target-utilization", "1.5", "out of range", -EINVAL},
        {"min-replicas", "2.5", "not a whole number", -EINVAL},
        {"min-replicas", "-1", "out of range", -EINVAL},
        {"cold-start", "3 minutes", "not a duration", -EINVAL},
        {"cold-start", "2d", "out of range", -EINVAL},
        {"predictive", "maybe", "not true or false", -EINVAL},
        {"seasonality", "10m", "out of range", -EINVAL},
        {"no-such-key", "1", "unknown key", -ENOENT},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        before = c;
        int rc = policy_config_set(&c, bad[i].k, bad[i].v, err, sizeof(err));
        if (rc != bad[i].rc || !strstr(err, bad[i].msg))
            fail_msg("%s=%s: rc %d err '%s'", bad[i].k, bad[i].v, rc, err);
        assert_memory_equal(&c, &before, sizeof(c));
        if (bad[i].rc == -EINVAL)
            assert_non_null(strstr(err, bad[i].k));
    }
    assert_int_equal(policy_config_set(&c, "min-replicas", "50", err, sizeof(err)), 0);
    assert_int_equal(policy_config_validate(&c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "min-replicas"));
    policy_config_init(&c);
    c.capacity_rps_per_gpu = 1;
    c.scale_in_utilization = 0.9;
    assert_int_equal(policy_config_validate(&c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "scale-in-utilization"));
    for (size_t i = 0; i < policy_config_key_count(); i++)
        assert_non_null(policy_config_key_name(i));
    assert_null(policy_config_key_name(policy_config_key_count()));
}

static void test_counter_rate(void **s)
{
    (void)s;
    struct policy_counter c = {0};
    double r;
    assert_int_equal(policy_counter_rate(&c, 0, 60000, &r), -ENODATA);
    assert_int_equal(policy_counter_add(&c, 0, 100), 0);
    assert_int_equal(policy_counter_rate(&c, 0, 60000, &r), -ENODATA);
    /* irregular scrape times: 10 requests/s throughout */
    assert_int_equal(policy_counter_add(&c, 5000, 150), 0);
    assert_int_equal(policy_counter_add(&c, 12000, 220), 0);
    assert_int_equal(policy_counter_rate(&c, 12000, 60000, &r), 0);
    assert_true(fabs(r - 10) < 1e-9);
    /* counter reset: pod restarted, counter restarts from 0 and counts 30 */
    assert_int_equal(policy_counter_add(&c, 15000, 30), 0);
    assert_int_equal(policy_counter_rate(&c, 15000, 60000, &r), 0);
    assert_true(fabs(r - (120.0 + 30.0) / 15.0) < 1e-9);
    /* out of order, duplicate, NaN, negative are refused */
    assert_int_equal(policy_counter_add(&c, 15000, 40), -EINVAL);
    assert_int_equal(policy_counter_add(&c, 14000, 40), -EINVAL);
    assert_int_equal(policy_counter_add(&c, 16000, NAN), -EINVAL);
    assert_int_equal(policy_counter_add(&c, 16000, -1), -EINVAL);
    assert_int_equal(policy_counter_last_ms(&c), 15000);
    /* a gap: only samples inside the window count */
    assert_int_equal(policy_counter_add(&c, 200000, 1000), 0);
    assert_int_equal(policy_counter_rate(&c, 200000, 60000, &r), -ENODATA);
    assert_int_equal(policy_counter_add(&c, 210000, 1050), 0);
    assert_int_equal(policy_counter_rate(&c, 210000, 60000, &r), 0);
    assert_true(fabs(r - 5) < 1e-9);
    /* increase and span: what several counters sum over a common window */
    double inc;
    int64_t span;
    assert_int_equal(policy_counter_increase(&c, 210000, 60000, &inc, &span), 0);
    assert_true(fabs(inc - 50) < 1e-9);
    assert_int_equal(span, 10000);
    /* the ring keeps the newest samples */
    struct policy_counter big = {0};
    for (int i = 0; i < 100; i++)
        assert_int_equal(policy_counter_add(&big, i * 1000, i * 2.0), 0);
    assert_int_equal(big.n, POLICY_COUNTER_SAMPLES);
    assert_int_equal(policy_counter_rate(&big, 99000, 10500, &r), 0);
    assert_true(fabs(r - 2) < 1e-9);
}

static void test_horizon(void **s)
{
    (void)s;
    struct policy_config c;
    policy_config_init(&c);
    assert_int_equal(policy_horizon_ms(&c, 0), 180000 + 15000);
    assert_int_equal(policy_horizon_ms(&c, 600000), 600000 + 15000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sustained_scale_out_boundary),
        cmocka_unit_test(test_dip_restarts_clock),
        cmocka_unit_test(test_hysteresis_and_scale_in_steps),
        cmocka_unit_test(test_default_step_halves_and_min),
        cmocka_unit_test(test_bounds_and_up_step),
        cmocka_unit_test(test_missing_metrics_hold),
        cmocka_unit_test(test_predictive),
        cmocka_unit_test(test_latency_guard),
        cmocka_unit_test(test_multi_gpu_and_zero_ready),
        cmocka_unit_test(test_config_keys),
        cmocka_unit_test(test_counter_rate),
        cmocka_unit_test(test_horizon),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

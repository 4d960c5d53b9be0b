/* SPDX-License-Identifier: Apache-2.0 */
/* Policy tests of zero replicas: with min-replicas 0 the Deployment wakes at
 * the first request and goes to zero only after scale-in-after without one;
 * with min-replicas 1 or more, zero is parked (scaled there by hand, left
 * there, as the HPA does). 10 req/s per GPU, 1 GPU per replica: 8 req/s per
 * replica at the target, 5 below which the hysteresis rule scales in. */
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
#define MISSING (-1.0)
#define NOFC (-1.0)

static void base_cfg(struct policy_config *c)
{
    policy_config_init(c);
    c->capacity_rps_per_gpu = 10;
    c->min_replicas = 0;
    c->max_replicas = 20;
    c->scale_in_after_ms = S(300);
    c->predictive = false;
}

struct ztick {
    double t_s;
    int cur, ready, unsched; /* unsched: Pending for want of a GPU */
    double rate, queue, plan; /* rate MISSING: metrics invalid; queue < 0 unknown; plan NOFC */
    int desired;
    enum policy_reason reason;
    const char *says; /* a phrase of the explanation, or NULL */
};

static void run_stable(const struct policy_config *cfg, const struct ztick *rows, size_t n,
                       bool seasonal)
{
    struct policy_state st;
    policy_state_init(&st);
    char err[128];
    assert_int_equal(policy_config_validate(cfg, err, sizeof(err)), 0);
    for (size_t i = 0; i < n; i++) {
        const struct ztick *r = &rows[i];
        struct policy_input in = {
            .now_ms = S(r->t_s),
            .current_replicas = r->cur,
            .ready_replicas = r->ready,
            .unschedulable_replicas = r->unsched,
            .gpus_per_replica = 1,
            .metrics_valid = r->rate != MISSING,
            .metrics_time_ms = S(r->t_s),
            .request_rate = r->rate == MISSING ? 0 : r->rate,
            .recent_rate = -1,
            .p99_latency_ms = -1,
            .queue_depth = r->queue,
            .have_forecast = r->plan != NOFC,
            .forecast_rate = r->plan,
            .forecast_likely = NAN,
            .forecast_trusted = r->plan != NOFC,
            .forecast_seasonal = seasonal,
        };
        struct policy_decision d;
        policy_decide(cfg, &st, &in, &d);
        if (d.desired != r->desired || d.reason != r->reason ||
            (r->says && !strstr(d.explain, r->says)))
            fail_msg("row %zu (t=%gs): got %d %s, want %d %s (%s)", i, r->t_s, d.desired,
                     policy_reason_name(d.reason), r->desired, policy_reason_name(r->reason),
                     d.explain);
    }
}

static void run_ztable(const struct policy_config *cfg, const struct ztick *rows, size_t n)
{
    run_stable(cfg, rows, n, true);
}

/* min-replicas 0, the hysteresis rule: down to one replica as usual, to zero
 * only after scale-in-after without a request; back up at the first one,
 * sized for the demand, without waiting for scale-out-after. */
static void test_zero_reactive(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    const struct ztick rows[] = {
        {0, 1, 1, 0, 2, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        /* below for scale-in-after, but a request came at 200 s: not idle long enough */
        {200, 1, 1, 0, 0.1, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {215, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {300, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING,
         "scaling to zero waits for: holding 1"},
        /* an unknown queue is no queue; a known one is not idle (and blocks a scale-in) */
        {400, 1, 1, 0, 0, 2, NOFC, 1, POLICY_HOLD_LATENCY, NULL},
        {415, 1, 1, 0, 0, 0, NOFC, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {714, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {715, 1, 1, 0, 0, -1, NOFC, 0, POLICY_SCALED_IN, "1 -> 0"},
        {730, 0, 0, 0, 0, -1, NOFC, 0, POLICY_HOLD_AT_MIN, NULL},
        {3600, 0, 0, 0, 0, -1, NOFC, 0, POLICY_HOLD_AT_MIN, NULL},
        /* 30 req/s arrive: at once to what they need (30 / 8 -> 4), not after 2 min */
        {3615, 0, 0, 0, 30, -1, NOFC, 4, POLICY_SCALED_OUT, "arrive at 0 replicas"},
        {3630, 4, 0, 0, 30, -1, NOFC, 4, POLICY_HOLD_ABOVE_WAITING, NULL},
    };
    run_ztable(&c, rows, UTIL_ARRAY_LEN(rows));
    /* woken, its replica waits for a GPU node, the clients give up: it is not
     * scaled to zero before it serves (the scale-to-zero that kills the pod
     * the node was coming for); once Ready and still idle, it is */
    const struct ztick coming[] = {
        {0, 0, 0, 0, 5, -1, NOFC, 1, POLICY_SCALED_OUT, NULL},
        {15, 1, 0, 1, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {1215, 1, 0, 1, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING,
         "1 of 1 replicas wait for a GPU or start: not scaling to zero"},
        {1230, 1, 0, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, "are starting"},
        {1245, 1, 1, 0, 0, -1, NOFC, 0, POLICY_SCALED_IN, "1 -> 0"},
    };
    run_ztable(&c, coming, UTIL_ARRAY_LEN(coming));
    /* a queue alone wakes it too (requests waiting at a router) */
    const struct ztick q[] = {
        {0, 0, 0, 0, 0, 3, NOFC, 1, POLICY_SCALED_OUT, "(queue 3)"},
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
    const struct ztick rows[] = {
        {0, 2, 2, 0, 0, -1, 0, 1, POLICY_PREDICTIVE_SCALE_IN, NULL},
        {15, 1, 1, 0, 0, -1, 0, 1, POLICY_HOLD_BELOW_WAITING, "scaling to zero waits"},
        {299, 1, 1, 0, 0, -1, 0, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {300, 1, 1, 0, 0, -1, 0, 0, POLICY_PREDICTIVE_SCALE_IN, "1 -> 0"},
        /* the morning: the plan expects 12 req/s within a cold start, none arrive yet */
        {3600, 0, 0, 0, 0, -1, 12, 2, POLICY_PREDICTIVE_SCALE_OUT, "ahead of load"},
    };
    run_ztable(&c, rows, UTIL_ARRAY_LEN(rows));
    /* a season that expects a little (0.5 req/s: 97 requests within the 3m15s
     * look-ahead) keeps one replica */
    const struct ztick keep[] = {
        {0, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_WITHIN_BAND, NULL},
        {900, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_WITHIN_BAND, NULL},
    };
    run_ztable(&c, keep, UTIL_ARRAY_LEN(keep));
    /* ... not a plan without a season (its residuals outlive the traffic), nor
     * a season that expects under one request within the look-ahead; and
     * neither wakes it */
    const struct ztick go[] = {
        {0, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_WITHIN_BAND, NULL},
        {299, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_WITHIN_BAND, NULL},
        {300, 1, 1, 0, 0, -1, 0.5, 1, POLICY_HOLD_BELOW_WAITING, NULL}, /* the last 2m needed 1 */
        {420, 1, 1, 0, 0, -1, 0.5, 0, POLICY_PREDICTIVE_SCALE_IN, NULL},
        {435, 0, 0, 0, 0, -1, 0.5, 0, POLICY_HOLD_AT_MIN, NULL},
        {3600, 0, 0, 0, 0, -1, 3, 0, POLICY_HOLD_AT_MIN, NULL},
    };
    run_stable(&c, go, UTIL_ARRAY_LEN(go), false);
    const struct ztick few[] = {
        {0, 1, 1, 0, 0, -1, 0.004, 1, POLICY_HOLD_WITHIN_BAND, NULL},
        {420, 1, 1, 0, 0, -1, 0.004, 0, POLICY_PREDICTIVE_SCALE_IN, NULL},
        {3600, 0, 0, 0, 0, -1, 0.004, 0, POLICY_HOLD_AT_MIN, NULL},
    };
    run_ztable(&c, few, UTIL_ARRAY_LEN(few));
    /* hysteresis: a likely peak of 0.01 req/s (2 requests within 3m15s) keeps a
     * replica but does not wake one; 0.02 (4 requests) wakes one */
    const struct ztick band[] = {
        {0, 1, 1, 0, 0, -1, 0.01, 1, POLICY_HOLD_WITHIN_BAND, NULL},
        {900, 1, 1, 0, 0, -1, 0.01, 1, POLICY_HOLD_WITHIN_BAND, NULL},
        {915, 1, 1, 0, 0, -1, 0.001, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {1100, 1, 1, 0, 0, -1, 0.001, 0, POLICY_PREDICTIVE_SCALE_IN, NULL},
        {1115, 0, 0, 0, 0, -1, 0.01, 0, POLICY_HOLD_AT_MIN, NULL},
        {1130, 0, 0, 0, 0, -1, 0.02, 1, POLICY_PREDICTIVE_SCALE_OUT, NULL},
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
    const struct ztick rows[] = {
        {0, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {290, 1, 1, 0, MISSING, -1, NOFC, 1, POLICY_METRICS_UNAVAILABLE, NULL},
        {300, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {599, 1, 1, 0, 0, -1, NOFC, 1, POLICY_HOLD_BELOW_WAITING, NULL},
        {600, 1, 1, 0, 0, -1, NOFC, 0, POLICY_SCALED_IN, NULL},
        {700, 0, 0, 0, MISSING, -1, NOFC, 0, POLICY_METRICS_UNAVAILABLE, NULL},
    };
    run_ztable(&c, rows, UTIL_ARRAY_LEN(rows));
    struct policy_config a;
    base_cfg(&a);
    a.capacity_rps_per_gpu = 0;
    a.capacity_auto = true;
    const struct ztick learn[] = {
        {0, 0, 0, 0, 0, -1, NOFC, 0, POLICY_METRICS_UNAVAILABLE, "no capacity-per-gpu"},
        {15, 0, 0, 0, 5, -1, NOFC, 1, POLICY_SCALED_OUT, "nothing learned yet): 0 -> 1"},
        {30, 1, 0, 0, 5, -1, NOFC, 1, POLICY_METRICS_UNAVAILABLE, NULL},
    };
    run_ztable(&a, learn, UTIL_ARRAY_LEN(learn));
}

/* min-replicas 1 or more and 0 replicas: parked. Nothing scales it, whatever
 * the load or the metrics; scaled up by hand, the rules resume. */
static void test_parked(void **s)
{
    (void)s;
    struct policy_config c;
    base_cfg(&c);
    c.min_replicas = 2;
    const struct ztick rows[] = {
        {0, 0, 0, 0, 50, -1, NOFC, 0, POLICY_HOLD_PARKED, "parked"},
        {600, 0, 0, 0, MISSING, -1, NOFC, 0, POLICY_HOLD_PARKED, "min-replicas 2"},
        {615, 0, 0, 0, 0, 5, 40, 0, POLICY_HOLD_PARKED, NULL},
        {630, 1, 0, 0, MISSING, -1, NOFC, 2, POLICY_CLAMPED, NULL},
        {645, 2, 2, 0, 2, -1, NOFC, 2, POLICY_HOLD_BELOW_WAITING, NULL},
    };
    run_ztable(&c, rows, UTIL_ARRAY_LEN(rows));
    assert_string_equal(policy_reason_name(POLICY_HOLD_PARKED), "Parked");
    assert_false(policy_reason_is_action(POLICY_HOLD_PARKED));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_reactive),
        cmocka_unit_test(test_zero_predictive),
        cmocka_unit_test(test_zero_missing_metrics),
        cmocka_unit_test(test_parked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the plan's cost arithmetic: the cost of a commitment, the
 * exact optimum of the expected cost over scenarios (checked against brute
 * force on random curves), the baseline, prices and their parsing. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "plan/plan.h"

static struct plan_prices prices(double od, double res, double flex)
{
    struct plan_prices p = {.on_demand = od, .reserved = res, .flexible = flex};
    return p;
}

/* Worked by hand: 4 hours at 10, 10, 30, 50 GPUs, R = 20, reserved 0.6, flexible 1.
 * reserved: 20 x 4 x 0.6 = 48; above: 10 + 30 = 40 GPU-h x 1 = 40; idle: 10 + 10 = 20. */
static void test_cost_by_hand(void **state)
{
    (void)state;
    struct plan_prices p = prices(1, 0.6, 1);
    double u[] = {10, 10, 30, 50}, stranded, flexible;
    assert_float_equal(plan_cost(&p, u, 4, 1.0, 20, &stranded, &flexible), 88.0, 1e-9);
    assert_float_equal(stranded, 20.0, 1e-9);
    assert_float_equal(flexible, 40.0, 1e-9);
    /* half-hour steps halve every GPU-hour */
    assert_float_equal(plan_cost(&p, u, 4, 0.5, 20, &stranded, &flexible), 44.0, 1e-9);
    assert_float_equal(stranded, 10.0, 1e-9);
    /* nothing reserved: everything flexible */
    assert_float_equal(plan_cost(&p, u, 4, 1.0, 0, &stranded, &flexible), 100.0, 1e-9);
    assert_float_equal(stranded, 0.0, 1e-9);
    /* NULL outputs are allowed */
    assert_float_equal(plan_cost(&p, u, 4, 1.0, 50, NULL, NULL), 120.0, 1e-9);
}

/* The optimum reserves the level exceeded in a share p_res / p_flex of the hours. */
static void test_optimal_is_the_price_ratio_quantile(void **state)
{
    (void)state;
    double u[100];
    for (int i = 0; i < 100; i++)
        u[i] = i + 0.5; /* 0.5 .. 99.5: R is exceeded in (100 - R) % of the hours */
    const double *curves[] = {u};
    double w = 1, expected;
    struct plan_prices p = prices(1, 0.6, 1);
    /* reserving one more GPU pays while more than 60 % of the hours need it: R = 40 */
    int64_t r = plan_commit_optimal(&p, curves, &w, 1, 100, 1.0, &expected);
    assert_int_equal(r, 40);
    assert_float_equal(expected, plan_cost(&p, u, 100, 1.0, 40, NULL, NULL), 1e-6);
    p.reserved = 0.25;
    assert_int_equal(plan_commit_optimal(&p, curves, &w, 1, 100, 1.0, NULL), 75);
    /* reserved dearer than flexible: reserve nothing */
    p.reserved = 1.5;
    assert_int_equal(plan_commit_optimal(&p, curves, &w, 1, 100, 1.0, NULL), 0);
}

static uint64_t rng = 88172645463325252ull;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Exact over integers: against brute force on random scenarios and weights. */
static void test_optimal_matches_brute_force(void **state)
{
    (void)state;
    enum { N = 48, S = 3 };
    for (int trial = 0; trial < 200; trial++) {
        double c[S][N], w[S], wsum = 0;
        const double *curves[S];
        double base = 5 + 60 * uniform();
        for (int s = 0; s < S; s++) {
            w[s] = 0.1 + uniform();
            wsum += w[s];
            for (int i = 0; i < N; i++)
                c[s][i] = base * (1 + 0.5 * s) * (0.5 + uniform());
            curves[s] = c[s];
        }
        struct plan_prices p = prices(1, 0.2 + 0.7 * uniform(), 0.8 + 0.2 * uniform());
        double step_h = trial % 2 ? 1.0 : 0.25, got_cost;
        int64_t got = plan_commit_optimal(&p, curves, w, S, N, step_h, &got_cost);
        int64_t best = -1;
        double best_cost = INFINITY;
        for (int64_t r = 0; r <= 300; r++) {
            double e = 0;
            for (int s = 0; s < S; s++)
                e += w[s] / wsum * plan_cost(&p, c[s], N, step_h, r, NULL, NULL);
            if (r == 0 || e < best_cost - 1e-9 * (1 + best_cost)) {
                best_cost = e;
                best = r;
            }
        }
        assert_int_equal(got, best);
        assert_float_equal(got_cost, best_cost, 1e-6 * (1 + best_cost));
    }
}

/* Growth scenarios raise the commitment only as far as their weight says. */
static void test_scenario_weights(void **state)
{
    (void)state;
    double low[10], high[10];
    for (int i = 0; i < 10; i++) {
        low[i] = 10;
        high[i] = 30;
    }
    const double *curves[] = {low, high};
    struct plan_prices p = prices(1, 0.6, 1);
    /* one GPU between 10 and 30 is used with probability w_high: worth it above 0.6 */
    double w1[] = {0.5, 0.5}, w2[] = {0.3, 0.7}, w3[] = {1, 0};
    assert_int_equal(plan_commit_optimal(&p, curves, w1, 2, 10, 1.0, NULL), 10);
    assert_int_equal(plan_commit_optimal(&p, curves, w2, 2, 10, 1.0, NULL), 30);
    assert_int_equal(plan_commit_optimal(&p, curves, w3, 2, 10, 1.0, NULL), 10);
}

static void test_baseline(void **state)
{
    (void)state;
    double u[100];
    for (int i = 0; i < 100; i++)
        u[i] = 100 - i; /* hourly: 100 .. 1 */
    /* GPUs held in at least 95 % of the hours: 95 hours have >= 6 */
    assert_int_equal(plan_baseline(u, 100, 3600 * 1000, 0.95), 6);
    assert_int_equal(plan_baseline(u, 100, 3600 * 1000, 1.0), 1);
    assert_int_equal(plan_baseline(u, 100, 3600 * 1000, 0.5), 51);
    /* 15-min steps are averaged per hour first: a 1-step dip does not count */
    double q[8] = {10, 10, 10, 2, 10, 10, 10, 10};
    assert_int_equal(plan_baseline(q, 8, 900 * 1000, 1.0), 8);
    /* fractional GPUs are floored */
    double f[3] = {7.9, 8.5, 9};
    assert_int_equal(plan_baseline(f, 3, 3600 * 1000, 1.0), 7);
}

static void test_prices_parse_and_resolve(void **state)
{
    (void)state;
    struct plan_config c;
    struct plan_prices p;
    char err[256];
    plan_config_init(&c);
    plan_prices_resolve(&c, &p);
    assert_float_equal(p.on_demand, 1, 1e-12);
    assert_float_equal(p.reserved, 0.6, 1e-12); /* 40 % off by default */
    assert_float_equal(p.flexible, 1, 1e-12);
    assert_int_equal(plan_config_set(&c, "price-on-demand", "4", err, sizeof(err)), 0);
    assert_int_equal(plan_config_set(&c, "price-reserved", "2.5", err, sizeof(err)), 0);
    plan_prices_resolve(&c, &p);
    assert_float_equal(p.reserved, 2.5, 1e-12);
    assert_int_equal(plan_config_set(&c, "price-reserved", "30%", err, sizeof(err)), 0);
    plan_prices_resolve(&c, &p);
    assert_float_equal(p.reserved, 2.8, 1e-12);
    /* spot at 65 % off with 10 % interrupted: 0.9 x 1.4 + 0.1 x 4 = 1.66 */
    assert_int_equal(plan_config_set(&c, "price-spot", "65%", err, sizeof(err)), 0);
    plan_prices_resolve(&c, &p);
    assert_float_equal(p.spot, 1.4, 1e-12);
    assert_float_equal(p.flexible, 1.66, 1e-12);
    /* almost always interrupted: almost on-demand (0.01 x 3.99 + 0.99 x 4) */
    assert_int_equal(plan_config_set(&c, "spot-interruption", "0.99", err, sizeof(err)), 0);
    assert_int_equal(plan_config_set(&c, "price-spot", "3.99", err, sizeof(err)), 0);
    plan_prices_resolve(&c, &p);
    assert_float_equal(p.flexible, 3.9999, 1e-12);
    assert_int_equal(plan_config_validate(&c, err, sizeof(err)), 0);
    assert_int_equal(plan_config_set(&c, "price-spot", "none", err, sizeof(err)), 0);
    plan_prices_resolve(&c, &p);
    assert_float_equal(p.spot, 0, 1e-12);
}

/* Bad prices: each refused with the key and what is accepted; cfg unchanged. */
static void test_bad_prices(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value, *msg;
    } rows[] = {
        {"price-on-demand", "0", "out of range"},
        {"price-on-demand", "-3", "out of range"},
        {"price-on-demand", "40%", "not a discount"},
        {"price-on-demand", "cheap", "not a price"},
        {"price-reserved", "0%", "out of range"},
        {"price-reserved", "100%", "out of range"},
        {"price-reserved", "150%", "out of range"},
        {"price-reserved", "", "missing value"},
        {"price-spot", "1e9", "out of range"},
        {"spot-interruption", "1", "out of range"},
        {"spot-interruption", "-5%", "out of range"},
        {"margin", "lots", "not a share"},
        {"baseline", "0", "out of range"},
        {"reserve-share", "120%", "out of range"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct plan_config c, before;
        char err[256] = "";
        plan_config_init(&c);
        before = c;
        assert_int_equal(plan_config_set(&c, rows[i].key, rows[i].value, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, rows[i].key));
        if (!strstr(err, rows[i].msg))
            fail_msg("%s=%s: '%s' lacks '%s'", rows[i].key, rows[i].value, err, rows[i].msg);
        assert_memory_equal(&c, &before, sizeof(c));
    }
    /* cross-field: reserved must be below on-demand */
    struct plan_config c;
    char err[256];
    plan_config_init(&c);
    assert_int_equal(plan_config_set(&c, "price-reserved", "1.2", err, sizeof(err)), 0);
    assert_int_equal(plan_config_validate(&c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "price-reserved"));
    assert_non_null(strstr(err, "never pay"));
    plan_config_init(&c);
    assert_int_equal(plan_config_set(&c, "price-spot", "2", err, sizeof(err)), 0);
    assert_int_equal(plan_config_validate(&c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "price-spot"));
}

static void test_growth_lists(void **state)
{
    (void)state;
    struct plan_config c;
    char err[256];
    plan_config_init(&c);
    assert_int_equal(c.nscenarios, 3);
    assert_int_equal(plan_config_set(&c, "growth", "1.0, 1.2", err, sizeof(err)), 0);
    assert_int_equal(c.nscenarios, 2);
    assert_float_equal(c.scenarios[1].growth, 1.2, 1e-12);
    assert_float_equal(c.scenarios[0].weight, 0.5, 1e-12);
    assert_int_equal(plan_config_set(&c, "growth", "1:3,2:1", err, sizeof(err)), 0);
    assert_float_equal(c.scenarios[0].weight, 0.75, 1e-12);
    assert_float_equal(c.scenarios[1].weight, 0.25, 1e-12);
    static const struct {
        const char *value, *msg;
    } bad[] = {
        {"", "missing value"},
        {"1.0,,2", "not a list"},
        {"1.0,x", "not a number"},
        {"0", "out of range"},
        {"1,1.0", "listed twice"},
        {"1:0.5,2", "to every scenario or to none"},
        {"1:0", "must be a number above 0"},
        {"1,2,3,4,5,6,7,8,9", "at most 8"},
        {"1.5e999", "not a number"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct plan_config before = c;
        assert_int_equal(plan_config_set(&c, "growth", bad[i].value, err, sizeof(err)),
                         -EINVAL);
        if (!strstr(err, bad[i].msg) || !strstr(err, "growth"))
            fail_msg("growth=%s: '%s' lacks '%s'", bad[i].value, err, bad[i].msg);
        assert_memory_equal(&c, &before, sizeof(c));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_by_hand),
        cmocka_unit_test(test_optimal_is_the_price_ratio_quantile),
        cmocka_unit_test(test_optimal_matches_brute_force),
        cmocka_unit_test(test_scenario_weights),
        cmocka_unit_test(test_baseline),
        cmocka_unit_test(test_prices_parse_and_resolve),
        cmocka_unit_test(test_bad_prices),
        cmocka_unit_test(test_growth_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Simulator tests at the edges of its settings: a cold start of a fraction of
 * a second, a decision interval longer than every window, an SLA of the
 * latency the simulator gives requests no replica serves. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "sim/sim-int.h"
#include "sim/sim.h"
#include "sim/test-sim.h"
#include "trace/trace.h"
#include "util/util.h"

/* A cold start of a fraction of a second more: the oracle asks a whole second
 * earlier and still meets the SLA (it planned with the cold start rounded
 * down and missed 2 intervals of 30). */
static void test_oracle_fractional_cold_start(void **st)
{
    (void)st;
    static double buf[1800];
    struct trace tr = step_trace(buf, 1800, 900, 30, 200);
    struct sim_config c;
    base_cfg(&c);
    c.policies = 1u << SIM_ORACLE;
    c.interval_ms = 1000;
    c.policy.cold_start_ms = 180500;
    char err[256];
    struct scale_log log = {.only = SIM_ORACLE};
    struct sim_hooks hooks = {on_scale, &log};
    struct sim_result *r = NULL;
    assert_int_equal(sim_config_validate(&c, err, sizeof(err)), 0);
    assert_int_equal(sim_run(&c, &tr, &hooks, &r, err, sizeof(err)), 0);
    assert_true(log.n >= 1);
    assert_int_equal(log.t_ms[0], S(900 - 181));
    assert_int_equal(r->pol[0].sla_intervals, 0);
    sim_result_free(r);
}

/* A decision interval longer than the rate window: the recent rate is the
 * tick's, read within the arrivals kept (they were kept for the longest
 * window but the tick, and a 10-minute tick on a steady 10 req/s read 2.4). */
static void test_long_tick_reads_its_own_rate(void **st)
{
    (void)st;
    static double buf[4 * 3600];
    size_t n = sizeof(buf) / sizeof(buf[0]);
    for (size_t i = 0; i < n; i++)
        buf[i] = 10;
    struct trace tr = {.t0_ms = 0, .dt_ms = 1000, .n = n, .requests = buf};
    struct sim_config c;
    base_cfg(&c);
    c.policy.decision_interval_ms = S(600);
    c.policies = 1u << SIM_PREDICTIVE;
    char err[256];
    assert_int_equal(sim_config_validate(&c, err, sizeof(err)), 0);
    struct sim_result *r = NULL;
    assert_int_equal(sim_run(&c, &tr, NULL, &r, err, sizeof(err)), 0);
    size_t seen = 0;
    for (size_t i = 0; i < r->pol[0].npoints; i++) {
        double f = r->pol[0].points[i].forecast_rps;
        if (!isfinite(f))
            continue;
        seen++;
        if (fabs(f - 10) > 0.5)
            fail_msg("t %lld s: forecast %.3f req/s, want 10", (long long)r->pol[0].points[i].t_s,
                     f);
    }
    assert_true(seen > 100);
    sim_result_free(r);
}

/* An SLA of 1h: the latency given to requests no replica serves would be
 * within it (serving none scored 0 % over the SLA); just under is run. */
static void test_sla_under_the_latency_cap(void **st)
{
    (void)st;
    struct sim_config c;
    base_cfg(&c);
    char err[256];
    c.sla_ms = S(3600);
    assert_int_equal(sim_config_validate(&c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "sla: must be under 1h"));
    c.sla_ms = 0;
    c.policy.p99_latency_target_ms = S(3600);
    assert_int_equal(sim_config_validate(&c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "p99-latency-target: must be under 1h"));
    c.sla_ms = S(3599);
    assert_int_equal(sim_config_validate(&c, err, sizeof(err)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oracle_fractional_cold_start),
        cmocka_unit_test(test_long_tick_reads_its_own_rate),
        cmocka_unit_test(test_sla_under_the_latency_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

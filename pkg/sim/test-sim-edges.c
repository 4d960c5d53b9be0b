/* SPDX-License-Identifier: Apache-2.0 */
/* Simulator tests at the edges of its settings: a cold start of a fraction of
 * a second, a decision interval longer than every window, an SLA of the
 * latency the simulator gives requests no replica serves, a chart of a
 * run of a few intervals, GPU-hours of a run of minutes, a policy key the
 * simulator cannot honour. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The chart of a 4-minute run: each interval drawn over its whole span (a
 * missed one was a 1.5 px tick at its start, and every line stopped at the
 * last interval's start), GPU-hours to a tenth as in the table (0.2 read
 * "0"). W 1280, LEFT 84, RIGHT 36: the plot spans x 84 to 1244. */
static void test_svg_short_run(void **st)
{
    (void)st;
    static double buf[240];
    struct trace tr = step_trace(buf, 240, 0, 100, 100);
    struct sim_config c;
    base_cfg(&c);
    c.policy.max_replicas = 1; /* 100 req/s on one replica of 10: every interval missed */
    c.policies = 1u << SIM_PREDICTIVE;
    char err[256];
    struct sim_result *r = NULL;
    assert_int_equal(sim_run(&c, &tr, NULL, &r, err, sizeof(err)), 0);
    assert_int_equal(r->pol[0].sla_intervals, 4);
    struct sim_report_info info = {"four minutes", 1, 240, 0, 0};
    struct util_buf b = {0};
    sim_report_svg(&b, &c, &info, r);
    /* the missed strip of the policy's row: every column */
    size_t ticks = 0;
    for (const char *p = b.data; (p = strstr(p, "width=\"1.5\" height=\"12\"")) != NULL; p++)
        ticks++;
    if (ticks < 1150)
        fail_msg("%zu columns of missed intervals, want the whole strip", ticks);
    /* every line reaches the right edge */
    size_t lines = 0;
    for (const char *p = b.data; (p = strstr(p, "<polyline")) != NULL; p++) {
        const char *q = strstr(p, "points=\"") + 8, *end = strchr(q, '"');
        const char *last = end - 1;
        while (last > q && last[-1] != ' ')
            last--;
        while (last > q && *last == ' ')
            last--;
        const char *sp = last;
        while (sp > q && sp[-1] != ' ')
            sp--;
        int x = (int)strtol(sp, NULL, 10);
        if (x < 1240)
            fail_msg("a line ends at x %d, want the plot's right edge (1243)", x);
        lines++;
    }
    assert_true(lines >= 4);
    char want[32];
    snprintf(want, sizeof(want), ">%.1f<", r->pol[0].gpu_hours);
    assert_true(r->pol[0].gpu_hours < 1);
    assert_non_null(strstr(b.data, want));
    util_buf_free(&b);
    sim_result_free(r);
}

/* A run of two minutes on one GPU holds 1/30 of a GPU-hour: the table, its
 * oracle footer and the chart show 0.0333, not 0.0 (and "GPU-hours / 0.0"). */
static void test_small_gpu_hours_shown(void **st)
{
    (void)st;
    static double buf[120];
    struct trace tr = step_trace(buf, 120, 0, 5, 5);
    struct sim_config c;
    base_cfg(&c);
    c.initial_replicas = 1;
    c.policies = 1u << SIM_STATIC_PEAK | 1u << SIM_ORACLE;
    char err[256];
    struct sim_result *r = NULL;
    assert_int_equal(sim_config_validate(&c, err, sizeof(err)), 0);
    assert_int_equal(sim_run(&c, &tr, NULL, &r, err, sizeof(err)), 0);
    assert_true(r->oracle_gpu_hours > 0.03 && r->oracle_gpu_hours < 0.04);
    struct sim_report_info info = {"two minutes", 1, 120, 0, 0};
    struct util_buf b = {0};
    sim_report_table(&b, &c, &info, r);
    assert_non_null(strstr(b.data, "GPU-hours / 0.0333,"));
    assert_non_null(strstr(b.data, "    0.0333 "));
    assert_null(strstr(b.data, " 0.0 "));
    util_buf_free(&b);
    sim_report_svg(&b, &c, &info, r);
    assert_non_null(strstr(b.data, ">0.0333<"));
    util_buf_free(&b);
    sim_result_free(r);
    assert_int_equal(sim_hour_digits(6742.63), 1);
    assert_int_equal(sim_hour_digits(0.05), 1);
    assert_int_equal(sim_hour_digits(0.0004), 6);
    assert_int_equal(sim_hour_digits(0), 1);
}

/* `predictive` is a policy key the simulator cannot honour (the policy list
 * chooses the rows): refused, naming the reactive row, where it was ignored
 * and `predictive: false` replayed the forecaster all the same. */
static void test_predictive_key_refused(void **st)
{
    (void)st;
    struct sim_config c;
    base_cfg(&c);
    char err[256] = "";
    assert_int_equal(sim_config_set(&c, "predictive", "false", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "predictive: not a simulator key"));
    assert_non_null(strstr(err, "reactive row"));
    assert_int_equal(sim_config_set(&c, "scale-out-after", "1m", err, sizeof(err)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oracle_fractional_cold_start),
        cmocka_unit_test(test_long_tick_reads_its_own_rate),
        cmocka_unit_test(test_sla_under_the_latency_cap),
        cmocka_unit_test(test_svg_short_run),
        cmocka_unit_test(test_small_gpu_hours_shown),
        cmocka_unit_test(test_predictive_key_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

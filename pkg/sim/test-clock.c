/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the reports' time labels (sim/clock): calendar dates in UTC for a
 * trace on UNIX time (as `run --record` writes), "day N hh:mm" for a trace on
 * a relative clock, in the labels and in a rendered table and chart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "sim/sim-int.h"
#include "trace/trace.h"
#include "util/util.h"

static void test_labels(void **st)
{
    (void)st;
    char s[64];
    /* 1700000000 = 2023-11-14T22:13:20Z */
    assert_true(sim_clock_absolute(1700000000.0));
    assert_true(sim_clock_absolute(946684800.0));
    assert_false(sim_clock_absolute(946684799.0));
    assert_false(sim_clock_absolute(0));
    assert_false(sim_clock_absolute(5 * 86400.0));
    sim_clock_time(1700000000.0, true, s, sizeof(s));
    assert_string_equal(s, "2023-11-14 22:13 UTC");
    sim_clock_day(1700000000.0, true, s, sizeof(s));
    assert_string_equal(s, "2023-11-14");
    sim_clock_day(1700006400.0, true, s, sizeof(s)); /* the next midnight */
    assert_string_equal(s, "2023-11-15");
    sim_clock_time(951868800.0 - 60, true, s, sizeof(s)); /* the end of leap day 2000 */
    assert_string_equal(s, "2000-02-29 23:59 UTC");
    /* relative clocks keep day N, t = 0 as midnight */
    sim_clock_time(2 * 86400 + 6 * 3600 + 30 * 60 + 59.9, false, s, sizeof(s));
    assert_string_equal(s, "day 2 06:30");
    sim_clock_day(3 * 86400.0, false, s, sizeof(s));
    assert_string_equal(s, "day 3");
    sim_clock_time(-1, false, s, sizeof(s));
    assert_string_equal(s, "day -1 23:59");
    /* the same UNIX time read as relative is what the reports said before */
    sim_clock_time(1700000000.0, false, s, sizeof(s));
    assert_string_equal(s, "day 19675 22:13");
}

/* A one-day trace at t0 (1 s buckets), run and rendered. */
static void render(double t0_s, struct util_buf *table, struct util_buf *svg)
{
    enum { N = 2 * 86400 };
    static double req[N];
    for (size_t i = 0; i < N; i++)
        req[i] = 20 + 10 * (double)(i % 3600) / 3600;
    struct trace tr = {.t0_ms = (int64_t)(t0_s * 1000), .dt_ms = 1000, .n = N, .requests = req};
    struct sim_config c;
    char err[256];
    sim_config_init(&c);
    static const char *const kv[][2] = {
        {"capacity-per-gpu", "10"}, {"gpus-per-replica", "1"}, {"max-replicas", "20"},
        {"sla", "5s"},              {"service-time", "1s"},    {"policy", "reactive"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(kv); i++)
        if (sim_config_set(&c, kv[i][0], kv[i][1], err, sizeof(err)) != 0)
            fail_msg("%s: %s", kv[i][0], err);
    assert_int_equal(sim_config_validate(&c, err, sizeof(err)), 0);
    struct sim_result *r = NULL;
    if (sim_run(&c, &tr, NULL, &r, err, sizeof(err)) != 0)
        fail_msg("sim_run: %s", err);
    struct sim_report_info info = {"trace", 1, N, 0, 0};
    sim_report_table(table, &c, &info, r);
    sim_report_svg(svg, &c, &info, r);
    sim_result_free(r);
}

static void test_reports_on_unix_time(void **st)
{
    (void)st;
    struct util_buf t = {0}, g = {0};
    render(1700000000.0, &t, &g); /* 2023-11-14T22:13:20Z, as --record writes */
    assert_non_null(strstr(t.data, "scored 2023-11-14 22:13 UTC -> 2023-11-16 22:13 UTC"));
    assert_null(strstr(t.data, "day 1967"));
    assert_non_null(strstr(g.data, ">2023-11-15</text>"));
    assert_non_null(strstr(g.data, ">2023-11-16</text>"));
    assert_null(strstr(g.data, "day 1967"));
    /* the footnote says which clock (it said "t = 0 taken as midnight" on UTC dates) */
    assert_non_null(strstr(g.data, "time in UTC (the trace's UNIX times)"));
    assert_null(strstr(g.data, "taken as midnight"));
    util_buf_free(&t);
    util_buf_free(&g);
}

static void test_reports_on_relative_time(void **st)
{
    (void)st;
    struct util_buf t = {0}, g = {0};
    render(0, &t, &g);
    assert_non_null(strstr(t.data, "scored day 0 00:00 -> day 2 00:00"));
    assert_non_null(strstr(g.data, ">day 1</text>"));
    assert_null(strstr(g.data, "UTC"));
    assert_null(strstr(g.data, ">1970-"));
    assert_non_null(strstr(g.data, "time on the trace's clock (t = 0 taken as midnight)"));
    util_buf_free(&t);
    util_buf_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_reports_on_unix_time),
        cmocka_unit_test(test_reports_on_relative_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

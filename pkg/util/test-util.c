/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for util: strict parsing, durations, buffers, log line shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/util.h"

static void test_durations(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int rc;
        int64_t ms;
    } cases[] = {
        {"2m", 0, 120000},      {"90s", 0, 90000},   {"1h30m", 0, 5400000},
        {"250ms", 0, 250},      {"1.5h", 0, 5400000}, {"120", 0, 120000},
        {"0", 0, 0},            {"1d", 0, 86400000}, {"", -22, 0},
        {"-5s", -22, 0},        {"5x", -22, 0},      {"m", -22, 0},
        {"nan", -22, 0},        {"inf", -22, 0},     {"1e-400s", -22, 0},
        {"2m ", -22, 0},        {" 2m", -22, 0},     {"1e400x", -22, 0},
        {"100000hx", -22, 0},   {"-1e400", -22, 0},
        {"365d", 0, UTIL_DURATION_MAX_MS},
        /* well formed but too long: one past the maximum, for the caller's
         * range check to call out of range (never "not a duration") */
        {"365d1ms", 0, UTIL_DURATION_MAX_MS + 1},
        {"400d", 0, UTIL_DURATION_MAX_MS + 1},      {"100000h", 0, UTIL_DURATION_MAX_MS + 1},
        {"99999999999999999999h", 0, UTIL_DURATION_MAX_MS + 1},
        {"99999999999999999999", 0, UTIL_DURATION_MAX_MS + 1},
        {"1000000000000000000000000000000000000000000000000000000000000000000000000000000000"
         "0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
         "0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
         "0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
         "00000000000000000000000000000000000000000000000000s", 0, UTIL_DURATION_MAX_MS + 1},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        int64_t ms = -1;
        int rc = util_parse_duration_ms(cases[i].in, &ms);
        if (rc != cases[i].rc)
            fail_msg("duration '%s': rc %d, want %d", cases[i].in, rc, cases[i].rc);
        if (rc == 0)
            assert_int_equal(ms, cases[i].ms);
    }
    char buf[32];
    util_format_duration(5400000, buf, sizeof(buf));
    assert_string_equal(buf, "1h30m");
    util_format_duration(120000, buf, sizeof(buf));
    assert_string_equal(buf, "2m");
    util_format_duration(0, buf, sizeof(buf));
    assert_string_equal(buf, "0s");
    /* elapsed clocks are seldom whole seconds: under a minute to 3 digits,
     * from a minute on to a tenth in h/m/s (1215034 ms was "1.22e+03s") */
    static const struct {
        int64_t ms;
        const char *want;
    } fr[] = {{250, "250ms"},      {1500, "1.5s"},          {59999, "60s"},
              {1215034, "20m15s"}, {3599500, "59m59.5s"},   {3600500, "1h0.5s"},
              {60040, "1m"},       {86399950, "24h"},       {90061234, "25h1m1.2s"}};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(fr); i++) {
        util_format_duration(fr[i].ms, buf, sizeof(buf));
        if (strcmp(buf, fr[i].want) != 0)
            fail_msg("%lld ms: \"%s\", want \"%s\"", (long long)fr[i].ms, buf, fr[i].want);
    }
}

/* Like Go's time.ParseDuration: each number is decimal digits with at most
 * one point, then a unit; no sign, exponent or hex (strtod reads all three). */
static void test_durations_decimal_only(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "0x3C", "0x3Cs", "0x1p4s", "1e3s", "1e3", "1E3s", "1e400", "1e400s", "1e300",
        "+5s",  "5s+",   ".",      "..5s", "1.2.3s", "1m.s", "0x",  "1s0x1s", "\n5s",
        "\v5",  "\f5s",  "\r5s",   "5s\n", "inf",   "infs", "nans", "5S",  "1h-1m",
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        int64_t ms = -1;
        int rc = util_parse_duration_ms(bad[i], &ms);
        if (rc != -22)
            fail_msg("duration '%s': rc %d (%lld ms), want -22", bad[i], rc, (long long)ms);
    }
    static const struct {
        const char *in;
        int64_t ms;
    } good[] = {
        {".5s", 500}, {"5.s", 5000}, {"1.5", 1500}, {"0", 0},          {"0s", 0},
        {"1h1h", 7200000}, {"1m30s500ms", 90500}, {"007s", 7000}, {"0.0001s", 0},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(good); i++) {
        int64_t ms = -1;
        int rc = util_parse_duration_ms(good[i].in, &ms);
        if (rc != 0 || ms != good[i].ms)
            fail_msg("duration '%s': rc %d, %lld ms; want %lld", good[i].in, rc, (long long)ms,
                     (long long)good[i].ms);
    }
}

/* strtod and strtoll skip any leading white space, not only ' ' and '\t'. */
static void test_numbers_leading_space(void **state)
{
    (void)state;
    static const char *const bad[] = {" 1", "\t1", "\n1", "\r1", "\v1", "\f1", "1 ", "1\n"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        double d;
        int64_t v;
        if (util_parse_double(bad[i], &d) != -22)
            fail_msg("util_parse_double(%zu) accepted", i);
        if (util_parse_int64(bad[i], &v) != -22)
            fail_msg("util_parse_int64(%zu) accepted", i);
    }
}

static void test_numbers(void **state)
{
    (void)state;
    double d;
    int64_t i;
    assert_int_equal(util_parse_double("0.8", &d), 0);
    assert_true(d == 0.8);
    assert_int_equal(util_parse_double("1e3", &d), 0);
    assert_true(d == 1000.0);
    /* an underflow is the nearest double (subnormal, or 0), as Go's ParseFloat
     * and Prometheus read it (a subnormal sample value was refused) */
    assert_int_equal(util_parse_double("1e-310", &d), 0);
    assert_true(d == 1e-310 && d > 0);
    assert_int_equal(util_parse_double("-4.9e-324", &d), 0);
    assert_true(d < 0);
    assert_int_equal(util_parse_double("1e-400", &d), 0);
    assert_true(d == 0);
    assert_int_equal(util_parse_double("1e309", &d), -22);
    assert_int_equal(util_parse_double("-1e309", &d), -22);
    assert_int_equal(util_parse_double("nan", &d), -22);
    assert_int_equal(util_parse_double("inf", &d), -22);
    assert_int_equal(util_parse_double("0x10", &d), -22);
    assert_int_equal(util_parse_double("3abc", &d), -22);
    assert_int_equal(util_parse_double("", &d), -22);
    assert_int_equal(util_parse_int64("42", &i), 0);
    assert_int_equal(i, 42);
    assert_int_equal(util_parse_int64("-7", &i), 0);
    assert_int_equal(i, -7);
    assert_int_equal(util_parse_int64("4.2", &i), -22);
    assert_int_equal(util_parse_int64("99999999999999999999", &i), -22);
    bool b;
    assert_int_equal(util_parse_bool("TRUE", &b), 0);
    assert_true(b);
    assert_int_equal(util_parse_bool("off", &b), 0);
    assert_false(b);
    assert_int_equal(util_parse_bool("maybe", &b), -22);
}

/* The one parser of ranged key values: each kind, its bounds, its messages,
 * and nothing stored on any error. */
static void test_ranged(void **state)
{
    (void)state;
    char err[160];
    const struct util_range frac = {0, 1, true, "fraction", 0};
    double d = -1;
    assert_int_equal(util_parse_ranged("t", UTIL_NUMBER, &frac, "0.5", &d, err, sizeof(err)), 0);
    assert_true(d == 0.5);
    assert_int_equal(util_parse_ranged("t", UTIL_NUMBER, &frac, "1", &d, err, sizeof(err)), 0);
    assert_true(d == 1.0);
    d = -1;
    assert_int_equal(util_parse_ranged("t", UTIL_NUMBER, &frac, "0", &d, err, sizeof(err)), -22);
    assert_string_equal(err, "t: 0 is out of range (above 0 to 1, fraction)");
    assert_int_equal(util_parse_ranged("t", UTIL_NUMBER, &frac, "1.01", &d, err, sizeof(err)),
                     -22);
    assert_int_equal(util_parse_ranged("t", UTIL_NUMBER, &frac, "half", &d, err, sizeof(err)),
                     -22);
    assert_string_equal(err, "t: 'half' is not a number (fraction)");
    assert_int_equal(util_parse_ranged("t", UTIL_NUMBER, &frac, NULL, &d, err, sizeof(err)), -22);
    assert_true(d == -1);

    const struct util_range reps = {1, 100, false, NULL, 0};
    int32_t n = -1;
    assert_int_equal(util_parse_ranged("n", UTIL_WHOLE, &reps, "100", &n, err, sizeof(err)), 0);
    assert_int_equal(n, 100);
    assert_int_equal(util_parse_ranged("n", UTIL_WHOLE, &reps, "2.5", &n, err, sizeof(err)), -22);
    assert_string_equal(err, "n: '2.5' is not a whole number");
    assert_int_equal(util_parse_ranged("n", UTIL_WHOLE, &reps, "0", &n, err, sizeof(err)), -22);
    assert_string_equal(err, "n: 0 is out of range (1 to 100)");
    assert_int_equal(n, 100);

    const struct util_range dur = {1000, 3600e3, false, NULL, 0};
    int64_t ms = -1;
    assert_int_equal(util_parse_ranged("d", UTIL_DURATION, &dur, "90s", &ms, err, sizeof(err)), 0);
    assert_int_equal(ms, 90000);
    assert_int_equal(util_parse_ranged("d", UTIL_DURATION, &dur, "100000h", &ms, err,
                                       sizeof(err)),
                     -22);
    assert_string_equal(err, "d: 100000h is out of range (1s to 1h)");
    assert_int_equal(util_parse_ranged("d", UTIL_DURATION, &dur, "soon", &ms, err, sizeof(err)),
                     -22);
    assert_string_equal(err, "d: 'soon' is not a duration (like 90s, 2m, 1h30m)");
    assert_int_equal(ms, 90000);
    /* nonzero, but 0 once rounded to ms: refused, not taken as 0 */
    const struct util_range any = {0, 3600e3, false, NULL, 0};
    assert_int_equal(util_parse_ranged("d", UTIL_DURATION, &any, "0.4ms", &ms, err, sizeof(err)),
                     -22);
    assert_string_equal(err, "d: 0.4ms is shorter than 1ms (write 0 for none)");
    assert_int_equal(util_parse_ranged("d", UTIL_DURATION, &any, "0s0ms", &ms, err, sizeof(err)),
                     0);
    assert_int_equal(ms, 0);
    /* a step: whole minutes */
    const struct util_range minutes = {0, 3600e3, false, NULL, 60e3};
    assert_int_equal(util_parse_ranged("d", UTIL_DURATION, &minutes, "59m30s", &ms, err,
                                       sizeof(err)),
                     -22);
    assert_string_equal(err, "d: 59m30s is not a whole number of 1m");
    assert_int_equal(util_parse_ranged("d", UTIL_DURATION, &minutes, "0.5h", &ms, err, sizeof(err)),
                     0);
    assert_int_equal(ms, 1800000);
    /* no room for a message is not an error of its own */
    assert_int_equal(util_parse_ranged("d", UTIL_DURATION, &dur, "2h", &ms, err, 0), -22);
}

/* Two tables of different entry shapes, each named by its first member. */
struct entry_small {
    const char *name;
    char tag;
};
struct entry_large {
    const char *path;
    double values[5];
    int kind;
};

static void test_table_find(void **state)
{
    (void)state;
    static const struct entry_small small[] = {{"alpha", 'a'}, {"beta", 'b'}, {"gamma", 'g'}};
    static const struct entry_large large[] = {{"a.b", {1}, 1}, {"a.c", {2}, 2}};
    const struct entry_small *s =
        util_table_find(small, UTIL_ARRAY_LEN(small), sizeof(small[0]), "gamma");
    assert_ptr_equal(s, &small[2]);
    assert_int_equal(s->tag, 'g');
    s = util_table_find(small, UTIL_ARRAY_LEN(small), sizeof(small[0]), "alpha");
    assert_ptr_equal(s, &small[0]);
    assert_null(util_table_find(small, UTIL_ARRAY_LEN(small), sizeof(small[0]), "gam"));
    assert_null(util_table_find(small, UTIL_ARRAY_LEN(small), sizeof(small[0]), ""));
    assert_null(util_table_find(small, 0, sizeof(small[0]), "alpha"));
    const struct entry_large *l =
        util_table_find(large, UTIL_ARRAY_LEN(large), sizeof(large[0]), "a.c");
    assert_ptr_equal(l, &large[1]);
    assert_int_equal(l->kind, 2);
    assert_null(util_table_find(large, UTIL_ARRAY_LEN(large), sizeof(large[0]), "a"));
    static const char *const names[] = {"start", "duration"};
    const char *const *n = util_table_find(names, UTIL_ARRAY_LEN(names), sizeof(names[0]),
                                           "duration");
    assert_ptr_equal(n, &names[1]);
    assert_null(util_table_find(names, UTIL_ARRAY_LEN(names), sizeof(names[0]), "warmup"));
}

static void test_buf(void **state)
{
    (void)state;
    struct util_buf b = {0};
    util_buf_puts(&b, "a");
    util_buf_printf(&b, "%d", 12345);
    util_buf_json_str(&b, "q\"\n\x01");
    assert_string_equal(b.data, "a12345\"q\\\"\\n\\u0001\"");
    for (int k = 0; k < 1000; k++)
        util_buf_puts(&b, "xxxxxxxxxx");
    assert_int_equal(b.len, 19 + 10000);
    char *s = util_buf_steal(&b);
    assert_null(b.data);
    xfree(s);
    util_buf_free(&b);
    util_buf_put_xml(&b, "<a href=\"x\">R&D</a>\x01\t\xc3\xa9");
    assert_string_equal(b.data, "&lt;a href=&quot;x&quot;&gt;R&amp;D&lt;/a&gt;\xc3\xa9");
    util_buf_free(&b);
    /* invalid UTF-8 (a trace file's name) is U+FFFD: the SVG stays XML */
    util_buf_put_xml(&b, "bad\xff\x01name \xc3 \xe2\x82\xac");
    assert_string_equal(b.data, "bad\xef\xbf\xbdname \xef\xbf\xbd \xe2\x82\xac");
    util_buf_free(&b);
}

static void test_log_one_line(void **state)
{
    (void)state;
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    util_log_set_stream(f);
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_INFO);
    LOGW_INFO("policy", "ml", "llama", "scaled out\nto %d", 4);
    LOG_DEBUG("x", "hidden");
    util_log_setup(UTIL_LOG_JSON, UTIL_LOG_INFO);
    LOGW_WARN("policy", "ml", "llama", "a \"quoted\" word");
    fflush(f);
    util_log_set_stream(NULL);
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_INFO);
    fclose(f);
    int lines = 0;
    for (size_t k = 0; k < len; k++)
        lines += mem[k] == '\n';
    assert_int_equal(lines, 2);
    assert_non_null(strstr(mem, "namespace=ml deployment=llama msg=\"scaled out\\nto 4\""));
    assert_non_null(strstr(mem, "\"namespace\":\"ml\",\"deployment\":\"llama\""));
    assert_null(strstr(mem, "hidden"));
    free(mem);
}

/* Invalid UTF-8 (from outside input cut to a length) never reaches JSON:
 * the JSON writer replaces it with U+FFFD, scrub with '?'; valid text of
 * every length passes untouched. */
static void test_utf8(void **state)
{
    (void)state;
    assert_int_equal(util_utf8_seq("a"), 1);
    assert_int_equal(util_utf8_seq("\xc3\xa9"), 2);         /* é */
    assert_int_equal(util_utf8_seq("\xe2\x82\xac"), 3);     /* € */
    assert_int_equal(util_utf8_seq("\xf0\x9f\x98\x80"), 4); /* an emoji */
    assert_int_equal(util_utf8_seq("\xc3"), 0);             /* cut short */
    assert_int_equal(util_utf8_seq("\xa9"), 0);             /* a stray continuation */
    assert_int_equal(util_utf8_seq("\xc0\xaf"), 0);         /* overlong */
    assert_int_equal(util_utf8_seq("\xe0\x80\xaf"), 0);     /* overlong */
    assert_int_equal(util_utf8_seq("\xed\xa0\x80"), 0);     /* a surrogate */
    assert_int_equal(util_utf8_seq("\xf4\x90\x80\x80"), 0); /* past U+10FFFF */
    assert_int_equal(util_utf8_seq("\xf5\x80\x80\x80"), 0);
    char s[] = "x\xc3y\xe2\x82 \xc3\xa9\xf0\x9f\x98\x80";
    assert_int_equal(util_utf8_scrub(s), 3);
    assert_string_equal(s, "x?y?? \xc3\xa9\xf0\x9f\x98\x80");
    struct util_buf b = {0};
    util_buf_json_str(&b, "caf\xc3\xa9 \xc3");
    assert_string_equal(b.data, "\"caf\xc3\xa9 \\ufffd\"");
    util_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_durations_decimal_only),
        cmocka_unit_test(test_numbers_leading_space),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_ranged),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_table_find),
        cmocka_unit_test(test_log_one_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for label selectors (apimachinery labels.Parse grammar and
 * Requirement.Matches semantics), quantity formatting and metric names, as
 * tables of input and expected outcome. */
#include "extmetrics/extmetrics.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* labels used for matching: app=llama, tier=gpu, deployment=llama-70b, n=5,
 * example.com/team=ml, empty= */
static const struct extmetrics_label L[] = {
    {"app", "llama"}, {"tier", "gpu"}, {"deployment", "llama-70b"},
    {"n", "5"},       {"example.com/team", "ml"}, {"empty", ""},
};

struct sel_case {
    const char *sel;
    int parse;   /* 0 or -EINVAL */
    bool match;  /* against L, when it parses */
};

static const struct sel_case cases[] = {
    {"", 0, true},
    {"   ", 0, true},
    {"app=llama", 0, true},
    {"app==llama", 0, true},
    {"app = llama", 0, true},
    {"app=mistral", 0, false},
    {"app!=mistral", 0, true},
    {"app!=llama", 0, false},
    {"missing!=x", 0, true},            /* != matches an absent key */
    {"app", 0, true},                   /* exists */
    {"missing", 0, false},
    {"!missing", 0, true},
    {"!app", 0, false},
    {"app in (llama,mistral)", 0, true},
    {"app in (mistral)", 0, false},
    {"missing in (a)", 0, false},
    {"app notin (mistral,qwen)", 0, true},
    {"app notin (llama)", 0, false},
    {"missing notin (a)", 0, true},     /* notin matches an absent key */
    {"app=llama,tier=gpu", 0, true},
    {"app=llama,tier=cpu", 0, false},
    {"deployment=llama-70b", 0, true},
    {"example.com/team=ml", 0, true},
    {"n>4", 0, true},
    {"n>5", 0, false},
    {"n<6", 0, true},
    {"app>1", 0, false},                /* non-integer label value never matches */
    {"empty=", 0, true},                /* empty value */
    {"empty in ()", 0, true},           /* "()" is the set {""} */
    {"empty in (,x)", 0, true},
    {"app in (x,,llama)", 0, true},
    {"app in (x,,,llama)", 0, true},
    {"app in (x,,)", -EINVAL, false},   /* apimachinery takes ",," as one token, then ')' */
    {"app in (,,)", -EINVAL, false},
    {"in in (in)", 0, false},           /* keywords as key and value */
    {"app in(llama)", 0, true},
    {"tier notin(cpu),app", 0, true},
    /* errors */
    {"app=", 0, false},                 /* app has a value */
    {"=llama", -EINVAL, false},
    {"app==", 0, false},
    {"app=a b", -EINVAL, false},
    {"app=llama,", -EINVAL, false},
    {",app", -EINVAL, false},
    {"app in llama", -EINVAL, false},
    {"app in (llama", -EINVAL, false},
    {"app notin", -EINVAL, false},
    {"!app=llama", -EINVAL, false},
    {"app=-bad", -EINVAL, false},       /* values start alphanumeric */
    {"app=bad-", -EINVAL, false},
    {"-app=x", -EINVAL, false},
    {"a/b/c=x", -EINVAL, false},
    {"Example.com/team=ml", -EINVAL, false}, /* prefix must be lowercase */
    {"app=l!ama", -EINVAL, false},
    {"n>x", -EINVAL, false},
    {"n>1.5", -EINVAL, false},
    {"app===x", -EINVAL, false},
    {"(app)", -EINVAL, false},
    {"app=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", -EINVAL, false}, /* 64 */
    {"app=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0, false},       /* 63 */
};

static void test_selector_table(void **state)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        struct extmetrics_selector *sel = NULL;
        struct extmetrics_parse_error err;
        int rc = extmetrics_selector_parse(cases[i].sel, &sel, &err);
        if (rc != cases[i].parse)
            fail_msg("selector \"%s\": parse returned %d, want %d (%s)", cases[i].sel, rc,
                     cases[i].parse, err.message);
        if (rc == 0) {
            bool m = extmetrics_selector_matches(sel, L, UTIL_ARRAY_LEN(L));
            if (m != cases[i].match)
                fail_msg("selector \"%s\": match %d, want %d", cases[i].sel, m, cases[i].match);
            extmetrics_selector_free(sel);
        } else {
            assert_null(sel);
            assert_true(err.message[0] != '\0');
        }
    }
}

static void test_selector_error_offset(void **state)
{
    struct extmetrics_selector *sel;
    struct extmetrics_parse_error err;
    assert_int_equal(extmetrics_selector_parse("app=llama,tier in x", &sel, &err), -EINVAL);
    assert_int_equal(err.offset, 18);
    assert_non_null(strstr(err.message, "expected: '('"));
    assert_int_equal(extmetrics_selector_parse("a/b/c", &sel, NULL), -EINVAL);
    extmetrics_selector_free(NULL);
}

/* Golden cases from apimachinery's quantity tests (testdata/quantities.txt). */
static void test_quantity_golden(void **state)
{
    char *path = xasprintf("%s/quantities.txt", EXTMETRICS_TESTDATA);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s", path);
    char line[256];
    int ncases = 0;
    while (fgets(line, sizeof(line), f)) {
        char in[128], want[64];
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "%127s %63s", in, want) != 2)
            fail_msg("bad golden line: %s", line);
        char *end = NULL;
        double v = strtod(in, &end);
        assert_true(end && *end == '\0');
        char out[64];
        int rc = extmetrics_quantity_format(v, out, sizeof(out));
        if (rc != 0 || strcmp(out, want) != 0)
            fail_msg("quantity %s: got \"%s\" (%d), want \"%s\"", in, out, rc, want);
        /* 24 bytes hold every quantity the formatter can produce */
        char small[24];
        assert_int_equal(extmetrics_quantity_format(v, small, sizeof(small)), 0);
        assert_string_equal(small, want);
        ncases++;
    }
    fclose(f);
    xfree(path);
    assert_int_equal(ncases, 86);
}

/* Served values: milli-units, the HPA's precision (before, rounding noise
 * made "3000000001n", read by the HPA as 3001m: one replica more). */
static void test_quantity_milli(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *want;
    } milli[] = {
        {3.0000000000000004, "3"}, {0.1 + 0.2, "300m"}, {8.000000000000002, "8"},
        {12.5, "12500m"},          {0.82, "820m"},      {0.0004, "0"},
        {0.0005, "1m"},            {-0.0005, "-1m"},    {1.23456, "1235m"},
        {3000, "3k"},              {0, "0"},            {8.9e15, "8900T"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(milli); i++) {
        char out[64];
        if (extmetrics_quantity_milli(milli[i].v, out, sizeof(out)) != 0 ||
            strcmp(out, milli[i].want) != 0)
            fail_msg("%.17g: got \"%s\", want \"%s\"", milli[i].v, out, milli[i].want);
    }
    char out[64];
    assert_int_equal(extmetrics_quantity_milli(NAN, out, sizeof(out)), -EINVAL);
    assert_int_equal(extmetrics_quantity_milli(9e15, out, sizeof(out)), -EINVAL);
}

/* Values that are not served, and the output buffer's size. */
static void test_quantity_errors(void **state)
{
    static const double bad[] = {NAN, INFINITY, -INFINITY, 9e15, -9e15, 1e16, 1e300};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        char out[64];
        if (extmetrics_quantity_format(bad[i], out, sizeof(out)) != -EINVAL)
            fail_msg("quantity %g: want -EINVAL", bad[i]);
    }
    char tiny[3];
    assert_int_equal(extmetrics_quantity_format(12.5, tiny, sizeof(tiny)), -ENOSPC);
    char exact[7]; /* "12500m" and its NUL */
    assert_int_equal(extmetrics_quantity_format(12.5, exact, sizeof(exact)), 0);
    assert_string_equal(exact, "12500m");
    /* the longest: 17 significant digits scaled up to a multiple of 3, a sign, a suffix */
    char out[64];
    assert_int_equal(extmetrics_quantity_format(-0.12345678901234568, out, sizeof(out)), 0);
    assert_string_equal(out, "-123456790n");
    assert_int_equal(extmetrics_quantity_format(-8.765432109876543e14, out, sizeof(out)), 0);
    assert_string_equal(out, "-876543210987654200m"); /* shortest: 876543210987654.2 */
}

/* Every value the formatter accepts reads back (as the HPA's MilliValue)
 * within 1 milli-unit, rounded up, and is canonical: no trailing "000". */
static void test_quantity_roundtrip(void **state)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v = (double)(int64_t)(x >> 11) / (double)(1ULL << (x % 60));
        if (i % 3 == 0)
            v = (double)(int64_t)(x % 2000001) - 1e6; /* integers */
        if (fabs(v) >= 9e15)
            continue;
        char out[64];
        assert_int_equal(extmetrics_quantity_format(v, out, sizeof(out)), 0);
        size_t n = strlen(out);
        char suf = out[n - 1];
        double scale = suf == 'n' ? 1e-9 : suf == 'u' ? 1e-6 : suf == 'm' ? 1e-3
                       : suf == 'k' ? 1e3 : suf == 'M' ? 1e6 : suf == 'G' ? 1e9
                       : suf == 'T' ? 1e12 : suf == 'P' ? 1e15 : 1;
        char *end;
        double mant = strtod(out, &end);
        assert_true(end == out + n - (scale != 1 ? 1 : 0));
        /* canonical: a mantissa ending in 000 would have taken the next suffix */
        size_t digits_end = n - (scale != 1 ? 1 : 0);
        if (digits_end >= 4 && memcmp(out + digits_end - 3, "000", 3) == 0 && scale != 1e15)
            fail_msg("%.17g -> %s is not canonical", v, out);
        double back = mant * scale;
        if (fabs(back - v) > fabs(v) * 1e-15 + 1e-9)
            fail_msg("%.17g -> %s reads %.17g", v, out, back);
    }
}

static void test_metric_names(void **state)
{
    assert_string_equal(extmetrics_metric_name(EXTMETRICS_DESIRED_REPLICAS),
                        "gpuscaler_desired_replicas");
    assert_int_equal(extmetrics_metric_lookup("gpuscaler_desired_replicas"),
                     EXTMETRICS_DESIRED_REPLICAS);
    assert_int_equal(extmetrics_metric_lookup("GPUSCALER_Utilization"), EXTMETRICS_UTILIZATION);
    assert_int_equal(extmetrics_metric_lookup("gpuscaler_forecast_requests_per_gpu"),
                     EXTMETRICS_FORECAST_REQUESTS_PER_GPU);
    assert_int_equal(extmetrics_metric_lookup("vllm_queue"), -ENOENT);
    assert_null(extmetrics_metric_name(EXTMETRICS_METRIC_COUNT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selector_table),
        cmocka_unit_test(test_selector_error_offset),
        cmocka_unit_test(test_quantity_golden),
        cmocka_unit_test(test_quantity_milli),
        cmocka_unit_test(test_quantity_errors),
        cmocka_unit_test(test_quantity_roundtrip),
        cmocka_unit_test(test_metric_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

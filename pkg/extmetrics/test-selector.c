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

struct q_case {
    double v;
    const char *want; /* NULL: -EINVAL */
};

static const struct q_case qcases[] = {
    {0, "0"},          {3, "3"},           {-2, "-2"},         {12.5, "12500m"},
    {0.5, "500m"},     {1.0004, "1"},      {1.0006, "1001m"},  {0.0004, "0"},
    {-0.25, "-250m"},  {1000, "1000"},     {2.999, "2999m"},   {123456789, "123456789"},
    {0.001, "1m"},     {10.5, "10500m"},   {NAN, NULL},        {INFINITY, NULL},
    {-INFINITY, NULL}, {1e16, NULL},
};

static void test_quantity(void **state)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(qcases); i++) {
        char out[64];
        int rc = extmetrics_quantity_format(qcases[i].v, out, sizeof(out));
        if (!qcases[i].want) {
            if (rc != -EINVAL)
                fail_msg("quantity %g: want -EINVAL, got %d (%s)", qcases[i].v, rc, out);
            continue;
        }
        if (rc != 0 || strcmp(out, qcases[i].want) != 0)
            fail_msg("quantity %g: got \"%s\" (%d), want \"%s\"", qcases[i].v, out, rc,
                     qcases[i].want);
    }
    char tiny[3];
    assert_int_equal(extmetrics_quantity_format(12.5, tiny, sizeof(tiny)), -ENOSPC);
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
        cmocka_unit_test(test_quantity),
        cmocka_unit_test(test_metric_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

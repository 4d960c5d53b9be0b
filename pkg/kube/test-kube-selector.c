/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for label selectors: a table of (selector, labels, match). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kube/kube.h"
#include "util/util.h"

static int cmp(const void *a, const void *b)
{
    return strcmp(((const struct kube_label *)a)->key, ((const struct kube_label *)b)->key);
}

/* Build a sorted label set from "k=v,k2=v2" (tests only; leaks nothing: the
 * strings point into buf). */
static struct kube_labels labels(char *buf, struct kube_label *items)
{
    struct kube_labels l = {items, 0};
    char *tok = buf;
    while (*tok) {
        char *comma = strchr(tok, ',');
        if (comma)
            *comma = '\0';
        char *eq = strchr(tok, '=');
        *eq = '\0';
        items[l.n++] = (struct kube_label){tok, eq + 1};
        if (!comma)
            break;
        tok = comma + 1;
    }
    qsort(items, l.n, sizeof(*items), cmp);
    return l;
}

static void test_matching_table(void **state)
{
    (void)state;
    static const struct {
        const char *sel;
        const char *labels;
        bool match;
    } cases[] = {
        {"{\"matchLabels\":{\"app\":\"llm\"}}", "app=llm,tier=gpu", true},
        {"{\"matchLabels\":{\"app\":\"llm\"}}", "app=web", false},
        {"{\"matchLabels\":{\"app\":\"llm\"}}", "", false},
        {"{\"matchLabels\":{\"app\":\"llm\",\"v\":\"2\"}}", "app=llm,v=2", true},
        {"{\"matchLabels\":{\"app\":\"llm\",\"v\":\"2\"}}", "app=llm,v=1", false},
        {"{}", "", true},
        {"{}", "anything=1", true},
        {"null", "app=llm", false},
        {"{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"gpu\",\"tpu\"]}]}",
         "tier=tpu", true},
        {"{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"gpu\"]}]}",
         "tier=cpu", false},
        {"{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"gpu\"]}]}",
         "app=x", false},
        {"{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"NotIn\",\"values\":[\"cpu\"]}]}",
         "app=x", true},
        {"{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"NotIn\",\"values\":[\"cpu\"]}]}",
         "tier=cpu", false},
        {"{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"NotIn\",\"values\":[\"cpu\"]}]}",
         "tier=gpu", true},
        {"{\"matchExpressions\":[{\"key\":\"canary\",\"operator\":\"Exists\"}]}", "canary=", true},
        {"{\"matchExpressions\":[{\"key\":\"canary\",\"operator\":\"Exists\"}]}", "app=a", false},
        {"{\"matchExpressions\":[{\"key\":\"canary\",\"operator\":\"DoesNotExist\"}]}", "app=a",
         true},
        {"{\"matchExpressions\":[{\"key\":\"canary\",\"operator\":\"DoesNotExist\"}]}",
         "canary=1", false},
        {"{\"matchLabels\":{\"app\":\"llm\"},\"matchExpressions\":[{\"key\":\"canary\","
         "\"operator\":\"DoesNotExist\"},{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\"]}]}",
         "app=llm,zone=a", true},
        {"{\"matchLabels\":{\"app\":\"llm\"},\"matchExpressions\":[{\"key\":\"canary\","
         "\"operator\":\"DoesNotExist\"},{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\"]}]}",
         "app=llm,zone=a,canary=y", false},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        json_t *j = json_loads(cases[i].sel, JSON_DECODE_ANY, NULL);
        struct kube_selector s;
        char err[128];
        assert_int_equal(kube_selector_from_json(j, &s, err, sizeof(err)), 0);
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", cases[i].labels);
        struct kube_label items[8];
        struct kube_labels l = labels(buf, items);
        if (kube_selector_matches(&s, &l) != cases[i].match)
            fail_msg("case %zu: %s vs %s: want %d", i, cases[i].sel, cases[i].labels,
                     cases[i].match);
        kube_selector_clear(&s);
        json_decref(j);
    }
}

static void test_invalid(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "[]",
        "{\"matchLabels\":[]}",
        "{\"matchLabels\":{\"a\":1}}",
        "{\"matchExpressions\":{}}",
        "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Like\",\"values\":[\"x\"]}]}",
        "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}",
        "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[]}]}",
        "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\",\"values\":[\"x\"]}]}",
        "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[1]}]}",
        "{\"matchExpressions\":[{\"operator\":\"Exists\"}]}",
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        json_t *j = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        assert_non_null(j);
        struct kube_selector s;
        char err[128] = "";
        if (kube_selector_from_json(j, &s, err, sizeof(err)) != -EINVAL)
            fail_msg("case %zu accepted: %s", i, bad[i]);
        assert_true(err[0] != '\0');
        assert_true(s.nothing); /* an invalid selector matches nothing */
        struct kube_labels none = {0};
        assert_false(kube_selector_matches(&s, &none));
        kube_selector_clear(&s);
        json_decref(j);
    }
}

static void test_format(void **state)
{
    (void)state;
    json_t *j = json_loads("{\"matchLabels\":{\"b\":\"2\",\"a\":\"1\"},\"matchExpressions\":["
                           "{\"key\":\"t\",\"operator\":\"In\",\"values\":[\"x\",\"y\"]},"
                           "{\"key\":\"u\",\"operator\":\"NotIn\",\"values\":[\"z\"]},"
                           "{\"key\":\"e\",\"operator\":\"Exists\"},"
                           "{\"key\":\"d\",\"operator\":\"DoesNotExist\"}]}",
                           0, NULL);
    struct kube_selector s;
    assert_int_equal(kube_selector_from_json(j, &s, NULL, 0), 0);
    struct util_buf b = {0};
    assert_int_equal(kube_selector_format(&s, &b), 0);
    assert_string_equal(b.data, "a=1,b=2,t in (x,y),u notin (z),e,!d");
    util_buf_free(&b);
    kube_selector_clear(&s);
    json_decref(j);
    assert_int_equal(kube_selector_from_json(NULL, &s, NULL, 0), 0);
    assert_int_equal(kube_selector_format(&s, &b), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matching_table),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

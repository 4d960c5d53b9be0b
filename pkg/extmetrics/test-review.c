/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the review documents: SubjectAccessReviews built from identities
 * (with extra, uid, groups; resource and non-resource) and TokenReview
 * answers read into identities, against golden files in testdata/ compared
 * field by field and in field order. */
#include "extmetrics/extmetrics.h"
#include "util/util.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

/* The golden file, compact, in its own key order. */
static char *golden_text(const char *name)
{
    char *path = xasprintf("%s/%s", EXTMETRICS_TESTDATA, name);
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_PRESERVE_ORDER, &jerr);
    if (!j)
        fail_msg("%s: %s", path, jerr.text);
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    xfree(path);
    return s;
}

static void assert_doc(json_t *doc, const char *golden)
{
    char *got = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *want = golden_text(golden);
    if (strcmp(got, want) != 0)
        fail_msg("%s:\n got  %s\n want %s", golden, got, want);
    free(got);
    free(want);
    json_decref(doc);
}

static const struct extmetrics_attrs list_desired = {
    .resource_request = true,
    .verb = "list",
    .group = "external.metrics.k8s.io",
    .version = "v1beta1",
    .resource = "gpuscaler_desired_replicas",
    .namespace_ = "llm",
};

/* extra keys come out sorted (Go marshals a map so), each key's values in
 * the order the identity had them, repeated keys merged */
static void test_sar_resource(void **state)
{
    const char *groups[] = {"system:serviceaccounts", "system:authenticated"};
    const struct extmetrics_label extra[] = {
        {"scopes", "view"},
        {"authentication.kubernetes.io/credential-id", "JTI=7c2a"},
        {"scopes", "edit"},
    };
    struct extmetrics_user u = {
        .name = "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
        .uid = "d8a5c3f0-1b2e-4c5d-9e6f-7a8b9c0d1e2f",
        .groups = groups,
        .ngroups = 2,
        .extra = extra,
        .nextra = 3,
    };
    assert_doc(extmetrics_sar_new(&u, &list_desired), "sar-resource.json");
}

/* empty fields are left out (omitempty): no groups, extra or uid */
static void test_sar_nonresource(void **state)
{
    struct extmetrics_user u = {.name = "alice"};
    struct extmetrics_attrs a = {.verb = "get", .path = "/apis/external.metrics.k8s.io/v1beta1"};
    assert_doc(extmetrics_sar_new(&u, &a), "sar-nonresource.json");
}

/* A TokenReview answer (a bound service-account token's extras) read into
 * an identity and carried whole into the access review. */
static void test_tokenreview_to_sar(void **state)
{
    char *path = xasprintf("%s/tokenreview-sa.json", EXTMETRICS_TESTDATA);
    json_t *tr = json_load_file(path, 0, NULL);
    xfree(path);
    assert_non_null(tr);
    struct extmetrics_review_user ru;
    assert_int_equal(extmetrics_tokenreview_user(tr, &ru), 0);
    assert_string_equal(ru.user.name,
                        "system:serviceaccount:kube-system:horizontal-pod-autoscaler");
    assert_string_equal(ru.user.uid, "d8a5c3f0-1b2e-4c5d-9e6f-7a8b9c0d1e2f");
    assert_int_equal(ru.user.ngroups, 3);
    assert_string_equal(ru.user.groups[1], "system:serviceaccounts:kube-system");
    assert_int_equal(ru.user.nextra, 5);
    struct extmetrics_attrs a = list_desired;
    a.resource = "gpuscaler_requests_per_gpu";
    assert_doc(extmetrics_sar_new(&ru.user, &a), "sar-from-token.json");
    extmetrics_review_user_free(&ru);
    extmetrics_review_user_free(NULL);
    json_decref(tr);
}

static void test_tokenreview_answers(void **state)
{
    static const struct {
        const char *doc;
        int rc;
    } cases[] = {
        {"{\"status\":{\"authenticated\":false,\"error\":\"invalid bearer token\"}}", -EACCES},
        {"{\"status\":{\"user\":{\"username\":\"x\"}}}", -EACCES},
        {"{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"x\"}}}", 0},
        {"{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"x\",\"extra\":{}}}}", 0},
        {"{}", -EBADMSG},
        {"{\"status\":{\"authenticated\":true,\"user\":{}}}", -EBADMSG},
        {"{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"\"}}}", -EBADMSG},
        {"{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"x\",\"groups\":\"g\"}}}",
         -EBADMSG},
        {"{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"x\",\"groups\":[1]}}}",
         -EBADMSG},
        {"{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"x\",\"extra\":[]}}}",
         -EBADMSG},
        {"{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"x\","
         "\"extra\":{\"k\":\"v\"}}}}",
         -EBADMSG},
        {"{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"x\","
         "\"extra\":{\"k\":[\"v\",2]}}}}",
         -EBADMSG},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        json_t *j = json_loads(cases[i].doc, 0, NULL);
        assert_non_null(j);
        struct extmetrics_review_user ru;
        int rc = extmetrics_tokenreview_user(j, &ru);
        if (rc != cases[i].rc)
            fail_msg("case %zu %s: rc %d want %d", i, cases[i].doc, rc, cases[i].rc);
        if (rc == 0) {
            assert_string_equal(ru.user.name, "x");
            assert_null(ru.user.uid);
            assert_int_equal(ru.user.ngroups, 0);
            assert_int_equal(ru.user.nextra, 0);
        }
        extmetrics_review_user_free(&ru);
        json_decref(j);
    }
    json_t *req = extmetrics_tokenreview_new("abc");
    char *s = json_dumps(req, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\","
                           "\"spec\":{\"token\":\"abc\"}}");
    free(s);
    json_decref(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sar_resource),
        cmocka_unit_test(test_sar_nonresource),
        cmocka_unit_test(test_tokenreview_to_sar),
        cmocka_unit_test(test_tokenreview_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

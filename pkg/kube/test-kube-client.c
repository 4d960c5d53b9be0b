/* SPDX-License-Identifier: Apache-2.0 */
/* Async tests of the kube client's request helpers against testsrv: paths,
 * methods, content types, status mapping (409 vs others), Retry-After, the
 * token file re-read, and close with a request in flight. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "httpc/testsrv.h"
#include "kube/kube.h"
#include "util/util.h"

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    struct kube *k;
    struct testsrv *srv;
    int calls, closes;
    struct kube_result last;
    char reason[64], message[256], body[512];
    char seen[512]; /* "METHOD target|content-type|auth|body" of the last request */
};

static void h_api(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    struct fx *f = arg;
    char ct[64] = "", auth[64] = "";
    testsrv_req_header(r, "Content-Type", ct, sizeof(ct));
    testsrv_req_header(r, "Authorization", auth, sizeof(auth));
    snprintf(f->seen, sizeof(f->seen), "%s %s|%s|%s|%.*s", r->method, r->target, ct, auth,
             (int)r->body_len, r->body);
    const char *body = "{\"kind\":\"Scale\",\"spec\":{\"replicas\":3}}";
    int status = 200;
    const char *extra = NULL;
    if (strstr(r->target, "/leases/held")) {
        status = 409;
        body = "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"message\":\"the object has been "
               "modified\",\"code\":409}";
    } else if (strstr(r->target, "/configmaps") && strcmp(r->method, "POST") == 0) {
        status = 409;
        body = "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"code\":409}";
    } else if (strstr(r->target, "/events")) {
        status = 429;
        body = "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}";
        extra = "Retry-After: 2\r\n";
    } else if (strstr(r->target, "/horizontalpodautoscalers")) {
        body = "not json";
    } else if (strstr(r->target, "/missing")) {
        status = 404;
        body = "404 page not found";
    }
    testsrv_respond(c, status, "application/json", body, strlen(body), extra);
}

static void on_result(const struct kube_result *res, void *arg)
{
    struct fx *f = arg;
    f->calls++;
    f->last = *res;
    snprintf(f->reason, sizeof(f->reason), "%s", res->reason);
    snprintf(f->message, sizeof(f->message), "%s", res->message);
    f->body[0] = '\0';
    if (res->body) {
        char *s = json_dumps(res->body, JSON_COMPACT | JSON_SORT_KEYS);
        snprintf(f->body, sizeof(f->body), "%s", s);
        free(s); /* style: allow (jansson's allocation) */
    }
    f->last.body = NULL;
}

static void on_closed(void *arg)
{
    ((struct fx *)arg)->closes++;
}

static void wait_calls(struct fx *f, int n)
{
    assert_true(testsrv_run_until_count(&f->loop, &f->calls, n, 10000));
}

static struct fx *fx_new(const struct kube_config *base)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpc_new(&f->loop, &f->http), 0);
    f->srv = testsrv_start(&f->loop, h_api, f);
    struct kube_config cfg = *base;
    cfg.server = (char *)testsrv_url(f->srv);
    assert_int_equal(kube_new(&f->loop, f->http, &cfg, NULL, &f->k), 0);
    return f;
}

static void fx_finish(struct fx *f)
{
    kube_close(f->k, on_closed, f);
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closes, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(f);
}

static void test_helpers(void **state)
{
    (void)state;
    struct kube_config cfg = {.token = "abc", .namespace_ = "gpu-system"};
    struct fx *f = fx_new(&cfg);
    assert_string_equal(kube_namespace(f->k), "gpu-system");

    assert_int_equal(kube_scale_get(f->k, "ml", "llama", on_result, f), 0);
    wait_calls(f, 1);
    assert_int_equal(f->last.err, 0);
    assert_int_equal(f->last.status, 200);
    assert_string_equal(f->body, "{\"kind\":\"Scale\",\"spec\":{\"replicas\":3}}");
    assert_string_equal(f->seen, "GET /apis/apps/v1/namespaces/ml/deployments/llama/scale||Bearer abc|");

    assert_int_equal(kube_scale_patch(f->k, "ml", "llama", 5, on_result, f), 0);
    wait_calls(f, 2);
    assert_string_equal(f->seen, "PATCH /apis/apps/v1/namespaces/ml/deployments/llama/scale|"
                                 "application/merge-patch+json|Bearer abc|{\"spec\":{\"replicas\":5}}");

    json_t *ann = json_pack("{s:s,s:n}", "gpuscaler.io/last", "x", "gpuscaler.io/old");
    assert_int_equal(kube_deployment_patch_annotations(f->k, "ml", "llama", ann, on_result, f), 0);
    json_decref(ann);
    wait_calls(f, 3);
    assert_non_null(strstr(f->seen, "PATCH /apis/apps/v1/namespaces/ml/deployments/llama|"
                                    "application/merge-patch+json|"));
    assert_non_null(strstr(f->seen, "\"gpuscaler.io/old\":null"));

    /* Lease update with a stale resourceVersion: 409 Conflict. */
    json_t *lease = json_pack("{s:{s:s,s:s}}", "metadata", "name", "held", "resourceVersion", "7");
    assert_int_equal(kube_lease_update(f->k, "gpu-system", "held", lease, on_result, f), 0);
    wait_calls(f, 4);
    assert_int_equal(f->last.status, 409);
    assert_int_equal(f->last.err, -EEXIST);
    assert_string_equal(f->reason, "Conflict");
    assert_string_equal(f->message, "the object has been modified");
    assert_non_null(strstr(f->seen, "PUT /apis/coordination.k8s.io/v1/namespaces/gpu-system/"
                                    "leases/held|application/json|"));
    assert_non_null(strstr(f->seen, "\"resourceVersion\":\"7\""));
    assert_int_equal(kube_lease_create(f->k, "gpu-system", lease, on_result, f), 0);
    wait_calls(f, 5);
    assert_non_null(strstr(f->seen, "POST /apis/coordination.k8s.io/v1/namespaces/gpu-system/leases|"));
    json_decref(lease);

    /* Create of an existing ConfigMap: 409 too, told apart by reason. */
    json_t *cm = json_pack("{s:{s:s}}", "metadata", "name", "state");
    assert_int_equal(kube_configmap_create(f->k, "gpu-system", cm, on_result, f), 0);
    wait_calls(f, 6);
    assert_int_equal(f->last.err, -EEXIST);
    assert_string_equal(f->reason, "AlreadyExists");
    assert_int_equal(kube_configmap_update(f->k, "gpu-system", "state", cm, on_result, f), 0);
    wait_calls(f, 7);
    assert_int_equal(f->last.err, 0);
    assert_non_null(strstr(f->seen, "PUT /api/v1/namespaces/gpu-system/configmaps/state|"));
    json_decref(cm);

    /* Events: throttled, with Retry-After. */
    json_t *ev = json_pack("{s:s}", "reason", "Scaled");
    assert_int_equal(kube_event_create(f->k, "ml", ev, on_result, f), 0);
    json_decref(ev);
    wait_calls(f, 8);
    assert_int_equal(f->last.status, 429);
    assert_int_equal(f->last.err, -EBUSY);
    assert_int_equal(f->last.retry_after_ms, 2000);

    /* A 2xx that is not JSON. */
    assert_int_equal(kube_hpa_list(f->k, "ml", on_result, f), 0);
    wait_calls(f, 9);
    assert_int_equal(f->last.err, -EBADMSG);
    assert_non_null(strstr(f->seen, "GET /apis/autoscaling/v2/namespaces/ml/horizontalpodautoscalers|"));

    /* A 404 without a Status body keeps the text as the message. */
    assert_int_equal(kube_get(f->k, "/missing", on_result, f), 0);
    wait_calls(f, 10);
    assert_int_equal(f->last.err, -ENOENT);
    assert_non_null(strstr(f->message, "404 page not found"));

    json_t *tr = json_pack("{s:{s:s}}", "spec", "token", "x");
    assert_int_equal(kube_tokenreview_create(f->k, tr, on_result, f), 0);
    wait_calls(f, 11);
    assert_non_null(strstr(f->seen, "POST /apis/authentication.k8s.io/v1/tokenreviews|"));
    assert_int_equal(kube_subjectaccessreview_create(f->k, tr, on_result, f), 0);
    wait_calls(f, 12);
    assert_non_null(strstr(f->seen, "POST /apis/authorization.k8s.io/v1/subjectaccessreviews|"));
    json_decref(tr);

    /* Bad names fail at once and never call back. */
    assert_int_equal(kube_scale_get(f->k, "ML", "x", on_result, f), -EINVAL);
    assert_int_equal(kube_scale_get(f->k, "ml", "a/b", on_result, f), -EINVAL);
    assert_int_equal(kube_scale_patch(f->k, "ml", "x", -1, on_result, f), -EINVAL);
    assert_int_equal(kube_get(f->k, "no-slash", on_result, f), -EINVAL);
    assert_int_equal(f->calls, 12);
    assert_false(kube_name_valid("-a"));
    assert_true(kube_name_valid("a.b-c"));
    fx_finish(f);
}

static void write_token(const char *path, const char *tok)
{
    char *tmp = xasprintf("%s.new", path);
    FILE *fp = fopen(tmp, "w");
    assert_non_null(fp);
    fprintf(fp, "%s\n", tok);
    fclose(fp);
    assert_int_equal(rename(tmp, path), 0); /* atomically, as the kubelet does */
    xfree(tmp);
}

static void on_wait(uv_timer_t *t)
{
    (void)t;
}

static bool timer_done(void *arg)
{
    return !uv_is_active(arg);
}

static void test_token_file_reread(void **state)
{
    (void)state;
    char dir[] = "/tmp/kubetok-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *path = xasprintf("%s/token", dir);
    write_token(path, "first");
    struct kube_config cfg = {.token = "static", .token_file = path};
    struct fx *f = fx_new(&cfg);
    assert_int_equal(kube_get(f->k, "/x", on_result, f), 0);
    wait_calls(f, 1);
    assert_non_null(strstr(f->seen, "|Bearer first|")); /* the file wins over token */
    write_token(path, "second");
    /* Checked at most once a second: wait that long on the loop's clock. */
    uv_timer_t t;
    uv_timer_init(&f->loop, &t);
    uv_timer_start(&t, on_wait, 1100, 0);
    assert_true(testsrv_run_until(&f->loop, timer_done, &t, 5000));
    uv_close((uv_handle_t *)&t, NULL);
    assert_int_equal(kube_get(f->k, "/x", on_result, f), 0);
    wait_calls(f, 2);
    assert_non_null(strstr(f->seen, "|Bearer second|"));

    /* Close with a request in flight: it completes with -ECANCELED. */
    assert_int_equal(kube_get(f->k, "/x", on_result, f), 0);
    kube_close(f->k, on_closed, f);
    assert_int_equal(kube_get(f->k, "/x", on_result, f), -ESHUTDOWN);
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->calls, 3);
    assert_int_equal(f->last.err, -ECANCELED);
    assert_int_equal(f->closes, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(f);
    unlink(path);
    rmdir(dir);
    xfree(path);
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_token_file_reread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Async tests of the kube client's request helpers against testsrv: paths,
 * methods, content types, status mapping (409 vs others), Retry-After, the
 * token file re-read, exec credential plugins, and close with a request in
 * flight. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "httpc/testsrv.h"
#include "kube/kube-int.h"
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
    int attempts;   /* requests to the /retry... paths */
    char encodings[128]; /* Accept-Encoding of the last request */
};

static void h_api(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    struct fx *f = arg;
    char ct[64] = "", auth[64] = "";
    testsrv_req_header(r, "Content-Type", ct, sizeof(ct));
    testsrv_req_header(r, "Authorization", auth, sizeof(auth));
    f->encodings[0] = '\0';
    testsrv_req_header(r, "Accept-Encoding", f->encodings, sizeof(f->encodings));
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
        extra = "Retry-After: 11\r\n"; /* longer than the client waits: back to the caller */
    } else if (strstr(r->target, "/retry-twice")) {
        /* throttled twice, then served */
        if (++f->attempts <= 2) {
            status = 429;
            body = "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}";
            extra = "Retry-After: 1\r\n";
        }
    } else if (strstr(r->target, "/retry-never")) {
        f->attempts++;
        status = 503;
        body = "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\",\"code\":503}";
        extra = "Retry-After: 0\r\n";
    } else if (strstr(r->target, "/retry-always")) {
        f->attempts++;
        status = 429;
        body = "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}";
        extra = "Retry-After: 1\r\n";
    } else if (strstr(r->target, "/retry-slow")) {
        f->attempts++;
        status = 429;
        body = "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}";
        extra = "Retry-After: 5\r\n";
    } else if (strstr(r->target, "/leases/hang")) {
        f->attempts++;
        return; /* never answered: the request's own deadline ends it */
    } else if (strstr(r->target, "/down")) {
        f->attempts++;
        status = 503;
        body = "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\",\"code\":503}";
    } else if (strstr(r->target, "/horizontalpodautoscalers")) {
        body = "not json";
    } else if (strstr(r->target, "/warned")) {
        /* two warnings in one header (the second with a date), a third header with the
         * first one again, a 199 (not shown by client-go) and a malformed one */
        extra = "Warning: 299 - \"unknown field \\\"spec.foo\\\"\", 299 - "
                "\"apps/v1beta1 Deployment is deprecated\" \"Sun, 29 Nov 2026 02:00:00 GMT\"\r\n"
                "Warning: 299 - \"unknown field \\\"spec.foo\\\"\"\r\n"
                "Warning: 199 - \"miscellaneous\"\r\n"
                "Warning: 2999 - \"bad code\"\r\n";
    } else if (strstr(r->target, "/auth-check") && strstr(auth, "tok-1")) {
        status = 401; /* the plugin's first credential is refused here */
        body = "{\"kind\":\"Status\",\"reason\":\"Unauthorized\",\"code\":401}";
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

/* A cluster's disable-compression: requests ask for no compressed answer, as
 * client-go's DisableCompression; by default they do. */
static void test_disable_compression(void **state)
{
    (void)state;
    for (int off = 0; off < 2; off++) {
        struct kube_config cfg = {.token = "t", .disable_compression = off == 1};
        struct fx *f = fx_new(&cfg);
        assert_int_equal(kube_get(f->k, "/api/v1/a", on_result, f), 0);
        wait_calls(f, 1);
        assert_int_equal(f->last.err, 0);
        if (off ? f->encodings[0] != '\0' : strstr(f->encodings, "gzip") == NULL)
            fail_msg("disable-compression %d: Accept-Encoding \"%s\"", off, f->encodings);
        fx_finish(f);
    }
}

/* A 429, or a 5xx with Retry-After, is sent again after that wait (up to 10 s,
 * 10 times), with the same body; a 5xx without one is not; a close while a
 * request waits cancels it. */
static void test_retries(void **state)
{
    (void)state;
    struct kube_config cfg = {.token = "abc"};
    struct fx *f = fx_new(&cfg);
    json_t *obj = json_pack("{s:s}", "kind", "ConfigMap");
    uint64_t t0 = uv_now(&f->loop);
    assert_int_equal(kube_create(f->k, "/api/v1/namespaces/ml/retry-twice", obj, on_result, f),
                     0);
    wait_calls(f, 1);
    assert_int_equal(f->last.err, 0);
    assert_int_equal(f->attempts, 3);
    assert_true(uv_now(&f->loop) - t0 >= 2000);
    /* the third attempt carried the body again */
    assert_non_null(strstr(f->seen, "POST /api/v1/namespaces/ml/retry-twice|application/json|"
                                    "Bearer abc|{\"kind\":\"ConfigMap\"}"));
    f->attempts = 0;
    t0 = uv_now(&f->loop);
    assert_int_equal(kube_update(f->k, "/api/v1/retry-never", obj, on_result, f), 0);
    wait_calls(f, 2);
    assert_int_equal(f->attempts, 11); /* the first and 10 more */
    /* "Retry-After: 0" waits the least a retry waits, 200 ms: not 10 resends at once */
    assert_true(uv_now(&f->loop) - t0 >= 10 * 200);
    assert_int_equal(f->last.status, 503);
    assert_int_equal(f->last.err, -EAGAIN);
    f->attempts = 0;
    assert_int_equal(kube_get(f->k, "/api/v1/down", on_result, f), 0);
    wait_calls(f, 3);
    assert_int_equal(f->attempts, 1);
    assert_int_equal(f->last.status, 503);
    struct util_buf m = {0};
    kube_write_metrics(f->k, &m);
    assert_non_null(strstr(m.data, "\ngpuscaler_api_retries_total 12\n"));
    assert_non_null(strstr(m.data, "gpuscaler_api_errors_total{class=\"throttled\"} 2\n"));
    util_buf_free(&m);
    /* closed while the request waits 5 s: cancelled at once, from the loop */
    f->attempts = 0;
    assert_int_equal(kube_get(f->k, "/api/v1/retry-slow", on_result, f), 0);
    for (;;) { /* until the 429 came and the 5 s wait started */
        uv_run(&f->loop, UV_RUN_ONCE);
        struct util_buf w = {0};
        kube_write_metrics(f->k, &w);
        bool waiting = strstr(w.data, "\ngpuscaler_api_retries_total 13\n") != NULL;
        util_buf_free(&w);
        if (waiting)
            break;
    }
    int calls = f->calls;
    t0 = uv_now(&f->loop);
    kube_close(f->k, on_closed, f);
    assert_int_equal(f->calls, calls); /* never from inside kube_close */
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_true(uv_now(&f->loop) - t0 < 2000);
    assert_int_equal(f->calls, calls + 1);
    assert_int_equal(f->last.err, -ECANCELED);
    assert_int_equal(f->attempts, 1);
    assert_int_equal(f->closes, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    json_decref(obj);
    xfree(f);
}

/* A request sent within a deadline ends by it, retries included: a hung
 * answer times out then (not at the client's 30 s), and a Retry-After wait
 * that would end after it is not taken. */
static void test_within(void **state)
{
    (void)state;
    struct kube_config cfg = {.token = "abc"};
    struct fx *f = fx_new(&cfg);
    uint64_t t0 = uv_now(&f->loop);
    json_t *lease = json_pack("{s:{s:s,s:s}}", "metadata", "name", "hang", "resourceVersion", "3");
    assert_int_equal(kube_lease_update(f->k, "gpu-system", "hang", lease, 700, on_result, f), 0);
    wait_calls(f, 1);
    uint64_t took = uv_now(&f->loop) - t0;
    assert_int_equal(f->last.err, -ETIMEDOUT);
    assert_int_equal(f->attempts, 1);
    assert_true(took >= 650 && took < 3000);
    json_decref(lease);
    /* throttled with Retry-After: 1 s; within 2.5 s: sent again once (its wait ends
     * about 1 s in), not a second time (about 2 s in plus the answer's time is fine,
     * a third wait to 3 s is not) */
    f->attempts = 0;
    t0 = uv_now(&f->loop);
    assert_int_equal(kube_request_within(f->k, 2500, "GET", "/api/v1/retry-always", NULL, NULL,
                                         on_result, f), 0);
    wait_calls(f, 2);
    took = uv_now(&f->loop) - t0;
    assert_int_equal(f->attempts, 3);
    assert_int_equal(f->last.status, 429);
    assert_true(took < 2500);
    /* the lease helpers refuse what the API server would: no name, no body */
    assert_int_equal(kube_lease_get(f->k, "gpu-system", NULL, 0, on_result, f), -EINVAL);
    assert_int_equal(kube_lease_update(f->k, "gpu-system", "x", NULL, 0, on_result, f), -EINVAL);
    assert_int_equal(kube_request_within(f->k, -1, "GET", "/api", NULL, NULL, on_result, f),
                     -EINVAL);
    /* the list's path */
    assert_int_equal(kube_lease_list(f->k, "gpu-system", 1000, on_result, f), 0);
    wait_calls(f, 3);
    assert_string_equal(f->seen, "GET /apis/coordination.k8s.io/v1/namespaces/gpu-system/leases"
                                 "||Bearer abc|");
    fx_finish(f);
}

/* Draining (the daemon stops): a throttled request is sent again only while
 * its wait ends within the budget, so a shutdown's writes end in time. */
static void test_retries_drain(void **state)
{
    (void)state;
    struct kube_config cfg = {.token = "abc"};
    struct fx *f = fx_new(&cfg);
    uint64_t t0 = uv_now(&f->loop);
    kube_drain(f->k, 1500);
    kube_drain(f->k, 60000); /* the first deadline holds */
    assert_int_equal(kube_get(f->k, "/api/v1/retry-always", on_result, f), 0);
    wait_calls(f, 1);
    /* the first answer's wait ends about 1 s in, within 1.5 s: sent again;
     * the second's about 2 s in: not */
    assert_int_equal(f->attempts, 2);
    assert_int_equal(f->last.status, 429);
    assert_int_equal(f->last.err, -EBUSY); /* throttled */
    assert_true(uv_now(&f->loop) - t0 < 1500 + 1000);
    struct util_buf m = {0};
    kube_write_metrics(f->k, &m);
    assert_non_null(strstr(m.data, "\ngpuscaler_api_retries_total 1\n"));
    util_buf_free(&m);
    fx_finish(f);
}

/* A kubeconfig's proxy-url: requests go to the proxy (here the test server,
 * which sees the absolute-form target), never to the unroutable server. */
static void test_proxy(void **state)
{
    (void)state;
    struct kube_config cfg = {.token = "abc"};
    struct fx *f = fx_new(&cfg);
    struct kube_config pcfg = {.server = "http://192.0.2.1:9", .token = "abc",
                               .proxy_url = (char *)testsrv_url(f->srv)};
    struct kube *k2;
    assert_int_equal(kube_new(&f->loop, f->http, &pcfg, NULL, &k2), 0);
    assert_int_equal(kube_get(k2, "/api/v1/via-proxy", on_result, f), 0);
    wait_calls(f, 1);
    assert_int_equal(f->last.err, 0);
    assert_non_null(strstr(f->seen, "GET http://192.0.2.1:9/api/v1/via-proxy|"));
    kube_close(k2, on_closed, f);
    assert_true(testsrv_run_until_count(&f->loop, &f->closes, 1, 5000));
    f->closes = 0;
    fx_finish(f);
}

/* ---- exec credential plugins ---------------------------------------------- */

/* A plugin script in a fresh directory: it counts its runs in DIR/runs, keeps
 * KUBERNETES_EXEC_INFO in DIR/info and prints what body prints (sh). */
static char *write_plugin(char *dir, const char *body)
{
    char *path = xasprintf("%s/plugin", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "#!/bin/sh\n"
                "n=$(( $(cat \"$DIR/runs\" 2>/dev/null || echo 0) + 1 ))\n"
                "echo $n > \"$DIR/runs\"\n"
                "printf '%%s' \"$KUBERNETES_EXEC_INFO\" > \"$DIR/info\"\n"
                "%s\n", body);
    fclose(fp);
    assert_int_equal(chmod(path, 0755), 0);
    return path;
}

static int runs_of(const char *dir)
{
    char *p = xasprintf("%s/runs", dir);
    FILE *fp = fopen(p, "r");
    int n = 0;
    if (fp) {
        if (fscanf(fp, "%d", &n) != 1)
            n = -1;
        fclose(fp);
    }
    xfree(p);
    return n;
}

static struct fx *fx_exec(char *dir, const char *body, struct kube_exec_config *x, char **path)
{
    *path = write_plugin(dir, body);
    static char *args[] = {"--flag"};
    static char envbuf[600];
    static char *env[1];
    snprintf(envbuf, sizeof(envbuf), "DIR=%s", dir);
    env[0] = envbuf;
    *x = (struct kube_exec_config){.api_version = "client.authentication.k8s.io/v1",
                                   .command = *path, .args = args, .nargs = 1, .env = env,
                                   .nenv = 1, .install_hint = "see the plugin's docs",
                                   .provide_cluster_info = true};
    struct kube_config cfg = {.exec = x, .ca_data = "PEM", .ca_data_len = 3};
    return fx_new(&cfg);
}

static void rm_plugin_dir(char *dir, char *path)
{
    unlink(path);
    xfree(path);
    static const char *const names[] = {"runs", "info"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++) {
        char *p = xasprintf("%s/%s", dir, names[i]);
        unlink(p);
        xfree(p);
    }
    rmdir(dir);
}

#define CRED(tok, extra)                                                                      \
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\"," \
    "\"status\":{\"token\":\"" tok "\"" extra "}}'"

/* Requests wait for the plugin's run and carry its token; two at once make
 * one run; a 401 to that token runs it again for the next request; the
 * plugin is told it is not interactive, and the cluster. */
static void test_exec_plugin(void **state)
{
    (void)state;
    char dir[] = "/tmp/kube-exec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct kube_exec_config x;
    char *path;
    struct fx *f = fx_exec(dir, CRED("tok-'$n'", ""), &x, &path);
    assert_int_equal(kube_get(f->k, "/api/v1/one", on_result, f), 0);
    assert_int_equal(kube_get(f->k, "/api/v1/two", on_result, f), 0);
    wait_calls(f, 2);
    assert_int_equal(f->last.err, 0);
    assert_non_null(strstr(f->seen, "|Bearer tok-1|"));
    assert_int_equal(runs_of(dir), 1);
    char *info = xasprintf("%s/info", dir);
    struct util_buf b = {0};
    FILE *fp = fopen(info, "r");
    assert_non_null(fp);
    char tmp[1024];
    size_t n = fread(tmp, 1, sizeof(tmp), fp);
    fclose(fp);
    util_buf_append(&b, tmp, n);
    util_buf_append(&b, "", 1);
    assert_non_null(strstr(b.data, "\"apiVersion\":\"client.authentication.k8s.io/v1\""));
    assert_non_null(strstr(b.data, "\"kind\":\"ExecCredential\""));
    assert_non_null(strstr(b.data, "\"interactive\":false"));
    assert_non_null(strstr(b.data, "\"certificate-authority-data\":\"UEVN\"")); /* "PEM" */
    assert_non_null(strstr(b.data, testsrv_url(f->srv)));
    util_buf_free(&b);
    xfree(info);
    /* refused: the next request runs the plugin again (a second later) */
    assert_int_equal(kube_get(f->k, "/api/v1/auth-check", on_result, f), 0);
    wait_calls(f, 3);
    assert_int_equal(f->last.status, 401);
    assert_int_equal(kube_get(f->k, "/api/v1/auth-check", on_result, f), 0);
    wait_calls(f, 4);
    assert_int_equal(f->last.err, 0);
    assert_non_null(strstr(f->seen, "|Bearer tok-2|"));
    assert_int_equal(runs_of(dir), 2);
    struct util_buf m = {0};
    kube_write_metrics(f->k, &m);
    assert_non_null(strstr(m.data, "gpuscaler_api_exec_plugin_runs_total{result=\"ok\"} 2\n"));
    assert_non_null(strstr(m.data, "gpuscaler_api_exec_plugin_runs_total{result=\"error\"} 0\n"));
    util_buf_free(&m);
    fx_finish(f);
    rm_plugin_dir(dir, path);
}

/* A credential already expired is used by the request that waited for it,
 * and the next request runs the plugin again; failures fail the requests
 * that waited with the plugin's own words. */
static void test_exec_plugin_expiry_and_failures(void **state)
{
    (void)state;
    struct kube_exec_config x;
    char *path;
    char dir[] = "/tmp/kube-exec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct fx *f = fx_exec(dir, CRED("tok-'$n'", ",\"expirationTimestamp\":\"2001-01-01T00:00:00Z\""),
                           &x, &path);
    assert_int_equal(kube_get(f->k, "/api/v1/a", on_result, f), 0);
    wait_calls(f, 1);
    assert_non_null(strstr(f->seen, "|Bearer tok-1|"));
    assert_int_equal(kube_get(f->k, "/api/v1/b", on_result, f), 0);
    wait_calls(f, 2);
    assert_non_null(strstr(f->seen, "|Bearer tok-2|"));
    assert_int_equal(runs_of(dir), 2);
    fx_finish(f);
    rm_plugin_dir(dir, path);

    static const struct {
        const char *body, *want;
        int err;
    } bad[] = {
        {"echo 'no credentials here' >&2; exit 3", "exit status 3: no credentials here", -ENOKEY},
        {"echo not-json", "not JSON", -ENOKEY},
        {"printf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":"
         "\"ExecCredential\",\"status\":{\"token\":\"t\"}}'",
         "plugin returned version client.authentication.k8s.io/v1beta1", -ENOKEY},
        {CRED("a b", ""), "token with spaces", -ENOKEY},
        {"kill -9 $$", "killed by signal 9", -ENOKEY},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        char d[] = "/tmp/kube-exec-XXXXXX";
        assert_non_null(mkdtemp(d));
        f = fx_exec(d, bad[i].body, &x, &path);
        assert_int_equal(kube_get(f->k, "/api/v1/a", on_result, f), 0);
        wait_calls(f, 1);
        assert_int_equal(f->last.err, bad[i].err);
        if (!strstr(f->message, bad[i].want) || !strstr(f->message, "exec plugin"))
            fail_msg("case %zu: message \"%s\"", i, f->message);
        struct util_buf m = {0};
        kube_write_metrics(f->k, &m);
        assert_non_null(strstr(m.data, "exec_plugin_runs_total{result=\"error\"} 1\n"));
        util_buf_free(&m);
        fx_finish(f);
        rm_plugin_dir(d, path);
    }
    /* a command that is not there: its install hint is in the message */
    struct kube_exec_config nx = {.api_version = "client.authentication.k8s.io/v1beta1",
                                  .command = "/nonexistent/get-token",
                                  .install_hint = "install get-token from example.com"};
    struct kube_config cfg = {.exec = &nx};
    f = fx_new(&cfg);
    assert_int_equal(kube_get(f->k, "/api/v1/a", on_result, f), 0);
    wait_calls(f, 1);
    assert_non_null(strstr(f->message, "cannot run it"));
    assert_non_null(strstr(f->message, "install get-token from example.com"));
    fx_finish(f);
}

static char *read_text(const char *path)
{
    struct util_buf b = {0};
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), fp)) > 0)
        util_buf_append(&b, tmp, n);
    fclose(fp);
    util_buf_append(&b, "", 1);
    return b.data;
}

/* The string at key in o is want. */
static void assert_json_str(const json_t *o, const char *key, const char *want)
{
    const char *got = json_string_value(json_object_get(o, key));
    if (!got || strcmp(got, want) != 0)
        fail_msg("%s: \"%s\", want \"%s\"", key, got ? got : "(absent)", want);
}

/* A kubeconfig whose user runs the plugin at path with provideClusterInfo,
 * its cluster having the given fields. */
static char *exec_kubeconfig(const char *dir, const char *path, const char *cluster)
{
    return xasprintf("current-context: x\n"
                     "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                     "clusters: [{name: c, cluster: {server: 'https://api.example.com:6443', "
                     "%s}}]\n"
                     "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
                     "command: '%s', interactiveMode: Never, provideClusterInfo: true, "
                     "env: [{name: DIR, value: '%s'}]}}}]\n",
                     cluster, path, dir);
}

/* provideClusterInfo passes on what client-go's rest.ConfigToExecCluster
 * does: the server, tls-server-name, insecure-skip-tls-verify, the CA's bytes,
 * the cluster's proxy-url as written (socks5, not curl's socks5h),
 * disable-compression and its exec extension as config. A CA
 * file that cannot be read fails the run (client-go builds no client then)
 * with a message naming it, in the log too, instead of running the plugin
 * without the CA. */
static void test_exec_plugin_cluster_info(void **state)
{
    (void)state;
    char dir[] = "/tmp/kube-exec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *path = write_plugin(dir, CRED("tok", ""));
    char *doc = exec_kubeconfig(dir, path, "tls-server-name: api.internal, "
                                           "proxy-url: 'SOCKS5://127.0.0.1:1', "
                                           "certificate-authority-data: UEVN, "
                                           "disable-compression: true, extensions: ["
                                           "{name: client.authentication.k8s.io/exec, "
                                           "extension: {audience: abc, num: 2}}]");
    struct kube_config c;
    struct kube_config_error e;
    assert_int_equal(kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e), 0);
    xfree(doc);
    struct fx *f = fx_new(&c);
    kube_config_clear(&c);
    assert_int_equal(kube_get(f->k, "/api/v1/a", on_result, f), 0);
    wait_calls(f, 1); /* fails: nothing listens at the proxy; the plugin ran before */
    assert_int_equal(runs_of(dir), 1);
    char *ipath = xasprintf("%s/info", dir);
    char *info = read_text(ipath);
    json_error_t je;
    json_t *o = json_loads(info, 0, &je);
    assert_non_null(o);
    json_t *cl = json_object_get(json_object_get(o, "spec"), "cluster");
    assert_json_str(cl, "server", testsrv_url(f->srv));
    assert_json_str(cl, "tls-server-name", "api.internal");
    assert_json_str(cl, "proxy-url", "socks5://127.0.0.1:1");
    assert_json_str(cl, "certificate-authority-data", "UEVN");
    assert_null(json_object_get(cl, "insecure-skip-tls-verify"));
    /* client-go's clientauthentication Cluster: disable-compression, and config from the
     * cluster's extension client.authentication.k8s.io/exec */
    assert_true(json_is_true(json_object_get(cl, "disable-compression")));
    json_t *want = json_pack("{s:s,s:i}", "audience", "abc", "num", 2);
    assert_true(json_equal(json_object_get(cl, "config"), want));
    json_decref(want);
    json_decref(o);
    xfree(info);
    fx_finish(f);
    unlink(ipath);
    xfree(ipath);
    rm_plugin_dir(dir, path);

    /* without those fields they are left out, as client-go's omitempty does */
    snprintf(dir, sizeof(dir), "/tmp/kube-exec-XXXXXX");
    assert_non_null(mkdtemp(dir));
    path = write_plugin(dir, CRED("tok", ""));
    doc = exec_kubeconfig(dir, path, "insecure-skip-tls-verify: true");
    assert_int_equal(kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e), 0);
    xfree(doc);
    f = fx_new(&c);
    kube_config_clear(&c);
    assert_int_equal(kube_get(f->k, "/api/v1/a", on_result, f), 0);
    wait_calls(f, 1);
    assert_int_equal(f->last.err, 0);
    ipath = xasprintf("%s/info", dir);
    info = read_text(ipath);
    o = json_loads(info, 0, &je);
    assert_non_null(o);
    cl = json_object_get(json_object_get(o, "spec"), "cluster");
    assert_true(json_is_true(json_object_get(cl, "insecure-skip-tls-verify")));
    assert_null(json_object_get(cl, "tls-server-name"));
    assert_null(json_object_get(cl, "proxy-url"));
    assert_null(json_object_get(cl, "certificate-authority-data"));
    assert_null(json_object_get(cl, "disable-compression"));
    assert_null(json_object_get(cl, "config"));
    json_decref(o);
    xfree(info);
    fx_finish(f);
    xfree(ipath);
    rm_plugin_dir(dir, path);

    /* a CA file that cannot be read */
    snprintf(dir, sizeof(dir), "/tmp/kube-exec-XXXXXX");
    assert_non_null(mkdtemp(dir));
    path = write_plugin(dir, CRED("tok", ""));
    doc = exec_kubeconfig(dir, path, "certificate-authority: /nonexistent/ca.pem");
    assert_int_equal(kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e), 0);
    xfree(doc);
    char *logpath = xasprintf("%s/log", dir);
    FILE *log = fopen(logpath, "w+");
    assert_non_null(log);
    util_log_set_stream(log);
    f = fx_new(&c);
    kube_config_clear(&c);
    assert_int_equal(kube_get(f->k, "/api/v1/a", on_result, f), 0);
    wait_calls(f, 1);
    util_log_set_stream(NULL);
    fclose(log);
    assert_true(f->last.err < 0);
    if (!strstr(f->message, "/nonexistent/ca.pem") || !strstr(f->message, "exec plugin"))
        fail_msg("message \"%s\"", f->message);
    assert_int_equal(runs_of(dir), 0); /* not run without it */
    assert_int_equal(testsrv_requests(f->srv), 0);
    char *text = read_text(logpath);
    if (!strstr(text, "level=error") || !strstr(text, "/nonexistent/ca.pem"))
        fail_msg("log \"%s\"", text);
    xfree(text);
    unlink(logpath);
    xfree(logpath);
    fx_finish(f);
    rm_plugin_dir(dir, path);
}

/* A request whose deadline passes while it waits for the plugin's
 * credential is not sent (it used to go out with a 1 ms timeout), and fails
 * at its deadline, not when the plugin ends (a hung one ran 30 s). */
static void test_exec_plugin_deadline(void **state)
{
    (void)state;
    char dir[] = "/tmp/kube-exec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct kube_exec_config x;
    char *path;
    struct fx *f = fx_exec(dir, "sleep 2; " CRED("slow", ""), &x, &path);
    uint64_t t0 = uv_now(&f->loop);
    assert_int_equal(kube_lease_get(f->k, "gpu-system", "x", 300, on_result, f), 0);
    wait_calls(f, 1);
    assert_true(uv_now(&f->loop) - t0 < 1500);
    assert_int_equal(f->last.err, -ETIMEDOUT);
    assert_non_null(strstr(f->message, "deadline passed while the credential plugin ran"));
    assert_int_equal(testsrv_requests(f->srv), 0);
    fx_finish(f);
    rm_plugin_dir(dir, path);
}

static void on_raw_done(int err, const struct httpc_resp *resp, void *arg)
{
    struct fx *f = arg;
    (void)resp;
    f->last.err = err;
    f->calls++;
}

/* A request waiting for a plugin that hangs: cancelled from the loop; a
 * close kills the plugin and completes at once. */
static void test_exec_plugin_cancel_and_close(void **state)
{
    (void)state;
    struct kube_exec_config x;
    char *path;
    char dir[] = "/tmp/kube-exec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct fx *f = fx_exec(dir, "exec sleep 60", &x, &path);
    struct kreq *rq = NULL;
    assert_int_equal(kube_raw_get(f->k, "/api/v1/pods", NULL, 0, 0, 1 << 20, on_raw_done, f, &rq),
                     0);
    assert_non_null(rq);
    while (runs_of(dir) < 1) /* the plugin runs */
        uv_run(&f->loop, UV_RUN_NOWAIT);
    kube_req_cancel(rq);
    assert_int_equal(f->calls, 0); /* never from inside the cancel */
    wait_calls(f, 1);
    assert_int_equal(f->last.err, -ECANCELED);
    assert_int_equal(kube_get(f->k, "/api/v1/a", on_result, f), 0);
    uint64_t t0 = uv_now(&f->loop);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    kube_close(f->k, on_closed, f);
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_true(uv_now(&f->loop) - t0 < 5000);
    assert_int_equal(f->calls, 2);
    assert_int_equal(f->last.err, -ECANCELED);
    assert_int_equal(f->closes, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(f);
    rm_plugin_dir(dir, path);
}

/* A plugin that is a wrapper (a shell script running a command of its
 * own): a close kills what it started too, which outlived it before. */
static void test_exec_plugin_close_kills_its_children(void **state)
{
    (void)state;
    struct kube_exec_config x;
    char *path;
    char dir[] = "/tmp/kube-exec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct fx *f = fx_exec(dir, "sleep 60 & echo $! > \"$DIR/child\"; wait", &x, &path);
    assert_int_equal(kube_get(f->k, "/api/v1/a", on_result, f), 0);
    char *cp = xasprintf("%s/child", dir);
    int child = 0;
    for (int i = 0; i < 500 && child <= 0; i++) { /* its child is there */
        uv_run(&f->loop, UV_RUN_NOWAIT);
        FILE *fp = fopen(cp, "r");
        if (fp) {
            if (fscanf(fp, "%d", &child) != 1)
                child = 0;
            fclose(fp);
        }
        usleep(10000);
    }
    assert_true(child > 0);
    assert_int_equal(kill(child, 0), 0);
    kube_close(f->k, on_closed, f);
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) { /* SIGKILL is prompt */
        gone = kill(child, 0) != 0 && errno == ESRCH;
        char sp[64], st[256] = "";
        snprintf(sp, sizeof(sp), "/proc/%d/stat", child);
        FILE *fp = gone ? NULL : fopen(sp, "r");
        if (fp) { /* dead, not reaped yet (init is slow, or not a reaper) */
            if (fgets(st, sizeof(st), fp)) {
                const char *rp = strrchr(st, ')');
                gone = rp && (rp[2] == 'Z' || rp[2] == 'X');
            }
            fclose(fp);
        }
        if (!gone)
            usleep(10000);
    }
    if (!gone)
        kill(child, SIGKILL); /* not left behind by the test */
    assert_true(gone);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    xfree(f);
    unlink(cp);
    xfree(cp);
    rm_plugin_dir(dir, path);
}

/* The plugin's output parser: what client-go accepts, and refuses. */
static void test_exec_cred_parse(void **state)
{
    (void)state;
    const char *v1 = "client.authentication.k8s.io/v1";
    struct kube_exec_cred c;
    char err[300];
    const char *ok = "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                     "\"ExecCredential\",\"spec\":{\"interactive\":false},\"status\":"
                     "{\"token\":\"k8s-aws-v1.abc\",\"expirationTimestamp\":"
                     "\"2026-11-29T10:15:30Z\"}}\n";
    assert_int_equal(kube_exec_cred_parse(ok, strlen(ok), v1, &c, err, sizeof(err)), 0);
    assert_string_equal(c.token, "k8s-aws-v1.abc");
    assert_null(c.cert);
    int64_t want;
    assert_int_equal(kube_parse_time("2026-11-29T10:15:30Z", &want), 0);
    assert_true(c.expires_ms == want);
    kube_exec_cred_clear(&c);
    const char *pem = "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                      "\"ExecCredential\",\"status\":{\"clientCertificateData\":\"C\","
                      "\"clientKeyData\":\"K\"}}";
    assert_int_equal(kube_exec_cred_parse(pem, strlen(pem), v1, &c, err, sizeof(err)), 0);
    assert_null(c.token);
    assert_string_equal(c.cert, "C");
    assert_string_equal(c.key, "K");
    assert_true(c.expires_ms == 0);
    kube_exec_cred_clear(&c);
    static const struct {
        const char *in, *want;
    } bad[] = {
        {"{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\"}",
         "didn't return a status"},
        {"{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
         "\"status\":{}}", "didn't return a token or cert/key pair"},
        {"{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
         "\"status\":{\"clientKeyData\":\"K\"}}", "only certificate or key"},
        {"{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"Other\","
         "\"status\":{\"token\":\"t\"}}", "kind is not ExecCredential"},
        {"{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
         "\"status\":{\"token\":\"t\\r\\nX-Evil: 1\"}}", "control characters"},
        {"{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
         "\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"tomorrow\"}}",
         "expirationTimestamp"},
        {"{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
         "\"status\":{\"token\":7}}", "not a string"},
        {"{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"apiVersion\":\"x\"}",
         "not JSON"},
        {"[]", "not a JSON object"},
        {"", "not JSON"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        assert_int_equal(kube_exec_cred_parse(bad[i].in, strlen(bad[i].in), v1, &c, err,
                                              sizeof(err)),
                         -EBADMSG);
        if (!strstr(err, bad[i].want))
            fail_msg("case %zu: \"%s\"", i, err);
        assert_null(c.token);
    }
}

struct warn_seen {
    int n;
    char text[4][128];
    int code[4];
    size_t len[4];
};

static void collect(void *arg, int code, const char *text)
{
    struct warn_seen *w = arg;
    if (w->n < 4) {
        w->code[w->n] = code;
        w->len[w->n] = strlen(text);
        snprintf(w->text[w->n], sizeof(w->text[0]), "%s", text);
    }
    w->n++;
}

/* The Warning header parser against client-go's rules, and the client's
 * handling: counted, each distinct 299 text logged once. */
static void test_warnings(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        int n;                 /* return value */
        const char *first;     /* first text, or NULL */
    } cases[] = {
        {"299 - \"a\"", 1, "a"},
        {"  299 kube-apiserver \"a \\\"q\\\" \\\\ b\"  ", 1, "a \"q\" \\ b"},
        {"299 - \"a\" \"Sun, 29 Nov 2026 02:00:00 GMT\", 299 - \"b\"", 2, "a"},
        {"299 - \"a\",299 - \"b\" , 199 x \"c\"", 3, "a"},
        {"299 - \"a\", 29 - \"b\"", 1, "a"},   /* a malformed second ends the parse */
        {"299 - \"a\" x", -EBADMSG, NULL},       /* junk after the text */
        {"299 - \"a\" \"date", -EBADMSG, NULL}, /* unterminated date */
        {"299 - \"unterminated", -EBADMSG, NULL},
        {"299 -  \"a\"", -EBADMSG, NULL},       /* two spaces: the text must follow one */
        {"299  \"a\"", -EBADMSG, NULL},         /* empty agent */
        {"2990 - \"a\"", -EBADMSG, NULL},
        {"29a - \"a\"", -EBADMSG, NULL},
        {"299 - a", -EBADMSG, NULL},
        {"299 - \"tab\there\"", -EBADMSG, NULL}, /* a control character */
        {"299 - \"\xc3\x28\"", -EBADMSG, NULL},  /* not UTF-8 */
        {"299 - \"\xc2\x85\"", -EBADMSG, NULL},  /* U+0085, a C1 control */
        {"299 - \"caf\xc3\xa9\"", 1, "caf\xc3\xa9"},
        {"299 - \"\"", 1, ""},
        {"", 0, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct warn_seen w = {0};
        int n = kube_warning_parse(cases[i].value, collect, &w);
        if (n != cases[i].n || (cases[i].first && strcmp(w.text[0], cases[i].first) != 0))
            fail_msg("case %zu '%s': %d '%s'", i, cases[i].value, n, w.n ? w.text[0] : "");
        assert_int_equal(w.n, n > 0 ? n : 0);
    }
    /* a text over KUBE_WARNING_MAX is cut on a character boundary */
    char big[2 * KUBE_WARNING_MAX];
    size_t o = (size_t)snprintf(big, sizeof(big), "299 - \"");
    while (o + 3 < sizeof(big) - 2) {
        memcpy(big + o, "\xc3\xa9", 2);
        o += 2;
    }
    big[o++] = '"';
    big[o] = '\0';
    struct warn_seen w = {0};
    assert_int_equal(kube_warning_parse(big, collect, &w), 1);
    assert_int_equal(w.len[0], KUBE_WARNING_MAX - 2); /* 511 bytes would split an 'é' */

    struct kube_config cfg = {.token = "abc"};
    struct fx *f = fx_new(&cfg);
    FILE *logf = tmpfile();
    assert_non_null(logf);
    util_log_set_stream(logf);
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_WARN);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(kube_get(f->k, "/apis/apps/v1/namespaces/ml/deployments/warned",
                                  on_result, f),
                         0);
        wait_calls(f, i + 1);
        assert_int_equal(f->last.err, 0);
    }
    util_log_set_stream(NULL);
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR); /* as main() set it */
    struct util_buf m = {0};
    kube_write_metrics(f->k, &m);
    /* 3 warnings with code 299 a response, 2 responses */
    assert_non_null(strstr(m.data, "\ngpuscaler_api_warnings_total 6\n"));
    util_buf_free(&m);
    char log[2048] = "";
    rewind(logf);
    size_t got = fread(log, 1, sizeof(log) - 1, logf);
    log[got] = '\0';
    fclose(logf);
    /* each distinct text once, whatever the repeats */
    const char *a = strstr(log, "API server warning: unknown field");
    assert_non_null(a);
    assert_null(strstr(a + 1, "API server warning: unknown field"));
    assert_non_null(strstr(log, "apps/v1beta1 Deployment is deprecated"));
    assert_non_null(strstr(log, "GET /apis/apps/v1/namespaces/ml/deployments/warned"));
    assert_null(strstr(log, "miscellaneous"));
    assert_null(strstr(log, "bad code"));
    fx_finish(f);
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
    assert_int_equal(
        kube_deployment_patch_annotations(f->k, "ml", "llama", "u-1", ann, 0, on_result, f), 0);
    json_decref(ann);
    wait_calls(f, 3);
    assert_non_null(strstr(f->seen, "PATCH /apis/apps/v1/namespaces/ml/deployments/llama|"
                                    "application/merge-patch+json|"));
    assert_non_null(strstr(f->seen, "\"gpuscaler.io/old\":null"));
    assert_non_null(strstr(f->seen, "\"uid\":\"u-1\""));

    /* Lease update with a stale resourceVersion: 409 Conflict. */
    json_t *lease = json_pack("{s:{s:s,s:s}}", "metadata", "name", "held", "resourceVersion", "7");
    assert_int_equal(kube_lease_update(f->k, "gpu-system", "held", lease, 0, on_result, f), 0);
    wait_calls(f, 4);
    assert_int_equal(f->last.status, 409);
    assert_int_equal(f->last.err, -EEXIST);
    assert_string_equal(f->reason, "Conflict");
    assert_string_equal(f->message, "the object has been modified");
    assert_non_null(strstr(f->seen, "PUT /apis/coordination.k8s.io/v1/namespaces/gpu-system/"
                                    "leases/held|application/json|"));
    assert_non_null(strstr(f->seen, "\"resourceVersion\":\"7\""));
    assert_int_equal(kube_lease_create(f->k, "gpu-system", lease, 0, on_result, f), 0);
    wait_calls(f, 5);
    assert_non_null(strstr(f->seen, "POST /apis/coordination.k8s.io/v1/namespaces/gpu-system/leases|"));
    json_decref(lease);

    /* Create of an existing ConfigMap: 409 too, told apart by reason. */
    json_t *cm = json_pack("{s:{s:s}}", "metadata", "name", "state");
    assert_int_equal(kube_configmap_create(f->k, "gpu-system", cm, 0, on_result, f), 0);
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
    assert_int_equal(f->last.retry_after_ms, 11000);

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
        cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_retries),
        cmocka_unit_test(test_disable_compression),
        cmocka_unit_test(test_retries_drain),
        cmocka_unit_test(test_within),
        cmocka_unit_test(test_proxy),
        cmocka_unit_test(test_exec_plugin),
        cmocka_unit_test(test_exec_plugin_expiry_and_failures),
        cmocka_unit_test(test_exec_plugin_cancel_and_close),
        cmocka_unit_test(test_exec_plugin_close_kills_its_children),
        cmocka_unit_test(test_exec_plugin_deadline),
        cmocka_unit_test(test_exec_plugin_cluster_info),
        cmocka_unit_test(test_exec_cred_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

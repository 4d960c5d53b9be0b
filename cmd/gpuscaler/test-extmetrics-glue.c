/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the external metrics wiring (extmetrics-glue.c) against a fake
 * API server (pkg/httpc's testsrv, on the test's loop): the front-proxy
 * trust read from kube-system/extension-apiserver-authentication (allowed
 * names without a cap, the warning when the front-proxy and client CAs
 * share a certificate with any CN allowed) and how TokenReview answers
 * reach the API (a malformed one is a failed review, not a cached denial).
 * The glue serves on the loop; a client thread drives it with libcurl.
 * Test certificates are made with the openssl CLI in a temporary directory. */
#include "extmetrics-glue.h"

#include "controller/controller.h"
#include "httpc/httpc.h"
#include "httpc/testsrv.h"
#include "httpd/httpd.h"
#include "kube/kube.h"
#include "util/util.h"

#include <curl/curl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define DISCOVERY "/apis/external.metrics.k8s.io/v1beta1"

static char dir[256];

struct gt;
typedef void (*scenario_fn)(struct gt *t);

struct gt {
    uv_loop_t loop;
    struct testsrv *api;
    struct httpc *http;
    struct kube *kube;
    struct extmetrics_glue *g;
    uv_async_t done;
    uv_thread_t thr;
    scenario_fn scenario;
    int port;
    char *cm;            /* the ConfigMap the fake API server returns */
    /* what the fake API server saw (read on the loop thread only) */
    int cm_reads, reviews_denied, reviews_malformed, access_reviews;
    int fail_line;
    char fail_msg[512];
};

#define CHECK(t, cond)                                                           \
    do {                                                                         \
        if (!(cond) && !(t)->fail_line) {                                        \
            (t)->fail_line = __LINE__;                                           \
            snprintf((t)->fail_msg, sizeof((t)->fail_msg), "%s", #cond);         \
        }                                                                        \
    } while (0)

/* ---- the fake API server -------------------------------------------------- */

static void api_handler(struct testsrv_conn *c, const struct testsrv_req *r, void *arg)
{
    struct gt *t = arg;
    if (strcmp(r->method, "GET") == 0 &&
        strcmp(r->target, "/api/v1/namespaces/kube-system/configmaps/"
                          "extension-apiserver-authentication") == 0) {
        t->cm_reads++;
        testsrv_respond(c, 200, "application/json", t->cm, strlen(t->cm), NULL);
        return;
    }
    if (strcmp(r->method, "POST") == 0 &&
        strcmp(r->target, "/apis/authentication.k8s.io/v1/tokenreviews") == 0) {
        /* "malformed-token": authenticated as nobody (no username), which
         * extmetrics_tokenreview_user reads as -EBADMSG; any other: denied */
        bool malformed = r->body && strstr(r->body, "\"malformed-token\"");
        const char *ans = malformed ? "{\"kind\":\"TokenReview\",\"apiVersion\":"
                                      "\"authentication.k8s.io/v1\",\"status\":"
                                      "{\"authenticated\":true,\"user\":{}}}"
                                    : "{\"kind\":\"TokenReview\",\"apiVersion\":"
                                      "\"authentication.k8s.io/v1\",\"status\":"
                                      "{\"authenticated\":false}}";
        if (malformed)
            t->reviews_malformed++;
        else
            t->reviews_denied++;
        testsrv_respond(c, 201, "application/json", ans, strlen(ans), NULL);
        return;
    }
    if (strcmp(r->method, "POST") == 0 &&
        strcmp(r->target, "/apis/authorization.k8s.io/v1/subjectaccessreviews") == 0) {
        static const char ans[] = "{\"status\":{\"allowed\":true}}";
        t->access_reviews++;
        testsrv_respond(c, 201, "application/json", ans, sizeof(ans) - 1, NULL);
        return;
    }
    static const char nf[] = "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\"}";
    testsrv_respond(c, 404, "application/json", nf, sizeof(nf) - 1, NULL);
}

static char *slurp(const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    struct util_buf b = {0};
    FILE *f = fopen(p, "rb");
    char tmp[4096];
    size_t n;
    while (f && (n = fread(tmp, 1, sizeof(tmp), f)) > 0)
        util_buf_append(&b, tmp, n);
    if (f)
        fclose(f);
    if (!b.data)
        util_buf_puts(&b, "");
    return util_buf_steal(&b);
}

/* The ConfigMap: front-proxy CA <rh_ca>.crt, client CA <client_ca>.crt,
 * allowed names @names (a JSON list, as the key holds it). */
static char *configmap(const char *rh_ca, const char *client_ca, const char *names)
{
    char *rh = slurp(rh_ca), *cca = slurp(client_ca);
    json_t *cm = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s,s:s}}", "apiVersion", "v1",
                           "kind", "ConfigMap", "metadata", "name",
                           "extension-apiserver-authentication", "namespace", "kube-system",
                           "data", "client-ca-file", cca, "requestheader-client-ca-file", rh,
                           "requestheader-allowed-names", names,
                           "requestheader-username-headers", "[\"X-Remote-User\"]",
                           "requestheader-group-headers", "[\"X-Remote-Group\"]",
                           "requestheader-extra-headers-prefix", "[\"X-Remote-Extra-\"]");
    char *s = json_dumps(cm, JSON_COMPACT);
    json_decref(cm);
    xfree(rh);
    xfree(cca);
    char *out = xstrdup(s);
    free(s);
    return out;
}

/* ---- the client (runs in the scenario thread) ------------------------------ */

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

/* GET @path with client certificate <cert> (or none) and @headers
 * (NULL-terminated); the status, or -1. */
static long get(struct gt *t, const char *path, const char *cert, const char *const *headers)
{
    CURL *h = curl_easy_init();
    char url[512], crt[512], key[512];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", t->port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    struct curl_slist *hl = NULL;
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    if (hl)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    if (cert) {
        snprintf(crt, sizeof(crt), "%s/%s.crt", dir, cert);
        snprintf(key, sizeof(key), "%s/%s.key", dir, cert);
        curl_easy_setopt(h, CURLOPT_SSLCERT, crt);
        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
    }
    long status = -1;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return status;
}

/* ---- the fixture ------------------------------------------------------------ */

static void http_closed(void *arg)
{
    (void)arg;
}

static void kube_closed(void *arg)
{
    struct gt *t = arg;
    httpc_close(t->http, http_closed, t);
    testsrv_stop(t->api);
}

static void on_done(uv_async_t *a)
{
    struct gt *t = a->data;
    extmetrics_glue_close(t->g);
    kube_close(t->kube, kube_closed, t);
    uv_close((uv_handle_t *)a, NULL);
}

static void thread_main(void *arg)
{
    struct gt *t = arg;
    t->scenario(t);
    uv_async_send(&t->done);
}

static bool glue_ready(void *arg)
{
    return extmetrics_glue_ready(arg);
}

/* Start the fake API server and the glue on a new loop, the log going to
 * @log. */
static void start(struct gt *t, FILE *log)
{
    util_log_set_stream(log);
    assert_int_equal(uv_loop_init(&t->loop), 0);
    t->api = testsrv_start(&t->loop, api_handler, t);
    assert_int_equal(httpc_new(&t->loop, &t->http), 0);
    struct kube_config kc;
    memset(&kc, 0, sizeof(kc));
    kc.server = (char *)testsrv_url(t->api);
    assert_int_equal(kube_new(&t->loop, t->http, &kc, NULL, &t->kube), 0);
    struct ctl_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    char listen[] = "127.0.0.1:0";
    cfg.listen.external_metrics = listen;
    cfg.decision_interval_ms = 1000;
    assert_int_equal(extmetrics_glue_new(&t->loop, t->kube, NULL, NULL, &cfg, &t->g), 0);
    uv_async_init(&t->loop, &t->done, on_done);
    t->done.data = t;
}

/* Close everything (after t->done was sent) and check the loop ends clean. */
static void finish(struct gt *t)
{
    uv_run(&t->loop, UV_RUN_DEFAULT);
    util_log_set_stream(NULL);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    xfree(t->cm);
    t->cm = NULL;
}

/* Serve with t->cm as the ConfigMap, run @fn in a thread once the trust is
 * read, and check that everything closes; the log goes to @log. */
static void run(struct gt *t, scenario_fn fn, FILE *log)
{
    start(t, log);
    assert_true(testsrv_run_until(&t->loop, glue_ready, t->g, 10000));
    t->port = httpd_port(extmetrics_glue_httpd(t->g));
    t->scenario = fn;
    assert_int_equal(uv_thread_create(&t->thr, thread_main, t), 0);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    uv_thread_join(&t->thr);
    finish(t);
    if (t->fail_line)
        fail_msg("scenario failed at line %d: %s", t->fail_line, t->fail_msg);
}

static void sc_none(struct gt *t)
{
    (void)t;
}

/* The log written to @f so far, as a string (the caller frees it). */
static char *log_text(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    char *s = xcalloc(1, (size_t)(n > 0 ? n : 0) + 1);
    rewind(f);
    if (n > 0 && fread(s, 1, (size_t)n, f) != (size_t)n)
        s[0] = '\0';
    return s;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

#define SHARED_WARNING "share a certificate and requestheader-allowed-names is empty"

/* ---- requestheader-allowed-names past 16 entries ----------------------------- */

static const char *const aggregator[] = {"X-Remote-User: system:kube-aggregator",
                                         "X-Remote-Group: system:masters", NULL};

static void sc_many_names(struct gt *t)
{
    /* the 20th allowed name is a front proxy (the list used to be cut at 16,
     * and this proxy got 401), the 21st (not listed) is not */
    CHECK(t, get(t, DISCOVERY, "proxy20", aggregator) == 200);
    CHECK(t, get(t, DISCOVERY, "proxy1", aggregator) == 200);
    CHECK(t, get(t, DISCOVERY, "proxy21", aggregator) == 401);
}

static void test_allowed_names_uncapped(void **state)
{
    (void)state;
    struct gt t = {0};
    struct util_buf names = {0};
    util_buf_puts(&names, "[");
    for (int i = 1; i <= 20; i++)
        util_buf_printf(&names, "%s\"proxy-%d\"", i > 1 ? "," : "", i);
    util_buf_puts(&names, "]");
    t.cm = configmap("pca.crt", "cca.crt", names.data);
    util_buf_free(&names);
    FILE *log = tmpfile();
    assert_non_null(log);
    run(&t, sc_many_names, log);
    char *text = log_text(log);
    assert_int_equal(count(text, SHARED_WARNING), 0); /* separate CAs */
    xfree(text);
    fclose(log);
}

/* A malformed list of allowed names is no list: the previous trust (here:
 * none, so not Ready) stays; it used to read as "no names", which allows
 * any CN. */
static void test_allowed_names_malformed(void **state)
{
    (void)state;
    struct gt t = {0};
    t.cm = configmap("pca.crt", "cca.crt", "[\"proxy-1\", 7]");
    FILE *log = tmpfile();
    assert_non_null(log);
    start(&t, log);
    assert_true(testsrv_run_until_count(&t.loop, &t.cm_reads, 1, 10000));
    testsrv_run_until(&t.loop, glue_ready, t.g, 300);
    assert_false(extmetrics_glue_ready(t.g));
    uv_async_send(&t.done);
    finish(&t);
    char *text = log_text(log);
    assert_non_null(strstr(text, "requestheader-allowed-names is not a JSON list of strings"));
    xfree(text);
    fclose(log);
}

/* ---- one CA for the front proxy and the clients -------------------------------- */

static void sc_shared(struct gt *t)
{
    /* what the warning is about: a plain client certificate of the client
     * CA asserts any user */
    CHECK(t, get(t, DISCOVERY, "alice", aggregator) == 200);
}

static void test_shared_ca_warning(void **state)
{
    (void)state;
    struct gt t = {0};
    t.cm = configmap("cca.crt", "cca.crt", "[]");
    FILE *log = tmpfile();
    assert_non_null(log);
    run(&t, sc_shared, log);
    char *text = log_text(log);
    assert_int_equal(count(text, SHARED_WARNING), 1);
    xfree(text);
    fclose(log);
    /* with an allowed name, no warning */
    struct gt t2 = {0};
    t2.cm = configmap("cca.crt", "cca.crt", "[\"front-proxy-client\"]");
    log = tmpfile();
    assert_non_null(log);
    run(&t2, sc_none, log);
    text = log_text(log);
    assert_int_equal(count(text, SHARED_WARNING), 0);
    xfree(text);
    fclose(log);
}

/* ---- TokenReview answers ---------------------------------------------------------- */

static void sc_tokens(struct gt *t)
{
    const char *const denied[] = {"Authorization: Bearer denied-token", NULL};
    const char *const malformed[] = {"Authorization: Bearer malformed-token", NULL};
    for (int i = 0; i < 2; i++) {
        CHECK(t, get(t, DISCOVERY, NULL, denied) == 401);
        CHECK(t, get(t, DISCOVERY, NULL, malformed) == 401);
    }
}

/* A denial (status.authenticated false) is cached; a malformed answer
 * (authenticated, but no username) is a failed review, not cached (it used
 * to be cached as a denial for 10 s). */
static void test_malformed_tokenreview_not_cached(void **state)
{
    (void)state;
    struct gt t = {0};
    t.cm = configmap("pca.crt", "cca.crt", "[]");
    FILE *log = tmpfile();
    assert_non_null(log);
    run(&t, sc_tokens, log);
    fclose(log);
    assert_int_equal(t.reviews_denied, 1);
    assert_int_equal(t.reviews_malformed, 2);
    assert_int_equal(t.access_reviews, 0);
}

/* ---- setup ---------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/extmetrics-glue-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char cmd[4096];
    const char *k = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    snprintf(cmd, sizeof(cmd),
             "set -e; cd %s; exec >/dev/null 2>&1;"
             "for n in pca cca; do openssl req -x509 %s -keyout $n.key -out $n.crt -subj /CN=$n "
             "  -days 2; done;"
             "printf 'extendedKeyUsage=clientAuth\\n' > client.ext;"
             "mk() { openssl req %s -keyout $1.key -out $1.csr -subj /CN=$2;"
             "  openssl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -days 2 "
             "  -extfile client.ext -out $1.crt; };"
             "mk proxy1 proxy-1 pca; mk proxy20 proxy-20 pca; mk proxy21 proxy-21 pca;"
             "mk alice alice cca",
             dir, k, k);
    if (system(cmd) != 0)
        return -1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    curl_global_cleanup();
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, getenv("TEST_DEBUG") ? UTIL_LOG_DEBUG : UTIL_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowed_names_uncapped),
        cmocka_unit_test(test_allowed_names_malformed),
        cmocka_unit_test(test_shared_ca_warning),
        cmocka_unit_test(test_malformed_tokenreview_not_cached),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

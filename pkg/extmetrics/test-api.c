/* SPDX-License-Identifier: Apache-2.0 */
/* End-to-end tests of the external metrics API over HTTPS on loopback:
 * golden JSON for every endpoint (files in testdata/), authentication and
 * authorization cases (front-proxy CN allowed/disallowed/wrong CA, no
 * certificate, bearer token allowed/denied/invalid, caching; client-CA
 * certificates as identities, with intermediates, expired, server-only, no
 * CN; CA bundles of an intermediate alone; key usages as Go checks them; the
 * SubjectAccessReview each identity gets, extra included), and forwarding to
 * a local HTTPS upstream (also for a half-closed client). The server runs
 * on the test's loop; a client thread drives it with libcurl (blocking, off
 * the loop). */
#include "extmetrics-int.h"
#include "extmetrics/extmetrics.h"
#include "util/util.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <math.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define T0 1795000000000LL /* 2026-11-18T11:06:40Z */

static char dir[256];
static const char *testdata;

struct env;
typedef void (*scenario_fn)(struct env *e);

struct env {
    uv_loop_t loop;
    struct extmetrics *em;
    struct extmetrics_fake_provider *fp;
    struct extmetrics_fake_authorizer *fa;
    struct httpd *upstream;
    uv_async_t done;
    uv_thread_t thr;
    scenario_fn scenario;
    int port;
    int closed;
    int fail_line;
    char fail_msg[1024];
    /* what the upstream saw */
    int up_requests;
    char up_auth[256], up_user[128], up_target[512], up_accept[128];
    char up_group[128], up_extra[2][128]; /* the first group, two escaped extra keys' values */
    char up_uid[128];
    /* run_client_ca: the CA bundles (base names in dir) ["cca", "ca1"] */
    const char *cca_name, *rh_name;
    /* test_probes: the provider starts not ready with this reason, until
     * the scenario sends ready_async (the loop thread then makes it ready
     * and posts ready_sem) */
    const char *not_ready;
    uv_async_t ready_async;
    uv_sem_t ready_sem;
};

#define CHECK(e, cond)                                                           \
    do {                                                                         \
        if (!(cond) && !(e)->fail_line) {                                        \
            (e)->fail_line = __LINE__;                                           \
            snprintf((e)->fail_msg, sizeof((e)->fail_msg), "%s", #cond);         \
        }                                                                        \
    } while (0)

/* ---- the client (runs in the scenario thread) ---------------------------- */

struct copts {
    const char *cert; /* base name in dir: <cert>.crt / <cert>.key */
    const char *method;
    const char *headers[8];
    const char *const *more_headers; /* nmore more, after headers */
    size_t nmore;
    const char *body; /* sent with the request (body_len bytes) */
    size_t body_len;
    bool absolute;    /* the request target in absolute form (https://host:port/path) */
};

struct resp {
    long status;
    struct util_buf body;
    char ctype[128];
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    util_buf_append(arg, p, size * n);
    return size * n;
}

static int get(struct env *e, const char *path, const struct copts *o, struct resp *r)
{
    memset(r, 0, sizeof(*r));
    CURL *h = curl_easy_init();
    char url[1024], crt[512], key[512];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", e->port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r->body);
    struct curl_slist *hl = NULL;
    for (int i = 0; o && o->headers[i]; i++)
        hl = curl_slist_append(hl, o->headers[i]);
    for (size_t i = 0; o && i < o->nmore; i++)
        hl = curl_slist_append(hl, o->more_headers[i]);
    if (hl)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    if (o && o->cert) {
        snprintf(crt, sizeof(crt), "%s/%s.crt", dir, o->cert);
        snprintf(key, sizeof(key), "%s/%s.key", dir, o->cert);
        curl_easy_setopt(h, CURLOPT_SSLCERT, crt);
        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
    }
    if (o && o->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, o->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)o->body_len);
    }
    if (o && o->method)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, o->method);
    if (o && o->absolute)
        curl_easy_setopt(h, CURLOPT_REQUEST_TARGET, url);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
        char *ct = NULL;
        curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
        snprintf(r->ctype, sizeof(r->ctype), "%s", ct ? ct : "");
    }
    if (!r->body.data)
        util_buf_puts(&r->body, "");
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return rc == CURLE_OK ? 0 : -1;
}

/* Compare a response with testdata/<golden> (JSON equality) and the code. */
static void golden(struct env *e, int line, const char *path, const struct copts *o, long code,
                   const char *file)
{
    struct resp r;
    char gp[512];
    json_error_t jerr;
    if (get(e, path, o, &r) != 0) {
        if (!e->fail_line) {
            e->fail_line = line;
            snprintf(e->fail_msg, sizeof(e->fail_msg), "GET %s failed", path);
        }
        util_buf_free(&r.body);
        return;
    }
    snprintf(gp, sizeof(gp), "%s/%s", testdata, file);
    json_t *want = json_load_file(gp, 0, &jerr);
    json_t *got = json_loads(r.body.data, 0, &jerr);
    bool ok = want && got && json_equal(want, got) && r.status == code &&
              strcmp(r.ctype, "application/json") == 0;
    if (!ok && !e->fail_line) {
        e->fail_line = line;
        snprintf(e->fail_msg, sizeof(e->fail_msg), "GET %s: status %ld (want %ld), %s%s body %s",
                 path, r.status, code, want ? "" : "golden file unreadable: ", want ? "" : gp,
                 r.body.data);
    }
    json_decref(want);
    json_decref(got);
    util_buf_free(&r.body);
}

#define GOLDEN(e, path, o, code, file) golden(e, __LINE__, path, o, code, file)

static long status_of(struct env *e, const char *path, const struct copts *o)
{
    struct resp r;
    long s = get(e, path, o, &r) == 0 ? r.status : -1;
    util_buf_free(&r.body);
    return s;
}

/* ---- the fixture ------------------------------------------------------------ */

static int64_t fixed_clock(void *arg)
{
    return T0 + 30000;
}

static void on_em_closed(void *arg)
{
    struct env *e = arg;
    e->closed++;
}

static void on_done(uv_async_t *a)
{
    struct env *e = a->data;
    extmetrics_close(e->em, on_em_closed, e);
    if (e->upstream)
        httpd_close(e->upstream, on_em_closed, e);
    uv_close((uv_handle_t *)a, NULL);
}

static void thread_main(void *arg)
{
    struct env *e = arg;
    e->scenario(e);
    uv_async_send(&e->done);
}

static void sample(struct env *e, const char *ns, const char *name, enum extmetrics_metric m,
                   double v, int64_t ts, int64_t window, bool stale)
{
    struct extmetrics_sample s = {.present = true, .value = v, .timestamp_ms = ts,
                                  .window_s = window, .stale = stale};
    extmetrics_fake_provider_sample(e->fp, ns, name, m, s);
}

static void fill_provider(struct env *e)
{
    static const char *const llama[] = {"app", "llama", "model", "llama-70b", "tier", "online",
                                        NULL};
    static const char *const mistral[] = {"app", "mistral", "model", "mistral-7b", "tier",
                                          "batch", "deployment", "spoofed", NULL};
    extmetrics_fake_provider_set(e->fp, "llm", "llama", llama);
    extmetrics_fake_provider_set(e->fp, "llm", "mistral", mistral);
    extmetrics_fake_provider_set(e->fp, "old", "ancient", NULL);
    sample(e, "llm", "llama", EXTMETRICS_DESIRED_REPLICAS, 3, T0, 0, false);
    sample(e, "llm", "llama", EXTMETRICS_REQUESTS_PER_GPU, 12.5, T0, 60, false);
    sample(e, "llm", "llama", EXTMETRICS_FORECAST_REQUESTS_PER_GPU, 14.25, T0, 300, false);
    sample(e, "llm", "llama", EXTMETRICS_UTILIZATION, 0.82, T0, 60, false);
    sample(e, "llm", "mistral", EXTMETRICS_DESIRED_REPLICAS, 2, T0, 0, false);
    sample(e, "llm", "mistral", EXTMETRICS_REQUESTS_PER_GPU, 4, T0 - 5000, 60, false);
    sample(e, "llm", "mistral", EXTMETRICS_UTILIZATION, 0.5, T0, 60, true);
    sample(e, "old", "ancient", EXTMETRICS_DESIRED_REPLICAS, 1, T0 - 600000, 0, false);
    /* namespace mix: "held" has its metrics unavailable (rates not numbers,
     * stale); "early" has valid metrics and no forecast yet */
    extmetrics_fake_provider_set(e->fp, "mix", "good", NULL);
    extmetrics_fake_provider_set(e->fp, "mix", "held", NULL);
    extmetrics_fake_provider_set(e->fp, "mix", "early", NULL);
    sample(e, "mix", "good", EXTMETRICS_REQUESTS_PER_GPU, 5, T0, 60, false);
    sample(e, "mix", "good", EXTMETRICS_FORECAST_REQUESTS_PER_GPU, 6, T0, 300, false);
    struct extmetrics_sample nan_stale = {.present = false, .value = NAN, .timestamp_ms = T0,
                                          .window_s = 60, .stale = true};
    extmetrics_fake_provider_sample(e->fp, "mix", "held", EXTMETRICS_REQUESTS_PER_GPU, nan_stale);
    sample(e, "mix", "early", EXTMETRICS_REQUESTS_PER_GPU, 7, T0, 60, false);
    struct extmetrics_sample nan_fresh = {.present = false, .value = NAN, .timestamp_ms = T0,
                                          .window_s = 300, .stale = false};
    extmetrics_fake_provider_sample(e->fp, "mix", "early", EXTMETRICS_FORECAST_REQUESTS_PER_GPU,
                                    nan_fresh);
}

static char *slurp(const char *path, size_t *len)
{
    struct util_buf b = {0};
    FILE *f = fopen(path, "rb");
    char tmp[4096];
    size_t n;
    while (f && (n = fread(tmp, 1, sizeof(tmp), f)) > 0)
        util_buf_append(&b, tmp, n);
    if (f)
        fclose(f);
    if (!b.data)
        util_buf_puts(&b, "");
    *len = b.len;
    return util_buf_steal(&b);
}

static void set_front_proxy(struct env *e, const char *ca)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s.crt", dir, ca);
    size_t len;
    char *pem = slurp(p, &len);
    static const char *const allowed[] = {"front-proxy-client"};
    static const char *const user_h[] = {"X-Remote-User"};
    static const char *const group_h[] = {"X-Remote-Group"};
    static const char *const extra_p[] = {"X-Remote-Extra-"};
    static const char *const uid_h[] = {"X-Remote-Uid"};
    struct extmetrics_requestheader rh = {
        .client_ca_pem = pem, .client_ca_len = len,
        .allowed_names = allowed, .nallowed_names = 1,
        .username_headers = user_h, .nusername_headers = 1,
        .uid_headers = uid_h, .nuid_headers = 1,
        .group_headers = group_h, .ngroup_headers = 1,
        .extra_prefixes = extra_p, .nextra_prefixes = 1,
    };
    assert_int_equal(extmetrics_set_requestheader(e->em, &rh), 0);
    xfree(pem);
}

static void run(struct env *e, struct extmetrics_config *cfg, scenario_fn fn)
{
    e->fp = extmetrics_fake_provider_new();
    e->fa = extmetrics_fake_authorizer_new(&e->loop);
    fill_provider(e);
    if (e->not_ready)
        extmetrics_fake_provider_not_ready(e->fp, e->not_ready);
    cfg->listen.host = "127.0.0.1";
    cfg->clock = fixed_clock;
    struct extmetrics_provider p = extmetrics_fake_provider_get(e->fp);
    struct extmetrics_authorizer a = extmetrics_fake_authorizer_get(e->fa);
    assert_int_equal(extmetrics_new(&e->loop, cfg, &p, &a, &e->em), 0);
    e->port = extmetrics_port(e->em);
    set_front_proxy(e, "ca1");
    uv_async_init(&e->loop, &e->done, on_done);
    e->done.data = e;
    e->scenario = fn;
    uv_thread_create(&e->thr, thread_main, e);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_thread_join(&e->thr);
    if (e->fail_line)
        fail_msg("scenario failed at line %d: %s", e->fail_line, e->fail_msg);
    assert_int_equal(e->closed, e->upstream ? 2 : 1);
    assert_int_equal(uv_loop_close(&e->loop), 0);
}

static void env_free(struct env *e)
{
    extmetrics_fake_provider_free(e->fp);
    extmetrics_fake_authorizer_free(e->fa);
}

/* the aggregator's identity, through the front proxy */
static const struct copts admin = {
    .cert = "fp", .headers = {"X-Remote-User: system:kube-aggregator",
                              "X-Remote-Group: system:masters", NULL}};

#define BASE "/apis/external.metrics.k8s.io/v1beta1"

/* ---- golden endpoints ---------------------------------------------------------- */

static void sc_endpoints(struct env *e)
{
    GOLDEN(e, BASE, &admin, 200, "resources.json");
    GOLDEN(e, BASE "/", &admin, 200, "resources.json");
    GOLDEN(e, "/apis/external.metrics.k8s.io", &admin, 200, "group.json");
    /* /apis: the aggregator's aggregated-discovery probe gets 406 (it then
     * reads the per-version list); a plain client the APIGroupList */
    GOLDEN(e, "/apis", &admin, 200, "apis.json");
    struct copts probe = admin;
    probe.headers[2] = "Accept: application/json;g=apidiscovery.k8s.io;v=v2;"
                       "as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;"
                       "v=v2beta1;as=APIGroupDiscoveryList";
    GOLDEN(e, "/apis", &probe, 406, "apis-406.json");
    probe.headers[2] = "Accept: application/json;g=apidiscovery.k8s.io;v=v2;"
                       "as=APIGroupDiscoveryList, application/json";
    GOLDEN(e, "/apis", &probe, 200, "apis.json");
    probe.headers[2] = "Accept: application/json; charset=utf-8; lang=en";
    GOLDEN(e, "/apis", &probe, 200, "apis.json");
    probe.headers[2] = "Accept: application/yaml";
    GOLDEN(e, "/apis", &probe, 406, "apis-406.json");
    GOLDEN(e, "/openapi/v2", &admin, 404, "openapi-404.json");
    GOLDEN(e, "/openapi/v3", &admin, 404, "openapi-404.json");
    GOLDEN(e, "/nope", &admin, 404, "apis-404.json");
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_desired_replicas?labelSelector=deployment%3Dllama",
           &admin, 200, "desired-llama.json");
    /* metric names arrive lower-cased but are matched case-insensitively */
    GOLDEN(e, BASE "/namespaces/llm/GPUSCALER_Desired_Replicas?labelSelector=deployment%3Dllama",
           &admin, 200, "desired-llama.json");
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_requests_per_gpu", &admin, 200, "rpg-all.json");
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_requests_per_gpu?labelSelector=", &admin, 200,
           "rpg-all.json");
    GOLDEN(e,
           BASE "/namespaces/llm/gpuscaler_forecast_requests_per_gpu?labelSelector="
                "model+in+(llama-70b,qwen),tier!%3Dbatch",
           &admin, 200, "forecast-set.json");
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_utilization?labelSelector=app%3Dllama", &admin, 200,
           "util-llama.json");
    /* the provider's own "deployment" label never shadows the name */
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_desired_replicas?labelSelector=deployment%3Dspoofed",
           &admin, 404, "notfound-spoofed.json");
    GOLDEN(e, BASE "/namespaces/llm/vllm_queue", &admin, 404, "notfound-metric.json");
    GOLDEN(e, BASE "/namespaces/other/gpuscaler_desired_replicas", &admin, 404,
           "notfound-namespace.json");
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_desired_replicas?labelSelector=app%3Dqwen", &admin,
           404, "notfound-selector.json");
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_utilization?labelSelector=app%3Dmistral", &admin,
           404, "stale-flag.json");
    GOLDEN(e, BASE "/namespaces/old/gpuscaler_desired_replicas", &admin, 404, "stale-old.json");
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_desired_replicas?labelSelector=app%20in%20x", &admin,
           400, "bad-selector.json");
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_desired_replicas?labelSelector=%zz", &admin, 400,
           "bad-query.json");
    GOLDEN(e, BASE "/namespaces/Bad_NS/gpuscaler_desired_replicas", &admin, 400, "bad-path.json");
    /* metric names that are not path-safe: invalid UTF-8, a dot segment, a space */
    GOLDEN(e, BASE "/namespaces/llm/%ff", &admin, 400, "bad-path.json");
    GOLDEN(e, BASE "/namespaces/llm/%2e%2e", &admin, 400, "bad-path.json");
    GOLDEN(e, BASE "/namespaces/llm/%2e", &admin, 400, "bad-path.json");
    GOLDEN(e, BASE "/namespaces/llm/a%20b", &admin, 400, "bad-path.json");
    struct copts post = admin;
    post.method = "POST";
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_desired_replicas", &post, 405, "method.json");
    /* probes are open, everything else needs credentials */
    struct resp r;
    const char *open[] = {"/healthz", "/livez", "/readyz", "/readyz/ping"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(open); i++) {
        CHECK(e, get(e, open[i], NULL, &r) == 0 && r.status == 200 &&
                     strcmp(r.body.data, "ok") == 0);
        util_buf_free(&r.body);
    }
    /* no credentials: system:anonymous (group system:unauthenticated), as an extension
     * apiserver's delegated authentication makes it, and the access review says no */
    int sars = extmetrics_fake_authorizer_authz_calls(e->fa);
    GOLDEN(e, BASE, NULL, 403, "forbidden-anonymous.json");
    CHECK(e, extmetrics_fake_authorizer_authz_calls(e->fa) == sars + 1);
    CHECK(e, status_of(e, BASE "/namespaces/llm/gpuscaler_desired_replicas", NULL) == 403);
    /* a Deployment whose metrics are unavailable (its rate not a number) is
     * stale: the whole selector answers 404, never the others' partial sum */
    CHECK(e, get(e, BASE "/namespaces/mix/gpuscaler_requests_per_gpu", &admin, &r) == 0 &&
                 r.status == 404 && strstr(r.body.data, "\\\"held\\\"") &&
                 strstr(r.body.data, "is stale"));
    util_buf_free(&r.body);
    /* a forecast not made yet (valid metrics) is only left out */
    CHECK(e, get(e, BASE "/namespaces/mix/gpuscaler_forecast_requests_per_gpu", &admin, &r) == 0 &&
                 r.status == 200 && strstr(r.body.data, "\"good\"") &&
                 !strstr(r.body.data, "\"early\""));
    util_buf_free(&r.body);
}

static void test_endpoints(void **state)
{
    struct env e = {0};
    uv_loop_init(&e.loop);
    struct extmetrics_config cfg = {0};
    run(&e, &cfg, sc_endpoints);
    /* everything went through system:masters (no access reviews) but the two anonymous
     * requests' */
    assert_int_equal(extmetrics_fake_authorizer_authz_calls(e.fa), 2);
    env_free(&e);
}

/* ---- probes ------------------------------------------------------------------------- */

static void on_ready_async(uv_async_t *a)
{
    struct env *e = a->data;
    extmetrics_fake_provider_not_ready(e->fp, NULL);
    uv_close((uv_handle_t *)a, NULL);
    uv_sem_post(&e->ready_sem);
}

/* the kubelet's and the aggregator's probes: no credentials */
static bool probe_is(struct env *e, const char *path, long status, const char *body)
{
    struct resp r;
    bool ok = get(e, path, NULL, &r) == 0 && r.status == status && r.body.data &&
              strcmp(r.body.data, body) == 0 && strncmp(r.ctype, "text/plain", 10) == 0;
    util_buf_free(&r.body);
    return ok;
}

static void sc_probes(struct env *e)
{
    /* before the provider can serve values: alive, not ready */
    CHECK(e, probe_is(e, "/healthz", 200, "ok"));
    CHECK(e, probe_is(e, "/livez", 200, "ok"));
    CHECK(e, probe_is(e, "/readyz", 503, "not ready: caches syncing"));
    CHECK(e, probe_is(e, "/readyz/", 503, "not ready: caches syncing"));
    CHECK(e, probe_is(e, "/readyz/ping", 503, "not ready: caches syncing"));
    /* discovery does not wait for it (the APIService stays Available) */
    GOLDEN(e, BASE, &admin, 200, "resources.json");
    uv_async_send(&e->ready_async);
    uv_sem_wait(&e->ready_sem);
    CHECK(e, probe_is(e, "/readyz", 200, "ok"));
    CHECK(e, probe_is(e, "/readyz/ping", 200, "ok"));
    CHECK(e, probe_is(e, "/healthz", 200, "ok"));
}

static void test_probes(void **state)
{
    struct env e = {0};
    uv_loop_init(&e.loop);
    assert_int_equal(uv_sem_init(&e.ready_sem, 0), 0);
    uv_async_init(&e.loop, &e.ready_async, on_ready_async);
    e.ready_async.data = &e;
    e.not_ready = "caches syncing";
    struct extmetrics_config cfg = {0};
    run(&e, &cfg, sc_probes);
    uv_sem_destroy(&e.ready_sem);
    env_free(&e);
}

/* ---- request bodies ----------------------------------------------------------------- */

/* The API is read-only: a request body over EXTMETRICS_MAX_BODY_BYTES is
 * refused with 413 as its headers arrive, before authentication, saying the
 * limit (the listener took httpd's 1 MiB default: an unknown client could
 * make it buffer that much per connection, and it was answered 405 after);
 * one within it still gets the 405 of a read-only API. */
static void sc_bodies(struct env *e)
{
    static char big[EXTMETRICS_MAX_BODY_BYTES + 1];
    memset(big, 'b', sizeof(big));
    struct copts o = {.method = "POST", .body = big, .body_len = sizeof(big)};
    struct resp r;
    CHECK(e, get(e, BASE, &o, &r) == 0);
    CHECK(e, r.status == 413 && strstr(r.body.data, "at most 4096 bytes") != NULL);
    util_buf_free(&r.body);
    o.cert = admin.cert; /* the aggregator too */
    memcpy(o.headers, admin.headers, sizeof(o.headers));
    CHECK(e, get(e, BASE "/namespaces/llm/gpuscaler_desired_replicas", &o, &r) == 0);
    CHECK(e, r.status == 413);
    util_buf_free(&r.body);
    o.body_len = 100;
    CHECK(e, get(e, BASE, &o, &r) == 0);
    CHECK(e, r.status == 405);
    util_buf_free(&r.body);
}

static void test_bodies(void **state)
{
    (void)state;
    struct env e = {0};
    uv_loop_init(&e.loop);
    struct extmetrics_config cfg = {0};
    run(&e, &cfg, sc_bodies);
    env_free(&e);
}

/* ---- authentication and authorization --------------------------------------------- */

#define DESIRED BASE "/namespaces/llm/gpuscaler_desired_replicas?labelSelector=app%3Dllama"

static void sc_auth(struct env *e)
{
    /* front proxy with an allowed CN: the HPA's identity, authorized by review */
    struct copts hpa = {
        .cert = "fp",
        .headers = {"X-Remote-User: system:serviceaccount:kube-system:horizontal-pod-autoscaler",
                    "X-Remote-Group: system:serviceaccounts", NULL}};
    CHECK(e, status_of(e, DESIRED, &hpa) == 200);
    CHECK(e, status_of(e, DESIRED, &hpa) == 200); /* cached decision */
    /* the same user on a metric it may not read */
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_utilization", &hpa, 403, "forbidden-hpa.json");
    /* a verified certificate with a CN that is not an allowed proxy: headers ignored */
    struct copts wrong_cn = hpa;
    wrong_cn.cert = "notproxy";
    GOLDEN(e, DESIRED, &wrong_cn, 401, "unauthorized.json");
    /* the allowed CN, but signed by another CA */
    struct copts wrong_ca = hpa;
    wrong_ca.cert = "fp-ca2";
    CHECK(e, status_of(e, DESIRED, &wrong_ca) == 401);
    /* expired proxy certificate */
    struct copts expired = hpa;
    expired.cert = "fp-expired";
    CHECK(e, status_of(e, DESIRED, &expired) == 401);
    /* no certificate: X-Remote-User is not trusted, the caller is anonymous */
    struct copts nocert = hpa;
    nocert.cert = NULL;
    CHECK(e, status_of(e, DESIRED, &nocert) == 403);
    /* reviewed as the apiserver's webhook authorizer sends it: that group alone (with
     * system:authenticated it would have every authenticated user's rights) */
    CHECK(e, strstr(extmetrics_fake_authorizer_last_review(e->fa),
                    "\"user\":\"system:anonymous\",\"groups\":[\"system:unauthenticated\"]") != NULL);
    CHECK(e, !strstr(extmetrics_fake_authorizer_last_review(e->fa), "system:authenticated"));
    /* bearer tokens */
    struct copts good = {.headers = {"Authorization: Bearer good-token", NULL}};
    CHECK(e, status_of(e, DESIRED, &good) == 200);
    CHECK(e, status_of(e, DESIRED, &good) == 200);
    struct copts denied = {.headers = {"Authorization: Bearer denied-token", NULL}};
    GOLDEN(e, DESIRED, &denied, 403, "forbidden.json");
    struct copts bad = {.headers = {"Authorization: Bearer bad-token", NULL}};
    GOLDEN(e, DESIRED, &bad, 401, "unauthorized.json");
    CHECK(e, status_of(e, DESIRED, &bad) == 401);
    /* the header read as the apiserver reads it: "bearer" in any case, the
     * token up to the next space (what follows ignored); an empty token (two
     * spaces) or another scheme is no credential, reviewed by no one: the
     * caller is anonymous */
    struct copts junk = {.headers = {"Authorization: bearer good-token junk", NULL}};
    CHECK(e, status_of(e, DESIRED, &junk) == 200);
    struct copts junk_bad = {.headers = {"Authorization: Bearer bad-token good-token", NULL}};
    CHECK(e, status_of(e, DESIRED, &junk_bad) == 401);
    int calls = extmetrics_fake_authorizer_authn_calls(e->fa);
    struct copts spaced = {.headers = {"Authorization: Bearer  good-token", NULL}};
    CHECK(e, status_of(e, DESIRED, &spaced) == 403);
    struct copts basic = {.headers = {"Authorization: Basic Z29vZC10b2tlbg==", NULL}};
    CHECK(e, status_of(e, DESIRED, &basic) == 403);
    CHECK(e, extmetrics_fake_authorizer_authn_calls(e->fa) == calls);
    /* a valid token wins even with a disallowed certificate */
    struct copts both = {.cert = "notproxy", .headers = {"Authorization: Bearer good-token",
                                                          "X-Remote-User: someone-else", NULL}};
    CHECK(e, status_of(e, DESIRED, &both) == 200);
    /* discovery as a token user needs a non-resource rule */
    CHECK(e, status_of(e, BASE, &good) == 200);
    CHECK(e, status_of(e, BASE, &denied) == 403);
}

static void test_auth(void **state)
{
    struct env e = {0};
    uv_loop_init(&e.loop);
    struct extmetrics_config cfg = {0};
    struct extmetrics_fake_authorizer *fa = extmetrics_fake_authorizer_new(&e.loop);
    extmetrics_fake_authorizer_add_token(fa, "good-token", "metrics-reader", "readers");
    extmetrics_fake_authorizer_add_token(fa, "denied-token", "denied-user", NULL);
    extmetrics_fake_authorizer_allow(fa, "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
                                     "list", "gpuscaler_desired_replicas");
    extmetrics_fake_authorizer_allow(fa, "metrics-reader", "list", "*");
    extmetrics_fake_authorizer_allow(fa, "metrics-reader", "get", "*");
    /* run() makes a rule-less fake; this test builds the env by hand */
    e.fp = extmetrics_fake_provider_new();
    e.fa = fa;
    fill_provider(&e);
    cfg.listen.host = "127.0.0.1";
    cfg.clock = fixed_clock;
    struct extmetrics_provider p = extmetrics_fake_provider_get(e.fp);
    struct extmetrics_authorizer a = extmetrics_fake_authorizer_get(e.fa);
    assert_int_equal(extmetrics_new(&e.loop, &cfg, &p, &a, &e.em), 0);
    e.port = extmetrics_port(e.em);
    set_front_proxy(&e, "ca1");
    uv_async_init(&e.loop, &e.done, on_done);
    e.done.data = &e;
    e.scenario = sc_auth;
    uv_thread_create(&e.thr, thread_main, &e);
    uv_run(&e.loop, UV_RUN_DEFAULT);
    uv_thread_join(&e.thr);
    if (e.fail_line)
        fail_msg("scenario failed at line %d: %s", e.fail_line, e.fail_msg);
    assert_int_equal(e.closed, 1);
    assert_int_equal(uv_loop_close(&e.loop), 0);
    /* token reviews: good (once, then cached), denied, bad (once, then cached) */
    assert_int_equal(extmetrics_fake_authorizer_authn_calls(fa), 3);
    /* access reviews: hpa desired (cached after the first), hpa utilization,
     * anonymous desired (no certificate, an empty token, Basic: cached), reader
     * desired (cached), denied desired, reader discovery, denied discovery */
    assert_int_equal(extmetrics_fake_authorizer_authz_calls(fa), 7);
    env_free(&e);
}

/* ---- client certificates and extra --------------------------------------------------- */

/* The last SubjectAccessReview the authorizer was asked for equals testdata/<file>. */
static void last_review(struct env *e, int line, const char *file)
{
    char gp[512];
    snprintf(gp, sizeof(gp), "%s/%s", testdata, file);
    json_t *want = json_load_file(gp, JSON_PRESERVE_ORDER, NULL);
    char *w = want ? json_dumps(want, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    const char *got = extmetrics_fake_authorizer_last_review(e->fa);
    if ((!w || strcmp(w, got) != 0) && !e->fail_line) {
        e->fail_line = line;
        snprintf(e->fail_msg, sizeof(e->fail_msg), "review: got %s want %s (%s)", got,
                 w ? w : "(unreadable)", file);
    }
    free(w);
    json_decref(want);
}

#define LAST_REVIEW(e, file) last_review(e, __LINE__, file)

#define DESIRED_LLM BASE "/namespaces/llm/gpuscaler_desired_replicas"

static void sc_client_certs(struct env *e)
{
    /* a certificate of the client CA is the identity: CN user, O groups */
    struct copts alice = {.cert = "alice"};
    CHECK(e, status_of(e, DESIRED_LLM, &alice) == 200);
    LAST_REVIEW(e, "sar-client-cert.json");
    int calls = extmetrics_fake_authorizer_authz_calls(e->fa);
    /* ... and is no proxy: its headers assert nothing (same identity, cached) */
    struct copts alice_hdr = {
        .cert = "alice",
        .headers = {"X-Remote-User: mallory", "X-Remote-Group: system:masters", NULL}};
    CHECK(e, status_of(e, DESIRED_LLM, &alice_hdr) == 200);
    CHECK(e, extmetrics_fake_authorizer_authz_calls(e->fa) == calls);
    /* the proxy's CN from the client CA is a plain user "front-proxy-client",
     * not the aggregator it claims to be */
    struct copts fake_proxy = {.cert = "fp-cca",
                               .headers = {"X-Remote-User: system:kube-aggregator",
                                           "X-Remote-Group: system:masters", NULL}};
    CHECK(e, status_of(e, DESIRED_LLM, &fake_proxy) == 403);
    CHECK(e, strstr(extmetrics_fake_authorizer_last_review(e->fa),
                    "\"user\":\"front-proxy-client\"") != NULL);
    /* a chain through an intermediate the client sends along */
    struct copts bob = {.cert = "bob"};
    CHECK(e, status_of(e, DESIRED_LLM, &bob) == 200);
    CHECK(e, strstr(extmetrics_fake_authorizer_last_review(e->fa),
                    "\"user\":\"bob\",\"groups\":[\"team-c\",\"system:authenticated\"]") != NULL);
    /* several CNs: the last is the user, as Go's pkix.Name has it (an
     * apiserver sees alice, so must we), and the last is the front proxy's
     * name (some-client, not an allowed name: its headers are not believed) */
    struct copts twocn = {.cert = "twocn"};
    CHECK(e, status_of(e, DESIRED_LLM, &twocn) == 200);
    CHECK(e, strstr(extmetrics_fake_authorizer_last_review(e->fa), "\"user\":\"alice\"") != NULL);
    struct copts fp2 = {.cert = "fp-twocn",
                        .headers = {"X-Remote-User: system:kube-aggregator",
                                    "X-Remote-Group: system:masters", NULL}};
    CHECK(e, status_of(e, DESIRED_LLM, &fp2) == 401);
    /* not identities: expired, server-only, no CN, and the front-proxy CA's own */
    const char *bad[] = {"alice-expired", "alice-server", "nobody", "notproxy"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        struct copts o = {.cert = bad[i]};
        CHECK(e, status_of(e, DESIRED_LLM, &o) == 401);
    }
    /* the front proxy still works, and its user's extra reaches the review */
    struct copts jane = {.cert = "fp",
                         .headers = {"X-Remote-User: jane", "X-Remote-Group: devs",
                                     "X-Remote-Extra-Scopes: view", "X-Remote-Extra-Scopes: edit",
                                     "X-Remote-Extra-Acme.com%2fProject: llm", NULL}};
    CHECK(e, status_of(e, DESIRED_LLM, &jane) == 200);
    LAST_REVIEW(e, "sar-front-proxy-extra.json");
    /* as does a token user's (TokenReview's user.extra) */
    struct copts scoped = {.headers = {"Authorization: Bearer scoped-token", NULL}};
    CHECK(e, status_of(e, DESIRED_LLM, &scoped) == 200);
    LAST_REVIEW(e, "sar-token-extra.json");
    /* empty X-Remote-Group values are no group (headerrequest's
     * allHeaderValues skips them), empty extra values stay (newExtra keeps
     * them); curl sends "Name;" as an empty header */
    struct copts empty = {.cert = "fp",
                          .headers = {"X-Remote-User: jane", "X-Remote-Group;",
                                      "X-Remote-Group: devs", "X-Remote-Extra-Scopes;", NULL}};
    CHECK(e, status_of(e, DESIRED_LLM, &empty) == 200);
    CHECK(e, strstr(extmetrics_fake_authorizer_last_review(e->fa),
                    "\"groups\":[\"devs\",\"system:authenticated\"],"
                    "\"extra\":{\"scopes\":[\"\"]}") != NULL);
    /* a user in 300 groups (a directory's, through OIDC): the aggregator sends a header
     * each, as client-go's SetAuthProxyHeaders does, and Go's server has no limit on
     * their number (1 MiB of headers); they were refused past 100 headers (431) */
    enum { N_TEAMS = 300 };
    char *groups[N_TEAMS];
    for (int i = 0; i < N_TEAMS; i++)
        groups[i] = xasprintf("X-Remote-Group: directory-team-%03d", i);
    struct copts many = {.cert = "fp", .headers = {"X-Remote-User: jane", NULL},
                         .more_headers = (const char *const *)groups, .nmore = N_TEAMS};
    CHECK(e, status_of(e, DESIRED_LLM, &many) == 200);
    CHECK(e, strstr(extmetrics_fake_authorizer_last_review(e->fa),
                    "\"directory-team-299\",\"system:authenticated\"]") != NULL);
    for (int i = 0; i < N_TEAMS; i++)
        xfree(groups[i]);
    /* extra is part of the identity: another value is another decision */
    calls = extmetrics_fake_authorizer_authz_calls(e->fa);
    jane.headers[3] = "X-Remote-Extra-Scopes: admin";
    CHECK(e, status_of(e, DESIRED_LLM, &jane) == 200);
    CHECK(e, extmetrics_fake_authorizer_authz_calls(e->fa) == calls + 1);
}

/* The client CA taken back, and the front-proxy CA rotated from ca1 to ca2. */
static void sc_no_client_ca(struct env *e)
{
    struct copts alice = {.cert = "alice"};
    CHECK(e, status_of(e, DESIRED_LLM, &alice) == 401);
    CHECK(e, status_of(e, DESIRED_LLM, &admin) == 401); /* signed by the old CA */
    struct copts admin2 = admin;
    admin2.cert = "fp-ca2";
    CHECK(e, status_of(e, DESIRED_LLM, &admin2) == 200);
}

static void run_client_ca(struct env *e, bool client_ca, scenario_fn fn)
{
    uv_loop_init(&e->loop);
    struct extmetrics_config cfg = {0};
    e->fa = extmetrics_fake_authorizer_new(&e->loop);
    extmetrics_fake_authorizer_add_token(e->fa, "scoped-token", "scoped-reader", "readers");
    extmetrics_fake_authorizer_add_token_extra(e->fa, "scoped-token", "scopes", "metrics");
    const char *users[] = {"alice", "bob", "jane", "scoped-reader"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(users); i++)
        extmetrics_fake_authorizer_allow(e->fa, users[i], "list", "gpuscaler_desired_replicas");
    e->fp = extmetrics_fake_provider_new();
    fill_provider(e);
    cfg.listen.host = "127.0.0.1";
    cfg.clock = fixed_clock;
    struct extmetrics_provider p = extmetrics_fake_provider_get(e->fp);
    struct extmetrics_authorizer a = extmetrics_fake_authorizer_get(e->fa);
    assert_int_equal(extmetrics_new(&e->loop, &cfg, &p, &a, &e->em), 0);
    e->port = extmetrics_port(e->em);
    set_front_proxy(e, e->rh_name ? e->rh_name : "ca1");
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.crt", dir, e->cca_name ? e->cca_name : "cca");
    size_t len;
    char *pem = slurp(path, &len);
    assert_int_equal(extmetrics_set_client_ca(e->em, "junk", 4), -EINVAL);
    assert_int_equal(extmetrics_set_client_ca(e->em, pem, len), 0);
    if (!client_ca) { /* set, then taken back; and a new front-proxy CA */
        assert_int_equal(extmetrics_set_client_ca(e->em, NULL, 0), 0);
        set_front_proxy(e, "ca2");
    }
    xfree(pem);
    uv_async_init(&e->loop, &e->done, on_done);
    e->done.data = e;
    e->scenario = fn;
    uv_thread_create(&e->thr, thread_main, e);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_thread_join(&e->thr);
    if (e->fail_line)
        fail_msg("scenario failed at line %d: %s", e->fail_line, e->fail_msg);
    assert_int_equal(e->closed, 1);
    assert_int_equal(uv_loop_close(&e->loop), 0);
}

static void test_client_certs(void **state)
{
    struct env e = {0};
    run_client_ca(&e, true, sc_client_certs);
    env_free(&e);
    struct env e2 = {0};
    run_client_ca(&e2, false, sc_no_client_ca);
    env_free(&e2);
}

/* Both bundles hold an intermediate CA alone (the root kept offline): each
 * intermediate is an anchor, as every certificate of Go's x509 Roots is, so
 * its certificates verify (they used to be refused for want of the root);
 * a certificate of the root itself does not. */
static void sc_intermediate_cas(struct env *e)
{
    struct copts bob = {.cert = "bob0"}; /* the leaf alone */
    CHECK(e, status_of(e, DESIRED_LLM, &bob) == 200);
    CHECK(e, strstr(extmetrics_fake_authorizer_last_review(e->fa), "\"user\":\"bob\"") != NULL);
    struct copts bob_chain = {.cert = "bob"}; /* with the intermediate sent along */
    CHECK(e, status_of(e, DESIRED_LLM, &bob_chain) == 200);
    struct copts alice = {.cert = "alice"}; /* issued by the root of the client CA */
    CHECK(e, status_of(e, DESIRED_LLM, &alice) == 401);
    struct copts proxy = admin;
    proxy.cert = "fp-i"; /* front-proxy-client of the front proxy's intermediate */
    CHECK(e, status_of(e, DESIRED_LLM, &proxy) == 200);
    CHECK(e, status_of(e, DESIRED_LLM, &admin) == 401); /* ca1's own, not the intermediate's */
}

static void test_intermediate_cas(void **state)
{
    (void)state;
    struct env e = {.cca_name = "inter", .rh_name = "fpinter"};
    run_client_ca(&e, true, sc_intermediate_cas);
    env_free(&e);
}

/* Client certificates are checked as Go's x509 Verify checks them for
 * ExtKeyUsageClientAuth: an extended key usage of clientAuth or any (or
 * none) on every certificate of the chain, whatever the key usage (OpenSSL's
 * SSL client purpose, used before, refused a key usage without
 * digitalSignature or keyAgreement, and anyExtendedKeyUsage). */
static void test_client_usage_as_go(void **state)
{
    (void)state;
    char p[512];
    size_t len;
    snprintf(p, sizeof(p), "%s/cca.crt", dir);
    char *cca = slurp(p, &len);
    X509_STORE *st = em_store_from_pem(cca, len);
    assert_non_null(st);
    snprintf(p, sizeof(p), "%s/inter.crt", dir);
    char *inter = slurp(p, &len);
    X509_STORE *ist = em_store_from_pem(inter, len);
    assert_non_null(ist);
    static const struct {
        const char *cert;
        bool inter_store; /* against inter.crt alone, else cca.crt */
        int want;
    } cases[] = {
        {"alice", false, 0},
        {"alice-ku", false, 0},        /* keyUsage keyEncipherment only, EKU clientAuth */
        {"alice-any", false, 0},       /* EKU anyExtendedKeyUsage */
        {"alice-noeku", false, 0},     /* no EKU at all */
        {"alice-server", false, -EACCES}, /* EKU serverAuth only */
        {"carol", false, -EACCES},     /* clientAuth leaf under a serverAuth-only CA */
        {"bob", false, 0},             /* through the intermediate it sends along */
        {"bob0", true, 0},             /* the intermediate alone is the anchor */
        {"bob", true, 0},
        {"alice", true, -EACCES},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        snprintf(p, sizeof(p), "%s/%s.crt", dir, cases[i].cert);
        char *chain = slurp(p, &len);
        int rc = em_chain_verify(cases[i].inter_store ? ist : st, chain);
        if (rc != cases[i].want)
            fail_msg("%s against %s: %d, want %d", cases[i].cert,
                     cases[i].inter_store ? "inter" : "cca", rc, cases[i].want);
        xfree(chain);
    }
    X509_STORE_free(st);
    X509_STORE_free(ist);
    xfree(cca);
    xfree(inter);
}

/* When the front-proxy and client CA bundles share a certificate and no
 * allowed names restrict the proxy, any certificate of the client CA can
 * assert users in headers: extmetrics_client_ca_can_proxy says so (the
 * daemon warns). */
static void test_client_ca_can_proxy(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct extmetrics_fake_provider *fp = extmetrics_fake_provider_new();
    struct extmetrics_provider p = extmetrics_fake_provider_get(fp);
    struct extmetrics *em = NULL;
    struct extmetrics_config cfg = {.listen = {.host = "127.0.0.1"}, .disable_auth = true};
    assert_int_equal(extmetrics_new(&loop, &cfg, &p, NULL, &em), 0);
    char path[512];
    size_t clen, alen;
    snprintf(path, sizeof(path), "%s/cca.crt", dir);
    char *cca = slurp(path, &clen);
    snprintf(path, sizeof(path), "%s/ca1.crt", dir);
    char *ca1 = slurp(path, &alen);
    struct util_buf both = {0};
    util_buf_append(&both, ca1, alen);
    util_buf_append(&both, cca, clen);
    static const char *const user_h[] = {"X-Remote-User"};
    static const char *const allowed[] = {"front-proxy-client"};
    struct extmetrics_requestheader rh = {.client_ca_pem = cca, .client_ca_len = clen,
                                          .username_headers = user_h, .nusername_headers = 1};
    assert_int_equal(extmetrics_set_requestheader(em, &rh), 0);
    assert_false(extmetrics_client_ca_can_proxy(em)); /* no client CA yet */
    assert_int_equal(extmetrics_set_client_ca(em, cca, clen), 0);
    assert_true(extmetrics_client_ca_can_proxy(em)); /* one CA for both, any CN */
    rh.allowed_names = allowed;
    rh.nallowed_names = 1;
    assert_int_equal(extmetrics_set_requestheader(em, &rh), 0);
    assert_false(extmetrics_client_ca_can_proxy(em)); /* only the allowed CN */
    rh.allowed_names = NULL;
    rh.nallowed_names = 0;
    rh.client_ca_pem = ca1;
    rh.client_ca_len = alen;
    assert_int_equal(extmetrics_set_requestheader(em, &rh), 0);
    assert_false(extmetrics_client_ca_can_proxy(em)); /* different CAs */
    rh.client_ca_pem = both.data;
    rh.client_ca_len = both.len;
    assert_int_equal(extmetrics_set_requestheader(em, &rh), 0);
    assert_true(extmetrics_client_ca_can_proxy(em)); /* a bundle holding the client CA too */
    assert_int_equal(extmetrics_set_client_ca(em, NULL, 0), 0);
    assert_false(extmetrics_client_ca_can_proxy(em));
    extmetrics_close(em, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    extmetrics_fake_provider_free(fp);
    util_buf_free(&both);
    xfree(cca);
    xfree(ca1);
}

/* ---- upstream forwarding ------------------------------------------------------------- */

static const char up_body[] =
    "{\"kind\":\"ExternalMetricValueList\",\"apiVersion\":\"external.metrics.k8s.io/v1beta1\","
    "\"metadata\":{},\"items\":[{\"metricName\":\"s0-prometheus\",\"metricLabels\":{},"
    "\"timestamp\":\"2026-11-18T11:06:40Z\",\"value\":\"7\"}]}";

struct slow {
    uv_timer_t t;
    struct httpd_request *req;
};

static void slow_closed(uv_handle_t *h)
{
    xfree(h->data);
}

static void slow_answer(uv_timer_t *t)
{
    struct slow *sl = t->data;
    static const struct httpd_header h[] = {{"Content-Type", "application/json"}};
    httpd_respond(sl->req, 200, h, 1, up_body, sizeof(up_body) - 1);
    uv_close((uv_handle_t *)t, slow_closed);
}

static void upstream_handler(struct httpd_request *req, void *arg)
{
    struct env *e = arg;
    const char *v;
    e->up_requests++;
    snprintf(e->up_target, sizeof(e->up_target), "%s", req->target);
    v = httpd_request_header(req, "Authorization");
    snprintf(e->up_auth, sizeof(e->up_auth), "%s", v ? v : "");
    v = httpd_request_header(req, "X-Remote-User");
    snprintf(e->up_user, sizeof(e->up_user), "%s", v ? v : "");
    v = httpd_request_header(req, "Accept");
    snprintf(e->up_accept, sizeof(e->up_accept), "%s", v ? v : "");
    v = httpd_request_header(req, "X-Remote-Group");
    snprintf(e->up_group, sizeof(e->up_group), "%s", v ? v : "");
    v = httpd_request_header(req, "X-Remote-Uid");
    snprintf(e->up_uid, sizeof(e->up_uid), "%s", v ? v : "");
    v = httpd_request_header(req, "X-Remote-Extra-acme.com%2Fproject");
    snprintf(e->up_extra[0], sizeof(e->up_extra[0]), "%s", v ? v : "");
    v = httpd_request_header(req, "X-Remote-Extra-a%3Ab%25");
    snprintf(e->up_extra[1], sizeof(e->up_extra[1]), "%s", v ? v : "");
    static const struct httpd_header h[] = {{"Content-Type", "application/json"}};
    if (strstr(req->path, "/slow-")) { /* answered 200 ms later */
        struct slow *sl = xcalloc(1, sizeof(*sl));
        sl->req = req;
        uv_timer_init(&e->loop, &sl->t);
        sl->t.data = sl;
        uv_timer_start(&sl->t, slow_answer, 200, 0);
        return;
    }
    if (strstr(req->path, "/missing")) {
        static const char nf[] = "{\"kind\":\"Status\",\"code\":404}";
        httpd_respond(req, 404, h, 1, nf, sizeof(nf) - 1);
        return;
    }
    httpd_respond(req, 200, h, 1, up_body, sizeof(up_body) - 1);
}

static void sc_upstream(struct env *e)
{
    struct resp r;
    const char *path = BASE "/namespaces/llm/s0-prometheus?labelSelector="
                            "scaledobject.keda.sh%2Fname%3Dllama";
    CHECK(e, get(e, path, &admin, &r) == 0);
    CHECK(e, r.status == 200 && strcmp(r.body.data, up_body) == 0);
    CHECK(e, strcmp(r.ctype, "application/json") == 0);
    util_buf_free(&r.body);
    /* other adapters' names (the Datadog Cluster Agent's, the Stackdriver
     * adapter's, as client-go escapes '|'), forwarded with the path as sent
     * (they were refused with 400) */
    static const char *const theirs[] = {
        BASE "/namespaces/llm/datadogmetric@llm:nginx-requests",
        BASE "/namespaces/llm/pubsub.googleapis.com%7Csubscription%7Cnum_undelivered_messages"
             "?labelSelector=resource.labels.subscription_id%3Dsub",
    };
    struct copts admin_abs = admin;
    admin_abs.absolute = true;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(theirs); i++) {
        int before = e->up_requests;
        CHECK(e, status_of(e, theirs[i], &admin) == 200);
        CHECK(e, e->up_requests == before + 1);
        CHECK(e, strcmp(e->up_target, theirs[i]) == 0);
        /* asked in absolute form: forwarded in origin form (the raw target was
         * appended to the upstream's URL, a 503) */
        CHECK(e, status_of(e, theirs[i], &admin_abs) == 200);
        CHECK(e, e->up_requests == before + 2);
        CHECK(e, strcmp(e->up_target, theirs[i]) == 0);
    }
    CHECK(e, status_of(e, BASE "/namespaces/llm/missing", &admin) == 404);
    /* ours are still served locally */
    GOLDEN(e, BASE "/namespaces/llm/gpuscaler_desired_replicas?labelSelector=deployment%3Dllama",
           &admin, 200, "desired-llama.json");
    /* anonymous ones the review refuses are never forwarded */
    int forwarded = e->up_requests;
    CHECK(e, status_of(e, path, NULL) == 403);
    CHECK(e, e->up_requests == forwarded);
}

/* The test's HTTPS upstream on e's loop, with up.crt/up.key; its URL into url. */
static void start_upstream(struct env *e, char *url, size_t len, char *crt, char *key)
{
    uv_loop_init(&e->loop);
    snprintf(crt, 512, "%s/up.crt", dir);
    snprintf(key, 512, "%s/up.key", dir);
    struct httpd_config ucfg = {.host = "127.0.0.1", .tls = true, .cert_file = crt,
                                .key_file = key, .name = "upstream"};
    assert_int_equal(httpd_new(&e->loop, &ucfg, upstream_handler, e, &e->upstream), 0);
    snprintf(url, len, "https://127.0.0.1:%d/", httpd_port(e->upstream));
}

static void test_upstream(void **state)
{
    struct env e = {0};
    char crt[512], key[512], tok[512], url[128];
    start_upstream(&e, url, sizeof(url), crt, key);
    snprintf(tok, sizeof(tok), "%s/token", dir);
    struct extmetrics_config cfg = {.upstream_url = url, .upstream_ca_file = crt,
                                    .upstream_token_file = tok};
    run(&e, &cfg, sc_upstream);
    assert_int_equal(e.up_requests, 6); /* the two absolute-form ones too */
    assert_string_equal(e.up_auth, "Bearer sa-token");
    assert_string_equal(e.up_user, ""); /* no client certificate: no identity headers */
    assert_string_equal(e.up_target, BASE "/namespaces/llm/missing");
    env_free(&e);
}

/* With a client certificate the caller's identity goes along, its extra keys
 * escaped as client-go escapes them (a Go server refuses a '/' or ':' in a
 * header name): acme.com/project -> acme.com%2Fproject, a:b% -> a%3Ab%25. */
static void sc_upstream_identity(struct env *e)
{
    struct copts jane = {.cert = "fp",
                         .headers = {"X-Remote-User: jane", "X-Remote-Group: system:masters",
                                     "X-Remote-Uid: 6f1c2b9e-uid",
                                     "X-Remote-Extra-Acme.com%2fProject: llm",
                                     "X-Remote-Extra-a%3ab%25: c", NULL}};
    CHECK(e, status_of(e, BASE "/namespaces/llm/s0-prometheus", &jane) == 200);
}

static void test_upstream_identity(void **state)
{
    (void)state;
    struct env e = {0};
    char crt[512], key[512], url[128];
    start_upstream(&e, url, sizeof(url), crt, key);
    struct extmetrics_config cfg = {.upstream_url = url, .upstream_ca_file = crt,
                                    .upstream_cert_file = crt, .upstream_key_file = key};
    run(&e, &cfg, sc_upstream_identity);
    assert_int_equal(e.up_requests, 1);
    assert_string_equal(e.up_user, "jane");
    assert_string_equal(e.up_uid, "6f1c2b9e-uid");
    assert_string_equal(e.up_group, "system:masters");
    assert_string_equal(e.up_extra[0], "llm");
    assert_string_equal(e.up_extra[1], "c");
    env_free(&e);
}

/* One request over TLS with client certificate <cert>, then the client
 * shuts down its sending side (a half-close) and reads the whole answer
 * into out (until the server closes). 0, or -1 on a TLS or socket error. */
static int half_closed_get(struct env *e, const char *cert, const char *request,
                           struct util_buf *out)
{
    char crt[512], key[512];
    snprintf(crt, sizeof(crt), "%s/%s.crt", dir, cert);
    snprintf(key, sizeof(key), "%s/%s.key", dir, cert);
    int rc = -1, fd = socket(AF_INET, SOCK_STREAM, 0);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = NULL;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)e->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (fd < 0 || !ctx || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        SSL_CTX_use_certificate_chain_file(ctx, crt) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || !(ssl = SSL_new(ctx)) ||
        SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1 ||
        SSL_write(ssl, request, (int)strlen(request)) != (int)strlen(request))
        goto out;
    shutdown(fd, SHUT_WR); /* no more requests: the answer is still awaited */
    char buf[4096];
    int n;
    while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0)
        util_buf_append(out, buf, (size_t)n);
    rc = 0;
out:
    if (!out->data)
        util_buf_puts(out, "");
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* A client that sends its request and shuts down its sending side still
 * gets the upstream's answer: a half-close is not a client gone (it used to
 * cancel the forwarded request and answer 503 "request cancelled"). */
static void sc_upstream_half_close(struct env *e)
{
    struct util_buf b = {0};
    CHECK(e, half_closed_get(e, "fp",
                             "GET " BASE "/namespaces/llm/slow-metric HTTP/1.1\r\n"
                             "Host: em\r\nX-Remote-User: system:kube-aggregator\r\n"
                             "X-Remote-Group: system:masters\r\n\r\n",
                             &b) == 0);
    if (!(strncmp(b.data, "HTTP/1.1 200 ", 13) == 0 && strstr(b.data, up_body)) &&
        !e->fail_line) {
        e->fail_line = __LINE__;
        snprintf(e->fail_msg, sizeof(e->fail_msg), "half-closed client got: %.600s", b.data);
    }
    util_buf_free(&b);
}

static void test_upstream_half_close(void **state)
{
    (void)state;
    struct env e = {0};
    char crt[512], key[512], url[128];
    start_upstream(&e, url, sizeof(url), crt, key);
    struct extmetrics_config cfg = {.upstream_url = url, .upstream_ca_file = crt};
    run(&e, &cfg, sc_upstream_half_close);
    assert_int_equal(e.up_requests, 1);
    env_free(&e);
}

static void sc_upstream_down_check(struct env *e)
{
    struct resp r;
    CHECK(e, get(e, BASE "/namespaces/llm/s0-prometheus", &admin, &r) == 0);
    CHECK(e, r.status == 503 && strstr(r.body.data, "\"reason\":\"ServiceUnavailable\"") &&
                 strstr(r.body.data, "upstream metrics adapter is unavailable"));
    util_buf_free(&r.body);
    CHECK(e, status_of(e, BASE "/namespaces/llm/gpuscaler_desired_replicas", &admin) == 200);
    CHECK(e, status_of(e, BASE, &admin) == 200); /* discovery does not depend on it */
}

static void test_upstream_down(void **state)
{
    struct env e = {0};
    uv_loop_init(&e.loop);
    struct extmetrics_config cfg = {.upstream_url = "https://127.0.0.1:1",
                                    .upstream_insecure = true, .upstream_timeout_ms = 3000};
    run(&e, &cfg, sc_upstream_down_check);
    env_free(&e);
}

/* ---- closing while the authorizer still owes answers ---------------------------------- */

static void on_done_release(uv_async_t *a)
{
    struct env *e = a->data;
    on_done(a);                                   /* close the server first ... */
    extmetrics_fake_authorizer_hold(e->fa, false); /* ... then the late answers arrive */
}

struct closing {
    struct env *e;
    struct resp r[3];
    int rc[3];
};

static void closing_req(void *arg)
{
    struct closing *cl = arg;
    static int next;
    int i = __atomic_fetch_add(&next, 1, __ATOMIC_SEQ_CST);
    struct copts tok = {.headers = {"Authorization: Bearer some-token", NULL}};
    cl->rc[i] = get(cl->e, BASE, &tok, &cl->r[i]);
}

static void sc_closing(struct env *e)
{
    struct closing cl = {.e = e};
    uv_thread_t t[3];
    for (int i = 0; i < 3; i++)
        uv_thread_create(&t[i], closing_req, &cl);
    /* wait until all three wait for their token review, then close */
    for (int i = 0; i < 200 && extmetrics_fake_authorizer_held(e->fa) < 3; i++)
        usleep(10000);
    CHECK(e, extmetrics_fake_authorizer_held(e->fa) == 3);
    e->done.async_cb = on_done_release;
    uv_async_send(&e->done);
    for (int i = 0; i < 3; i++)
        uv_thread_join(&t[i]);
    for (int i = 0; i < 3; i++) {
        if (!(cl.rc[i] == 0 && cl.r[i].status == 503 &&
              strstr(cl.r[i].body.data, "shutting down")) && !e->fail_line) {
            e->fail_line = __LINE__;
            snprintf(e->fail_msg, sizeof(e->fail_msg), "request %d: rc %d status %ld body %.200s",
                     i, cl.rc[i], cl.r[i].status, cl.r[i].body.data ? cl.r[i].body.data : "");
        }
        util_buf_free(&cl.r[i].body);
    }
}

static void closing_thread(void *arg)
{
    struct env *e = arg;
    sc_closing(e);
}

static void test_close_with_pending_reviews(void **state)
{
    struct env e = {0};
    uv_loop_init(&e.loop);
    e.fp = extmetrics_fake_provider_new();
    e.fa = extmetrics_fake_authorizer_new(&e.loop);
    extmetrics_fake_authorizer_hold(e.fa, true);
    fill_provider(&e);
    struct extmetrics_config cfg = {.listen = {.host = "127.0.0.1"}, .clock = fixed_clock};
    struct extmetrics_provider p = extmetrics_fake_provider_get(e.fp);
    struct extmetrics_authorizer a = extmetrics_fake_authorizer_get(e.fa);
    assert_int_equal(extmetrics_new(&e.loop, &cfg, &p, &a, &e.em), 0);
    e.port = extmetrics_port(e.em);
    uv_async_init(&e.loop, &e.done, on_done);
    e.done.data = &e;
    uv_thread_create(&e.thr, closing_thread, &e);
    uv_run(&e.loop, UV_RUN_DEFAULT);
    uv_thread_join(&e.thr);
    if (e.fail_line)
        fail_msg("scenario failed at line %d: %s", e.fail_line, e.fail_msg);
    assert_int_equal(e.closed, 1);
    assert_int_equal(extmetrics_fake_authorizer_authn_calls(e.fa), 3);
    assert_int_equal(extmetrics_fake_authorizer_held(e.fa), 0);
    assert_int_equal(uv_loop_close(&e.loop), 0);
    env_free(&e);
}

/* ---- provider failure and config errors ----------------------------------------------- */

static void test_config_errors(void **state)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct extmetrics_fake_provider *fp = extmetrics_fake_provider_new();
    struct extmetrics_provider p = extmetrics_fake_provider_get(fp);
    struct extmetrics *em = NULL;
    struct extmetrics_config cfg = {.listen = {.host = "127.0.0.1"}};
    assert_int_equal(extmetrics_new(&loop, &cfg, &p, NULL, &em), -EINVAL); /* no authorizer */
    cfg.disable_auth = true;
    cfg.upstream_url = "ftp://x";
    assert_int_equal(extmetrics_new(&loop, &cfg, &p, NULL, &em), -EINVAL);
    cfg.upstream_url = NULL;
    assert_int_equal(extmetrics_new(&loop, &cfg, &p, NULL, &em), 0);
    struct extmetrics_requestheader rh = {.client_ca_pem = "junk", .client_ca_len = 4};
    assert_int_equal(extmetrics_set_requestheader(em, &rh), -EINVAL);
    assert_int_equal(extmetrics_set_requestheader(em, NULL), 0);
    extmetrics_close(em, NULL, NULL);
    extmetrics_close(NULL, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    extmetrics_fake_provider_free(fp);
}

/* A client chain is verified once per EM_CHAIN_TTL_MS: within it the answer
 * (and the user) comes from the cache by the chain's SHA-256, so a client
 * that sends a large chain and many requests pays for one decoding; after
 * it, or once the caller has emptied the cache for a new store, the chain is
 * verified again. */
static void test_chain_verification_is_reused(void **state)
{
    (void)state;
    char p[512];
    size_t len;
    snprintf(p, sizeof(p), "%s/cca.crt", dir);
    char *cca = slurp(p, &len);
    X509_STORE *good = em_store_from_pem(cca, len);
    snprintf(p, sizeof(p), "%s/ca2.crt", dir);
    char *ca2 = slurp(p, &len);
    X509_STORE *other = em_store_from_pem(ca2, len);
    snprintf(p, sizeof(p), "%s/alice.crt", dir);
    char *alice = slurp(p, &len);
    assert_non_null(good);
    assert_non_null(other);
    struct httpd_request req;
    memset(&req, 0, sizeof(req));
    req.peer.client_chain_pem = alice;
    struct em_cache cache = {.max = 64};
    struct em_user u = {0};
    assert_int_equal(em_x509_authenticate(good, &cache, &req, 1000, &u), 1);
    assert_string_equal(u.name, "alice");
    assert_int_equal(u.groups.n, 2);
    em_user_free(&u);
    /* the same chain within the TTL: the cached answer (the store is the
     * caller's to keep the cache for: "other" would refuse it) */
    assert_int_equal(em_x509_authenticate(other, &cache, &req, 1000 + EM_CHAIN_TTL_MS - 1, &u), 1);
    assert_string_equal(u.name, "alice");
    assert_int_equal(u.groups.n, 2);
    em_user_free(&u);
    /* past the TTL it is verified again */
    assert_int_equal(em_x509_authenticate(other, &cache, &req, 1000 + EM_CHAIN_TTL_MS, &u), 0);
    assert_null(u.name);
    /* a refusal is cached as well, until the cache is emptied for a new store */
    assert_int_equal(em_x509_authenticate(good, &cache, &req, 1000 + EM_CHAIN_TTL_MS + 1, &u), 0);
    em_cache_free(&cache);
    assert_int_equal(em_x509_authenticate(good, &cache, &req, 1000 + EM_CHAIN_TTL_MS + 1, &u), 1);
    em_user_free(&u);
    em_cache_free(&cache);
    X509_STORE_free(good);
    X509_STORE_free(other);
    xfree(cca);
    xfree(ca2);
    xfree(alice);
}

/* ---- setup ------------------------------------------------------------------------ */

static int setup(void **state)
{
    testdata = getenv("EXTMETRICS_TESTDATA");
    if (!testdata)
        testdata = "pkg/extmetrics/testdata";
    snprintf(dir, sizeof(dir), "/tmp/extmetrics-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char cmd[8192];
    const char *k = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    snprintf(cmd, sizeof(cmd),
             "set -e; cd %s; exec >/dev/null 2>&1;"
             "openssl req -x509 %s -keyout up.key -out up.crt -subj /CN=upstream -days 2 "
             "  -addext subjectAltName=IP:127.0.0.1;"
             "for n in ca1 ca2; do openssl req -x509 %s -keyout $n.key -out $n.crt -subj /CN=$n "
             "  -days 2; done;"
             "mk() { openssl req %s -keyout $1.key -out $1.csr -subj /CN=$2;"
             "  openssl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -days $4 "
             "  -out $1.crt; };"
             "mk fp front-proxy-client ca1 2; mk notproxy some-client ca1 2;"
             "mk fp-ca2 front-proxy-client ca2 2; mk fp-expired front-proxy-client ca1 -1;"
             "printf 'sa-token\\n' > token;"
             /* the client CA (client-ca-file) and certificates that are identities */
             "openssl req -x509 %s -keyout cca.key -out cca.crt -subj /CN=client-ca -days 2;"
             "mks() { openssl req %s -keyout $1.key -out $1.csr -subj \"$2\";"
             "  printf \"$5\" > $1.ext;"
             "  openssl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -days $4 "
             "  -extfile $1.ext -out $1.crt; };"
             "mks alice /O=team-a/O=team-b/CN=alice cca 2 'extendedKeyUsage=clientAuth\\n';"
             "mks alice-expired /CN=alice cca -1 'extendedKeyUsage=clientAuth\\n';"
             "mks twocn /CN=mallory/O=team-a/CN=alice cca 2 'extendedKeyUsage=clientAuth\\n';"
             "mk fp-twocn front-proxy-client/CN=some-client ca1 2;"
             "mks alice-server /CN=alice cca 2 'extendedKeyUsage=serverAuth\\n';"
             "mks nobody /O=team-a cca 2 'extendedKeyUsage=clientAuth\\n';"
             "mks fp-cca /CN=front-proxy-client cca 2 'extendedKeyUsage=clientAuth\\n';"
             "mks inter /CN=client-intermediate cca 2 "
             "  'basicConstraints=critical,CA:TRUE\\nkeyUsage=critical,keyCertSign\\n';"
             "mks bob0 /O=team-c/CN=bob inter 2 'extendedKeyUsage=clientAuth\\n';"
             "cat bob0.crt inter.crt > bob.crt; cp bob0.key bob.key;"
             /* usages as Go checks them: key usage without digitalSignature,
              * EKU any, no EKU; a clientAuth leaf under a serverAuth-only CA */
             "mks alice-ku /CN=alice cca 2 "
             "  'extendedKeyUsage=clientAuth\\nkeyUsage=critical,keyEncipherment\\n';"
             "mks alice-any /CN=alice cca 2 'extendedKeyUsage=anyExtendedKeyUsage\\n';"
             "mks alice-noeku /CN=alice cca 2 'keyUsage=critical,digitalSignature\\n';"
             "mks inter-srv /CN=server-intermediate cca 2 "
             "  'basicConstraints=critical,CA:TRUE\\nkeyUsage=critical,keyCertSign\\n"
             "extendedKeyUsage=serverAuth\\n';"
             "mks carol0 /CN=carol inter-srv 2 'extendedKeyUsage=clientAuth\\n';"
             "cat carol0.crt inter-srv.crt > carol.crt;"
             /* a front-proxy CA bundle of an intermediate of ca1 alone */
             "mks fpinter /CN=front-proxy-intermediate ca1 2 "
             "  'basicConstraints=critical,CA:TRUE\\nkeyUsage=critical,keyCertSign\\n';"
             "mk fp-i front-proxy-client fpinter 2",
             dir, k, k, k, k, k);
    if (system(cmd) != 0)
        return -1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int teardown(void **state)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        return -1;
    curl_global_cleanup();
    return 0;
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, getenv("TEST_DEBUG") ? UTIL_LOG_DEBUG : UTIL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_probes),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_client_certs),
        cmocka_unit_test(test_intermediate_cas),
        cmocka_unit_test(test_client_usage_as_go),
        cmocka_unit_test(test_client_ca_can_proxy),
        cmocka_unit_test(test_chain_verification_is_reused),
        cmocka_unit_test(test_upstream),
        cmocka_unit_test(test_upstream_identity),
        cmocka_unit_test(test_upstream_half_close),
        cmocka_unit_test(test_upstream_down),
        cmocka_unit_test(test_close_with_pending_reviews),
        cmocka_unit_test(test_config_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

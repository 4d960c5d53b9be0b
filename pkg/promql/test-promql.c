/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the Prometheus source: default templates and their expansion,
 * the response parser (a table of real and broken answers), and the client
 * against a fake Prometheus on loopback (httpc's testsrv on the test loop):
 * results, every failure made invalid with a reason, bearer token re-read,
 * chunked range seeding, and close with queries in flight. Async tests count
 * callbacks and assert uv_loop_close == 0. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <regex.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "forecast/forecast.h"
#include "httpc/httpc.h"
#include "httpc/testsrv.h"
#include "promql/promql.h"
#include "util/util.h"

/* ---- templates ------------------------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    static const struct {
        enum scrape_profile p;
        const char *rate, *p99;
    } want[] = {
        {SCRAPE_VLLM,
         "sum(rate(vllm:request_success_total{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
         "[{{window}}]))",
         "histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"
         "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])))"},
        {SCRAPE_TRITON,
         "sum(rate(nv_inference_request_success{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
         "[{{window}}]))",
         ""},
        {SCRAPE_TGI,
         "sum(rate(tgi_request_success{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}]))",
         "histogram_quantile(0.99, sum by (le) (rate(tgi_request_duration_bucket"
         "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])))"},
        {SCRAPE_SGLANG,
         "sum(rate(sglang:num_requests_total{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
         "[{{window}}]))",
         "histogram_quantile(0.99, sum by (le) (rate(sglang:e2e_request_latency_seconds_bucket"
         "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])))"},
        {SCRAPE_NIM,
         "sum(rate(request_success_total{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
         "[{{window}}]))",
         "histogram_quantile(0.99, sum by (le) (rate(e2e_request_latency_seconds_bucket"
         "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])))"},
        {SCRAPE_TEI,
         "sum(rate(te_embed_success{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}]))",
         "histogram_quantile(0.99, sum by (le) (rate(te_request_duration_bucket"
         "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])))"},
        {SCRAPE_GENERIC, "", ""},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(want); i++) {
        struct scrape_spec spec;
        scrape_spec_init(&spec, want[i].p);
        char rate[PROMQL_MAX_QUERY], p99[PROMQL_MAX_QUERY];
        promql_default_rate(&spec, rate, sizeof(rate));
        promql_default_p99(&spec, p99, sizeof(p99));
        assert_string_equal(rate, want[i].rate);
        assert_string_equal(p99, want[i].p99);
    }
    /* generic with names, a latency histogram in ms is scaled to seconds */
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    snprintf(spec.request_metric, sizeof(spec.request_metric), "http_requests_total");
    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "http_latency_ms");
    char q[PROMQL_MAX_QUERY];
    promql_default_p99(&spec, q, sizeof(q));
    assert_string_equal(q, "histogram_quantile(0.99, sum by (le) (rate(http_latency_ms_bucket"
                           "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}]))) * "
                           "0.001");
    /* Prometheus 3's quoted names: the name and its suffix stay inside the braces, quoted,
     * the field's own matchers after the pods' (a quoted label name quoted again), and the
     * unit is read from the quoted name */
    snprintf(spec.latency_metric, sizeof(spec.latency_metric),
             "{\"http.server.latency_ms\", \"http.method\"=\"GET\", code!~\"5..\"}");
    promql_default_p99(&spec, q, sizeof(q));
    assert_string_equal(q, "histogram_quantile(0.99, sum by (le) (rate({"
                           "\"http.server.latency_ms_bucket\",namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",\"http.method\"=\"GET\",code!~\"5..\"}"
                           "[{{window}}]))) * 0.001");
    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "http_latency_ms");
    /* no busy-time counter named: no busy query */
    promql_default_busy(&spec, q, sizeof(q));
    assert_string_equal(q, "");
    /* busy time alone (no request counter to compare pods with) */
    snprintf(spec.busy_metric, sizeof(spec.busy_metric), "svc_seconds_total");
    spec.request_metric[0] = '\0';
    promql_default_busy(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(rate(svc_seconds_total{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\"}[{{window}}]))");
    /* the profiles': only while every pod with the request counter has the busy counter */
    scrape_spec_init(&spec, SCRAPE_VLLM);
    promql_default_busy(&spec, q, sizeof(q));
    assert_string_equal(
        q, "(sum(rate(vllm:request_inference_time_seconds_sum{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\"}[{{window}}]))) and on() (count(count by (pod) "
           "(vllm:request_inference_time_seconds_sum{namespace=\"{{namespace}}\",pod=~\"{{pods}}"
           "\"})) == count(count by (pod) (vllm:request_success_total{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\"})))");
    scrape_spec_init(&spec, SCRAPE_TRITON); /* microseconds */
    promql_default_busy(&spec, q, sizeof(q));
    assert_non_null(strstr(q, "(sum(rate(nv_inference_compute_infer_duration_us{"));
    assert_non_null(strstr(q, "[{{window}}])) * 1e-06) and on() ("));
    assert_non_null(strstr(q, "(nv_inference_request_success{"));

    /* a metric's own label matchers join the pods' in every query, written
     * back from their parse (double quotes, no blanks) */
    scrape_spec_init(&spec, SCRAPE_TRITON);
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "nv_inference_request_success{model=\"ensemble\", version!='2',}");
    snprintf(spec.busy_metric, sizeof(spec.busy_metric),
             "nv_inference_compute_infer_duration_us{model=\"ensemble\"}");
    promql_default_rate(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(rate(nv_inference_request_success{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",model=\"ensemble\",version!=\"2\"}[{{window}}]))");
    promql_default_busy(&spec, q, sizeof(q));
    assert_string_equal(
        q, "(sum(rate(nv_inference_compute_infer_duration_us{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\",model=\"ensemble\"}[{{window}}])) * 1e-06) and on() (count(count "
           "by (pod) (nv_inference_compute_infer_duration_us{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\",model=\"ensemble\"})) == count(count by (pod) "
           "(nv_inference_request_success{namespace=\"{{namespace}}\",pod=~\"{{pods}}\","
           "model=\"ensemble\",version!=\"2\"})))");
    /* a regex matcher goes to Prometheus as written: its own RE2 reads it */
    scrape_spec_init(&spec, SCRAPE_VLLM);
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "vllm:request_success_total{model_name=~\"llama-.*\",engine!~\"[1-9]\"}");
    promql_default_rate(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(rate(vllm:request_success_total{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",model_name=~\"llama-.*\",engine!~\"[1-9]\"}"
                           "[{{window}}]))");
    /* an escape either quote takes (`\'` in double quotes, `\"` in single)
     * is written as PromQL reads it: a value quoted again (as written, the
     * query was a lexer error, 400 on every tick) */
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "vllm:request_success_total{model_name=\"o\\'brien\",tag='say \\\"hi\\\"',"
             "path=~\"a\\\\.b\"}");
    promql_default_rate(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(rate(vllm:request_success_total{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",model_name=\"o'brien\",tag=\"say \\\"hi\\\"\","
                           "path=~\"a\\\\.b\"}[{{window}}]))");
    /* a counter an annotation names by its family name is asked for under
     * both names, as the scraper finds it: Prometheus stores an OpenMetrics
     * counter http_requests, and the Go client's, as http_requests_total
     * (the query for http_requests alone matched nothing). The `_total`
     * name comes first and `or` takes the bare name only where it is not:
     * a regex on __name__ found a pod's gauge http_requests too, and rate()
     * and timestamp() failed on the two series of one label set. The
     * profiles' own names, a _total name, a histogram's _sum and the gauges
     * stay as they are */
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    snprintf(spec.request_metric, sizeof(spec.request_metric), "http_requests{code!~\"5..\"}");
    snprintf(spec.busy_metric, sizeof(spec.busy_metric), "busy_seconds");
    snprintf(spec.inflight_metric, sizeof(spec.inflight_metric), "inflight");
    promql_default_rate(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(rate(http_requests_total{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",code!~\"5..\"}[{{window}}]) or "
                           "rate(http_requests{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",code!~\"5..\"}[{{window}}]))");
    assert_null(strstr(q, "__name__"));
    promql_default_busy(&spec, q, sizeof(q));
    assert_non_null(strstr(q, "(sum(rate(busy_seconds_total{namespace="));
    assert_non_null(strstr(q, "[{{window}}]) or rate(busy_seconds{namespace="));
    assert_non_null(strstr(q, "count by (pod) (http_requests_total{namespace="));
    assert_non_null(strstr(q, "\"5..\"} or http_requests{namespace="));
    promql_default_pods(&spec, true, q, sizeof(q));
    assert_non_null(strstr(q, "sum by (pod) (inflight{namespace="));
    assert_null(strstr(q, "inflight_total"));
    assert_non_null(strstr(q, "count by (pod) (rate(http_requests_total{namespace="));
    assert_non_null(strstr(q, "[{{window}}]) or rate(http_requests{namespace="));
    assert_non_null(strstr(q, "sum by (pod) (http_requests_total{namespace="));
    assert_non_null(strstr(q, "max by (pod) (timestamp(http_requests_total{namespace="));
    assert_non_null(strstr(q, "\"5..\"}) or timestamp(http_requests{namespace="));
    assert_null(strstr(q, "__name__"));
    snprintf(spec.busy_metric, sizeof(spec.busy_metric), "lat_seconds_sum");
    promql_default_busy(&spec, q, sizeof(q));
    assert_non_null(strstr(q, "(sum(rate(lat_seconds_sum{namespace="));
    scrape_spec_init(&spec, SCRAPE_TRITON); /* the profile's counter: as the profile names it */
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "nv_inference_request_success{model=\"a\"}");
    promql_default_rate(&spec, q, sizeof(q));
    assert_non_null(strstr(q, "(rate(nv_inference_request_success{namespace="));
    /* the unit comes from the name before the braces; empty braces add nothing */
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "lat_ms{route=\"/v1\"}");
    snprintf(spec.request_metric, sizeof(spec.request_metric), "reqs_total{ }");
    promql_default_p99(&spec, q, sizeof(q));
    assert_string_equal(q, "histogram_quantile(0.99, sum by (le) (rate(lat_ms_bucket{namespace="
                           "\"{{namespace}}\",pod=~\"{{pods}}\",route=\"/v1\"}[{{window}}]))) * "
                           "0.001");
    promql_default_rate(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(rate(reqs_total{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
                           "[{{window}}]))");
}

/* A pod name as the ReplicaSet controller makes it: generateName
 * "<deploy>-<hash>-" cut to 58 bytes, then 5 characters (apiserver
 * storage/names), hash and characters from SafeEncodeString's alphabet. */
static void pod_name(char *out, const char *deploy, size_t hash_len, unsigned seed)
{
    static const char al[] = "bcdfghjklmnpqrstvwxz2456789";
    char base[300];
    size_t n = (size_t)snprintf(base, sizeof(base), "%s-", deploy);
    for (size_t i = 0; i < hash_len; i++, seed = seed * 1103515245u + 12345u)
        base[n++] = al[(seed >> 16) % 27];
    base[n++] = '-';
    if (n > 58)
        n = 58;
    memcpy(out, base, n);
    for (size_t i = 0; i < 5; i++, seed = seed * 1103515245u + 12345u)
        out[n++] = al[(seed >> 16) % 27];
    out[n] = '\0';
}

/* {{pods}} expanded for deploy, as a POSIX ERE anchored at both ends (the
 * query's string escapes undone). */
static void pods_regex(regex_t *re, const char *deploy)
{
    char out[PROMQL_MAX_QUERY], err[160], pat[PROMQL_MAX_QUERY + 2];
    assert_int_equal(promql_expand("{{pods}}", "ns", deploy, "1m", out, sizeof(out), err,
                                   sizeof(err)),
                     0);
    size_t k = 0;
    pat[k++] = '^';
    for (const char *c = out; *c; c++) {
        if (c[0] == '\\' && c[1] == '\\')
            c++;
        pat[k++] = *c;
    }
    pat[k++] = '$';
    pat[k] = '\0';
    assert_int_equal(regcomp(re, pat, REG_EXTENDED | REG_NOSUB), 0);
}

/* {{pods}} matches every pod the ReplicaSet controller can name for a
 * Deployment, whatever the name's length (from 47 bytes the generated name
 * is cut, and from 58 it is the Deployment's name cut), and not the pods of
 * a StatefulSet or of a longer-named Deployment. */
static void test_pods_regex(void **state)
{
    (void)state;
    char deploy[80], pod[80];
    for (size_t len = 1; len <= 70; len++) {
        for (size_t i = 0; i < len; i++)
            deploy[i] = i % 7 == 3 ? '-' : (char)('a' + i % 26);
        deploy[0] = 'm';
        deploy[len - 1] = 'z';
        deploy[len] = '\0';
        regex_t re;
        pods_regex(&re, deploy);
        for (size_t h = 1; h <= 10; h++)
            for (unsigned seed = 1; seed < 4; seed++) {
                pod_name(pod, deploy, h, seed * 7919u + (unsigned)len);
                if (regexec(&re, pod, 0, NULL, 0) != 0)
                    fail_msg("deployment of %zu bytes, hash %zu: %s not matched", len, h, pod);
            }
        if (len < 58) {
            snprintf(pod, sizeof(pod), "%s-0", deploy); /* a StatefulSet's */
            assert_int_not_equal(regexec(&re, pod, 0, NULL, 0), 0);
        }
        if (len <= 40) {
            char other[80];
            snprintf(other, sizeof(other), "%s-canary", deploy);
            pod_name(pod, other, 10, 5);
            assert_int_not_equal(regexec(&re, pod, 0, NULL, 0), 0);
        }
        regfree(&re);
    }
}

static void test_expand(void **state)
{
    (void)state;
    char out[PROMQL_MAX_QUERY], err[160];
    assert_int_equal(promql_expand("sum(rate(x{namespace=\"{{namespace}}\",pod=~\"{{pods}}\","
                                   "d=\"{{deployment}}\"}[{{window}}]))",
                                   "team-a", "chat.v1", "90s", out, sizeof(out), err, sizeof(err)),
                     0);
    /* the dot is literal in the regex */
    assert_string_equal(out, "sum(rate(x{namespace=\"team-a\",pod=~\"chat\\\\.v1-"
                             "[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}"
                             "\",d=\"chat.v1\"}[90s]))");

    static const struct {
        const char *tmpl, *ns, *deploy, *window;
        size_t outlen;
        int rc;
        const char *err;
    } bad[] = {
        {"", "a", "b", "1m", 100, -EINVAL, "empty"},
        {"x{{nope}}", "a", "b", "1m", 100, -EINVAL, "unknown placeholder {{nope}}"},
        {"x{{namespace", "a", "b", "1m", 100, -EINVAL, "unclosed"},
        {"x", "Team", "b", "1m", 100, -EINVAL, "namespace 'Team'"},
        {"x", "a", "b\"}or vector(1)", "1m", 100, -EINVAL, "not a DNS-1123"},
        {"x", "a", "b", "1 m", 100, -EINVAL, "window"},
        {"x", "a", "b", "m", 100, -EINVAL, "window"},
        {"{{pods}}{{pods}}", "a", "bbbbbbbbbb", "1m", 40, -ENAMETOOLONG, "longer than 39"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        int rc = promql_expand(bad[i].tmpl, bad[i].ns, bad[i].deploy, bad[i].window, out,
                               bad[i].outlen, err, sizeof(err));
        if (rc != bad[i].rc || !strstr(err, bad[i].err))
            fail_msg("case %zu: rc %d err '%s'", i, rc, err);
        assert_string_equal(out, "");
    }
    assert_int_equal(promql_expand("x[{{window}}]", "a", "b", "1h30m", out, 100, err, 160), 0);
    assert_string_equal(out, "x[1h30m]");
}

/* ---- parser ---------------------------------------------------------------- */

struct parse_case {
    const char *body;
    int rc;
    size_t npoints;
    double v0;     /* first value (NaN checked with isnan) */
    int64_t t0;
    const char *err;
};

static const struct parse_case parse_cases[] = {
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
     "\"value\":[1700000000.5,\"42.25\"]}]}}",
     0, 1, 42.25, 1700000000500, ""},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1700000000,\"3\"]}}",
     0, 1, 3, 1700000000000, ""},
    /* a subnormal value is that number, as Go reads it (it was refused) */
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
     "\"value\":[1700000000,\"1e-310\"]}]}}",
     0, 1, 1e-310, 1700000000000, ""},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":{\"a\":"
     "\"b\"},\"values\":[[1700000000,\"1\"],[1700000060,\"NaN\"],[1700000120,\"+Inf\"]]}]}}",
     0, 3, 1, 1700000000000, ""},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
     "\"value\":[1700000000,\"NaN\"]}]},\"warnings\":[\"x\"]}",
     0, 1, NAN, 1700000000000, ""},
    {"{\"status\":\"success\",\"isPartial\":true,\"data\":{\"resultType\":\"vector\",\"result\":"
     "[{\"metric\":{},\"value\":[1700000000,\"4\"]}]}}",
     -EREMOTEIO, 0, 0, 0, "partial response"},
    {"{\"status\":\"success\",\"isPartial\":false,\"data\":{\"resultType\":\"vector\",\"result\":"
     "[{\"metric\":{},\"value\":[1700000000,\"4\"]}]}}",
     0, 1, 4, 1700000000000, ""},
    {"{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"1:5: parse error: "
     "unexpected end of input\"}",
     -EREMOTEIO, 0, 0, 0, "prometheus error (bad_data): 1:5: parse error"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}", -ENODATA, 0, 0,
     0, "no data"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[]}}", -ENODATA, 0, 0,
     0, "no data"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{\"p\":"
     "\"a\"},\"value\":[1,\"1\"]},{\"metric\":{\"p\":\"b\"},\"value\":[1,\"2\"]}]}}",
     -ERANGE, 0, 0, 0, "2 series"},
    {"<html>502 Bad Gateway</html>", -EBADMSG, 0, 0, 0, "not JSON"},
    {"", -EBADMSG, 0, 0, 0, "not JSON"},
    {"[1,2]", -EBADMSG, 0, 0, 0, "no status"},
    {"{\"status\":\"success\",\"status\":\"error\"}", -EBADMSG, 0, 0, 0, "not JSON"},
    {"{\"status\":\"success\"}", -EBADMSG, 0, 0, 0, "no data"},
    {"{\"status\":\"maybe\"}", -EBADMSG, 0, 0, 0, "status 'maybe'"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"string\",\"result\":[1,\"x\"]}}",
     -EBADMSG, 0, 0, 0, "not vector, scalar or matrix"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
     "\"histogram\":[1,{}]}]}}",
     -EBADMSG, 0, 0, 0, "native histogram"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
     "\"value\":[1,2]}]}}",
     -EBADMSG, 0, 0, 0, "not a string"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
     "\"value\":[1,\"0x10\"]}]}}",
     -EBADMSG, 0, 0, 0, "'0x10' is not a number"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
     "\"value\":[-5,\"1\"]}]}}",
     -EBADMSG, 0, 0, 0, "out of range"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
     "\"value\":[1,\"1\",3]}]}}",
     -EBADMSG, 0, 0, 0, "pair"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":{},"
     "\"values\":[[2,\"1\"],[1,\"1\"]]}]}}",
     -EBADMSG, 0, 0, 0, "not increasing"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":3,"
     "\"value\":[1,\"1\"]}]}}",
     -EBADMSG, 0, 0, 0, "metric is not an object"},
};

static void test_parse(void **state)
{
    (void)state;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(parse_cases); i++) {
        const struct parse_case *c = &parse_cases[i];
        struct promql_series s;
        char err[200];
        int rc = promql_parse_response(c->body, strlen(c->body), &s, err, sizeof(err));
        if (rc != c->rc || !strstr(err, c->err))
            fail_msg("case %zu: rc %d err '%s', want %d '%s'", i, rc, err, c->rc, c->err);
        assert_int_equal(s.npoints, c->npoints);
        if (c->npoints) {
            assert_true(isnan(c->v0) ? isnan(s.points[0].v) : s.points[0].v == c->v0);
            assert_int_equal(s.points[0].t_ms, c->t0);
        } else {
            assert_null(s.points);
        }
        promql_series_free(&s);
    }
}

/* The per-pod query: one label_replace per part the spec names, joined by
 * `or`; which pods the rate counts only beside the default rate. */
static void test_pods_query(void **state)
{
    (void)state;
    struct scrape_spec spec;
    char q[PROMQL_MAX_QUERY];
    scrape_spec_init(&spec, SCRAPE_VLLM);
    promql_default_pods(&spec, true, q, sizeof(q));
    assert_string_equal(
        q, "label_replace(sum by (pod) (vllm:num_requests_running{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\"}), \"gpuscaler_part\", \"running\", \"\", \"\") or "
           "label_replace(sum by (pod) (vllm:num_requests_waiting{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\"}), \"gpuscaler_part\", \"waiting\", \"\", \"\") or "
           "label_replace(count by (pod) (rate(vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])), \"gpuscaler_part\", "
           "\"counted\", \"\", \"\") or "
           "label_replace(sum by (pod) (vllm:request_success_total{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\"}), \"gpuscaler_part\", \"requests\", \"\", \"\") or "
           "label_replace(max by (pod) (timestamp(vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"})), \"gpuscaler_part\", \"at\", \"\", \"\") or "
           "label_replace(min by (pod) (timestamp(vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"})), \"gpuscaler_part\", \"at_min\", \"\", "
           "\"\")");
    promql_default_pods(&spec, false, q, sizeof(q));
    assert_null(strstr(q, "counted"));
    assert_null(strstr(q, "request_success_total")); /* no counter parts either */
    assert_non_null(strstr(q, "\"waiting\""));
    /* Triton: no running gauge; a metric's own matchers stay */
    scrape_spec_init(&spec, SCRAPE_TRITON);
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "nv_inference_request_success{model=\"a\"}");
    promql_default_pods(&spec, true, q, sizeof(q));
    assert_null(strstr(q, "\"running\""));
    assert_true(strncmp(q, "label_replace(sum by (pod) (nv_inference_pending_request_count{", 63) ==
                0);
    assert_non_null(strstr(q, "pod=~\"{{pods}}\",model=\"a\"}[{{window}}]"));
    /* generic without metrics: no query */
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    promql_default_pods(&spec, true, q, sizeof(q));
    assert_string_equal(q, "");
    /* it expands as the other queries do */
    scrape_spec_init(&spec, SCRAPE_VLLM);
    char tmpl[PROMQL_MAX_QUERY], err[200];
    promql_default_pods(&spec, true, tmpl, sizeof(tmpl));
    assert_int_equal(promql_expand(tmpl, "team-a", "chat", "2m", q, sizeof(q), err, sizeof(err)),
                     0);
    assert_non_null(strstr(q, "namespace=\"team-a\",pod=~\"chat-"));
    assert_non_null(strstr(q, "[2m]"));
}

#define SERIES(part, pod, v)                                                                      \
    "{\"metric\":{\"gpuscaler_part\":\"" part "\",\"pod\":\"" pod "\"},\"value\":[1,\"" v "\"]}"
#define VECTOR(...)                                                                               \
    "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[" __VA_ARGS__ "]}}"

/* The per-pod answer: merged a pod at a time and sorted; series that say
 * nothing about a pod skipped; the envelope checked as for one series. */
static void test_parse_pods(void **state)
{
    (void)state;
    struct promql_pods p;
    char err[200];
    const char *ok = VECTOR(SERIES("running", "b", "3") "," SERIES("waiting", "b", "2") ","
                            SERIES("counted", "a", "1") "," SERIES("running", "a", "NaN") ","
                            SERIES("waiting", "a", "-1") "," SERIES("running", "b", "1") ","
                            SERIES("queued", "c", "5") ","
                            "{\"metric\":{\"gpuscaler_part\":\"running\"},\"value\":[1,\"7\"]}");
    assert_int_equal(promql_parse_pods(ok, strlen(ok), &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 2);
    assert_string_equal(p.v[0].name, "a");
    assert_true(p.v[0].counted && isnan(p.v[0].running) && isnan(p.v[0].waiting));
    assert_string_equal(p.v[1].name, "b");
    assert_true(!p.v[1].counted && p.v[1].running == 4 && p.v[1].waiting == 2);
    assert_true(p.running_seen && p.waiting_seen && p.counted_seen);
    promql_pods_free(&p);
    assert_null(p.v);

    /* the counter's newest value and time: summed, and the newest time; a time out of
     * range, or a negative or NaN counter, skipped */
    const char *ctr = VECTOR(SERIES("requests", "a", "40") "," SERIES("requests", "a", "2") ","
                             SERIES("at", "a", "1700000000.25") "," SERIES("at", "a", "1700000001.5")
                             "," SERIES("at_min", "a", "1700000001") "," SERIES("at_min", "a",
                             "1700000000.5") ","
                             SERIES("requests", "b", "-1") "," SERIES("at", "b", "1e12") ","
                             SERIES("requests", "c", "NaN") "," SERIES("at", "c", "0"));
    assert_int_equal(promql_parse_pods(ctr, strlen(ctr), &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 1);
    assert_string_equal(p.v[0].name, "a");
    assert_true(p.v[0].requests == 42);
    assert_int_equal(p.v[0].at_ms, 1700000001500);
    assert_int_equal(p.v[0].at_min_ms, 1700000000500); /* the oldest */
    promql_pods_free(&p);

    /* two series of one pod whose sum is past a double's range: unknown, not +Inf */
    const char *big = VECTOR(SERIES("running", "a", "1e308") "," SERIES("running", "a", "1e308")
                             "," SERIES("counted", "a", "1"));
    assert_int_equal(promql_parse_pods(big, strlen(big), &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 1);
    assert_true(isnan(p.v[0].running) && !p.running_seen && p.counted_seen);
    promql_pods_free(&p);

    const char *none = VECTOR();
    assert_int_equal(promql_parse_pods(none, strlen(none), &p, err, sizeof(err)), 0);
    assert_true(p.n == 0 && !p.running_seen && !p.waiting_seen && !p.counted_seen);
    promql_pods_free(&p);

    static const struct {
        const char *body;
        int rc;
        const char *err;
    } bad[] = {
        {"{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error\"}",
         -EREMOTEIO, "prometheus error (bad_data): parse error"},
        {"{\"status\":\"success\",\"isPartial\":true,\"data\":{\"resultType\":\"vector\","
         "\"result\":[]}}",
         -EREMOTEIO, "partial response"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[]}}", -EBADMSG,
         "is not a vector"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\"}}", -EBADMSG,
         "no data object"},
        {VECTOR("{\"metric\":{\"pod\":\"a\"}}"), -EBADMSG, "no float value"},
        {VECTOR("{\"value\":[1,\"1\"]}"), -EBADMSG, "no metric object"},
        {VECTOR("{\"metric\":{},\"value\":[1,1]}"), -EBADMSG, "not a string"},
        {VECTOR("3"), -EBADMSG, "not an object"},
        {"[1,", -EBADMSG, "not JSON"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        int rc = promql_parse_pods(bad[i].body, strlen(bad[i].body), &p, err, sizeof(err));
        if (rc != bad[i].rc || !strstr(err, bad[i].err))
            fail_msg("case %zu: rc %d err '%s'", i, rc, err);
        assert_true(p.n == 0 && p.v == NULL);
    }
}

/* ---- client against a fake Prometheus ---------------------------------------- */

/* FAKE_BUSY_*: the rate and p99 as FAKE_OK, the busy-time query empty or NaN. */
enum fake_mode {
    FAKE_OK,
    FAKE_EMPTY,
    FAKE_NAN,
    FAKE_BAD_QUERY,
    FAKE_502,
    FAKE_HOLD,
    FAKE_BUSY_EMPTY,
    FAKE_BUSY_NAN,
    FAKE_MATRIX,
    FAKE_STRAY /* range answers with a point an hour before the range and one at 1e11 s */
};

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    struct testsrv *srv;
    struct promql *pq;
    enum fake_mode mode;
    char token_path[64];
    char last_auth[128];
    char last_tenant[64];
    bool last_empty; /* an X-Empty header came, with no value */
    char last_query[PROMQL_MAX_QUERY];
    char post_query[PROMQL_MAX_QUERY]; /* the query of the last POST */
    int range_requests, busy_queries, posts;
    int64_t range_points;
    int results, seeds, closes;
    struct scrape_result r;
    bool pods_answered, pods_counted_seen; /* the per-pod answer of the last result */
    struct promql_notes notes;              /* ... and why its optional queries failed */
    size_t pods_n;
    double pods_running;
    int pods_queries;
    struct promql_seed_result sr;
    struct testsrv_conn *held;
    int range_503;          /* range requests after the first to answer 503, from now */
    int range_delay_ms;     /* range requests are answered this much later */
    uv_timer_t delay_timer; /* ... by this timer, for delayed (start, end, step) */
    struct testsrv_conn *delayed;
    double delayed_at[3];
};

/* Value of query parameter name in target, %-decoded (+ is a space). */
static bool param(const char *target, const char *name, char *out, size_t outlen)
{
    const char *q = strchr(target, '?');
    size_t nl = strlen(name);
    for (const char *p = q; p; p = strchr(p + 1, '&')) {
        if (strncmp(p + 1, name, nl) != 0 || p[1 + nl] != '=')
            continue;
        size_t o = 0;
        for (const char *c = p + 2 + nl; *c && *c != '&' && o + 1 < outlen; c++) {
            if (*c == '%' && c[1] && c[2]) {
                char h[3] = {c[1], c[2], 0};
                out[o++] = (char)strtol(h, NULL, 16);
                c += 2;
            } else {
                out[o++] = *c == '+' ? ' ' : *c;
            }
        }
        out[o] = '\0';
        return true;
    }
    return false;
}

static void json(struct testsrv_conn *c, int status, const char *body)
{
    testsrv_respond(c, status, "application/json", body, strlen(body), NULL);
}

/* A range request's matrix: 5 at every step of [s, e], NaN at every 7th point. */
static void range_answer(struct fx *f, struct testsrv_conn *c, double s, double e, double st)
{
    struct util_buf b = {0};
    util_buf_puts(&b, "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":"
                      "[{\"metric\":{},\"values\":[");
    if (f->mode == FAKE_STRAY)
        util_buf_printf(&b, "[%.3f,\"5\"],", s - 3600);
    for (double x = s; x <= e + 1e-9; x += st) {
        util_buf_printf(&b, "%s[%.3f,\"%s\"]", x > s ? "," : "", x,
                        f->range_points % 7 == 3 ? "NaN" : "5");
        f->range_points++;
    }
    if (f->mode == FAKE_STRAY)
        util_buf_puts(&b, ",[100000000000,\"5\"]");
    util_buf_puts(&b, "]}]}}");
    json(c, 200, b.data);
    util_buf_free(&b);
}

static void on_delay(uv_timer_t *t)
{
    struct fx *f = t->data;
    struct testsrv_conn *c = f->delayed;
    f->delayed = NULL;
    range_answer(f, c, f->delayed_at[0], f->delayed_at[1], f->delayed_at[2]);
}

static void handler(struct testsrv_conn *c, const struct testsrv_req *req, void *arg)
{
    struct fx *f = arg;
    char t[64] = "", start[64], end[64], step[64];
    /* a long query comes as a POST of the same parameters: read them as a target */
    static char posted[3 * PROMQL_MAX_QUERY + 512];
    const char *target = req->target;
    if (strcmp(req->method, "POST") == 0) {
        char ct[64] = "";
        assert_true(testsrv_req_header(req, "Content-Type", ct, sizeof(ct)));
        assert_string_equal(ct, "application/x-www-form-urlencoded");
        assert_null(strchr(req->target, '?'));
        assert_true(strlen(req->target) + 1 + req->body_len < sizeof(posted));
        snprintf(posted, sizeof(posted), "%s?%.*s", req->target, (int)req->body_len, req->body);
        target = posted;
        f->posts++;
    } else {
        assert_string_equal(req->method, "GET");
        assert_true(strlen(req->target) <= PROMQL_GET_MAX_URL);
    }
    f->last_auth[0] = f->last_tenant[0] = '\0';
    testsrv_req_header(req, "Authorization", f->last_auth, sizeof(f->last_auth));
    testsrv_req_header(req, "X-Scope-OrgID", f->last_tenant, sizeof(f->last_tenant));
    char empty[8] = "-";
    f->last_empty = testsrv_req_header(req, "X-Empty", empty, sizeof(empty)) && !empty[0];
    assert_true(param(target, "query", f->last_query, sizeof(f->last_query)));
    if (target == posted)
        snprintf(f->post_query, sizeof(f->post_query), "%s", f->last_query);
    /* partial answers refused, to Thanos and VictoriaMetrics alike */
    char flag[16];
    assert_true(param(target, "partial_response", flag, sizeof(flag)));
    assert_string_equal(flag, "false");
    assert_true(param(target, "deny_partial_response", flag, sizeof(flag)));
    assert_string_equal(flag, "1");
    if (strncmp(target, "/prefix/api/v1/query_range?", 27) == 0) {
        assert_true(param(target, "start", start, sizeof(start)));
        assert_true(param(target, "end", end, sizeof(end)));
        assert_true(param(target, "step", step, sizeof(step)));
        double s = strtod(start, NULL), e = strtod(end, NULL), st = strtod(step, NULL);
        f->range_requests++;
        if (f->mode == FAKE_BAD_QUERY) {
            json(c, 400, "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse "
                         "error\"}");
            return;
        }
        if (f->mode == FAKE_EMPTY) {
            json(c, 200, "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                         "\"result\":[]}}");
            return;
        }
        if (f->range_requests > 1 && f->range_503 > 0) {
            f->range_503--;
            testsrv_respond(c, 503, "text/plain", "store unavailable\n", 18, NULL);
            return;
        }
        if (f->range_delay_ms > 0) {
            f->delayed = c;
            f->delayed_at[0] = s;
            f->delayed_at[1] = e;
            f->delayed_at[2] = st;
            uv_timer_start(&f->delay_timer, on_delay, (uint64_t)f->range_delay_ms, 0);
            return;
        }
        range_answer(f, c, s, e, st);
        return;
    }
    assert_true(strncmp(target, "/prefix/api/v1/query?", 21) == 0);
    assert_true(param(target, "time", t, sizeof(t)));
    assert_string_equal(t, "1700000000.250");
    assert_true(param(target, "nocache", flag, sizeof(flag))); /* VictoriaMetrics: now */
    assert_string_equal(flag, "1");
    bool p99 = strstr(f->last_query, "histogram_quantile") != NULL;
    bool busy = strstr(f->last_query, "inference_time") != NULL &&
                !strstr(f->last_query, PROMQL_PART_LABEL);
    if (strstr(f->last_query, PROMQL_PART_LABEL)) {
        f->pods_queries++;
        if (f->mode == FAKE_OK || f->mode == FAKE_BUSY_EMPTY || f->mode == FAKE_BUSY_NAN) {
            /* two pods running 4 and 2; one counted; a series of another part and one
             * without a pod are skipped */
            json(c, 200,
                 "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
                 "{\"metric\":{\"gpuscaler_part\":\"running\",\"pod\":\"chat-a\"},"
                 "\"value\":[1700000000.25,\"4\"]},"
                 "{\"metric\":{\"gpuscaler_part\":\"running\",\"pod\":\"chat-b\"},"
                 "\"value\":[1700000000.25,\"2\"]},"
                 "{\"metric\":{\"gpuscaler_part\":\"counted\",\"pod\":\"chat-a\"},"
                 "\"value\":[1700000000.25,\"1\"]},"
                 "{\"metric\":{\"gpuscaler_part\":\"other\",\"pod\":\"chat-c\"},"
                 "\"value\":[1700000000.25,\"1\"]},"
                 "{\"metric\":{\"gpuscaler_part\":\"running\"},"
                 "\"value\":[1700000000.25,\"9\"]}]}}");
            return;
        }
    }
    if (busy)
        f->busy_queries++;
    enum fake_mode mode = f->mode;
    if (mode == FAKE_BUSY_EMPTY || mode == FAKE_BUSY_NAN)
        mode = !busy ? FAKE_OK : mode == FAKE_BUSY_EMPTY ? FAKE_EMPTY : FAKE_NAN;
    if (mode == FAKE_STRAY) /* instant queries answer as FAKE_OK */
        mode = FAKE_OK;
    switch (mode) {
    case FAKE_OK:
        json(c, 200,
             p99    ? "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{"
                      "\"metric\":{},\"value\":[1700000000.25,\"1.875\"]}]}}"
             : busy ? "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{"
                      "\"metric\":{},\"value\":[1700000000.25,\"3.5\"]}]}}"
                    : "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{"
                      "\"metric\":{},\"value\":[1700000000.25,\"12.5\"]}]}}");
        break;
    case FAKE_EMPTY:
        json(c, 200, "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}");
        break;
    case FAKE_NAN:
        json(c, 200, "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{"
                     "\"metric\":{},\"value\":[1700000000.25,\"NaN\"]}]}}");
        break;
    case FAKE_BAD_QUERY:
        json(c, 400, "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"invalid "
                     "parameter \\\"query\\\": 1:1: parse error\"}");
        break;
    case FAKE_502:
        testsrv_respond(c, 502, "text/html", "<html>bad gateway</html>", 24, NULL);
        break;
    case FAKE_HOLD:
        f->held = c;
        break;
    case FAKE_MATRIX: /* a range vector (x[2m]) asked as an instant query */
        json(c, 200, "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{"
                     "\"metric\":{},\"values\":[[1700000000,\"0\"],[1700000060,\"9\"]]}]}}");
        break;
    case FAKE_BUSY_EMPTY: /* mapped above */
    case FAKE_BUSY_NAN:
    case FAKE_STRAY:
        break;
    }
}

static void on_result(const struct scrape_result *r, const struct promql_pods *pods,
                      const struct promql_notes *notes, void *arg)
{
    struct fx *f = arg;
    f->results++;
    f->r = *r;
    f->notes = *notes;
    f->pods_answered = pods != NULL;
    f->pods_n = pods ? pods->n : 0;
    f->pods_counted_seen = pods && pods->counted_seen;
    f->pods_running = 0;
    for (size_t i = 0; pods && i < pods->n; i++)
        if (!isnan(pods->v[i].running))
            f->pods_running += pods->v[i].running;
}

static void on_seed(const struct promql_seed_result *r, void *arg)
{
    struct fx *f = arg;
    f->seeds++;
    f->sr = *r;
}

static void on_closed(void *arg)
{
    ((struct fx *)arg)->closes++;
}

static int ranges;
static struct promql_range_result range_res;

static void on_range(struct promql_range_result *r, void *arg)
{
    struct fx *f = arg;
    f->seeds++;
    ranges++;
    range_res = *r; /* take the series */
    r->series.points = NULL;
    r->series.npoints = 0;
}

static void write_token(struct fx *f, const char *tok)
{
    FILE *fp = fopen(f->token_path, "w");
    assert_non_null(fp);
    fprintf(fp, "%s\n", tok);
    fclose(fp);
}

/* A client with base's settings (NULL: the token file), its URL the test
 * server's /prefix/ unless url_override. */
static struct fx *fx_new_with(const char *url_override, const struct promql_config *base)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpc_new(&f->loop, &f->http), 0);
    f->srv = testsrv_start(&f->loop, handler, f);
    assert_int_equal(uv_timer_init(&f->loop, &f->delay_timer), 0);
    f->delay_timer.data = f;
    snprintf(f->token_path, sizeof(f->token_path), "/tmp/gpuscaler-promql-token-%d", getpid());
    write_token(f, "tok-1");
    char url[128];
    snprintf(url, sizeof(url), "%s/prefix/", testsrv_url(f->srv));
    struct promql_config c;
    promql_config_init(&c);
    if (base) {
        c = *base;
    } else {
        c.token_file = f->token_path;
    }
    c.url = url_override ? url_override : url;
    c.timeout_ms = 2000;
    assert_int_equal(promql_new(&f->loop, f->http, &c, &f->pq), 0);
    return f;
}

static struct fx *fx_new(const char *url_override)
{
    return fx_new_with(url_override, NULL);
}

static bool held(void *arg)
{
    return ((struct fx *)arg)->held != NULL;
}

static void run_until(struct fx *f, int *counter, int n)
{
    assert_true(testsrv_run_until_count(&f->loop, counter, n, 20000));
}

static void fx_finish(struct fx *f)
{
    promql_close(f->pq, on_closed, f);
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    uv_close((uv_handle_t *)&f->delay_timer, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closes, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    unlink(f->token_path);
    xfree(f);
}

static struct promql_target target(struct scrape_spec *spec)
{
    scrape_spec_init(spec, SCRAPE_VLLM);
    return (struct promql_target){.ns = "team-a", .deployment = "chat", .spec = spec};
}

static void test_client_results(void **state)
{
    (void)state;
    struct fx *f = fx_new(NULL);
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    char err[160];
    static const struct {
        enum fake_mode mode;
        bool valid;
        const char *why;
    } cases[] = {
        {FAKE_OK, true, ""},
        {FAKE_EMPTY, false, "rate: the query returned no data"},
        {FAKE_NAN, false, "rate: the rate query returned nan"},
        {FAKE_BAD_QUERY, false,
         "rate: HTTP 400: prometheus error (bad_data): invalid parameter \"query\": 1:1: parse "
         "error"},
        {FAKE_502, false, "rate: HTTP 502 from prometheus"},
        {FAKE_BUSY_EMPTY, true, ""}, /* no busy time: still valid, busy unknown */
        {FAKE_BUSY_NAN, true, ""},
        /* its first point was read as the answer: the oldest of the range */
        {FAKE_MATRIX, false,
         "rate: the query returned a range vector (2 points): use an instant expression, such "
         "as rate(x[2m]) rather than x[2m]"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        f->mode = cases[i].mode;
        /* rotation: re-read each time; white space around it is not the token's, as
         * Prometheus reads a credentials file (TrimSpace) */
        write_token(f, i % 2 ? " \ttok-odd " : "tok-even");
        int before = f->results;
        assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)),
                         0);
        assert_int_equal(f->results, before); /* never synchronously */
        run_until(f, &f->results, before + 1);
        assert_int_equal(f->results, before + 1);
        assert_string_equal(f->last_auth, i % 2 ? "Bearer tok-odd" : "Bearer tok-even");
        if (f->r.valid != cases[i].valid || strcmp(f->r.why, cases[i].why) != 0)
            fail_msg("case %zu: valid %d why '%s'", i, f->r.valid, f->r.why);
        if (cases[i].valid) {
            assert_true(f->r.request_rate == 12.5);
            assert_true(f->r.p99_ms == 1875);
            assert_int_equal(f->r.time_ms, 1700000000250);
        } else {
            assert_true(isnan(f->r.request_rate));
        }
        if (cases[i].mode == FAKE_OK)
            assert_true(f->r.busy == 3.5);
        else
            assert_true(f->r.busy == -1);
        if (cases[i].mode == FAKE_MATRIX)
            assert_true(f->r.p99_ms == -1); /* the p99 asked so is unknown too */
        /* the optional queries' failures come back for the caller to log (once per
         * change); none where they answered, or had no data (no traffic) */
        bool failing = cases[i].mode == FAKE_BAD_QUERY || cases[i].mode == FAKE_502 ||
                       cases[i].mode == FAKE_MATRIX;
        assert_int_equal(f->notes.p99[0] != '\0', failing);
        assert_int_equal(f->notes.pods[0] != '\0', failing);
        assert_int_equal(f->notes.busy[0] != '\0', failing || cases[i].mode == FAKE_BUSY_NAN ||
                                                        cases[i].mode == FAKE_NAN);
        if (cases[i].mode == FAKE_MATRIX)
            assert_non_null(strstr(f->notes.p99, "range vector"));
        assert_true(f->r.inflight < 0 && f->r.queued < 0 && f->r.backlog < 0);
        /* the per-pod answer comes beside the result: parsed where the server gave one
         * (an empty vector, or one whose only series has no labels, says no pod has any
         * part), none where it failed */
        bool pods_ok = cases[i].mode != FAKE_BAD_QUERY && cases[i].mode != FAKE_502 &&
                       cases[i].mode != FAKE_MATRIX;
        bool full = cases[i].mode == FAKE_OK || cases[i].mode == FAKE_BUSY_EMPTY ||
                    cases[i].mode == FAKE_BUSY_NAN;
        if (f->pods_answered != pods_ok)
            fail_msg("case %zu: per-pod answer %d", i, f->pods_answered);
        assert_int_equal(f->pods_n, full ? 2 : 0);
        assert_true(f->pods_running == (full ? 6 : 0));
        assert_true(f->pods_counted_seen == full);
    }
    assert_int_equal(f->pods_queries, (int)UTIL_ARRAY_LEN(cases));
    assert_int_equal(f->busy_queries, (int)UTIL_ARRAY_LEN(cases)); /* one per promql_get */
    /* the query the server saw last was the expanded p99 or rate query */
    assert_non_null(strstr(f->last_query, "namespace=\"team-a\",pod=~\"chat-[bcdfghjklmnpqrstvwxz"
                                          "2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}\""));
    assert_non_null(strstr(f->last_query, "[2m]"));
    /* a busy-time template of the workload's own replaces the default; one that does not
     * expand is an error now, as for the rate */
    f->mode = FAKE_OK;
    t.busy_tmpl = "sum(my_inference_time_in_service{ns=\"{{namespace}}\"})";
    int before = f->results;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, before + 1);
    assert_true(f->r.valid && f->r.busy == 3.5);
    assert_int_equal(f->busy_queries, (int)UTIL_ARRAY_LEN(cases) + 1);
    t.busy_tmpl = "sum(x{{pod}})";
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "{{pod}}"));
    t.busy_tmpl = NULL;

    /* a query whose URL would pass PROMQL_GET_MAX_URL goes as a POST of the same
     * parameters, form-encoded; the others of the same get stay GETs */
    struct util_buf lb = {0};
    util_buf_puts(&lb, "sum(rate(vllm:request_success_total{namespace=\"{{namespace}}\",pod=~\""
                       "{{pods}}\",route!~\"");
    for (int i = 0; i < 700; i++)
        util_buf_puts(&lb, "/v1|"); /* 8 bytes a time once encoded */
    util_buf_puts(&lb, "x\"}[{{window}}]))");
    t.rate_tmpl = lb.data;
    before = f->results;
    int posts = f->posts;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, before + 1);
    assert_true(f->r.valid && f->r.request_rate == 12.5 && f->r.p99_ms == 1875);
    assert_int_equal(f->posts, posts + 1);
    assert_non_null(strstr(f->post_query, "route!~\"/v1|/v1|"));
    assert_non_null(strstr(f->post_query, "|x\"}[2m]))"));
    assert_non_null(strstr(f->post_query, "namespace=\"team-a\""));
    t.rate_tmpl = NULL;
    util_buf_free(&lb);

    /* a template that does not expand is an error now, no callback */
    t.rate_tmpl = "sum(rate(x{{bogus}}[1m]))";
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "bogus"));
    /* no generic default */
    struct scrape_spec gen;
    scrape_spec_init(&gen, SCRAPE_GENERIC);
    t.rate_tmpl = NULL;
    t.spec = &gen;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "no rate query"));
    /* an unreadable token file */
    t.spec = &spec;
    unlink(f->token_path);
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), -EIO);
    assert_non_null(strstr(err, "bearer token"));
    write_token(f, "tok");
    fx_finish(f);
}

/* An answer over the body cap (a query that does not aggregate, returning a
 * series per pod) is invalid with a why that says so, not a transport error. */
static void test_client_answer_too_big(void **state)
{
    (void)state;
    struct promql_config c;
    promql_config_init(&c);
    c.max_body = 64; /* the rate's answer is about 100 bytes */
    struct fx *f = fx_new_with(NULL, &c);
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    char err[160];
    f->mode = FAKE_OK;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, 1);
    assert_false(f->r.valid);
    if (!strstr(f->r.why, "rate: the answer is too big (") ||
        !strstr(f->r.why, "): a query that does not aggregate (use sum)?"))
        fail_msg("why '%s'", f->r.why);
    assert_false(f->pods_answered); /* the per-pod answer is over the cap too */
    fx_finish(f);
}

/* Extra headers and their checks; basic auth with the password read for
 * every request; a missing password file fails the query, not the client. */
static void test_client_auth_headers(void **state)
{
    (void)state;
    char err[200];
    static const struct {
        const char *name, *value, *why; /* why: NULL = valid */
    } checks[] = {
        {"X-Scope-OrgID", "team-a", NULL},
        {"THANOS-TENANT", "a|b", NULL},
        {"X-Empty", "", NULL},
        {"X-Tab", "a\tb", NULL},
        {"authorization", "Bearer x", "header Authorization is set by gpuscaler itself (use"},
        {"Host", "evil", "header Host is set by gpuscaler itself"},
        {"accept", "text/plain", "header Accept is set by gpuscaler itself"},
        {"X Scope", "a", "header name 'X Scope' is not an HTTP token"},
        {"X:Y", "a", "header name 'X:Y' is not an HTTP token"},
        {"", "a", "a header needs a name"},
        {"X-Inject", "a\r\nHost: evil", "header X-Inject: the value has a control character (0x0d)"},
        {"X-Nul", "a\x7f", "header X-Nul: the value has a control character (0x7f)"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(checks); i++) {
        int rc = promql_header_check(checks[i].name, checks[i].value, err, sizeof(err));
        if (!checks[i].why) {
            if (rc != 0)
                fail_msg("check %zu: %s", i, err);
        } else if (rc != -EINVAL || strncmp(err, checks[i].why, strlen(checks[i].why)) != 0) {
            fail_msg("check %zu: rc %d '%s'", i, rc, err);
        }
    }

    char pass_path[64];
    snprintf(pass_path, sizeof(pass_path), "/tmp/gpuscaler-promql-pass-%d", getpid());
    FILE *fp = fopen(pass_path, "w");
    assert_non_null(fp);
    fputs("s3cret:x\n", fp);
    fclose(fp);
    const struct promql_header hs[] = {{"X-Scope-OrgID", "team-a"}, {"X-Empty", ""}};
    struct promql_config c;
    promql_config_init(&c);
    c.url = "http://127.0.0.1:1";
    c.headers = hs;
    c.n_headers = 2;
    c.username = "gpu:scaler";
    c.password_file = pass_path;
    /* the whole config's checks, as promql_new applies them */
    static const char *const bad_why[] = {
        "username: 'gpu:scaler' has a ':' or a control character",
        "token-file and username/password-file exclude each other",
        "password-file: set without username (give both, or neither)",
        "cert-file: set without key-file (give both, or neither)",
        "headers: x-scope-orgid is given twice",
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad_why); i++) {
        struct promql_config b = c;
        const struct promql_header twice[] = {{"X-Scope-OrgID", "a"}, {"x-scope-orgid", "b"}};
        if (i == 1) {
            b.username = "gpu";
            b.token_file = "/t";
        } else if (i == 2) {
            b.username = NULL;
        } else if (i == 3) {
            b.username = "gpu";
            b.cert_file = "/c";
        } else if (i == 4) {
            b.username = "gpu";
            b.headers = twice;
        }
        assert_int_equal(promql_config_check(&b, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, bad_why[i]);
        uv_loop_t loop;
        struct httpc *h;
        struct promql *pq = NULL;
        assert_int_equal(uv_loop_init(&loop), 0);
        assert_int_equal(httpc_new(&loop, &h), 0);
        assert_int_equal(promql_new(&loop, h, &b, &pq), -EINVAL);
        assert_null(pq);
        httpc_close(h, NULL, NULL);
        assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
        assert_int_equal(uv_loop_close(&loop), 0);
    }
    c.username = "gpu";
    assert_int_equal(promql_config_check(&c, err, sizeof(err)), 0);

    struct fx *f = fx_new_with(NULL, &c);
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    f->mode = FAKE_OK;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, 1);
    assert_true(f->r.valid);
    assert_string_equal(f->last_tenant, "team-a");
    assert_true(f->last_empty);
    /* base64("gpu:s3cret:x"): a ':' in the password is the password's */
    assert_string_equal(f->last_auth, "Basic Z3B1OnMzY3JldDp4");
    /* rotated in place: the next request carries the new password */
    fp = fopen(pass_path, "w");
    assert_non_null(fp);
    fputs("n3w", fp);
    fclose(fp);
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, 2);
    assert_string_equal(f->last_auth, "Basic Z3B1Om4zdw==");
    /* a password file with two lines, or none, fails the query with the reason */
    static const char *const bad_files[] = {"a\nb\n", NULL};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad_files); i++) {
        unlink(pass_path);
        if (bad_files[i]) {
            fp = fopen(pass_path, "w");
            assert_non_null(fp);
            fputs(bad_files[i], fp);
            fclose(fp);
        }
        assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)),
                         -EIO);
        assert_non_null(strstr(err, bad_files[i] ? "has more than one line"
                                                 : "cannot read the password file"));
    }
    assert_int_equal(f->results, 2);
    unlink(pass_path);
    fx_finish(f);
}

static void test_client_unreachable(void **state)
{
    (void)state;
    /* nothing listens on port 1 of 127.0.0.1 */
    struct fx *f = fx_new("http://127.0.0.1:1");
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    char err[160];
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, 1);
    assert_false(f->r.valid);
    assert_non_null(strstr(f->r.why, "rate: prometheus unreachable"));
    fx_finish(f);
}

static void test_seed_chunks(void **state)
{
    (void)state;
    struct fx *f = fx_new(NULL);
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    struct forecast_config fc;
    forecast_config_init(&fc);
    struct forecast *fo = forecast_new(&fc);
    char err[160];
    /* 25,000 s at 1 s steps: 25,001 points in 18 chunks of <= 1,440 (a
     * seed's chunk; a range query's is 10,000) */
    assert_int_equal(promql_seed(f->pq, &t, 1700000000000, 25000000, 1000, fo, on_seed, f, err,
                                 sizeof(err)),
                     0);
    run_until(f, &f->seeds, 1);
    assert_int_equal(f->sr.err, 0);
    assert_int_equal(f->range_requests, 18);
    assert_int_equal(f->range_points, 25001);
    assert_int_equal(f->sr.observed + f->sr.skipped, 25001);
    assert_true(f->sr.skipped >= 25001 / 7); /* the NaN points */
    struct forecast_result fr;
    assert_int_equal(forecast_predict(fo, 1700000000000, 0, &fr), 0);
    assert_true(fabs(fr.mean - 5) < 0.5);
    /* a workload with no rate query has nothing to seed from; one whose template does not
     * expand neither */
    struct scrape_spec gen;
    scrape_spec_init(&gen, SCRAPE_GENERIC);
    t.spec = &gen;
    assert_int_equal(promql_seed(f->pq, &t, 1700000000000, 25000000, 1000, fo, on_seed, f, err,
                                 sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "no rate query"));
    t.spec = &spec;
    t.rate_tmpl = "sum(rate(x{{bogus}}[1m]))";
    assert_int_equal(promql_seed(f->pq, &t, 1700000000000, 25000000, 1000, fo, on_seed, f, err,
                                 sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "bogus"));
    assert_int_equal(f->seeds, 1);
    forecast_free(fo);
    fx_finish(f);
}

/* A chunk that fails with a 5xx (a Thanos store, a querier restarting), a
 * timeout or a dropped connection is asked again, up to three times in all:
 * a week's seed no longer fails at its sixth day, to start again from the
 * first five minutes later. A third failure, or a refusal of the query
 * (4xx), ends it. */
static void test_seed_chunk_retried(void **state)
{
    (void)state;
    struct fx *f = fx_new(NULL);
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    struct forecast_config fc;
    forecast_config_init(&fc);
    struct forecast *fo = forecast_new(&fc);
    char err[160];
    f->range_503 = 2; /* the second chunk fails twice */
    assert_int_equal(promql_seed(f->pq, &t, 1700000000000, 25000000, 1000, fo, on_seed, f, err,
                                 sizeof(err)),
                     0);
    run_until(f, &f->seeds, 1);
    assert_int_equal(f->sr.err, 0);
    assert_int_equal(f->sr.retried, 2);
    assert_int_equal(f->range_requests, 18 + 2);
    assert_int_equal(f->sr.observed + f->sr.skipped, 25001);
    forecast_free(fo);
    /* three failures of a chunk end the seed, the last one's reason told */
    fo = forecast_new(&fc);
    f->range_requests = 0;
    f->range_503 = 3;
    assert_int_equal(promql_seed(f->pq, &t, 1700000000000, 25000000, 1000, fo, on_seed, f, err,
                                 sizeof(err)),
                     0);
    run_until(f, &f->seeds, 2);
    assert_int_equal(f->sr.err, -EPROTO);
    assert_int_equal(f->sr.retried, 2);
    assert_int_equal(f->range_requests, 1 + 3);
    assert_non_null(strstr(f->sr.why, "HTTP 503"));
    assert_non_null(strstr(f->sr.why, "(asked 3 times)"));
    forecast_free(fo);
    /* a refused query is not asked again */
    fo = forecast_new(&fc);
    f->range_requests = 0;
    f->mode = FAKE_BAD_QUERY;
    assert_int_equal(promql_seed(f->pq, &t, 1700000000000, 25000000, 1000, fo, on_seed, f, err,
                                 sizeof(err)),
                     0);
    run_until(f, &f->seeds, 3);
    assert_int_equal(f->sr.err, -EPROTO);
    assert_int_equal(f->sr.retried, 0);
    assert_int_equal(f->range_requests, 1);
    forecast_free(fo);
    fx_finish(f);
}

/* A range chunk waits longer than an instant query (the fixture's timeout,
 * 2 s): a day of minutes over many pods takes seconds where an instant
 * query takes milliseconds, and every chunk answered after 2 s failed the
 * seed. */
static void test_range_chunk_outlasts_the_instant_timeout(void **state)
{
    (void)state;
    struct fx *f = fx_new(NULL);
    f->range_delay_ms = 2500;
    char err[160];
    assert_int_equal(promql_range(f->pq, "sum(rate(x[1m]))", 1700000000000, 1700000060000,
                                  10000, on_range, f, err, sizeof(err)),
                     0);
    run_until(f, &f->seeds, 1);
    assert_int_equal(range_res.err, 0);
    assert_int_equal(range_res.series.npoints, 7);
    assert_int_equal(f->range_requests, 1);
    promql_series_free(&range_res.series);
    fx_finish(f);
}

/* Points outside the chunk asked for (a server's or a proxy's bug) are
 * dropped: one at t = 1e11 s took the forecaster's clock to the year 5138,
 * where it walked 1.6e9 buckets and then refused every later point as
 * older; in a range query it ended the series there. */
static void test_seed_stray_points(void **state)
{
    (void)state;
    struct fx *f = fx_new(NULL);
    f->mode = FAKE_STRAY;
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    struct forecast_config fc;
    forecast_config_init(&fc);
    struct forecast *fo = forecast_new(&fc);
    char err[160];
    assert_int_equal(promql_seed(f->pq, &t, 1700000000000, 25000000, 1000, fo, on_seed, f, err,
                                 sizeof(err)),
                     0);
    run_until(f, &f->seeds, 1);
    assert_int_equal(f->sr.err, 0);
    assert_int_equal(f->range_requests, 18);
    assert_int_equal(f->sr.observed + f->sr.skipped, 25001 + 2 * 18);
    assert_int_equal(f->sr.observed, 25001 - (25001 + 3) / 7); /* every point in range but NaN */
    assert_int_equal(forecast_last_ms(fo), 1700000000000 - 1000); /* the last is a NaN */
    assert_int_equal(forecast_observe(fo, 1700000000000 + 15000, 5), 0);
    forecast_free(fo);

    const char *q = "sum(rate(vllm:request_success_total{namespace=\"a\"}[5m]))";
    ranges = 0;
    assert_int_equal(promql_range(f->pq, q, 1700000000000 - 25000000, 1700000000000, 1000,
                                  on_range, f, err, sizeof(err)),
                     0);
    run_until(f, &f->seeds, 2);
    assert_int_equal(range_res.err, 0);
    assert_int_equal(range_res.series.npoints, 25001);
    for (size_t i = 0; i < range_res.series.npoints; i++)
        assert_int_equal(range_res.series.points[i].t_ms,
                         1700000000000 - 25000000 + (int64_t)i * 1000);
    promql_series_free(&range_res.series);
    fx_finish(f);
}

/* promql_range: the literal query in chunks of at most 10,000 steps, every
 * point kept (NaN too), oldest first; errors and no data reported once. */
static void test_range(void **state)
{
    (void)state;
    struct fx *f = fx_new(NULL);
    char err[160];
    const char *q = "sum(rate(vllm:request_success_total{namespace=\"a\"}[5m]))";
    ranges = 0;
    assert_int_equal(promql_range(f->pq, q, 1700000000000 - 25000000, 1700000000000, 1000,
                                  on_range, f, err, sizeof(err)),
                     0);
    run_until(f, &f->seeds, 1);
    assert_int_equal(ranges, 1);
    assert_int_equal(range_res.err, 0);
    assert_string_equal(f->last_query, q);
    assert_int_equal(f->range_requests, 3);
    assert_int_equal(range_res.series.npoints, 25001);
    size_t nan = 0;
    for (size_t i = 0; i < range_res.series.npoints; i++) {
        assert_int_equal(range_res.series.points[i].t_ms,
                         1700000000000 - 25000000 + (int64_t)i * 1000);
        nan += isnan(range_res.series.points[i].v);
    }
    assert_int_equal(nan, (25001 + 3) / 7);
    promql_series_free(&range_res.series);

    /* a query Prometheus refuses, and one without data */
    f->mode = FAKE_BAD_QUERY;
    assert_int_equal(promql_range(f->pq, q, 1700000000000 - 60000, 1700000000000, 1000, on_range,
                                  f, err, sizeof(err)),
                     0);
    run_until(f, &f->seeds, 2);
    assert_int_equal(range_res.err, -EPROTO);
    assert_non_null(strstr(range_res.why, "HTTP 400"));
    assert_non_null(strstr(range_res.why, "parse error"));
    assert_int_equal(range_res.series.npoints, 0);
    f->mode = FAKE_EMPTY;
    assert_int_equal(promql_range(f->pq, q, 1700000000000 - 60000, 1700000000000, 1000, on_range,
                                  f, err, sizeof(err)),
                     0);
    run_until(f, &f->seeds, 3);
    assert_int_equal(range_res.err, -ENODATA);
    assert_int_equal(ranges, 3);
    /* refused before sending: the callback is never called */
    assert_int_equal(promql_range(f->pq, "", 0, 1000, 1000, on_range, f, err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(promql_range(f->pq, q, 5000, 1000, 1000, on_range, f, err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(promql_range(f->pq, q, 0, (int64_t)PROMQL_MAX_RANGE_POINTS * 1000, 1000,
                                  on_range, f, err, sizeof(err)),
                     -E2BIG);
    assert_int_equal(ranges, 3);
    fx_finish(f);
}

static void test_close_inflight(void **state)
{
    (void)state;
    struct fx *f = fx_new(NULL);
    f->mode = FAKE_HOLD;
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    char err[160];
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    assert_true(testsrv_run_until(&f->loop, held, f, 20000));
    promql_close(f->pq, on_closed, f);
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    uv_close((uv_handle_t *)&f->delay_timer, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->results, 1);
    assert_false(f->r.valid);
    assert_string_equal(f->r.why, "rate: query cancelled");
    assert_int_equal(f->closes, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    unlink(f->token_path);
    xfree(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),           cmocka_unit_test(test_expand),
        cmocka_unit_test(test_pods_regex),
        cmocka_unit_test(test_parse),              cmocka_unit_test(test_client_results),
        cmocka_unit_test(test_pods_query),         cmocka_unit_test(test_parse_pods),
        cmocka_unit_test(test_client_answer_too_big),
        cmocka_unit_test(test_client_auth_headers),
        cmocka_unit_test(test_client_unreachable), cmocka_unit_test(test_seed_chunks),
        cmocka_unit_test(test_seed_chunk_retried),
        cmocka_unit_test(test_range_chunk_outlasts_the_instant_timeout),
        cmocka_unit_test(test_seed_stray_points),
        cmocka_unit_test(test_close_inflight),     cmocka_unit_test(test_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

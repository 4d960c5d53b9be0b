/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the Prometheus source's pure parts: the default templates and
 * their expansion, the pod-name regex, and the response parser (a table of
 * real and broken answers, the per-pod answer). The client is tested in
 * test-promql-client.c. */
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

#include "promql/promql.h"
#include "util/util.h"

/* What the default queries wrap a value's selector in: each address once. */
#define KEYED_END                                                                          \
    ", \"gpuscaler_key\", \"$1\", \"container\", \"(.+)\"), \"gpuscaler_key\", \"\", "           \
    "\"instance\", \"[^:]+:[0-9]+|\\\\[.+\\\\]:[0-9]+\")"
#define DEDUP                                                                              \
    "max by (pod, instance, gpuscaler_key) (label_replace(label_replace(sum by (pod, "     \
    "instance, container, job, service, endpoint) ("
#define DEDUP_END ")" KEYED_END ")"

/* ---- templates ------------------------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    static const struct {
        enum scrape_profile p;
        const char *rate, *p99;
    } want[] = {
        {SCRAPE_VLLM,
         "sum(" DEDUP "rate(vllm:request_success_total{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
         "[{{window}}])" DEDUP_END ")",
         "histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"
         "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])))"},
        {SCRAPE_TRITON,
         "sum(" DEDUP "rate(nv_inference_request_success{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
         "[{{window}}])" DEDUP_END ")",
         ""},
        {SCRAPE_TGI,
         "sum(" DEDUP "rate(tgi_request_success{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])" DEDUP_END ")",
         "histogram_quantile(0.99, sum by (le) (rate(tgi_request_duration_bucket"
         "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])))"},
        {SCRAPE_SGLANG,
         "sum(" DEDUP "rate(sglang:num_requests_total{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
         "[{{window}}])" DEDUP_END ")",
         "histogram_quantile(0.99, sum by (le) (rate(sglang:e2e_request_latency_seconds_bucket"
         "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])))"},
        {SCRAPE_NIM,
         "sum(" DEDUP "rate(request_success_total{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
         "[{{window}}])" DEDUP_END ")",
         "histogram_quantile(0.99, sum by (le) (rate(e2e_request_latency_seconds_bucket"
         "{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])))"},
        {SCRAPE_TEI,
         "sum(" DEDUP "rate(te_embed_success{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])" DEDUP_END ")",
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
    assert_string_equal(q, "sum(" DEDUP "rate(svc_seconds_total{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\"}[{{window}}])" DEDUP_END ")");
    /* the profiles': only while every pod with the request counter has the busy counter */
    scrape_spec_init(&spec, SCRAPE_VLLM);
    promql_default_busy(&spec, q, sizeof(q));
    assert_string_equal(
        q, "(sum(" DEDUP "rate(vllm:request_inference_time_seconds_sum{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\"}[{{window}}])" DEDUP_END ")) and on() (count(count by (pod) "
           "(vllm:request_inference_time_seconds_sum{namespace=\"{{namespace}}\",pod=~\"{{pods}}"
           "\"})) == count(count by (pod) (vllm:request_success_total{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\"})))");
    scrape_spec_init(&spec, SCRAPE_TRITON); /* microseconds */
    promql_default_busy(&spec, q, sizeof(q));
    assert_non_null(strstr(q, "(sum(" DEDUP "rate(nv_inference_compute_infer_duration_us{"));
    assert_non_null(strstr(q, "[{{window}}])" DEDUP_END ") * 1e-06) and on() ("));
    assert_non_null(strstr(q, "(nv_inference_request_success{"));

    /* a metric's own label matchers join the pods' in every query, written
     * back from their parse (double quotes, no blanks) */
    scrape_spec_init(&spec, SCRAPE_TRITON);
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "nv_inference_request_success{model=\"ensemble\", version!='2',}");
    snprintf(spec.busy_metric, sizeof(spec.busy_metric),
             "nv_inference_compute_infer_duration_us{model=\"ensemble\"}");
    promql_default_rate(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(" DEDUP "rate(nv_inference_request_success{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",model=\"ensemble\",version!=\"2\"}[{{window}}])" DEDUP_END ")");
    promql_default_busy(&spec, q, sizeof(q));
    assert_string_equal(
        q, "(sum(" DEDUP "rate(nv_inference_compute_infer_duration_us{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\",model=\"ensemble\"}[{{window}}])" DEDUP_END ") * 1e-06) and on() (count(count "
           "by (pod) (nv_inference_compute_infer_duration_us{namespace=\"{{namespace}}\","
           "pod=~\"{{pods}}\",model=\"ensemble\"})) == count(count by (pod) "
           "(nv_inference_request_success{namespace=\"{{namespace}}\",pod=~\"{{pods}}\","
           "model=\"ensemble\",version!=\"2\"})))");
    /* a regex matcher goes to Prometheus as written: its own RE2 reads it */
    scrape_spec_init(&spec, SCRAPE_VLLM);
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "vllm:request_success_total{model_name=~\"llama-.*\",engine!~\"[1-9]\"}");
    promql_default_rate(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(" DEDUP "rate(vllm:request_success_total{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",model_name=~\"llama-.*\",engine!~\"[1-9]\"}"
                           "[{{window}}])" DEDUP_END ")");
    /* an escape either quote takes (`\'` in double quotes, `\"` in single)
     * is written as PromQL reads it: a value quoted again (as written, the
     * query was a lexer error, 400 on every tick) */
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "vllm:request_success_total{model_name=\"o\\'brien\",tag='say \\\"hi\\\"',"
             "path=~\"a\\\\.b\"}");
    promql_default_rate(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(" DEDUP "rate(vllm:request_success_total{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",model_name=\"o'brien\",tag=\"say \\\"hi\\\"\","
                           "path=~\"a\\\\.b\"}[{{window}}])" DEDUP_END ")");
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
    assert_string_equal(q, "sum(" DEDUP "rate(http_requests_total{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",code!~\"5..\"}[{{window}}]) or "
                           "rate(http_requests{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\",code!~\"5..\"}[{{window}}])" DEDUP_END ")");
    assert_null(strstr(q, "__name__"));
    promql_default_busy(&spec, q, sizeof(q));
    assert_non_null(strstr(q, "(sum(" DEDUP "rate(busy_seconds_total{namespace="));
    assert_non_null(strstr(q, "[{{window}}]) or rate(busy_seconds{namespace="));
    assert_non_null(strstr(q, "count by (pod) (http_requests_total{namespace="));
    assert_non_null(strstr(q, "\"5..\"} or http_requests{namespace="));
    promql_default_pods(&spec, true, q, sizeof(q));
    assert_non_null(strstr(q, "sum by (pod) (" DEDUP "inflight{namespace="));
    assert_null(strstr(q, "inflight_total"));
    assert_non_null(strstr(q, "count by (pod) (rate(http_requests_total{namespace="));
    assert_non_null(strstr(q, "[{{window}}]) or rate(http_requests{namespace="));
    assert_non_null(strstr(q, "sum by (pod) (" DEDUP "http_requests_total{namespace="));
    assert_non_null(strstr(q, "max by (pod) (timestamp(http_requests_total{namespace="));
    assert_non_null(strstr(q, "\"5..\"}) or timestamp(http_requests{namespace="));
    assert_null(strstr(q, "__name__"));
    snprintf(spec.busy_metric, sizeof(spec.busy_metric), "lat_seconds_sum");
    promql_default_busy(&spec, q, sizeof(q));
    assert_non_null(strstr(q, "(sum(" DEDUP "rate(lat_seconds_sum{namespace="));
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
    assert_string_equal(q, "sum(" DEDUP "rate(reqs_total{namespace=\"{{namespace}}\",pod=~\"{{pods}}\"}"
                           "[{{window}}])" DEDUP_END ")");
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
        {"x", "a", "b", "0s", 100, -EINVAL, "window"},   /* an empty window */
        {"x", "a", "b", "30s1m", 100, -EINVAL, "window"}, /* Prometheus reads 1m30s only */
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
        q, "label_replace(sum by (pod) (" DEDUP "vllm:num_requests_running{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"}" DEDUP_END "), \"gpuscaler_part\", \"running\", \"\", "
           "\"\") or "
           "label_replace(sum by (pod) (" DEDUP "vllm:num_requests_waiting{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"}" DEDUP_END "), \"gpuscaler_part\", \"waiting\", \"\", "
           "\"\") or "
           "label_replace(count by (pod) (rate(vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])), \"gpuscaler_part\", "
           "\"counted\", \"\", \"\") or "
           "label_replace(sum by (pod) (" DEDUP "vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"}" DEDUP_END "), \"gpuscaler_part\", \"requests\", \"\", "
           "\"\") or "
           "label_replace(max by (pod) (timestamp(vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"})), \"gpuscaler_part\", \"at\", \"\", \"\") or "
           "label_replace(min by (pod) (timestamp(vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"})), \"gpuscaler_part\", \"at_min\", \"\", "
           "\"\") or "
           "label_replace(max by (pod) (count_over_time(vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"}[{{window}}])), \"gpuscaler_part\", \"samples\", "
           "\"\", \"\") or "
           "label_replace(max by (pod) (timestamp(vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"} offset {{window}})), \"gpuscaler_part\", "
           "\"before\", \"\", \"\") or "
           "label_replace(count by (pod) ((count by (pod, instance, gpuscaler_key) (count by "
           "(pod, instance, gpuscaler_key, container, job, service, endpoint) (label_replace("
           "label_replace(vllm:request_success_total{namespace=\"{{namespace}}\",pod=~\""
           "{{pods}}\"}" KEYED_END ")) > 1) or on (pod, instance) (count by (pod, instance) "
           "(count by (pod, instance, job) (vllm:request_success_total{namespace=\""
           "{{namespace}}\",pod=~\"{{pods}}\"})) > 1)), \"gpuscaler_part\", \"dup\", \"\", "
           "\"\")");
    /* the longest names (every metric 127 bytes and named by its family, so each
     * counter part names it twice; a 63-byte namespace; a 57-byte Deployment name of
     * dots and letters, the longest pod regex: names are cut to 58 bytes, and each dot
     * escaped): longer than another query may be, within the per-pod query's own limit */
    {
        struct scrape_spec big;
        char tmpl[PROMQL_MAX_PODS_QUERY], out[PROMQL_MAX_PODS_QUERY], why[200], ns[64],
            dep[254];
        scrape_spec_init(&big, SCRAPE_VLLM);
        char *f[] = {big.request_metric, big.rejected_metric, big.inflight_metric,
                     big.queue_metric};
        for (int i = 0; i < 4; i++) {
            memset(f[i], 'a' + i, 127);
            f[i][127] = '\0';
        }
        memset(ns, 'n', 63);
        ns[63] = '\0';
        for (int i = 0; i < 57; i++)
            dep[i] = i % 2 ? '.' : 'd';
        dep[57] = '\0';
        promql_default_pods(&big, true, tmpl, sizeof(tmpl));
        assert_true(strlen(tmpl) < sizeof(tmpl) - 1);
        assert_int_equal(promql_expand(tmpl, ns, dep, "2m", out, sizeof(out), why, sizeof(why)),
                         0);
        print_message("the longest per-pod query: %zu bytes\n", strlen(out));
        assert_true(strlen(out) > 2 * PROMQL_MAX_QUERY && strlen(out) < PROMQL_MAX_PODS_QUERY - 1);
        assert_non_null(strstr(out, "\"before\""));
        /* and the other default queries, each within PROMQL_MAX_QUERY: the rate and the
         * refused rate together too, as the forecast's seed asks them */
        void (*const other[])(const struct scrape_spec *, char *, size_t) = {
            promql_default_rate, promql_default_refused, promql_default_busy};
        size_t rate_refused = 0;
        for (size_t i = 0; i < UTIL_ARRAY_LEN(other); i++) {
            char t1[PROMQL_MAX_QUERY], o1[PROMQL_MAX_QUERY];
            other[i](&big, t1, sizeof(t1));
            assert_true(strlen(t1) > 0 && strlen(t1) < sizeof(t1) - 1);
            assert_int_equal(promql_expand(t1, ns, dep, "2m", o1, sizeof(o1), why, sizeof(why)),
                             0);
            print_message("the longest default query %zu: %zu bytes\n", i, strlen(o1));
            if (i < 2)
                rate_refused += strlen(o1);
        }
        assert_true(rate_refused + strlen(" + ( or vector(0))") < PROMQL_MAX_QUERY - 1);
    }
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
    static const char head[] =
        "label_replace(sum by (pod) (" DEDUP "nv_inference_pending_request_count{";
    assert_true(strncmp(q, head, sizeof(head) - 1) == 0);
    assert_non_null(strstr(q, "pod=~\"{{pods}}\",model=\"a\"}[{{window}}]"));
    /* and its refused requests' counter (reason REJECTED), last; their window rate is a
     * query of its own, evaluated with the rate's */
    const char *refused = " or label_replace(sum by (pod) (" DEDUP "nv_inference_request_failure{"
                          "namespace=\"{{namespace}}\",pod=~\"{{pods}}\",reason=\"REJECTED\"}" DEDUP_END "), "
                          "\"gpuscaler_part\", \"refused\", \"\", \"\")";
    assert_string_equal(q + strlen(q) - strlen(refused), refused);
    promql_default_refused(&spec, q, sizeof(q));
    assert_string_equal(q, "sum(" DEDUP "rate(nv_inference_request_failure{namespace=\""
                           "{{namespace}}\",pod=~\"{{pods}}\",reason=\"REJECTED\"}"
                           "[{{window}}])" DEDUP_END ")");
    promql_default_pods(&spec, false, q, sizeof(q)); /* a rate of the user's own: not asked */
    assert_null(strstr(q, "refused"));
    scrape_spec_init(&spec, SCRAPE_VLLM); /* vLLM queues: none */
    promql_default_refused(&spec, q, sizeof(q));
    assert_string_equal(q, "");
    scrape_spec_init(&spec, SCRAPE_TRITON);
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

/* The window's PromQL duration in milliseconds; anything else -1. */
static void test_duration(void **state)
{
    (void)state;
    assert_int_equal(promql_duration_ms("2m"), 120000);
    assert_int_equal(promql_duration_ms("1m30s"), 90000);
    assert_int_equal(promql_duration_ms("1h1ms"), 3600001);
    assert_int_equal(promql_duration_ms("0s"), 0);
    assert_int_equal(promql_duration_ms("1w1d"), 8 * 86400000LL);
    assert_int_equal(promql_duration_ms("1y"), 365 * 86400000LL);
    assert_int_equal(promql_duration_ms("1d2h3m4s5ms"), 93784005);
    const char *bad[] = {NULL,  "",      "2",     "m",    "2x",     "-1m",
                         "1.5m", "2m ",  "99999999999999999y", "293y", "106752d",
                         "9223372036855ms", "30s1m", "1m1m", "5ms1s", "1s1s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(promql_duration_ms(bad[i]), -1);
    assert_true(promql_duration_ms("292y") > 0);
    assert_int_equal(promql_duration_ms("9223372036854ms"), PROMQL_DURATION_MAX_MS);
}

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
    assert_true(p.v[0].samples == 0 && p.v[0].before_ms == 0); /* not answered: unknown */
    promql_pods_free(&p);

    /* the samples in the window and the newest before it: the most and the newest of two
     * series; a count under 1, a fraction's part, a time out of range, skipped */
    const char *smp = VECTOR(SERIES("samples", "a", "24") "," SERIES("samples", "a", "23") ","
                             SERIES("before", "a", "1699999880.5") ","
                             SERIES("before", "a", "1699999881.5") ","
                             SERIES("samples", "b", "0.5") "," SERIES("before", "b", "-3") ","
                             SERIES("samples", "c", "7.9") "," SERIES("before", "c", "NaN") ","
                             SERIES("samples", "d", "Inf") "," SERIES("before", "d", "2e11"));
    assert_int_equal(promql_parse_pods(smp, strlen(smp), &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 2);
    assert_string_equal(p.v[0].name, "a");
    assert_true(p.v[0].samples == 24);
    assert_int_equal(p.v[0].before_ms, 1699999881500);
    assert_string_equal(p.v[1].name, "c");
    assert_true(p.v[1].samples == 7 && p.v[1].before_ms == 0);
    promql_pods_free(&p);

    /* the addresses scraped by more than one target: the most of two series; under 1,
     * skipped */
    const char *dup = VECTOR(SERIES("dup", "a", "1") "," SERIES("dup", "a", "2") ","
                             SERIES("dup", "b", "0") "," SERIES("dup", "c", "NaN") ","
                             SERIES("counted", "d", "1"));
    assert_int_equal(promql_parse_pods(dup, strlen(dup), &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.v[0].dup, 2);
    assert_int_equal(p.v[1].dup, 0); /* d */
    promql_pods_free(&p);

    /* the refused requests' counter: summed per pod, a negative one skipped; none: NAN */
    const char *ref = VECTOR(SERIES("refused", "a", "20") "," SERIES("refused", "a", "10") ","
                             SERIES("refused", "b", "-2") "," SERIES("counted", "b", "1") ","
                             SERIES("counted", "c", "1"));
    assert_int_equal(promql_parse_pods(ref, strlen(ref), &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 3);
    assert_true(p.v[0].refused == 30);
    assert_true(isnan(p.v[1].refused) && p.v[1].counted);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),   cmocka_unit_test(test_expand),
        cmocka_unit_test(test_pods_regex), cmocka_unit_test(test_parse),
        cmocka_unit_test(test_pods_query), cmocka_unit_test(test_parse_pods),
        cmocka_unit_test(test_duration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

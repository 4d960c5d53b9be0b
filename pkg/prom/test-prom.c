/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for prom: grammar features, streaming splits, caps, errors with
 * positions, the want-filter fast path, golden values from the corpus
 * expositions of vLLM, Triton and TGI, and histogram_quantile vs PromQL. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "prom/prom-int.h"
#include "prom/prom.h"
#include "prom/test-prom.h"
#include "util/util.h"

static char *read_corpus(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", PROM_CORPUS_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    struct util_buf b = {0};
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
        util_buf_append(&b, tmp, n);
    fclose(f);
    *len = b.len;
    return util_buf_steal(&b);
}

static enum prom_format fmt_of(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, ".om") == 0 ? PROM_FMT_OPENMETRICS : PROM_FMT_TEXT;
}

static int parse_corpus(const char *name, struct coll *c, struct prom_error *err)
{
    size_t len;
    char *buf = read_corpus(name, &len);
    struct prom_parser_opts o = {.format = fmt_of(name)};
    int rc = prom_parse(buf, len, &o, collect, c, err);
    xfree(buf);
    return rc;
}

/* ---- syntax ------------------------------------------------------------ */

static void test_basic_text(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    const char *in = "# HELP http_requests_total The total number of HTTP requests.\n"
                     "# TYPE http_requests_total counter\n"
                     "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
                     "http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000\n"
                     "# TYPE temp gauge\n"
                     "temp 21.5\n"
                     "vllm:num_requests_running{model_name=\"m\"} 4\n";
    assert_int_equal(parse_str(in, PROM_FMT_TEXT, &c, &err), 0);
    assert_int_equal(c.n, 4);
    assert_string_equal(c.v[0].family, "http_requests_total");
    assert_int_equal(c.v[0].type, PROM_COUNTER);
    assert_int_equal(c.v[0].suffix, PROM_SUFFIX_NONE);
    assert_string_equal(c.v[0].labels, "method=\"post\",code=\"200\"");
    assert_true(c.v[0].value == 1027);
    assert_true(c.v[0].has_ts);
    assert_int_equal(c.v[0].ts, 1395066363000LL);
    assert_int_equal(c.v[0].line, 3);
    assert_true(c.v[1].value == 3);
    assert_int_equal(c.v[2].type, PROM_GAUGE);
    assert_false(c.v[2].has_ts);
    assert_true(c.v[2].value == 21.5);
    /* a name that does not belong to the last # TYPE is its own untyped family */
    assert_string_equal(c.v[3].family, "vllm:num_requests_running");
    assert_int_equal(c.v[3].type, PROM_UNTYPED);
    assert_true(isnan(c.v[3].le) && isnan(c.v[3].quantile));
    coll_free(&c);
}

static void test_escapes_utf8(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_corpus("text-features.prom", &c, &err), 0);
    const struct rec *r = find(&c, "escapes_total", NULL);
    assert_string_equal(r->labels, "path=\"C:\\models\\llama\",msg=\"line1\nline2\","
                                   "quote=\"say \"hi\"\",utf8=\"日本語 😀\"");
    assert_int_equal(r->type, PROM_COUNTER);
    coll_free(&c);

    /* invalid UTF-8 in a label value, and in HELP */
    assert_int_equal(parse_str("x{a=\"\xc3\x28\"} 1\n", PROM_FMT_TEXT, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "UTF-8"));
    assert_int_equal(err.line, 1);
    assert_int_equal(err.column, 6);
    coll_free(&c);
    assert_int_equal(parse_str("# HELP x bad \xed\xa0\x80 surrogate\n", PROM_FMT_TEXT, &c, &err),
                     -EINVAL);
    coll_free(&c);
    /* a raw NUL byte in a label value is rejected */
    static const char nul[] = "x{a=\"b\0c\"} 1\n";
    assert_int_equal(prom_parse(nul, sizeof(nul) - 1, NULL, collect, &c, &err), -EINVAL);
    assert_int_equal(err.column, 7);
    assert_non_null(strstr(err.msg, "NUL"));
    coll_free(&c);
    /* raw tab and a lone backslash-escaped quote at the end are fine */
    assert_int_equal(parse_str("x{a=\"t\tb\\\"\"} 1\n", PROM_FMT_TEXT, &c, &err), 0);
    assert_string_equal(c.v[0].labels, "a=\"t\tb\"\"");
    coll_free(&c);
}

static void test_text_features(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_corpus("text-features.prom", &c, &err), 0);
    const struct rec *r = find(&c, "untyped_metric", NULL);
    assert_true(r->value == 42);
    assert_int_equal(r->type, PROM_UNTYPED);
    r = find(&c, "untyped_ts", NULL);
    assert_true(r->value == -1.5e-05);
    assert_int_equal(r->ts, 1752351234567LL);
    r = find(&c, "spaced_out", NULL);
    assert_string_equal(r->labels, "a=\"1\",b=\"2\"");
    assert_true(r->value == 7);
    assert_int_equal(r->ts, -3);
    assert_true(isnan(find(&c, "specials", "v=\"nan\"")->value));
    assert_true(find(&c, "specials", "v=\"+inf\"")->value == INFINITY);
    assert_true(find(&c, "specials", "v=\"-inf\"")->value == -INFINITY);
    assert_true(find(&c, "specials", "v=\"inf\"")->value == INFINITY);
    assert_true(find(&c, "specials", "v=\"big\"")->value == 1.7976931348623157e308);
    assert_true(find(&c, "specials", "v=\"tiny\"")->value == 4.9e-324);
    assert_true(find(&c, "specials", "v=\"exp\"")->value == 6.02214076E+23);
    assert_true(find(&c, "specials", "v=\"dot\"")->value == 0.5);
    r = find(&c, "rpc_duration_seconds", "quantile=\"0.99\"");
    assert_int_equal(r->type, PROM_SUMMARY);
    assert_true(r->quantile == 0.99);
    assert_true(r->value == 76656);
    r = find(&c, "rpc_duration_seconds_sum", NULL);
    assert_int_equal(r->suffix, PROM_SUFFIX_SUM);
    assert_string_equal(r->family, "rpc_duration_seconds");
    assert_true(r->value == 1.7560473e+07);
    assert_int_equal(find(&c, "rpc_duration_seconds_count", NULL)->suffix, PROM_SUFFIX_COUNT);
    r = find(&c, "empty_labels", NULL);
    assert_string_equal(r->labels, "");
    assert_int_equal(r->type, PROM_GAUGE);
    coll_free(&c);

    assert_int_equal(parse_corpus("crlf.prom", &c, &err), 0);
    assert_int_equal(c.n, 2);
    assert_true(find(&c, "vllm:num_requests_waiting", "model_name=\"m\"")->value == 2);
    coll_free(&c);

    /* last line without '\n' */
    assert_int_equal(parse_str("a 1\nb 2", PROM_FMT_TEXT, &c, &err), 0);
    assert_int_equal(c.n, 2);
    assert_true(c.v[1].value == 2);
    coll_free(&c);
}

static void test_numbers(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        double v;
    } cases[] = {
        {"1e-05", 0, 1e-05},
        {"0", 0, 0},
        {"-0", 0, -0.0},
        {"+5", 0, 5},
        {".5", 0, 0.5},
        {"5.", 0, 5},
        {"1E3", 0, 1000},
        {"1e+05", 0, 1e5},
        {"0.1", 0, 0.1},
        {"123456789012345678", 0, 123456789012345678.0},
        {"0.00015000000000000001", 0, 0.00015000000000000001},
        {"1.7976931348623157e308", 0, 1.7976931348623157e308},
        {"4.9e-324", 0, 4.9e-324},
        {"1e-400", 0, 0},
        {"Inf", 0, INFINITY},
        {"+Inf", 0, INFINITY},
        {"-inf", 0, -INFINITY},
        {"Infinity", 0, INFINITY},
        {"-INFINITY", 0, -INFINITY},
        {"1e309", -EINVAL, 0},
        {"", -EINVAL, 0},
        {"+", -EINVAL, 0},
        {".", -EINVAL, 0},
        {"1e", -EINVAL, 0},
        {"1e+", -EINVAL, 0},
        {"e5", -EINVAL, 0},
        {"1.2.3", -EINVAL, 0},
        {"0x10", -EINVAL, 0},
        {"0x1p-2", -EINVAL, 0},
        {"1_000", -EINVAL, 0},
        {"+NaN", -EINVAL, 0},
        {"-nan", -EINVAL, 0},
        {"infi", -EINVAL, 0},
        {" 1", -EINVAL, 0},
        {"1 ", -EINVAL, 0},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        double v = 12345;
        int rc = prom_parse_float(cases[i].s, strlen(cases[i].s), &v);
        if (rc != cases[i].rc)
            fail_msg("'%s': rc %d, want %d", cases[i].s, rc, cases[i].rc);
        if (rc == 0 && memcmp(&v, &cases[i].v, sizeof(v)) != 0)
            fail_msg("'%s': got %.17g want %.17g", cases[i].s, v, cases[i].v);
    }
    double v;
    assert_int_equal(prom_parse_float("NaN", 3, &v), 0);
    assert_true(isnan(v));
    assert_int_equal(prom_parse_float("nan", 3, &v), 0);
    assert_true(isnan(v));
    assert_int_equal(prom_parse_float("Nan", 3, &v), 0); /* prometheus-cpp writes this */
    assert_true(isnan(v));

    /* the fast path must round exactly like strtod on many decimal shapes */
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 20000; i++) {
        char buf[64];
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int digits = 1 + (int)(x % 19), exp = (int)((x >> 8) % 60) - 30;
        unsigned long long m = (x >> 16) % 10000000000000000000ULL;
        int n = snprintf(buf, sizeof(buf), "%llu", m);
        if (n > digits)
            n = digits;
        int dot = (int)((x >> 40) % (unsigned)(n + 1));
        char num[80];
        snprintf(num, sizeof(num), "%.*s.%.*se%d", dot, buf, n - dot, buf + dot, exp);
        if (dot == 0 && n == 0)
            continue;
        double want = strtod(num, NULL), got;
        assert_int_equal(prom_parse_float(num, strlen(num), &got), 0);
        if (memcmp(&got, &want, sizeof(got)) != 0)
            fail_msg("'%s': got %.17g want %.17g", num, got, want);
    }
}

static void test_timestamps(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_str("a 1 -1000\nb 2 9223372036854775807\n", PROM_FMT_TEXT, &c, &err), 0);
    assert_int_equal(c.v[0].ts, -1000);
    assert_int_equal(c.v[1].ts, INT64_MAX);
    coll_free(&c);
    /* 0.0.4 timestamps are integer ms */
    assert_int_equal(parse_corpus("bad-timestamp.prom", &c, &err), -EINVAL);
    assert_int_equal(err.line, 1);
    assert_int_equal(err.column, 5);
    assert_non_null(strstr(err.msg, "timestamp"));
    coll_free(&c);
    /* beyond int64 ms: the sample is kept, the timestamp ignored (it cannot
     * be a real time; Prometheus' scraper keeps such samples too) */
    assert_int_equal(parse_str("a 1 9223372036854775808\nb 2 -99999999999999999999999\n",
                               PROM_FMT_TEXT, &c, &err),
                     0);
    assert_int_equal(c.n, 2);
    assert_false(c.v[0].has_ts);
    assert_true(c.v[0].value == 1);
    assert_false(c.v[1].has_ts);
    assert_true(c.v[1].value == 2);
    coll_free(&c);
    /* ... but a malformed one still fails the line */
    assert_int_equal(parse_str("a 1 92233720368547758080x\n", PROM_FMT_TEXT, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "timestamp"));
    coll_free(&c);
    assert_int_equal(parse_corpus("big-timestamp.prom", &c, &err), 0);
    assert_int_equal(c.n, 3);
    assert_false(find(&c, "too_late", NULL)->has_ts);
    assert_true(find(&c, "too_late", NULL)->value == 7);
    assert_int_equal(find(&c, "on_time", NULL)->ts, 1752351234567LL);
    assert_false(find(&c, "too_early", NULL)->has_ts);
    coll_free(&c);
    assert_int_equal(parse_str("a 1 1e300\nb 2 -1e16\nc 3 9.2e15\n# EOF\n", PROM_FMT_OPENMETRICS,
                               &c, &err),
                     0);
    assert_int_equal(c.n, 3);
    assert_false(c.v[0].has_ts);
    assert_false(c.v[1].has_ts);
    assert_false(c.v[2].has_ts);
    coll_free(&c);
    assert_int_equal(parse_str("a 1 9.1e15\n# EOF\n", PROM_FMT_OPENMETRICS, &c, &err), 0);
    assert_true(c.v[0].has_ts);
    assert_int_equal(c.v[0].ts, 9100000000000000000LL);
    coll_free(&c);
    /* OpenMetrics timestamps are float seconds */
    assert_int_equal(
        parse_str("a 1 1520879607.789\nb 1 1.5e9\n# EOF\n", PROM_FMT_OPENMETRICS, &c, &err), 0);
    assert_int_equal(c.v[0].ts, 1520879607789LL);
    assert_int_equal(c.v[1].ts, 1500000000000LL);
    coll_free(&c);
    /* milliseconds toward zero, as openmetricsparse.go's int64(ts * 1000) */
    assert_int_equal(parse_str("a 1 1520872607.1239\nb 1 0.0019\nc 1 -0.0019\n# EOF\n",
                               PROM_FMT_OPENMETRICS, &c, &err),
                     0);
    assert_int_equal(c.v[0].ts, 1520872607123LL);
    assert_int_equal(c.v[1].ts, 1);
    assert_int_equal(c.v[2].ts, -1);
    coll_free(&c);
    /* 0.0.4: the comma between label pairs is optional (prometheus' TestPromParse) */
    assert_int_equal(parse_str("# TYPE go_gc summary\n"
                               "go_gc { quantile = \"2.0\" a = \"b\" } 8.3835e-05\n"
                               "x{a=\"b\"c=\"d\",} 1\n",
                               PROM_FMT_TEXT, &c, &err),
                     0);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.v[0].labels, "quantile=\"2.0\",a=\"b\"");
    assert_true(c.v[0].quantile == 2.0);
    assert_true(c.v[0].value == 8.3835e-05);
    assert_string_equal(c.v[1].labels, "a=\"b\",c=\"d\"");
    coll_free(&c);
    assert_int_equal(parse_str("a 1 NaN\n# EOF\n", PROM_FMT_OPENMETRICS, &c, &err), -EINVAL);
    coll_free(&c);
}

static void test_histogram_families(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    const char *in = "# TYPE lat histogram\n"
                     "lat_bucket{le=\"0.1\"} 1\n"
                     "lat_bucket{le=\"1e0\"} 3\n"
                     "lat_bucket{le=\"+Inf\"} 4\n"
                     "lat_sum 2.5\n"
                     "lat_count 4\n"
                     "lat_created 1.7e9\n"
                     "lat_total 4\n" /* not a histogram suffix: its own family */
                     "# TYPE g gaugehistogram\n"
                     "g_bucket{le=\"1\"} 2\n"
                     "g_gcount 2\n"
                     "g_gsum 1\n"
                     "# TYPE g2 gauge_histogram\n" /* the OpenMetrics ABNF's spelling */
                     "g2_bucket{le=\"+Inf\"} 3\n"
                     "g2_gsum 1.5\n";
    assert_int_equal(parse_str(in, PROM_FMT_TEXT, &c, &err), 0);
    assert_int_equal(c.n, 12);
    assert_int_equal(c.v[10].type, PROM_GAUGE_HISTOGRAM);
    assert_int_equal(c.v[10].suffix, PROM_SUFFIX_BUCKET);
    assert_string_equal(c.v[10].family, "g2");
    assert_true(c.v[10].le == INFINITY);
    assert_int_equal(c.v[11].suffix, PROM_SUFFIX_GSUM);
    assert_int_equal(c.v[0].suffix, PROM_SUFFIX_BUCKET);
    assert_true(c.v[0].le == 0.1);
    assert_true(c.v[1].le == 1.0);
    assert_true(c.v[2].le == INFINITY);
    assert_int_equal(c.v[3].suffix, PROM_SUFFIX_SUM);
    assert_int_equal(c.v[4].suffix, PROM_SUFFIX_COUNT);
    assert_int_equal(c.v[5].suffix, PROM_SUFFIX_CREATED);
    for (int i = 0; i < 6; i++) {
        assert_string_equal(c.v[i].family, "lat");
        assert_int_equal(c.v[i].type, PROM_HISTOGRAM);
    }
    assert_string_equal(c.v[6].family, "lat_total");
    assert_int_equal(c.v[6].type, PROM_UNTYPED);
    assert_int_equal(c.v[7].type, PROM_GAUGE_HISTOGRAM);
    assert_true(c.v[7].le == 1);
    assert_int_equal(c.v[8].suffix, PROM_SUFFIX_GCOUNT);
    assert_int_equal(c.v[9].suffix, PROM_SUFFIX_GSUM);
    coll_free(&c);

    /* a bucket without a numeric le, a quantile sample without a numeric
     * quantile: kept, with le / quantile NaN, as Prometheus keeps them */
    assert_int_equal(parse_corpus("bucket-no-le.prom", &c, &err), 0);
    assert_int_equal(c.n, 2);
    assert_true(c.v[0].le == 0.1);
    assert_true(isnan(c.v[1].le));
    assert_string_equal(c.v[1].labels, "x=\"y\"");
    assert_true(c.v[1].value == 2);
    coll_free(&c);
    assert_int_equal(
        parse_str("# TYPE h histogram\nh_bucket{le=\"x\"} 1\n", PROM_FMT_TEXT, &c, &err), 0);
    assert_int_equal(c.n, 1);
    assert_true(isnan(c.v[0].le));
    assert_string_equal(c.v[0].labels, "le=\"x\"");
    coll_free(&c);
    assert_int_equal(parse_str("# TYPE s summary\ns 1\ns{quantile=\"0.5\"} 2\n", PROM_FMT_TEXT,
                               &c, &err),
                     0);
    assert_int_equal(c.n, 2);
    assert_true(isnan(c.v[0].quantile));
    assert_true(c.v[1].quantile == 0.5);
    coll_free(&c);
}

static void test_openmetrics(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_corpus("vllm-openmetrics.om", &c, &err), 0);
    const struct rec *r = find(&c, "vllm:request_success_total", "finished_reason=\"stop\"");
    assert_string_equal(r->family, "vllm:request_success");
    assert_int_equal(r->type, PROM_COUNTER);
    assert_int_equal(r->suffix, PROM_SUFFIX_TOTAL);
    assert_true(r->value == 311);
    r = find(&c, "vllm:request_success_created", "finished_reason=\"length\"");
    assert_int_equal(r->suffix, PROM_SUFFIX_CREATED);
    assert_true(r->value == 1.7523512345678902e+09);
    r = find(&c, "vllm:num_requests_waiting", NULL);
    assert_int_equal(r->ts, 1752351234500LL);
    r = find(&c, "vllm:e2e_request_latency_seconds_bucket", "le=\"2.5\"");
    assert_true(r->value == 250 && r->le == 2.5);
    r = find(&c, "vllm:cache_config_info", NULL);
    assert_int_equal(r->type, PROM_INFO);
    assert_int_equal(r->suffix, PROM_SUFFIX_INFO);
    assert_string_equal(r->family, "vllm:cache_config");
    r = find(&c, "nv_engine_state", "\"sleeping\"");
    assert_int_equal(r->type, PROM_STATESET);
    assert_true(r->value == 0);
    assert_int_equal(count_name(&c, "vllm:e2e_request_latency_seconds_bucket"), 6);
    assert_int_equal(c.n, 19);
    coll_free(&c);

    /* # EOF is required, last, and only in OpenMetrics */
    assert_int_equal(parse_corpus("bad-missing-eof.om", &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "EOF"));
    coll_free(&c);
    assert_int_equal(parse_corpus("bad-after-eof.om", &c, &err), -EINVAL);
    assert_int_equal(err.line, 4);
    coll_free(&c);
    assert_int_equal(parse_str("a 1\n# EOF\nb 2\n", PROM_FMT_TEXT, &c, &err), 0);
    assert_int_equal(c.n, 2);
    coll_free(&c);
    assert_int_equal(parse_str("a 1\n# EOF", PROM_FMT_OPENMETRICS, &c, &err), 0);
    coll_free(&c);
    /* plain comments: fine in 0.0.4, an error in OpenMetrics */
    assert_int_equal(parse_str("# hello\na 1\n", PROM_FMT_TEXT, &c, &err), 0);
    coll_free(&c);
    assert_int_equal(parse_str("# hello\na 1\n# EOF\n", PROM_FMT_OPENMETRICS, &c, &err), -EINVAL);
    assert_int_equal(err.line, 1);
    coll_free(&c);
    /* exemplars are checked, then skipped */
    assert_int_equal(parse_str("a_total 1 # {x=\"y\" 1\n# EOF\n", PROM_FMT_OPENMETRICS, &c, &err),
                     -EINVAL);
    coll_free(&c);
    assert_int_equal(
        parse_str("a_total 1 # {x=\"y\"} abc\n# EOF\n", PROM_FMT_OPENMETRICS, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "exemplar"));
    coll_free(&c);
    assert_int_equal(parse_str("a_total 1 123 # {} 2 3\n", PROM_FMT_TEXT, &c, &err), 0);
    assert_int_equal(c.v[0].ts, 123);
    coll_free(&c);
    assert_int_equal(
        prom_format_from_content_type("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        PROM_FMT_OPENMETRICS);
    assert_int_equal(prom_format_from_content_type("text/plain; version=0.0.4"), PROM_FMT_TEXT);
    assert_int_equal(prom_format_from_content_type(NULL), PROM_FMT_TEXT);
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        enum prom_format fmt;
        size_t line, column;
        const char *msg;
    } cases[] = {
        {"ok 1\nok 2\nx{a=\"b\"\n", PROM_FMT_TEXT, 3, 8, "label set"},
        {"x{a=\"b} 1\n", PROM_FMT_TEXT, 1, 6, "unterminated label value"},
        {"x{=\"b\"} 1\n", PROM_FMT_TEXT, 1, 3, "label name"},
        {"x{0=\"b\"} 1\n", PROM_FMT_TEXT, 1, 3, "label name"},
        {"x{a:b=\"c\"} 1\n", PROM_FMT_TEXT, 1, 4, "'='"},
        {"x{a=b} 1\n", PROM_FMT_TEXT, 1, 5, "'\"'"},
        {"x{a=\"b\" c=\"d\"} 1\n", PROM_FMT_OPENMETRICS, 1, 9, "','"},
        {"x{a=\"b\" =\"d\"} 1\n", PROM_FMT_TEXT, 1, 9, "','"},
        {"x{a=\"1\",a=\"2\"} 1\n", PROM_FMT_TEXT, 1, 2, "duplicate"},
        {"x\n", PROM_FMT_TEXT, 1, 2, "missing value"},
        {"x{a=\"b\"}\n", PROM_FMT_TEXT, 1, 9, "missing value"},
        {"x 1 2 3\n", PROM_FMT_TEXT, 1, 7, "after timestamp"},
        {"x 12abc\n", PROM_FMT_TEXT, 1, 3, "invalid value"},
        {"x -NaN\n", PROM_FMT_TEXT, 1, 3, "invalid value"},
        {"x 0x1F\n", PROM_FMT_TEXT, 1, 3, "invalid value"},
        {"9x 1\n", PROM_FMT_TEXT, 1, 1, "metric name"},
        {"{__name__=\"x\"} 1\n", PROM_FMT_TEXT, 1, 1, "metric name"},
        {"x-y 1\n", PROM_FMT_TEXT, 1, 2, "metric name"},
        {"# TYPE x fancy\n", PROM_FMT_TEXT, 1, 10, "type"},
        {"# TYPE x\n", PROM_FMT_TEXT, 1, 9, "missing type"},
        {"# TYPE x counter extra\n", PROM_FMT_TEXT, 1, 18, "after type"},
        {"# TYPE 1x counter\n", PROM_FMT_TEXT, 1, 8, "metric name"},
        {"# HELP\n", PROM_FMT_OPENMETRICS, 1, 7, "missing metric name"},
        {"# TYPE  \n", PROM_FMT_OPENMETRICS, 1, 9, "missing metric name"},
        {"x{a=\"b\\\"} 1\n", PROM_FMT_TEXT, 1, 6, "unterminated label value"},
        {"# EOF trailing\n", PROM_FMT_OPENMETRICS, 1, 7, "after # EOF"},
        {"#comment\n", PROM_FMT_OPENMETRICS, 1, 2, "comment"},
        {"# UNIT x s-1\n", PROM_FMT_OPENMETRICS, 1, 11, "unit"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        struct coll c = {0};
        struct prom_error err;
        int rc = parse_str(cases[i].in, cases[i].fmt, &c, &err);
        if (rc != -EINVAL || err.code != -EINVAL || err.line != cases[i].line ||
            err.column != cases[i].column || !strstr(err.msg, cases[i].msg))
            fail_msg("case %zu %s: rc %d line %zu col %zu msg '%s'", i, cases[i].in, rc, err.line,
                     err.column, err.msg);
        coll_free(&c);
    }
    /* the corpus' malformed files fail at the expected line */
    static const struct {
        const char *file;
        size_t line;
    } files[] = {
        {"bad-unterminated.prom", 2},
        {"bad-value.prom", 2},     {"bad-duplicate-label.prom", 1},
        {"bad-truncated.prom", 1}, {"bad-name.prom", 1},
        {"bad-type.prom", 1},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(files); i++) {
        struct coll c = {0};
        struct prom_error err;
        assert_int_equal(parse_corpus(files[i].file, &c, &err), -EINVAL);
        if (err.line != files[i].line)
            fail_msg("%s: line %zu want %zu (%s)", files[i].file, err.line, files[i].line, err.msg);
        coll_free(&c);
    }
}

/* A backslash before any other character is kept (the corpus file that used
 * to be a parse error). */
static void test_escape_other_corpus(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_corpus("escape-other.prom", &c, &err), 0);
    assert_int_equal(c.n, 2);
    assert_string_equal(find(&c, "bad", NULL)->labels, "label=\"oops\\q\"");
    coll_free(&c);
}

/* ---- upstream test suites -------------------------------------------- */

/* The OpenMetrics test suite's parser case "escaping"
 * (OpenObservability/OpenMetrics tests/testdata/parsers/escaping): \" \n \\
 * are escapes, any other backslash sequence (\z) is kept as is. */
static void test_om_escaping(void **state)
{
    (void)state;
    for (int f = 0; f < 2; f++) {
        struct coll c = {0};
        struct prom_error err;
        size_t len;
        char *buf = read_corpus("om-escaping.om", &len);
        struct prom_parser_opts o = {.format = f ? PROM_FMT_OPENMETRICS : PROM_FMT_TEXT};
        assert_int_equal(prom_parse(buf, len, &o, collect, &c, &err), 0);
        xfree(buf);
        assert_int_equal(c.n, 2);
        assert_string_equal(c.v[0].family, "a");
        assert_int_equal(c.v[0].type, PROM_COUNTER);
        assert_int_equal(c.v[0].suffix, PROM_SUFFIX_TOTAL);
        assert_string_equal(c.v[0].labels, "foo=\"b\"a\nr\"");
        assert_true(c.v[0].value == 1);
        assert_string_equal(c.v[1].labels, "foo=\"b\\a\\z\"");
        assert_true(c.v[1].value == 2);
        coll_free(&c);
    }
}

/* client_python's OpenMetrics parser test "label_escaping" (the table of
 * escaped -> unescaped values), in both formats and through the filtered
 * fast path too. */
static void test_label_escaping_table(void **state)
{
    (void)state;
    static const struct {
        const char *escaped, *raw;
    } cases[] = {
        {"foo", "foo"},           {"\\foo", "\\foo"},       {"\\\\foo", "\\foo"},
        {"foo\\\\", "foo\\"},     {"\\\\", "\\"},           {"\\n", "\n"},
        {"\\\\n", "\\n"},         {"\\\\\\n", "\\\n"},      {"\\\"", "\""},
        {"\\\\\\\"", "\\\""},     {"a\\tb\\u00e9", "a\\tb\\u00e9"},
        {"\\\xc3\xa9", "\\\xc3\xa9"}, /* a backslash before a multi-byte character */
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        char *in = xasprintf("# TYPE a counter\n# HELP a help\n"
                             "a_total{foo=\"%s\",bar=\"baz\"} 1\nz 2\n# EOF\n",
                             cases[i].escaped);
        char *want = xasprintf("foo=\"%s\",bar=\"baz\"", cases[i].raw);
        for (int f = 0; f < 2; f++) {
            for (int filtered = 0; filtered < 2; filtered++) {
                struct coll c = {0};
                struct prom_error err = {0};
                struct prom_parser_opts o = {.format = f ? PROM_FMT_OPENMETRICS : PROM_FMT_TEXT};
                struct prom_parser *p = prom_parser_new(&o, collect, &c);
                if (filtered)
                    assert_int_equal(prom_parser_want(p, "z", PROM_MATCH_NAME), 0);
                int rc = prom_parser_feed(p, in, strlen(in), &err);
                if (rc == 0)
                    rc = prom_parser_finish(p, &err);
                prom_parser_free(p);
                if (rc != 0)
                    fail_msg("case %zu (%s) format %d: %s", i, cases[i].escaped, f, err.msg);
                assert_int_equal(c.n, filtered ? 1 : 2);
                if (!filtered && strcmp(c.v[0].labels, want) != 0)
                    fail_msg("case %zu: labels %s, want %s", i, c.v[0].labels, want);
                coll_free(&c);
            }
        }
        xfree(in);
        xfree(want);
    }
}

/* prometheus/common expfmt's text parser case 3 ("the evil summary, mixed
 * with other types and funny comments"), which ends on bare "# HELP" lines. */
static void test_expfmt_good_03(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_corpus("expfmt-good-03.prom", &c, &err), 0);
    assert_int_equal(c.n, 12);
    const struct rec *r = find(&c, "my_summary", "quantile=\"0.9\"");
    assert_int_equal(r->type, PROM_SUMMARY);
    assert_true(r->quantile == 0.9 && r->value == 140);
    assert_int_equal(r->ts, 1);
    r = find(&c, "decoy", NULL);
    assert_true(r->value == -1);
    assert_int_equal(r->ts, -2);
    r = find(&c, "my_summary_sum", "n1=\"val2\"");
    assert_true(r->value == 8);
    assert_int_equal(r->ts, 15);
    r = find(&c, "another_summary", NULL);
    assert_int_equal(r->type, PROM_SUMMARY);
    assert_true(r->quantile == 0.3 && r->value == -1.2);
    r = find(&c, "my_summary", "quantile=\"-12.34\"");
    assert_string_equal(r->labels, "n1=\"val1\",n2=\"val2\",quantile=\"-12.34\"");
    assert_true(isnan(r->value));
    assert_int_equal(r->line, 16);
    coll_free(&c);
    /* the same bare lines, and "# TYPE" with only blanks, anywhere in 0.0.4 */
    assert_int_equal(parse_str("# HELP\n#\tTYPE \t\na 1\n# HELP \n", PROM_FMT_TEXT, &c, &err), 0);
    assert_int_equal(c.n, 1);
    coll_free(&c);
}

/* ---- streaming --------------------------------------------------------- */

static int feed_split(const char *buf, size_t len, enum prom_format fmt, size_t at, struct coll *c,
                      struct prom_error *err)
{
    struct prom_parser_opts o = {.format = fmt};
    struct prom_parser *p = prom_parser_new(&o, collect, c);
    int rc = prom_parser_feed(p, buf, at, err);
    if (rc == 0)
        rc = prom_parser_feed(p, buf + at, len - at, err);
    if (rc == 0)
        rc = prom_parser_finish(p, err);
    prom_parser_free(p);
    return rc;
}

static void test_split_every_byte(void **state)
{
    (void)state;
    static const char *const files[] = {"vllm-v1.prom",        "triton.prom",        "tgi.prom",
                                        "vllm-openmetrics.om", "text-features.prom", "crlf.prom",
                                        "escape-other.prom",   "bad-truncated.prom",
                                        "om-escaping.om",      "expfmt-good-03.prom",
                                        "big-timestamp.prom",  "om-gauge-histogram.om",
                                        "raw-newline-label.prom"};
    for (size_t f = 0; f < UTIL_ARRAY_LEN(files); f++) {
        size_t len;
        char *buf = read_corpus(files[f], &len);
        enum prom_format fmt = fmt_of(files[f]);
        struct coll whole = {.ser_only = true};
        struct prom_error werr = {0};
        int wrc = feed_split(buf, len, fmt, len, &whole, &werr);
        assert_true(whole.n > 0 || strncmp(files[f], "bad-", 4) == 0);
        for (size_t at = 0; at <= len; at++) {
            struct coll c = {.ser_only = true};
            struct prom_error err = {0};
            int rc = feed_split(buf, len, fmt, at, &c, &err);
            if (rc != wrc || err.line != werr.line || err.column != werr.column ||
                c.ser.len != whole.ser.len ||
                (c.ser.len && memcmp(c.ser.data, whole.ser.data, c.ser.len) != 0))
                fail_msg("%s split at %zu differs (rc %d/%d line %zu/%zu)", files[f], at, rc, wrc,
                         err.line, werr.line);
            coll_free(&c);
        }
        /* and one byte at a time */
        struct coll c = {.ser_only = true};
        struct prom_parser_opts o = {.format = fmt};
        struct prom_parser *p = prom_parser_new(&o, collect, &c);
        int rc = 0;
        for (size_t i = 0; i < len && rc == 0; i++)
            rc = prom_parser_feed(p, buf + i, 1, NULL);
        if (rc == 0)
            rc = prom_parser_finish(p, NULL);
        assert_int_equal(rc, wrc);
        assert_int_equal(c.ser.len, whole.ser.len);
        if (c.ser.len)
            assert_memory_equal(c.ser.data, whole.ser.data, c.ser.len);
        struct prom_stats st;
        prom_parser_stats(p, &st);
        assert_int_equal(st.bytes, len);
        assert_int_equal(st.emitted, whole.n);
        prom_parser_free(p);
        coll_free(&c);
        coll_free(&whole);
        xfree(buf);
    }
}

/* A raw newline inside a quoted label value: Prometheus' text lexer takes it
 * as part of the value (its rule is "(\\.|[^\\"])*"), so the line goes on;
 * OpenMetrics forbids it; lines after are numbered as the file's. */
static void test_raw_newline_in_label_value(void **state)
{
    (void)state;
    size_t len;
    char *buf = read_corpus("raw-newline-label.prom", &len);
    struct coll c = {0};
    struct prom_error err = {0};
    struct prom_parser_opts o = {.format = PROM_FMT_TEXT};
    assert_int_equal(prom_parse(buf, len, &o, collect, &c, &err), 0);
    assert_int_equal(c.n, 4);
    const struct rec *r = find(&c, "app_info", "note=");
    assert_string_equal(r->labels, "version=\"1.0\nrc1\",note=\"two\nlines\"");
    assert_int_equal(r->line, 3);
    assert_int_equal(find(&c, "app_info", "version=\"x\"")->line, 5);
    r = find(&c, "other", NULL);
    assert_string_equal(r->labels, "a=\"multi\nline\r\nvalue\",b=\"\\\"");
    assert_true(r->has_ts && r->ts == 1700000000000);
    assert_int_equal(r->line, 6);
    assert_int_equal(find(&c, "after", NULL)->line, 9);
    coll_free(&c);
    /* the want-filter's fast path over the unwanted ones: the same lines */
    struct prom_parser *p = prom_parser_new(&o, collect, &c);
    assert_int_equal(prom_parser_want(p, "after", PROM_MATCH_NAME), 0);
    assert_int_equal(prom_parser_feed(p, buf, len, &err), 0);
    assert_int_equal(prom_parser_finish(p, &err), 0);
    prom_parser_free(p);
    assert_int_equal(c.n, 1);
    assert_int_equal(find(&c, "after", NULL)->line, 9);
    coll_free(&c);
    /* an error after a joined line names its own line */
    struct util_buf b = {0};
    util_buf_append(&b, buf, len);
    util_buf_puts(&b, "bad{ 1\n");
    assert_int_equal(prom_parse(b.data, b.len, &o, collect, &c, &err), -EINVAL);
    assert_int_equal(err.line, 10);
    coll_free(&c);
    util_buf_free(&b);
    /* OpenMetrics has no such leniency */
    struct prom_parser_opts om = {.format = PROM_FMT_OPENMETRICS};
    const char *omtext = "m{a=\"x\ny\"} 1\n# EOF\n";
    assert_int_equal(prom_parse(omtext, strlen(omtext), &om, collect, &c, &err), -EINVAL);
    assert_int_equal(err.line, 1);
    assert_non_null(strstr(err.msg, "unterminated label value"));
    coll_free(&c);
    /* still open at the end: unterminated, at the line it began */
    const char *open = "ok 1\nm{a=\"x\ny} 1\nz 2\n";
    assert_int_equal(prom_parse(open, strlen(open), &o, collect, &c, &err), -EINVAL);
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.msg, "unterminated label value"));
    coll_free(&c);
    /* the joined line is held to the line cap, in one chunk or across chunks */
    struct prom_parser_opts capped = {.format = PROM_FMT_TEXT, .max_line = 24};
    const char *lng = "m{a=\"0123456789\n0123456789\n0123456789\"} 1\n";
    assert_int_equal(prom_parse(lng, strlen(lng), &capped, collect, &c, &err), -E2BIG);
    p = prom_parser_new(&capped, collect, &c);
    int rc = 0;
    for (size_t i = 0; lng[i] && rc == 0; i++)
        rc = prom_parser_feed(p, lng + i, 1, &err);
    assert_int_equal(rc, -E2BIG);
    prom_parser_free(p);
    coll_free(&c);
    xfree(buf);
}

static void test_size_cap(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    struct prom_parser_opts o = {.max_total = 40};
    char in[64];
    memset(in, 0, sizeof(in));
    /* exactly 40 bytes: four 10-byte lines */
    for (int i = 0; i < 4; i++)
        memcpy(in + i * 10, "abc_def 1\n", 10);
    assert_int_equal(prom_parse(in, 40, &o, collect, &c, &err), 0);
    assert_int_equal(c.n, 4);
    coll_free(&c);

    struct prom_parser *p = prom_parser_new(&o, collect, &c);
    assert_int_equal(prom_parser_feed(p, in, 30, &err), 0);
    assert_int_equal(prom_parser_feed(p, in, 10, &err), 0);
    assert_int_equal(prom_parser_feed(p, "x", 1, &err), -EFBIG);
    assert_int_equal(err.code, -EFBIG);
    assert_int_equal(err.line, 5);
    assert_non_null(strstr(err.msg, "40 bytes"));
    /* sticky, and no more callbacks */
    size_t n = c.n;
    assert_int_equal(prom_parser_feed(p, "y 1\n", 4, &err), -EFBIG);
    assert_int_equal(prom_parser_finish(p, &err), -EFBIG);
    assert_int_equal(c.n, n);
    /* reset makes it reusable */
    prom_parser_reset(p);
    assert_int_equal(prom_parser_feed(p, "y 1\n", 4, &err), 0);
    assert_int_equal(prom_parser_finish(p, &err), 0);
    assert_int_equal(c.n, n + 1);
    prom_parser_free(p);
    coll_free(&c);

    /* the default is 16 MiB */
    p = prom_parser_new(NULL, collect, &c);
    char *big = xmalloc(1 << 20);
    memset(big, '\n', 1 << 20);
    int rc = 0;
    for (int i = 0; i < 16 && rc == 0; i++)
        rc = prom_parser_feed(p, big, 1 << 20, &err);
    assert_int_equal(rc, 0);
    assert_int_equal(prom_parser_feed(p, "\n", 1, &err), -EFBIG);
    xfree(big);
    prom_parser_free(p);
}

static void test_line_cap(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    struct prom_parser_opts o = {.max_line = 16};
    /* 16 bytes before '\n' is fine */
    assert_int_equal(prom_parse("abcdefghijklmn 1\n", 17, &o, collect, &c, &err), 0);
    assert_int_equal(c.n, 1);
    /* 17 is too long: whole line in one chunk */
    assert_int_equal(prom_parse("ok 1\nabcdefghijklmno 1\n", 23, &o, collect, &c, &err), -E2BIG);
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.msg, "16 bytes"));
    /* ... split across chunks */
    for (size_t at = 1; at < 18; at++) {
        struct prom_parser *p = prom_parser_new(&o, collect, &c);
        const char *l = "abcdefghijklmno 1\n";
        int rc = prom_parser_feed(p, l, at, &err);
        if (rc == 0)
            rc = prom_parser_feed(p, l + at, 18 - at, &err);
        if (rc == 0)
            rc = prom_parser_finish(p, &err);
        assert_int_equal(rc, -E2BIG);
        prom_parser_free(p);
    }
    /* ... and an unfinished tail that is already too long */
    struct prom_parser *p = prom_parser_new(&o, collect, &c);
    assert_int_equal(prom_parser_feed(p, "aaaaaaaaaaaaaaaaaaaa", 20, &err), -E2BIG);
    prom_parser_free(p);
    coll_free(&c);
}

/* Feed text in chunks of `step` bytes (0: at once) to a parser wanting "w"
 * with 16-byte lines; returns rc, with the samples in c and stats in st. */
static int feed_wanting_w(const char *text, size_t step, struct coll *c, struct prom_stats *st,
                          struct prom_error *err)
{
    struct prom_parser_opts o = {.max_line = 16};
    struct prom_parser *p = prom_parser_new(&o, collect, c);
    assert_int_equal(prom_parser_want(p, "w", PROM_MATCH_NAME), 0);
    size_t len = strlen(text), off = 0;
    int rc = 0;
    while (rc == 0 && off < len) {
        size_t n = step && step < len - off ? step : len - off;
        rc = prom_parser_feed(p, text + off, n, err);
        off += n;
    }
    if (rc == 0)
        rc = prom_parser_finish(p, err);
    prom_parser_stats(p, st);
    prom_parser_free(p);
    return rc;
}

/* An unwanted sample's line over the cap is skipped unread, whatever the
 * chunks (Prometheus has no line limit); a wanted one's, a # TYPE's, or one
 * whose name does not end within the cap is still an error (a comment's and
 * a # HELP's: test_line_cap_comment). */
static void test_line_cap_unwanted(void **state)
{
    (void)state;
    static const char ok[] = "w 1\nother{a=\"0123456789012345678901234567890\"} 2\nw{x=\"y\"} 3\n"
                             "big 4 # {} 5 and no end of line: 0123456789abcdef";
    for (size_t step = 0; step < sizeof(ok); step++) {
        struct coll c = {0};
        struct prom_stats st;
        struct prom_error err;
        int rc = feed_wanting_w(ok, step, &c, &st, &err);
        if (rc != 0 || c.n != 2 || st.samples != 4 || st.lines != 4)
            fail_msg("step %zu: rc %d (%s) samples %zu/%llu lines %llu", step, rc, err.msg, c.n,
                     (unsigned long long)st.samples, (unsigned long long)st.lines);
        assert_true(c.v[0].value == 1 && c.v[1].value == 3);
        assert_int_equal(c.v[1].line, 3);
        coll_free(&c);
    }
    static const char *const bad[] = {
        "w{a=\"0123456789012345678901234567890\"} 1\n", /* wanted */
        "# TYPE other 0123456789012345678901234567890\n",  /* metadata */
        "# HELP other_name_longer_than_the_cap x\n",       /* the name goes on */
        "other_name_longer_than_the_cap 1\n",             /* the name goes on */
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++)
        for (size_t step = 0; step < 20; step++) {
            struct coll c = {0};
            struct prom_stats st;
            struct prom_error err;
            if (feed_wanting_w(bad[i], step, &c, &st, &err) != -E2BIG)
                fail_msg("case %zu step %zu: not refused", i, step);
            coll_free(&c);
        }
}

/* A skipped line over the cap goes on past a raw newline inside a quoted
 * label value (text format), as when it is read whole: what follows inside
 * the value, escaped quotes and a backslash before a newline included, is
 * not taken for samples, and the lines are numbered as the file's. */
static void test_line_cap_unwanted_raw_newline(void **state)
{
    (void)state;
    static const char text[] = "w 1\nother {a=\"0123456789012345678\nw 999\n\\\"} x\n\\\n"
                               "w 998\"} 2\nw{x=\"y\"} 3\n";
    for (size_t step = 0; step < sizeof(text); step++) {
        struct coll c = {0};
        struct prom_stats st;
        struct prom_error err;
        int rc = feed_wanting_w(text, step, &c, &st, &err);
        if (rc != 0 || c.n != 2 || st.samples != 3 || st.lines != 7)
            fail_msg("step %zu: rc %d (%s) samples %zu/%llu lines %llu", step, rc, err.msg, c.n,
                     (unsigned long long)st.samples, (unsigned long long)st.lines);
        assert_true(c.v[0].value == 1 && c.v[1].value == 3);
        assert_int_equal(c.v[1].line, 7);
        coll_free(&c);
    }
    /* the same file read whole (no cap reached): the same samples and lines */
    struct coll c = {0};
    struct prom_error err;
    struct prom_parser_opts o = {.format = PROM_FMT_TEXT};
    assert_int_equal(prom_parse(text, strlen(text), &o, collect, &c, &err), 0);
    assert_int_equal(c.n, 3);
    assert_int_equal(find(&c, "w", "x=")->line, 7);
    assert_string_equal(find(&c, "other", NULL)->labels,
                        "a=\"0123456789012345678\nw 999\n\"} x\n\\\nw 998\"");
    coll_free(&c);
}

/* The body ending inside a label value of a skipped line is an unterminated
 * label value at the line it began on, as when that line is read whole,
 * whatever the chunks (it was taken as the end of the line, and the samples
 * after its opening quote were lost without an error); so is a body that
 * ends on a backslash there. */
static void test_line_cap_unwanted_open_quote(void **state)
{
    (void)state;
    static const char *const open[] = {
        "w 1\nother{a=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nw 2\n",
        "w 1\nother{a=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nw 2\n\\",
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(open); i++) {
        for (size_t step = 0; step < strlen(open[i]) + 1; step++) {
            struct coll c = {0};
            struct prom_stats st;
            struct prom_error err = {0};
            int rc = feed_wanting_w(open[i], step, &c, &st, &err);
            if (rc != -EINVAL || err.line != 2 || !strstr(err.msg, "unterminated label value"))
                fail_msg("case %zu step %zu: rc %d line %zu (%s)", i, step, rc, err.line,
                         err.msg);
            coll_free(&c);
        }
        /* the same, read whole */
        struct coll c = {0};
        struct prom_error err = {0};
        struct prom_parser_opts o = {.format = PROM_FMT_TEXT};
        assert_int_equal(prom_parse(open[i], strlen(open[i]), &o, collect, &c, &err), -EINVAL);
        assert_int_equal(err.line, 2);
        assert_non_null(strstr(err.msg, "unterminated label value"));
        coll_free(&c);
    }
}

/* A label value of many raw newlines is read once: prom_line_parse gets each
 * byte of the exposition once (p->parsed), but the two '\n's that end its
 * lines, plus the head of the first line before its value was seen to go on,
 * in one chunk or in any, read whole or by the filter's fast path. Each '\n'
 * of the value used to parse the line so far again: 65,000 took 1.3 s of CPU
 * in one feed. A line joined so past the cap is still refused (wanted) or
 * skipped (not), its lines counted. */
static void test_raw_newline_parsed_once(void **state)
{
    (void)state;
    enum { NL = 20000 };
    static const char head[] = "vllm:num_requests_running{a=\"";
    struct util_buf b = {0};
    util_buf_puts(&b, head);
    for (int i = 0; i < NL; i++)
        util_buf_puts(&b, "\n");
    util_buf_puts(&b, "\",b=\"x\ny\\\n\"} 1\nnext 2\n");
    static const size_t steps[] = {0, 1, 7, 4096};
    for (int filtered = 0; filtered < 2; filtered++) {
        for (size_t i = 0; i < UTIL_ARRAY_LEN(steps); i++) {
            struct coll c = {0};
            struct prom_error err = {0};
            struct prom_parser *p = prom_parser_new(NULL, collect, &c);
            if (filtered)
                assert_int_equal(prom_parser_want(p, "next", PROM_MATCH_NAME), 0);
            int rc = 0;
            for (size_t off = 0; rc == 0 && off < b.len;) {
                size_t n = steps[i] && steps[i] < b.len - off ? steps[i] : b.len - off;
                rc = prom_parser_feed(p, b.data + off, n, &err);
                off += n;
            }
            if (rc == 0)
                rc = prom_parser_finish(p, &err);
            if (rc != 0)
                fail_msg("filtered %d step %zu: rc %d: %s", filtered, steps[i], rc, err.msg);
            if (p->parsed != b.len - 2 + strlen(head))
                fail_msg("filtered %d step %zu: %llu bytes parsed for %zu", filtered, steps[i],
                         (unsigned long long)p->parsed, b.len - 2 + strlen(head));
            struct prom_stats st;
            prom_parser_stats(p, &st);
            assert_int_equal(st.lines, NL + 4);
            assert_int_equal(st.samples, 2);
            assert_int_equal(c.n, filtered ? 1 : 2);
            assert_int_equal(find(&c, "next", NULL)->line, NL + 4);
            if (!filtered) {
                const struct rec *r = find(&c, "vllm:num_requests_running", NULL);
                assert_int_equal(strlen(r->labels), strlen("a=\"\",b=\"x\ny\\\n\"") + NL);
                assert_int_equal(strspn(r->labels + 3, "\n"), NL);
            }
            prom_parser_free(p);
            coll_free(&c);
        }
    }
    util_buf_free(&b);
    /* joined past the cap of 16: wanted, refused; not, skipped to its end */
    static const char wanted[] = "w{a=\"0\n1\n2\n3\n4\n5\n6\n7\n8\n9\"} 1\n";
    static const char other[] = "o{a=\"0\n1\n2\n3\n4\n5\n6\n\\\"\nw 3\n\"} 2\nw 4\n";
    for (size_t step = 0; step < sizeof(other); step++) {
        struct coll c = {0};
        struct prom_stats st;
        struct prom_error err = {0};
        int rc = feed_wanting_w(wanted, step, &c, &st, &err);
        if (rc != -E2BIG || c.n != 0)
            fail_msg("step %zu: rc %d (%s)", step, rc, err.msg);
        coll_free(&c);
        rc = feed_wanting_w(other, step, &c, &st, &err);
        if (rc != 0 || c.n != 1 || c.v[0].value != 4 || c.v[0].line != 11 || st.lines != 11)
            fail_msg("step %zu: rc %d (%s) samples %zu lines %llu", step, rc, err.msg, c.n,
                     (unsigned long long)st.lines);
        coll_free(&c);
    }
}


static void test_callback_stop(void **state)
{
    (void)state;
    struct coll c = {.stop_after = 2};
    struct prom_error err;
    struct prom_parser *p = prom_parser_new(NULL, collect, &c);
    assert_int_equal(prom_parser_feed(p, "a 1\nb 2\nc 3\n", 12, &err), -EINTR);
    assert_int_equal(err.line, 2);
    assert_int_equal(c.n, 2);
    assert_int_equal(prom_parser_finish(p, &err), -EINTR);
    assert_int_equal(c.n, 2);
    prom_parser_free(p);
    coll_free(&c);
}

/* ---- filter ------------------------------------------------------------ */

static void test_filter(void **state)
{
    (void)state;
    size_t len;
    char *buf = read_corpus("vllm-v1.prom", &len);
    struct coll all = {0}, c = {0};
    struct prom_error err;
    assert_int_equal(prom_parse(buf, len, NULL, collect, &all, &err), 0);

    struct prom_parser *p = prom_parser_new(NULL, collect, &c);
    assert_int_equal(prom_parser_want(p, "vllm:num_requests_running", PROM_MATCH_NAME), 0);
    assert_int_equal(prom_parser_want(p, "vllm:e2e_request_latency_seconds", PROM_MATCH_NAME), 0);
    assert_int_equal(prom_parser_want(p, "vllm:request_success_", PROM_MATCH_PREFIX), 0);
    assert_int_equal(prom_parser_want(p, "", PROM_MATCH_NAME), -EINVAL);
    /* any UTF-8 name may be quoted (Prometheus 3), but it is UTF-8 */
    assert_int_equal(prom_parser_want(p, "bad\xff", PROM_MATCH_PREFIX), -EINVAL);
    assert_int_equal(prom_parser_feed(p, buf, len, &err), 0);
    assert_int_equal(prom_parser_finish(p, &err), 0);
    /* 1 gauge + 22 buckets + _count + _sum + 3 _total + 3 _created */
    assert_int_equal(c.n, 1 + 22 + 2 + 3 + 3);
    size_t expect = 0;
    for (size_t i = 0; i < all.n; i++) {
        const char *nm = all.v[i].name;
        if (strcmp(nm, "vllm:num_requests_running") == 0 ||
            strcmp(all.v[i].family, "vllm:e2e_request_latency_seconds") == 0 ||
            strncmp(nm, "vllm:request_success_", 21) == 0)
            expect++;
    }
    assert_int_equal(c.n, expect);
    for (size_t i = 0; i < c.n; i++) { /* same samples, same fields */
        const struct rec *r = find(&all, c.v[i].name, c.v[i].labels);
        assert_true(r->value == c.v[i].value);
        assert_int_equal(r->line, c.v[i].line);
    }
    struct prom_stats st;
    prom_parser_stats(p, &st);
    assert_int_equal(st.samples, all.n);
    assert_int_equal(st.emitted, c.n);
    /* the family's _created gauge family is a different family */
    assert_int_equal(count_name(&c, "vllm:e2e_request_latency_seconds_created"), 0);

    /* fast path: structure is checked, details are not (documented trade-off) */
    struct {
        const char *in;
        int rc;
    } lines[] = {
        {"other{a=\"\xc3\x28\"} 1\n", 0},             /* bad UTF-8: not seen */
        {"other{a=\"x\",a=\"x\"} 1\n", 0},           /* duplicate label: not seen */
        {"other 1abc\n", 0},                         /* number not parsed */
        {"other{a=\"b} 1\n", -EINVAL},               /* unterminated */
        {"other{a=\"b\"}\n", -EINVAL},               /* missing value */
        {"other{a=\"b\"} zz\n", -EINVAL},            /* not a number's start */
        {"9other 1\n", -EINVAL},                     /* name */
        {"# TYPE other bogus\n", -EINVAL},           /* metadata always checked */
        {"vllm:num_requests_running 1x\n", -EINVAL}, /* wanted: full check */
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(lines); i++) {
        prom_parser_reset(p);
        int rc = prom_parser_feed(p, lines[i].in, strlen(lines[i].in), &err);
        if (rc == 0)
            rc = prom_parser_finish(p, &err);
        if (rc != lines[i].rc)
            fail_msg("'%s': rc %d want %d", lines[i].in, rc, lines[i].rc);
        struct coll full = {0};
        if (lines[i].rc == 0) /* the same line fails the full path */
            assert_int_equal(
                prom_parse(lines[i].in, strlen(lines[i].in), NULL, collect, &full, &err), -EINVAL);
        coll_free(&full);
    }
    prom_parser_free(p);
    coll_free(&c);
    coll_free(&all);
    xfree(buf);
}

/* ---- corpus golden values --------------------------------------------- */

static double quantile_of(const struct coll *c, const char *bucket_name, double q)
{
    double le[64], cnt[64];
    size_t n = 0;
    for (size_t i = 0; i < c->n && n < 64; i++)
        if (strcmp(c->v[i].name, bucket_name) == 0) {
            le[n] = c->v[i].le;
            cnt[n++] = c->v[i].value;
        }
    return prom_histogram_quantile(q, le, cnt, n);
}

static void test_corpus_vllm(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_corpus("vllm-v1.prom", &c, &err), 0);
    const char *m = "model_name=\"meta-llama/Llama-3.1-8B-Instruct\"";
    const struct rec *r = find(&c, "vllm:num_requests_running", m);
    assert_true(r->value == 7);
    assert_int_equal(r->type, PROM_GAUGE);
    assert_string_equal(r->labels, "engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"");
    assert_true(find(&c, "vllm:num_requests_waiting", m)->value == 3);
    assert_true(find(&c, "vllm:kv_cache_usage_perc", m)->value == 0.4296875);
    r = find(&c, "vllm:request_success_total", "finished_reason=\"stop\"");
    assert_true(r->value == 1543);
    assert_int_equal(r->type, PROM_COUNTER);
    assert_string_equal(r->family, "vllm:request_success_total");
    assert_true(find(&c, "vllm:request_success_total", "finished_reason=\"length\"")->value == 87);
    assert_true(find(&c, "vllm:prompt_tokens_total", m)->value == 2871234);
    r = find(&c, "vllm:request_success_created", "\"abort\"");
    assert_int_equal(r->type, PROM_GAUGE);
    assert_true(r->value == 1.7523512345678902e+09);
    assert_int_equal(count_name(&c, "vllm:e2e_request_latency_seconds_bucket"), 22);
    r = find(&c, "vllm:e2e_request_latency_seconds_bucket", "le=\"0.3\"");
    assert_int_equal(r->type, PROM_HISTOGRAM);
    assert_string_equal(r->family, "vllm:e2e_request_latency_seconds");
    assert_true(r->le == 0.3 && r->value == 0);
    r = find(&c, "vllm:e2e_request_latency_seconds_bucket", "le=\"+Inf\"");
    assert_true(r->le == INFINITY && r->value == 1634);
    assert_true(find(&c, "vllm:e2e_request_latency_seconds_count", m)->value == 1634);
    assert_true(find(&c, "vllm:e2e_request_latency_seconds_sum", m)->value == 4021.337890625);
    assert_int_equal(count_name(&c, "vllm:time_to_first_token_seconds_bucket"), 23);
    /* p50 of e2e: rank 817 lies in (2.0, 2.5] holding 700..910 */
    assert_true(fabs(quantile_of(&c, "vllm:e2e_request_latency_seconds_bucket", 0.5) -
                     (2.0 + 0.5 * 117.0 / 210.0)) < 1e-12);
    assert_true(find(&c, "python_gc_objects_collected_total", "generation=\"2\"")->value == 213);
    coll_free(&c);
}

static void test_corpus_triton(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_corpus("triton.prom", &c, &err), 0);
    const struct rec *r =
        find(&c, "nv_inference_request_success", "model=\"resnet50\",version=\"1\"");
    assert_true(r->value == 48211);
    assert_int_equal(r->type, PROM_COUNTER);
    assert_true(find(&c, "nv_inference_count", "model=\"resnet50\"")->value == 385688);
    assert_true(find(&c, "nv_inference_queue_duration_us", "bert_onnx")->value == 310442);
    assert_true(find(&c, "nv_inference_compute_infer_duration_us", "resnet50")->value == 771002113);
    r = find(&c, "nv_inference_pending_request_count", "resnet50");
    assert_true(r->value == 5);
    assert_int_equal(r->type, PROM_GAUGE);
    r = find(&c, "nv_inference_queue_summary_us",
             "model=\"resnet50\",version=\"1\",quantile=\"0.99\"");
    assert_int_equal(r->type, PROM_SUMMARY);
    assert_true(r->quantile == 0.99 && r->value == 101);
    r = find(&c, "nv_inference_queue_summary_us", "bert_onnx\",version=\"3\",quantile=\"0.5\"");
    assert_true(isnan(r->value)); /* prometheus-cpp's "Nan" */
    assert_true(find(&c, "nv_inference_queue_summary_us_count", "resnet50")->value == 161);
    r = find(&c, "nv_gpu_utilization", "gpu_uuid=\"GPU-3f2b9c1e");
    assert_true(r->value == 0.87);
    assert_true(find(&c, "nv_gpu_memory_used_bytes", "GPU-a1b2")->value == 3221225472.0);
    assert_true(find(&c, "nv_gpu_power_usage", "GPU-3f2b")->value == 312.541);
    coll_free(&c);
}

static void test_corpus_tgi(void **state)
{
    (void)state;
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_corpus("tgi.prom", &c, &err), 0);
    assert_true(find(&c, "tgi_request_count", NULL)->value == 2210);
    assert_true(find(&c, "tgi_request_success", NULL)->value == 2187);
    assert_true(find(&c, "tgi_queue_size", NULL)->value == 4);
    assert_true(find(&c, "tgi_batch_current_size", NULL)->value == 12);
    assert_true(find(&c, "tgi_batch_current_max_tokens", NULL)->value == 18432);
    assert_int_equal(count_name(&c, "tgi_request_duration_bucket"), 36);
    /* TGI's first duration bucket is 0.0001 * 1.5 printed with 20 digits */
    const struct rec *r = find(&c, "tgi_request_duration_bucket", NULL);
    assert_true(r->le == 0.0001 * 1.5);
    assert_string_equal(r->family, "tgi_request_duration");
    r = find(&c, "tgi_request_duration_sum", NULL);
    assert_int_equal(r->suffix, PROM_SUFFIX_SUM);
    assert_true(r->value == 9871.25131);
    double p99 = quantile_of(&c, "tgi_request_duration_bucket", 0.99);
    assert_true(p99 > 1.0 && p99 < 60.0);
    assert_int_equal(count_name(&c, "tgi_request_queue_duration_bucket"), 36);
    coll_free(&c);
}

/* ---- histogram_quantile vs PromQL (promql/promqltest/testdata/histograms.test) */

static void test_quantile(void **state)
{
    (void)state;
    /* testhistogram at 50m */
    const double ple[] = {0.1, .2, 1e0, INFINITY}, pc[] = {50, 70, 110, 120};
    const double nle[] = {-.2, -0.1, 0.3, INFINITY}, nc[] = {10, 20, 20, 30};
    static const struct {
        double q, pos, neg;
    } t1[] = {
        {0, 0, -0.2}, {1, 1, 0.3}, {0.2, 0.048, -0.2}, {0.5, 0.15, -0.15}, {0.8, 0.72, 0.3},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(t1); i++) {
        assert_true(fabs(prom_histogram_quantile(t1[i].q, ple, pc, 4) - t1[i].pos) < 1e-12);
        assert_true(fabs(prom_histogram_quantile(t1[i].q, nle, nc, 4) - t1[i].neg) < 1e-12);
    }
    assert_true(prom_histogram_quantile(-0.1, ple, pc, 4) == -INFINITY);
    assert_true(prom_histogram_quantile(1.01, ple, pc, 4) == INFINITY);
    assert_true(isnan(prom_histogram_quantile(NAN, ple, pc, 4)));
    /* testhistogram3 (lowest bucket le=0 / le=-.25) at 50m */
    const double l3p[] = {0, 0.1, .2, 1e0, INFINITY}, c3p[] = {0, 50, 70, 110, 110};
    const double l3n[] = {-.25, -.2, -0.1, 0.3, INFINITY}, c3n[] = {0, 10, 20, 20, 20};
    static const struct {
        double q, pos, neg;
    } t3[] = {
        {0, 0, -0.25}, {0.25, 0.055, -0.225}, {0.5, 0.125, -0.2}, {0.75, 0.45, -0.15}, {1, 1, -0.1},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(t3); i++) {
        assert_true(fabs(prom_histogram_quantile(t3[i].q, l3p, c3p, 5) - t3[i].pos) < 1e-12);
        assert_true(fabs(prom_histogram_quantile(t3[i].q, l3n, c3n, 5) - t3[i].neg) < 1e-12);
    }
    /* testhistogram2 at 7m: q(1/6), q(1/2), q(5/6) are 1, 3, 5 */
    const double l2[] = {0, 2, 4, 6, INFINITY}, c2[] = {0, 1, 2, 3, 3};
    assert_true(fabs(prom_histogram_quantile(1. / 6., l2, c2, 5) - 1) < 1e-12);
    assert_true(fabs(prom_histogram_quantile(0.5, l2, c2, 5) - 3) < 1e-12);
    assert_true(fabs(prom_histogram_quantile(5. / 6., l2, c2, 5) - 5) < 1e-12);
    /* nonmonotonic_bucket at 50m, given out of order */
    const double lnm[] = {1000, 0.1, INFINITY, 1, 100, 10}, cnm[] = {90, 20, 80, 10, 40, 50};
    assert_true(fabs(prom_histogram_quantile(0.01, lnm, cnm, 6) - 0.0045) < 1e-12);
    assert_true(fabs(prom_histogram_quantile(0.5, lnm, cnm, 6) - 8.5) < 1e-12);
    assert_true(fabs(prom_histogram_quantile(0.99, lnm, cnm, 6) - 979.75) < 1e-9);
    /* mixed_bucket: equal bounds in different spellings are merged */
    const double lmx[] = {0.1, 0.2, 2e-1, 2.0e-1, INFINITY}, cmx[] = {1, 1, 1, 1, 4};
    assert_true(fabs(prom_histogram_quantile(0.5, lmx, cmx, 5) - 0.15) < 1e-12);
    assert_true(fabs(prom_histogram_quantile(0.75, lmx, cmx, 5) - 0.2) < 1e-12);
    assert_true(fabs(prom_histogram_quantile(1, lmx, cmx, 5) - 0.2) < 1e-12);
    const double linf[] = {INFINITY, INFINITY}, cinf[] = {0, 0};
    assert_true(isnan(prom_histogram_quantile(0.5, linf, cinf, 2)));
    /* empty_bucket: no observations */
    const double le0[] = {0.1, 0.2, INFINITY}, c0[] = {0, 0, 0};
    assert_true(isnan(prom_histogram_quantile(0.2, le0, c0, 3)));
    /* no +Inf bucket, no buckets */
    const double lnoinf[] = {0.1, 0.2}, cnoinf[] = {1, 2};
    assert_true(isnan(prom_histogram_quantile(0.5, lnoinf, cnoinf, 2)));
    assert_true(isnan(prom_histogram_quantile(0.5, NULL, NULL, 0)));
    /* float noise below 1e-12 relative is not a decrease */
    const double lfn[] = {1, 2, INFINITY}, cfn[] = {100, 100 - 1e-11, 200};
    assert_true(fabs(prom_histogram_quantile(0.5, lfn, cfn, 3) - 1.0) < 1e-12);
    /* inputs untouched; large n uses the heap */
    double lbig[200], cbig[200];
    for (int i = 0; i < 200; i++) {
        lbig[i] = i == 199 ? INFINITY : (199 - i);
        cbig[i] = i == 199 ? 198 : (198 - i);
    }
    double q = prom_histogram_quantile(0.5, lbig, cbig, 200);
    assert_true(fabs(q - 100.0) < 1e-9);
    assert_true(lbig[0] == 199 && cbig[0] == 198);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_text),       cmocka_unit_test(test_escapes_utf8),
        cmocka_unit_test(test_text_features),    cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_timestamps),       cmocka_unit_test(test_histogram_families),
        cmocka_unit_test(test_openmetrics),      cmocka_unit_test(test_errors),
        cmocka_unit_test(test_split_every_byte),
        cmocka_unit_test(test_raw_newline_in_label_value), cmocka_unit_test(test_size_cap),
        cmocka_unit_test(test_raw_newline_parsed_once),
        cmocka_unit_test(test_line_cap),         cmocka_unit_test(test_line_cap_unwanted),
        cmocka_unit_test(test_line_cap_unwanted_raw_newline),
        cmocka_unit_test(test_line_cap_unwanted_open_quote),
        cmocka_unit_test(test_callback_stop),
        cmocka_unit_test(test_filter),           cmocka_unit_test(test_corpus_vllm),
        cmocka_unit_test(test_corpus_triton),    cmocka_unit_test(test_corpus_tgi),
        cmocka_unit_test(test_quantile),         cmocka_unit_test(test_om_escaping),
        cmocka_unit_test(test_label_escaping_table), cmocka_unit_test(test_expfmt_good_03),
        cmocka_unit_test(test_escape_other_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

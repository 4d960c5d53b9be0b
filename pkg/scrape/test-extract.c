/* SPDX-License-Identifier: Apache-2.0 */
/* Golden tests of one exposition -> one pod sample: real-shaped vLLM, Triton,
 * TGI, SGLang, NIM and TEI expositions (testdata/) read with each profile's defaults, the
 * generic profile's name matching, chunked input, and every kind of bad
 * input the scraper must turn into a failed pod. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "scrape-int.h"
#include "util/util.h"

static char *slurp(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", SCRAPE_TESTDATA, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    struct util_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        util_buf_append(&b, chunk, n);
    fclose(f);
    *len = b.len;
    return util_buf_steal(&b);
}

static const double UNSET = -12345;

struct golden {
    const char *file;
    enum prom_format format;
    enum scrape_profile profile;
    double requests, inflight, queued; /* UNSET: must be absent */
    size_t nbuckets;
    double first_count, inf_count; /* cumulative count at the lowest bound and at +Inf */
    double busy;                   /* the busy-time counter, summed over series */
    double rejected;               /* the refused requests' counter (UNSET: absent) */
};

static const struct golden goldens[] = {
    /* 6 series (2 engines x stop/length/abort), _created excluded; the
     * TTFT histogram (other bounds) must not leak into e2e latency. */
    {"vllm.prom", PROM_FMT_TEXT, SCRAPE_VLLM, 3613, 12, 3, 22, 150, 3613, 8051, UNSET},
    /* the same pod answering OpenMetrics (prometheus_client with an
     * OpenMetrics Accept): counter families without _total, _created samples
     * inside their families, # UNIT, an exemplar, # EOF */
    {"vllm.om", PROM_FMT_OPENMETRICS, SCRAPE_VLLM, 3613, 12, 3, 22, 150, 3613, 8051, UNSET},
    /* 4 models of an ensemble, summed; no in-flight gauge, no histogram; the
     * busy time a cumulative microsecond counter; of the failures (4 reasons
     * a model) the REJECTED ones only */
    {"triton.prom", PROM_FMT_TEXT, SCRAPE_TRITON, 3248, UNSET, 7, 0, 0, 0, 8503000000, 9},
    /* counters without _total, 35 geometric bounds + Inf; the inference
     * duration's histogram (same bounds) does not leak into the latency; the
     * requests finished (tgi_request_success), not the 5318 arrived;
     * of its failures the 429s (err="overloaded"), not the validation ones */
    {"tgi.prom", PROM_FMT_TEXT, SCRAPE_TGI, 5290, 12, 4, 36, 0, 5290, 10420.5, 9},
    /* prometheus_client in multiprocess mode (no _created); the gauges of two
     * data-parallel schedulers summed; aborted requests, TTFT, inter-token
     * and queue-time histograms do not leak in; no busy-time counter */
    {"sglang.prom", PROM_FMT_TEXT, SCRAPE_SGLANG, 4821, 16, 3, 23, 0, 4821, UNSET, UNSET},
    /* NVIDIA NIM for LLMs: unprefixed names, le before model_name; failed
     * requests, the per-reason finish counter, TTFT, inter-token and token
     * length histograms do not leak in; no busy-time counter */
    {"nim.prom", PROM_FMT_TEXT, SCRAPE_NIM, 2743, 11, 2, 11, 37, 2743, UNSET, UNSET},
    /* Text Embeddings Inference: the inputs embedded (48,190 in 4,668 HTTP
     * requests, most of them batches), metrics-rs shape (no HELP, a blank line
     * after each family, bounds written out in full); the per-input, queue and
     * inference duration histograms (same 35 bounds) do not leak into the
     * request latency; no in-flight gauge, no busy-time counter; its 429s
     * (te_request_failure, HTTP requests where the counter counts inputs)
     * are not read */
    {"tei.prom", PROM_FMT_TEXT, SCRAPE_TEI, 48190, UNSET, 37, 36, 0, 4668, UNSET, UNSET},
};

static void check_golden(const struct golden *g, const struct scrape_sample *s)
{
    assert_true(s->has_requests);
    assert_true(s->requests == g->requests);
    assert_int_equal(s->has_inflight, g->inflight != UNSET);
    if (g->inflight != UNSET)
        assert_true(s->inflight == g->inflight);
    assert_int_equal(s->has_queued, g->queued != UNSET);
    if (g->queued != UNSET)
        assert_true(s->queued == g->queued);
    assert_int_equal(s->has_busy, g->busy != UNSET);
    if (g->busy != UNSET)
        assert_true(s->busy == g->busy);
    assert_int_equal(s->has_rejected, g->rejected != UNSET);
    assert_int_equal(s->rejected_wanted, g->rejected != UNSET);
    if (g->rejected != UNSET)
        assert_true(s->rejected == g->rejected);
    assert_int_equal(s->nbuckets, g->nbuckets);
    if (g->nbuckets) {
        assert_true(s->count[0] == g->first_count);
        assert_true(isinf(s->le[s->nbuckets - 1]));
        assert_true(s->count[s->nbuckets - 1] == g->inf_count);
        for (size_t i = 1; i < s->nbuckets; i++)
            assert_true(s->le[i - 1] < s->le[i] && s->count[i - 1] <= s->count[i]);
    }
    assert_true(s->samples > 20);
}

static void test_profiles_golden(void **state)
{
    (void)state;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(goldens); i++) {
        const struct golden *g = &goldens[i];
        size_t len;
        char *buf = slurp(g->file, &len);
        struct scrape_spec spec;
        scrape_spec_init(&spec, g->profile);
        struct scrape_sample s;
        char err[200];
        assert_int_equal(scrape_extract_buf(&spec, g->format, buf, len, 0, &s, err, sizeof(err)),
                         0);
        assert_string_equal(err, "");
        check_golden(g, &s);

        /* the same, fed in uneven chunks (every line split somewhere) */
        struct scrape_extract *x = xmalloc(sizeof(*x));
        scrape_extract_init(x, &spec, 0);
        assert_int_equal(scrape_extract_set_format(x, g->format), 0);
        for (size_t off = 0, step = 1; off < len; off += step, step = step % 97 + 1)
            assert_int_equal(scrape_extract_feed(x, buf + off, UTIL_MIN(step, len - off)), 0);
        assert_int_equal(scrape_extract_set_format(x, PROM_FMT_TEXT), -EBUSY); /* too late */
        assert_int_equal(scrape_extract_finish(x), 0);
        check_golden(g, &x->s);
        scrape_extract_free(x);
        xfree(x);
        xfree(buf);
    }
}

/* The format decides: a 0.0.4 body read as OpenMetrics fails (no # EOF, and
 * plain comments are not allowed), an OpenMetrics body cut short fails where
 * the 0.0.4 reading would have accepted it. */
static void test_format_matters(void **state)
{
    (void)state;
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_sample s;
    char err[200];
    size_t len;
    char *buf = slurp("vllm.prom", &len);
    assert_int_equal(scrape_extract_buf(&spec, PROM_FMT_OPENMETRICS, buf, len, 0, &s, err,
                                        sizeof(err)),
                     -EBADMSG);
    assert_non_null(strstr(err, "not an OpenMetrics exposition"));
    assert_non_null(strstr(err, "# EOF"));
    xfree(buf);
    buf = slurp("vllm.om", &len);
    const char *eof = strstr(buf, "# EOF\n");
    assert_non_null(eof);
    size_t cut = (size_t)(eof - buf); /* everything but the last line */
    assert_int_equal(scrape_extract_buf(&spec, PROM_FMT_TEXT, buf, cut, 0, &s, err, sizeof(err)),
                     0);
    assert_true(s.requests == 3613);
    assert_int_equal(
        scrape_extract_buf(&spec, PROM_FMT_OPENMETRICS, buf, cut, 0, &s, err, sizeof(err)),
        -EBADMSG);
    assert_non_null(strstr(err, "missing # EOF"));
    xfree(buf);
}

static int extract(const char *text, const struct scrape_spec *spec, size_t cap,
                   struct scrape_sample *s, char *err)
{
    return scrape_extract_buf(spec, PROM_FMT_TEXT, text, strlen(text), cap, s, err, 200);
}

/* The generic profile: a metric named by family or by sample name, in
 * OpenMetrics and in 0.0.4 text (where a counter's family carries _total);
 * _created never counts; an untyped histogram's le comes from the label. */
static void test_generic_names(void **state)
{
    (void)state;
    static const char om[] = "# TYPE http_requests counter\n"
                             "http_requests_total{code=\"200\"} 30\n"
                             "http_requests_created{code=\"200\"} 1.7e9\n"
                             "http_requests_total{code=\"500\"} 4\n"
                             "# TYPE busy gauge\nbusy{worker=\"a\"} 2\nbusy{worker=\"b\"} 1.5\n"
                             "lat_ms_bucket{le=\"10\"} 1\nlat_ms_bucket{le=\"100\"} 3\n"
                             "lat_ms_bucket{le=\"+Inf\"} 4\nlat_ms_count 4\n# EOF\n";
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    snprintf(spec.inflight_metric, sizeof(spec.inflight_metric), "busy");
    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "lat_ms");
    const char *names[] = {"http_requests", "http_requests_total"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++) {
        snprintf(spec.request_metric, sizeof(spec.request_metric), "%s", names[i]);
        struct scrape_sample s;
        char err[200];
        assert_int_equal(extract(om, &spec, 0, &s, err), 0);
        assert_true(s.has_requests);
        assert_true(s.requests == 34);
        assert_true(s.inflight == 3.5);
        assert_false(s.has_queued);
        assert_int_equal(s.nbuckets, 3);
        assert_true(s.le[0] == 10 && s.le[1] == 100 && isinf(s.le[2]));
        assert_true(s.count[2] == 4);
    }
    /* prometheus_client's 0.0.4 text: the counter family is named with its
     * suffix, and _created is a gauge family of its own; by its family name
     * (http_requests) the counter is found all the same */
    static const char text[] = "# HELP http_requests_total Requests.\n"
                               "# TYPE http_requests_total counter\n"
                               "http_requests_total{code=\"200\"} 30.0\n"
                               "http_requests_total{code=\"500\"} 4.0\n"
                               "# HELP http_requests_created Requests.\n"
                               "# TYPE http_requests_created gauge\n"
                               "http_requests_created{code=\"200\"} 1.7e9\n"
                               "# TYPE http_requests_in_flight gauge\n"
                               "http_requests_in_flight 2\n";
    for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++) {
        snprintf(spec.request_metric, sizeof(spec.request_metric), "%s", names[i]);
        struct scrape_sample s;
        char err[200];
        assert_int_equal(extract(text, &spec, 0, &s, err), 0);
        assert_true(s.has_requests);
        assert_true(s.requests == 34);
    }
    /* the busy-time counter by its family name too: 0.0.4 text names its
     * samples (and family) busy_seconds_total, OpenMetrics the family
     * busy_seconds and its samples busy_seconds_total; either name finds it
     * in both formats (the filter's fast path skipped the 0.0.4 samples) */
    static const char *const busy_text[] = {
        "# TYPE busy_seconds_total counter\nbusy_seconds_total{w=\"a\"} 12.5\nreq 1\n",
        "# TYPE busy_seconds counter\nbusy_seconds_total{w=\"a\"} 12.5\nreq 1\n# EOF\n"};
    const char *busy_names[] = {"busy_seconds", "busy_seconds_total"};
    snprintf(spec.request_metric, sizeof(spec.request_metric), "req");
    for (size_t f = 0; f < 2; f++) {
        for (size_t i = 0; i < UTIL_ARRAY_LEN(busy_names); i++) {
            snprintf(spec.busy_metric, sizeof(spec.busy_metric), "%s", busy_names[i]);
            struct scrape_sample s;
            char err[200] = "";
            assert_int_equal(scrape_extract_buf(&spec, f ? PROM_FMT_OPENMETRICS : PROM_FMT_TEXT,
                                                busy_text[f], strlen(busy_text[f]), 0, &s, err,
                                                sizeof(err)),
                             0);
            assert_true(s.has_busy);
            assert_true(s.busy == 12.5);
        }
    }
    spec.busy_metric[0] = '\0';
    /* a gauge is never taken for a counter by its name plus _total */
    snprintf(spec.request_metric, sizeof(spec.request_metric), "http_requests_in");
    struct scrape_sample g;
    char gerr[200];
    assert_int_equal(extract("# TYPE http_requests_in_total gauge\nhttp_requests_in_total 5\n",
                             &spec, 0, &g, gerr), 0);
    assert_false(g.has_requests);
    assert_true(scrape_latency_unit_ms("lat_ms") == 1);
    assert_true(scrape_latency_unit_ms("vllm:e2e_request_latency_seconds") == 1000);
    assert_true(scrape_latency_unit_ms("tgi_request_duration") == 1000);
    assert_true(scrape_latency_unit_ms("x_microseconds") == 1e-3);
    /* a busy-time counter named by its series: the unit is before the suffix */
    assert_true(scrape_latency_unit_ms("x_milliseconds_sum") == 1);
    assert_true(scrape_latency_unit_ms("nv_compute_infer_duration_us_total") == 1e-3);
    assert_true(scrape_latency_unit_ms("busy_seconds_total") == 1000);
    assert_true(scrape_latency_unit_ms("busy_total") == 1000);
    assert_true(scrape_latency_unit_ms("_total") == 1000);
    /* a repeated bucket line counts once, as a repeated counter line does */
    static const char rep[] = "req 5\nlat_ms_bucket{le=\"10\"} 1\nlat_ms_bucket{le=\"10\"} 1\n"
                              "lat_ms_bucket{le=\"+Inf\"} 5\n";
    snprintf(spec.request_metric, sizeof(spec.request_metric), "req");
    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "lat_ms");
    assert_int_equal(extract(rep, &spec, 0, &g, gerr), 0);
    assert_int_equal(g.nbuckets, 2);
    assert_true(g.count[0] == 1);
    assert_true(g.count[1] == 5);
}

/* A valid exposition without the request metric is not an error here (the
 * counter may not exist yet); the pod history and aggregation decide. */
static void test_metric_absent(void **state)
{
    (void)state;
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_TGI);
    struct scrape_sample s;
    char err[200];
    assert_int_equal(extract("# TYPE tgi_queue_size gauge\ntgi_queue_size 0\n", &spec, 0, &s, err),
                     0);
    assert_false(s.has_requests);
    assert_true(s.has_queued);
    assert_int_equal(extract("process_cpu_seconds_total 1\n", &spec, 0, &s, err), 0);
    assert_false(s.has_requests);
    assert_false(s.has_queued);
}

struct bad {
    const char *body;
    size_t cap;
    int err;
    const char *msg; /* substring of the message */
};

static void test_bad_input(void **state)
{
    (void)state;
    static const struct bad bad[] = {
        {"", 0, -EBADMSG, "empty exposition"},
        {"# just a comment\n\n", 0, -EBADMSG, "empty exposition"},
        {"<html><body>Welcome</body></html>\n", 0, -EBADMSG, "line 1 column"},
        {"{\"status\":\"ok\"}", 0, -EBADMSG, "not a Prometheus exposition"},
        /* truncated mid-sample: the last line has no value */
        {"vllm:num_requests_running 1\nvllm:request_success_total{finished_reason=\"st", 0,
         -EBADMSG, "line 2"},
        {"vllm:request_success_total{a=\"1\"} NaN\n", 0, -EBADMSG, "has value nan"},
        {"vllm:request_success_total{a=\"1\"} -3\n", 0, -EBADMSG, "has value -3"},
        /* no count: past 2^53 (a uint64 wrapped), alone or as a sum */
        {"vllm:request_success_total 1.8446744073709552e19\n", 0, -EBADMSG,
         "has value 1.84467e+19"},
        {"vllm:request_success_total 9007199254740992\n", 0, -EBADMSG, "has value 9.0072e+15"},
        {"vllm:request_success_total{a=\"1\"} 6e15\nvllm:request_success_total{a=\"2\"} 6e15\n", 0,
         -EBADMSG, "line 2: counter vllm:request_success_total: its series sum to 2^53"},
        {"vllm:request_success_total{a=\"1\"} 1e308\nvllm:request_success_total{a=\"2\"} 1e308\n",
         0, -EBADMSG, "line 1: counter vllm:request_success_total has value 1e+308"},
        {"vllm:num_requests_running 1\nvllm:num_requests_running 2\n", 40, -EMSGSIZE,
         "larger than 40 bytes"},
    };
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        struct scrape_sample s;
        char err[200];
        int rc = extract(bad[i].body, &spec, bad[i].cap, &s, err);
        if (rc != bad[i].err || !strstr(err, bad[i].msg))
            fail_msg("case %zu: rc %d err '%s', want %d '%s'", i, rc, err, bad[i].err,
                     bad[i].msg);
    }
}

/* Gauges as Prometheus keeps them: a repeated line is one sample of its
 * series (not summed twice), and a NaN or infinite value (or one past
 * 2^53) is stored, not a broken exposition: that series is left out of the
 * sum, and a gauge with
 * no other series is unknown, while the pod's counters still count. */
static void test_gauge_series(void **state)
{
    (void)state;
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_sample s;
    char err[200];
    assert_int_equal(extract("vllm:request_success_total{a=\"1\"} 10\n"
                             "vllm:num_requests_running{engine=\"0\"} 4\n"
                             "vllm:num_requests_running{engine=\"0\"} 4\n"
                             "vllm:num_requests_running{engine=\"1\"} NaN\n"
                             "vllm:num_requests_running{engine=\"2\"} 3\n"
                             "vllm:num_requests_waiting +Inf\n",
                             &spec, 0, &s, err),
                     0);
    assert_true(s.has_requests && s.requests == 10);
    assert_true(s.has_inflight && s.inflight == 7);
    assert_false(s.has_queued);
    /* finite series past 2^53 (whose sum was infinite) are left out as well */
    assert_int_equal(extract("vllm:request_success_total 9007199254740991\n"
                             "vllm:num_requests_running{engine=\"0\"} 1e308\n"
                             "vllm:num_requests_running{engine=\"1\"} 1e308\n"
                             "vllm:num_requests_waiting{engine=\"0\"} 2\n"
                             "vllm:num_requests_waiting{engine=\"1\"} -9.1e15\n",
                             &spec, 0, &s, err),
                     0);
    assert_true(s.requests == 9007199254740991.0); /* 2^53 - 1 is still a count */
    assert_false(s.has_inflight);
    assert_true(s.has_queued && s.queued == 2);
}

/* Too many distinct bounds drop the histogram, not the pod; a bucket without
 * a numeric le (missing, "", " 1", "fast") is left out, the other buckets
 * kept, as histogram_quantile skips it (it dropped the pod's histogram); a
 * bucket's count that is no count still drops it. */
static void test_histogram_caps(void **state)
{
    (void)state;
    struct util_buf b = {0};
    util_buf_puts(&b, "# TYPE vllm:e2e_request_latency_seconds histogram\n");
    for (int i = 0; i < SCRAPE_MAX_BUCKETS + 6; i++)
        util_buf_printf(&b, "vllm:e2e_request_latency_seconds_bucket{le=\"%d\"} %d\n", i, i);
    util_buf_puts(&b, "vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 99\n"
                      "vllm:request_success_total 5\n");
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_sample s;
    char err[200];
    assert_int_equal(extract(b.data, &spec, 0, &s, err), 0);
    assert_true(s.hist_dropped);
    assert_int_equal(s.nbuckets, 0);
    assert_true(s.requests == 5);
    util_buf_free(&b);

    static const char badle[] = "lat_bucket{le=\"fast\"} 1\nlat_bucket{le=\"+Inf\"} 2\nreq 1\n";
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    snprintf(spec.request_metric, sizeof(spec.request_metric), "req");
    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "lat");
    assert_int_equal(extract(badle, &spec, 0, &s, err), 0);
    assert_false(s.hist_dropped);
    assert_int_equal(s.nbuckets, 1);
    assert_true(isinf(s.le[0]) && s.count[0] == 2);
    assert_true(s.requests == 1);

    /* the same in a typed histogram, with a bucket without le, one with an
     * empty le and one with a blank in it: the pod keeps its rate (the
     * parser used to fail the whole exposition there) and its histogram */
    static const char typed[] = "# TYPE lat histogram\nlat_bucket{le=\"0.5\"} 1\n"
                                "lat_bucket{x=\"y\"} 1\nlat_bucket{le=\"\"} 1\n"
                                "lat_bucket{le=\" 1\"} 1\nlat_bucket{le=\"1e+00\"} 2\n"
                                "lat_bucket{le=\"+Inf\"} 2\nreq 3\n";
    assert_int_equal(extract(typed, &spec, 0, &s, err), 0);
    assert_false(s.hist_dropped);
    assert_int_equal(s.nbuckets, 3);
    assert_true(s.le[0] == 0.5 && s.le[1] == 1 && isinf(s.le[2]));
    assert_true(s.count[0] == 1 && s.count[1] == 2 && s.count[2] == 2);
    assert_true(s.requests == 3);

    /* a count that is no count drops the histogram, its le good or not */
    static const char *const nocount[] = {
        "lat_bucket{le=\"0.5\"} 1\nlat_bucket{le=\"+Inf\"} -1\nreq 3\n",
        "lat_bucket{le=\"0.5\"} 1\nlat_bucket{le=\"fast\"} NaN\nreq 3\n",
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(nocount); i++) {
        assert_int_equal(extract(nocount[i], &spec, 0, &s, err), 0);
        assert_true(s.hist_dropped);
        assert_int_equal(s.nbuckets, 0);
        assert_true(s.requests == 3);
    }
}

/* The histogram's series (label sets but le) apart: two models, their
 * labels in either order, one lacking a bound (0 there, and its mark in
 * hser_has clear); the sums as
 * before. Past SCRAPE_MAX_HSERIES only the sums. */
static void test_histogram_series(void **state)
{
    (void)state;
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    snprintf(spec.request_metric, sizeof(spec.request_metric), "req");
    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "lat");
    static const char two[] =
        "req 9\n"
        "lat_bucket{model=\"a\",le=\"1\"} 2\nlat_bucket{model=\"a\",le=\"+Inf\"} 3\n"
        "lat_bucket{le=\"0.5\",model=\"b\"} 4\nlat_bucket{model=\"b\",le=\"1\"} 5\n"
        "lat_bucket{le=\"+Inf\",model=\"b\"} 6\n"
        "lat_bucket{le=\"0.5\",model=\"a\"} 1\n";
    struct scrape_sample s;
    char err[200];
    assert_int_equal(extract(two, &spec, 0, &s, err), 0);
    assert_int_equal(s.nbuckets, 3);
    assert_int_equal(s.hser_n, 2);
    assert_false(s.hser_overflow);
    assert_true(s.hser_id[0] != s.hser_id[1]);
    const double a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
    for (int i = 0; i < 3; i++) {
        assert_true(s.hser_count[0][i] == a[i]);
        assert_true(s.hser_count[1][i] == b[i]);
        assert_true(s.count[i] == a[i] + b[i]);
    }
    /* a's 0.5 came last, inserted before the bounds it had: all three set */
    assert_true(s.hser_has[0] == 7 && s.hser_has[1] == 7);
    /* b lacks le 0.5 now: 0 there, and the same id as before */
    uint64_t id_b = s.hser_id[1];
    static const char gap[] = "req 9\nlat_bucket{model=\"a\",le=\"0.5\"} 1\n"
                              "lat_bucket{model=\"b\",le=\"1\"} 5\n";
    assert_int_equal(extract(gap, &spec, 0, &s, err), 0);
    assert_int_equal(s.hser_n, 2);
    assert_true(s.hser_id[1] == id_b);
    assert_true(s.hser_count[1][0] == 0 && s.hser_count[1][1] == 5);
    assert_true(s.hser_count[0][0] == 1 && s.hser_count[0][1] == 0);
    assert_true(s.hser_has[0] == 1 && s.hser_has[1] == 2); /* which lines each has */
    /* a bound inserted below others moves a series' marks up with its counts */
    static const char shift[] = "req 9\n"
                                "lat_bucket{model=\"a\",le=\"1\"} 2\n"
                                "lat_bucket{model=\"a\",le=\"+Inf\"} 3\n"
                                "lat_bucket{model=\"b\",le=\"0.1\"} 1\n"
                                "lat_bucket{model=\"b\",le=\"+Inf\"} 4\n";
    assert_int_equal(extract(shift, &spec, 0, &s, err), 0);
    assert_int_equal(s.nbuckets, 3);
    assert_true(s.hser_has[0] == 6 && s.hser_has[1] == 5);
    assert_true(s.hser_count[0][1] == 2 && s.hser_count[0][2] == 3 && s.hser_count[0][0] == 0);
    /* more series than followed: the sums only */
    struct util_buf m = {0};
    util_buf_puts(&m, "req 1\n");
    for (int k = 0; k < SCRAPE_MAX_HSERIES + 1; k++)
        util_buf_printf(&m, "lat_bucket{model=\"m%d\",le=\"+Inf\"} 1\n", k);
    assert_int_equal(extract(m.data, &spec, 0, &s, err), 0);
    assert_true(s.hser_overflow);
    assert_int_equal(s.nbuckets, 1);
    assert_true(s.count[0] == SCRAPE_MAX_HSERIES + 1);
    assert_true(s.hsum_n[0] == SCRAPE_MAX_HSERIES + 1);
    util_buf_free(&m);
    /* the sums only, one series lacking its le 1 line: that bound has one line
     * fewer (its sum the others', 2 fewer), the rest all */
    m = (struct util_buf){0};
    util_buf_puts(&m, "req 1\n");
    for (int k = 0; k < SCRAPE_MAX_HSERIES + 2; k++) {
        util_buf_printf(&m, "lat_bucket{model=\"m%d\",le=\"0.5\"} 1\n", k);
        if (k != 3)
            util_buf_printf(&m, "lat_bucket{model=\"m%d\",le=\"1\"} 2\n", k);
        util_buf_printf(&m, "lat_bucket{model=\"m%d\",le=\"+Inf\"} 3\n", k);
    }
    assert_int_equal(extract(m.data, &spec, 0, &s, err), 0);
    assert_true(s.hser_overflow);
    assert_int_equal(s.nbuckets, 3);
    assert_true(s.count[1] == 2 * (SCRAPE_MAX_HSERIES + 1));
    assert_true(s.hsum_n[0] == SCRAPE_MAX_HSERIES + 2 && s.hsum_n[1] == SCRAPE_MAX_HSERIES + 1 &&
                s.hsum_n[2] == SCRAPE_MAX_HSERIES + 2);
    util_buf_free(&m);
    /* a bound inserted later moves the counts with it: le 0.1 only in m0 */
    m = (struct util_buf){0};
    util_buf_puts(&m, "req 1\n");
    for (int k = 0; k < SCRAPE_MAX_HSERIES + 2; k++) {
        util_buf_printf(&m, "lat_bucket{model=\"m%d\",le=\"1\"} 2\n", k);
        util_buf_printf(&m, "lat_bucket{model=\"m%d\",le=\"+Inf\"} 3\n", k);
    }
    util_buf_puts(&m, "lat_bucket{model=\"m0\",le=\"0.1\"} 1\n");
    assert_int_equal(extract(m.data, &spec, 0, &s, err), 0);
    assert_int_equal(s.nbuckets, 3);
    assert_true(s.hsum_n[0] == 1 && s.hsum_n[1] == SCRAPE_MAX_HSERIES + 2 &&
                s.hsum_n[2] == SCRAPE_MAX_HSERIES + 2);
    util_buf_free(&m);
}

/* A series is its name and all its labels, in any order, however many: two
 * that differ only past their 32nd label are two series (they were read as
 * one line repeated and the second left out), and one line repeated with its
 * labels in another order still counts once. */
static void test_series_many_labels(void **state)
{
    (void)state;
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    snprintf(spec.request_metric, sizeof(spec.request_metric), "req");
    struct util_buf m = {0};
    for (int line = 0; line < 3; line++) {
        util_buf_puts(&m, "req{");
        for (int i = 0; i < 40; i++) {
            int l = line == 2 ? 39 - i : i; /* the first line again, reversed */
            util_buf_printf(&m, "%sl%d=\"%s\"", i ? "," : "", l,
                            l == 39 && line == 1 ? "b" : "a");
        }
        util_buf_printf(&m, "} %d\n", line == 1 ? 7 : 5);
    }
    struct scrape_sample s;
    char err[200];
    assert_int_equal(extract(m.data, &spec, 0, &s, err), 0);
    assert_int_equal(s.series[SCRAPE_C_REQ].n, 2);
    assert_true(s.requests == 12);
    /* but not more than the parser's cap: the pod's scrape fails, saying why */
    util_buf_reset(&m);
    util_buf_puts(&m, "req{");
    for (unsigned i = 0; i <= PROM_DEFAULT_MAX_LABELS; i++)
        util_buf_printf(&m, "l%u=\"a\",", i);
    util_buf_puts(&m, "} 1\n");
    assert_int_equal(extract(m.data, &spec, 0, &s, err), -EBADMSG);
    assert_non_null(strstr(err, "line 1 column 2199: more than 256 labels on a sample"));
    util_buf_free(&m);
}

/* A label with an empty value is no label, as Prometheus' scrape drops it:
 * `x{a=""}` and `x` are one series, the first line counting (they were two,
 * and the pod's sum counted the series twice), for the counters, the
 * gauges and the histogram's series; a non-empty value is still another
 * series. */
static void test_series_empty_label(void **state)
{
    (void)state;
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_sample s;
    char err[200];
    assert_int_equal(extract("vllm:request_success_total{a=\"\"} 1\n"
                             "vllm:request_success_total 2\n"
                             "vllm:request_success_total{a=\"x\",b=\"\"} 4\n"
                             "vllm:num_requests_running 3\n"
                             "vllm:num_requests_running{engine=\"\"} 5\n"
                             "vllm:num_requests_waiting{engine=\"\",model=\"m\"} 6\n"
                             "vllm:num_requests_waiting{model=\"m\"} 7\n",
                             &spec, 0, &s, err),
                     0);
    assert_int_equal(s.series[SCRAPE_C_REQ].n, 2);
    assert_true(s.requests == 5);
    assert_true(s.has_inflight && s.inflight == 3);
    assert_true(s.has_queued && s.queued == 6);
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    snprintf(spec.request_metric, sizeof(spec.request_metric), "req");
    snprintf(spec.latency_metric, sizeof(spec.latency_metric), "lat");
    assert_int_equal(extract("req 1\n"
                             "lat_bucket{le=\"1\",model=\"\"} 1\n"
                             "lat_bucket{le=\"1\"} 5\n"
                             "lat_bucket{le=\"1\",model=\"x\"} 2\n"
                             "lat_bucket{model=\"\",le=\"+Inf\"} 3\n"
                             "lat_bucket{le=\"+Inf\",model=\"x\"} 2\n",
                             &spec, 0, &s, err),
                     0);
    assert_int_equal(s.nbuckets, 2);
    assert_int_equal(s.hser_n, 2);
    assert_true(s.count[0] == 3 && s.count[1] == 5);
    assert_int_equal(s.hsum_n[0], 2);
}

/* A metric with a Prometheus 3 UTF-8 name, quoted in the exposition (both
 * formats, the 0.0.4 counter family with its _total) and in the field,
 * with a matcher on a quoted label name: selected, and its scrape not failed. */
static void test_quoted_names(void **state)
{
    (void)state;
    static const char *const body[] = {
        "# HELP \"http.server.requests_total\" Requests.\n"
        "# TYPE \"http.server.requests_total\" counter\n"
        "{\"http.server.requests_total\", \"http.method\"=\"GET\"} 3\n"
        "{\"http.method\"=\"POST\", \"http.server.requests_total\"} 4\n"
        "{\"http.server.active\"} 2\n",
        "# HELP \"http.server.requests\" Requests.\n"
        "# TYPE \"http.server.requests\" counter\n"
        "{\"http.server.requests_total\", \"http.method\"=\"GET\"} 3\n"
        "{\"http.method\"=\"POST\", \"http.server.requests_total\"} 4\n"
        "{\"http.server.requests_created\", \"http.method\"=\"GET\"} 1.7e9\n"
        "{\"http.server.active\"} 2\n# EOF\n",
    };
    static const char *const fields[] = {
        "{\"http.server.requests\"}", "{\"http.server.requests_total\"}",
        "{\"http.server.requests\", \"http.method\"=\"GET\"}"};
    for (int f = 0; f < 2; f++) {
        for (size_t i = 0; i < UTIL_ARRAY_LEN(fields); i++) {
            struct scrape_spec spec;
            scrape_spec_init(&spec, SCRAPE_GENERIC);
            char why[300];
            struct scrape_selector sel;
            assert_int_equal(scrape_selector_parse(fields[i], &sel, why, sizeof(why)), 0);
            snprintf(spec.request_metric, sizeof(spec.request_metric), "%s", fields[i]);
            snprintf(spec.inflight_metric, sizeof(spec.inflight_metric), "{'http.server.active'}");
            struct scrape_sample s;
            char err[200] = "";
            int rc = scrape_extract_buf(&spec, f ? PROM_FMT_OPENMETRICS : PROM_FMT_TEXT, body[f],
                                        strlen(body[f]), 0, &s, err, sizeof(err));
            if (rc != 0)
                fail_msg("format %d field %zu: rc %d: %s", f, i, rc, err);
            assert_true(s.has_requests);
            assert_true(s.requests == (i == 2 ? 3 : 7));
            assert_true(s.has_inflight && s.inflight == 2);
        }
    }
}

/* One extractor used for stream after stream, as the scraper's pool does:
 * the parser is kept (and reset) while the names and the format stay, made
 * anew when either changes, and every stream reads the same as a fresh one,
 * after a failed stream too. */
static void test_reuse(void **state)
{
    (void)state;
    struct scrape_extract *x = xmalloc(sizeof(*x));
    struct scrape_spec vllm, tgi;
    scrape_spec_init(&vllm, SCRAPE_VLLM);
    scrape_spec_init(&tgi, SCRAPE_TGI);
    scrape_extract_init(x, &vllm, 0);
    const struct {
        const struct golden *g;
        const struct scrape_spec *spec;
        bool same_parser; /* as the previous stream's */
    } seq[] = {
        {&goldens[0], &vllm, false}, {&goldens[0], &vllm, true},  {&goldens[1], &vllm, false},
        {&goldens[1], &vllm, true},  {&goldens[3], &tgi, false},  {&goldens[3], &tgi, true},
        {NULL, &tgi, true},          {&goldens[3], &tgi, true},   {&goldens[0], &vllm, false},
    };
    struct prom_parser *prev = NULL;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(seq); i++) {
        if (i > 0)
            scrape_extract_reuse(x, seq[i].spec, 0);
        const struct golden *g = seq[i].g;
        size_t len;
        char *buf = g ? slurp(g->file, &len) : xstrdup("<html>not metrics</html>\n");
        if (!g)
            len = strlen(buf);
        assert_int_equal(scrape_extract_set_format(x, g ? g->format : PROM_FMT_TEXT), 0);
        int rc = scrape_extract_feed(x, buf, len);
        if (rc == 0)
            rc = scrape_extract_finish(x);
        if (seq[i].same_parser) /* (a new one may land at the same address: not checked) */
            assert_ptr_equal(x->parser, prev);
        if (g) {
            assert_int_equal(rc, 0);
            check_golden(g, &x->s);
        } else {
            assert_int_equal(rc, -EBADMSG);
        }
        prev = x->parser;
        xfree(buf);
    }
    scrape_extract_free(x);
    xfree(x);
}

/* demand-unit tokens: each profile's token counters read from the golden
 * expositions (vLLM's, SGLang's and NIM's counters, TGI's histogram sums); none read unless
 * asked; Triton, TEI and generic have none to default to. */
static void test_token_counters(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        enum prom_format format;
        enum scrape_profile profile;
        double prompt, gen;
    } cases[] = {
        {"vllm.prom", PROM_FMT_TEXT, SCRAPE_VLLM, 1843201 + 1790120, 412305 + 398771},
        {"vllm.om", PROM_FMT_OPENMETRICS, SCRAPE_VLLM, 1843201 + 1790120, 412305 + 398771},
        {"tgi.prom", PROM_FMT_TEXT, SCRAPE_TGI, 1634107, 688214},
        {"sglang.prom", PROM_FMT_TEXT, SCRAPE_SGLANG, 3865920, 1204117},
        {"nim.prom", PROM_FMT_TEXT, SCRAPE_NIM, 2186931, 702288},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        size_t len;
        char *buf = slurp(cases[i].file, &len);
        struct scrape_spec spec;
        scrape_spec_init(&spec, cases[i].profile);
        struct scrape_sample s;
        char err[200];
        assert_int_equal(scrape_extract_buf(&spec, cases[i].format, buf, len, 0, &s, err,
                                            sizeof(err)), 0);
        assert_false(s.has_prompt || s.has_gen); /* requests: not read */
        assert_int_equal(scrape_spec_want_tokens(&spec), 0);
        assert_int_equal(scrape_extract_buf(&spec, cases[i].format, buf, len, 0, &s, err,
                                            sizeof(err)), 0);
        assert_true(s.has_prompt && s.has_gen);
        assert_true(s.prompt_tokens == cases[i].prompt);
        assert_true(s.gen_tokens == cases[i].gen);
        assert_true(s.has_requests); /* still read: the request size needs them */
        xfree(buf);
    }
    struct scrape_spec t;
    scrape_spec_init(&t, SCRAPE_TRITON);
    assert_int_equal(scrape_spec_want_tokens(&t), -ENOTSUP);
    assert_string_equal(t.generation_token_metric, "");
    scrape_spec_init(&t, SCRAPE_TEI);
    assert_int_equal(scrape_spec_want_tokens(&t), -ENOTSUP);
    assert_string_equal(t.generation_token_metric, "");
    scrape_spec_init(&t, SCRAPE_GENERIC);
    assert_int_equal(scrape_spec_want_tokens(&t), -ENOTSUP);
    snprintf(t.generation_token_metric, sizeof(t.generation_token_metric), "my_gen_tokens");
    assert_int_equal(scrape_spec_want_tokens(&t), 0);
    assert_string_equal(t.prompt_token_metric, ""); /* optional: counts as 0 */

    /* a token counter with a bad value fails the pod like a request counter */
    const char bad[] = "vllm:request_success_total 3\nvllm:generation_tokens_total -5\n";
    struct scrape_spec v;
    scrape_spec_init(&v, SCRAPE_VLLM);
    scrape_spec_want_tokens(&v);
    struct scrape_sample s;
    char err[200];
    assert_int_equal(scrape_extract_buf(&v, PROM_FMT_TEXT, bad, sizeof(bad) - 1, 0, &s, err,
                                        sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "vllm:generation_tokens_total has value -5"));
}

/* Metric fields with label matchers: what parses (and to what), what is
 * refused and why. */
static void test_selector_parse(void **state)
{
    (void)state;
    struct scrape_selector s;
    char err[300];
    assert_int_equal(scrape_selector_parse("vllm:request_success_total", &s, err, sizeof(err)),
                     0);
    assert_string_equal(s.name, "vllm:request_success_total");
    assert_int_equal(s.n, 0);
    assert_int_equal(scrape_selector_parse("x{}", &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(scrape_selector_parse("x{ a = 'b' , c_2!=\"d\\\"e\\\\f\\n\" , }", &s, err,
                                           sizeof(err)),
                     0);
    assert_string_equal(s.name, "x");
    assert_int_equal(s.n, 2);
    assert_string_equal(s.m[0].label, "a");
    assert_string_equal(s.m[0].value, "b");
    assert_false(s.m[0].negate);
    assert_string_equal(s.m[1].label, "c_2");
    assert_string_equal(s.m[1].value, "d\"e\\f\n");
    assert_true(s.m[1].negate);
    assert_int_equal(scrape_selector_parse("x{a=\"\",b=\"\",c=\"\",d=\"\"}", &s, err, sizeof(err)),
                     0);
    assert_int_equal(s.n, SCRAPE_MAX_MATCHERS);
    assert_int_equal(scrape_metric_name_len("x_ms{a=\"b\"}"), 4);
    assert_int_equal(scrape_metric_name_len("x_ms"), 4);
    /* Prometheus 3's quoted names: the metric's alone inside the braces,
     * anywhere among them, and quoted label names */
    assert_int_equal(scrape_selector_parse("{\"http.server.requests\", \"my.label\"!=\"x\"}", &s,
                                           err, sizeof(err)),
                     0);
    assert_string_equal(s.name, "http.server.requests");
    assert_int_equal(s.n, 1);
    assert_string_equal(s.m[0].label, "my.label");
    assert_true(s.m[0].negate);
    assert_int_equal(scrape_selector_parse("{a='b', 'x.y' ,}", &s, err, sizeof(err)), 0);
    assert_string_equal(s.name, "x.y");
    assert_int_equal(s.n, 1);
    char name[64];
    scrape_metric_name("{\"x.y_ms\", a=\"b\"}", name, sizeof(name));
    assert_string_equal(name, "x.y_ms");
    scrape_metric_name("x_ms{a=\"b\"}", name, sizeof(name));
    assert_string_equal(name, "x_ms");
    assert_true(scrape_latency_unit_ms("{\"x.y_ms\"}") == 1);
    assert_true(scrape_latency_unit_ms("{\"x.y_microseconds_sum\"}") == 1e-3);

    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "a metric name starts with"},
        {"9lives", "a metric name starts with"},
        {"{a=\"b\"}", "a metric name starts with"},
        {"x{\"y\"}", "the metric name is given twice"},
        {"{\"y\", \"z\"}", "the metric name is given twice"},
        {"{\"\"}", "the quoted metric name is empty"},
        {"{\"y\", \"\"=\"v\"}", "a quoted label name is empty"},
        {"{\"y\", \"le\"=\"1\"}", "'le' cannot be matched"},
        {"bad name", "' ' after the name"},
        {"bad\xc3\xa9", "byte 0xc3 after the name"},
        {"x{a=\"b\",b=\"\",c=\"\",d=\"\",e=\"\"}", "more than 4 matchers"},
        {"x{a=~\"b(\"}", "'(' without its ')'"},
        {"x{a!~\"\\\\b\"}", "\\b is not supported when scraping"},
        {"x{a==\"b\"}", "a label value is quoted"},
        {"x{a=b}", "a label value is quoted"},
        {"x{a<\"b\"}", "operator is =, !=, =~ or !~"},
        {"x{a=\"b}", "no closing quote"},
        {"x{a=\"b\\d\"}", "an escape other than"},
        {"x{a=\"b\tc\"}", "control character"},
        {"x{le=\"1\"}", "'le' cannot be matched"},
        {"x{__name__=\"y\"}", "'__name__' cannot be matched"},
        {"x{1a=\"b\"}", "a label name starts with"},
        {"x{a:b=\"c\"}", "operator is =, !=, =~ or !~"},
        {"x{a=\"b\" c=\"d\"}", "separated by ','"},
        {"x{a=\"b\"", "no closing '}'"},
        {"x{a=\"b\",", "no closing '}'"},
        {"x{a=\"b\"}y", "text after the closing"},
        {"x{,}", "a label name starts with"},
        {"x{a=\"{{namespace}}\"}", "holds {{ or }}"}, /* the templates' placeholders */
        {"{\"x{{namespace}}\"}", "holds {{ or }}"}, /* in a quoted name too */
        {"{\"a}}b\", c=\"d\"}", "holds {{ or }}"},
        {"x{a='}}'}", "holds {{ or }}"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        int rc = scrape_selector_parse(bad[i].text, &s, err, sizeof(err));
        if (rc != -EINVAL || !strstr(err, bad[i].why) ||
            !strstr(err, "is not a metric name with label matchers"))
            fail_msg("case %zu '%s': rc %d err '%s'", i, bad[i].text, rc, err);
    }
    char longest[SCRAPE_METRIC_MAX + 1];
    memset(longest, 'x', SCRAPE_METRIC_MAX);
    longest[SCRAPE_METRIC_MAX] = '\0';
    assert_int_equal(scrape_selector_parse(longest, &s, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "longer than 127 characters"));
    longest[SCRAPE_METRIC_MAX - 1] = '\0';
    assert_int_equal(scrape_selector_parse(longest, &s, err, sizeof(err)), 0);
    /* no error buffer: still refused */
    assert_int_equal(scrape_selector_parse("x{", &s, NULL, 0), -EINVAL);
}

/* The matchers select series as PromQL does: a missing label reads "", a
 * histogram's buckets follow the latency field's matchers, and the reused
 * extractor keeps its parser when only the matchers change. */
static void test_selector_extract(void **state)
{
    (void)state;
    size_t len;
    char *vllm = slurp("vllm.prom", &len);
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "vllm:request_success_total{finished_reason!=\"abort\"}");
    snprintf(spec.inflight_metric, sizeof(spec.inflight_metric),
             "vllm:num_requests_running{engine=\"1\"}");
    snprintf(spec.latency_metric, sizeof(spec.latency_metric),
             "vllm:e2e_request_latency_seconds{engine=\"0\"}");
    snprintf(spec.queue_metric, sizeof(spec.queue_metric),
             "vllm:num_requests_waiting{no_such_label=\"\"}"); /* absent reads "" */
    struct scrape_sample s;
    char err[200];
    assert_int_equal(scrape_extract_buf(&spec, PROM_FMT_TEXT, vllm, len, 0, &s, err, sizeof(err)),
                     0);
    assert_true(s.requests == 1520 + 311 + 1488 + 290);
    assert_true(s.inflight == 5);
    assert_true(s.has_queued && s.queued == 3);
    assert_true(s.count[0] == 100 && s.count[s.nbuckets - 1] == 1835);
    /* a matcher no series meets: the metric is absent, not zero */
    snprintf(spec.inflight_metric, sizeof(spec.inflight_metric),
             "vllm:num_requests_running{engine=\"7\"}");
    assert_int_equal(scrape_extract_buf(&spec, PROM_FMT_TEXT, vllm, len, 0, &s, err, sizeof(err)),
                     0);
    assert_false(s.has_inflight);
    /* regex matchers, anchored as in PromQL: "stop" alone is not "s" */
    snprintf(spec.request_metric, sizeof(spec.request_metric),
             "vllm:request_success_total{finished_reason=~\"stop|length\",engine!~\"[1-9]\"}");
    snprintf(spec.inflight_metric, sizeof(spec.inflight_metric),
             "vllm:num_requests_running{model_name=~\"(?i)META-LLAMA/.*\"}");
    snprintf(spec.queue_metric, sizeof(spec.queue_metric),
             "vllm:num_requests_waiting{engine=~\"s\"}");
    assert_int_equal(scrape_extract_buf(&spec, PROM_FMT_TEXT, vllm, len, 0, &s, err, sizeof(err)),
                     0);
    assert_true(s.requests == 1520 + 311);
    assert_true(s.inflight == 7 + 5);
    assert_false(s.has_queued);

    size_t tlen;
    char *triton = slurp("triton.prom", &tlen);
    struct scrape_spec tri;
    scrape_spec_init(&tri, SCRAPE_TRITON);
    snprintf(tri.request_metric, sizeof(tri.request_metric),
             "nv_inference_request_success{model=\"ensemble\",version=\"1\"}");
    snprintf(tri.queue_metric, sizeof(tri.queue_metric),
             "nv_inference_pending_request_count{model!=\"ensemble\"}");
    assert_int_equal(scrape_extract_buf(&tri, PROM_FMT_TEXT, triton, tlen, 0, &s, err,
                                        sizeof(err)),
                     0);
    assert_true(s.requests == 812);
    assert_true(s.queued == 7);

    /* the longest name a field holds still reads its _bucket series */
    struct scrape_spec lng;
    scrape_spec_init(&lng, SCRAPE_GENERIC);
    char name[SCRAPE_METRIC_MAX];
    memset(name, 'l', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    snprintf(lng.request_metric, sizeof(lng.request_metric), "req");
    memcpy(lng.latency_metric, name, sizeof(name));
    char *expo = xasprintf("req 1\n%s_bucket{le=\"1\"} 2\n%s_bucket{le=\"+Inf\"} 3\n", name,
                           name);
    assert_int_equal(scrape_extract_buf(&lng, PROM_FMT_TEXT, expo, strlen(expo), 0, &s, err,
                                        sizeof(err)),
                     0);
    assert_int_equal(s.nbuckets, 2);
    xfree(expo);

    /* reuse: other matchers on the same names keep the parser and read anew */
    struct scrape_extract *x = xmalloc(sizeof(*x));
    scrape_extract_init(x, &tri, 0);
    assert_int_equal(scrape_extract_feed(x, triton, tlen), 0);
    assert_int_equal(scrape_extract_finish(x), 0);
    struct prom_parser *p = x->parser;
    snprintf(tri.request_metric, sizeof(tri.request_metric),
             "nv_inference_request_success{model=\"tensorrt_llm\"}");
    scrape_extract_reuse(x, &tri, 0);
    assert_int_equal(scrape_extract_feed(x, triton, tlen), 0);
    assert_int_equal(scrape_extract_finish(x), 0);
    assert_ptr_equal(x->parser, p);
    assert_true(x->s.requests == 812);
    /* a regex on reuse: compiled for this stream, freed by the next reuse or free */
    snprintf(tri.request_metric, sizeof(tri.request_metric),
             "nv_inference_request_success{model=~\"ens.*\"}");
    scrape_extract_reuse(x, &tri, 0);
    assert_non_null(x->request.re);
    assert_int_equal(scrape_extract_feed(x, triton, tlen), 0);
    assert_int_equal(scrape_extract_finish(x), 0);
    assert_ptr_equal(x->parser, p);
    assert_true(x->s.requests == 812);
    struct scrape_selector_re *compiled = x->request.re;
    scrape_extract_reuse(x, &tri, 0); /* the same selectors: compiled once */
    assert_ptr_equal(x->request.re, compiled);
    snprintf(tri.request_metric, sizeof(tri.request_metric),
             "nv_inference_request_success{model=~\"pre.*|post.*\"}");
    scrape_extract_reuse(x, &tri, 0); /* another pattern: compiled anew */
    assert_non_null(x->request.re);
    assert_int_equal(scrape_extract_feed(x, triton, tlen), 0);
    assert_int_equal(scrape_extract_finish(x), 0);
    assert_true(x->s.requests == 2 * 812);
    scrape_extract_reuse(x, &tri, 0);
    snprintf(tri.request_metric, sizeof(tri.request_metric), "nv_inference_count");
    scrape_extract_reuse(x, &tri, 0); /* another name: a new parser */
    assert_null(x->spare);
    scrape_extract_free(x);
    xfree(x);
    xfree(triton);
    xfree(vllm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_counters),
        cmocka_unit_test(test_profiles_golden), cmocka_unit_test(test_generic_names),
        cmocka_unit_test(test_metric_absent),   cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_gauge_series),
        cmocka_unit_test(test_histogram_caps),   cmocka_unit_test(test_format_matters),
        cmocka_unit_test(test_reuse),           cmocka_unit_test(test_selector_parse),
        cmocka_unit_test(test_selector_extract), cmocka_unit_test(test_histogram_series),
        cmocka_unit_test(test_series_many_labels),
        cmocka_unit_test(test_series_empty_label),
        cmocka_unit_test(test_quoted_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

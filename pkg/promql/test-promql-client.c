/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the Prometheus client against a fake Prometheus on loopback
 * (httpc's testsrv on the test loop): results, every failure made invalid
 * with a reason, bearer token re-read, chunked range seeding with its
 * retries, and close with queries or a retry's wait in flight. Async tests
 * count callbacks and assert uv_loop_close == 0. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "forecast/forecast.h"
#include "httpc/httpc.h"
#include "httpc/testsrv.h"
#include "promql/promql.h"
#include "util/util.h"

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
    bool refuse_post; /* answer POSTs 405, as a proxy passing only GETs */
    int long_gets;    /* GETs whose target passes PROMQL_GET_MAX_URL */
    int refused_queries; /* of the refused requests' window rate */
    char refused_query[PROMQL_MAX_QUERY];
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
        if (f->refuse_post) {
            testsrv_respond(c, 405, "text/plain", "method not allowed", 18, NULL);
            return;
        }
    } else {
        assert_string_equal(req->method, "GET");
        assert_true(strlen(req->target) <= PROMQL_GET_MAX_URL || f->refuse_post);
        f->long_gets += strlen(req->target) > PROMQL_GET_MAX_URL;
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
    if (strstr(f->last_query, "tgi_request_failure") &&
        !strstr(f->last_query, PROMQL_PART_LABEL)) {
        f->refused_queries++;
        snprintf(f->refused_query, sizeof(f->refused_query), "%s", f->last_query);
    }
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

/* Close the client, the HTTP stack and the server, and run the loop until
 * everything has ended (the callbacks of what was in flight included). */
static void fx_close(struct fx *f)
{
    promql_close(f->pq, on_closed, f);
    httpc_close(f->http, on_closed, f);
    testsrv_stop(f->srv);
    uv_close((uv_handle_t *)&f->delay_timer, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closes, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static void fx_free(struct fx *f)
{
    unlink(f->token_path);
    xfree(f);
}

static void fx_finish(struct fx *f)
{
    fx_close(f);
    fx_free(f);
}

/* A week of 1 s steps before 1700000000 s (25,001 points, 18 chunks of a
 * seed's 1,440) into fo, sent. */
static void seed_week(struct fx *f, const struct promql_target *t, struct forecast *fo)
{
    char err[160];
    assert_int_equal(promql_seed(f->pq, t, 1700000000000, 25000000, 1000, fo, on_seed, f, err,
                                 sizeof(err)),
                     0);
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

    /* a profile with a refused requests' counter (TGI's 429s): their window rate is a
     * query of its own beside the default rate, its answer the result's rejected_rate;
     * none beside a rate of the workload's own, nor for vLLM */
    assert_true(isnan(f->r.rejected_rate) && f->refused_queries == 0);
    struct scrape_spec tgi;
    scrape_spec_init(&tgi, SCRAPE_TGI);
    t.spec = &tgi;
    before = f->results;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, before + 1);
    assert_true(f->r.valid && f->r.rejected_rate == 12.5 && isnan(f->r.rejected_recent));
    assert_int_equal(f->refused_queries, 1);
    assert_non_null(strstr(f->refused_query, "sum(max by (pod, instance, gpuscaler_key) ("
                                             "label_replace(label_replace(sum by (pod, instance, "
                                             "container, job, service, endpoint) (rate("
                                             "tgi_request_failure{namespace=\"team-a\","
                                             "pod=~\"chat-"));
    assert_non_null(strstr(f->refused_query, "err=\"overloaded\"}[2m])), \"gpuscaler_key\""));
    f->mode = FAKE_BAD_QUERY; /* failed: unknown, and said for the log */
    before = f->results;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, before + 1);
    assert_true(isnan(f->r.rejected_rate) && f->notes.refused[0] != '\0');
    f->mode = FAKE_OK;
    t.rate_tmpl = "sum(rate(tgi_request_success{ns=\"{{namespace}}\"}[{{window}}]))";
    before = f->results;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, before + 1);
    assert_true(f->r.valid && isnan(f->r.rejected_rate) && f->notes.refused[0] == '\0');
    assert_int_equal(f->refused_queries, 2);
    t.rate_tmpl = NULL;
    t.spec = &spec;

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
    /* a proxy that passes only GETs refuses the POST (405): that query fails, said so,
     * and from then on long queries go as GETs */
    f->refuse_post = true;
    before = f->results;
    posts = f->posts;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, before + 1);
    assert_false(f->r.valid);
    assert_non_null(strstr(f->r.why, "405"));
    assert_non_null(strstr(f->r.why, "a POST refused: long queries go as GETs now"));
    assert_int_equal(f->posts, posts + 1);
    before = f->results;
    assert_int_equal(promql_get(f->pq, &t, 1700000000250, on_result, f, err, sizeof(err)), 0);
    run_until(f, &f->results, before + 1);
    assert_true(f->r.valid && f->r.request_rate == 12.5);
    assert_int_equal(f->posts, posts + 1); /* no POST again: the long rate query a GET */
    assert_int_equal(f->long_gets, 1);
    f->refuse_post = false;
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
    seed_week(f, &t, fo);
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

/* The seed asks for the arrivals of the past as the demand counts them: the
 * default rate and, for a profile with a refused requests' counter (TGI),
 * that counter's rate, 0 where it has no series; a promql-rate of the
 * user's own alone. */
static void test_seed_query(void **state)
{
    (void)state;
    struct fx *f = fx_new(NULL);
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    struct forecast_config fc;
    forecast_config_init(&fc);
    char err[160];
    static const struct {
        enum scrape_profile profile;
        const char *own, *has, *lacks;
    } cases[] = {
        {SCRAPE_VLLM, NULL, "endpoint) (rate(vllm:request_success_total{", "vector(0)"},
        {SCRAPE_TGI, NULL, "]:[0-9]+\"))) + (sum(max by (pod, instance, gpuscaler_key) ("
                           "label_replace(label_replace(sum by (pod, instance, container, job, "
                           "service, endpoint) (rate(tgi_request_failure{namespace=\"team-a\",",
         NULL},
        {SCRAPE_TGI, "sum(rate(gw_requests_total{ns=\"{{namespace}}\"}[5m]))", NULL,
         "tgi_request_failure"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        scrape_spec_init(&spec, cases[i].profile);
        t.rate_tmpl = cases[i].own;
        struct forecast *fo = forecast_new(&fc);
        assert_int_equal(promql_seed(f->pq, &t, 1700000000000, 60000, 60000, fo, on_seed, f,
                                     err, sizeof(err)),
                         0);
        run_until(f, &f->seeds, (int)i + 1);
        assert_int_equal(f->sr.err, 0);
        if (cases[i].has)
            assert_non_null(strstr(f->last_query, cases[i].has));
        if (cases[i].lacks)
            assert_null(strstr(f->last_query, cases[i].lacks));
        if (cases[i].profile == SCRAPE_TGI && !cases[i].own) {
            assert_non_null(strstr(f->last_query, ",err=\"overloaded\"}[2m])), \"gpuscaler_key\""));
            assert_non_null(strstr(f->last_query, "]:[0-9]+\"))) or vector(0))"));
        }
        if (cases[i].own)
            assert_string_equal(f->last_query,
                                "sum(rate(gw_requests_total{ns=\"team-a\"}[5m]))");
        forecast_free(fo);
    }
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
    f->range_503 = 2; /* the second chunk fails twice */
    seed_week(f, &t, fo);
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
    uv_update_time(&f->loop);
    uint64_t t0 = uv_now(&f->loop);
    seed_week(f, &t, fo);
    run_until(f, &f->seeds, 2);
    /* the tries waited a tenth and a fifth of the 2 s timeout between them */
    assert_true(uv_now(&f->loop) - t0 >= 600);
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
    seed_week(f, &t, fo);
    run_until(f, &f->seeds, 3);
    assert_int_equal(f->sr.err, -EPROTO);
    assert_int_equal(f->sr.retried, 0);
    assert_int_equal(f->range_requests, 1);
    forecast_free(fo);
    fx_finish(f);
}

/* Closing while a chunk waits for its next try ends the seed at the next
 * loop turn, cancelled, as a request in flight would be; the wait's timer
 * is closed with it. */
static void test_close_during_a_retry_wait(void **state)
{
    (void)state;
    struct fx *f = fx_new(NULL);
    struct scrape_spec spec;
    struct promql_target t = target(&spec);
    struct forecast_config fc;
    forecast_config_init(&fc);
    struct forecast *fo = forecast_new(&fc);
    f->range_503 = 1;
    seed_week(f, &t, fo);
    run_until(f, &f->range_requests, 2); /* the second chunk failed: its wait began */
    assert_int_equal(f->seeds, 0);
    fx_close(f);
    assert_int_equal(f->seeds, 1);
    assert_int_equal(f->sr.err, -ECANCELED);
    assert_int_equal(f->range_requests, 2);
    forecast_free(fo);
    fx_free(f);
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
    seed_week(f, &t, fo);
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
    fx_close(f);
    assert_int_equal(f->results, 1);
    assert_false(f->r.valid);
    assert_string_equal(f->r.why, "rate: query cancelled");
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_results),
        cmocka_unit_test(test_client_answer_too_big),
        cmocka_unit_test(test_client_auth_headers),
        cmocka_unit_test(test_client_unreachable),
        cmocka_unit_test(test_seed_chunks),
        cmocka_unit_test(test_seed_query),
        cmocka_unit_test(test_seed_chunk_retried),
        cmocka_unit_test(test_close_during_a_retry_wait),
        cmocka_unit_test(test_range_chunk_outlasts_the_instant_timeout),
        cmocka_unit_test(test_seed_stray_points),
        cmocka_unit_test(test_close_inflight),
        cmocka_unit_test(test_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

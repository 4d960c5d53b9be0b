/* SPDX-License-Identifier: Apache-2.0 */
/* promql/client: instant and range queries against a Prometheus server
 * through httpc (see promql.h).
 *
 * Each promql_get is one operation with up to five requests in flight
 * (rate, p99, busy time, the per-pod parts and the refused requests' rate)
 * and one callback once all
 * finished; each promql_seed walks the
 * lookback in chunks, one request at a time. Operations are on a list so
 * promql_close can cancel them; the client is freed when its close timer
 * closed and the last operation delivered. Credentials and extra headers
 * are auth.c's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "forecast/forecast.h"
#include "httpc/httpc.h"
#include "promql.h"
#include "util/util.h"

#define RANGE_CHUNK_STEPS 10000 /* under Prometheus' 11,000 points a series */
/* A seed hands each chunk's points to the forecaster in one loop callback,
 * most of them closing a bucket (about 13 us each at 60 s steps): a day of
 * minutes a chunk keeps that callback near 20 ms, where 10,000 steps held
 * the loop for about 125 ms (bench/bench-seed.c). */
#define SEED_CHUNK_STEPS 1440
/* A chunk of a range is asked this many times before the range fails: a
 * timeout, a dropped connection or a 5xx (a Thanos store or a querier
 * restarting) used to fail a week's seed at its sixth day and start it
 * again from the first, five minutes later. */
#define RANGE_CHUNK_TRIES 3
/* ... after a wait of a tenth of the instant queries' timeout, then a fifth
 * (1 s, then 2 s at the default 10 s): a store or a querier restarting
 * refuses a connection or answers 503 for a moment, and a try sent at once
 * met the same. */
#define RANGE_RETRY_WAIT_DIV 10
/* A range chunk waits this long at least (promql_config.timeout_ms if longer):
 * a day of minutes of a rate over many pods takes seconds, on object
 * storage tens of them, where an instant query takes milliseconds
 * (Prometheus' own query.timeout is 2 minutes). */
#define RANGE_TIMEOUT_MIN_MS 60000

struct op {
    struct promql *p;
    struct op *prev, *next;
    struct httpc_req *reqs[5]; /* rate, p99, busy time, per-pod parts, refused */
    bool posted[5];            /* ... sent as a POST */
    int pending;
    bool is_seed;
    /* get */
    promql_result_cb cb;
    void *arg;
    struct scrape_result r;
    struct promql_pods pods;
    bool pods_ok;
    struct promql_notes notes;
    char ns[254], deploy[254];
    /* seed (f set) or range (f NULL: collect the points) */
    promql_seed_cb seed_cb;
    promql_range_cb range_cb;
    struct forecast *f;
    struct promql_range_result rr;
    size_t pts_cap;
    char *query;
    int64_t next_ms, end_ms, step_ms;
    int64_t chunk_lo, chunk_hi; /* the chunk in flight, [start, end] as asked (ms) */
    int tries;                  /* of the chunk in flight, sent so far */
    uv_timer_t *wait;           /* a retry's wait (owned; closed with the op), NULL none */
    bool waiting;               /* ... started: the op is not done */
    struct promql_seed_result sr;
};

struct promql {
    uv_loop_t *loop;
    struct httpc *h;
    char *url, *ca_file, *cert_file, *key_file, *window;
    struct promql_auth auth;
    int64_t timeout_ms;
    size_t max_body;
    struct op *ops;
    bool get_only;     /* a POST was refused (405): long queries go as GETs too */
    uv_timer_t closer; /* only to close asynchronously */
    bool closing, closed;
    promql_close_cb close_cb;
    void *close_arg;
};

void promql_config_init(struct promql_config *c)
{
    memset(c, 0, sizeof(*c));
    c->window = PROMQL_WINDOW;
    c->timeout_ms = 10000;
    c->max_body = (size_t)1 << 20;
}

static char *dup_or_null(const char *s)
{
    return s && *s ? xstrdup(s) : NULL;
}

int promql_new(uv_loop_t *loop, struct httpc *h, const struct promql_config *cfg,
               struct promql **out)
{
    *out = NULL;
    struct promql_config c;
    promql_config_init(&c);
    if (cfg) {
        c = *cfg;
        if (!c.window)
            c.window = PROMQL_WINDOW;
        if (c.timeout_ms <= 0)
            c.timeout_ms = 10000;
        if (!c.max_body)
            c.max_body = (size_t)1 << 20;
    }
    if (!loop || !h || !c.url ||
        (strncmp(c.url, "http://", 7) != 0 && strncmp(c.url, "https://", 8) != 0))
        return -EINVAL;
    char tmp[64], err[200];
    if (promql_expand("x", "a", "b", c.window, tmp, sizeof(tmp), err, sizeof(err)) != 0 ||
        promql_config_check(&c, err, sizeof(err)) != 0)
        return -EINVAL;
    struct promql *p = xcalloc(1, sizeof(*p));
    p->loop = loop;
    p->h = h;
    p->url = xstrdup(c.url);
    size_t n = strlen(p->url);
    while (n > 0 && p->url[n - 1] == '/')
        p->url[--n] = '\0';
    p->ca_file = dup_or_null(c.ca_file);
    p->cert_file = dup_or_null(c.cert_file);
    p->key_file = dup_or_null(c.key_file);
    promql_auth_init(&p->auth, &c);
    p->window = xstrdup(c.window);
    p->timeout_ms = c.timeout_ms;
    p->max_body = c.max_body;
    uv_timer_init(loop, &p->closer);
    *out = p;
    return 0;
}

/* ---- helpers --------------------------------------------------------------- */

static void urlencode(struct util_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            *c == '-' || *c == '.' || *c == '_' || *c == '~') {
            util_buf_append(b, c, 1);
        } else {
            char e[3] = {'%', hex[*c >> 4], hex[*c & 15]};
            util_buf_append(b, e, 3);
        }
    }
}

static void on_done(struct httpc_req *req, int err, const struct httpc_resp *resp, void *arg);
static bool chunk_retryable(int err, const struct httpc_resp *resp);
static void chunk_retry(struct op *o);

/* Start one GET of path?params on slot i of op; a URL over
 * PROMQL_GET_MAX_URL goes as a POST of the same parameters, form-encoded, as
 * the HTTP API accepts (proxies in front of it refuse long request lines:
 * nginx at 8 KiB by default, and a 4 KiB query can encode to 12), unless a
 * POST was refused once (405: a proxy that passes only GETs). */
static int issue(struct op *o, int slot, const char *url, size_t max_body, char *err,
                size_t errlen)
{
    int64_t timeout_ms = o->p->timeout_ms;
    if (o->is_seed && timeout_ms < RANGE_TIMEOUT_MIN_MS)
        timeout_ms = RANGE_TIMEOUT_MIN_MS;
    struct promql *p = o->p;
    struct promql_auth_req ar;
    int rc = promql_auth_begin(&p->auth, &ar, err, errlen);
    if (rc < 0)
        return rc;
    struct httpc_tls tls = {.ca_file = p->ca_file, .cert_file = p->cert_file,
                            .key_file = p->key_file};
    struct httpc_opts ho = {
        .url = url,
        .headers = ar.headers,
        .bearer = ar.bearer,
        .tls = strncmp(url, "https:", 6) == 0 ? &tls : NULL,
        .timeout_ms = timeout_ms,
        .connect_timeout_ms = p->timeout_ms,
        .max_body = max_body,
    };
    char *path = NULL;
    const char *q = strchr(url, '?');
    o->posted[slot] = strlen(url) > PROMQL_GET_MAX_URL && q && !p->get_only;
    if (o->posted[slot]) {
        path = xstrndup(url, (size_t)(q - url));
        ho.url = path;
        ho.method = "POST";
        ho.body = q + 1;
        ho.body_len = strlen(q + 1);
        ho.content_type = "application/x-www-form-urlencoded";
    }
    rc = httpc_request(p->h, &ho, on_done, o, &o->reqs[slot]);
    xfree(path);
    promql_auth_end(&ar);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the query: %s", strerror(-rc));
        return rc;
    }
    o->pending++;
    return 0;
}

/* Partial answers refused: Thanos (partial_response, on by default there)
 * and VictoriaMetrics (deny_partial_response) then fail a query some stores
 * could not answer, instead of a sum over fewer pods. Prometheus ignores both. */
#define PARTIAL_DENIED "&partial_response=false&deny_partial_response=1"

static char *instant_url(const struct promql *p, const char *query, int64_t now_ms)
{
    struct util_buf b = {0};
    util_buf_printf(&b, "%s/api/v1/query?query=", p->url);
    urlencode(&b, query);
    util_buf_printf(&b, "&time=%.3f", (double)now_ms / 1000.0);
    /* VictoriaMetrics answers "now" from -search.latencyOffset (30 s) ago
     * unless nocache is set */
    util_buf_puts(&b, "&nocache=1" PARTIAL_DENIED);
    return util_buf_steal(&b);
}

static void op_link(struct op *o)
{
    struct promql *p = o->p;
    o->next = p->ops;
    if (p->ops)
        p->ops->prev = o;
    p->ops = o;
}

static void maybe_free(struct promql *p);

static void free_handle(uv_handle_t *h)
{
    xfree(h);
}

static void op_free(struct op *o)
{
    struct promql *p = o->p;
    if (o->prev)
        o->prev->next = o->next;
    else if (p->ops == o)
        p->ops = o->next;
    if (o->next)
        o->next->prev = o->prev;
    xfree(o->query);
    promql_series_free(&o->rr.series);
    promql_pods_free(&o->pods);
    if (o->wait)
        uv_close((uv_handle_t *)o->wait, free_handle);
    xfree(o);
    maybe_free(p);
}

/* The why of a failed answer: transport, HTTP status or the body's error.
 * The body is parsed as one series into s, or, with pods, as the per-pod
 * answer into pods. */
static int answer(int err, const struct httpc_resp *resp, struct promql_series *s,
                  struct promql_pods *pods, char *why, size_t whylen)
{
    memset(s, 0, sizeof(*s));
    if (pods)
        memset(pods, 0, sizeof(*pods));
    if (err == -ECANCELED) {
        snprintf(why, whylen, "query cancelled");
        return err;
    }
    if (err == -EMSGSIZE) {
        snprintf(why, whylen, "the answer is too big (%.120s): a query that does not aggregate "
                 "(use sum)?", resp->errmsg);
        return err;
    }
    if (err) {
        snprintf(why, whylen, "prometheus unreachable: %.150s", resp->errmsg);
        return err;
    }
    char perr[200];
    int rc = pods ? promql_parse_pods(resp->body, resp->body_len, pods, perr, sizeof(perr))
                  : promql_parse_response(resp->body, resp->body_len, s, perr, sizeof(perr));
    if (resp->status < 200 || resp->status >= 300) {
        promql_series_free(s);
        if (pods)
            promql_pods_free(pods);
        if (rc == -EREMOTEIO)
            snprintf(why, whylen, "HTTP %ld: %.170s", resp->status, perr);
        else
            snprintf(why, whylen, "HTTP %ld from prometheus", resp->status);
        return -EPROTO;
    }
    if (rc)
        snprintf(why, whylen, "%s", perr);
    return rc;
}

/* ---- instant queries ------------------------------------------------------- */

/* An optional part's failure (why), for the caller to log. */
static void part_note(struct op *o, int slot, const char *why)
{
    char *dst = slot == 1   ? o->notes.p99
                : slot == 2 ? o->notes.busy
                : slot == 3 ? o->notes.pods
                            : o->notes.refused;
    snprintf(dst, sizeof(o->notes.p99), "%s", why);
}

static void get_done(struct op *o, int slot, int err, const struct httpc_resp *resp,
                     bool refused)
{
    struct promql_series s;
    char why[200];
    int rc = answer(err, resp, &s, slot == 3 ? &o->pods : NULL, why, sizeof(why));
    if (refused) {
        size_t n = strlen(why);
        snprintf(why + n, sizeof(why) - n, " (a POST refused: long queries go as GETs now)");
    }
    if (rc == -ECANCELED)
        o->notes.cancelled = true;
    if (rc == 0 && slot != 3 && s.range) { /* its first point is the oldest of a range */
        rc = -EBADMSG;
        snprintf(why, sizeof(why), "the query returned a range vector (%zu points): use an "
                 "instant expression, such as rate(x[2m]) rather than x[2m]", s.npoints);
    }
    if (slot == 0) { /* rate */
        if (rc == 0) {
            double v = s.points[0].v;
            if (!isfinite(v) || v < 0) {
                rc = -EDOM;
                snprintf(why, sizeof(why), "the rate query returned %g", v);
            }
        }
        if (rc == 0) {
            o->r.valid = true;
            o->r.request_rate = s.points[0].v;
            o->r.time_ms = s.points[0].t_ms;
        } else {
            o->r.valid = false;
            snprintf(o->r.why, sizeof(o->r.why), "rate: %.190s", why);
        }
    } else if (slot == 1) { /* p99 in seconds; no data or NaN only means no traffic */
        if (rc == 0 && isfinite(s.points[0].v) && s.points[0].v >= 0)
            o->r.p99_ms = s.points[0].v * 1000.0;
        if (rc != 0 && rc != -ENODATA && rc != -ECANCELED)
            part_note(o, slot, why);
    } else if (slot == 2) { /* busy time; no data: a pod without the counter, use the gauge */
        bool bad = rc != 0 && rc != -ENODATA;
        if (rc == 0 && isfinite(s.points[0].v) && s.points[0].v >= 0) {
            o->r.busy = s.points[0].v;
        } else if (rc == 0) {
            snprintf(why, sizeof(why), "it returned %g", s.points[0].v);
            bad = true;
        }
        if (bad && rc != -ECANCELED)
            part_note(o, slot, why);
    } else if (slot == 4) { /* refused requests; no data: no pod has refused any yet */
        if (rc == -ENODATA) {
            o->r.rejected_rate = 0;
        } else if (rc == 0 && isfinite(s.points[0].v) && s.points[0].v >= 0) {
            o->r.rejected_rate = s.points[0].v;
        } else if (rc != -ECANCELED) { /* unknown: the demand is the completions' */
            if (rc == 0)
                snprintf(why, sizeof(why), "it returned %g", s.points[0].v);
            part_note(o, slot, why);
        }
    } else { /* per-pod parts: unknown on failure, as before they were asked */
        o->pods_ok = rc == 0;
        if (rc != 0 && rc != -ECANCELED)
            part_note(o, slot, why);
    }
    promql_series_free(&s);
}

static void seed_step(struct op *o);

/* A point of the chunk asked for: an answer's point outside [start, end]
 * (a server's or a proxy's bug, a timestamp off by 1,000) is dropped, so it
 * neither takes the forecaster's clock far ahead, where every later point
 * would be refused as older, nor ends a range query's series early. */
/* A point within the chunk asked for: [start, end], or a step before start
 * (exclusive: the previous chunk's last point), where a query frontend that
 * aligns start to the step (Thanos, Cortex, Mimir) puts the chunk's first. */
static bool in_chunk(const struct op *o, int64_t t_ms)
{
    return t_ms > o->chunk_lo - o->step_ms && t_ms <= o->chunk_hi;
}

/* Append a chunk's points to a range query's series, up to the cap. */
static void range_collect(struct op *o, const struct promql_series *s)
{
    struct promql_series *out = &o->rr.series;
    if (out->npoints + s->npoints > PROMQL_MAX_RANGE_POINTS) {
        o->sr.err = -E2BIG;
        snprintf(o->sr.why, sizeof(o->sr.why), "more than %d points in the range",
                 PROMQL_MAX_RANGE_POINTS);
        return;
    }
    if (out->npoints + s->npoints > o->pts_cap) {
        o->pts_cap = UTIL_MAX(o->pts_cap * 2, out->npoints + s->npoints);
        out->points = xrealloc(out->points, o->pts_cap * sizeof(*out->points));
    }
    for (size_t i = 0; i < s->npoints; i++) /* chunks do not overlap; keep the order */
        if (in_chunk(o, s->points[i].t_ms) &&
            (out->npoints == 0 || s->points[i].t_ms > out->points[out->npoints - 1].t_ms))
            out->points[out->npoints++] = s->points[i];
}

static void on_done(struct httpc_req *req, int err, const struct httpc_resp *resp, void *arg)
{
    struct op *o = arg;
    int slot = 0;
    while (slot < (int)UTIL_ARRAY_LEN(o->reqs) - 1 && o->reqs[slot] != req)
        slot++;
    o->reqs[slot] = NULL;
    o->pending--;
    /* a POST refused: a proxy passing only GETs (Prometheus takes both) */
    bool refused = o->posted[slot] && err == 0 && resp && resp->status == 405;
    if (refused)
        o->p->get_only = true;
    if (o->is_seed) {
        struct promql_series s;
        char why[200];
        int rc = answer(err, resp, &s, NULL, why, sizeof(why));
        if (rc != 0 && rc != -ENODATA && !o->p->closing && o->tries < RANGE_CHUNK_TRIES &&
            (refused || chunk_retryable(err, resp))) {
            promql_series_free(&s);
            chunk_retry(o);
            return;
        }
        if (rc == 0 && !o->f) {
            range_collect(o, &s);
        } else if (rc == 0) {
            for (size_t i = 0; i < s.npoints; i++) {
                double v = s.points[i].v;
                if (isfinite(v) && v >= 0 && in_chunk(o, s.points[i].t_ms) &&
                    forecast_observe(o->f, s.points[i].t_ms, v) == 0)
                    o->sr.observed++;
                else
                    o->sr.skipped++;
            }
        } else if (rc != -ENODATA) { /* no data in a chunk: the workload did not exist yet */
            o->sr.err = rc;
            if (o->tries > 1)
                snprintf(o->sr.why, sizeof(o->sr.why), "%.170s (asked %d times)", why, o->tries);
            else
                snprintf(o->sr.why, sizeof(o->sr.why), "%s", why);
        }
        promql_series_free(&s);
        seed_step(o);
        return;
    }
    get_done(o, slot, err, resp, refused);
    if (o->pending == 0) {
        if (!o->r.valid)
            o->r.request_rate = NAN;
        o->cb(&o->r, o->pods_ok ? &o->pods : NULL, &o->notes, o->arg);
        op_free(o);
    }
}

/* One of the target's queries into out (PROMQL_MAX_QUERY bytes): its own
 * template when the annotation set one, else dflt's for its engine, expanded
 * for the workload; out is "" when there is neither. */
static int query_for(const struct promql *p, const struct promql_target *t, const char *own,
                     void (*dflt)(const struct scrape_spec *, char *, size_t), char *out,
                     char *err, size_t errlen)
{
    char tmpl[PROMQL_MAX_QUERY];
    if (own && *own)
        snprintf(tmpl, sizeof(tmpl), "%s", own);
    else
        dflt(t->spec, tmpl, sizeof(tmpl));
    out[0] = '\0';
    if (!tmpl[0])
        return 0;
    return promql_expand(tmpl, t->ns, t->deployment, p->window, out, PROMQL_MAX_QUERY, err,
                         errlen);
}

/* The target's rate query, which every request needs. */
static int rate_query(const struct promql *p, const struct promql_target *t, char *out,
                      char *err, size_t errlen)
{
    int rc = query_for(p, t, t->rate_tmpl, promql_default_rate, out, err, errlen);
    if (rc == 0 && !out[0]) {
        snprintf(err, errlen, "no rate query: set gpuscaler.io/promql-rate or request-metric");
        return -EINVAL;
    }
    return rc;
}

/* The refused requests' rate query, beside the default rate only (out ""
 * else, or without a rejected-metric): a rate of the user's own counts what
 * it counts. */
static int refused_query(const struct promql *p, const struct promql_target *t, char *out,
                         char *err, size_t errlen)
{
    out[0] = '\0';
    if (t->rate_tmpl && *t->rate_tmpl)
        return 0;
    return query_for(p, t, NULL, promql_default_refused, out, err, errlen);
}

/* The seed's query: the arrivals of the past as the demand counts them, the
 * default rate plus the refused requests' rate (none at a step without the
 * counter: TGI makes its series with the first refusal). A rate of the
 * user's own counts what it counts, as in promql_get. Both cannot outgrow
 * the limit with the names' limits; if they did, the rate alone. */
static int seed_query(const struct promql *p, const struct promql_target *t, char *out,
                      char *err, size_t errlen)
{
    char refused[PROMQL_MAX_QUERY], both[PROMQL_MAX_QUERY];
    int rc = rate_query(p, t, out, err, errlen);
    if (rc != 0 || (rc = refused_query(p, t, refused, err, errlen)) != 0)
        return rc;
    if (!refused[0])
        return 0;
    int n = snprintf(both, sizeof(both), "%s + (%s or vector(0))", out, refused);
    if (n > 0 && (size_t)n < sizeof(both))
        memcpy(out, both, (size_t)n + 1);
    return 0;
}

/* The per-pod query into out (PROMQL_MAX_PODS_QUERY bytes; "" when there is
 * none): which pods the rate counts only when the rate is the default one,
 * whose pods it names. One that does not expand (too long) is left out: the
 * parts are then unknown, as they were before this query. */
static void pods_query(const struct promql *p, const struct promql_target *t, char *out,
                       char *err, size_t errlen)
{
    char tmpl[PROMQL_MAX_PODS_QUERY];
    promql_default_pods(t->spec, !(t->rate_tmpl && *t->rate_tmpl), tmpl, sizeof(tmpl));
    out[0] = err[0] = '\0';
    if (strlen(tmpl) >= sizeof(tmpl) - 1) { /* cut short: long metric names, each part's */
        snprintf(err, errlen, "the per-pod query would be longer than %d characters",
                 PROMQL_MAX_PODS_QUERY - 1);
        return;
    }
    if (tmpl[0] && promql_expand(tmpl, t->ns, t->deployment, p->window, out,
                                 PROMQL_MAX_PODS_QUERY, err, errlen) != 0)
        out[0] = '\0';
}

int promql_get(struct promql *p, const struct promql_target *t, int64_t now_ms,
               promql_result_cb cb, void *arg, char *err, size_t errlen)
{
    char rate_q[PROMQL_MAX_QUERY], p99_q[PROMQL_MAX_QUERY], busy_q[PROMQL_MAX_QUERY];
    char pods_q[PROMQL_MAX_PODS_QUERY], refused_q[PROMQL_MAX_QUERY];
    char *url = NULL;
    struct op *o = NULL;
    int rc;
    if (errlen)
        err[0] = '\0';
    if (p->closing)
        return -ESHUTDOWN;
    if (!cb || !t || !t->spec)
        return -EINVAL;
    if ((rc = rate_query(p, t, rate_q, err, errlen)) != 0 ||
        (rc = query_for(p, t, t->p99_tmpl, promql_default_p99, p99_q, err, errlen)) != 0 ||
        (rc = query_for(p, t, t->busy_tmpl, promql_default_busy, busy_q, err, errlen)) != 0)
        return rc;
    if ((rc = refused_query(p, t, refused_q, err, errlen)) != 0)
        return rc;
    char pods_err[200];
    pods_query(p, t, pods_q, pods_err, sizeof(pods_err));

    o = xcalloc(1, sizeof(*o));
    o->p = p;
    o->cb = cb;
    o->arg = arg;
    snprintf(o->ns, sizeof(o->ns), "%s", t->ns);
    snprintf(o->deploy, sizeof(o->deploy), "%s", t->deployment);
    o->r.request_rate = NAN;
    o->r.rejected_rate = o->r.rejected_recent = NAN; /* the recent: the controller's */
    o->r.inflight = -1;
    o->r.busy = -1;
    o->r.queued = -1;
    o->r.backlog = -1;
    o->r.waiting = -1;
    o->r.p99_ms = -1;
    /* the window queries where the newest samples end; the per-pod one now */
    int64_t eval_ms = now_ms - (t->lag_ms > 0 ? t->lag_ms : 0);
    url = instant_url(p, rate_q, eval_ms);
    rc = issue(o, 0, url, p->max_body, err, errlen);
    xfree(url);
    if (rc < 0) {
        xfree(o);
        return rc;
    }
    op_link(o);
    if (pods_err[0]) /* too long to be asked: the parts are unknown, as before it was */
        part_note(o, 3, pods_err);
    /* the others only add to the result: one not sent leaves its part unknown */
    const char *more[] = {NULL, p99_q, busy_q, pods_q, refused_q};
    for (int slot = 1; slot < (int)UTIL_ARRAY_LEN(more); slot++) {
        if (!more[slot][0])
            continue;
        url = instant_url(p, more[slot], slot == 3 ? now_ms : eval_ms);
        char e2[160], why[200];
        if (issue(o, slot, url, p->max_body, e2, sizeof(e2)) < 0) {
            snprintf(why, sizeof(why), "not sent: %s", e2);
            part_note(o, slot, why);
        }
        xfree(url);
    }
    return 0;
}

int64_t promql_window_ms(const struct promql *p)
{
    return promql_duration_ms(p->window); /* checked by promql_new */
}

/* ---- range queries (forecaster seeding) ------------------------------------ */

static void seed_finish(struct op *o)
{
    if (o->range_cb) {
        o->rr.err = o->sr.err;
        memcpy(o->rr.why, o->sr.why, sizeof(o->rr.why));
        if (o->rr.err == 0 && o->rr.series.npoints == 0) {
            o->rr.err = -ENODATA;
            snprintf(o->rr.why, sizeof(o->rr.why), "no data in the range");
        }
        if (o->rr.err != 0)
            promql_series_free(&o->rr.series);
        o->range_cb(&o->rr, o->arg);
    } else {
        o->seed_cb(&o->sr, o->arg);
    }
    op_free(o);
}

/* Ask for the chunk [chunk_lo, chunk_hi] (again, after a failure). */
static int chunk_send(struct op *o, char *err, size_t errlen)
{
    struct promql *p = o->p;
    struct util_buf b = {0};
    util_buf_printf(&b, "%s/api/v1/query_range?query=", p->url);
    urlencode(&b, o->query);
    util_buf_printf(&b, "&start=%.3f&end=%.3f&step=%.3f" PARTIAL_DENIED,
                    (double)o->chunk_lo / 1000.0, (double)o->chunk_hi / 1000.0,
                    (double)o->step_ms / 1000.0);
    int rc = issue(o, 0, b.data, p->max_body * 64, err, errlen);
    if (rc == 0)
        o->tries++;
    util_buf_free(&b);
    return rc;
}

/* Send the next chunk of the range. */
static int seed_send(struct op *o, char *err, size_t errlen)
{
    int64_t chunk = o->f ? SEED_CHUNK_STEPS : RANGE_CHUNK_STEPS;
    int64_t last = o->next_ms + (chunk - 1) * o->step_ms;
    if (last > o->end_ms)
        last = o->end_ms;
    o->chunk_lo = o->next_ms;
    o->chunk_hi = last;
    o->next_ms = last + o->step_ms;
    o->tries = 0;
    return chunk_send(o, err, errlen);
}

/* The wait before a failed chunk's next try is over: send it, or end the
 * range (closing, or the try could not even be sent). */
static void on_retry_due(uv_timer_t *t)
{
    struct op *o = t->data;
    char err[200];
    o->waiting = false;
    int rc = -ECANCELED;
    snprintf(err, sizeof(err), "cancelled");
    if (!o->p->closing && (rc = chunk_send(o, err, sizeof(err))) == 0) {
        o->sr.retried++;
        return;
    }
    if (!o->sr.err) {
        o->sr.err = rc;
        snprintf(o->sr.why, sizeof(o->sr.why), "%s", err);
    }
    seed_finish(o);
}

/* Ask the chunk in flight again after a wait (a tenth of the timeout after
 * the first try, a fifth after the second). */
static void chunk_retry(struct op *o)
{
    struct promql *p = o->p;
    if (!o->wait) {
        o->wait = xmalloc(sizeof(*o->wait));
        uv_timer_init(p->loop, o->wait);
        o->wait->data = o;
    }
    int64_t ms = p->timeout_ms / RANGE_RETRY_WAIT_DIV * o->tries;
    o->waiting = true;
    uv_timer_start(o->wait, on_retry_due, (uint64_t)(ms > 0 ? ms : 1), 0);
}

/* Whether a failed chunk is worth asking again: no answer (a timeout, a
 * connection refused or dropped) or a server error (5xx), not a refusal of
 * the query (4xx) nor an answer too big. */
static bool chunk_retryable(int err, const struct httpc_resp *resp)
{
    if (err == -ECANCELED || err == -EMSGSIZE)
        return false;
    return err != 0 || resp->status >= 500;
}

/* Next chunk, or the end. Called from on_done (the loop) only. */
static void seed_step(struct op *o)
{
    struct promql *p = o->p;
    if (!o->sr.err && p->closing) {
        o->sr.err = -ECANCELED;
        snprintf(o->sr.why, sizeof(o->sr.why), "cancelled");
    }
    if (!o->sr.err && o->next_ms <= o->end_ms) {
        char err[200];
        int rc = seed_send(o, err, sizeof(err));
        if (rc == 0)
            return;
        o->sr.err = rc;
        snprintf(o->sr.why, sizeof(o->sr.why), "%s", err);
    }
    seed_finish(o);
}

int promql_seed(struct promql *p, const struct promql_target *t, int64_t now_ms,
                int64_t lookback_ms, int64_t step_ms, struct forecast *f, promql_seed_cb cb,
                void *arg, char *err, size_t errlen)
{
    char q[PROMQL_MAX_QUERY];
    if (errlen)
        err[0] = '\0';
    if (p->closing)
        return -ESHUTDOWN;
    if (!cb || !f || !t || !t->spec || lookback_ms <= 0 || step_ms < 0 || now_ms <= lookback_ms)
        return -EINVAL;
    if (step_ms == 0)
        step_ms = 60000;
    int rc = seed_query(p, t, q, err, errlen);
    if (rc != 0)
        return rc;
    struct op *o = xcalloc(1, sizeof(*o));
    o->p = p;
    o->is_seed = true;
    o->seed_cb = cb;
    o->arg = arg;
    o->f = f;
    o->query = xstrdup(q);
    o->step_ms = step_ms;
    o->end_ms = now_ms;
    o->next_ms = now_ms - lookback_ms;
    snprintf(o->ns, sizeof(o->ns), "%s", t->ns);
    snprintf(o->deploy, sizeof(o->deploy), "%s", t->deployment);
    rc = seed_send(o, err, errlen);
    if (rc < 0) {
        xfree(o->query);
        xfree(o);
        return rc;
    }
    op_link(o);
    return 0;
}

int promql_range(struct promql *p, const char *query, int64_t start_ms, int64_t end_ms,
                 int64_t step_ms, promql_range_cb cb, void *arg, char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    if (p->closing)
        return -ESHUTDOWN;
    if (!cb || !query || !*query || step_ms <= 0 || start_ms < 0 || start_ms >= end_ms) {
        snprintf(err, errlen, "a range query needs a query, a positive step and start < end");
        return -EINVAL;
    }
    if (strlen(query) >= PROMQL_MAX_QUERY) {
        snprintf(err, errlen, "the query is longer than %d bytes", PROMQL_MAX_QUERY - 1);
        return -EINVAL;
    }
    if ((end_ms - start_ms) / step_ms + 1 > PROMQL_MAX_RANGE_POINTS) {
        snprintf(err, errlen, "the range has more than %d steps", PROMQL_MAX_RANGE_POINTS);
        return -E2BIG;
    }
    struct op *o = xcalloc(1, sizeof(*o));
    o->p = p;
    o->is_seed = true;
    o->range_cb = cb;
    o->arg = arg;
    o->query = xstrdup(query);
    o->step_ms = step_ms;
    o->end_ms = end_ms;
    o->next_ms = start_ms;
    int rc = seed_send(o, err, errlen);
    if (rc < 0) {
        xfree(o->query);
        xfree(o);
        return rc;
    }
    op_link(o);
    return 0;
}

/* ---- close ----------------------------------------------------------------- */

static void maybe_free(struct promql *p)
{
    if (!p->closing || !p->closed || p->ops)
        return;
    promql_close_cb cb = p->close_cb;
    void *arg = p->close_arg;
    xfree(p->url);
    xfree(p->ca_file);
    xfree(p->cert_file);
    xfree(p->key_file);
    promql_auth_free(&p->auth);
    xfree(p->window);
    xfree(p);
    if (cb)
        cb(arg);
}

static void on_closer_closed(uv_handle_t *h)
{
    struct promql *p = util_container_of((uv_timer_t *)h, struct promql, closer);
    p->closed = true;
    maybe_free(p);
}

void promql_close(struct promql *p, promql_close_cb cb, void *arg)
{
    p->closing = true;
    p->close_cb = cb;
    p->close_arg = arg;
    for (struct op *o = p->ops; o; o = o->next) {
        for (size_t i = 0; i < UTIL_ARRAY_LEN(o->reqs); i++)
            if (o->reqs[i])
                httpc_cancel(o->reqs[i]);
        if (o->waiting) /* ends at the next loop turn, cancelled, as a request would */
            uv_timer_start(o->wait, on_retry_due, 0, 0);
    }
    uv_close((uv_handle_t *)&p->closer, on_closer_closed);
}

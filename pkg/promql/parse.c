/* SPDX-License-Identifier: Apache-2.0 */
/* promql/parse: validates a Prometheus HTTP API answer (/api/v1/query or
 * /api/v1/query_range) with jansson and turns it into one series of points.
 * Shapes (prometheus/docs/querying/api.md):
 *   {"status":"success","data":{"resultType":"vector","result":[
 *       {"metric":{...},"value":[<unix seconds>,"<float>"]}]}}
 *   scalar: "result":[<t>,"<v>"];  matrix: [{"metric":{},"values":[[t,"v"],...]}]
 *   {"status":"error","errorType":"bad_data","error":"..."}
 * The per-pod answer (promql_default_pods) is a vector of series told apart
 * by their gpuscaler_part and pod labels. Pure; the caller owns the result. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "promql.h"
#include "util/util.h"

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

void promql_series_free(struct promql_series *s)
{
    xfree(s->points);
    s->points = NULL;
    s->npoints = 0;
}

/* Prometheus formats sample values with Go's strconv: decimals, NaN, +Inf, -Inf. */
static int parse_value(const char *s, double *out)
{
    if (strcmp(s, "NaN") == 0) {
        *out = NAN;
        return 0;
    }
    if (strcmp(s, "+Inf") == 0 || strcmp(s, "Inf") == 0) {
        *out = INFINITY;
        return 0;
    }
    if (strcmp(s, "-Inf") == 0) {
        *out = -INFINITY;
        return 0;
    }
    return util_parse_double(s, out);
}

static int parse_pair(const json_t *pair, struct promql_point *pt, char *err, size_t errlen)
{
    if (!json_is_array(pair) || json_array_size(pair) != 2)
        return fail(err, errlen, -EBADMSG, "a sample is not a [time, \"value\"] pair");
    const json_t *t = json_array_get(pair, 0), *v = json_array_get(pair, 1);
    if (!json_is_number(t))
        return fail(err, errlen, -EBADMSG, "a sample time is not a number");
    double secs = json_number_value(t);
    /* 0 .. year 5138: anything else is not a time Prometheus sends */
    if (!isfinite(secs) || secs < 0 || secs > 1e11)
        return fail(err, errlen, -EBADMSG, "sample time %g out of range", secs);
    if (!json_is_string(v))
        return fail(err, errlen, -EBADMSG, "a sample value is not a string");
    if (parse_value(json_string_value(v), &pt->v) != 0)
        return fail(err, errlen, -EBADMSG, "sample value '%.40s' is not a number",
                    json_string_value(v));
    pt->t_ms = (int64_t)llround(secs * 1000.0);
    return 0;
}

/* The one series of a vector or matrix result. */
static int one_series(const json_t *result, const char *type, const json_t **series, char *err,
                      size_t errlen)
{
    if (!json_is_array(result))
        return fail(err, errlen, -EBADMSG, "%s result is not an array", type);
    size_t n = json_array_size(result);
    if (n == 0)
        return fail(err, errlen, -ENODATA, "the query returned no data");
    if (n > 1)
        return fail(err, errlen, -ERANGE,
                    "the query returned %zu series; it must aggregate to one (use sum)", n);
    *series = json_array_get(result, 0);
    if (!json_is_object(*series))
        return fail(err, errlen, -EBADMSG, "a series is not an object");
    const json_t *metric = json_object_get(*series, "metric");
    if (metric && !json_is_object(metric))
        return fail(err, errlen, -EBADMSG, "a series' metric is not an object");
    return 0;
}

static int parse_data(const json_t *data, struct promql_series *out, char *err, size_t errlen)
{
    if (!json_is_object(data))
        return fail(err, errlen, -EBADMSG, "no data object");
    const char *type = json_string_value(json_object_get(data, "resultType"));
    const json_t *result = json_object_get(data, "result");
    if (!type)
        return fail(err, errlen, -EBADMSG, "no resultType");
    if (!result)
        return fail(err, errlen, -EBADMSG, "no result");
    const json_t *series = NULL;
    int rc;
    if (strcmp(type, "scalar") == 0) {
        out->points = xmalloc(sizeof(*out->points));
        out->npoints = 1;
        return parse_pair(result, &out->points[0], err, errlen);
    }
    if (strcmp(type, "vector") == 0) {
        if ((rc = one_series(result, type, &series, err, errlen)) != 0)
            return rc;
        const json_t *value = json_object_get(series, "value");
        if (!value)
            return fail(err, errlen, -EBADMSG,
                        "the series has no float value (a native histogram?)");
        out->points = xmalloc(sizeof(*out->points));
        out->npoints = 1;
        return parse_pair(value, &out->points[0], err, errlen);
    }
    if (strcmp(type, "matrix") == 0) {
        if ((rc = one_series(result, type, &series, err, errlen)) != 0)
            return rc;
        out->range = true;
        const json_t *values = json_object_get(series, "values");
        if (!json_is_array(values))
            return fail(err, errlen, -EBADMSG,
                        "the series has no float values (a native histogram?)");
        size_t n = json_array_size(values);
        if (n > PROMQL_MAX_POINTS)
            return fail(err, errlen, -EBADMSG, "%zu points, more than %d", n, PROMQL_MAX_POINTS);
        out->points = xmalloc((n ? n : 1) * sizeof(*out->points));
        for (size_t i = 0; i < n; i++) {
            if ((rc = parse_pair(json_array_get(values, i), &out->points[i], err, errlen)) != 0)
                return rc;
            if (i > 0 && out->points[i].t_ms <= out->points[i - 1].t_ms)
                return fail(err, errlen, -EBADMSG, "sample times are not increasing");
            out->npoints = i + 1;
        }
        if (n == 0)
            return fail(err, errlen, -ENODATA, "the query returned no data");
        return 0;
    }
    return fail(err, errlen, -EBADMSG, "result type '%.20s' is not vector, scalar or matrix",
                type);
}

/* The answer's envelope: status "success" (an "error" answer's errorType and
 * error go to err), not partial; *data is root's "data", borrowed. */
static int envelope(const json_t *root, const json_t **data, char *err, size_t errlen)
{
    const char *status = json_string_value(json_object_get(root, "status"));
    if (!json_is_object(root) || !status)
        return fail(err, errlen, -EBADMSG, "not a Prometheus API answer (no status)");
    if (strcmp(status, "error") == 0) {
        const char *et = json_string_value(json_object_get(root, "errorType"));
        const char *e = json_string_value(json_object_get(root, "error"));
        return fail(err, errlen, -EREMOTEIO, "prometheus error (%.32s): %.150s", et ? et : "?",
                    e ? e : "no message");
    }
    if (strcmp(status, "success") != 0)
        return fail(err, errlen, -EBADMSG, "status '%.20s' is not success or error", status);
    /* VictoriaMetrics: some storage nodes did not answer, so a sum covers
     * fewer pods than there are; a rate that low must not scale in */
    if (json_is_true(json_object_get(root, "isPartial")))
        return fail(err, errlen, -EREMOTEIO, "partial response (isPartial): some storage nodes "
                                             "did not answer");
    *data = json_object_get(root, "data");
    return 0;
}

/* Parse body and check its envelope: *root (NULL when not JSON) for the
 * caller to release, *data borrowed from it. */
static int open_answer(const char *body, size_t len, json_t **root, const json_t **data,
                       char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    *data = NULL;
    json_error_t je;
    /* Go's encoder writes a NUL byte in a label value as \u0000 */
    *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!*root)
        return fail(err, errlen, -EBADMSG, "not JSON (line %d column %d: %.80s)", je.line,
                    je.column, je.text);
    return envelope(*root, data, err, errlen);
}

int promql_parse_response(const char *body, size_t len, struct promql_series *out, char *err,
                          size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_t *root;
    const json_t *data;
    int rc = open_answer(body, len, &root, &data, err, errlen);
    if (rc == 0)
        rc = parse_data(data, out, err, errlen);
    json_decref(root);
    if (rc != 0)
        promql_series_free(out);
    return rc;
}

/* ---- the per-pod answer ------------------------------------------------------ */

void promql_pods_free(struct promql_pods *p)
{
    for (size_t i = 0; i < p->n; i++)
        xfree(p->v[i].name);
    xfree(p->v);
    memset(p, 0, sizeof(*p));
}

static int pod_cmp(const void *a, const void *b)
{
    return strcmp(((const struct promql_pod *)a)->name, ((const struct promql_pod *)b)->name);
}

/* One series of the per-pod answer into out->v[out->n] (not yet merged). A
 * series without the part or pod label, of another part, or whose gauge is
 * not a finite count >= 0 says nothing about a pod: skipped. */
static int pod_series(const json_t *series, struct promql_pods *out, char *err, size_t errlen)
{
    if (!json_is_object(series))
        return fail(err, errlen, -EBADMSG, "a series is not an object");
    const json_t *metric = json_object_get(series, "metric");
    if (!json_is_object(metric))
        return fail(err, errlen, -EBADMSG, "a series has no metric object");
    const json_t *value = json_object_get(series, "value");
    if (!value)
        return fail(err, errlen, -EBADMSG, "the series has no float value (a native histogram?)");
    struct promql_point pt;
    int rc = parse_pair(value, &pt, err, errlen);
    if (rc != 0)
        return rc;
    const char *part = json_string_value(json_object_get(metric, PROMQL_PART_LABEL));
    const char *pod = json_string_value(json_object_get(metric, "pod"));
    if (!part || !pod || !*pod || strlen(pod) > 253)
        return 0;
    struct promql_pod p = {.running = NAN, .waiting = NAN, .requests = NAN, .refused = NAN};
    bool gauge = isfinite(pt.v) && pt.v >= 0;
    if (strcmp(part, "running") == 0 && gauge)
        p.running = pt.v;
    else if (strcmp(part, "waiting") == 0 && gauge)
        p.waiting = pt.v;
    else if (strcmp(part, "counted") == 0)
        p.counted = true;
    else if (strcmp(part, "requests") == 0 && gauge)
        p.requests = pt.v;
    else if (strcmp(part, "refused") == 0 && gauge)
        p.refused = pt.v;
    else if (strcmp(part, "at") == 0 && isfinite(pt.v) && pt.v > 0 && pt.v <= 1e11)
        p.at_ms = (int64_t)llround(pt.v * 1000.0);
    else if (strcmp(part, "at_min") == 0 && isfinite(pt.v) && pt.v > 0 && pt.v <= 1e11)
        p.at_min_ms = (int64_t)llround(pt.v * 1000.0);
    else if (strcmp(part, "samples") == 0 && isfinite(pt.v) && pt.v >= 1 && pt.v <= 1e9)
        p.samples = floor(pt.v);
    else if (strcmp(part, "before") == 0 && isfinite(pt.v) && pt.v > 0 && pt.v <= 1e11)
        p.before_ms = (int64_t)llround(pt.v * 1000.0);
    else if (strcmp(part, "dup") == 0 && isfinite(pt.v) && pt.v >= 1 && pt.v <= 1e6)
        p.dup = (int)pt.v;
    else
        return 0;
    p.name = xstrdup(pod);
    out->v[out->n++] = p;
    return 0;
}

/* Merge the entries of one pod (sorted by name) into one. */
static void pods_merge(struct promql_pods *out)
{
    if (out->n == 0)
        return;
    qsort(out->v, out->n, sizeof(out->v[0]), pod_cmp);
    size_t k = 0;
    for (size_t i = 1; i < out->n; i++) {
        struct promql_pod *a = &out->v[k], *b = &out->v[i];
        if (strcmp(a->name, b->name) != 0) {
            out->v[++k] = *b;
            continue;
        }
        /* one pod, two entries: Prometheus sends one series per part and
         * pod; should it send two, the sum is what the pod holds */
        if (!isnan(b->running))
            a->running = isnan(a->running) ? b->running : a->running + b->running;
        if (!isnan(b->waiting))
            a->waiting = isnan(a->waiting) ? b->waiting : a->waiting + b->waiting;
        if (!isnan(b->requests))
            a->requests = isnan(a->requests) ? b->requests : a->requests + b->requests;
        if (!isnan(b->refused))
            a->refused = isnan(a->refused) ? b->refused : a->refused + b->refused;
        a->at_ms = b->at_ms > a->at_ms ? b->at_ms : a->at_ms;
        if (b->at_min_ms > 0 && (a->at_min_ms == 0 || b->at_min_ms < a->at_min_ms))
            a->at_min_ms = b->at_min_ms;
        a->samples = b->samples > a->samples ? b->samples : a->samples;
        a->before_ms = b->before_ms > a->before_ms ? b->before_ms : a->before_ms;
        a->dup = b->dup > a->dup ? b->dup : a->dup;
        if (!isfinite(a->running))
            a->running = NAN; /* two sums past a double's range: unknown */
        if (!isfinite(a->waiting))
            a->waiting = NAN;
        if (!isfinite(a->requests))
            a->requests = NAN;
        if (!isfinite(a->refused))
            a->refused = NAN;
        a->counted = a->counted || b->counted;
        xfree(b->name);
    }
    out->n = k + 1;
    for (size_t i = 0; i < out->n; i++) {
        out->running_seen = out->running_seen || !isnan(out->v[i].running);
        out->waiting_seen = out->waiting_seen || !isnan(out->v[i].waiting);
        out->counted_seen = out->counted_seen || out->v[i].counted;
    }
}

int promql_parse_pods(const char *body, size_t len, struct promql_pods *out, char *err,
                      size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_t *root;
    const json_t *data, *result = NULL;
    int rc = open_answer(body, len, &root, &data, err, errlen);
    if (rc == 0) {
        const char *type = json_string_value(json_object_get(data, "resultType"));
        result = json_object_get(data, "result");
        if (!json_is_object(data) || !type || !result)
            rc = fail(err, errlen, -EBADMSG, "no data object with resultType and result");
        else if (strcmp(type, "vector") != 0 || !json_is_array(result))
            rc = fail(err, errlen, -EBADMSG, "result type '%.20s' is not a vector", type);
        else if (json_array_size(result) > PROMQL_MAX_POINTS)
            rc = fail(err, errlen, -EBADMSG, "%zu series, more than %d",
                      json_array_size(result), PROMQL_MAX_POINTS);
    }
    if (rc == 0) {
        size_t n = json_array_size(result);
        out->v = xmalloc((n ? n : 1) * sizeof(*out->v));
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = pod_series(json_array_get(result, i), out, err, errlen);
    }
    json_decref(root);
    if (rc != 0)
        promql_pods_free(out);
    else
        pods_merge(out);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* promql/template: the default PromQL per profile and the expansion of
 * {{namespace}}, {{deployment}}, {{pods}} and {{window}} for one workload.
 *
 * Defaults assume what kube-prometheus (prometheus-operator PodMonitor or
 * ServiceMonitor) puts on every series: the target's `namespace` and `pod`
 * labels. There is no `deployment` label, so a Deployment's series are
 * selected by a pod-name regex that matches exactly its pods
 * (<deployment>-<pod-template-hash>-<suffix>), not those of a Deployment
 * whose name merely starts the same. A metric annotation's own label
 * matchers (`nv_inference_request_success{model="a"}`) join those two. Pure. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "promql.h"
#include "scrape/scrape.h"
#include "util/util.h"

#define PODS "namespace=\"{{namespace}}\",pod=~\"{{pods}}\""

/* s quoted for PromQL, at the end of out (truncated as snprintf would). */
static void append_quoted(char *out, size_t outlen, const char *s)
{
    size_t n = strlen(out);
    if (n + 1 >= outlen)
        return;
    char *p = out + n, *end = out + outlen - 1;
    *p++ = '"';
    for (; *s && p < end; s++) {
        const char *e = *s == '"' ? "\\\"" : *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : NULL;
        if (e) {
            if (end - p < 2)
                break;
            *p++ = e[0];
            *p++ = e[1];
        } else {
            *p++ = *s;
        }
    }
    if (p < end)
        *p++ = '"';
    *p = '\0';
}

static bool legacy_label(const char *s)
{
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
        return false;
    return s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")] == 0;
}

/* [a-zA-Z_:][a-zA-Z0-9_:]*, a name PromQL reads bare */
static bool legacy_metric(const char *s)
{
    if (!(*s == '_' || *s == ':' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
        return false;
    return s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:")] == 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A metric field (a name, maybe with matchers, validated as
 * scrape_selector_parse does) as the selector of the workload's series,
 * written back from its parse: the name and suffix (quoted inside the
 * braces if it is not a legacy name, Prometheus 3's UTF-8 names), the pods'
 * matchers, then the field's own, each value quoted again (a `\'` inside
 * double quotes, which the field may hold, is no PromQL escape). */
static void selector(const char *field, const char *suffix, char *out, size_t outlen)
{
    struct scrape_selector sel;
    if (scrape_selector_parse(field, &sel, NULL, 0) != 0) {
        /* refused when the annotations were read: not expected here; as
         * written, so that Prometheus says what is wrong with it */
        snprintf(out, outlen, "%s", field);
        return;
    }
    char name[sizeof(sel.name) + 16];
    snprintf(name, sizeof(name), "%s%s", sel.name, suffix);
    if (legacy_metric(name)) {
        snprintf(out, outlen, "%s{" PODS, name);
    } else {
        snprintf(out, outlen, "{");
        append_quoted(out, outlen, name);
        size_t n = strlen(out);
        snprintf(out + n, outlen - n, ",%s", PODS);
    }
    for (size_t i = 0; i < sel.n; i++) {
        const struct scrape_matcher *m = &sel.m[i];
        size_t n = strlen(out);
        snprintf(out + n, outlen - n, ",");
        if (legacy_label(m->label)) {
            n = strlen(out);
            snprintf(out + n, outlen - n, "%s", m->label);
        } else {
            append_quoted(out, outlen, m->label);
        }
        n = strlen(out);
        snprintf(out + n, outlen - n, "%s", m->negate ? (m->regex ? "!~" : "!=")
                                                      : (m->regex ? "=~" : "="));
        append_quoted(out, outlen, m->value);
    }
    size_t n = strlen(out);
    snprintf(out + n, outlen - n, "}");
}

/* Is field a counter an annotation named by its family name, to be asked
 * for under both names, as the scraper finds it? Prometheus stores an
 * OpenMetrics counter `x`, and the 0.0.4 format's `x_total`, as `x_total`.
 * Not the profiles' own names, whose exposition the profile knows, nor a
 * `_total`, `_sum` or `_count` name, nor one PromQL does not read bare. */
static bool family_named(const struct scrape_spec *spec, const char *field)
{
    struct scrape_spec def;
    scrape_spec_init(&def, spec->profile);
    char name[SCRAPE_METRIC_MAX + 8], req[SCRAPE_METRIC_MAX + 8], busy[SCRAPE_METRIC_MAX + 8],
        rej[SCRAPE_METRIC_MAX + 8];
    scrape_metric_name(field, name, sizeof(name));
    scrape_metric_name(def.request_metric, req, sizeof(req));
    scrape_metric_name(def.busy_metric, busy, sizeof(busy));
    scrape_metric_name(def.rejected_metric, rej, sizeof(rej));
    return strcmp(name, req) != 0 && strcmp(name, busy) != 0 && strcmp(name, rej) != 0 &&
           legacy_metric(name) &&
           !ends_with(name, "_total") && !ends_with(name, "_sum") && !ends_with(name, "_count");
}

/* open + the selector of counter field + close: for one named by its family
 * name, `open x_total{...} close or open x{...} close`, which takes `x` only
 * where no `x_total` of the same labels is (the `x_total` of a counter where
 * a pod has a gauge `x` too; a regex on __name__ made rate() and timestamp()
 * fail on the two series it found, "vector cannot contain metrics with the
 * same labelset", and added the gauge to a sum). The caller encloses it. */
static void counter_expr(const struct scrape_spec *spec, const char *field, const char *open,
                         const char *close, char *out, size_t outlen)
{
    char a[PROMQL_MAX_QUERY], b[PROMQL_MAX_QUERY];
    if (!family_named(spec, field)) {
        selector(field, "", a, sizeof(a));
        snprintf(out, outlen, "%s%s%s", open, a, close);
        return;
    }
    selector(field, "_total", a, sizeof(a));
    selector(field, "", b, sizeof(b));
    struct util_buf e = {0};
    util_buf_printf(&e, "%s%s%s or %s%s%s", open, a, close, open, b, close);
    snprintf(out, outlen, "%s", e.data);
    util_buf_free(&e);
}

/* Unit of a latency metric from its name: seconds unless it says ms or us
 * (the same rule as the scraper's). */
static double seconds_per_unit(const char *metric)
{
    char name[SCRAPE_METRIC_MAX + 8];
    scrape_metric_name(metric, name, sizeof(name));
    size_t n = strlen(name);
    static const struct {
        const char *suffix;
        double s;
    } units[] = {{"_milliseconds", 1e-3}, {"_ms", 1e-3}, {"_microseconds", 1e-6}, {"_us", 1e-6}};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(units); i++) {
        size_t sl = strlen(units[i].suffix);
        if (n >= sl && strncmp(name + n - sl, units[i].suffix, sl) == 0)
            return units[i].s;
    }
    return 1;
}

/* e with PROMQL_KEY_LABEL added: the series' container where `instance` is
 * not an address (relabelled to the pod's name, or dropped), under which two
 * containers serving their own counters are two; absent where it is one
 * (host:port, [v6]:port), which only one container of a pod can listen on,
 * whatever `container` each target names. A label added keeps every series
 * apart, where clearing `container` could make two alike, an error. */
static void keyed(struct util_buf *b, const char *e)
{
    util_buf_printf(b,
                    "label_replace(label_replace(%s, \"" PROMQL_KEY_LABEL "\", \"$1\", "
                    "\"container\", \"(.+)\"), \"" PROMQL_KEY_LABEL "\", \"\", \"instance\", "
                    "\"[^:]+:[0-9]+|\\\\[.+\\\\]:[0-9]+\")",
                    e);
}

/* e, each of a pod's addresses counted once: an address (`instance`) more
 * than one scrape target has (a PodMonitor beside a ServiceMonitor, a
 * Service and its headless twin, an annotation scrape job beside a monitor:
 * series apart only in job, service, endpoint or container) has each series
 * once per target, so the sum over each target's series, and the largest of
 * those a pod's address has (its address and container, where `instance`
 * is no address: keyed). One target an address: e as it is. */
static void dedup(const char *e, char *out, size_t outlen)
{
    struct util_buf in = {0}, b = {0};
    util_buf_printf(&in, "sum by (pod, instance, container, job, service, endpoint) (%s)", e);
    util_buf_puts(&b, "max by (pod, instance, " PROMQL_KEY_LABEL ") (");
    keyed(&b, in.data);
    util_buf_puts(&b, ")");
    snprintf(out, outlen, "%s", b.data);
    util_buf_free(&in);
    util_buf_free(&b);
}

/* sum(rate(<counter field>[{{window}}])), each address once (dedup), or ""
 * when the field names none. */
static void sum_rate(const struct scrape_spec *spec, const char *field, char *out, size_t outlen)
{
    if (!field[0]) {
        snprintf(out, outlen, "%s", "");
        return;
    }
    char e[PROMQL_MAX_QUERY], d[PROMQL_MAX_QUERY];
    counter_expr(spec, field, "rate(", "[{{window}}])", e, sizeof(e));
    dedup(e, d, sizeof(d));
    snprintf(out, outlen, "sum(%s)", d);
}

void promql_default_rate(const struct scrape_spec *spec, char *out, size_t outlen)
{
    sum_rate(spec, spec->request_metric, out, outlen);
}

void promql_default_refused(const struct scrape_spec *spec, char *out, size_t outlen)
{
    sum_rate(spec, spec->rejected_metric, out, outlen);
}

void promql_default_p99(const struct scrape_spec *spec, char *out, size_t outlen)
{
    if (!spec->latency_metric[0]) {
        snprintf(out, outlen, "%s", "");
        return;
    }
    double f = seconds_per_unit(spec->latency_metric);
    char s[PROMQL_MAX_QUERY];
    selector(spec->latency_metric, "_bucket", s, sizeof(s));
    if (f == 1)
        snprintf(out, outlen, "histogram_quantile(0.99, sum by (le) (rate(%s[{{window}}])))", s);
    else
        snprintf(out, outlen,
                 "histogram_quantile(0.99, sum by (le) (rate(%s[{{window}}]))) * %g", s, f);
}

void promql_default_busy(const struct scrape_spec *spec, char *out, size_t outlen)
{
    const char *b = spec->busy_metric, *r = spec->request_metric;
    if (!b[0]) {
        snprintf(out, outlen, "%s", "");
        return;
    }
    char scale[32] = "";
    double f = seconds_per_unit(b);
    if (f != 1)
        snprintf(scale, sizeof(scale), " * %g", f);
    char e[PROMQL_MAX_QUERY], be[PROMQL_MAX_QUERY], bs[PROMQL_MAX_QUERY], rs[PROMQL_MAX_QUERY];
    counter_expr(spec, b, "rate(", "[{{window}}])", e, sizeof(e));
    dedup(e, be, sizeof(be));
    if (!r[0]) {
        snprintf(out, outlen, "sum(%s)%s", be, scale);
        return;
    }
    counter_expr(spec, b, "", "", bs, sizeof(bs));
    counter_expr(spec, r, "", "", rs, sizeof(rs));
    /* Only when every pod with the request counter has the busy counter too:
     * a sum over fewer pods would understate the requests in service. */
    snprintf(out, outlen,
             "(sum(%s)%s) and on() (count(count by (pod) (%s)) == count(count by (pod) (%s)))",
             be, scale, bs, rs);
}

void promql_default_pods(const struct scrape_spec *spec, bool with_counted, char *out,
                         size_t outlen)
{
    char e[PROMQL_MAX_QUERY], part[PROMQL_MAX_QUERY + 128];
    struct util_buf b = {0};
    const char *req = with_counted ? spec->request_metric : "";
    const char *rej = with_counted ? spec->rejected_metric : "";
    const struct {
        const char *metric, *name, *agg, *open, *close;
        bool counter;
    } parts[] = {
        {spec->inflight_metric, "running", "sum", "", "", false},
        {spec->queue_metric, "waiting", "sum", "", "", false},
        {req, "counted", "count", "rate(", "[{{window}}])", true},
        {req, "requests", "sum", "", "", true},
        {req, "at", "max", "timestamp(", ")", true},
        {req, "at_min", "min", "timestamp(", ")", true},
        {req, "samples", "max", "count_over_time(", "[{{window}}])", true},
        {req, "before", "max", "timestamp(", " offset {{window}})", true},
        {req, "dup", "count", "", "", true}, /* its own shape: below */
        {rej, "refused", "sum", "", "", true},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(parts); i++) {
        if (!parts[i].metric[0])
            continue;
        if (parts[i].counter) {
            counter_expr(spec, parts[i].metric, parts[i].open, parts[i].close, e, sizeof(e));
        } else {
            char sel[PROMQL_MAX_QUERY];
            selector(parts[i].metric, "", sel, sizeof(sel));
            snprintf(e, sizeof(e), "%s%s%s", parts[i].open, sel, parts[i].close);
        }
        if (strcmp(parts[i].agg, "sum") == 0) { /* a value: each address once */
            char d[PROMQL_MAX_QUERY];
            dedup(e, d, sizeof(d));
            snprintf(e, sizeof(e), "%s", d);
        } else if (strcmp(parts[i].name, "dup") == 0) {
            /* a pod's keys (dedup's) with more than one target; or its `instance`s (an
             * address, else what stands for one) with more than one job, where two
             * containers' targets under one relabelled `instance` name no container on
             * one side (an annotation job beside a monitor): two keys, counted twice */
            struct util_buf k = {0};
            util_buf_puts(&k, "(count by (pod, instance, " PROMQL_KEY_LABEL ") (count by (pod, "
                              "instance, " PROMQL_KEY_LABEL ", container, job, service, endpoint) (");
            keyed(&k, e);
            util_buf_printf(&k, ")) > 1) or on (pod, instance) (count by (pod, instance) (count by "
                                "(pod, instance, job) (%s)) > 1)", e);
            snprintf(e, sizeof(e), "%s", k.data);
            util_buf_free(&k);
        }
        snprintf(part, sizeof(part),
                 "%slabel_replace(%s by (pod) (%s), \"" PROMQL_PART_LABEL "\", \"%s\", "
                 "\"\", \"\")",
                 b.len ? " or " : "", parts[i].agg, e, parts[i].name);
        util_buf_puts(&b, part);
    }
    snprintf(out, outlen, "%s", b.len ? b.data : "");
    util_buf_free(&b);
}

static bool dns1123(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
            return false;
    return true;
}

int64_t promql_duration_ms(const char *s)
{
    /* longest first: each unit at most once, in this order (Prometheus' own
     * rule: 1m30s, not 30s1m) */
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"y", 365 * 86400000LL}, {"w", 7 * 86400000LL}, {"d", 86400000}, {"h", 3600000},
                 {"ms", 1},               {"m", 60000},          {"s", 1000}};
    static const int order[] = {0, 1, 2, 3, 6, 4, 5}; /* ms after m and s */
    if (!s || !*s)
        return -1;
    int64_t total = 0;
    int last = -1;
    while (*s) {
        if (*s < '0' || *s > '9')
            return -1;
        int64_t n = 0;
        for (; *s >= '0' && *s <= '9'; s++)
            if ((n = n * 10 + (*s - '0')) > PROMQL_DURATION_MAX_MS)
                return -1;
        size_t u = 0;
        while (u < UTIL_ARRAY_LEN(units) && strncmp(s, units[u].unit, strlen(units[u].unit)) != 0)
            u++;
        if (u == UTIL_ARRAY_LEN(units) || order[u] <= last)
            return -1;
        last = order[u];
        s += strlen(units[u].unit);
        if (n > (PROMQL_DURATION_MAX_MS - total) / units[u].ms)
            return -1;
        total += n * units[u].ms;
    }
    return total;
}

/* A PromQL duration a window can be: more than 0. */
static bool duration_ok(const char *s)
{
    return promql_duration_ms(s) > 0;
}

struct out {
    char *p;
    size_t len, cap;
    bool overflow;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->len + n >= o->cap) {
        o->overflow = true;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

/* Inside a PromQL double-quoted string; regex: also escape regex specials. */
static void put_escaped(struct out *o, const char *s, bool regex)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            put(o, "\\", 1);
        else if (regex && strchr(".+*?()[]{}|^$", *s))
            put(o, "\\\\", 2); /* a backslash in the string, escaping in the regex */
        put(o, s, 1);
    }
}

/* The regex of a Deployment's pods, as the ReplicaSet controller names them:
 * generateName "<deployment>-<pod-template-hash>-" cut to 58 bytes, then 5
 * random characters (apiserver storage/names), the hash and the characters
 * from rand.SafeEncodeString's alphabet. Up to 46 bytes of name nothing is
 * cut; longer, the cut may take the second '-' and part of the hash; from 58
 * bytes on, the pod is the name's first 58 bytes and the 5 characters. */
static void put_pods(struct out *o, const char *deploy)
{
#define POD_CH "[bcdfghjklmnpqrstvwxz2456789]"
    static const char whole[] = "-" POD_CH "{1,10}-" POD_CH "{5}";
    static const char cut[] = "-(" POD_CH "{1,10}-?)?" POD_CH "{5}";
    static const char rand5[] = POD_CH "{5}";
#undef POD_CH
    size_t n = strlen(deploy);
    if (n >= 58) {
        char head[59];
        memcpy(head, deploy, 58);
        head[58] = '\0';
        put_escaped(o, head, true);
        put(o, rand5, sizeof(rand5) - 1);
        return;
    }
    put_escaped(o, deploy, true);
    if (n <= 46)
        put(o, whole, sizeof(whole) - 1);
    else
        put(o, cut, sizeof(cut) - 1);
}

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

int promql_expand(const char *tmpl, const char *ns, const char *deploy, const char *window,
                  char *out, size_t outlen, char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    if (outlen)
        out[0] = '\0';
    if (!tmpl || !*tmpl)
        return fail(err, errlen, -EINVAL, "empty PromQL template");
    if (!ns || !dns1123(ns))
        return fail(err, errlen, -EINVAL, "namespace '%.64s' is not a DNS-1123 name",
                    ns ? ns : "");
    if (!deploy || !dns1123(deploy))
        return fail(err, errlen, -EINVAL, "deployment '%.64s' is not a DNS-1123 name",
                    deploy ? deploy : "");
    if (!duration_ok(window))
        return fail(err, errlen, -EINVAL, "window '%.32s' is not a PromQL duration",
                    window ? window : "");
    if (outlen == 0)
        return fail(err, errlen, -ENAMETOOLONG, "no room for the query");
    struct out o = {out, 0, outlen, false};
    const char *s = tmpl;
    while (*s) {
        const char *open = strstr(s, "{{");
        if (!open) {
            put(&o, s, strlen(s));
            break;
        }
        put(&o, s, (size_t)(open - s));
        const char *close = strstr(open + 2, "}}");
        if (!close) {
            out[0] = '\0';
            return fail(err, errlen, -EINVAL, "unclosed {{ at offset %zu", (size_t)(open - tmpl));
        }
        size_t n = (size_t)(close - open - 2);
        const char *name = open + 2;
        if (n == 9 && strncmp(name, "namespace", n) == 0) {
            put_escaped(&o, ns, false);
        } else if (n == 10 && strncmp(name, "deployment", n) == 0) {
            put_escaped(&o, deploy, false);
        } else if (n == 4 && strncmp(name, "pods", n) == 0) {
            put_pods(&o, deploy);
        } else if (n == 6 && strncmp(name, "window", n) == 0) {
            put(&o, window, strlen(window));
        } else {
            out[0] = '\0';
            return fail(err, errlen, -EINVAL, "unknown placeholder {{%.*s}}", (int)UTIL_MIN(n, 32),
                        name);
        }
        s = close + 2;
    }
    if (o.overflow) {
        out[0] = '\0';
        return fail(err, errlen, -ENAMETOOLONG, "expanded query longer than %zu bytes",
                    outlen - 1);
    }
    return 0;
}

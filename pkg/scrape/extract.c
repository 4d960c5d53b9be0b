/* SPDX-License-Identifier: Apache-2.0 */
/* scrape/extract: turns one pod's Prometheus exposition into the few numbers
 * the autoscaler needs (request counter, in-flight and queue gauges, latency
 * histogram buckets, the busy-time counter, the refused requests' counter,
 * and with demand-unit tokens the prompt and generation token counters),
 * each summed over its label sets (those its label matchers select, when
 * the annotation names some).
 *
 * The body is pushed through prom's streaming parser as it arrives (in the
 * format the caller picked from the response's Content-Type), filtered
 * on the wanted names so the thousands of other lines of a vLLM exposition
 * take the parser's fast path. Values are staged in struct scrape_sample and
 * only used once the whole body parsed (prom delivers samples before a later
 * bad line is found). Pure: no I/O, no clock. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "scrape-int.h"
#include "util/util.h"

/* A name no exposition carries: keeps the filter non-empty when a spec names
 * no metric at all (an empty filter would deliver every sample). */
#define NOTHING_WANTED "gpuscaler_scrape_nothing_wanted_"

static int fail(struct scrape_extract *x, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct scrape_extract *x, int code, const char *fmt, ...)
{
    if (x->err)
        return x->err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->errmsg, sizeof(x->errmsg), fmt, ap);
    va_end(ap);
    x->err = code;
    return code;
}

/* The sample is the selector's metric: its own name, or (when the name is
 * the family's) the family's plain or _total sample, never _created; and its
 * labels are those the matchers select. */
/* Is s's name the counter family's own name plus "_total"? In the 0.0.4
 * text format a counter family is named with its suffix (`x_total`), where
 * OpenMetrics names it `x`: a counter given by its family name is found in
 * both. */
static bool total_of(const struct prom_sample *s, const char *metric)
{
    size_t n = strlen(metric);
    return s->type == PROM_COUNTER && s->name_len == n + 6 &&
           strncmp(s->name, metric, n) == 0 && strcmp(s->name + n, "_total") == 0;
}

static bool is_metric(const struct prom_sample *s, const struct scrape_selector *sel)
{
    const char *metric = sel->name;
    if (!metric[0])
        return false;
    if (strcmp(s->name, metric) != 0 &&
        !(strcmp(s->family, metric) == 0 &&
          (s->suffix == PROM_SUFFIX_NONE || s->suffix == PROM_SUFFIX_TOTAL)) &&
        !total_of(s, metric))
        return false;
    return scrape_selector_match(sel, s);
}

/* FNV-1a 64 over n bytes, on from h. */
static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

/* splitmix64's finalizer: a label's hash spread over all 64 bits before the
 * labels' hashes are added up. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A series' fingerprint: its name and every label but skip. Each label is
 * hashed alone (a separator byte between name and value, so "ab","c" is not
 * "a","bc") and the labels' hashes are added, so that an exporter's label
 * order does not make it another series, in time linear in the labels
 * however many a line has (Prometheus sets no limit by default). A label
 * with an empty value is no label, as Prometheus' scrape drops it
 * (labels.Builder): `x{a=""}` and `x` are one series. */
static uint64_t series_id(const struct prom_sample *ps, const char *skip)
{
    uint64_t h = fnv(1469598103934665603ULL, ps->name, strlen(ps->name));
    size_t skip_len = skip ? strlen(skip) : 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < ps->nlabels; i++) {
        const struct prom_label *l = &ps->labels[i];
        if (l->value_len == 0 ||
            (skip && l->name_len == skip_len && memcmp(l->name, skip, skip_len) == 0))
            continue;
        uint64_t lh = fnv(fnv(1469598103934665603ULL, l->name, l->name_len), "\xfe", 1);
        sum += mix64(fnv(lh, l->value, l->value_len));
    }
    return fnv(h, (const char *)&sum, sizeof(sum));
}

/* Count a counter's sample in its series set; false when the series was in
 * this exposition already (a repeated line counts once, as a TSDB keeps one
 * sample per series and scrape). */
static bool add_series(struct scrape_series_set *set, const struct prom_sample *ps)
{
    uint64_t id = series_id(ps, NULL);
    for (uint16_t i = 0; i < set->n; i++)
        if (set->id[i] == id)
            return false;
    if (set->n == SCRAPE_MAX_SERIES) {
        set->overflow = true;
        return true;
    }
    set->id[set->n] = id;
    set->v[set->n++] = ps->value;
    return true;
}

/* Add a bucket sample of series hid (its labels but le) at bound le: to
 * the sums, and to its series' row while there are at most
 * SCRAPE_MAX_HSERIES. A new bound shifts every row's later counts. */
static void add_bucket(struct scrape_sample *s, double le, double v, uint64_t hid)
{
    size_t i = 0;
    while (i < s->nbuckets && s->le[i] < le)
        i++;
    if (i == s->nbuckets || s->le[i] != le) {
        if (s->nbuckets == SCRAPE_MAX_BUCKETS) {
            s->hist_dropped = true;
            return;
        }
        size_t tail = s->nbuckets - i;
        memmove(&s->le[i + 1], &s->le[i], tail * sizeof(s->le[0]));
        memmove(&s->count[i + 1], &s->count[i], tail * sizeof(s->count[0]));
        memmove(&s->hsum_n[i + 1], &s->hsum_n[i], tail * sizeof(s->hsum_n[0]));
        memmove(&s->hsum_ids[i + 1], &s->hsum_ids[i], tail * sizeof(s->hsum_ids[0]));
        for (size_t k = 0; k < s->hser_n; k++) {
            memmove(&s->hser_count[k][i + 1], &s->hser_count[k][i], tail * sizeof(double));
            s->hser_count[k][i] = 0;
            uint64_t m = s->hser_has[k], low = m & ((UINT64_C(1) << i) - 1);
            s->hser_has[k] = low | (i + 1 < 64 ? (m >> i) << (i + 1) : 0); /* i: absent */
        }
        s->le[i] = le;
        s->count[i] = 0;
        s->hsum_n[i] = 0;
        s->hsum_ids[i] = 0;
        s->nbuckets++;
    }
    /* a repeated line counts once, as for the counters (where the series are
     * no longer followed one by one, it cannot be told and adds) */
    for (size_t k = 0; !s->hser_overflow && k < s->hser_n; k++)
        if (s->hser_id[k] == hid && (s->hser_has[k] >> i & 1))
            return;
    s->count[i] += v;
    if (s->hsum_n[i] < UINT16_MAX)
        s->hsum_n[i]++;
    s->hsum_ids[i] += mix64(hid);
    if (s->hser_overflow)
        return;
    size_t k = 0;
    while (k < s->hser_n && s->hser_id[k] != hid)
        k++;
    if (k == s->hser_n) {
        if (k == SCRAPE_MAX_HSERIES) {
            s->hser_overflow = true;
            return;
        }
        s->hser_id[k] = hid;
        s->hser_has[k] = 0;
        memset(s->hser_count[k], 0, sizeof(s->hser_count[k]));
        s->hser_n++;
    }
    s->hser_count[k][i] += v;
    s->hser_has[k] |= UINT64_C(1) << i;
}

/* A counter's value is a count: 0 to SCRAPE_COUNT_MAX (NaN, infinite,
 * negative or past 2^53, no rate can be taken from it). */
static bool is_count(double v)
{
    return v >= 0 && v < SCRAPE_COUNT_MAX;
}

/* Adds a series' count to its metric's sum; false when the sum is no count
 * either (series each below 2^53 whose sum is not). */
static bool add_count(double *sum, double v)
{
    *sum += v;
    return *sum < SCRAPE_COUNT_MAX;
}

static int sum_fail(struct scrape_extract *x, const struct prom_sample *ps)
{
    return fail(x, -EBADMSG, "line %zu: counter %s: its series sum to 2^53 or more", ps->line,
                ps->name);
}

/* Whether a gauge's sample counts: once per series (a repeated line is one
 * sample, as for the counters), and only a number. Prometheus stores a NaN
 * or infinite gauge as it is; as requests in flight it means nothing, so
 * that series is left out (the gauge unknown if it is the only one) rather
 * than failing the pod's scrape. k: 0 in flight, 1 queue. */
static bool gauge_counts(struct scrape_extract *x, int k, const struct prom_sample *ps)
{
    if (!(fabs(ps->value) < SCRAPE_COUNT_MAX)) /* NaN, infinite, or no count: sums stay finite */
        return false;
    uint64_t id = series_id(ps, NULL);
    for (uint16_t i = 0; i < x->gauge_n[k]; i++)
        if (x->gauge_id[k][i] == id)
            return false;
    if (x->gauge_n[k] < SCRAPE_MAX_SERIES)
        x->gauge_id[k][x->gauge_n[k]++] = id;
    return true;
}

/* A sample of counter c (its selector sel): a count, added to *sum once per
 * series; *has set. 0, or the scrape's failure. */
static int take_counter(struct scrape_extract *x, const struct prom_sample *ps,
                        const struct scrape_selector *sel, enum scrape_counter c, double *sum,
                        bool *has)
{
    if (!is_metric(ps, sel))
        return 0;
    double v = ps->value;
    if (!is_count(v))
        return fail(x, -EBADMSG, "line %zu: counter %s has value %g", ps->line, ps->name, v);
    if (add_series(&x->s.series[c], ps) && !add_count(sum, v))
        return sum_fail(x, ps);
    *has = true;
    return 0;
}

static int on_sample(const struct prom_sample *ps, void *arg)
{
    struct scrape_extract *x = arg;
    struct scrape_sample *s = &x->s;
    double v = ps->value;
    int rc;
    if ((rc = take_counter(x, ps, &x->request, SCRAPE_C_REQ, &s->requests, &s->has_requests)) ||
        (rc = take_counter(x, ps, &x->prompt, SCRAPE_C_PROMPT, &s->prompt_tokens,
                           &s->has_prompt)) ||
        (rc = take_counter(x, ps, &x->gen, SCRAPE_C_GEN, &s->gen_tokens, &s->has_gen)) ||
        (rc = take_counter(x, ps, &x->rejected, SCRAPE_C_REJ, &s->rejected, &s->has_rejected)) ||
        (rc = take_counter(x, ps, &x->busy, SCRAPE_C_BUSY, &s->busy, &s->has_busy)))
        return rc;
    if (is_metric(ps, &x->inflight) && gauge_counts(x, 0, ps)) {
        s->inflight += v;
        s->has_inflight = true;
    }
    if (is_metric(ps, &x->queue) && gauge_counts(x, 1, ps)) {
        s->queued += v;
        s->has_queued = true;
    }
    if (x->bucket.name[0] && strcmp(ps->name, x->bucket.name) == 0 && !s->hist_dropped &&
        scrape_selector_match(&x->bucket, ps)) {
        double le = ps->le;
        if (isnan(le)) { /* an untyped exposition: le was not parsed for us */
            const char *l = prom_sample_label(ps, "le");
            if (!l || prom_parse_float(l, strlen(l), &le) != 0 || isnan(le))
                le = NAN;
        }
        /* a bucket without a numeric le (missing, "", " 1") is left out, as
         * histogram_quantile skips it; a count that is no count drops the
         * histogram */
        if (!is_count(v))
            s->hist_dropped = true;
        else if (!isnan(le))
            add_bucket(s, le, v, series_id(ps, "le"));
    }
    return 0;
}

/* A metric field parsed (its name plus suffix) and its patterns compiled; ""
 * (nothing read) when it does not parse, which the annotations' validation
 * never lets through. prev, the reused extractor's selector of the same
 * field (or NULL), hands over its compiled patterns when it is the same
 * selector, so a pooled extractor compiles a workload's patterns once. */
static void selector(struct scrape_selector *sel, const char *field, size_t cap,
                     const char *suffix, struct scrape_selector *prev)
{
    char text[SCRAPE_METRIC_MAX];
    snprintf(text, sizeof(text), "%.*s", (int)strnlen(field, cap), field);
    if (!text[0] || scrape_selector_parse_syntax(text, sel, NULL, 0) != 0) {
        memset(sel, 0, sizeof(*sel));
        return;
    }
    size_t n = strlen(sel->name); /* a parsed name has room for the suffix */
    _Static_assert(sizeof(sel->name) >= SCRAPE_METRIC_MAX + sizeof("_bucket") - 1,
                   "a metric field's name and _bucket fit");
    snprintf(sel->name + n, sizeof(sel->name) - n, "%s", suffix);
    if (prev && prev->re) {
        struct scrape_selector was = *prev;
        was.re = NULL;
        if (memcmp(&was, sel, sizeof(was)) == 0) { /* both zeroed before their parse */
            sel->re = prev->re;
            prev->re = NULL;
            return;
        }
    }
    if (scrape_selector_compile(sel) != 0)
        memset(sel, 0, sizeof(*sel));
}

#define NSELECTORS 8

/* The extractor's selectors, in the order of setup()'s fields. */
static void selector_list(struct scrape_extract *x, struct scrape_selector *out[NSELECTORS])
{
    struct scrape_selector *l[NSELECTORS] = {&x->request, &x->inflight, &x->queue,
                                             &x->prompt,  &x->gen,      &x->busy,
                                             &x->bucket,  &x->rejected};
    memcpy(out, l, sizeof(l));
}

/* Set x up for spec; prev: a reused extractor's former selectors, or NULL. */
static void setup(struct scrape_extract *x, const struct scrape_spec *spec, size_t max_bytes,
                  struct scrape_selector *prev)
{
    memset(x, 0, sizeof(*x));
    x->max_bytes = max_bytes ? max_bytes : PROM_DEFAULT_MAX_TOTAL;
    struct {
        const char *field;
        size_t cap;
        const char *suffix;
    } f[NSELECTORS] = {
        {spec->request_metric, sizeof(spec->request_metric), ""},
        {spec->inflight_metric, sizeof(spec->inflight_metric), ""},
        {spec->queue_metric, sizeof(spec->queue_metric), ""},
        {spec->prompt_token_metric, sizeof(spec->prompt_token_metric), ""},
        {spec->generation_token_metric, sizeof(spec->generation_token_metric), ""},
        {spec->busy_metric, sizeof(spec->busy_metric), ""},
        {spec->latency_metric, sizeof(spec->latency_metric), "_bucket"},
        {spec->rejected_metric, sizeof(spec->rejected_metric), ""},
    };
    struct scrape_selector *sels[NSELECTORS];
    selector_list(x, sels);
    for (size_t i = 0; i < NSELECTORS; i++)
        selector(sels[i], f[i].field, f[i].cap, f[i].suffix, prev ? &prev[i] : NULL);
    x->s.tokens = x->prompt.name[0] || x->gen.name[0];
    x->s.rejected_wanted = x->rejected.name[0] != '\0';
    x->format = PROM_FMT_TEXT;
}

void scrape_extract_init(struct scrape_extract *x, const struct scrape_spec *spec,
                         size_t max_bytes)
{
    setup(x, spec, max_bytes, NULL);
}

int scrape_extract_set_format(struct scrape_extract *x, enum prom_format fmt)
{
    if (x->parser)
        return -EBUSY;
    x->format = fmt;
    return 0;
}

/* Whether a field's metric name (without its matchers), plus suffix, is have. */
static bool same_name(const char *have, const char *field, size_t cap, const char *suffix)
{
    char text[SCRAPE_METRIC_MAX], name[SCRAPE_METRIC_MAX];
    snprintf(text, sizeof(text), "%.*s", (int)strnlen(field, cap), field);
    scrape_metric_name(text, name, sizeof(name));
    size_t k = strlen(name);
    if (k == 0)
        return have[0] == '\0';
    size_t sl = strlen(suffix);
    return strlen(have) == k + sl && strncmp(have, name, k) == 0 && strcmp(have + k, suffix) == 0;
}

/* The parser filters on the names only: the matchers are checked per sample. */
static bool same_names(const struct scrape_extract *x, const struct scrape_spec *spec)
{
#define SAME(sel, field, suffix) same_name(x->sel.name, spec->field, sizeof(spec->field), suffix)
    return SAME(request, request_metric, "") && SAME(inflight, inflight_metric, "") &&
           SAME(queue, queue_metric, "") && SAME(prompt, prompt_token_metric, "") &&
           SAME(gen, generation_token_metric, "") && SAME(busy, busy_metric, "") &&
           SAME(bucket, latency_metric, "_bucket") && SAME(rejected, rejected_metric, "");
#undef SAME
}

/* The selectors' compiled patterns. */
static void release_selectors(struct scrape_extract *x)
{
    struct scrape_selector *sels[NSELECTORS];
    selector_list(x, sels);
    for (size_t i = 0; i < NSELECTORS; i++)
        scrape_selector_release(sels[i]);
}

void scrape_extract_reuse(struct scrape_extract *x, const struct scrape_spec *spec,
                          size_t max_bytes)
{
    struct prom_parser *keep = x->parser ? x->parser : x->spare;
    enum prom_format fmt = x->parser ? x->format : x->spare_format;
    if (x->parser && x->spare)
        prom_parser_free(x->spare);
    if (keep && (!same_names(x, spec) ||
                 x->max_bytes != (max_bytes ? max_bytes : PROM_DEFAULT_MAX_TOTAL))) {
        prom_parser_free(keep);
        keep = NULL;
    }
    struct scrape_selector prev[NSELECTORS], *sels[NSELECTORS];
    selector_list(x, sels);
    for (size_t i = 0; i < NSELECTORS; i++)
        prev[i] = *sels[i];
    setup(x, spec, max_bytes, prev);
    for (size_t i = 0; i < NSELECTORS; i++)
        scrape_selector_release(&prev[i]); /* the patterns not handed over */
    x->spare = keep;
    x->spare_format = fmt;
}

/* The parser is made on first use, once the format is known: the spare one
 * (reset) when it parses that format, else a new one. */
static void start_parser(struct scrape_extract *x)
{
    if (x->parser)
        return;
    if (x->spare && x->spare_format == x->format) {
        x->parser = x->spare;
        x->spare = NULL;
        prom_parser_reset(x->parser);
        return;
    }
    prom_parser_free(x->spare);
    x->spare = NULL;
    struct prom_parser_opts o = {.format = x->format, .max_total = x->max_bytes};
    x->parser = prom_parser_new(&o, on_sample, x);
    int wanted = 0;
    const char *names[] = {x->request.name, x->inflight.name, x->queue.name,   x->bucket.name,
                           x->prompt.name,  x->gen.name,      x->busy.name,    x->rejected.name};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++)
        if (names[i][0] && prom_parser_want(x->parser, names[i], PROM_MATCH_NAME) == 0)
            wanted++;
    /* a counter by its family name: also its 0.0.4 name (is_metric) */
    const char *counters[] = {x->request.name, x->prompt.name, x->gen.name, x->busy.name,
                              x->rejected.name};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(counters); i++) {
        size_t n = strlen(counters[i]);
        if (n == 0 || (n >= 6 && strcmp(counters[i] + n - 6, "_total") == 0))
            continue;
        char total[SCRAPE_METRIC_MAX + 16];
        snprintf(total, sizeof(total), "%s_total", counters[i]);
        (void)prom_parser_want(x->parser, total, PROM_MATCH_NAME);
    }
    if (!wanted)
        prom_parser_want(x->parser, NOTHING_WANTED, PROM_MATCH_NAME);
}

static int parse_error(struct scrape_extract *x, int rc, const struct prom_error *pe)
{
    if (x->err)
        return x->err; /* our callback's own message */
    if (rc == -EFBIG)
        return fail(x, -EMSGSIZE, "exposition larger than %zu bytes", x->max_bytes);
    return fail(x, -EBADMSG, "not %s exposition: line %zu column %zu: %s",
                x->format == PROM_FMT_OPENMETRICS ? "an OpenMetrics" : "a Prometheus",
                pe->line, pe->column, pe->msg);
}

int scrape_extract_feed(struct scrape_extract *x, const void *data, size_t len)
{
    if (x->err)
        return x->err;
    if (len > x->max_bytes - x->bytes)
        return fail(x, -EMSGSIZE, "exposition larger than %zu bytes", x->max_bytes);
    x->bytes += len;
    start_parser(x);
    struct prom_error pe = {0};
    int rc = prom_parser_feed(x->parser, data, len, &pe);
    return rc ? parse_error(x, rc, &pe) : 0;
}

int scrape_extract_finish(struct scrape_extract *x)
{
    if (x->err)
        return x->err;
    start_parser(x);
    struct prom_error pe = {0};
    int rc = prom_parser_finish(x->parser, &pe);
    if (rc)
        return parse_error(x, rc, &pe);
    struct prom_stats st;
    prom_parser_stats(x->parser, &st);
    x->s.samples = st.samples;
    if (st.samples == 0)
        return fail(x, -EBADMSG, "empty exposition (%zu bytes, no samples)", x->bytes);
    if (x->s.hist_dropped) {
        x->s.nbuckets = 0;
        x->s.hser_n = 0;
        memset(x->s.hsum_n, 0, sizeof(x->s.hsum_n));
        memset(x->s.hsum_ids, 0, sizeof(x->s.hsum_ids));
    }
    return 0;
}

void scrape_extract_free(struct scrape_extract *x)
{
    release_selectors(x);
    prom_parser_free(x->parser);
    prom_parser_free(x->spare);
    x->parser = NULL;
    x->spare = NULL;
}

int scrape_extract_buf(const struct scrape_spec *spec, enum prom_format fmt, const void *buf,
                       size_t len, size_t max_bytes, struct scrape_sample *out, char *err,
                       size_t errlen)
{
    struct scrape_extract *x = xmalloc(sizeof(*x));
    scrape_extract_init(x, spec, max_bytes);
    scrape_extract_set_format(x, fmt);
    int rc = scrape_extract_feed(x, buf, len);
    if (rc == 0)
        rc = scrape_extract_finish(x);
    if (rc == 0)
        *out = x->s;
    if (errlen)
        snprintf(err, errlen, "%s", rc ? x->errmsg : "");
    scrape_extract_free(x);
    xfree(x);
    return rc;
}

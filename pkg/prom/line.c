/* SPDX-License-Identifier: Apache-2.0 */
/* prom: the line grammar of the 0.0.4 text and OpenMetrics formats.
 *
 * prom_line_parse() takes one complete line (no '\n'), either in place in
 * the caller's chunk or from the partial-line buffer (see stream.c). A
 * sample line is parsed into per-line scratch (the sample name and the
 * unescaped labels, each NUL-terminated) whose size is bounded by the line
 * length, then handed to the callback; unwanted samples take the fast path
 * described at prom_parser_want(). Metadata lines update the current family.
 *
 * The grammar and the strictness are described in prom.h. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prom/prom-int.h"
#include "prom/prom.h"
#include "util/util.h"

/* Character classes (C_NUM0: bytes a value may start with, besides 'i'/'n'). */
enum { C_NAME0 = 1, C_NAME = 2, C_LABEL0 = 4, C_LABEL = 8, C_NUM0 = 16 };

static const unsigned char cls[256] = {
    ['a' ... 'z'] = C_NAME0 | C_NAME | C_LABEL0 | C_LABEL,
    ['A' ... 'H'] = C_NAME0 | C_NAME | C_LABEL0 | C_LABEL,
    ['I'] = C_NAME0 | C_NAME | C_LABEL0 | C_LABEL | C_NUM0,
    ['J' ... 'M'] = C_NAME0 | C_NAME | C_LABEL0 | C_LABEL,
    ['N'] = C_NAME0 | C_NAME | C_LABEL0 | C_LABEL | C_NUM0,
    ['O' ... 'Z'] = C_NAME0 | C_NAME | C_LABEL0 | C_LABEL,
    ['_'] = C_NAME0 | C_NAME | C_LABEL0 | C_LABEL,
    [':'] = C_NAME0 | C_NAME,
    ['0' ... '9'] = C_NAME | C_LABEL | C_NUM0,
    ['+'] = C_NUM0,
    ['-'] = C_NUM0,
    ['.'] = C_NUM0,
};

static bool is_num0(unsigned char c)
{
    return (cls[c] & C_NUM0) || c == 'i' || c == 'n';
}

static const char *skip_ws(const char *s, const char *e)
{
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    return s;
}

static const char *skip_name(const char *s, const char *e, unsigned mask)
{
    while (s < e && (cls[(unsigned char)*s] & mask))
        s++;
    return s;
}

/* Record the sticky error for the current line and return its code. */
__attribute__((format(printf, 4, 5))) static int fail(struct prom_parser *p, int code,
                                                      size_t column, const char *fmt, ...)
{
    p->err.code = code;
    p->err.line = (size_t)p->lines + 1;
    p->err.column = column;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err.msg, sizeof(p->err.msg), fmt, ap);
    va_end(ap);
    return code;
}

#define COL(ptr) ((size_t)((ptr)-base) + 1)

/* The line ended inside a quoted label value of the sample's own label set
 * (not an exemplar's): in the text format the stream joins it with the next
 * line (prom_parser.open_quote). */
static int fail_open_quote(struct prom_parser *p, size_t column)
{
    p->open_quote = true;
    return fail(p, -EINVAL, column, "unterminated label value");
}

/* ---- families and filters -------------------------------------------- */

static const char *const type_names[] = {
    [PROM_UNTYPED] = "untyped",   [PROM_COUNTER] = "counter",
    [PROM_GAUGE] = "gauge",       [PROM_HISTOGRAM] = "histogram",
    [PROM_SUMMARY] = "summary",   [PROM_GAUGE_HISTOGRAM] = "gaugehistogram",
    [PROM_STATESET] = "stateset", [PROM_INFO] = "info",
};

const char *prom_type_name(enum prom_type t)
{
    if ((size_t)t < UTIL_ARRAY_LEN(type_names))
        return type_names[t];
    return "?";
}

static const struct {
    const char *s;
    size_t len;
    enum prom_suffix suffix;
    unsigned types; /* bit per enum prom_type */
} suffixes[] = {
    {"_total", 6, PROM_SUFFIX_TOTAL, 1u << PROM_COUNTER},
    {"_created", 8, PROM_SUFFIX_CREATED,
     (1u << PROM_COUNTER) | (1u << PROM_HISTOGRAM) | (1u << PROM_SUMMARY)},
    {"_bucket", 7, PROM_SUFFIX_BUCKET, (1u << PROM_HISTOGRAM) | (1u << PROM_GAUGE_HISTOGRAM)},
    {"_sum", 4, PROM_SUFFIX_SUM, (1u << PROM_HISTOGRAM) | (1u << PROM_SUMMARY)},
    {"_count", 6, PROM_SUFFIX_COUNT, (1u << PROM_HISTOGRAM) | (1u << PROM_SUMMARY)},
    {"_gsum", 5, PROM_SUFFIX_GSUM, 1u << PROM_GAUGE_HISTOGRAM},
    {"_gcount", 7, PROM_SUFFIX_GCOUNT, 1u << PROM_GAUGE_HISTOGRAM},
    {"_info", 5, PROM_SUFFIX_INFO, 1u << PROM_INFO},
};

/* Does sample name[0..n) belong to the current family? Sets its suffix. */
static bool in_family(const struct prom_parser *p, const char *name, size_t n,
                      enum prom_suffix *suffix)
{
    *suffix = PROM_SUFFIX_NONE;
    if (p->fam_len == 0 || n < p->fam_len || memcmp(name, p->fam, p->fam_len) != 0)
        return false;
    if (n == p->fam_len)
        return true;
    const char *rest = name + p->fam_len;
    size_t rl = n - p->fam_len;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(suffixes); i++) {
        if (suffixes[i].len == rl && memcmp(rest, suffixes[i].s, rl) == 0 &&
            (suffixes[i].types & (1u << p->fam_type))) {
            *suffix = suffixes[i].suffix;
            return true;
        }
    }
    return false;
}

static bool want_name(const struct prom_parser *p, const char *name, size_t n)
{
    for (size_t i = 0; i < p->nwants; i++) {
        const struct want *w = &p->wants[i];
        if (w->how == PROM_MATCH_NAME) {
            if (w->len == n && memcmp(w->s, name, n) == 0)
                return true;
        } else if (n >= w->len && memcmp(w->s, name, w->len) == 0) {
            return true;
        }
    }
    return false;
}

bool prom_family_wanted(const struct prom_parser *p)
{
    for (size_t i = 0; i < p->nwants; i++) {
        const struct want *w = &p->wants[i];
        if (w->how == PROM_MATCH_NAME && w->len == p->fam_len &&
            memcmp(w->s, p->fam, p->fam_len) == 0)
            return true;
    }
    return false;
}

static void set_family(struct prom_parser *p, const char *name, size_t n)
{
    if (n == p->fam_len && memcmp(name, p->fam, n) == 0)
        return;
    if (n + 1 > p->fam_cap) {
        p->fam_cap = n + 1 < 64 ? 64 : n + 1;
        p->fam = xrealloc(p->fam, p->fam_cap);
    }
    memcpy(p->fam, name, n);
    p->fam[n] = '\0';
    p->fam_len = n;
    p->fam_legacy = prom_name_valid(name, n);
    p->fam_type = PROM_UNTYPED;
    p->fam_wanted = prom_family_wanted(p);
}

bool prom_name_valid(const char *s, size_t n)
{
    return n > 0 && (cls[(unsigned char)s[0]] & C_NAME0) && skip_name(s, s + n, C_NAME) == s + n;
}

bool prom_name_char(char c)
{
    return (cls[(unsigned char)c] & C_NAME) != 0;
}

/* ---- metadata lines --------------------------------------------------- */

static int parse_type_word(const char *s, size_t n, enum prom_type *out)
{
    static const struct {
        const char *w;
        enum prom_type t;
    } words[] = {
        {"counter", PROM_COUNTER},
        {"gauge", PROM_GAUGE},
        {"histogram", PROM_HISTOGRAM},
        {"summary", PROM_SUMMARY},
        {"untyped", PROM_UNTYPED},
        {"unknown", PROM_UNTYPED},
        {"gaugehistogram", PROM_GAUGE_HISTOGRAM},
        {"gauge_histogram", PROM_GAUGE_HISTOGRAM}, /* the OpenMetrics spec's ABNF spelling */
        {"stateset", PROM_STATESET},
        {"info", PROM_INFO},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(words); i++) {
        if (strlen(words[i].w) == n && memcmp(words[i].w, s, n) == 0) {
            *out = words[i].t;
            return 0;
        }
    }
    return -EINVAL;
}

/* s points just past '#'. */
static int parse_meta(struct prom_parser *p, const char *s, const char *e, const char *base)
{
    bool om = p->opts.format == PROM_FMT_OPENMETRICS;
    if (s == e || (*s != ' ' && *s != '\t'))
        return om ? fail(p, -EINVAL, COL(s), "comment lines are not allowed in OpenMetrics") : 0;
    s = skip_ws(s, e);
    const char *kw = s;
    while (s < e && *s != ' ' && *s != '\t')
        s++;
    size_t kwl = (size_t)(s - kw);
    enum { K_OTHER, K_HELP, K_TYPE, K_UNIT, K_EOF } k = K_OTHER;
    if (kwl == 4 && memcmp(kw, "HELP", 4) == 0)
        k = K_HELP;
    else if (kwl == 4 && memcmp(kw, "TYPE", 4) == 0)
        k = K_TYPE;
    else if (om && kwl == 4 && memcmp(kw, "UNIT", 4) == 0)
        k = K_UNIT;
    else if (om && kwl == 3 && memcmp(kw, "EOF", 3) == 0)
        k = K_EOF;
    if (k == K_OTHER)
        return om ? fail(p, -EINVAL, COL(kw), "unknown # line in OpenMetrics") : 0;
    if (k == K_EOF) {
        s = skip_ws(s, e);
        if (s != e)
            return fail(p, -EINVAL, COL(s), "text after # EOF");
        p->saw_eof = true;
        return 0;
    }
    s = skip_ws(s, e);
    if (s == e) {
        /* "# HELP" or "# TYPE" and nothing else: a comment to expfmt (its
         * test case good_03), malformed metadata in OpenMetrics */
        if (!om)
            return 0;
        return fail(p, -EINVAL, COL(s), "missing metric name after # %.*s", (int)kwl, kw);
    }
    const char *name = s;
    size_t nl;
    if (*s == '"') {
        /* a quoted name (Prometheus 3): the bytes between the quotes, as
         * Prometheus takes them (escapes not read), a UTF-8 name */
        const char *q = s + 1;
        while (q < e && *q != '"')
            q += *q == '\\' && q + 1 < e ? 2 : 1;
        if (q >= e)
            return fail(p, -EINVAL, COL(s), "unterminated quoted name in # %.*s", (int)kwl, kw);
        name = s + 1;
        nl = (size_t)(q - name);
        if (nl == 0 || memchr(name, '\0', nl) ||
            !prom_utf8_valid((const unsigned char *)name, nl))
            return fail(p, -EINVAL, COL(s), "invalid quoted name in # %.*s", (int)kwl, kw);
        s = q + 1;
    } else {
        if (!(cls[(unsigned char)*s] & C_NAME0))
            return fail(p, -EINVAL, COL(s), "invalid metric name in # %.*s", (int)kwl, kw);
        s = skip_name(s + 1, e, C_NAME);
        nl = (size_t)(s - name);
    }
    if (s < e && *s != ' ' && *s != '\t') {
        /* In the 0.0.4 format a # HELP's name ends where its characters do,
         * and the rest is its text (promlex.l: the name, then "{C}*"), whose
         * first byte promparse.go drops as the blank it expects there:
         * `# HELP foo-bar x` is foo's. Its # TYPE is as strict as here. */
        if (k != K_HELP || om)
            return fail(p, -EINVAL, COL(s), "invalid metric name in # %.*s", (int)kwl, kw);
        s++;
    }
    s = skip_ws(s, e);

    switch (k) {
    case K_HELP:
        if (!prom_utf8_valid((const unsigned char *)s, (size_t)(e - s)))
            return fail(p, -EINVAL, COL(s), "HELP text is not valid UTF-8");
        set_family(p, name, nl);
        return 0;
    case K_TYPE: {
        const char *w = s;
        while (s < e && *s != ' ' && *s != '\t')
            s++;
        enum prom_type t;
        if (w == s)
            return fail(p, -EINVAL, COL(w), "missing type in # TYPE");
        if (parse_type_word(w, (size_t)(s - w), &t) != 0)
            return fail(p, -EINVAL, COL(w), "unknown metric type");
        if (skip_ws(s, e) != e)
            return fail(p, -EINVAL, COL(skip_ws(s, e)), "text after type in # TYPE");
        set_family(p, name, nl);
        p->fam_type = t;
        return 0;
    }
    case K_UNIT: {
        /* the unit is optional and made of metric-name characters */
        s = skip_name(s, e, C_NAME);
        if (skip_ws(s, e) != e)
            return fail(p, -EINVAL, COL(s), "invalid unit in # UNIT");
        set_family(p, name, nl);
        return 0;
    }
    default:
        return 0;
    }
}

/* ---- sample lines ----------------------------------------------------- */

static void scratch_reserve(struct prom_parser *p, size_t linelen)
{
    size_t need = linelen + 16;
    if (need > p->scratch_cap) {
        p->scratch_cap = need < 256 ? 256 : need;
        xfree(p->scratch);
        p->scratch = xmalloc(p->scratch_cap);
    }
    p->scratch_off = 0;
}

static char *scratch_put(struct prom_parser *p, const char *s, size_t n)
{
    char *d = p->scratch + p->scratch_off;
    memcpy(d, s, n);
    d[n] = '\0';
    p->scratch_off += n + 1;
    return d;
}

static int name_cmp(const void *a, const void *b)
{
    const struct prom_label *x = *(const struct prom_label *const *)a;
    const struct prom_label *y = *(const struct prom_label *const *)b;
    size_t n = UTIL_MIN(x->name_len, y->name_len);
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

static bool has_dup_names(const struct prom_label *l, size_t n)
{
    if (n <= 16) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (l[i].name_len == l[j].name_len &&
                    memcmp(l[i].name, l[j].name, l[i].name_len) == 0)
                    return true;
        return false;
    }
    const struct prom_label **v = xmalloc(n * sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = &l[i];
    qsort(v, n, sizeof(*v), name_cmp);
    bool dup = false;
    for (size_t i = 1; i < n && !dup; i++)
        dup = name_cmp(&v[i - 1], &v[i]) == 0;
    xfree(v);
    return dup;
}

/*
 * A quoted string at *sp (its opening '"'): a label value, or a Prometheus 3
 * quoted metric or label name (what: "label value", "name"). The escapes \\
 * \" \n are read, any other backslash is kept as is; a NUL byte, or bytes
 * that are not UTF-8, are an error. With store, the unescaped bytes go to
 * the scratch, NUL-terminated (*out, *outlen); *sp ends past the closing
 * quote. A string the line ends in is the open quote the text format's
 * stream joins with the next line, when it is the sample's own (store).
 */
static int parse_quoted(struct prom_parser *p, const char **sp, const char *e, const char *base,
                        bool store, const char *what, const char **out, size_t *outlen)
{
    const char *s = *sp + 1, *vstart = s;
    char *dst = store ? p->scratch + p->scratch_off : NULL;
    size_t vl = 0;
    unsigned hi = 0;
    for (;;) {
        if (s == e || (*s == '\\' && s + 1 == e)) {
            if (store)
                p->open_quote = true;
            return fail(p, -EINVAL, COL(s == e ? vstart : s), "unterminated %s", what);
        }
        unsigned char c = (unsigned char)*s;
        if (c == '"')
            break;
        if (c == '\0')
            return fail(p, -EINVAL, COL(s), "NUL byte in %s", what);
        if (c == '\\') {
            char r = s[1];
            if (r == 'n' || r == '\\' || r == '"') {
                c = r == 'n' ? '\n' : (unsigned char)r;
                s += 2;
            } else {
                s++; /* any other escape is kept as is, backslash included */
            }
        } else {
            s++;
        }
        hi |= c;
        if (store)
            dst[vl] = (char)c;
        vl++;
    }
    s++; /* closing quote */
    if ((hi & 0x80) && !prom_utf8_valid((const unsigned char *)vstart, (size_t)(s - 1 - vstart)))
        return fail(p, -EINVAL, COL(vstart), "%s is not valid UTF-8", what);
    if (store) {
        dst[vl] = '\0';
        p->scratch_off += vl + 1;
        *out = dst;
        *outlen = vl;
    }
    *sp = s;
    return 0;
}

/*
 * Parse a label set starting at '{'. With store, the labels go to the
 * scratch and p->labels; otherwise (exemplars) they are only checked.
 * Label names may be quoted (Prometheus 3: `{"my.label"="v"}`), and a
 * quoted string alone between ',' or the braces is the metric name
 * (`{"http.server.requests", method="GET"}`): *name (NULL for exemplars,
 * where it is an error) is set to it, in the scratch; one already set (the
 * name before the braces, or another quoted one) makes it an error, as in
 * Prometheus' parser.
 */
static int parse_labels(struct prom_parser *p, const char **sp, const char *e, const char *base,
                        bool store, const char **name, size_t *name_len, size_t *nout)
{
    const char *s = *sp + 1;
    size_t n = 0;
    for (;;) {
        s = skip_ws(s, e);
        if (s == e)
            return fail(p, -EINVAL, COL(s), "unterminated label set");
        if (*s == '}') {
            s++;
            break;
        }
        const char *ln = s, *nm = NULL;
        size_t lnl = 0;
        if (*s == '"') {
            int rc = parse_quoted(p, &s, e, base, store, "quoted name", &nm, &lnl);
            if (rc)
                return rc;
            const char *t = skip_ws(s, e);
            if (t < e && (*t == ',' || *t == '}')) { /* the metric name */
                if (!name)
                    return fail(p, -EINVAL, COL(ln), "metric name in an exemplar");
                if (*name)
                    return fail(p, -EINVAL, COL(ln), "metric name already set");
                if (store && lnl == 0)
                    return fail(p, -EINVAL, COL(ln), "empty metric name");
                *name = store ? nm : ln;
                *name_len = lnl;
                s = *t == ',' ? t + 1 : t;
                continue;
            }
            if (store && lnl == 0)
                return fail(p, -EINVAL, COL(ln), "empty label name");
        } else {
            if (!(cls[(unsigned char)*s] & C_LABEL0))
                return fail(p, -EINVAL, COL(s), "invalid label name");
            s = skip_name(s + 1, e, C_LABEL);
            lnl = (size_t)(s - ln);
            if (store)
                nm = scratch_put(p, ln, lnl);
        }
        s = skip_ws(s, e);
        if (s == e || *s != '=')
            return fail(p, -EINVAL, COL(s), "expected '=' after label name");
        s = skip_ws(s + 1, e);
        if (s == e || *s != '"')
            return fail(p, -EINVAL, COL(s), "expected '\"' to open label value");
        const char *val = NULL;
        size_t vl = 0;
        int rc = parse_quoted(p, &s, e, base, store, "label value", &val, &vl);
        if (rc)
            return rc;
        if (store) {
            if (n == p->opts.max_labels)
                return fail(p, -E2BIG, COL(ln), "more than %zu labels on a sample",
                            p->opts.max_labels);
            if (n == p->labels_cap) {
                p->labels_cap = UTIL_MIN(p->labels_cap ? p->labels_cap * 2 : 16,
                                         p->opts.max_labels);
                p->labels = xrealloc(p->labels, p->labels_cap * sizeof(*p->labels));
            }
            p->labels[n] = (struct prom_label){nm, lnl, val, vl};
        }
        n++;
        s = skip_ws(s, e);
        if (s < e && *s == ',') {
            s++;
            continue;
        }
        if (s < e && *s == '}') {
            s++;
            break;
        }
        /* 0.0.4: the comma between pairs is optional (promparse.go parseLVals) */
        if (p->opts.format == PROM_FMT_TEXT && s < e &&
            ((cls[(unsigned char)*s] & C_LABEL0) || *s == '"'))
            continue;
        return fail(p, -EINVAL, COL(s), "expected ',' or '}' in label set");
    }
    if (store && has_dup_names(p->labels, n))
        return fail(p, -EINVAL, COL(*sp), "duplicate label name");
    *sp = s;
    *nout = n;
    return 0;
}

static const char *token_end(const char *s, const char *e)
{
    while (s < e && *s != ' ' && *s != '\t')
        s++;
    return s;
}

/* A timestamp token: syntax errors fail the line; a valid one too large for
 * int64 milliseconds is ignored (*has false), as the sample is still good. */
static int parse_timestamp(struct prom_parser *p, const char *t, const char *te, bool om,
                           const char *base, int64_t *ms, bool *has)
{
    *has = false;
    if (!om) {
        int rc = prom_num_int64(t, (size_t)(te - t), ms);
        if (rc == -EINVAL)
            return fail(p, -EINVAL, COL(t), "invalid timestamp");
        *has = rc == 0; /* -ERANGE: beyond int64 ms, the sample is kept without it */
        return 0;
    }
    double sec;
    if (prom_parse_float(t, (size_t)(te - t), &sec) != 0 || !isfinite(sec))
        return fail(p, -EINVAL, COL(t), "invalid timestamp");
    if (fabs(sec * 1000.0) < 9.2e18) {
        *ms = (int64_t)(sec * 1000.0); /* toward zero: openmetricsparse.go int64(ts * 1000) */
        *has = true;
    }
    return 0;
}

/* s points at '#'. Exemplar: # {labels} value [timestamp] */
static int parse_exemplar(struct prom_parser *p, const char *s, const char *e, const char *base)
{
    s = skip_ws(s + 1, e);
    if (s == e || *s != '{')
        return fail(p, -EINVAL, COL(s), "expected '{' to open exemplar labels");
    size_t n;
    int rc = parse_labels(p, &s, e, base, false, NULL, NULL, &n);
    if (rc)
        return rc;
    s = skip_ws(s, e);
    const char *v = s, *ve = token_end(s, e);
    double d;
    if (v == ve)
        return fail(p, -EINVAL, COL(v), "missing exemplar value");
    if (prom_parse_float(v, (size_t)(ve - v), &d) != 0)
        return fail(p, -EINVAL, COL(v), "invalid exemplar value");
    s = skip_ws(ve, e);
    if (s == e)
        return 0;
    const char *te = token_end(s, e);
    int64_t ms;
    bool has_ms;
    rc = parse_timestamp(p, s, te, true, base, &ms, &has_ms);
    if (rc)
        return rc;
    s = skip_ws(te, e);
    if (s != e)
        return fail(p, -EINVAL, COL(s), "text after exemplar");
    return 0;
}

/* The number in label `label`, or NaN when it is missing or not a number:
 * Prometheus keeps such a sample (its parsers only normalise a numeric le or
 * quantile), and the consumer decides what a bucket without a bound is worth. */
static double label_number(const struct prom_parser *p, size_t nlabels, const char *label)
{
    size_t ll = strlen(label);
    for (size_t i = 0; i < nlabels; i++) {
        const struct prom_label *l = &p->labels[i];
        double v;
        if (l->name_len == ll && memcmp(l->name, label, ll) == 0)
            return prom_parse_float(l->value, l->value_len, &v) == 0 ? v : NAN;
    }
    return NAN;
}

bool prom_line_skippable(const struct prom_parser *p, const char *s, size_t n)
{
    const char *e = s + n;
    if (p->saw_eof || p->nwants == 0)
        return false;
    s = skip_ws(s, e);
    if (s == e || !(cls[(unsigned char)*s] & C_NAME0))
        return false; /* blank so far, metadata, a comment or a bad line: parsed whole */
    const char *name = s;
    s = skip_name(s + 1, e, C_NAME);
    if (s == e)
        return false; /* the name may go on */
    size_t nl = (size_t)(s - name);
    enum prom_suffix suffix;
    bool fam = in_family(p, name, nl, &suffix);
    return !(fam && p->fam_wanted) && !want_name(p, name, nl);
}

/* The length of s[0..n) without a UTF-8 sequence cut short at its end. */
static size_t utf8_whole(const char *s, size_t n)
{
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xc0) == 0x80)
            continue; /* a continuation byte: its lead is further back */
        size_t need = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

int prom_line_over_cap(struct prom_parser *p, const char *s, size_t n)
{
    if (prom_line_skippable(p, s, n))
        return PROM_OVER_SAMPLE;
    const char *base = s, *e = s + n;
    s = skip_ws(s, e);
    if (p->saw_eof || s == e || *s != '#')
        return PROM_OVER_FAIL;
    bool om = p->opts.format == PROM_FMT_OPENMETRICS;
    const char *hash = s, *kw = s + 1;
    if (kw < e && *kw != ' ' && *kw != '\t')
        return om ? PROM_OVER_FAIL : PROM_OVER_COMMENT; /* "#text": a comment */
    kw = skip_ws(kw, e);
    const char *ke = token_end(kw, e);
    if (ke == e)
        return PROM_OVER_FAIL; /* the keyword may go on */
    if (ke - kw == 4 && memcmp(kw, "HELP", 4) == 0) {
        /* a long HELP text (Prometheus sets no limit): its name and the text
         * within the cap are read as a HELP line, the rest is skipped */
        const char *name = skip_ws(ke, e);
        const char *ne = name < e && *name == '"' ? e : token_end(name, e);
        if (!om && name < e && (cls[(unsigned char)*name] & C_NAME0))
            ne = skip_name(name + 1, e, C_NAME); /* the text may follow at once (parse_meta) */
        if (name < e && *name == '"') { /* a quoted name must close within the cap */
            for (const char *q = name + 1; q < e; q++) {
                if (*q == '\\' && q + 1 < e) {
                    q++;
                } else if (*q == '"') {
                    ne = q + 1;
                    break;
                }
            }
        }
        if (ne == e)
            return PROM_OVER_FAIL; /* the name may go on */
        int rc = parse_meta(p, hash + 1, base + utf8_whole(base, n), base);
        return rc < 0 ? rc : PROM_OVER_COMMENT;
    }
    if (om || (ke - kw == 4 && memcmp(kw, "TYPE", 4) == 0))
        return PROM_OVER_FAIL; /* # TYPE, and OpenMetrics' # UNIT and # EOF, are short */
    return PROM_OVER_COMMENT; /* any other # line of the text format is a comment */
}

/* Fast path for unwanted lines; see prom_parser_want(). s is past the name. */
static int skip_sample(struct prom_parser *p, const char *s, const char *e, const char *base)
{
    s = skip_ws(s, e);
    if (s < e && *s == '{') {
        const char *open = s++;
        for (;;) {
            const char *q = s;
            while (q < e && *q != '"' && *q != '}')
                q++;
            if (q == e)
                return fail(p, -EINVAL, COL(open), "unterminated label set");
            if (*q == '}') {
                s = q + 1;
                break;
            }
            q++;
            for (;;) { /* inside quotes: the next quote, unless a backslash comes first */
                const char *qq = memchr(q, '"', (size_t)(e - q));
                const char *bs = memchr(q, '\\', (size_t)((qq ? qq : e) - q));
                if (!bs) {
                    if (!qq)
                        return fail_open_quote(p, COL(open));
                    q = qq;
                    break;
                }
                if (bs + 1 == e) /* backslash as the last byte */
                    return fail_open_quote(p, COL(open));
                q = bs + 2;
            }
            s = q + 1;
        }
        s = skip_ws(s, e);
    }
    if (s == e)
        return fail(p, -EINVAL, COL(s), "missing value");
    if (!is_num0((unsigned char)*s))
        return fail(p, -EINVAL, COL(s), "invalid value");
    return 0;
}

static int parse_sample(struct prom_parser *p, const char *s, const char *e, const char *base,
                        size_t linelen)
{
    const char *name = s, *namecopy = NULL;
    size_t nl = 0, nlabels = 0;
    bool om = p->opts.format == PROM_FMT_OPENMETRICS;
    bool wanted = true;
    enum prom_suffix suffix = PROM_SUFFIX_NONE;
    bool fam = false;
    if (*s != '{') {
        if (!(cls[(unsigned char)*s] & C_NAME0))
            return fail(p, -EINVAL, COL(s), "invalid metric name");
        /* A sample of the current family starts with its name, which its # line
         * validated: only the rest needs the character-class scan (not for a
         * quoted name, which a bare sample name cannot be) */
        if (p->fam_legacy && (size_t)(e - s) >= p->fam_len &&
            memcmp(s, p->fam, p->fam_len) == 0)
            s = skip_name(s + p->fam_len, e, C_NAME);
        else
            s = skip_name(s + 1, e, C_NAME);
        nl = (size_t)(s - name);
        fam = in_family(p, name, nl, &suffix);
        p->samples++;
        if (p->nwants && !(fam && p->fam_wanted) && !want_name(p, name, nl))
            return skip_sample(p, s, e, base);
        scratch_reserve(p, linelen);
        namecopy = scratch_put(p, name, nl);
    } else {
        /* the name quoted inside the braces (Prometheus 3): the label set is
         * read whole to find it, wanted or not */
        p->samples++;
        scratch_reserve(p, linelen);
    }
    const char *t = skip_ws(s, e);
    if (t < e && *t == '{') { /* "{" may follow blanks */
        s = t;
        int rc = parse_labels(p, &s, e, base, true, &namecopy, &nl, &nlabels);
        if (rc)
            return rc;
    } else if (t == s && s < e) { /* anything else after the name needs a blank */
        return fail(p, -EINVAL, COL(s), "invalid character in metric name");
    }
    if (!namecopy)
        return fail(p, -EINVAL, COL(name), "no metric name in the label set");
    if (*name == '{') {
        fam = in_family(p, namecopy, nl, &suffix);
        wanted = !p->nwants || (fam && p->fam_wanted) || want_name(p, namecopy, nl);
    }
    s = skip_ws(s, e);
    const char *v = s, *ve = token_end(s, e);
    if (v == ve)
        return fail(p, -EINVAL, COL(v), "missing value");
    struct prom_sample smp = {
        .family = fam ? p->fam : namecopy,
        .family_len = fam ? p->fam_len : nl,
        .type = fam ? p->fam_type : PROM_UNTYPED,
        .name = namecopy,
        .name_len = nl,
        .suffix = suffix,
        .labels = p->labels,
        .nlabels = nlabels,
        .le = NAN,
        .quantile = NAN,
        .line = (size_t)p->lines + 1,
    };
    if (prom_parse_float(v, (size_t)(ve - v), &smp.value) != 0)
        return fail(p, -EINVAL, COL(v), "invalid value");
    s = skip_ws(ve, e);
    if (s < e && *s != '#') {
        const char *te = token_end(s, e);
        int rc = parse_timestamp(p, s, te, om, base, &smp.timestamp_ms, &smp.has_timestamp);
        if (rc)
            return rc;
        if (!smp.has_timestamp)
            smp.timestamp_ms = 0;
        s = skip_ws(te, e);
    }
    if (s < e) {
        if (*s != '#')
            return fail(p, -EINVAL, COL(s), "text after timestamp");
        int rc = parse_exemplar(p, s, e, base);
        if (rc)
            return rc;
    }
    if ((smp.type == PROM_HISTOGRAM || smp.type == PROM_GAUGE_HISTOGRAM) &&
        suffix == PROM_SUFFIX_BUCKET)
        smp.le = label_number(p, nlabels, "le");
    else if (smp.type == PROM_SUMMARY && suffix == PROM_SUFFIX_NONE)
        smp.quantile = label_number(p, nlabels, "quantile");
    if (!wanted)
        return 0;
    p->emitted++;
    int rc = p->cb(&smp, p->arg);
    if (rc != 0) {
        if (rc > 0)
            rc = -ECANCELED;
        return fail(p, rc, 0, "stopped by the sample callback (%d)", rc);
    }
    return 0;
}

/* ---- lines and chunks ------------------------------------------------- */

int prom_line_parse(struct prom_parser *p, const char *line, size_t n)
{
    const char *base = line, *e = line + n, *s = line;
    int rc = 0;
    p->parsed += n;
    if (e > s && e[-1] == '\r')
        e--;
    if (p->saw_eof) {
        rc = fail(p, -EINVAL, 1, "content after # EOF");
        goto out;
    }
    s = skip_ws(s, e);
    if (s == e)
        goto out;
    if (*s == '#')
        rc = parse_meta(p, s + 1, e, base);
    else
        rc = parse_sample(p, s, e, base, n);
out:
    p->lines++;
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* trace: parser and writer for request-rate trace CSVs (`t_seconds,requests`).
 *
 * The parser takes one line at a time (parse_line), without allocating per
 * row: each numeric field is copied into a small NUL-terminated stack buffer
 * for strtod. trace_parse() walks a buffer; trace_load_file() streams a file
 * (through zlib's inflate when it starts with gzip's magic bytes: its members
 * as one stream, zero padding after them skipped, any other data after them
 * an error, as Python's gzip module reads it) and hands each complete line over as it
 * arrives, keeping only the unfinished line, so a line over TRACE_MAX_LINE
 * is refused as soon as it is that long.
 * For a buffer, the bucket array is sized once from the last row's time when
 * that parses; otherwise (and when streaming) it grows by doubling, capped at
 * TRACE_MAX_BUCKETS. Times are kept as integer milliseconds; a row belongs
 * to bucket k when its time is within TRACE_GRID_TOL_MS of t0 + k * dt.
 * Errors carry the 1-based line and the offending text (truncated, with
 * control bytes replaced) so that a caller can print them as they are. Both
 * readers drive the same parser state (with trace_opts' limits), so a file
 * gives exactly what its bytes give trace_parse (fuzz/fuzz-trace-file.c). */
#include "trace/trace.h"

#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/** A row may sit this far off the grid (rounding in writers). */
#define TRACE_GRID_TOL_MS 1
/** |t_seconds| above this cannot be held exactly in ms in a double. */
#define TRACE_MAX_ABS_T 1e12
/** Longest numeric field we accept (digits, sign, point, exponent). */
#define FIELD_MAX 64
/** Offending text is quoted up to this many bytes. */
#define QUOTE_MAX 40
/** A finer grid may be shown only by one of the first this many rows (a
 *  recorder that missed ticks as it started), and is refused when this many
 *  rows or more follow the row that showed it and all keep the first two
 *  rows' grid (then that row was off it, the first two a tick apart). */
#define TRACE_REFINE_ROWS 10

/* ---- errors --------------------------------------------------------------- */

static int fail(struct trace_error *err, int rc, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct trace_error *err, int rc, size_t line, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->line = line;
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Quote up to QUOTE_MAX bytes of s for a message: control and non-ASCII
 * bytes become '?', and "..." marks truncation. out must hold QUOTE_MAX + 4. */
static const char *quote(const char *s, size_t n, char *out)
{
    size_t k = 0;
    for (; k < n && k < QUOTE_MAX; k++) {
        unsigned char c = (unsigned char)s[k];
        out[k] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    if (n > QUOTE_MAX) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
    return out;
}

/* ---- fields ------------------------------------------------------------------ */

struct field {
    const char *p;
    size_t n;
};

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static struct field trim(const char *p, size_t n)
{
    while (n && is_blank(*p)) {
        p++;
        n--;
    }
    while (n && is_blank(p[n - 1]))
        n--;
    return (struct field){p, n};
}

/* Split the first two comma-separated fields off a line. Returns how many
 * were present (0..2); anything after the second comma is ignored. */
static int split2(const char *p, size_t n, struct field *a, struct field *b)
{
    const char *c = memchr(p, ',', n);
    if (!c) {
        *a = trim(p, n);
        return 1;
    }
    *a = trim(p, (size_t)(c - p));
    const char *q = c + 1;
    size_t rest = n - (size_t)(q - p);
    const char *d = memchr(q, ',', rest);
    *b = trim(q, d ? (size_t)(d - q) : rest);
    return 2;
}

enum num_rc { NUM_OK, NUM_EMPTY, NUM_BAD, NUM_NONFINITE };

/* Parse a decimal number (optionally with exponent) from a field. Hex,
 * whitespace inside the field, NaN and infinities are refused. */
static enum num_rc parse_num(struct field f, double *out)
{
    if (f.n == 0)
        return NUM_EMPTY;
    if (f.n >= FIELD_MAX)
        return NUM_BAD;
    char tmp[FIELD_MAX];
    memcpy(tmp, f.p, f.n);
    tmp[f.n] = '\0';
    bool plain = true;
    for (size_t k = 0; k < f.n; k++) {
        char c = tmp[k];
        if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' ||
              c == 'E')) {
            plain = false;
            break;
        }
    }
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (end == tmp || *end != '\0')
        return NUM_BAD;
    if (!plain)
        return isfinite(v) ? NUM_BAD : NUM_NONFINITE; /* "nan", "inf", "0x1p3" */
    if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1.0))
        return NUM_NONFINITE; /* 1e999 */
    *out = v;
    return NUM_OK;
}

/* Does the field read as a number to strtod, whatever parse_num makes of it
 * ("5", "nan", "inf", "0x10", "1e999")? */
static bool looks_numeric(struct field f)
{
    if (f.n == 0 || f.n >= FIELD_MAX)
        return false;
    char tmp[FIELD_MAX];
    memcpy(tmp, f.p, f.n);
    tmp[f.n] = '\0';
    char *end;
    (void)strtod(tmp, &end);
    return end != tmp && *end == '\0';
}

/* Does the line look like a header: a first field that starts like a name,
 * and no field that reads as a number ("t_seconds,requests"; not "nan,nan",
 * nor "time,count,5")? Sets *cols to the number of fields it names. */
static bool is_header(const char *p, size_t n, size_t *cols)
{
    struct field a = trim(p, n);
    const char *c = memchr(p, ',', n);
    if (c)
        a = trim(p, (size_t)(c - p));
    if (a.n == 0)
        return false;
    char c0 = a.p[0];
    if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_' || c0 == '"'))
        return false;
    size_t k = 0;
    for (const char *q = p, *end = p + n;; k++) {
        const char *d = memchr(q, ',', (size_t)(end - q));
        if (looks_numeric(trim(q, (size_t)((d ? d : end) - q))))
            return false;
        if (!d)
            break;
        q = d + 1;
    }
    *cols = k + 1;
    return true;
}

/* Drop trailing zeros (and a trailing point) from a "%.Nf" rendering. */
static void trim_zeros(char *s)
{
    if (!strchr(s, '.'))
        return;
    size_t n = strlen(s);
    while (n && s[n - 1] == '0')
        s[--n] = '\0';
    if (n && s[n - 1] == '.')
        s[--n] = '\0';
}

/* ---- the bucket array ----------------------------------------------------- */

struct series {
    double *v;
    size_t n;
    size_t cap;
};

static void series_reserve(struct series *s, size_t cap)
{
    s->v = xrealloc(s->v, cap * sizeof(*s->v));
    s->cap = cap;
}

/* Make bucket k exist (a gap before it NaN: no row, finish() tells) and set
 * it to v. k has been checked against TRACE_MAX_BUCKETS. A jump past twice
 * the capacity (a gap) gets exactly the room it needs. */
static void series_set(struct series *s, size_t k, double v)
{
    if (k >= s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        if (cap <= k)
            cap = k + 1;
        series_reserve(s, UTIL_MIN(cap, TRACE_MAX_BUCKETS));
    }
    if (k >= s->n) {
        for (size_t i = s->n; i < k; i++)
            s->v[i] = NAN;
        s->n = k + 1;
    }
    s->v[k] = v;
}

/* The grid becomes factor times finer: bucket k moves to k x factor, the
 * new buckets between are gaps. */
static void series_refine(struct series *s, size_t factor)
{
    size_t n = (s->n - 1) * factor + 1;
    double *v = xmalloc(n * sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = NAN;
    for (size_t k = 0; k < s->n; k++)
        v[k * factor] = s->v[k];
    xfree(s->v);
    s->v = v;
    s->n = s->cap = n;
}

/* ---- parsing ------------------------------------------------------------------ */

struct parser {
    struct series s;
    bool first;       /* no non-blank, non-comment line yet (a header may come) */
    bool have_row;    /* at least one data row seen */
    bool have_dt;     /* two data rows seen */
    int64_t t0_ms, dt_ms, prev_ms;
    size_t prev_k;
    size_t rows;      /* data rows so far */
    /* a row refined the grid from coarse_ms, the grid in force before it (0:
     * none did): the last such row's line and text, the rows after it and
     * those of them off the coarser grid */
    int64_t coarse_ms;
    size_t refine_line, after_refine, after_refine_off;
    char refine_text[QUOTE_MAX + 4];
    size_t cols;      /* columns the header names; 0 without a header (two are read) */
    int64_t max_span_ms; /* trace_opts' limit, 0 = none */
};

static void parser_init(struct parser *ps, const struct trace_opts *opts)
{
    memset(ps, 0, sizeof(*ps));
    ps->first = true;
    ps->max_span_ms = opts && opts->max_span_ms > 0 ? opts->max_span_ms : 0;
}

static int parse_time(struct field f, size_t line, int64_t *ms, struct trace_error *err)
{
    char q[QUOTE_MAX + 4];
    double t;
    switch (parse_num(f, &t)) {
    case NUM_OK:
        break;
    case NUM_EMPTY:
        return fail(err, -EINVAL, line, "t_seconds is empty");
    case NUM_NONFINITE:
        return fail(err, -EINVAL, line, "t_seconds '%s' is not finite", quote(f.p, f.n, q));
    default:
        return fail(err, -EINVAL, line, "t_seconds '%s' is not a number", quote(f.p, f.n, q));
    }
    if (fabs(t) > TRACE_MAX_ABS_T)
        return fail(err, -EINVAL, line, "t_seconds '%s' is out of range (|t| > 1e12)",
                    quote(f.p, f.n, q));
    *ms = llround(t * 1000.0);
    return 0;
}

static int parse_requests(struct field f, size_t line, double *out, struct trace_error *err)
{
    char q[QUOTE_MAX + 4];
    double v;
    switch (parse_num(f, &v)) {
    case NUM_OK:
        break;
    case NUM_EMPTY:
        return fail(err, -EINVAL, line, "requests is empty");
    case NUM_NONFINITE:
        return fail(err, -EINVAL, line, "requests '%s' is not finite", quote(f.p, f.n, q));
    default:
        return fail(err, -EINVAL, line, "requests '%s' is not a number", quote(f.p, f.n, q));
    }
    if (v < 0)
        return fail(err, -EINVAL, line, "requests '%s' is negative", quote(f.p, f.n, q));
    if (v > TRACE_MAX_REQUESTS)
        return fail(err, -EINVAL, line, "requests '%s' is over the limit of %g per row",
                    quote(f.p, f.n, q), TRACE_MAX_REQUESTS);
    *out = v + 0.0; /* -0 -> 0 */
    return 0;
}

/* Milliseconds as trimmed seconds for messages ("10", "1.5", "0.001"). */
static const char *secs(int64_t ms, char out[32])
{
    snprintf(out, 32, "%.3f", (double)ms / 1000.0);
    trim_zeros(out);
    return out;
}

/* Place a row's time (field f, parsed to t_ms) on the grid; sets *k to its
 * bucket. */
static int place(struct parser *ps, struct field f, int64_t t_ms, size_t line, size_t *k,
                 struct trace_error *err)
{
    char q[QUOTE_MAX + 4], a[32], b[32];
    if (!ps->have_row) {
        ps->t0_ms = t_ms;
        *k = 0;
        return 0;
    }
    if (t_ms <= ps->prev_ms)
        return fail(err, -EINVAL, line,
                    "t_seconds '%s' does not increase (the previous row is at %s s)",
                    quote(f.p, f.n, q), secs(ps->prev_ms, a));
    if (ps->max_span_ms > 0 && t_ms - ps->t0_ms > ps->max_span_ms)
        return fail(err, -E2BIG, line,
                    "t_seconds '%s' is %.1f days after the first row (%s s); at most %.0f days "
                    "are read (a mistyped time?)",
                    quote(f.p, f.n, q), (double)(t_ms - ps->t0_ms) / 86400e3,
                    secs(ps->t0_ms, a), (double)ps->max_span_ms / 86400e3);
    if (!ps->have_dt) {
        int64_t dt = t_ms - ps->t0_ms;
        if (dt < 1000)
            return fail(err, -EINVAL, line,
                        "t_seconds '%s' is %s s after the first row; the bucket width "
                        "must be at least 1 s",
                        quote(f.p, f.n, q), secs(dt, a));
        ps->dt_ms = dt;
        ps->have_dt = true;
        *k = 1;
        return 0;
    }
    int64_t off = t_ms - ps->t0_ms; /* > 0, <= 2e15 */
    int64_t kk = (off + ps->dt_ms / 2) / ps->dt_ms;
    int64_t miss = off - kk * ps->dt_ms;
    if (miss > TRACE_GRID_TOL_MS || miss < -TRACE_GRID_TOL_MS) {
        /* The first two rows gave a multiple of the width when a bucket was
         * skipped between them (a recorder's missed tick): a row on a finer
         * grid of whole seconds that holds every row so far refines it, if
         * it is one of the first TRACE_REFINE_ROWS. A later row may not: one
         * off-grid row would re-read the whole trace at a finer width, half
         * its buckets empty. finish() refuses a refinement when
         * TRACE_REFINE_ROWS rows or more follow and none is off the grid in
         * force before it (a second early off-grid row, measured against the
         * first rows' grid, passed and tripled every peak). */
        int64_t g = ps->dt_ms, h = off;
        while (h) {
            int64_t r = g % h;
            g = h;
            h = r;
        }
        size_t factor = g > 0 ? (size_t)(ps->dt_ms / g) : 0;
        if (g < 1000 || g % 1000 != 0 || off % 1000 != 0 || ps->dt_ms % 1000 != 0 ||
            (ps->s.n - 1) * factor + 1 > TRACE_MAX_BUCKETS)
            return fail(err, -EINVAL, line,
                        "t_seconds '%s' is off the %s s grid that starts at %s s",
                        quote(f.p, f.n, q), secs(ps->dt_ms, a), secs(ps->t0_ms, b));
        if (ps->rows >= TRACE_REFINE_ROWS)
            return fail(err, -EINVAL, line,
                        "t_seconds '%s' is off the %s s grid that starts at %s s (only the first "
                        "%d rows may show a finer one)",
                        quote(f.p, f.n, q), secs(ps->dt_ms, a), secs(ps->t0_ms, b),
                        TRACE_REFINE_ROWS);
        ps->coarse_ms = ps->dt_ms; /* the grid in force before this refinement */
        ps->refine_line = line;
        ps->after_refine = ps->after_refine_off = 0;
        quote(f.p, f.n, ps->refine_text);
        series_refine(&ps->s, factor);
        ps->dt_ms = g;
        ps->prev_k *= factor;
        kk = off / g;
    }
    if (ps->coarse_ms && ps->refine_line != line) {
        int64_t c = (off + ps->coarse_ms / 2) / ps->coarse_ms * ps->coarse_ms - off;
        ps->after_refine++;
        ps->after_refine_off += c > TRACE_GRID_TOL_MS || c < -TRACE_GRID_TOL_MS;
    }
    if ((uint64_t)kk <= ps->prev_k)
        return fail(err, -EINVAL, line,
                    "t_seconds '%s' falls in the same %s s bucket as the previous row",
                    quote(f.p, f.n, q), secs(ps->dt_ms, a));
    if ((uint64_t)kk >= TRACE_MAX_BUCKETS)
        return fail(err, -E2BIG, line,
                    "t_seconds '%s' is bucket %lld; traces are limited to %zu buckets",
                    quote(f.p, f.n, q), (long long)kk, TRACE_MAX_BUCKETS);
    *k = (size_t)kk;
    return 0;
}

/* A number in a column the header does not name (or past the second without
 * a header) is refused: "0,2,5" is a decimal comma ("0,2.5") more often than
 * an extra column, and reading it as 2 requests would be silent. Text and
 * empty extra fields are ignored; so is any column a header names. */
static int check_extra(const struct parser *ps, const char *p, size_t n, size_t line,
                       struct trace_error *err)
{
    size_t named = ps->cols > 2 ? ps->cols : 2, col = 1;
    char q[QUOTE_MAX + 4];
    for (const char *c = memchr(p, ',', n); c; c = memchr(c + 1, ',', n - (size_t)(c + 1 - p))) {
        if (++col <= named)
            continue;
        const char *e = memchr(c + 1, ',', n - (size_t)(c + 1 - p));
        struct field f = trim(c + 1, (size_t)((e ? e : p + n) - (c + 1)));
        if (!looks_numeric(f))
            continue;
        if (ps->cols)
            return fail(err, -EINVAL, line,
                        "'%s' has a number in column %zu, but the header names %zu column%s (a "
                        "decimal comma? write 0.5, not 0,5)",
                        quote(p, n, q), col, ps->cols, ps->cols == 1 ? "" : "s");
        return fail(err, -EINVAL, line,
                    "'%s' has a number in column %zu; without a header naming more columns a "
                    "row is t_seconds,requests (a decimal comma? write 0.5, not 0,5)",
                    quote(p, n, q), col);
    }
    return 0;
}

static int parse_row(struct parser *ps, const char *p, size_t n, size_t line,
                     struct trace_error *err)
{
    struct field ft, fr;
    char q[QUOTE_MAX + 4];
    if (split2(p, n, &ft, &fr) < 2)
        return fail(err, -EINVAL, line, "missing requests column in '%s'", quote(p, n, q));
    int64_t t_ms = 0;
    double req = 0;
    size_t k = 0;
    int rc = check_extra(ps, p, n, line, err);
    if (rc == 0)
        rc = parse_time(ft, line, &t_ms, err);
    if (rc == 0)
        rc = parse_requests(fr, line, &req, err);
    if (rc == 0)
        rc = place(ps, ft, t_ms, line, &k, err);
    if (rc != 0)
        return rc;
    series_set(&ps->s, k, req);
    ps->rows++;
    ps->have_row = true;
    ps->prev_ms = t_ms;
    ps->prev_k = k;
    return 0;
}

/* The last row of a valid trace gives its bucket count: read its time so the
 * array is allocated once, at its final size (no regrowth, no trim, no 2x
 * peak). Only a hint: 0 when the last row does not parse or is out of range;
 * the row-by-row checks still decide. */
static size_t last_row_hint(const char *buf, const char *end, const struct parser *ps)
{
    int64_t t0_ms = ps->t0_ms, dt_ms = ps->dt_ms;
    while (end > buf) {
        const char *nl = memrchr(buf, '\n', (size_t)(end - buf));
        const char *ls = nl ? nl + 1 : buf;
        size_t n = (size_t)(end - ls);
        if (n && ls[n - 1] == '\r')
            n--;
        struct field all = trim(ls, n), ft, fr;
        if (all.n != 0 && all.p[0] != '#') {
            double t;
            if (split2(all.p, all.n, &ft, &fr) < 2 || parse_num(ft, &t) != NUM_OK ||
                fabs(t) > TRACE_MAX_ABS_T)
                return 0;
            int64_t off = llround(t * 1000.0) - t0_ms;
            if (off <= 0 || (ps->max_span_ms > 0 && off > ps->max_span_ms))
                return 0;
            uint64_t k = (uint64_t)(off + dt_ms / 2) / (uint64_t)dt_ms;
            return k < TRACE_MAX_BUCKETS ? (size_t)k + 1 : 0;
        }
        if (!nl)
            break;
        end = nl;
    }
    return 0;
}

static int too_long(size_t line, struct trace_error *err)
{
    return fail(err, -E2BIG, line, "line is longer than %zu bytes (not a trace CSV?)",
                TRACE_MAX_LINE);
}

static int cr_only(size_t line, struct trace_error *err)
{
    return fail(err, -EINVAL, line,
                "lines end with a carriage return alone (an old Mac export?): use LF or CRLF");
}

/* One line (without its '\n') of the CSV. */
static int parse_line(struct parser *ps, const char *p, size_t n, size_t line,
                      struct trace_error *err)
{
    if (n && p[n - 1] == '\r')
        n--;
    if (memchr(p, '\r', n))
        return cr_only(line, err);
    if (n > TRACE_MAX_LINE)
        return too_long(line, err);
    if (line == 1 && n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) {
        p += 3; /* UTF-8 byte order mark */
        n -= 3;
    }
    struct field all = trim(p, n);
    if (all.n == 0 || all.p[0] == '#')
        return 0; /* blank or comment */
    if (ps->first) {
        ps->first = false;
        if (is_header(all.p, all.n, &ps->cols))
            return 0;
    }
    return parse_row(ps, p, n, line, err);
}

/* The trace parsed so far, or the error for an empty one. */
static int finish(struct parser *ps, struct trace **out, struct trace_error *err)
{
    if (!ps->have_row)
        return fail(err, -EINVAL, 0, "trace has no data rows");
    if (!ps->have_dt)
        return fail(err, -EINVAL, 0,
                    "trace has one data row: the bucket width is the spacing of the first "
                    "two rows");
    if (ps->coarse_ms && ps->after_refine >= TRACE_REFINE_ROWS && ps->after_refine_off == 0) {
        char a[32], b[32];
        return fail(err, -EINVAL, ps->refine_line,
                    "t_seconds '%s' is off the %s s grid that starts at %s s, which all %zu "
                    "rows after it keep",
                    ps->refine_text, secs(ps->coarse_ms, a), secs(ps->t0_ms, b),
                    ps->after_refine);
    }
    struct trace *t = xcalloc(1, sizeof(*t));
    t->t0_ms = ps->t0_ms;
    t->dt_ms = ps->dt_ms;
    t->n = ps->s.n;
    t->requests =
        ps->s.n == ps->s.cap ? ps->s.v : xrealloc(ps->s.v, ps->s.n * sizeof(double));
    ps->s.v = NULL;
    for (size_t i = 0; i < t->n; i++) {
        if (!isnan(t->requests[i]))
            continue;
        if (!t->missing)
            t->missing = xcalloc(t->n, 1);
        t->missing[i] = 1;
        t->requests[i] = 0;
        t->nmissing++;
    }
    *out = t;
    return 0;
}

int trace_parse_opts(const char *buf, size_t len, const struct trace_opts *opts,
                     struct trace **out, struct trace_error *err)
{
    struct parser ps;
    parser_init(&ps, opts);
    int rc = 0;
    if (len > TRACE_MAX_BYTES) {
        rc = fail(err, -E2BIG, 0, "trace is %zu bytes; the limit is %zu", len, TRACE_MAX_BYTES);
        goto out;
    }
    const char *p = buf, *end = buf + len;
    bool hinted = false;
    for (size_t line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        rc = parse_line(&ps, p, (size_t)(eol - p), line, err);
        if (rc != 0)
            goto out;
        if (ps.have_dt && !hinted) {
            hinted = true;
            size_t hint = last_row_hint(p, end, &ps);
            if (hint > ps.s.cap)
                series_reserve(&ps.s, hint);
        }
        p = nl ? nl + 1 : end;
    }
    rc = finish(&ps, out, err);
out:
    xfree(ps.s.v);
    return rc;
}

int trace_parse(const char *buf, size_t len, struct trace **out, struct trace_error *err)
{
    return trace_parse_opts(buf, len, NULL, out, err);
}

/* ---- files ------------------------------------------------------------------- */

/* Lines streaming in: complete lines go to the parser from the chunk they
 * arrive in; only an unfinished line is copied (into part), at most
 * TRACE_MAX_LINE bytes of it. */
struct stream {
    struct parser ps;
    struct util_buf part;
    size_t line;  /* number of the line being read */
    size_t total; /* bytes so far */
};

static int stream_feed(struct stream *st, const char *p, size_t n, struct trace_error *err)
{
    st->total += n;
    if (st->total > TRACE_MAX_BYTES)
        return fail(err, -E2BIG, 0, "trace is larger than the limit of %zu bytes",
                    TRACE_MAX_BYTES);
    const char *end = p + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t k = (size_t)((nl ? nl : end) - p);
        if (st->part.len + k > TRACE_MAX_LINE + 1) { /* +1: a '\r' before the '\n' */
            if (memchr(p, '\r', k) || (st->part.len && memchr(st->part.data, '\r', st->part.len)))
                return cr_only(st->line, err);
            return too_long(st->line, err);
        }
        if (!nl) {
            util_buf_append(&st->part, p, k);
            return 0;
        }
        int rc;
        if (st->part.len) {
            util_buf_append(&st->part, p, k);
            rc = parse_line(&st->ps, st->part.data, st->part.len, st->line, err);
            util_buf_reset(&st->part);
        } else {
            rc = parse_line(&st->ps, p, k, st->line, err);
        }
        if (rc != 0)
            return rc;
        st->line++;
        p = nl + 1;
    }
    return 0;
}

/* A regular file over the limit that is not gzip is refused before reading. */
static int check_size(int fd, const char *name, struct trace_error *err)
{
    struct stat sb;
    unsigned char magic[2];
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size <= TRACE_MAX_BYTES)
        return 0;
    if (pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b)
        return 0; /* compressed: the limit applies to what it inflates to */
    return fail(err, -E2BIG, 0, "%s: %lld bytes; the limit is %zu", name, (long long)sb.st_size,
                TRACE_MAX_BYTES);
}

/* The file being read, in reads of up to TRACE_READ_CHUNK bytes into in:
 * zs.next_in and zs.avail_in are the bytes read and not yet used (inflate's
 * input for gzip), nread all the reads returned, so nread - zs.avail_in is
 * the offset in the file of the first unused byte. */
struct source {
    int fd;
    const char *name; /* for messages: the path, or "stdin" */
    unsigned char *in;
    uint64_t nread;
    bool eof; /* a read returned 0 */
    z_stream zs;
};

/* Top the buffer up: the unused bytes move to its start and reads fill the
 * rest until it is full or the file ends, so a pipe's short reads still give
 * whole chunks, as zlib's reader did. An I/O error is -errno naming the file. */
static int source_read(struct source *src, struct trace_error *err)
{
    size_t have = src->zs.avail_in;
    if (have)
        memmove(src->in, src->zs.next_in, have);
    while (have < TRACE_READ_CHUNK && !src->eof) {
        ssize_t r = read(src->fd, src->in + have, TRACE_READ_CHUNK - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            return fail(err, -e, 0, "%s: %s", src->name, strerror(e));
        }
        src->eof = r == 0;
        have += (size_t)r;
        src->nread += (uint64_t)r;
    }
    src->zs.next_in = src->in;
    src->zs.avail_in = (uInt)have;
    return 0;
}

/* A plain file: its bytes go to the parser as they are read. */
static int load_plain(struct source *src, struct stream *st, struct trace_error *err)
{
    while (src->zs.avail_in > 0) {
        int rc = stream_feed(st, (const char *)src->zs.next_in, src->zs.avail_in, err);
        if (rc != 0)
            return rc;
        src->zs.avail_in = 0;
        rc = source_read(src, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Corrupt or truncated gzip data, in zlib's words. */
static int corrupt(const struct source *src, const char *why, struct trace_error *err)
{
    return fail(err, -EINVAL, 0, "%s: corrupt gzip data: %s", src->name, why);
}

/* After a gzip member, skip zero bytes (padding: Python's gzip module skips
 * them too; gzip -d stops there, warning of trailing garbage). Returns 0 when the file ends there, 1 when another
 * member starts (its magic bytes; inflate is reset to read it on as the same
 * stream, as RFC 1952 reads members), and an error naming the offset for
 * anything else (zlib's gzread ignored it: a plain CSV appended to a
 * compressed one was lost without a word). */
static int next_member(struct source *src, struct trace_error *err)
{
    z_stream *zs = &src->zs;
    for (;;) {
        while (zs->avail_in > 0 && zs->next_in[0] == 0) {
            zs->next_in++;
            zs->avail_in--;
        }
        if (zs->avail_in >= 2 || src->eof)
            break;
        int rc = source_read(src, err);
        if (rc != 0)
            return rc;
    }
    if (zs->avail_in == 0)
        return 0;
    if (zs->avail_in >= 2 && zs->next_in[0] == 0x1f && zs->next_in[1] == 0x8b) {
        inflateReset(zs);
        return 1;
    }
    return fail(err, -EINVAL, 0, "%s: data after the end of the gzip stream at byte %llu",
                src->name, (unsigned long long)(src->nread - zs->avail_in));
}

/* A gzip file (inflate initialised for it): its members inflate as one
 * stream into the parser, TRACE_READ_CHUNK bytes at a time at most. */
static int load_gzip(struct source *src, struct stream *st, struct trace_error *err)
{
    char *out = xmalloc(TRACE_READ_CHUNK);
    int rc = 0;
    for (;;) {
        if (src->zs.avail_in == 0) {
            rc = source_read(src, err);
            if (rc != 0)
                goto out;
            if (src->zs.avail_in == 0) {
                rc = corrupt(src, "unexpected end of file", err);
                goto out;
            }
        }
        src->zs.next_out = (Bytef *)out;
        src->zs.avail_out = TRACE_READ_CHUNK;
        int z = inflate(&src->zs, Z_NO_FLUSH);
        rc = stream_feed(st, out, TRACE_READ_CHUNK - src->zs.avail_out, err);
        if (rc != 0)
            goto out;
        if (z == Z_STREAM_END) {
            rc = next_member(src, err);
            if (rc <= 0)
                goto out;
            rc = 0;
        } else if (z == Z_MEM_ERROR) {
            rc = fail(err, -ENOMEM, 0, "%s: out of memory inflating", src->name);
            goto out;
        } else if (z != Z_OK) {
            rc = corrupt(src, src->zs.msg ? src->zs.msg : "compressed data error", err);
            goto out;
        }
    }
out:
    xfree(out);
    return rc;
}

int trace_load_file_opts(const char *path, const struct trace_opts *opts, struct trace **out,
                         struct trace_error *err)
{
    struct stream st = {.line = 1};
    parser_init(&st.ps, opts);
    bool is_stdin = strcmp(path, "-") == 0;
    struct source src = {.name = is_stdin ? "stdin" : path};
    bool inflating = false;
    int rc;
    src.fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (src.fd < 0) {
        int e = errno;
        rc = fail(err, -e, 0, "%s: %s", src.name, strerror(e));
        goto out;
    }
    rc = check_size(src.fd, src.name, err);
    if (rc != 0)
        goto out;
    src.in = xmalloc(TRACE_READ_CHUNK);
    rc = source_read(&src, err);
    if (rc != 0)
        goto out;
    /* gzip by its magic bytes, whatever the name; anything else is read as it is */
    if (src.zs.avail_in >= 2 && src.in[0] == 0x1f && src.in[1] == 0x8b) {
        if (inflateInit2(&src.zs, 16 + MAX_WBITS) != Z_OK) {
            rc = fail(err, -ENOMEM, 0, "%s: cannot start reading", src.name);
            goto out;
        }
        inflating = true;
        rc = load_gzip(&src, &st, err);
    } else {
        rc = load_plain(&src, &st, err);
    }
    if (rc != 0)
        goto out;
    if (st.part.len) {
        rc = parse_line(&st.ps, st.part.data, st.part.len, st.line, err);
        if (rc != 0)
            goto out;
    }
    rc = finish(&st.ps, out, err);
out:
    if (inflating)
        inflateEnd(&src.zs);
    if (src.fd >= 0 && !is_stdin)
        close(src.fd); /* stdin stays open: it is the caller's */
    xfree(src.in);
    util_buf_free(&st.part);
    xfree(st.ps.s.v);
    return rc;
}

int trace_load_file(const char *path, struct trace **out, struct trace_error *err)
{
    return trace_load_file_opts(path, NULL, out, err);
}

/* ---- the rest ----------------------------------------------------------------- */

void trace_free(struct trace *t)
{
    if (!t)
        return;
    xfree(t->requests);
    xfree(t->missing);
    xfree(t);
}

double trace_total(const struct trace *t)
{
    /* Neumaier summation: traces add billions of requests over 10^6 rows. */
    double sum = 0, c = 0;
    for (size_t k = 0; k < t->n; k++) {
        double v = t->requests[k], s = sum + v;
        c += fabs(sum) >= fabs(v) ? (sum - s) + v : (v - s) + sum;
        sum = s;
    }
    return sum + c;
}

void trace_write_header(FILE *f)
{
    fputs("t_seconds,requests\n", f);
}

void trace_write_row(FILE *f, double t_seconds, double requests)
{
    char ts[64], rs[64];
    double t = round(t_seconds * 1000.0) / 1000.0;
    if (t == 0)
        t = 0; /* no "-0" */
    snprintf(ts, sizeof(ts), "%.3f", t);
    trim_zeros(ts);
    if (requests == floor(requests) && fabs(requests) < 1e15)
        snprintf(rs, sizeof(rs), "%.0f", requests + 0.0);
    else
        snprintf(rs, sizeof(rs), "%.9g", requests);
    fprintf(f, "%s,%s\n", ts, rs);
}

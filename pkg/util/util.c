/* SPDX-License-Identifier: Apache-2.0 */
/* util: allocation wrappers, growable buffers and strict parsing helpers.
 *
 * Everything here is pure except the clocks (util_now_unix_ms(),
 * util_now_boot_ms()); allocation failure
 * aborts the process with a message (see util.h). */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static void oom(size_t n)
{
    fprintf(stderr, "gpuscaler: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (!p)
        oom(nmemb * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void xfree(void *p)
{
    free(p);
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0 || !s)
        oom(strlen(fmt));
    return s;
}

/* ---- buffers ------------------------------------------------------------ */

static void buf_reserve(struct util_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void util_buf_append(struct util_buf *b, const void *p, size_t n)
{
    buf_reserve(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void util_buf_puts(struct util_buf *b, const char *s)
{
    util_buf_append(b, s, strlen(s));
}

void util_buf_put_xml(struct util_buf *b, const char *s)
{
    while (*s) {
        switch (*s) {
        case '&': util_buf_puts(b, "&amp;"); break;
        case '<': util_buf_puts(b, "&lt;"); break;
        case '>': util_buf_puts(b, "&gt;"); break;
        case '"': util_buf_puts(b, "&quot;"); break;
        default:
            if ((unsigned char)*s >= 0x80) { /* invalid UTF-8 is no XML: U+FFFD for it */
                int n = util_utf8_seq(s);
                if (n > 0)
                    util_buf_append(b, s, (size_t)n);
                else
                    util_buf_puts(b, "\xef\xbf\xbd");
                s += n > 0 ? n : 1;
                continue;
            }
            if ((unsigned char)*s >= 0x20)
                util_buf_append(b, s, 1);
        }
        s++;
    }
}

void util_buf_printf(struct util_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

int util_utf8_seq(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    int n;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* past U+10FFFF */
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

size_t util_utf8_scrub(char *s)
{
    size_t bad = 0;
    while (*s) {
        int n = util_utf8_seq(s);
        if (n == 0) {
            *s++ = '?';
            bad++;
        } else {
            s += n;
        }
    }
    return bad;
}

void util_buf_json_str(struct util_buf *b, const char *s)
{
    util_buf_append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) {
            int n = util_utf8_seq((const char *)p);
            if (n == 0) {
                util_buf_append(b, "\\ufffd", 6);
            } else {
                util_buf_append(b, p, (size_t)n);
                p += n - 1;
            }
            continue;
        }
        switch (*p) {
        case '"': util_buf_append(b, "\\\"", 2); break;
        case '\\': util_buf_append(b, "\\\\", 2); break;
        case '\n': util_buf_append(b, "\\n", 2); break;
        case '\r': util_buf_append(b, "\\r", 2); break;
        case '\t': util_buf_append(b, "\\t", 2); break;
        default:
            if (*p < 0x20)
                util_buf_printf(b, "\\u%04x", *p);
            else
                util_buf_append(b, p, 1);
        }
    }
    util_buf_append(b, "\"", 1);
}

void util_buf_reset(struct util_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void util_buf_free(struct util_buf *b)
{
    xfree(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *util_buf_steal(struct util_buf *b)
{
    char *d = b->data;
    if (!d)
        d = xstrdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

/* ---- parsing -------------------------------------------------------------- */

int util_parse_double(const char *s, double *out)
{
    /* strtod skips leading white space (also \n, \r, \v, \f) and reads hex */
    if (!s || !*s || isspace((unsigned char)s[0]))
        return -EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* ERANGE with a finite value is an underflow: the nearest double */
    if (end == s || *end != '\0' || !isfinite(v))
        return -EINVAL;
    if (strpbrk(s, "xXpP"))
        return -EINVAL;
    *out = v;
    return 0;
}

int util_parse_int64(const char *s, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)s[0]) || s[0] == '+')
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE)
        return -EINVAL;
    *out = (int64_t)v;
    return 0;
}

/* The number at the start of a duration's segment: decimal digits with at
 * most one point and at least one digit ("90", "1.5", ".5", "5."), nothing
 * else (no sign, exponent or hex). Returns its end, or NULL. */
static const char *duration_number(const char *p, double *v)
{
    const char *q = p;
    size_t digits = 0, points = 0;
    for (; (*q >= '0' && *q <= '9') || *q == '.'; q++) {
        if (*q == '.')
            points++;
        else
            digits++;
    }
    if (digits == 0 || points > 1)
        return NULL;
    char *end;
    errno = 0;
    *v = strtod(p, &end); /* an overflow ("1" and 400 zeros) is +inf: too long, well formed */
    return end == q ? q : NULL;
}

int util_parse_duration_ms(const char *s, int64_t *out_ms)
{
    const double max_ms = (double)UTIL_DURATION_MAX_MS;
    if (!s || !*s)
        return -EINVAL;
    double total = 0;
    const char *p = s;
    while (*p) {
        double v;
        bool first = p == s;
        p = duration_number(p, &v);
        if (!p)
            return -EINVAL;
        double unit;
        if (first && *p == '\0') {
            unit = 1000; /* the whole string one number: seconds ("120", "0") */
        } else if (strncmp(p, "ms", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (*p == 's') {
            unit = 1000;
            p++;
        } else if (*p == 'm') {
            unit = 60000;
            p++;
        } else if (*p == 'h') {
            unit = 3600000;
            p++;
        } else if (*p == 'd') {
            unit = 86400000;
            p++;
        } else {
            return -EINVAL;
        }
        total += v * unit;
    }
    *out_ms = total > max_ms ? UTIL_DURATION_MAX_MS + 1 : (int64_t)llround(total);
    return 0;
}

void util_format_duration(int64_t ms, char *out, size_t outlen)
{
    if (outlen == 0)
        return;
    if (ms < 0) {
        snprintf(out, outlen, "-");
        return;
    }
    if (ms % 1000 != 0 && ms < 60000) {
        if (ms < 1000)
            snprintf(out, outlen, "%lldms", (long long)ms);
        else
            snprintf(out, outlen, "%.3gs", (double)ms / 1000.0);
        return;
    }
    /* from a minute on, to a tenth of a second in h/m/s (an elapsed clock
     * is seldom whole seconds: "%.3g" made 1215034 ms "1.22e+03s") */
    long long tenths = (long long)((ms + 50) / 100);
    long long s = tenths / 10, h = s / 3600, m = (s % 3600) / 60, sec = s % 60;
    char tmp[64];
    size_t n = 0;
    tmp[0] = '\0';
    if (h)
        n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, "%lldh", h);
    if (m)
        n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, "%lldm", m);
    if (tenths % 10)
        snprintf(tmp + n, sizeof(tmp) - n, "%lld.%llds", sec, tenths % 10);
    else if (sec || n == 0)
        snprintf(tmp + n, sizeof(tmp) - n, "%llds", sec);
    snprintf(out, outlen, "%s", tmp);
}

int util_parse_ranged(const char *name, enum util_kind kind, const struct util_range *r,
                      const char *value, void *out, char *err, size_t errlen)
{
    static const char *const what[] = {"a number", "a whole number", "a duration"};
    const char *unit = r->unit ? r->unit : "";
    const char *open = r->unit ? " (" : "", *close = r->unit ? ")" : "";
    double v = 0;
    int64_t i = 0;
    int rc = -EINVAL;
    if (value) {
        if (kind == UTIL_NUMBER)
            rc = util_parse_double(value, &v);
        else if (kind == UTIL_WHOLE)
            rc = util_parse_int64(value, &i);
        else
            rc = util_parse_duration_ms(value, &i);
    }
    if (rc != 0) {
        if (kind == UTIL_DURATION)
            snprintf(err, errlen, "%s: '%.40s' is not a duration (like 90s, 2m, 1h30m)", name,
                     value ? value : "");
        else
            snprintf(err, errlen, "%s: '%.40s' is not %s%s%s%s", name, value ? value : "",
                     what[kind], open, unit, close);
        return -EINVAL;
    }
    if (kind == UTIL_DURATION && i == 0 && strpbrk(value, "123456789")) {
        snprintf(err, errlen, "%s: %.40s is shorter than 1ms (write 0 for none)", name, value);
        return -EINVAL;
    }
    if (kind != UTIL_NUMBER)
        v = (double)i;
    if (v < r->min || v > r->max || (r->min_exclusive && v == r->min)) {
        const char *above = r->min_exclusive ? "above " : "";
        if (kind == UTIL_DURATION) {
            char lo[32], hi[32];
            util_format_duration((int64_t)r->min, lo, sizeof(lo));
            util_format_duration((int64_t)r->max, hi, sizeof(hi));
            snprintf(err, errlen, "%s: %.40s is out of range (%s%s to %s)", name, value, above,
                     lo, hi);
        } else {
            snprintf(err, errlen, "%s: %.40s is out of range (%s%g to %g%s%s)", name, value,
                     above, r->min, r->max, r->unit ? ", " : "", unit);
        }
        return -EINVAL;
    }
    if (kind == UTIL_DURATION && r->step > 0 && i % (int64_t)r->step != 0) {
        char step[32];
        util_format_duration((int64_t)r->step, step, sizeof(step));
        snprintf(err, errlen, "%s: %.40s is not a whole number of %s", name, value, step);
        return -EINVAL;
    }
    if (kind == UTIL_NUMBER) {
        memcpy(out, &v, sizeof(v));
    } else if (kind == UTIL_WHOLE) {
        int32_t i32 = (int32_t)i;
        memcpy(out, &i32, sizeof(i32));
    } else {
        memcpy(out, &i, sizeof(i));
    }
    return 0;
}

void util_format_rfc3339(int64_t unix_ms, char *out, size_t outlen)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const void *util_table_find(const void *table, size_t n, size_t size, const char *name)
{
    const char *p = table;
    for (size_t i = 0; i < n; i++, p += size) {
        const char *entry;
        memcpy(&entry, p, sizeof(entry)); /* the first member, whatever the struct */
        if (strcmp(entry, name) == 0)
            return p;
    }
    return NULL;
}

int util_parse_bool(const char *s, bool *out)
{
    if (!s)
        return -EINVAL;
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

int64_t util_now_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_now_boot_ms(void)
{
    struct timespec ts;
#ifdef CLOCK_BOOTTIME
    if (clock_gettime(CLOCK_BOOTTIME, &ts) == 0)
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
#endif
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

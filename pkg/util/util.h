/* SPDX-License-Identifier: Apache-2.0 */
/* util: allocation wrappers, logging, growable buffers and strict number and
 * duration parsing shared by every other module.
 *
 * Out of memory aborts through the x*alloc wrappers (there is no recovery
 * worth having from it in a daemon of this size); every other failure is an
 * errno-style negative return. Logging is the one piece of process-wide state:
 * the output format and level, set once by main. */
#ifndef GPUSCALER_UTIL_H
#define GPUSCALER_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UTIL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define UTIL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define UTIL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define util_container_of(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/** floor(a / b) for b > 0, also for negative a. */
static inline int64_t util_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/** Allocate or abort. xfree(NULL) is a no-op. */
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void xfree(void *p);
/** printf into a newly allocated string (caller frees with xfree). */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- logging ---------------------------------------------------------- */

enum util_log_level { UTIL_LOG_DEBUG, UTIL_LOG_INFO, UTIL_LOG_WARN, UTIL_LOG_ERROR };
enum util_log_format { UTIL_LOG_LOGFMT, UTIL_LOG_JSON };

/** Set the process-wide log format and minimum level (default logfmt, info). */
void util_log_setup(enum util_log_format fmt, enum util_log_level min);
/** Parse "json"/"logfmt" and "debug"/"info"/"warn"/"error"; 0 or -EINVAL. */
int util_log_format_parse(const char *s, enum util_log_format *out);
int util_log_level_parse(const char *s, enum util_log_level *out);
/** Redirect log output to a FILE* (tests); NULL restores stderr. */
void util_log_set_stream(void *file);

/**
 * Write one log line: time, level, subsystem, optional namespace and
 * deployment (NULL omits them), the message. The message is escaped so that
 * one event is always one line.
 */
void util_log(enum util_log_level lvl, const char *subsys, const char *ns, const char *deploy,
              const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define LOG_DEBUG(sub, ...) util_log(UTIL_LOG_DEBUG, sub, NULL, NULL, __VA_ARGS__)
#define LOG_INFO(sub, ...) util_log(UTIL_LOG_INFO, sub, NULL, NULL, __VA_ARGS__)
#define LOG_WARN(sub, ...) util_log(UTIL_LOG_WARN, sub, NULL, NULL, __VA_ARGS__)
#define LOG_ERROR(sub, ...) util_log(UTIL_LOG_ERROR, sub, NULL, NULL, __VA_ARGS__)
/** Lines about a workload always carry namespace and deployment. */
#define LOGW_DEBUG(sub, ns, d, ...) util_log(UTIL_LOG_DEBUG, sub, ns, d, __VA_ARGS__)
#define LOGW_INFO(sub, ns, d, ...) util_log(UTIL_LOG_INFO, sub, ns, d, __VA_ARGS__)
#define LOGW_WARN(sub, ns, d, ...) util_log(UTIL_LOG_WARN, sub, ns, d, __VA_ARGS__)
#define LOGW_ERROR(sub, ns, d, ...) util_log(UTIL_LOG_ERROR, sub, ns, d, __VA_ARGS__)

/* ---- growable byte buffer -------------------------------------------- */

/** A growable buffer, always NUL-terminated after len bytes. Zero-init is valid. */
struct util_buf {
    char *data;
    size_t len;
    size_t cap;
};

/** Append n bytes. Aborts on OOM. */
void util_buf_append(struct util_buf *b, const void *p, size_t n);
void util_buf_puts(struct util_buf *b, const char *s);
/** Append s as XML/SVG text: & < > " escaped, control characters dropped. */
void util_buf_put_xml(struct util_buf *b, const char *s);
void util_buf_printf(struct util_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Append s as a JSON string literal, quotes included; a byte that is not
 *  part of a valid UTF-8 sequence is written as \ufffd, so the literal is
 *  always valid JSON. */
void util_buf_json_str(struct util_buf *b, const char *s);
/** Length of the valid UTF-8 sequence at p (1 to 4; ASCII NUL counts 1), or 0
 *  when p starts none (a stray continuation byte, an overlong form, a
 *  surrogate, past U+10FFFF, or cut short). */
int util_utf8_seq(const char *p);
/** Replace in place each byte of s that starts no valid UTF-8 sequence with
 *  '?' (messages that quote outside input, cut to a length, before a JSON
 *  library that refuses invalid UTF-8 sees them). Returns how many. */
size_t util_utf8_scrub(char *s);
void util_buf_reset(struct util_buf *b);
/** Release the storage; the buffer is zeroed and reusable. */
void util_buf_free(struct util_buf *b);
/** Take ownership of the data (never NULL); the buffer is zeroed. */
char *util_buf_steal(struct util_buf *b);

/* ---- strict parsing --------------------------------------------------- */

/**
 * Parse a whole string as a finite double / int64. Leading or trailing
 * garbage (white space of any kind included), empty strings, overflow, hex,
 * NaN and infinities are -EINVAL. An underflow is not an error, as in Go's
 * strconv.ParseFloat: "1e-310" is that subnormal, "1e-400" is 0.
 */
int util_parse_double(const char *s, double *out);
int util_parse_int64(const char *s, int64_t *out);

/** Longest duration util_parse_duration_ms() represents: 365 days. */
#define UTIL_DURATION_MAX_MS (365LL * 24 * 3600 * 1000)

/**
 * Parse a duration into milliseconds: Go-style ("90s", "2m", "1h30m",
 * "250ms", "1.5h"; units ms, s, m, h and d) or a bare number of seconds
 * ("120", "0"). Each number is decimal digits with at most one point: a
 * sign, an exponent ("1e3s") or hex ("0x3C") is -EINVAL, as are other
 * malformed and negative values. A well-formed duration longer than
 * UTIL_DURATION_MAX_MS, however long ("100000h", "99999999999999999999s"), returns 0 with
 * *out_ms = UTIL_DURATION_MAX_MS + 1: longer than any limit, so the caller's
 * range check reports it as out of range, like any other too-long value,
 * and never as "not a duration". Callers must check the range.
 */
int util_parse_duration_ms(const char *s, int64_t *out_ms);

/** What a configuration key holds (util_parse_ranged). */
enum util_kind { UTIL_NUMBER, UTIL_WHOLE, UTIL_DURATION };

/** The range a configuration value must fall in: [min, max], min excluded
 *  when min_exclusive; durations in ms. unit, when not NULL, is named in the
 *  messages ("requests/s per GPU"). step, when above 0, is what a duration
 *  must be a whole multiple of, in ms (60000: whole minutes). */
struct util_range {
    double min, max;
    bool min_exclusive;
    const char *unit;
    double step;
};

/**
 * Parse the value of configuration key `name` as a number, a whole number or
 * a duration (the parsers above) and check it against r: the one place the
 * policy, simulator and plan keys' values are read. On success stores it in
 * *out, a double (UTIL_NUMBER), an int32_t (UTIL_WHOLE; r must lie within
 * int32) or an int64_t of ms (UTIL_DURATION), and returns 0. Otherwise
 * returns -EINVAL with "<name>: '<value>' is not a number", "<name>: <value>
 * is out of range (<min> to <max>)" or the like in err, and stores nothing.
 * A duration that is not 0 but rounds to 0 ms ("0.4ms", "0.0001s") is
 * refused too: 0 often means "none" or "learn it".
 */
int util_parse_ranged(const char *name, enum util_kind kind, const struct util_range *r,
                      const char *value, void *out, char *err, size_t errlen);

/** Format milliseconds as a compact duration ("2m", "1h30m", "1.5s", "250ms"); from a
 *  minute on to a tenth of a second ("20m15s" for 1215034, "59m59.5s"). */
void util_format_duration(int64_t ms, char *out, size_t outlen);

/** Format a UNIX time in ms as RFC 3339 UTC ("2026-11-22T10:00:00Z"). */
void util_format_rfc3339(int64_t unix_ms, char *out, size_t outlen);

/**
 * The entry named `name` of a table of n entries of `size` bytes each, every
 * entry a name (const char *) or a struct whose first member is its name: the
 * lookup of the configuration modules' key tables. NULL when there is none.
 */
const void *util_table_find(const void *table, size_t n, size_t size, const char *name);

/** Parse "true"/"false" (also "1"/"0", "yes"/"no", "on"/"off"). */
int util_parse_bool(const char *s, bool *out);

/** Wall-clock time in ms since the epoch (only for edges: main, I/O). */
int64_t util_now_unix_ms(void);
/** Time in ms since boot, suspends included (CLOCK_BOOTTIME; CLOCK_MONOTONIC
 *  where there is none): never set like the wall clock, and, unlike
 *  CLOCK_MONOTONIC, not stopped while the machine sleeps, when the pods on
 *  other machines keep serving. */
int64_t util_now_boot_ms(void);

#endif

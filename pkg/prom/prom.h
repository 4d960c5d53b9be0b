/* SPDX-License-Identifier: Apache-2.0 */
/* prom: a streaming parser for the Prometheus text exposition format 0.0.4
 * and the OpenMetrics 1.0 text format, plus PromQL's histogram_quantile.
 *
 * The parser is a push parser: the caller feeds the bytes of one scrape as
 * they arrive (a line may be split across chunks at any byte) and the parser
 * calls back once per sample. Memory is bounded: the only buffers are a
 * partial-line buffer and per-line scratch, both capped by the line-length
 * limit, and the whole exposition is capped by a total-size limit.
 *
 * One strictness: any malformed line is an error that stops the parse, with
 * the line number, column and a reason. Samples before the bad line have
 * already been delivered, so a consumer must stage what it collects and
 * discard it when feed/finish fail (the scrape counts the pod as failed).
 *
 * Grammar accepted (both formats unless noted):
 *  - `# HELP name text` (any UTF-8; escapes are not interpreted, as HELP is
 *    not reported), `# TYPE name type` with type one
 *    of counter, gauge, histogram, summary, untyped, and the OpenMetrics
 *    types gaugehistogram (also spelled gauge_histogram), stateset, info,
 *    unknown (= untyped). In the 0.0.4 format a `# HELP` or `# TYPE` with
 *    nothing after it is a comment, as in prometheus/common's expfmt, and a
 *    `# HELP`'s name ends where its characters do, the rest being its text
 *    (`# HELP foo-bar x` is foo's), as promlex.l reads it; promparse.go's
 *    dropping of the text's first byte is followed for its UTF-8 check.
 *  - OpenMetrics only: `# UNIT name unit`, and `# EOF`, which must be the
 *    last line; any other `#` line is an error. In the 0.0.4 format any other
 *    `#` line (and `# UNIT`, `# EOF`) is a comment.
 *  - samples `name{label="value",...} value [timestamp] [# {exemplar} v [ts]]`:
 *    metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*,
 *    or, as Prometheus 3 reads them, quoted UTF-8 names: the metric name
 *    quoted alone inside the braces, anywhere among the labels
 *    (`{"http.server.requests",method="GET"} 3`), label names quoted
 *    (`{"my.label"="v"}`), both unescaped as label values are, non-empty,
 *    no NUL; and `# HELP "name"`, `# TYPE "name"` (the bytes between the
 *    quotes, escapes not read, as Prometheus takes them). A name both
 *    before and inside the braces, two inside, or none is an error;
 *    label values any UTF-8 but NUL, with the escapes \\ \" \n; any other
 *    backslash sequence is kept as is, backslash included ("a\z" is the 4
 *    bytes a\z), as Prometheus' scraper does; optional trailing comma, and
 *    in the 0.0.4 format an optional comma between pairs (promparse.go);
 *    duplicate label names rejected.
 *  - values in Go strconv.ParseFloat syntax: decimal with optional sign,
 *    fraction and exponent (1e-05, .5, 5.), and case-insensitive NaN, Inf,
 *    +Inf, -Inf, Infinity. Hexadecimal floats and '_' separators are
 *    rejected.
 *  - timestamps: 0.0.4: an integer in milliseconds; OpenMetrics: a float in
 *    seconds. Both are reported in milliseconds (OpenMetrics truncated
 *    toward zero, as Prometheus' int64(ts * 1000)). A
 *    well-formed timestamp beyond int64 milliseconds is ignored: the sample
 *    is kept without one (has_timestamp false).
 *  - exemplars are validated (label set, value, optional timestamp) and
 *    skipped. They are accepted in both formats.
 *  - a `_bucket` sample of a histogram family without a numeric `le` label,
 *    or a summary's quantile sample without a numeric `quantile`, is kept,
 *    with le (quantile) NaN, as Prometheus keeps it.
 *  - lenient on layout, like Prometheus' own scraper: blanks and tabs may
 *    repeat between tokens (also inside `{}`), leading blanks, blank lines
 *    and a trailing '\r' are ignored, and a final line without '\n' is
 *    accepted. A line over max_line is an error, but an unwanted sample's
 *    (prom_parser_want), a comment's (0.0.4) and a # HELP's whose name ends
 *    within max_line: the comment is skipped, the # HELP cut at max_line
 *    (its family set), as Prometheus has no line limit.
 *
 * Families: a sample belongs to the family of the preceding # TYPE/# HELP/
 * # UNIT line when its name is the family name or the family name plus a
 * suffix valid for the family's type (counter: _total _created; histogram:
 * _bucket _sum _count _created; gaugehistogram: _bucket _gsum _gcount;
 * summary: _sum _count _created; info: _info). Any other sample is its own
 * untyped family. */
#ifndef GPUSCALER_PROM_H
#define GPUSCALER_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Default cap on one line, '\n' excluded. */
#define PROM_DEFAULT_MAX_LINE (64u * 1024u)
/** Default cap on a whole exposition. */
#define PROM_DEFAULT_MAX_TOTAL (16u * 1024u * 1024u)
/** Default cap on the labels of one delivered sample (its metric name, quoted
 *  or not, is not one; Prometheus' scrape label_limit, unset by default). */
#define PROM_DEFAULT_MAX_LABELS 256u

enum prom_format {
    PROM_FMT_TEXT = 0,    /**< text/plain; version=0.0.4 */
    PROM_FMT_OPENMETRICS, /**< application/openmetrics-text; version=1.0.0 */
};

enum prom_type {
    PROM_UNTYPED = 0, /**< no # TYPE, "untyped" or OpenMetrics "unknown" */
    PROM_COUNTER,
    PROM_GAUGE,
    PROM_HISTOGRAM,
    PROM_SUMMARY,
    PROM_GAUGE_HISTOGRAM,
    PROM_STATESET,
    PROM_INFO,
};

/** Which part of its family a sample is. */
enum prom_suffix {
    PROM_SUFFIX_NONE = 0, /**< the family name itself (gauge, summary quantile, ...) */
    PROM_SUFFIX_TOTAL,
    PROM_SUFFIX_CREATED,
    PROM_SUFFIX_BUCKET,
    PROM_SUFFIX_SUM,
    PROM_SUFFIX_COUNT,
    PROM_SUFFIX_GSUM,
    PROM_SUFFIX_GCOUNT,
    PROM_SUFFIX_INFO,
};

/** One label of a sample: name and value, unescaped, NUL-terminated. */
struct prom_label {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len; /**< raw NUL bytes in a value are rejected, so strlen(value) == value_len */
};

/**
 * One sample, valid only during the callback (every pointer refers to
 * parser-owned scratch that the next line overwrites). All strings are
 * NUL-terminated and also carry their length.
 */
struct prom_sample {
    const char *family; /**< family name (see the file comment) */
    size_t family_len;
    enum prom_type type; /**< the family's type */
    const char *name;    /**< the sample's own name, e.g. "x_bucket" */
    size_t name_len;
    enum prom_suffix suffix;
    const struct prom_label *labels; /**< in input order; never NULL */
    size_t nlabels;
    double value;
    bool has_timestamp;
    int64_t timestamp_ms;
    double le;       /**< parsed `le` of a histogram _bucket sample; NaN when it is not
                          one or its `le` is missing or not a number */
    double quantile; /**< parsed `quantile` of a summary quantile sample; NaN likewise */
    size_t line;     /**< 1-based line number */
};

/**
 * Called once per sample that passes the filter. Return 0 to go on, or a
 * negative errno to stop: the feed/finish call in progress then returns that
 * value (a positive return is taken as -ECANCELED) and the parser stays in
 * the error state.
 */
typedef int (*prom_sample_cb)(const struct prom_sample *s, void *arg);

/** Where and why a parse failed. code is the negative errno also returned. */
struct prom_error {
    int code;      /**< -EINVAL syntax, -E2BIG line or label cap, -EFBIG total cap, or the
                        callback's */
    size_t line;   /**< 1-based line of the failure (0 if none) */
    size_t column; /**< 1-based byte column in that line (0 if not known) */
    char msg[160]; /**< reason, without the position */
};

struct prom_parser_opts {
    enum prom_format format;
    size_t max_line;  /**< 0 = PROM_DEFAULT_MAX_LINE */
    size_t max_total; /**< 0 = PROM_DEFAULT_MAX_TOTAL */
    /** 0 = PROM_DEFAULT_MAX_LABELS. A wanted sample with more labels is an
     *  error (-E2BIG), as a scrape over Prometheus' label_limit fails: it
     *  bounds the per-line label table (and the duplicate check's) at
     *  max_labels entries, where a 64 KiB line of `a="",` pairs would make
     *  13,000 (about 0.7 MiB). Unwanted samples' labels are not read. */
    size_t max_labels;
};

/** How prom_parser_want() matches. */
enum prom_match {
    PROM_MATCH_NAME,   /**< the family name or the sample name equals the string */
    PROM_MATCH_PREFIX, /**< the sample name starts with the string */
};

struct prom_parser;

/**
 * Pick the format from an HTTP Content-Type: OpenMetrics for
 * "application/openmetrics-text...", else the 0.0.4 text format (also for NULL).
 */
enum prom_format prom_format_from_content_type(const char *content_type);

/**
 * Create a parser. opts may be NULL for the defaults (0.0.4 text, 64 KiB
 * lines, 16 MiB total). cb must not be NULL; arg is passed to it. Release
 * with prom_parser_free().
 */
struct prom_parser *prom_parser_new(const struct prom_parser_opts *opts, prom_sample_cb cb,
                                    void *arg);

/** Free the parser. NULL is a no-op. */
void prom_parser_free(struct prom_parser *p);

/**
 * Restrict the callback to wanted samples; may be called several times, each
 * call adds one pattern (the string is copied). With no pattern every sample
 * is delivered. Lines whose sample name matches no pattern take a fast path:
 * the metric name is validated and the family resolved, the label block is
 * scanned only for its quoting and closing brace, and the value token must be
 * present and start like a number; label-name syntax, escapes, UTF-8, the
 * number itself, timestamp and exemplar are NOT checked on those lines. So a
 * filtered parse accepts everything a full parse accepts, and may accept some
 * garbage inside unwanted lines. An unwanted sample's line may also be longer
 * than max_line: once its first max_line bytes show its name, the rest is
 * skipped unread up to the '\n' that ends it (in the text format not one
 * inside a quoted label value, as when the line is read whole; Prometheus
 * has no line limit; memory stays bounded). Metadata lines are always fully
 * checked, and so are samples whose name is quoted inside the braces (the
 * label set is read to find it): no fast path for those, and no skipping
 * past max_line.
 * Returns 0, or -EINVAL unless the string is a valid metric name, classic
 * or any UTF-8 (a quoted one; for a prefix: a valid start of one). Affects
 * lines not yet parsed.
 */
int prom_parser_want(struct prom_parser *p, const char *name, enum prom_match how);

/**
 * Feed the next chunk of the exposition (any split, len 0 allowed). Complete
 * lines are parsed and their samples delivered before this returns.
 * Returns 0, or a negative errno with *err filled (err may be NULL): -EINVAL
 * for a malformed line, -E2BIG for a line over max_line (but an unwanted
 * sample's, a comment's or a # HELP's, see prom_parser_want and the file
 * comment) or a sample with more than max_labels labels, -EFBIG once the
 * total passes max_total, or the callback's code. Errors are sticky: later
 * feed/finish calls return the same error without calling back. Feeding
 * after a successful finish returns -EINVAL (reset first).
 */
int prom_parser_feed(struct prom_parser *p, const void *data, size_t len, struct prom_error *err);

/**
 * End of input: parse a last line that had no '\n' and, for OpenMetrics,
 * require that `# EOF` was seen. Returns 0 or a negative errno as feed does.
 */
int prom_parser_finish(struct prom_parser *p, struct prom_error *err);

/** Forget the stream (buffers, line count, error) to parse a new
 *  exposition; options, callback and wanted patterns are kept. */
void prom_parser_reset(struct prom_parser *p);

/** Counters of the current stream. */
struct prom_stats {
    uint64_t bytes;   /**< bytes fed */
    uint64_t lines;   /**< complete lines parsed */
    uint64_t samples; /**< sample lines seen, wanted or not */
    uint64_t emitted; /**< callbacks made */
};
void prom_parser_stats(const struct prom_parser *p, struct prom_stats *out);

/**
 * One-shot convenience: parse buf[0..len) as a whole exposition with no
 * filter. Same returns as feed + finish.
 */
int prom_parse(const void *buf, size_t len, const struct prom_parser_opts *opts, prom_sample_cb cb,
               void *arg, struct prom_error *err);

/** The value of label `name` of a sample, or NULL when absent. */
const char *prom_sample_label(const struct prom_sample *s, const char *name);

/** Names for logs: "counter", "gauge", ... */
const char *prom_type_name(enum prom_type t);

/**
 * Parse a number in the grammar the parser accepts for sample values (see
 * the file comment) from s[0..len). 0 or -EINVAL. Pure; no locale use.
 */
int prom_parse_float(const char *s, size_t len, double *out);

/**
 * PromQL histogram_quantile() over one classic histogram: le[i] are the
 * bucket upper bounds and counts[i] the cumulative counts, n entries in any
 * order. As PromQL does: sorts by bound, merges equal bounds, smooths counts
 * that differ only by float noise (relative 1e-12), forces monotonicity, and
 * interpolates linearly inside the bucket holding rank q*total (the lowest
 * bucket starts at 0 when its bound is positive, else its bound is
 * returned; a rank in the +Inf bucket returns the highest finite bound).
 * Returns NaN if q is NaN, there is no +Inf bucket, fewer than 2 distinct
 * bounds, or no observations; -Inf for q < 0 and +Inf for q > 1. Pure: the
 * inputs are not modified.
 */
double prom_histogram_quantile(double q, const double *le, const double *counts, size_t n);

#endif

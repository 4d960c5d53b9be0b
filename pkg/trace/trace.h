/* SPDX-License-Identifier: Apache-2.0 */
/* trace: reads request-rate traces (CSV `t_seconds,requests[,extra...]`) for
 * the simulator and writes the same format for `gpuscaler run --record`.
 *
 * A trace is a series of equal-width buckets: `requests` is the number of
 * requests that arrived in [t, t + dt). dt is the spacing of the first two
 * rows (>= 1 s), or a whole-second divisor of it that one of the first ten
 * rows shows (buckets skipped between the first rows: a recorder that missed
 * ticks as it started; refused when ten or more rows follow that row and all
 * keep the first two rows' grid: then it was off that grid); later rows must
 * sit on the grid and strictly increase (a later row off it is an error,
 * never a finer grid); skipped
 * buckets count as zero requests and are flagged missing (the simulator
 * replays them as zero, the planner leaves them out). A trace needs two data
 * rows. A header row is optional: a first line whose first field starts like
 * a name and none of whose fields reads as a number. Columns after the
 * second are read only when the header names them (and then ignored); a
 * number in a column the header does not name (or in the third without a
 * header) is an error, since "0,2,5" is a decimal comma, not 2 requests;
 * text or empty extra fields are ignored. Empty lines and lines starting
 * with '#' are skipped. The parser is pure and reports the line of the first
 * error. Files may be gzip-compressed (read through zlib, recognised by their
 * magic bytes, not by their name): several members read as one stream and
 * zero bytes after a member are padding, as Python's gzip module reads
 * them; any other data after the stream is an error. */
#ifndef GPUSCALER_TRACE_H
#define GPUSCALER_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** Hard limits: inputs past them are errors, not crashes. */
#define TRACE_MAX_BYTES ((size_t)1 << 30) /**< of CSV text (after decompression) */
#define TRACE_MAX_BUCKETS ((size_t)50 * 1000 * 1000)
/** Longest line; a file is refused at its first longer line (e.g. /dev/zero
 *  after 64 KiB, not after reading TRACE_MAX_BYTES). */
#define TRACE_MAX_LINE ((size_t)64 * 1024)
/** Most requests one row (bucket) may count: 10^12, over 10^7 requests/s
 *  even in day-wide buckets. A larger count is a broken trace; accepting it
 *  would print 300-digit peaks and inf% in the reports. */
#define TRACE_MAX_REQUESTS 1e12
/** trace_load_file() reads (and inflates) this many bytes at a time; a line
 *  across two reads is joined. */
#define TRACE_READ_CHUNK ((size_t)128 * 1024)

struct trace {
    int64_t t0_ms;     /**< time of the first bucket (ms, from the first row) */
    int64_t dt_ms;     /**< bucket width */
    size_t n;          /**< number of buckets */
    double *requests;  /**< n counts (>= 0), owned */
    uint8_t *missing;  /**< n flags: 1 where no row gave the bucket (its count is 0); NULL
                            when every bucket has a row. Owned (free with trace_free) */
    size_t nmissing;   /**< buckets without a row */
};

struct trace_error {
    size_t line;       /**< 1-based line of the error, 0 when not about a line */
    char msg[200];
};

/**
 * Parse a whole CSV buffer. On success *out is a new trace (free with
 * trace_free). On error returns -EINVAL (malformed, negative count or one
 * over TRACE_MAX_REQUESTS, non-monotonic or off-grid time, empty) or -E2BIG
 * (over the limits: bytes, buckets, a line over TRACE_MAX_LINE) and fills
 * err; *out is untouched.
 */
int trace_parse(const char *buf, size_t len, struct trace **out, struct trace_error *err);

/**
 * Read a file ("-" is stdin), plain or gzip-compressed, and parse it as it
 * streams in: the first bad line ends the read, so a too-long line costs at
 * most TRACE_MAX_LINE bytes of reading. Same results and errors as
 * trace_parse() on the (decompressed) contents, plus -errno on I/O errors
 * and -EINVAL for corrupt or truncated gzip data, or data after its end
 * other than zero bytes (err names the file, and that data's byte offset).
 */
int trace_load_file(const char *path, struct trace **out, struct trace_error *err);

/** What a caller may limit beyond the format's own limits; zero = no limit. */
struct trace_opts {
    /** A row more than this after the first row (ms) is -E2BIG, naming its
     *  line (a mistyped time years ahead would otherwise size the trace). */
    int64_t max_span_ms;
};

/** trace_parse() and trace_load_file() with opts (NULL: as without). */
int trace_parse_opts(const char *buf, size_t len, const struct trace_opts *opts,
                     struct trace **out, struct trace_error *err);
int trace_load_file_opts(const char *path, const struct trace_opts *opts, struct trace **out,
                         struct trace_error *err);

void trace_free(struct trace *t);

/** Total requests in the trace. */
double trace_total(const struct trace *t);

/** Write the CSV header line ("t_seconds,requests\n"). */
void trace_write_header(FILE *f);
/** Write one row: bucket start in seconds and its request count. */
void trace_write_row(FILE *f, double t_seconds, double requests);

#endif

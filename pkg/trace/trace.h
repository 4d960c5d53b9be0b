/* SPDX-License-Identifier: Apache-2.0 */
/* trace: reads request-rate traces (CSV `t_seconds,requests[,extra...]`) for
 * the simulator and writes the same format for `gpuscaler run --record`.
 *
 * A trace is a series of equal-width buckets: `requests` is the number of
 * requests that arrived in [t, t + dt). dt is the spacing of the first two
 * rows (>= 1 s); later rows must sit on that grid and strictly increase;
 * skipped buckets count as zero requests. A header row is optional; extra
 * columns are ignored; empty lines and lines starting with '#' are skipped.
 * The parser is pure and reports the line of the first error. */
#ifndef GPUSCALER_TRACE_H
#define GPUSCALER_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** Hard limits: inputs past them are errors, not crashes. */
#define TRACE_MAX_BYTES ((size_t)1 << 30)
#define TRACE_MAX_BUCKETS ((size_t)50 * 1000 * 1000)

struct trace {
    int64_t t0_ms;     /**< time of the first bucket (ms, from the first row) */
    int64_t dt_ms;     /**< bucket width */
    size_t n;          /**< number of buckets */
    double *requests;  /**< n counts (>= 0), owned */
};

struct trace_error {
    size_t line;       /**< 1-based line of the error, 0 when not about a line */
    char msg[200];
};

/**
 * Parse a whole CSV buffer. On success *out is a new trace (free with
 * trace_free). On error returns -EINVAL (malformed, negative count,
 * non-monotonic or off-grid time, empty) or -E2BIG (over the limits) and
 * fills err; *out is untouched.
 */
int trace_parse(const char *buf, size_t len, struct trace **out, struct trace_error *err);

/** Read a file ("-" is stdin) and parse it; -errno on I/O errors. */
int trace_load_file(const char *path, struct trace **out, struct trace_error *err);

void trace_free(struct trace *t);

/** Total requests in the trace. */
double trace_total(const struct trace *t);

/** Write the CSV header line ("t_seconds,requests\n"). */
void trace_write_header(FILE *f);
/** Write one row: bucket start in seconds and its request count. */
void trace_write_row(FILE *f, double t_seconds, double requests);

#endif

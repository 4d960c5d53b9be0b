/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for trace_parse: any input must parse or be rejected with
 * a line and a message; an accepted trace must satisfy the format's
 * invariants and survive a write -> parse round trip. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-trace: invariant violated: %s\n", what);
        abort();
    }
}

/* Write t in the trace format and parse it again: same grid, same counts
 * (within the writer's 9 significant digits). */
static void round_trip(const struct trace *t)
{
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f)
        return;
    trace_write_header(f);
    for (size_t k = 0; k < t->n; k++)
        trace_write_row(f, (double)(t->t0_ms + (int64_t)k * t->dt_ms) / 1000.0, t->requests[k]);
    fclose(f);
    struct trace *u = NULL;
    struct trace_error err;
    int rc = trace_parse(mem, len, &u, &err);
    if (rc != 0)
        fprintf(stderr, "fuzz-trace: re-parse failed at line %zu: %s\n", err.line, err.msg);
    check(rc == 0, "written trace parses");
    check(u->n == t->n && u->t0_ms == t->t0_ms, "round trip keeps n and t0");
    check(t->n == 1 || u->dt_ms == t->dt_ms, "round trip keeps dt");
    for (size_t k = 0; k < t->n; k++)
        check(fabs(u->requests[k] - t->requests[k]) <= 1e-8 * t->requests[k],
              "round trip keeps counts");
    trace_free(u);
    free(mem); /* open_memstream's buffer comes from malloc */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct trace *t = NULL;
    struct trace_error err;
    memset(&err, 0x55, sizeof(err));
    int rc = trace_parse((const char *)data, size, &t, &err);
    if (rc != 0) {
        check(t == NULL, "*out untouched on error");
        check(memchr(err.msg, '\0', sizeof(err.msg)) != NULL && err.msg[0] != '\0',
              "error message set");
        return 0;
    }
    check(t->n >= 1 && t->n <= TRACE_MAX_BUCKETS, "bucket count in range");
    check(t->dt_ms >= 1000, "dt >= 1 s");
    for (size_t k = 0; k < t->n; k++)
        check(isfinite(t->requests[k]) && t->requests[k] >= 0 &&
                  t->requests[k] <= TRACE_MAX_REQUESTS,
              "counts finite, >= 0 and within TRACE_MAX_REQUESTS");
    check(trace_total(t) >= 0, "total >= 0");
    if (t->n <= 100000)
        round_trip(t);
    trace_free(t);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for trace: accepted shapes, every rejection with its line, the
 * writer's format and a write -> parse round trip, and the file loader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "trace/trace.h"
#include "util/util.h"

static struct trace *parse_ok(const char *csv)
{
    struct trace *t = NULL;
    struct trace_error err = {0};
    int rc = trace_parse(csv, strlen(csv), &t, &err);
    if (rc != 0)
        fail_msg("parse failed rc=%d line=%zu: %s\n--- input:\n%s", rc, err.line, err.msg, csv);
    assert_non_null(t);
    return t;
}

static void assert_buckets(const struct trace *t, const double *want, size_t n)
{
    assert_int_equal(t->n, n);
    for (size_t k = 0; k < n; k++)
        if (t->requests[k] != want[k])
            fail_msg("bucket %zu: %g, want %g", k, t->requests[k], want[k]);
}

/* ---- accepted inputs -------------------------------------------------------- */

static void test_header_and_extra_columns(void **state)
{
    (void)state;
    /* The shape of /work/shared/traces/azure_llm2023_*.csv: empty extras on idle seconds. */
    struct trace *t = parse_ok("t_seconds,requests,mean_input_tokens,mean_output_tokens\n"
                               "0,1,4808.0,10.0\n"
                               "1,7,2592.9,15.3\n"
                               "2,4,2227.5,12.0\n"
                               "3,0,,\n");
    static const double want[] = {1, 7, 4, 0};
    assert_int_equal(t->t0_ms, 0);
    assert_int_equal(t->dt_ms, 1000);
    assert_buckets(t, want, 4);
    assert_true(trace_total(t) == 12.0);
    trace_free(t);
}

static void test_no_header_crlf_comments(void **state)
{
    (void)state;
    struct trace *t = parse_ok("# recorded by hand\r\n"
                               "\r\n"
                               "100, 5\r\n"
                               "   # indented comment\r\n"
                               "110,6.5\r\n"
                               "\t\r\n"
                               "120 ,0\r\n"
                               "130,1e2"); /* no final newline */
    static const double want[] = {5, 6.5, 0, 100};
    assert_int_equal(t->t0_ms, 100000);
    assert_int_equal(t->dt_ms, 10000);
    assert_buckets(t, want, 4);
    trace_free(t);
}

static void test_gaps_600s_grid(void **state)
{
    (void)state;
    /* servegen *_600s shape: decimal counts, 600 s grid; 1200 and 2400 missing. */
    struct trace *t = parse_ok("t_seconds,requests,mean_input_tokens,mean_output_tokens\n"
                               "0,127668.0,355.4,292.5\n"
                               "600,107819.0,364.9,285.5\n"
                               "1800,138856.0,361.4,295.1\n"
                               "3000,0.5,,\n");
    static const double want[] = {127668, 107819, 0, 138856, 0, 0.5};
    assert_int_equal(t->dt_ms, 600000);
    assert_buckets(t, want, 6);
    assert_true(trace_total(t) == 127668.0 + 107819.0 + 138856.0 + 0.5);
    trace_free(t);
}

static void test_decimal_times_and_tolerance(void **state)
{
    (void)state;
    /* 1.5 s grid; 4.501 is 1 ms off (tolerated) and 7.4995 rounds to 7.5. */
    struct trace *t = parse_ok("1.5,1\n3.0,2\n4.501,3\n7.4995,4\n");
    static const double want[] = {1, 2, 3, 0, 4};
    assert_int_equal(t->t0_ms, 1500);
    assert_int_equal(t->dt_ms, 1500);
    assert_buckets(t, want, 5);
    trace_free(t);
}

static void test_single_row_and_bom(void **state)
{
    (void)state;
    struct trace *t = parse_ok("\xef\xbb\xbft_seconds,requests\n42,3\n43,1\n");
    static const double want[] = {3, 1};
    assert_int_equal(t->t0_ms, 42000);
    assert_int_equal(t->dt_ms, 1000);
    assert_buckets(t, want, 2);
    assert_null(t->missing);
    assert_int_equal(t->nmissing, 0);
    trace_free(t);

    t = parse_ok("t\n-5,0\n-4,-0\n"); /* one-column header, negative time, -0 count */
    assert_int_equal(t->t0_ms, -5000);
    assert_int_equal(t->n, 2);
    assert_false(signbit(t->requests[1]));
    trace_free(t);
}

static void test_one_second_shared_shape(void **state)
{
    (void)state;
    /* An hour of a 1 s trace written the way the shared traces are. */
    struct util_buf b = {0};
    util_buf_puts(&b, "t_seconds,requests,mean_input_tokens,mean_output_tokens\n");
    double sum = 0;
    static double want[3600];
    for (int k = 0; k < 3600; k++) {
        int req = (k * 7919) % 13 == 0 ? 0 : (k * 31) % 17;
        want[k] = req;
        sum += req;
        if (req)
            util_buf_printf(&b, "%d,%d,%.1f,%.1f\n", k, req, 100.0 + k, 10.0 + k % 5);
        else
            util_buf_printf(&b, "%d,0,,\n", k);
    }
    struct trace *t = parse_ok(b.data);
    assert_int_equal(t->dt_ms, 1000);
    assert_buckets(t, want, 3600);
    assert_true(trace_total(t) == sum);
    trace_free(t);
    util_buf_free(&b);
}

/* Skipped buckets count zero and are flagged missing; a row that shows the
 * first two rows' spacing was a multiple of the width (a recorder's missed
 * tick after its first row) refines the grid to the whole-second divisor
 * that holds every row, the buckets between them missing. */
static void test_missing_buckets_and_a_finer_grid(void **state)
{
    (void)state;
    struct trace *t = parse_ok("0,5\n10,7\n40,1\n");
    static const double want[] = {5, 7, 0, 0, 1};
    assert_buckets(t, want, 5);
    assert_non_null(t->missing);
    static const uint8_t miss[] = {0, 0, 1, 1, 0};
    assert_memory_equal(t->missing, miss, 5);
    assert_int_equal(t->nmissing, 2);
    trace_free(t);

    /* --record at 15 s ticks, one missed right after the first row */
    t = parse_ok("t_seconds,requests\n1700000010,1\n1700000040,2\n1700000055,3\n"
                 "1700000070,4\n");
    assert_int_equal(t->dt_ms, 15000);
    static const double want15[] = {1, 0, 2, 3, 4};
    assert_buckets(t, want15, 5);
    static const uint8_t miss15[] = {0, 1, 0, 0, 0};
    assert_memory_equal(t->missing, miss15, 5);
    trace_free(t);

    /* twice finer again later: 20 s, then 10 s, then 5 s */
    t = parse_ok("0,1\n20,2\n30,3\n35,4\n");
    assert_int_equal(t->dt_ms, 5000);
    static const double want5[] = {1, 0, 0, 0, 2, 0, 3, 4};
    assert_buckets(t, want5, 8);
    assert_int_equal(t->nmissing, 4);
    trace_free(t);
}

/* Only the first ten rows may show a finer grid (a recorder that missed ticks
 * as it started): a later row off the grid is an error naming it. Before,
 * 5,760 rows of 60 s and one 30 s after the last were read as 30 s buckets,
 * every other one empty, the demand doubled. A finer grid that the ten rows
 * after it all ignore was one row off the grid too. */
static void test_one_off_grid_row_does_not_refine(void **state)
{
    (void)state;
    struct util_buf b = {0};
    util_buf_puts(&b, "t_seconds,requests\n");
    for (int k = 0; k < 5760; k++)
        util_buf_printf(&b, "%d,600\n", 60 * k);
    util_buf_printf(&b, "%d,600\n", 60 * 5759 + 30);
    struct trace *t = NULL;
    struct trace_error err = {0};
    assert_int_equal(trace_parse(b.data, b.len, &t, &err), -EINVAL);
    assert_null(t);
    assert_int_equal(err.line, 5762);
    assert_non_null(strstr(err.msg, "t_seconds '345570' is off the 60 s grid that starts at 0 s "
                                    "(only the first 10 rows may show a finer one)"));

    /* the tenth row may, the eleventh may not */
    util_buf_reset(&b);
    util_buf_puts(&b, "0,1\n");
    for (int k = 1; k < 9; k++)
        util_buf_printf(&b, "%d,1\n", 60 * k);
    util_buf_puts(&b, "510,1\n");
    assert_int_equal(trace_parse(b.data, b.len, &t, &err), 0);
    assert_int_equal(t->dt_ms, 30000);
    trace_free(t);
    util_buf_reset(&b);
    util_buf_puts(&b, "0,1\n");
    for (int k = 1; k < 10; k++)
        util_buf_printf(&b, "%d,1\n", 60 * k);
    util_buf_puts(&b, "570,1\n");
    assert_int_equal(trace_parse(b.data, b.len, &t, &err), -EINVAL);
    assert_int_equal(err.line, 11);
    /* a recorder that missed the ticks after its first and third rows */
    t = parse_ok("0,1\n30,2\n60,3\n75,4\n90,5\n105,6\n");
    assert_int_equal(t->dt_ms, 15000);
    assert_int_equal(t->nmissing, 2);
    trace_free(t);

    /* a second early off-grid row is measured against the grid in force
     * before it: 0, 60, 90 (30 s), then 100 (10 s) that the 30 s rows after
     * it all keep (read against the first rows' 60 s grid, the 30 s rows
     * were off it, and the trace passed as 10 s buckets, tripling peaks) */
    util_buf_reset(&b);
    util_buf_puts(&b, "0,600\n60,600\n90,600\n100,600\n");
    for (int k = 4; k < 20; k++)
        util_buf_printf(&b, "%d,600\n", 30 * k);
    assert_int_equal(trace_parse(b.data, b.len, &t, &err), -EINVAL);
    assert_int_equal(err.line, 4);
    assert_non_null(strstr(err.msg, "t_seconds '100' is off the 30 s grid"));

    /* the third row off the grid that the rows after it keep: not a finer grid */
    util_buf_reset(&b);
    util_buf_puts(&b, "0,600\n60,600\n90,600\n");
    for (int k = 2; k < 12; k++)
        util_buf_printf(&b, "%d,600\n", 60 * k);
    assert_int_equal(trace_parse(b.data, b.len, &t, &err), -EINVAL);
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.msg, "t_seconds '90' is off the 60 s grid that starts at 0 s, "
                                    "which all 10 rows after it keep"));
    /* ... nine rows after it could still be a recorder's */
    util_buf_reset(&b);
    util_buf_puts(&b, "0,600\n60,600\n90,600\n");
    for (int k = 2; k < 11; k++)
        util_buf_printf(&b, "%d,600\n", 60 * k);
    assert_int_equal(trace_parse(b.data, b.len, &t, &err), 0);
    assert_int_equal(t->dt_ms, 30000);
    trace_free(t);
    util_buf_free(&b);
}

/* A number in a column the header does not name is refused: "0,2,5" (a
 * decimal comma) read as 2 requests before. Columns a header names, and
 * text or empty extra fields, are still ignored. */
static void test_unnamed_numeric_column(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t line;
        const char *msg;
    } bad[] = {
        {"t_seconds,requests\n0,5,5\n1,6,5\n", 2,
         "'0,5,5' has a number in column 3, but the header names 2 columns (a decimal comma?"},
        {"0,2,5\n1,3\n", 1, "'0,2,5' has a number in column 3; without a header naming more"},
        {"0,2\n1,3, 7\n", 2, "has a number in column 3"},
        {"0,2,x,1e3\n1,3\n", 1, "has a number in column 4"},
        {"t,r,note\n0,2,x\n1,3,x,9\n", 3, "has a number in column 4, but the header names 3"},
        {"0,2,nan\n1,3\n", 1, "has a number in column 3"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        struct trace *t = NULL;
        struct trace_error err = {0};
        int rc = trace_parse(bad[i].in, strlen(bad[i].in), &t, &err);
        if (rc != -EINVAL || err.line != bad[i].line || !strstr(err.msg, bad[i].msg))
            fail_msg("case %zu: rc=%d line=%zu msg='%s'", i, rc, err.line, err.msg);
        assert_null(t);
    }
    struct trace *t = parse_ok("0,1,,\n1,2,host-a\n2,3, \n");
    static const double want[] = {1, 2, 3};
    assert_buckets(t, want, 3);
    trace_free(t);
    t = parse_ok("t_seconds,requests,p50_ms\n0,1,12.5\n1,2,13\n");
    assert_buckets(t, want, 2);
    trace_free(t);
}

/* A first line is a header only when none of its fields reads as a number:
 * "nan,nan" was skipped as one. */
static void test_numeric_first_line_is_not_a_header(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *msg;
    } bad[] = {
        {"nan,nan\n0,5\n1,6\n", "t_seconds 'nan' is not finite"},
        {"inf,5\n0,5\n1,6\n", "t_seconds 'inf' is not finite"},
        {"infinity,x\n0,5\n1,6\n", "t_seconds 'infinity' is not finite"},
        {"t_seconds,nan\n0,5\n1,6\n", "t_seconds 't_seconds' is not a number"},
        {"nan\n0,5\n1,6\n", "missing requests column in 'nan'"},
        /* a number in any column, not only the first two (it was taken as a header) */
        {"time,count,5\n0,5\n1,6\n", "'time,count,5' has a number in column 3"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        struct trace *t = NULL;
        struct trace_error err = {0};
        int rc = trace_parse(bad[i].in, strlen(bad[i].in), &t, &err);
        if (rc != -EINVAL || err.line != 1 || !strstr(err.msg, bad[i].msg))
            fail_msg("case %zu: rc=%d line=%zu msg='%s'", i, rc, err.line, err.msg);
    }
    struct trace *t = parse_ok("nanoseconds,requests\n0,5\n1,6\n");
    trace_free(t);
}

/* trace_opts' span: a row far past the first (a mistyped UNIX time, one
 * digit too many) is refused with its line, by the buffer and the file reader. */
static void test_span_limit(void **state)
{
    (void)state;
    struct util_buf b = {0};
    util_buf_puts(&b, "t_seconds,requests\n");
    for (int k = 0; k < 30 * 24; k++)
        util_buf_printf(&b, "%d,36000\n", 1699999200 + 3600 * k);
    util_buf_puts(&b, "17025912000,36000\n");
    const struct trace_opts opts = {.max_span_ms = 400LL * 86400 * 1000};
    struct trace *t = NULL;
    struct trace_error err = {0};
    assert_int_equal(trace_parse_opts(b.data, b.len, &opts, &t, &err), -E2BIG);
    assert_null(t);
    assert_int_equal(err.line, 722);
    assert_non_null(strstr(err.msg, "t_seconds '17025912000' is 177383."));
    assert_non_null(strstr(err.msg, " days after the first row (1699999200 s); at most 400 days "
                                    "are read (a mistyped time?)"));
    char path[] = "/tmp/test-trace-span-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b.data, b.len), (ssize_t)b.len);
    close(fd);
    struct trace_error e2 = {0};
    assert_int_equal(trace_load_file_opts(path, &opts, &t, &e2), -E2BIG);
    assert_int_equal(e2.line, 722);
    assert_string_equal(e2.msg, err.msg);
    /* without the limit (the simulator's, whose window is checked later) */
    assert_int_equal(trace_load_file(path, &t, &e2), 0);
    trace_free(t);
    unlink(path);
    /* 400 days exactly is within */
    static const char edge[] = "0,1\n34560000,1\n";
    assert_int_equal(trace_parse_opts(edge, strlen(edge), &opts, &t, &err), 0);
    trace_free(t);
    util_buf_free(&b);
}

/* ---- rejections ------------------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int rc;
        size_t line;
        const char *msg; /* must occur in err.msg */
    } cases[] = {
        {"t_seconds,requests\n0,1\n1,abc\n", -EINVAL, 3, "requests 'abc' is not a number"},
        {"0,1\n1,-2\n", -EINVAL, 2, "requests '-2' is negative"},
        {"0,1\n1,nan\n", -EINVAL, 2, "requests 'nan' is not finite"},
        {"0,1\n1,inf\n", -EINVAL, 2, "requests 'inf' is not finite"},
        {"0,1\n1,1e999\n", -EINVAL, 2, "requests '1e999' is not finite"},
        {"0,1\n1,0x10\n", -EINVAL, 2, "requests '0x10' is not a number"},
        {"0,1\n1,1 2\n", -EINVAL, 2, "requests '1 2' is not a number"},
        {"0,1\n1,\n", -EINVAL, 2, "requests is empty"},
        {"0,1\ninf,1\n", -EINVAL, 2, "t_seconds 'inf' is not finite"},
        {"0,1\nabc,1\n", -EINVAL, 2, "t_seconds 'abc' is not a number"},
        {"0,1\n,1\n", -EINVAL, 2, "t_seconds is empty"},
        {"0,1\n1e13,1\n", -EINVAL, 2, "out of range"},
        {"0,1\nt_seconds,requests\n", -EINVAL, 2, "t_seconds 't_seconds' is not a number"},
        {"nan,5\n", -EINVAL, 1, "t_seconds 'nan' is not finite"},
        {"0\n", -EINVAL, 1, "missing requests column in '0'"},
        {"# c\n\n0,1\n\n1,-1\n", -EINVAL, 5, "negative"},
        {"0,1\n10,1\n5,1\n", -EINVAL, 3,
         "t_seconds '5' does not increase (the previous row is at 10 s)"},
        {"0,1\n0,1\n", -EINVAL, 2, "does not increase"},
        {"0,1\n0.5,1\n", -EINVAL, 2,
         "t_seconds '0.5' is 0.5 s after the first row; the bucket width must be at least 1 s"},
        {"0,1\n10,1\n25.5,1\n", -EINVAL, 3,
         "t_seconds '25.5' is off the 10 s grid that starts at 0 s"},
        {"0,1\n10,1\n20.002,1\n", -EINVAL, 3, "t_seconds '20.002' is off the 10 s grid"},
        {"0,1\n10,1\n10.001,1\n", -EINVAL, 3,
         "t_seconds '10.001' falls in the same 10 s bucket as the previous row"},
        {"0,1\r\n1,1\r\n2,x\r\n", -EINVAL, 3, "requests 'x' is not"},
        {"t_seconds,requests\r0,10\r60,10\r", -EINVAL, 1,
         "lines end with a carriage return alone (an old Mac export?): use LF or CRLF"},
        {"", -EINVAL, 0, "no data rows"},
        {"t_seconds,requests\n42,3\n", -EINVAL, 0,
         "trace has one data row: the bucket width is the spacing of the first two rows"},
        {"t_seconds,requests\n# nothing\n\n", -EINVAL, 0, "no data rows"},
        {"0,1\n1,1\n60000000,1\n", -E2BIG, 3,
         "t_seconds '60000000' is bucket 60000000; traces are limited to 50000000 buckets"},
        {"0,1\n1000,1\n50000000000,1\n", -E2BIG, 3, "limited to"},
        {"0,1\n1,1e308\n", -EINVAL, 2, "requests '1e308' is over the limit of 1e+12 per row"},
        {"t,r\n0,1000000000001\n", -EINVAL, 2, "is over the limit"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        static struct trace sentinel;
        struct trace *t = &sentinel;
        struct trace_error err = {0};
        int rc = trace_parse(cases[i].in, strlen(cases[i].in), &t, &err);
        if (rc != cases[i].rc || err.line != cases[i].line || !strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: rc=%d line=%zu msg='%s'; want rc=%d line=%zu msg~'%s'", i, rc,
                     err.line, err.msg, cases[i].rc, cases[i].line, cases[i].msg);
        assert_ptr_equal(t, &sentinel); /* *out untouched */
    }
}

static void test_error_text_is_truncated_and_printable(void **state)
{
    (void)state;
    static const char nul[] = "0,1\n1,2\0\n"; /* a NUL byte inside a field */
    struct trace *t0 = NULL;
    struct trace_error e0 = {0};
    assert_int_equal(trace_parse(nul, sizeof(nul) - 1, &t0, &e0), -EINVAL);
    assert_int_equal(e0.line, 2);
    assert_non_null(strstr(e0.msg, "requests '2?' is not a number"));
    assert_null(t0);

    struct util_buf b = {0};
    util_buf_puts(&b, "0,1\n1,\x01");
    for (int k = 0; k < 300; k++)
        util_buf_puts(&b, "z");
    util_buf_puts(&b, "\n");
    struct trace *t = NULL;
    struct trace_error err = {0};
    assert_int_equal(trace_parse(b.data, b.len, &t, &err), -EINVAL);
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.msg, "'?zzz"));
    assert_non_null(strstr(err.msg, "...' is not a number"));
    assert_true(strlen(err.msg) < 100);
    assert_null(t);
    util_buf_free(&b);
}

static void test_request_limit_and_long_lines(void **state)
{
    (void)state;
    /* the limit itself is a valid count */
    struct trace *t = parse_ok("0,1e12\n1,0\n");
    assert_true(t->requests[0] == TRACE_MAX_REQUESTS);
    trace_free(t);
    /* a line over TRACE_MAX_LINE is refused with its number; one at it is read */
    struct util_buf b = {0};
    util_buf_puts(&b, "0,1\n1,2,");
    for (size_t k = strlen("1,2,"); k < TRACE_MAX_LINE; k++)
        util_buf_puts(&b, "x");
    util_buf_puts(&b, "\r\n2,3\n");
    t = parse_ok(b.data);
    assert_int_equal(t->n, 3);
    trace_free(t);
    util_buf_reset(&b);
    util_buf_puts(&b, "0,1\n1,2\n2,3,");
    for (size_t k = 0; k < TRACE_MAX_LINE; k++)
        util_buf_puts(&b, "x");
    util_buf_puts(&b, "\n");
    struct trace_error err = {0};
    t = NULL;
    assert_int_equal(trace_parse(b.data, b.len, &t, &err), -E2BIG);
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.msg, "longer than 65536 bytes"));
    assert_null(t);
    util_buf_free(&b);
}

static void test_too_big(void **state)
{
    (void)state;
    /* The byte limit is checked before the buffer is read, so a short buffer
     * with a claimed length over the limit exercises it without 1 GiB. */
    static const char small[] = "0,1\n";
    struct trace *t = NULL;
    struct trace_error err = {0};
    assert_int_equal(trace_parse(small, TRACE_MAX_BYTES + 1, &t, &err), -E2BIG);
    assert_int_equal(err.line, 0);
    assert_non_null(strstr(err.msg, "limit"));
    assert_null(t);
}

/* ---- writer ----------------------------------------------------------------- */

static char *write_rows(const double *ts, const double *rs, size_t n)
{
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    assert_non_null(f);
    trace_write_header(f);
    for (size_t k = 0; k < n; k++)
        trace_write_row(f, ts[k], rs[k]);
    fclose(f);
    return mem; /* free() it: open_memstream allocates with malloc */
}

static void test_writer_format(void **state)
{
    (void)state;
    static const double ts[] = {0, 600, 12.5, 1.0004, -0.0001, 1700000000.25};
    static const double rs[] = {0, 127668.0, 3, 0.1, 1234567.891, 2.5e20};
    char *out = write_rows(ts, rs, UTIL_ARRAY_LEN(ts));
    assert_string_equal(out, "t_seconds,requests\n"
                             "0,0\n"
                             "600,127668\n"
                             "12.5,3\n"
                             "1,0.1\n"
                             "0,1234567.89\n"
                             "1700000000.25,2.5e+20\n");
    free(out);
}

static void test_round_trip(void **state)
{
    (void)state;
    enum { N = 500 };
    double ts[N], rs[N];
    for (int k = 0; k < N; k++) {
        ts[k] = 1700000000.5 + 10.0 * k;
        rs[k] = k % 7 == 0 ? 0 : k % 3 == 0 ? k * 1000003.0 : k / 3.0 + 0.001;
    }
    char *csv = write_rows(ts, rs, N);
    struct trace *t = parse_ok(csv);
    assert_int_equal(t->t0_ms, 1700000000500LL);
    assert_int_equal(t->dt_ms, 10000);
    assert_int_equal(t->n, N);
    for (int k = 0; k < N; k++)
        if (fabs(t->requests[k] - rs[k]) > 1e-8 * fabs(rs[k]))
            fail_msg("bucket %d: %.17g, wrote %.17g", k, t->requests[k], rs[k]);
    trace_free(t);
    free(csv);
}

/* ---- files ------------------------------------------------------------------ */

static void test_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/test-trace-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char csv[] = "t_seconds,requests\n0,52\n1,55\n3,9\n";
    assert_int_equal(write(fd, csv, sizeof(csv) - 1), (ssize_t)(sizeof(csv) - 1));
    close(fd);

    struct trace *t = NULL;
    struct trace_error err = {0};
    assert_int_equal(trace_load_file(path, &t, &err), 0);
    static const double want[] = {52, 55, 0, 9};
    assert_buckets(t, want, 4);
    trace_free(t);

    /* "-" reads stdin. */
    int saved = dup(STDIN_FILENO);
    int in = open(path, O_RDONLY);
    assert_true(saved >= 0 && in >= 0);
    dup2(in, STDIN_FILENO);
    close(in);
    t = NULL;
    int rc = trace_load_file("-", &t, &err);
    dup2(saved, STDIN_FILENO);
    close(saved);
    assert_int_equal(rc, 0);
    assert_buckets(t, want, 4);
    trace_free(t);
    unlink(path);

    t = NULL;
    assert_int_equal(trace_load_file(path, &t, &err), -ENOENT);
    assert_int_equal(err.line, 0);
    assert_non_null(strstr(err.msg, path));
    assert_null(t);

    /* Parse errors keep their line through the loader. */
    char bad[] = "/tmp/test-trace-XXXXXX";
    fd = mkstemp(bad);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0,1\n1,x\n", 8), 8);
    close(fd);
    assert_int_equal(trace_load_file(bad, &t, &err), -EINVAL);
    assert_int_equal(err.line, 2);
    unlink(bad);
    trace_free(NULL);
}

static char *temp_file(const void *data, size_t len)
{
    char *path = xstrdup("/tmp/test-trace-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    return path;
}

/* A file's errors through the streaming loader equal trace_parse()'s, at
 * every chunk boundary: lines split across reads keep their numbers. */
static void test_load_file_streams_like_parse(void **state)
{
    (void)state;
    struct util_buf b = {0};
    util_buf_puts(&b, "\xef\xbb\xbft_seconds,requests\r\n");
    for (int k = 0; k < 40000; k++)
        util_buf_printf(&b, "%d,%d%s\n", k * 10, k % 97, k % 3 ? "" : ",extra,columns");
    util_buf_puts(&b, "400000,1e308\n");
    char *path = temp_file(b.data, b.len);
    struct trace *t = NULL, *u = NULL;
    struct trace_error e1 = {0}, e2 = {0};
    int r1 = trace_load_file(path, &t, &e1);
    int r2 = trace_parse(b.data, b.len, &u, &e2);
    assert_int_equal(r1, -EINVAL);
    assert_int_equal(r1, r2);
    assert_int_equal(e1.line, 40002);
    assert_int_equal(e1.line, e2.line);
    assert_string_equal(e1.msg, e2.msg);
    unlink(path);
    xfree(path);
    /* without the bad last row both give the same trace */
    b.len -= strlen("400000,1e308\n");
    path = temp_file(b.data, b.len);
    assert_int_equal(trace_load_file(path, &t, &e1), 0);
    assert_int_equal(trace_parse(b.data, b.len, &u, &e2), 0);
    assert_int_equal(t->n, 40000);
    assert_int_equal(t->n, u->n);
    assert_int_equal(t->dt_ms, 10000);
    assert_memory_equal(t->requests, u->requests, t->n * sizeof(double));
    trace_free(t);
    trace_free(u);
    unlink(path);
    xfree(path);
    util_buf_free(&b);
}

/* Gzip-compressed traces are read directly, from a file or stdin; corrupt
 * and truncated data are errors naming the file, never "not a number". */
static void test_load_gzip(void **state)
{
    (void)state;
    static const char csv[] = "t_seconds,requests\n0,52\n1,55\n3,9\n";
    static const double want[] = {52, 55, 0, 9};
    char path[] = "/tmp/test-trace-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    gzFile gz = gzdopen(fd, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, csv, sizeof(csv) - 1), (int)(sizeof(csv) - 1));
    assert_int_equal(gzclose(gz), Z_OK);
    struct trace *t = NULL;
    struct trace_error err = {0};
    assert_int_equal(trace_load_file(path, &t, &err), 0);
    assert_buckets(t, want, 4);
    trace_free(t);

    /* "-" (stdin) may be compressed too */
    int saved = dup(STDIN_FILENO);
    int in = open(path, O_RDONLY);
    assert_true(saved >= 0 && in >= 0);
    dup2(in, STDIN_FILENO);
    close(in);
    t = NULL;
    int rc = trace_load_file("-", &t, &err);
    dup2(saved, STDIN_FILENO);
    close(saved);
    assert_int_equal(rc, 0);
    assert_buckets(t, want, 4);
    trace_free(t);

    /* truncated: the header and part of the deflate stream */
    struct util_buf b = {0};
    fd = open(path, O_RDONLY);
    char raw[256];
    ssize_t n = read(fd, raw, sizeof(raw));
    close(fd);
    assert_true(n > 24);
    char *cut = temp_file(raw, (size_t)n - 12);
    t = NULL;
    memset(&err, 0, sizeof(err));
    rc = trace_load_file(cut, &t, &err);
    assert_int_equal(rc, -EINVAL);
    assert_null(t);
    assert_non_null(strstr(err.msg, "corrupt gzip data"));
    assert_non_null(strstr(err.msg, cut));
    unlink(cut);
    xfree(cut);
    /* a bad deflate stream after a valid gzip header */
    raw[12] ^= 0x5a;
    raw[13] ^= 0xa5;
    char *bad = temp_file(raw, (size_t)n);
    t = NULL;
    rc = trace_load_file(bad, &t, &err);
    assert_true(rc == -EINVAL);
    assert_null(t);
    unlink(bad);
    xfree(bad);
    unlink(path);
    util_buf_free(&b);
}

/* Append to b the gzip (one member) of n bytes at p. */
static void gzip_append(struct util_buf *b, const void *p, size_t n)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    uLong cap = deflateBound(&zs, (uLong)n) + 64;
    unsigned char *out = xmalloc(cap);
    zs.next_in = (Bytef *)(uintptr_t)p;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    util_buf_append(b, out, cap - zs.avail_out);
    deflateEnd(&zs);
    xfree(out);
}

/* Load len bytes at data from a file, or through a pipe as stdin ("-") when
 * pipe_in: a child writes them in 7-byte pieces, so reads come back short. */
static int load_bytes(const void *data, size_t len, bool pipe_in, char **path, struct trace **t,
                      struct trace_error *err)
{
    memset(err, 0, sizeof(*err));
    *t = NULL;
    if (!pipe_in) {
        *path = temp_file(data, len);
        int rc = trace_load_file(*path, t, err);
        unlink(*path);
        return rc;
    }
    *path = xstrdup("stdin");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        const char *p = data;
        for (size_t off = 0; off < len;) {
            size_t n = len - off < 7 ? len - off : 7;
            ssize_t w = write(fds[1], p + off, n);
            if (w <= 0)
                _exit(1);
            off += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    int saved = dup(STDIN_FILENO);
    dup2(fds[0], STDIN_FILENO);
    close(fds[0]);
    int rc = trace_load_file("-", t, err);
    dup2(saved, STDIN_FILENO);
    close(saved);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return rc;
}

/* Concatenated gzip members decode as one stream (RFC 1952; `cat a.gz b.gz`,
 * `gzip -c more >> x.gz`), zero bytes between them too, as Python's gzip
 * module reads them (zlib's gzread stopped at the zeros: the second member
 * was lost without a word). A member boundary may split a line. */
static void test_load_gzip_members(void **state)
{
    (void)state;
    static const char a[] = "t_seconds,requests\n0,52\n1,55\n", b2[] = "3,9\n4,1\n";
    static const double want[] = {52, 55, 0, 9, 1};
    static const char zeros[1024];
    for (int pipe_in = 0; pipe_in < 2; pipe_in++) {
        struct util_buf b = {0};
        gzip_append(&b, a, sizeof(a) - 1 - 2); /* "...1,5" | "5\n3,9..." */
        struct util_buf rest = {0};
        util_buf_puts(&rest, "5\n");
        util_buf_puts(&rest, b2);
        gzip_append(&b, rest.data, rest.len);
        struct trace *t;
        struct trace_error err;
        char *path;
        int rc = load_bytes(b.data, b.len, pipe_in, &path, &t, &err);
        if (rc != 0)
            fail_msg("two members: rc %d: %s", rc, err.msg);
        assert_buckets(t, want, 5);
        trace_free(t);
        xfree(path);

        /* zeros between the members (tar padding of the first) */
        b.len = 0;
        gzip_append(&b, a, sizeof(a) - 1);
        util_buf_append(&b, zeros, 700);
        gzip_append(&b, b2, sizeof(b2) - 1);
        rc = load_bytes(b.data, b.len, pipe_in, &path, &t, &err);
        if (rc != 0)
            fail_msg("zeros between members: rc %d: %s", rc, err.msg);
        assert_buckets(t, want, 5);
        trace_free(t);
        xfree(path);
        util_buf_free(&rest);
        util_buf_free(&b);
    }
}

/* Zero bytes after the last member are padding (a block device, tar's
 * 512-byte records), accepted as gzip(1) accepts them, over a read's end
 * too. */
static void test_load_gzip_trailing_zeros(void **state)
{
    (void)state;
    static const char csv[] = "t_seconds,requests\n0,52\n1,55\n3,9\n";
    static const double want[] = {52, 55, 0, 9};
    static const size_t pads[] = {1, 2, 511, TRACE_READ_CHUNK + 3};
    for (int pipe_in = 0; pipe_in < 2; pipe_in++)
        for (size_t i = 0; i < sizeof(pads) / sizeof(pads[0]); i++) {
            struct util_buf b = {0};
            gzip_append(&b, csv, sizeof(csv) - 1);
            char *zeros = xcalloc(1, pads[i]);
            util_buf_append(&b, zeros, pads[i]);
            xfree(zeros);
            struct trace *t;
            struct trace_error err;
            char *path;
            int rc = load_bytes(b.data, b.len, pipe_in, &path, &t, &err);
            if (rc != 0)
                fail_msg("%zu zeros%s: rc %d: %s", pads[i], pipe_in ? " (pipe)" : "", rc,
                         err.msg);
            assert_buckets(t, want, 4);
            trace_free(t);
            xfree(path);
            util_buf_free(&b);
        }
}

/* Anything else after a member is an error naming the file and the offset
 * where it starts (zlib's gzread ignored it: `cat trace.csv.gz more.csv`
 * lost more.csv's rows without a word, and a run replayed the first part),
 * after zero padding too; from a file or a pipe, after one member of several
 * reads or after two. */
static void test_load_gzip_trailing_garbage(void **state)
{
    (void)state;
    static const char csv[] = "t_seconds,requests\n0,52\n1,55\n3,9\n";
    static const char zeros[100];
    /* a member of several reads: pseudo-random counts do not compress much */
    struct util_buf big = {0};
    uint32_t x = 1;
    for (int k = 0; k < 100000; k++) {
        x = x * 1103515245u + 12345u;
        util_buf_printf(&big, "%d,%u\n", k, x % 1000000);
    }
    for (int pipe_in = 0; pipe_in < 2; pipe_in++)
        for (int c = 0; c < 5; c++) {
            struct util_buf b = {0};
            size_t at;
            if (c == 3) {
                gzip_append(&b, big.data, big.len);
                assert_true(b.len > 2 * TRACE_READ_CHUNK);
            } else {
                gzip_append(&b, csv, sizeof(csv) - 1);
            }
            if (c == 2)
                gzip_append(&b, "4,1\n", 4);
            if (c == 3)
                gzip_append(&b, "100000,1\n", 9);
            if (c == 1)
                util_buf_append(&b, zeros, sizeof(zeros));
            at = b.len;
            /* a plain CSV appended; after zeros; a lone 0x1f, the start of a magic */
            util_buf_puts(&b, c == 4 ? "\x1f" : "5,7\n6,8\n");
            struct trace *t;
            struct trace_error err;
            char *path;
            int rc = load_bytes(b.data, b.len, pipe_in, &path, &t, &err);
            char want[256];
            snprintf(want, sizeof(want), "%s: data after the end of the gzip stream at byte %zu",
                     path, at);
            if (rc != -EINVAL || strcmp(err.msg, want) != 0)
                fail_msg("case %d%s: rc %d, '%s'; want '%s'", c, pipe_in ? " (pipe)" : "", rc,
                         err.msg, want);
            assert_int_equal(err.line, 0);
            assert_null(t);
            xfree(path);
            util_buf_free(&b);
        }
    util_buf_free(&big);
}

/* /dev/zero (one endless line) is refused at line 1 after reading about
 * TRACE_MAX_LINE bytes, not TRACE_MAX_BYTES: fed through a pipe by a child
 * that counts what it could write before the reader went away. */
static void test_endless_line_stops_early(void **state)
{
    (void)state;
    struct timespec a, z;
    clock_gettime(CLOCK_MONOTONIC, &a);
    struct trace *t = NULL;
    struct trace_error err = {0};
    assert_int_equal(trace_load_file("/dev/zero", &t, &err), -E2BIG);
    clock_gettime(CLOCK_MONOTONIC, &z);
    assert_int_equal(err.line, 1);
    assert_non_null(strstr(err.msg, "longer than"));
    assert_null(t);
    assert_true((z.tv_sec - a.tv_sec) * 1000 + (z.tv_nsec - a.tv_nsec) / 1000000 < 2000);

    int data[2], count[2];
    assert_int_equal(pipe(data), 0);
    assert_int_equal(pipe(count), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_IGN);
        close(data[0]);
        close(count[0]);
        static const char zeros[4096];
        unsigned long long sent = 0;
        for (;;) {
            ssize_t w = write(data[1], zeros, sizeof(zeros));
            if (w <= 0)
                break;
            sent += (unsigned long long)w;
        }
        if (write(count[1], &sent, sizeof(sent)) != sizeof(sent))
            _exit(1);
        _exit(0);
    }
    close(data[1]);
    close(count[1]);
    int saved = dup(STDIN_FILENO);
    dup2(data[0], STDIN_FILENO);
    close(data[0]);
    t = NULL;
    int rc = trace_load_file("-", &t, &err);
    dup2(saved, STDIN_FILENO); /* closes the last read end: the child stops */
    close(saved);
    unsigned long long sent = 0;
    assert_int_equal(read(count[0], &sent, sizeof(sent)), (ssize_t)sizeof(sent));
    close(count[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(rc, -E2BIG);
    assert_int_equal(err.line, 1);
    /* what the loader read, plus at most a pipe buffer and one write */
    assert_true(sent < 1024 * 1024);
    assert_true(sent >= TRACE_MAX_LINE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_and_extra_columns),
        cmocka_unit_test(test_no_header_crlf_comments),
        cmocka_unit_test(test_gaps_600s_grid),
        cmocka_unit_test(test_decimal_times_and_tolerance),
        cmocka_unit_test(test_single_row_and_bom),
        cmocka_unit_test(test_missing_buckets_and_a_finer_grid),
        cmocka_unit_test(test_one_off_grid_row_does_not_refine),
        cmocka_unit_test(test_unnamed_numeric_column),
        cmocka_unit_test(test_numeric_first_line_is_not_a_header),
        cmocka_unit_test(test_span_limit),
        cmocka_unit_test(test_one_second_shared_shape),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_error_text_is_truncated_and_printable),
        cmocka_unit_test(test_request_limit_and_long_lines),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_writer_format),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_load_file_streams_like_parse),
        cmocka_unit_test(test_load_gzip),
        cmocka_unit_test(test_load_gzip_members),
        cmocka_unit_test(test_load_gzip_trailing_zeros),
        cmocka_unit_test(test_load_gzip_trailing_garbage),
        cmocka_unit_test(test_endless_line_stops_early),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for trace_load_file, the reader `simulate --trace` and
 * `plan --trace` use: it streams the file through zlib in TRACE_READ_CHUNK
 * reads, joins a line split across two reads, finds lone carriage returns
 * and checks the size, none of which trace_parse (fuzz-trace.c) runs. The
 * input is written to a memfd and read back three ways, each of which must
 * give exactly what trace_parse gives on the same bytes (the same trace, or
 * the same error, line and message):
 *
 *   - as it is (an input that starts like gzip is only read: zlib inflates
 *     it, so it has no trace_parse counterpart, but it must not crash);
 *   - gzip-compressed;
 *   - gzip-compressed in two members split at an offset chosen from the
 *     input (a line may straddle them), then zero padding: the members read
 *     as one stream and the zeros are skipped;
 *   - after comment lines that put the first read's end at an offset chosen
 *     from the input, so its lines straddle two reads.
 *
 * Both readers get a span of at most FUZZ_MAX_SPAN_MS (trace_opts), which
 * keeps a trace to a million buckets: a row at t = 8.6e9 s (21 million
 * buckets, legal) took seconds per read under the sanitizers, five reads an
 * input. fuzz-trace.c reads the long spans. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/** Inputs above this are not compared (the format's limits are far above). */
#define FUZZ_MAX_INPUT ((size_t)1 << 20)
/** The span both readers are limited to: 10^6 s, so at most 10^6 buckets. */
#define FUZZ_MAX_SPAN_MS ((int64_t)1000 * 1000 * 1000)

static const struct trace_opts opts = {.max_span_ms = FUZZ_MAX_SPAN_MS};

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-trace-file: invariant violated: %s\n", what);
        abort();
    }
}

/* A memfd holding buf; its /proc path in path. -1 when memfds are missing. */
static int memfile(const void *buf, size_t len, char path[64])
{
    int fd = memfd_create("fuzz-trace-file", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

/* gzip of buf (one member); NULL when zlib fails. */
static unsigned char *gzip(const void *buf, size_t len, size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    uLong cap = deflateBound(&zs, (uLong)len) + 64;
    unsigned char *out = malloc(cap);
    if (!out) {
        deflateEnd(&zs);
        return NULL;
    }
    zs.next_in = (Bytef *)(uintptr_t)buf;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    int rc = deflate(&zs, Z_FINISH);
    *out_len = cap - zs.avail_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

static void same_trace(const struct trace *a, const struct trace *b)
{
    check(a->n == b->n && a->t0_ms == b->t0_ms && a->dt_ms == b->dt_ms &&
              a->nmissing == b->nmissing,
          "file and buffer give the same grid");
    check(memcmp(a->requests, b->requests, a->n * sizeof(double)) == 0,
          "file and buffer give the same counts");
    check((a->missing == NULL) == (b->missing == NULL) &&
              (!a->missing || memcmp(a->missing, b->missing, a->n) == 0),
          "file and buffer give the same missing buckets");
}

/* Load the bytes through a memfd (compressed when gz) and compare with
 * trace_parse's result on the plain bytes (want_rc, want, want_err). */
static void load_and_compare(const void *bytes, size_t len, int want_rc,
                             const struct trace *want, const struct trace_error *want_err)
{
    char path[64];
    int fd = memfile(bytes, len, path);
    if (fd < 0)
        return;
    struct trace *t = NULL;
    struct trace_error err;
    memset(&err, 0x55, sizeof(err));
    int rc = trace_load_file_opts(path, &opts, &t, &err);
    close(fd);
    if (rc != want_rc)
        fprintf(stderr, "fuzz-trace-file: file rc %d (line %zu: %.200s), buffer rc %d "
                        "(line %zu: %.200s)\n",
                rc, rc ? err.line : 0, rc ? err.msg : "", want_rc, want_err->line,
                want_rc ? want_err->msg : "");
    check(rc == want_rc, "file and buffer give the same result");
    if (rc == 0) {
        same_trace(t, want);
        trace_free(t);
        return;
    }
    check(t == NULL, "*out untouched on error");
    check(err.line == want_err->line && strcmp(err.msg, want_err->msg) == 0,
          "file and buffer give the same error line and message");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return 0;
    struct trace *want = NULL;
    struct trace_error want_err;
    memset(&want_err, 0, sizeof(want_err));
    int want_rc = trace_parse_opts((const char *)data, size, &opts, &want, &want_err);
    bool gz_magic = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;

    /* 1. as it is */
    if (!gz_magic) {
        load_and_compare(data, size, want_rc, want, &want_err);
    } else { /* inflated by the reader: only no crash, and a consistent result */
        char path[64];
        int fd = memfile(data, size, path);
        if (fd >= 0) {
            struct trace *t = NULL;
            struct trace_error err;
            int rc = trace_load_file_opts(path, &opts, &t, &err);
            close(fd);
            check(rc != 0 || (t && t->n >= 1 && t->dt_ms >= 1000), "inflated trace is sane");
            check(rc == 0 || (t == NULL && memchr(err.msg, '\0', sizeof(err.msg))),
                  "error message set");
            trace_free(t);
        }
    }

    /* 2. gzip-compressed */
    size_t zlen = 0;
    unsigned char *z = gzip(data, size, &zlen);
    if (z) {
        load_and_compare(z, zlen, want_rc, want, &want_err);
        free(z);
    }

    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 16777619u;
    /* 2b. in two members, the first of the input's first cut bytes (cut
     * from the input), then 1 to 1024 zero bytes of padding */
    size_t cut = size ? h % (size + 1) : 0, z1len = 0, z2len = 0, zeros = 1 + (h >> 16) % 1024;
    unsigned char *z1 = gzip(data, cut, &z1len), *z2 = gzip(data + cut, size - cut, &z2len);
    unsigned char *two = z1 && z2 ? calloc(1, z1len + z2len + zeros) : NULL;
    if (two) {
        memcpy(two, z1, z1len);
        memcpy(two + z1len, z2, z2len);
        load_and_compare(two, z1len + z2len + zeros, want_rc, want, &want_err);
    }
    free(two);
    free(z1);
    free(z2);
    trace_free(want);

    /* 3. behind comment lines ending s bytes before the first read's end, so
     * the input's first lines straddle two reads (s from the input) */
    if (gz_magic || size == 0)
        return 0;
    size_t s = 1 + h % (size < 512 ? size : 512);
    size_t pad = TRACE_READ_CHUNK - s, len = pad + size;
    char *buf = malloc(len);
    if (!buf)
        return 0;
    for (size_t off = 0; off < pad;) { /* "#...\n" lines of at most 1 KiB */
        size_t n = pad - off < 1024 ? pad - off : 1024;
        memset(buf + off, '#', n);
        buf[off + n - 1] = '\n';
        off += n;
    }
    memcpy(buf + pad, data, size);
    want = NULL;
    memset(&want_err, 0, sizeof(want_err));
    want_rc = trace_parse_opts(buf, len, &opts, &want, &want_err);
    load_and_compare(buf, len, want_rc, want, &want_err);
    trace_free(want);
    free(buf);
    return 0;
}

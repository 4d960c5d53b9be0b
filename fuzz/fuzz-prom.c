/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for pkg/prom: every input is parsed in both formats with
 * the full validation path, re-parsed in pseudo-random chunks (which must
 * give identical samples and the same error position), and parsed with a
 * want-filter (fast path), which must accept whatever the full path accepts
 * and deliver exactly the matching samples, whole or chunked alike, and
 * also under a 64-byte line cap, whose long unwanted lines it skips (the
 * same samples and lines as the whole read, unless a line it cannot skip is
 * over the cap; comments and # HELP texts over it are skipped too). The
 * filter names a Prometheus 3 UTF-8 name as well. Also drives
 * prom_parse_float and prom_histogram_quantile with bytes of the input. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prom/prom.h"

struct acc {
    uint64_t hash;
    uint64_t n;
    uint64_t wanted; /* samples a filtered parse must deliver */
};

static void mix(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        *h ^= b[i];
        *h *= 1099511628211ULL;
    }
}

/* The filter used by the filtered parse, mirrored here to count matches. */
static const char *const want_names[] = {"vllm:num_requests_running", "a", "nv_inference_count",
                                         "x", "http.server.requests"};
static const char *const want_prefixes[] = {"tgi_", "vllm:e2e", "b"};

static int matches(const struct prom_sample *s)
{
    for (size_t i = 0; i < sizeof(want_names) / sizeof(want_names[0]); i++)
        if (strcmp(s->name, want_names[i]) == 0 || strcmp(s->family, want_names[i]) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(want_prefixes) / sizeof(want_prefixes[0]); i++)
        if (strncmp(s->name, want_prefixes[i], strlen(want_prefixes[i])) == 0)
            return 1;
    return 0;
}

/* Whether v is what label `name` of s reads as: its number, or NaN when the
 * label is missing or not a number. */
static bool bound_matches(const struct prom_sample *s, const char *name, double v)
{
    const char *l = prom_sample_label(s, name);
    double want;
    if (!l || prom_parse_float(l, strlen(l), &want) != 0)
        return isnan(v);
    return isnan(want) ? isnan(v) : v == want;
}

static int on_sample(const struct prom_sample *s, void *arg)
{
    struct acc *a = arg;
    if (strlen(s->name) != s->name_len || strlen(s->family) != s->family_len)
        abort();
    mix(&a->hash, &s->line, sizeof(s->line));
    mix(&a->hash, s->family, s->family_len);
    mix(&a->hash, &s->type, sizeof(s->type));
    mix(&a->hash, s->name, s->name_len);
    mix(&a->hash, &s->suffix, sizeof(s->suffix));
    for (size_t i = 0; i < s->nlabels; i++) {
        const struct prom_label *l = &s->labels[i];
        if (strlen(l->name) != l->name_len || strlen(l->value) != l->value_len)
            abort();
        mix(&a->hash, l->name, l->name_len + 1);
        mix(&a->hash, l->value, l->value_len + 1);
    }
    mix(&a->hash, &s->value, sizeof(s->value));
    mix(&a->hash, &s->has_timestamp, sizeof(s->has_timestamp));
    if (s->has_timestamp)
        mix(&a->hash, &s->timestamp_ms, sizeof(s->timestamp_ms));
    /* le (quantile) is the bound's label read as a number, NaN without one */
    if ((s->type == PROM_HISTOGRAM || s->type == PROM_GAUGE_HISTOGRAM) &&
        s->suffix == PROM_SUFFIX_BUCKET && !bound_matches(s, "le", s->le))
        abort();
    if (s->type == PROM_SUMMARY && s->suffix == PROM_SUFFIX_NONE &&
        !bound_matches(s, "quantile", s->quantile))
        abort();
    a->n++;
    a->wanted += (uint64_t)matches(s);
    return 0;
}

struct run {
    int rc;
    struct prom_error err;
    struct acc acc;
    struct prom_stats st;
};

static void run_parse(const uint8_t *data, size_t size, const struct prom_parser_opts *o,
                      int filtered, uint64_t seed, struct run *r)
{
    memset(r, 0, sizeof(*r));
    r->acc.hash = 14695981039346656037ULL;
    struct prom_parser *p = prom_parser_new(o, on_sample, &r->acc);
    if (filtered) {
        for (size_t i = 0; i < sizeof(want_names) / sizeof(want_names[0]); i++)
            prom_parser_want(p, want_names[i], PROM_MATCH_NAME);
        for (size_t i = 0; i < sizeof(want_prefixes) / sizeof(want_prefixes[0]); i++)
            prom_parser_want(p, want_prefixes[i], PROM_MATCH_PREFIX);
    }
    size_t off = 0;
    r->rc = 0;
    while (off < size && r->rc == 0) {
        size_t n = size - off;
        if (seed) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            size_t c = (size_t)(seed % 37); /* includes empty chunks */
            if (c < n)
                n = c;
        }
        r->rc = prom_parser_feed(p, data + off, n, &r->err);
        off += n;
    }
    if (r->rc == 0)
        r->rc = prom_parser_finish(p, &r->err);
    prom_parser_stats(p, &r->st);
    prom_parser_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int f = 0; f < 2; f++) {
        struct prom_parser_opts o = {.format = f ? PROM_FMT_OPENMETRICS : PROM_FMT_TEXT};
        if (size && (data[0] & 1))
            o.max_line = 64; /* exercise the line cap with real content */
        struct run whole, chunked, filt;
        run_parse(data, size, &o, 0, 0, &whole);
        run_parse(data, size, &o, 0, 0x9e3779b97f4a7c15ULL ^ size, &chunked);
        if (whole.rc != chunked.rc || whole.acc.hash != chunked.acc.hash ||
            whole.acc.n != chunked.acc.n || whole.err.line != chunked.err.line ||
            whole.err.column != chunked.err.column)
            abort();
        if (whole.rc != 0 && (whole.err.code != whole.rc || whole.err.line == 0))
            abort();
        if (whole.rc != 0 && whole.rc != -EINVAL && whole.rc != -E2BIG)
            abort();
        run_parse(data, size, &o, 1, 0, &filt);
        if (whole.rc == 0 &&
            (filt.rc != 0 || filt.acc.n != whole.acc.wanted || filt.st.samples != whole.st.samples))
            abort();
        if (!o.max_line && whole.rc == 0) {
            /* with a cap, the long unwanted lines skipped lose nothing a whole read finds
             * (unless a line the filter cannot skip is over it) */
            struct prom_parser_opts capped = o;
            capped.max_line = 64;
            struct run fc;
            run_parse(data, size, &capped, 1, 0x5851f42d4c957f2dULL ^ size, &fc);
            if (fc.rc != -E2BIG &&
                (fc.rc != 0 || fc.acc.n != whole.acc.wanted ||
                 fc.st.samples != whole.st.samples || fc.st.lines != whole.st.lines))
                abort();
        }
        /* the filtered parse (which skips long unwanted lines) does not depend on the chunks */
        struct run filt_chunked;
        run_parse(data, size, &o, 1, 0x2545f4914f6cdd1dULL ^ size, &filt_chunked);
        if (filt.rc != filt_chunked.rc || filt.acc.hash != filt_chunked.acc.hash ||
            filt.acc.n != filt_chunked.acc.n || filt.err.line != filt_chunked.err.line ||
            filt.st.samples != filt_chunked.st.samples || filt.st.lines != filt_chunked.st.lines)
            abort();
    }

    /* numbers: the input prefix as a float literal */
    double v;
    size_t nl = size < 40 ? size : 40;
    if (prom_parse_float((const char *)data, nl, &v) == 0 && nl == 0)
        abort();

    /* histogram_quantile on doubles built from the input */
    double le[16], cnt[16];
    size_t n = 0;
    for (size_t i = 0; i + 2 <= size && n < 16; i += 2) {
        le[n] = data[i] == 255 ? INFINITY : (double)data[i] - 100.0;
        cnt[n] = (double)data[i + 1];
        n++;
    }
    double q = prom_histogram_quantile(size ? data[0] / 200.0 : 0.5, le, cnt, n);
    (void)q;
    return 0;
}

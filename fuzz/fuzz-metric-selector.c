/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for a metric annotation's selector (scrape/selector.c,
 * scrape/regex.c): the input's first line is a metric field, its regex
 * matchers RE2 patterns; the rest an exposition. A field that parses must
 * compile (the parse checked its patterns) and then select series of the
 * exposition through the extractor (as the request counter, the latency
 * histogram and both gauges), reused three times (its compiled
 * patterns handed over each time, freed at the end): the whole exposition,
 * then its lines up to the middle (series gone), then the whole again
 * (series back). Its histogram series must add up to its sums and feed a
 * pod's state scrape to scrape, the series kept within their caps, every
 * window column released at the end; the first line is also
 * translated as one bare pattern,
 * whose output must compile whenever the translation succeeds. */
#include <math.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "scrape/scrape-int.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *nl = memchr(data, '\n', size);
    size_t flen = nl ? (size_t)(nl - (const char *)data) : size;
    char *field = xstrndup((const char *)data, flen); /* stops at a NUL, as C callers do */
    const char *body = nl ? nl + 1 : "";
    size_t blen = nl ? size - flen - 1 : 0;

    char ere[2048], why[200];
    int cflags;
    if (scrape_regex_translate(field, ere, sizeof(ere), &cflags, why, sizeof(why)) == 0) {
        regex_t r;
        if (regcomp(&r, ere, cflags) != 0)
            __builtin_trap(); /* a translation must be a POSIX expression */
        char *value = xstrndup(body, blen);
        regexec(&r, value, 0, NULL, 0);
        xfree(value);
        regfree(&r);
    }

    struct scrape_selector sel;
    char err[300];
    if (scrape_selector_parse(field, &sel, err, sizeof(err)) == 0) {
        if (scrape_selector_compile(&sel) != 0)
            __builtin_trap(); /* the parse checked every pattern */
        scrape_selector_release(&sel);
        struct scrape_spec spec;
        scrape_spec_init(&spec, SCRAPE_GENERIC);
        snprintf(spec.request_metric, sizeof(spec.request_metric), "%s", field);
        snprintf(spec.latency_metric, sizeof(spec.latency_metric), "%s", field);
        /* and as the in-flight and queue gauges (their series told apart) */
        snprintf(spec.inflight_metric, sizeof(spec.inflight_metric), "%s", field);
        snprintf(spec.queue_metric, sizeof(spec.queue_metric), "%s", field);
        struct scrape_extract *x = xmalloc(sizeof(*x));
        scrape_extract_init(x, &spec, 1 << 20);
        struct scrape_window w;
        scrape_window_init(&w, 5000, 60000);
        struct scrape_podstate st;
        scrape_podstate_init(&st, 0, 60000, 5000);
        size_t half = blen / 2;
        while (half > 0 && body[half - 1] != '\n')
            half--; /* whole lines only */
        for (int round = 0; round < 3; round++) {
            size_t len = round == 1 ? half : blen;
            if (scrape_extract_feed(x, body, len) == 0 && scrape_extract_finish(x) == 0) {
                const struct scrape_sample *sm = &x->s;
                if (sm->hser_n > SCRAPE_MAX_HSERIES || sm->nbuckets > SCRAPE_MAX_BUCKETS)
                    __builtin_trap();
                /* a series marks only bounds there are, and has a line at one */
                for (size_t k = 0; sm->nbuckets && !sm->hser_overflow && k < sm->hser_n; k++) {
                    if (!sm->hser_has[k] ||
                        (sm->nbuckets < 64 && sm->hser_has[k] >> sm->nbuckets))
                        __builtin_trap();
                    for (size_t i = 0; i < sm->nbuckets; i++)
                        if (!(sm->hser_has[k] >> i & 1) && sm->hser_count[k][i] != 0)
                            __builtin_trap(); /* a count where it has no line */
                }
                /* the lines summed at a bound: no more than the bound's
                 * samples, none at a bound there is not */
                for (size_t i = sm->nbuckets; i < SCRAPE_MAX_BUCKETS; i++)
                    if (sm->hsum_n[i] != 0)
                        __builtin_trap();
                /* the series' rows add up to the sums */
                for (size_t i = 0; !sm->hser_overflow && sm->hser_n && i < sm->nbuckets; i++) {
                    double t = 0;
                    for (size_t k = 0; k < sm->hser_n; k++)
                        t += sm->hser_count[k][i];
                    if (fabs(t - sm->count[i]) > 1e-9 * (fabs(t) + 1))
                        __builtin_trap();
                }
                /* and a pod's histogram follows them scrape to scrape */
                scrape_podstate_ok(&st, &w, 1000000 + round * 5000, sm);
                /* no NaN in the window (a count not known is never added; a float
                 * may overflow to infinity on absurd counts) */
                for (size_t i = 0; i < (size_t)w.ncols * w.nslots; i++)
                    if (isnan(w.cnt[i]))
                        __builtin_trap();
                if (st.hist_present > st.hist_rows ||
                    st.hist_rows - st.hist_present > SCRAPE_MAX_HSERIES)
                    __builtin_trap();
                const struct scrape_series_last *l = st.last[SCRAPE_C_REQ];
                if (l && (l->present > l->n || l->n - l->present > SCRAPE_MAX_SERIES))
                    __builtin_trap();
            }
            scrape_extract_reuse(x, &spec, 1 << 20);
        }
        scrape_podstate_free(&st, &w);
        for (unsigned c = 0; c < w.ncols; c++)
            if (w.refs[c])
                __builtin_trap(); /* every column released */
        scrape_window_free(&w);
        scrape_extract_free(x);
        xfree(x);
    } else if (!err[0]) {
        __builtin_trap(); /* a refusal says why */
    }
    xfree(field);
    return 0;
}

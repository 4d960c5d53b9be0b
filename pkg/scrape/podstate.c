/* SPDX-License-Identifier: Apache-2.0 */
/* scrape/podstate: what the scraper remembers of one pod between scrapes:
 * its request counter's samples over the rate window (a scrape_ring; with
 * demand-unit tokens also the two token counters', and the busy-time
 * counter's where the spec names one), its latest gauges, and its latency
 * histogram's last cumulative counts only.
 *
 * A successful scrape turns the histogram into the increase since the
 * previous one and adds it to the workload's scrape_window (at the previous
 * scrape's time). Each series (label set but `le`) counts its own increase,
 * as histogram_quantile over sum by (le) (rate()) does: a series that
 * vanishes (a model unloaded, a label value retired) adds nothing, one that
 * appears counts from 0, one back after a gap counts what it gained since
 * it was last seen (within the rate window; later it is a new baseline), as
 * the counters do (follow()). A series' reset (any bucket lower than before:
 * the process restarted) counts every bucket's new value as its increase,
 * for all its buckets together. A bucket line a series lacks in one scrape
 * is a bucket series without that sample, as for rate(): not a reset; its
 * count is kept until the line is back, and one never seen (or lost to a
 * reset) is a new baseline when it comes. With more than SCRAPE_MAX_HSERIES series their
 * sums are followed instead. A pod whose bounds change starts its
 * histogram afresh (no increase that scrape).
 *
 * Ownership: the ring's samples, the histogram block (counts followed by the
 * pod's column indexes in the window) and the error string are the pod's;
 * the columns they name belong to the window and are released through it.
 * Pure: times are passed in. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "scrape-int.h"
#include "util/util.h"

void scrape_podstate_init(struct scrape_podstate *st, int64_t since_ms, int64_t window_ms,
                          int64_t interval_ms)
{
    unsigned ring_cap = scrape_ring_cap(window_ms, interval_ms);
    memset(st, 0, sizeof(*st));
    scrape_ring_init(&st->requests, ring_cap);
    scrape_ring_init(&st->prompt, ring_cap);
    scrape_ring_init(&st->gen, ring_cap);
    scrape_ring_init(&st->busy, ring_cap);
    scrape_ring_init(&st->rejected, ring_cap);
    st->since_ms = since_ms;
    st->window_ms = window_ms;
    st->last_ok_ms = POLICY_NEVER;
    st->last_try_ms = POLICY_NEVER;
    st->hist_ms = POLICY_NEVER;
}

/* The block: rows x nbuckets counts, rows ids, rows times last seen, rows
 * times last whole, nbuckets column indexes. */
static size_t block_size(size_t rows, size_t n)
{
    return rows * n * sizeof(double) + rows * (sizeof(uint64_t) + 2 * sizeof(int64_t)) + n;
}

static uint64_t *ids_of(const struct scrape_podstate *st)
{
    return (uint64_t *)(st->hist + (size_t)st->hist_rows * st->nbuckets);
}

static int64_t *seen_of(const struct scrape_podstate *st)
{
    return (int64_t *)(ids_of(st) + st->hist_rows);
}

static int64_t *whole_of(const struct scrape_podstate *st)
{
    return seen_of(st) + st->hist_rows;
}

static uint8_t *cols_of(const struct scrape_podstate *st)
{
    return (uint8_t *)(whole_of(st) + st->hist_rows);
}

/* A series last seen at seen_ms and back at t_ms: rate() over the window
 * ending at t_ms holds no sample of it from before the gap. */
static bool stale(const struct scrape_podstate *st, int64_t seen_ms, int64_t t_ms)
{
    return seen_ms <= t_ms - st->window_ms;
}

static void hist_release(struct scrape_podstate *st, struct scrape_window *w)
{
    if (!st->hist)
        return;
    if (w)
        scrape_window_unmap(w, cols_of(st), st->nbuckets);
    xfree(st->hist);
    st->hist = NULL;
    st->nbuckets = 0;
    st->hist_rows = 0;
    st->hist_present = 0;
    st->hist_ms = POLICY_NEVER;
}

void scrape_podstate_free(struct scrape_podstate *st, struct scrape_window *w)
{
    hist_release(st, w);
    xfree(st->hsum);
    st->hsum = NULL;
    for (int c = 0; c < SCRAPE_NC; c++) {
        xfree(st->last[c]);
        st->last[c] = NULL;
    }
    scrape_ring_free(&st->requests);
    scrape_ring_free(&st->prompt);
    scrape_ring_free(&st->gen);
    scrape_ring_free(&st->busy);
    scrape_ring_free(&st->rejected);
    xfree(st->error);
    st->error = NULL;
}

void scrape_podstate_reset(struct scrape_podstate *st, struct scrape_window *w, int64_t since_ms)
{
    char *err = st->error;
    struct scrape_ring ring = st->requests, prompt = st->prompt, gen = st->gen, busy = st->busy,
                       rejected = st->rejected;
    hist_release(st, w);
    xfree(st->hsum); /* init below forgets it */
    for (int c = 0; c < SCRAPE_NC; c++)
        xfree(st->last[c]); /* init below forgets them and the totals */
    scrape_ring_clear(&ring);
    scrape_ring_clear(&prompt);
    scrape_ring_clear(&gen);
    scrape_ring_clear(&busy);
    scrape_ring_clear(&rejected);
    scrape_podstate_init(st, since_ms, st->window_ms, 0); /* its rings are put back: */
    st->requests = ring; /* keeps its arrays for reuse */
    st->prompt = prompt;
    st->gen = gen;
    st->busy = busy;
    st->rejected = rejected;
    st->error = err;
}

void scrape_podstate_fail(struct scrape_podstate *st, int64_t t_ms, enum scrape_fail f,
                          const char *msg)
{
    st->fail = (uint8_t)(f == SCRAPE_FAIL_NONE || f >= SCRAPE_FAIL_COUNT_ ? SCRAPE_FAIL_OTHER : f);
    st->last_try_ms = t_ms;
    if (!st->error || strcmp(st->error, msg) != 0) {
        xfree(st->error);
        st->error = xstrdup(msg);
    }
}

const char *scrape_podstate_error(const struct scrape_podstate *st)
{
    return st->error ? st->error : "";
}

size_t scrape_podstate_memory(const struct scrape_podstate *st)
{
    size_t n = scrape_ring_memory(&st->requests) + scrape_ring_memory(&st->prompt) +
               scrape_ring_memory(&st->gen) + scrape_ring_memory(&st->busy) +
               scrape_ring_memory(&st->rejected);
    if (st->hist)
        n += block_size(st->hist_rows, st->nbuckets);
    if (st->hsum)
        n += sizeof(*st->hsum);
    if (st->error)
        n += strlen(st->error) + 1;
    for (int c = 0; c < SCRAPE_NC; c++)
        if (st->last[c])
            n += sizeof(*st->last[c]) + st->last[c]->n * sizeof(st->last[c]->s[0]);
    return n;
}

void scrape_podstate_backlog(const struct scrape_podstate *st, const struct scrape_spec *spec,
                             int64_t now_ms, int64_t interval_ms, double *running,
                             double *waiting)
{
    *running = *waiting = NAN;
    if (st->last_ok_ms == POLICY_NEVER || now_ms - st->last_ok_ms > 3 * interval_ms)
        return;
    if (spec->inflight_metric[0] && st->has_inflight)
        *running = st->inflight;
    if (spec->queue_metric[0] && st->has_queued)
        *waiting = st->queued;
}

void scrape_podstate_retire(struct scrape_podstate *dst, struct scrape_podstate *src,
                            struct scrape_window *w)
{
    hist_release(src, w);
    *dst = *src;
    dst->error = NULL; /* the error stays with src, which frees it */
    dst->hsum = NULL;  /* and the summed lines' state */
    for (int c = 0; c < SCRAPE_NC; c++)
        dst->last[c] = NULL; /* and the series: dst only keeps the rings */
    scrape_ring_init(&src->requests, src->requests.cap);
    scrape_ring_init(&src->prompt, src->prompt.cap);
    scrape_ring_init(&src->gen, src->gen.cap);
    scrape_ring_init(&src->busy, src->busy.cap);
    scrape_ring_init(&src->rejected, src->rejected.cap);
}

/* The sample's rows: its series one by one, or their sums as one row. */
static bool summed(const struct scrape_sample *s)
{
    return s->hser_overflow || s->hser_n == 0;
}

static size_t rows_of(const struct scrape_sample *s)
{
    return summed(s) ? 1 : s->hser_n;
}

static const double *row_of(const struct scrape_sample *s, size_t k)
{
    return summed(s) ? s->count : s->hser_count[k];
}

static uint64_t id_of(const struct scrape_sample *s, size_t k)
{
    return summed(s) ? 0 : s->hser_id[k];
}

/* The bounds of a summed sample some series lacks this scrape (bit i for
 * le[i]): fewer lines than the most seen there since the series (those at
 * the bound with the most lines) last changed (a vanished, new or swapped
 * series: the sums then read as a restart, or count the new one from 0, as
 * before). A bound only some series have keeps its number of lines and is
 * no gap. */
static uint64_t summed_lacks(struct scrape_podstate *st, const struct scrape_sample *s)
{
    if (!s->hser_overflow) { /* followed one by one: the sums' state is stale when back */
        xfree(st->hsum);
        st->hsum = NULL;
        return 0;
    }
    size_t top = 0; /* the bound with the most lines (+Inf): which series there are */
    for (size_t i = 0; i < s->nbuckets; i++)
        if (s->hsum_n[i] > s->hsum_n[top])
            top = i;
    uint16_t most = s->nbuckets ? s->hsum_n[top] : 0;
    uint64_t ids = s->nbuckets ? s->hsum_ids[top] : 0;
    struct scrape_hsum *h = st->hsum;
    if (!h)
        h = st->hsum = xcalloc(1, sizeof(*h));
    if (h->most != most || h->ids != ids) { /* other series (one swapped for another) */
        h->most = most;
        h->ids = ids;
        h->n = (uint8_t)s->nbuckets;
        memcpy(h->le, s->le, s->nbuckets * sizeof(*s->le));
        memcpy(h->lines, s->hsum_n, s->nbuckets * sizeof(*s->hsum_n));
        return 0;
    }
    uint64_t lacks = 0;
    for (size_t i = 0; i < s->nbuckets; i++) {
        size_t j = 0;
        while (j < h->n && h->le[j] != s->le[i])
            j++;
        if (j == h->n) {
            if (h->n == SCRAPE_MAX_BUCKETS)
                continue;
            h->le[h->n++] = s->le[i];
            h->lines[j] = 0;
        }
        if (s->hsum_n[i] < h->lines[j])
            lacks |= UINT64_C(1) << i;
        else
            h->lines[j] = s->hsum_n[i];
    }
    return lacks;
}

/* Whether row k of the sample has a line for bound i (a sum row: every
 * series it sums, lacks saying where not). */
static bool has_bound(const struct scrape_sample *s, uint64_t lacks, size_t k, size_t i)
{
    return summed(s) ? !(lacks >> i & 1) : (s->hser_has[k] >> i & 1);
}

/* The sample's rows in its own layout: a bound a series lacks in this
 * scrape is not known (NaN), not a 0. */
static void take_rows(const struct scrape_sample *s, uint64_t lacks,
                      double rows[][SCRAPE_MAX_BUCKETS])
{
    for (size_t k = 0; k < rows_of(s); k++)
        for (size_t i = 0; i < s->nbuckets; i++)
            rows[k][i] = has_bound(s, lacks, k, i) ? row_of(s, k)[i] : NAN;
}

/* The sample's rows in the pod's stored layout, when its bounds are those
 * or some of them (a line every series lacks this scrape, as a one-model
 * pod's one series does): a bound it lacks NaN. False for other bounds, or
 * series where a sum was followed or the reverse: a new layout. */
static bool rows_in_layout(const struct scrape_podstate *st, const struct scrape_window *w,
                           const struct scrape_sample *s, uint64_t lacks,
                           double rows[][SCRAPE_MAX_BUCKETS])
{
    if (!st->hist || st->hist_summed != summed(s) || s->nbuckets > st->nbuckets)
        return false;
    const uint8_t *cols = cols_of(st);
    size_t i = 0; /* the sample's next bound; both ascending */
    for (size_t b = 0; b < st->nbuckets; b++) {
        if (cols[b] >= w->ncols)
            return false;
        bool here = i < s->nbuckets && s->le[i] == w->le[cols[b]];
        for (size_t k = 0; k < rows_of(s); k++)
            rows[k][b] = here && has_bound(s, lacks, k, i) ? row_of(s, k)[i] : NAN;
        i += here;
    }
    return i == s->nbuckets;
}

/* Store rows (the sample's series in row_of()'s order, nbuckets n, each
 * last whole at whole[k]) and their ids as the pod's last counts (seen at
 * t_ms), then the rows of the last block's series this sample lacks, in a
 * new block when their number changed; cols (n of them) are copied in. */
static void hist_store(struct scrape_podstate *st, const struct scrape_sample *s, size_t n,
                       const double rowv[][SCRAPE_MAX_BUCKETS], const int64_t *whole,
                       const uint8_t *cols, int64_t t_ms)
{
    size_t rows = rows_of(s), gone = 0;
    double gone_row[SCRAPE_MAX_HSERIES][SCRAPE_MAX_BUCKETS];
    uint64_t gone_id[SCRAPE_MAX_HSERIES];
    int64_t gone_seen[SCRAPE_MAX_HSERIES], gone_whole[SCRAPE_MAX_HSERIES];
    if (st->hist && !summed(s) && !st->hist_summed && st->nbuckets == n) {
        for (size_t j = 0; j < st->hist_rows && gone < SCRAPE_MAX_HSERIES; j++) {
            size_t k = 0;
            while (k < rows && id_of(s, k) != ids_of(st)[j])
                k++;
            if (k < rows)
                continue; /* still here */
            memcpy(gone_row[gone], st->hist + j * n, n * sizeof(double));
            gone_id[gone] = ids_of(st)[j];
            gone_whole[gone] = whole_of(st)[j];
            gone_seen[gone++] = seen_of(st)[j];
        }
    }
    double *h = st->hist;
    if (!h || rows + gone != st->hist_rows || n != st->nbuckets) {
        h = xmalloc(block_size(rows + gone, n));
        xfree(st->hist);
        st->hist = h;
        st->hist_rows = (uint8_t)(rows + gone);
        st->nbuckets = (uint8_t)n;
        memcpy(cols_of(st), cols, n); /* cols is the caller's copy */
    }
    st->hist_present = (uint8_t)rows;
    st->hist_summed = summed(s);
    uint64_t *ids = ids_of(st);
    int64_t *seen = seen_of(st), *wh = whole_of(st);
    for (size_t k = 0; k < rows; k++) {
        memcpy(h + k * n, rowv[k], n * sizeof(double));
        ids[k] = id_of(s, k);
        seen[k] = t_ms;
        wh[k] = whole[k];
    }
    for (size_t g = 0; g < gone; g++) {
        memcpy(h + (rows + g) * n, gone_row[g], n * sizeof(double));
        ids[rows + g] = gone_id[g];
        seen[rows + g] = gone_seen[g];
        wh[rows + g] = gone_whole[g];
    }
}

/* Row now's increase since was (the row's last counts, NULL for a series
 * not seen before, last whole at was_whole) added to inc, and now made the
 * counts to keep. A bound without its line this scrape (NaN) is a bucket
 * series without a sample, as rate() reads it: not a restart; it keeps its
 * count while that count is from within the rate window (later it is not
 * known), counts from 0 in a series that is new or restarted (as their
 * other bounds do), and a bound whose count is not known is a baseline
 * when its line comes. Returns the time the row was last whole. */
static int64_t row_increase(const struct scrape_podstate *st, int64_t t_ms, size_t n, double *now,
                            const double *was, int64_t was_whole, bool sums, double *inc)
{
    bool reset = false, carried = false;
    for (size_t i = 0; was && i < n; i++)
        reset |= now[i] < was[i]; /* false where either is NaN */
    bool keep = was && !reset && !stale(st, was_whole, t_ms);
    for (size_t i = 0; i < n; i++) {
        if (isnan(now[i])) {
            now[i] = !was || reset ? 0 : keep ? was[i] : NAN;
            carried |= !isnan(now[i]) && was && !reset;
        } else if (!was || reset) {
            /* a row of sums that fell lost a series or restarted, which
             * its sums cannot tell: a baseline (the rest's whole histogram
             * counted as one interval's would bury the p99 window) */
            if (!(reset && sums))
                inc[i] += now[i];
        } else if (!isnan(was[i])) {
            inc[i] += now[i] - was[i];
        }
    }
    return carried ? was_whole : t_ms;
}

static void hist_update(struct scrape_podstate *st, struct scrape_window *w, int64_t t_ms,
                        const struct scrape_sample *s)
{
    size_t n = s->nbuckets;
    if (n == 0 || n > SCRAPE_MAX_BUCKETS || !w) {
        hist_release(st, w);
        return;
    }
    double rows[SCRAPE_MAX_HSERIES][SCRAPE_MAX_BUCKETS];
    int64_t whole[SCRAPE_MAX_HSERIES];
    uint64_t lacks = summed_lacks(st, s);
    if (rows_in_layout(st, w, s, lacks, rows)) {
        if (t_ms <= st->hist_ms)
            return; /* not after the snapshot: ignored, as the ring does */
        n = st->nbuckets;
        double inc[SCRAPE_MAX_BUCKETS] = {0};
        const uint64_t *ids = ids_of(st);
        for (size_t k = 0; k < rows_of(s); k++) {
            size_t j = 0;
            while (j < st->hist_rows && ids[j] != id_of(s, k))
                j++;
            whole[k] = t_ms;
            if (j < st->hist_rows && j >= st->hist_present && stale(st, seen_of(st)[j], t_ms))
                continue; /* back after the window: a new baseline */
            bool seen = j < st->hist_rows;
            whole[k] = row_increase(st, t_ms, n, rows[k], seen ? st->hist + j * n : NULL,
                                    seen ? whole_of(st)[j] : t_ms, s->hser_overflow, inc);
        }
        scrape_window_add(w, st->hist_ms, cols_of(st), inc, n);
        uint8_t cols[SCRAPE_MAX_BUCKETS];
        memcpy(cols, cols_of(st), n);
        hist_store(st, s, n, (const double(*)[SCRAPE_MAX_BUCKETS])rows, whole, cols, t_ms);
        st->hist_ms = t_ms;
        return;
    }
    hist_release(st, w); /* new layout (or the first): start afresh */
    uint8_t cols[SCRAPE_MAX_BUCKETS];
    if (scrape_window_map(w, s->le, n, cols) != 0)
        return; /* the window has no room for these bounds: no histogram */
    take_rows(s, lacks, rows);
    for (size_t k = 0; k < rows_of(s); k++)
        whole[k] = t_ms;
    hist_store(st, s, n, (const double(*)[SCRAPE_MAX_BUCKETS])rows, whole, cols, t_ms);
    st->hist_ms = t_ms;
}

/* The ring that holds counter c's running totals. */
static struct scrape_ring *ring_of(struct scrape_podstate *st, enum scrape_counter c)
{
    switch (c) {
    case SCRAPE_C_PROMPT: return &st->prompt;
    case SCRAPE_C_GEN: return &st->gen;
    case SCRAPE_C_BUSY: return &st->busy;
    case SCRAPE_C_REJ: return &st->rejected;
    default: return &st->requests;
    }
}

/* The counter's running total after this scrape: each series' increase
 * since the last good scrape (all of it after a reset, and for a series
 * never seen: a counter created lazily counts from 0), a series gone adding
 * nothing, as sum(rate()) sums series. A series back after a gap counts
 * what it gained since it was last seen while that is within the rate
 * window, as rate() does over its samples in the range (lower than it was,
 * it restarted and counts from 0); back later, its value is a new baseline
 * whatever it is (rate() has no older sample either). With more series
 * than are followed, the sums' increase instead (a drop counts nothing).
 * sum: this scrape's sum of the counter. */
static double follow(struct scrape_podstate *st, enum scrape_counter c, double sum,
                     const struct scrape_sample *s, int64_t t_ms)
{
    const struct scrape_series_set *now = &s->series[c];
    /* a sample made without its series (a sum only): one series */
    bool one = now->overflow || now->n == 0;
    uint16_t n = one ? 1 : now->n;
    struct scrape_series_last *prev = st->last[c];
    double inc = 0;
    if (!prev) {
        inc = sum; /* the first: a baseline (a ring counts only differences) */
    } else if (now->overflow || prev->overflow) {
        /* a falling sum is a series gone (a model unloaded) or a restart, and
         * the sums cannot tell which: read as a restart, the other series'
         * whole totals would pass for one interval's requests (a rate 1,000
         * times the load), so it counts nothing (a restart's first interval
         * is lost) and is the new baseline */
        double before = 0;
        for (uint16_t i = 0; i < prev->present; i++)
            before += prev->s[i].v;
        inc = sum >= before ? sum - before : 0;
        if (c == SCRAPE_C_REQ)
            st->req_reset |= sum < before;
    } else {
        for (uint16_t i = 0; i < n; i++) {
            uint64_t id = one ? 0 : now->id[i];
            double v = one ? sum : now->v[i];
            uint16_t j = 0;
            while (j < prev->n && prev->s[j].id != id)
                j++;
            if (j < prev->n && j >= prev->present && stale(st, prev->s[j].seen_ms, t_ms))
                continue; /* back after the window: a baseline, nothing counted */
            if (j == prev->n || v < prev->s[j].v)
                inc += v; /* new, or restarted: from 0 */
            else
                inc += v - prev->s[j].v;
            if (c == SCRAPE_C_REQ && j < prev->n && v < prev->s[j].v)
                st->req_reset = true;
        }
    }
    /* keep this scrape's series, then the ones gone (newest first) */
    struct {
        uint64_t id;
        double v;
        int64_t seen_ms;
    } keep[2 * SCRAPE_MAX_SERIES];
    uint16_t k = 0;
    for (uint16_t i = 0; i < n; i++) {
        keep[k].id = one ? 0 : now->id[i];
        keep[k].v = one ? sum : now->v[i];
        keep[k++].seen_ms = t_ms;
    }
    if (prev && !one && !prev->overflow) {
        uint16_t gone = 0;
        for (uint16_t j = 0; j < prev->n && gone < SCRAPE_MAX_SERIES; j++) {
            uint16_t i = 0;
            while (i < n && now->id[i] != prev->s[j].id)
                i++;
            if (i < n || (prev->s[j].id == 0 && j < prev->present))
                continue; /* still here, or the sum-only row of no series */
            keep[k].id = prev->s[j].id;
            keep[k].v = prev->s[j].v;
            keep[k++].seen_ms = prev->s[j].seen_ms;
            gone++;
        }
    }
    if (!prev || prev->n != k)
        prev = st->last[c] = xrealloc(prev, sizeof(*prev) + k * sizeof(prev->s[0]));
    prev->n = k;
    prev->present = n;
    prev->overflow = now->overflow;
    for (uint16_t i = 0; i < k; i++) {
        prev->s[i].id = keep[i].id;
        prev->s[i].v = keep[i].v;
        prev->s[i].seen_ms = keep[i].seen_ms;
    }
    st->total[c] += inc;
    if (st->total[c] >= SCRAPE_TOTAL_REBASE) {
        /* its ring counts differences: both moved down by the oldest kept
         * (all of it when none is), so that the total keeps counting in ones */
        struct scrape_ring *r = ring_of(st, c);
        st->total[c] -= r->n > 0 ? scrape_ring_rebase(r) : st->total[c] - inc;
    }
    return st->total[c];
}

void scrape_podstate_ok(struct scrape_podstate *st, struct scrape_window *w, int64_t t_ms,
                        const struct scrape_sample *s)
{
    /* A counter that was there and is gone is not zero: the exposition
     * broke, so this scrape counts as failed rather than as a reset. */
    if (!s->has_requests && st->req_seen) {
        scrape_podstate_fail(st, t_ms, SCRAPE_FAIL_GARBAGE,
                             "request metric disappeared from the exposition");
        return;
    }
    if ((!s->has_prompt && st->prompt_seen) || (!s->has_gen && st->gen_seen)) {
        scrape_podstate_fail(st, t_ms, SCRAPE_FAIL_GARBAGE,
                             "token metric disappeared from the exposition");
        return;
    }
    /* Absent from the start: a lazily created counter (TGI's appear with
     * the first request), so zero. scrape_aggregate() still refuses a
     * workload where no pod has it. */
    /* a running total: a sample the ring ignores (not after its newest)
     * loses no increase, the next one carries it */
    st->req_reset = false;
    scrape_ring_add(&st->requests, t_ms,
                    follow(st, SCRAPE_C_REQ, s->has_requests ? s->requests : 0, s, t_ms));
    st->req_seen = s->has_requests;
    /* token counters, when wanted: the same rules (TGI's histograms appear
     * lazily too); their rings get arrays only then */
    if (s->tokens || s->has_prompt || s->has_gen) {
        scrape_ring_add(&st->prompt, t_ms,
                        follow(st, SCRAPE_C_PROMPT, s->has_prompt ? s->prompt_tokens : 0, s, t_ms));
        scrape_ring_add(&st->gen, t_ms,
                        follow(st, SCRAPE_C_GEN, s->has_gen ? s->gen_tokens : 0, s, t_ms));
    }
    /* the refused requests, when wanted: a lazily created counter too (TGI's
     * appears with the first refusal), absent counting 0 */
    if (s->rejected_wanted || s->has_rejected)
        scrape_ring_add(&st->rejected, t_ms,
                        follow(st, SCRAPE_C_REJ, s->has_rejected ? s->rejected : 0, s, t_ms));
    /* the busy time, optional: a scrape without it forgets its samples (a
     * sample not after the newest is ignored, as the request ring does) */
    if (s->has_busy) {
        (void)scrape_ring_add(&st->busy, t_ms, follow(st, SCRAPE_C_BUSY, s->busy, s, t_ms));
    } else {
        scrape_ring_clear(&st->busy);
        xfree(st->last[SCRAPE_C_BUSY]); /* its next samples start afresh */
        st->last[SCRAPE_C_BUSY] = NULL;
        st->total[SCRAPE_C_BUSY] = 0;
    }
    st->prompt_seen = s->has_prompt;
    st->gen_seen = s->has_gen;
    st->inflight = s->inflight;
    st->has_inflight = s->has_inflight;
    st->queued = s->queued;
    st->has_queued = s->has_queued;
    hist_update(st, w, t_ms, s);
    st->last_ok_ms = t_ms;
    st->last_try_ms = t_ms;
    st->ok_count++;
    st->fail = SCRAPE_FAIL_NONE;
    xfree(st->error); /* kept only while failing */
    st->error = NULL;
}

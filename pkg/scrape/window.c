/* SPDX-License-Identifier: Apache-2.0 */
/* scrape/window: the two small time series the scraper keeps, sized for the
 * rate window rather than for the longest one any caller could want.
 *
 * scrape_ring: one counter's last samples (a pod's request counter), with
 * policy_counter's rules: samples strictly in time order, a decrease is a
 * reset whose new value is the increase, the increase and span computed over
 * the samples in (now - window, now].
 *
 * scrape_window: a workload's latency histogram increases summed over its
 * pods, one row per scrape-interval slot (see scrape-int.h). Pure: times are
 * passed in; memory is allocated on first use and grows only to the number
 * of distinct `le` bounds the pods expose (at most SCRAPE_WINDOW_MAX_COLS). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "scrape-int.h"
#include "util/util.h"

#define NO_SLOT INT64_MIN

/* ---- ring ------------------------------------------------------------------ */

unsigned scrape_ring_cap(int64_t window_ms, int64_t interval_ms)
{
    if (window_ms <= 0 || interval_ms <= 0)
        return SCRAPE_RING_MAX;
    int64_t n = (window_ms + interval_ms - 1) / interval_ms + 1;
    return n < 4 ? 4 : n > SCRAPE_RING_MAX ? SCRAPE_RING_MAX : (unsigned)n;
}

void scrape_ring_init(struct scrape_ring *r, unsigned cap)
{
    memset(r, 0, sizeof(*r));
    r->cap = (uint8_t)(cap < 2 ? 2 : cap > SCRAPE_RING_MAX ? SCRAPE_RING_MAX : cap);
}

void scrape_ring_free(struct scrape_ring *r)
{
    xfree(r->dt);
    r->dt = NULL;
    r->head = r->n = 0;
}

void scrape_ring_clear(struct scrape_ring *r)
{
    r->head = r->n = 0;
}

size_t scrape_ring_memory(const struct scrape_ring *r)
{
    return r->dt ? r->cap * (sizeof(uint32_t) + sizeof(double)) : 0;
}

static unsigned at(const struct scrape_ring *r, unsigned i)
{
    return (r->head + i) % r->cap;
}

/* The values follow the times in the same block (8-byte aligned: cap times
 * of 4 bytes are padded to an even count). */
static double *values(const struct scrape_ring *r)
{
    return (double *)(void *)(r->dt + (r->cap + 1u) / 2u * 2u);
}

static int64_t t_at(const struct scrape_ring *r, unsigned i)
{
    return r->base + r->dt[at(r, i)];
}

static double v_at(const struct scrape_ring *r, unsigned i)
{
    return values(r)[at(r, i)];
}

double scrape_ring_rebase(struct scrape_ring *r)
{
    if (r->n == 0)
        return 0;
    double off = v_at(r, 0), *v = values(r);
    for (unsigned i = 0; i < r->n; i++)
        v[at(r, i)] -= off;
    return off;
}

int scrape_ring_add(struct scrape_ring *r, int64_t t_ms, double v)
{
    if (isnan(v) || v < 0 || isinf(v))
        return -EINVAL;
    if (r->n > 0 && t_ms <= t_at(r, r->n - 1u))
        return -EINVAL;
    if (!r->dt)
        r->dt = xmalloc(((r->cap + 1u) / 2u * 2u) * sizeof(uint32_t) + r->cap * sizeof(double));
    if (r->n == r->cap) {
        r->head = (uint8_t)((r->head + 1) % r->cap);
        r->n--;
    }
    if (r->n == 0) {
        r->base = t_ms;
    } else if (t_ms - r->base > (int64_t)UINT32_MAX / 2) {
        /* 24 days after base: move base up to the oldest sample */
        int64_t shift = t_at(r, 0) - r->base;
        for (unsigned i = 0; i < r->n; i++)
            r->dt[at(r, i)] -= (uint32_t)shift;
        r->base += shift;
        if (t_ms - r->base > (int64_t)UINT32_MAX / 2) { /* a gap of weeks: start over */
            r->head = r->n = 0;
            r->base = t_ms;
        }
    }
    if (t_ms < r->base) /* cannot happen: times only grow, base is the oldest or older */
        return -EINVAL;
    unsigned i = at(r, r->n);
    r->dt[i] = (uint32_t)(t_ms - r->base);
    values(r)[i] = v;
    r->n++;
    return 0;
}

int64_t scrape_ring_newest(const struct scrape_ring *r)
{
    return r->n ? t_at(r, r->n - 1u) : INT64_MIN;
}

int scrape_ring_increase(const struct scrape_ring *r, int64_t now_ms, int64_t window_ms,
                         double *out_increase, int64_t *out_span_ms)
{
    int first = -1, last = -1;
    for (unsigned i = 0; i < r->n; i++) {
        int64_t t = t_at(r, i);
        if (t > now_ms - window_ms && t <= now_ms) {
            if (first < 0)
                first = (int)i;
            last = (int)i;
        }
    }
    if (first < 0 || last <= first)
        return -ENODATA;
    double inc = 0;
    for (int i = first + 1; i <= last; i++) {
        double prev = v_at(r, (unsigned)i - 1), cur = v_at(r, (unsigned)i);
        inc += cur >= prev ? cur - prev : cur;
    }
    int64_t span = t_at(r, (unsigned)last) - t_at(r, (unsigned)first);
    if (span <= 0)
        return -ENODATA;
    *out_increase = inc;
    *out_span_ms = span;
    return 0;
}

/* ---- window ---------------------------------------------------------------- */

void scrape_window_init(struct scrape_window *w, int64_t slot_ms, int64_t window_ms)
{
    memset(w, 0, sizeof(*w));
    w->slot_ms = slot_ms > 0 ? slot_ms : 1;
    int64_t n = window_ms > 0 ? (window_ms + w->slot_ms - 1) / w->slot_ms + 1 : 2;
    w->nslots = n > 4096 ? 4096u : (unsigned)n;
}

void scrape_window_free(struct scrape_window *w)
{
    xfree(w->le);
    xfree(w->refs);
    xfree(w->slot);
    xfree(w->cnt);
    memset(w, 0, sizeof(*w));
}

void scrape_window_clear(struct scrape_window *w)
{
    if (w->cnt)
        memset(w->cnt, 0, (size_t)w->capcols * w->nslots * sizeof(*w->cnt));
    for (unsigned r = 0; w->slot && r < w->nslots; r++)
        w->slot[r] = NO_SLOT;
}

size_t scrape_window_memory(const struct scrape_window *w)
{
    if (!w->capcols)
        return 0;
    return w->capcols * (sizeof(*w->le) + sizeof(*w->refs) + w->nslots * sizeof(*w->cnt)) +
           w->nslots * sizeof(*w->slot);
}

/* Room for one more column (want: the columns the caller may need in all,
 * so the first pod's layout is allocated exactly); false when
 * SCRAPE_WINDOW_MAX_COLS are allocated. */
static bool grow(struct scrape_window *w, unsigned want)
{
    if (w->ncols < w->capcols)
        return true;
    if (w->capcols >= SCRAPE_WINDOW_MAX_COLS)
        return false;
    unsigned cap = w->capcols + (w->capcols / 2 > 8 ? w->capcols / 2 : 8);
    if (cap < want)
        cap = want;
    if (cap > SCRAPE_WINDOW_MAX_COLS)
        cap = SCRAPE_WINDOW_MAX_COLS;
    w->le = xrealloc(w->le, cap * sizeof(*w->le));
    w->refs = xrealloc(w->refs, cap * sizeof(*w->refs));
    w->cnt = xrealloc(w->cnt, (size_t)cap * w->nslots * sizeof(*w->cnt));
    memset(w->cnt + (size_t)w->capcols * w->nslots, 0,
           (size_t)(cap - w->capcols) * w->nslots * sizeof(*w->cnt));
    if (!w->slot) {
        w->slot = xmalloc(w->nslots * sizeof(*w->slot));
        for (unsigned r = 0; r < w->nslots; r++)
            w->slot[r] = NO_SLOT;
    }
    w->capcols = cap;
    return true;
}

/* The column of bound le, taking a new (or an abandoned) one when it has
 * none; -1 when every column is in use by some pod. */
static int column(struct scrape_window *w, double le, unsigned want)
{
    for (unsigned c = 0; c < w->ncols; c++)
        if (w->le[c] == le)
            return (int)c;
    if (grow(w, want)) {
        unsigned c = w->ncols++;
        w->le[c] = le;
        w->refs[c] = 0;
        return (int)c;
    }
    for (unsigned c = 0; c < w->ncols; c++) {
        if (w->refs[c] == 0) { /* no pod exposes it any more: reuse it */
            w->le[c] = le;
            memset(w->cnt + (size_t)c * w->nslots, 0, w->nslots * sizeof(*w->cnt));
            return (int)c;
        }
    }
    return -1;
}

int scrape_window_map(struct scrape_window *w, const double *le, size_t n, uint8_t *cols)
{
    size_t i = 0;
    for (; i < n; i++) {
        int c = column(w, le[i], w->ncols + (unsigned)(n - i));
        if (c < 0)
            break;
        cols[i] = (uint8_t)c;
        w->refs[c]++;
    }
    if (i == n)
        return 0;
    scrape_window_unmap(w, cols, i);
    return -ENOSPC;
}

void scrape_window_unmap(struct scrape_window *w, const uint8_t *cols, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (cols[i] < w->ncols && w->refs[cols[i]] > 0)
            w->refs[cols[i]]--;
}

void scrape_window_add(struct scrape_window *w, int64_t from_ms, const uint8_t *cols,
                       const double *inc, size_t n)
{
    if (!w->slot || n == 0)
        return;
    int64_t slot = util_floor_div(from_ms, w->slot_ms);
    int64_t m = slot % (int64_t)w->nslots;
    unsigned row = (unsigned)(m < 0 ? m + (int64_t)w->nslots : m);
    if (w->slot[row] != slot) {
        if (w->slot[row] != NO_SLOT && w->slot[row] > slot)
            return; /* older than anything the window still holds */
        for (unsigned c = 0; c < w->capcols; c++)
            w->cnt[(size_t)c * w->nslots + row] = 0;
        w->slot[row] = slot;
    }
    for (size_t i = 0; i < n; i++)
        if (cols[i] < w->ncols)
            w->cnt[(size_t)cols[i] * w->nslots + row] += (float)inc[i];
}

double scrape_window_quantile(const struct scrape_window *w, double q, int64_t now_ms,
                              int64_t window_ms)
{
    if (!w->slot || w->ncols < 2)
        return NAN;
    double le[SCRAPE_WINDOW_MAX_COLS], cnt[SCRAPE_WINDOW_MAX_COLS];
    bool any = false;
    for (unsigned c = 0; c < w->ncols; c++) {
        le[c] = w->le[c];
        cnt[c] = 0;
    }
    for (unsigned r = 0; r < w->nslots; r++) {
        int64_t s = w->slot[r];
        if (s == NO_SLOT)
            continue;
        int64_t start = s * w->slot_ms;
        /* the slot counts when its middle lies in (now - window, now] */
        if (start + w->slot_ms / 2 <= now_ms - window_ms || start > now_ms)
            continue;
        for (unsigned c = 0; c < w->ncols; c++) {
            float v = w->cnt[(size_t)c * w->nslots + r];
            if (v != 0) {
                cnt[c] += v;
                any = true;
            }
        }
    }
    if (!any)
        return NAN;
    /* a bound no pod exposes any more (a rollout to other buckets, another
     * latency-metric) with no increase in the window is left out: left in,
     * empty, it would be a phantom bound the quantile interpolates from
     * (Prometheus keeps such a series until its samples leave the range) */
    unsigned k = 0;
    for (unsigned c = 0; c < w->ncols; c++) {
        if (w->refs[c] == 0 && cnt[c] == 0)
            continue;
        le[k] = le[c];
        cnt[k++] = cnt[c];
    }
    return k >= 2 ? prom_histogram_quantile(q, le, cnt, k) : NAN;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* forecast: the recent seasons' plan. The same time on the last seven
 * seasons (days, by default) says what the look-ahead may hold that neither
 * the smoothed season nor the recent peaks know: a spike that recurs at the
 * same minute on most days (twitter's at 15:32) is a fraction of the
 * seasonal index, which averages the days with and without it, and the
 * recent peaks know no time of day.
 *
 * Each closed bucket's peak is kept for 7 seasons and FC_SEASONS_LEVEL
 * buckets (a ring indexed by bucket index; 0 for a gap fill or a bucket not
 * seen). For a look-ahead over buckets [first, last], season d back (1..7)
 * offers its highest bucket peak over [first - FC_SEASONS_PAD, last +
 * FC_SEASONS_PAD] (a recurring event drifts by a minute or two), scaled by
 * today's level over that season's: the mean bucket peak of the
 * FC_SEASONS_LEVEL buckets up to the last closed one, today and d seasons
 * before. So a Saturday plans from Fridays at Saturday's level. The plan is
 * the upper median of those offers (the 4th highest of 7), once at least
 * FC_SEASONS_MIN seasons offer one: what the middle day did at this time,
 * and, as every plan, at most FC_MAX_GROWTH times the season's highest peak.
 * The 8 levels change only when a bucket closes, so the first plan after a
 * close computes them and keeps them (seasons_lvl, a cache behind a
 * pointer: the plan is const) for the bucket's other plans, 4 a bucket at
 * 15 s ticks; a close or a gap's skip drops them.
 * docs/policy.md, section 2, has the measurements. */
#include "forecast-int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Slot of bucket t >= 0 in a ring of len. */
static int64_t slot(int64_t t, int64_t len)
{
    return t % len;
}

int64_t fc_seasons_len(int64_t m)
{
    if (m > FC_SEASONS_MAX_M)
        return 0;
    return FC_SEASONS * m + FC_SEASONS_LEVEL;
}

void fc_seasons_close(struct forecast *f, int64_t b, double zpeak)
{
    if (!f->seasons || b < 0)
        return;
    f->seasons[slot(b, f->seasons_len)] = isnan(zpeak) ? 0 : fc_buf_step(f, zpeak);
    f->seasons_lvl->b = FC_NONE;
}

void fc_seasons_skip(struct forecast *f, int64_t from, int64_t n)
{
    if (!f->seasons || n <= 0)
        return;
    f->seasons_lvl->b = FC_NONE;
    if (n >= f->seasons_len) {
        memset(f->seasons, 0, (size_t)f->seasons_len * sizeof(*f->seasons));
        return;
    }
    for (int64_t t = from; t < from + n; t++)
        if (t >= 0)
            f->seasons[slot(t, f->seasons_len)] = 0;
}

/* Bucket t's kept step, 0 when none. */
static uint16_t step_at(const struct forecast *f, int64_t t)
{
    return t < 0 ? 0 : f->seasons[slot(t, f->seasons_len)];
}

/* The rate (req/s) of a kept step v > 0. */
static double step_rate(const struct forecast *f, uint16_t v)
{
    double r = exp(fc_step_value(f, v)) - f->cfg.rate_floor;
    return r > 0 ? r : 0;
}

/* Mean kept peak of the FC_SEASONS_LEVEL buckets up to t; NAN when fewer
 * than half are kept. */
static double level_at(const struct forecast *f, int64_t t)
{
    double sum = 0;
    int n = 0;
    for (int64_t k = t - FC_SEASONS_LEVEL + 1; k <= t; k++) {
        uint16_t v = step_at(f, k);
        if (v) {
            sum += step_rate(f, v);
            n++;
        }
    }
    return 2 * n >= FC_SEASONS_LEVEL ? sum / n : NAN;
}

/* The levels at t - d m, d = 0..FC_SEASONS: today's and each season's. */
static void levels_at(const struct forecast *f, int64_t t, double *lvl)
{
    for (int d = 0; d <= FC_SEASONS; d++)
        lvl[d] = level_at(f, t - d * f->m);
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

double fc_seasons_plan(const struct forecast *f, int64_t last_closed, int64_t first, int64_t last)
{
    if (!f->seasons || f->kind != FC_HW)
        return NAN;
    struct fc_levels *c = f->seasons_lvl;
    if (c->b != last_closed) {
        levels_at(f, last_closed, c->lvl);
        c->b = last_closed;
    }
    const double *lvl = c->lvl;
    double today = lvl[0];
    if (isnan(today))
        return NAN;
    const double floor = f->cfg.rate_floor;
    double offer[FC_SEASONS];
    int n = 0;
    for (int d = 1; d <= FC_SEASONS; d++) {
        int64_t off = d * f->m;
        double then = lvl[d];
        if (isnan(then))
            continue;
        /* only buckets closed and still kept: with a season shorter than
         * the look-ahead, the same buckets a season back may not have closed */
        int64_t lo = first - FC_SEASONS_PAD - off, hi = last + FC_SEASONS_PAD - off;
        if (lo < last_closed - f->seasons_len + 1)
            lo = last_closed - f->seasons_len + 1;
        if (hi > last_closed)
            hi = last_closed;
        /* the steps rise with the rate: the highest step is the peak */
        uint16_t top = 0;
        for (int64_t t = lo; t <= hi; t++) {
            uint16_t v = step_at(f, t);
            if (v > top)
                top = v;
        }
        if (!top)
            continue;
        double pk = step_rate(f, top);
        /* the floor keeps a ratio of two idle levels near 1 */
        double ratio = (today + floor) / (then + floor);
        if (ratio < 1.0 / FC_SEASONS_RATIO_MAX)
            ratio = 1.0 / FC_SEASONS_RATIO_MAX;
        if (ratio > FC_SEASONS_RATIO_MAX)
            ratio = FC_SEASONS_RATIO_MAX;
        offer[n++] = pk * ratio;
    }
    if (n < FC_SEASONS_MIN)
        return NAN;
    qsort(offer, (size_t)n, sizeof(offer[0]), cmp_desc);
    /* never more than FC_MAX_GROWTH times the season's highest peak, as
     * every plan (a level ratio of up to 5 on a past spike could be more) */
    double cap = exp(fc_seen_max(f) + log(FC_MAX_GROWTH)) - floor;
    double plan = offer[(n + 1) / 2 - 1];
    return plan < cap ? plan : cap;
}

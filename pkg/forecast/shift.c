/* SPDX-License-Identifier: Apache-2.0 */
/* forecast/shift: moving a forecaster's times, for a wall clock that was
 * stepped (an NTP step, a paused VM's clock corrected) or a state saved
 * under a clock that ran ahead or behind.
 *
 * The caller's other states keep the age of what they measured across such
 * a step (policy_state_shift, capacity_shift); the forecaster does the same:
 * its newest observation moves by delta_ms, and with it every bucket it
 * knows, by d = the number of buckets its open bucket moved. What is kept
 * per bucket index moves with its bucket: the plan rings (slot b mod
 * FC_RING), the recent seasons' peaks (slot b mod their length), the
 * seasonal indices (phase b mod m); the warm-up buffer is kept by position
 * from the first bucket, which moves with the open one. What is kept per
 * phase bin (the residual stores, the bins' peaks, the learned plan's
 * shifts) moves by the nearest whole number of bins, d x 24 / m: exactly d's
 * bins when a bin is a whole number of buckets and d a whole number of bins
 * (a 24 h or a 7 d season of minutes, a step of whole hours); else the
 * nearest. So a forecaster fed under a clock an hour behind and shifted by
 * an hour is, byte for byte, the one fed under the right clock
 * (test_shift). */
#include "forecast-int.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "util/util.h"

/* a mod n in [0, n), n > 0 */
static int64_t mod(int64_t a, int64_t n)
{
    int64_t r = a % n;
    return r < 0 ? r + n : r;
}

/* Move element i of the n elements of sz bytes at base to (i + r) mod n. */
static void rotate(void *base, size_t n, size_t sz, int64_t r)
{
    r = mod(r, (int64_t)n);
    if (n < 2 || r == 0)
        return;
    uint8_t *tmp = xmalloc(n * sz), *p = base;
    memcpy(tmp, p, n * sz);
    for (size_t i = 0; i < n; i++)
        memcpy(p + ((i + (size_t)r) % n) * sz, tmp + i * sz, sz);
    xfree(tmp);
}

int forecast_shift(struct forecast *f, int64_t delta_ms)
{
    if (!f)
        return -EINVAL;
    if (f->acc_n == 0 || delta_ms == 0)
        return 0; /* nothing observed: no time to move */
    if (delta_ms > 0 ? f->last_ms > INT64_MAX - delta_ms : f->last_ms + delta_ms < 0)
        return -ERANGE;
    int64_t last = f->last_ms + delta_ms;
    int64_t d = last / f->cfg.bucket_ms - f->cur;
    /* the first bucket (the open one less those closed) and the first
     * planned one stay where a state may have them */
    if (f->cur - f->seen + d < 0 ||
        (f->origin_first != FC_NONE && f->origin_first + d < FC_MIN_BUCKETS))
        return -ERANGE;
    f->last_ms = last;
    if (d == 0)
        return 0;
    f->cur += d;
    if (f->origin_first != FC_NONE)
        f->origin_first += d;

    rotate(f->peak, FC_RING, sizeof(f->peak[0]), d);
    rotate(f->zmean, FC_RING, sizeof(f->zmean[0]), d);
    rotate(f->seenmax, FC_RING, sizeof(f->seenmax[0]), d);
    rotate(f->point, FC_RING, sizeof(f->point[0]), d);
    rotate(f->planned, FC_RING, sizeof(f->planned[0]), d);
    rotate(f->planned_m, FC_RING, sizeof(f->planned_m[0]), d);
    rotate(f->planned_r, FC_RING, sizeof(f->planned_r[0]), d);
    rotate(f->planned_l, FC_RING, sizeof(f->planned_l[0]), d);
    rotate(f->learn_x, FC_RING, sizeof(f->learn_x[0]), d);
    if (f->season)
        rotate(f->season, (size_t)f->m, sizeof(*f->season), d);
    if (f->seasons) {
        rotate(f->seasons, (size_t)f->seasons_len, sizeof(*f->seasons), d);
        /* slots of buckets before bucket 0 hold none */
        for (int64_t t = f->cur - f->seasons_len; t < 0 && t < f->cur; t++)
            f->seasons[mod(t, f->seasons_len)] = 0;
        f->seasons_lvl->b = FC_NONE;
    }
    int64_t bins = llround((double)mod(d, f->m) * FC_PHASES / (double)f->m);
    rotate(f->res, FC_PHASES, sizeof(f->res[0]), bins);
    rotate(f->res_len, FC_PHASES, sizeof(f->res_len[0]), bins);
    rotate(f->res_pos, FC_PHASES, sizeof(f->res_pos[0]), bins);
    rotate(f->binmax, FC_PHASES, sizeof(f->binmax[0]), bins);
    rotate(f->binstale, FC_PHASES, sizeof(f->binstale[0]), bins);
    rotate(f->learn_shift, FC_PHASES, sizeof(f->learn_shift[0]), bins);
    /* the caches of phase bins and levels are made again, as for a restore */
    fc_stores_sort(f);
    f->q_bucket = FC_NONE;
    f->q_dirty = true;
    fc_plan_quantiles(f, f->cur);
    return 0;
}

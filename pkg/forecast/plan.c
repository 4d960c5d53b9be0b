/* SPDX-License-Identifier: Apache-2.0 */
/* forecast/plan: the calibrated part of the forecaster: window residuals per
 * phase and window length, their quantiles, and the coverage of past plans.
 *
 * When bucket o opens (the model has seen o - 1), the forecaster records for
 * each window length w in {1, 2, 4, 8, 16} the highest point forecast over
 * buckets o .. o + w - 1, P_w(o), and the plan made from it, P_w(o) + Q_w.
 * When bucket o + w - 1 closes, the realised peak over the window, M_w(o) =
 * the highest bucket peak (log of the largest observation in each bucket),
 * is known; the residual e = M_w(o) - P_w(o) goes into the store of o's
 * phase bin and window length, and the plan counts as covered when M_w(o)
 * stayed at or below it. Windows touching a gap bucket are skipped.
 *
 * Q_w for a bucket of phase bin p is the adaptive-level quantile of the
 * residuals of bins p - 1, p and p + 1 (a three-bin neighbourhood, three
 * hours of a daily season), or of every bin while that neighbourhood holds
 * fewer than FORECAST_MIN_EVIDENCE; each bin keeps its newest
 * FC_RES_PER_BIN. Other window lengths interpolate linearly in log2(w).
 * The growth bound (how far a plan may exceed the highest peak seen) is the
 * same quantile of the growth past plans' windows showed; the likely peak's
 * is its median.
 * Because the residual is measured on exactly the quantity planned for, the
 * share of covered plans converges on the quantile when the recent past is
 * like the near future; forecast_result reports it.
 *
 * The recent peaks' plan R_w is the same adaptive-level quantile of the
 * realised peaks M_w of the newest FC_RES_PER_BIN windows of length w, with
 * no model at all. When a window resolves, both plans made at its start
 * are scored by the quantile loss at the nominal level q (q (M - P) for a
 * miss, (1 - q) (P - M) otherwise), in moving averages of weight
 * FC_LOSS_ALPHA (plain means of the first 1 / FC_LOSS_ALPHA), with the
 * recent plan's miss rate beside them; a window length plans from R_w while
 * its loss is the lower and its miss rate at most 1 - q (fc_plan_recent).
 * The adaptive level moves on the hits of the plan used, so the coverage of
 * what is planned stays the one claimed.
 *
 * Every quantile but the early all-bins one is an index into a sorted copy
 * of its store (stores.c), the same value a selection over the ring gives. */
#include "forecast-int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double fc_seen_max(const struct forecast *f)
{
    /* observed bucket peaks only: zlast is the model's fill after a gap, and a
     * rising trend's fill is a rate never seen (the 10x bound then let a plan
     * reach 11.8x the highest observed peak; found by fuzz-forecast) */
    double m = -INFINITY;
    for (int p = 0; p < FC_PHASES; p++)
        if (f->binmax[p] > m)
            m = f->binmax[p];
    return isfinite(m) ? m : f->zlast;
}

double fc_plan_value(const struct forecast *f, double base, double q, double g)
{
    if (q < 0)
        q = 0;
    double plan = base + q;
    /* Until new highs have been measured, the error bound itself bounds them;
     * and never more than FC_MAX_GROWTH times the highest peak of the season. */
    double up = isnan(g) ? q : g > 0 ? g : 0;
    if (up > log(FC_MAX_GROWTH))
        up = log(FC_MAX_GROWTH);
    double cap = fc_seen_max(f) + up;
    return plan < cap ? plan : cap; /* also a point forecast beyond it is cut */
}

/* A moving average of weight FC_LOSS_ALPHA, the plain mean of the first
 * 1 / FC_LOSS_ALPHA values (the n-th value, n >= 1, weighs 1 / n until then):
 * the first value alone would weigh (1 - alpha)^(n - 1), 63 % after ten. */
void fc_ew_update(float *avg, double v, uint32_t n)
{
    double a = 1.0 / n;
    if (a < FC_LOSS_ALPHA)
        a = FC_LOSS_ALPHA;
    *avg = (float)(*avg + a * (v - *avg));
}

static void aci_step(const struct forecast *f, float *level, bool hit, uint32_t n)
{
    double gamma = 1.0 / (2.0 * n); /* n >= 1: this plan is counted */
    if (gamma < FC_ACI_GAMMA)
        gamma = FC_ACI_GAMMA;
    double lv = *level + gamma * ((hit ? 0.0 : 1.0) - (1.0 - f->cfg.quantile));
    *level = (float)(lv < FC_LEVEL_MIN ? FC_LEVEL_MIN : lv > FC_LEVEL_MAX ? FC_LEVEL_MAX : lv);
}

void fc_plan_close(struct forecast *f, int64_t b, double zmean, double zpeak)
{
    int slot = (int)(b % FC_RING);
    f->peak[slot] = (float)zpeak;
    f->zmean[slot] = (float)zmean;
    int bin = fc_phase_bin(f, b);
    bool first = b == 0 || fc_phase_bin(f, b - 1) != bin; /* a new visit of this phase bin */
    if (isnan(zpeak)) {
        /* a gap erases no memory of the season's peaks: the last visit's
         * peak stands until this visit observes one */
        if (first && isfinite(f->binmax[bin]))
            f->binstale[bin] = true;
    } else {
        if (first || f->binstale[bin])
            f->binmax[bin] = -INFINITY;
        f->binstale[bin] = false;
        if (zpeak > f->binmax[bin])
            f->binmax[bin] = (float)zpeak;
    }
    if (f->origin_first == FC_NONE)
        return;
    for (int h = 0; h < FC_HORIZONS; h++) {
        int64_t w = fc_window(h), o = b - w + 1;
        if (o < f->origin_first)
            continue;
        double m = -INFINITY;
        bool gap = false;
        for (int64_t k = o; k <= b; k++) {
            float z = f->peak[k % FC_RING];
            if (isnan(z)) {
                gap = true;
                break;
            }
            if (z > m)
                m = z;
        }
        int os = (int)(o % FC_RING);
        if (gap)
            continue;
        fc_store_wpeak(f, h, (float)m);
        f->q_dirty = true;
        if (isnan(f->point[os][h]))
            continue;
        if (!isnan(f->planned_m[os][h]) && !isnan(f->planned_r[os][h])) {
            /* both kinds' plans scored: quantile loss at the nominal level */
            double tau = f->cfg.quantile;
            uint32_t n = f->loss_n[h] + 1u;
            for (int k = 0; k < 2; k++) {
                double pl = k ? f->planned_r[os][h] : f->planned_m[os][h];
                double l = m > pl ? tau * (m - pl) : (1 - tau) * (pl - m);
                fc_ew_update(&f->loss[k][h], l, n);
            }
            fc_ew_update(&f->miss_r[h], m > f->planned_r[os][h] + 1e-6 ? 1.0 : 0.0, n);
            if (f->loss_n[h] < UINT16_MAX)
                f->loss_n[h]++;
        }
        fc_learn_close(f, o, h, m);
        int ob = fc_phase_bin(f, o);
        fc_store_res(f, ob, h, m - f->point[os][h]);
        if (!isnan(f->seenmax[os]))
            fc_store_growth(f, h, m - f->seenmax[os]);
        /* The coverage counts the plan used: the learned one once it
         * exists. */
        float used = !isnan(f->planned_l[os][h]) ? f->planned_l[os][h] : f->planned[os][h];
        if (!isnan(used) && f->cov_n[h] < UINT32_MAX) { /* a restored count may be at the top */
            f->cov_n[h]++;
            f->cov_excess[h] += used - m;
            f->cov_hit[h] += m <= used + 1e-6;
        }
        if (!isnan(f->planned[os][h])) {
            /* Adaptive conformal step on the chosen of the model's and the
             * recent peaks' plans (the learned plan has its own shift): a
             * miss raises the level, a hit lowers it a little, so the
             * long-run miss rate tends to 1 - quantile. */
            aci_step(f, &f->qlevel[h], m <= f->planned[os][h] + 1e-6, f->cov_n[h]);
        }
    }
}

static void swap_i16(int16_t *a, int i, int j)
{
    int16_t t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* Reorder a[0..n) so that a[k] is the k-th smallest, nothing before it is
 * larger and nothing after it smaller (quickselect: Hoare partitions around
 * a median of three, insertion sort for short ranges), and return it.
 * Linear on average; the full sort it replaces dominated replays. */
static int16_t select_nth(int16_t *a, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (hi - lo >= 16) {
        int mid = lo + (hi - lo) / 2;
        if (a[mid] < a[lo])
            swap_i16(a, lo, mid);
        if (a[hi] < a[lo])
            swap_i16(a, lo, hi);
        if (a[hi] < a[mid])
            swap_i16(a, mid, hi);
        int16_t pivot = a[mid];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j)
                swap_i16(a, i++, j--);
        }
        /* [lo, j] <= pivot, (j, i) == pivot, [i, hi] >= pivot */
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    for (int i = lo + 1; i <= hi; i++) {
        int16_t v = a[i];
        int j = i - 1;
        for (; j >= lo && a[j] > v; j--)
            a[j + 1] = a[j];
        a[j + 1] = v;
    }
    return a[k];
}

/* Where the conformal quantile at `level` of k > 0 sorted values lies: the
 * level x (k + 1)-th smallest (0-based index returned, *frac towards the
 * next), clamped to the smallest and the largest. */
static int conformal_pos(int k, double level, double *frac)
{
    double pos = level * (double)(k + 1) - 1;
    if (pos < 0)
        pos = 0;
    if (pos > k - 1)
        pos = k - 1;
    int lo = (int)pos;
    *frac = pos - lo;
    return lo;
}

/* The smallest of a(lo, n), for lo + 1 < n. */
static int16_t min_after(const int16_t *a, int n, int lo)
{
    int16_t m = a[lo + 1];
    for (int i = lo + 2; i < n; i++)
        if (a[i] < m)
            m = a[i];
    return m;
}

/* a[lo] (a selected rank: nothing larger before it, nothing smaller after
 * it), frac of the way to the next larger value when there is one. */
static double rank_at(const int16_t *a, int n, int lo, double frac)
{
    double v = a[lo];
    if (lo + 1 < n)
        v += frac * (min_after(a, n, lo) - a[lo]);
    return v;
}

/* The conformal quantiles at `level` and at `level2` of k stored residuals
 * (reordered in place): the level x (k + 1)-th smallest, interpolated, the
 * largest when that is past the end (finite-sample coverage of at least
 * `level` for exchangeable residuals). The second selection stays on the
 * side of the first's rank where its own lies: a selection leaves nothing
 * larger before its rank and nothing smaller after it. */
static void quantile_pair(int16_t *tmp, int k, double level, double level2, double *q,
                             double *q2)
{
    if (k == 0) {
        *q = *q2 = 0;
        return;
    }
    double frac, frac2;
    int lo = conformal_pos(k, level, &frac), lo2 = conformal_pos(k, level2, &frac2);
    select_nth(tmp, k, lo);
    *q = rank_at(tmp, k, lo, frac) / FC_RES_SCALE;
    double v;
    if (lo2 < lo) { /* in [0, lo]: its next larger is at most tmp[lo] */
        select_nth(tmp, lo + 1, lo2);
        v = rank_at(tmp, lo + 1, lo2, frac2);
    } else if (lo2 > lo) { /* in (lo, k) */
        select_nth(tmp + lo + 1, k - lo - 1, lo2 - lo - 1);
        v = rank_at(tmp, k, lo2, frac2);
    } else {
        v = rank_at(tmp, k, lo, frac2);
    }
    *q2 = v / FC_RES_SCALE;
}

/* The conformal quantile at `level` of k sorted floats (as quantile_pair). */
static double quantile_f(const float *sorted, int k, double level)
{
    double frac;
    int lo = conformal_pos(k, level, &frac);
    return lo + 1 < k ? sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]) : sorted[lo];
}

/* The conformal quantile at `level` of k > 0 ascending int16 residuals, as
 * quantile_pair() finds it by selection, or 0 for none. */
static double sorted_at(const int16_t *a, int k, double level)
{
    if (k == 0)
        return 0;
    double frac;
    int lo = conformal_pos(k, level, &frac);
    double v = a[lo];
    if (lo + 1 < k)
        v += frac * (a[lo + 1] - a[lo]);
    return v / FC_RES_SCALE;
}

bool fc_plan_recent(const struct forecast *f, int h)
{
    return f->loss_n[h] >= FORECAST_MIN_EVIDENCE &&
           f->wpeak_len[h] >= FORECAST_MIN_EVIDENCE && f->loss[1][h] < f->loss[0][h] &&
           f->miss_r[h] <= 1.0 - f->cfg.quantile;
}

/* The median level shifted as the adaptive level is (the likely plan's
 * level), at least 0.01. */
static double median_level(const struct forecast *f, int h)
{
    double lm = 0.5 + (f->qlevel[h] - f->cfg.quantile);
    return lm < 0.01 ? 0.01 : lm > FC_LEVEL_MAX ? FC_LEVEL_MAX : lm;
}

/* The quantile at the adaptive level of the residuals of the given bins;
 * *n gets how many, *median the quantile at the median level shifted as the
 * adaptive level is. */
static double quantile_of(const struct forecast *f, int h, const int *bins, int nbins, int *n,
                          double *median)
{
    int16_t tmp[FC_PHASES * FC_RES_PER_BIN];
    int k = 0;
    for (int i = 0; i < nbins; i++) {
        int bin = bins[i];
        memcpy(tmp + k, f->res[bin][h], f->res_len[bin][h] * sizeof(int16_t));
        k += f->res_len[bin][h];
    }
    *n = k;
    double v;
    quantile_pair(tmp, k, f->qlevel[h], median_level(f, h), &v, median);
    return v;
}

void fc_plan_quantiles(struct forecast *f, int64_t b)
{
    int bin = fc_phase_bin(f, b);
    if (!f->q_dirty && f->q_bucket != FC_NONE && fc_phase_bin(f, f->q_bucket) == bin) {
        f->q_bucket = b;
        return;
    }
    f->q_dirty = false;
    int all[FC_PHASES];
    for (int i = 0; i < FC_PHASES; i++)
        all[i] = i;
    for (int h = 0; h < FC_HORIZONS; h++) {
        double lm = median_level(f, h);
        fc_store_neighbourhood(f, h, bin);
        int n = f->nb_n[h];
        double q, med;
        if (n >= FORECAST_MIN_EVIDENCE) {
            q = sorted_at(f->nb_sorted[h], n, f->qlevel[h]);
            med = sorted_at(f->nb_sorted[h], n, lm);
        } else {
            q = quantile_of(f, h, all, FC_PHASES, &n, &med);
        }
        f->q[h] = (float)q;
        f->qm[h] = (float)med;
        f->q_n[h] = (uint16_t)n;
        /* The growth bound at the plan's own level, with or without a
         * season. (It was the median before a season exists, because the
         * onsets of on/off bursts held such a trace at twice the replicas
         * its biggest burst needed; the recent peaks' plan now serves that
         * traffic, and the median left plans on a first day's ramps covered
         * 62-88 % of the time: docs/policy.md, section 5.) */
        int ng = f->growth_len[h], nw = f->wpeak_len[h];
        f->g[h] = (float)sorted_at(f->growth_sorted[h], ng, f->qlevel[h]);
        f->gm[h] = (float)sorted_at(f->growth_sorted[h], ng, lm);
        f->g_n[h] = (uint16_t)ng;
        f->r[h] = nw ? (float)quantile_f(f->wpeak_sorted[h], nw, f->qlevel[h]) : NAN;
        f->rm[h] = nw ? (float)quantile_f(f->wpeak_sorted[h], nw, lm) : NAN;
    }
    f->q_bucket = b;
}

void fc_plan_open(struct forecast *f, int64_t b)
{
    int64_t o = b + 1;
    int os = (int)(o % FC_RING);
    fc_plan_quantiles(f, o);
    f->seenmax[os] = (float)fc_seen_max(f);
    for (int h = 0; h < FC_HORIZONS; h++) {
        double best = fc_base(f, b, o, fc_window(h));
        double g = f->g_n[h] >= FORECAST_MIN_EVIDENCE ? f->g[h] : NAN;
        f->point[os][h] = (float)best;
        f->planned_m[os][h] = f->q_n[h] >= FORECAST_MIN_EVIDENCE
                                  ? (float)fc_plan_value(f, best, f->q[h], g)
                                  : NAN;
        f->planned_r[os][h] = f->wpeak_len[h] >= FORECAST_MIN_EVIDENCE
                                  ? (float)fc_plan_value(f, f->r[h], 0, g)
                                  : NAN;
        f->planned[os][h] = fc_plan_recent(f, h) && !isnan(f->planned_m[os][h])
                                ? f->planned_r[os][h]
                                : f->planned_m[os][h];
        fc_learn_open(f, b, o, h, best, g);
    }
    /* The first buckets' model is not settled: plan (and learn) from the
     * FC_MIN_BUCKETS-th on. */
    if (f->seen < FC_MIN_BUCKETS)
        return;
    if (f->origin_first == FC_NONE)
        f->origin_first = o;
}

int fc_horizon_index(int64_t w)
{
    int h = 0;
    while (h + 1 < FC_HORIZONS && fc_window(h + 1) <= w)
        h++;
    return h;
}

/* The stored window lengths around w buckets (clamped to [1,
 * FORECAST_MAX_WINDOW]) and how far w lies from the shorter towards the
 * longer, in log2 of the length. */
struct span {
    int lo, hi;
    double x;
};

static struct span span_of(double w)
{
    if (!(w >= 1))
        w = 1;
    if (w > FORECAST_MAX_WINDOW)
        w = FORECAST_MAX_WINDOW;
    struct span sp;
    sp.lo = fc_horizon_index((int64_t)w);
    sp.hi = sp.lo + 1 < FC_HORIZONS ? sp.lo + 1 : sp.lo;
    sp.x = sp.hi == sp.lo ? 0 : log2(w) - sp.lo;
    return sp;
}

/* Interpolate towards the longer window only once it has evidence of its
 * own (it resolves later); until then the shorter window's value, whatever
 * the longer one holds (NaN while it has none: 0 x NaN is NaN, and a NaN
 * plan is cut to the highest peak seen). */
static double lerp(const float *v, struct span sp, bool longer_ok)
{
    if (!longer_ok || !(sp.x > 0))
        return v[sp.lo];
    return v[sp.lo] + sp.x * (v[sp.hi] - v[sp.lo]);
}

double fc_plan_quantile(const struct forecast *f, double w, int64_t *evidence, double *median)
{
    struct span sp = span_of(w);
    bool ok = f->q_n[sp.hi] >= FORECAST_MIN_EVIDENCE;
    *evidence = f->q_n[sp.lo];
    if (median)
        *median = lerp(f->qm, sp, ok);
    return lerp(f->q, sp, ok);
}

double fc_plan_growth(const struct forecast *f, double w, double *median)
{
    struct span sp = span_of(w);
    if (f->g_n[sp.lo] < FORECAST_MIN_EVIDENCE) {
        *median = NAN;
        return NAN;
    }
    bool ok = f->g_n[sp.hi] >= FORECAST_MIN_EVIDENCE;
    *median = lerp(f->gm, sp, ok);
    return lerp(f->g, sp, ok);
}

double fc_plan_recent_quantile(const struct forecast *f, double w, double *median)
{
    struct span sp = span_of(w);
    bool ok = f->wpeak_len[sp.hi] >= FORECAST_MIN_EVIDENCE;
    *median = lerp(f->rm, sp, ok);
    return lerp(f->r, sp, ok);
}

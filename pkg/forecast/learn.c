/* SPDX-License-Identifier: Apache-2.0 */
/* forecast/learn: the learned plan, a linear quantile regression of the
 * window peak on what the forecaster knows at the window's start.
 *
 * The model's plan (point forecast plus its error quantile) and the recent
 * peaks' plan are each right on some traffic; plan.c picks one of them by
 * its recent loss. The learned plan combines them instead. At the start of
 * a window of w buckets, with P the point forecast's highest value over it
 * (log space), the features are
 *
 *   x = (1, Q, R - P, peak(o - 1) - P, mean(o - 1) - P)
 *
 * Q the model's error quantile for the window's phase bin, R the recent
 * peaks' quantile, and the last closed bucket's peak and mean (the error
 * the point forecast carries into the window); the target is M - P, the
 * realised window peak above the point forecast. For the window lengths a
 * look-ahead has asked for (the two around it), the newest FC_LEARN_ROWS
 * resolved windows are kept (int16, like the residuals) and the
 * coefficients refitted every FC_LEARN_REFIT of them by iteratively
 * reweighted least squares at the nominal quantile (from the last fit).
 * The plan is
 *
 *   L = P + beta . x + s[phase bin]
 *
 * where s moves by FC_LEARN_GAMMA x (miss - (1 - q)) each time a learned
 * plan of that phase bin resolves (adaptive conformal inference per time of
 * day: a linear fit's misses gather at the day's ramps), and L is bounded as
 * every plan is (fc_plan_value). It is used once its window length has
 * FC_LEARN_MIN rows, about 3.3 hours of history. The coefficients and the
 * shifts are checkpointed, the rows are not (they would quadruple a
 * checkpoint): a restored fit serves at once, and is refitted when as many
 * new rows are kept as it was fitted on (learn_fit_n), not on the first few
 * after the restart. docs/policy.md, section 2. */
#include "forecast-int.h"

#include <math.h>
#include <string.h>

#include "util/util.h"

static double dec(int16_t v)
{
    return v / FC_RES_SCALE;
}

/* The features of a window whose base is p, from the quantiles of its phase
 * bin (f->q, f->r: the cache fc_plan_quantiles() filled) and the last closed
 * bucket lb. False when one is unknown. */
static bool features(const struct forecast *f, int h, int64_t lb, double p,
                     double x[FC_LEARN_NX])
{
    int ls = (int)(((lb % FC_RING) + FC_RING) % FC_RING);
    x[0] = 1;
    x[1] = f->q[h];
    x[2] = f->r[h] - p;
    x[3] = f->peak[ls] - p;
    x[4] = f->zmean[ls] - p;
    if (f->q_n[h] < FORECAST_MIN_EVIDENCE || f->wpeak_len[h] < FORECAST_MIN_EVIDENCE)
        return false;
    for (int k = 0; k < FC_LEARN_NX; k++)
        if (!isfinite(x[k]))
            return false;
    return true;
}

static double predict(const struct forecast *f, int h, const double x[FC_LEARN_NX])
{
    double v = 0;
    for (int k = 0; k < FC_LEARN_NX; k++)
        v += f->learn_beta[h][k] * x[k];
    return v;
}

/* Gaussian elimination with partial pivoting; false when singular. */
static bool solve(double a[FC_LEARN_NX][FC_LEARN_NX], double r[FC_LEARN_NX],
                  double out[FC_LEARN_NX])
{
    const int n = FC_LEARN_NX;
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int i = c + 1; i < n; i++)
            if (fabs(a[i][c]) > fabs(a[piv][c]))
                piv = i;
        if (!(fabs(a[piv][c]) > 1e-12))
            return false;
        if (piv != c) {
            for (int k = 0; k < n; k++) {
                double t = a[c][k];
                a[c][k] = a[piv][k];
                a[piv][k] = t;
            }
            double t = r[c];
            r[c] = r[piv];
            r[piv] = t;
        }
        for (int i = c + 1; i < n; i++) {
            double m = a[i][c] / a[c][c];
            for (int k = c; k < n; k++)
                a[i][k] -= m * a[c][k];
            r[i] -= m * r[c];
        }
    }
    for (int i = n - 1; i >= 0; i--) {
        double v = r[i];
        for (int k = i + 1; k < n; k++)
            v -= a[i][k] * out[k];
        out[i] = v / a[i][i];
    }
    return true;
}

bool fc_learn_fit(const int16_t *rows, int n, double tau, int iterations,
                  double beta[FC_LEARN_NX])
{
    double b[FC_LEARN_NX] = {0};
    bool warm = iterations < FC_LEARN_ITERATIONS; /* from beta, not least squares */
    if (n < FC_LEARN_NX || !(tau > 0 && tau < 1) || iterations < 1)
        return false;
    if (warm)
        memcpy(b, beta, sizeof(b));
    /* decoded once: the passes below read them `iterations` times */
    double *d = xmalloc((size_t)n * FC_LEARN_NX * sizeof(double));
    for (size_t i = 0; i < (size_t)n * FC_LEARN_NX; i++)
        d[i] = dec(rows[i]);
    bool ok = true;
    for (int it = 0; it < iterations && ok; it++) {
        double a[FC_LEARN_NX][FC_LEARN_NX] = {{0}}, r[FC_LEARN_NX] = {0};
        for (int i = 0; i < n; i++) {
            const double *row = d + (size_t)i * FC_LEARN_NX; /* x1..x4, the target */
            double x[FC_LEARN_NX] = {1, row[0], row[1], row[2], row[3]};
            double y = row[FC_LEARN_NX - 1];
            double wt = 1; /* a cold start's first pass is least squares */
            if (it > 0 || warm) {
                double e = y;
                for (int k = 0; k < FC_LEARN_NX; k++)
                    e -= b[k] * x[k];
                double ae = fabs(e) > FC_LEARN_EPS ? fabs(e) : FC_LEARN_EPS;
                wt = (e > 0 ? tau : 1 - tau) / ae;
            }
            for (int j = 0; j < FC_LEARN_NX; j++) {
                double wx = wt * x[j];
                for (int k = j; k < FC_LEARN_NX; k++)
                    a[j][k] += wx * x[k];
                r[j] += wx * y;
            }
        }
        for (int j = 0; j < FC_LEARN_NX; j++) {
            a[j][j] += 1e-9 * (a[j][j] > 0 ? a[j][j] : 1); /* ridge against collinearity */
            for (int k = 0; k < j; k++)
                a[j][k] = a[k][j];
        }
        double nb[FC_LEARN_NX];
        ok = solve(a, r, nb);
        for (int k = 0; ok && k < FC_LEARN_NX; k++) /* a checkpoint holds it */
            ok = isfinite(nb[k]) && fabs(nb[k]) <= FC_STATE_MAX;
        if (ok)
            memcpy(b, nb, sizeof(b));
    }
    xfree(d);
    if (ok)
        memcpy(beta, b, sizeof(b));
    return ok;
}

void fc_learn_open(struct forecast *f, int64_t b, int64_t o, int h, double p, double g)
{
    int os = (int)(o % FC_RING);
    double x[FC_LEARN_NX];
    bool ok = features(f, h, b, p, x);
    f->learn_x[os][h][0] = NAN;
    f->planned_l[os][h] = NAN;
    if (!ok)
        return;
    for (int k = 1; k < FC_LEARN_NX; k++)
        f->learn_x[os][h][k - 1] = (float)x[k];
    if (!f->learn_ok[h])
        return;
    double s = f->learn_shift[fc_phase_bin(f, o)][h];
    /* at most the plans' cap; a fit far off could put it below any rate:
     * not below the level's bound (a plan of no load all the same), so a
     * state holds what its decoder checks */
    double v = fc_plan_value(f, p + predict(f, h, x) + s, 0, g);
    f->planned_l[os][h] = (float)(v > f->llo ? v : f->llo);
}

void fc_learn_close(struct forecast *f, int64_t o, int h, double m)
{
    int os = (int)(o % FC_RING);
    const float *x = f->learn_x[os][h];
    double p = f->point[os][h];
    if (!isnan(f->planned_l[os][h])) {
        double miss = m > f->planned_l[os][h] + 1e-6 ? 1.0 : 0.0;
        float *s = &f->learn_shift[fc_phase_bin(f, o)][h];
        double v = *s + FC_LEARN_GAMMA * (miss - (1 - f->cfg.quantile));
        *s = (float)(v > FC_LEARN_SHIFT_MAX ? FC_LEARN_SHIFT_MAX
                     : v < -FC_LEARN_SHIFT_MAX ? -FC_LEARN_SHIFT_MAX
                                               : v);
    }
    if (isnan(x[0]) || isnan(p) || !f->learn_want[h])
        return; /* rows only for the window lengths a look-ahead asks for */
    if (!f->learn_rows[h])
        f->learn_rows[h] = xcalloc((size_t)FC_LEARN_ROWS * FC_LEARN_NX, sizeof(int16_t));
    int16_t *row = f->learn_rows[h] + (size_t)f->learn_pos[h] * FC_LEARN_NX;
    for (int k = 0; k < FC_LEARN_NX - 1; k++)
        row[k] = fc_res_encode(x[k]);
    row[FC_LEARN_NX - 1] = fc_res_encode(m - p);
    f->learn_pos[h] = (uint16_t)((f->learn_pos[h] + 1) % FC_LEARN_ROWS);
    if (f->learn_n[h] < FC_LEARN_ROWS)
        f->learn_n[h]++;
    if (f->learn_since[h] < UINT16_MAX)
        f->learn_since[h]++;
    if (f->learn_n[h] >= FC_LEARN_MIN && f->learn_n[h] >= f->learn_fit_n[h] &&
        (!f->learn_ok[h] || f->learn_since[h] >= FC_LEARN_REFIT)) {
        double beta[FC_LEARN_NX];
        for (int k = 0; k < FC_LEARN_NX; k++)
            beta[k] = f->learn_beta[h][k];
        f->learn_since[h] = 0;
        /* a refit starts from the last fit: a few passes move it to the
         * newest rows */
        if (fc_learn_fit(f->learn_rows[h], f->learn_n[h], f->cfg.quantile,
                         f->learn_ok[h] ? FC_LEARN_REFIT_ITERATIONS : FC_LEARN_ITERATIONS, beta)) {
            for (int k = 0; k < FC_LEARN_NX; k++)
                f->learn_beta[h][k] = (float)beta[k];
            f->learn_ok[h] = true;
            f->learn_fit_n[h] = f->learn_n[h];
        }
    }
}

bool fc_learn_margin(const struct forecast *f, double w, int64_t last_closed, double p,
                     bool want, double *margin)
{
    if (!(w >= 1))
        w = 1;
    if (w > FORECAST_MAX_WINDOW)
        w = FORECAST_MAX_WINDOW;
    int lo = fc_horizon_index((int64_t)w);
    int hi = lo + 1 < FC_HORIZONS ? lo + 1 : lo;
    double t = hi == lo ? 0 : log2(w) - lo;
    int bin = fc_phase_bin(f, last_closed + 1);
    double v[2];
    int hs[2] = {lo, hi};
    if (want) /* keep rows of these and fit them from now on */
        f->learn_want[lo] = f->learn_want[hi] = 1;
    for (int i = 0; i < 2; i++) {
        double x[FC_LEARN_NX];
        int h = hs[i];
        if (!f->learn_ok[h] || !features(f, h, last_closed, p, x))
            return false;
        v[i] = predict(f, h, x) + f->learn_shift[bin][h];
    }
    *margin = v[0] + t * (v[1] - v[0]);
    return isfinite(*margin);
}

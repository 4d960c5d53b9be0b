/* SPDX-License-Identifier: Apache-2.0 */
/* plan/model: the demand model a plan forecasts from.
 *
 * The history is averaged into steps aligned to the clock (1 h by default)
 * and modelled on z = ln(rate + floor), where traffic varies
 * multiplicatively; the floor (one GPU's rate at the target utilisation)
 * keeps idle hours finite without letting them dominate. Then, three times:
 *
 *   1. daily means m_d of z minus the current daily profile, over whole days
 *      (90 % of their steps with data);
 *   2. the trend's slope b, Theil-Sen: the median of the slopes between all
 *      pairs of whole days (its buffer sized by them, not by the days the
 *      history spans; weekly: only pairs a whole number of weeks
 *      apart, which cancels the weekday levels whatever they are);
 *   3. the level a at the end of the history: the median of m_d - b t_d
 *      (weekly: per day of the week, their mean is a and the differences
 *      are the weekday offsets);
 *   4. the daily profile: for each step of the day, the median of z minus
 *      the trend and weekday offset, centred to mean 0.
 *
 * Medians keep outages, launches and collection gaps from bending the fit.
 * The forecast is z(t) = a + b t + week(t) + profile(t), the profile and the
 * weekday offsets interpolated linearly between their centres so the curve
 * has no steps at hour or day boundaries. Its 10 % and 90 % residual
 * quantiles give the band, widened by the slope's standard error times the
 * distance from the history. */
#include "plan-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

double plan_quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(*v), cmp_double);
    double x = q * (double)(n - 1);
    size_t i = (size_t)x;
    if (i + 1 >= n)
        return v[n - 1];
    return v[i] + (x - (double)i) * (v[i + 1] - v[i]);
}

double plan_growth_at(double growth, int64_t t_ms, int64_t t0_ms, int64_t h_ms)
{
    double f = h_ms > 0 ? (double)(t_ms - t0_ms) / (double)h_ms : 1;
    if (f < 0)
        f = 0;
    if (f > 1)
        f = 1;
    return 1 + (growth - 1) * f;
}

void plan_steps_free(struct plan_steps *s)
{
    xfree(s->rate);
    memset(s, 0, sizeof(*s));
}

int plan_steps_build(const struct trace *h, double scale, int64_t step_ms, struct plan_steps *out,
                     char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!h || h->n == 0 || h->dt_ms <= 0) {
        snprintf(err, errlen, "the history is empty");
        return -EINVAL;
    }
    if (h->dt_ms > step_ms) {
        char a[32], b[32];
        util_format_duration(step_ms, a, sizeof(a));
        util_format_duration(h->dt_ms, b, sizeof(b));
        if (h->dt_ms > PLAN_DAY_MS / 24) /* no step can be that coarse: say what can work */
            snprintf(err, errlen,
                     "the history's %s buckets are coarser than the coarsest step, 1h: a plan "
                     "needs buckets of 1h or finer",
                     b);
        else
            snprintf(err, errlen, "step: %s is finer than the history's %s buckets", a, b);
        return -EINVAL;
    }
    int64_t t1 = h->t0_ms + (int64_t)h->n * h->dt_ms;
    out->step_ms = step_ms;
    out->t0_ms = util_floor_div(h->t0_ms, step_ms) * step_ms;
    out->n = (size_t)((t1 - out->t0_ms + step_ms - 1) / step_ms);
    out->rate = xcalloc(out->n, sizeof(double));
    double *cover = xcalloc(out->n, sizeof(double));
    for (size_t i = 0; i < h->n; i++) {
        double c = h->requests[i];
        if (isnan(c))
            continue;
        int64_t b0 = h->t0_ms + (int64_t)i * h->dt_ms, b1 = b0 + h->dt_ms;
        /* a bucket spans at most two steps (dt <= step) */
        size_t k = (size_t)((b0 - out->t0_ms) / step_ms);
        int64_t edge = out->t0_ms + (int64_t)(k + 1) * step_ms;
        double in_first = (double)(UTIL_MIN(b1, edge) - b0) / (double)h->dt_ms;
        out->rate[k] += c * scale * in_first;
        cover[k] += (double)(UTIL_MIN(b1, edge) - b0);
        if (b1 > edge && k + 1 < out->n) {
            out->rate[k + 1] += c * scale * (1 - in_first);
            cover[k + 1] += (double)(b1 - edge);
        }
    }
    for (size_t k = 0; k < out->n; k++)
        out->rate[k] = cover[k] >= 0.5 * (double)step_ms ? out->rate[k] / (cover[k] / 1000.0)
                                                         : NAN;
    xfree(cover);
    return 0;
}

void plan_model_clear(struct plan_model *m)
{
    xfree(m->profile);
    m->profile = NULL;
}

/* Centre of step p of the day is at (p + 0.5) step; interpolate cyclically. */
double plan_model_profile_at(const struct plan_model *m, int64_t t_ms)
{
    int64_t tod = t_ms - util_floor_div(t_ms, PLAN_DAY_MS) * PLAN_DAY_MS;
    double x = (double)tod / (double)m->step_ms - 0.5;
    double f = floor(x);
    int64_t P = (int64_t)m->steps_per_day;
    int64_t i0 = ((int64_t)f % P + P) % P, i1 = (i0 + 1) % P;
    double w = x - f;
    return m->profile[i0] * (1 - w) + m->profile[i1] * w;
}

/* Weekday offsets sit at noon of their day; interpolate between days. */
static double week_at(const struct plan_model *m, int64_t t_ms)
{
    if (m->season != PLAN_SEASON_WEEKLY)
        return 0;
    double x = (double)t_ms / (double)PLAN_DAY_MS - 0.5;
    double f = floor(x);
    int64_t d = (int64_t)f;
    double w = x - f;
    return m->week[plan_dow(d)] * (1 - w) + m->week[plan_dow(d + 1)] * w;
}

double plan_model_trend(const struct plan_model *m, double tau)
{
    if (tau <= 0 || m->damping >= 1)
        return m->slope * tau;
    if (m->damping <= 0)
        return 0;
    double phi = m->damping;
    return m->slope * phi * (1 - pow(phi, tau)) / (1 - phi);
}

double plan_model_z(const struct plan_model *m, int64_t t_ms)
{
    double tau = (double)(t_ms - m->origin_ms) / (double)PLAN_DAY_MS;
    return m->level + plan_model_trend(m, tau) + week_at(m, t_ms) +
           plan_model_profile_at(m, t_ms);
}

/* Days of the steps, and which are whole. */
struct days {
    int64_t first;      /* day number of step 0's day */
    size_t n;
    bool *whole;
    size_t nwhole;
    size_t *idx;        /* the nwhole whole days' indices, ascending */
    int per_dow[7];
};

static void find_days(const struct plan_steps *s, size_t P, struct days *d)
{
    int64_t k0 = s->t0_ms / s->step_ms; /* t0 is a multiple of step */
    d->first = util_floor_div(k0, (int64_t)P);
    int64_t last = util_floor_div(k0 + (int64_t)s->n - 1, (int64_t)P);
    d->n = (size_t)(last - d->first + 1);
    d->whole = xcalloc(d->n, sizeof(bool));
    d->idx = xcalloc(d->n, sizeof(size_t));
    d->nwhole = 0;
    memset(d->per_dow, 0, sizeof(d->per_dow));
    for (size_t j = 0; j < d->n; j++) {
        int64_t kd = (d->first + (int64_t)j) * (int64_t)P - k0; /* first step of the day */
        if (kd < 0 || kd + (int64_t)P > (int64_t)s->n)
            continue;
        size_t have = 0;
        for (size_t p = 0; p < P; p++)
            have += !isnan(s->rate[kd + (int64_t)p]);
        if ((double)have >= 0.9 * (double)P) {
            d->whole[j] = true;
            d->idx[d->nwhole++] = j;
            d->per_dow[plan_dow(d->first + (int64_t)j)]++;
        }
    }
}

/* The state of one fit. */
struct fit {
    const struct plan_steps *s;
    const struct days *d;
    size_t P;
    int64_t k0;         /* absolute index of step 0 */
    const double *z;    /* log rate per step, NAN without data */
    double *m, *tau;    /* daily means and their times (days from the origin) */
    double *tmp;
    size_t cap;
    int64_t origin_ms;
    bool weekly;
    struct plan_model *out;
};

static double week_of(const struct fit *f, int64_t t_ms)
{
    return f->weekly ? f->out->week[plan_dow(util_floor_div(t_ms, PLAN_DAY_MS))] : 0;
}

/* One pass of the fit (see the top of the file); fit_slope false keeps the slope. */
static void fit_pass(struct fit *f, bool fit_slope)
{
    const struct days *d = f->d;
    struct plan_model *out = f->out;
    size_t P = f->P;
    double *tmp = f->tmp;
    /* 1. daily means of the deseasonalised log rate */
    for (size_t j = 0; j < d->n; j++) {
        f->m[j] = NAN;
        f->tau[j] = ((double)((d->first + (int64_t)j) * PLAN_DAY_MS - f->origin_ms) +
                     0.5 * (double)PLAN_DAY_MS) / (double)PLAN_DAY_MS;
        if (!d->whole[j])
            continue;
        int64_t kd = (d->first + (int64_t)j) * (int64_t)P - f->k0;
        double sum = 0;
        int cnt = 0;
        for (size_t p = 0; p < P; p++)
            if (!isnan(f->z[kd + (int64_t)p])) {
                sum += f->z[kd + (int64_t)p] - out->profile[p];
                cnt++;
            }
        f->m[j] = sum / cnt;
    }
    /* 2. Theil-Sen slope, over the pairs of whole days only (the days the
     * history spans can be many more: a mistyped time years ahead) */
    if (fit_slope) {
        size_t np = 0;
        for (size_t a = 0; a < d->nwhole; a++)
            for (size_t b = a + 1; b < d->nwhole; b++) {
                size_t i = d->idx[a], j = d->idx[b];
                if ((!f->weekly || (j - i) % 7 == 0) && np < f->cap)
                    tmp[np++] = (f->m[j] - f->m[i]) / (f->tau[j] - f->tau[i]);
            }
        out->slope = np > 0 ? plan_quantile(tmp, np, 0.5) : 0;
    }
    /* 3. level and weekday offsets */
    if (f->weekly) {
        double c[7], sum = 0;
        for (int w = 0; w < 7; w++) {
            size_t nw = 0;
            for (size_t j = 0; j < d->n; j++)
                if (d->whole[j] && plan_dow(d->first + (int64_t)j) == w)
                    tmp[nw++] = f->m[j] - out->slope * f->tau[j];
            c[w] = plan_quantile(tmp, nw, 0.5);
            sum += c[w];
        }
        out->level = sum / 7;
        for (int w = 0; w < 7; w++)
            out->week[w] = c[w] - out->level;
    } else {
        size_t nw = 0;
        for (size_t j = 0; j < d->n; j++)
            if (d->whole[j])
                tmp[nw++] = f->m[j] - out->slope * f->tau[j];
        out->level = plan_quantile(tmp, nw, 0.5);
    }
    /* 4. daily profile */
    double mean = 0;
    for (size_t p = 0; p < P; p++) {
        size_t nv = 0;
        for (size_t k = (size_t)((((int64_t)p - f->k0) % (int64_t)P + (int64_t)P) %
                                 (int64_t)P);
             k < f->s->n; k += P) {
            if (isnan(f->z[k]))
                continue;
            int64_t t = f->s->t0_ms + (int64_t)k * f->s->step_ms + f->s->step_ms / 2;
            double tk = (double)(t - f->origin_ms) / (double)PLAN_DAY_MS;
            tmp[nv++] = f->z[k] - out->level - out->slope * tk - week_of(f, t);
        }
        out->profile[p] = nv ? plan_quantile(tmp, nv, 0.5) : 0;
        mean += out->profile[p];
    }
    mean /= (double)P;
    for (size_t p = 0; p < P; p++)
        out->profile[p] -= mean;
    out->level += mean;
}

/* Standard error of the slope from the scatter of the daily means about the
 * fit (least squares' formula; the days are few, so it is rough). */
static double slope_se(const struct fit *f)
{
    const struct days *d = f->d;
    const struct plan_model *out = f->out;
    double sxx = 0, see = 0, tbar = 0;
    for (size_t j = 0; j < d->n; j++)
        if (d->whole[j])
            tbar += f->tau[j] / (double)d->nwhole;
    for (size_t j = 0; j < d->n; j++) {
        if (!d->whole[j])
            continue;
        double e = f->m[j] - out->level - out->slope * f->tau[j] -
                   (f->weekly ? out->week[plan_dow(d->first + (int64_t)j)] : 0);
        see += e * e;
        sxx += (f->tau[j] - tbar) * (f->tau[j] - tbar);
    }
    return d->nwhole > 2 && sxx > 0 ? sqrt(see / (double)(d->nwhole - 2) / sxx) : 0;
}

/* b (1 - (k se / b)^2), at least 0: a slope within k standard errors of 0
 * counts for nothing, a clear one almost fully. */
static double shrink(double b, double se)
{
    if (b == 0)
        return 0;
    double r = PLAN_TREND_SHRINK * se / b, f = 1 - r * r;
    return f > 0 ? b * f : 0;
}

/* The steps' residual quantiles. */
static void residuals(struct fit *f)
{
    struct plan_model *out = f->out;
    size_t nr = 0;
    for (size_t k = 0; k < f->s->n; k++) {
        if (isnan(f->z[k]))
            continue;
        int64_t t = f->s->t0_ms + (int64_t)k * f->s->step_ms + f->s->step_ms / 2;
        double tk = (double)(t - f->origin_ms) / (double)PLAN_DAY_MS;
        size_t p = (size_t)(((f->k0 + (int64_t)k) % (int64_t)f->P + (int64_t)f->P) %
                            (int64_t)f->P);
        f->tmp[nr++] = f->z[k] - (out->level + out->slope * tk + out->profile[p] + week_of(f, t));
    }
    out->resid_lo = plan_quantile(f->tmp, nr, 0.1);
    out->resid_hi = plan_quantile(f->tmp, nr, 0.9);
    for (size_t i = 0; i < nr; i++)
        f->tmp[i] = fabs(f->tmp[i]);
    out->resid_mad = plan_quantile(f->tmp, nr, 0.5);
}

int plan_model_fit(const struct plan_steps *s, enum plan_season season, enum plan_trend trend,
                   double floor_rps, int64_t origin_ms, struct plan_model *out, char *err,
                   size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (PLAN_DAY_MS % s->step_ms != 0) {
        snprintf(err, errlen, "step: must divide a day");
        return -EINVAL;
    }
    size_t P = (size_t)(PLAN_DAY_MS / s->step_ms);
    struct days d = {0};
    double *z = NULL, *m = NULL, *tau = NULL, *tmp = NULL;
    int rc = 0;
    find_days(s, P, &d);
    bool weekly_ok = d.nwhole >= PLAN_MIN_DAYS_WEEKLY;
    for (int k = 0; k < 7; k++)
        weekly_ok = weekly_ok && d.per_dow[k] >= 2;
    if (season == PLAN_SEASON_AUTO)
        season = weekly_ok ? PLAN_SEASON_WEEKLY : PLAN_SEASON_DAILY;
    double span_days = (double)s->n * (double)s->step_ms / (double)PLAN_DAY_MS;
    if (season == PLAN_SEASON_WEEKLY && !weekly_ok) {
        snprintf(err, errlen,
                 "season: weekly seasonality needs %d whole days of history, every day of the "
                 "week twice; the history has %zu (%.1f days); give more history or --season "
                 "daily", PLAN_MIN_DAYS_WEEKLY, d.nwhole, span_days);
        rc = -EINVAL;
        goto out;
    }
    if (d.nwhole < PLAN_MIN_DAYS_DAILY) {
        snprintf(err, errlen,
                 "too little history: daily seasonality needs %d whole days (midnight to "
                 "midnight on the trace's clock, 90%% of their steps with data); the history "
                 "has %zu (%.1f days)", PLAN_MIN_DAYS_DAILY, d.nwhole, span_days);
        rc = -EINVAL;
        goto out;
    }
    out->season = season;
    out->trend = trend;
    out->damping = trend == PLAN_TREND_LINEAR ? 1 : trend == PLAN_TREND_NONE ? 0
                                                                            : PLAN_TREND_DAMPING;
    out->step_ms = s->step_ms;
    out->steps_per_day = P;
    out->floor = floor_rps;
    out->origin_ms = origin_ms;
    out->profile = xcalloc(P, sizeof(double));
    out->whole_days = d.nwhole;

    z = xmalloc(s->n * sizeof(double));
    for (size_t k = 0; k < s->n; k++) {
        z[k] = isnan(s->rate[k]) ? NAN : log(s->rate[k] + floor_rps);
        out->steps_used += !isnan(z[k]);
    }
    m = xmalloc(d.n * sizeof(double));
    tau = xmalloc(d.n * sizeof(double));
    /* tmp holds a value per step, or per pair of whole days */
    size_t cap = UTIL_MAX(s->n, d.nwhole * (d.nwhole - 1) / 2 + 8);
    tmp = xmalloc(cap * sizeof(double));
    struct fit f = {.s = s, .d = &d, .P = P, .k0 = s->t0_ms / s->step_ms, .z = z, .m = m,
                    .tau = tau, .tmp = tmp, .cap = cap, .origin_ms = origin_ms,
                    .weekly = season == PLAN_SEASON_WEEKLY, .out = out};
    for (int it = 0; it < 3; it++)
        fit_pass(&f, true);
    out->slope_fit = out->slope;
    out->slope_se = slope_se(&f);
    /* carry forward only what the history supports: the slope shrunk by its
     * significance (positive-part James-Stein), then refit the rest to it */
    if (trend == PLAN_TREND_NONE)
        out->slope = 0;
    else if (trend == PLAN_TREND_DAMPED)
        out->slope = shrink(out->slope_fit, out->slope_se);
    if (out->slope != out->slope_fit)
        fit_pass(&f, false);
    residuals(&f);
out:
    if (rc != 0)
        plan_model_clear(out);
    xfree(d.whole);
    xfree(d.idx);
    xfree(z);
    xfree(m);
    xfree(tau);
    xfree(tmp);
    return rc;
}

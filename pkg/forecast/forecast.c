/* SPDX-License-Identifier: Apache-2.0 */
/* forecast: the model half of request-rate forecasting (bucketing, Holt and
 * Holt-Winters smoothing, residual quantile, prediction); the state codec is
 * forecast-state.c.
 *
 * The math (referenced from docs/policy.md)
 * -----------------------------------------
 * Buckets. Time is cut into buckets of width B (bucket_ms); bucket k covers
 * [kB, (k+1)B) in UNIX ms, and its phase in the season is k mod m, m =
 * season_ms / B. Phases are therefore tied to the clock (phase 0 is UTC
 * midnight for a 24 h season), not to when history began. Observations in
 * one bucket are averaged into y_k. The newest bucket stays open until an
 * observation lands in a later bucket; only closed buckets update the model.
 *
 * Gaps. A bucket with no observation is filled with the model's own one-step
 * forecast. For the models below a fill leaves the seasonal index unchanged
 * and maps (l, b) -> (l + phi b, phi b), so k missing buckets are applied in
 * closed form: l += b (phi + ... + phi^k), b *= phi^k. Fills record no
 * residual. (During warm-up the fills are also written to the buffer, one
 * by one; that loop ends after at most 2m buckets.)
 *
 * Warm-up: Holt's damped linear trend, until 2m buckets are closed.
 *     yhat = l + phi b
 *     l'   = alpha y + (1 - alpha)(l + phi b)
 *     b'   = beta (l' - l) + (1 - beta) phi b
 * The first bucket sets l = y, b = 0. The 2m bucket values are buffered.
 *
 * Initialisation of Holt-Winters from the two buffered seasons (classical
 * additive decomposition): a centred moving average of length m (2 x m for
 * even m) gives the trend-cycle T_t for the m (m + 1 for odd m) central
 * buckets; the seasonal index of phase p is the mean of y_t - T_t over those
 * buckets with phase p, then all indices are shifted to sum to zero. A least
 * squares line through the deseasonalised series y_t - s_{p(t)} gives the
 * initial level and trend. The smoothing below is then run over the two
 * seasons, so that the state is current, and the buffer is freed: from here
 * on memory is one season of indices plus fixed-size fields.
 *
 * Additive damped Holt-Winters (Hyndman et al., "Forecasting: Principles and
 * Practice", component form), for the bucket of phase p:
 *     yhat = l + phi b + s_p
 *     l'   = alpha (y - s_p) + (1 - alpha)(l + phi b)
 *     b'   = beta (l' - l) + (1 - beta) phi b
 *     s_p' = gamma (y - l - phi b) + (1 - gamma) s_p
 *
 * Prediction for time t: the open bucket is folded in tentatively (as if it
 * closed now with its current average; the stored state is not changed), so
 * the state describes bucket c. With target bucket T = floor(t / B) and
 * h = T - c steps (h >= 0),
 *     mean = max(0, l + b (phi + ... + phi^h) [+ s_{T mod m}])
 * The seasonal index is the one of the target bucket, so a daily peak is
 * forecast as soon as the target time reaches into it, one cold start before
 * it arrives.
 *
 * Upper quantile. Every closed, observed bucket records the relative
 * one-step residual r = (y - yhat) / scale(yhat, l), where
 *     scale(x, l) = max(x, 0.1 |l|, 0.001 req/s)
 * (relative because errors grow with the rate; the floor of a tenth of the
 * level keeps quiet hours from producing huge ratios). The last 1024 are
 * kept in a ring (about 17 h of 1-min buckets; at the switch to Holt-Winters
 * the ring is refilled with the in-sample residuals of the two warm-up
 * seasons). q is the configured empirical quantile of the ring (linear
 * interpolation). For h steps the one-step spread is widened by the standard
 * ETS(A,Ad,A) forecast-variance factor (Hyndman et al. 2008, ch. 6):
 *     k(h) = sqrt(1 + sum_{j=1}^{h-1} c_j^2),
 *     c_j  = alpha (1 + beta (phi + ... + phi^j)) + gamma [j mod m = 0]
 * (gamma term only for Holt-Winters; the sum is capped at one season), and
 *     upper = mean + max(0, q) k(h) scale(mean, l)
 * which treats the residual quantile as proportional to the error's standard
 * deviation. upper >= mean >= 0 always.
 *
 * Bounds: rates are in [0, FORECAST_MAX_RATE]; level, trend, seasonal and
 * buffered values are clamped to +-1e15 so no sequence of inputs yields an
 * infinity or NaN, and deserialisation accepts only states within those
 * bounds. */
#include "forecast-int.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define REL_FLOOR_FRAC 0.1
#define ABS_FLOOR 1e-3

void forecast_config_init(struct forecast_config *cfg)
{
    cfg->bucket_ms = 60 * 1000;
    cfg->season_ms = 24LL * 3600 * 1000;
    cfg->alpha = 0.3;
    cfg->beta = 0.02;
    cfg->gamma = 0.2;
    cfg->phi = 0.98;
    cfg->quantile = 0.9;
}

/* Written so that NaN fails every test. */
static bool in_open01(double x)
{
    return x > 0.0 && x < 1.0;
}

int fc_config_check(const struct forecast_config *cfg)
{
    if (!cfg || cfg->bucket_ms <= 0 || cfg->season_ms <= 0)
        return -EINVAL;
    if (cfg->season_ms % cfg->bucket_ms != 0)
        return -EINVAL;
    int64_t m = cfg->season_ms / cfg->bucket_ms;
    if (m < 2 || m > FC_MAX_SEASON_BUCKETS)
        return -EINVAL;
    if (!in_open01(cfg->alpha) || !in_open01(cfg->beta) || !in_open01(cfg->gamma))
        return -EINVAL;
    if (!(cfg->phi > 0.0 && cfg->phi <= 1.0))
        return -EINVAL;
    if (!(cfg->quantile > 0.5 && cfg->quantile < 1.0))
        return -EINVAL;
    return 0;
}

struct forecast *fc_alloc(const struct forecast_config *cfg, enum fc_kind kind)
{
    struct forecast *f = xcalloc(1, sizeof(*f));
    f->cfg = *cfg;
    f->m = cfg->season_ms / cfg->bucket_ms;
    f->kind = kind;
    if (kind == FC_WARMUP) {
        f->buf = xcalloc((size_t)(2 * f->m), sizeof(double));
        f->fill = xcalloc(fc_bitmap_len(2 * f->m), 1);
    } else {
        f->season = xcalloc((size_t)f->m, sizeof(double));
    }
    return f;
}

struct forecast *forecast_new(const struct forecast_config *cfg)
{
    if (fc_config_check(cfg) != 0)
        return NULL;
    return fc_alloc(cfg, FC_WARMUP);
}

void forecast_free(struct forecast *f)
{
    if (!f)
        return;
    xfree(f->buf);
    xfree(f->fill);
    xfree(f->season);
    xfree(f);
}

size_t forecast_memory(const struct forecast *f)
{
    if (!f)
        return 0;
    size_t n = sizeof(*f);
    if (f->buf)
        n += (size_t)(2 * f->m) * sizeof(double);
    if (f->fill)
        n += fc_bitmap_len(2 * f->m);
    if (f->season)
        n += (size_t)f->m * sizeof(double);
    return n;
}

const char *forecast_method_name(enum forecast_method m)
{
    switch (m) {
    case FORECAST_NONE:
        return "none";
    case FORECAST_HOLT:
        return "holt";
    case FORECAST_HOLT_WINTERS:
        return "holt-winters";
    }
    return "unknown";
}

/* ---- smoothing ------------------------------------------------------- */

static double clamp_state(double x)
{
    if (isnan(x))
        return 0.0;
    if (x > FC_STATE_MAX)
        return FC_STATE_MAX;
    if (x < -FC_STATE_MAX)
        return -FC_STATE_MAX;
    return x;
}

/* phi + phi^2 + ... + phi^k */
static double phi_sum(double phi, double k)
{
    if (k <= 0.0)
        return 0.0;
    if (phi >= 1.0)
        return k;
    return phi * (1.0 - pow(phi, k)) / (1.0 - phi);
}

static double res_scale(double x, double level)
{
    double s = x > 0.0 ? x : 0.0;
    double fl = REL_FLOOR_FRAC * fabs(level);
    if (fl > s)
        s = fl;
    return s > ABS_FLOOR ? s : ABS_FLOOR;
}

static void res_push(struct forecast *f, double y, double yhat, double level)
{
    double r = (y - yhat) / res_scale(yhat, level);
    if (r > FC_RES_CLIP)
        r = FC_RES_CLIP;
    if (r < -FC_RES_CLIP)
        r = -FC_RES_CLIP;
    f->res[f->res_pos] = (float)r;
    f->res_pos = (f->res_pos + 1) % FC_RES_WINDOW;
    if (f->res_len < FC_RES_WINDOW)
        f->res_len++;
    f->res_dirty = true;
}

static void holt_update(const struct forecast_config *c, double *l, double *b, double y)
{
    double nl = c->alpha * y + (1.0 - c->alpha) * (*l + c->phi * *b);
    double nb = c->beta * (nl - *l) + (1.0 - c->beta) * c->phi * *b;
    *l = clamp_state(nl);
    *b = clamp_state(nb);
}

static void hw_update(const struct forecast_config *c, double *l, double *b, double *s, double y)
{
    double base = *l + c->phi * *b;
    double nl = c->alpha * (y - *s) + (1.0 - c->alpha) * base;
    double nb = c->beta * (nl - *l) + (1.0 - c->beta) * c->phi * *b;
    double ns = c->gamma * (y - base) + (1.0 - c->gamma) * *s;
    *l = clamp_state(nl);
    *b = clamp_state(nb);
    *s = clamp_state(ns);
}

/* Apply k gap buckets filled with the model's own forecast, in closed form. */
static void gap_fill(struct forecast *f, int64_t k)
{
    double dk = (double)k;
    f->level = clamp_state(f->level + f->trend * phi_sum(f->cfg.phi, dk));
    f->trend = clamp_state(f->trend * pow(f->cfg.phi, dk));
    f->seen += k;
}

static size_t phase(const struct forecast *f, int64_t bucket)
{
    return (size_t)(bucket % f->m);
}

/* ---- warm-up and the switch to Holt-Winters ---------------------------- */

static bool fill_bit(const struct forecast *f, int64_t i)
{
    return (f->fill[i / 8] >> (i % 8)) & 1;
}

/* Classical decomposition of the 2m buffered buckets into seasonal indices,
 * level and trend, then smoothing over them; first is the bucket index of
 * buf[0]. Frees the buffer. */
static void hw_init(struct forecast *f, int64_t first)
{
    const struct forecast_config *c = &f->cfg;
    int64_t m = f->m, n = 2 * m, h = m / 2;
    const double *y = f->buf;
    double *s = xcalloc((size_t)m, sizeof(double));
    uint32_t *cnt = xcalloc((size_t)m, sizeof(uint32_t));
    double *pre = xcalloc((size_t)n + 1, sizeof(double));

    for (int64_t i = 0; i < n; i++)
        pre[i + 1] = pre[i] + y[i];
    for (int64_t t = h; t < n - h; t++) {
        double ma;
        if (m % 2 == 1)
            ma = (pre[t + h + 1] - pre[t - h]) / (double)m;
        else
            ma = (0.5 * y[t - h] + (pre[t + h] - pre[t - h + 1]) + 0.5 * y[t + h]) / (double)m;
        size_t p = phase(f, first + t);
        s[p] += y[t] - ma;
        cnt[p]++;
    }
    double mean = 0.0;
    for (int64_t p = 0; p < m; p++) {
        s[p] /= (double)cnt[p]; /* every phase has one or two central buckets */
        mean += s[p];
    }
    mean /= (double)m;
    for (int64_t p = 0; p < m; p++)
        s[p] = clamp_state(s[p] - mean);

    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = (double)i, d = y[i] - s[phase(f, first + i)];
        sx += x;
        sy += d;
        sxx += x * x;
        sxy += x * d;
    }
    double dn = (double)n;
    double slope = (dn * sxy - sx * sy) / (dn * sxx - sx * sx);
    double icpt = (sy - slope * sx) / dn;
    f->level = clamp_state(icpt - slope);
    f->trend = clamp_state(slope);

    f->res_len = 0;
    f->res_pos = 0;
    f->res_q = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double *sp = &s[phase(f, first + i)];
        if (fill_bit(f, i)) {
            f->level = clamp_state(f->level + c->phi * f->trend);
            f->trend = clamp_state(c->phi * f->trend);
            continue;
        }
        res_push(f, y[i], f->level + c->phi * f->trend + *sp, f->level);
        hw_update(c, &f->level, &f->trend, sp, y[i]);
    }

    xfree(pre);
    xfree(cnt);
    xfree(f->buf);
    xfree(f->fill);
    f->buf = NULL;
    f->fill = NULL;
    f->season = s;
    f->kind = FC_HW;
}

/* Close bucket idx with value y (an observation average, or a fill). */
static void close_bucket(struct forecast *f, int64_t idx, double y, bool real)
{
    const struct forecast_config *c = &f->cfg;
    if (f->kind == FC_HW) {
        double *sp = &f->season[phase(f, idx)];
        res_push(f, y, f->level + c->phi * f->trend + *sp, f->level);
        hw_update(c, &f->level, &f->trend, sp, y);
        f->seen++;
        return;
    }
    if (f->seen == 0) {
        f->level = clamp_state(y);
        f->trend = 0.0;
    } else {
        if (real)
            res_push(f, y, f->level + c->phi * f->trend, f->level);
        holt_update(c, &f->level, &f->trend, y);
    }
    f->buf[f->seen] = clamp_state(y);
    if (!real)
        f->fill[f->seen / 8] |= (uint8_t)(1u << (f->seen % 8));
    f->seen++;
    if (f->seen == 2 * f->m)
        hw_init(f, idx - (2 * f->m - 1));
}

static int observe(struct forecast *f, int64_t now_ms, double rate);

int forecast_observe(struct forecast *f, int64_t now_ms, double rate)
{
    int rc = observe(f, now_ms, rate);
    if (f && f->res_dirty) {
        fc_res_q_update(f);
        f->res_dirty = false;
    }
    return rc;
}

static int observe(struct forecast *f, int64_t now_ms, double rate)
{
    if (!f || now_ms < 0 || !isfinite(rate) || rate < 0.0 || rate > FORECAST_MAX_RATE)
        return -EINVAL;
    int64_t b = now_ms / f->cfg.bucket_ms;
    if (f->acc_n == 0) {
        f->cur = b;
        f->acc_n = 1;
        f->acc_sum = rate;
        f->last_ms = now_ms;
        return 0;
    }
    if (now_ms < f->last_ms)
        return -EINVAL;
    if (b == f->cur) {
        if (f->acc_n == UINT32_MAX)
            return -ERANGE;
        f->acc_n++;
        f->acc_sum += rate;
        f->last_ms = now_ms;
        return 0;
    }
    close_bucket(f, f->cur, f->acc_sum / f->acc_n, true);
    int64_t idx = f->cur + 1;
    for (; idx < b && f->kind == FC_WARMUP; idx++)
        close_bucket(f, idx, f->level + f->cfg.phi * f->trend, false);
    if (idx < b)
        gap_fill(f, b - idx);
    f->cur = b;
    f->acc_n = 1;
    f->acc_sum = rate;
    f->last_ms = now_ms;
    return 0;
}

/* ---- prediction ------------------------------------------------------ */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void fc_res_q_update(struct forecast *f)
{
    float tmp[FC_RES_WINDOW];
    size_t n = f->res_len;
    f->res_q = 0.0;
    if (n == 0)
        return;
    memcpy(tmp, f->res, n * sizeof(float));
    qsort(tmp, n, sizeof(float), cmp_float);
    double pos = f->cfg.quantile * (double)(n - 1);
    size_t lo = (size_t)pos;
    if (lo + 1 >= n) {
        f->res_q = tmp[n - 1];
        return;
    }
    double frac = pos - (double)lo;
    f->res_q = tmp[lo] + frac * ((double)tmp[lo + 1] - tmp[lo]);
}

/* k(h): how much wider the h-step error is than the one-step error. */
static double horizon_factor(const struct forecast *f, int64_t h)
{
    const struct forecast_config *c = &f->cfg;
    int64_t cap = h - 1 < f->m ? h - 1 : f->m;
    double sum = 1.0, pw = 1.0, ps = 0.0;
    for (int64_t j = 1; j <= cap; j++) {
        pw *= c->phi;
        ps += pw;
        double cj = c->alpha * (1.0 + c->beta * ps);
        if (f->kind == FC_HW && j % f->m == 0)
            cj += c->gamma;
        sum += cj * cj;
    }
    return sqrt(sum);
}

int forecast_predict(const struct forecast *f, int64_t now_ms, int64_t horizon_ms,
                     struct forecast_result *out)
{
    if (!f || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->method = FORECAST_NONE;
    out->buckets_seen = f->seen;
    if (now_ms < 0 || horizon_ms < 0 || now_ms > INT64_MAX - horizon_ms)
        return -EINVAL;
    if (f->seen < FC_MIN_BUCKETS)
        return -ENODATA;

    const struct forecast_config *c = &f->cfg;
    double y = f->acc_sum / f->acc_n, l = f->level, b = f->trend, mean;
    int64_t target = (now_ms + horizon_ms) / c->bucket_ms;
    int64_t h = target > f->cur ? target - f->cur : 0;
    if (f->kind == FC_WARMUP) {
        holt_update(c, &l, &b, y);
        mean = l + b * phi_sum(c->phi, (double)h);
        out->method = FORECAST_HOLT;
    } else {
        size_t pc = phase(f, f->cur), pt = phase(f, target);
        double sc = f->season[pc];
        hw_update(c, &l, &b, &sc, y);
        mean = l + b * phi_sum(c->phi, (double)h) + (pt == pc ? sc : f->season[pt]);
        out->method = FORECAST_HOLT_WINTERS;
    }
    if (!(mean > 0.0)) /* also maps a NaN, which the clamps rule out, to 0 */
        mean = 0.0;
    double q = f->res_q;
    double spread = q > 0.0 ? q * horizon_factor(f, h) * res_scale(mean, l) : 0.0;
    out->mean = mean;
    out->upper = mean + spread;
    return 0;
}

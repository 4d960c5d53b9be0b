/* SPDX-License-Identifier: Apache-2.0 */
/* forecast: the model half of request-rate forecasting (bucketing, the
 * log-space Holt and Holt-Winters smoothing, prediction); the residuals,
 * plans and coverage are plan.c, the state codec forecast-state.c.
 *
 * The math (referenced from docs/policy.md)
 * -----------------------------------------
 * Buckets. Time is cut into buckets of width B (bucket_ms); bucket k covers
 * [kB, (k+1)B) in UNIX ms, and its phase in the season is k mod m, m =
 * season_ms / B. Phases are tied to the clock (phase 0 is UTC midnight for
 * a 24 h season). A bucket keeps the mean and the peak of its observations;
 * the newest stays open until an observation lands in a later bucket, and
 * only closed buckets update the model.
 *
 * Space. The model sees z = ln(y + f), y the bucket's mean rate, f the rate
 * floor (default 0.1 req/s): traffic grows and falls multiplicatively, so
 * errors have a comparable size at peaks and troughs, and z stays finite at
 * zero.
 *
 * Warm-up: Holt's damped level and trend, until 2m buckets are closed.
 *     l' = alpha z + (1 - alpha)(l + phi b),  b' = beta (l' - l) + (1 - beta) phi b
 * The first bucket sets l = z, b = 0, and the point forecast h buckets ahead
 * is l + b (phi + ... + phi^h): damped, so a trend fitted to minutes of
 * history cannot run away (a forecast 300x the load after 2.5 minutes was
 * once seen on a real cluster), and the plan it feeds is calibrated and
 * bounded (plan.c).
 *
 * Holt-Winters, from the 2m buffered buckets by classical additive
 * decomposition (a centred moving average of length m gives the trend-cycle;
 * the seasonal index of phase p is the mean of z - trend-cycle over the
 * central buckets of that phase, shifted to sum to zero; a least-squares line
 * through the deseasonalised series gives level and trend), then smoothing
 * over the two seasons so the state is current. Then, for the bucket of
 * phase p (Hyndman et al., "Forecasting: Principles and Practice"):
 *     zhat = l + phi b + s_p
 *     l'   = alpha (z - s_p) + (1 - alpha)(l + phi b)
 *     b'   = beta (l' - l) + (1 - beta) phi b
 *     s_p' = gamma (z - l - phi b) + (1 - gamma) s_p
 * and the point forecast j + 1 buckets ahead is
 *     zhat(j) = l + b (phi + ... + phi^(j+1)) + s_{(cur + 1 + j) mod m}.
 *
 * Gaps. A bucket with no observation is filled with the model's own
 * one-step forecast; for both models that leaves the seasonal index alone
 * and maps (l, b) -> (l + phi b, phi b), so k missing buckets are applied in
 * closed form. Fills record no residual and resolve no plan. A gap longer
 * than a season in Holt-Winters is walked one bucket at a time only for its
 * last season (the plan rings and the recent seasons' ring forget the rest),
 * also when warm-up ends inside the gap; a gap of two seasons or more during
 * warm-up starts the model afresh at the observation that ends it (the
 * buffer would hold no season of what was observed). So one observation
 * costs at most two seasons of bucket closes, wherever its time lies.
 *
 * Bounds: rates are in [0, FORECAST_MAX_RATE], so every observed log lies
 * in [ln(f), ln(FORECAST_MAX_RATE + f)]; the level, the last bucket's value
 * and the plans' base are clamped to FC_Z_MARGIN beyond it ([llo, lhi]),
 * the trend to +-(lhi - llo) and the seasonal indices to twice that (which
 * with the level's bound they never reach), so no sequence of inputs yields
 * an infinity or NaN, and deserialisation accepts only states within those
 * bounds (fc_buf_scale sets them). */
#include "forecast-int.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

void forecast_config_init(struct forecast_config *cfg)
{
    cfg->bucket_ms = 60 * 1000;
    cfg->season_ms = 24LL * 3600 * 1000;
    cfg->alpha = 0.3;
    cfg->beta = 0.02;
    cfg->gamma = 0.2;
    cfg->phi = 0.98;
    cfg->quantile = 0.9;
    cfg->rate_floor = 0.1;
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
    if (!(cfg->rate_floor > 0.0 && cfg->rate_floor <= 1e6))
        return -EINVAL;
    return 0;
}

static double phi_sum(double phi, double k);

struct forecast *fc_alloc(const struct forecast_config *cfg, enum fc_kind kind)
{
    struct forecast *f = xcalloc(1, sizeof(*f));
    f->cfg = *cfg;
    f->m = cfg->season_ms / cfg->bucket_ms;
    f->kind = kind;
    fc_buf_scale(f);
    if (kind == FC_HW)
        f->season = xcalloc((size_t)f->m, sizeof(float));
    f->seasons_len = fc_seasons_len(f->m);
    if (f->seasons_len) {
        f->seasons = xcalloc((size_t)f->seasons_len, sizeof(*f->seasons));
        f->seasons_lvl = xcalloc(1, sizeof(*f->seasons_lvl));
        f->seasons_lvl->b = FC_NONE;
    }
    f->origin_first = FC_NONE;
    f->q_bucket = FC_NONE;
    for (int i = 0; i < FC_RING; i++)
        f->peak[i] = NAN;
    for (int p = 0; p < FC_PHASES; p++)
        f->binmax[p] = -INFINITY;
    for (int i = 0; i < FC_RING; i++) {
        f->seenmax[i] = f->zmean[i] = NAN;
        for (int h = 0; h < FC_HORIZONS; h++)
            f->learn_x[i][h][0] = f->planned_l[i][h] = NAN;
    }
    for (int h = 0; h < FC_HORIZONS; h++) {
        f->qlevel[h] = (float)cfg->quantile;
        f->nb_bin[h] = -1;
    }
    f->learn_want = xcalloc(FC_HORIZONS, 1);
    for (int k = 0; k < FC_PHI_TABLE; k++)
        f->phis[k] = phi_sum(cfg->phi, (double)k);
    return f;
}

void fc_buf_scale(struct forecast *f)
{
    double zlo = log(f->cfg.rate_floor);
    double zhi = log(FORECAST_MAX_RATE + f->cfg.rate_floor);
    double lo = zlo - FC_BUF_MARGIN;
    double hi = zhi + FC_BUF_MARGIN;
    f->zbase = lo;
    f->zstep = (hi - lo) / 65535.0;
    /* the buffer's span lies within the level's: FC_BUF_MARGIN < FC_Z_MARGIN */
    f->llo = zlo - FC_Z_MARGIN;
    f->lhi = zhi + FC_Z_MARGIN;
}

uint16_t fc_buf_step(const struct forecast *f, double z)
{
    double k = (z - f->zbase) / f->zstep + 0.5;
    return k <= 0 ? 0 : k >= 65535 ? 65535 : (uint16_t)k; /* NaN is never passed */
}

void fc_buf_reserve(struct forecast *f, int64_t n)
{
    if (n <= f->bcap)
        return;
    int64_t cap = f->bcap + f->bcap / 2;
    if (cap < f->bcap + FC_BUF_STEP)
        cap = f->bcap + FC_BUF_STEP;
    if (cap < n)
        cap = n;
    if (cap > 2 * f->m)
        cap = 2 * f->m;
    size_t oldb = fc_bitmap_len(f->bcap), newb = fc_bitmap_len(cap);
    f->buf = xrealloc(f->buf, (size_t)cap * sizeof(*f->buf));
    f->bpk = xrealloc(f->bpk, (size_t)cap * sizeof(*f->bpk));
    f->fill = xrealloc(f->fill, newb);
    memset(f->fill + oldb, 0, newb - oldb);
    f->bcap = cap;
}

struct forecast *forecast_new(const struct forecast_config *cfg)
{
    if (fc_config_check(cfg) != 0)
        return NULL;
    return fc_alloc(cfg, FC_WARMUP);
}

int64_t forecast_history_ms(const struct forecast_config *cfg)
{
    if (fc_config_check(cfg) != 0)
        return 0;
    int64_t m = cfg->season_ms / cfg->bucket_ms;
    int64_t seasons = fc_seasons_len(m) * cfg->bucket_ms; /* 0 without that plan */
    return seasons > 2 * cfg->season_ms ? seasons : 2 * cfg->season_ms;
}

void forecast_free(struct forecast *f)
{
    if (!f)
        return;
    xfree(f->buf);
    xfree(f->bpk);
    xfree(f->fill);
    xfree(f->season);
    xfree(f->seasons);
    xfree(f->seasons_lvl);
    for (int h = 0; h < FC_HORIZONS; h++)
        xfree(f->learn_rows[h]);
    xfree(f->learn_want);
    xfree(f);
}

double forecast_rate_floor(const struct forecast *f)
{
    return f ? f->cfg.rate_floor : NAN;
}

int64_t forecast_last_ms(const struct forecast *f)
{
    return f && f->acc_n > 0 ? f->last_ms : -1;
}

size_t forecast_memory(const struct forecast *f)
{
    if (!f)
        return 0;
    size_t n = sizeof(*f);
    n += (size_t)f->bcap * (sizeof(*f->buf) + sizeof(*f->bpk)) + fc_bitmap_len(f->bcap);
    if (f->season)
        n += (size_t)f->m * sizeof(float);
    n += (size_t)f->seasons_len * sizeof(*f->seasons);
    if (f->seasons_lvl)
        n += sizeof(*f->seasons_lvl);
    for (int h = 0; h < FC_HORIZONS; h++)
        if (f->learn_rows[h])
            n += (size_t)FC_LEARN_ROWS * FC_LEARN_NX * sizeof(int16_t);
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

/* The model's values within their bounds (fc_buf_scale); NaN (never
 * expected) to 0, which lies within each. With the level within [llo, lhi]
 * and observations within the logs of the rates admitted, a trend step is
 * at most lhi - llo and a seasonal step at most twice that, so those two
 * clamps are backstops. */
static double clamp_level(const struct forecast *f, double x)
{
    return isnan(x) ? 0.0 : fc_clamp(x, f->llo, f->lhi);
}

static double clamp_trend(const struct forecast *f, double x)
{
    return isnan(x) ? 0.0 : fc_clamp(x, -fc_trend_max(f), fc_trend_max(f));
}

static float clamp_season(const struct forecast *f, double x)
{
    return (float)(isnan(x) ? 0.0 : fc_clamp(x, -fc_season_max(f), fc_season_max(f)));
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

double fc_log(const struct forecast *f, double rate)
{
    return log((rate > 0 ? rate : 0) + f->cfg.rate_floor);
}

int fc_phase_bin(const struct forecast *f, int64_t b)
{
    int64_t p = b % f->m;
    if (p < 0)
        p += f->m;
    return (int)(p * FC_PHASES / f->m);
}

static size_t phase(const struct forecast *f, int64_t bucket)
{
    return (size_t)(bucket % f->m);
}

static void holt_update(const struct forecast *f, double *l, double *b, double z)
{
    const struct forecast_config *c = &f->cfg;
    double nl = c->alpha * z + (1.0 - c->alpha) * (*l + c->phi * *b);
    double nb = c->beta * (nl - *l) + (1.0 - c->beta) * c->phi * *b;
    *l = clamp_level(f, nl);
    *b = clamp_trend(f, nb);
}

static void hw_update(const struct forecast *f, double *l, double *b, float *s, double z)
{
    const struct forecast_config *c = &f->cfg;
    double base = *l + c->phi * *b;
    double nl = c->alpha * (z - *s) + (1.0 - c->alpha) * base;
    double nb = c->beta * (nl - *l) + (1.0 - c->beta) * c->phi * *b;
    double ns = c->gamma * (z - base) + (1.0 - c->gamma) * *s;
    *l = clamp_level(f, nl);
    *b = clamp_trend(f, nb);
    *s = clamp_season(f, ns);
}

/* One gap bucket: (l, b) -> (l + phi b, phi b). */
static void fill_step(struct forecast *f)
{
    f->level = clamp_level(f, f->level + f->cfg.phi * f->trend);
    f->trend = clamp_trend(f, f->cfg.phi * f->trend);
}

/* phi_sum of a whole number of steps, from the table when it holds it (the
 * same value, computed once) */
static double phi_steps(const struct forecast *f, int64_t k)
{
    return k >= 0 && k < FC_PHI_TABLE ? f->phis[k] : phi_sum(f->cfg.phi, (double)k);
}

double fc_point(const struct forecast *f, int64_t target, int64_t steps)
{
    double z = f->level + f->trend * phi_steps(f, steps);
    if (f->kind == FC_HW)
        z += f->season[phase(f, target)];
    return z;
}

double fc_momentum(const struct forecast *f, int64_t last_closed)
{
    const int k = FC_MOMENTUM_BUCKETS;
    if (f->origin_first == FC_NONE || last_closed - (k - 1) < f->origin_first - 1)
        return 0;
    double sx = 0, sy = 0, sxx = 0, sxy = 0, prev = -INFINITY;
    for (int i = 0; i < k; i++) {
        /* a non-negative slot whatever a restored origin said (learn.c) */
        int64_t t = last_closed - (k - 1) + i;
        float z = f->zmean[((t % FC_RING) + FC_RING) % FC_RING];
        if (isnan(z) || z <= prev)
            return 0; /* a gap, or not a steady rise: no momentum */
        prev = z;
        sx += i;
        sy += z;
        sxx += (double)i * i;
        sxy += i * (double)z;
    }
    double slope = (k * sxy - sx * sy) / (k * sxx - sx * sx);
    double max = log1p(FC_MOMENTUM_MAX_PER_MIN) * (double)f->cfg.bucket_ms / 60000.0;
    return slope < max ? slope : max;
}

double fc_base(const struct forecast *f, int64_t last_closed, int64_t first, int64_t n)
{
    double best = -INFINITY;
    double mom = fc_momentum(f, last_closed);
    for (int64_t t = first; t < first + n; t++) {
        double z = fc_point(f, t, t - last_closed);
        if (z > best)
            best = z;
        if (mom > 0) {
            /* momentum is not extrapolated past the longest calibrated window */
            int64_t k = t - last_closed;
            if (k > FORECAST_MAX_WINDOW)
                k = FORECAST_MAX_WINDOW;
            double zm = f->zlast + mom * phi_steps(f, k);
            if (zm > best)
                best = zm;
        }
    }
    /* level + trend + season can lie past the level's bounds; the plans
     * built on the base (and checkpointed) stay within them */
    return clamp_level(f, best);
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
    double *y = xcalloc((size_t)n, sizeof(double));
    for (int64_t i = 0; i < n; i++)
        y[i] = fc_buf_value(f, i);
    double *acc = xcalloc((size_t)m, sizeof(double));
    uint32_t *cnt = xcalloc((size_t)m, sizeof(uint32_t));
    double *pre = xcalloc((size_t)n + 1, sizeof(double));
    float *s = xcalloc((size_t)m, sizeof(float));

    for (int64_t i = 0; i < n; i++)
        pre[i + 1] = pre[i] + y[i];
    for (int64_t t = h; t < n - h; t++) {
        double ma;
        if (m % 2 == 1)
            ma = (pre[t + h + 1] - pre[t - h]) / (double)m;
        else
            ma = (0.5 * y[t - h] + (pre[t + h] - pre[t - h + 1]) + 0.5 * y[t + h]) / (double)m;
        size_t p = phase(f, first + t);
        acc[p] += y[t] - ma;
        cnt[p]++;
    }
    double mean = 0.0;
    for (int64_t p = 0; p < m; p++) {
        acc[p] /= (double)cnt[p]; /* every phase has one or two central buckets */
        mean += acc[p];
    }
    mean /= (double)m;
    for (int64_t p = 0; p < m; p++)
        s[p] = clamp_season(f, acc[p] - mean);

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
    f->level = clamp_level(f, icpt - slope);
    f->trend = clamp_trend(f, slope);
    /* The warm-up's window residuals belong to the level-only model: replace
     * them by the in-sample residuals of Holt-Winters over the two seasons,
     * so the first plans of the seasonal model are calibrated for it. */
    memset(f->res_len, 0, sizeof(f->res_len));
    memset(f->res_pos, 0, sizeof(f->res_pos));
    for (int64_t i = 0; i < n; i++) {
        float *sp = &s[phase(f, first + i)];
        if (fill_bit(f, i)) {
            fill_step(f);
            continue;
        }
        for (int hz = 0; hz < FC_HORIZONS; hz++) {
            int64_t w = fc_window(hz);
            if (i + w > n)
                break;
            double base = -INFINITY, peak = -INFINITY;
            bool gap = false;
            for (int64_t j = 0; j < w && !gap; j++) {
                gap = fill_bit(f, i + j);
                double pt = f->level + f->trend * phi_sum(c->phi, (double)(j + 1)) +
                            s[phase(f, first + i + j)];
                double pk = y[i + j] + f->bpk[i + j] / FC_RES_SCALE;
                base = pt > base ? pt : base;
                peak = pk > peak ? pk : peak;
            }
            if (gap)
                break;
            int bin = fc_phase_bin(f, first + i);
            fc_res_push(f->res[bin][hz], &f->res_pos[bin][hz], &f->res_len[bin][hz],
                        peak - base);
            f->q_dirty = true;
        }
        hw_update(f, &f->level, &f->trend, sp, y[i]);
    }

    xfree(pre);
    xfree(cnt);
    xfree(acc);
    xfree(y);
    xfree(f->buf);
    xfree(f->bpk);
    xfree(f->fill);
    f->buf = NULL;
    f->bpk = NULL;
    f->fill = NULL;
    f->bcap = 0;
    f->season = s;
    f->kind = FC_HW;
    fc_stores_sort(f); /* the residuals were rewritten */
}

/* Update the model with closed bucket idx: z its mean and zpeak its peak
 * (log), real false for a gap fill (z is then the model's own forecast). */
static void update_model(struct forecast *f, int64_t idx, double z, double zpeak, bool real)
{
    /* a fill's one-step forecast is level + trend + season, which can lie
     * past the level's bounds, so it is clamped to them (z lies within) */
    f->zlast = clamp_level(f, real ? z : fc_point(f, idx, 1));
    if (f->kind == FC_HW) {
        if (real)
            hw_update(f, &f->level, &f->trend, &f->season[phase(f, idx)], z);
        else
            fill_step(f);
        f->seen++;
        return;
    }
    if (f->seen == 0) {
        f->level = clamp_level(f, z);
        f->trend = 0.0;
    } else if (real) {
        holt_update(f, &f->level, &f->trend, z);
    } else {
        fill_step(f);
        z = f->level;
    }
    fc_buf_reserve(f, f->seen + 1);
    f->buf[f->seen] = fc_buf_step(f, z);
    double above = real ? (zpeak - z) * FC_RES_SCALE : 0;
    f->bpk[f->seen] = (uint16_t)(above > 65535 ? 65535 : above > 0 ? above + 0.5 : 0);
    if (!real)
        f->fill[f->seen / 8] |= (uint8_t)(1u << (f->seen % 8));
    f->seen++;
    if (f->seen == 2 * f->m)
        hw_init(f, idx - (2 * f->m - 1));
}

/* Close bucket idx: resolve the plans ending with it, update the model, plan
 * the windows starting at the next bucket. */
static void close_bucket(struct forecast *f, int64_t idx, double mean, double peak, bool real)
{
    f->walked++;
    fc_plan_close(f, idx, real ? fc_log(f, mean) : NAN, real ? fc_log(f, peak) : NAN);
    fc_seasons_close(f, idx, real ? fc_log(f, peak) : NAN);
    update_model(f, idx, real ? fc_log(f, mean) : 0.0, real ? fc_log(f, peak) : 0.0, real);
    fc_plan_open(f, idx);
}

/* The plan rings no longer describe consecutive buckets: forget them. */
static void forget_rings(struct forecast *f)
{
    f->origin_first = FC_NONE;
    for (int i = 0; i < FC_RING; i++)
        f->peak[i] = f->zmean[i] = NAN;
}

/* Holt-Winters: k gap buckets from idx in closed form. */
static void skip_gap(struct forecast *f, int64_t idx, int64_t k)
{
    const struct forecast_config *c = &f->cfg;
    f->level = clamp_level(f, f->level + f->trend * phi_sum(c->phi, (double)k));
    f->trend = clamp_trend(f, f->trend * pow(c->phi, (double)k));
    f->seen += k;
    fc_seasons_skip(f, idx, k);
    forget_rings(f);
}

/* Warm-up with less than a season observed: a gap of n >= 2m buckets from idx.
 * The buffer would be mostly the model's own fills, from which Holt-Winters'
 * decomposition learns little, so the model starts afresh at the bucket
 * after the gap (with a season or more observed, the 2m - seen fills end the
 * warm-up and the rest of the gap is the seasonal model's, walked at most a
 * season one by one: two seasons in all),
 * as a new forecaster's: what a long gap makes the seasonal model forget
 * (the plan rings, the recent seasons' peaks of the gap) is forgotten; the
 * residual, growth and window peak stores, the learned plan's fits, the
 * adaptive levels, the coverage and the phase bins' peaks stay, as they do
 * over the seasonal model's long gaps. */
/* The warm-up buffer's buckets that were observed, not gap fills. */
static int64_t observed_buckets(const struct forecast *f)
{
    int64_t n = 0;
    for (int64_t i = 0; i < f->seen && i < f->bcap; i++)
        n += !fill_bit(f, i);
    return n;
}

static void restart_warmup(struct forecast *f, int64_t idx, int64_t n)
{
    xfree(f->buf);
    xfree(f->bpk);
    xfree(f->fill);
    f->buf = NULL;
    f->bpk = NULL;
    f->fill = NULL;
    f->bcap = 0;
    f->seen = 0;
    f->level = f->trend = f->zlast = 0.0;
    fc_seasons_skip(f, idx, n);
    forget_rings(f);
}

int forecast_observe(struct forecast *f, int64_t now_ms, double rate)
{
    if (!f || now_ms < 0 || !isfinite(rate) || rate < 0.0 || rate > FORECAST_MAX_RATE)
        return -EINVAL;
    int64_t b = now_ms / f->cfg.bucket_ms;
    if (f->acc_n == 0) {
        f->cur = b;
        f->acc_n = 1;
        f->acc_sum = rate;
        f->acc_max = rate;
        f->last_ms = now_ms;
        return 0;
    }
    if (now_ms < f->last_ms) /* more than a bucket back: a clock behind the state's */
        return f->last_ms - now_ms > f->cfg.bucket_ms ? -ETIME : -EINVAL;
    if (b == f->cur) {
        if (f->acc_n == UINT32_MAX)
            return -ERANGE;
        f->acc_n++;
        f->acc_sum += rate;
        if (rate > f->acc_max)
            f->acc_max = rate;
        f->last_ms = now_ms;
        return 0;
    }
    int64_t open = f->cur;
    close_bucket(f, open, f->acc_sum / f->acc_n, f->acc_max, true);
    /* Gap buckets: during warm-up each is buffered (a gap of two seasons or
     * more, before a season was observed, starts it afresh); in Holt-Winters,
     * also once warm-up ended inside
     * the gap, at most a season's worth is walked one by one (the plan rings
     * only need the last FC_RING), the rest in closed form. */
    int64_t idx = open + 1;
    if (f->kind == FC_WARMUP && observed_buckets(f) < f->m && b - idx >= 2 * f->m) {
        restart_warmup(f, idx, b - idx);
        idx = b;
    }
    while (idx < b) {
        if (f->kind == FC_HW && b - idx > f->m) {
            int64_t k = b - idx - f->m;
            skip_gap(f, idx, k);
            idx += k;
        }
        close_bucket(f, idx++, 0, 0, false);
    }
    f->cur = b;
    f->acc_n = 1;
    f->acc_sum = rate;
    f->acc_max = rate;
    f->last_ms = now_ms;
    return 0;
}

/* ---- prediction ------------------------------------------------------ */

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

    /* The model is current through the last closed bucket, f->cur - 1 (the
     * open bucket is f->cur). */
    const int64_t B = f->cfg.bucket_ms;
    int64_t last_closed = f->cur - 1;
    int64_t first = now_ms / B, last = (now_ms + horizon_ms) / B;
    if (first <= last_closed)
        first = last_closed + 1;
    if (last < first)
        last = first;
    int64_t w = last - first + 1;
    if (w > FORECAST_MAX_WINDOW)
        w = FORECAST_MAX_WINDOW;
    int64_t n = last - first + 1;
    if (n > 4 * FORECAST_MAX_WINDOW)
        n = 4 * FORECAST_MAX_WINDOW;
    double zmax = fc_base(f, last_closed, first, n);
    int64_t evidence = 0;
    double qmed = 0;
    /* The base covers every bucket the look-ahead touches; the error bound
     * is the one of a window as long as the look-ahead itself: w buckets
     * span up to w bucket widths, a look-ahead of 3.25 buckets touches 4 or
     * 5, and their quantile is a wider window's (docs/policy.md, section 5).
     * The growth bound stays the one of every bucket touched. */
    double wq = (double)horizon_ms / (double)B;
    if (wq > (double)w)
        wq = (double)w;
    double q = fc_plan_quantile(f, wq, &evidence, &qmed);
    /* trusted once the window of every bucket touched has its evidence */
    evidence = f->q_n[fc_horizon_index(w)];
    double floor = f->cfg.rate_floor;
    double gmed, g = fc_plan_growth(f, (double)w, &gmed);
    double zplan = fc_plan_value(f, zmax, q, g);
    double zmean = fc_point(f, last, last - last_closed);
    double zcap = fc_plan_value(f, zmean, 0, g); /* the same bound on the point forecast */
    double mean = exp(zcap) - floor;
    double upper = exp(zplan) - floor;
    /* The likely peak is a median: past the highest peak seen by no more
     * than the median growth past windows showed. */
    double likely = exp(fc_plan_value(f, zmax, qmed < q ? qmed : q, gmed)) - floor;
    out->from_recent = fc_plan_recent(f, fc_horizon_index(w));
    if (out->from_recent) {
        double zrm, zr = fc_plan_value(f, fc_plan_recent_quantile(f, wq, &zrm), 0, g);
        upper = exp(zr) - floor;
        likely = exp(fc_plan_value(f, zrm < zr ? zrm : zr, 0, gmed)) - floor;
    }
    /* The learned plan, once both window lengths around the look-ahead have
     * a fit, is the upper one (learn.c). */
    double upper_model = upper, lm;
    out->learned = fc_learn_margin(f, wq, last_closed, zmax, horizon_ms > 0, &lm);
    if (out->learned)
        upper = exp(fc_plan_value(f, zmax + lm, 0, g)) - floor;
    /* The recent seasons' plan is a floor under both plans (seasons.c). */
    double seasons = fc_seasons_plan(f, last_closed, first, first + n - 1);
    out->seasons = isnan(seasons) ? 0 : seasons;
    if (!isnan(seasons)) {
        out->from_seasons = seasons > likely;
        if (seasons > likely)
            likely = seasons;
        if (seasons > upper)
            upper = seasons;
        if (seasons > upper_model)
            upper_model = seasons;
    }
    /* a state at its bounds (a trend of FC_STATE_MAX) can put the point
     * forecast past any rate: cap it as the plan is */
    out->mean = mean > 0 ? (mean < FORECAST_MAX_RATE ? mean : FORECAST_MAX_RATE) : 0;
    out->upper = upper > out->mean ? upper : out->mean;
    if (out->upper > FORECAST_MAX_RATE)
        out->upper = FORECAST_MAX_RATE;
    /* The likely peak is bounded by the model's (or the recent peaks')
     * upper plan, not by the learned one: it drives scale-out on ramps,
     * where a linear fit's misses gather. */
    out->upper_model = upper_model > out->mean ? upper_model : out->mean;
    if (out->upper_model > FORECAST_MAX_RATE)
        out->upper_model = FORECAST_MAX_RATE;
    double lcap = out->upper_model > out->upper ? out->upper_model : out->upper;
    out->likely = likely < 0 ? 0 : likely > lcap ? lcap : likely;
    double seen_max = -INFINITY;
    for (int p = 0; p < FC_PHASES; p++)
        if (f->binmax[p] > seen_max)
            seen_max = f->binmax[p];
    out->observed_max = isfinite(seen_max) ? exp(seen_max) - floor : 0;
    if (out->observed_max < 0)
        out->observed_max = 0;
    out->method = f->kind == FC_HW ? FORECAST_HOLT_WINTERS : FORECAST_HOLT;
    out->seasonal = f->kind == FC_HW;
    out->evidence = evidence;
    out->trusted = evidence >= FORECAST_MIN_EVIDENCE;
    int h = fc_horizon_index(w);
    out->coverage_n = f->cov_n[h];
    out->coverage = f->cov_n[h] ? (double)f->cov_hit[h] / f->cov_n[h] : NAN;
    out->margin = f->cov_n[h] ? exp(f->cov_excess[h] / f->cov_n[h]) - 1 : NAN;
    return 0;
}

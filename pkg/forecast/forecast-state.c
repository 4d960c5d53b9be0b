/* SPDX-License-Identifier: Apache-2.0 */
/* forecast state codec: the compact, versioned, little-endian byte string a
 * forecaster is checkpointed as (it is stored in a Kubernetes ConfigMap, so
 * deserialisation treats it as outside input).
 *
 * Layout, version 8 (integers little-endian; doubles and floats as their
 * IEEE-754 bit patterns, little-endian; NaN only as the quiet NaN 0x7fc00000):
 *
 *   off size  field
 *     0    4  magic "GSFC"
 *     4    2  version (8)
 *     6    1  kind: 0 warm-up (Holt), 1 Holt-Winters
 *     7    1  reserved, 0
 *     8    8  bucket_ms (i64)          must equal the config's
 *    16    8  season_ms (i64)          must equal the config's
 *    24    8  buckets seen (i64)       closed buckets, observed or filled
 *    32    8  open bucket index (i64)
 *    40    8  time of the newest observation, ms (i64)
 *    48    4  observations in the open bucket (u32; 0 = empty forecaster)
 *    52    4  the quantile the plans are calibrated for (f32, in (0.5, 1])
 *    56    8  sum of the open bucket's observations (f64)
 *    64    8  largest of them (f64)
 *    72    8  level (f64, log space)
 *    80    8  trend (f64)
 *    88    8  rate floor (f64)         must equal the config's
 *    96    8  first planned bucket (i64; INT64_MIN = none yet)
 *   104    8  the last closed bucket's mean (f64, log space)
 *   112       kind 0: seen x u16 buffered bucket values (log, in steps of
 *                     fc_buf_value: 65,535 steps from ln(floor) - 4 to
 *                     ln(1e12 + floor) + 4), seen x u16 their
 *                     peaks above them (log x 2000), then a bitmap
 *                     of ceil(seen / 8) bytes (bit i of byte i/8, LSB first,
 *                     set when bucket i was a gap fill; unused bits 0)
 *             kind 1: m x f32 seasonal indices, phase 0 first
 *             16 x f32 bucket peaks, 16 x f32 bucket means, 16 x f32 highest
 *             peak seen at each slot's start, 16 x 5 f32 window forecasts, 16 x 5 f32
 *             plans (ring slots 0..15; NaN = none), 24 x f32 phase-bin peaks
 *             (-inf = none), 5 x (f32 adaptive quantile level, u32 resolved,
 *             u32 covered, f64 sum of plan minus realised peak),
 *             16 x 5 f32 the model's plans, 16 x 5 f32 the recent peaks'
 *             plans (NaN = none), 5 x (f32 model loss, f32 recent loss, f32
 *             recent miss rate, u16 plans scored; all 0 before the first),
 *             5 x (u16 rows the learned plan's fit used, 0 = none, else
 *             FC_LEARN_MIN..FC_LEARN_ROWS; 5 x f32 its coefficients, all +0
 *             without a fit), 24 x 5 f32 the learned plan's shifts (phase
 *             bin, then window length; within +-FC_LEARN_SHIFT_MAX),
 *             16 x 5 f32 the learned plans made (NaN = none), then for
 *             each of 24 phase bins and 5 window lengths: u8 count and
 *             count x i16 residuals, oldest first; then for each of the 5
 *             window lengths the growth store, in the same form; then for
 *             each of the 5 window lengths u8 count and count x f32 realised
 *             window peaks (log), oldest first; then the recent seasons'
 *             ring (fc_seasons_len(m) x u16, oldest first)
 *   end-8  4  stale phase bins (u32; bit b set: bin b's peak is its last
 *             visit's, this visit having had gaps only; only on a bin with
 *             a peak)
 *   end-4  4  CRC-32 (IEEE 802.3, as zlib's crc32) of all preceding bytes
 *
 * Values are checked against what the forecaster produces (fc_buf_scale, from
 * the rate floor): observed logs (bucket peaks and means, the phase bins'
 * peaks, window peaks) within [ln(floor), ln(1e12 + floor)] (and 1e-4 for
 * rounding), the level, the last bucket's value, the bases and highest peaks
 * seen of the plan ring within FC_Z_MARGIN (20) beyond, the plans within
 * that and ln(10) above it, the trend within +-(the level's span), the
 * seasonal indices within twice that; the first planned bucket is at least
 * the third (FC_MIN_BUCKETS). A state of another quantile than the config's
 * is read with what depends on the quantile (the adaptive levels, the
 * plans' losses, coverage and plans in flight, the learned plan's fits and
 * shifts) started afresh at the config's.
 *
 * Version 7 (the previous release's) has no stale phase bins: it is read
 * with none (a bin whose visit began with gaps then takes the last visit's
 * peak into this one's, as that release did). Version 6 (the one before)
 * has 0 where the quantile is: it is read as one of the config's quantile.
 * Version 5 (the one before) has no recent seasons' ring: it is read with
 * an empty one (that plan serves again after 4 seasons).
 * Version 4 (the one before) has no learned plan: it is read with
 * none (the two plans serve until it is fitted, about 3.3 hours). Version 3
 * (the one before) has neither the two kinds' plans and losses nor the
 * window peaks either: it is read with those empty (the model plans until
 * the recent peaks have their evidence again, about 30 buckets). Version 2
 * also has kind 0's buffered values as f32 logs within +-1e4: each is taken
 * to the nearest step. All are written back as version 8. Version 1 states
 * (relative residuals of an older release) are refused with a message; the
 * controller then starts the forecaster afresh. The smoothing factors are
 * not stored: they come from the config passed to forecast_deserialize(),
 * so they may be retuned across a restart, as may the quantile (above).
 * Every accepted version 8 input of the config's quantile is canonical:
 * serialising the result gives back the same bytes (the fuzz target checks
 * this). The learned plan's rows are not stored (1,440 a window length would
 * quadruple a state); its fits are, and are refitted once as many new rows
 * are kept (learn.c). */
#include "forecast-int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

#define STATE_MAGIC "GSFC"
#define STATE_VERSION 8
/* the previous release's: no stale phase bins */
#define STATE_VERSION_NO_STALE 7
/* the one before: no quantile */
#define STATE_VERSION_NO_QUANTILE 6
/* the one before: no recent seasons' ring */
#define STATE_VERSION_NO_SEASONS 5
/* the one before: no learned plan */
#define STATE_VERSION_NO_LEARNED 4
/* the one before: no recent window peaks or quantile losses either */
#define STATE_VERSION_NO_RECENT 3
/* the one before: f32 buffered values as well */
#define STATE_VERSION_F32 2
#define HEADER_LEN 112
#define STALE_LEN 4
#define CRC_LEN 4
#define QNAN_BITS 0x7fc00000u

static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* ---- writing ----------------------------------------------------------- */

static uint8_t *put_u(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static uint8_t *put_f64(uint8_t *p, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof(v));
    return put_u(p, v, 8);
}

static uint8_t *put_f32(uint8_t *p, float d)
{
    uint32_t v;
    if (isnan(d))
        v = QNAN_BITS;
    else
        memcpy(&v, &d, sizeof(v));
    return put_u(p, v, 4);
}

static size_t model_len(enum fc_kind kind, int64_t seen, int64_t m, unsigned version)
{
    if (kind == FC_WARMUP)
        return (size_t)seen * (version == STATE_VERSION_F32 ? 6 : 4) + fc_bitmap_len(seen);
    return (size_t)m * 4;
}

/* The plan rings, bins and coverage counters: fixed size; version 4 adds the
 * two kinds' plans and their losses, version 5 the learned plan's fits and
 * shifts. */
#define PLAN_FIXED_V3                                                                        \
    ((size_t)FC_RING * 12 + (size_t)FC_RING * FC_HORIZONS * 8 + (size_t)FC_PHASES * 4 +      \
     (size_t)FC_HORIZONS * 20)
#define LEARN_FIXED                                                                          \
    ((size_t)FC_HORIZONS * (2 + FC_LEARN_NX * 4) + (size_t)FC_PHASES * FC_HORIZONS * 4 +      \
     (size_t)FC_RING * FC_HORIZONS * 4)
#define PLAN_FIXED_LEN(version)                                                              \
    (PLAN_FIXED_V3 +                                                                         \
     ((version) >= STATE_VERSION_NO_LEARNED                                                  \
          ? (size_t)FC_RING * FC_HORIZONS * 8 + FC_HORIZONS * 14                             \
          : 0) +                                                                             \
     ((version) >= STATE_VERSION_NO_SEASONS ? LEARN_FIXED : 0))

/* Counted stores after the fixed part: one per (phase bin, window) and one
 * growth store per window. */
#define STORES (FC_PHASES * FC_HORIZONS + FC_HORIZONS)

static size_t res_len_bytes(const struct forecast *f)
{
    size_t n = 0;
    for (int b = 0; b < FC_PHASES; b++)
        for (int h = 0; h < FC_HORIZONS; h++)
            n += 1 + (size_t)f->res_len[b][h] * 2;
    for (int h = 0; h < FC_HORIZONS; h++)
        n += 1 + (size_t)f->growth_len[h] * 2 + 1 + (size_t)f->wpeak_len[h] * 4;
    return n;
}

static uint8_t *put_store(uint8_t *p, const int16_t *ring, uint8_t n, uint8_t pos)
{
    p = put_u(p, n, 1);
    int oldest = (pos + FC_RES_PER_BIN - n) % FC_RES_PER_BIN;
    for (int i = 0; i < n; i++)
        p = put_u(p, (uint16_t)ring[(oldest + i) % FC_RES_PER_BIN], 2);
    return p;
}

void forecast_serialize(const struct forecast *f, uint8_t **out, size_t *outlen)
{
    size_t len = HEADER_LEN + model_len(f->kind, f->seen, f->m, STATE_VERSION) +
                 PLAN_FIXED_LEN(STATE_VERSION) + res_len_bytes(f) +
                 (size_t)f->seasons_len * 2 + STALE_LEN + CRC_LEN;
    uint8_t *buf = xmalloc(len), *p = buf;

    memcpy(p, STATE_MAGIC, 4);
    p += 4;
    p = put_u(p, STATE_VERSION, 2);
    p = put_u(p, (uint64_t)f->kind, 1);
    p = put_u(p, 0, 1);
    p = put_u(p, (uint64_t)f->cfg.bucket_ms, 8);
    p = put_u(p, (uint64_t)f->cfg.season_ms, 8);
    p = put_u(p, (uint64_t)f->seen, 8);
    p = put_u(p, (uint64_t)f->cur, 8);
    p = put_u(p, (uint64_t)f->last_ms, 8);
    p = put_u(p, f->acc_n, 4);
    p = put_f32(p, (float)f->cfg.quantile);
    p = put_f64(p, f->acc_sum);
    p = put_f64(p, f->acc_max);
    p = put_f64(p, f->level);
    p = put_f64(p, f->trend);
    p = put_f64(p, f->cfg.rate_floor);
    p = put_u(p, (uint64_t)f->origin_first, 8);
    p = put_f64(p, f->zlast);
    if (f->kind == FC_WARMUP) {
        for (int64_t i = 0; i < f->seen; i++)
            p = put_u(p, f->buf[i], 2);
        for (int64_t i = 0; i < f->seen; i++)
            p = put_u(p, f->bpk[i], 2);
        size_t nb = fc_bitmap_len(f->seen);
        if (nb)
            memcpy(p, f->fill, nb);
        if (f->seen % 8)
            p[nb - 1] &= (uint8_t)((1u << (f->seen % 8)) - 1);
        p += nb;
    } else {
        for (int64_t i = 0; i < f->m; i++)
            p = put_f32(p, f->season[i]);
    }
    for (int i = 0; i < FC_RING; i++)
        p = put_f32(p, f->peak[i]);
    for (int i = 0; i < FC_RING; i++)
        p = put_f32(p, f->zmean[i]);
    for (int i = 0; i < FC_RING; i++)
        p = put_f32(p, f->seenmax[i]);
    for (int i = 0; i < FC_RING; i++)
        for (int h = 0; h < FC_HORIZONS; h++)
            p = put_f32(p, f->point[i][h]);
    for (int i = 0; i < FC_RING; i++)
        for (int h = 0; h < FC_HORIZONS; h++)
            p = put_f32(p, f->planned[i][h]);
    for (int b = 0; b < FC_PHASES; b++)
        p = put_f32(p, f->binmax[b]);
    for (int h = 0; h < FC_HORIZONS; h++) {
        p = put_f32(p, f->qlevel[h]);
        p = put_u(p, f->cov_n[h], 4);
        p = put_u(p, f->cov_hit[h], 4);
        p = put_f64(p, f->cov_excess[h]);
    }
    for (int i = 0; i < FC_RING; i++)
        for (int h = 0; h < FC_HORIZONS; h++)
            p = put_f32(p, f->planned_m[i][h]);
    for (int i = 0; i < FC_RING; i++)
        for (int h = 0; h < FC_HORIZONS; h++)
            p = put_f32(p, f->planned_r[i][h]);
    for (int h = 0; h < FC_HORIZONS; h++) {
        p = put_f32(p, f->loss_n[h] ? f->loss[0][h] : 0.0f);
        p = put_f32(p, f->loss_n[h] ? f->loss[1][h] : 0.0f);
        p = put_f32(p, f->loss_n[h] ? f->miss_r[h] : 0.0f);
        p = put_u(p, f->loss_n[h], 2);
    }
    for (int h = 0; h < FC_HORIZONS; h++) {
        p = put_u(p, f->learn_ok[h] ? f->learn_fit_n[h] : 0, 2);
        for (int k = 0; k < FC_LEARN_NX; k++)
            p = put_f32(p, f->learn_ok[h] ? f->learn_beta[h][k] : 0.0f);
    }
    for (int b = 0; b < FC_PHASES; b++)
        for (int h = 0; h < FC_HORIZONS; h++)
            p = put_f32(p, f->learn_shift[b][h]);
    for (int i = 0; i < FC_RING; i++)
        for (int h = 0; h < FC_HORIZONS; h++)
            p = put_f32(p, f->planned_l[i][h]);
    for (int b = 0; b < FC_PHASES; b++)
        for (int h = 0; h < FC_HORIZONS; h++)
            p = put_store(p, f->res[b][h], f->res_len[b][h], f->res_pos[b][h]);
    for (int h = 0; h < FC_HORIZONS; h++)
        p = put_store(p, f->growth[h], f->growth_len[h], f->growth_pos[h]);
    for (int h = 0; h < FC_HORIZONS; h++) {
        uint8_t n = f->wpeak_len[h];
        int oldest = (f->wpeak_pos[h] + FC_WPEAKS - n) % FC_WPEAKS;
        p = put_u(p, n, 1);
        for (int i = 0; i < n; i++)
            p = put_f32(p, f->wpeak[h][(oldest + i) % FC_WPEAKS]);
    }
    for (int64_t t = f->cur - f->seasons_len; t < f->cur; t++)
        p = put_u(p, t < 0 ? 0 : f->seasons[t % f->seasons_len], 2);
    uint32_t stale = 0;
    for (int b = 0; b < FC_PHASES; b++)
        stale |= (uint32_t)f->binstale[b] << b;
    p = put_u(p, stale, STALE_LEN);
    p = put_u(p, crc32_ieee(buf, len - CRC_LEN), 4);
    *out = buf;
    *outlen = len;
}

/* ---- reading ------------------------------------------------------------ */

static uint64_t get_u(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static double get_f64(const uint8_t *p)
{
    uint64_t v = get_u(p, 8);
    double d;
    memcpy(&d, &v, sizeof(d));
    return d;
}

/* A float field: finite within bound, or (when allowed) the canonical NaN or
 * minus infinity. Returns false when the bits are not acceptable. */
static bool get_f32(const uint8_t *p, double bound, bool nan_ok, bool minf_ok, float *out)
{
    uint32_t v = (uint32_t)get_u(p, 4);
    float d;
    memcpy(&d, &v, sizeof(d));
    if (isnan(d)) {
        *out = NAN;
        return nan_ok && v == QNAN_BITS;
    }
    if (isinf(d) && d < 0) {
        *out = d;
        return minf_ok;
    }
    *out = d;
    return isfinite(d) && fabs(d) <= bound;
}

/* A float field within [lo, hi] (compared as floats: a value the forecaster
 * stored is the float of a double within them), or (when allowed) the
 * canonical NaN or minus infinity. */
static bool get_f32_in(const uint8_t *p, double lo, double hi, bool nan_ok, bool minf_ok,
                       float *out)
{
    if (!get_f32(p, INFINITY, nan_ok, minf_ok, out))
        return false;
    return isnan(*out) || (isinf(*out) && *out < 0) || (*out >= (float)lo && *out <= (float)hi);
}

/* Rounding allowed around an observed log (a bucket's mean is a sum over a
 * count, its log a float): 1e-4, a hundredth of a percent of the rate. */
#define OBSERVED_SLACK 1e-4

/* What depends on the quantile, started afresh at cfg's: the adaptive
 * levels, the plans' losses and coverage, the plans in flight (made at the
 * old level), the learned plan's fits (at the old quantile), shifts and
 * features in flight. The model, the residuals, window peaks and growth
 * samples are the quantile's inputs, not its result: they stay. */
static void reset_quantile(struct forecast *f)
{
    for (int h = 0; h < FC_HORIZONS; h++) {
        f->qlevel[h] = (float)f->cfg.quantile;
        f->loss[0][h] = f->loss[1][h] = f->miss_r[h] = 0;
        f->loss_n[h] = 0;
        f->cov_n[h] = f->cov_hit[h] = 0;
        f->cov_excess[h] = 0;
        f->learn_ok[h] = false;
        f->learn_fit_n[h] = 0;
        for (int k = 0; k < FC_LEARN_NX; k++)
            f->learn_beta[h][k] = 0;
        for (int b = 0; b < FC_PHASES; b++)
            f->learn_shift[b][h] = 0;
        for (int i = 0; i < FC_RING; i++) {
            f->planned[i][h] = f->planned_m[i][h] = f->planned_r[i][h] = NAN;
            f->planned_l[i][h] = f->learn_x[i][h][0] = NAN;
        }
    }
}

void fc_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static bool in_bound(double x, double bound)
{
    return isfinite(x) && fabs(x) <= bound;
}

/* Check the header fields; 0 or -EINVAL with err set. */
static int check_header(const struct forecast_config *cfg, const uint8_t *buf, size_t len,
                        char *err, size_t errlen)
{
    if (!buf || len < HEADER_LEN + CRC_LEN) {
        fc_set_err(err, errlen, "truncated: %zu bytes, a state has at least %d", len,
                   HEADER_LEN + CRC_LEN);
        return -EINVAL;
    }
    if (memcmp(buf, STATE_MAGIC, 4) != 0) {
        fc_set_err(err, errlen, "not a forecast state (bad magic)");
        return -EINVAL;
    }
    uint64_t version = get_u(buf + 4, 2);
    if (version != STATE_VERSION && version != STATE_VERSION_NO_STALE &&
        version != STATE_VERSION_NO_QUANTILE &&
        version != STATE_VERSION_NO_SEASONS && version != STATE_VERSION_NO_LEARNED &&
        version != STATE_VERSION_NO_RECENT && version != STATE_VERSION_F32) {
        fc_set_err(err, errlen,
                   "unsupported state version %" PRIu64 " (want %d, %d, %d, %d, %d, %d or %d%s)",
                   version, STATE_VERSION, STATE_VERSION_NO_STALE, STATE_VERSION_NO_QUANTILE,
                   STATE_VERSION_NO_SEASONS,
                   STATE_VERSION_NO_LEARNED, STATE_VERSION_NO_RECENT, STATE_VERSION_F32,
                   version == 1
                       ? "; version 1 is an older release's: the forecaster starts afresh"
                       : "");
        return -EINVAL;
    }
    if (buf[6] > FC_HW || buf[7] != 0 ||
        (version < STATE_VERSION_NO_STALE && get_u(buf + 52, 4) != 0)) {
        fc_set_err(err, errlen, "bad kind %u or reserved bytes set", buf[6]);
        return -EINVAL;
    }
    float q;
    if (version >= STATE_VERSION_NO_STALE &&
        (!get_f32(buf + 52, 1.0, false, false, &q) || !(q > 0.5f))) {
        fc_set_err(err, errlen, "quantile %g out of range (0.5, 1]", (double)q);
        return -EINVAL;
    }
    int64_t bucket_ms = (int64_t)get_u(buf + 8, 8), season_ms = (int64_t)get_u(buf + 16, 8);
    double floor_ = get_f64(buf + 88);
    if (bucket_ms != cfg->bucket_ms || season_ms != cfg->season_ms ||
        floor_ != cfg->rate_floor) {
        fc_set_err(err, errlen,
                   "state is for bucket %" PRId64 " ms, season %" PRId64 " ms, floor %g; "
                   "config has bucket %" PRId64 " ms, season %" PRId64 " ms, floor %g",
                   bucket_ms, season_ms, floor_, cfg->bucket_ms, cfg->season_ms, cfg->rate_floor);
        return -EINVAL;
    }
    return 0;
}

/* The learned plan's fits and shifts (version 5); 0 or -EINVAL with err
 * set. A fit has FC_LEARN_MIN..FC_LEARN_ROWS rows; without one (0 rows) its
 * coefficients are +0, so every accepted state is canonical. */
static int read_learned(struct forecast *f, const uint8_t **pp, char *err, size_t errlen)
{
    const uint8_t *p = *pp;
    for (int h = 0; h < FC_HORIZONS; h++) {
        uint16_t n = (uint16_t)get_u(p, 2);
        p += 2;
        bool ok = n == 0 || (n >= FC_LEARN_MIN && n <= FC_LEARN_ROWS);
        for (int k = 0; k < FC_LEARN_NX; k++, p += 4) {
            float v;
            ok &= get_f32(p, FC_STATE_MAX, false, false, &v) &&
                  (n > 0 || (v == 0 && !signbit(v)));
            f->learn_beta[h][k] = n > 0 ? v : 0.0f;
        }
        if (!ok) {
            fc_set_err(err, errlen, "learned plan fit out of range");
            return -EINVAL;
        }
        f->learn_ok[h] = n > 0;
        f->learn_fit_n[h] = n;
    }
    for (int b = 0; b < FC_PHASES; b++)
        for (int h = 0; h < FC_HORIZONS; h++, p += 4)
            if (!get_f32(p, FC_LEARN_SHIFT_MAX, false, false, &f->learn_shift[b][h])) {
                fc_set_err(err, errlen, "learned plan shift out of range");
                return -EINVAL;
            }
    double plan_hi = f->lhi + log(FC_MAX_GROWTH); /* a plan's cap (fc_plan_value) */
    for (int i = 0; i < FC_RING; i++)
        for (int h = 0; h < FC_HORIZONS; h++, p += 4)
            if (!get_f32_in(p, f->llo, plan_hi, true, false, &f->planned_l[i][h])) {
                fc_set_err(err, errlen, "learned plan ring value out of range");
                return -EINVAL;
            }
    *pp = p;
    return 0;
}

/* The longest state a config admits, of any version read: the bound on what
 * a packed state may inflate to (pack.c). Each counted store (the residual
 * and growth stores, then the window peaks) holds at most 255 values. */
size_t fc_state_max_len(const struct forecast_config *cfg)
{
    int64_t m = cfg->season_ms / cfg->bucket_ms;
    size_t warm = model_len(FC_WARMUP, 2 * m - 1, m, STATE_VERSION_F32);
    size_t hw = model_len(FC_HW, 2 * m, m, STATE_VERSION);
    return HEADER_LEN + (warm > hw ? warm : hw) + PLAN_FIXED_LEN(STATE_VERSION) +
           (size_t)STORES * (1 + 255 * 2) + (size_t)FC_HORIZONS * (1 + 255 * 4) +
           (size_t)fc_seasons_len(m) * 2 + STALE_LEN + CRC_LEN;
}

static struct forecast *deserialize_plain(const struct forecast_config *cfg, const uint8_t *buf,
                                          size_t len, bool own_floor, char *err, size_t errlen);

static struct forecast *deserialize(const struct forecast_config *cfg, const uint8_t *buf,
                                    size_t len, bool own_floor, char *err, size_t errlen)
{
    if (!fc_is_packed(buf, len))
        return deserialize_plain(cfg, buf, len, own_floor, err, errlen);
    if (fc_config_check(cfg) != 0) {
        fc_set_err(err, errlen, "invalid forecast config");
        return NULL;
    }
    uint8_t *raw = NULL;
    size_t rawlen = 0;
    if (fc_unpack(buf, len, fc_state_max_len(cfg), &raw, &rawlen, err, errlen) != 0)
        return NULL;
    struct forecast *f = NULL;
    if (fc_is_packed(raw, rawlen))
        fc_set_err(err, errlen, "a packed state inside a packed state");
    else
        f = deserialize_plain(cfg, raw, rawlen, own_floor, err, errlen);
    xfree(raw);
    return f;
}

struct forecast *forecast_deserialize(const struct forecast_config *cfg, const uint8_t *buf,
                                      size_t len, char *err, size_t errlen)
{
    return deserialize(cfg, buf, len, false, err, errlen);
}

struct forecast *forecast_deserialize_own_floor(const struct forecast_config *cfg,
                                                const uint8_t *buf, size_t len, char *err,
                                                size_t errlen)
{
    return deserialize(cfg, buf, len, true, err, errlen);
}

static struct forecast *deserialize_plain(const struct forecast_config *cfg, const uint8_t *buf,
                                          size_t len, bool own_floor, char *err, size_t errlen)
{
    struct forecast *f = NULL;
    struct forecast_config own;
    fc_set_err(err, errlen, "ok");
    if (fc_config_check(cfg) != 0) {
        fc_set_err(err, errlen, "invalid forecast config");
        goto fail;
    }
    if (own_floor && buf && len >= HEADER_LEN) {
        /* the state's floor: the header checked with it (its own reasons
         * first), then the floor as one a config may have */
        own = *cfg;
        own.rate_floor = get_f64(buf + 88);
        if (check_header(&own, buf, len, err, errlen) != 0)
            goto fail;
        if (fc_config_check(&own) != 0) {
            fc_set_err(err, errlen, "rate floor %g out of range", own.rate_floor);
            goto fail;
        }
        cfg = &own;
    } else if (check_header(cfg, buf, len, err, errlen) != 0) {
        goto fail;
    }

    enum fc_kind kind = (enum fc_kind)buf[6];
    unsigned version = (unsigned)get_u(buf + 4, 2);
    int64_t seen = (int64_t)get_u(buf + 24, 8), cur = (int64_t)get_u(buf + 32, 8);
    int64_t last_ms = (int64_t)get_u(buf + 40, 8);
    uint32_t acc_n = (uint32_t)get_u(buf + 48, 4);
    double acc_sum = get_f64(buf + 56), acc_max = get_f64(buf + 64);
    double level = get_f64(buf + 72), trend = get_f64(buf + 80);
    int64_t origin_first = (int64_t)get_u(buf + 96, 8);
    double zlast = get_f64(buf + 104);
    int64_t m = cfg->season_ms / cfg->bucket_ms;
    if (seen < 0 || cur < 0 || last_ms < 0 || seen > cur) {
        fc_set_err(err, errlen, "counters out of range");
        goto fail;
    }
    if (kind == FC_WARMUP ? seen >= 2 * m : seen < 2 * m) {
        fc_set_err(err, errlen, "%" PRId64 " buckets seen does not match kind %d", seen, kind);
        goto fail;
    }
    /* plans start once FC_MIN_BUCKETS buckets have closed (plan.c): a first
     * planned bucket before the third would have the momentum read bucket
     * -1's slot */
    if (origin_first != FC_NONE && (origin_first < FC_MIN_BUCKETS || origin_first > cur)) {
        fc_set_err(err, errlen, "first planned bucket out of range");
        goto fail;
    }
    /* The length the counts describe, walked before anything is trusted. */
    size_t want = HEADER_LEN + model_len(kind, seen, m, version) + PLAN_FIXED_LEN(version);
    int stores = STORES + (version >= STATE_VERSION_NO_LEARNED ? FC_HORIZONS : 0);
    for (int i = 0; i < stores; i++) {
        if (want >= len - CRC_LEN) {
            want = SIZE_MAX;
            break;
        }
        want += 1 + (size_t)buf[want] * (i < STORES ? 2 : 4);
    }
    if (want != SIZE_MAX)
        want += (version >= STATE_VERSION_NO_QUANTILE ? (size_t)fc_seasons_len(m) * 2 : 0) +
                (version >= STATE_VERSION ? STALE_LEN : 0) + CRC_LEN;
    if (len != want) {
        fc_set_err(err, errlen,
                   "length %zu, the header and counts describe %s (truncated or padded)", len,
                   want == SIZE_MAX ? "more" : "another");
        goto fail;
    }
    if (get_u(buf + len - CRC_LEN, 4) != crc32_ieee(buf, len - CRC_LEN)) {
        fc_set_err(err, errlen, "checksum mismatch (corrupted state)");
        goto fail;
    }
    if (acc_n == 0) {
        if (seen != 0 || cur != 0 || last_ms != 0 || acc_sum != 0.0 || acc_max != 0.0 ||
            level != 0.0 || trend != 0.0 || zlast != 0.0 || origin_first != FC_NONE) {
            fc_set_err(err, errlen, "empty state with non-zero fields");
            goto fail;
        }
    } else {
        if (last_ms / cfg->bucket_ms != cur) {
            fc_set_err(err, errlen, "newest observation is not in the open bucket");
            goto fail;
        }
        if (!isfinite(acc_sum) || acc_sum < 0.0 || acc_sum > (double)acc_n * FORECAST_MAX_RATE ||
            !isfinite(acc_max) || acc_max < 0.0 || acc_max > FORECAST_MAX_RATE ||
            acc_max * acc_n < acc_sum * (1 - 1e-12)) {
            fc_set_err(err, errlen, "open bucket sum or peak out of range");
            goto fail;
        }
    }

    f = fc_alloc(cfg, kind); /* its bounds (fc_buf_scale) check the values from here on */
    if (!(level >= f->llo && level <= f->lhi) || !in_bound(trend, fc_trend_max(f)) ||
        (seen > 0 && !(zlast >= f->llo && zlast <= f->lhi)) || (seen == 0 && zlast != 0.0) ||
        (kind == FC_WARMUP && seen == 0 && (level != 0.0 || trend != 0.0))) {
        fc_set_err(err, errlen,
                   "level %g, trend %g or last bucket %g out of range (level within [%g, %g])",
                   level, trend, zlast, f->llo, f->lhi);
        goto fail;
    }

    f->seen = seen;
    f->cur = cur;
    f->last_ms = last_ms;
    f->acc_n = acc_n;
    f->acc_sum = acc_sum;
    f->acc_max = acc_max;
    f->level = level;
    f->trend = trend;
    f->origin_first = origin_first;
    f->zlast = zlast;
    const uint8_t *p = buf + HEADER_LEN;
    if (kind == FC_WARMUP) {
        fc_buf_reserve(f, seen);
        size_t vsize = version == STATE_VERSION_F32 ? 4 : 2;
        const uint8_t *bits = p + seen * (int64_t)(vsize + 2);
        size_t nb = fc_bitmap_len(seen);
        if (nb)
            memcpy(f->fill, bits, nb);
        if (seen % 8 && (bits[nb - 1] >> (seen % 8)) != 0) {
            fc_set_err(err, errlen, "unused fill bits set");
            goto fail;
        }
        if (seen > 0 && (bits[0] & 1)) {
            fc_set_err(err, errlen, "first buffered bucket marked as a fill");
            goto fail;
        }
        for (int64_t i = 0; i < seen; i++, p += vsize) {
            float z;
            if (vsize == 2) {
                f->buf[i] = (uint16_t)get_u(p, 2);
            } else if (get_f32(p, FC_STATE_MAX, false, false, &z)) {
                f->buf[i] = fc_buf_step(f, z);
            } else {
                fc_set_err(err, errlen, "buffered bucket %" PRId64 " out of range", i);
                goto fail;
            }
        }
        for (int64_t i = 0; i < seen; i++, p += 2) {
            f->bpk[i] = (uint16_t)get_u(p, 2);
            if (f->bpk[i] != 0 && ((bits[i / 8] >> (i % 8)) & 1)) {
                fc_set_err(err, errlen, "gap bucket %" PRId64 " with a peak", i);
                goto fail;
            }
        }
        p += nb;
    } else {
        for (int64_t i = 0; i < m; i++, p += 4) {
            if (!get_f32(p, fc_season_max(f), false, false, &f->season[i])) {
                fc_set_err(err, errlen, "seasonal index %" PRId64 " out of range", i);
                goto fail;
            }
        }
    }
    bool ok = true;
    /* observed logs; the model's (a base, a highest peak seen: the level's
     * bounds); plans (at most their cap, ln(10) above the highest peak) */
    const double olo = fc_obs_lo(f) - OBSERVED_SLACK, ohi = fc_obs_hi(f) + OBSERVED_SLACK;
    const double plan_hi = f->lhi + log(FC_MAX_GROWTH);
    for (int i = 0; i < FC_RING; i++, p += 4)
        ok &= get_f32_in(p, olo, ohi, true, false, &f->peak[i]);
    for (int i = 0; i < FC_RING; i++, p += 4)
        ok &= get_f32_in(p, olo, ohi, true, false, &f->zmean[i]);
    for (int i = 0; i < FC_RING; i++, p += 4)
        ok &= get_f32_in(p, f->llo, f->lhi, true, false, &f->seenmax[i]);
    for (int i = 0; i < FC_RING; i++)
        for (int h = 0; h < FC_HORIZONS; h++, p += 4)
            ok &= get_f32_in(p, f->llo, f->lhi, true, false, &f->point[i][h]);
    for (int i = 0; i < FC_RING; i++)
        for (int h = 0; h < FC_HORIZONS; h++, p += 4)
            ok &= get_f32_in(p, f->llo, plan_hi, true, false, &f->planned[i][h]);
    if (!ok) {
        fc_set_err(err, errlen, "plan ring value out of range");
        goto fail;
    }
    for (int b = 0; b < FC_PHASES; b++, p += 4)
        ok &= get_f32_in(p, olo, ohi, false, true, &f->binmax[b]);
    if (!ok) {
        fc_set_err(err, errlen, "phase bin peak out of range [%g, %g] (the logs of the rates "
                   "observed)", fc_obs_lo(f), fc_obs_hi(f));
        goto fail;
    }
    for (int h = 0; h < FC_HORIZONS; h++, p += 20) {
        bool lv_ok = get_f32(p, 1.0, false, false, &f->qlevel[h]) &&
                     f->qlevel[h] >= (float)FC_LEVEL_MIN && f->qlevel[h] <= (float)FC_LEVEL_MAX;
        f->cov_n[h] = (uint32_t)get_u(p + 4, 4);
        f->cov_hit[h] = (uint32_t)get_u(p + 8, 4);
        f->cov_excess[h] = get_f64(p + 12);
        if (!lv_ok) {
            fc_set_err(err, errlen, "quantile level out of range");
            goto fail;
        }
        if (f->cov_hit[h] > f->cov_n[h] ||
            !in_bound(f->cov_excess[h], 4 * FC_STATE_MAX * ((double)f->cov_n[h] + 1))) {
            fc_set_err(err, errlen, "coverage counters out of range");
            goto fail;
        }
    }
    if (version >= STATE_VERSION_NO_LEARNED) {
        for (int i = 0; i < FC_RING; i++)
            for (int h = 0; h < FC_HORIZONS; h++, p += 4)
                ok &= get_f32_in(p, f->llo, plan_hi, true, false, &f->planned_m[i][h]);
        for (int i = 0; i < FC_RING; i++)
            for (int h = 0; h < FC_HORIZONS; h++, p += 4)
                ok &= get_f32_in(p, f->llo, plan_hi, true, false, &f->planned_r[i][h]);
        if (!ok) {
            fc_set_err(err, errlen, "plan ring value out of range");
            goto fail;
        }
        for (int h = 0; h < FC_HORIZONS; h++, p += 14) {
            /* a loss is a mean of |realised - planned| <= 3 x FC_STATE_MAX, a
             * miss rate within [0, 1]; all 0 (not -0) before the first */
            bool l_ok = get_f32(p, 3 * FC_STATE_MAX, false, false, &f->loss[0][h]) &&
                        get_f32(p + 4, 3 * FC_STATE_MAX, false, false, &f->loss[1][h]) &&
                        get_f32(p + 8, 1.0, false, false, &f->miss_r[h]);
            f->loss_n[h] = (uint16_t)get_u(p + 12, 2);
            for (int k = 0; k < 3 && l_ok; k++) {
                float v = k < 2 ? f->loss[k][h] : f->miss_r[h];
                l_ok = !signbit(v) && (f->loss_n[h] > 0 || v == 0);
            }
            if (!l_ok) {
                fc_set_err(err, errlen, "quantile loss out of range");
                goto fail;
            }
        }
    } else {
        for (int i = 0; i < FC_RING; i++)
            for (int h = 0; h < FC_HORIZONS; h++)
                f->planned_m[i][h] = f->planned_r[i][h] = NAN;
    }
    if (version >= STATE_VERSION_NO_SEASONS && read_learned(f, &p, err, errlen) != 0)
        goto fail;
    const uint8_t *end = buf + len - CRC_LEN;
    for (int k = 0; k < STORES; k++) {
        bool growth = k >= FC_PHASES * FC_HORIZONS;
        int b = growth ? 0 : k / FC_HORIZONS, h = growth ? k - FC_PHASES * FC_HORIZONS
                                                         : k % FC_HORIZONS;
        int16_t *ring = growth ? f->growth[h] : f->res[b][h];
        uint8_t n = *p++; /* within buf: the length walk above checked it */
        if (n > FC_RES_PER_BIN) {
            fc_set_err(err, errlen, "residual count %u out of range", n);
            goto fail;
        }
        for (int i = 0; i < n; i++, p += 2) {
            int16_t v = (int16_t)get_u(p, 2);
            if (v == INT16_MIN) {
                fc_set_err(err, errlen, "residual out of range");
                goto fail;
            }
            ring[i] = v;
        }
        if (growth) {
            f->growth_len[h] = n;
            f->growth_pos[h] = (uint8_t)(n % FC_RES_PER_BIN);
        } else {
            f->res_len[b][h] = n;
            f->res_pos[b][h] = (uint8_t)(n % FC_RES_PER_BIN);
        }
    }
    for (int h = 0; version >= STATE_VERSION_NO_LEARNED && h < FC_HORIZONS; h++) {
        uint8_t n = *p++;
        if (n > FC_WPEAKS) {
            fc_set_err(err, errlen, "window peak count %u out of range", n);
            goto fail;
        }
        for (int i = 0; i < n; i++, p += 4) {
            if (!get_f32_in(p, olo, ohi, false, false, &f->wpeak[h][i])) {
                fc_set_err(err, errlen, "window peak out of range");
                goto fail;
            }
        }
        f->wpeak_len[h] = n;
        f->wpeak_pos[h] = (uint8_t)(n % FC_WPEAKS);
    }
    for (int64_t t = cur - f->seasons_len; version >= STATE_VERSION_NO_QUANTILE && t < cur;
         t++, p += 2) {
        uint16_t v = (uint16_t)get_u(p, 2);
        if (t < 0 && v != 0) {
            fc_set_err(err, errlen, "recent seasons' peak before bucket 0");
            goto fail;
        }
        if (t >= 0)
            f->seasons[t % f->seasons_len] = v;
    }
    if (version >= STATE_VERSION) {
        uint32_t stale = (uint32_t)get_u(p, STALE_LEN);
        p += STALE_LEN;
        for (int b = 0; b < 32; b++) {
            if (!((stale >> b) & 1))
                continue;
            if (b >= FC_PHASES || !isfinite(f->binmax[b])) {
                fc_set_err(err, errlen, "stale mark on phase bin %d, which has no peak", b);
                goto fail;
            }
            f->binstale[b] = true;
        }
    }
    if (p != end) {
        fc_set_err(err, errlen, "%zu bytes after the residual store (padded)", (size_t)(end - p));
        goto fail;
    }
    float q = (float)cfg->quantile; /* the previous versions': the config's */
    if (version >= STATE_VERSION_NO_STALE)
        (void)get_f32(buf + 52, 1.0, false, false, &q); /* checked with the header */
    if (q != (float)cfg->quantile) {
        reset_quantile(f);
        fc_set_err(err, errlen,
                   "ok; the state was calibrated for quantile %g, the config's is %g: its plans' "
                   "calibration starts afresh", (double)q, cfg->quantile);
    }
    fc_stores_sort(f);
    if (f->acc_n > 0)
        fc_plan_quantiles(f, f->cur);
    return f;

fail:
    forecast_free(f);
    return NULL;
}

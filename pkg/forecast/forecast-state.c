/* SPDX-License-Identifier: Apache-2.0 */
/* forecast state codec: the compact, versioned, little-endian byte string a
 * forecaster is checkpointed as (it is stored in a Kubernetes ConfigMap, so
 * deserialisation treats it as outside input).
 *
 * Layout, version 1 (all integers little-endian, doubles and floats as their
 * IEEE-754 bit patterns in little-endian order):
 *
 *   off size  field
 *     0    4  magic "GSFC"
 *     4    2  version (1)
 *     6    1  kind: 0 warm-up (Holt), 1 Holt-Winters
 *     7    1  reserved, 0
 *     8    8  bucket_ms (i64)          must equal the config's
 *    16    8  season_ms (i64)          must equal the config's
 *    24    8  buckets seen (i64)       closed buckets, observed or filled
 *    32    8  open bucket index (i64)
 *    40    8  time of the newest observation, ms (i64)
 *    48    4  observations in the open bucket (u32; 0 = empty forecaster)
 *    52    4  residuals held, n_res (u32, <= 1024)
 *    56    8  sum of the open bucket's observations (f64)
 *    64    8  level (f64)
 *    72    8  trend (f64)
 *    80       kind 0: seen x f64 buffered bucket values, then a bitmap of
 *                     ceil(seen / 8) bytes (bit i of byte i/8, LSB first, set
 *                     when bucket i was a gap fill; unused bits 0)
 *             kind 1: m x f64 seasonal indices, phase 0 first
 *             n_res x f32 relative residuals, oldest first
 *   end-4  4  CRC-32 (IEEE 802.3, as zlib's crc32) of all preceding bytes
 *
 * The smoothing factors and the quantile are not stored: they come from the
 * config passed to forecast_deserialize(), so they may be retuned across a
 * restart. Every accepted input is canonical: serialising the result gives
 * back the same bytes (the fuzz target checks this). */
#include "forecast-int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

#define STATE_MAGIC "GSFC"
#define STATE_VERSION 1
#define HEADER_LEN 80
#define CRC_LEN 4

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
    memcpy(&v, &d, sizeof(v));
    return put_u(p, v, 4);
}

static size_t payload_len(enum fc_kind kind, int64_t seen, int64_t m)
{
    if (kind == FC_WARMUP)
        return (size_t)seen * 8 + fc_bitmap_len(seen);
    return (size_t)m * 8;
}

void forecast_serialize(const struct forecast *f, uint8_t **out, size_t *outlen)
{
    size_t len = HEADER_LEN + payload_len(f->kind, f->seen, f->m) + (size_t)f->res_len * 4 +
                 CRC_LEN;
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
    p = put_u(p, f->res_len, 4);
    p = put_f64(p, f->acc_sum);
    p = put_f64(p, f->level);
    p = put_f64(p, f->trend);
    if (f->kind == FC_WARMUP) {
        for (int64_t i = 0; i < f->seen; i++)
            p = put_f64(p, f->buf[i]);
        size_t nb = fc_bitmap_len(f->seen);
        memcpy(p, f->fill, nb);
        /* bits past seen are never set in memory, but make sure */
        if (f->seen % 8)
            p[nb - 1] &= (uint8_t)((1u << (f->seen % 8)) - 1);
        p += nb;
    } else {
        for (int64_t i = 0; i < f->m; i++)
            p = put_f64(p, f->season[i]);
    }
    uint32_t oldest = (f->res_pos + FC_RES_WINDOW - f->res_len) % FC_RES_WINDOW;
    for (uint32_t i = 0; i < f->res_len; i++)
        p = put_f32(p, f->res[(oldest + i) % FC_RES_WINDOW]);
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

static float get_f32(const uint8_t *p)
{
    uint32_t v = (uint32_t)get_u(p, 4);
    float d;
    memcpy(&d, &v, sizeof(d));
    return d;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
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

struct forecast *forecast_deserialize(const struct forecast_config *cfg, const uint8_t *buf,
                                      size_t len, char *err, size_t errlen)
{
    struct forecast *f = NULL;
    set_err(err, errlen, "ok");
    if (fc_config_check(cfg) != 0) {
        set_err(err, errlen, "invalid forecast config");
        goto fail;
    }
    if (!buf || len < HEADER_LEN + CRC_LEN) {
        set_err(err, errlen, "truncated: %zu bytes, a state has at least %d", len,
                HEADER_LEN + CRC_LEN);
        goto fail;
    }
    if (memcmp(buf, STATE_MAGIC, 4) != 0) {
        set_err(err, errlen, "not a forecast state (bad magic)");
        goto fail;
    }
    uint64_t version = get_u(buf + 4, 2);
    if (version != STATE_VERSION) {
        set_err(err, errlen, "unsupported state version %" PRIu64 " (want %d)", version,
                STATE_VERSION);
        goto fail;
    }

    uint64_t kind = buf[6];
    int64_t bucket_ms = (int64_t)get_u(buf + 8, 8), season_ms = (int64_t)get_u(buf + 16, 8);
    int64_t seen = (int64_t)get_u(buf + 24, 8), cur = (int64_t)get_u(buf + 32, 8);
    int64_t last_ms = (int64_t)get_u(buf + 40, 8);
    uint32_t acc_n = (uint32_t)get_u(buf + 48, 4), res_len = (uint32_t)get_u(buf + 52, 4);
    double acc_sum = get_f64(buf + 56), level = get_f64(buf + 64), trend = get_f64(buf + 72);

    if (kind > FC_HW || buf[7] != 0) {
        set_err(err, errlen, "bad kind %" PRIu64 " or reserved byte %u", kind, buf[7]);
        goto fail;
    }
    if (bucket_ms != cfg->bucket_ms || season_ms != cfg->season_ms) {
        set_err(err, errlen,
                "state is for bucket %" PRId64 " ms, season %" PRId64 " ms; "
                "config has bucket %" PRId64 " ms, season %" PRId64 " ms",
                bucket_ms, season_ms, cfg->bucket_ms, cfg->season_ms);
        goto fail;
    }
    int64_t m = season_ms / bucket_ms;
    if (seen < 0 || cur < 0 || last_ms < 0 || seen > cur || res_len > FC_RES_WINDOW) {
        set_err(err, errlen, "counters out of range");
        goto fail;
    }
    if (kind == FC_WARMUP ? seen >= 2 * m : seen < 2 * m) {
        set_err(err, errlen, "%" PRId64 " buckets seen does not match kind %" PRIu64, seen, kind);
        goto fail;
    }
    size_t want = HEADER_LEN + payload_len((enum fc_kind)kind, seen, m) + (size_t)res_len * 4 +
                  CRC_LEN;
    if (len != want) {
        set_err(err, errlen, "length %zu, the header describes %zu bytes (truncated or padded)",
                len, want);
        goto fail;
    }
    if (get_u(buf + len - CRC_LEN, 4) != crc32_ieee(buf, len - CRC_LEN)) {
        set_err(err, errlen, "checksum mismatch (corrupted state)");
        goto fail;
    }

    if (acc_n == 0) {
        if (seen != 0 || cur != 0 || last_ms != 0 || acc_sum != 0.0 || level != 0.0 ||
            trend != 0.0 || res_len != 0) {
            set_err(err, errlen, "empty state with non-zero fields");
            goto fail;
        }
    } else {
        if (last_ms / bucket_ms != cur) {
            set_err(err, errlen, "newest observation is not in the open bucket");
            goto fail;
        }
        if (!isfinite(acc_sum) || acc_sum < 0.0 || acc_sum > (double)acc_n * FORECAST_MAX_RATE) {
            set_err(err, errlen, "open bucket sum out of range");
            goto fail;
        }
    }
    if (!in_bound(level, FC_STATE_MAX) || !in_bound(trend, FC_STATE_MAX) ||
        (kind == FC_WARMUP && seen == 0 && (level != 0.0 || trend != 0.0))) {
        set_err(err, errlen, "level or trend out of range");
        goto fail;
    }

    f = fc_alloc(cfg, (enum fc_kind)kind);
    f->seen = seen;
    f->cur = cur;
    f->last_ms = last_ms;
    f->acc_n = acc_n;
    f->acc_sum = acc_sum;
    f->level = level;
    f->trend = trend;
    const uint8_t *p = buf + HEADER_LEN;
    if (kind == FC_WARMUP) {
        const uint8_t *bits = p + seen * 8;
        size_t nb = fc_bitmap_len(seen);
        memcpy(f->fill, bits, nb);
        if (seen % 8 && (bits[nb - 1] >> (seen % 8)) != 0) {
            set_err(err, errlen, "unused fill bits set");
            goto fail;
        }
        if (seen > 0 && (bits[0] & 1)) {
            set_err(err, errlen, "first buffered bucket marked as a fill");
            goto fail;
        }
        for (int64_t i = 0; i < seen; i++, p += 8) {
            double v = get_f64(p);
            bool filled = (bits[i / 8] >> (i % 8)) & 1;
            if (!in_bound(v, FC_STATE_MAX) || (!filled && (v < 0.0 || v > FORECAST_MAX_RATE))) {
                set_err(err, errlen, "buffered bucket %" PRId64 " out of range", i);
                goto fail;
            }
            f->buf[i] = v;
        }
        p += nb;
    } else {
        for (int64_t i = 0; i < m; i++, p += 8) {
            f->season[i] = get_f64(p);
            if (!in_bound(f->season[i], FC_STATE_MAX)) {
                set_err(err, errlen, "seasonal index %" PRId64 " out of range", i);
                goto fail;
            }
        }
    }
    for (uint32_t i = 0; i < res_len; i++, p += 4) {
        float r = get_f32(p);
        if (!in_bound(r, FC_RES_CLIP)) {
            set_err(err, errlen, "residual %u out of range", i);
            goto fail;
        }
        f->res[i] = r;
    }
    f->res_len = res_len;
    f->res_pos = res_len % FC_RES_WINDOW;
    fc_res_q_update(f);
    return f;

fail:
    forecast_free(f);
    return NULL;
}

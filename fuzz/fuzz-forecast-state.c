/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for forecast_deserialize() and, for a state the config's
 * rate floor refuses, forecast_deserialize_own_floor(): the forecaster state
 * comes back from a Kubernetes ConfigMap, so it is outside input.
 *
 * The first input byte picks the mode: bit 0 set means "recompute the CRC-32
 * trailer before parsing" (so mutations reach the value checks behind the
 * checksum), bits 1-2 pick one of four configs, bits 3-4 the quantile (0.9,
 * 0.6, 0.95, 0.99). An accepted state must serialise back to exactly the
 * bytes parsed (one of a previous version, 2 to 7, or of another quantile,
 * to a current one of the config's that does so in turn), predict must give
 * finite results with upper >= mean >= 0, and it must keep working after
 * further observations: one before its newest by a bucket or less is refused
 * with -EINVAL, one further back with -ETIME, both leaving it unchanged; one
 * after a gap of any length (from the input's hash, up to 2^52 ms) closes at
 * most two seasons of buckets one by one (a restored clock far behind the
 * real one once walked every bucket between them: this target would time
 * out); moved by forecast_shift() it is still a state that restores; and
 * what it then becomes must serialise to a state that is accepted in turn.
 * A packed state ("GSFZ", the checkpoint's form) is checked the same way on
 * the plain state inside it, inflated here with zlib; every accepted state
 * must also come back from its own packed form. The seed corpus
 * (fuzz/corpus/forecast-state/) is written by `test-forecast-state
 * --write-corpus DIR`, whose config table matches this one (warmup-epoch*
 * are warm-ups whose newest observation is at time 0); its v2-* to v7-*
 * seeds were written so by the previous releases. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fcshape.h"
#include "forecast/forecast-int.h" /* walked: the buckets closed one by one */
#include "forecast/forecast.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

static void check_predict(const struct forecast *f, int64_t now, int64_t horizon)
{
    struct forecast_result r;
    int rc = forecast_predict(f, now, horizon, &r);
    if (rc == 0) {
        if (!isfinite(r.mean) || !isfinite(r.upper) || r.mean < 0.0 || r.upper < r.mean)
            abort();
    } else if (rc != -ENODATA && rc != -EINVAL) {
        abort();
    }
}

/* A state read back as the input was: with cfg's rate floor, or the state's. */
static struct forecast *load(const struct forecast_config *cfg, const uint8_t *buf, size_t len,
                             bool own, char *err, size_t errlen)
{
    return own ? forecast_deserialize_own_floor(cfg, buf, len, err, errlen)
               : forecast_deserialize(cfg, buf, len, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;

    struct forecast_config cfg;
    forecast_config_init(&cfg);
    fuzz_forecast_shape(&cfg, (mode >> 1));
    fuzz_forecast_quantile(&cfg, (mode >> 3));
    const int64_t m = cfg.season_ms / cfg.bucket_ms;

    uint8_t *buf = xmalloc(size);
    if (size)
        memcpy(buf, data, size);
    if ((mode & 1) && size >= 4) {
        uint32_t c = crc32_ieee(buf, size - 4);
        for (int i = 0; i < 4; i++)
            buf[size - 4 + i] = (uint8_t)(c >> (8 * i));
    }

    char err[200];
    err[0] = '\0';
    struct forecast *f = forecast_deserialize(&cfg, buf, size, err, sizeof(err));
    bool own = false;
    if (!f) {
        if (err[0] == '\0')
            abort(); /* a rejection always says why */
        /* with the state's own rate floor (a checkpoint made under another
         * capacity): accepted and then as canonical (read back the same
         * way), or refused with a why */
        err[0] = '\0';
        own = true;
        f = forecast_deserialize_own_floor(&cfg, buf, size, err, sizeof(err));
        if (!f) {
            if (err[0] == '\0')
                abort();
            xfree(buf);
            return 0;
        }
    }

    /* the plain state: the input, or what a packed input holds */
    const uint8_t *plain = buf;
    size_t plainlen = size;
    uint8_t *inflated = NULL;
    if (size >= 8 && memcmp(buf, "GSFZ", 4) == 0) {
        uLongf n = (uLongf)buf[4] | (uLongf)buf[5] << 8 | (uLongf)buf[6] << 16 |
                   (uLongf)buf[7] << 24;
        inflated = xmalloc(n ? n : 1);
        if (uncompress(inflated, &n, buf + 8, (uLong)(size - 8)) != Z_OK)
            abort(); /* accepted, yet not one zlib stream */
        plain = inflated;
        plainlen = n;
    }

    uint8_t *out = NULL;
    size_t outlen = 0;
    forecast_serialize(f, &out, &outlen);
    float q = (float)cfg.quantile;
    bool other_q = plain[4] == 8 && memcmp(plain + 52, &q, 4) != 0; /* little-endian host */
    if ((plain[4] >= 2 && plain[4] <= 7) || other_q) {
        /* a previous release's version, or a state of another quantile:
         * written back as the current version of the config's quantile,
         * which must be canonical in turn */
        struct forecast *g = load(&cfg, out, outlen, own, err, sizeof(err));
        uint8_t *again = NULL;
        size_t againlen = 0;
        if (!g || out[4] != 8 || memcmp(out + 52, &q, 4) != 0)
            abort();
        forecast_serialize(g, &again, &againlen);
        if (againlen != outlen || memcmp(again, out, outlen) != 0)
            abort();
        xfree(again);
        forecast_free(g);
    } else if (outlen != plainlen || memcmp(out, plain, plainlen) != 0) {
        abort();
    }
    /* and from its packed form */
    uint8_t *pk = NULL;
    size_t pklen = 0;
    forecast_serialize_packed(f, &pk, &pklen);
    struct forecast *p = load(&cfg, pk, pklen, own, err, sizeof(err));
    if (!p)
        abort();
    uint8_t *again = NULL;
    size_t againlen = 0;
    forecast_serialize(p, &again, &againlen);
    if (againlen != outlen || memcmp(again, out, outlen) != 0)
        abort();
    xfree(again);
    xfree(pk);
    forecast_free(p);
    xfree(out);

    static const int64_t horizons[] = {0, 1, 999, 60000, 11 * 60000, 86400000, INT64_MAX / 4};
    int64_t times[] = {0, 1700000000000LL, (int64_t)1 << 53, INT64_MAX - 1};
    for (size_t t = 0; t < sizeof(times) / sizeof(times[0]); t++)
        for (size_t h = 0; h < sizeof(horizons) / sizeof(horizons[0]); h++)
            check_predict(f, times[t], horizons[h]);

    /* the newest observation time, as the accepted header has it (offset
     * 40, little-endian i64; 0 in an empty state) */
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)plain[40 + i] << (8 * i);
    int64_t last = forecast_last_ms(f);
    if (last != (plain[48] | plain[49] | plain[50] | plain[51] ? (int64_t)v : -1))
        abort();

    /* times before the newest: refused, the state left as it was */
    uint32_t hash = crc32_ieee(data, size);
    if (last >= 1) {
        int64_t back[] = {last - 1, last - cfg.bucket_ms,
                          last - cfg.bucket_ms - 1 - (int64_t)(hash % (uint32_t)cfg.season_ms)};
        forecast_serialize(f, &out, &outlen);
        for (size_t i = 0; i < sizeof(back) / sizeof(back[0]); i++) {
            if (back[i] < 0)
                continue;
            int rc = forecast_observe(f, back[i], 5.0);
            if (rc != (last - back[i] > cfg.bucket_ms ? -ETIME : -EINVAL))
                abort();
        }
        uint8_t *same = NULL;
        size_t samelen = 0;
        forecast_serialize(f, &same, &samelen);
        if (samelen != outlen || memcmp(same, out, outlen) != 0)
            abort();
        xfree(same);
        xfree(out);
    }

    /* keep going from the restored state: after a gap of any length (a
     * restored clock far behind, a sample from far ahead), then the same
     * bucket, the next, a short gap, a long one; each observation closes at
     * most two seasons of buckets one by one */
    int64_t far = (int64_t)(((uint64_t)hash * 2654435761u) % ((uint64_t)1 << (22 + hash % 31)));
    int64_t now = last < 0 ? 0 : last;
    int64_t steps[] = {far, 0, cfg.bucket_ms, 7 * cfg.bucket_ms, cfg.season_ms * 3 + 5};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        if (now > INT64_MAX - steps[i])
            break;
        now += steps[i];
        uint32_t before = f->walked;
        int rc = forecast_observe(f, now, 10.0 * (double)(i + 1));
        if (rc != 0 && rc != -ERANGE) /* -ERANGE: a bucket of 2^32 - 1 observations */
            abort();
        if ((uint32_t)(f->walked - before) > 2 * m + 1)
            abort();
        check_predict(f, now, 11 * 60000);
    }

    /* moved to another clock, it is still a state that restores */
    int64_t delta = (int64_t)(hash % 2000003) * ((hash >> 8) % 5 == 0 ? 997 : 1) - 1000001;
    int rc = forecast_shift(f, (hash & 1) ? delta : -delta * 1000);
    if (rc != 0 && rc != -ERANGE)
        abort();
    forecast_serialize(f, &out, &outlen);
    struct forecast *s = load(&cfg, out, outlen, own, err, sizeof(err));
    if (!s) {
        fprintf(stderr, "the state a shift made is refused: %s\n", err);
        abort();
    }
    uint8_t *again2 = NULL;
    size_t again2len = 0;
    forecast_serialize(s, &again2, &again2len);
    if (again2len != outlen || memcmp(again2, out, outlen) != 0)
        abort();
    xfree(again2);
    forecast_free(s);
    xfree(out);
    if (rc == 0 && forecast_last_ms(f) >= 0 && forecast_last_ms(f) < INT64_MAX / 2) {
        now = forecast_last_ms(f) + cfg.bucket_ms;
        if (forecast_observe(f, now, 20.0) != 0)
            abort();
        check_predict(f, now, 11 * 60000);
    }
    /* what it has become is checkpointed again, and must restore */
    forecast_serialize(f, &out, &outlen);
    struct forecast *g = load(&cfg, out, outlen, own, err, sizeof(err));
    if (!g) {
        fprintf(stderr, "the state it became is refused: %s\n", err);
        abort();
    }
    forecast_free(g);
    xfree(out);
    xfree(inflated);
    xfree(buf);
    forecast_free(f);
    return 0;
}

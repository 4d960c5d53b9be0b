/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the forecast state codec: round trips (the learned plan
 * too), the previous releases' checkpoints, rejected states.
 *
 * Run as `test-forecast-state --write-corpus DIR` it instead writes the seed
 * corpus of fuzz/fuzz-forecast-state.c into DIR (see write_corpus()); run as
 * `test-forecast-state DIR` it reads the previous releases' checkpoints from
 * that corpus (test_state_previous_version; skipped without DIR). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zlib.h>

#include "forecast/forecast.h"
#include "forecast-int.h" /* the learned plan's fit */
#include "test-forecast.h"
#include "util/util.h"

/* ---- state codec ------------------------------------------------------------------- */

/* Table-driven CRC-32, written independently of the module's. */
static uint32_t test_crc32(const uint8_t *p, size_t n)
{
    static uint32_t table[256];
    if (table[1] == 0)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static void fix_crc(uint8_t *b, size_t n)
{
    uint32_t c = test_crc32(b, n - 4);
    for (int i = 0; i < 4; i++)
        b[n - 4 + i] = (uint8_t)(c >> (8 * i));
}

static void roundtrip_one(const struct forecast_config *cfg, struct forecast *f, int64_t now_ms,
                          int64_t step_ms)
{
    uint8_t *buf;
    size_t len;
    forecast_serialize(f, &buf, &len);
    print_message("checkpoint: %zu bytes (%.1f KB)\n", len, (double)len / 1024);
    assert_true(memcmp(buf, "GSFC", 4) == 0);
    assert_int_equal(buf[4] | buf[5] << 8, 8);
    uint32_t crc = (uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8 |
                   (uint32_t)buf[len - 2] << 16 | (uint32_t)buf[len - 1] << 24;
    assert_int_equal(crc, test_crc32(buf, len - 4));

    char err[160];
    struct forecast *g = forecast_deserialize(cfg, buf, len, err, sizeof(err));
    if (!g)
        fail_msg("deserialize: %s", err);
    /* restored with room for the buckets it holds, no more */
    assert_true(forecast_memory(g) <= forecast_memory(f));
    serialize_cmp(f, g);
    /* the packed form (the checkpoint's) restores the same state, and is
     * the plain state deflated by zlib, as pack.c's layout says */
    uint8_t *pk;
    size_t pklen;
    forecast_serialize_packed(f, &pk, &pklen);
    print_message("packed: %zu bytes (%.1f KB, %.0f %% of the state)\n", pklen,
                  (double)pklen / 1024, 100.0 * (double)pklen / (double)len);
    assert_true(memcmp(pk, "GSFZ", 4) == 0);
    assert_int_equal((size_t)pk[4] | (size_t)pk[5] << 8 | (size_t)pk[6] << 16 |
                         (size_t)pk[7] << 24, len);
    assert_true(pklen < len);
    uLongf ulen = (uLongf)len;
    uint8_t *un = xmalloc(len);
    assert_int_equal(uncompress(un, &ulen, pk + 8, (uLong)(pklen - 8)), Z_OK);
    assert_int_equal(ulen, len);
    assert_memory_equal(un, buf, len);
    xfree(un);
    struct forecast *h = forecast_deserialize(cfg, pk, pklen, err, sizeof(err));
    if (!h)
        fail_msg("deserialize packed: %s", err);
    serialize_cmp(f, h);
    forecast_free(h);
    xfree(pk);
    /* identical predictions now and after identical further input: the
     * learned plan's fits, shifts and plans made are checkpointed (its rows
     * are not: they only feed the next refit) */
    for (int round = 0; round < 2; round++) {
        for (int64_t hz = 0; hz < 100; hz += 7) {
            struct forecast_result a, b;
            int ra = forecast_predict(f, now_ms, hz * step_ms, &a);
            int rb = forecast_predict(g, now_ms, hz * step_ms, &b);
            assert_int_equal(ra, rb);
            assert_int_equal(a.method, b.method);
            assert_int_equal(a.buckets_seen, b.buckets_seen);
            assert_int_equal(a.learned, b.learned);
            assert_true(a.mean == b.mean && a.upper_model == b.upper_model);
            assert_true(a.upper == b.upper && a.likely == b.likely);
        }
        for (int i = 1; i <= 5; i++) {
            now_ms += step_ms;
            double y = 100.0 + 10.0 * i;
            assert_int_equal(forecast_observe(f, now_ms, y), 0);
            assert_int_equal(forecast_observe(g, now_ms, y), 0);
        }
    }
    serialize_cmp(f, g);
    forecast_free(g);
    xfree(buf);
}

/* A restored learned plan serves at once, and is refitted only once as many
 * new rows are kept as its fit used (the rows are not checkpointed: a refit
 * on the first 200 after a restart would replace a fit on 600). */
static void test_learned_restored(void **state)
{
    (void)state;
    struct forecast_config cfg;
    forecast_config_init(&cfg);
    cfg.rate_floor = 8;
    const int64_t ahead = 3 * MIN_MS + MIN_MS / 4;
    struct forecast *f = forecast_new(&cfg);
    struct lcg g = {5};
    int64_t i = 0;
    struct forecast_result a, b;
    for (; i < 600; i++) {
        double y = daily_shape(i % DAY_MIN) * (1 + 0.1 * (2 * lcg_next(&g) - 1));
        assert_int_equal(forecast_observe(f, T0 + i * MIN_MS, y), 0);
        (void)forecast_predict(f, T0 + i * MIN_MS, ahead, &a);
    }
    assert_true(a.learned);
    uint8_t *buf;
    size_t len;
    forecast_serialize(f, &buf, &len);
    char err[160];
    struct forecast *r = forecast_deserialize(&cfg, buf, len, err, sizeof(err));
    if (!r)
        fail_msg("deserialize: %s", err);
    xfree(buf);
    int h = -1;
    for (int k = 0; k < FC_HORIZONS && h < 0; k++)
        if (r->learn_ok[k])
            h = k;
    assert_true(h >= 0);
    uint16_t fit_n = r->learn_fit_n[h];
    assert_true(fit_n >= FC_LEARN_MIN && fit_n <= 600);
    assert_int_equal(r->learn_n[h], 0);
    float beta0 = r->learn_beta[h][0];
    assert_int_equal(forecast_predict(r, T0 + (i - 1) * MIN_MS, ahead, &b), 0);
    assert_true(b.learned);
    assert_true(b.upper == a.upper);
    forecast_free(f);
    /* the old fit holds while fewer new rows than it used are kept */
    int64_t refit_at = -1;
    for (; i < 600 + 2 * (int64_t)fit_n && refit_at < 0; i++) {
        double y = daily_shape(i % DAY_MIN) * (1 + 0.1 * (2 * lcg_next(&g) - 1));
        assert_int_equal(forecast_observe(r, T0 + i * MIN_MS, y), 0);
        assert_int_equal(forecast_predict(r, T0 + i * MIN_MS, ahead, &b), 0);
        assert_true(b.learned);
        if (r->learn_fit_n[h] != fit_n || r->learn_beta[h][0] != beta0)
            refit_at = r->learn_n[h];
    }
    print_message("restored fit on %u rows; refitted at %lld new rows\n", fit_n,
                  (long long)refit_at);
    assert_int_equal(refit_at, fit_n);
    assert_int_equal(r->learn_fit_n[h], fit_n);
    forecast_free(r);
}

static void test_state_roundtrip(void **state)
{
    (void)state;
    struct forecast_config cfg = small_cfg();
    int64_t b0 = 6007;

    struct forecast *f = forecast_new(&cfg); /* empty */
    roundtrip_one(&cfg, f, b0 * 1000, 1000);
    forecast_free(f);

    f = forecast_new(&cfg); /* warm-up, with a gap */
    feed_small(f, b0, b0 + 40);
    feed_small(f, b0 + 45, b0 + 70);
    roundtrip_one(&cfg, f, (b0 + 69) * 1000, 1000);
    forecast_free(f);

    f = forecast_new(&cfg); /* Holt-Winters, with a gap */
    feed_small(f, b0, b0 + 130);
    feed_small(f, b0 + 140, b0 + 200);
    roundtrip_one(&cfg, f, (b0 + 199) * 1000, 1000);
    forecast_free(f);

    struct forecast_config def;
    forecast_config_init(&def);
    f = forecast_new(&def); /* default config, full residual window, learned plan */
    for (int64_t i = 0; i < 3 * DAY_MIN; i++) {
        struct forecast_result r;
        assert_int_equal(forecast_observe(f, T0 + i * MIN_MS, daily_shape(i % DAY_MIN)), 0);
        (void)forecast_predict(f, T0 + i * MIN_MS, 3 * MIN_MS + MIN_MS / 4, &r);
    }
    struct forecast_result lr;
    assert_int_equal(forecast_predict(f, T0 + (3 * DAY_MIN - 1) * MIN_MS, 3 * MIN_MS + MIN_MS / 4,
                                      &lr), 0);
    assert_true(lr.learned);
    roundtrip_one(&def, f, T0 + (3 * DAY_MIN - 1) * MIN_MS, MIN_MS);
    forecast_free(f);
}

/* The previous releases' checkpoints (the v2-* to v7-* seeds of
 * fuzz/corpus/forecast-state/, written by those releases' `test-forecast
 * --write-corpus`; version 2 has float buffered values, neither it nor 3 has
 * the recent window peaks of version 4, none of them has the learned plan of
 * version 5, none before version 6 the recent seasons' ring, none before 7
 * the quantile, and none the stale phase bins of version 8) restore: the
 * restored forecaster has the same history and plans within the 16-bit
 * steps of its buffered values as one fed the same observations now, also
 * once the buffer has become Holt-Winters' seasonal indices. */
static uint8_t *read_seed(const char *dir, const char *name, size_t *len)
{
    char *path = xasprintf("%s/%s", dir, name);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("%s: cannot open", path);
    uint8_t *buf = xmalloc(1 << 16);
    *len = fread(buf, 1, 1 << 16, fp);
    fclose(fp);
    xfree(path);
    return buf;
}

/* Plans of a and b agree: the model exactly (within the buffer's steps),
 * upper and likely within `tol` (relative): a restored state's resolved
 * plans were made by its release's rules, and move the adaptive level as
 * they resolve (0.02 since the growth bound before a season changed). */
static void assert_same_plans(const struct forecast *a, const struct forecast *b, int64_t now,
                              int64_t step, double tol)
{
    for (int64_t hz = 0; hz < 40; hz += 3) {
        struct forecast_result x, y;
        assert_int_equal(forecast_predict(a, now, hz * step, &x),
                         forecast_predict(b, now, hz * step, &y));
        assert_int_equal(x.method, y.method);
        assert_int_equal(x.buckets_seen, y.buckets_seen);
        assert_int_equal(x.evidence, y.evidence);
        assert_near(x.mean, y.mean, 1e-3 * (1 + x.mean));
        assert_near(x.upper, y.upper, tol * (1 + x.upper));
        assert_near(x.likely, y.likely, tol * (1 + x.likely));
    }
}

/* Bytes version 4 adds to a state whose window peak stores are empty: the
 * two kinds' plan rings (16 x 5 x 2 f32), five (loss, loss, miss rate, count)
 * and five empty stores. */
#define V4_EXTRA_FIXED (16 * 5 * 8 + 5 * 14)
/* ... and version 5, all zero bits without a learned plan: five fits (u16
 * rows, 5 f32 coefficients), 24 x 5 f32 shifts; then 16 x 5 f32 learned
 * plans made, the quiet NaN of none */
#define V5_EXTRA_ZERO (5 * 22 + 24 * 5 * 4)
#define V5_EXTRA_FIXED (V5_EXTRA_ZERO + 16 * 5 * 4)

/* One previous version's seeds (prefix "v2-" to "v7-") restore, and
 * are written back as the current version. */
static void previous_version(const char *dir, const char *pre, int version)
{
    char err[160], name[64];
    size_t len;

    /* warmup-default: defaults, 20 minutes with a 4-minute gap */
    struct forecast_config def;
    forecast_config_init(&def);
    snprintf(name, sizeof(name), "%swarmup-default", pre);
    uint8_t *seed = read_seed(dir, name, &len);
    assert_int_equal(seed[5] | seed[6] << 8, version);
    struct forecast *g = forecast_deserialize(&def, seed + 1, len - 1, err, sizeof(err));
    if (!g)
        fail_msg("%s: %s", name, err);
    struct forecast *f = forecast_new(&def);
    int64_t now = 0;
    for (int64_t i = 0; i < 20; i++) {
        now = T0 + i * MIN_MS + (i == 7 ? 4 * MIN_MS : 0);
        forecast_observe(f, now, daily_shape(i));
    }
    assert_same_plans(f, g, now, MIN_MS, 0.02);
    forecast_free(f);
    forecast_free(g);
    xfree(seed);

    /* warmup-small: 72 one-second buckets with a gap, then on through the
     * switch to Holt-Winters (120 buckets) */
    struct forecast_config sc = small_cfg();
    snprintf(name, sizeof(name), "%swarmup-small", pre);
    seed = read_seed(dir, name, &len);
    g = forecast_deserialize(&sc, seed + 1, len - 1, err, sizeof(err));
    if (!g)
        fail_msg("%s: %s", name, err);
    f = forecast_new(&sc);
    feed_small(f, 6007, 6047);
    feed_small(f, 6052, 6080);
    assert_same_plans(f, g, 6079 * 1000, 1000, 0.02);
    feed_small(f, 6080, 6200);
    feed_small(g, 6080, 6200);
    assert_same_plans(f, g, 6199 * 1000, 1000, 0.02);
    struct forecast_result r;
    assert_int_equal(forecast_predict(g, 6199 * 1000, 10000, &r), 0);
    assert_int_equal(r.method, FORECAST_HOLT_WINTERS);
    /* written back as the current version */
    uint8_t *out;
    size_t outlen;
    forecast_serialize(g, &out, &outlen);
    assert_int_equal(out[4] | out[5] << 8, 8);
    xfree(out);
    forecast_free(f);
    forecast_free(g);
    xfree(seed);

    /* the Holt-Winters seeds restore unchanged: the same bytes but the
     * version, with the later versions' fields empty */
    static const struct {
        const char *name;
        int64_t bucket_ms, season_ms;
    } hw[] = {{"hw-small", 1000, 60000}, {"hw-m4", 1000, 4000}, {"hw-hourly", 60000, 3600000}};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(hw); i++) {
        struct forecast_config c;
        forecast_config_init(&c);
        c.bucket_ms = hw[i].bucket_ms;
        c.season_ms = hw[i].season_ms;
        snprintf(name, sizeof(name), "%s%s", pre, hw[i].name);
        seed = read_seed(dir, name, &len);
        g = forecast_deserialize(&c, seed + 1, len - 1, err, sizeof(err));
        if (!g)
            fail_msg("%s: %s", name, err);
        forecast_serialize(g, &out, &outlen);
        /* header and season, plan rings, bins and coverage (112 + m x 4 +
         * 1028 bytes; version 7's quantile, the config's, where the header
         * had 4 reserved bytes), version 4's and 5's fixed fields, then the
         * new fields, then the residual stores (and version 4's window peak
         * stores), then version 6's recent seasons' ring (7 seasons and 30
         * buckets, all none before version 6), then version 8's stale phase
         * bins (none) */
        int64_t m = c.season_ms / c.bucket_ms;
        size_t fixed = 112 + (size_t)m * 4 + 1028 + (version >= 4 ? V4_EXTRA_FIXED : 0) +
                       (version >= 5 ? V5_EXTRA_FIXED : 0);
        size_t added = (version < 4 ? V4_EXTRA_FIXED : 0) + (version < 5 ? V5_EXTRA_FIXED : 0);
        size_t ring = (size_t)(7 * m + 30) * 2;
        assert_int_equal(outlen, len - 1 + added + (version < 4 ? 5 : 0) +
                                     (version < 6 ? ring : 0) + 4 /* no stale bins */);
        float q = (float)c.quantile;
        assert_memory_equal(out + 52, &q, 4); /* little-endian host */
        if (version < 7)
            assert_memory_equal(seed + 1 + 52, "\0\0\0\0", 4);
        assert_memory_equal(out + 6, seed + 7, 52 - 6);
        assert_memory_equal(out + 56, seed + 1 + 56, fixed - 56);
        const uint8_t *learned = out + fixed + added - V5_EXTRA_FIXED;
        for (size_t k = 0; version < 5 && k < V5_EXTRA_ZERO; k++)
            assert_int_equal(learned[k], 0);
        size_t stores = len - 1 - fixed - 4;
        assert_memory_equal(out + fixed + added, seed + 1 + fixed, stores);
        for (int h = 0; version < 4 && h < 5; h++)
            assert_int_equal(out[fixed + added + stores + h], 0);
        const uint8_t *seasons = out + outlen - 8 - ring;
        for (size_t k = 0; version < 6 && k < ring; k++)
            assert_int_equal(seasons[k], 0);
        if (version >= 6)
            assert_memory_equal(seasons, seed + len - 4 - ring, ring);
        assert_memory_equal(out + outlen - 8, "\0\0\0\0", 4);
        xfree(out);
        forecast_free(g);
        xfree(seed);
    }
}

static void test_state_previous_version(void **state)
{
    const char *dir = *state;
    if (!dir)
        skip();
    previous_version(dir, "v2-", 2);
    previous_version(dir, "v3-", 3);
    previous_version(dir, "v4-", 4);
    previous_version(dir, "v5-", 5);
    previous_version(dir, "v6-", 6);
    previous_version(dir, "v7-", 7);
}

static void test_state_rejected(void **state)
{
    (void)state;
    struct forecast_config cfg = small_cfg();
    struct forecast *f = forecast_new(&cfg);
    feed_small(f, 6007, 6007 + 150);
    uint8_t *buf;
    size_t len;
    forecast_serialize(f, &buf, &len);
    char err[160];
    uint8_t *b = xmalloc(len + 1);

    /* every truncation, and one extra byte */
    for (size_t n = 0; n < len; n++)
        assert_null(forecast_deserialize(&cfg, buf, n, err, sizeof(err)));
    memcpy(b, buf, len);
    b[len] = 0;
    assert_null(forecast_deserialize(&cfg, b, len + 1, err, sizeof(err)));
    assert_non_null(strstr(err, "padded"));
    assert_null(forecast_deserialize(&cfg, b, len - 1, err, sizeof(err)));
    assert_non_null(strstr(err, "truncated"));

    /* every single-bit corruption */
    for (size_t i = 0; i < len; i++) {
        memcpy(b, buf, len);
        b[i] ^= (uint8_t)(1u << (i % 8));
        if (forecast_deserialize(&cfg, b, len, err, sizeof(err)))
            fail_msg("flipped bit in byte %zu accepted", i);
    }

    /* foreign bytes, another version, another config */
    struct forecast_config other;
    memcpy(b, buf, len);
    memcpy(b, "JUNK", 4);
    assert_null(forecast_deserialize(&cfg, b, len, err, sizeof(err)));
    assert_non_null(strstr(err, "magic"));
    memcpy(b, buf, len);
    b[4] = 9;
    fix_crc(b, len);
    assert_null(forecast_deserialize(&cfg, b, len, err, sizeof(err)));
    assert_non_null(strstr(err, "version"));
    b[4] = 1; /* an older release's checkpoint: refused, with what happens next */
    fix_crc(b, len);
    assert_null(forecast_deserialize(&cfg, b, len, err, sizeof(err)));
    assert_non_null(strstr(err, "starts afresh"));
    other = cfg;
    other.rate_floor = 2.0;
    assert_null(forecast_deserialize(&other, buf, len, err, sizeof(err)));
    assert_non_null(strstr(err, "floor"));
    /* with the state's own floor: the same forecaster, byte for byte */
    struct forecast *own = forecast_deserialize_own_floor(&other, buf, len, err, sizeof(err));
    assert_non_null(own);
    uint8_t *again = NULL;
    size_t againlen = 0;
    forecast_serialize(own, &again, &againlen);
    assert_int_equal(againlen, len);
    assert_memory_equal(again, buf, len);
    xfree(again);
    forecast_free(own);
    /* but not a floor no config may have, nor another season */
    memcpy(b, buf, len);
    for (int i = 0; i < 8; i++)
        b[88 + i] = 0xff; /* a NaN */
    fix_crc(b, len);
    assert_null(forecast_deserialize_own_floor(&other, b, len, err, sizeof(err)));
    assert_non_null(strstr(err, "nan; config has")); /* -nan: the header refuses it */
    memcpy(b, buf, len);
    double big = 1e9;
    memcpy(b + 88, &big, 8); /* little-endian, as the state */
    fix_crc(b, len);
    assert_null(forecast_deserialize_own_floor(&other, b, len, err, sizeof(err)));
    assert_non_null(strstr(err, "rate floor 1e+09 out of range"));
    memcpy(b, buf, len);
    memcpy(b, "JUNK", 4); /* the header's own reason first */
    assert_null(forecast_deserialize_own_floor(&other, b, len, err, sizeof(err)));
    assert_non_null(strstr(err, "magic"));
    other.season_ms = 120000;
    assert_null(forecast_deserialize_own_floor(&other, buf, len, err, sizeof(err)));
    assert_non_null(strstr(err, "config has"));
    other = cfg;
    other.season_ms = 120000;
    assert_null(forecast_deserialize(&other, buf, len, err, sizeof(err)));
    assert_non_null(strstr(err, "config has"));
    other = cfg;
    other.bucket_ms = 2000;
    assert_null(forecast_deserialize(&other, buf, len, err, sizeof(err)));
    assert_non_null(strstr(err, "config has"));
    other = cfg;
    other.alpha = 2.0;
    assert_null(forecast_deserialize(&other, buf, len, err, sizeof(err)));
    assert_null(forecast_deserialize(NULL, buf, len, err, sizeof(err)));
    assert_null(forecast_deserialize(&cfg, NULL, 0, NULL, 0)); /* err may be NULL */
    /* retuned smoothing factors are fine: they are not part of the state;
     * another quantile restarts its calibration (test_state_quantile) */
    other = cfg;
    other.alpha = 0.5;
    other.quantile = 0.95;
    struct forecast *g = forecast_deserialize(&other, buf, len, err, sizeof(err));
    assert_non_null(g);
    assert_non_null(strstr(err, "ok; "));
    forecast_free(g);

    /* well-checksummed but invalid values: NaN level (offset 72), an infinite
     * trend (80), a bad seasonal index (first one at 112, f32), a plan-ring
     * value out of range (after the 60 seasonal indices), one of the model
     * plans' ring, a negative loss and a miss rate over 1 (after the plan
     * rings), a residual count over the bin size (after the fixed plan
     * part), a negative sum; values the forecaster never produces: a level,
     * a last bucket's value or a phase bin's peak of e^9000 req/s (from a
     * floor of 0.1, the level is at most ln(1e12) + 20 = 47.6), a seasonal
     * index past twice the level's span (139.9), a bucket peak past the log
     * of the highest rate (27.6); a first planned bucket before the third;
     * a quantile that is no quantile */
    const size_t ring = 112 + 60 * 4, v3 = ring + 16 * 12 + 16 * 5 * 8 + 24 * 4 + 5 * 20;
    const size_t losses = v3 + 16 * 5 * 8, learn = v3 + V4_EXTRA_FIXED;
    const size_t store = learn + V5_EXTRA_FIXED;
    static const struct {
        size_t off;
        double v;
        int kind; /* 0 f64, 1 f32, 2 u8; 3, 4, 5: f32 at v3, losses, losses + 8; 6 u16 at
                     learn; 7, 8, 9: f32 at learn + 2 (a coefficient), its shifts, its
                     plans made; 10 f32 at the first phase bin's peak; 11 i64 */
        const char *why;
    } poke[] = {
        {72, NAN, 0, "level"},
        {80, INFINITY, 0, "level"},
        {112, 1e30, 1, "seasonal"},
        {0, 5e4, 1, "plan ring"},
        {0, NAN, 1, "plan ring"}, /* a NaN that is not the canonical one */
        {0, 5e4, 3, "plan ring"},
        {0, -1.0, 4, "quantile loss"},
        {0, 2.0, 5, "quantile loss"},
        {1, 200, 2, "length"}, /* a count the rest of the bytes do not hold */
        {1, 49, 2, "length"},
        {56, -1.0, 0, "sum"},
        {0, FC_LEARN_MIN - 1, 6, "learned plan fit"}, /* a fit on too few rows */
        {0, FC_LEARN_ROWS + 1, 6, "learned plan fit"},
        {0, 0.5, 7, "learned plan fit"},             /* a coefficient without a fit */
        {0, -0.0, 7, "learned plan fit"},            /* not canonical */
        {0, 2.5, 8, "learned plan shift"},
        {0, NAN, 9, "learned plan ring"},
        {72, 9000, 0, "level"},
        {72, -30, 0, "level"},
        {104, 9000, 0, "last bucket"},
        {80, 80, 0, "trend"},
        {112, 200, 1, "seasonal"},
        {0, 40, 1, "plan ring"},
        {0, 9000, 10, "phase bin peak"},
        {0, -3, 10, "phase bin peak"}, /* below ln(0.1) */
        {96, 0, 11, "first planned"},
        {96, 2, 11, "first planned"},
        {52, NAN, 1, "quantile"},
        {52, 0.5, 1, "quantile"},
        {52, 1.5, 1, "quantile"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(poke); i++) {
        memcpy(b, buf, len);
        size_t off = poke[i].off;
        int kind = poke[i].kind;
        if (poke[i].kind == 1 && off == 0)
            off = ring;
        if (poke[i].kind == 2)
            off = store;
        if (poke[i].kind >= 3 && poke[i].kind <= 5) {
            off = poke[i].kind == 3 ? v3 : poke[i].kind == 4 ? losses : losses + 8;
            kind = 1;
        }
        if (poke[i].kind == 10) {
            off = v3 - 24 * 4 - 5 * 20;
            kind = 1;
        }
        if (poke[i].kind >= 7 && poke[i].kind <= 9) {
            off = poke[i].kind == 7   ? learn + 2
                  : poke[i].kind == 8 ? learn + 5 * 22
                                      : learn + V5_EXTRA_ZERO;
            kind = 1;
        }
        if (kind == 1) {
            float v = (float)poke[i].v;
            if (isnan(v)) {
                uint32_t bits = 0x7fc00001u;
                memcpy(&v, &bits, 4);
            }
            memcpy(b + off, &v, 4); /* little-endian host */
        } else if (kind == 2) {
            b[off] = (uint8_t)poke[i].v;
        } else if (kind == 6) {
            b[learn] = (uint8_t)((unsigned)poke[i].v & 0xff);
            b[learn + 1] = (uint8_t)((unsigned)poke[i].v >> 8);
        } else if (kind == 11) {
            int64_t v = (int64_t)poke[i].v;
            memcpy(b + off, &v, 8);
        } else {
            memcpy(b + off, &poke[i].v, 8);
        }
        fix_crc(b, len);
        assert_null(forecast_deserialize(&cfg, b, len, err, sizeof(err)));
        if (!strstr(err, poke[i].why))
            fail_msg("poke %zu: reason '%s' does not mention %s", i, err, poke[i].why);
    }
    memcpy(b, buf, len);
    b[7] = 1;
    fix_crc(b, len);
    assert_null(forecast_deserialize(&cfg, b, len, err, sizeof(err)));
    memcpy(b, buf, len);
    b[6] = 0; /* claims warm-up with 150 buckets seen */
    fix_crc(b, len);
    assert_null(forecast_deserialize(&cfg, b, len, err, sizeof(err)));

    /* a recent seasons' peak for a bucket before bucket 0 (an empty
     * state's ring is all before it) */
    struct forecast *e = forecast_new(&cfg);
    uint8_t *eb;
    size_t elen;
    forecast_serialize(e, &eb, &elen);
    assert_non_null(g = forecast_deserialize(&cfg, eb, elen, err, sizeof(err)));
    forecast_free(g);
    eb[elen - 9] = 1;
    fix_crc(eb, elen);
    assert_null(forecast_deserialize(&cfg, eb, elen, err, sizeof(err)));
    assert_non_null(strstr(err, "before bucket 0"));
    eb[elen - 9] = 0;
    /* a stale mark on a phase bin without a peak, or past the 24 bins */
    eb[elen - 8] = 1;
    fix_crc(eb, elen);
    assert_null(forecast_deserialize(&cfg, eb, elen, err, sizeof(err)));
    assert_non_null(strstr(err, "stale mark on phase bin 0, which has no peak"));
    eb[elen - 8] = 0;
    eb[elen - 5] = 1; /* bit 24 */
    fix_crc(eb, elen);
    assert_null(forecast_deserialize(&cfg, eb, elen, err, sizeof(err)));
    assert_non_null(strstr(err, "stale mark on phase bin 24"));
    xfree(eb);
    forecast_free(e);
    /* ... but on every bin with a peak it restores, and serialises back */
    memcpy(b, buf, len);
    int marked = 0;
    for (int bin = 0; bin < 24; bin++) {
        float v;
        memcpy(&v, buf + 112 + 60 * 4 + 16 * 12 + 16 * 5 * 8 + 4 * bin, 4); /* little-endian */
        if (isfinite(v)) {
            b[len - 8 + bin / 8] |= (uint8_t)(1u << (bin % 8));
            marked++;
        }
    }
    assert_true(marked > 0);
    fix_crc(b, len);
    assert_non_null(g = forecast_deserialize(&cfg, b, len, err, sizeof(err)));
    uint8_t *sb;
    size_t slen;
    forecast_serialize(g, &sb, &slen);
    assert_int_equal(slen, len);
    assert_memory_equal(sb, b, len);
    xfree(sb);
    forecast_free(g);

    /* the untouched buffer is still fine */
    g = forecast_deserialize(&cfg, buf, len, err, sizeof(err));
    assert_non_null(g);
    assert_string_equal(err, "ok");
    forecast_free(g);
    xfree(b);
    xfree(buf);
    forecast_free(f);
}

/* The quantile is part of the state (version 7): a state restored under
 * another forecast-quantile starts what depends on it afresh at the new one
 * (the adaptive levels, the losses and coverage of plans made at the old
 * one, the learned plan fitted at it), not hours of plans tuned for the old
 * quantile; the model and the residuals stay. Under its own quantile it is
 * as it was. */
static void test_state_quantile(void **state)
{
    (void)state;
    struct forecast_config cfg;
    forecast_config_init(&cfg);
    struct forecast *f = forecast_new(&cfg);
    struct lcg g = {5};
    struct forecast_result r;
    int64_t i = 0;
    for (; i < 600; i++) {
        double y = daily_shape(i % DAY_MIN) * (1 + 0.1 * (2 * lcg_next(&g) - 1));
        assert_int_equal(forecast_observe(f, T0 + i * MIN_MS, y), 0);
        (void)forecast_predict(f, T0 + i * MIN_MS, 195000, &r);
    }
    assert_true(r.learned);
    uint8_t *buf, *out;
    size_t len, outlen;
    char err[200];
    forecast_serialize(f, &buf, &len);
    float q;
    memcpy(&q, buf + 52, 4);
    assert_true(q == 0.9f);

    struct forecast_config other = cfg;
    other.quantile = 0.95;
    struct forecast *h = forecast_deserialize(&other, buf, len, err, sizeof(err));
    if (!h)
        fail_msg("deserialize: %s", err);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "ok; "));
    assert_non_null(strstr(err, "0.9"));
    assert_non_null(strstr(err, "0.95"));
    for (int k = 0; k < FC_HORIZONS; k++) {
        assert_true(h->qlevel[k] == 0.95f);
        assert_false(h->learn_ok[k]);
        assert_int_equal(h->cov_n[k], 0);
        assert_int_equal(h->loss_n[k], 0);
        for (int b = 0; b < FC_PHASES; b++)
            assert_true(h->learn_shift[b][k] == 0);
        for (int s = 0; s < FC_RING; s++)
            assert_true(isnan(h->planned[s][k]) && isnan(h->planned_l[s][k]));
    }
    assert_true(h->level == f->level && h->seen == f->seen); /* the model stays */
    assert_int_equal(forecast_predict(h, T0 + (i - 1) * MIN_MS, 195000, &r), 0);
    assert_false(r.learned);
    assert_true(r.trusted); /* the residuals stay */
    /* it is a state of 0.95 now, canonical under 0.95 */
    forecast_serialize(h, &out, &outlen);
    memcpy(&q, out + 52, 4);
    assert_true(q == 0.95f);
    struct forecast *k2 = forecast_deserialize(&other, out, outlen, err, sizeof(err));
    assert_non_null(k2);
    assert_string_equal(err, "ok");
    serialize_cmp(h, k2);
    forecast_free(k2);
    xfree(out);
    forecast_free(h);

    /* under its own quantile, nothing is reset */
    h = forecast_deserialize(&cfg, buf, len, err, sizeof(err));
    assert_non_null(h);
    assert_string_equal(err, "ok");
    serialize_cmp(f, h);
    forecast_free(h);
    xfree(buf);
    forecast_free(f);
}

/* Values the forecaster never produces are refused: a level and phase bins'
 * peaks of e^9000 req/s with full residual stores planned the highest rate
 * there is, trusted (the policy then asks for max-replicas). What it does
 * produce, even from inputs built to push its level out (rates of 0 and
 * 1e12 in turn, an undamped trend run on through gaps), restores. */
static void test_state_bounds(void **state)
{
    (void)state;
    struct forecast_config cfg = small_cfg();
    struct forecast *f = forecast_new(&cfg);
    feed_small(f, 6007, 6007 + 150);
    uint8_t *buf;
    size_t len;
    char err[200];
    forecast_serialize(f, &buf, &len);
    const size_t ring = 112 + 60 * 4, binmax = ring + 16 * 12 + 16 * 5 * 8;
    double big = 9000;
    memcpy(buf + 72, &big, 8);
    for (int b = 0; b < 24; b++) {
        float v = 9000;
        memcpy(buf + binmax + 4 * b, &v, 4);
    }
    fix_crc(buf, len);
    assert_null(forecast_deserialize(&cfg, buf, len, err, sizeof(err)));
    print_message("level and bin peaks of 9000: %s\n", err);
    assert_non_null(strstr(err, "level"));
    xfree(buf);
    forecast_free(f);

    /* the extremes it reaches restore, and lie within the bounds */
    for (int k = 0; k < 4; k++) {
        struct forecast_config c = small_cfg();
        c.phi = k & 1 ? 1.0 : 0.98;
        c.rate_floor = k & 2 ? 1e-6 : 1e6;
        c.alpha = c.beta = c.gamma = 0.95;
        f = forecast_new(&c);
        int64_t t = 6007;
        for (int64_t n = 0; n < 400; n++) {
            /* rising in turn to the highest rate, with gaps of growing length */
            double y = n % 3 == 2 ? 0 : FORECAST_MAX_RATE;
            t += n % 17 == 16 ? 1 + n * 3 : 1;
            assert_int_equal(forecast_observe(f, t * 1000, y), 0);
            if (n % 25 == 24) {
                forecast_serialize(f, &buf, &len);
                struct forecast *g = forecast_deserialize(&c, buf, len, err, sizeof(err));
                if (!g)
                    fail_msg("config %d, step %lld: %s", k, (long long)n, err);
                serialize_cmp(f, g);
                forecast_free(g);
                xfree(buf);
            }
        }
        assert_true(f->level >= f->llo && f->level <= f->lhi);
        assert_true(fabs(f->trend) <= fc_trend_max(f));
        forecast_free(f);
    }
}

/* The first planned bucket is at least the third (plans start once three
 * buckets have closed): one of 0 with three buckets seen had the momentum
 * read the slot of bucket -1 (undefined behaviour) at the first plan. */
static void test_state_origin(void **state)
{
    (void)state;
    struct forecast_config cfg = small_cfg();
    struct forecast *f = forecast_new(&cfg);
    feed_small(f, 0, 4); /* buckets 0..2 closed, 3 open */
    uint8_t *buf;
    size_t len;
    char err[200];
    forecast_serialize(f, &buf, &len);
    int64_t o;
    memcpy(&o, buf + 96, 8);
    assert_int_equal(o, FC_MIN_BUCKETS); /* as plan.c sets it */
    for (int64_t bad = 0; bad < FC_MIN_BUCKETS; bad++) {
        memcpy(buf + 96, &bad, 8);
        fix_crc(buf, len);
        assert_null(forecast_deserialize(&cfg, buf, len, err, sizeof(err)));
        assert_non_null(strstr(err, "first planned"));
    }
    memcpy(buf + 96, &o, 8);
    fix_crc(buf, len);
    struct forecast *g = forecast_deserialize(&cfg, buf, len, err, sizeof(err));
    assert_non_null(g);
    struct forecast_result r;
    assert_int_equal(forecast_predict(g, 3000, 2000, &r), 0);
    forecast_free(g);
    xfree(buf);
    forecast_free(f);
}

/* Pack bytes as pack.c does, declaring `declared` bytes (zlib, written here
 * independently of the module). */
static uint8_t *test_pack(const uint8_t *raw, size_t n, size_t declared, size_t *outlen)
{
    uLongf clen = compressBound((uLong)n);
    uint8_t *b = xmalloc(8 + clen + 16);
    assert_int_equal(compress(b + 8, &clen, raw, (uLong)n), Z_OK);
    memcpy(b, "GSFZ", 4);
    for (int i = 0; i < 4; i++)
        b[4 + i] = (uint8_t)(declared >> (8 * i));
    *outlen = 8 + clen;
    return b;
}

/* A packed state is refused, with a message, when its stream is cut, corrupt,
 * longer or shorter than declared, followed by bytes, declares more than the
 * config's longest state, or holds anything but a valid plain state; and
 * accepted when another zlib level packed it (the packing is not canonical). */
static void test_state_packed_rejected(void **state)
{
    (void)state;
    struct forecast_config cfg = small_cfg();
    struct forecast *f = forecast_new(&cfg);
    feed_small(f, 6007, 6007 + 150);
    uint8_t *raw, *pk, *b;
    size_t len, pklen, n;
    char err[160];
    forecast_serialize(f, &raw, &len);
    forecast_serialize_packed(f, &pk, &pklen);
    struct forecast *g = forecast_deserialize(&cfg, pk, pklen, err, sizeof(err));
    if (!g)
        fail_msg("packed: %s", err);
    forecast_free(g);

    for (size_t k = 0; k < pklen; k++) { /* every truncation */
        assert_null(forecast_deserialize(&cfg, pk, k, err, sizeof(err)));
        assert_true(strlen(err) > 0 && strcmp(err, "ok") != 0);
    }
    b = xmalloc(pklen + 1);
    /* every single-bit corruption of the stream is refused, or inflates to
     * the same bytes (a bit no decoded symbol depends on, such as the code
     * length of a symbol the stream never uses: zlib's Adler-32 and the
     * state's CRC-32 refuse anything else) and so gives the same state */
    for (size_t i = 8; i < pklen; i++) {
        memcpy(b, pk, pklen);
        b[i] ^= (uint8_t)(1u << (i % 8));
        if ((g = forecast_deserialize(&cfg, b, pklen, err, sizeof(err)))) {
            serialize_cmp(f, g);
            forecast_free(g);
        }
    }
    memcpy(b, pk, pklen);
    b[pklen] = 0;
    assert_null(forecast_deserialize(&cfg, b, pklen + 1, err, sizeof(err)));
    assert_non_null(strstr(err, "after the packed state"));
    xfree(b);

    b = test_pack(raw, len, len + 1, &n); /* declares more than it holds */
    assert_null(forecast_deserialize(&cfg, b, n, err, sizeof(err)));
    assert_non_null(strstr(err, "declared"));
    xfree(b);
    b = test_pack(raw, len, len - 1, &n); /* less */
    assert_null(forecast_deserialize(&cfg, b, n, err, sizeof(err)));
    assert_non_null(strstr(err, "more than"));
    xfree(b);
    b = test_pack(raw, len, 0xffffffffu, &n); /* past any state of this config */
    assert_null(forecast_deserialize(&cfg, b, n, err, sizeof(err)));
    assert_non_null(strstr(err, "this config's states"));
    xfree(b);
    b = test_pack(raw, len, 0, &n);
    assert_null(forecast_deserialize(&cfg, b, n, err, sizeof(err)));
    xfree(b);

    /* another zlib level: accepted, the same state */
    b = test_pack(raw, len, len, &n);
    g = forecast_deserialize(&cfg, b, n, err, sizeof(err));
    if (!g)
        fail_msg("level 6: %s", err);
    serialize_cmp(f, g);
    forecast_free(g);
    xfree(b);

    /* packed inside packed, and a plain state that is itself refused */
    b = test_pack(pk, pklen, pklen, &n);
    assert_null(forecast_deserialize(&cfg, b, n, err, sizeof(err)));
    assert_non_null(strstr(err, "inside a packed"));
    xfree(b);
    raw[len - 1] ^= 1; /* its CRC */
    b = test_pack(raw, len, len, &n);
    assert_null(forecast_deserialize(&cfg, b, n, err, sizeof(err)));
    assert_non_null(strstr(err, "checksum"));
    xfree(b);
    raw[len - 1] ^= 1;
    struct forecast_config other = cfg;
    other.season_ms = 120000;
    assert_null(forecast_deserialize(&other, pk, pklen, err, sizeof(err)));
    assert_non_null(strstr(err, "config has"));

    xfree(raw);
    xfree(pk);
    forecast_free(f);
}

/* ---- config ------------------------------------------------------------------------ */

/* Must match the config table of fuzz/fuzz-forecast-state.c: index 0 the
 * defaults, 1 bucket 1 s / season 60 s, 2 bucket 1 s / season 4 s, 3 bucket
 * 60 s / season 1 h. The first byte of a corpus file is the fuzz mode: bit 0
 * "recompute the CRC", bits 1-2 the config index. */
static void write_seed_as(const char *dir, const char *name, uint8_t mode,
                          const struct forecast *f, bool packed)
{
    uint8_t *buf;
    size_t len;
    if (packed)
        forecast_serialize_packed(f, &buf, &len);
    else
        forecast_serialize(f, &buf, &len);
    char *path = xasprintf("%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(&mode, 1, 1, fp) != 1 || fwrite(buf, 1, len, fp) != len || fclose(fp) != 0) {
        perror(path);
        exit(1);
    }
    printf("wrote %s (%zu bytes)\n", path, len + 1);
    xfree(path);
    xfree(buf);
}

static void write_seed(const char *dir, const char *name, uint8_t mode, const struct forecast *f)
{
    write_seed_as(dir, name, mode, f, false);
}

static int write_corpus(const char *dir)
{
    struct forecast_config c0, c1 = small_cfg(), c2 = small_cfg(), c3;
    forecast_config_init(&c0);
    c2.season_ms = 4000;
    forecast_config_init(&c3);
    c3.season_ms = 3600 * 1000;

    struct forecast *f = forecast_new(&c0);
    write_seed(dir, "empty-default", 0x00, f);
    /* a warm-up whose newest observation is at time 0 (UNIX time 0 is a
     * time): the next observation, at the real time, ends a gap of 29
     * million buckets */
    forecast_observe(f, 0, 50.0);
    write_seed(dir, "warmup-epoch", 0x01, f);
    forecast_free(f);
    f = forecast_new(&c0);
    for (int64_t i = 0; i < 5; i++)
        forecast_observe(f, i * MIN_MS, daily_shape(i));
    write_seed(dir, "warmup-epoch-5", 0x01, f);
    forecast_free(f);
    f = forecast_new(&c0);
    for (int64_t i = 0; i < 20; i++)
        forecast_observe(f, T0 + i * MIN_MS + (i == 7 ? 4 * MIN_MS : 0), daily_shape(i));
    write_seed(dir, "warmup-default", 0x01, f);
    write_seed_as(dir, "packed-warmup-default", 0x00, f, true);
    forecast_free(f);

    /* half a day with a controller's look-ahead: the learned plan fitted */
    f = forecast_new(&c0);
    struct forecast_result r = {0};
    for (int64_t i = 0; i < DAY_MIN / 2; i++) {
        forecast_observe(f, T0 + i * MIN_MS, daily_shape(i) * (1 + 0.05 * (double)(i % 7)));
        (void)forecast_predict(f, T0 + i * MIN_MS, 3 * MIN_MS + MIN_MS / 4, &r);
    }
    if (!r.learned) {
        fprintf(stderr, "learned-default: no learned plan after half a day\n");
        forecast_free(f);
        return 1;
    }
    write_seed(dir, "learned-default", 0x00, f);
    write_seed_as(dir, "packed-learned-default", 0x00, f, true);
    forecast_free(f);

    f = forecast_new(&c1);
    feed_small(f, 6007, 6047);
    feed_small(f, 6052, 6080);
    write_seed(dir, "warmup-small", 0x03, f);
    feed_small(f, 6090, 6200);
    write_seed(dir, "hw-small", 0x02, f);
    forecast_free(f);

    f = forecast_new(&c2);
    for (int64_t b = 3; b < 40; b++)
        forecast_observe(f, b * 1000 + 250, (double)(b % 4) * 10.0 + 5.0);
    write_seed(dir, "hw-m4", 0x05, f);
    forecast_free(f);

    f = forecast_new(&c3);
    for (int64_t i = 0; i < 130; i++)
        forecast_observe(f, T0 + i * MIN_MS, 50.0 + (double)(i % 60));
    write_seed(dir, "hw-hourly", 0x07, f);
    write_seed_as(dir, "packed-hw-hourly", 0x06, f, true);
    forecast_free(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
        return write_corpus(argv[2]);
    /* the seed corpus directory, for the previous releases' checkpoints */
    void *corpus = argc == 2 ? argv[1] : NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_roundtrip),
        cmocka_unit_test(test_learned_restored),
        cmocka_unit_test(test_state_rejected),
        cmocka_unit_test(test_state_packed_rejected),
        cmocka_unit_test(test_state_quantile),
        cmocka_unit_test(test_state_bounds),
        cmocka_unit_test(test_state_origin),
        cmocka_unit_test_prestate(test_state_previous_version, corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

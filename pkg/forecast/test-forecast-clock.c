/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the forecaster's times: the work of one observation is
 * bounded wherever its time lies (a long gap, a restored state's old
 * clock), a clock behind the state's is told apart (-ETIME,
 * forecast_last_ms), and forecast_shift moves a forecaster to another clock
 * (gaps within a season are test-forecast.c's). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "forecast/forecast.h"
#include "forecast-int.h" /* walked: the buckets closed one by one */
#include "test-forecast.h"
#include "util/util.h"

/* Work per observation is bounded, wherever its time lies: a state
 * restored with its newest observation at time 0 (valid: UNIX time 0 is a
 * time) and then given the real time walked 29 million buckets one at a
 * time (minutes of a blocked event loop); a warm-up whose gap ends past the
 * switch to Holt-Winters walked the whole gap. Counted in buckets closed
 * (f->walked), not in wall time. */
static void test_gap_work_bounded(void **state)
{
    (void)state;
    struct forecast_config cfg;
    forecast_config_init(&cfg);
    const int64_t m = DAY_MIN;
    struct forecast *f = forecast_new(&cfg);
    for (int64_t i = 0; i < 10; i++)
        assert_int_equal(forecast_observe(f, i * MIN_MS / 2, 50.0), 0); /* buckets 0..4 */
    uint8_t *buf;
    size_t len;
    char err[200];
    forecast_serialize(f, &buf, &len);
    forecast_free(f);
    f = forecast_deserialize(&cfg, buf, len, err, sizeof(err));
    if (!f)
        fail_msg("deserialize: %s", err);
    xfree(buf);
    assert_int_equal(forecast_last_ms(f), 9 * MIN_MS / 2);
    uint32_t before = f->walked;
    assert_int_equal(forecast_observe(f, T0, 80.0), 0);
    print_message("restored at time 0, observed at %lld: %lld buckets walked\n", (long long)T0,
                  (long long)((uint32_t)(f->walked - before)));
    assert_true((uint32_t)(f->walked - before) <= 2 * m);
    struct forecast_result r;
    assert_int_equal(forecast_predict(f, T0, MIN_MS, &r), -ENODATA);
    assert_int_equal(r.buckets_seen, 0); /* warm-up afresh */
    for (int64_t i = 1; i <= 3; i++)
        assert_int_equal(forecast_observe(f, T0 + i * MIN_MS, 80.0), 0);
    assert_int_equal(forecast_predict(f, T0 + 3 * MIN_MS, MIN_MS, &r), 0);
    assert_near(r.mean, 80.0, 1e-6);
    /* a Prometheus sample far in the future (t = 1e11 s) */
    before = f->walked;
    assert_int_equal(forecast_observe(f, 100000000000000LL, 80.0), 0);
    assert_true((uint32_t)(f->walked - before) <= 2 * m);
    forecast_free(f);

    /* warm-up 1.5 seasons, then a gap of 1.9 seasons: Holt-Winters from
     * half a season into it; then the rest is a long gap of the seasonal
     * model, walked for its last season only */
    f = forecast_new(&cfg);
    for (int64_t i = 0; i < 3 * m / 2; i++)
        assert_int_equal(forecast_observe(f, T0 + i * MIN_MS, daily_shape(i % DAY_MIN)), 0);
    before = f->walked;
    int64_t at = 3 * m / 2 + 19 * m / 10;
    assert_int_equal(forecast_observe(f, T0 + at * MIN_MS, daily_shape(at % DAY_MIN)), 0);
    print_message("warm-up gap across the switch: %lld buckets walked for a gap of %lld\n",
                  (long long)((uint32_t)(f->walked - before)), (long long)(at - 3 * m / 2));
    assert_true((uint32_t)(f->walked - before) <= 3 * m / 2 + 1);
    assert_int_equal(forecast_predict(f, T0 + at * MIN_MS, MIN_MS, &r), 0);
    assert_int_equal(r.method, FORECAST_HOLT_WINTERS);
    assert_int_equal(r.buckets_seen, at); /* the gap's buckets are counted */
    assert_true(r.mean > 0 && r.upper >= r.mean && isfinite(r.upper));
    forecast_free(f);
}

/* Feed n minutes of the noisy daily shape from t0 (minute i has the value
 * of minute i of the day whatever t0), asking for a look-ahead as the
 * controller does. */
static void feed_days(struct forecast *f, int64_t t0, int64_t n)
{
    struct lcg g = {11};
    for (int64_t i = 0; i < n; i++) {
        double y = daily_shape(i % DAY_MIN) * (1 + 0.1 * (2 * lcg_next(&g) - 1));
        assert_int_equal(forecast_observe(f, t0 + i * MIN_MS, y), 0);
        struct forecast_result r;
        (void)forecast_predict(f, t0 + i * MIN_MS, 195000, &r);
    }
}

static void assert_same_predictions(const struct forecast *a, const struct forecast *b, int64_t now)
{
    for (int64_t hz = 0; hz < 40; hz += 3) {
        struct forecast_result x, y;
        assert_int_equal(forecast_predict(a, now, hz * MIN_MS, &x),
                         forecast_predict(b, now, hz * MIN_MS, &y));
        assert_true(x.mean == y.mean && x.upper == y.upper && x.likely == y.likely);
        assert_int_equal(x.learned, y.learned);
        assert_int_equal(x.evidence, y.evidence);
    }
}

/* A forecaster fed under a clock an hour behind, then shifted by the hour
 * (the wall clock's step), is the one fed under the right clock, byte for
 * byte: its seasonal indices, plan rings, recent seasons' peaks and phase
 * bins moved with their buckets. */
static void test_shift(void **state)
{
    (void)state;
    struct forecast_config cfg;
    forecast_config_init(&cfg);
    const int64_t hour = 3600 * 1000, n = 3 * DAY_MIN + 100;
    struct forecast *right = forecast_new(&cfg), *behind = forecast_new(&cfg);
    feed_days(right, T0, n);
    feed_days(behind, T0 - hour, n);
    int64_t now = T0 + (n - 1) * MIN_MS;
    assert_int_equal(forecast_last_ms(behind), now - hour);
    assert_int_equal(forecast_shift(behind, hour), 0);
    assert_int_equal(forecast_last_ms(behind), now);
    serialize_cmp(right, behind);
    assert_same_predictions(right, behind, now);
    for (int64_t i = 1; i <= 30; i++) { /* and on from there alike */
        assert_int_equal(forecast_observe(right, now + i * MIN_MS, 150.0), 0);
        assert_int_equal(forecast_observe(behind, now + i * MIN_MS, 150.0), 0);
    }
    serialize_cmp(right, behind);
    assert_same_predictions(right, behind, now + 30 * MIN_MS);
    /* back by the hour and forward again: the same forecaster */
    assert_int_equal(forecast_shift(behind, -hour), 0);
    assert_int_equal(forecast_shift(behind, hour), 0);
    serialize_cmp(right, behind);

    /* before time 0 (its first bucket would be): refused, nothing moved */
    uint8_t *before, *after;
    size_t nb, na;
    forecast_serialize(behind, &before, &nb);
    assert_int_equal(forecast_shift(behind, -T0 - MIN_MS), -ERANGE);
    assert_int_equal(forecast_shift(behind, INT64_MAX), -ERANGE);
    forecast_serialize(behind, &after, &na);
    assert_int_equal(na, nb);
    assert_memory_equal(before, after, nb);
    xfree(before);
    xfree(after);
    assert_int_equal(forecast_shift(NULL, hour), -EINVAL);
    forecast_free(right);
    forecast_free(behind);

    /* nothing observed: nothing to move */
    struct forecast *e = forecast_new(&cfg);
    assert_int_equal(forecast_shift(e, -hour), 0);
    assert_int_equal(forecast_last_ms(e), -1);
    assert_int_equal(forecast_last_ms(NULL), -1);
    forecast_free(e);

    /* a season that is no whole number of phase bins (60 buckets for 24),
     * shifted by an odd number of buckets and a fraction: the state it
     * becomes is one a checkpoint restores, and it plans on */
    struct forecast_config sc = small_cfg();
    const int64_t shifts[] = {7300, -7300, 61500, -1, 999, 3 * 60000 + 17};
    for (size_t k = 0; k < UTIL_ARRAY_LEN(shifts); k++) {
        for (int64_t len = 50; len <= 200; len += 150) { /* warm-up, Holt-Winters */
            struct forecast *f = forecast_new(&sc);
            feed_small(f, 6007, 6007 + len);
            assert_int_equal(forecast_shift(f, shifts[k]), 0);
            uint8_t *buf;
            size_t blen;
            char err[200];
            forecast_serialize(f, &buf, &blen);
            struct forecast *g = forecast_deserialize(&sc, buf, blen, err, sizeof(err));
            if (!g)
                fail_msg("shift %lld of %lld buckets: %s", (long long)shifts[k], (long long)len,
                         err);
            serialize_cmp(f, g);
            int64_t t = forecast_last_ms(f);
            assert_int_equal(t, (6007 + len - 1) * 1000 + shifts[k]);
            struct forecast_result r;
            assert_int_equal(forecast_predict(f, t, 5000, &r), 0);
            assert_true(isfinite(r.upper) && r.upper >= r.mean);
            feed_small(f, t / 1000 + 1, t / 1000 + 90);
            assert_int_equal(forecast_predict(f, (t / 1000 + 89) * 1000, 5000, &r), 0);
            assert_true(isfinite(r.upper) && r.upper >= r.mean && r.mean > 50);
            xfree(buf);
            forecast_free(g);
            forecast_free(f);
        }
    }
}

/* A state saved by a replica whose clock ran an hour ahead: every
 * observation at this clock's times is refused with -ETIME (not the
 * -EINVAL of jitter within a bucket), leaving it as it was; its newest
 * observation tells the caller, who refuses such a state at restore, or
 * shifts it back. */
static void test_state_from_the_future(void **state)
{
    (void)state;
    struct forecast_config cfg;
    forecast_config_init(&cfg);
    const int64_t hour = 3600 * 1000;
    struct forecast *f = forecast_new(&cfg);
    feed_days(f, T0 + hour, 600); /* the saver's clock */
    int64_t now = T0 + 600 * MIN_MS; /* the real time, a minute after the last */
    uint8_t *buf, *again;
    size_t len, alen;
    char err[200];
    forecast_serialize(f, &buf, &len);
    forecast_free(f);
    f = forecast_deserialize(&cfg, buf, len, err, sizeof(err));
    assert_non_null(f);
    assert_true(forecast_last_ms(f) > now + cfg.bucket_ms); /* what a restore checks */
    for (int64_t i = 0; i < 30; i++)
        assert_int_equal(forecast_observe(f, now + i * MIN_MS, 120.0), -ETIME);
    forecast_serialize(f, &again, &alen);
    assert_int_equal(alen, len);
    assert_memory_equal(again, buf, len);
    xfree(again);
    /* shifted to this clock, it observes again */
    assert_int_equal(forecast_shift(f, -hour), 0);
    assert_true(forecast_last_ms(f) < now);
    assert_int_equal(forecast_observe(f, now, 120.0), 0);
    struct forecast_result r;
    assert_int_equal(forecast_predict(f, now, 195000, &r), 0);
    assert_true(r.mean > 0 && r.upper >= r.mean);
    xfree(buf);
    forecast_free(f);
}

/* A minute in seven without an observation (a scrape failing now and
 * then): windows of 8 buckets never resolve, those of 4 do, and a look-ahead
 * of 300 s lies between them. The recent peaks' plan (about 25 req/s with a
 * 1000 req/s burst in one tick of 400) is the 4-bucket windows' quantile,
 * not the highest burst seen: interpolated towards the 8-bucket windows'
 * NaN quantile, it was NaN and cut to that peak (4099 of 4099 such plans). */
static void test_gappy_longer_window(void **state)
{
    (void)state;
    struct forecast_config cfg;
    forecast_config_init(&cfg);
    struct forecast *f = forecast_new(&cfg);
    uint64_t rs = 777;
    int from_recent = 0, at_max = 0;
    for (int i = 0; i < 4 * 1500; i++) {
        int64_t now = T0 + i * 15000LL;
        if ((i / 4) % 7 == 6)
            continue;
        rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
        double rate = (rs >> 33) % 400 == 0 ? 1000 : 20 + (double)((rs >> 40) % 10);
        assert_int_equal(forecast_observe(f, now, rate), 0);
        struct forecast_result r;
        if (i > 4 * 120 && forecast_predict(f, now, 300000, &r) == 0 && r.from_recent) {
            from_recent++;
            at_max += r.upper >= r.observed_max * 0.999;
            assert_true(isfinite(r.upper) && isfinite(r.likely));
        }
    }
    print_message("recent peaks' plans %d, at the highest peak seen %d\n", from_recent, at_max);
    assert_true(from_recent > 1000);
    assert_true(at_max * 4 < from_recent);
    forecast_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gap_work_bounded), cmocka_unit_test(test_gappy_longer_window),
        cmocka_unit_test(test_shift),
        cmocka_unit_test(test_state_from_the_future),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

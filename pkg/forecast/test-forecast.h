/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the forecast module's unit tests (test-forecast.c,
 * test-forecast-state.c): a seeded LCG, the synthetic daily and small
 * shapes, and a comparison of two forecasters' serialised states. */
#ifndef GPUSCALER_TEST_FORECAST_H
#define GPUSCALER_TEST_FORECAST_H

#include <math.h>
#include <stdint.h>

#include "forecast/forecast.h"
#include "util/util.h"

#define MIN_MS 60000LL
#define DAY_MIN 1440
/* 2026-01-05T00:00:00Z */
#define T0 1767571200000LL

#define assert_near(a, b, eps)                                                               \
    do {                                                                                     \
        double a_ = (a), b_ = (b);                                                           \
        if (!(fabs(a_ - b_) <= (eps)))                                                       \
            fail_msg("%s = %.9g, want %.9g +- %g", #a, a_, b_, (double)(eps));               \
    } while (0)

struct lcg {
    uint64_t s;
};

/* uniform in [0, 1) */
static inline double lcg_next(struct lcg *g)
{
    g->s = g->s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(g->s >> 11) * (1.0 / 9007199254740992.0);
}

/* The daily shape: 100 req/s with a gentle daily swing, 3x from 16:00 to
 * 18:00 UTC. */
static inline double daily_shape(int64_t minute_of_day)
{
    double base = 100.0 + 20.0 * sin(2.0 * M_PI * (double)(minute_of_day - 360) / DAY_MIN);
    if (minute_of_day >= 16 * 60 && minute_of_day < 18 * 60)
        return 3.0 * base;
    return base;
}

static inline struct forecast_config small_cfg(void)
{
    struct forecast_config c;
    forecast_config_init(&c);
    c.bucket_ms = 1000;
    c.season_ms = 60000; /* m = 60 */
    return c;
}

/* Small config: 10 peak buckets of 300 per 60-bucket season, else 100. */
static inline double small_shape(int64_t bucket)
{
    int64_t p = bucket % 60;
    return p >= 40 && p < 50 ? 300.0 : 100.0;
}

static inline void feed_small(struct forecast *f, int64_t from_bucket, int64_t to_bucket)
{
    for (int64_t b = from_bucket; b < to_bucket; b++)
        assert_int_equal(forecast_observe(f, b * 1000, small_shape(b)), 0);
}

static inline void serialize_cmp(const struct forecast *a, const struct forecast *b)
{
    uint8_t *x, *y;
    size_t nx, ny;
    forecast_serialize(a, &x, &nx);
    forecast_serialize(b, &y, &ny);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx);
    xfree(x);
    xfree(y);
}

#endif

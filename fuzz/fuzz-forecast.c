/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the forecaster's arithmetic: any sequence of
 * observations (short, ramped, gappy, spiky, zero) must give finite plans
 * with upper >= mean >= 0, never above ten times the highest observation
 * (plus the floor): the plan is bounded by the history it saw. The state
 * must round-trip through the codec byte for byte at every 16th step, and
 * one observation closes at most two seasons of buckets one by one,
 * whatever the gap before it.
 *
 * Input: byte 0 picks the config (bits 0-1: default 1 min / 24 h; 1 s / 60 s;
 * 1 s / 4 s; 1 min / 1 h; bit 2 the rate floor, 8 or 0.1; bits 3-4 the
 * quantile, 0.9, 0.6, 0.95 or 0.99; bit 5 a season of a week of minutes,
 * 10,080 buckets, in place of bits 0-1's), then 3-byte records: a time step
 * (byte 0: the low 6 bits scaled by bits 6-7 to ms, s, min or hours) and a
 * rate (bytes 1-2 as a log-scale value from 0 to ~1e6 req/s, 0 = zero). A
 * week's input stops once 60,000 buckets have been closed one by one (up
 * to 3,780 a record: the fuzzer's time limit is 10 s). The seed corpus is
 * in fuzz/corpus/forecast/. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fcshape.h"
#include "forecast/forecast-int.h" /* walked: the buckets closed one by one */
#include "forecast/forecast.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct forecast *f, int64_t now, double max_seen, double floor_)
{
    static const int64_t horizons[] = {0, 15000, 195000, 11 * 60000, 3600000};
    for (size_t i = 0; i < sizeof(horizons) / sizeof(horizons[0]); i++) {
        struct forecast_result r;
        int rc = forecast_predict(f, now, horizons[i], &r);
        if (rc == -ENODATA)
            continue;
        if (rc != 0)
            abort();
        if (!isfinite(r.mean) || !isfinite(r.upper) || r.mean < 0 || r.upper < r.mean)
            abort();
        if (r.upper > (max_seen + floor_) * 10 * 1.0001 + 1e-9)
            abort();
        if (r.trusted && r.evidence < FORECAST_MIN_EVIDENCE)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct forecast_config cfg;
    forecast_config_init(&cfg);
    fuzz_forecast_shape(&cfg, data[0]);
    if (data[0] & 32)
        fuzz_forecast_weekly(&cfg);
    fuzz_forecast_quantile(&cfg, data[0] >> 3);
    cfg.rate_floor = (data[0] & 4) ? 8 : 0.1;
    struct forecast *f = forecast_new(&cfg);
    if (!f)
        abort();
    const int64_t m = cfg.season_ms / cfg.bucket_ms;
    int64_t walked = 0; /* over the forecasters this input made (a restore starts at 0) */
    static const int64_t unit[] = {1, 1000, 60000, 3600000};
    int64_t now = 1700000000000LL;
    double max_seen = 0;
    for (size_t i = 1; i + 3 <= size; i += 3) {
        now += (int64_t)(data[i] & 63) * unit[data[i] >> 6];
        uint16_t raw = (uint16_t)(data[i + 1] | data[i + 2] << 8);
        double rate = raw == 0 ? 0 : exp((double)raw / 65535.0 * log(1e6 + 1)) - 1;
        uint32_t before = f->walked;
        int rc = forecast_observe(f, now, rate);
        if (rc != 0 && rc != -EINVAL)
            abort();
        if ((uint32_t)(f->walked - before) > 2 * m + 1)
            abort(); /* a gap walked bucket by bucket */
        walked += (uint32_t)(f->walked - before);
        if (rc == 0 && rate > max_seen)
            max_seen = rate;
        check(f, now, max_seen, cfg.rate_floor);
        if ((i / 3) % 16 == 0) {
            uint8_t *buf = NULL, *again = NULL;
            size_t len = 0, len2 = 0;
            forecast_serialize(f, &buf, &len);
            char err[200];
            struct forecast *g = forecast_deserialize(&cfg, buf, len, err, sizeof(err));
            if (!g)
                abort();
            forecast_serialize(g, &again, &len2);
            if (len2 != len || memcmp(buf, again, len) != 0)
                abort();
            forecast_free(f);
            f = g;
            xfree(buf);
            xfree(again);
        }
        if (m > 1440 && walked > 60000)
            break;
    }
    forecast_free(f);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the forecaster's fuzz targets: the bucket and season shapes an
 * input picks (the defaults, a 1 s bucket in a 60 s or a 4 s season, an hour's
 * season, so short inputs reach the seasonal model; a week of minutes, the
 * longest season a controller is configured with), and the quantile.
 * Header-only, because a fuzz target links nothing but its module and
 * standalone.c. */
#ifndef GPUSCALER_FUZZ_FCSHAPE_H
#define GPUSCALER_FUZZ_FCSHAPE_H

#include "forecast/forecast.h"

/* Sets cfg's bucket and season from the two low bits of sel. */
static inline void fuzz_forecast_shape(struct forecast_config *cfg, unsigned sel)
{
    switch (sel & 3) {
    case 1:
        cfg->bucket_ms = 1000;
        cfg->season_ms = 60000;
        break;
    case 2:
        cfg->bucket_ms = 1000;
        cfg->season_ms = 4000;
        break;
    case 3:
        cfg->season_ms = 3600 * 1000;
        break;
    default:
        break;
    }
}

/* A week of minutes: 10,080 buckets a season (a config may have 20,160),
 * past the 1,440 the recent seasons' ring is kept for. */
static inline void fuzz_forecast_weekly(struct forecast_config *cfg)
{
    cfg->bucket_ms = 60 * 1000;
    cfg->season_ms = 7 * 24 * 3600 * 1000LL;
}

/* Sets cfg's quantile from the two low bits of sel: the default 0.9, then
 * 0.6, 0.95 and 0.99 (the adaptive level's bounds are 0.5 and 0.999). */
static inline void fuzz_forecast_quantile(struct forecast_config *cfg, unsigned sel)
{
    static const double q[] = {0.9, 0.6, 0.95, 0.99};
    cfg->quantile = q[sel & 3];
}

#endif

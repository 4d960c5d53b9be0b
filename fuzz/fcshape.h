/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the forecaster's fuzz targets: the bucket and season shapes an
 * input picks (the defaults, a 1 s bucket in a 60 s or a 4 s season, an hour's
 * season), so short inputs reach the seasonal model. Header-only, because a
 * fuzz target links nothing but its module and standalone.c. */
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

#endif

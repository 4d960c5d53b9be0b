/* SPDX-License-Identifier: Apache-2.0 */
/* forecast internals shared by the model (forecast.c) and the state codec
 * (forecast-state.c); no other module includes this file.
 *
 * One struct forecast owns, besides itself, either the warm-up buffer (two
 * seasons of bucket values plus a bitmap of which were gap fills) or the
 * seasonal indices (one season), never both; the residual window is inline
 * and fixed in size. */
#ifndef GPUSCALER_FORECAST_INT_H
#define GPUSCALER_FORECAST_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "forecast.h"

/** Most buckets per season a config may ask for (two weeks of minutes). */
#define FC_MAX_SEASON_BUCKETS 20160
/** Number of recent one-step residuals kept for the quantile. */
#define FC_RES_WINDOW 1024
/** Relative residuals are clipped to +-this (and states with more are rejected). */
#define FC_RES_CLIP 1000.0
/** Level, trend, seasonal and buffered values are clamped to +-this. */
#define FC_STATE_MAX 1e15
/** Closed buckets needed before forecast_predict() answers. */
#define FC_MIN_BUCKETS 3

enum fc_kind { FC_WARMUP = 0, FC_HW = 1 };

struct forecast {
    struct forecast_config cfg;
    int64_t m;          /* buckets per season */
    enum fc_kind kind;
    int64_t seen;       /* closed buckets (observed and gap-filled) */
    int64_t cur;        /* index of the open bucket (valid when acc_n > 0) */
    int64_t last_ms;    /* time of the newest accepted observation */
    uint32_t acc_n;     /* observations in the open bucket; 0 = nothing seen yet */
    double acc_sum;     /* their sum */
    double level;
    double trend;
    double *buf;        /* FC_WARMUP: 2m closed bucket values, seen of them used */
    uint8_t *fill;      /* FC_WARMUP: bitmap, bit i set = buf[i] is a gap fill */
    double *season;     /* FC_HW: m additive seasonal indices, by bucket index mod m */
    uint32_t res_len;   /* residuals held, <= FC_RES_WINDOW */
    uint32_t res_pos;   /* ring position of the next write */
    float res[FC_RES_WINDOW];
    double res_q;       /* the configured quantile of res, kept current by fc_res_q_update */
    bool res_dirty;     /* res changed since res_q was computed */
};

/** Recompute res_q after the residual ring changed (once per closed bucket). */
void fc_res_q_update(struct forecast *f);

/** 0 when cfg is acceptable, else -EINVAL. Shared by new and deserialise. */
int fc_config_check(const struct forecast_config *cfg);

/** An empty forecaster for a checked cfg (the buffers of its kind allocated). */
struct forecast *fc_alloc(const struct forecast_config *cfg, enum fc_kind kind);

/** Bytes of the warm-up fill bitmap for n buffered buckets. */
static inline size_t fc_bitmap_len(int64_t n)
{
    return (size_t)((n + 7) / 8);
}

#endif

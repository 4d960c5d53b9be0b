/* SPDX-License-Identifier: Apache-2.0 */
/* forecast: predicts a workload's request rate one cold start ahead so that
 * capacity is ready before a daily peak arrives.
 *
 * Observations (any cadence) are averaged into fixed buckets (default 1 min).
 * Until two full seasons of buckets exist the model is Holt's linear trend;
 * then additive Holt-Winters with the configured season. Residuals of the
 * one-step-ahead bucket forecasts feed a running quantile estimate, and
 * forecast_predict() returns both the mean and an upper quantile; the policy
 * plans for the upper one.
 *
 * Pure: no I/O, no clock; time is passed in. Memory is bounded by the season
 * length (two seasons of buckets during warm-up, one season after), never by
 * history length. State serialises to a compact, versioned byte string for
 * checkpointing. */
#ifndef GPUSCALER_FORECAST_H
#define GPUSCALER_FORECAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct forecast_config {
    int64_t bucket_ms;  /**< bucket width, default 60 s */
    int64_t season_ms;  /**< seasonality, default 24 h; must be a multiple of bucket_ms */
    double alpha;       /**< level smoothing, default 0.3 */
    double beta;        /**< trend smoothing, default 0.02 */
    double gamma;       /**< seasonal smoothing, default 0.2 */
    double phi;         /**< trend damping, default 0.98; must be in (0, 1] */
    double quantile;    /**< upper quantile planned for, default 0.9 */
};

/** Fill cfg with the defaults above. */
void forecast_config_init(struct forecast_config *cfg);

/** Largest rate forecast_observe() accepts (req/s); keeps the state finite. */
#define FORECAST_MAX_RATE 1e12

struct forecast;

/**
 * Create a forecaster. Returns NULL (and no allocation) if cfg is invalid:
 * bucket_ms <= 0, season not a multiple of bucket, more than 20160 buckets
 * per season, smoothing factors outside (0, 1), quantile outside (0.5, 1).
 * Also invalid: cfg NULL, season_ms <= 0, fewer than 2 buckets per season,
 * phi outside (0, 1]. The caller keeps cfg (it is copied). Release the
 * result with forecast_free().
 */
struct forecast *forecast_new(const struct forecast_config *cfg);
/** Release f and everything it holds; NULL is a no-op. */
void forecast_free(struct forecast *f);

/**
 * Add one observation of the request rate (req/s) at time now_ms. Times must
 * not go backwards (older ones are ignored, returns -EINVAL); NaN or negative
 * rates are ignored (-EINVAL). A gap of missing buckets is filled with the
 * model's own forecast so seasonality stays aligned.
 *
 * Also -EINVAL: f NULL, now_ms < 0 (times are UNIX ms), rate infinite or
 * above FORECAST_MAX_RATE. -ERANGE if one bucket already holds 2^32 - 1
 * observations. Observations with equal times are accepted. The season's
 * phases follow the clock (bucket index floor(now_ms / bucket_ms) mod
 * buckets-per-season), not the time of the first observation. On any error
 * f is unchanged.
 */
int forecast_observe(struct forecast *f, int64_t now_ms, double rate);

enum forecast_method { FORECAST_NONE, FORECAST_HOLT, FORECAST_HOLT_WINTERS };

struct forecast_result {
    enum forecast_method method;
    double mean;    /**< expected rate at now + horizon (req/s, >= 0) */
    double upper;   /**< the configured upper quantile (>= mean) */
    int64_t buckets_seen;
};

/**
 * Forecast the rate at now_ms + horizon_ms. Returns -ENODATA until at least a
 * few buckets have been seen (method FORECAST_NONE), else 0.
 *
 * "A few" is 3 closed buckets (buckets_seen counts closed buckets, observed
 * or gap-filled). The open bucket is taken into account without changing f.
 * -EINVAL (out zeroed, method FORECAST_NONE) for f or out NULL, now_ms < 0,
 * horizon_ms < 0 or a sum that overflows. How mean and upper are computed is
 * described at the top of forecast.c.
 */
int forecast_predict(const struct forecast *f, int64_t now_ms, int64_t horizon_ms,
                     struct forecast_result *out);

const char *forecast_method_name(enum forecast_method m);

/**
 * Serialise into a newly allocated buffer (*out, caller frees with xfree) of
 * *outlen bytes. Deserialise returns a new forecaster or NULL when the bytes
 * are malformed, truncated, of another version or of a different config
 * (bucket or season), with a reason in err.
 *
 * The format (see forecast-state.c) is checksummed and holds neither the
 * smoothing factors nor the quantile: those come from cfg, which must pass
 * forecast_new()'s checks. err may be NULL; it is always NUL-terminated when
 * errlen > 0. buf is only read. An accepted buffer is canonical: serialising
 * the result reproduces it byte for byte.
 */
void forecast_serialize(const struct forecast *f, uint8_t **out, size_t *outlen);
struct forecast *forecast_deserialize(const struct forecast_config *cfg, const uint8_t *buf,
                                      size_t len, char *err, size_t errlen);

/** Bytes of memory held by f (for the bounded-memory test and metrics). */
size_t forecast_memory(const struct forecast *f);

#endif

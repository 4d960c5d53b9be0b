/* SPDX-License-Identifier: Apache-2.0 */
/* forecast: plans a workload's peak request rate over the next cold start,
 * with an upper bound whose coverage is measured, so that capacity is ready
 * before load arrives and no more is held than the evidence supports.
 *
 * Observations (the controller's short-window request rate, any cadence)
 * are collected into fixed buckets (default 1 min); each bucket keeps its
 * mean and its peak. The model works on z = ln(rate + floor), where traffic
 * varies multiplicatively and errors have a similar size at peaks and
 * troughs: Holt's damped level until two full seasons exist, then additive
 * damped Holt-Winters (a multiplicative season in rate terms).
 *
 * The plan for [now, now + horizon] is the highest point forecast over that
 * window plus a quantile of past "window residuals": for every past bucket,
 * the realised peak over the window that started there minus the highest
 * point forecast made for it (the plan at the median of the residuals is the
 * "likely" peak, at the quantile the "upper" one). Residuals are kept per
 * phase of the season
 * (24 bins) and per window length (1, 2, 4, 8 and 16 buckets), so troughs
 * and peaks, and short and long look-aheads, are calibrated separately.
 * A second plan needs no model: the same quantile of the realised peaks of
 * the last 48 windows of each length. Both are scored on every resolved
 * window by the quantile (pinball) loss at the planned level, and the plan
 * used is the second one while its moving loss is the lower and its own
 * miss rate within 1 - quantile: on/off bursts, where residuals from an idle
 * base are as large as the bursts, plan for a typical burst, not the
 * largest seen. A floor under both: the upper median of the peaks the last
 * 7 seasons had around the same buckets, each scaled by today's level over
 * that season's (a spike that recurs at the same time on most days; the
 * recent seasons' plan). The forecaster also scores the plans it made once they
 * resolve (coverage), and a plan is not `trusted` until enough residuals
 * back it.
 *
 * Pure: no I/O, no clock; time is passed in. Memory is bounded by the season
 * length (during warm-up the buckets closed so far, up to two seasons of them
 * at 4 bytes and a bit each; one season of float indices after; a fixed
 * 15.9 KB of residual stores, window peaks and plan rings; 7 seasons and 30
 * buckets of bucket peaks at 2 bytes each, for seasons of at most 1,440
 * buckets), never by history
 * length. State serialises to a compact, versioned byte
 * string for checkpointing. docs/policy.md has the math. */
#ifndef GPUSCALER_FORECAST_H
#define GPUSCALER_FORECAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct forecast_config {
    int64_t bucket_ms;  /**< bucket width, default 60 s */
    int64_t season_ms;  /**< seasonality, default 24 h; must be a multiple of bucket_ms */
    double alpha;       /**< level smoothing, default 0.3 */
    double beta;        /**< trend smoothing (Holt-Winters only), default 0.02 */
    double gamma;       /**< seasonal smoothing, default 0.2 */
    double phi;         /**< trend damping, default 0.98; must be in (0, 1] */
    double quantile;    /**< quantile of the window residuals planned for, default 0.9 */
    double rate_floor;  /**< req/s added before the log (keeps zero finite), default 0.1 */
};

/** Fill cfg with the defaults above. */
void forecast_config_init(struct forecast_config *cfg);

/** Largest rate forecast_observe() accepts (req/s); keeps the state finite. */
#define FORECAST_MAX_RATE 1e12

/** Longest look-ahead window the residuals cover, in buckets (16 min at 1 min). */
#define FORECAST_MAX_WINDOW 16

/** Window residuals behind a plan before it is trusted. */
#define FORECAST_MIN_EVIDENCE 10

struct forecast;

/**
 * Create a forecaster. Returns NULL (and no allocation) if cfg is invalid:
 * cfg NULL, bucket_ms <= 0, season_ms <= 0, season not a multiple of bucket,
 * fewer than 2 or more than 20160 buckets per season, alpha/beta/gamma
 * outside (0, 1), phi outside (0, 1], quantile outside (0.5, 1), rate_floor
 * not in (0, 1e6]. The caller keeps cfg (it is copied). Release the result
 * with forecast_free().
 */
struct forecast *forecast_new(const struct forecast_config *cfg);

/**
 * How much history a forecaster of this (valid) configuration needs before
 * every stage can plan: two seasons for Holt-Winters and, where the recent
 * seasons' plan exists (seasons of at most 1440 buckets), its 7 seasons and
 * the level's buckets before them. What a seed should cover (the learned
 * plan aside, which learns as it goes). 0 for an invalid cfg.
 */
int64_t forecast_history_ms(const struct forecast_config *cfg);

/** Release f and everything it holds; NULL is a no-op. */
void forecast_free(struct forecast *f);

/**
 * Add one observation of the request rate (req/s) at time now_ms. Times must
 * not go backwards: an older one is ignored, with -EINVAL when it lies
 * within a bucket width of the newest observation (jitter), and -ETIME when
 * it lies further back: the caller's clock is behind the forecaster's (a
 * state saved under a clock that ran ahead, a wall clock stepped back), and
 * every observation will be refused until it catches up; the caller moves
 * the forecaster's times with forecast_shift() or starts a new one. A gap of
 * missing buckets is filled with the model's own forecast so seasonality
 * stays aligned; gap buckets record no residual and resolve no plan. A gap
 * of two seasons or more during warm-up starts the model afresh from this
 * observation (it keeps what it calibrated: residuals, window peaks, the
 * learned plan's fits); a gap of more than a season after it is applied in
 * closed form but for its last season. So one call closes at most two
 * seasons of buckets, whatever now_ms.
 *
 * Also -EINVAL: f NULL, now_ms < 0 (times are UNIX ms), rate NaN, negative,
 * infinite or above FORECAST_MAX_RATE. -ERANGE if one bucket already holds
 * 2^32 - 1 observations. Observations with equal times are accepted. The
 * season's phases follow the clock (bucket index floor(now_ms / bucket_ms)
 * mod buckets-per-season), not the time of the first observation. On any
 * error f is unchanged.
 */
int forecast_observe(struct forecast *f, int64_t now_ms, double rate);

/**
 * Time of the newest observation f accepted (UNIX ms), or -1 for f NULL or
 * a forecaster that has observed nothing. A caller restoring a state checks
 * it against its clock: a state whose newest observation lies ahead of now
 * (by more than a bucket, say) was saved under a clock that ran ahead, and
 * refuses every observation until now catches up (forecast_observe's
 * -ETIME).
 */
int64_t forecast_last_ms(const struct forecast *f);

/**
 * Move every time f holds by delta_ms (positive: later), as a wall clock set
 * forward or back by that much more than the time that passed: the newest
 * observation's time, and every bucket by as many buckets as the open one
 * moved, with what is kept per bucket and per phase of the season (the
 * seasonal indices, the plan rings, the recent seasons' peaks; the residual
 * stores by the nearest whole phase bin of the 24). Then observations at
 * the new clock's times are accepted. Returns 0 (also for a forecaster that
 * has observed nothing: nothing to move), -EINVAL for f NULL, -ERANGE
 * (f unchanged) when a time would fall before 0 or past INT64_MAX; the
 * caller then starts a new forecaster.
 */
int forecast_shift(struct forecast *f, int64_t delta_ms);

enum forecast_method { FORECAST_NONE, FORECAST_HOLT, FORECAST_HOLT_WINTERS };

struct forecast_result {
    enum forecast_method method;
    double mean;         /**< point forecast of the bucket holding now + horizon (req/s) */
    double upper;        /**< planned peak over [now, now + horizon] at the quantile (>= 0) */
    double likely;       /**< the same at the median: the likely peak (at most the higher
                              of upper and upper_model: with the learned plan it may be
                              above upper) */
    double observed_max; /**< highest bucket peak seen in the last season (req/s) */
    bool trusted;        /**< at least FORECAST_MIN_EVIDENCE residuals back `upper` */
    bool seasonal;       /**< Holt-Winters (two seasons seen); false: level only */
    bool from_recent;    /**< upper and likely are the recent window peaks' quantiles */
    bool learned;        /**< upper is the learned plan (a quantile regression on both) */
    double upper_model;  /**< the model's or the recent peaks' upper plan (= upper unless
                              learned); likely is at most the higher of the two */
    double seasons;      /**< the recent seasons' plan (req/s), a floor under all three
                              plans; 0 while there is none */
    bool from_seasons;   /**< the recent seasons' plan raised the likely peak */
    int64_t buckets_seen;
    int64_t evidence;    /**< residuals behind the quantile */
    double coverage;     /**< share of resolved plans of this window length that held */
    int64_t coverage_n;  /**< how many resolved */
    double margin;       /**< their mean plan / realised peak - 1 (the price of coverage) */
};

/**
 * Plan for [now_ms, now_ms + horizon_ms]. The model state is the one at the
 * end of the last closed bucket (the open bucket is not folded in: the plan
 * is the one its residuals were measured for). Windows longer than
 * FORECAST_MAX_WINDOW buckets use that window's residuals, and the short-term
 * momentum is not extrapolated beyond it. The base is the highest point
 * forecast over every bucket the window touches; the residual quantile is
 * the one of a window of horizon_ms / bucket_ms buckets (at least 1),
 * interpolated between the measured window lengths (or, when it plans
 * better, the quantile of the recent window peaks, from_recent). Both `mean`
 * and `upper` are bounded
 * by the highest peak of the last season times the growth new highs have
 * shown (at most 10x), and by FORECAST_MAX_RATE. Returns -ENODATA
 * until FC_MIN_BUCKETS buckets have closed (method FORECAST_NONE), else 0.
 * -EINVAL (out zeroed, method FORECAST_NONE) for f or out NULL, now_ms < 0,
 * horizon_ms < 0 or a sum that overflows. It changes none of f's state, but
 * keeps a cache inside f (the recent seasons' levels of the last closed
 * bucket), so one forecaster is not predicted from two threads at once.
 */
int forecast_predict(const struct forecast *f, int64_t now_ms, int64_t horizon_ms,
                     struct forecast_result *out);

const char *forecast_method_name(enum forecast_method m);

/**
 * Serialise into a newly allocated buffer (*out, caller frees with xfree) of
 * *outlen bytes. Deserialise returns a new forecaster or NULL when the bytes
 * are malformed, truncated, of another version or of a different config
 * (bucket, season or rate floor), or hold a value the forecaster never
 * produces (a log-space value past the bounds its rate floor sets, a first
 * planned bucket before the third), with a reason in err.
 *
 * The format (see forecast-state.c) is checksummed and does not hold the
 * smoothing factors: those come from cfg, which must pass forecast_new()'s
 * checks. It holds the quantile the state was calibrated for (version 7):
 * a state of another quantile than cfg's is accepted with what depends on
 * the quantile started afresh at cfg's (the adaptive levels, the plans'
 * losses and coverage, the plans in flight, the learned plan's fits and
 * shifts), and err says so ("ok; ..."). Earlier versions are taken to be of
 * cfg's quantile. err may be NULL; it is always NUL-terminated when errlen
 * > 0, "ok" after a plain success. buf is only read. An accepted plain
 * buffer of cfg's quantile is canonical: serialising the result reproduces
 * it byte for byte.
 */
void forecast_serialize(const struct forecast *f, uint8_t **out, size_t *outlen);

/**
 * The same state packed for a checkpoint: "GSFZ", the state's length (u32,
 * little-endian) and one zlib stream of it (pack.c). forecast_deserialize()
 * reads both forms; a packed one must inflate to exactly the length it
 * declares, at most the longest state cfg admits, and hold a plain state,
 * which is then checked as any other (its bytes are canonical, the packing
 * need not be). Caller frees *out with xfree.
 */
void forecast_serialize_packed(const struct forecast *f, uint8_t **out, size_t *outlen);
struct forecast *forecast_deserialize(const struct forecast_config *cfg, const uint8_t *buf,
                                      size_t len, char *err, size_t errlen);

/**
 * forecast_deserialize(), but with the state's rate floor instead of cfg's
 * (which must still pass forecast_new()'s checks, as the state's must): a
 * forecaster keeps the floor it was made with when the capacity that sets
 * it changes, across a checkpoint too.
 */
struct forecast *forecast_deserialize_own_floor(const struct forecast_config *cfg,
                                                const uint8_t *buf, size_t len, char *err,
                                                size_t errlen);

/** The rate floor f was made with (NAN for NULL). */
double forecast_rate_floor(const struct forecast *f);

/** Bytes of memory held by f (for the bounded-memory test and metrics). */
size_t forecast_memory(const struct forecast *f);

#endif

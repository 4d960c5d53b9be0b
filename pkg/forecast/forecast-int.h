/* SPDX-License-Identifier: Apache-2.0 */
/* forecast internals shared by the model (forecast.c), the plan bookkeeping
 * (plan.c), the learned plan (learn.c), the recent seasons' plan
 * (seasons.c) and the state codec (forecast-state.c); no other module
 * includes this file.
 *
 * One struct forecast owns, besides itself, either the warm-up buffer (the
 * closed buckets' values in log space as 16-bit steps, their peaks and a
 * bitmap of which were gap fills; grown as buckets close, up to two seasons:
 * 4 bytes and a bit per bucket) or the seasonal
 * indices (one season), never both; the recent seasons' ring of bucket
 * peaks (7 seasons and 30 buckets, allocated with the forecaster, none for
 * seasons past FC_SEASONS_MAX_M buckets) and, with it, the cache of its
 * levels that forecast_predict fills (struct fc_levels); the learned plan's
 * rows; the residual store and the plan rings are inline and fixed in
 * size. */
#ifndef GPUSCALER_FORECAST_INT_H
#define GPUSCALER_FORECAST_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "forecast.h"

/** Most buckets per season a config may ask for (two weeks of minutes). */
#define FC_MAX_SEASON_BUCKETS 20160
/** Bound (log space) of the learned plan's coefficients, and of the values
 *  of a version 2 state's buffer. */
#define FC_STATE_MAX 1e4
/** How far (log) the model's level, its last bucket's value and the plans'
 *  base may lie beyond the logs of the rates a config admits, [ln(floor),
 *  ln(FORECAST_MAX_RATE + floor)] (fc_buf_scale): room for a damped trend that
 *  runs on through a gap, 20 nats (a factor of 5e8) past the rates ever
 *  observed; past it the model is clamped, so a state is within bounds a
 *  decoder can check. The residual stores saturate at 16.4 (int16 /
 *  FC_RES_SCALE), so a base clamped this far out leaves every residual as it
 *  was. */
#define FC_Z_MARGIN 20.0
/** Closed buckets needed before forecast_predict() answers. */
#define FC_MIN_BUCKETS 3
/** Phase bins of the season the residuals are kept in. */
#define FC_PHASES 24
/** Window lengths (buckets) residuals are kept for: 1, 2, 4, 8, 16. */
#define FC_HORIZONS 5
/** Residuals kept per (phase bin, window length). */
#define FC_RES_PER_BIN 48
/** Realised window peaks kept per window length (the recent peaks' plan). */
#define FC_WPEAKS 48
/** Residuals are stored as int16 in units of 1/FC_RES_SCALE (log space). */
#define FC_RES_SCALE 2000.0
/** Ring of the newest buckets' peaks and of the plans made at their start. */
#define FC_RING FORECAST_MAX_WINDOW
#define FC_PHI_TABLE (4 * FORECAST_MAX_WINDOW + 2)
/** Step of the adaptive quantile level per resolved plan. A burst no plan
 *  foresaw is missed by every overlapping window that holds it (about ten
 *  in a row); at 0.0025 such a run moves the level by about 0.02, not 0.04
 *  (docs/policy.md, section 5). */
#define FC_ACI_GAMMA 0.0025
/** Weight of a resolved plan in the moving quantile loss of a plan kind
 *  and in the recent plan's miss rate: the last ten or so windows decide
 *  which plan is used (docs/policy.md, section 5). */
#define FC_LOSS_ALPHA 0.1
/** Bounds of the adaptive quantile level. */
#define FC_LEVEL_MIN 0.5
#define FC_LEVEL_MAX 0.999
/** A plan never exceeds this many times the highest peak of the last season
 *  (in the floored rate, ln(rate + floor)). */
#define FC_MAX_GROWTH 10.0
/** Closed buckets the short-term momentum is fitted to. */
#define FC_MOMENTUM_BUCKETS 4
/** Steepest rise the momentum follows, as a share of the rate a minute: a
 *  daily ramp rises a few % a minute, and four rising bucket means whose
 *  line is steeper end in a burst's bucket, which it would extrapolate as a
 *  ramp for the whole window (on 8 bursts an hour: a base of 3,099 req/s
 *  after a burst, where 220 arrived). The same bound as the demand's ramp
 *  (POLICY_TREND_MAX_PER_MIN; docs/policy.md, section 5). */
#define FC_MOMENTUM_MAX_PER_MIN 0.05
/** The recent seasons' plan (seasons.c): seasons back it looks at, buckets
 *  its level is measured over, buckets either side of the look-ahead it
 *  takes each season's peak over, seasons that must offer one, the bound of
 *  the level ratio, and the longest season (in buckets) it is kept for: a
 *  day of minutes, so its ring is at most 10,110 buckets (19.7 KB). */
#define FC_SEASONS 7
#define FC_SEASONS_LEVEL 30
#define FC_SEASONS_PAD 2
#define FC_SEASONS_MIN 4
#define FC_SEASONS_RATIO_MAX 5.0
#define FC_SEASONS_MAX_M 1440

/** The recent seasons' levels at bucket b - d m, d = 0..FC_SEASONS, as the
 *  plan last computed them (b = FC_NONE: none). Not state: a forecaster
 *  planning a bucket 4 times at 15 s ticks computes them once, and one only
 *  observing (a seed) never. */
struct fc_levels {
    int64_t b;
    double lvl[FC_SEASONS + 1];
};

/** Bucket index of "no bucket". */
#define FC_NONE INT64_MIN
/** The learned plan (learn.c): coefficients (intercept and four features),
 *  resolved windows kept per window length, the rows before it is used,
 *  the rows between refits, IRLS passes of a first fit and of a refit (from
 *  the last fit), and the floor of its weights. */
#define FC_LEARN_NX 5
#define FC_LEARN_ROWS 1440
#define FC_LEARN_MIN 200
#define FC_LEARN_REFIT 60
#define FC_LEARN_ITERATIONS 30
#define FC_LEARN_REFIT_ITERATIONS 6
#define FC_LEARN_EPS 1e-4
/** Step of the learned plan's shift per resolved plan (log space), and its bound. */
#define FC_LEARN_GAMMA 0.01
#define FC_LEARN_SHIFT_MAX 2.0

enum fc_kind { FC_WARMUP = 0, FC_HW = 1 };

struct forecast {
    struct forecast_config cfg;
    int64_t m;          /* buckets per season */
    enum fc_kind kind;
    uint32_t walked;    /* buckets closed one by one (observed or filled) since made or
                           restored, wrapping: the work observations cost; not state
                           (tests and the fuzz targets bound it) */
    int64_t seen;       /* closed buckets (observed and gap-filled) */
    int64_t cur;        /* index of the open bucket (valid when acc_n > 0) */
    int64_t last_ms;    /* time of the newest accepted observation */
    uint32_t acc_n;     /* observations in the open bucket; 0 = nothing seen yet */
    double acc_sum;     /* their sum (req/s) */
    double acc_max;     /* their largest (req/s) */
    double level;       /* log space */
    double zlast;       /* the last closed bucket's mean (log; the model's fill for a gap) */
    double trend;
    /* Bounds (log space) of what the model holds, from the rate floor
     * (fc_buf_scale): the level, the last bucket's value and the plans'
     * base within [llo, lhi], FC_Z_MARGIN beyond the logs of the rates a
     * config admits (fc_obs_lo, fc_obs_hi: every observed value, bucket
     * means and peaks, window peaks); |trend| <= lhi - llo, |seasonal
     * index| <= 2 (lhi - llo). */
    double llo, lhi;
    int64_t bcap;       /* FC_WARMUP: buckets buf, bpk and fill have room for (<= 2m) */
    double zbase;       /* log value of buf step 0 (fc_buf_value) */
    double zstep;       /* log value of one buf step */
    uint16_t *buf;      /* FC_WARMUP: closed bucket values (log, fc_buf_value), seen used */
    uint16_t *bpk;      /* FC_WARMUP: each one's peak above its mean (log x FC_RES_SCALE) */
    uint8_t *fill;      /* FC_WARMUP: bitmap, bit i set = buf[i] is a gap fill */
    float *season;      /* FC_HW: m additive seasonal indices (log), by bucket index mod m */
    uint16_t *seasons;  /* the recent seasons' bucket peaks (fc_buf_step; 0 = none), slot
                           b mod seasons_len; NULL when the season is too long */
    int64_t seasons_len;
    struct fc_levels *seasons_lvl;  /* with seasons: a cache the const plan fills (seasons.c) */

    /* Plans and their resolution (plan.c). Slot k of the rings belongs to
     * bucket k mod FC_RING. */
    int64_t origin_first;                /* first bucket a plan was made for, FC_NONE */
    float peak[FC_RING];                 /* realised peak of the bucket (log); NAN for a fill */
    float zmean[FC_RING];                /* the bucket's mean (log); NAN for a fill */
    float point[FC_RING][FC_HORIZONS];   /* highest point forecast over the window from it */
    float planned[FC_RING][FC_HORIZONS]; /* the plan made then (the chosen one) */
    float planned_m[FC_RING][FC_HORIZONS]; /* the model's plan: point + quantile */
    float planned_r[FC_RING][FC_HORIZONS]; /* the recent peaks' plan: their quantile */
    float wpeak[FC_HORIZONS][FC_WPEAKS]; /* realised window peaks (log), newest */
    uint8_t wpeak_len[FC_HORIZONS];
    uint8_t wpeak_pos[FC_HORIZONS];
    float loss[2][FC_HORIZONS];          /* EW quantile loss: model, recent peaks; NAN = none */
    float miss_r[FC_HORIZONS];           /* EW miss rate of the recent peaks' plans */
    uint16_t loss_n[FC_HORIZONS];        /* plans of both resolved */
    int16_t res[FC_PHASES][FC_HORIZONS][FC_RES_PER_BIN];
    uint8_t res_len[FC_PHASES][FC_HORIZONS];
    uint8_t res_pos[FC_PHASES][FC_HORIZONS];
    float binmax[FC_PHASES];             /* highest peak of each phase bin's last visit */
    bool binstale[FC_PHASES]; /* binmax is an earlier visit's: this one's buckets were gaps */
    /* The learned plan (learn.c); its rows are not checkpointed, its fits
     * and shifts are. */
    float learn_x[FC_RING][FC_HORIZONS][FC_LEARN_NX - 1]; /* features at the start; NAN = none */
    float planned_l[FC_RING][FC_HORIZONS];  /* the learned plan made then; NAN = none */
    int16_t *learn_rows[FC_HORIZONS];       /* FC_LEARN_ROWS x (features, target), or NULL */
    uint16_t learn_n[FC_HORIZONS];
    uint16_t learn_pos[FC_HORIZONS];
    uint16_t learn_since[FC_HORIZONS];      /* rows since the last fit */
    bool learn_ok[FC_HORIZONS];             /* learn_beta holds a fit */
    uint16_t learn_fit_n[FC_HORIZONS];      /* rows that fit used: a restored fit is not
                                               refitted on fewer new rows than that */
    float learn_beta[FC_HORIZONS][FC_LEARN_NX];
    float learn_shift[FC_PHASES][FC_HORIZONS]; /* adaptive shift per phase bin (log) */
    uint8_t *learn_want; /* FC_HORIZONS flags: a look-ahead asked for this window length
                            (set by forecast_predict through the const pointer; only
                            those are fitted) */
    float seenmax[FC_RING];              /* highest peak seen (last season), at the origin */
    int16_t growth[FC_HORIZONS][FC_RES_PER_BIN]; /* realised peak - seenmax at origin */
    uint8_t growth_len[FC_HORIZONS];
    uint8_t growth_pos[FC_HORIZONS];
    /* Ascending copies of the stores the plan's quantiles read (stores.c),
     * kept as values come and go, so a quantile is an index, not a selection.
     * Not checkpointed: fc_stores_sort() rebuilds them from the rings. */
    int16_t nb_sorted[FC_HORIZONS][3 * FC_RES_PER_BIN]; /* residuals of bins nb_bin +- 1 */
    uint16_t nb_n[FC_HORIZONS];
    int16_t nb_bin[FC_HORIZONS];                        /* centre of nb_sorted; -1 = none */
    int16_t growth_sorted[FC_HORIZONS][FC_RES_PER_BIN]; /* growth_len of them */
    float wpeak_sorted[FC_HORIZONS][FC_WPEAKS];         /* wpeak_len of them */
    float qlevel[FC_HORIZONS];           /* adaptive quantile level (plan.c) */
    uint32_t cov_n[FC_HORIZONS];         /* resolved plans */
    uint32_t cov_hit[FC_HORIZONS];       /* ... whose realised peak stayed within them */
    double cov_excess[FC_HORIZONS];      /* sum of plan - realised peak (log) over them */
    /* Cache: quantiles for the phase bin of q_bucket, recomputed when a bucket of
     * another bin opens or residuals, growth or levels changed (q_dirty): gap
     * buckets walked one by one change none of them. */
    int64_t q_bucket;
    bool q_dirty;
    /* phi_sum(phi, k) for k = 0..FC_PHI_TABLE-1, computed once: a plan's base
     * walks up to 4 x FORECAST_MAX_WINDOW steps, each a pow() otherwise */
    double phis[FC_PHI_TABLE];
    float q[FC_HORIZONS];
    float qm[FC_HORIZONS];               /* the same at the median level (the likely plan) */
    uint16_t q_n[FC_HORIZONS];
    float g[FC_HORIZONS];                /* quantile of growth at the adaptive level */
    float gm[FC_HORIZONS];               /* ... at the median level (the likely plan's) */
    float r[FC_HORIZONS];                /* quantile of the recent window peaks (log) */
    float rm[FC_HORIZONS];               /* ... at the median level */
    uint16_t g_n[FC_HORIZONS];
};

/** 0 when cfg is acceptable, else -EINVAL. Shared by new and deserialise. */
int fc_config_check(const struct forecast_config *cfg);

/** An empty forecaster for a checked cfg (the buffers of its kind allocated). */
struct forecast *fc_alloc(const struct forecast_config *cfg, enum fc_kind kind);

/** Make room in the warm-up buffer for n buckets (n <= 2m): grows by half
 *  its size (at least FC_BUF_STEP buckets), never past 2m; new fill bits 0. */
void fc_buf_reserve(struct forecast *f, int64_t n);

/** The warm-up buffer's values span the logs of the rates a config admits,
 *  [ln(rate_floor), ln(FORECAST_MAX_RATE + rate_floor)], with this much
 *  room on each side for gap fills (the model's own forecasts), in 65,535
 *  steps: 5.8e-4 with the default floor, so a value is within 0.03 % of the
 *  rate it stands for. */
#define FC_BUF_MARGIN 4.0

/** Set f->zbase and f->zstep, and the bounds llo and lhi, from
 *  f->cfg.rate_floor. */
void fc_buf_scale(struct forecast *f);

/** ln(rate_floor) and ln(FORECAST_MAX_RATE + rate_floor): the logs of the
 *  rates a config admits (to rounding). */
static inline double fc_obs_lo(const struct forecast *f)
{
    return f->llo + FC_Z_MARGIN;
}

static inline double fc_obs_hi(const struct forecast *f)
{
    return f->lhi - FC_Z_MARGIN;
}

/** The bounds of the trend and of the seasonal indices (fc_buf_scale). */
static inline double fc_trend_max(const struct forecast *f)
{
    return f->lhi - f->llo;
}

static inline double fc_season_max(const struct forecast *f)
{
    return 2 * (f->lhi - f->llo);
}

/** x clamped to [lo, hi]; NaN (never expected) to lo. */
static inline double fc_clamp(double x, double lo, double hi)
{
    return x > hi ? hi : x >= lo ? x : lo;
}

/** Buffered value i (log). */
/** The log value of step v (the warm-up buffer's and the recent seasons'). */
static inline double fc_step_value(const struct forecast *f, uint16_t v)
{
    return f->zbase + f->zstep * v;
}

static inline double fc_buf_value(const struct forecast *f, int64_t i)
{
    return fc_step_value(f, f->buf[i]);
}

/** The step nearest z (log), clamped to the span. */
uint16_t fc_buf_step(const struct forecast *f, double z);

/** Smallest growth of the warm-up buffer, in buckets. */
#define FC_BUF_STEP 64

/** Bytes of the warm-up fill bitmap for n buffered buckets. */
static inline size_t fc_bitmap_len(int64_t n)
{
    return (size_t)((n + 7) / 8);
}

/** Push residual e (log space) into a store of FC_RES_PER_BIN. */
/** A log-space value as int16 in units of 1/FC_RES_SCALE, saturated at
 *  +-INT16_MAX (the residual stores and the learned plan's rows). */
int16_t fc_res_encode(double e);
void fc_res_push(int16_t *ring, uint8_t *pos, uint8_t *len, double e);

/* stores.c: a value into a store and its sorted copy: a residual of phase
 * bin `bin`, a growth sample, a realised window peak (window length h). */
void fc_store_res(struct forecast *f, int bin, int h, double e);
void fc_store_growth(struct forecast *f, int h, double e);
void fc_store_wpeak(struct forecast *f, int h, float m);
/* f->nb_sorted[h] made the residuals of bins bin - 1 .. bin + 1, ascending. */
void fc_store_neighbourhood(struct forecast *f, int h, int bin);
/* The sorted copies made again from the rings (after a restore, or a warm-up
 * that rewrote the residuals). */
void fc_stores_sort(struct forecast *f);

/** Window length in buckets of horizon index h (1, 2, 4, 8, 16). */
static inline int64_t fc_window(int h)
{
    return (int64_t)1 << h;
}

/** Phase bin of bucket b. */
int fc_phase_bin(const struct forecast *f, int64_t b);

/** Point forecast (log space) of bucket `target`, `steps` (>= 1) buckets
 *  after the last one the model has seen. */
double fc_point(const struct forecast *f, int64_t target, int64_t steps);

/** The plan's base for the n buckets from `first` on, the model having seen
 *  bucket last_closed: the highest point forecast over them, and never below
 *  the last closed bucket's mean (a level that lags a ramp does not lower
 *  the plan); clamped to [llo, lhi]. */
double fc_base(const struct forecast *f, int64_t last_closed, int64_t first, int64_t n);

/** ln(rate + floor). */
double fc_log(const struct forecast *f, double rate);

/* ---- plan.c ---- */

/** Bucket b (the one just closed, log mean zmean and peak zpeak, both NAN
 *  for a gap fill): resolve the plans whose windows end with it and record
 *  their residuals. */
void fc_plan_close(struct forecast *f, int64_t b, double zmean, double zpeak);

/** Slope (log per bucket) of the last FC_MOMENTUM_BUCKETS closed bucket
 *  means through bucket last_closed (least squares), 0 when any is a gap or they
 *  do not rise steadily, at most FC_MOMENTUM_MAX_PER_MIN a minute. */
double fc_momentum(const struct forecast *f, int64_t last_closed);

/** After the model was updated through bucket b: plan the windows starting
 *  at bucket b + 1 and refresh the quantile cache for its phase. */
void fc_plan_open(struct forecast *f, int64_t b);

/* ---- seasons.c -------------------------------------------------------- */

/** Buckets the recent seasons' ring keeps for m buckets a season: 7 seasons
 *  and FC_SEASONS_LEVEL, or 0 (no ring) past FC_SEASONS_MAX_M. */
int64_t fc_seasons_len(int64_t m);

/** Keep bucket b's peak (log; NAN for a gap fill). */
void fc_seasons_close(struct forecast *f, int64_t b, double zpeak);

/** Forget n buckets from `from` (skipped in closed form over a long gap). */
void fc_seasons_skip(struct forecast *f, int64_t from, int64_t n);

/** The recent seasons' plan (req/s) for the look-ahead over buckets [first,
 *  last], the model having seen bucket last_closed: the upper median of
 *  the 7 seasons' peaks around the same buckets, each scaled by today's
 *  level over that season's; NAN before a Holt-Winters season or while
 *  fewer than FC_SEASONS_MIN seasons offer one; at most FC_MAX_GROWTH
 *  times the season's highest peak. Only buckets closed and still kept
 *  are read (the caller bounds first..last). */
double fc_seasons_plan(const struct forecast *f, int64_t last_closed, int64_t first, int64_t last);

/* ---- learn.c ---------------------------------------------------------- */

/** Fit the quantile regression at level tau to n rows (4 features and the
 *  target each, int16 in 1/FC_RES_SCALE) by iteratively reweighted least
 *  squares: FC_LEARN_ITERATIONS passes from least squares, or fewer from
 *  beta as given (a refit). False (beta untouched) when the rows do not
 *  determine it. */
bool fc_learn_fit(const int16_t *rows, int n, double tau, int iterations,
                  double beta[FC_LEARN_NX]);

/** At the start o of window length h (after fc_plan_open's plans, b = o -
 *  1 closed, p its point forecast, g its growth bound): record the
 *  features, and the learned plan when there is a fit. */
void fc_learn_open(struct forecast *f, int64_t b, int64_t o, int h, double p, double g);

/** Window length h from o resolved with realised peak m: move the shift of
 *  o's phase bin, keep the row, refit every FC_LEARN_REFIT rows. */
void fc_learn_close(struct forecast *f, int64_t o, int h, double m);

/** The learned margin above the base p of a look-ahead of w buckets
 *  (interpolated as the error quantile is); false while either window
 *  length around w has no fit. With want, those two window lengths keep
 *  rows and are fitted from now on (a look-ahead of 0, asked only to read
 *  the forecaster's state, does not ask for them). */
bool fc_learn_margin(const struct forecast *f, double w, int64_t last_closed, double p,
                     bool want, double *margin);

/** Recompute the quantile cache for bucket b's phase. */
void fc_plan_quantiles(struct forecast *f, int64_t b);

/** Residual quantile for a window of w buckets (fractional: interpolated in
 *  log2(w) between the stored lengths) and the number of residuals behind
 *  it; *median (may be NULL) gets the quantile at the median level. */
double fc_plan_quantile(const struct forecast *f, double w, int64_t *evidence, double *median);

/** Whether window length index h plans from the recent window peaks (their
 *  quantile loss is the lower) rather than from the model. */
bool fc_plan_recent(const struct forecast *f, int h);

/** The recent window peaks' quantile for a window of w buckets, as
 *  fc_plan_quantile interpolates; *median gets the median level's. */
double fc_plan_recent_quantile(const struct forecast *f, double w, double *median);

/** Horizon index of the stored window length at or just below w. */
int fc_horizon_index(int64_t w);

/** Move the moving average *avg towards v with weight FC_LOSS_ALPHA, or
 *  1 / n (the plain mean) while that is larger: n >= 1 counts v. */
void fc_ew_update(float *avg, double v, uint32_t n);

/** The highest bucket peak of the last season (log), or the last bucket's
 *  mean if higher. */
double fc_seen_max(const struct forecast *f);

/** The plan (log space) from its base, the residual quantile q (>= 0 used)
 *  and the growth quantile g (NAN: none measured yet): base + q, but not
 *  above the highest peak seen plus the growth new highs have shown (q until
 *  then), and never more than FC_MAX_GROWTH times that peak. */
double fc_plan_value(const struct forecast *f, double base, double q, double g);

/** Growth quantile for a window of w buckets (as fc_plan_quantile), and in
 *  *median the same at the median level; both NAN until it has evidence. */
double fc_plan_growth(const struct forecast *f, double w, double *median);

/* ---- the state codec (forecast-state.c) and the packed state (pack.c) ------- */

/** Format a reason into err (NUL-terminated; nothing when err is NULL or
 *  errlen 0). */
void fc_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** The longest state (forecast-state.c) a config admits, of any version read. */
size_t fc_state_max_len(const struct forecast_config *cfg);
/** buf starts with the packed state's magic. */
bool fc_is_packed(const uint8_t *buf, size_t len);
/** Inflate a packed state (magic checked by the caller) of at most max bytes
 *  into *out (caller frees), *outlen its length; 0, or -EINVAL / -ENOMEM with
 *  err set. */
int fc_unpack(const uint8_t *buf, size_t len, size_t max, uint8_t **out, size_t *outlen,
              char *err, size_t errlen);

#endif

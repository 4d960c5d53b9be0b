/* SPDX-License-Identifier: Apache-2.0 */
/* scrape internals shared by the module's files and its tests: the pure core
 * (one exposition -> one pod sample; per-pod counter samples and last
 * histogram counts; the per-workload latency window; pods -> one workload
 * result) that the I/O part in scrape.c and targets.c drives.
 *
 * Nothing here does I/O or reads a clock: times are passed in (ms on the
 * scraper's clock, as scrape_get's now). Not included by other modules. */
#ifndef GPUSCALER_SCRAPE_INT_H
#define GPUSCALER_SCRAPE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "prom/prom.h"
#include "scrape.h"

/** Most distinct `le` bounds kept per latency histogram (vLLM has 22, TGI 36). */
#define SCRAPE_MAX_BUCKETS 64
_Static_assert(SCRAPE_MAX_BUCKETS <= 64, "a series' bounds fit in its uint64_t mask");

/** Most series (label sets but `le`) of the latency histogram followed one
 *  by one in a pod; past it their bucket sums are (a series that vanishes
 *  then reads as a reset of them all). */
#define SCRAPE_MAX_HSERIES 8

/** What one exposition says about one pod, summed over label sets. */
/** Most series of one counter followed one by one in a pod (more: their
 *  sum is followed, and a series that vanishes reads as a reset). */
#define SCRAPE_MAX_SERIES 32

/** A counter's series in one exposition: a label-set fingerprint and its
 *  value. Rates are summed from each series' own increase, as Prometheus'
 *  sum(rate()) is: a series that vanishes (a model unloaded) adds nothing,
 *  where a drop of the sum would read as a reset of the whole counter. */
struct scrape_series_set {
    uint16_t n;
    bool overflow;                   /**< more than SCRAPE_MAX_SERIES */
    uint64_t id[SCRAPE_MAX_SERIES];  /**< the name's FNV-1a and its labels' (series_id()) */
    double v[SCRAPE_MAX_SERIES];
};

/** A counter's series kept from one scrape to the next: the first `present`
 *  are the last good scrape's (or with overflow their sum as one, id 0), the
 *  rest series gone since (at most SCRAPE_MAX_SERIES, the newest first), each
 *  with its last value and when it was last seen, so that one back within
 *  the rate window counts its increase over the gap, as rate() does over a
 *  series' samples in its range, not its whole value. */
struct scrape_series_last {
    uint16_t n;
    uint16_t present;
    bool overflow;
    struct {
        uint64_t id;
        double v;
        int64_t seen_ms;
    } s[];
};

/** The counters followed series by series. */
enum scrape_counter {
    SCRAPE_C_REQ,
    SCRAPE_C_PROMPT,
    SCRAPE_C_GEN,
    SCRAPE_C_BUSY,
    SCRAPE_C_REJ,
    SCRAPE_NC
};

struct scrape_sample {
    double requests;     /**< request counter, summed over series */
    bool has_requests;   /**< at least one series of the request metric */
    double inflight;
    bool has_inflight;
    double queued;
    bool has_queued;
    double prompt_tokens;  /**< prompt-token counter, summed (when the spec names one) */
    bool has_prompt;
    double gen_tokens;     /**< generation-token counter, summed */
    bool has_gen;
    double busy;           /**< busy-time counter, summed, in its own unit */
    bool has_busy;
    double rejected;       /**< refused requests' counter, summed (when the spec names one) */
    bool has_rejected;
    bool rejected_wanted;  /**< the spec names one (an absent one counts as 0) */
    bool tokens;           /**< the spec names token counters (absent ones count as 0) */
    size_t nbuckets;     /**< distinct `le` bounds, sorted ascending */
    double le[SCRAPE_MAX_BUCKETS];
    double count[SCRAPE_MAX_BUCKETS]; /**< cumulative count per bound, summed */
    bool hist_dropped;   /**< more bounds than the cap, or a bucket's count no count:
                              no histogram (a bucket without a numeric `le` is left out) */
    /** The histogram's series, each its label set but `le`: hser_n of them,
     *  their counts aligned with le[] (0 for a bound a series lacks), unless
     *  hser_overflow. 0 series with bounds: only count[] is known. hser_has:
     *  bit i set when the series has a line for le[i]. */
    uint8_t hser_n;
    bool hser_overflow;
    /** The lines summed at each bound (with hser_overflow: the pod's state
     *  tells a line some series lacks this scrape from a bound only some
     *  series have, scrape_podstate's hsum) */
    uint16_t hsum_n[SCRAPE_MAX_BUCKETS];
    uint64_t hsum_ids[SCRAPE_MAX_BUCKETS]; /**< the sum of those lines' series ids, mixed */
    uint64_t hser_id[SCRAPE_MAX_HSERIES];
    uint64_t hser_has[SCRAPE_MAX_HSERIES];
    double hser_count[SCRAPE_MAX_HSERIES][SCRAPE_MAX_BUCKETS];
    uint64_t samples;    /**< every sample line of the exposition, wanted or not */
    struct scrape_series_set series[SCRAPE_NC]; /**< the counters' series (a repeated one
                                                     counted once) */
};

/** Why a scrape failed; also the order of the counts in scrape_result.why. */
enum scrape_fail {
    SCRAPE_FAIL_NONE = 0,
    SCRAPE_FAIL_REFUSED,   /**< connection refused / unreachable */
    SCRAPE_FAIL_TIMEOUT,   /**< per-pod timeout */
    SCRAPE_FAIL_HTTP,      /**< non-2xx status */
    SCRAPE_FAIL_TOO_BIG,   /**< body over the size cap */
    SCRAPE_FAIL_GARBAGE,   /**< not a Prometheus exposition, or empty */
    SCRAPE_FAIL_TRUNCATED, /**< connection dropped mid-body */
    SCRAPE_FAIL_NO_PORT,   /**< no port to scrape the pod on (the spec's or the pod's) */
    SCRAPE_FAIL_OTHER,
    SCRAPE_FAIL_COUNT_,
};

/** "connection refused", "timeout", ... (for `why` and logs). */
const char *scrape_fail_name(enum scrape_fail f);

/* ---- one exposition -> one sample ------------------------------------- */

/**
 * Streaming extraction of one pod's sample: a prom push parser filtered on
 * the spec's few metric names. The spec's names are copied. Feed chunks,
 * then finish; on success x->s holds the sample. Errors are sticky.
 */
struct scrape_extract {
    /* the spec's metric fields, parsed: a name "" when not wanted (or not parsed) */
    struct scrape_selector request, inflight, queue;
    struct scrape_selector bucket;        /**< the latency histogram's _bucket series */
    struct scrape_selector prompt, gen;   /**< token counters */
    struct scrape_selector busy;          /**< busy-time counter */
    struct scrape_selector rejected;      /**< refused requests' counter */
    enum prom_format format;    /**< PROM_FMT_TEXT unless set before the first feed */
    struct prom_parser *parser; /**< made (or taken from spare) by the first feed or finish */
    struct prom_parser *spare;  /**< a previous parser wanting the same names, kept by
                                     scrape_extract_reuse (used when its format matches) */
    enum prom_format spare_format;
    struct scrape_sample s;
    /* the in-flight and queue gauges' series seen in this exposition (a
     * repeated line counts once); past SCRAPE_MAX_SERIES not told apart */
    uint64_t gauge_id[2][SCRAPE_MAX_SERIES];
    uint16_t gauge_n[2];
    size_t bytes, max_bytes;
    int err;          /**< 0, -EMSGSIZE (over max_bytes), -EBADMSG (not an exposition) */
    char errmsg[200]; /**< when err: what and where */
};

/** Set up x for spec with a body cap of max_bytes (0 = 16 MiB), in the 0.0.4 text format. */
void scrape_extract_init(struct scrape_extract *x, const struct scrape_spec *spec,
                         size_t max_bytes);
/**
 * Parse the body as fmt (from the response's Content-Type, see
 * prom_format_from_content_type). Only before the first feed: 0, or -EBUSY
 * (the format in use is kept).
 */
int scrape_extract_set_format(struct scrape_extract *x, enum prom_format fmt);
/** Feed a chunk: 0, -EMSGSIZE when the total passes the cap, -EBADMSG on a bad line. */
int scrape_extract_feed(struct scrape_extract *x, const void *data, size_t len);
/** End of body: 0 or the errors of feed; an exposition without any sample is -EBADMSG. */
int scrape_extract_finish(struct scrape_extract *x);
/**
 * Set up x again for spec, as scrape_extract_init does, keeping its parser
 * for the next stream when it wants the same names (the scraper's pooled
 * extractors: no parser is built per scrape). x must have been initialised.
 */
void scrape_extract_reuse(struct scrape_extract *x, const struct scrape_spec *spec,
                          size_t max_bytes);
/** Release the parsers; x may be re-initialised. */
void scrape_extract_free(struct scrape_extract *x);

/**
 * One-shot: extract spec's sample from buf[0..len) in format fmt. Returns 0
 * or the errors above with a message in err (errlen > 0).
 */
int scrape_extract_buf(const struct scrape_spec *spec, enum prom_format fmt, const void *buf,
                       size_t len, size_t max_bytes, struct scrape_sample *out, char *err,
                       size_t errlen);

/* ---- per-pod request counter ----------------------------------------- */

/**
 * A counter's recent samples with policy_counter's semantics (samples in
 * order, resets counted as the new value; see policy.h) in a ring sized for
 * the rate window (scrape_ring_cap) instead of policy_counter's fixed 32: 13
 * samples for the default 60 s window and 5 s interval, 61 for 60 s at 1 s,
 * each 12 bytes (the time as ms after base). The arrays are allocated on the
 * first add.
 */
struct scrape_ring {
    int64_t base;            /**< times are stored as ms after this */
    uint32_t *dt;            /**< cap times (ms after base), then cap values: one block */
    uint8_t cap, head, n;    /**< head: index of the oldest sample */
};

/** A count at or past 2^53 is not one: a double no longer steps by 1 there
 *  (an exporter's uint64 wrapped or garbage), and added to a running total
 *  it would swallow every later increase. Such a counter, histogram bucket
 *  or gauge is refused (scrape_extract). */
#define SCRAPE_COUNT_MAX 9007199254740992.0
/** A running total reaching this (2^52) is moved down with its ring, so that
 *  it keeps counting in ones however many resets near SCRAPE_COUNT_MAX it
 *  has added. */
#define SCRAPE_TOTAL_REBASE 4503599627370496.0

/** Most samples a ring keeps: a rate window of SCRAPE_MAX_WINDOW_INTERVALS. */
#define SCRAPE_RING_MAX (SCRAPE_MAX_WINDOW_INTERVALS + 1)
_Static_assert(SCRAPE_RING_MAX <= 255, "a ring's cap, head and n are uint8_t");

/** Samples a window of window_ms holds at one per interval_ms when each starts
 *  less than an interval late: ceil(window / interval) + 1, within [4,
 *  SCRAPE_RING_MAX]. */
unsigned scrape_ring_cap(int64_t window_ms, int64_t interval_ms);
void scrape_ring_init(struct scrape_ring *r, unsigned cap);
void scrape_ring_free(struct scrape_ring *r);
/** Forget every sample (keeps the capacity). */
void scrape_ring_clear(struct scrape_ring *r);
/** Heap bytes of the ring's arrays. */
size_t scrape_ring_memory(const struct scrape_ring *r);
/** Record a sample: 0, or -EINVAL (NaN, negative or infinite value, or a time
 *  not after the newest sample) and the ring is unchanged. */
int scrape_ring_add(struct scrape_ring *r, int64_t t_ms, double v);
/** Move every value down by the oldest one (increases unchanged) and
 *  return it; 0 for an empty ring. For a running total about to lose its
 *  units (SCRAPE_TOTAL_REBASE). */
double scrape_ring_rebase(struct scrape_ring *r);
/** The newest sample's time; INT64_MIN for an empty ring. */
int64_t scrape_ring_newest(const struct scrape_ring *r);
/** policy_counter_increase() over the ring: the increase over the samples in
 *  (now - window, now] and the time they span; -ENODATA with fewer than two. */
int scrape_ring_increase(const struct scrape_ring *r, int64_t now_ms, int64_t window_ms,
                         double *out_increase, int64_t *out_span_ms);

/* ---- per-workload latency window --------------------------------------- */

/** Distinct `le` bounds a workload's window holds (pods may disagree). */
#define SCRAPE_WINDOW_MAX_COLS (2 * SCRAPE_MAX_BUCKETS)

/**
 * A workload's latency histogram over the rate window: the increases of each
 * `le` bucket summed over its pods, in slots of one scrape interval. Each pod
 * keeps only its last cumulative counts (struct scrape_podstate's hist); a
 * scrape adds the pod's increase since its previous scrape to the slot of
 * that previous scrape's time, so a slot holds the increases whose both ends
 * lie at or after it, as rate() over the window would count them. The p99
 * is the quantile of the increases summed over the slots whose middle lies in
 * the window. Increases of a pod that left stay until they age out, as a
 * Prometheus rate() over the window keeps a series that ended within it.
 *
 * Columns are `le` bounds in order of first appearance (never moved, so a
 * pod's column map stays valid); refs counts the pods whose current layout
 * uses a column. A column with no pod left is reused for a new bound only
 * when all SCRAPE_WINDOW_MAX_COLS are taken. Counts are floats: the quantile
 * depends on their ratios only.
 */
struct scrape_window {
    int64_t slot_ms;         /**< slot width: the scrape interval */
    unsigned nslots;         /**< ceil(window / slot) + 1 */
    unsigned ncols, capcols; /**< columns used, allocated */
    double *le;              /**< bound of each column */
    uint32_t *refs;          /**< pods using each column */
    int64_t *slot;           /**< slot number held by each row, or INT64_MIN */
    float *cnt;              /**< capcols x nslots increases, column-major */
};

void scrape_window_init(struct scrape_window *w, int64_t slot_ms, int64_t window_ms);
/**
 * Find or take the columns of bounds le[0..n) and count one more pod on
 * each; cols gets their indexes. -ENOSPC when the window has no room for a
 * new bound (no column is taken then).
 */
int scrape_window_map(struct scrape_window *w, const double *le, size_t n, uint8_t *cols);
/** One pod fewer on each of cols[0..n). */
void scrape_window_unmap(struct scrape_window *w, const uint8_t *cols, size_t n);
/**
 * Add one pod's bucket increases inc[i] (to columns cols[i]) over the
 * interval that began at from_ms, to that time's slot. Increases older than
 * every slot the window holds are dropped.
 */
void scrape_window_add(struct scrape_window *w, int64_t from_ms, const uint8_t *cols,
                       const double *inc, size_t n);
/** Drop every increase (the latency metric changed); columns in use stay. */
void scrape_window_clear(struct scrape_window *w);
void scrape_window_free(struct scrape_window *w);
/**
 * The q-quantile (histogram_quantile) of the increases in the window ending
 * at now_ms, in the metric's unit; NAN when the window holds fewer than two
 * bounds or no observation.
 */
double scrape_window_quantile(const struct scrape_window *w, double q, int64_t now_ms,
                              int64_t window_ms);
/** Bytes the window holds (its arrays). */
size_t scrape_window_memory(const struct scrape_window *w);

/* ---- per-pod history --------------------------------------------------- */

/** A pod's scraped history: request counter samples, latest gauges, and the
 *  latency histogram's last cumulative counts (its increases go to the
 *  workload's scrape_window). */
struct scrape_podstate {
    struct scrape_ring requests;
    struct scrape_ring prompt, gen;    /**< token counters: no arrays until tokens are wanted */
    bool prompt_seen, gen_seen;        /**< ... in the last good exposition */
    /** The busy-time counter's samples since it was last absent (a scrape
     *  without it clears them: it is optional, and a 0 between two values
     *  would read as a reset and count the whole counter as an increase) */
    struct scrape_ring busy;
    struct scrape_ring rejected; /**< refused requests: no arrays until the spec names them */
    double inflight, queued; /**< latest gauges */
    /** hist_rows rows of nbuckets cumulative counts (one per series, or
     *  one of their sums): the first hist_present those at hist_ms, the
     *  rest series gone since (at most SCRAPE_MAX_HSERIES, newest first);
     *  then hist_rows series ids, hist_rows times each row was last seen,
     *  hist_rows times each row last had every bound it keeps a count of
     *  (no count carried over a missing line), and nbuckets uint8_t column
     *  indexes into the window; NULL when the pod has no histogram. A count
     *  is NaN where it is not known (a baseline when its line comes). */
    double *hist;
    int64_t hist_ms;
    uint8_t hist_rows, hist_present;
    bool hist_summed;        /**< the one row is the series' sum (too many, or unknown) */
    int64_t since_ms;        /**< when it became a ready target (the scraper's clock) */
    int64_t window_ms;       /**< the rate window: a series gone longer is forgotten */
    int64_t last_ok_ms;      /**< last successful scrape, POLICY_NEVER */
    int64_t last_try_ms;     /**< last finished attempt, POLICY_NEVER */
    char *error;             /**< last error (xmalloc'd), NULL when none yet */
    int32_t ok_count;        /**< successful scrapes since since_ms */
    uint8_t nbuckets;
    uint8_t fail;            /**< enum scrape_fail of the last attempt; NONE when it succeeded */
    bool req_seen;           /**< the request metric was in the last good exposition */
    bool req_reset;          /**< ...and a series of it fell since the scrape before (a
                                  restart), or it is absent where it was before */
    bool has_inflight, has_queued;
    /** Per counter: its series at the last good scrape and those gone since
     *  (NULL until one), and the running total of their increases the rings
     *  hold */
    struct scrape_series_last *last[SCRAPE_NC];
    double total[SCRAPE_NC];
    /** Summed histograms (more series than followed): the most lines seen at
     *  each bound since the series' number (the lines at the bound with the
     *  most, +Inf) last changed; fewer now is a line some series lacks this
     *  scrape, a bound only some series have keeps its number. NULL until one. */
    struct scrape_hsum *hsum;
};

struct scrape_hsum {
    uint64_t ids; /**< hsum_ids at the bound with the most lines */
    uint16_t most;
    uint8_t n;
    double le[SCRAPE_MAX_BUCKETS];
    uint16_t lines[SCRAPE_MAX_BUCKETS];
};

/** window_ms, interval_ms: the scraper's rate window and interval (the
 *  rings hold scrape_ring_cap() of them). */
void scrape_podstate_init(struct scrape_podstate *st, int64_t since_ms, int64_t window_ms,
                          int64_t interval_ms);
/** Forget all samples (metric names changed, or the pod's address); the
 *  histogram's columns in w are released. The last error is kept. */
void scrape_podstate_reset(struct scrape_podstate *st, struct scrape_window *w, int64_t since_ms);
/** Release everything the pod holds, its columns in w included. */
void scrape_podstate_free(struct scrape_podstate *st, struct scrape_window *w);
/** Record a successful scrape taken at t_ms; its latency increase goes to w. */
void scrape_podstate_ok(struct scrape_podstate *st, struct scrape_window *w, int64_t t_ms,
                        const struct scrape_sample *s);
/** Record a failed attempt finished at t_ms. msg is copied. */
void scrape_podstate_fail(struct scrape_podstate *st, int64_t t_ms, enum scrape_fail f,
                          const char *msg);
/** The last error, "" when none. */
const char *scrape_podstate_error(const struct scrape_podstate *st);
/** Heap bytes the pod's history holds beyond the struct itself. */
size_t scrape_podstate_memory(const struct scrape_podstate *st);
/** The latest running and waiting requests the backlog counts for the pod
 *  at now_ms (aggregate.c): its gauges of a good scrape within 3 intervals,
 *  each only when the spec names its metric and the pod reported it; NAN
 *  when not counted. */
void scrape_podstate_backlog(const struct scrape_podstate *st, const struct scrape_spec *spec,
                             int64_t now_ms, int64_t interval_ms, double *running,
                             double *waiting);
/** Move src's counter samples into dst (a pod that left, kept for the
 *  requests it served in the window); src keeps no samples and its histogram
 *  columns in w are released. dst owns the rings: free it with
 *  scrape_podstate_free(dst, NULL). */
void scrape_podstate_retire(struct scrape_podstate *dst, struct scrape_podstate *src,
                            struct scrape_window *w);

/* ---- pods -> workload result ------------------------------------------- */

/** One pod as scrape_aggregate() sees it: a ready one, or one that left
 *  (deleted, or no longer Ready) whose samples are still in the window. */
struct scrape_agg_pod {
    const struct scrape_podstate *st;
    double gpus;
    bool gone;  /**< left: only its requests served in the window count */
};

/**
 * The workload's result at now_ms from its ready pods and its latency window
 * (win may be NULL: no p99); see aggregate.c's header comment and
 * docs/metrics.md for the counting rules. interval_ms and window_ms are the
 * scrape interval and the rate window.
 */
void scrape_aggregate(const struct scrape_agg_pod *pods, size_t n, const struct scrape_window *win,
                      const struct scrape_spec *spec, int64_t now_ms, int64_t interval_ms,
                      int64_t window_ms, struct scrape_result *out);

/**
 * scrape_aggregate(), with the recent rates (recent_rate, the token rates'
 * recent ones) counted over at least recent_min_ms of each pod's samples
 * (and the window's when shorter) instead of its two newest intervals; 0:
 * two intervals, as scrape_aggregate().
 */
void scrape_aggregate_recent(const struct scrape_agg_pod *pods, size_t n,
                             const struct scrape_window *win, const struct scrape_spec *spec,
                             int64_t now_ms, int64_t interval_ms, int64_t window_ms,
                             int64_t recent_min_ms, struct scrape_result *out);

/** Multiplier from the latency metric's unit to ms (1000 for seconds). */
double scrape_latency_unit_ms(const char *metric);

/** Whether every matcher of s holds on the sample's labels (the name is not checked). */
bool scrape_selector_match(const struct scrape_selector *s, const struct prom_sample *ps);

/** scrape_selector_parse without compiling the patterns to check them: for
 *  a field the annotations' validation has parsed (the extractor, which
 *  compiles them itself, or takes them over compiled). */
int scrape_selector_parse_syntax(const char *text, struct scrape_selector *out, char *err,
                                 size_t errlen);

/**
 * An RE2 pattern (a =~ matcher's) as a POSIX extended regular expression
 * for regcomp with *cflags, anchored at both ends, matching what Prometheus
 * matches: 0, or -EINVAL with the reason in why (whylen may be 0) for what
 * the two would read differently or ere (cap bytes) cannot hold.
 */
int scrape_regex_translate(const char *re2, char *ere, size_t cap, int *cflags, char *why,
                           size_t whylen);
/** Whether re2 translates and compiles: 0, or -EINVAL with why. */
int scrape_regex_check(const char *re2, char *why, size_t whylen);
/** Whether value matches s's matcher i, a compiled regex matcher. */
bool scrape_regex_match(const struct scrape_selector *s, size_t i, const char *value);

#endif

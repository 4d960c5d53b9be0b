/* SPDX-License-Identifier: Apache-2.0 */
/* scrape internals shared by the module's files and its tests: the pure core
 * (one exposition -> one pod sample; per-pod counter history; pods -> one
 * workload result) that the I/O part in scrape.c drives.
 *
 * Nothing here does I/O or reads a clock: times are passed in (UNIX ms for
 * sample times, as scrape_get's now). Not included by other modules. */
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

/** What one exposition says about one pod, summed over label sets. */
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
    size_t nbuckets;     /**< distinct `le` bounds, sorted ascending */
    double le[SCRAPE_MAX_BUCKETS];
    double count[SCRAPE_MAX_BUCKETS]; /**< cumulative count per bound, summed */
    bool hist_dropped;   /**< more bounds than the cap or a bad `le`: no histogram */
    uint64_t samples;    /**< every sample line of the exposition, wanted or not */
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
    char request[128], inflight[128], queue[128], bucket[140];
    char prompt[128], gen[128]; /**< token counters, "" when not wanted */
    enum prom_format format;    /**< PROM_FMT_TEXT unless set before the first feed */
    struct prom_parser *parser; /**< made by the first feed (or finish) */
    struct scrape_sample s;
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
/** Release the parser; x may be re-initialised. */
void scrape_extract_free(struct scrape_extract *x);

/**
 * One-shot: extract spec's sample from buf[0..len) in format fmt. Returns 0
 * or the errors above with a message in err (errlen > 0).
 */
int scrape_extract_buf(const struct scrape_spec *spec, enum prom_format fmt, const void *buf,
                       size_t len, size_t max_bytes, struct scrape_sample *out, char *err,
                       size_t errlen);

/* ---- per-pod history --------------------------------------------------- */

struct scrape_bucket {
    double le;
    struct policy_counter c;
};

/** A pod's scraped history: counters as policy_counter samples, latest gauges. */
struct scrape_podstate {
    struct policy_counter requests;
    bool req_seen;           /**< the request metric was in the last good exposition */
    struct policy_counter prompt, gen; /**< token counters (zero when not wanted) */
    bool prompt_seen, gen_seen;        /**< ... in the last good exposition */
    double inflight, queued; /**< latest gauges */
    bool has_inflight, has_queued;
    struct scrape_bucket *buckets; /**< by ascending le; xmalloc'd */
    size_t nbuckets;
    int64_t since_ms;        /**< when it became a ready target (UNIX ms) */
    int64_t last_ok_ms;      /**< last successful scrape, POLICY_NEVER */
    int64_t last_try_ms;     /**< last finished attempt, POLICY_NEVER */
    int ok_count;            /**< successful scrapes since since_ms */
    enum scrape_fail fail;   /**< of the last attempt; NONE when it succeeded */
    char error[160];         /**< last error, "" when none yet */
};

void scrape_podstate_init(struct scrape_podstate *st, int64_t since_ms);
/** Forget all samples (metric names changed, or the pod's address). */
void scrape_podstate_reset(struct scrape_podstate *st, int64_t since_ms);
void scrape_podstate_free(struct scrape_podstate *st);
/** Record a successful scrape taken at t_ms. */
void scrape_podstate_ok(struct scrape_podstate *st, int64_t t_ms, const struct scrape_sample *s);
/** Record a failed attempt finished at t_ms. msg is copied. */
void scrape_podstate_fail(struct scrape_podstate *st, int64_t t_ms, enum scrape_fail f,
                          const char *msg);

/* ---- pods -> workload result ------------------------------------------- */

/** One ready pod as scrape_aggregate() sees it. */
struct scrape_agg_pod {
    const struct scrape_podstate *st;
    double gpus;
};

/**
 * The workload's result at now_ms from its ready pods (see scrape.c's header
 * comment and docs/metrics.md for the counting rules). interval_ms and
 * window_ms are the scrape interval and the rate window.
 */
void scrape_aggregate(const struct scrape_agg_pod *pods, size_t n, const struct scrape_spec *spec,
                      int64_t now_ms, int64_t interval_ms, int64_t window_ms,
                      struct scrape_result *out);

/** Multiplier from the latency metric's unit to ms (1000 for seconds). */
double scrape_latency_unit_ms(const char *metric);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* scrape: per-Deployment serving metrics (request rate, in-flight and queued
 * requests, p99 latency) measured by scraping every ready pod's Prometheus
 * endpoint directly, on the daemon's libuv loop through httpc.
 *
 * The controller declares, each tick, which pods belong to which workload
 * (scrape_set_targets); the scraper keeps one schedule entry per pod, scrapes
 * them concurrently on a jittered interval, keeps per-pod request counter
 * samples and one cumulative latency histogram per pod (its increases are
 * summed per workload over the rate window), and answers scrape_get() from
 * memory. Pods that failed or are stale are excluded and counted; above the
 * workload's missing fraction the result is invalid, so the policy holds.
 *
 * Footprint: about 1 KB per pod and 2 KB per workload, plus what the
 * scrapes in flight hold; their number is kept near rate x latency (see
 * scrape_config.max_inflight), and plain-HTTP pods are scraped over a new
 * connection each time rather than keeping one idle per pod.
 *
 * The pure part (profiles, turning one exposition into per-pod samples and
 * aggregating pods into a result) is separate from the I/O part so it can be
 * unit tested and fuzzed without a network. */
#ifndef GPUSCALER_SCRAPE_H
#define GPUSCALER_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct httpc;

enum scrape_profile {
    SCRAPE_VLLM,
    SCRAPE_TRITON,
    SCRAPE_TGI,
    SCRAPE_SGLANG,
    SCRAPE_NIM,
    SCRAPE_TEI,
    SCRAPE_GENERIC
};

/** "vllm", "triton", "tgi", "sglang", "nim", "tei", "generic" -> profile; -EINVAL otherwise. */
int scrape_profile_parse(const char *s, enum scrape_profile *out);
const char *scrape_profile_name(enum scrape_profile p);

/** How to scrape and read one workload's pods (from its annotations). */
struct scrape_spec {
    enum scrape_profile profile;
    char scheme[8];             /**< "http" (default) or "https" */
    int port;                   /**< 0: the pod's container port named port_name, or
                                     without one, named metrics, else http */
    char port_name[16];         /**< a container port's name (IANA_SVC_NAME), or "" */
    char path[256];             /**< default "/metrics" ("/v1/metrics" for nim) */
    /* The metric fields hold a name, or a name with label matchers
     * (struct scrape_selector): `nv_inference_request_success{model="a"}`. */
    char request_metric[128];   /**< counter of finished requests; profile default if "" */
    char inflight_metric[128];  /**< gauge of running requests; optional */
    char queue_metric[128];     /**< gauge of waiting requests; optional */
    char latency_metric[128];   /**< histogram (base name) of request latency; optional */
    /** Counter of the time requests spent being served, summed over requests
     *  (an in-service latency histogram's _sum series, or a cumulative
     *  duration counter; unit from the name's suffix as for latency_metric):
     *  its rate is the time-averaged number of requests in service (Little's
     *  law), which the capacity estimate prefers to a once-a-scrape reading
     *  of the in-flight gauge. Optional; profile default if "" (none for
     *  generic). */
    char busy_metric[128];
    /** Counter of requests the server refused for overload (a full queue, a
     *  queue timeout, the concurrency limit): arrivals no completion counts.
     *  Optional; profile default if "" (Triton's
     *  nv_inference_request_failure{reason="REJECTED"}, TGI's
     *  tgi_request_failure{err="overloaded"}; none for the others, which
     *  queue instead). */
    char rejected_metric[128];
    /** Token counters, read only when named (scrape_spec_want_tokens: demand-unit tokens). */
    char prompt_token_metric[128];     /**< prompt tokens processed; optional */
    char generation_token_metric[128]; /**< tokens generated; required for tokens */
    double missing_fraction;    /**< invalid when more than this fraction of pods failed; 0.3 */
};

/** Defaults for a profile (missing_fraction 0.3, path /metrics, or NIM's
 *  /v1/metrics, http). */
void scrape_spec_init(struct scrape_spec *s, enum scrape_profile p);

/**
 * Read token counters too (demand-unit tokens): fills the profile's default
 * prompt and generation token metrics where s names none (vLLM
 * vllm:prompt_tokens_total and vllm:generation_tokens_total, SGLang's
 * sglang: counters of the same names, NIM's unprefixed ones; TGI the _sum of
 * its input-length and generated-tokens histograms). Returns 0, or -ENOTSUP
 * when the profile exposes no token counters (Triton, TEI, generic) and s names
 * no generation-token metric: s is then unchanged.
 */
int scrape_spec_want_tokens(struct scrape_spec *s);

/** Longest metric annotation value, with its matchers, plus the NUL: the size
 *  of scrape_spec's metric fields. */
#define SCRAPE_METRIC_MAX 128
#define SCRAPE_MAX_MATCHERS 4

/** One label matcher: label = value, label != value, or (regex) label =~
 *  pattern, label !~ pattern, an RE2 pattern matched in full. */
struct scrape_matcher {
    char label[64];
    char value[SCRAPE_METRIC_MAX]; /**< the value, or the pattern */
    bool negate;                   /**< != or !~ */
    bool regex;                    /**< =~ or !~ */
};

struct scrape_selector_re;

/** A metric with label matchers, `name{label="value",other!="x"}`, as a
 *  metric field of scrape_spec holds it (the braces are optional). A series
 *  is read when every matcher holds, a label it lacks reading as "" (as in
 *  PromQL). */
struct scrape_selector {
    char name[SCRAPE_METRIC_MAX + 8]; /**< (room for a histogram's _bucket suffix) */
    size_t n;
    struct scrape_matcher m[SCRAPE_MAX_MATCHERS];
    /** The regex matchers compiled (scrape_selector_compile), owned; NULL
     *  after a parse. A regex matcher not compiled matches nothing. */
    struct scrape_selector_re *re;
};

/**
 * Parse a metric field strictly: a Prometheus metric name, then optionally
 * braces holding up to SCRAPE_MAX_MATCHERS matchers `label="value"`,
 * `label!="value"`, `label=~"pattern"` or `label!~"pattern"` (either quote,
 * PromQL's escapes, blanks around tokens, a trailing comma allowed). As in
 * Prometheus 3, the name may instead be quoted alone inside the braces, and
 * a label name quoted: `{"http.server.requests", "my.label"="GET"}`. A
 * pattern is RE2 as Prometheus reads it, anchored; patterns that POSIX
 * regular expressions would read differently are refused (the subset:
 * docs/metrics.md). The labels `le` and `__name__`, values holding `{{` or
 * `}}` (the PromQL templates' placeholders), and anything else are refused:
 * -EINVAL with the reason in err. out is zeroed first and nothing is
 * allocated (out->re is NULL), so two parses of one text compare equal with
 * memcmp.
 */
int scrape_selector_parse(const char *text, struct scrape_selector *out, char *err,
                          size_t errlen);

/** Compile s's regex matchers into s->re (replacing any): 0, or -EINVAL
 *  (s->re NULL) for a pattern that does not compile, which a parse refuses. */
int scrape_selector_compile(struct scrape_selector *s);
/** Free s->re; s stays a parsed selector. */
void scrape_selector_release(struct scrape_selector *s);

/** Length of the metric name at the start of a metric field (up to its '{';
 *  0 for a name quoted inside the braces, see scrape_metric_name). */
size_t scrape_metric_name_len(const char *text);

/** The metric name of a metric field into out (truncated to outlen): the name
 *  before the braces, or the one quoted inside them (`{"http.requests"}`,
 *  Prometheus 3's UTF-8 names). */
void scrape_metric_name(const char *text, char *out, size_t outlen);

/** A pod to scrape, as the controller sees it in the cache. Strings borrowed. */
struct scrape_pod {
    const char *name;
    const char *ip;
    int port;         /**< resolved metrics port (spec port or named container port) */
    bool ready;
    double gpus;      /**< GPUs of this pod */
};

/** A workload's measurement. */
struct scrape_result {
    bool valid;             /**< false: hold (too many pods missing, or no data yet) */
    int64_t time_ms;        /**< newest sample time used */
    double request_rate;    /**< req/s summed over the counted pods; NAN when !valid */
    double recent_rate;     /**< the same over the newest two scrape intervals only (what a
                                 step looks like before the window sees it), or at least
                                 scrape_get_recent's span; NAN unknown */
    int64_t recent_span_ms; /**< the shortest span a counted pod's recent rate counts over
                                 (the sample times', not the nominal two intervals'); 0
                                 unknown */
    double inflight;        /**< running requests, < 0 unknown */
    double busy;            /**< requests in service averaged over the rate window (the
                                 busy-time counter's rate), < 0 unknown: no busy metric, or
                                 a counted pod without it for the whole window */
    double queued;          /**< waiting requests, < 0 unknown */
    double backlog;         /**< running + waiting requests of every pod with a good scrape
                                 within 3 intervals, warming and failed ones included (their
                                 latest gauges), < 0 unknown: what the arrivals' backlog
                                 growth compares from tick to tick, so a pod's queue counts
                                 as arrivals when its requests come, not when the pod is
                                 first counted */
    double waiting;         /**< the waiting part of backlog (the same pods' waiting gauges),
                                 < 0 unknown: the queue to drain */
    double departed;        /**< running + waiting requests that pods held when they left
                                 the backlog by leaving (deleted, no longer Ready, a new
                                 address), summed since the workload was first given: they
                                 finish unseen, so backlog + departed only grows by arrivals
                                 and falls by completions seen. It also holds, while they
                                 do not answer, the last gauges of Ready pods 3 intervals
                                 without a good scrape (taken at scrape_get; given back when
                                 they answer, kept when they are deleted first), and a pod's
                                 out of Ready until its first good scrape once Ready again
                                 (given back then, unless its request counter reset) */
    double p99_ms;          /**< p99 latency over the rate window, < 0 unknown */
    /** Token rates (tokens/s, counted like request_rate) when the spec names token
     *  metrics; NAN otherwise or when !valid. A workload whose pods lack the
     *  generation-token metric is invalid (hold), as for the request metric. */
    double prompt_token_rate, generation_token_rate;
    double prompt_token_recent, generation_token_recent; /**< newest intervals; NAN unknown */
    /** Requests refused (the spec's rejected_metric), req/s, counted like
     *  request_rate, a pod without the counter counting 0; NAN when the spec
     *  names none or when !valid. */
    double rejected_rate, rejected_recent;
    /** The parts of request_rate, the token rates and busy that are the
     *  requests (tokens, busy time) in the window of pods not serving now:
     *  gone ones, and ones warming after a spell out. 0 when none or
     *  unknown. The scale-up to the serving replicas (scrape_result_scale_up)
     *  multiplies the rest, the counted pods' part, and adds these as they
     *  are. */
    double request_rate_gone, prompt_token_rate_gone, generation_token_rate_gone, busy_gone;
    double rejected_rate_gone;
    double gpus_ready;      /**< GPUs of the counted ready pods */
    int pods_ready;         /**< ready pods declared */
    int pods_counted;       /**< pods with a usable rate */
    int pods_failed;        /**< last scrape failed (error, timeout, garbage, too big) */
    int pods_stale;         /**< no successful scrape recently / not enough samples yet
                                 (warming pods included) */
    int pods_warming;       /**< ... of them: Ready for less than 3 intervals, fewer than 2
                                 good scrapes since (replicas still starting, not serving) */
    char why[200];          /**< when !valid: one line saying why */
};

/**
 * Scale r's rates up from the counted pods to the serving replicas, k =
 * serving / counted (failed and stale pods still serve an average share):
 * each window rate (request, token, busy) becomes its counted part times k
 * plus its gone part (request_rate_gone ...) unscaled, as the pods that
 * left or are warming serve no share now; the recent rates, counted pods'
 * only, are multiplied. Unknown rates (NAN, busy < 0) stay so.
 */
void scrape_result_scale_up(struct scrape_result *r, double k);

/** Default number of httpc clients (about 600 pods each at 10,000 pods). */
#define SCRAPE_DEFAULT_CLIENTS 16
/** Default ceiling on scrapes in flight (scrape_config.max_inflight). */
#define SCRAPE_DEFAULT_MAX_INFLIGHT 512

/** A pod's rate is over at most this many scrape intervals (its counters keep
 *  one more sample): a longer rate window is refused (ctl_config_validate). */
#define SCRAPE_MAX_WINDOW_INTERVALS 254

struct scrape_config {
    int64_t interval_ms;    /**< default 5 s */
    int64_t timeout_ms;     /**< per-pod, default 2 s */
    int64_t rate_window_ms; /**< default 60 s, at most SCRAPE_MAX_WINDOW_INTERVALS
                                 intervals */
    size_t max_bytes;       /**< per exposition, default 16 MiB */
    /** httpc clients the pods are spread over (each pod always on the same
     *  one): the caller's client plus clients - 1 the scraper creates on the
     *  same loop. libcurl before 8.10 walks a client's whole DNS and
     *  connection cache on every request, which costs O(pods) per scrape with
     *  one client; 0 = SCRAPE_DEFAULT_CLIENTS, at most 64. */
    int clients;
    /** Clock stamping samples, in ms (the timeline of scrape_get's now_ms
     *  and of scrape_result.time_ms); NULL = util_now_boot_ms, which a step
     *  of the wall clock neither ages nor sends back before the newest
     *  sample, and a sleep of the machine advances (the pods elsewhere
     *  served meanwhile: a counter's increase is spread over the real
     *  time): the caller asks on the same clock and converts time_ms to
     *  the wall's itself. Tests inject their own. */
    int64_t (*clock)(void *arg);
    void *clock_arg;
    /** Ceiling on scrapes in flight; 0 = SCRAPE_DEFAULT_MAX_INFLIGHT. Below
     *  it the limit follows the load: (scheduled pods / interval) x (twice
     *  the mean scrape duration + 10 ms, the start batch), plus 16, so a
     *  burst of due scrapes (after the loop was busy) is started as others
     *  finish instead of all at once. Due scrapes held back by the limit
     *  count in scrape_stats.deferred, and in late when they wait an
     *  interval or more. */
    size_t max_inflight;
};

void scrape_config_init(struct scrape_config *c);

struct scrape;

/**
 * Create the scraper on loop. h (borrowed, must outlive the scraper) is the
 * first of cfg->clients httpc clients; the scraper creates the others on the
 * same loop and closes them in scrape_close(). cfg may be NULL (defaults).
 * Returns 0, -EINVAL for a bad config, or httpc_new()'s error.
 */
int scrape_new(uv_loop_t *loop, struct httpc *h, const struct scrape_config *cfg,
               struct scrape **out);

/**
 * Declare the current pods of workload ns/name and how to read them. Pods no
 * longer listed are forgotten (a running scrape is cancelled); new ones are
 * scheduled at their stable phase; not-ready pods are kept but not scraped
 * or counted. A pod whose address changed, or a spec whose metric names
 * changed, starts its history afresh. Pod names are matched, duplicates
 * ignored. Copies everything it needs; call it every tick.
 */
void scrape_set_targets(struct scrape *s, const char *ns, const char *name,
                        const struct scrape_spec *spec, const struct scrape_pod *pods,
                        size_t npods);

/** Stop scraping a workload and drop its state. */
void scrape_forget(struct scrape *s, const char *ns, const char *name);

/**
 * The workload's measurement at now_ms (the scraper's clock: see
 * scrape_config.clock),
 * computed from memory: see docs/metrics.md for which pods count and when
 * the result is invalid. Returns 0, or -ENOENT for an unknown workload.
 */
int scrape_get(struct scrape *s, const char *ns, const char *name, int64_t now_ms,
               struct scrape_result *out);

/**
 * scrape_get(), with the recent rates counted over at least recent_min_ms of
 * each pod's samples (within the rate window) instead of its two newest
 * scrape intervals; 0: as scrape_get(). The controller asks for two service
 * times (policy_recent_span_ms).
 */
int scrape_get_recent(struct scrape *s, const char *ns, const char *name, int64_t now_ms,
                      int64_t recent_min_ms, struct scrape_result *out);

/** Counters for the daemon's /metrics. */
struct scrape_stats {
    uint64_t scrapes_ok, scrapes_failed, bytes;
    uint64_t late;          /**< scrapes started one interval or more behind their slot */
    uint64_t skipped;       /**< slots skipped because the pod's previous scrape still ran */
    int64_t delay_max_ms;   /**< worst delay of a scrape start behind its slot */
    size_t pods;            /**< pods known (all workloads, ready or not) */
    size_t scheduled;       /**< ready pods on the schedule */
    size_t inflight;        /**< scrapes running now */
    size_t inflight_limit;  /**< the limit on scrapes in flight now (see max_inflight) */
    size_t inflight_peak;   /**< most scrapes in flight at once so far */
    uint64_t deferred;      /**< times due scrapes waited for a slot under the limit */
    double duration_ms;     /**< mean duration of recent scrapes (moving average) */
    size_t memory_bytes;    /**< heap bytes of the scraper's own state: pods, workloads,
                                 schedule, parsers (not libcurl's; see httpc_memory_bytes) */
};
void scrape_stats(const struct scrape *s, struct scrape_stats *out);

typedef void (*scrape_close_cb)(void *arg);
/** Cancel in-flight scrapes, close the scraper's own httpc clients, free
 *  everything, then call cb (may be NULL) from the loop. */
void scrape_close(struct scrape *s, scrape_close_cb cb, void *arg);

#endif

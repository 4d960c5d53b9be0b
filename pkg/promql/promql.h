/* SPDX-License-Identifier: Apache-2.0 */
/* promql: a Prometheus server as the metrics source. Per-workload PromQL
 * (profile defaults or the workload's own templates) is expanded for the
 * workload and sent as an instant query through httpc; the answer becomes
 * the same struct scrape_result the direct scraper produces. At startup a
 * range query over the last days seeds a forecaster so predictions work from
 * the first minute.
 *
 * Safety first: a failed request, a non-success status, an empty result, more
 * than one series, NaN or a negative rate all give valid = false with a
 * one-line why, never a rate of 0 that could scale a workload in.
 *
 * Pure parts (template expansion, response parsing) are separate functions
 * so they are unit tested and fuzzed without a network; the client is a
 * handle in libuv's sense (new / close(cb)), each query a request with
 * exactly one callback. */
#ifndef GPUSCALER_PROMQL_H
#define GPUSCALER_PROMQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "scrape/scrape.h"

struct httpc;
struct forecast;

/* ---- templates (pure) ---------------------------------------------------- */

/** Longest expanded query. */
#define PROMQL_MAX_QUERY 4096
/** ... but the per-pod one's (promql_default_pods): seven parts name the
 *  request counter, each twice for one named by its family name, so the
 *  longest names (127-byte metrics, a 63-byte namespace, a 57-byte
 *  Deployment name of dots and letters, whose pod regex is the longest)
 *  make it about 8,700 bytes. */
#define PROMQL_MAX_PODS_QUERY (4 * PROMQL_MAX_QUERY)

/** A query whose GET URL would be longer than this is sent as a POST (as a
 *  GET after a POST was answered 405 once: a proxy passing only GETs). */
#define PROMQL_GET_MAX_URL 4096

/**
 * Default PromQL for a workload's request rate (req/s) and p99 latency (in
 * seconds), built from the spec's metric names, or "" when the spec names no
 * such metric (generic profile without request-metric, Triton for p99).
 * Placeholders are left in: {{namespace}}, {{pods}} and {{window}}. E.g.
 * vLLM: sum(rate(vllm:request_success_total{namespace="{{namespace}}",
 * pod=~"{{pods}}"}[{{window}}])), with each of a pod's addresses counted
 * once: the sum over each scrape target's series (by pod, instance, job,
 * service, endpoint, container), the largest of those an address
 * (`instance`) has, summed (a duplicate target, a PodMonitor beside a
 * ServiceMonitor, would double a plain sum). The busy time, the refused
 * requests and promql_default_pods' values the same way. out is always
 * NUL-terminated.
 */
void promql_default_rate(const struct scrape_spec *spec, char *out, size_t outlen);
void promql_default_p99(const struct scrape_spec *spec, char *out, size_t outlen);

/**
 * Default PromQL for the busy time: the rate of the spec's busy-time counter
 * (busy_metric: seconds requests spent in service, scaled from ms or us by
 * its suffix), which is the time-averaged number of requests in service over
 * the window (Little's law), summed over the Deployment's pods. When the spec
 * names a request counter too, the query answers only while every pod that
 * has the request counter has the busy counter as well (an empty answer
 * otherwise: a sum over fewer pods would understate). "" when the spec names
 * no busy counter.
 */
void promql_default_busy(const struct scrape_spec *spec, char *out, size_t outlen);

/**
 * Default PromQL for the requests the pods refused (the spec's
 * rejected_metric): its rate summed over the Deployment's pods, as the
 * default rate is. "" when the spec names none.
 */
void promql_default_refused(const struct scrape_spec *spec, char *out, size_t outlen);

/** The label that tells the parts of the per-pod answer apart. */
#define PROMQL_PART_LABEL "gpuscaler_part"

/**
 * The label the default queries key a pod's targets on, beside `pod` and
 * `instance`: the target's container where `instance` is not an address
 * (host:port or [v6]:port), absent where it is. Each key's targets are one
 * scrape counted once; two or more are a duplicate (the per-pod part "dup").
 */
#define PROMQL_KEY_LABEL "gpuscaler_key"

/**
 * Default PromQL for what each pod reports, in one query: its running
 * requests (the spec's inflight gauge, part "running"), its waiting ones
 * (the queue gauge, "waiting") and, when with_counted, whether Prometheus'
 * rate of the request counter counts it ("counted": rate() needs two samples
 * in the window, so a pod Prometheus has scraped once is not in the rate
 * yet), the counter's newest value ("requests", summed over the pod's
 * series) and the newest and oldest of its series' sample times ("at",
 * "at_min", unix seconds; apart when the pod's series come from targets
 * scraped at other times, or one went stale): two answers a scrape apart
 * give the pod's newest rate, as the scraper has it. Also the most samples
 * a series of the counter has in the window ("samples") and the newest
 * sample time before the window ("before", the `offset` of the window):
 * between those two times lie exactly that many samples, so they give the
 * scrape interval at any decision interval. And how many of its keys
 * (PROMQL_KEY_LABEL's) more than one target scrapes, or of its `instance`s
 * more than one job ("dup": a PodMonitor and a ServiceMonitor, a Service
 * and its headless twin, an annotation job beside a monitor, their series
 * differing in job, service, endpoint or container), whose requests a
 * plain sum counts twice or more. With
 * with_counted and a rejected_metric, also the refused requests' counter's
 * newest value ("refused"), for their newest rate the same way. Each series carries
 * PROMQL_PART_LABEL and the pod label. "" when the spec names none of these
 * metrics. Placeholders as for the rate; out of PROMQL_MAX_PODS_QUERY bytes
 * holds it whole.
 */
void promql_default_pods(const struct scrape_spec *spec, bool with_counted, char *out,
                         size_t outlen);

/** Durations longer than this (about 292 years: Prometheus' own bound, a
 *  Go time.Duration) are refused. */
#define PROMQL_DURATION_MAX_MS (9223372036854LL)
/**
 * A PromQL duration (one or more <digits><unit>, units y w d h m s ms, each
 * at most once and in that order, as Prometheus reads them: "2m", "1m30s",
 * not "30s1m") in milliseconds; -1 when s is none, or longer than
 * PROMQL_DURATION_MAX_MS. Pure.
 */
int64_t promql_duration_ms(const char *s);

/**
 * Expand a template for namespace ns and Deployment deploy:
 *  {{namespace}}  the namespace, escaped for a PromQL string;
 *  {{deployment}} the Deployment name, escaped for a PromQL string;
 *  {{pods}}       a regex matching exactly the Deployment's pod names
 *                 (<deployment>-<pod-template-hash>-<suffix>), escaped;
 *  {{window}}     the rate window, e.g. "2m" (window must be a PromQL
 *                 duration: digits followed by ms, s, m, h, d, w or y).
 * ns and deploy must be DNS-1123 names ([a-z0-9.-], 1..253 chars). Returns
 * 0, -EINVAL (bad name or window, unknown or unclosed {{placeholder}}, empty
 * template) or -ENAMETOOLONG (result over outlen - 1 bytes), with err set.
 */
int promql_expand(const char *tmpl, const char *ns, const char *deploy, const char *window,
                  char *out, size_t outlen, char *err, size_t errlen);

/* ---- responses (pure) ------------------------------------------------------ */

struct promql_point {
    int64_t t_ms;
    double v; /**< may be NaN or infinite: Prometheus sends "NaN", "+Inf" */
};

/** A parsed /api/v1/query or /api/v1/query_range answer holding one series. */
struct promql_series {
    struct promql_point *points; /**< ascending time; xmalloc'd, free with promql_series_free */
    size_t npoints;
    bool range;                  /**< a matrix (a range vector): query_range's answer */
};

/** Most points accepted in one response (Prometheus itself caps at 11,000 per series). */
#define PROMQL_MAX_POINTS 100000

/**
 * Parse a query (vector or scalar) or query_range (matrix) response body.
 * Everything is validated: a JSON object with status "success" and data
 * {resultType, result} of the documented shapes, [time, "value"] pairs with
 * finite times, values in Prometheus' float syntax. Returns 0 with exactly
 * one series in out (points sorted by time), or with err set:
 *  -EREMOTEIO  status "error" (err holds errorType and error);
 *  -ENODATA    no series (empty vector or matrix);
 *  -ERANGE     more than one series (the query must aggregate);
 *  -EBADMSG    anything malformed, or more than PROMQL_MAX_POINTS points.
 * On error out is empty. Pure; never logs.
 */
int promql_parse_response(const char *body, size_t len, struct promql_series *out, char *err,
                          size_t errlen);
void promql_series_free(struct promql_series *s);

/** One pod of the per-pod answer. */
struct promql_pod {
    char *name;      /**< the pod label; xmalloc'd */
    double running;  /**< running requests, NAN when the answer has none for the pod */
    double waiting;  /**< waiting requests, NAN likewise */
    bool counted;    /**< in the rate */
    double requests; /**< the request counter's newest value, NAN likewise */
    int64_t at_ms;   /**< its series' newest sample time (unix ms), 0 unknown */
    int64_t at_min_ms; /**< ... and oldest, 0 unknown */
    double refused;    /**< the refused requests' counter's newest value, NAN none */
    double samples;    /**< the samples of its series in the rate window ending at the
                            query's time (the series with the most), 0 unknown */
    int64_t before_ms; /**< the newest sample time before that window (of any series), 0
                            none: a series that young, or unknown. With one series, or all
                            sampled at once, its scrape interval is
                            (at_ms - before_ms) / samples, as rate() spaces them */
    int dup;           /**< its addresses (`instance`) whose counter more than one scrape
                            target has (their series differing in job, service, endpoint or
                            container only): Prometheus counts them twice or more; 0 none */
};

/** The per-pod answer, one entry a pod, sorted by name. */
struct promql_pods {
    struct promql_pod *v;
    size_t n;
    bool running_seen, waiting_seen, counted_seen; /**< some pod has that part */
};

/**
 * Parse the answer of promql_default_pods' query: the envelope as
 * promql_parse_response checks it, then a vector (empty is fine: no pod has
 * any part). A series without PROMQL_PART_LABEL or pod, of an unknown part,
 * or with a gauge or counter that is not a finite value >= 0 (a time not one
 * in 1970..5138, a sample count under 1) is skipped; two series of one pod
 * and part add up (times and sample counts: the newest and the most; the
 * oldest for at_min_ms). Returns 0, or -EREMOTEIO / -EBADMSG as
 * promql_parse_response (more than PROMQL_MAX_POINTS series is -EBADMSG),
 * with err set and out empty. Pure; free out with promql_pods_free.
 */
int promql_parse_pods(const char *body, size_t len, struct promql_pods *out, char *err,
                      size_t errlen);
void promql_pods_free(struct promql_pods *p);

/* ---- the client ------------------------------------------------------------ */

/** One extra request header, such as a tenant's `X-Scope-OrgID` (Mimir,
 *  Cortex, Loki's gateway) or `THANOS-TENANT`. */
struct promql_header {
    const char *name;
    const char *value;
};

/** The default {{window}} of the queries, and its seconds: four samples at
 *  kube-prometheus' scrape interval of 30 s (rate() needs two). */
#define PROMQL_WINDOW "2m"
#define PROMQL_WINDOW_S 120

/** At most this many extra headers. */
#define PROMQL_MAX_HEADERS 32

struct promql_config {
    const char *url;        /**< base URL, e.g. "http://prometheus-k8s.monitoring:9090" */
    const char *ca_file;    /**< CA bundle for https, or NULL for the system store */
    const char *cert_file;  /**< client certificate for mutual TLS, with key_file, or NULL */
    const char *key_file;
    const char *token_file; /**< bearer token, re-read for every request (rotation), or NULL */
    const char *username;   /**< basic auth user (no ':'), with password_file; not with
                                 token_file */
    const char *password_file; /**< basic auth password, re-read for every request */
    const struct promql_header *headers; /**< extra headers (promql_header_check), copied */
    size_t n_headers;
    const char *window;     /**< {{window}}, default PROMQL_WINDOW ("2m") */
    int64_t timeout_ms;     /**< per request, default 10 s */
    size_t max_body;        /**< cap on an instant answer, default 1 MiB (range: 64x) */
};

void promql_config_init(struct promql_config *c);

/**
 * Check one extra header: the name an HTTP token (RFC 9110), not one the
 * client sets itself or one that changes the connection (the reserved list of
 * Prometheus' own HTTP client, plus Accept, TE, Trailer, Upgrade, Expect and
 * Transfer-Encoding; Authorization too: credentials come from files, never
 * from the config), the value without control characters other than tab, at
 * most 8 KiB. Returns 0, or -EINVAL with a one-line reason in err. Pure.
 */
int promql_header_check(const char *name, const char *value, char *err, size_t errlen);

/**
 * Check a whole config's authentication and headers, as promql_new does:
 * token_file and username exclusive, username and password_file together,
 * cert_file and key_file together, each header valid, no name twice (case
 * insensitive), at most PROMQL_MAX_HEADERS. Returns 0, or -EINVAL with a
 * reason in err. Pure: files are not read.
 */
int promql_config_check(const struct promql_config *c, char *err, size_t errlen);

struct promql;

/**
 * Create a client on loop over h (borrowed; must outlive the client). cfg's
 * strings are copied. Returns 0, or -EINVAL for a missing or non-http(s) URL,
 * a bad window or what promql_config_check refuses.
 */
int promql_new(uv_loop_t *loop, struct httpc *h, const struct promql_config *cfg,
               struct promql **out);

/** One workload's queries. Strings are borrowed for the call only. */
struct promql_target {
    const char *ns;
    const char *deployment;
    const struct scrape_spec *spec; /**< for the default templates */
    const char *rate_tmpl;          /**< gpuscaler.io/promql-rate, or NULL/"" for the default */
    const char *p99_tmpl;           /**< gpuscaler.io/promql-p99 (seconds), or NULL/"" */
    const char *busy_tmpl;          /**< gpuscaler.io/promql-busy (requests in service),
                                         or NULL/"" for the default */
    /** The rate, p99 and busy queries are evaluated this long before now_ms,
     *  where Prometheus' newest samples end (0: at now_ms); the per-pod query
     *  stays at now_ms, so that its sample times keep measuring how far
     *  behind they are. A window evaluated past its newest sample reads low:
     *  its end holds no data, and rate() extrapolates over a gap of at most
     *  half a sample interval. */
    int64_t lag_ms;
};

/** Why each optional query of a promql_get failed: "" when it answered (no
 *  data included: no traffic), was not asked, or was not needed. The caller
 *  logs them (once per change: the reasons carry times and counts). */
struct promql_notes {
    char p99[200];
    char busy[200];
    char pods[200];
    char refused[200];
    bool cancelled; /**< a query was cancelled (the client closing): nothing to log */
};

/**
 * Called once with the result. pods_* and gpus_ready are 0; inflight,
 * queued, backlog and waiting are -1 (pods has what the pods report one by
 * one: the controller matches it against its cache). busy is the busy-time
 * query's answer (the requests in service, averaged over the window), or -1
 * when there is no such query, it has no data, or it failed. rejected_rate
 * is the refused requests' query's answer (promql_default_refused, asked
 * beside the default rate when the spec names a rejected_metric; no data
 * is 0), NAN when not asked or it failed; rejected_recent is NAN. A p99,
 * busy, per-pod or refused failure leaves that part unknown (pods NULL) and
 * the result valid; any rate failure makes it invalid. pods is borrowed for
 * the call; NULL when there was no per-pod query or it failed.
 */
typedef void (*promql_result_cb)(const struct scrape_result *r, const struct promql_pods *pods,
                                 const struct promql_notes *notes, void *arg);

/**
 * Instant queries of the rate, p99, busy time, per-pod parts and refused requests at now_ms (UNIX
 * ms; "time=" of the query; all but the per-pod one t->lag_ms earlier). Returns 0 and calls cb
 * exactly once later from the loop, or a
 * negative errno (then cb is never called): -EINVAL when the templates do
 * not expand (err says why), -ESHUTDOWN when closing.
 */
int promql_get(struct promql *p, const struct promql_target *t, int64_t now_ms,
               promql_result_cb cb, void *arg, char *err, size_t errlen);

/** Outcome of promql_seed. */
struct promql_seed_result {
    int err;             /**< 0 or the first failure's negative errno */
    size_t observed;     /**< points given to forecast_observe */
    size_t skipped;      /**< NaN, infinite or negative points, or refused by the forecaster */
    size_t retried;      /**< chunks asked again after a timeout, a dropped connection or a
                              5xx (each up to twice; a third failure fails the seed) */
    char why[200];       /**< when err: one line */
};
typedef void (*promql_seed_cb)(const struct promql_seed_result *r, void *arg);

/**
 * Seed f (borrowed until cb) with the rate over [now_ms - lookback_ms,
 * now_ms] (the default rate with the refused requests', as the demand counts
 * them: "R + (refused or vector(0))"; a promql-rate of the user's alone) at step_ms (default 60 s when 0) through /api/v1/query_range, in
 * chunks of at most 1,440 steps (a day of minutes: each chunk's points are
 * observed in one loop callback; Prometheus' limit is 11,000 points),
 * oldest first, each point passed to forecast_observe(). Each chunk waits up
 * to 60 s (timeout_ms if longer) and is asked again, up to three
 * times in all, a tenth of timeout_ms and then a fifth later, after a
 * timeout, a refused or dropped connection or a 5xx; another failure, or a
 * third, ends the seed there. Returns 0 and calls cb exactly
 * once later, or a negative errno as promql_get.
 */
int promql_seed(struct promql *p, const struct promql_target *t, int64_t now_ms,
                int64_t lookback_ms, int64_t step_ms, struct forecast *f, promql_seed_cb cb,
                void *arg, char *err, size_t errlen);

/** Most points promql_range() collects (a year at 10 s, 46 days at 1 s). */
#define PROMQL_MAX_RANGE_POINTS 4000000

/** Outcome of promql_range. */
struct promql_range_result {
    int err;                    /**< 0, -ENODATA (no point at all), -E2BIG (over
                                     PROMQL_MAX_RANGE_POINTS) or the first failure's errno */
    struct promql_series series;/**< the points, oldest first, NaN and Inf included; the
                                     callback may take them (then set points NULL, npoints 0),
                                     else they are freed after it returns */
    char why[200];              /**< when err: one line */
};
typedef void (*promql_range_cb)(struct promql_range_result *r, void *arg);

/**
 * Range query of a literal PromQL expression q (no placeholders are
 * expanded; it must return one series) over [start_ms, end_ms] at step_ms
 * (UNIX ms) through /api/v1/query_range, in chunks of at most 10,000 steps,
 * oldest first, each asked as promql_seed's are (60 s, three times at
 * most). A chunk without data is skipped (the series did not exist yet);
 * any other failure ends the query. Returns 0 and calls cb exactly
 * once later from the loop, or a negative errno (cb is never called):
 * -EINVAL (empty or too long query, step <= 0, start >= end), -E2BIG (more
 * than PROMQL_MAX_RANGE_POINTS steps), -ESHUTDOWN (closing); err says why.
 */
int promql_range(struct promql *p, const char *q, int64_t start_ms, int64_t end_ms,
                 int64_t step_ms, promql_range_cb cb, void *arg, char *err, size_t errlen);

/** The {{window}} of p's queries, in milliseconds. */
int64_t promql_window_ms(const struct promql *p);

typedef void (*promql_close_cb)(void *arg);
/** Cancel running queries (their callbacks run with an invalid result /
 *  -ECANCELED), free everything once they have, then call cb (may be NULL). */
void promql_close(struct promql *p, promql_close_cb cb, void *arg);

#endif

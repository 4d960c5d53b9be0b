/* SPDX-License-Identifier: Apache-2.0 */
/* controller: the live half of gpuscaler. It reads the daemon's configuration,
 * turns each opted-in Deployment's gpuscaler.io annotations into a workload
 * configuration, and every decision interval feeds the measured request rate
 * to the policy core and acts on the decision.
 *
 * This header has two layers: pure configuration parsing (daemon config file,
 * annotations, the status annotation), usable and tested without any I/O, and
 * the running controller on a libuv loop. */
#ifndef GPUSCALER_CONTROLLER_H
#define GPUSCALER_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capacity/capacity.h"
#include "conf/conf.h"
#include "policy/policy.h"
#include "promql/promql.h"
#include "scrape/scrape.h"

#define CTL_ANNOTATION_PREFIX "gpuscaler.io/"
#define CTL_MAX_NAMESPACES 64
#define CTL_MAX_DEFAULTS 64
#define CTL_MAX_HEADERS 32 /* PROMQL_MAX_HEADERS */

/* ---- daemon configuration (the YAML config file, flags override) ------- */

struct ctl_kv {
    char *key;   /**< annotation key without the prefix */
    char *value;
};

struct ctl_config {
    int64_t decision_interval_ms;     /**< decision-interval, default 15 s */
    char *namespaces[CTL_MAX_NAMESPACES]; /**< namespaces; none = all */
    size_t n_namespaces;
    char *log_format;                 /**< log.format: json | logfmt (default logfmt) */
    char *log_level;                  /**< log.level, default info */
    struct {
        bool enabled;                 /**< default true */
        char *namespace_;             /**< default $POD_NAMESPACE or "default" */
        char *lease_name;             /**< default "gpuscaler" */
        int64_t lease_duration_ms;    /**< 15 s */
        int64_t renew_deadline_ms;    /**< 10 s */
        int64_t retry_period_ms;      /**< 2 s */
    } leader;
    struct {
        bool enabled;                 /**< sharding.enabled, default false (one leader) */
        int64_t shards;               /**< sharding.shards, default 16 (1 to SHARD_MAX) */
        char *lease_prefix;           /**< sharding.lease-prefix, default "gpuscaler-shard":
                                           Leases <prefix>-<shard> and <prefix>-member-<id> */
    } sharding;
    struct {
        char *metrics;                /**< listen.metrics, default "0.0.0.0:9090" */
        char *health;                 /**< listen.health (probes), default "0.0.0.0:8081" */
        char *external_metrics;       /**< listen.external-metrics, default "0.0.0.0:6443" */
    } listen;
    struct {
        bool enabled;                 /**< external-metrics.enabled, default false */
        char *tls_cert_file, *tls_key_file;
        char *upstream_url, *upstream_ca_file, *upstream_cert_file, *upstream_key_file,
            *upstream_token_file;
    } extmetrics;
    struct {
        char *url;                    /**< prometheus.url; "" = not configured */
        char *ca_file, *cert_file, *key_file, *token_file;
        char *username, *password_file; /**< basic auth (password re-read per request) */
        struct ctl_kv headers[CTL_MAX_HEADERS]; /**< prometheus.headers: name, value */
        size_t n_headers;
    } prometheus;
    struct {
        int64_t interval_ms;          /**< scrape.interval, 5 s */
        int64_t timeout_ms;           /**< scrape.timeout, 2 s */
        double missing_fraction;      /**< scrape.missing-fraction, 0.3 */
        int64_t rate_window_ms;       /**< scrape.rate-window, 60 s */
    } scrape;
    struct {
        int64_t refresh_interval_ms;  /**< status.refresh-interval, 4 min: an unchanged
                                           gpuscaler.io/status is rewritten this often, and
                                           other replicas serve it up to 5/4 of it old */
        int64_t writes_per_second;    /**< status.writes-per-second, 20: refreshes a second */
    } status;
    char *checkpoint_configmap;       /**< checkpoint.configmap, default "gpuscaler-state" */
    int64_t checkpoint_configmaps;    /**< checkpoint.configmaps: how many, 1..1000, default 64 */
    struct ctl_kv defaults[CTL_MAX_DEFAULTS]; /**< defaults: annotation values for all workloads */
    size_t n_defaults;
};

/** Fill in every default; ctl_config_free() releases what init allocated. */
void ctl_config_init(struct ctl_config *c);
void ctl_config_free(struct ctl_config *c);

/**
 * Apply a parsed YAML config file. Unknown keys, wrong types and bad values
 * are errors with the line of the offending node, found here rather than
 * when the value is first used: listen addresses are HOST:PORT with an IP
 * host, URLs http(s) with a host, Kubernetes names valid DNS-1123 names
 * (checkpoint.configmap at most 200 characters), durations within each key's
 * range, log.format and log.level known values, and ctl_config_validate()'s
 * checks across keys. Pure: files are checked by ctl_config_check_files().
 * Returns 0 or -EINVAL; on error c may be partly updated (callers discard it).
 */
int ctl_config_apply(struct ctl_config *c, const struct conf_node *root, struct conf_error *err);
/** ctl_config_apply() without the checks across keys, for a caller that sets
 *  more keys over the file (flags) and runs ctl_config_validate() on them all. */
int ctl_config_apply_keys(struct ctl_config *c, const struct conf_node *root,
                          struct conf_error *err);
/** The line of the file (root) where key, as ctl_config_validate() blames it,
 *  is set (or its section); 0 when the file does not set it. */
int ctl_config_line(const struct conf_node *root, const char *key);

/**
 * Set one scalar key ("listen.metrics") from a string with the same checks
 * as the file, for flags that override it. Returns 0, -ENOENT for a key that
 * is unknown or not a scalar, or -EINVAL with err as "key: what is wrong".
 */
int ctl_config_set(struct ctl_config *c, const char *key, const char *value, char *err,
                   size_t errlen);

/**
 * The Prometheus client's settings of c's prometheus.* keys (strings
 * borrowed from c); hs holds the headers, pc points at it.
 */
void ctl_config_promql(const struct ctl_config *c, struct promql_config *pc,
                       struct promql_header hs[CTL_MAX_HEADERS]);

/**
 * A listen.* address "HOST:PORT" (HOST an IPv4 address, an IPv6 one in
 * brackets, or empty for every IPv4 address) split into host (brackets
 * removed; "0.0.0.0" for an empty one) and port. -EINVAL when it is not one.
 */
int ctl_listen_addr_split(const char *addr, char *host, size_t hostlen, int *port);

/**
 * The checks across keys: retry-period < renew-deadline < lease-duration,
 * TLS certificate and key files given together, sharding only with
 * leader-election enabled (it uses its namespace and durations). Returns 0, or -EINVAL with
 * err and *key (when key is not NULL) set to the key to blame.
 */
int ctl_config_validate(const struct ctl_config *c, const char **key, char *err, size_t errlen);

/**
 * Check that every file the enabled features will read (serving certificate
 * and key, upstream and Prometheus CA, client certificate and token files)
 * is readable now, so a wrong path fails at startup, not at first use.
 * root (may be NULL) gives err its line. Returns 0 or -errno with err
 * "key: cannot read PATH: reason".
 */
int ctl_config_check_files(const struct ctl_config *c, const struct conf_node *root,
                           struct conf_error *err);

/** True when s is a valid namespace name (a DNS-1123 label), as `namespaces` requires. */
bool ctl_config_namespace_valid(const char *s);

/** Config keys as dotted paths ("leader-election.lease-name"), for docs checks. */
size_t ctl_config_key_count(void);
const char *ctl_config_key_name(size_t i);

/* ---- per-Deployment configuration from annotations ----------------------- */

enum ctl_mode { CTL_MODE_SCALE, CTL_MODE_EXTERNAL_METRIC };
enum ctl_source { CTL_SOURCE_SCRAPE, CTL_SOURCE_PROMETHEUS };

struct ctl_workload_config {
    struct policy_config policy;
    enum ctl_mode mode;
    enum ctl_source source;
    /** gpuscaler.io/paused: decide and report, but leave the replicas as they
     *  are (mode external-metric: serve the current count as desired) */
    bool paused;
    struct scrape_spec scrape;
    char promql_rate[512];  /**< PromQL template for the request rate ("" = profile default) */
    char promql_p99[512];   /**< PromQL template for p99 latency in seconds */
    char promql_busy[512];  /**< PromQL template for the requests in service ("" = default) */
};

/**
 * Build a workload's configuration from its annotations (keys with the
 * gpuscaler.io/ prefix; others ignored) over the config file's defaults.
 * Returns 0, or -EINVAL with bad_key (the annotation key, with prefix) and err
 * naming the reason; then the workload must be held, not guessed at.
 * "gpuscaler.io/enabled" and "gpuscaler.io/status" are accepted and ignored.
 */
int ctl_workload_parse(const struct ctl_config *defaults, const char *const *keys,
                       const char *const *values, size_t n, struct ctl_workload_config *out,
                       char *bad_key, size_t bad_key_len, char *err, size_t errlen);

/** Non-policy annotation keys (without prefix), for docs checks. */
size_t ctl_annotation_key_count(void);
const char *ctl_annotation_key_name(size_t i);

struct forecast_config;

/**
 * The forecaster configuration of a workload with policy config p: its
 * season and quantile, and the rate floor policy_rate_floor(p). Checkpoints
 * are restored into a forecaster of the same season and quantile, keeping
 * their own rate floor while it is within CTL_FLOOR_KEPT of this one.
 */
void controller_forecast_config(const struct policy_config *p, struct forecast_config *fc);

/** The capacity part of the status: what the decision sized with and what
 *  the pods' metrics show. */
struct ctl_status_capacity {
    double in_use;          /**< per GPU sized with, in the demand unit; NAN none */
    const char *source;     /**< capacity_source_name() */
    const struct capacity_estimate *est;
    int mismatch;           /**< capacity_mismatch() of a configured value */
    /** what the last tick's requests in service came from: "busy-time" (the
     *  pods' busy-time counter), "gauge" (the in-flight gauge), NULL neither */
    const char *in_service;
    const char *demand_unit; /**< "tokens" adds "demandUnit" and "tokensPerRequest" (the
                                  figures are then weighted tokens/s); NULL: requests */
    double tokens_per_request; /**< measured weighted tokens per request, NAN unknown */
    bool refused_named;     /**< a rejected_metric is read: adds "refusedRequestsPerSecond" */
    double refused_rps;     /**< ... the requests the pods refused (req/s), NAN unknown */
};

/** The learned cold start of the status, in its two parts (0: not seen). */
struct ctl_status_start {
    int64_t schedule_ms;    /**< creation to PodScheduled, longest of the Ready pods */
    int64_t load_ms;        /**< PodScheduled to Ready (model load), longest of them */
};

/**
 * The gpuscaler.io/status annotation value: compact JSON with the decision
 * time (RFC 3339), desired, requests/GPU, forecast, reason, explanation, the
 * replicas that cannot be scheduled, the sustained-rule clocks as RFC 3339
 * times and, when cap is not NULL, the capacity, when start is not NULL and
 * a cold start was seen, its two parts. now_unix_ms is wall time; decision
 * times are on the same timeline. Caller frees with xfree.
 */
char *ctl_status_json(int64_t now_unix_ms, const struct policy_decision *d,
                      const struct ctl_status_capacity *cap,
                      const struct ctl_status_start *start);

/* ---- the running controller --------------------------------------------- */

struct kube;
struct kube_cache;
struct scrape;
struct promql;
struct util_buf;

struct ctl_opts {
    const char *identity;     /**< leader-election identity (pod name) */
    bool dry_run;             /**< decide and report in logs, but write nothing */
    const char *record_dir;   /**< append observed rates as trace CSVs here, or NULL */
    bool leader_elect;        /**< false: act as leader at once (single instance) */
    struct promql *promql;    /**< Prometheus-server source (borrowed), or NULL when
                                   prometheus.url is not configured */
};

struct controller;

/**
 * Start the controller on loop: leader election (when enabled), the decision
 * timer (cfg->decision_interval_ms), HPA-conflict checks and forecaster
 * checkpoints. k, cache and s are borrowed and must outlive the controller;
 * cfg is borrowed too. Nothing is written for a Deployment before the
 * caches of its namespace have synced and this instance leads. Returns 0 or a negative errno.
 */
int controller_new(uv_loop_t *loop, struct kube *k, struct kube_cache *cache, struct scrape *s,
                   const struct ctl_config *cfg, const struct ctl_opts *o,
                   struct controller **out);

typedef void (*controller_close_cb)(void *arg);

/**
 * Stop: stop acting, checkpoint the forecasters, release the leases held
 * once those saves have answered (at most CTL_CLOSE_SAVE_WAIT_MS, 5 s),
 * finish in-flight writes (bounded by a few seconds), then free everything
 * and call cb from the loop.
 */
void controller_close(struct controller *c, controller_close_cb cb, void *arg);

/** Every cache synced: each namespace's Deployments and Pods listed once
 *  (gpuscaler_caches_synced). */
bool controller_synced(const struct controller *c);
/** Ready to serve: every namespace's caches listed, but for a namespace whose
 *  lists have failed for 30 s (its Deployments held), with one listed at
 *  least; with the caches of all namespaces, controller_synced(). */
bool controller_ready(const struct controller *c);
/** Leading now (acting on the cluster). */
bool controller_leading(const struct controller *c);

/** Append gpuscaler's own metrics in Prometheus text format. */
void controller_write_metrics(struct controller *c, struct util_buf *out);

/** Heap bytes held by the tracked workloads' forecasters (forecast_memory summed). */
size_t controller_forecast_memory(const struct controller *c);

/** One tracked workload's latest decision, as served to HPAs. */
struct ctl_workload_view {
    const char *ns;
    const char *name;
    bool valid;                /**< a fresh decision made from valid metrics: otherwise the
                                    numbers are not served (an HPA then holds) */
    int64_t time_ms;           /**< UNIX ms of that decision */
    int64_t window_s;          /**< rate window behind the numbers */
    int32_t desired;
    double requests_per_gpu;   /**< NAN when unknown */
    double forecast_requests_per_gpu;
    double utilization;
};

typedef void (*ctl_view_cb)(const struct ctl_workload_view *v, void *arg);

/**
 * Call cb once per tracked workload in namespace ns (all namespaces when ns
 * is NULL), synchronously. Returns the number visited.
 */
size_t controller_visit(struct controller *c, const char *ns, ctl_view_cb cb, void *arg);

/** Run one decision round now (tests and the first tick). */
void controller_tick(struct controller *c);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* controller/workload: a Deployment's gpuscaler.io annotations (over the
 * config file's defaults) into its workload configuration, and the
 * gpuscaler.io/status annotation written back. Pure: annotation values are
 * outside input from anyone who can edit a Deployment, so every value is
 * validated and the first bad one is reported by key. */
#include "controller.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "promql/promql.h"
#include "util/util.h"

static const char *const ctl_keys[] = {
    "enabled",        "status",         "mode",           "metrics-source",
    "metrics-profile", "metrics-port",  "metrics-path",   "metrics-scheme",
    "request-metric", "inflight-metric", "queue-metric",  "latency-metric",
    "missing-fraction", "promql-rate",  "promql-p99",     "prompt-token-metric",
    "generation-token-metric", "busy-time-metric", "promql-busy", "paused",
    "rejected-metric",
};

size_t ctl_annotation_key_count(void)
{
    return UTIL_ARRAY_LEN(ctl_keys);
}

const char *ctl_annotation_key_name(size_t i)
{
    return i < UTIL_ARRAY_LEN(ctl_keys) ? ctl_keys[i] : NULL;
}

static bool printable(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

/* A container port's name as Kubernetes validates it (IsValidPortName,
 * IANA_SVC_NAME): 1 to 15 of a-z, 0-9 and '-', at least one letter, no '-'
 * at either end or twice in a row. */
static bool port_name_ok(const char *s)
{
    size_t n = strlen(s);
    bool letter = false;
    if (n == 0 || n > 15 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch >= 'a' && ch <= 'z')
            letter = true;
        else if (!(ch >= '0' && ch <= '9') && ch != '-')
            return false;
        if (ch == '-' && s[i + 1] == '-')
            return false;
    }
    return letter;
}

#define BAD(...)                                   \
    do {                                           \
        snprintf(err, errlen, __VA_ARGS__);        \
        return -EINVAL;                            \
    } while (0)

/* Apply one non-policy key. Returns 0, -EINVAL (err set) or -ENOENT. */
static int apply_ctl_key(struct ctl_workload_config *w, const char *k, const char *v, char *err,
                         size_t errlen)
{
    if (strcmp(k, "enabled") == 0) {
        bool b;
        if (util_parse_bool(v, &b) != 0)
            BAD("enabled: '%.40s' is not true or false", v);
        return 0;
    }
    if (strcmp(k, "status") == 0 || strcmp(k, "metrics-profile") == 0)
        return 0; /* status is ours; the profile was applied first */
    if (strcmp(k, "mode") == 0) {
        if (strcmp(v, "scale") == 0)
            w->mode = CTL_MODE_SCALE;
        else if (strcmp(v, "external-metric") == 0)
            w->mode = CTL_MODE_EXTERNAL_METRIC;
        else
            BAD("mode: '%.40s' is not scale or external-metric", v);
        return 0;
    }
    if (strcmp(k, "paused") == 0) {
        if (util_parse_bool(v, &w->paused) != 0)
            BAD("paused: '%.40s' is not true or false", v);
        return 0;
    }
    if (strcmp(k, "metrics-source") == 0) {
        if (strcmp(v, "scrape") == 0)
            w->source = CTL_SOURCE_SCRAPE;
        else if (strcmp(v, "prometheus") == 0)
            w->source = CTL_SOURCE_PROMETHEUS;
        else
            BAD("metrics-source: '%.40s' is not scrape or prometheus", v);
        return 0;
    }
    if (strcmp(k, "metrics-port") == 0) {
        int64_t p;
        w->scrape.port = 0;
        w->scrape.port_name[0] = '\0';
        if (util_parse_int64(v, &p) == 0) {
            if (p < 1 || p > 65535)
                BAD("metrics-port: '%.40s' is not a port number (1 to 65535)", v);
            w->scrape.port = (int)p;
        } else if (port_name_ok(v)) {
            snprintf(w->scrape.port_name, sizeof(w->scrape.port_name), "%s", v);
        } else {
            BAD("metrics-port: '%.40s' is neither a port number (1 to 65535) nor a port name "
                "(at most 15 of a-z, 0-9 and '-', with a letter, no '-' at either end or twice "
                "in a row)",
                v);
        }
        return 0;
    }
    if (strcmp(k, "metrics-path") == 0) {
        if (v[0] != '/' || strlen(v) >= sizeof(w->scrape.path) || strchr(v, ' ') || !printable(v))
            BAD("metrics-path: '%.40s' must be an absolute URL path like /metrics", v);
        snprintf(w->scrape.path, sizeof(w->scrape.path), "%s", v);
        return 0;
    }
    if (strcmp(k, "metrics-scheme") == 0) {
        if (strcmp(v, "http") != 0 && strcmp(v, "https") != 0)
            BAD("metrics-scheme: '%.40s' is not http or https", v);
        snprintf(w->scrape.scheme, sizeof(w->scrape.scheme), "%s", v);
        return 0;
    }
    struct {
        const char *key;
        char *field;
    } metrics[] = {
        {"request-metric", w->scrape.request_metric},
        {"inflight-metric", w->scrape.inflight_metric},
        {"queue-metric", w->scrape.queue_metric},
        {"latency-metric", w->scrape.latency_metric},
        {"prompt-token-metric", w->scrape.prompt_token_metric},
        {"generation-token-metric", w->scrape.generation_token_metric},
        {"busy-time-metric", w->scrape.busy_metric},
        {"rejected-metric", w->scrape.rejected_metric},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(metrics); i++) {
        if (strcmp(k, metrics[i].key) != 0)
            continue;
        struct scrape_selector sel;
        char why[240];
        if (scrape_selector_parse(v, &sel, why, sizeof(why)) != 0)
            BAD("%s: %s", k, why);
        snprintf(metrics[i].field, SCRAPE_METRIC_MAX, "%s", v);
        return 0;
    }
    if (strcmp(k, "missing-fraction") == 0) {
        double d;
        if (util_parse_double(v, &d) != 0 || d < 0 || d > 1)
            BAD("missing-fraction: '%.40s' is not a fraction between 0 and 1", v);
        w->scrape.missing_fraction = d;
        return 0;
    }
    if (strcmp(k, "promql-rate") == 0 || strcmp(k, "promql-p99") == 0 ||
        strcmp(k, "promql-busy") == 0) {
        char *dst = k[7] == 'r' ? w->promql_rate : k[7] == 'p' ? w->promql_p99 : w->promql_busy;
        if (!*v || strlen(v) >= sizeof(w->promql_rate) || !printable(v))
            BAD("%s: must be a PromQL expression of at most 511 printable characters", k);
        /* its placeholders, now: a typo held the Deployment at every query
         * instead; so did one too long once expanded, even for short names */
        char q[PROMQL_MAX_QUERY], why[160];
        if (promql_expand(v, "ns", "name", PROMQL_WINDOW, q, sizeof(q), why, sizeof(why)) != 0)
            BAD("%s: %s", k, why);
        snprintf(dst, sizeof(w->promql_rate), "%s", v);
        return 0;
    }
    return -ENOENT;
}

static int apply_one(struct ctl_workload_config *w, const char *k, const char *v, char *err,
                     size_t errlen)
{
    int rc = apply_ctl_key(w, k, v, err, errlen);
    if (rc != -ENOENT)
        return rc;
    rc = policy_config_set(&w->policy, k, v, err, errlen);
    if (rc == -ENOENT)
        snprintf(err, errlen, "unknown annotation gpuscaler.io/%.60s", k);
    return rc == 0 ? 0 : -EINVAL;
}

/* The key a refusal about `key` names: the Deployment's annotation when it
 * has it, else the config file's default that set it ("defaults.<key>"),
 * else the annotation (a built-in default: the annotation overrides it). An
 * Event naming gpuscaler.io/min-replicas on a Deployment without it sent
 * its owner looking for an annotation that was a default. */
static void blame(const struct ctl_config *defaults, const char *const *keys, size_t n,
                  const char *key, char *bad_key, size_t bad_key_len)
{
    static const size_t plen = sizeof(CTL_ANNOTATION_PREFIX) - 1;
    for (size_t i = 0; i < n; i++)
        if (strncmp(keys[i], CTL_ANNOTATION_PREFIX, plen) == 0 &&
            strcmp(keys[i] + plen, key) == 0) {
            snprintf(bad_key, bad_key_len, CTL_ANNOTATION_PREFIX "%s", key);
            return;
        }
    for (size_t i = 0; i < defaults->n_defaults; i++)
        if (strcmp(defaults->defaults[i].key, key) == 0) {
            snprintf(bad_key, bad_key_len, "defaults.%s", key);
            return;
        }
    snprintf(bad_key, bad_key_len, CTL_ANNOTATION_PREFIX "%s", key);
}

/* demand-unit tokens: the token counters to scrape (the profile's, or the
 * annotations'), or why there are none; requests: none are read. */
static int token_metrics(struct ctl_workload_config *w, const struct ctl_config *defaults,
                         const char *const *keys, size_t n, char *bad_key, size_t bad_key_len,
                         char *err, size_t errlen)
{
    if (w->policy.demand_unit != POLICY_UNIT_TOKENS) {
        w->scrape.prompt_token_metric[0] = '\0';
        w->scrape.generation_token_metric[0] = '\0';
        return 0;
    }
    blame(defaults, keys, n, "demand-unit", bad_key, bad_key_len);
    if (w->source != CTL_SOURCE_SCRAPE) {
        snprintf(err, errlen,
                 "demand-unit: tokens needs metrics-source scrape (the PromQL templates give "
                 "a request rate); use demand-unit requests with metrics-source prometheus");
        return -EINVAL;
    }
    if (scrape_spec_want_tokens(&w->scrape) != 0) {
        const char *p = scrape_profile_name(w->scrape.profile);
        snprintf(err, errlen,
                 "demand-unit: tokens not available for metrics-profile %s (%s); use "
                 "demand-unit requests or set generation-token-metric",
                 p,
                 w->scrape.profile == SCRAPE_TRITON ? "Triton exposes no token counters"
                 : w->scrape.profile == SCRAPE_TEI
                     ? "an embedding or reranking server generates no tokens"
                     : "no default token counters");
        return -EINVAL;
    }
    if (bad_key_len)
        bad_key[0] = '\0';
    return 0;
}

int ctl_workload_parse(const struct ctl_config *defaults, const char *const *keys,
                       const char *const *values, size_t n, struct ctl_workload_config *out,
                       char *bad_key, size_t bad_key_len, char *err, size_t errlen)
{
    static const size_t plen = sizeof(CTL_ANNOTATION_PREFIX) - 1;
    struct ctl_workload_config w;
    memset(&w, 0, sizeof(w));
    policy_config_init(&w.policy);
    if (defaults->decision_interval_ms > 0)
        w.policy.decision_interval_ms = defaults->decision_interval_ms;
    if (bad_key_len)
        bad_key[0] = '\0';
    if (errlen)
        err[0] = '\0';

    /* The profile decides the metric-name defaults, so it goes first:
     * annotation over config default over vllm. */
    const char *profile = "vllm";
    const char *profile_key = "defaults.metrics-profile";
    for (size_t i = 0; i < defaults->n_defaults; i++)
        if (strcmp(defaults->defaults[i].key, "metrics-profile") == 0)
            profile = defaults->defaults[i].value;
    for (size_t i = 0; i < n; i++)
        if (strcmp(keys[i], CTL_ANNOTATION_PREFIX "metrics-profile") == 0) {
            profile = values[i];
            profile_key = keys[i];
        }
    enum scrape_profile p;
    if (scrape_profile_parse(profile, &p) != 0) {
        snprintf(bad_key, bad_key_len, "%s", profile_key);
        snprintf(err, errlen,
                 "metrics-profile: '%.40s' is not vllm, triton, tgi, sglang, nim, tei or generic",
                 profile);
        return -EINVAL;
    }
    scrape_spec_init(&w.scrape, p);
    w.scrape.missing_fraction = defaults->scrape.missing_fraction; /* 0: hold on any pod */

    for (size_t i = 0; i < defaults->n_defaults; i++) {
        if (apply_one(&w, defaults->defaults[i].key, defaults->defaults[i].value, err, errlen)) {
            snprintf(bad_key, bad_key_len, "defaults.%s", defaults->defaults[i].key);
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (strncmp(keys[i], CTL_ANNOTATION_PREFIX, plen) != 0)
            continue;
        if (apply_one(&w, keys[i] + plen, values[i], err, errlen)) {
            snprintf(bad_key, bad_key_len, "%.120s", keys[i]);
            return -EINVAL;
        }
    }
    if (policy_config_validate(&w.policy, err, errlen) != 0) {
        /* name the key the message is about */
        const char *colon = strchr(err, ':');
        char key[64];
        snprintf(key, sizeof(key), "%.*s", (int)(colon ? UTIL_MIN(colon - err, 63) : 0), err);
        blame(defaults, keys, n, key, bad_key, bad_key_len);
        return -EINVAL;
    }
    if (w.scrape.profile == SCRAPE_GENERIC && !w.scrape.request_metric[0] &&
        w.source == CTL_SOURCE_SCRAPE) {
        blame(defaults, keys, n, "request-metric", bad_key, bad_key_len);
        snprintf(err, errlen, "request-metric: required with metrics-profile generic");
        return -EINVAL;
    }
    if (token_metrics(&w, defaults, keys, n, bad_key, bad_key_len, err, errlen) != 0)
        return -EINVAL;
    /* the newest scrape is up to an interval and a timeout old at a tick
     * (the defaults' own check is ctl_config_validate's) */
    int64_t scrape_age = defaults->scrape.interval_ms + defaults->scrape.timeout_ms;
    if (w.source == CTL_SOURCE_SCRAPE && defaults->scrape.interval_ms > 0 &&
        w.policy.metrics_stale_after_ms <= scrape_age) {
        char st[32], age[32];
        util_format_duration(w.policy.metrics_stale_after_ms, st, sizeof(st));
        util_format_duration(scrape_age, age, sizeof(age));
        blame(defaults, keys, n, "metrics-stale-after", bad_key, bad_key_len);
        snprintf(err, errlen,
                 "metrics-stale-after: %s is not above scrape.interval plus scrape.timeout "
                 "(%s): the newest scrape would read as stale at most ticks", st, age);
        return -EINVAL;
    }
    /* Zero replicas have no pods to measure: only a rate measured where the
     * requests arrive (a gateway, a router) can tell when to wake up. */
    if (w.policy.min_replicas == 0 && (w.source != CTL_SOURCE_PROMETHEUS || !w.promql_rate[0])) {
        blame(defaults, keys, n, "min-replicas", bad_key, bad_key_len);
        snprintf(err, errlen,
                 "min-replicas: 0 needs metrics-source prometheus and a promql-rate counting "
                 "requests where they arrive (a gateway, a router): at zero no pod counts them");
        return -EINVAL;
    }
    /* capacity-start is what auto sizes with until it has learned: with a
     * number it would do nothing, so a Deployment's own is refused rather
     * than ignored (a default is for the Deployments that learn theirs) */
    bool own_start = false;
    for (size_t i = 0; i < n; i++)
        own_start |= strcmp(keys[i], CTL_ANNOTATION_PREFIX "capacity-start") == 0;
    if (own_start && w.policy.capacity_start > 0 && !w.policy.capacity_auto) {
        snprintf(bad_key, bad_key_len, CTL_ANNOTATION_PREFIX "capacity-start");
        snprintf(err, errlen,
                 "capacity-start: no effect with capacity-per-gpu %g (a number sizes from the "
                 "first tick; auto sizes with capacity-start until it learns): remove it or set "
                 "capacity-per-gpu: auto",
                 w.policy.capacity_rps_per_gpu);
        return -EINVAL;
    }
    *out = w;
    return 0;
}

static void put_time(struct util_buf *b, const char *key, int64_t t)
{
    util_buf_printf(b, ",\"%s\":", key);
    if (t == POLICY_NEVER) {
        util_buf_puts(b, "null");
        return;
    }
    char ts[40];
    util_format_rfc3339(t, ts, sizeof(ts));
    util_buf_json_str(b, ts);
}

static void put_num(struct util_buf *b, const char *key, double v)
{
    if (isfinite(v))
        util_buf_printf(b, ",\"%s\":%.4g", key, v);
    else
        util_buf_printf(b, ",\"%s\":null", key);
}

static void put_capacity(struct util_buf *b, const struct ctl_status_capacity *cap)
{
    const struct capacity_estimate *e = cap->est;
    util_buf_puts(b, ",\"capacity\":{\"perGPU\":");
    if (isfinite(cap->in_use))
        util_buf_printf(b, "%.4g", cap->in_use);
    else
        util_buf_puts(b, "null");
    util_buf_printf(b, ",\"source\":\"%s\"", cap->source);
    put_num(b, "learned", e->value);
    util_buf_printf(b, ",\"basis\":\"%s\",\"samples\":%lld", capacity_basis_name(e->basis),
                    (long long)e->samples);
    put_num(b, "highestSeen", e->lower);
    put_num(b, "saturation", e->saturation);
    put_num(b, "slotsPerGPU", e->slots_per_gpu);
    if (cap->in_service)
        util_buf_printf(b, ",\"inService\":\"%s\"", cap->in_service);
    if (cap->mismatch)
        util_buf_printf(b, ",\"mismatch\":\"%s\"",
                        cap->mismatch > 0 ? "configured-too-high" : "configured-too-low");
    util_buf_puts(b, "}");
}

char *ctl_status_json(int64_t now_unix_ms, const struct policy_decision *d,
                      const struct ctl_status_capacity *cap,
                      const struct ctl_status_start *start)
{
    struct util_buf b = {0};
    char ts[40];
    util_format_rfc3339(now_unix_ms, ts, sizeof(ts));
    util_buf_puts(&b, "{\"time\":");
    util_buf_json_str(&b, ts);
    util_buf_printf(&b, ",\"desired\":%d,\"reason\":", d->desired);
    util_buf_json_str(&b, policy_reason_name(d->reason));
    /* with tokens every rate below (requests... keys included) is weighted tokens/s */
    if (cap && cap->demand_unit && strcmp(cap->demand_unit, "tokens") == 0) {
        util_buf_puts(&b, ",\"demandUnit\":\"tokens\"");
        put_num(&b, "tokensPerRequest", cap->tokens_per_request);
    }
    put_num(&b, "requestsPerGPU", d->requests_per_gpu);
    put_num(&b, "utilization", d->utilization);
    put_num(&b, "forecastRequestsPerGPU", d->forecast_requests_per_gpu);
    put_num(&b, "demandRequestsPerSecond", d->demand_rps);
    if (cap && cap->refused_named)
        put_num(&b, "refusedRequestsPerSecond", cap->refused_rps);
    put_num(&b, "forecastRequestsPerSecond", d->forecast_rps);
    if (isfinite(d->forecast_rps))
        put_num(&b, "likelyForecastRequestsPerSecond", d->forecast_likely_rps);
    put_num(&b, "perReplicaRequestsPerSecond", d->per_replica_rps);
    util_buf_printf(&b, ",\"sizing\":\"%s\"", d->sla_sized ? "p99-latency-target"
                                                              : "target-utilization");
    util_buf_printf(&b, ",\"needReplicas\":%d", d->need_now);
    if (isfinite(d->forecast_rps))
        util_buf_printf(&b, ",\"forecastNeedReplicas\":%d", d->need_forecast);
    if (d->reason == POLICY_HOLD_AT_MAX)
        util_buf_printf(&b, ",\"atMaxReplicas\":true,\"wantReplicas\":%d", d->want);
    util_buf_printf(&b, ",\"unschedulableReplicas\":%d", d->unschedulable);
    if (d->stalled > 0)
        util_buf_printf(&b, ",\"stalledReplicas\":%d", d->stalled);
    if (d->reason == POLICY_HOLD_GPU_CAPACITY)
        util_buf_printf(&b, ",\"atGPUCapacity\":true,\"wantReplicas\":%d", d->want);
    if (cap)
        put_capacity(&b, cap);
    if (start && (start->schedule_ms > 0 || start->load_ms > 0))
        util_buf_printf(&b, ",\"coldStart\":{\"scheduleSeconds\":%.4g,\"loadSeconds\":%.4g}",
                        (double)start->schedule_ms / 1000.0, (double)start->load_ms / 1000.0);
    /* The live controller decides on wall-clock time, so the clocks are
     * UNIX times too. */
    put_time(&b, "aboveSince", d->above_since_ms);
    put_time(&b, "scaleOutAt", d->scale_out_at_ms);
    put_time(&b, "belowSince", d->below_since_ms);
    put_time(&b, "scaleInAt", d->scale_in_at_ms);
    util_buf_puts(&b, ",\"message\":");
    util_buf_json_str(&b, d->explain);
    util_buf_puts(&b, "}");
    return util_buf_steal(&b);
}

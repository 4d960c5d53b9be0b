/* SPDX-License-Identifier: Apache-2.0 */
/* sim/config: the simulator's configuration keys, defaults, the demo's
 * parameters and the cross-field checks.
 *
 * Keys are the policy's (through policy_config_set, the one parser of their
 * values) plus the simulator's own, below, in one flat namespace shared by
 * flags (--<key> VALUE) and the YAML file; unknown keys are errors. Like
 * policy_config_set, a failed set leaves the config unchanged. */
#include "sim-int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forecast/forecast.h"
#include "util/util.h"

enum kind {
    K_NUM = UTIL_NUMBER,
    K_INT = UTIL_WHOLE,
    K_DUR = UTIL_DURATION,
    K_POLICIES,
    K_QUANTILES,
};

struct key {
    const char *name;
    enum kind kind;
    size_t off;
    double min, max; /* inclusive; durations in ms */
    bool min_exclusive;
    const char *help;
};

#define OFF(f) offsetof(struct sim_config, f)
#define HOFF(f) (offsetof(struct sim_config, hpa) + offsetof(struct sim_hpa_config, f))
#define S_MS 1000.0
#define H_MS 3600e3
#define D_MS 86400e3

static const struct key keys[] = {
    {"policy", K_POLICIES, OFF(policies), 0, 0, false,
     "policies to compare: predictive,reactive,hpa,oracle,static-peak"},
    {"quantile-sweep", K_QUANTILES, OFF(quantile_sweep), 0, 0, false,
     "also replay predictive at these forecast-quantile values (a list); print the trade-off "
     "and chart it in --report"},
    {"sla", K_DUR, OFF(sla_ms), 0, H_MS, false, "p99 SLA scored (under 1h), 0 = p99-latency-target"},
    {"scale", K_NUM, OFF(scale), 0, 1e6, true, "multiply the trace's counts by this"},
    {"start", K_DUR, OFF(start_ms), 0, 365 * D_MS, false, "score from this far into the trace"},
    {"duration", K_DUR, OFF(duration_ms), 0, 365 * D_MS, false, "score this long, 0 = to the end"},
    {"warmup", K_DUR, OFF(warmup_ms), 0, 365 * D_MS, false,
     "replay this much before start without scoring it"},
    {"serve-capacity-per-gpu", K_NUM, OFF(serve_capacity), 0, 1e6, false,
     "the simulated GPUs' true requests/s, 0 = capacity-per-gpu (required with auto)"},
    {"gpu-limit", K_INT, OFF(gpu_limit), 0, 1e6, false,
     "GPUs the cluster has for the Deployment; replicas beyond stay Pending, 0 = no limit"},
    {"initial-replicas", K_INT, OFF(initial_replicas), 0, 10000, false,
     "replicas ready at the first second, 0 = what the load needs"},
    {"decision-interval", K_DUR, OFF(policy.decision_interval_ms), S_MS, H_MS, false,
     "controller tick"},
    {"rate-window", K_DUR, OFF(rate_window_ms), S_MS, H_MS, false,
     "window of the request rate the controller measures"},
    {"interval", K_DUR, OFF(interval_ms), S_MS, D_MS, false,
     "report interval of p99, timeline and SLA minutes"},
    {"hpa-sync-period", K_DUR, HOFF(sync_period_ms), S_MS, H_MS, false, "HPA controller sync"},
    {"hpa-tolerance", K_NUM, HOFF(tolerance), 0, 1, false, "HPA tolerance"},
    {"hpa-downscale-stabilization", K_DUR, HOFF(downscale_window_ms), 0, H_MS, false,
     "HPA scaleDown stabilizationWindowSeconds"},
    {"hpa-upscale-stabilization", K_DUR, HOFF(upscale_window_ms), 0, H_MS, false,
     "HPA scaleUp stabilizationWindowSeconds"},
    {"hpa-scale-up-pods", K_INT, HOFF(scale_up_pods), 1, 10000, false,
     "HPA scaleUp Pods policy value"},
    {"hpa-scale-up-percent", K_INT, HOFF(scale_up_percent), 1, 10000, false,
     "HPA scaleUp Percent policy value"},
    {"hpa-scale-up-period", K_DUR, HOFF(scale_up_period_ms), S_MS, H_MS, false,
     "HPA scaleUp policies' periodSeconds"},
    {"hpa-scale-down-percent", K_INT, HOFF(scale_down_percent), 1, 100, false,
     "HPA scaleDown Percent policy value"},
    {"hpa-scale-down-period", K_DUR, HOFF(scale_down_period_ms), S_MS, H_MS, false,
     "HPA scaleDown policy's periodSeconds"},
    {"hpa-target", K_NUM, HOFF(target_per_pod), 0, 1e9, false,
     "HPA AverageValue target (req/s per pod), 0 = target-utilization x capacity x GPUs"},
    {"hpa-metric-window", K_DUR, HOFF(metric_window_ms), S_MS, H_MS, false,
     "rate() window of the HPA's metric"},
    {"hpa-metric-delay", K_DUR, HOFF(metric_delay_ms), 0, H_MS, false,
     "lag of the HPA's metric (scrape, adapter, API)"},
    {"hpa-scrape-interval", K_DUR, HOFF(scrape_interval_ms), S_MS, H_MS, false,
     "scrape interval: a new pod has a rate after this"},
};

static const char *const policy_names[SIM_POLICY_COUNT] = {
    [SIM_PREDICTIVE] = "predictive",
    [SIM_REACTIVE] = "reactive",
    [SIM_HPA] = "hpa",
    [SIM_ORACLE] = "oracle",
    [SIM_STATIC_PEAK] = "static-peak",
};

const char *sim_policy_name(enum sim_policy p)
{
    return (unsigned)p < SIM_POLICY_COUNT ? policy_names[p] : "unknown";
}

/* The item of a comma-separated list at *p (n bytes), without the blanks
 * around it. */
static void trim_item(const char **p, size_t *n)
{
    while (*n > 0 && (**p == ' ' || **p == '\t')) {
        (*p)++;
        (*n)--;
    }
    while (*n > 0 && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
        (*n)--;
}

int sim_policy_parse_list(const char *s, unsigned *out)
{
    unsigned set = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        trim_item(&p, &n);
        int found = -1;
        for (int i = 0; i < SIM_POLICY_COUNT; i++)
            if (strlen(policy_names[i]) == n && strncmp(policy_names[i], p, n) == 0)
                found = i;
        if (found < 0)
            return -EINVAL;
        set |= 1u << found;
        if (!e)
            break;
        p = e + 1;
    }
    *out = set;
    return 0;
}

void sim_config_init(struct sim_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    policy_config_init(&cfg->policy);
    cfg->policy.service_time_ms = 1000; /* the simulated servers' (the policy's own default: learned) */
    cfg->sla_ms = 0;
    cfg->scale = 1;
    cfg->initial_replicas = 0;
    cfg->rate_window_ms = 60 * 1000;
    cfg->interval_ms = 60 * 1000;
    cfg->policies = (1u << SIM_POLICY_COUNT) - 1;
    struct sim_hpa_config *h = &cfg->hpa;
    h->sync_period_ms = 15 * 1000;
    h->tolerance = 0.1;
    h->downscale_window_ms = 300 * 1000;
    h->upscale_window_ms = 0;
    h->scale_up_pods = 4;
    h->scale_up_percent = 100;
    h->scale_up_period_ms = 15 * 1000;
    h->scale_down_percent = 100;
    h->scale_down_period_ms = 15 * 1000;
    h->target_per_pod = 0;
    h->metric_window_ms = 120 * 1000;
    h->metric_delay_ms = 30 * 1000;
    h->scrape_interval_ms = 15 * 1000;
}

void sim_config_demo(struct sim_config *cfg)
{
    /* A 2-GPU replica serving 5 req/s per GPU with a 2 s base latency; the
     * ServeGen trace scaled by 0.2 then needs about 10 to 55 replicas. */
    cfg->policy.capacity_rps_per_gpu = 5;
    cfg->policy.gpus_per_replica = 2;
    cfg->policy.cold_start_ms = 3 * 60 * 1000;
    cfg->policy.min_replicas = 2;
    cfg->policy.max_replicas = 100;
    cfg->policy.p99_latency_target_ms = 6000;
    cfg->policy.service_time_ms = 2000;
    cfg->scale = 0.2;
    cfg->start_ms = 2 * 86400 * 1000LL;
    cfg->warmup_ms = 2 * 86400 * 1000LL;
    cfg->duration_ms = 0;
}

void sim_forecast_config(const struct sim_config *cfg, struct forecast_config *out)
{
    struct policy_config pcfg = cfg->policy;
    pcfg.predictive = true;
    forecast_config_init(out);
    out->season_ms = pcfg.seasonality_ms;
    out->quantile = pcfg.forecast_quantile;
    out->rate_floor = policy_rate_floor(&pcfg);
}

double sim_config_capacity(const struct sim_config *cfg)
{
    return cfg->serve_capacity > 0 ? cfg->serve_capacity : cfg->policy.capacity_rps_per_gpu;
}

size_t sim_config_key_count(void)
{
    return UTIL_ARRAY_LEN(keys);
}

const char *sim_config_key_name(size_t i)
{
    return i < UTIL_ARRAY_LEN(keys) ? keys[i].name : NULL;
}

const char *sim_config_key_help(size_t i)
{
    return i < UTIL_ARRAY_LEN(keys) ? keys[i].help : NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* quantile-sweep: a comma-separated list of forecast-quantile values, each
 * checked by the policy's own parser of that key ("" or "none": no sweep);
 * sorted, duplicates dropped. */
static int set_sweep(struct sim_config *cfg, const char *name, const char *value, char *err,
                     size_t errlen)
{
    double v[SIM_MAX_SWEEP];
    size_t n = 0;
    if (strcmp(value, "none") != 0 && value[strspn(value, " \t")] != '\0') {
        const char *p = value;
        for (;;) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            trim_item(&p, &len);
            char item[64];
            if (n == SIM_MAX_SWEEP) {
                snprintf(err, errlen, "%s: at most %d values", name, SIM_MAX_SWEEP);
                return -EINVAL;
            }
            if (len >= sizeof(item)) {
                snprintf(err, errlen, "%s: '%.40s...' is not a forecast-quantile", name, p);
                return -EINVAL;
            }
            memcpy(item, p, len);
            item[len] = '\0';
            struct policy_config scratch = cfg->policy;
            char why[200];
            if (policy_config_set(&scratch, "forecast-quantile", item, why, sizeof(why)) != 0) {
                snprintf(err, errlen, "%s: %s", name, why);
                return -EINVAL;
            }
            v[n++] = scratch.forecast_quantile;
            if (!e)
                break;
            p = e + 1;
        }
        qsort(v, n, sizeof(v[0]), cmp_double);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (m == 0 || v[i] != v[m - 1])
                v[m++] = v[i];
        n = m;
    }
    memcpy(cfg->quantile_sweep, v, n * sizeof(v[0]));
    cfg->nsweep = n;
    return 0;
}

int sim_config_set(struct sim_config *cfg, const char *key, const char *value, char *err,
                   size_t errlen)
{
    const struct key *k = util_table_find(keys, UTIL_ARRAY_LEN(keys), sizeof(keys[0]), key);
    if (!k && strcmp(key, "predictive") == 0) {
        /* The policy list chooses the rows; ignoring the key left
         * `predictive: false` replaying the forecaster all the same. */
        snprintf(err, errlen,
                 "predictive: not a simulator key; the policy list chooses the rows "
                 "(predictive: false is the reactive row)");
        return -EINVAL;
    }
    if (!k) {
        int rc = policy_config_set(&cfg->policy, key, value, err, errlen);
        if (rc == -ENOENT)
            snprintf(err, errlen, "unknown key '%.60s'", key);
        return rc;
    }
    if (!value) {
        snprintf(err, errlen, "%s: missing value", k->name);
        return -EINVAL;
    }
    char *field = (char *)cfg + k->off;
    switch (k->kind) {
    case K_NUM:
    case K_INT:
    case K_DUR: {
        const struct util_range r = {k->min, k->max, k->min_exclusive, NULL, 0};
        return util_parse_ranged(k->name, (enum util_kind)k->kind, &r, value, field, err, errlen);
    }
    case K_POLICIES: {
        unsigned set;
        if (sim_policy_parse_list(value, &set) != 0) {
            snprintf(err, errlen,
                     "%s: '%.60s' is not a list of predictive, reactive, hpa, oracle, "
                     "static-peak",
                     k->name, value);
            return -EINVAL;
        }
        memcpy(field, &set, sizeof(set));
        return 0;
    }
    case K_QUANTILES:
        return set_sweep(cfg, k->name, value, err, errlen);
    }
    return -EINVAL;
}

int64_t sim_config_sla_ms(const struct sim_config *cfg)
{
    return cfg->sla_ms > 0 ? cfg->sla_ms : cfg->policy.p99_latency_target_ms;
}

double sim_config_gpus(const struct sim_config *cfg)
{
    return cfg->policy.gpus_per_replica > 0 ? cfg->policy.gpus_per_replica : 1;
}

int32_t sim_config_placeable(const struct sim_config *cfg)
{
    if (cfg->gpu_limit <= 0)
        return INT32_MAX;
    double n = floor((double)cfg->gpu_limit / sim_config_gpus(cfg) + 1e-9);
    return n < 0 ? 0 : (int32_t)n;
}

static int whole_seconds(const char *key, int64_t ms, char *err, size_t errlen)
{
    if (ms % 1000 != 0) {
        snprintf(err, errlen, "%s: must be a whole number of seconds for the simulator", key);
        return -EINVAL;
    }
    return 0;
}

int sim_config_validate(const struct sim_config *cfg, char *err, size_t errlen)
{
    int rc = policy_config_validate(&cfg->policy, err, errlen);
    if (rc != 0)
        return rc;
    const struct policy_config *p = &cfg->policy;
    if (p->demand_unit == POLICY_UNIT_TOKENS) {
        /* the trace counts request arrivals and the serving model queues
         * requests: there are no token counts to replay */
        snprintf(err, errlen,
                 "demand-unit: tokens is not simulated (traces count requests, not tokens); "
                 "use demand-unit requests with capacity-per-gpu in requests/s");
        return -EINVAL;
    }
    if (cfg->policies == 0) {
        snprintf(err, errlen, "policy: no policy to simulate");
        return -EINVAL;
    }
    if (sim_config_sla_ms(cfg) <= 0) {
        snprintf(err, errlen,
                 "sla: no SLA to score against: set p99-latency-target (also used by the "
                 "policy) or sla");
        return -EINVAL;
    }
    if (sim_config_sla_ms(cfg) >= SIM_LATENCY_MAX_S * 1000) {
        /* requests no replica serves wait that long: they would be within it */
        snprintf(err, errlen, "%s: must be under 1h, the latency the simulator gives requests "
                              "no replica serves",
                 cfg->sla_ms > 0 ? "sla" : "p99-latency-target");
        return -EINVAL;
    }
    if (p->capacity_auto && !(cfg->serve_capacity > 0)) {
        snprintf(err, errlen,
                 "serve-capacity-per-gpu: with capacity-per-gpu auto the simulator needs the "
                 "simulated GPUs' true capacity");
        return -EINVAL;
    }
    if (p->cold_start_ms > 86400 * 1000LL) {
        snprintf(err, errlen, "cold-start: more than one day is not a cold start");
        return -EINVAL;
    }
    if (cfg->initial_replicas != 0 &&
        (cfg->initial_replicas < p->min_replicas || cfg->initial_replicas > p->max_replicas)) {
        snprintf(err, errlen, "initial-replicas: %d is outside [min-replicas %d, max-replicas %d]",
                 cfg->initial_replicas, p->min_replicas, p->max_replicas);
        return -EINVAL;
    }
    if (!(cfg->scale > 0)) {
        snprintf(err, errlen, "scale: must be above 0");
        return -EINVAL;
    }
    if (cfg->policy.service_time_ms <= 0) {
        snprintf(err, errlen, "service-time: the simulator needs the servers' service time (above 0)");
        return -EINVAL;
    }
    double gpus = sim_config_gpus(cfg);
    if (cfg->gpu_limit > 0 && cfg->gpu_limit < gpus) {
        snprintf(err, errlen, "gpu-limit: %d GPUs cannot place one replica of %g GPUs",
                 cfg->gpu_limit, gpus);
        return -EINVAL;
    }
    double slots = cfg->policy.slots_per_gpu > 0
                       ? cfg->policy.slots_per_gpu
                       : sim_config_capacity(cfg) * cfg->policy.service_time_ms / 1e3;
    if (gpus * slots > 100000) {
        snprintf(err, errlen,
                 "slots-per-gpu: %g concurrent requests per replica is more than the model's "
                 "100000 (lower capacity-per-gpu x service-time or set slots-per-gpu)",
                 gpus * slots);
        return -EINVAL;
    }
    struct {
        const char *key;
        int64_t ms;
    } whole[] = {
        {"decision-interval", p->decision_interval_ms},
        {"start", cfg->start_ms},
        {"duration", cfg->duration_ms},
        {"warmup", cfg->warmup_ms},
        {"rate-window", cfg->rate_window_ms},
        {"interval", cfg->interval_ms},
        {"hpa-sync-period", cfg->hpa.sync_period_ms},
        {"hpa-metric-window", cfg->hpa.metric_window_ms},
        {"hpa-metric-delay", cfg->hpa.metric_delay_ms},
        {"hpa-scrape-interval", cfg->hpa.scrape_interval_ms},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(whole); i++)
        if ((rc = whole_seconds(whole[i].key, whole[i].ms, err, errlen)) != 0)
            return rc;
    if (cfg->interval_ms < 1000) {
        snprintf(err, errlen, "interval: must be at least 1s");
        return -EINVAL;
    }
    return 0;
}

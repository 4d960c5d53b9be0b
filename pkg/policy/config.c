/* SPDX-License-Identifier: Apache-2.0 */
/* policy/config: the one parser of policy configuration values, shared by
 * annotations (gpuscaler.io/<key>), the YAML config file's defaults and the
 * simulator's policy file.
 *
 * Each key has a kind (number, integer, duration, bool), a range and a field
 * in struct policy_config; policy_config_set() validates a value against them
 * and only then writes it, so a failed set leaves the config unchanged. */
#include "policy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

enum kind { K_NUM = UTIL_NUMBER, K_INT = UTIL_WHOLE, K_DUR = UTIL_DURATION, K_BOOL, K_UNIT };

struct key {
    const char *name;
    enum kind kind;
    size_t off;
    double min, max; /* inclusive; for durations in ms */
    bool min_exclusive;
    const char *unit;
    double step; /* durations: a whole multiple of this many ms, 0 = any */
};

#define OFF(f) offsetof(struct policy_config, f)
#define DAY_MS (86400.0 * 1000)

static const struct key keys[] = {
    {"capacity-per-gpu", K_NUM, OFF(capacity_rps_per_gpu), 0, 1e6, true,
     "requests/s (or weighted tokens/s) per GPU, or auto", 0},
    {"capacity-start", K_NUM, OFF(capacity_start), 0, 1e6, false,
     "per GPU until one is learned, in the demand unit, 0 = none", 0},
    {"demand-unit", K_UNIT, OFF(demand_unit), 0, 0, false, "requests or tokens", 0},
    {"prompt-token-weight", K_NUM, OFF(prompt_token_weight), 0, 100, false,
     "generated tokens one prompt token costs", 0},
    {"target-utilization", K_NUM, OFF(target_utilization), 0, 1, true, "fraction", 0},
    {"scale-in-utilization", K_NUM, OFF(scale_in_utilization), 0, 1, false, "fraction", 0},
    {"scale-out-after", K_DUR, OFF(scale_out_after_ms), 0, DAY_MS, false, "duration", 0},
    {"scale-in-after", K_DUR, OFF(scale_in_after_ms), 0, DAY_MS, false, "duration", 0},
    {"min-replicas", K_INT, OFF(min_replicas), 0, 10000, false, "replicas", 0},
    {"max-replicas", K_INT, OFF(max_replicas), 1, 10000, false, "replicas", 0},
    {"max-scale-up-step", K_INT, OFF(max_scale_up_step), 0, 10000, false,
     "replicas, 0 = unlimited", 0},
    {"max-scale-down-step", K_INT, OFF(max_scale_down_step), 0, 10000, false,
     "replicas, 0 = half", 0},
    {"cold-start", K_DUR, OFF(cold_start_ms), 0, DAY_MS, false, "duration", 0},
    {"predictive", K_BOOL, OFF(predictive), 0, 0, false, "true or false", 0},
    /* whole minutes: the forecaster's buckets */
    {"seasonality", K_DUR, OFF(seasonality_ms), 3600e3, 7 * DAY_MS, false, "duration", 60e3},
    {"forecast-quantile", K_NUM, OFF(forecast_quantile), 0.5, 0.999, true, "quantile", 0},
    {"p99-latency-target", K_DUR, OFF(p99_latency_target_ms), 0, 3600e3, false,
     "duration, 0 = none", 0},
    {"metrics-stale-after", K_DUR, OFF(metrics_stale_after_ms), 1000, 3600e3, false, "duration", 0},
    {"gpus-per-replica", K_NUM, OFF(gpus_per_replica), 0, 1024, false,
     "GPUs, 0 = from pod spec", 0},
    {"scale-in-stabilization", K_DUR, OFF(scale_in_stabilization_ms), 0, 3600e3, false,
     "duration", 0},
    {"service-time", K_DUR, OFF(service_time_ms), 0, 3600e3, false,
     "duration, 0 = learned from latency histograms", 0},
    {"slots-per-gpu", K_NUM, OFF(slots_per_gpu), 0, 100000, false,
     "concurrent requests per GPU, 0 = capacity x service time", 0},
};

const char *policy_demand_unit_name(enum policy_demand_unit u)
{
    return u == POLICY_UNIT_TOKENS ? "tokens" : "requests";
}

double policy_token_demand(double prompt_rate, double generation_rate, double prompt_weight)
{
    if (!(isfinite(prompt_rate) && prompt_rate >= 0 && isfinite(generation_rate) &&
          generation_rate >= 0 && isfinite(prompt_weight) && prompt_weight >= 0))
        return NAN;
    return prompt_weight * prompt_rate + generation_rate;
}

void policy_config_init(struct policy_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->capacity_rps_per_gpu = 0;
    cfg->demand_unit = POLICY_UNIT_REQUESTS;
    cfg->prompt_token_weight = POLICY_DEFAULT_PROMPT_TOKEN_WEIGHT;
    cfg->target_utilization = 0.8;
    cfg->scale_in_utilization = 0.5;
    cfg->scale_out_after_ms = 2 * 60 * 1000;
    cfg->scale_in_after_ms = 10 * 60 * 1000;
    cfg->min_replicas = 1;
    cfg->max_replicas = 10;
    cfg->max_scale_up_step = 0;
    cfg->max_scale_down_step = 0;
    cfg->cold_start_ms = 3 * 60 * 1000;
    cfg->decision_interval_ms = 15 * 1000;
    cfg->predictive = true;
    cfg->seasonality_ms = 24LL * 3600 * 1000;
    cfg->forecast_quantile = 0.9;
    cfg->p99_latency_target_ms = 0;
    cfg->metrics_stale_after_ms = 60 * 1000;
    cfg->gpus_per_replica = 0;
    cfg->service_time_ms = 0;
    cfg->slots_per_gpu = 0;
    cfg->scale_in_stabilization_ms = 2 * 60 * 1000;
}

size_t policy_config_key_count(void)
{
    return UTIL_ARRAY_LEN(keys);
}

const char *policy_config_key_name(size_t i)
{
    return i < UTIL_ARRAY_LEN(keys) ? keys[i].name : NULL;
}

int policy_config_set(struct policy_config *cfg, const char *key, const char *value, char *err,
                      size_t errlen)
{
    const struct key *k = util_table_find(keys, UTIL_ARRAY_LEN(keys), sizeof(keys[0]), key);
    if (!k) {
        snprintf(err, errlen, "unknown key '%s'", key);
        return -ENOENT;
    }
    if (!value) {
        snprintf(err, errlen, "%s: missing value", k->name);
        return -EINVAL;
    }
    char *field = (char *)cfg + k->off;
    if (field == (char *)&cfg->capacity_rps_per_gpu) {
        if (strcmp(value, "auto") == 0) {
            cfg->capacity_auto = true;
            cfg->capacity_rps_per_gpu = 0;
            return 0;
        }
        double v;
        if (util_parse_double(value, &v) == 0 && v > k->min && v <= k->max)
            cfg->capacity_auto = false; /* the number itself is set below */
    }
    switch (k->kind) {
    case K_NUM:
    case K_INT:
    case K_DUR: {
        const struct util_range r = {k->min, k->max, k->min_exclusive,
                                     k->kind == K_DUR ? NULL : k->unit, k->step};
        return util_parse_ranged(k->name, (enum util_kind)k->kind, &r, value, field, err, errlen);
    }
    case K_UNIT: {
        enum policy_demand_unit u;
        if (strcmp(value, "requests") == 0)
            u = POLICY_UNIT_REQUESTS;
        else if (strcmp(value, "tokens") == 0)
            u = POLICY_UNIT_TOKENS;
        else {
            snprintf(err, errlen, "%s: '%.40s' is not requests or tokens", k->name, value);
            return -EINVAL;
        }
        memcpy(field, &u, sizeof(u));
        return 0;
    }
    case K_BOOL: {
        bool b;
        if (util_parse_bool(value, &b) != 0) {
            snprintf(err, errlen, "%s: '%.40s' is not true or false", k->name, value);
            return -EINVAL;
        }
        memcpy(field, &b, sizeof(b));
        return 0;
    }
    }
    return -EINVAL;
}

int policy_config_validate(const struct policy_config *cfg, char *err, size_t errlen)
{
    if (!(cfg->capacity_rps_per_gpu > 0) && !cfg->capacity_auto) {
        snprintf(err, errlen,
                 "capacity-per-gpu: required (%s one GPU sustains, or auto to learn it)",
                 cfg->demand_unit == POLICY_UNIT_TOKENS ? "weighted tokens/s" : "requests/s");
        return -EINVAL;
    }
    if (cfg->min_replicas > cfg->max_replicas) {
        snprintf(err, errlen, "min-replicas: %d is above max-replicas %d", cfg->min_replicas,
                 cfg->max_replicas);
        return -EINVAL;
    }
    if (cfg->max_replicas < 1) {
        snprintf(err, errlen, "max-replicas: must be at least 1");
        return -EINVAL;
    }
    if (!(cfg->scale_in_utilization < cfg->target_utilization)) {
        snprintf(err, errlen,
                 "scale-in-utilization: %g must be below target-utilization %g (hysteresis)",
                 cfg->scale_in_utilization, cfg->target_utilization);
        return -EINVAL;
    }
    if (cfg->decision_interval_ms < 1000 || cfg->decision_interval_ms > 3600 * 1000) {
        snprintf(err, errlen, "decision-interval: must be between 1s and 1h");
        return -EINVAL;
    }
    return 0;
}

double policy_rate_floor(const struct policy_config *cfg)
{
    double c = cfg->capacity_auto ? cfg->capacity_start : cfg->capacity_rps_per_gpu;
    double f = cfg->target_utilization * c;
    return f > 0 && f <= 1e6 ? f : 1;
}

int64_t policy_horizon_ms(const struct policy_config *cfg, int64_t learned_cold_start_ms)
{
    int64_t cs = cfg->cold_start_ms;
    if (learned_cold_start_ms > cs)
        cs = learned_cold_start_ms;
    return cs + cfg->decision_interval_ms;
}

int64_t policy_recent_span_ms(const struct policy_config *cfg, double learned_service_ms,
                              int64_t max_ms)
{
    double svc = cfg->service_time_ms > 0 ? (double)cfg->service_time_ms : learned_service_ms;
    if (!(svc > 0) || !isfinite(svc) || max_ms <= 0)
        return 0;
    /* at most half the rate window: the recent rate stays a fresher one */
    double span = 2 * svc, cap = (double)(max_ms / 2);
    return span >= cap ? max_ms / 2 : (int64_t)ceil(span);
}

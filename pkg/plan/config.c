/* SPDX-License-Identifier: Apache-2.0 */
/* plan/config: the plan's keys (plan-wide and per Deployment), their
 * defaults, prices and the plan file.
 *
 * Plan-wide keys are parsed here; a Deployment's keys are its source (trace,
 * query, ...), the policy that will run, and every simulator and policy key
 * through sim_config_set(), the one parser of their values. A failed set
 * leaves the config unchanged. The file parser checks every value with the
 * same setters on scratch configs, so a file that parses applies without
 * errors and every error names its line. */
#include "plan-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "conf/conf.h"

#define H_MS 3600e3
#define D_MS 86400e3

void plan_config_init(struct plan_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->horizon_ms = 30 * 86400 * 1000LL;
    cfg->step_ms = 3600 * 1000LL;
    cfg->season = PLAN_SEASON_AUTO;
    cfg->nscenarios = 3;
    for (size_t i = 0; i < 3; i++)
        cfg->scenarios[i] = (struct plan_scenario){1.0 + 0.5 * (double)i, 1.0 / 3};
    cfg->price_on_demand = 1;
    cfg->price_reserved = 0;
    cfg->reserved_discount = 0.4;
    cfg->price_spot = 0;
    cfg->spot_discount = -1;
    cfg->spot_interruption = 0.1;
    cfg->margin = 0.2;
    cfg->baseline_share = 0.95;
    cfg->rule_share = 0.7;
    cfg->sim = PLAN_SIM_DAY;
}

void plan_config_demo(struct plan_config *cfg)
{
    cfg->horizon_ms = 7 * 86400 * 1000LL;
}

enum kind { K_DUR, K_SEASON, K_TREND, K_GROWTH, K_PRICE, K_SPOT, K_SHARE, K_MARGIN, K_SIM };

struct key {
    const char *name;
    enum kind kind;
    double min, max; /* durations in ms, shares as fractions */
    const char *help;
};

static const struct key keys[] = {
    {"horizon", K_DUR, D_MS, 365 * D_MS, "how far ahead to plan (default 30d)"},
    {"step", K_DUR, 60e3, H_MS, "step of the demand model, dividing 1h (default 1h)"},
    {"season", K_SEASON, 0, 0, "auto, daily or weekly (auto: weekly with 14 days of history)"},
    {"trend", K_TREND, 0, 0,
     "damped (default), linear or none: how the fitted trend is carried forward"},
    {"growth", K_GROWTH, 0.01, 100,
     "growth scenarios at the horizon's end, e.g. 1.0,1.5,2.0 or 1.0:0.6,1.5:0.4 (weights)"},
    {"price-on-demand", K_PRICE, 0, 1e6, "on-demand price per GPU-hour (default 1)"},
    {"price-reserved", K_PRICE, 0, 1e6,
     "reserved price per GPU-hour, or a discount off on-demand like 40% (default 40%)"},
    {"price-spot", K_SPOT, 0, 1e6, "spot price per GPU-hour or discount like 65%, or none"},
    {"spot-interruption", K_SHARE, 0, 0.99,
     "share of spot GPU-hours interrupted and re-run on demand (default 10%)"},
    {"margin", K_MARGIN, 0, 10, "safety margin over the peak (default 20%)"},
    {"baseline", K_SHARE, 0.01, 1, "baseline: GPUs held in at least this share of hours (95%)"},
    {"reserve-share", K_SHARE, 0, 1, "the rule of thumb reserves this share of it (70%)"},
    {"sim", K_SIM, 0, 0, "day (replay 3 representative days, default) or horizon (all of it)"},
};

size_t plan_config_key_count(void)
{
    return UTIL_ARRAY_LEN(keys);
}

const char *plan_config_key_name(size_t i)
{
    return i < UTIL_ARRAY_LEN(keys) ? keys[i].name : NULL;
}

const char *plan_config_key_help(size_t i)
{
    return i < UTIL_ARRAY_LEN(keys) ? keys[i].help : NULL;
}

/* "20%" (percent) or "0.2" (fraction). */
static int parse_share(const char *s, double *out)
{
    size_t n = strlen(s);
    if (n > 0 && s[n - 1] == '%') {
        char buf[64];
        if (n - 1 >= sizeof(buf))
            return -EINVAL;
        memcpy(buf, s, n - 1);
        buf[n - 1] = '\0';
        double v;
        if (util_parse_double(buf, &v) != 0)
            return -EINVAL;
        *out = v / 100;
        return 0;
    }
    return util_parse_double(s, out);
}

/* A price "2.5" or a discount "40%": *discount >= 0 for the latter. */
static int parse_price(const char *s, double *price, double *discount)
{
    size_t n = strlen(s);
    if (n > 0 && s[n - 1] == '%') {
        double d;
        if (parse_share(s, &d) != 0)
            return -EINVAL;
        *discount = d;
        *price = 0;
        return 0;
    }
    *discount = -1;
    return util_parse_double(s, price);
}

/* "1.0,1.5,2.0" or "1.0:0.6,1.5:0.4"; weights all given or none. */
static int parse_growth(const char *s, const struct key *k, struct plan_config *tmp, char *err,
                        size_t errlen)
{
    size_t n = 0, weighted = 0;
    double sum = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char item[64];
        while (len > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 0 || len >= sizeof(item)) {
            snprintf(err, errlen, "%s: '%.60s' is not a list of growth factors like 1.0,1.5,2.0",
                     k->name, s);
            return -EINVAL;
        }
        if (n == PLAN_MAX_SCENARIOS) {
            snprintf(err, errlen, "%s: at most %d scenarios", k->name, PLAN_MAX_SCENARIOS);
            return -EINVAL;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        char *colon = strchr(item, ':');
        double g, w = 1;
        if (colon)
            *colon = '\0';
        if (util_parse_double(item, &g) != 0) {
            snprintf(err, errlen, "%s: '%.30s' is not a number (a growth factor like 1.5)",
                     k->name, item);
            return -EINVAL;
        }
        if (g < k->min || g > k->max) {
            snprintf(err, errlen, "%s: %.30s is out of range (%g to %g)", k->name, item, k->min,
                     k->max);
            return -EINVAL;
        }
        if (colon) {
            if (util_parse_double(colon + 1, &w) != 0 || !(w > 0) || w > 1e6) {
                snprintf(err, errlen, "%s: weight '%.30s' of %.30s must be a number above 0",
                         k->name, colon + 1, item);
                return -EINVAL;
            }
            weighted++;
        }
        for (size_t i = 0; i < n; i++)
            if (tmp->scenarios[i].growth == g) {
                snprintf(err, errlen, "%s: %.30s is listed twice", k->name, item);
                return -EINVAL;
            }
        tmp->scenarios[n++] = (struct plan_scenario){g, w};
        sum += w;
        if (!e)
            break;
        p = e + 1;
    }
    if (weighted != 0 && weighted != n) {
        snprintf(err, errlen, "%s: give a weight to every scenario or to none ('%.60s')",
                 k->name, s);
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        tmp->scenarios[i].weight /= sum;
    tmp->nscenarios = n;
    return 0;
}

int plan_config_set(struct plan_config *cfg, const char *key, const char *value, char *err,
                    size_t errlen)
{
    const struct key *k = util_table_find(keys, UTIL_ARRAY_LEN(keys), sizeof(keys[0]), key);
    if (!k) {
        snprintf(err, errlen, "unknown key '%.60s'", key);
        return -ENOENT;
    }
    if (!value || !*value) {
        snprintf(err, errlen, "%s: missing value", k->name);
        return -EINVAL;
    }
    struct plan_config tmp = *cfg;
    switch (k->kind) {
    case K_DUR: {
        const struct util_range r = {k->min, k->max, false, NULL, 0};
        int64_t ms;
        if (util_parse_ranged(k->name, UTIL_DURATION, &r, value, &ms, err, errlen) != 0)
            return -EINVAL;
        if (strcmp(k->name, "step") == 0) {
            if ((int64_t)H_MS % ms != 0) {
                snprintf(err, errlen, "%s: %.40s does not divide 1h (use 1m, 5m, 10m, 15m, 30m "
                                      "or 1h)", k->name, value);
                return -EINVAL;
            }
            tmp.step_ms = ms;
        } else {
            tmp.horizon_ms = ms;
        }
        break;
    }
    case K_SEASON:
        if (strcmp(value, "auto") == 0)
            tmp.season = PLAN_SEASON_AUTO;
        else if (strcmp(value, "daily") == 0)
            tmp.season = PLAN_SEASON_DAILY;
        else if (strcmp(value, "weekly") == 0)
            tmp.season = PLAN_SEASON_WEEKLY;
        else {
            snprintf(err, errlen, "%s: '%.40s' is not auto, daily or weekly", k->name, value);
            return -EINVAL;
        }
        break;
    case K_TREND:
        if (strcmp(value, "damped") == 0)
            tmp.trend = PLAN_TREND_DAMPED;
        else if (strcmp(value, "linear") == 0)
            tmp.trend = PLAN_TREND_LINEAR;
        else if (strcmp(value, "none") == 0)
            tmp.trend = PLAN_TREND_NONE;
        else {
            snprintf(err, errlen, "%s: '%.40s' is not damped, linear or none", k->name, value);
            return -EINVAL;
        }
        break;
    case K_SIM:
        if (strcmp(value, "day") == 0)
            tmp.sim = PLAN_SIM_DAY;
        else if (strcmp(value, "horizon") == 0)
            tmp.sim = PLAN_SIM_HORIZON;
        else {
            snprintf(err, errlen, "%s: '%.40s' is not day or horizon", k->name, value);
            return -EINVAL;
        }
        break;
    case K_GROWTH:
        if (parse_growth(value, k, &tmp, err, errlen) != 0)
            return -EINVAL;
        break;
    case K_PRICE:
    case K_SPOT: {
        double price, discount;
        if (k->kind == K_SPOT && strcmp(value, "none") == 0) {
            tmp.price_spot = 0;
            tmp.spot_discount = -1;
            break;
        }
        if (parse_price(value, &price, &discount) != 0) {
            snprintf(err, errlen, "%s: '%.40s' is not a price per GPU-hour (like 2.5) or a "
                                  "discount (like 40%%)", k->name, value);
            return -EINVAL;
        }
        bool on_demand = strcmp(k->name, "price-on-demand") == 0;
        if (discount >= 0 && on_demand) {
            snprintf(err, errlen, "%s: give a price per GPU-hour (like 2.5), not a discount",
                     k->name);
            return -EINVAL;
        }
        if (discount >= 0 && !(discount > 0 && discount < 1)) {
            snprintf(err, errlen, "%s: a discount of %.40s is out of range (above 0%% and "
                                  "below 100%%)", k->name, value);
            return -EINVAL;
        }
        if (discount < 0 && !(price > 0 && price <= k->max)) {
            snprintf(err, errlen, "%s: %.40s is out of range (above 0 to %g per GPU-hour)",
                     k->name, value, k->max);
            return -EINVAL;
        }
        if (on_demand) {
            tmp.price_on_demand = price;
        } else if (k->kind == K_SPOT) {
            tmp.price_spot = price;
            tmp.spot_discount = discount;
        } else {
            tmp.price_reserved = price;
            tmp.reserved_discount = discount;
        }
        break;
    }
    case K_SHARE:
    case K_MARGIN: {
        double v;
        if (parse_share(value, &v) != 0) {
            snprintf(err, errlen, "%s: '%.40s' is not a share (like 20%% or 0.2)", k->name,
                     value);
            return -EINVAL;
        }
        if (v < k->min || v > k->max) {
            snprintf(err, errlen, "%s: %.40s is out of range (%g%% to %g%%)", k->name, value,
                     k->min * 100, k->max * 100);
            return -EINVAL;
        }
        if (strcmp(k->name, "spot-interruption") == 0)
            tmp.spot_interruption = v;
        else if (strcmp(k->name, "margin") == 0)
            tmp.margin = v;
        else if (strcmp(k->name, "baseline") == 0)
            tmp.baseline_share = v;
        else
            tmp.rule_share = v;
        break;
    }
    }
    *cfg = tmp;
    return 0;
}

void plan_prices_resolve(const struct plan_config *cfg, struct plan_prices *out)
{
    memset(out, 0, sizeof(*out));
    out->on_demand = cfg->price_on_demand;
    out->reserved = cfg->reserved_discount >= 0 ? cfg->price_on_demand * (1 - cfg->reserved_discount)
                                                : cfg->price_reserved;
    out->spot = cfg->spot_discount >= 0 ? cfg->price_on_demand * (1 - cfg->spot_discount)
                                        : cfg->price_spot;
    out->spot_interruption = out->spot > 0 ? cfg->spot_interruption : 0;
    out->flexible = out->on_demand;
    if (out->spot > 0) {
        double s = (1 - out->spot_interruption) * out->spot +
                   out->spot_interruption * out->on_demand;
        if (s < out->flexible)
            out->flexible = s;
    }
}

int plan_config_validate(const struct plan_config *cfg, char *err, size_t errlen)
{
    struct plan_prices p;
    plan_prices_resolve(cfg, &p);
    if (!(p.reserved < p.on_demand)) {
        snprintf(err, errlen,
                 "price-reserved: %g per GPU-hour is not below price-on-demand %g: reserving "
                 "would never pay", p.reserved, p.on_demand);
        return -EINVAL;
    }
    if (p.spot > 0 && !(p.spot < p.on_demand)) {
        snprintf(err, errlen, "price-spot: %g per GPU-hour is not below price-on-demand %g",
                 p.spot, p.on_demand);
        return -EINVAL;
    }
    if (cfg->horizon_ms % cfg->step_ms != 0) {
        char a[32], b[32];
        util_format_duration(cfg->horizon_ms, a, sizeof(a));
        util_format_duration(cfg->step_ms, b, sizeof(b));
        snprintf(err, errlen, "horizon: %s is not a whole number of steps (%s)", a, b);
        return -EINVAL;
    }
    if (cfg->nscenarios == 0) {
        snprintf(err, errlen, "growth: no scenario");
        return -EINVAL;
    }
    return 0;
}

/* ---- one Deployment ------------------------------------------------------ */

/* Simulator keys the plan sets itself. */
static const char *const window_keys[] = {"start", "duration", "warmup", "initial-replicas",
                                          "quantile-sweep"};

static const char *const source_keys[] = {
    "name",
    "trace",
    "query",
    "prometheus",
    "since",
    "query-step",
    "policy",
    "prometheus-ca-file",
    "prometheus-cert-file",
    "prometheus-key-file",
    "prometheus-token-file",
    "prometheus-username",
    "prometheus-password-file",
    "prometheus-header",
};

static bool is_window_key(const char *key)
{
    return util_table_find(window_keys, UTIL_ARRAY_LEN(window_keys), sizeof(window_keys[0]),
                           key) != NULL;
}

static bool is_source_key(const char *key)
{
    return util_table_find(source_keys, UTIL_ARRAY_LEN(source_keys), sizeof(source_keys[0]),
                           key) != NULL;
}

void plan_workload_init(struct plan_workload *w)
{
    memset(w, 0, sizeof(*w));
    sim_config_init(&w->sim);
    w->policy = SIM_PREDICTIVE;
    w->since_ms = 30 * 86400 * 1000LL;
    w->query_step_ms = 60 * 1000;
}

void plan_workload_demo(struct plan_workload *w)
{
    sim_config_demo(&w->sim);
    w->sim.start_ms = 0;
    w->sim.warmup_ms = 0;
    w->sim.duration_ms = 0;
}

void plan_workload_clear(struct plan_workload *w)
{
    xfree(w->name);
    xfree(w->trace);
    xfree(w->query);
    xfree(w->prometheus);
    w->name = w->trace = w->query = w->prometheus = NULL;
    char **prom[] = {&w->prom_ca_file,  &w->prom_cert_file, &w->prom_key_file,
                     &w->prom_token_file, &w->prom_username, &w->prom_password_file};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(prom); i++) {
        xfree(*prom[i]);
        *prom[i] = NULL;
    }
    for (size_t i = 0; i < w->n_prom_headers; i++) {
        xfree(w->prom_header_names[i]);
        xfree(w->prom_header_values[i]);
    }
    w->n_prom_headers = 0;
}

/* prometheus-header "Name: value": a new name is added, a known one
 * (case-insensitive) replaced. The client checks name and value. */
static int set_header(struct plan_workload *w, const char *value, char *err, size_t errlen)
{
    const char *colon = strchr(value, ':');
    size_t nl = colon ? (size_t)(colon - value) : 0;
    while (nl > 0 && (value[nl - 1] == ' ' || value[nl - 1] == '\t'))
        nl--;
    if (!colon || nl == 0) {
        snprintf(err, errlen, "prometheus-header: '%.60s' is not 'Name: value'", value);
        return -EINVAL;
    }
    char *name = xstrndup(value, nl);
    size_t i = 0;
    while (i < w->n_prom_headers && strcasecmp(w->prom_header_names[i], name) != 0)
        i++;
    if (i == UTIL_ARRAY_LEN(w->prom_header_names)) {
        snprintf(err, errlen, "prometheus-header: at most %zu",
                 UTIL_ARRAY_LEN(w->prom_header_names));
        xfree(name);
        return -EINVAL;
    }
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    if (i == w->n_prom_headers) {
        w->n_prom_headers++;
    } else {
        xfree(w->prom_header_names[i]);
        xfree(w->prom_header_values[i]);
    }
    w->prom_header_names[i] = name;
    w->prom_header_values[i] = xstrdup(v);
    return 0;
}

bool plan_workload_key(const char *key)
{
    if (is_source_key(key))
        return true;
    if (is_window_key(key))
        return false;
    for (size_t i = 0; i < sim_config_key_count(); i++)
        if (strcmp(sim_config_key_name(i), key) == 0)
            return true;
    for (size_t i = 0; i < policy_config_key_count(); i++)
        if (strcmp(policy_config_key_name(i), key) == 0)
            return true;
    return false;
}

static void set_str(char **slot, const char *v)
{
    xfree(*slot);
    *slot = xstrdup(v);
}

int plan_workload_set(struct plan_workload *w, const char *key, const char *value, char *err,
                      size_t errlen)
{
    if (is_window_key(key)) {
        snprintf(err, errlen, "%s: not a plan key (the plan chooses what it replays)", key);
        return -EINVAL;
    }
    if (!is_source_key(key))
        return sim_config_set(&w->sim, key, value, err, errlen);
    if (!value || !*value) {
        snprintf(err, errlen, "%s: missing value", key);
        return -EINVAL;
    }
    if (strcmp(key, "prometheus-header") == 0)
        return set_header(w, value, err, errlen);
    if (strncmp(key, "prometheus-", 11) == 0) {
        const char *k = key + 11;
        char **slot = strcmp(k, "ca-file") == 0     ? &w->prom_ca_file
                      : strcmp(k, "cert-file") == 0 ? &w->prom_cert_file
                      : strcmp(k, "key-file") == 0  ? &w->prom_key_file
                      : strcmp(k, "token-file") == 0 ? &w->prom_token_file
                      : strcmp(k, "username") == 0  ? &w->prom_username
                                                    : &w->prom_password_file;
        set_str(slot, value);
        return 0;
    }
    if (strcmp(key, "policy") == 0) {
        unsigned set;
        if (sim_policy_parse_list(value, &set) != 0 ||
            !(set == 1u << SIM_PREDICTIVE || set == 1u << SIM_REACTIVE ||
              set == 1u << SIM_HPA)) {
            snprintf(err, errlen, "policy: '%.40s' is not one of predictive, reactive, hpa "
                                  "(the one policy that will run)", value);
            return -EINVAL;
        }
        w->policy = set == 1u << SIM_PREDICTIVE ? SIM_PREDICTIVE
                    : set == 1u << SIM_REACTIVE ? SIM_REACTIVE
                                                : SIM_HPA;
        return 0;
    }
    if (strcmp(key, "since") == 0 || strcmp(key, "query-step") == 0) {
        bool since = key[1] == 'i';
        int64_t ms, lo = since ? 3600 * 1000LL : 1000, hi = since ? 365 * 86400 * 1000LL
                                                                  : 3600 * 1000LL;
        if (util_parse_duration_ms(value, &ms) != 0) {
            snprintf(err, errlen, "%s: '%.40s' is not a duration (like 30d, 1m)", key, value);
            return -EINVAL;
        }
        if (ms < lo || ms > hi || ms % 1000 != 0) {
            snprintf(err, errlen, "%s: %.40s is out of range (%s)", key, value,
                     since ? "1h to 365d" : "whole seconds, 1s to 1h");
            return -EINVAL;
        }
        *(since ? &w->since_ms : &w->query_step_ms) = ms;
        return 0;
    }
    if (strcmp(key, "prometheus") == 0 && strncmp(value, "http://", 7) != 0 &&
        strncmp(value, "https://", 8) != 0) {
        snprintf(err, errlen, "prometheus: '%.60s' is not an http:// or https:// URL", value);
        return -EINVAL;
    }
    if (strcmp(key, "name") == 0) {
        size_t n = strlen(value);
        bool ok = n <= 253;
        for (size_t i = 0; ok && i < n; i++)
            ok = (value[i] >= 'a' && value[i] <= 'z') || (value[i] >= '0' && value[i] <= '9') ||
                 value[i] == '-' || value[i] == '.' || value[i] == '_' || value[i] == '/';
        if (!ok) {
            snprintf(err, errlen, "name: '%.60s' is not a Deployment name ([a-z0-9._/-], "
                                  "at most 253)", value);
            return -EINVAL;
        }
    }
    char **slot = strcmp(key, "name") == 0    ? &w->name
                  : strcmp(key, "trace") == 0 ? &w->trace
                  : strcmp(key, "query") == 0 ? &w->query
                                              : &w->prometheus;
    set_str(slot, value);
    return 0;
}

int plan_workload_validate(const struct plan_workload *w, char *err, size_t errlen)
{
    return sim_config_validate(&w->sim, err, errlen);
}

/* ---- the plan file ------------------------------------------------------- */

static void scope_add(struct plan_scope *s, const char *key, const char *value, int line)
{
    s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
    s->v[s->n++] = (struct plan_setting){xstrdup(key), xstrdup(value), line};
}

static void scope_clear(struct plan_scope *s)
{
    for (size_t i = 0; i < s->n; i++) {
        xfree(s->v[i].key);
        xfree(s->v[i].value);
    }
    xfree(s->v);
    xfree(s->name);
    memset(s, 0, sizeof(*s));
}

void plan_file_clear(struct plan_file *f)
{
    scope_clear(&f->top);
    for (size_t i = 0; i < f->ndeployments; i++)
        scope_clear(&f->deployments[i]);
    xfree(f->deployments);
    memset(f, 0, sizeof(*f));
}

static int fail(struct plan_error *err, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct plan_error *err, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err->line = line;
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static bool is_flag_only(const char *k)
{
    static const char *const only[] = {"config", "json", "report", "backtest"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(only); i++)
        if (strcmp(only[i], k) == 0)
            return true;
    return false;
}

/* Check and record one key of a scope. top: plan-wide keys allowed. */
static int take(struct plan_scope *s, bool top, const char *key, const struct conf_node *n,
                struct plan_config *pc, struct plan_workload *pw, struct plan_error *err)
{
    char msg[200];
    if (is_flag_only(key))
        return fail(err, n->line, "%s: only a flag, not a file key", key);
    char *value = conf_node_joined(n);
    if (!value)
        return fail(err, n->line, "%s: expected a value, found a %s", key,
                    conf_type_name(n->type));
    int rc;
    if (plan_workload_key(key) || is_window_key(key)) {
        rc = plan_workload_set(pw, key, value, msg, sizeof(msg));
    } else {
        rc = plan_config_set(pc, key, value, msg, sizeof(msg));
        if (rc != -ENOENT && !top) {
            rc = -EPERM;
            snprintf(msg, sizeof(msg), "%s: a plan-wide key; set it at the top level", key);
        }
    }
    if (rc == 0)
        scope_add(s, key, value, n->line);
    xfree(value);
    return rc == 0 ? 0 : fail(err, n->line, "%s", msg);
}

static bool scope_has(const struct plan_scope *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i].key, key) == 0)
            return true;
    return false;
}

static int parse_deployments(const struct conf_node *seq, struct plan_file *f,
                             struct plan_workload *top_w, struct plan_error *err)
{
    if (seq->type != CONF_SEQ)
        return fail(err, seq->line, "deployments: expected a list, found a %s",
                    conf_type_name(seq->type));
    if (seq->n == 0)
        return fail(err, seq->line, "deployments: the list is empty");
    if (seq->n > PLAN_MAX_WORKLOADS)
        return fail(err, seq->line, "deployments: at most %d", PLAN_MAX_WORKLOADS);
    f->deployments = xcalloc(seq->n, sizeof(*f->deployments));
    bool top_source = scope_has(&f->top, "trace") || scope_has(&f->top, "query");
    for (size_t i = 0; i < seq->n; i++) {
        const struct conf_node *d = seq->items[i];
        struct plan_scope *s = &f->deployments[f->ndeployments++];
        s->line = d->line;
        if (d->type != CONF_MAP)
            return fail(err, d->line, "deployments[%zu]: expected a map of key: value, found a %s",
                        i, conf_type_name(d->type));
        struct plan_workload w = *top_w;
        /* the strings stay top_w's: this copy only checks the entry's keys */
        w.name = w.trace = w.query = w.prometheus = NULL;
        w.prom_ca_file = w.prom_cert_file = w.prom_key_file = NULL;
        w.prom_token_file = w.prom_username = w.prom_password_file = NULL;
        w.n_prom_headers = 0;
        struct plan_config pc;
        plan_config_init(&pc);
        int rc = 0;
        for (size_t j = 0; j < d->n && rc == 0; j++)
            rc = take(s, false, d->keys[j], d->items[j], &pc, &w, err);
        if (rc == 0 && !w.name)
            rc = fail(err, d->line, "deployments[%zu]: no name", i);
        if (rc == 0 && !w.trace && !w.query && !top_source)
            rc = fail(err, d->line, "deployments[%zu] (%s): needs a trace or a query", i,
                      w.name);
        if (rc == 0 && w.trace && w.query)
            rc = fail(err, d->line, "deployments[%zu] (%s): a trace or a query, not both", i,
                      w.name);
        for (size_t j = 0; rc == 0 && j + 1 < f->ndeployments; j++)
            if (strcmp(f->deployments[j].name, w.name) == 0)
                rc = fail(err, d->line, "deployments[%zu]: name '%s' is used twice", i, w.name);
        if (rc == 0)
            s->name = xstrdup(w.name);
        plan_workload_clear(&w);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int plan_file_parse(const char *buf, size_t len, struct plan_file *out, struct plan_error *err)
{
    struct conf_node *root = NULL;
    struct conf_error cerr = {0};
    struct plan_workload w;
    struct plan_config pc;
    memset(out, 0, sizeof(*out));
    memset(err, 0, sizeof(*err));
    plan_workload_init(&w);
    plan_config_init(&pc);
    int rc = conf_parse(buf, len, &root, &cerr);
    if (rc != 0) {
        err->line = cerr.line;
        snprintf(err->msg, sizeof(err->msg), "%s", cerr.msg);
        goto out;
    }
    if (root->type != CONF_MAP) {
        rc = fail(err, root->line, "expected a map of key: value, found a %s",
                  conf_type_name(root->type));
        goto out;
    }
    const struct conf_node *deps = NULL;
    for (size_t i = 0; i < root->n; i++) {
        if (strcmp(root->keys[i], "deployments") == 0) {
            deps = root->items[i];
            continue;
        }
        if (strcmp(root->keys[i], "name") == 0) {
            rc = fail(err, root->items[i]->line, "name: only inside a deployments entry");
            goto out;
        }
        if ((rc = take(&out->top, true, root->keys[i], root->items[i], &pc, &w, err)) != 0)
            goto out;
    }
    if (w.trace && w.query) {
        rc = fail(err, root->line, "a trace or a query, not both");
        goto out;
    }
    if (deps) {
        out->has_deployments = true;
        if ((rc = parse_deployments(deps, out, &w, err)) != 0)
            goto out;
    }
out:
    if (rc != 0)
        plan_file_clear(out);
    plan_workload_clear(&w);
    conf_free(root);
    return rc;
}

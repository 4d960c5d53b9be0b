/* SPDX-License-Identifier: Apache-2.0 */
/* controller/config: the daemon's YAML configuration file. A table maps each
 * dotted key to a field and a kind; unknown keys and wrong types are errors
 * with the line of the node, as KEDA and prometheus-adapter do strict
 * parsing. The `defaults` section holds annotation values applied to every
 * workload and is checked with the same parser as the annotations. */
#include "controller.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

enum kind { K_STR, K_DUR, K_BOOL, K_FRACTION, K_STRLIST, K_DEFAULTS };

struct key {
    const char *path;
    enum kind kind;
    size_t off;
};

#define OFF(f) offsetof(struct ctl_config, f)

static const struct key keys[] = {
    {"decision-interval", K_DUR, OFF(decision_interval_ms)},
    {"namespaces", K_STRLIST, OFF(namespaces)},
    {"log.format", K_STR, OFF(log_format)},
    {"log.level", K_STR, OFF(log_level)},
    {"leader-election.enabled", K_BOOL, OFF(leader.enabled)},
    {"leader-election.namespace", K_STR, OFF(leader.namespace_)},
    {"leader-election.lease-name", K_STR, OFF(leader.lease_name)},
    {"leader-election.lease-duration", K_DUR, OFF(leader.lease_duration_ms)},
    {"leader-election.renew-deadline", K_DUR, OFF(leader.renew_deadline_ms)},
    {"leader-election.retry-period", K_DUR, OFF(leader.retry_period_ms)},
    {"listen.metrics", K_STR, OFF(listen.metrics)},
    {"listen.external-metrics", K_STR, OFF(listen.external_metrics)},
    {"external-metrics.enabled", K_BOOL, OFF(extmetrics.enabled)},
    {"external-metrics.tls-cert-file", K_STR, OFF(extmetrics.tls_cert_file)},
    {"external-metrics.tls-key-file", K_STR, OFF(extmetrics.tls_key_file)},
    {"external-metrics.upstream.url", K_STR, OFF(extmetrics.upstream_url)},
    {"external-metrics.upstream.ca-file", K_STR, OFF(extmetrics.upstream_ca_file)},
    {"external-metrics.upstream.cert-file", K_STR, OFF(extmetrics.upstream_cert_file)},
    {"external-metrics.upstream.key-file", K_STR, OFF(extmetrics.upstream_key_file)},
    {"external-metrics.upstream.token-file", K_STR, OFF(extmetrics.upstream_token_file)},
    {"prometheus.url", K_STR, OFF(prometheus.url)},
    {"prometheus.ca-file", K_STR, OFF(prometheus.ca_file)},
    {"prometheus.token-file", K_STR, OFF(prometheus.token_file)},
    {"scrape.interval", K_DUR, OFF(scrape.interval_ms)},
    {"scrape.timeout", K_DUR, OFF(scrape.timeout_ms)},
    {"scrape.missing-fraction", K_FRACTION, OFF(scrape.missing_fraction)},
    {"scrape.rate-window", K_DUR, OFF(scrape.rate_window_ms)},
    {"checkpoint.configmap", K_STR, OFF(checkpoint_configmap)},
    {"defaults", K_DEFAULTS, OFF(defaults)},
};

size_t ctl_config_key_count(void)
{
    return UTIL_ARRAY_LEN(keys);
}

const char *ctl_config_key_name(size_t i)
{
    return i < UTIL_ARRAY_LEN(keys) ? keys[i].path : NULL;
}

static void set_str(char **field, const char *v)
{
    xfree(*field);
    *field = xstrdup(v);
}

void ctl_config_init(struct ctl_config *c)
{
    memset(c, 0, sizeof(*c));
    c->decision_interval_ms = 15000;
    set_str(&c->log_format, "logfmt");
    set_str(&c->log_level, "info");
    c->leader.enabled = true;
    const char *ns = getenv("POD_NAMESPACE");
    set_str(&c->leader.namespace_, ns && *ns ? ns : "default");
    set_str(&c->leader.lease_name, "gpuscaler");
    c->leader.lease_duration_ms = 15000;
    c->leader.renew_deadline_ms = 10000;
    c->leader.retry_period_ms = 2000;
    set_str(&c->listen.metrics, "0.0.0.0:9090");
    set_str(&c->listen.external_metrics, "0.0.0.0:6443");
    c->scrape.interval_ms = 5000;
    c->scrape.timeout_ms = 2000;
    c->scrape.missing_fraction = 0.3;
    c->scrape.rate_window_ms = 60000;
    set_str(&c->checkpoint_configmap, "gpuscaler-state");
}

void ctl_config_free(struct ctl_config *c)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(keys); i++) {
        if (keys[i].kind == K_STR)
            xfree(*(char **)((char *)c + keys[i].off));
    }
    for (size_t i = 0; i < c->n_namespaces; i++)
        xfree(c->namespaces[i]);
    for (size_t i = 0; i < c->n_defaults; i++) {
        xfree(c->defaults[i].key);
        xfree(c->defaults[i].value);
    }
    memset(c, 0, sizeof(*c));
}

static int fail(struct conf_error *err, const struct conf_node *n, const char *fmt, const char *a,
                const char *b)
{
    err->line = n ? n->line : 0;
    err->col = n ? n->col : 0;
    snprintf(err->msg, sizeof(err->msg), fmt, a, b);
    return -EINVAL;
}

static int apply_key(struct ctl_config *c, const struct key *k, const struct conf_node *v,
                     struct conf_error *err)
{
    char *field = (char *)c + k->off;
    if (k->kind == K_STRLIST) {
        if (v->type != CONF_SEQ)
            return fail(err, v, "%s: expected a list of namespaces%s", k->path, "");
        for (size_t i = 0; i < c->n_namespaces; i++)
            xfree(c->namespaces[i]);
        c->n_namespaces = 0;
        for (size_t i = 0; i < v->n; i++) {
            const struct conf_node *it = v->items[i];
            if (it->type != CONF_SCALAR || !*it->scalar)
                return fail(err, it, "%s: each entry must be a namespace name%s", k->path, "");
            if (c->n_namespaces == CTL_MAX_NAMESPACES)
                return fail(err, it, "%s: at most 64 namespaces%s", k->path, "");
            c->namespaces[c->n_namespaces++] = xstrdup(it->scalar);
        }
        return 0;
    }
    if (k->kind == K_DEFAULTS) {
        if (v->type != CONF_MAP)
            return fail(err, v, "%s: expected a map of annotation keys to values%s", k->path, "");
        for (size_t i = 0; i < v->n; i++) {
            const struct conf_node *it = v->items[i];
            if (it->type != CONF_SCALAR)
                return fail(err, it, "defaults.%s: expected a scalar value%s", v->keys[i], "");
            if (c->n_defaults == CTL_MAX_DEFAULTS)
                return fail(err, it, "defaults: too many keys%s%s", "", "");
            c->defaults[c->n_defaults].key = xstrdup(v->keys[i]);
            c->defaults[c->n_defaults].value = xstrdup(it->scalar);
            c->n_defaults++;
        }
        /* validate with the annotation parser so a typo fails at startup */
        const char *ks[CTL_MAX_DEFAULTS], *vs[CTL_MAX_DEFAULTS];
        char kb[CTL_MAX_DEFAULTS][128];
        for (size_t i = 0; i < c->n_defaults; i++) {
            snprintf(kb[i], sizeof(kb[i]), CTL_ANNOTATION_PREFIX "%s", c->defaults[i].key);
            ks[i] = kb[i];
            vs[i] = c->defaults[i].value;
        }
        struct ctl_config empty;
        memset(&empty, 0, sizeof(empty));
        empty.scrape.missing_fraction = c->scrape.missing_fraction;
        struct ctl_workload_config wl;
        char bad[128], msg[200];
        int rc = ctl_workload_parse(&empty, ks, vs, c->n_defaults, &wl, bad, sizeof(bad), msg,
                                    sizeof(msg));
        if (rc == -EINVAL && strstr(msg, "capacity-per-gpu: required") == NULL)
            return fail(err, v, "defaults: %s%s", msg, "");
        return 0;
    }
    if (v->type != CONF_SCALAR)
        return fail(err, v, "%s: expected a single value, not a %s", k->path,
                    conf_type_name(v->type));
    const char *s = v->scalar;
    switch (k->kind) {
    case K_STR:
        set_str((char **)field, s);
        return 0;
    case K_DUR: {
        int64_t ms;
        if (util_parse_duration_ms(s, &ms) != 0 || ms <= 0)
            return fail(err, v, "%s: '%.60s' is not a positive duration (like 15s, 2m)", k->path,
                        s);
        if (ms > UTIL_DURATION_MAX_MS)
            return fail(err, v, "%s: '%.60s' is out of range (at most 365d)", k->path, s);
        memcpy(field, &ms, sizeof(ms));
        return 0;
    }
    case K_BOOL: {
        bool b;
        if (util_parse_bool(s, &b) != 0)
            return fail(err, v, "%s: '%.60s' is not true or false", k->path, s);
        memcpy(field, &b, sizeof(b));
        return 0;
    }
    case K_FRACTION: {
        double d;
        if (util_parse_double(s, &d) != 0 || d < 0 || d > 1)
            return fail(err, v, "%s: '%.60s' is not a fraction between 0 and 1", k->path, s);
        memcpy(field, &d, sizeof(d));
        return 0;
    }
    default:
        return -EINVAL;
    }
}

/* Walk a map, joining keys with dots, and apply each leaf that is a key. */
static int walk(struct ctl_config *c, const struct conf_node *map, const char *prefix,
                struct conf_error *err)
{
    for (size_t i = 0; i < map->n; i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", map->keys[i]);
        const struct conf_node *v = map->items[i];
        const struct key *k = NULL;
        bool is_prefix = false;
        size_t pl = strlen(path);
        for (size_t j = 0; j < UTIL_ARRAY_LEN(keys); j++) {
            if (strcmp(keys[j].path, path) == 0)
                k = &keys[j];
            else if (strncmp(keys[j].path, path, pl) == 0 && keys[j].path[pl] == '.')
                is_prefix = true;
        }
        int rc;
        if (k)
            rc = apply_key(c, k, v, err);
        else if (is_prefix && v->type == CONF_MAP)
            rc = walk(c, v, path, err);
        else if (is_prefix)
            rc = fail(err, v, "%.120s: expected a map%s", path, "");
        else
            rc = fail(err, v, "unknown key '%.120s'%s", path, "");
        if (rc != 0)
            return rc;
    }
    return 0;
}

int ctl_config_apply(struct ctl_config *c, const struct conf_node *root, struct conf_error *err)
{
    memset(err, 0, sizeof(*err));
    if (!root)
        return 0;
    if (root->type != CONF_MAP)
        return fail(err, root, "the config file must be a map of keys, not a %s%s",
                    conf_type_name(root->type), "");
    int rc = walk(c, root, "", err);
    if (rc != 0)
        return rc;
    if (!c->leader.namespace_[0]) { /* "" in the file means "the default" */
        const char *ns = getenv("POD_NAMESPACE");
        set_str(&c->leader.namespace_, ns && *ns ? ns : "default");
    }
    enum util_log_format f;
    enum util_log_level l;
    if (util_log_format_parse(c->log_format, &f) != 0)
        return fail(err, conf_map_get(root, "log"), "log.format: '%.40s' is not json or logfmt%s",
                    c->log_format, "");
    if (util_log_level_parse(c->log_level, &l) != 0)
        return fail(err, conf_map_get(root, "log"),
                    "log.level: '%.40s' is not debug, info, warn or error%s", c->log_level, "");
    if (c->decision_interval_ms < 1000 || c->decision_interval_ms > 3600000)
        return fail(err, conf_map_get(root, "decision-interval"),
                    "decision-interval: must be between 1s and 1h%s%s", "", "");
    if (c->leader.renew_deadline_ms >= c->leader.lease_duration_ms ||
        c->leader.retry_period_ms >= c->leader.renew_deadline_ms)
        return fail(err, conf_map_get(root, "leader-election"),
                    "leader-election: need retry-period < renew-deadline < lease-duration%s%s",
                    "", "");
    return 0;
}

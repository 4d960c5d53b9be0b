/* SPDX-License-Identifier: Apache-2.0 */
/* controller/config: the daemon's YAML configuration file. A table maps each
 * dotted key to a field, a kind and its limits; unknown keys, wrong types and
 * bad values are errors with the line of the node, as KEDA and
 * prometheus-adapter do strict parsing. Every value is checked when the file
 * is loaded, before anything starts: addresses are HOST:PORT with an IP
 * host, URLs are http(s), Kubernetes names follow DNS-1123 (as the API server
 * would require), durations have a range per key. The `defaults` section
 * holds annotation values applied to every workload and is checked with the
 * same parser as the annotations. Flags go through the same per-key checks
 * (ctl_config_set). Files the settings name are checked for readability
 * separately (ctl_config_check_files), the one step here that does I/O. */
#include "controller.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "promql/promql.h"
#include "scrape/scrape.h"
#include "shard/shard.h"
#include "util/util.h"

enum kind {
    K_STR,       /* free text */
    K_DUR,       /* duration within [min_ms, max_ms] */
    K_BOOL,
    K_FRACTION,  /* 0..1 */
    K_INT,       /* whole number within [min, max], stored as int64_t */
    K_STRLIST,   /* namespaces: DNS-1123 labels */
    K_DEFAULTS,  /* annotation defaults */
    K_HEADERS,   /* prometheus.headers: a map of header names to values */
    K_ADDR,      /* HOST:PORT, host an IP address (empty = 0.0.0.0) */
    K_URL,       /* "" or an http:// or https:// URL */
    K_PATH,      /* "" or a file path */
    K_NS,        /* "" (= $POD_NAMESPACE) or a DNS-1123 label */
    K_NAME,      /* a DNS-1123 subdomain of at most max bytes */
    K_LOGFMT,
    K_LOGLEVEL,
};

struct key {
    const char *path;
    enum kind kind;
    size_t off;
    int64_t min, max; /* K_DUR: milliseconds; K_NAME: max is the length */
};

#define OFF(f) offsetof(struct ctl_config, f)
#define HOUR_MS (3600LL * 1000)
/* checkpoint ConfigMaps are named <prefix>-<number> */
#define CHECKPOINT_PREFIX_MAX 200
/* shard Leases are <prefix>-<shard> and <prefix>-member-<identity, at most 63> */
#define SHARD_PREFIX_MAX 180

static const struct key keys[] = {
    {"decision-interval", K_DUR, OFF(decision_interval_ms), 1000, HOUR_MS},
    {"namespaces", K_STRLIST, OFF(namespaces), 0, 0},
    {"log.format", K_LOGFMT, OFF(log_format), 0, 0},
    {"log.level", K_LOGLEVEL, OFF(log_level), 0, 0},
    {"leader-election.enabled", K_BOOL, OFF(leader.enabled), 0, 0},
    {"leader-election.namespace", K_NS, OFF(leader.namespace_), 0, 0},
    {"leader-election.lease-name", K_NAME, OFF(leader.lease_name), 0, 253},
    {"leader-election.lease-duration", K_DUR, OFF(leader.lease_duration_ms), 1000, HOUR_MS},
    {"leader-election.renew-deadline", K_DUR, OFF(leader.renew_deadline_ms), 100, HOUR_MS},
    {"leader-election.retry-period", K_DUR, OFF(leader.retry_period_ms), 100, HOUR_MS},
    {"sharding.enabled", K_BOOL, OFF(sharding.enabled), 0, 0},
    {"sharding.shards", K_INT, OFF(sharding.shards), 1, SHARD_MAX},
    {"sharding.lease-prefix", K_NAME, OFF(sharding.lease_prefix), 0, SHARD_PREFIX_MAX},
    {"listen.metrics", K_ADDR, OFF(listen.metrics), 0, 0},
    {"listen.health", K_ADDR, OFF(listen.health), 0, 0},
    {"listen.external-metrics", K_ADDR, OFF(listen.external_metrics), 0, 0},
    {"external-metrics.enabled", K_BOOL, OFF(extmetrics.enabled), 0, 0},
    {"external-metrics.tls-cert-file", K_PATH, OFF(extmetrics.tls_cert_file), 0, 0},
    {"external-metrics.tls-key-file", K_PATH, OFF(extmetrics.tls_key_file), 0, 0},
    {"external-metrics.upstream.url", K_URL, OFF(extmetrics.upstream_url), 0, 0},
    {"external-metrics.upstream.ca-file", K_PATH, OFF(extmetrics.upstream_ca_file), 0, 0},
    {"external-metrics.upstream.cert-file", K_PATH, OFF(extmetrics.upstream_cert_file), 0, 0},
    {"external-metrics.upstream.key-file", K_PATH, OFF(extmetrics.upstream_key_file), 0, 0},
    {"external-metrics.upstream.token-file", K_PATH, OFF(extmetrics.upstream_token_file), 0, 0},
    {"prometheus.url", K_URL, OFF(prometheus.url), 0, 0},
    {"prometheus.ca-file", K_PATH, OFF(prometheus.ca_file), 0, 0},
    {"prometheus.cert-file", K_PATH, OFF(prometheus.cert_file), 0, 0},
    {"prometheus.key-file", K_PATH, OFF(prometheus.key_file), 0, 0},
    {"prometheus.token-file", K_PATH, OFF(prometheus.token_file), 0, 0},
    {"prometheus.username", K_STR, OFF(prometheus.username), 0, 0},
    {"prometheus.password-file", K_PATH, OFF(prometheus.password_file), 0, 0},
    {"prometheus.headers", K_HEADERS, OFF(prometheus.headers), 0, 0},
    {"scrape.interval", K_DUR, OFF(scrape.interval_ms), 100, HOUR_MS},
    {"scrape.timeout", K_DUR, OFF(scrape.timeout_ms), 100, HOUR_MS},
    {"scrape.missing-fraction", K_FRACTION, OFF(scrape.missing_fraction), 0, 0},
    {"scrape.rate-window", K_DUR, OFF(scrape.rate_window_ms), 1000, 24 * HOUR_MS},
    {"status.refresh-interval", K_DUR, OFF(status.refresh_interval_ms), 1000, HOUR_MS},
    {"status.writes-per-second", K_INT, OFF(status.writes_per_second), 1, 10000},
    {"checkpoint.configmap", K_NAME, OFF(checkpoint_configmap), 0, CHECKPOINT_PREFIX_MAX},
    {"checkpoint.configmaps", K_INT, OFF(checkpoint_configmaps), 1, 1000},
    {"defaults", K_DEFAULTS, OFF(defaults), 0, 0},
};

static bool is_string_kind(enum kind k)
{
    return k == K_STR || k == K_ADDR || k == K_URL || k == K_PATH || k == K_NS || k == K_NAME ||
           k == K_LOGFMT || k == K_LOGLEVEL;
}

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
    c->sharding.shards = 16;
    set_str(&c->sharding.lease_prefix, "gpuscaler-shard");
    set_str(&c->listen.metrics, "0.0.0.0:9090");
    set_str(&c->listen.health, "0.0.0.0:8081");
    set_str(&c->listen.external_metrics, "0.0.0.0:6443");
    c->scrape.interval_ms = 5000;
    c->scrape.timeout_ms = 2000;
    c->scrape.missing_fraction = 0.3;
    c->scrape.rate_window_ms = 60000;
    c->status.refresh_interval_ms = 4 * 60 * 1000;
    c->status.writes_per_second = 20;
    set_str(&c->checkpoint_configmap, "gpuscaler-state");
    c->checkpoint_configmaps = 64;
}

void ctl_config_free(struct ctl_config *c)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(keys); i++) {
        if (is_string_kind(keys[i].kind))
            xfree(*(char **)((char *)c + keys[i].off));
    }
    for (size_t i = 0; i < c->n_namespaces; i++)
        xfree(c->namespaces[i]);
    for (size_t i = 0; i < c->n_defaults; i++) {
        xfree(c->defaults[i].key);
        xfree(c->defaults[i].value);
    }
    for (size_t i = 0; i < c->prometheus.n_headers; i++) {
        xfree(c->prometheus.headers[i].key);
        xfree(c->prometheus.headers[i].value);
    }
    memset(c, 0, sizeof(*c));
}

static const struct key *find_key(const char *path)
{
    return util_table_find(keys, UTIL_ARRAY_LEN(keys), sizeof(keys[0]), path);
}

/* ---- value checks (pure) ------------------------------------------------------ */

static bool dns_label_ok(const char *s, size_t n)
{
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (c != '-' || i == 0 || i == n - 1))
            return false;
    }
    return true;
}

bool ctl_config_namespace_valid(const char *s)
{
    return s && dns_label_ok(s, strlen(s));
}

/* RFC 1123 subdomain as Kubernetes checks object names: dot-separated
 * labels of [a-z0-9-] starting and ending alphanumeric, at most max bytes. */
static bool dns_subdomain_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return false;
    const char *p = s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t ln = dot ? (size_t)(dot - p) : strlen(p);
        if (ln == 0)
            return false;
        for (size_t i = 0; i < ln; i++) {
            char c = p[i];
            bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
            if (!alnum && (c != '-' || i == 0 || i == ln - 1))
                return false;
        }
        if (!dot)
            return true;
        p = dot + 1;
    }
}

/* HOST:PORT with an IPv4 or IPv6 address (brackets optional for IPv6) or an
 * empty host (all IPv4 addresses); port 0 to 65535 (0: any free port). */
int ctl_listen_addr_split(const char *addr, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(addr, ':');
    int64_t p;
    if (!colon || util_parse_int64(colon + 1, &p) != 0 || p < 0 || p > 65535)
        return -EINVAL;
    size_t hl = (size_t)(colon - addr);
    const char *h = addr;
    if (hl == 0) {
        h = "0.0.0.0";
        hl = strlen(h);
    } else if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    char buf[INET6_ADDRSTRLEN + 1];
    unsigned char bin[16];
    if (hl >= sizeof(buf) || hl >= hostlen)
        return -EINVAL;
    memcpy(buf, h, hl);
    buf[hl] = '\0';
    if (inet_pton(AF_INET, buf, bin) != 1 && inet_pton(AF_INET6, buf, bin) != 1)
        return -EINVAL;
    memcpy(host, buf, hl + 1);
    *port = (int)p;
    return 0;
}

static bool addr_ok(const char *s)
{
    char host[INET6_ADDRSTRLEN + 1];
    int port;
    return ctl_listen_addr_split(s, host, sizeof(host), &port) == 0;
}

/* http:// or https://, a host, an optional port, an optional path; no
 * spaces or control characters. */
static bool url_ok(const char *s)
{
    size_t skip = strncmp(s, "http://", 7) == 0 ? 7 : strncmp(s, "https://", 8) == 0 ? 8 : 0;
    if (!skip)
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return false;
    const char *host = s + skip;
    size_t hl = strcspn(host, "/?#");
    if (hl == 0)
        return false;
    const char *end = host + hl;
    const char *colon = host[0] == '[' ? strstr(host, "]:") : memchr(host, ':', hl);
    if (colon && colon < end) {
        if (host[0] == '[')
            colon++;
        char port[8];
        size_t pl = (size_t)(end - colon - 1);
        int64_t v;
        if (pl == 0 || pl >= sizeof(port))
            return false;
        memcpy(port, colon + 1, pl);
        port[pl] = '\0';
        if (util_parse_int64(port, &v) != 0 || v < 1 || v > 65535)
            return false;
        return colon > host;
    }
    return true;
}

/* Check and store one scalar value. err gets "key: message". */
static int set_scalar(struct ctl_config *c, const struct key *k, const char *s, char *err,
                      size_t errlen)
{
    char *field = (char *)c + k->off;
    switch (k->kind) {
    case K_STR:
    case K_PATH:
        set_str((char **)field, s);
        return 0;
    case K_ADDR:
        if (!addr_ok(s)) {
            snprintf(err, errlen,
                     "%s: '%.60s' is not HOST:PORT with an IP address as host (like "
                     "0.0.0.0:9090, [::]:9090 or :9090)",
                     k->path, s);
            return -EINVAL;
        }
        set_str((char **)field, s);
        return 0;
    case K_URL:
        if (*s && !url_ok(s)) {
            snprintf(err, errlen,
                     "%s: '%.80s' is not an http:// or https:// URL with a host (like "
                     "http://prometheus.monitoring:9090)",
                     k->path, s);
            return -EINVAL;
        }
        set_str((char **)field, s);
        return 0;
    case K_NS:
        if (*s && !dns_label_ok(s, strlen(s))) {
            snprintf(err, errlen,
                     "%s: '%.80s' is not a valid namespace name (a DNS-1123 label: at most 63 "
                     "characters of a-z, 0-9 and '-', starting and ending with a letter or digit)",
                     k->path, s);
            return -EINVAL;
        }
        set_str((char **)field, s);
        return 0;
    case K_NAME:
        if (!dns_subdomain_ok(s, (size_t)k->max)) {
            snprintf(err, errlen,
                     "%s: '%.80s' is not a valid Kubernetes name (a DNS-1123 subdomain: at most "
                     "%lld characters of a-z, 0-9, '-' and '.', each part starting and ending "
                     "with a letter or digit)",
                     k->path, s, (long long)k->max);
            return -EINVAL;
        }
        set_str((char **)field, s);
        return 0;
    case K_LOGFMT: {
        enum util_log_format f;
        if (util_log_format_parse(s, &f) != 0) {
            snprintf(err, errlen, "%s: '%.40s' is not one of json, logfmt", k->path, s);
            return -EINVAL;
        }
        set_str((char **)field, s);
        return 0;
    }
    case K_LOGLEVEL: {
        enum util_log_level l;
        if (util_log_level_parse(s, &l) != 0) {
            snprintf(err, errlen, "%s: '%.40s' is not one of debug, info, warn, error", k->path,
                     s);
            return -EINVAL;
        }
        set_str((char **)field, s);
        return 0;
    }
    case K_DUR: {
        const struct util_range r = {(double)k->min, (double)k->max, false, NULL, 0};
        return util_parse_ranged(k->path, UTIL_DURATION, &r, s, field, err, errlen);
    }
    case K_BOOL: {
        bool b;
        if (util_parse_bool(s, &b) != 0) {
            snprintf(err, errlen, "%s: '%.60s' is not true or false", k->path, s);
            return -EINVAL;
        }
        memcpy(field, &b, sizeof(b));
        return 0;
    }
    case K_INT: {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || v < k->min || v > k->max) {
            snprintf(err, errlen, "%s: '%.60s' is not a whole number from %lld to %lld", k->path,
                     s, (long long)k->min, (long long)k->max);
            return -EINVAL;
        }
        int64_t iv = v;
        memcpy(field, &iv, sizeof(iv));
        return 0;
    }
    case K_FRACTION: {
        double d;
        if (util_parse_double(s, &d) != 0 || d < 0 || d > 1) {
            snprintf(err, errlen, "%s: '%.60s' is not a fraction between 0 and 1", k->path, s);
            return -EINVAL;
        }
        memcpy(field, &d, sizeof(d));
        return 0;
    }
    default:
        snprintf(err, errlen, "%s: not a single value", k->path);
        return -EINVAL;
    }
}

int ctl_config_set(struct ctl_config *c, const char *key, const char *value, char *err,
                   size_t errlen)
{
    const struct key *k = find_key(key);
    if (!k || k->kind == K_STRLIST || k->kind == K_DEFAULTS || k->kind == K_HEADERS) {
        snprintf(err, errlen, "unknown key '%.120s'", key);
        return -ENOENT;
    }
    return set_scalar(c, k, value ? value : "", err, errlen);
}

void ctl_config_promql(const struct ctl_config *c, struct promql_config *pc,
                       struct promql_header hs[CTL_MAX_HEADERS])
{
    promql_config_init(pc);
    pc->url = c->prometheus.url;
    pc->ca_file = c->prometheus.ca_file;
    pc->cert_file = c->prometheus.cert_file;
    pc->key_file = c->prometheus.key_file;
    pc->token_file = c->prometheus.token_file;
    pc->username = c->prometheus.username;
    pc->password_file = c->prometheus.password_file;
    for (size_t i = 0; i < c->prometheus.n_headers; i++)
        hs[i] = (struct promql_header){c->prometheus.headers[i].key,
                                       c->prometheus.headers[i].value};
    pc->headers = hs;
    pc->n_headers = c->prometheus.n_headers;
}

/* The Prometheus client's own check of its credentials and headers, so a
 * bad setting fails at startup with the key it is about. */
static int check_prometheus(const struct ctl_config *c, const char **key, char *err,
                            size_t errlen)
{
    struct promql_header h[CTL_MAX_HEADERS];
    struct promql_config pc;
    ctl_config_promql(c, &pc, h);
    char why[200];
    if (promql_config_check(&pc, why, sizeof(why)) == 0)
        return 0;
    /* the message starts with the setting it is about */
    static const struct {
        const char *sub, *key;
    } subkeys[] = {
        {"headers", "prometheus.headers"},         {"username", "prometheus.username"},
        {"password-file", "prometheus.password-file"}, {"cert-file", "prometheus.cert-file"},
        {"key-file", "prometheus.key-file"},       {"token-file", "prometheus.token-file"},
    };
    *key = "prometheus";
    for (size_t i = 0; i < UTIL_ARRAY_LEN(subkeys); i++) {
        size_t n = strlen(subkeys[i].sub);
        if (strncmp(why, subkeys[i].sub, n) == 0 && (why[n] == ':' || why[n] == ' ')) {
            *key = subkeys[i].key;
            break;
        }
    }
    snprintf(err, errlen, "prometheus.%s", why);
    return -EINVAL;
}

int ctl_config_validate(const struct ctl_config *c, const char **key, char *err, size_t errlen)
{
    const char *dummy_key;
    if (!key)
        key = &dummy_key;
    *key = NULL;
    if (c->leader.renew_deadline_ms >= c->leader.lease_duration_ms ||
        c->leader.retry_period_ms >= c->leader.renew_deadline_ms) {
        char a[32], b[32], d[32];
        util_format_duration(c->leader.retry_period_ms, a, sizeof(a));
        util_format_duration(c->leader.renew_deadline_ms, b, sizeof(b));
        util_format_duration(c->leader.lease_duration_ms, d, sizeof(d));
        *key = "leader-election.renew-deadline";
        snprintf(err, errlen,
                 "leader-election: need retry-period < renew-deadline < lease-duration "
                 "(have %s, %s, %s)",
                 a, b, d);
        return -EINVAL;
    }
    if (c->sharding.enabled && !c->leader.enabled) {
        *key = "sharding.enabled";
        snprintf(err, errlen,
                 "sharding.enabled: needs leader-election.enabled (the shard Leases use its "
                 "namespace and durations)");
        return -EINVAL;
    }
    /* the single leader's Lease is watched beside the shard and member
     * Leases (a replica with sharding off holds it): it must be none of them */
    if (c->sharding.enabled && c->leader.lease_name && c->sharding.lease_prefix) {
        const char *n = c->leader.lease_name, *p = c->sharding.lease_prefix;
        size_t pl = strlen(p);
        bool ours = strncmp(n, p, pl) == 0 && n[pl] == '-' &&
                    (strspn(n + pl + 1, "0123456789") == strlen(n + pl + 1) ||
                     strncmp(n + pl, SHARD_MEMBER_INFIX, strlen(SHARD_MEMBER_INFIX)) == 0);
        if (ours) {
            *key = "leader-election.lease-name";
            snprintf(err, errlen,
                     "leader-election.lease-name: '%.80s' is a name of the shard Leases "
                     "(sharding.lease-prefix '%.80s'): choose another", n, p);
            return -EINVAL;
        }
    }
    /* the listeners bind apart: one address twice failed only after start */
    const struct {
        const char *key, *addr;
        bool on;
    } ls[] = {{"listen.metrics", c->listen.metrics, true},
              {"listen.health", c->listen.health, true},
              {"listen.external-metrics", c->listen.external_metrics, c->extmetrics.enabled}};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(ls); i++)
        for (size_t j = i + 1; j < UTIL_ARRAY_LEN(ls); j++) {
            char hi[64], hj[64];
            int pi, pj;
            if (!ls[i].on || !ls[j].on || !ls[i].addr || !ls[j].addr ||
                ctl_listen_addr_split(ls[i].addr, hi, sizeof(hi), &pi) != 0 ||
                ctl_listen_addr_split(ls[j].addr, hj, sizeof(hj), &pj) != 0 || pi != pj ||
                pi == 0)
                continue;
            /* "::" takes every address (dual stack), "0.0.0.0" every IPv4 one */
            bool v6_i = strchr(hi, ':') != NULL, v6_j = strchr(hj, ':') != NULL;
            bool all_i = strcmp(hi, "::") == 0 || (strcmp(hi, "0.0.0.0") == 0 && !v6_j),
                 all_j = strcmp(hj, "::") == 0 || (strcmp(hj, "0.0.0.0") == 0 && !v6_i);
            if (strcmp(hi, hj) == 0 || all_i || all_j) {
                *key = ls[j].key;
                snprintf(err, errlen, "%s: %s overlaps %s %s (each listener needs its own port)",
                         ls[j].key, ls[j].addr, ls[i].key, ls[i].addr);
                return -EINVAL;
            }
        }
    /* a pod's newest scrape is up to an interval and a timeout old at a
     * tick: a shorter metrics-stale-after (the defaults', else the policy's)
     * reads most ticks as stale, and every scraped Deployment holds */
    struct policy_config pc;
    policy_config_init(&pc);
    int64_t stale = pc.metrics_stale_after_ms;
    for (size_t i = 0; i < c->n_defaults; i++)
        if (strcmp(c->defaults[i].key, "metrics-stale-after") == 0)
            (void)util_parse_duration_ms(c->defaults[i].value, &stale);
    if (stale <= c->scrape.interval_ms + c->scrape.timeout_ms) {
        char st[32], iv[32], to[32];
        util_format_duration(stale, st, sizeof(st));
        util_format_duration(c->scrape.interval_ms, iv, sizeof(iv));
        util_format_duration(c->scrape.timeout_ms, to, sizeof(to));
        *key = "scrape.interval";
        snprintf(err, errlen,
                 "scrape.interval: %s plus scrape.timeout %s is not below metrics-stale-after "
                 "%s: the newest scrape would read as stale at most ticks (shorten the "
                 "interval, or give defaults.metrics-stale-after)", iv, to, st);
        return -EINVAL;
    }
    /* a pod's counters keep a window of at most SCRAPE_MAX_WINDOW_INTERVALS
     * samples: a longer window would be a rate over its last part only */
    if (c->scrape.rate_window_ms > SCRAPE_MAX_WINDOW_INTERVALS * c->scrape.interval_ms) {
        char w[32], iv[32];
        util_format_duration(c->scrape.rate_window_ms, w, sizeof(w));
        util_format_duration(c->scrape.interval_ms, iv, sizeof(iv));
        *key = "scrape.rate-window";
        snprintf(err, errlen,
                 "scrape.rate-window: %s is more than %d scrape.intervals (%s): raise "
                 "scrape.interval or shorten the window", w, SCRAPE_MAX_WINDOW_INTERVALS, iv);
        return -EINVAL;
    }
    const struct {
        const char *a, *b, *key_a, *key_b;
    } pairs[] = {
        {c->extmetrics.tls_cert_file, c->extmetrics.tls_key_file,
         "external-metrics.tls-cert-file", "external-metrics.tls-key-file"},
        {c->extmetrics.upstream_cert_file, c->extmetrics.upstream_key_file,
         "external-metrics.upstream.cert-file", "external-metrics.upstream.key-file"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(pairs); i++) {
        bool has_a = pairs[i].a && *pairs[i].a, has_b = pairs[i].b && *pairs[i].b;
        if (has_a != has_b) {
            *key = has_a ? pairs[i].key_a : pairs[i].key_b;
            snprintf(err, errlen, "%s: set without %s (give both, or neither)", *key,
                     has_a ? pairs[i].key_b : pairs[i].key_a);
            return -EINVAL;
        }
    }
    return check_prometheus(c, key, err, errlen);
}

/* ---- the file ------------------------------------------------------------------ */

static int fail(struct conf_error *err, const struct conf_node *n, const char *fmt, const char *a,
                const char *b)
{
    err->line = n ? n->line : 0;
    err->col = n ? n->col : 0;
    snprintf(err->msg, sizeof(err->msg), fmt, a, b);
    return -EINVAL;
}

/* The node of a dotted key in the file, or NULL. */
static const struct conf_node *node_of(const struct conf_node *root, const char *path)
{
    const struct conf_node *n = root;
    char part[128];
    const char *p = path;
    while (n && *p) {
        size_t l = strcspn(p, ".");
        if (l >= sizeof(part))
            return NULL;
        memcpy(part, p, l);
        part[l] = '\0';
        n = conf_map_get(n, part);
        p += l + (p[l] == '.');
    }
    return n;
}

static int apply_defaults(struct ctl_config *c, const struct key *k, const struct conf_node *v,
                          struct conf_error *err)
{
    if (v->type != CONF_MAP)
        return fail(err, v, "%s: expected a map of annotation keys to values%s", k->path, "");
    for (size_t i = 0; i < v->n; i++) {
        const struct conf_node *it = v->items[i];
        if (it->type != CONF_SCALAR)
            return fail(err, it, "defaults.%s: expected a scalar value%s", v->keys[i], "");
        /* a Deployment opts in with its own annotation, and the status is
         * gpuscaler's: as defaults they would do nothing */
        if (strcmp(v->keys[i], "enabled") == 0 || strcmp(v->keys[i], "status") == 0)
            return fail(err, it, "defaults.%s: not a default: %s", v->keys[i],
                        strcmp(v->keys[i], "enabled") == 0
                            ? "each Deployment opts in with its own gpuscaler.io/enabled"
                            : "gpuscaler.io/status is written by gpuscaler");
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
    /* the capacity a Deployment's own annotation may give: a stand-in, so
     * that the checks across keys behind its own (min above max, the
     * hysteresis) still run */
    size_t n = c->n_defaults;
    bool capacity = false;
    for (size_t i = 0; i < n; i++)
        capacity |= strcmp(c->defaults[i].key, "capacity-per-gpu") == 0;
    const char *ks_all[CTL_MAX_DEFAULTS + 1], *vs_all[CTL_MAX_DEFAULTS + 1];
    memcpy(ks_all, ks, n * sizeof(*ks));
    memcpy(vs_all, vs, n * sizeof(*vs));
    if (!capacity) {
        ks_all[n] = CTL_ANNOTATION_PREFIX "capacity-per-gpu";
        vs_all[n++] = "1";
    }
    struct ctl_config empty;
    memset(&empty, 0, sizeof(empty));
    empty.scrape.missing_fraction = c->scrape.missing_fraction;
    struct ctl_workload_config wl;
    char bad[128], msg[200];
    int rc = ctl_workload_parse(&empty, ks_all, vs_all, n, &wl, bad, sizeof(bad), msg,
                                sizeof(msg));
    /* what a Deployment's own annotations may complete is not an error here,
     * nor a capacity-start beside a number (for the Deployments whose own
     * capacity-per-gpu is auto; the last check, so it hides none after it) */
    if (rc == -EINVAL && strstr(msg, "min-replicas: 0 needs") == NULL &&
        strstr(msg, "request-metric: required") == NULL &&
        strncmp(msg, "capacity-start: no effect", 25) != 0) {
        /* point at the offending entry's line */
        const char *bk = strncmp(bad, CTL_ANNOTATION_PREFIX, strlen(CTL_ANNOTATION_PREFIX)) == 0
                             ? bad + strlen(CTL_ANNOTATION_PREFIX)
                             : bad;
        const struct conf_node *at = conf_map_get(v, bk);
        return fail(err, at ? at : v, "defaults: %s%s", msg, "");
    }
    return 0;
}

static int apply_headers(struct ctl_config *c, const struct key *k, const struct conf_node *v,
                         struct conf_error *err)
{
    if (v->type != CONF_MAP)
        return fail(err, v, "%s: expected a map of header names to values%s", k->path, "");
    for (size_t i = 0; i < c->prometheus.n_headers; i++) {
        xfree(c->prometheus.headers[i].key);
        xfree(c->prometheus.headers[i].value);
    }
    c->prometheus.n_headers = 0;
    for (size_t i = 0; i < v->n; i++) {
        const struct conf_node *it = v->items[i];
        char why[200];
        if (it->type != CONF_SCALAR)
            return fail(err, it, "%s.%.80s: expected a single value", k->path, v->keys[i]);
        if (c->prometheus.n_headers == CTL_MAX_HEADERS)
            return fail(err, it, "%s: at most 32 headers%s", k->path, "");
        if (promql_header_check(v->keys[i], it->scalar, why, sizeof(why)) != 0)
            return fail(err, it, "%s: %s", k->path, why);
        struct ctl_kv *h = &c->prometheus.headers[c->prometheus.n_headers++];
        h->key = xstrdup(v->keys[i]);
        h->value = xstrdup(it->scalar);
    }
    return 0;
}

static int apply_key(struct ctl_config *c, const struct key *k, const struct conf_node *v,
                     struct conf_error *err)
{
    if (k->kind == K_STRLIST) {
        if (v->type != CONF_SEQ)
            return fail(err, v, "%s: expected a list of namespaces%s", k->path, "");
        for (size_t i = 0; i < c->n_namespaces; i++)
            xfree(c->namespaces[i]);
        c->n_namespaces = 0;
        for (size_t i = 0; i < v->n; i++) {
            const struct conf_node *it = v->items[i];
            if (it->type != CONF_SCALAR || !dns_label_ok(it->scalar, strlen(it->scalar)))
                return fail(err, it,
                            "%s: '%.80s' is not a valid namespace name (a DNS-1123 label)",
                            k->path, it->type == CONF_SCALAR ? it->scalar : "");
            if (c->n_namespaces == CTL_MAX_NAMESPACES)
                return fail(err, it, "%s: at most 64 namespaces%s", k->path, "");
            c->namespaces[c->n_namespaces++] = xstrdup(it->scalar);
        }
        return 0;
    }
    if (k->kind == K_DEFAULTS)
        return apply_defaults(c, k, v, err);
    if (k->kind == K_HEADERS)
        return apply_headers(c, k, v, err);
    if (v->type != CONF_SCALAR)
        return fail(err, v, "%s: expected a single value, not a %s", k->path,
                    conf_type_name(v->type));
    char msg[sizeof(err->msg)];
    if (set_scalar(c, k, v->scalar, msg, sizeof(msg)) != 0)
        return fail(err, v, "%s%s", msg, "");
    return 0;
}

/* Walk a map, joining keys with dots, and apply each leaf that is a key. */
static int walk(struct ctl_config *c, const struct conf_node *map, const char *prefix,
                struct conf_error *err)
{
    for (size_t i = 0; i < map->n; i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", map->keys[i]);
        const struct conf_node *v = map->items[i];
        if (strchr(map->keys[i], '.')) /* beside its nested form, one would hide the other */
            return fail(err, v, "'%.120s': write the key nested, not dotted (as in the "
                                "documentation)%s", path, "");
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

/* Where a check across keys blames key: its node in the file, else its
 * section's, else NULL. */
static const struct conf_node *blame(const struct conf_node *root, const char *key)
{
    const struct conf_node *at = key && root ? node_of(root, key) : NULL;
    if (!at && key && strncmp(key, "leader-election.", 16) == 0)
        at = conf_map_get(root, "leader-election");
    if (!at && key && strncmp(key, "external-metrics.", 17) == 0)
        at = conf_map_get(root, "external-metrics");
    if (!at && key && strncmp(key, "prometheus", 10) == 0)
        at = conf_map_get(root, "prometheus");
    if (!at && key && strncmp(key, "scrape.", 7) == 0)
        at = conf_map_get(root, "scrape");
    if (!at && key && strncmp(key, "listen.", 7) == 0)
        at = conf_map_get(root, "listen");
    return at;
}

int ctl_config_line(const struct conf_node *root, const char *key)
{
    const struct conf_node *at = root && root->type == CONF_MAP ? blame(root, key) : NULL;
    return at ? at->line : 0;
}

static int apply(struct ctl_config *c, const struct conf_node *root, struct conf_error *err,
                 bool validate)
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
    const char *key = NULL;
    char msg[sizeof(err->msg)];
    if (validate && ctl_config_validate(c, &key, msg, sizeof(msg)) != 0) {
        const struct conf_node *at = blame(root, key);
        return fail(err, at ? at : root, "%s%s", msg, "");
    }
    return 0;
}

int ctl_config_apply(struct ctl_config *c, const struct conf_node *root, struct conf_error *err)
{
    return apply(c, root, err, true);
}

int ctl_config_apply_keys(struct ctl_config *c, const struct conf_node *root,
                          struct conf_error *err)
{
    return apply(c, root, err, false);
}

/* ---- files (I/O) ------------------------------------------------------------------ */

int ctl_config_check_files(const struct ctl_config *c, const struct conf_node *root,
                           struct conf_error *err)
{
    memset(err, 0, sizeof(*err));
    bool up = c->extmetrics.enabled && c->extmetrics.upstream_url && *c->extmetrics.upstream_url;
    bool prom = c->prometheus.url && *c->prometheus.url;
    const struct {
        bool used;
        const char *key, *path;
    } files[] = {
        {c->extmetrics.enabled, "external-metrics.tls-cert-file", c->extmetrics.tls_cert_file},
        {c->extmetrics.enabled, "external-metrics.tls-key-file", c->extmetrics.tls_key_file},
        {up, "external-metrics.upstream.ca-file", c->extmetrics.upstream_ca_file},
        {up, "external-metrics.upstream.cert-file", c->extmetrics.upstream_cert_file},
        {up, "external-metrics.upstream.key-file", c->extmetrics.upstream_key_file},
        {up, "external-metrics.upstream.token-file", c->extmetrics.upstream_token_file},
        {prom, "prometheus.ca-file", c->prometheus.ca_file},
        {prom, "prometheus.cert-file", c->prometheus.cert_file},
        {prom, "prometheus.key-file", c->prometheus.key_file},
        {prom, "prometheus.token-file", c->prometheus.token_file},
        {prom, "prometheus.password-file", c->prometheus.password_file},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(files); i++) {
        const char *p = files[i].path;
        if (!files[i].used || !p || !*p || access(p, R_OK) == 0)
            continue;
        int e = errno;
        const struct conf_node *at = node_of(root, files[i].key);
        err->line = at ? at->line : 0;
        err->col = at ? at->col : 0;
        snprintf(err->msg, sizeof(err->msg), "%s: cannot read %.120s: %s", files[i].key, p,
                 strerror(e));
        return -e;
    }
    return 0;
}

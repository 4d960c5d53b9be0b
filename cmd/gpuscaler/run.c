/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuscaler run`: wires the daemon together on one libuv loop: config
 * (file + flags), logging, the HTTP client, the Kubernetes client and
 * caches, the scraper, the controller, the plain HTTP listeners for /metrics
 * and for the probes (/healthz, /livez, /readyz on their own port, as
 * controller-runtime does, so that clients of /metrics cannot crowd out the
 * kubelet), and (when enabled) the external metrics API. SIGTERM and SIGINT
 * shut down gracefully: the lease is released and in-flight writes finish
 * before the loop closes. */
#include <errno.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "controller/controller.h"
#include "extmetrics-glue.h"
#include "gpuscaler-version.h"
#include "httpc/httpc.h"
#include "httpd/httpd.h"
#include "kube/kube.h"
#include "promql/promql.h"
#include "scrape/scrape.h"
#include "util/util.h"

#define SUB "main"

/* A request the API server throttles while we stop is sent again only while
 * its wait ends within this much of SIGTERM (kube_drain), well inside the
 * chart's terminationGracePeriodSeconds of 30 s. */
#define SHUTDOWN_RETRY_BUDGET_MS 10000
/* The metrics and health listeners answer GETs (any method reads the same
 * page): a request body is never read, so no client makes them buffer more
 * than this (httpd's default is 1 MiB); the same as the external metrics
 * listener's, EXTMETRICS_MAX_BODY_BYTES. */
#define GET_ONLY_BODY_BYTES 4096

struct daemon {
    uv_loop_t loop;
    struct ctl_config cfg;
    struct ctl_opts opts;
    char *kubeconfig, *context;
    struct httpc *http;
    struct kube *kube;
    struct kube_cache *cache;
    struct scrape *scrape;
    struct promql *promql;
    struct controller *ctl;
    struct httpd *admin;
    struct httpd *health;
    struct extmetrics_glue *em;
    uv_signal_t sigterm, sigint;
    uv_timer_t first_tick;
    int stopping;
    int exit_code;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuscaler run [flags]\n"
            "\n"
            "Watch the Kubernetes API for Deployments annotated gpuscaler.io/enabled=\"true\"\n"
            "and scale them on requests per second per GPU (docs/annotations.md).\n"
            "\n"
            "flags (override the config file):\n"
            "  --config FILE                  YAML config file (docs/configuration.md)\n"
            "  --kubeconfig FILE              kubeconfig (default $KUBECONFIG, its files merged as kubectl\n"
            "                                 does; in-cluster; ~/.kube/config)\n"
            "  --context NAME                 kubeconfig context (default current-context)\n"
            "  --namespace NS                 watch this namespace (repeatable; default all)\n"
            "  --decision-interval DURATION   default 15s\n"
            "  --dry-run                      decide and log; no scaling, status or Events (the Lease is\n"
            "                                 still taken so only one instance logs decisions)\n"
            "  --record DIR                   append each workload's request rate as a trace CSV\n"
            "  --leader-elect=true|false      Lease-based leader election (default true)\n"
            "  --leader-election-namespace NS default $POD_NAMESPACE, else default\n"
            "  --lease-name NAME              default gpuscaler\n"
            "  --id NAME                      identity (default $POD_NAME or the host name)\n"
            "  --metrics-addr HOST:PORT       /metrics (default 0.0.0.0:9090)\n"
            "  --health-addr HOST:PORT        /healthz /livez /readyz (default 0.0.0.0:8081)\n"
            "  --external-metrics=true|false  serve external.metrics.k8s.io (default false)\n"
            "  --external-metrics-addr H:P    default 0.0.0.0:6443\n"
            "  --tls-cert-file FILE           serving certificate for the external metrics API\n"
            "  --tls-key-file FILE            its key\n"
            "  --log-format json|logfmt       default logfmt\n"
            "  --log-level debug|info|warn|error\n");
}

static void set_str(char **f, const char *v)
{
    xfree(*f);
    *f = xstrdup(v);
}


/* ---- admin listener: /metrics /healthz /readyz --------------------------- */

/* gpuscaler_heap_bytes and the parts of it each component can account for
 * (docs/operations.md, "Memory"). */
static void write_memory_metrics(struct daemon *d, struct util_buf *b)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    util_buf_printf(b, "# HELP gpuscaler_heap_bytes Bytes allocated on the heap and in use.\n"
                       "# TYPE gpuscaler_heap_bytes gauge\n"
                       "gpuscaler_heap_bytes %zu\n",
                    mi.uordblks + mi.hblkhd);
#endif
    size_t scrape_bytes = 0;
    if (d->scrape) {
        struct scrape_stats st;
        scrape_stats(d->scrape, &st);
        scrape_bytes = st.memory_bytes;
    }
    util_buf_printf(b,
                    "# HELP gpuscaler_memory_bytes Heap bytes held by a component.\n"
                    "# TYPE gpuscaler_memory_bytes gauge\n"
                    "gpuscaler_memory_bytes{component=\"scrape\"} %zu\n"
                    "gpuscaler_memory_bytes{component=\"libcurl\"} %zu\n"
                    "gpuscaler_memory_bytes{component=\"kube_cache\"} %zu\n"
                    "gpuscaler_memory_bytes{component=\"forecast\"} %zu\n",
                    scrape_bytes, httpc_memory_bytes(), d->cache ? kube_cache_memory(d->cache) : 0,
                    d->ctl ? controller_forecast_memory(d->ctl) : 0);
}

/* The listeners' connection counters (the front door, httpd.h). */
static void write_http_metrics(struct daemon *d, struct util_buf *b)
{
    const struct {
        const char *name;
        const struct httpd *srv;
    } ls[] = {
        {"metrics", d->admin},
        {"health", d->health},
        {"external-metrics", d->em ? extmetrics_glue_httpd(d->em) : NULL},
    };
    static const struct {
        const char *name, *type, *help;
    } fams[] = {
        {"gpuscaler_http_connections", "gauge", "Open connections of a listener."},
        {"gpuscaler_http_connections_refused_total", "counter",
         "Connections closed on arrival: every open one was busy."},
        {"gpuscaler_http_connections_evicted_total", "counter",
         "Idle or unfinished connections closed to make room for a new one."},
    };
    for (size_t f = 0; f < UTIL_ARRAY_LEN(fams); f++) {
        util_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", fams[f].name, fams[f].help,
                        fams[f].name, fams[f].type);
        for (size_t i = 0; i < UTIL_ARRAY_LEN(ls); i++) {
            if (!ls[i].srv)
                continue;
            struct httpd_stats st;
            httpd_stats(ls[i].srv, &st);
            unsigned long long v = f == 0 ? st.connections : f == 1 ? st.refused : st.evicted;
            util_buf_printf(b, "%s{listener=\"%s\"} %llu\n", fams[f].name, ls[i].name, v);
        }
    }
}

static const struct httpd_header text_plain[] = {{"Content-Type", "text/plain; charset=utf-8"}};

/* /healthz, /livez, /readyz: true when req was one of them (and is answered). */
static bool probe_request(struct daemon *d, struct httpd_request *req)
{
    if (strcmp(req->path, "/healthz") == 0 || strcmp(req->path, "/livez") == 0) {
        httpd_respond(req, 200, text_plain, 1, "ok\n", 3);
        return true;
    }
    if (strcmp(req->path, "/readyz") == 0) {
        /* with the external metrics API, also its front-proxy trust: a pod
         * that would answer the aggregator 401 gets no Service traffic */
        bool trust = !d->em || extmetrics_glue_ready(d->em);
        /* a namespace whose lists fail holds its own Deployments only: the
         * others are served */
        bool synced = d->ctl && controller_synced(d->ctl);
        bool ready = d->ctl && controller_ready(d->ctl);
        bool ok = ready && !d->stopping && trust;
        char body[160];
        int n = snprintf(body, sizeof(body), "%s (caches %s, %s%s)\n", ok ? "ok" : "not ready",
                         synced  ? "synced"
                         : ready ? "synced but a namespace's, whose lists fail"
                                 : "syncing",
                         d->ctl && controller_leading(d->ctl) ? "leader" : "follower",
                         trust ? "" : ", no front-proxy trust yet");
        httpd_respond(req, ok ? 200 : 503, text_plain, 1, body, (size_t)n);
        return true;
    }
    return false;
}

static void health_request(struct httpd_request *req, void *arg)
{
    if (!probe_request(arg, req))
        httpd_respond(req, 404, text_plain, 1, "not found\n", 10);
}

static void admin_request(struct httpd_request *req, void *arg)
{
    struct daemon *d = arg;
    /* the probes are answered here too, for probes configured before
     * they had their own port */
    if (probe_request(d, req))
        return;
    if (strcmp(req->path, "/metrics") == 0) {
        static const struct httpd_header prom[] = {
            {"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}};
        struct util_buf b = {0};
        util_buf_printf(&b, "# HELP gpuscaler_build_info Build information.\n"
                            "# TYPE gpuscaler_build_info gauge\n"
                            "gpuscaler_build_info{version=\"%s\"} 1\n",
                        GPUSCALER_VERSION);
        if (d->ctl)
            controller_write_metrics(d->ctl, &b);
        if (d->scrape) {
            struct scrape_stats st;
            scrape_stats(d->scrape, &st);
            util_buf_printf(&b,
                            "# HELP gpuscaler_scrapes_total Pod scrapes attempted.\n"
                            "# TYPE gpuscaler_scrapes_total counter\n"
                            "gpuscaler_scrapes_total %llu\n"
                            "# HELP gpuscaler_scrape_failures_total Pod scrapes that failed.\n"
                            "# TYPE gpuscaler_scrape_failures_total counter\n"
                            "gpuscaler_scrape_failures_total %llu\n"
                            "# HELP gpuscaler_scrape_late_total Scrapes started over an interval late.\n"
                            "# TYPE gpuscaler_scrape_late_total counter\n"
                            "gpuscaler_scrape_late_total %llu\n"
                            "# HELP gpuscaler_scrape_pods Pods being scraped.\n"
                            "# TYPE gpuscaler_scrape_pods gauge\n"
                            "gpuscaler_scrape_pods %zu\n",
                            (unsigned long long)(st.scrapes_ok + st.scrapes_failed),
                            (unsigned long long)st.scrapes_failed,
                            (unsigned long long)st.late, st.pods);
        }
        if (d->cache)
            kube_cache_write_metrics(d->cache, &b);
        if (d->kube)
            kube_write_metrics(d->kube, &b);
        write_memory_metrics(d, &b);
        write_http_metrics(d, &b);
        httpd_respond(req, 200, prom, 1, b.data, b.len);
        util_buf_free(&b);
        return;
    }
    httpd_respond(req, 404, text_plain, 1, "not found\n", 10);
}

/* ---- shutdown --------------------------------------------------------------- */

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void kube_closed(void *arg)
{
    struct daemon *d = arg;
    d->kube = NULL;
    httpc_close(d->http, NULL, NULL);
    d->http = NULL;
}

static void promql_closed(void *arg);

static void scrape_closed(void *arg)
{
    struct daemon *d = arg;
    d->scrape = NULL;
    if (d->promql) {
        promql_close(d->promql, promql_closed, d);
        return;
    }
    promql_closed(d);
}

static void promql_closed(void *arg)
{
    struct daemon *d = arg;
    d->promql = NULL;
    if (d->kube) {
        kube_close(d->kube, kube_closed, d);
    } else if (d->http) {
        httpc_close(d->http, NULL, NULL);
        d->http = NULL;
    }
}

static void cache_closed(void *arg)
{
    struct daemon *d = arg;
    d->cache = NULL;
    if (d->scrape)
        scrape_close(d->scrape, scrape_closed, d);
    else
        scrape_closed(d);
}

static void ctl_closed(void *arg)
{
    struct daemon *d = arg;
    d->ctl = NULL;
    LOG_INFO(SUB, "controller stopped");
    if (d->cache)
        kube_cache_close(d->cache, cache_closed, d);
    else
        cache_closed(d);
}

static void begin_shutdown(struct daemon *d, int code)
{
    if (d->stopping)
        return;
    d->stopping = 1;
    d->exit_code = code;
    LOG_INFO(SUB, "shutting down");
    if (d->kube)
        kube_drain(d->kube, SHUTDOWN_RETRY_BUDGET_MS);
    uv_signal_stop(&d->sigterm);
    uv_signal_stop(&d->sigint);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->first_tick, NULL);
    if (d->em)
        extmetrics_glue_close(d->em);
    d->em = NULL;
    if (d->admin)
        httpd_close(d->admin, NULL, NULL);
    d->admin = NULL;
    if (d->health)
        httpd_close(d->health, NULL, NULL);
    d->health = NULL;
    if (d->ctl)
        controller_close(d->ctl, ctl_closed, d);
    else
        ctl_closed(d);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct daemon *d = s->data;
    LOG_INFO(SUB, "received signal %d", signum);
    begin_shutdown(d, 0);
}

static void first_tick(uv_timer_t *t)
{
    struct daemon *d = t->data;
    if (d->ctl && controller_ready(d->ctl)) {
        controller_tick(d->ctl);
        uv_timer_stop(t);
    }
}

/* ---- flags ------------------------------------------------------------------- */

enum {
    OPT_CONFIG = 256, OPT_KUBECONFIG, OPT_CONTEXT, OPT_NAMESPACE, OPT_INTERVAL, OPT_DRY_RUN,
    OPT_RECORD, OPT_LEADER_ELECT, OPT_LEADER_NS, OPT_LEASE_NAME, OPT_ID, OPT_METRICS_ADDR,
    OPT_HEALTH_ADDR,
    OPT_EXT, OPT_EXT_ADDR, OPT_TLS_CERT, OPT_TLS_KEY, OPT_LOG_FORMAT, OPT_LOG_LEVEL, OPT_HELP,
};

static const struct option long_opts[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"namespace", required_argument, NULL, OPT_NAMESPACE},
    {"decision-interval", required_argument, NULL, OPT_INTERVAL},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"record", required_argument, NULL, OPT_RECORD},
    {"leader-elect", optional_argument, NULL, OPT_LEADER_ELECT},
    {"leader-election-namespace", required_argument, NULL, OPT_LEADER_NS},
    {"lease-name", required_argument, NULL, OPT_LEASE_NAME},
    {"id", required_argument, NULL, OPT_ID},
    {"metrics-addr", required_argument, NULL, OPT_METRICS_ADDR},
    {"health-addr", required_argument, NULL, OPT_HEALTH_ADDR},
    {"external-metrics", optional_argument, NULL, OPT_EXT},
    {"external-metrics-addr", required_argument, NULL, OPT_EXT_ADDR},
    {"tls-cert-file", required_argument, NULL, OPT_TLS_CERT},
    {"tls-key-file", required_argument, NULL, OPT_TLS_KEY},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* A flag that sets a config key, checked as the file's key is. Prints
 * "--flag: what is wrong" and returns -EINVAL when the value is bad. */
static int set_key(struct daemon *d, const char *flag, const char *key, const char *v)
{
    char err[300];
    if (ctl_config_set(&d->cfg, key, v, err, sizeof(err)) == 0)
        return 0;
    size_t kl = strlen(key);
    const char *msg = strncmp(err, key, kl) == 0 && err[kl] == ':' ? err + kl + 2 : err;
    fprintf(stderr, "gpuscaler run: --%s: %s\n", flag, msg);
    return -EINVAL;
}

/* An error about the config file: "FILE:LINE: msg", or msg alone when it
 * names the file already (cannot open it) or is not about a line. */
static void config_error(const char *config, const struct conf_error *err)
{
    if (err->line > 0)
        fprintf(stderr, "gpuscaler run: %s:%d: %s\n", config, err->line, err->msg);
    else if (strncmp(err->msg, config, strlen(config)) == 0)
        fprintf(stderr, "gpuscaler run: %s\n", err->msg);
    else
        fprintf(stderr, "gpuscaler run: %s: %s\n", config, err->msg);
}

/* getopt_long takes any unambiguous prefix of a long flag ("--nam BAD" set
 * --namespace); simulate and plan take a flag only as it is spelled. Such a
 * prefix is refused here, before getopt reads it; the value after a flag
 * that needs one is skipped, as getopt takes it. Returns 0, or -EINVAL
 * (printed). */
static int check_spelling(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strncmp(a, "--", 2) != 0)
            continue; /* -h, or an operand (refused later) */
        size_t n = strcspn(a + 2, "=");
        const struct option *exact = NULL, *prefix = NULL;
        int nprefix = 0;
        for (const struct option *o = long_opts; o->name && !exact; o++) {
            if (strncmp(o->name, a + 2, n) != 0)
                continue;
            if (o->name[n] == '\0')
                exact = o;
            else if (nprefix++ == 0)
                prefix = o;
        }
        if (!exact && nprefix == 1) {
            fprintf(stderr,
                    "gpuscaler run: unknown flag '--%.*s': flags are spelled in full (--%s?)\n",
                    (int)n, a + 2, prefix->name);
            return -EINVAL;
        }
        if (!exact)
            return 0; /* unknown or ambiguous: getopt says so, with the usage */
        if (exact->has_arg == required_argument && a[2 + n] == '\0')
            i++; /* its value, whatever it looks like */
    }
    return 0;
}

/* Two passes: the config file first, then every other flag over it. */
static int parse_flags(struct daemon *d, int argc, char **argv)
{
    const char *config = NULL;
    if (check_spelling(argc, argv) != 0)
        return -EINVAL;
    optind = 1;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        if (o == OPT_CONFIG)
            config = optarg;
        if (o == OPT_HELP || o == 'h') {
            usage(stdout);
            return 1;
        }
        if (o == '?') {
            fprintf(stderr, "gpuscaler run: unknown or incomplete flag '%s'\n\n", argv[optind - 1]);
            usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpuscaler run: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    struct conf_node *root = NULL;
    struct conf_error err;
    if (config) {
        int rc = conf_load_file(config, &root, &err);
        if (rc == 0)
            rc = ctl_config_apply_keys(&d->cfg, root, &err); /* checked with the flags */
        if (rc != 0) {
            config_error(config, &err);
            conf_free(root);
            return -EINVAL;
        }
    }
    int rc = 0;
    bool ns_from_flags = false, file_flags = false;
    optind = 1;
    while (rc == 0 && (o = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        const char *v = optarg;
        bool b;
        switch (o) {
        case OPT_KUBECONFIG: set_str(&d->kubeconfig, v); break;
        case OPT_CONTEXT: set_str(&d->context, v); break;
        case OPT_NAMESPACE:
            if (!ns_from_flags) {
                for (size_t i = 0; i < d->cfg.n_namespaces; i++)
                    xfree(d->cfg.namespaces[i]);
                d->cfg.n_namespaces = 0;
                ns_from_flags = true;
            }
            if (d->cfg.n_namespaces == CTL_MAX_NAMESPACES) {
                fprintf(stderr, "gpuscaler run: --namespace: at most %d\n", CTL_MAX_NAMESPACES);
                rc = -EINVAL;
            } else if (!ctl_config_namespace_valid(v)) {
                fprintf(stderr,
                        "gpuscaler run: --namespace: '%s' is not a valid namespace name (a "
                        "DNS-1123 label)\n",
                        v);
                rc = -EINVAL;
            } else {
                d->cfg.namespaces[d->cfg.n_namespaces++] = xstrdup(v);
            }
            break;
        case OPT_INTERVAL: rc = set_key(d, "decision-interval", "decision-interval", v); break;
        case OPT_DRY_RUN: d->opts.dry_run = true; break;
        case OPT_RECORD: d->opts.record_dir = v; break;
        case OPT_LEADER_ELECT:
        case OPT_EXT:
            b = true;
            if (v && util_parse_bool(v, &b) != 0) {
                fprintf(stderr, "gpuscaler run: --%s: '%s' is not true or false\n",
                        o == OPT_EXT ? "external-metrics" : "leader-elect", v);
                rc = -EINVAL;
            } else if (o == OPT_EXT) {
                d->cfg.extmetrics.enabled = b;
            } else {
                d->cfg.leader.enabled = b;
            }
            break;
        case OPT_LEADER_NS:
            rc = set_key(d, "leader-election-namespace", "leader-election.namespace", v);
            break;
        case OPT_LEASE_NAME: rc = set_key(d, "lease-name", "leader-election.lease-name", v); break;
        case OPT_ID:
            if (!*v) { /* a Lease held by "" reads as free, and every "" as its holder */
                fprintf(stderr, "gpuscaler run: --id: empty (leave it out for $POD_NAME or the "
                                "host name)\n");
                rc = -EINVAL;
            }
            d->opts.identity = v;
            break;
        case OPT_METRICS_ADDR: rc = set_key(d, "metrics-addr", "listen.metrics", v); break;
        case OPT_HEALTH_ADDR: rc = set_key(d, "health-addr", "listen.health", v); break;
        case OPT_EXT_ADDR:
            rc = set_key(d, "external-metrics-addr", "listen.external-metrics", v);
            break;
        case OPT_TLS_CERT:
            rc = set_key(d, "tls-cert-file", "external-metrics.tls-cert-file", v);
            file_flags = true;
            break;
        case OPT_TLS_KEY:
            rc = set_key(d, "tls-key-file", "external-metrics.tls-key-file", v);
            file_flags = true;
            break;
        case OPT_LOG_FORMAT: rc = set_key(d, "log-format", "log.format", v); break;
        case OPT_LOG_LEVEL: rc = set_key(d, "log-level", "log.level", v); break;
        default: break;
        }
    }
    if (rc == 0 && !d->cfg.leader.namespace_[0]) { /* "": the default, as in the file */
        const char *ns = getenv("POD_NAMESPACE");
        set_str(&d->cfg.leader.namespace_, ns && *ns ? ns : "default");
    }
    /* checks across keys and of the files named, on the file and flags together */
    char msg[300];
    const char *key = NULL;
    if (rc == 0 && ctl_config_validate(&d->cfg, &key, msg, sizeof(msg)) != 0) {
        int line = ctl_config_line(root, key);
        if (line > 0)
            fprintf(stderr, "gpuscaler run: %s:%d: %s\n", config, line, msg);
        else
            fprintf(stderr, "gpuscaler run: %s\n", msg);
        rc = -EINVAL;
    }
    /* a recorded row is stamped in whole seconds, one per decision interval:
     * 2.5 s rows fell off their grid, 1.5 s ones read as 1 s buckets */
    if (rc == 0 && d->opts.record_dir && d->cfg.decision_interval_ms % 1000 != 0) {
        fprintf(stderr, "gpuscaler run: --record: decision-interval must be a whole number of "
                        "seconds (the trace's bucket width)\n");
        rc = -EINVAL;
    }
    /* the recordings' directory, checked now rather than at each workload's first row */
    struct stat rst;
    if (rc == 0 && d->opts.record_dir &&
        (stat(d->opts.record_dir, &rst) != 0 || !S_ISDIR(rst.st_mode) ||
         access(d->opts.record_dir, W_OK | X_OK) != 0)) {
        fprintf(stderr, "gpuscaler run: --record: %s is not a directory gpuscaler can write "
                        "to\n", d->opts.record_dir);
        rc = -EINVAL;
    }
    if (rc == 0 && ctl_config_check_files(&d->cfg, file_flags ? NULL : root, &err) != 0) {
        if (err.line > 0)
            config_error(config, &err);
        else
            fprintf(stderr, "gpuscaler run: %s\n", err.msg);
        rc = -EINVAL;
    }
    conf_free(root);
    if (rc != 0)
        return rc;
    enum util_log_format lf;
    enum util_log_level ll;
    util_log_format_parse(d->cfg.log_format, &lf); /* checked by ctl_config_set/apply */
    util_log_level_parse(d->cfg.log_level, &ll);
    util_log_setup(lf, ll);
    d->opts.leader_elect = d->cfg.leader.enabled;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    struct daemon d;
    memset(&d, 0, sizeof(d));
    ctl_config_init(&d.cfg);
    char host[256];
    int rc = parse_flags(&d, argc, argv);
    if (rc != 0) {
        xfree(d.kubeconfig);
        xfree(d.context);
        ctl_config_free(&d.cfg);
        return rc > 0 ? 0 : 2;
    }
    char idbuf[256];
    if (!d.opts.identity) {
        const char *pn = getenv("POD_NAME");
        if (pn && *pn)
            snprintf(idbuf, sizeof(idbuf), "%s", pn);
        else if (gethostname(idbuf, sizeof(idbuf)) != 0)
            snprintf(idbuf, sizeof(idbuf), "gpuscaler");
        idbuf[sizeof(idbuf) - 1] = '\0';
        d.opts.identity = idbuf;
    }
    /* a Lease's holderIdentity is compared whole, and kept in 127 bytes */
    if (d.opts.leader_elect && strlen(d.opts.identity) > 127) {
        fprintf(stderr, "gpuscaler run: the identity \"%.40s...\" is %zu bytes, over 127 "
                        "for leader election: set a shorter one with --id\n", d.opts.identity,
                strlen(d.opts.identity));
        ctl_config_free(&d.cfg);
        return 2;
    }

    struct kube_config kc;
    struct kube_config_error kerr;
    memset(&kc, 0, sizeof(kc));
    if (kube_config_resolve(d.kubeconfig, d.context, &kc, &kerr) != 0) {
        /* the message names the file and line already ("FILE:LINE: ...") */
        fprintf(stderr, "gpuscaler run: Kubernetes configuration: %s\n", kerr.msg);
        rc = 2;
        goto out_cfg;
    }
    uv_loop_init(&d.loop);
    signal(SIGPIPE, SIG_IGN);
    uv_signal_init(&d.loop, &d.sigterm);
    uv_signal_init(&d.loop, &d.sigint);
    d.sigterm.data = d.sigint.data = &d;
    uv_timer_init(&d.loop, &d.first_tick);
    d.first_tick.data = &d;
    LOG_INFO(SUB, "gpuscaler %s starting: server %s, identity %s, leader election %s%s", GPUSCALER_VERSION,
             kc.server, d.opts.identity, d.opts.leader_elect ? "on" : "off",
             d.opts.dry_run ? ", dry run" : "");
    if (kc.plain_unused)
        LOG_WARN(SUB, "API server %s is plain http: the kubeconfig's credentials and TLS "
                 "settings are not used, as kubectl does not use them; use an https:// server",
                 kc.server);

    if ((rc = httpc_new(&d.loop, &d.http)) == 0)
        /* two watches per namespace (or two for all) stay open; room for requests */
        httpc_set_max_host_connections(d.http, (long)(2 * (d.cfg.n_namespaces ? d.cfg.n_namespaces
                                                                               : 1) + 14));
    if (rc != 0 ||
        (rc = kube_new(&d.loop, d.http, &kc, NULL, &d.kube)) != 0) {
        LOG_ERROR(SUB, "cannot create the API client: %s", strerror(-rc));
        rc = 1;
        goto out_loop;
    }
    const char *nss[CTL_MAX_NAMESPACES + 1];
    for (size_t i = 0; i < d.cfg.n_namespaces; i++)
        nss[i] = d.cfg.namespaces[i];
    nss[d.cfg.n_namespaces] = NULL;
    struct kube_cache_opts co;
    memset(&co, 0, sizeof(co));
    co.namespaces = d.cfg.n_namespaces ? nss : NULL;
    if ((rc = kube_cache_new(d.kube, &co, NULL, NULL, &d.cache)) != 0) {
        LOG_ERROR(SUB, "cannot start the caches: %s", strerror(-rc));
        rc = 1;
        goto out_loop;
    }
    struct scrape_config sc;
    scrape_config_init(&sc);
    sc.interval_ms = d.cfg.scrape.interval_ms;
    sc.timeout_ms = d.cfg.scrape.timeout_ms;
    sc.rate_window_ms = d.cfg.scrape.rate_window_ms;
    if ((rc = scrape_new(&d.loop, d.http, &sc, &d.scrape)) != 0) {
        LOG_ERROR(SUB, "cannot start the scraper: %s", strerror(-rc));
        rc = 1;
        goto out_loop;
    }
    if (d.cfg.prometheus.url && d.cfg.prometheus.url[0]) {
        struct promql_config pc;
        struct promql_header ph[CTL_MAX_HEADERS];
        ctl_config_promql(&d.cfg, &pc, ph);
        if ((rc = promql_new(&d.loop, d.http, &pc, &d.promql)) != 0) {
            LOG_ERROR(SUB, "prometheus.url '%s': %s", pc.url, strerror(-rc));
            rc = 2;
            goto out_loop;
        }
        d.opts.promql = d.promql;
        LOG_INFO(SUB, "Prometheus source: %s auth=%s headers=%zu", pc.url,
                 pc.token_file && *pc.token_file ? "bearer"
                 : pc.username && *pc.username   ? "basic"
                                                 : "none",
                 pc.n_headers);
    }
    if ((rc = controller_new(&d.loop, d.kube, d.cache, d.scrape, &d.cfg, &d.opts, &d.ctl)) != 0) {
        LOG_ERROR(SUB, "cannot start the controller: %s", strerror(-rc));
        rc = 1;
        goto out_loop;
    }
    struct httpd_config hc;
    memset(&hc, 0, sizeof(hc));
    if (ctl_listen_addr_split(d.cfg.listen.metrics, host, sizeof(host), &hc.port) != 0) {
        LOG_ERROR(SUB, "listen.metrics '%s' is not HOST:PORT", d.cfg.listen.metrics);
        rc = 2;
        goto out_loop;
    }
    hc.host = host;
    hc.name = "metrics";
    hc.max_body_bytes = GET_ONLY_BODY_BYTES;
    if ((rc = httpd_new(&d.loop, &hc, admin_request, &d, &d.admin)) != 0) {
        LOG_ERROR(SUB, "cannot listen on %s: %s", d.cfg.listen.metrics, strerror(-rc));
        rc = 1;
        goto out_loop;
    }
    LOG_INFO(SUB, "serving /metrics on %s:%d", host, httpd_port(d.admin));
    memset(&hc, 0, sizeof(hc));
    if (ctl_listen_addr_split(d.cfg.listen.health, host, sizeof(host), &hc.port) != 0) {
        LOG_ERROR(SUB, "listen.health '%s' is not HOST:PORT", d.cfg.listen.health);
        rc = 2;
        goto out_loop;
    }
    hc.host = host;
    hc.name = "health";
    hc.max_body_bytes = GET_ONLY_BODY_BYTES;
    hc.max_connections = 64; /* the kubelet sends a few probes a minute */
    hc.max_connections_per_source = 16;
    if ((rc = httpd_new(&d.loop, &hc, health_request, &d, &d.health)) != 0) {
        LOG_ERROR(SUB, "cannot listen on %s: %s", d.cfg.listen.health, strerror(-rc));
        rc = 1;
        goto out_loop;
    }
    LOG_INFO(SUB, "serving /healthz /livez /readyz on %s:%d", host, httpd_port(d.health));
    if (d.cfg.extmetrics.enabled &&
        (rc = extmetrics_glue_new(&d.loop, d.kube, d.cache, d.ctl, &d.cfg, &d.em)) != 0) {
        rc = 1;
        goto out_loop;
    }
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    uv_signal_start(&d.sigint, on_signal, SIGINT);
    /* decide as soon as the caches sync instead of waiting a whole interval */
    uv_timer_start(&d.first_tick, first_tick, 500, 500);

    uv_run(&d.loop, UV_RUN_DEFAULT);
    rc = d.exit_code;
out_loop:
    if (!d.stopping) {
        /* startup failed part way: tear down what exists */
        begin_shutdown(&d, rc);
        uv_run(&d.loop, UV_RUN_DEFAULT);
    }
    uv_walk(&d.loop, close_walk, NULL);
    uv_run(&d.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&d.loop) != 0)
        LOG_WARN(SUB, "loop did not close cleanly");
    LOG_INFO(SUB, "stopped");
out_cfg:
    kube_config_clear(&kc);
    xfree(d.kubeconfig);
    xfree(d.context);
    ctl_config_free(&d.cfg);
    return rc;
}

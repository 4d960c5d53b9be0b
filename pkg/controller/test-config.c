/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the controller's pure configuration layer: the daemon config
 * file, annotation validation and the status annotation. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "controller/controller.h"
#include "util/util.h"

static int apply_yaml(struct ctl_config *c, const char *yaml, struct conf_error *err)
{
    struct conf_node *root = NULL;
    int rc = conf_parse(yaml, strlen(yaml), &root, err);
    if (rc == 0)
        rc = ctl_config_apply(c, root, err);
    conf_free(root);
    return rc;
}

static void test_config_file(void **s)
{
    (void)s;
    struct ctl_config c;
    struct conf_error err;
    ctl_config_init(&c);
    assert_string_equal(c.listen.health, "0.0.0.0:8081"); /* probes: their own port */
    const char *yaml = "decision-interval: 10s\n"
                       "namespaces: [ml, serving]\n"
                       "log: {format: json, level: debug}\n"
                       "leader-election:\n"
                       "  enabled: false\n"
                       "  lease-name: gs\n"
                       "listen: {metrics: '127.0.0.1:9091', health: '127.0.0.1:8082'}\n"
                       "external-metrics:\n"
                       "  enabled: true\n"
                       "  upstream: {url: 'https://keda.keda:443', ca-file: /ca.pem}\n"
                       "scrape: {interval: 3s, missing-fraction: 0.5}\n"
                       "defaults:\n"
                       "  target-utilization: '0.7'\n"
                       "  metrics-profile: tgi\n";
    assert_int_equal(apply_yaml(&c, yaml, &err), 0);
    assert_int_equal(c.decision_interval_ms, 10000);
    assert_int_equal(c.n_namespaces, 2);
    assert_string_equal(c.namespaces[1], "serving");
    assert_string_equal(c.log_format, "json");
    assert_false(c.leader.enabled);
    assert_string_equal(c.leader.lease_name, "gs");
    assert_int_equal(c.leader.lease_duration_ms, 15000);
    assert_string_equal(c.listen.metrics, "127.0.0.1:9091");
    assert_string_equal(c.listen.health, "127.0.0.1:8082");
    assert_true(c.extmetrics.enabled);
    assert_string_equal(c.extmetrics.upstream_url, "https://keda.keda:443");
    assert_int_equal(c.scrape.interval_ms, 3000);
    assert_true(c.scrape.missing_fraction == 0.5);
    assert_int_equal(c.n_defaults, 2);
    assert_false(c.sharding.enabled); /* default: one leader */
    assert_int_equal(c.sharding.shards, 16);
    assert_string_equal(c.sharding.lease_prefix, "gpuscaler-shard");
    ctl_config_free(&c);
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c, "sharding: {enabled: true, shards: 64, lease-prefix: gs}\n",
                                &err),
                     0);
    assert_true(c.sharding.enabled);
    assert_int_equal(c.sharding.shards, 64);
    assert_string_equal(c.sharding.lease_prefix, "gs");
    ctl_config_free(&c);

    static const struct {
        const char *yaml, *msg;
        int line;
    } bad[] = {
        {"decision-interval: 15s\nbogus: 1\n", "unknown key 'bogus'", 2},
        {"log:\n  format: xml\n", "log.format", 0},
        {"leader-election:\n  lease-nam: x\n", "unknown key 'leader-election.lease-nam'", 2},
        {"scrape: {interval: soon}\n", "scrape.interval", 1},
        {"namespaces: ml\n", "expected a list", 1},
        {"listen: [a]\n", "listen: expected a map", 1},
        {"defaults:\n  target-utilization: '2'\n", "target-utilization", 0},
        {"defaults:\n  nonsense: '2'\n", "unknown annotation", 0},
        {"defaults:\n  max-replicas: '4'\n  enabled: 'true'\n", "defaults.enabled: not a default", 3},
        {"defaults: {status: '{}'}\n", "defaults.status: not a default", 1},
        {"scrape: {interval: 2m}\n", "scrape.interval: 2m plus scrape.timeout 2s is not below "
                                    "metrics-stale-after 1m", 0},
        {"scrape: {interval: 5s}\ndefaults: {metrics-stale-after: 6s}\n",
         "is not below metrics-stale-after 6s", 0},
        {"leader-election: {renew-deadline: 20s}\n", "retry-period < renew-deadline", 1},
        {"- a\n- b\n", "must be a map", 1},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        ctl_config_init(&c);
        int rc = apply_yaml(&c, bad[i].yaml, &err);
        if (rc != -EINVAL || !strstr(err.msg, bad[i].msg))
            fail_msg("case %zu: rc %d msg '%s'", i, rc, err.msg);
        if (bad[i].line)
            assert_int_equal(err.line, bad[i].line);
        ctl_config_free(&c);
    }
    for (size_t i = 0; i < ctl_config_key_count(); i++)
        assert_non_null(ctl_config_key_name(i));
}

/* Every key of the config file, audited: a value of the right type that is
 * still wrong must fail at load time, naming the key, on the key's line
 * (before, `listen.metrics: notanaddr` failed only after "starting",
 * `prometheus.url: ftp://x` said "Invalid argument" without a line and
 * `checkpoint.configmap: Bad_Name` was accepted). Paths are syntactically
 * free; whether they can be read is ctl_config_check_files()'s test. */
static void test_config_bad_value_of_every_key(void **s)
{
    (void)s;
    static const struct {
        const char *key, *yaml, *msg;
        int line;
    } bad[] = {
        {"decision-interval", "log: {level: info}\ndecision-interval: 500ms\n",
         "decision-interval: 500ms is out of range (1s to 1h)", 2},
        {"decision-interval", "decision-interval: 100000h\n", "is out of range (1s to 1h)", 1},
        {"namespaces", "namespaces:\n  - ml\n  - Not_OK\n", "'Not_OK' is not a valid namespace",
         3},
        {"namespaces", "namespaces: [a.b]\n", "'a.b' is not a valid namespace", 1},
        {"log.format", "log:\n  level: info\n  format: xml\n",
         "log.format: 'xml' is not one of json, logfmt", 3},
        {"log.level", "log:\n  level: verbose\n",
         "log.level: 'verbose' is not one of debug, info, warn, error", 2},
        {"leader-election.enabled", "leader-election:\n  enabled: maybe\n", "not true or false",
         2},
        {"leader-election.namespace", "leader-election:\n  namespace: Kube_System\n",
         "not a valid namespace name", 2},
        {"leader-election.lease-name", "leader-election:\n  lease-name: my_lease\n",
         "not a valid Kubernetes name", 2},
        {"leader-election.lease-duration", "leader-election:\n  lease-duration: 500ms\n",
         "out of range (1s to 1h)", 2},
        {"leader-election.renew-deadline", "leader-election:\n  renew-deadline: 2h\n",
         "out of range (100ms to 1h)", 2},
        {"leader-election.retry-period", "leader-election:\n  retry-period: 0s\n",
         "out of range (100ms to 1h)", 2},
        {"sharding.enabled", "sharding:\n  enabled: yes please\n", "not true or false", 2},
        {"sharding.shards", "sharding:\n  enabled: true\n  shards: 0\n",
         "sharding.shards: '0' is not a whole number from 1 to 1024", 3},
        {"sharding.shards", "sharding: {shards: 4k}\n", "not a whole number from 1 to 1024", 1},
        {"sharding.shards", "sharding: {shards: 1025}\n", "from 1 to 1024", 1},
        {"sharding.lease-prefix", "sharding:\n  lease-prefix: Shard_\n",
         "sharding.lease-prefix: 'Shard_' is not a valid Kubernetes name", 2},
        {"sharding.enabled",
         "leader-election: {enabled: false}\nsharding:\n  enabled: true\n",
         "sharding.enabled: needs leader-election.enabled", 3},
        {"leader-election.lease-name",
         "leader-election: {lease-name: shard-3}\nsharding: {enabled: true, lease-prefix: shard}\n",
         "'shard-3' is a name of the shard Leases", 1},
        {"leader-election.lease-name",
         "leader-election: {lease-name: s-member-x}\nsharding: {enabled: true, lease-prefix: s}\n",
         "'s-member-x' is a name of the shard Leases", 1},
        {"scrape.rate-window", "scrape:\n  interval: 1s\n  rate-window: 5m\n",
         "scrape.rate-window: 5m is more than 254 scrape.intervals (1s)", 3},
        {"listen.health", "listen:\n  metrics: 127.0.0.1:9000\n  health: 0.0.0.0:9000\n",
         "listen.health: 0.0.0.0:9000 overlaps listen.metrics 127.0.0.1:9000", 3},
        {"listen.external-metrics",
         "external-metrics: {enabled: true}\nlisten: {external-metrics: ':8081'}\n",
         "listen.external-metrics: :8081 overlaps listen.health", 2},
        {"listen.health", "listen: {metrics: '[::]:9000', health: '0.0.0.0:9000'}\n",
         "listen.health: 0.0.0.0:9000 overlaps listen.metrics [::]:9000", 1},
        {"leader-election.enabled",
         "leader-election.enabled: false\nleader-election: {enabled: true}\n",
         "'leader-election.enabled': write the key nested, not dotted", 1},
        {"listen.metrics", "listen:\n  metrics: notanaddr\n",
         "listen.metrics: 'notanaddr' is not HOST:PORT", 2},
        {"listen.metrics", "listen: {metrics: 'localhost:9090'}\n", "IP address as host", 1},
        {"listen.health", "listen: {health: '0.0.0.0:8081x'}\n",
         "listen.health: '0.0.0.0:8081x' is not HOST:PORT", 1},
        {"listen.external-metrics", "listen:\n  external-metrics: 0.0.0.0:65536\n",
         "is not HOST:PORT", 2},
        {"external-metrics.enabled", "external-metrics: {enabled: 2}\n", "not true or false", 1},
        {"external-metrics.upstream.url",
         "external-metrics:\n  upstream:\n    url: keda.keda:443\n",
         "is not an http:// or https:// URL", 3},
        {"prometheus.url", "prometheus:\n  url: ftp://x\n",
         "prometheus.url: 'ftp://x' is not an http:// or https:// URL", 2},
        {"prometheus.url", "prometheus: {url: 'http://'}\n", "URL with a host", 1},
        {"prometheus.url", "prometheus: {url: 'http://p:0'}\n", "URL with a host", 1},
        {"prometheus.url", "prometheus: {url: 'http://p q:9090'}\n", "URL with a host", 1},
        {"prometheus.headers",
         "prometheus:\n  url: http://p:9090\n  headers:\n    Authorization: Bearer x\n",
         "prometheus.headers: header Authorization is set by gpuscaler itself (use "
         "prometheus.token-file",
         4},
        {"prometheus.headers", "prometheus:\n  headers: [X-Scope-OrgID]\n",
         "prometheus.headers: expected a map of header names to values", 2},
        {"prometheus.headers", "prometheus:\n  headers:\n    X-A: {b: c}\n",
         "prometheus.headers.X-A: expected a single value", 3},
        {"prometheus.headers", "prometheus:\n  headers:\n    'X A': b\n",
         "prometheus.headers: header name 'X A' is not an HTTP token", 3},
        {"prometheus.username", "prometheus:\n  url: http://p:9090\n  username: gpu\n",
         "prometheus.username: set without password-file (give both, or neither)", 3},
        {"prometheus.username",
         "prometheus:\n  username: a:b\n  password-file: /p\n",
         "prometheus.username: 'a:b' has a ':'", 2},
        {"prometheus.token-file",
         "prometheus:\n  token-file: /t\n  username: u\n  password-file: /p\n",
         "prometheus.token-file and username/password-file exclude each other", 2},
        {"prometheus.cert-file", "prometheus:\n  key-file: /k\n",
         "prometheus.key-file: set without cert-file", 2},
        {"scrape.interval", "scrape:\n  interval: soon\n", "is not a duration", 2},
        {"scrape.timeout", "scrape:\n  timeout: 2d\n", "out of range (100ms to 1h)", 2},
        {"scrape.missing-fraction", "scrape:\n  missing-fraction: 1.5\n",
         "not a fraction between 0 and 1", 2},
        {"scrape.rate-window", "scrape:\n  rate-window: 10ms\n", "out of range (1s to 24h)", 2},
        {"checkpoint.configmap", "checkpoint:\n  configmap: Bad_Name\n",
         "checkpoint.configmap: 'Bad_Name' is not a valid Kubernetes name", 2},
        {"checkpoint.configmap", "checkpoint: {configmap: 'a..b'}\n", "not a valid Kubernetes", 1},
        {"checkpoint.configmap", "checkpoint: {configmap: '-state'}\n", "not a valid", 1},
        {"status.refresh-interval", "status:\n  refresh-interval: 500ms\n",
         "status.refresh-interval: 500ms is out of range (1s to 1h)", 2},
        {"status.writes-per-second", "status: {writes-per-second: 0}\n",
         "status.writes-per-second: '0' is not a whole number from 1 to 10000", 1},
        {"checkpoint.configmaps", "checkpoint:\n  configmaps: 0\n",
         "checkpoint.configmaps: '0' is not a whole number from 1 to 1000", 2},
        {"checkpoint.configmaps", "checkpoint: {configmaps: 1001}\n", "from 1 to 1000", 1},
        {"checkpoint.configmaps", "checkpoint: {configmaps: 8.5}\n", "not a whole number", 1},
        {"checkpoint.configmaps", "checkpoint: {configmaps: 16x}\n", "not a whole number", 1},
        {"defaults", "defaults:\n  target-utilization: '0.5'\n  max-replicas: lots\n",
         "defaults: max-replicas: 'lots' is not a whole number", 3},
        /* checks across keys run without capacity-per-gpu too (a Deployment's own
         * annotation gives that): they were skipped, and every Deployment held */
        {"defaults", "defaults:\n  min-replicas: '5'\n  max-replicas: '2'\n",
         "defaults: min-replicas: 5 is above max-replicas 2", 2},
        {"defaults", "defaults:\n  target-utilization: '0.4'\n",
         "scale-in-utilization: 0.5 must be below target-utilization 0.4", 2},
    };
    struct ctl_config c;
    struct conf_error err;
    bool covered[64] = {false};
    assert_true(ctl_config_key_count() <= UTIL_ARRAY_LEN(covered));
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        ctl_config_init(&c);
        int rc = apply_yaml(&c, bad[i].yaml, &err);
        if (rc != -EINVAL || !strstr(err.msg, bad[i].msg) || err.line != bad[i].line)
            fail_msg("%s: rc %d line %d msg '%s'; want line %d msg~'%s'", bad[i].key, rc,
                     err.line, err.msg, bad[i].line, bad[i].msg);
        ctl_config_free(&c);
        for (size_t k = 0; k < ctl_config_key_count(); k++)
            if (strcmp(ctl_config_key_name(k), bad[i].key) == 0)
                covered[k] = true;
    }
    for (size_t k = 0; k < ctl_config_key_count(); k++) {
        const char *name = ctl_config_key_name(k);
        size_t n = strlen(name);
        bool path = n > 5 && strcmp(name + n - 5, "-file") == 0;
        if (!covered[k] && !path)
            fail_msg("config key %s has no bad-value case", name);
    }
    /* a checkpoint prefix that leaves room for "-<number>" in 253 */
    char yaml[400];
    char name[202];
    memset(name, 'a', sizeof(name) - 1);
    name[200] = '\0';
    snprintf(yaml, sizeof(yaml), "checkpoint: {configmap: %s}\n", name);
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c, yaml, &err), 0);
    ctl_config_free(&c);
    name[200] = 'a';
    name[201] = '\0';
    snprintf(yaml, sizeof(yaml), "checkpoint: {configmap: %s}\n", name);
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c, yaml, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "at most 200 characters"));
    ctl_config_free(&c);

    /* values that look odd but are valid */
    ctl_config_init(&c);
    int rc = apply_yaml(&c,
                        "listen: {metrics: ':9090', external-metrics: '[::1]:6443'}\n"
                        "prometheus: {url: 'https://prom.monitoring.svc:9091/sub/path', "
                        "headers: {X-Scope-OrgID: team-a|team-b, X-Empty: ''}, "
                        "username: gpu, password-file: /p}\n"
                        "external-metrics: {upstream: {url: 'https://[fd00::1]:443'}}\n"
                        "leader-election: {namespace: '', lease-name: a.b-c, "
                        "retry-period: 500ms, renew-deadline: 3s, lease-duration: 4s}\n"
                        "checkpoint: {configmap: gpuscaler-state.v2, configmaps: 1}\n"
                        "namespaces: [ml-1, a]\n",
                        &err);
    if (rc != 0)
        fail_msg("line %d: %s", err.line, err.msg);
    assert_int_equal(c.checkpoint_configmaps, 1);
    assert_int_equal(c.prometheus.n_headers, 2);
    assert_string_equal(c.prometheus.headers[0].key, "X-Scope-OrgID");
    assert_string_equal(c.prometheus.headers[0].value, "team-a|team-b");
    assert_string_equal(c.prometheus.headers[1].value, "");
    assert_string_equal(c.prometheus.username, "gpu");
    ctl_config_free(&c);

    /* across keys: the key to blame is named, on its line */
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c,
                                "log: {level: info}\nleader-election:\n  retry-period: 1s\n"
                                "  renew-deadline: 20s\n",
                                &err),
                     -EINVAL);
    assert_int_equal(err.line, 4);
    assert_non_null(strstr(err.msg, "retry-period < renew-deadline < lease-duration (have 1s, "
                                    "20s, 15s)"));
    ctl_config_free(&c);
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c,
                                "external-metrics:\n  enabled: true\n  tls-key-file: /k.pem\n",
                                &err),
                     -EINVAL);
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.msg, "tls-key-file: set without external-metrics.tls-cert-file"));
    ctl_config_free(&c);
}

/* Flags go through the same checks, and the errors name the key. */
static void test_config_set_from_flags(void **s)
{
    (void)s;
    struct ctl_config c;
    char err[300];
    ctl_config_init(&c);
    assert_int_equal(ctl_config_set(&c, "listen.metrics", "127.0.0.1:0", err, sizeof(err)), 0);
    assert_string_equal(c.listen.metrics, "127.0.0.1:0");
    assert_int_equal(ctl_config_set(&c, "log.level", "debug", err, sizeof(err)), 0);
    assert_string_equal(c.log_level, "debug");
    assert_int_equal(ctl_config_set(&c, "decision-interval", "30s", err, sizeof(err)), 0);
    assert_int_equal(c.decision_interval_ms, 30000);
    assert_int_equal(ctl_config_set(&c, "log.level", "verbose", err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "log.level: 'verbose' is not one of debug, info, warn, error");
    assert_string_equal(c.log_level, "debug"); /* a failed set changes nothing */
    assert_int_equal(ctl_config_set(&c, "listen.metrics", "notanaddr", err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(c.listen.metrics, "127.0.0.1:0");
    assert_int_equal(ctl_config_set(&c, "decision-interval", "100000h", err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "out of range"));
    assert_int_equal(ctl_config_set(&c, "nope", "1", err, sizeof(err)), -ENOENT);
    assert_int_equal(ctl_config_set(&c, "namespaces", "a", err, sizeof(err)), -ENOENT);
    const char *key = "x";
    assert_int_equal(ctl_config_validate(&c, &key, err, sizeof(err)), 0);
    assert_null(key);
    assert_int_equal(ctl_config_set(&c, "leader-election.retry-period", "15s", err, sizeof(err)),
                     0);
    assert_int_equal(ctl_config_validate(&c, &key, err, sizeof(err)), -EINVAL);
    assert_string_equal(key, "leader-election.renew-deadline");
    assert_true(ctl_config_namespace_valid("kube-system"));
    assert_false(ctl_config_namespace_valid("kube.system"));
    assert_false(ctl_config_namespace_valid(""));
    ctl_config_free(&c);
}

/* Files the enabled features read must be readable at load time; files of
 * features that are off are not looked at. */
static void test_config_check_files(void **s)
{
    (void)s;
    char path[] = "/tmp/test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char yaml[600];
    struct ctl_config c;
    struct conf_error err;
    struct conf_node *root = NULL;
    snprintf(yaml, sizeof(yaml),
             "prometheus:\n  url: http://prom:9090\n  ca-file: %s\n"
             "  token-file: /nonexistent/token\n"
             "external-metrics:\n  tls-cert-file: /nonexistent/tls.crt\n"
             "  tls-key-file: /nonexistent/tls.key\n",
             path);
    ctl_config_init(&c);
    assert_int_equal(conf_parse(yaml, strlen(yaml), &root, &err), 0);
    assert_int_equal(ctl_config_apply(&c, root, &err), 0);
    assert_int_equal(ctl_config_check_files(&c, root, &err), -ENOENT);
    assert_int_equal(err.line, 4);
    assert_string_equal(err.msg, "prometheus.token-file: cannot read /nonexistent/token: No such "
                                 "file or directory");
    /* the token fixed: the TLS files do not matter while external-metrics is off */
    assert_int_equal(ctl_config_set(&c, "prometheus.token-file", path, NULL, 0), 0);
    assert_int_equal(ctl_config_check_files(&c, root, &err), 0);
    c.extmetrics.enabled = true;
    assert_int_equal(ctl_config_check_files(&c, root, &err), -ENOENT);
    assert_int_equal(err.line, 6);
    assert_non_null(strstr(err.msg, "external-metrics.tls-cert-file: cannot read"));
    /* from a flag: no line */
    assert_int_equal(ctl_config_check_files(&c, NULL, &err), -ENOENT);
    assert_int_equal(err.line, 0);
    conf_free(root);
    ctl_config_free(&c);
    unlink(path);
}

static int parse_ann(const struct ctl_config *c, const char *const *kv, size_t n,
                     struct ctl_workload_config *w, char *bad, char *err)
{
    const char *keys[32], *vals[32];
    for (size_t i = 0; i < n; i++) {
        keys[i] = kv[2 * i];
        vals[i] = kv[2 * i + 1];
    }
    return ctl_workload_parse(c, keys, vals, n, w, bad, 128, err, 200);
}

static void test_annotations(void **s)
{
    (void)s;
    struct ctl_config c;
    ctl_config_init(&c);
    struct ctl_workload_config w;
    char bad[128], err[200];
    const char *good[] = {
        "gpuscaler.io/enabled", "true",
        "gpuscaler.io/capacity-per-gpu", "12",
        "gpuscaler.io/max-replicas", "16",
        "gpuscaler.io/scale-out-after", "90s",
        "gpuscaler.io/mode", "external-metric",
        "gpuscaler.io/metrics-profile", "tgi",
        "gpuscaler.io/metrics-port", "3000",
        "gpuscaler.io/status", "{\"anything\":1}",
        "kubernetes.io/change-cause", "ignored",
    };
    assert_int_equal(parse_ann(&c, good, 9, &w, bad, err), 0);
    assert_true(w.policy.capacity_rps_per_gpu == 12);
    assert_int_equal(w.policy.max_replicas, 16);
    assert_int_equal(w.policy.scale_out_after_ms, 90000);
    assert_int_equal(w.policy.decision_interval_ms, 15000);
    assert_int_equal(w.mode, CTL_MODE_EXTERNAL_METRIC);
    assert_int_equal(w.scrape.profile, SCRAPE_TGI);
    assert_string_equal(w.scrape.request_metric, "tgi_request_success");
    assert_string_equal(w.scrape.busy_metric, "tgi_request_inference_duration_sum");
    assert_true(w.scrape.missing_fraction == 0.3);
    /* scrape.missing-fraction 0 (hold when any pod cannot be scraped) is the
     * default given, not a value left unset (it read as 0.3) */
    c.scrape.missing_fraction = 0;
    assert_int_equal(parse_ann(&c, good, 9, &w, bad, err), 0);
    assert_true(w.scrape.missing_fraction == 0);
    c.scrape.missing_fraction = 0.3;
    /* a metrics-stale-after the newest scrape outlives at most ticks (5 s
     * interval, 2 s timeout) */
    const char *stale[] = {"gpuscaler.io/capacity-per-gpu", "12",
                           "gpuscaler.io/metrics-stale-after", "7s"};
    assert_int_equal(parse_ann(&c, stale, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/metrics-stale-after");
    assert_non_null(strstr(err, "not above scrape.interval plus scrape.timeout (7s)"));
    stale[3] = "8s";
    assert_int_equal(parse_ann(&c, stale, 2, &w, bad, err), 0);
    assert_int_equal(parse_ann(&c, good, 9, &w, bad, err), 0);
    assert_int_equal(w.scrape.port, 3000);
    assert_string_equal(w.scrape.port_name, "");
    assert_string_equal(w.scrape.path, "/metrics");
    assert_false(w.paused);
    /* paused, as KEDA's paused annotation: a boolean */
    const char *pause[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/paused", "true"};
    assert_int_equal(parse_ann(&c, pause, 2, &w, bad, err), 0);
    assert_true(w.paused);
    pause[3] = "later";
    assert_int_equal(parse_ann(&c, pause, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/paused");
    assert_non_null(strstr(err, "is not true or false"));
    /* a port's name, as Kubernetes allows it (IANA_SVC_NAME) */
    const char *named[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/metrics-port",
                           "prom-9090"};
    assert_int_equal(parse_ann(&c, named, 2, &w, bad, err), 0);
    assert_int_equal(w.scrape.port, 0);
    assert_string_equal(w.scrape.port_name, "prom-9090");
    const char *longest[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/metrics-port",
                             "a23456789012345"};
    assert_int_equal(parse_ann(&c, longest, 2, &w, bad, err), 0);
    assert_string_equal(w.scrape.port_name, "a23456789012345");
    /* a metric with label matchers: stored as written, for the scraper and the templates */
    const char *sel[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/metrics-profile",
                         "triton", "gpuscaler.io/request-metric",
                         "nv_inference_request_success{model=\"ensemble\"}"};
    assert_int_equal(parse_ann(&c, sel, 3, &w, bad, err), 0);
    assert_string_equal(w.scrape.request_metric, "nv_inference_request_success{model=\"ensemble\"}");
    assert_string_equal(w.scrape.queue_metric, "nv_inference_pending_request_count");
    /* a regex matcher too (an RE2 pattern; PromQL's escapes: \\. is a literal dot) */
    const char *re[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/request-metric",
                        "vllm:request_success_total{model_name=~\"meta/llama-3\\\\.1-.*\"}"};
    assert_int_equal(parse_ann(&c, re, 2, &w, bad, err), 0);
    assert_string_equal(w.scrape.request_metric,
                        "vllm:request_success_total{model_name=~\"meta/llama-3\\\\.1-.*\"}");

    static const struct {
        const char *k, *v, *badkey, *msg;
    } cases[] = {
        {"gpuscaler.io/capacity-per-gpu", "lots", "gpuscaler.io/capacity-per-gpu", "not a number"},
        {"gpuscaler.io/metrics-profile", "llamacpp", "gpuscaler.io/metrics-profile",
         "is not vllm, triton, tgi, sglang, nim, tei or generic"},
        {"gpuscaler.io/mode", "both", "gpuscaler.io/mode", "not scale or external-metric"},
        {"gpuscaler.io/metrics-port", "70000", "gpuscaler.io/metrics-port", "port number"},
        {"gpuscaler.io/metrics-port", "0", "gpuscaler.io/metrics-port", "port number"},
        {"gpuscaler.io/metrics-port", "Metrics", "gpuscaler.io/metrics-port", "nor a port name"},
        {"gpuscaler.io/metrics-port", "metrics-http-port", "gpuscaler.io/metrics-port",
         "nor a port name"}, /* 17 characters */
        {"gpuscaler.io/metrics-port", "-metrics", "gpuscaler.io/metrics-port", "nor a port name"},
        {"gpuscaler.io/metrics-port", "metrics-", "gpuscaler.io/metrics-port", "nor a port name"},
        {"gpuscaler.io/metrics-port", "prom--http", "gpuscaler.io/metrics-port", "nor a port name"},
        {"gpuscaler.io/metrics-port", "8000-9000", "gpuscaler.io/metrics-port", "nor a port name"},
        {"gpuscaler.io/metrics-port", "", "gpuscaler.io/metrics-port", "nor a port name"},
        {"gpuscaler.io/metrics-path", "metrics", "gpuscaler.io/metrics-path", "absolute"},
        {"gpuscaler.io/request-metric", "bad name{}", "gpuscaler.io/request-metric", "metric name"},
        {"gpuscaler.io/busy-time-metric", "busy{x=~\"a(?=b)\"}", "gpuscaler.io/busy-time-metric",
         "(?= is not supported when scraping"},
        {"gpuscaler.io/queue-metric", "q{model=ensemble}", "gpuscaler.io/queue-metric",
         "a label value is quoted"},
        {"gpuscaler.io/rejected-metric", "http_requests_total{code=429}",
         "gpuscaler.io/rejected-metric", "a label value is quoted"},
        {"gpuscaler.io/promql-busy", "", "gpuscaler.io/promql-busy", "PromQL expression"},
        {"gpuscaler.io/min-replicas", "50", "gpuscaler.io/min-replicas", "above max-replicas"},
        {"gpuscaler.io/cold-start", "-3m", "gpuscaler.io/cold-start", "not a duration"},
        {"gpuscaler.io/frobnicate", "1", "gpuscaler.io/frobnicate", "unknown annotation"},
        {"gpuscaler.io/enabled", "yes please", "gpuscaler.io/enabled", "not true or false"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        const char *kv[] = {"gpuscaler.io/capacity-per-gpu", "10", cases[i].k, cases[i].v};
        int rc = parse_ann(&c, kv, 2, &w, bad, err);
        if (rc != -EINVAL || strcmp(bad, cases[i].badkey) != 0 || !strstr(err, cases[i].msg))
            fail_msg("case %zu: rc %d bad '%s' err '%s'", i, rc, bad, err);
    }
    /* capacity is required */
    const char *none[] = {"gpuscaler.io/enabled", "true"};
    assert_int_equal(parse_ann(&c, none, 1, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/capacity-per-gpu");
    /* generic needs a request metric */
    const char *gen[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/metrics-profile",
                         "generic"};
    assert_int_equal(parse_ann(&c, gen, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/request-metric");
    const char *gen2[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/metrics-profile",
                          "generic", "gpuscaler.io/request-metric", "http_requests_total"};
    assert_int_equal(parse_ann(&c, gen2, 3, &w, bad, err), 0);
    assert_string_equal(w.scrape.busy_metric, ""); /* generic names none */
    const char *gen3[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/metrics-profile",
                          "generic", "gpuscaler.io/request-metric", "http_requests_total",
                          "gpuscaler.io/busy-time-metric", "request_service_seconds_sum"};
    assert_int_equal(parse_ann(&c, gen3, 4, &w, bad, err), 0);
    assert_string_equal(w.scrape.busy_metric, "request_service_seconds_sum");
    assert_string_equal(w.promql_busy, ""); /* the default query */
    assert_string_equal(w.scrape.rejected_metric, ""); /* generic: none */
    const char *rej[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/metrics-profile",
                         "tgi", "gpuscaler.io/rejected-metric", "http_requests_total{code=\"429\"}"};
    assert_int_equal(parse_ann(&c, rej, 3, &w, bad, err), 0);
    assert_string_equal(w.scrape.rejected_metric, "http_requests_total{code=\"429\"}");
    const char *tgi[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/metrics-profile",
                         "tgi"};
    assert_int_equal(parse_ann(&c, tgi, 2, &w, bad, err), 0);
    assert_string_equal(w.scrape.rejected_metric, "tgi_request_failure{err=\"overloaded\"}");
    const char *pq[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/promql-busy",
                        "sum(rate(svc_seconds_sum{ns=\"{{namespace}}\"}[{{window}}]))",
                        "gpuscaler.io/promql-p99", "histogram_quantile(0.99, x)"};
    assert_int_equal(parse_ann(&c, pq, 3, &w, bad, err), 0);
    assert_string_equal(w.promql_busy,
                        "sum(rate(svc_seconds_sum{ns=\"{{namespace}}\"}[{{window}}]))");
    assert_string_equal(w.promql_p99, "histogram_quantile(0.99, x)");
    assert_string_equal(w.promql_rate, "");
    /* a template's placeholders are checked with the annotation (a typo held the
     * Deployment at every query, its rate included, instead of naming the key) */
    static const char p99_typo[] =
        "histogram_quantile(0.99, sum by (le)(rate(x{namespace=\"{{ns}}\"}[5m])))";
    const char *typo[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/promql-p99",
                          p99_typo};
    assert_int_equal(parse_ann(&c, typo, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/promql-p99");
    assert_non_null(strstr(err, "promql-p99: unknown placeholder {{ns}}"));
    const char *open_[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/promql-busy",
                           "sum(x{pod=~\"{{pods\"})"};
    assert_int_equal(parse_ann(&c, open_, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/promql-busy");
    /* one that expands past the longest query even for the shortest names
     * (it was taken, and then failed on every tick) */
    char longq[512];
    size_t ql = 0;
    for (; ql + 8 < sizeof(longq); ql += 8)
        memcpy(longq + ql, "{{pods}}", 8);
    longq[ql] = '\0';
    const char *too_long[] = {"gpuscaler.io/capacity-per-gpu", "3", "gpuscaler.io/promql-rate",
                              longq};
    assert_int_equal(parse_ann(&c, too_long, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/promql-rate");
    assert_non_null(strstr(err, "promql-rate: expanded query longer than"));
    ctl_config_free(&c);

    /* config defaults apply under annotations */
    struct conf_error cerr;
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c, "defaults: {capacity-per-gpu: '5', max-replicas: '30'}\n",
                                &cerr), 0);
    const char *over[] = {"gpuscaler.io/max-replicas", "12"};
    assert_int_equal(parse_ann(&c, over, 1, &w, bad, err), 0);
    assert_true(w.policy.capacity_rps_per_gpu == 5);
    assert_int_equal(w.policy.max_replicas, 12);
    ctl_config_free(&c);
    for (size_t i = 0; i < ctl_annotation_key_count(); i++)
        assert_non_null(ctl_annotation_key_name(i));
}

/* demand-unit tokens: vLLM, TGI, SGLang and NIM read their token counters; Triton, TEI
 * and generic (without named counters) and the Prometheus source are refused
 * with an InvalidAnnotation on demand-unit; requests reads none. */
/* A refusal names the key where the value came from: the Deployment's
 * annotation, else the config file's default (it named gpuscaler.io/<key>,
 * an annotation the Deployment did not have). */
static void test_annotations_blame_defaults(void **s)
{
    (void)s;
    struct ctl_config c;
    ctl_config_init(&c);
    struct ctl_workload_config w;
    char bad[128], err[200];
    c.defaults[0] = (struct ctl_kv){xstrdup("min-replicas"), xstrdup("4")};
    c.defaults[1] = (struct ctl_kv){xstrdup("demand-unit"), xstrdup("tokens")};
    c.n_defaults = 2;
    const char *cap[] = {"gpuscaler.io/capacity-per-gpu", "12", "gpuscaler.io/max-replicas",
                         "2"};
    assert_int_equal(parse_ann(&c, cap, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "defaults.min-replicas");
    assert_non_null(strstr(err, "max-replicas 2"));
    /* the Deployment's own annotation is named when it has one */
    const char *own[] = {"gpuscaler.io/capacity-per-gpu", "12", "gpuscaler.io/max-replicas",
                         "2", "gpuscaler.io/min-replicas", "3"};
    assert_int_equal(parse_ann(&c, own, 3, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/min-replicas");
    /* a default refused only with the Deployment's other keys */
    const char *prom[] = {"gpuscaler.io/capacity-per-gpu", "12", "gpuscaler.io/metrics-source",
                          "prometheus"};
    assert_int_equal(parse_ann(&c, prom, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "defaults.demand-unit");
    assert_non_null(strstr(err, "tokens needs metrics-source scrape"));
    ctl_config_free(&c);
}

static void test_annotations_tokens(void **s)
{
    (void)s;
    struct ctl_config c;
    ctl_config_init(&c);
    struct ctl_workload_config w;
    char bad[128], err[200];
    const char *vllm[] = {"gpuscaler.io/capacity-per-gpu", "6000", "gpuscaler.io/demand-unit",
                          "tokens"};
    assert_int_equal(parse_ann(&c, vllm, 2, &w, bad, err), 0);
    assert_int_equal(w.policy.demand_unit, POLICY_UNIT_TOKENS);
    assert_true(w.policy.prompt_token_weight == POLICY_DEFAULT_PROMPT_TOKEN_WEIGHT);
    assert_string_equal(w.scrape.prompt_token_metric, "vllm:prompt_tokens_total");
    assert_string_equal(w.scrape.generation_token_metric, "vllm:generation_tokens_total");
    assert_string_equal(bad, "");

    const char *tgi[] = {"gpuscaler.io/capacity-per-gpu", "auto", "gpuscaler.io/demand-unit",
                         "tokens", "gpuscaler.io/metrics-profile", "tgi",
                         "gpuscaler.io/prompt-token-weight", "0.1"};
    assert_int_equal(parse_ann(&c, tgi, 4, &w, bad, err), 0);
    assert_true(w.policy.prompt_token_weight == 0.1);
    assert_string_equal(w.scrape.prompt_token_metric, "tgi_request_input_length_sum");
    assert_string_equal(w.scrape.generation_token_metric, "tgi_request_generated_tokens_sum");

    const char *sgl[] = {"gpuscaler.io/capacity-per-gpu", "6000", "gpuscaler.io/demand-unit",
                         "tokens", "gpuscaler.io/metrics-profile", "sglang"};
    assert_int_equal(parse_ann(&c, sgl, 3, &w, bad, err), 0);
    assert_int_equal(w.scrape.profile, SCRAPE_SGLANG);
    assert_string_equal(w.scrape.request_metric, "sglang:num_requests_total");
    assert_string_equal(w.scrape.queue_metric, "sglang:num_queue_reqs");
    assert_string_equal(w.scrape.busy_metric, ""); /* the in-flight gauge instead */
    assert_string_equal(w.scrape.prompt_token_metric, "sglang:prompt_tokens_total");
    assert_string_equal(w.scrape.generation_token_metric, "sglang:generation_tokens_total");
    assert_string_equal(w.scrape.path, "/metrics");

    /* NIM: unprefixed names, served at /v1/metrics unless metrics-path says
     * otherwise, whichever order the annotations come in */
    const char *nim[] = {"gpuscaler.io/metrics-path", "/metrics", "gpuscaler.io/capacity-per-gpu",
                         "6000", "gpuscaler.io/demand-unit", "tokens",
                         "gpuscaler.io/metrics-profile", "nim"};
    assert_int_equal(parse_ann(&c, nim + 2, 3, &w, bad, err), 0);
    assert_int_equal(w.scrape.profile, SCRAPE_NIM);
    assert_string_equal(w.scrape.path, "/v1/metrics");
    assert_string_equal(w.scrape.request_metric, "request_success_total");
    assert_string_equal(w.scrape.inflight_metric, "num_requests_running");
    assert_string_equal(w.scrape.queue_metric, "num_requests_waiting");
    assert_string_equal(w.scrape.latency_metric, "e2e_request_latency_seconds");
    assert_string_equal(w.scrape.busy_metric, "");
    assert_string_equal(w.scrape.prompt_token_metric, "prompt_tokens_total");
    assert_string_equal(w.scrape.generation_token_metric, "generation_tokens_total");
    assert_int_equal(parse_ann(&c, nim, 4, &w, bad, err), 0);
    assert_string_equal(w.scrape.path, "/metrics"); /* older NIM releases */

    /* TEI: inputs embedded, not HTTP requests; the request latency; no
     * in-flight gauge and no busy-time counter; /metrics */
    const char *tei[] = {"gpuscaler.io/capacity-per-gpu", "400", "gpuscaler.io/metrics-profile",
                         "tei"};
    assert_int_equal(parse_ann(&c, tei, 2, &w, bad, err), 0);
    assert_int_equal(w.scrape.profile, SCRAPE_TEI);
    assert_string_equal(w.scrape.path, "/metrics");
    assert_string_equal(w.scrape.request_metric, "te_embed_success");
    assert_string_equal(w.scrape.inflight_metric, "");
    assert_string_equal(w.scrape.queue_metric, "te_queue_size");
    assert_string_equal(w.scrape.latency_metric, "te_request_duration");
    assert_string_equal(w.scrape.busy_metric, "");

    /* requests (the default): no token counter is read, even when named */
    const char *req[] = {"gpuscaler.io/capacity-per-gpu", "10",
                         "gpuscaler.io/generation-token-metric", "my_tokens_total"};
    assert_int_equal(parse_ann(&c, req, 2, &w, bad, err), 0);
    assert_int_equal(w.policy.demand_unit, POLICY_UNIT_REQUESTS);
    assert_string_equal(w.scrape.generation_token_metric, "");
    assert_string_equal(w.scrape.prompt_token_metric, "");

    static const struct {
        const char *profile, *extra_k, *extra_v, *badkey, *msg;
    } cases[] = {
        {"triton", NULL, NULL, "gpuscaler.io/demand-unit",
         "demand-unit: tokens not available for metrics-profile triton (Triton exposes no token "
         "counters); use demand-unit requests or set generation-token-metric"},
        {"tei", NULL, NULL, "gpuscaler.io/demand-unit",
         "not available for metrics-profile tei (an embedding or reranking server generates "
         "no tokens)"},
        {"generic", "gpuscaler.io/request-metric", "http_requests_total",
         "gpuscaler.io/demand-unit", "not available for metrics-profile generic"},
        {"vllm", "gpuscaler.io/metrics-source", "prometheus", "gpuscaler.io/demand-unit",
         "tokens needs metrics-source scrape"},
        {"vllm", "gpuscaler.io/prompt-token-weight", "-1", "gpuscaler.io/prompt-token-weight",
         "out of range"},
        {"vllm", "gpuscaler.io/generation-token-metric", "tokens{x}",
         "gpuscaler.io/generation-token-metric", "is not a metric name with label matchers"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        const char *kv[] = {"gpuscaler.io/capacity-per-gpu", "10", "gpuscaler.io/demand-unit",
                            "tokens", "gpuscaler.io/metrics-profile", cases[i].profile,
                            cases[i].extra_k, cases[i].extra_v};
        int rc = parse_ann(&c, kv, cases[i].extra_k ? 4 : 3, &w, bad, err);
        if (rc != -EINVAL || strcmp(bad, cases[i].badkey) != 0 || !strstr(err, cases[i].msg))
            fail_msg("case %zu: rc %d bad '%s' err '%s'", i, rc, bad, err);
    }
    const char *unit[] = {"gpuscaler.io/capacity-per-gpu", "10", "gpuscaler.io/demand-unit",
                          "words"};
    assert_int_equal(parse_ann(&c, unit, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/demand-unit");
    assert_non_null(strstr(err, "is not requests or tokens"));

    /* Triton with its backend's own counters named: accepted */
    const char *tri[] = {"gpuscaler.io/capacity-per-gpu", "10", "gpuscaler.io/demand-unit",
                         "tokens", "gpuscaler.io/metrics-profile", "triton",
                         "gpuscaler.io/generation-token-metric", "backend_output_tokens_total"};
    assert_int_equal(parse_ann(&c, tri, 4, &w, bad, err), 0);
    assert_string_equal(w.scrape.generation_token_metric, "backend_output_tokens_total");
    assert_string_equal(w.scrape.prompt_token_metric, "");
    ctl_config_free(&c);
}

/* min-replicas 0 needs a rate measured where requests arrive: the Prometheus
 * source with a promql-rate of its own (the profile's query counts the pods'
 * requests, and at zero there are no pods). A config file's defaults may set
 * it for Deployments whose annotations complete it. */
static void test_annotations_min_zero(void **s)
{
    (void)s;
    struct ctl_config c;
    ctl_config_init(&c);
    struct ctl_workload_config w;
    char bad[128], err[200];
    const char *rate = "sum(rate(gateway_requests_total{route=\"{{deployment}}\"}[1m]))";
    const char *ok[] = {"gpuscaler.io/capacity-per-gpu", "10", "gpuscaler.io/min-replicas", "0",
                        "gpuscaler.io/metrics-source", "prometheus",
                        "gpuscaler.io/promql-rate", rate};
    assert_int_equal(parse_ann(&c, ok, 4, &w, bad, err), 0);
    assert_int_equal(w.policy.min_replicas, 0);
    /* scrape, or prometheus with the profile's query: refused, naming min-replicas */
    for (size_t n = 2; n <= 3; n++) {
        assert_int_equal(parse_ann(&c, ok, n, &w, bad, err), -EINVAL);
        assert_string_equal(bad, "gpuscaler.io/min-replicas");
        assert_non_null(strstr(err, "min-replicas: 0 needs metrics-source prometheus and a "
                                    "promql-rate"));
    }
    /* min-replicas 1 needs neither */
    const char *one[] = {"gpuscaler.io/capacity-per-gpu", "10", "gpuscaler.io/min-replicas", "1"};
    assert_int_equal(parse_ann(&c, one, 2, &w, bad, err), 0);
    ctl_config_free(&c);

    struct conf_error cerr;
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c, "defaults:\n  min-replicas: '0'\n", &cerr), 0);
    ctl_config_free(&c);
    /* an IPv4 wildcard and an IPv6 host on one port bind apart (Linux) */
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c, "listen: {metrics: '0.0.0.0:9000', health: '[::1]:9000'}\n",
                                &cerr), 0);
    ctl_config_free(&c);
    /* nor the request metric a generic profile's Deployments name themselves */
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c, "defaults:\n  metrics-profile: generic\n", &cerr), 0);
    ctl_config_free(&c);
}

/* capacity-start is what capacity-per-gpu auto sizes with until it has
 * learned: a Deployment's own beside a number would do nothing, and is an
 * InvalidAnnotation naming it, not ignored; a config default is for the
 * Deployments whose capacity is auto, and no error where it is a number. */
static void test_annotations_capacity_start(void **s)
{
    (void)s;
    struct ctl_config c;
    ctl_config_init(&c);
    struct ctl_workload_config w;
    char bad[128], err[200];
    const char *fixed[] = {"gpuscaler.io/capacity-per-gpu", "12",
                           "gpuscaler.io/capacity-start", "6"};
    assert_int_equal(parse_ann(&c, fixed, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/capacity-start");
    assert_non_null(strstr(err, "capacity-start: no effect with capacity-per-gpu 12"));
    assert_non_null(strstr(err, "set capacity-per-gpu: auto"));
    /* either order of the keys */
    const char *fixed2[] = {"gpuscaler.io/capacity-start", "6",
                            "gpuscaler.io/capacity-per-gpu", "12"};
    assert_int_equal(parse_ann(&c, fixed2, 2, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/capacity-start");
    /* with auto it is the start; 0 (none) beside a number is no start at all */
    const char *learn[] = {"gpuscaler.io/capacity-per-gpu", "auto",
                           "gpuscaler.io/capacity-start", "6"};
    assert_int_equal(parse_ann(&c, learn, 2, &w, bad, err), 0);
    assert_true(w.policy.capacity_auto);
    assert_true(w.policy.capacity_start == 6);
    const char *none[] = {"gpuscaler.io/capacity-per-gpu", "12",
                          "gpuscaler.io/capacity-start", "0"};
    assert_int_equal(parse_ann(&c, none, 2, &w, bad, err), 0);
    assert_true(w.policy.capacity_rps_per_gpu == 12);
    ctl_config_free(&c);

    /* defaults: a start for the Deployments that learn, beside a default number */
    struct conf_error cerr;
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c, "defaults:\n  capacity-per-gpu: '5'\n"
                                    "  capacity-start: '6'\n", &cerr), 0);
    const char *own_auto[] = {"gpuscaler.io/capacity-per-gpu", "auto"};
    assert_int_equal(parse_ann(&c, own_auto, 1, &w, bad, err), 0);
    assert_true(w.policy.capacity_auto && w.policy.capacity_start == 6);
    /* a Deployment on the default number: the default start is not its own */
    assert_int_equal(parse_ann(&c, own_auto, 0, &w, bad, err), 0);
    assert_true(w.policy.capacity_rps_per_gpu == 5 && !w.policy.capacity_auto);
    /* its own start beside the default number is refused */
    const char *own_start[] = {"gpuscaler.io/capacity-start", "8"};
    assert_int_equal(parse_ann(&c, own_start, 1, &w, bad, err), -EINVAL);
    assert_string_equal(bad, "gpuscaler.io/capacity-start");
    ctl_config_free(&c);
    ctl_config_init(&c);
    assert_int_equal(apply_yaml(&c, "defaults:\n  capacity-start: '6'\n", &cerr), 0);
    const char *own_num[] = {"gpuscaler.io/capacity-per-gpu", "4"};
    assert_int_equal(parse_ann(&c, own_num, 1, &w, bad, err), 0);
    assert_true(w.policy.capacity_rps_per_gpu == 4);
    ctl_config_free(&c);
}

/* listen.* addresses: one parser for the config's check and the listeners
 * (the external metrics API's kept the brackets of [::1] and failed after
 * the config had passed) */
static void test_listen_addr_split(void **s)
{
    (void)s;
    static const struct {
        const char *in, *host;
        int port;
    } ok[] = {{"0.0.0.0:9090", "0.0.0.0", 9090}, {":8081", "0.0.0.0", 8081},
              {"[::]:6443", "::", 6443},          {"[::1]:0", "::1", 0},
              {"127.0.0.2:65535", "127.0.0.2", 65535}};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(ok); i++) {
        char host[64];
        int port = -1;
        assert_int_equal(ctl_listen_addr_split(ok[i].in, host, sizeof(host), &port), 0);
        assert_string_equal(host, ok[i].host);
        assert_int_equal(port, ok[i].port);
    }
    static const char *const bad[] = {"9090", "localhost:9090", "[::1:9090", "::1:9090x",
                                      "1.2.3.4:65536", "1.2.3.4:-1", "[]:80", ""};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        char host[64];
        int port;
        assert_int_equal(ctl_listen_addr_split(bad[i], host, sizeof(host), &port), -EINVAL);
    }
}

static void test_status_json(void **s)
{
    (void)s;
    struct policy_decision d;
    memset(&d, 0, sizeof(d));
    d.desired = 6;
    d.reason = POLICY_HOLD_ABOVE_WAITING;
    d.requests_per_gpu = 9.25;
    d.utilization = 0.925;
    d.forecast_requests_per_gpu = NAN;
    d.above_since_ms = 1795000000000LL;
    d.scale_out_at_ms = 1795000120000LL;
    d.below_since_ms = d.scale_in_at_ms = POLICY_NEVER;
    d.demand_rps = 55.5;
    d.forecast_rps = NAN;
    d.per_replica_rps = 8;
    d.need_now = 7;
    snprintf(d.explain, sizeof(d.explain), "a \"quoted\" line");
    char *j = ctl_status_json(1795000060000LL, &d, NULL, NULL);
    assert_string_equal(j, "{\"time\":\"2026-11-18T11:07:40Z\",\"desired\":6,"
                           "\"reason\":\"AboveTargetWaiting\",\"requestsPerGPU\":9.25,"
                           "\"utilization\":0.925,\"forecastRequestsPerGPU\":null,"
                           "\"demandRequestsPerSecond\":55.5,\"forecastRequestsPerSecond\":null,"
                           "\"perReplicaRequestsPerSecond\":8,\"sizing\":\"target-utilization\","
                           "\"needReplicas\":7,\"unschedulableReplicas\":0,"
                           "\"aboveSince\":\"2026-11-18T11:06:40Z\","
                           "\"scaleOutAt\":\"2026-11-18T11:08:40Z\",\"belowSince\":null,"
                           "\"scaleInAt\":null,\"message\":\"a \\\"quoted\\\" line\"}");
    xfree(j);
    /* a plan in use, sized from the SLA, pinned at max: the fields say so */
    d.reason = POLICY_HOLD_AT_MAX;
    d.forecast_rps = 120;
    d.forecast_requests_per_gpu = 20;
    d.sla_sized = true;
    d.per_replica_rps = 8.42;
    d.need_forecast = 15;
    d.want = 15;
    struct capacity_estimate e = {.value = 9.5, .lower = 7.25, .saturation = NAN,
                                  .slots_per_gpu = 64, .samples = 12,
                                  .basis = CAPACITY_BASIS_UTILIZATION};
    struct ctl_status_capacity cap = {.in_use = 10, .source = "configured", .est = &e,
                                      .mismatch = 0};
    j = ctl_status_json(1795000060000LL, &d, &cap, NULL);
    assert_non_null(strstr(j, "\"capacity\":{\"perGPU\":10,\"source\":\"configured\","
                              "\"learned\":9.5,\"basis\":\"utilization\",\"samples\":12,"
                              "\"highestSeen\":7.25,\"saturation\":null,\"slotsPerGPU\":64}"));
    xfree(j);
    cap.mismatch = 1;
    cap.in_service = "busy-time";
    j = ctl_status_json(1795000060000LL, &d, &cap, NULL);
    assert_non_null(strstr(j, "\"slotsPerGPU\":64,\"inService\":\"busy-time\","
                              "\"mismatch\":\"configured-too-high\"}"));
    xfree(j);
    j = ctl_status_json(1795000060000LL, &d, NULL, NULL);
    assert_non_null(strstr(j, "\"forecastRequestsPerSecond\":120,"));
    assert_non_null(strstr(j, "\"sizing\":\"p99-latency-target\""));
    assert_non_null(strstr(j, "\"forecastNeedReplicas\":15,"));
    assert_non_null(strstr(j, "\"atMaxReplicas\":true,\"wantReplicas\":15"));
    assert_null(strstr(j, "coldStart"));
    xfree(j);
    /* replicas waiting for GPUs: how many, the hold and the need; the
     * learned cold start in its two parts */
    d.reason = POLICY_HOLD_GPU_CAPACITY;
    d.unschedulable = 3;
    d.want = 9;
    struct ctl_status_start start = {.schedule_ms = 95500, .load_ms = 181000};
    j = ctl_status_json(1795000060000LL, &d, NULL, &start);
    assert_non_null(strstr(j, "\"reason\":\"AtGPUCapacity\""));
    assert_non_null(strstr(j, "\"unschedulableReplicas\":3,\"atGPUCapacity\":true,"
                              "\"wantReplicas\":9,"));
    assert_null(strstr(j, "atMaxReplicas"));
    assert_non_null(strstr(j, "\"coldStart\":{\"scheduleSeconds\":95.5,\"loadSeconds\":181},"));
    xfree(j);
    start.schedule_ms = start.load_ms = 0; /* nothing seen yet: no figures */
    j = ctl_status_json(1795000060000LL, &d, NULL, &start);
    assert_null(strstr(j, "coldStart"));
    assert_null(strstr(j, "demandUnit"));
    xfree(j);
    /* tokens: the status says the unit the figures are in */
    d.reason = POLICY_HOLD_AT_MAX;
    d.unschedulable = 0;
    cap.demand_unit = "tokens";
    cap.tokens_per_request = 612.5;
    j = ctl_status_json(1795000060000LL, &d, &cap, NULL);
    assert_non_null(strstr(j, "\"reason\":\"AtMaxReplicas\",\"demandUnit\":\"tokens\","
                              "\"tokensPerRequest\":612.5,"));
    xfree(j);
    cap.demand_unit = "requests";
    j = ctl_status_json(1795000060000LL, &d, &cap, NULL);
    assert_null(strstr(j, "demandUnit"));
    assert_null(strstr(j, "refused")); /* no rejected_metric read */
    xfree(j);
    /* the requests the pods refused, part of the demand: said when read */
    cap.refused_named = true;
    cap.refused_rps = 7.25;
    j = ctl_status_json(1795000060000LL, &d, &cap, NULL);
    assert_non_null(strstr(j, ",\"refusedRequestsPerSecond\":7.25,"));
    xfree(j);
    cap.refused_rps = NAN;
    j = ctl_status_json(1795000060000LL, &d, &cap, NULL);
    assert_non_null(strstr(j, ",\"refusedRequestsPerSecond\":null,"));
    xfree(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_config_bad_value_of_every_key),
        cmocka_unit_test(test_config_set_from_flags),
        cmocka_unit_test(test_config_check_files),
        cmocka_unit_test(test_annotations),
        cmocka_unit_test(test_annotations_blame_defaults),
        cmocka_unit_test(test_annotations_tokens),
        cmocka_unit_test(test_annotations_min_zero),
        cmocka_unit_test(test_annotations_capacity_start),
        cmocka_unit_test(test_listen_addr_split),
        cmocka_unit_test(test_status_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

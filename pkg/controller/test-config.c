/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the controller's pure configuration layer: the daemon config
 * file, annotation validation and the status annotation. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
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
    const char *yaml = "decision-interval: 10s\n"
                       "namespaces: [ml, serving]\n"
                       "log: {format: json, level: debug}\n"
                       "leader-election:\n"
                       "  enabled: false\n"
                       "  lease-name: gs\n"
                       "listen: {metrics: '127.0.0.1:9091'}\n"
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
    assert_true(c.extmetrics.enabled);
    assert_string_equal(c.extmetrics.upstream_url, "https://keda.keda:443");
    assert_int_equal(c.scrape.interval_ms, 3000);
    assert_true(c.scrape.missing_fraction == 0.5);
    assert_int_equal(c.n_defaults, 2);
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
    assert_string_equal(w.scrape.request_metric, "tgi_request_count");
    assert_int_equal(w.scrape.port, 3000);
    assert_string_equal(w.scrape.path, "/metrics");

    static const struct {
        const char *k, *v, *badkey, *msg;
    } cases[] = {
        {"gpuscaler.io/capacity-per-gpu", "lots", "gpuscaler.io/capacity-per-gpu", "not a number"},
        {"gpuscaler.io/metrics-profile", "sglang", "gpuscaler.io/metrics-profile", "not vllm"},
        {"gpuscaler.io/mode", "both", "gpuscaler.io/mode", "not scale or external-metric"},
        {"gpuscaler.io/metrics-port", "70000", "gpuscaler.io/metrics-port", "port number"},
        {"gpuscaler.io/metrics-path", "metrics", "gpuscaler.io/metrics-path", "absolute"},
        {"gpuscaler.io/request-metric", "bad name{}", "gpuscaler.io/request-metric", "metric name"},
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
    snprintf(d.explain, sizeof(d.explain), "a \"quoted\" line");
    char *j = ctl_status_json(1795000060000LL, &d);
    assert_string_equal(j, "{\"time\":\"2026-11-18T11:07:40Z\",\"desired\":6,"
                           "\"reason\":\"AboveTargetWaiting\",\"requestsPerGPU\":9.25,"
                           "\"utilization\":0.925,\"forecastRequestsPerGPU\":null,"
                           "\"aboveSince\":\"2026-11-18T11:06:40Z\","
                           "\"scaleOutAt\":\"2026-11-18T11:08:40Z\",\"belowSince\":null,"
                           "\"scaleInAt\":null,\"message\":\"a \\\"quoted\\\" line\"}");
    xfree(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_annotations),
        cmocka_unit_test(test_status_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

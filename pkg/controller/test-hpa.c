/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of what an HPA in front of gpuscaler (mode external-metric) is
 * told: ctl_hpa_facts_add() on HPA objects as the API server returns them,
 * ctl_hpa_advice() on the facts; the HPA lists' rounds (ctl_hpa_answer) and
 * which scaleTargetRefs name an apps Deployment, and no /scale write in mode
 * scale before one (ctl_act). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/controller-int.h"
#include "kube/kube.h"

/* The docs' HPA (docs/external-metrics.md section 3), with behavior and
 * tolerance spliced in. */
#define HPA(name, bounds, target, behavior)                                                   \
    "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"llm\"},\"spec\":{"                   \
    "\"scaleTargetRef\":{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"llama\"}," \
    bounds ",\"metrics\":[{\"type\":\"External\",\"external\":{\"metric\":{\"name\":"          \
    "\"gpuscaler_desired_replicas\",\"selector\":{\"matchLabels\":{\"deployment\":\"llama\"}}}," \
    "\"target\":" target "}}]" behavior "}}"
#define AVG1 "{\"type\":\"AverageValue\",\"averageValue\":\"1\"}"
#define WINDOWS0                                                                              \
    ",\"behavior\":{\"scaleUp\":{\"stabilizationWindowSeconds\":0%s},"                         \
    "\"scaleDown\":{\"stabilizationWindowSeconds\":0%s}}"

static struct ctl_hpa_facts facts(const char *const *docs, size_t n)
{
    struct ctl_hpa_facts f = {.listed = true};
    for (size_t i = 0; i < n; i++) {
        json_error_t err;
        json_t *j = json_loads(docs[i], 0, &err);
        if (!j)
            fail_msg("bad fixture %zu: %s at %d", i, err.text, err.position);
        ctl_hpa_facts_add(&f, j);
        json_decref(j);
    }
    return f;
}

static size_t advice(const char *doc, int32_t min, int32_t max, char *out, size_t len)
{
    struct ctl_hpa_facts f = facts(&doc, 1);
    return ctl_hpa_advice(&f, min, max, 0, out, len);
}

static void test_nothing_before_the_first_list(void **st)
{
    (void)st;
    struct ctl_hpa_facts f = {0};
    char out[512] = "x";
    assert_int_equal(ctl_hpa_advice(&f, 1, 16, 0, out, sizeof(out)), 0);
    assert_string_equal(out, "");
}

/* The metric's name in any case reads gpuscaler's (the HPA controller asks
 * for it lower-cased); without a selector it sums every tracked
 * Deployment's count, and that is told. */
static void test_metric_case_and_selector(void **st)
{
    (void)st;
    char b[2048], out[1024];
    snprintf(b, sizeof(b), HPA("llama", "\"minReplicas\":1,\"maxReplicas\":16", AVG1, WINDOWS0),
             "", "");
    char *p = strstr(b, "gpuscaler_desired_replicas");
    assert_non_null(p);
    memcpy(p, "Gpuscaler_Desired", 17);
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    snprintf(b, sizeof(b), HPA("llama", "\"minReplicas\":1,\"maxReplicas\":16", AVG1, WINDOWS0),
             "", "");
    static const char sel[] = ",\"selector\":{\"matchLabels\":{\"deployment\":\"llama\"}}";
    p = strstr(b, sel);
    assert_non_null(p);
    memmove(p, p + strlen(sel), strlen(p + strlen(sel)) + 1); /* no selector */
    assert_non_null(strstr(b, "\"name\":\"gpuscaler_desired_replicas\"}"));
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "has no selector"));
}

static void test_no_hpa_nothing_applies_the_count(void **st)
{
    (void)st;
    struct ctl_hpa_facts f = {.listed = true};
    char out[512];
    /* not yet: an HPA made just after the Deployment shows at a later list */
    assert_int_equal(ctl_hpa_advice(&f, 1, 16, 0, out, sizeof(out)), 0);
    f.none_confirmed = true;
    assert_int_equal(ctl_hpa_advice(&f, 1, 16, 0, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "no HorizontalPodAutoscaler targets this Deployment"));
}

static void test_the_documented_hpa_is_fine(void **st)
{
    (void)st;
    char b[2048], out[1024];
    /* tolerance unset (the cluster's; no field before Kubernetes 1.33) or 0 */
    snprintf(b, sizeof(b), HPA("llama", "\"minReplicas\":1,\"maxReplicas\":16", AVG1, WINDOWS0),
             "", "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    snprintf(b, sizeof(b), HPA("llama", "\"minReplicas\":1,\"maxReplicas\":16", AVG1, WINDOWS0),
             ",\"tolerance\":\"0\"", ",\"tolerance\":0");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 0);
    /* min-replicas 0 under an HPA at 1: the HPAScaleToZero gate, not a setting */
    assert_int_equal(advice(b, 0, 16, out, sizeof(out)), 0);
}

/* A tolerance t set on the HPA leaves a step of one unapplied from 1 / t
 * replicas on: up from at most max - 1, down from at most max. */
static void test_a_tolerance_set_is_checked_each_way(void **st)
{
    (void)st;
    char b[2048], out[1024];
    /* 50m is 5 %: from 20 on */
    snprintf(b, sizeof(b), HPA("llama", "\"minReplicas\":1,\"maxReplicas\":32", AVG1, WINDOWS0),
             ",\"tolerance\":\"50m\"", ",\"tolerance\":\"0.05\"");
    assert_int_equal(advice(b, 1, 32, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "the HorizontalPodAutoscaler llama: its scaleUp and scaleDown "
                                "tolerance (5 %) leaves a step of one replica unapplied from 20 "
                                "replicas on: set it to 0"));
    assert_int_equal(advice(b, 1, 19, out, sizeof(out)), 0);
    /* at max 20: 20 -> 19 is lost (ratio 0.95), 19 -> 20 is not (20/19 - 1 > 5 %) */
    assert_int_equal(advice(b, 1, 20, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "its scaleDown tolerance (5 %)"));
    /* up only: 10 % from 10 on, which max 10 never steps up from */
    snprintf(b, sizeof(b), HPA("llama", "\"minReplicas\":1,\"maxReplicas\":16", AVG1, WINDOWS0),
             ",\"tolerance\":\"0.1\"", "");
    assert_int_equal(advice(b, 1, 10, out, sizeof(out)), 0);
    assert_int_equal(advice(b, 1, 11, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "its scaleUp tolerance (10 %) leaves a step of one replica "
                                "unapplied from 10 replicas on"));
}

/* Scale-up policies are checked by how long the HPA takes to go from
 * min-replicas to max-replicas (a scale-out may be the whole range at once),
 * against the Kubernetes defaults: 1 -> 5 -> 10 -> 16, 30 s after the first
 * sync. */
static void test_slow_scale_up_policies(void **st)
{
    (void)st;
    char b[4096], out[1024];
#define UP(pol) HPA("llama", "\"minReplicas\":1,\"maxReplicas\":16", AVG1, WINDOWS0)
    /* the documented policy (Percent 1000): 1 -> 11 -> 16, faster */
    snprintf(b, sizeof(b), UP(), ",\"selectPolicy\":\"Max\",\"policies\":[{\"type\":"
             "\"Percent\",\"value\":1000,\"periodSeconds\":15}]", "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 0);
    /* one pod a minute: a scale-up, then 3 syncs whose period holds it */
    snprintf(b, sizeof(b), UP(), ",\"policies\":[{\"type\":\"Pods\",\"value\":1,"
             "\"periodSeconds\":60}]", "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "the HorizontalPodAutoscaler llama: under its scaleUp policies "
                                "it takes 840 s to go from 1 to 16 replicas (30 s under the "
                                "defaults), so gpuscaler's scale-outs are applied that much "
                                "later"));
    /* gpuscaler's own pace (max-scale-up-step 1 at 1 s: 15 s to 16) is faster: told; at
     * 60 s a decision (900 s) it is the slower one: not */
    struct ctl_hpa_facts f = facts((const char *const[]){b}, 1);
    assert_int_equal(ctl_hpa_advice(&f, 1, 16, 14, out, sizeof(out)), 1);
    assert_int_equal(ctl_hpa_advice(&f, 1, 16, 840, out, sizeof(out)), 0);
    /* ... and with a faster policy beside it, Max takes the faster, Min the slower */
    snprintf(b, sizeof(b), UP(), ",\"policies\":[{\"type\":\"Pods\",\"value\":1,"
             "\"periodSeconds\":60},{\"type\":\"Pods\",\"value\":20,\"periodSeconds\":15}"
             "]", "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 0);
    snprintf(b, sizeof(b), UP(), ",\"selectPolicy\":\"Min\",\"policies\":[{\"type\":"
             "\"Pods\",\"value\":1,\"periodSeconds\":60},{\"type\":\"Pods\",\"value\":20,"
             "\"periodSeconds\":15}]", "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "under its scaleUp policies with selectPolicy Min it takes 840 s"));
    /* Pods 4 alone: 1 -> 5 -> 9 -> 13 -> 16, 45 s; from 4 it is no slower (8, 16) */
    snprintf(b, sizeof(b), UP(), ",\"policies\":[{\"type\":\"Pods\",\"value\":4,"
             "\"periodSeconds\":15}]", "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "it takes 45 s to go from 1 to 16"));
    assert_int_equal(advice(b, 4, 12, out, sizeof(out)), 0);
    /* selectPolicy Min over the default policies (which the API server fills in when
     * behavior is set, or not): 1 -> 2 -> 4 -> 8 -> 12 -> 16 */
    snprintf(b, sizeof(b), UP(), ",\"selectPolicy\":\"Min\"", "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "under its scaleUp policies with selectPolicy Min it takes 60 s"));
    snprintf(b, sizeof(b), UP(), ",\"selectPolicy\":\"Min\",\"policies\":[{\"type\":"
             "\"Pods\",\"value\":4,\"periodSeconds\":15},{\"type\":\"Percent\",\"value\":"
             "100,\"periodSeconds\":15}]", "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "under its scaleUp policies with selectPolicy Min it takes 60 s"));
    /* more policies than the facts keep: the pace is not judged on a part of them */
    char many[1600] = "";
    for (int i = 0; i < CTL_HPA_POLICIES + 1; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many),
                 "%s{\"type\":\"Pods\",\"value\":%d,\"periodSeconds\":60}", i ? "," : "",
                 i < CTL_HPA_POLICIES ? 1 : 100);
    char pol[1700];
    snprintf(pol, sizeof(pol), ",\"policies\":[%s]", many);
    snprintf(b, sizeof(b), UP(), pol, "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 0);
    /* a pod every 30 min to 1000 replicas */
    snprintf(b, sizeof(b),
             HPA("llama", "\"minReplicas\":1,\"maxReplicas\":1000", AVG1, WINDOWS0),
             ",\"policies\":[{\"type\":\"Pods\",\"value\":1,\"periodSeconds\":1800}]", "");
    assert_int_equal(advice(b, 1, 1000, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "it takes more than an hour to go from 1 to 1000 replicas"));
    /* nothing to scale up through, or told already as Disabled */
    assert_int_equal(advice(b, 1000, 1000, out, sizeof(out)), 0);
    snprintf(b, sizeof(b), UP(), ",\"selectPolicy\":\"Disabled\",\"policies\":[{\"type\":"
             "\"Pods\",\"value\":1,\"periodSeconds\":60}]", "");
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 1);
    assert_null(strstr(out, "it takes"));
#undef UP
}

static void test_a_default_hpa_is_told_each_problem(void **st)
{
    (void)st;
    char out[1024];
    /* no behavior, no minReplicas (1), maxReplicas 8 under gpuscaler's 16 */
    const char *doc = HPA("llama", "\"maxReplicas\":8", AVG1,
                          ",\"behavior\":{\"scaleUp\":{\"selectPolicy\":\"Disabled\"}}");
    assert_int_equal(advice(doc, 2, 16, out, sizeof(out)), 3);
    assert_non_null(strstr(out, "the HorizontalPodAutoscaler llama: its maxReplicas 8 is below "
                                "max-replicas 16: gpuscaler's counts above 8 are not applied; "));
    assert_non_null(strstr(out, "its scale-down stabilization window (300 s, the default)"));
    assert_non_null(strstr(out, "its scaleUp selectPolicy is Disabled: gpuscaler's scale-outs "
                                "are never applied"));
    assert_null(strstr(out, "minReplicas")); /* 1 is below gpuscaler's 2: not a problem */
    /* minReplicas above gpuscaler's min, a scale-up window */
    char b[2048];
    snprintf(b, sizeof(b),
             HPA("llama", "\"minReplicas\":3,\"maxReplicas\":16", "{\"type\":\"AverageValue\","
                 "\"averageValue\":\"1000m\"}",
                 ",\"behavior\":{\"scaleUp\":{\"stabilizationWindowSeconds\":60,\"tolerance\":0},"
                 "\"scaleDown\":{\"stabilizationWindowSeconds\":0,\"tolerance\":0}}"));
    assert_int_equal(advice(b, 1, 16, out, sizeof(out)), 2);
    assert_non_null(strstr(out, "its minReplicas 3 is above min-replicas 1: gpuscaler's counts "
                                "below 3 are not applied"));
    assert_non_null(strstr(out, "its scale-up stabilization window (60 s)"));
}

static void test_an_hpa_that_does_not_follow_gpuscaler(void **st)
{
    (void)st;
    char out[1024], b[2048];
    /* a Value target multiplies the count by the replicas */
    snprintf(b, sizeof(b), HPA("llama", "\"minReplicas\":1,\"maxReplicas\":8",
                               "{\"type\":\"Value\",\"value\":\"1\"}", WINDOWS0), "", "");
    assert_int_equal(advice(b, 1, 8, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "with a target other than AverageValue 1"));
    /* CPU only */
    const char *cpu =
        "{\"metadata\":{\"name\":\"cpu\"},\"spec\":{\"scaleTargetRef\":{\"kind\":\"Deployment\","
        "\"name\":\"llama\"},\"maxReplicas\":8,\"metrics\":[{\"type\":\"Resource\",\"resource\":"
        "{\"name\":\"cpu\",\"target\":{\"type\":\"Utilization\",\"averageUtilization\":80}}}],"
        "\"behavior\":{\"scaleUp\":{\"tolerance\":0},\"scaleDown\":{\"tolerance\":0,"
        "\"stabilizationWindowSeconds\":0}}}}";
    assert_int_equal(advice(cpu, 1, 8, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "the HorizontalPodAutoscaler cpu: it reads no gpuscaler_* "
                                "external metric"));
    /* KEDA's: its trigger may read gpuscaler's /metrics through Prometheus */
    const char *keda =
        "{\"metadata\":{\"name\":\"keda-hpa-llama\",\"ownerReferences\":[{\"kind\":"
        "\"ScaledObject\",\"name\":\"llama\"}]},\"spec\":{\"scaleTargetRef\":{\"kind\":"
        "\"Deployment\",\"name\":\"llama\"},\"maxReplicas\":8,\"metrics\":[{\"type\":"
        "\"External\",\"external\":{\"metric\":{\"name\":\"s0-prometheus\"},\"target\":"
        "{\"type\":\"AverageValue\",\"averageValue\":\"1\"}}}],\"behavior\":{\"scaleDown\":"
        "{\"stabilizationWindowSeconds\":0}}}}";
    assert_int_equal(advice(keda, 1, 8, out, sizeof(out)), 0);
    /* two HPAs: the first one's settings, and the count */
    snprintf(b, sizeof(b), HPA("llama", "\"minReplicas\":1,\"maxReplicas\":8", AVG1, WINDOWS0),
             ",\"tolerance\":0", ",\"tolerance\":0");
    const char *two[] = {b, cpu};
    struct ctl_hpa_facts f = facts(two, 2);
    assert_int_equal(f.count, 2);
    assert_int_equal(ctl_hpa_advice(&f, 1, 8, 0, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "the HorizontalPodAutoscaler llama: 2 HorizontalPodAutoscalers "
                                "target this Deployment"));
}

/* Fields of the wrong type are read as unset, and a message never
 * overflows its buffer. */
static void test_odd_objects_and_short_buffers(void **st)
{
    (void)st;
    const char *odd = "{\"metadata\":{\"name\":7},\"spec\":{\"minReplicas\":\"3\","
                      "\"maxReplicas\":-4,\"metrics\":{},\"behavior\":[]}}";
    char out[1024];
    struct ctl_hpa_facts f = facts(&odd, 1);
    assert_string_equal(f.name, "?");
    const char *unnamed = "{\"metadata\":{\"name\":\"\"}}";
    struct ctl_hpa_facts u = facts(&unnamed, 1);
    assert_string_equal(u.name, "?");
    assert_int_equal(f.min_replicas, 1);
    assert_int_equal(f.max_replicas, 0);
    assert_int_equal(f.down_window_s, 300);
    assert_true(ctl_hpa_advice(&f, 1, 16, 0, out, sizeof(out)) >= 3);
    char tiny[24];
    memset(tiny, 'x', sizeof(tiny));
    assert_true(ctl_hpa_advice(&f, 1, 16, 0, tiny, sizeof(tiny)) >= 3);
    assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
    assert_int_equal(ctl_hpa_advice(&f, 1, 16, 0, tiny, 0), 0);
}

/* ---- the HPA lists' rounds and what a Deployment may do before one ---- */

static struct ctl_wl *wl_add(struct controller *c, const char *ns, const char *name)
{
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    w->ns = xstrdup(ns);
    w->name = xstrdup(name);
    w->uid = xstrdup("u");
    size_t b = strlen(name) % CTL_WL_BUCKETS;
    w->next = c->table[b];
    c->table[b] = w;
    return w;
}

static void wl_free_all(struct controller *c)
{
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        while (c->table[b]) {
            struct ctl_wl *w = c->table[b];
            c->table[b] = w->next;
            xfree(w->ns);
            xfree(w->name);
            xfree(w->uid);
            free(w);
        }
}

static json_t *hpa_items_of(const char *ns, const char *api, const char *target)
{
    if (!target)
        return json_array();
    json_t *items = json_pack("[{s:{s:s,s:s},s:{s:{s:s,s:s}}}]", "metadata", "name", "h",
                              "namespace", ns, "spec", "scaleTargetRef", "kind", "Deployment",
                              "name", target);
    if (api)
        json_object_set_new(json_object_get(json_object_get(json_array_get(items, 0), "spec"),
                                            "scaleTargetRef"),
                            "apiVersion", json_string(api));
    return items;
}

static json_t *hpa_items(const char *ns, const char *target)
{
    return hpa_items_of(ns, "apps/v1", target);
}

static void answer(struct controller *c, const char *ns, bool ok, const char *target)
{
    json_t *items = hpa_items(ns, target);
    ctl_hpa_answer(c, ns, ok, items, 1000);
    json_decref(items);
}

static bool targets_has(const struct controller *c, const char *prefix)
{
    for (size_t i = 0; i < c->n_hpa_targets; i++)
        if (strncmp(c->hpa_targets[i], prefix, strlen(prefix)) == 0)
            return true;
    return false;
}

/* A round's targets replace the last round's; in a namespace whose list
 * failed the last round's hold, and only there (an HPA deleted in a
 * namespace that listed fine was kept for as long as another namespace's
 * lists failed); failures in a row keep one copy. */
static void test_hpa_rounds(void **state)
{
    (void)state;
    struct controller *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    struct ctl_wl *x = wl_add(c, "a", "x"), *y = wl_add(c, "b", "y");
    c->hpa_lists_pending = 2;
    answer(c, "a", true, "x");
    answer(c, "b", true, "y");
    assert_int_equal(c->n_hpa_targets, 2);
    assert_true(targets_has(c, "a/x\t") && targets_has(c, "b/y\t"));
    assert_true(x->hpa.listed && y->hpa.listed);
    assert_int_equal(y->hpa.count, 1);
    c->hpa_lists_pending = 2; /* a's list fails; b's HPA was deleted */
    answer(c, "a", false, NULL);
    answer(c, "b", true, NULL);
    assert_int_equal(c->n_hpa_targets, 1);
    assert_true(targets_has(c, "a/x\t"));
    assert_int_equal(y->hpa.count, 0);
    c->hpa_lists_pending = 2;
    answer(c, "a", false, NULL);
    answer(c, "b", false, NULL);
    assert_int_equal(c->n_hpa_targets, 1);
    c->hpa_lists_pending = 2;
    answer(c, "a", true, NULL);
    answer(c, "b", true, NULL);
    assert_int_equal(c->n_hpa_targets, 0);
    /* a Deployment tracked after the list was sent waits for the next */
    struct ctl_wl *z = wl_add(c, "b", "z");
    z->tracked_since_ms = 2000;
    c->hpa_lists_pending = 1;
    answer(c, "b", true, NULL);
    assert_false(z->hpa.listed);
    xfree(c->hpa_targets);
    wl_free_all(c);
    free(c);
}

/* An HPA targets our Deployment only through the apps group (the HPA
 * controller maps scaleTargetRef's group and kind, whatever the version):
 * a Deployment kind of another group (a CRD's), extensions (no longer
 * served) or the core group (no group in apiVersion) is another resource,
 * so no conflict in mode scale, and no HPA that applies the count in mode
 * external-metric. */
static void test_only_apps_deployments_are_targets(void **state)
{
    (void)state;
    static const struct {
        const char *api;
        bool targets;
    } cases[] = {
        {"apps/v1", true},        {"apps/v1beta2", true},  {"apps/", true},
        {"example.com/v1", false}, {"extensions/v1beta1", false}, {"v1", false},
        {"apps", false},          {"apps/v1/x", false},   {"", false},
        {NULL, false},            {"Apps/v1", false},      {"myapps/v1", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct controller *c = calloc(1, sizeof(*c));
        assert_non_null(c);
        struct ctl_wl *x = wl_add(c, "a", "x");
        c->hpa_lists_pending = 1;
        json_t *items = hpa_items_of("a", cases[i].api, "x");
        ctl_hpa_answer(c, "a", true, items, 1000);
        json_decref(items);
        if (c->n_hpa_targets != (cases[i].targets ? 1u : 0u))
            fail_msg("apiVersion %s: %zu targets", cases[i].api ? cases[i].api : "(none)",
                     c->n_hpa_targets);
        assert_true(x->hpa.listed);
        assert_int_equal(x->hpa.count, cases[i].targets ? 1 : 0);
        for (size_t t = 0; t < c->n_hpa_targets; t++)
            xfree(c->hpa_targets[t]);
        xfree(c->hpa_targets);
        wl_free_all(c);
        free(c);
    }
}

/* In mode scale nothing is written before the Deployment's namespace had an
 * HPA list since it was tracked (after a restart an HPA at 30 replicas was
 * clamped to max-replicas 10 at the first tick, with no metrics at all). */
static void test_no_write_before_the_hpas_are_known(void **state)
{
    (void)state;
    struct controller *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->identity = "test";
    struct ctl_wl *w = wl_add(c, "a", "x");
    policy_state_init(&w->pst);
    struct policy_config pc;
    policy_config_init(&pc);
    w->cfg.policy = pc;
    struct kube_deployment d = {.ns = "a", .name = "x", .uid = "u", .spec_replicas = 30};
    struct policy_input in = {.now_ms = 100000, .current_replicas = 30, .ready_replicas = 30,
                              .gpus_per_replica = 1, .metrics_valid = false,
                              .p99_latency_ms = -1, .queue_depth = -1};
    struct policy_decision dec;
    ctl_act(c, w, &d, &pc, &in, true, &dec);
    assert_int_equal(dec.desired, 30);
    assert_non_null(strstr(dec.explain, "not acting yet"));
    assert_int_equal(w->want_target, -1);
    assert_false(w->scaling);
    wl_free_all(c);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_before_the_first_list),
        cmocka_unit_test(test_no_hpa_nothing_applies_the_count),
        cmocka_unit_test(test_the_documented_hpa_is_fine),
        cmocka_unit_test(test_a_tolerance_set_is_checked_each_way),
        cmocka_unit_test(test_slow_scale_up_policies),
        cmocka_unit_test(test_a_default_hpa_is_told_each_problem),
        cmocka_unit_test(test_an_hpa_that_does_not_follow_gpuscaler),
        cmocka_unit_test(test_odd_objects_and_short_buffers),
        cmocka_unit_test(test_metric_case_and_selector),
        cmocka_unit_test(test_hpa_rounds),
        cmocka_unit_test(test_no_write_before_the_hpas_are_known),
        cmocka_unit_test(test_only_apps_deployments_are_targets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

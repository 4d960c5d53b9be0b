/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the cache store: field extraction, tracking transitions,
 * the deployment->pods index and its laziness, relist sweeps, scale. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "kube/kube-int.h"
#include "util/util.h"

static json_t *deployment(const char *ns, const char *name, const char *rv, bool enabled,
                          const char *app)
{
    json_t *j = json_pack(
        "{s:{s:s,s:s,s:s,s:s,s:i,s:s,s:{s:s,s:s,s:s},s:{s:s,s:s,s:s}},"
        "s:{s:i,s:{s:{s:s}},s:{s:{s:[{s:s,s:[{s:s,s:i},{s:s,s:i}],s:{s:{s:s,s:i}}},"
        "{s:s,s:{s:{s:s}}}]}}},"
        "s:{s:i,s:i,s:i,s:i,s:i}}",
        "metadata", "namespace", ns, "name", name, "uid", "u-1", "resourceVersion", rv,
        "generation", 3, "creationTimestamp", "2024-05-01T10:00:00Z", "labels", "app", app,
        "gpuscaler.io/tier", "gold", "scaledobject.keda.sh/name", "so", "annotations",
        "gpuscaler.io/enabled", enabled ? "true" : "false", "gpuscaler.io/min", "1",
        "kubectl.kubernetes.io/last-applied-configuration", "{huge}",
        "spec", "replicas", 4, "selector", "matchLabels", "app", app, "template", "spec",
        "containers", "name", "vllm", "ports", "name", "http", "containerPort", 8000, "name",
        "metrics", "containerPort", 9090, "resources", "limits", "nvidia.com/gpu", "2",
        "memory", 1, "name", "sidecar", "resources", "limits", "amd.com/gpu", "1",
        "status", "replicas", 4, "readyReplicas", 3, "availableReplicas", 3, "updatedReplicas",
        4, "observedGeneration", 3);
    assert_non_null(j);
    return j;
}

static json_t *pod(const char *ns, const char *name, const char *rv, const char *app,
                   bool ready)
{
    json_t *j = json_pack(
        "{s:{s:s,s:s,s:s,s:s,s:{s:s,s:s}},"
        "s:{s:[{s:s,s:[{s:s,s:i}],s:{s:{s:i}}}]},"
        "s:{s:s,s:s,s:[{s:s,s:s},{s:s,s:s,s:s}]}}",
        "metadata", "namespace", ns, "name", name, "resourceVersion", rv, "creationTimestamp",
        "2024-05-01T10:00:00.250Z", "labels", "app", app, "pod-template-hash", "abc123",
        "spec", "containers", "name", "vllm", "ports", "name", "http", "containerPort", 8000,
        "resources", "limits", "nvidia.com/gpu", 1,
        "status", "podIP", "10.1.2.3", "phase", "Running", "conditions", "type",
        "PodScheduled", "status", "True", "type", "Ready", "status", ready ? "True" : "False",
        "lastTransitionTime", "2024-05-01T10:05:00Z");
    assert_non_null(j);
    return j;
}

static int apply(struct kube_store *s, enum kube_kind k, enum kube_event_type t, json_t *o)
{
    int rc = kube_store_apply(s, k, t, o);
    json_decref(o);
    return rc;
}

static void test_extract_deployment(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED,
                           deployment("ml", "llama", "10", true, "llama")),
                     1);
    const struct kube_deployment *d = kube_store_deployment(s, "ml", "llama");
    assert_non_null(d);
    assert_string_equal(d->uid, "u-1");
    assert_string_equal(d->resource_version, "10");
    assert_int_equal(d->generation, 3);
    assert_int_equal(d->observed_generation, 3);
    assert_int_equal(d->created_ms, 1714557600000LL);
    assert_int_equal(d->spec_replicas, 4);
    assert_int_equal(d->ready_replicas, 3);
    assert_int_equal(d->status_replicas, 4);
    assert_int_equal(d->http_port, 8000);
    assert_int_equal(d->metrics_port, 9090);
    assert_int_equal(d->sole_port, 0); /* two ports */
    assert_int_equal(d->gpus_per_replica, 3);
    /* Only gpuscaler.io/ annotations; every label (the external metrics API
     * serves them as metricLabels), sorted by key. */
    assert_int_equal(d->annotations.n, 2);
    assert_string_equal(kube_labels_get(&d->annotations, "gpuscaler.io/min"), "1");
    assert_null(kube_labels_get(&d->annotations, "kubectl.kubernetes.io/last-applied-configuration"));
    assert_int_equal(d->labels.n, 3);
    assert_string_equal(kube_labels_get(&d->labels, "scaledobject.keda.sh/name"), "so");
    assert_string_equal(kube_labels_get(&d->labels, "app"), "llama");
    assert_string_equal(kube_labels_get(&d->labels, "gpuscaler.io/tier"), "gold");
    assert_string_equal(d->labels.items[0].key, "app");
    assert_int_equal(d->selector.nmatch, 1);
    /* Same resourceVersion again (a relist): no change. */
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED,
                           deployment("ml", "llama", "10", true, "llama")),
                     0);
    /* A label edit is picked up (metricLabels follow the Deployment). */
    json_t *relabelled = deployment("ml", "llama", "12", true, "llama");
    json_object_set_new(json_object_get(json_object_get(relabelled, "metadata"), "labels"),
                        "team", json_string("ml-infra"));
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, relabelled), 1);
    d = kube_store_deployment(s, "ml", "llama");
    assert_int_equal(d->labels.n, 4);
    assert_string_equal(kube_labels_get(&d->labels, "team"), "ml-infra");
    /* An annotation value with a NUL byte (\u0000 in the API server's JSON)
     * is kept whole, the NUL as U+FFFD: not read as the value before it. */
    json_t *nul = deployment("ml", "llama", "13", true, "llama");
    json_object_set_new(json_object_get(json_object_get(nul, "metadata"), "annotations"),
                        "gpuscaler.io/min-replicas", json_stringn("3\0x", 3));
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, nul), 1);
    d = kube_store_deployment(s, "ml", "llama");
    assert_string_equal(kube_labels_get(&d->annotations, "gpuscaler.io/min-replicas"),
                        "3\xef\xbf\xbdx");
    /* Missing name: rejected, nothing changes. */
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED,
                           json_pack("{s:{s:s}}", "metadata", "namespace", "ml")),
                     -EINVAL);
    /* spec.replicas absent defaults to 1. */
    json_t *j = deployment("ml", "other", "11", true, "o");
    json_object_del(json_object_get(j, "spec"), "replicas");
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, j), 1);
    assert_int_equal(kube_store_deployment(s, "ml", "other")->spec_replicas, 1);
    kube_store_free(s);
}

static void test_tracking_transitions(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    size_t n;
    /* Untracked: not stored at all. */
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED,
                           deployment("ml", "web", "1", false, "web")),
                     0);
    assert_null(kube_store_deployment(s, "ml", "web"));
    kube_store_deployments(s, &n);
    assert_int_equal(n, 0);
    /* Its pods are kept, so when it becomes tracked they are there at once. */
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("ml", "web-1", "2", "web", true)), 1);
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED,
                           deployment("ml", "web", "3", true, "web")),
                     1);
    const struct kube_deployment *d = kube_store_deployment(s, "ml", "web");
    assert_non_null(d);
    const struct kube_pod *const *pods = kube_store_deployment_pods(s, d, &n);
    assert_int_equal(n, 1);
    assert_string_equal(pods[0]->name, "web-1");
    /* Annotation removed: dropped. */
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED,
                           deployment("ml", "web", "4", false, "web")),
                     1);
    assert_null(kube_store_deployment(s, "ml", "web"));
    /* Deleting an unknown deployment is not a change. */
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_DELETED,
                           deployment("ml", "web", "5", false, "web")),
                     0);
    kube_store_free(s);
}

static void test_extract_pod(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("ml", "p1", "1", "a", true)), 1);
    const struct kube_pod *p = kube_store_pod(s, "ml", "p1");
    assert_non_null(p);
    assert_string_equal(p->ns, "ml");
    assert_string_equal(p->ip, "10.1.2.3");
    assert_int_equal(p->phase, KUBE_POD_RUNNING);
    assert_true(p->ready);
    assert_int_equal(p->ready_transition_ms, 1714557900000LL);
    assert_int_equal(p->created_ms, 1714557600250LL);
    assert_false(p->deleting);
    assert_int_equal(p->gpus, 1);
    assert_int_equal(p->metrics_port, 8000); /* no "metrics" port: falls back to "http" */
    assert_int_equal(p->ports.n, 1); /* the named ports, for metrics-port naming one */
    assert_string_equal(kube_labels_get(&p->ports, "http"), "8000");
    assert_null(kube_labels_get(&p->ports, "metrics"));
    /* every container's named ports; unnamed and out-of-range ones are left out */
    json_t *two = pod("ml", "p2", "1", "a", true);
    json_t *cs = json_object_get(json_object_get(two, "spec"), "containers");
    json_array_append_new(cs, json_pack("{s:s,s:[{s:s,s:i},{s:i},{s:s,s:i},{s:s,s:i}]}",
                                        "name", "sidecar", "ports", "name", "prom",
                                        "containerPort", 9090, "containerPort", 7000, "name",
                                        "bad", "containerPort", 70000, "name", "http",
                                        "containerPort", 9100));
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, two), 1);
    const struct kube_pod *p2 = kube_store_pod(s, "ml", "p2");
    assert_non_null(p2);
    assert_int_equal(p2->ports.n, 2);
    /* the sidecar's "http" too (the API server only warns): the first container's */
    assert_string_equal(kube_labels_get(&p2->ports, "http"), "8000");
    assert_string_equal(kube_labels_get(&p2->ports, "prom"), "9090");
    assert_null(kube_labels_get(&p2->ports, "bad"));
    assert_int_equal(p2->metrics_port, 8000); /* "http"; several ports, so no sole one */
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod("ml", "p2", "2", "a", true)),
                     1);
    /* no port named metrics or http: the only container port, named or not (vLLM's own
     * manifests leave it unnamed); none when there are two */
    const char *names[] = {NULL, "api"};
    for (size_t i = 0; i < 2; i++) {
        json_t *one = pod("ml", "p3", "1", "a", true);
        json_t *c0 = json_array_get(json_object_get(json_object_get(one, "spec"), "containers"),
                                    0);
        json_object_set_new(c0, "ports",
                            names[i] ? json_pack("[{s:s,s:i}]", "name", names[i],
                                                 "containerPort", 8080)
                                     : json_pack("[{s:i}]", "containerPort", 8080));
        assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, one), 1);
        assert_int_equal(kube_store_pod(s, "ml", "p3")->metrics_port, 8080);
        json_t *more = pod("ml", "p3", "2", "a", true);
        c0 = json_array_get(json_object_get(json_object_get(more, "spec"), "containers"), 0);
        json_object_set_new(c0, "ports", json_pack("[{s:i},{s:i}]", "containerPort", 8080,
                                                   "containerPort", 8081));
        assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED, more), 1);
        assert_int_equal(kube_store_pod(s, "ml", "p3")->metrics_port, 0);
        assert_int_equal(
            apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod("ml", "p3", "3", "a", true)), 1);
    }
    assert_int_equal(p->labels.n, 2);
    assert_string_equal(kube_labels_get(&p->labels, "pod-template-hash"), "abc123");
    json_t *j = pod("ml", "p1", "2", "a", false);
    json_object_set_new(json_object_get(j, "metadata"), "deletionTimestamp",
                        json_string("2024-05-01T11:00:00Z"));
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED, j), 1);
    assert_true(p == kube_store_pod(s, "ml", "p1")); /* updated in place */
    assert_true(p->deleting);
    assert_false(p->ready);
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod("ml", "p1", "3", "a", false)), 1);
    assert_null(kube_store_pod(s, "ml", "p1"));
    assert_int_equal(kube_store_npods(s), 0);
    assert_int_equal(kube_store_interned(s), 0); /* every interned string released */
    kube_store_free(s);
}

/* A pod spec's GPUs count as the scheduler counts its effective request:
 * per resource, the larger of app containers plus native sidecars
 * (initContainers with restartPolicy Always) and each plain init container
 * plus the sidecars started before it; a sidecar's named port serves, a plain
 * init container's does not. */
static void test_extract_sidecars(void **state)
{
    (void)state;
#define C(gpu, n) "{\"name\":\"c\",\"resources\":{\"limits\":{\"" gpu "\":" #n "}}}"
#define SIDE(gpu, n)                                                                          \
    "{\"name\":\"s\",\"restartPolicy\":\"Always\",\"resources\":{\"limits\":{\"" gpu     \
    "\":" #n "}}}"
#define NV "nvidia.com/gpu"
#define AMD "amd.com/gpu"
    static const struct {
        const char *containers, *inits;
        int gpus;
    } cases[] = {
        {"[" C(NV, 1) "]", "[]", 1},
        {"[" C(NV, 1) "]", "[" C(NV, 2) "]", 2},             /* an init container alone */
        {"[" C(NV, 1) "]", "[" SIDE(NV, 1) "]", 2},          /* a sidecar runs beside */
        {"[" C(NV, 1) "]", "[" SIDE(NV, 1) "," C(NV, 1) "]", 2},
        {"[" C(NV, 0) "]", "[" SIDE(NV, 1) "," C(NV, 3) "]", 4}, /* 3 + the sidecar before */
        {"[" C(NV, 0) "]", "[" C(NV, 3) "," SIDE(NV, 1) "]", 3}, /* started after: not */
        {"[" C(NV, 1) "]", "[" C(AMD, 2) "]", 3},            /* the max is per resource */
        {"[" C(NV, 1) "]", "[" SIDE(AMD, 1) "," SIDE(NV, 1) "]", 3},
        {"[" C(NV, 1) "]", "[{\"restartPolicy\":\"Never\",\"resources\":{\"limits\":{"
                           "\"nvidia.com/gpu\":2}}}]", 2}, /* not Always: a plain one */
    };
    struct kube_store *s = kube_store_new();
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        json_t *containers = json_loads(cases[i].containers, 0, NULL);
        json_t *inits = json_loads(cases[i].inits, 0, NULL);
        assert_non_null(containers);
        assert_non_null(inits);
        json_t *j = pod("ml", "ps", "1", "a", true);
        json_t *spec = json_object_get(j, "spec");
        json_object_set_new(spec, "containers", containers);
        json_object_set(spec, "initContainers", inits);
        assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, j), 1);
        if (kube_store_pod(s, "ml", "ps")->gpus != cases[i].gpus)
            fail_msg("case %zu: pod gpus %d, want %d", i, kube_store_pod(s, "ml", "ps")->gpus,
                     cases[i].gpus);
        /* a Deployment's template counts the same way */
        json_t *d = deployment("ml", "ds", "1", true, "a");
        json_t *tspec = json_object_get(json_object_get(json_object_get(d, "spec"), "template"),
                                        "spec");
        json_object_set_new(tspec, "containers", json_loads(cases[i].containers, 0, NULL));
        json_object_set_new(tspec, "initContainers", inits);
        assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, d), 1);
        if (kube_store_deployment(s, "ml", "ds")->gpus_per_replica != cases[i].gpus)
            fail_msg("case %zu: deployment gpus %d, want %d", i,
                     kube_store_deployment(s, "ml", "ds")->gpus_per_replica, cases[i].gpus);
        assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod("ml", "ps", "2", "a", true)),
                         1);
        assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_DELETED,
                               deployment("ml", "ds", "2", true, "a")),
                         1);
    }
#undef C
#undef SIDE
#undef NV
#undef AMD
    /* ports: the sidecar's "metrics" serves; the plain init container's does not; the app
     * container's "http" wins over the sidecar's, and is what is scraped: an exporter or log
     * shipper sidecar's "metrics" is not the server's (it was scraped on 9400) */
    const char *inits = "[{\"name\":\"setup\",\"ports\":[{\"name\":\"metrics\","
                        "\"containerPort\":7000},{\"name\":\"init\",\"containerPort\":7001}]},"
                        "{\"name\":\"exporter\",\"restartPolicy\":\"Always\",\"ports\":["
                        "{\"name\":\"metrics\",\"containerPort\":9400},"
                        "{\"name\":\"http\",\"containerPort\":9401}]}]";
    json_t *j = pod("ml", "pp", "1", "a", true);
    json_object_set_new(json_object_get(j, "spec"), "initContainers", json_loads(inits, 0, NULL));
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, j), 1);
    const struct kube_pod *p = kube_store_pod(s, "ml", "pp");
    assert_int_equal(p->metrics_port, 8000);
    assert_string_equal(kube_labels_get(&p->ports, "metrics"), "9400");
    assert_string_equal(kube_labels_get(&p->ports, "http"), "8000");
    assert_null(kube_labels_get(&p->ports, "init"));
    json_t *d = deployment("ml", "dp", "1", true, "a");
    json_t *tspec = json_object_get(json_object_get(json_object_get(d, "spec"), "template"),
                                    "spec");
    json_t *c0 = json_array_get(json_object_get(tspec, "containers"), 0);
    json_object_set_new(c0, "ports", json_pack("[{s:i}]", "containerPort", 8000));
    json_object_set_new(tspec, "initContainers", json_loads(inits, 0, NULL));
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, d), 1);
    const struct kube_deployment *dep = kube_store_deployment(s, "ml", "dp");
    assert_int_equal(dep->metrics_port, 9400); /* no app port has a name: the sidecar's */
    assert_int_equal(dep->http_port, 9401);
    assert_int_equal(dep->sole_port, 8000); /* the sidecar's ports are not the server's */
    /* an app container's "http" beside a sidecar's "metrics": the app's */
    d = deployment("ml", "dq", "1", true, "a");
    tspec = json_object_get(json_object_get(json_object_get(d, "spec"), "template"), "spec");
    c0 = json_array_get(json_object_get(tspec, "containers"), 0);
    json_object_set_new(c0, "ports", json_pack("[{s:s,s:i}]", "name", "http", "containerPort",
                                               8000));
    json_object_set_new(tspec, "initContainers", json_loads(inits, 0, NULL));
    assert_int_equal(apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, d), 1);
    dep = kube_store_deployment(s, "ml", "dq");
    assert_int_equal(dep->metrics_port, 0);
    assert_int_equal(dep->http_port, 8000);
    kube_store_free(s);
}

/* The PodScheduled condition: when the pod was bound (the scheduling delay
 * from creation), and whether the scheduler said no node has its GPUs. */
static json_t *pod_scheduled(const char *status, const char *reason, const char *msg)
{
    json_t *j = pod("ml", "p2", "1", "a", false);
    json_t *conds = json_object_get(json_object_get(j, "status"), "conditions");
    json_t *c = json_array_get(conds, 0); /* PodScheduled */
    json_object_set_new(c, "status", json_string(status));
    json_object_set_new(c, "lastTransitionTime", json_string("2024-05-01T10:01:30Z"));
    if (reason)
        json_object_set_new(c, "reason", json_string(reason));
    if (msg)
        json_object_set_new(c, "message", json_string(msg));
    return j;
}

/* A container that waits for a reason that lasts (a crash loop, an image that
 * will not pull, a missing Secret) makes the pod failing; the first such
 * container counts, init containers first; transient reasons do not. */
static json_t *pod_waiting(const char *list, const char *reason, const char *list2,
                           const char *reason2)
{
    json_t *j = pod("ml", "p3", "1", "a", false);
    json_t *st = json_object_get(j, "status");
    const char *lists[2] = {list, list2}, *reasons[2] = {reason, reason2};
    for (int i = 0; i < 2; i++) {
        if (!lists[i])
            continue;
        json_t *arr = json_object_get(st, lists[i]);
        if (!arr) {
            arr = json_array();
            json_object_set_new(st, lists[i], arr);
        }
        json_t *state = reasons[i] ? json_pack("{s:{s:s,s:s}}", "waiting", "reason", reasons[i],
                                               "message", "back-off 40s restarting failed")
                                   : json_pack("{s:{s:s}}", "running", "startedAt",
                                               "2024-05-01T10:02:00Z");
        json_array_append_new(arr, json_pack("{s:s,s:b,s:i,s:o}", "name", "c", "ready", 0,
                                             "restartCount", 3, "state", state));
    }
    return j;
}

static void test_extract_pod_failing(void **state)
{
    (void)state;
    static const struct {
        const char *list, *reason, *list2, *reason2;
        int failing; /* enum kube_pod_failing */
    } rows[] = {
        {"containerStatuses", "CrashLoopBackOff", NULL, NULL, KUBE_FAILING_CRASH_LOOP},
        {"containerStatuses", "ImagePullBackOff", NULL, NULL, KUBE_FAILING_IMAGE_PULL},
        {"containerStatuses", "InvalidImageName", NULL, NULL, KUBE_FAILING_INVALID_IMAGE},
        {"containerStatuses", "ErrImageNeverPull", NULL, NULL, KUBE_FAILING_NEVER_PULL},
        {"containerStatuses", "CreateContainerConfigError", NULL, NULL, KUBE_FAILING_CONFIG},
        /* an init container that crash-loops holds the pod in Init */
        {"initContainerStatuses", "CrashLoopBackOff", NULL, NULL, KUBE_FAILING_CRASH_LOOP},
        /* init containers first */
        {"initContainerStatuses", "ImagePullBackOff", "containerStatuses", "CrashLoopBackOff",
         KUBE_FAILING_IMAGE_PULL},
        /* a sidecar that runs, and a server that crash-loops */
        {"containerStatuses", NULL, "containerStatuses", "CrashLoopBackOff",
         KUBE_FAILING_CRASH_LOOP},
        /* first attempts the next one may pass, and a start in progress */
        {"containerStatuses", "ErrImagePull", NULL, NULL, KUBE_FAILING_NONE},
        {"containerStatuses", "CreateContainerError", NULL, NULL, KUBE_FAILING_NONE},
        {"containerStatuses", "ContainerCreating", NULL, NULL, KUBE_FAILING_NONE},
        {"containerStatuses", "PodInitializing", NULL, NULL, KUBE_FAILING_NONE},
        {"containerStatuses", NULL, NULL, NULL, KUBE_FAILING_NONE},
        /* the reason's case matters, as it does to kubectl */
        {"containerStatuses", "crashloopbackoff", NULL, NULL, KUBE_FAILING_NONE},
        {NULL, NULL, NULL, NULL, KUBE_FAILING_NONE},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct kube_store *s = kube_store_new();
        assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
                               pod_waiting(rows[i].list, rows[i].reason, rows[i].list2,
                                           rows[i].reason2)),
                         1);
        const struct kube_pod *p = kube_store_pod(s, "ml", "p3");
        assert_non_null(p);
        if (p->failing != rows[i].failing)
            fail_msg("row %zu: failing %d, want %d", i, p->failing, rows[i].failing);
        kube_store_free(s);
    }
    assert_string_equal(kube_pod_failing_name(KUBE_FAILING_CRASH_LOOP), "CrashLoopBackOff");
    assert_string_equal(kube_pod_failing_name(KUBE_FAILING_CONFIG),
                        "CreateContainerConfigError");
    assert_string_equal(kube_pod_failing_name(KUBE_FAILING_NONE), "");
    assert_string_equal(kube_pod_failing_name((enum kube_pod_failing)200), "");
    /* wrong types are no reason: a string list, a number reason */
    struct kube_store *s = kube_store_new();
    json_t *j = pod("ml", "p3", "1", "a", false);
    json_object_set_new(json_object_get(j, "status"), "containerStatuses",
                        json_pack("[s,{s:{s:{s:i}}}]", "x", "state", "waiting", "reason", 7));
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, j), 1);
    assert_int_equal(kube_store_pod(s, "ml", "p3")->failing, KUBE_FAILING_NONE);
    /* the crash loop ends: the next update clears it */
    j = pod_waiting("containerStatuses", "CrashLoopBackOff", NULL, NULL);
    json_object_set_new(json_object_get(j, "metadata"), "resourceVersion", json_string("2"));
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED, j), 1);
    assert_int_equal(kube_store_pod(s, "ml", "p3")->failing, KUBE_FAILING_CRASH_LOOP);
    j = pod_waiting("containerStatuses", NULL, NULL, NULL);
    json_object_set_new(json_object_get(j, "metadata"), "resourceVersion", json_string("3"));
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED, j), 1);
    assert_int_equal(kube_store_pod(s, "ml", "p3")->failing, KUBE_FAILING_NONE);
    kube_store_free(s);
}

static void test_extract_pod_scheduling(void **state)
{
    (void)state;
    static const struct {
        const char *status, *reason, *msg;
        int unschedulable_gpu; /* enum kube_gpu_resource */
        int64_t scheduled_ms;
    } rows[] = {
        /* bound 90 s after creation */
        {"True", NULL, NULL, KUBE_GPU_NONE, 1714557690000LL},
        /* the real scheduler's words, NVIDIA and AMD */
        {"False", "Unschedulable",
         "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are "
         "available: 1 No preemption victims found for incoming pod.",
         KUBE_GPU_NVIDIA, 0},
        {"False", "Unschedulable", "0/3 nodes are available: 3 Insufficient amd.com/gpu.",
         KUBE_GPU_AMD, 0},
        /* unschedulable for something else: not a GPU shortage */
        {"False", "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.", KUBE_GPU_NONE,
         0},
        /* a GPU named, but not the Unschedulable reason (a scheduling gate) */
        {"False", "SchedulingGated", "nvidia.com/gpu", KUBE_GPU_NONE, 0},
        {"False", "Unschedulable", NULL, KUBE_GPU_NONE, 0},
        {"Unknown", "Unschedulable", "Insufficient nvidia.com/gpu", KUBE_GPU_NONE, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct kube_store *s = kube_store_new();
        assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
                               pod_scheduled(rows[i].status, rows[i].reason, rows[i].msg)),
                         1);
        const struct kube_pod *p = kube_store_pod(s, "ml", "p2");
        assert_non_null(p);
        if (p->unschedulable_gpu != rows[i].unschedulable_gpu ||
            p->scheduled_ms != rows[i].scheduled_ms)
            fail_msg("row %zu: unschedulable_gpu %d scheduled_ms %lld", i, p->unschedulable_gpu,
                     (long long)p->scheduled_ms);
        kube_store_free(s);
    }
    /* a bound pod loses the flag on its next update (the condition turned True) */
    struct kube_store *s = kube_store_new();
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
                           pod_scheduled("False", "Unschedulable",
                                         "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")),
                     1);
    assert_int_equal(kube_store_pod(s, "ml", "p2")->unschedulable_gpu, KUBE_GPU_NVIDIA);
    assert_string_equal(kube_gpu_resource_name(KUBE_GPU_NVIDIA), "nvidia.com/gpu");
    assert_string_equal(kube_gpu_resource_name(KUBE_GPU_AMD), "amd.com/gpu");
    json_t *j = pod_scheduled("True", NULL, NULL);
    json_object_set_new(json_object_get(j, "metadata"), "resourceVersion", json_string("2"));
    assert_int_equal(apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED, j), 1);
    assert_int_equal(kube_store_pod(s, "ml", "p2")->unschedulable_gpu, KUBE_GPU_NONE);
    assert_int_equal(kube_store_pod(s, "ml", "p2")->scheduled_ms, 1714557690000LL);
    kube_store_free(s);
}

static void test_index(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    size_t n;
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment("ml", "llama", "1", true, "llama"));
    const struct kube_deployment *d = kube_store_deployment(s, "ml", "llama");
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("ml", "l1", "2", "llama", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("ml", "l2", "3", "llama", false));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("ml", "w1", "4", "web", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("other", "l9", "5", "llama", true));
    kube_store_deployment_pods(s, d, &n);
    assert_int_equal(n, 2); /* same namespace only */
    size_t rebuilds = kube_store_index_rebuilds(s);
    kube_store_deployment_pods(s, d, &n);
    assert_int_equal(kube_store_index_rebuilds(s), rebuilds); /* read again: no rebuild */
    /* A status-only change keeps the index. */
    apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED, pod("ml", "l2", "6", "llama", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED, pod("ml", "w1", "7", "web", false));
    kube_store_deployment_pods(s, d, &n);
    assert_int_equal(kube_store_index_rebuilds(s), rebuilds);
    /* A label change into the selector does rebuild. */
    apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED, pod("ml", "w1", "8", "llama", true));
    const struct kube_pod *const *pods = kube_store_deployment_pods(s, d, &n);
    assert_int_equal(n, 3);
    assert_int_equal(kube_store_index_rebuilds(s), rebuilds + 1);
    /* Deleting a pod drops it. */
    apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod("ml", "l1", "9", "llama", true));
    pods = kube_store_deployment_pods(s, d, &n);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_string_not_equal(pods[i]->name, "l1");
    /* A selector change re-evaluates. */
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, deployment("ml", "llama", "10", true, "web"));
    d = kube_store_deployment(s, "ml", "llama");
    kube_store_deployment_pods(s, d, &n);
    assert_int_equal(n, 0);
    kube_store_free(s);
}

/* A pod with a controller ownerReference (kind/name; controller false:
 * a plain reference) */
static json_t *owned(json_t *pod, const char *kind, const char *name, bool controller)
{
    json_t *refs = json_pack("[{s:s,s:s,s:s,s:s,s:b}]", "apiVersion", "apps/v1", "kind", kind,
                             "name", name, "uid", "u-rs", "controller", controller);
    assert_non_null(refs);
    json_object_set_new(json_object_get(pod, "metadata"), "ownerReferences", refs);
    return pod;
}

static bool has_pod(struct kube_store *s, const char *dep, const char *pod)
{
    size_t n;
    const struct kube_pod *const *pods =
        kube_store_deployment_pods(s, kube_store_deployment(s, "ml", dep), &n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(pods[i]->name, pod) == 0)
            return true;
    return false;
}

/* Two Deployments whose selectors overlap (a canary beside its stable one,
 * both selecting app=llama): each has the pods its ReplicaSets control; a
 * pod no controller owns counts for every selector that matches it. */
static void test_owned_pods(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment("ml", "llama", "1", true, "llama"));
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED,
          deployment("ml", "llama-canary", "2", true, "llama"));
    /* the controller's interned name is given back with its pod, changed or deleted */
    size_t interned = kube_store_interned(s);
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "tmp", "2", "llama", true), "ReplicaSet", "llama-tmp1", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED,
          owned(pod("ml", "tmp", "3", "llama", true), "ReplicaSet", "llama-tmp2", true));
    assert_true(kube_store_interned(s) > interned);
    apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod("ml", "tmp", "4", "llama", true));
    assert_int_equal(kube_store_interned(s), interned);
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "stable", "3", "llama", true), "ReplicaSet", "llama-abc123", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "canary", "4", "llama", true), "ReplicaSet", "llama-canary-abc123",
                true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("ml", "orphan", "5", "llama", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "plainref", "6", "llama", true), "ReplicaSet", "llama-abc123", false));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "sts", "7", "llama", true), "StatefulSet", "llama", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "nohash", "8", "llama", true), "ReplicaSet", "llama-", true));
    /* a ReplicaSet whose name's hash is not its pods' pod-template-hash */
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "otherhash", "10", "llama", true), "ReplicaSet", "llama-def456", true));
    assert_true(has_pod(s, "llama", "stable"));
    assert_false(has_pod(s, "llama", "canary")); /* "canary-7c9b" is no hash */
    assert_true(has_pod(s, "llama-canary", "canary"));
    assert_false(has_pod(s, "llama-canary", "stable"));
    for (int i = 0; i < 2; i++) {
        const char *dep = i ? "llama-canary" : "llama";
        assert_true(has_pod(s, dep, "orphan"));
        assert_true(has_pod(s, dep, "plainref"));
        assert_false(has_pod(s, dep, "sts"));
        assert_false(has_pod(s, dep, "nohash"));
        assert_false(has_pod(s, dep, "otherhash"));
    }
    /* adopted by the canary's ReplicaSet, same labels: it leaves the stable one */
    apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED,
          owned(pod("ml", "orphan", "9", "llama", true), "ReplicaSet", "llama-canary-abc123",
                true));
    assert_false(has_pod(s, "llama", "orphan"));
    assert_true(has_pod(s, "llama-canary", "orphan"));
    /* "renamed" adopted the ReplicaSet of a Deployment deleted with --cascade=orphan:
     * none of its pods is its own by name, and it has replicas: counted by the selector */
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED,
          deployment("ml", "renamed", "11", true, "ren"));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "r1", "12", "ren", true), "ReplicaSet", "old-abc123", true));
    assert_true(has_pod(s, "renamed", "r1"));
    /* ... but not once one of its own exists (a rollout's new ReplicaSet) */
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "r2", "13", "ren", true), "ReplicaSet", "renamed-abc123", true));
    assert_true(has_pod(s, "renamed", "r2"));
    assert_false(has_pod(s, "renamed", "r1"));
    /* at 0 replicas it has no pods: a canary's are not lent to it */
    json_t *zero = deployment("ml", "llama", "14", true, "llama");
    json_object_set_new(json_object_get(zero, "status"), "replicas", json_integer(0));
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, zero);
    apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod("ml", "stable", "15", "llama", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod("ml", "plainref", "16", "llama", true));
    assert_false(has_pod(s, "llama", "canary"));
    /* its status alone going to 0 and back re-reads the index */
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment("ml", "solo", "17", true, "solo"));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED,
          owned(pod("ml", "s1", "18", "solo", true), "ReplicaSet", "gone-abc123", true));
    assert_true(has_pod(s, "solo", "s1"));
    zero = deployment("ml", "solo", "19", true, "solo");
    json_object_set_new(json_object_get(zero, "status"), "replicas", json_integer(0));
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, zero);
    assert_false(has_pod(s, "solo", "s1"));
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, deployment("ml", "solo", "20", true, "solo"));
    assert_true(has_pod(s, "solo", "s1"));
    kube_store_free(s);
}

static void test_relist_sweep(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    size_t n;
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("a", "p1", "1", "x", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("a", "p2", "2", "x", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("b", "p3", "3", "x", true));
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment("a", "d1", "4", true, "x"));
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment("a", "d2", "5", true, "x"));
    /* Relist of namespace a: p2 and d2 are gone; namespace b is untouched. */
    kube_store_list_begin(s, KUBE_KIND_POD, "a");
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("a", "p1", "1", "x", true)); /* unchanged rv */
    kube_store_list_end(s, KUBE_KIND_POD, "a");
    assert_non_null(kube_store_pod(s, "a", "p1"));
    assert_null(kube_store_pod(s, "a", "p2"));
    assert_non_null(kube_store_pod(s, "b", "p3"));
    kube_store_list_begin(s, KUBE_KIND_DEPLOYMENT, NULL);
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment("a", "d1", "6", true, "x"));
    kube_store_list_end(s, KUBE_KIND_DEPLOYMENT, NULL);
    kube_store_deployments(s, &n);
    assert_int_equal(n, 1);
    assert_null(kube_store_deployment(s, "a", "d2"));
    kube_store_deployment_pods(s, kube_store_deployment(s, "a", "d1"), &n);
    assert_int_equal(n, 1);
    /* A relist of all pods that returns nothing empties the cache. */
    kube_store_list_begin(s, KUBE_KIND_POD, NULL);
    kube_store_list_end(s, KUBE_KIND_POD, NULL);
    assert_int_equal(kube_store_npods(s), 0);
    kube_store_deployment_pods(s, kube_store_deployment(s, "a", "d1"), &n);
    assert_int_equal(n, 0);
    kube_store_free(s);
}

static bool pod_ready(const struct kube_store *s, const char *ns, const char *name)
{
    const struct kube_pod *p = kube_store_pod(s, ns, name);
    assert_non_null(p);
    return p->ready;
}

static int stage(struct kube_store_stage *st, json_t *o)
{
    int rc = kube_store_stage_add(st, o);
    json_decref(o);
    return rc;
}

/* A staged relist is applied at once, as client-go's store.Replace: between
 * its pages a reader sees the store as it was (a changed pod unchanged, a new
 * one absent, a deleted one present), and an aborted one changes nothing.
 * Applied page by page, a reader saw p1 changed and p4 added while p3,
 * deleted, was still there. */
static void test_staged_relist(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    size_t n;
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("a", "p1", "1", "x", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("a", "p2", "2", "x", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("a", "p3", "3", "y", true));
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("b", "q1", "9", "x", true));
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment("a", "d", "5", true, "x"));
    const struct kube_deployment *d = kube_store_deployment(s, "a", "d");
    kube_store_deployment_pods(s, d, &n);
    assert_int_equal(n, 2);

    struct kube_store_stage *st = kube_store_stage_new(s, KUBE_KIND_POD, "a");
    /* page 1: p1 changed, p4 new */
    assert_int_equal(stage(st, pod("a", "p1", "11", "x", false)), 1);
    assert_int_equal(stage(st, pod("a", "p4", "4", "x", true)), 1);
    assert_true(pod_ready(s, "a", "p1"));
    assert_null(kube_store_pod(s, "a", "p4"));
    kube_store_deployment_pods(s, d, &n);
    assert_int_equal(n, 2);
    /* page 2: p2 unchanged (only marked, not held); p3 is gone */
    assert_int_equal(stage(st, pod("a", "p2", "2", "x", true)), 0);
    assert_int_equal(kube_store_stage_count(st), 2);
    assert_int_equal(kube_store_stage_unchanged(st), 1);
    assert_true(kube_store_stage_memory(st) > 0);
    assert_non_null(kube_store_pod(s, "a", "p3"));
    assert_int_equal(kube_store_npods(s), 4);
    /* the last page is in: all at once */
    assert_int_equal(kube_store_stage_commit(st), 3); /* p1, p4, p3 */
    assert_false(pod_ready(s, "a", "p1"));
    assert_non_null(kube_store_pod(s, "a", "p4"));
    assert_null(kube_store_pod(s, "a", "p3"));
    assert_non_null(kube_store_pod(s, "a", "p2"));
    assert_non_null(kube_store_pod(s, "b", "q1")); /* another scope */
    kube_store_deployment_pods(s, d, &n);
    assert_int_equal(n, 3); /* the index follows */

    /* An aborted relist (a page failed, the list starts over) leaves all as it was. */
    st = kube_store_stage_new(s, KUBE_KIND_POD, "a");
    assert_int_equal(stage(st, pod("a", "p1", "12", "x", true)), 1);
    assert_int_equal(stage(st, pod("a", "p2", "2", "x", true)), 0);
    assert_int_equal(stage(st, pod("a", "p5", "5", "x", true)), 1);
    assert_int_equal(stage(st, json_pack("{s:{s:s}}", "metadata", "name", "nons")), -EINVAL);
    size_t interned = kube_store_interned(s);
    kube_store_stage_free(st);
    assert_true(kube_store_interned(s) <= interned);
    assert_false(pod_ready(s, "a", "p1"));
    assert_null(kube_store_pod(s, "a", "p5"));
    assert_int_equal(kube_store_npods(s), 4);
    /* ... and its marks do not keep what the next list lacks: p2 goes */
    st = kube_store_stage_new(s, KUBE_KIND_POD, "a");
    assert_int_equal(stage(st, pod("a", "p1", "11", "x", false)), 0);
    assert_int_equal(stage(st, pod("a", "p4", "4", "x", true)), 0);
    assert_int_equal(kube_store_stage_count(st), 0); /* nothing changed: nothing held */
    assert_int_equal(kube_store_stage_commit(st), 1);
    assert_null(kube_store_pod(s, "a", "p2"));
    assert_int_equal(kube_store_npods(s), 3);

    /* Deployments: a change, and one turned untracked, both at the commit. */
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment("a", "e", "6", true, "y"));
    unsigned changes = d->replicas_changes;
    st = kube_store_stage_new(s, KUBE_KIND_DEPLOYMENT, NULL);
    json_t *dj = deployment("a", "d", "7", true, "x");
    json_object_set_new(json_object_get(dj, "spec"), "replicas", json_integer(1));
    assert_int_equal(stage(st, dj), 1);
    assert_int_equal(stage(st, deployment("a", "e", "8", false, "y")), 0);
    assert_int_equal(kube_store_deployment(s, "a", "d")->spec_replicas, 4);
    assert_non_null(kube_store_deployment(s, "a", "e"));
    assert_int_equal(kube_store_stage_commit(st), 2);
    d = kube_store_deployment(s, "a", "d");
    assert_int_equal(d->spec_replicas, 1);
    assert_int_equal(d->replicas_changes, changes + 1);
    assert_null(kube_store_deployment(s, "a", "e"));
    kube_store_deployments(s, &n);
    assert_int_equal(n, 1);
    kube_store_free(s);
}

/* What a staged relist holds: the new and changed objects only. A relist of
 * 1,000 unchanged pods holds none, where staging them all would double the
 * cache for the length of the list. */
static void test_staged_relist_memory(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    char name[32], rv[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        snprintf(rv, sizeof(rv), "%d", i + 1);
        apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("a", name, rv, "x", true));
    }
    size_t store = kube_store_memory(s);
    struct kube_store_stage *st = kube_store_stage_new(s, KUBE_KIND_POD, NULL);
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        snprintf(rv, sizeof(rv), "%d", i + 1);
        stage(st, pod("a", name, rv, "x", true));
    }
    size_t same = kube_store_stage_memory(st);
    assert_true(same < 256);
    assert_int_equal(kube_store_stage_commit(st), 0);
    st = kube_store_stage_new(s, KUBE_KIND_POD, NULL);
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        snprintf(rv, sizeof(rv), "%d", i + 2000);
        stage(st, pod("a", name, rv, "x", true));
    }
    size_t changed = kube_store_stage_memory(st);
    print_message("store %zu B; stage of 1000 unchanged pods %zu B, of 1000 changed %zu B\n",
                  store, same, changed);
    assert_true(changed > 1000 * 100 && changed < store);
    assert_int_equal(kube_store_stage_commit(st), 1000);
    assert_int_equal(kube_store_npods(s), 1000);
    kube_store_free(s);
}

static json_t *deployment_at(const char *rv, int replicas, const char *note)
{
    json_t *j = deployment("a", "d", rv, true, "x");
    json_object_set_new(json_object_get(j, "spec"), "replicas", json_integer(replicas));
    json_object_set_new(json_object_get(json_object_get(j, "metadata"), "annotations"), "note",
                        json_string(note));
    return j;
}

/* The cache counts the changes of a Deployment's spec.replicas it sees: a
 * scale to 4 and back to 0 by hand shows, where the generation moves with
 * every annotation too (gpuscaler's status among them). */
static void test_replicas_changes(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment_at("1", 0, "a"));
    assert_true(kube_store_deployment(s, "a", "d")->replicas_changes == 0);
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, deployment_at("2", 0, "b"));
    assert_true(kube_store_deployment(s, "a", "d")->replicas_changes == 0); /* annotations */
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, deployment_at("3", 4, "b"));
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, deployment_at("4", 0, "b"));
    assert_true(kube_store_deployment(s, "a", "d")->replicas_changes == 2);
    /* a relist of the same object changes nothing */
    kube_store_list_begin(s, KUBE_KIND_DEPLOYMENT, NULL);
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment_at("4", 0, "b"));
    kube_store_list_end(s, KUBE_KIND_DEPLOYMENT, NULL);
    assert_true(kube_store_deployment(s, "a", "d")->replicas_changes == 2);
    kube_store_free(s);
}

/* Watching every namespace, one that comes and goes (a CI run's, a
 * preview's) leaves no record behind once its pods and Deployments are
 * gone, by events or by a relist's sweep; a namespace that is a list's
 * scope keeps its record (its relist stamps). */
static void test_namespace_churn(void **state)
{
    (void)state;
    struct kube_store *s = kube_store_new();
    char ns[32];
    kube_store_list_begin(s, KUBE_KIND_POD, "kept");
    kube_store_list_end(s, KUBE_KIND_POD, "kept");
    assert_int_equal(kube_store_namespaces(s), 1);
    for (int i = 0; i < 200; i++) {
        snprintf(ns, sizeof(ns), "ci-%d", i);
        apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment(ns, "d", "1", true, "x"));
        apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod(ns, "p1", "2", "x", true));
        apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod(ns, "p2", "3", "x", true));
    }
    assert_int_equal(kube_store_namespaces(s), 201);
    for (int i = 0; i < 100; i++) {
        snprintf(ns, sizeof(ns), "ci-%d", i);
        apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod(ns, "p1", "4", "x", true));
        apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_DELETED, deployment(ns, "d", "5", true, "x"));
        assert_int_equal(kube_store_namespaces(s), 201 - (size_t)i); /* p2 still there */
        apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod(ns, "p2", "6", "x", true));
        assert_int_equal(kube_store_namespaces(s), 200 - (size_t)i);
    }
    /* the rest vanish while not watched: the relists of all namespaces sweep them */
    kube_store_list_begin(s, KUBE_KIND_POD, NULL);
    kube_store_list_end(s, KUBE_KIND_POD, NULL);
    assert_int_equal(kube_store_namespaces(s), 101); /* their Deployments are still there */
    kube_store_list_begin(s, KUBE_KIND_DEPLOYMENT, NULL);
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment("ci-150", "d", "7", true, "x"));
    kube_store_list_end(s, KUBE_KIND_DEPLOYMENT, NULL);
    assert_int_equal(kube_store_namespaces(s), 2);
    /* a Deployment turned untracked is dropped, and its namespace with it */
    apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_MODIFIED, deployment("ci-150", "d", "8", false, "x"));
    assert_int_equal(kube_store_namespaces(s), 1);
    /* and another 200 come and go: the footprint does not grow (the tables
     * keep their size; 200 records left behind were 30 KB and more) */
    size_t after = kube_store_memory(s);
    for (int i = 0; i < 200; i++) {
        snprintf(ns, sizeof(ns), "preview-%d", i);
        apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment(ns, "d", "1", true, "x"));
        apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod(ns, "p1", "2", "x", true));
        apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod(ns, "p2", "3", "x", true));
    }
    assert_true(kube_store_memory(s) > after + 200 * 100);
    for (int i = 0; i < 200; i++) {
        snprintf(ns, sizeof(ns), "preview-%d", i);
        apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod(ns, "p1", "4", "x", true));
        apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod(ns, "p2", "5", "x", true));
        apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_DELETED, deployment(ns, "d", "6", true, "x"));
    }
    assert_int_equal(kube_store_namespaces(s), 1);
    assert_true(kube_store_memory(s) <= after);
    /* the kept scope's record still stamps its relists: a pod there is swept */
    apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod("kept", "p", "9", "x", true));
    kube_store_list_begin(s, KUBE_KIND_POD, "kept");
    kube_store_list_end(s, KUBE_KIND_POD, "kept");
    assert_null(kube_store_pod(s, "kept", "p"));
    assert_int_equal(kube_store_namespaces(s), 1);
    kube_store_free(s);
}

static void test_scale(void **state)
{
    (void)state;
    /* 1,000 tracked deployments and 10,000 pods over 10 namespaces. */
    struct kube_store *s = kube_store_new();
    clock_t t0 = clock();
    char ns[16], name[32], app[32], rv[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(ns, sizeof(ns), "ns%d", i % 10);
        snprintf(name, sizeof(name), "d%d", i);
        snprintf(app, sizeof(app), "app%d", i);
        snprintf(rv, sizeof(rv), "%d", i);
        apply(s, KUBE_KIND_DEPLOYMENT, KUBE_EV_ADDED, deployment(ns, name, rv, true, app));
    }
    for (int i = 0; i < 10000; i++) {
        snprintf(ns, sizeof(ns), "ns%d", (i / 10) % 10);
        snprintf(name, sizeof(name), "p%d", i);
        snprintf(app, sizeof(app), "app%d", i / 10);
        snprintf(rv, sizeof(rv), "%d", 5000 + i);
        apply(s, KUBE_KIND_POD, KUBE_EV_ADDED, pod(ns, name, rv, app, true));
    }
    size_t n, total = 0;
    const struct kube_deployment *const *ds = kube_store_deployments(s, &n);
    assert_int_equal(n, 1000);
    for (size_t i = 0; i < n; i++) {
        size_t np;
        kube_store_deployment_pods(s, ds[i], &np);
        total += np;
    }
    assert_int_equal(total, 10000);
    /* Labels are shared: ~1,000 app values + a few keys, not 20,000 strings. */
    assert_true(kube_store_interned(s) < 1100);
    /* A pod status change costs no index rebuild across the board. */
    size_t rebuilds = kube_store_index_rebuilds(s);
    apply(s, KUBE_KIND_POD, KUBE_EV_MODIFIED, pod("ns0", "p0", "99999", "app0", false));
    for (size_t i = 0; i < n; i++) {
        size_t np;
        kube_store_deployment_pods(s, ds[i], &np);
    }
    assert_int_equal(kube_store_index_rebuilds(s), rebuilds);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    print_message("scale: 1000 deployments + 10000 pods applied and indexed in %.2f s CPU\n", secs);
    /* the footprint gauge: a few hundred bytes per pod, back down when they go */
    size_t mem = kube_store_memory(s);
    print_message("scale: %zu bytes held (%zu per pod)\n", mem, mem / 10000);
    assert_true(mem > 10000 * sizeof(struct kube_pod) && mem < 10000 * 600);
    for (int i = 5000; i < 10000; i++) {
        snprintf(ns, sizeof(ns), "ns%d", (i / 10) % 10);
        snprintf(name, sizeof(name), "p%d", i);
        snprintf(app, sizeof(app), "app%d", i / 10);
        apply(s, KUBE_KIND_POD, KUBE_EV_DELETED, pod(ns, name, "1", app, true));
    }
    size_t half = kube_store_memory(s);
    assert_true(half < mem - 5000 * sizeof(struct kube_pod));
    kube_store_free(s);
}

static void test_parse_time(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int rc;
        int64_t ms;
    } cases[] = {
        {"1970-01-01T00:00:00Z", 0, 0},
        {"2024-05-01T10:00:00Z", 0, 1714557600000LL},
        {"2024-05-01T10:00:00.5Z", 0, 1714557600500LL},
        {"2024-05-01T10:00:00.123456789Z", 0, 1714557600123LL},
        {"2024-05-01T12:00:00+02:00", 0, 1714557600000LL},
        {"2024-05-01T08:30:00-01:30", 0, 1714557600000LL},
        {"2024-05-01 10:00:00Z", -EINVAL, 0},
        {"2024-05-01T10:00:00", -EINVAL, 0},
        {"2024-13-01T10:00:00Z", -EINVAL, 0},
        {"2024-05-01T10:00:00.Z", -EINVAL, 0},
        {"2024-05-01T10:00:00Zjunk", -EINVAL, 0},
        {"", -EINVAL, 0},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        int64_t ms = -1;
        int rc = kube_parse_time(cases[i].in, &ms);
        if (rc != cases[i].rc || (rc == 0 && ms != cases[i].ms))
            fail_msg("'%s': rc %d ms %lld", cases[i].in, rc, (long long)ms);
    }
    int64_t ms;
    assert_int_equal(kube_parse_time(NULL, &ms), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extract_deployment),
        cmocka_unit_test(test_tracking_transitions),
        cmocka_unit_test(test_extract_pod),
        cmocka_unit_test(test_extract_sidecars),
        cmocka_unit_test(test_extract_pod_failing),
        cmocka_unit_test(test_extract_pod_scheduling),
        cmocka_unit_test(test_index),
        cmocka_unit_test(test_owned_pods),
        cmocka_unit_test(test_relist_sweep),
        cmocka_unit_test(test_staged_relist),
        cmocka_unit_test(test_staged_relist_memory),
        cmocka_unit_test(test_namespace_churn),
        cmocka_unit_test(test_replicas_changes),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_parse_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

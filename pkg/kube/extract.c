/* SPDX-License-Identifier: Apache-2.0 */
/* kube/extract: turns Deployment and Pod JSON into the compact cache structs
 * (pure; fuzzed through fuzz-watch).
 *
 * Only the fields the controller needs are read; every field is optional and
 * a field of the wrong type counts as absent, so a strange object degrades to
 * zeros instead of failing the watch. Only metadata.namespace and
 * metadata.name are required. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store-int.h"

#define MAX_COUNT KUBE_MAX_COUNT

/* ---- time ------------------------------------------------------------------ */

static bool digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

int kube_parse_time(const char *s, int64_t *out_ms)
{
    int Y, M, D, h, m, sec;
    if (!s || strlen(s) < 20 || !digits(s, 4, &Y) || s[4] != '-' || !digits(s + 5, 2, &M) ||
        s[7] != '-' || !digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't') ||
        !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &m) || s[16] != ':' ||
        !digits(s + 17, 2, &sec))
        return -EINVAL;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
        return -EINVAL;
    const char *p = s + 19;
    int64_t frac_ms = 0;
    if (*p == '.') {
        p++;
        int n = 0;
        int64_t scale = 100;
        while (*p >= '0' && *p <= '9') {
            if (n < 3)
                frac_ms += (*p - '0') * scale;
            scale /= 10;
            p++;
            n++;
        }
        if (n == 0)
            return -EINVAL;
    }
    int64_t off_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return -EINVAL;
        off_s = (int64_t)(oh * 3600 + om * 60) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return -EINVAL;
    }
    if (*p)
        return -EINVAL;
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h,
                    .tm_min = m, .tm_sec = sec};
    time_t t = timegm(&tm);
    *out_ms = ((int64_t)t - off_s) * 1000 + frac_ms;
    return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

static const char *str_at(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static int64_t int_at(const json_t *o, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static int32_t clamp32(int64_t v)
{
    return v < 0 ? 0 : (v > MAX_COUNT ? MAX_COUNT : (int32_t)v);
}

static int64_t time_at(const json_t *o, const char *key)
{
    int64_t ms = 0;
    if (kube_parse_time(str_at(o, key), &ms) < 0)
        return 0;
    return ms;
}

/* An integer quantity (GPUs): JSON integer or a plain decimal string. */
static int64_t count_of(const json_t *v)
{
    if (json_is_integer(v))
        return json_integer_value(v);
    int64_t n;
    if (json_is_string(v) && util_parse_int64(json_string_value(v), &n) == 0)
        return n;
    return 0;
}

/* A native sidecar: an init container with restartPolicy Always (Kubernetes
 * 1.29+), which keeps running beside the app containers. */
static bool is_sidecar(const json_t *c)
{
    const char *rp = str_at(c, "restartPolicy");
    return rp && strcmp(rp, "Always") == 0;
}

/* The GPUs one container asks for, per resource (limits: an extended
 * resource's request defaults to, and must equal, its limit). */
struct gpu_req {
    int64_t nvidia, amd;
};

static struct gpu_req gpu_req_of(const json_t *c)
{
    json_t *lim = json_object_get(json_object_get(c, "resources"), "limits");
    int64_t n = count_of(json_object_get(lim, "nvidia.com/gpu"));
    int64_t a = count_of(json_object_get(lim, "amd.com/gpu"));
    return (struct gpu_req){n > 0 && n < MAX_COUNT ? n : 0, a > 0 && a < MAX_COUNT ? a : 0};
}

static void gpu_req_add(struct gpu_req *to, struct gpu_req r)
{
    to->nvidia += r.nvidia;
    to->amd += r.amd;
}

static void gpu_req_max(struct gpu_req *to, struct gpu_req r)
{
    to->nvidia = r.nvidia > to->nvidia ? r.nvidia : to->nvidia;
    to->amd = r.amd > to->amd ? r.amd : to->amd;
}

/* A pod spec's GPUs as the scheduler counts its effective request
 * (component-helpers' PodRequests): per resource, the larger of the app
 * containers plus every native sidecar, and each plain init container plus
 * the sidecars started before it. */
static int32_t gpus_of(const json_t *spec)
{
    struct gpu_req sum = {0}, sidecars = {0}, init = {0};
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(spec, "containers"), i, c)
        gpu_req_add(&sum, gpu_req_of(c));
    json_array_foreach(json_object_get(spec, "initContainers"), i, c) {
        struct gpu_req r = gpu_req_of(c);
        if (is_sidecar(c)) {
            gpu_req_add(&sum, r);
            gpu_req_add(&sidecars, r);
            r = sidecars;
        } else {
            gpu_req_add(&r, sidecars);
        }
        gpu_req_max(&init, r);
    }
    gpu_req_max(&sum, init);
    return clamp32(sum.nvidia + sum.amd);
}

const char *kube_gpu_resource_name(enum kube_gpu_resource r)
{
    return r == KUBE_GPU_NVIDIA ? "nvidia.com/gpu" : r == KUBE_GPU_AMD ? "amd.com/gpu" : "GPU";
}

/* A PodScheduled=False condition that says no node has the GPUs the pod
 * asks for: reason Unschedulable, a message naming a GPU resource. */
static uint8_t unschedulable_for_gpus(const json_t *cond)
{
    const char *reason = str_at(cond, "reason"), *msg = str_at(cond, "message");
    if (!reason || strcmp(reason, "Unschedulable") != 0 || !msg)
        return KUBE_GPU_NONE;
    if (strstr(msg, "nvidia.com/gpu"))
        return KUBE_GPU_NVIDIA;
    return strstr(msg, "amd.com/gpu") ? KUBE_GPU_AMD : KUBE_GPU_NONE;
}

static const char *const failing_names[] = {
    [KUBE_FAILING_NONE] = "",
    [KUBE_FAILING_CRASH_LOOP] = "CrashLoopBackOff",
    [KUBE_FAILING_IMAGE_PULL] = "ImagePullBackOff",
    [KUBE_FAILING_INVALID_IMAGE] = "InvalidImageName",
    [KUBE_FAILING_NEVER_PULL] = "ErrImageNeverPull",
    [KUBE_FAILING_CONFIG] = "CreateContainerConfigError",
};

const char *kube_pod_failing_name(enum kube_pod_failing f)
{
    return (size_t)f < UTIL_ARRAY_LEN(failing_names) ? failing_names[f] : "";
}

/* The first container status of the list waiting for a reason that lasts. */
static uint8_t failing_of(const json_t *statuses)
{
    size_t i;
    json_t *cs;
    json_array_foreach(statuses, i, cs) {
        const char *why = str_at(json_object_get(json_object_get(cs, "state"), "waiting"),
                                 "reason");
        for (size_t f = KUBE_FAILING_NONE + 1; why && f < UTIL_ARRAY_LEN(failing_names); f++)
            if (strcmp(why, failing_names[f]) == 0)
                return (uint8_t)f;
    }
    return KUBE_FAILING_NONE;
}

/* The containers that serve ports: the app containers, then the native
 * sidecars (plain init containers have exited before the pod is ready), in
 * the order a Service's named targetPort looks them up (FindPort). */
struct serving {
    const json_t *spec;
    int list;
    size_t i;
};

static const json_t *serving_next(struct serving *it)
{
    for (; it->list < 2; it->list++, it->i = 0) {
        const json_t *arr = json_object_get(it->spec, it->list ? "initContainers" : "containers");
        while (it->i < json_array_size(arr)) {
            const json_t *c = json_array_get(arr, it->i++);
            if (it->list == 0 || is_sidecar(c))
                return c;
        }
    }
    return NULL;
}

/* The port named name of the app containers (sidecars false) or of the
 * native sidecars (true), the first such; 0 none. */
static int32_t port_named(const json_t *spec, const char *name, bool sidecars)
{
    struct serving it = {.spec = spec};
    size_t j;
    const json_t *c;
    json_t *p;
    while ((c = serving_next(&it))) {
        if ((it.list == 1) != sidecars)
            continue;
        json_array_foreach(json_object_get(c, "ports"), j, p) {
            const char *n = str_at(p, "name");
            int64_t port = int_at(p, "containerPort", 0);
            if (n && strcmp(n, name) == 0 && port > 0 && port < 65536)
                return (int32_t)port;
        }
    }
    return 0;
}

/* The port of the only container port the app containers declare, named or
 * not (vLLM's own manifests declare `containerPort: 8000` without a name); 0
 * when they declare none or several. A sidecar's port is left out: it is
 * not the server's, and must not make the server's own ambiguous. */
static int32_t sole_port(const json_t *containers)
{
    size_t i, j;
    json_t *c, *p;
    int32_t found = 0;
    json_array_foreach(containers, i, c) {
        json_array_foreach(json_object_get(c, "ports"), j, p) {
            int64_t port = int_at(p, "containerPort", 0);
            if (port <= 0 || port >= 65536)
                continue;
            if (found)
                return 0;
            found = (int32_t)port;
        }
    }
    return found;
}

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const struct kube_label *)a)->key, ((const struct kube_label *)b)->key);
}

/* A string's whole value (the API server's JSON may hold a NUL byte, read
 * with KUBE_JSON_FLAGS): each NUL as U+FFFD, so that an annotation value
 * with one is refused as the value it is rather than read up to the NUL
 * ("3\u0000x" is no "3"). NULL when it has none: use json_string_value. */
static char *string_whole(const json_t *v)
{
    size_t n = json_string_length(v);
    const char *p = json_string_value(v);
    if (strlen(p) == n)
        return NULL;
    struct util_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (p[i])
            util_buf_append(&b, p + i, 1);
        else
            util_buf_puts(&b, "\xef\xbf\xbd");
    }
    return util_buf_steal(&b);
}

/* Copy the string entries of obj whose key passes keep(); interned when pool. */
static void labels_from(const json_t *obj, bool (*keep)(const char *), struct kintern *pool,
                        struct kube_labels *out)
{
    *out = (struct kube_labels){0};
    if (!json_is_object(obj) || json_object_size(obj) == 0)
        return;
    out->items = xcalloc(json_object_size(obj), sizeof(*out->items));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        if (!json_is_string(v) || (keep && !keep(k)))
            continue;
        char *whole = string_whole(v);
        const char *val = whole ? whole : json_string_value(v);
        struct kube_label *l = &out->items[out->n++];
        l->key = pool ? kintern_get(pool, k) : xstrdup(k);
        l->value = pool ? kintern_get(pool, val) : xstrdup(val);
        xfree(whole);
    }
    if (out->n == 0) {
        xfree(out->items);
        out->items = NULL;
        return;
    }
    qsort(out->items, out->n, sizeof(*out->items), cmp_label);
}

static void labels_clear(struct kube_labels *l, struct kintern *pool)
{
    for (size_t i = 0; i < l->n; i++) {
        if (pool) {
            kintern_put(pool, l->items[i].key);
            kintern_put(pool, l->items[i].value);
        } else {
            xfree((char *)l->items[i].key);
            xfree((char *)l->items[i].value);
        }
    }
    xfree(l->items);
    *l = (struct kube_labels){0};
}

/* The named ports of every serving container, name -> decimal port, interned. */
static void ports_from(const json_t *spec, struct kintern *pool, struct kube_labels *out)
{
    *out = (struct kube_labels){0};
    size_t j, n = 0;
    const json_t *c;
    json_t *p;
    struct serving it = {.spec = spec};
    while ((c = serving_next(&it)))
        n += json_array_size(json_object_get(c, "ports"));
    if (n == 0)
        return;
    out->items = xcalloc(n, sizeof(*out->items));
    it = (struct serving){.spec = spec};
    while ((c = serving_next(&it))) {
        json_array_foreach(json_object_get(c, "ports"), j, p) {
            const char *name = str_at(p, "name");
            int64_t port = int_at(p, "containerPort", 0);
            if (!name || !name[0] || port <= 0 || port >= 65536 || out->n == n)
                continue;
            /* a name two containers give their ports (the API server only
             * warns): the first container's, as a Service's named targetPort
             * resolves (FindPort); the lookup needs keys unique */
            bool dup = false;
            for (size_t k = 0; k < out->n && !dup; k++)
                dup = strcmp(out->items[k].key, name) == 0;
            if (dup)
                continue;
            char num[8];
            snprintf(num, sizeof(num), "%d", (int)port);
            out->items[out->n].key = kintern_get(pool, name);
            out->items[out->n].value = kintern_get(pool, num);
            out->n++;
        }
    }
    if (out->n == 0) {
        xfree(out->items);
        out->items = NULL;
        return;
    }
    qsort(out->items, out->n, sizeof(*out->items), cmp_label);
}

static bool is_gpuscaler_key(const char *k)
{
    return strncmp(k, KUBE_ANNOTATION_PREFIX, strlen(KUBE_ANNOTATION_PREFIX)) == 0;
}

static bool is_deployment_label(const char *k)
{
    return is_gpuscaler_key(k) || strcmp(k, "scaledobject.keda.sh/name") == 0;
}

bool extract_labels_equal(const struct kube_labels *a, const struct kube_labels *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->items[i].key, b->items[i].key) != 0 ||
            strcmp(a->items[i].value, b->items[i].value) != 0)
            return false;
    return true;
}

bool extract_selector_equal(const struct kube_selector *a, const struct kube_selector *b)
{
    if (a->nothing != b->nothing || a->nmatch != b->nmatch || a->nexprs != b->nexprs)
        return false;
    struct kube_labels la = {a->match, a->nmatch}, lb = {b->match, b->nmatch};
    if (!extract_labels_equal(&la, &lb))
        return false;
    for (size_t i = 0; i < a->nexprs; i++) {
        const struct kube_sel_req *x = &a->exprs[i], *y = &b->exprs[i];
        if (x->op != y->op || strcmp(x->key, y->key) != 0 || x->nvalues != y->nvalues)
            return false;
        for (size_t j = 0; j < x->nvalues; j++)
            if (strcmp(x->values[j], y->values[j]) != 0)
                return false;
    }
    return true;
}

/* ---- deployments ------------------------------------------------------------ */

void extract_deployment_clear(struct kube_deployment *d)
{
    xfree((char *)d->ns);
    xfree((char *)d->name);
    xfree((char *)d->uid);
    xfree((char *)d->resource_version);
    labels_clear(&d->labels, NULL);
    labels_clear(&d->annotations, NULL);
    kube_selector_clear(&d->selector);
    *d = (struct kube_deployment){0};
}

int extract_deployment(const json_t *obj, struct kube_deployment *out, bool *tracked,
                       const char **rv)
{
    *out = (struct kube_deployment){0};
    *tracked = false;
    *rv = NULL;
    const json_t *meta = json_object_get(obj, "metadata");
    const char *ns = str_at(meta, "namespace"), *name = str_at(meta, "name");
    if (!ns || !name || !ns[0] || !name[0])
        return -EINVAL;
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *status = json_object_get(obj, "status");
    const json_t *pod_spec = json_object_get(json_object_get(spec, "template"), "spec");
    const json_t *containers = json_object_get(pod_spec, "containers");
    const char *uid = str_at(meta, "uid");
    *rv = str_at(meta, "resourceVersion");

    out->ns = xstrdup(ns);
    out->name = xstrdup(name);
    out->uid = xstrdup(uid ? uid : "");
    out->resource_version = xstrdup(*rv ? *rv : "");
    out->generation = int_at(meta, "generation", 0);
    out->created_ms = time_at(meta, "creationTimestamp");
    out->deleting = str_at(meta, "deletionTimestamp") != NULL;
    out->observed_generation = int_at(status, "observedGeneration", 0);
    out->spec_replicas = clamp32(int_at(spec, "replicas", 1));
    out->status_replicas = clamp32(int_at(status, "replicas", 0));
    out->ready_replicas = clamp32(int_at(status, "readyReplicas", 0));
    out->available_replicas = clamp32(int_at(status, "availableReplicas", 0));
    out->updated_replicas = clamp32(int_at(status, "updatedReplicas", 0));
    labels_from(json_object_get(meta, "annotations"), is_gpuscaler_key, NULL,
                &out->annotations);
    if (kube_selector_from_json(json_object_get(spec, "selector"), &out->selector, NULL, 0) < 0)
        out->selector.nothing = true;
    /* the app containers' ports before any sidecar's: an exporter or log
     * shipper sidecar's `metrics` port is not the server's */
    out->metrics_port = port_named(pod_spec, "metrics", false);
    out->http_port = port_named(pod_spec, "http", false);
    if (!out->metrics_port && !out->http_port) {
        out->metrics_port = port_named(pod_spec, "metrics", true);
        out->http_port = port_named(pod_spec, "http", true);
    }
    out->sole_port = sole_port(containers);
    out->gpus_per_replica = gpus_of(pod_spec);
    const char *en = kube_labels_get(&out->annotations, KUBE_ANNOTATION_ENABLED);
    bool b = false;
    *tracked = en && util_parse_bool(en, &b) == 0 && b;
    /* a tracked Deployment keeps every label (served as metricLabels by the
     * external metrics API); an untracked one is not stored, so only what
     * the caller may look at before dropping it is copied */
    labels_from(json_object_get(meta, "labels"), *tracked ? NULL : is_deployment_label, NULL,
                &out->labels);
    return 0;
}

/* ---- pods ------------------------------------------------------------------- */

void extract_pod_clear(struct kintern *pool, struct kube_pod *p)
{
    kintern_put(pool, p->ns);
    kintern_put(pool, p->controller);
    xfree((char *)p->name);
    labels_clear(&p->labels, pool);
    labels_clear(&p->ports, pool);
    *p = (struct kube_pod){0};
}

static enum kube_pod_phase phase_of(const char *s)
{
    if (!s)
        return KUBE_POD_UNKNOWN;
    if (strcmp(s, "Pending") == 0)
        return KUBE_POD_PENDING;
    if (strcmp(s, "Running") == 0)
        return KUBE_POD_RUNNING;
    if (strcmp(s, "Succeeded") == 0)
        return KUBE_POD_SUCCEEDED;
    if (strcmp(s, "Failed") == 0)
        return KUBE_POD_FAILED;
    return KUBE_POD_UNKNOWN;
}

/* The ownerReference with controller: true as "Kind/name", interned; NULL
 * when none (the API server admits at most one). */
static const char *controller_of(struct kintern *pool, const json_t *refs)
{
    size_t i;
    const json_t *r;
    json_array_foreach(refs, i, r) {
        const char *kind = str_at(r, "kind"), *name = str_at(r, "name");
        if (!json_is_true(json_object_get(r, "controller")) || !kind || !name || !*kind ||
            !*name)
            continue;
        char buf[320];
        int n = snprintf(buf, sizeof(buf), "%s/%s", kind, name);
        if (n < 0 || (size_t)n >= sizeof(buf))
            return kintern_get(pool, "?/?"); /* longer than the API server admits */
        return kintern_get(pool, buf);
    }
    return NULL;
}

bool kube_pod_of_deployment(const struct kube_pod *p, const char *name)
{
    const char *c = p->controller;
    if (!c)
        return true;
    if (strncmp(c, "ReplicaSet/", 11) != 0)
        return false;
    c += 11;
    size_t n = strlen(name);
    if (strncmp(c, name, n) != 0 || c[n] != '-' || !c[n + 1] || strchr(c + n + 1, '-'))
        return false;
    const char *hash = kube_labels_get(&p->labels, "pod-template-hash");
    return !hash || strcmp(hash, c + n + 1) == 0;
}

int extract_pod(struct kintern *pool, const json_t *obj, struct kube_pod *out, const char **rv)
{
    *out = (struct kube_pod){0};
    *rv = NULL;
    const json_t *meta = json_object_get(obj, "metadata");
    const char *ns = str_at(meta, "namespace"), *name = str_at(meta, "name");
    if (!ns || !name || !ns[0] || !name[0])
        return -EINVAL;
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *status = json_object_get(obj, "status");
    const json_t *containers = json_object_get(spec, "containers");
    *rv = str_at(meta, "resourceVersion");

    out->ns = kintern_get(pool, ns);
    out->name = xstrdup(name);
    labels_from(json_object_get(meta, "labels"), NULL, pool, &out->labels);
    out->controller = controller_of(pool, json_object_get(meta, "ownerReferences"));
    out->created_ms = time_at(meta, "creationTimestamp");
    out->deleting = str_at(meta, "deletionTimestamp") != NULL;
    const char *ip = str_at(status, "podIP");
    if (ip && strlen(ip) < sizeof(out->ip))
        memcpy(out->ip, ip, strlen(ip) + 1);
    out->phase = phase_of(str_at(status, "phase"));
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c) {
        const char *type = str_at(c, "type");
        const char *st = str_at(c, "status");
        if (type && strcmp(type, "Ready") == 0) {
            out->ready = st && strcmp(st, "True") == 0;
            out->ready_transition_ms = time_at(c, "lastTransitionTime");
        } else if (type && strcmp(type, "PodScheduled") == 0 && st) {
            if (strcmp(st, "True") == 0)
                out->scheduled_ms = time_at(c, "lastTransitionTime");
            else if (strcmp(st, "False") == 0)
                out->unschedulable_gpu = unschedulable_for_gpus(c);
        }
    }
    out->failing = failing_of(json_object_get(status, "initContainerStatuses"));
    if (out->failing == KUBE_FAILING_NONE)
        out->failing = failing_of(json_object_get(status, "containerStatuses"));
    out->gpus = gpus_of(spec);
    ports_from(spec, pool, &out->ports);
    /* metrics, else http, of the app containers, then of the sidecars (as
     * the Deployment's template above) */
    int32_t mp = port_named(spec, "metrics", false);
    if (!mp)
        mp = port_named(spec, "http", false);
    if (!mp)
        mp = port_named(spec, "metrics", true);
    if (!mp)
        mp = port_named(spec, "http", true);
    out->metrics_port = mp ? mp : sole_port(containers);
    return 0;
}

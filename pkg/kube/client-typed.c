/* SPDX-License-Identifier: Apache-2.0 */
/* kube/client-typed: the helpers around the API client's requests that need
 * none of its state: kube_get and the other verbs, the typed requests the
 * controller uses (Scale, Deployments' annotations, Leases, Events,
 * ConfigMaps, HPAs, reviews), all built on kube_request() and
 * kube_request_within() (kube/client.c); the object name check behind their
 * paths, an answer's status as an errno and its Status fields, and query
 * escaping. */
#include <errno.h>
#include <string.h>

#include "kube-int.h"

int kube_status_errno(long status)
{
    if (status >= 200 && status < 300)
        return 0;
    switch (status) {
    case 400:
    case 422:
        return -EINVAL;
    case 401:
        return -EACCES;
    case 403:
        return -EPERM;
    case 404:
        return -ENOENT;
    case 409:
        return -EEXIST;
    case 410:
        return -ESTALE;
    case 429:
        return -EBUSY;
    case 503:
    case 504:
        return -EAGAIN;
    default:
        return -EIO;
    }
}

void kube_status_fields(const json_t *body, const char **reason, const char **message,
                        long *code)
{
    *reason = "";
    *message = "";
    *code = 0;
    if (!json_is_object(body))
        return;
    const char *r = json_string_value(json_object_get(body, "reason"));
    const char *m = json_string_value(json_object_get(body, "message"));
    json_t *c = json_object_get(body, "code");
    *reason = r ? r : "";
    *message = m ? m : "";
    *code = json_is_integer(c) ? (long)json_integer_value(c) : 0;
}

int kube_get(struct kube *k, const char *path, kube_result_cb cb, void *arg)
{
    return kube_request(k, "GET", path, NULL, NULL, cb, arg);
}

int kube_create(struct kube *k, const char *path, const json_t *obj, kube_result_cb cb, void *arg)
{
    return obj ? kube_request(k, "POST", path, NULL, obj, cb, arg) : -EINVAL;
}

int kube_update(struct kube *k, const char *path, const json_t *obj, kube_result_cb cb, void *arg)
{
    return obj ? kube_request(k, "PUT", path, NULL, obj, cb, arg) : -EINVAL;
}

int kube_patch_merge(struct kube *k, const char *path, const json_t *patch, kube_result_cb cb,
                     void *arg)
{
    return patch ? kube_request(k, "PATCH", path, "application/merge-patch+json", patch, cb, arg)
                 : -EINVAL;
}

/* ---- typed helpers --------------------------------------------------------- */

bool kube_name_valid(const char *s)
{
    if (!s)
        return false;
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '-' && c != '.')
            return false;
        if ((i == 0 || i == n - 1) && !alnum)
            return false;
    }
    return true;
}

/* Build a namespaced path "prefix/namespaces/ns/resource[/name][suffix]". */
static char *ns_path(const char *prefix, const char *ns, const char *resource, const char *name,
                     const char *suffix)
{
    if (!kube_name_valid(ns) || (name && !kube_name_valid(name)))
        return NULL;
    return xasprintf("%s/namespaces/%s/%s%s%s%s", prefix, ns, resource, name ? "/" : "",
                     name ? name : "", suffix ? suffix : "");
}

static int with_path(char *path, int (*fn)(struct kube *, const char *, const json_t *,
                                           kube_result_cb, void *),
                     struct kube *k, const json_t *obj, kube_result_cb cb, void *arg)
{
    if (!path)
        return -EINVAL;
    int rc = fn(k, path, obj, cb, arg);
    xfree(path);
    return rc;
}

static int get_fn(struct kube *k, const char *path, const json_t *obj, kube_result_cb cb,
                  void *arg)
{
    (void)obj;
    return kube_get(k, path, cb, arg);
}

#define APPS "/apis/apps/v1"
#define CORE "/api/v1"
#define COORD "/apis/coordination.k8s.io/v1"

int kube_scale_get(struct kube *k, const char *ns, const char *name, kube_result_cb cb, void *arg)
{
    return with_path(ns_path(APPS, ns, "deployments", name, "/scale"), get_fn, k, NULL, cb, arg);
}

int kube_scale_patch(struct kube *k, const char *ns, const char *name, int32_t replicas,
                     kube_result_cb cb, void *arg)
{
    if (replicas < 0)
        return -EINVAL;
    json_t *p = json_pack("{s:{s:i}}", "spec", "replicas", (int)replicas);
    int rc = with_path(ns_path(APPS, ns, "deployments", name, "/scale"), kube_patch_merge, k, p,
                       cb, arg);
    json_decref(p);
    return rc;
}

int kube_deployment_patch_annotations(struct kube *k, const char *ns, const char *name,
                                      const char *uid, const json_t *annotations,
                                      int64_t within_ms, kube_result_cb cb, void *arg)
{
    char *path = ns_path(APPS, ns, "deployments", name, NULL);
    if (!json_is_object(annotations) || !path) {
        xfree(path);
        return -EINVAL;
    }
    json_t *p = json_pack("{s:{s:O}}", "metadata", "annotations", (json_t *)annotations);
    if (uid && *uid) /* another uid is refused: 422, metadata.uid is immutable */
        json_object_set_new(json_object_get(p, "metadata"), "uid", json_string(uid));
    int rc = kube_request_within(k, within_ms, "PATCH", path, "application/merge-patch+json", p,
                                 cb, arg);
    json_decref(p);
    xfree(path);
    return rc;
}

/* A Lease request that ends within within_ms (0 = the client's timeout). */
static int lease_req(struct kube *k, int64_t within_ms, const char *method, const char *ns,
                     const char *name, const json_t *body, kube_result_cb cb, void *arg)
{
    char *path = ns_path(COORD, ns, "leases", name, NULL);
    if (!path)
        return -EINVAL;
    int rc = kube_request_within(k, within_ms, method, path, NULL, body, cb, arg);
    xfree(path);
    return rc;
}

int kube_lease_get(struct kube *k, const char *ns, const char *name, int64_t within_ms,
                   kube_result_cb cb, void *arg)
{
    return name ? lease_req(k, within_ms, "GET", ns, name, NULL, cb, arg) : -EINVAL;
}

int kube_lease_create(struct kube *k, const char *ns, const json_t *lease, int64_t within_ms,
                      kube_result_cb cb, void *arg)
{
    return lease ? lease_req(k, within_ms, "POST", ns, NULL, lease, cb, arg) : -EINVAL;
}

int kube_lease_update(struct kube *k, const char *ns, const char *name, const json_t *lease,
                      int64_t within_ms, kube_result_cb cb, void *arg)
{
    return name && lease ? lease_req(k, within_ms, "PUT", ns, name, lease, cb, arg) : -EINVAL;
}

int kube_lease_list(struct kube *k, const char *ns, int64_t within_ms, kube_result_cb cb,
                    void *arg)
{
    return lease_req(k, within_ms, "GET", ns, NULL, NULL, cb, arg);
}

int kube_lease_delete(struct kube *k, const char *ns, const char *name,
                      const char *resource_version, int64_t within_ms, kube_result_cb cb,
                      void *arg)
{
    if (!name || !resource_version || !*resource_version)
        return -EINVAL;
    json_t *opts = json_pack("{s:s, s:s, s:{s:s}}", "kind", "DeleteOptions", "apiVersion", "v1",
                             "preconditions", "resourceVersion", resource_version);
    int rc = lease_req(k, within_ms, "DELETE", ns, name, opts, cb, arg);
    json_decref(opts);
    return rc;
}

int kube_event_create(struct kube *k, const char *ns, const json_t *event, kube_result_cb cb,
                      void *arg)
{
    return with_path(ns_path(CORE, ns, "events", NULL, NULL), kube_create, k, event, cb, arg);
}

int kube_configmap_get(struct kube *k, const char *ns, const char *name, kube_result_cb cb,
                       void *arg)
{
    return with_path(ns_path(CORE, ns, "configmaps", name, NULL), get_fn, k, NULL, cb, arg);
}

int kube_configmap_create(struct kube *k, const char *ns, const json_t *cm, int64_t within_ms,
                          kube_result_cb cb, void *arg)
{
    char *path = ns_path(CORE, ns, "configmaps", NULL, NULL);
    int rc = cm && path ? kube_request_within(k, within_ms, "POST", path, NULL, cm, cb, arg)
                        : -EINVAL;
    xfree(path);
    return rc;
}

int kube_configmap_update(struct kube *k, const char *ns, const char *name, const json_t *cm,
                          kube_result_cb cb, void *arg)
{
    return with_path(ns_path(CORE, ns, "configmaps", name, NULL), kube_update, k, cm, cb, arg);
}

int kube_configmap_patch(struct kube *k, const char *ns, const char *name, const json_t *patch,
                         int64_t within_ms, kube_result_cb cb, void *arg)
{
    char *path = ns_path(CORE, ns, "configmaps", name, NULL);
    int rc = patch && path ? kube_request_within(k, within_ms, "PATCH", path,
                                                 "application/merge-patch+json", patch, cb, arg)
                           : -EINVAL;
    xfree(path);
    return rc;
}

int kube_hpa_list(struct kube *k, const char *ns, kube_result_cb cb, void *arg)
{
    return with_path(ns_path("/apis/autoscaling/v2", ns, "horizontalpodautoscalers", NULL, NULL),
                     get_fn, k, NULL, cb, arg);
}

int kube_tokenreview_create(struct kube *k, const json_t *review, kube_result_cb cb, void *arg)
{
    return kube_create(k, "/apis/authentication.k8s.io/v1/tokenreviews", review, cb, arg);
}

int kube_subjectaccessreview_create(struct kube *k, const json_t *review, kube_result_cb cb,
                                    void *arg)
{
    return kube_create(k, "/apis/authorization.k8s.io/v1/subjectaccessreviews", review, cb, arg);
}

void kube_query_escape(struct util_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            util_buf_append(b, s, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            util_buf_append(b, e, 3);
        }
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/review: the JSON of the reviews delegated authentication and
 * authorization send to the kube-apiserver, TokenReview
 * (authentication.k8s.io/v1) and SubjectAccessReview
 * (authorization.k8s.io/v1), built and read as k8s.io/apiserver's delegating
 * authenticator and webhook authorizer do. The point is that the identity a
 * request arrived with (name, uid, groups and extra, from a token, the front
 * proxy's headers or a client certificate) reaches the access review whole:
 * an authorizer may grant on an extra such as a scope or a node name.
 *
 * Pure: no I/O; the caller sends the documents through pkg/kube. */
#include "extmetrics-int.h"

#include <errno.h>
#include <string.h>

json_t *extmetrics_tokenreview_new(const char *token)
{
    return json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "authentication.k8s.io/v1", "kind",
                     "TokenReview", "spec", "token", token ? token : "");
}

void extmetrics_review_user_free(struct extmetrics_review_user *u)
{
    if (!u)
        return;
    xfree(u->groups_);
    xfree(u->extra_);
    memset(u, 0, sizeof(*u));
}

int extmetrics_tokenreview_user(const json_t *review, struct extmetrics_review_user *out)
{
    memset(out, 0, sizeof(*out));
    json_t *st = json_object_get(review, "status");
    if (!json_is_object(st))
        return -EBADMSG;
    if (!json_is_true(json_object_get(st, "authenticated")))
        return -EACCES;
    json_t *u = json_object_get(st, "user");
    const char *name = json_string_value(json_object_get(u, "username"));
    if (!name || !*name)
        return -EBADMSG; /* authenticated as nobody: not an identity */
    json_t *groups = json_object_get(u, "groups"), *extra = json_object_get(u, "extra");
    if ((groups && !json_is_array(groups)) || (extra && !json_is_object(extra)))
        return -EBADMSG;
    size_t ng = json_array_size(groups), nx = 0, i;
    const char *key;
    json_t *vals, *it;
    json_object_foreach(extra, key, vals) {
        if (!json_is_array(vals))
            return -EBADMSG;
        nx += json_array_size(vals);
    }
    out->groups_ = xcalloc(ng + 1, sizeof(*out->groups_));
    out->extra_ = xcalloc(nx + 1, sizeof(*out->extra_));
    size_t g = 0;
    json_array_foreach(groups, i, it) {
        if (!json_is_string(it))
            goto bad;
        out->groups_[g++] = json_string_value(it);
    }
    size_t x = 0;
    json_object_foreach(extra, key, vals) {
        json_array_foreach(vals, i, it) {
            if (!json_is_string(it))
                goto bad;
            out->extra_[x].key = key;
            out->extra_[x++].value = json_string_value(it);
        }
    }
    out->user = (struct extmetrics_user){
        .name = name,
        .uid = json_string_value(json_object_get(u, "uid")),
        .groups = out->groups_,
        .ngroups = g,
        .extra = out->extra_,
        .nextra = x,
    };
    return 0;
bad:
    extmetrics_review_user_free(out);
    return -EBADMSG;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* spec.extra: map[string][]string, keys sorted as Go marshals a map, each
 * key's values in the order the identity carried them */
static json_t *extra_map(const struct extmetrics_user *u)
{
    json_t *m = json_object();
    const char **keys = xcalloc(u->nextra + 1, sizeof(*keys));
    size_t nk = 0;
    for (size_t i = 0; i < u->nextra; i++)
        if (u->extra[i].key && u->extra[i].value)
            keys[nk++] = u->extra[i].key;
    qsort(keys, nk, sizeof(*keys), key_cmp);
    for (size_t k = 0; k < nk; k++) {
        if (k > 0 && strcmp(keys[k], keys[k - 1]) == 0)
            continue;
        json_t *vals = json_array();
        for (size_t i = 0; i < u->nextra; i++)
            if (u->extra[i].key && u->extra[i].value && strcmp(u->extra[i].key, keys[k]) == 0)
                json_array_append_new(vals, json_string(u->extra[i].value));
        json_object_set_new(m, keys[k], vals);
    }
    xfree(keys);
    return m;
}

static void set_nonempty(json_t *o, const char *k, const char *v)
{
    if (v && *v)
        json_object_set_new(o, k, json_string(v));
}

json_t *extmetrics_sar_new(const struct extmetrics_user *u, const struct extmetrics_attrs *a)
{
    json_t *spec = json_object();
    /* SubjectAccessReviewSpec's field order; empty fields are omitted (omitempty) */
    if (a->resource_request) {
        json_t *ra = json_object();
        set_nonempty(ra, "namespace", a->namespace_);
        set_nonempty(ra, "verb", a->verb);
        set_nonempty(ra, "group", a->group);
        set_nonempty(ra, "version", a->version);
        set_nonempty(ra, "resource", a->resource);
        json_object_set_new(spec, "resourceAttributes", ra);
    } else {
        json_t *na = json_object();
        set_nonempty(na, "path", a->path && *a->path ? a->path : "/");
        set_nonempty(na, "verb", a->verb);
        json_object_set_new(spec, "nonResourceAttributes", na);
    }
    set_nonempty(spec, "user", u->name);
    if (u->ngroups) {
        json_t *groups = json_array();
        for (size_t i = 0; i < u->ngroups; i++)
            if (u->groups[i])
                json_array_append_new(groups, json_string(u->groups[i]));
        json_object_set_new(spec, "groups", groups);
    }
    json_t *extra = extra_map(u);
    if (json_object_size(extra))
        json_object_set_new(spec, "extra", extra);
    else
        json_decref(extra);
    set_nonempty(spec, "uid", u->uid);
    json_t *sar = json_object();
    json_object_set_new(sar, "apiVersion", json_string("authorization.k8s.io/v1"));
    json_object_set_new(sar, "kind", json_string("SubjectAccessReview"));
    json_object_set_new(sar, "spec", spec);
    return sar;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/auth: front-proxy (requestheader) authentication, owned copies
 * of identities, and the small TTL caches in front of the authorizer's
 * TokenReview and SubjectAccessReview calls.
 *
 * Request headers naming a user are trusted only on a connection whose
 * client certificate was verified against the requestheader CA and whose
 * CN is allowed, exactly as kube-apiserver's requestheader authenticator
 * does. Token cache keys are SHA-256 digests, never the tokens. */
#include "extmetrics-int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <string.h>
#include <strings.h>

static void strv_add(struct em_strv *s, const char *v)
{
    s->v = xrealloc(s->v, (s->n + 1) * sizeof(char *));
    s->v[s->n++] = xstrdup(v);
}

static void strv_free(struct em_strv *s)
{
    for (size_t i = 0; i < s->n; i++)
        xfree(s->v[i]);
    xfree(s->v);
    s->v = NULL;
    s->n = 0;
}

static void strv_set(struct em_strv *s, const char *const *v, size_t n)
{
    strv_free(s);
    for (size_t i = 0; i < n; i++)
        if (v[i])
            strv_add(s, v[i]);
}

void em_user_free(struct em_user *u)
{
    xfree(u->name);
    xfree(u->uid);
    strv_free(&u->groups);
    strv_free(&u->extra);
    memset(u, 0, sizeof(*u));
}

void em_user_set(struct em_user *dst, const struct extmetrics_user *src)
{
    em_user_free(dst);
    dst->name = xstrdup(src->name ? src->name : "");
    dst->uid = src->uid ? xstrdup(src->uid) : NULL;
    strv_set(&dst->groups, src->groups, src->ngroups);
    for (size_t i = 0; i < src->nextra; i++) {
        strv_add(&dst->extra, src->extra[i].key);
        strv_add(&dst->extra, src->extra[i].value);
    }
}

void em_user_view(const struct em_user *u, struct extmetrics_user *view,
                  struct extmetrics_label *labels)
{
    view->name = u->name;
    view->uid = u->uid;
    view->groups = (const char *const *)u->groups.v;
    view->ngroups = u->groups.n;
    for (size_t i = 0; i + 1 < u->extra.n; i += 2) {
        labels[i / 2].key = u->extra.v[i];
        labels[i / 2].value = u->extra.v[i + 1];
    }
    view->extra = labels;
    view->nextra = u->extra.n / 2;
}

/* ---- requestheader ----------------------------------------------------------- */

void em_rh_free(struct em_rh *rh)
{
    strv_free(&rh->allowed);
    strv_free(&rh->user_h);
    strv_free(&rh->uid_h);
    strv_free(&rh->group_h);
    strv_free(&rh->extra_p);
    rh->enabled = false;
}

void em_rh_set(struct em_rh *rh, const struct extmetrics_requestheader *src)
{
    em_rh_free(rh);
    if (!src)
        return;
    rh->enabled = true;
    strv_set(&rh->allowed, src->allowed_names, src->nallowed_names);
    strv_set(&rh->user_h, src->username_headers, src->nusername_headers);
    strv_set(&rh->uid_h, src->uid_headers, src->nuid_headers);
    strv_set(&rh->group_h, src->group_headers, src->ngroup_headers);
    strv_set(&rh->extra_p, src->extra_prefixes, src->nextra_prefixes);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Header names are compared case-insensitively; extra keys are lowercased
 * and percent-unescaped as kube-apiserver does. */
static char *extra_key(const char *s)
{
    struct util_buf b = {0};
    for (; *s; s++) {
        int hi, lo;
        if (*s == '%' && s[1] && s[2] && (hi = hexval(s[1])) >= 0 &&
            (lo = hexval(s[2])) >= 0) {
            char c = (char)(hi * 16 + lo);
            util_buf_append(&b, &c, 1);
            s += 2;
            continue;
        }
        char c = (*s >= 'A' && *s <= 'Z') ? (char)(*s - 'A' + 'a') : *s;
        util_buf_append(&b, &c, 1);
    }
    if (!b.data)
        util_buf_puts(&b, "");
    return util_buf_steal(&b);
}

int em_rh_authenticate(const struct em_rh *rh, const struct httpd_request *req,
                       struct em_user *out)
{
    if (!rh->enabled || !req->peer.client_cert_verified || rh->user_h.n == 0)
        return 0;
    if (rh->allowed.n > 0) {
        bool ok = false;
        for (size_t i = 0; i < rh->allowed.n && !ok; i++)
            ok = req->peer.client_cn && strcmp(rh->allowed.v[i], req->peer.client_cn) == 0;
        if (!ok)
            return -EACCES;
    }
    const char *name = NULL;
    for (size_t i = 0; i < rh->user_h.n && !name; i++) {
        const char *v = httpd_request_header(req, rh->user_h.v[i]);
        if (v && *v)
            name = v;
    }
    if (!name)
        return 0;
    em_user_free(out);
    out->name = xstrdup(name);
    for (size_t i = 0; i < rh->uid_h.n && !out->uid; i++) {
        const char *v = httpd_request_header(req, rh->uid_h.v[i]);
        if (v && *v)
            out->uid = xstrdup(v);
    }
    for (size_t h = 0; h < req->nheaders; h++) {
        const struct httpd_header *hd = &req->headers[h];
        for (size_t i = 0; i < rh->group_h.n; i++)
            if (strcasecmp(hd->name, rh->group_h.v[i]) == 0)
                strv_add(&out->groups, hd->value);
        for (size_t i = 0; i < rh->extra_p.n; i++) {
            size_t pl = strlen(rh->extra_p.v[i]);
            if (strncasecmp(hd->name, rh->extra_p.v[i], pl) == 0 && hd->name[pl]) {
                char *k = extra_key(hd->name + pl);
                strv_add(&out->extra, k);
                strv_add(&out->extra, hd->value);
                xfree(k);
            }
        }
    }
    return 1;
}

/* ---- caches ---------------------------------------------------------------- */

static void entry_free(struct em_cache_entry *e)
{
    xfree(e->key);
    xfree(e->reason);
    em_user_free(&e->user);
    memset(e, 0, sizeof(*e));
}

void em_cache_free(struct em_cache *c)
{
    for (size_t i = 0; i < c->n; i++)
        entry_free(&c->e[i]);
    xfree(c->e);
    c->e = NULL;
    c->n = 0;
}

const struct em_cache_entry *em_cache_get(const struct em_cache *c, const char *key, uint64_t now)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->e[i].expires > now && strcmp(c->e[i].key, key) == 0)
            return &c->e[i];
    return NULL;
}

struct em_cache_entry *em_cache_put(struct em_cache *c, const char *key, uint64_t expires,
                                    uint64_t now)
{
    size_t slot = c->n;
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->e[i].key, key) == 0 || c->e[i].expires <= now) {
            slot = i;
            break;
        }
    }
    if (slot == c->n && c->n >= c->max) { /* full of live entries: drop the oldest */
        slot = 0;
        for (size_t i = 1; i < c->n; i++)
            if (c->e[i].expires < c->e[slot].expires)
                slot = i;
    }
    if (slot == c->n) {
        c->e = xrealloc(c->e, (c->n + 1) * sizeof(*c->e));
        memset(&c->e[c->n], 0, sizeof(c->e[0]));
        c->n++;
    }
    struct em_cache_entry *e = &c->e[slot];
    entry_free(e);
    e->key = xstrdup(key);
    e->expires = expires;
    return e;
}

char *em_token_key(const char *token)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_Digest(token, strlen(token), md, &n, EVP_sha256(), NULL) != 1)
        n = 0;
    char *hex = xmalloc(2 * n + 8);
    memcpy(hex, "tok:", 4);
    for (unsigned i = 0; i < n; i++)
        snprintf(hex + 4 + 2 * i, 3, "%02x", md[i]);
    hex[4 + 2 * n] = '\0';
    return hex;
}

char *em_authz_key(const struct extmetrics_user *u, const struct extmetrics_attrs *a)
{
    struct util_buf b = {0};
    util_buf_json_str(&b, u->name ? u->name : "");
    util_buf_json_str(&b, u->uid ? u->uid : "");
    for (size_t i = 0; i < u->ngroups; i++)
        util_buf_json_str(&b, u->groups[i]);
    util_buf_puts(&b, "|");
    for (size_t i = 0; i < u->nextra; i++) {
        util_buf_json_str(&b, u->extra[i].key);
        util_buf_json_str(&b, u->extra[i].value);
    }
    util_buf_puts(&b, "|");
    util_buf_json_str(&b, a->verb ? a->verb : "");
    if (a->resource_request) {
        util_buf_json_str(&b, a->group ? a->group : "");
        util_buf_json_str(&b, a->version ? a->version : "");
        util_buf_json_str(&b, a->resource ? a->resource : "");
        util_buf_json_str(&b, a->namespace_ ? a->namespace_ : "");
    } else {
        util_buf_json_str(&b, a->path ? a->path : "");
    }
    return util_buf_steal(&b);
}

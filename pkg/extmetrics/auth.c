/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/auth: front-proxy (requestheader) and client-certificate
 * authentication, owned copies of identities, and the small TTL caches in
 * front of the authorizer's TokenReview and SubjectAccessReview calls.
 *
 * The handshake asks for certificates from either CA (httpd trusts their
 * union); each authenticator then verifies the chain against its own CA,
 * as k8s.io/apiserver's x509 verifiers do (every certificate of a bundle is
 * an anchor, as in Go's x509 Roots; client authentication is checked on the
 * extended key usages only, as Go does). Request headers naming a user are
 * trusted only from a certificate of the requestheader CA whose CN is
 * allowed; a certificate of the client CA (client-ca-file) is itself the
 * identity: CN the user, O the groups. (When the two bundles share a
 * certificate, one certificate verifies as both: see
 * extmetrics_client_ca_can_proxy.) Token cache keys are SHA-256 digests,
 * never the tokens. */
#include "extmetrics-int.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdint.h>
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

void em_user_add_authenticated(struct em_user *u)
{
    if (!u->name || strcmp(u->name, "system:anonymous") == 0)
        return;
    for (size_t i = 0; i < u->groups.n; i++)
        if (strcmp(u->groups.v[i], "system:authenticated") == 0 ||
            strcmp(u->groups.v[i], "system:unauthenticated") == 0)
            return;
    strv_add(&u->groups, "system:authenticated");
}

/* ---- client certificates ------------------------------------------------------ */

/* Every certificate of @pem (@len bytes), in order; NULL when none parses. */
static STACK_OF(X509) *pem_certs(const char *pem, size_t len)
{
    if (!pem || len == 0 || len > INT32_MAX)
        return NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    STACK_OF(X509) *sk = sk_X509_new_null();
    X509 *x;
    while (bio && sk && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL)
        if (!sk_X509_push(sk, x))
            X509_free(x);
    ERR_clear_error(); /* the loop ends on "no start line" */
    BIO_free(bio);
    if (sk && sk_X509_num(sk) == 0) {
        sk_X509_free(sk);
        sk = NULL;
    }
    return sk;
}

X509_STORE *em_store_from_pem(const char *pem, size_t len)
{
    STACK_OF(X509) *certs = pem_certs(pem, len);
    X509_STORE *st = certs ? X509_STORE_new() : NULL;
    int count = 0;
    for (int i = 0; st && i < sk_X509_num(certs); i++)
        if (X509_STORE_add_cert(st, sk_X509_value(certs, i)) == 1)
            count++;
    sk_X509_pop_free(certs, X509_free);
    ERR_clear_error();
    /* every certificate of the bundle is an anchor, as Go's x509 Verify
     * treats every certificate of Roots: a bundle may hold an intermediate
     * CA whose root is kept offline */
    if (count == 0 || X509_STORE_set_flags(st, X509_V_FLAG_PARTIAL_CHAIN) != 1) {
        X509_STORE_free(st);
        return NULL;
    }
    return st;
}

bool em_pem_share_cert(const char *a, size_t alen, const char *b, size_t blen)
{
    STACK_OF(X509) *x = pem_certs(a, alen), *y = pem_certs(b, blen);
    bool shared = false;
    for (int i = 0; x && y && i < sk_X509_num(x) && !shared; i++)
        for (int j = 0; j < sk_X509_num(y) && !shared; j++)
            shared = X509_cmp(sk_X509_value(x, i), sk_X509_value(y, j)) == 0;
    sk_X509_pop_free(x, X509_free);
    sk_X509_pop_free(y, X509_free);
    return shared;
}

/* The leaf and the intermediates of a PEM chain; 0 or -EACCES. */
static int chain_parse(const char *pem, X509 **leaf, STACK_OF(X509) **rest)
{
    *leaf = NULL;
    *rest = NULL;
    size_t len = pem ? strlen(pem) : 0;
    if (len == 0 || len > INT32_MAX)
        return -EACCES;
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    *rest = sk_X509_new_null();
    X509 *x;
    while (bio && *rest && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        if (!*leaf)
            *leaf = x;
        else if (!sk_X509_push(*rest, x))
            X509_free(x);
    }
    ERR_clear_error();
    BIO_free(bio);
    return *leaf ? 0 : -EACCES;
}

/* Go's x509 Verify with KeyUsages {ExtKeyUsageClientAuth}: each certificate
 * of the chain (anchor included) that lists extended key usages lists
 * clientAuth or anyExtendedKeyUsage. KeyUsage is not looked at (OpenSSL's
 * SSL client purpose also wants digitalSignature or keyAgreement in the
 * leaf's, and refuses a leaf that is only anyExtendedKeyUsage). */
static bool chain_allows_client_auth(STACK_OF(X509) *chain)
{
    for (int i = 0; i < sk_X509_num(chain); i++) {
        X509 *x = sk_X509_value(chain, i);
        if ((X509_get_extension_flags(x) & EXFLAG_XKUSAGE) &&
            !(X509_get_extended_key_usage(x) & (XKU_SSL_CLIENT | XKU_ANYEKU)))
            return false;
    }
    return chain != NULL;
}

static int verify(X509_STORE *store, X509 *leaf, STACK_OF(X509) *rest)
{
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    /* no purpose: the chain, its CA constraints and validity are checked
     * here, the usage below */
    int ok = ctx && X509_STORE_CTX_init(ctx, store, leaf, rest) == 1 &&
             X509_verify_cert(ctx) == 1 && chain_allows_client_auth(X509_STORE_CTX_get0_chain(ctx));
    X509_STORE_CTX_free(ctx);
    ERR_clear_error();
    return ok ? 0 : -EACCES;
}

int em_chain_verify(X509_STORE *store, const char *chain_pem)
{
    X509 *leaf = NULL;
    STACK_OF(X509) *rest = NULL;
    int rc = -EACCES;
    if (store && chain_parse(chain_pem, &leaf, &rest) == 0)
        rc = verify(store, leaf, rest);
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    return rc;
}

/* Every value of attribute @nid of the subject, in order, as UTF-8; false
 * if one holds a NUL (not a usable name). */
static bool subject_values(X509 *x, int nid, struct em_strv *out)
{
    X509_NAME *subj = X509_get_subject_name(x);
    for (int i = -1; subj && (i = X509_NAME_get_index_by_NID(subj, nid, i)) >= 0;) {
        unsigned char *utf8 = NULL;
        int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, i)));
        bool ok = n >= 0 && utf8 && strlen((const char *)utf8) == (size_t)n;
        if (ok)
            strv_add(out, (const char *)utf8);
        OPENSSL_free(utf8);
        if (!ok)
            return false;
    }
    return true;
}

static void user_copy(struct em_user *dst, const struct em_user *src)
{
    em_user_free(dst);
    dst->name = src->name ? xstrdup(src->name) : NULL;
    for (size_t i = 0; i < src->groups.n; i++)
        strv_add(&dst->groups, src->groups.v[i]);
}

int em_x509_authenticate(X509_STORE *store, struct em_cache *verified,
                         const struct httpd_request *req, uint64_t now, struct em_user *out)
{
    X509 *leaf = NULL;
    STACK_OF(X509) *rest = NULL;
    struct em_strv cn = {0}, orgs = {0};
    int rc = 0;
    const char *chain = req->peer.client_chain_pem;
    if (!store || !chain)
        return 0;
    char *key = em_token_key(chain);
    const struct em_cache_entry *hit = em_cache_get(verified, key, now);
    if (hit) {
        if (hit->ok)
            user_copy(out, &hit->user);
        xfree(key);
        return hit->ok ? 1 : 0;
    }
    struct em_cache_entry *e = em_cache_put(verified, key, now + EM_CHAIN_TTL_MS, now);
    xfree(key);
    e->ok = false;
    if (chain_parse(chain, &leaf, &rest) != 0 || verify(store, leaf, rest) != 0)
        goto out;
    /* x509.CommonNameUserConversion: the CN is the user, every O a group; a
     * subject with several CNs has the last (Go's pkix.Name keeps overwriting) */
    if (!subject_values(leaf, NID_commonName, &cn) || cn.n == 0 || !cn.v[cn.n - 1][0] ||
        !subject_values(leaf, NID_organizationName, &orgs))
        goto out;
    em_user_free(out);
    out->name = xstrdup(cn.v[cn.n - 1]);
    out->groups = orgs;
    orgs = (struct em_strv){0};
    user_copy(&e->user, out);
    e->ok = true;
    rc = 1;
out:
    strv_free(&cn);
    strv_free(&orgs);
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    return rc;
}

void em_rh_free(struct em_rh *rh)
{
    X509_STORE_free(rh->store);
    rh->store = NULL;
    if (rh->verified) {
        em_cache_free(rh->verified);
        xfree(rh->verified);
        rh->verified = NULL;
    }
    strv_free(&rh->allowed);
    strv_free(&rh->user_h);
    strv_free(&rh->uid_h);
    strv_free(&rh->group_h);
    strv_free(&rh->extra_p);
    rh->enabled = false;
}

int em_rh_set(struct em_rh *rh, const struct extmetrics_requestheader *src)
{
    X509_STORE *st = NULL;
    if (src && !(st = em_store_from_pem(src->client_ca_pem, src->client_ca_len)))
        return -EINVAL;
    em_rh_free(rh);
    if (!src)
        return 0;
    rh->enabled = true;
    rh->store = st;
    rh->verified = xcalloc(1, sizeof(*rh->verified)); /* answers for this store only */
    rh->verified->max = 64;
    strv_set(&rh->allowed, src->allowed_names, src->nallowed_names);
    strv_set(&rh->user_h, src->username_headers, src->nusername_headers);
    strv_set(&rh->uid_h, src->uid_headers, src->nuid_headers);
    strv_set(&rh->group_h, src->group_headers, src->ngroup_headers);
    strv_set(&rh->extra_p, src->extra_prefixes, src->nextra_prefixes);
    return 0;
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

/* em_chain_verify() of the front-proxy store, its answers of the last
 * EM_CHAIN_TTL_MS reused by the chain's SHA-256. */
static int rh_chain_verify(const struct em_rh *rh, const char *chain, uint64_t now)
{
    if (!chain)
        return -EACCES;
    char *key = em_token_key(chain);
    const struct em_cache_entry *hit = em_cache_get(rh->verified, key, now);
    int rc = hit ? (hit->ok ? 0 : -EACCES) : em_chain_verify(rh->store, chain);
    if (!hit)
        em_cache_put(rh->verified, key, now + EM_CHAIN_TTL_MS, now)->ok = rc == 0;
    xfree(key);
    return rc;
}

int em_rh_authenticate(const struct em_rh *rh, const struct httpd_request *req, uint64_t now,
                       struct em_user *out)
{
    /* the front-proxy CA only: a certificate from client-ca-file (also
     * accepted in the handshake) is an identity, not a proxy, unless the
     * two bundles share a certificate (extmetrics_client_ca_can_proxy) */
    if (!rh->enabled || rh->user_h.n == 0 ||
        rh_chain_verify(rh, req->peer.client_chain_pem, now) != 0)
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
    /* groups as headerrequest's allHeaderValues reads them: header name by
     * header name, every value that is not empty */
    for (size_t i = 0; i < rh->group_h.n; i++)
        for (size_t h = 0; h < req->nheaders; h++)
            if (strcasecmp(req->headers[h].name, rh->group_h.v[i]) == 0 &&
                req->headers[h].value[0])
                strv_add(&out->groups, req->headers[h].value);
    /* extra keeps empty values, as its newExtra does */
    for (size_t h = 0; h < req->nheaders; h++) {
        const struct httpd_header *hd = &req->headers[h];
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

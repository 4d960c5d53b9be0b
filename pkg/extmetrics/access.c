/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/access: the authentication and authorization steps of a
 * request (front proxy, client certificate or bearer token, then a cached
 * or delegated access review), between routing and serving (route.c).
 *
 * A step that waits for the authorizer counts itself in call->waiting; the
 * call is freed once nothing is waited for (em_call_free answers 503 if it
 * was never answered). */
#include "extmetrics-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- authorization ------------------------------------------------------------- */

static void authz_attrs(const struct em_call *c, struct extmetrics_attrs *a)
{
    memset(a, 0, sizeof(*a));
    if (c->route == R_METRIC) {
        a->resource_request = true;
        a->verb = "list"; /* the route is a LIST in apiserver terms */
        a->group = EXTMETRICS_GROUP;
        a->version = EXTMETRICS_VERSION;
        a->resource = c->metric;
        a->namespace_ = c->ns;
    } else {
        a->verb = "get";
        a->path = c->req->path;
    }
}

static void forbidden(struct em_call *c, const char *reason)
{
    char msg[512];
    if (c->route == R_METRIC)
        snprintf(msg, sizeof(msg),
                 "%s is forbidden: User \"%s\" cannot list resource \"%s\" in API group \"%s\" in "
                 "the namespace \"%s\"%s%s",
                 c->metric, c->user.name, c->metric, EXTMETRICS_GROUP, c->ns,
                 reason && *reason ? ": " : "", reason ? reason : "");
    else
        snprintf(msg, sizeof(msg), "forbidden: User \"%s\" cannot get path \"%s\"%s%s",
                 c->user.name, c->req->path, reason && *reason ? ": " : "", reason ? reason : "");
    em_call_answer_status(c, 403, msg);
}

static void finish(struct em_call *c)
{
    if (c->waiting == 0)
        em_call_free(c);
}

static void after_authz(struct em_call *c)
{
    if (!em_serve(c->em, c))
        finish(c);
}

static void on_authz(int status, bool allowed, const char *reason, void *arg)
{
    struct em_call *c = arg;
    c->waiting--;
    if (!c->em || !c->req) {
        finish(c);
        return;
    }
    struct extmetrics *em = c->em;
    if (status < 0) {
        LOG_WARN(EM_LOG, "authorization check failed for user %s: %s", c->user.name,
                 strerror(-status));
        em_call_answer_status(c, 500, "authorization check failed");
        finish(c);
        return;
    }
    struct extmetrics_attrs a;
    struct extmetrics_user u;
    struct extmetrics_label *lab = xcalloc(c->user.extra.n / 2 + 1, sizeof(*lab));
    authz_attrs(c, &a);
    em_user_view(&c->user, &u, lab);
    char *key = em_authz_key(&u, &a);
    uint64_t now = uv_now(em->loop);
    struct em_cache_entry *e = em_cache_put(&em->decisions, key, now + em->cfg.authz_ttl_ms, now);
    e->ok = allowed;
    e->reason = reason ? xstrdup(reason) : NULL;
    xfree(key);
    xfree(lab);
    if (allowed)
        after_authz(c);
    else {
        forbidden(c, reason);
        finish(c);
    }
}

static void authorize(struct em_call *c)
{
    struct extmetrics *em = c->em;
    em_user_add_authenticated(&c->user);
    for (size_t i = 0; i < c->user.groups.n; i++) {
        if (strcmp(c->user.groups.v[i], "system:masters") == 0) {
            after_authz(c);
            return;
        }
    }
    struct extmetrics_attrs a;
    struct extmetrics_user u;
    struct extmetrics_label *lab = xcalloc(c->user.extra.n / 2 + 1, sizeof(*lab));
    authz_attrs(c, &a);
    em_user_view(&c->user, &u, lab);
    char *key = em_authz_key(&u, &a);
    const struct em_cache_entry *e = em_cache_get(&em->decisions, key, uv_now(em->loop));
    xfree(key);
    if (e) {
        xfree(lab);
        if (e->ok)
            after_authz(c);
        else {
            forbidden(c, e->reason);
            finish(c);
        }
        return;
    }
    c->waiting++;
    int rc = em->authz.ops->authorize(em->authz.impl, &u, &a, on_authz, c);
    xfree(lab);
    if (rc < 0) {
        c->waiting--;
        LOG_WARN(EM_LOG, "cannot start authorization check: %s", strerror(-rc));
        em_call_answer_status(c, 500, "authorization check failed");
        finish(c);
    }
}

/* ---- authentication --------------------------------------------------------------- */

static void unauthorized(struct em_call *c)
{
    em_call_answer_status(c, 401, "Unauthorized");
}

/* The bearer token of an Authorization header, as the apiserver's bearer
 * authenticator reads it: the value trimmed, split at single spaces into at
 * most three parts, "Bearer" (any case) then the token, the rest ignored
 * ("Bearer tok junk" is tok). NULL when the header is no bearer token or
 * its token is empty ("Bearer  tok"): no credentials, as for the apiserver;
 * the caller frees the result. */
static char *bearer_token(const char *auth)
{
    if (!auth)
        return NULL;
    while (*auth && strchr(" \t\v\f\r\n", *auth)) /* Go's TrimSpace, in ASCII */
        auth++;
    size_t n = strlen(auth);
    while (n && strchr(" \t\v\f\r\n", auth[n - 1]))
        n--;
    if (n < 7 || strncasecmp(auth, "Bearer ", 7) != 0)
        return NULL;
    const char *tok = auth + 7, *end = memchr(tok, ' ', n - 7);
    size_t len = end ? (size_t)(end - tok) : n - 7;
    return len ? xstrndup(tok, len) : NULL;
}

static void on_authn(int status, const struct extmetrics_user *user, void *arg)
{
    struct em_call *c = arg;
    c->waiting--;
    if (!c->em || !c->req) {
        finish(c);
        return;
    }
    struct extmetrics *em = c->em;
    char *tok = bearer_token(httpd_request_header(c->req, "Authorization"));
    uint64_t now = uv_now(em->loop);
    if (status == 0 && user && user->name && *user->name) {
        em_user_set(&c->user, user);
        if (tok) {
            char *key = em_token_key(tok);
            struct em_cache_entry *e = em_cache_put(&em->tokens, key, now + em->cfg.authn_ttl_ms,
                                                    now);
            e->ok = true;
            em_user_set(&e->user, user);
            xfree(key);
        }
        xfree(tok);
        authorize(c);
        return;
    }
    if (status == -EACCES && tok) {
        char *key = em_token_key(tok);
        em_cache_put(&em->tokens, key, now + em->cfg.authn_ttl_ms, now)->ok = false;
        xfree(key);
    } else if (status < 0 && status != -EACCES) {
        LOG_WARN(EM_LOG, "token review failed: %s", strerror(-status));
    }
    xfree(tok);
    unauthorized(c);
    finish(c);
}

void em_authenticate(struct em_call *c)
{
    struct extmetrics *em = c->em;
    struct httpd_request *req = c->req;
    if (em->cfg.disable_auth) {
        c->user.name = xstrdup("system:anonymous");
        after_authz(c);
        return;
    }
    uint64_t now = uv_now(em->loop);
    int rc = em_rh_authenticate(&em->rh, req, now, &c->user);
    if (rc == 1) {
        authorize(c);
        return;
    }
    if (rc == -EACCES)
        LOG_DEBUG(EM_LOG, "client certificate CN \"%s\" from %s is not an allowed front proxy",
                  req->peer.client_cn ? req->peer.client_cn : "", req->peer.addr);
    /* then a certificate of the client CA, as the apiserver's union of
     * authenticators tries them: front proxy, client certificate, token */
    if (em_x509_authenticate(em->client_store, &em->client_verified, req, now, &c->user) == 1) {
        authorize(c);
        return;
    }
    char *tok = bearer_token(httpd_request_header(req, "Authorization"));
    if (!tok && !req->peer.client_cert && rc != -EACCES) {
        /* no credentials (no certificate; no Authorization header, or one
         * that is no bearer token, or an empty one): system:anonymous, as
         * the apiserver's delegated authentication (anonymous enabled, its
         * default) makes it, and the access review decides: a 403 where the
         * cluster grants system:unauthenticated nothing. A certificate that
         * authenticates no one, or a token the review refuses, is a 401. */
        static const char *const unauth[] = {"system:unauthenticated"};
        struct extmetrics_user anon = {.name = "system:anonymous", .groups = unauth,
                                       .ngroups = 1};
        em_user_set(&c->user, &anon);
        authorize(c);
        return;
    }
    if (!tok || !em->authz.ops) {
        xfree(tok);
        unauthorized(c);
        finish(c);
        return;
    }
    char *key = em_token_key(tok);
    const struct em_cache_entry *e = em_cache_get(&em->tokens, key, uv_now(em->loop));
    xfree(key);
    if (e) {
        xfree(tok);
        if (!e->ok) {
            unauthorized(c);
            finish(c);
            return;
        }
        struct extmetrics_user u;
        struct extmetrics_label *lab = xcalloc(e->user.extra.n / 2 + 1, sizeof(*lab));
        em_user_view(&e->user, &u, lab);
        em_user_set(&c->user, &u);
        xfree(lab);
        authorize(c);
        return;
    }
    c->waiting++;
    rc = em->authz.ops->authenticate_token(em->authz.impl, tok, on_authn, c);
    xfree(tok);
    if (rc < 0) {
        c->waiting--;
        LOG_WARN(EM_LOG, "cannot start token review: %s", strerror(-rc));
        unauthorized(c);
        finish(c);
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/server: the HTTPS listener of the external metrics API and
 * its lifecycle: creation with its defaults, the client CAs the TLS
 * handshake asks for (front proxy and client certificates), and closing.
 * Requests are routed in route.c.
 *
 * Closing answers the calls waiting for the authorizer at once and frees
 * them on their callback; forwarded calls complete with -ECANCELED when the
 * upstream closes; the object is freed once httpd and the upstream closed. */
#include "extmetrics-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lifecycle -------------------------------------------------------------------- */

int extmetrics_new(uv_loop_t *loop, const struct extmetrics_config *cfg,
                   const struct extmetrics_provider *provider,
                   const struct extmetrics_authorizer *authorizer, struct extmetrics **out)
{
    if (!loop || !cfg || !provider || !provider->ops || !provider->ops->list || !out)
        return -EINVAL;
    if (!cfg->disable_auth && (!authorizer || !authorizer->ops ||
                               !authorizer->ops->authenticate_token || !authorizer->ops->authorize))
        return -EINVAL;
    struct extmetrics *em = xcalloc(1, sizeof(*em));
    int rc;
    em->loop = loop;
    em->cfg = *cfg;
    em->provider = *provider;
    if (authorizer)
        em->authz = *authorizer;
    if (!em->cfg.allow_plain_for_tests)
        em->cfg.listen.tls = true;
    if (!em->cfg.max_age_ms)
        em->cfg.max_age_ms = 120000;
    if (!em->cfg.authn_ttl_ms)
        em->cfg.authn_ttl_ms = 10000;
    if (!em->cfg.authz_ttl_ms)
        em->cfg.authz_ttl_ms = 10000;
    em->tokens.max = em->decisions.max = cfg->cache_entries ? cfg->cache_entries : 1024;
    em->client_verified.max = 64;
    if (!em->cfg.listen.name)
        em->cfg.listen.name = EM_LOG;
    if (!em->cfg.listen.max_body_bytes)
        em->cfg.listen.max_body_bytes = EXTMETRICS_MAX_BODY_BYTES;
    /* the aggregator sends a header per group of the user (SetAuthProxyHeaders):
     * a directory's user in hundreds of groups; Go's server limits only their
     * bytes (1 MiB) */
    if (!em->cfg.listen.max_header_bytes)
        em->cfg.listen.max_header_bytes = EXTMETRICS_MAX_HEADER_BYTES;
    if (!em->cfg.listen.max_headers)
        em->cfg.listen.max_headers = EXTMETRICS_MAX_HEADER_BYTES / 16;
    /* config strings are only used during setup, except the upstream ones
     * (copied by the upstream) */
    em->cfg.upstream_url = em->cfg.upstream_ca_file = em->cfg.upstream_cert_file = NULL;
    em->cfg.upstream_key_file = em->cfg.upstream_token_file = NULL;
    if (cfg->upstream_url) {
        rc = em_upstream_new(loop, cfg, &em->up);
        if (rc < 0) {
            LOG_ERROR(EM_LOG, "bad upstream configuration (%s)", cfg->upstream_url);
            xfree(em);
            return rc;
        }
        em->upstream_url = xstrdup(cfg->upstream_url);
    }
    /* the front proxy's certificate is checked per request against the
     * requestheader CA, which may come after the aggregator connected */
    em->cfg.listen.request_client_cert = true;
    rc = httpd_new(loop, &em->cfg.listen, em_on_request, em, &em->httpd);
    if (rc < 0) {
        if (em->up)
            em_upstream_close(em->up, NULL, NULL);
        xfree(em->upstream_url);
        xfree(em);
        return rc;
    }
    em->cfg.listen = (struct httpd_config){0}; /* strings were borrowed */
    *out = em;
    return 0;
}

/* The handshake asks for (and httpd checks) certificates of either CA; each
 * authenticator then checks its own. */
static int update_client_cas(struct extmetrics *em)
{
    struct util_buf b = {0};
    if (em->rh_pem)
        util_buf_printf(&b, "%s\n", em->rh_pem);
    if (em->client_pem)
        util_buf_printf(&b, "%s\n", em->client_pem);
    int rc = httpd_set_client_ca(em->httpd, b.data, b.len);
    util_buf_free(&b);
    return rc;
}

static char *pem_copy(const char *pem, size_t len)
{
    return pem ? xstrndup(pem, len) : NULL;
}

int extmetrics_set_requestheader(struct extmetrics *em, const struct extmetrics_requestheader *rh)
{
    int rc = em_rh_set(&em->rh, rh);
    if (rc < 0)
        return rc;
    xfree(em->rh_pem);
    em->rh_pem = rh ? pem_copy(rh->client_ca_pem, rh->client_ca_len) : NULL;
    return update_client_cas(em);
}

int extmetrics_set_client_ca(struct extmetrics *em, const char *pem, size_t len)
{
    X509_STORE *st = NULL;
    if (pem && len && !(st = em_store_from_pem(pem, len)))
        return -EINVAL;
    X509_STORE_free(em->client_store);
    em->client_store = st;
    em_cache_free(&em->client_verified); /* answers for the old store */
    xfree(em->client_pem);
    em->client_pem = st ? pem_copy(pem, len) : NULL;
    return update_client_cas(em);
}

bool extmetrics_client_ca_can_proxy(const struct extmetrics *em)
{
    return em->rh.enabled && em->rh.user_h.n > 0 && em->rh.allowed.n == 0 && em->rh_pem &&
           em->client_pem &&
           em_pem_share_cert(em->rh_pem, strlen(em->rh_pem), em->client_pem,
                             strlen(em->client_pem));
}

int extmetrics_port(const struct extmetrics *em)
{
    return httpd_port(em->httpd);
}

struct httpd *extmetrics_httpd(struct extmetrics *em)
{
    return em->httpd;
}

static void part_closed(void *arg)
{
    struct extmetrics *em = arg;
    if (--em->closing_parts > 0)
        return;
    extmetrics_close_cb cb = em->close_cb;
    void *cb_arg = em->close_arg;
    em_rh_free(&em->rh);
    X509_STORE_free(em->client_store);
    xfree(em->rh_pem);
    xfree(em->client_pem);
    em_cache_free(&em->tokens);
    em_cache_free(&em->decisions);
    em_cache_free(&em->client_verified);
    xfree(em->upstream_url);
    xfree(em);
    if (cb)
        cb(cb_arg);
}

void extmetrics_close(struct extmetrics *em, extmetrics_close_cb cb, void *arg)
{
    if (!em || em->closing)
        return;
    em->closing = true;
    em->close_cb = cb;
    em->close_arg = arg;
    /* calls waiting for the authorizer: answer now, free on their callback */
    struct em_call *c = em->calls, *next;
    for (; c; c = next) {
        next = c->next;
        if (!c->fwd) {
            em_call_answer_status(c, 503, "the server is shutting down");
            em_call_unlink(c);
            c->em = NULL;
        }
    }
    em->closing_parts = 1 + (em->up ? 1 : 0);
    if (em->up) /* forwarded calls complete with -ECANCELED */
        em_upstream_close(em->up, part_closed, em);
    httpd_close(em->httpd, part_closed, em);
}

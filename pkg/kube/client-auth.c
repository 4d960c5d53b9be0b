/* SPDX-License-Identifier: Apache-2.0 */
/* kube/client-auth: what the API client's requests carry to reach and
 * authenticate to the server: the token file and the client certificate
 * files, each read again when it changes (struct kube_auth, kube-int.h), the
 * warning for credentials sent over plain http, and the route for a
 * tls-server-name (kube_route). kube/client.c sends the requests; an exec
 * plugin's credential comes from kube/exec.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "kube-int.h"

#define TOKEN_CHECK_MS 1000
#define TOKEN_MAX_BYTES (64 << 10)

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Re-read the token file when it changed (checked at most once a second). */
static void refresh_token(struct kube_auth *a)
{
    uint64_t now = uv_now(a->loop);
    if (a->token_loaded && now - a->token_checked_at < TOKEN_CHECK_MS)
        return;
    a->token_checked_at = now;
    struct stat st;
    if (stat(a->cfg->token_file, &st) != 0) {
        if (!a->token_warned)
            LOG_WARN("kube", "token file %s: %s", a->cfg->token_file, strerror(errno));
        a->token_warned = true;
        return;
    }
    if (a->token_loaded && same_file(&st, &a->token_st))
        return;
    int fd = open(a->cfg->token_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char *buf = xmalloc(TOKEN_MAX_BYTES + 1);
    size_t len = 0;
    ssize_t n;
    while (len < TOKEN_MAX_BYTES &&
           (n = read(fd, buf + len, TOKEN_MAX_BYTES - len)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        len--;
    buf[len] = '\0';
    if (len > 0) {
        if (a->token_loaded)
            LOG_INFO("kube", "token file %s changed; using the new token", a->cfg->token_file);
        if (a->file_token)
            explicit_bzero(a->file_token, strlen(a->file_token));
        xfree(a->file_token);
        a->file_token = xstrdup(buf);
        a->token_st = st;
        a->token_loaded = true;
        a->token_warned = false;
    }
    explicit_bzero(buf, len);
    xfree(buf);
}

/* A whole file of at most max bytes (a client certificate or key), or NULL. */
static char *read_small(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = xmalloc(max + 1);
    size_t n = 0;
    ssize_t got;
    while (n < max && (got = read(fd, buf + n, max - n)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            close(fd);
            explicit_bzero(buf, n); /* a key, maybe */
            xfree(buf);
            return NULL;
        }
        n += (size_t)got;
    }
    close(fd);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Whether the PEM key is the PEM certificate's (both parse, and match). */
static bool key_pair_ok(const char *cert, size_t cl, const char *key, size_t kl)
{
    bool ok = false;
    BIO *cb = BIO_new_mem_buf(cert, (int)cl), *kb = BIO_new_mem_buf(key, (int)kl);
    X509 *x = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *pk = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    if (x && pk)
        ok = X509_check_private_key(x, pk) == 1;
    EVP_PKEY_free(pk);
    X509_free(x);
    BIO_free(cb);
    BIO_free(kb);
    return ok;
}

/* Re-read the client certificate and key files when either changed (checked at
 * most once a second, as client-go's rotating dialer does): a certificate
 * that cert-manager or Vault renews is used from then on, on new
 * connections, where the files' names alone kept the old one until it
 * expired and every request got 401. */
void kube_auth_refresh_certs(struct kube_auth *a)
{
    uint64_t now = uv_now(a->loop);
    if (a->certf && now - a->certf_checked_at < TOKEN_CHECK_MS)
        return;
    a->certf_checked_at = now;
    struct stat cs, ks;
    if (stat(a->cfg->cert_file, &cs) != 0 || stat(a->cfg->key_file, &ks) != 0)
        return; /* the files as last read (or the names, never read) */
    if (a->certf && same_file(&cs, &a->certf_st) && same_file(&ks, &a->keyf_st))
        return;
    size_t cl = 0, kl = 0;
    char *c = read_small(a->cfg->cert_file, 1 << 20, &cl);
    char *key = read_small(a->cfg->key_file, 1 << 20, &kl);
    /* a pair, as client-go's tls.X509KeyPair checks: one file replaced before the
     * other is read again at the next check, the pair before it used meanwhile */
    if (!c || !key || cl == 0 || kl == 0 || !key_pair_ok(c, cl, key, kl)) {
        if (!a->certf_warned && a->certf)
            LOG_WARN("kube", "client certificate %s and key %s changed but are not a pair "
                     "yet: the pair before is used", a->cfg->cert_file, a->cfg->key_file);
        else if (!a->certf_warned)
            LOG_WARN("kube", "client certificate %s or key %s could not be read",
                     a->cfg->cert_file, a->cfg->key_file);
        a->certf_warned = true;
        xfree(c);
        if (key)
            explicit_bzero(key, kl);
        xfree(key);
        return;
    }
    if (a->certf)
        LOG_INFO("kube", "client certificate %s changed: new connections use it",
                 a->cfg->cert_file);
    xfree(a->certf);
    if (a->keyf)
        explicit_bzero(a->keyf, a->keyf_len);
    xfree(a->keyf);
    a->certf = c, a->certf_len = cl, a->certf_st = cs;
    a->keyf = key, a->keyf_len = kl, a->keyf_st = ks;
    a->certf_warned = false;
}

const char *kube_auth_bearer(struct kube_auth *a)
{
    if (a->cfg->token_file) {
        refresh_token(a);
        if (a->file_token)
            return a->file_token;
    }
    return a->cfg->token;
}

void kube_auth_clear(struct kube_auth *a)
{
    if (a->file_token)
        explicit_bzero(a->file_token, strlen(a->file_token));
    xfree(a->file_token);
    xfree(a->certf);
    if (a->keyf)
        explicit_bzero(a->keyf, a->keyf_len);
    xfree(a->keyf);
}

/* tls-server-name (https only, as client-go): the URL names it, so TLS sends
 * it as SNI and checks the certificate against it, and CONNECT_TO sends the
 * connection to the server's own host and port (kube-int.h). The Host header
 * then carries the name too; the API server does not read it. */
void kube_route(const char *srv, const char *name, char **url_base, char **connect_to,
                char **host_header)
{
    *connect_to = NULL;
    *host_header = NULL;
    if (!name || strncmp(srv, "https://", 8) != 0) {
        *url_base = xstrdup(srv);
        return;
    }
    const char *auth = srv + 8, *slash = strchr(auth, '/');
    size_t alen = slash ? (size_t)(slash - auth) : strlen(auth), hlen = alen;
    const char *port = "443", *colon = NULL;
    if (auth[0] == '[') { /* [v6]:port */
        const char *rb = memchr(auth, ']', alen);
        hlen = rb ? (size_t)(rb - auth) + 1 : alen;
        if (rb && rb + 1 < auth + alen && rb[1] == ':')
            colon = rb + 1;
    } else {
        colon = memchr(auth, ':', alen);
        if (colon)
            hlen = (size_t)(colon - auth);
    }
    size_t plen = 3;
    if (colon) {
        port = colon + 1;
        plen = (size_t)(auth + alen - port);
    }
    *url_base = xasprintf("https://%s:%.*s%s", name, (int)plen, port, slash ? slash : "");
    *connect_to = xasprintf("%s:%.*s:%.*s:%.*s", name, (int)plen, port, (int)hlen, auth,
                            (int)plen, port);
    /* the server's authority as written, as client-go sends it: the name is for TLS only */
    *host_header = xasprintf("Host: %.*s", (int)alen, auth);
}

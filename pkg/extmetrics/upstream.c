/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/upstream: forwards requests for metrics gpuscaler does not own
 * to another external-metrics adapter (KEDA, prometheus-adapter), so both
 * can sit behind the one v1beta1.external.metrics.k8s.io APIService.
 *
 * Transport is pkg/httpc (libcurl multi on the loop). The upstream sees
 * gpuscaler's own identity: a bearer token (the ServiceAccount token file,
 * re-read at most once a minute since kubelet rotates it) and/or a client
 * certificate; with a client certificate the already authenticated caller
 * is passed on as X-Remote-User/-Uid/-Group/-Extra-* (front-proxy style), which
 * the upstream honours only if it trusts that certificate's CA. */
#include "extmetrics-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define TOKEN_REREAD_MS 60000

struct em_upstream {
    uv_loop_t *loop;
    struct httpc *hc;
    char *base;
    char *ca_file, *cert_file, *key_file, *token_file;
    bool insecure;
    uint64_t timeout_ms;
    size_t max_bytes;
    char *token;
    uint64_t token_read;
    void (*close_cb)(void *);
    void *close_arg;
};

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

int em_upstream_new(uv_loop_t *loop, const struct extmetrics_config *cfg,
                    struct em_upstream **out)
{
    const char *u = cfg->upstream_url;
    if (!u || (strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0))
        return -EINVAL;
    if (!cfg->upstream_cert_file != !cfg->upstream_key_file)
        return -EINVAL;
    struct em_upstream *up = xcalloc(1, sizeof(*up));
    int rc = httpc_new(loop, &up->hc);
    if (rc < 0) {
        xfree(up);
        return rc;
    }
    up->loop = loop;
    size_t n = strlen(u);
    while (n > 0 && u[n - 1] == '/')
        n--;
    up->base = xstrndup(u, n);
    up->ca_file = dup_or_null(cfg->upstream_ca_file);
    up->cert_file = dup_or_null(cfg->upstream_cert_file);
    up->key_file = dup_or_null(cfg->upstream_key_file);
    up->token_file = dup_or_null(cfg->upstream_token_file);
    up->insecure = cfg->upstream_insecure;
    up->timeout_ms = cfg->upstream_timeout_ms ? cfg->upstream_timeout_ms : 10000;
    up->max_bytes = cfg->upstream_max_bytes ? cfg->upstream_max_bytes : (8u << 20);
    *out = up;
    return 0;
}

static void on_httpc_closed(void *arg)
{
    struct em_upstream *up = arg;
    void (*cb)(void *) = up->close_cb;
    void *cb_arg = up->close_arg;
    xfree(up->base);
    xfree(up->ca_file);
    xfree(up->cert_file);
    xfree(up->key_file);
    xfree(up->token_file);
    xfree(up->token);
    xfree(up);
    if (cb)
        cb(cb_arg);
}

void em_upstream_close(struct em_upstream *up, void (*cb)(void *), void *arg)
{
    up->close_cb = cb;
    up->close_arg = arg;
    httpc_close(up->hc, on_httpc_closed, up);
}

/* The token file, re-read when older than a minute; NULL if unusable. */
static const char *token(struct em_upstream *up)
{
    if (!up->token_file)
        return NULL;
    uint64_t now = uv_now(up->loop);
    if (up->token && now - up->token_read < TOKEN_REREAD_MS)
        return up->token;
    int fd = open(up->token_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        LOG_WARN(EM_LOG, "cannot read upstream token file %s: %s", up->token_file,
                 strerror(errno));
        return up->token; /* keep using the last one */
    }
    char buf[16384];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return up->token;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        n--;
    buf[n] = '\0';
    xfree(up->token);
    up->token = xstrdup(buf);
    up->token_read = now;
    return up->token;
}

static bool header_safe(const char *s)
{
    for (; *s; s++)
        if (*s == '\r' || *s == '\n')
            return false;
    return true;
}

/* An extra key as a header name suffix, as client-go's SetAuthProxyHeaders
 * writes it (headerKeyEscape): every byte that is not an HTTP token byte, and
 * '%', is %XX-escaped. Keys are kept decoded ("acme.com/project"); a Go server
 * refuses a header name with a '/' or ':' in it before any authentication. */
static char *extra_header_key(const char *key)
{
    static const char token[] = "!#$&'*+-.^_`|~", hex[] = "0123456789ABCDEF";
    char *out = xmalloc(3 * strlen(key) + 1), *o = out;
    for (const unsigned char *k = (const unsigned char *)key; *k; k++) {
        bool plain = (*k >= '0' && *k <= '9') || (*k >= 'a' && *k <= 'z') ||
                     (*k >= 'A' && *k <= 'Z') || strchr(token, *k);
        if (plain) {
            *o++ = (char)*k;
        } else {
            *o++ = '%';
            *o++ = hex[*k >> 4];
            *o++ = hex[*k & 15];
        }
    }
    *o = '\0';
    return out;
}

int em_upstream_get(struct em_upstream *up, const char *target, const char *accept,
                    const struct em_user *user, httpc_done_cb cb, void *arg,
                    struct httpc_req **out)
{
    char *url = xasprintf("%s%s", up->base, target);
    char **lines = NULL;
    size_t nlines = 0;
#define ADD(...)                                                     \
    do {                                                             \
        lines = xrealloc(lines, (nlines + 2) * sizeof(char *));      \
        lines[nlines++] = xasprintf(__VA_ARGS__);                    \
        lines[nlines] = NULL;                                        \
    } while (0)
    if (accept && header_safe(accept))
        ADD("Accept: %s", accept);
    else
        ADD("Accept: application/json");
    if (up->cert_file && user && user->name && header_safe(user->name)) {
        ADD("X-Remote-User: %s", user->name);
        if (user->uid && *user->uid && header_safe(user->uid))
            ADD("X-Remote-Uid: %s", user->uid); /* honoured by requestheader-uid-headers */
        for (size_t i = 0; i < user->groups.n; i++)
            if (header_safe(user->groups.v[i]))
                ADD("X-Remote-Group: %s", user->groups.v[i]);
        for (size_t i = 0; i + 1 < user->extra.n; i += 2) {
            if (!header_safe(user->extra.v[i + 1]))
                continue;
            char *k = extra_header_key(user->extra.v[i]);
            ADD("X-Remote-Extra-%s: %s", k, user->extra.v[i + 1]);
            xfree(k);
        }
    }
#undef ADD
    struct httpc_tls tls = {.ca_file = up->ca_file, .cert_file = up->cert_file,
                            .key_file = up->key_file, .insecure = up->insecure};
    struct httpc_opts o = {
        .url = url,
        .method = "GET",
        .bearer = token(up),
        .headers = (const char *const *)lines,
        .tls = &tls,
        .timeout_ms = (int64_t)up->timeout_ms,
        .connect_timeout_ms = (int64_t)UTIL_MIN(up->timeout_ms, 5000),
        .max_body = up->max_bytes,
    };
    int rc = httpc_request(up->hc, &o, cb, arg, out);
    for (size_t i = 0; i < nlines; i++)
        xfree(lines[i]);
    xfree(lines);
    xfree(url);
    return rc;
}

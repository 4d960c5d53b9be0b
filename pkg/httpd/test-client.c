/* SPDX-License-Identifier: Apache-2.0 */
/* test-client: blocking HTTP/1.1 client for the httpd tests (see header). */
#include "test-client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int tc_connect(struct tc *c, const struct tc_opts *o)
{
    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0)
        return -1;
    int tmo = o->timeout_ms ? o->timeout_ms : 5000;
    struct timeval tv = {.tv_sec = tmo / 1000, .tv_usec = (tmo % 1000) * 1000};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (o->rcvbuf > 0)
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &o->rcvbuf, sizeof(o->rcvbuf));
    if (o->source) {
        struct sockaddr_in src = {.sin_family = AF_INET};
        if (inet_pton(AF_INET, o->source, &src.sin_addr) != 1 ||
            bind(c->fd, (struct sockaddr *)&src, sizeof(src)) != 0)
            goto fail;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        goto fail;
    if (!o->tls)
        return 0;
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (!c->ctx)
        goto fail;
    if (o->max_tls_version) {
        SSL_CTX_set_min_proto_version(c->ctx, 0);
        SSL_CTX_set_max_proto_version(c->ctx, o->max_tls_version);
        SSL_CTX_set_security_level(c->ctx, 0);
    }
    if (o->cert_file && (SSL_CTX_use_certificate_chain_file(c->ctx, o->cert_file) != 1 ||
                         SSL_CTX_use_PrivateKey_file(c->ctx, o->key_file, SSL_FILETYPE_PEM) != 1))
        goto fail;
    c->ssl = SSL_new(c->ctx);
    SSL_set_fd(c->ssl, c->fd);
    if (SSL_connect(c->ssl) != 1)
        goto fail;
    X509 *peer = SSL_get0_peer_certificate(c->ssl);
    if (peer)
        X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, c->peer_cn,
                                  sizeof(c->peer_cn));
    return 0;
fail:
    ERR_clear_error();
    tc_close(c);
    return -1;
}

int tc_send(struct tc *c, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = c->ssl ? SSL_write(c->ssl, p, (int)len) : send(c->fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int tc_send_str(struct tc *c, const char *s)
{
    return tc_send(c, s, strlen(s));
}

static ssize_t rd(struct tc *c, void *buf, size_t len)
{
    if (c->ssl) {
        int n = SSL_read(c->ssl, buf, (int)len);
        if (n <= 0) {
            ERR_clear_error();
            return -1;
        }
        return n;
    }
    ssize_t n = recv(c->fd, buf, len, 0);
    return n > 0 ? n : -1;
}

static int fill(struct tc *c)
{
    if (c->len >= sizeof(c->buf))
        return -1;
    ssize_t n = rd(c, c->buf + c->len, sizeof(c->buf) - c->len);
    if (n <= 0)
        return -1;
    c->len += (size_t)n;
    return 0;
}

int tc_read_response(struct tc *c, struct tc_resp *r)
{
    memset(r, 0, sizeof(*r));
    char *end;
    for (;;) {
        end = c->len ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL;
        if (end)
            break;
        if (fill(c) < 0)
            return -1;
    }
    size_t hlen = (size_t)(end - c->buf) + 4;
    if (hlen >= sizeof(r->headers))
        return -1;
    memcpy(r->headers, c->buf, hlen);
    r->headers[hlen] = '\0';
    if (sscanf(r->headers, "HTTP/1.1 %d", &r->status) != 1)
        return -1;
    size_t clen = 0;
    const char *cl = strcasestr(r->headers, "\r\nContent-Length:");
    if (cl)
        clen = strtoul(cl + 17, NULL, 10);
    r->close = strcasestr(r->headers, "\r\nConnection: close") != NULL;
    if (clen >= sizeof(r->body))
        return -1;
    while (c->len < hlen + clen)
        if (fill(c) < 0)
            return -1;
    memcpy(r->body, c->buf + hlen, clen);
    r->body[clen] = '\0';
    r->body_len = clen;
    memmove(c->buf, c->buf + hlen + clen, c->len - hlen - clen);
    c->len -= hlen + clen;
    if (r->status == 100) /* interim: the real one follows */
        return tc_read_response(c, r);
    return 0;
}

int tc_wait_close(struct tc *c)
{
    char b[4096];
    if (c->len)
        return 1;
    if (c->ssl) {
        errno = 0;
        int n = SSL_read(c->ssl, b, sizeof(b));
        if (n > 0)
            return 1;
        int e = SSL_get_error(c->ssl, n);
        ERR_clear_error();
        if (e == SSL_ERROR_ZERO_RETURN || e == SSL_ERROR_SYSCALL || e == SSL_ERROR_SSL) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return -1;
            return 0;
        }
        return -1;
    }
    ssize_t n = recv(c->fd, b, sizeof(b), 0);
    if (n > 0)
        return 1;
    if (n == 0 || errno == ECONNRESET)
        return 0;
    return -1;
}

void tc_close(struct tc *c)
{
    if (c->ssl)
        SSL_free(c->ssl);
    if (c->ctx)
        SSL_CTX_free(c->ctx);
    if (c->fd >= 0)
        close(c->fd);
    c->ssl = NULL;
    c->ctx = NULL;
    c->fd = -1;
}

int tc_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* httpd/conn: one accepted connection: reads, TLS through memory BIOs,
 * request dispatch in order, responses, timeouts and closing.
 *
 * A connection owns a uv_tcp_t and a uv_timer_t (both embedded, memory
 * freed when both close callbacks have run). At most one request is with
 * the handler at a time (c->busy); further pipelined input stays in the
 * parser's buffer, and reading stops while that buffer is over
 * HTTPD_PIPELINE_BUF (on TLS, what was read past it waits in the TLS layer
 * and is pumped into the parser whenever the parser wants more). The timer
 * enforces, depending on the phase: the header deadline (from accept or the
 * first byte of a request until the end of its headers, TLS handshake
 * included, never extended by more bytes), the body deadline (from the end
 * of the headers to the end of the body, never extended by more bytes
 * either, as Go's ReadTimeout bounds a whole request), and the keep-alive idle
 * limit (from the last answer; an answer being written extends it while the
 * client keeps taking some of it). A request's abort callback runs when its
 * connection closes, not when the peer only stops sending. */
#include "httpd-int.h"

#include <errno.h>
#include <linux/sockios.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>

struct wreq {
    uv_write_t req;
    size_t len;
    char data[];
};

static void conn_process(struct conn *c);
static void arm_timer(struct conn *c);

static const char *subsys(const struct conn *c)
{
    return c->srv->name;
}

/* ---- closing ------------------------------------------------------------ */

static void on_handle_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->open_handles > 0)
        return;
    struct httpd *srv = c->srv;
    hp_free(&c->hp);
    SSL_free(c->ssl); /* frees both BIOs */
    xfree(c->cn);
    xfree(c->chain_pem);
    xfree(c);
    srv_conn_gone(srv);
}

void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    srv_release(c->srv, c);
    struct hreq *r = c->busy;
    c->busy = NULL;
    if (r) {
        r->conn = NULL;
        if (r->abort_cb) {
            httpd_abort_cb cb = r->abort_cb;
            r->abort_cb = NULL;
            cb(&r->pub, r->abort_arg);
        }
    }
    if (c->prev)
        c->prev->next = c->next;
    else if (c->srv->conns == c)
        c->srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

#define LINGER_MS 2000

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

static void on_linger_timeout(uv_timer_t *t)
{
    conn_close(t->data);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct conn *c = req->handle->data;
    if (status < 0 && !c->closing)
        conn_close(c);
}

/* After the last response of a connection: half-close our side and read
 * (discarding) until the peer closes, so that unread request bytes do not
 * turn our close into a reset that could destroy the response in flight. */
static void conn_linger(struct conn *c)
{
    if (c->closing || c->lingering)
        return;
    c->lingering = true;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        conn_close(c);
        return;
    }
    if (!c->reading && uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->reading = true;
    uv_timer_start(&c->timer, on_linger_timeout, LINGER_MS, 0);
}

/* Part of a request has come and not all of it: its headers or body, a
 * TLS record not yet decrypted, or the TLS handshake before it. */
static bool receiving(struct conn *c)
{
    if (c->hp.in_message || hp_buffered(&c->hp) > 0)
        return true;
    if (!c->ssl)
        return false;
    if (!c->hs_done)
        return c->heard;
    return SSL_has_pending(c->ssl) || BIO_ctrl_pending(c->rbio) > 0;
}

/* Whether another request has come: its head whole in what is buffered,
 * or bytes still encrypted. */
static bool request_waiting(struct conn *c)
{
    if (hp_request_waiting(&c->hp))
        return true;
    return c->ssl && (SSL_pending(c->ssl) > 0 || BIO_ctrl_pending(c->rbio) > 0);
}

/* As Go's Server.Shutdown: idle connections close now; one with a request
 * in progress finishes it (being received: it is answered, with
 * "Connection: close", like one with the handler or being written) within
 * the grace period (on_grace closes what is left). One whose handshake ends
 * with no request is left to its header deadline or the grace period, as
 * Go leaves a new connection. */
void conn_shutdown(struct conn *c)
{
    if (c->busy || c->writes > 0)
        c->close_after_write = true;
    else if (!receiving(c))
        conn_close(c);
}

/* ---- writing ------------------------------------------------------------ */

/* Bytes of the answers the peer has taken: those handed to the kernel
 * (libuv's write queue holds the rest) less those the kernel still holds
 * unsent or unacknowledged; *drained when the kernel holds none. The
 * kernel's count, not libuv's: after the loop stalled, the timer runs before
 * the writes the peer made room for. */
static uint64_t taken(struct conn *c, bool *drained)
{
    uint64_t handed = c->bytes_out - c->tcp.write_queue_size;
    int fd = -1, outq = 0;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0 || ioctl(fd, SIOCOUTQ, &outq) != 0 ||
        outq < 0)
        outq = 0;
    if (drained)
        *drained = outq == 0;
    return (uint64_t)outq < handed ? handed - (uint64_t)outq : 0;
}

bool conn_write_stalled(struct conn *c, uint64_t ms)
{
    uint64_t now = uv_now(c->srv->loop);
    bool drained;
    uint64_t t = taken(c, &drained);
    if (drained || t != c->progress_taken) { /* drained: this loop is behind, not the peer */
        c->progress_taken = t;
        c->write_progress = now;
    }
    return now - c->write_progress >= ms;
}

static void on_written(uv_write_t *req, int status)
{
    struct wreq *w = util_container_of(req, struct wreq, req);
    struct conn *c = req->handle->data;
    xfree(w);
    c->writes--;
    c->write_progress = c->idle_from = uv_now(c->srv->loop);
    if (c->writes > 0) /* the baseline for the writes still pending; the next write's
                          own start takes one otherwise */
        c->progress_taken = taken(c, NULL);
    if (c->closing)
        return;
    if (status < 0) {
        LOG_DEBUG(subsys(c), "write to %s failed: %s", c->addr, uv_strerror(status));
        conn_close(c);
        return;
    }
    if (c->writes == 0 && c->close_after_write && !c->busy) {
        conn_linger(c);
        return;
    }
    if (c->writes == 0 && !c->lingering && !c->processing) {
        conn_process(c); /* the client read: the requests it pipelined meanwhile */
        return;
    }
    if (!c->lingering)
        arm_timer(c);
}

static void sock_send(struct conn *c, const char *data, size_t len)
{
    if (c->closing || len == 0)
        return;
    c->bytes_out += len;
    if (c->writes == 0) {
        uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
        int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
        } else if (n < 0 && n != UV_EAGAIN) {
            LOG_DEBUG(subsys(c), "write to %s failed: %s", c->addr, uv_strerror(n));
            conn_close(c);
            return;
        }
        if (len == 0)
            return;
    }
    struct wreq *w = xmalloc(sizeof(*w) + len);
    memcpy(w->data, data, len);
    w->len = len;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc < 0) {
        xfree(w);
        LOG_DEBUG(subsys(c), "write to %s failed: %s", c->addr, uv_strerror(rc));
        conn_close(c);
        return;
    }
    if (c->writes++ == 0) {
        c->write_progress = uv_now(c->srv->loop);
        c->progress_taken = taken(c, NULL);
    }
}

/* Send whatever OpenSSL has queued for the network. */
static void flush_tls(struct conn *c)
{
    char *p;
    long n = BIO_get_mem_data(c->wbio, &p);
    if (n > 0) {
        sock_send(c, p, (size_t)n);
        (void)BIO_reset(c->wbio);
    }
}

/* Send plaintext, encrypting it on TLS connections. */
static void send_plain(struct conn *c, const char *data, size_t len, bool last)
{
    if (c->closing)
        return;
    if (!c->ssl) {
        sock_send(c, data, len);
        return;
    }
    while (len > 0) {
        int chunk = len > (1u << 30) ? (1 << 30) : (int)len;
        int n = SSL_write(c->ssl, data, chunk);
        if (n <= 0) {
            char err[256];
            tls_errors(err, sizeof(err));
            LOG_DEBUG(subsys(c), "TLS write to %s failed: %s", c->addr, err);
            conn_close(c);
            return;
        }
        data += n;
        len -= (size_t)n;
    }
    if (last)
        (void)SSL_shutdown(c->ssl); /* queue close_notify */
    flush_tls(c);
}

/* ---- responses ---------------------------------------------------------- */

static bool hdr_is(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

static bool valid_token_text(const char *s)
{
    for (; *s; s++)
        if (*s == '\r' || *s == '\n')
            return false;
    return true;
}

/* Build and send one response; closes after it when asked. As Go's
 * net/http (suppressedHeaders): a 1xx, 204 or 304 answer has no body, so
 * none is sent and neither is Content-Length (RFC 9110 8.6, 15.4.5), nor
 * Content-Type for a 304; what follows on the connection is the next
 * answer. An HTTP/1.0 request kept alive (it asked, with Connection:
 * keep-alive) is told so, as Go tells it: without the header its client
 * takes the connection for closing (RFC 9112 9.3, 1.0 keep-alive). */
static void send_response(struct conn *c, int status, const struct httpd_header *h, size_t nh,
                          const void *body, size_t len, bool head, bool close, bool http10)
{
    bool no_body = status < 200 || status == 204 || status == 304;
    struct util_buf b = {0};
    util_buf_printf(&b, "HTTP/1.1 %d %s\r\nDate: %s\r\n", status, httpd_status_text(status),
                    srv_date(c->srv));
    for (size_t i = 0; i < nh; i++) {
        if (!h[i].name || !h[i].value || !valid_token_text(h[i].name) ||
            !valid_token_text(h[i].value))
            continue;
        if (hdr_is(h[i].name, "Content-Length") || hdr_is(h[i].name, "Date") ||
            hdr_is(h[i].name, "Transfer-Encoding") ||
            (status == 304 && hdr_is(h[i].name, "Content-Type")))
            continue;
        if (hdr_is(h[i].name, "Connection")) {
            if (strcasecmp(h[i].value, "close") == 0)
                close = true;
            continue;
        }
        util_buf_printf(&b, "%s: %s\r\n", h[i].name, h[i].value);
    }
    if (!no_body)
        util_buf_printf(&b, "Content-Length: %zu\r\n", len);
    if (close)
        util_buf_puts(&b, "Connection: close\r\n");
    else if (http10)
        util_buf_puts(&b, "Connection: keep-alive\r\n");
    util_buf_puts(&b, "\r\n");
    if (!head && !no_body && len)
        util_buf_append(&b, body, len);
    if (close) {
        c->close_after_write = true;
        if (c->reading) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = false;
        }
    }
    send_plain(c, b.data, b.len, close);
    util_buf_free(&b);
    if (!c->closing && close && c->writes == 0 && !c->busy)
        conn_linger(c);
}

static void send_error(struct conn *c, int status)
{
    static const struct httpd_header h[] = {{"Content-Type", "text/plain; charset=utf-8"}};
    const char *text = httpd_status_text(status);
    char body[160];
    int n;
    if (status == 413) /* say the limit: a client cannot guess it */
        n = snprintf(body, sizeof(body),
                     "%d %s: a request body may be at most %zu bytes (chunk framing included)\n",
                     status, text, c->srv->cfg.max_body_bytes);
    else
        n = snprintf(body, sizeof(body), "%d %s\n", status, text);
    send_response(c, status, h, 1, body, (size_t)n, false, true, false);
}

int httpd_respond(struct httpd_request *pub, int status, const struct httpd_header *headers,
                  size_t nheaders, const void *body, size_t len)
{
    struct hreq *r = util_container_of(pub, struct hreq, pub);
    struct conn *c = r->conn;
    int rc = 0;
    if (!c || c->closing) {
        rc = -ECONNRESET;
        goto out;
    }
    c->busy = NULL;
    r->conn = NULL;
    /* A 1xx is not a final answer. Go's net/http sends a handler's 1xx as an
     * interim answer and then, the handler having written nothing more, a
     * 200 with no body; here the one answer of a request is final, so that
     * would hide the handler's bug behind an empty 200. Like a status out of
     * range it is answered 500 and the connection closed (Go's ReverseProxy
     * answers 502 when a backend's final answer is an unasked-for 101). */
    if (status < 200 || status > 999) {
        LOG_ERROR(subsys(c), "handler answered %s %s with invalid status %d", pub->method,
                  pub->path, status);
        send_error(c, 500);
        rc = -EINVAL;
        goto out;
    }
    /* a peer that half-closed after pipelining is owed the answers to the
     * requests it sent: the connection closes after the last of them */
    bool close = !pub->keep_alive || (c->eof && !request_waiting(c)) || c->srv->closing ||
                 c->close_after_write;
    c->completed++;
    c->last_done = c->idle_from = uv_now(c->srv->loop);
    send_response(c, status, headers, nheaders, body, len, r->is_head, close, r->http10);
    if (!c->closing && !c->processing)
        conn_process(c);
out:
    hreq_free(r);
    return rc;
}

void httpd_request_on_abort(struct httpd_request *pub, httpd_abort_cb cb, void *arg)
{
    struct hreq *r = util_container_of(pub, struct hreq, pub);
    r->abort_cb = cb;
    r->abort_arg = arg;
}

bool httpd_request_aborted(const struct httpd_request *pub)
{
    const struct hreq *r = util_container_of(pub, const struct hreq, pub);
    return r->conn == NULL || r->peer_eof;
}

const char *httpd_request_header(const struct httpd_request *req, const char *name)
{
    for (size_t i = 0; i < req->nheaders; i++)
        if (strcasecmp(req->headers[i].name, name) == 0)
            return req->headers[i].value;
    return NULL;
}

/* ---- request processing ------------------------------------------------- */

static void dispatch(struct conn *c, struct hreq *r)
{
    struct httpd_peer *peer = &r->pub.peer;
    snprintf(peer->addr, sizeof(peer->addr), "%s", c->addr);
    peer->tls = c->ssl != NULL;
    peer->client_cert = c->cert_presented;
    peer->client_cert_verified = c->cert_verified;
    if (c->cn) {
        r->cn = xstrdup(c->cn);
        peer->client_cn = r->cn;
    }
    if (c->chain_pem) {
        r->chain_pem = xstrdup(c->chain_pem);
        peer->client_chain_pem = r->chain_pem;
    }
    if (c->srv->closing || c->close_after_write)
        r->pub.keep_alive = false;
    r->conn = c;
    c->busy = r;
    c->head_start = c->body_start = 0;
    c->sent_continue = false; /* the next request's Expect gets its own 100 */
    c->srv->cb(&r->pub, c->srv->arg);
}

static void set_reading(struct conn *c, bool on);

static bool tls_pump(struct conn *c);

static void conn_process(struct conn *c)
{
    if (c->ssl && !c->closing && !tls_pump(c))
        return;
    if (c->ssl && !c->hs_done) {
        arm_timer(c);
        return;
    }
    c->processing = true;
    while (!c->closing && !c->busy && !c->close_after_write && c->writes == 0) {
        struct hreq *r = NULL;
        int rc = hp_next(&c->hp, &r);
        if (rc == 1) {
            dispatch(c, r);
            continue;
        }
        if (rc < 0) {
            LOG_DEBUG(subsys(c), "bad request from %s: answering %d", c->addr, c->hp.err_status);
            send_error(c, c->hp.err_status ? c->hp.err_status : 400);
            break;
        }
        /* the parser wants more: on TLS, what was pumped stopped at its
         * limit, and the rest (decrypted, or still encrypted in the BIO)
         * may be all the client sends; answered requests drained it */
        if (c->ssl && (SSL_pending(c->ssl) > 0 || BIO_ctrl_pending(c->rbio) > 0)) {
            size_t before = hp_buffered(&c->hp);
            if (!tls_pump(c))
                break;
            if (hp_buffered(&c->hp) > before)
                continue;
        }
        /* the header deadline runs until the end of the headers; a body
         * then has its own deadline, from there (arm_timer) */
        if (c->hp.in_message && c->hp.headers_done) {
            c->head_start = 0;
            if (c->body_start == 0)
                c->body_start = uv_now(c->srv->loop);
        } else if (c->hp.in_message && c->head_start == 0) {
            c->head_start = uv_now(c->srv->loop);
        }
        if (!c->hp.in_message)
            c->body_start = 0;
        if (c->hp.want_continue && c->hp.headers_done && !c->sent_continue) {
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            c->sent_continue = true;
            send_plain(c, cont, sizeof(cont) - 1, false);
        }
        if (!c->hp.in_message)
            c->sent_continue = false;
        if (c->eof && !c->busy && c->writes == 0) {
            conn_close(c);
            break;
        }
        break;
    }
    c->processing = false;
    if (c->closing)
        return;
    if (c->eof && !c->busy && c->writes == 0) {
        conn_close(c);
        return;
    }
    set_reading(c, !c->eof && !c->close_after_write && c->writes == 0 &&
                       hp_buffered(&c->hp) < HTTPD_PIPELINE_BUF);
    arm_timer(c);
}

/* ---- TLS input ---------------------------------------------------------- */

/* The leaf and the chain the client sent (a server's peer chain leaves the
 * leaf out, but not every TLS stack agrees: skip it if it is there), PEM. */
static char *peer_chain_pem(SSL *ssl, X509 *leaf)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (!b || PEM_write_bio_X509(b, leaf) != 1)
        goto out;
    STACK_OF(X509) *chain = SSL_get_peer_cert_chain(ssl);
    for (int i = 0; chain && i < sk_X509_num(chain); i++) {
        X509 *x = sk_X509_value(chain, i);
        if (X509_cmp(x, leaf) != 0 && PEM_write_bio_X509(b, x) != 1)
            goto out;
    }
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    if (n > 0 && data)
        out = xstrndup(data, (size_t)n);
out:
    BIO_free(b);
    ERR_clear_error();
    return out;
}

static void peer_cert_info(struct conn *c)
{
    X509 *cert = SSL_get0_peer_certificate(c->ssl);
    if (!cert)
        return;
    c->cert_presented = true;
    c->cert_verified = !c->verify_failed && SSL_get_verify_result(c->ssl) == X509_V_OK;
    c->chain_pem = peer_chain_pem(c->ssl, cert);
    X509_NAME *subj = X509_get_subject_name(cert);
    /* the last CN, as Go's pkix.Name (each CN overwrites CommonName) */
    int idx = -1;
    for (int i = -1; subj && (i = X509_NAME_get_index_by_NID(subj, NID_commonName, i)) >= 0;)
        idx = i;
    if (idx >= 0) {
        ASN1_STRING *d = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, idx));
        unsigned char *utf8 = NULL;
        int n = ASN1_STRING_to_UTF8(&utf8, d);
        if (n >= 0 && utf8) {
            c->cn = xstrndup((const char *)utf8, (size_t)n);
            if (strlen(c->cn) != (size_t)n) { /* embedded NUL: not a usable name */
                xfree(c->cn);
                c->cn = NULL;
                c->cert_verified = false;
            }
        }
        OPENSSL_free(utf8);
    }
}

static void tls_fail(struct conn *c, const char *what)
{
    char err[256];
    tls_errors(err, sizeof(err));
    LOG_DEBUG(subsys(c), "TLS %s with %s failed: %s", what, c->addr, err);
    flush_tls(c); /* the alert, if any */
    c->close_after_write = true;
    if (c->writes == 0)
        conn_close(c);
}

/* Decrypt what the BIO holds into the parser buffer. Returns false if the
 * connection is going away. */
static bool tls_pump(struct conn *c)
{
    if (!c->hs_done) {
        int r = SSL_do_handshake(c->ssl);
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            flush_tls(c);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return true;
            tls_fail(c, "handshake");
            return false;
        }
        c->hs_done = true;
        peer_cert_info(c);
        flush_tls(c);
    }
    char buf[16384];
    while (hp_buffered(&c->hp) < HTTPD_PIPELINE_BUF) {
        int n = SSL_read(c->ssl, buf, sizeof(buf));
        if (n > 0) {
            hp_append(&c->hp, buf, (size_t)n);
            continue;
        }
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            break;
        if (e == SSL_ERROR_ZERO_RETURN) { /* close_notify: no more requests */
            c->eof = true;
            break;
        }
        tls_fail(c, "read");
        return false;
    }
    flush_tls(c);
    return !c->closing;
}

/* ---- reading ------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;
    *buf = uv_buf_init(c->srv->rbuf, sizeof(c->srv->rbuf));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    if (c->closing)
        return;
    if (c->lingering) { /* discard until the peer closes */
        if (nread < 0)
            conn_close(c);
        return;
    }
    if (nread < 0) {
        if (nread != UV_EOF)
            LOG_DEBUG(subsys(c), "read from %s: %s", c->addr, uv_strerror((int)nread));
        c->eof = true;
        set_reading(c, false);
        if (nread != UV_EOF || (!c->busy && c->writes == 0)) {
            conn_close(c);
            return;
        }
        if (c->busy) {
            /* the peer may only have half-closed (sent its request, then
             * shut down its write side): the answer is still delivered, so
             * the handler is not told to give up (httpd_request_aborted()
             * says the peer stopped sending); a peer that closed entirely
             * is found out when the answer is written */
            c->busy->peer_eof = true;
            return;
        }
        conn_process(c);
        return;
    }
    if (nread == 0)
        return;
    c->heard = true;
    if (c->ssl)
        BIO_write(c->rbio, buf->base, (int)nread);
    else
        hp_append(&c->hp, buf->base, (size_t)nread);
    if (!c->busy) {
        conn_process(c);
        return;
    }
    if (c->ssl && !tls_pump(c))
        return;
    set_reading(c, hp_buffered(&c->hp) < HTTPD_PIPELINE_BUF);
}

static void set_reading(struct conn *c, bool on)
{
    if (c->closing || c->lingering || on == c->reading)
        return;
    if (on) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
            c->reading = true;
    } else {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

/* ---- timer -------------------------------------------------------------- */

static void on_timer(uv_timer_t *t)
{
    struct conn *c = t->data;
    if (c->closing)
        return;
    if (c->writes > 0 && !c->head_start && !c->hp.in_message &&
        !conn_write_stalled(c, c->srv->cfg.idle_timeout_ms)) {
        /* an answer is being written and the client took some of it in
         * the limit: slow, but not idle (one write of a large answer
         * outlasts it) */
        if (c->write_progress > c->idle_from)
            c->idle_from = c->write_progress;
        arm_timer(c);
        return;
    }
    if (c->writes == 0 && !c->head_start && !c->hp.in_message &&
        uv_now(c->srv->loop) < c->idle_from + c->srv->cfg.idle_timeout_ms) {
        arm_timer(c); /* a look at a write that has ended since: idle from its end */
        return;
    }
    LOG_DEBUG(subsys(c), "closing %s: %s timeout", c->addr,
              c->head_start ? "header" : (c->hp.in_message ? "body" : "idle"));
    if (c->head_start && c->hp.in_message && c->writes == 0 && !c->busy && c->hs_done)
        send_error(c, 408);
    else
        conn_close(c);
}

static void arm_timer(struct conn *c)
{
    if (c->closing || c->lingering)
        return;
    const struct httpd_config *cfg = &c->srv->cfg;
    uint64_t now = uv_now(c->srv->loop);
    uint64_t ms;
    if (c->busy) {
        uv_timer_stop(&c->timer);
        return;
    }
    if (c->head_start) {
        uint64_t end = c->head_start + cfg->header_timeout_ms;
        ms = end > now ? end - now : 1;
    } else if (c->hp.in_message) {
        uint64_t end = (c->body_start ? c->body_start : now) + cfg->body_timeout_ms;
        ms = end > now ? end - now : 1;
    } else {
        uint64_t end = c->idle_from + cfg->idle_timeout_ms;
        ms = end > now ? end - now : 1;
        /* an answer being written is looked at four times a limit: the
         * client's progress is dated when a look sees it, so a client that
         * stopped reading is cut within 1.25 limits (once a limit, one that
         * took the socket buffers' worth in the first millisecond was cut
         * after two) */
        uint64_t look = cfg->idle_timeout_ms / 4 ? cfg->idle_timeout_ms / 4 : 1;
        if (c->writes > 0 && ms > look)
            ms = look;
    }
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* ---- accept ------------------------------------------------------------- */

void conn_accept(struct httpd *srv)
{
    struct conn *c = xcalloc(1, sizeof(*c));
    c->srv = srv;
    uv_tcp_init(srv->loop, &c->tcp);
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->open_handles = 2;
    struct hp_limits lim = {.max_header_bytes = srv->cfg.max_header_bytes,
                            .max_headers = srv->cfg.max_headers,
                            .max_body_bytes = srv->cfg.max_body_bytes};
    hp_init(&c->hp, &lim);
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    snprintf(c->addr, sizeof(c->addr), "?");

    int rc = uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)&c->tcp);
    if (rc < 0) {
        LOG_WARN(srv->name, "accept failed: %s", uv_strerror(rc));
        conn_close(c);
        return;
    }
    struct sockaddr_storage ss;
    int sl = sizeof(ss);
    unsigned char src[16] = {0};
    size_t srclen = 0; /* an address we cannot read counts as one source (all zero) */
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0) {
        char ip[48] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&ss;
            uv_ip4_name(in, ip, sizeof(ip));
            port = ntohs(in->sin_port);
            snprintf(c->addr, sizeof(c->addr), "%s:%d", ip, port);
            memcpy(src, &in->sin_addr, 4);
            srclen = 4;
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(in6, ip, sizeof(ip));
            port = ntohs(in6->sin6_port);
            snprintf(c->addr, sizeof(c->addr), "[%s]:%d", ip, port);
            memcpy(src, &in6->sin6_addr, 16);
            srclen = 16;
        }
    }
    c->accepted_at = c->idle_from = uv_now(srv->loop);
    if (!srv_admit(srv, c, src, srclen ? srclen : 4))
        return; /* refused: closed, counted and logged */
    uv_tcp_nodelay(&c->tcp, 1);
    if (srv->cfg.tls) {
        c->ssl = SSL_new(srv->ctx);
        c->rbio = BIO_new(BIO_s_mem());
        c->wbio = BIO_new(BIO_s_mem());
        if (!c->ssl || !c->rbio || !c->wbio) {
            BIO_free(c->rbio);
            BIO_free(c->wbio);
            c->rbio = c->wbio = NULL;
            LOG_ERROR(srv->name, "cannot create TLS state for %s", c->addr);
            conn_close(c);
            return;
        }
        BIO_set_mem_eof_return(c->rbio, -1);
        BIO_set_mem_eof_return(c->wbio, -1);
        SSL_set_bio(c->ssl, c->rbio, c->wbio);
        SSL_set_app_data(c->ssl, c);
        SSL_set_accept_state(c->ssl);
        if (srv->client_store)
            SSL_set1_verify_cert_store(c->ssl, srv->client_store);
        if (srv->client_store || srv->cfg.request_client_cert)
            SSL_set_verify(c->ssl, SSL_VERIFY_PEER, tls_verify_cb); /* never fails it */
    } else {
        c->hs_done = true;
    }
    c->head_start = uv_now(srv->loop);
    set_reading(c, true);
    arm_timer(c);
}

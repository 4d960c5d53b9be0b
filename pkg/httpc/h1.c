/* SPDX-License-Identifier: Apache-2.0 */
/* httpc/h1: one plain HTTP/1.1 GET on its own TCP connection, closed after
 * the response, driven directly by libuv and parsed by llhttp.
 *
 * Why it exists: a scraper visits 10,000 pods every 5 s, each on a new
 * "Connection: close" connection to an IP literal. Through libcurl each such
 * request costs about 22 system calls (curl asks getsockname/getpeername
 * three and two times, polls the socket twice, sets flags one by one) and a
 * connection object, URL parse and progress bookkeeping in user space;
 * measured with bench/controller.py, libcurl and the allocations it makes
 * were a quarter of the daemon's CPU. Here the same request is a socket,
 * connect, write, reads and close. httpc.c sends a request this way only
 * when nothing in it needs curl (see h1_eligible in httpc.c); everything
 * else, HTTPS and kept-alive connections above all, stays on curl.
 *
 * Two parts: h1_parser turns response bytes into a status, a header block
 * and body pieces (no I/O, fuzzed by fuzz/fuzz-h1.c); h1_conn owns the
 * socket and the timer, and reports exactly once through on_done unless the
 * owner aborted it first. A conn frees itself after its handles closed. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "httpc-int.h"
#include "httpc.h"
#include "util/util.h"

/* ---- response parser ---------------------------------------------------- */

static struct h1_parser *of(llhttp_t *h)
{
    return util_container_of(h, struct h1_parser, http);
}

static int hdr_add(struct h1_parser *p, const char *s, size_t n)
{
    p->hdr_bytes += n;
    if (p->hdr_bytes > HTTPC_MAX_HEADER_BYTES) {
        snprintf(p->errmsg, sizeof(p->errmsg), "response header block larger than %zu bytes",
                 (size_t)HTTPC_MAX_HEADER_BYTES);
        p->err = -EMSGSIZE;
        return HPE_USER;
    }
    util_buf_append(&p->hdr, s, n);
    return HPE_OK;
}

static int on_message_begin(llhttp_t *h)
{
    struct h1_parser *p = of(h);
    util_buf_reset(&p->hdr); /* a new response, e.g. after a 100 Continue */
    return HPE_OK;
}

static int on_header_field(llhttp_t *h, const char *at, size_t n)
{
    return hdr_add(of(h), at, n);
}

static int on_header_field_complete(llhttp_t *h)
{
    struct h1_parser *p = of(h);
    return hdr_add(p, ": ", 2);
}

static int on_header_value(llhttp_t *h, const char *at, size_t n)
{
    return hdr_add(of(h), at, n);
}

static int on_header_value_complete(llhttp_t *h)
{
    struct h1_parser *p = of(h);
    return hdr_add(p, "\r\n", 2);
}

static int on_headers_complete(llhttp_t *h)
{
    struct h1_parser *p = of(h);
    int status = h->status_code;
    if (status >= 100 && status < 200)
        return HPE_OK; /* an interim response: the real one follows */
    if (status < 100) {
        snprintf(p->errmsg, sizeof(p->errmsg), "invalid HTTP response: status %d", status);
        p->err = -EPROTO;
        return HPE_USER;
    }
    p->status = status;
    int rc = p->cb->on_headers(p->ud, status, p->hdr.data ? p->hdr.data : "", p->hdr.len);
    if (rc < 0) {
        p->err = rc;
        return HPE_USER;
    }
    return HPE_OK;
}

static int on_body(llhttp_t *h, const char *at, size_t n)
{
    struct h1_parser *p = of(h);
    int rc = p->cb->on_body(p->ud, at, n);
    if (rc < 0) {
        p->err = rc;
        return HPE_USER;
    }
    return HPE_OK;
}

static int on_message_complete(llhttp_t *h)
{
    struct h1_parser *p = of(h);
    if (p->status == 0)
        return HPE_OK; /* the end of an interim response */
    p->complete = true;
    return HPE_PAUSED; /* stop here: anything after the response is ignored */
}

void h1_parser_init(struct h1_parser *p, const struct h1_parser_cb *cb, void *ud)
{
    memset(p, 0, sizeof(*p));
    p->cb = cb;
    p->ud = ud;
    llhttp_settings_init(&p->settings);
    p->settings.on_message_begin = on_message_begin;
    p->settings.on_header_field = on_header_field;
    p->settings.on_header_field_complete = on_header_field_complete;
    p->settings.on_header_value = on_header_value;
    p->settings.on_header_value_complete = on_header_value_complete;
    p->settings.on_headers_complete = on_headers_complete;
    p->settings.on_body = on_body;
    p->settings.on_message_complete = on_message_complete;
    llhttp_init(&p->http, HTTP_RESPONSE, &p->settings);
}

void h1_parser_free(struct h1_parser *p)
{
    util_buf_free(&p->hdr);
}

static int parse_error(struct h1_parser *p, llhttp_errno_t e)
{
    if (p->err)
        return p->err;
    const char *reason = llhttp_get_error_reason(&p->http);
    snprintf(p->errmsg, sizeof(p->errmsg), "invalid HTTP response: %s (%s)",
             reason ? reason : "", llhttp_errno_name(e));
    return p->err = -EPROTO;
}

int h1_parser_feed(struct h1_parser *p, const char *data, size_t len)
{
    if (p->complete)
        return 1;
    if (p->err)
        return p->err;
    p->got_bytes |= len > 0;
    llhttp_errno_t e = llhttp_execute(&p->http, data, len);
    if (p->complete)
        return 1;
    if (e == HPE_OK)
        return 0;
    return parse_error(p, e);
}

int h1_parser_eof(struct h1_parser *p)
{
    if (p->complete)
        return 1;
    if (p->err)
        return p->err;
    llhttp_errno_t e = llhttp_finish(&p->http); /* a body delimited by the close ends here */
    if (p->complete)
        return 1;
    if (e != HPE_OK && e != HPE_PAUSED && e != HPE_INVALID_EOF_STATE)
        return parse_error(p, e);
    snprintf(p->errmsg, sizeof(p->errmsg), "%s",
             p->got_bytes ? "connection closed before the whole response arrived"
                          : "connection closed without a response (empty reply from server)");
    return p->err = -ECONNRESET;
}

/* ---- which requests, and their bytes ------------------------------------ */

static bool token_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f || s[i] == '#')
            return false;
    return true;
}

/* "host[:port]" of an http:// URL with an IP literal; the authority's end. */
static const char *parse_authority(const char *a, struct sockaddr_storage *sa)
{
    char ip[INET6_ADDRSTRLEN + 1];
    const char *end, *after;
    bool v6 = a[0] == '[';
    if (v6) {
        end = strchr(a, ']');
        if (!end)
            return NULL;
        after = end + 1;
        a++;
    } else {
        end = a + strcspn(a, ":/?");
        after = end;
    }
    size_t n = (size_t)(end - a);
    if (n == 0 || n >= sizeof(ip))
        return NULL;
    memcpy(ip, a, n);
    ip[n] = '\0';
    int port = 80;
    if (*after == ':') {
        port = 0;
        const char *d = after + 1;
        for (; *d >= '0' && *d <= '9' && port <= 65535; d++)
            port = port * 10 + (*d - '0');
        if (d == after + 1 || port < 1 || port > 65535)
            return NULL;
        after = d;
    }
    if (*after != '\0' && *after != '/' && *after != '?')
        return NULL;
    if (v6 ? uv_ip6_addr(ip, port, (struct sockaddr_in6 *)sa) != 0
           : uv_ip4_addr(ip, port, (struct sockaddr_in *)sa) != 0)
        return NULL;
    return after;
}

bool h1_prepare(const struct httpc_opts *o, struct sockaddr_storage *sa, char **request,
                size_t *len)
{
    /* what only curl does: TLS, kept-alive connections, decompression,
     * secrets (wiped after use), bodies, stall detection, name lookups, proxies */
    if (!o->no_reuse || !o->no_compression || o->bearer || o->body || o->stall_timeout_ms > 0 ||
        o->proxy || o->connect_to ||
        (o->method && strcasecmp(o->method, "GET") != 0) || strncasecmp(o->url, "http://", 7) != 0)
        return false;
    const char *auth = o->url + 7;
    memset(sa, 0, sizeof(*sa));
    const char *rest = parse_authority(auth, sa);
    if (!rest || !token_ok(auth, strlen(auth)))
        return false;
    bool accept = false;
    for (const char *const *h = o->headers; h && *h; h++) {
        if (strpbrk(*h, "\r\n"))
            return false;
        /* a credential in a header (basic auth, a proxy's): curl's block of
         * header lines is wiped after the request, this one's would not be */
        if (strncasecmp(*h, "Authorization:", 14) == 0 ||
            strncasecmp(*h, "Proxy-Authorization:", 20) == 0)
            return false;
        if (strncasecmp(*h, "Accept:", 7) == 0)
            accept = true;
    }
    struct util_buf b = {0};
    util_buf_printf(&b, "GET %s%s HTTP/1.1\r\nHost: %.*s\r\n", *rest == '/' ? "" : "/", rest,
                    (int)(rest - auth), auth);
    if (!accept)
        util_buf_puts(&b, "Accept: */*\r\n");
    for (const char *const *h = o->headers; h && *h; h++) {
        size_t n = strlen(*h);
        if (n && (*h)[n - 1] == ':')
            continue; /* "Name:" asks curl to leave a header out: nothing to send */
        util_buf_append(&b, *h, n);
        util_buf_puts(&b, "\r\n");
    }
    util_buf_puts(&b, "Connection: close\r\n\r\n");
    *len = b.len;
    *request = util_buf_steal(&b);
    return true;
}

/* ---- connection --------------------------------------------------------- */

/* The connect's bound when the request gives none: libcurl's default. */
#define H1_CONNECT_TIMEOUT_MS 300000

struct h1_conn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    uv_timer_t timer;
    struct h1_parser parser;
    const struct h1_conn_cb *cb;
    void *ud;
    char *request;         /* owned */
    size_t request_len;
    char *rbuf;            /* receive buffer, owned */
    size_t rcap;
    uint64_t deadline;     /* loop time the whole request times out, 0 = none */
    int64_t timeout_ms;    /* the timeout running now, for its message */
    int64_t total_ms;      /* the whole request's */
    int open;              /* libuv handles not yet closed */
    bool connected;
    bool finished;         /* reported or aborted: no more callbacks */
};

static void conn_freed(uv_handle_t *h)
{
    struct h1_conn *c = h->data;
    if (--c->open > 0)
        return;
    h1_parser_free(&c->parser);
    xfree(c->request);
    xfree(c->rbuf);
    xfree(c);
}

static void conn_close(struct h1_conn *c)
{
    c->finished = true;
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, conn_freed);
    if (!uv_is_closing((uv_handle_t *)&c->timer))
        uv_close((uv_handle_t *)&c->timer, conn_freed);
}

static void report(struct h1_conn *c, int err, const char *msg)
{
    if (c->finished)
        return;
    c->finished = true;
    c->cb->on_done(c->ud, err, msg);
    conn_close(c);
}

static void on_timeout(uv_timer_t *t)
{
    struct h1_conn *c = t->data;
    char msg[96];
    snprintf(msg, sizeof(msg), "%s timed out after %lld milliseconds",
             c->connected ? "Operation" : "Connection", (long long)c->timeout_ms);
    report(c, -ETIMEDOUT, msg);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct h1_conn *c = h->data;
    (void)suggested;
    if (!c->rbuf)
        c->rbuf = xmalloc(c->rcap);
    *buf = uv_buf_init(c->rbuf, (unsigned)c->rcap);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct h1_conn *c = s->data;
    (void)buf;
    if (c->finished || nread == 0)
        return;
    int rc;
    if (nread > 0)
        rc = h1_parser_feed(&c->parser, c->rbuf, (size_t)nread);
    else if (nread == UV_EOF)
        rc = h1_parser_eof(&c->parser);
    else {
        char msg[96];
        snprintf(msg, sizeof(msg), "Recv failure: %s", uv_strerror((int)nread));
        report(c, -ECONNRESET, msg);
        return;
    }
    if (rc == 1)
        report(c, 0, "");
    else if (rc < 0)
        report(c, rc, c->parser.errmsg);
}

static void on_written(uv_write_t *w, int status)
{
    struct h1_conn *c = w->data;
    if (status < 0 && !c->finished) {
        char msg[96];
        snprintf(msg, sizeof(msg), "Failed sending the request: %s", uv_strerror(status));
        report(c, -ECONNRESET, msg);
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    struct h1_conn *c = req->data;
    if (c->finished)
        return;
    if (status < 0) {
        char msg[96];
        snprintf(msg, sizeof(msg), "Failed to connect: %s", uv_strerror(status));
        report(c, status == UV_ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED, msg);
        return;
    }
    c->connected = true;
    c->timeout_ms = c->total_ms;
    if (c->deadline) { /* the connect timeout is over; the whole-request one goes on */
        uint64_t now = uv_now(c->tcp.loop);
        uv_timer_start(&c->timer, on_timeout, c->deadline > now ? c->deadline - now : 0, 0);
    } else { /* it bounded the connect only */
        uv_timer_stop(&c->timer);
    }
    uv_buf_t b = uv_buf_init(c->request, (unsigned)c->request_len);
    int rc = uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc == 0)
        rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        char msg[96];
        snprintf(msg, sizeof(msg), "Failed sending the request: %s", uv_strerror(rc));
        report(c, -ECONNRESET, msg);
    }
}

int h1_conn_start(uv_loop_t *loop, const struct sockaddr *addr, char *request, size_t request_len,
                  const struct h1_conn_opts *o, const struct h1_conn_cb *cb, void *ud,
                  struct h1_conn **out)
{
    struct h1_conn *c = xcalloc(1, sizeof(*c));
    c->cb = cb;
    c->ud = ud;
    c->request = request;
    c->request_len = request_len;
    c->rcap = o->recv_buffer ? o->recv_buffer : 16384;
    h1_parser_init(&c->parser, &cb->parse, ud);
    uv_tcp_init(loop, &c->tcp);
    uv_timer_init(loop, &c->timer);
    c->tcp.data = c->timer.data = c->connect.data = c->write.data = c;
    c->open = 2;
    /* the connect's bound: its own, or curl's default, never past the whole
     * request's; deadlines count from now, not from the loop's cached time,
     * which a slow callback earlier in this iteration left behind */
    int64_t first = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : H1_CONNECT_TIMEOUT_MS;
    uv_update_time(loop);
    if (o->timeout_ms > 0) {
        c->deadline = uv_now(loop) + (uint64_t)o->timeout_ms;
        if (first > o->timeout_ms)
            first = o->timeout_ms;
    }
    c->timeout_ms = first;
    c->total_ms = o->timeout_ms;
    int rc = uv_tcp_connect(&c->connect, &c->tcp, addr, on_connect);
    if (rc < 0) {
        c->request = NULL; /* stays the caller's on failure */
        conn_close(c);
        return rc;
    }
    uv_timer_start(&c->timer, on_timeout, (uint64_t)first, 0);
    *out = c;
    return 0;
}

void h1_conn_abort(struct h1_conn *c)
{
    if (c)
        conn_close(c);
}

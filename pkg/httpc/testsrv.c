/* SPDX-License-Identifier: Apache-2.0 */
/* testsrv: tiny keep-alive HTTP/1.1 server on the test's loop (see testsrv.h).
 * Test code: a setup step that fails aborts with its error, in every build
 * type (never assert(), which NDEBUG compiles away); a malformed request
 * closes its connection. */
#include "testsrv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"

struct testsrv_conn {
    uv_tcp_t tcp;
    struct testsrv *srv;
    struct testsrv_conn *next;
    struct util_buf in;
    unsigned id;
    bool busy;   /* a response is in progress: later requests wait */
    bool closed; /* uv_close called */
};

struct testsrv {
    uv_loop_t *loop;
    uv_tcp_t listener;
    testsrv_handler handler;
    void *arg;
    struct testsrv_conn *conns;
    unsigned accepts, requests;
    int port;
    char url[64];
    int open_handles;
    bool stopping;
};

struct wreq {
    uv_write_t w;
    char *data;
};

static void maybe_free(struct testsrv *s)
{
    if (s->stopping && s->open_handles == 0) {
        while (s->conns) {
            struct testsrv_conn *c = s->conns;
            s->conns = c->next;
            util_buf_free(&c->in);
            xfree(c);
        }
        xfree(s);
    }
}

static void on_closed(uv_handle_t *h)
{
    struct testsrv *s = h->data;
    s->open_handles--;
    maybe_free(s);
}

static void on_written(uv_write_t *w, int status)
{
    struct wreq *wr = util_container_of(w, struct wreq, w);
    (void)status;
    xfree(wr->data);
    xfree(wr);
}

static void conn_write(struct testsrv_conn *c, const char *data, size_t len)
{
    if (c->closed || len == 0)
        return;
    struct wreq *wr = xcalloc(1, sizeof(*wr));
    wr->data = xmalloc(len);
    memcpy(wr->data, data, len);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)len);
    if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
        xfree(wr->data);
        xfree(wr);
    }
}

void testsrv_conn_close(struct testsrv_conn *c)
{
    if (c->closed)
        return;
    c->closed = true;
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

bool testsrv_conn_closed(const struct testsrv_conn *c)
{
    return c->closed;
}

static void dispatch(struct testsrv_conn *c);

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    default: return "Status";
    }
}

void testsrv_respond(struct testsrv_conn *c, int status, const char *content_type,
                     const char *body, size_t len, const char *extra)
{
    struct util_buf b = {0};
    util_buf_printf(&b, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n", status, reason(status), len);
    if (content_type)
        util_buf_printf(&b, "Content-Type: %s\r\n", content_type);
    if (extra)
        util_buf_puts(&b, extra);
    util_buf_puts(&b, "\r\n");
    if (len)
        util_buf_append(&b, body, len);
    conn_write(c, b.data, b.len);
    util_buf_free(&b);
    c->busy = false;
    dispatch(c);
}

void testsrv_stream_begin(struct testsrv_conn *c, int status, const char *content_type)
{
    struct util_buf b = {0};
    util_buf_printf(&b, "HTTP/1.1 %d %s\r\nTransfer-Encoding: chunked\r\n", status,
                    reason(status));
    if (content_type)
        util_buf_printf(&b, "Content-Type: %s\r\n", content_type);
    util_buf_puts(&b, "\r\n");
    conn_write(c, b.data, b.len);
    util_buf_free(&b);
}

void testsrv_stream_chunk(struct testsrv_conn *c, const char *data, size_t len)
{
    if (len == 0)
        return;
    struct util_buf b = {0};
    util_buf_printf(&b, "%zx\r\n", len);
    util_buf_append(&b, data, len);
    util_buf_puts(&b, "\r\n");
    conn_write(c, b.data, b.len);
    util_buf_free(&b);
}

void testsrv_stream_end(struct testsrv_conn *c)
{
    conn_write(c, "0\r\n\r\n", 5);
    c->busy = false;
    dispatch(c);
}

bool testsrv_req_header(const struct testsrv_req *r, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    const char *p = r->headers;
    while (p && *p) {
        const char *eol = strstr(p, "\r\n");
        if (!eol)
            eol = p + strlen(p);
        if ((size_t)(eol - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            snprintf(out, outlen, "%.*s", (int)(eol - v), v);
            return true;
        }
        p = *eol ? eol + 2 : eol;
    }
    return false;
}

/* Parse and hand over the next complete request, if not busy. */
static void dispatch(struct testsrv_conn *c)
{
    while (!c->busy && !c->closed && c->in.len > 0) {
        char *end = strstr(c->in.data, "\r\n\r\n");
        if (!end) {
            /* Not HTTP at all (a TLS hello, say): hang up. */
            if (c->in.len > 0 && (c->in.data[0] < 'A' || c->in.data[0] > 'Z'))
                testsrv_conn_close(c);
            return;
        }
        size_t hlen = (size_t)(end - c->in.data) + 4;
        char *head = xstrndup(c->in.data, hlen - 2);
        char *sp1 = strchr(head, ' ');
        char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
        char *eol = strstr(head, "\r\n");
        if (!sp1 || !sp2 || !eol) { /* not a request line: hang up */
            xfree(head);
            testsrv_conn_close(c);
            return;
        }
        *sp1 = *sp2 = '\0';
        struct testsrv_req r = {.method = head, .target = sp1 + 1, .headers = eol + 2,
                                .conn_id = c->id};
        char cl[32];
        size_t blen = 0;
        if (testsrv_req_header(&r, "Content-Length", cl, sizeof(cl)))
            blen = strtoul(cl, NULL, 10);
        if (c->in.len < hlen + blen) {
            xfree(head);
            return;
        }
        char *body = xstrndup(c->in.data + hlen, blen);
        r.body = body;
        r.body_len = blen;
        memmove(c->in.data, c->in.data + hlen + blen, c->in.len - hlen - blen);
        c->in.len -= hlen + blen;
        c->in.data[c->in.len] = '\0';
        c->busy = true;
        c->srv->requests++;
        c->srv->handler(c, &r, c->srv->arg);
        xfree(head);
        xfree(body);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = xmalloc(suggested);
    buf->len = suggested;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct testsrv_conn *c = util_container_of((uv_tcp_t *)st, struct testsrv_conn, tcp);
    if (n > 0) {
        util_buf_append(&c->in, buf->base, (size_t)n);
        dispatch(c);
    } else if (n < 0) {
        testsrv_conn_close(c);
    }
    xfree(buf->base);
}

static void on_connection(uv_stream_t *l, int status)
{
    struct testsrv *s = l->data;
    if (status < 0)
        return; /* listener error: nothing to accept */
    struct testsrv_conn *c = xcalloc(1, sizeof(*c));
    c->srv = s;
    uv_tcp_init(s->loop, &c->tcp);
    c->tcp.data = s;
    s->open_handles++;
    c->next = s->conns;
    s->conns = c;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        testsrv_conn_close(c);
        return;
    }
    c->id = ++s->accepts;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

struct testsrv *testsrv_start(uv_loop_t *loop, testsrv_handler h, void *arg)
{
    struct testsrv *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->handler = h;
    s->arg = arg;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", 0, &addr);
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    s->open_handles = 1;
    int rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 64, on_connection);
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (rc == 0)
        rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len);
    if (rc != 0) {
        fprintf(stderr, "testsrv: cannot listen on 127.0.0.1: %s\n", uv_strerror(rc));
        abort();
    }
    s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", s->port);
    return s;
}

int testsrv_port(const struct testsrv *s)
{
    return s->port;
}

const char *testsrv_url(const struct testsrv *s)
{
    return s->url;
}

unsigned testsrv_accepts(const struct testsrv *s)
{
    return s->accepts;
}

unsigned testsrv_requests(const struct testsrv *s)
{
    return s->requests;
}

void testsrv_stop(struct testsrv *s)
{
    s->stopping = true;
    for (struct testsrv_conn *c = s->conns; c; c = c->next)
        testsrv_conn_close(c);
    uv_close((uv_handle_t *)&s->listener, on_closed);
}

/* ---- the loop driver --------------------------------------------------- */

struct run {
    uv_prepare_t prepare; /* checks the condition before every poll, */
    uv_check_t check;     /* ...and after it */
    uv_timer_t guard;     /* the time limit */
    testsrv_cond done;
    void *arg;
    bool timed_out;
    int open;
};

static void on_run_closed(uv_handle_t *h)
{
    struct run *r = h->data;
    if (--r->open == 0)
        xfree(r);
}

static void on_prepare(uv_prepare_t *p)
{
    struct run *r = p->data;
    if (r->done(r->arg))
        uv_stop(p->loop);
}

static void on_check(uv_check_t *c)
{
    struct run *r = c->data;
    if (r->done(r->arg))
        uv_stop(c->loop);
}

static void on_guard(uv_timer_t *t)
{
    struct run *r = t->data;
    r->timed_out = true;
    uv_stop(t->loop);
}

bool testsrv_run_until(uv_loop_t *loop, testsrv_cond done, void *arg, uint64_t timeout_ms)
{
    if (done(arg))
        return true;
    /* On the heap: the handles close on the caller's next run of the loop,
     * which then sees no more of this run's work than the condition asked. */
    struct run *r = xcalloc(1, sizeof(*r));
    r->done = done;
    r->arg = arg;
    r->open = 3;
    uv_prepare_init(loop, &r->prepare);
    uv_check_init(loop, &r->check);
    uv_timer_init(loop, &r->guard);
    r->prepare.data = r->check.data = r->guard.data = r;
    uv_prepare_start(&r->prepare, on_prepare);
    uv_check_start(&r->check, on_check);
    uv_update_time(loop); /* the limit counts from now, not from the last poll */
    uv_timer_start(&r->guard, on_guard, timeout_ms, 0);
    bool ok;
    while (!(ok = done(arg)) && !r->timed_out)
        uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&r->prepare, on_run_closed);
    uv_close((uv_handle_t *)&r->check, on_run_closed);
    uv_close((uv_handle_t *)&r->guard, on_run_closed);
    return ok;
}

struct count {
    const int *counter;
    int n;
};

static bool count_reached(void *arg)
{
    const struct count *c = arg;
    return *c->counter >= c->n;
}

static bool flag_set(void *arg)
{
    return *(const bool *)arg;
}

bool testsrv_run_until_count(uv_loop_t *loop, const int *counter, int n, uint64_t timeout_ms)
{
    struct count c = {counter, n}; /* done() is called only while the loop runs here */
    return testsrv_run_until(loop, count_reached, &c, timeout_ms);
}

bool testsrv_run_until_flag(uv_loop_t *loop, const bool *flag, uint64_t timeout_ms)
{
    return testsrv_run_until(loop, flag_set, (void *)flag, timeout_ms);
}

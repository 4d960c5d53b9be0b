/* SPDX-License-Identifier: Apache-2.0 */
/* httpd/parse: turns a connection's plaintext byte stream into complete
 * requests with llhttp, enforcing the header and body limits.
 *
 * Bytes are appended to a buffer and parsed on demand; the parser pauses at
 * the end of every message (HPE_PAUSED from on_message_complete) so that
 * pipelined requests are returned one at a time and the rest of the input
 * stays buffered until the caller asks for the next one. Strings of a
 * request are collected as offsets into one growable buffer and turned into
 * pointers once the message is complete. No I/O here: the fuzz entry point
 * drives exactly this code.
 *
 * The body limit counts a body as sent: a chunked body's framing (chunk-size
 * lines, chunk extensions, CRLFs, trailers) counts toward max_body_bytes with
 * its data, so a client cannot stream extension bytes or empty chunks without
 * end (Go's chunked reader refuses "too much non-data" for the same reason,
 * CVE-2023-39326). The parser also pauses at the end of the headers, so that
 * every llhttp_execute() run covers head bytes or body bytes, never both, and
 * the bytes it consumed in a body are the body's bytes on the wire. */
#include "httpd-int.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static struct hparser *P(llhttp_t *ll)
{
    return ll->data;
}

static int fail(struct hparser *p, int status)
{
    if (!p->err_status)
        p->err_status = status;
    return -1;
}

static int head_add(struct hparser *p, size_t n)
{
    p->head_bytes += n;
    if (p->head_bytes > p->lim.max_header_bytes)
        return fail(p, 431);
    return 0;
}

static int on_message_begin(llhttp_t *ll)
{
    struct hparser *p = P(ll);
    hreq_free(p->cur);
    p->cur = xcalloc(1, sizeof(*p->cur));
    p->in_message = true;
    p->headers_done = false;
    p->want_continue = false;
    p->head_bytes = 0;
    p->body_wire = 0;
    p->name_off = SIZE_MAX;
    p->cur->target_off = 0;
    return 0;
}

static int on_url(llhttp_t *ll, const char *at, size_t len)
{
    struct hparser *p = P(ll);
    if (head_add(p, len) < 0)
        return -1;
    util_buf_append(&p->cur->store, at, len);
    return 0;
}

static int on_url_complete(llhttp_t *ll)
{
    struct hparser *p = P(ll);
    util_buf_append(&p->cur->store, "", 1);
    return 0;
}

/* llhttp reports a chunked body's trailer fields through the header
 * callbacks too: they are counted against the head's limits and dropped, so
 * nothing sent after the body can pass for a header (an identity header
 * after the front proxy's own). */
static int on_header_field(llhttp_t *ll, const char *at, size_t len)
{
    struct hparser *p = P(ll);
    struct hreq *r = p->cur;
    if (head_add(p, len) < 0)
        return -1;
    if (p->headers_done)
        return 0;
    if (p->name_off == SIZE_MAX) {
        if (r->nhdr >= p->lim.max_headers)
            return fail(p, 431);
        p->name_off = r->store.len;
        if (head_add(p, 4) < 0) /* ": " and CRLF */
            return -1;
    }
    util_buf_append(&r->store, at, len);
    return 0;
}

static int on_header_field_complete(llhttp_t *ll)
{
    struct hparser *p = P(ll);
    struct hreq *r = p->cur;
    if (p->headers_done)
        return 0;
    if (p->name_off == SIZE_MAX) { /* empty name: llhttp rejects these, be safe */
        p->name_off = r->store.len;
    }
    util_buf_append(&r->store, "", 1);
    if (r->nhdr == r->hcap) {
        r->hcap = r->hcap ? r->hcap * 2 : 16;
        r->hoff = xrealloc(r->hoff, r->hcap * 2 * sizeof(size_t));
    }
    r->hoff[2 * r->nhdr] = p->name_off;
    r->hoff[2 * r->nhdr + 1] = r->store.len;
    r->nhdr++;
    p->name_off = SIZE_MAX;
    return 0;
}

static int on_header_value(llhttp_t *ll, const char *at, size_t len)
{
    struct hparser *p = P(ll);
    if (head_add(p, len) < 0)
        return -1;
    if (p->headers_done)
        return 0;
    util_buf_append(&p->cur->store, at, len);
    return 0;
}

static int on_header_value_complete(llhttp_t *ll)
{
    struct hparser *p = P(ll);
    struct hreq *r = p->cur;
    if (p->headers_done)
        return 0;
    /* strip trailing whitespace llhttp leaves in place */
    size_t start = r->hoff[2 * (r->nhdr - 1) + 1];
    while (r->store.len > start &&
           (r->store.data[r->store.len - 1] == ' ' || r->store.data[r->store.len - 1] == '\t'))
        r->store.len--;
    util_buf_append(&r->store, "", 1);
    return 0;
}

static const char *stored_header(const struct hreq *r, const char *name)
{
    for (size_t i = 0; i < r->nhdr; i++)
        if (strcasecmp(r->store.data + r->hoff[2 * i], name) == 0)
            return r->store.data + r->hoff[2 * i + 1];
    return NULL;
}

/* A Host value as Go's server takes it (httpguts.ValidHostHeader): a
 * reg-name, an IP literal or an IPv6 one in brackets, with an optional
 * port, as bytes of RFC 3986; empty is valid (no authority). */
static bool host_valid(const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              strchr("!$%&'()*+,-.:;=[]_~", c)))
            return false;
    }
    return true;
}

/* Exactly one valid Host header in an HTTP/1.1 request, as Go's server (and
 * so the API server the aggregator sits in) requires: 400 for none ("missing
 * required Host header"), two (a proxy and the server could each read
 * another) or a malformed one. HTTP/1.0 may go without. */
static int check_host(struct hparser *p, llhttp_t *ll)
{
    const struct hreq *r = p->cur;
    const char *host = NULL;
    int n = 0;
    for (size_t i = 0; i < r->nhdr; i++)
        if (strcasecmp(r->store.data + r->hoff[2 * i], "Host") == 0) {
            host = r->store.data + r->hoff[2 * i + 1];
            n++;
        }
    if (n > 1 || (n == 1 && !host_valid(host)))
        return fail(p, 400);
    if (n == 0 && (ll->http_major > 1 || (ll->http_major == 1 && ll->http_minor >= 1)) &&
        llhttp_get_method(ll) != HTTP_CONNECT)
        return fail(p, 400);
    return 0;
}

static int on_headers_complete(llhttp_t *ll)
{
    struct hparser *p = P(ll);
    struct hreq *r = p->cur;
    if (check_host(p, ll) < 0)
        return -1;
    const char *m = llhttp_method_name((llhttp_method_t)llhttp_get_method(ll));
    r->method_off = r->store.len;
    util_buf_append(&r->store, m, strlen(m) + 1);
    r->is_head = strcmp(m, "HEAD") == 0;
    r->http10 = ll->http_major == 1 && ll->http_minor == 0;
    if ((ll->flags & F_CONTENT_LENGTH) && ll->content_length > p->lim.max_body_bytes)
        return fail(p, 413);
    /* an HTTP/1.0 request's expectation is ignored (RFC 9110 10.1.1: a 1.0
     * client knows no interim answer; Go's server sends it none) */
    const char *expect = stored_header(r, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && !r->http10)
        p->want_continue = true;
    p->headers_done = true;
    p->head_paused = true;
    return HPE_PAUSED; /* hp_next counts what follows as the body */
}

static int on_body(llhttp_t *ll, const char *at, size_t len)
{
    struct hparser *p = P(ll);
    struct hreq *r = p->cur;
    if (r->body.len + len > p->lim.max_body_bytes)
        return fail(p, 413);
    util_buf_append(&r->body, at, len);
    return 0;
}

/* The origin-form part of a target: an absolute-form one
 * (`http://host:port/path?q`, which RFC 9112 section 3.2.2 says a server
 * must accept, and Go's does) from the path after its authority on, "" for
 * none (the path "/"); any other as it is. */
static const char *origin_form(const char *t)
{
    size_t skip = strncasecmp(t, "http://", 7) == 0    ? 7
                  : strncasecmp(t, "https://", 8) == 0 ? 8
                                                       : 0;
    if (!skip)
        return t;
    return t + skip + strcspn(t + skip, "/?"); /* a '#' is the authority's (a bad host) */
}

/* Turn offsets into the pointers of the public view. */
static void finish(struct hparser *p, struct hreq *r)
{
    char *s = r->store.data;
    struct httpd_request *pub = &r->pub;
    r->hdrs = xcalloc(r->nhdr ? r->nhdr : 1, sizeof(*r->hdrs));
    for (size_t i = 0; i < r->nhdr; i++) {
        r->hdrs[i].name = s + r->hoff[2 * i];
        r->hdrs[i].value = s + r->hoff[2 * i + 1];
    }
    pub->headers = r->hdrs;
    pub->nheaders = r->nhdr;
    pub->method = s + r->method_off;
    pub->target = s + r->target_off;
    /* split path and query: copy the path so both are NUL-terminated */
    /* copies: appending may move the buffer the target lives in */
    char *target = xstrdup(origin_form(pub->target));
    char *q = strchr(target, '?');
    size_t plen = q ? (size_t)(q - target) : strlen(target);
    size_t path_off = r->store.len;
    if (plen == 0)
        util_buf_puts(&r->store, "/"); /* `http://host` or `http://host?q`: the path "/" */
    util_buf_append(&r->store, target, plen);
    util_buf_append(&r->store, "", 1);
    size_t query_off = r->store.len;
    util_buf_puts(&r->store, q ? q + 1 : "");
    util_buf_append(&r->store, "", 1);
    xfree(target);
    /* the buffer may have moved */
    s = r->store.data;
    for (size_t i = 0; i < r->nhdr; i++) {
        r->hdrs[i].name = s + r->hoff[2 * i];
        r->hdrs[i].value = s + r->hoff[2 * i + 1];
    }
    pub->method = s + r->method_off;
    pub->target = s + r->target_off;
    pub->path = s + path_off;
    pub->query = s + query_off;
    if (!r->body.data)
        util_buf_append(&r->body, "", 0);
    pub->body = r->body.data;
    pub->body_len = r->body.len;
    /* no protocol upgrades (or CONNECT) here: answer, then close */
    pub->keep_alive = llhttp_should_keep_alive(&p->ll) != 0 && !llhttp_get_upgrade(&p->ll);
}

static int on_message_complete(llhttp_t *ll)
{
    struct hparser *p = P(ll);
    struct hreq *r = p->cur;
    if (!r || !p->headers_done)
        return fail(p, 400);
    finish(p, r);
    p->done = r;
    p->cur = NULL;
    p->in_message = false;
    p->headers_done = false;
    p->want_continue = false;
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_url_complete = on_url_complete,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void hp_init(struct hparser *p, const struct hp_limits *lim)
{
    memset(p, 0, sizeof(*p));
    p->lim = *lim;
    p->name_off = SIZE_MAX;
    llhttp_init(&p->ll, HTTP_REQUEST, &settings);
    p->ll.data = p;
}

void hp_free(struct hparser *p)
{
    hreq_free(p->cur);
    hreq_free(p->done);
    util_buf_free(&p->in);
    p->cur = p->done = NULL;
}

void hp_append(struct hparser *p, const void *data, size_t len)
{
    util_buf_append(&p->in, data, len);
}

size_t hp_buffered(const struct hparser *p)
{
    return p->in.len - p->inpos;
}

bool hp_request_waiting(const struct hparser *p)
{
    if (p->done || p->in_message)
        return true;
    if (p->inpos >= p->in.len) /* (in.data may be NULL) */
        return false;
    const char *s = p->in.data + p->inpos, *e = p->in.data + p->in.len;
    while (s < e && (*s == '\r' || *s == '\n')) /* CRLFs between requests are ignored */
        s++;
    for (; s < e; s++)
        if (*s == '\n' && ((s + 1 < e && s[1] == '\n') ||
                            (s + 2 < e && s[1] == '\r' && s[2] == '\n')))
            return true;
    return false;
}

/* n more bytes of the current body consumed by the parser (data and
 * framing): over the limit, the stream is rejected with 413. */
static int body_wire_add(struct hparser *p, size_t n)
{
    p->body_wire += n;
    if (p->body_wire <= p->lim.max_body_bytes)
        return 0;
    fail(p, 413);
    p->failed = true;
    hreq_free(p->done); /* a message that just ended over the limit is refused too */
    p->done = NULL;
    return -EPROTO;
}

static void compact(struct hparser *p)
{
    if (p->inpos == p->in.len) {
        p->in.len = 0;
        p->inpos = 0;
        if (p->in.cap > 4 * HTTPD_PIPELINE_BUF)
            util_buf_free(&p->in);
        else if (p->in.data)
            p->in.data[0] = '\0';
    } else if (p->inpos > 4096 && p->inpos > p->in.len / 2) {
        memmove(p->in.data, p->in.data + p->inpos, p->in.len - p->inpos);
        p->in.len -= p->inpos;
        p->inpos = 0;
        p->in.data[p->in.len] = '\0';
    }
}

int hp_next(struct hparser *p, struct hreq **out)
{
    *out = NULL;
    if (p->failed)
        return -EPROTO;
    /* after the pause at the end of the headers the parser runs once more
     * even with no input left: a message without a body ends there */
    while (p->inpos < p->in.len || p->head_paused) {
        p->head_paused = false;
        const char *d = p->in.data + p->inpos;
        size_t n = p->in.len - p->inpos;
        /* the pause at the end of the headers makes this run all body */
        bool in_body = p->in_message && p->headers_done;
        llhttp_errno_t e = llhttp_execute(&p->ll, d, n);
        if (e == HPE_OK) {
            p->inpos += n;
            if (in_body && body_wire_add(p, n) < 0)
                return -EPROTO;
            break;
        }
        if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
            const char *pos = llhttp_get_error_pos(&p->ll);
            size_t used = pos && pos >= d && pos <= d + n ? (size_t)(pos - d) : n;
            p->inpos += used;
            if (in_body && body_wire_add(p, used) < 0)
                return -EPROTO;
            if (e == HPE_PAUSED_UPGRADE) {
                /* no upgrades here: answer this request, then stop */
                p->failed = true;
                if (p->done)
                    p->done->pub.keep_alive = false;
            } else {
                llhttp_resume(&p->ll);
            }
            if (p->done) {
                *out = p->done;
                p->done = NULL;
                compact(p);
                return 1;
            }
            if (p->failed)
                return -EPROTO;
            continue;
        }
        p->failed = true;
        if (!p->err_status)
            p->err_status = 400;
        return -EPROTO;
    }
    compact(p);
    return 0;
}

void hreq_free(struct hreq *r)
{
    if (!r)
        return;
    util_buf_free(&r->store);
    util_buf_free(&r->body);
    xfree(r->hoff);
    xfree(r->hdrs);
    xfree(r->cn);
    xfree(r->chain_pem);
    xfree(r);
}

/* ---- fuzz / test entry point ------------------------------------------ */

int httpd_parse_stream_for_test(const void *data, size_t len, size_t chunk)
{
    struct hp_limits lim = {.max_header_bytes = 4096, .max_headers = 32, .max_body_bytes = 8192};
    struct hparser p;
    hp_init(&p, &lim);
    const char *d = data;
    size_t off = 0;
    int count = 0, rc = 0;
    if (chunk == 0)
        chunk = len ? len : 1;
    while (off < len && rc >= 0) {
        size_t n = UTIL_MIN(chunk, len - off);
        hp_append(&p, d + off, n);
        off += n;
        for (;;) {
            struct hreq *r;
            int k = hp_next(&p, &r);
            if (k < 0) {
                rc = k;
                break;
            }
            if (k == 0)
                break;
            /* touch what a handler would */
            const struct httpd_request *q = &r->pub;
            size_t sum = strlen(q->method) + strlen(q->path) + strlen(q->query) + q->body_len;
            for (size_t i = 0; i < q->nheaders; i++)
                sum += strlen(q->headers[i].name) + strlen(q->headers[i].value);
            (void)sum;
            bool ka = q->keep_alive;
            hreq_free(r);
            count++;
            if (!ka) {
                rc = 0;
                off = len;
                break;
            }
        }
    }
    hp_free(&p);
    return rc < 0 ? rc : count;
}

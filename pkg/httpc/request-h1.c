/* SPDX-License-Identifier: Apache-2.0 */
/* httpc's requests carried by h1.c instead of curl: a GET to
 * http://<IP literal>/... with no_reuse and no_compression and no
 * credentials, body or stall timeout (a scrape of a pod) goes out on its own
 * TCP connection, parsed by llhttp, with the same callbacks, errors and
 * cancellation as a request through curl. At 2,000 such requests a second,
 * curl's per-connection work was most of the daemon's CPU.
 *
 * h1.c's callbacks fill the same fields of struct httpc_req as curl's
 * (response.c): the header block, the status, the buffered or streamed
 * body; its end queues the completion through hc_finish() like a transfer
 * curl completed. h1.c enforces the request's timeouts itself. */
#include "httpc.h"
#include "httpc-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"

static int h1_on_headers(void *ud, int status, const char *block, size_t len)
{
    struct httpc_req *r = ud;
    r->status = status;
    util_buf_reset(&r->hdrbuf);
    util_buf_append(&r->hdrbuf, block, len);
    for (const char *l = block; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        if (strncasecmp(l, "Content-Type:", 13) != 0)
            continue;
        const char *v = l + 13 + strspn(l + 13, " \t");
        size_t n = strcspn(v, "\r\n");
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        xfree(r->h1_ctype);
        r->h1_ctype = xstrndup(v, n);
    }
    return 0;
}

static int h1_on_body(void *ud, const char *p, size_t len)
{
    struct httpc_req *r = ud; /* as hc_on_write does for curl */
    if (r->cancelled)
        return -ECANCELED;
    if (r->on_data && r->status >= 200 && r->status < 300) {
        r->in_data = true;
        int rc = r->on_data(r, r->status, p, len, r->arg);
        r->in_data = false;
        if (rc < 0) {
            r->err = rc;
            r->why = ABORT_DATA_CB;
        }
        return rc < 0 ? rc : r->cancelled ? -ECANCELED : 0;
    }
    if (r->body.len + len > r->max_body) {
        r->err = -EMSGSIZE;
        r->why = ABORT_BODY_CAP;
        return -EMSGSIZE;
    }
    util_buf_append(&r->body, p, len);
    return 0;
}

static void h1_on_done(void *ud, int err, const char *msg)
{
    struct httpc_req *r = ud;
    r->h1 = NULL; /* it closes itself */
    if (r->cancelled)
        err = -ECANCELED;
    else if (r->err)
        err = r->err; /* what h1_on_body returned stopped the parse */
    if (err)
        snprintf(r->errbuf, sizeof(r->errbuf), "%s", msg);
    if (r->cancelled || r->err)
        hc_own_errmsg(r, err);
    hc_finish(r, err);
    hc_process(r->c);
}

static const struct h1_conn_cb h1_cbs = {
    .parse = {.on_headers = h1_on_headers, .on_body = h1_on_body},
    .on_done = h1_on_done,
};

/* Start r on its own connection; a failure to start is its result. */
void hc_h1_start(struct httpc_req *r, const struct httpc_opts *o,
                 const struct sockaddr_storage *sa, char *request, size_t len)
{
    size_t b = o->recv_buffer;
    struct h1_conn_opts ho = {
        .timeout_ms = o->timeout_ms,
        .connect_timeout_ms = o->connect_timeout_ms,
        .recv_buffer = !b ? 0 : b < 1024 ? 1024 : b > 524288 ? 524288 : b,
    };
    r->state = REQ_ACTIVE;
    int rc = h1_conn_start(r->c->loop, (const struct sockaddr *)sa, request, len, &ho, &h1_cbs, r,
                           &r->h1);
    if (rc < 0) {
        xfree(request);
        snprintf(r->errbuf, sizeof(r->errbuf), "Failed to connect: %s", uv_strerror(rc));
        hc_finish(r, -ECONNREFUSED);
        hc_kick(r->c);
    }
}

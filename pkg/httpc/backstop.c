/* SPDX-License-Identifier: Apache-2.0 */
/* httpc's backstop: a timer per request carried by curl, for the time
 * libcurl before 8.8 does not bound itself.
 *
 * libcurl 7.88 checks a transfer's timeouts, the connect timeout included,
 * only once the transfer has a connection, so one queued behind the per-host
 * cap or waiting to multiplex (PIPEWAIT) would wait forever. The backstop
 * takes such a request out of curl through the to-do list, like a cancel,
 * with -ETIMEDOUT and a message saying it was waiting for a connection:
 *
 *  - a request with a timeout: at timeout + HTTPC_BACKSTOP_SLACK_MS, whatever
 *    it is doing then;
 *  - a request without one (a watch: a stream that may last for hours, with
 *    a connect timeout only): at the connect timeout (0: curl's 300 s) + the
 *    slack, only if curl has not got it a connection by then. curl reports
 *    the connection through CURLOPT_PREREQFUNCTION (the connect, TLS and any
 *    proxy done, or a connection reused, just before the request is sent);
 *    the timer then stops, and a healthy stream is never ended.
 *
 * Both count from the start of the request, as the queued time counts with
 * libcurl 8.8 and later; the slack lets curl's own timeout, and its
 * message, win whenever curl does time the request out.
 *
 * The connect phase can come back: a request sent on a reused connection
 * that died before any byte of the answer (the peer closed it as the request
 * went out, or refused the HTTP/2 stream) is sent again by curl on a new
 * one, and that connect may queue like any other (on HTTP/2 the dead
 * connection can still count against the per-host cap while its other
 * streams end; the unit test lowers the cap on HTTP/1.1). libcurl 7.88
 * says so only in its verbose text, "Connection died, retrying a fresh
 * connect" (every retry, a refused stream's too; no CURLINFO tells), so a
 * request with the connect-phase backstop has CURLOPT_VERBOSE on with our
 * CURLOPT_DEBUGFUNCTION (it writes nothing: it only reads that line), and
 * the backstop starts again from the retry, as for a new connect; the next
 * CURLOPT_PREREQFUNCTION stops it again. That text stream carries the
 * request's headers too, the bearer token among them: the callback only
 * compares it, and nothing of it is logged or kept.
 *
 * Ownership: the timer is embedded in struct httpc_req and counted among the
 * client's libuv handles; once it was started the request's memory goes only
 * in its close callback (hc_backstop_close). */
#include "httpc.h"
#include "httpc-int.h"

#include <curl/curl.h>
#include <stdint.h>
#include <string.h>

#include "util/util.h"

/* CURLOPT_PREREQFUNCTION came with libcurl 7.80: before, a request without a
 * timeout has no backstop (nothing tells when its connect phase is over). */
#define HAVE_PREREQ (LIBCURL_VERSION_NUM >= 0x075000)

static void on_backstop_closed(uv_handle_t *h)
{
    struct httpc_req *r = util_container_of((uv_timer_t *)h, struct httpc_req, backstop);
    struct httpc *c = r->c;
    xfree(r);
    hc_handle_closed(c);
}

void hc_backstop_close(struct httpc_req *r)
{
    uv_close((uv_handle_t *)&r->backstop, on_backstop_closed);
}

/* The backstop fired: curl still has the request (queued for a connection,
 * as libcurl before 8.8 never times that out). Take it out like a cancel. */
static void on_backstop(uv_timer_t *t)
{
    struct httpc_req *r = util_container_of(t, struct httpc_req, backstop);
    if (r->state == REQ_DONE || r->cancelled || r->timed_out)
        return;
    if (r->backstop_connect && r->connected)
        return; /* connected in time: from here on only the peer ends it */
    r->timed_out = true;
    hc_todo_push(r);
}

void hc_backstop_start(struct httpc_req *r, int64_t timeout_ms, int64_t connect_timeout_ms)
{
    struct httpc *c = r->c;
    if (timeout_ms > 0) {
        r->backstop_ms = timeout_ms;
    } else {
        if (!HAVE_PREREQ || r->no_prereq)
            return;
        r->backstop_connect = true;
        r->backstop_ms =
            connect_timeout_ms > 0 ? connect_timeout_ms : HTTPC_DEFAULT_CONNECT_TIMEOUT_MS;
    }
    uv_timer_init(c->loop, &r->backstop);
    r->backstop.data = r;
    r->backstop_open = true;
    c->open_handles++;
    uv_update_time(c->loop); /* a slow callback before this one left the loop's clock behind */
    uv_timer_start(&r->backstop, on_backstop, (uint64_t)r->backstop_ms + HTTPC_BACKSTOP_SLACK_MS,
                   0);
}

#if HAVE_PREREQ
/* curl has the request's connection and is about to send the request. */
static int on_prereq(void *ud, char *primary_ip, char *local_ip, int primary_port,
                     int local_port)
{
    struct httpc_req *r = ud;
    (void)primary_ip;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    r->connected = true;
    if (r->backstop_connect && r->backstop_open)
        uv_timer_stop(&r->backstop); /* the connect phase is over */
    return CURL_PREREQFUNC_OK;
}

/* The connect phase is back (see the top): bound it again from now. */
static void backstop_rearm(struct httpc_req *r)
{
    r->connected = false;
    if (!r->backstop_connect || !r->backstop_open || r->state == REQ_DONE || r->timed_out)
        return;
    uv_update_time(r->c->loop);
    uv_timer_start(&r->backstop, on_backstop, (uint64_t)r->backstop_ms + HTTPC_BACKSTOP_SLACK_MS,
                   0);
}

/* curl's verbose text for the request: only the retry's line matters. */
/* curl's verbose stream. data may hold the request's headers, the bearer
 * token among them (CURLINFO_HEADER_OUT, and HTTP/2's header text): it is
 * only compared, never logged, copied or kept. The line is searched for, not
 * matched at the start: newer curl prefixes info text with trace tags
 * ("[xfer-conn] ") when its tracing is on. */
static int on_debug(CURL *e, curl_infotype type, char *data, size_t size, void *ud)
{
    static const char retry[] = "Connection died, retrying a fresh connect";
    (void)e;
    if (type == CURLINFO_TEXT && memmem(data, size, retry, sizeof(retry) - 1))
        backstop_rearm(ud);
    return 0;
}
#endif

void hc_backstop_watch_connect(struct httpc_req *r, CURL *e, int64_t timeout_ms)
{
#if HAVE_PREREQ
    /* a libcurl older than its headers refuses the option: no connect-phase
     * backstop then (it would end every request at its connect timeout) */
    if (curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PREREQDATA, r) != CURLE_OK) {
        r->no_prereq = true;
        return;
    }
    /* a retry's new connect: only the connect-phase backstop needs it (a
     * whole-request one bounds the retry too); verbose only with our
     * callback, which keeps curl's text off stderr */
    if (timeout_ms <= 0 && curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, on_debug) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_DEBUGDATA, r) == CURLE_OK)
        curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
#else
    (void)r;
    (void)e;
    (void)timeout_ms;
#endif
}

/* SPDX-License-Identifier: Apache-2.0 */
/* httpc's request lifecycle: the to-do list, completions taken out of curl,
 * and their delivery to the callbacks; httpc_cancel.
 *
 * libcurl forbids adding or removing easy handles from inside its own
 * callbacks, and our users may cancel or start requests from a streaming data
 * callback. So nothing is changed in the multi while c->in_curl is set:
 * cancellations, new requests and requests the backstop ended go on a to-do
 * list that hc_process() handles as soon as curl has returned. Completions
 * are queued and delivered by hc_process() too, one at a time, so a
 * completion callback can do anything (start, cancel, close) without
 * disturbing an iteration in progress.
 *
 * When our side decides a result (a cancel, a size cap, a data callback's
 * error, the backstop), the message is ours too: curl only saw a refused
 * write ("Failure writing output to destination").
 *
 * Ownership: struct httpc_req is allocated by httpc_request() and freed right
 * after its completion callback returns (after its backstop timer closed,
 * when it has one); its easy handle then goes back to the client's pool. */
#include "httpc.h"
#include "httpc-int.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

void hc_todo_push(struct httpc_req *r)
{
    struct httpc *c = r->c;
    if (r->on_todo)
        return;
    r->on_todo = true;
    r->todo_next = c->todo;
    c->todo = r;
    hc_kick(c);
}

void hc_finish(struct httpc_req *r, int result)
{
    struct httpc *c = r->c;
    if (r->state == REQ_DONE)
        return;
    if (r->state == REQ_ACTIVE && r->h1) {
        h1_conn_abort(r->h1); /* cancelled or closing: no callback from it any more */
        r->h1 = NULL;
    } else if (r->state == REQ_ACTIVE && r->easy) {
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
        curl_multi_remove_handle(c->multi, r->easy);
    }
    if (r->backstop_open)
        uv_timer_stop(&r->backstop);
    r->state = REQ_DONE;
    r->result = result;
    hc_parse_headers(r);
    r->done_next = NULL;
    if (c->done_tail)
        c->done_tail->done_next = r;
    else
        c->done_head = r;
    c->done_tail = r;
}

void hc_req_free(struct httpc_req *r)
{
    hc_easy_release(r->c, r->easy);
    r->easy = NULL;
    if (r->hdrs && r->hdrs_secret)
        explicit_bzero(r->hdrs, r->hdrs_len);
    xfree(r->hdrs);
    xfree(r->connect_to);
    util_buf_free(&r->body);
    util_buf_free(&r->hdrbuf);
    xfree(r->parsed);
    xfree(r->h1_ctype);
    if (r->backstop_open)
        hc_backstop_close(r);
    else
        xfree(r);
}

void hc_own_errmsg(struct httpc_req *r, int err)
{
    char *m = r->errbuf;
    size_t n = sizeof(r->errbuf);
    if (r->timed_out && err == -ETIMEDOUT)
        snprintf(m, n, "%s timed out after %lld milliseconds waiting for a connection",
                 r->backstop_connect ? "Connection" : "Operation", (long long)r->backstop_ms);
    else if (r->cancelled && err == -ECANCELED)
        snprintf(m, n, "request cancelled");
    else if (r->why == ABORT_HEADER_CAP)
        snprintf(m, n, "response header block larger than %zu bytes",
                 (size_t)HTTPC_MAX_HEADER_BYTES);
    else if (r->why == ABORT_DATA_CB)
        snprintf(m, n, "transfer aborted by the data callback: %s", strerror(-err));
    else if (r->why == ABORT_BODY_CAP || err == -EMSGSIZE) /* or curl's check of Content-Length */
        snprintf(m, n, "response body larger than the cap of %zu bytes", r->max_body);
}

static void deliver(struct httpc *c)
{
    if (c->delivering)
        return;
    c->delivering = true;
    struct httpc_req *r;
    while ((r = c->done_head) != NULL) {
        c->done_head = r->done_next;
        if (!c->done_head)
            c->done_tail = NULL;
        struct httpc_resp resp = {
            .status = r->status,
            .body = r->body.data ? r->body.data : "",
            .body_len = r->body.len,
            .errmsg = r->result ? r->errbuf : "",
            .req_ = r,
        };
        resp.content_type = httpc_resp_header(&resp, "Content-Type");
        if (r->result && r->errbuf[0] == '\0') {
            const char *m = r->result == -ECANCELED ? "request cancelled"
                            : r->result == -EMSGSIZE ? "response exceeds the size cap"
                                                      : strerror(-r->result);
            snprintf(r->errbuf, sizeof(r->errbuf), "%s", m);
        }
        if (r->prev)
            r->prev->next = r->next;
        else
            c->reqs = r->next;
        if (r->next)
            r->next->prev = r->prev;
        r->cb(r, r->result, &resp, r->arg);
        c->inflight--;
        hc_req_free(r);
    }
    c->delivering = false;
}

void hc_process(struct httpc *c)
{
    if (c->in_curl || c->dead)
        return;
    /* Pending adds and cancellations. */
    while (c->todo) {
        struct httpc_req *r = c->todo;
        c->todo = r->todo_next;
        r->on_todo = false;
        if (r->state == REQ_DONE) {
            /* completed before: the cancel or the backstop came too late */
        } else if (r->timed_out || r->cancelled) {
            int err = r->timed_out ? -ETIMEDOUT : -ECANCELED;
            hc_own_errmsg(r, err);
            hc_finish(r, err);
        } else if (r->state == REQ_PENDING_ADD) {
            CURLMcode mc = curl_multi_add_handle(c->multi, r->easy);
            if (mc != CURLM_OK) {
                snprintf(r->errbuf, sizeof(r->errbuf), "%s", curl_multi_strerror(mc));
                hc_finish(r, -EIO);
            } else {
                r->state = REQ_ACTIVE;
            }
        }
    }
    /* Completed transfers. */
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct httpc_req *r = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (r->state == REQ_DONE)
            continue;
        CURLcode res = msg->data.result;
        int err;
        if (r->cancelled) {
            err = -ECANCELED;
            hc_own_errmsg(r, err);
        } else if (res == CURLE_OK) {
            err = 0;
        } else if (r->err) {
            err = r->err;
            hc_own_errmsg(r, err);
        } else {
            err = httpc_curl_errno((int)res);
            if (res == CURLE_FILESIZE_EXCEEDED) /* our max_body, from Content-Length */
                hc_own_errmsg(r, err);
        }
        hc_finish(r, err);
    }
    deliver(c);
    if (c->closing && c->inflight == 0 && !c->dead)
        hc_close_handles(c);
}

static void on_kick(uv_timer_t *t)
{
    hc_process(util_container_of(t, struct httpc, kick));
}

void hc_kick(struct httpc *c)
{
    if (!c->dead && !uv_is_active((uv_handle_t *)&c->kick))
        uv_timer_start(&c->kick, on_kick, 0, 0);
}

int httpc_cancel(struct httpc_req *r)
{
    if (r->cancelled)
        return -EALREADY;
    r->cancelled = true;
    if (r->state != REQ_DONE)
        hc_todo_push(r); /* hc_process() takes it out of curl from the loop */
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* httpc: libcurl's multi interface driven by a libuv loop (see httpc.h).
 *
 * The socket and timer plumbing follows curl's docs/examples/multi-uv.c: curl
 * tells us which sockets to poll (on_socket) and when to call it back
 * (on_timer_set); every poll event or timer expiry runs
 * curl_multi_socket_action() and then drains curl_multi_info_read().
 *
 * libcurl forbids adding or removing easy handles from inside its own
 * callbacks, and our users may cancel or start requests from a streaming data
 * callback. So nothing is changed in the multi while c->in_curl is set:
 * cancellations and new requests go on a to-do list that process() handles
 * as soon as curl has returned. Completions are queued and delivered by
 * process() too, one at a time, so a completion callback can do anything
 * (start, cancel, close) without disturbing an iteration in progress.
 *
 * A request with a timeout also gets a timer of its own, the backstop, at
 * timeout + HTTPC_BACKSTOP_SLACK_MS: libcurl before 8.8 checks a transfer's
 * timeout only once it has a connection, so one queued behind the per-host
 * cap or waiting to multiplex (PIPEWAIT) would wait forever. The backstop
 * takes it out of curl through the to-do list, like a cancel, with
 * -ETIMEDOUT; the slack lets curl's own timeout, and its message, win
 * whenever curl does time the request out.
 *
 * When our side decides a result (a cancel, a size cap, a data callback's
 * error, the backstop), the message is ours too: curl only saw a refused
 * write ("Failure writing output to destination").
 *
 * Ownership: struct httpc_req is allocated by httpc_request() and freed right
 * after its completion callback returns (after its backstop timer closed,
 * when it has one); its easy handle is then reset and kept in the client's
 * pool (up to pool_max) for the next request. struct httpc is freed after
 * the last of its libuv handles (timer, kick, one poll per socket, the
 * requests' backstops) has closed.
 * libcurl's allocations are counted by alloc.c (httpc_memory_bytes). */
#include "httpc.h"
#include "httpc-int.h"

#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"

enum req_state { REQ_PENDING_ADD, REQ_ACTIVE, REQ_DONE };

/* Why our callbacks stopped a transfer (with req.err), for the message. */
enum req_abort { ABORT_NONE, ABORT_BODY_CAP, ABORT_HEADER_CAP, ABORT_DATA_CB };

/* How long after timeout_ms the backstop ends a request curl still holds. */
#define HTTPC_BACKSTOP_SLACK_MS 1000

struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
    struct httpc *c;
    struct sock_ctx *prev, *next; /* open sockets, to close them on shutdown */
};

struct hdr {
    const char *name;
    const char *value;
};

struct httpc_req {
    struct httpc *c;
    CURL *easy;
    struct curl_slist *hdrs; /* one block: nodes, then their strings (see header_block) */
    size_t hdrs_len;
    struct curl_slist *connect_to; /* one node and its string, or NULL */
    bool hdrs_secret;        /* holds a bearer token: wiped before it is freed */
    httpc_done_cb cb;
    void *arg;
    httpc_data_cb on_data;
    struct util_buf body;
    size_t max_body;
    struct util_buf hdrbuf; /* raw header block of the last response */
    struct hdr *parsed;     /* name/value pairs pointing into hdrbuf, after finish() */
    size_t nparsed;
    char errbuf[CURL_ERROR_SIZE];
    int err;    /* set by our callbacks: -EMSGSIZE or a data callback's return */
    enum req_abort why; /* ...and which of them */
    int result; /* final error code given to cb */
    long status;
    enum req_state state;
    bool cancelled;
    bool timed_out;     /* the backstop fired */
    bool backstop_open; /* backstop initialised: closed before r is freed */
    uv_timer_t backstop; /* timeout_ms + slack, for a request curl keeps queued */
    int64_t timeout_ms;
    bool on_todo;
    bool in_data; /* inside on_data: httpc_req_content_type() answers */
    struct h1_conn *h1; /* the request's connection when h1.c carries it (easy is NULL) */
    char *h1_ctype;     /* ...and its response's Content-Type, or NULL */
    struct httpc_req *prev, *next; /* every request not yet delivered */
    struct httpc_req *todo_next;   /* to-do list: pending adds and cancellations */
    struct httpc_req *done_next; /* completion queue */
};

struct httpc {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer; /* curl's timeout */
    uv_timer_t kick;  /* run process() from the loop */
    struct httpc_req *reqs; /* every request not yet delivered */
    struct sock_ctx *socks;
    struct httpc_req *todo;
    struct httpc_req *done_head, *done_tail;
    size_t inflight;
    int in_curl;       /* depth of calls into curl that may run our callbacks */
    bool delivering;
    bool closing;      /* httpc_close called */
    bool dead;         /* multi cleaned up, handles closing */
    int open_handles;  /* libuv handles not yet closed */
    httpc_close_cb close_cb;
    void *close_arg;
    CURL **pool;       /* idle easy handles, reset, for the next requests */
    size_t npool, pool_max;
};

static void process(struct httpc *c);


int httpc_curl_errno(int code)
{
    switch ((CURLcode)code) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return -EHOSTUNREACH;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_USE_SSL_FAILED:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_BAD_CONTENT_ENCODING:
        return -EPROTO;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return -ECONNRESET;
    case CURLE_FILESIZE_EXCEEDED:
        return -EMSGSIZE;
    case CURLE_URL_MALFORMAT:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_UNKNOWN_OPTION:
        return -EINVAL;
    case CURLE_UNSUPPORTED_PROTOCOL:
        return -ENOTSUP;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    default:
        return -EIO;
    }
}

/* ---- libuv handle bookkeeping ------------------------------------------ */

static void free_client(struct httpc *c)
{
    httpc_close_cb cb = c->close_cb;
    void *arg = c->close_arg;
    xfree(c);
    curl_global_cleanup();
    if (cb)
        cb(arg);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct httpc *c = h->data;
    if (--c->open_handles == 0 && c->dead)
        free_client(c);
}

static void on_sock_closed(uv_handle_t *h)
{
    struct sock_ctx *sc = util_container_of((uv_poll_t *)h, struct sock_ctx, poll);
    struct httpc *c = sc->c;
    xfree(sc);
    if (--c->open_handles == 0 && c->dead)
        free_client(c);
}

static void sock_close(struct sock_ctx *sc)
{
    struct httpc *c = sc->c;
    if (sc->prev)
        sc->prev->next = sc->next;
    else
        c->socks = sc->next;
    if (sc->next)
        sc->next->prev = sc->prev;
    uv_close((uv_handle_t *)&sc->poll, on_sock_closed); /* stops it: one epoll_ctl, not two */
}

/* ---- curl -> libuv (multi-uv.c) ---------------------------------------- */

static void action(struct httpc *c, curl_socket_t fd, int flags)
{
    int running = 0;
    c->in_curl++;
    CURLMcode mc = curl_multi_socket_action(c->multi, fd, flags, &running);
    c->in_curl--;
    if (mc != CURLM_OK)
        LOG_ERROR("httpc", "curl_multi_socket_action: %s", curl_multi_strerror(mc));
    process(c);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct sock_ctx *sc = util_container_of(h, struct sock_ctx, poll);
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    action(sc->c, sc->fd, flags);
}

static void on_timeout(uv_timer_t *t)
{
    struct httpc *c = util_container_of(t, struct httpc, timer);
    action(c, CURL_SOCKET_TIMEOUT, 0);
}

static int on_timer_set(CURLM *multi, long timeout_ms, void *userp)
{
    struct httpc *c = userp;
    (void)multi;
    if (c->dead)
        return 0;
    if (timeout_ms < 0) {
        uv_timer_stop(&c->timer);
    } else {
        if (timeout_ms == 0)
            timeout_ms = 1; /* 0 means "call socket_action now": do it from the loop */
        uv_timer_start(&c->timer, on_timeout, (uint64_t)timeout_ms, 0);
    }
    return 0;
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct httpc *c = userp;
    struct sock_ctx *sc = socketp;
    (void)easy;
    if (c->dead)
        return 0;
    switch (what) {
    case CURL_POLL_IN:
    case CURL_POLL_OUT:
    case CURL_POLL_INOUT: {
        if (!sc) {
            sc = xcalloc(1, sizeof(*sc));
            sc->fd = s;
            sc->c = c;
            int rc = uv_poll_init_socket(c->loop, &sc->poll, s);
            if (rc < 0) {
                LOG_ERROR("httpc", "uv_poll_init_socket(%d): %s", (int)s, uv_strerror(rc));
                xfree(sc);
                return -1;
            }
            sc->poll.data = c;
            c->open_handles++;
            sc->next = c->socks;
            if (c->socks)
                c->socks->prev = sc;
            c->socks = sc;
            curl_multi_assign(c->multi, s, sc);
        }
        int events = 0;
        if (what != CURL_POLL_IN)
            events |= UV_WRITABLE;
        if (what != CURL_POLL_OUT)
            events |= UV_READABLE;
        uv_poll_start(&sc->poll, events, on_poll);
        break;
    }
    case CURL_POLL_REMOVE:
        if (sc) {
            curl_multi_assign(c->multi, s, NULL);
            sock_close(sc);
        }
        break;
    default:
        break;
    }
    return 0;
}

/* ---- easy handle callbacks --------------------------------------------- */

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    struct httpc_req *r = ud;
    size_t len = size * nmemb;
    if (r->cancelled || r->err)
        return 0;
    long status = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    if (r->on_data && status >= 200 && status < 300) {
        r->in_data = true;
        int rc = r->on_data(r, status, p, len, r->arg);
        r->in_data = false;
        if (rc < 0) {
            r->err = rc;
            r->why = ABORT_DATA_CB;
            return 0;
        }
        return r->cancelled ? 0 : len;
    }
    if (r->body.len + len > r->max_body) {
        r->err = -EMSGSIZE;
        r->why = ABORT_BODY_CAP;
        return 0;
    }
    util_buf_append(&r->body, p, len);
    return len;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    struct httpc_req *r = ud;
    size_t len = size * nmemb;
    if (r->cancelled)
        return 0;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0)
        util_buf_reset(&r->hdrbuf); /* a new response (after 100 Continue) */
    if (r->hdrbuf.len + len > HTTPC_MAX_HEADER_BYTES) {
        r->err = -EMSGSIZE;
        r->why = ABORT_HEADER_CAP;
        return 0;
    }
    util_buf_append(&r->hdrbuf, p, len);
    return len;
}

/* Split the raw header block into name/value pairs in place. */
static void parse_headers(struct httpc_req *r)
{
    char *p = r->hdrbuf.data;
    if (!p)
        return;
    size_t cap = 0;
    while (*p) {
        char *eol = strchr(p, '\n');
        char *next = eol ? eol + 1 : p + strlen(p);
        char *end = eol ? eol : next;
        while (end > p && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
            end--;
        *end = '\0';
        char *colon = strchr(p, ':');
        if (colon && colon != p) {
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            if (r->nparsed == cap) {
                cap = cap ? cap * 2 : 16;
                r->parsed = xrealloc(r->parsed, cap * sizeof(*r->parsed));
            }
            r->parsed[r->nparsed++] = (struct hdr){p, v};
        }
        p = next;
    }
}

/* ---- request lifecycle ------------------------------------------------- */

static void kick(struct httpc *c);

static void todo_push(struct httpc_req *r)
{
    struct httpc *c = r->c;
    if (r->on_todo)
        return;
    r->on_todo = true;
    r->todo_next = c->todo;
    c->todo = r;
    kick(c);
}

/* Take the request out of curl and queue its completion. Never in curl. */
static void finish(struct httpc_req *r, int result)
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
    parse_headers(r);
    r->done_next = NULL;
    if (c->done_tail)
        c->done_tail->done_next = r;
    else
        c->done_head = r;
    c->done_tail = r;
}

/* Keep an easy handle for the next request, or destroy it. */
static void easy_release(struct httpc *c, CURL *e)
{
    if (!e)
        return;
    if (c->npool < c->pool_max && !c->closing && !c->dead) {
        curl_easy_reset(e);
        c->pool[c->npool++] = e;
        return;
    }
    curl_easy_cleanup(e);
}

static CURL *easy_take(struct httpc *c)
{
    return c->npool ? c->pool[--c->npool] : curl_easy_init();
}

static void on_backstop_closed(uv_handle_t *h)
{
    struct httpc_req *r = util_container_of((uv_timer_t *)h, struct httpc_req, backstop);
    struct httpc *c = r->c;
    xfree(r);
    if (--c->open_handles == 0 && c->dead)
        free_client(c);
}

/* Free r, or everything but its memory, which goes once its backstop closed. */
static void req_free(struct httpc_req *r)
{
    easy_release(r->c, r->easy);
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
        uv_close((uv_handle_t *)&r->backstop, on_backstop_closed);
    else
        xfree(r);
}

/* The backstop fired: curl still has the request (queued for a connection,
 * as libcurl before 8.8 never times that out). Take it out like a cancel. */
static void on_backstop(uv_timer_t *t)
{
    struct httpc_req *r = util_container_of(t, struct httpc_req, backstop);
    if (r->state == REQ_DONE || r->cancelled || r->timed_out)
        return;
    r->timed_out = true;
    todo_push(r);
}

/* Start r's backstop at timeout_ms + HTTPC_BACKSTOP_SLACK_MS from now. */
static void backstop_start(struct httpc_req *r, int64_t timeout_ms)
{
    struct httpc *c = r->c;
    r->timeout_ms = timeout_ms;
    uv_timer_init(c->loop, &r->backstop);
    r->backstop.data = r;
    r->backstop_open = true;
    c->open_handles++;
    uv_update_time(c->loop); /* a slow callback before this one left the loop's clock behind */
    uv_timer_start(&r->backstop, on_backstop, (uint64_t)timeout_ms + HTTPC_BACKSTOP_SLACK_MS, 0);
}

/* Replace what curl wrote about the refused write with what our side
 * decided: result err, from a cancel, the backstop, a cap or a data
 * callback. */
static void own_errmsg(struct httpc_req *r, int err)
{
    char *m = r->errbuf;
    size_t n = sizeof(r->errbuf);
    if (r->timed_out && err == -ETIMEDOUT)
        snprintf(m, n, "Operation timed out after %lld milliseconds waiting for a connection",
                 (long long)r->timeout_ms);
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
        req_free(r);
    }
    c->delivering = false;
}

static void close_handles(struct httpc *c)
{
    /* Idle cached connections still have sockets: stop polling them before
     * curl closes them; from here on on_socket/on_timer_set ignore curl. */
    while (c->socks)
        sock_close(c->socks);
    c->dead = true;
    while (c->npool)
        curl_easy_cleanup(c->pool[--c->npool]);
    xfree(c->pool);
    c->pool = NULL;
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->kick, on_handle_closed);
}

static void process(struct httpc *c)
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
            own_errmsg(r, err);
            finish(r, err);
        } else if (r->state == REQ_PENDING_ADD) {
            CURLMcode mc = curl_multi_add_handle(c->multi, r->easy);
            if (mc != CURLM_OK) {
                snprintf(r->errbuf, sizeof(r->errbuf), "%s", curl_multi_strerror(mc));
                finish(r, -EIO);
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
            own_errmsg(r, err);
        } else if (res == CURLE_OK) {
            err = 0;
        } else if (r->err) {
            err = r->err;
            own_errmsg(r, err);
        } else {
            err = httpc_curl_errno((int)res);
            if (res == CURLE_FILESIZE_EXCEEDED) /* our max_body, from Content-Length */
                own_errmsg(r, err);
        }
        finish(r, err);
    }
    deliver(c);
    if (c->closing && c->inflight == 0 && !c->dead)
        close_handles(c);
}

static void on_kick(uv_timer_t *t)
{
    process(util_container_of(t, struct httpc, kick));
}

static void kick(struct httpc *c)
{
    if (!c->dead && !uv_is_active((uv_handle_t *)&c->kick))
        uv_timer_start(&c->kick, on_kick, 0, 0);
}

/* ---- public API -------------------------------------------------------- */

int httpc_new(uv_loop_t *loop, struct httpc **out)
{
    *out = NULL;
    if (httpc_global_init() != 0)
        return -EIO;
    struct httpc *c = xcalloc(1, sizeof(*c));
    c->pool_max = HTTPC_DEFAULT_HANDLE_POOL;
    c->pool = xcalloc(c->pool_max, sizeof(*c->pool));
    c->loop = loop;
    c->multi = curl_multi_init();
    if (!c->multi) {
        xfree(c->pool);
        xfree(c);
        curl_global_cleanup();
        return -EIO;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer_set);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    /* Bound connections per host: a burst of API requests (a first tick over
     * 1,000 workloads) queues inside curl instead of opening hundreds of TLS
     * connections to the API server. */
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)HTTPC_DEFAULT_MAX_HOST_CONNS);
    uv_timer_init(loop, &c->timer);
    uv_timer_init(loop, &c->kick);
    c->timer.data = c;
    c->kick.data = c;
    c->open_handles = 2;
    *out = c;
    return 0;
}

/* ---- requests carried by h1.c ------------------------------------------ */

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
    struct httpc_req *r = ud; /* as on_write does for curl */
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
        own_errmsg(r, err);
    finish(r, err);
    process(r->c);
}

static const struct h1_conn_cb h1_cbs = {
    .parse = {.on_headers = h1_on_headers, .on_body = h1_on_body},
    .on_done = h1_on_done,
};

/* Start r on its own connection; a failure to start is its result. */
static void h1_start(struct httpc_req *r, const struct httpc_opts *o,
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
        finish(r, -ECONNREFUSED);
        kick(r->c);
    }
}

static bool method_is(const char *m, const char *want)
{
    return strcasecmp(m, want) == 0;
}

static int setup_tls(CURL *e, const struct httpc_tls *t)
{
    if (!t)
        return 0;
    if (t->ca_blob && t->ca_blob_len) {
#if LIBCURL_VERSION_NUM >= 0x074d00
        struct curl_blob b = {(void *)t->ca_blob, t->ca_blob_len, CURL_BLOB_COPY};
        if (curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b) != CURLE_OK)
            return -ENOTSUP;
#else
        return -ENOTSUP;
#endif
    } else if (t->ca_file) {
        curl_easy_setopt(e, CURLOPT_CAINFO, t->ca_file);
    }
    if (t->cert_blob && t->cert_blob_len) {
        struct curl_blob b = {(void *)t->cert_blob, t->cert_blob_len, CURL_BLOB_COPY};
        if (curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b) != CURLE_OK)
            return -ENOTSUP;
    } else if (t->cert_file) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, t->cert_file);
    }
    curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    if (t->key_blob && t->key_blob_len) {
        struct curl_blob b = {(void *)t->key_blob, t->key_blob_len, CURL_BLOB_COPY};
        if (curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b) != CURLE_OK)
            return -ENOTSUP;
    } else if (t->key_file) {
        curl_easy_setopt(e, CURLOPT_SSLKEY, t->key_file);
    }
    curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    if (t->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    return 0;
}

/* The header lines as a curl_slist in one block of our own, the nodes
 * followed by copies of the strings: one allocation instead of two per line
 * (libcurl only reads the list). *len gets the block's size. */

/* A connection's data unacknowledged for HTTPC_TCP_USER_TIMEOUT_MS ends it
 * (TCP_USER_TIMEOUT; it also bounds the keepalive probes). The API server's
 * connection is one HTTP/2 connection that every watch and write shares:
 * with a peer gone silently (a load balancer's state lost), a timed-out
 * request closes only its own stream, the next reuses the dead connection,
 * and with Lease renewals every 2 s there is always data in flight, so
 * keepalive never probes: the kernel retransmits for about 15 minutes.
 * client-go's HTTP/2 pings notice it in about 45 s. */
#define HTTPC_TCP_USER_TIMEOUT_MS 30000u

static int on_sockopt(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    (void)arg;
    if (purpose == CURLSOCKTYPE_IPCXN) {
        unsigned int ms = HTTPC_TCP_USER_TIMEOUT_MS;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms)); /* best effort */
    }
    return CURL_SOCKOPT_OK;
}

static struct curl_slist *header_block(const char *const *lines, size_t n, size_t *len)
{
    size_t bytes = n * sizeof(struct curl_slist);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(lines[i]) + 1;
    char *mem = xmalloc(bytes);
    struct curl_slist *nodes = (struct curl_slist *)(void *)mem;
    char *str = mem + n * sizeof(*nodes);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(lines[i]) + 1;
        memcpy(str, lines[i], l);
        nodes[i].data = str;
        nodes[i].next = i + 1 < n ? &nodes[i + 1] : NULL;
        str += l;
    }
    *len = bytes;
    return nodes;
}

int httpc_request(struct httpc *c, const struct httpc_opts *o, httpc_done_cb cb, void *arg,
                  struct httpc_req **out)
{
    struct httpc_req *r = NULL;
    int rc = 0;
    if (out)
        *out = NULL;
    if (!c || !o || !o->url || !cb)
        return -EINVAL;
    if (o->proxy && o->no_proxy)
        return -EINVAL;
    if (c->closing || c->dead)
        return -ESHUTDOWN;

    r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->cb = cb;
    r->arg = arg;
    r->on_data = o->on_data;
    r->max_body = o->max_body ? o->max_body : HTTPC_DEFAULT_MAX_BODY;
    struct sockaddr_storage sa;
    char *h1req;
    size_t h1len;
    if (h1_prepare(o, &sa, &h1req, &h1len)) {
        h1_start(r, o, &sa, h1req, h1len);
        goto started;
    }
    r->easy = easy_take(c);
    if (!r->easy) {
        rc = -EIO;
        goto out;
    }
    CURL *e = r->easy;
    if (curl_easy_setopt(e, CURLOPT_URL, o->url) != CURLE_OK) {
        rc = -EINVAL;
        goto out;
    }
    /* an IP literal needs no resolving: keep it out of curl's DNS cache, which
     * curl 7.88 walks on every request (O(hosts) with 10,000 pods) */
    const char *host = strstr(o->url, "://");
    if (host && (host[3] == '[' || (host[3] >= '0' && host[3] <= '9')))
        curl_easy_setopt(e, CURLOPT_DNS_CACHE_TIMEOUT, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* Wait for a connection that may multiplex (HTTP/2 over TLS) rather than
     * opening a second one; on plain HTTP/1.1 it would only serialise. */
    if (strncasecmp(o->url, "https:", 6) == 0)
        curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    if (!o->no_reuse) { /* not for a connection used once: setsockopt calls for nothing */
        curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
        /* probes after 30 s idle, every 15 s: a peer gone without a FIN or
         * RST (a node down, a load balancer's state lost) is noticed in about
         * 3 minutes with the kernel's 9 probes, not the 60 s + 75 s x 9 of
         * curl's defaults */
        curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 15L);
    }
    if (!o->no_compression)
        curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    if (o->no_reuse)
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    if (o->recv_buffer) {
        size_t b = o->recv_buffer < 1024 ? 1024 : o->recv_buffer > 524288 ? 524288 : o->recv_buffer;
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)b);
    }
    /* pod scrapes: never the environment's proxy, whatever no_proxy covers */
    if (o->no_proxy)
        curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    if (o->proxy && curl_easy_setopt(e, CURLOPT_PROXY, o->proxy) != CURLE_OK) {
        rc = -EINVAL;
        goto out;
    }
    /* a proxy given carries every request, as client-go's http.ProxyURL: libcurl
     * would still go around it for the hosts of NO_PROXY */
    if (o->proxy)
        curl_easy_setopt(e, CURLOPT_NOPROXY, "");
    if (o->connect_to) { /* curl keeps the list, not a copy: the request owns it */
        size_t n = strlen(o->connect_to) + 1;
        r->connect_to = xmalloc(sizeof(*r->connect_to) + n);
        r->connect_to->data = (char *)(r->connect_to + 1);
        r->connect_to->next = NULL;
        memcpy(r->connect_to->data, o->connect_to, n);
        if (curl_easy_setopt(e, CURLOPT_CONNECT_TO, r->connect_to) != CURLE_OK) {
            rc = -EINVAL;
            goto out;
        }
    }
    if (o->timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
    if (o->connect_timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)o->connect_timeout_ms);
    if (o->stall_timeout_ms > 0) {
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)((o->stall_timeout_ms + 999) / 1000));
    }
    if (!o->on_data)
        curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)r->max_body);

    const char *method = o->method ? o->method : (o->body ? "POST" : "GET");
    if (method_is(method, "GET")) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (method_is(method, "HEAD")) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else {
        if (!method_is(method, "POST"))
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        if (o->body || method_is(method, "POST")) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)(o->body ? o->body_len : 0));
            curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, o->body ? (const char *)o->body : "");
        }
    }

    rc = setup_tls(e, o->tls);
    if (rc < 0)
        goto out;

    size_t nextra = 0;
    for (const char *const *h = o->headers; h && *h; h++)
        nextra++;
    const char **lines = xmalloc((4 + nextra) * sizeof(*lines));
    size_t n = 0;
    char *ctype = NULL, *auth = NULL;
    lines[n++] = "Expect:";
    if (o->body || o->content_type)
        lines[n++] = ctype = xasprintf("Content-Type: %s", o->content_type
                                                               ? o->content_type
                                                               : "application/octet-stream");
    else
        lines[n++] = "Content-Type:"; /* no form default */
    if (o->bearer)
        lines[n++] = auth = xasprintf("Authorization: Bearer %s", o->bearer);
    if (o->no_reuse)
        lines[n++] = "Connection: close";
    for (size_t i = 0; i < nextra; i++)
        lines[n++] = o->headers[i];
    r->hdrs = header_block(lines, n, &r->hdrs_len);
    r->hdrs_secret = auth != NULL;
    if (auth)
        explicit_bzero(auth, strlen(auth));
    xfree(auth);
    xfree(ctype);
    xfree(lines);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);

    if (c->in_curl) {
        r->state = REQ_PENDING_ADD;
        todo_push(r);
    } else {
        CURLMcode mc = curl_multi_add_handle(c->multi, e);
        if (mc != CURLM_OK) {
            LOG_ERROR("httpc", "curl_multi_add_handle: %s", curl_multi_strerror(mc));
            rc = -EIO;
            goto out;
        }
        r->state = REQ_ACTIVE;
    }
    if (o->timeout_ms > 0)
        backstop_start(r, o->timeout_ms);
started:
    c->inflight++;
    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    if (out)
        *out = r;
    r = NULL;
out:
    if (r)
        req_free(r);
    return rc;
}

int httpc_cancel(struct httpc_req *r)
{
    if (r->cancelled)
        return -EALREADY;
    r->cancelled = true;
    if (r->state != REQ_DONE)
        todo_push(r); /* process() takes it out of curl from the loop */
    return 0;
}

const char *httpc_req_content_type(const struct httpc_req *r)
{
    char *ct = NULL;
    if (r->in_data && !r->easy)
        return r->h1_ctype;
    if (!r->in_data || curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ct) != CURLE_OK)
        return NULL;
    return ct;
}

void *httpc_req_arg(const struct httpc_req *r)
{
    return r->arg;
}

const char *httpc_resp_header(const struct httpc_resp *resp, const char *name)
{
    const struct httpc_req *r = resp->req_;
    if (!r)
        return NULL;
    for (size_t i = r->nparsed; i > 0; i--)
        if (strcasecmp(r->parsed[i - 1].name, name) == 0)
            return r->parsed[i - 1].value;
    return NULL;
}

const char *httpc_resp_header_nth(const struct httpc_resp *resp, const char *name, size_t i)
{
    const struct httpc_req *r = resp->req_;
    if (!r)
        return NULL;
    for (size_t k = 0; k < r->nparsed; k++)
        if (strcasecmp(r->parsed[k].name, name) == 0 && i-- == 0)
            return r->parsed[k].value;
    return NULL;
}

int64_t httpc_resp_retry_after_ms(const struct httpc_resp *resp, int64_t now_unix_ms)
{
    const char *v = httpc_resp_header(resp, "Retry-After");
    if (!v || !*v)
        return -1;
    int64_t secs;
    if (util_parse_int64(v, &secs) == 0)
        return secs < 0 ? -1 : (secs > 86400 ? 86400 : secs) * 1000;
    time_t t = curl_getdate(v, NULL);
    if (t <= 0)
        return -1;
    int64_t ms = (int64_t)t * 1000 - now_unix_ms;
    return ms < 0 ? 0 : ms;
}

size_t httpc_inflight(const struct httpc *c)
{
    return c->inflight;
}

void httpc_close(struct httpc *c, httpc_close_cb cb, void *arg)
{
    c->closing = true;
    c->close_cb = cb;
    c->close_arg = arg;
    for (struct httpc_req *r = c->reqs; r; r = r->next)
        if (!r->cancelled)
            httpc_cancel(r);
    kick(c);
}

int httpc_set_max_host_connections(struct httpc *c, long n)
{
    if (n < 1)
        return -EINVAL;
    return curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, n) == CURLM_OK ? 0 : -EINVAL;
}

int httpc_set_handle_pool(struct httpc *c, size_t n)
{
    while (c->npool > n)
        curl_easy_cleanup(c->pool[--c->npool]);
    if (n > c->pool_max)
        c->pool = xrealloc(c->pool, n * sizeof(*c->pool));
    c->pool_max = n;
    return 0;
}

size_t httpc_pooled_handles(const struct httpc *c)
{
    return c->npool;
}

int httpc_set_max_idle_connections(struct httpc *c, long n)
{
    if (n < 1)
        return -EINVAL;
    return curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, n) == CURLM_OK ? 0 : -EINVAL;
}

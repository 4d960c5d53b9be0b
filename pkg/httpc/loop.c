/* SPDX-License-Identifier: Apache-2.0 */
/* httpc's loop glue: libcurl's sockets and timeout on the libuv loop, as
 * curl's docs/examples/multi-uv.c does it.
 *
 * curl tells us which sockets to poll (on_socket) and when to call it back
 * (on_timer_set); every poll event or timer expiry runs
 * curl_multi_socket_action() and then hc_process(), which drains
 * curl_multi_info_read(). A timeout of 0 means "call socket_action now":
 * it becomes 1 ms, so that it happens from the loop, not from inside curl.
 *
 * Ownership: one struct sock_ctx (with its uv_poll) per socket curl asks
 * about, on the client's list until curl removes the socket or the client
 * closes; its memory goes in the poll's close callback. */
#include "httpc.h"
#include "httpc-int.h"

#include <curl/curl.h>
#include <stdint.h>

#include "util/util.h"

struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
    struct httpc *c;
    struct sock_ctx *prev, *next; /* open sockets, to close them on shutdown */
};

static void on_sock_closed(uv_handle_t *h)
{
    struct sock_ctx *sc = util_container_of((uv_poll_t *)h, struct sock_ctx, poll);
    struct httpc *c = sc->c;
    xfree(sc);
    hc_handle_closed(c);
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

void hc_loop_close_sockets(struct httpc *c)
{
    while (c->socks)
        sock_close(c->socks);
}

static void action(struct httpc *c, curl_socket_t fd, int flags)
{
    int running = 0;
    c->in_curl++;
    CURLMcode mc = curl_multi_socket_action(c->multi, fd, flags, &running);
    c->in_curl--;
    if (mc != CURLM_OK)
        LOG_ERROR("httpc", "curl_multi_socket_action: %s", curl_multi_strerror(mc));
    hc_process(c);
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

void hc_loop_attach(struct httpc *c)
{
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer_set);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
}

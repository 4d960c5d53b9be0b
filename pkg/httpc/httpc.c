/* SPDX-License-Identifier: Apache-2.0 */
/* httpc: libcurl's multi interface driven by a libuv loop (see httpc.h);
 * this file is the client itself: httpc_new, httpc_close, its settings, the
 * pool of easy handles and the count of libuv handles that frees it.
 *
 * The module's other files (httpc-int.h lists them): loop.c plugs curl's
 * sockets and timeout into the loop as curl's docs/examples/multi-uv.c does,
 * request.c turns a request's options into an easy handle, lifecycle.c
 * queues, completes and delivers requests, backstop.c times out what
 * libcurl 7.88 does not, response.c takes the answer in, request-h1.c hands
 * plain scrapes to h1.c.
 *
 * Ownership: struct httpc is freed after the last of its libuv handles
 * (timer, kick, one poll per socket, the requests' backstops) has closed;
 * open_handles counts them and hc_handle_closed() frees the client when the
 * last goes after the multi was cleaned up. An easy handle is reset and kept
 * in the client's pool (up to pool_max) for the next request.
 * libcurl's allocations are counted by alloc.c (httpc_memory_bytes). */
#include "httpc.h"
#include "httpc-int.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>

#include "util/util.h"

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

void hc_handle_closed(struct httpc *c)
{
    if (--c->open_handles == 0 && c->dead)
        free_client(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    hc_handle_closed(h->data);
}

/* Called by hc_process() once closing and nothing is in flight. */
void hc_close_handles(struct httpc *c)
{
    /* Idle cached connections still have sockets: stop polling them before
     * curl closes them; from here on on_socket/on_timer_set ignore curl. */
    hc_loop_close_sockets(c);
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

/* ---- the pool of easy handles ------------------------------------------ */

void hc_easy_release(struct httpc *c, CURL *e)
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

CURL *hc_easy_take(struct httpc *c)
{
    return c->npool ? c->pool[--c->npool] : curl_easy_init();
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
    hc_loop_attach(c);
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
    hc_kick(c);
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

/* SPDX-License-Identifier: Apache-2.0 */
/* test-fixture: runs an httpd on a private loop while a client scenario runs
 * in a thread; the scenario records failures (cmocka asserts must stay on
 * the main thread) and the main thread checks them, the callback counts and
 * that the loop closes cleanly. Test-only, header-only. */
#ifndef GPUSCALER_HTTPD_TEST_FIXTURE_H
#define GPUSCALER_HTTPD_TEST_FIXTURE_H

#include "httpd/httpd.h"
#include "test-client.h"
#include "util/util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

struct fx;
typedef void (*fx_client_fn)(struct fx *f);

struct fx {
    uv_loop_t loop;
    struct httpd *srv;
    uv_async_t done;
    uv_thread_t thr;
    fx_client_fn client;
    int port;
    int server_closed;
    int requests;
    int aborts;
    int respond_errors;
    int invalid_status;           /* /status/N answers httpd_respond refused (-EINVAL) */
    int fail_line;
    char fail_msg[256];
    /* scenario knobs and observations */
    int defer_ms;
    bool last_verified, last_presented;
    char last_cn[128];
    char last_addr[64];
    const char *dir;
    void *user;
    bool client_closes;           /* the scenario starts the server's close itself
                                     (uv_async_send(&f->done), exactly once) */
};

#define CHECK(f, cond)                                                                   \
    do {                                                                                 \
        if (!(cond) && !(f)->fail_line) {                                                \
            (f)->fail_line = __LINE__;                                                   \
            snprintf((f)->fail_msg, sizeof((f)->fail_msg), "%s", #cond);                 \
        }                                                                                \
    } while (0)

struct deferred {
    uv_timer_t t;
    struct httpd_request *req;
    struct fx *f;
};

static void fx_deferred_closed(uv_handle_t *h)
{
    xfree(h->data);
}

static void fx_echo(struct fx *f, struct httpd_request *req)
{
    struct util_buf b = {0};
    const char *xt = httpd_request_header(req, "x-test");
    util_buf_printf(&b, "%s %s q=%s len=%zu x=%s ka=%d", req->method, req->path, req->query,
                    req->body_len, xt ? xt : "-", req->keep_alive);
    struct httpd_header h[] = {{"Content-Type", "text/plain"}};
    if (httpd_respond(req, 200, h, 1, b.data, b.len) != 0)
        f->respond_errors++;
    util_buf_free(&b);
}

static void fx_on_deferred(uv_timer_t *t)
{
    struct deferred *d = t->data;
    if (httpd_request_aborted(d->req)) {
        int rc = httpd_respond(d->req, 200, NULL, 0, "late", 4);
        if (rc != -ECONNRESET && rc != 0)
            d->f->respond_errors++;
    } else {
        fx_echo(d->f, d->req);
    }
    uv_close((uv_handle_t *)t, fx_deferred_closed);
}

static void fx_on_abort(struct httpd_request *req, void *arg)
{
    struct fx *f = arg;
    f->aborts++;
}

static void fx_handler(struct httpd_request *req, void *arg)
{
    struct fx *f = arg;
    __atomic_fetch_add(&f->requests, 1, __ATOMIC_RELAXED); /* a scenario may read it */
    f->last_presented = req->peer.client_cert;
    f->last_verified = req->peer.client_cert_verified;
    snprintf(f->last_cn, sizeof(f->last_cn), "%s", req->peer.client_cn ? req->peer.client_cn : "");
    snprintf(f->last_addr, sizeof(f->last_addr), "%s", req->peer.addr);
    int delay = 0;
    if (strncmp(req->path, "/defer/", 7) == 0)
        delay = (int)strtol(req->path + 7, NULL, 10);
    if (delay > 0) {
        struct deferred *d = xcalloc(1, sizeof(*d));
        d->req = req;
        d->f = f;
        uv_timer_init(&f->loop, &d->t);
        d->t.data = d;
        httpd_request_on_abort(req, fx_on_abort, f);
        uv_timer_start(&d->t, fx_on_deferred, (uint64_t)delay, 0);
        return;
    }
    if (strncmp(req->path, "/big/", 5) == 0) { /* a body of that many bytes of 'b' */
        size_t n = (size_t)strtoul(req->path + 5, NULL, 10);
        char *body = xmalloc(n ? n : 1);
        memset(body, 'b', n);
        httpd_respond(req, 200, NULL, 0, body, n);
        xfree(body);
        return;
    }
    if (strncmp(req->path, "/status/", 8) == 0) { /* that status, with a body */
        int status = (int)strtol(req->path + 8, NULL, 10);
        struct httpd_header h[] = {{"Content-Type", "text/plain"}};
        if (httpd_respond(req, status, h, 1, "xyz", 3) == -EINVAL)
            f->invalid_status++;
        return;
    }
    if (strcmp(req->path, "/stats") == 0) { /* the door's counters, read on the loop */
        struct httpd_stats st;
        httpd_stats(f->srv, &st);
        char body[160];
        int n = snprintf(body, sizeof(body), "refused=%llu evicted=%llu open=%u sources=%u",
                         (unsigned long long)st.refused, (unsigned long long)st.evicted,
                         st.connections, st.sources);
        httpd_respond(req, 200, NULL, 0, body, (size_t)n);
        return;
    }
    if (strcmp(req->path, "/cert") == 0) {
        char body[256];
        int certs = 0; /* certificates in the PEM chain */
        for (const char *p = req->peer.client_chain_pem;
             p && (p = strstr(p, "-----BEGIN CERTIFICATE-----")) != NULL; p++)
            certs++;
        int n = snprintf(body, sizeof(body), "presented=%d verified=%d cn=%s pem=%d",
                         req->peer.client_cert, req->peer.client_cert_verified,
                         req->peer.client_cn ? req->peer.client_cn : "", certs);
        httpd_respond(req, 200, NULL, 0, body, (size_t)n);
        return;
    }
    fx_echo(f, req);
}

static void fx_server_closed(void *arg)
{
    struct fx *f = arg;
    f->server_closed++;
}

static void fx_on_done(uv_async_t *a)
{
    struct fx *f = a->data;
    httpd_close(f->srv, fx_server_closed, f);
    uv_close((uv_handle_t *)a, NULL);
}

static void fx_thread(void *arg)
{
    struct fx *f = arg;
    f->client(f);
    if (!f->client_closes)
        uv_async_send(&f->done);
}

/* Start the server with @cfg, run @client in a thread, run the loop to the
 * end, and check the closing invariants. */
static void fx_run(struct fx *f, const struct httpd_config *cfg, fx_client_fn client)
{
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpd_new(&f->loop, cfg, fx_handler, f, &f->srv), 0);
    f->port = httpd_port(f->srv);
    assert_true(f->port > 0);
    uv_async_init(&f->loop, &f->done, fx_on_done);
    f->done.data = f;
    f->client = client;
    assert_int_equal(uv_thread_create(&f->thr, fx_thread, f), 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    uv_thread_join(&f->thr);
    if (f->fail_line)
        fail_msg("client scenario failed at line %d: %s", f->fail_line, f->fail_msg);
    assert_int_equal(f->server_closed, 1);
    assert_int_equal(f->respond_errors, 0);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for httpd over plain TCP: requests, keep-alive, pipelining with
 * deferred responses, limits, timeouts (header, body, idle), aborts and
 * half-closed clients, 100-continue, graceful close (requests still arriving
 * finish), status codes without a body, and the parser entry point used by
 * the fuzzer. */
#include "test-fixture.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct httpd_config plain_cfg(void)
{
    struct httpd_config c = {.host = "127.0.0.1", .port = 0, .name = "test"};
    return c;
}

static struct tc_opts opts(struct fx *f)
{
    struct tc_opts o = {.port = f->port};
    return o;
}

/* ---- basic request and keep-alive -------------------------------------- */

static void cl_basic(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    for (int i = 0; i < 3; i++) {
        CHECK(f, tc_send_str(&c, "GET /a/b?x=1&y=%20 HTTP/1.1\r\nHost: t\r\nX-Test:  v1 \r\n"
                                 "\r\n") == 0);
        CHECK(f, tc_read_response(&c, &r) == 0);
        CHECK(f, r.status == 200);
        CHECK(f, strcmp(r.body, "GET /a/b q=x=1&y=%20 len=0 x=v1 ka=1") == 0);
        CHECK(f, !r.close);
        CHECK(f, strstr(r.headers, "\r\nDate: ") != NULL);
    }
    /* the absolute form (RFC 9112 section 3.2.2: a server must accept it) is the
     * same request; without a path, the path "/" */
    CHECK(f, tc_send_str(&c, "GET HTTP://t:8080/a/b?x=1&y=%20 HTTP/1.1\r\nHost: t\r\n"
                             "X-Test: v1\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && strcmp(r.body, "GET /a/b q=x=1&y=%20 len=0 x=v1 ka=1") == 0);
    CHECK(f, tc_send_str(&c, "GET https://t?z=2 HTTP/1.1\r\nHost: t\r\nX-Test: v1\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && strcmp(r.body, "GET / q=z=2 len=0 x=v1 ka=1") == 0);
    /* HTTP/1.0 asking for keep-alive: kept, and told so (its client would take the
     * connection for closing) */
    CHECK(f, tc_send_str(&c, "GET /ka HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && !r.close);
    CHECK(f, strstr(r.headers, "\r\nConnection: keep-alive\r\n") != NULL);
    /* HTTP/1.1 keeps alive without saying so */
    CHECK(f, tc_send_str(&c, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && !r.close && !strstr(r.headers, "Connection:"));
    /* HTTP/1.0 without keep-alive: answered, then closed */
    CHECK(f, tc_send_str(&c, "GET /old HTTP/1.0\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.close);
    CHECK(f, tc_wait_close(&c) == 0);
    tc_close(&c);
}

static void test_basic_keepalive(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_basic);
    assert_int_equal(f.requests, 8);
    assert_non_null(strstr(f.last_addr, "127.0.0.1:"));
}

/* ---- bodies ---------------------------------------------------------------- */

static void cl_bodies(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, strcmp(r.body, "POST /p q= len=5 x=- ka=1") == 0);
    CHECK(f, tc_send_str(&c, "POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, strcmp(r.body, "POST /c q= len=7 x=- ka=1") == 0);
    /* Expect: 100-continue gets an interim response before the body is sent */
    CHECK(f, tc_send_str(&c, "PUT /e HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nExpect: 100-continue\r\n"
                             "\r\n") == 0);
    char buf[64] = {0};
    ssize_t n = recv(c.fd, buf, sizeof(buf) - 1, 0);
    CHECK(f, n > 0 && strncmp(buf, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0);
    CHECK(f, tc_send_str(&c, "ok") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, strcmp(r.body, "PUT /e q= len=2 x=- ka=1") == 0);
    /* ... not to an HTTP/1.0 request, whose client knows no interim answer: the body is
     * waited for, then the one answer */
    CHECK(f, tc_send_str(&c, "PUT /e HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n"
                             "Expect: 100-continue\r\n\r\n") == 0);
    usleep(200000);
    n = recv(c.fd, buf, sizeof(buf) - 1, MSG_DONTWAIT); /* nothing yet: no 100 */
    CHECK(f, n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    CHECK(f, tc_send_str(&c, "ok") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && strcmp(r.body, "PUT /e q= len=2 x=- ka=1") == 0);
    /* HEAD: headers only, Content-Length of the would-be body */
    CHECK(f, tc_send_str(&c, "HEAD /h HTTP/1.1\r\nHost: t\r\n\r\nGET /after HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    char all[1024] = {0};
    size_t got = 0;
    while (got < sizeof(all) - 1 && !strstr(all, "GET /after")) {
        n = recv(c.fd, all + got, sizeof(all) - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    CHECK(f, strstr(all, "Content-Length: 25") != NULL);
    CHECK(f, strstr(all, "HEAD /h") == NULL);
    CHECK(f, strstr(all, "GET /after q= len=0") != NULL);
    tc_close(&c);
}

static void test_bodies(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_bodies);
    assert_int_equal(f.requests, 6);
}

/* ---- pipelining with a deferred answer in the middle -------------------- */

static void cl_pipeline(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /one HTTP/1.1\r\nHost: t\r\n\r\n"
                             "GET /defer/80 HTTP/1.1\r\nHost: t\r\n\r\n"
                             "GET /three HTTP/1.1\r\nHost: t\r\nX-Test: 3\r\n\r\n"
                             "POST /four HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, strcmp(r.body, "GET /one q= len=0 x=- ka=1") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, strcmp(r.body, "GET /defer/80 q= len=0 x=- ka=1") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, strcmp(r.body, "GET /three q= len=0 x=3 ka=1") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, strcmp(r.body, "POST /four q= len=3 x=- ka=1") == 0);
    /* many small pipelined requests in one write */
    struct util_buf b = {0};
    for (int i = 0; i < 500; i++)
        util_buf_printf(&b, "GET /n%d HTTP/1.1\r\nHost: t\r\n\r\n", i);
    CHECK(f, tc_send(&c, b.data, b.len) == 0);
    util_buf_free(&b);
    for (int i = 0; i < 500; i++) {
        char want[64];
        snprintf(want, sizeof(want), "GET /n%d q= len=0 x=- ka=1", i);
        if (tc_read_response(&c, &r) != 0 || strcmp(r.body, want) != 0) {
            CHECK(f, !"pipelined response out of order or missing");
            break;
        }
    }
    tc_close(&c);
}

static void test_pipelining(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_pipeline);
    assert_int_equal(f.requests, 504);
}

/* A client that pipelines requests and never reads its answers: once the
 * answers back up in the socket, the server stops reading and dispatching
 * until they drain, so what it holds for the client stays bounded by the
 * socket buffers (it used to read on and queue every answer in memory, about
 * 6 bytes of answer per byte of request, without limit). */
static void cl_unread(struct fx *f)
{
    struct tc c;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    int small = 4096;
    setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    static const char one[] = "GET /u HTTP/1.1\r\nHost: t\r\n\r\n";
    enum { PER = 1000, CHUNKS = 2000 }; /* at most 2 million requests, 38 MB */
    char *chunk = xmalloc(PER * (sizeof(one) - 1));
    for (int i = 0; i < PER; i++)
        memcpy(chunk + (size_t)i * (sizeof(one) - 1), one, sizeof(one) - 1);
    size_t len = PER * (sizeof(one) - 1), sent = 0;
    int stalls = 0;
    for (int i = 0; i < CHUNKS && stalls < 10;) {
        ssize_t n = send(c.fd, chunk, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            stalls++;
            usleep(20000);
            continue;
        }
        if (n < 0)
            break;
        stalls = 0;
        sent += (size_t)n;
        i++;
    }
    xfree(chunk);
    usleep(200000);
    int handled = __atomic_load_n(&f->requests, __ATOMIC_RELAXED);
    CHECK(f, sent < len * CHUNKS); /* the server stopped reading */
    CHECK(f, handled > 0 && handled < 200000);
    tc_close(&c);
}

static void test_unread_answers_stop_the_reading(void **state)
{
    (void)state;
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_unread);
    print_message("a client that never reads: %d requests answered before the server stopped\n",
                  f.requests);
    assert_true(f.requests > 0 && f.requests < 200000);
}

/* A chunked body's trailer fields are not headers: one sent after the body
 * never reaches the handler as a header (an identity header slipped in after
 * a front proxy's own would), and the request is still answered. */
static void cl_trailer(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "POST /t HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                             "Trailer: X-Test\r\n\r\n"
                             "3\r\nabc\r\n0\r\nX-Test: injected\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && r.status == 200);
    CHECK(f, strcmp(r.body, "POST /t q= len=3 x=- ka=1") == 0);
    CHECK(f, tc_send_str(&c, "GET /after HTTP/1.1\r\nHost: t\r\nX-Test: real\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, strcmp(r.body, "GET /after q= len=0 x=real ka=1") == 0);
    tc_close(&c);
}

static void test_trailers_are_not_headers(void **state)
{
    (void)state;
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_trailer);
    assert_int_equal(f.requests, 2);
}

/* ---- limits ----------------------------------------------------------------- */

static void cl_limits(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    char big[4096];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';

    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: ") == 0);
    CHECK(f, tc_send_str(&c, big) == 0);
    CHECK(f, tc_send_str(&c, "\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 431 && r.close);
    CHECK(f, tc_wait_close(&c) == 0);
    tc_close(&c);

    CHECK(f, tc_connect(&c, &o) == 0);
    struct util_buf b = {0};
    util_buf_puts(&b, "GET / HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 20; i++)
        util_buf_printf(&b, "H%d: x\r\n", i);
    util_buf_puts(&b, "\r\n");
    CHECK(f, tc_send(&c, b.data, b.len) == 0);
    util_buf_free(&b);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 431);
    tc_close(&c);

    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 413 && r.close);
    CHECK(f, strstr(r.body, "at most 2000 bytes") != NULL); /* the answer says the limit */
    tc_close(&c);

    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n") == 0);
    for (int i = 0; i < 3; i++) {
        tc_send_str(&c, "400\r\n"); /* the server may have closed already */
        char kb[1024];
        memset(kb, 'b', sizeof(kb));
        tc_send(&c, kb, sizeof(kb));
        tc_send_str(&c, "\r\n");
    }
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 413);
    CHECK(f, strstr(r.body, "at most 2000 bytes") != NULL);
    tc_close(&c);

    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "\x16\x03\x01garbage that is not http\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 400 && r.close);
    tc_close(&c);

    /* at the cap (two) a new connection evicts the oldest idle one rather
     * than being refused (after the server has seen the closes above) */
    usleep(100000);
    struct tc c1, c2, c3, c4;
    CHECK(f, tc_connect(&c1, &o) == 0);
    CHECK(f, tc_send_str(&c1, "GET /1 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c1, &r) == 0 && r.status == 200);
    CHECK(f, tc_connect(&c2, &o) == 0);
    CHECK(f, tc_send_str(&c2, "GET /2 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c2, &r) == 0 && r.status == 200);
    CHECK(f, tc_connect(&c3, &o) == 0);
    CHECK(f, tc_wait_close(&c1) == 0); /* the oldest idle one made room */
    CHECK(f, tc_send_str(&c3, "GET /3 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c3, &r) == 0 && r.status == 200);
    /* a connection whose request is with the handler is never evicted: with
     * both busy, the next one is refused */
    CHECK(f, tc_send_str(&c2, "GET /defer/400 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_send_str(&c3, "GET /defer/400 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    usleep(100000);
    CHECK(f, tc_connect(&c4, &o) == 0);
    CHECK(f, tc_wait_close(&c4) == 0);
    CHECK(f, tc_read_response(&c2, &r) == 0 && r.status == 200);
    CHECK(f, tc_read_response(&c3, &r) == 0 && r.status == 200);
    tc_close(&c4);
    tc_close(&c1);
    tc_close(&c2);
    tc_close(&c3);
    /* after closing them there is room again; the counters say what happened */
    usleep(50000);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /stats HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && r.status == 200);
    CHECK(f, strcmp(r.body, "refused=1 evicted=1 open=1 sources=1") == 0);
    tc_close(&c);
}

static void test_limits(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    cfg.max_header_bytes = 2048;
    cfg.max_headers = 10;
    cfg.max_body_bytes = 2000;
    cfg.max_connections = 2;
    fx_run(&f, &cfg, cl_limits);
    assert_int_equal(f.requests, 6); /* /1 /2 /3, two deferred, /stats */
}

/* ---- the front door: eviction and the per-source cap -------------------- */

static bool served(struct fx *f, struct tc *c, const char *path)
{
    struct tc_resp r;
    char req[96];
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    return tc_send_str(c, req) == 0 && tc_read_response(c, &r) == 0 && r.status == 200;
    (void)f;
}

/* Four slots, three per source. Idle connections that never sent a request
 * go before a kept-alive one, those of the source holding the most first,
 * the oldest first; nothing busy is ever closed. */
static void cl_door(struct fx *f)
{
    struct tc k1, i1, i2, j1, j2, j3, x;
    struct tc_opts a = opts(f), b = opts(f), c = opts(f);
    a.source = "127.0.0.1";
    b.source = "127.0.0.2";
    c.source = "127.0.0.3";
    CHECK(f, tc_connect(&k1, &a) == 0 && served(f, &k1, "/k1")); /* kept alive */
    CHECK(f, tc_connect(&i1, &b) == 0);                           /* idle, never asked */
    usleep(20000);
    CHECK(f, tc_connect(&i2, &b) == 0);
    CHECK(f, tc_connect(&j1, &c) == 0);
    usleep(50000);
    /* full: j2 takes the oldest idle one of the largest sources (2 each): i1 */
    CHECK(f, tc_connect(&j2, &c) == 0);
    CHECK(f, tc_wait_close(&i1) == 0);
    CHECK(f, served(f, &j2, "/j2"));
    CHECK(f, served(f, &k1, "/k1-again")); /* the kept-alive one is still there */
    /* full again: 127.0.0.3 now holds three (with j3), so its idle j1 goes
     * before 127.0.0.2's i2 */
    CHECK(f, tc_connect(&j3, &c) == 0);
    CHECK(f, tc_wait_close(&j1) == 0);
    CHECK(f, served(f, &j3, "/j3") && served(f, &i2, "/i2"));
    /* all four busy: the next one is refused, and nobody loses a request */
    CHECK(f, tc_send_str(&k1, "GET /defer/400 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_send_str(&i2, "GET /defer/400 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_send_str(&j2, "GET /defer/400 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_send_str(&j3, "GET /defer/400 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    usleep(100000);
    CHECK(f, tc_connect(&x, &a) == 0);
    CHECK(f, tc_wait_close(&x) == 0);
    tc_close(&x);
    struct tc_resp r;
    CHECK(f, tc_read_response(&k1, &r) == 0 && r.status == 200);
    CHECK(f, tc_read_response(&i2, &r) == 0 && r.status == 200);
    CHECK(f, tc_read_response(&j2, &r) == 0 && r.status == 200);
    CHECK(f, tc_read_response(&j3, &r) == 0 && r.status == 200);
    CHECK(f, tc_send_str(&k1, "GET /stats HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&k1, &r) == 0 && r.status == 200);
    CHECK(f, strcmp(r.body, "refused=1 evicted=2 open=4 sources=3") == 0);
    tc_close(&k1);
    tc_close(&i1);
    tc_close(&i2);
    tc_close(&j1);
    tc_close(&j2);
    tc_close(&j3);
}

static void test_door(void **state)
{
    (void)state;
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    cfg.max_connections = 4;
    cfg.max_connections_per_source = 3;
    fx_run(&f, &cfg, cl_door);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* At the cap, a connection whose answer is still being read, slowly, is
 * not evicted (a single write of a large answer completes only at its end:
 * it was taken for a client that stopped reading, as the oldest); an idle
 * one goes instead. */
static void cl_door_slow_reader(struct fx *f)
{
    struct tc a, b, c;
    struct tc_opts o = opts(f);
    enum { BODY = 40 << 20 };
    CHECK(f, tc_connect(&a, &o) == 0);
    CHECK(f, tc_send_str(&a, "GET /big/41943040 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    usleep(50000);
    CHECK(f, tc_connect(&b, &o) == 0 && served(f, &b, "/b")); /* answered after a's */
    int64_t t0 = mono_ms();
    char *buf = xmalloc(1 << 16);
    size_t got = 0;
    bool third = false;
    for (;;) {
        ssize_t n = recv(a.fd, buf, 1 << 16, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got >= BODY + 38) /* "HTTP/1.1 200 OK" and its headers: at least 38 bytes */
            break;
        if (got > (8u << 20))
            usleep(4000);
        if (!third && mono_ms() - t0 > 1300) { /* a newcomer while a is still reading */
            third = true;
            CHECK(f, tc_connect(&c, &o) == 0);
        }
    }
    xfree(buf);
    CHECK(f, third && got >= BODY);
    CHECK(f, tc_wait_close(&b) == 0);
    CHECK(f, served(f, &c, "/c"));
    tc_close(&a);
    tc_close(&b);
    tc_close(&c);
}

static void test_door_slow_reader(void **state)
{
    (void)state;
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    cfg.max_connections = 2;
    cfg.max_connections_per_source = 2;
    fx_run(&f, &cfg, cl_door_slow_reader);
}

/* One source at its cap evicts its own idle connection, even with room in
 * the listener: 30 connections opened in a loop from one address leave
 * another address's connection alone, and the loop's last ones work. */
static void cl_per_source(struct fx *f)
{
    struct tc other, flood[30];
    struct tc_opts a = opts(f), b = opts(f);
    a.source = "127.0.0.7";
    b.source = "127.0.0.8";
    CHECK(f, tc_connect(&other, &b) == 0);
    for (int i = 0; i < 30; i++)
        CHECK(f, tc_connect(&flood[i], &a) == 0);
    for (int i = 0; i < 27; i++)
        CHECK(f, tc_wait_close(&flood[i]) == 0);
    for (int i = 27; i < 30; i++)
        CHECK(f, served(f, &flood[i], "/flood"));
    CHECK(f, served(f, &other, "/other"));
    struct tc_resp r;
    CHECK(f, tc_send_str(&other, "GET /stats HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&other, &r) == 0 && r.status == 200);
    CHECK(f, strcmp(r.body, "refused=0 evicted=27 open=4 sources=2") == 0);
    for (int i = 0; i < 30; i++)
        tc_close(&flood[i]);
    tc_close(&other);
}

static void test_door_per_source(void **state)
{
    (void)state;
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    cfg.max_connections = 16;
    cfg.max_connections_per_source = 3;
    fx_run(&f, &cfg, cl_per_source);
}

/* ---- timeouts ------------------------------------------------------------- */

static void cl_slowloris(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    /* a header trickled one byte every 40 ms is cut off at the header deadline */
    CHECK(f, tc_connect(&c, &o) == 0);
    int64_t t0 = mono_ms();
    CHECK(f, tc_send_str(&c, "GET / HTTP/1.1\r\nHost: t\r\n") == 0);
    bool closed = false;
    for (int i = 0; i < 100 && !closed; i++) {
        if (send(c.fd, "X", 1, MSG_NOSIGNAL) != 1)
            closed = true;
        usleep(40000);
        char b[256];
        ssize_t n = recv(c.fd, b, sizeof(b), MSG_DONTWAIT);
        if (n == 0 || (n > 0 && strncmp(b, "HTTP/1.1 408", 12) == 0) ||
            (n < 0 && errno != EAGAIN))
            closed = true;
    }
    int64_t took = mono_ms() - t0;
    CHECK(f, closed);
    CHECK(f, took >= 250 && took < 1500);
    tc_close(&c);

    /* connect and say nothing: same deadline */
    CHECK(f, tc_connect(&c, &o) == 0);
    t0 = mono_ms();
    CHECK(f, tc_wait_close(&c) == 0);
    took = mono_ms() - t0;
    CHECK(f, took >= 250 && took < 1500);
    tc_close(&c);

    /* idle keep-alive connection closed after idle_timeout */
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    t0 = mono_ms();
    CHECK(f, tc_wait_close(&c) == 0);
    took = mono_ms() - t0;
    CHECK(f, took >= 150 && took < 1500);
    tc_close(&c);
}

static void test_timeouts(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    cfg.header_timeout_ms = 300;
    cfg.idle_timeout_ms = 200;
    fx_run(&f, &cfg, cl_slowloris);
    assert_int_equal(f.requests, 1);
}

/* A client reading a large answer slowly, but steadily: the write is never
 * idle, so the idle limit does not cut it (it did: the timer ran from the
 * write's start, and the answer was truncated); one that stops reading is
 * still closed once the limit passes without progress. */
static void cl_slow_reader(struct fx *f)
{
    struct tc c;
    struct tc_opts o = opts(f);
    enum { BODY = 40 << 20 };
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /big/41943040 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    char *buf = xmalloc(1 << 16);
    size_t got = 0, body = 0;
    bool in_body = false;
    char tail[4] = {0};
    for (;;) {
        ssize_t n = recv(c.fd, buf, 1 << 16, 0);
        if (n <= 0)
            break;
        if (in_body)
            body += (size_t)n;
        for (ssize_t i = 0; i < n && !in_body; i++) { /* the end of the headers */
            memmove(tail, tail + 1, 3);
            tail[3] = buf[i];
            if (memcmp(tail, "\r\n\r\n", 4) == 0) {
                in_body = true;
                body = (size_t)(n - i - 1);
            }
        }
        got += (size_t)n;
        if (in_body && body >= BODY)
            break;
        /* the socket buffers' worth at once, then at most 16 MB/s: the
         * rest takes two seconds, the server's write moving on every
         * few tens of ms (the idle limit, 2 s, a margin for a loaded
         * machine: a client thread not run for 1 s was cut at 1 s) */
        if (got > (8u << 20))
            usleep(4000);
    }
    if (!in_body || body != BODY)
        print_message("slow reader: %zu of %d body bytes\n", body, (int)BODY);
    CHECK(f, in_body && body == BODY);
    tc_close(&c);
    /* the same answer, never read: closed after the idle limit. The
     * receive buffer is fixed, so the kernels' buffers cannot take the whole
     * answer (autotuned on a host whose tcp_rmem allows 32 MiB, with the
     * server's 4 MiB, they took all 40 MiB, and the write ended before the
     * limit) */
    o.rcvbuf = 256 << 10;
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /big/41943040 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    usleep(3300000); /* past 1.25 limits */
    size_t late = 0;
    for (;;) {
        ssize_t n = recv(c.fd, buf, 1 << 16, 0);
        if (n <= 0)
            break;
        late += (size_t)n;
    }
    CHECK(f, late < BODY); /* cut, not delivered */
    xfree(buf);
    tc_close(&c);
}

static void test_slow_reader(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    cfg.idle_timeout_ms = 2000; /* the client's thread may wait its turn on a loaded machine */
    fx_run(&f, &cfg, cl_slow_reader);
    assert_int_equal(f.requests, 2);
}

/* Bare CRLFs between keep-alive requests (which a parser skips) are not a
 * request: the idle limit runs from the last answer through them (each one
 * restarted it, so a CRLF a minute held a connection open for ever). */
static void cl_crlf_idle(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && r.status == 200);
    int sent = 0;
    for (int i = 0; i < 20; i++) { /* 2 s of a CRLF every 100 ms */
        usleep(100000);
        if (send(c.fd, "\r\n", 2, MSG_NOSIGNAL) != 2)
            break;
        sent++;
    }
    CHECK(f, sent < 10); /* closed about 300 ms after the answer */
    tc_close(&c);
    /* CRLFs before a request are still skipped */
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && r.status == 200);
    tc_close(&c);
}

static void test_crlf_idle(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    cfg.idle_timeout_ms = 300;
    fx_run(&f, &cfg, cl_crlf_idle);
    assert_int_equal(f.requests, 2);
}

/* ---- abort of a deferred request, EOF after request ----------------------- */

/* The abort callback says the connection is gone; a client that only shut
 * down its sending side after its request (a half-close) is waiting for the
 * answer and gets it, without an abort (it used to be told to give up, and
 * the external metrics API then cancelled the upstream request behind it). A
 * peer that closed entirely (FIN) looks the same until the answer is written:
 * no abort either. */
static void cl_abort(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /defer/150 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    usleep(30000);
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    tc_close(&c); /* reset before the answer: the connection is gone */
    usleep(250000);
    CHECK(f, __atomic_load_n(&f->aborts, __ATOMIC_SEQ_CST) == 1);

    /* request then half-close: still answered, and not an abort */
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /defer/30 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    shutdown(c.fd, SHUT_WR);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && r.close && strcmp(r.body, "late") == 0);
    tc_close(&c);
    CHECK(f, __atomic_load_n(&f->aborts, __ATOMIC_SEQ_CST) == 1);

    /* closed entirely (FIN, no reset) before the answer: answered into the void */
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /defer/60 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    tc_close(&c);
    usleep(200000);
}

static void test_abort(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_abort);
    assert_int_equal(f.requests, 3);
    assert_int_equal(f.aborts, 1);
}

/* A client that pipelines requests and then shuts down its sending side
 * (`printf 'GET /a ...GET /b ...' | nc -N`) is owed every answer, as Go's
 * server and nginx give them: the half-close ends what it sends, not what it
 * asked. With the first answer deferred, the EOF came while it was in
 * progress, and that answer closed the connection with the second request
 * unanswered. The last answer says close; a partial request after the
 * complete ones is not answered (nor CRLFs, which are no request). */
static void cl_pipelined_half_close(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /defer/60 HTTP/1.1\r\nHost: t\r\n\r\n"
                             "GET /two HTTP/1.1\r\nHost: t\r\n\r\n"
                             "GET /three HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    shutdown(c.fd, SHUT_WR);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && !r.close && strcmp(r.body, "late") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && !r.close && strcmp(r.body, "GET /two q= len=0 x=- ka=1") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && r.close && strcmp(r.body, "GET /three q= len=0 x=- ka=1") == 0);
    CHECK(f, tc_wait_close(&c) == 0);
    tc_close(&c);

    /* a partial request, or CRLFs, behind the complete one: the complete one
     * answered, saying close, and the connection closed */
    static const char *const tails[] = {"GET /cut HTTP/1.1\r\nHos", "\r\n"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(tails); i++) {
        CHECK(f, tc_connect(&c, &o) == 0);
        CHECK(f, tc_send_str(&c, "GET /defer/60 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
        CHECK(f, tc_send_str(&c, tails[i]) == 0);
        shutdown(c.fd, SHUT_WR);
        CHECK(f, tc_read_response(&c, &r) == 0);
        CHECK(f, r.status == 200 && r.close && strcmp(r.body, "late") == 0);
        CHECK(f, tc_wait_close(&c) == 0);
        tc_close(&c);
    }
}

static void test_pipelined_half_close(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_pipelined_half_close);
    assert_int_equal(f.requests, 5);
    assert_int_equal(f.aborts, 0);
}

/* ---- body deadline ---------------------------------------------------------- */

/* Whether the server closed c (EOF, reset, or the 408 of a deadline),
 * without waiting. */
static bool closed_now(struct tc *c)
{
    char b[64];
    ssize_t n = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
    return n == 0 || (n > 0 && strncmp(b, "HTTP/1.1 408", 12) == 0) ||
           (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* The header deadline ends with the headers; the body then has its own
 * deadline (body_timeout_ms), from the end of the headers to the end of the
 * body, which more bytes do not extend (every read restarted it, so a body
 * trickled a byte at a time held a connection for ever): a body trickled
 * slower than the header deadline allows is read whole within the body
 * deadline (it used to be cut at the header deadline), one still trickling
 * at the body deadline is cut there, and so is a body that stops. */
static void cl_body_timeout(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    int64_t t0 = mono_ms();
    CHECK(f, tc_send_str(&c, "POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n") == 0);
    for (int i = 0; i < 5; i++) {
        usleep(150000);
        CHECK(f, send(c.fd, "x", 1, MSG_NOSIGNAL) == 1);
    }
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && strcmp(r.body, "POST /slow q= len=5 x=- ka=1") == 0);
    CHECK(f, mono_ms() - t0 >= 700); /* well past the header deadline */
    tc_close(&c);

    /* a byte every 100 ms, never a pause near the limit: cut at the deadline */
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "POST /trickle HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n") == 0);
    t0 = mono_ms();
    bool closed = false;
    while (!closed && mono_ms() - t0 < 4000) {
        usleep(100000);
        closed = send(c.fd, "x", 1, MSG_NOSIGNAL) != 1 || closed_now(&c);
    }
    int64_t took = mono_ms() - t0;
    CHECK(f, closed);
    CHECK(f, took >= 1400 && took < 2600);
    tc_close(&c);

    /* the body stops: cut at the body deadline, not at the header deadline */
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "POST /stuck HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nx") == 0);
    t0 = mono_ms();
    CHECK(f, tc_wait_close(&c) == 0);
    took = mono_ms() - t0;
    CHECK(f, took >= 1400 && took < 2600);
    tc_close(&c);
}

static void test_body_timeout(void **state)
{
    (void)state;
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    cfg.header_timeout_ms = 300;
    cfg.body_timeout_ms = 1500;
    cfg.idle_timeout_ms = 3000;
    fx_run(&f, &cfg, cl_body_timeout);
    assert_int_equal(f.requests, 1);
}

/* ---- chunk framing counts toward the body limit ------------------------------ */

/* A chunked request: @chunks chunks of one data byte, each size line
 * carrying an extension of @ext bytes. */
static void chunked_req(struct util_buf *b, int chunks, size_t ext)
{
    util_buf_puts(b, "POST /ext HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < chunks; i++) {
        util_buf_puts(b, "1");
        if (ext > 0) {
            util_buf_puts(b, ";e=");
            for (size_t k = 3; k < ext; k++)
                util_buf_append(b, "v", 1);
        }
        util_buf_puts(b, "\r\nx\r\n");
    }
    util_buf_puts(b, "0\r\n\r\n");
}

/* Chunk extensions and size lines are body bytes too: a body of little
 * data and much framing is refused once data and framing pass the limit
 * (they were not counted: a client streamed 50 MB of extension bytes on one
 * request with no error). */
static void cl_chunk_overhead(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    o.timeout_ms = 3000;
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n") == 0);
    char ext[1024];
    memset(ext, 'v', sizeof(ext));
    for (int i = 0; i < 200; i++) { /* 200 KB of extensions around 200 bytes; until refused */
        if (tc_send_str(&c, "1;e=") != 0 || tc_send(&c, ext, sizeof(ext)) != 0 ||
            tc_send_str(&c, "\r\nx\r\n") != 0)
            break;
    }
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 413 && r.close);
    tc_close(&c);
    /* a body within the limit, framing included, is served on */
    CHECK(f, tc_connect(&c, &o) == 0);
    struct util_buf b = {0};
    chunked_req(&b, 10, 100);
    CHECK(f, tc_send(&c, b.data, b.len) == 0);
    util_buf_free(&b);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && strcmp(r.body, "POST /ext q= len=10 x=- ka=1") == 0);
    tc_close(&c);
}

static void test_chunk_overhead(void **state)
{
    (void)state;
    /* the parser alone (limit 8192): extensions, then bare size lines, past
     * the limit around a few hundred data bytes; whole and byte by byte */
    struct util_buf b = {0};
    chunked_req(&b, 100, 100); /* 100 data bytes, about 10.7 KB sent */
    assert_true(httpd_parse_stream_for_test(b.data, b.len, 0) < 0);
    assert_true(httpd_parse_stream_for_test(b.data, b.len, 1) < 0);
    util_buf_reset(&b);
    chunked_req(&b, 2000, 0); /* 2000 data bytes, 12 KB sent */
    assert_true(httpd_parse_stream_for_test(b.data, b.len, 0) < 0);
    assert_true(httpd_parse_stream_for_test(b.data, b.len, 7) < 0);
    util_buf_reset(&b);
    chunked_req(&b, 60, 100); /* 6.4 KB sent: within it */
    assert_int_equal(httpd_parse_stream_for_test(b.data, b.len, 0), 1);
    assert_int_equal(httpd_parse_stream_for_test(b.data, b.len, 5), 1);
    util_buf_free(&b);

    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    cfg.max_body_bytes = 2000;
    fx_run(&f, &cfg, cl_chunk_overhead);
    assert_int_equal(f.requests, 1);
}

/* ---- Expect: 100-continue on a pipelined request ------------------------------- */

/* Read until the interim "100 Continue" is in the client's buffer (and drop
 * it); false if it does not come. */
static bool got_continue(struct tc *c)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    for (;;) {
        char *p = c->len ? memmem(c->buf, c->len, cont, sizeof(cont) - 1) : NULL;
        if (p) {
            size_t at = (size_t)(p - c->buf), n = sizeof(cont) - 1;
            memmove(p, p + n, c->len - at - n);
            c->len -= n;
            return true;
        }
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        if (n <= 0)
            return false;
        c->len += (size_t)n;
    }
}

/* Each request that expects 100-continue gets its own interim answer, also
 * the second of a pipeline whose headers arrive with the first one's body
 * (the second used to get none: its client waited for nothing). */
static void cl_continue_pipelined(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    o.timeout_ms = 1000;
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "PUT /e1 HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n"
                             "Expect: 100-continue\r\n\r\n") == 0);
    CHECK(f, got_continue(&c));
    CHECK(f, tc_send_str(&c, "ok" /* e1's body, then e2's headers in the same write */
                             "PUT /e2 HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n"
                             "Expect: 100-continue\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && strcmp(r.body, "PUT /e1 q= len=2 x=- ka=1") == 0);
    CHECK(f, got_continue(&c));
    CHECK(f, tc_send_str(&c, "go") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && strcmp(r.body, "PUT /e2 q= len=2 x=- ka=1") == 0);
    tc_close(&c);
}

static void test_continue_pipelined(void **state)
{
    (void)state;
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_continue_pipelined);
    assert_int_equal(f.requests, 2);
}

/* ---- graceful close with a request in flight ------------------------------ */

static void cl_graceful(struct fx *f)
{
    struct tc_resp r;
    struct tc c, idle;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&idle, &o) == 0);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /defer/200 HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    usleep(50000);
    uv_async_send(&f->done); /* the server starts closing now */
    CHECK(f, tc_wait_close(&idle) == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && r.close);
    CHECK(f, tc_wait_close(&c) == 0);
    tc_close(&c);
    tc_close(&idle);
}

static void graceful_thread(void *arg)
{
    struct fx *f = arg;
    cl_graceful(f);
}

static void test_graceful_close(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    assert_int_equal(uv_loop_init(&f.loop), 0);
    assert_int_equal(httpd_new(&f.loop, &cfg, fx_handler, &f, &f.srv), 0);
    f.port = httpd_port(f.srv);
    uv_async_init(&f.loop, &f.done, fx_on_done);
    f.done.data = &f;
    uv_thread_create(&f.thr, graceful_thread, &f);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    uv_thread_join(&f.thr);
    if (f.fail_line)
        fail_msg("client scenario failed at line %d: %s", f.fail_line, f.fail_msg);
    assert_int_equal(f.server_closed, 1);
    assert_int_equal(f.requests, 1);
    assert_int_equal(f.aborts, 0);
    assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* ---- status codes without a body -------------------------------------------- */

/* 204 and 304 answers carry no body and no Content-Length (304 no
 * Content-Type either), whatever the handler passed, so the next answer on
 * the connection is read where it starts (the body was sent after
 * "Content-Length: 3", and a client that knows 204 has none read it as the
 * start of the next answer); a 1xx cannot be a final answer: 500, the
 * connection closed, and httpd_respond says -EINVAL (it was sent as is). */
static void cl_status(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /status/204 HTTP/1.1\r\nHost: t\r\n\r\n"
                             "GET /status/304 HTTP/1.1\r\nHost: t\r\n\r\n"
                             "GET /after HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 204 && !r.close);
    CHECK(f, strncmp(r.headers, "HTTP/1.1 204 No Content\r\n", 25) == 0);
    CHECK(f, strcasestr(r.headers, "Content-Length") == NULL);
    CHECK(f, strstr(r.headers, "Content-Type: text/plain") != NULL);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 304 && !r.close);
    CHECK(f, strcasestr(r.headers, "Content-Length") == NULL);
    CHECK(f, strcasestr(r.headers, "Content-Type") == NULL);
    CHECK(f, tc_read_response(&c, &r) == 0);
    CHECK(f, r.status == 200 && strcmp(r.body, "GET /after q= len=0 x=- ka=1") == 0);
    tc_close(&c);
    const char *const interim[] = {"/status/103", "/status/101", "/status/100"};
    for (size_t i = 0; i < 3; i++) {
        char req[64];
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", interim[i]);
        CHECK(f, tc_connect(&c, &o) == 0);
        CHECK(f, tc_send_str(&c, req) == 0);
        CHECK(f, tc_read_response(&c, &r) == 0);
        CHECK(f, r.status == 500 && r.close);
        CHECK(f, tc_wait_close(&c) == 0);
        tc_close(&c);
    }
}

static void test_status_without_body(void **state)
{
    (void)state;
    struct fx f = {0};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_status);
    assert_int_equal(f.requests, 6);
    assert_int_equal(f.invalid_status, 3);
}

/* ---- graceful close with requests still arriving -------------------------- */

/* As Go's Server.Shutdown, closing the server closes idle connections at
 * once (one that sent nothing, one kept alive after its answer) and lets a
 * request still arriving, in its headers or its body, come whole and be
 * answered, with "Connection: close" (both were closed at once). */
static void cl_graceful_mid(struct fx *f)
{
    struct tc idle, kept, head, body;
    struct tc_resp r;
    struct tc_opts o = opts(f);
    CHECK(f, tc_connect(&idle, &o) == 0);
    CHECK(f, tc_connect(&kept, &o) == 0);
    CHECK(f, tc_send_str(&kept, "GET /kept HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&kept, &r) == 0 && r.status == 200 && !r.close);
    CHECK(f, tc_connect(&head, &o) == 0);
    CHECK(f, tc_send_str(&head, "GET /mid HTTP/1.1\r\nHost: t\r\nX-Test: h") == 0);
    CHECK(f, tc_connect(&body, &o) == 0);
    CHECK(f, tc_send_str(&body, "POST /body HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab") == 0);
    usleep(100000); /* the server has read them */
    uv_async_send(&f->done); /* the server starts closing now */
    CHECK(f, tc_wait_close(&idle) == 0);
    CHECK(f, tc_wait_close(&kept) == 0);
    usleep(50000);
    CHECK(f, tc_send_str(&head, "\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&head, &r) == 0);
    CHECK(f, r.status == 200 && r.close && strcmp(r.body, "GET /mid q= len=0 x=h ka=0") == 0);
    CHECK(f, tc_wait_close(&head) == 0);
    CHECK(f, tc_send_str(&body, "cd") == 0);
    CHECK(f, tc_read_response(&body, &r) == 0);
    CHECK(f, r.status == 200 && r.close && strcmp(r.body, "POST /body q= len=4 x=- ka=0") == 0);
    CHECK(f, tc_wait_close(&body) == 0);
    tc_close(&idle);
    tc_close(&kept);
    tc_close(&head);
    tc_close(&body);
}

static void test_graceful_close_mid_request(void **state)
{
    (void)state;
    struct fx f = {.client_closes = true};
    struct httpd_config cfg = plain_cfg();
    fx_run(&f, &cfg, cl_graceful_mid);
    assert_int_equal(f.requests, 3);
    assert_int_equal(f.aborts, 0);
}

/* ---- bind failure and config errors --------------------------------------- */

static void noop_handler(struct httpd_request *req, void *arg)
{
    httpd_respond(req, 204, NULL, 0, NULL, 0);
}

static void test_bind_errors(void **state)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct httpd *a = NULL, *b = NULL;
    struct httpd_config cfg = plain_cfg();
    assert_int_equal(httpd_new(&loop, &cfg, noop_handler, NULL, &a), 0);
    cfg.port = httpd_port(a);
    assert_int_equal(httpd_new(&loop, &cfg, noop_handler, NULL, &b), UV_EADDRINUSE);
    cfg.host = "not-an-ip";
    assert_int_equal(httpd_new(&loop, &cfg, noop_handler, NULL, &b), -EINVAL);
    struct httpd_config bad = plain_cfg();
    bad.cert_file = "/x";
    assert_int_equal(httpd_new(&loop, &bad, noop_handler, NULL, &b), -EINVAL);
    httpd_free(a);
    httpd_free(NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- the parser entry point ------------------------------------------------ */

static void test_parse_stream(void **state)
{
    const char *s = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                    "POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nxyz"
                    "GET /c HTTP/1.1\r\nHost: t\r\nEmpty:\r\n\r\n";
    for (size_t chunk = 1; chunk < 8; chunk++)
        assert_int_equal(httpd_parse_stream_for_test(s, strlen(s), chunk), 3);
    assert_int_equal(httpd_parse_stream_for_test(s, strlen(s), 0), 3);
    const char *bad = "GET / HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n";
    assert_true(httpd_parse_stream_for_test(bad, strlen(bad), 0) < 0);
    const char *close = "GET / HTTP/1.0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_int_equal(httpd_parse_stream_for_test(close, strlen(close), 0), 1);
    const char *up = "GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
                     "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_int_equal(httpd_parse_stream_for_test(up, strlen(up), 0), 1);
    assert_int_equal(httpd_parse_stream_for_test(up, strlen(up), 3), 1);
    /* one valid Host in HTTP/1.1, as Go's server requires: none, two or a
     * malformed one is a 400; HTTP/1.0 may go without; empty is valid */
    static const char *const refused[] = {
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: \"a\"\r\n\r\n",
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(refused); i++)
        assert_true(httpd_parse_stream_for_test(refused[i], strlen(refused[i]), 0) < 0);
    static const char *const taken[] = {
        "GET / HTTP/1.0\r\n\r\n",
        "GET / HTTP/1.1\r\nhost:\r\n\r\n",
        "GET / HTTP/1.1\r\nHOST: [::1]:8443\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: api.example-1.svc:443\r\n\r\n",
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(taken); i++)
        assert_int_equal(httpd_parse_stream_for_test(taken[i], strlen(taken[i]), 0), 1);
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, getenv("TEST_DEBUG") ? UTIL_LOG_DEBUG : UTIL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_stream),
        cmocka_unit_test(test_basic_keepalive),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_pipelining),
        cmocka_unit_test(test_pipelined_half_close),
        cmocka_unit_test(test_unread_answers_stop_the_reading),
        cmocka_unit_test(test_trailers_are_not_headers),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_door),
        cmocka_unit_test(test_door_per_source),
        cmocka_unit_test(test_door_slow_reader),
        cmocka_unit_test(test_timeouts),
        cmocka_unit_test(test_slow_reader),
        cmocka_unit_test(test_crlf_idle),
        cmocka_unit_test(test_abort),
        cmocka_unit_test(test_body_timeout),
        cmocka_unit_test(test_chunk_overhead),
        cmocka_unit_test(test_continue_pipelined),
        cmocka_unit_test(test_status_without_body),
        cmocka_unit_test(test_graceful_close),
        cmocka_unit_test(test_graceful_close_mid_request),
        cmocka_unit_test(test_bind_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

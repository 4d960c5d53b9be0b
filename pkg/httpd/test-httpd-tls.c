/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for httpd over TLS: requests, keep-alive and pipelining through the
 * memory BIOs, protocol versions, garbage input, handshake deadline, a
 * handshake under way when the server closes, certificate reload (good and broken pairs) and client certificates
 * (verified, missing, wrong CA, expired, CA swapped at runtime, a CA
 * bundle of an intermediate alone). Test
 * certificates are made with the openssl CLI in a temporary directory. */
#include "test-fixture.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char dir[256];

static int gen_certs(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/httpd-tls-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    const char *key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    int rc = tc_sh(
        "set -e; cd %s; exec 2>/dev/null >/dev/null;"
        "for n in a b; do openssl req -x509 %s -keyout $n.key -out $n.crt -subj /CN=server-$n "
        "  -days 2 -addext subjectAltName=IP:127.0.0.1; done;"
        "for n in ca1 ca2; do openssl req -x509 %s -keyout $n.key -out $n.crt -subj /CN=$n -days 2; "
        "done;"
        "mk() { openssl req %s -keyout $1.key -out $1.csr -subj /CN=$2;"
        "  openssl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -days $4 "
        "  -out $1.crt; };"
        "mk client front-proxy-client ca1 2; mk other other-client ca2 2; mk expired expired ca1 -1;"
        /* an intermediate CA of ca1 and a client it issued */
        "printf 'basicConstraints=critical,CA:TRUE\\nkeyUsage=critical,keyCertSign\\n' > ca.ext;"
        "openssl req %s -keyout inter.key -out inter.csr -subj /CN=inter;"
        "openssl x509 -req -in inter.csr -CA ca1.crt -CAkey ca1.key -CAcreateserial -days 2 "
        "  -extfile ca.ext -out inter.crt;"
        "mk ileaf via-intermediate inter 2;"
        "cp a.crt server.crt; cp a.key server.key",
        dir, key, key, key, key);
    return rc == 0 ? 0 : -1;
}

static int rm_certs(void **state)
{
    tc_sh("rm -rf %s", dir);
    return 0;
}

static struct tc_opts topts(struct fx *f)
{
    struct tc_opts o = {.port = f->port, .tls = true};
    return o;
}

static char *path(const char *name)
{
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
    return p[i];
}

/* ---- basic TLS, keep-alive, pipelining, versions ---------------------- */

static void cl_tls_basic(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = topts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, strcmp(c.peer_cn, "gpuscaler") == 0); /* the self-signed fallback */
    CHECK(f, SSL_version(c.ssl) == TLS1_3_VERSION);
    for (int i = 0; i < 2; i++) {
        CHECK(f, tc_send_str(&c, "GET /k?i=1 HTTP/1.1\r\nHost: t\r\nX-Test: t\r\n\r\n") == 0);
        CHECK(f, tc_read_response(&c, &r) == 0);
        CHECK(f, r.status == 200 && strcmp(r.body, "GET /k q=i=1 len=0 x=t ka=1") == 0);
    }
    CHECK(f, tc_send_str(&c, "GET /p1 HTTP/1.1\r\nHost: t\r\n\r\nGET /defer/40 HTTP/1.1\r\nHost: t\r\n\r\n"
                             "POST /p3 HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && strcmp(r.body, "GET /p1 q= len=0 x=- ka=1") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 &&
                 strcmp(r.body, "GET /defer/40 q= len=0 x=- ka=1") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && strcmp(r.body, "POST /p3 q= len=2 x=- ka=1") == 0);
    tc_close(&c);

    o.max_tls_version = TLS1_2_VERSION;
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, SSL_version(c.ssl) == TLS1_2_VERSION);
    CHECK(f, tc_send_str(&c, "GET /v12 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && r.status == 200 && r.close);
    CHECK(f, tc_wait_close(&c) == 0);
    tc_close(&c);

    o.max_tls_version = TLS1_1_VERSION; /* refused */
    CHECK(f, tc_connect(&c, &o) != 0);
}

static void test_tls_basic(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = {.port = 0, .tls = true, .name = "tls"};
    fx_run(&f, &cfg, cl_tls_basic);
    assert_int_equal(f.requests, 6);
    assert_false(f.last_presented);
}

/* More than the parser's 64 KiB pipelined behind a deferred answer: what
 * the TLS layer decrypted past the parser's limit (or still holds
 * encrypted) is fed to the parser as it drains, not left waiting for the
 * socket to bring more (the client has sent everything and waits: the rest
 * once timed out with a 408). */
static void cl_tls_pipeline_long(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = topts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    char pad[960];
    memset(pad, 'p', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    struct util_buf b = {0};
    util_buf_printf(&b, "GET /defer/100 HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int i = 0; i < 150; i++)
        util_buf_printf(&b, "GET /n%d HTTP/1.1\r\nHost: t\r\nX-Pad: %s\r\n\r\n", i, pad);
    CHECK(f, b.len > 2 * 65536);
    CHECK(f, tc_send(&c, b.data, b.len) == 0);
    util_buf_free(&b);
    CHECK(f, tc_read_response(&c, &r) == 0 && r.status == 200);
    for (int i = 0; i < 150; i++) {
        char want[64];
        snprintf(want, sizeof(want), "GET /n%d q= len=0", i);
        if (tc_read_response(&c, &r) != 0 || r.status != 200 ||
            strncmp(r.body, want, strlen(want)) != 0) {
            CHECK(f, !"pipelined response missing, out of order or not a 200");
            break;
        }
    }
    tc_close(&c);
}

static void test_tls_pipeline_long(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = {.port = 0, .tls = true, .name = "tls"};
    fx_run(&f, &cfg, cl_tls_pipeline_long);
    assert_int_equal(f.requests, 151);
}

/* ---- garbage and the handshake deadline ------------------------------------ */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void cl_garbage(struct fx *f)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts plain = {.port = f->port};
    struct tc_opts o = topts(f);
    CHECK(f, tc_connect(&c, &plain) == 0);
    unsigned char junk[512];
    srand(7);
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (unsigned char)rand();
    junk[0] = 0x16; /* looks like a handshake record at first */
    tc_send(&c, junk, sizeof(junk));
    CHECK(f, tc_wait_close(&c) == 0);
    tc_close(&c);

    CHECK(f, tc_connect(&c, &plain) == 0);
    tc_send_str(&c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK(f, tc_wait_close(&c) == 0);
    tc_close(&c);

    /* a partial ClientHello that never completes hits the header deadline */
    CHECK(f, tc_connect(&c, &plain) == 0);
    int64_t t0 = mono_ms();
    tc_send(&c, "\x16\x03\x01\x02\x00\x01", 6);
    CHECK(f, tc_wait_close(&c) == 0);
    int64_t took = mono_ms() - t0;
    CHECK(f, took >= 250 && took < 2000);
    tc_close(&c);

    /* and the server still works */
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /fine HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && r.status == 200);
    tc_close(&c);
}

static void test_tls_garbage(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = {.tls = true, .header_timeout_ms = 300, .name = "tls"};
    fx_run(&f, &cfg, cl_garbage);
    assert_int_equal(f.requests, 1);
}

/* ---- graceful close during a handshake ------------------------------------- */

/* A connection in its TLS handshake when the server starts closing is not
 * idle: the handshake completes and its request is answered, with
 * "Connection: close" (it was closed at once), while one that sent nothing
 * is closed at once. The client writes half its ClientHello, then the rest
 * once the close has begun, then goes on over the socket. */
static void cl_close_mid_handshake(struct fx *f)
{
    struct tc idle, c;
    struct tc_resp r;
    struct tc_opts plain = {.port = f->port};
    CHECK(f, tc_connect(&idle, &plain) == 0);
    CHECK(f, tc_connect(&c, &plain) == 0); /* TCP only: the handshake is driven here */
    c.ctx = SSL_CTX_new(TLS_client_method());
    c.ssl = c.ctx ? SSL_new(c.ctx) : NULL;
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    CHECK(f, c.ssl && rb && wb);
    char *hello = NULL;
    long n = 0;
    if (c.ssl && rb && wb) {
        SSL_set_bio(c.ssl, rb, wb); /* c.ssl owns both now */
        rb = wb = NULL;
        CHECK(f, SSL_connect(c.ssl) == -1); /* wants the ServerHello */
        n = BIO_get_mem_data(SSL_get_wbio(c.ssl), &hello);
    }
    BIO_free(rb);
    BIO_free(wb);
    CHECK(f, n > 10 && hello);
    if (n > 10 && hello)
        CHECK(f, send(c.fd, hello, (size_t)n / 2, MSG_NOSIGNAL) == n / 2);
    usleep(100000); /* the server has read it */
    uv_async_send(&f->done); /* the server starts closing now */
    CHECK(f, tc_wait_close(&idle) == 0);
    if (n > 10 && hello)
        CHECK(f, send(c.fd, hello + n / 2, (size_t)(n - n / 2), MSG_NOSIGNAL) == n - n / 2);
    bool hs = false;
    if (c.ssl) {
        SSL_set_fd(c.ssl, c.fd); /* the rest of the handshake over the socket */
        hs = SSL_connect(c.ssl) == 1;
    }
    CHECK(f, hs);
    if (hs) {
        CHECK(f, tc_send_str(&c, "GET /hs HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
        CHECK(f, tc_read_response(&c, &r) == 0);
        CHECK(f, r.status == 200 && r.close && strcmp(r.body, "GET /hs q= len=0 x=- ka=0") == 0);
    }
    tc_close(&c);
    tc_close(&idle);
}

static void test_close_mid_handshake(void **state)
{
    (void)state;
    struct fx f = {.client_closes = true};
    struct httpd_config cfg = {.tls = true, .name = "tls"};
    fx_run(&f, &cfg, cl_close_mid_handshake);
    assert_int_equal(f.requests, 1);
}

/* ---- certificate reload ------------------------------------------------------ */

static void replace(const char *src_crt, const char *src_key)
{
    tc_sh("cd %s && cp %s new.crt && cp %s new.key && mv new.key server.key && "
          "mv new.crt server.crt",
          dir, src_crt, src_key);
}

static void cl_reload(struct fx *f)
{
    struct tc old, c;
    struct tc_resp r;
    struct tc_opts o = topts(f);
    CHECK(f, tc_connect(&old, &o) == 0);
    CHECK(f, strcmp(old.peer_cn, "server-a") == 0);

    replace("b.crt", "b.key");
    usleep(300000); /* several poll periods */
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, strcmp(c.peer_cn, "server-b") == 0);
    tc_close(&c);
    /* the connection made before the reload keeps working */
    CHECK(f, tc_send_str(&old, "GET /still HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&old, &r) == 0 && r.status == 200);
    tc_close(&old);

    /* a mismatched pair and then garbage are rejected; server-b stays */
    replace("a.crt", "b.key");
    usleep(300000);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, strcmp(c.peer_cn, "server-b") == 0);
    tc_close(&c);
    tc_sh("cd %s && echo garbage > g.crt && cp g.crt server.crt", dir);
    usleep(300000);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, strcmp(c.peer_cn, "server-b") == 0);
    CHECK(f, tc_send_str(&c, "GET /ok HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && r.status == 200);
    tc_close(&c);
    /* a good pair again */
    replace("a.crt", "a.key");
    usleep(300000);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, strcmp(c.peer_cn, "server-a") == 0);
    tc_close(&c);
}

static void test_cert_reload(void **state)
{
    struct fx f = {0};
    replace("a.crt", "a.key");
    struct httpd_config cfg = {.tls = true, .cert_file = path("server.crt"),
                               .key_file = path("server.key"), .cert_poll_ms = 50,
                               .name = "tls"};
    fx_run(&f, &cfg, cl_reload);
    assert_int_equal(f.requests, 2);
}

static void test_reload_direct(void **state)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    replace("a.crt", "a.key");
    struct httpd *srv;
    struct httpd_config cfg = {.tls = true, .cert_file = path("server.crt"),
                               .key_file = path("server.key"), .no_cert_poll = true};
    assert_int_equal(httpd_new(&loop, &cfg, fx_handler, NULL, &srv), 0);
    assert_int_equal(httpd_reload_certs(srv), 0); /* nothing changed */
    replace("b.crt", "b.key");
    assert_int_equal(httpd_reload_certs(srv), 1);
    replace("b.crt", "a.key");
    assert_true(httpd_reload_certs(srv) < 0);
    assert_int_equal(httpd_reload_certs(srv), 0); /* reported once per change */
    /* broken files at startup are an error */
    struct httpd *bad = NULL;
    assert_int_equal(httpd_new(&loop, &cfg, fx_handler, NULL, &bad), -EPROTO);
    assert_int_equal(httpd_set_client_ca(srv, "nope", 4), -EINVAL);
    httpd_free(srv);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- client certificates -------------------------------------------------- */

static void cert_case(struct fx *f, const char *name, const char *want)
{
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = topts(f);
    char crt[512], key[512];
    if (name) {
        snprintf(crt, sizeof(crt), "%s/%s.crt", dir, name);
        snprintf(key, sizeof(key), "%s/%s.key", dir, name);
        o.cert_file = crt;
        o.key_file = key;
    }
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /cert HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0);
    if (strcmp(r.body, want) != 0 && !f->fail_line) {
        f->fail_line = __LINE__;
        snprintf(f->fail_msg, sizeof(f->fail_msg), "%s: got '%.80s' want '%.80s'",
                 name ? name : "(none)", r.body, want);
    }
    tc_close(&c);
}

static void cl_client_certs(struct fx *f)
{
    cert_case(f, "client", "presented=1 verified=1 cn=front-proxy-client pem=1");
    cert_case(f, NULL, "presented=0 verified=0 cn= pem=0");
    cert_case(f, "other", "presented=1 verified=0 cn=other-client pem=1");
    cert_case(f, "expired", "presented=1 verified=0 cn=expired pem=1");
    /* swap the CA at runtime (on the loop thread, through the handler) */
    struct tc c;
    struct tc_resp r;
    struct tc_opts o = topts(f);
    CHECK(f, tc_connect(&c, &o) == 0);
    CHECK(f, tc_send_str(&c, "GET /setca HTTP/1.1\r\nHost: t\r\n\r\n") == 0);
    CHECK(f, tc_read_response(&c, &r) == 0 && r.status == 200);
    tc_close(&c);
    cert_case(f, "other", "presented=1 verified=1 cn=other-client pem=1");
    cert_case(f, "client", "presented=1 verified=0 cn=front-proxy-client pem=1");
}

static void ca_handler(struct httpd_request *req, void *arg)
{
    struct fx *f = arg;
    if (strcmp(req->path, "/setca") != 0) {
        fx_handler(req, arg);
        return;
    }
    f->requests++;
    char pem[8192];
    FILE *fp = fopen(path("ca2.crt"), "r");
    size_t n = fp ? fread(pem, 1, sizeof(pem), fp) : 0;
    if (fp)
        fclose(fp);
    int rc = httpd_set_client_ca(f->srv, pem, n);
    httpd_respond(req, rc == 0 ? 200 : 500, NULL, 0, NULL, 0);
}

static void client_cert_thread(void *arg)
{
    struct fx *f = arg;
    cl_client_certs(f);
    uv_async_send(&f->done);
}

static void test_client_certs(void **state)
{
    struct fx f = {0};
    struct httpd_config cfg = {.tls = true, .cert_file = path("a.crt"), .key_file = path("a.key"),
                               .client_ca_file = path("ca1.crt"), .name = "tls"};
    assert_int_equal(uv_loop_init(&f.loop), 0);
    assert_int_equal(httpd_new(&f.loop, &cfg, ca_handler, &f, &f.srv), 0);
    f.port = httpd_port(f.srv);
    uv_async_init(&f.loop, &f.done, fx_on_done);
    f.done.data = &f;
    uv_thread_create(&f.thr, client_cert_thread, &f);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    uv_thread_join(&f.thr);
    if (f.fail_line)
        fail_msg("client scenario failed at line %d: %s", f.fail_line, f.fail_msg);
    assert_int_equal(f.requests, 7);
    assert_int_equal(f.server_closed, 1);
    assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* request_client_cert without a client CA yet: the certificate is asked
 * for all the same, so a handler that checks the chain itself against a CA
 * loaded later (the external metrics API's front proxy) has it; without the
 * flag nothing is asked and a client's certificate never arrives. */
static void cl_cert_before_ca(struct fx *f)
{
    const char *want = f->user ? "presented=1 verified=0 cn=front-proxy-client pem=1"
                               : "presented=0 verified=0 cn= pem=0";
    cert_case(f, "client", want);
}

static void cert_before_ca_thread(void *arg)
{
    struct fx *f = arg;
    cl_cert_before_ca(f);
    uv_async_send(&f->done);
}

static void test_client_cert_before_a_ca(void **state)
{
    (void)state;
    for (int ask = 0; ask < 2; ask++) {
        struct fx f = {0};
        struct httpd_config cfg = {.tls = true, .cert_file = path("a.crt"),
                                   .key_file = path("a.key"), .request_client_cert = ask,
                                   .name = "tls"};
        f.user = ask ? &f : NULL;
        assert_int_equal(uv_loop_init(&f.loop), 0);
        assert_int_equal(httpd_new(&f.loop, &cfg, fx_handler, &f, &f.srv), 0);
        f.port = httpd_port(f.srv);
        uv_async_init(&f.loop, &f.done, fx_on_done);
        f.done.data = &f;
        uv_thread_create(&f.thr, cert_before_ca_thread, &f);
        uv_run(&f.loop, UV_RUN_DEFAULT);
        uv_thread_join(&f.thr);
        if (f.fail_line)
            fail_msg("ask %d: client scenario failed at line %d: %s", ask, f.fail_line,
                     f.fail_msg);
        assert_int_equal(f.requests, 1);
        assert_int_equal(uv_loop_close(&f.loop), 0);
    }
}

/* A client CA bundle of an intermediate CA alone (its root kept offline):
 * the intermediate is an anchor, as every certificate of Go's x509 Roots is;
 * its clients verify (they used to fail for want of the root), others not. */
static void cl_intermediate_ca(struct fx *f)
{
    cert_case(f, "ileaf", "presented=1 verified=1 cn=via-intermediate pem=1");
    cert_case(f, "client", "presented=1 verified=0 cn=front-proxy-client pem=1");
}

static void intermediate_ca_thread(void *arg)
{
    struct fx *f = arg;
    cl_intermediate_ca(f);
    uv_async_send(&f->done);
}

static void test_client_ca_intermediate(void **state)
{
    (void)state;
    struct fx f = {0};
    struct httpd_config cfg = {.tls = true, .cert_file = path("a.crt"), .key_file = path("a.key"),
                               .client_ca_file = path("inter.crt"), .name = "tls"};
    assert_int_equal(uv_loop_init(&f.loop), 0);
    assert_int_equal(httpd_new(&f.loop, &cfg, fx_handler, &f, &f.srv), 0);
    f.port = httpd_port(f.srv);
    uv_async_init(&f.loop, &f.done, fx_on_done);
    f.done.data = &f;
    uv_thread_create(&f.thr, intermediate_ca_thread, &f);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    uv_thread_join(&f.thr);
    if (f.fail_line)
        fail_msg("client scenario failed at line %d: %s", f.fail_line, f.fail_msg);
    assert_int_equal(f.requests, 2);
    assert_int_equal(f.server_closed, 1);
    assert_int_equal(uv_loop_close(&f.loop), 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* a write to a connection the server closed fails, not kills */
    util_log_setup(UTIL_LOG_LOGFMT, getenv("TEST_DEBUG") ? UTIL_LOG_DEBUG : UTIL_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_basic),
        cmocka_unit_test(test_tls_pipeline_long),
        cmocka_unit_test(test_tls_garbage),
        cmocka_unit_test(test_close_mid_handshake),
        cmocka_unit_test(test_cert_reload),
        cmocka_unit_test(test_reload_direct),
        cmocka_unit_test(test_client_certs),
        cmocka_unit_test(test_client_cert_before_a_ca),
        cmocka_unit_test(test_client_ca_intermediate),
    };
    return cmocka_run_group_tests(tests, gen_certs, rm_certs);
}

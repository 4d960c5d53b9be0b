/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for h1.c without sockets: which requests it takes and the bytes
 * it sends (h1_prepare), and how its response parser splits, completes and
 * refuses answers fed in pieces of every size. */
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "httpc/httpc-int.h"
#include "httpc/httpc.h"
#include "util/util.h"

struct seen {
    int headers;      /* on_headers calls */
    int status;
    char block[256];
    struct util_buf body;
    int fail_body;    /* returned by on_body when set */
};

static int t_headers(void *ud, int status, const char *block, size_t len)
{
    struct seen *s = ud;
    s->headers++;
    s->status = status;
    assert_int_equal(strlen(block), len);
    snprintf(s->block, sizeof(s->block), "%s", block);
    return 0;
}

static int t_body(void *ud, const char *p, size_t n)
{
    struct seen *s = ud;
    if (s->fail_body)
        return s->fail_body;
    util_buf_append(&s->body, p, n);
    return 0;
}

static const struct h1_parser_cb cbs = {t_headers, t_body};

/* Feed msg in pieces of `step` bytes; the first non-zero result, or 0. */
static int feed(struct h1_parser *p, const char *msg, size_t len, size_t step)
{
    for (size_t off = 0; off < len; off += step) {
        size_t n = len - off < step ? len - off : step;
        int rc = h1_parser_feed(p, msg + off, n);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void test_parse_complete(void **state)
{
    (void)state;
    static const struct {
        const char *msg, *body;
        int status;
        bool needs_eof; /* the body ends with the connection */
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello", "hello",
         200, false},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel\r\n\r\n3;x=1\r\nlo!\r\n0\r\n\r\n",
         "hel\r\nlo!", 200, false},
        {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 2\r\n\r\nno", "no", 503,
         false},
        {"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close", "until the close",
         200, true},
        {"HTTP/1.1 204 No Content\r\n\r\n", "", 204, false},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        for (size_t step = 1; step <= strlen(cases[i].msg); step += step < 8 ? 1 : 17) {
            struct seen s = {0};
            struct h1_parser p;
            h1_parser_init(&p, &cbs, &s);
            int rc = feed(&p, cases[i].msg, strlen(cases[i].msg), step);
            if (cases[i].needs_eof) {
                assert_int_equal(rc, 0);
                rc = h1_parser_eof(&p);
            }
            assert_int_equal(rc, 1);
            assert_int_equal(s.headers, 1);
            assert_int_equal(s.status, cases[i].status);
            assert_string_equal(s.body.data ? s.body.data : "", cases[i].body);
            /* done: bytes after it are ignored, the answer stays */
            assert_int_equal(h1_parser_feed(&p, "HTTP/1.1 500 X\r\n\r\n", 18), 1);
            assert_int_equal(h1_parser_eof(&p), 1);
            assert_int_equal(s.headers, 1);
            h1_parser_free(&p);
            util_buf_free(&s.body);
        }
    }
    /* header lines as "Name: value", values as sent */
    struct seen s = {0};
    struct h1_parser p;
    h1_parser_init(&p, &cbs, &s);
    const char *m = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                    "X-A:b\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(feed(&p, m, strlen(m), 3), 1);
    assert_string_equal(s.block, "Content-Type: text/plain; version=0.0.4\r\nX-A: b\r\n"
                                 "Content-Length: 0\r\n");
    h1_parser_free(&p);
}

static void test_parse_refused(void **state)
{
    (void)state;
    static const struct {
        const char *msg;
        int want;      /* from feed, or from eof when feed asks for more */
        const char *in_msg;
    } cases[] = {
        {"", -ECONNRESET, "empty reply"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", -ECONNRESET, "whole response"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", -ECONNRESET, "whole"},
        {"HTTP/1.1 200 OK\r\nContent-Le", -ECONNRESET, "whole"},
        {"SSH-2.0-OpenSSH_9.2\r\n", -EPROTO, "invalid HTTP response"},
        {"HTTP/1.1 2000 OK\r\n\r\n", -EPROTO, "invalid"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", -EPROTO, "invalid"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", -EPROTO, "invalid"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        struct seen s = {0};
        struct h1_parser p;
        h1_parser_init(&p, &cbs, &s);
        int rc = feed(&p, cases[i].msg, strlen(cases[i].msg), 4);
        if (rc == 0)
            rc = h1_parser_eof(&p);
        assert_int_equal(rc, cases[i].want);
        if (!strstr(p.errmsg, cases[i].in_msg))
            print_error("case %zu: %d \"%s\"\n", i, rc, p.errmsg);
        assert_non_null(strstr(p.errmsg, cases[i].in_msg));
        assert_int_equal(h1_parser_feed(&p, "x", 1), cases[i].want); /* stays refused */
        h1_parser_free(&p);
        util_buf_free(&s.body);
    }

    /* a header block over the cap */
    struct seen s = {0};
    struct h1_parser p;
    h1_parser_init(&p, &cbs, &s);
    const char *start = "HTTP/1.1 200 OK\r\nX-Big: ";
    assert_int_equal(h1_parser_feed(&p, start, strlen(start)), 0);
    char blk[4096];
    memset(blk, 'a', sizeof(blk));
    int rc = 0;
    for (size_t n = 0; rc == 0 && n <= HTTPC_MAX_HEADER_BYTES + sizeof(blk); n += sizeof(blk))
        rc = h1_parser_feed(&p, blk, sizeof(blk));
    assert_int_equal(rc, -EMSGSIZE);
    assert_int_equal(s.headers, 0);
    h1_parser_free(&p);

    /* a callback's error stops the parse with its value */
    s = (struct seen){.fail_body = -EBADMSG};
    h1_parser_init(&p, &cbs, &s);
    const char *m = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    assert_int_equal(h1_parser_feed(&p, m, strlen(m)), -EBADMSG);
    assert_int_equal(h1_parser_eof(&p), -EBADMSG);
    h1_parser_free(&p);
}

static void test_prepare(void **state)
{
    (void)state;
    static const char *const hdrs[] = {"Accept: text/plain", "Content-Type:", NULL};
    struct sockaddr_storage sa;
    char *req;
    size_t len;
    struct httpc_opts o = {.url = "http://10.1.2.3:8000/metrics?x=1", .no_reuse = true,
                           .no_compression = true, .headers = hdrs};
    assert_true(h1_prepare(&o, &sa, &req, &len));
    assert_int_equal(len, strlen(req));
    assert_string_equal(req, "GET /metrics?x=1 HTTP/1.1\r\nHost: 10.1.2.3:8000\r\n"
                             "Accept: text/plain\r\nConnection: close\r\n\r\n");
    assert_int_equal(sa.ss_family, AF_INET);
    assert_int_equal(ntohs(((struct sockaddr_in *)&sa)->sin_port), 8000);
    xfree(req);

    o = (struct httpc_opts){.url = "HTTP://[fd00::7]", .no_reuse = true, .no_compression = true};
    assert_true(h1_prepare(&o, &sa, &req, &len));
    assert_string_equal(req, "GET / HTTP/1.1\r\nHost: [fd00::7]\r\nAccept: */*\r\n"
                             "Connection: close\r\n\r\n");
    assert_int_equal(sa.ss_family, AF_INET6);
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&sa)->sin6_port), 80);
    xfree(req);

    /* everything else stays with curl */
    static const char *const urls[] = {
        "https://10.0.0.1/metrics", "http://pod.example:8000/metrics", "http://10.0.0.1:0/",
        "http://10.0.0.1:65536/", "http://10.0.0.1:80x/", "http://[fd00::7/", "http://user@10.0.0.1/",
        "http://10.0.0.1/a b", "http://10.0.0.1/a#frag", "http://10.0.0.1.5/", "http://:80/",
        "ftp://10.0.0.1/",
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(urls); i++) {
        o = (struct httpc_opts){.url = urls[i], .no_reuse = true, .no_compression = true};
        assert_false(h1_prepare(&o, &sa, &req, &len));
    }
    static const char *const crlf[] = {"X-A: b\r\nX-Evil: c", NULL};
    const struct httpc_opts base = {.url = "http://10.0.0.1/", .no_reuse = true,
                                    .no_compression = true};
    static const char *const basic[] = {"Accept: text/plain", "authorization: Basic dTpw", NULL};
    static const char *const proxy[] = {"Proxy-Authorization: Basic dTpw", NULL};
    struct httpc_opts not[9];
    for (size_t i = 0; i < UTIL_ARRAY_LEN(not); i++)
        not[i] = base;
    not[0].no_reuse = false;
    not[1].no_compression = false;
    not[2].bearer = "secret";
    not[3].method = "POST";
    not[4].body = "x", not[4].body_len = 1;
    not[5].stall_timeout_ms = 1000;
    not[6].headers = crlf;
    not[7].headers = basic; /* secrets go through curl, which wipes its header block */
    not[8].headers = proxy;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(not); i++)
        assert_false(h1_prepare(&not[i], &sa, &req, &len));
    assert_true(h1_prepare(&base, &sa, &req, &len));
    xfree(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_complete),
        cmocka_unit_test(test_parse_refused),
        cmocka_unit_test(test_prepare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

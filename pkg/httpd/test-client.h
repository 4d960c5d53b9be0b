/* SPDX-License-Identifier: Apache-2.0 */
/* test-client: a small blocking HTTP/1.1 client (plain or TLS, optional
 * client certificate) that the httpd tests run in a thread while the server
 * runs on the test's loop. Test-only. */
#ifndef GPUSCALER_HTTPD_TEST_CLIENT_H
#define GPUSCALER_HTTPD_TEST_CLIENT_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct tc_opts {
    int port;
    bool tls;
    const char *cert_file; /* client certificate (PEM) or NULL */
    const char *key_file;
    int max_tls_version;   /* 0 = default */
    int timeout_ms;        /* socket receive timeout [5000] */
    const char *source;    /* local IPv4 address to connect from (127.x.y.z), NULL: any */
    int rcvbuf;            /* SO_RCVBUF set before connecting, 0: the system's (which
                              autotunes up to tcp_rmem's maximum, 32 MiB on some hosts) */
};

struct tc {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    char buf[1 << 16];
    size_t len;
    char peer_cn[128];     /* server certificate CN */
};

struct tc_resp {
    int status;
    char headers[8192];
    char body[1 << 16];
    size_t body_len;
    bool close;
};

int tc_connect(struct tc *c, const struct tc_opts *o);
int tc_send(struct tc *c, const void *data, size_t len);
int tc_send_str(struct tc *c, const char *s);
/* 0 on a parsed response, -1 on EOF/timeout/error */
int tc_read_response(struct tc *c, struct tc_resp *r);
/* Wait for the peer to close: returns 0 on EOF, 1 if data arrived, -1 on timeout. */
int tc_wait_close(struct tc *c);
void tc_close(struct tc *c);
/* Run a shell command, return its exit status. */
int tc_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* httpd internals shared between parse.c, tls.c, conn.c and server.c; no
 * other module includes this file. */
#ifndef GPUSCALER_HTTPD_INT_H
#define GPUSCALER_HTTPD_INT_H

#include "httpd/httpd.h"
#include "util/util.h"

#include <llhttp.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#define HTTPD_READ_BUF 65536
/* Unparsed pipelined input kept while a request is with its handler. */
#define HTTPD_PIPELINE_BUF 65536

/* ---- parse.c: bytes -> requests --------------------------------------- */

struct hp_limits {
    size_t max_header_bytes;
    size_t max_headers;
    size_t max_body_bytes;
};

struct conn;

/* A request as the server holds it; pub is what the handler sees. */
struct hreq {
    struct httpd_request pub;
    struct conn *conn;            /* NULL once the connection went away */
    httpd_abort_cb abort_cb;
    void *abort_arg;
    struct util_buf store;        /* target, method, header names and values */
    size_t target_off, method_off, query_off;
    size_t *hoff;                 /* pairs of name/value offsets into store */
    size_t nhdr, hcap;
    struct httpd_header *hdrs;
    struct util_buf body;
    char *cn;
    char *chain_pem;
    bool is_head;
    bool http10;                  /* an HTTP/1.0 request: kept alive only when it asked */
    bool peer_eof;                /* the peer closed its sending side (not an abort) */
};

struct hparser {
    llhttp_t ll;
    struct hp_limits lim;
    struct util_buf in;           /* received, not yet parsed */
    size_t inpos;
    struct hreq *cur;             /* being parsed */
    struct hreq *done;            /* completed, waiting to be returned */
    size_t head_bytes;
    size_t body_wire;             /* bytes of cur's body as sent: data and chunk framing */
    size_t name_off;
    int err_status;               /* 400/413/431 after a rejection */
    bool failed;
    bool in_message;
    bool headers_done;
    bool head_paused;             /* llhttp paused at the end of cur's headers */
    bool want_continue;           /* "Expect: 100-continue" seen for cur */
};

void hp_init(struct hparser *p, const struct hp_limits *lim);
void hp_free(struct hparser *p);
/* Append received plaintext. */
void hp_append(struct hparser *p, const void *data, size_t len);
size_t hp_buffered(const struct hparser *p);
/* Whether another request's head has come whole (or is being parsed): what
 * is buffered is more than CRLFs and a request cut short. */
bool hp_request_waiting(const struct hparser *p);
/* 1: *out is a complete request (caller owns it); 0: need more input;
 * -EPROTO: the stream is broken, p->err_status says how to answer. */
int hp_next(struct hparser *p, struct hreq **out);

void hreq_free(struct hreq *r);

/* ---- tls.c -------------------------------------------------------------- */

struct file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

/* Build a server context from files, or from an in-memory self-signed
 * certificate when both are NULL. On failure returns NULL and logs why. */
SSL_CTX *tls_ctx_new(const char *subsys, const char *cert_file, const char *key_file);
/* Parse a PEM bundle into a new store; NULL if it holds no certificate.
 * Every certificate of it is an anchor (X509_V_FLAG_PARTIAL_CHAIN). */
X509_STORE *tls_store_from_pem(const char *pem, size_t len);
/* The client-certificate verify callback (records, never fails). */
int tls_verify_cb(int ok, X509_STORE_CTX *ctx);
void tls_file_id(const char *path, struct file_id *out);
bool tls_file_id_eq(const struct file_id *a, const struct file_id *b);
/* Pull the OpenSSL error queue into one string (for logs). */
void tls_errors(char *out, size_t len);

/* ---- server / connections ---------------------------------------------- */

/* Live connections from one IP address (server.c's table). */
struct source {
    struct source *next;      /* hash chain */
    unsigned n;               /* live connections (not closing) */
    uint8_t len;              /* 4 or 16 */
    unsigned char addr[16];
};

#define SOURCE_BUCKETS 256

struct httpd {
    uv_loop_t *loop;
    struct httpd_config cfg;      /* strings point at the owned copies below */
    char *host, *cert_file, *key_file, *client_ca_file, *name;
    httpd_request_cb cb;
    void *arg;

    uv_tcp_t listener;
    uv_timer_t poll_timer;
    uv_timer_t grace_timer;
    int open_handles;
    int port;

    SSL_CTX *ctx;
    X509_STORE *client_store;
    struct file_id cert_id, key_id, ca_id;

    struct conn *conns;           /* newest first */
    unsigned nconns;              /* allocated (closing ones included) */
    unsigned nlive;               /* not closing: what the caps count */
    struct source *sources[SOURCE_BUCKETS];
    unsigned nsources;
    struct httpd_stats stats;
    uint64_t log_after;           /* loop time before which refusals are only counted */
    uint64_t log_refused, log_evicted; /* counted since the last line */

    bool closing;
    httpd_close_cb close_cb;
    void *close_arg;

    char date[40];
    int64_t date_sec;
    char rbuf[HTTPD_READ_BUF];
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    struct httpd *srv;
    struct conn *prev, *next;
    int open_handles;

    struct hparser hp;
    SSL *ssl;
    BIO *rbio, *wbio;
    bool hs_done;
    bool verify_failed;
    bool cert_presented;
    bool cert_verified;
    char *cn;
    char *chain_pem;              /* the client's certificates, PEM, leaf first */
    char addr[64];

    struct source *src;           /* NULL until counted (and again once closing) */
    uint64_t accepted_at;         /* loop time */
    uint64_t last_done;           /* loop time the last response was queued, 0 if none */
    unsigned completed;           /* requests answered */
    struct hreq *busy;            /* request with the handler */
    int writes;                   /* uv_write requests in flight: while any is, no
                                     request is read or dispatched (a client that
                                     pipelines and never reads cannot make the server
                                     queue responses without bound) */
    uint64_t write_progress;      /* loop time the peer was last seen taking the answers:
                                     writes began or completed, or the kernel's count of
                                     what it took moved (conn_write_stalled) */
    uint64_t bytes_out;           /* bytes ever given to the socket to send */
    uint64_t progress_taken;      /* of those, what the peer had taken then */
    uint64_t idle_from;           /* loop time the idle limit runs from: accept, the
                                     last answer queued, or a write's last progress
                                     (bare CRLFs between requests do not move it) */
    uint64_t head_start;          /* loop time the current head began, 0 if none */
    uint64_t body_start;          /* loop time the current body began (its headers
                                     ended), 0 if none */
    bool reading;
    bool processing;
    bool closing;
    bool close_after_write;
    bool eof;
    bool sent_continue;
    bool lingering;               /* write side shut down, draining until EOF */
    bool heard;                   /* bytes have come from the peer (on TLS: its handshake
                                     has begun) */
};

void conn_accept(struct httpd *srv);
/* Count c as a live connection from source address sa (len 4 or 16 bytes),
 * making room as the file comment of httpd.h says; false when it must be
 * refused (it is then closed). */
bool srv_admit(struct httpd *srv, struct conn *c, const unsigned char *addr, size_t len);
/* c stops counting (closing). */
void srv_release(struct httpd *srv, struct conn *c);
void conn_close(struct conn *c);
/* With writes pending: has the peer taken none of them for ms? Samples the
 * kernel's count of what it took (a single write of a large answer
 * completes only at its end); a move since the last sample is progress. */
bool conn_write_stalled(struct conn *c, uint64_t ms);
/* Called when a server starts closing: close idle connections now, let
 * those with a request in progress (being received, with the handler, or
 * its answer being written) finish it. */
void conn_shutdown(struct conn *c);
void srv_conn_gone(struct httpd *srv);
const char *srv_date(struct httpd *srv);

#endif

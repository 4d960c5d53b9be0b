/* SPDX-License-Identifier: Apache-2.0 */
/* httpc internals shared by httpc.c and alloc.c; no other module includes
 * this file. */
#ifndef GPUSCALER_HTTPC_INT_H
#define GPUSCALER_HTTPC_INT_H

/**
 * curl_global_init with counting allocation functions (alloc.c). Every
 * httpc_new calls it and httpc's free calls curl_global_cleanup, as libcurl
 * counts initialisations. 0, or -1 when libcurl cannot initialise.
 */
int httpc_global_init(void);

/* ---- h1.c: one plain HTTP/1.1 request per connection, without curl ---- */

#include <llhttp.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "util/util.h"

/** What the response parser reports, in order: the header block of the final
 *  (non-1xx) response once, then body pieces (chunked coding removed). A
 *  negative return aborts the parse with that value. */
struct h1_parser_cb {
    /** block: the response's header lines as "Name: value\r\n", NUL-terminated */
    int (*on_headers)(void *ud, int status, const char *block, size_t len);
    int (*on_body)(void *ud, const char *data, size_t len);
};

/** A response parser (llhttp underneath); no I/O. */
struct h1_parser {
    llhttp_t http;
    llhttp_settings_t settings;
    const struct h1_parser_cb *cb;
    void *ud;
    struct util_buf hdr;   /**< header lines of the response being read */
    size_t hdr_bytes;      /**< header bytes of every response so far, capped */
    int status;            /**< the final response's status, 0 before its headers */
    int err;               /**< the error that stopped the parse, 0 while none */
    bool got_bytes;        /**< any byte was fed */
    bool complete;         /**< the final response has ended */
    char errmsg[160];      /**< what err means, for the user */
};

void h1_parser_init(struct h1_parser *p, const struct h1_parser_cb *cb, void *ud);
void h1_parser_free(struct h1_parser *p);
/**
 * Feed response bytes. Returns 1 when the response is complete (bytes after
 * it are ignored), 0 when more are needed, or a negative errno: -EPROTO (not
 * HTTP; errmsg says why), -EMSGSIZE (header block over HTTPC_MAX_HEADER_BYTES)
 * or a callback's value. Once it returned non-zero it returns the same again.
 */
int h1_parser_feed(struct h1_parser *p, const char *data, size_t len);
/** The peer closed: 1 when that completes the response (a body delimited by
 *  the close), else -ECONNRESET (nothing or a part arrived) or -EPROTO. */
int h1_parser_eof(struct h1_parser *p);

struct httpc_opts;
/**
 * Whether h1.c can carry the request: a GET to http://<IP literal>[:port]/...
 * with no_reuse and no_compression set, and no bearer token, body or stall
 * timeout. If so, *sa is the address and *request (xmalloc'd, *len bytes)
 * the request to send, with "Connection: close" and an Accept of any type
 * unless one was given; "Name:" lines (curl's "leave out") are dropped.
 */
bool h1_prepare(const struct httpc_opts *o, struct sockaddr_storage *sa, char **request,
                size_t *len);

struct h1_conn;
struct h1_conn_cb {
    struct h1_parser_cb parse;
    /** Exactly once, unless h1_conn_abort came first: err 0 (a complete
     *  response) or -ETIMEDOUT, -ECONNREFUSED, -ECONNRESET, -EPROTO,
     *  -EMSGSIZE or a parse callback's value; msg says what happened. */
    void (*on_done)(void *ud, int err, const char *msg);
};
struct h1_conn_opts {
    int64_t timeout_ms;         /**< whole request, 0 = none */
    int64_t connect_timeout_ms; /**< the connect only, 0 = 300 s (curl's default);
                                     never longer than timeout_ms when that is set */
    size_t recv_buffer;         /**< read size, 0 = 16 KiB */
};
/**
 * Connect to addr, send request (taken over on success, freed with the
 * conn; the caller's on failure) and parse the answer. Callbacks run from
 * the loop, never from here. Returns 0 or a negative libuv error.
 */
int h1_conn_start(uv_loop_t *loop, const struct sockaddr *addr, char *request, size_t request_len,
                  const struct h1_conn_opts *o, const struct h1_conn_cb *cb, void *ud,
                  struct h1_conn **out);
/** Stop: no callback runs any more; the memory goes once libuv closed the
 *  socket and the timer. NULL is ignored. */
void h1_conn_abort(struct h1_conn *c);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* testsrv: a tiny HTTP/1.1 server on 127.0.0.1 for the unit tests of httpc and
 * kube, running on the test's own libuv loop (no threads, no child process).
 *
 * It accepts keep-alive connections, parses one request at a time per
 * connection (Content-Length bodies only) and hands it to the test's handler,
 * which answers at once or later: a whole response, a chunked stream, or
 * nothing (to test timeouts). Connections are freed only by testsrv_stop(),
 * so a handler may keep a connection pointer across loop iterations; writes to
 * a connection the peer has closed are dropped. Test code only: it asserts
 * instead of returning errors.
 *
 * testsrv_run_until() is the loop driver the network tests share (those of
 * httpc, kube, promql and scrape). */
#ifndef GPUSCALER_TESTSRV_H
#define GPUSCALER_TESTSRV_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

struct testsrv;
struct testsrv_conn;

struct testsrv_req {
    const char *method;
    const char *target;   /**< path and query as sent */
    const char *headers;  /**< raw header lines, "\r\n" separated */
    const char *body;
    size_t body_len;
    unsigned conn_id;     /**< 1-based accept number of the connection */
};

typedef void (*testsrv_handler)(struct testsrv_conn *conn, const struct testsrv_req *req,
                                void *arg);

/** Listen on 127.0.0.1 on an ephemeral port. */
struct testsrv *testsrv_start(uv_loop_t *loop, testsrv_handler h, void *arg);
int testsrv_port(const struct testsrv *s);
/** "http://127.0.0.1:<port>" (owned by the server). */
const char *testsrv_url(const struct testsrv *s);
unsigned testsrv_accepts(const struct testsrv *s);
unsigned testsrv_requests(const struct testsrv *s);
/** Close the listener and every connection; memory goes in close callbacks. */
void testsrv_stop(struct testsrv *s);

/** Value of a request header (case-insensitive) copied into out, or false. */
bool testsrv_req_header(const struct testsrv_req *r, const char *name, char *out, size_t outlen);

/** A whole response with Content-Length. extra: "Name: v\r\n" lines or NULL. */
void testsrv_respond(struct testsrv_conn *c, int status, const char *content_type,
                     const char *body, size_t len, const char *extra);
/** Chunked streaming response: begin, any number of chunks, end. */
void testsrv_stream_begin(struct testsrv_conn *c, int status, const char *content_type);
void testsrv_stream_chunk(struct testsrv_conn *c, const char *data, size_t len);
void testsrv_stream_end(struct testsrv_conn *c);
/** Drop the connection. */
void testsrv_conn_close(struct testsrv_conn *c);
bool testsrv_conn_closed(const struct testsrv_conn *c);

/** The condition testsrv_run_until() waits for. */
typedef bool (*testsrv_cond)(void *arg);

/** Run loop until done(arg) holds or timeout_ms of loop time pass; true when
 * it holds. The condition is checked before and after every poll. A loop of
 * uv_run(UV_RUN_ONCE) calls is not enough: uv_run runs the due timers before
 * it polls, so when a timer (libcurl's, a request's deferred completion)
 * makes the condition true, the poll that follows waits for the next I/O,
 * which a test with nothing else in flight never sees. */
bool testsrv_run_until(uv_loop_t *loop, testsrv_cond done, void *arg, uint64_t timeout_ms);
/** testsrv_run_until() for the usual conditions: *counter >= n, *flag set. */
bool testsrv_run_until_count(uv_loop_t *loop, const int *counter, int n, uint64_t timeout_ms);
bool testsrv_run_until_flag(uv_loop_t *loop, const bool *flag, uint64_t timeout_ms);

#endif

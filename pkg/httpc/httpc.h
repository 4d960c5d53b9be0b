/* SPDX-License-Identifier: Apache-2.0 */
/* httpc: the one module through which all of gpuscaler's HTTP client traffic
 * goes, libcurl's multi interface driven by the daemon's libuv loop.
 *
 * Design: one struct httpc owns a CURLM, a uv_timer for curl's timeouts and a
 * uv_poll per socket curl asks about, exactly as curl's docs/examples/multi-uv.c
 * does (a timeout of 0 becomes 1 ms; curl_multi_info_read is drained after
 * every curl_multi_socket_action). Nothing blocks the loop: DNS goes through
 * curl's threaded resolver, everything else is event driven.
 *
 * Connections are reused through the multi handle's connection cache (idle
 * connections stay in the multi; a request may opt out with no_reuse), and
 * HTTP/2 is negotiated over TLS when the server offers it, multiplexing
 * concurrent requests (watches included) on one connection. Easy handles are
 * kept in a small pool per client and reset for the next request instead of
 * being made and destroyed each time.
 *
 * One kind of request skips curl: a GET to http://<IP literal>/... with
 * no_reuse and no_compression and no credentials, body or stall timeout (a
 * scrape of a pod) goes out on its own TCP connection through h1.c, parsed by
 * llhttp, with the same callbacks, errors and cancellation. At 2,000 such
 * requests a second, curl's per-connection work was most of the daemon's CPU.
 *
 * The client is a handle in libuv's sense (new/close(cb), memory released
 * only after the close callback). A request is a request in libuv's sense:
 * httpc_request() that returns an error never calls the callback; one that
 * returns 0 calls it exactly once, also when the request is cancelled or the
 * client is closed (then with -ECANCELED). Callbacks always run from the loop,
 * never from inside httpc_request() or httpc_cancel(). */
#ifndef GPUSCALER_HTTPC_H
#define GPUSCALER_HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/** Default cap on a buffered (non-streaming) response body: 64 MiB. */
#define HTTPC_DEFAULT_MAX_BODY ((size_t)64 << 20)
/** Cap on the response header block; larger is -EMSGSIZE. */
#define HTTPC_MAX_HEADER_BYTES ((size_t)64 << 10)

struct httpc;
struct httpc_req;

/**
 * TLS settings of one request. Every pointer is borrowed for the duration of
 * httpc_request() only (curl copies strings and blobs). A blob wins over the
 * file of the same role. Blobs are PEM.
 */
struct httpc_tls {
    const char *ca_file;      /**< CA bundle to verify the server; NULL = system store */
    const void *ca_blob;
    size_t ca_blob_len;
    const char *cert_file;    /**< client certificate (PEM) */
    const void *cert_blob;
    size_t cert_blob_len;
    const char *key_file;     /**< client private key (PEM) */
    const void *key_blob;
    size_t key_blob_len;
    bool insecure;            /**< skip server certificate and host name verification */
};

/** The response as seen by the completion callback; valid only during it. */
struct httpc_resp {
    long status;              /**< HTTP status, 0 when no response arrived */
    const char *body;         /**< buffered body, NUL-terminated (""), never NULL;
                                   in streaming mode only the body of a non-2xx answer */
    size_t body_len;
    const char *content_type; /**< Content-Type header or NULL */
    const char *errmsg;       /**< what went wrong when err != 0 (curl's message, or
                                   httpc's when a cancel, a size cap, a data callback
                                   or a queue timeout decided), "" otherwise */
    /** private */
    const struct httpc_req *req_;
};

/**
 * Completion callback. err is 0 when an HTTP response was received (any
 * status: 404 and 500 are not errors here), otherwise a negative errno:
 * -ETIMEDOUT (timeout), -ECONNREFUSED (could not connect), -EHOSTUNREACH
 * (name resolution), -EPROTO (TLS handshake or certificate, HTTP protocol
 * errors), -ECONNRESET (connection dropped mid-transfer), -EMSGSIZE (body or
 * header cap exceeded), -ECANCELED (httpc_cancel or httpc_close), -EINVAL
 * (bad URL or option), -EIO (anything else), or the negative value a data
 * callback returned. resp is never NULL; resp->errmsg explains transport
 * errors. The request is freed right after the callback returns.
 */
typedef void (*httpc_done_cb)(struct httpc_req *req, int err, const struct httpc_resp *resp,
                              void *arg);

/**
 * Streaming callback: one chunk of a 2xx response body as it arrives (only
 * 2xx bodies stream; other statuses are buffered for the completion callback
 * so that errors such as a 410 Status can be read). status is the HTTP status.
 * Return 0 to continue or a negative errno to abort the transfer; the
 * completion callback then gets that value. It runs inside curl: it may call
 * httpc_cancel() and httpc_request(), which take effect right after it
 * returns, but must not call httpc_close().
 */
typedef int (*httpc_data_cb)(struct httpc_req *req, long status, const char *data, size_t len,
                             void *arg);

/** One request. Everything is borrowed for the duration of httpc_request(). */
struct httpc_opts {
    const char *url;                 /**< required, http:// or https:// */
    const char *method;              /**< NULL: GET, or POST when body is set */
    const void *body;                /**< request body or NULL */
    size_t body_len;
    const char *content_type;        /**< Content-Type of the body, or NULL */
    const char *bearer;              /**< "Authorization: Bearer <bearer>" when not NULL */
    const char *const *headers;      /**< extra "Name: value" lines, NULL-terminated, or NULL */
    const struct httpc_tls *tls;     /**< NULL: defaults (verify against the system store) */
    /** Whole-transfer timeout; 0 = none. It also bounds the time a request
     *  waits in the queue for a connection (the per-host cap, or an https
     *  request waiting to multiplex): libcurl before 8.8 does not time that
     *  out itself, so httpc ends a request still running timeout_ms + 1 s
     *  after it started with -ETIMEDOUT ("... waiting for a connection"). */
    int64_t timeout_ms;
    /** Timeout of the connect phase only; 0 = 300 s (curl's default); never
     *  longer than timeout_ms when that is set. Without timeout_ms (a list or
     *  watch stream that may run for hours) it also bounds the wait in the
     *  queue, which libcurl before 8.8 does not time out either: httpc ends
     *  a request curl has not got a connection for (connect, TLS, proxy done)
     *  connect_timeout_ms + 1 s after it started with -ETIMEDOUT ("...
     *  waiting for a connection"). Once connected, such a request ends only
     *  by the peer, stall_timeout_ms or a cancel; but when curl sends it again
     *  on a new connection (the reused one died before any answer), the
     *  bound applies again from then. */
    int64_t connect_timeout_ms;
    /** Abort a transfer slower than 1 byte/s for this many ms (0 = off): catches
     *  a dead peer on a streaming request that has no total timeout. */
    int64_t stall_timeout_ms;
    size_t max_body;                 /**< cap on a buffered body; 0 = HTTPC_DEFAULT_MAX_BODY */
    httpc_data_cb on_data;           /**< non-NULL: streaming mode */
    bool no_compression;             /**< do not send Accept-Encoding */
    /** Close the connection after this request ("Connection: close", and not
     *  kept in the cache): for a client that visits thousands of hosts once
     *  every few seconds, where an idle connection per host costs memory and,
     *  with libcurl before 8.x, a walk of the whole cache per request. */
    bool no_reuse;
    /** libcurl's receive buffer for this request in bytes, clamped to
     *  [1 KiB, 512 KiB]; 0 = libcurl's default (16 KiB). A buffer that holds
     *  a whole typical body reads it in one piece. */
    size_t recv_buffer;
    /** Proxy URL (http://, https://, socks5h://, ...; curl copies it); NULL =
     *  curl's default, the http_proxy / https_proxy / no_proxy environment
     *  (unless no_proxy is set). */
    const char *proxy;
    /** Never use a proxy: connect to the URL's host directly whatever the
     *  http_proxy / https_proxy / no_proxy environment says, as Prometheus
     *  scrapes do (for requests to pod IPs, which an egress proxy cannot
     *  reach or should not see). Requests carried by h1.c always go direct.
     *  Setting proxy as well is -EINVAL. */
    bool no_proxy;
    /** "HOST:PORT:CONNECT-HOST:CONNECT-PORT" (copied): a request to the URL's
     *  HOST:PORT connects to CONNECT-HOST:CONNECT-PORT instead, while TLS (SNI,
     *  certificate name) and the Host header keep HOST; NULL = none. */
    const char *connect_to;
};

/** Close callback: the client's memory is already released. */
typedef void (*httpc_close_cb)(void *arg);

/**
 * Create a client on loop. *out owns it until httpc_close(). Returns 0, or
 * -EIO when curl's multi handle cannot be made.
 */
int httpc_new(uv_loop_t *loop, struct httpc **out);

/**
 * Start a request. On success *out (when out is not NULL) is the request,
 * valid until its completion callback returns; it can be passed to
 * httpc_cancel() until then. Returns -EINVAL for a missing URL or callback
 * or for proxy together with no_proxy, -ESHUTDOWN when the client is
 * closing, -ENOTSUP for TLS blobs this libcurl cannot take, -EIO when curl
 * refuses the handle; then cb is never called.
 */
int httpc_request(struct httpc *c, const struct httpc_opts *o, httpc_done_cb cb, void *arg,
                  struct httpc_req **out);

/**
 * Cancel an in-flight request: its completion callback runs once, later from
 * the loop, with -ECANCELED (unless it had already completed and is only
 * waiting for its callback, which then reports the real result). Cancelling
 * twice is harmless. Returns 0 or -EALREADY when it was already cancelled.
 */
int httpc_cancel(struct httpc_req *req);

/**
 * Content-Type of the response whose body is being streamed: valid inside an
 * httpc_data_cb (libcurl has read the whole header block before it delivers
 * the first body byte) until that callback returns. NULL when the response
 * has no Content-Type, and outside a data callback.
 */
const char *httpc_req_content_type(const struct httpc_req *req);

/** The user argument given to httpc_request(). */
void *httpc_req_arg(const struct httpc_req *req);

/**
 * Value of a response header (case-insensitive name, the last one when
 * repeated), or NULL. Valid during the callback that got resp.
 */
const char *httpc_resp_header(const struct httpc_resp *resp, const char *name);

/**
 * The i-th (from 0, in arrival order) value of a header that may repeat
 * (Warning), or NULL past the last. Valid during the callback that got resp.
 */
const char *httpc_resp_header_nth(const struct httpc_resp *resp, const char *name, size_t i);

/**
 * Retry-After of the response in ms: delta-seconds or an HTTP date compared
 * with now_unix_ms; -1 when absent or unparsable; never negative otherwise.
 */
int64_t httpc_resp_retry_after_ms(const struct httpc_resp *resp, int64_t now_unix_ms);

/** Number of requests started and not yet completed (callbacks not yet run). */
size_t httpc_inflight(const struct httpc *c);

/**
 * Close the client: every in-flight request completes with -ECANCELED
 * (callbacks from the loop), the sockets and timers are closed, and cb runs
 * once all of it is done and the memory is freed. cb may be NULL. New
 * requests after this return -ESHUTDOWN. Calling it twice is a bug.
 */
void httpc_close(struct httpc *c, httpc_close_cb cb, void *arg);

/** Default cap on simultaneous connections to one host (requests beyond it queue). */
#define HTTPC_DEFAULT_MAX_HOST_CONNS 16

/**
 * Change the cap on simultaneous connections to one host (default
 * HTTPC_DEFAULT_MAX_HOST_CONNS). Long-lived streams (watches) occupy a
 * connection each on HTTP/1.1, so callers with many watches raise it.
 * Returns 0 or -EINVAL.
 */
int httpc_set_max_host_connections(struct httpc *c, long n);

/**
 * Keep up to n idle connections open for reuse (curl's default keeps about
 * four per request in flight, too few for a scraper that revisits thousands
 * of pods). Returns 0 or -EINVAL.
 */
int httpc_set_max_idle_connections(struct httpc *c, long n);

/** Default number of idle easy handles a client keeps for reuse. */
#define HTTPC_DEFAULT_HANDLE_POOL 4

/**
 * Keep up to n idle easy handles (with their receive buffers) for the next
 * requests; 0 destroys each handle after its request. Extra idle handles are
 * freed at once. Returns 0.
 */
int httpc_set_handle_pool(struct httpc *c, size_t n);

/** Idle easy handles the client keeps now. */
size_t httpc_pooled_handles(const struct httpc *c);

/**
 * Bytes libcurl has allocated and not freed, over every client of the
 * process (counted through curl_global_init_mem, so it covers easy handles,
 * buffers, connections and caches; not the memory of OpenSSL or nghttp2,
 * which allocate on their own). 0 before the first httpc_new().
 */
size_t httpc_memory_bytes(void);

/** Translate a CURLcode (as int) into the negative errno used above. */
int httpc_curl_errno(int curlcode);

#endif

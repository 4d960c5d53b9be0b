/* SPDX-License-Identifier: Apache-2.0 */
/* httpd: an HTTP/1.1 server (plain or TLS) on a libuv loop, used for the
 * external metrics API (HTTPS) and for /metrics and /healthz (plain).
 *
 * Design: one struct httpd per listening socket, on a loop the caller passes
 * in. Requests are parsed with llhttp; TLS is OpenSSL driven through memory
 * BIOs, so nothing ever blocks. Each connection handles one request at a
 * time: pipelined requests are buffered (bounded) and dispatched in order
 * after the previous response has been queued, so responses can never be
 * reordered even when a handler answers later (deferred response). A client
 * that half-closes after pipelining gets every answer; the last says close.
 *
 * The front door cannot be locked: at max_connections a new connection
 * first evicts an open one that has no request with the handler and no
 * response being written (or one whose client has taken none of it for a
 * second, by the kernel's count): one that has not completed a request
 * (idle since accept, in its TLS handshake, or sending its first request)
 * before an idle keep-alive one, the one from the source address holding
 * the most connections first, the oldest first. Each source address may hold
 * max_connections_per_source; past that its own such connection is evicted.
 * Only when nothing can be evicted is the new connection refused (closed at
 * once). Both are counted (httpd_stats) and logged as warnings, at most one
 * line per 10 s per listener with the counts since the last line.
 *
 * Ownership: a struct httpd_request is owned by the server until it is
 * handed to the request callback; from then on it belongs to the handler,
 * which must answer it exactly once with httpd_respond() (synchronously in
 * the callback, or later on the same loop). httpd_respond() releases it. If
 * the connection closes first, the request stays valid, httpd_respond() on
 * it just frees it, and an abort callback (if set) tells the handler early.
 */
#ifndef GPUSCALER_HTTPD_H
#define GPUSCALER_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct httpd;
struct httpd_request;

/** Listener configuration. Zero values pick the defaults in brackets. */
struct httpd_config {
    const char *host;             /**< bind address ["127.0.0.1"]; "0.0.0.0" or "::" for all */
    int port;                     /**< TCP port; 0 picks an ephemeral port (see httpd_port) */
    bool tls;                     /**< serve HTTPS (false: plain HTTP, for /metrics /healthz) */
    const char *cert_file;        /**< PEM certificate chain; NULL with key_file NULL: self-signed */
    const char *key_file;         /**< PEM private key */
    const char *client_ca_file;   /**< optional initial client CA bundle (see httpd_set_client_ca) */
    bool request_client_cert;     /**< ask every TLS client for a certificate, even while no
                                       client CA is set: a handler that checks the chain
                                       itself (a front proxy's) against a CA loaded later
                                       then has it, on connections made before that too */
    uint64_t cert_poll_ms;        /**< how often to look for changed cert/key files [10000]; */
    bool no_cert_poll;            /**< disable the reload poll entirely */
    size_t max_header_bytes;      /**< request line + headers [16384]; over: 431 and close */
    size_t max_headers;           /**< number of header fields [100]; over: 431 and close */
    size_t max_body_bytes;        /**< request body [1 MiB], as sent: a chunked body's
                                       framing (size lines, extensions, trailers) counts
                                       with its data; over: 413 and close */
    unsigned max_connections;     /**< simultaneous connections [256]; see the file comment for
                                       what happens to more */
    unsigned max_connections_per_source; /**< simultaneous connections from one IP address
                                       [64, or max_connections when smaller] */
    uint64_t idle_timeout_ms;     /**< keep-alive idle time before close [60000] */
    uint64_t header_timeout_ms;   /**< from connection/first byte to end of headers,
                                       TLS handshake included [10000] (slowloris cut-off) */
    uint64_t body_timeout_ms;     /**< from the end of the headers (which
                                       header_timeout_ms covers) to the end of the body,
                                       never extended by more bytes [idle_timeout_ms] */
    uint64_t shutdown_grace_ms;   /**< httpd_close waits this long for connections with a
                                       request in progress [5000] */
    const char *name;             /**< subsystem name in logs ["httpd"] */
};

/** One header as name/value NUL-terminated strings. */
struct httpd_header {
    const char *name;
    const char *value;
};

/** What is known about the peer of a request. */
struct httpd_peer {
    char addr[64];            /**< "ip:port" */
    bool tls;                 /**< arrived over TLS */
    bool client_cert;         /**< a client certificate was presented */
    bool client_cert_verified;/**< ...and it chains to the client CA in force at handshake time
                                   and is within its validity period */
    const char *client_cn;    /**< subject CN of a presented certificate, or NULL */
    /** The presented certificate and the intermediates the client sent with
     *  it, leaf first, as PEM; NULL without a certificate. For handlers that
     *  trust several CAs for different purposes (client_cert_verified only
     *  says "one of the client CA bundle"): verify it against each. */
    const char *client_chain_pem;
};

/**
 * A complete request. All strings are NUL-terminated and owned by the
 * request; they stay valid until httpd_respond() is called on it.
 */
struct httpd_request {
    const char *method;       /**< "GET", "POST", ... */
    const char *target;       /**< raw request target as sent ("/a/b?c=d") */
    const char *path;         /**< target up to '?', not percent-decoded */
    const char *query;        /**< after '?', not decoded; "" if none */
    const struct httpd_header *headers;
    size_t nheaders;
    const char *body;         /**< NUL-terminated for convenience; may contain NULs */
    size_t body_len;
    struct httpd_peer peer;
    bool keep_alive;          /**< the connection would stay open after the response */
};

/**
 * Called once per complete request, in order per connection. The handler
 * owns @req from now on and must call httpd_respond() on it exactly once,
 * now or later (on the loop thread).
 */
typedef void (*httpd_request_cb)(struct httpd_request *req, void *arg);

/** Called when a server has fully closed (all handles closed, memory freed). */
typedef void (*httpd_close_cb)(void *arg);

/** Called when the connection of an unanswered request went away (closed:
 *  reset, error, timeout, server shutdown); not when the peer only stopped
 *  sending. */
typedef void (*httpd_abort_cb)(struct httpd_request *req, void *arg);

/**
 * Create a server on @loop and start listening on cfg->host:cfg->port.
 * @cfg is copied (strings too). For TLS without cert_file/key_file a
 * self-signed certificate is generated in memory (logged as a warning).
 * Returns 0 and *out, or -EINVAL (bad config), -EADDRINUSE and other
 * negative libuv/errno codes, -EPROTO (TLS setup failed: unreadable or
 * mismatched cert/key, logged with the OpenSSL message). After a listen
 * failure the loop must run once more to release the handles.
 */
int httpd_new(uv_loop_t *loop, const struct httpd_config *cfg, httpd_request_cb cb, void *arg,
              struct httpd **out);

/** The bound TCP port (useful with port 0). */
int httpd_port(const struct httpd *srv);

/** Connection counters of one listener, for /metrics. */
struct httpd_stats {
    uint64_t accepted;     /**< connections accepted (kept, not refused) */
    uint64_t refused;      /**< closed at once on arrival: nothing could be evicted to make room
                                (or the server was closing) */
    uint64_t evicted;      /**< open connections closed to make room for a new one */
    unsigned connections;  /**< open now */
    unsigned sources;      /**< distinct source addresses among them */
};

/** Fill out with srv's counters. */
void httpd_stats(const struct httpd *srv, struct httpd_stats *out);

/**
 * Start closing: stop listening, close idle connections now, and let those
 * with a request in progress finish it for up to shutdown_grace_ms, then
 * close all (as Go's Server.Shutdown). In progress: being received (its
 * headers, its body, or the TLS handshake before it: it is still read,
 * dispatched and answered, with "Connection: close"), with the handler, or
 * its answer being written. A connection closes as soon as it is idle.
 * @cb (may be NULL) runs once everything is closed and @srv is freed; run the
 * loop until then. Unanswered requests stay valid (see httpd_respond).
 * Calling it twice, or on NULL, is a no-op.
 */
void httpd_close(struct httpd *srv, httpd_close_cb cb, void *arg);

/** httpd_close(srv, NULL, NULL). */
void httpd_free(struct httpd *srv);

/**
 * Replace the CA bundle client certificates are verified against (PEM,
 * one or more certificates; @len bytes). NULL/0 stops asking for client
 * certificates. Applies to connections accepted from now on. Handshakes
 * never fail because of a missing or unverifiable client certificate; the
 * result is reported in struct httpd_peer. Returns 0, -EINVAL (no
 * certificate could be parsed: the old bundle is kept), -ENOTSUP on a
 * plain server.
 */
int httpd_set_client_ca(struct httpd *srv, const char *pem, size_t len);

/**
 * Look for changed cert/key/client-CA files now (the poll timer does the
 * same every cert_poll_ms). Returns 1 if a new certificate was loaded, 0 if
 * nothing changed, or a negative code if the new files are broken (logged;
 * the previous certificate stays in use).
 */
int httpd_reload_certs(struct httpd *srv);

/** First value of header @name (case-insensitive) or NULL. */
const char *httpd_request_header(const struct httpd_request *req, const char *name);

/**
 * Answer @req: status line, the given headers, Content-Length (computed),
 * Date, "Connection: close" when the connection will close, then @body
 * (@len bytes, copied; not sent for HEAD). A 204 or 304 answer has no body:
 * @body is not sent, nor Content-Length (nor Content-Type for a 304), as Go's
 * net/http does. Releases @req: it must not be used afterwards. Returns 0,
 * or -ECONNRESET if the connection had already gone (the request is released
 * all the same), -EINVAL for a status that cannot be a final answer (below
 * 200 or above 999: the client gets 500 and the connection closes; the
 * request is released).
 */
int httpd_respond(struct httpd_request *req, int status, const struct httpd_header *headers,
                  size_t nheaders, const void *body, size_t len);

/**
 * Register @cb to be called (at most once) if, while @req is unanswered,
 * its connection closes (reset, read or write error, timeout, server
 * shutdown). It is not called when the peer closes its sending side (EOF):
 * that may be a half-close by a client that sent its request and waits for
 * the answer, which is then delivered; a peer that closed entirely is only
 * found out when the answer is written (and httpd_request_aborted() is true
 * from the EOF on). The handler must still call httpd_respond().
 */
void httpd_request_on_abort(struct httpd_request *req, httpd_abort_cb cb, void *arg);

/** True if the connection of @req has gone away or the peer stopped sending. */
bool httpd_request_aborted(const struct httpd_request *req);

/** Reason phrase for a status code ("OK", "Not Found", ...; "Unknown"). */
const char *httpd_status_text(int status);

/* ---- testing ---------------------------------------------------------- */

/**
 * Feed @len bytes as the decrypted byte stream of one connection through
 * the request parser with small limits, answering each request as a real
 * connection would. No I/O. Returns the number of complete requests parsed,
 * or a negative code when the stream was rejected (the fuzz entry point).
 */
int httpd_parse_stream_for_test(const void *data, size_t len, size_t chunk);

#endif

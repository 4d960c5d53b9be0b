/* SPDX-License-Identifier: Apache-2.0 */
/* httpc internals shared by the module's files; no other module includes
 * this file (fuzz-h1 reads the h1.c part).
 *
 * The files, by responsibility:
 *   httpc.c      the client: new, close, settings, the easy handle pool and
 *                the count of libuv handles that frees it
 *   loop.c       libcurl's sockets and timeout on the libuv loop (multi-uv.c)
 *   request.c    httpc_request: a request's options turned into an easy handle
 *   lifecycle.c  the to-do list, completions and their delivery, cancel
 *   backstop.c   the per-request timers for what libcurl 7.88 never times out
 *   response.c   header and body callbacks, header lookups, error translation
 *   request-h1.c requests carried by h1.c instead of curl
 *   h1.c         one plain HTTP/1.1 request per connection, without curl
 *   alloc.c      libcurl's allocations, counted */
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

/* ---- the client and its requests (every file but h1.c and alloc.c) ---- */

#include <curl/curl.h>

#include "httpc.h"

enum req_state { REQ_PENDING_ADD, REQ_ACTIVE, REQ_DONE };

/* Why our callbacks stopped a transfer (with req.err), for the message. */
enum req_abort { ABORT_NONE, ABORT_BODY_CAP, ABORT_HEADER_CAP, ABORT_DATA_CB };

/* How long after its bound the backstop ends a request curl still holds. */
#define HTTPC_BACKSTOP_SLACK_MS 1000
/* curl's connect timeout when none is set (connect_timeout_ms 0). */
#define HTTPC_DEFAULT_CONNECT_TIMEOUT_MS 300000

struct hdr {
    const char *name;
    const char *value;
};

struct httpc_req {
    struct httpc *c;
    CURL *easy;
    struct curl_slist *hdrs; /* one block: nodes, then their strings (see header_block) */
    size_t hdrs_len;
    struct curl_slist *connect_to; /* one node and its string, or NULL */
    bool hdrs_secret;        /* holds a bearer token: wiped before it is freed */
    httpc_done_cb cb;
    void *arg;
    httpc_data_cb on_data;
    struct util_buf body;
    size_t max_body;
    struct util_buf hdrbuf; /* raw header block of the last response */
    struct hdr *parsed;     /* name/value pairs pointing into hdrbuf, after finish() */
    size_t nparsed;
    char errbuf[CURL_ERROR_SIZE];
    int err;    /* set by our callbacks: -EMSGSIZE or a data callback's return */
    enum req_abort why; /* ...and which of them */
    int result; /* final error code given to cb */
    long status;
    enum req_state state;
    bool cancelled;
    bool timed_out;     /* the backstop fired */
    bool backstop_open; /* backstop initialised: closed before r is freed */
    bool backstop_connect; /* ...bounding the connect phase only (no timeout_ms) */
    bool connected;     /* curl got the request a connection (CURLOPT_PREREQFUNCTION) */
    bool no_prereq;     /* libcurl refused CURLOPT_PREREQFUNCTION: no connect backstop */
    uv_timer_t backstop; /* bound + slack, for a request curl keeps queued */
    int64_t backstop_ms; /* the bound: timeout_ms, or the connect timeout */
    bool on_todo;
    bool in_data; /* inside on_data: httpc_req_content_type() answers */
    struct h1_conn *h1; /* the request's connection when h1.c carries it (easy is NULL) */
    char *h1_ctype;     /* ...and its response's Content-Type, or NULL */
    struct httpc_req *prev, *next; /* every request not yet delivered */
    struct httpc_req *todo_next;   /* to-do list: pending adds and cancellations */
    struct httpc_req *done_next; /* completion queue */
};

struct sock_ctx;

struct httpc {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer; /* curl's timeout */
    uv_timer_t kick;  /* run process() from the loop */
    struct httpc_req *reqs; /* every request not yet delivered */
    struct sock_ctx *socks;
    struct httpc_req *todo;
    struct httpc_req *done_head, *done_tail;
    size_t inflight;
    int in_curl;       /* depth of calls into curl that may run our callbacks */
    bool delivering;
    bool closing;      /* httpc_close called */
    bool dead;         /* multi cleaned up, handles closing */
    int open_handles;  /* libuv handles not yet closed */
    httpc_close_cb close_cb;
    void *close_arg;
    CURL **pool;       /* idle easy handles, reset, for the next requests */
    size_t npool, pool_max;
};

/* httpc.c */
/** One of c's libuv handles has closed: the last one after the multi went
 *  frees c and runs the close callback. */
void hc_handle_closed(struct httpc *c);
/** An easy handle from the pool, or a new one; NULL when curl cannot. */
CURL *hc_easy_take(struct httpc *c);
/** Keep e (reset) for the next request, or destroy it. NULL is ignored. */
void hc_easy_release(struct httpc *c, CURL *e);
/** httpc_close's last step, once nothing is in flight: stop polling, clean
 *  the multi up, close the client's timers. */
void hc_close_handles(struct httpc *c);

/* loop.c */
/** Let curl tell c which sockets to poll and when to call it back. */
void hc_loop_attach(struct httpc *c);
/** Stop polling every socket curl still has (idle cached connections),
 *  before curl closes them. */
void hc_loop_close_sockets(struct httpc *c);

/* lifecycle.c */
/** Take what the to-do list holds and what curl completed out of curl and
 *  deliver the completions; nothing while inside curl. */
void hc_process(struct httpc *c);
/** Run hc_process() soon, from the loop. */
void hc_kick(struct httpc *c);
/** Put r on the to-do list (once) and kick. */
void hc_todo_push(struct httpc_req *r);
/** Take r out of curl (or h1.c) and queue its completion. Never in curl. */
void hc_finish(struct httpc_req *r, int result);
/** Free r, or everything but its memory, which goes once its backstop closed. */
void hc_req_free(struct httpc_req *r);
/** Replace what curl wrote about a refused write with what our side decided
 *  (a cancel, the backstop, a cap or a data callback): result err. */
void hc_own_errmsg(struct httpc_req *r, int err);

/* backstop.c */
/**
 * Start the backstop of r, a request curl carries, from now: at timeout_ms
 * + HTTPC_BACKSTOP_SLACK_MS when timeout_ms > 0; otherwise at the connect
 * timeout (0: curl's 300 s) + the slack, unless r has connected by then.
 */
void hc_backstop_start(struct httpc_req *r, int64_t timeout_ms, int64_t connect_timeout_ms);
/** Have curl tell the backstop when e, r's easy handle, has its connection,
 *  and (without a timeout_ms > 0) when it starts a new connect for a retry. */
void hc_backstop_watch_connect(struct httpc_req *r, CURL *e, int64_t timeout_ms);
/** Close a started backstop; r's memory goes in its close callback. */
void hc_backstop_close(struct httpc_req *r);

/* response.c */
size_t hc_on_write(char *p, size_t size, size_t nmemb, void *ud);
size_t hc_on_header(char *p, size_t size, size_t nmemb, void *ud);
/** Split r's raw header block into name/value pairs in place. */
void hc_parse_headers(struct httpc_req *r);

/* request-h1.c */
/** Start r on its own connection through h1.c (request: the bytes to send,
 *  taken over); a failure to start is its result. */
void hc_h1_start(struct httpc_req *r, const struct httpc_opts *o,
                 const struct sockaddr_storage *sa, char *request, size_t len);

#endif

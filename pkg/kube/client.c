/* SPDX-License-Identifier: Apache-2.0 */
/* kube/client: the API client handle and its JSON requests over httpc:
 * each sent with the current credentials (a static token; the token file and
 * client certificate files as kube/client-auth.c last read them; or an exec
 * plugin's credential, kube/exec.c), sent again after a Retry-After, timed
 * and counted for /metrics. The typed helpers built on them are in
 * kube/client-typed.c.
 *
 * Every request in flight is a struct kreq on the client's list so that
 * kube_close() can cancel them; each completes exactly once (httpc's rule),
 * and the client's memory goes only after the last one did. A request the
 * server throttled (429, or a 5xx with Retry-After) stays on the list while
 * it waits to be sent again (RETRY_MAX), and after kube_drain() only when the
 * wait ends within the drain's budget. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube-int.h"

#define KUBE_NVERBS 5
#define KUBE_NBUCKETS 11
#define KUBE_NERRCLASS 5
static const char *const verbs[KUBE_NVERBS] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
static const double lat_le[KUBE_NBUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                            0.5,   1,    2.5,   5,    10};
static const char *const errclass[KUBE_NERRCLASS] = {"transport", "throttled", "conflict",
                                                    "client", "server"};

struct kreq {
    struct kube *k;
    uint64_t t0;      /* uv_hrtime at send */
    int verb;         /* index into verbs[], -1 for streams */
    struct kreq *prev, *next;
    struct httpc_req *req;
    kube_result_cb cb;
    kube_raw_done_cb raw_cb;
    httpc_data_cb on_data;
    void *arg;
    char what[160];   /* "METHOD path" (cut), for the API server's warnings */
    /* a kube_request's own copy, sent again after a Retry-After */
    char *method, *path, *ctype, *body;
    size_t blen;
    int64_t timeout_ms, stall_ms;
    uint64_t deadline; /* loop time the whole request (retries too) ends by; 0 = none */
    size_t max_body;
    int retries;
    uv_timer_t timer; /* the wait before a retry; initialised at the first */
    bool timer_init, waiting;
    bool wait_cred;   /* waits for the exec plugin's credential */
    bool cancelled;   /* kube_req_cancel() while it waited */
    uint64_t cred_gen; /* the exec credential it was sent with */
};

/* A 429, or a 5xx with Retry-After, is sent again after the wait it asks
 * for, as client-go's request does (checkWait, maxRetries 10), when that
 * wait is at most RETRY_MAX_WAIT_MS; a longer one goes back to the caller,
 * which retries on its own schedule (the next tick). */
#define RETRY_MAX 10
#define RETRY_MAX_WAIT_MS 10000
/* the least a retry waits (client-go's client-side limit, 5 a second) */
#define RETRY_MIN_WAIT_MS 200

/* Distinct warning texts logged (FNV-1a 64 of the text), the oldest forgotten
 * first: a warning repeated on every write is logged once, not every tick. */
#define WARN_SEEN 64

struct kube {
    uv_loop_t *loop;
    struct httpc *http;
    struct kube_config cfg;
    int64_t timeout_ms;
    char *ua_header;
    struct kube_auth auth;   /* the token file, the client certificate files */
    struct kreq *reqs;
    size_t inflight;
    /* request latency and errors, for gpuscaler's /metrics */
    uint64_t lat_count[KUBE_NVERBS], lat_buckets[KUBE_NVERBS][KUBE_NBUCKETS];
    double lat_sum[KUBE_NVERBS];
    uint64_t errors[KUBE_NERRCLASS];
    uint64_t warnings;              /* Warning headers received (299 with a text) */
    uint64_t retries;               /* requests sent again after a Retry-After */
    uint64_t warn_seen[WARN_SEEN];  /* hashes of the texts logged, a ring */
    size_t warn_next;
    struct kube_exec *exec;  /* the kubeconfig's exec plugin, or NULL */
    char *url_base;          /* what paths are appended to: the server, or with
                                tls-server-name https://NAME:PORT/prefix */
    char *connect_to;        /* with tls-server-name: NAME:PORT:HOST:PORT, else NULL */
    char *host_header;       /* with tls-server-name: "Host: " the server's authority */
    bool closing;
    bool draining;           /* kube_drain(): retries end by drain_until */
    uint64_t drain_until;    /* loop time */
    uv_timer_t close_handle; /* never started: only its close callback is used */
    kube_close_cb close_cb;
    void *close_arg;
};

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static char *dup_blob(const char *p, size_t n)
{
    if (!p)
        return NULL;
    char *d = xmalloc(n + 1);
    memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

static int issue(struct kreq *r);
static void deliver(struct kreq *r, int err, const struct httpc_resp *resp);
static void req_finish(struct kreq *r);
static void end_inflight(struct kube *k);

/* The exec plugin's run ended: the requests that waited are sent, or fail
 * with its message. */
static void on_cred(void *arg, int err, const char *msg)
{
    struct kube *k = arg;
    if (err)
        LOG_ERROR("kube", "%s", msg);
    struct kreq *next;
    for (struct kreq *r = k->reqs; r; r = next) {
        next = r->next;
        if (!r->wait_cred)
            continue;
        if (r->timer_init)
            uv_timer_stop(&r->timer); /* its deadline's (cred_wait_until) */
        int rc = err ? err : issue(r);
        if (rc == 0)
            continue;
        r->wait_cred = false;
        struct httpc_resp none = {.status = 0, .body = "",
                                  .errmsg = err               ? msg
                                            : rc == -ETIMEDOUT ? "its deadline passed while the "
                                                                 "credential plugin ran"
                                                               : "cannot send the request"};
        deliver(r, rc, &none);
        req_finish(r);
    }
}

int kube_new(uv_loop_t *loop, struct httpc *http, const struct kube_config *cfg,
             const struct kube_opts *o, struct kube **out)
{
    *out = NULL;
    if (!loop || !http || !cfg || !cfg->server || !cfg->server[0])
        return -EINVAL;
    struct kube *k = xcalloc(1, sizeof(*k));
    k->loop = loop;
    k->http = http;
    k->cfg.server = xstrdup(cfg->server);
    k->cfg.ca_file = dup_or_null(cfg->ca_file);
    k->cfg.ca_data = dup_blob(cfg->ca_data, cfg->ca_data_len);
    k->cfg.ca_data_len = cfg->ca_data_len;
    k->cfg.cert_file = dup_or_null(cfg->cert_file);
    k->cfg.cert_data = dup_blob(cfg->cert_data, cfg->cert_data_len);
    k->cfg.cert_data_len = cfg->cert_data_len;
    k->cfg.key_file = dup_or_null(cfg->key_file);
    k->cfg.key_data = dup_blob(cfg->key_data, cfg->key_data_len);
    k->cfg.key_data_len = cfg->key_data_len;
    k->cfg.token = dup_or_null(cfg->token);
    k->cfg.token_file = dup_or_null(cfg->token_file);
    k->cfg.exec = kube_exec_config_dup(cfg->exec);
    k->cfg.insecure = cfg->insecure;
    k->cfg.proxy_url = dup_or_null(cfg->proxy_url);
    k->cfg.proxy_url_orig = dup_or_null(cfg->proxy_url_orig);
    k->cfg.tls_server_name = dup_or_null(cfg->tls_server_name);
    k->cfg.disable_compression = cfg->disable_compression;
    k->cfg.exec_cluster_config = dup_or_null(cfg->exec_cluster_config);
    k->auth.loop = loop;
    k->auth.cfg = &k->cfg;
    kube_route(k->cfg.server, k->cfg.tls_server_name, &k->url_base, &k->connect_to,
               &k->host_header);
    if (cfg->exec) /* after the cluster's settings, which provideClusterInfo passes on */
        k->exec = kube_exec_new(loop, cfg->exec, &k->cfg, on_cred, k);
    k->cfg.context = dup_or_null(cfg->context);
    k->cfg.user = dup_or_null(cfg->user);
    k->cfg.namespace_ = xstrdup(cfg->namespace_ ? cfg->namespace_ : "default");
    k->timeout_ms = o && o->request_timeout_ms > 0 ? o->request_timeout_ms : 30000;
    k->ua_header = xasprintf("User-Agent: %s", o && o->user_agent ? o->user_agent : "gpuscaler");
    uv_timer_init(loop, &k->close_handle);
    *out = k;
    return 0;
}

const char *kube_server(const struct kube *k)
{
    return k->cfg.server;
}

const char *kube_namespace(const struct kube *k)
{
    return k->cfg.namespace_;
}

uv_loop_t *kube_loop(const struct kube *k)
{
    return k->loop;
}

static void on_close_handle(uv_handle_t *h)
{
    struct kube *k = util_container_of((uv_timer_t *)h, struct kube, close_handle);
    kube_close_cb cb = k->close_cb;
    void *arg = k->close_arg;
    kube_config_clear(&k->cfg);
    xfree(k->url_base);
    xfree(k->connect_to);
    xfree(k->host_header);
    kube_auth_clear(&k->auth);
    xfree(k->ua_header);
    xfree(k);
    if (cb)
        cb(arg);
}

static void on_retry_timer(uv_timer_t *t);

/* A request that waits (a retry, or the exec plugin's credential) ends with
 * -ECANCELED from the loop, not from here. */
static void cancel_waiting(struct kreq *r)
{
    r->cancelled = true;
    r->waiting = false;
    r->wait_cred = false;
    if (!r->timer_init) {
        uv_timer_init(r->k->loop, &r->timer);
        r->timer.data = r;
        r->timer_init = true;
    }
    uv_timer_start(&r->timer, on_retry_timer, 0, 0);
}

void kube_req_cancel(struct kreq *r)
{
    if (r->req)
        httpc_cancel(r->req);
    else if (r->waiting || r->wait_cred)
        cancel_waiting(r);
}

static void exec_closed(void *arg)
{
    struct kube *k = arg;
    k->exec = NULL;
    end_inflight(k);
}

static void cred_wait_until(struct kreq *r);

void kube_drain(struct kube *k, int64_t budget_ms)
{
    if (k->draining)
        return;
    k->draining = true;
    k->drain_until = uv_now(k->loop) + (uint64_t)(budget_ms > 0 ? budget_ms : 0);
    for (struct kreq *r = k->reqs; r; r = r->next) /* waiting for a plugin that may hang */
        if (r->wait_cred)
            cred_wait_until(r);
}

void kube_close(struct kube *k, kube_close_cb cb, void *arg)
{
    k->closing = true;
    k->close_cb = cb;
    k->close_arg = arg;
    for (struct kreq *r = k->reqs; r; r = r->next)
        kube_req_cancel(r);
    if (k->exec) { /* a plugin run is killed; counted in flight until closed */
        k->inflight++;
        kube_exec_close(k->exec, exec_closed, k);
    }
    if (k->inflight == 0)
        uv_close((uv_handle_t *)&k->close_handle, on_close_handle);
}

/* ---- requests ------------------------------------------------------------ */

static void unlink_req(struct kreq *r)
{
    struct kube *k = r->k;
    if (r->prev)
        r->prev->next = r->next;
    else
        k->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
}

struct warn_ctx {
    struct kube *k;
    const struct kreq *r;
};

static void on_warning(void *arg, int code, const char *text)
{
    struct warn_ctx *w = arg;
    struct kube *k = w->k;
    if (code != 299 || !*text) /* client-go's WarningLogger shows only these */
        return;
    k->warnings++;
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    for (size_t i = 0; i < WARN_SEEN; i++)
        if (k->warn_seen[i] == h)
            return;
    k->warn_seen[k->warn_next] = h;
    k->warn_next = (k->warn_next + 1) % WARN_SEEN;
    LOG_WARN("kube", "API server warning: %s (on %s; logged once)", text, w->r->what);
}

/* The API server's Warning headers (deprecated APIs, fields it dropped,
 * admission warnings): counted, each distinct text logged once. */
static void log_warnings(struct kube *k, const struct kreq *r, const struct httpc_resp *resp)
{
    struct warn_ctx w = {k, r};
    const char *v;
    for (size_t i = 0; (v = httpc_resp_header_nth(resp, "Warning", i)) != NULL; i++)
        if (kube_warning_parse(v, on_warning, &w) < 0)
            LOG_DEBUG("kube", "malformed Warning header on %s: %.200s", r->what, v);
}

static void req_free(struct kreq *r)
{
    xfree(r->method);
    xfree(r->path);
    xfree(r->ctype);
    xfree(r->body);
    xfree(r);
}

static void end_inflight(struct kube *k)
{
    if (--k->inflight == 0 && k->closing)
        uv_close((uv_handle_t *)&k->close_handle, on_close_handle);
}

static void on_req_timer_closed(uv_handle_t *h)
{
    struct kreq *r = h->data;
    struct kube *k = r->k;
    req_free(r);
    end_inflight(k);
}

/* The request is over: unlinked, freed (after its timer's close), uncounted. */
static void req_finish(struct kreq *r)
{
    struct kube *k = r->k;
    unlink_req(r);
    if (r->timer_init) {
        uv_close((uv_handle_t *)&r->timer, on_req_timer_closed);
        return;
    }
    req_free(r);
    end_inflight(k);
}

/* Hand the answer (or the failure) to the caller. */
static void deliver(struct kreq *r, int err, const struct httpc_resp *resp)
{
    if (r->raw_cb) {
        r->raw_cb(err, resp, r->arg);
        return;
    }
    struct kube_result res = {.err = err, .status = resp->status, .reason = "",
                              .message = err ? resp->errmsg : "", .retry_after_ms = -1};
    char msgbuf[256];
    if (err == 0) {
        if (resp->body_len > 0)
            res.body = json_loadb(resp->body, resp->body_len, 0, NULL);
        res.err = kube_status_errno(resp->status);
        if (res.err == 0 && resp->body_len > 0 && !res.body) {
            res.err = -EBADMSG;
            res.message = "response body is not JSON";
        } else if (res.err != 0) {
            long code;
            kube_status_fields(res.body, &res.reason, &res.message, &code);
            if (!res.message[0]) {
                snprintf(msgbuf, sizeof(msgbuf), "HTTP %ld: %.200s", resp->status, resp->body);
                res.message = msgbuf;
            }
            res.retry_after_ms = httpc_resp_retry_after_ms(resp, util_now_unix_ms());
        }
    }
    r->cb(&res, r->arg);
    json_decref(res.body);
}

/* Wait and send again when the answer asks for it (see RETRY_MAX). */
static bool retry_later(struct kreq *r, int err, const struct httpc_resp *resp)
{
    struct kube *k = r->k;
    if (r->raw_cb || err != 0 || k->closing || r->retries >= RETRY_MAX ||
        (resp->status != 429 && resp->status < 500))
        return false;
    int64_t ms = httpc_resp_retry_after_ms(resp, util_now_unix_ms());
    if (ms < 0 || ms > RETRY_MAX_WAIT_MS)
        return false;
    if (ms < RETRY_MIN_WAIT_MS) /* "0", or a date past: not ten resends back to back */
        ms = RETRY_MIN_WAIT_MS;
    if (r->deadline && uv_now(k->loop) + (uint64_t)ms >= r->deadline) {
        LOG_DEBUG("kube", "%s: HTTP %ld; not sent again: its wait of %lld ms ends after "
                  "the request's deadline", r->what, resp->status, (long long)ms);
        return false;
    }
    if (k->draining && uv_now(k->loop) + (uint64_t)ms > k->drain_until) {
        LOG_WARN("kube", "%s: HTTP %ld; not sent again: its wait of %lld ms ends after "
                 "the shutdown's budget", r->what, resp->status, (long long)ms);
        return false;
    }
    r->retries++;
    k->retries++;
    LOG_DEBUG("kube", "%s: HTTP %ld; sending again in %lld ms (Retry-After, attempt %d)",
              r->what, resp->status, (long long)ms, r->retries + 1);
    if (!r->timer_init) {
        uv_timer_init(k->loop, &r->timer);
        r->timer.data = r;
        r->timer_init = true;
    }
    r->waiting = true;
    uv_timer_start(&r->timer, on_retry_timer, (uint64_t)ms, 0);
    return true;
}

static void on_retry_timer(uv_timer_t *t)
{
    struct kreq *r = t->data;
    struct kube *k = r->k;
    r->waiting = false;
    bool cancel = k->closing || r->cancelled;
    int rc = cancel ? -ECANCELED : issue(r);
    if (rc == 0)
        return;
    struct httpc_resp none = {.status = 0, .body = "", .errmsg = cancel
                                                                  ? "request cancelled"
                                                                  : "cannot send the request again"};
    deliver(r, rc, &none);
    req_finish(r);
}

/* A request that waited for the exec plugin's credential past its deadline
 * (or the shutdown's budget): it fails now, as a request sent would have
 * timed out; the plugin's run goes on for the others (up to 30 s). */
static void on_cred_deadline(uv_timer_t *t)
{
    struct kreq *r = t->data;
    if (!r->wait_cred)
        return;
    r->wait_cred = false;
    struct httpc_resp none = {.status = 0, .body = "",
                              .errmsg = "its deadline passed while the credential plugin ran"};
    deliver(r, -ETIMEDOUT, &none);
    req_finish(r);
}

/* While r waits for the credential: fail it by its deadline, or by the
 * shutdown's budget, whichever comes first. */
static void cred_wait_until(struct kreq *r)
{
    struct kube *k = r->k;
    uint64_t until = r->deadline;
    if (k->draining && (!until || k->drain_until < until))
        until = k->drain_until;
    if (!until)
        return;
    if (!r->timer_init) {
        uv_timer_init(k->loop, &r->timer);
        r->timer.data = r;
        r->timer_init = true;
    }
    uint64_t now = uv_now(k->loop);
    uv_timer_start(&r->timer, on_cred_deadline, until > now ? until - now : 0, 0);
}

static void on_http_done(struct httpc_req *hr, int err, const struct httpc_resp *resp, void *arg)
{
    struct kreq *r = arg;
    struct kube *k = r->k;
    (void)hr;
    r->req = NULL;
    if (r->verb >= 0) {
        double sec = (double)(uv_hrtime() - r->t0) / 1e9;
        k->lat_count[r->verb]++;
        k->lat_sum[r->verb] += sec;
        for (int i = 0; i < KUBE_NBUCKETS; i++)
            if (sec <= lat_le[i])
                k->lat_buckets[r->verb][i]++;
        long st = err ? 0 : resp->status;
        int cls = err && err != -ECANCELED ? 0
                  : st == 429              ? 1
                  : st == 409              ? 2
                  : st >= 500              ? 4
                  : st >= 400 && st != 404 ? 3
                                           : -1;
        if (cls >= 0)
            k->errors[cls]++;
    }
    if (err == 0)
        log_warnings(k, r, resp);
    if (err == 0 && resp->status == 401 && k->exec && kube_exec_invalidate(k->exec, r->cred_gen))
        LOG_WARN("kube", "%s: HTTP 401 to the exec plugin's credential; the next request runs "
                 "the plugin again", r->what);
    if (retry_later(r, err, resp))
        return;
    deliver(r, err, resp);
    req_finish(r);
}

/* Streaming bodies go to the raw caller with its own argument. */
static int on_req_data(struct httpc_req *hr, long status, const char *data, size_t len, void *arg)
{
    struct kreq *r = arg;
    return r->on_data(hr, status, data, len, r->arg);
}

/* Send r (again): the request r describes, with the current token. With an
 * exec plugin and no credential to send, r waits for the plugin's run
 * (on_cred): 0 without an httpc request. */
static int issue(struct kreq *r)
{
    struct kube *k = r->k;
    const struct kube_exec_cred *cred = NULL;
    if (k->exec) {
        cred = kube_exec_valid(k->exec, util_now_unix_ms());
        if (!cred && r->wait_cred) /* it waited for this run: whatever it gave */
            cred = kube_exec_last(k->exec);
        r->wait_cred = false;
        if (!cred) {
            r->wait_cred = true;
            cred_wait_until(r);
            kube_exec_start(k->exec);
            return 0;
        }
        r->cred_gen = cred->gen;
    }
    int64_t timeout = r->timeout_ms == 0 ? k->timeout_ms : (r->timeout_ms < 0 ? 0 : r->timeout_ms);
    if (r->deadline) {
        /* this attempt ends by the request's deadline; past it (the exec
         * plugin took that long) it is not sent */
        uint64_t now = uv_now(k->loop);
        if (now >= r->deadline)
            return -ETIMEDOUT;
        int64_t left = (int64_t)(r->deadline - now);
        if (timeout == 0 || left < timeout)
            timeout = left;
    }
    char *url = xasprintf("%s%s", k->url_base, r->path);
    const char *headers[] = {"Accept: application/json", k->ua_header, k->host_header, NULL};
    struct httpc_tls tls = {
        .ca_file = k->cfg.ca_file,
        .ca_blob = k->cfg.ca_data,
        .ca_blob_len = k->cfg.ca_data_len,
        .cert_file = k->cfg.cert_file,
        .cert_blob = k->cfg.cert_data,
        .cert_blob_len = k->cfg.cert_data_len,
        .key_file = k->cfg.key_file,
        .key_blob = k->cfg.key_data,
        .key_blob_len = k->cfg.key_data_len,
        .insecure = k->cfg.insecure,
    };
    if (k->cfg.cert_file && k->cfg.key_file && !(cred && cred->cert)) {
        kube_auth_refresh_certs(&k->auth);
        if (k->auth.certf) {
            tls.cert_file = tls.key_file = NULL;
            tls.cert_blob = k->auth.certf;
            tls.cert_blob_len = k->auth.certf_len;
            tls.key_blob = k->auth.keyf;
            tls.key_blob_len = k->auth.keyf_len;
        }
    }
    if (cred && cred->cert) {
        tls.cert_blob = cred->cert;
        tls.cert_blob_len = cred->cert_len;
        tls.key_blob = cred->key;
        tls.key_blob_len = cred->key_len;
    }
    struct httpc_opts o = {
        .url = url,
        .method = r->method,
        .body = r->body,
        .body_len = r->blen,
        .content_type = r->body ? r->ctype : NULL,
        .bearer = cred ? cred->token : kube_auth_bearer(&k->auth),
        .headers = headers,
        .tls = &tls,
        .timeout_ms = timeout,
        .connect_timeout_ms = 10000,
        .max_body = r->max_body,
        .on_data = r->on_data ? on_req_data : NULL,
        .stall_timeout_ms = r->stall_ms,
        .no_compression = k->cfg.disable_compression, /* as client-go's DisableCompression */
        .proxy = k->cfg.proxy_url,
        .connect_to = k->connect_to,
    };
    r->t0 = uv_hrtime();
    int rc = httpc_request(k->http, &o, on_http_done, r, &r->req);
    xfree(url);
    return rc;
}

/* Fill r (copies of everything, so that it can be sent again), send it, and
 * count it in flight. */
static int send_req(struct kube *k, const char *method, const char *path, const char *ctype,
                    const char *body, size_t blen, httpc_data_cb on_data, int64_t timeout_ms,
                    int64_t stall_ms, size_t max_body, struct kreq *r)
{
    if (k->closing)
        return -ESHUTDOWN;
    if (!path || path[0] != '/')
        return -EINVAL;
    snprintf(r->what, sizeof(r->what), "%s %s", method, path);
    r->k = k;
    r->method = xstrdup(method ? method : "GET");
    r->path = xstrdup(path);
    r->ctype = ctype ? xstrdup(ctype) : NULL;
    if (body) {
        r->body = xmalloc(blen + 1);
        memcpy(r->body, body, blen);
        r->body[blen] = '\0';
        r->blen = blen;
    }
    r->on_data = on_data;
    r->timeout_ms = timeout_ms;
    r->stall_ms = stall_ms;
    r->max_body = max_body;
    r->verb = -1;
    for (int i = 0; i < KUBE_NVERBS && !on_data; i++)
        if (strcmp(r->method, verbs[i]) == 0)
            r->verb = i;
    int rc = issue(r);
    if (rc < 0)
        return rc; /* the caller frees r (req_free) */
    r->next = k->reqs;
    if (k->reqs)
        k->reqs->prev = r;
    k->reqs = r;
    k->inflight++;
    return 0;
}

int kube_raw_get(struct kube *k, const char *path, httpc_data_cb on_data, int64_t timeout_ms,
                 int64_t stall_ms, size_t max_body, kube_raw_done_cb cb, void *arg,
                 struct kreq **out)
{
    struct kreq *r = xcalloc(1, sizeof(*r));
    r->raw_cb = cb;
    r->arg = arg;
    int rc = send_req(k, "GET", path, NULL, NULL, 0, on_data, timeout_ms, stall_ms, max_body, r);
    if (rc < 0) {
        req_free(r);
        return rc;
    }
    if (out)
        *out = r;
    return 0;
}

static int dump_cb(const char *buf, size_t size, void *data)
{
    util_buf_append(data, buf, size);
    return 0;
}

int kube_request(struct kube *k, const char *method, const char *path, const char *content_type,
                 const json_t *body, kube_result_cb cb, void *arg)
{
    return kube_request_within(k, 0, method, path, content_type, body, cb, arg);
}

int kube_request_within(struct kube *k, int64_t within_ms, const char *method, const char *path,
                        const char *content_type, const json_t *body, kube_result_cb cb,
                        void *arg)
{
    if (!k || !method || !cb || within_ms < 0)
        return -EINVAL;
    struct util_buf b = {0};
    if (body && json_dump_callback(body, dump_cb, &b, JSON_COMPACT) != 0) {
        util_buf_free(&b);
        return -EINVAL;
    }
    struct kreq *r = xcalloc(1, sizeof(*r));
    r->cb = cb;
    r->arg = arg;
    if (within_ms > 0)
        r->deadline = uv_now(k->loop) + (uint64_t)within_ms;
    int rc = send_req(k, method, path, content_type ? content_type : "application/json",
                      body ? (b.data ? b.data : "") : NULL, b.len, NULL, 0, 0, 0, r);
    util_buf_free(&b);
    if (rc < 0)
        req_free(r);
    return rc;
}

void kube_write_metrics(const struct kube *k, struct util_buf *out)
{
    util_buf_puts(out, "# HELP gpuscaler_api_request_duration_seconds Kubernetes API request "
                       "latency (watches excluded).\n"
                       "# TYPE gpuscaler_api_request_duration_seconds histogram\n");
    for (int v = 0; v < KUBE_NVERBS; v++) {
        for (int i = 0; i < KUBE_NBUCKETS; i++)
            util_buf_printf(out,
                            "gpuscaler_api_request_duration_seconds_bucket{verb=\"%s\",le=\"%g\"} "
                            "%llu\n",
                            verbs[v], lat_le[i], (unsigned long long)k->lat_buckets[v][i]);
        util_buf_printf(out,
                        "gpuscaler_api_request_duration_seconds_bucket{verb=\"%s\",le=\"+Inf\"} "
                        "%llu\n"
                        "gpuscaler_api_request_duration_seconds_sum{verb=\"%s\"} %.6f\n"
                        "gpuscaler_api_request_duration_seconds_count{verb=\"%s\"} %llu\n",
                        verbs[v], (unsigned long long)k->lat_count[v], verbs[v], k->lat_sum[v],
                        verbs[v], (unsigned long long)k->lat_count[v]);
    }
    util_buf_puts(out, "# HELP gpuscaler_api_errors_total Failed Kubernetes API requests by "
                       "class (404 is not an error).\n"
                       "# TYPE gpuscaler_api_errors_total counter\n");
    for (int c = 0; c < KUBE_NERRCLASS; c++)
        util_buf_printf(out, "gpuscaler_api_errors_total{class=\"%s\"} %llu\n", errclass[c],
                        (unsigned long long)k->errors[c]);
    util_buf_printf(out,
                    "# HELP gpuscaler_api_warnings_total Warnings the Kubernetes API server sent "
                    "(deprecated APIs, dropped fields, admission); each text is logged once.\n"
                    "# TYPE gpuscaler_api_warnings_total counter\n"
                    "gpuscaler_api_warnings_total %llu\n"
                    "# HELP gpuscaler_api_retries_total Kubernetes API requests sent again after "
                    "the wait a 429 or 5xx asked for (Retry-After, at most 10 s, 10 times).\n"
                    "# TYPE gpuscaler_api_retries_total counter\n"
                    "gpuscaler_api_retries_total %llu\n",
                    (unsigned long long)k->warnings, (unsigned long long)k->retries);
    if (k->exec) {
        uint64_t runs, failures;
        kube_exec_stats(k->exec, &runs, &failures);
        util_buf_printf(out,
                        "# HELP gpuscaler_api_exec_plugin_runs_total Runs of the kubeconfig's "
                        "exec credential plugin, by result.\n"
                        "# TYPE gpuscaler_api_exec_plugin_runs_total counter\n"
                        "gpuscaler_api_exec_plugin_runs_total{result=\"ok\"} %llu\n"
                        "gpuscaler_api_exec_plugin_runs_total{result=\"error\"} %llu\n",
                        (unsigned long long)(runs - failures), (unsigned long long)failures);
    }
}

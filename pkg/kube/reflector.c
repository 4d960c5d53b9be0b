/* SPDX-License-Identifier: Apache-2.0 */
/* kube/reflector: list+watch of one collection, modelled on client-go's
 * reflector.
 *
 * State machine: LIST (paged with limit/continue, no resourceVersion: a
 * consistent read; after a continue token expired, once in one request, as
 * client-go's pager falls back) -> WATCH from the list's resourceVersion with
 * allowWatchBookmarks and a timeoutSeconds drawn from [min, max] -> WATCH
 * again from the last resourceVersion seen (events and bookmarks advance it)
 * when the server ends the watch -> ... A 410 Gone (an HTTP 410 or an ERROR
 * event whose Status has code 410) re-lists after the backoff below, as
 * client-go's BackoffUntil does, without counting an error. Failures wait with
 * client-go's jittered exponential backoff (800 ms doubling to 30 s, jitter
 * 1.0, reset after 2 quiet minutes) and then resume: the watch from the last
 * resourceVersion, or a new list when the stream itself was broken (bad JSON,
 * oversized event), since events may have been lost, or when a watch ended
 * within min_watch_ms without an event (client-go's "very short watch"); a
 * clean end inside an event is no break: resumed, the partial event dropped
 * (5 such ends in a row without a whole event list again), nor is a
 * connection lost under a watch that delivered events or stayed open past
 * min_watch_ms (a proxy's idle timeout; client-go's StreamWatcher takes a
 * probable EOF as a normal end): resumed at once, no failure. An open watch
 * has no stall limit until the server has shown periodic bookmarks (see
 * start_watch). A 429 waits for its Retry-After. Errors are logged here
 * and never leave the reflector.
 *
 * Unlike client-go, lists never ask for resourceVersion "0" or the last one
 * seen: the API server's watch cache answers those whole, ignoring the
 * limit, and a list in one body parses to ten times its size in JSON values
 * (10,000 pods of 2 KB: a 19.6 MiB body, 195 MiB parsed, measured with
 * jansson 2.14; the chart's memory limit is 256 MiB); a consistent read in
 * pages of page_limit keeps the peak at one page. A streaming list (a watch
 * with sendInitialEvents) would spare both, where the API server has it.
 *
 * The sink gets list_begin, each page's items as the page arrives (its JSON
 * freed after), and list_end once the last page is in. A page that fails is
 * either asked again (the list resumed from it) or the list starts over with
 * a new list_begin; no list_end comes for an unfinished list, and no watch
 * before one. The cache's sink (cache.c) stages the items, extracted, and
 * applies them all at list_end, as client-go's reflector gathers the pages
 * for one store.Replace: readers never see a relist half-applied, and one
 * that fails leaves the old state. The peak stays one page of JSON plus the
 * extracted objects that differ from the cache (store.c).
 *
 * Exactly one request or one timer is pending at any time (or none while
 * closing); every callback checks `closing` first. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube-int.h"

/* A list answer receiving under 1 byte/s this long is ended (a dead connection). */
#define LIST_STALL_MS 90000

enum next_op { NEXT_LIST, NEXT_WATCH };

struct kube_reflector {
    struct kube *k;
    char *path;
    char *selector;
    struct kube_watch_opts o;
    struct kube_sink sink;
    void *sink_arg;
    struct kreq *req;
    uv_timer_t timer;
    enum next_op after_wait;
    struct kube_watch_decoder *dec;
    char *rv;
    char *cont;
    bool synced;
    bool unpaged; /* the next list is one request: a continue token expired */
    uint64_t rng;
    int64_t backoff_cur;
    uint64_t last_backoff_at;
    bool backed_off;
    uint64_t watch_started_at;
    bool watching;       /* a watch request is in flight */
    unsigned watch_seen; /* events + bookmarks in the current watch */
    int watch_err;       /* why on_event stopped the stream */
    long watch_err_code; /* ... the ERROR event's Status code */
    unsigned resumes;    /* watches from r->rv that failed in a row without an event */
    int64_t watch_timeout_ms; /* the current watch's timeoutSeconds */
    bool periodic_bookmarks;  /* the server sent a bookmark well before a watch's end */
    char watch_errmsg[256];
    uint64_t down_since; /* loop time of the first failure since the view was current; 0 = current */
    bool closing;
    kube_close_cb close_cb;
    void *close_arg;
    struct kube_reflector_stats st;
};

/* The view is out of date from the first failure until a list completes, a
 * watch delivers again, or one stays open o.healthy_ms: past connecting (10 s
 * at most) and answered, so current if the collection is quiet
 * (kube_reflector_down_ms). */
static void went_down(struct kube_reflector *r)
{
    if (!r->down_since)
        r->down_since = uv_now(kube_loop(r->k)) | 1; /* never 0 */
}

static void start_list(struct kube_reflector *r);
static void start_watch(struct kube_reflector *r);

static uint64_t rnd(struct kube_reflector *r)
{
    uint64_t x = r->rng; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static double rnd01(struct kube_reflector *r)
{
    return (double)(rnd(r) >> 11) / 9007199254740992.0;
}

static void set_str(char **dst, const char *s)
{
    xfree(*dst);
    *dst = s ? xstrdup(s) : NULL;
}

static void on_timer(uv_timer_t *t)
{
    struct kube_reflector *r = util_container_of(t, struct kube_reflector, timer);
    if (r->closing)
        return;
    if (r->after_wait == NEXT_WATCH && r->rv && r->rv[0])
        start_watch(r);
    else
        start_list(r);
}

static void wait_then(struct kube_reflector *r, int64_t delay_ms, enum next_op next)
{
    r->after_wait = next;
    r->st.last_delay_ms = delay_ms;
    uv_timer_start(&r->timer, on_timer, (uint64_t)(delay_ms > 0 ? delay_ms : 0), 0);
}

/* client-go's backoff: base doubles up to the cap, reset after a quiet period. */
static void backoff_wait(struct kube_reflector *r, enum next_op next)
{
    uint64_t now = uv_now(kube_loop(r->k));
    if (!r->backed_off || now - r->last_backoff_at > (uint64_t)r->o.backoff_reset_ms)
        r->backoff_cur = r->o.backoff_initial_ms;
    else if (r->backoff_cur < r->o.backoff_max_ms)
        r->backoff_cur = UTIL_MIN(r->backoff_cur * 2, r->o.backoff_max_ms);
    r->backed_off = true;
    r->last_backoff_at = now;
    double d = (double)r->backoff_cur * (1.0 + r->o.backoff_jitter * rnd01(r));
    int64_t delay = (int64_t)d;
    if (delay > r->o.backoff_max_ms)
        delay = r->o.backoff_max_ms;
    wait_then(r, delay, next);
}

/* A failure: counted, then the backoff. */
static void backoff(struct kube_reflector *r, enum next_op next)
{
    r->st.errors++;
    went_down(r);
    if (next == NEXT_LIST)
        r->unpaged = false; /* a failed list is paged again: one huge request may be why */
    backoff_wait(r, next);
}

/* A 429, or a 5xx with Retry-After (an API server shutting down, or APF's
 * rejections through some proxies): wait as told, at most 5 minutes, as
 * client-go's checkWait does for these statuses; without the header, the
 * backoff. Returns false when resp is none of these. */
static bool retry_after(struct kube_reflector *r, const struct httpc_resp *resp, enum next_op next)
{
    if (resp->status != 429 && resp->status < 500)
        return false;
    int64_t ms = httpc_resp_retry_after_ms(resp, util_now_unix_ms());
    if (ms < 0) {
        if (resp->status != 429)
            return false; /* logged as any other error */
        backoff(r, next);
        return true;
    }
    if (ms < r->o.backoff_initial_ms) /* "0", or a date past: not a relist loop */
        ms = r->o.backoff_initial_ms;
    LOG_WARN("kube", "%s: HTTP %ld; retrying in %lld ms (Retry-After)", r->path, resp->status,
             (long long)ms);
    went_down(r);
    wait_then(r, UTIL_MIN(ms, (int64_t)300000), next);
    return true;
}

static void add_query(struct util_buf *b, const char *key, const char *val)
{
    util_buf_puts(b, strchr(b->data, '?') ? "&" : "?");
    util_buf_puts(b, key);
    util_buf_puts(b, "=");
    kube_query_escape(b, val);
}

static const char *resp_message(const struct httpc_resp *resp, char *buf, size_t len)
{
    json_t *j = json_loadb(resp->body, resp->body_len, KUBE_JSON_FLAGS, NULL);
    const char *reason, *msg;
    long code;
    kube_status_fields(j, &reason, &msg, &code);
    snprintf(buf, len, "HTTP %ld %s: %.200s", resp->status, reason,
             msg[0] ? msg : resp->body);
    json_decref(j);
    return buf;
}

/* ---- close ---------------------------------------------------------------- */

static void on_closed(uv_handle_t *h)
{
    struct kube_reflector *r = util_container_of((uv_timer_t *)h, struct kube_reflector, timer);
    kube_close_cb cb = r->close_cb;
    void *arg = r->close_arg;
    kube_watch_decoder_free(r->dec);
    xfree(r->path);
    xfree(r->selector);
    xfree(r->rv);
    xfree(r->cont);
    xfree(r);
    if (cb)
        cb(arg);
}

static void finish_close(struct kube_reflector *r)
{
    uv_close((uv_handle_t *)&r->timer, on_closed);
}

void kube_reflector_close(struct kube_reflector *r, kube_close_cb cb, void *arg)
{
    r->closing = true;
    r->close_cb = cb;
    r->close_arg = arg;
    uv_timer_stop(&r->timer);
    if (r->req)
        kube_req_cancel(r->req); /* the done callback finishes the close */
    else
        finish_close(r);
}

/* ---- list ----------------------------------------------------------------- */

static void on_list_done(int err, const struct httpc_resp *resp, void *arg)
{
    struct kube_reflector *r = arg;
    char msg[320];
    json_t *j = NULL;
    r->req = NULL;
    if (r->closing) {
        finish_close(r);
        return;
    }
    if (err < 0) {
        LOG_WARN("kube", "list %s: %s", r->path, resp->errmsg);
        backoff(r, NEXT_LIST);
        return;
    }
    if (resp->status == 410) {
        r->st.gone++;
        bool paging = r->cont != NULL;
        set_str(&r->cont, NULL);
        if (paging && !r->unpaged) {
            /* The continue token expired (etcd compacted past the first page's
             * revision): as client-go's pager, list again in one request,
             * which cannot expire half-way. Paged again, a list slower than
             * the compaction interval would expire for ever. */
            LOG_WARN("kube", "list %s: the continue token expired; listing again in one request",
                     r->path);
            r->unpaged = true;
            start_list(r);
        } else {
            LOG_WARN("kube", "list %s: %s", r->path, resp_message(resp, msg, sizeof(msg)));
            backoff(r, NEXT_LIST);
        }
        return;
    }
    if (retry_after(r, resp, NEXT_LIST))
        return;
    if (resp->status < 200 || resp->status >= 300) {
        LOG_ERROR("kube", "list %s: %s", r->path, resp_message(resp, msg, sizeof(msg)));
        /* a page the server refuses (a continue token another API server
         * does not take: 400) is refused again: the list starts over, as
         * client-go's pager fails the whole list; a 5xx may pass */
        if (resp->status < 500)
            set_str(&r->cont, NULL);
        backoff(r, NEXT_LIST);
        return;
    }
    json_error_t jerr;
    j = json_loadb(resp->body, resp->body_len, KUBE_JSON_FLAGS, &jerr);
    json_t *items = json_object_get(j, "items");
    json_t *meta = json_object_get(j, "metadata");
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    if (!j || !(json_is_array(items) || json_is_null(items)) || !rv) {
        LOG_ERROR("kube", "list %s: not a list object (%s)", r->path,
                  j ? "no items or resourceVersion" : jerr.text);
        set_str(&r->cont, NULL);
        json_decref(j);
        backoff(r, NEXT_LIST);
        return;
    }
    if (!r->cont)
        r->sink.list_begin(r->sink_arg);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        if (json_is_object(it))
            r->sink.event(r->sink_arg, KUBE_EV_ADDED, it);
    }
    const char *cont = json_string_value(json_object_get(meta, "continue"));
    if (cont && cont[0]) {
        set_str(&r->cont, cont);
        json_decref(j);
        start_list(r);
        return;
    }
    set_str(&r->cont, NULL);
    set_str(&r->rv, rv);
    json_decref(j);
    r->unpaged = false;
    r->sink.list_end(r->sink_arg);
    if (r->synced)
        r->st.relists++;
    r->synced = true;
    r->down_since = 0;
    r->resumes = 0;
    start_watch(r);
}

static void start_list(struct kube_reflector *r)
{
    struct util_buf b = {0};
    util_buf_puts(&b, r->path);
    if (r->o.page_limit != ~0u && !r->unpaged) {
        char lim[24];
        snprintf(lim, sizeof(lim), "%u", r->o.page_limit);
        add_query(&b, "limit", lim);
    }
    if (r->cont)
        add_query(&b, "continue", r->cont);
    if (r->selector)
        add_query(&b, "labelSelector", r->selector);
    r->st.lists++;
    /* no deadline on the whole transfer, as client-go's: one page, or the
     * unpaged list after an expired continue token, of a large cluster can
     * take longer than the client's 30 s and would then never finish; the
     * API server's own request timeout (60 s) bounds it, and a connection
     * that sends nothing for LIST_STALL_MS is ended */
    int rc = kube_raw_get(r->k, b.data, NULL, -1, LIST_STALL_MS, (size_t)256 << 20, on_list_done,
                          r, &r->req);
    util_buf_free(&b);
    if (rc == -ESHUTDOWN) {
        LOG_WARN("kube", "list %s: the client is closing; stopping", r->path);
    } else if (rc < 0) {
        LOG_ERROR("kube", "list %s: %s", r->path, strerror(-rc));
        backoff(r, NEXT_LIST);
    }
}

/* ---- watch ---------------------------------------------------------------- */

static void take_rv(struct kube_reflector *r, const json_t *obj)
{
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                       "resourceVersion"));
    if (rv && rv[0])
        set_str(&r->rv, rv);
}

static int on_event(enum kube_event_type type, json_t *obj, void *arg)
{
    struct kube_reflector *r = arg;
    if (r->closing)
        return -ECANCELED;
    switch (type) {
    case KUBE_EV_ADDED:
    case KUBE_EV_MODIFIED:
    case KUBE_EV_DELETED:
        r->sink.event(r->sink_arg, type, obj);
        take_rv(r, obj);
        r->st.events++;
        r->watch_seen++;
        r->down_since = 0;
        return 0;
    case KUBE_EV_BOOKMARK:
        take_rv(r, obj);
        r->st.bookmarks++;
        /* one more than 10 s before the deadline: not the one a server
         * without a watch cache's timer sends as the watch ends, but a
         * periodic one (kube-apiserver's watch cache: about every minute) */
        if ((int64_t)(uv_now(kube_loop(r->k)) - r->watch_started_at) + 10000 <
            r->watch_timeout_ms)
            r->periodic_bookmarks = true;
        r->watch_seen++;
        r->down_since = 0;
        return 0;
    case KUBE_EV_ERROR: {
        const char *reason, *msg;
        long code;
        kube_status_fields(obj, &reason, &msg, &code);
        snprintf(r->watch_errmsg, sizeof(r->watch_errmsg), "ERROR event %ld %s: %.200s", code,
                 reason, msg);
        r->watch_err = code == 410 ? -ESTALE : -EREMOTEIO;
        r->watch_err_code = code;
        return r->watch_err;
    }
    }
    return 0;
}

static int on_watch_data(struct httpc_req *req, long status, const char *data, size_t len,
                         void *arg)
{
    struct kube_reflector *r = arg;
    (void)req, (void)status;
    return kube_watch_decoder_feed(r->dec, data, len, on_event, r);
}

/* A watch failed. As client-go's reflector, it is resumed from the same
 * resourceVersion only for what may pass (a transport error, 429, a 5xx
 * other than a resourceVersion the server does not have yet: the 504 Too
 * large resource version a watch cache answers after etcd was restored from
 * a snapshot); anything else, and WATCH_MAX_RESUMES failures in a row from
 * it, lists again (it resumed from it for ever, the view frozen while the
 * caches counted as synced). */
#define WATCH_MAX_RESUMES 5
static void watch_failed(struct kube_reflector *r, long status, const char *msg)
{
    bool too_large = status == 504 && msg && strstr(msg, "Too large resource version");
    bool resumable = status == 0 || status == 429 || (status >= 500 && !too_large);
    if (r->watch_seen > 0)
        r->resumes = 0;
    /* a transport error (a refused connection while the API server
     * restarts) and a 429 are retried as client-go retries them, without
     * counting: listing again would only add load */
    if (resumable && (status == 0 || status == 429 || ++r->resumes < WATCH_MAX_RESUMES)) {
        backoff(r, NEXT_WATCH);
        return;
    }
    LOG_WARN("kube", "watch %s: listing again (%s)", r->path,
             resumable ? "failed from the same resourceVersion 5 times in a row"
                       : "the server will not serve a watch from this resourceVersion");
    r->resumes = 0;
    set_str(&r->rv, NULL);
    backoff(r, NEXT_LIST);
}

static void on_watch_done(int err, const struct httpc_resp *resp, void *arg)
{
    struct kube_reflector *r = arg;
    char msg[320] = "";
    bool cut = false; /* ended inside its first event */
    r->req = NULL;
    r->watching = false;
    if (r->closing) {
        finish_close(r);
        return;
    }
    if (uv_now(kube_loop(r->k)) - r->watch_started_at >= (uint64_t)r->o.healthy_ms) {
        r->down_since = 0; /* it was current while open; a failure now starts anew */
        r->resumes = 0;
    }
    if (err == 0 && resp->status >= 200 && resp->status < 300) {
        err = kube_watch_decoder_finish(r->dec);
        /* a clean end inside an event (the server's timeout, or a proxy
         * ending the response between two writes): the events before it
         * were whole, so it resumes from the last one's resourceVersion as
         * client-go's reflector does; the partial one comes again */
        if (err == -ENODATA) {
            /* cut inside its first event each time (a proxy's size limit on
             * one large object): resuming would never get past it */
            cut = r->watch_seen == 0;
            if (cut && ++r->resumes >= WATCH_MAX_RESUMES) {
                LOG_WARN("kube", "watch %s: %s, %u times in a row without a whole event; "
                                 "listing again", r->path, kube_watch_decoder_error(r->dec),
                         r->resumes);
                r->resumes = 0;
                set_str(&r->rv, NULL);
                backoff(r, NEXT_LIST);
                return;
            }
            LOG_WARN("kube", "watch %s: %s; dropped, resuming from resourceVersion %s", r->path,
                     kube_watch_decoder_error(r->dec), r->rv ? r->rv : "");
            err = 0;
        }
    }
    if ((err == -ESTALE && r->watch_err == -ESTALE) || (err == 0 && resp->status == 410)) {
        LOG_INFO("kube", "watch %s: resourceVersion %s is gone (410); re-listing", r->path,
                 r->rv ? r->rv : "");
        r->st.gone++;
        set_str(&r->rv, NULL);
        /* not an error, but client-go's BackoffUntil waits before every
         * relist all the same (800-1600 ms after a quiet spell): a server
         * that answers each watch with a 410 gets no list-watch loop */
        backoff_wait(r, NEXT_LIST);
        return;
    }
    if (err == -EREMOTEIO && r->watch_err == -EREMOTEIO) {
        LOG_WARN("kube", "watch %s: %s", r->path, r->watch_errmsg);
        watch_failed(r, r->watch_err_code, r->watch_errmsg);
        return;
    }
    if (err == -EBADMSG || err == -EMSGSIZE) {
        LOG_ERROR("kube", "watch %s: broken stream: %s; re-listing", r->path,
                  kube_watch_decoder_error(r->dec));
        backoff(r, NEXT_LIST);
        return;
    }
    /* The connection lost under a watch the server had answered, after it
     * delivered events or stayed open past min_watch_ms (a proxy's idle
     * timeout, an API server's restart): a normal end, as client-go's
     * StreamWatcher takes a probable EOF, resumed at once from the last
     * resourceVersion, no failure counted (a dead peer's next connect fails,
     * and counts). Over HTTP/2 curl 7.x reports it as a stream not closed
     * cleanly before its connection ended (CURLE_HTTP2_STREAM: -EPROTO). A
     * stall (-ETIMEDOUT: nothing for the stall limit, a hung server) is a
     * failure: backed off, the view down. */
    uint64_t ran = uv_now(kube_loop(r->k)) - r->watch_started_at;
    if ((err == -ECONNRESET || err == -EPROTO) && resp->status >= 200 && resp->status < 300 &&
        (r->watch_seen > 0 || ran >= (uint64_t)r->o.min_watch_ms)) {
        LOG_INFO("kube", "watch %s: %s after %llu ms; resuming from resourceVersion %s", r->path,
                 resp->errmsg, (unsigned long long)ran, r->rv ? r->rv : "");
        r->resumes = 0;
        start_watch(r);
        return;
    }
    if (err < 0) {
        LOG_WARN("kube", "watch %s: %s", r->path, resp->errmsg);
        watch_failed(r, 0, NULL);
        return;
    }
    bool failed = resp->status < 200 || resp->status >= 300;
    if (failed)
        resp_message(resp, msg, sizeof(msg));
    /* a 504 Too large resource version carries a Retry-After (its
     * retryAfterSeconds): waited out, the same watch came back for ever; a
     * 5xx waited out counts toward the failures in a row */
    bool too_large = resp->status == 504 && strstr(msg, "Too large resource version");
    if (!too_large && (resp->status < 500 || r->resumes + 1 < WATCH_MAX_RESUMES) &&
        retry_after(r, resp, NEXT_WATCH)) {
        if (resp->status >= 500)
            r->resumes++;
        return;
    }
    if (failed) {
        LOG_ERROR("kube", "watch %s: %s", r->path, msg);
        watch_failed(r, resp->status, msg);
        return;
    }
    if (r->watch_seen == 0 && ran < (uint64_t)r->o.min_watch_ms) {
        /* client-go's "very short watch": an error, after which its
         * reflector lists again (resumed from the same resourceVersion for
         * ever, a server or proxy that ends every watch at once kept the
         * view from learning of any change) */
        LOG_WARN("kube", "watch %s: ended after %llu ms without events; listing again", r->path,
                 (unsigned long long)ran);
        r->resumes = 0;
        set_str(&r->rv, NULL);
        backoff(r, NEXT_LIST);
        return;
    }
    r->down_since = 0; /* a watch that ran its course: nothing was missed */
    if (!cut)
        r->resumes = 0;
    start_watch(r); /* the server's timeout: resume from the last resourceVersion */
}

static void start_watch(struct kube_reflector *r)
{
    int64_t span = r->o.max_timeout_s - r->o.min_timeout_s;
    int64_t timeout_s = r->o.min_timeout_s + (span > 0 ? (int64_t)(rnd(r) % (uint64_t)(span + 1)) : 0);
    char ts[24];
    snprintf(ts, sizeof(ts), "%lld", (long long)timeout_s);
    struct util_buf b = {0};
    util_buf_puts(&b, r->path);
    add_query(&b, "watch", "1");
    add_query(&b, "allowWatchBookmarks", "true");
    add_query(&b, "resourceVersion", r->rv ? r->rv : "");
    add_query(&b, "timeoutSeconds", ts);
    if (r->selector)
        add_query(&b, "labelSelector", r->selector);
    kube_watch_decoder_reset(r->dec);
    r->watch_seen = 0;
    r->watch_err = 0;
    r->watch_started_at = uv_now(kube_loop(r->k));
    r->watch_timeout_ms = timeout_s * 1000;
    r->st.watches++;
    /* The server ends the watch after timeout_s; give it a margin before we
     * do. No stall limit until the server has shown periodic bookmarks: one
     * without a watch cache sends nothing on a quiet collection, and
     * client-go ends no healthy stream for that. Once it has, a watch
     * silent for bookmark_stall_ms is dead or hung somewhere TCP keepalives
     * do not see (behind a proxy they reach the proxy only). A dead peer
     * is noticed by the connection's TCP keepalives (httpc: probes after
     * 30 s idle, ended 30 s unanswered, TCP_USER_TIMEOUT), a hung server by
     * this deadline. */
    int64_t stall = r->o.stall_ms > 0                                         ? r->o.stall_ms
                    : r->o.stall_ms == 0 && r->periodic_bookmarks &&
                              r->o.bookmark_stall_ms > 0                      ? r->o.bookmark_stall_ms
                                                                              : 0;
    int rc = kube_raw_get(r->k, b.data, on_watch_data, (timeout_s + 30) * 1000, stall,
                          (size_t)1 << 20, on_watch_done, r, &r->req);
    util_buf_free(&b);
    r->watching = rc == 0;
    if (rc == -ESHUTDOWN) {
        LOG_WARN("kube", "watch %s: the client is closing; stopping", r->path);
    } else if (rc < 0) {
        LOG_ERROR("kube", "watch %s: %s", r->path, strerror(-rc));
        backoff(r, NEXT_WATCH);
    }
}

/* ---- public --------------------------------------------------------------- */

int kube_reflector_new(struct kube *k, const char *path, const char *label_selector,
                       const struct kube_watch_opts *o, const struct kube_sink *sink,
                       void *sink_arg, struct kube_reflector **out)
{
    *out = NULL;
    if (!k || !path || path[0] != '/' || strchr(path, '?') || !sink || !sink->list_begin ||
        !sink->event || !sink->list_end)
        return -EINVAL;
    struct kube_reflector *r = xcalloc(1, sizeof(*r));
    r->k = k;
    r->path = xstrdup(path);
    r->selector = label_selector && label_selector[0] ? xstrdup(label_selector) : NULL;
    r->o = o ? *o : (struct kube_watch_opts){0};
    if (r->o.min_timeout_s <= 0)
        r->o.min_timeout_s = 300;
    if (r->o.max_timeout_s < r->o.min_timeout_s)
        r->o.max_timeout_s = UTIL_MAX(600, r->o.min_timeout_s);
    if (r->o.backoff_initial_ms <= 0)
        r->o.backoff_initial_ms = 800;
    if (r->o.backoff_max_ms <= 0)
        r->o.backoff_max_ms = 30000;
    if (r->o.backoff_jitter <= 0)
        r->o.backoff_jitter = 1.0;
    if (r->o.backoff_reset_ms <= 0)
        r->o.backoff_reset_ms = 120000;
    if (r->o.bookmark_stall_ms == 0)
        r->o.bookmark_stall_ms = 150000;
    if (r->o.min_watch_ms <= 0)
        r->o.min_watch_ms = 1000;
    if (r->o.healthy_ms <= 0)
        r->o.healthy_ms = 15000;
    if (r->o.page_limit == 0)
        r->o.page_limit = 500;
    r->rng = r->o.seed ? r->o.seed : (uv_hrtime() ^ (uint64_t)(uintptr_t)r) | 1;
    r->sink = *sink;
    r->sink_arg = sink_arg;
    r->dec = kube_watch_decoder_new(0);
    uv_timer_init(kube_loop(k), &r->timer);
    *out = r;
    start_list(r);
    return 0;
}

bool kube_reflector_synced(const struct kube_reflector *r)
{
    return r->synced;
}

const char *kube_reflector_rv(const struct kube_reflector *r)
{
    return r->rv ? r->rv : "";
}

int64_t kube_reflector_down_ms(const struct kube_reflector *r)
{
    if (!r->down_since)
        return 0;
    uint64_t now = uv_now(kube_loop(r->k));
    if (r->watching && now - r->watch_started_at >= (uint64_t)r->o.healthy_ms)
        return 0; /* a watch reopened after the failures and holding */
    /* at least 1 once down: in the loop iteration of the failure (and the
     * millisecond after, down_since being odd) the difference is 0 or less */
    return now > r->down_since ? (int64_t)(now - r->down_since) : 1;
}

const struct kube_reflector_stats *kube_reflector_stats(const struct kube_reflector *r)
{
    return &r->st;
}

const struct kube_watch_opts *kube_reflector_opts(const struct kube_reflector *r)
{
    return &r->o;
}

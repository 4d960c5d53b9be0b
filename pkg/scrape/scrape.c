/* SPDX-License-Identifier: Apache-2.0 */
/* scrape: the I/O half of the scraper (see scrape.h): a schedule of every
 * ready pod, requests through httpc on the loop, bodies streamed into the
 * extractor, results recorded in each pod's history. The pods come from
 * targets.c, which keeps them in step with the targets and answers
 * scrape_get; the state both share is in scrape-io.h.
 *
 * Schedule: one uv_timer and a binary min-heap of pods by due time (loop
 * time, ms); the timer fires on a 10 ms grid and starts every pod due by
 * then, so 2,000 scrapes a second cost 100 wake-ups, not 2,000. Each pod has
 * a stable pseudo-random phase within the interval (a hash of
 * namespace/deployment/pod), so 10,000 pods spread evenly over the interval
 * and keep their slot from tick to tick; the next slot is the last
 * one plus the interval, never "now + interval", so the schedule does not
 * drift. A slot that is already more than one interval in the past is
 * counted late and skipped to the next one in the future.
 *
 * In flight: a due pod starts only while fewer than the limit run (see
 * scrape_config.max_inflight); the limit follows rate x mean duration, so
 * the scrapes in flight (each holding a curl handle, its receive buffer and
 * a parser) stay few even when a busy loop leaves many pods due at once. A
 * finished scrape re-arms the timer, which starts the next due ones. The
 * extractors of finished scrapes are kept for the next ones (up to the
 * limit). Plain-HTTP pods are scraped over a new connection each time
 * ("Connection: close"): an idle connection per pod costs about 2 KB in
 * libcurl and, before libcurl 8, a walk over all of them per request; curl's
 * receive buffer is sized to the workload's recent body sizes.
 *
 * Ownership: pods belong to their workload. A pod dropped (or the whole
 * scraper closed) while its request runs is detached (wl = NULL) after its
 * history is released into the workload's window, the request cancelled,
 * and the pod freed by the completion callback, which httpc always delivers
 * exactly once. scrape_close frees the scraper after its timer closed and
 * the last callback ran. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpc/httpc.h"
#include "scrape-io.h"
#include "util/util.h"

/** Most scrapes started by one timer callback, so one tick never starves the loop. */
#define START_BATCH 512
/** Due pods are started together on a grid of this many ms (fewer wake-ups). */
#define BATCH_MS 10
/** The in-flight limit's floor (see scrape_config.max_inflight). */
#define MIN_INFLIGHT 16
/** Idle curl handles each of the scraper's httpc clients keeps. */
#define POOL_HANDLES 2
/** Bounds of curl's receive buffer, sized to a workload's recent bodies. */
#define RECV_MIN 4096
#define RECV_MAX ((size_t)512 << 10)
/** Cap on a non-2xx body (buffered by httpc, only its status matters). */
#define ERROR_BODY_MAX ((size_t)64 << 10)
/** A failing pod is logged again at most this often (same failure kind). */
#define LOG_EVERY_MS 300000
/** Scrape warnings per second (of the scraper's clock) over all pods. */
#define LOG_PER_SECOND 20

static const char *const accept_hdr[] = {
    "Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1", NULL,
};

int64_t scrape_io_now(const struct scrape *s)
{
    return s->cfg.clock ? s->cfg.clock(s->cfg.clock_arg) : util_now_boot_ms();
}

/* ---- schedule heap ----------------------------------------------------- */

static void heap_set(struct scrape *s, size_t i, struct spod *p)
{
    s->heap[i] = p;
    p->heap = (uint32_t)i;
}

static void sift_up(struct scrape *s, size_t i)
{
    struct spod *p = s->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (s->heap[parent]->due <= p->due)
            break;
        heap_set(s, i, s->heap[parent]);
        i = parent;
    }
    heap_set(s, i, p);
}

static void sift_down(struct scrape *s, size_t i)
{
    struct spod *p = s->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->nheap)
            break;
        if (c + 1 < s->nheap && s->heap[c + 1]->due < s->heap[c]->due)
            c++;
        if (p->due <= s->heap[c]->due)
            break;
        heap_set(s, i, s->heap[c]);
        i = c;
    }
    heap_set(s, i, p);
}

static void heap_push(struct scrape *s, struct spod *p)
{
    if (s->nheap == s->capheap) {
        s->capheap = s->capheap ? 2 * s->capheap : 64;
        s->heap = xrealloc(s->heap, s->capheap * sizeof(*s->heap));
    }
    heap_set(s, s->nheap++, p);
    sift_up(s, p->heap);
}

void scrape_io_unschedule(struct scrape *s, struct spod *p)
{
    size_t i = p->heap;
    if (i == SCRAPE_NO_HEAP)
        return;
    p->heap = SCRAPE_NO_HEAP;
    struct spod *last = s->heap[--s->nheap];
    if (i == s->nheap)
        return;
    heap_set(s, i, last);
    sift_down(s, i);
    sift_up(s, last->heap);
}

static void on_timer(uv_timer_t *t);

/* Rate x (twice the mean duration + one batch), plus MIN_INFLIGHT; never
 * above max_inflight. */
static size_t inflight_limit(const struct scrape *s)
{
    double rate = (double)s->nheap / (double)s->cfg.interval_ms; /* scrapes per ms */
    double want = rate * (2.0 * s->duration_ms + BATCH_MS) + MIN_INFLIGHT;
    return want >= (double)s->cfg.max_inflight ? s->cfg.max_inflight : (size_t)want;
}

/* The timer for the next due pod; none while the limit is reached (a
 * finishing scrape arms it again). */
void scrape_io_arm(struct scrape *s)
{
    if (s->closing)
        return;
    if (s->nheap == 0) {
        uv_timer_stop(&s->timer);
        return;
    }
    uint64_t now = uv_now(s->loop), due = s->heap[0]->due;
    if (due <= now && s->inflight >= inflight_limit(s)) {
        uv_timer_stop(&s->timer);
        return;
    }
    /* wake on the BATCH_MS grid: the pods due by then start together */
    uint64_t at = (due + BATCH_MS - 1) / BATCH_MS * BATCH_MS;
    uv_timer_start(&s->timer, on_timer, at > now ? at - now : 0, 0);
}


/* The pod's first slot in the future: now rounded down to the interval
 * grid, plus its phase. */
void scrape_io_schedule(struct scrape *s, struct spod *p)
{
    if (p->heap != SCRAPE_NO_HEAP || !p->ready || !p->url || s->closing)
        return;
    uint64_t iv = (uint64_t)s->cfg.interval_ms, now = uv_now(s->loop);
    p->due = now - now % iv + (uint64_t)p->phase;
    if (p->due <= now)
        p->due += iv;
    heap_push(s, p);
}

/* ---- logging ------------------------------------------------------------- */

static bool log_budget(struct scrape *s, int64_t stamp)
{
    if (stamp / 1000 != s->log_second) {
        s->log_second = stamp / 1000;
        s->log_lines = 0;
    }
    if (s->log_lines >= LOG_PER_SECOND) {
        s->log_dropped++;
        return false;
    }
    s->log_lines++;
    return true;
}

void scrape_io_log_failure(struct scrape *s, struct spod *p, int64_t stamp)
{
    if (p->st.fail == p->logged && stamp < p->log_after_ms) {
        p->quiet++;
        return;
    }
    if (!log_budget(s, stamp)) {
        p->quiet++;
        return;
    }
    char more[96] = "";
    if (p->quiet || s->log_dropped)
        snprintf(more, sizeof(more), " (%u earlier failures of this pod and %u other warnings not logged)",
                 p->quiet, s->log_dropped);
    LOGW_WARN("scrape", p->wl->ns, p->wl->name, "pod %s: scrape of %s failed (%s): %s%s", p->name,
              p->url ? p->url : "(no address)", scrape_fail_name(p->st.fail),
              scrape_podstate_error(&p->st), more);
    s->log_dropped = 0;
    p->quiet = 0;
    p->logged = p->st.fail;
    p->log_after_ms = stamp + LOG_EVERY_MS;
}

static void log_recovery(struct scrape *s, struct spod *p, int64_t stamp)
{
    if (p->logged == SCRAPE_FAIL_NONE)
        return;
    if (log_budget(s, stamp))
        LOGW_INFO("scrape", p->wl->ns, p->wl->name, "pod %s: scraped again after failures",
                  p->name);
    p->logged = SCRAPE_FAIL_NONE;
    p->quiet = 0;
    p->log_after_ms = 0;
}

/* ---- one scrape ---------------------------------------------------------- */

/* The pod's history must have been released into its window already. */
void scrape_io_pod_free(struct spod *p)
{
    scrape_podstate_free(&p->st, NULL);
    xfree(p->url);
    xfree(p);
}

static void maybe_closed(struct scrape *s)
{
    if (!s->closing || !s->timer_closed || s->inflight || s->clients_open)
        return;
    scrape_close_cb cb = s->close_cb;
    void *arg = s->close_arg;
    while (s->npool) {
        struct scrape_extract *x = s->pool[--s->npool];
        scrape_extract_free(x);
        xfree(x);
    }
    xfree(s->heap);
    xfree(s->wls);
    xfree(s->specs);
    xfree(s);
    if (cb)
        cb(arg);
}

static int on_data(struct httpc_req *req, long status, const char *data, size_t len, void *arg)
{
    struct spod *p = arg;
    (void)status;
    p->s->stats.bytes += len;
    if (!p->x->parser) /* the first chunk: the headers are in, pick the format */
        scrape_extract_set_format(
            p->x, prom_format_from_content_type(httpc_req_content_type(req)));
    return scrape_extract_feed(p->x, data, len);
}

static void record_failure(struct scrape *s, struct spod *p, int64_t stamp, enum scrape_fail f,
                           const char *msg)
{
    scrape_podstate_fail(&p->st, stamp, f, msg);
    s->stats.scrapes_failed++;
    scrape_io_log_failure(s, p, stamp);
}

/* An extractor for spec: a pooled one (its parser kept when it wants the
 * same names) or a new one. */
static struct scrape_extract *extract_take(struct scrape *s, const struct scrape_spec *spec)
{
    if (s->npool) {
        struct scrape_extract *x = s->pool[--s->npool];
        scrape_extract_reuse(x, spec, s->cfg.max_bytes);
        return x;
    }
    struct scrape_extract *x = xmalloc(sizeof(*x));
    scrape_extract_init(x, spec, s->cfg.max_bytes);
    return x;
}

static void extract_give(struct scrape *s, struct scrape_extract *x)
{
    if (s->npool < SCRAPE_POOL_EXTRACT && !s->closing) {
        s->pool[s->npool++] = x;
        return;
    }
    scrape_extract_free(x);
    xfree(x);
}

/* Moving maximum of a workload's body sizes: follows a larger body at once,
 * a smaller one slowly. */
static void note_body(struct swl *w, size_t bytes)
{
    if (bytes >= w->body)
        w->body = bytes;
    else
        w->body -= (w->body - bytes) / 16;
}

/* curl's receive buffer for a workload: its bodies plus room for the header
 * block, in whole 4 KiB pages (so pooled handles rarely change size). */
static size_t recv_buffer(const struct swl *w)
{
    if (!w->body)
        return 0; /* not known yet: libcurl's default */
    size_t b = (w->body + 1024 + RECV_MIN - 1) / RECV_MIN * RECV_MIN;
    return b > RECV_MAX ? RECV_MAX : b;
}

static void on_done(struct httpc_req *req, int err, const struct httpc_resp *resp, void *arg)
{
    struct spod *p = arg;
    struct scrape *s = p->s;
    struct scrape_extract *x = p->x;
    (void)req;
    bool discard = p->discard;
    p->x = NULL;
    p->req = NULL;
    p->discard = false;
    s->inflight--;
    if (!p->wl || err == -ECANCELED || discard) {
        /* dropped, closing, or asked before the pod left the backlog or
         * moved (targets.c): no result */
        if (!p->wl)
            scrape_io_pod_free(p);
        goto out;
    }
    /* moving average of durations (1/16 weight), for the in-flight limit */
    double ms = (double)(uv_now(s->loop) - p->started);
    s->duration_ms += (ms - s->duration_ms) / 16.0;

    int64_t stamp = scrape_io_now(s);
    char msg[200];
    enum scrape_fail f = SCRAPE_FAIL_NONE;
    if (err == 0 && resp->status >= 200 && resp->status < 300) {
        int rc = scrape_extract_finish(x);
        if (rc == 0) {
            note_body(p->wl, x->bytes);
            scrape_podstate_ok(&p->st, &p->wl->win, p->started_ms, &x->s);
            if (p->st.fail == SCRAPE_FAIL_NONE) {
                scrape_io_scraped(p);
                s->stats.scrapes_ok++;
                log_recovery(s, p, stamp);
            } else { /* the sample itself was refused */
                s->stats.scrapes_failed++;
                scrape_io_log_failure(s, p, stamp);
            }
            goto out;
        }
        f = rc == -EMSGSIZE ? SCRAPE_FAIL_TOO_BIG : SCRAPE_FAIL_GARBAGE;
        snprintf(msg, sizeof(msg), "%s", x->errmsg);
    } else if (err == 0) {
        f = SCRAPE_FAIL_HTTP;
        snprintf(msg, sizeof(msg), "HTTP status %ld", resp->status);
    } else {
        switch (err) {
        case -EMSGSIZE:
            f = SCRAPE_FAIL_TOO_BIG;
            snprintf(msg, sizeof(msg), "%s", x->err ? x->errmsg : "response over the size cap");
            break;
        case -EBADMSG:
            f = SCRAPE_FAIL_GARBAGE;
            snprintf(msg, sizeof(msg), "%s", x->errmsg);
            break;
        case -ETIMEDOUT:
            f = SCRAPE_FAIL_TIMEOUT;
            snprintf(msg, sizeof(msg), "no complete answer within %lld ms (%s)",
                     (long long)s->cfg.timeout_ms, resp->errmsg);
            break;
        case -ECONNREFUSED:
        case -EHOSTUNREACH:
            f = SCRAPE_FAIL_REFUSED;
            snprintf(msg, sizeof(msg), "%s", resp->errmsg);
            break;
        case -ECONNRESET:
            f = SCRAPE_FAIL_TRUNCATED;
            snprintf(msg, sizeof(msg), "connection dropped mid-answer (%s)", resp->errmsg);
            break;
        default:
            f = SCRAPE_FAIL_OTHER;
            snprintf(msg, sizeof(msg), "%s (%s)", resp->errmsg, strerror(-err));
            break;
        }
    }
    record_failure(s, p, stamp, f, msg);
out:
    if (x)
        extract_give(s, x);
    if (!s->closing && s->nheap && s->heap[0]->due <= uv_now(s->loop) &&
        !uv_is_active((uv_handle_t *)&s->timer))
        scrape_io_arm(s); /* a slot is free: start the next due pods */
    maybe_closed(s);
}

static void start(struct scrape *s, struct spod *p, int64_t stamp)
{
    static const struct httpc_tls pod_tls = {.insecure = true};
    bool https = strcmp(p->wl->sp->spec.scheme, "https") == 0;
    struct scrape_extract *x = extract_take(s, &p->wl->sp->spec);
    struct httpc_opts o = {
        .url = p->url,
        .headers = accept_hdr,
        .timeout_ms = s->cfg.timeout_ms,
        .connect_timeout_ms = s->cfg.timeout_ms,
        .max_body = ERROR_BODY_MAX,
        .on_data = on_data,
        .no_compression = true,
        /* a TLS handshake per scrape would cost more than the idle connection */
        .no_reuse = !https,
        .recv_buffer = recv_buffer(p->wl),
        .tls = https ? &pod_tls : NULL,
        /* straight to the pod, as Prometheus scrapes: an HTTPS_PROXY meant for
         * egress would otherwise carry https scrapes (plain ones never use it) */
        .no_proxy = true,
    };
    p->x = x;
    p->started_ms = stamp;
    p->started = uv_now(s->loop);
    int rc = httpc_request(s->clients[p->client], &o, on_done, p, &p->req);
    if (rc < 0) {
        p->x = NULL;
        p->req = NULL;
        extract_give(s, x);
        char msg[96];
        snprintf(msg, sizeof(msg), "cannot start the request: %s", strerror(-rc));
        record_failure(s, p, stamp, SCRAPE_FAIL_OTHER, msg);
        return;
    }
    s->inflight++;
    if (s->inflight > s->stats.inflight_peak)
        s->stats.inflight_peak = s->inflight;
}

static void on_timer(uv_timer_t *t)
{
    struct scrape *s = util_container_of(t, struct scrape, timer);
    uint64_t now = uv_now(s->loop), iv = (uint64_t)s->cfg.interval_ms;
    int64_t stamp = scrape_io_now(s);
    size_t limit = inflight_limit(s);
    int started = 0;
    while (s->nheap && s->heap[0]->due <= now && started < START_BATCH) {
        struct spod *p = s->heap[0];
        if (!p->req && s->inflight >= limit) {
            s->stats.deferred++; /* waits for a scrape to finish (on_done re-arms) */
            break;
        }
        uint64_t delay = now - p->due;
        if ((int64_t)delay > s->stats.delay_max_ms)
            s->stats.delay_max_ms = (int64_t)delay;
        if (delay >= iv)
            s->stats.late++;
        if (p->req) {
            s->stats.skipped++;
        } else {
            start(s, p, stamp);
            started++;
        }
        p->due += iv;
        if (p->due <= now)
            p->due += ((now - p->due) / iv + 1) * iv;
        sift_down(s, 0);
    }
    scrape_io_arm(s);
}

/* ---- lifecycle ----------------------------------------------------------- */

int scrape_new(uv_loop_t *loop, struct httpc *h, const struct scrape_config *cfg,
               struct scrape **out)
{
    *out = NULL;
    struct scrape_config c;
    scrape_config_init(&c);
    if (cfg)
        c = *cfg;
    if (c.clients == 0)
        c.clients = SCRAPE_DEFAULT_CLIENTS;
    if (c.max_inflight == 0)
        c.max_inflight = SCRAPE_DEFAULT_MAX_INFLIGHT;
    if (!loop || !h || c.interval_ms <= 0 || c.timeout_ms <= 0 || c.rate_window_ms <= 0 ||
        c.max_bytes == 0 || c.clients < 1 || c.clients > SCRAPE_MAX_CLIENTS)
        return -EINVAL;
    struct scrape *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->cfg = c;
    s->ring_cap = scrape_ring_cap(c.rate_window_ms, c.interval_ms);
    s->duration_ms = 10; /* a guess until scrapes have finished */
    s->clients[0] = h;
    s->nclients = 1;
    for (int i = 1; i < c.clients; i++) {
        int rc = httpc_new(loop, &s->clients[i]);
        if (rc == 0) { /* one kept-alive connection per HTTPS pod it scrapes */
            httpc_set_max_idle_connections(s->clients[i], 4096);
            httpc_set_handle_pool(s->clients[i], POOL_HANDLES);
        }
        if (rc < 0) {
            for (int j = 1; j < i; j++)
                httpc_close(s->clients[j], NULL, NULL);
            xfree(s);
            return rc;
        }
        s->nclients++;
    }
    uv_timer_init(loop, &s->timer);
    *out = s;
    return 0;
}

/* Heap bytes of the scraper's own state (struct sizes and the arrays and
 * strings they own; allocator overhead not included). */
static size_t memory(const struct scrape *s)
{
    size_t n = sizeof(*s) + s->capheap * sizeof(*s->heap) + s->nwls * sizeof(*s->wls) +
               s->nspecs * (sizeof(*s->specs) + sizeof(struct sspec));
    n += (s->inflight + s->npool) * sizeof(struct scrape_extract); /* parsers not counted */
    for (size_t i = 0; i < s->nwls; i++) {
        const struct swl *w = s->wls[i];
        n += sizeof(*w) + strlen(w->ns) + strlen(w->name) + 2 + scrape_window_memory(&w->win) +
             w->npods * sizeof(*w->pods) + w->ngone * sizeof(*w->gone);
        for (size_t j = 0; j < w->ngone; j++)
            n += scrape_podstate_memory(&w->gone[j]);
        for (size_t j = 0; j < w->npods; j++) {
            const struct spod *p = w->pods[j];
            n += sizeof(*p) + strlen(p->name) + 1 + (p->url ? strlen(p->url) + 1 : 0) +
                 scrape_podstate_memory(&p->st);
        }
    }
    return n;
}

void scrape_stats(const struct scrape *s, struct scrape_stats *out)
{
    *out = s->stats;
    out->pods = s->npods;
    out->scheduled = s->nheap;
    out->inflight = s->inflight;
    out->inflight_limit = inflight_limit(s);
    out->duration_ms = s->duration_ms;
    out->memory_bytes = memory(s);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct scrape *s = util_container_of((uv_timer_t *)h, struct scrape, timer);
    s->timer_closed = true;
    maybe_closed(s);
}

static void on_client_closed(void *arg)
{
    struct scrape *s = arg;
    s->clients_open--;
    maybe_closed(s);
}

void scrape_close(struct scrape *s, scrape_close_cb cb, void *arg)
{
    s->closing = true;
    s->close_cb = cb;
    s->close_arg = arg;
    for (size_t i = 0; i < s->nwls; i++)
        scrape_io_wl_free(s, s->wls[i]);
    s->nwls = 0;
    uv_close((uv_handle_t *)&s->timer, on_timer_closed);
    /* our own clients: their cancelled requests complete first, then they close */
    for (int i = 1; i < s->nclients; i++) {
        s->clients_open++;
        httpc_close(s->clients[i], on_client_closed, s);
    }
}

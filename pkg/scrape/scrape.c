/* SPDX-License-Identifier: Apache-2.0 */
/* scrape: the I/O half of the scraper (see scrape.h): a schedule of every
 * ready pod, requests through httpc on the loop, bodies streamed into the
 * extractor, results recorded in each pod's history.
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
#include "scrape-int.h"
#include "util/util.h"

#define NO_HEAP UINT32_MAX
/** Most httpc clients the pods are spread over. */
#define MAX_CLIENTS 64
/** Most scrapes started by one timer callback, so one tick never starves the loop. */
#define START_BATCH 512
/** Due pods are started together on a grid of this many ms (fewer wake-ups). */
#define BATCH_MS 10
/** The in-flight limit's floor (see scrape_config.max_inflight). */
#define MIN_INFLIGHT 16
/** Idle extractors kept for the next scrapes. */
#define POOL_EXTRACT 32
/** Idle curl handles each of the scraper's httpc clients keeps. */
#define POOL_HANDLES 2
/** Bounds of curl's receive buffer, sized to a workload's recent bodies. */
#define RECV_MIN 4096
#define RECV_MAX ((size_t)512 << 10)
/** Cap on a non-2xx body (buffered by httpc, only its status matters). */
#define ERROR_BODY_MAX ((size_t)64 << 10)
/** A failing pod is logged again at most this often (same failure kind). */
#define LOG_EVERY_MS 300000
/** Scrape warnings per wall-clock second over all pods. */
#define LOG_PER_SECOND 20

struct swl;

/* One pod; about 170 bytes plus its name, URL and history. */
struct spod {
    struct scrape *s;
    struct swl *wl;            /* NULL once dropped while its request runs */
    char *url;                 /* NULL: no address (see why in st.error) */
    struct httpc_req *req;
    struct scrape_extract *x;  /* the running scrape's parser */
    uint64_t due;              /* loop time of the next slot */
    uint64_t started;          /* loop time the running scrape started */
    int64_t started_ms;        /* UNIX ms the running scrape started */
    int64_t log_after_ms;      /* rate limit of this pod's warnings */
    double gpus;
    struct scrape_podstate st;
    uint32_t heap;             /* index in s->heap or NO_HEAP */
    uint32_t phase;            /* ms within the interval */
    uint32_t quiet;            /* failures not logged since the last line */
    uint8_t client;            /* index in s->clients, stable for the pod's name */
    uint8_t logged;            /* enum scrape_fail last logged, NONE when healthy */
    bool ready;
    char name[];               /* the pod's name, allocated with the struct */
};

/* A workload spec, shared by the workloads that declare the same one (1,000
 * Deployments of one engine usually do). */
struct sspec {
    struct scrape_spec spec;
    unsigned refs;
};

struct swl {
    char *ns, *name;
    struct sspec *sp;          /* the spec, shared */
    struct scrape_window win;  /* latency increases over the rate window */
    struct spod **pods;        /* sorted by name */
    size_t npods;
    struct scrape_podstate *gone; /* pods deleted within the rate window: their requests */
    size_t ngone;
    double departed;           /* scrape_result.departed: gauges of pods that left */
    size_t body;               /* recent body size (moving maximum) */
};

struct scrape {
    uv_loop_t *loop;
    struct httpc *clients[MAX_CLIENTS]; /* [0] is the caller's, the rest ours */
    int nclients;
    int clients_open;          /* our own clients not yet closed */
    struct scrape_config cfg;
    unsigned ring_cap;         /* request samples kept per pod */
    uv_timer_t timer;
    struct swl **wls;
    size_t nwls;
    struct sspec **specs;      /* distinct specs in use */
    size_t nspecs;
    struct spod **heap;
    size_t nheap, capheap;
    size_t npods;
    size_t inflight;
    double duration_ms;        /* moving average of scrape durations */
    struct scrape_extract *pool[POOL_EXTRACT];
    size_t npool;
    struct scrape_stats stats;
    int64_t log_second;        /* budget of warnings per second */
    int log_lines;
    unsigned log_dropped;
    bool closing, timer_closed;
    scrape_close_cb close_cb;
    void *close_arg;
};

static const char *const accept_hdr[] = {
    "Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1", NULL,
};

static int64_t wall_now(const struct scrape *s)
{
    return s->cfg.clock ? s->cfg.clock(s->cfg.clock_arg) : util_now_unix_ms();
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

static void heap_remove(struct scrape *s, struct spod *p)
{
    size_t i = p->heap;
    if (i == NO_HEAP)
        return;
    p->heap = NO_HEAP;
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
static void arm(struct scrape *s)
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

/* A stable 64-bit hash of the pod's identity: its phase and its client. */
static uint64_t pod_hash(const char *ns, const char *wl, const char *pod)
{
    uint64_t h = 1469598103934665603ULL;
    const char *parts[] = {ns, "/", wl, "/", pod};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(parts); i++)
        for (const unsigned char *c = (const unsigned char *)parts[i]; *c; c++)
            h = (h ^ *c) * 1099511628211ULL;
    h ^= h >> 33; /* splitmix64 finaliser: spread similar names apart */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* The pod's first slot in the future: now rounded down to the interval
 * grid, plus its phase. */
static void schedule(struct scrape *s, struct spod *p)
{
    if (p->heap != NO_HEAP || !p->ready || !p->url || s->closing)
        return;
    uint64_t iv = (uint64_t)s->cfg.interval_ms, now = uv_now(s->loop);
    p->due = now - now % iv + (uint64_t)p->phase;
    if (p->due <= now)
        p->due += iv;
    heap_push(s, p);
}

/* ---- logging ------------------------------------------------------------- */

static bool log_budget(struct scrape *s, int64_t wall)
{
    if (wall / 1000 != s->log_second) {
        s->log_second = wall / 1000;
        s->log_lines = 0;
    }
    if (s->log_lines >= LOG_PER_SECOND) {
        s->log_dropped++;
        return false;
    }
    s->log_lines++;
    return true;
}

static void log_failure(struct scrape *s, struct spod *p, int64_t wall)
{
    if (p->st.fail == p->logged && wall < p->log_after_ms) {
        p->quiet++;
        return;
    }
    if (!log_budget(s, wall)) {
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
    p->log_after_ms = wall + LOG_EVERY_MS;
}

static void log_recovery(struct scrape *s, struct spod *p, int64_t wall)
{
    if (p->logged == SCRAPE_FAIL_NONE)
        return;
    if (log_budget(s, wall))
        LOGW_INFO("scrape", p->wl->ns, p->wl->name, "pod %s: scraped again after failures",
                  p->name);
    p->logged = SCRAPE_FAIL_NONE;
    p->quiet = 0;
    p->log_after_ms = 0;
}

/* ---- one scrape ---------------------------------------------------------- */

/* The pod's history must have been released into its window already. */
static void pod_free(struct spod *p)
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

static void record_failure(struct scrape *s, struct spod *p, int64_t wall, enum scrape_fail f,
                           const char *msg)
{
    scrape_podstate_fail(&p->st, wall, f, msg);
    s->stats.scrapes_failed++;
    log_failure(s, p, wall);
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
    if (s->npool < POOL_EXTRACT && !s->closing) {
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
    p->x = NULL;
    p->req = NULL;
    s->inflight--;
    if (!p->wl || err == -ECANCELED) {
        /* dropped, closing, or superseded (address changed): no result */
        if (!p->wl)
            pod_free(p);
        goto out;
    }
    /* moving average of durations (1/16 weight), for the in-flight limit */
    double ms = (double)(uv_now(s->loop) - p->started);
    s->duration_ms += (ms - s->duration_ms) / 16.0;

    int64_t wall = wall_now(s);
    char msg[200];
    enum scrape_fail f = SCRAPE_FAIL_NONE;
    if (err == 0 && resp->status >= 200 && resp->status < 300) {
        int rc = scrape_extract_finish(x);
        if (rc == 0) {
            note_body(p->wl, x->bytes);
            scrape_podstate_ok(&p->st, &p->wl->win, p->started_ms, &x->s);
            if (p->st.fail == SCRAPE_FAIL_NONE) {
                s->stats.scrapes_ok++;
                log_recovery(s, p, wall);
            } else { /* the sample itself was refused */
                s->stats.scrapes_failed++;
                log_failure(s, p, wall);
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
    record_failure(s, p, wall, f, msg);
out:
    if (x)
        extract_give(s, x);
    if (!s->closing && s->nheap && s->heap[0]->due <= uv_now(s->loop) &&
        !uv_is_active((uv_handle_t *)&s->timer))
        arm(s); /* a slot is free: start the next due pods */
    maybe_closed(s);
}

static void start(struct scrape *s, struct spod *p, int64_t wall)
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
    };
    p->x = x;
    p->started_ms = wall;
    p->started = uv_now(s->loop);
    int rc = httpc_request(s->clients[p->client], &o, on_done, p, &p->req);
    if (rc < 0) {
        p->x = NULL;
        p->req = NULL;
        extract_give(s, x);
        char msg[96];
        snprintf(msg, sizeof(msg), "cannot start the request: %s", strerror(-rc));
        record_failure(s, p, wall, SCRAPE_FAIL_OTHER, msg);
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
    int64_t wall = wall_now(s);
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
            start(s, p, wall);
            started++;
        }
        p->due += iv;
        if (p->due <= now)
            p->due += ((now - p->due) / iv + 1) * iv;
        sift_down(s, 0);
    }
    arm(s);
}

/* ---- targets ------------------------------------------------------------- */

static char *make_url(const struct scrape_spec *spec, const struct scrape_pod *pod, char *why,
                      size_t whylen)
{
    int port = pod->port > 0 ? pod->port : spec->port;
    if (!pod->ip || !pod->ip[0]) {
        snprintf(why, whylen, "the pod has no IP address");
        return NULL;
    }
    if (port <= 0 || port > 65535) {
        snprintf(why, whylen, "no metrics port known for the pod");
        return NULL;
    }
    bool v6 = strchr(pod->ip, ':') != NULL;
    const char *path = spec->path[0] ? spec->path : "/metrics";
    return xasprintf("%s://%s%s%s:%d%s%s", spec->scheme[0] ? spec->scheme : "http", v6 ? "[" : "",
                     pod->ip, v6 ? "]" : "", port, path[0] == '/' ? "" : "/", path);
}

/* The pod leaves the backlog (aggregate.c): the running and waiting requests
 * its latest gauges counted there finish unseen, so they move to the
 * workload's departed sum (the backlog's growth is the arrivals less the
 * completions seen, and they were counted as arrivals when they came), and
 * the gauges are spent: they count again only from the pod's next scrape. */
static void depart(struct scrape *s, struct swl *w, struct scrape_podstate *st, int64_t wall)
{
    double run, wait;
    scrape_podstate_backlog(st, &w->sp->spec, wall, s->cfg.interval_ms, &run, &wait);
    if (run > 0)
        w->departed += run;
    if (wait > 0)
        w->departed += wait;
    st->has_inflight = st->has_queued = false;
}

/* Take the pod's address; a new one (or the first) starts its history afresh. */
static void set_address(struct scrape *s, struct spod *p, const struct scrape_pod *in,
                        int64_t wall, bool first)
{
    char why[96] = "";
    char *url = make_url(&p->wl->sp->spec, in, why, sizeof(why));
    bool same = (url == NULL && p->url == NULL) || (url && p->url && strcmp(url, p->url) == 0);
    if (same && !first) {
        xfree(url);
        return;
    }
    xfree(p->url);
    p->url = url;
    if (!first)
        depart(s, p->wl, &p->st, wall);
    scrape_podstate_reset(&p->st, &p->wl->win, wall);
    if (p->req)
        httpc_cancel(p->req); /* an answer from the old address must not count */
    heap_remove(s, p);
    if (!url) {
        scrape_podstate_fail(&p->st, wall, SCRAPE_FAIL_OTHER, why);
        if (p->ready)
            log_failure(s, p, wall);
    }
}

static struct spod *pod_new(struct scrape *s, struct swl *w, const struct scrape_pod *in,
                            int64_t wall)
{
    size_t nl = strlen(in->name);
    struct spod *p = xcalloc(1, sizeof(*p) + nl + 1);
    memcpy(p->name, in->name, nl + 1);
    p->s = s;
    p->wl = w;
    p->heap = NO_HEAP;
    uint64_t h = pod_hash(w->ns, w->name, in->name);
    p->phase = (uint32_t)(h % (uint64_t)s->cfg.interval_ms);
    p->client = (uint8_t)((h >> 40) % (uint64_t)s->nclients);
    scrape_podstate_init(&p->st, wall, s->ring_cap);
    p->ready = in->ready;
    p->gpus = in->gpus;
    set_address(s, p, in, wall, true);
    schedule(s, p);
    s->npods++;
    return p;
}

static void pod_drop(struct scrape *s, struct spod *p)
{
    heap_remove(s, p);
    s->npods--;
    scrape_podstate_free(&p->st, &p->wl->win); /* its columns go back to the window */
    if (p->req) {
        p->wl = NULL;
        httpc_cancel(p->req);
    } else {
        pod_free(p);
    }
}

/* A pod that is no longer a target: the requests it served in the window
 * keep counting until they age out (aggregate.c), the rest goes. */
static void pod_leave(struct scrape *s, struct swl *w, struct spod *p, int64_t wall)
{
    if (p->ready)
        depart(s, w, &p->st, wall);
    if (p->st.requests.n >= 2) {
        w->gone = xrealloc(w->gone, (w->ngone + 1) * sizeof(*w->gone));
        scrape_podstate_retire(&w->gone[w->ngone++], &p->st, &w->win);
    }
    pod_drop(s, p);
}

/* Forget the pods that left whose newest sample is out of the window (all
 * of them with all = true). */
static void gone_expire(struct swl *w, int64_t wall, int64_t window_ms, bool all)
{
    size_t k = 0;
    for (size_t i = 0; i < w->ngone; i++) {
        if (all || scrape_ring_newest(&w->gone[i].requests) <= wall - window_ms)
            scrape_podstate_free(&w->gone[i], NULL);
        else
            w->gone[k++] = w->gone[i];
    }
    w->ngone = k;
    if (k == 0) {
        xfree(w->gone);
        w->gone = NULL;
    }
}

static void pod_update(struct scrape *s, struct spod *p, const struct scrape_pod *in,
                       int64_t wall, bool metrics_changed)
{
    p->gpus = in->gpus;
    set_address(s, p, in, wall, false);
    if (metrics_changed)
        scrape_podstate_reset(&p->st, &p->wl->win, wall);
    if (in->ready && !p->ready) {
        /* ready again: a new warm-up, the old samples stay for the window */
        p->st.since_ms = wall;
        p->st.ok_count = 0;
    }
    if (p->ready && !in->ready)
        depart(s, p->wl, &p->st, wall);
    p->ready = in->ready;
    if (!p->ready)
        heap_remove(s, p);
    else
        schedule(s, p);
}

static struct swl *find_wl(const struct scrape *s, const char *ns, const char *name, size_t *idx)
{
    for (size_t i = 0; i < s->nwls; i++) {
        if (strcmp(s->wls[i]->ns, ns) == 0 && strcmp(s->wls[i]->name, name) == 0) {
            if (idx)
                *idx = i;
            return s->wls[i];
        }
    }
    return NULL;
}

static int cmp_pod(const void *a, const void *b)
{
    const struct scrape_pod *x = *(const struct scrape_pod *const *)a;
    const struct scrape_pod *y = *(const struct scrape_pod *const *)b;
    return strcmp(x->name, y->name);
}

static bool same_metrics(const struct scrape_spec *a, const struct scrape_spec *b)
{
    return a->profile == b->profile && strcmp(a->request_metric, b->request_metric) == 0 &&
           strcmp(a->inflight_metric, b->inflight_metric) == 0 &&
           strcmp(a->queue_metric, b->queue_metric) == 0 &&
           strcmp(a->latency_metric, b->latency_metric) == 0 &&
           strcmp(a->prompt_token_metric, b->prompt_token_metric) == 0 &&
           strcmp(a->generation_token_metric, b->generation_token_metric) == 0 &&
           strcmp(a->busy_metric, b->busy_metric) == 0;
}

static bool same_spec(const struct scrape_spec *a, const struct scrape_spec *b)
{
    return same_metrics(a, b) && a->port == b->port && a->missing_fraction == b->missing_fraction &&
           strcmp(a->scheme, b->scheme) == 0 && strcmp(a->path, b->path) == 0;
}

/* The shared copy of a normalised spec (one more user). */
static struct sspec *spec_get(struct scrape *s, const struct scrape_spec *norm)
{
    for (size_t i = 0; i < s->nspecs; i++) {
        if (same_spec(&s->specs[i]->spec, norm)) {
            s->specs[i]->refs++;
            return s->specs[i];
        }
    }
    struct sspec *sp = xmalloc(sizeof(*sp));
    sp->spec = *norm;
    sp->refs = 1;
    s->specs = xrealloc(s->specs, (s->nspecs + 1) * sizeof(*s->specs));
    s->specs[s->nspecs++] = sp;
    return sp;
}

static void spec_put(struct scrape *s, struct sspec *sp)
{
    if (--sp->refs > 0)
        return;
    for (size_t i = 0; i < s->nspecs; i++) {
        if (s->specs[i] == sp) {
            s->specs[i] = s->specs[--s->nspecs];
            break;
        }
    }
    xfree(sp);
}

static void copy_spec(struct scrape_spec *dst, const struct scrape_spec *src)
{
    *dst = *src;
    dst->scheme[sizeof(dst->scheme) - 1] = '\0';
    dst->path[sizeof(dst->path) - 1] = '\0';
    dst->request_metric[sizeof(dst->request_metric) - 1] = '\0';
    dst->inflight_metric[sizeof(dst->inflight_metric) - 1] = '\0';
    dst->queue_metric[sizeof(dst->queue_metric) - 1] = '\0';
    dst->latency_metric[sizeof(dst->latency_metric) - 1] = '\0';
    dst->prompt_token_metric[sizeof(dst->prompt_token_metric) - 1] = '\0';
    dst->generation_token_metric[sizeof(dst->generation_token_metric) - 1] = '\0';
    dst->busy_metric[sizeof(dst->busy_metric) - 1] = '\0';
    if (!(dst->missing_fraction >= 0 && dst->missing_fraction <= 1))
        dst->missing_fraction = 0.3;
}

void scrape_set_targets(struct scrape *s, const char *ns, const char *name,
                        const struct scrape_spec *spec, const struct scrape_pod *pods,
                        size_t npods)
{
    if (s->closing)
        return;
    /* new pods are placed from now, not from the loop's cached time, which a long pass
     * over every workload leaves behind (their first slot would look late) */
    uv_update_time(s->loop);
    int64_t wall = wall_now(s);
    struct swl *w = find_wl(s, ns, name, NULL);
    bool metrics_changed = false;
    struct scrape_spec norm;
    copy_spec(&norm, spec);
    if (!w) {
        w = xcalloc(1, sizeof(*w));
        w->ns = xstrdup(ns);
        w->name = xstrdup(name);
        w->sp = spec_get(s, &norm);
        scrape_window_init(&w->win, s->cfg.interval_ms, s->cfg.rate_window_ms);
        s->wls = xrealloc(s->wls, (s->nwls + 1) * sizeof(*s->wls));
        s->wls[s->nwls++] = w;
    } else if (!same_spec(&w->sp->spec, &norm)) {
        metrics_changed = !same_metrics(&w->sp->spec, &norm);
        struct sspec *old = w->sp;
        w->sp = spec_get(s, &norm);
        spec_put(s, old);
    }

    const struct scrape_pod **in = xmalloc((npods ? npods : 1) * sizeof(*in));
    size_t nin = 0;
    for (size_t i = 0; i < npods; i++)
        if (pods[i].name && pods[i].name[0])
            in[nin++] = &pods[i];
    qsort(in, nin, sizeof(*in), cmp_pod);

    struct spod **out = xmalloc((nin + w->npods + 1) * sizeof(*out));
    size_t nout = 0, i = 0, j = 0;
    while (i < w->npods || j < nin) {
        if (j < nin && j > 0 && strcmp(in[j]->name, in[j - 1]->name) == 0) {
            j++; /* a duplicate name: the first one wins */
            continue;
        }
        int c = i == w->npods ? 1 : j == nin ? -1 : strcmp(w->pods[i]->name, in[j]->name);
        if (c < 0) {
            pod_leave(s, w, w->pods[i++], wall);
        } else if (c > 0) {
            out[nout++] = pod_new(s, w, in[j++], wall);
        } else {
            pod_update(s, w->pods[i], in[j++], wall, metrics_changed);
            out[nout++] = w->pods[i++];
        }
    }
    xfree(w->pods);
    xfree(in);
    w->pods = xrealloc(out, (nout ? nout : 1) * sizeof(*out));
    w->npods = nout;
    /* the increases of another metric count no more */
    gone_expire(w, wall, s->cfg.rate_window_ms, metrics_changed);
    if (metrics_changed) /* the pods released theirs */
        scrape_window_clear(&w->win);
    arm(s);
}

static void wl_free(struct scrape *s, struct swl *w)
{
    for (size_t i = 0; i < w->npods; i++)
        pod_drop(s, w->pods[i]);
    gone_expire(w, 0, 0, true);
    scrape_window_free(&w->win);
    spec_put(s, w->sp);
    xfree(w->pods);
    xfree(w->ns);
    xfree(w->name);
    xfree(w);
}

void scrape_forget(struct scrape *s, const char *ns, const char *name)
{
    size_t idx;
    struct swl *w = find_wl(s, ns, name, &idx);
    if (!w)
        return;
    s->wls[idx] = s->wls[--s->nwls];
    wl_free(s, w);
    arm(s);
}

int scrape_get(struct scrape *s, const char *ns, const char *name, int64_t now_ms,
               struct scrape_result *out)
{
    struct swl *w = find_wl(s, ns, name, NULL);
    if (!w)
        return -ENOENT;
    /* A ready pod whose scrapes have failed for 3 intervals leaves the
     * backlog here (scrape_podstate_backlog), and its requests depart as a
     * leaving pod's do: the gauges of its last good scrape, which the backlog
     * counted until now. Dropped without, they would count as negative
     * arrivals (a pod stops answering when it is overloaded); when it answers
     * again its gauges count as new requests, a rise, the safe side. */
    for (size_t i = 0; i < w->npods; i++) {
        struct scrape_podstate *st = &w->pods[i]->st;
        double run, wait, run0, wait0;
        scrape_podstate_backlog(st, &w->sp->spec, now_ms, s->cfg.interval_ms, &run, &wait);
        scrape_podstate_backlog(st, &w->sp->spec, st->last_ok_ms, s->cfg.interval_ms, &run0,
                                &wait0);
        if (w->pods[i]->ready && isnan(run) && isnan(wait) && !(isnan(run0) && isnan(wait0)))
            depart(s, w, st, st->last_ok_ms);
    }
    /* the ready pods, and those that left (no longer Ready, or deleted) for
     * the requests they served in the window */
    struct scrape_agg_pod *ap = xmalloc((w->npods + w->ngone + 1) * sizeof(*ap));
    size_t n = 0;
    for (size_t i = 0; i < w->npods; i++)
        ap[n++] = (struct scrape_agg_pod){&w->pods[i]->st, w->pods[i]->gpus, !w->pods[i]->ready};
    for (size_t i = 0; i < w->ngone; i++)
        ap[n++] = (struct scrape_agg_pod){&w->gone[i], 0, true};
    scrape_aggregate(ap, n, &w->win, &w->sp->spec, now_ms, s->cfg.interval_ms,
                     s->cfg.rate_window_ms, out);
    out->departed = w->departed;
    xfree(ap);
    return 0;
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
        c.max_bytes == 0 || c.clients < 1 || c.clients > MAX_CLIENTS)
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
        wl_free(s, s->wls[i]);
    s->nwls = 0;
    uv_close((uv_handle_t *)&s->timer, on_timer_closed);
    /* our own clients: their cancelled requests complete first, then they close */
    for (int i = 1; i < s->nclients; i++) {
        s->clients_open++;
        httpc_close(s->clients[i], on_client_closed, s);
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* scrape: the I/O half of the scraper (see scrape.h): a schedule of every
 * ready pod, requests through httpc on the loop, bodies streamed into the
 * extractor, results recorded in each pod's history.
 *
 * Schedule: one uv_timer and a binary min-heap of pods by due time (loop
 * time, ms). Each pod has a stable pseudo-random phase within the interval
 * (a hash of namespace/deployment/pod), so 10,000 pods spread evenly over the
 * interval and keep their slot from tick to tick; the next slot is the last
 * one plus the interval, never "now + interval", so the schedule does not
 * drift. A slot that is already more than one interval in the past is
 * counted late and skipped to the next one in the future.
 *
 * Ownership: pods belong to their workload. A pod dropped (or the whole
 * scraper closed) while its request runs is detached (wl = NULL), the
 * request cancelled, and the pod freed by the completion callback, which
 * httpc always delivers exactly once. scrape_close frees the scraper after
 * its timer closed and the last callback ran. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpc/httpc.h"
#include "scrape-int.h"
#include "util/util.h"

#define NO_HEAP ((size_t)-1)
/** Most httpc clients the pods are spread over. */
#define MAX_CLIENTS 64
/** Most scrapes started by one timer callback, so one tick never starves the loop. */
#define START_BATCH 512
/** Cap on a non-2xx body (buffered by httpc, only its status matters). */
#define ERROR_BODY_MAX ((size_t)64 << 10)
/** A failing pod is logged again at most this often (same failure kind). */
#define LOG_EVERY_MS 300000
/** Scrape warnings per wall-clock second over all pods. */
#define LOG_PER_SECOND 20

struct swl;

struct spod {
    struct scrape *s;
    struct swl *wl;            /* NULL once dropped while its request runs */
    char *name;
    char *url;                 /* NULL: no address (see why in st.error) */
    double gpus;
    bool ready;
    size_t heap;               /* index in s->heap or NO_HEAP */
    uint64_t phase;            /* ms within the interval */
    unsigned client;           /* index in s->clients, stable for the pod's name */
    uint64_t due;              /* loop time of the next slot */
    struct httpc_req *req;
    struct scrape_extract *x;  /* the running scrape's parser */
    int64_t started_ms;        /* UNIX ms the running scrape started */
    struct scrape_podstate st;
    int64_t log_after_ms;      /* rate limit of this pod's warnings */
    enum scrape_fail logged;   /* failure kind last logged, NONE when healthy */
    unsigned quiet;            /* failures not logged since the last line */
};

struct swl {
    char *ns, *name;
    struct scrape_spec spec;
    struct spod **pods;        /* sorted by name */
    size_t npods;
};

struct scrape {
    uv_loop_t *loop;
    struct httpc *clients[MAX_CLIENTS]; /* [0] is the caller's, the rest ours */
    int nclients;
    int clients_open;          /* our own clients not yet closed */
    struct scrape_config cfg;
    uv_timer_t timer;
    struct swl **wls;
    size_t nwls;
    struct spod **heap;
    size_t nheap, capheap;
    size_t npods;
    size_t inflight;
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
    p->heap = i;
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

static void arm(struct scrape *s)
{
    if (s->closing)
        return;
    if (s->nheap == 0) {
        uv_timer_stop(&s->timer);
        return;
    }
    uint64_t now = uv_now(s->loop), due = s->heap[0]->due;
    uv_timer_start(&s->timer, on_timer, due > now ? due - now : 0, 0);
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
    p->due = now - now % iv + p->phase;
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
              p->url ? p->url : "(no address)", scrape_fail_name(p->st.fail), p->st.error, more);
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

static void pod_free(struct spod *p)
{
    scrape_podstate_free(&p->st);
    xfree(p->name);
    xfree(p->url);
    xfree(p);
}

static void maybe_closed(struct scrape *s)
{
    if (!s->closing || !s->timer_closed || s->inflight || s->clients_open)
        return;
    scrape_close_cb cb = s->close_cb;
    void *arg = s->close_arg;
    xfree(s->heap);
    xfree(s->wls);
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

    int64_t wall = wall_now(s);
    char msg[200];
    enum scrape_fail f = SCRAPE_FAIL_NONE;
    if (err == 0 && resp->status >= 200 && resp->status < 300) {
        int rc = scrape_extract_finish(x);
        if (rc == 0) {
            scrape_podstate_ok(&p->st, p->started_ms, &x->s);
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
    if (x) {
        scrape_extract_free(x);
        xfree(x);
    }
    maybe_closed(s);
}

static void start(struct scrape *s, struct spod *p, int64_t wall)
{
    static const struct httpc_tls pod_tls = {.insecure = true};
    struct scrape_extract *x = xmalloc(sizeof(*x));
    scrape_extract_init(x, &p->wl->spec, s->cfg.max_bytes);
    struct httpc_opts o = {
        .url = p->url,
        .headers = accept_hdr,
        .timeout_ms = s->cfg.timeout_ms,
        .connect_timeout_ms = s->cfg.timeout_ms,
        .max_body = ERROR_BODY_MAX,
        .on_data = on_data,
        .no_compression = true,
        .tls = strcmp(p->wl->spec.scheme, "https") == 0 ? &pod_tls : NULL,
    };
    p->x = x;
    p->started_ms = wall;
    int rc = httpc_request(s->clients[p->client], &o, on_done, p, &p->req);
    if (rc < 0) {
        p->x = NULL;
        p->req = NULL;
        scrape_extract_free(x);
        xfree(x);
        char msg[96];
        snprintf(msg, sizeof(msg), "cannot start the request: %s", strerror(-rc));
        record_failure(s, p, wall, SCRAPE_FAIL_OTHER, msg);
        return;
    }
    s->inflight++;
}

static void on_timer(uv_timer_t *t)
{
    struct scrape *s = util_container_of(t, struct scrape, timer);
    uint64_t now = uv_now(s->loop), iv = (uint64_t)s->cfg.interval_ms;
    int64_t wall = wall_now(s);
    int started = 0;
    while (s->nheap && s->heap[0]->due <= now && started < START_BATCH) {
        struct spod *p = s->heap[0];
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

/* Take the pod's address; a new one (or the first) starts its history afresh. */
static void set_address(struct scrape *s, struct spod *p, const struct scrape_pod *in,
                        int64_t wall, bool first)
{
    char why[96] = "";
    char *url = make_url(&p->wl->spec, in, why, sizeof(why));
    bool same = (url == NULL && p->url == NULL) || (url && p->url && strcmp(url, p->url) == 0);
    if (same && !first) {
        xfree(url);
        return;
    }
    xfree(p->url);
    p->url = url;
    scrape_podstate_reset(&p->st, wall);
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
    struct spod *p = xcalloc(1, sizeof(*p));
    p->s = s;
    p->wl = w;
    p->name = xstrdup(in->name);
    p->heap = NO_HEAP;
    uint64_t h = pod_hash(w->ns, w->name, in->name);
    p->phase = h % (uint64_t)s->cfg.interval_ms;
    p->client = (unsigned)((h >> 40) % (uint64_t)s->nclients);
    scrape_podstate_init(&p->st, wall);
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
    if (p->req) {
        p->wl = NULL;
        httpc_cancel(p->req);
    } else {
        pod_free(p);
    }
}

static void pod_update(struct scrape *s, struct spod *p, const struct scrape_pod *in,
                       int64_t wall, bool metrics_changed)
{
    p->gpus = in->gpus;
    set_address(s, p, in, wall, false);
    if (metrics_changed)
        scrape_podstate_reset(&p->st, wall);
    if (in->ready && !p->ready) {
        /* ready again: a new warm-up, the old samples stay for the window */
        p->st.since_ms = wall;
        p->st.ok_count = 0;
    }
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
           strcmp(a->generation_token_metric, b->generation_token_metric) == 0;
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
    if (!(dst->missing_fraction >= 0 && dst->missing_fraction <= 1))
        dst->missing_fraction = 0.3;
}

void scrape_set_targets(struct scrape *s, const char *ns, const char *name,
                        const struct scrape_spec *spec, const struct scrape_pod *pods,
                        size_t npods)
{
    if (s->closing)
        return;
    int64_t wall = wall_now(s);
    struct swl *w = find_wl(s, ns, name, NULL);
    bool metrics_changed = false;
    if (!w) {
        w = xcalloc(1, sizeof(*w));
        w->ns = xstrdup(ns);
        w->name = xstrdup(name);
        copy_spec(&w->spec, spec);
        s->wls = xrealloc(s->wls, (s->nwls + 1) * sizeof(*s->wls));
        s->wls[s->nwls++] = w;
    } else {
        struct scrape_spec old = w->spec;
        copy_spec(&w->spec, spec);
        metrics_changed = !same_metrics(&old, &w->spec);
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
            pod_drop(s, w->pods[i++]);
        } else if (c > 0) {
            out[nout++] = pod_new(s, w, in[j++], wall);
        } else {
            pod_update(s, w->pods[i], in[j++], wall, metrics_changed);
            out[nout++] = w->pods[i++];
        }
    }
    xfree(w->pods);
    xfree(in);
    w->pods = out;
    w->npods = nout;
    arm(s);
}

static void wl_free(struct scrape *s, struct swl *w)
{
    for (size_t i = 0; i < w->npods; i++)
        pod_drop(s, w->pods[i]);
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
    const struct swl *w = find_wl(s, ns, name, NULL);
    if (!w)
        return -ENOENT;
    struct scrape_agg_pod *ap = xmalloc((w->npods ? w->npods : 1) * sizeof(*ap));
    size_t n = 0;
    for (size_t i = 0; i < w->npods; i++)
        if (w->pods[i]->ready)
            ap[n++] = (struct scrape_agg_pod){&w->pods[i]->st, w->pods[i]->gpus};
    scrape_aggregate(ap, n, &w->spec, now_ms, s->cfg.interval_ms, s->cfg.rate_window_ms, out);
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
    if (!loop || !h || c.interval_ms <= 0 || c.timeout_ms <= 0 || c.rate_window_ms <= 0 ||
        c.max_bytes == 0 || c.clients < 1 || c.clients > MAX_CLIENTS)
        return -EINVAL;
    struct scrape *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->cfg = c;
    s->clients[0] = h;
    s->nclients = 1;
    for (int i = 1; i < c.clients; i++) {
        int rc = httpc_new(loop, &s->clients[i]);
        if (rc == 0) /* one kept-alive connection per pod it scrapes */
            httpc_set_max_idle_connections(s->clients[i], 4096);
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

void scrape_stats(const struct scrape *s, struct scrape_stats *out)
{
    *out = s->stats;
    out->pods = s->npods;
    out->scheduled = s->nheap;
    out->inflight = s->inflight;
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

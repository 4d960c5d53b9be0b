/* SPDX-License-Identifier: Apache-2.0 */
/* targets: the workloads and pods the scraper is given (scrape_set_targets,
 * scrape_forget), kept in step with them: a pod's address, readiness and
 * schedule; the requests and gauges of pods that leave (the gone list, the
 * departed sum); specs shared between workloads; and scrape_get, which
 * aggregates a workload's pods into one result. The schedule and the scrapes
 * themselves are scrape.c's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scrape-io.h"
#include "util/util.h"

/* ---- pods ---------------------------------------------------------------- */

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

/* The pod's scrape URL, or NULL with why and the failure's class. */
static char *make_url(const struct scrape_spec *spec, const struct scrape_pod *pod, char *why,
                      size_t whylen, enum scrape_fail *fail)
{
    int port = pod->port > 0 ? pod->port : spec->port;
    *fail = SCRAPE_FAIL_NO_PORT;
    if (!pod->ip || !pod->ip[0]) {
        *fail = SCRAPE_FAIL_OTHER;
        snprintf(why, whylen, "the pod has no IP address");
        return NULL;
    }
    if ((port <= 0 || port > 65535) && spec->port_name[0]) {
        snprintf(why, whylen,
                 "the pod has no container port named %s (gpuscaler.io/metrics-port)",
                 spec->port_name);
        return NULL;
    }
    if (port <= 0 || port > 65535) {
        snprintf(why, whylen,
                 "no metrics port: the pod has no container port named metrics or http, nor "
                 "a single container port; set gpuscaler.io/metrics-port");
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
 * the gauges are spent: they count again only from the pod's next scrape.
 * A pod that leaves this way leaves for good: what moved when its scrapes
 * went stale stays in the sum too. */
static void depart(struct scrape *s, struct swl *w, struct spod *p, int64_t stamp)
{
    double run, wait;
    scrape_podstate_backlog(&p->st, &w->sp->spec, stamp, s->cfg.interval_ms, &run, &wait);
    if (run > 0)
        w->departed += run;
    if (wait > 0)
        w->departed += wait;
    p->st.has_inflight = p->st.has_queued = false;
    p->stale_departed = 0;
}

/* A ready pod without a good scrape for 3 intervals leaves the backlog
 * (scrape_podstate_backlog) as scrape_get runs, and the gauges of its last
 * good scrape, which the backlog counted until then, move to the departed
 * sum: dropped, they would count as negative arrivals, and a pod stops
 * answering when it is overloaded. When it answers again they move back:
 * its new gauges count in the backlog, and what it finished meanwhile in its
 * request counter, so kept as departed they would count twice. */
static void stale_depart(struct scrape *s, struct swl *w, struct spod *p, int64_t now_ms)
{
    const struct scrape_spec *spec = &w->sp->spec;
    double run, wait;
    scrape_podstate_backlog(&p->st, spec, now_ms, s->cfg.interval_ms, &run, &wait);
    if (!isnan(run) || !isnan(wait)) {
        w->departed -= p->stale_departed;
        p->stale_departed = 0;
        return;
    }
    scrape_podstate_backlog(&p->st, spec, p->st.last_ok_ms, s->cfg.interval_ms, &run, &wait);
    if (!p->ready || (isnan(run) && isnan(wait)))
        return;
    double before = w->departed;
    depart(s, w, p, p->st.last_ok_ms);
    p->stale_departed = w->departed - before;
}

/* A pod out of Ready for a while (a readiness probe failing under load)
 * still finishes the requests it held, and its request counter, read again
 * once it is Ready, counts them: kept as departed they counted twice (a pod
 * holding 250 flapping for 20 s added +40 % arrivals for a window). Its
 * first good scrape then gives them back, unless the counter fell or is
 * absent (the container restarted: they were lost, not finished). */
void scrape_io_scraped(struct spod *p)
{
    if (!p->back || !p->wl)
        return;
    if (p->st.req_seen && !p->st.req_reset)
        p->wl->departed -= p->unready_departed;
    p->unready_departed = 0;
    p->back = false;
}

/* The running scrape, if any, was asked for a pod that has since left the
 * backlog or moved, or for metrics changed since: its answer must not count. It is cancelled, and marked,
 * as a cancelled request whose answer was already in still reports it. */
static void discard_running(struct spod *p)
{
    if (!p->req)
        return;
    p->discard = true;
    httpc_cancel(p->req);
}

/* The requests the pod served in the window keep counting until they age
 * out (aggregate.c), as a pod's that left: its history is about to go. */
static void keep_served(struct swl *w, struct spod *p)
{
    if (p->st.requests.n < 2)
        return;
    w->gone = xrealloc(w->gone, (w->ngone + 1) * sizeof(*w->gone));
    scrape_podstate_retire(&w->gone[w->ngone++], &p->st, &w->win);
}

/* Take the pod's address; a new one (or the first) starts its history afresh. */
static void set_address(struct scrape *s, struct spod *p, const struct scrape_pod *in,
                        int64_t stamp, bool first)
{
    char why[160] = "";
    enum scrape_fail fail;
    char *url = make_url(&p->wl->sp->spec, in, why, sizeof(why), &fail);
    bool same = (url == NULL && p->url == NULL) || (url && p->url && strcmp(url, p->url) == 0);
    if (same && !first) {
        xfree(url);
        return;
    }
    xfree(p->url);
    p->url = url;
    if (!first) {
        depart(s, p->wl, p, stamp);
        keep_served(p->wl, p); /* a pod made again under its name, or a new metrics port */
    }
    scrape_podstate_reset(&p->st, &p->wl->win, stamp);
    discard_running(p); /* an answer from the old address must not count */
    scrape_io_unschedule(s, p);
    if (!url) {
        scrape_podstate_fail(&p->st, stamp, fail, why);
        if (p->ready)
            scrape_io_log_failure(s, p, stamp);
    }
}

static struct spod *pod_new(struct scrape *s, struct swl *w, const struct scrape_pod *in,
                            int64_t stamp)
{
    size_t nl = strlen(in->name);
    struct spod *p = xcalloc(1, sizeof(*p) + nl + 1);
    memcpy(p->name, in->name, nl + 1);
    p->s = s;
    p->wl = w;
    p->heap = SCRAPE_NO_HEAP;
    uint64_t h = pod_hash(w->ns, w->name, in->name);
    p->phase = (uint32_t)(h % (uint64_t)s->cfg.interval_ms);
    p->client = (uint8_t)((h >> 40) % (uint64_t)s->nclients);
    scrape_podstate_init(&p->st, stamp, s->cfg.rate_window_ms, s->cfg.interval_ms);
    p->ready = in->ready;
    p->gpus = in->gpus;
    set_address(s, p, in, stamp, true);
    scrape_io_schedule(s, p);
    s->npods++;
    return p;
}

static void pod_drop(struct scrape *s, struct spod *p)
{
    scrape_io_unschedule(s, p);
    s->npods--;
    scrape_podstate_free(&p->st, &p->wl->win); /* its columns go back to the window */
    if (p->req) {
        p->wl = NULL;
        httpc_cancel(p->req);
    } else {
        scrape_io_pod_free(p);
    }
}

/* A pod that is no longer a target: the requests it served in the window
 * keep counting until they age out (aggregate.c), the rest goes. */
static void pod_leave(struct scrape *s, struct swl *w, struct spod *p, int64_t stamp)
{
    if (p->ready)
        depart(s, w, p, stamp);
    keep_served(w, p);
    pod_drop(s, p);
}

/* Forget the pods that left whose newest sample is out of the window (all
 * of them with all = true). */
static void gone_expire(struct swl *w, int64_t stamp, int64_t window_ms, bool all)
{
    size_t k = 0;
    for (size_t i = 0; i < w->ngone; i++) {
        if (all || scrape_ring_newest(&w->gone[i].requests) <= stamp - window_ms)
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
                       int64_t stamp, bool metrics_changed)
{
    p->gpus = in->gpus;
    set_address(s, p, in, stamp, false);
    if (metrics_changed) {
        uint8_t fail = p->st.fail;
        scrape_podstate_reset(&p->st, &p->wl->win, stamp);
        if (!p->url)
            p->st.fail = fail; /* still no port to scrape: failed, with its hint */
        /* a scrape still running reads the old metrics: not the new ones'
         * first sample (their series, absent from it, would count from 0) */
        discard_running(p);
    }
    if (in->ready && !p->ready) {
        /* ready again: a new warm-up, the old samples stay for the window;
         * a container restarted meanwhile creates its lazy counters (TGI's)
         * anew, so one absent is not one that disappeared */
        p->st.since_ms = stamp;
        p->st.ok_count = 0;
        p->st.req_seen = p->st.prompt_seen = p->st.gen_seen = false;
        p->back = p->unready_departed != 0;
    }
    if (p->ready && !in->ready) {
        double before = p->wl->departed;
        depart(s, p->wl, p, stamp);
        p->unready_departed += p->wl->departed - before;
        p->back = false;
        /* a scrape still running answers for requests that just departed
         * (its gauges, and in its counter what of them finished): none of
         * it may count again */
        discard_running(p);
    }
    p->ready = in->ready;
    if (!p->ready)
        scrape_io_unschedule(s, p);
    else
        scrape_io_schedule(s, p);
}

/* ---- workloads and their specs ------------------------------------------ */

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
           strcmp(a->busy_metric, b->busy_metric) == 0 &&
           strcmp(a->rejected_metric, b->rejected_metric) == 0;
}

static bool same_spec(const struct scrape_spec *a, const struct scrape_spec *b)
{
    return same_metrics(a, b) && a->port == b->port && a->missing_fraction == b->missing_fraction &&
           strcmp(a->port_name, b->port_name) == 0 && strcmp(a->scheme, b->scheme) == 0 &&
           strcmp(a->path, b->path) == 0;
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
    dst->rejected_metric[sizeof(dst->rejected_metric) - 1] = '\0';
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
    int64_t stamp = scrape_io_now(s);
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
            pod_leave(s, w, w->pods[i++], stamp);
        } else if (c > 0) {
            out[nout++] = pod_new(s, w, in[j++], stamp);
        } else {
            pod_update(s, w->pods[i], in[j++], stamp, metrics_changed);
            out[nout++] = w->pods[i++];
        }
    }
    xfree(w->pods);
    xfree(in);
    w->pods = xrealloc(out, (nout ? nout : 1) * sizeof(*out));
    w->npods = nout;
    /* the increases of another metric count no more */
    gone_expire(w, stamp, s->cfg.rate_window_ms, metrics_changed);
    if (metrics_changed) /* the pods released theirs */
        scrape_window_clear(&w->win);
    scrape_io_arm(s);
}

void scrape_io_wl_free(struct scrape *s, struct swl *w)
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
    scrape_io_wl_free(s, w);
    scrape_io_arm(s);
}

int scrape_get(struct scrape *s, const char *ns, const char *name, int64_t now_ms,
               struct scrape_result *out)
{
    return scrape_get_recent(s, ns, name, now_ms, 0, out);
}

int scrape_get_recent(struct scrape *s, const char *ns, const char *name, int64_t now_ms,
                      int64_t recent_min_ms, struct scrape_result *out)
{
    struct swl *w = find_wl(s, ns, name, NULL);
    if (!w)
        return -ENOENT;
    for (size_t i = 0; i < w->npods; i++)
        stale_depart(s, w, w->pods[i], now_ms);
    /* the ready pods, and those that left (no longer Ready, or deleted) for
     * the requests they served in the window */
    struct scrape_agg_pod *ap = xmalloc((w->npods + w->ngone + 1) * sizeof(*ap));
    size_t n = 0;
    for (size_t i = 0; i < w->npods; i++)
        ap[n++] = (struct scrape_agg_pod){&w->pods[i]->st, w->pods[i]->gpus, !w->pods[i]->ready};
    for (size_t i = 0; i < w->ngone; i++)
        ap[n++] = (struct scrape_agg_pod){&w->gone[i], 0, true};
    int64_t rmin = recent_min_ms < s->cfg.rate_window_ms ? recent_min_ms : s->cfg.rate_window_ms;
    scrape_aggregate_recent(ap, n, &w->win, &w->sp->spec, now_ms, s->cfg.interval_ms,
                            s->cfg.rate_window_ms, rmin, out);
    out->departed = w->departed;
    xfree(ap);
    return 0;
}

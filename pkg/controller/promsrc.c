/* SPDX-License-Identifier: Apache-2.0 */
/* controller/promsrc: a Prometheus server as a workload's metrics source.
 * Each tick asks for the workload's queries (promql_get: the answer serves
 * the next tick) and, once, seeds the forecaster from Prometheus' history.
 * The per-pod answer is matched against the pods in the cache, as the
 * scraper does with its own scrapes:
 *  - a Ready pod Prometheus' rate does not count yet (it has scraped it
 *    fewer than twice) is a replica still warming, not one serving: after a
 *    2 -> 10 scale-out the rate sums 2 pods while 10 are Ready, and a
 *    per-replica rate over 10 read up to 80 % low;
 *  - one still not counted a rate window after it turned Ready is missing
 *    (not selected by the PodMonitor, not scraped): it serves an average
 *    share, and more than scrape.missing-fraction of them hold the workload;
 *  - running + waiting requests are summed over the pods (the backlog whose
 *    growth turns completions into arrivals), a Ready pod absent from an
 *    answer keeping its last value, and what pods that left held (absent
 *    and no longer Ready) counted as departed: their requests finish
 *    unseen, which is no drop in arrivals;
 *  - each counted pod's newest samples of its request counter (and its
 *    backlog then) give the newest completions and backlog growth, over two
 *    service times at least where the samples reach that far (the
 *    scraper's floor, ctl_recent_min_ms), else from the oldest kept: a step
 *    seen a scrape or a few (or a tick) after it comes, not as the 2-minute
 *    window's rate turns. The forecaster still learns the window's
 *    arrivals (decide.c), as its seed from Prometheus' history has them. */
#include "controller-int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"
#include "promql/promql.h"

#define SUB "controller"

struct pq_req {
    struct controller *c;
    char *ns, *name;
    char *uid;             /* the Deployment's, to tell a re-created one from a reset */
    struct forecast *seed; /* promql_seed fills this; adopted if still useful */
    bool seeding;          /* counted in c->seeds_inflight */
    uint32_t fc_gen;       /* the forecaster generation the seed was asked for */
    uint32_t pq_gen;       /* the queries' generation the answer is to */
    int64_t asked_ms;      /* the per-pod query's time (unix ms) */
    int64_t lag_ms;        /* how far back of it the window queries were asked */
    bool lag_known;        /* ... a lag measured then (else 0, not yet known) */
    bool again;            /* asked again at once after a dropped answer */
};

static struct pq_req *pq_req_new(struct controller *c, const struct ctl_wl *w)
{
    struct pq_req *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->ns = xstrdup(w->ns);
    r->name = xstrdup(w->name);
    r->uid = xstrdup(w->uid);
    r->fc_gen = w->fc_gen;
    r->pq_gen = w->pq_gen;
    ctl_io_begin(c);
    return r;
}

static void pq_req_free(struct pq_req *r)
{
    struct controller *c = r->c;
    if (r->seeding)
        c->seeds_inflight--;
    forecast_free(r->seed);
    xfree(r->ns);
    xfree(r->name);
    xfree(r->uid);
    xfree(r);
    ctl_io_end(c);
}

static void pods_copy(struct promql_pods *dst, const struct promql_pods *src)
{
    promql_pods_free(dst);
    if (!src)
        return;
    *dst = *src;
    dst->v = xmalloc((src->n ? src->n : 1) * sizeof(*dst->v));
    for (size_t i = 0; i < src->n; i++) {
        dst->v[i] = src->v[i];
        dst->v[i].name = xstrdup(src->v[i].name);
    }
}

/* Whether w's queries include the per-pod one that says which pods the
 * default rate counts. */
static bool counts_pods(const struct ctl_wl *w)
{
    if (w->cfg.promql_rate[0])
        return false;
    char tmpl[PROMQL_MAX_QUERY];
    promql_default_pods(&w->cfg.scrape, true, tmpl, sizeof(tmpl));
    return tmpl[0] != '\0';
}

/* A failure's kind, its reason without the numbers in it (a timeout's
 * elapsed milliseconds, a value returned): 0 for none. */
static uint64_t why_class(const char *why)
{
    if (!why || !*why)
        return 0;
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = why; *p; p++)
        if (*p < '0' || *p > '9')
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h | 1;
}

bool ctl_pq_log(struct ctl_wl *w, int part, const char *why)
{
    static const char *const what[] = {"rate", "p99", "busy-time", "per-pod", "refused"};
    uint64_t k = why_class(why);
    if (k == w->pq_logged[part])
        return false;
    if (k)
        LOGW_WARN(SUB, w->ns, w->name, "Prometheus %s query failed: %s", what[part], why);
    else
        LOGW_INFO(SUB, w->ns, w->name, "Prometheus %s query answers again", what[part]);
    w->pq_logged[part] = k;
    return true;
}

/* The ingestion lag (a remote write or an ingestion pipeline delays the
 * samples 40-60 s, where Prometheus' own scrapes are at most an interval
 * old): where the window queries are evaluated. At the query's time, the
 * window's end held no samples and a 2-minute rate read 30-60 % low. rate()
 * extrapolates a series over 1.1 of its intervals at the window's end, so
 * the estimate is the larger of
 *  - the least fresh lag over two scrape intervals (iv; CTL_PQ_LAG_PERIOD_MS
 *    while it is not known): the delay, the sawtooth of a sample up to an
 *    interval old left out;
 *  - the most the oldest pod's lag less an interval has been over as long:
 *    its window's end at most an interval past its newest sample, while
 *    samples are late to become visible (a remote write's batches) or the
 *    lag grows (followed from the next tick on).
 * The arithmetic is pqlag.c's. Returns false when the answer has no times (the estimate stays). */
static bool pq_lag(const struct controller *c, struct ctl_wl *w, const struct promql_pods *pods,
                   int64_t asked_ms, int64_t iv, int64_t *fresh, int64_t *old)
{
    if (!ctl_pq_lags(pods, asked_ms, iv, fresh, old))
        return false;
    if (!w->pq_lag_known)
        w->pq_lag_win = w->pq_need_win = (struct ctl_win2){0};
    int64_t est = ctl_pq_estimate(&w->pq_lag_win, &w->pq_need_win, asked_ms, iv,
                                  c->cfg->decision_interval_ms, *fresh, *old);
    if (!w->pq_lag_told && est >= CTL_PQ_LAG_TOLD_MS) {
        LOGW_WARN(SUB, w->ns, w->name, "Prometheus' newest samples are %lld s behind the "
                  "query's time (a remote-write or ingestion delay): the rate, p99 and busy "
                  "queries are evaluated that far back, and the answers are that much older",
                  (long long)(est / 1000));
        w->pq_lag_told = true;
    } else if (w->pq_lag_told && est < CTL_PQ_LAG_TOLD_MS * 2 / 3) {
        LOGW_INFO(SUB, w->ns, w->name, "Prometheus' newest samples are %lld s behind the "
                  "query's time now, under %d s", (long long)(est / 1000),
                  CTL_PQ_LAG_TOLD_MS * 2 / 3000);
        w->pq_lag_told = false;
    }
    w->pq_lag_ms = est;
    w->pq_lag_known = true;
    return true;
}

static void pq_answered(const struct scrape_result *res, const struct promql_pods *pods,
                        const struct promql_notes *notes, void *arg);

void ctl_pq_dup_msg(const struct ctl_wl *w, char *out, size_t outlen)
{
    int dup = 0;
    const char *pod = NULL;
    for (size_t i = 0; i < w->pq_pods.n; i++)
        if (w->pq_pods.v[i].dup > 0 && dup++ == 0)
            pod = w->pq_pods.v[i].name;
    if (!pod) { /* none, or no per-pod answer kept (failed, or the queries changed) */
        snprintf(out, outlen, "%s", "");
        return;
    }
    snprintf(out, outlen,
             "%d of %zu pods' request counter is scraped by more than one target at one "
             "address (pod %.253s): Prometheus has each of its series twice or more (apart in "
             "job, service, endpoint or container). gpuscaler's default queries count such an "
             "address once where the instance label is the address (host:port), but any plain "
             "sum of them (a promql-rate of your own, a dashboard, another autoscaler) reads "
             "that many times high. Remove the "
             "duplicate PodMonitor, ServiceMonitor or scrape job (count by (instance, job, "
             "service, endpoint, container) of the counter for that pod names them)",
             dup, w->pq_pods.n, pod);
}

/* Told when the pods scraped twice or more change in number, from an answer
 * of the per-pod query just kept in w->pq_pods (w->pq_dup_pods: the number
 * last told). */
static void pq_dup_check(struct ctl_wl *w)
{
    int dup = 0;
    for (size_t i = 0; i < w->pq_pods.n; i++)
        dup += w->pq_pods.v[i].dup > 0;
    if (dup > 0 && dup != w->pq_dup_pods) {
        char msg[900];
        ctl_pq_dup_msg(w, msg, sizeof(msg));
        LOGW_WARN(SUB, w->ns, w->name, "%s", msg);
    } else if (dup == 0 && w->pq_dup_pods > 0) {
        LOGW_INFO(SUB, w->ns, w->name, "no pod's request counter is scraped by more than one "
                  "target now");
    }
    w->pq_dup_pods = dup;
}

/* What w's queries ask Prometheus. */
static struct promql_target pq_target(const struct ctl_wl *w)
{
    const struct ctl_workload_config *cfg = &w->cfg;
    return (struct promql_target){.ns = w->ns, .deployment = w->name, .spec = &cfg->scrape,
                                  .rate_tmpl = cfg->promql_rate, .p99_tmpl = cfg->promql_p99,
                                  .busy_tmpl = cfg->promql_busy,
                                  /* measured by the default queries' per-pod one only */
                                  .lag_ms = counts_pods(w) ? w->pq_lag_ms : 0};
}

/* Send w's queries at now (unix ms); again: a dropped answer's, its window
 * queries lag_ms back (else at the estimate). */
static void pq_ask(struct controller *c, struct ctl_wl *w, int64_t now, bool again,
                   int64_t lag_ms)
{
    struct promql_target t = pq_target(w);
    if (again && lag_ms >= 0)
        t.lag_ms = lag_ms;
    char err[200];
    struct pq_req *q = pq_req_new(c, w);
    q->asked_ms = now;
    q->lag_ms = t.lag_ms;
    q->lag_known = w->pq_lag_known;
    q->again = again;
    if (promql_get(c->promql, &t, now, pq_answered, q, err, sizeof(err)) == 0) {
        w->pq_inflight = true;
        return;
    }
    /* not even sent (a template that does not expand, a credential file
     * that cannot be read): hold on that reason now, not on the last
     * answer until it goes stale and says only that */
    pq_req_free(q);
    char why[sizeof(w->pq_last.why)];
    snprintf(why, sizeof(why), "PromQL: %.180s", err);
    if (why_class(why) != w->pq_logged[0])
        LOGW_WARN(SUB, w->ns, w->name, "cannot query Prometheus: %s", err);
    w->pq_logged[0] = why_class(why); /* an answer logs "answers again" */
    w->pq_last.valid = false;
    memcpy(w->pq_last.why, why, sizeof(why));
    w->pq_have = true;
}

static void pq_answered(const struct scrape_result *res, const struct promql_pods *pods,
                        const struct promql_notes *notes, void *arg)
{
    struct pq_req *r = arg;
    struct ctl_wl *w = ctl_wl_find(r->c, r->ns, r->name);
    if (w && strcmp(w->uid, r->uid) == 0 && r->pq_gen != w->pq_gen) {
        /* asked before the annotations changed the queries: it measured
         * something else (ctl_pq_requery has sent the new ones) */
        LOGW_DEBUG(SUB, w->ns, w->name, "Prometheus answer to the earlier queries dropped");
    } else if (w && strcmp(w->uid, r->uid) == 0) { /* not a Deployment's of that name made since */
        if (!notes->cancelled) { /* closing: not an answer of Prometheus' */
            ctl_pq_log(w, 0, res->valid ? NULL : res->why);
            ctl_pq_log(w, 1, notes->p99);
            ctl_pq_log(w, 2, notes->busy);
            ctl_pq_log(w, 3, notes->pods);
            ctl_pq_log(w, 4, notes->refused);
        }
        int64_t fresh = -1, old = -1, iv = 0;
        bool drop, timed = false;
        if (!notes->cancelled) {
            iv = ctl_pq_interval(&w->pq_iv_win,
                                 ctl_pq_step(w->pq_pods_have ? &w->pq_pods : NULL, pods,
                                             r->asked_ms, promql_window_ms(r->c->promql)),
                                 r->asked_ms);
            timed = pq_lag(r->c, w, pods, r->asked_ms, iv, &fresh, &old);
        }
        w->pq_inflight = false;
        w->pq_last = *res;
        /* Its window queries asked ahead of where the samples end, as this
         * answer shows: the rate read low. Before any lag was measured,
         * when the estimate is that much higher: asked again there. Once
         * one is, when the oldest pod's newest sample lay more than the 1.1
         * scrape intervals rate() extrapolates over before the window's
         * end: asked again with the window's end an interval past it (a lag
         * that grew, or samples late to become visible). A drop on any rise
         * of the estimate instead dropped answer after answer at long
         * decision intervals: each estimate moves within the sawtooth. */
        int64_t ahead = w->pq_lag_ms - r->lag_ms, past = old - r->lag_ms;
        bool first = !r->lag_known && ahead >= CTL_PQ_LAG_REASK_MS;
        bool timed_iv = timed && iv > 0, beyond = timed_iv && past * 10 > iv * 11;
        bool grew = r->lag_known && beyond;
        drop = !notes->cancelled && res->valid && counts_pods(w) && w->pq_lag_known &&
               !r->again && !r->c->closing && (first || grew);
        int64_t again_lag = -1;
        if (drop && grew) {
            again_lag = old - iv > fresh ? old - iv : fresh;
            /* told once a growth of CTL_PQ_LAG_REASK_MS past the sawtooth,
             * until an answer is within it again; the others debug */
            bool big = past > iv * 11 / 10 + CTL_PQ_LAG_REASK_MS;
            util_log(big && !w->pq_grew_told ? UTIL_LOG_INFO : UTIL_LOG_DEBUG, SUB, w->ns,
                     w->name, "Prometheus answer dropped: its rate was asked %lld s past a "
                     "pod's newest sample, more than 1.1 scrape intervals (%lld s): the lag "
                     "grew to %lld s; asked again %lld s back", (long long)(past / 1000),
                     (long long)(iv / 1000), (long long)(old / 1000),
                     (long long)(again_lag / 1000));
            w->pq_grew_told |= big;
        } else if (drop) {
            LOGW_INFO(SUB, w->ns, w->name, "Prometheus answer dropped: its rate was asked "
                      "%lld s ahead of the newest samples (before a lag was measured); "
                      "asked again that far back", (long long)(ahead / 1000));
        } else if (timed_iv && !beyond && r->lag_known && !r->again) {
            w->pq_grew_told = false; /* within the sawtooth again */
        }
        if (drop) {
            w->pq_last.valid = false;
            snprintf(w->pq_last.why, sizeof(w->pq_last.why),
                     "waiting for Prometheus' answer evaluated where its samples end (%lld s "
                     "back)", (long long)((again_lag >= 0 ? again_lag : w->pq_lag_ms) / 1000));
        }
        w->pq_have = true;
        pods_copy(&w->pq_pods, pods);
        w->pq_pods_have = pods != NULL;
        w->pq_pods_failed = pods == NULL && counts_pods(w);
        w->pq_pods_fresh = true;
        if (pods)
            pq_dup_check(w);
        /* asked again now, where the samples end: the next tick uses that
         * answer as it would have used this one, and holds only when it is
         * not back by then (once: an answer asked again is not) */
        if (drop) {
            /* the window's end as far past the oldest pod's sample from the
             * time of asking again as from this answer's */
            int64_t now = util_now_unix_ms();
            if (again_lag >= 0 && now > r->asked_ms)
                again_lag += now - r->asked_ms;
            pq_ask(r->c, w, now, true, again_lag);
        }
    }
    pq_req_free(r);
}

static void pq_seeded(const struct promql_seed_result *res, void *arg)
{
    struct pq_req *r = arg;
    struct ctl_wl *w = ctl_wl_find(r->c, r->ns, r->name);
    struct forecast_result cur, got;
    if (!w || !w->fc) {
        pq_req_free(r);
        return;
    }
    if (r->fc_gen != w->fc_gen) {
        LOGW_INFO(SUB, r->ns, r->name, "forecaster seed from Prometheus discarded: %s",
                  strcmp(r->uid, w->uid) != 0
                      ? "the Deployment was deleted and created again while it was fetched"
                      : "the forecaster's configuration changed while it was fetched");
    } else if (r->pq_gen != w->pq_gen) {
        /* the rate of another query: the new one is asked for at the next tick */
        LOGW_INFO(SUB, r->ns, r->name, "forecaster seed from Prometheus discarded: the "
                  "queries changed while it was fetched; asked again");
        w->pq_seeded = false;
    } else if (res->err != 0) {
        LOGW_WARN(SUB, r->ns, r->name, "seeding the forecaster from Prometheus failed: %s; "
                  "asked again in %lld s", res->why, (long long)(CTL_SEED_RETRY_MS / 1000));
        w->pq_seeded = false;
        w->pq_seed_after = util_now_unix_ms() + CTL_SEED_RETRY_MS;
    } else {
        forecast_predict(w->fc, util_now_unix_ms(), 0, &cur);
        forecast_predict(r->seed, util_now_unix_ms(), 0, &got);
        if (got.buckets_seen > cur.buckets_seen) { /* more history than we had */
            forecast_free(w->fc);
            w->fc = r->seed;
            r->seed = NULL;
            LOGW_INFO(SUB, r->ns, r->name,
                      "forecaster seeded from Prometheus: %zu points, %lld buckets of history"
                      "%s", res->observed, (long long)got.buckets_seen,
                      res->retried ? " (after asking again for a day that failed)" : "");
        }
    }
    pq_req_free(r);
}

void ctl_pq_measure(struct controller *c, struct ctl_wl *w, int64_t now,
                    struct scrape_result *r)
{
    const struct ctl_workload_config *cfg = &w->cfg;
    struct promql_target t = pq_target(w);
    char err[200];
    if (!w->pq_inflight)
        pq_ask(c, w, now, false, -1);
    /* The seed waits for the checkpoint's read (one tick, usually): asked
     * before it, it could not know what the checkpoint holds. A failed read
     * does not hold it back. With the default queries it waits for their
     * first answer too (the same tick, usually), whose sample times say how
     * far Prometheus lags: the seed's range ends there (ending now, its last
     * minute read low behind a remote write). */
    if (!w->pq_seeded && w->fc && (w->checkpoint_ready || w->checkpoint_failed) &&
        (w->pq_have || !counts_pods(w)) && now >= w->pq_seed_after &&
        c->seeds_inflight < CTL_SEEDS_MAX_INFLIGHT) {
        w->pq_seeded = true;
        struct forecast_config fc;
        controller_forecast_config(&cfg->policy, &fc);
        /* all the forecaster uses (7 days and 30 min for a daily season:
         * 10,170 steps, 8 requests of a day) and an hour more; not when a
         * checkpoint already holds more (the seed would not be adopted) */
        int64_t lookback = forecast_history_ms(&fc) + 3600000;
        struct forecast_result cur;
        if (forecast_predict(w->fc, now, 0, &cur) == 0 &&
            cur.buckets_seen > lookback / fc.bucket_ms + 1) {
            LOGW_DEBUG(SUB, w->ns, w->name,
                       "forecaster holds %lld buckets of history: no seed from Prometheus",
                       (long long)cur.buckets_seen);
        } else {
            struct pq_req *q = pq_req_new(c, w);
            q->seed = forecast_new(&fc);
            q->seeding = true;
            c->seeds_inflight++;
            if (!q->seed || promql_seed(c->promql, &t, now - t.lag_ms, lookback, 60000, q->seed,
                                        pq_seeded, q, err, sizeof(err)) != 0) {
                LOGW_WARN(SUB, w->ns, w->name, "cannot seed the forecaster from Prometheus: %s; "
                          "asked again in %lld s", q->seed ? err : "out of memory",
                          (long long)(CTL_SEED_RETRY_MS / 1000));
                w->pq_seeded = false;
                w->pq_seed_after = now + CTL_SEED_RETRY_MS;
                pq_req_free(q);
            }
        }
    }
    if (w->pq_have) {
        *r = w->pq_last;
    } else {
        r->valid = false;
        snprintf(r->why, sizeof(r->why), "waiting for the first Prometheus answer");
    }
}

/* ---- the per-pod answer against the cache ------------------------------------ */

static int pod_cmp(const void *a, const void *b)
{
    return strcmp(((const struct promql_pod *)a)->name, ((const struct promql_pod *)b)->name);
}

/* The answer's entry of a pod (the answer is sorted by name), or NULL. */
static const struct promql_pod *answer_pod(const struct promql_pods *pp, const char *name)
{
    struct promql_pod key = {.name = (char *)name};
    return pp->n ? bsearch(&key, pp->v, pp->n, sizeof(pp->v[0]), pod_cmp) : NULL;
}

static bool pod_serving(const struct kube_pod *p)
{
    return !p->deleting && p->phase == KUBE_POD_RUNNING && p->ready && p->ip[0];
}

/* The cache's pod of that name, or NULL. */
static const struct kube_pod *pod_named(const struct kube_pod *const *pods, size_t np,
                                        const char *name)
{
    for (size_t i = 0; i < np; i++)
        if (strcmp(pods[i]->name, name) == 0)
            return pods[i];
    return NULL;
}

static int state_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ctl_pq_pod *)a)->name, ((const struct ctl_pq_pod *)b)->name);
}

/* A pod's entry in w's per-pod state (sorted by name), or NULL. */
static const struct ctl_pq_pod *state_pod(const struct ctl_wl *w, const char *name)
{
    struct ctl_pq_pod key = {.name = (char *)name};
    return w->pq_bl_n ? bsearch(&key, w->pq_bl, w->pq_bl_n, sizeof(key), state_cmp) : NULL;
}

/* Whether an answer's pod has gauges or a counter sample. */
static bool answered(const struct promql_pod *p)
{
    return p && (!(isnan(p->running) && isnan(p->waiting)) ||
                 (!isnan(p->requests) && p->at_ms > 0));
}

/* Whether the pod's counter is one sample: every series of it sampled at
 * the same time. Series of targets scraped at other times (two containers,
 * a PodMonitor and a ServiceMonitor), or one gone stale, make a sum whose
 * differences are no rate. */
static bool one_sample(const struct promql_pod *p)
{
    return !isnan(p->requests) && p->at_ms > 0 && p->at_min_ms == p->at_ms;
}

/* A fresh answer into w's per-pod state:
 *  - the backlog: each pod's running + waiting. A pod of the last answer
 *    absent from this one (or answered without its gauges) keeps its last
 *    value while it is Ready (a failed scrape marks its series stale); one
 *    absent and no longer Ready adds what it held to the departed, and
 *    takes it out again if it comes back (Ready again, or in an answer:
 *    what it held was not gone); one deleted leaves the state;
 *  - each pod's newest samples of its request counter (and its backlog
 *    then), CTL_PQ_OLD + 1 of them: a sample newer than the last one pushes
 *    the others back. */
static void pods_update(struct ctl_wl *w, const struct promql_pods *pp,
                        const struct kube_pod *const *pods, size_t np)
{
    struct ctl_pq_pod *nv = xmalloc((pp->n + w->pq_bl_n + 1) * sizeof(*nv));
    size_t nn = 0;
    double run = 0, wait = 0, queue = 0, total = 0;
    for (size_t i = 0; i < pp->n; i++) {
        const struct promql_pod *p = &pp->v[i];
        if (!answered(p))
            continue;
        struct ctl_pq_pod e = {.name = xstrdup(p->name), .bl = NAN, .held = NAN, .rej = NAN};
        const struct ctl_pq_pod *o = state_pod(w, p->name);
        if (o && o->departed && !isnan(o->held))
            w->pq_departed -= o->held;
        if (!(isnan(p->running) && isnan(p->waiting))) {
            double r = isnan(p->running) ? 0 : p->running;
            double q = isnan(p->waiting) ? 0 : p->waiting;
            /* the gauges beside the rate (the service time, the capacity)
             * are the counted pods', as the scraper's; the backlog and the
             * queue to drain are every pod's */
            if (p->counted || !pp->counted_seen) {
                run += r;
                wait += q;
            }
            queue += q;
            total += r + q;
            e.bl = e.held = r + q;
        } else if (o && !isnan(o->held)) { /* its gauges not in this answer */
            e.held = o->held;
            total += o->held;
        }
        if (one_sample(p)) {
            if (o && o->t_ms > 0 && p->at_ms > o->t_ms) { /* a new sample */
                e.nold = o->nold < CTL_PQ_OLD ? o->nold + 1 : CTL_PQ_OLD;
                e.old[0] = (struct ctl_pq_sample){o->t_ms, o->req, o->bl, o->rej};
                memcpy(e.old + 1, o->old, (size_t)(e.nold - 1) * sizeof(e.old[0]));
            } else if (o && o->t_ms == p->at_ms) { /* the same sample */
                e.nold = o->nold;
                memcpy(e.old, o->old, sizeof(e.old));
            }
            e.t_ms = p->at_ms;
            e.req = p->requests;
            /* a refused counter missing from an answer (its target gone
             * stale) keeps its last value: read as 0, its whole count would
             * pass for the next gap's refusals. NAN only while the pod has
             * never had it (TGI's comes with the first refusal: from 0) */
            e.rej = !isnan(p->refused) ? p->refused : o ? o->rej : NAN;
        }
        nv[nn++] = e;
    }
    for (size_t i = 0; i < w->pq_bl_n; i++) {
        struct ctl_pq_pod *o = &w->pq_bl[i];
        const struct kube_pod *k = pod_named(pods, np, o->name);
        if (answered(answer_pod(pp, o->name))) {
            xfree(o->name);
        } else if (k && pod_serving(k)) {
            if (o->departed && !isnan(o->held))
                w->pq_departed -= o->held; /* Ready again */
            o->departed = false;
            if (!isnan(o->held))
                total += o->held;
            nv[nn++] = *o;
        } else {
            if (!o->departed && !isnan(o->held))
                w->pq_departed += o->held;
            o->departed = true;
            if (k)
                nv[nn++] = *o; /* not Ready, still there: it may come back */
            else
                xfree(o->name);
        }
    }
    qsort(nv, nn, sizeof(*nv), state_cmp);
    xfree(w->pq_bl);
    w->pq_bl = nv;
    w->pq_bl_n = nn;
    w->pq_running = pp->running_seen ? run : -1;
    w->pq_waiting = pp->waiting_seen ? wait : -1;
    w->pq_queue = pp->waiting_seen ? queue : -1;
    w->pq_backlog = pp->running_seen || pp->waiting_seen ? total : -1;
}

/* A counted pod's newest rate and backlog growth into m: from the newest of
 * its older samples at least min_span_ms before its newest one (else the
 * oldest kept) to the newest. Only samples after the counter last went down
 * count: a reset (the server restarted, or one of several series, as
 * Triton's of a model reloaded), whose increase a sum cannot tell. false
 * when there is no older sample to count from, or the newest is more than
 * three of its pod's intervals old (Prometheus no longer scrapes it).
 * Growth unknown (a pod without gauges) clears m->growth_ok. */
static bool pod_recent(const struct ctl_pq_pod *e, int64_t now, int64_t min_span_ms,
                       struct ctl_pq_match *m)
{
    if (!e || e->nold == 0 || e->t_ms <= e->old[0].t_ms)
        return false;
    if (now - e->t_ms > 3 * (e->t_ms - e->old[0].t_ms))
        return false;
    const struct ctl_pq_sample *from = NULL;
    double after = e->req;
    for (int k = 0; k < e->nold && e->old[k].req <= after && e->old[k].t_ms < e->t_ms; k++) {
        from = &e->old[k];
        after = from->req;
        if (e->t_ms - from->t_ms >= min_span_ms)
            break;
    }
    if (!from)
        return false;
    int64_t dt = e->t_ms - from->t_ms;
    double secs = (double)dt / 1000.0;
    m->recent_rate += (e->req - from->req) / secs;
    /* the refused requests between the same samples: a counter made with the
     * first refusal (TGI's) counts from 0 */
    double rej = (isnan(e->rej) ? 0 : e->rej) - (isnan(from->rej) ? 0 : from->rej);
    m->refused_recent += rej > 0 ? rej / secs : 0;
    if (!isnan(e->bl) && !isnan(from->bl))
        m->recent_growth += (e->bl - from->bl) / secs;
    else
        m->growth_ok = false;
    /* a pod whose samples do not reach min_span_ms back (a new one, or one
     * reset lately) counts its own rate over what it has; it sets the span
     * the sum's noise is judged on only when no pod reaches it, as the
     * scraper's (scrape/aggregate.c, acc_recent_span) */
    int64_t *span = dt < min_span_ms ? &m->short_span_ms : &m->recent_span_ms;
    if (*span == 0 || dt < *span)
        *span = dt;
    return true;
}

bool ctl_pq_queries_same(const struct ctl_workload_config *a,
                         const struct ctl_workload_config *b)
{
    const struct scrape_spec *x = &a->scrape, *y = &b->scrape;
    return ctl_backlog_comparable(a, b) && strcmp(a->promql_rate, b->promql_rate) == 0 &&
           strcmp(a->promql_p99, b->promql_p99) == 0 &&
           strcmp(a->promql_busy, b->promql_busy) == 0 &&
           strcmp(x->latency_metric, y->latency_metric) == 0 &&
           strcmp(x->busy_metric, y->busy_metric) == 0 &&
           strcmp(x->prompt_token_metric, y->prompt_token_metric) == 0 &&
           strcmp(x->generation_token_metric, y->generation_token_metric) == 0 &&
           strcmp(x->rejected_metric, y->rejected_metric) == 0;
}

void ctl_pq_requery(struct ctl_wl *w)
{
    w->pq_gen++;
    w->pq_inflight = false; /* its answer is dropped when it comes */
    /* another metric, or a query of the user's own, lags as it lags */
    w->pq_lag_ms = 0;
    w->pq_lag_known = w->pq_lag_told = false;
    w->pq_iv_win = (struct ctl_win2){0};
    w->pq_grew_told = false;
    if (!w->pq_have)
        return; /* none yet: "waiting for the first Prometheus answer" says it */
    w->pq_last.valid = false;
    snprintf(w->pq_last.why, sizeof(w->pq_last.why),
             "waiting for Prometheus' answer to the changed queries");
    promql_pods_free(&w->pq_pods);
    w->pq_pods_have = w->pq_pods_failed = w->pq_pods_fresh = false;
}

bool ctl_backlog_comparable(const struct ctl_workload_config *a,
                            const struct ctl_workload_config *b)
{
    const struct scrape_spec *x = &a->scrape, *y = &b->scrape;
    return a->source == b->source && x->profile == y->profile &&
           strcmp(x->request_metric, y->request_metric) == 0 &&
           strcmp(x->rejected_metric, y->rejected_metric) == 0 &&
           strcmp(x->inflight_metric, y->inflight_metric) == 0 &&
           strcmp(x->queue_metric, y->queue_metric) == 0;
}

void ctl_backlog_reset(struct ctl_wl *w)
{
    w->bl_n = w->bl_head = 0;
    promql_pods_free(&w->pq_pods);
    w->pq_pods_have = w->pq_pods_fresh = false;
    for (size_t i = 0; i < w->pq_bl_n; i++)
        xfree(w->pq_bl[i].name);
    xfree(w->pq_bl);
    w->pq_bl = NULL;
    w->pq_bl_n = 0;
    w->pq_departed = 0;
    w->pq_running = w->pq_waiting = w->pq_queue = w->pq_backlog = -1;
}

/* A Ready pod still warming: Ready for less than the grace (one whose Ready
 * time is unknown is not new). */
static bool warming(const struct kube_pod *p, int64_t now, int64_t grace_ms)
{
    return p->ready_transition_ms > 0 && now - p->ready_transition_ms < grace_ms;
}

/* Without the per-pod answer (its query failed: a slow Prometheus, a query
 * limit), which pods the rate counts comes from the cache alone: a pod
 * Ready within the grace is taken as warming, not yet in the rate, as the
 * answer would mostly say; the others as counted. Without it the rate over
 * every Ready pod read a scale-out's new replicas as serving, and low. */
static void match_by_cache(const struct kube_pod *const *pods, size_t np, int64_t now,
                           int64_t grace_ms, struct ctl_pq_match *m)
{
    m->counted_known = true;
    m->by_cache = true;
    for (size_t i = 0; i < np; i++) {
        const struct kube_pod *p = pods[i];
        if (!pod_serving(p))
            continue;
        m->ready++;
        if (warming(p, now, grace_ms))
            m->warming++;
        else
            m->counted++;
    }
}

void ctl_pq_match(struct ctl_wl *w, const struct kube_pod *const *pods, size_t np, int64_t now,
                  int64_t grace_ms, int64_t min_span_ms, struct ctl_pq_match *m)
{
    memset(m, 0, sizeof(*m));
    m->running = m->waiting = m->queue = m->backlog = -1;
    if (!w->pq_pods_have) {
        if (w->pq_pods_failed)
            match_by_cache(pods, np, now, grace_ms, m);
        return;
    }
    const struct promql_pods *pp = &w->pq_pods;
    if (w->pq_pods_fresh) {
        pods_update(w, pp, pods, np);
        w->pq_pods_fresh = false;
    }
    m->running = w->pq_running;
    m->waiting = w->pq_waiting;
    m->queue = w->pq_queue;
    m->backlog = w->pq_backlog;
    m->departed = w->pq_departed;
    /* no pod counted at all: the rate is a custom query's, or Prometheus
     * has none of the pods' series under the pod label; nothing to match */
    m->counted_known = pp->counted_seen;
    if (!m->counted_known)
        return;
    int recent = 0;
    m->growth_ok = true;
    /* (the default rate's per-pod answer: the refused query is asked beside it) */
    m->refused_known = w->cfg.scrape.rejected_metric[0] != '\0';
    for (size_t i = 0; i < np; i++) {
        const struct kube_pod *p = pods[i];
        if (!pod_serving(p))
            continue;
        m->ready++;
        const struct promql_pod *a = answer_pod(pp, p->name);
        if (a && a->counted) {
            m->counted++;
            recent += pod_recent(state_pod(w, p->name), now, min_span_ms, m);
        } else if (warming(p, now, grace_ms)) {
            m->warming++;
        } else if (m->missing++ == 0) {
            snprintf(m->missing_pod, sizeof(m->missing_pod), "%s", p->name);
        }
    }
    /* the newest rate of the counted pods: of all of them, or unknown; their
     * backlog's growth only when it is every Ready pod's (a warming pod's
     * queue builds too: the ticks' samples of the whole backlog count it) */
    m->recent_known = m->counted > 0 && recent == m->counted;
    if (m->recent_span_ms == 0)
        m->recent_span_ms = m->short_span_ms;
    m->growth_ok = m->recent_known && m->growth_ok && m->warming == 0 && m->missing == 0;
}

void ctl_pq_apply(const struct ctl_pq_match *m, double missing_fraction, int64_t grace_ms,
                  struct ctl_obs *o)
{
    struct scrape_result *r = &o->m;
    r->inflight = m->running;
    r->queued = m->waiting;
    r->waiting = m->queue;
    r->backlog = m->backlog;
    r->departed = m->departed;
    if (!m->counted_known || !r->valid)
        return;
    r->pods_ready = m->ready;
    r->pods_counted = m->counted;
    r->pods_stale = m->warming;
    r->pods_warming = m->warming;
    r->pods_failed = m->missing;
    int base = m->ready - m->warming;
    if (m->ready == 0) {
        /* nothing serves: the rate is of pods gone (or 0 from pods that
         * export counters before they serve). Replicas asked for: missing,
         * as the scraper's; at 0 it stays what wakes the Deployment. */
        if (o->spec > 0) {
            r->valid = false;
            snprintf(r->why, sizeof(r->why), "no ready pods to count (%d asked for)",
                     (int)o->spec);
        }
        return;
    }
    if (m->counted == 0 && m->missing == 0) {
        r->valid = false;
        snprintf(r->why, sizeof(r->why),
                 m->by_cache ? "all %d ready pods turned Ready within the rate window (not "
                               "yet in Prometheus' rate; its per-pod query failed)"
                             : "all %d ready pods are new to Prometheus (not yet in its rate)",
                 m->ready);
        return;
    }
    if (m->counted == 0 || (double)m->missing > missing_fraction * base) {
        r->valid = false;
        snprintf(r->why, sizeof(r->why),
                 "%d of %d ready pods are not in Prometheus' rate %llds after turning Ready "
                 "(%.60s): does its PodMonitor or ServiceMonitor select them?",
                 m->missing, base, (long long)(grace_ms / 1000), m->missing_pod);
        return;
    }
    if (m->recent_known) { /* the newest scrapes: what a step looks like before the window */
        r->recent_rate = m->recent_rate;
        /* the refused requests between the same samples, while their window
         * rate is known too (one without the other would read as a rise) */
        if (m->refused_known && isfinite(r->rejected_rate))
            r->rejected_recent = m->refused_recent;
        r->recent_span_ms = m->recent_span_ms;
        o->recent_growth = m->recent_growth;
        o->recent_growth_known = m->growth_ok;
    }
    /* warming pods are replicas still starting; missing ones serve an
     * average share of what the counted ones carry, as the scraper's failed */
    ctl_obs_serving(o);
}

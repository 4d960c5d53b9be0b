/* SPDX-License-Identifier: Apache-2.0 */
/* The observe stage's backlog samples: the growth of running + waiting
 * requests that turns completions into arrivals, on ticks that come a few
 * ms late as a timer's do; which pods are stalled; and the Prometheus
 * source's per-pod answer against the cache's pods; the serving replicas
 * the rates are scaled up to. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "controller/controller-int.h"
#include "kube/kube.h"

#define TICK 5000 /* the decision interval */

/* Ticks of 5 s that each come 1 ms later than the previous one: the backlog
 * grows by 8 requests a second from t = 10 s (a 3x step on a saturated
 * replica). */
static struct ctl_wl *ticks(int n, int64_t *now, double *bl)
{
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    for (int k = 0; k < n; k++) {
        *now = k * (TICK + 1);
        *bl = *now > 10000 ? 8.0 * (double)(*now - 10000) / 1000.0 : 2;
        ctl_backlog_push(w, *now, *bl);
    }
    return w;
}

/* Over one decision interval the growth counts from the previous tick, a
 * decision interval and 1 ms ago (without the slack it counted nothing, and
 * a step's first tick saw completions alone). */
static void test_growth_since_the_previous_tick(void **state)
{
    (void)state;
    int64_t now;
    double bl;
    struct ctl_wl *w = ticks(4, &now, &bl); /* ticks at 0, 5.001, 10.002, 15.003 s */
    double g = ctl_backlog_growth(w, now, TICK, TICK / 2, bl);
    /* from 10.002 s (0.016 requests) to 15.003 s (40.024): 8 req/s */
    assert_true(fabs(g - 8.0) < 1e-6);
    /* with no slack the previous tick is out of the window: no growth */
    assert_true(ctl_backlog_growth(w, now, TICK, 0, bl) == 0);
    /* a window of two intervals counts back two ticks, to 5.001 s (2 queued) */
    g = ctl_backlog_growth(w, now, 2 * TICK, TICK / 2, bl);
    assert_true(fabs(g - (bl - 2) / 10.002) < 1e-6);
    free(w);
}

/* The sample pushed now does not count against itself; a time not after
 * the newest sample's is ignored; without an older sample there is no
 * growth. */
static void test_growth_edges(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    assert_true(ctl_backlog_growth(w, 1000, TICK, TICK / 2, 50) == 0);
    ctl_backlog_push(w, 1000, 10);
    assert_true(ctl_backlog_growth(w, 1000, TICK, TICK / 2, 10) == 0);
    ctl_backlog_push(w, 1000, 99); /* same time: ignored */
    ctl_backlog_push(w, 500, 99);  /* older: ignored */
    assert_int_equal(w->bl_n, 1);
    ctl_backlog_push(w, 6000, 20);
    assert_true(fabs(ctl_backlog_growth(w, 6000, TICK, TICK / 2, 20) - 2.0) < 1e-9);
    /* a fall is negative growth: the completions count it */
    assert_true(fabs(ctl_backlog_growth(w, 6000, TICK, TICK / 2, 0) + 2.0) < 1e-9);
    /* the ring keeps the newest CTL_BACKLOG_SAMPLES */
    for (int k = 0; k < 2 * CTL_BACKLOG_SAMPLES; k++)
        ctl_backlog_push(w, 7000 + k * 1000LL, k);
    assert_int_equal(w->bl_n, CTL_BACKLOG_SAMPLES);
    int64_t last = 7000 + (2 * CTL_BACKLOG_SAMPLES - 1) * 1000LL;
    assert_true(fabs(ctl_backlog_growth(w, last, 3000, 500, 2 * CTL_BACKLOG_SAMPLES - 1) - 1.0) <
                1e-9);
    free(w);
}

/* A pod is stalled once it has been not ready for stall_ms since the latest
 * of its creation, scheduling and Ready change, or at once when a container
 * cannot start; ready, deleting, finished or GPU-unschedulable pods never
 * are. */
static void test_pod_stalled(void **state)
{
    (void)state;
    const int64_t stall = 600000, t0 = 1700000000000;
    struct kube_pod p = {.phase = KUBE_POD_RUNNING, .created_ms = t0};
    assert_false(ctl_pod_stalled(&p, t0 + stall - 1, stall));
    assert_true(ctl_pod_stalled(&p, t0 + stall, stall)); /* a crash loop */
    /* scheduled late, or ready until lately: counted from then */
    p.scheduled_ms = t0 + 60000;
    assert_false(ctl_pod_stalled(&p, t0 + stall, stall));
    assert_true(ctl_pod_stalled(&p, t0 + 60000 + stall, stall));
    p.ready_transition_ms = t0 + 120000;
    assert_false(ctl_pod_stalled(&p, t0 + 60000 + stall, stall));
    assert_true(ctl_pod_stalled(&p, t0 + 120000 + stall, stall));
    const int64_t later = t0 + 10 * stall;
    /* Pending on a node (an image that does not pull) stalls too */
    p.phase = KUBE_POD_PENDING;
    assert_true(ctl_pod_stalled(&p, later, stall));
    /* ready, deleting, waiting for a GPU, finished: never */
    struct kube_pod q = p;
    q.ready = true;
    assert_false(ctl_pod_stalled(&q, later, stall));
    q = p;
    q.deleting = true;
    assert_false(ctl_pod_stalled(&q, later, stall));
    q = p;
    q.unschedulable_gpu = KUBE_GPU_NVIDIA;
    assert_false(ctl_pod_stalled(&q, later, stall));
    q = p;
    q.phase = KUBE_POD_FAILED;
    assert_false(ctl_pod_stalled(&q, later, stall));
    /* no time known, or no limit: never */
    q = (struct kube_pod){.phase = KUBE_POD_RUNNING};
    assert_false(ctl_pod_stalled(&q, later, stall));
    assert_false(ctl_pod_stalled(&p, later, 0));
    /* a container that cannot start (a crash loop, an image that will not
     * pull): stalled at once, whatever the time; unless deleting or finished */
    q = (struct kube_pod){.phase = KUBE_POD_RUNNING, .created_ms = t0,
                          .failing = KUBE_FAILING_CRASH_LOOP};
    assert_true(ctl_pod_stalled(&q, t0 + 1, stall));
    assert_true(ctl_pod_stalled(&q, t0 + 1, 0));
    q.phase = KUBE_POD_PENDING;
    q.failing = KUBE_FAILING_IMAGE_PULL;
    assert_true(ctl_pod_stalled(&q, t0 + 1, stall));
    q.deleting = true;
    assert_false(ctl_pod_stalled(&q, t0 + 1, stall));
    q.deleting = false;
    q.phase = KUBE_POD_FAILED;
    assert_false(ctl_pod_stalled(&q, t0 + 1, stall));
    q.phase = KUBE_POD_RUNNING;
    q.ready = true; /* came back */
    assert_false(ctl_pod_stalled(&q, t0 + 1, stall));
}

/* The cold start is learned at each pod's first Ready: a readiness probe
 * that fails under load and passes again (a new Ready transition 40 minutes
 * after creation) is no 40-minute start; a pod not Ready keeps its start
 * while it exists, a pod gone leaves, and a new pod of the same name is a
 * new start. */
static void test_cold_start_first_ready(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    const int64_t t0 = 1700000000000LL;
    struct kube_pod a = {.name = "a", .phase = KUBE_POD_RUNNING, .ready = true,
                         .created_ms = t0, .scheduled_ms = t0 + 10000,
                         .ready_transition_ms = t0 + 190000};
    struct kube_pod b = {.name = "b", .phase = KUBE_POD_RUNNING, .ready = true,
                         .created_ms = t0, .scheduled_ms = t0 + 20000,
                         .ready_transition_ms = t0 + 150000};
    struct kube_pod n = {.name = "c", .phase = KUBE_POD_PENDING, .created_ms = t0};
    const struct kube_pod *pods[3] = {&b, &a, &n};
    ctl_cold_start_learn(w, pods, 3);
    assert_int_equal(w->learned_schedule_ms, 20000);
    assert_int_equal(w->learned_load_ms, 180000);
    assert_int_equal(w->learned_cold_start_ms, 200000);
    assert_int_equal(w->cold_pods_n, 2); /* c has not started yet */

    /* a's readiness fails under load, then passes 40 minutes after creation */
    a.ready = false;
    ctl_cold_start_learn(w, pods, 3);
    assert_int_equal(w->cold_pods_n, 2);
    assert_int_equal(w->learned_cold_start_ms, 20000 + 130000); /* b's only now */
    a.ready = true;
    a.ready_transition_ms = t0 + 2400000;
    ctl_cold_start_learn(w, pods, 3);
    assert_int_equal(w->learned_load_ms, 180000);
    assert_int_equal(w->learned_cold_start_ms, 200000);

    /* c starts (5 min of load), a is deleted and made again under its name */
    n.phase = KUBE_POD_RUNNING;
    n.ready = true;
    n.scheduled_ms = t0 + 5000;
    n.ready_transition_ms = t0 + 305000;
    a.created_ms = t0 + 3000000;
    a.scheduled_ms = t0 + 3001000;
    a.ready_transition_ms = t0 + 3061000;
    ctl_cold_start_learn(w, pods, 3);
    assert_int_equal(w->learned_schedule_ms, 20000);
    assert_int_equal(w->learned_load_ms, 300000);
    assert_int_equal(w->cold_pods_n, 3);
    const struct kube_pod *only_a[1] = {&a};
    ctl_cold_start_learn(w, only_a, 1);
    assert_int_equal(w->cold_pods_n, 1);
    assert_int_equal(w->learned_cold_start_ms, 1000 + 60000);
    ctl_cold_start_free(w);
    assert_null(w->cold_pods);

    /* after a restart: tracked from t0 + 3,000 s with the status annotation's 20 s + 180 s;
     * b was Ready before, its condition from a readiness flap at 30 minutes: bounded by
     * what was learned; c turns Ready after tracking began, with a longer load: its own */
    memset(w, 0, sizeof(*w));
    w->tracked_since_ms = t0 + 3000000;
    w->prior_schedule_ms = 20000;
    w->prior_load_ms = 180000;
    w->prior_at_ms = t0 + 2950000;
    b.ready_transition_ms = t0 + 1800000;
    const struct kube_pod *after[1] = {&b};
    ctl_cold_start_learn(w, after, 1);
    assert_int_equal(w->learned_schedule_ms, 20000);
    assert_int_equal(w->learned_load_ms, 180000);
    n.created_ms = t0 + 2900000;
    n.scheduled_ms = t0 + 2905000;
    n.ready_transition_ms = t0 + 3150000;
    const struct kube_pod *both[2] = {&b, &n};
    ctl_cold_start_learn(w, both, 2);
    assert_int_equal(w->learned_load_ms, 245000);
    assert_int_equal(w->learned_cold_start_ms, 20000 + 245000);
    /* a pod made after that status was written (a rollout while no replica
     * acted: another model, loading for 10 minutes) is not bounded by it */
    ctl_cold_start_free(w);
    struct kube_pod r = {.name = "r", .phase = KUBE_POD_RUNNING, .ready = true,
                         .created_ms = t0 + 2960000, .scheduled_ms = t0 + 2961000,
                         .ready_transition_ms = t0 + 2961000 + 600000};
    w->tracked_since_ms = t0 + 3600000;
    const struct kube_pod *rolled[1] = {&r};
    ctl_cold_start_learn(w, rolled, 1);
    assert_int_equal(w->learned_load_ms, 600000);
    /* without an annotation, the condition is all there is */
    ctl_cold_start_free(w);
    memset(w, 0, sizeof(*w));
    w->tracked_since_ms = t0 + 3000000;
    ctl_cold_start_learn(w, after, 1);
    assert_int_equal(w->learned_load_ms, 1800000 - 20000);
    ctl_cold_start_free(w);
    free(w);
    /* a forecaster keeps its rate floor within 4x of the configuration's */
    assert_true(ctl_floor_kept(8, 8) && ctl_floor_kept(8, 32) && ctl_floor_kept(8, 2));
    assert_false(ctl_floor_kept(8, 32.5) || ctl_floor_kept(8, 1.9) || ctl_floor_kept(0, 8));
}

/* ---- the Prometheus source's per-pod answer ------------------------------------ */

#define T0 1700000000000LL
#define GRACE 135000 /* the 2m window and a decision interval */

static struct kube_pod pod_at(const char *name, int64_t ready_ms)
{
    return (struct kube_pod){.name = name, .ip = "10.0.0.1", .phase = KUBE_POD_RUNNING,
                             .ready = true, .ready_transition_ms = ready_ms};
}

/* An answer: pods named in `counted` are in the rate; running[i] of names[i]
 * (NAN: no series). Replaces w's as pq_answered does. */
static void answer(struct ctl_wl *w, size_t n, const char *const *names, const double *running,
                   const char *counted)
{
    promql_pods_free(&w->pq_pods);
    struct promql_pods *pp = &w->pq_pods;
    pp->v = calloc(n + 1, sizeof(*pp->v));
    assert_non_null(pp->v);
    for (size_t i = 0; i < n; i++) {
        pp->v[i] = (struct promql_pod){.name = xstrdup(names[i]), .running = running[i],
                                       .waiting = NAN};
        pp->v[i].counted = strstr(counted, names[i]) != NULL;
        pp->running_seen = pp->running_seen || !isnan(running[i]);
        pp->counted_seen = pp->counted_seen || pp->v[i].counted;
    }
    pp->n = n;
    w->pq_pods_have = w->pq_pods_fresh = true;
}

static void obs_valid(struct ctl_obs *o, int32_t ready)
{
    memset(o, 0, sizeof(*o));
    o->m.valid = true;
    o->m.request_rate = 20;
    o->m.busy = 4;
    o->serving = ready;
}

static void wl_done(struct ctl_wl *w)
{
    promql_pods_free(&w->pq_pods);
    for (size_t i = 0; i < w->pq_bl_n; i++)
        xfree(w->pq_bl[i].name);
    xfree(w->pq_bl);
    free(w);
}

/* After a 2 -> 10 scale-out the rate counts the 2 old pods: the 8 new ones
 * are warming (not serving, the rate not spread over them) until a rate
 * window after they turned Ready; then they are missing: an average share
 * each while few, a hold when many. */
static void test_prometheus_rate_pods(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    static const char *const names[10] = {"a0", "a1", "b0", "b1", "b2",
                                          "b3", "b4", "b5", "b6", "b7"};
    struct kube_pod pods[10];
    const struct kube_pod *pp[10];
    const int64_t now = T0 + 3600000;
    for (int i = 0; i < 10; i++) {
        pods[i] = pod_at(names[i], i < 2 ? T0 : now - 30000);
        pp[i] = &pods[i];
    }
    double run[10];
    for (int i = 0; i < 10; i++)
        run[i] = 1;
    answer(w, 10, names, run, "a0,a1");
    struct ctl_pq_match m;
    struct ctl_obs o;
    ctl_pq_match(w, pp, 10, now, GRACE, 0, &m);
    assert_true(m.counted_known);
    assert_int_equal(m.ready, 10);
    assert_int_equal(m.counted, 2);
    assert_int_equal(m.warming, 8);
    assert_int_equal(m.missing, 0);
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.valid);
    assert_int_equal(o.serving, 2); /* the 8 are replicas still starting */
    assert_true(o.m.request_rate == 20 && o.m.busy == 4);
    assert_int_equal(o.m.pods_counted, 2);
    assert_int_equal(o.m.pods_stale, 8);
    /* the backlog is every pod's; the running requests beside the rate the counted ones' */
    assert_true(o.m.backlog == 10 && o.m.inflight == 2);

    /* a rate window on, still not counted: missing, more than 30 %: hold */
    const int64_t later = now - 30000 + GRACE;
    ctl_pq_match(w, pp, 10, later, GRACE, 0, &m);
    assert_int_equal(m.missing, 8);
    assert_string_equal(m.missing_pod, "b0");
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_false(o.m.valid);
    assert_string_equal(o.m.why, "8 of 10 ready pods are not in Prometheus' rate 135s after "
                                 "turning Ready (b0): does its PodMonitor or ServiceMonitor "
                                 "select them?");

    /* all but one counted: the one missing serves an average share */
    answer(w, 10, names, run, "a0,a1,b0,b1,b2,b3,b4,b5,b6");
    ctl_pq_match(w, pp, 10, later, GRACE, 0, &m);
    assert_int_equal(m.counted, 9);
    assert_int_equal(m.missing, 1);
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.valid);
    assert_int_equal(o.serving, 10);
    assert_true(fabs(o.m.request_rate - 20.0 * 10 / 9) < 1e-9);
    assert_true(fabs(o.m.busy - 4.0 * 10 / 9) < 1e-9);
    /* the running requests beside the rate too (the service time's, the
     * capacity's), as the GPUs they are set against: 9 counted -> 10; the
     * backlog is the pods' own gauges, all 10 */
    assert_true(fabs(o.m.inflight - 10) < 1e-9);
    assert_true(o.m.backlog == 10);

    /* a pod whose Ready time is not known is not new: missing, not warming */
    pods[9].ready_transition_ms = 0;
    ctl_pq_match(w, pp, 10, now, GRACE, 0, &m);
    assert_int_equal(m.missing, 1);
    assert_int_equal(m.warming, 0);
    assert_string_equal(m.missing_pod, "b7");
    /* the why counts the pods past the grace: 3 of 5, not of 10 */
    answer(w, 10, names, run, "a0,a1");
    for (int i = 2; i < 10; i++)
        pods[i].ready_transition_ms = i < 7 ? now - 1000 : T0;
    ctl_pq_match(w, pp, 10, now, GRACE, 0, &m);
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_false(o.m.valid);
    assert_non_null(strstr(o.m.why, "3 of 5 ready pods are not in Prometheus' rate"));

    /* the Ready pods all new: none counted yet, hold until one is */
    answer(w, 10, names, run, "");
    w->pq_pods.counted_seen = true; /* as when a pod gone is all the rate has */
    for (int i = 0; i < 10; i++)
        pods[i].ready_transition_ms = now - 1000;
    ctl_pq_match(w, pp, 10, now, GRACE, 0, &m);
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_false(o.m.valid);
    assert_string_equal(o.m.why, "all 10 ready pods are new to Prometheus (not yet in its rate)");

    /* no pod counted at all in the answer (a rate query of the workload's own):
     * nothing matched, the ready pods serve */
    answer(w, 10, names, run, "");
    ctl_pq_match(w, pp, 10, now, GRACE, 0, &m);
    assert_false(m.counted_known);
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.valid && o.serving == 10 && o.m.request_rate == 20);
    assert_true(o.m.backlog == 10 && o.m.inflight == 10); /* which pods count is not known */

    /* no per-pod answer: the backlog unknown, as before the query existed */
    promql_pods_free(&w->pq_pods);
    w->pq_pods_have = false;
    ctl_pq_match(w, pp, 10, now, GRACE, 0, &m);
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.valid && o.serving == 10);
    assert_true(o.m.inflight < 0 && o.m.backlog < 0 && o.m.waiting < 0 && o.m.queued < 0);

    /* the default rate's per-pod query failed (a slow Prometheus right after a 2 -> 10
     * scale-out): the cache's Ready times stand in, the 8 new pods warming, not serving
     * (all 10 served, and the rate per replica read 80 % low: a scale-in under load) */
    w->pq_pods_failed = true;
    for (int i = 0; i < 10; i++)
        pods[i].ready_transition_ms = i < 2 ? T0 : now - 30000;
    ctl_pq_match(w, pp, 10, now, GRACE, 0, &m);
    assert_true(m.counted_known && m.by_cache);
    assert_int_equal(m.counted, 2);
    assert_int_equal(m.warming, 8);
    assert_int_equal(m.missing, 0);
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.valid);
    assert_int_equal(o.serving, 2);
    assert_true(o.m.backlog < 0 && !o.recent_growth_known);
    /* a rate window on, all serve */
    ctl_pq_match(w, pp, 10, now - 30000 + GRACE, GRACE, 0, &m);
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.valid && o.serving == 10);
    /* every Ready pod new: hold */
    for (int i = 0; i < 10; i++)
        pods[i].ready_transition_ms = now - 1000;
    ctl_pq_match(w, pp, 10, now, GRACE, 0, &m);
    obs_valid(&o, 10);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_false(o.m.valid);
    assert_non_null(strstr(o.m.why, "all 10 ready pods turned Ready within the rate window"));
    wl_done(w);
}

/* No Ready pod while replicas are asked for (all loading a model, or
 * failing their probes): Prometheus' rate is of pods gone, or 0 from pods
 * that export counters before they serve, so the metrics are missing, as
 * the scraper's "no ready pods to scrape" (valid, the policy's rule for a
 * rate of 0 scaled 8 -> 4 -> 2 -> 1 while every replica loaded). At 0
 * replicas asked for the rate stays valid: it is what wakes the Deployment. */
static void test_prometheus_no_ready_pod(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    static const char *const names[2] = {"a0", "a1"};
    struct kube_pod pods[2];
    const struct kube_pod *pp[2];
    const int64_t now = T0 + 3600000;
    for (int i = 0; i < 2; i++) {
        pods[i] = pod_at(names[i], 0);
        pods[i].ready = false;
        pp[i] = &pods[i];
    }
    double run[2] = {0, 0};
    answer(w, 2, names, run, "a0,a1");
    struct ctl_pq_match m;
    struct ctl_obs o;
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.counted_known);
    assert_int_equal(m.ready, 0);
    obs_valid(&o, 0);
    o.m.request_rate = 0;
    o.spec = 2;
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_false(o.m.valid);
    assert_string_equal(o.m.why, "no ready pods to count (2 asked for)");
    /* scaled to zero: the rate (of pods gone, or a gateway's) stays what wakes it */
    obs_valid(&o, 0);
    o.spec = 0;
    ctl_pq_match(w, NULL, 0, now, GRACE, 0, &m);
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.valid && o.m.request_rate == 20);
    wl_done(w);
}

/* The backlog: a Ready pod absent from an answer keeps its last value; one
 * deleted, or no longer Ready, leaves what it held to the departed, once,
 * and takes it back if it comes back; one answered without its gauges keeps
 * its last value. */
static void test_prometheus_backlog(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    static const char *const names[2] = {"a0", "a1"};
    struct kube_pod pods[2] = {pod_at("a0", T0), pod_at("a1", T0)};
    const struct kube_pod *pp[2] = {&pods[0], &pods[1]};
    const int64_t now = T0 + 3600000;
    struct ctl_pq_match m;
    double run[2] = {5, 7};
    answer(w, 2, names, run, "a0,a1");
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.backlog == 12 && m.running == 12 && m.departed == 0);
    assert_true(m.waiting < 0); /* no waiting series: unknown */

    /* a1's series went stale (a failed scrape): it keeps 7 */
    double run2[2] = {6, NAN};
    answer(w, 2, names, run2, "a0");
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.backlog == 13 && m.running == 6 && m.departed == 0);
    /* the same answer again (no new one yet): unchanged */
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.backlog == 13 && m.departed == 0);

    /* a1 deleted and absent: its 7 departed, once */
    pods[1].deleting = true;
    answer(w, 2, names, run2, "a0");
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.backlog == 6 && m.departed == 7);
    answer(w, 2, names, run2, "a0");
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.backlog == 6 && m.departed == 7);

    /* a1 was not gone: back in an answer (deleted, still scraped), what
     * it held comes out of the departed and its 4 are in the backlog:
     * backlog + departed 13 -> 10, 3 of its 7 finished */
    double run3[2] = {6, 4};
    answer(w, 2, names, run3, "a0,a1");
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.backlog == 10 && m.departed == 0);
    /* absent again and then gone from the cache: 4 departed, once */
    answer(w, 2, names, run2, "a0");
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.backlog == 6 && m.departed == 4);
    answer(w, 1, names, run2, "a0");
    ctl_pq_match(w, pp, 1, now, GRACE, 0, &m);
    assert_true(m.backlog == 6 && m.departed == 4);
    assert_int_equal(w->pq_bl_n, 1);

    /* a0 answered with its counter but no gauges (their target's scrape
     * failed): it keeps its 6, not a drop of the backlog */
    w->pq_pods.v[0].running = NAN;
    w->pq_pods.v[0].requests = 100;
    w->pq_pods.v[0].at_ms = now;
    w->pq_pods.v[0].at_min_ms = now;
    w->pq_pods_fresh = true;
    ctl_pq_match(w, pp, 1, now, GRACE, 0, &m);
    assert_true(m.backlog == 6 && m.departed == 4);
    pods[1].deleting = false; /* back in the list, not answered: Ready */

    /* a0 no longer Ready and absent: its 6 departed too */
    pods[0].ready = false;
    double none[2] = {NAN, NAN};
    answer(w, 2, names, none, "");
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.departed == 10);
    assert_true(m.running < 0 && m.backlog < 0); /* no pod has a gauge: unknown */

    /* another metrics source, or other backlog metrics, start the backlog
     * afresh (a metric name changed kept the samples: an 8-rank running sum
     * of 400 then read as 50, and arrivals as half for a window); other
     * keys keep it */
    struct ctl_workload_config a = w->cfg, b = w->cfg;
    assert_true(ctl_backlog_comparable(&a, &b));
    b.policy.max_replicas = a.policy.max_replicas + 1;
    snprintf(b.scrape.latency_metric, sizeof(b.scrape.latency_metric), "other_seconds");
    assert_true(ctl_backlog_comparable(&a, &b));
    snprintf(b.scrape.inflight_metric, sizeof(b.scrape.inflight_metric),
             "sglang:num_running_reqs{tp_rank=\"0\"}");
    assert_false(ctl_backlog_comparable(&a, &b));
    b = a;
    snprintf(b.scrape.queue_metric, sizeof(b.scrape.queue_metric), "q");
    assert_false(ctl_backlog_comparable(&a, &b));
    b = a;
    snprintf(b.scrape.request_metric, sizeof(b.scrape.request_metric), "r_total");
    assert_false(ctl_backlog_comparable(&a, &b));
    b = a;
    b.source = a.source == CTL_SOURCE_SCRAPE ? CTL_SOURCE_PROMETHEUS : CTL_SOURCE_SCRAPE;
    assert_false(ctl_backlog_comparable(&a, &b));
    ctl_backlog_push(w, now, 5);
    ctl_backlog_reset(w);
    assert_int_equal(w->bl_n, 0);
    assert_true(w->pq_departed == 0 && w->pq_bl_n == 0 && !w->pq_pods_have);
    ctl_pq_match(w, pp, 2, now, GRACE, 0, &m);
    assert_true(m.backlog < 0 && m.departed == 0 && !m.counted_known);
    wl_done(w);
}

/* An answer whose pods report their request counter at `at` (unix ms):
 * requests[i] and backlog[i] (running; NAN none) of names[i], all counted. */
static void sampled(struct ctl_wl *w, size_t n, const char *const *names, const double *requests,
                    const double *backlog, int64_t at)
{
    answer(w, n, names, backlog, "");
    for (size_t i = 0; i < n; i++) {
        w->pq_pods.v[i].counted = true;
        w->pq_pods.v[i].requests = requests[i];
        w->pq_pods.v[i].at_ms = w->pq_pods.v[i].at_min_ms = at;
    }
    w->pq_pods.counted_seen = true;
}

/* The newest rate from Prometheus: each counted pod's counter between its two
 * newest samples, with its backlog's growth between them; known only when
 * every counted pod has two recent samples of one scrape each, the counter
 * not gone down (a reset, of all its series or of one). */
static void test_prometheus_recent(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    static const char *const names[2] = {"a0", "a1"};
    struct kube_pod pods[2] = {pod_at("a0", T0), pod_at("a1", T0)};
    const struct kube_pod *pp[2] = {&pods[0], &pods[1]};
    const int64_t t1 = T0 + 3600000;
    struct ctl_pq_match m;
    double req1[2] = {1000, 2000}, bl1[2] = {4, 4};
    sampled(w, 2, names, req1, bl1, t1);
    ctl_pq_match(w, pp, 2, t1 + 1000, GRACE, 0, &m);
    assert_false(m.recent_known); /* one sample each */

    /* 30 s later: 240 and 300 more completions, the backlogs 4 -> 64 and 4 -> 34 */
    double req2[2] = {1240, 2300}, bl2[2] = {64, 34};
    sampled(w, 2, names, req2, bl2, t1 + 30000);
    ctl_pq_match(w, pp, 2, t1 + 31000, GRACE, 0, &m);
    assert_true(m.recent_known);
    assert_true(fabs(m.recent_rate - 18) < 1e-9);  /* 8 + 10 req/s */
    assert_true(fabs(m.recent_growth - 3) < 1e-9); /* 2 + 1 req/s */
    assert_int_equal(m.recent_span_ms, 30000);
    struct ctl_obs o;
    obs_valid(&o, 2);
    o.m.recent_rate = NAN;
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.recent_rate == 18 && o.m.recent_span_ms == 30000);
    assert_true(o.recent_growth_known && o.recent_growth == 3);

    /* the same answer again: the same rate; a tick past three intervals: stale, unknown */
    sampled(w, 2, names, req2, bl2, t1 + 30000);
    ctl_pq_match(w, pp, 2, t1 + 45000, GRACE, 0, &m);
    assert_true(m.recent_known && fabs(m.recent_rate - 18) < 1e-9);
    ctl_pq_match(w, pp, 2, t1 + 30000 + 90001, GRACE, 0, &m);
    assert_false(m.recent_known);

    /* a0's counter went down (1240 -> 150: a restart, or one of its series reset): how
     * much it served is not known, so neither is the newest rate; the next sample is */
    double req3[2] = {150, 2450}, bl3[2] = {64, 34};
    sampled(w, 2, names, req3, bl3, t1 + 45000);
    ctl_pq_match(w, pp, 2, t1 + 46000, GRACE, 0, &m);
    assert_false(m.recent_known);
    double req4[2] = {300, 2600};
    sampled(w, 2, names, req4, bl3, t1 + 60000);
    ctl_pq_match(w, pp, 2, t1 + 61000, GRACE, 0, &m);
    assert_true(m.recent_known && m.growth_ok);
    assert_true(fabs(m.recent_rate - 20) < 1e-9);
    assert_true(fabs(m.recent_growth) < 1e-9);
    assert_int_equal(m.recent_span_ms, 15000);

    /* a1's series sampled at two times (two targets on the pod, scraped apart): no sample
     * of a1, so not every counted pod has a newest rate */
    double req5[2] = {450, 2750};
    sampled(w, 2, names, req5, bl3, t1 + 75000);
    w->pq_pods.v[1].at_min_ms = t1 + 73000;
    ctl_pq_match(w, pp, 2, t1 + 76000, GRACE, 0, &m);
    assert_false(m.recent_known);

    /* a pod without gauges: the newest completions, but not the backlog's growth */
    double req6[2] = {600, 2900}, nob[2] = {NAN, NAN};
    sampled(w, 2, names, req5, nob, t1 + 90000);
    ctl_pq_match(w, pp, 2, t1 + 91000, GRACE, 0, &m); /* each answer taken by a tick */
    sampled(w, 2, names, req6, nob, t1 + 105000);
    ctl_pq_match(w, pp, 2, t1 + 106000, GRACE, 0, &m);
    assert_true(m.recent_known && !m.growth_ok);
    assert_true(fabs(m.recent_rate - 20) < 1e-9);
    struct ctl_obs o2;
    obs_valid(&o2, 2);
    ctl_pq_apply(&m, 0.3, GRACE, &o2);
    assert_true(o2.m.recent_rate == 20 && !o2.recent_growth_known);
    wl_done(w);
}

/* The refused requests from Prometheus (a spec naming a rejected_metric):
 * their window rate is a query of its own (in the answer's result, as the
 * rate); their newest rate is each counted pod's counter between the same
 * samples as its completions, a counter the pod never had counting from 0
 * (TGI makes it with the first refusal), one missing from an answer (its
 * target gone stale) keeping its last value. A change of the metric starts
 * the samples afresh. Without a rejected_metric, or without the window rate,
 * the newest rate stays unknown. */
static void test_prometheus_refused(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    scrape_spec_init(&w->cfg.scrape, SCRAPE_TGI);
    static const char *const names[2] = {"a0", "a1"};
    struct kube_pod pods[2] = {pod_at("a0", T0), pod_at("a1", T0)};
    const struct kube_pod *pp[2] = {&pods[0], &pods[1]};
    const int64_t t1 = T0 + 3600000;
    struct ctl_pq_match m;
    double req1[2] = {1000, 2000}, bl[2] = {4, 4};
    sampled(w, 2, names, req1, bl, t1);
    w->pq_pods.v[0].refused = 100;
    w->pq_pods.v[1].refused = NAN;
    ctl_pq_match(w, pp, 2, t1 + 1000, GRACE, 0, &m);
    assert_true(m.refused_known && !m.recent_known);

    double req2[2] = {1240, 2300};
    sampled(w, 2, names, req2, bl, t1 + 30000);
    w->pq_pods.v[0].refused = 160; /* 2 req/s */
    w->pq_pods.v[1].refused = 30;  /* its first refusals: 1 req/s */
    ctl_pq_match(w, pp, 2, t1 + 31000, GRACE, 0, &m);
    assert_true(m.recent_known && fabs(m.recent_rate - 18) < 1e-9);
    assert_true(fabs(m.refused_recent - 3) < 1e-9);
    struct ctl_obs o;
    obs_valid(&o, 2);
    o.m.recent_rate = o.m.rejected_recent = NAN;
    o.m.rejected_rate = 2.5; /* the window query's */
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.rejected_rate == 2.5 && fabs(o.m.rejected_recent - 3) < 1e-9);
    assert_true(o.m.request_rate == 20); /* the completions, apart */
    obs_valid(&o, 2); /* the window query failed: the newest rate is not said either */
    o.m.recent_rate = o.m.rejected_rate = o.m.rejected_recent = NAN;
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(o.m.recent_rate == 18 && isnan(o.m.rejected_recent));

    /* a1's counter missing from an answer, then back: its last value was kept, so
     * only what it gained counts (read as 0, its 60 would have passed for 60 s's) */
    double req3[2] = {1480, 2600};
    sampled(w, 2, names, req3, bl, t1 + 60000);
    w->pq_pods.v[0].refused = 220;
    w->pq_pods.v[1].refused = NAN;
    ctl_pq_match(w, pp, 2, t1 + 61000, GRACE, 0, &m);
    assert_true(m.recent_known && fabs(m.refused_recent - 2) < 1e-9);
    double req4[2] = {1720, 2900};
    sampled(w, 2, names, req4, bl, t1 + 90000);
    w->pq_pods.v[0].refused = 280;
    w->pq_pods.v[1].refused = 60;
    ctl_pq_match(w, pp, 2, t1 + 91000, GRACE, 0, &m);
    assert_true(m.recent_known && fabs(m.refused_recent - 3) < 1e-9);

    /* another refused counter: the samples start afresh, not its whole count against
     * the other's (20 req/s read as 800 refused before) */
    struct ctl_workload_config was = w->cfg;
    snprintf(w->cfg.scrape.rejected_metric, sizeof(w->cfg.scrape.rejected_metric),
             "http_requests_total{code=\"429\"}");
    assert_false(ctl_backlog_comparable(&was, &w->cfg));
    ctl_backlog_reset(w);
    double req5[2] = {1960, 3200};
    sampled(w, 2, names, req5, bl, t1 + 120000);
    w->pq_pods.v[0].refused = w->pq_pods.v[1].refused = 24000;
    ctl_pq_match(w, pp, 2, t1 + 121000, GRACE, 0, &m);
    assert_false(m.recent_known);
    double req6[2] = {2200, 3500};
    sampled(w, 2, names, req6, bl, t1 + 150000);
    w->pq_pods.v[0].refused = w->pq_pods.v[1].refused = 24003;
    ctl_pq_match(w, pp, 2, t1 + 151000, GRACE, 0, &m);
    assert_true(m.recent_known && fabs(m.refused_recent - 0.2) < 1e-9);

    w->cfg.scrape.rejected_metric[0] = '\0'; /* vLLM's: none */
    ctl_pq_match(w, pp, 2, t1 + 152000, GRACE, 0, &m);
    assert_false(m.refused_known);
    obs_valid(&o, 2);
    o.m.rejected_rate = o.m.rejected_recent = NAN;
    ctl_pq_apply(&m, 0.3, GRACE, &o);
    assert_true(isnan(o.m.rejected_rate) && isnan(o.m.rejected_recent));
    wl_done(w);
}

/* A pod scraped by more than one target at one address: the DuplicateScrape
 * message counts the pods of the kept answer and names the first; none when
 * no answer is kept (its query failed, or the queries changed), so no Event
 * goes out empty. */
static void test_duplicate_scrape_message(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    static const char *const names[3] = {"a0", "a1", "a2"};
    double run[3] = {1, 1, 1};
    char msg[900];
    answer(w, 3, names, run, "a0 a1 a2");
    ctl_pq_dup_msg(w, msg, sizeof(msg));
    assert_string_equal(msg, "");
    w->pq_pods.v[1].dup = w->pq_pods.v[2].dup = 1;
    ctl_pq_dup_msg(w, msg, sizeof(msg));
    assert_non_null(strstr(msg, "2 of 3 pods' request counter is scraped by more than one "
                                "target at one address (pod a1)"));
    assert_true(strlen(msg) < sizeof(msg) - 1); /* whole */
    promql_pods_free(&w->pq_pods); /* no answer kept */
    ctl_pq_dup_msg(w, msg, sizeof(msg));
    assert_string_equal(msg, "");
    wl_done(w);
}

/* With a long service time the newest rate counts over two service times
 * (min_span_ms) where a pod's samples reach so far back: samples 15 s apart
 * and a 40 s floor count from the sample 45 s back, the oldest kept while
 * there are fewer, never across a counter reset; the span said is the
 * shortest pod's. Between its two newest samples alone, a burst a service
 * time absorbs read as demand. */
static void test_prometheus_recent_min_span(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    static const char *const names[1] = {"a0"};
    struct kube_pod pods[1] = {pod_at("a0", T0)};
    const struct kube_pod *pp[1] = {&pods[0]};
    const int64_t t1 = T0 + 3600000, MIN = 40000;
    struct ctl_pq_match m;
    /* 10 req/s, and 40 req/s between 45 s and 60 s; the backlog 1 per second */
    double req = 1000, bl = 0;
    for (int k = 0; k <= 4; k++) {
        int64_t t = t1 + k * 15000;
        if (k > 0)
            req += k == 4 ? 600 : 150;
        bl = k;
        double r1[1] = {req}, b1[1] = {bl};
        sampled(w, 1, names, r1, b1, t);
        ctl_pq_match(w, pp, 1, t + 1000, GRACE, MIN, &m);
        if (k == 0) {
            assert_false(m.recent_known);
        } else if (k < 3) { /* fewer than 40 s kept: from the oldest */
            assert_true(m.recent_known);
            assert_int_equal(m.recent_span_ms, k * 15000);
            assert_true(fabs(m.recent_rate - 10) < 1e-9);
            assert_true(fabs(m.recent_growth - 1.0 / 15) < 1e-9);
        }
    }
    /* at 60 s: from the sample at 15 s (45 s back), 150 + 150 + 600 in 45 s: 20 req/s,
     * not 40 */
    assert_true(m.recent_known && m.growth_ok);
    assert_int_equal(m.recent_span_ms, 45000);
    assert_true(fabs(m.recent_rate - 20) < 1e-9);
    assert_true(fabs(m.recent_growth - 3.0 / 45) < 1e-9);
    /* with no floor, the two newest: the burst */
    ctl_pq_match(w, pp, 1, t1 + 61000, GRACE, 0, &m);
    assert_int_equal(m.recent_span_ms, 15000);
    assert_true(fabs(m.recent_rate - 40) < 1e-9);
    /* samples kept: CTL_PQ_OLD + 1 at most, the oldest going first */
    for (int k = 5; k < 5 + CTL_PQ_OLD + 2; k++) {
        req += 150;
        double r1[1] = {req}, b1[1] = {bl};
        sampled(w, 1, names, r1, b1, t1 + k * 15000);
        ctl_pq_match(w, pp, 1, t1 + k * 15000 + 1000, GRACE, 10 * 60000, &m);
        assert_true(m.recent_known);
        int kept = k < CTL_PQ_OLD ? k : CTL_PQ_OLD;
        assert_int_equal(m.recent_span_ms, kept * 15000);
    }
    /* a reset (the counter down) 15 s ago: only what came after it counts */
    int64_t t = t1 + (5 + CTL_PQ_OLD + 2) * 15000;
    double r2[1] = {50}, b2[1] = {bl};
    sampled(w, 1, names, r2, b2, t);
    ctl_pq_match(w, pp, 1, t + 1000, GRACE, MIN, &m);
    assert_false(m.recent_known);
    double r3[1] = {200};
    sampled(w, 1, names, r3, b2, t + 15000);
    ctl_pq_match(w, pp, 1, t + 16000, GRACE, MIN, &m);
    assert_true(m.recent_known);
    assert_int_equal(m.recent_span_ms, 15000);
    assert_true(fabs(m.recent_rate - 10) < 1e-9);
    wl_done(w);

    /* a new pod (two samples, 15 s) counts its own rate over what it has, and
     * does not shorten the span the sum's noise is judged on: the older pod's
     * 45 s */
    w = calloc(1, sizeof(*w));
    assert_non_null(w);
    static const char *const two[2] = {"a0", "a1"};
    struct kube_pod pods2[2] = {pod_at("a0", T0), pod_at("a1", T0)};
    const struct kube_pod *pp2[2] = {&pods2[0], &pods2[1]};
    for (int k = 0; k <= 4; k++) {
        double r[2] = {1000 + k * 150.0, 5000 + (k - 3) * 300.0}, b[2] = {0, 0};
        sampled(w, k < 3 ? 1 : 2, two, r, b, t1 + k * 15000);
        ctl_pq_match(w, pp2, k < 3 ? 1 : 2, t1 + k * 15000 + 1000, GRACE, MIN, &m);
    }
    ctl_pq_match(w, pp2, 2, t1 + 61000, GRACE, MIN, &m);
    assert_true(m.recent_known);
    assert_int_equal(m.counted, 2);
    assert_int_equal(m.recent_span_ms, 45000);
    assert_true(fabs(m.recent_rate - 30) < 1e-9); /* 10 + 20 req/s */
    /* with only the new pod reaching less than the floor, its span is the one */
    ctl_pq_match(w, pp2 + 1, 1, t1 + 61000, GRACE, MIN, &m);
    assert_int_equal(m.recent_span_ms, 15000);
    wl_done(w);
}

/* How far back the recent arrivals look, and the span their noise is judged
 * on: the floor of two service times lengthens both; a shorter measured span
 * is the noise's; from Prometheus the measured span is both. */
static void test_recent_spans(void **state)
{
    (void)state;
    static const struct {
        int64_t scrape, tick, min, measured;
        bool prometheus;
        int64_t rec, span;
    } cases[] = {
        /* 5 s scrapes, 15 s ticks: a tick's 15 s */
        {5000, 15000, 0, 10000, false, 15000, 10000},
        /* 1 s ticks: two and a half scrapes; llm7b's floor (2 x 6.4 s) is longer */
        {5000, 1000, 0, 0, false, 12500, 12500},
        {5000, 1000, 12800, 15000, false, 12800, 12800},
        {5000, 1000, 12800, 10000, false, 12800, 10000},
        /* a 0.2 s service time does not move 500 ms scrapes' 1.25 s */
        {500, 1000, 400, 1000, false, 1250, 1000},
        /* Prometheus: the pods' measured span, 45 s; unknown, as the scraper's */
        {5000, 15000, 40000, 45000, true, 45000, 45000},
        {5000, 15000, 0, 0, true, 15000, 15000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t rec, span;
        ctl_recent_spans(cases[i].scrape, cases[i].tick, cases[i].min, cases[i].measured,
                         cases[i].prometheus, &rec, &span);
        assert_int_equal(rec, cases[i].rec);
        assert_int_equal(span, cases[i].span);
    }
}

/* The serving replicas and the rates scaled up to them: a failed pod and a
 * stale one (no recent good scrape, not warming up) each serve an average
 * share; a warming one serves none yet (a stale one was left out of both
 * before, and its share of the load read as load gone). */
static void test_serving_counts_stale_pods(void **state)
{
    (void)state;
    struct ctl_obs o;
    memset(&o, 0, sizeof(o));
    o.m.valid = true;
    o.m.request_rate = 20;
    o.m.recent_rate = 22;
    o.m.prompt_token_rate = o.m.generation_token_rate = NAN;
    o.m.prompt_token_recent = o.m.generation_token_recent = NAN;
    o.m.busy = -1;
    o.m.inflight = 4;
    o.m.queued = -1;
    o.m.pods_counted = 2;
    o.m.pods_failed = 1;
    o.m.pods_stale = 3; /* 2 of them warming */
    o.m.pods_warming = 2;
    ctl_obs_serving(&o);
    assert_int_equal(o.serving, 4);
    assert_true(o.m.request_rate == 40);
    assert_true(o.m.recent_rate == 44);
    assert_true(o.m.inflight == 8);
    assert_true(o.m.queued == -1);
    /* all the stale ones warming: none of them serves */
    memset(&o, 0, sizeof(o));
    o.m.request_rate = 20;
    o.m.recent_rate = NAN;
    o.m.busy = o.m.inflight = o.m.queued = -1;
    o.m.pods_counted = 2;
    o.m.pods_stale = o.m.pods_warming = 2;
    ctl_obs_serving(&o);
    assert_int_equal(o.serving, 2);
    assert_true(o.m.request_rate == 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth_since_the_previous_tick),
        cmocka_unit_test(test_growth_edges),
        cmocka_unit_test(test_pod_stalled),
        cmocka_unit_test(test_cold_start_first_ready),
        cmocka_unit_test(test_prometheus_rate_pods),
        cmocka_unit_test(test_prometheus_no_ready_pod),
        cmocka_unit_test(test_prometheus_backlog),
        cmocka_unit_test(test_prometheus_recent),
        cmocka_unit_test(test_prometheus_recent_min_span),
        cmocka_unit_test(test_prometheus_refused),
        cmocka_unit_test(test_duplicate_scrape_message),
        cmocka_unit_test(test_recent_spans),
        cmocka_unit_test(test_serving_counts_stale_pods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

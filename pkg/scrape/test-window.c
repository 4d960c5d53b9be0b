/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the scraper's compact history: the per-pod request ring against
 * policy_counter (the fixed 32-sample ring it replaces), and the
 * per-workload latency window against the computation it replaces (a
 * policy_counter per pod and bucket, each pod's bucket rates summed by le,
 * histogram_quantile over the sum): the same p99 for steady pods, pods whose
 * latency changes within the window, counter resets and bound changes; pods
 * added or removed mid-window weighted by their requests; the column cap;
 * and the bytes a pod and a workload hold. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "scrape-int.h"
#include "util/util.h"

#define IV 5000
#define WIN 60000
#define NB 5

static const double LE[NB] = {0.1, 0.5, 1, 2.5, INFINITY};

/* ---- ring = policy_counter -------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static double frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Random sample streams (jittered times, resets, refused values): every
 * answer of the ring, asked at or after its newest sample as the scraper
 * does, equals policy_counter's. */
static void test_ring_matches_policy_counter(void **state)
{
    (void)state;
    for (int round = 0; round < 200; round++) {
        struct scrape_ring r;
        scrape_ring_init(&r, scrape_ring_cap(WIN, IV));
        struct policy_counter pc;
        memset(&pc, 0, sizeof(pc));
        int64_t base = 1700000000000 + (int64_t)(frand() * 1e6), t = base, newest = base;
        double v = frand() * 1e6;
        for (int i = 0; i < 60; i++) {
            /* scrapes start at their slot plus a delay under 400 ms ... */
            t = base + (int64_t)i * IV + (int64_t)(frand() * 400);
            if (frand() < 0.05) /* ... or a stamp not after the last one: refused by both */
                t = newest - (int64_t)(frand() * 2 * IV);
            double x = frand();
            v = x < 0.05 ? frand() * 10 : x < 0.08 ? (x < 0.065 ? NAN : -1) : v + frand() * 50;
            int a = scrape_ring_add(&r, t, v), b = policy_counter_add(&pc, t, v);
            assert_int_equal(a, b);
            if (a == 0)
                newest = t;
            /* the scraper asks at or after its newest sample */
            for (int64_t now = newest; now <= newest + WIN; now += 7 * IV / 3) {
                double i1 = 0, i2 = 0;
                int64_t s1 = 0, s2 = 0;
                int r1 = scrape_ring_increase(&r, now, WIN, &i1, &s1);
                int r2 = policy_counter_increase(&pc, now, WIN, &i2, &s2);
                assert_int_equal(r1, r2);
                if (r1 == 0) {
                    assert_true(i1 == i2);
                    assert_true(s1 == s2);
                }
            }
        }
        scrape_ring_free(&r);
    }
    /* capacity: the most samples a window holds, within [4, 255] */
    assert_int_equal(scrape_ring_cap(60000, 5000), 13);
    assert_int_equal(scrape_ring_cap(60000, 1000), 61);
    assert_int_equal(scrape_ring_cap(254000, 1000), SCRAPE_RING_MAX);
    assert_int_equal(scrape_ring_cap(3000, 5000), 4);
}

/* Times are kept as 32-bit offsets from a base that follows the oldest
 * sample: a pod scraped for months (and one silent for weeks) still gives
 * policy_counter's answers. */
static void test_ring_long_running(void **state)
{
    (void)state;
    struct scrape_ring r;
    scrape_ring_init(&r, scrape_ring_cap(WIN, IV));
    struct policy_counter pc;
    memset(&pc, 0, sizeof(pc));
    int64_t t = 1700000000000;
    double v = 0;
    for (int day = 0; day < 90; day++) {
        for (int i = 0; i < 20; i++) {
            t += IV;
            v += 7;
            assert_int_equal(scrape_ring_add(&r, t, v), policy_counter_add(&pc, t, v));
        }
        double i1, i2;
        int64_t s1, s2;
        assert_int_equal(scrape_ring_increase(&r, t, WIN, &i1, &s1), 0);
        assert_int_equal(policy_counter_increase(&pc, t, WIN, &i2, &s2), 0);
        assert_true(i1 == i2 && s1 == s2);
        t += day == 40 ? 30LL * 86400000 : 86400000; /* a day, once a month, later */
    }
    assert_true(t - r.base < (int64_t)UINT32_MAX);
    scrape_ring_free(&r);
}

/* A rate window of many intervals (60 s at 1 s, 10 min at 5 s): the ring
 * holds all its samples, so the rate spans the whole window (a ring of 32
 * spanned the last 31 intervals of it), up to SCRAPE_MAX_WINDOW_INTERVALS. */
static void test_ring_long_window(void **state)
{
    (void)state;
    const int64_t wins[][2] = {{60000, 1000}, {600000, 5000},
                               {SCRAPE_MAX_WINDOW_INTERVALS * 1000LL, 1000}};
    for (size_t k = 0; k < sizeof(wins) / sizeof(wins[0]); k++) {
        int64_t win = wins[k][0], iv = wins[k][1];
        struct scrape_ring r;
        scrape_ring_init(&r, scrape_ring_cap(win, iv));
        int64_t t0 = 1700000000000, n = 2 * win / iv;
        for (int64_t i = 0; i <= n; i++)
            assert_int_equal(scrape_ring_add(&r, t0 + i * iv, (double)i * 10), 0);
        double inc;
        int64_t span;
        assert_int_equal(scrape_ring_increase(&r, t0 + n * iv, win, &inc, &span), 0);
        assert_true(span == win - iv);
        assert_true(inc == (double)(win / iv - 1) * 10);
        scrape_ring_free(&r);
    }
}

/* ---- window = per-pod bucket rates -------------------------------------- */

/* A fake pod: cumulative bucket counts advanced by a latency distribution
 * (cumulative fraction per bound) at a request rate. */
struct fpod {
    double count[NB];
    double cdf[NB];
    double rate;
    int64_t phase;
    bool gone;
    struct scrape_podstate st;
    struct policy_counter ref[NB]; /* the replaced computation */
};

struct world {
    struct scrape_window w;
    struct fpod pods[8];
    int n;
};

static void world_init(struct world *wd)
{
    memset(wd, 0, sizeof(*wd));
    scrape_window_init(&wd->w, IV, WIN);
}

static struct fpod *pod_add(struct world *wd, double rate, const double *cdf, int64_t phase)
{
    struct fpod *p = &wd->pods[wd->n++];
    memset(p, 0, sizeof(*p));
    p->rate = rate;
    p->phase = phase;
    memcpy(p->cdf, cdf, sizeof(p->cdf));
    scrape_podstate_init(&p->st, 0, WIN, IV);
    return p;
}

static void scrape(struct world *wd, struct fpod *p, int64_t t)
{
    struct scrape_sample s = {.has_requests = true, .nbuckets = NB, .samples = 1};
    for (int i = 0; i < NB; i++) {
        s.le[i] = LE[i];
        s.count[i] = p->count[i];
        policy_counter_add(&p->ref[i], t, p->count[i]);
    }
    s.requests = p->count[NB - 1];
    scrape_podstate_ok(&p->st, &wd->w, t, &s);
}

/* Every pod serves for one interval, then the live ones are scraped at
 * their phase within it. */
static void step(struct world *wd, int64_t slot_start)
{
    for (int k = 0; k < wd->n; k++) {
        struct fpod *p = &wd->pods[k];
        if (p->gone)
            continue;
        double req = p->rate * IV / 1000.0;
        for (int i = 0; i < NB; i++)
            p->count[i] += req * p->cdf[i];
        scrape(wd, p, slot_start + p->phase);
    }
}

/* Today's computation: each pod's per-bucket rates (or increases) over the
 * window, summed by le; a pod with fewer than two samples in it (or skip)
 * is left out. A pod no longer scraped keeps its samples here. */
static double reference(struct world *wd, int64_t now, bool by_increase, const struct fpod *skip)
{
    double sum[NB] = {0};
    for (int k = 0; k < wd->n; k++) {
        struct fpod *p = &wd->pods[k];
        double r[NB];
        int64_t span;
        bool ok = p != skip;
        for (int i = 0; i < NB && ok; i++)
            ok = (by_increase ? policy_counter_increase(&p->ref[i], now, WIN, &r[i], &span)
                              : policy_counter_rate(&p->ref[i], now, WIN, &r[i])) == 0;
        if (!ok)
            continue;
        for (int i = 0; i < NB; i++)
            sum[i] += r[i];
    }
    return prom_histogram_quantile(0.99, LE, sum, NB);
}

static void world_free(struct world *wd)
{
    for (int k = 0; k < wd->n; k++)
        scrape_podstate_free(&wd->pods[k].st, &wd->w);
    for (unsigned c = 0; c < wd->w.ncols; c++)
        assert_int_equal(wd->w.refs[c], 0);
    scrape_window_free(&wd->w);
}

static void assert_close(double got, double want)
{
    if (!(fabs(got - want) <= 1e-6 * fabs(want)))
        fail_msg("p99 %.9g, want %.9g", got, want);
}

static const double FAST[NB] = {0.5, 0.95, 0.999, 1, 1};
static const double SLOW[NB] = {0, 0.2, 0.6, 0.97, 1};
static const double MID[NB] = {0.1, 0.6, 0.9, 0.995, 1};

/* The query time sits 3/4 into an interval and the phases in its first
 * quarter: then "the slot's middle is in the window" picks exactly the
 * increases whose both samples are in it, as the per-pod rates do. */
#define T0 ((int64_t)1800000000000)
#define AT(k) (T0 + (int64_t)(k) * IV + 3 * IV / 4)

/* Steady pods with different rates and latencies, and a pod whose latency
 * turns slow in the middle of the window: the same p99 as the per-pod
 * bucket rates summed. */
static void test_window_matches_rates(void **state)
{
    (void)state;
    struct world wd;
    world_init(&wd);
    pod_add(&wd, 30, FAST, 0);
    pod_add(&wd, 10, MID, 700);
    struct fpod *turning = pod_add(&wd, 20, FAST, 1200);
    for (int k = 0; k < 40; k++) {
        if (k == 30)
            memcpy(turning->cdf, SLOW, sizeof(SLOW));
        step(&wd, T0 + (int64_t)k * IV);
        double got = scrape_window_quantile(&wd.w, 0.99, AT(k), WIN);
        double want = reference(&wd, AT(k), false, NULL);
        if (k == 0) {
            assert_true(isnan(got)); /* one scrape each: no increase yet */
            continue;
        }
        assert_close(got, want);
    }
    /* the slow stretch moved the p99 up, and it was seen */
    assert_true(scrape_window_quantile(&wd.w, 0.99, AT(39), WIN) > 1.0);
    /* 12 intervals later the fast past has left the window */
    double late = scrape_window_quantile(&wd.w, 0.99, AT(39) + WIN, WIN);
    assert_true(isnan(late)); /* nothing scraped since: no increase in it */
    world_free(&wd);
}

/* A pod that became a target mid-window counts by its requests, as the
 * request rate does (and as rate() over a series that starts within the
 * window extrapolates), not by the rate over its short life; a pod that
 * went away keeps its increases until they age out. */
static void test_pods_added_and_removed(void **state)
{
    (void)state;
    struct world wd;
    world_init(&wd);
    struct fpod *a = pod_add(&wd, 40, FAST, 0);
    for (int k = 0; k < 20; k++)
        step(&wd, T0 + (int64_t)k * IV);
    double fast = scrape_window_quantile(&wd.w, 0.99, AT(19), WIN);
    assert_close(fast, reference(&wd, AT(19), false, NULL));
    struct fpod *young = pod_add(&wd, 40, SLOW, 500);
    for (int k = 20; k < 26; k++) {
        step(&wd, T0 + (int64_t)k * IV);
        assert_close(scrape_window_quantile(&wd.w, 0.99, AT(k), WIN),
                     reference(&wd, AT(k), true, NULL));
    }
    /* summed per-pod rates would weigh the young pod's 5 intervals as 11 */
    assert_true(fabs(scrape_window_quantile(&wd.w, 0.99, AT(25), WIN) -
                     reference(&wd, AT(25), false, NULL)) > 1e-3);

    young->gone = true; /* dropped by scrape_set_targets: history released */
    scrape_podstate_free(&young->st, &wd.w);
    for (int k = 26; k < 40; k++) {
        step(&wd, T0 + (int64_t)k * IV);
        double got = scrape_window_quantile(&wd.w, 0.99, AT(k), WIN);
        assert_close(got, reference(&wd, AT(k), true, NULL));
        if (k == 30) /* still counted 5 intervals after it left */
            assert_true(got > fast + 0.1);
    }
    /* and no longer 14 intervals after */
    assert_close(scrape_window_quantile(&wd.w, 0.99, AT(39), WIN), fast);
    assert_close(reference(&wd, AT(39), true, NULL), reference(&wd, AT(39), true, young));
    (void)a;
    world_free(&wd);
}

/* A restart: every bucket starts again from 0; the new counts are the
 * increase (as rate() counts a reset), for all buckets together. */
static void test_counter_reset(void **state)
{
    (void)state;
    struct world wd;
    world_init(&wd);
    struct fpod *a = pod_add(&wd, 20, MID, 0);
    pod_add(&wd, 20, FAST, 300);
    for (int k = 0; k < 30; k++) {
        if (k == 22)
            memset(a->count, 0, sizeof(a->count));
        step(&wd, T0 + (int64_t)k * IV);
        if (k > 0)
            assert_close(scrape_window_quantile(&wd.w, 0.99, AT(k), WIN),
                         reference(&wd, AT(k), false, NULL));
    }
    /* a restart where a rarely used bucket still reads higher than before:
     * its new value is its increase too, as for the buckets that dropped */
    struct world w2;
    world_init(&w2);
    static const double rare[NB] = {0.001, 0.5, 0.9, 0.99, 1};
    struct fpod *p = pod_add(&w2, 100, rare, 0);
    step(&w2, T0);      /* 500 requests: the first snapshot */
    step(&w2, T0 + IV); /* 500 more: the first increase */
    assert_true(fabs(p->count[0] - 1) < 1e-9);
    for (int i = 0; i < NB; i++)
        p->count[i] = i == 0 ? 2 : 600 * rare[i]; /* restarted; served 600 since */
    scrape(&w2, p, T0 + 2 * IV);
    double sum0 = 0, sum4 = 0;
    for (unsigned r = 0; r < w2.w.nslots; r++) {
        sum0 += w2.w.cnt[0 * (size_t)w2.w.nslots + r];
        sum4 += w2.w.cnt[4 * (size_t)w2.w.nslots + r];
    }
    assert_true(fabs(sum4 - (500 + 600)) < 1e-3);
    assert_true(fabs(sum0 - (0.5 + 2)) < 1e-3); /* not 2 - 1: the bucket restarted too */
    world_free(&wd);
    world_free(&w2);
}

/* New bounds start the pod's histogram afresh: no increase across the
 * change, the old columns are released, the new ones used. */
static void test_bounds_change(void **state)
{
    (void)state;
    struct world wd;
    world_init(&wd);
    struct fpod *p = pod_add(&wd, 10, MID, 0);
    step(&wd, T0);
    step(&wd, T0 + IV);
    assert_int_equal(wd.w.ncols, NB);
    struct scrape_sample s = {.has_requests = true, .requests = 1e6, .nbuckets = 3, .samples = 1};
    const double le[3] = {0.25, 1, INFINITY};
    for (int i = 0; i < 3; i++) {
        s.le[i] = le[i];
        s.count[i] = 1e6 * (i + 1);
    }
    scrape_podstate_ok(&p->st, &wd.w, T0 + 2 * IV, &s);
    assert_int_equal(wd.w.ncols, NB + 1); /* 0.25 is new; 1 and +Inf are shared */
    assert_int_equal(wd.w.refs[0], 0);   /* 0.1 no longer used by any pod */
    assert_int_equal(p->st.nbuckets, 3);
    /* the change itself added nothing: the window still holds 10 x 5 s */
    double sum = 0;
    for (unsigned r = 0; r < wd.w.nslots; r++)
        sum += wd.w.cnt[(size_t)(NB - 1) * wd.w.nslots + r];
    assert_true(fabs(sum - 50) < 1e-3);
    /* no histogram in the next exposition: the pod's columns are released */
    s.nbuckets = 0;
    scrape_podstate_ok(&p->st, &wd.w, T0 + 3 * IV, &s);
    assert_null(p->st.hist);
    for (unsigned c = 0; c < wd.w.ncols; c++)
        assert_int_equal(wd.w.refs[c], 0);
    world_free(&wd);
}

/* A bound no pod exposes any more, with no increase in the window (the
 * pods rolled out to other buckets, or another latency-metric), is left out
 * of the quantile, as Prometheus ages such a series out: the new bounds 1,
 * 2.5 and +Inf with 50 of 100 observations at or below 1 put the 60th
 * percentile at 1.3, where the old bounds 1.5 and 2 left in, empty, made
 * it 2.1. A bound that still has increases in the window counts. */
static void test_abandoned_bounds(void **state)
{
    (void)state;
    struct scrape_window w;
    scrape_window_init(&w, IV, WIN);
    const double old_le[4] = {1, 1.5, 2, INFINITY}, new_le[3] = {1, 2.5, INFINITY};
    uint8_t oc[4], nc[3];
    assert_int_equal(scrape_window_map(&w, old_le, 4, oc), 0);
    scrape_window_unmap(&w, oc, 4);
    assert_int_equal(scrape_window_map(&w, new_le, 3, nc), 0);
    const double inc[3] = {50, 100, 100};
    scrape_window_add(&w, 1000000, nc, inc, 3);
    assert_true(fabs(scrape_window_quantile(&w, 0.6, 1000000 + IV, WIN) - 1.3) < 1e-9);
    /* an old bound with counts still in the window is a series that ended
     * within it: it counts */
    uint8_t two[1] = {oc[2]};
    const double one[1] = {80};
    scrape_window_add(&w, 1000000, two, one, 1); /* le=2: 80 at or below 2 */
    double q = scrape_window_quantile(&w, 0.6, 1000000 + IV, WIN);
    assert_true(fabs(q - (1 + 10.0 / 30)) < 1e-9); /* 1.5 still left out */
    scrape_window_free(&w);
}

/* Bounds that keep changing cannot grow the window past its column cap;
 * columns no pod uses any more are reused; nothing is lost for the pods
 * whose bounds fit. */
static void test_column_cap(void **state)
{
    (void)state;
    struct scrape_window w;
    scrape_window_init(&w, IV, WIN);
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    struct scrape_sample s = {.has_requests = true, .nbuckets = SCRAPE_MAX_BUCKETS, .samples = 1};
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < SCRAPE_MAX_BUCKETS; i++) {
            s.le[i] = i == SCRAPE_MAX_BUCKETS - 1 ? INFINITY : round * 1000.0 + i;
            s.count[i] = (double)i;
        }
        scrape_podstate_ok(&st, &w, T0 + round * IV, &s);
        assert_non_null(st.hist); /* always room: unused columns are reused */
        assert_true(w.ncols <= SCRAPE_WINDOW_MAX_COLS);
        assert_true(w.capcols <= SCRAPE_WINDOW_MAX_COLS);
    }
    /* two pods that together need more than the cap: the second gets none */
    struct scrape_podstate other;
    scrape_podstate_init(&other, 0, WIN, IV);
    for (int i = 0; i < SCRAPE_MAX_BUCKETS; i++)
        s.le[i] = i == SCRAPE_MAX_BUCKETS - 1 ? INFINITY : -1.0 - i;
    scrape_podstate_ok(&other, &w, T0, &s); /* fits: the first pod's old columns are free */
    assert_non_null(other.hist);
    struct scrape_podstate third;
    scrape_podstate_init(&third, 0, WIN, IV);
    for (int i = 0; i < SCRAPE_MAX_BUCKETS; i++)
        s.le[i] = i == SCRAPE_MAX_BUCKETS - 1 ? INFINITY : 1e9 + i;
    scrape_podstate_ok(&third, &w, T0, &s);
    assert_null(third.hist);
    assert_int_equal(third.fail, SCRAPE_FAIL_NONE); /* the counters still count */
    scrape_podstate_free(&st, &w);
    scrape_podstate_free(&other, &w);
    scrape_podstate_free(&third, &w);
    scrape_window_free(&w);
}

/* Samples not after the pod's last one are ignored (as the ring does);
 * increases older than the window's slots are dropped. */
static void test_out_of_order(void **state)
{
    (void)state;
    struct world wd;
    world_init(&wd);
    struct fpod *p = pod_add(&wd, 10, MID, 0);
    step(&wd, T0);
    step(&wd, T0 + IV);
    double q = scrape_window_quantile(&wd.w, 0.99, T0 + IV, WIN);
    scrape(&wd, p, T0 + IV); /* same time again */
    scrape(&wd, p, T0);      /* older */
    assert_close(scrape_window_quantile(&wd.w, 0.99, T0 + IV, WIN), q);
    /* an increase that began a whole window before the newest slot */
    uint8_t cols[NB];
    double inc[NB] = {1e6, 1e6, 1e6, 1e6, 1e6};
    for (int i = 0; i < NB; i++)
        cols[i] = (uint8_t)i;
    for (int k = 2; k < 20; k++)
        step(&wd, T0 + (int64_t)k * IV);
    double now = scrape_window_quantile(&wd.w, 0.99, AT(19), WIN);
    scrape_window_add(&wd.w, T0, cols, inc, NB);
    assert_close(scrape_window_quantile(&wd.w, 0.99, AT(19), WIN), now);
    world_free(&wd);
}

/* The window's count at bound le, summed over its slots. */
static double window_at(const struct scrape_window *w, double le)
{
    double sum = 0;
    for (unsigned c = 0; c < w->ncols; c++)
        if (w->le[c] == le)
            for (unsigned r = 0; r < w->nslots; r++)
                sum += w->cnt[(size_t)c * w->nslots + r];
    return sum;
}

static void set_series(struct scrape_sample *s, size_t k, uint64_t id, const double c[3])
{
    s->hser_id[k] = id;
    s->hser_has[k] = 7;
    for (int i = 0; i < 3; i++)
        s->hser_count[k][i] = c[i];
}

static void sum_series(struct scrape_sample *s)
{
    for (int i = 0; i < 3; i++) {
        s->count[i] = 0;
        for (size_t k = 0; k < s->hser_n; k++)
            s->count[i] += s->hser_count[k][i];
    }
}

/* Each histogram series counts its own increase, as histogram_quantile over
 * sum by (le) (rate()) does: one that vanishes (a model unloaded) adds
 * nothing, where the drop of the sums read as a reset of every series and
 * put their whole history into the window; one that appears counts from 0;
 * one that resets counts its new values, the others their increases; one
 * back after a gap counts its gain over the gap, or nothing when the gap
 * was longer than the window. */
static void test_histogram_series(void **state)
{
    (void)state;
    struct scrape_window w;
    scrape_window_init(&w, IV, WIN);
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    struct scrape_sample s = {.has_requests = true, .nbuckets = 3, .samples = 1, .hser_n = 2};
    const double le[3] = {0.5, 1, INFINITY};
    memcpy(s.le, le, sizeof(le));
    /* A: fast requests; B: slow ones (over 1 s), with a long history */
    set_series(&s, 0, 0xa, (const double[3]){10, 20, 20});
    set_series(&s, 1, 0xb, (const double[3]){100, 100, 5000});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0, &s); /* the baseline */
    assert_int_equal(st.hist_rows, 2);
    set_series(&s, 0, 0xa, (const double[3]){20, 40, 40});
    set_series(&s, 1, 0xb, (const double[3]){100, 100, 5010});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + IV, &s);
    assert_close(window_at(&w, INFINITY), 20 + 10);
    assert_close(window_at(&w, 1), 20);
    /* B vanishes: A's increase only (the sums' drop used to add 60 here) */
    s.hser_n = 1;
    set_series(&s, 0, 0xa, (const double[3]){30, 60, 60});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + 2 * IV, &s);
    assert_int_equal(st.hist_present, 1);
    assert_int_equal(st.hist_rows, 2); /* B kept, gone */
    assert_close(window_at(&w, INFINITY), 30 + 20);
    assert_close(window_at(&w, 0.5), 10 + 10);
    /* C appears (a lazily created series: from 0), A restarts, and B is
     * back with 20 more slow ones: its gain over the gap, not its 5,030 */
    s.hser_n = 3;
    set_series(&s, 0, 0xc, (const double[3]){1, 1, 3});
    set_series(&s, 1, 0xa, (const double[3]){2, 4, 4});
    set_series(&s, 2, 0xb, (const double[3]){100, 100, 5030});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + 3 * IV, &s);
    assert_int_equal(st.hist_present, 3);
    assert_int_equal(st.hist_rows, 3);
    assert_close(window_at(&w, INFINITY), 50 + 3 + 4 + 20);
    assert_close(window_at(&w, 0.5), 20 + 1 + 2);
    assert_close(window_at(&w, 1), 40 + 1 + 4); /* B adds none here */
    /* too many series to follow (the sums, unknown series): afresh, then the sums' increase */
    s.hser_n = 0;
    s.hser_overflow = true;
    for (int i = 0; i < 3; i++)
        s.count[i] = 100.0 * (i + 1);
    scrape_podstate_ok(&st, &w, T0 + 4 * IV, &s);
    assert_true(st.hist_summed);
    assert_close(window_at(&w, INFINITY), 77);
    for (int i = 0; i < 3; i++)
        s.count[i] += 5;
    scrape_podstate_ok(&st, &w, T0 + 5 * IV, &s);
    assert_close(window_at(&w, INFINITY), 77 + 5);
    scrape_podstate_free(&st, &w);

    /* a series back a window or more after it was last seen is a new
     * baseline, lower than it was or not (rate() has no sample of it in its
     * range from before); one back sooner counts its gain over the gap */
    struct scrape_podstate st2;
    scrape_podstate_init(&st2, 0, WIN, IV);
    int64_t t = T0 + 100 * IV;
    s.hser_overflow = false;
    s.hser_n = 3;
    set_series(&s, 0, 0xa, (const double[3]){0, 0, 0});
    set_series(&s, 1, 0xb, (const double[3]){100, 100, 5000});
    set_series(&s, 2, 0xc, (const double[3]){10, 10, 10});
    sum_series(&s);
    scrape_podstate_ok(&st2, &w, t, &s);
    s.hser_n = 2; /* B gone */
    set_series(&s, 1, 0xc, (const double[3]){10, 10, 10});
    sum_series(&s);
    scrape_podstate_ok(&st2, &w, t + IV, &s);
    s.hser_n = 1; /* C gone too */
    for (int64_t k = 2; k < WIN / IV; k++)
        scrape_podstate_ok(&st2, &w, t + k * IV, &s);
    double before = window_at(&w, INFINITY);
    s.hser_n = 3; /* both back at t + WIN: B lower, C 6 more */
    set_series(&s, 1, 0xb, (const double[3]){100, 100, 4000});
    set_series(&s, 2, 0xc, (const double[3]){10, 10, 16});
    sum_series(&s);
    scrape_podstate_ok(&st2, &w, t + WIN, &s);
    assert_close(window_at(&w, INFINITY), before + 6);
    set_series(&s, 1, 0xb, (const double[3]){100, 100, 4007});
    sum_series(&s);
    scrape_podstate_ok(&st2, &w, t + WIN + IV, &s);
    assert_close(window_at(&w, INFINITY), before + 6 + 7);
    scrape_podstate_free(&st2, &w);
    for (unsigned c = 0; c < w.ncols; c++)
        assert_int_equal(w.refs[c], 0);
    scrape_window_free(&w);
}

/* A bucket line missing from one scrape (a flaky exporter, a truncated
 * family) is a bucket series without that sample, as rate() reads it: the
 * other buckets count their increase and the series is not read as
 * restarted (its 0 there used to put its whole history into the window);
 * the bucket keeps its count and counts its gain over the gap when its line
 * is back. A series' real restart still counts its new values, and a bucket
 * missing then is a baseline when it comes back. */
static void test_histogram_missing_bucket(void **state)
{
    (void)state;
    struct scrape_window w;
    scrape_window_init(&w, IV, WIN);
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    struct scrape_sample s = {.has_requests = true, .nbuckets = 3, .samples = 1, .hser_n = 2};
    const double le[3] = {0.5, 1, INFINITY};
    memcpy(s.le, le, sizeof(le));
    set_series(&s, 0, 0xa, (const double[3]){1000, 2000, 3000});
    set_series(&s, 1, 0xb, (const double[3]){10, 10, 10});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0, &s); /* the baseline */
    /* A lacks its le 1 line (0 there, as the extractor leaves it) */
    set_series(&s, 0, 0xa, (const double[3]){1010, 0, 3030});
    s.hser_has[0] = 5;
    set_series(&s, 1, 0xb, (const double[3]){11, 11, 11});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + IV, &s);
    assert_close(window_at(&w, INFINITY), 30 + 1);
    assert_close(window_at(&w, 0.5), 10 + 1);
    assert_close(window_at(&w, 1), 0 + 1);
    /* back: its gain over both scrapes */
    set_series(&s, 0, 0xa, (const double[3]){1020, 2040, 3060});
    set_series(&s, 1, 0xb, (const double[3]){12, 12, 12});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + 2 * IV, &s);
    assert_close(window_at(&w, INFINITY), 30 + 30 + 2);
    assert_close(window_at(&w, 0.5), 10 + 10 + 2);
    assert_close(window_at(&w, 1), 40 + 2);
    /* A restarts without its le 1 line: its other buckets from 0, and so
     * the missing one, whose whole count is its increase when it comes (as
     * rate() reads the drop from its sample before the restart) */
    set_series(&s, 0, 0xa, (const double[3]){5, 0, 8});
    s.hser_has[0] = 5;
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + 3 * IV, &s);
    assert_close(window_at(&w, INFINITY), 62 + 8);
    assert_close(window_at(&w, 1), 42);
    set_series(&s, 0, 0xa, (const double[3]){6, 7, 9});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + 4 * IV, &s);
    assert_close(window_at(&w, INFINITY), 70 + 1);
    assert_close(window_at(&w, 0.5), 22 + 5 + 1);
    assert_close(window_at(&w, 1), 42 + 7);
    /* a series new this scrape without a line counts it from 0 too */
    s.hser_n = 3;
    set_series(&s, 2, 0xd, (const double[3]){1, 0, 2});
    s.hser_has[2] = 5;
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + 5 * IV, &s);
    assert_close(window_at(&w, 1), 49);
    set_series(&s, 2, 0xd, (const double[3]){1, 2, 2});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + 6 * IV, &s);
    assert_close(window_at(&w, 1), 49 + 2);
    assert_close(window_at(&w, INFINITY), 71 + 2);
    scrape_podstate_free(&st, &w);
    scrape_window_free(&w);
}

/* More series than are followed (the sums only): a line one series lacks
 * this scrape (fewer lines at that bound than before) leaves that bound's
 * sum not known, as a followed series' missing line is; the other bounds
 * count their increase, and the bound its gain over the gap once its line
 * is back. Before, the lower sum read as the whole histogram's restart and
 * put its history into the window. Bounds only some series have (two
 * bucket layouts) keep their number of lines and count as ever; a drop of
 * every bound is a new baseline. */
static void test_histogram_summed_missing_line(void **state)
{
    (void)state;
    struct scrape_window w;
    scrape_window_init(&w, IV, WIN);
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    struct scrape_sample s = {.has_requests = true, .nbuckets = 3, .samples = 1,
                              .hser_overflow = true};
    const double le[3] = {0.5, 1, INFINITY};
    memcpy(s.le, le, sizeof(le));
    const uint16_t all[3] = {9, 9, 9};
    memcpy(s.hsum_n, all, sizeof(all));
    const double base[3] = {1000, 2000, 3000};
    memcpy(s.count, base, sizeof(base));
    scrape_podstate_ok(&st, &w, T0, &s); /* the baseline */
    /* one series (1500 at le 1) lacks its le 1 line */
    s.count[0] = 1010, s.count[1] = 520, s.count[2] = 3030;
    s.hsum_n[1] = 8;
    scrape_podstate_ok(&st, &w, T0 + IV, &s);
    assert_close(window_at(&w, 0.5), 10);
    assert_close(window_at(&w, INFINITY), 30);
    assert_close(window_at(&w, 1), 0);
    /* still missing a scrape later: still not known (not a restart) */
    s.count[0] = 1015, s.count[1] = 530, s.count[2] = 3045;
    scrape_podstate_ok(&st, &w, T0 + 2 * IV, &s);
    assert_close(window_at(&w, INFINITY), 45);
    assert_close(window_at(&w, 1), 0);
    /* back: its gain over the three scrapes */
    s.count[0] = 1020, s.count[1] = 2040, s.count[2] = 3060;
    s.hsum_n[1] = 9;
    scrape_podstate_ok(&st, &w, T0 + 3 * IV, &s);
    assert_close(window_at(&w, 0.5), 20);
    assert_close(window_at(&w, 1), 40);
    assert_close(window_at(&w, INFINITY), 60);
    /* every bound lower: a restart, or a series gone (a model unloaded),
     * which the sums cannot tell: a baseline, nothing counted (read as a
     * restart, the other series' whole histograms went into the window as
     * one interval's), and the next scrape counts from it */
    s.count[0] = 5, s.count[1] = 6, s.count[2] = 7;
    scrape_podstate_ok(&st, &w, T0 + 4 * IV, &s);
    assert_close(window_at(&w, INFINITY), 60);
    assert_close(window_at(&w, 1), 40);
    s.count[0] = 8, s.count[1] = 10, s.count[2] = 12;
    scrape_podstate_ok(&st, &w, T0 + 5 * IV, &s);
    assert_close(window_at(&w, INFINITY), 65);
    assert_close(window_at(&w, 1), 44);

    /* a pod that leaves keeps its rings in a retired copy: the summed lines'
     * state stays with the pod's own (it was freed twice) */
    struct scrape_podstate gone;
    scrape_podstate_retire(&gone, &st, &w);
    scrape_podstate_free(&st, &w);
    scrape_podstate_free(&gone, NULL);
    scrape_window_free(&w);

    /* one series that had le 1 swapped for one that has not (a model swapped): the
     * series at +Inf are others, so le 1's fewer lines are its number now, not a gap
     * for ever (it read as one, and le 1 never counted again) */
    scrape_window_init(&w, IV, WIN);
    scrape_podstate_init(&st, 0, WIN, IV);
    memcpy(s.hsum_n, all, sizeof(all));
    s.hsum_ids[0] = s.hsum_ids[2] = 111; /* the mixed ids of the lines at each bound */
    memcpy(s.count, base, sizeof(base));
    scrape_podstate_ok(&st, &w, T0, &s);
    s.hsum_n[1] = 8;
    s.hsum_ids[0] = s.hsum_ids[2] = 222; /* other series */
    s.count[0] = 1000, s.count[1] = 1800, s.count[2] = 3000;
    scrape_podstate_ok(&st, &w, T0 + IV, &s);
    for (int k = 2; k < 5; k++) {
        s.count[0] += 10, s.count[1] += 20, s.count[2] += 30;
        scrape_podstate_ok(&st, &w, T0 + k * IV, &s);
    }
    assert_true(window_at(&w, 1) >= 60);
    s.hsum_ids[0] = s.hsum_ids[2] = 0;
    scrape_podstate_free(&st, &w);
    scrape_window_free(&w);

    /* two bucket layouts: 5 series with le 0.5, 4 with le 1, all 9 with +Inf;
     * each bound's sum counts its increase every scrape */
    scrape_window_init(&w, IV, WIN);
    scrape_podstate_init(&st, 0, WIN, IV);
    const uint16_t split[3] = {5, 4, 9};
    memcpy(s.hsum_n, split, sizeof(split));
    for (int k = 0; k < 4; k++) {
        s.count[0] = 100 + 10 * k, s.count[1] = 200 + 20 * k, s.count[2] = 300 + 30 * k;
        scrape_podstate_ok(&st, &w, T0 + k * IV, &s);
    }
    assert_close(window_at(&w, 0.5), 30);
    assert_close(window_at(&w, 1), 60);
    assert_close(window_at(&w, INFINITY), 90);
    scrape_podstate_free(&st, &w);
    scrape_window_free(&w);
}

/* A pod with one series (a one-model vLLM) whose le 1 line is missing from
 * a scrape: its bounds are a subset of those it had, which is no new layout
 * (the histogram started afresh twice, losing its increases); the line's
 * count is kept. Missing for longer than the rate window, that count is
 * no longer from within it: the line is a baseline when it comes, as
 * rate() has no sample of it in its range (its gain over the gap put into
 * one slot, above the bounds over it). */
static void test_histogram_missing_line(void **state)
{
    (void)state;
    struct scrape_window w;
    scrape_window_init(&w, IV, WIN);
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    struct scrape_sample s = {.has_requests = true, .nbuckets = 3, .samples = 1, .hser_n = 1};
    const double le[3] = {0.5, 1, INFINITY};
    memcpy(s.le, le, sizeof(le));
    set_series(&s, 0, 0xa, (const double[3]){10, 20, 30});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0, &s);
    /* le 1 missing: two bounds */
    s.nbuckets = 2;
    s.le[1] = INFINITY;
    s.hser_count[0][0] = 11, s.hser_count[0][1] = 33;
    s.hser_has[0] = 3;
    s.count[0] = 11, s.count[1] = 33;
    scrape_podstate_ok(&st, &w, T0 + IV, &s);
    assert_int_equal(st.nbuckets, 3);
    assert_close(window_at(&w, 0.5), 1);
    assert_close(window_at(&w, INFINITY), 3);
    assert_close(window_at(&w, 1), 0);
    memcpy(s.le, le, sizeof(le));
    s.nbuckets = 3;
    set_series(&s, 0, 0xa, (const double[3]){12, 25, 36});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, T0 + 2 * IV, &s);
    assert_close(window_at(&w, 1), 5);
    assert_close(window_at(&w, INFINITY), 6);
    scrape_podstate_free(&st, &w);
    scrape_window_free(&w);

    /* missing a window and more */
    scrape_window_init(&w, IV, WIN);
    scrape_podstate_init(&st, 0, WIN, IV);
    int64_t t = T0 + 1000 * IV;
    set_series(&s, 0, 0xa, (const double[3]){10, 20, 30});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, t, &s);
    s.hser_has[0] = 5;
    for (int k = 1; k <= WIN / IV + 1; k++) {
        set_series(&s, 0, 0xa, (const double[3]){10, 0, 30 + k});
        s.hser_has[0] = 5;
        sum_series(&s);
        scrape_podstate_ok(&st, &w, t + k * IV, &s);
    }
    set_series(&s, 0, 0xa, (const double[3]){10, 60, 50});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, t + (WIN / IV + 2) * IV, &s);
    assert_close(window_at(&w, 1), 0);
    set_series(&s, 0, 0xa, (const double[3]){10, 62, 52});
    sum_series(&s);
    scrape_podstate_ok(&st, &w, t + (WIN / IV + 3) * IV, &s);
    assert_close(window_at(&w, 1), 2);
    scrape_podstate_free(&st, &w);
    scrape_window_free(&w);
}

/* The footprint the scraper is sized by: a vLLM pod (22 bounds, its request
 * counter's series followed one by one) holds under 750 bytes of state (722
 * since the refused requests' ring, 690 before), its workload's window under
 * 2 KB. */
static void test_memory(void **state)
{
    (void)state;
    struct scrape_window w;
    scrape_window_init(&w, IV, WIN);
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    struct scrape_sample s = {.has_requests = true, .nbuckets = 22, .samples = 1, .hser_n = 1};
    s.hser_has[0] = (UINT64_C(1) << 22) - 1;
    for (int i = 0; i < 22; i++) {
        s.le[i] = i == 21 ? INFINITY : 0.1 * (i + 1);
        s.count[i] = s.hser_count[0][i] = 10.0 * i;
    }
    for (int k = 0; k < 20; k++) {
        s.requests = 100.0 * k;
        for (int i = 0; i < 22; i++)
            s.hser_count[0][i] = s.count[i] += i;
        scrape_podstate_ok(&st, &w, T0 + k * IV, &s);
    }
    size_t pod = sizeof(st) + scrape_podstate_memory(&st), win = scrape_window_memory(&w);
    printf("podstate %zu bytes (struct %zu), window %zu bytes\n", pod, sizeof(st), win);
    assert_true(pod < 750);
    assert_true(win < 2048);
    scrape_podstate_free(&st, &w);
    scrape_window_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_matches_policy_counter),
        cmocka_unit_test(test_ring_long_running),
        cmocka_unit_test(test_ring_long_window),
        cmocka_unit_test(test_window_matches_rates),
        cmocka_unit_test(test_pods_added_and_removed),
        cmocka_unit_test(test_counter_reset),
        cmocka_unit_test(test_bounds_change),
        cmocka_unit_test(test_abandoned_bounds),
        cmocka_unit_test(test_column_cap),
        cmocka_unit_test(test_histogram_series),
        cmocka_unit_test(test_histogram_missing_bucket),
        cmocka_unit_test(test_histogram_missing_line),
        cmocka_unit_test(test_histogram_summed_missing_line),
        cmocka_unit_test(test_out_of_order),
        cmocka_unit_test(test_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

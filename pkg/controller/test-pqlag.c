/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for the Prometheus source's ingestion-lag arithmetic (pqlag.c): the
 * two-period windows, the scrape interval from the pods' samples in a window
 * and their steps, an answer's fresh and oldest lags, and the estimate over
 * a sawtooth of phased pods and over a delay that ramps as behind a remote
 * write, at ticks shorter and longer than the scrape interval. */
#include "controller-int.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_win2(void **state)
{
    (void)state;
    struct ctl_win2 m = {0};
    int64_t out = -1;
    assert_false(ctl_win2_get(&m, false, &out));
    assert_int_equal(ctl_win2_add(&m, 1000, 100, 5, false), 5);
    assert_int_equal(ctl_win2_add(&m, 1050, 100, 3, false), 3);
    /* the next period: the one before is kept */
    assert_int_equal(ctl_win2_add(&m, 1120, 100, 7, false), 3);
    assert_int_equal(ctl_win2_add(&m, 1210, 100, 9, false), 7);
    /* a period skipped: the one before it is gone */
    assert_int_equal(ctl_win2_add(&m, 1450, 100, 8, false), 8);
    /* another length: the grid goes on from the period now */
    assert_int_equal(ctl_win2_add(&m, 1460, 50, 1, false), 1);
    assert_true(ctl_win2_get(&m, false, &out));
    assert_int_equal(out, 1);
    /* the most */
    struct ctl_win2 x = {0};
    assert_int_equal(ctl_win2_add(&x, 1000, 100, 5, true), 5);
    assert_int_equal(ctl_win2_add(&x, 1150, 100, 2, true), 5);
    assert_int_equal(ctl_win2_add(&x, 1250, 100, 1, true), 2);
    ctl_win2_roll(&x, 1500, 100); /* two periods later, nothing added */
    assert_false(ctl_win2_get(&x, true, &out));
    /* time going back does not roll */
    assert_int_equal(ctl_win2_add(&x, 900, 100, 4, true), 4);
}

static struct promql_pod pod(const char *name, int64_t at, int64_t at_min, bool counted)
{
    return (struct promql_pod){.name = (char *)name, .at_ms = at, .at_min_ms = at_min,
                               .counted = counted};
}

static void test_step_and_interval(void **state)
{
    (void)state;
    struct promql_pod a[] = {pod("a", 10000, 10000, true), pod("b", 12000, 12000, true),
                             pod("d", 13000, 11000, true)};
    struct promql_pod b[] = {pod("a", 30000, 30000, true), pod("b", 22000, 22000, true),
                             pod("c", 5000, 5000, true), pod("d", 14000, 13000, true)};
    struct promql_pods old = {.v = a, .n = 3}, now = {.v = b, .n = 4};
    /* b stepped 10 s, a 20 s (a scrape missed); c is new; d has two targets
     * scraped 2 s apart (steps of 1 s): not counted */
    assert_int_equal(ctl_pq_step(&old, &now, 0, 0), 10000);
    assert_int_equal(ctl_pq_step(NULL, &now, 0, 0), 0);
    assert_int_equal(ctl_pq_step(&now, &old, 0, 0), 0); /* backwards: none */
    /* the samples between the newest before the window and the newest: 4 s
     * (b: 24 over 96 s), whatever the steps; c's 1 over 5 s does not lower it;
     * d's two targets' are not counted, nor a count without a time before */
    b[1].samples = 24;
    b[1].before_ms = 22000 - 96000 + 1700000000000;
    b[1].at_ms = b[1].at_min_ms = 22000 + 1700000000000;
    a[1].at_ms = a[1].at_min_ms = 12000 + 1700000000000;
    b[2].samples = 1;
    b[2].before_ms = 1;
    b[3].samples = 100;
    b[3].before_ms = 1000;
    b[0].samples = 3;
    assert_int_equal(ctl_pq_step(&old, &now, 0, 0), 4000);
    assert_int_equal(ctl_pq_step(NULL, &now, 0, 0), 4000);
    /* b's sample before the window on the window's very edge (Prometheus 2 counts it
     * in the window too: 24 over 96 s would be 25): left out, c's 4999 is the least */
    assert_int_equal(ctl_pq_step(NULL, &now, b[1].before_ms + 120000, 120000), 4999);
    assert_int_equal(ctl_pq_step(NULL, &now, b[1].before_ms + 120001, 120000), 4000);

    /* the shortest over two periods of 150 s; forgotten two periods later */
    struct ctl_win2 m = {0};
    int64_t t = 1700000000000;
    assert_int_equal(ctl_pq_interval(&m, 0, t), 0);
    assert_int_equal(ctl_pq_interval(&m, 20000, t + 1000), 20000);
    assert_int_equal(ctl_pq_interval(&m, 10000, t + 2000), 10000);
    assert_int_equal(ctl_pq_interval(&m, 30000, t + 160000), 10000);
    assert_int_equal(ctl_pq_interval(&m, 0, t + 310000), 30000);
    assert_int_equal(ctl_pq_interval(&m, 0, t + 460000), 0);
}

static void test_lags(void **state)
{
    (void)state;
    int64_t fresh, old;
    struct promql_pod v[] = {pod("a", 100000, 100000, true), pod("b", 95000, 95000, true),
                             pod("c", 60000, 60000, false)};
    struct promql_pods ps = {.v = v, .n = 3, .counted_seen = true};
    assert_true(ctl_pq_lags(&ps, 110000, 10000, &fresh, &old));
    assert_int_equal(fresh, 10000);
    assert_int_equal(old, 15000); /* b's; c is not counted */
    /* b's second series 5 s older: its own; 25 s older, stale: left out */
    v[1].at_min_ms = 90000;
    assert_true(ctl_pq_lags(&ps, 110000, 10000, &fresh, &old));
    assert_int_equal(old, 20000);
    v[1].at_min_ms = 70000;
    assert_true(ctl_pq_lags(&ps, 110000, 10000, &fresh, &old));
    assert_int_equal(old, 15000);
    /* b more than two intervals behind the freshest: not scraped, left out */
    v[1].at_ms = v[1].at_min_ms = 75000;
    assert_true(ctl_pq_lags(&ps, 110000, 10000, &fresh, &old));
    assert_int_equal(old, 10000);
    /* the interval not known: the freshest alone */
    v[1].at_ms = v[1].at_min_ms = 95000;
    assert_true(ctl_pq_lags(&ps, 110000, 0, &fresh, &old));
    assert_int_equal(old, 10000);
    /* clamped: a sample newer than the query's time, or 10 minutes behind */
    assert_true(ctl_pq_lags(&ps, 99000, 10000, &fresh, &old));
    assert_int_equal(fresh, 0);
    assert_true(ctl_pq_lags(&ps, 100000 + 3600000, 10000, &fresh, &old));
    assert_int_equal(fresh, CTL_PQ_LAG_MAX_MS);
    assert_int_equal(old, CTL_PQ_LAG_MAX_MS);
    /* no times */
    for (size_t i = 0; i < 3; i++)
        v[i].at_ms = v[i].at_min_ms = 0;
    assert_false(ctl_pq_lags(&ps, 110000, 10000, &fresh, &old));
}

/* Four pods scraped every `scrape` ms (10 s when 0), a quarter of that
 * apart, their samples visible `delay` after (a sample once visible stays:
 * a delay that grows holds the newest one), asked every `tick` ms (1 s when
 * 0); each answer has the samples of a 2-minute window and the newest
 * before it, as Prometheus gives them. Returns how many answers had a
 * pod's newest sample more than 1.1 intervals (as learned) before their
 * window's end (asked at the estimate before them) from tick `from` on;
 * `low` counts those more than 1.1 true intervals before it that the
 * learned interval let through (their rate read low, and was used). */
struct feed {
    int64_t tick, scrape, jitter; /* jitter: each sample visible up to that much later */
    uint32_t seed;
    struct ctl_win2 iv_win, least, most;
    struct promql_pod v[2][4];
    int cur, low;
    int64_t est, iv;
    bool have;
};

static int run_ticks(struct feed *f, int64_t t0, int from, int to, double (*delay)(int))
{
    static const char *names[] = {"p0", "p1", "p2", "p3"};
    int64_t tick = f->tick ? f->tick : 1000, s = f->scrape ? f->scrape : 10000;
    int past = 0;
    for (int k = from; k < to; k++) {
        int64_t t = t0 + (int64_t)k * tick;
        struct promql_pod *prev = f->v[f->cur], *now = f->v[f->cur ^ 1];
        for (int i = 0; i < 4; i++) {
            int64_t late = 0;
            if (f->jitter > 0) { /* a sample's own delay: an LCG, the same every run */
                f->seed = f->seed * 1664525u + 1013904223u;
                late = (int64_t)(f->seed >> 8) % f->jitter;
            }
            int64_t off = s / 4 * i, vis = t - (int64_t)(delay(k) * 1000) - off - late;
            int64_t at = vis / s * s + off, before = (t - 120000 - off) / s * s + off;
            if (f->have && prev[i].at_ms > at)
                at = prev[i].at_ms;
            now[i] = pod(names[i], at, at, true);
            if (at > before) {
                now[i].before_ms = before;
                now[i].samples = (double)((at - before) / s);
            }
        }
        struct promql_pods po = {.v = prev, .n = 4}, pn = {.v = now, .n = 4};
        int64_t iv = ctl_pq_interval(&f->iv_win, f->have ? ctl_pq_step(&po, &pn, t, 120000) : 0, t);
        int64_t fresh, old;
        assert_true(ctl_pq_lags(&pn, t, iv, &fresh, &old));
        if (f->have && iv > 0 && (old - f->est) * 10 > iv * 11)
            past++;
        else if (f->have && (old - f->est) * 10 > s * 11)
            f->low++;
        f->est = ctl_pq_estimate(&f->least, &f->most, t, iv, tick, fresh, old);
        f->iv = iv;
        f->have = true;
        f->cur ^= 1;
    }
    return past;
}

static double steady5(int k)
{
    (void)k;
    return 5.0;
}

static double ramp(int k) /* 5 s, then from tick 100 on 1 s a second to 45 s */
{
    return k < 100 ? 5.0 : k < 140 ? 5.0 + (k - 100) : 45.0;
}

static void test_estimate(void **state)
{
    (void)state;
    struct feed f = {0};
    int64_t t0 = 1700000000000;
    /* the sawtooth is left out: the estimate is the delay within a second,
     * and no window ends past 1.1 intervals of a pod's samples */
    run_ticks(&f, t0, 0, 40, steady5);
    assert_true(f.est >= 4500 && f.est <= 6000);
    assert_int_equal(run_ticks(&f, t0, 40, 100, steady5), 0);
    assert_true(f.est >= 4500 && f.est <= 6000);
    /* the delay ramps 40 s at 1 s a second: followed from the next tick
     * on, so few answers were asked past 1.1 intervals (each would be asked
     * again); then within a second of it */
    int past = run_ticks(&f, t0, 100, 141, ramp);
    print_message("answers past 1.1 intervals while the delay ramped 40 s: %d\n", past);
    assert_true(past <= 10);
    assert_true(f.est >= 30000);
    assert_int_equal(run_ticks(&f, t0, 141, 200, ramp), 0);
    assert_true(f.est >= 44500 && f.est <= 46000);
    assert_int_equal(f.low, 0);
}

static double ramp15(int k) /* at 15 s ticks: 5 s, then from tick 20 on 0.2 s a second to 45 s */
{
    return k < 20 ? 5.0 : fmin(45.0, 5.0 + 3.0 * (k - 20));
}

/* Ticks three scrape intervals apart (15 s ticks, 5 s scrapes): each pod's
 * newest sample steps 15 s between answers, and the interval learned from
 * those steps alone was 15 s, so an answer 6-16.5 s past a pod's samples
 * (after a growth of the delay: 3 s a tick here, a remote write falling
 * behind by a fifth of its rate) was used and read up to 12 % low: 14 of
 * the ramp's. The samples in the window tell 5 s: each such answer is asked
 * again. */
static void test_estimate_long_ticks(void **state)
{
    (void)state;
    struct feed f = {.tick = 15000, .scrape = 5000};
    int64_t t0 = 1700000000000;
    assert_int_equal(run_ticks(&f, t0, 0, 20, ramp15), 0);
    assert_int_equal(f.iv, 5000);
    assert_true(f.est >= 4500 && f.est <= 10000);
    int past = run_ticks(&f, t0, 20, 40, ramp15);
    print_message("at 15 s ticks and 5 s scrapes, while the delay grew 40 s in 200: %d "
                  "answers past 1.1 intervals (asked again), %d used past them\n", past, f.low);
    assert_true(past >= 5);
    assert_int_equal(f.low, 0);
    assert_true(f.est >= 44500 && f.est <= 50000);
    assert_int_equal(run_ticks(&f, t0, 40, 60, ramp15), 0);
    assert_int_equal(f.low, 0);
}

/* A delay that holds, with samples up to 5 s late to become visible, at 15 s
 * ticks and 5 s scrapes: none used past 1.1 intervals, and a few asked again
 * (27 of 200; bench-pqlag models more pods at random phases). With the
 * steps' interval alone (15 s), 79 were used past it. */
static void test_long_ticks_jitter(void **state)
{
    (void)state;
    struct feed f = {.tick = 15000, .scrape = 5000, .jitter = 5000, .seed = 7};
    int64_t t0 = 1700000000000;
    run_ticks(&f, t0, 0, 20, steady5);
    int past = run_ticks(&f, t0, 20, 220, steady5);
    print_message("at 15 s ticks, 5 s scrapes and samples up to 5 s late: %d of 200 answers "
                  "asked again, %d used past 1.1 intervals\n", past, f.low);
    assert_int_equal(f.low, 0);
    assert_true(past <= 40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_win2),
        cmocka_unit_test(test_step_and_interval),
        cmocka_unit_test(test_lags),
        cmocka_unit_test(test_estimate),
        cmocka_unit_test(test_estimate_long_ticks),
        cmocka_unit_test(test_long_ticks_jitter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

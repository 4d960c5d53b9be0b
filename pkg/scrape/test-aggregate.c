/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the counting rules that turn pod histories into a workload
 * result: a table of pod sets (healthy, failed, warming, stale) with the
 * expected validity, rate, counts and one-line reason; then counter resets,
 * latency histograms across pods, lazily created and vanishing counters, the
 * token counters of demand-unit tokens (rates, resets, absence), and the
 * busy-time counter (its time average, unit, absence), and the backlog's
 * gauges (every pod scraped lately), and the pods that left (their requests
 * in the window). The latency window has
 * its own tests in test-window.c. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "scrape-int.h"
#include "util/util.h"

#define NOW 1000000
#define IV 5000
#define WIN 60000
#define RING scrape_ring_cap(WIN, IV)

static void add(struct scrape_podstate *st, int64_t t, double requests)
{
    struct scrape_sample s = {.requests = requests, .has_requests = true, .samples = 1};
    scrape_podstate_ok(st, NULL, t, &s);
}

/* Pod kinds: 'o' healthy at rate, 'f' healthy then its last scrape failed,
 * 'w' became ready 2 s ago with one sample, 's' last success 20 s ago,
 * 'n' ready 30 s ago and never answered (no samples, no error yet). */
struct pod {
    char kind;
    double rate;
    enum scrape_fail fail;
};

static void build(struct scrape_podstate *st, const struct pod *p)
{
    scrape_podstate_init(st, 0, WIN, IV);
    switch (p->kind) {
    case 'o':
    case 'f':
        for (int64_t t = NOW - WIN + IV; t <= NOW; t += IV)
            add(st, t, p->rate * (double)t / 1000.0);
        if (p->kind == 'f')
            scrape_podstate_fail(st, NOW, p->fail, "boom");
        break;
    case 'w':
        st->since_ms = NOW - 2000;
        add(st, NOW - 1000, 17);
        break;
    case 's':
        for (int64_t t = NOW - WIN + IV; t <= NOW - 20000; t += IV)
            add(st, t, p->rate * (double)t / 1000.0);
        break;
    case 'n':
        st->since_ms = NOW - 30000;
        break;
    }
}

struct agg_case {
    const char *name;
    struct pod pods[12];
    int n;
    double missing_fraction;
    bool valid;
    double rate;
    int counted, failed, stale;
    const char *why;
};

#define OK(r) {'o', r, SCRAPE_FAIL_NONE}
#define FAILED(f) {'f', 1, f}
#define WARMING {'w', 0, SCRAPE_FAIL_NONE}
#define STALE {'s', 1, SCRAPE_FAIL_NONE}
#define NEVER {'n', 0, SCRAPE_FAIL_NONE}

static const struct agg_case cases[] = {
    {"all healthy", {OK(2), OK(3)}, 2, 0.3, true, 5, 2, 0, 0, ""},
    {"one of four failed, under 0.3", {OK(1), OK(1), OK(1), FAILED(SCRAPE_FAIL_TIMEOUT)}, 4, 0.3,
     true, 3, 3, 1, 0, ""},
    {"three of eight failed, over 0.3",
     {OK(1), OK(1), OK(1), OK(1), OK(1), FAILED(SCRAPE_FAIL_REFUSED), FAILED(SCRAPE_FAIL_REFUSED),
      FAILED(SCRAPE_FAIL_TIMEOUT)},
     8, 0.3, false, NAN, 5, 3, 0,
     "3 of 8 ready pods could not be scraped (connection refused: 2, timeout: 1)"},
    {"stale counts as missing", {OK(1), STALE}, 2, 0.3, false, NAN, 1, 0, 1,
     "1 of 2 ready pods could not be scraped (no recent data: 1)"},
    {"never answered, not warming any more", {OK(1), OK(1), OK(1), OK(1), NEVER}, 5, 0.3, true, 4,
     4, 0, 1, ""},
    {"warming alone does not invalidate", {OK(4), WARMING, WARMING, WARMING}, 4, 0.3, true, 4, 1,
     0, 3, ""},
    {"warming left out of both sides",
     {OK(1), OK(1), OK(1), OK(1), FAILED(SCRAPE_FAIL_TIMEOUT), FAILED(SCRAPE_FAIL_TIMEOUT),
      WARMING, WARMING, WARMING, WARMING},
     10, 0.3, false, NAN, 4, 2, 4,
     "2 of 10 ready pods could not be scraped (timeout: 2, warming up: 4)"},
    {"all warming", {WARMING, WARMING}, 2, 0.3, false, NAN, 0, 0, 2,
     "all 2 ready pods are warming up (fewer than 2 scrapes yet)"},
    {"nothing counted", {FAILED(SCRAPE_FAIL_GARBAGE)}, 1, 1.0, false, NAN, 0, 1, 0,
     "1 of 1 ready pods could not be scraped (unparsable: 1)"},
    {"no ready pods", {{0}}, 0, 0.3, false, NAN, 0, 0, 0, "no ready pods to scrape"},
    {"missing fraction 0 tolerates nothing", {OK(1), OK(1), FAILED(SCRAPE_FAIL_HTTP)}, 3, 0, false,
     NAN, 2, 1, 0, "1 of 3 ready pods could not be scraped (HTTP error: 1)"},
};

static void test_counting_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        const struct agg_case *c = &cases[i];
        struct scrape_podstate st[12];
        struct scrape_agg_pod ap[12];
        for (int j = 0; j < c->n; j++) {
            build(&st[j], &c->pods[j]);
            ap[j] = (struct scrape_agg_pod){&st[j], 1, false};
        }
        struct scrape_spec spec;
        scrape_spec_init(&spec, SCRAPE_VLLM);
        spec.missing_fraction = c->missing_fraction;
        struct scrape_result r;
        scrape_aggregate(ap, (size_t)c->n, NULL, &spec, NOW, IV, WIN, &r);
        if (r.valid != c->valid || r.pods_counted != c->counted || r.pods_failed != c->failed ||
            r.pods_stale != c->stale || strcmp(r.why, c->why) != 0 ||
            (c->valid ? fabs(r.request_rate - c->rate) > 1e-9 : !isnan(r.request_rate)))
            fail_msg("%s: valid %d rate %g counted %d failed %d stale %d why '%s'", c->name,
                     r.valid, r.request_rate, r.pods_counted, r.pods_failed, r.pods_stale, r.why);
        assert_int_equal(r.pods_ready, c->n);
        if (c->valid)
            assert_true(r.gpus_ready == c->counted);
        for (int j = 0; j < c->n; j++)
            scrape_podstate_free(&st[j], NULL);
    }
}

/* A restart: the counter drops, the new value is the increase. */
static void test_counter_reset(void **state)
{
    (void)state;
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    const double v[] = {100, 110, 120, 5, 15, 25};
    for (int i = 0; i < 6; i++)
        add(&st, NOW - 25000 + i * IV, v[i]);
    struct scrape_agg_pod ap = {&st, 1, false};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate(&ap, 1, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(fabs(r.request_rate - (10 + 10 + 5 + 10 + 10) / 25.0) < 1e-9);
    scrape_podstate_free(&st, NULL);
}

/* Rates are summed from each series' own increase, as sum(rate()) sums
 * series: a Triton model whose counter (1,000) vanishes while the other
 * rises by 50 a scrape is not a reset of the pod's counter (which read 1,050
 * more than it had as an increase: 10 req/s became 25,018); a series that
 * appears counts from 0, as a counter made on first use does; a series
 * repeated in one exposition counts once. */
static void test_series_come_and_go(void **state)
{
    (void)state;
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_TRITON);
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    char err[200];
    for (int i = 0; i < 6; i++) {
        char body[512];
        double a = 1000 + 50.0 * i;
        if (i < 3) /* b loaded, flat */
            snprintf(body, sizeof(body),
                     "nv_inference_request_success{model=\"a\",version=\"1\"} %g\n"
                     "nv_inference_request_success{model=\"b\",version=\"1\"} 1000\n", a);
        else if (i < 5) /* b unloaded; a repeated line (labels in another order) once */
            snprintf(body, sizeof(body),
                     "nv_inference_request_success{model=\"a\",version=\"1\"} %g\n"
                     "nv_inference_request_success{version=\"1\",model=\"a\"} %g\n", a, a);
        else /* c loaded: a new counter from 0 */
            snprintf(body, sizeof(body),
                     "nv_inference_request_success{model=\"a\",version=\"1\"} %g\n"
                     "nv_inference_request_success{model=\"c\",version=\"1\"} 25\n", a);
        struct scrape_sample s;
        assert_int_equal(scrape_extract_buf(&spec, PROM_FMT_TEXT, body, strlen(body), 0, &s, err,
                                            sizeof(err)), 0);
        if (i == 3)
            assert_true(s.requests == a); /* the repeated series once */
        scrape_podstate_ok(&st, NULL, NOW - 25000 + i * IV, &s);
    }
    struct scrape_agg_pod ap = {&st, 1, false};
    struct scrape_result r;
    scrape_aggregate(&ap, 1, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    /* a: 50 a scrape over 5 intervals, c: 25 in the last one */
    assert_true(fabs(r.request_rate - (5 * 50 + 25) / 25.0) < 1e-9);
    scrape_podstate_free(&st, NULL);
}

/* One scrape of a request counter given as series: ids[i] with value v[i]
 * (id 0 ends the list). */
static void add_series(struct scrape_podstate *st, int64_t t, const uint64_t *ids,
                       const double *v)
{
    struct scrape_sample s = {.has_requests = true, .samples = 1};
    struct scrape_series_set *set = &s.series[SCRAPE_C_REQ];
    for (; ids[set->n]; set->n++) {
        set->id[set->n] = ids[set->n];
        set->v[set->n] = v[set->n];
        s.requests += v[set->n];
    }
    scrape_podstate_ok(st, NULL, t, &s);
}

/* More series than are followed (a Triton pod serving 40 models): the sums'
 * increase. A model unloaded takes its series away and the sum falls: that
 * counts nothing, and the next scrape counts from the new sum (read as a
 * restart, the other 39 series' whole totals counted as one interval's: a
 * rate about 1,000 times the load, for a rate window). */
static void test_series_overflow_falling_sum(void **state)
{
    (void)state;
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    for (int i = 0; i < 8; i++) {
        struct scrape_sample s = {.has_requests = true, .samples = 1};
        struct scrape_series_set *set = &s.series[SCRAPE_C_REQ];
        set->overflow = true; /* the extractor keeps no series then: the sum only */
        int models = i < 4 ? 40 : 39; /* one unloaded before the 5th scrape */
        for (int m = 0; m < models; m++)
            s.requests += 100000 + 10.0 * i; /* each +10 a scrape */
        scrape_podstate_ok(&st, NULL, NOW - 35000 + i * IV, &s);
        if (i == 4) /* 3 scrapes of 40 x 10; the fall counts nothing */
            assert_true(st.total[SCRAPE_C_REQ] == 40 * 100000 + 3 * 400);
    }
    assert_true(st.total[SCRAPE_C_REQ] == 40 * 100000 + 3 * 400 + 3 * 390);
    struct scrape_agg_pod ap = {&st, 1, false};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate(&ap, 1, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(r.request_rate < 100); /* 80 and 78 req/s a scrape, a scrape lost */
    assert_true(r.request_rate > 50);
    scrape_podstate_free(&st, NULL);
}

/* One scrape of a vLLM exposition through the extractor, as the scraper
 * records it: a refused exposition is a failed attempt. */
static void scrape_text(struct scrape_podstate *st, const struct scrape_spec *spec, int64_t t,
                        double count)
{
    char body[96], err[200];
    struct scrape_sample s;
    snprintf(body, sizeof(body), "vllm:request_success_total %.17g\n", count);
    if (scrape_extract_buf(spec, PROM_FMT_TEXT, body, strlen(body), 0, &s, err, sizeof(err)))
        scrape_podstate_fail(st, t, SCRAPE_FAIL_GARBAGE, err);
    else
        scrape_podstate_ok(st, NULL, t, &s);
}

/* A counter glitch no exporter counts to (a uint64 wrapped: 2^64) is refused
 * and the rate goes on (added to the running total, every later +50 rounded
 * away at its 4,096 steps: 0 req/s for as long as the pod lived); counts
 * just below 2^53 that come and go (resets to 0 after each) leave the total
 * counting in ones (10 req/s read as 9.6 or 11.2 after five of them). */
static void test_counter_glitch(void **state)
{
    (void)state;
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_agg_pod ap;
    struct scrape_result r;
    for (int big = 0; big < 2; big++) {
        struct scrape_podstate st;
        scrape_podstate_init(&st, 0, WIN, IV);
        ap = (struct scrape_agg_pod){&st, 1, false};
        int64_t t = NOW - 20 * 60000;
        double c = 1000;
        for (int i = 0; t <= NOW; i++, t += IV) {
            if (i % 40 == 20 && i < 220) {
                /* one glitched scrape; after 2^53 - 1 the counter restarts */
                scrape_text(&st, &spec, t, big ? 9007199254740991.0 : 1.8446744073709552e19);
                if (big)
                    c = 0;
                continue;
            }
            c += 50;
            scrape_text(&st, &spec, t, c);
        }
        scrape_aggregate(&ap, 1, NULL, &spec, NOW, IV, WIN, &r);
        assert_true(r.valid);
        if (fabs(r.request_rate - 10) > 1e-9)
            fail_msg("%s: %.9g req/s after the glitches, want 10 (total %.17g)",
                     big ? "below 2^53" : "2^64", r.request_rate, st.total[SCRAPE_C_REQ]);
        assert_true(st.total[SCRAPE_C_REQ] < SCRAPE_TOTAL_REBASE);
        scrape_podstate_free(&st, NULL);
    }
}

/* A series missing from one exposition and back with its count (a
 * truncated or flaky exposition) counts what it gained over the gap, as
 * rate() does over the samples in its range, not its whole value (which
 * read b's 240 requests as new, 12 req/s as 20.8); back after the ring's
 * window it is a new baseline; back lower it restarted and counts from 0;
 * and the series gone are kept within their cap. */
static void test_series_gap(void **state)
{
    (void)state;
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    for (int i = 0; i < 6; i++) {
        uint64_t ids[] = {1, 2, 0};
        double v[] = {1000 + 50.0 * i, 200 + 10.0 * i};
        if (i == 3)
            ids[1] = 0; /* b missing once */
        add_series(&st, NOW - 25000 + i * IV, ids, v);
    }
    assert_true(st.total[SCRAPE_C_REQ] == 1200 + 250 + 50);
    struct scrape_agg_pod ap = {&st, 1, false};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate(&ap, 1, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(fabs(r.request_rate - 12) < 1e-9);
    scrape_podstate_free(&st, NULL);

    /* a steady; b (5,000) missing 14 scrapes, back 75 s later, past the
     * 60 s window: a baseline; c (300) missing two scrapes and back lower
     * at 20 (restarted), then +1 a scrape; d (700) back 70 s later lower at
     * 10: a baseline too, not a restart (rate() has one sample of it); e
     * back 55 s after it was last seen, +30 over the gap; f back exactly a
     * window later: a baseline (its last sample is out of the window) */
    scrape_podstate_init(&st, 0, WIN, IV);
    for (int i = 0; i <= 16; i++) {
        uint64_t ids[7] = {0};
        double v[6];
        int n = 0;
        ids[n] = 1;
        v[n++] = 1000 + 50.0 * i;
        if (i == 0 || i >= 15) {
            ids[n] = 2;
            v[n++] = i == 0 ? 5000 : 5100 + 10.0 * (i - 15);
        }
        if (i == 0 || i >= 3) {
            ids[n] = 3;
            v[n++] = i == 0 ? 300 : 20 + (i - 3);
        }
        if (i == 0 || i >= 14) {
            ids[n] = 4;
            v[n++] = i == 0 ? 700 : 10 + (i - 14);
        }
        if (i <= 2 || i >= 13) {
            ids[n] = 5;
            v[n++] = i <= 2 ? 100 + i : 132 + (i - 13);
        }
        if (i <= 1 || i >= 13) {
            ids[n] = 6;
            v[n++] = i <= 1 ? 50 + i : 80 + (i - 13);
        }
        add_series(&st, NOW + i * IV, ids, v);
        if (i == 1) { /* a, e, f; then b, c and d gone */
            assert_int_equal(st.last[SCRAPE_C_REQ]->n, 6);
            assert_int_equal(st.last[SCRAPE_C_REQ]->present, 3);
        }
        if (i == 15) /* a 750, b 0, c 20 + 12, d 1, e 2 + 30 + 2, f 1 + 2 */
            assert_true(st.total[SCRAPE_C_REQ] == 7150 + 750 + 0 + 32 + 1 + 34 + 3);
    }
    assert_true(st.total[SCRAPE_C_REQ] == 7150 + 800 + 10 + 33 + 2 + 35 + 4);
    scrape_podstate_free(&st, NULL);

    /* a counter absent at first (made on its first request): its sum-only
     * row is not kept as a series gone */
    scrape_podstate_init(&st, 0, WIN, IV);
    struct scrape_sample none = {.samples = 1};
    scrape_podstate_ok(&st, NULL, NOW, &none);
    assert_int_equal(st.last[SCRAPE_C_REQ]->n, 1);
    uint64_t first[] = {7, 0};
    double three[] = {3};
    add_series(&st, NOW + IV, first, three);
    assert_int_equal(st.last[SCRAPE_C_REQ]->n, 1);
    assert_true(st.total[SCRAPE_C_REQ] == 3);
    scrape_podstate_free(&st, NULL);

    /* series churning past the cap: 32 a scrape, 8 new each time */
    scrape_podstate_init(&st, 0, WIN, IV);
    for (int i = 0; i < 20; i++) {
        uint64_t ids[SCRAPE_MAX_SERIES + 1] = {0};
        double v[SCRAPE_MAX_SERIES];
        for (int k = 0; k < SCRAPE_MAX_SERIES; k++) {
            ids[k] = (uint64_t)(8 * i + k + 1);
            v[k] = 1;
        }
        add_series(&st, NOW + i * IV, ids, v);
        assert_true(st.last[SCRAPE_C_REQ]->n <= 2 * SCRAPE_MAX_SERIES);
        assert_int_equal(st.last[SCRAPE_C_REQ]->present, SCRAPE_MAX_SERIES);
    }
    /* 32 at first, then 8 new series a scrape, each counting its 1 */
    assert_true(st.total[SCRAPE_C_REQ] == 32 + 19 * 8);
    scrape_podstate_free(&st, NULL);
}

/* recent_rate: the rate over the newest two intervals, summed over pods, so a
 * step shows before the rate window sees it; NAN when a counted pod has
 * fewer than two samples in that span. */
static void test_recent_rate(void **state)
{
    (void)state;
    struct scrape_podstate st[2];
    double v[2] = {0, 0};
    for (int p = 0; p < 2; p++)
        scrape_podstate_init(&st[p], 0, WIN, IV);
    for (int64_t t = NOW - WIN + IV; t <= NOW; t += IV) {
        /* 10 req/s each until the last two intervals, then 30 req/s */
        double r = t > NOW - 2 * IV ? 30 : 10;
        for (int p = 0; p < 2; p++) {
            v[p] += r * IV / 1000.0;
            add(&st[p], t, v[p]);
        }
    }
    struct scrape_agg_pod ap[2] = {{&st[0], 1, false}, {&st[1], 1, false}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(fabs(r.recent_rate - 60) < 1e-9);
    assert_true(r.request_rate > 20 && r.request_rate < 30);
    /* it counts between the samples two intervals apart, not over the 2.5
     * intervals looked back */
    assert_int_equal(r.recent_span_ms, 2 * IV);
    /* the intervals are counted back from each pod's newest sample, not
     * from now: 0.9 intervals later the same two are found */
    scrape_aggregate(ap, 2, NULL, &spec, NOW + 9 * IV / 10, IV, WIN, &r);
    assert_true(fabs(r.recent_rate - 60) < 1e-9);
    assert_int_equal(r.recent_span_ms, 2 * IV);
    /* half an interval later, with one pod scraped again half an interval
     * after the last: its samples within 2.5 intervals span 1.5 of them,
     * and the shortest span is the noise's */
    v[1] += 30 * IV / 2000.0;
    add(&st[1], NOW + IV / 2, v[1]);
    scrape_aggregate(ap, 2, NULL, &spec, NOW + IV / 2, IV, WIN, &r);
    assert_true(r.valid);
    assert_int_equal(r.recent_span_ms, 3 * IV / 2);

    /* a pod with one sample in the recent span: unknown */
    scrape_podstate_free(&st[1], NULL);
    scrape_podstate_init(&st[1], 0, WIN, IV);
    add(&st[1], NOW - WIN / 2, 0);
    add(&st[1], NOW - WIN / 4, 100);
    add(&st[1], NOW, 200);
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(isnan(r.recent_rate));
    assert_int_equal(r.recent_span_ms, 0);
    for (int p = 0; p < 2; p++)
        scrape_podstate_free(&st[p], NULL);
}

/* scrape_aggregate_recent: the recent rate over at least recent_min_ms (two
 * service times, from the controller) where two intervals are shorter; 0 is
 * scrape_aggregate's two intervals. */
static void test_recent_rate_min_span(void **state)
{
    (void)state;
    struct scrape_podstate st;
    double v = 0;
    scrape_podstate_init(&st, 0, WIN, IV);
    for (int64_t t = NOW - WIN + IV; t <= NOW; t += IV) {
        /* 10 req/s until the last two intervals, then 30 req/s */
        v += (t > NOW - 2 * IV ? 30 : 10) * IV / 1000.0;
        add(&st, t, v);
    }
    struct scrape_agg_pod ap = {&st, 1, false};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate_recent(&ap, 1, NULL, &spec, NOW, IV, WIN, 0, &r);
    assert_int_equal(r.recent_span_ms, 2 * IV);
    assert_true(fabs(r.recent_rate - 30) < 1e-9);
    /* at least 5 intervals: (3 x 10 + 2 x 30) / 5 */
    scrape_aggregate_recent(&ap, 1, NULL, &spec, NOW, IV, WIN, 5 * IV, &r);
    assert_int_equal(r.recent_span_ms, 5 * IV);
    assert_true(fabs(r.recent_rate - 18) < 1e-9);
    /* 4.5 intervals asked: the samples span 5 of them, never fewer */
    scrape_aggregate_recent(&ap, 1, NULL, &spec, NOW, IV, WIN, 9 * IV / 2, &r);
    assert_int_equal(r.recent_span_ms, 5 * IV);
    /* shorter than two intervals: the two intervals */
    scrape_aggregate_recent(&ap, 1, NULL, &spec, NOW, IV, WIN, IV, &r);
    assert_int_equal(r.recent_span_ms, 2 * IV);
    /* the window's rate is unchanged */
    double win_rate = r.request_rate;
    scrape_aggregate_recent(&ap, 1, NULL, &spec, NOW, IV, WIN, 5 * IV, &r);
    assert_true(r.request_rate == win_rate);
    /* a pod scraped for two intervals only (new) counts its rate over what
     * it has, but the span the sum's noise is judged on stays the old pod's */
    struct scrape_podstate young;
    scrape_podstate_init(&young, 0, WIN, IV);
    add(&young, NOW - 2 * IV, 0);
    add(&young, NOW - IV, 30 * IV / 1000.0);
    add(&young, NOW, 60 * IV / 1000.0);
    struct scrape_agg_pod two[2] = {{&st, 1, false}, {&young, 1, false}};
    scrape_aggregate_recent(two, 2, NULL, &spec, NOW, IV, WIN, 5 * IV, &r);
    assert_true(r.valid);
    assert_true(fabs(r.recent_rate - (18 + 30)) < 1e-9);
    assert_int_equal(r.recent_span_ms, 5 * IV);
    /* without a span asked, the shortest as before */
    scrape_aggregate_recent(two, 2, NULL, &spec, NOW, IV, WIN, 0, &r);
    assert_int_equal(r.recent_span_ms, 2 * IV);
    /* only young pods: theirs */
    struct scrape_agg_pod one = {&young, 1, false};
    scrape_aggregate_recent(&one, 1, NULL, &spec, NOW, IV, WIN, 5 * IV, &r);
    assert_int_equal(r.recent_span_ms, 2 * IV);
    scrape_podstate_free(&young, NULL);
    scrape_podstate_free(&st, NULL);
}

static void add_hist(struct scrape_podstate *st, struct scrape_window *w, int64_t t, double n,
                     const double *cdf, double running)
{
    static const double le[] = {0.5, 1, 2, INFINITY};
    struct scrape_sample s = {.requests = n, .has_requests = true, .inflight = running,
                              .has_inflight = true, .nbuckets = 4, .samples = 1};
    for (int i = 0; i < 4; i++) {
        s.le[i] = le[i];
        s.count[i] = n * cdf[i];
    }
    scrape_podstate_ok(st, w, t, &s);
}

/* p99 = histogram_quantile(0.99, sum by (le) (rate(bucket[window]))) over
 * the pods; gauges are summed; unknown when not configured. */
static void test_latency_and_gauges(void **state)
{
    (void)state;
    static const double fast[] = {0.9, 1, 1, 1}, slow[] = {0, 0.5, 0.9, 1};
    struct scrape_podstate st[2];
    struct scrape_window w;
    scrape_window_init(&w, IV, WIN);
    scrape_podstate_init(&st[0], 0, WIN, IV);
    scrape_podstate_init(&st[1], 0, WIN, IV);
    for (int64_t t = NOW - WIN - IV; t <= NOW; t += IV) {
        add_hist(&st[0], &w, t, 30.0 * (double)t / 1000, fast, 3);
        add_hist(&st[1], &w, t, 10.0 * (double)t / 1000, slow, 4);
    }
    struct scrape_agg_pod ap[2] = {{&st[0], 1, false}, {&st[1], 1, false}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate(ap, 2, &w, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(fabs(r.request_rate - 40) < 1e-6);
    assert_true(r.inflight == 7);
    assert_true(r.queued < 0); /* never reported by these pods */
    /* summed bucket rates: 0.5:27, 1:35, 2:39, Inf:40; rank 39.6 is in
     * the +Inf bucket, which returns the highest finite bound */
    assert_true(fabs(r.p99_ms - 2000) < 1e-6);

    /* p50: rank 20 in (0, 0.5] -> 0.5 * 20 / 27 s; check through a
     * recomputation with prom directly */
    double le[] = {0.5, 1, 2, INFINITY}, cnt[] = {27, 35, 39, 40};
    assert_true(fabs(prom_histogram_quantile(0.5, le, cnt, 4) - 0.5 * 20 / 27) < 1e-9);

    spec.inflight_metric[0] = '\0';
    scrape_aggregate(ap, 2, &w, &spec, NOW, IV, WIN, &r);
    assert_true(r.inflight < 0);
    spec.latency_metric[0] = '\0'; /* no histogram configured: no p99 */
    scrape_aggregate(ap, 2, &w, &spec, NOW, IV, WIN, &r);
    assert_true(r.p99_ms < 0);
    scrape_podstate_free(&st[0], &w);
    scrape_podstate_free(&st[1], &w);
    for (unsigned c = 0; c < w.ncols; c++)
        assert_int_equal(w.refs[c], 0); /* every column released */
    scrape_window_free(&w);
}

static void add_gauges(struct scrape_podstate *st, int64_t t, double requests, double running,
                       double waiting)
{
    struct scrape_sample s = {.requests = requests, .has_requests = true, .inflight = running,
                              .has_inflight = true, .queued = waiting, .has_queued = true,
                              .samples = 3};
    scrape_podstate_ok(st, NULL, t, &s);
}

/* The backlog sums the latest gauges of every pod scraped within 3
 * intervals, warming and failed ones included; the in-flight and queued
 * gauges sum the counted pods only. A scale-out's new pod, sent requests by
 * the balancer while it warms up, so adds its queue as it builds: counted
 * only once the pod is, a balancer's flood to it (all of a 1 s tick's
 * arrivals, say) would be one tick's growth on top of that tick's own. */
static void test_backlog(void **state)
{
    (void)state;
    struct scrape_podstate st[4];
    for (int p = 0; p < 4; p++)
        scrape_podstate_init(&st[p], 0, WIN, IV);
    for (int64_t t = NOW - WIN + IV; t <= NOW; t += IV) {
        add_gauges(&st[0], t, 10.0 * (double)t / 1000, 6, 4);       /* counted */
        if (t <= NOW - 4 * IV)
            add_gauges(&st[3], t, 10.0 * (double)t / 1000, 50, 50); /* stale since */
    }
    st[1].since_ms = NOW - IV; /* warming: one scrape since it turned Ready */
    add_gauges(&st[1], NOW - IV / 2, 3, 8, 5);
    for (int64_t t = NOW - WIN + IV; t <= NOW - IV; t += IV) /* failed at the last scrape */
        add_gauges(&st[2], t, 10.0 * (double)t / 1000, 2, 1);
    scrape_podstate_fail(&st[2], NOW, SCRAPE_FAIL_TIMEOUT, "timeout");
    struct scrape_agg_pod ap[4] = {{&st[0], 1, false}, {&st[1], 1, false}, {&st[2], 1, false}, {&st[3], 1, false}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    spec.missing_fraction = 1;
    struct scrape_result r;
    scrape_aggregate(ap, 4, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 1);
    assert_true(r.inflight == 6 && r.queued == 4);
    assert_true(r.backlog == 6 + 4 + 8 + 5 + 2 + 1);
    assert_true(r.waiting == 4 + 5 + 1); /* the queue to drain: the same pods' */
    /* the failed pod's gauges age out with its last good scrape */
    scrape_aggregate(ap, 4, NULL, &spec, NOW + 2 * IV + 1, IV, WIN, &r);
    assert_true(r.backlog == 6 + 4 + 8 + 5);
    assert_true(r.waiting == 4 + 5);
    /* a gauge not configured is not summed; none configured: unknown */
    spec.queue_metric[0] = '\0';
    scrape_aggregate(ap, 4, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.backlog == 6 + 8 + 2);
    assert_true(r.waiting < 0);
    spec.inflight_metric[0] = '\0';
    scrape_aggregate(ap, 4, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid && r.backlog < 0);
    for (int p = 0; p < 4; p++)
        scrape_podstate_free(&st[p], NULL);
}

/* A scale-in behind a balancer: two pods share 20 req/s until one leaves
 * half a window ago, then the other serves all of it. The one that left
 * counts what it served in the window, spread over it: the rate stays 20
 * (15 without it, 10 right after the scale-in), while it is neither a ready
 * pod nor in the newest intervals' rate, the gauges or the GPUs. */
static void test_gone(void **state)
{
    (void)state;
    struct scrape_podstate st[2];
    scrape_podstate_init(&st[0], 0, WIN, IV);
    scrape_podstate_init(&st[1], 0, WIN, IV);
    const int64_t left = NOW - WIN / 2;
    double a = 0, b = 0;
    for (int64_t t = NOW - WIN - IV; t <= NOW; t += IV) {
        add_gauges(&st[0], t, a, 3, 0);
        if (t <= left)
            add_gauges(&st[1], t, b, 3, 0);
        a += (t < left ? 10 : 20) * IV / 1000.0;
        b += 10 * IV / 1000.0;
    }
    struct scrape_agg_pod ap[2] = {{&st[0], 1, false}, {&st[1], 1, true}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_int_equal(r.pods_ready, 1);
    assert_int_equal(r.pods_counted, 1);
    assert_int_equal(r.pods_stale, 0);
    assert_true(r.gpus_ready == 1);
    assert_true(fabs(r.request_rate - 20) < 0.5);
    assert_true(fabs(r.recent_rate - 20) < 1e-6);
    assert_true(r.inflight == 3 && r.backlog == 3);
    /* left out, the window would count the demand short */
    scrape_aggregate(ap, 1, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(fabs(r.request_rate - 15) < 0.5);
    for (int p = 0; p < 2; p++)
        scrape_podstate_free(&st[p], NULL);
}

/* A rollout of one replica: the old pod served 10 req/s until it left a
 * scrape ago, the new one (Ready two scrapes ago) serves them since. The
 * window reaches back as far as the old pod's samples: about 10 req/s, not
 * the old pod's 50 s of counts over the new pod's 5 s (110). */
static void test_gone_after_rollout(void **state)
{
    (void)state;
    struct scrape_podstate st[2];
    const int64_t left = NOW - IV, born = NOW - 2 * IV;
    scrape_podstate_init(&st[0], 0, WIN, IV);
    scrape_podstate_init(&st[1], born, WIN, IV);
    double a = 0, b = 0;
    for (int64_t t = NOW - WIN - IV; t <= NOW; t += IV) {
        if (t <= left)
            add_gauges(&st[0], t, a, 3, 0);
        if (t > born)
            add_gauges(&st[1], t, b, 3, 0);
        a += 10 * IV / 1000.0;
        if (t > born)
            b += 10 * IV / 1000.0;
    }
    struct scrape_agg_pod ap[2] = {{&st[0], 1, true}, {&st[1], 1, false}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 1);
    assert_true(fabs(r.request_rate - 10) < 1.5);
    assert_true(fabs(r.recent_rate - 10) < 1e-6);
    for (int p = 0; p < 2; p++)
        scrape_podstate_free(&st[p], NULL);
}

/* A counter that does not exist yet is zero (TGI creates them lazily), but
 * a workload where no pod has it is invalid; a counter that vanishes is a
 * failed scrape, not a reset to zero. */
static void test_absent_counter(void **state)
{
    (void)state;
    struct scrape_podstate st[2];
    struct scrape_sample none = {.samples = 3};
    scrape_podstate_init(&st[0], 0, WIN, IV);
    scrape_podstate_init(&st[1], 0, WIN, IV);
    for (int64_t t = NOW - WIN + IV; t <= NOW; t += IV) {
        scrape_podstate_ok(&st[0], NULL, t, &none);
        scrape_podstate_ok(&st[1], NULL, t, &none);
    }
    struct scrape_agg_pod ap[2] = {{&st[0], 1, false}, {&st[1], 1, false}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_TGI);
    struct scrape_result r;
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_false(r.valid);
    assert_true(isnan(r.request_rate));
    assert_string_equal(r.why, "request metric tgi_request_success not found in any pod's exposition");

    /* one pod starts serving: valid, the other counts as 0 */
    scrape_podstate_free(&st[0], NULL);
    scrape_podstate_init(&st[0], 0, WIN, IV);
    for (int64_t t = NOW - WIN + IV; t <= NOW; t += IV)
        add(&st[0], t, 2.0 * (double)t / 1000);
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(fabs(r.request_rate - 2) < 1e-9);
    assert_int_equal(r.pods_counted, 2);

    /* and then its counter vanishes */
    scrape_podstate_ok(&st[0], NULL, NOW + IV, &none);
    assert_int_equal(st[0].fail, SCRAPE_FAIL_GARBAGE);
    assert_string_equal(scrape_podstate_error(&st[0]),
                        "request metric disappeared from the exposition");
    scrape_aggregate(ap, 2, NULL, &spec, NOW + IV, IV, WIN, &r);
    assert_int_equal(r.pods_failed, 1);
    /* the error string is kept only while the pod fails */
    add(&st[0], NOW + 2 * IV, 2.0 * (NOW + 2 * IV) / 1000);
    assert_int_equal(st[0].fail, SCRAPE_FAIL_NONE);
    assert_null(st[0].error);
    assert_string_equal(scrape_podstate_error(&st[0]), "");
    scrape_podstate_free(&st[0], NULL);
    scrape_podstate_free(&st[1], NULL);
}

/* Samples older than the window do not make a rate. */
static void test_window(void **state)
{
    (void)state;
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    add(&st, NOW - 2 * WIN, 10);
    add(&st, NOW - 1000, 20);
    struct scrape_agg_pod ap = {&st, 1, false};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate(&ap, 1, NULL, &spec, NOW, IV, WIN, &r);
    assert_false(r.valid);
    assert_int_equal(r.pods_stale, 1);
    scrape_podstate_free(&st, NULL);
}

static void add_tok(struct scrape_podstate *st, int64_t t, double req, double prompt,
                    double gen, bool has_gen)
{
    struct scrape_sample s = {.requests = req, .has_requests = true, .prompt_tokens = prompt,
                              .has_prompt = true, .gen_tokens = gen, .has_gen = has_gen,
                              .samples = 3};
    scrape_podstate_ok(st, NULL, t, &s);
}

/* Token rates are counted like the request rate: summed over pods, a reset
 * of one counter (a restarted engine) counts its new value, and without the
 * token metrics the rates are NAN. */
static void test_token_rates(void **state)
{
    (void)state;
    struct scrape_podstate st[2];
    scrape_podstate_init(&st[0], 0, WIN, IV);
    scrape_podstate_init(&st[1], 0, WIN, IV);
    /* pod 0: 2 req/s of 500 prompt + 100 generated tokens; pod 1: 1 req/s of
     * 2000 + 50, its generation counter restarting from 0 halfway */
    for (int64_t t = NOW - WIN + IV; t <= NOW; t += IV) {
        double s = (double)t / 1000;
        add_tok(&st[0], t, 2 * s, 1000 * s, 200 * s, true);
        double g = t <= NOW - WIN / 2 ? 50 * s : 50 * (s - (NOW - WIN / 2) / 1000.0);
        add_tok(&st[1], t, s, 2000 * s, g, true);
    }
    struct scrape_agg_pod ap[2] = {{&st[0], 1, false}, {&st[1], 1, false}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct scrape_result r;
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(isnan(r.prompt_token_rate) && isnan(r.generation_token_rate)); /* not asked */

    assert_int_equal(scrape_spec_want_tokens(&spec), 0);
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(fabs(r.request_rate - 3) < 1e-9);
    assert_true(fabs(r.prompt_token_rate - 3000) < 1e-6);
    /* after the restart the counter's new value (250, the tokens since)
     * counts as that interval's increase, as in Prometheus' rate(): no
     * drop, no spike; a sum of the two counters would have dropped */
    double want_gen = 200 + 50;
    assert_true(fabs(r.generation_token_rate - want_gen) < 1e-6);
    assert_true(fabs(r.prompt_token_recent - 3000) < 1e-6);
    assert_true(fabs(r.generation_token_recent - 250) < 1e-6);
    scrape_podstate_free(&st[0], NULL);
    scrape_podstate_free(&st[1], NULL);
}

/* Refused requests (Triton's REJECTED failures, TGI's 429s) are counted like
 * the requests, apart from them: pod 0 finishes 4 req/s and, from halfway
 * through the window, refuses 2 req/s, its counter appearing with the first
 * refusal (a lazily created counter counts from 0); pod 1 finishes 3 req/s
 * and never has the counter (0). Not named by the spec: NAN. */
static void test_rejected_rate(void **state)
{
    (void)state;
    struct scrape_podstate st[2];
    scrape_podstate_init(&st[0], 0, WIN, IV);
    scrape_podstate_init(&st[1], 0, WIN, IV);
    const int64_t from = NOW - WIN / 2;
    for (int64_t t = NOW - WIN + IV; t <= NOW; t += IV) {
        double sec = (double)t / 1000.0;
        struct scrape_sample s0 = {.requests = 4 * sec, .has_requests = true, .samples = 2,
                                   .rejected_wanted = true};
        if (t > from) {
            s0.rejected = 2 * (double)(t - from) / 1000.0;
            s0.has_rejected = true;
        }
        scrape_podstate_ok(&st[0], NULL, t, &s0);
        struct scrape_sample s1 = {.requests = 3 * sec, .has_requests = true, .samples = 1,
                                   .rejected_wanted = true};
        scrape_podstate_ok(&st[1], NULL, t, &s1);
    }
    struct scrape_agg_pod ap[2] = {{&st[0], 1, false}, {&st[1], 1, false}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_TRITON);
    assert_string_equal(spec.rejected_metric, "nv_inference_request_failure{reason=\"REJECTED\"}");
    struct scrape_result r;
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(fabs(r.request_rate - 7) < 1e-9); /* the completions alone */
    /* 60 refused over the 55 s the samples span */
    const double want = 60.0 / 55.0;
    assert_true(fabs(r.rejected_rate - want) < 1e-9);
    assert_true(fabs(r.rejected_recent - 2) < 1e-9);
    assert_true(r.rejected_rate_gone == 0);
    scrape_result_scale_up(&r, 2);
    assert_true(fabs(r.rejected_rate - 2 * want) < 1e-9);
    assert_true(fabs(r.rejected_recent - 4) < 1e-9);
    spec.rejected_metric[0] = '\0';
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid && isnan(r.rejected_rate) && isnan(r.rejected_recent));
    scrape_result_scale_up(&r, 2);
    assert_true(isnan(r.rejected_rate));
    scrape_podstate_free(&st[0], NULL);
    scrape_podstate_free(&st[1], NULL);
}

/* Missing token metrics never make a rate: no pod with the generation
 * counter is invalid (the policy holds, never scaling in); a token counter
 * that vanishes fails the pod. */
static void test_token_missing(void **state)
{
    (void)state;
    struct scrape_podstate st;
    scrape_podstate_init(&st, 0, WIN, IV);
    for (int64_t t = NOW - WIN + IV; t <= NOW; t += IV)
        add_tok(&st, t, 2.0 * (double)t / 1000, 0, 0, false);
    struct scrape_agg_pod ap = {&st, 1, false};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_TGI);
    assert_int_equal(scrape_spec_want_tokens(&spec), 0);
    assert_string_equal(spec.generation_token_metric, "tgi_request_generated_tokens_sum");
    struct scrape_result r;
    scrape_aggregate(&ap, 1, NULL, &spec, NOW, IV, WIN, &r);
    assert_false(r.valid);
    assert_true(isnan(r.request_rate) && isnan(r.generation_token_rate));
    assert_string_equal(r.why, "token metric tgi_request_generated_tokens_sum not found in any "
                               "pod's exposition (demand-unit tokens)");
    /* requests alone are fine without tokens */
    struct scrape_spec req;
    scrape_spec_init(&req, SCRAPE_TGI);
    scrape_aggregate(&ap, 1, NULL, &req, NOW, IV, WIN, &r);
    assert_true(r.valid);

    /* the counter appears, then vanishes: a failed scrape, not a reset */
    add_tok(&st, NOW + IV, 2.0 * (NOW + IV) / 1000, 10, 10, true);
    assert_int_equal(st.fail, SCRAPE_FAIL_NONE);
    add_tok(&st, NOW + 2 * IV, 2.0 * (NOW + 2 * IV) / 1000, 10, 10, false);
    assert_int_equal(st.fail, SCRAPE_FAIL_GARBAGE);
    assert_string_equal(st.error, "token metric disappeared from the exposition");
    scrape_aggregate(&ap, 1, NULL, &spec, NOW + 2 * IV, IV, WIN, &r);
    assert_false(r.valid);
    assert_int_equal(r.pods_failed, 1);
    scrape_podstate_free(&st, NULL);
}

/* One pod's scrape with requests and, when has, the busy-time counter. */
static void add_busy(struct scrape_podstate *st, int64_t t, double requests, double busy,
                     bool has)
{
    struct scrape_sample s = {.requests = requests, .has_requests = true, .busy = busy,
                              .has_busy = has, .samples = 1};
    scrape_podstate_ok(st, NULL, t, &s);
}

/* The busy time's rate is the requests in service averaged over the
 * window, summed over the pods, in seconds whatever the counter's unit; it
 * is unknown while any counted pod lacks two samples of it, and a scrape
 * without it forgets its samples (no 0 between two values read as a reset). */
static void test_busy_time(void **state)
{
    (void)state;
    struct scrape_podstate st[2];
    scrape_podstate_init(&st[0], 0, WIN, IV);
    scrape_podstate_init(&st[1], 0, WIN, IV);
    /* pod 0: 20 req/s of 0.3 s (6 in service); pod 1: 10 req/s of 0.2 s (2) */
    for (int64_t t = NOW - WIN - IV; t <= NOW; t += IV) {
        double s = (double)t / 1000.0;
        add_busy(&st[0], t, 20 * s, 6 * s, true);
        add_busy(&st[1], t, 10 * s, 2 * s, true);
    }
    struct scrape_agg_pod ap[2] = {{&st[0], 1, false}, {&st[1], 1, false}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    assert_string_equal(spec.busy_metric, "vllm:request_inference_time_seconds_sum");
    struct scrape_result r;
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(fabs(r.request_rate - 30) < 1e-6);
    assert_true(fabs(r.busy - 8) < 1e-6);

    /* the same counts named as microseconds (Triton's cumulative durations) */
    scrape_spec_init(&spec, SCRAPE_TRITON);
    assert_string_equal(spec.busy_metric, "nv_inference_compute_infer_duration_us");
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(fabs(r.busy - 8e-6) < 1e-12);

    /* not named (generic): unknown, however the pods look */
    scrape_spec_init(&spec, SCRAPE_GENERIC);
    snprintf(spec.request_metric, sizeof(spec.request_metric), "r");
    scrape_aggregate(ap, 2, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(r.busy < 0);

    /* pod 1 loses it for one scrape: unknown (the workload's requests are
     * still valid) until its samples span the requests' again (a full ring:
     * RING scrapes after its return), and the increase then counts from its
     * return, not from 0 */
    scrape_spec_init(&spec, SCRAPE_VLLM);
    int64_t t1 = NOW + IV, t2 = NOW + 2 * IV;
    add_busy(&st[0], t1, 20.0 * t1 / 1000, 6.0 * t1 / 1000, true);
    add_busy(&st[1], t1, 10.0 * t1 / 1000, 0, false);
    scrape_aggregate(ap, 2, NULL, &spec, t1, IV, WIN, &r);
    assert_true(r.valid);
    assert_true(r.busy < 0);
    add_busy(&st[0], t2, 20.0 * t2 / 1000, 6.0 * t2 / 1000, true);
    add_busy(&st[1], t2, 10.0 * t2 / 1000, 2.0 * t2 / 1000, true);
    scrape_aggregate(ap, 2, NULL, &spec, t2, IV, WIN, &r);
    assert_true(r.busy < 0); /* one sample of pod 1 since it came back */
    for (int k = 3; k <= (int)RING + 3; k++) {
        int64_t t = NOW + k * IV;
        add_busy(&st[0], t, 20.0 * t / 1000, 6.0 * t / 1000, true);
        add_busy(&st[1], t, 10.0 * t / 1000, 2.0 * t / 1000, true);
        scrape_aggregate(ap, 2, NULL, &spec, t, IV, WIN, &r);
        assert_true(r.valid);
        if (k < (int)RING + 1)
            assert_true(r.busy < 0);
        else
            assert_true(fabs(r.busy - 8) < 1e-6);
    }

    /* a negative busy counter is a bad exposition */
    struct scrape_sample smp;
    char err[200];
    static const char bad[] = "vllm:request_success_total 5\n"
                              "vllm:request_inference_time_seconds_sum -1\n";
    assert_int_equal(scrape_extract_buf(&spec, PROM_FMT_TEXT, bad, sizeof(bad) - 1, 0, &smp,
                                        err, sizeof(err)),
                     -EBADMSG);
    assert_non_null(strstr(err, "vllm:request_inference_time_seconds_sum"));
    for (int p = 0; p < 2; p++)
        scrape_podstate_free(&st[p], NULL);
}

/* The scale-up to the serving replicas: two counted pods at 10 req/s (2 in
 * service each), one whose last scrape failed (serving, so k = 3 / 2), and
 * one that left half a window ago after 10 req/s (2 in service). The gone
 * pod's requests spread over the window (about 5 req/s) are no share of a
 * serving replica: 20 x 1.5 + 5 = 35 req/s, not (20 + 5) x 1.5 = 37.5,
 * which counted the gone pod's share 1.5 times. Likewise the busy time:
 * 4 x 1.5 + 1 = 7, not 7.5. */
static void test_scale_up_gone(void **state)
{
    (void)state;
    struct scrape_podstate st[4];
    const int64_t left = NOW - WIN / 2;
    for (int p = 0; p < 4; p++)
        scrape_podstate_init(&st[p], 0, WIN, IV);
    for (int64_t t = NOW - WIN - IV; t <= NOW; t += IV) {
        double sec = (double)t / 1000.0;
        for (int p = 0; p < 4; p++)
            if (p < 3 || t <= left)
                add_busy(&st[p], t, 10 * sec, 2 * sec, true);
    }
    scrape_podstate_fail(&st[2], NOW, SCRAPE_FAIL_TIMEOUT, "boom");
    struct scrape_agg_pod ap[4] = {
        {&st[0], 1, false}, {&st[1], 1, false}, {&st[2], 1, false}, {&st[3], 1, true}};
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    spec.missing_fraction = 0.5;
    struct scrape_result r;
    scrape_aggregate(ap, 4, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.valid);
    assert_int_equal(r.pods_counted, 2);
    assert_int_equal(r.pods_failed, 1);
    /* the gone pod's part: its 300 or so requests over the window observed */
    assert_true(fabs(r.request_rate_gone - 5) < 0.5);
    assert_true(fabs(r.request_rate - r.request_rate_gone - 20) < 1e-6);
    assert_true(fabs(r.busy_gone - 1) < 0.1);
    assert_true(fabs(r.busy - r.busy_gone - 4) < 1e-6);
    double total = r.request_rate, gone = r.request_rate_gone;
    scrape_result_scale_up(&r, 3.0 / 2.0);
    assert_true(fabs(r.request_rate - (20 * 1.5 + gone)) < 1e-6);
    assert_true(fabs(r.request_rate - 35) < 0.5);
    assert_true(r.request_rate < total * 1.5 - 2); /* the double count: 37.5 */
    assert_true(fabs(r.recent_rate - 30) < 1e-6);  /* the counted pods' only */
    assert_true(fabs(r.busy - 7) < 0.1);
    /* nothing gone: the whole rate scales */
    scrape_aggregate(ap, 3, NULL, &spec, NOW, IV, WIN, &r);
    assert_true(r.request_rate_gone == 0 && r.busy_gone == 0);
    scrape_result_scale_up(&r, 1.5);
    assert_true(fabs(r.request_rate - 30) < 1e-6);
    for (int p = 0; p < 4; p++)
        scrape_podstate_free(&st[p], NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counting_rules),     cmocka_unit_test(test_counter_reset),
        cmocka_unit_test(test_series_come_and_go), cmocka_unit_test(test_series_gap),
        cmocka_unit_test(test_series_overflow_falling_sum), cmocka_unit_test(test_counter_glitch),
        cmocka_unit_test(test_latency_and_gauges), cmocka_unit_test(test_absent_counter),
        cmocka_unit_test(test_window),             cmocka_unit_test(test_recent_rate),
        cmocka_unit_test(test_recent_rate_min_span),
        cmocka_unit_test(test_token_rates),        cmocka_unit_test(test_token_missing),
        cmocka_unit_test(test_busy_time),          cmocka_unit_test(test_backlog),
        cmocka_unit_test(test_gone),
        cmocka_unit_test(test_gone_after_rollout),
        cmocka_unit_test(test_scale_up_gone),
        cmocka_unit_test(test_rejected_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

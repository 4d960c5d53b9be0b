/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the capacity estimator on a model fleet: GPUs of 64 slots and a
 * 6.4 s service time, so 10 req/s per GPU with every slot busy. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "capacity/capacity.h"

#define SLOTS 64.0
#define SERVICE_S 6.4
#define TRUE_CAP (SLOTS / SERVICE_S)
#define TICK_MS 15000
#define WINDOW_MS 60000

static int64_t now_ms = 1000000;

/* One tick of `gpus` GPUs offered `x` req/s each: below capacity they
 * complete it with x * s slots busy and no queue; above it they complete
 * capacity with every slot busy and the excess waiting. */
static void tick(struct capacity *c, double gpus, double x, double slots_cfg)
{
    double done = x < TRUE_CAP ? x : TRUE_CAP;
    struct capacity_obs o = {.now_ms = now_ms, .window_ms = WINDOW_MS, .steady = true,
                             .gpus = gpus, .completions_rps = done * gpus,
                             .running = done * SERVICE_S * gpus,
                             .waiting = x > TRUE_CAP ? 50 * gpus : 0,
                             .slots_per_gpu = slots_cfg};
    capacity_observe(c, &o);
    now_ms += TICK_MS;
}

static bool near(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fabs(b);
}

/* The same fleet counted in tokens (demand-unit tokens): completions in
 * weighted tokens/s (tpr per request), running and waiting still requests. */
static void tick_tokens(struct capacity *c, double gpus, double x, double tpr)
{
    double done = x < TRUE_CAP ? x : TRUE_CAP;
    struct capacity_obs o = {.now_ms = now_ms, .window_ms = WINDOW_MS, .steady = true,
                             .gpus = gpus, .completions_rps = done * gpus * tpr,
                             .running = done * SERVICE_S * gpus,
                             .waiting = x > TRUE_CAP ? 50 * gpus : 0, .slots_per_gpu = 0};
    capacity_observe(c, &o);
    now_ms += TICK_MS;
}

/* Capacity in tokens: every basis scales with the unit of the completions
 * (the queue test and the slot share are ratios of requests), so the
 * estimate is the requests one times the tokens per request, and the slots
 * learned at saturation stay requests. */
static void test_tokens_unit(void **s)
{
    (void)s;
    const double tpr = 750;
    struct capacity c;
    capacity_init(&c);
    for (int i = 0; i < 8; i++)
        tick_tokens(&c, 4, 14, tpr); /* saturated: a standing queue */
    struct capacity_estimate e;
    capacity_estimate(&c, now_ms, 0, &e);
    assert_int_equal(e.basis, CAPACITY_BASIS_SATURATION);
    assert_true(near(e.value, TRUE_CAP * tpr, 1e-3));
    assert_true(near(e.slots_per_gpu, SLOTS, 1e-3));
    /* then below saturation, with the slots learned: the utilisation basis */
    for (int i = 0; i < 8; i++)
        tick_tokens(&c, 4, 6, tpr);
    capacity_estimate(&c, now_ms, 0, &e);
    assert_int_equal(e.basis, CAPACITY_BASIS_UTILIZATION);
    assert_true(near(e.value, TRUE_CAP * tpr, 1e-3));
    assert_true(e.lower >= 6 * tpr * 0.999);
}

/* One tick at 60 % whose gauge reads `gauge` times the true running
 * requests (a gauge of few slots read once: 0, 1 or 2) and whose busy time
 * (the time-averaged requests in service) is `busy`. */
static void tick_busy(struct capacity *c, double gauge, double busy)
{
    double done = 0.6 * TRUE_CAP;
    struct capacity_obs o = {.now_ms = now_ms, .window_ms = WINDOW_MS, .steady = true,
                             .gpus = 2, .completions_rps = done * 2,
                             .running = gauge * done * SERVICE_S * 2, .busy = busy,
                             .waiting = 0, .slots_per_gpu = SLOTS};
    capacity_observe(c, &o);
    now_ms += TICK_MS;
}

/* The busy time, where the pods have it, is the utilisation's running
 * requests: a gauge reading 0.6x or 1.6x the truth does not move the
 * estimate. A busy time of 0 or NAN is unknown: the gauge is used. */
static void test_busy_time_preferred(void **s)
{
    (void)s;
    struct capacity c;
    capacity_init(&c);
    const double busy = 0.6 * TRUE_CAP * SERVICE_S * 2;
    for (int i = 0; i < 16; i++)
        tick_busy(&c, i % 2 ? 0.6 : 1.6, busy);
    struct capacity_estimate e;
    capacity_estimate(&c, now_ms, SLOTS, &e);
    assert_int_equal(e.basis, CAPACITY_BASIS_UTILIZATION);
    assert_true(near(e.value, TRUE_CAP, 1e-6));
    /* the same ticks without a busy time: the gauge's mean (1.1x) shows */
    const double unknown[] = {0, NAN, -1};
    for (size_t k = 0; k < sizeof(unknown) / sizeof(unknown[0]); k++) {
        capacity_init(&c);
        for (int i = 0; i < 16; i++)
            tick_busy(&c, i % 2 ? 0.6 : 1.6, unknown[k]);
        capacity_estimate(&c, now_ms, SLOTS, &e);
        assert_int_equal(e.basis, CAPACITY_BASIS_UTILIZATION);
        assert_true(near(e.value, TRUE_CAP / 1.1, 1e-6));
    }
}

static void test_utilization_never_extrapolates_far(void **s)
{
    (void)s;
    struct capacity c;
    capacity_init(&c);
    struct capacity_estimate e;
    capacity_estimate(&c, now_ms, SLOTS, &e);
    assert_true(isnan(e.value));
    assert_int_equal(e.basis, CAPACITY_BASIS_NONE);
    /* at 40 % of capacity the model says 10, but only 2x the 4 seen is believed */
    for (int i = 0; i < 6; i++)
        tick(&c, 8, 4, SLOTS);
    capacity_estimate(&c, now_ms, SLOTS, &e);
    assert_int_equal(e.basis, CAPACITY_BASIS_UTILIZATION);
    assert_true(near(e.lower, 4, 1e-3));
    assert_true(near(e.value, 8, 1e-3));
    /* one tick at 9 is not a sustained 9 */
    tick(&c, 8, 9, SLOTS);
    capacity_estimate(&c, now_ms, SLOTS, &e);
    assert_true(near(e.lower, 4, 1e-3));
    /* once the pods run at 6 for most of the last 5 ticks the estimate is the model's 10 */
    for (int i = 0; i < 3; i++)
        tick(&c, 8, 6, SLOTS);
    capacity_estimate(&c, now_ms, SLOTS, &e);
    assert_true(near(e.value, TRUE_CAP, 1e-3));
    /* utilisation below 20 % teaches nothing */
    struct capacity d;
    capacity_init(&d);
    for (int i = 0; i < 10; i++)
        tick(&d, 8, 1.5, SLOTS);
    capacity_estimate(&d, now_ms, SLOTS, &e);
    assert_true(isnan(e.value));
    assert_true(near(e.lower, 1.5, 1e-3));
}

static void test_saturation_bounds_and_teaches_slots(void **s)
{
    (void)s;
    struct capacity c;
    capacity_init(&c);
    struct capacity_estimate e;
    /* no slot count, no queue: nothing but a lower bound */
    for (int i = 0; i < 10; i++)
        tick(&c, 4, 7, 0);
    capacity_estimate(&c, now_ms, 0, &e);
    assert_true(isnan(e.value));
    assert_true(isnan(e.slots_per_gpu));
    /* overloaded at 2x: a queue on every tick; samples only after a full
     * window of it (ticks at 0, 15, 30, 45 s: the fifth is the first) */
    for (int i = 0; i < 4; i++)
        tick(&c, 4, 20, 0);
    capacity_estimate(&c, now_ms, 0, &e);
    assert_true(isnan(e.saturation));
    for (int i = 0; i < 2; i++)
        tick(&c, 4, 20, 0);
    capacity_estimate(&c, now_ms, 0, &e);
    assert_int_equal(e.basis, CAPACITY_BASIS_SATURATION);
    assert_true(near(e.value, TRUE_CAP, 1e-3));
    assert_true(near(e.slots_per_gpu, SLOTS, 1e-3));
    /* the learned slots make utilisation evidence of later, lighter load */
    for (int i = 0; i < 4; i++)
        tick(&c, 6, 6, 0);
    capacity_estimate(&c, now_ms, 0, &e);
    assert_int_equal(e.basis, CAPACITY_BASIS_UTILIZATION);
    assert_true(near(e.value, TRUE_CAP, 1e-3));
    /* a configured slot count that is too high reads as more capacity, but
     * a seen saturation throughput caps it */
    struct capacity_estimate e2;
    for (int i = 0; i < 16; i++)
        tick(&c, 6, 6, 2 * SLOTS);
    capacity_estimate(&c, now_ms, 2 * SLOTS, &e2);
    assert_true(near(e2.value, TRUE_CAP, 1e-3));
}

static void test_unsteady_ticks_break_a_queue_run(void **s)
{
    (void)s;
    struct capacity c;
    capacity_init(&c);
    struct capacity_estimate e;
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < 3; i++)
            tick(&c, 4, 20, 0);
        struct capacity_obs o = {.now_ms = now_ms, .window_ms = WINDOW_MS, .steady = false,
                                 .gpus = 4, .completions_rps = 40, .running = 256,
                                 .waiting = 200};
        capacity_observe(&c, &o);
        now_ms += TICK_MS;
    }
    capacity_estimate(&c, now_ms, 0, &e);
    assert_true(isnan(e.saturation));
    /* garbage is ignored */
    struct capacity_obs bad = {.now_ms = now_ms, .window_ms = WINDOW_MS, .steady = true,
                               .gpus = 0, .completions_rps = NAN, .running = -1,
                               .waiting = NAN};
    capacity_observe(&c, &bad);
    bad.gpus = 4;
    capacity_observe(&c, &bad);
    capacity_estimate(&c, now_ms, 0, &e);
    assert_true(isfinite(e.lower));
}

static void test_lower_bound_decays(void **s)
{
    (void)s;
    struct capacity c;
    capacity_init(&c);
    for (int i = 0; i < CAPACITY_SUSTAIN_TICKS; i++)
        tick(&c, 2, 9, 0);
    struct capacity_estimate e;
    capacity_estimate(&c, now_ms + 2 * CAPACITY_LOWER_HALF_LIFE_MS, 0, &e);
    assert_true(near(e.lower, 9.0 / 4, 1e-2));
}

static void test_mismatch(void **s)
{
    (void)s;
    struct capacity_estimate e = {.value = 10, .samples = 3};
    double r;
    /* too few samples to accuse a configured value */
    assert_int_equal(capacity_mismatch(&e, 20, &r), 0);
    assert_true(near(r, 2, 1e-9));
    e.samples = CAPACITY_MISMATCH_EVIDENCE;
    assert_int_equal(capacity_mismatch(&e, 20, &r), 1);
    assert_true(near(r, 2, 1e-9));
    assert_int_equal(capacity_mismatch(&e, 12.4, &r), 0);
    assert_int_equal(capacity_mismatch(&e, 8.1, &r), 0);
    assert_int_equal(capacity_mismatch(&e, 7.9, &r), -1);
    e.value = NAN;
    assert_int_equal(capacity_mismatch(&e, 7.9, &r), 0);
    assert_true(isnan(r));
}

static void test_codec(void **s)
{
    (void)s;
    struct capacity c, d;
    capacity_init(&c);
    for (int i = 0; i < 8; i++)
        tick(&c, 4, 20, 0);
    for (int i = 0; i < 20; i++)
        tick(&c, 4, 6, 0);
    uint8_t buf[CAPACITY_STATE_SIZE];
    assert_int_equal(capacity_encode(&c, buf, sizeof(buf) - 1), 0);
    assert_int_equal(capacity_encode(&c, buf, sizeof(buf)), CAPACITY_STATE_SIZE);
    char err[128];
    assert_int_equal(capacity_decode(&d, buf, sizeof(buf), err, sizeof(err)), 0);
    struct capacity_estimate a, b;
    capacity_estimate(&c, now_ms, 0, &a);
    capacity_estimate(&d, now_ms, 0, &b);
    assert_true(a.value == b.value && a.lower == b.lower && a.samples == b.samples);
    /* corrupt, truncated, other version: refused, and the state is fresh */
    buf[50] ^= 1;
    assert_int_equal(capacity_decode(&d, buf, sizeof(buf), err, sizeof(err)), -1);
    assert_non_null(strstr(err, "checksum"));
    capacity_estimate(&d, now_ms, 0, &b);
    assert_true(isnan(b.value) && b.lower == 0);
    buf[50] ^= 1;
    /* times out of range (a lower bound's time of -2^63 + 1,105,000, as
     * fuzz-capacity-state found, overflowed its age), checksum valid */
    uint8_t bad[CAPACITY_STATE_SIZE];
    for (int k = 0; k < 2; k++) {
        memcpy(bad, buf, sizeof(bad));
        int64_t t = k ? INT64_MIN + 1105000 : INT64_MAX;
        for (int i = 0; i < 8; i++)
            bad[(k ? 20 : 28) + i] = (uint8_t)((uint64_t)t >> (8 * i));
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < CAPACITY_STATE_SIZE - 4; i++)
            h = (h ^ bad[i]) * 16777619u;
        for (int i = 0; i < 4; i++)
            bad[CAPACITY_STATE_SIZE - 4 + i] = (uint8_t)(h >> (8 * i));
        assert_int_equal(capacity_decode(&d, bad, sizeof(bad), err, sizeof(err)), -1);
        assert_non_null(strstr(err, "out of range"));
    }
    assert_int_equal(capacity_decode(&d, buf, 100, err, sizeof(err)), -1);
    buf[4] = 9;
    assert_int_equal(capacity_decode(&d, buf, sizeof(buf), err, sizeof(err)), -1);
    assert_non_null(strstr(err, "version 9"));
}

/* Encode c as the codec does, whatever it holds (a crafted checkpoint). */
static void encode_any(const struct capacity *c, uint8_t *buf)
{
    assert_int_equal(capacity_encode(c, buf, CAPACITY_STATE_SIZE), CAPACITY_STATE_SIZE);
}

/* What the estimator never keeps is refused at restore: utilisation
 * samples of 0.001 beside a throughput of 1e5 req/s per GPU made a
 * capacity of 1e8 req/s a GPU (the policy then sizes for almost nothing),
 * as did a throughput past any a GPU has; a ring short of full whose next
 * slot is not its count would have a later sample count a slot never
 * written. */
static void test_codec_refuses_unkept(void **s)
{
    (void)s;
    struct capacity c, d;
    char err[160];
    uint8_t buf[CAPACITY_STATE_SIZE];
    capacity_init(&c);
    for (int i = 0; i < 4; i++) {
        c.util[i] = 1e5f;
        c.util_u[i] = 0.001f;
    }
    c.nutil = c.iutil = 4;
    c.total = 4;
    encode_any(&c, buf);
    assert_int_equal(capacity_decode(&d, buf, sizeof(buf), err, sizeof(err)), -1);
    assert_non_null(strstr(err, "utilisation sample"));
    struct capacity_estimate e;
    capacity_estimate(&d, now_ms, 0, &e);
    assert_true(isnan(e.value)); /* refused: a fresh state */
    /* at the smallest utilisation kept, it restores */
    for (int i = 0; i < 4; i++)
        c.util_u[i] = (float)CAPACITY_MIN_UTILIZATION;
    encode_any(&c, buf);
    assert_int_equal(capacity_decode(&d, buf, sizeof(buf), err, sizeof(err)), 0);
    capacity_estimate(&d, now_ms, 0, &e);
    assert_true(e.value <= 1e5 / CAPACITY_MIN_UTILIZATION * 1.0001);

    /* a throughput past the bound, in each ring and the lower bound */
    for (int k = 0; k < 4; k++) {
        struct capacity x = c;
        if (k == 0)
            x.util[1] = 2e9f;
        else if (k == 1)
            x.sat[0] = 2e9f, x.nsat = x.isat = 1;
        else if (k == 2)
            x.recent[0] = 2e9f, x.nrecent = x.irecent = 1;
        else
            x.lower = 2e9, x.lower_ms = now_ms;
        encode_any(&x, buf);
        assert_int_equal(capacity_decode(&d, buf, sizeof(buf), err, sizeof(err)), -1);
        assert_non_null(strstr(err, "throughput"));
    }
    /* rings short of full: the next slot is the count */
    struct capacity y = c;
    y.iutil = 9;
    encode_any(&y, buf);
    assert_int_equal(capacity_decode(&d, buf, sizeof(buf), err, sizeof(err)), -1);
    y = c;
    y.nrecent = 2;
    y.irecent = 4;
    encode_any(&y, buf);
    assert_int_equal(capacity_decode(&d, buf, sizeof(buf), err, sizeof(err)), -1);

    /* observe keeps no throughput past the bound: the tick is an unsteady one */
    capacity_init(&c);
    struct capacity_obs o = {.now_ms = now_ms, .window_ms = WINDOW_MS, .steady = true,
                             .gpus = 1, .completions_rps = 2e9, .running = 32,
                             .waiting = 0, .slots_per_gpu = SLOTS};
    for (int i = 0; i < 8; i++, o.now_ms += TICK_MS)
        capacity_observe(&c, &o);
    assert_int_equal(c.total, 0);
    assert_int_equal(c.nrecent, 0);
    assert_true(c.lower == 0);
}

/* The newest time a state holds, for a caller that checks it against its
 * clock at restore. */
static void test_newest_ms(void **st)
{
    (void)st;
    struct capacity c;
    capacity_init(&c);
    assert_true(capacity_newest_ms(&c) == INT64_MIN);
    c.queue_since_ms = 5000;
    assert_int_equal(capacity_newest_ms(&c), 5000);
    c.lower = 3;
    c.lower_ms = 9000;
    assert_int_equal(capacity_newest_ms(&c), 9000);
    c.queue_since_ms = -1;
    c.lower_ms = 7000;
    assert_int_equal(capacity_newest_ms(&c), 7000);
    c.lower = 0; /* no lower bound: its time says nothing */
    assert_true(capacity_newest_ms(&c) == INT64_MIN);
}

/* --write-corpus DIR: seed states for fuzz/fuzz-capacity-state.c (a mode
 * byte, then the state). */
static int write_corpus(const char *dir)
{
    struct capacity c;
    capacity_init(&c);
    for (int k = 0; k < 3; k++) {
        if (k == 1)
            for (int i = 0; i < 8; i++)
                tick(&c, 4, 20, 0);
        if (k == 2)
            for (int i = 0; i < 20; i++)
                tick(&c, 4, 6, 0);
        uint8_t buf[1 + CAPACITY_STATE_SIZE];
        buf[0] = 0;
        capacity_encode(&c, buf + 1, CAPACITY_STATE_SIZE);
        char path[512];
        snprintf(path, sizeof(path), "%s/state-%d", dir, k);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(buf, 1, sizeof(buf), f) != sizeof(buf)) {
            if (f)
                fclose(f);
            return 1;
        }
        fclose(f);
    }
    return 0;
}

/* A restored state forgets its runs of ticks: a queue standing at the save
 * is no queue that has stood a window at the first tick after (one queued
 * tick then took a saturation sample); the samples stay. */
static void test_forget_runs(void **st)
{
    (void)st;
    struct capacity c;
    capacity_init(&c);
    for (int i = 0; i < 8; i++)
        tick(&c, 4, 20, 0);
    c.queue_since_ms = 1000;
    c.nrecent = 3;
    int64_t lower_ms = c.lower_ms;
    double lower = c.lower;
    capacity_forget_runs(&c);
    assert_int_equal(c.queue_since_ms, -1);
    assert_int_equal(c.nrecent, 0);
    assert_int_equal(c.irecent, 0);
    assert_true(c.lower == lower && c.lower_ms == lower_ms);
}

/* A wall clock step moves the times held: an unset queue run stays unset. */
static void test_shift(void **st)
{
    (void)st;
    struct capacity c;
    capacity_init(&c);
    capacity_shift(&c, 50000);
    assert_int_equal(c.queue_since_ms, -1);
    c.queue_since_ms = 1000;
    c.lower = 7.5;
    c.lower_ms = 2000;
    capacity_shift(&c, -300000);
    assert_int_equal(c.queue_since_ms, 1000 - 300000);
    assert_int_equal(c.lower_ms, 2000 - 300000);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
        return write_corpus(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utilization_never_extrapolates_far),
        cmocka_unit_test(test_saturation_bounds_and_teaches_slots),
        cmocka_unit_test(test_unsteady_ticks_break_a_queue_run),
        cmocka_unit_test(test_lower_bound_decays),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_codec),
        cmocka_unit_test(test_codec_refuses_unkept),
        cmocka_unit_test(test_newest_ms),
        cmocka_unit_test(test_tokens_unit),
        cmocka_unit_test(test_busy_time_preferred),
        cmocka_unit_test(test_forget_runs),
        cmocka_unit_test(test_shift),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

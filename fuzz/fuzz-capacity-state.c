/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for capacity_decode(): the capacity estimator's state
 * comes back from the checkpoint ConfigMap, so it is outside input.
 *
 * The first byte picks the mode: bit 0 set recomputes the FNV-1a trailer
 * before decoding, so mutations reach the range checks behind it; bit 1 set
 * takes the state from the next CAPACITY_STATE_SIZE bytes and the rest as
 * ticks to observe (10 bytes a tick), else the whole rest is the state.
 * An accepted state must hold only what capacity_decode() promises (rings
 * as push leaves them, throughputs within CAPACITY_MAX_RPS_PER_GPU,
 * utilisations within [CAPACITY_MIN_UTILIZATION, 1], times within +-2^52
 * ms), encode back to exactly the bytes decoded, give a finite or NAN
 * (never negative or infinite) estimate, tell its newest time as
 * capacity_newest_ms() documents, still be a state that restores once its
 * runs are forgotten and once its times are shifted by a clock step (one
 * that keeps them within range), and after every tick, of any values
 * (throughputs past the bound, a busy-time rate, unknown counts): what the
 * estimator keeps, the decoder reads. A refused one must leave a fresh
 * state. The seed corpus (fuzz/corpus/capacity-state/) is a few states
 * written by `test-capacity --write-corpus DIR`, and ticks-* seeds with
 * ticks after the state. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capacity/capacity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TIME_MAX ((int64_t)1 << 52)

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-capacity-state: invariant violated: %s\n", what);
        abort();
    }
}

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static void check_estimate(const struct capacity *c, int64_t now)
{
    struct capacity_estimate e;
    capacity_estimate(c, now, 0, &e);
    check(isnan(e.value) || (isfinite(e.value) && e.value >= 0), "an estimate >= 0 or NAN");
    check(isfinite(e.lower) && e.lower >= 0, "a lower bound >= 0");
    double r;
    (void)capacity_mismatch(&e, 10, &r);
}

static bool ring_ok(uint8_t n, uint8_t i, uint8_t cap)
{
    return n <= cap && i < cap && (n == cap || i == n);
}

/* What capacity_decode() promises of a state it accepts. */
static void check_kept(const struct capacity *c)
{
    check(ring_ok(c->nsat, c->isat, CAPACITY_SAMPLES) &&
              ring_ok(c->nslots, c->islots, CAPACITY_SAMPLES) &&
              ring_ok(c->nutil, c->iutil, CAPACITY_SAMPLES) &&
              ring_ok(c->nrecent, c->irecent, CAPACITY_SUSTAIN_TICKS),
          "rings as push leaves them");
    check(c->lower >= 0 && c->lower <= CAPACITY_MAX_RPS_PER_GPU, "a lower bound within range");
    for (int i = 0; i < CAPACITY_SAMPLES; i++)
        check(c->sat[i] >= 0 && c->sat[i] <= CAPACITY_MAX_RPS_PER_GPU && c->util[i] >= 0 &&
                  c->util[i] <= CAPACITY_MAX_RPS_PER_GPU && c->slots[i] >= 0 &&
                  isfinite(c->slots[i]) && c->util_u[i] >= 0 && c->util_u[i] <= 1,
              "samples within range");
    for (int i = 0; i < CAPACITY_SUSTAIN_TICKS; i++)
        check(c->recent[i] >= 0 && c->recent[i] <= CAPACITY_MAX_RPS_PER_GPU,
              "recent throughputs within range");
    for (int i = 0; i < c->nutil; i++)
        check(c->util_u[i] >= (float)CAPACITY_MIN_UTILIZATION, "utilisations kept");
    check(c->lower_ms >= -TIME_MAX && c->lower_ms <= TIME_MAX, "the lower bound's time");
    check(c->queue_since_ms == -1 ||
              (c->queue_since_ms >= -TIME_MAX && c->queue_since_ms <= TIME_MAX),
          "the queue run's time");
    check(c->total >= 0, "a count of samples");
    /* the newest time, as capacity.h says it */
    int64_t t = c->lower > 0 ? c->lower_ms : INT64_MIN;
    if (c->queue_since_ms >= 0 && c->queue_since_ms > t)
        t = c->queue_since_ms;
    check(capacity_newest_ms(c) == t, "capacity_newest_ms");
}

/* c encodes to a state that decodes to c again. */
static void check_restores(const struct capacity *c, const char *what)
{
    uint8_t out[CAPACITY_STATE_SIZE], again[CAPACITY_STATE_SIZE];
    char err[160];
    struct capacity d;
    check(capacity_encode(c, out, sizeof(out)) == CAPACITY_STATE_SIZE, "encodes");
    if (capacity_decode(&d, out, sizeof(out), err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz-capacity-state: %s: refused: %s\n", what, err);
        abort();
    }
    check_kept(&d);
    check(capacity_encode(&d, again, sizeof(again)) == CAPACITY_STATE_SIZE &&
              memcmp(out, again, sizeof(out)) == 0,
          "decodes to itself");
}

static double value(const uint8_t *p)
{
    /* a small number mostly; sometimes past the bound, unknown or negative */
    switch (p[0] >> 5) {
    case 0:
        return NAN;
    case 1:
        return p[1] & 1 ? -1 : 1e300; /* a sum of the pods' gauges may be anything */
    case 2:
        return 2e9 * (1 + p[1]);
    case 3:
        return (double)p[1] * 1e7;
    default:
        return (double)(p[0] & 31) * 8 + p[1] / 32.0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    size_t statelen = size, nticks = 0;
    if ((mode & 2) && size >= CAPACITY_STATE_SIZE) {
        statelen = CAPACITY_STATE_SIZE;
        nticks = (size - statelen) / 10;
        if (nticks > 64)
            nticks = 64;
    }
    uint8_t *buf = malloc(statelen ? statelen : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, statelen);
    if ((mode & 1) && statelen == CAPACITY_STATE_SIZE) {
        uint32_t h = fnv1a(buf, CAPACITY_STATE_SIZE - 4);
        for (int i = 0; i < 4; i++)
            buf[CAPACITY_STATE_SIZE - 4 + i] = (uint8_t)(h >> (8 * i));
    }
    struct capacity c;
    char err[160];
    err[0] = '\0';
    if (capacity_decode(&c, buf, statelen, err, sizeof(err)) != 0) {
        check(err[0] != '\0', "a refusal says why");
        struct capacity_estimate e;
        capacity_estimate(&c, 0, 0, &e);
        check(isnan(e.value) && e.lower == 0 && c.queue_since_ms == -1 && c.total == 0,
              "refused: a fresh state");
        free(buf);
        return 0;
    }
    uint8_t out[CAPACITY_STATE_SIZE];
    check(capacity_encode(&c, out, sizeof(out)) == statelen && memcmp(out, buf, statelen) == 0,
          "an accepted state encodes back to its bytes");
    check_kept(&c);
    int64_t now = c.lower_ms > 0 && c.lower_ms < TIME_MAX / 2 ? c.lower_ms : 1700000000000;
    check_estimate(&c, now);

    /* restored by a checkpoint read: its runs forgotten */
    struct capacity f = c;
    capacity_forget_runs(&f);
    check(f.queue_since_ms == -1 && f.nrecent == 0 && f.irecent == 0, "runs forgotten");
    check_restores(&f, "with its runs forgotten");

    /* a wall clock step: the shifted state restores while its times stay in range */
    uint32_t h = fnv1a(data, size);
    int64_t delta = (int64_t)(h % 2000001) - 1000000;
    delta *= (h >> 24) % 3 == 0 ? 1000000 : 1000; /* up to +-11.6 days, or +-31.7 years */
    struct capacity s = c;
    int64_t before = capacity_newest_ms(&s);
    capacity_shift(&s, delta);
    bool in_range = (s.lower <= 0 || (s.lower_ms >= -TIME_MAX && s.lower_ms <= TIME_MAX)) &&
                    (s.queue_since_ms < 0 || s.queue_since_ms <= TIME_MAX);
    if (in_range && (c.queue_since_ms < 0 || s.queue_since_ms >= 0)) {
        check(before == INT64_MIN || capacity_newest_ms(&s) == before + delta,
              "a shift moves the newest time");
        check_restores(&s, "shifted");
    }

    /* ticks of any values: whatever the estimator keeps restores */
    const uint8_t *t = data + statelen;
    for (size_t i = 0; i < nticks; i++, t += 10) {
        now += 1000 * (int64_t)(1 + t[0]);
        if (now > TIME_MAX)
            break;
        struct capacity_obs o = {.now_ms = now, .window_ms = 1000 * (int64_t)(t[1] % 120),
                                 .steady = !(t[2] & 1), .gpus = (double)(t[2] >> 1) / 8,
                                 .completions_rps = value(t + 3), .running = value(t + 5),
                                 .busy = (t[7] & 1) ? value(t + 7) : 0,
                                 .waiting = value(t + 8), .slots_per_gpu = t[9] & 7};
        int64_t was = capacity_newest_ms(&c);
        capacity_observe(&c, &o);
        check_estimate(&c, now);
        check(capacity_newest_ms(&c) <= (was > now ? was : now), "nothing newer than the tick");
        check_restores(&c, "after a tick");
    }
    free(buf);
    return 0;
}

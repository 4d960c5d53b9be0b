/* SPDX-License-Identifier: Apache-2.0 */
/* capacity: the per-GPU capacity estimator (capacity.h has the method) and
 * its state codec. */
#include "capacity.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define STATE_MAGIC "GSCP"
#define STATE_VERSION 1

static bool known(double v)
{
    return isfinite(v) && v >= 0;
}

void capacity_init(struct capacity *c)
{
    memset(c, 0, sizeof(*c));
    c->queue_since_ms = -1;
}

void capacity_shift(struct capacity *c, int64_t delta_ms)
{
    if (c->queue_since_ms >= 0)
        c->queue_since_ms += delta_ms;
    if (c->lower > 0)
        c->lower_ms += delta_ms;
}

static void push_n(float *ring, uint8_t *n, uint8_t *i, double v, uint8_t cap)
{
    ring[*i] = (float)v;
    *i = (uint8_t)((*i + 1) % cap);
    if (*n < cap)
        (*n)++;
}

static void push(float *ring, uint8_t *n, uint8_t *i, double v)
{
    push_n(ring, n, i, v, CAPACITY_SAMPLES);
}

static double median(const float *ring, uint8_t n)
{
    float v[CAPACITY_SAMPLES];
    memcpy(v, ring, n * sizeof(float));
    for (int i = 1; i < n; i++) { /* insertion sort: at most 16 */
        float x = v[i];
        int j = i - 1;
        for (; j >= 0 && v[j] > x; j--)
            v[j + 1] = v[j];
        v[j + 1] = x;
    }
    return n % 2 ? v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + v[n / 2]);
}

/* A time a state may carry (ms): what the clock or a replay gives,
 * within +-2^52 (+-142,000 years), so differences of two stay exact and
 * far from overflow (a restored lower_ms of -2^63 overflowed one; found by
 * fuzz-capacity-state). */
static bool time_ok(int64_t ms)
{
    return ms >= -((int64_t)1 << 52) && ms <= ((int64_t)1 << 52);
}

static double decayed_lower(const struct capacity *c, int64_t now_ms)
{
    if (c->lower <= 0)
        return 0;
    double age = (double)now_ms - (double)c->lower_ms; /* no int64 overflow */
    return age <= 0 ? c->lower : c->lower * exp2(-age / (double)CAPACITY_LOWER_HALF_LIFE_MS);
}

void capacity_observe(struct capacity *c, const struct capacity_obs *o)
{
    if (!o->steady || !(o->gpus > 0) || !known(o->completions_rps) ||
        !(o->completions_rps / o->gpus <= CAPACITY_MAX_RPS_PER_GPU)) {
        c->queue_since_ms = -1; /* a queue across a rollout says nothing */
        c->nrecent = c->irecent = 0;
        return;
    }
    double x = o->completions_rps / o->gpus;
    push_n(c->recent, &c->nrecent, &c->irecent, x, CAPACITY_SUSTAIN_TICKS);
    if (c->nrecent == CAPACITY_SUSTAIN_TICKS) {
        double sustained = median(c->recent, c->nrecent);
        if (sustained >= decayed_lower(c, o->now_ms)) {
            c->lower = sustained;
            c->lower_ms = o->now_ms;
        }
    }
    /* A queue as long as half the requests in service: past what the
     * randomness of arrivals queues below saturation (an M/M/c queue at 90 %
     * holds about a third of its running requests waiting). */
    double run = known(o->running) ? o->running : 0;
    bool queued = known(o->waiting) && o->waiting >= CAPACITY_QUEUE_PER_GPU * o->gpus &&
                  o->waiting >= CAPACITY_QUEUE_PER_RUNNING * run;
    if (!queued) {
        c->queue_since_ms = -1;
        double slots = o->slots_per_gpu > 0 ? o->slots_per_gpu
                       : c->nslots > 0      ? median(c->slots, c->nslots)
                                            : 0;
        double in_service = o->busy > 0 ? o->busy : o->running;
        if (slots > 0 && known(in_service) && x > 0) {
            double u = in_service / (slots * o->gpus);
            if (u >= CAPACITY_MIN_UTILIZATION && u <= 1.0) {
                c->util_u[c->iutil] = (float)u;
                push(c->util, &c->nutil, &c->iutil, x);
                c->total++;
            }
        }
        return;
    }
    if (c->queue_since_ms < 0)
        c->queue_since_ms = o->now_ms;
    /* every slot busy for the whole window the completions count over */
    if (o->now_ms - c->queue_since_ms >= o->window_ms && x > 0) {
        push(c->sat, &c->nsat, &c->isat, x);
        /* a count a float holds: an infinite sample (a pod's gauge of 1e300)
         * made the state one capacity_decode() refuses (found by
         * fuzz-capacity-state) */
        if (known(o->running) && o->running > 0 && isfinite((float)(o->running / o->gpus)))
            push(c->slots, &c->nslots, &c->islots, o->running / o->gpus);
        c->total++;
    }
}

void capacity_estimate(const struct capacity *c, int64_t now_ms, double slots_per_gpu,
                       struct capacity_estimate *out)
{
    memset(out, 0, sizeof(*out));
    out->value = out->saturation = out->slots_per_gpu = NAN;
    out->lower = decayed_lower(c, now_ms);
    if (slots_per_gpu > 0)
        out->slots_per_gpu = slots_per_gpu;
    else if (c->nslots > 0)
        out->slots_per_gpu = median(c->slots, c->nslots);
    if (c->nsat > 0)
        out->saturation = median(c->sat, c->nsat);
    double v = NAN;
    if (c->nutil >= CAPACITY_MIN_EVIDENCE) {
        double sx = 0, su = 0;
        for (int i = 0; i < c->nutil; i++) {
            sx += c->util[i];
            su += c->util_u[i];
        }
        v = su > 0 ? sx / su : NAN;
        out->samples = c->nutil;
        out->basis = CAPACITY_BASIS_UTILIZATION;
        if (isfinite(out->saturation) && v > out->saturation)
            v = out->saturation;
    } else if (c->nsat >= CAPACITY_MIN_EVIDENCE / 2) {
        v = out->saturation;
        out->samples = c->nsat;
        out->basis = CAPACITY_BASIS_SATURATION;
    }
    if (isfinite(v) && out->lower > 0) {
        if (v > CAPACITY_MAX_EXTRAPOLATION * out->lower)
            v = CAPACITY_MAX_EXTRAPOLATION * out->lower;
        if (v < out->lower)
            v = out->lower;
    }
    out->value = v;
}

const char *capacity_basis_name(enum capacity_basis b)
{
    return b == CAPACITY_BASIS_SATURATION    ? "saturation"
           : b == CAPACITY_BASIS_UTILIZATION ? "utilization"
                                             : "none";
}

int capacity_mismatch(const struct capacity_estimate *e, double configured, double *ratio)
{
    *ratio = NAN;
    if (!isfinite(e->value) || !(e->value > 0) || !(configured > 0))
        return 0;
    *ratio = configured / e->value;
    if (e->samples < CAPACITY_MISMATCH_EVIDENCE)
        return 0;
    if (*ratio > 1 + CAPACITY_MISMATCH)
        return 1;
    if (*ratio < 1 / (1 + CAPACITY_MISMATCH))
        return -1;
    return 0;
}

double capacity_in_use(const struct capacity_estimate *e, bool automatic, double configured,
                       double start, double target_utilization, enum capacity_source *src)
{
    if (!automatic) {
        *src = CAPACITY_SOURCE_CONFIGURED;
        return configured;
    }
    if (isfinite(e->value) && e->value > 0) {
        *src = CAPACITY_SOURCE_LEARNED;
        return e->value;
    }
    if (start > 0) {
        *src = CAPACITY_SOURCE_START;
        return start;
    }
    if (e->lower > 0 && target_utilization > 0) {
        *src = CAPACITY_SOURCE_OBSERVED;
        return e->lower / target_utilization;
    }
    *src = CAPACITY_SOURCE_UNKNOWN;
    return NAN;
}

const char *capacity_source_name(enum capacity_source s)
{
    static const char *const names[] = {"configured", "learned", "start", "observed", "unknown"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

/* ---- codec ------------------------------------------------------------------ */

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_ring(uint8_t *p, const float *r)
{
    for (int i = 0; i < CAPACITY_SAMPLES; i++) {
        uint32_t u;
        memcpy(&u, &r[i], 4);
        put32(p + 4 * i, u);
    }
}

static bool get_ring(const uint8_t *p, float *r)
{
    for (int i = 0; i < CAPACITY_SAMPLES; i++) {
        uint32_t u = get32(p + 4 * i);
        memcpy(&r[i], &u, 4);
        if (!isfinite(r[i]) || r[i] < 0)
            return false;
    }
    return true;
}

/* layout: magic[4] version counts[6] pad  lower lower_ms queue_since total
 *         sat[16] slots[16] util[16]  nrecent irecent pad[2] recent[5]
 *         util_u[16]  fnv1a32 of everything before */
size_t capacity_encode(const struct capacity *c, uint8_t *buf, size_t len)
{
    if (len < CAPACITY_STATE_SIZE)
        return 0;
    memset(buf, 0, CAPACITY_STATE_SIZE);
    memcpy(buf, STATE_MAGIC, 4);
    buf[4] = STATE_VERSION;
    buf[5] = c->nsat;
    buf[6] = c->nslots;
    buf[7] = c->nutil;
    buf[8] = c->isat;
    buf[9] = c->islots;
    buf[10] = c->iutil;
    uint64_t u;
    memcpy(&u, &c->lower, 8);
    put64(buf + 12, u);
    put64(buf + 20, (uint64_t)c->lower_ms);
    put64(buf + 28, (uint64_t)c->queue_since_ms);
    put64(buf + 36, (uint64_t)c->total);
    put_ring(buf + 44, c->sat);
    put_ring(buf + 108, c->slots);
    put_ring(buf + 172, c->util);
    buf[236] = c->nrecent;
    buf[237] = c->irecent;
    for (int i = 0; i < CAPACITY_SUSTAIN_TICKS; i++) {
        uint32_t f;
        memcpy(&f, &c->recent[i], 4);
        put32(buf + 240 + 4 * i, f);
    }
    put_ring(buf + 260, c->util_u);
    put32(buf + 324, fnv1a(buf, 324));
    return CAPACITY_STATE_SIZE;
}

int64_t capacity_newest_ms(const struct capacity *c)
{
    int64_t t = INT64_MIN;
    if (c->lower > 0)
        t = c->lower_ms;
    if (c->queue_since_ms >= 0 && c->queue_since_ms > t)
        t = c->queue_since_ms;
    return t;
}

/* A ring as push_n() leaves it: n of cap held, the next slot i; short of
 * full, the slots written are the first n, so i is n. */
static bool ring_ok(uint8_t n, uint8_t i, uint8_t cap)
{
    return n <= cap && i < cap && (n == cap || i == n);
}

/* Every value of a ring of throughputs within what observe keeps. */
static bool rates_ok(const float *r, int n)
{
    for (int i = 0; i < n; i++)
        if (!(r[i] <= CAPACITY_MAX_RPS_PER_GPU))
            return false;
    return true;
}

void capacity_forget_runs(struct capacity *c)
{
    c->queue_since_ms = -1;
    c->nrecent = c->irecent = 0;
}

int capacity_decode(struct capacity *c, const uint8_t *buf, size_t len, char *err,
                    size_t errlen)
{
    struct capacity t;
    capacity_init(c);
    if (len != CAPACITY_STATE_SIZE || memcmp(buf, STATE_MAGIC, 4) != 0) {
        snprintf(err, errlen, "not a capacity state (%zu bytes)", len);
        return -1;
    }
    if (buf[4] != STATE_VERSION) {
        snprintf(err, errlen, "capacity state version %u, this release reads %u", buf[4],
                 STATE_VERSION);
        return -1;
    }
    if (get32(buf + 324) != fnv1a(buf, 324)) {
        snprintf(err, errlen, "capacity state checksum mismatch");
        return -1;
    }
    capacity_init(&t);
    t.nsat = buf[5], t.nslots = buf[6], t.nutil = buf[7];
    t.isat = buf[8], t.islots = buf[9], t.iutil = buf[10];
    uint64_t u = get64(buf + 12);
    memcpy(&t.lower, &u, 8);
    t.lower_ms = (int64_t)get64(buf + 20);
    t.queue_since_ms = (int64_t)get64(buf + 28);
    t.total = (int64_t)get64(buf + 36);
    t.nrecent = buf[236];
    t.irecent = buf[237];
    bool recent_ok = ring_ok(t.nrecent, t.irecent, CAPACITY_SUSTAIN_TICKS);
    for (int i = 0; i < CAPACITY_SUSTAIN_TICKS; i++) {
        uint32_t f = get32(buf + 240 + 4 * i);
        memcpy(&t.recent[i], &f, 4);
        recent_ok = recent_ok && isfinite(t.recent[i]) && t.recent[i] >= 0;
    }
    bool ok = recent_ok && buf[11] == 0 && buf[238] == 0 && buf[239] == 0 &&
              ring_ok(t.nsat, t.isat, CAPACITY_SAMPLES) &&
              ring_ok(t.nslots, t.islots, CAPACITY_SAMPLES) &&
              ring_ok(t.nutil, t.iutil, CAPACITY_SAMPLES) && known(t.lower) &&
              t.total >= 0 && time_ok(t.lower_ms) &&
              (t.queue_since_ms == -1 || time_ok(t.queue_since_ms)) && get_ring(buf + 44, t.sat) && get_ring(buf + 108, t.slots) &&
              get_ring(buf + 172, t.util) && get_ring(buf + 260, t.util_u);
    for (int i = 0; ok && i < CAPACITY_SAMPLES; i++)
        ok = t.util_u[i] <= 1;
    if (!ok) {
        snprintf(err, errlen, "capacity state out of range");
        return -1;
    }
    /* what observe keeps: throughputs within its bound, utilisations of at
     * least its minimum (the float of a double at least it) */
    if (!(t.lower <= CAPACITY_MAX_RPS_PER_GPU) || !rates_ok(t.sat, CAPACITY_SAMPLES) ||
        !rates_ok(t.util, CAPACITY_SAMPLES) || !rates_ok(t.recent, CAPACITY_SUSTAIN_TICKS)) {
        snprintf(err, errlen, "capacity state out of range: a throughput over %g req/s per GPU",
                 CAPACITY_MAX_RPS_PER_GPU);
        return -1;
    }
    for (int i = 0; i < t.nutil; i++) {
        if (t.util_u[i] < (float)CAPACITY_MIN_UTILIZATION) {
            snprintf(err, errlen,
                     "capacity state out of range: utilisation sample %g below the %g kept",
                     (double)t.util_u[i], CAPACITY_MIN_UTILIZATION);
            return -1;
        }
    }
    *c = t;
    return 0;
}

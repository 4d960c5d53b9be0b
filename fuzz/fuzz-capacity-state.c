/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for capacity_decode(): the capacity estimator's state
 * comes back from the checkpoint ConfigMap, so it is outside input.
 *
 * The first byte picks the mode: bit 0 set recomputes the FNV-1a trailer
 * before decoding, so mutations reach the range checks behind it. An
 * accepted state must encode back to exactly the bytes decoded, give a
 * finite or NAN (never negative or infinite) estimate, and keep working
 * after further observations. A refused one must leave a fresh state. The
 * seed corpus (fuzz/corpus/capacity-state/) is a few states written by
 * `test-capacity --write-corpus DIR`. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capacity/capacity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static void check(const struct capacity *c, int64_t now)
{
    struct capacity_estimate e;
    capacity_estimate(c, now, 0, &e);
    if (!(isnan(e.value) || (isfinite(e.value) && e.value >= 0)))
        abort();
    if (!isfinite(e.lower) || e.lower < 0)
        abort();
    double r;
    (void)capacity_mismatch(&e, 10, &r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool fix = data[0] & 1;
    data++;
    size--;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    if (fix && size == CAPACITY_STATE_SIZE) {
        uint32_t h = fnv1a(buf, CAPACITY_STATE_SIZE - 4);
        for (int i = 0; i < 4; i++)
            buf[CAPACITY_STATE_SIZE - 4 + i] = (uint8_t)(h >> (8 * i));
    }
    struct capacity c;
    char err[160];
    if (capacity_decode(&c, buf, size, err, sizeof(err)) == 0) {
        uint8_t out[CAPACITY_STATE_SIZE];
        if (capacity_encode(&c, out, sizeof(out)) != size || memcmp(out, buf, size) != 0)
            abort();
        int64_t now = c.lower_ms > 0 && c.lower_ms < INT64_MAX / 4 ? c.lower_ms : 1700000000000;
        check(&c, now);
        for (int i = 0; i < 8; i++) {
            struct capacity_obs o = {.now_ms = now + i * 15000, .window_ms = 60000,
                                     .steady = true, .gpus = 4, .completions_rps = 30,
                                     .running = 200, .waiting = i > 3 ? 300 : 0,
                                     .slots_per_gpu = 0};
            capacity_observe(&c, &o);
            check(&c, o.now_ms);
        }
    } else {
        if (!err[0])
            abort();
        struct capacity_estimate e;
        capacity_estimate(&c, 0, 0, &e);
        if (!isnan(e.value) || e.lower != 0)
            abort(); /* refused: a fresh state */
    }
    free(buf);
    return 0;
}

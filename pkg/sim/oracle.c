/* SPDX-License-Identifier: Apache-2.0 */
/* sim/oracle: the perfect-foresight reference schedules, `oracle` and
 * `static-peak`, against which every policy's GPU-hours are reported.
 *
 * The oracle knows every future arrival and the cold start, and runs on the
 * same serving model as the policies. It is built in three passes over the
 * scored window (docs/policy.md, "The oracle"):
 *  1. need(s): the fewest ready replicas that keep second s's p99 within the
 *     SLA given the queue the previous seconds left (a forward greedy:
 *     latency never rises when replicas are added, so the smallest count per
 *     second is found by a local search around the previous second's);
 *  2. bridging: for every replica "layer" k (the seconds with need >= k), an
 *     idle gap of at most one cold start is kept running, since keeping the
 *     replica costs the gap and restarting it costs the cold start. That is
 *     the morphological closing of need with a flat segment of cold start + 1
 *     seconds: min over [s, s + D] of the max over [u - D, u];
 *  3. early start: each layer is asked for one cold start before it must be
 *     ready, so desired(s) = max of the bridged need over [s, s + D].
 * Replaying desired through the serving model gives at least need(s) ready
 * replicas at every second, so no second's p99 exceeds the SLA (unless even
 * max-replicas cannot carry it). It is the practical lower bound on GPU-hours
 * at zero SLA misses, not a proof of optimality: the greedy decides per
 * second. static-peak holds the highest need for the whole window.
 *
 * Every pass is O(n) (sliding extrema with monotone deques) except the
 * greedy, which costs a few model evaluations per second. */
#include "sim-int.h"

#include <math.h>
#include <string.h>

#include "util/util.h"

/* Share of one second's requests allowed over the SLA: its p99 meets it. */
#define ORACLE_TAIL 0.01

/* Does serving this second with r ready replicas keep its p99 within sla_s? */
static bool second_ok(const struct sim_model *m, const struct sim_queue *q, int32_t r, double a,
                      double sla_s)
{
    struct sim_queue t = *q;
    struct sim_second sec;
    if (!(a > 0))
        return true;
    sim_serve_second(m, &t, r, a, &sec);
    return sim_second_frac_over(&sec, sla_s) <= ORACLE_TAIL;
}

/* Sliding maximum (want_max) or minimum of v over the windows
 * [i - back, i + fwd] clipped to [0, n), into out. */
static void sliding(const int32_t *v, size_t n, int64_t back, int64_t fwd, bool want_max,
                    int32_t *out)
{
    size_t *dq = xmalloc((n ? n : 1) * sizeof(size_t));
    size_t head = 0, tail = 0, next = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t hi = (int64_t)i + fwd;
        if (hi > (int64_t)n - 1)
            hi = (int64_t)n - 1;
        for (; (int64_t)next <= hi; next++) {
            while (tail > head &&
                   (want_max ? v[dq[tail - 1]] <= v[next] : v[dq[tail - 1]] >= v[next]))
                tail--;
            dq[tail++] = next;
        }
        while ((int64_t)dq[head] < (int64_t)i - back)
            head++;
        out[i] = v[dq[head]];
    }
    xfree(dq);
}

/* The smallest count in (bad, good] that keeps the second within the SLA,
 * bad known to miss it and good to keep it (the need is monotone). */
static int32_t smallest_ok(const struct sim_model *m, const struct sim_queue *q, double a,
                           double sla_s, int32_t bad, int32_t good)
{
    while (good - bad > 1) {
        int32_t mid = bad + (good - bad) / 2;
        if (second_ok(m, q, mid, a, sla_s))
            good = mid;
        else
            bad = mid;
    }
    return good;
}

/* The greedy per-second need within [lo, hi]; returns the seconds at which
 * even hi misses the SLA. */
static int64_t greedy_need(const struct sim_model *m, const double *arr, size_t n, double sla_s,
                           int32_t lo, int32_t hi, int32_t *need, int32_t *peak_out)
{
    struct sim_queue q = {0};
    int32_t r = lo > 0 ? lo : 1, peak = 0;
    int64_t missed = 0;
    for (size_t s = 0; s < n; s++) {
        double a = arr[s];
        if (r < lo)
            r = lo;
        if (r > hi)
            r = hi;
        if (second_ok(m, &q, r, a, sla_s)) {
            /* Shrink geometrically, then bisect back up to the smallest (one
             * at a time, a quiet second after a huge one walked down millions) */
            int32_t good = r, bad = lo - 1, step = 1;
            while (good > lo) {
                int32_t c = (int32_t)UTIL_MAX((int64_t)lo, (int64_t)good - step);
                if (!second_ok(m, &q, c, a, sla_s)) {
                    bad = c;
                    break;
                }
                good = c;
                step *= 2;
            }
            r = bad >= lo ? smallest_ok(m, &q, a, sla_s, bad, good) : good;
        } else {
            /* Grow geometrically, then bisect back to the smallest. */
            int32_t ok = r, step = 1;
            while (ok < hi && !second_ok(m, &q, ok, a, sla_s)) {
                r = ok;
                ok = (int32_t)UTIL_MIN((int64_t)hi, (int64_t)ok + step);
                step *= 2;
            }
            r = smallest_ok(m, &q, a, sla_s, r, ok);
            if (r == hi && !second_ok(m, &q, r, a, sla_s))
                missed++;
        }
        need[s] = r;
        if (r > peak)
            peak = r;
        struct sim_second sec;
        sim_serve_second(m, &q, r, a, &sec);
    }
    *peak_out = peak;
    return missed;
}

int32_t *sim_oracle_plan(const struct sim_model *m, const double *arr, size_t n,
                         int64_t cold_start_s, double sla_s, int32_t lo, int32_t hi,
                         int32_t *peak_need, int32_t *need_unbounded)
{
    int32_t *need = xmalloc((n ? n : 1) * sizeof(int32_t));
    int32_t *tmp = xmalloc((n ? n : 1) * sizeof(int32_t));
    if (lo < 0)
        lo = 0;
    if (greedy_need(m, arr, n, sla_s, lo, hi, need, peak_need) > 0) {
        /* max-replicas cannot carry the trace: how many would? (into tmp,
         * which the passes below overwrite) */
        greedy_need(m, arr, n, sla_s, lo, SIM_ORACLE_MAX_NEED, tmp, need_unbounded);
    } else {
        *need_unbounded = *peak_need;
    }
    /* Closing (bridge gaps <= D), then early start (max over the next D). */
    int64_t d = cold_start_s;
    sliding(need, n, d, 0, true, tmp);
    sliding(tmp, n, 0, d, false, need);
    sliding(need, n, 0, d, true, tmp);
    xfree(need);
    return tmp;
}

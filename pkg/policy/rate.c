/* SPDX-License-Identifier: Apache-2.0 */
/* policy/rate: per-second rates from cumulative counters, as Prometheus
 * rate() computes them: increases summed sample to sample, a decrease is a
 * counter reset (the new value counts as the increase), divided by the time
 * between the first and last sample in the window. A fixed ring of samples per
 * series, so memory never grows. */
#include "policy.h"

#include <errno.h>
#include <math.h>

static int idx(const struct policy_counter *c, int i)
{
    return (c->head + i) % POLICY_COUNTER_SAMPLES;
}

int policy_counter_add(struct policy_counter *c, int64_t t_ms, double value)
{
    if (isnan(value) || value < 0 || isinf(value))
        return -EINVAL;
    if (c->n > 0 && t_ms <= c->t_ms[idx(c, c->n - 1)])
        return -EINVAL;
    if (c->n == POLICY_COUNTER_SAMPLES) {
        c->head = (c->head + 1) % POLICY_COUNTER_SAMPLES;
        c->n--;
    }
    int i = idx(c, c->n);
    c->t_ms[i] = t_ms;
    c->v[i] = value;
    c->n++;
    return 0;
}

int policy_counter_increase(const struct policy_counter *c, int64_t now_ms, int64_t window_ms,
                            double *out_increase, int64_t *out_span_ms)
{
    int first = -1, last = -1;
    for (int i = 0; i < c->n; i++) {
        int64_t t = c->t_ms[idx(c, i)];
        if (t > now_ms - window_ms && t <= now_ms) {
            if (first < 0)
                first = i;
            last = i;
        }
    }
    if (first < 0 || last <= first)
        return -ENODATA;
    double inc = 0;
    for (int i = first + 1; i <= last; i++) {
        double prev = c->v[idx(c, i - 1)], cur = c->v[idx(c, i)];
        inc += cur >= prev ? cur - prev : cur;
    }
    int64_t span = c->t_ms[idx(c, last)] - c->t_ms[idx(c, first)];
    if (span <= 0)
        return -ENODATA;
    *out_increase = inc;
    *out_span_ms = span;
    return 0;
}

int policy_counter_rate(const struct policy_counter *c, int64_t now_ms, int64_t window_ms,
                        double *out_rate)
{
    double inc;
    int64_t span;
    int rc = policy_counter_increase(c, now_ms, window_ms, &inc, &span);
    if (rc == 0)
        *out_rate = inc / ((double)span / 1000.0);
    return rc;
}

int64_t policy_counter_last_ms(const struct policy_counter *c)
{
    return c->n ? c->t_ms[idx(c, c->n - 1)] : POLICY_NEVER;
}

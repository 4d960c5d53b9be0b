/* SPDX-License-Identifier: Apache-2.0 */
/* policy/trend: the ramp, part of the demand stage. The measured rate of
 * recent ticks is kept (at most POLICY_TREND_SAMPLES over
 * POLICY_TREND_WINDOW_MS); its least-squares line, when it rises by more than
 * POLICY_TREND_SIGMAS standard errors of its slope, is followed one cold
 * start ahead: a replica asked for now serves a cold start later, when a
 * ramp has risen that much more (the caller adds half the rate's window: a
 * window's rate is the rate of half the window ago). A daily ramp rises a few % a minute; a line
 * that rises by more than POLICY_TREND_MAX_PER_MIN of its rate a minute is
 * a burst's onset, not a ramp, and is not followed (the forecaster's plan
 * and the SLA rule answer bursts; docs/policy.md, "Demand"). The bound is
 * on the slope, not on the rise over the cold start: what tells a ramp from
 * a burst does not depend on how long a replica takes to start. */
#include "policy.h"

#include <math.h>

#include "util/util.h"

void policy_trend_push(struct policy_state *st, int64_t now_ms, double rate)
{
    if (!isfinite(rate) || rate < 0)
        return;
    if (st->trend_len > 0) {
        int32_t k = (st->trend_pos + POLICY_TREND_SAMPLES - 1) % POLICY_TREND_SAMPLES;
        if (now_ms - st->trend_t_ms[k] < POLICY_TREND_WINDOW_MS / POLICY_TREND_SAMPLES)
            return;
    }
    st->trend_rate[st->trend_pos] = rate;
    st->trend_t_ms[st->trend_pos] = now_ms;
    st->trend_pos = (st->trend_pos + 1) % POLICY_TREND_SAMPLES;
    if (st->trend_len < POLICY_TREND_SAMPLES)
        st->trend_len++;
}

double policy_trend(const struct policy_state *st, int64_t now_ms, int64_t lead_ms)
{
    /* sums over the window's samples, time in seconds before now (<= 0) */
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
    int64_t first = now_ms;
    for (int32_t i = 0; i < st->trend_len; i++) {
        int32_t k = (st->trend_pos + POLICY_TREND_SAMPLES - 1 - i) % POLICY_TREND_SAMPLES;
        if (st->trend_t_ms[k] <= now_ms - POLICY_TREND_WINDOW_MS || st->trend_t_ms[k] > now_ms)
            break;
        double x = (double)(st->trend_t_ms[k] - now_ms) / 1000.0, y = st->trend_rate[k];
        n++;
        sx += x, sy += y, sxx += x * x, sxy += x * y, syy += y * y;
        first = st->trend_t_ms[k];
    }
    /* half a window of at least 6 samples before a line is believed */
    if (n < 6 || now_ms - first < POLICY_TREND_WINDOW_MS / 2 || lead_ms <= 0)
        return 0;
    double vxx = sxx - sx * sx / n, vxy = sxy - sx * sy / n, vyy = syy - sy * sy / n;
    if (!(vxx > 0))
        return 0;
    double b = vxy / vxx;         /* slope, rate per second */
    double a = (sy - b * sx) / n; /* the line's rate now */
    double sse = vyy - b * vxy;
    double se = sqrt((sse > 0 ? sse : 0) / (n - 2) / vxx);
    if (!(b > POLICY_TREND_SIGMAS * se) || !(a > 0))
        return 0;
    /* too steep is a burst; no further ahead than the line has been seen */
    if (b * 60 > POLICY_TREND_MAX_PER_MIN * a)
        return 0;
    double h = (double)UTIL_MIN(lead_ms, now_ms - first) / 1000.0;
    return a + b * h;
}

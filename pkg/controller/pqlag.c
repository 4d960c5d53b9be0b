/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus source's ingestion-lag arithmetic, pure (promsrc.c asks
 * and logs): windows of two periods, the scrape interval from how the pods'
 * newest samples step between answers, how far an answer's samples lie
 * behind its query, and the estimate of where the window queries are
 * evaluated. */
#include "controller-int.h"

#include <math.h>
#include <string.h>

/* m's periods are len long, on a grid from its first call (len may change
 * from one period to the next): at t, the period now is the one t falls
 * in, and the one before is kept when it is the period just before. */
void ctl_win2_roll(struct ctl_win2 *m, int64_t t, int64_t len)
{
    if (m->start == 0) {
        m->start = t;
        return;
    }
    if (t < m->start + len)
        return;
    int64_t k = (t - m->start) / len;
    m->have[1] = m->have[0] && k == 1;
    m->v[1] = m->v[0];
    m->have[0] = false;
    m->start += k * len;
}

bool ctl_win2_get(const struct ctl_win2 *m, bool most, int64_t *out)
{
    if (!m->have[0] && !m->have[1])
        return false;
    int64_t a = m->have[0] ? m->v[0] : m->v[1], b = m->have[1] ? m->v[1] : a;
    *out = (most ? a > b : a < b) ? a : b;
    return true;
}

int64_t ctl_win2_add(struct ctl_win2 *m, int64_t t, int64_t len, int64_t v, bool most)
{
    ctl_win2_roll(m, t, len);
    if (!m->have[0] || (most ? v > m->v[0] : v < m->v[0]))
        m->v[0] = v;
    m->have[0] = true;
    int64_t out = v;
    ctl_win2_get(m, most, &out);
    return out;
}

/* Whether every series of the pod's request counter was sampled at once. */
static bool one_time(const struct promql_pod *p)
{
    return p->at_ms > 0 && p->at_min_ms == p->at_ms;
}

int64_t ctl_pq_step(const struct promql_pods *old, const struct promql_pods *pods,
                    int64_t asked_ms, int64_t window_ms)
{
    int64_t step = 0;
    /* the samples between the newest before the window and the newest: the
     * interval itself, at any decision interval (steps between answers come
     * in multiples of it when ticks are further apart); not a sample on the
     * window's very edge, which Prometheus 2 counts in the window too */
    for (size_t j = 0; pods && j < pods->n; j++) {
        const struct promql_pod *p = &pods->v[j];
        if (one_time(p) && p->samples >= 1 && p->before_ms > 0 && p->at_ms > p->before_ms &&
            p->before_ms != asked_ms - window_ms) {
            int64_t d = llround((double)(p->at_ms - p->before_ms) / p->samples);
            if (d > 0 && (step == 0 || d < step))
                step = d;
        }
    }
    for (size_t i = 0, j = 0; old && pods && i < old->n && j < pods->n;) {
        int c = strcmp(old->v[i].name, pods->v[j].name);
        if (c == 0 && one_time(&old->v[i]) && one_time(&pods->v[j]) &&
            pods->v[j].at_ms > old->v[i].at_ms) {
            int64_t d = pods->v[j].at_ms - old->v[i].at_ms;
            if (step == 0 || d < step)
                step = d;
        }
        i += c <= 0;
        j += c >= 0;
    }
    return step;
}

int64_t ctl_pq_interval(struct ctl_win2 *m, int64_t step, int64_t t)
{
    if (step > 0)
        return ctl_win2_add(m, t, CTL_PQ_LAG_PERIOD_MS, step, false);
    ctl_win2_roll(m, t, CTL_PQ_LAG_PERIOD_MS);
    int64_t iv = 0;
    ctl_win2_get(m, false, &iv);
    return iv;
}

/* A pod more than two intervals behind the freshest is not being scraped:
 * left out of the oldest. */
bool ctl_pq_lags(const struct promql_pods *pods, int64_t asked_ms, int64_t iv, int64_t *fresh,
                 int64_t *old)
{
    int64_t newest = 0, oldest = 0;
    for (size_t i = 0; pods && i < pods->n; i++)
        if (pods->v[i].at_ms > newest)
            newest = pods->v[i].at_ms;
    if (newest <= 0)
        return false;
    for (size_t i = 0; i < pods->n; i++) {
        const struct promql_pod *p = &pods->v[i];
        /* its oldest series' newest sample, unless that series lies more
         * than an interval and a half behind the pod's newest: no longer
         * scraped (gone stale without a staleness marker) */
        int64_t at = p->at_min_ms > 0 && p->at_ms - p->at_min_ms <= iv * 3 / 2 ? p->at_min_ms
                                                                              : p->at_ms;
        if (at > 0 && (p->counted || !pods->counted_seen) && newest - at <= 2 * iv &&
            (oldest == 0 || at < oldest))
            oldest = at;
    }
    int64_t lag[2] = {asked_ms - newest, asked_ms - (oldest ? oldest : newest)};
    for (int k = 0; k < 2; k++)
        lag[k] = lag[k] < 0 ? 0 : lag[k] > CTL_PQ_LAG_MAX_MS ? CTL_PQ_LAG_MAX_MS : lag[k];
    *fresh = lag[0];
    *old = lag[1];
    return true;
}

int64_t ctl_pq_estimate(struct ctl_win2 *least, struct ctl_win2 *most, int64_t t, int64_t iv,
                        int64_t tick, int64_t fresh, int64_t old)
{
    /* an interval, or a tick when ticks are further apart: two periods
     * then hold the answer before too, whose sawtooth is elsewhere */
    int64_t len = iv > tick ? iv : tick;
    len = iv <= 0 ? CTL_PQ_LAG_PERIOD_MS : len < 1000 ? 1000
          : len > CTL_PQ_LAG_PERIOD_MS ? CTL_PQ_LAG_PERIOD_MS : len;
    int64_t est = ctl_win2_add(least, t, len, fresh, false);
    if (iv > 0) {
        int64_t need = ctl_win2_add(most, t, len, old - iv, true);
        if (need > est)
            est = need;
    }
    return est;
}

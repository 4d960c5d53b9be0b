/* SPDX-License-Identifier: Apache-2.0 */
/* bench-pqlag: a model of the Prometheus source's ingestion-lag estimate
 * (pkg/controller/pqlag.c, linked as the controller uses it) and of
 * promsrc.c's drop rule: pods scraped every S s at random phases, each
 * sample visible after a delay plus up to J s of its own (a remote write's
 * batches), a per-pod answer every tick with each pod's newest sample, its
 * samples in a 2-minute window and the newest before it; an answer whose
 * rate was asked more than 1.1 learned intervals past a pod's newest sample
 * is dropped and asked again at once. Prints, per setting, the share of
 * answers asked again, the share used while more than 1.1 true intervals
 * past a pod's sample (rate() then reads low) and the worst such reading,
 * and the estimate at the end. Deterministic. Arguments: none for the grid,
 * or tick_s scrape_s pods jitter_s delay_s [ramp_s_per_s]. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller-int.h"

#define MAXP 20
#define MAXS 100000
#define WINDOW_MS 120000
#define T0 1700000000000LL

struct model {
    int64_t tick, scrape, jitter, delay;
    double ramp; /* the delay grows this much a second to 40 s more, falls back, again */
    int pods;
    int64_t phase[MAXP];
    int64_t *vis[MAXP]; /* when each sample turns visible (never earlier than the one before) */
    char name[MAXP][12];
    uint64_t rng;
    /* the controller's state */
    struct ctl_win2 iv_win, lag_win, need_win;
    int64_t lag_ms;
    bool lag_known, have;
    struct promql_pod prev[MAXP];
    /* counts */
    long asked, dropped, used, low;
    double worst;
};

static double urand(struct model *m)
{
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    return (double)(m->rng >> 11) * (1.0 / 9007199254740992.0);
}

static int64_t sample_time(const struct model *m, int i, int64_t n)
{
    return T0 - 600000 + m->phase[i] + n * m->scrape;
}

static int64_t delay_at(const struct model *m, int64_t t)
{
    if (m->ramp <= 0)
        return m->delay;
    int64_t c = (t - T0) % 600000, up = (int64_t)(40000.0 / m->ramp);
    if (c < 0)
        c += 600000;
    double d = c < up ? (double)c * m->ramp : c < 2 * up ? 40000 - (double)(c - up) * m->ramp : 0;
    return m->delay + (int64_t)d;
}

/* Pod i's newest sample at or before lim that is visible at q; -1 none. */
static int64_t newest(const struct model *m, int i, int64_t lim, int64_t q)
{
    int64_t n = lim - (T0 - 600000) - m->phase[i];
    if (n < 0)
        return -1;
    n /= m->scrape;
    if (n >= MAXS)
        n = MAXS - 1;
    while (n >= 0 && m->vis[i][n] > q)
        n--;
    return n;
}

/* The per-pod answer at q, as Prometheus 3 gives it (a window open on the left). */
static void answer(const struct model *m, int64_t q, struct promql_pod *v, struct promql_pods *ps)
{
    *ps = (struct promql_pods){.v = v, .n = (size_t)m->pods, .counted_seen = true};
    for (int i = 0; i < m->pods; i++) {
        int64_t a = newest(m, i, q, q), b = newest(m, i, q - WINDOW_MS, q);
        v[i] = (struct promql_pod){.name = (char *)m->name[i], .counted = true, .running = NAN,
                                   .waiting = NAN, .requests = NAN, .refused = NAN};
        v[i].at_ms = v[i].at_min_ms = sample_time(m, i, a);
        if (a > b)
            v[i].samples = (double)(a - b);
        if (b >= 0)
            v[i].before_ms = sample_time(m, i, b);
    }
}

/* An answer used: its rate read low where a pod's newest sample lay more
 * than 1.1 true intervals before the window's end (by the part of the
 * window rate() then leaves out). */
static void used(struct model *m, int64_t asked, int64_t lag)
{
    int64_t end = asked - lag;
    double worst = 0;
    for (int i = 0; i < m->pods; i++) {
        int64_t past = end - sample_time(m, i, newest(m, i, end, asked));
        if (past * 10 > m->scrape * 11) {
            double f = (double)(past - m->scrape / 2) / WINDOW_MS;
            worst = f > worst ? f : worst;
        }
    }
    m->used++;
    if (worst > 0)
        m->low++;
    m->worst = worst > m->worst ? worst : m->worst;
}

/* promsrc.c's pq_answered, of an answer asked at `asked` lag ms back. */
static void process(struct model *m, int64_t asked, int64_t lag, bool lag_known, bool again)
{
    struct promql_pod v[MAXP];
    struct promql_pods ps, po = {.v = m->prev, .n = (size_t)m->pods, .counted_seen = true};
    answer(m, asked, v, &ps);
    int64_t iv = ctl_pq_interval(&m->iv_win,
                                 ctl_pq_step(m->have ? &po : NULL, &ps, asked, WINDOW_MS), asked);
    int64_t fresh = -1, old = -1;
    bool timed = ctl_pq_lags(&ps, asked, iv, &fresh, &old);
    if (timed) {
        if (!m->lag_known)
            m->lag_win = m->need_win = (struct ctl_win2){0};
        m->lag_ms = ctl_pq_estimate(&m->lag_win, &m->need_win, asked, iv, m->tick, fresh, old);
        m->lag_known = true;
    }
    bool first = !lag_known && m->lag_ms - lag >= CTL_PQ_LAG_REASK_MS;
    bool grew = lag_known && timed && iv > 0 && (old - lag) * 10 > iv * 11;
    memcpy(m->prev, v, sizeof(v));
    m->have = true;
    m->asked += !again;
    if (m->lag_known && !again && (first || grew)) {
        m->dropped++;
        int64_t now = asked + 50 + (int64_t)(urand(m) * 250); /* the round trip */
        int64_t lag2 = grew ? (old - iv > fresh ? old - iv : fresh) + (now - asked) : m->lag_ms;
        process(m, now, lag2, m->lag_known, true);
    } else {
        used(m, asked, lag);
    }
}

static int run(int64_t tick, int64_t scrape, int pods, int64_t jitter, int64_t delay,
               double ramp, int ticks)
{
    struct model *m = calloc(1, sizeof(*m));
    if (!m)
        return 1;
    *m = (struct model){.tick = tick, .scrape = scrape, .jitter = jitter, .delay = delay,
                        .ramp = ramp, .pods = pods, .rng = 88172645463325252ull};
    int rc = 0;
    for (int i = 0; i < pods; i++) {
        snprintf(m->name[i], sizeof(m->name[i]), "p%02d", i);
        m->phase[i] = (int64_t)(urand(m) * (double)scrape);
        if (!(m->vis[i] = malloc(sizeof(int64_t) * MAXS))) {
            rc = 1;
            goto out;
        }
        for (int64_t n = 0, prev = 0; n < MAXS; n++) {
            int64_t t = sample_time(m, i, n), v = t + delay_at(m, t) + (int64_t)(urand(m) * jitter);
            m->vis[i][n] = prev = v > prev ? v : prev;
        }
    }
    int64_t t = T0 + (int64_t)(urand(m) * 1000);
    for (int k = 0; k < ticks; k++) {
        if (k == 40) /* the start's answers left out */
            m->asked = m->dropped = m->used = m->low = 0, m->worst = 0;
        process(m, t, m->lag_known ? m->lag_ms : 0, m->lag_known, false);
        t += tick + (int64_t)(urand(m) * 10);
    }
    printf("%5.0f %6.0f %4d %6.0f %5.0f %5.2f | %7.1f %% %8.1f %% %6.1f %% %7.1f\n",
           (double)tick / 1000, (double)scrape / 1000, pods, (double)jitter / 1000,
           (double)delay / 1000, ramp, 100.0 * (double)m->dropped / (double)m->asked,
           100.0 * (double)m->low / (double)m->used, 100.0 * m->worst, (double)m->lag_ms / 1000);
out:
    for (int i = 0; i < pods; i++)
        free(m->vis[i]);
    free(m);
    return rc;
}

int main(int argc, char **argv)
{
    printf("tick scrape pods jitter delay ramp |  asked again  used low  worst    lag\n");
    printf("  (s)    (s)        (s)   (s) (s/s)|  (of answers) (of used) (low)    (s)\n");
    if (argc >= 6)
        return run((int64_t)(atof(argv[1]) * 1000), (int64_t)(atof(argv[2]) * 1000),
                   atoi(argv[3]) > MAXP ? MAXP : atoi(argv[3]), (int64_t)(atof(argv[4]) * 1000),
                   (int64_t)(atof(argv[5]) * 1000), argc > 6 ? atof(argv[6]) : 0, 1500);
    static const double grid[][6] = {
        {1, 10, 4, 2, 5, 0},   {1, 10, 4, 5, 45, 0}, {15, 5, 4, 2, 5, 0},  {15, 5, 20, 5, 5, 0},
        {15, 30, 10, 5, 45, 0}, {30, 5, 20, 5, 5, 0}, {45, 10, 20, 5, 5, 0}, {60, 15, 10, 5, 5, 0},
        {1, 10, 4, 2, 5, 0.2}, {15, 5, 20, 2, 5, 0.2}, {60, 5, 20, 2, 5, 0.2},
    };
    for (size_t i = 0; i < sizeof(grid) / sizeof(grid[0]); i++)
        if (run((int64_t)(grid[i][0] * 1000), (int64_t)(grid[i][1] * 1000), (int)grid[i][2],
                (int64_t)(grid[i][3] * 1000), (int64_t)(grid[i][4] * 1000), grid[i][5],
                1500) != 0)
            return 1;
    return 0;
}

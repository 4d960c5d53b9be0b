/* SPDX-License-Identifier: Apache-2.0 */
/* sim/serving: the serving model: how many requests a set of GPU replicas
 * serves each second and how long the requests wait.
 *
 * Two effects add up (docs/policy.md, "Serving model"):
 *  - a fluid backlog: each second, arrivals beyond the ready capacity
 *    (ready x G x C) stay queued and are served first in later seconds; a
 *    request waits for the backlog ahead of it to drain at the current
 *    capacity;
 *  - M/M/c queueing inside each replica (c = G x slots concurrent requests,
 *    requests spread evenly over ready replicas): an arrival waits for a slot
 *    with the Erlang C probability, and that wait is exponential with rate
 *    G x C x (1 - rho). This makes latency rise smoothly as utilisation nears
 *    1 rather than only past it. rho is capped at SIM_RHO_MAX (0.98): past it
 *    the excess is overload, carried by the fluid backlog, so a burst over
 *    capacity costs the time its backlog takes to drain.
 * A request's latency is service time + drain time + slot wait. Erlang C is
 * tabulated once per model over the utilisation so that a 1 s step costs a
 * table lookup; quantiles of a mixture of seconds are solved exactly (bisection
 * over the jumps, Newton on the log of the tail mass on the smooth parts). */
#include "sim-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

double sim_erlang_c(int c, double a)
{
    if (c < 1 || !(a > 0))
        return 0;
    if (a >= c)
        return 1;
    /* Erlang B by its stable recursion, then C = c B / (c - a (1 - B)). */
    double b = 1;
    for (int k = 1; k <= c; k++)
        b = a * b / (k + a * b);
    double pc = c * b / (c - a * (1 - b));
    return pc < 0 ? 0 : pc > 1 ? 1 : pc;
}

int sim_model_init(struct sim_model *m, double gpus, double cap_gpu, double service_s,
                   double slots_per_gpu)
{
    memset(m, 0, sizeof(*m));
    if (!(gpus > 0) || !(cap_gpu > 0) || !(service_s > 0) || !isfinite(gpus) ||
        !isfinite(cap_gpu) || !isfinite(service_s) || !isfinite(slots_per_gpu))
        return -EINVAL;
    double slots = slots_per_gpu > 0 ? slots_per_gpu : cap_gpu * service_s;
    double c = round(gpus * slots);
    if (c > 100000)
        return -EINVAL;
    m->gpus = gpus;
    m->cap_gpu = cap_gpu;
    m->service_s = service_s;
    m->servers = c < 1 ? 1 : (int)c;
    m->erlang = xmalloc((SIM_ERLANG_GRID + 1) * sizeof(double));
    for (int i = 0; i <= SIM_ERLANG_GRID; i++) {
        double rho = SIM_RHO_MAX * i / SIM_ERLANG_GRID;
        m->erlang[i] = sim_erlang_c(m->servers, rho * m->servers);
    }
    return 0;
}

void sim_model_free(struct sim_model *m)
{
    if (!m)
        return;
    xfree(m->erlang);
    m->erlang = NULL;
}

double sim_model_wait_prob(const struct sim_model *m, double rho)
{
    if (!(rho > 0))
        return 0;
    if (rho >= SIM_RHO_MAX)
        return m->erlang[SIM_ERLANG_GRID];
    double x = rho / SIM_RHO_MAX * SIM_ERLANG_GRID;
    int i = (int)x;
    if (i >= SIM_ERLANG_GRID)
        return m->erlang[SIM_ERLANG_GRID];
    double f = x - i;
    return m->erlang[i] + (m->erlang[i + 1] - m->erlang[i]) * f;
}

void sim_serve_second(const struct sim_model *m, struct sim_queue *q, int32_t ready,
                      double arrivals, struct sim_second *out)
{
    /* 1 - exp(-1 / SIM_RATE_TAU_S), the EWMA weight of one second. */
    static const double k = 0.09516258196404048;
    if (!(arrivals > 0))
        arrivals = 0;
    if (!q->primed) {
        q->rate = arrivals;
        q->primed = true;
    } else {
        q->rate += (arrivals - q->rate) * k;
    }
    out->n = arrivals;
    double b0 = q->backlog;
    if (ready <= 0) {
        q->backlog = b0 + arrivals;
        out->base_s = SIM_LATENCY_MAX_S;
        out->pw = 0;
        out->theta = 1;
        return;
    }
    double per_replica = m->gpus * m->cap_gpu;
    double cap = ready * per_replica;
    double b1 = b0 + arrivals - cap;
    if (b1 < 1e-9)
        b1 = 0;
    q->backlog = b1;
    double drain = 0.5 * (b0 + b1) / cap;
    double rho = q->rate / cap;
    out->pw = sim_model_wait_prob(m, rho);
    out->theta = per_replica * (1 - (rho < SIM_RHO_MAX ? rho : SIM_RHO_MAX));
    double base = m->service_s + drain;
    out->base_s = base < SIM_LATENCY_MAX_S ? base : SIM_LATENCY_MAX_S;
}

double sim_second_frac_over(const struct sim_second *s, double x)
{
    if (x < s->base_s)
        return 1;
    if (!(s->pw > 0))
        return 0;
    double d = x - s->base_s;
    double p = d == 0 ? s->pw : s->pw * exp(-s->theta * d); /* exp(0) is 1 */
    return p > 1 ? 1 : p;
}

/* Sum of n_i P_i(L > x) over the seconds. */
static double tail_mass(const struct sim_second *s, size_t n, double x)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].n > 0)
            sum += s[i].n * sim_second_frac_over(&s[i], x);
    return sum;
}

/* Smallest x in [lo, hi) with tail_mass(x) <= target, where no base lies in
 * (lo, hi) and tail_mass(lo) > target; hi when there is none (the mass then
 * drops at the jump at hi). On [lo, hi) the mass is a constant c (seconds
 * whose base is >= hi, all still counting fully) plus E(x), a sum of
 * decreasing exponentials. log E is convex and decreasing (and linear for
 * one exponential), so Newton on log E(x) = log(target - c) from lo climbs
 * monotonically onto the root: 2.1 steps on average in bench-plan, where
 * Newton on the mass itself took 8.9. */
static double solve_segment(const struct sim_second *s, size_t n, double lo, double hi,
                            double target)
{
    double c = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].n > 0 && s[i].base_s > lo)
            c += s[i].n;
    double t = target - c;
    if (!(t > 0))
        return hi; /* the seconds still counting fully already exceed it */
    double x = lo;
    for (int it = 0; it < 100; it++) {
        double e = 0, de = 0;
        for (size_t i = 0; i < n; i++) {
            if (!(s[i].n > 0) || s[i].base_s > lo || !(s[i].pw > 0))
                continue;
            double d = x - s[i].base_s;
            double v = s[i].n * s[i].pw * (d == 0 ? 1 : exp(-s[i].theta * d));
            e += v;
            de -= s[i].theta * v;
        }
        if (e <= t)
            return x;
        if (!(de < 0))
            return hi;
        double nx = x - log(e / t) * e / de;
        if (!(nx < hi))
            return hi;
        if (nx - x <= 1e-12 * (x > 1 ? x : 1))
            return nx;
        x = nx;
    }
    return x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double sim_latency_quantile(const struct sim_second *s, size_t n, double q)
{
    double total = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].n > 0)
            total += s[i].n;
    if (!(total > 0))
        return 0;
    double target = (1 - q) * total;

    /* The distinct bases, sorted: the mass jumps down at each of them. */
    double small[64];
    double *bases = n <= UTIL_ARRAY_LEN(small) ? small : xmalloc(n * sizeof(double));
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].n > 0)
            bases[k++] = s[i].base_s;
    qsort(bases, k, sizeof(double), cmp_double);
    size_t d = 0;
    for (size_t i = 0; i < k; i++)
        if (d == 0 || bases[i] != bases[d - 1])
            bases[d++] = bases[i];

    /* First base at which the mass is already <= target (binary search: the
     * mass is non-increasing). */
    size_t lo = 0, hi = d;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tail_mass(s, n, bases[mid]) <= target)
            hi = mid;
        else
            lo = mid + 1;
    }
    double x;
    if (lo == 0) {
        x = bases[0]; /* nobody is faster than the smallest base */
    } else {
        /* The answer lies in [bases[lo-1], bases[lo]] (or beyond the last). */
        double seg_hi = lo < d ? bases[lo] : INFINITY;
        x = solve_segment(s, n, bases[lo - 1], seg_hi, target);
        if (!isfinite(x))
            x = SIM_LATENCY_MAX_S;
    }
    if (bases != small)
        xfree(bases);
    return x < SIM_LATENCY_MAX_S ? x : SIM_LATENCY_MAX_S;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* plan/cost: what a GPU curve costs under a reserved commitment, the
 * commitment that minimises the expected cost over scenarios, and the
 * always-on baseline.
 *
 * A commitment of R GPUs is paid for every hour of the horizon at the
 * reserved price; GPU-hours above R are paid at the flexible price
 * (on-demand, or spot when cheaper after interruptions re-run on demand):
 *
 *   cost(R) = R x hours x p_reserved + p_flexible x sum_steps max(0, u - R) x step
 *
 * Its expectation over scenarios is convex and piecewise linear in R with
 * slope hours x p_reserved - p_flexible x (expected hours with u > R): it
 * falls while more than p_reserved / p_flexible of the (weighted) hours need
 * more than R GPUs. plan_commit_optimal() evaluates every integer R in one
 * sweep over the sorted values, so the minimum over integers is exact. */
#include "plan-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double plan_cost(const struct plan_prices *p, const double *gpus, size_t n, double step_h,
                 int64_t reserved, double *stranded, double *flexible)
{
    double flex = 0, idle = 0, r = (double)reserved;
    for (size_t i = 0; i < n; i++) {
        if (gpus[i] > r)
            flex += (gpus[i] - r) * step_h;
        else
            idle += (r - gpus[i]) * step_h;
    }
    if (stranded)
        *stranded = idle;
    if (flexible)
        *flexible = flex;
    return r * (double)n * step_h * p->reserved + flex * p->flexible;
}

struct wv {
    double v, w;
};

static int cmp_wv(const void *a, const void *b)
{
    double x = ((const struct wv *)a)->v, y = ((const struct wv *)b)->v;
    return x < y ? -1 : x > y ? 1 : 0;
}

int64_t plan_commit_optimal(const struct plan_prices *p, const double *const *curves,
                            const double *weights, size_t nscen, size_t n, double step_h,
                            double *expected)
{
    size_t total = nscen * n;
    struct wv *v = xmalloc((total ? total : 1) * sizeof(*v));
    double wsum = 0, s1 = 0, s0 = 0, top = 0;
    for (size_t s = 0; s < nscen; s++)
        wsum += weights[s];
    for (size_t s = 0, k = 0; s < nscen; s++)
        for (size_t i = 0; i < n; i++, k++) {
            double w = wsum > 0 ? weights[s] / wsum * step_h : 0;
            v[k] = (struct wv){curves[s][i] > 0 ? curves[s][i] : 0, w};
            s1 += v[k].v * w; /* sum of w u over values above R (R = 0: all) */
            s0 += w;
            if (v[k].v > top)
                top = v[k].v;
        }
    qsort(v, total, sizeof(*v), cmp_wv);
    double hours = (double)n * step_h;
    int64_t best = 0, rmax = (int64_t)ceil(top);
    double best_cost = INFINITY;
    size_t j = 0;
    for (int64_t r = 0; r <= rmax; r++) {
        /* drop the values no longer above r */
        while (j < total && v[j].v <= (double)r) {
            s1 -= v[j].v * v[j].w;
            s0 -= v[j].w;
            j++;
        }
        if (j == total)
            s1 = s0 = 0; /* no rounding residue once nothing is above r */
        double c = (double)r * hours * p->reserved + p->flexible * (s1 - (double)r * s0);
        if (r == 0 || c < best_cost - 1e-9 * (1 + fabs(best_cost))) {
            best_cost = c;
            best = r;
        }
    }
    xfree(v);
    if (expected)
        *expected = best_cost;
    return best;
}

int64_t plan_baseline(const double *gpus, size_t n, int64_t step_ms, double share)
{
    if (n == 0)
        return 0;
    /* hourly means; steps divide an hour and are aligned to the clock only
     * through their index, so group every 1 h / step of them */
    size_t per = (size_t)(3600 * 1000 / step_ms);
    if (per == 0)
        per = 1;
    size_t nh = (n + per - 1) / per;
    double *h = xmalloc(nh * sizeof(double));
    for (size_t i = 0; i < nh; i++) {
        double sum = 0;
        size_t c = 0;
        for (size_t k = i * per; k < n && k < (i + 1) * per; k++, c++)
            sum += gpus[k];
        h[i] = sum / (double)c;
    }
    plan_quantile(h, nh, 0.5); /* sorts */
    size_t m = (size_t)floor((1 - share) * (double)nh + 1e-9);
    if (m >= nh)
        m = nh - 1;
    int64_t b = (int64_t)floor(h[m] + 1e-9);
    xfree(h);
    return b;
}

void plan_choice_eval(const struct plan_result *r, const char *name, int64_t reserved,
                      struct plan_choice *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", name);
    out->reserved = reserved;
    double step_h = (double)r->step_ms / 3600e3;
    for (size_t s = 0; s < r->nscen; s++) {
        out->cost[s] = plan_cost(&r->prices, r->scen[s].gpus, r->nsteps, step_h, reserved,
                                 &out->stranded_gpu_hours[s], &out->flexible_gpu_hours[s]);
        out->expected_cost += r->scen[s].weight * out->cost[s];
    }
}

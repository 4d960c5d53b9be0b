/* SPDX-License-Identifier: Apache-2.0 */
/* sim/hpa: a faithful model of the Kubernetes HorizontalPodAutoscaler (v2)
 * for one Deployment with one Pods metric (average requests/s per pod,
 * AverageValue target), the baseline `gpuscaler simulate` compares against.
 *
 * Modelled on kubernetes/kubernetes pkg/controller/podautoscaler:
 *  - replica_calculator.go calcPlainMetricReplicas / groupPods: tolerance
 *    band, pods without metrics counted as 0 on scale-up and as the target on
 *    scale-down, Pending pods as 0 on scale-up, no change when that would flip
 *    the direction;
 *  - horizontal.go reconcileAutoscaler, normalizeDesiredReplicasWithBehaviors,
 *    stabilizeRecommendationWithBehaviors (min over the scale-up window, max
 *    over the scale-down window, clamp of the current count between them),
 *    convertDesiredReplicasWithBehaviorRate with
 *    calculateScaleUpLimitWithScalingRules / calculateScaleDownLimitWithBehaviors
 *    (period start = current - added + deleted in the period), storeScaleEvent;
 *  - pkg/apis/autoscaling/v2/defaults.go: scale-up Pods 4 and Percent 100 per
 *    15 s with selectPolicy Max, scale-down Percent 100 per 15 s, and the
 *    controller's 300 s downscale stabilization, 0.1 tolerance, 15 s sync.
 * The metric pipeline (which pods have a value, with what lag) is the
 * simulator's business (sim.c); this file sees the numbers the HPA would.
 *
 * Time comparisons keep Go's strictness: a recommendation or event counts
 * when its timestamp is After(now - window). */
#include "sim-int.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "util/util.h"

struct rec {
    int64_t t_ms;
    int32_t v;
};

struct ev {
    int64_t t_ms;
    int32_t change; /* > 0 */
};

struct sim_hpa {
    struct sim_hpa_config cfg;
    int32_t min, max;
    bool have_recs;
    struct rec *recs;
    size_t nrecs, caprecs;
    struct ev *up, *down;
    size_t nup, capup, ndown, capdown;
};

struct sim_hpa *sim_hpa_new(const struct sim_hpa_config *cfg, int32_t min_replicas,
                            int32_t max_replicas)
{
    struct sim_hpa *h = xcalloc(1, sizeof(*h));
    h->cfg = *cfg;
    h->min = min_replicas;
    h->max = max_replicas;
    return h;
}

void sim_hpa_free(struct sim_hpa *h)
{
    if (!h)
        return;
    xfree(h->recs);
    xfree(h->up);
    xfree(h->down);
    xfree(h);
}

static bool within(double tol, double ratio)
{
    return 1.0 - tol <= ratio && ratio <= 1.0 + tol;
}

static int32_t ceil_i32(double x)
{
    if (!(x < 2147483647.0))
        return INT32_MAX;
    return (int32_t)ceil(x);
}

int32_t sim_hpa_calc(double tolerance, int32_t current, double target, const double *values,
                     size_t nvalues, int32_t nmissing, int32_t nunready)
{
    if (nvalues == 0 || !(target > 0))
        return -ENODATA; /* "did not receive metrics for targeted pods" */
    double total = 0;
    for (size_t i = 0; i < nvalues; i++)
        total += values[i];
    double ratio = total / (double)nvalues / target;
    bool up_with_unready = nunready > 0 && ratio > 1.0;

    if (!up_with_unready && nmissing == 0) {
        if (within(tolerance, ratio))
            return current;
        return ceil_i32(ratio * (double)nvalues);
    }
    double n = (double)nvalues;
    if (nmissing > 0) {
        if (ratio < 1.0) {
            total += nmissing * target; /* scale-down: missing pods at the target */
            n += nmissing;
        } else if (ratio > 1.0) {
            n += nmissing; /* scale-up: missing pods at 0 */
        }
    }
    if (up_with_unready)
        n += nunready; /* scale-up: Pending pods at 0 */
    double new_ratio = total / n / target;
    if (within(tolerance, new_ratio) || (ratio < 1.0 && new_ratio > 1.0) ||
        (ratio > 1.0 && new_ratio < 1.0))
        return current;
    int32_t r = ceil_i32(new_ratio * n);
    if ((new_ratio < 1.0 && r > current) || (new_ratio > 1.0 && r < current))
        return current;
    return r;
}

static int32_t changes_in_period(const struct ev *e, size_t n, int64_t now, int64_t period)
{
    int64_t cutoff = now - period;
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].t_ms > cutoff)
            sum += e[i].change;
    return sum > INT32_MAX ? INT32_MAX : (int32_t)sum;
}

static void add_event(struct ev **e, size_t *n, size_t *cap, int64_t now, int64_t period,
                      int32_t change)
{
    /* storeScaleEvent reuses outdated slots; dropping them is equivalent. */
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if ((*e)[i].t_ms >= now - period)
            (*e)[k++] = (*e)[i];
    *n = k;
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        *e = xrealloc(*e, *cap * sizeof(**e));
    }
    (*e)[(*n)++] = (struct ev){now, change};
}

static int32_t stabilize(struct sim_hpa *h, int64_t now, int32_t current, int32_t desired)
{
    int32_t up = desired, down = desired;
    int64_t up_cut = now - h->cfg.upscale_window_ms;
    int64_t down_cut = now - h->cfg.downscale_window_ms;
    int64_t obsolete = now - UTIL_MAX(h->cfg.upscale_window_ms, h->cfg.downscale_window_ms);
    size_t k = 0;
    for (size_t i = 0; i < h->nrecs; i++) {
        const struct rec *r = &h->recs[i];
        if (r->t_ms > up_cut)
            up = UTIL_MIN(up, r->v);
        if (r->t_ms > down_cut)
            down = UTIL_MAX(down, r->v);
        if (r->t_ms >= obsolete)
            h->recs[k++] = *r; /* older ones are never read again */
    }
    h->nrecs = k;
    int32_t rec = current;
    if (rec < up)
        rec = up;
    if (rec > down)
        rec = down;
    if (h->nrecs == h->caprecs) {
        h->caprecs = h->caprecs ? h->caprecs * 2 : 32;
        h->recs = xrealloc(h->recs, h->caprecs * sizeof(*h->recs));
    }
    h->recs[h->nrecs++] = (struct rec){now, desired};
    return rec;
}

static int32_t rate_limit(struct sim_hpa *h, int64_t now, int32_t current, int32_t desired,
                          const char **reason)
{
    const struct sim_hpa_config *c = &h->cfg;
    if (desired > current) {
        /* Scale-up policies: Pods and Percent over the same period, select Max. */
        int64_t added = changes_in_period(h->up, h->nup, now, c->scale_up_period_ms);
        int64_t deleted = changes_in_period(h->down, h->ndown, now, c->scale_up_period_ms);
        int64_t start = (int64_t)current - added + deleted;
        int64_t by_pods = start + c->scale_up_pods;
        int64_t by_pct = (int64_t)ceil((double)start * (1 + c->scale_up_percent / 100.0));
        int64_t limit = UTIL_MAX(by_pods, by_pct);
        if (limit < current)
            limit = current;
        int64_t allowed = UTIL_MIN((int64_t)h->max, limit);
        if (desired > allowed) {
            *reason = allowed < h->max ? "ScaleUpLimit" : "TooManyReplicas";
            return (int32_t)allowed;
        }
    } else if (desired < current) {
        int64_t added = changes_in_period(h->up, h->nup, now, c->scale_down_period_ms);
        int64_t deleted = changes_in_period(h->down, h->ndown, now, c->scale_down_period_ms);
        int64_t start = (int64_t)current - added + deleted;
        int64_t limit = (int64_t)((double)start * (1 - c->scale_down_percent / 100.0));
        if (limit > current)
            limit = current;
        int64_t allowed = UTIL_MAX((int64_t)h->min, limit);
        if (desired < allowed) {
            *reason = allowed > h->min ? "ScaleDownLimit" : "TooFewReplicas";
            return (int32_t)allowed;
        }
    }
    return desired;
}

int32_t sim_hpa_sync(struct sim_hpa *h, int64_t now_ms, int32_t current, int32_t calc,
                     const char **reason)
{
    const char *held = "DesiredWithinRange"; /* why there is no change */
    const char *limit = NULL;                /* a bound or rate limit that cut the change */
    if (!h->have_recs) { /* recordInitialRecommendation */
        h->have_recs = true;
        h->caprecs = 32;
        h->recs = xmalloc(h->caprecs * sizeof(*h->recs));
        h->recs[0] = (struct rec){now_ms, current};
        h->nrecs = 1;
    }
    int32_t desired;
    if (current > h->max) {
        desired = h->max;
        limit = "AboveMaxReplicas";
    } else if (current < h->min) {
        desired = h->min;
        limit = "BelowMinReplicas";
    } else if (calc < 0) {
        if (reason)
            *reason = "FailedGetPodsMetric";
        return current; /* the sync errors out before touching any state */
    } else {
        int32_t stab = stabilize(h, now_ms, current, calc);
        if (stab != calc)
            held = stab > calc ? "ScaleDownStabilized" : "ScaleUpStabilized";
        desired = rate_limit(h, now_ms, current, stab, &limit);
    }
    int64_t keep = UTIL_MAX(h->cfg.scale_up_period_ms, h->cfg.scale_down_period_ms);
    if (desired > current)
        add_event(&h->up, &h->nup, &h->capup, now_ms, keep, desired - current);
    else if (desired < current)
        add_event(&h->down, &h->ndown, &h->capdown, now_ms, keep, current - desired);
    if (reason) {
        if (desired == current)
            *reason = limit ? limit : held;
        else
            *reason = limit ? limit : desired > current ? "ScaleUp" : "ScaleDown";
    }
    return desired;
}

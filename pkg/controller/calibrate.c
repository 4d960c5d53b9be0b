/* SPDX-License-Identifier: Apache-2.0 */
/* controller/calibrate: the capacity stage of one tick. The pods' own
 * metrics feed the workload's capacity estimator (pkg/capacity); with
 * capacity-per-gpu: auto the decision sizes with its estimate, with a number
 * the number is checked against it (a CapacityMismatch Warning Event when
 * the evidence says it is off by more than 25 %). Everything is in the
 * workload's demand unit (requests/s or weighted tokens/s per GPU). */
#include "controller-int.h"

#include <math.h>
#include <stdio.h>

#define SUB "controller"

static void check_configured(struct controller *c, struct ctl_wl *w, double configured,
                             bool leading)
{
    double ratio;
    const char *unit = w->cfg.policy.demand_unit == POLICY_UNIT_TOKENS ? "tok/s" : "req/s";
    int m = capacity_mismatch(&w->cap_est, configured, &ratio);
    bool changed = m != w->cap_mismatch;
    w->cap_mismatch = m;
    if (m == 0) {
        if (changed && isfinite(w->cap_est.value))
            LOGW_INFO(SUB, w->ns, w->name,
                      "capacity-per-gpu %g agrees with the pods' metrics again (%.3g %s per "
                      "GPU)", configured, w->cap_est.value, unit);
        return;
    }
    char msg[400], gap[64];
    /* the gap as the 25 % is measured: the larger over the smaller */
    if (m > 0)
        snprintf(gap, sizeof(gap), "%.0f%% above what the pods' metrics show",
                 (ratio - 1) * 100);
    else
        snprintf(gap, sizeof(gap), "below what the pods' metrics show (%.0f%% more)",
                 (1 / ratio - 1) * 100);
    snprintf(msg, sizeof(msg),
             "capacity-per-gpu %g is %s: %.3g %s per GPU (from %s, %lld samples; highest "
             "throughput seen %.3g); %s; set it to about %.3g or to auto",
             configured, gap, w->cap_est.value, unit, capacity_basis_name(w->cap_est.basis),
             (long long)w->cap_est.samples, w->cap_est.lower,
             m > 0 ? "replicas are sized too small: the SLA will be missed under load"
                   : "replicas are sized too large: GPUs are wasted",
             w->cap_est.value);
    if (changed)
        LOGW_WARN(SUB, w->ns, w->name, "CapacityMismatch: %s", msg);
    if (leading)
        ctl_event(c, w, "Warning", "CapacityMismatch", msg); /* rate-limited there */
}

bool ctl_calibrate(struct controller *c, struct ctl_wl *w, const struct ctl_obs *o, int64_t now,
                   bool leading, struct policy_config *use)
{
    const struct policy_config *p = &w->cfg.policy;
    const struct scrape_result *r = &o->m;
    *use = *p;
    struct capacity_obs ob = {
        .now_ms = now,
        .window_ms = o->rate_window_ms,
        .steady = r->valid && o->spec > 0 && o->serving == o->spec,
        .gpus = o->serving * o->gpus,
        .completions_rps = o->completions, /* in the demand unit; running and waiting
                                              stay requests: capacity only takes their
                                              ratios (queue share, slots in use) */
        .running = r->inflight,
        .busy = r->busy, /* over the rate window, as the completions */
        .waiting = r->queued,
        .slots_per_gpu = p->slots_per_gpu,
    };
    w->cap_in_service = !r->valid       ? w->cap_in_service /* unchanged while held */
                        : r->busy >= 0     ? "busy-time"
                        : r->inflight >= 0 ? "gauge"
                                           : NULL;
    capacity_observe(&w->cap, &ob);
    capacity_estimate(&w->cap, now, p->slots_per_gpu, &w->cap_est);
    w->cap_in_use = capacity_in_use(&w->cap_est, p->capacity_auto, p->capacity_rps_per_gpu,
                                    p->capacity_start, p->target_utilization, &w->cap_source);
    if (!p->capacity_auto) {
        check_configured(c, w, p->capacity_rps_per_gpu, leading);
        return true;
    }
    w->cap_mismatch = 0; /* auto: nothing configured to be off */
    if (!(w->cap_in_use > 0))
        return false;
    use->capacity_rps_per_gpu = w->cap_in_use;
    return true;
}

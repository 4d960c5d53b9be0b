/* SPDX-License-Identifier: Apache-2.0 */
/* controller/decide: one workload, one tick, as a pipeline read top to
 * bottom (each stage declared in controller-int.h with its inputs and
 * outputs):
 *
 *   configure  annotations -> the workload's config (or hold on a bad one)
 *   observe    pods and metrics -> struct ctl_obs           (observe.c)
 *   demand     ctl_obs -> the policy's input: arrivals, queue, latency
 *   forecast   recent arrivals -> the forecaster; its plan -> the input
 *   calibrate  the pods' throughput, slots and queue -> the capacity to size
 *              with (capacity-per-gpu auto), or a check of the configured one
 *                                                           (calibrate.c)
 *   act        policy_decide (size and rules, pkg/policy) -> the decision,
 *              then the /scale write and its Event              (scale.c)
 *   report     the decision -> logs, Events, status, record, checkpoint
 *                                                  (report.c, status.c)
 * A follower runs the stages up to act and writes nothing. */
#include "controller-int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"
#include "scrape/scrape.h"

#define SUB "controller"

void controller_forecast_config(const struct policy_config *p, struct forecast_config *fc)
{
    forecast_config_init(fc);
    fc->season_ms = p->seasonality_ms;
    fc->quantile = p->forecast_quantile;
    fc->rate_floor = policy_rate_floor(p);
}

/* ---- configure ------------------------------------------------------------- */

bool ctl_same_demand_unit(const struct policy_config *a, const struct policy_config *b)
{
    return a->demand_unit == b->demand_unit &&
           (a->demand_unit != POLICY_UNIT_TOKENS ||
            a->prompt_token_weight == b->prompt_token_weight);
}

void ctl_demand_unit_label(const struct policy_config *p, char *out, size_t len)
{
    if (p->demand_unit == POLICY_UNIT_TOKENS)
        snprintf(out, len, "tokens;prompt-token-weight=%g", p->prompt_token_weight);
    else
        snprintf(out, len, "requests");
}

/* Whether the forecaster must start afresh: another season or quantile.
 * Not another rate floor (the capacity sets it) within a factor of
 * CTL_FLOOR_KEPT of the one it was made with: it keeps that one, in its
 * checkpoint too, rather than lose a week of history to an edit of
 * capacity-per-gpu; a floor further off (another model, another GPU) would
 * plan bursts from near zero at max-replicas, or flatten the forecast. */
static bool forecast_config_changed(const struct policy_config *a, const struct policy_config *b)
{
    struct forecast_config x, y;
    controller_forecast_config(a, &x);
    controller_forecast_config(b, &y);
    return x.season_ms != y.season_ms || x.quantile != y.quantile;
}

bool ctl_floor_kept(double have, double want)
{
    return have > 0 && want > 0 && have <= want * CTL_FLOOR_KEPT && want <= have * CTL_FLOOR_KEPT;
}

static void configure(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                      int64_t now, bool leading)
{
    const char *keys[64], *vals[64];
    size_t n = 0;
    for (size_t i = 0; i < d->annotations.n && n < 64; i++) {
        keys[n] = d->annotations.items[i].key;
        vals[n] = d->annotations.items[i].value;
        n++;
    }
    struct ctl_workload_config cfg;
    char bad[160], err[200];
    if (ctl_workload_parse(c->cfg, keys, vals, n, &cfg, bad, sizeof(bad), err, sizeof(err))) {
        char full[400];
        snprintf(full, sizeof(full), "%.150s: %.200s", bad, err);
        bool same = !w->config_ok && strcmp(full, w->config_error) == 0;
        /* replicas are held: a scale write of the last valid configuration's
         * decision, queued or in flight, is not sent */
        w->want_target = -1;
        w->scale_waiting = false;
        if (same && (w->invalid_reported || !leading)) {
            /* already reported (a follower leaves it to the leader); its
             * status again if that write failed */
            if (leading)
                ctl_status_invalid(c, w, NULL, NULL);
            return;
        }
        w->config_ok = false;
        if (!same) {
            snprintf(w->config_error, sizeof(w->config_error), "%s", full);
            c->invalid_annotations++;
            LOGW_WARN(SUB, w->ns, w->name, "invalid annotation %s: %s; holding replicas", bad,
                      err);
            w->invalid_reported = false;
        }
        if (c->scrape)
            scrape_forget(c->scrape, w->ns, w->name);
        if (!leading)
            return;
        w->invalid_reported = true;
        char msg[420];
        snprintf(msg, sizeof(msg),
                 "invalid annotation %.150s: %.200s; replicas are held until it is fixed", bad, err);
        ctl_event(c, w, "Warning", "InvalidAnnotation", msg);
        ctl_status_invalid(c, w, bad, err);
        return;
    }
    /* the forecaster's state is meaningless under another season or
     * quantile, and with the capacity estimator's under another demand unit
     * or prompt weight: start them afresh */
    /* w->cfg is the last valid configuration (kept while one is invalid):
     * an invalid spell fixed with the forecast's settings as they were keeps
     * the forecaster and its history (a typo fixed a minute later wiped a
     * week of it, and the next checkpoint made that for good) */
    bool unit_changed = w->fc && !ctl_same_demand_unit(&cfg.policy, &w->cfg.policy);
    bool reset = w->fc && (unit_changed || forecast_config_changed(&cfg.policy, &w->cfg.policy) ||
                           !ctl_floor_kept(forecast_rate_floor(w->fc), policy_rate_floor(&cfg.policy)));
    if (unit_changed) {
        LOGW_INFO(SUB, w->ns, w->name,
                  "demand unit changed to %s: forecaster and capacity estimate start afresh",
                  policy_demand_unit_name(cfg.policy.demand_unit));
        capacity_init(&w->cap);
        w->request_size = 0;
    }
    /* the backlog samples sum one source's gauges and departed: another
     * source's, or other metrics', compared with them, would read as a jump
     * in arrivals (w->cfg is the last valid configuration, through invalid
     * ones too) */
    if (!ctl_backlog_comparable(&cfg, &w->cfg))
        ctl_backlog_reset(w);
    /* an answer to the earlier queries, kept or in flight, measured
     * something else: not one tick is decided on it */
    if (!ctl_pq_queries_same(&cfg, &w->cfg))
        ctl_pq_requery(w);
    if (w->config_ok == false && w->config_error[0])
        LOGW_INFO(SUB, w->ns, w->name, "annotations valid again");
    w->config_error[0] = '\0';
    w->config_ok = true;
    w->invalid_pending = false;
    w->cfg = cfg;
    if (reset) {
        forecast_free(w->fc);
        w->fc = NULL;
        /* Prometheus still has the history: seed the new forecaster again */
        w->pq_seeded = false;
    }
    if (!w->fc) {
        struct forecast_config fc;
        controller_forecast_config(&cfg.policy, &fc);
        w->fc = forecast_new(&fc);
        /* a seed asked for an earlier forecaster (another configuration, or a
         * Deployment of the same name deleted since) is never adopted */
        w->fc_gen = ++c->fc_gens;
        if (!w->fc)
            LOGW_WARN(SUB, w->ns, w->name, "forecaster unavailable for this seasonality");
    }
    if (w->fc && !w->checkpoint_loaded)
        ctl_checkpoint_load(c, w);
}

/* ---- demand, forecast -------------------------------------------------------- */

void ctl_demand(const struct ctl_wl *w, const struct ctl_obs *o, int64_t now,
                struct policy_input *in)
{
    const struct scrape_result *r = &o->m;
    *in = (struct policy_input){
        .now_ms = now,
        .current_replicas = o->spec,
        .zero_by_policy = o->zero_ours,
        .ready_replicas = o->serving,
        .unschedulable_replicas = o->unschedulable,
        .stalled_replicas = o->stalled,
        .gpus_per_replica = o->gpus,
        .metrics_valid = r->valid,
        .metrics_time_ms = r->valid ? r->time_ms : POLICY_NEVER,
        .request_rate = o->arrival_rps,
        .rate_window_ms = o->rate_window_ms,
        .recent_rate = r->valid ? o->recent_rps : NAN,
        .recent_window_ms = o->recent_span_ms,
        .p99_latency_ms = r->valid ? r->p99_ms : -1,
        .queue_depth = !r->valid ? -1 : r->waiting >= 0 ? r->waiting : r->queued,
        .request_size = o->request_size,
        .service_time_ms = o->service_ms,
        .forecast_likely = NAN,
        .forecast_model_rate = NAN,
    };
    (void)w;
}

void ctl_forecast_restart(struct controller *c, struct ctl_wl *w, const char *why)
{
    LOGW_WARN(SUB, w->ns, w->name, "forecaster started afresh: %s", why);
    forecast_free(w->fc);
    struct forecast_config fc;
    controller_forecast_config(&w->cfg.policy, &fc);
    w->fc = forecast_new(&fc);
    w->fc_gen = ++c->fc_gens; /* a seed asked for the old one is not adopted */
    w->pq_seeded = false;     /* Prometheus still has the history */
}

void ctl_forecast(struct controller *c, struct ctl_wl *w, const struct ctl_obs *o, int64_t now,
                  struct policy_input *in)
{
    const struct ctl_workload_config *cfg = &w->cfg;
    if (!w->fc) {
        w->plan_resolved = 0; /* no forecaster (this seasonality has none): no plan */
        return;
    }
    /* The forecaster learns the freshest arrival rate it is given: its
     * buckets keep the peak of them, which is what the plan must cover. From
     * Prometheus the window's, as the history its seed comes from. */
    if (o->m.valid) {
        double y = isfinite(o->recent_rps) && w->cfg.source != CTL_SOURCE_PROMETHEUS
                       ? o->recent_rps
                       : o->arrival_rps;
        /* a forecaster whose newest time is ahead of this clock (a wall
         * clock stepped back between ticks is shifted by ctl_clock_step; a
         * state saved ahead is refused at restore) would refuse every
         * observation until the clock caught up: moved to now */
        if (isfinite(y) && y >= 0 && forecast_observe(w->fc, now, y) == -ETIME &&
            (forecast_shift(w->fc, now - forecast_last_ms(w->fc)) != 0 ||
             forecast_observe(w->fc, now, y) != 0))
            ctl_forecast_restart(c, w, "its times lie ahead of the clock");
    }
    struct forecast_result fr;
    if (cfg->policy.predictive &&
        forecast_predict(w->fc, now, policy_horizon_ms(&cfg->policy, w->learned_cold_start_ms),
                         &fr) == 0 &&
        fr.method != FORECAST_NONE) {
        in->have_forecast = true;
        in->forecast_rate = fr.upper;
        in->forecast_likely = fr.likely;
        in->forecast_model_rate = fr.upper_model;
        in->forecast_trusted = fr.trusted;
        in->forecast_seasonal = fr.seasonal;
        w->plan_coverage = fr.coverage;
        w->plan_resolved = fr.coverage_n;
        w->plan_recent = fr.from_recent;
        w->plan_learned = fr.learned;
        w->plan_seasons = fr.from_seasons;
    } else {
        w->plan_resolved = 0; /* no plan now (predictive off, a forecaster rebuilt): NaN */
    }
}

/* ---- act ----------------------------------------------------------------------- */

/* What else scales the Deployment, "" nothing: an HPA (KEDA's named by its
 * ScaledObject), or the label scaledobject.keda.sh/name on the Deployment
 * itself. */
static const char *conflict_of(const struct ctl_wl *w, const struct kube_deployment *d,
                               char *buf, size_t len)
{
    const char *so = kube_labels_get(&d->labels, "scaledobject.keda.sh/name");
    if (w->conflict[0])
        return w->conflict;
    if (!so)
        return "";
    snprintf(buf, len, "the KEDA ScaledObject %.60s", so);
    return buf;
}

/* The Event reason of an action: the rule's name, but bounds corrections
 * read as the direction they scaled in. */
static const char *action_reason(const struct policy_decision *dec, int32_t spec)
{
    if (dec->reason == POLICY_CLAMPED)
        return dec->desired > spec ? "ScaledOut" : "ScaledIn";
    return policy_reason_name(dec->reason);
}

void ctl_act(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
             const struct policy_config *use, const struct policy_input *in, bool leading,
             struct policy_decision *dec)
{
    const struct ctl_workload_config *cfg = &w->cfg;
    policy_decide(use, &w->pst, in, dec);
    c->decisions[dec->reason]++;
    int32_t wanted = dec->desired;
    w->want_target = -1; /* unless this tick writes (below) */
    /* paused: on every instance, since any may serve the external metric,
     * which then holds the HPA at the current count; the status must not
     * claim an action that is not taken */
    if (cfg->paused) {
        snprintf(dec->explain, sizeof(dec->explain),
                 "not acting: paused by gpuscaler.io/paused (policy wanted %d replicas)", wanted);
        dec->desired = d->spec_replicas;
    }
    if (!leading || c->dry_run) {
        w->scale_waiting = false; /* a write queued by an earlier tick is not this one's */
        w->told_from = w->told_to = -1; /* a leader again tells its actions afresh */
        return;
    }
    char kbuf[100];
    const char *other = conflict_of(w, d, kbuf, sizeof(kbuf));
    bool conflict = cfg->mode == CTL_MODE_SCALE && other[0];
    bool keda = strstr(other, "KEDA") != NULL;
    /* whether an HPA scales it is known only once its namespace's HPAs were
     * listed after it was tracked (after a restart, a shard taken over, its
     * annotations valid again): until then a write could fight one, and
     * clamp its count with no metrics at all (only a count to write waits:
     * a hold's status says what it holds for) */
    bool unknown = cfg->mode == CTL_MODE_SCALE && !conflict && !w->hpa.listed &&
                   wanted != d->spec_replicas && policy_reason_is_action(dec->reason);
    if (conflict && !cfg->paused) {
        snprintf(dec->explain, sizeof(dec->explain),
                 "not acting: %s also targets this Deployment (policy wanted %d replicas)",
                 other, wanted);
        dec->desired = d->spec_replicas;
    } else if (unknown && !cfg->paused) {
        snprintf(dec->explain, sizeof(dec->explain),
                 "not acting yet: the HorizontalPodAutoscalers of namespace %.63s are not listed "
                 "yet, and one may scale this Deployment (policy wanted %d replicas)",
                 w->ns, wanted);
        dec->desired = d->spec_replicas;
    }
    /* In mode external-metric the HPA writes replicas from
     * gpuscaler_desired_replicas. */
    bool wants = wanted != d->spec_replicas && policy_reason_is_action(dec->reason);
    bool act = wants && cfg->mode != CTL_MODE_EXTERNAL_METRIC && !unknown;
    /* a scale write an earlier tick queued behind a status PATCH goes only if
     * this tick writes too (ctl_scale_write replaces its target): held,
     * paused or given to another scaler since, it must not fire later */
    if (!act || cfg->paused || conflict)
        w->scale_waiting = false;
    if (!act) /* an action told is one decided tick after tick */
        w->told_from = w->told_to = -1;
    if (wants && cfg->paused) {
        ctl_event(c, w, "Normal", "Paused", dec->explain);
    } else if (act && conflict) {
        char msg[400];
        snprintf(msg, sizeof(msg),
                 "%s also targets this Deployment; gpuscaler (mode scale) will not fight it: %s "
                 "or set gpuscaler.io/mode: external-metric",
                 other,
                 keda ? "delete the ScaledObject (KEDA makes its HorizontalPodAutoscaler again)"
                      : "remove it");
        ctl_event(c, w, "Warning", "ScalerConflict", msg);
    } else if (act) {
        /* the same action again while its count has not moved (its write in
         * flight, or failed: the policy fires it again): written again, its
         * Event told once by this leader, when the write has changed the
         * count (scale.c; one told before the write said "8 -> 4" on a
         * Deployment a refused or overtaken write left at 8) */
        if (w->spec_replicas != d->spec_replicas)
            w->told_from = w->told_to = -1;
        w->tell_reason = NULL;
        if (w->told_from != d->spec_replicas || w->told_to != dec->desired) {
            w->tell_reason = action_reason(dec, d->spec_replicas);
            w->tell_from = d->spec_replicas;
            w->tell_to = dec->desired;
            snprintf(w->tell_msg, sizeof(w->tell_msg), "%s", dec->explain);
        }
        w->want_target = dec->desired;
        ctl_scale_write(c, w, d->spec_replicas, dec->desired);
    }
}

/* ---- report ---------------------------------------------------------------- */

/* Mode external-metric: what keeps the HPA from applying gpuscaler's counts
 * (hpa.c), in an HPASettings Warning (rate-limited) and, once per change,
 * the log. */
static void tell_hpa_advice(struct controller *c, struct ctl_wl *w)
{
    char msg[1024];
    const struct policy_config *pc = &w->cfg.policy;
    int32_t lo = pc->min_replicas > 1 ? pc->min_replicas : 1;
    /* gpuscaler's own pace from min to max: one step a decision interval,
     * the first at once */
    int64_t up_step_s = 0;
    if (pc->max_scale_up_step > 0 && pc->max_replicas > lo) {
        int64_t steps = ((int64_t)(pc->max_replicas - lo) + pc->max_scale_up_step - 1) /
                        pc->max_scale_up_step;
        up_step_s = (steps - 1) * c->cfg->decision_interval_ms / 1000;
    }
    if (!ctl_hpa_advice(&w->hpa, pc->min_replicas, pc->max_replicas, up_step_s, msg,
                        sizeof(msg))) {
        xfree(w->hpa_told);
        w->hpa_told = NULL;
        return;
    }
    ctl_event(c, w, "Warning", "HPASettings", msg);
    if (!w->hpa_told || strcmp(w->hpa_told, msg) != 0) {
        LOGW_WARN(SUB, w->ns, w->name, "%s", msg);
        xfree(w->hpa_told);
        w->hpa_told = xstrdup(msg);
    }
}

void ctl_report_parked(struct controller *c, struct ctl_wl *w, const struct policy_decision *dec)
{
    /* said once a spell, where kubectl describe shows it; a tick without room
     * in the report budget tries again at the next */
    if (dec->reason != POLICY_HOLD_PARKED)
        w->parked_told = false;
    else if (!w->parked_told)
        w->parked_told = ctl_event_now(c, w, "Normal", "Parked", dec->explain);
}

void ctl_report(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                const struct ctl_obs *o, const struct policy_decision *dec, int64_t now,
                bool leading)
{
    const struct scrape_result *r = &o->m;
    bool changed = !w->have_last || w->last.reason != dec->reason ||
                   w->last.desired != dec->desired;
    w->last = *dec;
    /* why the metrics are missing, in the status message too */
    if (!r->valid && r->why[0]) {
        size_t n = strlen(w->last.explain);
        snprintf(w->last.explain + n, sizeof(w->last.explain) - n, ": %s", r->why);
    }
    w->have_last = true;
    w->last_decision_ms = now;
    w->spec_replicas = d->spec_replicas;
    if (changed || policy_reason_is_action(dec->reason))
        LOGW_INFO(SUB, w->ns, w->name, "%s: %s%s", policy_reason_name(dec->reason),
                  w->last.explain, leading ? "" : " (follower: not acting)");
    /* a recorded trace counts requests (what simulate replays), in any demand unit */
    if (r->valid && c->record_dir)
        ctl_record(c, w, now, o->arrival_rps / (o->request_size > 0 ? o->request_size : 1));
    /* no GPU count to divide by: sized as 1 GPU a replica, which a MIG slice,
     * Gaudi, TPU or Neuron replica of several is not; said where users look,
     * not only in policy.h */
    static const char no_gpus[] =
        "the pod template has no nvidia.com/gpu or amd.com/gpu limit: sizing as 1 GPU per "
        "replica; set gpuscaler.io/gpus-per-replica to the accelerators a replica has (MIG "
        "slices, Gaudi, TPU, Neuron)";
    bool gpus_unknown = w->cfg.policy.gpus_per_replica <= 0 && d->gpus_per_replica <= 0;
    if (gpus_unknown && !w->gpus_told)
        LOGW_WARN(SUB, w->ns, w->name, "%s", no_gpus);
    w->gpus_told = gpus_unknown;
    if (!leading)
        return;
    if (gpus_unknown)
        ctl_event(c, w, "Warning", "NoGPULimit", no_gpus);
    /* right after tracking starts there is no rate yet (two samples needed):
     * that is not worth an Event */
    int64_t grace = c->cfg->scrape.rate_window_ms + 3 * c->cfg->scrape.interval_ms;
    if (!r->valid && now - w->tracked_since_ms > grace) {
        char msg[300];
        /* the replica bounds still apply (max-replicas lowered below the
         * count): that is no hold */
        if (policy_reason_is_action(dec->reason) && dec->desired != d->spec_replicas) {
            /* a change, which the last "holding" Event did not say: not
             * kept back by its interval, once per change (a write that
             * fails asks again each tick) */
            snprintf(msg, sizeof(msg), "%s; not sizing, only the replica bounds: %d -> %d",
                     r->why, d->spec_replicas, dec->desired);
            uint64_t change = (uint64_t)(uint32_t)d->spec_replicas << 32 | (uint32_t)dec->desired;
            if (change != w->bounds_told) {
                if (ctl_event_now(c, w, "Warning", "MetricsUnavailable", msg))
                    w->bounds_told = change; /* else: asked again next tick */
            } else {
                ctl_event(c, w, "Warning", "MetricsUnavailable", msg);
            }
        } else {
            w->bounds_told = 0; /* the same change later is news again */
            snprintf(msg, sizeof(msg), "holding %d replicas: %s", dec->desired, r->why);
            ctl_event(c, w, "Warning", "MetricsUnavailable", msg);
        }
    }
    /* mode external-metric leaves the replicas to an HPA reading
     * gpuscaler_desired_replicas from this daemon's external metrics API:
     * without that API nothing scales the Deployment, and the HPA shows only
     * <unknown> (a Prometheus rule or a KEDA trigger on /metrics still can) */
    if (w->cfg.mode == CTL_MODE_EXTERNAL_METRIC && !c->cfg->extmetrics.enabled)
        ctl_event(c, w, "Warning", "ExternalMetricsNotServed",
                  "gpuscaler.io/mode is external-metric, but this gpuscaler does not serve "
                  "external.metrics.k8s.io (chart: externalMetrics.enabled; config: "
                  "external-metrics.enabled), so no HorizontalPodAutoscaler can read "
                  "gpuscaler_desired_replicas from it: enable it, or set gpuscaler.io/mode: "
                  "scale");
    else if (w->cfg.mode == CTL_MODE_EXTERNAL_METRIC)
        tell_hpa_advice(c, w);
    /* pinned at max while the load needs more: say so where users look */
    if (dec->reason == POLICY_HOLD_AT_MAX) {
        char msg[400];
        snprintf(msg, sizeof(msg),
                 "%.256s; raise gpuscaler.io/max-replicas or the SLA will be missed",
                 dec->explain);
        ctl_event(c, w, "Warning", "AtMaxReplicas", msg);
    }
    /* held because replicas wait for a GPU no node has while the load needs
     * more than is placed: the shortfall, for the operator (or whoever owns
     * the cluster autoscaler) */
    if (dec->reason == POLICY_HOLD_GPU_CAPACITY) {
        char msg[400];
        snprintf(msg, sizeof(msg),
                 "%d replica%s cannot be scheduled: no node has a free %s; holding at %d (%d "
                 "placed); the load needs %d",
                 dec->unschedulable, dec->unschedulable == 1 ? "" : "s",
                 kube_gpu_resource_name(w->unsched_gpu), dec->desired,
                 dec->desired - dec->unschedulable, dec->want);
        ctl_event(c, w, "Warning", "GPUCapacityExhausted", msg);
    }
    ctl_report_parked(c, w, dec);
    /* a pod scraped twice: any plain sum of its series reads high */
    char dup_msg[900];
    ctl_pq_dup_msg(w, dup_msg, sizeof(dup_msg));
    if (dup_msg[0])
        ctl_event(c, w, "Warning", "DuplicateScrape", dup_msg);
    /* replicas placed that are not coming: why, on the Deployment, since the
     * count will not replace them (a rollout whose pods all crash would only
     * add GPUs that crash too) */
    if (o->stalled > 0) {
        char msg[600];
        if (o->stalled_failing)
            snprintf(msg, sizeof(msg),
                     "%d replica%s failing to start (pod %s: %s): not counted as capacity on "
                     "the way, and not replaced; fix the pod or roll back",
                     o->stalled, o->stalled == 1 ? " is" : "s are", o->stalled_pod,
                     kube_pod_failing_name(o->stalled_failing));
        else
            snprintf(msg, sizeof(msg),
                     "%d replica%s not ready for %d cold starts (pod %s): not counted as "
                     "capacity on the way, and not replaced; see kubectl describe pod",
                     o->stalled, o->stalled == 1 ? " is" : "s are", POLICY_STALL_COLD_STARTS,
                     o->stalled_pod);
        ctl_event(c, w, "Warning", "ReplicasStalled", msg);
    }
    if (c->dry_run) {
        if (policy_reason_is_action(dec->reason) && dec->desired != d->spec_replicas)
            LOGW_INFO(SUB, w->ns, w->name, "dry-run: would scale %d -> %d", d->spec_replicas,
                      dec->desired);
        return;
    }
    /* The status goes out after the /scale write, never during it: the
     * annotation bumps the resourceVersion the scale patch is
     * preconditioned on (ctl_status_update defers while it is in flight). */
    ctl_status_update(c, w, now);
}

/* ---- the pipeline ------------------------------------------------------------ */

void ctl_decide(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                int64_t now, bool leading)
{
    configure(c, w, d, now, leading);
    if (!w->config_ok)
        return;
    struct ctl_obs o;
    struct policy_input in;
    struct policy_decision dec;
    struct policy_config use;
    ctl_observe(c, w, d, now, &o);
    ctl_demand(w, &o, now, &in);
    ctl_forecast(c, w, &o, now, &in);
    if (!ctl_calibrate(c, w, &o, now, leading, &use))
        use.capacity_rps_per_gpu = 0; /* nothing to size with: the policy holds */
    /* the cold start the demand looks ahead (the ramp, the queue while new
     * replicas start): the learned one when longer (GPU nodes that take
     * minutes to come), as the forecast's horizon has it */
    if (w->learned_cold_start_ms > use.cold_start_ms)
        use.cold_start_ms = w->learned_cold_start_ms;
    /* a Prometheus answer serves the tick after the one that asked: it is a
     * decision interval older by design, not stale */
    if (w->cfg.source == CTL_SOURCE_PROMETHEUS)
        use.metrics_stale_after_ms += c->cfg->decision_interval_ms;
    ctl_act(c, w, d, &use, &in, leading, &dec);
    ctl_report(c, w, d, &o, &dec, now, leading);
}

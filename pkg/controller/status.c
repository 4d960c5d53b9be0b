/* SPDX-License-Identifier: Apache-2.0 */
/* controller/status: the gpuscaler.io/status annotation, each Deployment's
 * last decision as JSON. It is written when anything in it but its time
 * changes, and at least every status.refresh-interval (4 minutes), so that
 * the other replicas, which serve it up to 5/4 of that old
 * (ctl_status_max_age_ms), always have a fresh one.
 *
 * The writes share the report budget (CTL_REPORT_MAX_INFLIGHT) with Events
 * and checkpoints. A write the budget cannot take at once waits in a queue,
 * and goes out as earlier reports end: the budget bounds the writes in
 * flight, not the writes of a tick, so every Deployment's status keeps up
 * however many a replica decides. Two queues, in order:
 * - decisions: no status yet, a new desired count, or the metrics became
 *   unavailable or available again: what the HPA reads (sharded, any replica
 *   serves another's decisions from this annotation). These may use the
 *   whole budget, and go first;
 * - refreshes: anything else changed (the numbers, the reason's wording of
 *   the same count), or the periodic refresh. These use at most half the
 *   budget and status.writes-per-second writes a second (20), so 1,000
 *   Deployments whose numbers change every tick are a steady stream for the
 *   API server, not a burst each tick.
 * A status still unwritten at 9/8 of the refresh interval would soon be
 * served as stale (the HPA would hold): that write is a decision, whatever
 * waits before it among the refreshes and whatever their rate, so at any
 * scale an unchanged status is rewritten before its serving limit.
 * A queued Deployment is written once, at its turn, with its decision then. */
#include "controller-int.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "kube/kube.h"

#define SUB "controller"

enum { Q_NONE, Q_DECISION, Q_REFRESH };

/* ---- the queues -------------------------------------------------------------- */

static void q_unlink(struct controller *c, struct ctl_wl *w)
{
    struct ctl_status_queue *q = &c->status_q[w->status_q - 1];
    if (w->sq_prev)
        w->sq_prev->sq_next = w->sq_next;
    else
        q->head = w->sq_next;
    if (w->sq_next)
        w->sq_next->sq_prev = w->sq_prev;
    else
        q->tail = w->sq_prev;
    w->sq_prev = w->sq_next = NULL;
    w->status_q = Q_NONE;
    q->len--;
}

static void q_push(struct controller *c, struct ctl_wl *w, int which)
{
    struct ctl_status_queue *q = &c->status_q[which - 1];
    w->status_q = (uint8_t)which;
    w->sq_next = NULL;
    w->sq_prev = q->tail;
    if (q->tail)
        q->tail->sq_next = w;
    else
        q->head = w;
    q->tail = w;
    q->len++;
}

void ctl_status_forget(struct controller *c, struct ctl_wl *w)
{
    if (w->status_q != Q_NONE)
        q_unlink(c, w);
}

/* ---- the budget -------------------------------------------------------------- */

int64_t ctl_status_max_age_ms(const struct ctl_config *cfg)
{
    return cfg->status.refresh_interval_ms * 5 / 4;
}

json_t *ctl_status_read(const struct kube_deployment *d, int64_t *at_ms)
{
    const char *txt = kube_labels_get(&d->annotations, CTL_ANNOTATION_PREFIX "status");
    json_t *st = txt ? json_loads(txt, 0, NULL) : NULL;
    const char *t = json_string_value(json_object_get(st, "time"));
    if (!t || kube_parse_time(t, at_ms) != 0)
        *at_ms = 0;
    return st;
}

/* refreshes a second, and the bucket's size (a second's worth) */
static double refresh_rate(const struct controller *c)
{
    return (double)c->cfg->status.writes_per_second;
}

static void refill(struct controller *c)
{
    uint64_t now = uv_hrtime();
    double add = (double)(now - c->status_tokens_ns) / 1e9 * refresh_rate(c);
    c->status_tokens_ns = now;
    c->status_tokens = UTIL_MIN(refresh_rate(c), c->status_tokens + add);
}

/* May a write of this kind go out now? A refresh also needs a token. */
static bool can_write(struct controller *c, int which)
{
    if (which == Q_DECISION)
        return c->report_inflight < CTL_REPORT_MAX_INFLIGHT;
    if (c->report_inflight >= CTL_REPORT_MAX_INFLIGHT / 2)
        return false;
    refill(c);
    return c->status_tokens >= 1.0;
}

static void on_token_timer(uv_timer_t *t)
{
    struct controller *c = util_container_of(t, struct controller, status_timer);
    ctl_status_pump(c);
}

/* Refreshes wait for a token: wake when the next is due. (When they wait for
 * the budget instead, the end of a report wakes the queue.) */
static void arm_token_timer(struct controller *c)
{
    if (c->closing || !c->status_q[Q_REFRESH - 1].head || uv_is_active((uv_handle_t *)&c->status_timer))
        return;
    refill(c);
    if (c->status_tokens >= 1.0)
        return;
    double wait_ms = (1.0 - c->status_tokens) / refresh_rate(c) * 1000.0;
    uv_timer_start(&c->status_timer, on_token_timer, (uint64_t)wait_ms + 1, 0);
}

void ctl_status_init(struct controller *c)
{
    uv_timer_init(c->loop, &c->status_timer);
    c->status_tokens = refresh_rate(c);
    c->status_tokens_ns = uv_hrtime();
}

/* ---- the write --------------------------------------------------------------- */

struct status_req {
    struct controller *c;
    char *ns, *name, *uid;
    bool invalid; /* the InvalidAnnotation status */
};

/* pump: wake the queues, the budget having room again (not when the write
 * failed before it was sent: a pump in the pump, queue after queue) */
static void req_free(struct status_req *r, bool pump)
{
    struct controller *c = r->c;
    c->report_inflight--;
    xfree(r->ns);
    xfree(r->name);
    xfree(r->uid);
    xfree(r);
    if (pump)
        ctl_status_pump(c);
    ctl_io_end(c); /* last: it may finish closing the controller */
}

/* A status PATCH ended: the Deployment write that waited for it goes next
 * (a scale write first, then a newer status). */
static void status_done(const struct kube_result *res, void *arg)
{
    struct status_req *r = arg;
    struct controller *c = r->c;
    struct ctl_wl *w = ctl_wl_find(c, r->ns, r->name);
    if (w && strcmp(w->uid, r->uid) != 0)
        w = NULL; /* the write was a Deployment's of that name deleted since */
    /* its uid refused: not the Deployment it was for */
    bool other = res->err != 0 && res->status == 422 && strstr(res->message, "metadata.uid");
    if (res->err != 0 && !other)
        LOGW_WARN(SUB, r->ns, r->name, "writing the status annotation failed: HTTP %ld %s %s",
                  res->status, res->reason, res->message);
    else if (other)
        LOGW_INFO(SUB, r->ns, r->name, "status annotation not written: the Deployment was "
                  "deleted and made again since (%s)", res->message);
    if (w && res->err != 0) {
        /* not written: the next tick writes it again as a decision, rather
         * than take it for written and wait out the refresh interval while
         * other replicas serve the old count as fresh (an InvalidAnnotation
         * status, at the next tick the annotations are still invalid) */
        xfree(w->status_written);
        w->status_written = NULL;
        if (r->invalid && !w->config_ok)
            w->invalid_pending = true;
    }
    if (w) {
        w->status_inflight = false;
        if (w->scale_waiting)
            ctl_scale_resume(c, w);
        /* a failed InvalidAnnotation status again at the next tick, not at
         * once: an API server refusing it would be sent one after another */
        if (!(r->invalid && res->err != 0))
            ctl_status_resume(c, w);
    }
    ctl_release_hold_check(c); /* before req_free's ctl_io_end may free c */
    req_free(r, true);
}

static void patch_status(struct controller *c, struct ctl_wl *w, const char *json, bool invalid)
{
    json_t *ann = json_pack("{s:s}", CTL_ANNOTATION_PREFIX "status", json);
    struct status_req *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->ns = xstrdup(w->ns);
    r->name = xstrdup(w->name);
    r->uid = xstrdup(w->uid);
    r->invalid = invalid;
    c->report_inflight++;
    ctl_io_begin(c);
    /* within the term that allows it: a resend after a 429 must not land over
     * a new owner's status; none once the term is over */
    int64_t left = ctl_handing_over(c, w->ns, w->name) ? -1 : ctl_acting_left_ms(c, w->ns, w->name);
    int rc = left < 0 ? -ETIME
                      : kube_deployment_patch_annotations(c->kube, w->ns, w->name, w->uid, ann,
                                                          left, status_done, r);
    json_decref(ann);
    if (rc != 0) {
        if (rc == -ETIME)
            LOGW_INFO(SUB, w->ns, w->name, "status annotation not written: this replica no "
                      "longer decides for it");
        else
            LOGW_WARN(SUB, w->ns, w->name, "writing the status annotation: %s", strerror(-rc));
        xfree(w->status_written); /* not written: again at the next tick */
        w->status_written = NULL;
        if (invalid)
            w->invalid_pending = true;
        req_free(r, false);
        return;
    }
    w->status_inflight = true;
}

/* Write w's status now, queue it, or nothing (unchanged and fresh, or a
 * Deployment write in flight, after which it comes back here). popped: it
 * was just taken from the head of its queue, so it does not queue behind
 * the others again. */
static void status_try(struct controller *c, struct ctl_wl *w, int64_t now_ms, bool popped)
{
    /* what another replica serves to the HPA from this annotation: the
     * desired count, valid unless its reason is not served */
    if (!w->config_ok)
        return; /* its InvalidAnnotation status, not the last valid decision's */
    if (ctl_handing_over(c, w->ns, w->name))
        return; /* not this replica's to write any more: no budget spent on it */
    bool unavailable = !ctl_reason_served(w->last.reason);
    int64_t refresh_ms = c->cfg->status.refresh_interval_ms;
    /* ... and what keeps it served: one about to be served as stale */
    bool expiring = w->status_written && now_ms - w->status_written_ms >= refresh_ms * 9 / 8;
    int which = !w->status_written || w->last.desired != w->status_desired ||
                        unavailable != w->status_unavailable || expiring
                    ? Q_DECISION
                    : Q_REFRESH;
    if (w->status_q == Q_REFRESH && which == Q_DECISION)
        q_unlink(c, w); /* a new decision does not wait behind refreshes */
    if (w->status_q != Q_NONE)
        return; /* written at its turn, with the decision then */
    /* compare without the time so an unchanged decision is not rewritten */
    struct ctl_status_capacity cap = {.in_use = w->cap_in_use,
                                      .source = capacity_source_name(w->cap_source),
                                      .est = &w->cap_est, .mismatch = w->cap_mismatch,
                                      .in_service = w->cap_in_service,
                                      .demand_unit =
                                          policy_demand_unit_name(w->cfg.policy.demand_unit),
                                      .tokens_per_request =
                                          w->request_size > 0 ? w->request_size : NAN,
                                      /* not beside a rate of the user's own, which counts
                                         what it counts: no refused query is asked */
                                      .refused_named = w->cfg.scrape.rejected_metric[0] != '\0' &&
                                                       !(w->cfg.source == CTL_SOURCE_PROMETHEUS &&
                                                         w->cfg.promql_rate[0]),
                                      .refused_rps = w->refused_rps};
    struct ctl_status_start start = {.schedule_ms = w->learned_schedule_ms,
                                     .load_ms = w->learned_load_ms};
    char *full = ctl_status_json(now_ms, &w->last, &cap, &start);
    const char *body = strstr(full, "\"desired\"");
    bool same = w->status_written && body && strcmp(body, w->status_written) == 0;
    if (same && now_ms - w->status_written_ms < refresh_ms)
        goto out;
    if (w->scaling || w->status_inflight) {
        w->status_deferred = true; /* written when that write ends */
        goto out;
    }
    if ((!popped && c->status_q[which - 1].head) || !can_write(c, which)) {
        q_push(c, w, which);
        arm_token_timer(c);
        goto out;
    }
    if (which == Q_REFRESH)
        c->status_tokens -= 1.0;
    c->status_writes[which - 1]++;
    w->status_deferred = false;
    xfree(w->status_written);
    w->status_written = xstrdup(body ? body : full);
    w->status_written_ms = now_ms;
    w->status_desired = w->last.desired;
    w->status_unavailable = unavailable;
    patch_status(c, w, full, false);
out:
    xfree(full);
}

void ctl_status_update(struct controller *c, struct ctl_wl *w, int64_t now_ms)
{
    status_try(c, w, now_ms, false);
}

void ctl_status_pump(struct controller *c)
{
    if (c->closing)
        return;
    for (int which = Q_DECISION; which <= Q_REFRESH; which++) {
        struct ctl_status_queue *q = &c->status_q[which - 1];
        while (q->head && can_write(c, which)) {
            struct ctl_wl *w = q->head;
            q_unlink(c, w);
            if (ctl_acting_for(c, w->ns, w->name))
                status_try(c, w, util_now_unix_ms(), true);
        }
        if (q->head)
            break; /* refreshes do not overtake decisions */
    }
    arm_token_timer(c);
}

/* The InvalidAnnotation status of w->invalid_key and _msg, now. */
static void write_invalid(struct controller *c, struct ctl_wl *w)
{
    struct util_buf b = {0};
    char ts[40];
    util_format_rfc3339(util_now_unix_ms(), ts, sizeof(ts));
    util_buf_puts(&b, "{\"time\":");
    util_buf_json_str(&b, ts);
    util_buf_puts(&b, ",\"reason\":\"InvalidAnnotation\",\"key\":");
    util_buf_json_str(&b, w->invalid_key);
    util_buf_puts(&b, ",\"message\":");
    util_buf_json_str(&b, w->invalid_msg);
    util_buf_puts(&b, "}");
    w->invalid_pending = false;
    xfree(w->status_written);
    w->status_written = NULL;
    patch_status(c, w, b.data, true);
    util_buf_free(&b);
}

void ctl_status_invalid(struct controller *c, struct ctl_wl *w, const char *key, const char *msg)
{
    if (!ctl_acting_for(c, w->ns, w->name) || c->dry_run)
        return;
    if (key) {
        snprintf(w->invalid_key, sizeof(w->invalid_key), "%s", key);
        snprintf(w->invalid_msg, sizeof(w->invalid_msg), "%s", msg);
        w->invalid_pending = true;
    }
    if (!w->invalid_pending)
        return;
    /* a queued or deferred decision of the last valid configuration must not
     * overwrite this */
    ctl_status_forget(c, w);
    w->status_deferred = false;
    if (w->scaling || w->status_inflight)
        return; /* when that write ends (ctl_status_resume) */
    write_invalid(c, w);
}

void ctl_status_resume(struct controller *c, struct ctl_wl *w)
{
    if (c->closing || w->scaling || w->status_inflight || !ctl_acting_for(c, w->ns, w->name))
        return;
    if (w->invalid_pending && !w->config_ok) {
        if (!c->dry_run)
            write_invalid(c, w);
        return;
    }
    if (w->status_deferred) {
        w->status_deferred = false;
        ctl_status_update(c, w, util_now_unix_ms());
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* controller/scale: the act stage's one write: a Deployment's replica count
 * through its /scale subresource. Read the subresource, patch spec.replicas
 * with the read resourceVersion as precondition, and on a 409 read again and
 * retry (a few times). A leader that lost the lease (sharded: the
 * Deployment's shard Lease) between the read and the patch does not write.
 * The status annotation of the same Deployment never overlaps this write
 * (both change one object and one resourceVersion): a scale write waits for
 * a status PATCH in flight, and the status waits for the scale write.
 * The write is of a decision made on a count and an object: when the read
 * (the first, or one after a 409) finds another count (someone scaled by
 * hand, parked it at 0) or another uid (deleted and made again), it does not
 * write, and the next tick decides on what is there now. A newer tick's
 * decision made while it was in flight (a slow or retried request spans
 * ticks) replaces its count before the patch: held (stale metrics, invalid
 * annotations), nothing is patched; another count, that one is. One that
 * asks for the same count from the count a given-up write found (a hand
 * scale met after a 409) is written after it: the same target is a real
 * change again.
 * Requests carry copies of the workload's key and uid, never pointers to it;
 * a workload found by name answers only when its uid is the request's. */
#include "controller-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"

#define SUB "controller"
#define MAX_SCALE_ATTEMPTS 4

struct scale_req {
    struct controller *c;
    char *ns, *name, *uid;
    int32_t from, target;
};

/* The workload the request is for: by name, and the same uid. */
static struct ctl_wl *wl_of(const struct scale_req *r)
{
    struct ctl_wl *w = ctl_wl_find(r->c, r->ns, r->name);
    return w && strcmp(w->uid, r->uid) == 0 ? w : NULL;
}

static void scale_get(struct controller *c, struct scale_req *r);

static void scale_req_done(struct scale_req *r, bool ok)
{
    struct controller *c = r->c;
    struct ctl_wl *w = wl_of(r);
    if (w) {
        w->scaling = false;
        if (!ok)
            w->scale_attempts = 0;
        /* a tick asked again for this write's count: it is written, or (the
         * same decision, on the same count) the next tick decides again; not
         * read once more. One decided on another count (the hand change this
         * write met after a 409 and gave up on) is a change of its own. */
        if (w->scale_waiting && w->scale_target == r->target &&
            (ok || w->scale_from == r->from))
            w->scale_waiting = false;
        if (w->scale_waiting) /* a newer decision's count */
            ctl_scale_resume(c, w);
        /* the status of this tick's decision waited for the scale write */
        if (!w->scaling)
            ctl_status_resume(c, w);
    }
    xfree(r->ns);
    xfree(r->name);
    xfree(r->uid);
    xfree(r);
    ctl_release_hold_check(c);
    ctl_io_end(c);
}

/* The write of r->target changed the count: the action's Event, once (the
 * decision's, when it is for this count and from the count written over). */
static void tell_scaled(struct controller *c, struct ctl_wl *w, const struct scale_req *r)
{
    if (!w || !w->tell_reason || w->tell_to != r->target || w->tell_from != r->from)
        return;
    ctl_event(c, w, "Normal", w->tell_reason, w->tell_msg);
    w->told_from = w->tell_from;
    w->told_to = w->tell_to;
    w->tell_reason = NULL;
}

/* A write given up on for an error: a Warning on the Deployment (rate-limited
 * per reason), since the count it says nothing about stays. */
static void tell_failed(struct controller *c, struct ctl_wl *w, const struct scale_req *r,
                        const char *what, const struct kube_result *res)
{
    if (!w)
        return;
    char msg[512];
    snprintf(msg, sizeof(msg), "scaling %d -> %d failed: %s: HTTP %ld %s: %.300s", r->from,
             r->target, what, res->status, res->reason ? res->reason : "",
             res->message ? res->message : "");
    ctl_event(c, w, "Warning", "FailedScale", msg);
}

static void scale_patched(const struct kube_result *res, void *arg)
{
    struct scale_req *r = arg;
    struct controller *c = r->c;
    struct ctl_wl *w = wl_of(r);
    if (res->err == 0) {
        c->scale_patches++;
        LOGW_INFO(SUB, r->ns, r->name, "scaled to %d replicas", r->target);
        tell_scaled(c, w, r);
        scale_req_done(r, true);
        return;
    }
    if (res->err == -EEXIST && w && !c->closing && w->scale_attempts < MAX_SCALE_ATTEMPTS) {
        c->scale_conflicts++;
        LOGW_INFO(SUB, r->ns, r->name, "scale conflict (%s): re-reading and retrying",
                  res->message);
        scale_get(c, r);
        return;
    }
    c->scale_errors++;
    LOGW_ERROR(SUB, r->ns, r->name, "scaling to %d failed: HTTP %ld %s %s", r->target,
               res->status, res->reason, res->message);
    if (!c->closing)
        tell_failed(c, w, r, res->err == -EEXIST ? "conflicts on every try" : "the API server "
                    "refused the write", res);
    scale_req_done(r, false);
}

static void scale_read(const struct kube_result *res, void *arg)
{
    struct scale_req *r = arg;
    struct controller *c = r->c;
    struct ctl_wl *w = wl_of(r);
    if (res->err != 0 || !w || c->closing) {
        if (res->err != 0) {
            c->scale_errors++;
            LOGW_ERROR(SUB, r->ns, r->name, "reading the scale subresource failed: HTTP %ld %s",
                       res->status, res->message);
            if (!c->closing)
                tell_failed(c, w, r, "reading the scale subresource", res);
        }
        scale_req_done(r, false);
        return;
    }
    /* a leader that lost the lease (or the shard's) meanwhile must not write */
    if (!ctl_acting_for(c, r->ns, r->name)) {
        LOGW_WARN(SUB, r->ns, r->name, "lost leadership before scaling; not writing");
        scale_req_done(r, false);
        return;
    }
    json_t *meta = json_object_get(res->body, "metadata");
    json_t *rv = json_object_get(meta, "resourceVersion");
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    json_int_t cur = json_integer_value(json_object_get(json_object_get(res->body, "spec"),
                                                        "replicas"));
    /* the decision's count came from the cache, which clamps (2000000 read
     * as 1000000 there and as a hand change here: never written down) */
    json_int_t seen = cur > KUBE_MAX_COUNT ? KUBE_MAX_COUNT : cur;
    if (uid && r->uid[0] && strcmp(uid, r->uid) != 0) {
        LOGW_INFO(SUB, r->ns, r->name, "the Deployment was deleted and made again since the "
                  "decision to scale to %d; not writing", r->target);
        scale_req_done(r, false);
        return;
    }
    if (seen != r->from && cur != r->target) {
        LOGW_INFO(SUB, r->ns, r->name, "replicas changed to %lld since the decision to scale "
                  "%d -> %d (by hand, another writer, or a view one write behind); not "
                  "writing: the next tick decides on %lld", (long long)cur, r->from, r->target,
                  (long long)cur);
        scale_req_done(r, false);
        return;
    }
    /* a tick decided again while this was in flight: its count, or none */
    if (w->want_target < 0) {
        LOGW_INFO(SUB, r->ns, r->name, "a newer decision holds %lld replicas; not scaling "
                  "%d -> %d", (long long)cur, r->from, r->target);
        scale_req_done(r, false);
        return;
    }
    r->target = w->want_target;
    if (!json_is_string(rv)) {
        c->scale_errors++;
        LOGW_ERROR(SUB, r->ns, r->name, "scale subresource without a resourceVersion");
        scale_req_done(r, false);
        return;
    }
    if (cur == r->target) {
        scale_req_done(r, true);
        return;
    }
    w->scale_attempts++;
    /* the uid is a precondition too (the API server's scaleUpdatedObjectInfo):
     * a Deployment made again meanwhile answers 409, not the new replicas */
    json_t *patch = json_pack("{s:{s:O},s:{s:I}}", "metadata", "resourceVersion", rv, "spec",
                              "replicas", (json_int_t)r->target);
    if (patch && r->uid[0])
        json_object_set_new(json_object_get(patch, "metadata"), "uid", json_string(r->uid));
    char path[600];
    snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/deployments/%s/scale", r->ns,
             r->name);
    /* within the term that allows it (a resend after a 429 included) */
    int64_t left = ctl_handing_over(c, r->ns, r->name) ? -1 : ctl_acting_left_ms(c, r->ns, r->name);
    int rc = !patch     ? -EINVAL
             : left < 0 ? -ETIME
                        : kube_request_within(c->kube, left, "PATCH", path,
                                              "application/merge-patch+json", patch,
                                              scale_patched, r);
    json_decref(patch);
    if (rc == -ETIME) {
        LOGW_INFO(SUB, r->ns, r->name, "not scaling: this replica no longer decides for it");
        scale_req_done(r, false);
    } else if (rc != 0) {
        c->scale_errors++;
        LOGW_ERROR(SUB, r->ns, r->name, "cannot send the scale patch: %s", strerror(-rc));
        scale_req_done(r, false);
    }
}

static void scale_get(struct controller *c, struct scale_req *r)
{
    int rc = kube_scale_get(c->kube, r->ns, r->name, scale_read, r);
    if (rc != 0) {
        LOGW_ERROR(SUB, r->ns, r->name, "cannot read the scale subresource: %s", strerror(-rc));
        scale_req_done(r, false);
    }
}

void ctl_scale_write(struct controller *c, struct ctl_wl *w, int32_t from, int32_t target)
{
    /* after the write in flight: the status PATCH (the read resourceVersion
     * would go stale), or an older /scale write (this count replaces its
     * own before its patch, scale_read) */
    if (w->scaling || w->status_inflight) {
        w->scale_waiting = true;
        w->scale_from = from;
        w->scale_target = target;
        return;
    }
    w->scale_waiting = false;
    struct scale_req *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->ns = xstrdup(w->ns);
    r->name = xstrdup(w->name);
    r->uid = xstrdup(w->uid);
    r->from = from;
    r->target = target;
    w->scaling = true;
    w->scale_attempts = 0;
    ctl_io_begin(c);
    scale_get(c, r);
}

void ctl_scale_resume(struct controller *c, struct ctl_wl *w)
{
    if (!w->scale_waiting)
        return;
    w->scale_waiting = false;
    if (c->closing || !ctl_acting_for(c, w->ns, w->name) || w->status_inflight ||
        w->want_target != w->scale_target)
        return; /* the next tick decides again */
    ctl_scale_write(c, w, w->scale_from, w->scale_target);
}


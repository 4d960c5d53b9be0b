/* SPDX-License-Identifier: Apache-2.0 */
/* controller/leader: the pure leader-election state machine (see leader.h),
 * following client-go's tools/leaderelection tryAcquireOrRenew. */
#include "controller-int.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

void ctl_leader_init(struct ctl_leader *l, const char *identity, int64_t lease_duration_ms,
                     int64_t renew_deadline_ms, int64_t retry_period_ms)
{
    memset(l, 0, sizeof(*l));
    snprintf(l->identity, sizeof(l->identity), "%s", identity);
    l->lease_duration_ms = lease_duration_ms;
    l->renew_deadline_ms = renew_deadline_ms;
    l->retry_period_ms = retry_period_ms;
}

static void end_term(struct ctl_leader *l, const char *why)
{
    if (!l->leading)
        return;
    l->leading = false;
    l->fenced = false;
    snprintf(l->lost_why, sizeof(l->lost_why), "%s", why);
}

/* A term ends by itself once renew_deadline passes without a renewal. */
static void expire(struct ctl_leader *l, int64_t now_ms)
{
    if (!l->leading || now_ms - l->last_renew_ok_ms < l->renew_deadline_ms)
        return;
    char why[160];
    snprintf(why, sizeof(why),
             "renew deadline passed: no successful lease renewal for %lld ms (renew-deadline "
             "%lld ms)",
             (long long)(now_ms - l->last_renew_ok_ms), (long long)l->renew_deadline_ms);
    end_term(l, why);
}

static bool same_record(const struct ctl_lease *a, const struct ctl_lease *b)
{
    return a->exists == b->exists && strcmp(a->holder, b->holder) == 0 &&
           a->renew_unix_ms == b->renew_unix_ms && a->transitions == b->transitions &&
           strcmp(a->resource_version, b->resource_version) == 0;
}

const char *ctl_leader_observe(struct ctl_leader *l, const struct ctl_lease *cur, int64_t now_ms)
{
    /* deleted (by hand): another holder last seen may act until its lease
     * would have expired, so it still counts as held until then (a shard's
     * round plans on this, as the single leader's step waits on it) */
    const struct ctl_lease *o = &l->observed;
    int64_t odur = o->duration_s > 0 ? (int64_t)o->duration_s * 1000 : l->lease_duration_ms;
    if (!cur->exists && o->exists && o->holder[0] && strcmp(o->holder, l->identity) != 0 &&
        l->observed_ms + odur > now_ms)
        return o->holder;
    if (!cur->exists || !same_record(&l->observed, cur)) {
        l->observed = *cur;
        l->observed_ms = now_ms;
    }
    if (!cur->exists || !cur->holder[0])
        return NULL;
    int64_t dur = cur->duration_s > 0 ? (int64_t)cur->duration_s * 1000 : l->lease_duration_ms;
    return l->observed_ms + dur <= now_ms ? NULL : l->observed.holder;
}

enum ctl_leader_action ctl_leader_step(struct ctl_leader *l, const struct ctl_lease *cur,
                                       int64_t now_ms, int64_t unix_now_ms,
                                       struct ctl_lease *out)
{
    expire(l, now_ms);
    memset(out, 0, sizeof(*out));
    out->exists = true;
    snprintf(out->holder, sizeof(out->holder), "%s", l->identity);
    out->duration_s = (int32_t)((l->lease_duration_ms + 999) / 1000);
    out->renew_unix_ms = unix_now_ms;
    out->acquire_unix_ms = unix_now_ms;

    if (!cur->exists) {
        /* deleted (by hand, or gone with its namespace): a holder finding its
         * own gone stops at once, and another holder last seen may still act
         * until its lease would have expired, so it is waited out before the
         * create, not taken over at the next read (a lease never seen held
         * is created at once) */
        if (l->leading)
            end_term(l, "the lease was deleted");
        const struct ctl_lease *o = &l->observed;
        int64_t dur = o->duration_s > 0 ? (int64_t)o->duration_s * 1000 : l->lease_duration_ms;
        if (o->exists && o->holder[0] && strcmp(o->holder, l->identity) != 0 &&
            l->observed_ms + dur > now_ms)
            return CTL_LEADER_WAIT;
        ctl_leader_observe(l, cur, now_ms);
        return CTL_LEADER_CREATE;
    }
    const char *valid = ctl_leader_observe(l, cur, now_ms);
    bool ours = strcmp(cur->holder, l->identity) == 0;
    if (!ours && valid) {
        char why[160];
        snprintf(why, sizeof(why), "the lease is held by %.120s", cur->holder);
        end_term(l, why);
        return CTL_LEADER_WAIT;
    }
    snprintf(out->resource_version, sizeof(out->resource_version), "%s", cur->resource_version);
    if (ours) {
        out->acquire_unix_ms = cur->acquire_unix_ms;
        out->transitions = cur->transitions;
    } else {
        out->transitions = cur->transitions < INT32_MAX ? cur->transitions + 1 : INT32_MAX;
    }
    return CTL_LEADER_UPDATE;
}

void ctl_leader_result(struct ctl_leader *l, bool ok, const struct ctl_lease *written,
                       int64_t now_ms, int64_t sent_ms)
{
    expire(l, now_ms); /* a renewal after the deadline starts a new term */
    if (!ok) {
        /* leading lapses by itself once renew_deadline passes */
        return;
    }
    if (sent_ms > now_ms)
        sent_ms = now_ms;
    /* the lease holds what was written, acted on or not: a release or the
     * next renewal starts from it (as client-go's setObservedRecord after any
     * successful update), not from a record the write replaced, whose
     * resourceVersion would only conflict */
    l->observed = *written;
    l->observed_ms = now_ms;
    if (now_ms - sent_ms >= l->renew_deadline_ms) {
        /* answered after the deadline its send started: too late to act on
         * (the others may have taken the lease meanwhile) */
        return;
    }
    if (!l->leading) {
        l->term++;
        l->fenced = l->fence_new_terms; /* acts once the caller unfences it */
    }
    l->leading = true;
    l->last_renew_ok_ms = sent_ms;
}

bool ctl_leader_is_leading(const struct ctl_leader *l, int64_t now_ms)
{
    return l->leading && !l->fenced && now_ms - l->last_renew_ok_ms < l->renew_deadline_ms;
}

void ctl_leader_unfence(struct ctl_leader *l)
{
    l->fenced = false;
}

bool ctl_leader_held_live(const struct ctl_leader *l, int64_t now_ms, bool other)
{
    const struct ctl_lease *o = &l->observed;
    int64_t dur = o->duration_s > 0 ? (int64_t)o->duration_s * 1000 : l->lease_duration_ms;
    if (!o->exists || !o->holder[0] || l->observed_ms + dur <= now_ms)
        return false;
    return !other || strcmp(o->holder, l->identity) != 0;
}

enum ctl_leader_change ctl_leader_transition(struct ctl_leader *l, int64_t now_ms, char *why,
                                             size_t len)
{
    expire(l, now_ms);
    if (l->reported_leading && (!l->leading || l->term != l->reported_term)) {
        l->reported_leading = false;
        if (len)
            snprintf(why, len, "%s", l->lost_why[0] ? l->lost_why : "unknown");
        return CTL_LEADER_STOPPED;
    }
    if (!l->reported_leading && l->leading && !l->fenced) {
        l->reported_leading = true;
        l->reported_term = l->term;
        return CTL_LEADER_STARTED;
    }
    return CTL_LEADER_SAME;
}

void ctl_leader_stop(struct ctl_leader *l, const char *why)
{
    end_term(l, why);
}

void ctl_leader_release(const struct ctl_leader *l, int64_t unix_now_ms, struct ctl_lease *out)
{
    *out = l->observed;
    out->holder[0] = '\0';
    out->duration_s = 1;
    out->renew_unix_ms = unix_now_ms;
    out->acquire_unix_ms = unix_now_ms;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* controller/shards-lease: the Lease I/O of sharding (shards.c plans, this
 * file writes): each shard's and the member's Lease written through the
 * election state machine (leader.c), a release that met a 409 read again
 * once, the handover log lines, member Leases of gone replicas deleted, and
 * every Lease this replica holds released at the close.
 *
 * One write per Lease is in flight at a time (struct ctl_lease_io); it ends
 * within renew-deadline. Requests carry a shard index (SELF: the member
 * Lease), never a pointer, and are counted by ctl_shards_io_begin/end so
 * that the controller outlives them. */
#include "controller-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"
#include "shard/shard.h"

#define SUB "shard"
#define SELF CTL_SHARDS_SELF
/** A member Lease unchanged for this many lease durations belongs to a
 *  replica that is gone (a live one renews every retry period): deleted. */
#define MEMBER_GONE_LEASES 10
/** After a failed member Lease delete, the next attempt waits this long. */
#define MEMBER_DELETE_BACKOFF_MS (10LL * 60 * 1000)

void ctl_shards_io_begin(struct controller *c)
{
    c->members->inflight++;
    ctl_io_begin(c);
}

void ctl_shards_io_end(struct controller *c)
{
    if (--c->members->inflight == 0 && c->release_pending && !c->release_hold) {
        /* the list or writes in flight at the close have answered: the
         * releases go now, over what they saw */
        c->release_pending = false;
        ctl_shards_release_all(c);
    }
    ctl_io_end(c); /* may free c when closing: last */
}

/* One log line per handover of this instance's shards, and the member
 * Lease's own changes. */
void ctl_shards_log_transitions(struct controller *c)
{
    struct ctl_shard_members *ms = c->members;
    int64_t now = (int64_t)uv_now(c->loop);
    const char *ns = c->cfg->leader.namespace_;
    char why[200];
    enum ctl_leader_change ch;
    for (uint32_t s = 0; s < c->nshards; s++) {
        struct ctl_shard *sh = &c->shards[s];
        while ((ch = ctl_leader_transition(&sh->leader, now, why, sizeof(why))) !=
               CTL_LEADER_SAME) {
            if (ch == CTL_LEADER_STARTED) {
                ms->acquired++;
                LOG_INFO(SUB, "shard acquired: shard=%u holder=%s previous=%s lease=%s/%s", s,
                         c->identity, sh->prev_holder[0] ? sh->prev_holder : "none", ns,
                         sh->name);
            } else if (sh->releasing) {
                ms->released++;
                LOG_INFO(SUB, "shard released: shard=%u holder=%s lease=%s/%s: %s", s,
                         c->identity, ns, sh->name, why);
            } else {
                ms->lost++;
                LOG_WARN(SUB, "shard lost: shard=%u holder=%s lease=%s/%s: %s", s, c->identity,
                         ns, sh->name, why);
            }
            sh->releasing = false;
        }
    }
    while ((ch = ctl_leader_transition(&ms->self, now, why, sizeof(why))) != CTL_LEADER_SAME) {
        if (ch == CTL_LEADER_STARTED)
            LOG_INFO(SUB, "member lease held: holder=%s lease=%s/%s", c->identity, ns,
                     ms->self_name);
        else
            LOG_WARN(SUB, "member lease lost: holder=%s lease=%s/%s: %s", c->identity, ns,
                     ms->self_name, why);
    }
}

struct lease_write {
    struct controller *c;
    int shard;        /* SELF for the member Lease */
    bool release;
    struct ctl_lease lease;
    int64_t sent_ms;  /* loop time the write was sent: the renew deadline's start */
};

static struct ctl_leader *leader_of(struct controller *c, int shard)
{
    return shard == SELF ? &c->members->self : &c->shards[shard].leader;
}

static struct ctl_lease_io *io_of(struct controller *c, int shard)
{
    return shard == SELF ? &c->members->self_io : &c->shards[shard].io;
}

/* Whether the round over the list last sent may write this Lease. */
bool ctl_shards_may_write(struct controller *c, int shard)
{
    const struct ctl_lease_io *io = io_of(c, shard);
    return !io->busy && io->answered_ms < c->members->list_sent_ms;
}

static bool *reread_of(struct controller *c, int shard)
{
    return shard == SELF ? &c->members->self_reread : &c->shards[shard].reread;
}

static void write_lease(struct controller *c, int shard, bool create, bool release,
                        const struct ctl_lease *l);

struct lease_get {
    struct controller *c;
    int shard;
};

/* The Lease a release met a 409 on, read again: released over this record
 * while it still names this replica. */
static void reread_for_release(const struct kube_result *res, void *arg)
{
    struct lease_get *g = arg;
    struct controller *c = g->c;
    const char *what = g->shard == SELF ? c->members->self_name : c->shards[g->shard].name;
    struct ctl_leader *l = leader_of(c, g->shard);
    struct ctl_lease_io *io = io_of(c, g->shard);
    io->busy = false;
    io->answered_ms = (int64_t)uv_now(c->loop);
    if (res->err == 0 && res->body) {
        struct ctl_lease cur, out;
        ctl_lease_from_json(res->body, &cur);
        l->observed = cur;
        l->observed_ms = (int64_t)uv_now(c->loop);
        if (strcmp(cur.holder, c->identity) == 0) {
            ctl_leader_release(l, util_now_unix_ms(), &out);
            write_lease(c, g->shard, false, true, &out);
        } else {
            *reread_of(c, g->shard) = false;
            LOG_INFO(SUB, "lease %s: no longer held by this replica (holder %.120s): nothing "
                          "to release", what, cur.holder[0] ? cur.holder : "none");
        }
    } else {
        *reread_of(c, g->shard) = false;
        LOG_WARN(SUB, "releasing lease %s: reading it again failed: HTTP %ld %s (it expires "
                      "by itself)", what, res->status, res->message);
    }
    xfree(g);
    ctl_shards_io_end(c);
}

/* A release that met a 409: a renewal that timed out here but was applied
 * there moved the Lease on. Read it again (once), as the single leader's
 * release does (elect.c); true when the read went out and owns r's io slot. */
static bool release_conflicted(struct controller *c, int shard, const char *what)
{
    bool *reread = reread_of(c, shard);
    if (*reread) {
        *reread = false; /* the next release may read again */
        return false;
    }
    *reread = true;
    LOG_INFO(SUB, "releasing lease %s: it changed since it was read (409); reading it again",
             what);
    struct lease_get *g = xcalloc(1, sizeof(*g));
    g->c = c;
    g->shard = shard;
    ctl_shards_io_begin(c);
    io_of(c, shard)->busy = true;
    if (kube_lease_get(c->kube, c->cfg->leader.namespace_, what, ctl_lease_read_within(c->cfg),
                       reread_for_release, g) == 0)
        return true;
    io_of(c, shard)->busy = false;
    *reread = false;
    xfree(g);
    ctl_shards_io_end(c);
    return false;
}

static void lease_written(const struct kube_result *res, void *arg)
{
    struct lease_write *r = arg;
    struct controller *c = r->c;
    const char *what = r->shard == SELF ? c->members->self_name : c->shards[r->shard].name;
    if (res->err == -EEXIST && !r->release)
        LOG_DEBUG(SUB, "lease %s: taken by another replica meanwhile (HTTP %ld)", what,
                  res->status);
    else if (res->err != 0)
        LOG_WARN(SUB, "writing lease %s failed: HTTP %ld %s %s", what, res->status, res->reason,
                 res->message);
    struct ctl_leader *l = leader_of(c, r->shard);
    struct ctl_lease_io *io = io_of(c, r->shard);
    io->busy = false;
    io->answered_ms = (int64_t)uv_now(c->loop);
    if (res->err == 0 && res->body)
        ctl_lease_from_json(res->body, &r->lease);
    if (r->release && res->status == 409 && release_conflicted(c, r->shard, what)) {
        /* read again: released over the new record while it names this replica */
    } else if (r->release || c->closing) {
        /* a release, or a renewal that answered after the close (no new term):
         * only the record is kept, for the release to go over */
        if (r->release)
            *reread_of(c, r->shard) = false;
        if (res->err == 0 && !r->release && r->shard != SELF &&
            strcmp(l->observed.holder, c->identity) != 0) {
            /* a shard taken by a write that answered after the close: it never
             * acted, and the release that follows (over this record) would go
             * unlogged */
            c->members->released++;
            LOG_INFO(SUB, "shard released: shard=%d holder=%s lease=%s/%s: shutting down: "
                          "releasing the lease (taken as the replica stopped, not acted on)",
                     r->shard, c->identity, c->cfg->leader.namespace_, what);
        }
        if (res->err == 0) {
            l->observed = r->lease;
            l->observed_ms = (int64_t)uv_now(c->loop);
        }
    } else {
        ctl_leader_result(l, res->err == 0, &r->lease, (int64_t)uv_now(c->loop), r->sent_ms);
        if (res->status == 409) /* written meanwhile by another replica, or by hand */
            ctl_leader_stop(l, "the lease was written by another replica (409 on its "
                               "renewal)");
    }
    ctl_shards_log_transitions(c);
    xfree(r);
    ctl_shards_io_end(c);
}

static void write_lease(struct controller *c, int shard, bool create, bool release,
                        const struct ctl_lease *l)
{
    const char *ns = c->cfg->leader.namespace_;
    const char *name = shard == SELF ? c->members->self_name : c->shards[shard].name;
    struct lease_write *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->shard = shard;
    r->release = release;
    r->lease = *l;
    r->sent_ms = (int64_t)uv_now(c->loop);
    json_t *body = ctl_lease_to_json(ns, name, l);
    /* an answer after the renew deadline is of no use (ctl_leader_result):
     * the write ends by then, so that the Lease is tried again next round */
    int64_t within = c->cfg->leader.renew_deadline_ms;
    ctl_shards_io_begin(c);
    io_of(c, shard)->busy = true;
    int rc = create ? kube_lease_create(c->kube, ns, body, within, lease_written, r)
                    : kube_lease_update(c->kube, ns, name, body, within, lease_written, r);
    json_decref(body);
    if (rc != 0) {
        LOG_WARN(SUB, "cannot write lease %s: %s", name, strerror(-rc));
        io_of(c, shard)->busy = false;
        xfree(r);
        ctl_shards_io_end(c);
    }
}

/* One election step of a lease this instance wants (its member Lease or a
 * shard to keep or acquire): write what the state machine asks for. */
void ctl_shards_step(struct controller *c, int shard, const struct ctl_lease *cur, int64_t now,
                     int64_t unix_now)
{
    struct ctl_lease out;
    if (!ctl_shards_may_write(c, shard))
        return; /* its write in flight, or answered after the list: next round */
    enum ctl_leader_action a = ctl_leader_step(leader_of(c, shard), cur, now, unix_now, &out);
    if (a != CTL_LEADER_WAIT)
        write_lease(c, shard, a == CTL_LEADER_CREATE, false, &out);
}

void ctl_shards_release_shard(struct controller *c, uint32_t s, int64_t unix_now,
                              const char *why)
{
    struct ctl_shard *sh = &c->shards[s];
    struct ctl_lease out;
    ctl_leader_release(&sh->leader, unix_now, &out);
    sh->releasing = sh->leader.reported_leading; /* its end is logged as "released" */
    if (!sh->releasing && sh->leader.leading) {
        /* a term still fenced (taken at the last round) never acted nor was logged */
        c->members->released++;
        LOG_INFO(SUB, "shard released: shard=%u holder=%s lease=%s/%s: %s (taken a round "
                      "ago, not acted on)", s, c->identity, c->cfg->leader.namespace_,
                 sh->name, why);
    }
    ctl_leader_stop(&sh->leader, why); /* stop acting before the write goes out */
    write_lease(c, (int)s, false, true, &out);
}

struct lease_delete {
    struct controller *c;
    char name[256];
    int64_t idle_s;
};

static void member_deleted(const struct kube_result *res, void *arg)
{
    struct lease_delete *d = arg;
    const char *ns = d->c->cfg->leader.namespace_;
    if (res->err == 0)
        LOG_INFO(SUB, "member lease deleted: lease=%s/%s unchanged for %llds, its replica is gone",
                 ns, d->name, (long long)d->idle_s);
    else if (res->status == 404 || res->status == 409)
        LOG_DEBUG(SUB, "member lease %s/%s: renewed or deleted meanwhile (HTTP %ld)", ns, d->name,
                  res->status);
    else {
        /* e.g. 403 from a Role without delete (an older chart): try again in 10 minutes */
        d->c->members->delete_after_ms = (int64_t)uv_now(d->c->loop) + MEMBER_DELETE_BACKOFF_MS;
        LOG_WARN(SUB, "deleting member lease %s/%s failed: HTTP %ld %s %s (retried in %llds%s)",
                 ns, d->name, res->status, res->reason, res->message,
                 (long long)(MEMBER_DELETE_BACKOFF_MS / 1000),
                 res->status == 403 ? "; the Role needs delete on leases" : "");
    }
    struct controller *c = d->c;
    c->members->deleting--;
    xfree(d);
    ctl_shards_io_end(c);
}

/* Delete the member Leases nobody renewed for MEMBER_GONE_LEASES lease
 * durations, so that the namespace does not collect one per pod that ever
 * ran. Only the live member first in identity order does it, and only while
 * the Lease is as it was read (the resourceVersion is a precondition): a
 * replica that comes back meanwhile keeps its Lease, or creates it again. */
void ctl_shards_delete_gone(struct controller *c, const char *const *live, size_t nlive,
                            int64_t now)
{
    struct ctl_shard_members *ms = c->members;
    if (now < ms->delete_after_ms || ms->deleting)
        return;
    for (size_t i = 0; i < nlive; i++)
        if (strcmp(live[i], c->identity) < 0)
            return;
    for (size_t i = 0; i < ms->n; i++) {
        struct ctl_shard_member *m = &ms->m[i];
        int64_t dur = c->cfg->leader.lease_duration_ms;
        if (m->cur.duration_s > 0 && (int64_t)m->cur.duration_s * 1000 > dur)
            dur = (int64_t)m->cur.duration_s * 1000;
        int64_t idle = now - m->obs.observed_ms;
        if (!m->cur.exists || !m->cur.resource_version[0] || idle < MEMBER_GONE_LEASES * dur)
            continue;
        struct lease_delete *d = xcalloc(1, sizeof(*d));
        d->c = c;
        d->idle_s = idle / 1000;
        snprintf(d->name, sizeof(d->name), "%s", m->name);
        ctl_shards_io_begin(c);
        ms->deleting++;
        int rc = kube_lease_delete(c->kube, c->cfg->leader.namespace_, m->name,
                                   m->cur.resource_version, c->cfg->leader.renew_deadline_ms,
                                   member_deleted, d);
        if (rc != 0) {
            LOG_WARN(SUB, "cannot delete member lease %s: %s", m->name, strerror(-rc));
            ms->deleting--;
            xfree(d);
            ctl_shards_io_end(c);
        }
    }
}

/* Whether the record last seen of this lease names this replica: client-go
 * releases on that (IsLeader), not on the renew deadline. */
static bool seen_as_holder(const struct controller *c, const struct ctl_leader *l)
{
    return l->observed.exists && strcmp(l->observed.holder, c->identity) == 0;
}

/* Write the released record (empty holder, 1 s) of every lease last seen
 * held by this replica, over that record's resourceVersion. */
void ctl_shards_release_all(struct controller *c)
{
    struct ctl_shard_members *ms = c->members;
    int64_t unix_now = util_now_unix_ms();
    struct ctl_lease out;
    for (uint32_t s = 0; s < c->nshards; s++) {
        struct ctl_leader *l = &c->shards[s].leader;
        if (!seen_as_holder(c, l))
            continue;
        ctl_leader_release(l, unix_now, &out);
        write_lease(c, (int)s, false, true, &out);
    }
    if (seen_as_holder(c, &ms->self)) {
        ctl_leader_release(&ms->self, unix_now, &out);
        write_lease(c, SELF, false, true, &out);
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* controller/elect: leader election I/O. Every retry period it reads the
 * coordination.k8s.io/v1 Lease, asks the pure state machine (leader.c) what to
 * write, and writes it with the read resourceVersion as precondition. A
 * write that fails leaves leadership to lapse after renew-deadline; on close
 * the lease is released so a follower takes over at once.
 *
 * A term begins fenced: before it acts, the namespace's Leases are listed
 * (after the write that began it) and it waits while a shard Lease
 * (<sharding.lease-prefix>-<n>) has a valid holder other than this replica,
 * one round at a time: replicas with sharding on, in a rollout that turns it
 * off, act until they see this Lease held and hand their shards back
 * (shards.c). A list refused (403: a Role without the sharding rule, under
 * which no replica can run sharded) does not hold the term. */
#include "controller-int.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kube/kube.h"
#include "shard/shard.h"

#define SUB "leader"

static void micro_time(int64_t unix_ms, char *out, size_t len)
{
    char base[32];
    util_format_rfc3339(unix_ms, base, sizeof(base));
    size_t bl = strlen(base);
    if (bl)
        base[bl - 1] = '\0'; /* drop Z */
    snprintf(out, len, "%s.%06dZ", base, (int)(unix_ms % 1000) * 1000);
}

int64_t ctl_lease_read_within(const struct ctl_config *cfg)
{
    /* renewed at t, a read at t + retry that hangs for this, the next round
     * at most a retry later: its write goes out before t + renew-deadline */
    int64_t left = cfg->leader.renew_deadline_ms - 2 * cfg->leader.retry_period_ms;
    return left > cfg->leader.retry_period_ms ? left : cfg->leader.retry_period_ms;
}

void ctl_lease_from_json(const json_t *obj, struct ctl_lease *l)
{
    memset(l, 0, sizeof(*l));
    l->exists = true;
    const json_t *spec = json_object_get(obj, "spec");
    const char *h = json_string_value(json_object_get(spec, "holderIdentity"));
    snprintf(l->holder, sizeof(l->holder), "%s", h ? h : "");
    /* int32 fields in the API (a value past them written by hand: clamped,
     * not wrapped to a negative) */
    json_int_t d = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
    json_int_t tr = json_integer_value(json_object_get(spec, "leaseTransitions"));
    l->duration_s = (int32_t)(d > INT32_MAX ? INT32_MAX : d < 0 ? 0 : d);
    l->transitions = (int32_t)(tr > INT32_MAX ? INT32_MAX : tr < 0 ? 0 : tr);
    const char *t = json_string_value(json_object_get(spec, "renewTime"));
    if (t)
        kube_parse_time(t, &l->renew_unix_ms);
    t = json_string_value(json_object_get(spec, "acquireTime"));
    if (t)
        kube_parse_time(t, &l->acquire_unix_ms);
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    snprintf(l->resource_version, sizeof(l->resource_version), "%s", rv ? rv : "");
}

json_t *ctl_lease_to_json(const char *ns, const char *name, const struct ctl_lease *l)
{
    char acq[48], ren[48];
    micro_time(l->acquire_unix_ms, acq, sizeof(acq));
    micro_time(l->renew_unix_ms, ren, sizeof(ren));
    json_t *meta = json_pack("{s:s,s:s}", "name", name, "namespace", ns);
    if (l->resource_version[0])
        json_object_set_new(meta, "resourceVersion", json_string(l->resource_version));
    return json_pack("{s:s,s:s,s:o,s:{s:s,s:I,s:s,s:s,s:I}}", "apiVersion",
                     "coordination.k8s.io/v1", "kind", "Lease", "metadata", meta, "spec",
                     "holderIdentity", l->holder, "leaseDurationSeconds",
                     (json_int_t)l->duration_s, "acquireTime", acq, "renewTime", ren,
                     "leaseTransitions", (json_int_t)l->transitions);
}

struct write_req {
    struct controller *c;
    struct ctl_lease lease;
    bool release;
    int64_t sent_ms; /* loop time the write was sent: the renew deadline's start */
};

/* A term starts. A warm standby read the checkpoints at its own start; the
 * leader before it saved the state as of its stop (and held the Lease for
 * that save): each Deployment's is read again, the longer history winning
 * (checkpoint.c), before this term saves over it. And every status is
 * written again: another leader may have written its own since this
 * replica's last term, which the same body and time skipped. */
static void term_started(struct controller *c)
{
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        for (struct ctl_wl *w = c->table[b]; w; w = w->next) {
            if (w->checkpoint_ready) {
                w->checkpoint_loaded = false;
                w->checkpoint_ready = false;
            }
            xfree(w->status_written);
            w->status_written = NULL;
        }
}

/* Log every leadership change not yet logged: once per term each way. Runs
 * after every election step and on every retry-period timer tick, so a term
 * that lapses while a request hangs (an API server outage) is logged within
 * one retry period of its renew deadline. */
static void log_transitions(struct controller *c)
{
    char why[200];
    enum ctl_leader_change ch;
    while ((ch = ctl_leader_transition(&c->leader, (int64_t)uv_now(c->loop), why,
                                       sizeof(why))) != CTL_LEADER_SAME) {
        if (ch == CTL_LEADER_STARTED) {
            LOG_INFO(SUB, "became leader (identity %s, lease %s/%s)", c->identity,
                     c->cfg->leader.namespace_, c->cfg->leader.lease_name);
            term_started(c);
        } else
            LOG_WARN(SUB, "stopped leading (identity %s, lease %s/%s): %s", c->identity,
                     c->cfg->leader.namespace_, c->cfg->leader.lease_name, why);
    }
}

/* Sharding off: the shard Leases a fenced term of the single leader lists,
 * observed as the members observe them (expiry on the local clock). */
struct ctl_shard_watch {
    struct ctl_leader *obs[SHARD_MAX]; /**< per shard number, NULL until first seen */
};

/* Of the Lease list body (its items), the first shard Lease
 * (<sharding.lease-prefix>-<n>) with a valid holder other than this replica,
 * observed on the local clock across calls (one deleted since counts until
 * it would have expired); its name into lease. NULL when none. */
static const char *foreign_holder(struct controller *c, const json_t *body, char *lease,
                                      size_t len)
{
    if (!c->shard_watch)
        c->shard_watch = xcalloc(1, sizeof(*c->shard_watch));
    struct ctl_shard_watch *w = c->shard_watch;
    const struct ctl_config *cfg = c->cfg;
    int64_t now = (int64_t)uv_now(c->loop);
    bool listed[SHARD_MAX] = {false};
    const char *found = NULL;
    size_t idx;
    json_t *it;
    json_array_foreach(json_object_get(body, "items"), idx, it) {
        const char *name =
            json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
        int64_t s = name ? shard_lease_number(name, cfg->sharding.lease_prefix, SHARD_MAX) : -1;
        if (s < 0)
            continue;
        if (!w->obs[s]) {
            w->obs[s] = xcalloc(1, sizeof(*w->obs[s]));
            ctl_leader_init(w->obs[s], c->identity, cfg->leader.lease_duration_ms,
                            cfg->leader.renew_deadline_ms, cfg->leader.retry_period_ms);
        }
        struct ctl_lease cur;
        ctl_lease_from_json(it, &cur);
        listed[s] = true;
        const char *h = ctl_leader_observe(w->obs[s], &cur, now);
        if (h && strcmp(h, c->identity) != 0 && !found) {
            found = h;
            snprintf(lease, len, "%s", name);
        }
    }
    /* deleted since: its holder last seen may act until it would have expired */
    struct ctl_lease gone;
    memset(&gone, 0, sizeof(gone));
    for (uint32_t s = 0; s < SHARD_MAX; s++) {
        if (!w->obs[s] || listed[s])
            continue;
        const char *h = ctl_leader_observe(w->obs[s], &gone, now);
        if (h && strcmp(h, c->identity) != 0 && !found) {
            found = h;
            snprintf(lease, len, "%s-%u", cfg->sharding.lease_prefix, s);
        }
    }
    return found;
}

void ctl_elect_free(struct controller *c)
{
    if (c->shard_watch) {
        for (uint32_t s = 0; s < SHARD_MAX; s++)
            xfree(c->shard_watch->obs[s]);
        xfree(c->shard_watch);
        c->shard_watch = NULL;
    }
}

static void written(const struct kube_result *res, void *arg);
static void got_lease(const struct kube_result *res, void *arg);
static void release_if_pending(struct controller *c);

static void shards_listed(const struct kube_result *res, void *arg)
{
    struct controller *c = arg;
    c->elect_inflight = false;
    if (c->closing) {
        /* nothing to act on any more */
    } else if (res->status == 403) {
        if (!c->shard_list_refused)
            LOG_INFO(SUB, "listing the Leases of %s is refused (HTTP 403): no replica can "
                          "hold shard Leases under this Role; acting without waiting for them",
                     c->cfg->leader.namespace_);
        c->shard_list_refused = true;
        ctl_leader_unfence(&c->leader);
    } else if (res->err != 0) {
        /* listed again each round: said once a term, not each retry period */
        if (c->leader.term != c->shard_list_told_term)
            LOG_WARN(SUB, "listing the Leases of %s for shard Leases failed: HTTP %ld %s (not "
                          "acting until a list answers; listed again each round)",
                     c->cfg->leader.namespace_, res->status, res->message);
        c->shard_list_told_term = c->leader.term;
    } else {
        char lease[300];
        const char *h = foreign_holder(c, res->body, lease, sizeof(lease));
        if (!h) {
            ctl_leader_unfence(&c->leader);
        } else if (c->leader.term != c->shard_wait_told_term) {
            c->shard_wait_told_term = c->leader.term;
            LOG_WARN(SUB, "holding the lease but not acting yet: shard Lease %s/%s is held by "
                          "%.120s (a replica with sharding on, such as an older one in a "
                          "rollout); waiting until it is handed back or expires",
                     c->cfg->leader.namespace_, lease, h);
        }
    }
    log_transitions(c);
    release_if_pending(c);
    ctl_io_end(c);
}

/* A term begun fenced, just renewed: list the Leases (after that write) for
 * shard Leases others hold. Returns whether the list went out, taking over
 * the caller's io slot and elect_inflight. */
static bool list_shards(struct controller *c)
{
    if (!c->leader.leading || !c->leader.fenced || c->closing)
        return false;
    if (kube_lease_list(c->kube, c->cfg->leader.namespace_, ctl_lease_read_within(c->cfg),
                        shards_listed, c) == 0)
        return true;
    LOG_WARN(SUB, "cannot list the Leases for shard Leases");
    return false;
}

/* Write the released lease (empty holder, 1 s) over the record last seen,
 * when that record names this replica: client-go's release, which checks the
 * holder (IsLeader), not the renew deadline. */
static void release_now(struct controller *c)
{
    const struct ctl_lease *seen = &c->leader.observed;
    if (!seen->exists || strcmp(seen->holder, c->identity) != 0) {
        c->released = true;
        return;
    }
    struct write_req *w = xcalloc(1, sizeof(*w));
    w->c = c;
    w->release = true;
    ctl_leader_release(&c->leader, util_now_unix_ms(), &w->lease);
    json_t *body =
        ctl_lease_to_json(c->cfg->leader.namespace_, c->cfg->leader.lease_name, &w->lease);
    ctl_io_begin(c);
    int rc = kube_lease_update(c->kube, c->cfg->leader.namespace_, c->cfg->leader.lease_name, body,
                               c->cfg->leader.renew_deadline_ms, written, w);
    json_decref(body);
    if (rc != 0) {
        xfree(w);
        c->released = true;
        ctl_io_end(c);
    }
}

/* A read or a renewal that was in flight when the close came has answered:
 * the release it waited for goes now, over what it saw (its resourceVersion;
 * released concurrently, one of the two writes would conflict). Before the
 * caller's ctl_io_end, so the close cannot complete in between. */
static void release_if_pending(struct controller *c)
{
    if (!c->release_pending || c->release_hold)
        return;
    c->release_pending = false;
    release_now(c);
}

static void written(const struct kube_result *res, void *arg)
{
    struct write_req *r = arg;
    struct controller *c = r->c;
    if (r->release) {
        if (res->err == 0) {
            LOG_INFO(SUB, "released the lease");
        } else if (res->status == 409 && !c->release_reread) {
            /* over a resourceVersion a renewal that timed out here but was
             * applied there had moved on: read it again, and release over
             * that while it still names this replica (the Lease stayed held
             * until it expired, and no replica acted meanwhile) */
            c->release_reread = true;
            LOG_INFO(SUB, "releasing the lease: it changed since it was read (409); reading it "
                          "again");
            c->release_pending = true;
            c->elect_inflight = true;
            ctl_io_begin(c);
            if (kube_lease_get(c->kube, c->cfg->leader.namespace_, c->cfg->leader.lease_name,
                               ctl_lease_read_within(c->cfg), got_lease, c) == 0) {
                xfree(r);
                ctl_io_end(c);
                return;
            }
            c->release_pending = false;
            c->elect_inflight = false;
            ctl_io_end(c);
        } else {
            LOG_WARN(SUB, "releasing the lease failed: %s", res->message);
        }
        c->released = true;
    } else {
        if (res->err != 0)
            LOG_WARN(SUB, "lease write failed: HTTP %ld %s %s", res->status, res->reason,
                     res->message);
        if (res->err == 0 && res->body)
            ctl_lease_from_json(res->body, &r->lease);
        ctl_leader_result(&c->leader, res->err == 0, &r->lease, (int64_t)uv_now(c->loop),
                          r->sent_ms);
        /* our own lease written meanwhile by another replica (or by hand): its
         * term is no longer ours to count on */
        if (res->status == 409)
            ctl_leader_stop(&c->leader, "the lease was written by another replica (409 on "
                                        "its renewal)");
        if (c->closing) /* a renewal that answered after the close: no new term */
            ctl_leader_stop(&c->leader, "shutting down: releasing the lease");
        log_transitions(c);
        if (res->err == 0 && list_shards(c)) {
            xfree(r);
            return; /* the io slot and elect_inflight pass to the list */
        }
        c->elect_inflight = false;
        release_if_pending(c);
    }
    xfree(r);
    ctl_io_end(c);
}

static void got_lease(const struct kube_result *res, void *arg)
{
    struct controller *c = arg;
    struct ctl_lease cur;
    memset(&cur, 0, sizeof(cur));
    if (c->closing || (res->err != 0 && res->err != -ENOENT)) {
        if (res->err != 0 && !c->closing)
            LOG_WARN(SUB, "reading the lease failed: HTTP %ld %s", res->status, res->message);
        if (c->closing && res->err == 0) {
            /* the record the pending release goes over */
            ctl_lease_from_json(res->body, &cur);
            c->leader.observed = cur;
        }
        c->elect_inflight = false;
        log_transitions(c);
        release_if_pending(c);
        ctl_io_end(c);
        return;
    }
    if (res->err == 0)
        ctl_lease_from_json(res->body, &cur);
    struct write_req *w = xcalloc(1, sizeof(*w));
    w->c = c;
    enum ctl_leader_action a =
        ctl_leader_step(&c->leader, &cur, (int64_t)uv_now(c->loop), util_now_unix_ms(), &w->lease);
    int rc = 0;
    if (a == CTL_LEADER_WAIT) {
        xfree(w);
        c->elect_inflight = false;
        log_transitions(c);
        ctl_io_end(c);
        return;
    }
    json_t *body =
        ctl_lease_to_json(c->cfg->leader.namespace_, c->cfg->leader.lease_name, &w->lease);
    w->sent_ms = (int64_t)uv_now(c->loop);
    /* answered after the renew deadline, a write is of no use (ctl_leader_result) */
    int64_t within = c->cfg->leader.renew_deadline_ms;
    if (a == CTL_LEADER_CREATE)
        rc = kube_lease_create(c->kube, c->cfg->leader.namespace_, body, within, written, w);
    else
        rc = kube_lease_update(c->kube, c->cfg->leader.namespace_, c->cfg->leader.lease_name,
                               body, within, written, w);
    json_decref(body);
    if (rc != 0) {
        LOG_WARN(SUB, "cannot write the lease: %s", strerror(-rc));
        xfree(w);
        c->elect_inflight = false;
        ctl_io_end(c);
        return;
    }
    /* the io slot of the read passes to the write */
}

static void elect_round(uv_timer_t *t)
{
    struct controller *c = util_container_of(t, struct controller, elect_timer);
    if (c->closing)
        return;
    log_transitions(c); /* a deadline may pass while a request hangs */
    if (c->elect_inflight)
        return;
    c->elect_inflight = true;
    ctl_io_begin(c);
    int rc = kube_lease_get(c->kube, c->cfg->leader.namespace_, c->cfg->leader.lease_name,
                            ctl_lease_read_within(c->cfg), got_lease, c);
    if (rc != 0) {
        LOG_WARN(SUB, "cannot read the lease: %s", strerror(-rc));
        c->elect_inflight = false;
        ctl_io_end(c);
    }
}

void ctl_elect_start(struct controller *c)
{
    c->leader.fence_new_terms = true; /* acts once no shard Lease is held by another */
    uint64_t p = (uint64_t)c->cfg->leader.retry_period_ms;
    uv_timer_start(&c->elect_timer, elect_round, 0, p);
}

void ctl_elect_release(struct controller *c)
{
    log_transitions(c);
    ctl_leader_stop(&c->leader, "shutting down: releasing the lease"); /* stop acting at once */
    log_transitions(c);
    if (c->elect_inflight || c->release_hold) {
        /* a read or a renewal carries the same resourceVersion: release after it
         * answers; checkpoint saves: after them, so the next leader reads them */
        c->release_pending = true;
        return;
    }
    release_now(c);
}

void ctl_elect_release_resume(struct controller *c)
{
    if (!c->elect_inflight)
        release_if_pending(c);
}

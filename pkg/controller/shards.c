/* SPDX-License-Identifier: Apache-2.0 */
/* controller/shards: sharding across replicas with coordination.k8s.io
 * Leases as the only coordinator (sharding.enabled).
 *
 * Each replica renews a member Lease <prefix>-member-<identity>; the live
 * members are those whose member Lease has a holder and has not expired on
 * the local clock. Each shard has a Lease <prefix>-<shard>. Every retry
 * period one LIST of the namespace's Leases feeds the pure assignment
 * (pkg/shard: keep, acquire, release), and each shard Lease is then written
 * by the same election state machine as the single leader's (leader.c): a
 * ctl_leader per shard, the read resourceVersion as precondition, the term
 * ending by itself once renew-deadline passes without a renewal. So a
 * replica acts for a Deployment only while it holds that Deployment's shard
 * and renewed it within renew-deadline (ctl_acting_for), and another takes
 * the shard only after lease-duration without a change on its own clock:
 * the single leader's fence, per shard. A replica that cannot reach the API
 * server stops acting after renew-deadline; the others take its shards
 * after lease-duration. A shard handed over to a newcomer is released only
 * once its Deployments' checkpoints are written; member Leases nobody
 * renewed for 10 lease durations are deleted. A member that leaves the
 * shards handed to it free for two lease durations is planned without for
 * a while, so the others take them back.
 *
 * Sharded and single-leader replicas (a rollout turning sharding on or off)
 * exclude each other, the single leader winning: no shard is held while the
 * single leader's Lease has another valid holder, and a shard term begins
 * fenced, acting only once a list sent after its write shows none (the
 * single leader's term waits likewise for the shard Leases: elect.c).
 *
 * Every Lease write ends within renew-deadline (an answer after it is of no
 * use), and a write in flight holds back only its own Lease: one slow write
 * never stops the other shards' renewals. The list every round waits for
 * ends sooner (ctl_lease_read_within), so that the round after a hung one
 * still renews within renew-deadline.
 *
 * This file keeps the member table and plans each round (the list, the
 * assignment, what each shard's Lease should become); shards-lease.c
 * writes the Leases and logs the handovers.
 *
 * Ownership: the shard and member tables (controller-int.h) belong to the
 * controller; requests in flight carry a shard index, never a pointer, and
 * are counted by ctl_shards_io_begin/end so the controller outlives them. */
#include "controller-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"
#include "shard/shard.h"

#define SUB "shard"
#define MEMBER_INFIX SHARD_MEMBER_INFIX
#define SELF CTL_SHARDS_SELF
/** Rounds a shard to hand over is kept while its checkpoints are written. */
#define HANDOVER_FLUSH_ROUNDS 5
/** A member that left a shard free for MEMBER_FREE_LEASES lease durations
 *  while short of its share is planned without for MEMBER_STALL_LEASES. Two,
 *  not one: a newcomer counts a dead member whose Lease it lists (never
 *  renewed, not released: a SIGKILL) as live for a lease duration after it
 *  first lists it, as it trusts no renewTime, and takes its whole share only
 *  then, while those who saw that Lease expire long ago hand it its share at
 *  once; at one lease duration they judged it stalled before that, and kept
 *  its share away for 10 more. */
#define MEMBER_FREE_LEASES 2
#define MEMBER_STALL_LEASES 10

static struct ctl_shard_member *member_find(struct controller *c, const char *name)
{
    struct ctl_shard_members *ms = c->members;
    for (size_t i = 0; i < ms->n; i++)
        if (strcmp(ms->m[i].name, name) == 0)
            return &ms->m[i];
    return NULL;
}

/* Whether slot m may go to a held member Lease new this round: its Lease
 * is gone, released or expired on the local clock (none that took a slot
 * this round). */
static bool member_recyclable(struct ctl_shard_member *m, int64_t now)
{
    if (m->fresh)
        return false;
    if (!m->seen || !m->cur.holder[0])
        return true;
    return ctl_leader_observe(&m->obs, &m->cur, now) == NULL; /* as this round will */
}

/* A slot for member Lease rec named name, new this round (held: its holder
 * is not ""). A full table gives a held Lease the slot of one gone, released
 * or expired (which then has none, nor a deletion timer, while the table is
 * full), so that Leases left behind where they cannot be deleted never hide
 * a live replica; NULL when none is free. A Lease that takes a recycled
 * slot counts as live only once it changes: an expired one that lost its
 * slot and takes another must not look renewed (it would be planned for). */
static struct ctl_shard_member *member_slot(struct controller *c, const char *name,
                                  const struct ctl_lease *rec, int64_t now)
{
    struct ctl_shard_members *ms = c->members;
    const struct ctl_config *cfg = c->cfg;
    struct ctl_shard_member *m = NULL;
    bool recycled = false;
    if (ms->n < SHARD_MAX_MEMBERS) {
        m = &ms->m[ms->n++];
    } else {
        for (size_t i = 0; rec->holder[0] && !m && i < ms->n; i++)
            if (member_recyclable(&ms->m[i], now))
                m = &ms->m[i];
        if (!m) {
            ms->full++;
            return NULL;
        }
        recycled = true;
    }
    memset(m, 0, sizeof(*m));
    snprintf(m->name, sizeof(m->name), "%s", name);
    ctl_leader_init(&m->obs, c->identity, cfg->leader.lease_duration_ms,
                    cfg->leader.renew_deadline_ms, cfg->leader.retry_period_ms);
    m->cur = *rec;
    m->seen = true;
    m->fresh = true;
    if (recycled) {
        int64_t dur = rec->duration_s > 0 ? (int64_t)rec->duration_s * 1000
                                          : cfg->leader.lease_duration_ms;
        m->obs.observed = *rec;
        m->obs.observed_ms = now - dur; /* expired unless it changes */
    }
    return m;
}

/* The members to plan for, moved to the front of live (self last when a
 * member): the live ones less those that left shards free. A shard free for
 * MEMBER_FREE_LEASES lease durations while a live member holds less than its
 * share means that member does not take what is handed to it (it renews its
 * member Lease but its shard writes fail, say): it is planned without for
 * MEMBER_STALL_LEASES lease durations, so that the others take its shards
 * back, and then tried again. judge: whether this replica may tell (a
 * member that may acquire, no single leader to yield to: shards are free
 * while everyone yields to it). Returns their count. */
static size_t plan_members(struct controller *c, const char **live,
                           struct ctl_shard_member **live_m, size_t nlive, bool member,
                           bool judge, int64_t now)
{
    struct ctl_shard_members *ms = c->members;
    int64_t dur = c->cfg->leader.lease_duration_ms;
    int64_t oldest = -1;
    for (uint32_t s = 0; s < c->nshards; s++) {
        struct ctl_shard *sh = &c->shards[s];
        if (ms->holders[s] || !judge) {
            sh->free_since_ms = -1;
            continue;
        }
        if (sh->free_since_ms < 0)
            sh->free_since_ms = now;
        if (oldest < 0 || sh->free_since_ms < oldest)
            oldest = sh->free_since_ms;
    }
    bool stale_free = oldest >= 0 && now - oldest >= MEMBER_FREE_LEASES * dur;
    size_t nothers = nlive - (member ? 1 : 0), k = 0;
    /* shares are those of the whole live list: live is compacted below */
    const char **all = stale_free ? xmalloc((nlive ? nlive : 1) * sizeof(*all)) : NULL;
    if (all)
        memcpy(all, live, nlive * sizeof(*all));
    for (size_t i = 0; i < nothers; i++) {
        struct ctl_shard_member *m = live_m[i];
        if (stale_free && m->stalled_until_ms <= now) {
            uint32_t held = 0;
            for (uint32_t s = 0; s < c->nshards; s++)
                held += ms->holders[s] && strcmp(ms->holders[s], live[i]) == 0;
            uint32_t want = shard_target(all, nlive, live[i], c->nshards);
            if (held < want) {
                m->stalled_until_ms = now + MEMBER_STALL_LEASES * dur;
                LOG_WARN(SUB, "member %.120s holds %u of its %u shards while a shard has "
                              "been free for %llds: planning without it for %llds (the "
                              "others take the free shards)", live[i], held, want,
                         (long long)((now - oldest) / 1000),
                         (long long)(MEMBER_STALL_LEASES * dur / 1000));
            }
        }
        if (m->stalled_until_ms > now)
            continue;
        live[k++] = live[i];
    }
    xfree(all);
    if (member)
        live[k++] = c->identity;
    return k;
}

static void listed(const struct kube_result *res, void *arg)
{
    struct controller *c = arg;
    struct ctl_shard_members *ms = c->members;
    ms->listing = false;
    if (c->closing || res->err != 0) {
        if (!c->closing)
            LOG_WARN(SUB, "listing leases failed: HTTP %ld %s", res->status, res->message);
        ctl_shards_log_transitions(c);
        ctl_shards_io_end(c);
        return;
    }
    int64_t now = (int64_t)uv_now(c->loop), unix_now = util_now_unix_ms();
    const char *prefix = c->cfg->sharding.lease_prefix;
    char mprefix[256];
    snprintf(mprefix, sizeof(mprefix), "%s%s", prefix, MEMBER_INFIX);
    size_t mpl = strlen(mprefix);
    struct ctl_lease own, single;
    memset(&own, 0, sizeof(own));
    memset(&single, 0, sizeof(single));
    for (size_t i = 0; i < ms->n; i++)
        ms->m[i].seen = ms->m[i].fresh = false;
    for (uint32_t s = 0; s < c->nshards; s++)
        memset(&c->shards[s].cur, 0, sizeof(c->shards[s].cur));
    size_t idx;
    json_t *it;
    json_array_foreach(json_object_get(res->body, "items"), idx, it) {
        const char *name =
            json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
        if (!name)
            continue;
        if (strcmp(name, ms->self_name) == 0) {
            ctl_lease_from_json(it, &own);
        } else if (strcmp(name, c->cfg->leader.lease_name) == 0) {
            ctl_lease_from_json(it, &single);
        } else if (strncmp(name, mprefix, mpl) == 0) {
            struct ctl_shard_member *m = member_find(c, name);
            if (m) {
                ctl_lease_from_json(it, &m->cur);
                m->seen = true;
            }
        } else {
            int64_t s = shard_lease_number(name, prefix, c->nshards);
            if (s >= 0)
                ctl_lease_from_json(it, &c->shards[s].cur);
        }
    }
    /* then the member Leases new this round: the held ones first */
    for (int pass = 0; pass < 2; pass++)
        json_array_foreach(json_object_get(res->body, "items"), idx, it) {
            const char *name =
                json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
            if (!name || strncmp(name, mprefix, mpl) != 0 ||
                strcmp(name, ms->self_name) == 0 || strcmp(name, c->cfg->leader.lease_name) == 0 ||
                member_find(c, name))
                continue;
            struct ctl_lease rec;
            ctl_lease_from_json(it, &rec);
            bool held = rec.holder[0] != '\0';
            if (held != (pass == 0))
                continue;
            member_slot(c, name, &rec, now);
        }
    if (ms->full && unix_now - ms->full_told_ms >= 60 * 1000) {
        ms->full_told_ms = unix_now;
        LOG_WARN(SUB, "%zu member Leases (%s*) not followed: over %d; a replica among them is "
                      "not seen. Delete the stale ones (their holders are gone), and let "
                      "gpuscaler delete them (RBAC: delete on leases)", ms->full, mprefix,
                 SHARD_MAX_MEMBERS);
    }
    ms->full = 0;
    /* forget deleted member Leases; the live ones are the unexpired holders */
    size_t k = 0;
    for (size_t i = 0; i < ms->n; i++)
        if (ms->m[i].seen)
            ms->m[k++] = ms->m[i];
    ms->n = k;
    const char *live[SHARD_MAX_MEMBERS + 1];
    struct ctl_shard_member *live_m[SHARD_MAX_MEMBERS];
    size_t nlive = 0;
    for (size_t i = 0; i < ms->n; i++) {
        const char *h = ctl_leader_observe(&ms->m[i].obs, &ms->m[i].cur, now);
        if (h && strcmp(h, c->identity) != 0) {
            live_m[nlive] = &ms->m[i];
            live[nlive++] = h;
        }
    }
    bool member = ctl_leader_is_leading(&ms->self, now);
    if (member) {
        live[nlive++] = c->identity;
        ms->member_rounds++;
    }
    ms->live = nlive;
    ctl_shards_step(c, SELF, &own, now, unix_now);
    if (member)
        ctl_shards_delete_gone(c, live, nlive, now);
    /* A new replica takes nothing until its member Lease was renewed and
     * the others could see it for a round, so replicas started together do
     * not each grab every shard first. */
    bool may_acquire = member && ms->member_rounds >= 2;
    /* the single leader acts for every Deployment: yield to it (take
     * nothing, hand back what is held once its status and /scale writes in
     * flight have ended, its checkpoints unsaved: it acts already) until it
     * released or expired */
    const char *solo = ctl_leader_observe(&ms->single, &single, now);
    if (solo && strcmp(solo, c->identity) == 0)
        solo = NULL; /* this identity's own, from before sharding was on: not another */
    if (solo && unix_now - ms->single_told_ms >= 60 * 1000) {
        ms->single_told_ms = unix_now;
        LOG_WARN(SUB, "the single leader's lease %s/%s is held by %.120s (a replica with "
                      "sharding off, such as an older one in a rollout): holding no shard "
                      "until it is released or expires", c->cfg->leader.namespace_,
                 c->cfg->leader.lease_name, solo);
    }
    for (uint32_t s = 0; s < c->nshards; s++) {
        /* a Lease whose write is in flight, or answered after the list was
         * sent, is listed as it was before: its own record stands (observed
         * against itself, nothing changes), not the older one */
        struct ctl_leader *l = &c->shards[s].leader;
        struct ctl_lease rec = ctl_shards_may_write(c, (int)s) ? c->shards[s].cur : l->observed;
        ms->holders[s] = ctl_leader_observe(l, &rec, now);
        /* a term begun fenced acts once a list sent after its write shows no
         * single leader: either that list saw this shard's Lease taken
         * first, or that leader, listing after its own write, saw it */
        if (l->fenced && !solo && ctl_shards_may_write(c, (int)s))
            ctl_leader_unfence(l);
    }
    size_t nplan = plan_members(c, live, live_m, nlive, member, may_acquire && !solo, now);
    struct shard_view v = {c->identity, live, nplan, c->nshards, ms->holders};
    if (shard_plan(&v, ms->act) != 0) {
        LOG_WARN(SUB, "cannot plan the shards (%zu members)", nlive);
        ctl_shards_io_end(c);
        return;
    }
    for (uint32_t s = 0; s < c->nshards && solo; s++)
        if (ms->act[s] == SHARD_KEEP || ms->act[s] == SHARD_ACQUIRE)
            ms->act[s] = ms->act[s] == SHARD_KEEP ? SHARD_RELEASE : SHARD_IDLE;
    for (uint32_t s = 0; s < c->nshards; s++) {
        struct ctl_shard *sh = &c->shards[s];
        const char *h = ms->holders[s];
        switch (ms->act[s]) {
        case SHARD_ACQUIRE:
            if (!may_acquire)
                break;
            /* fall through */
        case SHARD_KEEP:
            sh->flush_rounds = 0;
            sh->handing = false;
            snprintf(sh->prev_holder, sizeof(sh->prev_holder), "%s", sh->cur.holder);
            ctl_shards_step(c, (int)s, &sh->cur, now, unix_now);
            break;
        case SHARD_RELEASE: {
            if (!ctl_shards_may_write(c, (int)s))
                break; /* its write in flight: next round, the flush where it was */
            /* save its Deployments' checkpoints first, so that the new owner reads the
             * current state, and let the status and /scale writes in flight end (a
             * resend after a 429 may go until the term's deadline at its send: it
             * would land over the new owner's); no new one starts. Hold on (renewing)
             * until then, a few rounds at most */
            sh->handing = true;
            size_t saving = solo ? 0 : ctl_checkpoint_flush_shard(c, s, sh->flush_rounds == 0);
            if ((saving > 0 || ctl_writes_inflight(c, (int64_t)s) > 0) &&
                sh->flush_rounds < HANDOVER_FLUSH_ROUNDS) {
                sh->flush_rounds++;
                ctl_shards_step(c, (int)s, &sh->cur, now, unix_now);
                break;
            }
            sh->flush_rounds = 0;
            sh->handing = false; /* its term ends here */
            char why[200];
            if (solo)
                snprintf(why, sizeof(why), "handed over to the single leader %.120s", solo);
            else
                snprintf(why, sizeof(why),
                         "handed over: %zu live members, this one holds more than its share",
                         nlive);
            ctl_shards_release_shard(c, s, unix_now, why);
            break;
        }
        case SHARD_IDLE:
            sh->handing = false;
            if (h && strcmp(h, c->identity) != 0) {
                char why[200];
                snprintf(why, sizeof(why), "the lease is held by %.120s", h);
                ctl_leader_stop(&sh->leader, why);
            } else if (!h) { /* deleted, or expired: not this replica's to act on */
                ctl_leader_stop(&sh->leader, "the lease is gone or has expired");
            }
            break;
        }
    }
    ctl_shards_log_transitions(c);
    ctl_shards_io_end(c);
}

static void round_cb(uv_timer_t *t)
{
    struct controller *c = util_container_of(t, struct controller, elect_timer);
    if (c->closing)
        return;
    ctl_shards_log_transitions(c); /* a renew deadline may pass while requests hang */
    struct ctl_shard_members *ms = c->members;
    if (ms->listing)
        return;
    /* no member Lease before the caches have listed everything once: the
     * others would hand shards over to a replica that cannot decide yet
     * (tens of seconds on a large cluster), and to one that crashes in its
     * first list again and again */
    if (!ms->self.leading && ctl_shards_held(c) == 0 &&
        !kube_cache_settled(c->cache, CTL_CACHE_DOWN_HOLD_MS)) {
        if (!ms->sync_told)
            LOG_INFO(SUB, "joining the shard members once the Kubernetes caches are synced "
                          "(or a namespace's lists have failed for %ds)",
                     CTL_CACHE_DOWN_HOLD_MS / 1000);
        ms->sync_told = true;
        return;
    }
    /* a write in flight holds back only its own Lease (may_write): one slow
     * request must not stop every other shard's renewals */
    ctl_shards_io_begin(c);
    ms->listing = true;
    ms->list_sent_ms = (int64_t)uv_now(c->loop);
    int rc = kube_lease_list(c->kube, c->cfg->leader.namespace_, ctl_lease_read_within(c->cfg),
                             listed, c);
    if (rc != 0) {
        LOG_WARN(SUB, "cannot list leases: %s", strerror(-rc));
        ms->listing = false;
        ctl_shards_io_end(c);
    }
}

void ctl_shards_start(struct controller *c)
{
    const struct ctl_config *cfg = c->cfg;
    c->nshards = (uint32_t)cfg->sharding.shards;
    c->shards = xcalloc(c->nshards, sizeof(*c->shards));
    struct ctl_shard_members *ms = xcalloc(1, sizeof(*ms));
    c->members = ms;
    ms->m = xcalloc(SHARD_MAX_MEMBERS, sizeof(*ms->m));
    ms->holders = xcalloc(c->nshards, sizeof(*ms->holders));
    ms->act = xcalloc(c->nshards, sizeof(*ms->act));
    ms->self_io.answered_ms = -1;
    for (uint32_t s = 0; s < c->nshards; s++) {
        c->shards[s].io.answered_ms = -1;
        c->shards[s].free_since_ms = -1;
        ctl_leader_init(&c->shards[s].leader, c->identity, cfg->leader.lease_duration_ms,
                        cfg->leader.renew_deadline_ms, cfg->leader.retry_period_ms);
        c->shards[s].leader.fence_new_terms = true; /* acts once no single leader is seen */
        snprintf(c->shards[s].name, sizeof(c->shards[s].name), "%s-%u",
                 cfg->sharding.lease_prefix, s);
    }
    ctl_leader_init(&ms->self, c->identity, cfg->leader.lease_duration_ms,
                    cfg->leader.renew_deadline_ms, cfg->leader.retry_period_ms);
    ctl_leader_init(&ms->single, c->identity, cfg->leader.lease_duration_ms,
                    cfg->leader.renew_deadline_ms, cfg->leader.retry_period_ms);
    shard_member_lease_name(cfg->sharding.lease_prefix, c->identity, ms->self_name,
                      sizeof(ms->self_name));
    LOG_INFO(SUB, "sharding on: %u shards, leases %s/%s-<shard>, member lease %s", c->nshards,
             cfg->leader.namespace_, cfg->sharding.lease_prefix, ms->self_name);
    uv_timer_start(&c->elect_timer, round_cb, 0, (uint64_t)cfg->leader.retry_period_ms);
}

void ctl_shards_release(struct controller *c)
{
    struct ctl_shard_members *ms = c->members;
    int64_t now = (int64_t)uv_now(c->loop);
    static const char why[] = "shutting down: releasing the lease";
    ctl_shards_log_transitions(c);
    /* stop acting at once, for every shard */
    for (uint32_t s = 0; s < c->nshards; s++) {
        struct ctl_shard *sh = &c->shards[s];
        if (ctl_leader_is_leading(&sh->leader, now)) {
            sh->releasing = true;
        } else if (sh->leader.leading && !sh->leader.reported_leading) {
            /* a term still fenced (taken at the last round): it never acted nor
             * was logged, and its end would not be either */
            ms->released++;
            LOG_INFO(SUB, "shard released: shard=%u holder=%s lease=%s/%s: %s (taken a round "
                          "ago, not acted on)", s, c->identity, c->cfg->leader.namespace_,
                     sh->name, why);
        }
        ctl_leader_stop(&sh->leader, why);
    }
    ctl_leader_stop(&ms->self, why);
    ctl_shards_log_transitions(c);
    c->released = true;
    if (ms->inflight || c->release_hold) {
        /* a list or renewals in flight carry the resourceVersions the releases
         * would: sent now, one of each pair would conflict, and a renewal that
         * won kept the shard held until it expired. Release after they answer;
         * and after the checkpoint saves, so the new owners read them. */
        c->release_pending = true;
        return;
    }
    ctl_shards_release_all(c);
}

void ctl_shards_release_resume(struct controller *c)
{
    if (c->release_pending && !c->release_hold && c->members->inflight == 0) {
        c->release_pending = false;
        ctl_shards_release_all(c);
    }
}

void ctl_shards_free(struct controller *c)
{
    ctl_elect_free(c);
    if (c->members) {
        xfree(c->members->m);
        xfree(c->members->holders);
        xfree(c->members->act);
        xfree(c->members);
    }
    xfree(c->shards);
    c->members = NULL;
    c->shards = NULL;
}

uint32_t ctl_shards_held(const struct controller *c)
{
    uint32_t n = 0;
    int64_t now = (int64_t)uv_now(c->loop);
    for (uint32_t s = 0; s < c->nshards; s++)
        n += ctl_leader_is_leading(&c->shards[s].leader, now);
    return n;
}

size_t ctl_shards_members(const struct controller *c)
{
    return c->members ? c->members->live : 0;
}

void ctl_shards_handovers(const struct controller *c, uint64_t out[3])
{
    const struct ctl_shard_members *ms = c->members;
    out[0] = ms ? ms->acquired : 0;
    out[1] = ms ? ms->released : 0;
    out[2] = ms ? ms->lost : 0;
}

bool ctl_acting_for(const struct controller *c, const char *ns, const char *name)
{
    if (!c->shards)
        return controller_leading(c);
    if (c->closing && c->released)
        return false;
    uint32_t s = shard_of(ns, name, c->nshards);
    uv_update_time(c->loop); /* right before a write: not the iteration's start */
    return ctl_leader_is_leading(&c->shards[s].leader, (int64_t)uv_now(c->loop));
}

bool ctl_handing_over(const struct controller *c, const char *ns, const char *name)
{
    /* closing: every Deployment is (acting stops at once) */
    return c->closing || (c->shards && c->shards[shard_of(ns, name, c->nshards)].handing);
}

size_t ctl_writes_inflight(const struct controller *c, int64_t shard)
{
    size_t n = 0;
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        for (const struct ctl_wl *w = c->table[b]; w; w = w->next)
            if ((w->scaling || w->status_inflight) &&
                (shard < 0 || !c->shards || shard_of(w->ns, w->name, c->nshards) == shard))
                n++;
    return n;
}

int64_t ctl_acting_left_ms(const struct controller *c, const char *ns, const char *name)
{
    if (!c->leader_elect)
        return 0; /* no election: no term, no deadline */
    if (!ctl_acting_for(c, ns, name))
        return -1; /* a write nothing allows: not to be sent */
    const struct ctl_leader *l =
        c->shards ? &c->shards[shard_of(ns, name, c->nshards)].leader : &c->leader;
    int64_t left = l->last_renew_ok_ms + l->renew_deadline_ms - (int64_t)uv_now(c->loop);
    return left > 0 ? left : 1;
}

bool ctl_shards_owner_live(const struct controller *c, const char *ns, const char *name)
{
    if (!c->shards)
        return false;
    return ctl_leader_held_live(&c->shards[shard_of(ns, name, c->nshards)].leader,
                                (int64_t)uv_now(c->loop), false);
}

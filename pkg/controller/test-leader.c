/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election between two instances over a simulated Lease store with
 * resourceVersion preconditions, on literal times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "controller/controller-int.h"

struct store {
    struct ctl_lease lease;
    int rv;
};

/* Apply one election round of l against the store; returns whether it leads. */
static bool round_(struct ctl_leader *l, struct store *s, int64_t now, bool api_up)
{
    if (!api_up)
        return ctl_leader_is_leading(l, now);
    struct ctl_lease out;
    enum ctl_leader_action a = ctl_leader_step(l, &s->lease, now, 1700000000000LL + now, &out);
    bool ok = false;
    if (a == CTL_LEADER_CREATE && !s->lease.exists) {
        ok = true;
    } else if (a == CTL_LEADER_UPDATE &&
               strcmp(out.resource_version, s->lease.resource_version) == 0) {
        ok = true; /* precondition holds */
    }
    if (a != CTL_LEADER_WAIT) {
        if (ok) {
            s->rv++;
            snprintf(out.resource_version, sizeof(out.resource_version), "%d", s->rv);
            s->lease = out;
        }
        ctl_leader_result(l, ok, &out, now, now);
    }
    return ctl_leader_is_leading(l, now);
}

static void test_one_leader_and_failover(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a, b;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    ctl_leader_init(&b, "b", 15000, 10000, 2000);
    int64_t t = 0;
    assert_true(round_(&a, &s, t, true));
    assert_false(round_(&b, &s, t + 1, true));
    /* both keep going: never two leaders */
    for (t = 2000; t < 60000; t += 2000) {
        bool la = round_(&a, &s, t, true), lb = round_(&b, &s, t + 1, true);
        assert_true(la && !lb);
    }
    assert_string_equal(s.lease.holder, "a");
    assert_int_equal(s.lease.transitions, 0);
    /* a dies at t=60000 (stops renewing). b takes over after the lease
     * duration as observed on b's clock, not before. */
    int64_t died = t;
    int64_t took = -1;
    for (; t < died + 30000; t += 2000) {
        if (round_(&b, &s, t, true)) {
            took = t;
            break;
        }
    }
    assert_true(took >= died + 15000 - 2000 && took <= died + 15000 + 2000);
    assert_string_equal(s.lease.holder, "b");
    assert_int_equal(s.lease.transitions, 1);
    /* a comes back: it sees b's valid lease and stays follower */
    assert_false(round_(&a, &s, t + 100, true));
}

static void test_leader_that_cannot_renew_stops(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    assert_true(round_(&a, &s, 0, true));
    /* API unreachable: still leading within the renew deadline, not after */
    assert_true(round_(&a, &s, 9999, false));
    assert_false(round_(&a, &s, 10000, false));
    /* conflicting write (someone else's update) also fails the renew */
    s.lease.resource_version[0] = 'x';
    struct ctl_lease out;
    assert_int_equal(ctl_leader_step(&a, &s.lease, 11000, 0, &out), CTL_LEADER_UPDATE);
    ctl_leader_result(&a, false, &out, 11000, 11000);
    assert_false(ctl_leader_is_leading(&a, 11000));
}

/* The renew deadline counts from when the renewal was sent, not from its
 * answer: the other replicas count the lease from when they saw it change,
 * so a late answer (sent at 4 s, answered at 9 s) leads until 14 s, not 19 s
 * (a split-brain window of up to the answer's delay). One answered a whole
 * renew deadline after its send is not acted on at all. */
static void test_deadline_counts_from_the_send(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    assert_true(round_(&a, &s, 0, true));
    struct ctl_lease out;
    assert_int_equal(ctl_leader_step(&a, &s.lease, 4000, 1700000004000LL, &out),
                     CTL_LEADER_UPDATE);
    s.rv++;
    snprintf(out.resource_version, sizeof(out.resource_version), "%d", s.rv);
    s.lease = out;
    ctl_leader_result(&a, true, &out, 9000, 4000);
    assert_true(ctl_leader_is_leading(&a, 13999));
    assert_false(ctl_leader_is_leading(&a, 14000));
    /* renewed again at 15 s, answered 10 s later: not leading on it */
    assert_int_equal(ctl_leader_step(&a, &s.lease, 15000, 1700000015000LL, &out),
                     CTL_LEADER_UPDATE);
    s.rv++;
    snprintf(out.resource_version, sizeof(out.resource_version), "%d", s.rv);
    s.lease = out;
    ctl_leader_result(&a, true, &out, 25000, 15000);
    assert_false(ctl_leader_is_leading(&a, 25000));
    /* but the lease holds what it wrote: a release starts from that record
     * (the one before would conflict), and no other holder is seen */
    struct ctl_lease rel;
    ctl_leader_release(&a, 1700000026000LL, &rel);
    assert_string_equal(rel.resource_version, s.lease.resource_version);
    assert_false(ctl_leader_held_live(&a, 26000, true));
    /* the next round renews it at once and leads again */
    assert_true(round_(&a, &s, 27000, true));
}

static void test_release_hands_over(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a, b;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    ctl_leader_init(&b, "b", 15000, 10000, 2000);
    assert_true(round_(&a, &s, 0, true));
    assert_false(round_(&b, &s, 1000, true));
    struct ctl_lease rel;
    ctl_leader_release(&a, 1700000002000LL, &rel);
    assert_string_equal(rel.holder, "");
    s.rv++;
    snprintf(rel.resource_version, sizeof(rel.resource_version), "%d", s.rv);
    s.lease = rel;
    /* b acquires on its next retry: a released lease is free at once */
    assert_true(round_(&b, &s, 3000, true));
}

/* Drain the pending leadership changes at now, as elect.c logs them. */
struct reports {
    int started, stopped;
    char why[200];
};

static void drain(struct ctl_leader *l, int64_t now, struct reports *r)
{
    enum ctl_leader_change ch;
    char why[200];
    while ((ch = ctl_leader_transition(l, now, why, sizeof(why))) != CTL_LEADER_SAME) {
        if (ch == CTL_LEADER_STARTED) {
            r->started++;
        } else {
            r->stopped++;
            snprintf(r->why, sizeof(r->why), "%s", why);
        }
    }
}

/* An API server outage: no callback runs while the renew deadline passes
 * (requests hang). The periodic check reports "stopped leading" exactly once,
 * with the reason, and the renewal after the outage is a new term. Before,
 * the loss was never reported and "became leader" came twice. */
static void test_lost_lease_is_reported_once(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    struct reports r = {0};
    assert_true(round_(&a, &s, 0, true));
    drain(&a, 0, &r);
    assert_int_equal(r.started, 1);
    assert_int_equal(r.stopped, 0);
    /* outage from t=0: the retry timer keeps checking every 2 s */
    for (int64_t t = 2000; t < 10000; t += 2000) {
        drain(&a, t, &r);
        assert_int_equal(r.stopped, 0);
        assert_true(ctl_leader_is_leading(&a, t));
    }
    drain(&a, 10000, &r);
    assert_int_equal(r.stopped, 1);
    assert_non_null(strstr(r.why, "renew deadline passed"));
    assert_non_null(strstr(r.why, "10000 ms"));
    assert_false(ctl_leader_is_leading(&a, 10000));
    for (int64_t t = 12000; t < 30000; t += 2000)
        drain(&a, t, &r);
    assert_int_equal(r.stopped, 1); /* once, not every check */
    assert_int_equal(r.started, 1);
    /* the API comes back: the lease is still ours, renewed as a new term */
    assert_true(round_(&a, &s, 30000, true));
    drain(&a, 30000, &r);
    assert_int_equal(r.started, 2);
    assert_int_equal(r.stopped, 1);
    drain(&a, 32000, &r);
    assert_int_equal(r.started, 2);
}

/* The lapse is reported even when nothing checks during the outage and the
 * first event after it is a successful renewal: stopped, then started. */
static void test_lapse_seen_at_the_late_renewal(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    struct reports r = {0};
    assert_true(round_(&a, &s, 0, true));
    drain(&a, 0, &r);
    /* a renewal read at t=9000 that is answered at t=12000 */
    struct ctl_lease out;
    assert_int_equal(ctl_leader_step(&a, &s.lease, 9000, 1700000009000LL, &out),
                     CTL_LEADER_UPDATE);
    ctl_leader_result(&a, true, &out, 12000, 12000);
    assert_true(ctl_leader_is_leading(&a, 12000));
    drain(&a, 12000, &r);
    assert_int_equal(r.stopped, 1);
    assert_non_null(strstr(r.why, "renew deadline passed"));
    assert_int_equal(r.started, 2);
    /* and a renewal in time is no change */
    assert_true(round_(&a, &s, 14000, true));
    drain(&a, 14000, &r);
    assert_int_equal(r.started, 2);
    assert_int_equal(r.stopped, 1);
}

/* Losing the lease to another holder, and shutting down, are reported once
 * each with their reason. */
static void test_other_reasons_reported(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    struct reports r = {0};
    assert_true(round_(&a, &s, 0, true));
    drain(&a, 0, &r);
    /* someone else wrote the lease (an operator, or a clock far off) */
    snprintf(s.lease.holder, sizeof(s.lease.holder), "b");
    s.rv++;
    snprintf(s.lease.resource_version, sizeof(s.lease.resource_version), "%d", s.rv);
    assert_false(round_(&a, &s, 2000, true));
    drain(&a, 2000, &r);
    drain(&a, 4000, &r);
    assert_int_equal(r.stopped, 1);
    assert_string_equal(r.why, "the lease is held by b");
    /* b lets it expire; a takes it back, then shuts down */
    assert_true(round_(&a, &s, 2000 + 15000, true));
    drain(&a, 17000, &r);
    assert_int_equal(r.started, 2);
    ctl_leader_stop(&a, "shutting down");
    assert_false(ctl_leader_is_leading(&a, 17001));
    drain(&a, 17001, &r);
    drain(&a, 40000, &r);
    assert_int_equal(r.stopped, 2);
    assert_string_equal(r.why, "shutting down");
    assert_int_equal(r.started, 2);
}

/* Watching a lease without contending (shards held by others, member
 * leases): the holder is valid until lease-duration passes on the local
 * clock without the record changing, whatever the holder's own clock says. */
static void test_observe_judges_expiry_on_the_local_clock(void **st)
{
    (void)st;
    struct ctl_leader w;
    ctl_leader_init(&w, "watcher", 15000, 10000, 2000);
    struct ctl_lease l;
    memset(&l, 0, sizeof(l));
    assert_null(ctl_leader_observe(&w, &l, 0)); /* absent */
    l.exists = true;
    snprintf(l.holder, sizeof(l.holder), "b");
    l.duration_s = 4;
    l.renew_unix_ms = 1; /* a holder clock far in the past changes nothing */
    snprintf(l.resource_version, sizeof(l.resource_version), "7");
    const char *h = ctl_leader_observe(&w, &l, 1000);
    assert_non_null(h);
    assert_string_equal(h, "b");
    assert_non_null(ctl_leader_observe(&w, &l, 4999)); /* seen at 1000, 4 s */
    assert_null(ctl_leader_observe(&w, &l, 5000));     /* expired */
    snprintf(l.resource_version, sizeof(l.resource_version), "8"); /* renewed */
    assert_non_null(ctl_leader_observe(&w, &l, 6000));
    assert_null(ctl_leader_observe(&w, &l, 10000));
    l.holder[0] = '\0'; /* released */
    snprintf(l.resource_version, sizeof(l.resource_version), "9");
    assert_null(ctl_leader_observe(&w, &l, 10001));
    /* the watcher never began a term */
    assert_false(ctl_leader_is_leading(&w, 10001));
}

/* A standby serves the leader's decisions while the leader's Lease is valid
 * on the standby's clock, its own once it has expired, been released, or
 * is its own. */
static void test_held_live_tells_a_standby_whom_to_serve(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a, b;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    ctl_leader_init(&b, "b", 15000, 10000, 2000);
    assert_false(ctl_leader_held_live(&b, 0, true)); /* nothing read yet */
    assert_true(round_(&a, &s, 0, true));
    assert_false(round_(&b, &s, 1, true));
    assert_true(ctl_leader_held_live(&b, 1, true));
    assert_true(ctl_leader_held_live(&a, 1, false));
    assert_false(ctl_leader_held_live(&a, 1, true)); /* its own */
    /* a stops renewing: b sees the record unchanged since t=1 */
    assert_false(round_(&b, &s, 2001, true));
    assert_true(ctl_leader_held_live(&b, 15000, true));
    assert_false(ctl_leader_held_live(&b, 15001, true)); /* observed + 15 s */
    /* b takes over: the holder is b itself */
    assert_true(round_(&b, &s, 15001, true));
    assert_false(ctl_leader_held_live(&b, 15002, true));
    assert_true(ctl_leader_held_live(&b, 15002, false));
    /* released: no holder */
    struct ctl_lease rel;
    ctl_leader_release(&b, 1700000020000LL, &rel);
    s.rv++;
    snprintf(rel.resource_version, sizeof(rel.resource_version), "%d", s.rv);
    s.lease = rel;
    ctl_leader_observe(&a, &s.lease, 20000);
    assert_false(ctl_leader_held_live(&a, 20000, true));
    assert_false(ctl_leader_held_live(&a, 20000, false));
}

/* A Lease deleted by hand: its holder stops at its next read, and another
 * replica waits out the holder's lease before it creates one (it created
 * one at its next read, and both acted until the holder's next read). */
static void test_deleted_lease(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a, b;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    ctl_leader_init(&b, "b", 15000, 10000, 2000);
    assert_true(round_(&a, &s, 0, true));
    assert_false(round_(&b, &s, 1, true));
    assert_true(round_(&a, &s, 2000, true));
    assert_false(round_(&b, &s, 2001, true));
    memset(&s.lease, 0, sizeof(s.lease)); /* kubectl delete lease */
    assert_false(round_(&b, &s, 3001, true)); /* a may still act: b waits */
    assert_false(s.lease.exists);
    /* a at its next read: its own lease gone, it stops, then creates again */
    struct ctl_lease out;
    assert_int_equal(ctl_leader_step(&a, &s.lease, 4000, 1700000004000LL, &out),
                     CTL_LEADER_CREATE);
    assert_false(ctl_leader_is_leading(&a, 4000));
    /* had a's create failed (a down), b creates once a's lease would have
     * expired (15 s after b last saw it renewed, at 2001) */
    for (int64_t t = 5001; t < 17001; t += 2000) {
        assert_false(round_(&b, &s, t, true));
        /* a shard's round, which observes before it plans, sees a held */
        assert_non_null(ctl_leader_observe(&b, &s.lease, t));
    }
    assert_true(round_(&b, &s, 17001, true));
    assert_string_equal(s.lease.holder, "b");
}

/* A Lease edited by hand past the API's int32 fields: clamped, not wrapped
 * to a negative duration (read as none) or a transition count that
 * overflows when taken over. */
static void test_lease_fields_clamped(void **st)
{
    (void)st;
    json_t *o = json_pack("{s:{s:s,s:I,s:I}}", "spec", "holderIdentity", "x",
                          "leaseDurationSeconds", (json_int_t)5000000000LL, "leaseTransitions",
                          (json_int_t)2147483647LL);
    struct ctl_lease l;
    ctl_lease_from_json(o, &l);
    json_decref(o);
    assert_int_equal(l.duration_s, INT32_MAX);
    assert_int_equal(l.transitions, INT32_MAX);
    struct ctl_leader a;
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    l.duration_s = 1;
    struct ctl_lease out;
    assert_int_equal(ctl_leader_step(&a, &l, 0, 1700000000000LL, &out), CTL_LEADER_WAIT);
    assert_int_equal(ctl_leader_step(&a, &l, 5000, 1700000005000LL, &out), CTL_LEADER_UPDATE);
    assert_int_equal(out.transitions, INT32_MAX);
}

/* A term begun with fence_new_terms holds the lease (its renewals go on) but
 * does not act, and is not reported started, until the caller unfences it;
 * a later term is fenced again. */
static void test_fenced_term_acts_once_unfenced(void **st)
{
    (void)st;
    struct store s;
    memset(&s, 0, sizeof(s));
    struct ctl_leader a;
    char why[160];
    ctl_leader_init(&a, "a", 15000, 10000, 2000);
    a.fence_new_terms = true;
    assert_false(round_(&a, &s, 0, true));
    assert_string_equal(s.lease.holder, "a"); /* held, */
    assert_int_equal(ctl_leader_transition(&a, 0, why, sizeof(why)), CTL_LEADER_SAME);
    assert_false(round_(&a, &s, 2000, true)); /* renewed, not acting */
    assert_int_equal(s.rv, 2);
    ctl_leader_unfence(&a);
    assert_true(ctl_leader_is_leading(&a, 2001));
    assert_int_equal(ctl_leader_transition(&a, 2001, why, sizeof(why)), CTL_LEADER_STARTED);
    assert_true(round_(&a, &s, 4000, true)); /* the same term goes on */
    /* it lapses (no renewal for the renew deadline); the next term is fenced */
    assert_false(round_(&a, &s, 14000, false));
    assert_int_equal(ctl_leader_transition(&a, 14000, why, sizeof(why)), CTL_LEADER_STOPPED);
    assert_false(round_(&a, &s, 16000, true));
    assert_int_equal(ctl_leader_transition(&a, 16000, why, sizeof(why)), CTL_LEADER_SAME);
    ctl_leader_unfence(&a);
    assert_true(ctl_leader_is_leading(&a, 16001));
}

/* Sharding turned on or off in a rollout: a single leader s (the Lease
 * "single") and a shard holder m (the Lease "shard-0"), each a term begun
 * fenced and unfenced only by a list sent after its write that shows no
 * holder of the other mode (elect.c, shards.c). In both orders the two never
 * act at once, and the single leader acts once m handed the shard back. */
static void test_single_and_shard_terms_exclude_each_other(void **st)
{
    (void)st;
    for (int order = 0; order < 2; order++) {
        struct store single, shard;
        memset(&single, 0, sizeof(single));
        memset(&shard, 0, sizeof(shard));
        struct ctl_leader s, m, s_sees_shard, m_sees_single;
        ctl_leader_init(&s, "s", 15000, 10000, 2000);
        ctl_leader_init(&m, "m", 15000, 10000, 2000);
        ctl_leader_init(&s_sees_shard, "s", 15000, 10000, 2000);
        ctl_leader_init(&m_sees_single, "m", 15000, 10000, 2000);
        s.fence_new_terms = m.fence_new_terms = true;
        int64_t t = 0;
        bool s_acted = false;
        if (order == 0) {
            /* m plans over a list that shows no single leader (t=0); s takes the
             * single Lease and lists: the shard is still free, s acts; then m's
             * write lands: m must not act on it */
            assert_null(ctl_leader_observe(&m_sees_single, &single.lease, t));
            round_(&s, &single, t + 10, true);
            assert_null(ctl_leader_observe(&s_sees_shard, &shard.lease, t + 20));
            ctl_leader_unfence(&s);
            round_(&m, &shard, t + 30, true);
            assert_string_equal(shard.lease.holder, "m");
            assert_true(ctl_leader_is_leading(&s, t + 30));
            assert_false(ctl_leader_is_leading(&m, t + 30));
        } else {
            /* m holds the shard and acts; then s takes the single Lease */
            round_(&m, &shard, t, true);
            assert_null(ctl_leader_observe(&m_sees_single, &single.lease, t + 10));
            ctl_leader_unfence(&m);
            assert_true(ctl_leader_is_leading(&m, t + 10));
            round_(&s, &single, t + 20, true);
            assert_false(ctl_leader_is_leading(&s, t + 20));
        }
        /* rounds every 2 s: s renews and (while fenced) lists the shard
         * Leases; m lists (the single Lease), then renews or hands back */
        for (t = 2000; t <= 40000; t += 2000) {
            round_(&s, &single, t, true);
            if (s.fenced && !ctl_leader_observe(&s_sees_shard, &shard.lease, t + 1))
                ctl_leader_unfence(&s);
            const char *solo = ctl_leader_observe(&m_sees_single, &single.lease, t + 500);
            if (solo && strcmp(shard.lease.holder, "m") == 0) {
                struct ctl_lease out;
                ctl_leader_stop(&m, "handed over to the single leader");
                ctl_leader_release(&m, 1700000000000LL + t + 500, &out);
                shard.rv++;
                snprintf(out.resource_version, sizeof(out.resource_version), "%d", shard.rv);
                shard.lease = out;
            } else if (!solo) {
                round_(&m, &shard, t + 500, true);
                if (m.fenced)
                    ctl_leader_unfence(&m);
            }
            for (int64_t u = t; u < t + 2000; u += 100) {
                bool sa = ctl_leader_is_leading(&s, u), ma = ctl_leader_is_leading(&m, u);
                assert_false(sa && ma);
                s_acted = s_acted || sa;
            }
        }
        assert_true(s_acted);
        assert_true(ctl_leader_is_leading(&s, 40000));
        assert_false(ctl_leader_is_leading(&m, 40000));
        assert_string_equal(shard.lease.holder, "");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_leader_and_failover),
        cmocka_unit_test(test_leader_that_cannot_renew_stops),
        cmocka_unit_test(test_deadline_counts_from_the_send),
        cmocka_unit_test(test_release_hands_over),
        cmocka_unit_test(test_lost_lease_is_reported_once),
        cmocka_unit_test(test_lapse_seen_at_the_late_renewal),
        cmocka_unit_test(test_other_reasons_reported),
        cmocka_unit_test(test_observe_judges_expiry_on_the_local_clock),
        cmocka_unit_test(test_held_live_tells_a_standby_whom_to_serve),
        cmocka_unit_test(test_deleted_lease),
        cmocka_unit_test(test_lease_fields_clamped),
        cmocka_unit_test(test_fenced_term_acts_once_unfenced),
        cmocka_unit_test(test_single_and_shard_terms_exclude_each_other),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

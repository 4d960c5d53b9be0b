/* SPDX-License-Identifier: Apache-2.0 */
/* The shard hash against fixed values (it must never change: Leases and
 * checkpoints are named by it) and the assignment as tables and as a
 * simulated cluster of members joining and dying. */
#include <setjmp.h>
#include <stdarg.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "shard/shard.h"

static void test_hash_is_fnv1a64_of_ns_slash_name(void **st)
{
    (void)st;
    /* values computed independently (Python) from the FNV-1a 64 definition */
    assert_true(shard_hash("", "") == 0xaf63a24c860189feULL);
    assert_true(shard_hash(NULL, NULL) == 0xaf63a24c860189feULL);
    assert_true(shard_hash("default", "model-a") == 0xc598e82b3d00cbe2ULL);
    assert_true(shard_hash("bench", "model-0000") == 0x0cad2802e21033d6ULL);
    assert_true(shard_hash("prod", "llama-70b") == 0xb3ce02cfc80c0e78ULL);
    assert_int_equal(shard_of("default", "model-a", 16), 2);
    assert_int_equal(shard_of("bench", "model-0000", 16), 6);
    assert_int_equal(shard_of("prod", "llama-70b", 16), 8);
    assert_int_equal(shard_of("prod", "llama-70b", 0), 0);
    /* the separator matters: a/bc and ab/c are different Deployments */
    assert_true(shard_hash("a", "bc") != shard_hash("ab", "c"));
}

/* Member Lease names: an identity that is already a DNS-1123 label keeps
 * its name; any change (case, a character, its length, a trailing '-')
 * adds the whole identity's hash, so two identities never share a name. */
static void test_member_lease_names(void **st)
{
    (void)st;
    char a[128], b[128];
    shard_member_lease_name("gs", "gpuscaler-7d9f-abcde", a, sizeof(a));
    assert_string_equal(a, "gs-member-gpuscaler-7d9f-abcde");
    shard_member_lease_name("gs", "abc", a, sizeof(a));
    shard_member_lease_name("gs", "abc-", b, sizeof(b));
    assert_string_equal(a, "gs-member-abc");
    assert_string_not_equal(a, b);
    assert_int_equal(strncmp(b, "gs-member-abc-", 14), 0);
    assert_int_equal(strlen(b), 14 + 8);
    shard_member_lease_name("gs", "ABC", b, sizeof(b));
    assert_string_not_equal(a, b);
    shard_member_lease_name("gs", "a.b", a, sizeof(a));
    shard_member_lease_name("gs", "a_b", b, sizeof(b));
    assert_string_not_equal(a, b);
    shard_member_lease_name("gs", "-", a, sizeof(a));
    assert_int_equal(strlen(a), strlen("gs-member-") + 8);
}

static void test_hash_spreads_evenly(void **st)
{
    (void)st;
    uint32_t count[16] = {0};
    char name[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof(name), "model-%04d", i);
        count[shard_of("bench", name, 16)]++;
    }
    for (int s = 0; s < 16; s++) /* 187.5 each: within +-20 % */
        assert_true(count[s] > 150 && count[s] < 225);
}

static void test_target_splits_by_identity_order(void **st)
{
    (void)st;
    const char *m[] = {"c", "a", "b"};
    assert_int_equal(shard_target(m, 3, "a", 16), 6);
    assert_int_equal(shard_target(m, 3, "b", 16), 5);
    assert_int_equal(shard_target(m, 3, "c", 16), 5);
    /* who is counted even when not listed yet */
    assert_int_equal(shard_target(m, 2, "z", 16), 5);
    assert_int_equal(shard_target(NULL, 0, "a", 16), 16);
    /* more members than shards: some hold none */
    assert_int_equal(shard_target(m, 3, "c", 2), 0);
    assert_int_equal(shard_target(m, 3, "a", 2), 1);
}

struct plan_case {
    const char *what;
    const char *self;
    const char *members[4];
    size_t nmembers;
    const char *holders[8];   /* 8 shards */
    const char *expect;       /* one letter per shard: . idle, k keep, a acquire, r release */
};

static const struct plan_case cases[] = {
    {"alone and nothing held: take all", "a", {"a"}, 1,
     {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL}, "aaaaaaaa"},
    {"alone, holding all: keep", "a", {"a"}, 1,
     {"a", "a", "a", "a", "a", "a", "a", "a"}, "kkkkkkkk"},
    {"a peer holds everything validly: never take", "a", {"a", "b"}, 2,
     {"b", "b", "b", "b", "b", "b", "b", "b"}, "........"},
    {"at target with a short peer and no surplus: keep", "a", {"a", "b"}, 2,
     {"a", "a", "a", "a", NULL, NULL, NULL, NULL}, "kkkk...."},
    {"another member joined: release the surplus", "a", {"a", "b"}, 2,
     {"a", "a", "a", "a", "a", "a", "a", "a"}, NULL},
    {"one over target, the peer one short: release the least preferred one", "a", {"a", "b"}, 2,
     {"a", "a", "a", "a", "a", "b", "b", "b"}, "kkkkr..."},
    {"a holder died (its leases expired): take up to target", "a", {"a", "b"}, 2,
     {"a", "a", "a", NULL, NULL, "b", "b", "b"}, NULL},
    {"a non-member's valid lease is left alone", "a", {"a"}, 1,
     {"gone", "gone", "a", "a", NULL, NULL, NULL, NULL}, "..kkaaaa"},
};

static void test_plan_table(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct plan_case *c = &cases[i];
        struct shard_view v = {c->self, c->members, c->nmembers, 8, c->holders};
        enum shard_action out[8];
        assert_int_equal(shard_plan(&v, out), 0);
        char got[9] = {0};
        int n[4] = {0};
        for (int s = 0; s < 8; s++) {
            got[s] = ".kar"[out[s]];
            n[out[s]]++;
        }
        if (c->expect) {
            if (strcmp(got, c->expect) != 0)
                fail_msg("%s: got %s, want %s", c->what, got, c->expect);
        } else if (i == 4) {
            /* 8 held, target 4: release exactly 4, keep 4 */
            assert_int_equal(n[SHARD_RELEASE], 4);
            assert_int_equal(n[SHARD_KEEP], 4);
        } else {
            /* 3 held, target 4, 2 free: acquire 1 */
            assert_int_equal(n[SHARD_ACQUIRE], 1);
            assert_int_equal(n[SHARD_KEEP], 3);
        }
    }
}

static void test_plan_rejects_bad_views(void **st)
{
    (void)st;
    const char *h[2] = {NULL, NULL};
    enum shard_action out[2] = {SHARD_KEEP, SHARD_KEEP};
    struct shard_view v = {"a", NULL, 0, 0, h};
    assert_int_equal(shard_plan(&v, out), -EINVAL);
    v.nshards = SHARD_MAX + 1;
    assert_int_equal(shard_plan(&v, out), -EINVAL);
    v.nshards = 2;
    v.self = NULL;
    assert_int_equal(shard_plan(&v, out), -EINVAL);
    assert_int_equal(shard_plan(NULL, out), -EINVAL);
    assert_int_equal(out[0], SHARD_KEEP); /* nothing written */
}

/* ---- a simulated cluster: rounds in which each live member plans against
 * the leases as they are and applies its own actions (a take of a shard
 * someone took meanwhile in the same round fails, as the resourceVersion
 * precondition would make it). */

#define NS 16
#define NM 4

struct sim {
    const char *ids[NM];
    bool live[NM];
    const char *holder[NS];
};

static size_t live_members(const struct sim *s, const char **m)
{
    size_t n = 0;
    for (int i = 0; i < NM; i++)
        if (s->live[i])
            m[n++] = s->ids[i];
    return n;
}

/* one round; returns how many leases changed hands */
static int sim_round(struct sim *s)
{
    int changes = 0;
    for (int i = 0; i < NM; i++) {
        if (!s->live[i])
            continue;
        const char *m[NM];
        size_t n = live_members(s, m);
        struct shard_view v = {s->ids[i], m, n, NS, s->holder};
        enum shard_action out[NS];
        assert_int_equal(shard_plan(&v, out), 0);
        for (int k = 0; k < NS; k++) {
            if (out[k] == SHARD_ACQUIRE && !s->holder[k]) {
                s->holder[k] = s->ids[i];
                changes++;
            } else if (out[k] == SHARD_RELEASE) {
                assert_string_equal(s->holder[k], s->ids[i]);
                s->holder[k] = NULL;
                changes++;
            }
        }
    }
    return changes;
}

static void sim_settle(struct sim *s, int max_rounds)
{
    int r = 0;
    while (sim_round(s) > 0)
        assert_true(++r < max_rounds);
}

static void assert_balanced(const struct sim *s)
{
    const char *m[NM];
    size_t n = live_members(s, m);
    for (size_t i = 0; i < n; i++) {
        uint32_t held = 0;
        for (int k = 0; k < NS; k++)
            held += s->holder[k] && strcmp(s->holder[k], m[i]) == 0;
        assert_int_equal(held, shard_target(m, n, m[i], NS));
    }
    for (int k = 0; k < NS; k++)
        assert_non_null(s->holder[k]);
}

static void test_cluster_converges_on_join_and_death(void **st)
{
    (void)st;
    struct sim s = {{"gpuscaler-0", "gpuscaler-1", "gpuscaler-2", "gpuscaler-3"}, {0}, {0}};
    s.live[0] = true;
    sim_settle(&s, 4);
    assert_balanced(&s);
    /* a second and a third join: surplus released, then taken */
    s.live[1] = s.live[2] = true;
    sim_settle(&s, 6);
    assert_balanced(&s);
    /* nothing moves once balanced */
    assert_int_equal(sim_round(&s), 0);
    /* gpuscaler-1 dies: its leases expire (free), the others take them */
    s.live[1] = false;
    for (int k = 0; k < NS; k++)
        if (s.holder[k] && strcmp(s.holder[k], "gpuscaler-1") == 0)
            s.holder[k] = NULL;
    assert_int_equal(sim_round(&s) > 0, true);
    assert_balanced(&s); /* in one round */
    /* and a fourth joins */
    s.live[3] = true;
    sim_settle(&s, 6);
    assert_balanced(&s);
}

/* Only the names shard Leases are written under parse: the controller's
 * rounds and the single leader's wait for shard Leases both read them. */
static void test_lease_number(void **st)
{
    (void)st;
    assert_int_equal(shard_lease_number("gs-0", "gs", 16), 0);
    assert_int_equal(shard_lease_number("gs-15", "gs", 16), 15);
    assert_int_equal(shard_lease_number("gs-1023", "gs", 1024), 1023);
    assert_int_equal(shard_lease_number("gs-16", "gs", 16), -1);  /* beyond the count */
    assert_int_equal(shard_lease_number("gs-07", "gs", 16), -1);  /* not as written */
    assert_int_equal(shard_lease_number("gs-+7", "gs", 16), -1);
    assert_int_equal(shard_lease_number("gs--7", "gs", 16), -1);
    assert_int_equal(shard_lease_number("gs-7x", "gs", 16), -1);
    assert_int_equal(shard_lease_number("gs-", "gs", 16), -1);
    assert_int_equal(shard_lease_number("gs", "gs", 16), -1);
    assert_int_equal(shard_lease_number("gs-10000", "gs", 1024), -1);
    assert_int_equal(shard_lease_number("gs-member-a", "gs", 16), -1);
    assert_int_equal(shard_lease_number("gsx-1", "gs", 16), -1);
    assert_int_equal(shard_lease_number("gs-1", "g", 16), -1); /* "g" then "s-1" */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_is_fnv1a64_of_ns_slash_name),
        cmocka_unit_test(test_hash_spreads_evenly),
        cmocka_unit_test(test_member_lease_names),
        cmocka_unit_test(test_target_splits_by_identity_order),
        cmocka_unit_test(test_plan_table),
        cmocka_unit_test(test_plan_rejects_bad_views),
        cmocka_unit_test(test_cluster_converges_on_join_and_death),
        cmocka_unit_test(test_lease_number),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

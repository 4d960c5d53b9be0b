/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election between two instances over a simulated Lease store with
 * resourceVersion preconditions, on literal times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
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
        ctl_leader_result(l, ok, &out, now);
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
    ctl_leader_result(&a, false, &out, 11000);
    assert_false(ctl_leader_is_leading(&a, 11000));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_leader_and_failover),
        cmocka_unit_test(test_leader_that_cannot_renew_stops),
        cmocka_unit_test(test_release_hands_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

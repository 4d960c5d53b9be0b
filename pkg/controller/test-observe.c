/* SPDX-License-Identifier: Apache-2.0 */
/* The observe stage's backlog samples: the growth of running + waiting
 * requests that turns completions into arrivals, on ticks that come a few
 * ms late as a timer's do; and which pods are stalled. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "controller/controller-int.h"
#include "kube/kube.h"

#define TICK 5000 /* the decision interval */

/* Ticks of 5 s that each come 1 ms later than the previous one: the backlog
 * grows by 8 requests a second from t = 10 s (a 3x step on a saturated
 * replica). */
static struct ctl_wl *ticks(int n, int64_t *now, double *bl)
{
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    for (int k = 0; k < n; k++) {
        *now = k * (TICK + 1);
        *bl = *now > 10000 ? 8.0 * (double)(*now - 10000) / 1000.0 : 2;
        ctl_backlog_push(w, *now, *bl);
    }
    return w;
}

/* Over one decision interval the growth counts from the previous tick, a
 * decision interval and 1 ms ago (without the slack it counted nothing, and
 * a step's first tick saw completions alone). */
static void test_growth_since_the_previous_tick(void **state)
{
    (void)state;
    int64_t now;
    double bl;
    struct ctl_wl *w = ticks(4, &now, &bl); /* ticks at 0, 5.001, 10.002, 15.003 s */
    double g = ctl_backlog_growth(w, now, TICK, TICK / 2, bl);
    /* from 10.002 s (0.016 requests) to 15.003 s (40.024): 8 req/s */
    assert_true(fabs(g - 8.0) < 1e-6);
    /* with no slack the previous tick is out of the window: no growth */
    assert_true(ctl_backlog_growth(w, now, TICK, 0, bl) == 0);
    /* a window of two intervals counts back two ticks, to 5.001 s (2 queued) */
    g = ctl_backlog_growth(w, now, 2 * TICK, TICK / 2, bl);
    assert_true(fabs(g - (bl - 2) / 10.002) < 1e-6);
    free(w);
}

/* The sample pushed now does not count against itself; a time not after
 * the newest sample's is ignored; without an older sample there is no
 * growth. */
static void test_growth_edges(void **state)
{
    (void)state;
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    assert_true(ctl_backlog_growth(w, 1000, TICK, TICK / 2, 50) == 0);
    ctl_backlog_push(w, 1000, 10);
    assert_true(ctl_backlog_growth(w, 1000, TICK, TICK / 2, 10) == 0);
    ctl_backlog_push(w, 1000, 99); /* same time: ignored */
    ctl_backlog_push(w, 500, 99);  /* older: ignored */
    assert_int_equal(w->bl_n, 1);
    ctl_backlog_push(w, 6000, 20);
    assert_true(fabs(ctl_backlog_growth(w, 6000, TICK, TICK / 2, 20) - 2.0) < 1e-9);
    /* a fall is negative growth: the completions count it */
    assert_true(fabs(ctl_backlog_growth(w, 6000, TICK, TICK / 2, 0) + 2.0) < 1e-9);
    /* the ring keeps the newest CTL_BACKLOG_SAMPLES */
    for (int k = 0; k < 2 * CTL_BACKLOG_SAMPLES; k++)
        ctl_backlog_push(w, 7000 + k * 1000LL, k);
    assert_int_equal(w->bl_n, CTL_BACKLOG_SAMPLES);
    int64_t last = 7000 + (2 * CTL_BACKLOG_SAMPLES - 1) * 1000LL;
    assert_true(fabs(ctl_backlog_growth(w, last, 3000, 500, 2 * CTL_BACKLOG_SAMPLES - 1) - 1.0) <
                1e-9);
    free(w);
}

/* A pod is stalled once it has been not ready for stall_ms since the latest
 * of its creation, scheduling and Ready change, or at once when a container
 * cannot start; ready, deleting, finished or GPU-unschedulable pods never
 * are. */
static void test_pod_stalled(void **state)
{
    (void)state;
    const int64_t stall = 600000, t0 = 1700000000000;
    struct kube_pod p = {.phase = KUBE_POD_RUNNING, .created_ms = t0};
    assert_false(ctl_pod_stalled(&p, t0 + stall - 1, stall));
    assert_true(ctl_pod_stalled(&p, t0 + stall, stall)); /* a crash loop */
    /* scheduled late, or ready until lately: counted from then */
    p.scheduled_ms = t0 + 60000;
    assert_false(ctl_pod_stalled(&p, t0 + stall, stall));
    assert_true(ctl_pod_stalled(&p, t0 + 60000 + stall, stall));
    p.ready_transition_ms = t0 + 120000;
    assert_false(ctl_pod_stalled(&p, t0 + 60000 + stall, stall));
    assert_true(ctl_pod_stalled(&p, t0 + 120000 + stall, stall));
    const int64_t later = t0 + 10 * stall;
    /* Pending on a node (an image that does not pull) stalls too */
    p.phase = KUBE_POD_PENDING;
    assert_true(ctl_pod_stalled(&p, later, stall));
    /* ready, deleting, waiting for a GPU, finished: never */
    struct kube_pod q = p;
    q.ready = true;
    assert_false(ctl_pod_stalled(&q, later, stall));
    q = p;
    q.deleting = true;
    assert_false(ctl_pod_stalled(&q, later, stall));
    q = p;
    q.unschedulable_gpu = KUBE_GPU_NVIDIA;
    assert_false(ctl_pod_stalled(&q, later, stall));
    q = p;
    q.phase = KUBE_POD_FAILED;
    assert_false(ctl_pod_stalled(&q, later, stall));
    /* no time known, or no limit: never */
    q = (struct kube_pod){.phase = KUBE_POD_RUNNING};
    assert_false(ctl_pod_stalled(&q, later, stall));
    assert_false(ctl_pod_stalled(&p, later, 0));
    /* a container that cannot start (a crash loop, an image that will not
     * pull): stalled at once, whatever the time; unless deleting or finished */
    q = (struct kube_pod){.phase = KUBE_POD_RUNNING, .created_ms = t0,
                          .failing = KUBE_FAILING_CRASH_LOOP};
    assert_true(ctl_pod_stalled(&q, t0 + 1, stall));
    assert_true(ctl_pod_stalled(&q, t0 + 1, 0));
    q.phase = KUBE_POD_PENDING;
    q.failing = KUBE_FAILING_IMAGE_PULL;
    assert_true(ctl_pod_stalled(&q, t0 + 1, stall));
    q.deleting = true;
    assert_false(ctl_pod_stalled(&q, t0 + 1, stall));
    q.deleting = false;
    q.phase = KUBE_POD_FAILED;
    assert_false(ctl_pod_stalled(&q, t0 + 1, stall));
    q.phase = KUBE_POD_RUNNING;
    q.ready = true; /* came back */
    assert_false(ctl_pod_stalled(&q, t0 + 1, stall));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth_since_the_previous_tick),
        cmocka_unit_test(test_growth_edges),
        cmocka_unit_test(test_pod_stalled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* policy internals shared by the act stage (policy.c) and the explanations
 * (explain.c); no other module includes this file. */
#ifndef GPUSCALER_POLICY_INT_H
#define GPUSCALER_POLICY_INT_H

#include "policy.h"

/* What a tick works from, once the metrics are known to be good. */
struct policy_tick {
    const struct policy_config *cfg;
    const struct policy_input *in;
    int64_t now;
    int32_t cur, ready, lo, hi;
    int32_t unsched;  /* replicas asked for that cannot be scheduled (in [0, cur]) */
    int32_t stalled;  /* placed, not ready for POLICY_STALL_COLD_STARTS cold starts */
    int32_t starting; /* placed but not ready yet: cur - unsched - stalled - ready, >= 0 */
    double gpus, cap;
    struct policy_demand dem;
    struct policy_sizing sz;
    struct policy_sizing sz_in; /* sz, POLICY_SCALE_IN_MARGIN below: the scale-in size */
    int64_t need_now, need_fc, need_likely;
    int64_t need_out; /* the wider of the learned and the model's upper plan, sized */
    double outer_rps; /* ... and its rate */
    int64_t floor;    /* replicas scale-in may go down to */
    bool plan;        /* a trusted plan is in use */
    bool plan_out_ok; /* ... and may scale out (not a level-only plan of falling load) */
    bool above, below, lat_above, queue_high;
    bool idle;      /* no arrivals and no queue */
    bool wake;      /* at 0 replicas (min-replicas 0) and requests arrive: scale out now */
    bool expects;   /* a seasonal plan's likely peak makes a request within the look-ahead */
    bool zero_ok;   /* idle for scale-in-after and no such plan: nothing needs a replica */
    bool none_ready; /* the hysteresis rule's scale-in held: no replica ready to measure */
    bool floors_short; /* floors measured for less than the stabilization window (since
                          the first tick, or since metrics came back) */
    /* scale-in would reach 0, but: */
    enum { ZERO_WAIT_NONE, ZERO_WAIT_IDLE, ZERO_WAIT_COMING } zero_wait;
    /* ZERO_WAIT_IDLE: before scale-in-after of idleness; ZERO_WAIT_COMING: while
     * a replica starts or waits for a GPU */
};

/** Word out->explain for a decision on good metrics (reason, desired, want
 *  and rule already set). */
void policy_explain(const struct policy_tick *t, const struct policy_state *st,
                    struct policy_decision *out);

/** Word out->explain for a decision on missing or stale metrics. */
void policy_explain_stale(const struct policy_config *cfg, const struct policy_input *in,
                          struct policy_decision *out);

#endif

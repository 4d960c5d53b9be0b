/* SPDX-License-Identifier: Apache-2.0 */
/* controller-int: internals shared by the controller's files (not a public API).
 *
 * Leader election: Lease-based leader election as client-go's
 * leaderelection package does it, as a pure state machine: the caller reads
 * the Lease, asks ctl_leader_step() what to write, writes it (with the read
 * resourceVersion as precondition) and reports the outcome. Time is passed
 * in; expiry is judged on the local clock from when the record was last seen
 * to change (client-go's observedTime), never from the other holder's clock. */
#ifndef GPUSCALER_CONTROLLER_INT_H
#define GPUSCALER_CONTROLLER_INT_H

#include <stdbool.h>
#include <stdint.h>

/** The fields of a coordination.k8s.io/v1 Lease that election uses. */
struct ctl_lease {
    bool exists;
    char holder[128];        /**< spec.holderIdentity, "" when released */
    int32_t duration_s;      /**< spec.leaseDurationSeconds */
    int64_t acquire_unix_ms; /**< spec.acquireTime */
    int64_t renew_unix_ms;   /**< spec.renewTime */
    int32_t transitions;     /**< spec.leaseTransitions */
    char resource_version[64];
};

struct ctl_leader {
    char identity[128];
    int64_t lease_duration_ms, renew_deadline_ms, retry_period_ms;
    bool leading;
    int64_t last_renew_ok_ms;   /**< local time of the last successful write as leader */
    struct ctl_lease observed;  /**< the record last read */
    int64_t observed_ms;        /**< local time the record last changed */
};

enum ctl_leader_action {
    CTL_LEADER_WAIT,   /**< someone else holds a valid lease: do nothing */
    CTL_LEADER_CREATE, /**< no lease: create *out */
    CTL_LEADER_UPDATE, /**< acquire or renew: update with *out (resourceVersion set) */
};

void ctl_leader_init(struct ctl_leader *l, const char *identity, int64_t lease_duration_ms,
                     int64_t renew_deadline_ms, int64_t retry_period_ms);

/**
 * One election round at local time now_ms with the lease as just read
 * (cur->exists false when absent). unix_now_ms stamps acquire/renew times.
 */
enum ctl_leader_action ctl_leader_step(struct ctl_leader *l, const struct ctl_lease *cur,
                                       int64_t now_ms, int64_t unix_now_ms,
                                       struct ctl_lease *out);

/** Report whether the write step asked for succeeded. */
void ctl_leader_result(struct ctl_leader *l, bool ok, const struct ctl_lease *written,
                       int64_t now_ms);

/**
 * True while this instance may act: it holds the lease and renewed it
 * within renew_deadline. A leader that cannot renew stops acting at once.
 */
bool ctl_leader_is_leading(const struct ctl_leader *l, int64_t now_ms);

/** The lease to write on shutdown to hand over at once (holder "", 1 s). */
void ctl_leader_release(const struct ctl_leader *l, int64_t unix_now_ms, struct ctl_lease *out);

#endif

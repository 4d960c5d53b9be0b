/* SPDX-License-Identifier: Apache-2.0 */
/* controller/leader: the pure leader-election state machine (see leader.h),
 * following client-go's tools/leaderelection tryAcquireOrRenew. */
#include "controller-int.h"

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

static bool same_record(const struct ctl_lease *a, const struct ctl_lease *b)
{
    return a->exists == b->exists && strcmp(a->holder, b->holder) == 0 &&
           a->renew_unix_ms == b->renew_unix_ms && a->transitions == b->transitions &&
           strcmp(a->resource_version, b->resource_version) == 0;
}

enum ctl_leader_action ctl_leader_step(struct ctl_leader *l, const struct ctl_lease *cur,
                                       int64_t now_ms, int64_t unix_now_ms,
                                       struct ctl_lease *out)
{
    memset(out, 0, sizeof(*out));
    out->exists = true;
    snprintf(out->holder, sizeof(out->holder), "%s", l->identity);
    out->duration_s = (int32_t)((l->lease_duration_ms + 999) / 1000);
    out->renew_unix_ms = unix_now_ms;
    out->acquire_unix_ms = unix_now_ms;

    if (!cur->exists) {
        l->observed = *cur;
        l->observed_ms = now_ms;
        return CTL_LEADER_CREATE;
    }
    if (!same_record(&l->observed, cur)) {
        l->observed = *cur;
        l->observed_ms = now_ms;
    }
    bool ours = strcmp(cur->holder, l->identity) == 0;
    int64_t dur = cur->duration_s > 0 ? (int64_t)cur->duration_s * 1000 : l->lease_duration_ms;
    bool expired = l->observed_ms + dur <= now_ms;
    if (!ours && cur->holder[0] && !expired) {
        l->leading = false;
        return CTL_LEADER_WAIT;
    }
    snprintf(out->resource_version, sizeof(out->resource_version), "%s", cur->resource_version);
    if (ours) {
        out->acquire_unix_ms = cur->acquire_unix_ms;
        out->transitions = cur->transitions;
    } else {
        out->transitions = cur->transitions + 1;
    }
    return CTL_LEADER_UPDATE;
}

void ctl_leader_result(struct ctl_leader *l, bool ok, const struct ctl_lease *written,
                       int64_t now_ms)
{
    if (!ok) {
        /* leading lapses by itself once renew_deadline passes */
        return;
    }
    l->leading = true;
    l->last_renew_ok_ms = now_ms;
    l->observed = *written;
    l->observed_ms = now_ms;
}

bool ctl_leader_is_leading(const struct ctl_leader *l, int64_t now_ms)
{
    return l->leading && now_ms - l->last_renew_ok_ms < l->renew_deadline_ms;
}

void ctl_leader_release(const struct ctl_leader *l, int64_t unix_now_ms, struct ctl_lease *out)
{
    *out = l->observed;
    out->holder[0] = '\0';
    out->duration_s = 1;
    out->renew_unix_ms = unix_now_ms;
    out->acquire_unix_ms = unix_now_ms;
}

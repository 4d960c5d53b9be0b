/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for pkg/promql's pure input surfaces: every input is
 * parsed as a Prometheus HTTP API answer (checking the result's invariants:
 * one series, at least one point, increasing times; nothing on error), as
 * the per-pod answer (pods sorted and unique, gauges and counters NaN or
 * finite >= 0, times in range, sample counts 0 or whole from 1,
 * the "seen" flags as the pods say; nothing on error) and, NUL-terminated,
 * expanded as a PromQL template (the output always fits and
 * never holds an unexpanded placeholder) and read as a window's duration. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "promql/promql.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct promql_series s;
    char err[200];
    int rc = promql_parse_response((const char *)data, size, &s, err, sizeof(err));
    if (rc == 0) {
        if (s.npoints == 0 || s.npoints > PROMQL_MAX_POINTS || !s.points)
            abort();
        for (size_t i = 1; i < s.npoints; i++)
            if (s.points[i].t_ms <= s.points[i - 1].t_ms)
                abort();
    } else if (s.points || s.npoints || rc > 0 || err[0] == '\0') {
        abort();
    }
    promql_series_free(&s);

    struct promql_pods pp;
    rc = promql_parse_pods((const char *)data, size, &pp, err, sizeof(err));
    if (rc == 0) {
        bool run = false, wait = false, counted = false;
        for (size_t i = 0; i < pp.n; i++) {
            const struct promql_pod *p = &pp.v[i];
            if (!p->name || !p->name[0] || (i > 0 && strcmp(pp.v[i - 1].name, p->name) >= 0))
                abort();
            if (!isnan(p->running) && !(isfinite(p->running) && p->running >= 0))
                abort();
            if (!isnan(p->waiting) && !(isfinite(p->waiting) && p->waiting >= 0))
                abort();
            if (!isnan(p->requests) && !(isfinite(p->requests) && p->requests >= 0))
                abort();
            if (p->at_ms < 0 || p->at_ms > 100000000000000LL || p->at_min_ms < 0 ||
                p->at_min_ms > 100000000000000LL || p->before_ms < 0 ||
                p->before_ms > 100000000000000LL)
                abort();
            if (p->samples != 0 && !(p->samples >= 1 && p->samples <= 1e9 &&
                                     p->samples == floor(p->samples)))
                abort();
            run = run || !isnan(p->running);
            wait = wait || !isnan(p->waiting);
            counted = counted || p->counted;
        }
        if (run != pp.running_seen || wait != pp.waiting_seen || counted != pp.counted_seen)
            abort();
    } else if (pp.v || pp.n || rc > 0 || err[0] == '\0') {
        abort();
    }
    promql_pods_free(&pp);

    if (size > 8192)
        return 0;
    char *tmpl = xstrndup((const char *)data, size);
    char out[512];
    rc = promql_expand(tmpl, "team-a", "chat.v1", "2m", out, sizeof(out), err, sizeof(err));
    if (rc == 0 && (strlen(out) >= sizeof(out) || strstr(out, "{{namespace}}") ||
                    strstr(out, "{{pods}}")))
        abort();
    if (rc != 0 && (out[0] != '\0' || err[0] == '\0'))
        abort();
    /* and as a window's duration: -1, or within the bound; a duration is accepted as a
     * window exactly when it is more than 0 */
    int64_t ms = promql_duration_ms(tmpl);
    if (ms < -1 || ms > PROMQL_DURATION_MAX_MS)
        abort();
    rc = promql_expand("x", "a", "b", tmpl, out, sizeof(out), err, sizeof(err));
    if ((rc == 0) != (ms > 0))
        abort();
    xfree(tmpl);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/quantity: values as Kubernetes quantities in the canonical form
 * apimachinery's resource.Quantity serialises (the `value` of an
 * ExternalMetricValueList item).
 *
 * A double is first written as its shortest decimal that reads back as the
 * same double (what Go's strconv.FormatFloat(v, 'f', -1, 64) prints), then
 * treated as resource.ParseQuantity treats that decimal string followed by
 * String(): digits finer than 1n are rounded away from zero to 1n, and the
 * canonical decimal-SI form is the largest suffix (n u m "" k M G T P E)
 * that keeps the mantissa an integer: 1500m, 3k, 1M, 124n. Everything after
 * the first step is exact integer arithmetic; no step depends on the
 * process locale. Served values are first rounded to milli-units
 * (extmetrics_quantity_milli). */
#include "extmetrics-int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const uint64_t pow10u[] = {
    1ULL,
    10ULL,
    100ULL,
    1000ULL,
    10000ULL,
    100000ULL,
    1000000ULL,
    10000000ULL,
    100000000ULL,
    1000000000ULL,
    10000000000ULL,
    100000000000ULL,
    1000000000000ULL,
    10000000000000ULL,
    100000000000000ULL,
    1000000000000000ULL,
    10000000000000000ULL,
    100000000000000000ULL,
    1000000000000000000ULL,
    10000000000000000000ULL,
};

/*
 * The shortest decimal m * 10^x (m with at most 17 digits) that reads back
 * as a, a finite positive double. "%.*e" gives the digits (its decimal
 * separator, whatever the locale makes it, is skipped); the check reads
 * "<m>e<x>", which has no separator, back with strtod.
 */
static void shortest(double a, uint64_t *m, int *x)
{
    for (int prec = 1; prec <= 17; prec++) {
        char buf[64], back[48];
        snprintf(buf, sizeof(buf), "%.*e", prec - 1, a);
        uint64_t digits = 0;
        int n = 0, e = 0;
        const char *p = buf;
        for (; *p && *p != 'e' && *p != 'E'; p++) {
            if (*p >= '0' && *p <= '9') {
                digits = digits * 10 + (uint64_t)(*p - '0');
                n++;
            }
        }
        if (*p)
            e = (int)strtol(p + 1, NULL, 10);
        int exp10 = e - (n - 1);
        snprintf(back, sizeof(back), "%" PRIu64 "e%d", digits, exp10);
        if (strtod(back, NULL) == a || prec == 17) {
            *m = digits;
            *x = exp10;
            return;
        }
    }
}

int extmetrics_quantity_format(double v, char *out, size_t outlen)
{
    if (!isfinite(v) || fabs(v) >= 9e15)
        return -EINVAL;
    int n;
    if (v == 0) {
        n = snprintf(out, outlen, "0");
    } else {
        uint64_t m;
        int x;
        shortest(fabs(v), &m, &x);
        if (x < -9) { /* finer than nano: round up (away from zero), as ParseQuantity does */
            int k = -9 - x;
            if (k >= (int)UTIL_ARRAY_LEN(pow10u))
                m = 1;
            else
                m = m / pow10u[k] + (m % pow10u[k] != 0);
            x = -9;
        }
        while (m % 10 == 0) {
            m /= 10;
            x++;
        }
        int r = ((x % 3) + 3) % 3; /* down to a multiple of 3: m keeps integral */
        m *= pow10u[r];
        x -= r;
        static const char *const si[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
        const char *sign = v < 0 ? "-" : "";
        if (x <= 18)
            n = snprintf(out, outlen, "%s%" PRIu64 "%s", sign, m, si[(x + 9) / 3]);
        else /* no decimal-SI suffix: apimachinery falls back to an exponent */
            n = snprintf(out, outlen, "%s%" PRIu64 "e%d", sign, m, x);
    }
    if (n < 0 || (size_t)n >= outlen)
        return -ENOSPC;
    return 0;
}

int extmetrics_quantity_milli(double v, char *out, size_t outlen)
{
    /* the nearest double to k/1000 reads back as k/1000's decimal; NaN, the
     * infinities and 9e15 and over stay what the format refuses */
    return extmetrics_quantity_format(round(v * 1000.0) / 1000.0, out, outlen);
}

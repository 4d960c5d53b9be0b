/* SPDX-License-Identifier: Apache-2.0 */
/* prom: PromQL's histogram_quantile() over one classic (le-bucketed) histogram.
 *
 * A transcription of bucketQuantile() in Prometheus' promql/quantile.go:
 * sort by upper bound, coalesce equal bounds, correct float-noise
 * non-monotonicity (relative 1e-12), force monotonicity, then interpolate
 * linearly inside the bucket that holds rank q * total. Works on a private
 * copy; the caller's arrays are not touched. Buckets whose bound is NaN are
 * dropped (PromQL never sees one). */
#include <math.h>
#include <stdlib.h>

#include "prom/prom.h"
#include "util/util.h"

struct bucket {
    double ub;
    double count;
};

static int bucket_cmp(const void *a, const void *b)
{
    double x = ((const struct bucket *)a)->ub, y = ((const struct bucket *)b)->ub;
    return (x > y) - (x < y);
}

double prom_histogram_quantile(double q, const double *le, const double *counts, size_t n)
{
    if (isnan(q))
        return NAN;
    if (q < 0)
        return -INFINITY;
    if (q > 1)
        return INFINITY;
    if (n == 0)
        return NAN;

    struct bucket stackb[64];
    struct bucket *b = n <= UTIL_ARRAY_LEN(stackb) ? stackb : xmalloc(n * sizeof(*b));
    double result = NAN;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(le[i]))
            b[m++] = (struct bucket){le[i], counts[i]};
    if (m == 0)
        goto out;
    /* Stable enough: equal bounds are summed right after, so order among them is moot. */
    qsort(b, m, sizeof(*b), bucket_cmp);
    if (!(isinf(b[m - 1].ub) && b[m - 1].ub > 0))
        goto out;

    /* coalesce equal upper bounds */
    size_t k = 0;
    for (size_t i = 1; i < m; i++) {
        if (b[i].ub == b[k].ub)
            b[k].count += b[i].count;
        else
            b[++k] = b[i];
    }
    m = k + 1;

    /* correct float precision errors */
    double prev = b[0].count;
    for (size_t i = 1; i < m; i++) {
        double curr = b[i].count;
        double delta = fabs(curr - prev);
        if (delta == 0)
            continue;
        if (delta / curr <= 1e-12)
            b[i].count = prev;
        else
            prev = curr;
    }
    /* force monotonicity */
    double max = b[0].count;
    for (size_t i = 1; i < m; i++) {
        if (b[i].count > max)
            max = b[i].count;
        else if (b[i].count < max)
            b[i].count = max;
    }

    if (m < 2)
        goto out;
    double observations = b[m - 1].count;
    if (observations == 0)
        goto out;
    double rank = q * observations;
    /* first i in [0, m-1) with count >= rank, else m-1 (sort.Search) */
    size_t lo = 0, hi = m - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (!(b[mid].count >= rank))
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t idx = lo;
    if (idx == m - 1) {
        result = b[m - 2].ub;
        goto out;
    }
    if (idx == 0 && b[0].ub <= 0) {
        result = b[0].ub;
        goto out;
    }
    double start = 0, end = b[idx].ub, count = b[idx].count;
    if (idx > 0) {
        start = b[idx - 1].ub;
        count -= b[idx - 1].count;
        rank -= b[idx - 1].count;
    }
    result = start + (end - start) * (rank / count);
out:
    if (b != stackb)
        xfree(b);
    return result;
}

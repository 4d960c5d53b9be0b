/* SPDX-License-Identifier: Apache-2.0 */
/* forecast/stores: the stores the plan's quantiles read (plan.c) and their
 * sorted copies.
 *
 * The stores are rings of the newest values, checkpointed in that order:
 * per phase bin and window length the window residuals (FC_RES_PER_BIN,
 * int16 in 1/FC_RES_SCALE of log), per window length the growth samples
 * and the realised window peaks (FC_WPEAKS floats). Each has an ascending
 * copy, kept in order as a value comes and the oldest goes (a search and a
 * memmove of at most 144 values), so that a quantile is an index, not a
 * selection over a copy of the ring at every closed bucket, which was about
 * a third of `bench-plan`. For the residuals the copy is of the three-bin
 * neighbourhood the next plans read, sorted afresh when it moves (once an
 * hour with a daily season). The copies are not checkpointed: a restore,
 * or the warm-up's rewrite of the residuals, sorts them again
 * (fc_stores_sort). 2.8 KB a forecaster. */
#include "forecast-int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int16_t fc_res_encode(double e)
{
    double v = round(e * FC_RES_SCALE);
    if (v > INT16_MAX)
        v = INT16_MAX;
    if (v < -INT16_MAX)
        v = -INT16_MAX;
    return (int16_t)v;
}

void fc_res_push(int16_t *ring, uint8_t *pos, uint8_t *len, double e)
{
    ring[*pos] = fc_res_encode(e);
    *pos = (uint8_t)((*pos + 1) % FC_RES_PER_BIN);
    if (*len < FC_RES_PER_BIN)
        (*len)++;
}

/* name(a, k, evict, gone, v): in the ascending a[0..k), take out one value
 * equal to `gone` when `evict` (it is there: it was stored), then put v in
 * its place in the order; returns the new count. One definition per element
 * type of the stores. */
#define SORTED_SWAP(name, T)                                                                   \
    static int name(T *a, int k, bool evict, T gone, T v)                                     \
    {                                                                                          \
        if (evict) {                                                                           \
            int i = 0;                                                                         \
            while (i < k && a[i] != gone)                                                      \
                i++;                                                                           \
            if (i < k) {                                                                       \
                memmove(a + i, a + i + 1, (size_t)(k - i - 1) * sizeof(*a));                  \
                k--;                                                                           \
            }                                                                                  \
        }                                                                                      \
        int j = k;                                                                             \
        while (j > 0 && a[j - 1] > v)                                                          \
            j--;                                                                               \
        memmove(a + j + 1, a + j, (size_t)(k - j) * sizeof(*a));                              \
        a[j] = v;                                                                              \
        return k + 1;                                                                          \
    }
SORTED_SWAP(sorted_swap_i16, int16_t)
SORTED_SWAP(sorted_swap_f, float)

static bool in_neighbourhood(int centre, int bin)
{
    int d = (bin - centre + FC_PHASES) % FC_PHASES;
    return d == 0 || d == 1 || d == FC_PHASES - 1;
}

/* A residual e for phase bin `bin` and window length h: its ring, and the
 * sorted neighbourhood when the bin is in it. */
void fc_store_res(struct forecast *f, int bin, int h, double e)
{
    int16_t *ring = f->res[bin][h];
    int at = f->res_pos[bin][h];
    bool full = f->res_len[bin][h] == FC_RES_PER_BIN;
    int16_t gone = ring[at];
    fc_res_push(ring, &f->res_pos[bin][h], &f->res_len[bin][h], e);
    if (f->nb_bin[h] >= 0 && in_neighbourhood(f->nb_bin[h], bin))
        f->nb_n[h] = (uint16_t)sorted_swap_i16(f->nb_sorted[h], f->nb_n[h], full, gone, ring[at]);
}

void fc_store_growth(struct forecast *f, int h, double e)
{
    int at = f->growth_pos[h], n = f->growth_len[h];
    bool full = n == FC_RES_PER_BIN;
    int16_t gone = f->growth[h][at];
    fc_res_push(f->growth[h], &f->growth_pos[h], &f->growth_len[h], e);
    sorted_swap_i16(f->growth_sorted[h], n, full, gone, f->growth[h][at]);
}

void fc_store_wpeak(struct forecast *f, int h, float m)
{
    bool full = f->wpeak_len[h] == FC_WPEAKS;
    float gone = f->wpeak[h][f->wpeak_pos[h]];
    sorted_swap_f(f->wpeak_sorted[h], f->wpeak_len[h], full, gone, m);
    f->wpeak[h][f->wpeak_pos[h]] = m;
    f->wpeak_pos[h] = (uint8_t)((f->wpeak_pos[h] + 1) % FC_WPEAKS);
    if (f->wpeak_len[h] < FC_WPEAKS)
        f->wpeak_len[h]++;
}

static int cmp_i16(const void *a, const void *b)
{
    int16_t x = *(const int16_t *)a, y = *(const int16_t *)b;
    return (x > y) - (x < y);
}

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void fc_stores_sort(struct forecast *f)
{
    for (int h = 0; h < FC_HORIZONS; h++) {
        f->nb_bin[h] = -1;
        memcpy(f->growth_sorted[h], f->growth[h], f->growth_len[h] * sizeof(int16_t));
        qsort(f->growth_sorted[h], f->growth_len[h], sizeof(int16_t), cmp_i16);
        memcpy(f->wpeak_sorted[h], f->wpeak[h], f->wpeak_len[h] * sizeof(float));
        qsort(f->wpeak_sorted[h], f->wpeak_len[h], sizeof(float), cmp_f);
    }
}

/* f->nb_sorted[h]: the residuals of phase bins bin - 1, bin and bin + 1,
 * ascending; sorted afresh when the neighbourhood moved, else kept by
 * fc_store_res(). */
void fc_store_neighbourhood(struct forecast *f, int h, int bin)
{
    if (f->nb_bin[h] == bin)
        return;
    int k = 0;
    for (int d = -1; d <= 1; d++) {
        int b = (bin + d + FC_PHASES) % FC_PHASES;
        memcpy(f->nb_sorted[h] + k, f->res[b][h], f->res_len[b][h] * sizeof(int16_t));
        k += f->res_len[b][h];
    }
    qsort(f->nb_sorted[h], (size_t)k, sizeof(int16_t), cmp_i16);
    f->nb_n[h] = (uint16_t)k;
    f->nb_bin[h] = (int16_t)bin;
}

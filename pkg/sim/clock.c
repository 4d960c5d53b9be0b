/* SPDX-License-Identifier: Apache-2.0 */
/* sim/clock: how the reports name a time on the trace's axis. A trace
 * recorded by `gpuscaler run --record` carries UNIX time, so its times are
 * shown as calendar dates and times in UTC ("2023-11-14 22:13 UTC"); a trace
 * on a relative clock (starting near 0) keeps "day 2 06:30", t = 0 taken as
 * midnight. Which one is decided once per report from the start of the
 * scored window, so every label of a report uses the same clock. */
#include "sim-int.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

bool sim_clock_absolute(double t0_s)
{
    return t0_s >= SIM_CLOCK_ABSOLUTE_FROM_S;
}

/* Whole days and second of the day of t (floor), for either clock. */
static void split_day(double t_s, long long *day, long long *sod)
{
    long long t = (long long)floor(t_s);
    long long d = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    *day = d;
    *sod = t - d * 86400;
}

static bool civil(long long day, struct tm *tm)
{
    time_t t = (time_t)(day * 86400);
    return gmtime_r(&t, tm) != NULL;
}

void sim_clock_time(double t_s, bool absolute, char *out, size_t len)
{
    long long d, sod;
    struct tm tm;
    split_day(t_s, &d, &sod);
    if (absolute && civil(d, &tm))
        snprintf(out, len, "%04d-%02d-%02d %02lld:%02lld UTC", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, sod / 3600, sod / 60 % 60);
    else
        snprintf(out, len, "day %lld %02lld:%02lld", d, sod / 3600, sod / 60 % 60);
}

void sim_clock_day(double t_s, bool absolute, char *out, size_t len)
{
    long long d, sod;
    struct tm tm;
    split_day(t_s, &d, &sod);
    if (absolute && civil(d, &tm))
        snprintf(out, len, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
    else
        snprintf(out, len, "day %lld", d);
}

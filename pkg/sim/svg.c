/* SPDX-License-Identifier: Apache-2.0 */
/* sim/svg: the --report chart, hand-written SVG meant to be looked at rather
 * than read: a summary line per policy, then four panels on one time axis:
 * demand against each policy's ready capacity, replicas asked for, p99
 * latency against the SLA (log scale) and a strip marking the intervals that
 * missed the SLA; with quantile-sweep, a fifth panel of what
 * forecast-quantile trades (GPU-hours against intervals over the SLA).
 * Series are reduced to one value per pixel column (mean for rates and
 * replicas, max for p99, any for misses) so that a week stays a small file.
 * Output depends only on the inputs. */
#include "sim-int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

#define W 1280
#define LEFT 84
#define RIGHT 36
#define PW (W - LEFT - RIGHT)
#define FONT "font-family=\"Helvetica, Arial, sans-serif\""

static const char *const colors[SIM_POLICY_COUNT] = {
    [SIM_PREDICTIVE] = "#2563eb",
    [SIM_REACTIVE] = "#f59e0b",
    [SIM_HPA] = "#7c3aed",
    [SIM_ORACLE] = "#059669",
    [SIM_STATIC_PEAK] = "#9f1239",
};
#define C_DEMAND "#9ca3af"
#define C_SLA "#dc2626"
#define C_GRID "#e5e7eb"
#define C_AXIS "#6b7280"
#define C_TEXT "#111827"
#define C_MUTED "#4b5563"

static void text(struct util_buf *b, double x, double y, const char *anchor, int size,
                 const char *color, const char *weight, const char *s)
{
    util_buf_printf(b,
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\" "
                    "fill=\"%s\" font-weight=\"%s\" " FONT ">",
                    x, y, anchor, size, color, weight);
    util_buf_put_xml(b, s);
    util_buf_puts(b, "</text>\n");
}

/* A "nice" step (1, 2 or 5 x 10^k) giving about n ticks over span. */
static double nice_step(double span, int n)
{
    if (!(span > 0))
        return 1;
    double raw = span / n;
    double p = pow(10, floor(log10(raw)));
    double f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static void fmt_num(double v, char *out, size_t len)
{
    if (fabs(v) >= 1e6)
        snprintf(out, len, "%gM", v / 1e6);
    else if (fabs(v) >= 1e4)
        snprintf(out, len, "%gk", v / 1e3);
    else
        snprintf(out, len, "%g", v);
}

/* The time axis: pixel columns over [t0, t1). */
struct taxis {
    double t0, t1;
};

static double tx(const struct taxis *ax, double t)
{
    return LEFT + (t - ax->t0) / (ax->t1 - ax->t0) * PW;
}

/* Per-pixel reduction of one policy's points. */
struct cols {
    double v[PW];
    bool have[PW];
};

enum field { F_DEMAND, F_DEMAND_MAX, F_CAPACITY, F_DESIRED, F_P99, F_MISS };

static void reduce(const struct taxis *ax, const struct sim_policy_result *x, enum field f,
                   double sla_ms, struct cols *c)
{
    double sum[PW];
    int n[PW];
    memset(sum, 0, sizeof(sum));
    memset(n, 0, sizeof(n));
    memset(c, 0, sizeof(*c));
    bool take_max = f == F_P99 || f == F_MISS || f == F_DEMAND_MAX;
    for (size_t i = 0; i < x->npoints; i++) {
        const struct sim_point *pt = &x->points[i];
        /* the columns of the interval's span, at least one: a short run's
         * intervals are wider than a column (they were drawn at their
         * start's column alone, and the last was never drawn) */
        double end = i + 1 < x->npoints ? x->points[i + 1].t_s : ax->t1;
        double from = (pt->t_s - ax->t0) / (ax->t1 - ax->t0) * PW;
        double to = (end - ax->t0) / (ax->t1 - ax->t0) * PW;
        int p0 = (int)floor(from), p1 = UTIL_MAX(p0 + 1, (int)ceil(to));
        double v = f == F_DEMAND || f == F_DEMAND_MAX ? pt->demand_rps
                   : f == F_CAPACITY ? pt->capacity_rps
                   : f == F_DESIRED  ? pt->desired
                   : f == F_P99      ? pt->p99_ms / 1000
                                     : (pt->p99_ms > sla_ms ? 1 : 0);
        for (int px = UTIL_MAX(p0, 0); px < UTIL_MIN(p1, PW); px++) {
            if (take_max) {
                if (!n[px] || v > sum[px])
                    sum[px] = v;
                n[px] = 1;
            } else {
                sum[px] += v;
                n[px]++;
            }
        }
    }
    for (int i = 0; i < PW; i++) {
        if (!n[i])
            continue;
        c->have[i] = true;
        c->v[i] = (f == F_P99 || f == F_MISS || f == F_DEMAND_MAX) ? sum[i] : sum[i] / n[i];
    }
}

struct yaxis {
    double top, h;    /* panel box */
    double lo, hi;    /* value range */
    bool log;
};

static double ty(const struct yaxis *y, double v)
{
    double f;
    if (y->log) {
        double lv = log10(v > y->lo ? v : y->lo);
        f = (lv - log10(y->lo)) / (log10(y->hi) - log10(y->lo));
    } else {
        f = (v - y->lo) / (y->hi - y->lo);
    }
    if (f < 0)
        f = 0;
    if (f > 1)
        f = 1;
    return y->top + y->h - f * y->h;
}

/* One line through every column that has a value. Columns without one are
 * bridged: with fewer intervals than pixel columns (a trace of a few hours)
 * most columns are empty, and breaking the line there would leave one-point
 * segments that draw nothing. */
static void polyline(struct util_buf *b, const struct yaxis *y, const struct cols *c,
                     const char *color, double width)
{
    bool open = false;
    for (int i = 0; i < PW; i++) {
        if (!c->have[i])
            continue;
        if (!open) {
            util_buf_printf(b,
                            "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" "
                            "stroke-linejoin=\"round\" stroke-opacity=\"0.9\" points=\"",
                            color, width);
            open = true;
        }
        util_buf_printf(b, "%d,%.1f ", LEFT + i, ty(y, c->v[i]));
    }
    if (open)
        util_buf_puts(b, "\"/>\n");
}

static void area(struct util_buf *b, const struct yaxis *y, const struct cols *c,
                 const char *color)
{
    int first = -1, last = -1;
    for (int i = 0; i < PW; i++)
        if (c->have[i]) {
            if (first < 0)
                first = i;
            last = i;
        }
    if (first < 0)
        return;
    double base = y->top + y->h;
    util_buf_printf(b,
                    "<path fill=\"%s\" fill-opacity=\"0.35\" stroke=\"none\" d=\"M%d,%.1f",
                    color, LEFT + first, base);
    double prev = ty(y, c->v[first]);
    for (int i = first; i <= last; i++) {
        if (c->have[i])
            prev = ty(y, c->v[i]);
        util_buf_printf(b, " L%d,%.1f", LEFT + i, prev);
    }
    util_buf_printf(b, " L%d,%.1f Z\"/>\n", LEFT + last, base);
}

/* Vertical grid and (when labels) the time labels under the panel. */
static void time_grid(struct util_buf *b, const struct taxis *ax, double top, double h,
                      bool labels)
{
    static const double steps[] = {60,    300,   600,   900,    1800,   3600,  7200,
                                   10800, 21600, 43200, 86400, 172800, 604800};
    double span = ax->t1 - ax->t0, step = steps[UTIL_ARRAY_LEN(steps) - 1];
    for (size_t i = 0; i < UTIL_ARRAY_LEN(steps); i++)
        if (span / steps[i] <= 14) {
            step = steps[i];
            break;
        }
    for (double t = ceil(ax->t0 / step) * step; t <= ax->t1 + 1e-6; t += step) {
        double x = tx(ax, t);
        long long ts = (long long)llround(t);
        long long sod = ((ts % 86400) + 86400) % 86400;
        bool midnight = sod == 0;
        util_buf_printf(b,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                        "stroke-width=\"%s\"/>\n",
                        x, top, x, top + h, midnight ? "#c7cbd1" : C_GRID, midnight ? "1.2" : "1");
        if (!labels)
            continue;
        char s[32];
        if (step >= 86400 || midnight) {
            /* a calendar date on a UNIX-time trace, else "day N" */
            sim_clock_day((double)ts, sim_clock_absolute(ax->t0), s, sizeof(s));
            text(b, x, top + h + 18, "middle", 12, C_TEXT, "bold", s);
        } else {
            snprintf(s, sizeof(s), "%02lld:%02lld", sod / 3600, sod / 60 % 60);
            text(b, x, top + h + 18, "middle", 12, C_MUTED, "normal", s);
        }
    }
}

static void y_grid(struct util_buf *b, const struct yaxis *y, const char *unit)
{
    char s[32];
    if (y->log) {
        static const double fine[] = {0.1, 0.2, 0.5, 1,   2,   5,    10,   20,  30,
                                      60,  120, 300, 600, 1200, 1800, 3600};
        static const double coarse[] = {0.1, 1, 10, 60, 600, 3600};
        size_t nfine = 0;
        for (size_t i = 0; i < UTIL_ARRAY_LEN(fine); i++)
            nfine += fine[i] >= y->lo * 0.9999 && fine[i] <= y->hi * 1.0001;
        const double *t = nfine > 8 ? coarse : fine;
        size_t nt = nfine > 8 ? UTIL_ARRAY_LEN(coarse) : UTIL_ARRAY_LEN(fine);
        for (size_t i = 0; i < nt; i++) {
            double v = t[i];
            if (v < y->lo * 0.9999 || v > y->hi * 1.0001)
                continue;
            double yy = ty(y, v);
            util_buf_printf(b,
                            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                            LEFT, yy, LEFT + PW, yy, C_GRID);
            if (v < 1)
                snprintf(s, sizeof(s), "%gms", v * 1000);
            else if (v < 60)
                snprintf(s, sizeof(s), "%gs", v);
            else if (v < 3600)
                snprintf(s, sizeof(s), "%gm", v / 60);
            else
                snprintf(s, sizeof(s), "%gh", v / 3600);
            text(b, LEFT - 8, yy + 4, "end", 11, C_MUTED, "normal", s);
        }
        return;
    }
    double step = nice_step(y->hi - y->lo, 4);
    for (double v = y->lo; v <= y->hi + step * 1e-6; v += step) {
        double yy = ty(y, v);
        util_buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                        LEFT, yy, LEFT + PW, yy, C_GRID);
        fmt_num(v, s, sizeof(s));
        text(b, LEFT - 8, yy + 4, "end", 11, C_MUTED, "normal", s);
    }
    (void)unit;
}

static void panel_frame(struct util_buf *b, const struct yaxis *y, const char *title,
                        const char *ylabel)
{
    text(b, LEFT, y->top - 10, "start", 14, C_TEXT, "bold", title);
    util_buf_printf(b,
                    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" fill=\"%s\" "
                    "transform=\"rotate(-90 %d %.1f)\" " FONT ">",
                    22, y->top + y->h / 2, C_MUTED, 22, y->top + y->h / 2);
    util_buf_put_xml(b, ylabel);
    util_buf_puts(b, "</text>\n");
    util_buf_printf(b,
                    "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"none\" "
                    "stroke=\"%s\"/>\n",
                    LEFT, y->top, PW, y->h, C_AXIS);
}

static void legend_item(struct util_buf *b, double x, double y, const char *color,
                        const char *dash, const char *label)
{
    util_buf_printf(b,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                    "stroke-width=\"3\"%s%s%s/>\n",
                    x, y - 4, x + 22, y - 4, color, dash ? " stroke-dasharray=\"" : "",
                    dash ? dash : "", dash ? "\"" : "");
    text(b, x + 28, y, "start", 12, C_TEXT, "normal", label);
}

/* Smallest tick of the log axis at or above v. */
static double log_ceil(double v)
{
    static const double t[] = {0.1, 0.2, 0.5, 1,   2,    5,    10,  20, 30,
                               60,  120, 300, 600, 1200, 1800, 3600};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(t); i++)
        if (t[i] >= v * 0.9999)
            return t[i];
    return 3600;
}

static double log_floor(double v)
{
    static const double t[] = {3600, 1800, 1200, 600, 300, 120, 60,  30,
                               20,   10,   5,    2,   1,   0.5, 0.2, 0.1};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(t); i++)
        if (t[i] <= v * 1.0001)
            return t[i];
    return 0.1;
}

/* The summary table: one row per policy, its colour as the legend. */
static double summary(struct util_buf *b, const struct sim_result *r, double y,
                      const char *interval)
{
    static const struct {
        double x;
        const char *head;
    } col[] = {{LEFT + 290, "GPU-hours"},         {LEFT + 390, "vs oracle"},
               {LEFT + 540, "intervals over SLA"}, {LEFT + 690, "requests over SLA"},
               {LEFT + 820, "scaling actions"},    {LEFT + 930, "peak replicas"},
               {LEFT + 1060, "worst p99"}};
    char s[64];
    for (size_t i = 0; i < UTIL_ARRAY_LEN(col); i++)
        text(b, col[i].x, y, "end", 12, C_MUTED, "normal", col[i].head);
    snprintf(s, sizeof(s), "(%s intervals)", interval);
    text(b, LEFT + 22, y, "start", 12, C_MUTED, "normal", s);
    util_buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                    LEFT, y + 6, LEFT + 1060, y + 6, C_GRID);
    y += 24;
    for (size_t i = 0; i < r->n; i++) {
        const struct sim_policy_result *x = &r->pol[i];
        util_buf_printf(b,
                        "<rect x=\"%d\" y=\"%.1f\" width=\"14\" height=\"14\" rx=\"3\" "
                        "fill=\"%s\"/>\n",
                        LEFT, y - 12, colors[x->policy]);
        text(b, LEFT + 22, y, "start", 14, C_TEXT, "bold", sim_policy_name(x->policy));
        snprintf(s, sizeof(s), "%.*f", sim_hour_digits(x->gpu_hours), x->gpu_hours); /* as the table */
        text(b, col[0].x, y, "end", 14, C_TEXT, "bold", s);
        if (isfinite(x->gpu_hours_vs_oracle))
            snprintf(s, sizeof(s), "%.2fx", x->gpu_hours_vs_oracle);
        else
            snprintf(s, sizeof(s), "-");
        text(b, col[1].x, y, "end", 14, C_TEXT, "normal", s);
        snprintf(s, sizeof(s), "%lld of %lld", (long long)x->sla_intervals,
                 (long long)x->intervals);
        text(b, col[2].x, y, "end", 14, x->sla_intervals ? C_SLA : C_TEXT, "bold", s);
        snprintf(s, sizeof(s), "%.3f%%",
                 x->requests > 0 ? 100.0 * x->requests_over_sla / x->requests : 0);
        text(b, col[3].x, y, "end", 14, C_TEXT, "normal", s);
        snprintf(s, sizeof(s), "%lld", (long long)x->scaling_actions);
        text(b, col[4].x, y, "end", 14, C_TEXT, "normal", s);
        snprintf(s, sizeof(s), "%d", x->peak_replicas);
        text(b, col[5].x, y, "end", 14, C_TEXT, "normal", s);
        if (x->max_p99_ms >= SIM_LATENCY_MAX_S * 1000)
            snprintf(s, sizeof(s), ">1h");
        else
            snprintf(s, sizeof(s), "%.1fs", x->max_p99_ms / 1000);
        text(b, col[6].x, y, "end", 14, C_TEXT, "normal", s);
        y += 22;
    }
    return y;
}

/* Panel 5, with quantile-sweep: what forecast-quantile trades. GPU-hours
 * against intervals over the SLA: predictive at each value (a line in
 * quantile order; the configured one ringed, as the table stars it), and the
 * other policies' totals as hollow points (static-peak left out: it would
 * squeeze the rest into a corner). */
static void sweep_panel(struct util_buf *b, const struct sim_result *r, double top, double h,
                        const char *iv)
{
    double x0 = INFINITY, x1 = -INFINITY, ymax = 1;
    for (size_t i = 0; i < r->nsweep; i++) {
        x0 = fmin(x0, r->sweep[i].gpu_hours);
        x1 = fmax(x1, r->sweep[i].gpu_hours);
        ymax = fmax(ymax, (double)r->sweep[i].sla_intervals);
    }
    for (size_t i = 0; i < r->n; i++) {
        if (r->pol[i].policy == SIM_STATIC_PEAK)
            continue;
        x0 = fmin(x0, r->pol[i].gpu_hours);
        x1 = fmax(x1, r->pol[i].gpu_hours);
        ymax = fmax(ymax, (double)r->pol[i].sla_intervals);
    }
    double pad = (x1 - x0) * 0.08;
    if (!(pad > 0))
        pad = fmax(1, fabs(x0) * 0.05);
    x0 -= pad;
    x1 += pad;
#define SWEEP_X(v) (LEFT + ((v) - x0) / (x1 - x0) * PW)
    double st = nice_step(ymax, 4);
    struct yaxis y = {top, h, 0, ceil(ymax * 1.15 / st) * st, false};
    char s[96];
    panel_frame(b, &y, "forecast-quantile trade-off: predictive replayed at each value "
                       "(quantile-sweep), the other policies for reference",
                "intervals over SLA");
    y_grid(b, &y, "");
    st = nice_step(x1 - x0, 6);
    for (double v = ceil(x0 / st) * st; v <= x1; v += st) {
        double x = SWEEP_X(v);
        util_buf_printf(b,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                        x, top, x, top + h, C_GRID);
        fmt_num(v, s, sizeof(s));
        text(b, x, top + h + 18, "middle", 12, C_MUTED, "normal", s);
    }
    snprintf(s, sizeof(s), "GPU-hours (left: cheaper; down: fewer %s intervals over the SLA)", iv);
    text(b, LEFT + PW / 2.0, top + h + 38, "middle", 12, C_MUTED, "normal", s);
    util_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"",
                    colors[SIM_PREDICTIVE]);
    for (size_t i = 0; i < r->nsweep; i++)
        util_buf_printf(b, "%.1f,%.1f ", SWEEP_X(r->sweep[i].gpu_hours),
                        ty(&y, (double)r->sweep[i].sla_intervals));
    util_buf_puts(b, "\"/>\n");
    for (size_t i = 0; i < r->nsweep; i++) {
        const struct sim_sweep_point *p = &r->sweep[i];
        double x = SWEEP_X(p->gpu_hours), yy = ty(&y, (double)p->sla_intervals);
        util_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", x, yy,
                        colors[SIM_PREDICTIVE]);
        if (p->configured)
            util_buf_printf(b,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"7.5\" fill=\"none\" "
                            "stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                            x, yy, colors[SIM_PREDICTIVE]);
        snprintf(s, sizeof(s), "%g%s", p->quantile, p->configured ? " *" : "");
        text(b, x + 9, yy - 8, "start", 11, colors[SIM_PREDICTIVE],
             p->configured ? "bold" : "normal", s);
    }
    for (size_t i = 0; i < r->n; i++) {
        const struct sim_policy_result *x = &r->pol[i];
        if (x->policy == SIM_STATIC_PEAK)
            continue;
        double px = SWEEP_X(x->gpu_hours), py = ty(&y, (double)x->sla_intervals);
        util_buf_printf(b,
                        "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"#ffffff\" stroke=\"%s\" "
                        "stroke-width=\"2\"/>\n",
                        px, py, colors[x->policy]);
        text(b, px + 9, py + 14, "start", 11, colors[x->policy], "normal",
             sim_policy_name(x->policy));
    }
#undef SWEEP_X
}

void sim_report_svg(struct util_buf *b, const struct sim_config *cfg,
                    const struct sim_report_info *info, const struct sim_result *r)
{
    const double sla_ms = (double)sim_config_sla_ms(cfg);
    struct taxis ax = {r->t_begin_s, r->t_end_s > r->t_begin_s ? r->t_end_s : r->t_begin_s + 1};
    struct cols *c = xmalloc(sizeof(*c));
    char s[512], d1[48], d2[48], sla[32], iv[32];
    util_format_duration((int64_t)sla_ms, sla, sizeof(sla));
    util_format_duration(cfg->interval_ms, iv, sizeof(iv));

    /* Vertical layout, top to bottom. */
    const double y_sum = 92;
    const double p1_top = y_sum + 24 + 22.0 * (double)r->n + 40, p1_h = 280;
    const double p2_top = p1_top + p1_h + 42, p2_h = 130;
    const double p3_top = p2_top + p2_h + 42, p3_h = 170;
    const double p4_top = p3_top + p3_h + 40, p4_h = 14.0 * (double)r->n;
    const double foot = p4_top + p4_h + 48;
    const double p5_top = foot + 60, p5_h = 220; /* with quantile-sweep only */
    const int H = (int)(r->nsweep ? p5_top + p5_h + 56 : foot + 14);

    util_buf_printf(b,
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                    "viewBox=\"0 0 %d %d\">\n"
                    "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
                    W, H, W, H, W, H);
    util_buf_printf(b, "<text x=\"%d\" y=\"34\" font-size=\"20\" fill=\"%s\" " FONT ">"
                       "<tspan font-weight=\"bold\">gpuscaler simulate</tspan>"
                       "<tspan dx=\"12\" fill=\"%s\" font-size=\"15\">",
                    LEFT, C_TEXT, C_MUTED);
    util_buf_put_xml(b, info->trace_name);
    util_buf_puts(b, "</tspan></text>\n");
    util_format_duration((int64_t)((r->t_end_s - r->t_begin_s) * 1000), d1, sizeof(d1));
    util_format_duration(cfg->policy.cold_start_ms, d2, sizeof(d2));
    snprintf(s, sizeof(s),
             "%s scored%s  |  replica = %g GPU x %g req/s  |  cold start %s  |  SLA: p99 <= %s "
             "per %s  |  traffic x%g",
             d1, r->warmup_s > 0 ? " after a warm-up" : "", sim_config_gpus(cfg),
             sim_config_capacity(cfg), d2, sla, iv, cfg->scale);
    text(b, LEFT, 58, "start", 13, C_MUTED, "normal", s);
    summary(b, r, y_sum, iv);

    /* Panel 1: demand vs ready capacity. */
    struct yaxis y1 = {p1_top, p1_h, 0, 1, false};
    double hi = r->peak_demand_rps;
    for (size_t i = 0; i < r->n; i++)
        for (size_t k = 0; k < r->pol[i].npoints; k++)
            hi = UTIL_MAX(hi, r->pol[i].points[k].capacity_rps);
    double st = nice_step(hi, 4);
    y1.hi = ceil(hi * 1.08 / st) * st;
    if (!(y1.hi > 0))
        y1.hi = 1;
    panel_frame(b, &y1, "Demand vs ready capacity", "requests/s");
    y_grid(b, &y1, "req/s");
    time_grid(b, &ax, y1.top, y1.h, false);
    if (r->n > 0) {
        reduce(&ax, &r->pol[0], F_DEMAND_MAX, sla_ms, c);
        area(b, &y1, c, C_DEMAND);
        reduce(&ax, &r->pol[0], F_DEMAND, sla_ms, c);
        polyline(b, &y1, c, "#6b7280", 0.8);
    }
    for (size_t i = r->n; i-- > 0;) {
        reduce(&ax, &r->pol[i], F_CAPACITY, sla_ms, c);
        polyline(b, &y1, c, colors[r->pol[i].policy], 1.6);
    }
    double lx = LEFT + PW - 8 - 150.0 * (double)r->n - 90;
    util_buf_printf(b,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"24\" fill=\"#ffffff\" "
                    "fill-opacity=\"0.85\"/>\n",
                    lx - 6, y1.top + 4, 150.0 * (double)r->n + 96);
    util_buf_printf(b,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"10\" fill=\"%s\" "
                    "fill-opacity=\"0.35\" stroke=\"#6b7280\" stroke-width=\"0.8\"/>\n",
                    lx, y1.top + 10, C_DEMAND);
    text(b, lx + 28, y1.top + 20, "start", 12, C_TEXT, "normal", "demand");
    lx += 90;
    for (size_t i = 0; i < r->n; i++) {
        snprintf(s, sizeof(s), "%s capacity", sim_policy_name(r->pol[i].policy));
        legend_item(b, lx, y1.top + 20, colors[r->pol[i].policy], NULL, s);
        lx += 150;
    }

    /* Panel 2: replicas asked for. */
    struct yaxis y2 = {p2_top, p2_h, 0, 1, false};
    double rmax = 1;
    for (size_t i = 0; i < r->n; i++)
        rmax = UTIL_MAX(rmax, (double)r->pol[i].peak_replicas);
    st = nice_step(rmax, 3);
    y2.hi = ceil(rmax * 1.08 / st) * st;
    panel_frame(b, &y2, "Replicas asked for (ready and starting)", "replicas");
    y_grid(b, &y2, "");
    time_grid(b, &ax, y2.top, y2.h, false);
    for (size_t i = r->n; i-- > 0;) {
        reduce(&ax, &r->pol[i], F_DESIRED, sla_ms, c);
        polyline(b, &y2, c, colors[r->pol[i].policy], 1.4);
    }

    /* Panel 3: p99 vs SLA, log scale. */
    struct yaxis y3 = {p3_top, p3_h, 0, 1, true};
    double pmax = sla_ms / 1000 * 2;
    for (size_t i = 0; i < r->n; i++)
        pmax = UTIL_MAX(pmax, r->pol[i].max_p99_ms / 1000);
    y3.lo = log_floor(cfg->policy.service_time_ms / 1000.0 * 0.95);
    y3.hi = log_ceil(UTIL_MIN(pmax, SIM_LATENCY_MAX_S));
    if (!(y3.hi > y3.lo))
        y3.hi = y3.lo * 10;
    snprintf(s, sizeof(s), "p99 latency per %s vs SLA", iv);
    panel_frame(b, &y3, s, "p99 (log scale)");
    double ysla = ty(&y3, sla_ms / 1000);
    util_buf_printf(b,
                    "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\" "
                    "fill-opacity=\"0.06\"/>\n",
                    LEFT, y3.top, PW, ysla - y3.top, C_SLA);
    y_grid(b, &y3, "s");
    time_grid(b, &ax, y3.top, y3.h, false);
    for (size_t i = r->n; i-- > 0;) { /* the first policy on top */
        reduce(&ax, &r->pol[i], F_P99, sla_ms, c);
        polyline(b, &y3, c, colors[r->pol[i].policy], 1.2);
    }
    util_buf_printf(b,
                    "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" "
                    "stroke-width=\"2\" stroke-dasharray=\"8 5\"/>\n",
                    LEFT, ysla, LEFT + PW, ysla, C_SLA);
    snprintf(s, sizeof(s), "SLA %s", sla);
    util_buf_printf(b,
                    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\" fill=\"%s\" "
                    "font-weight=\"bold\" stroke=\"#ffffff\" stroke-width=\"4\" "
                    "paint-order=\"stroke\" " FONT ">%s</text>\n",
                    LEFT + PW - 6, ysla - 6, C_SLA, s);

    /* Panel 4: where each policy missed the SLA. */
    snprintf(s, sizeof(s), "%s intervals over the SLA", iv);
    text(b, LEFT, p4_top - 8, "start", 13, C_TEXT, "bold", s);
    for (size_t i = 0; i < r->n; i++) {
        double yy = p4_top + 14.0 * (double)i;
        util_buf_printf(b,
                        "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"12\" fill=\"#f3f4f6\"/>\n",
                        LEFT, yy, PW);
        text(b, LEFT - 8, yy + 10, "end", 11, colors[r->pol[i].policy], "bold",
             sim_policy_name(r->pol[i].policy));
        reduce(&ax, &r->pol[i], F_MISS, sla_ms, c);
        for (int k = 0; k < PW; k++)
            if (c->have[k] && c->v[k] > 0)
                util_buf_printf(b,
                                "<rect x=\"%d\" y=\"%.1f\" width=\"1.5\" height=\"12\" "
                                "fill=\"%s\"/>\n",
                                LEFT + k, yy, C_SLA);
    }
    time_grid(b, &ax, p4_top, p4_h, true);
    snprintf(s, sizeof(s),
             "%s; one point per pixel column: mean of its %s intervals (grey area: busiest "
             "interval; p99: the worst)",
             sim_clock_absolute(ax.t0) ? "time in UTC (the trace's UNIX times)"
                                       : "time on the trace's clock (t = 0 taken as midnight)",
             iv);
    text(b, LEFT, foot, "start", 11, C_MUTED, "normal", s);
    if (r->nsweep)
        sweep_panel(b, r, p5_top, p5_h, iv);
    util_buf_puts(b, "</svg>\n");
    xfree(c);
}

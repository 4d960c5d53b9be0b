/* SPDX-License-Identifier: Apache-2.0 */
/* plan/svg: the --report chart, hand-written SVG like simulate's. Per plan,
 * on one time axis: the demand panel (history per step, the forecast's
 * 10-90 % band and median, each scenario's demand) and the GPU panel (each
 * scenario's planned GPUs, and for the reference scenario the cost-optimal
 * commitment split into reserved GPUs in use, reserved GPUs left idle and
 * GPUs above the commitment). A total has only the GPU panel. Series are
 * reduced to one value per pixel column so a quarter of 1-min steps stays a
 * small file. Output depends only on the inputs. */
#include "plan-int.h"

#include <stdio.h>
#include <string.h>

#define W 1280
#define LEFT 84
#define RIGHT 36
#define PW (W - LEFT - RIGHT)
#define PANEL_H 220
#define FONT "font-family=\"Helvetica, Arial, sans-serif\""

static const char *const scen_colors[PLAN_MAX_SCENARIOS] = {
    "#2563eb", "#f59e0b", "#dc2626", "#7c3aed", "#059669", "#9f1239", "#0891b2", "#65a30d"};
#define C_HIST "#6b7280"
#define C_BAND "#bfdbfe"
#define C_RES "#86efac"
#define C_IDLE "#e5e7eb"
#define C_FLEX "#fdba74"
#define C_GRID "#e5e7eb"
#define C_AXIS "#6b7280"
#define C_TEXT "#111827"

static void text(struct util_buf *b, double x, double y, const char *anchor, int size,
                 const char *color, const char *s)
{
    util_buf_printf(b,
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\" fill=\"%s\" "
                    FONT ">",
                    x, y, anchor, size, color);
    util_buf_put_xml(b, s);
    util_buf_puts(b, "</text>\n");
}

static double nice_step(double span, int n)
{
    if (!(span > 0))
        return 1;
    double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

struct axes {
    double t0, t1;      /* ms */
    double top, lo, hi; /* panel top (px), value range */
};

static double px(const struct axes *a, double t)
{
    return LEFT + (t - a->t0) / (a->t1 - a->t0) * PW;
}

static double py(const struct axes *a, double v)
{
    double f = (v - a->lo) / (a->hi - a->lo);
    return a->top + PANEL_H - (f < 0 ? 0 : f > 1 ? 1 : f) * PANEL_H;
}

/* A series as points (x px, value): one per step, or, with more steps than
 * pixel columns, one per column (mean). NAN values are gaps. Returns the
 * number of points; x and v hold at most max(n, PW). */
static size_t points(const struct axes *a, const double *v, size_t n, int64_t t0, int64_t step,
                     double *xs, double *vs)
{
    size_t k = 0;
    if (n <= PW) {
        for (size_t i = 0; i < n; i++) {
            double t = (double)(t0 + (int64_t)i * step) + (double)step / 2;
            if (t < a->t0 || t > a->t1)
                continue;
            xs[k] = px(a, t);
            vs[k++] = v[i];
        }
        return k;
    }
    double sum[PW];
    int cnt[PW];
    bool gap[PW];
    memset(sum, 0, sizeof(sum));
    memset(cnt, 0, sizeof(cnt));
    memset(gap, 0, sizeof(gap));
    for (size_t i = 0; i < n; i++) {
        double t = (double)(t0 + (int64_t)i * step) + (double)step / 2;
        int c = (int)floor((t - a->t0) / (a->t1 - a->t0) * PW);
        if (c < 0 || c >= PW)
            continue;
        if (isnan(v[i]))
            gap[c] = true;
        else {
            sum[c] += v[i];
            cnt[c]++;
        }
    }
    for (int c = 0; c < PW; c++) {
        if (!cnt[c] && !gap[c])
            continue;
        xs[k] = LEFT + c + 0.5;
        vs[k++] = cnt[c] ? sum[c] / cnt[c] : NAN;
    }
    return k;
}

static void polyline(struct util_buf *b, const struct axes *a, const double *v, size_t n,
                     int64_t t0, int64_t step, const char *color, double width, const char *dash)
{
    size_t cap = n > PW ? n : PW;
    double *xs = xmalloc(cap * sizeof(double)), *vs = xmalloc(cap * sizeof(double));
    size_t k = points(a, v, n, t0, step, xs, vs);
    bool open = false;
    for (size_t i = 0; i < k; i++) {
        if (isnan(vs[i])) {
            if (open)
                util_buf_puts(b, "\"/>\n");
            open = false;
            continue;
        }
        if (!open)
            util_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s%s%s "
                               "points=\"", color, width, dash ? " stroke-dasharray=\"" : "",
                            dash ? dash : "", dash ? "\"" : "");
        util_buf_printf(b, "%.1f,%.1f ", xs[i], py(a, vs[i]));
        open = true;
    }
    if (open)
        util_buf_puts(b, "\"/>\n");
    xfree(xs);
    xfree(vs);
}

/* A filled area between two step series of the same steps (lo NULL: 0). */
static void area(struct util_buf *b, const struct axes *a, const double *lo, const double *hi,
                 size_t n, int64_t t0, int64_t step, const char *color)
{
    size_t cap = n > PW ? n : PW;
    double *xs = xmalloc(cap * sizeof(double)), *vh = xmalloc(cap * sizeof(double));
    double *xl = xmalloc(cap * sizeof(double)), *vl = xmalloc(cap * sizeof(double));
    size_t k = points(a, hi, n, t0, step, xs, vh);
    if (lo)
        points(a, lo, n, t0, step, xl, vl);
    else
        memset(vl, 0, cap * sizeof(double));
    size_t i = 0;
    while (i < k) {
        while (i < k && (isnan(vh[i]) || isnan(vl[i])))
            i++;
        size_t s0 = i;
        while (i < k && !isnan(vh[i]) && !isnan(vl[i]))
            i++;
        if (i <= s0)
            continue;
        util_buf_printf(b, "<polygon fill=\"%s\" stroke=\"none\" points=\"", color);
        for (size_t j = s0; j < i; j++)
            util_buf_printf(b, "%.1f,%.1f ", xs[j], py(a, vh[j]));
        for (size_t j = i; j-- > s0;)
            util_buf_printf(b, "%.1f,%.1f ", xs[j], py(a, vl[j]));
        util_buf_puts(b, "\"/>\n");
    }
    xfree(xs);
    xfree(vh);
    xfree(xl);
    xfree(vl);
}

static void frame(struct util_buf *b, const struct axes *a, const char *ylabel)
{
    double step = nice_step(a->hi - a->lo, 4);
    for (double v = 0; v <= a->hi + 1e-9; v += step) {
        char s[32];
        double y = py(a, v);
        util_buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                        LEFT, y, LEFT + PW, y, C_GRID);
        snprintf(s, sizeof(s), "%g", v);
        text(b, LEFT - 6, y + 4, "end", 11, C_AXIS, s);
    }
    util_buf_printf(b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" "
                       "stroke=\"%s\"/>\n", LEFT, a->top, PW, PANEL_H, C_AXIS);
    util_buf_printf(b, "<text transform=\"translate(20,%.1f) rotate(-90)\" text-anchor=\"middle\" "
                       "font-size=\"12\" fill=\"%s\" " FONT ">", a->top + PANEL_H / 2.0, C_TEXT);
    util_buf_put_xml(b, ylabel);
    util_buf_puts(b, "</text>\n");
    /* days on the time axis (a label every few days) */
    double span_d = (a->t1 - a->t0) / (double)PLAN_DAY_MS;
    int64_t every = (int64_t)nice_step(span_d, 10);
    if (every < 1)
        every = 1;
    for (int64_t d = (int64_t)ceil(a->t0 / (double)PLAN_DAY_MS); d * PLAN_DAY_MS <= a->t1;
         d++) {
        if (d % every != 0)
            continue;
        double x = px(a, (double)(d * PLAN_DAY_MS));
        char s[32];
        util_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                        x, a->top, x, a->top + PANEL_H, C_GRID);
        snprintf(s, sizeof(s), "day %lld", (long long)d);
        text(b, x, a->top + PANEL_H + 14, "middle", 10, C_AXIS, s);
    }
}

static double curve_max(const double *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; v && i < n; i++)
        if (!isnan(v[i]) && v[i] > m)
            m = v[i];
    return m;
}

static void legend(struct util_buf *b, double *x, double y, const char *color, const char *label)
{
    util_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" fill=\"%s\"/>\n",
                    *x, y - 9, color);
    text(b, *x + 16, y, "start", 11, C_TEXT, label);
    *x += 24 + 6.5 * (double)strlen(label);
}

/* Two panels (or one for a total) from y; returns the next y. */
static double plan_panels(struct util_buf *b, const struct plan_result *r, double y)
{
    char s[160];
    int64_t h_end = r->t_begin_ms + (int64_t)r->nsteps * r->step_ms;
    struct axes a = {.t0 = (double)(r->hist_rate ? r->hist_step0_ms : r->t_begin_ms),
                     .t1 = (double)h_end};
    snprintf(s, sizeof(s), "%s", r->name[0] ? r->name : "demand, forecast and planned GPUs");
    text(b, LEFT, y + 16, "start", 15, C_TEXT, s);
    y += 30;
    if (r->hist_rate) {
        a.top = y;
        a.lo = 0;
        double top = curve_max(r->hist_rate, r->nhist);
        top = UTIL_MAX(top, curve_max(r->band_hi, r->nsteps));
        for (size_t k = 0; k < r->nscen; k++)
            top = UTIL_MAX(top, curve_max(r->scen[k].demand, r->nsteps));
        a.hi = nice_step(top, 4) * ceil(top / nice_step(top, 4) + 1e-9);
        if (!(a.hi > 0))
            a.hi = 1;
        frame(b, &a, "demand (req/s)");
        area(b, &a, r->band_lo, r->band_hi, r->nsteps, r->t_begin_ms, r->step_ms, C_BAND);
        polyline(b, &a, r->hist_rate, r->nhist, r->hist_step0_ms, r->step_ms, C_HIST, 1.2,
                 NULL);
        polyline(b, &a, r->band_mid, r->nsteps, r->t_begin_ms, r->step_ms, scen_colors[0], 1.4,
                 "4 3");
        for (size_t k = 0; k < r->nscen; k++)
            if (r->scen[k].growth != 1.0)
                polyline(b, &a, r->scen[k].demand, r->nsteps, r->t_begin_ms, r->step_ms,
                         scen_colors[k % PLAN_MAX_SCENARIOS], 1.0, NULL);
        double lx = LEFT + 8;
        legend(b, &lx, y + 16, C_HIST, "history");
        legend(b, &lx, y + 16, C_BAND, "forecast 10-90%");
        y += PANEL_H + 34;
    }
    /* GPUs */
    const struct plan_scenario_result *ref = &r->scen[r->ref];
    const struct plan_choice *o = &r->choice[PLAN_CHOICE_OPTIMAL];
    a.top = y;
    a.lo = 0;
    double top = 0;
    for (size_t k = 0; k < r->nscen; k++)
        top = UTIL_MAX(top, curve_max(r->scen[k].gpus, r->nsteps));
    top = UTIL_MAX(top, (double)o->reserved);
    a.hi = nice_step(top, 4) * ceil(top / nice_step(top, 4) + 1e-9);
    if (!(a.hi > 0))
        a.hi = 1;
    frame(b, &a, "GPUs held");
    size_t n = r->nsteps;
    double *res = xmalloc((n ? n : 1) * sizeof(double));
    double *rline = xmalloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        res[i] = UTIL_MIN(ref->gpus[i], (double)o->reserved);
        rline[i] = (double)o->reserved;
    }
    area(b, &a, NULL, res, n, r->t_begin_ms, r->step_ms, C_RES);
    area(b, &a, res, rline, n, r->t_begin_ms, r->step_ms, C_IDLE);
    double *flex = xmalloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++)
        flex[i] = UTIL_MAX(ref->gpus[i], (double)o->reserved);
    area(b, &a, rline, flex, n, r->t_begin_ms, r->step_ms, C_FLEX);
    for (size_t k = 0; k < r->nscen; k++)
        polyline(b, &a, r->scen[k].gpus, n, r->t_begin_ms, r->step_ms,
                 scen_colors[k % PLAN_MAX_SCENARIOS], 1.3, NULL);
    double ry = py(&a, (double)o->reserved);
    util_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#15803d\" "
                       "stroke-width=\"1.5\"/>\n", px(&a, (double)r->t_begin_ms), ry, LEFT + PW, ry);
    const struct plan_choice *rule = &r->choice[PLAN_CHOICE_RULE];
    double uy = py(&a, (double)rule->reserved);
    util_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#15803d\" "
                       "stroke-dasharray=\"6 4\"/>\n", px(&a, (double)r->t_begin_ms), uy, LEFT + PW,
                    uy);
    xfree(res);
    xfree(rline);
    xfree(flex);
    double lx = LEFT + 8;
    snprintf(s, sizeof(s), "reserved in use (%lld GPUs, cost-optimal)", (long long)o->reserved);
    legend(b, &lx, y + 16, C_RES, s);
    legend(b, &lx, y + 16, C_IDLE, "reserved idle");
    snprintf(s, sizeof(s), "above the commitment (x%g)", ref->growth);
    legend(b, &lx, y + 16, C_FLEX, s);
    snprintf(s, sizeof(s), "dashed: %.39s (%lld GPUs)", rule->name, (long long)rule->reserved);
    text(b, lx, y + 16, "start", 11, C_TEXT, s);
    lx = LEFT + 8;
    for (size_t k = 0; k < r->nscen; k++) {
        snprintf(s, sizeof(s), "x%g: %.0f GPU-h, peak %lld", r->scen[k].growth,
                 r->scen[k].gpu_hours, (long long)r->scen[k].peak_gpus);
        legend(b, &lx, y + 32, scen_colors[k % PLAN_MAX_SCENARIOS], s);
    }
    return y + PANEL_H + 40;
}

void plan_report_svg(struct util_buf *b, const struct plan_config *cfg,
                     struct plan_result *const *results, size_t n,
                     const struct plan_result *total)
{
    size_t panels = 0;
    if (total)
        panels += 1;
    for (size_t i = 0; i < n; i++)
        panels += results[i]->hist_rate ? 2 : 1;
    size_t plans = n + (total ? 1 : 0);
    double height = 60 + (double)panels * (PANEL_H + 40) + (double)plans * 30 + 20;
    util_buf_printf(b,
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
                    "viewBox=\"0 0 %d %.0f\">\n<rect width=\"100%%\" height=\"100%%\" "
                    "fill=\"white\"/>\n", W, height, W, height);
    char s[200], hz[32];
    if (cfg->horizon_ms % PLAN_DAY_MS == 0)
        snprintf(hz, sizeof(hz), "%lld-day", (long long)(cfg->horizon_ms / PLAN_DAY_MS));
    else /* 36h: not "2-day" */
        util_format_duration(cfg->horizon_ms, hz, sizeof(hz));
    snprintf(s, sizeof(s), "gpuscaler plan: %s horizon, growth scenarios", hz);
    text(b, LEFT, 30, "start", 18, C_TEXT, s);
    double y = 48;
    if (total)
        y = plan_panels(b, total, y);
    for (size_t i = 0; i < n; i++)
        y = plan_panels(b, results[i], y);
    util_buf_puts(b, "</svg>\n");
}

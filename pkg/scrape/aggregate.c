/* SPDX-License-Identifier: Apache-2.0 */
/* scrape/aggregate: the workload's result computed from its ready pods'
 * histories (request counters as rate() reads them, resets included) and
 * its latency window.
 *
 * Counting rules (docs/metrics.md repeats them for users):
 *  - failed: the pod's last scrape attempt failed;
 *  - warming: no failure, became a ready target less than 3 intervals ago
 *    and fewer than 2 successful scrapes since;
 *  - stale: otherwise without a successful scrape in the last 3 intervals,
 *    or with fewer than 2 samples in the rate window;
 *  - counted: everything else; the request rate sums their rates, except
 *    that a pod that became a target within the observed window adds its
 *    requests spread over that window (see below);
 *  - gone: deleted, or no longer Ready, with samples in the window: not a
 *    ready pod; its requests served in the window are spread over it, as a
 *    new pod's are, until they age out.
 * The in-flight and queued gauges sum the counted pods; the backlog sums the
 * latest gauges of every pod with a good scrape within 3 intervals, warming
 * and failed ones included: the controller counts its growth from tick to
 * tick as arrivals, and a new pod's queue (the requests a balancer sent it
 * while it warmed up) entering the sum only when the pod is first counted
 * would pass for a tick's worth of arrivals. The waiting requests of the
 * same pods are the queue to drain (a warming pod's queue is no less one).
 * Warming pods are stale in pods_stale but left out of the missing-fraction
 * test on both sides: invalid when (failed + stale - warming) exceeds
 * missing_fraction x (ready - warming). So a scale-out (many new pods) never
 * invalidates an otherwise healthy workload, while no pod counted is always
 * invalid. A rate is never made up: when invalid, request_rate is NAN.
 * The p99 is histogram_quantile(0.99) of the workload's window (the bucket
 * increases of every pod scraped in it, see scrape-int.h), as Prometheus
 * computes it over sum by (le) (rate(bucket[window])).
 * Token counters (demand-unit tokens) are sampled with the request counter
 * and summed by the same rules; a workload where no counted pod has the
 * generation-token metric is invalid, like one without the request metric.
 * The busy time (requests in service, time-averaged) is summed by the same
 * rules too, but is optional: unknown unless every counted pod has had the
 * busy-time counter in every sample its request counter has (so both span
 * the same scrapes).
 * Pure: times are passed in. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "scrape-int.h"
#include "util/util.h"

static const char *const fail_names[SCRAPE_FAIL_COUNT_] = {
    [SCRAPE_FAIL_NONE] = "ok",
    [SCRAPE_FAIL_REFUSED] = "connection refused",
    [SCRAPE_FAIL_TIMEOUT] = "timeout",
    [SCRAPE_FAIL_HTTP] = "HTTP error",
    [SCRAPE_FAIL_TOO_BIG] = "too big",
    [SCRAPE_FAIL_GARBAGE] = "unparsable",
    [SCRAPE_FAIL_TRUNCATED] = "truncated",
    [SCRAPE_FAIL_NO_PORT] = "no metrics port",
    [SCRAPE_FAIL_OTHER] = "error",
};

const char *scrape_fail_name(enum scrape_fail f)
{
    return (unsigned)f < SCRAPE_FAIL_COUNT_ ? fail_names[f] : "error";
}

/* ---- pods -> result ---------------------------------------------------- */

double scrape_latency_unit_ms(const char *field)
{
    char metric[SCRAPE_METRIC_MAX + 8];
    scrape_metric_name(field, metric, sizeof(metric));
    size_t n = strlen(metric);
    /* a counter's or a histogram's series name (x_us_total, x_milliseconds_sum):
     * the unit is before the suffix */
    static const char *const series[] = {"_total", "_sum", "_count", "_bucket"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(series); i++) {
        size_t sl = strlen(series[i]);
        if (n > sl && strncmp(metric + n - sl, series[i], sl) == 0) {
            n -= sl;
            break;
        }
    }
    static const struct {
        const char *suffix;
        double ms;
    } units[] = {
        {"_milliseconds", 1}, {"_ms", 1}, {"_microseconds", 1e-3}, {"_us", 1e-3},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(units); i++) {
        size_t sl = strlen(units[i].suffix);
        if (n >= sl && strncmp(metric + n - sl, units[i].suffix, sl) == 0)
            return units[i].ms;
    }
    return 1000; /* Prometheus base unit: seconds */
}

/* One counter kind's per-pod increases over the window and over the newest
 * intervals, for the window rate below. */
struct acc {
    double *incs;
    double recent;
    int64_t want;        /* the span the recent increases are asked to reach (0: any) */
    int64_t recent_span; /* the shortest span of the recent increases that reach want */
    int64_t short_span;  /* the shortest of those that do not (a pod not scraped that long) */
    bool recent_ok;
};

static void acc_init(struct acc *a, size_t n)
{
    a->incs = xcalloc(n ? n : 1, sizeof(double));
    a->recent = 0;
    a->want = 0;
    a->recent_span = a->short_span = INT64_MAX;
    a->recent_ok = true;
}

/* The span the noise of the summed recent rate is judged on: the shortest
 * of the pods' that reach the asked span; a pod scraped for less than it
 * (a new one) counts its own rate over what it has, and would otherwise set
 * the whole workload's span (and its noise margin) for as long. */
static int64_t acc_recent_span(const struct acc *a)
{
    return a->recent_span != INT64_MAX ? a->recent_span : a->short_span;
}

/* Adds one counted pod's counter c as entry k; false when it has no
 * increase over the window (too few samples). */
static bool acc_add(struct acc *a, size_t k, const struct scrape_ring *c, int64_t now_ms,
                    int64_t window_ms, int64_t recent_ms, int64_t *span)
{
    double inc, rinc;
    int64_t sp, rsp;
    if (scrape_ring_increase(c, now_ms, window_ms, &inc, &sp) != 0)
        return false;
    a->incs[k] = inc;
    if (span)
        *span = sp;
    /* the newest intervals from the pod's newest sample, not from now: a
     * tick just before a scrape would otherwise find only one of them */
    int64_t newest = scrape_ring_newest(c);
    if (scrape_ring_increase(c, newest < now_ms ? newest : now_ms, recent_ms, &rinc, &rsp) == 0 &&
        rsp > 0) {
        a->recent += rinc / ((double)rsp / 1000.0);
        int64_t *m = a->want > 0 && rsp < a->want ? &a->short_span : &a->recent_span;
        if (rsp < *m)
            *m = rsp;
    } else
        a->recent_ok = false;
    return true;
}

/* A pod that left: its increase over the window's samples (0 without two),
 * entry k, spread over the window as a young pod's (see below). Returns how
 * far back from now its samples reach (0 without two). */
static int64_t acc_gone(struct acc *a, size_t k, const struct scrape_ring *c, int64_t now_ms,
                        int64_t window_ms)
{
    double inc;
    int64_t sp;
    if (scrape_ring_increase(c, now_ms, window_ms, &inc, &sp) != 0) {
        a->incs[k] = 0;
        return 0;
    }
    a->incs[k] = inc;
    int64_t newest = scrape_ring_newest(c);
    return (newest < now_ms ? now_ms - newest : 0) + sp;
}

/* The workload's throughput over the window we have observed (the longest
 * sample span). A pod that became a target within it (by more than one
 * interval of scrape jitter) adds its counts spread over that span, not a
 * rate over its short life: when traffic is shared by a load balancer, a new
 * pod takes a share of the same demand, and summing rates would count that
 * demand twice during a scale-out. A pod that left within it (ages[k] is
 * INT64_MIN) adds its counts the same way: the pods that stay take its share
 * from then on, and leaving it out would count the window's demand short
 * until it aged out (by half, right after a scale-in from 4 replicas to 2),
 * where Prometheus' sum(rate()) keeps a series that ended within the window.
 * The span observed reaches as far back as the samples of the pods that left
 * do: after a rollout that replaced every pod, the new pods' few seconds
 * would spread the old pods' whole window of counts over those seconds (a
 * rate many times the load). */
static double window_rate(const double *incs, const int64_t *spans, const int64_t *ages,
                          size_t n, int64_t span, int64_t interval_ms, double *gone)
{
    double rate = 0;
    *gone = 0;
    for (size_t k = 0; k < n; k++) {
        bool young = ages[k] < span - interval_ms;
        double r = young ? incs[k] / ((double)span / 1000.0)
                         : incs[k] / ((double)spans[k] / 1000.0);
        rate += r;
        if (ages[k] == INT64_MIN) /* a pod that left, or warming after a spell out */
            *gone += r;
    }
    return rate;
}

void scrape_result_scale_up(struct scrape_result *r, double k)
{
    /* each window rate: its counted part times k, plus its gone part as it is */
    struct {
        double *rate, gone;
    } w[] = {{&r->request_rate, r->request_rate_gone},
             {&r->prompt_token_rate, r->prompt_token_rate_gone},
             {&r->generation_token_rate, r->generation_token_rate_gone},
             {&r->rejected_rate, r->rejected_rate_gone}};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(w); i++)
        if (isfinite(*w[i].rate))
            *w[i].rate = (*w[i].rate - w[i].gone) * k + w[i].gone;
    /* the newest intervals' rates sum the counted pods only */
    double *recent[] = {&r->recent_rate, &r->prompt_token_recent, &r->generation_token_recent,
                        &r->rejected_recent};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(recent); i++)
        if (isfinite(*recent[i]))
            *recent[i] *= k;
    if (r->busy >= 0) /* a rate too: it stays in proportion to the completions */
        r->busy = (r->busy - r->busy_gone) * k + r->busy_gone;
}

struct tally {
    int failed[SCRAPE_FAIL_COUNT_];
    int stale, warming;
};

static void put_why(struct scrape_result *out, const char *lead, const struct tally *t)
{
    char detail[160] = "";
    size_t off = 0;
    for (int f = 1; f < SCRAPE_FAIL_COUNT_; f++) {
        if (!t->failed[f])
            continue;
        off += (size_t)snprintf(detail + off, off < sizeof(detail) ? sizeof(detail) - off : 0,
                                "%s%s: %d", off ? ", " : "", scrape_fail_name(f), t->failed[f]);
    }
    int stale = t->stale - t->warming;
    if (stale > 0 && off < sizeof(detail))
        off += (size_t)snprintf(detail + off, sizeof(detail) - off, "%sno recent data: %d",
                                off ? ", " : "", stale);
    if (t->warming > 0 && off < sizeof(detail))
        snprintf(detail + off, sizeof(detail) - off, "%swarming up: %d", off ? ", " : "",
                 t->warming);
    /* the one class a user fixes in the Deployment's annotations */
    snprintf(out->why, sizeof(out->why), "%s (%s)%s", lead, detail,
             t->failed[SCRAPE_FAIL_NO_PORT] ? "; set gpuscaler.io/metrics-port" : "");
}

void scrape_aggregate(const struct scrape_agg_pod *pods, size_t n, const struct scrape_window *win,
                      const struct scrape_spec *spec, int64_t now_ms, int64_t interval_ms,
                      int64_t window_ms, struct scrape_result *out)
{
    scrape_aggregate_recent(pods, n, win, spec, now_ms, interval_ms, window_ms, 0, out);
}

void scrape_aggregate_recent(const struct scrape_agg_pod *pods, size_t n,
                             const struct scrape_window *win, const struct scrape_spec *spec,
                             int64_t now_ms, int64_t interval_ms, int64_t window_ms,
                             int64_t recent_min_ms, struct scrape_result *out)
{
    memset(out, 0, sizeof(*out));
    out->request_rate = NAN;
    out->recent_rate = NAN;
    out->inflight = -1;
    out->busy = -1;
    out->queued = -1;
    out->backlog = -1;
    out->waiting = -1;
    out->p99_ms = -1;
    out->time_ms = POLICY_NEVER;
    int ready = 0;
    for (size_t i = 0; i < n; i++)
        ready += !pods[i].gone;
    out->pods_ready = ready;

    out->prompt_token_rate = out->generation_token_rate = NAN;
    out->prompt_token_recent = out->generation_token_recent = NAN;
    out->rejected_rate = out->rejected_recent = NAN;

    struct tally t = {0};
    double inflight = 0, queued = 0;
    /* counted pods' increases (requests, prompt and generated tokens, refused
     * requests) and sample spans, for the rates below */
    struct acc req, prompt, gen, busy, rej;
    acc_init(&req, n);
    req.want = recent_min_ms;
    acc_init(&prompt, n);
    acc_init(&gen, n);
    acc_init(&busy, n);
    acc_init(&rej, n);
    bool busy_ok = spec->busy_metric[0] != '\0';
    const bool tokens = spec->generation_token_metric[0] != '\0';
    const bool rejected = spec->rejected_metric[0] != '\0';
    int64_t *spans = xcalloc(n ? n : 1, sizeof(int64_t)), *ages = xcalloc(n ? n : 1,
                                                                         sizeof(int64_t));
    size_t ncounted = 0;
    int64_t span = 0, gone_reach = 0;
    bool any_inflight = false, any_queued = false, any_req = false, any_gen = false;
    int64_t fresh = 3 * interval_ms;
    /* the recent rates look back two intervals and a half (the two newest
     * intervals of samples), or one interval beyond recent_min_ms: the
     * samples in it then span at least recent_min_ms */
    int64_t recent_ms = 2 * interval_ms + interval_ms / 2;
    if (recent_min_ms > 0 && recent_min_ms + interval_ms > recent_ms)
        recent_ms = recent_min_ms + interval_ms;
    double backlog = 0, waiting = 0;
    bool any_backlog = false, any_waiting = false;

    for (size_t i = 0; i < n; i++) {
        const struct scrape_podstate *st = pods[i].st;
        int64_t sp;
        /* a pod that left, and one Ready again after a spell out (warming
         * up anew): the requests it served in the window count, not its rate */
        bool warming = !pods[i].gone && st->ok_count < 2 && now_ms - st->since_ms < fresh;
        if (pods[i].gone || (warming && st->fail == SCRAPE_FAIL_NONE && st->requests.n >= 2)) {
            int64_t reach = acc_gone(&req, ncounted, &st->requests, now_ms, window_ms);
            if (reach > gone_reach)
                gone_reach = reach;
            acc_gone(&prompt, ncounted, &st->prompt, now_ms, window_ms);
            acc_gone(&gen, ncounted, &st->gen, now_ms, window_ms);
            acc_gone(&busy, ncounted, &st->busy, now_ms, window_ms);
            acc_gone(&rej, ncounted, &st->rejected, now_ms, window_ms);
            spans[ncounted] = 0;
            ages[ncounted++] = INT64_MIN;
            if (pods[i].gone)
                continue;
        }
        double run, wait;
        scrape_podstate_backlog(st, spec, now_ms, interval_ms, &run, &wait);
        if (!isnan(run)) {
            backlog += run;
            any_backlog = true;
        }
        if (!isnan(wait)) {
            backlog += wait;
            waiting += wait;
            any_backlog = any_waiting = true;
        }
        if (st->fail != SCRAPE_FAIL_NONE) {
            t.failed[st->fail < SCRAPE_FAIL_COUNT_ ? st->fail : SCRAPE_FAIL_OTHER]++;
            out->pods_failed++;
            continue;
        }
        if (warming) {
            t.warming++;
            t.stale++;
            continue;
        }
        if (st->last_ok_ms == POLICY_NEVER || now_ms - st->last_ok_ms > fresh ||
            !acc_add(&req, ncounted, &st->requests, now_ms, window_ms, recent_ms, &sp)) {
            t.stale++;
            continue;
        }
        out->pods_counted++;
        if (tokens) { /* sampled with the requests: the same samples, the same span */
            acc_add(&prompt, ncounted, &st->prompt, now_ms, window_ms, recent_ms, NULL);
            acc_add(&gen, ncounted, &st->gen, now_ms, window_ms, recent_ms, NULL);
            any_gen |= st->gen_seen;
        }
        if (rejected) /* sampled with the requests too */
            acc_add(&rej, ncounted, &st->rejected, now_ms, window_ms, recent_ms, NULL);
        if (busy_ok) /* the same scrapes: a ring as long as the requests' has their span */
            busy_ok = st->busy.n == st->requests.n &&
                      acc_add(&busy, ncounted, &st->busy, now_ms, window_ms, recent_ms, NULL);
        spans[ncounted] = sp;
        ages[ncounted] = now_ms - st->since_ms;
        ncounted++;
        if (sp > span)
            span = sp;
        out->gpus_ready += pods[i].gpus;
        if (st->last_ok_ms > out->time_ms)
            out->time_ms = st->last_ok_ms;
        any_req |= st->req_seen;
        if (st->has_inflight) {
            inflight += st->inflight;
            any_inflight = true;
        }
        if (st->has_queued) {
            queued += st->queued;
            any_queued = true;
        }
    }
    out->pods_stale = t.stale;
    out->pods_warming = t.warming;
    if (gone_reach > span)
        span = gone_reach;

    int missing = out->pods_failed + t.stale - t.warming;
    int base = ready - t.warming;
    char lead[96];
    if (ready == 0) {
        snprintf(out->why, sizeof(out->why), "no ready pods to scrape");
    } else if (out->pods_counted == 0 && missing == 0) {
        snprintf(out->why, sizeof(out->why),
                 "all %d ready pods are warming up (fewer than 2 scrapes yet)", ready);
    } else if (out->pods_counted == 0 || (double)missing > spec->missing_fraction * base) {
        snprintf(lead, sizeof(lead), "%d of %d ready pods could not be scraped", missing,
                 ready);
        put_why(out, lead, &t);
    } else if (!any_req) {
        snprintf(out->why, sizeof(out->why),
                 "request metric %.120s not found in any pod's exposition",
                 spec->request_metric[0] ? spec->request_metric : "(none configured)");
    } else if (tokens && !any_gen) {
        snprintf(out->why, sizeof(out->why),
                 "token metric %.120s not found in any pod's exposition (demand-unit tokens)",
                 spec->generation_token_metric);
    } else {
        out->valid = true;
        out->request_rate = window_rate(req.incs, spans, ages, ncounted, span, interval_ms,
                                        &out->request_rate_gone);
        out->recent_rate = req.recent_ok ? req.recent : NAN;
        int64_t rspan = acc_recent_span(&req);
        out->recent_span_ms = req.recent_ok && rspan != INT64_MAX ? rspan : 0;
        if (tokens) {
            out->generation_token_rate = window_rate(gen.incs, spans, ages, ncounted, span,
                                                     interval_ms, &out->generation_token_rate_gone);
            out->generation_token_recent = gen.recent_ok ? gen.recent : NAN;
            out->prompt_token_rate = window_rate(prompt.incs, spans, ages, ncounted, span,
                                                 interval_ms, &out->prompt_token_rate_gone);
            out->prompt_token_recent = prompt.recent_ok ? prompt.recent : NAN;
        }
        if (rejected) {
            out->rejected_rate = window_rate(rej.incs, spans, ages, ncounted, span, interval_ms,
                                             &out->rejected_rate_gone);
            out->rejected_recent = rej.recent_ok ? rej.recent : NAN;
        }
        out->inflight = spec->inflight_metric[0] && any_inflight ? inflight : -1;
        if (busy_ok && ncounted > 0) {
            double unit = scrape_latency_unit_ms(spec->busy_metric) / 1000.0;
            out->busy =
                window_rate(busy.incs, spans, ages, ncounted, span, interval_ms, &out->busy_gone) *
                unit;
            out->busy_gone *= unit;
        }
        out->queued = spec->queue_metric[0] && any_queued ? queued : -1;
        out->backlog = any_backlog ? backlog : -1;
        out->waiting = any_waiting ? waiting : -1;
        double q = win && spec->latency_metric[0]
                       ? scrape_window_quantile(win, 0.99, now_ms, window_ms)
                       : NAN;
        if (isfinite(q) && q >= 0)
            out->p99_ms = q * scrape_latency_unit_ms(spec->latency_metric);
    }
    if (out->time_ms == POLICY_NEVER)
        out->time_ms = 0;
    xfree(req.incs);
    xfree(prompt.incs);
    xfree(gen.incs);
    xfree(busy.incs);
    xfree(rej.incs);
    xfree(spans);
    xfree(ages);
}

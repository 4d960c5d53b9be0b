/* SPDX-License-Identifier: Apache-2.0 */
/* policy/size: the demand and size stages of a tick: how much load there is
 * to serve, and how many replicas serve it within the SLA.
 *
 * Sizing from the SLA (docs/policy.md, "Size from the SLA"). A replica has c
 * slots (GPUs x slots-per-gpu; by default capacity x service time, Little's
 * law) and serves at most G x C requests/s. Requests spread evenly over the
 * replicas, each an M/M/c queue at utilisation rho: a request waits for a
 * slot with Erlang's C probability P(c, rho c), and that wait is exponential
 * with rate G C (1 - rho) (the spare service capacity). Its p99 is
 *     S + max(0, ln(P / 0.01) / (G C (1 - rho))),
 * S the service time. rho_sla, the largest utilisation whose p99 meets the
 * target, is found by bisection (the p99 rises with rho); one replica then
 * carries rho_sla x G x C requests/s and a rate r needs ceil(r / that).
 * Without a p99 target or a service time the per-replica rate is
 * target-utilization x G x C, the rule users set by hand.
 *
 * With demand-unit tokens the rates and the capacity are weighted tokens/s,
 * but slots and the queue are counted in requests: in->request_size (the
 * measured weighted tokens per request) turns the capacity into the
 * requests/s the queueing model needs (so the default slot count and the
 * wait stay in requests) and the waiting requests into tokens to drain. rho
 * is a share of capacity in either unit.
 *
 * The queue's drain is sized at full capacity, not at the SLA's utilisation:
 * while a backlog drains the replicas run saturated, and sizing the drain at
 * rho_sla asked for replicas that arrived after the backlog was gone (8 for
 * a need of 6 on the closed-loop ramp). */
#include "policy.h"

#include <math.h>
#include <string.h>

#include "util/util.h"

/* Erlang C, P(wait) in M/M/c with offered load a = rho c (a < c), through
 * Erlang B's stable recursion. */
/* Demand units per request (1 when unknown). */
static double request_size(const struct policy_input *in)
{
    double k = in->request_size;
    return isfinite(k) && k > 0 ? k : 1;
}

static double erlang_c(int32_t c, double a)
{
    if (c < 1 || !(a > 0))
        return 0;
    if (a >= c)
        return 1;
    double b = 1;
    for (int32_t k = 1; k <= c; k++)
        b = a * b / (k + a * b);
    double p = c * b / (c - a * (1 - b));
    return p < 0 ? 0 : p > 1 ? 1 : p;
}

/* p99 of one replica of c slots and capacity mu req/s at utilisation rho. */
static double p99_at(int32_t c, double mu, double rho, double service_s)
{
    double pw = erlang_c(c, rho * c);
    if (pw <= 0.01)
        return service_s;
    return service_s + log(pw / 0.01) / (mu * (1 - rho));
}

double policy_sla_utilization(int32_t servers, double replica_rps, double service_s,
                              double target_s)
{
    if (servers < 1 || !(replica_rps > 0) || !(service_s > 0) || !(target_s > service_s))
        return 0;
    double lo = 0, hi = 0.999;
    if (p99_at(servers, replica_rps, hi, service_s) <= target_s)
        return hi;
    for (int i = 0; i < 50; i++) {
        double mid = 0.5 * (lo + hi);
        if (p99_at(servers, replica_rps, mid, service_s) <= target_s)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

void policy_sizing(const struct policy_config *cfg, struct policy_state *st,
                   const struct policy_input *in, struct policy_sizing *out)
{
    memset(out, 0, sizeof(*out));
    double gpus = cfg->gpus_per_replica > 0 ? cfg->gpus_per_replica : in->gpus_per_replica;
    if (!(gpus > 0))
        gpus = 1;
    const double cap = cfg->capacity_rps_per_gpu * gpus;
    double service_s = cfg->service_time_ms > 0 ? cfg->service_time_ms / 1000.0
                       : in->service_time_ms > 0 && isfinite(in->service_time_ms)
                           ? in->service_time_ms / 1000.0
                           : 0;
    double target_s = cfg->p99_latency_target_ms / 1000.0;
    out->service_s = service_s;
    out->utilization = cfg->target_utilization;
    out->per_replica_rps = cfg->target_utilization * cap;
    if (!(service_s > 0) || !(target_s > 0))
        return;
    const double size = request_size(in);
    const double cap_req = cap / size; /* the replica's capacity in requests/s */
    double slots = cfg->slots_per_gpu > 0 ? cfg->slots_per_gpu
                                          : cfg->capacity_rps_per_gpu / size * service_s;
    double c = round(gpus * slots);
    int32_t servers = c < 1 ? 1 : c > 100000 ? 100000 : (int32_t)c;
    out->servers = servers;
    if (st->sla_servers != servers || st->sla_service_s != service_s ||
        st->sla_target_s != target_s || st->sla_replica_rps != cap_req) {
        st->sla_servers = servers;
        st->sla_service_s = service_s;
        st->sla_target_s = target_s;
        st->sla_replica_rps = cap_req;
        st->sla_util = policy_sla_utilization(servers, cap_req, service_s, target_s);
    }
    if (!(st->sla_util > 0))
        return; /* the service time alone misses the target: size by hand */
    out->from_sla = true;
    out->utilization = st->sla_util;
    out->per_replica_rps = st->sla_util * cap;
}

int64_t policy_size(const struct policy_sizing *sz, double rate)
{
    if (!(rate > 0) || !(sz->per_replica_rps > 0))
        return 0;
    double r = rate / sz->per_replica_rps;
    if (r > 1e7)
        return 10000000;
    return (int64_t)ceil(r - 1e-9);
}

int64_t policy_need(const struct policy_sizing *sz, const struct policy_demand *d,
                    double replica_rps)
{
    int64_t n = policy_size(sz, d->arrival_rps);
    if (d->drain_rps > 0 && replica_rps > 0) {
        /* while draining, replicas run saturated: the drain is sized at full capacity */
        double k = (d->arrival_rps + d->drain_rps) / replica_rps;
        int64_t m = k > 1e7 ? 10000000 : (int64_t)ceil(k - 1e-9);
        if (m > n)
            n = m;
    }
    return n;
}

/* Whether r arrivals a second over t seconds are past a rate of m by more
 * than POLICY_RECENT_SIGMAS on the square root's scale (below). */
static bool beyond_noise(double r, double m, double t)
{
    double edge = sqrt(m * t) + POLICY_RECENT_SIGMAS / 2;
    return r * t > edge * edge;
}

void policy_demand(const struct policy_input *in, double ramp_rps, int64_t horizon_ms,
                   int64_t lead_ms, double replica_rps, double carry_rps,
                   struct policy_demand *out)
{
    memset(out, 0, sizeof(*out));
    double w = isfinite(in->request_rate) && in->request_rate > 0 ? in->request_rate : 0;
    double r = isfinite(in->recent_rate) && in->recent_rate > 0 ? in->recent_rate : 0;
    /* Arrivals are a Poisson count, and the square root of a Poisson count
     * has a standard error of 1/2 whatever its mean: over t seconds the last
     * tick's count r t is past the window's rate w by POLICY_RECENT_SIGMAS
     * when sqrt(r t) > sqrt(w t) + POLICY_RECENT_SIGMAS / 2. With many
     * arrivals that is w + 3 sqrt(w / t), the normal approximation (a step
     * of 3x at 6 req/s over 5 s is 8 of them); with few it asks for 2.25
     * more arrivals than that, where the normal approximation's tail is too
     * thin: 10 arrivals in 1.25 s at 3 req/s come once in 190 windows, not
     * once in 740 as 3 standard errors would (docs/policy.md, "Demand").
     * It wins too, when above the window's, if it is past what the ready
     * replicas carry by as much: they are short now, and the window, partly
     * from before a step, under-sizes them (a KPA's panic window; 6 -> 18
     * req/s on a replica carrying 7.28: the window 11.6 5 s in, the tick
     * 17.4 over 2 s, 3 replicas where the window asks for 2). */
    out->rising = r > w;
    if (in->recent_window_ms > 0) {
        /* counted in requests, the Poisson count: a token count's noise is
         * sqrt(tokens a request) times a request count's (in tokens, a steady
         * 10 req/s of 500 tokens read as rising on 44 % of ticks) */
        double t = (double)in->recent_window_ms / 1000.0, k = request_size(in);
        out->rising = beyond_noise(r / k, w / k, t) ||
                      (r > w && isfinite(carry_rps) && carry_rps >= 0 &&
                       beyond_noise(r / k, carry_rps / k, t));
    }
    out->arrival_rps = out->rising ? r : w;
    double now_rps = out->arrival_rps;
    /* a ramp is sized where it will be when a replica asked for now serves */
    if (isfinite(ramp_rps) && ramp_rps > out->arrival_rps) {
        out->arrival_rps = ramp_rps;
        out->ramp = true;
    }
    /* the queue counts requests: in the demand unit it is request_size each */
    double q = isfinite(in->queue_depth) && in->queue_depth > 0
                   ? in->queue_depth * request_size(in)
                   : 0;
    /* The queue when capacity asked for now serves, lead_ms from now: less
     * what the ready replicas' headroom drains meanwhile, plus what piles up
     * while they are short (a burst of 2.2x their capacity added 270 req/s
     * to a queue for three minutes, and a drain sized on the queue at the
     * first write left the rest to a second cold start). From the arrivals
     * measured now, not the ramp's: the ramp is a bounded guess, and a queue
     * projected on it too asks twice for the same rise. Only a queue seen
     * is projected: it is the evidence that arrivals exceed what the
     * replicas complete (a capacity set as a target, below what the pods
     * do, would otherwise project a queue that never forms). */
    if (q > 0 && lead_ms > 0 && replica_rps > 0) {
        double ready = in->ready_replicas > 0 ? in->ready_replicas : 0;
        q -= (ready * replica_rps - now_rps) * ((double)lead_ms / 1000.0);
    }
    if (horizon_ms > 0 && q > 0) {
        out->drain_rps = q / (horizon_ms / 1000.0);
        out->queue = q / request_size(in);
    }
    out->rate_rps = out->arrival_rps + out->drain_rps;
}

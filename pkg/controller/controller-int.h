/* SPDX-License-Identifier: Apache-2.0 */
/* controller-int: internals shared by the controller's files (not a public API).
 *
 * Leader election: Lease-based leader election as client-go's
 * leaderelection package does it, as a pure state machine: the caller reads
 * the Lease, asks ctl_leader_step() what to write, writes it (with the read
 * resourceVersion as precondition) and reports the outcome. Time is passed
 * in; expiry is judged on the local clock from when the record was last seen
 * to change (client-go's observedTime), never from the other holder's clock. */
#ifndef GPUSCALER_CONTROLLER_INT_H
#define GPUSCALER_CONTROLLER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The fields of a coordination.k8s.io/v1 Lease that election uses. */
struct ctl_lease {
    bool exists;
    char holder[128];        /**< spec.holderIdentity, "" when released */
    int32_t duration_s;      /**< spec.leaseDurationSeconds */
    int64_t acquire_unix_ms; /**< spec.acquireTime */
    int64_t renew_unix_ms;   /**< spec.renewTime */
    int32_t transitions;     /**< spec.leaseTransitions */
    char resource_version[64];
};

struct ctl_leader {
    char identity[128];
    int64_t lease_duration_ms, renew_deadline_ms, retry_period_ms;
    bool leading;               /**< in a term: holds the lease, renewed within the deadline */
    uint64_t term;              /**< terms begun (each false -> true of leading) */
    char lost_why[160];         /**< why the last term ended */
    bool reported_leading;      /**< what ctl_leader_transition() last reported */
    uint64_t reported_term;
    int64_t last_renew_ok_ms;   /**< local time of the last successful write as leader */
    struct ctl_lease observed;  /**< the record last read, or last written (a write
                                     that succeeded, acted on or not) */
    int64_t observed_ms;        /**< local time the record last changed */
    bool fence_new_terms;       /**< a term begins fenced (set by the caller) */
    bool fenced;                /**< in a term but not acting yet: the caller has not
                                     seen the other mode's Leases free since it began */
};

enum ctl_leader_action {
    CTL_LEADER_WAIT,   /**< someone else holds a valid lease: do nothing */
    CTL_LEADER_CREATE, /**< no lease: create *out */
    CTL_LEADER_UPDATE, /**< acquire or renew: update with *out (resourceVersion set) */
};

void ctl_leader_init(struct ctl_leader *l, const char *identity, int64_t lease_duration_ms,
                     int64_t renew_deadline_ms, int64_t retry_period_ms);

/**
 * Record the lease as just read at local time now_ms (its expiry clock
 * restarts whenever the record changed) and return its valid holder: the
 * holderIdentity when set and not expired on the local clock (observed
 * time + leaseDurationSeconds), else NULL. The pointer is into l and valid
 * until the next call on l. ctl_leader_step() calls this itself; call it
 * alone to watch a lease this instance does not try to take.
 */
const char *ctl_leader_observe(struct ctl_leader *l, const struct ctl_lease *cur, int64_t now_ms);

/**
 * One election round at local time now_ms with the lease as just read
 * (cur->exists false when absent). unix_now_ms stamps acquire/renew times.
 */
enum ctl_leader_action ctl_leader_step(struct ctl_leader *l, const struct ctl_lease *cur,
                                       int64_t now_ms, int64_t unix_now_ms,
                                       struct ctl_lease *out);

/** Report whether the write step asked for succeeded. sent_ms: when the
 *  write was sent; the renew deadline counts from then, not from the answer
 *  (the other replicas count the lease from when they saw it change, at or
 *  after the send: a late answer must not stretch this instance's term past
 *  theirs; one a whole renew deadline late is not acted on). A write that
 *  succeeded is the lease's record from then, acted on or not: a release or
 *  the next write starts from its resourceVersion. */
void ctl_leader_result(struct ctl_leader *l, bool ok, const struct ctl_lease *written,
                       int64_t now_ms, int64_t sent_ms);

/**
 * True while this instance may act: it holds the lease and renewed it
 * within renew_deadline. A leader that cannot renew stops acting at once.
 */
bool ctl_leader_is_leading(const struct ctl_leader *l, int64_t now_ms);

/**
 * Whether the lease as last read has a holder that has not expired on the
 * local clock at now_ms (its observed time + leaseDurationSeconds): that
 * holder is alive and decides every tick. other: a holder other than this
 * instance only.
 */
bool ctl_leader_held_live(const struct ctl_leader *l, int64_t now_ms, bool other);

enum ctl_leader_change {
    CTL_LEADER_SAME,    /**< nothing to report */
    CTL_LEADER_STARTED, /**< a term began: log "became leader" */
    CTL_LEADER_STOPPED, /**< a term ended: log "stopped leading" with why */
};

/**
 * The next leadership change not yet reported, at local time now_ms. A term
 * whose renew deadline passed ends here (why: "renew deadline passed ..."),
 * whether or not a callback ran meanwhile, and a renewal after that is a new
 * term, so a lapse is never hidden. Each term is reported started once and
 * stopped once; call until CTL_LEADER_SAME (a lapse and a new term may both
 * be pending). why (len bytes) gets the reason of a STOPPED.
 */
enum ctl_leader_change ctl_leader_transition(struct ctl_leader *l, int64_t now_ms, char *why,
                                             size_t len);

/**
 * End the fence of the current term (fence_new_terms): from now on
 * ctl_leader_is_leading() is true while the term lasts, and
 * ctl_leader_transition() reports it started. A term that begins while
 * fence_new_terms is set is fenced: it holds the lease (renewals go on) but
 * does not act until its caller saw, over a read sent after the term's first
 * write, that no one of the other mode (single leader or shard holders)
 * acts. No-op outside a term.
 */
void ctl_leader_unfence(struct ctl_leader *l);

/** End the term at once (shutdown), with the reason to report. */
void ctl_leader_stop(struct ctl_leader *l, const char *why);

/** The lease to write on shutdown to hand over at once (holder "", 1 s). */
void ctl_leader_release(const struct ctl_leader *l, int64_t unix_now_ms, struct ctl_lease *out);

/* ---- the running controller's state ------------------------------------ */

#include <jansson.h>
#include <uv.h>

#include "controller.h"
#include "capacity/capacity.h"
#include "forecast/forecast.h"
#include "promql/promql.h"
#include "scrape/scrape.h"
#include "util/util.h"

struct kube_deployment;
struct kube_pod;
struct ctl_rec_write; /* report.c: a recorded row batch being appended */

#define CTL_BACKLOG_SAMPLES 64

/** Older counter samples kept per pod (Prometheus source): the recent rate
 *  counts over two service times at least, several scrape intervals when
 *  the service time is long. */
#define CTL_PQ_OLD 8
/** One sample of a pod's request counter, with its backlog then. */
struct ctl_pq_sample {
    int64_t t_ms; /**< the sample's time */
    double req;   /**< the counter then */
    double bl;    /**< running + waiting then, NAN none */
    double rej;   /**< the refused requests' counter then, NAN none */
};
/** A pod in the Prometheus source's answers (promsrc.c). */
struct ctl_pq_pod {
    char *name;
    double bl;           /**< running + waiting at its last answer, NAN none */
    double held;         /**< its last known running + waiting (kept through answers
                              without its gauges), NAN none */
    int64_t t_ms;        /**< its request counter's newest sample time, 0 none */
    double req;          /**< the counter then */
    double rej;          /**< the refused requests' counter then, NAN none */
    int nold;            /**< older samples kept, newest first */
    struct ctl_pq_sample old[CTL_PQ_OLD];
    bool departed;       /**< absent and not serving: bl is in pq_departed (taken
                              out again if it comes back) */
};

/** A pod's cold start, taken when it was first seen Ready: later Ready
 *  transitions (a readiness probe failing under load and passing again)
 *  are not starts. */
struct ctl_cold_pod {
    char *name;
    int64_t created_ms;
    int64_t schedule_ms, load_ms; /**< creation to PodScheduled, then to Ready; -1 when
                                       the transition times were not usable */
};

/** Scale-up policies an HPA's facts keep (an HPA with more is not checked
 *  for its pace). */
#define CTL_HPA_POLICIES 8
/** One of behavior.scaleUp.policies. */
struct ctl_hpa_policy {
    bool pods;                /**< type Pods (else Percent) */
    int32_t value, period_s;
};

/** What the HorizontalPodAutoscaler targeting a Deployment asks of it
 *  (hpa.c; mode external-metric, where it applies gpuscaler's count). */
struct ctl_hpa_facts {
    bool listed;              /**< a list of its namespace's HPAs has completed */
    int count;                /**< HPAs targeting it; the rest is the first one's */
    int64_t none_since_ms;    /**< when a list first saw none target it (sent, wall ms) */
    bool none_confirmed;      /**< ... and one sent CTL_HPA_NONE_GRACE_MS after saw none */
    bool keda;                /**< made by KEDA (its triggers may read gpuscaler's /metrics) */
    bool recheck_asked;       /**< a list at the end of the grace was asked for */
    char name[64];
    int32_t min_replicas;     /**< spec.minReplicas (1 when unset) */
    int32_t max_replicas;
    bool reads_gpuscaler;     /**< an External metric named gpuscaler_* */
    bool reads_desired;       /**< gpuscaler_desired_replicas among them */
    bool desired_average_one; /**< ... with an AverageValue target of 1 */
    bool desired_unselected;  /**< ... with no selector (every tracked Deployment of the
                                   namespace, their counts summed) */
    int32_t up_window_s;      /**< behavior.scaleUp.stabilizationWindowSeconds (0 unset) */
    int32_t down_window_s;    /**< behavior.scaleDown.stabilizationWindowSeconds (300 unset) */
    double up_tolerance;      /**< behavior.scaleUp.tolerance, NAN unset (the cluster's) */
    double down_tolerance;
    bool up_disabled, down_disabled; /**< behavior.*.selectPolicy Disabled */
    /** behavior.scaleUp.policies; none: the defaults (4 Pods or 100 Percent
     *  per 15 s) */
    struct ctl_hpa_policy up_policies[CTL_HPA_POLICIES];
    uint8_t n_up_policies;
    bool up_policies_more;    /**< more than CTL_HPA_POLICIES: the pace is not checked */
    bool up_select_min;       /**< behavior.scaleUp.selectPolicy Min (else Max) */
};
/** No HPA targets a Deployment in mode external-metric for this long before
 *  it is told (one made just after the Deployment is not missing). */
#define CTL_HPA_NONE_GRACE_MS (30 * 1000)

/** The least (or the most) of the values seen over the last two periods of a
 *  length that may change from one period to the next (promsrc.c). */
struct ctl_win2 {
    int64_t v[2];     /**< the period now's and the one before's */
    bool have[2];     /**< ... seen */
    int64_t start;    /**< when the period now began (unix ms; 0 none yet) */
};

/** Start the period t falls in, of len (pqlag.c). */
void ctl_win2_roll(struct ctl_win2 *m, int64_t t, int64_t len);
/** The least (most) value of m's two periods into *out; false when none. */
bool ctl_win2_get(const struct ctl_win2 *m, bool most, int64_t *out);
/** Add v, seen at t (unix ms), to m (periods of len ms, on a grid from m's
 *  first call); returns the least (most) of its two periods. */
int64_t ctl_win2_add(struct ctl_win2 *m, int64_t t, int64_t len, int64_t v, bool most);

/** Event reasons rate-limited each on its own (report.c's list). */
#define CTL_EVENT_SLOTS 18

/** Per tracked Deployment. Owned by the controller's workload table. */
struct ctl_wl {
    struct ctl_wl *next;          /**< hash chain */
    char *ns, *name, *uid;
    bool seen;                    /**< mark for the sweep after each tick */
    int64_t tracked_since_ms;     /**< when this instance started tracking it */
    bool config_ok;
    bool invalid_reported;        /**< the current config_error has an Event */
    struct ctl_workload_config cfg;
    char config_error[400];       /**< last InvalidAnnotation message */
    struct policy_state pst;
    struct forecast *fc;
    bool checkpoint_loaded;       /**< its checkpoint ConfigMap's read was asked for */
    bool checkpoint_ready;        /**< the stored checkpoint was read, or there is none:
                                       saving may replace it */
    bool checkpoint_failed;       /**< a read of it failed (it is asked for again) */
    uint64_t ckpt_saved_seq;      /**< the save of its ConfigMap that last carried it (0
                                       none): the least recent go first when not all fit */
    int64_t ckpt_foreign_until;   /**< its stored state is another release's format: not
                                       saved over until then (unix ms; checkpoint.c) */
    struct policy_decision last;  /**< last decision */
    bool have_last;
    int64_t last_decision_ms;
    int32_t spec_replicas;        /**< seen at the last tick */
    int64_t learned_cold_start_ms; /**< the look-ahead's: schedule delay + load time */
    int64_t learned_schedule_ms;  /**< creation to PodScheduled, longest of the Ready pods */
    int64_t learned_load_ms;      /**< PodScheduled to Ready (model load), longest of them */
    int64_t prior_schedule_ms;    /**< the two above as the status annotation had them when
                                       tracking began (a restart, a shard moved): 0 none */
    int64_t prior_load_ms;
    int64_t prior_at_ms;          /**< the time of that status: pods made later are not
                                       bounded by it (another model may load longer) */
    bool zero_managed, zero_known; /**< at 0 replicas since min-replicas 0 (sticky until
                                        seen above 0); known once observed */
    uint64_t zero_changes;        /**< the Deployment's replicas_changes then */
    int32_t told_from, told_to;   /**< the action whose Event was sent, while it is decided
                                       tick after tick and the count has not moved (one
                                       decided again is not told again) */
    const char *tell_reason;      /**< the action Event its write sends once it succeeds
                                       (static), NULL none */
    int32_t tell_from, tell_to;   /**< ...the count it is from and to */
    char tell_msg[384];           /**< ...its message (the decision's explanation) */
    struct ctl_cold_pod *cold_pods; /**< the pods' first Ready, sorted by name, owned */
    size_t cold_pods_n;
    uint8_t unsched_gpu;          /**< enum kube_gpu_resource the pods last waited for */
    double service_ms;            /**< service time learned by Little's law, 0 unknown */
    bool service_from_busy;       /**< service_ms was learned from the busy-time counter (a
                                       window's average), not the in-flight gauge */
    double svc_inflight, svc_rate; /**< its smoothed numerator and denominator */
    double request_size;          /**< demand-unit tokens: weighted tokens per request last
                                       measured, 0 unknown */
    double refused_rps;           /**< requests the pods refused (rejected_metric), in the
                                       demand unit, at the last measured tick; NAN unknown */
    struct capacity cap;          /**< the per-GPU capacity the metrics show (calibrate.c) */
    struct capacity_estimate cap_est; /**< its estimate at the last tick */
    double cap_in_use;            /**< capacity the last decision sized with, NAN none */
    enum capacity_source cap_source;
    int cap_mismatch;             /**< -1/0/+1: the configured value below/within/above it */
    const char *cap_in_service;   /**< ctl_status_capacity.in_service of the last tick */
    double plan_coverage;         /**< share of the forecaster's resolved plans that held */
    int64_t plan_resolved;        /**< how many resolved */
    bool plan_recent;             /**< the plan is the recent window peaks' quantile */
    bool plan_learned;            /**< the upper plan is the learned one (forecast learn.c) */
    bool plan_seasons;            /**< the recent seasons' plan raised the likely peak
                                       (forecast seasons.c) */
    /* Deployment writes. The /scale read+patch and the status annotation PATCH
     * change the same object (one resourceVersion), so they never overlap:
     * each waits for the other, or the scale patch's precondition fails on
     * this instance's own annotation write (a self-inflicted 409). */
    bool scaling;                 /**< a GET/PATCH of /scale is in flight */
    bool scale_waiting;           /**< a scale write waits for the write in flight (the
                                       status PATCH, or an older /scale write) */
    int32_t scale_target;         /**< the waiting write's */
    int32_t scale_from;           /**< spec.replicas the decision to scale saw */
    int32_t want_target;          /**< the count the newest tick's decision writes; -1 none
                                       (held, invalid annotations, not leading): a write of
                                       another count still in flight is not patched */
    int scale_attempts;
    /* reporting */
    enum policy_reason last_event_reason;
    int64_t last_event_ms[CTL_EVENT_SLOTS + 1]; /**< when each Event reason was last sent
                                       (report.c's list; the last slot: the others) */
    uint64_t invalid_told;        /**< hash of the last InvalidAnnotation Event's message */
    bool cache_held;              /**< its namespace's list+watch failed for
                                       CTL_CACHE_DOWN_HOLD_MS at this tick: it holds */
    const char *cache_down_what;  /**< that list+watch's path (the cache's), "" */
    bool parked_told;             /**< this spell at Parked has had its Event */
    uint64_t bounds_told;         /**< the last "only the replica bounds" change told
                                       (from << 32 | to), 0 when a hold was told since */
    char *status_written;         /**< last status annotation (without time) */
    int64_t status_written_ms;
    int32_t status_desired;       /**< its desired replicas */
    bool status_unavailable;      /**< ... and whether its reason is not served
                                       (ctl_reason_served) */
    bool status_inflight;         /**< a status annotation PATCH is in flight */
    bool status_deferred;         /**< a status update waits for a Deployment write in flight */
    bool invalid_pending;         /**< the InvalidAnnotation status is to be written (it
                                       waits for a write in flight, or its last try failed) */
    char invalid_key[160];        /**< ... its annotation key and message */
    char invalid_msg[200];
    uint8_t status_q;             /**< the status queue it waits in (status.c), 0 none */
    struct ctl_wl *sq_prev, *sq_next; /**< its neighbours there */
    /** What else scales it (mode scale), "" nothing: "the HorizontalPodAutoscaler
     *  web", "the KEDA ScaledObject web-so (through its HorizontalPodAutoscaler
     *  keda-hpa-web-so)" */
    char conflict[200];
    struct ctl_hpa_facts hpa;     /**< the HPA that applies its count (external-metric) */
    char *hpa_told;               /**< the HPASettings advice last logged, NULL none */
    bool gpus_told;               /**< "no GPU limit: sized as 1 GPU" was logged */
    /* backlog (running + queued requests) samples, for demand = completions +
     * backlog growth */
    int64_t bl_t[CTL_BACKLOG_SAMPLES];
    double bl_v[CTL_BACKLOG_SAMPLES];
    int bl_n, bl_head;
    /* Prometheus-server source (promsrc.c): the last answer, used by the next tick */
    struct scrape_result pq_last;
    bool pq_have, pq_inflight, pq_seeded;
    int64_t pq_lag_ms;            /**< the ingestion lag, where the window queries are
                                       evaluated: the least by which Prometheus' newest
                                       sample of the request counter lay behind a per-pod
                                       query's time over the last two periods of a scrape
                                       interval (CTL_PQ_LAG_PERIOD_MS while that is not
                                       known), a scrape interval's sawtooth left out; or
                                       pq_need_win's, when larger (promsrc.c, pq_lag) */
    struct ctl_win2 pq_lag_win;   /**< the least lags of those two periods */
    struct ctl_win2 pq_need_win;  /**< the most lag, less an interval, of the pods' oldest
                                       newest sample over them: pq_lag_ms is at least that
                                       (promsrc.c, pq_lag) */
    struct ctl_win2 pq_iv_win;    /**< the scrape interval: the least ctl_pq_step over
                                       two periods of CTL_PQ_LAG_PERIOD_MS */
    bool pq_lag_known;            /**< pq_lag_ms was measured (else 0) */
    bool pq_lag_told;             /**< a lag of CTL_PQ_LAG_TOLD_MS or more was logged */
    int pq_dup_pods;              /**< pods of the last per-pod answer with an address
                                       more than one scrape target has (promql_pod.dup: a
                                       plain sum counts their requests twice or more), as
                                       last logged (promsrc.c, pq_dup_check) */
    bool pq_grew_told;            /**< an answer dropped for a lag grown by
                                       CTL_PQ_LAG_REASK_MS past the sawtooth was logged, and
                                       none since was back within the sawtooth */
    uint32_t pq_gen;              /**< the queries' generation, new when the annotations
                                       change what they ask (ctl_pq_requery): an answer
                                       to the earlier ones is dropped */
    struct promql_pods pq_pods;   /**< its per-pod answer, owned */
    bool pq_pods_have;            /**< pq_pods is the last answer's (its query answered) */
    bool pq_pods_failed;          /**< the per-pod query of the default rate (which pods it
                                       counts) was asked and failed or was left out */
    uint64_t pq_logged[5];        /**< the failures logged of the rate, p99, busy-time,
                                       per-pod and refused queries (ctl_pq_log; 0: none) */
    bool pq_pods_fresh;           /**< ... and no tick has taken its backlog yet */
    struct ctl_pq_pod *pq_bl;     /**< each pod's last running + waiting, owned */
    size_t pq_bl_n;
    double pq_running, pq_waiting; /**< their sums over the pods the rate counts (all the
                                       pods when that is not known), -1 unknown */
    double pq_queue;              /**< waiting of every pod answered: the queue to drain */
    double pq_backlog;            /**< running + waiting of every pod, -1 unknown */
    double pq_departed;           /**< what pods that left held, summed (scrape_result's
                                       departed) */
    int64_t pq_seed_after;        /**< a failed seed is asked again from then (unix ms) */
    uint32_t fc_gen;              /**< the forecaster's generation, new each time one is
                                       created: a seed asked for another is not adopted */
    /* recording */
    uv_file record_fd;            /**< -1 when closed */
    struct ctl_rec_write *rec_req; /**< the write in flight (report.c), NULL none */
    struct util_buf rec_pending;  /**< rows waiting for it */
    int64_t record_next_ms;
};

#define CTL_WL_BUCKETS 1024
/** Forecaster seeds from Prometheus in flight at most: after a start or a
 *  takeover, hundreds of Deployments would each ask for a week at once,
 *  beside the instant queries every tick needs. */
#define CTL_SEEDS_MAX_INFLIGHT 4
/** A failed seed is asked again this much later. */
#define CTL_SEED_RETRY_MS (5LL * 60 * 1000)
/** Prometheus' newest samples this far behind its query's time at most are
 *  waited for (promql_target.lag_ms); beyond it, queries stay there (the
 *  answers are stale at any metrics-stale-after). */
#define CTL_PQ_LAG_MAX_MS (10LL * 60 * 1000)
/** A lag of this much or more is logged, and its end once under two
 *  thirds of it: a remote-write or ingestion delay, not a scrape interval's. */
#define CTL_PQ_LAG_TOLD_MS 30000
/** The ingestion lag is the least lag seen over two periods of a scrape
 *  interval, or of this while the interval is not known (which is measured
 *  over two of these): a sample is a scrape interval old at most when a
 *  query comes, so the lag each one measures runs a sawtooth of that height
 *  over the delay itself (up to 60 s at Google Managed Prometheus' default
 *  interval), and its least over more than an interval is the delay (the
 *  window's end then holds samples up to an interval old, which rate()
 *  extrapolates over). */
#define CTL_PQ_LAG_PERIOD_MS 150000
/** The first answer after a start or a change of the queries, asked before
 *  any lag was known, is dropped when the lag it measures is this much or
 *  more, and asked again at once where the samples end: its 2-minute rate
 *  missed that much of its window's end and read an eighth or more low.
 *  Also how far past the sawtooth a dropped answer's lag is told at info. */
#define CTL_PQ_LAG_REASK_MS 15000

/** The scrape interval this answer shows (0 none): the least of each pod's
 *  (at_ms - before_ms) / samples in pods (asked at asked_ms, its window
 *  window_ms long: not a pod whose sample before it lies on its edge, which
 *  Prometheus 2 counts in the window too), and the shortest step of a pod's
 *  newest sample between two per-pod answers (old and pods, each sorted by
 *  name), a whole number of intervals (the tick's, when ticks are further
 *  apart: the samples tell it then); from pods whose series were all
 *  sampled at once (two targets of a pod, scraped apart, step by their
 *  offset). (pqlag.c) */
int64_t ctl_pq_step(const struct promql_pods *old, const struct promql_pods *pods,
                    int64_t asked_ms, int64_t window_ms);
/** The scrape interval: the shortest step (0: none this answer) over m's two
 *  periods of CTL_PQ_LAG_PERIOD_MS, at t; 0 not known. */
int64_t ctl_pq_interval(struct ctl_win2 *m, int64_t step, int64_t t);
/** How far an answer's samples lie behind its per-pod query's time asked_ms,
 *  clamped to 0..CTL_PQ_LAG_MAX_MS: *fresh, the newest sample of any pod;
 *  *old, the oldest of the counted pods' series' newest samples (a series
 *  more than 1.5 iv behind its pod's newest, stale, left out), of the pods
 *  within 2 iv of the freshest (iv 0: the freshest alone). false when the
 *  answer has no times. */
bool ctl_pq_lags(const struct promql_pods *pods, int64_t asked_ms, int64_t iv, int64_t *fresh,
                 int64_t *old);
/** Where the window queries are evaluated, how far back: the larger of the
 *  least fresh lag over least's two periods of iv, or of tick (the decision
 *  interval) when longer (CTL_PQ_LAG_PERIOD_MS while iv is 0; clamped to
 *  1 s..that), and, iv known, the most of old - iv over most's. Adds this
 *  answer's (at t) to both. */
int64_t ctl_pq_estimate(struct ctl_win2 *least, struct ctl_win2 *most, int64_t t, int64_t iv,
                        int64_t tick, int64_t fresh, int64_t old);
/** A list+watch failing this long (kube_cache_ns_down_ms) may have missed
 *  pods started or gone: the Deployments it covers hold, as on missing
 *  metrics, until it is current again. Longer than the reflector's backoff steps up to 25.6 s,
 *  so one failed watch or a short API server restart does not trigger it. */
#define CTL_CACHE_DOWN_HOLD_MS 30000
/** A wall clock that moved this much more or less than the boot clock (util_now_boot_ms)
 *  between two ticks was set (NTP slews at most 0.5 ms a second). */
#define CTL_CLOCK_STEP_MS 2000
/** Reports (status, events, checkpoints) in flight at most, so 1,000
 *  workloads do not burst 3,000 requests at once: statuses wait in a queue
 *  for their turn (status.c), the other reports for a later tick. */
#define CTL_REPORT_MAX_INFLIGHT 32

/** A FIFO of workloads waiting to write their status (status.c). */
struct ctl_status_queue {
    struct ctl_wl *head, *tail;
    size_t len;
};

struct controller {
    uv_loop_t *loop;
    struct kube *kube;
    struct kube_cache *cache;
    struct scrape *scrape;
    struct promql *promql;
    const struct ctl_config *cfg;
    char *identity;
    bool dry_run, leader_elect;
    char *record_dir;
    const char *checkpoint_prefix; /**< cfg->checkpoint_configmap */
    struct ctl_ckpt *ckpt;        /**< per checkpoint ConfigMap (checkpoint.c), owned */
    size_t nckpt;                 /**< cfg->checkpoint_configmaps */
    uint32_t fc_gens;             /**< forecasters created so far (their generations) */
    uv_timer_t tick_timer;
    uv_timer_t elect_timer;
    uv_timer_t hpa_timer;
    int open_handles;             /**< timers not yet closed */
    bool closing;
    controller_close_cb close_cb;
    void *close_arg;
    int pending_io;               /**< requests in flight (must reach 0 before free) */
    int report_inflight;          /**< status/event/checkpoint writes in flight */
    int seeds_inflight;           /**< Prometheus seeds (query_range) in flight */
    struct ctl_status_queue status_q[2]; /**< decisions, then refreshes (status.c) */
    double status_tokens;         /**< refresh writes allowed now (a token bucket) */
    uint64_t status_tokens_ns;    /**< when it was last filled (uv_hrtime) */
    uv_timer_t status_timer;      /**< wakes the refreshes when the next token is due */
    uint64_t status_writes[2];    /**< status writes sent: decisions, refreshes */
    int ckpt_reads;               /**< checkpoint ConfigMap reads in flight */
    struct ctl_wl *table[CTL_WL_BUCKETS];
    size_t nwl;
    struct ctl_leader leader;
    bool elect_inflight;
    bool release_pending; /* closing with a lease read or write in flight: release after it */
    bool release_reread;  /* the release met a 409 and read the lease again (once) */
    bool shard_list_refused;       /* a fenced term's Lease list met a 403 (logged once) */
    uint64_t shard_wait_told_term; /* the term whose wait for shard Leases was logged */
    uint64_t shard_list_told_term; /* the term whose failed Lease list was logged */
    bool release_hold;    /* closing with checkpoint saves in flight: release after them
                             (or after CTL_CLOSE_SAVE_WAIT_MS, hold_timer) */
    uv_timer_t hold_timer;
    bool released;
    /* sharding (shards.c); shards is NULL without it */
    struct ctl_shard *shards;
    uint32_t nshards;
    struct ctl_shard_members *members;
    struct ctl_shard_watch *shard_watch; /* sharding off: the shard Leases a new term waits
                                            for (elect.c), NULL until first listed */
    /* HPA conflicts: "ns/name\tdescription" of Deployments targeted by an HPA,
     * the description as struct ctl_wl's conflict says it */
    char **hpa_targets;
    size_t n_hpa_targets;
    int64_t cache_down_ms;        /**< kube_cache_down_ms at this tick */
    const char *cache_down_what;  /**< its collection path (the cache's), "" */
    bool cache_held;              /**< cache_down_ms >= CTL_CACHE_DOWN_HOLD_MS (logged once) */
    char **hpa_targets_next;
    size_t n_hpa_targets_next;
    char **hpa_failed_ns;         /* namespaces whose list failed this round, owned: their
                                     last round's targets still hold, or the guard would
                                     drop for a minute */
    size_t n_hpa_failed_ns;
    int hpa_lists_pending;
    bool hpa_soon;                /* a Deployment is newly tracked: list the HPAs after this
                                     tick, not at the next minute */
    /* metrics */
    uint64_t decisions[POLICY_REASON_COUNT];
    uint64_t invalid_annotations;
    uint64_t scale_patches, scale_conflicts, scale_errors;
    uint64_t events_sent, events_suppressed;
    uint64_t ticks;
    int64_t last_trim_ms;
    int64_t tick_wall_ms;         /* the last tick's wall clock (0: none yet) ... */
    int64_t tick_boot_ms;         /* ... and util_now_boot_ms */
    uint64_t clock_steps;         /* wall clock steps seen (ctl_clock_step) */
    double last_tick_seconds;
};

/* ctl.c */
struct ctl_wl *ctl_wl_find(struct controller *c, const char *ns, const char *name);
void ctl_io_begin(struct controller *c);
void ctl_io_end(struct controller *c);
/** At most this long a close waits for its checkpoint saves before the Leases are released. */
#define CTL_CLOSE_SAVE_WAIT_MS 5000
/** A tick's clocks: a wall clock step between two ticks (the wall's time
 *  less the boot clock's, beyond CTL_CLOCK_STEP_MS) is logged and every
 *  workload's rule clocks, learned times and Event rate limits move with
 *  it. */
void ctl_clock_step(struct controller *c, int64_t now, int64_t boot);
/** A Deployment another replica decides for (its shard's owner, or the
 *  leader), as the decision that replica wrote in its gpuscaler.io/status
 *  annotation serves it: false when there is none to serve (no status, no
 *  time, a count that is not a whole number in [0, INT32_MAX]). live: that
 *  replica's Lease is valid and this cache is current. */
bool ctl_status_view(const struct controller *c, const struct kube_deployment *d, int64_t now,
                     bool live, struct ctl_workload_view *v);
/** Closing: the checkpoint saves the Lease releases waited for have ended (why says
 *  how); the releases go now. No-op when none waits. */
void ctl_release_hold_end(struct controller *c, const char *why);
/** Closing: end the hold when no checkpoint save and no status or /scale
 *  write is in flight any more (called as each ends). */
void ctl_release_hold_check(struct controller *c);

/* scale.c */
/** Write spec.replicas = target through /scale (read, patch with the read
 *  resourceVersion, retry on 409); waits for a status PATCH in flight. from:
 *  the spec.replicas the decision saw; when the read finds another count, or
 *  another Deployment of that name (uid), nothing is written and the next
 *  tick decides again. */
void ctl_scale_write(struct controller *c, struct ctl_wl *w, int32_t from, int32_t target);
/** Start the scale write that waited for the status PATCH (w->scale_waiting). */
void ctl_scale_resume(struct controller *c, struct ctl_wl *w);

/* ---- one workload, one tick: the pipeline (decide.c, observe.c) ---------- */

/** The observe stage's answer for one workload at one tick. */
struct ctl_obs {
    struct scrape_result m;   /**< the metrics; m.valid false: hold, m.why says why */
    int32_t spec;             /**< replicas asked for (the Deployment's spec) */
    bool zero_ours;           /**< spec is 0, and got there while min-replicas was 0
                                   (not parked by hand: observe.c zero_managed) */
    int32_t serving;          /**< replicas serving: ready, less those still warming */
    int32_t unschedulable;    /**< pods Pending because no node has a free GPU
                                   (PodScheduled False, Unschedulable) */
    int32_t stalled;          /**< pods failing to start, or not ready for
                                   POLICY_STALL_COLD_STARTS cold starts (ctl_pod_stalled) */
    char stalled_pod[254];    /**< one of them, a failing one if any; "" if none */
    uint8_t stalled_failing;  /**< its enum kube_pod_failing */
    double gpus;              /**< GPUs per replica */
    double arrival_rps;       /**< arrivals over the rate window in the demand unit:
                                   completions + refused requests + growth of running +
                                   waiting requests (x request_size) */
    int64_t rate_window_ms;   /**< the span arrival_rps averages over (scrape.rate-window,
                                   or the PromQL window from Prometheus) */
    double recent_rps;        /**< the same over the newest scrapes; NAN unknown */
    int64_t recent_ms;        /**< the span recent_rps counts over: its backlog growth's */
    int64_t recent_span_ms;   /**< ... and its completions' (the pods' samples, at most
                                   recent_ms): the span of its Poisson noise */
    bool recent_growth_known; /**< the Prometheus source measured recent_growth: */
    double recent_growth;     /**< the backlog's growth between the pods' two newest
                                   samples (req/s): added to recent_rps instead of the
                                   growth between the ticks' samples */
    double service_ms;        /**< service time learned by Little's law, <= 0 unknown */
    double completions;       /**< completions in the demand unit (requests/s, or weighted
                                   tokens/s); NAN when !m.valid */
    double request_size;      /**< demand units per request: 1 for requests, the measured
                                   weighted tokens per completed request for tokens */
};

/** Whether a pod is stalled at now (unix ms): neither ready, nor being
 *  deleted, nor waiting for a GPU no node has, and either failing (a container
 *  in CrashLoopBackOff, ImagePullBackOff, ...: kube_pod.failing) or not ready
 *  for stall_ms since the latest of its creation, its scheduling and its
 *  Ready condition's last change (a readiness probe that never passes). Not
 *  capacity on its way. */
bool ctl_pod_stalled(const struct kube_pod *p, int64_t now, int64_t stall_ms);
/** How far a forecaster's rate floor may be from the configuration's (the
 *  capacity times the target utilization) before it starts afresh. */
#define CTL_FLOOR_KEPT 4.0
/** Whether a forecaster made with rate floor `have` is kept under a
 *  configuration whose floor is `want`: within CTL_FLOOR_KEPT either way. */
bool ctl_floor_kept(double have, double want);
/** Learn the cold start from w's pods: each pod's creation to PodScheduled
 *  and to Ready at its first Ready seen (kept in w->cold_pods while the pod
 *  exists), the longest of each over the pods; the learned_* fields are left
 *  as they are when no pod has one. */
void ctl_cold_start_learn(struct ctl_wl *w, const struct kube_pod *const *pods, size_t np);
/** Free w's per-pod cold starts. */
void ctl_cold_start_free(struct ctl_wl *w);

/** Whether two configurations count demand alike (unit, and for tokens the
 *  prompt weight): learned rates and capacities carry over only then. */
bool ctl_same_demand_unit(const struct policy_config *a, const struct policy_config *b);
/** "requests", or "tokens;prompt-token-weight=W": stored with checkpoints. */
void ctl_demand_unit_label(const struct policy_config *p, char *out, size_t len);

/** The whole tick of one tracked Deployment: configure, then the stages. */
void ctl_decide(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                int64_t now, bool leading);
/** Keep the tick's backlog (running + waiting requests) sample; a time not
 *  after the newest sample's is ignored. The newest CTL_BACKLOG_SAMPLES are
 *  kept. */
void ctl_backlog_push(struct ctl_wl *w, int64_t now, double bl);
/** Forget the backlog samples and the Prometheus source's per-pod state
 *  (a new metrics source counts its backlog afresh). */
void ctl_backlog_reset(struct ctl_wl *w);
/** Whether configurations a and b ask Prometheus the same queries: the same
 *  metrics source, PromQL templates, profile and metrics. */
bool ctl_pq_queries_same(const struct ctl_workload_config *a,
                         const struct ctl_workload_config *b);
/** The queries changed: the answer kept and the one in flight were to the
 *  earlier ones. Drop both (the next tick asks the new queries, and holds
 *  until they answer). */
void ctl_pq_requery(struct ctl_wl *w);
/** Whether backlog samples taken under configuration a compare with b's: the
 *  same metrics source and the same request counter, in-flight and queue
 *  gauges (another sums other gauges: a running sum of 8 ranks' 400 read as
 *  50 after an inflight-metric fix, and arrivals as half for a window). */
bool ctl_backlog_comparable(const struct ctl_workload_config *a,
                            const struct ctl_workload_config *b);
/** The backlog's growth (req/s) from the oldest sample within window_ms of
 *  now to bl, the backlog now; 0 without one. The samples are the ticks',
 *  which come a few ms late: a sample up to slack_ms (half a decision
 *  interval) further back counts too, or the previous tick's, a decision
 *  interval and a ms ago, would never count for a window of one decision
 *  interval. */
double ctl_backlog_growth(const struct ctl_wl *w, int64_t now, int64_t window_ms,
                          int64_t slack_ms, double bl);
/** The serving replicas of o's metrics: the pods counted and those whose
 *  metrics failed (pods_failed) or are not recent (stale, not warming), each
 *  of these an average share of what the counted ones carry (the rates, the
 *  in-flight and the queued gauges scaled up by serving / counted). Warming
 *  pods are in neither: replicas still starting. */
void ctl_obs_serving(struct ctl_obs *o);
/** The shortest span the workload's recent arrivals (ctl_obs.recent_rps, the
 *  rate the forecaster keeps the peaks of) count over: two service times,
 *  configured, or learned from the busy-time counter, within half the rate
 *  window (policy_recent_span_ms); 0 while no such service time is known. */
int64_t ctl_recent_min_ms(const struct controller *c, const struct ctl_wl *w);
/** How far back the recent arrivals look (recent_ms: the backlog's growth
 *  counts over it) and the span their noise is judged on (span_ms): about
 *  two and a half scrape intervals, a decision interval, or min_ms
 *  (ctl_recent_min_ms), the longest; the span is the measured one
 *  (scrape_result.recent_span_ms, 0 unknown) when shorter. From Prometheus
 *  both are the measured span, when known. */
void ctl_recent_spans(int64_t scrape_interval_ms, int64_t decision_ms, int64_t min_ms,
                      int64_t measured_span_ms, bool prometheus, int64_t *recent_ms,
                      int64_t *span_ms);
/** The window a Deployment's rate counts over: the scraper's rate window,
 *  or for the Prometheus source the queries' {{window}} (promql_window_ms;
 *  PROMQL_WINDOW_S before the Prometheus client exists). */
int64_t ctl_rate_window_ms(const struct controller *c, enum ctl_source source);

/** Ask Prometheus for the workload's queries (the answer serves the next
 *  tick) and, once, seed its forecaster; r gets the last answer (promsrc.c). */
void ctl_pq_measure(struct controller *c, struct ctl_wl *w, int64_t now,
                    struct scrape_result *r);

/** One line when a Prometheus query starts failing or fails for another
 *  kind of reason (its reason without the numbers in it: a timeout's
 *  milliseconds), and one when it answers again (why NULL or ""): not one a
 *  tick. part: 0 rate, 1 p99, 2 busy-time, 3 per-pod. Returns whether it
 *  logged. */
bool ctl_pq_log(struct ctl_wl *w, int part, const char *why);
/** What w's pods scraped by more than one target (those of w->pq_pods,
 *  the last per-pod answer kept) do to its numbers, and where to look, into
 *  out (900 bytes hold it); "" when none, or no answer is kept. Told by a
 *  DuplicateScrape Event. (promsrc.c) */
void ctl_pq_dup_msg(const struct ctl_wl *w, char *out, size_t outlen);

/** The last per-pod answer against the Deployment's pods in the cache. */
struct ctl_pq_match {
    bool counted_known;   /**< the answer says which pods the rate counts */
    bool by_cache;        /**< ... or, its query failed, the cache's Ready times do */
    int ready;            /**< Ready pods (running, not deleting, with an address) */
    int counted;          /**< ... in the rate */
    int warming;          /**< ... not in it, Ready for less than the grace */
    int missing;          /**< ... not in it after the grace */
    char missing_pod[254]; /**< one of those */
    double running, waiting; /**< summed over the pods the rate counts, -1 unknown */
    double queue;         /**< waiting of every pod answered (the queue to drain), -1 */
    double backlog;       /**< running + waiting of every pod, -1 unknown */
    double departed;      /**< w->pq_departed */
    bool recent_known;    /**< every counted pod has a recent sample and an older one
                               (the newest at least min_span_ms older, else the
                               oldest kept): */
    double recent_rate;   /**< ... their completions between them (req/s), summed */
    bool growth_ok;       /**< ... each with its backlog then, and no other Ready pod: */
    double recent_growth; /**< ... their backlog's growth between them (req/s) */
    int64_t recent_span_ms; /**< ... the shortest span between them of the pods whose
                                 samples reach min_span_ms back; of all, when none do */
    int64_t short_span_ms;  /**< the shortest of the pods' that do not (internal) */
    bool refused_known;   /**< the spec names a rejected_metric, and the default
                               queries count pods: */
    double refused_recent; /**< ... the counted pods' refused requests between the recent
                                rate's samples (req/s), summed (their window rate is a
                                query of its own, scrape_result.rejected_rate) */
};

/** Match w's last per-pod answer against pods at now (unix ms): a Ready pod
 *  the rate does not count is warming for grace_ms after its Ready
 *  transition, missing after. The recent rate counts each pod over
 *  min_span_ms at least where its samples reach so far back
 *  (ctl_recent_min_ms; 0: its two newest). A fresh answer updates w's per-pod backlog
 *  (a Ready pod absent from it keeps its last value; one gone adds its
 *  value to the departed). Without an answer m says nothing is known, but
 *  when the default rate's per-pod query failed: then a pod Ready within
 *  grace_ms is warming and the others counted (by_cache). */
void ctl_pq_match(struct ctl_wl *w, const struct kube_pod *const *pods, size_t np, int64_t now,
                  int64_t grace_ms, int64_t min_span_ms, struct ctl_pq_match *m);
/** The match into the observation: the backlog fields; when the rate's
 *  pods are known, warming pods are not serving, missing ones serve an
 *  average share (the rates scaled), and all warming, none counted or more
 *  than missing_fraction of the others missing make the metrics invalid
 *  with a why. */
void ctl_pq_apply(const struct ctl_pq_match *m, double missing_fraction, int64_t grace_ms,
                  struct ctl_obs *o);

/** observe: pods from the cache, metrics from the scraper or Prometheus, arrivals
 *  and the learned service time and cold start (updated in w). */
void ctl_observe(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                 int64_t now, struct ctl_obs *o);
/** demand: the observation as the policy's input (everything but the plan). */
void ctl_demand(const struct ctl_wl *w, const struct ctl_obs *o, int64_t now,
                struct policy_input *in);
/** A new forecaster for w (its configuration's), logged with why: its
 *  times out of range, or ahead of the clock. */
void ctl_forecast_restart(struct controller *c, struct ctl_wl *w, const char *why);
/** forecast: feeds the freshest arrival rate to w's forecaster and puts its
 *  plan over the look-ahead (cold start + decision interval) into in. */
void ctl_forecast(struct controller *c, struct ctl_wl *w, const struct ctl_obs *o, int64_t now,
                  struct policy_input *in);
/** calibrate: feeds the observation to w's capacity estimator and puts the
 *  policy configuration to size with into *use (capacity-per-gpu auto: the
 *  estimate); when leading, a CapacityMismatch Event for a configured value
 *  the evidence contradicts. False: no capacity yet (auto, nothing seen):
 *  the caller holds. */
bool ctl_calibrate(struct controller *c, struct ctl_wl *w, const struct ctl_obs *o, int64_t now,
                   bool leading, struct policy_config *use);
/** act: policy_decide (size and rules, with the calibrated configuration)
 *  into *dec, then, when leading, the /scale write and its Event (or a
 *  ScalerConflict Event instead). */
void ctl_act(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
             const struct policy_config *use, const struct policy_input *in, bool leading,
             struct policy_decision *dec);
/** The Parked Event of a Deployment parked by hand at zero: once a spell
 *  (w->parked_told), retried at the next tick when the report budget had no
 *  room; a decision of another reason ends the spell. */
void ctl_report_parked(struct controller *c, struct ctl_wl *w, const struct policy_decision *dec);
/** report: remember the decision, log it, record the trace, Events for held
 *  metrics and max-replicas, status annotation. */
void ctl_report(struct controller *c, struct ctl_wl *w, const struct kube_deployment *d,
                const struct ctl_obs *o, const struct policy_decision *dec, int64_t now,
                bool leading);

/* elect.c */
void ctl_elect_start(struct controller *c);
/** On close: stop acting at once; the Lease is written released once no read or
 *  renewal is in flight and no checkpoint save holds it (c->release_hold). */
void ctl_elect_release(struct controller *c);
/** The release ctl_elect_release deferred, if nothing holds it any more. */
void ctl_elect_release_resume(struct controller *c);
/** Free what the single leader's fenced terms allocated (c->shard_watch). */
void ctl_elect_free(struct controller *c);
/** A Lease object as read from the API (obj borrowed) into *l. */
void ctl_lease_from_json(const json_t *obj, struct ctl_lease *l);
/** How long a Lease read (the single leader's get, the shards' list) may
 *  take: renew-deadline less two retry periods, at least one retry period,
 *  so that after one hung read the next round still renews in time. Writes
 *  take up to renew-deadline. */
int64_t ctl_lease_read_within(const struct ctl_config *cfg);
/** The Lease object to create or update (resourceVersion when set); caller decrefs. */
json_t *ctl_lease_to_json(const char *ns, const char *name, const struct ctl_lease *l);

/* shards.c: sharding across replicas (sharding.enabled) */
/** Start the shard election rounds (every retry period). */
void ctl_shards_start(struct controller *c);
/** On close: stop acting for every shard at once, and release every held shard
 *  Lease and this member's Lease, as ctl_elect_release does. */
void ctl_shards_release(struct controller *c);
/** The releases ctl_shards_release deferred, if nothing holds them any more. */
void ctl_shards_release_resume(struct controller *c);
/** Free what ctl_shards_start allocated. */
void ctl_shards_free(struct controller *c);
/** Shards this instance holds and may act for now. */
uint32_t ctl_shards_held(const struct controller *c);
/** Live members seen at the last round (this one included once it renewed). */
size_t ctl_shards_members(const struct controller *c);
/** Whether the shard Lease of Deployment ns/name had a valid (unexpired)
 *  holder at the last round: its owner is alive and re-decides every tick. */
bool ctl_shards_owner_live(const struct controller *c, const char *ns, const char *name);
/** Handovers of this instance's shards so far: acquired, released, lost. */
void ctl_shards_handovers(const struct controller *c, uint64_t out[3]);
/**
 * May this instance write for Deployment ns/name now? Without sharding,
 * controller_leading(); with it, whether it holds that Deployment's shard
 * Lease and renewed it within renew-deadline (the same fence as the single
 * leader's). Every write path checks this right before writing.
 */
bool ctl_acting_for(const struct controller *c, const char *ns, const char *name);
/** The deadline of a write ctl_acting_for() fences: how long the term that
 *  allows it lasts without another renewal (at least 1 ms), so that a write
 *  sent again after a 429 never lands after the term; 0 (no deadline)
 *  without leader election; -1 when not acting: send nothing. */
int64_t ctl_acting_left_ms(const struct controller *c, const char *ns, const char *name);
/** Whether the shard of ns/name is being handed over by this replica, or
 *  the controller closes: no status or /scale write starts (those in flight
 *  end before the release). */
bool ctl_handing_over(const struct controller *c, const char *ns, const char *name);
/** Status and /scale writes in flight, of the tracked Deployments of shard
 *  (-1, or without sharding: all of them). */
size_t ctl_writes_inflight(const struct controller *c, int64_t shard);

/* shards.c (the member table, the plan) and shards-lease.c (the Lease
 * writes): their shared state and steps */
#include "shard/shard.h"

/** The shard index of this replica's member Lease, in the Lease steps. */
#define CTL_SHARDS_SELF (-1)

/* The one write of a Lease in flight at a time, and when the last answered:
 * a round steps only the Leases with no write in flight, and none whose write
 * answered after the round's list was sent (the list shows an older record). */
struct ctl_lease_io {
    bool busy;
    int64_t answered_ms;
};

struct ctl_shard {
    struct ctl_leader leader;  /**< this shard's election, as the single leader's */
    struct ctl_lease_io io;
    struct ctl_lease cur;      /**< as listed at the last round */
    char name[256];
    bool releasing;            /**< handed over by this instance: log "released" */
    bool handing;              /**< being handed over: no status or /scale write of its
                                    Deployments starts, and those in flight end first */
    uint8_t flush_rounds;      /**< rounds it waited for its checkpoints before a handover */
    bool reread;               /**< its release met a 409 and read the Lease again */
    int64_t free_since_ms;     /**< loop time it was first seen without a valid holder,
                                    -1 while held */
    char prev_holder[128];     /**< holder before this instance's write, for the log */
};

struct ctl_shard_member {
    char name[256];
    struct ctl_lease cur;
    struct ctl_leader obs;     /**< only observed: expiry on the local clock */
    bool seen;
    bool fresh;                /**< took a slot this round */
    int64_t stalled_until_ms;  /**< planned without until (loop time): it left the shards
                                    handed to it free */
};

struct ctl_shard_members {
    struct ctl_leader self;    /**< this replica's member Lease */
    struct ctl_lease_io self_io;
    bool self_reread;          /**< its release met a 409 and read the Lease again */
    char self_name[256];
    struct ctl_shard_member *m; /**< others' member Leases, at most SHARD_MAX_MEMBERS */
    size_t n;
    const char **holders;      /**< per shard, scratch for the plan */
    enum shard_action *act;    /**< per shard, scratch for the plan */
    int inflight;              /**< lists, writes and deletes in flight */
    bool listing;              /**< a list in flight: the next round waits for it */
    int64_t list_sent_ms;      /**< loop time the last list was sent */
    int deleting;              /**< member Lease deletes in flight */
    uint64_t member_rounds;    /**< rounds begun with the member Lease renewed */
    size_t live;               /**< live members at the last round */
    uint64_t acquired, released, lost;
    int64_t delete_after_ms;   /**< no member Lease deletes before (a failure backs off) */
    size_t full;               /**< member Leases without a slot in this list */
    int64_t full_told_ms;      /**< UNIX ms that was last logged */
    /** The single leader's Lease (leader-election.lease-name), watched: a
     *  replica with sharding off holds it, and while it does no shard is held
     *  (during a rollout that turns sharding on or off both would act) */
    struct ctl_leader single;
    int64_t single_told_ms;    /**< UNIX ms the wait for it was last logged */
    bool sync_told;            /**< the wait for the caches was logged */
};

/** Count a request in flight (a list, a write, a delete). */
void ctl_shards_io_begin(struct controller *c);
/** Its answer: sends the releases ctl_shards_release deferred once nothing
 *  is in flight; may free c when closing, so call it last. */
void ctl_shards_io_end(struct controller *c);
/** One log line per handover of this instance's shards, and the member
 *  Lease's own changes. */
void ctl_shards_log_transitions(struct controller *c);
/** Whether the round over the list last sent may write this Lease (shard,
 *  or CTL_SHARDS_SELF). */
bool ctl_shards_may_write(struct controller *c, int shard);
/** One election step of a Lease this instance wants (its member Lease or a
 *  shard to keep or acquire): write what the state machine asks for. */
void ctl_shards_step(struct controller *c, int shard, const struct ctl_lease *cur, int64_t now,
                     int64_t unix_now);
/** Stop acting for shard s and write its released record; why is logged. */
void ctl_shards_release_shard(struct controller *c, uint32_t s, int64_t unix_now,
                              const char *why);
/** Delete the member Leases of replicas gone for a while (live: the live
 *  members' identities, this one included). */
void ctl_shards_delete_gone(struct controller *c, const char *const *live, size_t nlive,
                            int64_t now);
/** Write the released record of every Lease last seen held by this replica. */
void ctl_shards_release_all(struct controller *c);

/* report.c */
/** An Event about w. Actions and new invalid annotations are sent at once;
 *  the rest once an interval per reason (10 min a Warning) and within the
 *  Events' budget. */
void ctl_event(struct controller *c, struct ctl_wl *w, const char *type, const char *reason,
               const char *message);
/** The same, but sent within its reason's interval too (still within the
 *  budget): for a message that reports a change the last one of its reason
 *  did not, such as the replica bounds acting while metrics are missing.
 *  Returns whether it was sent (false: over the budget, or not encodable). */
bool ctl_event_now(struct controller *c, struct ctl_wl *w, const char *type, const char *reason,
                   const char *message);
/** The t_seconds of the last row of a --record file (fd open for reading
 *  and writing, *size its length), or -1 when its last line is not a row (a
 *  header). A last line cut short (a crash, a full disk) is cut off the
 *  file first (*size then its new length), so that the next row starts a
 *  line of its own. */
int64_t ctl_record_last_t(int fd, int64_t *size);
/** Append the tick's rate to w's --record file (opened at its first row:
 *  a file continued keeps its rows' times increasing). */
void ctl_record(struct controller *c, struct ctl_wl *w, int64_t now_ms, double rate);
void ctl_record_close(struct ctl_wl *w);

/* status.c: the gpuscaler.io/status annotation */
/** The status queues' timer and token bucket. */
void ctl_status_init(struct controller *c);
/** Write w's status annotation when anything in it but its time changed, or
 *  it is due for its refresh: now, or at its turn in the queue when the
 *  report budget is full (decisions before refreshes). Deferred while a
 *  /scale write or another status PATCH of the same Deployment is in flight,
 *  and written when that ends. */
void ctl_status_update(struct controller *c, struct ctl_wl *w, int64_t now_ms);
/** Write the statuses that waited, as far as the budget allows now; called
 *  when a report ends, at the end of each tick and by the token timer. */
void ctl_status_pump(struct controller *c);
/** w is going away, or must not be written from the queue: take it out. */
void ctl_status_forget(struct controller *c, struct ctl_wl *w);
/** How old an owner's status annotation may be and still be served by
 *  another replica: 5/4 of status.refresh-interval (5 minutes). */
int64_t ctl_status_max_age_ms(const struct ctl_config *cfg);
/** The Deployment's gpuscaler.io/status annotation, parsed (the caller
 *  json_decref()s it), and its "time" in *at_ms (0 when absent or not a
 *  time); NULL when there is none or it is not JSON. */
json_t *ctl_status_read(const struct kube_deployment *d, int64_t *at_ms);
/** The InvalidAnnotation status of w's configuration error (key: the
 *  annotation; NULL: the one already given, again if its write failed):
 *  written at once, or when the Deployment write in flight ends. It replaces
 *  a decision's status queued or deferred. */
void ctl_status_invalid(struct controller *c, struct ctl_wl *w, const char *key,
                        const char *msg);
/** A Deployment write of w ended: the status that waited for it (an
 *  InvalidAnnotation one, or the last decision's) goes now. */
void ctl_status_resume(struct controller *c, struct ctl_wl *w);

/* metrics.c */
/** The per-Deployment series of /metrics: a Deployment's once decided and
 *  while its annotations are valid (invalid ones stop the decisions: the
 *  last one's numbers would be served as current). */
void ctl_write_workload_metrics(const struct controller *c, struct util_buf *b);

/* checkpoint.c: forecaster and capacity state in the fixed ConfigMaps
 * <prefix>-0 .. <prefix>-(checkpoint.configmaps - 1) */
void ctl_checkpoint_init(struct controller *c);
void ctl_checkpoint_free(struct controller *c);
/** The checkpoint ConfigMap (0..n-1) of namespace/name: FNV-1a 64 of "ns/name" mod n
 *  (checkpoint-keys.c, as the keys below). */
size_t ctl_checkpoint_index(const char *ns, const char *name, size_t n);
/** A ConfigMap key's most characters (the API server's). */
#define CTL_CKPT_KEY_MAX 253
/** The key of what (forecast, capacity, unit, uid) of namespace/name,
 *  <what>.<ns>_<name>; past CTL_CKPT_KEY_MAX the name is cut and
 *  .<16 hex digits of its hash> appended. out: CTL_CKPT_KEY_MAX + 1 bytes. */
void ctl_checkpoint_key(const char *what, const char *ns, const char *name, char *out,
                        size_t len);
/** Ask for w's stored state (one GET of its ConfigMap serves every Deployment
 *  waiting on it); w->checkpoint_ready once it was read or found absent. */
void ctl_checkpoint_load(struct controller *c, struct ctl_wl *w);
/** Once per tick: merge-patch each ConfigMap whose interval (10 min, staggered)
 *  is due, or every one when all (at shutdown). Only when leading. */
void ctl_checkpoint_tick(struct controller *c, int64_t now_ms, bool all);
/** Before a shard is handed over: with start, save now every ConfigMap that
 *  holds a Deployment of that shard tracked here (one not already being
 *  written). Returns how many of those ConfigMaps are still being written:
 *  0 once the new owner would read the current state. */
size_t ctl_checkpoint_flush_shard(struct controller *c, uint32_t shard, bool start);
/** How long a checkpoint entry of a format this release cannot read is left
 *  as it is (a newer release's, during a rollback or a rolling upgrade). */
#define CTL_CKPT_FOREIGN_HOLD_MS (60LL * 60 * 1000)
/** Take w's entries of a checkpoint ConfigMap's body (the JSON object read;
 *  cm its name, for the log): the capacity estimator's state (its runs of
 *  ticks forgotten) and the forecaster's, unless written for another
 *  Deployment of that name (uid) or another demand unit. An entry that
 *  does not decode is logged and leaves what w has. */
void ctl_checkpoint_restore(struct ctl_wl *w, json_t *body, const char *cm);
/** Checkpoint ConfigMaps being written now. */
size_t ctl_checkpoint_saving(const struct controller *c);
/** w is no longer tracked: remove its keys in its ConfigMap's next save. */
void ctl_checkpoint_forget(struct controller *c, const struct ctl_wl *w);
/** gpuscaler_checkpoint_configmap_bytes of each ConfigMap whose size is known. */
void ctl_checkpoint_write_metrics(const struct controller *c, struct util_buf *b);
/** What a read of checkpoint ConfigMap idx notes besides the states it
 *  restores (body: the object read): its size, each key's (for the saves'
 *  fit), and the keys to remove in the next save (with c->cache). */
void ctl_checkpoint_noted(struct controller *c, size_t idx, json_t *body);
/**
 * The keys of a checkpoint ConfigMap's body (binaryData, then data) that are
 * gpuscaler's (forecast., capacity., unit., uid.<ns>_<name>, ns a DNS-1123
 * label and name a DNS-1123 subdomain, or the hashed form of one) and name no
 * Deployment of ds whose ConfigMap (of nckpt) is idx, in a namespace that
 * synced(arg, ns) says is listed in full and current (no list+watch of it
 * failing since: a Deployment made meanwhile may be missing), or that stand
 * in the other map than the one gpuscaler writes them to (forecast. and
 * capacity. in data, unit. and uid. in binaryData: never read), whoever they
 * name: the keys a read prunes. A pure function, O(keys + Deployments).
 * Returns how many, in *out (each key and the array for the caller to xfree;
 * NULL when none; a key pruned in both maps is there twice), and unless
 * in_data is NULL, in *in_data whether each was found in data (else
 * binaryData; the same length, for the caller to xfree).
 */
size_t ctl_checkpoint_stale(const json_t *body, size_t idx, size_t nckpt,
                            const struct kube_deployment *const *ds, size_t nds,
                            bool (*synced)(const void *arg, const char *ns), const void *arg,
                            char ***out, bool **in_data);
/** Queue, for ConfigMap idx's next saves, the removal of the keys of body
 *  that ctl_checkpoint_stale() names, each from the map (binaryData, data)
 *  it was found stale in (a read's pruning, with c->cache's Deployments). */
void ctl_checkpoint_prune(struct controller *c, size_t idx, const json_t *body,
                          const struct kube_deployment *const *ds, size_t nds,
                          bool (*synced)(const void *arg, const char *ns), const void *arg);
/** A save of one checkpoint ConfigMap, as ctl_checkpoint_build() makes it. */
struct ctl_ckpt_save {
    json_t *bin, *text;    /**< the merge patch's binaryData and data, owned */
    size_t n;              /**< Deployments whose entries it carries */
    struct ctl_wl **left;  /**< Deployments with a state to save that did not fit, owned */
    size_t nleft;
    size_t ndrop;          /**< queued removals it carries (the oldest) */
    size_t queued;         /**< removals queued in all (each key once) */
    json_t *done;          /**< the queued removals it settles, each key to the maps it
                                settles (1 binaryData, 2 data; its own map's also when
                                tracked again): taken off the queue once it is written */
    size_t bytes;          /**< what the API server counts of the entries carried */
    int64_t projected;     /**< the ConfigMap's size after it, as projected from its last
                                read or write (at most 1 MiB when anything is saved) */
    int64_t within;        /**< the shortest term left of the Deployments carried, 0 none */
};
/**
 * Build the save of ConfigMap idx without sending it: the entries of the
 * Deployments this replica acts for (not one whose term ends within
 * CKPT_MIN_TERM_MS, not one whose stored state is another release's format
 * within its hold, not one whose state was never read), as many as fit in
 * the 1 MiB, and the queued removals. false when there is nothing to send.
 * Free it with ctl_checkpoint_save_free() either way.
 */
bool ctl_checkpoint_build(struct controller *c, size_t idx, struct ctl_ckpt_save *s);
void ctl_checkpoint_save_free(struct ctl_ckpt_save *s);

/* checkpoint-drop.c: a checkpoint ConfigMap's queue of removals and what its
 * keys weigh (for checkpoint.c) */
/** The maps of a ConfigMap a key is in or removed from: binaryData, data. */
#define CTL_CKPT_IN_BIN 1
#define CTL_CKPT_IN_TEXT 2
/** One checkpoint ConfigMap's state (c->ckpt[i]). */
struct ctl_ckpt {
    bool get_inflight, patch_inflight;
    int64_t next_save_ms;         /**< 0 until the first tick sets a staggered time */
    int64_t full_logged_ms;
    char **drop;                  /**< keys to remove in the next patches, owned, oldest
                                       first */
    size_t ndrop, dropcap;
    uint64_t builds;              /**< saves built (ctl_wl.ckpt_saved_seq) */
    json_t *dropset;              /**< the same keys, as an object's, each to the maps it
                                       is removed from (CTL_CKPT_IN_BIN |
                                       CTL_CKPT_IN_TEXT): a key leaves
                                       the queue once no map is left */
    bool size_known;
    int64_t size;                 /**< bytes the API server counts in it (data + decoded
                                       binaryData) as last read or written here */
    json_t *sizes[2];             /**< each key's share of size in binaryData and in data
                                       (integers), NULL unknown */
    bool resave;                  /**< the next save is the one after a refused one's read */
    json_t *requeued;             /**< the maps of each key queued (again) while a save was
                                       in flight, NULL none: that save does not settle
                                       them */
};

/** The map a key of ours is written to: unit. and uid. in data, the states in
 *  binaryData. */
int ctl_ckpt_home(const char *key);
void ctl_ckpt_drops_free(struct ctl_ckpt *k);
/** Queue key's removal from the maps in (CTL_CKPT_IN_BIN | CTL_CKPT_IN_TEXT). */
void ctl_ckpt_drop(struct ctl_ckpt *k, const char *key, int in);
/** The bytes of key in map as last read or written: 0 when not there or unknown. */
int64_t ctl_ckpt_share(const struct ctl_ckpt *k, const char *key, int map);
/** What the API server counts against the ConfigMap's 1 MiB, from an object
 *  it returned (a read, a save's answer). */
void ctl_ckpt_note_size(struct ctl_ckpt *k, json_t *body);
/** A save's answer came (done NULL when it was refused or settles nothing):
 *  the maps of each key it settled (done, as ctl_ckpt_save.done) leave the
 *  queue; a key with no map left leaves it. A map queued while the save was
 *  in flight stays queued, even one the save settles (the key removed again
 *  after the save was built, which wrote it as tracked then). */
void ctl_ckpt_drops_done(struct ctl_ckpt *k, const json_t *done);
/** A save's removals: the first ndrop queued keys, each from its maps (its
 *  own map not when tracked, a key of tracked), and the copy in the other map
 *  of each key carried (written by the save) wherever it waits in the queue,
 *  as nulls in nulls[0] (binaryData) and nulls[1] (data); what each settles
 *  into done. Returns the bytes they take off the ConfigMap. */
int64_t ctl_ckpt_drops_plan(const struct ctl_ckpt *k, size_t ndrop, const json_t *tracked,
                            const json_t *carried, json_t *const nulls[2], json_t *done);
/**
 * Whether a decision of this reason is served to an HPA (controller_visit,
 * and what the status annotation tells the other replicas): not a hold
 * for missing metrics, and not Parked (the HPA does nothing at 0 replicas,
 * and a 0 served as the count is raised by hand would scale it down). A
 * count the bounds set while the metrics are missing is served.
 */
static inline bool ctl_reason_served(enum policy_reason r)
{
    return r != POLICY_METRICS_UNAVAILABLE && r != POLICY_HOLD_PARKED;
}
/** List the HPAs of every namespace with a tracked Deployment (hpa.c):
 *  conflicts (mode scale) and ctl_wl.hpa (mode external-metric). */
void ctl_hpa_refresh(struct controller *c);
/** One namespace's list of HPAs answered (ok; items its items, NULL none) or
 *  failed, for a list sent at sent_ms: its targets join the round's, its
 *  Deployments tracked before sent_ms get their facts (hpa.listed); the last
 *  list's answer ends the round (hpa_lists_pending), whose targets replace
 *  the last round's except in the namespaces whose list failed. */
void ctl_hpa_answer(struct controller *c, const char *ns, bool ok, const json_t *items,
                    int64_t sent_ms);
/** Add one HPA that targets the Deployment to f (pure). */
void ctl_hpa_facts_add(struct ctl_hpa_facts *f, const json_t *hpa);
/**
 * What keeps the HPA described by f from applying gpuscaler's counts
 * between min and max (pure): writes one message into out ("" for none)
 * and returns the number of problems. Nothing before the first list.
 * up_step_s: how long gpuscaler itself takes from min to max, one
 * max-scale-up-step a decision interval (0: at once); an HPA's scale-up
 * policies are slow only when slower than that and than the defaults'.
 */
size_t ctl_hpa_advice(const struct ctl_hpa_facts *f, int32_t min, int32_t max,
                      int64_t up_step_s, char *out, size_t len);

#endif

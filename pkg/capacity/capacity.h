/* SPDX-License-Identifier: Apache-2.0 */
/* capacity: what one GPU of a Deployment serves, learned from the pods' own
 * metrics (capacity-per-gpu: auto), or checked against a configured value.
 *
 * The quantity is the saturation throughput: requests/s one GPU completes
 * with every slot busy (with p99-latency-target the policy derives the rate
 * that meets the SLA from it with its queueing model; without one it sizes at
 * target-utilization of it). Only evidence that bounds it is used:
 *
 *   lower bound   every steady tick: the per-GPU completion rate sustained
 *                 over the last CAPACITY_SUSTAIN_TICKS ticks (their median:
 *                 the pods did serve that much), decayed with a half-life of
 *                 a day so a slower model rollout is followed;
 *   saturation    a queue that stays (on every tick for a whole rate window
 *                 at least half as many requests waiting as running) means
 *                 every slot was busy: the per-GPU
 *                 completion rate then is the capacity (median of the last
 *                 samples), and running / GPU is the slot count;
 *   utilisation   below saturation, with the slot count known (configured
 *                 slots-per-gpu, or learned at saturation): running requests
 *                 over slots is the share of capacity in use, so completions
 *                 over that share estimate it (Little's law: slots / service
 *                 time): the sum of the last samples' throughput over the
 *                 sum of their utilisations (a gauge of a few slots is
 *                 coarse; a ratio of sums averages it out, a median of
 *                 ratios does not). The running requests are the busy
 *                 time's average over the window where the pods expose a
 *                 busy-time counter (then the ratio is slots over the mean
 *                 time in service of the requests completed, with no
 *                 sampling noise), else the gauge. Only at utilisations of
 *                 CAPACITY_MIN_UTILIZATION and above.
 *
 * The estimate is the utilisation estimate, else the saturation one, never
 * above a seen saturation throughput, never below the lower bound, and never
 * more than CAPACITY_MAX_EXTRAPOLATION times the lower bound: it does not
 * extrapolate far from load it has seen, so from a start too low it climbs
 * as the policy, sizing with each new estimate, lets the pods run hotter.
 *
 * Pure: time and observations are passed in, no I/O. The state is a fixed
 * struct with a versioned codec for the controller's checkpoint. */
#ifndef GPUSCALER_CAPACITY_H
#define GPUSCALER_CAPACITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Samples kept per kind of evidence (the median of the newest is used). */
#define CAPACITY_SAMPLES 16
/** Samples before an estimate is offered. */
#define CAPACITY_MIN_EVIDENCE 4
/** The estimate stays within this factor of the highest throughput seen. */
#define CAPACITY_MAX_EXTRAPOLATION 2.0
/** Utilisation samples below this say too little about capacity. */
#define CAPACITY_MIN_UTILIZATION 0.2
/** Highest per-GPU throughput taken as evidence (the policy sizes with no
 *  capacity above it): a tick's completions over its GPUs past it say
 *  nothing about a GPU (a counter reset read as a rate); the tick counts
 *  as an unsteady one. */
#define CAPACITY_MAX_RPS_PER_GPU 1e9
/** Waiting requests that count as a standing queue: at least this many per
 *  GPU and this share of the running ones. */
#define CAPACITY_QUEUE_PER_GPU 1.0
#define CAPACITY_QUEUE_PER_RUNNING 0.5
/** The lower bound takes the median of this many ticks' throughput: one
 *  tick's rate (a window just begun, a burst of completions) overshoots. */
#define CAPACITY_SUSTAIN_TICKS 5
/** Half-life of the lower bound. */
#define CAPACITY_LOWER_HALF_LIFE_MS (24LL * 3600 * 1000)
/** A configured value is reported as off when the estimate differs by more,
 *  on at least this many samples. */
#define CAPACITY_MISMATCH 0.25
#define CAPACITY_MISMATCH_EVIDENCE 8

/** One tick's observation of a Deployment. */
struct capacity_obs {
    int64_t now_ms;
    int64_t window_ms;      /**< the span the completion rate counts over */
    bool steady;            /**< metrics valid and every replica asked for is ready */
    double gpus;            /**< GPUs of the ready replicas */
    double completions_rps; /**< finished requests/s of those replicas */
    double running;         /**< requests holding a slot, < 0 or NAN unknown */
    /** requests holding a slot averaged over the span of completions_rps
     *  (a busy-time counter's rate, Little's law); used for the utilisation
     *  instead of running when > 0 (0, the zero value, means unknown) */
    double busy;
    double waiting;         /**< requests queued for a slot, < 0 or NAN unknown */
    double slots_per_gpu;   /**< configured slots, <= 0 unknown */
};

enum capacity_basis {
    CAPACITY_BASIS_NONE,        /**< not enough evidence yet */
    CAPACITY_BASIS_SATURATION,  /**< throughput with a standing queue */
    CAPACITY_BASIS_UTILIZATION, /**< throughput over the share of slots busy */
};

/** What the evidence says. */
struct capacity_estimate {
    double value;         /**< req/s per GPU; NAN without enough evidence */
    double lower;         /**< highest per-GPU throughput seen (decayed), 0 none */
    double saturation;    /**< median saturated throughput, NAN none seen */
    double slots_per_gpu; /**< configured, else learned at saturation; NAN unknown */
    int64_t samples;      /**< samples behind value */
    enum capacity_basis basis;
};

/** Per-Deployment state; plain data, copyable. */
struct capacity {
    double lower;
    int64_t lower_ms;
    int64_t queue_since_ms; /**< start of the current run of queued ticks, -1 none */
    float recent[CAPACITY_SUSTAIN_TICKS]; /**< the newest ticks' throughput per GPU */
    uint8_t nrecent, irecent;
    float sat[CAPACITY_SAMPLES], slots[CAPACITY_SAMPLES];
    float util[CAPACITY_SAMPLES], util_u[CAPACITY_SAMPLES]; /**< throughput, utilisation */
    uint8_t nsat, nslots, nutil; /**< samples held (<= CAPACITY_SAMPLES) */
    uint8_t isat, islots, iutil; /**< next slot to write */
    int64_t total;               /**< samples taken, all kinds */
};

void capacity_init(struct capacity *c);
/** Move the times c holds by delta_ms: the caller's wall clock was set
 *  forward or back by that much more than the time that passed. */
void capacity_shift(struct capacity *c, int64_t delta_ms);

/** Take one tick's evidence. Unsteady ticks (and ticks of a throughput past
 *  CAPACITY_MAX_RPS_PER_GPU) only end a queue run. */
void capacity_observe(struct capacity *c, const struct capacity_obs *o);

/** The estimate at now_ms (the lower bound decays with time). */
void capacity_estimate(const struct capacity *c, int64_t now_ms, double slots_per_gpu,
                       struct capacity_estimate *out);

/** "saturation", "utilization" or "none". */
const char *capacity_basis_name(enum capacity_basis b);

/**
 * -1, 0 or +1: whether a configured value is more than CAPACITY_MISMATCH
 * below (-1) or above (+1) an estimate of at least CAPACITY_MISMATCH_EVIDENCE
 * samples; 0 when within, or without one.
 * *ratio gets configured / estimate (NAN without one).
 */
int capacity_mismatch(const struct capacity_estimate *e, double configured, double *ratio);

/** Where the capacity a decision sizes with comes from. */
enum capacity_source {
    CAPACITY_SOURCE_CONFIGURED, /**< capacity-per-gpu: <number> */
    CAPACITY_SOURCE_LEARNED,    /**< auto, with an estimate */
    CAPACITY_SOURCE_START,      /**< auto, none yet: capacity-start */
    CAPACITY_SOURCE_OBSERVED,   /**< auto, none yet, no start: the highest throughput seen
                                     taken as the target (holds the replicas it finds) */
    CAPACITY_SOURCE_UNKNOWN,    /**< auto, nothing seen: the caller holds */
};

/**
 * The capacity to size with: the configured one; with auto the estimate,
 * else `start`, else the lower bound over target_utilization (the pods'
 * highest throughput is read as the target: conservative, it holds the
 * replicas it finds and adds them as load grows past it), else NAN.
 */
double capacity_in_use(const struct capacity_estimate *e, bool automatic, double configured,
                       double start, double target_utilization, enum capacity_source *src);

/** "configured", "learned", "start", "observed" or "unknown". */
const char *capacity_source_name(enum capacity_source s);

/** Forget the runs of consecutive ticks (a queue's start, the sustained
 *  throughput's last ticks): for a state restored from a checkpoint, whose
 *  ticks were not the ones just before. The samples learned stay. */
void capacity_forget_runs(struct capacity *c);

/** The newest time c holds (UNIX ms): the lower bound's (while it has one)
 *  or the queue run's start, whichever is later; INT64_MIN when neither.
 *  The estimator has no clock: a caller restoring a state refuses one whose
 *  newest time lies ahead of its own clock (saved under a clock that ran
 *  ahead: its lower bound would not decay until then), or shifts it
 *  (capacity_shift). */
int64_t capacity_newest_ms(const struct capacity *c);

/** State codec (little-endian, versioned). encode returns the bytes written
 *  (CAPACITY_STATE_SIZE) or 0 when len is too small. */
#define CAPACITY_STATE_SIZE 328
size_t capacity_encode(const struct capacity *c, uint8_t *buf, size_t len);
/** 0, or -1 with a message in err: the state is then a fresh one. A state
 *  holding what the estimator never keeps is refused: a throughput (a
 *  sample, the lower bound) past CAPACITY_MAX_RPS_PER_GPU, a utilisation
 *  sample below CAPACITY_MIN_UTILIZATION or above 1 (with a huge
 *  throughput beside one of 0.001 the estimate was a thousand times any
 *  throughput seen), a ring short of full whose next slot is not its
 *  count. Times are checked only for their range: the caller, who has the
 *  clock, checks capacity_newest_ms(). */
int capacity_decode(struct capacity *c, const uint8_t *buf, size_t len, char *err,
                    size_t errlen);

#endif

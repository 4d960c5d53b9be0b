/* SPDX-License-Identifier: Apache-2.0 */
/* scrape-io: the state the I/O half of the scraper shares between its files:
 * the scraper, its workloads and their pods (scrape.c schedules and scrapes
 * them, targets.c keeps them in step with the targets it is given and
 * answers scrape_get), and the calls from one to the other. Not included by
 * other modules. */
#ifndef GPUSCALER_SCRAPE_IO_H
#define GPUSCALER_SCRAPE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "httpc/httpc.h"
#include "scrape-int.h"

#define SCRAPE_NO_HEAP UINT32_MAX
/** Most httpc clients the pods are spread over. */
#define SCRAPE_MAX_CLIENTS 64
/** Idle extractors kept for the next scrapes. */
#define SCRAPE_POOL_EXTRACT 32

struct swl;

/* One pod; about 180 bytes plus its name, URL and history. */
struct spod {
    struct scrape *s;
    struct swl *wl;            /* NULL once dropped while its request runs */
    char *url;                 /* NULL: no address (see why in st.error) */
    struct httpc_req *req;
    struct scrape_extract *x;  /* the running scrape's parser */
    uint64_t due;              /* loop time of the next slot */
    uint64_t started;          /* loop time the running scrape started */
    int64_t started_ms;        /* when the running scrape started (the scraper's clock) */
    int64_t log_after_ms;      /* rate limit of this pod's warnings */
    double gpus;
    double stale_departed;     /* gauges moved to departed when its scrapes went stale */
    double unready_departed;   /* gauges moved to departed when it left Ready: given back at
                                  its first good scrape once Ready again, unless its request
                                  counter reset (targets.c) */
    bool back;                 /* Ready again, that scrape not come yet */
    struct scrape_podstate st;
    uint32_t heap;             /* index in s->heap or SCRAPE_NO_HEAP */
    uint32_t phase;            /* ms within the interval */
    uint32_t quiet;            /* failures not logged since the last line */
    uint8_t client;            /* index in s->clients, stable for the pod's name */
    uint8_t logged;            /* enum scrape_fail last logged, NONE when healthy */
    bool ready;
    bool discard;              /* the running scrape's answer does not count: the pod left
                                  the backlog or moved since it started (targets.c) */
    char name[];               /* the pod's name, allocated with the struct */
};

/* A workload spec, shared by the workloads that declare the same one (1,000
 * Deployments of one engine usually do). */
struct sspec {
    struct scrape_spec spec;
    unsigned refs;
};

struct swl {
    char *ns, *name;
    struct sspec *sp;          /* the spec, shared */
    struct scrape_window win;  /* latency increases over the rate window */
    struct spod **pods;        /* sorted by name */
    size_t npods;
    struct scrape_podstate *gone; /* pods deleted within the rate window: their requests */
    size_t ngone;
    double departed;           /* scrape_result.departed: gauges of pods that left */
    size_t body;               /* recent body size (moving maximum) */
};

struct scrape {
    uv_loop_t *loop;
    struct httpc *clients[SCRAPE_MAX_CLIENTS]; /* [0] is the caller's, the rest ours */
    int nclients;
    int clients_open;          /* our own clients not yet closed */
    struct scrape_config cfg;
    unsigned ring_cap;         /* request samples kept per pod */
    uv_timer_t timer;
    struct swl **wls;
    size_t nwls;
    struct sspec **specs;      /* distinct specs in use */
    size_t nspecs;
    struct spod **heap;
    size_t nheap, capheap;
    size_t npods;
    size_t inflight;
    double duration_ms;        /* moving average of scrape durations */
    struct scrape_extract *pool[SCRAPE_POOL_EXTRACT];
    size_t npool;
    struct scrape_stats stats;
    int64_t log_second;        /* budget of warnings per second */
    int log_lines;
    unsigned log_dropped;
    bool closing, timer_closed;
    scrape_close_cb close_cb;
    void *close_arg;
};

/* ---- scrape.c, for targets.c ---- */

/** The scraper's clock (scrape_config.clock), ms: util_now_boot_ms by default. */
int64_t scrape_io_now(const struct scrape *s);
/** Put a ready pod with an address on the schedule at its next slot. */
void scrape_io_schedule(struct scrape *s, struct spod *p);
/** Take the pod off the schedule (no-op when it is not on it). */
void scrape_io_unschedule(struct scrape *s, struct spod *p);
/** Set the timer for the next due pod (after the schedule changed). */
void scrape_io_arm(struct scrape *s);
/** Log the pod's failure (st.fail), rate limited. */
void scrape_io_log_failure(struct scrape *s, struct spod *p, int64_t stamp);
/** Free a pod whose history was released into its window already. */
void scrape_io_pod_free(struct spod *p);

/* ---- targets.c, for scrape.c ---- */

/** Free a workload: its pods (cancelling their scrapes), window and spec. */
void scrape_io_wl_free(struct scrape *s, struct swl *w);
/** A good scrape of p was recorded (st updated): the first after it is Ready
 *  again gives back what it departed when it left Ready, unless its request
 *  counter reset meanwhile (the requests it held were lost with the process). */
void scrape_io_scraped(struct spod *p);

#endif

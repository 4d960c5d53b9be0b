/* SPDX-License-Identifier: Apache-2.0 */
/* httpd/door: who gets a connection slot. A listener holds at most
 * max_connections live connections, and max_connections_per_source from one
 * IP address; at either cap a new connection evicts an open one that is not
 * working for anyone (no request with the handler, no response being
 * written) rather than being refused, so clients that connect and then idle,
 * dribble a request or reconnect in a loop cannot lock the port out.
 *
 * Choice of the connection to evict (httpd.h repeats it for users):
 *  1. one that has not completed a request (idle since accept, in its TLS
 *     handshake, or sending its first request) before an idle keep-alive one;
 *  2. among those, the one whose source address holds the most connections
 *     (a flood from a few addresses pays for itself);
 *  3. then the oldest (accept time, or for keep-alive ones the time of their
 *     last response).
 * Only when no connection may be evicted is the new one refused.
 *
 * Sources are counted in a small chained hash table of live addresses,
 * entries freed when their count drops to zero. Refusals and evictions are
 * counted and logged as warnings: the first at once, then one line per 10 s
 * with the counts since the previous line (the counters are exact). */
#include "httpd-int.h"

#include <string.h>

#define LOG_EVERY_MS 10000

static unsigned bucket(const unsigned char *addr, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ addr[i]) * 16777619u;
    return h % SOURCE_BUCKETS;
}

static struct source *source_get(struct httpd *srv, const unsigned char *addr, size_t len)
{
    struct source **head = &srv->sources[bucket(addr, len)];
    for (struct source *s = *head; s; s = s->next)
        if (s->len == len && memcmp(s->addr, addr, len) == 0)
            return s;
    struct source *s = xcalloc(1, sizeof(*s));
    s->len = (uint8_t)len;
    memcpy(s->addr, addr, len);
    s->next = *head;
    *head = s;
    srv->nsources++;
    return s;
}

static void source_put(struct httpd *srv, struct source *s)
{
    if (--s->n > 0)
        return;
    struct source **pp = &srv->sources[bucket(s->addr, s->len)];
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    srv->nsources--;
    xfree(s);
}

void srv_release(struct httpd *srv, struct conn *c)
{
    if (!c->src)
        return;
    source_put(srv, c->src);
    c->src = NULL;
    srv->nlive--;
}

/* May c be closed to make room? Not while a handler has its request or a
 * response is on its way. */
/* Idle, or answered and not reading its answer for a second: what it holds
 * is not worth refusing a newcomer for. */
static bool evictable(struct conn *c)
{
    if (!c->src || c->closing || c->busy)
        return false;
    return c->writes == 0 || conn_write_stalled(c, 1000);
}

/* Is a better victim than b (NULL: anything is)? Candidates come newest
 * first, so on a full tie (times are in ms) the later one, a, is older. */
static bool better(const struct conn *a, const struct conn *b)
{
    if (!b)
        return true;
    bool a_new = a->completed == 0 || a->lingering, b_new = b->completed == 0 || b->lingering;
    if (a_new != b_new)
        return a_new;
    if (a->src->n != b->src->n)
        return a->src->n > b->src->n;
    uint64_t ta = a_new ? a->accepted_at : a->last_done, tb = b_new ? b->accepted_at : b->last_done;
    if (ta != tb)
        return ta < tb;
    return a->accepted_at <= b->accepted_at;
}

/* The connection to evict (from source only, when not NULL), or NULL. */
static struct conn *victim(struct httpd *srv, const struct source *only, const struct conn *skip)
{
    struct conn *best = NULL;
    for (struct conn *c = srv->conns; c; c = c->next)
        if (c != skip && evictable(c) && (!only || c->src == only) && better(c, best))
            best = c;
    return best;
}

static void note(struct httpd *srv, bool refused, const struct conn *c, const char *why)
{
    if (refused) {
        srv->stats.refused++;
        srv->log_refused++;
    } else {
        srv->stats.evicted++;
        srv->log_evicted++;
    }
    uint64_t now = uv_now(srv->loop);
    if (now < srv->log_after)
        return;
    LOG_WARN(srv->name,
             "connection slots: %llu refused and %llu evicted%s (%s; %u open, at most %u, %u "
             "per source address; last from %s)",
             (unsigned long long)srv->log_refused, (unsigned long long)srv->log_evicted,
             srv->log_after ? " in the last 10 s" : "", why, srv->nlive, srv->cfg.max_connections,
             srv->cfg.max_connections_per_source, c->addr);
    srv->log_refused = srv->log_evicted = 0;
    srv->log_after = now + LOG_EVERY_MS;
}

static bool refuse(struct httpd *srv, struct conn *c, const char *why)
{
    LOG_DEBUG(srv->name, "refusing %s: %s", c->addr, why);
    note(srv, true, c, why);
    conn_close(c);
    return false;
}

static void evict(struct httpd *srv, struct conn *v, const struct conn *c, const char *why)
{
    LOG_DEBUG(srv->name, "evicting %s (%s) for %s: %s", v->addr,
              v->completed ? "idle keep-alive" : "no request completed", c->addr, why);
    note(srv, false, c, why);
    conn_close(v);
}

bool srv_admit(struct httpd *srv, struct conn *c, const unsigned char *addr, size_t len)
{
    if (srv->closing)
        return refuse(srv, c, "shutting down");
    struct source *src = source_get(srv, addr, len);
    src->n++; /* held while choosing, so an empty entry is never left behind */
    if (src->n > srv->cfg.max_connections_per_source) {
        struct conn *v = victim(srv, src, c);
        if (!v) {
            source_put(srv, src);
            return refuse(srv, c, "its source address is at its cap and busy");
        }
        evict(srv, v, c, "its source address is at its cap");
    }
    if (srv->nlive >= srv->cfg.max_connections) {
        struct conn *v = victim(srv, NULL, c);
        if (!v) {
            source_put(srv, src);
            return refuse(srv, c, "every connection is busy");
        }
        evict(srv, v, c, "the listener is at its cap");
    }
    c->src = src;
    srv->nlive++;
    srv->stats.accepted++;
    return true;
}

void httpd_stats(const struct httpd *srv, struct httpd_stats *out)
{
    *out = srv->stats;
    out->connections = srv->nlive;
    out->sources = srv->nsources;
}

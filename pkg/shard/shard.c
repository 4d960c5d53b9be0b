/* SPDX-License-Identifier: Apache-2.0 */
/* shard: the Deployment-to-shard hash and the pure shard assignment (see
 * shard.h). Members are compared as strings; the work per round is
 * O(members x shards) string comparisons, bounded by SHARD_MAX_MEMBERS and
 * SHARD_MAX. */
#include "shard.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define FNV_BASIS 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t fnv_bytes(uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
        h = (h ^ *p) * FNV_PRIME;
    return h;
}

uint64_t shard_hash(const char *ns, const char *name)
{
    uint64_t h = fnv_bytes(FNV_BASIS, ns);
    h = (h ^ (unsigned char)'/') * FNV_PRIME;
    return fnv_bytes(h, name);
}

int64_t shard_lease_number(const char *name, const char *prefix, uint32_t nshards)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0 || name[pl] != '-')
        return -1;
    const char *num = name + pl + 1;
    size_t n = strlen(num);
    if (n == 0 || n > 4 || (num[0] == '0' && n > 1))
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (num[i] < '0' || num[i] > '9')
            return -1;
        v = v * 10 + (num[i] - '0');
    }
    return v < nshards ? v : -1;
}

uint32_t shard_of(const char *ns, const char *name, uint32_t nshards)
{
    return nshards ? (uint32_t)(shard_hash(ns, name) % nshards) : 0;
}

/* The rank of who among the members (and who itself), and how many there
 * are counting who once. */
static void rank_of(const char *const *members, size_t n, const char *who, size_t *rank,
                    size_t *count)
{
    size_t r = 0;
    bool present = false;
    for (size_t i = 0; i < n; i++) {
        int cmp = strcmp(members[i], who);
        if (cmp < 0)
            r++;
        else if (cmp == 0)
            present = true;
    }
    *rank = r;
    *count = n + (present ? 0 : 1);
}

uint32_t shard_target(const char *const *members, size_t n, const char *who, uint32_t nshards)
{
    size_t rank, m;
    rank_of(members, n, who, &rank, &m);
    return (uint32_t)(nshards / m + (rank < nshards % m ? 1 : 0));
}

/* Rendezvous score of shard s for identity who: higher is preferred. */
static uint64_t score(const char *who, uint32_t s)
{
    char num[16];
    snprintf(num, sizeof(num), "#%u", s);
    return fnv_bytes(fnv_bytes(FNV_BASIS, who), num);
}

static bool is(const char *holder, const char *who)
{
    return holder && holder[0] && strcmp(holder, who) == 0;
}

/* Mark the k shards of the given kind (held or free) that self prefers most
 * (best) or least (!best) with action a. */
static void pick(const struct shard_view *v, enum shard_action *out, bool held, bool best,
                 uint32_t k, enum shard_action a)
{
    while (k-- > 0) {
        int64_t at = -1;
        uint64_t at_score = 0;
        for (uint32_t s = 0; s < v->nshards; s++) {
            const char *h = v->holders[s];
            bool mine = is(h, v->self), free_ = !h || !h[0];
            if ((held ? !mine : !free_) || out[s] == a)
                continue;
            uint64_t sc = score(v->self, s);
            if (at < 0 || (best ? sc > at_score : sc < at_score)) {
                at = s;
                at_score = sc;
            }
        }
        if (at < 0)
            return;
        out[at] = a;
    }
}

int shard_plan(const struct shard_view *v, enum shard_action *out)
{
    if (!v || !v->self || v->nshards == 0 || v->nshards > SHARD_MAX ||
        v->nmembers > SHARD_MAX_MEMBERS || (v->nmembers && !v->members) || !v->holders)
        return -EINVAL;
    uint32_t held = 0, free_n = 0;
    for (uint32_t s = 0; s < v->nshards; s++) {
        const char *h = v->holders[s];
        bool mine = is(h, v->self);
        out[s] = mine ? SHARD_KEEP : SHARD_IDLE;
        held += mine;
        free_n += !h || !h[0];
    }
    uint32_t target = shard_target(v->members, v->nmembers, v->self, v->nshards);
    if (held > target) {
        bool other_short = false;
        for (size_t i = 0; i < v->nmembers && !other_short; i++) {
            const char *m = v->members[i];
            if (strcmp(m, v->self) == 0)
                continue;
            uint32_t n = 0;
            for (uint32_t s = 0; s < v->nshards; s++)
                n += is(v->holders[s], m);
            other_short = n < shard_target(v->members, v->nmembers, m, v->nshards);
        }
        if (other_short)
            pick(v, out, true, false, held - target, SHARD_RELEASE);
    } else if (held < target && free_n) {
        pick(v, out, false, true, target - held, SHARD_ACQUIRE);
    }
    return 0;
}

const char *shard_action_name(enum shard_action a)
{
    switch (a) {
    case SHARD_IDLE: return "idle";
    case SHARD_KEEP: return "keep";
    case SHARD_ACQUIRE: return "acquire";
    case SHARD_RELEASE: return "release";
    }
    return "unknown";
}

void shard_member_lease_name(const char *prefix, const char *id, char *out, size_t len)
{
    char s[64];
    size_t n = 0;
    bool changed = false;
    for (const char *p = id; *p && n < 40; p++) {
        char ch = *p;
        if (ch >= 'A' && ch <= 'Z') {
            ch = (char)(ch - 'A' + 'a');
            changed = true;
        }
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
        if (!ok) {
            ch = '-';
            changed = true;
        }
        s[n++] = ch;
    }
    changed = changed || strlen(id) > 40;
    while (n && s[n - 1] == '-') {
        n--;
        changed = true; /* "abc-" is not "abc" */
    }
    s[n] = '\0';
    if (changed || n == 0)
        snprintf(out, len, "%s%s%s%s%08llx", prefix, SHARD_MEMBER_INFIX, s, n ? "-" : "",
                 (unsigned long long)(shard_hash("", id) & 0xffffffffULL));
    else
        snprintf(out, len, "%s%s%s", prefix, SHARD_MEMBER_INFIX, s);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* shard: which replica owns which Deployment when gpuscaler runs sharded.
 *
 * A Deployment's shard is a stable hash of "namespace/name": FNV-1a 64 of
 * those bytes, modulo the shard count. The hash never changes between
 * releases (unit-tested against fixed values), so anything that must agree
 * on the shard of a Deployment (the controller's leases, the forecaster
 * checkpoint ConfigMaps) can call shard_of().
 *
 * Assignment is a pure function (shard_plan): given the live members, the
 * valid holder of each shard Lease and who is asking, it says which shards
 * to keep, acquire or release so that each of M members holds
 * floor(S/M) or ceil(S/M) of the S shards. The Leases themselves, their
 * expiry and the writes are the caller's (pkg/controller/shards.c). Pure:
 * no allocation, no I/O, no clock. */
#ifndef GPUSCALER_SHARD_H
#define GPUSCALER_SHARD_H

#include <stddef.h>
#include <stdint.h>

/** Most shards a configuration may have (sharding.shards). */
#define SHARD_MAX 1024
/** Most live members shard_plan() considers; more are an error. */
#define SHARD_MAX_MEMBERS 256

/**
 * FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) of the
 * bytes of ns, then '/', then name. ns and name are borrowed; NULL counts
 * as "". Stable across releases and platforms.
 */
uint64_t shard_hash(const char *ns, const char *name);

/** What a member Lease's name has between the prefix and the identity. */
#define SHARD_MEMBER_INFIX "-member-"

/**
 * A member Lease's name for identity id: prefix, SHARD_MEMBER_INFIX, then the
 * identity's DNS-1123 characters (lowercased; others '-'; at most 40; no
 * trailing '-'), and a hash of the whole identity when any of that changed
 * it, so that two identities never share a name. out: at least the
 * prefix's length plus 60 bytes.
 */
void shard_member_lease_name(const char *prefix, const char *id, char *out, size_t len);

/**
 * The shard number of a shard Lease named name, prefix "-" number, when that
 * number is below nshards and written as shard Leases are named (decimal,
 * no sign, no leading zero, at most 4 digits: "<prefix>-7", never "-07" or
 * "-+7"); -1 for any other name (member Leases included).
 */
int64_t shard_lease_number(const char *name, const char *prefix, uint32_t nshards);

/** The shard of Deployment ns/name: shard_hash(ns, name) % nshards; 0 when nshards is 0. */
uint32_t shard_of(const char *ns, const char *name, uint32_t nshards);

/**
 * How many shards member `who` should hold among the n distinct members
 * (identities in any order; who need not be among them, it is counted
 * once): S/M, plus one for the first S%M members in byte order of identity.
 */
uint32_t shard_target(const char *const *members, size_t n, const char *who, uint32_t nshards);

/** What to do with one shard. */
enum shard_action {
    SHARD_IDLE,    /**< not ours and not to take: only watch its Lease */
    SHARD_KEEP,    /**< ours: renew it */
    SHARD_ACQUIRE, /**< free (no valid holder): take it */
    SHARD_RELEASE, /**< ours but surplus while another member is short: hand it over */
};

/** What one replica knows at one election round. All pointers are borrowed. */
struct shard_view {
    const char *self;              /**< this replica's identity */
    const char *const *members;    /**< live members' identities (self may be absent: it
                                        is counted anyway), distinct */
    size_t nmembers;
    uint32_t nshards;
    const char *const *holders;    /**< nshards entries: the valid (unexpired) holder of each
                                        shard Lease, NULL or "" when free */
};

/**
 * The action for every shard into out[0..nshards-1]. Rules, with T the
 * caller's target (shard_target) and H the shards it holds:
 *  - a held shard is kept, unless H > T and some other member holds fewer
 *    than its own target: then the H - T held shards this member prefers
 *    least are released;
 *  - when H < T, the T - H free shards it prefers most are acquired; shards
 *    with another valid holder are never taken.
 * Preference is rendezvous hashing (FNV-1a 64 of "identity#shard"), so a
 * replica that comes back tends to get its old shards, and members seldom
 * race for the same free shard. With a consistent view, total releases
 * equal the total shortfall, so the split converges in two rounds and then
 * stays put. Returns 0, or -EINVAL (nothing written) for nshards 0 or above
 * SHARD_MAX, more than SHARD_MAX_MEMBERS members, or a NULL self.
 */
int shard_plan(const struct shard_view *v, enum shard_action *out);

/** "idle", "keep", "acquire" or "release". */
const char *shard_action_name(enum shard_action a);

#endif

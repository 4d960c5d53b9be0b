/* SPDX-License-Identifier: Apache-2.0 */
/* kube-int: internals shared by pkg/kube's files (and its tests and fuzzers):
 * the string hash map and intern pool, the pure object store behind the
 * caches, the raw request entry the reflector streams through and the exec
 * credential plugins. */
#ifndef GPUSCALER_KUBE_INT_H
#define GPUSCALER_KUBE_INT_H

#include <jansson.h>

#include "kube/kube.h"
#include "util/util.h"

/* The lists' and watches' JSON as Go's encoder writes it: a NUL byte in a
 * string (an annotation value, a container's termination message) is \u0000,
 * which jansson refuses unless told; refused, one such object anywhere in a
 * watched scope failed every list page and watch event that carried it, and
 * the cache never synced. Such a string reads up to its NUL
 * (json_string_value), so only the caches' objects are read so (extract.c
 * keeps annotation values whole); other answers (a TokenReview's user, a
 * Lease's holder) with one are refused, never read cut short. */
#define KUBE_JSON_FLAGS JSON_ALLOW_NUL

/* ---- string-keyed hash map (open addressing, linear probing) ---------- */

struct kmap_ent {
    const char *key; /* borrowed: lives in the value; NULL = empty */
    void *val;
    uint32_t hash;
    bool tomb;
};

struct kmap {
    struct kmap_ent *ents;
    size_t cap;  /* power of two or 0 */
    size_t n;    /* live entries */
    size_t used; /* live + tombstones */
};

uint32_t kmap_hash(const char *s);
void *kmap_get(const struct kmap *m, const char *key);
/** Insert or replace; key must stay valid while present (it usually points into val). */
void kmap_put(struct kmap *m, const char *key, void *val);
/** Remove and return the value, or NULL. */
void *kmap_del(struct kmap *m, const char *key);
void kmap_free(struct kmap *m);
/** Iterate: for (size_t i = 0; kmap_next(m, &i, &val);) ... */
bool kmap_next(const struct kmap *m, size_t *i, void **val);

/* ---- interned strings (refcounted) ------------------------------------ */

struct kintern {
    struct kmap map;
};

/** Return the interned copy of s (refcount + 1). */
const char *kintern_get(struct kintern *p, const char *s);
/** Drop one reference (NULL-safe). */
void kintern_put(struct kintern *p, const char *s);
size_t kintern_count(const struct kintern *p);
void kintern_free(struct kintern *p);

/* ---- the object store behind kube_cache (pure, no I/O) ----------------- */

struct kube_store;

enum kube_kind { KUBE_KIND_DEPLOYMENT, KUBE_KIND_POD };

struct kube_store *kube_store_new(void);
void kube_store_free(struct kube_store *s);
/** A list of kind in ns (NULL = all namespaces) begins / ends (sweeping what was not seen). */
void kube_store_list_begin(struct kube_store *s, enum kube_kind kind, const char *ns);
void kube_store_list_end(struct kube_store *s, enum kube_kind kind, const char *ns);
/**
 * Apply an ADDED/MODIFIED/DELETED object. Returns 1 when the cache changed, 0
 * when not (an untracked Deployment, an identical resourceVersion), -EINVAL
 * when the object lacks metadata.namespace/name (then nothing changes).
 */
int kube_store_apply(struct kube_store *s, enum kube_kind kind, enum kube_event_type type,
                     const json_t *obj);
const struct kube_deployment *const *kube_store_deployments(const struct kube_store *s, size_t *n);
const struct kube_deployment *kube_store_deployment(const struct kube_store *s, const char *ns,
                                                    const char *name);
const struct kube_pod *const *kube_store_deployment_pods(struct kube_store *s,
                                                         const struct kube_deployment *d,
                                                         size_t *n);
const struct kube_pod *kube_store_pod(const struct kube_store *s, const char *ns,
                                      const char *name);
size_t kube_store_npods(const struct kube_store *s);
/** Number of pod-index recomputations so far (tests check laziness). */
size_t kube_store_index_rebuilds(const struct kube_store *s);
/** Namespaces with a record: any pod or tracked Deployment, or a list's scope. */
size_t kube_store_namespaces(const struct kube_store *s);
/** Distinct interned strings (tests check sharing). */
size_t kube_store_interned(const struct kube_store *s);
/** Heap bytes the store holds: objects, their strings, tables (allocator overhead excluded). */
size_t kube_store_memory(const struct kube_store *s);

/** A YAML subtree as the JSON client-go makes of it (kube/yamljson.c): plain
 *  scalars typed as go-yaml v2 resolves them. Owned by the caller. */
struct conf_node;
json_t *kube_conf_to_json(const struct conf_node *n);

/** A reflector's options with the defaults filled in (tests check them). */
const struct kube_watch_opts *kube_reflector_opts(const struct kube_reflector *r);

/* ---- raw requests (for the reflector) ---------------------------------- */

typedef void (*kube_raw_done_cb)(int err, const struct httpc_resp *resp, void *arg);

/**
 * GET path (query included) with the client's auth and TLS. With on_data the
 * 2xx body streams to it (httpc rules). timeout_ms 0 = the client default,
 * <0 = none. stall_ms > 0 ends a transfer receiving under 1 byte/s for that
 * long (a watch on a dead connection). *out is the request, for
 * kube_req_cancel() (it may wait for an exec plugin's credential before it is
 * sent). Same return rules as httpc_request().
 */
struct kreq;
int kube_raw_get(struct kube *k, const char *path, httpc_data_cb on_data, int64_t timeout_ms,
                 int64_t stall_ms, size_t max_body, kube_raw_done_cb cb, void *arg,
                 struct kreq **out);
/**
 * Where requests go for server (no trailing slash) and its tls-server-name
 * (NULL: none): *url_base, which paths are appended to, and *connect_to, the
 * "NAME:PORT:HOST:PORT" that sends the connection to the server's address
 * while TLS checks NAME, and *host_header, "Host: " and the server's
 * authority as written (the name is for TLS only, as in client-go); both
 * NULL when unused. All owned by the caller. Pure.
 */
void kube_route(const char *server, const char *tls_server_name, char **url_base,
                char **connect_to, char **host_header);

/** Cancel a request of kube_raw_get: its callback gets -ECANCELED, from the loop. */
void kube_req_cancel(struct kreq *r);
uv_loop_t *kube_loop(const struct kube *k);

/* ---- exec credential plugins (exec.c) ---------------------------------- */

struct kube_exec_config *kube_exec_config_dup(const struct kube_exec_config *e);
void kube_exec_config_free(struct kube_exec_config *e);

struct kube_exec;
/** A run ended: err 0 and kube_exec_valid() has the new credential, or err < 0 and msg says why. */
typedef void (*kube_exec_done_cb)(void *arg, int err, const char *msg);
/** The plugin of cfg (copied); cluster gives provideClusterInfo's fields (copied): server,
 *  tls_server_name, insecure, ca_data or ca_file (read at each run: one that cannot be read
 *  fails the run, done telling why), proxy_url_orig. */
struct kube_exec *kube_exec_new(uv_loop_t *loop, const struct kube_exec_config *cfg,
                                const struct kube_config *cluster, kube_exec_done_cb done,
                                void *arg);
/** The credential to send at now_ms (unix), or NULL: none yet, expiring, or refused with 401. */
const struct kube_exec_cred *kube_exec_valid(const struct kube_exec *e, int64_t now_ms);
/** The last credential unless refused, expiring or not (for the requests that waited for it). */
const struct kube_exec_cred *kube_exec_last(const struct kube_exec *e);
/** Run the plugin unless a run is pending; done follows (from the loop). */
void kube_exec_start(struct kube_exec *e);
/** The API server answered 401 to credential gen: it is not used again. Returns true when
 *  that was the current one. */
bool kube_exec_invalidate(struct kube_exec *e, uint64_t gen);
void kube_exec_stats(const struct kube_exec *e, uint64_t *runs, uint64_t *failures);
/** Kill a run in flight (done is not called), then free; cb from the loop. */
void kube_exec_close(struct kube_exec *e, void (*cb)(void *), void *arg);

/** Append s percent-encoded for a query value. */
void kube_query_escape(struct util_buf *b, const char *s);

/** Status fields of an error body: reason/message ("" when absent), code (0). */
void kube_status_fields(const json_t *body, const char **reason, const char **message,
                        long *code);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* kube-int: internals shared by pkg/kube's files (and its tests and fuzzers):
 * the string hash map and intern pool, the pure object store behind the
 * caches, the raw request entry the reflector streams through and the exec
 * credential plugins. */
#ifndef GPUSCALER_KUBE_INT_H
#define GPUSCALER_KUBE_INT_H

#include <jansson.h>
#include <sys/stat.h>

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
 * A list of kind in ns (NULL = all namespaces) staged to be applied at once,
 * as client-go's Replace: readers see the store as it was until the commit.
 * Items are extracted as they come (no JSON is kept); one whose
 * resourceVersion the store holds already is only marked as seen. Nothing
 * else may apply to the scope between new and commit/free.
 */
struct kube_store_stage;
struct kube_store_stage *kube_store_stage_new(struct kube_store *s, enum kube_kind kind,
                                              const char *ns);
/** Stage a list item: 1 staged, 0 unchanged or untracked (not held), -EINVAL
 *  without metadata.namespace/name (ignored). */
int kube_store_stage_add(struct kube_store_stage *st, const json_t *obj);
/** Apply the staged items, delete what the list did not have, free st.
 *  Returns the number of objects added, changed or deleted. */
size_t kube_store_stage_commit(struct kube_store_stage *st);
/** Drop st (an aborted list): the store stays as it was. NULL-safe. */
void kube_store_stage_free(struct kube_store_stage *st);
/** Objects st holds (new or changed ones), and those found unchanged. */
size_t kube_store_stage_count(const struct kube_store_stage *st);
size_t kube_store_stage_unchanged(const struct kube_store_stage *st);
/** Heap bytes st holds (0 for NULL). */
size_t kube_store_stage_memory(const struct kube_store_stage *st);
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
 *  scalars and map keys typed as go-yaml v2 resolves them. Owned by the caller. */
struct conf_node;
json_t *kube_conf_to_json(const struct conf_node *n);
/** -EINVAL (msg filled, *at the offending key's value) when a map key in n is
 *  one client-go refuses to load (a plain null, or an integer past int64 as
 *  key); else 0. */
int kube_conf_check_keys(const struct conf_node *n, const struct conf_node **at, char *msg,
                         size_t len);
/** Whether go-yaml v2 makes a plain scalar of this text other than a string
 *  (conf_opts.key_typed for the kubeconfig). */
bool kube_conf_key_typed(const char *plain);
/** What YAMLToJSON makes of scalar n when not a string: "null", "bool" or
 *  "number"; NULL for a string (quoted, or plain text go-yaml keeps). */
const char *kube_conf_scalar_kind(const struct conf_node *n);
/* A bool field's value as client-go reads it: YAML's plain bool spellings
 * (y, yes, on, true, ... as go-yaml v2 resolves them) set *out and give 1;
 * a plain null gives 0 and false; anything else (a number, a quoted
 * "true", a map) gives -1, as a JSON non-bool fails to decode into a Go
 * bool. */
int kube_conf_scalar_bool(const struct conf_node *n, bool *out);

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

/* ---- the client's credentials from files (client-auth.c) --------------- */

/** A client's token file and client certificate and key files, read again
 *  when they change (checked at most once a second). Set loop and cfg (the
 *  client's, which outlives it); the rest starts zeroed. */
struct kube_auth {
    uv_loop_t *loop;
    const struct kube_config *cfg;
    /* token file state */
    char *file_token;
    uint64_t token_checked_at;
    bool token_loaded;
    bool token_warned;
    struct stat token_st;
    /* client certificate and key files, read as blobs and again when they change
     * (libcurl reuses a connection for the same file name, whatever it holds now) */
    char *certf, *keyf;
    size_t certf_len, keyf_len;
    uint64_t certf_checked_at;
    struct stat certf_st, keyf_st;
    bool certf_warned;
};
/** The bearer token to send: the token file's, else cfg's static one, or NULL. */
const char *kube_auth_bearer(struct kube_auth *a);
/** Read cfg's certificate and key files again if they changed: certf/keyf
 *  hold the last pair that matched, or NULL (none read yet). */
void kube_auth_refresh_certs(struct kube_auth *a);
/** Free what a holds (wiped). */
void kube_auth_clear(struct kube_auth *a);

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

/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics internals shared by its .c files; no other module includes it. */
#ifndef GPUSCALER_EXTMETRICS_INT_H
#define GPUSCALER_EXTMETRICS_INT_H

#include "extmetrics/extmetrics.h"
#include "util/util.h"

#include <jansson.h>
#include <openssl/x509.h>

#define EM_LOG "extmetrics"

/* ---- encode.c ------------------------------------------------------------ */

/* Serialise and release @doc; returns an xmalloc'd string. */
char *em_json_dump(json_t *doc, size_t *len);
json_t *em_status(int code, const char *reason, const char *message);
const char *em_reason(int code);
json_t *em_api_group(void);
json_t *em_api_group_list(void); /* APIGroupList of the one group, for GET /apis */
json_t *em_resource_list(void);
json_t *em_value_list(void);
int em_value_item(json_t *list, const char *metric, const struct extmetrics_label *labels,
                  size_t nlabels, const struct extmetrics_sample *s);

/* ---- auth.c --------------------------------------------------------------- */

struct em_strv {
    char **v;
    size_t n;
};

/* An owned copy of an identity. */
struct em_user {
    char *name;
    char *uid;
    struct em_strv groups;
    struct em_strv extra; /* key, value, key, value... */
};

void em_user_set(struct em_user *dst, const struct extmetrics_user *src);
void em_user_free(struct em_user *u);
/* A borrowed view; @labels must have room for u->extra.n / 2 entries. */
void em_user_view(const struct em_user *u, struct extmetrics_user *view,
                  struct extmetrics_label *labels);

/* Add system:authenticated unless the identity already has it (or
 * system:unauthenticated) or is system:anonymous, as the apiserver's
 * AuthenticatedGroupAdder does for every authenticated request. */
void em_user_add_authenticated(struct em_user *u);

/* A CA bundle parsed into a store; NULL when none. Every certificate of it
 * is an anchor (X509_V_FLAG_PARTIAL_CHAIN), as in Go's x509 Roots. */
X509_STORE *em_store_from_pem(const char *pem, size_t len);
/* Whether the PEM bundles @a and @b hold a certificate in common. */
bool em_pem_share_cert(const char *a, size_t alen, const char *b, size_t blen);
/* 0 when the client's chain (httpd_peer.client_chain_pem: leaf first, then
 * intermediates) verifies against @store for client authentication now
 * (extended key usages clientAuth, any, or none, as Go checks them; the key
 * usage is not looked at); -EACCES otherwise (also for a NULL store or
 * chain). */
int em_chain_verify(X509_STORE *store, const char *chain_pem);

struct em_cache;

/* How long a client chain's verification is reused (a second request on a
 * connection, or the aggregator's next connection, with the same chain):
 * verifying means decoding every certificate of the chain, up to 100 KB
 * that a client picks, and a request costs little to send. Verification
 * depends on the time, so it is not kept longer. */
#define EM_CHAIN_TTL_MS 10000

struct em_rh {
    bool enabled;
    X509_STORE *store; /* requestheader-client-ca-file */
    struct em_strv allowed, user_h, uid_h, group_h, extra_p;
    struct em_cache *verified; /* chains checked against this store, by SHA-256 */
};

void em_rh_free(struct em_rh *rh);
/* -EINVAL (and @rh unchanged) if the CA bundle holds no certificate. */
int em_rh_set(struct em_rh *rh, const struct extmetrics_requestheader *src);
/* 1: authenticated through the front proxy (out filled); 0: not applicable;
 * -EACCES: a certificate from the front-proxy CA whose CN is not allowed. */
int em_rh_authenticate(const struct em_rh *rh, const struct httpd_request *req, uint64_t now,
                       struct em_user *out);

/* 1: the client certificate verifies against @store (client-ca-file) and
 * names a user (out: CN as the name, each O as a group); 0: not applicable.
 * @verified: answers of the last EM_CHAIN_TTL_MS by the chain's SHA-256, for
 * this store only (the caller empties it when the store changes). */
int em_x509_authenticate(X509_STORE *store, struct em_cache *verified,
                         const struct httpd_request *req, uint64_t now, struct em_user *out);

/* A small TTL cache keyed by strings. */
struct em_cache_entry {
    char *key;
    uint64_t expires;
    bool ok;              /* token valid / access allowed */
    struct em_user user;  /* token cache */
    char *reason;         /* authz cache */
};

struct em_cache {
    struct em_cache_entry *e;
    size_t n, max;
};

void em_cache_free(struct em_cache *c);
const struct em_cache_entry *em_cache_get(const struct em_cache *c, const char *key, uint64_t now);
struct em_cache_entry *em_cache_put(struct em_cache *c, const char *key, uint64_t expires,
                                    uint64_t now);
/* SHA-256 of a token, hex, so raw tokens are never kept. */
char *em_token_key(const char *token);
char *em_authz_key(const struct extmetrics_user *u, const struct extmetrics_attrs *a);

/* ---- upstream.c: forwarding to another adapter through pkg/httpc ---------- */

#include "httpc/httpc.h"

struct em_upstream;

int em_upstream_new(uv_loop_t *loop, const struct extmetrics_config *cfg,
                    struct em_upstream **out);
/* Cancel everything (callbacks run with -ECANCELED), then call @cb. */
void em_upstream_close(struct em_upstream *up, void (*cb)(void *), void *arg);
/* GET base + @target as @user. httpc's contract: 0 and @cb exactly once, or
 * negative and never. */
int em_upstream_get(struct em_upstream *up, const char *target, const char *accept,
                    const struct em_user *user, httpc_done_cb cb, void *arg,
                    struct httpc_req **out);


/* ---- server.c, route.c, access.c: the server and its requests -------------- */

enum em_route { R_HEALTH, R_READY, R_APIS, R_GROUP, R_RESOURCES, R_METRIC, R_OPENAPI, R_OTHER };

struct em_call;

struct extmetrics {
    uv_loop_t *loop;
    struct extmetrics_config cfg;
    struct extmetrics_provider provider;
    struct extmetrics_authorizer authz;
    struct httpd *httpd;
    struct em_upstream *up;
    struct em_rh rh;
    X509_STORE *client_store;      /* client-ca-file: certificates that are identities */
    struct em_cache client_verified; /* chains checked against it (auth.c), by SHA-256 */
    char *rh_pem, *client_pem;     /* the two bundles, whose union httpd asks for */
    struct em_cache tokens, decisions;
    struct em_call *calls;
    bool closing;
    int closing_parts;
    extmetrics_close_cb close_cb;
    void *close_arg;
    char *upstream_url;
};

/* A request waiting for the authorizer or the upstream. */
struct em_call {
    struct extmetrics *em;         /* NULL once the server closed */
    struct httpd_request *req;     /* NULL once answered */
    struct em_call *prev, *next;
    enum em_route route;
    char *ns, *metric;             /* decoded, for R_METRIC */
    int metric_id;                 /* ours, or -1 */
    struct em_user user;
    struct httpc_req *fwd;
    int waiting;                   /* callbacks still to come */
};

/* route.c: httpd's request callback (@arg: the struct extmetrics). */
void em_on_request(struct httpd_request *req, void *arg);
/* Answer c's request with a Status of @code (if not answered yet). */
void em_call_answer_status(struct em_call *c, int code, const char *msg);
/* Take @c off its server's list of calls (no-op once the server closed). */
void em_call_unlink(struct em_call *c);
/* Unlink and free @c, answering 503 if its request was never answered. */
void em_call_free(struct em_call *c);
/* Serve an authorized call; true if it was handed on (it frees itself
 * later), false when answered (the caller frees it). */
bool em_serve(struct extmetrics *em, struct em_call *c);

/* access.c: authenticate, then authorize, then em_serve() a new call. */
void em_authenticate(struct em_call *c);

#endif

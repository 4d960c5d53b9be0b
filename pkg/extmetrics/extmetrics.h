/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics: the external.metrics.k8s.io/v1beta1 API (what an HPA reads),
 * served over HTTPS through httpd, with discovery, Kubernetes Status errors,
 * front-proxy (requestheader) and bearer-token authentication, delegated
 * authorization, and forwarding of metrics gpuscaler does not own to an
 * upstream adapter (KEDA, prometheus-adapter).
 *
 * Design: extmetrics knows nothing about the controller. It asks a provider
 * (an ops table) for the current per-deployment values of the metrics it
 * owns, and an authorizer (another ops table: TokenReview and
 * SubjectAccessReview in the real backend) for identities and decisions;
 * fakes of both live in this module for tests. Discovery is served from
 * memory and is always 2xx once serving, independent of provider or upstream
 * health.
 *
 * Ownership: everything passed in is copied unless a comment says
 * otherwise; the provider's and authorizer's impl pointers are borrowed and
 * must outlive the extmetrics object. */
#ifndef GPUSCALER_EXTMETRICS_H
#define GPUSCALER_EXTMETRICS_H

#include "httpd/httpd.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define EXTMETRICS_GROUP "external.metrics.k8s.io"
#define EXTMETRICS_VERSION "v1beta1"

/* ---- metrics and values ------------------------------------------------ */

/** The metrics gpuscaler owns; names are lowercase and path-safe. */
enum extmetrics_metric {
    EXTMETRICS_DESIRED_REPLICAS,          /**< gpuscaler_desired_replicas */
    EXTMETRICS_REQUESTS_PER_GPU,          /**< gpuscaler_requests_per_gpu */
    EXTMETRICS_FORECAST_REQUESTS_PER_GPU, /**< gpuscaler_forecast_requests_per_gpu */
    EXTMETRICS_UTILIZATION,               /**< gpuscaler_utilization */
    EXTMETRICS_METRIC_COUNT
};

/** Name of @m ("gpuscaler_desired_replicas"), NULL if out of range. */
const char *extmetrics_metric_name(enum extmetrics_metric m);

/** Metric for @name, matched case-insensitively; -ENOENT if not ours. */
int extmetrics_metric_lookup(const char *name);

/** A label (or any key/value pair). */
struct extmetrics_label {
    const char *key;
    const char *value;
};

/** One value of one metric of one deployment. */
struct extmetrics_sample {
    bool present;         /**< false: no value (the deployment is not listed for it) */
    double value;         /**< non-finite values are never served */
    int64_t timestamp_ms; /**< UNIX ms the value refers to */
    int64_t window_s;     /**< window [timestamp-window, timestamp]; 0 omits it */
    bool stale;           /**< the provider knows it is out of date: not served */
};

/** A tracked deployment as the provider reports it. */
struct extmetrics_deployment {
    const char *name;
    const struct extmetrics_label *labels; /**< the Deployment's metadata labels */
    size_t nlabels;
    struct extmetrics_sample samples[EXTMETRICS_METRIC_COUNT];
};

/** Visitor the provider calls per deployment; @d is valid only during the call. */
typedef void (*extmetrics_visit_cb)(const struct extmetrics_deployment *d, void *arg);

/** How extmetrics reads current values (the controller implements this). */
struct extmetrics_provider_ops {
    /**
     * Call @visit synchronously once per deployment tracked in namespace
     * @ns. Return 0, or -ENOENT if nothing is tracked in @ns, or another
     * negative code on failure (served as 503).
     */
    int (*list)(void *impl, const char *ns, extmetrics_visit_cb visit, void *visit_arg);
    /**
     * Optional (NULL: always ready). Whether this listener should take
     * traffic (values can be served and requests authenticated: in the
     * daemon, the caches have synced and the front-proxy trust was read):
     * true, or false with a short reason
     * written to @why (@len bytes, NUL-terminated). Answered by the
     * listener's /readyz: 200 "ok", or 503 "not ready: <why>".
     */
    bool (*ready)(void *impl, char *why, size_t len);
};

struct extmetrics_provider {
    const struct extmetrics_provider_ops *ops;
    void *impl;
};

/* ---- quantities and label selectors ------------------------------------- */

/**
 * Format @v as a Kubernetes quantity in the canonical form apimachinery's
 * resource.Quantity serialises: @v's shortest round-trip decimal, parsed as
 * resource.ParseQuantity does (digits finer than 1n round away from zero to
 * 1n) and written with the largest decimal-SI suffix that keeps the mantissa
 * an integer: "3", "-2", "12500m", "3k", "1M", "250u", "124n". Returns 0,
 * -EINVAL for NaN/infinite values and magnitudes of 9e15 or more (the HPA's
 * int64 MilliValue would overflow), -ENOSPC when @outlen is too small (24
 * bytes always suffice).
 */
int extmetrics_quantity_format(double v, char *out, size_t outlen);

/**
 * extmetrics_quantity_format() of @v rounded to the nearest milli-unit (half
 * away from zero): what the served values are. The HPA reads MilliValue(),
 * which rounds anything finer up, so 3.0000000000000004 (a sum's rounding
 * noise) served as "3000000001n" read as 3001m, and an AverageValue target
 * of 1 asked for a replica more; KEDA and prometheus-adapter serve
 * milli-units too. "3", "300m", "0" for 0.0004, "1m" for 0.0005.
 */
int extmetrics_quantity_milli(double v, char *out, size_t outlen);

/** Where and why a label selector did not parse. */
struct extmetrics_parse_error {
    size_t offset;      /**< byte offset into the selector */
    char message[160];
};

struct extmetrics_selector;

/**
 * Parse a label selector with the grammar of apimachinery labels.Parse:
 * requirements separated by ','; each "key", "!key", "key=v", "key==v",
 * "key!=v", "key in (a,b)", "key notin (a,b)", "key>N", "key<N". Keys and
 * values are validated like Kubernetes label keys/values. An empty or
 * all-blank string selects everything. Returns 0 and *out (free with
 * extmetrics_selector_free), or -EINVAL with @err filled (if not NULL).
 */
int extmetrics_selector_parse(const char *s, struct extmetrics_selector **out,
                              struct extmetrics_parse_error *err);

/** True if the label set matches every requirement. */
bool extmetrics_selector_matches(const struct extmetrics_selector *sel,
                                 const struct extmetrics_label *labels, size_t n);

void extmetrics_selector_free(struct extmetrics_selector *sel);

/* ---- authentication and authorization ------------------------------------ */

/** An authenticated identity. */
struct extmetrics_user {
    const char *name;
    const char *uid;                     /**< may be NULL */
    const char *const *groups;
    size_t ngroups;
    const struct extmetrics_label *extra; /**< repeated keys allowed */
    size_t nextra;
};

/** What is being asked, in SubjectAccessReview terms. */
struct extmetrics_attrs {
    bool resource_request;  /**< true: resourceAttributes; false: nonResourceAttributes */
    const char *verb;       /**< "list" for metric reads, "get" for discovery */
    const char *group;      /**< external.metrics.k8s.io */
    const char *version;    /**< v1beta1 */
    const char *resource;   /**< the metric name */
    const char *namespace_; /**< the namespace */
    const char *path;       /**< non-resource: the request path */
};

/**
 * Result of authenticating a token: @status 0 and @user (valid during the
 * call) when the token is valid; -EACCES when it is not (401); another
 * negative code when the review could not be made (401, not cached).
 */
typedef void (*extmetrics_authn_cb)(int status, const struct extmetrics_user *user, void *arg);

/**
 * Result of an authorization: @status 0 with @allowed, @reason (may be
 * NULL); negative when the review could not be made (500, not cached).
 */
typedef void (*extmetrics_authz_cb)(int status, bool allowed, const char *reason, void *arg);

/**
 * Delegated authentication and authorization (TokenReview and
 * SubjectAccessReview against the kube-apiserver in the real backend).
 * Each function either returns 0 and calls its callback exactly once (now
 * or later, on the loop thread), or returns a negative code and never calls
 * it. Inputs are valid only during the call: copy what is kept.
 */
struct extmetrics_authorizer_ops {
    int (*authenticate_token)(void *impl, const char *token, extmetrics_authn_cb cb, void *arg);
    int (*authorize)(void *impl, const struct extmetrics_user *user,
                     const struct extmetrics_attrs *attrs, extmetrics_authz_cb cb, void *arg);
};

struct extmetrics_authorizer {
    const struct extmetrics_authorizer_ops *ops;
    void *impl;
};

/* ---- the review documents (pure; the real authorizer sends them) ------------ */

/**
 * A new authentication.k8s.io/v1 TokenReview asking about @token. The
 * caller owns the reference (json_decref).
 */
json_t *extmetrics_tokenreview_new(const char *token);

/** An identity read from a TokenReview answer (see extmetrics_tokenreview_user). */
struct extmetrics_review_user {
    struct extmetrics_user user; /**< strings point into the review's JSON */
    /* private: the arrays behind user.groups and user.extra */
    const char **groups_;
    struct extmetrics_label *extra_;
};

/**
 * Read status.user of a TokenReview answer (@review is borrowed and must
 * outlive @out's strings): username, uid, groups, and extra (a map of lists,
 * one extmetrics_label per value). Returns 0 when status.authenticated is
 * true, -EACCES when it is not, -EBADMSG when the document is malformed or
 * names no user. On success release @out with extmetrics_review_user_free().
 */
int extmetrics_tokenreview_user(const json_t *review, struct extmetrics_review_user *out);

/** Release what extmetrics_tokenreview_user() allocated; NULL is a no-op. */
void extmetrics_review_user_free(struct extmetrics_review_user *u);

/**
 * A new authorization.k8s.io/v1 SubjectAccessReview asking whether @user may
 * do @attrs, as k8s.io/apiserver's webhook authorizer builds it: spec.user,
 * groups, extra (every value of a key, keys sorted, as map[string][]string),
 * uid, and resourceAttributes (namespace, verb, group, version, resource) or
 * nonResourceAttributes (path, verb); empty fields are left out. The caller
 * owns the reference.
 */
json_t *extmetrics_sar_new(const struct extmetrics_user *user,
                           const struct extmetrics_attrs *attrs);

/**
 * Front-proxy trust, normally from ConfigMap
 * kube-system/extension-apiserver-authentication (keys
 * requestheader-client-ca-file, -allowed-names, -username-headers,
 * -uid-headers, -group-headers, -extra-headers-prefix). Client certificates
 * that chain to @client_ca_pem and whose CN is in @allowed_names (empty
 * list: any CN) may assert a user through the named headers.
 */
struct extmetrics_requestheader {
    const char *client_ca_pem;
    size_t client_ca_len;
    const char *const *allowed_names;
    size_t nallowed_names;
    const char *const *username_headers; /**< first non-empty wins; e.g. X-Remote-User */
    size_t nusername_headers;
    const char *const *uid_headers;
    size_t nuid_headers;
    const char *const *group_headers;    /**< every non-empty value of each is a group */
    size_t ngroup_headers;
    const char *const *extra_prefixes;   /**< e.g. X-Remote-Extra- (empty values kept) */
    size_t nextra_prefixes;
};

/* ---- the server ------------------------------------------------------------ */

/** The listener's default request body limit: the API is read-only (GET
 *  and HEAD), so nothing larger is read, and before authentication an
 *  unknown client cannot make it buffer httpd's default 1 MiB. */
#define EXTMETRICS_MAX_BODY_BYTES 4096
/** The listener's default limit on a request's line and headers, and on
 *  their number (one per 16 bytes of it: 2,048): the aggregator sends one
 *  X-Remote-Group header per group of the user, and a directory's users may
 *  be in hundreds (httpd's defaults, 16 KiB and 100 headers, refused a user
 *  in about 90 with 431). Go's server allows 1 MiB. Before any
 *  authentication a connection then holds up to about 256 KiB (the headers'
 *  text, a copy of the target, their index and array, and the read buffer
 *  beside them), times max_connections (256: about 64 MiB). */
#define EXTMETRICS_MAX_HEADER_BYTES (32 * 1024)

/** Clock injected by the caller (UNIX ms). */
typedef int64_t (*extmetrics_clock_fn)(void *arg);

struct extmetrics_config {
    struct httpd_config listen;    /**< the HTTPS listener (tls is forced on unless
                                        allow_plain_for_tests; max_body_bytes defaults to
                                        EXTMETRICS_MAX_BODY_BYTES, max_header_bytes to
                                        EXTMETRICS_MAX_HEADER_BYTES) */
    bool allow_plain_for_tests;
    int64_t max_age_ms;            /**< samples older than this are stale [120000]; <0 disables */
    extmetrics_clock_fn clock;     /**< [util_now_unix_ms] */
    void *clock_arg;
    bool disable_auth;             /**< serve everyone (local runs and tests only) */
    uint64_t authn_ttl_ms;         /**< cache of token reviews [10000] */
    uint64_t authz_ttl_ms;         /**< cache of access reviews [10000] */
    size_t cache_entries;          /**< per cache [1024] */
    /* upstream adapter for metrics gpuscaler does not own (optional) */
    const char *upstream_url;      /**< base, e.g. "https://keda-metrics-apiserver.keda:443" */
    const char *upstream_ca_file;  /**< CA to verify it; NULL: system CAs */
    const char *upstream_cert_file;/**< client certificate (front-proxy style), with key */
    const char *upstream_key_file;
    const char *upstream_token_file;/**< bearer token file, re-read at most once a minute */
    bool upstream_insecure;        /**< skip server verification (tests only) */
    uint64_t upstream_timeout_ms;  /**< [10000] */
    size_t upstream_max_bytes;     /**< response cap [8 MiB] */
};

struct extmetrics;

/** Called once the server has closed and its memory is released. */
typedef void (*extmetrics_close_cb)(void *arg);

/**
 * Create the API server on @loop and start listening. @provider and
 * @authorizer (may be NULL only with disable_auth) are copied by value;
 * their impl must outlive the object. Returns 0 and *out, -EINVAL for a bad
 * config, or what httpd_new returns.
 */
int extmetrics_new(uv_loop_t *loop, const struct extmetrics_config *cfg,
                   const struct extmetrics_provider *provider,
                   const struct extmetrics_authorizer *authorizer, struct extmetrics **out);

/**
 * Replace the front-proxy trust (copied). NULL stops trusting any proxy.
 * Returns 0, or -EINVAL if the CA bundle holds no certificate (the previous
 * settings stay). Only a certificate that chains to this CA (any certificate
 * of the bundle is an anchor, intermediates included) may assert a user in
 * headers; one from the client CA (extmetrics_set_client_ca) cannot, whatever
 * its CN, as long as the two bundles are different CAs (see
 * extmetrics_client_ca_can_proxy).
 */
int extmetrics_set_requestheader(struct extmetrics *em, const struct extmetrics_requestheader *rh);

/**
 * Trust client certificates that chain to @pem (@len bytes, the
 * kube-apiserver's client-ca-file from the same ConfigMap) as identities,
 * as the apiserver's delegated authentication does: the subject's CN is the
 * user name, each O a group (plus system:authenticated); the certificate
 * must be valid now and allow client authentication (an extended key usage
 * of clientAuth or any, or none at all, as Go checks it). Every certificate
 * of the bundle is an anchor, intermediates included. The identity is then
 * authorized like any other, with a SubjectAccessReview. Requests try the
 * front proxy first, then the client certificate, then a bearer token.
 * NULL (or @len 0) stops. Returns 0, or -EINVAL if the bundle holds no
 * certificate (the previous CA stays).
 */
int extmetrics_set_client_ca(struct extmetrics *em, const char *pem, size_t len);

/**
 * Whether certificates of the client CA can act as front proxies: the
 * front-proxy bundle (extmetrics_set_requestheader, with username headers)
 * and the client CA bundle (extmetrics_set_client_ca) share a certificate,
 * and no allowed names restrict the proxy's CN. Any client holding a
 * certificate of client-ca-file could then assert any user in headers; the
 * caller warns about it.
 */
bool extmetrics_client_ca_can_proxy(const struct extmetrics *em);

/** Bound port of the listener. */
int extmetrics_port(const struct extmetrics *em);

/** The underlying server (e.g. for httpd_reload_certs). */
struct httpd *extmetrics_httpd(struct extmetrics *em);

/**
 * Close: stop listening, cancel upstream requests, answer requests waiting
 * for the authorizer with 503 when it calls back. @cb (may be NULL) runs
 * when everything is closed. No-op on NULL or when already closing.
 */
void extmetrics_close(struct extmetrics *em, extmetrics_close_cb cb, void *arg);

/* ---- fakes for tests ----------------------------------------------------- */

struct extmetrics_fake_provider;

/** A provider serving deployments set by the test. */
struct extmetrics_fake_provider *extmetrics_fake_provider_new(void);
void extmetrics_fake_provider_free(struct extmetrics_fake_provider *fp);
/** Ops table + impl for extmetrics_new. */
struct extmetrics_provider extmetrics_fake_provider_get(struct extmetrics_fake_provider *fp);
/**
 * Add (or replace, by namespace and name) a deployment; @labels is a
 * NULL-terminated key, value, key, value... list. Returns its index.
 */
int extmetrics_fake_provider_set(struct extmetrics_fake_provider *fp, const char *ns,
                                 const char *name, const char *const *labels);
/** Set one sample of a deployment added before. */
void extmetrics_fake_provider_sample(struct extmetrics_fake_provider *fp, const char *ns,
                                     const char *name, enum extmetrics_metric m,
                                     struct extmetrics_sample s);
/** Make list() fail with @err (0 restores). */
void extmetrics_fake_provider_fail(struct extmetrics_fake_provider *fp, int err);
/** Make ready() answer false with reason @why (copied; NULL: ready again, the default). */
void extmetrics_fake_provider_not_ready(struct extmetrics_fake_provider *fp, const char *why);

struct extmetrics_fake_authorizer;

/**
 * An authorizer with a fixed token table and allow rules. Callbacks are
 * delivered asynchronously (next loop iteration through a timer) when
 * @loop is not NULL, synchronously otherwise. Counts calls.
 */
struct extmetrics_fake_authorizer *extmetrics_fake_authorizer_new(uv_loop_t *loop);
/** Free it once the loop has delivered every pending answer. */
void extmetrics_fake_authorizer_free(struct extmetrics_fake_authorizer *fa);
struct extmetrics_authorizer extmetrics_fake_authorizer_get(struct extmetrics_fake_authorizer *fa);
/** Token @token authenticates as @user with @group (may be NULL). */
void extmetrics_fake_authorizer_add_token(struct extmetrics_fake_authorizer *fa, const char *token,
                                          const char *user, const char *group);
/** The token's user also carries extra @key=@value (repeat for more values). */
void extmetrics_fake_authorizer_add_token_extra(struct extmetrics_fake_authorizer *fa,
                                                const char *token, const char *key,
                                                const char *value);
/**
 * The SubjectAccessReview (extmetrics_sar_new, compact JSON in its field
 * order) of the last authorize call, "" before any; valid until the next.
 */
const char *extmetrics_fake_authorizer_last_review(const struct extmetrics_fake_authorizer *fa);
/** Allow @user (or "*") the @verb on resource @resource ("*": any; non-resource: the path). */
void extmetrics_fake_authorizer_allow(struct extmetrics_fake_authorizer *fa, const char *user,
                                      const char *verb, const char *resource);
/**
 * While @hold is true, answers are kept back; setting it false delivers
 * them (tests of requests outliving the server).
 */
void extmetrics_fake_authorizer_hold(struct extmetrics_fake_authorizer *fa, bool hold);
/** Number of answers currently held back. */
int extmetrics_fake_authorizer_held(const struct extmetrics_fake_authorizer *fa);

/** Number of authenticate_token and authorize calls received. */
int extmetrics_fake_authorizer_authn_calls(const struct extmetrics_fake_authorizer *fa);
int extmetrics_fake_authorizer_authz_calls(const struct extmetrics_fake_authorizer *fa);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* kube: the Kubernetes API client: configuration (in-cluster and kubeconfig),
 * JSON request helpers, client-go-style list+watch reflectors and the
 * informer-like caches of Deployments and Pods the controller reads.
 *
 * All traffic goes through pkg/httpc on the daemon's loop. The client and the
 * caches are handles in libuv's sense (new/close(cb)); every request helper
 * is a request (returns an error and never calls back, or returns 0 and calls
 * back exactly once, -ECANCELED when the client closes first).
 *
 * The caches only keep compact structs (no JSON after an event is applied)
 * and only notify: the controller recomputes from them on each tick (STYLE
 * rule 15) and must not act before kube_cache_synced() is true. */
#ifndef GPUSCALER_KUBE_H
#define GPUSCALER_KUBE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "httpc/httpc.h"

struct util_buf;

/* ======================================================================= */
/* Configuration                                                           */
/* ======================================================================= */

/**
 * A kubeconfig user's exec credential plugin (client.authentication.k8s.io,
 * as `aws eks get-token`, `gke-gcloud-auth-plugin` or `kubelogin`). Owned.
 */
struct kube_exec_config {
    char *api_version;         /**< client.authentication.k8s.io/v1 or /v1beta1 */
    char *command;             /**< a path (a relative one joined to the kubeconfig's
                                    directory) or a name looked up in PATH */
    char **args;               /**< nargs arguments */
    size_t nargs;
    char **env;                /**< nenv "NAME=value", added to gpuscaler's environment */
    size_t nenv;
    char *install_hint;        /**< told when the command cannot be run, or NULL */
    bool provide_cluster_info; /**< the cluster goes in KUBERNETES_EXEC_INFO: server,
                                    tls-server-name, CA, insecure-skip-tls-verify, proxy-url,
                                    disable-compression, config (its exec extension) */
};

/** How to reach and authenticate to the API server. Every string is owned. */
struct kube_config {
    char *server;          /**< "https://host:port" (or http://), no trailing slash; a
                                kubeconfig server without a scheme is http:// (client-go) */
    bool plain_unused;     /**< the server is http://, so the kubeconfig's credentials and TLS
                                settings, which it had, are not used (nor by client-go) */
    char *ca_file;         /**< CA bundle (PEM) path, or NULL */
    char *ca_data;         /**< CA bundle PEM bytes (wins over ca_file), or NULL */
    size_t ca_data_len;
    char *cert_file;       /**< client certificate path, or NULL */
    char *cert_data;       /**< client certificate PEM (wins over cert_file), or NULL */
    size_t cert_data_len;
    char *key_file;        /**< client key path, or NULL */
    char *key_data;        /**< client key PEM (wins over key_file), or NULL */
    size_t key_data_len;
    char *token;           /**< static bearer token, or NULL */
    char *token_file;      /**< bearer token file re-read when it changes (wins over token) */
    bool insecure;         /**< insecure-skip-tls-verify */
    char *proxy_url;       /**< proxy-url as curl takes it (socks5 -> socks5h), or NULL */
    char *proxy_url_orig;  /**< proxy-url as the kubeconfig has it (scheme in lower case), for
                                an exec plugin's cluster info, or NULL */
    char *tls_server_name; /**< tls-server-name: the name TLS verifies (and SNI), or NULL */
    bool disable_compression; /**< disable-compression: no Accept-Encoding on requests */
    char *exec_cluster_config; /**< the cluster's extension client.authentication.k8s.io/exec as
                                    JSON text (an exec plugin's spec.cluster.config), or NULL */
    struct kube_exec_config *exec; /**< exec credential plugin (no other credential then), or NULL */
    char *context;         /**< kubeconfig context used; NULL in-cluster */
    char *user;            /**< kubeconfig user of that context; NULL in-cluster */
    char *namespace_;      /**< default namespace: the context's, the service account's, or "default" */
};

/** Where a configuration problem is: line/col are 0 when not from a file position. */
struct kube_config_error {
    int line;
    int col;
    size_t doc;      /**< kube_config_parse_docs(): the document it is in */
    char msg[400];
};

/** One document of a merged set (KUBECONFIG=a:b). */
struct kube_config_doc {
    const char *buf;
    size_t len;
    const char *base_dir; /**< its relative paths join this, when not NULL */
};

/**
 * Parse a kubeconfig document (pure: no file access; relative certificate,
 * key and token file paths are joined to base_dir when it is not NULL).
 * context selects the context; NULL or "" uses current-context. Fields gpuscaler
 * does not use (preferences, extensions, ...) are ignored; auth it cannot do
 * (auth-provider, username/password, impersonation, an exec plugin in
 * interactiveMode Always) and a proxy-url of another scheme than http, https
 * or socks5 are errors naming the
 * context and user, and so is what client-go's validation refuses in an exec
 * plugin (no command or apiVersion, an env entry without name or value, v1
 * without interactiveMode). The YAML is read as client-go reads it (anchors,
 * aliases and merge keys expanded, within bounds; a repeated key's last value
 * wins). A server without a scheme (host:port) is http://; over http://, as
 * in client-go, the cluster's CA, insecure-skip-tls-verify and
 * tls-server-name and the user's credentials (checked all the same) are not
 * used. Returns 0, -ENODATA when the configuration is empty and no context
 * was given (no current-context, context, cluster or user: client-go's
 * IsEmptyConfig, after which it tries in-cluster), or -EINVAL; err is filled
 * on errors (out is then cleared).
 */
int kube_config_parse(const char *buf, size_t len, const char *context, const char *base_dir,
                      struct kube_config *out, struct kube_config_error *err);

/**
 * kube_config_parse() over documents merged as client-go merges KUBECONFIG's
 * files: the first current-context set wins, a context, cluster or user comes
 * from the first document naming it, and its relative paths from that
 * document's base_dir. An empty document of several adds nothing. err->doc
 * says which document an error is in (line 0: not one place).
 */
int kube_config_parse_docs(const struct kube_config_doc *docs, size_t ndocs, const char *context,
                           struct kube_config *out, struct kube_config_error *err);

/**
 * Read and merge kubeconfig files (kube_config_parse_docs) as client-go reads
 * KUBECONFIG's list: files that do not exist are skipped, -ENOENT when none
 * does. Errors name the file and line.
 */
int kube_config_load_files(const char *const *paths, size_t n, const char *context,
                           struct kube_config *out, struct kube_config_error *err);

/** Read and parse a kubeconfig file (base_dir is the file's directory); -errno on I/O errors. */
int kube_config_load_file(const char *path, const char *context, struct kube_config *out,
                          struct kube_config_error *err);

/** In-cluster locations; NULL fields take the real defaults. For tests. */
struct kube_incluster_opts {
    const char *host;           /**< default $KUBERNETES_SERVICE_HOST */
    const char *port;           /**< default $KUBERNETES_SERVICE_PORT */
    const char *token_path;     /**< default /var/run/secrets/kubernetes.io/serviceaccount/token */
    const char *ca_path;        /**< default .../serviceaccount/ca.crt */
    const char *namespace_path; /**< default .../serviceaccount/namespace */
};

/**
 * In-cluster configuration: https://host:port, the service account's CA file
 * and token file (re-read when it changes, as the kubelet rotates it). o may
 * be NULL. -ENOENT when not running in a cluster (no host/port) or the token
 * file is missing; err says which.
 */
int kube_config_in_cluster(const struct kube_incluster_opts *o, struct kube_config *out,
                           struct kube_config_error *err);

/**
 * Pick the configuration like controller-runtime: kubeconfig_path (the
 * --kubeconfig flag) when not NULL; else $KUBECONFIG (a colon-separated list,
 * merged as kube_config_load_files() does); else in-cluster when
 * $KUBERNETES_SERVICE_HOST is set; else ~/.kube/config. A kubeconfig that is
 * empty (-ENODATA), or a $KUBECONFIG none of whose files exists, gives way
 * to in-cluster when $KUBERNETES_SERVICE_HOST is set, as client-go's
 * DeferredLoadingClientConfig does. context applies to kubeconfig files only.
 */
int kube_config_resolve(const char *kubeconfig_path, const char *context, struct kube_config *out,
                        struct kube_config_error *err);

/** Free the strings; the struct is zeroed. NULL-safe. */
void kube_config_clear(struct kube_config *c);

/**
 * Decode standard base64 (whitespace ignored, padding optional) into a new
 * buffer (NUL-terminated, *outlen excludes the NUL). -EINVAL on bad input.
 */
int kube_base64_decode(const char *in, size_t len, char **out, size_t *outlen);

/** Encode in[0..len) as standard padded base64 (OpenSSL's EVP_EncodeBlock) into
 *  a new NUL-terminated string the caller frees. */
char *kube_base64_encode(const uint8_t *in, size_t len);

/* ======================================================================= */
/* Client and request helpers                                              */
/* ======================================================================= */

struct kube;

typedef void (*kube_close_cb)(void *arg);

struct kube_opts {
    int64_t request_timeout_ms; /**< per non-watch request; 0 = 30 s */
    const char *user_agent;     /**< NULL = "gpuscaler" */
};

/**
 * Create a client on loop that sends through http (borrowed: it must outlive
 * the client). cfg is copied. o may be NULL. Returns 0 or -EINVAL (no server).
 */
int kube_new(uv_loop_t *loop, struct httpc *http, const struct kube_config *cfg,
             const struct kube_opts *o, struct kube **out);

/**
 * Close the client: in-flight requests complete with -ECANCELED, then cb runs
 * (from the loop) and the memory is gone. Close every cache/reflector made on
 * this client first. cb may be NULL.
 */
void kube_close(struct kube *k, kube_close_cb cb, void *arg);

/**
 * Begin draining (the daemon is stopping): from now on a request the server
 * throttled (429, or a 5xx with Retry-After) is sent again only when its wait
 * ends within budget_ms of this call; otherwise it completes with that answer.
 * Shutdown's writes thus end within the pod's grace period, not after up to
 * 10 waits of 10 s. Requests are sent as before. A second call keeps the
 * first deadline.
 */
void kube_drain(struct kube *k, int64_t budget_ms);

/**
 * Append the client's metrics (Prometheus text): request latency histogram by
 * verb (watches excluded), errors by class (transport, throttled 429,
 * conflict 409, client 4xx other than 404, server 5xx), the API server's
 * warnings, retries, and with an exec plugin its runs by result.
 */
struct util_buf;
void kube_write_metrics(const struct kube *k, struct util_buf *out);

/* ---- the API server's warnings ------------------------------------------- */

/** Longest warning text kept; a longer one is cut (on a character boundary). */
#define KUBE_WARNING_MAX 512

typedef void (*kube_warning_cb)(void *arg, int code, const char *text);

/**
 * Parse one Warning header value as client-go does: `CODE AGENT "TEXT"
 * ["DATE"]`, several comma-separated; the text's backslash escapes undone,
 * UTF-8 without control characters. cb gets each warning in order. Returns
 * how many were given to cb, or -EBADMSG when the first is malformed (a
 * malformed later one ends the parse there). Pure.
 */
int kube_warning_parse(const char *value, kube_warning_cb cb, void *arg);

/** The configured server URL and default namespace. */
const char *kube_server(const struct kube *k);
const char *kube_namespace(const struct kube *k);

/** Outcome of a request helper, valid during the callback. */
struct kube_result {
    int err;                /**< 0 for 2xx; kube_status_errno(status) for other statuses;
                                 a negative httpc error (status 0) for transport failures;
                                 -EBADMSG for a 2xx body that is not JSON */
    long status;            /**< HTTP status, 0 when none */
    json_t *body;           /**< parsed JSON body or NULL; borrowed (json_incref to keep) */
    const char *reason;     /**< Status.reason of an error ("Conflict", "AlreadyExists",
                                 "NotFound", ...) or "" */
    const char *message;    /**< Status.message or the transport error, "" on success */
    int64_t retry_after_ms; /**< Retry-After of a 429/503, -1 if none */
};

typedef void (*kube_result_cb)(const struct kube_result *res, void *arg);

/**
 * Map an HTTP status to the errno used in kube_result.err: 2xx 0, 400/422
 * -EINVAL, 401 -EACCES, 403 -EPERM, 404 -ENOENT, 409 -EEXIST (both
 * AlreadyExists on create and Conflict on a stale resourceVersion: tell them
 * apart with reason), 410 -ESTALE, 429 -EBUSY, 5xx (and others) -EIO,
 * 503/504 -EAGAIN.
 */
int kube_status_errno(long status);

/**
 * Send one JSON request: method ("GET", "POST", "PUT", "PATCH", "DELETE"),
 * path starting with "/" (query included, already escaped), body (borrowed,
 * serialised before return; NULL for none) with content_type (NULL =
 * application/json). Returns 0, -EINVAL (bad arguments), -ESHUTDOWN (client
 * closing) or an httpc_request() error. A 429, or a 5xx with Retry-After,
 * is sent again after the wait it names when that is at most 10 s, up to 10
 * times, as client-go does; cb then gets the last answer (with its
 * retry_after_ms), or -ECANCELED when the client closes meanwhile.
 */
int kube_request(struct kube *k, const char *method, const char *path, const char *content_type,
                 const json_t *body, kube_result_cb cb, void *arg);
/** kube_request() that ends within within_ms of now, its retries included: each
 *  attempt's timeout is cut to what is left, and a Retry-After wait that would end
 *  later is not taken (cb gets the 429). within_ms 0 = no deadline. */
int kube_request_within(struct kube *k, int64_t within_ms, const char *method, const char *path,
                        const char *content_type, const json_t *body, kube_result_cb cb,
                        void *arg);

int kube_get(struct kube *k, const char *path, kube_result_cb cb, void *arg);
/** POST body to path (a collection). */
int kube_create(struct kube *k, const char *path, const json_t *obj, kube_result_cb cb, void *arg);
/** PUT obj to path; a metadata.resourceVersion in obj is a precondition (409 when stale). */
int kube_update(struct kube *k, const char *path, const json_t *obj, kube_result_cb cb, void *arg);
/** PATCH with application/merge-patch+json (RFC 7386: null deletes a key). */
int kube_patch_merge(struct kube *k, const char *path, const json_t *patch, kube_result_cb cb,
                     void *arg);

/*
 * Typed helpers: ns and name must be DNS-1123 names (else -EINVAL, no
 * callback). They only build the path; the callbacks get the server's objects.
 */
/** GET apps/v1 deployments/{name}/scale (an autoscaling/v1 Scale). */
int kube_scale_get(struct kube *k, const char *ns, const char *name, kube_result_cb cb, void *arg);
/** PATCH .../scale with {"spec":{"replicas":replicas}} as a merge patch. */
int kube_scale_patch(struct kube *k, const char *ns, const char *name, int32_t replicas,
                     kube_result_cb cb, void *arg);
/** Merge-patch metadata.annotations of a Deployment (a null value removes a key),
 *  ending within within_ms as kube_request_within() (0: no deadline).
 *  With uid (NULL or "": none) the patch carries it as metadata.uid: the API
 *  server refuses it (422, field is immutable) on a Deployment of that name
 *  made since, instead of writing to it. */
int kube_deployment_patch_annotations(struct kube *k, const char *ns, const char *name,
                                      const char *uid, const json_t *annotations,
                                      int64_t within_ms, kube_result_cb cb, void *arg);
/** coordination.k8s.io/v1 Leases. Update sends lease as is (its resourceVersion guards it).
 *  Each ends within within_ms, retries after a 429 included (0 = the client's timeout):
 *  a lease request answered after its renew deadline is of no use, as client-go's
 *  leader election bounds its requests by RenewDeadline. */
int kube_lease_get(struct kube *k, const char *ns, const char *name, int64_t within_ms,
                   kube_result_cb cb, void *arg);
int kube_lease_create(struct kube *k, const char *ns, const json_t *lease, int64_t within_ms,
                      kube_result_cb cb, void *arg);
int kube_lease_update(struct kube *k, const char *ns, const char *name, const json_t *lease,
                      int64_t within_ms, kube_result_cb cb, void *arg);
/** LIST the namespace's Leases. */
int kube_lease_list(struct kube *k, const char *ns, int64_t within_ms, kube_result_cb cb,
                    void *arg);
/** DELETE a Lease only while its resourceVersion is still resource_version
 *  (DeleteOptions preconditions: 409 Conflict once it changed, 404 when gone). */
int kube_lease_delete(struct kube *k, const char *ns, const char *name,
                      const char *resource_version, int64_t within_ms, kube_result_cb cb,
                      void *arg);
/** core/v1 Events. */
int kube_event_create(struct kube *k, const char *ns, const json_t *event, kube_result_cb cb,
                      void *arg);
/** core/v1 ConfigMaps. */
int kube_configmap_get(struct kube *k, const char *ns, const char *name, kube_result_cb cb,
                       void *arg);
int kube_configmap_create(struct kube *k, const char *ns, const json_t *cm, int64_t within_ms,
                          kube_result_cb cb, void *arg);
int kube_configmap_update(struct kube *k, const char *ns, const char *name, const json_t *cm,
                          kube_result_cb cb, void *arg);
/** JSON merge patch (RFC 7386) of a ConfigMap: keys of binaryData/data not in the
 *  patch are kept, a null value removes one. 404 when it does not exist. The create
 *  and the patch end within within_ms as kube_request_within() (0: no deadline). */
int kube_configmap_patch(struct kube *k, const char *ns, const char *name, const json_t *patch,
                         int64_t within_ms, kube_result_cb cb, void *arg);
/** LIST autoscaling/v2 HorizontalPodAutoscalers of a namespace. */
int kube_hpa_list(struct kube *k, const char *ns, kube_result_cb cb, void *arg);
/** POST authentication.k8s.io/v1 TokenReview / authorization.k8s.io/v1 SubjectAccessReview. */
int kube_tokenreview_create(struct kube *k, const json_t *review, kube_result_cb cb, void *arg);
int kube_subjectaccessreview_create(struct kube *k, const json_t *review, kube_result_cb cb,
                                    void *arg);

/** true when s is a valid DNS-1123 subdomain (names, namespaces). */
bool kube_name_valid(const char *s);

/* ======================================================================= */
/* Label selectors (pure)                                                  */
/* ======================================================================= */

struct kube_label {
    const char *key;
    const char *value;
};

/** A label set, sorted by key, keys unique. */
struct kube_labels {
    struct kube_label *items;
    size_t n;
};

/** Value of key, or NULL. */
const char *kube_labels_get(const struct kube_labels *l, const char *key);

enum kube_sel_op { KUBE_SEL_IN, KUBE_SEL_NOT_IN, KUBE_SEL_EXISTS, KUBE_SEL_DOES_NOT_EXIST };

struct kube_sel_req {
    char *key;
    enum kube_sel_op op;
    char **values;
    size_t nvalues;
};

/** metav1.LabelSelector: matchLabels AND every matchExpression. Strings owned. */
struct kube_selector {
    struct kube_label *match; /**< owned keys and values (cast away const to free) */
    size_t nmatch;
    struct kube_sel_req *exprs;
    size_t nexprs;
    bool nothing;             /**< a null selector: matches no object */
};

/**
 * Parse a LabelSelector JSON object. NULL or JSON null gives a selector that
 * matches nothing; {} matches everything (metav1 semantics). Unknown
 * operators, In/NotIn without values, Exists/DoesNotExist with values and
 * non-string labels are -EINVAL with a message in err (out is then cleared).
 */
int kube_selector_from_json(const json_t *j, struct kube_selector *out, char *err, size_t errlen);
void kube_selector_clear(struct kube_selector *s);
/** Whether labels satisfy s. */
bool kube_selector_matches(const struct kube_selector *s, const struct kube_labels *labels);
/**
 * Append the selector in the query-string syntax ("a=b,c in (x,y),!d,e");
 * a nothing-selector appends nothing and returns -EINVAL.
 */
int kube_selector_format(const struct kube_selector *s, struct util_buf *out);

/* ======================================================================= */
/* Watch stream decoding (pure)                                            */
/* ======================================================================= */

enum kube_event_type {
    KUBE_EV_ADDED,
    KUBE_EV_MODIFIED,
    KUBE_EV_DELETED,
    KUBE_EV_BOOKMARK,
    KUBE_EV_ERROR,
};

/** Cap on one watch event line: 16 MiB. */
#define KUBE_WATCH_MAX_EVENT ((size_t)16 << 20)

struct kube_watch_decoder;

/**
 * One decoded event; object is borrowed for the call. Return 0 to go on or a
 * negative errno to stop kube_watch_decoder_feed(), which then returns it.
 */
typedef int (*kube_watch_event_cb)(enum kube_event_type type, json_t *object, void *arg);

/** A decoder with a cap on one event (0 = KUBE_WATCH_MAX_EVENT). */
struct kube_watch_decoder *kube_watch_decoder_new(size_t max_event);
void kube_watch_decoder_free(struct kube_watch_decoder *d);
/** Forget buffered bytes and the error (for a new stream). */
void kube_watch_decoder_reset(struct kube_watch_decoder *d);

/**
 * Feed any chunk of a newline-delimited watch stream. Complete events are
 * parsed and passed to cb in order; an incomplete tail is kept for the next
 * call. Returns 0, -EMSGSIZE (an event longer than the cap), -EBADMSG (not
 * JSON, or not {"type":KNOWN,"object":{...}}), or what cb returned. After an
 * error the decoder refuses more input until reset; the message is in
 * kube_watch_decoder_error().
 */
int kube_watch_decoder_feed(struct kube_watch_decoder *d, const char *buf, size_t len,
                            kube_watch_event_cb cb, void *arg);
/** End of stream: 0, what an earlier feed returned, or -ENODATA when a partial
 *  event (non-blank bytes after the last newline) is left; it is dropped. */
int kube_watch_decoder_finish(struct kube_watch_decoder *d);
const char *kube_watch_decoder_error(const struct kube_watch_decoder *d);

const char *kube_event_type_name(enum kube_event_type t);

/* ======================================================================= */
/* Reflector: list + watch of one resource collection                      */
/* ======================================================================= */

/** Tuning; zero fields take the defaults shown (client-go's). */
struct kube_watch_opts {
    int64_t min_timeout_s;     /**< watch timeoutSeconds drawn from [min, max]: 300 */
    int64_t max_timeout_s;     /**< 600 */
    int64_t backoff_initial_ms;/**< 800 */
    int64_t backoff_max_ms;    /**< 30000 */
    double backoff_jitter;     /**< 1.0: a delay d becomes d * (1 + jitter * rand[0,1)) */
    int64_t backoff_reset_ms;  /**< a quiet period that resets the backoff: 120000 */
    int64_t min_watch_ms;      /**< a watch that ends sooner with no event is an error: 1000 */
    int64_t healthy_ms;        /**< a watch open this long after failures makes the view
                                    current again (kube_reflector_down_ms): 15000, past the
                                    10 s connect timeout */
    unsigned page_limit;       /**< LIST page size (limit/continue): 500; set ~0u for no paging */
    /** A watch receiving under 1 byte/s for this long ends and resumes from its
     *  resourceVersion, whatever the server sends. 0 (the default): no limit
     *  until the server has sent a bookmark more than 10 s before a watch's
     *  end (kube-apiserver's watch cache sends one about every minute), then
     *  bookmark_stall_ms; <0: never. client-go has none, but a server without
     *  periodic bookmarks (its watch cache off) sends nothing on a quiet
     *  collection. A dead connection is noticed by TCP keepalives (about
     *  60 s; behind a proxy, up to the proxy only), a hung one by the
     *  watch's deadline, timeoutSeconds + 30 s. */
    int64_t stall_ms;
    /** The stall limit once the server has shown periodic bookmarks (stall_ms
     *  0): 150000; <0 = none. */
    int64_t bookmark_stall_ms;
    uint64_t seed;             /**< PRNG seed for jitter and timeouts; 0 = from the clock */
};

/** What a reflector feeds. The object passed is borrowed for the call. */
struct kube_sink {
    /** A (re)list starts: everything in the reflector's scope may be stale.
     *  It may come again before list_end: the list started over, and the
     *  items since the previous list_begin are void. */
    void (*list_begin)(void *arg);
    /** A list item (as KUBE_EV_ADDED; page by page, between list_begin and
     *  list_end) or a watch ADDED/MODIFIED/DELETED event (after list_end). */
    void (*event)(void *arg, enum kube_event_type type, json_t *obj);
    /** The list is complete: drop what was not seen since list_begin. */
    void (*list_end)(void *arg);
};

struct kube_reflector;

/** Counters for tests and metrics. */
struct kube_reflector_stats {
    unsigned lists;          /**< list requests (pages) sent */
    unsigned relists;        /**< complete lists after the first one */
    unsigned watches;        /**< watch requests sent */
    unsigned gone;           /**< 410s seen (HTTP or ERROR event) */
    unsigned errors;         /**< failures that led to a backoff */
    unsigned bookmarks;
    unsigned events;         /**< ADDED/MODIFIED/DELETED delivered */
    int64_t last_delay_ms;   /**< last backoff or Retry-After wait */
};

/**
 * Start list+watch of collection path (e.g. "/api/v1/pods" or
 * "/apis/apps/v1/namespaces/x/deployments"). label_selector (query syntax) may
 * be NULL. The sink is called from the loop. The reflector runs until closed:
 * errors are logged and retried with backoff, never reported. o may be NULL.
 */
int kube_reflector_new(struct kube *k, const char *path, const char *label_selector,
                       const struct kube_watch_opts *o, const struct kube_sink *sink,
                       void *sink_arg, struct kube_reflector **out);
/** Stop and free; cb runs from the loop when done. No sink call after this. */
void kube_reflector_close(struct kube_reflector *r, kube_close_cb cb, void *arg);
/** True once the first complete list was delivered. */
bool kube_reflector_synced(const struct kube_reflector *r);
/** Last resourceVersion seen (list, event or bookmark), "" before the first list. */
const char *kube_reflector_rv(const struct kube_reflector *r);
const struct kube_reflector_stats *kube_reflector_stats(const struct kube_reflector *r);
/** How long the view has been out of date: the time since the first list or
 *  watch failure (an error, a 429 or Retry-After wait) that no completed list,
 *  watch event or bookmark, or watch run to its timeout has followed; 0 while
 *  current, at least 1 once down. A 410's relist is not a failure. */
int64_t kube_reflector_down_ms(const struct kube_reflector *r);

/* ======================================================================= */
/* Deployment and Pod caches                                               */
/* ======================================================================= */

#define KUBE_ANNOTATION_PREFIX "gpuscaler.io/"
#define KUBE_ANNOTATION_ENABLED "gpuscaler.io/enabled"

/**
 * A tracked Deployment (annotated gpuscaler.io/enabled=true). Deployments that
 * are not tracked are not stored at all: their next event carries the whole
 * object, so one that becomes tracked is picked up then. Strings are owned by
 * the cache; pointers are valid until the next loop iteration that delivers
 * a watch event, so copy what must survive a tick.
 */
/** The cache's counts (replicas, GPUs) are clamped to 0..KUBE_MAX_COUNT, which
 *  keeps the sums and products of the policy in range: a count read from the
 *  API elsewhere is compared after the same clamp. */
#define KUBE_MAX_COUNT 1000000

struct kube_deployment {
    const char *ns;
    const char *name;
    const char *uid;
    const char *resource_version;
    int64_t generation;
    int64_t observed_generation;
    int64_t created_ms;           /**< creationTimestamp, ms since the epoch */
    bool deleting;                /**< deletionTimestamp set */
    int32_t spec_replicas;        /**< spec.replicas (1 when absent, the API default),
                                       clamped to KUBE_MAX_COUNT */
    /** How many times the cache saw spec.replicas change (events and relists), from
     *  0 when it first stored the Deployment: a scale by hand to 4 and back to 0
     *  between two ticks shows here, where metadata.generation also moves with
     *  every change of the annotations (a Deployment's are copied to its
     *  ReplicaSets), gpuscaler's own status among them */
    uint64_t replicas_changes;
    int32_t status_replicas;
    int32_t ready_replicas;
    int32_t available_replicas;
    int32_t updated_replicas;
    /** Every metadata label (the cache stores tracked Deployments only; an
     *  untracked one out of the extractor has only gpuscaler.io/ labels and
     *  scaledobject.keda.sh/name). */
    struct kube_labels labels;
    /** Annotations with the gpuscaler.io/ prefix only. */
    struct kube_labels annotations;
    struct kube_selector selector; /**< spec.selector; nothing-selector when invalid */
    int32_t metrics_port;         /**< template container port named "metrics", else 0 */
    int32_t http_port;            /**< template container port named "http", else 0 */
    int32_t sole_port;            /**< the template's only container port, named or not, else 0 */
    int32_t gpus_per_replica;     /**< sum of nvidia.com/gpu and amd.com/gpu limits */
};

enum kube_pod_phase {
    KUBE_POD_UNKNOWN,
    KUBE_POD_PENDING,
    KUBE_POD_RUNNING,
    KUBE_POD_SUCCEEDED,
    KUBE_POD_FAILED,
};

/** The GPU resource a scheduler message names. */
enum kube_gpu_resource {
    KUBE_GPU_NONE,
    KUBE_GPU_NVIDIA, /**< nvidia.com/gpu */
    KUBE_GPU_AMD,    /**< amd.com/gpu */
};

/** "nvidia.com/gpu", "amd.com/gpu", or "GPU" for KUBE_GPU_NONE. */
const char *kube_gpu_resource_name(enum kube_gpu_resource r);

/**
 * Why a container of a pod cannot start: the kubelet's reason for a container
 * (or init container) that waits, where the wait lasts until someone fixes
 * something (a crash loop, an image that will not pull, a missing Secret).
 * ErrImagePull and CreateContainerError are not among them: the kubelet
 * reports them on the first failed attempt, which the next one may pass.
 */
enum kube_pod_failing {
    KUBE_FAILING_NONE,
    KUBE_FAILING_CRASH_LOOP,     /**< CrashLoopBackOff */
    KUBE_FAILING_IMAGE_PULL,     /**< ImagePullBackOff */
    KUBE_FAILING_INVALID_IMAGE,  /**< InvalidImageName */
    KUBE_FAILING_NEVER_PULL,     /**< ErrImageNeverPull */
    KUBE_FAILING_CONFIG,         /**< CreateContainerConfigError */
};

/** The kubelet's reason ("CrashLoopBackOff", ...), "" for KUBE_FAILING_NONE. */
const char *kube_pod_failing_name(enum kube_pod_failing f);

/**
 * A Pod, compact. All pods in the watched namespaces are kept (labels are
 * interned, so 10,000 pods cost a few MB); that way a Deployment that becomes
 * tracked later finds its pods at once, without a relist.
 */
struct kube_pod {
    const char *ns;
    const char *name;
    struct kube_labels labels;    /**< all labels; strings interned */
    char ip[46];                  /**< status.podIP, "" when none */
    enum kube_pod_phase phase;
    bool ready;                   /**< condition Ready is True */
    int64_t ready_transition_ms;  /**< that condition's lastTransitionTime, 0 if none */
    int64_t scheduled_ms;         /**< condition PodScheduled True: its lastTransitionTime
                                       (when the pod was bound to a node), 0 if none */
    int64_t created_ms;
    bool deleting;                /**< deletionTimestamp set */
    /** enum kube_gpu_resource: PodScheduled False with reason Unschedulable
     *  and a message naming that GPU resource: no node has the GPUs it asks
     *  for (the scheduler's "0/3 nodes are available: 3 Insufficient
     *  nvidia.com/gpu."); KUBE_GPU_NONE otherwise */
    uint8_t unschedulable_gpu;
    /** enum kube_pod_failing: the first container (init containers first)
     *  whose state.waiting.reason says it cannot start, else KUBE_FAILING_NONE */
    uint8_t failing;
    int32_t gpus;                 /**< sum of nvidia.com/gpu and amd.com/gpu limits */
    int32_t metrics_port;         /**< container port named "metrics", else "http", else the
                                       pod's only container port, else 0 */
    /** The named container ports: name -> port number in decimal (strings
     *  interned), for gpuscaler.io/metrics-port naming one. */
    struct kube_labels ports;
    /** Its controller ownerReference as "Kind/name" (interned), NULL when it
     *  has none: a Deployment's pods are those of its ReplicaSets, named
     *  "<deployment>-<pod-template-hash>" (kube_pod_of_deployment). */
    const char *controller;
};

/**
 * Whether a pod that the Deployment `name`'s selector matches is one of its
 * own: controlled by a ReplicaSet "<name>-<hash>", the hash its
 * pod-template-hash label when it has one (a hash has no '-'), or by
 * nothing (counted by the selector, as before ownership was checked: a pod
 * made by hand with the labels). Overlapping selectors (a canary
 * "llama-canary" beside "llama", whose selector also matches the canary's
 * pods) then split the pods as the ReplicaSets own them, not as the
 * selector reads (an HPA on "llama" counts the canary's pods too). The
 * store counts by the selector alone when a Deployment with replicas has
 * none of its own by name: ReplicaSets it adopted from another
 * (kube_store_deployment_pods).
 */
bool kube_pod_of_deployment(const struct kube_pod *p, const char *name);

struct kube_cache;

struct kube_cache_opts {
    /** Namespaces to watch, NULL-terminated; NULL or empty = all namespaces
     *  (one reflector per kind then, else one per kind and namespace). */
    const char *const *namespaces;
    /** Optional server-side label selector for the pod watch (query syntax). */
    const char *pod_label_selector;
    struct kube_watch_opts watch;
};

/**
 * Called (from the loop, coalesced: at most once per loop iteration) after
 * the cache changed. Read the cache or note the change; it may also close the
 * cache.
 */
typedef void (*kube_cache_changed_cb)(struct kube_cache *c, void *arg);

/** Create the caches and start their reflectors. o may be NULL, cb may be NULL. */
int kube_cache_new(struct kube *k, const struct kube_cache_opts *o, kube_cache_changed_cb cb,
                   void *arg, struct kube_cache **out);
/** Stop the reflectors; cb runs from the loop once everything is freed. */
void kube_cache_close(struct kube_cache *c, kube_close_cb cb, void *arg);
/** True when every reflector finished its first list. Do not act before. */
bool kube_cache_synced(const struct kube_cache *c);
/** The longest kube_reflector_down_ms() of the cache's list+watches: how long
 *  its view may have missed changes (0 = current); *what (may be NULL) gets the
 *  collection path of that one, or "". */
int64_t kube_cache_down_ms(const struct kube_cache *c, const char **what);
/** kube_cache_synced() and kube_cache_down_ms() over the list+watches that
 *  cover namespace ns only (its own, or all namespaces'): one namespace whose
 *  lists fail (a RoleBinding missing there) need not stop the others. */
bool kube_cache_ns_synced(const struct kube_cache *c, const char *ns);
int64_t kube_cache_ns_down_ms(const struct kube_cache *c, const char *ns, const char **what);
/** True when every list+watch finished its first list or, of one namespace
 *  (with namespaces set), has failed for at least down_ms
 *  (kube_reflector_down_ms), and some namespace was listed whole: the cache
 *  knows all it will for now. */
bool kube_cache_settled(const struct kube_cache *c, int64_t down_ms);

/** The tracked Deployments (order unspecified); *n gets the count. */
const struct kube_deployment *const *kube_cache_deployments(const struct kube_cache *c, size_t *n);
const struct kube_deployment *kube_cache_deployment(const struct kube_cache *c, const char *ns,
                                                    const char *name);
/**
 * The pods matched by d's selector in d's namespace (order unspecified). The
 * index is kept per Deployment and recomputed only after a pod or the
 * Deployment changed. d must come from this cache.
 */
const struct kube_pod *const *kube_cache_deployment_pods(struct kube_cache *c,
                                                         const struct kube_deployment *d,
                                                         size_t *n);
const struct kube_pod *kube_cache_pod(const struct kube_cache *c, const char *ns,
                                      const char *name);
size_t kube_cache_npods(const struct kube_cache *c);

/**
 * Append the caches' own metrics in the Prometheus text format:
 * gpuscaler_kube_cache_synced, gpuscaler_kube_cache_objects{kind},
 * gpuscaler_kube_list_requests_total{kind}, gpuscaler_kube_relists_total{kind},
 * gpuscaler_kube_watch_requests_total{kind}, gpuscaler_kube_watch_gone_total{kind},
 * gpuscaler_kube_watch_errors_total{kind}, gpuscaler_kube_watch_events_total{kind},
 * gpuscaler_kube_watch_bookmarks_total{kind} (kind="deployment"|"pod", summed
 * over namespaces).
 */
void kube_cache_write_metrics(const struct kube_cache *c, struct util_buf *out);

/**
 * Heap bytes the cache's objects hold: the stored Deployments and Pods, their
 * strings and labels, the hash tables and indexes (allocator overhead and
 * the reflectors' buffers in flight excluded). O(objects).
 */
size_t kube_cache_memory(const struct kube_cache *c);

/** A credential an exec plugin gave. Owned; kube_exec_cred_clear() wipes it. */
struct kube_exec_cred {
    char *token;                /**< bearer token, or NULL */
    char *cert, *key;           /**< client certificate and key PEM (both or neither), or NULL */
    size_t cert_len, key_len;
    int64_t expires_ms;         /**< unix ms; 0 = does not expire */
    uint64_t gen;               /**< 1 for a plugin's first credential, then +1 each */
};

/**
 * Parse an exec plugin's standard output (an ExecCredential of api_version):
 * apiVersion and kind checked, a status with a token or a client
 * certificate and key (PEM), an optional RFC 3339 expirationTimestamp. A
 * token with control characters, spaces or over 64 KiB is refused (it goes
 * into a header). Pure. Returns 0, or -EBADMSG with err set (out cleared).
 */
int kube_exec_cred_parse(const char *buf, size_t len, const char *api_version,
                         struct kube_exec_cred *out, char *err, size_t errlen);

/** Wipe and free a credential's fields. */
void kube_exec_cred_clear(struct kube_exec_cred *c);

/** Parse an RFC 3339 timestamp ("2024-05-01T10:00:00Z", fractions and offsets allowed) to ms. */
int kube_parse_time(const char *s, int64_t *out_ms);

#endif

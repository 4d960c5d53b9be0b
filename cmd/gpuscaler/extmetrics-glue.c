/* SPDX-License-Identifier: Apache-2.0 */
/* Wiring of the external metrics API (see extmetrics-glue.h). The adapters
 * here are thin: each translates one interface into another and owns no
 * policy; the review documents themselves are pkg/extmetrics'. */
#include "extmetrics-glue.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "controller/controller.h"
#include "extmetrics/extmetrics.h"
#include "kube/kube.h"
#include "util/util.h"

#define SUB "extmetrics"
#define RH_REFRESH_MS (60 * 1000)
/* after a failed read: 1 s, doubling to the refresh interval (until then
 * the aggregator's requests get 401, the APIService turns unavailable) */
#define RH_RETRY_MS 1000

struct extmetrics_glue {
    uv_loop_t *loop;
    struct kube *kube;
    struct kube_cache *cache; /* the Deployments' labels (metricLabels) */
    struct controller *ctl;
    struct extmetrics *em;
    uv_timer_t rh_timer;
    int rh_failures;          /* reads failed in a row */
    bool rh_read;             /* the trust settings were read once */
    bool closing;
    bool timer_closed;
    int pending;
    char *shared_ca_warned;   /* the trust last warned about (warn_shared_ca), or NULL */
    char host[256];
};

/* The glue is freed once closed and no API request of its own is in flight. */
static void glue_done_one(struct extmetrics_glue *g)
{
    g->pending--;
    if (g->closing && g->timer_closed && g->pending == 0) {
        xfree(g->shared_ca_warned);
        xfree(g);
    }
}

/* ---- provider: the controller's views ---------------------------------- */

struct visit_ctx {
    struct kube_cache *cache;
    extmetrics_visit_cb visit;
    void *arg;
};

/* @rate: the value is a rate over the view's window (docs/external-metrics.md:
 * `window` is set for rates only, not for replica counts or utilization). */
static void sample(struct extmetrics_sample *s, const struct ctl_workload_view *v, double x,
                   bool rate)
{
    s->present = isfinite(x);
    s->value = x;
    s->timestamp_ms = v->time_ms;
    s->window_s = rate ? v->window_s : 0;
    s->stale = !v->valid;
}

static void view_cb(const struct ctl_workload_view *v, void *arg)
{
    struct visit_ctx *vc = arg;
    struct extmetrics_deployment d;
    memset(&d, 0, sizeof(d));
    d.name = v->name;
    sample(&d.samples[EXTMETRICS_DESIRED_REPLICAS], v, (double)v->desired, false);
    sample(&d.samples[EXTMETRICS_REQUESTS_PER_GPU], v, v->requests_per_gpu, true);
    sample(&d.samples[EXTMETRICS_FORECAST_REQUESTS_PER_GPU], v, v->forecast_requests_per_gpu,
           true);
    sample(&d.samples[EXTMETRICS_UTILIZATION], v, v->utilization, false);
    /* the Deployment's own labels, so HPA selectors can match on them (the
     * API adds deployment=<name>, which a label of that key never shadows) */
    const struct kube_deployment *kd = kube_cache_deployment(vc->cache, v->ns, v->name);
    struct extmetrics_label *labels = NULL;
    if (kd && kd->labels.n) {
        labels = xcalloc(kd->labels.n, sizeof(*labels));
        for (size_t i = 0; i < kd->labels.n; i++)
            labels[i] = (struct extmetrics_label){kd->labels.items[i].key,
                                                  kd->labels.items[i].value};
        d.labels = labels;
        d.nlabels = kd->labels.n;
    }
    vc->visit(&d, vc->arg);
    xfree(labels);
}

static int provider_list(void *impl, const char *ns, extmetrics_visit_cb visit, void *visit_arg)
{
    struct extmetrics_glue *g = impl;
    struct visit_ctx vc = {g->cache, visit, visit_arg};
    return controller_visit(g->ctl, ns, view_cb, &vc) ? 0 : -ENOENT;
}

/* The listener's /readyz: values once the caches are synced (as the health
 * port's /readyz reads them), and the aggregator's requests authenticated
 * once the front-proxy trust was read. */
static bool provider_ready(void *impl, char *why, size_t len)
{
    struct extmetrics_glue *g = impl;
    if (!controller_ready(g->ctl)) {
        snprintf(why, len, "caches syncing");
        return false;
    }
    if (!g->rh_read) {
        snprintf(why, len, "no front-proxy trust yet");
        return false;
    }
    return true;
}

static const struct extmetrics_provider_ops provider_ops = {.list = provider_list,
                                                            .ready = provider_ready};

/* ---- authorizer: TokenReview and SubjectAccessReview ------------------------ */

struct review {
    struct extmetrics_glue *g;
    extmetrics_authn_cb authn;
    extmetrics_authz_cb authz;
    void *arg;
};

static void token_reviewed(const struct kube_result *res, void *arg)
{
    struct review *r = arg;
    struct extmetrics_review_user ru;
    int rc = res->err == 0 ? extmetrics_tokenreview_user(res->body, &ru) : -EIO;
    if (res->err != 0)
        LOG_WARN(SUB, "TokenReview failed: HTTP %ld %s", res->status, res->message);
    else if (rc == -EBADMSG)
        LOG_WARN(SUB, "TokenReview answer without a usable status (malformed, or authenticated "
                      "without a username): token refused, not cached");
    /* the whole identity, extra included, goes on to the access review; only
     * -EACCES (status.authenticated false) is a denial the API caches, a
     * malformed answer (-EBADMSG) is a failed review like -EIO */
    r->authn(rc, rc == 0 ? &ru.user : NULL, r->arg);
    if (rc == 0)
        extmetrics_review_user_free(&ru);
    struct extmetrics_glue *g = r->g;
    xfree(r);
    glue_done_one(g);
}

static int authenticate_token(void *impl, const char *token, extmetrics_authn_cb cb, void *arg)
{
    struct extmetrics_glue *g = impl;
    json_t *rev = extmetrics_tokenreview_new(token);
    if (!rev)
        return -EINVAL;
    struct review *r = xcalloc(1, sizeof(*r));
    r->g = g;
    r->authn = cb;
    r->arg = arg;
    int rc = kube_tokenreview_create(g->kube, rev, token_reviewed, r);
    json_decref(rev);
    if (rc != 0) {
        xfree(r);
        return rc;
    }
    g->pending++;
    return 0;
}

static void access_reviewed(const struct kube_result *res, void *arg)
{
    struct review *r = arg;
    json_t *st = json_object_get(res->body, "status");
    if (res->err != 0) {
        LOG_WARN(SUB, "SubjectAccessReview failed: HTTP %ld %s", res->status, res->message);
        r->authz(-EIO, false, NULL, r->arg);
    } else {
        r->authz(0, json_is_true(json_object_get(st, "allowed")),
                 json_string_value(json_object_get(st, "reason")), r->arg);
    }
    struct extmetrics_glue *g = r->g;
    xfree(r);
    glue_done_one(g);
}

static int authorize(void *impl, const struct extmetrics_user *user,
                     const struct extmetrics_attrs *a, extmetrics_authz_cb cb, void *arg)
{
    struct extmetrics_glue *g = impl;
    json_t *rev = extmetrics_sar_new(user, a); /* user, uid, groups and extra */
    struct review *r = xcalloc(1, sizeof(*r));
    r->g = g;
    r->authz = cb;
    r->arg = arg;
    int rc = kube_subjectaccessreview_create(g->kube, rev, access_reviewed, r);
    json_decref(rev);
    if (rc != 0) {
        xfree(r);
        return rc;
    }
    g->pending++;
    return 0;
}

static const struct extmetrics_authorizer_ops authorizer_ops = {
    .authenticate_token = authenticate_token,
    .authorize = authorize,
};

/* ---- front-proxy trust ---------------------------------------------------- */

/* A key holding a JSON array of strings (requestheader-allowed-names and
 * the header lists), read as the apiserver reads it: absent, "" or null is
 * an empty list, anything else but an array of strings an error. Returns 0
 * with *out (xmalloc'd, *n pointers into *hold; the caller frees both), or
 * -EINVAL (nothing to free). No cap on the number of entries: the list is
 * bounded by the ConfigMap, whose size the API client caps. */
static int json_list(const char *s, const char ***out, size_t *n, char **hold)
{
    *out = NULL;
    *n = 0;
    *hold = NULL;
    if (!s || !*s)
        return 0;
    json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
    size_t i, cnt = 0;
    json_t *it;
    struct util_buf b = {0};
    size_t *offs = NULL;
    int rc = -EINVAL;
    if (json_is_null(j)) {
        rc = 0;
        goto out;
    }
    if (!json_is_array(j))
        goto out;
    offs = xcalloc(json_array_size(j) + 1, sizeof(*offs));
    json_array_foreach(j, i, it) {
        if (!json_is_string(it))
            goto out;
        offs[cnt++] = b.len;
        util_buf_append(&b, json_string_value(it), json_string_length(it) + 1);
    }
    *out = xcalloc(cnt + 1, sizeof(**out));
    for (size_t k = 0; k < cnt; k++)
        (*out)[k] = b.data + offs[k];
    *n = cnt;
    *hold = util_buf_steal(&b);
    rc = 0;
out:
    util_buf_free(&b);
    xfree(offs);
    json_decref(j);
    return rc;
}

/* The front proxy is any holder of a client-ca-file certificate when the two
 * bundles share a certificate and no allowed names restrict the proxy's CN:
 * warned at the first read and whenever the trust changes, not at every
 * refresh. */
static void warn_shared_ca(struct extmetrics_glue *g, const char *ca, const char *cca,
                           const char *names)
{
    char *key = NULL;
    if (extmetrics_client_ca_can_proxy(g->em)) {
        struct util_buf b = {0};
        util_buf_printf(&b, "%s\n--\n%s\n--\n%s", ca ? ca : "", cca ? cca : "",
                        names ? names : "");
        key = util_buf_steal(&b);
        if (!g->shared_ca_warned || strcmp(g->shared_ca_warned, key) != 0)
            LOG_WARN(SUB, "requestheader-client-ca-file and client-ca-file of "
                          "kube-system/extension-apiserver-authentication share a certificate "
                          "and requestheader-allowed-names is empty: any client certificate of "
                          "client-ca-file is trusted as a front proxy and can assert any user "
                          "(set requestheader-allowed-names, e.g. front-proxy-client, or use a "
                          "separate front-proxy CA)");
    }
    xfree(g->shared_ca_warned);
    g->shared_ca_warned = key;
}

static void rh_refresh(uv_timer_t *t);

/* The next read after a failure: sooner than the refresh, backing off;
 * returns its delay. */
static int64_t rh_retry(struct extmetrics_glue *g)
{
    int64_t ms = RH_RETRY_MS;
    for (int i = 0; i < g->rh_failures && ms < RH_REFRESH_MS; i++)
        ms *= 2;
    ms = UTIL_MIN(ms, RH_REFRESH_MS);
    g->rh_failures++;
    uv_timer_start(&g->rh_timer, rh_refresh, (uint64_t)ms, RH_REFRESH_MS);
    return ms;
}

static void rh_loaded(const struct kube_result *res, void *arg)
{
    struct extmetrics_glue *g = arg;
    if (g->closing) {
        glue_done_one(g);
        return;
    }
    if (res->err != 0 && res->status == 404) {
        /* no such ConfigMap: the cluster has no front proxy (as the
         * apiserver's delegated authentication reads it), so none is trusted */
        g->rh_failures = 0;
        if (!g->rh_read)
            LOG_WARN(SUB, "kube-system/extension-apiserver-authentication does not exist: no "
                          "front proxy is trusted, so the aggregator cannot reach this API");
        g->rh_read = true;
        extmetrics_set_requestheader(g->em, NULL);
        warn_shared_ca(g, NULL, NULL, NULL);
        glue_done_one(g);
        return;
    }
    if (res->err != 0) {
        int64_t ms = rh_retry(g);
        LOG_WARN(SUB, "reading kube-system/extension-apiserver-authentication failed: HTTP %ld %s"
                      " (front-proxy requests are not trusted until it can be read%s; read again "
                      "in %llds)", res->status, res->message,
                 g->rh_read ? "" : ", and the pod is not Ready",
                 (long long)(ms / 1000));
        if (res->status == 403)
            LOG_WARN(SUB, "RBAC: gpuscaler's ServiceAccount needs the Role "
                          "extension-apiserver-authentication-reader in kube-system (a "
                          "RoleBinding to it, as deploy/rbac.yaml and the chart make)");
        glue_done_one(g);
        return;
    }
    g->rh_failures = 0;
    json_t *data = json_object_get(res->body, "data");
    /* client-ca-file: client certificates that are identities (CN user, O
     * groups), as the kube-apiserver's own delegated authentication trusts */
    const char *cca = json_string_value(json_object_get(data, "client-ca-file"));
    if (extmetrics_set_client_ca(g->em, cca, cca ? strlen(cca) : 0) != 0)
        LOG_WARN(SUB, "client-ca-file holds no certificate; keeping the previous client CA");
    const char *ca = json_string_value(json_object_get(data, "requestheader-client-ca-file"));
    if (!ca) {
        extmetrics_set_requestheader(g->em, NULL);
        warn_shared_ca(g, NULL, NULL, NULL); /* no proxy: nothing shared */
        g->rh_read = true; /* read: no front proxy to trust */
        glue_done_one(g);
        return;
    }
    static const char *const keys[] = {
        "requestheader-allowed-names", "requestheader-username-headers",
        "requestheader-uid-headers", "requestheader-group-headers",
        "requestheader-extra-headers-prefix"};
    const char **lists[5] = {NULL};
    size_t nlists[5] = {0};
    char *holds[5] = {NULL};
    const char *bad = NULL;
    for (size_t i = 0; i < 5 && !bad; i++)
        if (json_list(json_string_value(json_object_get(data, keys[i])), &lists[i], &nlists[i],
                      &holds[i]) != 0)
            bad = keys[i];
    struct extmetrics_requestheader rh = {
        .client_ca_pem = ca,
        .client_ca_len = strlen(ca),
        .allowed_names = lists[0],
        .nallowed_names = nlists[0],
        .username_headers = lists[1],
        .nusername_headers = nlists[1],
        .uid_headers = lists[2],
        .nuid_headers = nlists[2],
        .group_headers = lists[3],
        .ngroup_headers = nlists[3],
        .extra_prefixes = lists[4],
        .nextra_prefixes = nlists[4],
    };
    /* Ready once a trust is in place: a CA without a certificate (or a
     * malformed list) keeps the previous one, and before any the aggregator
     * would get 401 */
    if (bad) {
        LOG_WARN(SUB, "%s is not a JSON list of strings; keeping the previous front-proxy "
                      "trust%s", bad, g->rh_read ? "" : " (none yet: the pod is not Ready)");
    } else if (extmetrics_set_requestheader(g->em, &rh) != 0) {
        LOG_WARN(SUB, "requestheader-client-ca-file holds no certificate; keeping the previous "
                      "trust%s", g->rh_read ? "" : " (none yet: the pod is not Ready)");
    } else {
        g->rh_read = true;
        warn_shared_ca(g, ca, cca,
                       json_string_value(json_object_get(data, "requestheader-allowed-names")));
    }
    for (size_t i = 0; i < 5; i++) {
        xfree(lists[i]);
        xfree(holds[i]);
    }
    glue_done_one(g);
}

static void rh_refresh(uv_timer_t *t)
{
    struct extmetrics_glue *g = t->data;
    if (g->closing)
        return;
    if (kube_configmap_get(g->kube, "kube-system", "extension-apiserver-authentication", rh_loaded,
                           g) == 0)
        g->pending++;
    else
        rh_retry(g);
}

/* "" in the config file means "not set" */
static const char *nz(const char *s)
{
    return s && *s ? s : NULL;
}

/* ---- lifecycle --------------------------------------------------------------- */

int extmetrics_glue_new(uv_loop_t *loop, struct kube *k, struct kube_cache *cache,
                        struct controller *ctl, const struct ctl_config *cfg,
                        struct extmetrics_glue **out)
{
    struct extmetrics_glue *g = xcalloc(1, sizeof(*g));
    g->loop = loop;
    g->kube = k;
    g->cache = cache;
    g->ctl = ctl;
    struct extmetrics_config ec;
    memset(&ec, 0, sizeof(ec));
    const char *addr = cfg->listen.external_metrics;
    int port = -1;
    if (ctl_listen_addr_split(addr, g->host, sizeof(g->host), &port) != 0) {
        LOG_ERROR(SUB, "listen.external-metrics '%s' is not HOST:PORT", addr);
        xfree(g);
        return -EINVAL;
    }
    ec.listen.host = g->host;
    ec.listen.port = port;
    ec.listen.tls = true;
    ec.listen.cert_file = nz(cfg->extmetrics.tls_cert_file);
    ec.listen.key_file = nz(cfg->extmetrics.tls_key_file);
    ec.listen.name = "extmetrics";
    ec.max_age_ms = 3 * cfg->decision_interval_ms + 5000;
    ec.upstream_url = nz(cfg->extmetrics.upstream_url);
    ec.upstream_ca_file = nz(cfg->extmetrics.upstream_ca_file);
    ec.upstream_cert_file = nz(cfg->extmetrics.upstream_cert_file);
    ec.upstream_key_file = nz(cfg->extmetrics.upstream_key_file);
    ec.upstream_token_file = nz(cfg->extmetrics.upstream_token_file);
    struct extmetrics_provider prov = {&provider_ops, g};
    struct extmetrics_authorizer auth = {&authorizer_ops, g};
    int rc = extmetrics_new(loop, &ec, &prov, &auth, &g->em);
    if (rc != 0) {
        LOG_ERROR(SUB, "cannot serve the external metrics API on %s: %s", addr, strerror(-rc));
        xfree(g);
        return rc;
    }
    LOG_INFO(SUB, "serving external.metrics.k8s.io/v1beta1 on %s:%d", g->host,
             extmetrics_port(g->em));
    uv_timer_init(loop, &g->rh_timer);
    g->rh_timer.data = g;
    uv_timer_start(&g->rh_timer, rh_refresh, 0, RH_REFRESH_MS);
    *out = g;
    return 0;
}

static void glue_free(uv_handle_t *h)
{
    struct extmetrics_glue *g = h->data;
    g->timer_closed = true;
    g->pending++;
    glue_done_one(g);
}

static void em_closed(void *arg)
{
    struct extmetrics_glue *g = arg;
    uv_close((uv_handle_t *)&g->rh_timer, glue_free);
}

void extmetrics_glue_close(struct extmetrics_glue *g)
{
    g->closing = true;
    uv_timer_stop(&g->rh_timer);
    extmetrics_close(g->em, em_closed, g);
}

bool extmetrics_glue_ready(const struct extmetrics_glue *g)
{
    return g->rh_read;
}

const struct httpd *extmetrics_glue_httpd(struct extmetrics_glue *g)
{
    return extmetrics_httpd(g->em);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/server: routing and the per-request pipeline of the external
 * metrics API: route -> authenticate -> authorize -> serve (from the
 * provider, from memory for discovery, or forwarded upstream).
 *
 * Each request that needs the authorizer or the upstream becomes a struct
 * call; it lives until the last callback it waits for has run, so that the
 * authorizer and httpc can call back even after the server started closing
 * (the call then just answers 503 / frees itself). */
#include "extmetrics-int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum route { R_HEALTH, R_APIS, R_GROUP, R_RESOURCES, R_METRIC, R_OPENAPI, R_OTHER };

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
    struct call *calls;
    bool closing;
    int closing_parts;
    extmetrics_close_cb close_cb;
    void *close_arg;
    char *upstream_url;
};

struct call {
    struct extmetrics *em;         /* NULL once the server closed */
    struct httpd_request *req;     /* NULL once answered */
    struct call *prev, *next;
    enum route route;
    char *ns, *metric;             /* decoded, for R_METRIC */
    int metric_id;                 /* ours, or -1 */
    struct em_user user;
    struct httpc_req *fwd;
    int waiting;                   /* callbacks still to come */
};

static const struct httpd_header json_hdr[] = {{"Content-Type", "application/json"}};

/* ---- answering ----------------------------------------------------------- */

static void answer_json(struct httpd_request *req, int code, json_t *doc)
{
    size_t len;
    char *body = em_json_dump(doc, &len);
    httpd_respond(req, code, json_hdr, 1, body, len);
    xfree(body);
}

static void answer_status(struct httpd_request *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void answer_status(struct httpd_request *req, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    answer_json(req, code, em_status(code, em_reason(code), msg));
}

static void call_answer_status(struct call *c, int code, const char *msg)
{
    if (!c->req)
        return;
    answer_status(c->req, code, "%s", msg);
    c->req = NULL;
}

static void call_unlink(struct call *c)
{
    if (!c->em)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->em->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void call_free(struct call *c)
{
    call_unlink(c);
    if (c->req) /* never leave a request unanswered */
        answer_status(c->req, 503, "the server is shutting down");
    em_user_free(&c->user);
    xfree(c->ns);
    xfree(c->metric);
    xfree(c);
}

/* ---- routing ---------------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode @n bytes (and '+' as space when @form). NULL if malformed
 * or if it would contain a NUL (or a '/' when @segment). */
static char *unescape(const char *s, size_t n, bool form, bool segment)
{
    struct util_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                goto bad;
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && form) {
            c = ' ';
        }
        if (c == '\0' || (segment && c == '/'))
            goto bad;
        util_buf_append(&b, &c, 1);
    }
    if (!b.data)
        util_buf_puts(&b, "");
    return util_buf_steal(&b);
bad:
    util_buf_free(&b);
    return NULL;
}

/* Value of query parameter @key (first occurrence), decoded; "" if absent;
 * NULL if malformed. */
static char *query_param(const char *q, const char *key)
{
    size_t kl = strlen(key);
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        if (len > kl && strncmp(q, key, kl) == 0 && q[kl] == '=')
            return unescape(q + kl + 1, len - kl - 1, true, false);
        if (len == kl && strncmp(q, key, kl) == 0)
            return xstrdup("");
        q += len;
        if (*q == '&')
            q++;
    }
    return xstrdup("");
}

static bool path_is(const char *p, const char *want)
{
    size_t n = strlen(want);
    return strncmp(p, want, n) == 0 && (p[n] == '\0' || (p[n] == '/' && p[n + 1] == '\0'));
}

/* DNS-1123 label */
static bool valid_ns(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

/* A metric name as it may stand in a path and be forwarded: ASCII letters,
 * digits and "._:-" (KEDA's s0-prometheus-x, prometheus-adapter's names),
 * not "." or ".." (a client library would resolve those away, and the
 * upstream would answer for another path than the one authorized). */
static bool valid_metric(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == ':' || ch == '-'))
            return false;
    }
    return true;
}

#define PREFIX "/apis/" EXTMETRICS_GROUP "/" EXTMETRICS_VERSION

/* Returns the route; for R_METRIC fills ns/metric, or returns -400 on a
 * malformed namespace/metric segment. */
static int route_of(const char *path, char **ns, char **metric)
{
    if (path_is(path, "/healthz") || path_is(path, "/livez") || path_is(path, "/readyz") ||
        strncmp(path, "/healthz/", 9) == 0 || strncmp(path, "/livez/", 7) == 0 ||
        strncmp(path, "/readyz/", 8) == 0)
        return R_HEALTH;
    if (path_is(path, "/apis"))
        return R_APIS;
    if (path_is(path, "/apis/" EXTMETRICS_GROUP))
        return R_GROUP;
    if (path_is(path, PREFIX))
        return R_RESOURCES;
    if (strncmp(path, "/openapi/", 9) == 0 || path_is(path, "/openapi"))
        return R_OPENAPI;
    const char *p = PREFIX "/namespaces/";
    size_t pl = strlen(p);
    if (strncmp(path, p, pl) != 0)
        return R_OTHER;
    const char *a = path + pl;
    const char *slash = strchr(a, '/');
    if (!slash || slash == a || !slash[1] || strchr(slash + 1, '/'))
        return R_OTHER;
    *ns = unescape(a, (size_t)(slash - a), false, true);
    *metric = unescape(slash + 1, strlen(slash + 1), false, true);
    if (!*ns || !*metric || !valid_ns(*ns) || !valid_metric(*metric)) {
        xfree(*ns);
        xfree(*metric);
        *ns = *metric = NULL;
        return -400;
    }
    return R_METRIC;
}

/* ---- serving ------------------------------------------------------------------ */

struct collect {
    struct extmetrics *em;
    const struct extmetrics_selector *sel;
    int metric;
    int64_t now;
    size_t matched, stale;
    const char *stale_name;
    char *stale_name_copy;
    struct item { char *name; json_t *item; } *items;
    size_t nitems;
};

static void visit(const struct extmetrics_deployment *d, void *arg)
{
    struct collect *co = arg;
    if (!d->name)
        return;
    /* the label set: the Deployment's labels plus deployment=<name> */
    size_t n = 0;
    struct extmetrics_label *ls = xcalloc(d->nlabels + 1, sizeof(*ls));
    for (size_t i = 0; i < d->nlabels; i++)
        if (d->labels[i].key && d->labels[i].value && strcmp(d->labels[i].key, "deployment") != 0)
            ls[n++] = d->labels[i];
    ls[n].key = "deployment";
    ls[n].value = d->name;
    n++;
    if (!extmetrics_selector_matches(co->sel, ls, n))
        goto out;
    const struct extmetrics_sample *s = &d->samples[co->metric];
    /* a Deployment whose metrics are unavailable is stale whatever the value
     * (its rates are then not numbers): it answers for the whole selector,
     * not by leaving a partial sum; only a value that is not a number while
     * the metrics are fine (a forecast not made yet) leaves it out */
    if (!s->present && !s->stale)
        goto out;
    co->matched++;
    int64_t max_age = co->em->cfg.max_age_ms;
    bool old = max_age >= 0 && co->now - s->timestamp_ms > max_age;
    if (s->stale || old || !isfinite(s->value) || fabs(s->value) >= 9e15) {
        co->stale++;
        if (!co->stale_name_copy)
            co->stale_name_copy = xstrdup(d->name);
        goto out;
    }
    json_t *tmp = em_value_list();
    em_value_item(tmp, extmetrics_metric_name(co->metric), ls, n, s);
    json_t *item = json_incref(json_array_get(json_object_get(tmp, "items"), 0));
    json_decref(tmp);
    co->items = xrealloc(co->items, (co->nitems + 1) * sizeof(*co->items));
    co->items[co->nitems].name = xstrdup(d->name);
    co->items[co->nitems].item = item;
    co->nitems++;
out:
    xfree(ls);
}

static int item_cmp(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    return strcmp(x->name, y->name);
}

static void serve_metric(struct extmetrics *em, struct call *c)
{
    struct httpd_request *req = c->req;
    c->req = NULL;
    const char *metric = extmetrics_metric_name(c->metric_id);
    char *selstr = query_param(req->query, "labelSelector");
    struct extmetrics_selector *sel = NULL;
    struct extmetrics_parse_error perr;
    struct collect co = {.em = em, .metric = c->metric_id};
    if (!selstr) {
        answer_status(req, 400, "invalid query string: malformed percent-encoding");
        goto out;
    }
    if (extmetrics_selector_parse(selstr, &sel, &perr) < 0) {
        answer_status(req, 400, "unable to parse labelSelector \"%.200s\" at offset %zu: %s",
                      selstr, perr.offset, perr.message);
        goto out;
    }
    co.sel = sel;
    co.now = em->cfg.clock ? em->cfg.clock(em->cfg.clock_arg) : util_now_unix_ms();
    int rc = em->provider.ops->list(em->provider.impl, c->ns, visit, &co);
    if (rc == -ENOENT) {
        answer_status(req, 404, "no deployments tracked by gpuscaler in namespace \"%s\"", c->ns);
        goto out;
    }
    if (rc < 0) {
        LOGW_WARN(EM_LOG, c->ns, NULL, "provider failed for %s: %s", metric, strerror(-rc));
        answer_status(req, 503, "metric %s is unavailable in namespace \"%s\": %s", metric, c->ns,
                      strerror(-rc));
        goto out;
    }
    if (co.stale > 0) {
        /* All or nothing: the HPA sums the items, a partial sum would
         * under-count; a 404 makes it hold the current scale. */
        LOGW_INFO(EM_LOG, c->ns, co.stale_name_copy, "not serving stale %s", metric);
        answer_status(req, 404,
                      "metric %s for deployment \"%s\" in namespace \"%s\" is stale (no fresh "
                      "value within %lld s); not served",
                      metric, co.stale_name_copy, c->ns,
                      (long long)(em->cfg.max_age_ms >= 0 ? em->cfg.max_age_ms / 1000 : -1));
        goto out;
    }
    if (co.nitems == 0) {
        answer_status(req, 404,
                      "no deployment tracked by gpuscaler in namespace \"%s\" has metric %s "
                      "matching labelSelector \"%.200s\"",
                      c->ns, metric, selstr);
        goto out;
    }
    qsort(co.items, co.nitems, sizeof(*co.items), item_cmp);
    json_t *list = em_value_list();
    json_t *items = json_object_get(list, "items");
    for (size_t i = 0; i < co.nitems; i++) {
        json_array_append(items, co.items[i].item);
    }
    answer_json(req, 200, list);
out:
    for (size_t i = 0; i < co.nitems; i++) {
        xfree(co.items[i].name);
        json_decref(co.items[i].item);
    }
    xfree(co.items);
    xfree(co.stale_name_copy);
    extmetrics_selector_free(sel);
    xfree(selstr);
}

static void on_forwarded(struct httpc_req *hr, int err, const struct httpc_resp *resp, void *arg)
{
    struct call *c = arg;
    c->fwd = NULL;
    c->waiting--;
    if (c->req) {
        if (err == 0) {
            struct httpd_header h[] = {
                {"Content-Type", resp->content_type ? resp->content_type : "application/json"}};
            httpd_respond(c->req, (int)resp->status, h, 1, resp->body, resp->body_len);
            c->req = NULL;
        } else if (err == -ETIMEDOUT) {
            call_answer_status(c, 504, "the upstream metrics adapter did not answer in time");
        } else if (err == -ECANCELED) {
            call_answer_status(c, 503, "request cancelled");
        } else {
            char msg[300];
            snprintf(msg, sizeof(msg), "the upstream metrics adapter is unavailable: %s",
                     resp->errmsg && *resp->errmsg ? resp->errmsg : strerror(-err));
            LOG_WARN(EM_LOG, "forwarding %s failed: %s", c->metric ? c->metric : "?", msg);
            call_answer_status(c, 503, msg);
        }
    }
    call_free(c);
}

/* The client's connection is gone (httpd does not call this when the client
 * only stopped sending: a half-closed client still gets the answer). */
static void on_abort_forward(struct httpd_request *req, void *arg)
{
    struct call *c = arg;
    if (c->fwd)
        httpc_cancel(c->fwd);
}

/* Whether an Accept header admits plain application/json: absent, or a
 * media range of application/json without the g= or as= parameters of an
 * aggregated-discovery type, of any application subtype, or of any type. */
static bool accepts_plain_json(const char *accept)
{
    if (!accept || !*accept)
        return true;
    const char *s = accept;
    while (*s) {
        size_t n = strcspn(s, ",");
        char range[256];
        snprintf(range, sizeof(range), "%.*s", (int)UTIL_MIN(n, sizeof(range) - 1), s);
        char *type = range + strspn(range, " \t");
        char *params = strchr(type, ';');
        if (params)
            *params++ = '\0';
        type[strcspn(type, " \t")] = '\0';
        bool aggregated = false; /* a g= or as= parameter: a typed view of JSON */
        for (char *q = params; q && !aggregated;) {
            q += strspn(q, " \t");
            aggregated = strncmp(q, "g=", 2) == 0 || strncmp(q, "as=", 3) == 0;
            q = strchr(q, ';');
            if (q)
                q++;
        }
        if (strcasecmp(type, "*/*") == 0 || strcasecmp(type, "application/*") == 0 ||
            (strcasecmp(type, "application/json") == 0 && !aggregated))
            return true;
        s += n;
        if (*s == ',')
            s++;
    }
    return false;
}

/* Returns true if the call was handed on (it frees itself later). */
static bool serve(struct extmetrics *em, struct call *c)
{
    struct httpd_request *req = c->req;
    switch (c->route) {
    case R_GROUP:
        answer_json(req, 200, em_api_group());
        break;
    case R_RESOURCES:
        answer_json(req, 200, em_resource_list());
        break;
    case R_APIS:
        /* The aggregator answers /apis itself from the APIService objects and
         * asks ours only for aggregated discovery (Accept: application/json;
         * g=apidiscovery.k8s.io;...), which we do not serve: 406, as a Go
         * server's content negotiation answers, is what every aggregator
         * since 1.27 falls back to the per-version list on (1.27.0-1.27.5
         * and 1.28.0-1.28.1 on nothing else; a 503 is an error everywhere).
         * A plain client gets the APIGroupList a Go server lists. */
        if (accepts_plain_json(httpd_request_header(req, "Accept")))
            answer_json(req, 200, em_api_group_list());
        else
            answer_status(req, 406, "only the following media types are accepted: "
                                    "application/json");
        break;
    case R_OPENAPI:
        answer_status(req, 404, "this server publishes no OpenAPI document");
        break;
    case R_METRIC:
        if (c->metric_id >= 0) {
            serve_metric(em, c);
            c->req = NULL;
            return false;
        }
        if (em->up) {
            int rc = em_upstream_get(em->up, req->target, httpd_request_header(req, "Accept"),
                                     &c->user, on_forwarded, c, &c->fwd);
            if (rc == 0) {
                c->waiting++;
                httpd_request_on_abort(req, on_abort_forward, c);
                return true;
            }
            answer_status(req, 503, "cannot forward to the upstream metrics adapter: %s",
                          strerror(-rc));
            break;
        }
        answer_status(req, 404, "metric %s is not served by gpuscaler (namespace \"%s\")",
                      c->metric, c->ns);
        break;
    default:
        answer_status(req, 404, "the server could not find the requested resource");
        break;
    }
    c->req = NULL;
    return false;
}

/* ---- authorization ------------------------------------------------------------- */

static void authz_attrs(const struct call *c, struct extmetrics_attrs *a)
{
    memset(a, 0, sizeof(*a));
    if (c->route == R_METRIC) {
        a->resource_request = true;
        a->verb = "list"; /* the route is a LIST in apiserver terms */
        a->group = EXTMETRICS_GROUP;
        a->version = EXTMETRICS_VERSION;
        a->resource = c->metric;
        a->namespace_ = c->ns;
    } else {
        a->verb = "get";
        a->path = c->req->path;
    }
}

static void forbidden(struct call *c, const char *reason)
{
    char msg[512];
    if (c->route == R_METRIC)
        snprintf(msg, sizeof(msg),
                 "%s is forbidden: User \"%s\" cannot list resource \"%s\" in API group \"%s\" in "
                 "the namespace \"%s\"%s%s",
                 c->metric, c->user.name, c->metric, EXTMETRICS_GROUP, c->ns,
                 reason && *reason ? ": " : "", reason ? reason : "");
    else
        snprintf(msg, sizeof(msg), "forbidden: User \"%s\" cannot get path \"%s\"%s%s",
                 c->user.name, c->req->path, reason && *reason ? ": " : "", reason ? reason : "");
    call_answer_status(c, 403, msg);
}

static void finish(struct call *c)
{
    if (c->waiting == 0)
        call_free(c);
}

static void after_authz(struct call *c)
{
    if (!serve(c->em, c))
        finish(c);
}

static void on_authz(int status, bool allowed, const char *reason, void *arg)
{
    struct call *c = arg;
    c->waiting--;
    if (!c->em || !c->req) {
        finish(c);
        return;
    }
    struct extmetrics *em = c->em;
    if (status < 0) {
        LOG_WARN(EM_LOG, "authorization check failed for user %s: %s", c->user.name,
                 strerror(-status));
        call_answer_status(c, 500, "authorization check failed");
        finish(c);
        return;
    }
    struct extmetrics_attrs a;
    struct extmetrics_user u;
    struct extmetrics_label *lab = xcalloc(c->user.extra.n / 2 + 1, sizeof(*lab));
    authz_attrs(c, &a);
    em_user_view(&c->user, &u, lab);
    char *key = em_authz_key(&u, &a);
    uint64_t now = uv_now(em->loop);
    struct em_cache_entry *e = em_cache_put(&em->decisions, key, now + em->cfg.authz_ttl_ms, now);
    e->ok = allowed;
    e->reason = reason ? xstrdup(reason) : NULL;
    xfree(key);
    xfree(lab);
    if (allowed)
        after_authz(c);
    else {
        forbidden(c, reason);
        finish(c);
    }
}

static void authorize(struct call *c)
{
    struct extmetrics *em = c->em;
    em_user_add_authenticated(&c->user);
    for (size_t i = 0; i < c->user.groups.n; i++) {
        if (strcmp(c->user.groups.v[i], "system:masters") == 0) {
            after_authz(c);
            return;
        }
    }
    struct extmetrics_attrs a;
    struct extmetrics_user u;
    struct extmetrics_label *lab = xcalloc(c->user.extra.n / 2 + 1, sizeof(*lab));
    authz_attrs(c, &a);
    em_user_view(&c->user, &u, lab);
    char *key = em_authz_key(&u, &a);
    const struct em_cache_entry *e = em_cache_get(&em->decisions, key, uv_now(em->loop));
    xfree(key);
    if (e) {
        xfree(lab);
        if (e->ok)
            after_authz(c);
        else {
            forbidden(c, e->reason);
            finish(c);
        }
        return;
    }
    c->waiting++;
    int rc = em->authz.ops->authorize(em->authz.impl, &u, &a, on_authz, c);
    xfree(lab);
    if (rc < 0) {
        c->waiting--;
        LOG_WARN(EM_LOG, "cannot start authorization check: %s", strerror(-rc));
        call_answer_status(c, 500, "authorization check failed");
        finish(c);
    }
}

/* ---- authentication --------------------------------------------------------------- */

static void unauthorized(struct call *c)
{
    call_answer_status(c, 401, "Unauthorized");
}

/* The bearer token of an Authorization header, as the apiserver's bearer
 * authenticator reads it: the value trimmed, split at single spaces into at
 * most three parts, "Bearer" (any case) then the token, the rest ignored
 * ("Bearer tok junk" is tok). NULL when the header is no bearer token or
 * its token is empty ("Bearer  tok"); the caller frees the result. */
static char *bearer_token(const char *auth)
{
    if (!auth)
        return NULL;
    while (*auth && strchr(" \t\v\f\r\n", *auth)) /* Go's TrimSpace, in ASCII */
        auth++;
    size_t n = strlen(auth);
    while (n && strchr(" \t\v\f\r\n", auth[n - 1]))
        n--;
    if (n < 7 || strncasecmp(auth, "Bearer ", 7) != 0)
        return NULL;
    const char *tok = auth + 7, *end = memchr(tok, ' ', n - 7);
    size_t len = end ? (size_t)(end - tok) : n - 7;
    return len ? xstrndup(tok, len) : NULL;
}

static void on_authn(int status, const struct extmetrics_user *user, void *arg)
{
    struct call *c = arg;
    c->waiting--;
    if (!c->em || !c->req) {
        finish(c);
        return;
    }
    struct extmetrics *em = c->em;
    char *tok = bearer_token(httpd_request_header(c->req, "Authorization"));
    uint64_t now = uv_now(em->loop);
    if (status == 0 && user && user->name && *user->name) {
        em_user_set(&c->user, user);
        if (tok) {
            char *key = em_token_key(tok);
            struct em_cache_entry *e = em_cache_put(&em->tokens, key, now + em->cfg.authn_ttl_ms,
                                                    now);
            e->ok = true;
            em_user_set(&e->user, user);
            xfree(key);
        }
        xfree(tok);
        authorize(c);
        return;
    }
    if (status == -EACCES && tok) {
        char *key = em_token_key(tok);
        em_cache_put(&em->tokens, key, now + em->cfg.authn_ttl_ms, now)->ok = false;
        xfree(key);
    } else if (status < 0 && status != -EACCES) {
        LOG_WARN(EM_LOG, "token review failed: %s", strerror(-status));
    }
    xfree(tok);
    unauthorized(c);
    finish(c);
}

static void authenticate(struct call *c)
{
    struct extmetrics *em = c->em;
    struct httpd_request *req = c->req;
    if (em->cfg.disable_auth) {
        c->user.name = xstrdup("system:anonymous");
        after_authz(c);
        return;
    }
    uint64_t now = uv_now(em->loop);
    int rc = em_rh_authenticate(&em->rh, req, now, &c->user);
    if (rc == 1) {
        authorize(c);
        return;
    }
    if (rc == -EACCES)
        LOG_DEBUG(EM_LOG, "client certificate CN \"%s\" from %s is not an allowed front proxy",
                  req->peer.client_cn ? req->peer.client_cn : "", req->peer.addr);
    /* then a certificate of the client CA, as the apiserver's union of
     * authenticators tries them: front proxy, client certificate, token */
    if (em_x509_authenticate(em->client_store, &em->client_verified, req, now, &c->user) == 1) {
        authorize(c);
        return;
    }
    char *tok = bearer_token(httpd_request_header(req, "Authorization"));
    if (!tok || !em->authz.ops) {
        xfree(tok);
        unauthorized(c);
        finish(c);
        return;
    }
    char *key = em_token_key(tok);
    const struct em_cache_entry *e = em_cache_get(&em->tokens, key, uv_now(em->loop));
    xfree(key);
    if (e) {
        xfree(tok);
        if (!e->ok) {
            unauthorized(c);
            finish(c);
            return;
        }
        struct extmetrics_user u;
        struct extmetrics_label *lab = xcalloc(e->user.extra.n / 2 + 1, sizeof(*lab));
        em_user_view(&e->user, &u, lab);
        em_user_set(&c->user, &u);
        xfree(lab);
        authorize(c);
        return;
    }
    c->waiting++;
    rc = em->authz.ops->authenticate_token(em->authz.impl, tok, on_authn, c);
    xfree(tok);
    if (rc < 0) {
        c->waiting--;
        LOG_WARN(EM_LOG, "cannot start token review: %s", strerror(-rc));
        unauthorized(c);
        finish(c);
    }
}

/* ---- entry ------------------------------------------------------------------------ */

static void on_request(struct httpd_request *req, void *arg)
{
    struct extmetrics *em = arg;
    char *ns = NULL, *metric = NULL;
    int route = route_of(req->path, &ns, &metric);
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    if (route == R_HEALTH) {
        static const struct httpd_header h[] = {{"Content-Type", "text/plain; charset=utf-8"}};
        httpd_respond(req, 200, h, 1, "ok", 2);
        return;
    }
    if (route == -400) {
        answer_status(req, 400, "malformed namespace or metric name in the request path");
        return;
    }
    if (!get) {
        answer_status(req, 405, "%s is not supported: the external metrics API is read-only",
                      req->method);
        xfree(ns);
        xfree(metric);
        return;
    }
    if (em->closing) {
        answer_status(req, 503, "the server is shutting down");
        xfree(ns);
        xfree(metric);
        return;
    }
    struct call *c = xcalloc(1, sizeof(*c));
    c->em = em;
    c->req = req;
    c->route = (enum route)route;
    c->ns = ns;
    c->metric = metric;
    c->metric_id = metric ? extmetrics_metric_lookup(metric) : -1;
    if (c->metric_id < 0)
        c->metric_id = -1;
    c->next = em->calls;
    if (em->calls)
        em->calls->prev = c;
    em->calls = c;
    authenticate(c);
}

/* ---- lifecycle -------------------------------------------------------------------- */

int extmetrics_new(uv_loop_t *loop, const struct extmetrics_config *cfg,
                   const struct extmetrics_provider *provider,
                   const struct extmetrics_authorizer *authorizer, struct extmetrics **out)
{
    if (!loop || !cfg || !provider || !provider->ops || !provider->ops->list || !out)
        return -EINVAL;
    if (!cfg->disable_auth && (!authorizer || !authorizer->ops ||
                               !authorizer->ops->authenticate_token || !authorizer->ops->authorize))
        return -EINVAL;
    struct extmetrics *em = xcalloc(1, sizeof(*em));
    int rc;
    em->loop = loop;
    em->cfg = *cfg;
    em->provider = *provider;
    if (authorizer)
        em->authz = *authorizer;
    if (!em->cfg.allow_plain_for_tests)
        em->cfg.listen.tls = true;
    if (!em->cfg.max_age_ms)
        em->cfg.max_age_ms = 120000;
    if (!em->cfg.authn_ttl_ms)
        em->cfg.authn_ttl_ms = 10000;
    if (!em->cfg.authz_ttl_ms)
        em->cfg.authz_ttl_ms = 10000;
    em->tokens.max = em->decisions.max = cfg->cache_entries ? cfg->cache_entries : 1024;
    em->client_verified.max = 64;
    if (!em->cfg.listen.name)
        em->cfg.listen.name = EM_LOG;
    /* config strings are only used during setup, except the upstream ones
     * (copied by the upstream) */
    em->cfg.upstream_url = em->cfg.upstream_ca_file = em->cfg.upstream_cert_file = NULL;
    em->cfg.upstream_key_file = em->cfg.upstream_token_file = NULL;
    if (cfg->upstream_url) {
        rc = em_upstream_new(loop, cfg, &em->up);
        if (rc < 0) {
            LOG_ERROR(EM_LOG, "bad upstream configuration (%s)", cfg->upstream_url);
            xfree(em);
            return rc;
        }
        em->upstream_url = xstrdup(cfg->upstream_url);
    }
    /* the front proxy's certificate is checked per request against the
     * requestheader CA, which may come after the aggregator connected */
    em->cfg.listen.request_client_cert = true;
    rc = httpd_new(loop, &em->cfg.listen, on_request, em, &em->httpd);
    if (rc < 0) {
        if (em->up)
            em_upstream_close(em->up, NULL, NULL);
        xfree(em->upstream_url);
        xfree(em);
        return rc;
    }
    em->cfg.listen = (struct httpd_config){0}; /* strings were borrowed */
    *out = em;
    return 0;
}

/* The handshake asks for (and httpd checks) certificates of either CA; each
 * authenticator then checks its own. */
static int update_client_cas(struct extmetrics *em)
{
    struct util_buf b = {0};
    if (em->rh_pem)
        util_buf_printf(&b, "%s\n", em->rh_pem);
    if (em->client_pem)
        util_buf_printf(&b, "%s\n", em->client_pem);
    int rc = httpd_set_client_ca(em->httpd, b.data, b.len);
    util_buf_free(&b);
    return rc;
}

static char *pem_copy(const char *pem, size_t len)
{
    return pem ? xstrndup(pem, len) : NULL;
}

int extmetrics_set_requestheader(struct extmetrics *em, const struct extmetrics_requestheader *rh)
{
    int rc = em_rh_set(&em->rh, rh);
    if (rc < 0)
        return rc;
    xfree(em->rh_pem);
    em->rh_pem = rh ? pem_copy(rh->client_ca_pem, rh->client_ca_len) : NULL;
    return update_client_cas(em);
}

int extmetrics_set_client_ca(struct extmetrics *em, const char *pem, size_t len)
{
    X509_STORE *st = NULL;
    if (pem && len && !(st = em_store_from_pem(pem, len)))
        return -EINVAL;
    X509_STORE_free(em->client_store);
    em->client_store = st;
    em_cache_free(&em->client_verified); /* answers for the old store */
    xfree(em->client_pem);
    em->client_pem = st ? pem_copy(pem, len) : NULL;
    return update_client_cas(em);
}

bool extmetrics_client_ca_can_proxy(const struct extmetrics *em)
{
    return em->rh.enabled && em->rh.user_h.n > 0 && em->rh.allowed.n == 0 && em->rh_pem &&
           em->client_pem &&
           em_pem_share_cert(em->rh_pem, strlen(em->rh_pem), em->client_pem,
                             strlen(em->client_pem));
}

int extmetrics_port(const struct extmetrics *em)
{
    return httpd_port(em->httpd);
}

struct httpd *extmetrics_httpd(struct extmetrics *em)
{
    return em->httpd;
}

static void part_closed(void *arg)
{
    struct extmetrics *em = arg;
    if (--em->closing_parts > 0)
        return;
    extmetrics_close_cb cb = em->close_cb;
    void *cb_arg = em->close_arg;
    em_rh_free(&em->rh);
    X509_STORE_free(em->client_store);
    xfree(em->rh_pem);
    xfree(em->client_pem);
    em_cache_free(&em->tokens);
    em_cache_free(&em->decisions);
    em_cache_free(&em->client_verified);
    xfree(em->upstream_url);
    xfree(em);
    if (cb)
        cb(cb_arg);
}

void extmetrics_close(struct extmetrics *em, extmetrics_close_cb cb, void *arg)
{
    if (!em || em->closing)
        return;
    em->closing = true;
    em->close_cb = cb;
    em->close_arg = arg;
    /* calls waiting for the authorizer: answer now, free on their callback */
    struct call *c = em->calls, *next;
    for (; c; c = next) {
        next = c->next;
        if (!c->fwd) {
            call_answer_status(c, 503, "the server is shutting down");
            call_unlink(c);
            c->em = NULL;
        }
    }
    em->closing_parts = 1 + (em->up ? 1 : 0);
    if (em->up) /* forwarded calls complete with -ECANCELED */
        em_upstream_close(em->up, part_closed, em);
    httpd_close(em->httpd, part_closed, em);
}

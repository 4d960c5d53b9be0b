/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/route: routing and serving of the external metrics API: the
 * request path decoded into a route, the probes, discovery from memory,
 * metric values from the provider, and forwarding upstream. A request that
 * needs credentials goes through access.c first (route -> authenticate ->
 * authorize -> serve).
 *
 * Each request that needs the authorizer or the upstream becomes a struct
 * em_call; it lives until the last callback it waits for has run, so that
 * the authorizer and httpc can call back even after the server started
 * closing (the call then just answers 503 / frees itself). */
#include "extmetrics-int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

void em_call_answer_status(struct em_call *c, int code, const char *msg)
{
    if (!c->req)
        return;
    answer_status(c->req, code, "%s", msg);
    c->req = NULL;
}

void em_call_unlink(struct em_call *c)
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

void em_call_free(struct em_call *c)
{
    em_call_unlink(c);
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

/* A metric name as it may stand in a path and be forwarded: printable ASCII
 * without a space (a '/' is refused when unescaping), as other adapters name
 * theirs: KEDA's s0-prometheus-x, the Datadog Cluster Agent's
 * datadogmetric@ns:name, the Stackdriver adapter's
 * pubsub.googleapis.com|subscription|num_undelivered_messages (before, only
 * letters, digits and "._:-", and those answered 400). Not "." or ".." (a
 * client library would resolve those away, and the upstream would answer
 * for another path than the one authorized). The upstream gets the path as
 * the client sent it. */
static bool valid_metric(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

#define PREFIX "/apis/" EXTMETRICS_GROUP "/" EXTMETRICS_VERSION

/* Returns the route; for R_METRIC fills ns/metric, or returns -400 on a
 * malformed namespace/metric segment. */
static int route_of(const char *path, char **ns, char **metric)
{
    if (path_is(path, "/healthz") || path_is(path, "/livez") ||
        strncmp(path, "/healthz/", 9) == 0 || strncmp(path, "/livez/", 7) == 0)
        return R_HEALTH;
    if (path_is(path, "/readyz") || strncmp(path, "/readyz/", 8) == 0)
        return R_READY;
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

static void serve_metric(struct extmetrics *em, struct em_call *c)
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
    struct em_call *c = arg;
    c->fwd = NULL;
    c->waiting--;
    if (c->req) {
        if (err == 0) {
            struct httpd_header h[] = {
                {"Content-Type", resp->content_type ? resp->content_type : "application/json"}};
            httpd_respond(c->req, (int)resp->status, h, 1, resp->body, resp->body_len);
            c->req = NULL;
        } else if (err == -ETIMEDOUT) {
            em_call_answer_status(c, 504, "the upstream metrics adapter did not answer in time");
        } else if (err == -ECANCELED) {
            em_call_answer_status(c, 503, "request cancelled");
        } else {
            char msg[300];
            snprintf(msg, sizeof(msg), "the upstream metrics adapter is unavailable: %s",
                     resp->errmsg && *resp->errmsg ? resp->errmsg : strerror(-err));
            LOG_WARN(EM_LOG, "forwarding %s failed: %s", c->metric ? c->metric : "?", msg);
            em_call_answer_status(c, 503, msg);
        }
    }
    em_call_free(c);
}

/* The client's connection is gone (httpd does not call this when the client
 * only stopped sending: a half-closed client still gets the answer). */
static void on_abort_forward(struct httpd_request *req, void *arg)
{
    struct em_call *c = arg;
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
bool em_serve(struct extmetrics *em, struct em_call *c)
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
            /* the path and query, not the raw target: an absolute-form one
             * (http://host/apis/...) would be appended to the upstream's URL */
            struct util_buf origin = {0};
            util_buf_puts(&origin, req->path);
            if (req->query[0])
                util_buf_printf(&origin, "?%s", req->query);
            int rc = em_upstream_get(em->up, origin.data, httpd_request_header(req, "Accept"),
                                     &c->user, on_forwarded, c, &c->fwd);
            util_buf_free(&origin);
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

/* ---- entry ------------------------------------------------------------------------ */

/* /healthz, /livez: 200 while the listener serves. /readyz (and any
 * /readyz/<check>): 200 once the provider can serve values (its caches
 * synced), 503 before and while closing, as a kubelet probe reads it (any
 * status from 200 to 399 is success); the aggregator's availability check
 * reads discovery, which does not wait. Open to everyone, as
 * system:public-info-viewer makes them on an apiserver. */
static void answer_probe(struct extmetrics *em, struct httpd_request *req, bool readyz)
{
    static const struct httpd_header h[] = {{"Content-Type", "text/plain; charset=utf-8"}};
    char why[160] = "";
    bool ok = true;
    if (readyz && em->closing) {
        ok = false;
        snprintf(why, sizeof(why), "the server is shutting down");
    } else if (readyz && em->provider.ops->ready &&
               !em->provider.ops->ready(em->provider.impl, why, sizeof(why))) {
        ok = false;
        if (!why[0])
            snprintf(why, sizeof(why), "values cannot be served yet");
    }
    if (ok) {
        httpd_respond(req, 200, h, 1, "ok", 2);
        return;
    }
    char body[200];
    int n = snprintf(body, sizeof(body), "not ready: %s", why);
    httpd_respond(req, 503, h, 1, body, (size_t)UTIL_MIN(n, (int)sizeof(body) - 1));
}

void em_on_request(struct httpd_request *req, void *arg)
{
    struct extmetrics *em = arg;
    char *ns = NULL, *metric = NULL;
    int route = route_of(req->path, &ns, &metric);
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    if (route == R_HEALTH || route == R_READY) {
        answer_probe(em, req, route == R_READY);
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
    struct em_call *c = xcalloc(1, sizeof(*c));
    c->em = em;
    c->req = req;
    c->route = (enum em_route)route;
    c->ns = ns;
    c->metric = metric;
    c->metric_id = metric ? extmetrics_metric_lookup(metric) : -1;
    if (c->metric_id < 0)
        c->metric_id = -1;
    c->next = em->calls;
    if (em->calls)
        em->calls->prev = c;
    em->calls = c;
    em_authenticate(c);
}

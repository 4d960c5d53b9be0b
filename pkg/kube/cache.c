/* SPDX-License-Identifier: Apache-2.0 */
/* kube/cache: the informer-like caches of Deployments and Pods: reflectors
 * (one per kind, or per kind and namespace) feeding one kube_store, plus a
 * coalesced "changed" notification.
 *
 * The store is applied to from reflector callbacks (inside httpc's streaming
 * callback): watch events at once, a list's pages staged (extracted, not
 * applied) and applied together when its last page is in, so a reader never
 * sees a relist half-applied, and a list that fails half-way (to be resumed
 * from the failed page, or started over) leaves the state it had, as
 * client-go's reflector gathers a list's pages for one store.Replace. The
 * first list is staged as well: readers see nothing until it is whole, as
 * nothing counts as synced before. The owner's callback is deferred to a
 * zero timer so it runs from the loop, at most once per loop iteration, and
 * may do anything, closing the cache included. The cache is a handle: freed
 * after its reflectors and timer have closed. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "kube-int.h"

struct scope {
    struct kube_cache *c;
    enum kube_kind kind;
    char *ns; /* NULL = all namespaces */
    char *path; /* the collection listed and watched */
    struct kube_reflector *r;
    struct kube_store_stage *stage; /* the list in progress, not applied yet */
};

struct kube_cache {
    struct kube *k;
    struct kube_store *store;
    struct scope *scopes;
    size_t nscopes;
    uv_timer_t notify;
    kube_cache_changed_cb cb;
    void *arg;
    bool closing;
    size_t pending_close;
    kube_close_cb close_cb;
    void *close_arg;
};

static void on_notify(uv_timer_t *t)
{
    struct kube_cache *c = util_container_of(t, struct kube_cache, notify);
    if (!c->closing && c->cb)
        c->cb(c, c->arg);
}

static void changed(struct kube_cache *c)
{
    if (!c->closing && c->cb && !uv_is_active((uv_handle_t *)&c->notify))
        uv_timer_start(&c->notify, on_notify, 0, 0);
}

static void sink_list_begin(void *arg)
{
    struct scope *s = arg;
    /* a list started over (a page refused, a continue token expired): the
     * pages staged so far are void */
    kube_store_stage_free(s->stage);
    s->stage = kube_store_stage_new(s->c->store, s->kind, s->ns);
}

static void sink_event(void *arg, enum kube_event_type type, json_t *obj)
{
    struct scope *s = arg;
    int rc = s->stage ? kube_store_stage_add(s->stage, obj)
                      : kube_store_apply(s->c->store, s->kind, type, obj);
    if (rc > 0 && !s->stage)
        changed(s->c);
    else if (rc < 0)
        LOG_WARN("kube", "%s event without metadata.namespace/name ignored",
                 s->kind == KUBE_KIND_POD ? "pod" : "deployment");
}

static void sink_list_end(void *arg)
{
    struct scope *s = arg;
    if (s->stage)
        kube_store_stage_commit(s->stage);
    s->stage = NULL;
    changed(s->c); /* also: synced may have flipped */
}

static const struct kube_sink cache_sink = {sink_list_begin, sink_event, sink_list_end};

static void on_part_closed(void *arg)
{
    struct kube_cache *c = arg;
    if (--c->pending_close > 0)
        return;
    kube_close_cb cb = c->close_cb;
    void *cb_arg = c->close_arg;
    for (size_t i = 0; i < c->nscopes; i++) {
        kube_store_stage_free(c->scopes[i].stage); /* a list cut short by the close */
        xfree(c->scopes[i].ns);
        xfree(c->scopes[i].path);
    }
    xfree(c->scopes);
    kube_store_free(c->store);
    xfree(c);
    if (cb)
        cb(cb_arg);
}

static void on_notify_closed(uv_handle_t *h)
{
    on_part_closed(h->data);
}

void kube_cache_close(struct kube_cache *c, kube_close_cb cb, void *arg)
{
    c->closing = true;
    c->close_cb = cb;
    c->close_arg = arg;
    c->pending_close = 1;
    for (size_t i = 0; i < c->nscopes; i++)
        if (c->scopes[i].r)
            c->pending_close++;
    for (size_t i = 0; i < c->nscopes; i++)
        if (c->scopes[i].r)
            kube_reflector_close(c->scopes[i].r, on_part_closed, c);
    uv_close((uv_handle_t *)&c->notify, on_notify_closed);
}

static char *collection(enum kube_kind kind, const char *ns)
{
    const char *prefix = kind == KUBE_KIND_DEPLOYMENT ? "/apis/apps/v1" : "/api/v1";
    const char *res = kind == KUBE_KIND_DEPLOYMENT ? "deployments" : "pods";
    return ns ? xasprintf("%s/namespaces/%s/%s", prefix, ns, res)
              : xasprintf("%s/%s", prefix, res);
}

int kube_cache_new(struct kube *k, const struct kube_cache_opts *o, kube_cache_changed_cb cb,
                   void *arg, struct kube_cache **out)
{
    *out = NULL;
    size_t nall = 0, nns = 0;
    if (o && o->namespaces)
        while (o->namespaces[nall]) {
            if (!kube_name_valid(o->namespaces[nall]))
                return -EINVAL;
            nall++;
        }
    /* each namespace once: two scopes of one namespace would each sweep what
     * the other had not re-listed yet, and list and watch it twice */
    const char **uniq = xcalloc(nall + 1, sizeof(*uniq));
    for (size_t i = 0; i < nall; i++) {
        size_t j = 0;
        while (j < nns && strcmp(uniq[j], o->namespaces[i]) != 0)
            j++;
        if (j == nns)
            uniq[nns++] = o->namespaces[i];
    }
    struct kube_cache *c = xcalloc(1, sizeof(*c));
    c->k = k;
    c->cb = cb;
    c->arg = arg;
    c->store = kube_store_new();
    c->nscopes = 2 * (nns ? nns : 1);
    c->scopes = xcalloc(c->nscopes, sizeof(*c->scopes));
    uv_timer_init(kube_loop(k), &c->notify);
    c->notify.data = c;
    for (size_t i = 0; i < c->nscopes; i++) {
        struct scope *s = &c->scopes[i];
        s->c = c;
        s->kind = i % 2 ? KUBE_KIND_POD : KUBE_KIND_DEPLOYMENT;
        s->ns = nns ? xstrdup(uniq[i / 2]) : NULL;
    }
    xfree(uniq);
    for (size_t i = 0; i < c->nscopes; i++) {
        struct scope *s = &c->scopes[i];
        s->path = collection(s->kind, s->ns);
        int rc = kube_reflector_new(k, s->path,
                                    s->kind == KUBE_KIND_POD && o ? o->pod_label_selector : NULL,
                                    o ? &o->watch : NULL, &cache_sink, s, &s->r);
        if (rc < 0) {
            kube_cache_close(c, NULL, NULL);
            return rc;
        }
    }
    *out = c;
    return 0;
}

size_t kube_cache_memory(const struct kube_cache *c)
{
    size_t n = sizeof(*c) + c->nscopes * sizeof(*c->scopes) + kube_store_memory(c->store);
    for (size_t i = 0; i < c->nscopes; i++)
        n += kube_store_stage_memory(c->scopes[i].stage);
    return n;
}

/* Whether scope s covers namespace ns (NULL: every scope). */
static bool covers(const struct scope *s, const char *ns)
{
    return !s->ns || !ns || strcmp(s->ns, ns) == 0;
}

bool kube_cache_synced(const struct kube_cache *c)
{
    return kube_cache_ns_synced(c, NULL);
}

bool kube_cache_ns_synced(const struct kube_cache *c, const char *ns)
{
    for (size_t i = 0; i < c->nscopes; i++)
        if (covers(&c->scopes[i], ns) &&
            (!c->scopes[i].r || !kube_reflector_synced(c->scopes[i].r)))
            return false;
    return true;
}

int64_t kube_cache_ns_down_ms(const struct kube_cache *c, const char *ns, const char **what)
{
    int64_t worst = 0;
    if (what)
        *what = "";
    for (size_t i = 0; i < c->nscopes; i++) {
        if (!c->scopes[i].r || !covers(&c->scopes[i], ns))
            continue;
        int64_t d = kube_reflector_down_ms(c->scopes[i].r);
        if (d > worst) {
            worst = d;
            if (what)
                *what = c->scopes[i].path;
        }
    }
    return worst;
}

bool kube_cache_settled(const struct kube_cache *c, int64_t down_ms)
{
    for (size_t i = 0; i < c->nscopes; i++) {
        const struct kube_reflector *r = c->scopes[i].r;
        if (!r)
            return false;
        if (kube_reflector_synced(r))
            continue;
        /* all namespaces' lists only settle listed; one namespace's may fail */
        if (!c->scopes[i].ns || kube_reflector_down_ms(r) < down_ms)
            return false;
    }
    for (size_t i = 0; i < c->nscopes; i++)
        if (kube_cache_ns_synced(c, c->scopes[i].ns))
            return true; /* some namespace listed whole */
    return false;
}

int64_t kube_cache_down_ms(const struct kube_cache *c, const char **what)
{
    return kube_cache_ns_down_ms(c, NULL, what);
}

const struct kube_deployment *const *kube_cache_deployments(const struct kube_cache *c, size_t *n)
{
    return kube_store_deployments(c->store, n);
}

const struct kube_deployment *kube_cache_deployment(const struct kube_cache *c, const char *ns,
                                                    const char *name)
{
    return kube_store_deployment(c->store, ns, name);
}

const struct kube_pod *const *kube_cache_deployment_pods(struct kube_cache *c,
                                                         const struct kube_deployment *d,
                                                         size_t *n)
{
    return kube_store_deployment_pods(c->store, d, n);
}

const struct kube_pod *kube_cache_pod(const struct kube_cache *c, const char *ns,
                                      const char *name)
{
    return kube_store_pod(c->store, ns, name);
}

size_t kube_cache_npods(const struct kube_cache *c)
{
    return kube_store_npods(c->store);
}

void kube_cache_write_metrics(const struct kube_cache *c, struct util_buf *out)
{
    static const char *const kinds[] = {"deployment", "pod"};
    struct kube_reflector_stats sum[2] = {{0}};
    for (size_t i = 0; i < c->nscopes; i++) {
        if (!c->scopes[i].r)
            continue;
        const struct kube_reflector_stats *st = kube_reflector_stats(c->scopes[i].r);
        struct kube_reflector_stats *t = &sum[c->scopes[i].kind];
        t->lists += st->lists;
        t->relists += st->relists;
        t->watches += st->watches;
        t->gone += st->gone;
        t->errors += st->errors;
        t->events += st->events;
        t->bookmarks += st->bookmarks;
    }
    size_t ndeps;
    kube_store_deployments(c->store, &ndeps);
    size_t counts[2] = {ndeps, kube_store_npods(c->store)};
    util_buf_printf(out,
                    "# HELP gpuscaler_kube_cache_synced Whether every cache finished its first list.\n"
                    "# TYPE gpuscaler_kube_cache_synced gauge\n"
                    "gpuscaler_kube_cache_synced %d\n"
                    "# HELP gpuscaler_kube_cache_down_seconds How long a list+watch has been "
                    "failing without a new list, event or bookmark (0 while current).\n"
                    "# TYPE gpuscaler_kube_cache_down_seconds gauge\n"
                    "gpuscaler_kube_cache_down_seconds %.3f\n"
                    "# HELP gpuscaler_kube_cache_objects Objects held (tracked Deployments, all Pods).\n"
                    "# TYPE gpuscaler_kube_cache_objects gauge\n",
                    kube_cache_synced(c) ? 1 : 0, (double)kube_cache_down_ms(c, NULL) / 1000.0);
    for (int k = 0; k < 2; k++)
        util_buf_printf(out, "gpuscaler_kube_cache_objects{kind=\"%s\"} %zu\n", kinds[k], counts[k]);
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"list_requests", "LIST requests (pages) sent.", offsetof(struct kube_reflector_stats, lists)},
        {"relists", "Complete lists after the first.", offsetof(struct kube_reflector_stats, relists)},
        {"watch_requests", "WATCH requests sent.", offsetof(struct kube_reflector_stats, watches)},
        {"watch_gone", "410 Gone answers (re-lists forced).", offsetof(struct kube_reflector_stats, gone)},
        {"watch_errors", "List/watch failures followed by a backoff.",
         offsetof(struct kube_reflector_stats, errors)},
        {"watch_events", "Watch events applied.", offsetof(struct kube_reflector_stats, events)},
        {"watch_bookmarks", "Watch bookmarks seen.", offsetof(struct kube_reflector_stats, bookmarks)},
    };
    /* a watch request beyond each reflector's first is a restart */
    unsigned restarts[2] = {0, 0}, nref[2] = {0, 0};
    for (size_t i = 0; i < c->nscopes; i++)
        if (c->scopes[i].r)
            nref[c->scopes[i].kind]++;
    for (int k = 0; k < 2; k++)
        restarts[k] = sum[k].watches > nref[k] ? sum[k].watches - nref[k] : 0;
    util_buf_puts(out, "# HELP gpuscaler_watch_restarts_total Watches re-opened after the first "
                       "(timeouts, errors, 410s).\n# TYPE gpuscaler_watch_restarts_total counter\n");
    for (int k = 0; k < 2; k++)
        util_buf_printf(out, "gpuscaler_watch_restarts_total{kind=\"%s\"} %u\n", kinds[k],
                        restarts[k]);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(counters); i++) {
        util_buf_printf(out, "# HELP gpuscaler_kube_%s_total %s\n# TYPE gpuscaler_kube_%s_total counter\n",
                        counters[i].name, counters[i].help, counters[i].name);
        for (int k = 0; k < 2; k++) {
            unsigned v = *(const unsigned *)(const void *)((const char *)&sum[k] + counters[i].off);
            util_buf_printf(out, "gpuscaler_kube_%s_total{kind=\"%s\"} %u\n", counters[i].name,
                            kinds[k], v);
        }
    }
}

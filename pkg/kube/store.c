/* SPDX-License-Identifier: Apache-2.0 */
/* kube/store: the pure data structure behind kube_cache: compact Deployments
 * and Pods in hash tables keyed by "namespace/name", per-namespace lists, and
 * a lazily recomputed index from each tracked Deployment to its pods.
 *
 * Objects are extracted from JSON once, when an event arrives (extract.c);
 * nothing here keeps JSON. Only Deployments annotated gpuscaler.io/enabled=true
 * are stored (an untracked one is dropped; its next event, which carries the
 * whole object, brings it back if it becomes tracked). All pods are stored,
 * with interned labels, so a newly tracked Deployment has its pods at once.
 *
 * Index upkeep: a pod that appears, disappears or changes labels marks dirty
 * every tracked Deployment of its namespace whose selector matches its old or
 * new labels; a Deployment whose selector changes is marked dirty. A dirty
 * Deployment's pod list is rebuilt from its namespace's pods when read.
 *
 * Relists: list_begin stamps the scope with a new generation; every object
 * applied gets the current generation; list_end deletes the objects of the
 * scope whose stamp is older (they vanished while we were not watching).
 * The cache stages a list (kube_store_stage_*) instead of applying its pages
 * as they come: each item is extracted at once, an unchanged one (same
 * resourceVersion) only stamped, a new or changed one held; the commit
 * applies those and sweeps in one go, so readers never see a half-applied
 * list, and an aborted one leaves the store as it was. The stage holds only
 * what changed: a relist of an unchanged cluster costs no second copy. */
#include <errno.h>
#include <string.h>

#include "kube-int.h"
#include "store-int.h"

struct kube_store *kube_store_new(void)
{
    return xcalloc(1, sizeof(struct kube_store));
}

static struct kns *ns_get(struct kube_store *s, const char *name, bool create)
{
    struct kns *n = kmap_get(&s->nss, name);
    if (!n && create) {
        n = xcalloc(1, sizeof(*n));
        n->name = xstrdup(name);
        kmap_put(&s->nss, n->name, n);
    }
    return n;
}

/* Free n once nothing is in it and it is no list's scope (a configured
 * namespace keeps its relist stamps): with every namespace watched, one
 * created and deleted (a CI run's, a preview's) leaves nothing behind. */
static void ns_drop_if_empty(struct kube_store *s, struct kns *n)
{
    if (n->npods || n->ndeps || n->list_start[0] || n->list_start[1])
        return;
    kmap_del(&s->nss, n->name);
    xfree(n->pods);
    xfree(n->deps);
    xfree(n->name);
    xfree(n);
}

static void dep_free(struct kube_store *s, struct dep *d)
{
    extract_deployment_clear(&d->pub);
    (void)s;
    xfree(d->pods);
    xfree(d->key);
    xfree(d);
}

static void pod_free(struct kube_store *s, struct pod *p)
{
    extract_pod_clear(&s->pool, &p->pub);
    xfree(p->rv);
    xfree(p->key);
    xfree(p);
}

void kube_store_free(struct kube_store *s)
{
    if (!s)
        return;
    void *v;
    for (size_t i = 0; kmap_next(&s->deps, &i, &v);)
        dep_free(s, v);
    for (size_t i = 0; kmap_next(&s->pods, &i, &v);)
        pod_free(s, v);
    for (size_t i = 0; kmap_next(&s->nss, &i, &v);) {
        struct kns *n = v;
        xfree(n->pods);
        xfree(n->deps);
        xfree(n->name);
        xfree(n);
    }
    kmap_free(&s->deps);
    kmap_free(&s->pods);
    kmap_free(&s->nss);
    xfree(s->all);
    kintern_free(&s->pool);
    xfree(s);
}

/* ---- small vectors -------------------------------------------------------- */

#define VEC_PUSH(arr, n, cap, v)                                       \
    do {                                                               \
        if ((n) == (cap)) {                                            \
            (cap) = (cap) ? (cap) * 2 : 4;                             \
            (arr) = xrealloc((arr), (cap) * sizeof(*(arr)));           \
        }                                                              \
        (arr)[(n)++] = (v);                                            \
    } while (0)

static void ns_add_pod(struct kns *n, struct pod *p)
{
    p->ns_idx = n->npods;
    VEC_PUSH(n->pods, n->npods, n->podcap, p);
}

static void ns_del_pod(struct kns *n, struct pod *p)
{
    struct pod *last = n->pods[--n->npods];
    n->pods[p->ns_idx] = last;
    last->ns_idx = p->ns_idx;
}

static void ns_add_dep(struct kns *n, struct dep *d)
{
    d->ns_idx = n->ndeps;
    VEC_PUSH(n->deps, n->ndeps, n->depcap, d);
}

static void ns_del_dep(struct kns *n, struct dep *d)
{
    struct dep *last = n->deps[--n->ndeps];
    n->deps[d->ns_idx] = last;
    last->ns_idx = d->ns_idx;
}

static void all_add(struct kube_store *s, struct dep *d)
{
    d->all_idx = s->nall;
    VEC_PUSH(s->all, s->nall, s->allcap, &d->pub);
}

static void all_del(struct kube_store *s, struct dep *d)
{
    struct kube_deployment *last = s->all[--s->nall];
    s->all[d->all_idx] = last;
    util_container_of(last, struct dep, pub)->all_idx = d->all_idx;
}

/* Mark dirty the Deployments of n whose selector matches any of the label sets. */
static void touch_deps(struct kns *n, const struct kube_labels *a, const struct kube_labels *b)
{
    for (size_t i = 0; i < n->ndeps; i++) {
        struct dep *d = n->deps[i];
        if (d->dirty)
            continue;
        if ((a && kube_selector_matches(&d->pub.selector, a)) ||
            (b && kube_selector_matches(&d->pub.selector, b)))
            d->dirty = true;
    }
}

/* ---- apply ---------------------------------------------------------------- */

static void del_dep(struct kube_store *s, struct dep *d)
{
    struct kns *n = d->ns;
    kmap_del(&s->deps, d->key);
    ns_del_dep(n, d);
    all_del(s, d);
    dep_free(s, d);
    ns_drop_if_empty(s, n);
}

static void del_pod(struct kube_store *s, struct pod *p)
{
    struct kns *n = p->ns;
    touch_deps(n, &p->pub.labels, NULL);
    kmap_del(&s->pods, p->key);
    ns_del_pod(n, p);
    pod_free(s, p);
    ns_drop_if_empty(s, n);
}

/* Apply nd, which this takes (moved into the store or cleared); rv is its
 * resourceVersion (NULL: none), read before nd moves. */
static int put_deployment(struct kube_store *s, bool deleted, struct kube_deployment *ndp,
                          bool tracked, const char *rv)
{
    struct kube_deployment nd = *ndp;
    char *key = xasprintf("%s/%s", nd.ns, nd.name);
    struct dep *d = kmap_get(&s->deps, key);
    int rc = 0;
    if (deleted || !tracked) {
        if (d) {
            del_dep(s, d);
            rc = 1;
        }
        extract_deployment_clear(&nd);
        goto out;
    }
    if (d) {
        d->gen = s->gen;
        if (d->pub.resource_version && rv && strcmp(d->pub.resource_version, rv) == 0) {
            extract_deployment_clear(&nd);
            goto out; /* seen already (a relist) */
        }
        /* its status.replicas decides whether pods of others' names count
         * (kube_store_deployment_pods): only its leaving or reaching 0 */
        if (!extract_selector_equal(&d->pub.selector, &nd.selector) ||
            (d->pub.status_replicas > 0) != (nd.status_replicas > 0))
            d->dirty = true;
        nd.replicas_changes =
            d->pub.replicas_changes + (nd.spec_replicas != d->pub.spec_replicas);
        extract_deployment_clear(&d->pub);
        d->pub = nd;
        rc = 1;
        goto out;
    }
    d = xcalloc(1, sizeof(*d));
    d->pub = nd;
    d->key = key;
    key = NULL;
    d->ns = ns_get(s, nd.ns, true);
    d->dirty = true;
    d->gen = s->gen;
    kmap_put(&s->deps, d->key, d);
    ns_add_dep(d->ns, d);
    all_add(s, d);
    rc = 1;
out:
    xfree(key);
    return rc;
}

static int apply_deployment(struct kube_store *s, enum kube_event_type type, const json_t *obj)
{
    struct kube_deployment nd;
    bool tracked;
    const char *rv;
    int rc = extract_deployment(obj, &nd, &tracked, &rv);
    if (rc < 0)
        return rc;
    return put_deployment(s, type == KUBE_EV_DELETED, &nd, tracked, rv);
}

/* Apply np, which this takes (moved into the store or cleared); rv is its
 * resourceVersion (NULL: none), borrowed. */
static int put_pod(struct kube_store *s, bool deleted, struct kube_pod *npp, const char *rv)
{
    struct kube_pod np = *npp;
    char *key = xasprintf("%s/%s", np.ns, np.name);
    struct pod *p = kmap_get(&s->pods, key);
    int rc = 0;
    if (deleted) {
        if (p) {
            del_pod(s, p);
            rc = 1;
        }
        extract_pod_clear(&s->pool, &np);
        goto out;
    }
    if (p) {
        p->gen = s->gen;
        if (p->rv && rv && strcmp(p->rv, rv) == 0) {
            extract_pod_clear(&s->pool, &np);
            goto out;
        }
        /* the labels choose the selectors that match it, its controller which
         * of them has it (kube_pod_of_deployment; interned: compared as
         * pointers) */
        if (!extract_labels_equal(&p->pub.labels, &np.labels) ||
            p->pub.controller != np.controller)
            touch_deps(p->ns, &p->pub.labels, &np.labels);
        extract_pod_clear(&s->pool, &p->pub);
        p->pub = np;
        xfree(p->rv);
        p->rv = rv ? xstrdup(rv) : NULL;
        rc = 1;
        goto out;
    }
    p = xcalloc(1, sizeof(*p));
    p->pub = np;
    p->key = key;
    key = NULL;
    p->rv = rv ? xstrdup(rv) : NULL;
    p->ns = ns_get(s, np.ns, true);
    p->gen = s->gen;
    kmap_put(&s->pods, p->key, p);
    ns_add_pod(p->ns, p);
    touch_deps(p->ns, &p->pub.labels, NULL);
    rc = 1;
out:
    xfree(key);
    return rc;
}

static int apply_pod(struct kube_store *s, enum kube_event_type type, const json_t *obj)
{
    struct kube_pod np;
    const char *rv;
    int rc = extract_pod(&s->pool, obj, &np, &rv);
    if (rc < 0)
        return rc;
    return put_pod(s, type == KUBE_EV_DELETED, &np, rv);
}

int kube_store_apply(struct kube_store *s, enum kube_kind kind, enum kube_event_type type,
                     const json_t *obj)
{
    if (type != KUBE_EV_ADDED && type != KUBE_EV_MODIFIED && type != KUBE_EV_DELETED)
        return -EINVAL;
    return kind == KUBE_KIND_DEPLOYMENT ? apply_deployment(s, type, obj)
                                        : apply_pod(s, type, obj);
}

/* ---- relist bookkeeping ---------------------------------------------------- */

void kube_store_list_begin(struct kube_store *s, enum kube_kind kind, const char *ns)
{
    s->gen++;
    if (ns)
        ns_get(s, ns, true)->list_start[kind] = s->gen;
    else
        s->all_start[kind] = s->gen;
}

/* Delete the objects of the scope not stamped since its list began; returns how many. */
static size_t sweep(struct kube_store *s, enum kube_kind kind, const char *ns)
{
    struct kns *n = ns ? ns_get(s, ns, true) : NULL;
    unsigned start = n ? n->list_start[kind] : s->all_start[kind];
    struct kmap *m = kind == KUBE_KIND_DEPLOYMENT ? &s->deps : &s->pods;
    /* Collect first: deleting while iterating would move entries. */
    void **stale = NULL;
    size_t nstale = 0, cap = 0;
    void *v;
    for (size_t i = 0; kmap_next(m, &i, &v);) {
        unsigned gen;
        struct kns *vn;
        if (kind == KUBE_KIND_DEPLOYMENT) {
            gen = ((struct dep *)v)->gen;
            vn = ((struct dep *)v)->ns;
        } else {
            gen = ((struct pod *)v)->gen;
            vn = ((struct pod *)v)->ns;
        }
        if ((!n || vn == n) && gen < start)
            VEC_PUSH(stale, nstale, cap, v);
    }
    for (size_t i = 0; i < nstale; i++) {
        if (kind == KUBE_KIND_DEPLOYMENT)
            del_dep(s, stale[i]);
        else
            del_pod(s, stale[i]);
    }
    xfree(stale);
    return nstale;
}

void kube_store_list_end(struct kube_store *s, enum kube_kind kind, const char *ns)
{
    sweep(s, kind, ns);
}

/* ---- staged lists ------------------------------------------------------------ */

static struct dep *dep_lookup(const struct kube_store *s, const char *ns, const char *name);

/* A staged object: extracted, its JSON gone. */
struct staged {
    union {
        struct kube_pod pod;
        struct kube_deployment dep;
    } u;
    char *rv; /* NULL: none */
};

struct kube_store_stage {
    struct kube_store *s;
    enum kube_kind kind;
    char *ns;
    struct staged *items;
    size_t n, cap;
    size_t unchanged;
};

struct kube_store_stage *kube_store_stage_new(struct kube_store *s, enum kube_kind kind,
                                              const char *ns)
{
    struct kube_store_stage *st = xcalloc(1, sizeof(*st));
    st->s = s;
    st->kind = kind;
    st->ns = ns ? xstrdup(ns) : NULL;
    /* stamps the scope's start: what the stage finds unchanged is stamped
     * later, which readers do not see; what is not stamped by the commit goes */
    kube_store_list_begin(s, kind, ns);
    return st;
}

int kube_store_stage_add(struct kube_store_stage *st, const json_t *obj)
{
    struct kube_store *s = st->s;
    struct staged it = {0};
    const char *rv;
    if (st->kind == KUBE_KIND_DEPLOYMENT) {
        bool tracked;
        int rc = extract_deployment(obj, &it.u.dep, &tracked, &rv);
        if (rc < 0)
            return rc;
        /* untracked: not staged nor stamped, so the commit drops one held */
        struct dep *d = tracked ? dep_lookup(s, it.u.dep.ns, it.u.dep.name) : NULL;
        if (!tracked ||
            (d && d->pub.resource_version && rv && strcmp(d->pub.resource_version, rv) == 0)) {
            if (d) {
                d->gen = s->gen;
                st->unchanged++;
            }
            extract_deployment_clear(&it.u.dep);
            return 0;
        }
    } else {
        int rc = extract_pod(&s->pool, obj, &it.u.pod, &rv);
        if (rc < 0)
            return rc;
        char *key = xasprintf("%s/%s", it.u.pod.ns, it.u.pod.name);
        struct pod *p = kmap_get(&s->pods, key);
        xfree(key);
        if (p && p->rv && rv && strcmp(p->rv, rv) == 0) {
            p->gen = s->gen; /* kept: the same object */
            st->unchanged++;
            extract_pod_clear(&s->pool, &it.u.pod);
            return 0;
        }
    }
    it.rv = rv ? xstrdup(rv) : NULL;
    VEC_PUSH(st->items, st->n, st->cap, it);
    return 1;
}

size_t kube_store_stage_count(const struct kube_store_stage *st)
{
    return st->n;
}

size_t kube_store_stage_unchanged(const struct kube_store_stage *st)
{
    return st->unchanged;
}

static void stage_release(struct kube_store_stage *st)
{
    xfree(st->items);
    xfree(st->ns);
    xfree(st);
}

size_t kube_store_stage_commit(struct kube_store_stage *st)
{
    struct kube_store *s = st->s;
    size_t changes = 0;
    for (size_t i = 0; i < st->n; i++) {
        struct staged *it = &st->items[i];
        int rc = st->kind == KUBE_KIND_DEPLOYMENT
                     ? put_deployment(s, false, &it->u.dep, true, it->rv)
                     : put_pod(s, false, &it->u.pod, it->rv);
        changes += rc > 0;
        xfree(it->rv);
    }
    changes += sweep(s, st->kind, st->ns);
    stage_release(st);
    return changes;
}

void kube_store_stage_free(struct kube_store_stage *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++) {
        if (st->kind == KUBE_KIND_DEPLOYMENT)
            extract_deployment_clear(&st->items[i].u.dep);
        else
            extract_pod_clear(&st->s->pool, &st->items[i].u.pod);
        xfree(st->items[i].rv);
    }
    stage_release(st);
}

/* ---- reads ---------------------------------------------------------------- */

const struct kube_deployment *const *kube_store_deployments(const struct kube_store *s, size_t *n)
{
    *n = s->nall;
    return (const struct kube_deployment *const *)s->all;
}

static struct dep *dep_lookup(const struct kube_store *s, const char *ns, const char *name)
{
    char *key = xasprintf("%s/%s", ns, name);
    struct dep *d = kmap_get(&s->deps, key);
    xfree(key);
    return d;
}

const struct kube_deployment *kube_store_deployment(const struct kube_store *s, const char *ns,
                                                    const char *name)
{
    struct dep *d = dep_lookup(s, ns, name);
    return d ? &d->pub : NULL;
}

const struct kube_pod *const *kube_store_deployment_pods(struct kube_store *s,
                                                         const struct kube_deployment *pd,
                                                         size_t *n)
{
    struct dep *d = util_container_of(pd, struct dep, pub);
    if (d->dirty) {
        d->npods = 0;
        struct kns *ns = d->ns;
        size_t matched = 0;
        for (size_t i = 0; i < ns->npods; i++) {
            struct pod *p = ns->pods[i];
            if (!kube_selector_matches(&d->pub.selector, &p->pub.labels))
                continue;
            matched++;
            if (kube_pod_of_deployment(&p->pub, d->pub.name))
                VEC_PUSH(d->pods, d->npods, d->podcap, &p->pub);
        }
        /* None of its own by name while it has replicas: its ReplicaSets are
         * others' it adopted (a Deployment renamed by deleting the old one
         * with --cascade=orphan and creating it anew), which only their
         * ownerReferences' uids would tell; count by the selector then */
        if (d->npods == 0 && matched > 0 && d->pub.status_replicas > 0) {
            for (size_t i = 0; i < ns->npods; i++) {
                struct pod *p = ns->pods[i];
                if (kube_selector_matches(&d->pub.selector, &p->pub.labels))
                    VEC_PUSH(d->pods, d->npods, d->podcap, &p->pub);
            }
        }
        d->dirty = false;
        s->rebuilds++;
    }
    *n = d->npods;
    return (const struct kube_pod *const *)d->pods;
}

const struct kube_pod *kube_store_pod(const struct kube_store *s, const char *ns,
                                      const char *name)
{
    char *key = xasprintf("%s/%s", ns, name);
    struct pod *p = kmap_get(&s->pods, key);
    xfree(key);
    return p ? &p->pub : NULL;
}

size_t kube_store_npods(const struct kube_store *s)
{
    return s->pods.n;
}

size_t kube_store_index_rebuilds(const struct kube_store *s)
{
    return s->rebuilds;
}

size_t kube_store_interned(const struct kube_store *s)
{
    return kintern_count(&s->pool);
}

/* ---- footprint --------------------------------------------------------- */

static size_t str_bytes(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

static size_t map_bytes(const struct kmap *m)
{
    return m->cap * sizeof(*m->ents);
}

static size_t labels_bytes(const struct kube_labels *l, bool owned)
{
    size_t n = l->n * sizeof(*l->items);
    for (size_t i = 0; owned && i < l->n; i++)
        n += str_bytes(l->items[i].key) + str_bytes(l->items[i].value);
    return n;
}

static size_t selector_bytes(const struct kube_selector *sel)
{
    size_t n = sel->nmatch * sizeof(*sel->match) + sel->nexprs * sizeof(*sel->exprs);
    for (size_t i = 0; i < sel->nmatch; i++)
        n += str_bytes(sel->match[i].key) + str_bytes(sel->match[i].value);
    for (size_t i = 0; i < sel->nexprs; i++) {
        n += str_bytes(sel->exprs[i].key) + sel->exprs[i].nvalues * sizeof(char *);
        for (size_t j = 0; j < sel->exprs[i].nvalues; j++)
            n += str_bytes(sel->exprs[i].values[j]);
    }
    return n;
}

size_t kube_store_namespaces(const struct kube_store *s)
{
    return s->nss.n;
}

size_t kube_store_memory(const struct kube_store *s)
{
    size_t n = sizeof(*s) + map_bytes(&s->deps) + map_bytes(&s->pods) + map_bytes(&s->nss) +
               map_bytes(&s->pool.map) + s->allcap * sizeof(*s->all);
    void *v;
    for (size_t i = 0; kmap_next(&s->pods, &i, &v);) {
        const struct pod *p = v;
        n += sizeof(*p) + str_bytes(p->key) + str_bytes(p->rv) + str_bytes(p->pub.name) +
             labels_bytes(&p->pub.labels, false) + /* label strings are interned */
             labels_bytes(&p->pub.ports, false);
    }
    for (size_t i = 0; kmap_next(&s->deps, &i, &v);) {
        const struct dep *d = v;
        const struct kube_deployment *k = &d->pub;
        n += sizeof(*d) + str_bytes(d->key) + d->podcap * sizeof(*d->pods) + str_bytes(k->ns) +
             str_bytes(k->name) + str_bytes(k->uid) + str_bytes(k->resource_version) +
             labels_bytes(&k->labels, true) + labels_bytes(&k->annotations, true) +
             selector_bytes(&k->selector);
    }
    for (size_t i = 0; kmap_next(&s->nss, &i, &v);) {
        const struct kns *ns = v;
        n += sizeof(*ns) + str_bytes(ns->name) + ns->podcap * sizeof(*ns->pods) +
             ns->depcap * sizeof(*ns->deps);
    }
    for (size_t i = 0; kmap_next(&s->pool.map, &i, &v);)
        n += sizeof(size_t) + strlen((const char *)v + sizeof(size_t)) + 1;
    return n;
}

size_t kube_store_stage_memory(const struct kube_store_stage *st)
{
    if (!st)
        return 0;
    size_t n = sizeof(*st) + str_bytes(st->ns) + st->cap * sizeof(*st->items);
    for (size_t i = 0; i < st->n; i++) {
        const struct staged *it = &st->items[i];
        n += str_bytes(it->rv);
        if (st->kind == KUBE_KIND_POD) {
            n += str_bytes(it->u.pod.name) + labels_bytes(&it->u.pod.labels, false) +
                 labels_bytes(&it->u.pod.ports, false);
        } else {
            const struct kube_deployment *k = &it->u.dep;
            n += str_bytes(k->ns) + str_bytes(k->name) + str_bytes(k->uid) +
                 str_bytes(k->resource_version) + labels_bytes(&k->labels, true) +
                 labels_bytes(&k->annotations, true) + selector_bytes(&k->selector);
        }
    }
    return n;
}

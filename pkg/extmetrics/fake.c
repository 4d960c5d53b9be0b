/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/fake: a provider and an authorizer for tests, behind the same
 * ops tables the controller's real backends implement.
 *
 * The fake authorizer can answer asynchronously (through a zero-delay timer
 * per pending answer) to exercise the deferred-response path, or
 * synchronously when created without a loop. */
#include "extmetrics-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---- provider -------------------------------------------------------------- */

struct fake_dep {
    char *ns, *name;
    struct extmetrics_label *labels;
    size_t nlabels;
    struct extmetrics_sample samples[EXTMETRICS_METRIC_COUNT];
};

struct extmetrics_fake_provider {
    struct fake_dep *deps;
    size_t n;
    int fail;
    char *not_ready; /* the reason ready() gives, NULL when ready */
};

struct extmetrics_fake_provider *extmetrics_fake_provider_new(void)
{
    return xcalloc(1, sizeof(struct extmetrics_fake_provider));
}

static void dep_free(struct fake_dep *d)
{
    xfree(d->ns);
    xfree(d->name);
    for (size_t i = 0; i < d->nlabels; i++) {
        xfree((char *)d->labels[i].key);
        xfree((char *)d->labels[i].value);
    }
    xfree(d->labels);
}

void extmetrics_fake_provider_free(struct extmetrics_fake_provider *fp)
{
    if (!fp)
        return;
    for (size_t i = 0; i < fp->n; i++)
        dep_free(&fp->deps[i]);
    xfree(fp->deps);
    xfree(fp->not_ready);
    xfree(fp);
}

static struct fake_dep *find(struct extmetrics_fake_provider *fp, const char *ns, const char *name)
{
    for (size_t i = 0; i < fp->n; i++)
        if (strcmp(fp->deps[i].ns, ns) == 0 && strcmp(fp->deps[i].name, name) == 0)
            return &fp->deps[i];
    return NULL;
}

int extmetrics_fake_provider_set(struct extmetrics_fake_provider *fp, const char *ns,
                                 const char *name, const char *const *labels)
{
    struct fake_dep *d = find(fp, ns, name);
    if (d) {
        dep_free(d);
    } else {
        fp->deps = xrealloc(fp->deps, (fp->n + 1) * sizeof(*fp->deps));
        d = &fp->deps[fp->n++];
    }
    memset(d, 0, sizeof(*d));
    d->ns = xstrdup(ns);
    d->name = xstrdup(name);
    for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
        d->labels = xrealloc(d->labels, (d->nlabels + 1) * sizeof(*d->labels));
        d->labels[d->nlabels].key = xstrdup(labels[i]);
        d->labels[d->nlabels].value = xstrdup(labels[i + 1]);
        d->nlabels++;
    }
    return (int)(d - fp->deps);
}

void extmetrics_fake_provider_sample(struct extmetrics_fake_provider *fp, const char *ns,
                                     const char *name, enum extmetrics_metric m,
                                     struct extmetrics_sample s)
{
    struct fake_dep *d = find(fp, ns, name);
    if (d && m < EXTMETRICS_METRIC_COUNT)
        d->samples[m] = s;
}

void extmetrics_fake_provider_fail(struct extmetrics_fake_provider *fp, int err)
{
    fp->fail = err;
}

void extmetrics_fake_provider_not_ready(struct extmetrics_fake_provider *fp, const char *why)
{
    xfree(fp->not_ready);
    fp->not_ready = why ? xstrdup(why) : NULL;
}

static bool fake_ready(void *impl, char *why, size_t len)
{
    struct extmetrics_fake_provider *fp = impl;
    if (fp->not_ready)
        snprintf(why, len, "%s", fp->not_ready);
    return !fp->not_ready;
}

static int fake_list(void *impl, const char *ns, extmetrics_visit_cb visit, void *arg)
{
    struct extmetrics_fake_provider *fp = impl;
    if (fp->fail)
        return fp->fail;
    size_t seen = 0;
    for (size_t i = 0; i < fp->n; i++) {
        struct fake_dep *d = &fp->deps[i];
        if (strcmp(d->ns, ns) != 0)
            continue;
        struct extmetrics_deployment v = {.name = d->name, .labels = d->labels,
                                          .nlabels = d->nlabels};
        memcpy(v.samples, d->samples, sizeof(v.samples));
        visit(&v, arg);
        seen++;
    }
    return seen ? 0 : -ENOENT;
}

static const struct extmetrics_provider_ops fake_provider_ops = {.list = fake_list,
                                                                  .ready = fake_ready};

struct extmetrics_provider extmetrics_fake_provider_get(struct extmetrics_fake_provider *fp)
{
    struct extmetrics_provider p = {.ops = &fake_provider_ops, .impl = fp};
    return p;
}

/* ---- authorizer ------------------------------------------------------------ */

struct fake_token {
    char *token, *user, *group;
    struct em_user extra; /* only .extra is used: key, value, key, value... */
};

struct fake_rule {
    char *user, *verb, *resource;
};

struct pending {
    uv_timer_t t;
    struct extmetrics_fake_authorizer *fa;
    bool authn;
    int status;
    bool allowed;
    char *user, *group;
    size_t token; /* authn: index of the token (its extra), when status is 0 */
    extmetrics_authn_cb authn_cb;
    extmetrics_authz_cb authz_cb;
    void *arg;
};

struct extmetrics_fake_authorizer {
    uv_loop_t *loop;
    struct fake_token *tokens;
    size_t ntokens;
    struct fake_rule *rules;
    size_t nrules;
    int authn_calls, authz_calls;
    char *last_review; /* the last SubjectAccessReview asked for, compact JSON */
    bool hold;
    struct pending **held;
    size_t nheld;
};

struct extmetrics_fake_authorizer *extmetrics_fake_authorizer_new(uv_loop_t *loop)
{
    struct extmetrics_fake_authorizer *fa = xcalloc(1, sizeof(*fa));
    fa->loop = loop;
    return fa;
}

void extmetrics_fake_authorizer_free(struct extmetrics_fake_authorizer *fa)
{
    if (!fa)
        return;
    for (size_t i = 0; i < fa->ntokens; i++) {
        xfree(fa->tokens[i].token);
        xfree(fa->tokens[i].user);
        xfree(fa->tokens[i].group);
        em_user_free(&fa->tokens[i].extra);
    }
    for (size_t i = 0; i < fa->nrules; i++) {
        xfree(fa->rules[i].user);
        xfree(fa->rules[i].verb);
        xfree(fa->rules[i].resource);
    }
    xfree(fa->tokens);
    xfree(fa->rules);
    xfree(fa->held);
    xfree(fa->last_review);
    xfree(fa);
}

void extmetrics_fake_authorizer_add_token(struct extmetrics_fake_authorizer *fa, const char *token,
                                          const char *user, const char *group)
{
    fa->tokens = xrealloc(fa->tokens, (fa->ntokens + 1) * sizeof(*fa->tokens));
    struct fake_token *t = &fa->tokens[fa->ntokens++];
    t->token = xstrdup(token);
    t->user = xstrdup(user);
    t->group = group ? xstrdup(group) : NULL;
    memset(&t->extra, 0, sizeof(t->extra));
}

void extmetrics_fake_authorizer_add_token_extra(struct extmetrics_fake_authorizer *fa,
                                                const char *token, const char *key,
                                                const char *value)
{
    for (size_t i = 0; i < fa->ntokens; i++) {
        if (strcmp(fa->tokens[i].token, token) != 0)
            continue;
        struct em_user *u = &fa->tokens[i].extra;
        u->extra.v = xrealloc(u->extra.v, (u->extra.n + 2) * sizeof(char *));
        u->extra.v[u->extra.n++] = xstrdup(key);
        u->extra.v[u->extra.n++] = xstrdup(value);
    }
}

const char *extmetrics_fake_authorizer_last_review(const struct extmetrics_fake_authorizer *fa)
{
    return fa->last_review ? fa->last_review : "";
}

void extmetrics_fake_authorizer_allow(struct extmetrics_fake_authorizer *fa, const char *user,
                                      const char *verb, const char *resource)
{
    fa->rules = xrealloc(fa->rules, (fa->nrules + 1) * sizeof(*fa->rules));
    struct fake_rule *r = &fa->rules[fa->nrules++];
    r->user = xstrdup(user);
    r->verb = xstrdup(verb);
    r->resource = xstrdup(resource);
}

int extmetrics_fake_authorizer_authn_calls(const struct extmetrics_fake_authorizer *fa)
{
    return fa->authn_calls;
}

int extmetrics_fake_authorizer_authz_calls(const struct extmetrics_fake_authorizer *fa)
{
    return fa->authz_calls;
}

static void deliver(struct pending *p)
{
    if (p->authn) {
        const char *groups[1] = {p->group};
        struct extmetrics_user u = {.name = p->user, .groups = groups, .ngroups = p->group ? 1 : 0};
        struct extmetrics_label *extra = NULL;
        if (p->status == 0) {
            const struct em_strv *x = &p->fa->tokens[p->token].extra.extra;
            extra = xcalloc(x->n / 2 + 1, sizeof(*extra));
            for (size_t i = 0; i + 1 < x->n; i += 2)
                extra[i / 2] = (struct extmetrics_label){x->v[i], x->v[i + 1]};
            u.extra = extra;
            u.nextra = x->n / 2;
        }
        p->authn_cb(p->status, p->status == 0 ? &u : NULL, p->arg);
        xfree(extra);
    } else {
        p->authz_cb(p->status, p->allowed, p->allowed ? NULL : "no rule allows it", p->arg);
    }
}

static void pending_closed(uv_handle_t *h)
{
    struct pending *p = h->data;
    xfree(p->user);
    xfree(p->group);
    xfree(p);
}

static void on_pending(uv_timer_t *t)
{
    struct pending *p = t->data;
    deliver(p);
    uv_close((uv_handle_t *)t, pending_closed);
}

static void dispatch(struct extmetrics_fake_authorizer *fa, struct pending *p)
{
    if (fa->hold) {
        fa->held = xrealloc(fa->held, (fa->nheld + 1) * sizeof(*fa->held));
        fa->held[fa->nheld++] = p;
        return;
    }
    if (!fa->loop) {
        deliver(p);
        xfree(p->user);
        xfree(p->group);
        xfree(p);
        return;
    }
    uv_timer_init(fa->loop, &p->t);
    p->t.data = p;
    uv_timer_start(&p->t, on_pending, 0, 0);
}

void extmetrics_fake_authorizer_hold(struct extmetrics_fake_authorizer *fa, bool hold)
{
    fa->hold = hold;
    if (hold)
        return;
    struct pending **held = fa->held;
    size_t n = fa->nheld;
    fa->held = NULL;
    fa->nheld = 0;
    for (size_t i = 0; i < n; i++)
        dispatch(fa, held[i]);
    xfree(held);
}

int extmetrics_fake_authorizer_held(const struct extmetrics_fake_authorizer *fa)
{
    return (int)fa->nheld;
}

static int fake_authn(void *impl, const char *token, extmetrics_authn_cb cb, void *arg)
{
    struct extmetrics_fake_authorizer *fa = impl;
    fa->authn_calls++;
    struct pending *p = xcalloc(1, sizeof(*p));
    p->fa = fa;
    p->authn = true;
    p->authn_cb = cb;
    p->arg = arg;
    p->status = -EACCES;
    for (size_t i = 0; i < fa->ntokens; i++) {
        if (strcmp(fa->tokens[i].token, token) == 0) {
            p->status = 0;
            p->user = xstrdup(fa->tokens[i].user);
            p->group = fa->tokens[i].group ? xstrdup(fa->tokens[i].group) : NULL;
            p->token = i;
            break;
        }
    }
    dispatch(fa, p);
    return 0;
}

static bool match(const char *rule, const char *v)
{
    return strcmp(rule, "*") == 0 || (v && strcmp(rule, v) == 0);
}

static int fake_authz(void *impl, const struct extmetrics_user *u,
                      const struct extmetrics_attrs *a, extmetrics_authz_cb cb, void *arg)
{
    struct extmetrics_fake_authorizer *fa = impl;
    fa->authz_calls++;
    xfree(fa->last_review);
    fa->last_review = em_json_dump(extmetrics_sar_new(u, a), NULL);
    struct pending *p = xcalloc(1, sizeof(*p));
    p->fa = fa;
    p->authz_cb = cb;
    p->arg = arg;
    const char *what = a->resource_request ? a->resource : a->path;
    for (size_t i = 0; i < fa->nrules && !p->allowed; i++)
        p->allowed = match(fa->rules[i].user, u->name) && match(fa->rules[i].verb, a->verb) &&
                     match(fa->rules[i].resource, what);
    dispatch(fa, p);
    return 0;
}

static const struct extmetrics_authorizer_ops fake_authorizer_ops = {
    .authenticate_token = fake_authn,
    .authorize = fake_authz,
};

struct extmetrics_authorizer extmetrics_fake_authorizer_get(struct extmetrics_fake_authorizer *fa)
{
    struct extmetrics_authorizer a = {.ops = &fake_authorizer_ops, .impl = fa};
    return a;
}

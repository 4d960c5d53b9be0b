/* SPDX-License-Identifier: Apache-2.0 */
/* kube/selector: metav1.LabelSelector parsing, matching and formatting (pure).
 *
 * Semantics follow apimachinery's LabelSelectorAsSelector: matchLabels and
 * every matchExpression must hold; In needs the key with a listed value,
 * NotIn is satisfied by a missing key or an unlisted value, Exists and
 * DoesNotExist test only the key. An empty selector matches everything, a
 * null one nothing. Label sets are sorted by key, so lookups are binary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube-int.h"

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const struct kube_label *)a)->key, ((const struct kube_label *)b)->key);
}

const char *kube_labels_get(const struct kube_labels *l, const char *key)
{
    if (!l || l->n == 0)
        return NULL;
    struct kube_label k = {.key = key};
    const struct kube_label *hit = bsearch(&k, l->items, l->n, sizeof(k), cmp_label);
    return hit ? hit->value : NULL;
}

void kube_selector_clear(struct kube_selector *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nmatch; i++) {
        xfree((char *)s->match[i].key);
        xfree((char *)s->match[i].value);
    }
    xfree(s->match);
    for (size_t i = 0; i < s->nexprs; i++) {
        xfree(s->exprs[i].key);
        for (size_t j = 0; j < s->exprs[i].nvalues; j++)
            xfree(s->exprs[i].values[j]);
        xfree(s->exprs[i].values);
    }
    xfree(s->exprs);
    *s = (struct kube_selector){0};
}

static int fail(struct kube_selector *s, char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    kube_selector_clear(s);
    s->nothing = true;
    return -EINVAL;
}

int kube_selector_from_json(const json_t *j, struct kube_selector *out, char *err, size_t errlen)
{
    *out = (struct kube_selector){0};
    if (!j || json_is_null(j)) {
        out->nothing = true;
        return 0;
    }
    if (!json_is_object(j))
        return fail(out, err, errlen, "selector is not an object");
    json_t *ml = json_object_get(j, "matchLabels");
    if (ml && !json_is_null(ml)) {
        if (!json_is_object(ml))
            return fail(out, err, errlen, "matchLabels is not an object");
        out->match = xcalloc(json_object_size(ml) + 1, sizeof(*out->match));
        const char *k;
        json_t *v;
        json_object_foreach(ml, k, v) {
            if (!json_is_string(v))
                return fail(out, err, errlen, "matchLabels value is not a string");
            out->match[out->nmatch].key = xstrdup(k);
            out->match[out->nmatch].value = xstrdup(json_string_value(v));
            out->nmatch++;
        }
        qsort(out->match, out->nmatch, sizeof(*out->match), cmp_label);
    }
    json_t *me = json_object_get(j, "matchExpressions");
    if (me && !json_is_null(me)) {
        if (!json_is_array(me))
            return fail(out, err, errlen, "matchExpressions is not an array");
        out->exprs = xcalloc(json_array_size(me) + 1, sizeof(*out->exprs));
        size_t i;
        json_t *e;
        json_array_foreach(me, i, e) {
            json_t *key = json_object_get(e, "key");
            json_t *op = json_object_get(e, "operator");
            json_t *vals = json_object_get(e, "values");
            if (!json_is_string(key) || !json_is_string(op))
                return fail(out, err, errlen, "matchExpression needs string key and operator");
            struct kube_sel_req *r = &out->exprs[out->nexprs++];
            r->key = xstrdup(json_string_value(key));
            const char *o = json_string_value(op);
            if (strcmp(o, "In") == 0)
                r->op = KUBE_SEL_IN;
            else if (strcmp(o, "NotIn") == 0)
                r->op = KUBE_SEL_NOT_IN;
            else if (strcmp(o, "Exists") == 0)
                r->op = KUBE_SEL_EXISTS;
            else if (strcmp(o, "DoesNotExist") == 0)
                r->op = KUBE_SEL_DOES_NOT_EXIST;
            else
                return fail(out, err, errlen, "unknown matchExpression operator");
            size_t nv = json_is_array(vals) ? json_array_size(vals) : 0;
            if (vals && !json_is_null(vals) && !json_is_array(vals))
                return fail(out, err, errlen, "matchExpression values is not an array");
            bool set_op = r->op == KUBE_SEL_IN || r->op == KUBE_SEL_NOT_IN;
            if (set_op && nv == 0)
                return fail(out, err, errlen, "In/NotIn need at least one value");
            if (!set_op && nv > 0)
                return fail(out, err, errlen, "Exists/DoesNotExist take no values");
            r->values = xcalloc(nv + 1, sizeof(*r->values));
            for (size_t k = 0; k < nv; k++) {
                json_t *v = json_array_get(vals, k);
                if (!json_is_string(v))
                    return fail(out, err, errlen, "matchExpression value is not a string");
                r->values[r->nvalues++] = xstrdup(json_string_value(v));
            }
        }
    }
    return 0;
}

static bool in_values(const struct kube_sel_req *r, const char *v)
{
    for (size_t i = 0; i < r->nvalues; i++)
        if (strcmp(r->values[i], v) == 0)
            return true;
    return false;
}

bool kube_selector_matches(const struct kube_selector *s, const struct kube_labels *labels)
{
    if (s->nothing)
        return false;
    for (size_t i = 0; i < s->nmatch; i++) {
        const char *v = kube_labels_get(labels, s->match[i].key);
        if (!v || strcmp(v, s->match[i].value) != 0)
            return false;
    }
    for (size_t i = 0; i < s->nexprs; i++) {
        const struct kube_sel_req *r = &s->exprs[i];
        const char *v = kube_labels_get(labels, r->key);
        switch (r->op) {
        case KUBE_SEL_IN:
            if (!v || !in_values(r, v))
                return false;
            break;
        case KUBE_SEL_NOT_IN:
            if (v && in_values(r, v))
                return false;
            break;
        case KUBE_SEL_EXISTS:
            if (!v)
                return false;
            break;
        case KUBE_SEL_DOES_NOT_EXIST:
            if (v)
                return false;
            break;
        }
    }
    return true;
}

int kube_selector_format(const struct kube_selector *s, struct util_buf *out)
{
    if (s->nothing)
        return -EINVAL;
    bool first = true;
    for (size_t i = 0; i < s->nmatch; i++) {
        util_buf_printf(out, "%s%s=%s", first ? "" : ",", s->match[i].key, s->match[i].value);
        first = false;
    }
    for (size_t i = 0; i < s->nexprs; i++) {
        const struct kube_sel_req *r = &s->exprs[i];
        if (!first)
            util_buf_puts(out, ",");
        first = false;
        switch (r->op) {
        case KUBE_SEL_EXISTS:
            util_buf_puts(out, r->key);
            break;
        case KUBE_SEL_DOES_NOT_EXIST:
            util_buf_printf(out, "!%s", r->key);
            break;
        case KUBE_SEL_IN:
        case KUBE_SEL_NOT_IN:
            util_buf_printf(out, "%s %s (", r->key, r->op == KUBE_SEL_IN ? "in" : "notin");
            for (size_t j = 0; j < r->nvalues; j++)
                util_buf_printf(out, "%s%s", j ? "," : "", r->values[j]);
            util_buf_puts(out, ")");
            break;
        }
    }
    if (!out->data)
        util_buf_puts(out, "");
    return 0;
}

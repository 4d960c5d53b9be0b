/* SPDX-License-Identifier: Apache-2.0 */
/* conf/alias: CONF_GO_YAML's anchors, aliases and merge keys, read as go-yaml
 * v2 reads them (sigs.k8s.io/yaml, client-go's kubeconfig loader).
 *
 * conf.c builds the tree and calls in here for what only this mode has. An
 * anchor is defined when its node starts (an alias inside its own value is an
 * error) and names the node once complete; a later definition of the name
 * hides it. An alias is a deep copy of its anchor's node, and copies are
 * bounded (billion laughs): the whole tree by CONF_MAX_NODES nodes and
 * CONF_MAX_DEPTH levels, the copied text by CONF_MAX_ALIAS_BYTES, and the
 * share of aliased nodes by go-yaml's own rule. A merge key's pairs go
 * through conf_map_set in document order (go-yaml v2: a merged key replaces
 * one written before the `<<`, one written after replaces it; of a list of
 * maps, the first wins). Nothing is freed before the parse ends: replaced
 * values and merged sources wait in the dropped list, so an anchor always
 * points at a live node. Errors have a line and column; nothing here logs. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "conf-int.h"
#include "util/util.h"

void conf_drop(struct conf_builder *b, struct conf_node *n)
{
    if (b->ndropped == b->dropcap) {
        b->dropcap = b->dropcap ? b->dropcap * 2 : 16;
        b->dropped = xrealloc(b->dropped, b->dropcap * sizeof(*b->dropped));
    }
    b->dropped[b->ndropped++] = n;
}

static struct conf_node *copy_node(const struct conf_node *s)
{
    struct conf_node *n = xcalloc(1, sizeof(*n));
    *n = (struct conf_node){.type = s->type, .line = s->line, .col = s->col,
                            .quoted = s->quoted, .n = s->n};
    if (s->type == CONF_SCALAR) {
        n->scalar = xstrdup(s->scalar);
        return n;
    }
    n->items = xcalloc(s->n ? s->n : 1, sizeof(*n->items));
    if (s->type == CONF_MAP) {
        n->keys = xcalloc(s->n ? s->n : 1, sizeof(*n->keys));
        n->key_quoted = xcalloc(s->n ? s->n : 1, sizeof(*n->key_quoted));
    }
    for (size_t i = 0; i < s->n; i++) {
        if (n->keys) {
            n->keys[i] = xstrdup(s->keys[i]);
            n->key_quoted[i] = s->key_quoted && s->key_quoted[i];
        }
        n->items[i] = copy_node(s->items[i]);
    }
    return n;
}

/* The size of a tree as the bounds count it. */
static void measure(const struct conf_node *n, size_t *nodes, size_t *bytes, int *height)
{
    *nodes = 1;
    *bytes = n->type == CONF_SCALAR ? strlen(n->scalar) : 0;
    *height = 0;
    for (size_t i = 0; i < n->n; i++) {
        size_t cn, cb;
        int ch;
        measure(n->items[i], &cn, &cb, &ch);
        *nodes += cn;
        *bytes += cb;
        if (n->keys) {
            *nodes += 1;
            *bytes += strlen(n->keys[i]);
        }
        if (ch > *height)
            *height = ch;
    }
    if (n->type != CONF_SCALAR)
        *height += 1;
}

/* ---- anchors ----------------------------------------------------------------- */

size_t conf_anchor_define(struct conf_builder *b, const yaml_char_t *name)
{
    if (b->nanchors == b->anchorcap) {
        b->anchorcap = b->anchorcap ? b->anchorcap * 2 : 8;
        b->anchors = xrealloc(b->anchors, b->anchorcap * sizeof(*b->anchors));
        b->anchor_names = xrealloc(b->anchor_names, b->anchorcap * sizeof(*b->anchor_names));
    }
    b->anchors[b->nanchors] = (struct conf_anchor){0};
    b->anchor_names[b->nanchors] = xstrdup((const char *)name);
    conf_index_add(&b->anchor_index, b->anchor_names);
    return b->nanchors++;
}

void conf_anchor_set(struct conf_builder *b, size_t i, const struct conf_node *n)
{
    struct conf_anchor *a = &b->anchors[i];
    a->node = n;
    measure(n, &a->nodes, &a->bytes, &a->height);
}

int conf_alias(struct conf_builder *b, const yaml_event_t *ev)
{
    char q[CONF_QUOTE_MAX + 4];
    int line = conf_mark_line(ev->start_mark), col = conf_mark_col(ev->start_mark);
    const char *name = (const char *)ev->data.alias.anchor;
    size_t at = conf_index_get(&b->anchor_index, b->anchor_names, name);
    if (at == SIZE_MAX)
        return conf_fail(b->err, -EINVAL, line, col, "unknown anchor '%s' referenced",
                         conf_quote(name, q));
    const struct conf_anchor *a = &b->anchors[at];
    if (!a->node)
        return conf_fail(b->err, -EINVAL, line, col, "anchor '%s' value contains itself",
                         conf_quote(name, q));
    bool key = conf_wants_key(b);
    if (key && a->node->type != CONF_SCALAR)
        return conf_fail(b->err, -EINVAL, line, col, "map keys must be scalars, not a %s",
                         conf_type_name(a->node->type));
    if (b->depth + a->height > CONF_MAX_DEPTH)
        return conf_fail(b->err, -EINVAL, line, col,
                         "nesting is deeper than %d levels (alias *%s)", CONF_MAX_DEPTH,
                         conf_quote(name, q));
    int rc = conf_count_nodes(b, ev, 1 + a->nodes); /* the alias, then its copy */
    if (rc < 0)
        return rc;
    if (a->bytes > CONF_MAX_ALIAS_BYTES - b->copied)
        return conf_fail(b->err, -EINVAL, line, col, "aliases expand to more than %zu bytes",
                         (size_t)CONF_MAX_ALIAS_BYTES);
    b->copied += a->bytes;
    b->aliased += a->nodes;
    /* go-yaml v2's rule (decoder.unmarshal): past 1,000 nodes, at most 99 % of
     * them from aliases (its lower shares for millions of nodes are past our cap) */
    if (b->aliased > 100 && b->nodes > 1000 && (double)b->aliased / (double)b->nodes > 0.99)
        return conf_fail(b->err, -EINVAL, line, col, "document contains excessive aliasing");
    if (key)
        return conf_take_key(b, ev, xstrdup(a->node->scalar), a->node->quoted,
                             false); /* never the merge key */
    return conf_complete(b, copy_node(a->node), CONF_FROM_ALIAS);
}

/* ---- merge keys ---------------------------------------------------------------- */

/* The pairs of map src into the open map f: moved when nothing else points at
 * src, copied when an anchor may. */
static void merge_map(struct conf_builder *b, struct conf_frame *f, struct conf_node *src,
                      bool copy)
{
    for (size_t i = 0; i < src->n; i++) {
        if (copy) {
            conf_map_set(b, f, xstrdup(src->keys[i]), src->key_quoted[i],
                         copy_node(src->items[i]));
        } else {
            conf_map_set(b, f, src->keys[i], src->key_quoted[i], src->items[i]);
            src->keys[i] = NULL;
            src->items[i] = NULL;
        }
    }
}

int conf_merge(struct conf_builder *b, struct conf_frame *f, struct conf_node *val, int how)
{
    int rc = 0;
    if (val->type == CONF_MAP) {
        merge_map(b, f, val, how & CONF_ANCHORED);
    } else if (val->type == CONF_SEQ && !(how & CONF_FROM_ALIAS)) {
        for (size_t i = 0; i < val->n && rc == 0; i++)
            if (val->items[i]->type != CONF_MAP)
                rc = -EINVAL;
        for (size_t i = val->n; i-- > 0 && rc == 0;)
            merge_map(b, f, val->items[i], true); /* an item may be anchored */
    } else {
        rc = -EINVAL;
    }
    if (rc < 0)
        rc = conf_fail(b->err, -EINVAL, f->key_line, f->key_col,
                       "map merge requires map or sequence of maps as the value");
    conf_drop(b, val);
    return rc;
}

void conf_alias_release(struct conf_builder *b)
{
    for (size_t i = 0; i < b->ndropped; i++)
        conf_free(b->dropped[i]);
    xfree(b->dropped);
    for (size_t i = 0; i < b->nanchors; i++)
        xfree(b->anchor_names[i]);
    xfree(b->anchor_names);
    xfree(b->anchors);
    conf_index_free(&b->anchor_index);
    b->dropped = NULL;
    b->anchors = NULL;
    b->anchor_names = NULL;
    b->ndropped = b->nanchors = 0;
}

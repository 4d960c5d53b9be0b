/* SPDX-License-Identifier: Apache-2.0 */
/* kube/yaml: a kubeconfig's YAML read as client-go reads it (sigs.k8s.io/yaml
 * over go-yaml v2) into pkg/conf's plain tree: anchors and aliases are
 * expanded, merge keys (`<<: *a`, `<<: [*a, *b]`) merged, and a repeated key
 * keeps its last value, as go-yaml's non-strict Unmarshal does; scalars, tags,
 * the single document and the size limits are read as conf_parse() reads them.
 *
 * Built from libyaml's events like pkg/conf, but a node joins its parent only
 * once complete, so that a merge key and a repeated key apply then, in
 * document order (go-yaml v2: a merged key replaces one written before the
 * `<<`, one written after replaces it; of a list of maps, the first wins).
 * Nothing is freed before the end: a value a repeated key replaces, or a
 * merge's source, goes to the dropped list, so an anchor always points at a
 * live node. An alias is a deep copy of its anchor's node, and copies are
 * bounded (billion laughs): the whole tree by CONF_MAX_NODES nodes and
 * CONF_MAX_DEPTH levels, the copied text by KY_MAX_COPY_BYTES, and the share
 * of aliased nodes by go-yaml's own rule. Errors have a line and column;
 * nothing here logs. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "conf/conf.h"
#include "kube-int.h"

/** What aliases and merges may copy, in bytes of keys and scalars. */
#define KY_MAX_COPY_BYTES CONF_MAX_BYTES
#define CORE_PREFIX "tag:yaml.org,2002:"

struct anchor {
    char *name;
    const struct conf_node *node; /* NULL while it is open (its value contains itself) */
    size_t nodes, bytes;          /* of its tree, keys counted */
    int height;                   /* container levels: 0 for a scalar */
};

struct frame {
    struct conf_node *node; /* open: owned by the frame until complete */
    size_t cap;
    struct kmap keys;       /* map: key -> index + 1 */
    char *key;              /* map: the key waiting for its value */
    int key_line, key_col;
    bool merge;             /* that key is the merge key */
    size_t anchor;          /* its anchor's index + 1, or 0 */
};

struct builder {
    struct frame stack[CONF_MAX_DEPTH];
    int depth;
    struct conf_node *root;
    struct conf_node **dropped; /* replaced values, merged sources, anchored keys */
    size_t ndropped, dropcap;
    struct anchor *anchors;
    size_t nanchors, anchorcap;
    struct kmap anchor_index;   /* name -> index + 1 of its latest definition */
    size_t nodes;               /* in the tree, copies included */
    size_t aliased;             /* of them, copied by aliases */
    size_t copied;              /* bytes aliases copied */
    int docs;
    struct conf_error *err;
};

/* how a complete node joins its parent */
#define FROM_ALIAS 1 /* a copy of an anchor's node */
#define ANCHORED 2   /* an anchor points at it: never emptied */

static int fail(struct conf_error *err, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct conf_error *err, int line, int col, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->line = line;
        err->col = col;
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int mline(yaml_mark_t m)
{
    return m.line >= INT_MAX ? INT_MAX : (int)m.line + 1;
}

static int mcol(yaml_mark_t m)
{
    return m.column >= INT_MAX ? INT_MAX : (int)m.column + 1;
}

/* libyaml's error, 1-based (a reader error has only an offset) */
static int yaml_fail(const yaml_parser_t *p, const char *buf, size_t len, struct conf_error *err)
{
    const char *problem = p->problem ? p->problem : "unknown YAML error";
    if (p->error == YAML_READER_ERROR) {
        int line = 1, col = 1;
        for (size_t k = 0; k < p->problem_offset && k < len; k++) {
            col = buf[k] == '\n' ? 1 : col + 1;
            line += buf[k] == '\n';
        }
        return fail(err, line, col, "%s", problem);
    }
    int line = mline(p->problem_mark), col = mcol(p->problem_mark);
    if (p->context)
        return fail(err, line, col, "%s (%s at line %d column %d)", problem, p->context,
                    mline(p->context_mark), mcol(p->context_mark));
    return fail(err, line, col, "%s", problem);
}

/* ---- nodes -------------------------------------------------------------- */

static void drop(struct builder *b, struct conf_node *n)
{
    if (b->ndropped == b->dropcap) {
        b->dropcap = b->dropcap ? b->dropcap * 2 : 16;
        b->dropped = xrealloc(b->dropped, b->dropcap * sizeof(*b->dropped));
    }
    b->dropped[b->ndropped++] = n;
}

/* Takes text. */
static struct conf_node *scalar_node(char *text, bool quoted, int line, int col)
{
    struct conf_node *n = xcalloc(1, sizeof(*n));
    n->type = CONF_SCALAR;
    n->scalar = text;
    n->quoted = quoted;
    n->line = line;
    n->col = col;
    return n;
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
    if (s->type == CONF_MAP)
        n->keys = xcalloc(s->n ? s->n : 1, sizeof(*n->keys));
    for (size_t i = 0; i < s->n; i++) {
        if (n->keys)
            n->keys[i] = xstrdup(s->keys[i]);
        n->items[i] = copy_node(s->items[i]);
    }
    return n;
}

/* The size of a tree as the limits count it. */
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

/* Set key in the open map f to val, replacing (and dropping) an earlier value,
 * as go-yaml's non-strict Unmarshal does. Takes key and val. */
static void map_set(struct builder *b, struct frame *f, char *key, struct conf_node *val)
{
    struct conf_node *m = f->node;
    uintptr_t at = (uintptr_t)kmap_get(&f->keys, key);
    if (at) {
        drop(b, m->items[at - 1]);
        m->items[at - 1] = val;
        xfree(key);
        return;
    }
    if (m->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 4;
        m->items = xrealloc(m->items, f->cap * sizeof(*m->items));
        m->keys = xrealloc(m->keys, f->cap * sizeof(*m->keys));
    }
    m->keys[m->n] = key;
    m->items[m->n] = val;
    m->n++;
    kmap_put(&f->keys, m->keys[m->n - 1], (void *)(uintptr_t)m->n);
}

/* The pairs of map src into the open map f: moved when nothing else points at
 * src, copied when an anchor does. */
static void merge_map(struct builder *b, struct frame *f, struct conf_node *src, bool keep)
{
    for (size_t i = 0; i < src->n; i++) {
        if (keep) {
            map_set(b, f, xstrdup(src->keys[i]), copy_node(src->items[i]));
        } else {
            map_set(b, f, src->keys[i], src->items[i]);
            src->keys[i] = NULL;
            src->items[i] = NULL;
        }
    }
}

/* `<<: value` in the open map f (go-yaml v2's merge): a map, or an inline
 * list of maps of which the first wins. Takes val. */
static int merge(struct builder *b, struct frame *f, struct conf_node *val, int how)
{
    int rc = 0;
    if (val->type == CONF_MAP) {
        merge_map(b, f, val, how & ANCHORED);
    } else if (val->type == CONF_SEQ && !(how & FROM_ALIAS)) {
        for (size_t i = 0; i < val->n && rc == 0; i++)
            if (val->items[i]->type != CONF_MAP)
                rc = -EINVAL;
        for (size_t i = val->n; i-- > 0 && rc == 0;)
            merge_map(b, f, val->items[i], true); /* an item may be anchored */
    } else {
        rc = -EINVAL;
    }
    if (rc < 0)
        rc = fail(b->err, f->key_line, f->key_col,
                  "map merge requires map or sequence of maps as the value");
    drop(b, val);
    return rc;
}

/* A complete node joins the open container, or becomes the root. Takes n. */
static int complete(struct builder *b, struct conf_node *n, int how)
{
    if (b->depth == 0) {
        b->root = n;
        return 0;
    }
    struct frame *f = &b->stack[b->depth - 1];
    struct conf_node *p = f->node;
    if (p->type == CONF_SEQ) {
        if (p->n == f->cap) {
            f->cap = f->cap ? f->cap * 2 : 4;
            p->items = xrealloc(p->items, f->cap * sizeof(*p->items));
        }
        p->items[p->n++] = n;
        return 0;
    }
    char *key = f->key;
    bool is_merge = f->merge;
    f->key = NULL;
    f->merge = false;
    if (!is_merge) {
        map_set(b, f, key, n);
        return 0;
    }
    xfree(key);
    return merge(b, f, n, how);
}

static bool wants_key(const struct builder *b)
{
    if (b->depth == 0)
        return false;
    const struct frame *f = &b->stack[b->depth - 1];
    return f->node->type == CONF_MAP && !f->key;
}

/* ---- anchors ------------------------------------------------------------- */

/* Define name (a later definition hides an earlier one); its index. */
static size_t anchor_define(struct builder *b, const yaml_char_t *name)
{
    if (b->nanchors == b->anchorcap) {
        b->anchorcap = b->anchorcap ? b->anchorcap * 2 : 8;
        b->anchors = xrealloc(b->anchors, b->anchorcap * sizeof(*b->anchors));
    }
    struct anchor *a = &b->anchors[b->nanchors];
    *a = (struct anchor){.name = xstrdup((const char *)name)};
    kmap_put(&b->anchor_index, a->name, (void *)(uintptr_t)(b->nanchors + 1));
    return b->nanchors++;
}

static void anchor_set(struct builder *b, size_t i, const struct conf_node *n)
{
    struct anchor *a = &b->anchors[i];
    a->node = n;
    measure(n, &a->nodes, &a->bytes, &a->height);
}

/* ---- events --------------------------------------------------------------- */

static bool tag_is(const yaml_char_t *tag, const char *name)
{
    return tag && strncmp((const char *)tag, CORE_PREFIX, sizeof(CORE_PREFIX) - 1) == 0 &&
           strcmp((const char *)tag + sizeof(CORE_PREFIX) - 1, name) == 0;
}

/* conf's tags: the core ones only (and !!merge on a merge key, checked by the caller) */
static int check_tag(struct builder *b, const yaml_event_t *ev, const yaml_char_t *tag)
{
    static const char *const core[] = {"str", "int", "float", "bool", "null", "map", "seq"};
    if (!tag)
        return 0;
    for (size_t k = 0; k < UTIL_ARRAY_LEN(core); k++)
        if (tag_is(tag, core[k]))
            return 0;
    const char *t = (const char *)tag;
    bool is_core = strncmp(t, CORE_PREFIX, sizeof(CORE_PREFIX) - 1) == 0;
    return fail(b->err, mline(ev->start_mark), mcol(ev->start_mark),
                "tag '%s%.60s' is not supported", is_core ? "!!" : "",
                is_core ? t + sizeof(CORE_PREFIX) - 1 : t);
}

static int count_nodes(struct builder *b, const yaml_event_t *ev, size_t n)
{
    if (n > CONF_MAX_NODES - b->nodes)
        return fail(b->err, mline(ev->start_mark), mcol(ev->start_mark),
                    "document has more than %d nodes%s", CONF_MAX_NODES,
                    b->aliased ? " (aliases expanded)" : "");
    b->nodes += n;
    return 0;
}

static int on_scalar(struct builder *b, const yaml_event_t *ev)
{
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const yaml_char_t *tag = ev->data.scalar.tag;
    int line = mline(ev->start_mark), col = mcol(ev->start_mark);
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    bool key = wants_key(b);
    bool is_merge = key && len == 2 && memcmp(v, "<<", 2) == 0 &&
                    ((plain && !tag) || tag_is(tag, "merge"));
    int rc = is_merge ? 0 : check_tag(b, ev, tag);
    if (rc == 0)
        rc = count_nodes(b, ev, 1);
    if (rc < 0)
        return rc;
    if (memchr(v, '\0', len))
        return fail(b->err, line, col, "NUL character in a scalar");
    if (plain && (!tag || tag_is(tag, "null")) &&
        (strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
         strcmp(v, "NULL") == 0))
        len = 0;
    char *text = xstrndup(v, len);
    bool quoted = !plain || tag_is(tag, "str");
    if (key) {
        struct frame *f = &b->stack[b->depth - 1];
        if (ev->data.scalar.anchor) {
            struct conf_node *a = scalar_node(xstrdup(text), quoted, line, col);
            drop(b, a); /* kept for the aliases */
            anchor_set(b, anchor_define(b, ev->data.scalar.anchor), a);
        }
        f->key = text;
        f->key_line = line;
        f->key_col = col;
        f->merge = is_merge;
        return 0;
    }
    struct conf_node *n = scalar_node(text, quoted, line, col);
    if (ev->data.scalar.anchor)
        anchor_set(b, anchor_define(b, ev->data.scalar.anchor), n);
    return complete(b, n, ev->data.scalar.anchor ? ANCHORED : 0);
}

static int on_start(struct builder *b, const yaml_event_t *ev, enum conf_type type)
{
    int line = mline(ev->start_mark), col = mcol(ev->start_mark);
    const yaml_char_t *anchor = type == CONF_MAP ? ev->data.mapping_start.anchor
                                                 : ev->data.sequence_start.anchor;
    const yaml_char_t *tag = type == CONF_MAP ? ev->data.mapping_start.tag
                                              : ev->data.sequence_start.tag;
    int rc = check_tag(b, ev, tag);
    if (rc == 0)
        rc = count_nodes(b, ev, 1);
    if (rc < 0)
        return rc;
    if (wants_key(b))
        return fail(b->err, line, col, "map keys must be scalars, not a %s", conf_type_name(type));
    if (b->depth == CONF_MAX_DEPTH)
        return fail(b->err, line, col, "nesting is deeper than %d levels", CONF_MAX_DEPTH);
    struct conf_node *n = xcalloc(1, sizeof(*n));
    n->type = type;
    n->line = line;
    n->col = col;
    b->stack[b->depth++] = (struct frame){
        .node = n, .anchor = anchor ? anchor_define(b, anchor) + 1 : 0};
    return 0;
}

static int on_end(struct builder *b)
{
    /* libyaml pairs start and end, and never ends a map with a key pending */
    struct frame f = b->stack[--b->depth];
    kmap_free(&f.keys);
    xfree(f.key);
    if (f.anchor)
        anchor_set(b, f.anchor - 1, f.node);
    return complete(b, f.node, f.anchor ? ANCHORED : 0);
}

static int on_alias(struct builder *b, const yaml_event_t *ev)
{
    int line = mline(ev->start_mark), col = mcol(ev->start_mark);
    const char *name = (const char *)ev->data.alias.anchor;
    uintptr_t at = (uintptr_t)kmap_get(&b->anchor_index, name);
    if (!at)
        return fail(b->err, line, col, "unknown anchor '%.60s' referenced", name);
    const struct anchor *a = &b->anchors[at - 1];
    if (!a->node)
        return fail(b->err, line, col, "anchor '%.60s' value contains itself", name);
    bool key = wants_key(b);
    if (key && a->node->type != CONF_SCALAR)
        return fail(b->err, line, col, "map keys must be scalars, not a %s",
                    conf_type_name(a->node->type));
    if (b->depth + a->height > CONF_MAX_DEPTH)
        return fail(b->err, line, col, "nesting is deeper than %d levels (alias *%.60s)",
                    CONF_MAX_DEPTH, name);
    int rc = count_nodes(b, ev, 1 + a->nodes); /* the alias, then its copy */
    if (rc < 0)
        return rc;
    if (a->bytes > KY_MAX_COPY_BYTES - b->copied)
        return fail(b->err, line, col, "aliases expand to more than %zu bytes",
                    (size_t)KY_MAX_COPY_BYTES);
    b->copied += a->bytes;
    b->aliased += a->nodes;
    /* go-yaml v2's rule (decoder.unmarshal): past 1,000 nodes, at most 99 % of
     * them from aliases (its lower shares for millions of nodes are past our cap) */
    if (b->aliased > 100 && b->nodes > 1000 && (double)b->aliased / (double)b->nodes > 0.99)
        return fail(b->err, line, col, "document contains excessive aliasing");
    if (key) {
        struct frame *f = &b->stack[b->depth - 1];
        f->key = xstrdup(a->node->scalar);
        f->key_line = line;
        f->key_col = col;
        f->merge = false; /* an alias is never the merge key */
        return 0;
    }
    return complete(b, copy_node(a->node), FROM_ALIAS);
}

/* 1 when the stream has ended, 0 to go on, or an error */
static int on_event(struct builder *b, const yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_STREAM_END_EVENT:
        return 1;
    case YAML_DOCUMENT_START_EVENT:
        if (b->docs++ > 0)
            return fail(b->err, mline(ev->start_mark), mcol(ev->start_mark),
                        "only one YAML document is supported (a second one starts here)");
        return 0;
    case YAML_ALIAS_EVENT:
        return on_alias(b, ev);
    case YAML_SCALAR_EVENT:
        return on_scalar(b, ev);
    case YAML_SEQUENCE_START_EVENT:
        return on_start(b, ev, CONF_SEQ);
    case YAML_MAPPING_START_EVENT:
        return on_start(b, ev, CONF_MAP);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return on_end(b);
    default: /* stream start, document end */
        return 0;
    }
}

int kube_yaml_parse(const char *buf, size_t len, struct conf_node **out, struct conf_error *err)
{
    struct builder b = {.err = err};
    yaml_parser_t parser;
    bool ready = false;
    int rc = 0;
    *out = NULL;
    if (len > CONF_MAX_BYTES) {
        rc = fail(err, 0, 0, "document is %zu bytes; the limit is %zu", len,
                  (size_t)CONF_MAX_BYTES);
        goto out;
    }
    if (!yaml_parser_initialize(&parser)) {
        rc = fail(err, 0, 0, "YAML parser: out of memory");
        goto out;
    }
    ready = true;
    yaml_parser_set_input_string(&parser, (const unsigned char *)(len ? buf : ""), len);
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = yaml_fail(&parser, buf, len, err);
            goto out;
        }
        rc = on_event(&b, &ev);
        yaml_event_delete(&ev);
        if (rc < 0)
            goto out;
        if (rc == 1)
            break;
    }
    rc = 0;
    struct conf_node *root = b.root;
    b.root = NULL;
    if (root && root->type == CONF_SCALAR && !root->quoted && root->scalar[0] == '\0') {
        conf_free(root); /* "---" alone, "~", only comments */
        root = NULL;
    }
    if (!root) {
        root = xcalloc(1, sizeof(*root));
        root->type = CONF_MAP;
        root->line = 1;
        root->col = 1;
    }
    *out = root;
out:
    while (b.depth > 0) {
        struct frame *f = &b.stack[--b.depth];
        kmap_free(&f->keys);
        xfree(f->key);
        conf_free(f->node);
    }
    conf_free(b.root);
    for (size_t i = 0; i < b.ndropped; i++)
        conf_free(b.dropped[i]);
    xfree(b.dropped);
    for (size_t i = 0; i < b.nanchors; i++)
        xfree(b.anchors[i].name);
    xfree(b.anchors);
    kmap_free(&b.anchor_index);
    if (ready)
        yaml_parser_delete(&parser);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* conf-int: the tree builder's state, shared by conf.c (libyaml events,
 * scalars, tags, limits, errors) and alias.c (CONF_GO_YAML's anchors, aliases
 * and merge keys). No other module includes this file.
 *
 * A node joins its parent only once complete (a scalar at once, a container
 * at its end event); until then an open container is owned by its stack
 * frame. Nothing is freed before the parse ends: a value a repeated key
 * replaces, or a merge's source, goes to the builder's dropped list, so an
 * anchor always points at a live node. */
#ifndef GPUSCALER_CONF_INT_H
#define GPUSCALER_CONF_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "conf/conf.h"

/** Offending text (keys, tags, anchor names) is quoted up to this many bytes. */
#define CONF_QUOTE_MAX 60

/** Strings by index: open addressing over names[0..count), a slot holding an
 *  index + 1; a name added again hides the earlier one. */
struct conf_index {
    size_t *slots;
    size_t cap;
    size_t count;
};

struct conf_frame {
    struct conf_node *node; /* open container, owned by the frame until its end */
    size_t cap;             /* allocated slots in node->items (and keys) */
    char *key;              /* map: the key waiting for its value, owned */
    bool key_quoted;        /* ... written quoted */
    int key_line, key_col;
    bool merge;             /* that key is the merge key (CONF_GO_YAML) */
    int *key_lines;         /* map: line of each key, for duplicate messages */
    struct conf_index keys; /* map: over node->keys */
    size_t anchor;          /* its anchor's index + 1, or 0 */
};

struct conf_anchor {
    const struct conf_node *node; /* NULL while open (its value would contain itself) */
    size_t nodes, bytes;          /* of its tree, keys counted */
    int height;                   /* container levels: 0 for a scalar */
};

struct conf_builder {
    struct conf_frame stack[CONF_MAX_DEPTH];
    int depth;
    struct conf_node *root;
    size_t nodes;  /* in the tree, alias copies included */
    int docs;
    bool go_yaml;  /* CONF_GO_YAML */
    bool (*key_typed)(const char *plain); /* conf_opts.key_typed, with go_yaml */
    struct conf_error *err;
    /* CONF_GO_YAML (alias.c) */
    struct conf_node **dropped; /* replaced values, merged sources, anchored keys */
    size_t ndropped, dropcap;
    struct conf_anchor *anchors;
    char **anchor_names;        /* beside anchors */
    size_t nanchors, anchorcap;
    struct conf_index anchor_index;
    size_t aliased;             /* nodes copied by aliases */
    size_t copied;              /* bytes copied by aliases */
};

/* how a complete node joins its parent */
#define CONF_FROM_ALIAS 1 /* a copy of an anchor's node */
#define CONF_ANCHORED 2   /* an anchor points at it: its pairs are copied, never moved */

static inline int conf_mark_line(yaml_mark_t m)
{
    return m.line >= INT_MAX ? INT_MAX : (int)m.line + 1;
}

static inline int conf_mark_col(yaml_mark_t m)
{
    return m.column >= INT_MAX ? INT_MAX : (int)m.column + 1;
}

/* ---- conf.c ------------------------------------------------------------------ */

/** Fill err (when not NULL) and return rc. */
int conf_fail(struct conf_error *err, int rc, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/** s quoted for a message (control bytes '?', "..." past CONF_QUOTE_MAX); out
 *  holds CONF_QUOTE_MAX + 4 bytes. */
const char *conf_quote(const char *s, char *out);

/** Index of key among names, or SIZE_MAX. */
size_t conf_index_get(const struct conf_index *ix, char *const *names, const char *key);
/** Index names[ix->count], which the caller has just stored. */
void conf_index_add(struct conf_index *ix, char *const *names);
void conf_index_free(struct conf_index *ix);

/** Count n more nodes at ev; -EINVAL past CONF_MAX_NODES. */
int conf_count_nodes(struct conf_builder *b, const yaml_event_t *ev, size_t n);
/** The innermost open container is a map waiting for a key. */
bool conf_wants_key(const struct conf_builder *b);
/** key (taken) is the pending key of the innermost map, from ev. */
int conf_take_key(struct conf_builder *b, const yaml_event_t *ev, char *key, bool quoted,
                  bool merge);
/** Set key (taken) in the open map f to val (taken); a value already there
 *  is replaced and dropped (only CONF_GO_YAML lets a key repeat). */
void conf_map_set(struct conf_builder *b, struct conf_frame *f, char *key, bool quoted,
                  struct conf_node *val);
/** n (taken), complete, joins the innermost container or becomes the root;
 *  how: CONF_FROM_ALIAS, CONF_ANCHORED. */
int conf_complete(struct conf_builder *b, struct conf_node *n, int how);

/* ---- alias.c (CONF_GO_YAML) -------------------------------------------------- */

/** Keep n (taken) until the parse ends. */
void conf_drop(struct conf_builder *b, struct conf_node *n);
/** Define anchor name, still open; its index. */
size_t conf_anchor_define(struct conf_builder *b, const yaml_char_t *name);
/** Anchor i now names n, complete. */
void conf_anchor_set(struct conf_builder *b, size_t i, const struct conf_node *n);
/** An alias event: a copy of its anchor's node, within the bounds. */
int conf_alias(struct conf_builder *b, const yaml_event_t *ev);
/** `<<: val` in the open map f (val taken; how as for conf_complete). */
int conf_merge(struct conf_builder *b, struct conf_frame *f, struct conf_node *val, int how);
/** Free the dropped nodes and the anchors. */
void conf_alias_release(struct conf_builder *b);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* conf: YAML documents (config file, simulator policy file, kubeconfig) parsed
 * with libyaml into a small read-only tree that remembers line numbers.
 *
 * The tree is plain data so that the modules that interpret it never see
 * libyaml. Limits keep hostile input cheap: document size, nesting depth and
 * node count are capped; tags other than the core ones and a core tag that
 * does not fit its node (`!!null 2`, `!!int x`, `!!seq` on a map) are errors;
 * only the first document of a stream is read (a second one is an error). By
 * default anchors/aliases and duplicate keys are errors too; CONF_GO_YAML
 * reads them as go-yaml v2 does (a kubeconfig, as client-go reads it). */
#ifndef GPUSCALER_CONF_H
#define GPUSCALER_CONF_H

#include <stdbool.h>
#include <stddef.h>

#define CONF_MAX_BYTES ((size_t)4 << 20)
#define CONF_MAX_DEPTH 64
#define CONF_MAX_NODES 200000

enum conf_type { CONF_SCALAR, CONF_MAP, CONF_SEQ };

struct conf_node {
    enum conf_type type;
    int line;                 /**< 1-based line where the node starts */
    int col;                  /**< 1-based column */
    char *scalar;             /**< CONF_SCALAR: the value ("" for null/empty) */
    bool quoted;              /**< CONF_SCALAR: written in quotes */
    size_t n;                 /**< CONF_MAP: pairs; CONF_SEQ: items */
    char **keys;              /**< CONF_MAP: n keys */
    /** CONF_MAP: n flags, key i written quoted (or tagged !!str); a plain
     *  key of text "" was a null (`~`, `null`, empty). NULL: none recorded. */
    bool *key_quoted;
    struct conf_node **items; /**< CONF_MAP: values; CONF_SEQ: items */
};

struct conf_error {
    int line;                 /**< 1-based, 0 when unknown */
    int col;
    char msg[240];
};

/**
 * Parse a YAML buffer. An empty document gives an empty map. On success *out
 * owns a tree (free with conf_free). On error returns -EINVAL (syntax, limits,
 * aliases, duplicate keys) and fills err; *out is set to NULL.
 */
int conf_parse(const char *buf, size_t len, struct conf_node **out, struct conf_error *err);

/** conf_opts.flags: read as go-yaml v2's non-strict Unmarshal (sigs.k8s.io/yaml,
 *  client-go's kubeconfig loader) reads YAML. An alias is a copy of its
 *  anchor's node, with the anchored node's positions (an anchor defined again
 *  hides the earlier one from the aliases after it); a merge key `<<` (plain,
 *  or tagged !!merge) takes the pairs of a map or of an inline sequence of maps
 *  (of those, the first that has a key wins), in document order: a merged key
 *  replaces one written before the `<<`, one written after replaces it; a
 *  repeated key keeps its last value. Aliases are bounded: the whole tree,
 *  copies included, by CONF_MAX_NODES nodes and CONF_MAX_DEPTH levels, the
 *  text they copy by CONF_MAX_ALIAS_BYTES, and past 1,000 nodes at most 99 %
 *  of them may come from aliases (go-yaml's rule, "document contains
 *  excessive aliasing"). */
#define CONF_GO_YAML 0x1u
/** With CONF_GO_YAML: bytes of keys and scalars aliases may copy in all. */
#define CONF_MAX_ALIAS_BYTES CONF_MAX_BYTES

struct conf_opts {
    unsigned flags; /**< CONF_GO_YAML, or 0 for conf_parse's reading */
    /** With CONF_GO_YAML (else unused; NULL: no key is typed): whether go-yaml
     *  makes a plain key of this text something other than a string (a bool,
     *  number or null). Such a key and the quoted key of the same text are two
     *  keys (`on: 1` and `'on': 2` both stay, in document order), each
     *  replaced by a later key of its own kind; conf_map_get finds the first. */
    bool (*key_typed)(const char *plain);
};

/**
 * conf_parse with options (opts NULL: as conf_parse). Scalars, tags, the
 * single document, limits and error texts are conf_parse's in every mode.
 * Returns 0 with *out owning the tree (free with conf_free), or -EINVAL (with
 * CONF_GO_YAML also an unknown anchor, an alias inside its anchor's own value,
 * a merge of something not a map, an alias past the bounds) or -ENOMEM (libyaml
 * out of memory) with err filled and *out NULL. Pure: reads buf, never logs.
 */
int conf_parse_opts(const char *buf, size_t len, const struct conf_opts *opts,
                    struct conf_node **out, struct conf_error *err);

/** Read and parse a file; -errno on I/O errors (with the message in err). */
int conf_load_file(const char *path, struct conf_node **out, struct conf_error *err);

void conf_free(struct conf_node *n);

/** Value of key in a map, or NULL (also when map is NULL or not a map). */
const struct conf_node *conf_map_get(const struct conf_node *map, const char *key);

/** A node as one value (owned, xfree): a scalar as it is, a sequence of
 *  scalars joined with commas ("1,2,3"); NULL for anything else. */
char *conf_node_joined(const struct conf_node *n);

/** "scalar", "map" or "sequence" (for error messages). */
const char *conf_type_name(enum conf_type t);

#endif

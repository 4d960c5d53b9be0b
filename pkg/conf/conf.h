/* SPDX-License-Identifier: Apache-2.0 */
/* conf: YAML documents (config file, simulator policy file, kubeconfig) parsed
 * with libyaml into a small read-only tree that remembers line numbers.
 *
 * The tree is plain data so that the modules that interpret it never see
 * libyaml. Limits keep hostile input cheap: document size, nesting depth and
 * node count are capped; anchors/aliases, tags other than the core ones, a
 * core tag that does not fit its node (`!!null 2`, `!!int x`, `!!seq` on a
 * map) and duplicate keys are errors; only the first document of a stream is
 * read (a second one is an error). */
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

/** Read and parse a file; -errno on I/O errors (with the message in err). */
int conf_load_file(const char *path, struct conf_node **out, struct conf_error *err);

void conf_free(struct conf_node *n);

/** Value of key in a map, or NULL (also when map is NULL or not a map). */
const struct conf_node *conf_map_get(const struct conf_node *map, const char *key);

/** "scalar", "map" or "sequence" (for error messages). */
const char *conf_type_name(enum conf_type t);

#endif

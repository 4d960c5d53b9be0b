/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for conf_parse: any input must give a well-formed tree or
 * an error with a message; a tree must respect the documented limits, have
 * 1-based positions, no duplicate keys, and answer conf_map_get for every key. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-conf: invariant violated: %s\n", what);
        abort();
    }
}

static void walk(const struct conf_node *n, int depth, size_t *count)
{
    ++*count;
    check(depth <= CONF_MAX_DEPTH || n->type == CONF_SCALAR, "depth within the limit");
    check(n->line >= 1 && n->col >= 1, "positions are 1-based");
    switch (n->type) {
    case CONF_SCALAR:
        check(n->scalar != NULL && n->n == 0 && !n->items && !n->keys, "scalar shape");
        return;
    case CONF_SEQ:
        check(!n->scalar && !n->keys && (n->n == 0 || n->items), "sequence shape");
        break;
    case CONF_MAP:
        check(!n->scalar && (n->n == 0 || (n->items && n->keys)), "map shape");
        for (size_t k = 0; k < n->n && k < 64; k++) {
            check(n->keys[k] != NULL, "keys set");
            check(conf_map_get(n, n->keys[k]) == n->items[k], "keys are unique");
            *count += 1;
        }
        break;
    default:
        check(0, "known type");
    }
    for (size_t k = 0; k < n->n; k++) {
        check(n->items[k] != NULL, "items set");
        walk(n->items[k], depth + 1, count);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct conf_node *root = NULL;
    struct conf_error err;
    memset(&err, 0x55, sizeof(err));
    int rc = conf_parse((const char *)data, size, &root, &err);
    if (rc != 0) {
        check(root == NULL, "*out NULL on error");
        check(memchr(err.msg, '\0', sizeof(err.msg)) != NULL && err.msg[0] != '\0',
              "error message set");
        check(err.line >= 0 && err.col >= 0, "error position");
        return 0;
    }
    size_t count = 0;
    walk(root, 1, &count);
    check(count <= 2 * (size_t)CONF_MAX_NODES + 1, "node count bounded");
    conf_free(root);
    return 0;
}

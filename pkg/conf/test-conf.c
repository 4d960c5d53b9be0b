/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for conf: tree shape and positions, scalar styles, real document
 * shapes (kubeconfig, gpuscaler config), every rejection with its line, the
 * limits, the file loader, and CONF_GO_YAML's anchors, aliases, merge keys,
 * repeated keys and alias bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <unistd.h>

#include "conf/conf.h"
#include "util/util.h"

static const struct conf_opts go_yaml = {.flags = CONF_GO_YAML};

static bool on_typed(const char *plain)
{
    return strcmp(plain, "on") == 0;
}

static struct conf_node *parse_opts_ok(const char *yaml, const struct conf_opts *opts)
{
    struct conf_node *n = NULL;
    struct conf_error err = {0};
    int rc = conf_parse_opts(yaml, strlen(yaml), opts, &n, &err);
    if (rc != 0)
        fail_msg("parse failed rc=%d at %d:%d: %s\n--- input:\n%s", rc, err.line, err.col,
                 err.msg, yaml);
    assert_non_null(n);
    return n;
}

static struct conf_node *parse_ok(const char *yaml)
{
    return parse_opts_ok(yaml, NULL);
}

/* Follow a path of map keys; each must exist. */
static const struct conf_node *get(const struct conf_node *n, const char *key)
{
    const struct conf_node *v = conf_map_get(n, key);
    if (!v)
        fail_msg("key '%s' missing", key);
    return v;
}

static void assert_scalar(const struct conf_node *n, const char *value, bool quoted, int line,
                          int col)
{
    assert_non_null(n);
    assert_int_equal(n->type, CONF_SCALAR);
    assert_string_equal(n->scalar, value);
    assert_int_equal(n->quoted, quoted);
    if (n->line != line || n->col != col)
        fail_msg("'%s' at %d:%d, want %d:%d", value, n->line, n->col, line, col);
}

/* ---- shapes -------------------------------------------------------------------- */

static void test_nested(void **state)
{
    (void)state;
    struct conf_node *root = parse_ok("a:\n"
                                      "  b:\n"
                                      "    - 1\n"
                                      "    - x: y\n"
                                      "      z: [p, \"q\"]\n"
                                      "  c: {d: e}\n"
                                      "top: plain # comment\n");
    assert_int_equal(root->type, CONF_MAP);
    assert_int_equal(root->n, 2);
    assert_string_equal(root->keys[0], "a");
    assert_string_equal(root->keys[1], "top");
    const struct conf_node *a = get(root, "a");
    assert_int_equal(a->type, CONF_MAP);
    assert_int_equal(a->line, 2);
    assert_int_equal(a->col, 3);
    const struct conf_node *b = get(a, "b");
    assert_int_equal(b->type, CONF_SEQ);
    assert_int_equal(b->n, 2);
    assert_null(b->keys);
    assert_scalar(b->items[0], "1", false, 3, 7);
    const struct conf_node *item = b->items[1];
    assert_int_equal(item->type, CONF_MAP);
    assert_int_equal(item->line, 4);
    assert_scalar(get(item, "x"), "y", false, 4, 10);
    const struct conf_node *z = get(item, "z");
    assert_int_equal(z->type, CONF_SEQ);
    assert_int_equal(z->n, 2);
    assert_scalar(z->items[0], "p", false, 5, 11);
    assert_scalar(z->items[1], "q", true, 5, 14);
    const struct conf_node *c = get(a, "c");
    assert_int_equal(c->type, CONF_MAP);
    assert_scalar(get(c, "d"), "e", false, 6, 10);
    assert_scalar(get(root, "top"), "plain", false, 7, 6);
    assert_null(conf_map_get(root, "missing"));
    assert_null(conf_map_get(b, "x")); /* not a map */
    assert_null(conf_map_get(NULL, "x"));
    conf_free(root);
}

static void test_kubeconfig(void **state)
{
    (void)state;
    struct conf_node *root = parse_ok(
        "apiVersion: v1\n"
        "kind: Config\n"
        "current-context: dev\n"
        "clusters:\n"
        "- cluster:\n"
        "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=\n"
        "    server: https://10.0.0.1:6443\n"
        "  name: dev-cluster\n"
        "- cluster:\n"
        "    insecure-skip-tls-verify: true\n"
        "    server: \"https://prod.example:443\"\n"
        "  name: prod\n"
        "contexts:\n"
        "- context:\n"
        "    cluster: dev-cluster\n"
        "    namespace: ml\n"
        "    user: dev-user\n"
        "  name: dev\n"
        "users:\n"
        "- name: dev-user\n"
        "  user:\n"
        "    client-certificate-data: Y2VydA==\n"
        "    client-key-data: a2V5\n"
        "- name: token-user\n"
        "  user:\n"
        "    token: 'eyJhbGciOi.J9'\n"
        "preferences: {}\n");
    assert_scalar(get(root, "current-context"), "dev", false, 3, 18);
    const struct conf_node *clusters = get(root, "clusters");
    assert_int_equal(clusters->type, CONF_SEQ);
    assert_int_equal(clusters->n, 2);
    const struct conf_node *c0 = get(clusters->items[0], "cluster");
    assert_scalar(get(c0, "certificate-authority-data"),
                  "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=", false, 6, 33);
    assert_scalar(get(c0, "server"), "https://10.0.0.1:6443", false, 7, 13);
    assert_scalar(get(clusters->items[0], "name"), "dev-cluster", false, 8, 9);
    const struct conf_node *c1 = get(clusters->items[1], "cluster");
    assert_scalar(get(c1, "insecure-skip-tls-verify"), "true", false, 10, 31);
    assert_scalar(get(c1, "server"), "https://prod.example:443", true, 11, 13);
    const struct conf_node *ctx = get(get(root, "contexts")->items[0], "context");
    assert_scalar(get(ctx, "namespace"), "ml", false, 16, 16);
    const struct conf_node *users = get(root, "users");
    assert_int_equal(users->n, 2);
    assert_scalar(get(get(users->items[0], "user"), "client-key-data"), "a2V5", false, 23, 22);
    assert_scalar(get(get(users->items[1], "user"), "token"), "eyJhbGciOi.J9", true, 26, 12);
    const struct conf_node *prefs = get(root, "preferences");
    assert_int_equal(prefs->type, CONF_MAP);
    assert_int_equal(prefs->n, 0);
    conf_free(root);
}

static void test_gpuscaler_config(void **state)
{
    (void)state;
    struct conf_node *root = parse_ok(
        "decision-interval: 15s\n"
        "namespaces: [ml, serving]\n"
        "log: {format: json, level: info}\n"
        "defaults: {capacity-per-gpu: \"10\", target-utilization: \"0.8\"}\n"
        "leader-election: {enabled: true, namespace: gpuscaler, lease-name: gpuscaler}\n");
    assert_scalar(get(root, "decision-interval"), "15s", false, 1, 20);
    const struct conf_node *ns = get(root, "namespaces");
    assert_int_equal(ns->type, CONF_SEQ);
    assert_int_equal(ns->n, 2);
    assert_scalar(ns->items[1], "serving", false, 2, 18);
    assert_scalar(get(get(root, "log"), "level"), "info", false, 3, 28);
    assert_scalar(get(get(root, "defaults"), "target-utilization"), "0.8", true, 4, 56);
    assert_scalar(get(get(root, "leader-election"), "enabled"), "true", false, 5, 28);
    conf_free(root);
}

static void test_scalar_styles(void **state)
{
    (void)state;
    struct conf_node *root = parse_ok("a: \"10\"\n"
                                      "b: 10\n"
                                      "c: '~'\n"
                                      "d: ~\n"
                                      "e:\n"
                                      "f: null\n"
                                      "g: |\n"
                                      "  two\n"
                                      "  lines\n"
                                      "h: !!str 5\n"
                                      "i: \"tab\\there\"\n"
                                      "j: 'it''s'\n"
                                      "k: NULL\n"
                                      "l: nullish\n"
                                      "m: \"\"\n"
                                      "n: !!int 3\n");
    assert_scalar(get(root, "a"), "10", true, 1, 4);
    assert_scalar(get(root, "b"), "10", false, 2, 4);
    assert_scalar(get(root, "c"), "~", true, 3, 4);
    assert_scalar(get(root, "d"), "", false, 4, 4);
    assert_int_equal(get(root, "e")->type, CONF_SCALAR);
    assert_string_equal(get(root, "e")->scalar, "");
    assert_false(get(root, "e")->quoted);
    assert_scalar(get(root, "f"), "", false, 6, 4);
    assert_scalar(get(root, "g"), "two\nlines\n", true, 7, 4);
    assert_scalar(get(root, "h"), "5", true, 10, 4);
    assert_scalar(get(root, "i"), "tab\there", true, 11, 4);
    assert_scalar(get(root, "j"), "it's", true, 12, 4);
    assert_scalar(get(root, "k"), "", false, 13, 4);
    assert_scalar(get(root, "l"), "nullish", false, 14, 4);
    assert_scalar(get(root, "m"), "", true, 15, 4);
    assert_scalar(get(root, "n"), "3", false, 16, 4);
    conf_free(root);
}

static void test_empty_and_other_roots(void **state)
{
    (void)state;
    static const char *const empties[] = {"", "# only a comment\n", "---\n", "~\n", "\n\n",
                                          "--- # c\n...\n"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(empties); i++) {
        struct conf_node *n = parse_ok(empties[i]);
        assert_int_equal(n->type, CONF_MAP);
        assert_int_equal(n->n, 0);
        conf_free(n);
    }
    struct conf_node *n = parse_ok("hello\n");
    assert_scalar(n, "hello", false, 1, 1);
    conf_free(n);
    n = parse_ok("\"\"\n"); /* a quoted empty string is a value, not an empty document */
    assert_scalar(n, "", true, 1, 1);
    conf_free(n);
    n = parse_ok("---\n- a\n- b\n...\n");
    assert_int_equal(n->type, CONF_SEQ);
    assert_int_equal(n->n, 2);
    conf_free(n);
    conf_free(NULL);
    assert_string_equal(conf_type_name(CONF_SEQ), "sequence");
    assert_string_equal(conf_type_name(CONF_MAP), "map");
    assert_string_equal(conf_type_name(CONF_SCALAR), "scalar");
}

/* ---- rejections ------------------------------------------------------------------- */

static void expect_error_opts(const char *yaml, size_t len, const struct conf_opts *opts,
                              int line, int col, const char *msg)
{
    static struct conf_node sentinel;
    struct conf_node *n = &sentinel; /* must be reset to NULL */
    struct conf_error err = {0};
    int rc = opts ? conf_parse_opts(yaml, len, opts, &n, &err) : conf_parse(yaml, len, &n, &err);
    if (rc != -EINVAL || err.line != line || (col && err.col != col) || !strstr(err.msg, msg))
        fail_msg("rc=%d at %d:%d '%s'; want -EINVAL at %d:%d '%s'\n--- input:\n%s", rc, err.line,
                 err.col, err.msg, line, col, msg, yaml);
    assert_null(n);
}

static void expect_error(const char *yaml, size_t len, int line, int col, const char *msg)
{
    expect_error_opts(yaml, len, NULL, line, col, msg);
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int line, col; /* col 0: not checked */
        const char *msg;
    } cases[] = {
        {"a: &x 1\nb: *x\n", 1, 4, "anchors and aliases are not supported"},
        {"a: 1\nb: *x\n", 2, 4, "anchors and aliases are not supported"},
        {"base: &b\n  x: 1\n", 1, 7, "anchors and aliases are not supported"},
        {"- &s [1]\n", 1, 3, "anchors and aliases are not supported"},
        {"!!merge <<: {a: 1}\n", 1, 1, "tag '!!merge' is not supported"}, /* go-yaml's only */
        {"a: 1\nb: 2\na: 3\n", 3, 1, "duplicate key 'a' (first at line 1)"},
        {"x:\n  y: 1\n  z: 2\n  y: 3\n", 4, 3, "duplicate key 'y' (first at line 2)"},
        {"{a: 1, b: 2, a: 2}", 1, 14, "duplicate key 'a'"},
        {"\"a\": 1\na: 2\n", 2, 1, "duplicate key 'a'"},
        {"? [a, b]\n: c\n", 1, 3, "map keys must be scalars, not a sequence"},
        {"x: 1\n? {a: 1}\n: 2\n", 2, 3, "map keys must be scalars, not a map"},
        {"a: 1\n---\nb: 2\n", 2, 1, "only one YAML document is supported"},
        {"a: 1\n...\n---\nb: 1\n", 3, 1, "only one YAML document is supported"},
        {"a: b: c\n", 1, 5, "mapping values are not allowed in this context"},
        {"a: [1, 2\n", 2, 1, "did not find expected ',' or ']' (while parsing a flow sequence at "
                             "line 1 column 4)"},
        /* the context on the error's own line: its column, not the line again */
        {"a: 1\nb: [\n", 3, 1,
         "did not find expected node content (while parsing a flow node at column 1)"},
        {"a:\n  b: 1\n c: 2\n", 3, 2, "did not find expected key"},
        {"a: \"abc\n", 2, 1, "found unexpected end of stream (while scanning a quoted scalar"},
        {"a:\n\tb: 1\n", 2, 1, "found character that cannot start any token"},
        {"x: 1\na: \xff\n", 2, 4, "invalid leading UTF-8 octet (byte 0xff)"},
        {"x: 1\na: \x01\n", 2, 4, "control characters are not allowed"},
        {"a: !custom 1\n", 1, 4, "tag '!custom' is not supported"},
        {"a: !!binary aGk=\n", 1, 4, "tag '!!binary' is not supported"},
        {"a: \"x\\0y\"\n", 1, 4, "NUL character in a scalar"},
        {"\"k\\0\": 1\n", 1, 1, "NUL character in a scalar"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++)
        expect_error(cases[i].in, strlen(cases[i].in), cases[i].line, cases[i].col,
                     cases[i].msg);
}

/* A core tag is checked against its node, not dropped: `scale: !!null 2`
 * set 2 and `policy: !!int oracle` read oracle. */
static void test_core_tags_fit_their_nodes(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int line;
        const char *msg;
    } bad[] = {
        {"trace: x.csv\nscale: !!null 2\n", 2, "tag '!!null' on '2', which is not null"},
        {"policy: !!int oracle\n", 1, "tag '!!int' on 'oracle', which is not an integer"},
        {"a: !!int 1.5\n", 1, "which is not an integer"},
        {"a: !!int 0x\n", 1, "which is not an integer"},
        {"a: !!int ''\n", 1, "which is not an integer"},
        {"a: !!float 1e\n", 1, "which is not a number"},
        {"a: !!float .\n", 1, "which is not a number"},
        {"a: !!float nan\n", 1, "which is not a number"},
        {"a: !!bool yes\n", 1, "tag '!!bool' on 'yes', which is not true or false"},
        {"a: !!null \"x\"\n", 1, "tag '!!null' on 'x', which is not null"},
        {"x: 1\npolicy: !!map oracle\n", 2, "tag '!!map' on a scalar"},
        {"a: !!seq x\n", 1, "tag '!!seq' on a scalar"},
        {"a: !!seq {b: 1}\n", 1, "tag '!!seq' on a map"},
        {"a: !!map [1]\n", 1, "tag '!!map' on a sequence"},
        {"a: !!str [1]\n", 1, "tag '!!str' on a sequence"},
        {"a: !!null {b: 1}\n", 1, "tag '!!null' on a map"},
        {"!!int k: 1\n", 1, "tag '!!int' on 'k', which is not an integer"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++)
        expect_error(bad[i].in, strlen(bad[i].in), bad[i].line, 0, bad[i].msg);
    struct conf_node *root = parse_ok("a: !!null ~\n"
                                      "b: !!null\n"
                                      "c: !!null \"null\"\n"
                                      "d: !!int -12\n"
                                      "e: !!int 0x1F\n"
                                      "f: !!int 0o17\n"
                                      "g: !!float 1.5e3\n"
                                      "h: !!float -.inf\n"
                                      "i: !!float 7\n"
                                      "j: !!bool False\n"
                                      "k: !!str ~\n"
                                      "l: !!map {x: 1}\n"
                                      "m: !!seq [1]\n"
                                      "n: !!int \"5\"\n");
    assert_scalar(get(root, "a"), "", false, 1, 4);
    assert_scalar(get(root, "b"), "", false, 2, 4);
    assert_scalar(get(root, "c"), "", false, 3, 4);
    assert_scalar(get(root, "d"), "-12", false, 4, 4);
    assert_scalar(get(root, "e"), "0x1F", false, 5, 4);
    assert_scalar(get(root, "f"), "0o17", false, 6, 4);
    assert_scalar(get(root, "g"), "1.5e3", false, 7, 4);
    assert_scalar(get(root, "h"), "-.inf", false, 8, 4);
    assert_scalar(get(root, "i"), "7", false, 9, 4);
    assert_scalar(get(root, "j"), "False", false, 10, 4);
    assert_scalar(get(root, "k"), "~", true, 11, 4);
    assert_int_equal(get(root, "l")->type, CONF_MAP);
    assert_int_equal(get(root, "m")->type, CONF_SEQ);
    assert_scalar(get(root, "n"), "5", true, 14, 4);
    conf_free(root);
}

static void test_limits(void **state)
{
    (void)state;
    struct util_buf b = {0};

    /* Depth: 64 nested flow sequences are fine, 65 are not. */
    for (int k = 0; k < CONF_MAX_DEPTH; k++)
        util_buf_puts(&b, "[");
    util_buf_puts(&b, "x");
    for (int k = 0; k < CONF_MAX_DEPTH; k++)
        util_buf_puts(&b, "]");
    struct conf_node *n = parse_ok(b.data);
    conf_free(n);
    util_buf_reset(&b);
    util_buf_puts(&b, "x: 1\na: "); /* the map is level 1, so the 64th '[' is one too many */
    for (int k = 0; k < CONF_MAX_DEPTH; k++)
        util_buf_puts(&b, "[");
    expect_error(b.data, b.len, 2, 3 + CONF_MAX_DEPTH, "nesting is deeper than 64 levels");

    /* Nodes: a sequence of CONF_MAX_NODES - 1 items is the most that fits. */
    util_buf_reset(&b);
    util_buf_puts(&b, "[");
    for (int k = 0; k < CONF_MAX_NODES - 1; k++)
        util_buf_puts(&b, "0,");
    util_buf_puts(&b, "]\n");
    n = parse_ok(b.data);
    assert_int_equal(n->n, CONF_MAX_NODES - 1);
    conf_free(n);
    util_buf_reset(&b);
    util_buf_puts(&b, "[");
    for (int k = 0; k < CONF_MAX_NODES; k++)
        util_buf_puts(&b, "0,");
    util_buf_puts(&b, "]\n");
    expect_error(b.data, b.len, 1, 0, "document has more than 200000 nodes");

    /* A big map still finds a duplicate far apart, with the first line. */
    util_buf_reset(&b);
    for (int k = 0; k < 5000; k++)
        util_buf_printf(&b, "key%d: %d\n", k, k);
    util_buf_puts(&b, "key17: again\n");
    expect_error(b.data, b.len, 5001, 1, "duplicate key 'key17' (first at line 18)");

    /* Size is checked before anything is read. */
    expect_error("a: 1\n", CONF_MAX_BYTES + 1, 0, 0, "the limit is 4194304");
    util_buf_free(&b);
}

/* ---- CONF_GO_YAML --------------------------------------------------------------- */

/* Anchors, aliases, merge keys and repeated keys as go-yaml v2's non-strict
 * Unmarshal reads them (client-go's kubeconfig loader). */
static void test_go_yaml_aliases_and_merge_keys(void **state)
{
    (void)state;
    struct conf_node *root = parse_opts_ok("base: &b {x: 1, y: 2}\n"
                                           "over:\n"
                                           "  x: 0\n"   /* before the merge: replaced */
                                           "  <<: *b\n"
                                           "  y: 9\n"   /* after the merge: wins */
                                           "list: {<<: [{x: 1}, {x: 2, z: 3}], z: 4}\n"
                                           "tagged: {!!merge <<: *b}\n"
                                           "rep: 1\n"
                                           "rep: 2\n"
                                           "&k key: v\n"
                                           "use: {*k : w, copy: *b}\n",
                                           &go_yaml);
    const struct conf_node *over = get(root, "over");
    assert_int_equal(over->n, 2);
    assert_string_equal(over->keys[0], "x"); /* the merged value takes the key's place */
    assert_scalar(get(over, "x"), "1", false, 1, 14); /* a copy keeps the anchored lines */
    assert_scalar(get(over, "y"), "9", false, 5, 6);
    const struct conf_node *list = get(root, "list"); /* of a list of maps, the first wins */
    assert_int_equal(list->n, 2);
    assert_scalar(get(list, "x"), "1", false, 6, 17);
    assert_scalar(get(list, "z"), "4", false, 6, 39);
    assert_scalar(get(get(root, "tagged"), "y"), "2", false, 1, 20);
    assert_scalar(get(root, "rep"), "2", false, 9, 6); /* a repeated key: its last value */
    assert_scalar(get(root, "key"), "v", false, 10, 9);
    assert_scalar(get(get(root, "use"), "key"), "w", false, 11, 12); /* an alias as a key */
    assert_int_equal(get(get(root, "use"), "copy")->n, 2);
    assert_int_equal(root->n, 7);
    conf_free(root);

    /* an anchor defined again: aliases after it see the new value; an anchor
     * on a value a repeated key replaced still stands */
    root = parse_opts_ok("a: &s old\nb: *s\na: &s new\nc: *s\n", &go_yaml);
    assert_scalar(get(root, "b"), "old", false, 1, 4);
    assert_scalar(get(root, "c"), "new", false, 3, 4);
    assert_scalar(get(root, "a"), "new", false, 3, 4);
    conf_free(root);

    /* by default `<<` is an ordinary key */
    root = parse_ok("<<: {a: 1}\n");
    assert_int_equal(get(root, "<<")->type, CONF_MAP);
    conf_free(root);
    /* a quoted `<<` is an ordinary key in go-yaml too */
    root = parse_opts_ok("\"<<\": 1\n", &go_yaml);
    assert_scalar(get(root, "<<"), "1", false, 1, 7);
    conf_free(root);

    /* with key_typed: a typed plain key and the quoted key of its text are
     * two keys (go-yaml: the bool true and the string "on"), each replaced
     * by a later one of its kind, merged keys too; an untyped plain key is
     * the quoted one. Without the hook they were one key. */
    static const struct conf_opts typed = {.flags = CONF_GO_YAML, .key_typed = on_typed};
    root = parse_opts_ok("on: 1\n'on': 2\nk: a\non: 3\n'k': b\nm: &m {'on': 4, on: 5}\n"
                         "n: {<<: *m, 'on': 6}\n",
                         &typed);
    assert_int_equal(root->n, 5);
    assert_string_equal(root->keys[0], "on");
    assert_false(root->key_quoted[0]);
    assert_scalar(root->items[0], "3", false, 4, 5);
    assert_string_equal(root->keys[1], "on");
    assert_true(root->key_quoted[1]);
    assert_scalar(root->items[1], "2", false, 2, 7);
    assert_scalar(get(root, "k"), "b", false, 5, 6);
    const struct conf_node *n = get(root, "n");
    assert_int_equal(n->n, 2);
    assert_true(n->key_quoted[0]);
    assert_scalar(n->items[0], "6", false, 7, 19);
    assert_false(n->key_quoted[1]);
    assert_scalar(n->items[1], "5", false, 6, 21);
    conf_free(root);
    /* conf_parse_opts without CONF_GO_YAML ignores the hook: a duplicate */
    static const struct conf_opts typed_only = {.key_typed = on_typed};
    expect_error_opts("on: 1\n'on': 2\n", 13, &typed_only, 2, 1, "duplicate key 'on'");

    static const struct {
        const char *in;
        int line, col;
        const char *msg;
    } bad[] = {
        {"a: *nope\n", 1, 4, "unknown anchor 'nope' referenced"},
        {"a: &x [1, *x]\n", 1, 11, "anchor 'x' value contains itself"},
        {"a: {<<: 5}\n", 1, 5, "map merge requires map or sequence of maps as the value"},
        {"a: &l [{x: 1}]\nb: {<<: *l}\n", 2, 5, "map merge requires map or sequence of maps"},
        {"a: {<<: [{x: 1}, 2]}\n", 1, 5, "map merge requires map or sequence of maps"},
        {"a: &m {x: 1}\n*m : 2\n", 2, 1, "map keys must be scalars, not a map"},
        {"a: !!merge x\n", 1, 4, "tag '!!merge' is not supported"},
        /* conf's tag checks and error texts hold in this mode too */
        {"a: &x 1\nb: !!null 2\n", 2, 4, "tag '!!null' on '2', which is not null"},
        {"a: &x 1\nb: [\n", 3, 1,
         "did not find expected node content (while parsing a flow node at column 1)"},
        {"a: &x 1\n---\nb: 2\n", 2, 1, "only one YAML document is supported"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++)
        expect_error_opts(bad[i].in, strlen(bad[i].in), &go_yaml, bad[i].line, bad[i].col,
                          bad[i].msg);
}

/* Billion laughs: each level doubles the one before; the expansion stops at
 * a bound (go-yaml's: "document contains excessive aliasing"), quickly and
 * without the memory the full tree would take. */
static void test_go_yaml_alias_bounds(void **state)
{
    (void)state;
    struct util_buf b = {0};
    struct conf_node *n = NULL;
    struct conf_error err = {0};
    util_buf_printf(&b, "l0: &l0 [\"lol\", \"lol\"]\n");
    for (int i = 1; i < 40; i++)
        util_buf_printf(&b, "l%d: &l%d [*l%d, *l%d, *l%d, *l%d]\n", i, i, i - 1, i - 1, i - 1,
                        i - 1);
    assert_int_equal(conf_parse_opts(b.data, b.len, &go_yaml, &n, &err), -EINVAL);
    assert_null(n);
    if (!strstr(err.msg, "aliasing") && !strstr(err.msg, "nodes") && !strstr(err.msg, "bytes"))
        fail_msg("message \"%s\"", err.msg);
    assert_true(err.line > 1);
    util_buf_reset(&b);

    /* one big scalar aliased many times: bounded by the bytes copied */
    char *big = xmalloc(300001);
    memset(big, 'a', 300000);
    big[300000] = '\0';
    util_buf_printf(&b, "big: &b %s\nall: [", big);
    for (int i = 0; i < 20; i++)
        util_buf_printf(&b, "%s*b", i ? ", " : "");
    util_buf_printf(&b, "]\n");
    expect_error_opts(b.data, b.len, &go_yaml, 2, 0, "aliases expand to more than 4194304 bytes");
    util_buf_reset(&b);
    xfree(big);

    /* deep trees aliased inside deep trees: bounded in depth */
    util_buf_printf(&b, "a: &a ");
    for (int i = 0; i < 40; i++)
        util_buf_printf(&b, "[");
    for (int i = 0; i < 40; i++)
        util_buf_printf(&b, "]");
    util_buf_printf(&b, "\nb: ");
    for (int i = 0; i < 30; i++)
        util_buf_printf(&b, "[");
    util_buf_printf(&b, "*a");
    for (int i = 0; i < 30; i++)
        util_buf_printf(&b, "]");
    util_buf_printf(&b, "\n");
    expect_error_opts(b.data, b.len, &go_yaml, 2, 0, "nesting is deeper than 64 levels (alias *a)");
    util_buf_reset(&b);

    /* the node count takes the copies in: 3,307 nodes, then 302 a copy (under
     * 99 % aliased), so the 652nd alias is one too many */
    util_buf_printf(&b, "pad: [");
    for (int i = 0; i < 3000; i++)
        util_buf_printf(&b, "0,");
    util_buf_printf(&b, "]\nm: &m {");
    for (int i = 0; i < 150; i++)
        util_buf_printf(&b, "%sk%d: v", i ? ", " : "", i);
    util_buf_printf(&b, "}\nall:\n");
    for (int i = 0; i < 700; i++)
        util_buf_printf(&b, "- *m\n");
    expect_error_opts(b.data, b.len, &go_yaml, 3 + 652, 3,
                      "document has more than 200000 nodes (aliases expanded)");
    util_buf_free(&b);
}

/* ---- files -------------------------------------------------------------------------- */

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void test_load_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/test-conf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *good = xasprintf("%s/good.yaml", dir);
    char *bad = xasprintf("%s/bad.yaml", dir);
    char *big = xasprintf("%s/big.yaml", dir);
    char *missing = xasprintf("%s/missing.yaml", dir);

    write_file(good, "log: {level: debug}\n", 20);
    struct conf_node *n = NULL;
    struct conf_error err = {0};
    assert_int_equal(conf_load_file(good, &n, &err), 0);
    assert_scalar(get(get(n, "log"), "level"), "debug", false, 1, 14);
    conf_free(n);

    write_file(bad, "a: 1\na: 2\n", 10);
    assert_int_equal(conf_load_file(bad, &n, &err), -EINVAL);
    assert_int_equal(err.line, 2);
    assert_null(n);

    assert_int_equal(conf_load_file(missing, &n, &err), -ENOENT);
    assert_int_equal(err.line, 0);
    assert_non_null(strstr(err.msg, missing));
    assert_null(n);

    assert_int_equal(conf_load_file(dir, &n, &err), -EISDIR);
    assert_null(n);

    char *blob = xmalloc(CONF_MAX_BYTES + 1);
    memset(blob, '\n', CONF_MAX_BYTES + 1);
    write_file(big, blob, CONF_MAX_BYTES + 1);
    xfree(blob);
    assert_int_equal(conf_load_file(big, &n, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "larger than the limit"));
    assert_null(n);

    unlink(good);
    unlink(bad);
    unlink(big);
    rmdir(dir);
    xfree(good);
    xfree(bad);
    xfree(big);
    xfree(missing);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_kubeconfig),
        cmocka_unit_test(test_gpuscaler_config),
        cmocka_unit_test(test_scalar_styles),
        cmocka_unit_test(test_empty_and_other_roots),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_core_tags_fit_their_nodes),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_go_yaml_aliases_and_merge_keys),
        cmocka_unit_test(test_go_yaml_alias_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* conf: builds the plain conf_node tree from libyaml's event stream.
 *
 * The builder keeps a stack of open containers (at most CONF_MAX_DEPTH). A
 * node joins its parent once complete (a scalar at once, a container at its
 * end), so that a repeated key and a merge key (CONF_GO_YAML, alias.c) apply
 * in document order; until then an open container is owned by its frame, and
 * the error path frees the frames' nodes and the root. Per-container growth
 * state (capacity, the pending key, an index of the keys seen, for duplicate
 * detection in O(1)) lives in the stack frame, not in the public node.
 * libyaml errors and all our own rejections are reported through struct
 * conf_error with 1-based line/column; nothing here logs.
 *
 * Scalars: a plain (unquoted) `~`, `null`, `Null` or `NULL` and an empty value
 * become "", as does any value tagged `!!null`. `quoted` is true for every
 * non-plain style (single/double quotes and block scalars `|`, `>`) and for
 * an explicit `!!str` tag: those are strings that YAML never resolves to
 * null, bool or number. A core tag must fit its node (YAML 1.2's core
 * schema): `!!null 2`, `!!int oracle` or `!!map` on a scalar are errors,
 * never a value read as if the tag were not there. */
#include "conf/conf.h"
#include "conf-int.h"

#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- errors --------------------------------------------------------------- */

int conf_fail(struct conf_error *err, int rc, int line, int col, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->line = line;
        err->col = col;
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *conf_quote(const char *s, char *out)
{
    size_t k = 0;
    for (; s[k] && k < CONF_QUOTE_MAX; k++) {
        unsigned char c = (unsigned char)s[k];
        out[k] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (s[k]) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
    return out;
}

/* Turn libyaml's error state into our error; line/column are 1-based. */
static int yaml_fail(const yaml_parser_t *p, const char *buf, size_t len, struct conf_error *err)
{
    const char *problem = p->problem ? p->problem : "unknown YAML error";
    if (p->error == YAML_MEMORY_ERROR)
        return conf_fail(err, -ENOMEM, 0, 0, "YAML parser: out of memory");
    if (p->error == YAML_READER_ERROR) {
        /* Reader errors (bad UTF-8, control characters) only carry an offset. */
        int line = 1, col = 1;
        for (size_t k = 0; k < p->problem_offset && k < len; k++) {
            if (buf[k] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        if (p->problem_value >= 0)
            return conf_fail(err, -EINVAL, line, col, "%s (byte 0x%02x)", problem,
                             p->problem_value);
        return conf_fail(err, -EINVAL, line, col, "%s", problem);
    }
    int line = conf_mark_line(p->problem_mark), col = conf_mark_col(p->problem_mark);
    /* err->line is the problem's line: repeat a line only when the context's differs */
    if (p->context && conf_mark_line(p->context_mark) == line)
        return conf_fail(err, -EINVAL, line, col, "%s (%s at column %d)", problem, p->context,
                         conf_mark_col(p->context_mark));
    if (p->context)
        return conf_fail(err, -EINVAL, line, col, "%s (%s at line %d column %d)", problem,
                         p->context, conf_mark_line(p->context_mark),
                         conf_mark_col(p->context_mark));
    return conf_fail(err, -EINVAL, line, col, "%s", problem);
}

/* ---- node helpers ----------------------------------------------------------- */

static const char *const core_tags[] = {"str", "int", "float", "bool", "null", "map", "seq"};
#define CORE_PREFIX "tag:yaml.org,2002:"

static bool tag_is(const yaml_char_t *tag, const char *name)
{
    return tag && strncmp((const char *)tag, CORE_PREFIX, sizeof(CORE_PREFIX) - 1) == 0 &&
           strcmp((const char *)tag + sizeof(CORE_PREFIX) - 1, name) == 0;
}

/* The texts YAML 1.2's core schema resolves to null, a bool, an int and a
 * float (a float's pattern takes ints too). */
static bool is_null_text(const char *s)
{
    return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

static bool is_bool_text(const char *s)
{
    static const char *const v[] = {"true", "True", "TRUE", "false", "False", "FALSE"};
    for (size_t k = 0; k < UTIL_ARRAY_LEN(v); k++)
        if (strcmp(s, v[k]) == 0)
            return true;
    return false;
}

#define DIGITS "0123456789"

static bool is_int_text(const char *s)
{
    if (strncmp(s, "0o", 2) == 0)
        return s[2] && s[2 + strspn(s + 2, "01234567")] == '\0';
    if (strncmp(s, "0x", 2) == 0)
        return s[2] && s[2 + strspn(s + 2, DIGITS "abcdefABCDEF")] == '\0';
    if (*s == '-' || *s == '+')
        s++;
    return *s && s[strspn(s, DIGITS)] == '\0';
}

static bool is_float_text(const char *s)
{
    if (strcmp(s, ".nan") == 0 || strcmp(s, ".NaN") == 0 || strcmp(s, ".NAN") == 0)
        return true;
    if (*s == '-' || *s == '+')
        s++;
    if (strcmp(s, ".inf") == 0 || strcmp(s, ".Inf") == 0 || strcmp(s, ".INF") == 0)
        return true;
    size_t whole = strspn(s, DIGITS), frac = 0;
    s += whole;
    if (*s == '.') {
        frac = strspn(s + 1, DIGITS);
        s += 1 + frac;
    }
    if (whole == 0 && frac == 0)
        return false;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+')
            s++;
        size_t exp = strspn(s, DIGITS);
        if (exp == 0)
            return false;
        s += exp;
    }
    return *s == '\0';
}

/* Non-core tags are refused wherever they appear, and anchors unless
 * CONF_GO_YAML; so is a core tag that contradicts its node: !!map off a map,
 * !!seq off a sequence, and on a scalar !!map, !!seq, or !!null, !!bool,
 * !!int, !!float on a text that is not one (YAML 1.2's core schema). text is
 * the scalar's, else NULL. */
static int check_props(struct conf_builder *b, const yaml_event_t *ev, const yaml_char_t *anchor,
                       const yaml_char_t *tag, enum conf_type type, const char *text)
{
    char q[CONF_QUOTE_MAX + 4];
    int line = conf_mark_line(ev->start_mark), col = conf_mark_col(ev->start_mark);
    if (anchor && !b->go_yaml)
        return conf_fail(b->err, -EINVAL, line, col, "anchors and aliases are not supported");
    if (!tag)
        return 0;
    const char *t = (const char *)tag;
    bool core = strncmp(t, CORE_PREFIX, sizeof(CORE_PREFIX) - 1) == 0;
    size_t k = 0;
    while (k < UTIL_ARRAY_LEN(core_tags) && !tag_is(tag, core_tags[k]))
        k++;
    if (k == UTIL_ARRAY_LEN(core_tags))
        return conf_fail(b->err, -EINVAL, line, col, "tag '%s%s' is not supported",
                         core ? "!!" : "", conf_quote(core ? t + sizeof(CORE_PREFIX) - 1 : t, q));
    const char *name = core_tags[k];
    bool is_map = strcmp(name, "map") == 0, is_seq = strcmp(name, "seq") == 0;
    if (type != CONF_SCALAR || is_map || is_seq) {
        if ((type == CONF_MAP && is_map) || (type == CONF_SEQ && is_seq))
            return 0;
        return conf_fail(b->err, -EINVAL, line, col, "tag '!!%s' on a %s", name,
                         conf_type_name(type));
    }
    static const struct {
        const char *tag, *what;
        bool (*fits)(const char *s);
    } scalar_tags[] = {
        {"null", "null", is_null_text},
        {"bool", "true or false", is_bool_text},
        {"int", "an integer", is_int_text},
        {"float", "a number", is_float_text},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(scalar_tags); i++)
        if (strcmp(name, scalar_tags[i].tag) == 0 && !scalar_tags[i].fits(text))
            return conf_fail(b->err, -EINVAL, line, col, "tag '!!%s' on '%s', which is not %s",
                             name, conf_quote(text, q), scalar_tags[i].what);
    return 0;
}

int conf_count_nodes(struct conf_builder *b, const yaml_event_t *ev, size_t n)
{
    if (n > CONF_MAX_NODES - b->nodes)
        return conf_fail(b->err, -EINVAL, conf_mark_line(ev->start_mark),
                         conf_mark_col(ev->start_mark), "document has more than %d nodes%s",
                         CONF_MAX_NODES, b->aliased ? " (aliases expanded)" : "");
    b->nodes += n;
    return 0;
}

/* ---- string index ------------------------------------------------------------ */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 14695981039346656037ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The slot holding key, or the free slot where it would go. */
static size_t index_slot(const struct conf_index *ix, char *const *names, const char *key)
{
    size_t mask = ix->cap - 1;
    for (size_t i = (size_t)hash_str(key) & mask;; i = (i + 1) & mask)
        if (ix->slots[i] == 0 || strcmp(names[ix->slots[i] - 1], key) == 0)
            return i;
}

size_t conf_index_get(const struct conf_index *ix, char *const *names, const char *key)
{
    if (ix->cap == 0)
        return SIZE_MAX;
    size_t at = ix->slots[index_slot(ix, names, key)];
    return at ? at - 1 : SIZE_MAX;
}

void conf_index_add(struct conf_index *ix, char *const *names)
{
    if (2 * (ix->count + 1) > ix->cap) {
        xfree(ix->slots);
        ix->cap = ix->cap ? ix->cap * 2 : 16;
        ix->slots = xcalloc(ix->cap, sizeof(*ix->slots));
        for (size_t k = 0; k < ix->count; k++) /* a later equal name takes the slot */
            ix->slots[index_slot(ix, names, names[k])] = k + 1;
    }
    ix->slots[index_slot(ix, names, names[ix->count])] = ix->count + 1;
    ix->count++;
}

void conf_index_free(struct conf_index *ix)
{
    xfree(ix->slots);
    *ix = (struct conf_index){0};
}

/* ---- containers ---------------------------------------------------------------- */

/* Make room for one more item (and key) in the frame's container. */
static void frame_reserve(struct conf_frame *f)
{
    struct conf_node *n = f->node;
    if (n->n < f->cap)
        return;
    f->cap = f->cap ? f->cap * 2 : 4;
    n->items = xrealloc(n->items, f->cap * sizeof(*n->items));
    if (n->type == CONF_MAP) {
        n->keys = xrealloc(n->keys, f->cap * sizeof(*n->keys));
        n->key_quoted = xrealloc(n->key_quoted, f->cap * sizeof(*n->key_quoted));
        f->key_lines = xrealloc(f->key_lines, f->cap * sizeof(*f->key_lines));
    }
}

bool conf_wants_key(const struct conf_builder *b)
{
    if (b->depth == 0)
        return false;
    const struct conf_frame *f = &b->stack[b->depth - 1];
    return f->node->type == CONF_MAP && !f->key;
}

int conf_take_key(struct conf_builder *b, const yaml_event_t *ev, char *key, bool quoted,
                  bool merge)
{
    char q[CONF_QUOTE_MAX + 4];
    struct conf_frame *f = &b->stack[b->depth - 1];
    int line = conf_mark_line(ev->start_mark), col = conf_mark_col(ev->start_mark);
    size_t dup = b->go_yaml ? SIZE_MAX : conf_index_get(&f->keys, f->node->keys, key);
    if (dup != SIZE_MAX) {
        int rc = conf_fail(b->err, -EINVAL, line, col, "duplicate key '%s' (first at line %d)",
                           conf_quote(key, q), f->key_lines[dup]);
        xfree(key);
        return rc;
    }
    f->key = key;
    f->key_quoted = quoted;
    f->key_line = line;
    f->key_col = col;
    f->merge = merge;
    return 0;
}

/* With a key_typed hook (CONF_GO_YAML): a plain key go-yaml types (`on`,
 * `0x10`, `~`) is a different key from the quoted one of the same text. */
static bool key_typed(const struct conf_builder *b, const char *key, bool quoted)
{
    return b->key_typed && !quoted && b->key_typed(key);
}

void conf_map_set(struct conf_builder *b, struct conf_frame *f, char *key, bool quoted,
                  struct conf_node *val)
{
    struct conf_node *m = f->node;
    size_t at = conf_index_get(&f->keys, m->keys, key);
    bool typed = key_typed(b, key, quoted);
    if (at != SIZE_MAX && key_typed(b, m->keys[at], m->key_quoted[at]) != typed) {
        /* the text's newest key is the other one: the same key, if any, is before it */
        while (at-- > 0)
            if (strcmp(m->keys[at], key) == 0 &&
                key_typed(b, m->keys[at], m->key_quoted[at]) == typed)
                break;
    }
    if (at != SIZE_MAX) {
        conf_drop(b, m->items[at]); /* an anchor may point at it */
        m->items[at] = val;
        m->key_quoted[at] = quoted;
        xfree(key);
        return;
    }
    frame_reserve(f);
    m->key_quoted[m->n] = quoted;
    m->keys[m->n] = key;
    f->key_lines[m->n] = f->key_line;
    m->items[m->n++] = val;
    conf_index_add(&f->keys, m->keys);
}

int conf_complete(struct conf_builder *b, struct conf_node *n, int how)
{
    if (b->depth == 0) {
        b->root = n;
        return 0;
    }
    struct conf_frame *f = &b->stack[b->depth - 1];
    if (f->node->type == CONF_SEQ) {
        frame_reserve(f);
        f->node->items[f->node->n++] = n;
        return 0;
    }
    char *key = f->key;
    f->key = NULL;
    if (f->merge) {
        f->merge = false;
        xfree(key);
        return conf_merge(b, f, n, how);
    }
    conf_map_set(b, f, key, f->key_quoted, n);
    return 0;
}

static void frame_release(struct conf_frame *f)
{
    xfree(f->key);
    xfree(f->key_lines);
    conf_index_free(&f->keys);
    memset(f, 0, sizeof(*f));
}

/* ---- events ------------------------------------------------------------------ */

/* Takes text. */
static struct conf_node *scalar_node(char *text, bool quoted, const yaml_event_t *ev)
{
    struct conf_node *n = xcalloc(1, sizeof(*n));
    n->type = CONF_SCALAR;
    n->line = conf_mark_line(ev->start_mark);
    n->col = conf_mark_col(ev->start_mark);
    n->scalar = text;
    n->quoted = quoted;
    return n;
}

static int on_scalar(struct conf_builder *b, const yaml_event_t *ev)
{
    const yaml_char_t *v = ev->data.scalar.value, *anchor = ev->data.scalar.anchor;
    const yaml_char_t *tag = ev->data.scalar.tag;
    size_t len = ev->data.scalar.length;
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    bool key = conf_wants_key(b);
    /* go-yaml's merge key: `<<` untagged and plain, or tagged !!merge */
    bool merge = b->go_yaml && key && len == 2 && memcmp(v, "<<", 2) == 0 &&
                 ((plain && !tag) || tag_is(tag, "merge"));
    int rc = check_props(b, ev, anchor, merge ? NULL : tag, CONF_SCALAR, (const char *)v);
    if (rc == 0)
        rc = conf_count_nodes(b, ev, 1);
    if (rc != 0)
        return rc;
    if (memchr(v, '\0', len))
        return conf_fail(b->err, -EINVAL, conf_mark_line(ev->start_mark),
                         conf_mark_col(ev->start_mark), "NUL character in a scalar");
    const char *s = (const char *)v;
    bool null = tag_is(tag, "null"); /* checked: its text is a null's */
    if (null || (plain && !tag && is_null_text(s)))
        len = 0;
    char *text = xstrndup(s, len);
    bool quoted = (!plain && !null) || tag_is(tag, "str");
    if (key) {
        if (anchor) { /* kept for the aliases to it */
            struct conf_node *a = scalar_node(xstrdup(text), quoted, ev);
            conf_drop(b, a);
            conf_anchor_set(b, conf_anchor_define(b, anchor), a);
        }
        return conf_take_key(b, ev, text, quoted, merge);
    }
    struct conf_node *n = scalar_node(text, quoted, ev);
    if (anchor)
        conf_anchor_set(b, conf_anchor_define(b, anchor), n);
    return conf_complete(b, n, anchor ? CONF_ANCHORED : 0);
}

static int on_start(struct conf_builder *b, const yaml_event_t *ev, enum conf_type type)
{
    int line = conf_mark_line(ev->start_mark), col = conf_mark_col(ev->start_mark);
    const yaml_char_t *anchor, *tag;
    if (type == CONF_MAP) {
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
    } else {
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
    }
    int rc = check_props(b, ev, anchor, tag, type, NULL);
    if (rc == 0)
        rc = conf_count_nodes(b, ev, 1);
    if (rc != 0)
        return rc;
    if (conf_wants_key(b))
        return conf_fail(b->err, -EINVAL, line, col, "map keys must be scalars, not a %s",
                         conf_type_name(type));
    if (b->depth == CONF_MAX_DEPTH)
        return conf_fail(b->err, -EINVAL, line, col, "nesting is deeper than %d levels",
                         CONF_MAX_DEPTH);
    struct conf_node *n = xcalloc(1, sizeof(*n));
    n->type = type;
    n->line = line;
    n->col = col;
    b->stack[b->depth++] =
        (struct conf_frame){.node = n, .anchor = anchor ? conf_anchor_define(b, anchor) + 1 : 0};
    return 0;
}

static int on_end(struct conf_builder *b)
{
    /* libyaml pairs start/end events and never ends a map with a key pending. */
    struct conf_frame *f = &b->stack[--b->depth];
    struct conf_node *n = f->node;
    size_t anchor = f->anchor;
    frame_release(f);
    if (anchor)
        conf_anchor_set(b, anchor - 1, n);
    return conf_complete(b, n, anchor ? CONF_ANCHORED : 0);
}

/* Returns 1 when the stream has ended, 0 to continue, or an error. */
static int on_event(struct conf_builder *b, const yaml_event_t *ev)
{
    int line = conf_mark_line(ev->start_mark), col = conf_mark_col(ev->start_mark);
    switch (ev->type) {
    case YAML_STREAM_END_EVENT:
        return 1;
    case YAML_DOCUMENT_START_EVENT:
        if (b->docs++ > 0)
            return conf_fail(b->err, -EINVAL, line, col,
                             "only one YAML document is supported (a second one starts here)");
        return 0;
    case YAML_ALIAS_EVENT:
        if (b->go_yaml)
            return conf_alias(b, ev);
        return conf_fail(b->err, -EINVAL, line, col, "anchors and aliases are not supported");
    case YAML_SCALAR_EVENT:
        return on_scalar(b, ev);
    case YAML_SEQUENCE_START_EVENT:
        return on_start(b, ev, CONF_SEQ);
    case YAML_MAPPING_START_EVENT:
        return on_start(b, ev, CONF_MAP);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return on_end(b);
    default: /* stream start, document end, no event */
        return 0;
    }
}

/* ---- public ------------------------------------------------------------------- */

int conf_parse_opts(const char *buf, size_t len, const struct conf_opts *opts,
                    struct conf_node **out, struct conf_error *err)
{
    struct conf_builder b = {.err = err, .go_yaml = opts && (opts->flags & CONF_GO_YAML)};
    if (b.go_yaml)
        b.key_typed = opts->key_typed;
    yaml_parser_t parser;
    bool parser_ready = false;
    int rc = 0;
    *out = NULL;
    if (len > CONF_MAX_BYTES) {
        rc = conf_fail(err, -EINVAL, 0, 0, "document is %zu bytes; the limit is %zu", len,
                       CONF_MAX_BYTES);
        goto out;
    }
    if (!yaml_parser_initialize(&parser)) {
        rc = conf_fail(err, -ENOMEM, 0, 0, "YAML parser: out of memory");
        goto out;
    }
    parser_ready = true;
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
        struct conf_frame *f = &b.stack[--b.depth];
        conf_free(f->node);
        frame_release(f);
    }
    conf_free(b.root);
    conf_alias_release(&b);
    if (parser_ready)
        yaml_parser_delete(&parser);
    return rc;
}

int conf_parse(const char *buf, size_t len, struct conf_node **out, struct conf_error *err)
{
    return conf_parse_opts(buf, len, NULL, out, err);
}

/* Read all of fd into b (NUL-terminated), refusing more than max bytes. */
static int read_all(int fd, size_t max, struct util_buf *b, const char *path,
                    struct conf_error *err)
{
    char chunk[16384];
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof(chunk));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            return conf_fail(err, -e, 0, 0, "%s: %s", path, strerror(e));
        }
        if (r == 0)
            return 0;
        if ((size_t)r > max - b->len)
            return conf_fail(err, -EINVAL, 0, 0, "%s: larger than the limit of %zu bytes", path,
                             max);
        util_buf_append(b, chunk, (size_t)r);
    }
}

int conf_load_file(const char *path, struct conf_node **out, struct conf_error *err)
{
    struct util_buf b = {0};
    int rc;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        rc = conf_fail(err, -e, 0, 0, "%s: %s", path, strerror(e));
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = conf_fail(err, -EISDIR, 0, 0, "%s: %s", path, strerror(EISDIR));
        goto out;
    }
    rc = read_all(fd, CONF_MAX_BYTES, &b, path, err);
    if (rc == 0)
        rc = conf_parse(b.data ? b.data : "", b.len, out, err);
out:
    if (fd >= 0)
        close(fd);
    util_buf_free(&b);
    return rc;
}

void conf_free(struct conf_node *n)
{
    if (!n)
        return;
    for (size_t k = 0; k < n->n; k++) {
        if (n->keys)
            xfree(n->keys[k]);
        conf_free(n->items[k]);
    }
    xfree(n->keys);
    xfree(n->key_quoted);
    xfree(n->items);
    xfree(n->scalar);
    xfree(n);
}

const struct conf_node *conf_map_get(const struct conf_node *map, const char *key)
{
    if (!map || map->type != CONF_MAP || !key)
        return NULL;
    for (size_t k = 0; k < map->n; k++)
        if (strcmp(map->keys[k], key) == 0)
            return map->items[k];
    return NULL;
}

const char *conf_type_name(enum conf_type t)
{
    switch (t) {
    case CONF_SCALAR:
        return "scalar";
    case CONF_MAP:
        return "map";
    case CONF_SEQ:
        return "sequence";
    }
    return "unknown";
}

char *conf_node_joined(const struct conf_node *n)
{
    if (n->type == CONF_SCALAR)
        return xstrdup(n->scalar);
    if (n->type != CONF_SEQ)
        return NULL;
    struct util_buf b = {0};
    util_buf_puts(&b, "");
    for (size_t i = 0; i < n->n; i++) {
        if (n->items[i]->type != CONF_SCALAR) {
            util_buf_free(&b);
            return NULL;
        }
        if (i)
            util_buf_puts(&b, ",");
        util_buf_puts(&b, n->items[i]->scalar);
    }
    return util_buf_steal(&b);
}

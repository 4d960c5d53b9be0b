/* SPDX-License-Identifier: Apache-2.0 */
/* conf: builds the plain conf_node tree from libyaml's event stream.
 *
 * The builder keeps a stack of open containers (at most CONF_MAX_DEPTH). A
 * new node is attached to its parent as soon as it starts, so the tree under
 * the root owns everything built so far and the error path frees it with one
 * conf_free(). Per-container growth state (capacity, the pending key, a small
 * hash of the keys seen, for duplicate detection in O(1)) lives in the stack
 * frame, not in the public node. libyaml errors and all our own rejections
 * are reported through struct conf_error with 1-based line/column; nothing
 * here logs.
 *
 * Scalars: a plain (unquoted) `~`, `null`, `Null` or `NULL` and an empty value
 * become "", as does any value tagged `!!null`. `quoted` is true for every
 * non-plain style (single/double quotes and block scalars `|`, `>`) and for
 * an explicit `!!str` tag: those are strings that YAML never resolves to
 * null, bool or number. A core tag must fit its node (YAML 1.2's core
 * schema): `!!null 2`, `!!int oracle` or `!!map` on a scalar are errors,
 * never a value read as if the tag were not there. */
#include "conf/conf.h"

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
#include <yaml.h>

/** Offending text (keys, tags) is quoted up to this many bytes. */
#define QUOTE_MAX 60

struct frame {
    struct conf_node *node;
    size_t cap;        /* allocated slots in node->items (and keys) */
    char *key;         /* map: key waiting for its value, owned */
    int key_line;
    int *key_lines;    /* map: line of each key, for duplicate messages */
    size_t *htab;      /* map: open addressing, index + 1 of each key */
    size_t hcap;
};

struct builder {
    struct frame stack[CONF_MAX_DEPTH];
    int depth;
    struct conf_node *root;
    size_t nodes;
    int docs;
    struct conf_error *err;
};

/* ---- errors --------------------------------------------------------------- */

static int fail(struct conf_error *err, int rc, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int fail(struct conf_error *err, int rc, int line, int col, const char *fmt, ...)
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

static int mark_line(yaml_mark_t m)
{
    return m.line >= INT_MAX ? INT_MAX : (int)m.line + 1;
}

static int mark_col(yaml_mark_t m)
{
    return m.column >= INT_MAX ? INT_MAX : (int)m.column + 1;
}

/* Quote s for a message; control bytes become '?', "..." marks truncation.
 * out must hold QUOTE_MAX + 4 bytes. */
static const char *quote(const char *s, char *out)
{
    size_t k = 0;
    for (; s[k] && k < QUOTE_MAX; k++) {
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
        return fail(err, -ENOMEM, 0, 0, "YAML parser: out of memory");
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
            return fail(err, -EINVAL, line, col, "%s (byte 0x%02x)", problem, p->problem_value);
        return fail(err, -EINVAL, line, col, "%s", problem);
    }
    int line = mark_line(p->problem_mark), col = mark_col(p->problem_mark);
    /* err->line is the problem's line: repeat a line only when the context's differs */
    if (p->context && mark_line(p->context_mark) == line)
        return fail(err, -EINVAL, line, col, "%s (%s at column %d)", problem, p->context,
                    mark_col(p->context_mark));
    if (p->context)
        return fail(err, -EINVAL, line, col, "%s (%s at line %d column %d)", problem, p->context,
                    mark_line(p->context_mark), mark_col(p->context_mark));
    return fail(err, -EINVAL, line, col, "%s", problem);
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

/* Anchors and non-core tags are refused wherever they appear; so is a core
 * tag that contradicts its node: !!map off a map, !!seq off a sequence, and
 * on a scalar !!map, !!seq, or !!null, !!bool, !!int, !!float on a text that
 * is not one (YAML 1.2's core schema). text is the scalar's, else NULL. */
static int check_props(struct builder *b, const yaml_event_t *ev, const yaml_char_t *anchor,
                       const yaml_char_t *tag, enum conf_type type, const char *text)
{
    char q[QUOTE_MAX + 4];
    int line = mark_line(ev->start_mark), col = mark_col(ev->start_mark);
    if (anchor)
        return fail(b->err, -EINVAL, line, col, "anchors and aliases are not supported");
    if (!tag)
        return 0;
    const char *t = (const char *)tag;
    bool core = strncmp(t, CORE_PREFIX, sizeof(CORE_PREFIX) - 1) == 0;
    size_t k = 0;
    while (k < UTIL_ARRAY_LEN(core_tags) && !tag_is(tag, core_tags[k]))
        k++;
    if (k == UTIL_ARRAY_LEN(core_tags))
        return fail(b->err, -EINVAL, line, col, "tag '%s%s' is not supported", core ? "!!" : "",
                    quote(core ? t + sizeof(CORE_PREFIX) - 1 : t, q));
    const char *name = core_tags[k];
    bool is_map = strcmp(name, "map") == 0, is_seq = strcmp(name, "seq") == 0;
    if (type != CONF_SCALAR || is_map || is_seq) {
        if ((type == CONF_MAP && is_map) || (type == CONF_SEQ && is_seq))
            return 0;
        return fail(b->err, -EINVAL, line, col, "tag '!!%s' on a %s", name,
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
            return fail(b->err, -EINVAL, line, col, "tag '!!%s' on '%s', which is not %s", name,
                        quote(text, q), scalar_tags[i].what);
    return 0;
}

static int count_node(struct builder *b, const yaml_event_t *ev)
{
    if (++b->nodes > CONF_MAX_NODES)
        return fail(b->err, -EINVAL, mark_line(ev->start_mark), mark_col(ev->start_mark),
                    "document has more than %d nodes", CONF_MAX_NODES);
    return 0;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 14695981039346656037ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Index of key in the frame's map, or SIZE_MAX; also returns the free slot. */
static size_t key_find(const struct frame *f, const char *key, size_t *slot)
{
    size_t mask = f->hcap - 1;
    for (size_t i = (size_t)hash_str(key) & mask;; i = (i + 1) & mask) {
        if (f->htab[i] == 0) {
            *slot = i;
            return SIZE_MAX;
        }
        if (strcmp(f->node->keys[f->htab[i] - 1], key) == 0)
            return f->htab[i] - 1;
    }
}

static void key_rehash(struct frame *f, size_t hcap)
{
    xfree(f->htab);
    f->htab = xcalloc(hcap, sizeof(*f->htab));
    f->hcap = hcap;
    for (size_t k = 0; k < f->node->n; k++) {
        size_t slot = 0;
        key_find(f, f->node->keys[k], &slot);
        f->htab[slot] = k + 1;
    }
}

/* Make room for one more item (and key) in the frame's container. */
static void frame_reserve(struct frame *f)
{
    struct conf_node *n = f->node;
    if (n->n < f->cap)
        return;
    f->cap = f->cap ? f->cap * 2 : 4;
    n->items = xrealloc(n->items, f->cap * sizeof(*n->items));
    if (n->type == CONF_MAP) {
        n->keys = xrealloc(n->keys, f->cap * sizeof(*n->keys));
        f->key_lines = xrealloc(f->key_lines, f->cap * sizeof(*f->key_lines));
    }
}

/* A scalar in key position: check it against the keys seen, keep it pending. */
static int take_key(struct builder *b, struct frame *f, const yaml_event_t *ev, char *key)
{
    char q[QUOTE_MAX + 4];
    int line = mark_line(ev->start_mark);
    if (f->hcap < 2 * (f->node->n + 1))
        key_rehash(f, f->hcap ? f->hcap * 2 : 16);
    size_t slot = 0;
    size_t dup = key_find(f, key, &slot);
    if (dup != SIZE_MAX) {
        int rc = fail(b->err, -EINVAL, line, mark_col(ev->start_mark),
                      "duplicate key '%s' (first at line %d)", quote(key, q), f->key_lines[dup]);
        xfree(key);
        return rc;
    }
    f->key = key;
    f->key_line = line;
    return 0;
}

/* Attach a finished or just-opened node to the innermost container. */
static void attach(struct builder *b, struct conf_node *n)
{
    if (b->depth == 0) {
        b->root = n;
        return;
    }
    struct frame *f = &b->stack[b->depth - 1];
    frame_reserve(f);
    struct conf_node *p = f->node;
    if (p->type == CONF_MAP) {
        size_t slot = 0;
        key_find(f, f->key, &slot);
        f->htab[slot] = p->n + 1;
        p->keys[p->n] = f->key;
        f->key_lines[p->n] = f->key_line;
        f->key = NULL;
    }
    p->items[p->n++] = n;
}

static bool wants_key(const struct builder *b)
{
    if (b->depth == 0)
        return false;
    const struct frame *f = &b->stack[b->depth - 1];
    return f->node->type == CONF_MAP && !f->key;
}

static void frame_release(struct frame *f)
{
    xfree(f->key);
    xfree(f->key_lines);
    xfree(f->htab);
    memset(f, 0, sizeof(*f));
}

/* ---- events ------------------------------------------------------------------ */

static int on_scalar(struct builder *b, const yaml_event_t *ev)
{
    const yaml_char_t *v = ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    int rc = check_props(b, ev, ev->data.scalar.anchor, ev->data.scalar.tag, CONF_SCALAR,
                         (const char *)v);
    if (rc == 0)
        rc = count_node(b, ev);
    if (rc != 0)
        return rc;
    if (memchr(v, '\0', len))
        return fail(b->err, -EINVAL, mark_line(ev->start_mark), mark_col(ev->start_mark),
                    "NUL character in a scalar");
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    const yaml_char_t *tag = ev->data.scalar.tag;
    const char *s = (const char *)v;
    bool null = tag_is(tag, "null"); /* checked: its text is a null's */
    if (null || (plain && !tag && is_null_text(s)))
        len = 0;
    char *text = xstrndup(s, len);
    if (wants_key(b))
        return take_key(b, &b->stack[b->depth - 1], ev, text);
    struct conf_node *n = xcalloc(1, sizeof(*n));
    n->type = CONF_SCALAR;
    n->line = mark_line(ev->start_mark);
    n->col = mark_col(ev->start_mark);
    n->scalar = text;
    n->quoted = (!plain && !null) || tag_is(tag, "str");
    attach(b, n);
    return 0;
}

static int on_start(struct builder *b, const yaml_event_t *ev, enum conf_type type)
{
    int line = mark_line(ev->start_mark), col = mark_col(ev->start_mark);
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
        rc = count_node(b, ev);
    if (rc != 0)
        return rc;
    if (wants_key(b))
        return fail(b->err, -EINVAL, line, col, "map keys must be scalars, not a %s",
                    conf_type_name(type));
    if (b->depth == CONF_MAX_DEPTH)
        return fail(b->err, -EINVAL, line, col, "nesting is deeper than %d levels",
                    CONF_MAX_DEPTH);
    struct conf_node *n = xcalloc(1, sizeof(*n));
    n->type = type;
    n->line = line;
    n->col = col;
    attach(b, n);
    b->stack[b->depth++] = (struct frame){.node = n};
    return 0;
}

static void on_end(struct builder *b)
{
    /* libyaml pairs start/end events and never ends a map with a key pending. */
    if (b->depth > 0)
        frame_release(&b->stack[--b->depth]);
}

/* Returns 1 when the stream has ended, 0 to continue, or an error. */
static int on_event(struct builder *b, const yaml_event_t *ev)
{
    int line = mark_line(ev->start_mark), col = mark_col(ev->start_mark);
    switch (ev->type) {
    case YAML_STREAM_END_EVENT:
        return 1;
    case YAML_DOCUMENT_START_EVENT:
        if (b->docs++ > 0)
            return fail(b->err, -EINVAL, line, col,
                        "only one YAML document is supported (a second one starts here)");
        return 0;
    case YAML_ALIAS_EVENT:
        return fail(b->err, -EINVAL, line, col, "anchors and aliases are not supported");
    case YAML_SCALAR_EVENT:
        return on_scalar(b, ev);
    case YAML_SEQUENCE_START_EVENT:
        return on_start(b, ev, CONF_SEQ);
    case YAML_MAPPING_START_EVENT:
        return on_start(b, ev, CONF_MAP);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        on_end(b);
        return 0;
    default: /* stream start, document end, no event */
        return 0;
    }
}

/* ---- public ------------------------------------------------------------------- */

int conf_parse(const char *buf, size_t len, struct conf_node **out, struct conf_error *err)
{
    struct builder b = {.err = err};
    yaml_parser_t parser;
    bool parser_ready = false;
    int rc = 0;
    *out = NULL;
    if (len > CONF_MAX_BYTES) {
        rc = fail(err, -EINVAL, 0, 0, "document is %zu bytes; the limit is %zu", len,
                  CONF_MAX_BYTES);
        goto out;
    }
    if (!yaml_parser_initialize(&parser)) {
        rc = fail(err, -ENOMEM, 0, 0, "YAML parser: out of memory");
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
    b.root = NULL;
    *out = root;
out:
    for (int k = 0; k < b.depth; k++)
        frame_release(&b.stack[k]);
    conf_free(b.root);
    if (parser_ready)
        yaml_parser_delete(&parser);
    return rc;
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
            return fail(err, -e, 0, 0, "%s: %s", path, strerror(e));
        }
        if (r == 0)
            return 0;
        if ((size_t)r > max - b->len)
            return fail(err, -EINVAL, 0, 0, "%s: larger than the limit of %zu bytes", path, max);
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
        rc = fail(err, -e, 0, 0, "%s: %s", path, strerror(e));
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = fail(err, -EISDIR, 0, 0, "%s: %s", path, strerror(EISDIR));
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

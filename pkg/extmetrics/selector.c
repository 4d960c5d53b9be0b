/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/selector: Kubernetes label selectors, parsed and matched the
 * way apimachinery's labels.Parse and Requirement.Matches do.
 *
 * The lexer mirrors apimachinery's: identifiers run until whitespace or one
 * of "=!(),<>"; operators are the longest of "!=", "==" or a single symbol;
 * "in" and "notin" are keywords except where a value is expected. Keys are
 * validated as qualified names (optional DNS-subdomain prefix and '/'),
 * values as label values. The parser never logs; errors carry an offset. */
#include "extmetrics/extmetrics.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum tok {
    T_ERROR,
    T_EOS,
    T_CLOSEPAR,
    T_COMMA,
    T_NOT,
    T_DEQ,
    T_EQ,
    T_GT,
    T_ID,
    T_IN,
    T_LT,
    T_NEQ,
    T_NOTIN,
    T_OPENPAR,
};

enum op { OP_EXISTS, OP_NOT_EXISTS, OP_EQ, OP_NEQ, OP_IN, OP_NOTIN, OP_GT, OP_LT };

struct token {
    enum tok t;
    size_t off;
    char *lit;
};

struct req {
    char *key;
    enum op op;
    char **vals;
    size_t nvals;
    int64_t num;
};

struct extmetrics_selector {
    struct req *reqs;
    size_t n;
};

struct parser {
    const char *s;
    struct token *toks;
    size_t ntok, pos;
    struct extmetrics_parse_error *err;
};

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_special(char c)
{
    return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

static int set_err(struct parser *p, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int set_err(struct parser *p, size_t off, const char *fmt, ...)
{
    if (p->err) {
        p->err->offset = off;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err->message, sizeof(p->err->message), fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static void push(struct parser *p, enum tok t, size_t off, const char *lit, size_t len)
{
    p->toks = xrealloc(p->toks, (p->ntok + 1) * sizeof(*p->toks));
    p->toks[p->ntok].t = t;
    p->toks[p->ntok].off = off;
    p->toks[p->ntok].lit = xstrndup(lit, len);
    p->ntok++;
}

static int lex(struct parser *p)
{
    const char *s = p->s;
    size_t i = 0, n = strlen(s);
    for (;;) {
        while (i < n && is_space(s[i]))
            i++;
        if (i >= n) {
            push(p, T_EOS, i, "", 0);
            return 0;
        }
        if (is_special(s[i])) {
            if ((s[i] == '!' || s[i] == '=') && i + 1 < n && s[i + 1] == '=') {
                push(p, s[i] == '!' ? T_NEQ : T_DEQ, i, s + i, 2);
                i += 2;
                continue;
            }
            enum tok t = T_ERROR;
            switch (s[i]) {
            case '=': t = T_EQ; break;
            case '!': t = T_NOT; break;
            case '(': t = T_OPENPAR; break;
            case ')': t = T_CLOSEPAR; break;
            case ',': t = T_COMMA; break;
            case '>': t = T_GT; break;
            case '<': t = T_LT; break;
            }
            push(p, t, i, s + i, 1);
            i++;
            continue;
        }
        size_t start = i;
        while (i < n && !is_space(s[i]) && !is_special(s[i]))
            i++;
        size_t len = i - start;
        enum tok t = T_ID;
        if (len == 2 && strncmp(s + start, "in", 2) == 0)
            t = T_IN;
        else if (len == 5 && strncmp(s + start, "notin", 5) == 0)
            t = T_NOTIN;
        push(p, t, start, s + start, len);
    }
}

/* In a value position the keywords are plain identifiers. */
static enum tok look(struct parser *p, bool values)
{
    enum tok t = p->toks[p->pos].t;
    if (values && (t == T_IN || t == T_NOTIN))
        t = T_ID;
    return t;
}

static struct token *take(struct parser *p)
{
    struct token *t = &p->toks[p->pos];
    if (p->pos + 1 < p->ntok)
        p->pos++;
    return t;
}

static bool alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], at most 63 */
static bool valid_name(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !alnum(s[0]) || !alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* DNS-1123 subdomain: lowercase labels of [a-z0-9-] joined by '.', at most 253 */
static bool valid_subdomain(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            size_t len = i - start;
            if (len == 0)
                return false;
            const char *l = s + start;
            bool lower_alnum_first = (l[0] >= 'a' && l[0] <= 'z') || (l[0] >= '0' && l[0] <= '9');
            char e = l[len - 1];
            bool lower_alnum_last = (e >= 'a' && e <= 'z') || (e >= '0' && e <= '9');
            if (!lower_alnum_first || !lower_alnum_last)
                return false;
            for (size_t k = 0; k < len; k++) {
                char c = l[k];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                    return false;
            }
            start = i + 1;
        }
    }
    return true;
}

static int check_key(struct parser *p, const struct token *t)
{
    const char *k = t->lit;
    const char *slash = strchr(k, '/');
    if (slash) {
        if (strchr(slash + 1, '/'))
            return set_err(p, t->off, "invalid label key \"%.80s\": more than one '/'", k);
        if (!valid_subdomain(k, (size_t)(slash - k)))
            return set_err(p, t->off, "invalid label key \"%.80s\": prefix must be a DNS subdomain",
                           k);
        k = slash + 1;
    }
    if (!valid_name(k, strlen(k)))
        return set_err(p, t->off,
                       "invalid label key \"%.80s\": name must be 63 characters or less, "
                       "alphanumeric at both ends, with '-', '_' or '.' between",
                       t->lit);
    return 0;
}

static int check_value(struct parser *p, size_t off, const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || valid_name(v, n))
        return 0;
    return set_err(p, off,
                   "invalid label value \"%.80s\": must be 63 characters or less, empty or "
                   "alphanumeric at both ends, with '-', '_' or '.' between",
                   v);
}

static void add_val(struct req *r, const char *v)
{
    r->vals = xrealloc(r->vals, (r->nvals + 1) * sizeof(char *));
    r->vals[r->nvals++] = xstrdup(v);
}

static const char *tname(const struct token *t)
{
    return t->t == T_EOS ? "end of string" : t->lit;
}

/* "(" values ")" with apimachinery's tolerance of empty members */
static int parse_values(struct parser *p, struct req *r)
{
    struct token *t = take(p);
    if (t->t != T_OPENPAR)
        return set_err(p, t->off, "found '%s' expected: '('", tname(t));
    enum tok la = look(p, true);
    if (la == T_CLOSEPAR) {
        take(p);
        add_val(r, "");
        return 0;
    }
    if (la != T_ID && la != T_COMMA)
        return set_err(p, p->toks[p->pos].off, "found '%s', expected: ',', ')' or identifier",
                       tname(&p->toks[p->pos]));
    for (;;) {
        t = take(p);
        enum tok tt = (t->t == T_IN || t->t == T_NOTIN) ? T_ID : t->t;
        if (tt == T_ID) {
            if (check_value(p, t->off, t->lit) < 0)
                return -EINVAL;
            add_val(r, t->lit);
            enum tok n = look(p, true);
            if (n == T_COMMA)
                continue;
            if (n == T_CLOSEPAR) {
                take(p);
                return 0;
            }
            return set_err(p, p->toks[p->pos].off, "found '%s', expected: ',' or ')'",
                           tname(&p->toks[p->pos]));
        }
        if (tt == T_COMMA) {
            if (r->nvals == 0)
                add_val(r, "");
            enum tok n = look(p, true);
            if (n == T_CLOSEPAR) {
                add_val(r, "");
                take(p);
                return 0;
            }
            if (n == T_COMMA) { /* ",," is one value "", as apimachinery consumes it */
                take(p);
                add_val(r, "");
            }
            continue;
        }
        return set_err(p, t->off, "found '%s', expected: ',', or identifier", tname(t));
    }
}

static int parse_exact(struct parser *p, struct req *r)
{
    enum tok la = look(p, true);
    if (la == T_EOS || la == T_COMMA) {
        add_val(r, "");
        return 0;
    }
    struct token *t = take(p);
    if (la != T_ID)
        return set_err(p, t->off, "found '%s', expected: identifier", tname(t));
    if (check_value(p, t->off, t->lit) < 0)
        return -EINVAL;
    add_val(r, t->lit);
    return 0;
}

static int parse_requirement(struct parser *p, struct req *r)
{
    bool neg = false;
    struct token *t = take(p);
    if (t->t == T_NOT) {
        neg = true;
        t = take(p);
    }
    enum tok tt = (t->t == T_IN || t->t == T_NOTIN) ? T_ID : t->t;
    if (tt != T_ID)
        return set_err(p, t->off, "found '%s', expected: identifier", tname(t));
    if (check_key(p, t) < 0)
        return -EINVAL;
    r->key = xstrdup(t->lit);
    enum tok la = look(p, true);
    if (la == T_EOS || la == T_COMMA) {
        r->op = neg ? OP_NOT_EXISTS : OP_EXISTS;
        return 0;
    }
    if (neg) /* "!key" must stand alone */
        return set_err(p, p->toks[p->pos].off, "found '%s', expected: ',' or end of string",
                       tname(&p->toks[p->pos]));
    struct token *o = take(p);
    switch (o->t) {
    case T_IN: r->op = OP_IN; return parse_values(p, r);
    case T_NOTIN: r->op = OP_NOTIN; return parse_values(p, r);
    case T_EQ:
    case T_DEQ: r->op = OP_EQ; return parse_exact(p, r);
    case T_NEQ: r->op = OP_NEQ; return parse_exact(p, r);
    case T_GT:
    case T_LT: {
        r->op = o->t == T_GT ? OP_GT : OP_LT;
        size_t voff = p->toks[p->pos].off;
        if (parse_exact(p, r) < 0)
            return -EINVAL;
        if (util_parse_int64(r->vals[0], &r->num) < 0)
            return set_err(p, voff, "for 'Gt', 'Lt' operators, the value must be an integer");
        return 0;
    }
    default:
        return set_err(p, o->off, "found '%s', expected: in, notin, =, ==, !=, gt, lt", tname(o));
    }
}

static void free_req(struct req *r)
{
    xfree(r->key);
    for (size_t i = 0; i < r->nvals; i++)
        xfree(r->vals[i]);
    xfree(r->vals);
}

void extmetrics_selector_free(struct extmetrics_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->n; i++)
        free_req(&sel->reqs[i]);
    xfree(sel->reqs);
    xfree(sel);
}

int extmetrics_selector_parse(const char *s, struct extmetrics_selector **out,
                              struct extmetrics_parse_error *err)
{
    struct parser p = {.s = s ? s : "", .err = err};
    struct extmetrics_selector *sel = xcalloc(1, sizeof(*sel));
    int rc = 0;
    *out = NULL;
    if (err)
        memset(err, 0, sizeof(*err));
    if (strlen(p.s) > 4096) {
        rc = set_err(&p, 4096, "selector longer than 4096 bytes");
        goto out;
    }
    lex(&p);
    for (;;) {
        enum tok la = look(&p, true);
        if (la == T_EOS)
            break;
        if (la != T_ID && la != T_NOT) {
            rc = set_err(&p, p.toks[p.pos].off, "found '%s', expected: !, identifier, or "
                         "end of string", tname(&p.toks[p.pos]));
            goto out;
        }
        struct req r = {0};
        rc = parse_requirement(&p, &r);
        if (rc < 0) {
            free_req(&r);
            goto out;
        }
        sel->reqs = xrealloc(sel->reqs, (sel->n + 1) * sizeof(*sel->reqs));
        sel->reqs[sel->n++] = r;
        struct token *t = take(&p);
        if (t->t == T_EOS)
            break;
        if (t->t != T_COMMA) {
            rc = set_err(&p, t->off, "found '%s', expected: ',' or end of string", tname(t));
            goto out;
        }
        la = look(&p, true);
        if (la != T_ID && la != T_NOT) {
            rc = set_err(&p, p.toks[p.pos].off, "found '%s', expected: identifier after ','",
                         tname(&p.toks[p.pos]));
            goto out;
        }
    }
out:
    for (size_t i = 0; i < p.ntok; i++)
        xfree(p.toks[i].lit);
    xfree(p.toks);
    if (rc < 0) {
        extmetrics_selector_free(sel);
        return rc;
    }
    *out = sel;
    return 0;
}

static const char *lookup(const struct extmetrics_label *l, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].key, key) == 0)
            return l[i].value;
    return NULL;
}

static bool has(const struct req *r, const char *v)
{
    for (size_t i = 0; i < r->nvals; i++)
        if (strcmp(r->vals[i], v) == 0)
            return true;
    return false;
}

bool extmetrics_selector_matches(const struct extmetrics_selector *sel,
                                 const struct extmetrics_label *labels, size_t n)
{
    for (size_t i = 0; sel && i < sel->n; i++) {
        const struct req *r = &sel->reqs[i];
        const char *v = lookup(labels, n, r->key);
        bool ok = false;
        int64_t num;
        switch (r->op) {
        case OP_EXISTS: ok = v != NULL; break;
        case OP_NOT_EXISTS: ok = v == NULL; break;
        case OP_EQ:
        case OP_IN: ok = v && has(r, v); break;
        case OP_NEQ:
        case OP_NOTIN: ok = !v || !has(r, v); break;
        case OP_GT:
        case OP_LT:
            ok = v && util_parse_int64(v, &num) == 0 &&
                 (r->op == OP_GT ? num > r->num : num < r->num);
            break;
        }
        if (!ok)
            return false;
    }
    return true;
}

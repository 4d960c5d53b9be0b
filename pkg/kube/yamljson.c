/* SPDX-License-Identifier: Apache-2.0 */
/* kube/yamljson: a kubeconfig YAML subtree as the JSON client-go makes of it
 * (sigs.k8s.io/yaml's YAMLToJSON, v1.4.0 on, over its goyaml.v2 fork of
 * go-yaml v2.4.0), for the cluster extension an exec plugin gets as
 * spec.cluster.config, and the checks client-go's loader makes on the way.
 *
 * A quoted scalar (or one tagged !!str) is a string; a plain one is resolved
 * as go-yaml v2 resolves it into an untyped value: null (empty, ~, null), a
 * YAML 1.1 boolean (y, yes, on, true and their negations, in three cases), an
 * integer (decimal, 0x, 0o, 0b or a leading 0 for octal, underscores
 * ignored), a float (digits with a point or an exponent; a leading point as
 * Go's ParseFloat reads it, an underscore only between digits), else a
 * string. A timestamp (2006-1-2...) is a string as written: go-yaml keeps a
 * !!timestamp's text when decoding into interface{}. An integer from 2^63 to
 * 2^64-1 is a JSON number (a double here: jansson has no wider integer); one
 * past 64 bits written in decimal or octal digits matches go-yaml's float
 * form and is a float; one in 0x, 0o or 0b is a *big.Int in the fork (an
 * exact JSON number; upstream go-yaml v2 keeps a string), which jansson
 * cannot carry, so it stays a string here. .inf and .nan stay strings (Go's
 * encoder fails on them).
 *
 * Map keys are resolved the same way and written as YAMLToJSON writes them:
 * a plain `yes:` or `on:` is "true", `no:`/`off:` "false", `0x10:` "16",
 * `1.50:` "1.5" (Go's FormatFloat(k, 'g', -1, 32): float32 precision,
 * `1e+06` past 6 digits), `.inf:` ".inf"; a quoted key is as written. A plain
 * key and the quoted key of the same text are two keys when go-yaml types the
 * plain one (pkg/conf keeps both, kube_conf_key_typed); two keys that give the
 * same JSON text (`true:` and `'true':`) are one JSON key, the later in the
 * document winning (YAMLToJSON ranges over a Go map, so client-go's pick is
 * random). A key go-yaml makes a null, an unsigned or a big integer is
 * refused: client-go fails to load such a kubeconfig ("unsupported map key
 * of type"), and so does kube_conf_check_keys. Pure: no I/O, no logging. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "kube-int.h"

static bool one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* go-yaml v2's float form: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool yaml_float(const char *s)
{
    const char *p = s + (*s == '-' || *s == '+');
    size_t lead = strspn(p, "0123456789");
    p += lead;
    if (*p == '.') {
        size_t frac = strspn(p + 1, "0123456789");
        if (!lead && !frac)
            return false;
        p += 1 + frac;
    } else if (!lead) {
        return false;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        p += *p == '-' || *p == '+';
        size_t exp = strspn(p, "0123456789");
        if (!exp)
            return false;
        p += exp;
    }
    return *p == '\0';
}

/* Go's strconv.ParseUint(p, 0, 64) (p without underscores): 0, -ERANGE when
 * well formed but past 64 bits, -EINVAL otherwise. */
static int go_parse_uint(const char *p, uint64_t *out)
{
    unsigned base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        base = 16, p += 2;
    else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O'))
        base = 8, p += 2;
    else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B'))
        base = 2, p += 2;
    else if (p[0] == '0' && p[1])
        base = 8, p += 1;
    if (!*p)
        return -EINVAL;
    uint64_t v = 0;
    bool over = false;
    for (; *p; p++) {
        unsigned d = is_digit(*p)                 ? (unsigned)(*p - '0')
                     : (*p >= 'a' && *p <= 'z')   ? (unsigned)(*p - 'a' + 10)
                     : (*p >= 'A' && *p <= 'Z')   ? (unsigned)(*p - 'A' + 10)
                                                  : 99;
        if (d >= base)
            return -EINVAL;
        if (v > (UINT64_MAX - d) / base)
            over = true;
        else
            v = v * base + d;
    }
    *out = v;
    return over ? -ERANGE : 0;
}

/* Go's strconv.ParseInt(p, 0, 64). */
static bool go_parse_int(const char *p, json_int_t *out)
{
    bool neg = *p == '-';
    p += *p == '-' || *p == '+';
    uint64_t v;
    if (go_parse_uint(p, &v) < 0 || v > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
        return false;
    *out = neg ? (json_int_t)(0 - v) : (json_int_t)v;
    return true;
}

enum rkind { R_STR, R_NULL, R_BOOL, R_INT, R_UINT, R_BIG, R_FLOAT };

struct resolved {
    enum rkind kind;
    bool b;
    json_int_t i;
    double f;
};

static char *strip_underscores(const char *s)
{
    char *plain = xmalloc(strlen(s) + 1);
    size_t k = 0;
    for (; *s; s++)
        if (*s != '_')
            plain[k++] = *s;
    plain[k] = '\0';
    return plain;
}

/* A plain scalar as go-yaml v2's resolve() types it. */
static void resolve(const char *s, struct resolved *r)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"y", "Y", "yes", "Yes", "YES", "true", "True",
                                        "TRUE", "on", "On", "ON", NULL};
    static const char *const falses[] = {"n", "N", "no", "No", "NO", "false", "False",
                                         "FALSE", "off", "Off", "OFF", NULL};
    static const char *const nans[] = {".nan", ".NaN", ".NAN", NULL};
    static const char *const infs[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL};
    static const char *const ninfs[] = {"-.inf", "-.Inf", "-.INF", NULL};
    memset(r, 0, sizeof(*r));
    r->kind = R_STR;
    if (one_of(s, nulls)) {
        r->kind = R_NULL;
    } else if (one_of(s, trues) || one_of(s, falses)) {
        r->kind = R_BOOL;
        r->b = one_of(s, trues);
    } else if (one_of(s, nans) || one_of(s, infs) || one_of(s, ninfs)) {
        r->kind = R_FLOAT;
        r->f = one_of(s, nans) ? NAN : one_of(s, infs) ? INFINITY : -INFINITY;
    } else if (s[0] == '.') {
        /* Go's ParseFloat(s): an underscore only between two digits */
        bool ok = true;
        for (const char *u = strchr(s, '_'); ok && u; u = strchr(u + 1, '_'))
            ok = is_digit(u[-1]) && is_digit(u[1]);
        char *plain = strip_underscores(s);
        if (ok && yaml_float(plain) && isfinite(r->f = strtod(plain, NULL)))
            r->kind = R_FLOAT;
        xfree(plain);
    } else if (is_digit(s[0]) || s[0] == '-' || s[0] == '+') {
        /* a timestamp (2006-1-2...) is go-yaml's !!timestamp, but decoded
         * into interface{} it is the scalar's own text: it parses as no
         * number below, so it stays a string */
        char *plain = strip_underscores(s); /* go-yaml drops them all here */
        uint64_t u;
        int urc = go_parse_uint(plain, &u);
        if (go_parse_int(plain, &r->i))
            r->kind = R_INT;
        else if (urc == 0)
            r->kind = R_UINT, r->f = (double)u;
        else if (yaml_float(plain) && isfinite(r->f = strtod(plain, NULL)))
            r->kind = R_FLOAT;
        else if (urc == -ERANGE)
            r->kind = R_BIG;
        xfree(plain);
    }
}

static json_t *scalar_json(const struct conf_node *n)
{
    const char *s = n->scalar;
    if (n->quoted)
        return json_string(s);
    struct resolved r;
    resolve(s, &r);
    switch (r.kind) {
    case R_NULL:
        return json_null();
    case R_BOOL:
        return json_boolean(r.b);
    case R_INT:
        return json_integer(r.i);
    case R_UINT: /* past int64: jansson has no larger integer */
        return json_real(r.f);
    case R_FLOAT:
        if (isfinite(r.f))
            return json_real(r.f);
        break;
    case R_STR:
    case R_BIG:
        break;
    }
    return json_string(s);
}

/* Go's strconv.FormatFloat(v, 'g', -1, 32), with go-yaml's .inf, -.inf, .nan. */
static void go_float32_g(double v, char *out, size_t len)
{
    float f = (float)v;
    if (isnan(f)) {
        snprintf(out, len, ".nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, len, f > 0 ? ".inf" : "-.inf");
        return;
    }
    if (f == 0) {
        snprintf(out, len, signbit(f) ? "-0" : "0");
        return;
    }
    /* the shortest digits that read back as f */
    char e[40];
    for (int p = 1; p <= 9; p++) {
        snprintf(e, sizeof(e), "%.*e", p - 1, (double)f);
        if (strtof(e, NULL) == f)
            break;
    }
    const char *q = e;
    bool neg = *q == '-';
    q += neg;
    char digits[16];
    size_t nd = 0;
    for (; *q && *q != 'e'; q++)
        if (is_digit(*q) && nd + 1 < sizeof(digits))
            digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int exp = (int)strtol(q + 1, NULL, 10);
    struct util_buf b = {0};
    if (neg)
        util_buf_puts(&b, "-");
    if (exp < -4 || exp >= 6) { /* Go: %e past the shortest form's precision 6 */
        util_buf_printf(&b, "%c", digits[0]);
        if (nd > 1)
            util_buf_printf(&b, ".%s", digits + 1);
        util_buf_printf(&b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        util_buf_puts(&b, "0.");
        for (int i = -1; i > exp; i--)
            util_buf_puts(&b, "0");
        util_buf_puts(&b, digits);
    } else {
        int dp = exp + 1;
        for (int i = 0; i < dp; i++)
            util_buf_printf(&b, "%c", (size_t)i < nd ? digits[i] : '0');
        if ((size_t)dp < nd)
            util_buf_printf(&b, ".%s", digits + dp);
    }
    snprintf(out, len, "%s", b.data);
    util_buf_free(&b);
}

/* Map m's key i as YAMLToJSON writes it, into buf (or m's own text); NULL
 * with *type set (Go's name for it) when client-go refuses the key. */
static const char *key_text(const struct conf_node *m, size_t i, char *buf, size_t len,
                            const char **type)
{
    const char *s = m->keys[i];
    if (!m->key_quoted || m->key_quoted[i])
        return s;
    struct resolved r;
    resolve(s, &r);
    switch (r.kind) {
    case R_STR:
        return s;
    case R_NULL:
        *type = "<nil>";
        return NULL;
    case R_BOOL:
        return r.b ? "true" : "false";
    case R_INT:
        snprintf(buf, len, "%lld", (long long)r.i);
        return buf;
    case R_UINT:
        *type = "uint64";
        return NULL;
    case R_BIG:
        *type = "*big.Int";
        return NULL;
    case R_FLOAT:
        go_float32_g(r.f, buf, len);
        return buf;
    }
    return s;
}

int kube_conf_check_keys(const struct conf_node *n, const struct conf_node **at, char *msg,
                         size_t len)
{
    for (size_t i = 0; n->type != CONF_SCALAR && i < n->n; i++) {
        if (n->type == CONF_MAP) {
            char buf[64];
            const char *type = NULL;
            if (!key_text(n, i, buf, sizeof(buf), &type)) {
                *at = n->items[i];
                snprintf(msg, len,
                         "map key '%.80s' reads as a %s in YAML, which client-go cannot make a "
                         "JSON key of (unsupported map key); quote it",
                         n->keys[i], type);
                return -EINVAL;
            }
        }
        int rc = kube_conf_check_keys(n->items[i], at, msg, len);
        if (rc < 0)
            return rc;
    }
    return 0;
}

json_t *kube_conf_to_json(const struct conf_node *n)
{
    switch (n->type) {
    case CONF_SCALAR: {
        json_t *j = scalar_json(n);
        return j ? j : json_null(); /* a string not UTF-8: libyaml admits none */
    }
    case CONF_SEQ: {
        json_t *a = json_array();
        for (size_t i = 0; i < n->n; i++)
            json_array_append_new(a, kube_conf_to_json(n->items[i]));
        return a;
    }
    case CONF_MAP: {
        json_t *o = json_object();
        for (size_t i = 0; i < n->n; i++) {
            char buf[64];
            const char *type = NULL;
            const char *k = key_text(n, i, buf, sizeof(buf), &type);
            /* a later key of the same text replaces an earlier one, as go-yaml's map */
            json_object_set_new(o, k ? k : n->keys[i], kube_conf_to_json(n->items[i]));
        }
        return o;
    }
    }
    return json_null();
}

bool kube_conf_key_typed(const char *plain)
{
    struct resolved r;
    resolve(plain, &r);
    return r.kind != R_STR;
}

const char *kube_conf_scalar_kind(const struct conf_node *n)
{
    if (n->type != CONF_SCALAR || n->quoted)
        return NULL;
    struct resolved r;
    resolve(n->scalar, &r);
    switch (r.kind) {
    case R_STR:
        return NULL;
    case R_NULL:
        return "null";
    case R_BOOL:
        return "bool";
    case R_INT:
    case R_UINT:
    case R_BIG:
    case R_FLOAT:
        break;
    }
    return "number";
}

int kube_conf_scalar_bool(const struct conf_node *n, bool *out)
{
    *out = false;
    if (n->type != CONF_SCALAR || n->quoted)
        return -1;
    struct resolved r;
    resolve(n->scalar, &r);
    if (r.kind == R_NULL)
        return 0;
    if (r.kind != R_BOOL)
        return -1;
    *out = r.b;
    return 1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* kube/yamljson: a kubeconfig YAML subtree as the JSON client-go makes of it
 * (sigs.k8s.io/yaml over go-yaml v2), for the cluster extension an exec
 * plugin gets as spec.cluster.config.
 *
 * A quoted scalar is a string; a plain one is resolved as go-yaml v2
 * resolves it into an untyped value: null (empty, ~, null), a YAML 1.1
 * boolean (y, yes, on, true and their negations, in three cases), an integer
 * (decimal, 0x, 0o, 0b or a leading 0 for octal, underscores ignored), a
 * float (digits with a point or an exponent), else a string. .inf and .nan,
 * which JSON cannot carry, stay strings. Pure: no I/O, no logging. */
#include <errno.h>
#include <stdint.h>
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

/* An integer as Go's strconv.ParseInt(s, 0, 64) reads it, underscores
 * removed first (as go-yaml v2 does). */
static bool yaml_int(const char *s, json_int_t *out)
{
    char buf[80];
    size_t n = 0;
    for (const char *p = s; *p; p++) {
        if (*p == '_')
            continue;
        if (n + 1 >= sizeof(buf))
            return false;
        buf[n++] = *p;
    }
    buf[n] = '\0';
    const char *p = buf;
    bool neg = *p == '-';
    p += *p == '-' || *p == '+';
    int base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        base = 16, p += 2;
    else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O'))
        base = 8, p += 2;
    else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B'))
        base = 2, p += 2;
    else if (p[0] == '0' && p[1])
        base = 8, p += 1;
    if (!*p || *p == '-' || *p == '+' || *p == ' ')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, base);
    if (errno || *end || v > (unsigned long long)INT64_MAX + (neg ? 1u : 0u))
        return false;
    *out = neg ? (json_int_t)(0 - v) : (json_int_t)v;
    return true;
}

static json_t *scalar_json(const struct conf_node *n)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"y", "Y", "yes", "Yes", "YES", "true", "True",
                                        "TRUE", "on", "On", "ON", NULL};
    static const char *const falses[] = {"n", "N", "no", "No", "NO", "false", "False",
                                         "FALSE", "off", "Off", "OFF", NULL};
    const char *s = n->scalar;
    if (n->quoted)
        return json_string(s);
    if (one_of(s, nulls))
        return json_null();
    if (one_of(s, trues))
        return json_true();
    if (one_of(s, falses))
        return json_false();
    json_int_t i;
    if (yaml_int(s, &i))
        return json_integer(i);
    if (yaml_float(s)) {
        json_t *r = json_real(strtod(s, NULL)); /* NULL out of range (1e400): kept as text */
        if (r)
            return r;
    }
    return json_string(s);
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
        for (size_t i = 0; i < n->n; i++)
            json_object_set_new(o, n->keys[i], kube_conf_to_json(n->items[i]));
        return o;
    }
    }
    return json_null();
}

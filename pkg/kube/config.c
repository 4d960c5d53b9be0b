/* SPDX-License-Identifier: Apache-2.0 */
/* kube/config: where the API server is and how to authenticate: kubeconfig
 * files (read into pkg/conf's tree with CONF_GO_YAML: anchors, aliases, merge
 * keys and repeated keys as client-go reads them) and the in-cluster service
 * account.
 *
 * kube_config_parse() is pure (buffer in, struct out, error with line and
 * column) so that tests and the fuzzer drive it directly; the files are read
 * in kube/config-load.c. kubeconfig is a
 * foreign format that grows fields over time, so keys gpuscaler does not use
 * are ignored rather than rejected; what would silently change how we
 * authenticate or connect (auth-provider, basic auth, impersonation) is an
 * error naming the context and user. An http:// server, or one without a
 * scheme (which client-go reads as http://), is used as client-go uses it:
 * without the user's credentials or the cluster's TLS settings. Exec
 * credential plugins are parsed here and run by kube/exec.c. */
#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf/conf.h"
#include "kube-int.h"

static int cfail(struct kube_config_error *err, const struct conf_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int cfail(struct kube_config_error *err, const struct conf_node *at, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->line = at ? at->line : 0;
        err->col = at ? at->col : 0;
    }
    return -EINVAL;
}

void kube_config_clear(struct kube_config *c)
{
    if (!c)
        return;
    xfree(c->server);
    xfree(c->ca_file);
    xfree(c->ca_data);
    xfree(c->cert_file);
    xfree(c->cert_data);
    xfree(c->key_file);
    if (c->key_data)
        explicit_bzero(c->key_data, c->key_data_len);
    xfree(c->key_data);
    if (c->token)
        explicit_bzero(c->token, strlen(c->token));
    xfree(c->token);
    xfree(c->token_file);
    xfree(c->proxy_url);
    xfree(c->proxy_url_orig);
    xfree(c->tls_server_name);
    xfree(c->exec_cluster_config);
    kube_exec_config_free(c->exec);
    xfree(c->context);
    xfree(c->user);
    xfree(c->namespace_);
    *c = (struct kube_config){0};
}

/* ---- base64 ------------------------------------------------------------- */

/*
 * OpenSSL's EVP_DecodeBlock does the decoding. It takes whole 4-character
 * groups without whitespace, reads '=' as the value 0 (so it would accept
 * "YQ==YQ==" and count the padding as decoded bytes) and ignores a trailing
 * '-'; so the input is checked here first: whitespace dropped, at most two
 * '=' and only at the end, a missing padding added, and the true length is
 * three bytes per group minus the padding.
 */
int kube_base64_decode(const char *in, size_t len, char **out, size_t *outlen)
{
    char *clean = NULL;
    unsigned char *buf = NULL;
    int rc = -EINVAL;
    if (len > (size_t)INT32_MAX / 2)
        goto out;
    clean = xmalloc(len + 4);
    size_t n = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=')
            pad++;
        else if (pad) /* data after padding */
            goto out;
        clean[n++] = c;
    }
    if (pad > 2 || (pad && n % 4 != 0) || n % 4 == 1)
        goto out;
    while (n % 4 != 0) { /* padding is optional */
        clean[n++] = '=';
        pad++;
    }
    buf = xmalloc(n / 4 * 3 + 1);
    int got = n ? EVP_DecodeBlock(buf, (const unsigned char *)clean, (int)n) : 0;
    if (got < 0 || (size_t)got != n / 4 * 3)
        goto out;
    size_t m = (size_t)got - pad;
    buf[m] = '\0';
    *out = (char *)buf;
    *outlen = m;
    buf = NULL;
    rc = 0;
out:
    xfree(clean);
    xfree(buf);
    return rc;
}

char *kube_base64_encode(const uint8_t *in, size_t len)
{
    char *out = xmalloc((len + 2) / 3 * 4 + 1);
    size_t o = 0;
    /* EVP_EncodeBlock takes an int length: whole blocks of 3 at a time */
    while (len > 0) {
        size_t n = len > 3u * (1u << 28) ? 3u * (1u << 28) : len;
        o += (size_t)EVP_EncodeBlock((unsigned char *)out + o, in, (int)n);
        in += n;
        len -= n;
    }
    out[o] = '\0';
    return out;
}

/* ---- kubeconfig --------------------------------------------------------- */

/* A scalar at key in map (NULL when absent); non-scalars are errors. */
static int get_scalar(const struct conf_node *map, const char *key, const char **out,
                      struct kube_config_error *err, const char *where)
{
    *out = NULL;
    const struct conf_node *n = conf_map_get(map, key);
    if (!n)
        return 0;
    if (n->type != CONF_SCALAR)
        return cfail(err, n, "%s: %s must be a string, not a %s", where, key,
                     conf_type_name(n->type));
    *out = n->scalar[0] ? n->scalar : NULL;
    return 0;
}

/* A plain scalar YAML types as a bool or number in a string field fails
 * client-go's load: clientcmd converts the whole file to JSON untyped
 * (YAMLToJSON), and a JSON true or 8080 does not decode into a Go string. */
static int check_string(const struct conf_node *n, const char *what, const char *where,
                        struct kube_config_error *err)
{
    const char *kind = kube_conf_scalar_kind(n);
    if (!kind || strcmp(kind, "null") == 0)
        return 0;
    return cfail(err, n, "%s: %s must be a string, and YAML reads '%.80s' as a %s, as client-go "
                 "does (quote it)", where, what, n->scalar, kind);
}

/* A string field at key: as get_scalar, a plain null (~, null) being
 * absent, as in client-go. */
static int get_str(const struct conf_node *map, const char *key, const char **out,
                   struct kube_config_error *err, const char *where)
{
    int rc = get_scalar(map, key, out, err, where);
    if (rc < 0 || !*out)
        return rc;
    const struct conf_node *n = conf_map_get(map, key);
    if ((rc = check_string(n, key, where, err)) < 0)
        return rc;
    if (kube_conf_scalar_kind(n))
        *out = NULL;
    return 0;
}

/* A bool field at key, read as client-go reads it (kube_conf_scalar_bool):
 * absent or null is false. */
static int get_bool(const struct conf_node *map, const char *key, bool *out,
                    struct kube_config_error *err, const char *where)
{
    *out = false;
    const struct conf_node *n = conf_map_get(map, key);
    if (!n || kube_conf_scalar_bool(n, out) >= 0)
        return 0;
    if (n->type != CONF_SCALAR)
        return cfail(err, n, "%s: %s must be true or false, not a %s", where, key,
                     conf_type_name(n->type));
    return cfail(err, n, "%s: %s must be true or false, and YAML reads '%.80s' as a %s, as "
                 "client-go does", where, key, n->scalar,
                 n->quoted ? "string" : kube_conf_scalar_kind(n) ? kube_conf_scalar_kind(n)
                                                                 : "string");
}

/* The entry named name in a list of {name: ..., <inner>: {...}}; NULL if absent. */
static int find_named(const struct conf_node *root, const char *list, const char *inner,
                      const char *name, const struct conf_node **out,
                      struct kube_config_error *err)
{
    *out = NULL;
    const struct conf_node *seq = conf_map_get(root, list);
    if (!seq || (seq->type == CONF_SCALAR && seq->scalar[0] == '\0'))
        return 0;
    if (seq->type != CONF_SEQ)
        return cfail(err, seq, "%s must be a list", list);
    static const struct conf_node empty = {.type = CONF_MAP};
    for (size_t i = 0; i < seq->n; i++) {
        const struct conf_node *e = seq->items[i];
        const char *kind = kube_conf_scalar_kind(e);
        if (kind && strcmp(kind, "null") == 0) { /* an entry with no name and nothing */
            if (name[0])
                continue;
            *out = &empty;
            return 0;
        }
        if (e->type != CONF_MAP)
            return cfail(err, e, "%s[%zu] must be a map", list, i);
        const struct conf_node *nm = conf_map_get(e, "name");
        if (nm && nm->type != CONF_SCALAR)
            return cfail(err, e, "%s[%zu].name must be a string", list, i);
        /* no name, or a null one, is the empty name (client-go's zero value) */
        if (strcmp(!nm || kube_conf_scalar_kind(nm) ? "" : nm->scalar, name) != 0)
            continue;
        const struct conf_node *in = conf_map_get(e, inner);
        if (!in || (in->type == CONF_SCALAR && in->scalar[0] == '\0')) {
            *out = &empty;
            return 0;
        }
        if (in->type != CONF_MAP)
            return cfail(err, in, "%s \"%s\": %s must be a map", list, name, inner);
        *out = in;
        return 0;
    }
    return 0;
}

struct named {
    const char *name;
    size_t i;
    const struct conf_node *at;
};

static int cmp_named(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* client-go refuses a file whose clusters, users or contexts list names
 * two entries alike (its conversion to maps: duplicate name "x" in list),
 * used or not; the first such entry in the file is named. Sorted, so that
 * a long list costs n log n. */
static int check_unique(const struct conf_node *root, const char *list,
                        struct kube_config_error *err)
{
    const struct conf_node *seq = conf_map_get(root, list);
    if (!seq || seq->type != CONF_SEQ || seq->n == 0)
        return 0;
    struct named *v = xcalloc(seq->n, sizeof(*v));
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < seq->n; i++) {
        /* every entry decodes into a named struct, used or not: a null is one
         * with no name, but another scalar or a list does not decode
         * (cannot unmarshal !!str into NamedCluster) */
        const char *kind = kube_conf_scalar_kind(seq->items[i]);
        if (kind && strcmp(kind, "null") == 0) {
            v[n++] = (struct named){"", i, seq->items[i]};
            continue;
        }
        if (seq->items[i]->type != CONF_MAP) {
            rc = cfail(err, seq->items[i], "%s[%zu] must be a map", list, i);
            goto out;
        }
        const struct conf_node *nm = conf_map_get(seq->items[i], "name");
        if (!nm) { /* no name decodes as the empty one, as a null does */
            v[n++] = (struct named){"", i, seq->items[i]};
            continue;
        }
        /* and its name into a Go string (a list or a map does not: cannot
         * unmarshal !!seq into string) */
        char what[64];
        snprintf(what, sizeof(what), "%s[%zu].name", list, i);
        if (nm->type != CONF_SCALAR) {
            rc = cfail(err, nm, "%s: %s must be a string, not a %s", list, what,
                       nm->type == CONF_SEQ ? "list" : "map");
            goto out;
        }
        if ((rc = check_string(nm, what, list, err)) < 0)
            goto out;
        v[n++] = (struct named){kube_conf_scalar_kind(nm) ? "" : nm->scalar, i, seq->items[i]};
    }
    qsort(v, n, sizeof(*v), cmp_named);
    const struct named *dup = NULL;
    for (size_t k = 1; k < n; k++)
        if (strcmp(v[k - 1].name, v[k].name) == 0 && (!dup || v[k].i < dup->i))
            dup = &v[k];
    rc = dup ? cfail(err, dup->at, "%s: the name \"%.200s\" is given twice", list, dup->name)
             : 0;
out:
    xfree(v);
    return rc;
}

static char *resolve_path(const char *base_dir, const char *p)
{
    if (p[0] == '/' || !base_dir || !base_dir[0])
        return xstrdup(p);
    return xasprintf("%s/%s", base_dir, p);
}

static int decode_field(const struct conf_node *map, const char *key, char **data, size_t *len,
                        struct kube_config_error *err, const char *where)
{
    const char *s;
    int rc = get_str(map, key, &s, err, where);
    if (rc < 0 || !s)
        return rc;
    if (kube_base64_decode(s, strlen(s), data, len) < 0)
        return cfail(err, conf_map_get(map, key), "%s: %s is not valid base64", where, key);
    return 0;
}

void kube_exec_config_free(struct kube_exec_config *e)
{
    if (!e)
        return;
    xfree(e->api_version);
    xfree(e->command);
    for (size_t i = 0; i < e->nargs; i++)
        xfree(e->args[i]);
    xfree(e->args);
    for (size_t i = 0; i < e->nenv; i++) {
        explicit_bzero(e->env[i], strlen(e->env[i])); /* plugins take secrets this way too */
        xfree(e->env[i]);
    }
    xfree(e->env);
    xfree(e->install_hint);
    xfree(e);
}

/* A user's exec block, checked as client-go's validation does. */
static int parse_exec(const struct conf_node *ex, const char *base_dir, const char *where,
                      struct kube_exec_config **outp, struct kube_config_error *err)
{
    struct kube_exec_config *e = xcalloc(1, sizeof(*e));
    const char *api, *cmd, *hint, *mode;
    bool pci = false;
    int rc;
    if (ex->type != CONF_MAP) {
        rc = cfail(err, ex, "%s: exec must be a map", where);
        goto fail;
    }
    if ((rc = get_str(ex, "apiVersion", &api, err, where)) < 0 ||
        (rc = get_str(ex, "command", &cmd, err, where)) < 0 ||
        (rc = get_str(ex, "installHint", &hint, err, where)) < 0 ||
        (rc = get_str(ex, "interactiveMode", &mode, err, where)) < 0 ||
        (rc = get_bool(ex, "provideClusterInfo", &pci, err, where)) < 0)
        goto fail;
    if (!cmd) {
        rc = cfail(err, ex, "%s: exec: command must be specified", where);
        goto fail;
    }
    if (!api) {
        rc = cfail(err, ex, "%s: exec: apiVersion must be specified", where);
        goto fail;
    }
    bool v1 = strcmp(api, "client.authentication.k8s.io/v1") == 0;
    if (!v1 && strcmp(api, "client.authentication.k8s.io/v1beta1") != 0) {
        rc = cfail(err, conf_map_get(ex, "apiVersion"),
                   "%s: exec: apiVersion %s is not supported (client.authentication.k8s.io/v1 "
                   "or /v1beta1)", where, api);
        goto fail;
    }
    /* client-go defaults an unset mode to IfAvailable for v1beta1 only */
    if (!mode && v1) {
        rc = cfail(err, ex, "%s: exec: interactiveMode must be specified with %s "
                   "(Never or IfAvailable)", where, api);
        goto fail;
    }
    if (mode && strcmp(mode, "Never") != 0 && strcmp(mode, "IfAvailable") != 0) {
        rc = cfail(err, conf_map_get(ex, "interactiveMode"),
                   strcmp(mode, "Always") == 0
                       ? "%s: exec: interactiveMode %s needs a terminal, and gpuscaler runs "
                         "without one (use Never or IfAvailable)"
                       : "%s: exec: interactiveMode %s is not Never, IfAvailable or Always",
                   where, mode);
        goto fail;
    }
    e->api_version = xstrdup(api);
    /* as client-go: a command with a slash is a path, relative to the kubeconfig */
    e->command = strchr(cmd, '/') ? resolve_path(base_dir, cmd) : xstrdup(cmd);
    e->install_hint = hint ? xstrdup(hint) : NULL;
    e->provide_cluster_info = pci;
    const struct conf_node *args = conf_map_get(ex, "args");
    if (args && !(args->type == CONF_SCALAR && args->scalar[0] == '\0')) {
        if (args->type != CONF_SEQ) {
            rc = cfail(err, args, "%s: exec: args must be a list", where);
            goto fail;
        }
        e->args = xcalloc(args->n ? args->n : 1, sizeof(*e->args));
        for (size_t i = 0; i < args->n; i++) {
            if (args->items[i]->type != CONF_SCALAR) {
                rc = cfail(err, args->items[i], "%s: exec: args[%zu] must be a string", where, i);
                goto fail;
            }
            char what[40];
            snprintf(what, sizeof(what), "exec: args[%zu]", i);
            if ((rc = check_string(args->items[i], what, where, err)) < 0)
                goto fail;
            e->args[e->nargs++] = xstrdup(kube_conf_scalar_kind(args->items[i])
                                              ? "" /* a null */
                                              : args->items[i]->scalar);
        }
    }
    const struct conf_node *env = conf_map_get(ex, "env");
    if (env && !(env->type == CONF_SCALAR && env->scalar[0] == '\0')) {
        if (env->type != CONF_SEQ) {
            rc = cfail(err, env, "%s: exec: env must be a list", where);
            goto fail;
        }
        e->env = xcalloc(env->n ? env->n : 1, sizeof(*e->env));
        for (size_t i = 0; i < env->n; i++) {
            const struct conf_node *it = env->items[i];
            const char *name = NULL, *value = NULL;
            if (it->type != CONF_MAP) {
                rc = cfail(err, it, "%s: exec: env[%zu] must be a map of name and value", where,
                           i);
                goto fail;
            }
            if ((rc = get_str(it, "name", &name, err, where)) < 0 ||
                (rc = get_str(it, "value", &value, err, where)) < 0)
                goto fail;
            if (!name || strchr(name, '=')) {
                rc = cfail(err, it, "%s: exec: env[%zu]: a name must be specified, without '='",
                           where, i);
                goto fail;
            }
            if (!value) {
                rc = cfail(err, it, "%s: exec: env variable %s: a value must be specified", where,
                           name);
                goto fail;
            }
            e->env[e->nenv++] = xasprintf("%s=%s", name, value);
        }
    }
    *outp = e;
    return 0;
fail:
    kube_exec_config_free(e);
    return rc;
}

/* The entry named name in list, from the first document that has one (as
 * client-go merges KUBECONFIG's files); *doc is its index, and the
 * document's on an error. */
static int find_named_docs(struct conf_node *const *roots, size_t n, const char *list,
                           const char *inner, const char *name, const struct conf_node **out,
                           size_t *doc, struct kube_config_error *err)
{
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        *doc = i;
        if (err)
            err->doc = i;
        int rc = find_named(roots[i], list, inner, name, out, err);
        if (rc < 0 || *out)
            return rc;
    }
    return 0;
}

/* The cluster's extension named client.authentication.k8s.io/exec (what
 * client-go passes an exec plugin as spec.cluster.config), as JSON text;
 * *out stays NULL without one. */
static int exec_extension(const struct conf_node *cl, const char *where, char **out,
                          struct kube_config_error *err)
{
    *out = NULL;
    const struct conf_node *seq = conf_map_get(cl, "extensions");
    if (!seq || (seq->type == CONF_SCALAR && seq->scalar[0] == '\0'))
        return 0;
    if (seq->type != CONF_SEQ)
        return cfail(err, seq, "%s: extensions must be a list", where);
    for (size_t i = 0; i < seq->n; i++) {
        const struct conf_node *nm = conf_map_get(seq->items[i], "name");
        if (seq->items[i]->type != CONF_MAP || !nm || nm->type != CONF_SCALAR ||
            strcmp(nm->scalar, "client.authentication.k8s.io/exec") != 0)
            continue;
        const struct conf_node *ext = conf_map_get(seq->items[i], "extension");
        if (!ext)
            return 0;
        json_t *j = kube_conf_to_json(ext);
        char *text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(j);
        if (text) {
            *out = xstrdup(text);
            free(text); /* style: allow (jansson's allocation) */
        }
        return 0;
    }
    return 0;
}

/* The length of s's scheme when it starts "scheme://", as Go's url.Parse
 * reads a scheme ([A-Za-z][A-Za-z0-9+.-]*); else 0. */
static size_t scheme_len(const char *s)
{
    size_t i = 0;
    if (!isalpha((unsigned char)s[0]))
        return 0;
    while (isalnum((unsigned char)s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.')
        i++;
    return strncmp(s + i, "://", 3) == 0 ? i : 0;
}

/*
 * The cluster's server as requests use it (*url: owned, no trailing slash,
 * no query or fragment: client-go drops them, or replaces the query with
 * the request's). A URL must be http or https (the scheme is case
 * insensitive, as in Go) and have a host. Without a scheme, client-go's
 * rest.DefaultServerURL prepends one, https only with TLS settings in the
 * rest.Config; but clientcmd decides it (rest.IsConfigTransportTLS) before
 * it merges in the cluster's CA and insecure-skip-tls-verify and the user's
 * certificate, so a kubeconfig's host:port is always http://. Over http://,
 * written or so defaulted, clientcmd reads neither the user's credentials
 * nor the cluster's TLS settings ("only try to read the auth information if
 * we are secure"): *plain is then set. A path after host:port is refused, as
 * DefaultServerURL does.
 */
static int server_url(const struct conf_node *cl, const char *server, const char *where,
                      char **url, bool *plain, struct kube_config_error *err)
{
    const struct conf_node *at = conf_map_get(cl, "server") ? conf_map_get(cl, "server") : cl;
    *url = NULL;
    if (!server)
        return cfail(err, at, "%s: server must be an http:// or https:// URL", where);
    /* Go's url.Parse refuses control characters, and a URL has no spaces */
    for (const unsigned char *q = (const unsigned char *)server; *q; q++)
        if (*q <= 0x20 || *q == 0x7f)
            return cfail(err, at, "%s: server %s is not a URL with a host", where, server);
    size_t slen = scheme_len(server);
    const char *rest = slen ? server + slen + 3 : server;
    if (slen) {
        if (!(slen == 4 && strncasecmp(server, "http", 4) == 0) &&
            !(slen == 5 && strncasecmp(server, "https", 5) == 0))
            return cfail(err, at, "%s: server must be an http:// or https:// URL", where);
        if (*rest == '\0' || strchr("/?#", *rest)) /* "https:///api" */
            return cfail(err, at, "%s: server %s is not a URL with a host", where, server);
        *plain = slen == 4;
    } else {
        /* host, host:port or [v6]:port, and at most a "/" */
        size_t alen = strcspn(server, "/?#");
        if (alen == 0 || server[0] == ':' || (server[alen] && strcmp(server + alen, "/") != 0))
            return cfail(err, at, "%s: server %s: host must be a URL or a host:port pair", where,
                         server);
        *plain = true;
        slen = 4;
    }
    size_t rl = strcspn(rest, "?#");
    while (rl > 0 && rest[rl - 1] == '/')
        rl--;
    *url = xasprintf("%s://%.*s", slen == 5 ? "https" : "http", (int)rl, rest);
    return 0;
}

/* Over plain http client-go sets no TLS and sends no credential
 * (clientcmd's ClientConfig reads them only when IsConfigTransportTLS);
 * c->plain_unused says whether there were any. */
static void drop_tls_and_auth(struct kube_config *c)
{
    bool unused = c->ca_file || c->ca_data || c->cert_file || c->cert_data || c->token ||
                  c->token_file || c->insecure || c->tls_server_name || c->exec;
    struct kube_config keep = {.server = c->server, .proxy_url = c->proxy_url,
                               .proxy_url_orig = c->proxy_url_orig, .context = c->context,
                               .user = c->user, .namespace_ = c->namespace_,
                               .disable_compression = c->disable_compression};
    c->server = c->proxy_url = c->proxy_url_orig = NULL;
    c->context = c->user = c->namespace_ = NULL;
    kube_config_clear(c); /* the rest: CA, insecure, tls-server-name, credentials */
    *c = keep;
    c->plain_unused = unused;
}

/* No document names a context, cluster or user (client-go's IsEmptyConfig;
 * current-context was looked at already). */
static bool empty_config(struct conf_node *const *roots, size_t ndocs)
{
    static const char *const lists[] = {"contexts", "clusters", "users"};
    for (size_t i = 0; i < ndocs; i++)
        for (size_t k = 0; k < UTIL_ARRAY_LEN(lists); k++) {
            const struct conf_node *l = conf_map_get(roots[i], lists[k]);
            if (l && l->type == CONF_SEQ && l->n > 0)
                return false;
        }
    return true;
}

int kube_config_parse(const char *buf, size_t len, const char *context, const char *base_dir,
                      struct kube_config *out, struct kube_config_error *err)
{
    struct kube_config_doc d = {.buf = buf, .len = len, .base_dir = base_dir};
    return kube_config_parse_docs(&d, 1, context, out, err);
}

int kube_config_parse_docs(const struct kube_config_doc *docs, size_t ndocs, const char *context,
                           struct kube_config *out, struct kube_config_error *err)
{
    struct conf_node **roots = xcalloc(ndocs ? ndocs : 1, sizeof(*roots));
    static const struct conf_node empty_map = {.type = CONF_MAP};
    static const struct conf_opts go_yaml = {.flags = CONF_GO_YAML,
                                             .key_typed = kube_conf_key_typed};
    struct conf_error cerr = {0};
    char where[300];
    int rc = -EINVAL;
    *out = (struct kube_config){0};
    if (err)
        *err = (struct kube_config_error){0};
    if (ndocs == 0) {
        rc = cfail(err, NULL, "no kubeconfig");
        goto out;
    }

    const char *cur = NULL;
    for (size_t i = 0; i < ndocs; i++) {
        if (err)
            err->doc = i;
        rc = conf_parse_opts(docs[i].buf, docs[i].len, &go_yaml, &roots[i], &cerr);
        if (rc < 0) {
            if (err) {
                err->line = cerr.line;
                err->col = cerr.col;
                snprintf(err->msg, sizeof(err->msg), "kubeconfig: %s", cerr.msg);
            }
            rc = -EINVAL;
            goto out;
        }
        if (roots[i]->type == CONF_SCALAR && roots[i]->scalar[0] == '\0') {
            conf_free(roots[i]); /* an empty file adds nothing, as in client-go */
            roots[i] = (struct conf_node *)&empty_map;
        }
        if (roots[i]->type != CONF_MAP) {
            rc = cfail(err, roots[i], "kubeconfig must be a map");
            goto out;
        }
        const struct conf_node *badkey;
        char kmsg[200];
        if (kube_conf_check_keys(roots[i], &badkey, kmsg, sizeof(kmsg)) < 0) {
            rc = cfail(err, badkey, "kubeconfig: %s", kmsg);
            goto out;
        }
        const char *c;
        if ((rc = get_str(roots[i], "current-context", &c, err, "kubeconfig")) < 0 ||
            (rc = check_unique(roots[i], "clusters", err)) < 0 ||
            (rc = check_unique(roots[i], "users", err)) < 0 ||
            (rc = check_unique(roots[i], "contexts", err)) < 0)
            goto out;
        if (!cur)
            cur = c; /* the first file that sets it */
    }
    if (err)
        err->doc = 0;
    const struct conf_node *root = roots[0];
    size_t dctx, dcl, du;
    bool plain = false; /* an http:// server (or one without a scheme), as client-go */
    const char *ctxname = context && context[0] ? context : cur;
    if (!ctxname && empty_config(roots, ndocs)) {
        cfail(err, NULL, "kubeconfig is empty: no current-context, context, cluster or user");
        rc = -ENODATA;
        goto out;
    }
    if (!ctxname) {
        rc = cfail(err, root, "kubeconfig has no current-context and no context was given");
        goto out;
    }
    const struct conf_node *ctx;
    if ((rc = find_named_docs(roots, ndocs, "contexts", "context", ctxname, &ctx, &dctx, err)) < 0)
        goto out;
    if (!ctx) {
        if (err)
            err->doc = 0;
        rc = cfail(err, ndocs == 1 ? conf_map_get(root, "contexts") : NULL,
                   "context \"%s\" not found in kubeconfig", ctxname);
        goto out;
    }
    if (err)
        err->doc = dctx;
    snprintf(where, sizeof(where), "context \"%s\"", ctxname);
    const char *cluster_name, *user_name, *ns;
    if ((rc = get_str(ctx, "cluster", &cluster_name, err, where)) < 0 ||
        (rc = get_str(ctx, "user", &user_name, err, where)) < 0 ||
        (rc = get_str(ctx, "namespace", &ns, err, where)) < 0)
        goto out;
    if (!cluster_name) {
        rc = cfail(err, ctx, "%s names no cluster", where);
        goto out;
    }
    const struct conf_node *cl;
    if ((rc = find_named_docs(roots, ndocs, "clusters", "cluster", cluster_name, &cl, &dcl,
                              err)) < 0)
        goto out;
    if (!cl) {
        if (err)
            err->doc = dctx;
        rc = cfail(err, ctx, "%s: cluster \"%s\" not found", where, cluster_name);
        goto out;
    }
    const char *base_dir = docs[dcl].base_dir; /* paths are relative to their own file */
    out->context = xstrdup(ctxname);
    out->namespace_ = xstrdup(ns ? ns : "default");

    /* Cluster. */
    snprintf(where, sizeof(where), "context \"%s\" cluster \"%s\"", ctxname, cluster_name);
    const char *server, *ca, *s;
    if ((rc = get_str(cl, "server", &server, err, where)) < 0 ||
        (rc = get_str(cl, "certificate-authority", &ca, err, where)) < 0 ||
        (rc = get_bool(cl, "insecure-skip-tls-verify", &out->insecure, err, where)) < 0 ||
        (rc = decode_field(cl, "certificate-authority-data", &out->ca_data, &out->ca_data_len,
                           err, where)) < 0 ||
        (rc = get_bool(cl, "disable-compression", &out->disable_compression, err, where)) < 0 ||
        (rc = exec_extension(cl, where, &out->exec_cluster_config, err)) < 0)
        goto out;
    /* as client-go's validation (it says the data would override the file) */
    if (ca && out->ca_data) {
        rc = cfail(err, cl, "%s: certificate-authority-data and certificate-authority are both "
                   "specified; keep one", where);
        goto out;
    }
    if ((rc = server_url(cl, server, where, &out->server, &plain, err)) < 0)
        goto out;
    const char *proxy;
    if ((rc = get_str(cl, "proxy-url", &proxy, err, where)) < 0)
        goto out;
    if (proxy) {
        /* client-go's schemes; its socks5 dialer lets the proxy resolve names,
         * which is curl's socks5h */
        const char *colon = strstr(proxy, "://");
        size_t sl = colon ? (size_t)(colon - proxy) : 0;
        bool http = (sl == 4 && strncasecmp(proxy, "http", 4) == 0) ||
                    (sl == 5 && strncasecmp(proxy, "https", 5) == 0);
        bool socks = sl == 6 && strncasecmp(proxy, "socks5", 6) == 0;
        if ((!http && !socks) || !colon[3] || strpbrk(proxy, " \t\r\n")) {
            rc = cfail(err, conf_map_get(cl, "proxy-url"),
                       "%s: proxy-url %s: the scheme must be http, https or socks5", where,
                       proxy);
            goto out;
        }
        out->proxy_url = socks ? xasprintf("socks5h%s", colon) : xstrdup(proxy);
        /* as client-go passes it to an exec plugin: url.URL.String() */
        out->proxy_url_orig = xstrdup(proxy);
        for (size_t i = 0; i < sl; i++)
            out->proxy_url_orig[i] = (char)tolower((unsigned char)proxy[i]);
    }
    if ((rc = get_str(cl, "tls-server-name", &s, err, where)) < 0)
        goto out;
    if (s) {
        /* a host name (or address) TLS checks the certificate against */
        bool ok = strlen(s) <= 253;
        for (const char *q = s; ok && *q; q++)
            ok = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                 (*q >= '0' && *q <= '9') || *q == '.' || *q == '-' || *q == '_';
        if (!ok) {
            rc = cfail(err, conf_map_get(cl, "tls-server-name"),
                       "%s: tls-server-name %s is not a host name", where, s);
            goto out;
        }
        out->tls_server_name = xstrdup(s);
    }
    if (ca)
        out->ca_file = resolve_path(base_dir, ca);
    if (out->insecure && (out->ca_file || out->ca_data)) {
        rc = cfail(err, cl, "%s: a certificate authority together with "
                   "insecure-skip-tls-verify is not allowed", where);
        goto out;
    }

    /* User. */
    if (!user_name)
        goto done; /* anonymous */
    out->user = xstrdup(user_name);
    const struct conf_node *u;
    if ((rc = find_named_docs(roots, ndocs, "users", "user", user_name, &u, &du, err)) < 0)
        goto out;
    if (!u) {
        if (err)
            err->doc = dctx;
        rc = cfail(err, ctx, "context \"%s\": user \"%s\" not found", ctxname, user_name);
        goto out;
    }
    base_dir = docs[du].base_dir;
    snprintf(where, sizeof(where), "context \"%s\" user \"%s\"", ctxname, user_name);
    static const struct {
        const char *key, *what;
    } unsupported_user[] = {
        {"auth-provider", "auth-provider plugins are not supported"},
        {"username", "basic auth (username/password) is not supported"},
        {"password", "basic auth (username/password) is not supported"},
        {"as", "impersonation is not supported"},
        {"as-uid", "impersonation is not supported"},
        {"as-groups", "impersonation is not supported"},
        {"as-user-extra", "impersonation is not supported"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(unsupported_user); i++) {
        const struct conf_node *n = conf_map_get(u, unsupported_user[i].key);
        if (n && !(n->type == CONF_SCALAR && n->scalar[0] == '\0')) {
            rc = cfail(err, n, "%s: %s; use a token, tokenFile or client certificate "
                       "(e.g. a service account kubeconfig)", where, unsupported_user[i].what);
            goto out;
        }
    }
    const char *tok, *tokfile, *cert, *key;
    if ((rc = get_str(u, "token", &tok, err, where)) < 0 ||
        (rc = get_str(u, "tokenFile", &tokfile, err, where)) < 0 ||
        (rc = get_str(u, "client-certificate", &cert, err, where)) < 0 ||
        (rc = get_str(u, "client-key", &key, err, where)) < 0 ||
        (rc = decode_field(u, "client-certificate-data", &out->cert_data, &out->cert_data_len, err,
                           where)) < 0 ||
        (rc = decode_field(u, "client-key-data", &out->key_data, &out->key_data_len, err,
                           where)) < 0)
        goto out;
    if ((cert && out->cert_data) || (key && out->key_data)) {
        rc = cfail(err, u, "%s: %s and %s are both specified; keep one", where,
                   cert && out->cert_data ? "client-certificate-data" : "client-key-data",
                   cert && out->cert_data ? "client-certificate" : "client-key");
        goto out;
    }
    if (tok)
        out->token = xstrdup(tok);
    if (tokfile)
        out->token_file = resolve_path(base_dir, tokfile);
    if (cert)
        out->cert_file = resolve_path(base_dir, cert);
    if (key)
        out->key_file = resolve_path(base_dir, key);
    bool has_cert = out->cert_file || out->cert_data;
    bool has_key = out->key_file || out->key_data;
    if (has_cert != has_key) {
        rc = cfail(err, u, "%s: a client certificate needs a client key and vice versa", where);
        goto out;
    }
    const struct conf_node *ex = conf_map_get(u, "exec");
    if (ex && !(ex->type == CONF_SCALAR && ex->scalar[0] == '\0')) {
        /* checked, but with a token, tokenFile or client certificate not
         * run: client-go's exec authenticator steps aside for them
         * (UpdateTransportConfig returns when HasTokenAuth or HasCertAuth) */
        struct kube_exec_config *exec = NULL;
        if ((rc = parse_exec(ex, base_dir, where, &exec, err)) < 0)
            goto out;
        if (out->token || out->token_file || has_cert)
            kube_exec_config_free(exec);
        else
            out->exec = exec;
    }
done:
    if (plain)
        drop_tls_and_auth(out);
    rc = 0;
out:
    for (size_t i = 0; i < ndocs; i++)
        if (roots[i] != &empty_map)
            conf_free(roots[i]);
    xfree(roots);
    if (rc < 0)
        kube_config_clear(out);
    return rc;
}

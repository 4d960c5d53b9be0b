/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for kube_config_parse: the current context and a fixed
 * context name, with a base directory for relative paths. The input is also
 * decoded as base64 (the *-data fields): an accepted input must decode to
 * bytes that OpenSSL's encoder and our decoder carry back unchanged. An
 * accepted exec plugin has a command and a supported apiVersion, env entries
 * NAME=value, and no other credential beside it. A NUL byte splits the input
 * into two documents merged as KUBECONFIG=a:b. With a tls-server-name, the
 * request URL names it and the connection goes to the server's host and port.
 * A cluster's exec extension (an exec plugin's spec.cluster.config) is JSON. */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube-int.h"
#include "kube/kube.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void base64_roundtrip(const uint8_t *data, size_t size)
{
    char *raw = NULL, *again = NULL;
    size_t n = 0, m = 0;
    if (kube_base64_decode((const char *)data, size, &raw, &n) != 0)
        return;
    if (raw[n] != '\0' || n > size)
        abort();
    unsigned char *enc = xmalloc(n / 3 * 4 + 8);
    int el = EVP_EncodeBlock(enc, (const unsigned char *)raw, (int)n);
    if (kube_base64_decode((const char *)enc, (size_t)el, &again, &m) != 0 || m != n ||
        memcmp(raw, again, n) != 0)
        abort();
    xfree(enc);
    xfree(raw);
    xfree(again);
}

/* An accepted exec plugin is one client-go would run, and the only credential.
 * Over http:// no credential or TLS setting is kept; the URL has no query or
 * fragment. */
static void check_exec(const struct kube_config *c)
{
    if (c->server && strpbrk(c->server, "?#"))
        abort();
    if (c->server && strncmp(c->server, "http://", 7) == 0 &&
        (c->token || c->token_file || c->cert_file || c->cert_data || c->key_file ||
         c->key_data || c->ca_file || c->ca_data || c->insecure || c->tls_server_name || c->exec))
        abort();
    const struct kube_exec_config *x = c->exec;
    if (!x)
        return;
    if (c->token || c->token_file || c->cert_file || c->cert_data)
        abort();
    if (!x->command || !x->command[0] || !x->api_version ||
        (strcmp(x->api_version, "client.authentication.k8s.io/v1") != 0 &&
         strcmp(x->api_version, "client.authentication.k8s.io/v1beta1") != 0))
        abort();
    for (size_t i = 0; i < x->nenv; i++) {
        const char *eq = strchr(x->env[i], '=');
        if (!eq || eq == x->env[i])
            abort(); /* NAME=value, with a name */
    }
}

/* Where requests go: with a tls-server-name on https, the URL names it and
 * the connection is routed to the server's own host and port. */
static void check_route(const struct kube_config *c)
{
    char *url, *ct, *host;
    kube_route(c->server, c->tls_server_name, &url, &ct, &host);
    if (ct) {
        size_t n = strlen(c->tls_server_name);
        if (strncmp(url, "https://", 8) != 0 || strncmp(url + 8, c->tls_server_name, n) != 0 ||
            url[8 + n] != ':' || strncmp(ct, c->tls_server_name, n) != 0 || ct[n] != ':')
            abort();
        /* the Host header is the server's authority: a prefix of what follows https:// */
        if (!host || strncmp(host, "Host: ", 6) != 0 || host[6] == '\0' ||
            strncmp(c->server + 8, host + 6, strlen(host + 6)) != 0 ||
            strchr(host, '/') || strpbrk(host, "\r\n"))
            abort();
    } else if (strcmp(url, c->server) != 0 || host) {
        abort();
    }
    xfree(url);
    xfree(ct);
    xfree(host);
}

/* The cluster's exec extension, when there is one, is JSON an exec plugin
 * can be given (spec.cluster.config). */
static void check_extension(const struct kube_config *c)
{
    if (!c->exec_cluster_config)
        return;
    json_t *j = json_loads(c->exec_cluster_config, JSON_DECODE_ANY, NULL);
    if (!j)
        abort();
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kube_config c;
    struct kube_config_error e;
    if (kube_config_parse((const char *)data, size, NULL, "/base", &c, &e) == 0) {
        check_exec(&c);
        check_route(&c);
        check_extension(&c);
        kube_config_clear(&c);
    }
    if (kube_config_parse((const char *)data, size, "ctx", NULL, &c, &e) == 0)
        kube_config_clear(&c);
    /* a NUL byte splits the input into two files merged as KUBECONFIG=a:b */
    const uint8_t *nul = memchr(data, 0, size);
    if (nul) {
        size_t n0 = (size_t)(nul - data);
        struct kube_config_doc docs[2] = {
            {.buf = (const char *)data, .len = n0, .base_dir = "/a"},
            {.buf = (const char *)nul + 1, .len = size - n0 - 1, .base_dir = "/b"},
        };
        int rc = kube_config_parse_docs(docs, 2, NULL, &c, &e);
        if (rc == 0) {
            check_exec(&c);
            kube_config_clear(&c);
        } else if (e.doc > 1 || e.msg[0] == '\0') {
            abort(); /* an error names one of the two files, and says what */
        }
    }
    base64_roundtrip(data, size);
    return 0;
}

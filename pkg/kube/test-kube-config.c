/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for kube/config: kubeconfig auth shapes, path resolution,
 * unsupported auth, context selection, servers without a scheme, YAML
 * anchors, merge keys and repeated keys in a kubeconfig and its YAML errors,
 * in-cluster files and base64. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <openssl/evp.h>

#include "kube/kube-int.h"
#include "kube/kube.h"
#include "util/util.h"

/* "hello" = aGVsbG8=, "-----BEGIN CERT-----" = LS0tLS1CRUdJTiBDRVJULS0tLS0= */
static const char *const base_doc =
    "apiVersion: v1\n"
    "kind: Config\n"
    "preferences: {}\n"
    "current-context: dev\n"
    "clusters:\n"
    "- name: c1\n"
    "  cluster:\n"
    "    server: https://10.0.0.1:6443/\n"
    "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJULS0tLS0=\n"
    "    extensions:\n"
    "    - name: client.authentication.k8s.io/exec\n"
    "      extension: {x: 1}\n"
    "- name: c2\n"
    "  cluster:\n"
    "    server: https://kind:443\n"
    "    certificate-authority: certs/ca.pem\n"
    "- name: c3\n"
    "  cluster:\n"
    "    server: https://127.0.0.1:8443\n"
    "    insecure-skip-tls-verify: true\n"
    "contexts:\n"
    "- name: dev\n"
    "  context: {cluster: c1, user: tok, namespace: ml}\n"
    "- name: files\n"
    "  context: {cluster: c2, user: certfiles}\n"
    "- name: data\n"
    "  context: {cluster: c1, user: certdata}\n"
    "- name: tokfile\n"
    "  context: {cluster: c3, user: tf}\n"
    "- name: anon\n"
    "  context: {cluster: c3}\n"
    "- name: gke\n"
    "  context: {cluster: c1, user: execuser}\n"
    "- name: old\n"
    "  context: {cluster: c1, user: provider}\n"
    "- name: basic\n"
    "  context: {cluster: c1, user: basic}\n"
    "- name: halfcert\n"
    "  context: {cluster: c1, user: half}\n"
    "- name: nouser\n"
    "  context: {cluster: c1, user: ghost}\n"
    "- name: nocluster\n"
    "  context: {cluster: ghost, user: tok}\n"
    "users:\n"
    "- name: tok\n"
    "  user: {token: abc.def}\n"
    "- name: certfiles\n"
    "  user:\n"
    "    client-certificate: certs/client.crt\n"
    "    client-key: /abs/client.key\n"
    "- name: certdata\n"
    "  user:\n"
    "    client-certificate-data: aGVsbG8=\n"
    "    client-key-data: aGVsbG8=\n"
    "- name: tf\n"
    "  user: {tokenFile: secrets/token}\n"
    "- name: execuser\n"
    "  user:\n"
    "    exec:\n"
    "      apiVersion: client.authentication.k8s.io/v1beta1\n"
    "      command: gke-gcloud-auth-plugin\n"
    "- name: provider\n"
    "  user:\n"
    "    auth-provider: {name: oidc}\n"
    "- name: basic\n"
    "  user: {username: admin, password: secret}\n"
    "- name: half\n"
    "  user: {client-certificate-data: aGVsbG8=}\n";

static int parse(const char *doc, const char *ctx, struct kube_config *c,
                 struct kube_config_error *e)
{
    return kube_config_parse(doc, strlen(doc), ctx, "/home/u/.kube", c, e);
}

static void test_token_and_current_context(void **state)
{
    (void)state;
    struct kube_config c;
    struct kube_config_error e;
    assert_int_equal(parse(base_doc, NULL, &c, &e), 0);
    assert_string_equal(c.server, "https://10.0.0.1:6443"); /* trailing slash dropped */
    assert_string_equal(c.context, "dev");
    assert_string_equal(c.user, "tok");
    assert_string_equal(c.namespace_, "ml");
    assert_string_equal(c.token, "abc.def");
    assert_null(c.token_file);
    assert_int_equal(c.ca_data_len, 20);
    assert_memory_equal(c.ca_data, "-----BEGIN CERT-----", 20);
    assert_null(c.ca_file);
    assert_false(c.insecure);
    kube_config_clear(&c);
    kube_config_clear(&c); /* idempotent */
    kube_config_clear(NULL);
}

static void test_cert_files_relative_paths(void **state)
{
    (void)state;
    struct kube_config c;
    struct kube_config_error e;
    assert_int_equal(parse(base_doc, "files", &c, &e), 0);
    assert_string_equal(c.server, "https://kind:443");
    assert_string_equal(c.ca_file, "/home/u/.kube/certs/ca.pem");
    assert_string_equal(c.cert_file, "/home/u/.kube/certs/client.crt");
    assert_string_equal(c.key_file, "/abs/client.key");
    assert_string_equal(c.namespace_, "default");
    assert_null(c.token);
    kube_config_clear(&c);

    assert_int_equal(parse(base_doc, "data", &c, &e), 0);
    assert_int_equal(c.cert_data_len, 5);
    assert_string_equal(c.cert_data, "hello");
    assert_string_equal(c.key_data, "hello");
    kube_config_clear(&c);

    assert_int_equal(parse(base_doc, "tokfile", &c, &e), 0);
    assert_string_equal(c.token_file, "/home/u/.kube/secrets/token");
    assert_true(c.insecure);
    assert_string_equal(c.server, "https://127.0.0.1:8443");
    kube_config_clear(&c);

    assert_int_equal(parse(base_doc, "anon", &c, &e), 0);
    assert_null(c.user);
    assert_null(c.token);
    kube_config_clear(&c);
}

static void test_unsupported_auth(void **state)
{
    (void)state;
    static const struct {
        const char *ctx, *want1, *want2;
    } cases[] = {
        {"old", "context \"old\" user \"provider\"", "auth-provider"},
        {"basic", "context \"basic\" user \"basic\"", "basic auth"},
        {"halfcert", "context \"halfcert\" user \"half\"", "needs a client key"},
        {"nouser", "context \"nouser\"", "user \"ghost\" not found"},
        {"nocluster", "context \"nocluster\"", "cluster \"ghost\" not found"},
        {"missing", "context \"missing\" not found", ""},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        struct kube_config c;
        struct kube_config_error e;
        assert_int_equal(parse(base_doc, cases[i].ctx, &c, &e), -EINVAL);
        if (!strstr(e.msg, cases[i].want1) || !strstr(e.msg, cases[i].want2))
            fail_msg("context %s: message \"%s\"", cases[i].ctx, e.msg);
        assert_null(c.server); /* cleared on error */
    }
    struct kube_config c;
    struct kube_config_error e;
    assert_int_equal(parse(base_doc, "old", &c, &e), -EINVAL);
    assert_true(e.line > 0); /* points at the auth-provider key */
}

/* Exec credential plugins: parsed, and checked as client-go's validation. */
static void test_exec(void **state)
{
    (void)state;
    struct kube_config c;
    struct kube_config_error e;
    assert_int_equal(parse(base_doc, "gke", &c, &e), 0);
    assert_non_null(c.exec);
    assert_null(c.token);
    assert_string_equal(c.exec->api_version, "client.authentication.k8s.io/v1beta1");
    assert_string_equal(c.exec->command, "gke-gcloud-auth-plugin"); /* looked up in PATH */
    assert_int_equal(c.exec->nargs, 0);
    assert_int_equal(c.exec->nenv, 0);
    assert_false(c.exec->provide_cluster_info);
    kube_config_clear(&c);

    static const char *const head =
        "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://h'}}]\nusers:\n- name: u\n  user:\n";
    char *doc = xasprintf("%s%s", head,
                          "    exec:\n"
                          "      apiVersion: client.authentication.k8s.io/v1\n"
                          "      command: bin/get-token\n"
                          "      args: [eks, get-token, --cluster-name, prod]\n"
                          "      env: [{name: AWS_PROFILE, value: ml}, {name: EMPTYOK, value: x}]\n"
                          "      interactiveMode: Never\n"
                          "      provideClusterInfo: true\n"
                          "      installHint: install the aws CLI\n");
    assert_int_equal(parse(doc, NULL, &c, &e), 0);
    assert_string_equal(c.exec->command, "/home/u/.kube/bin/get-token"); /* beside the file */
    assert_int_equal(c.exec->nargs, 4);
    assert_string_equal(c.exec->args[3], "prod");
    assert_int_equal(c.exec->nenv, 2);
    assert_string_equal(c.exec->env[0], "AWS_PROFILE=ml");
    assert_true(c.exec->provide_cluster_info);
    assert_string_equal(c.exec->install_hint, "install the aws CLI");
    kube_config_clear(&c);
    xfree(doc);

    static const struct {
        const char *exec, *want;
    } bad[] = {
        {"    exec: {apiVersion: client.authentication.k8s.io/v1, command: x}\n",
         "interactiveMode must be specified"},
        {"    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, "
         "interactiveMode: Always}\n", "needs a terminal"},
        {"    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, "
         "interactiveMode: Sometimes}\n", "is not Never, IfAvailable or Always"},
        {"    exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: x}\n",
         "v1alpha1 is not supported"},
        {"    exec: {command: x}\n", "apiVersion must be specified"},
        {"    exec: {apiVersion: client.authentication.k8s.io/v1beta1}\n",
         "command must be specified"},
        {"    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, "
         "env: [{name: A}]}\n", "env variable A: a value must be specified"},
        {"    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, "
         "env: [{value: v}]}\n", "a name must be specified"},
        {"    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, "
         "args: x}\n", "args must be a list"},
        {"    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, "
         "args: [[1]]}\n", "args[0] must be a string"},
        {"    exec: {apiVersion: client.authentication.k8s.io/v1beta1}\n"
         "    token: abc\n", "command must be specified"},
        {"    exec: [x]\n", "exec must be a map"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        doc = xasprintf("%s%s", head, bad[i].exec);
        assert_int_equal(parse(doc, NULL, &c, &e), -EINVAL);
        if (!strstr(e.msg, bad[i].want) || !strstr(e.msg, "context \"a\" user \"u\""))
            fail_msg("case %zu: message \"%s\"", i, e.msg);
        assert_true(e.line >= 6);
        assert_null(c.exec);
        xfree(doc);
    }
    /* beside a token, token file or client certificate the plugin is
     * checked but not run: client-go's exec authenticator steps aside for
     * them (before, a hard error) */
    static const char cert[] = "    client-certificate-data: aGVsbG8=\n"
                               "    client-key-data: aGVsbG8=\n";
    static const char *const with[] = {"    token: abc\n", "    tokenFile: /t\n", cert};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(with); i++) {
        doc = xasprintf("%s    exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                        "command: x}\n%s", head, with[i]);
        if (parse(doc, NULL, &c, &e) != 0)
            fail_msg("case %zu: %s", i, e.msg);
        assert_null(c.exec);
        assert_true(c.token || c.token_file || c.cert_data);
        kube_config_clear(&c);
        xfree(doc);
    }
}

static void test_structure_errors(void **state)
{
    (void)state;
    static const struct {
        const char *doc, *want;
    } cases[] = {
        {"clusters: [{name: c, cluster: {server: 'https://x'}}]\n", "no current-context"},
        {"- a\n- b\n", "must be a map"},
        {"current-context: x\ncontexts: 5\n", "contexts must be a list"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: ftp://x}}\n",
         "server must be an http"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: \"https://10.0.0.1\\r\\nX: y\"}}\n",
         "is not a URL with a host"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https://a b'}}\n",
         "server https://a b is not a URL with a host"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https:///api'}}\n",
         "is not a URL with a host"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: 'http://'}}\n",
         "is not a URL with a host"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https://x', certificate-authority-data: '@@'}}\n",
         "not valid base64"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https://x', proxy-url: 'ftp://p'}}\n",
         "proxy-url ftp://p: the scheme must be http, https or socks5"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https://x', proxy-url: 'p:3128'}}\n",
         "the scheme must be"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https://x', tls-server-name: 'a/b'}}\n",
         "tls-server-name a/b is not a host name"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https://x', insecure-skip-tls-verify: true,"
         " certificate-authority: /ca}}\n",
         "insecure-skip-tls-verify is not allowed"},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n"
         "clusters:\n- {name: c, cluster: {server: [1]}}\n",
         "server must be a string"},
        {"a: [unclosed\n", "kubeconfig:"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        struct kube_config c;
        struct kube_config_error e;
        if (parse(cases[i].doc, NULL, &c, &e) != -EINVAL || !strstr(e.msg, cases[i].want))
            fail_msg("case %zu: message \"%s\", want \"%s\"", i, e.msg, cases[i].want);
    }
}

/* proxy-url: client-go's schemes, socks5 resolving names at the proxy */
static void test_proxy_url(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"http://proxy:3128", "http://proxy:3128"},
        {"https://user:pw@proxy", "https://user:pw@proxy"},
        {"socks5://localhost:1080", "socks5h://localhost:1080"},
        {"SOCKS5://localhost:1080", "socks5h://localhost:1080"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        char *doc = xasprintf("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
                              "clusters: [{name: c, cluster: {server: 'https://h', "
                              "proxy-url: '%s'}}]\n", cases[i].in);
        struct kube_config c;
        struct kube_config_error e;
        assert_int_equal(parse(doc, NULL, &c, &e), 0);
        assert_string_equal(c.proxy_url, cases[i].out);
        kube_config_clear(&c);
        xfree(doc);
    }
}

/* tls-server-name: kept, and where requests then go */
static void test_tls_server_name(void **state)
{
    (void)state;
    struct kube_config c;
    struct kube_config_error e;
    const char *doc = "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
                      "clusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443', "
                      "tls-server-name: api.example.com}}]\n";
    assert_int_equal(parse(doc, NULL, &c, &e), 0);
    assert_string_equal(c.tls_server_name, "api.example.com");
    kube_config_clear(&c);
    static const struct {
        const char *server, *name, *url, *connect, *host;
    } cases[] = {
        {"https://10.0.0.1:6443", "api.example.com", "https://api.example.com:6443",
         "api.example.com:6443:10.0.0.1:6443", "Host: 10.0.0.1:6443"},
        {"https://10.0.0.1", "kubernetes", "https://kubernetes:443", "kubernetes:443:10.0.0.1:443",
         "Host: 10.0.0.1"},
        {"https://[fd00::1]:8443/k8s/clusters/c-1", "k", "https://k:8443/k8s/clusters/c-1",
         "k:8443:[fd00::1]:8443", "Host: [fd00::1]:8443"},
        {"https://lb.internal/prefix", "k", "https://k:443/prefix", "k:443:lb.internal:443",
         "Host: lb.internal"},
        {"http://127.0.0.1:8080", "k", "http://127.0.0.1:8080", NULL, NULL}, /* https only */
        {"https://h:1", NULL, "https://h:1", NULL, NULL},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        char *url, *ct, *host;
        kube_route(cases[i].server, cases[i].name, &url, &ct, &host);
        assert_string_equal(url, cases[i].url);
        if (cases[i].connect) {
            assert_string_equal(ct, cases[i].connect);
            assert_string_equal(host, cases[i].host);
        } else {
            assert_null(ct);
            assert_null(host);
        }
        xfree(url);
        xfree(ct);
        xfree(host);
    }
}

/* A server without a scheme, as client-go's clientcmd reads it: the scheme
 * is decided (rest.IsConfigTransportTLS) before the cluster's CA and the
 * user's certificate are merged in, so it is always http://. Over http://,
 * so defaulted or written, neither the user's credentials nor the cluster's
 * TLS settings are used ("only try to read the auth information if we are
 * secure"; before, an explicit http:// server got the token in clear). A
 * path after host:port is refused (rest.DefaultServerURL); a URL's query
 * and fragment are dropped, as clientcmd drops them. */
static void test_server_without_scheme(void **state)
{
    (void)state;
    static const struct {
        const char *server, *want;
    } ok[] = {
        {"10.0.0.1:6443", "http://10.0.0.1:6443"},
        {"example.com", "http://example.com"},
        {"localhost:8080/", "http://localhost:8080"},
        {"[fd00::1]:6443", "http://[fd00::1]:6443"},
        {"kind-control-plane:6443", "http://kind-control-plane:6443"},
        {"HTTPS://Example.com:6443", "https://Example.com:6443"}, /* Go lowers the scheme */
        {"http://10.0.0.1:8001", "http://10.0.0.1:8001"},
        {"HTTP://10.0.0.1:8001/", "http://10.0.0.1:8001"},
        {"https://h:6443/?x=1", "https://h:6443"},
        {"https://h:6443/k8s/clusters/c-1?x=1#f", "https://h:6443/k8s/clusters/c-1"},
        {"http://h:8001#top", "http://h:8001"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(ok); i++) {
        char *doc = xasprintf("current-context: x\n"
                              "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                              "clusters: [{name: c, cluster: {server: '%s', "
                              "certificate-authority-data: aGVsbG8=, tls-server-name: api}}]\n"
                              "users: [{name: u, user: {token: secret, "
                              "client-certificate-data: aGVsbG8=, client-key-data: aGVsbG8=}}]\n",
                              ok[i].server);
        struct kube_config c;
        struct kube_config_error e;
        if (parse(doc, NULL, &c, &e) != 0)
            fail_msg("server %s: %s", ok[i].server, e.msg);
        assert_string_equal(c.server, ok[i].want);
        if (strncmp(ok[i].want, "http://", 7) == 0) {
            /* over plain http client-go sends no credential and sets no TLS */
            assert_null(c.token);
            assert_null(c.cert_data);
            assert_null(c.key_data);
            assert_null(c.ca_data);
            assert_null(c.tls_server_name);
            assert_false(c.insecure);
            assert_string_equal(c.user, "u");
            assert_true(c.plain_unused); /* what the daemon says it does not use */
        } else {
            assert_string_equal(c.token, "secret");
            assert_non_null(c.ca_data);
            assert_false(c.plain_unused);
        }
        kube_config_clear(&c);
        xfree(doc);
    }
    /* no credential file or plugin is used either (they are still checked) */
    struct kube_config c;
    struct kube_config_error e;
    const char *doc = "current-context: x\n"
                      "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                      "clusters: [{name: c, cluster: {server: 10.0.0.1:6443, "
                      "insecure-skip-tls-verify: true}}]\n"
                      "users: [{name: u, user: {exec: {command: get-token, "
                      "apiVersion: client.authentication.k8s.io/v1beta1}}}]\n";
    assert_int_equal(parse(doc, NULL, &c, &e), 0);
    assert_string_equal(c.server, "http://10.0.0.1:6443");
    assert_null(c.exec);
    assert_false(c.insecure);
    assert_true(c.plain_unused);
    kube_config_clear(&c);
    /* kubectl proxy's: nothing to leave unused */
    doc = "current-context: x\n"
          "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
          "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8001'}}]\n"
          "users: [{name: u, user: {}}]\n";
    assert_int_equal(parse(doc, NULL, &c, &e), 0);
    assert_false(c.plain_unused);
    kube_config_clear(&c);
    doc = "current-context: x\n"
          "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
          "clusters: [{name: c, cluster: {server: 10.0.0.1:6443, certificate-authority: ca}}]\n"
          "users: [{name: u, user: {tokenFile: tok, client-certificate: crt, "
          "client-key: key}}]\n";
    assert_int_equal(parse(doc, NULL, &c, &e), 0);
    assert_null(c.ca_file);
    assert_null(c.token_file);
    assert_null(c.cert_file);
    assert_null(c.key_file);
    kube_config_clear(&c);
    doc = "current-context: x\n"
          "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
          "clusters: [{name: c, cluster: {server: 10.0.0.1:6443}}]\n"
          "users: [{name: u, user: {exec: {command: x}}}]\n";
    assert_int_equal(parse(doc, NULL, &c, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "apiVersion must be specified"));

    static const char *const bad[] = {"example.com/api", "10.0.0.1:6443/k8s/clusters/c-1",
                                      "a b:6443", "h:6443?x=1", ":6443"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        char *d = xasprintf("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
                            "clusters: [{name: c, cluster: {server: '%s'}}]\n", bad[i]);
        if (parse(d, NULL, &c, &e) != -EINVAL || !strstr(e.msg, bad[i]))
            fail_msg("server %s: message \"%s\"", bad[i], e.msg);
        xfree(d);
    }
}

static const char *const anchored_doc =
    "current-context: prod\n"
    "clusters:\n"
    "- name: prod\n"
    "  cluster: &cluster\n"
    "    server: https://10.0.0.1:6443\n"
    "    certificate-authority-data: &ca LS0tLS1CRUdJTiBDRVJULS0tLS0=\n"
    "- name: stage\n"
    "  cluster:\n"
    "    server: https://10.0.0.9:6443\n"    /* before the merge: the merged one wins */
    "    <<: *cluster\n"
    "    tls-server-name: stage.internal\n"
    "- name: lab\n"
    "  cluster:\n"
    "    <<: *cluster\n"
    "    server: https://10.0.0.2:6443\n"    /* after the merge: wins */
    "- name: two\n"
    "  cluster:\n"
    "    <<: [{server: 'https://first:1'}, *cluster]\n" /* the first map wins */
    "contexts:\n"
    "- name: prod\n"
    "  context: &ctx {cluster: prod, user: &u admin, namespace: ml}\n"
    "- name: stage\n"
    "  context: {<<: *ctx, cluster: stage}\n"
    "- name: lab\n"
    "  context:\n"
    "    <<: *ctx\n"
    "    cluster: lab\n"
    "- name: two\n"
    "  context: {cluster: two, user: *u}\n"
    "users:\n"
    "- name: *u\n"
    "  user:\n"
    "    token: first\n"
    "    token: last\n"; /* a repeated key: the last value, as go-yaml's Unmarshal */

/* A kubeconfig's YAML anchors, aliases, merge keys and repeated keys, read as
 * client-go's loader (sigs.k8s.io/yaml, go-yaml v2) reads them: contexts,
 * clusters and users that share their settings. */
static void test_anchors_and_merge_keys(void **state)
{
    (void)state;
    struct kube_config c;
    struct kube_config_error e;
    if (parse(anchored_doc, NULL, &c, &e) != 0)
        fail_msg("%d:%d: %s", e.line, e.col, e.msg);
    assert_string_equal(c.server, "https://10.0.0.1:6443");
    assert_string_equal(c.user, "admin");
    assert_string_equal(c.token, "last");
    assert_string_equal(c.namespace_, "ml");
    assert_int_equal(c.ca_data_len, 20);
    kube_config_clear(&c);
    assert_int_equal(parse(anchored_doc, "stage", &c, &e), 0);
    assert_string_equal(c.server, "https://10.0.0.1:6443");
    assert_string_equal(c.tls_server_name, "stage.internal");
    assert_string_equal(c.namespace_, "ml");
    assert_int_equal(c.ca_data_len, 20);
    kube_config_clear(&c);
    assert_int_equal(parse(anchored_doc, "lab", &c, &e), 0);
    assert_string_equal(c.server, "https://10.0.0.2:6443");
    assert_string_equal(c.token, "last");
    kube_config_clear(&c);
    assert_int_equal(parse(anchored_doc, "two", &c, &e), 0);
    assert_string_equal(c.server, "https://first:1");
    assert_int_equal(c.ca_data_len, 20);
    assert_string_equal(c.namespace_, "default");
    kube_config_clear(&c);
}

/* The kubeconfig's YAML errors are pkg/conf's (CONF_GO_YAML, tested there),
 * with their line and column: libyaml's own, tag checks, anchors and the
 * alias expansion's bounds. */
static void test_yaml_errors(void **state)
{
    (void)state;
    static const struct {
        const char *doc;
        int line, col;
        const char *msg;
    } bad[] = {
        /* the context on the problem's line: its column only */
        {"apiVersion: v1\nclusters: [\n", 3, 1,
         "kubeconfig: did not find expected node content (while parsing a flow node at "
         "column 1)"},
        {"current-context: !!null 2\n", 1, 18,
         "kubeconfig: tag '!!null' on '2', which is not null"},
        {"current-context: *nope\n", 1, 18, "kubeconfig: unknown anchor 'nope' referenced"},
        {"users: [{name: a, user: {<<: 5}}]\n", 1, 26,
         "kubeconfig: map merge requires map or sequence of maps as the value"},
    };
    struct kube_config c;
    struct kube_config_error e;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        if (parse(bad[i].doc, NULL, &c, &e) != -EINVAL || strcmp(e.msg, bad[i].msg) != 0 ||
            e.line != bad[i].line || e.col != bad[i].col)
            fail_msg("case %zu: %d:%d \"%s\", want %d:%d \"%s\"", i, e.line, e.col, e.msg,
                     bad[i].line, bad[i].col, bad[i].msg);
    }
    /* billion laughs: stopped at go-yaml's bound, where it is reached */
    struct util_buf b = {0};
    util_buf_printf(&b, "l0: &l0 [\"lol\", \"lol\"]\n");
    for (int i = 1; i < 40; i++)
        util_buf_printf(&b, "l%d: &l%d [*l%d, *l%d, *l%d, *l%d]\n", i, i, i - 1, i - 1, i - 1,
                        i - 1);
    assert_int_equal(parse(b.data, NULL, &c, &e), -EINVAL);
    assert_string_equal(e.msg, "kubeconfig: document contains excessive aliasing");
    assert_int_equal(e.line, 6);
    util_buf_free(&b);
}

static void test_base64(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
        int rc;
    } cases[] = {
        {"aGVsbG8=", "hello", 0}, {"aGVsbG8", "hello", 0},     {"aGVs\nbG8=", "hello", 0},
        {"", "", 0},              {"YQ==", "a", 0},            {"YWI=", "ab", 0},
        {"Y", NULL, -EINVAL},     {"aGV$bG8=", NULL, -EINVAL}, {"YQ==YQ==", NULL, -EINVAL},
        /* what EVP_DecodeBlock alone would get wrong or miss */
        {"YWJj", "abc", 0},       {"YQ", "a", 0},              {"YWI", "ab", 0},
        {" YW Jj\r\n", "abc", 0}, {"\t\n", "", 0},           {"YQ===", NULL, -EINVAL},
        {"Y===", NULL, -EINVAL},  {"=", NULL, -EINVAL},        {"==", NULL, -EINVAL},
        {"YWJj-", NULL, -EINVAL}, {"YQ-=", NULL, -EINVAL},     {"YQ=A", NULL, -EINVAL},
        {"YQ==\n=", NULL, -EINVAL}, {"YWJjZA=", NULL, -EINVAL}, {"YWJjZ", NULL, -EINVAL},
        {"YW\x80j", NULL, -EINVAL}, {"YW_j", NULL, -EINVAL},    {"YW-j", NULL, -EINVAL},
        {"AAAA", "\0\0\0", 0},   {"//79", "\xff\xfe\xfd", 0},  {"+/+/", "\xfb\xff\xbf", 0},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        char *out = NULL;
        size_t len = 0;
        int rc = kube_base64_decode(cases[i].in, strlen(cases[i].in), &out, &len);
        if (rc != cases[i].rc)
            fail_msg("base64 '%s': rc %d", cases[i].in, rc);
        if (rc == 0) {
            size_t want = strcmp(cases[i].in, "AAAA") == 0 ? 3 : strlen(cases[i].out);
            assert_int_equal(len, want);
            assert_memory_equal(out, cases[i].out, want);
            assert_int_equal(out[len], '\0');
        } else {
            assert_null(out);
        }
        xfree(out);
    }
    /* round trip through OpenSSL's encoder, padded and unpadded, every length */
    uint32_t x = 2463534242u;
    for (size_t n = 0; n < 200; n++) {
        unsigned char raw[200], enc[280];
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            raw[i] = (unsigned char)x;
        }
        int el = EVP_EncodeBlock(enc, raw, (int)n);
        for (int strip = 0; strip < 2; strip++) {
            size_t l = (size_t)el;
            while (strip && l && enc[l - 1] == '=')
                l--;
            char *out = NULL;
            size_t len = 0;
            assert_int_equal(kube_base64_decode((const char *)enc, l, &out, &len), 0);
            assert_int_equal(len, n);
            if (n)
                assert_memory_equal(out, raw, n);
            xfree(out);
        }
    }
}

static char tmpdir[64];

static void write_file(const char *name, const char *content)
{
    char *p = xasprintf("%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
    xfree(p);
}

static void test_in_cluster_and_files(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/kubecfg-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    write_file("token", "tok-1\n");
    write_file("ca.crt", "PEM");
    write_file("namespace", "gpu-system\n");
    char *tok = xasprintf("%s/token", tmpdir), *ca = xasprintf("%s/ca.crt", tmpdir),
         *nsf = xasprintf("%s/namespace", tmpdir);
    struct kube_incluster_opts o = {.host = "fd00::1", .port = "443", .token_path = tok,
                                    .ca_path = ca, .namespace_path = nsf};
    struct kube_config c;
    struct kube_config_error e;
    assert_int_equal(kube_config_in_cluster(&o, &c, &e), 0);
    assert_string_equal(c.server, "https://[fd00::1]:443");
    assert_string_equal(c.token_file, tok);
    assert_string_equal(c.ca_file, ca);
    assert_string_equal(c.namespace_, "gpu-system");
    kube_config_clear(&c);
    o.host = "10.96.0.1";
    assert_int_equal(kube_config_in_cluster(&o, &c, &e), 0);
    assert_string_equal(c.server, "https://10.96.0.1:443");
    kube_config_clear(&c);

    struct kube_incluster_opts none = {.host = "", .port = "443", .token_path = tok};
    assert_int_equal(kube_config_in_cluster(&none, &c, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "KUBERNETES_SERVICE_HOST"));
    o.token_path = "/nonexistent/token";
    assert_int_equal(kube_config_in_cluster(&o, &c, &e), -ENOENT);

    /* A kubeconfig file: relative paths resolve against its directory. */
    write_file("config", "current-context: a\n"
                         "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
                         "clusters: [{name: c, cluster: {server: 'https://h', "
                         "certificate-authority: ca.crt}}]\n"
                         "users: [{name: u, user: {tokenFile: token}}]\n");
    char *cfg = xasprintf("%s/config", tmpdir);
    assert_int_equal(kube_config_load_file(cfg, NULL, &c, &e), 0);
    assert_string_equal(c.ca_file, ca);
    assert_string_equal(c.token_file, tok);
    kube_config_clear(&c);

    /* $KUBECONFIG: a file of its list that does not exist is skipped. */
    char *env = xasprintf("%s:/nonexistent/second", cfg);
    setenv("KUBECONFIG", env, 1);
    assert_int_equal(kube_config_resolve(NULL, NULL, &c, &e), 0);
    assert_string_equal(c.server, "https://h");
    kube_config_clear(&c);
    /* The flag wins over the environment. */
    assert_int_equal(kube_config_resolve("/nonexistent/cfg", NULL, &c, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "/nonexistent/cfg"));

    /* Empty, or none of $KUBECONFIG's files there: in a cluster, in-cluster is
     * tried (as client-go's DeferredLoadingClientConfig; its token is not
     * here, which its error says), else the kubeconfig's error stands. A
     * missing file named by the flag stays an error. Before, "no kubeconfig
     * file exists" even in a pod. */
    write_file("empty", "");
    write_file("blank", "apiVersion: v1\nkind: Config\nclusters: []\nusers: null\n");
    char *empty = xasprintf("%s/empty", tmpdir), *blank = xasprintf("%s/blank", tmpdir);
    char *empties = xasprintf("%s:%s", empty, blank);
    assert_int_equal(kube_config_load_file(empty, NULL, &c, &e), -ENODATA);
    assert_non_null(strstr(e.msg, "kubeconfig is empty"));
    assert_non_null(strstr(e.msg, empty));
    assert_int_equal(kube_config_load_file(blank, "ctx", &c, &e), -EINVAL); /* a context asked */
    unsetenv("KUBERNETES_SERVICE_HOST");
    static const char *const lists[] = {"/nonexistent/a:/nonexistent/b", NULL, NULL};
    const char *const *cases[] = {&lists[0], (const char *const *)&empties,
                                  (const char *const *)&empty};
    for (int in_cluster = 0; in_cluster < 2; in_cluster++) {
        if (in_cluster) {
            setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
            setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        }
        for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
            setenv("KUBECONFIG", *cases[i], 1);
            int rc = kube_config_resolve(NULL, NULL, &c, &e);
            assert_true(rc < 0);
            if (in_cluster != (strstr(e.msg, "service account token") != NULL))
                fail_msg("KUBECONFIG=%s, in a cluster %d: \"%s\"", *cases[i], in_cluster,
                         e.msg);
        }
        int rc = kube_config_resolve(blank, NULL, &c, &e);
        assert_true(rc < 0 && in_cluster == (strstr(e.msg, "service account token") != NULL));
        assert_int_equal(kube_config_resolve("/nonexistent/cfg", NULL, &c, &e), -ENOENT);
        assert_non_null(strstr(e.msg, "/nonexistent/cfg"));
    }
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("KUBECONFIG");
    xfree(empties);
    xfree(empty);
    xfree(blank);

    /* Errors from a file carry its path and line. */
    write_file("bad", "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
                      "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                      "users:\n- name: u\n  user:\n    exec: {command: x}\n");
    char *bad = xasprintf("%s/bad", tmpdir);
    assert_int_equal(kube_config_load_file(bad, NULL, &c, &e), -EINVAL);
    char *want = xasprintf("%s:7:", bad);
    if (!strstr(e.msg, want))
        fail_msg("message \"%s\"", e.msg);

    xfree(want);
    xfree(bad);
    xfree(env);
    xfree(cfg);
    const char *names[] = {"token", "ca.crt", "namespace", "config", "bad", "empty", "blank"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++) {
        char *p = xasprintf("%s/%s", tmpdir, names[i]);
        unlink(p);
        xfree(p);
    }
    rmdir(tmpdir);
    xfree(tok);
    xfree(ca);
    xfree(nsf);
}

/* KUBECONFIG=a:b, as client-go merges it: the first current-context, the
 * first file naming a context, cluster or user wins, relative paths stay
 * relative to their own file; missing, empty and repeated entries change
 * nothing; errors name the file. */
static void test_merged_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/kubecfg-merge-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *da = xasprintf("%s/a", dir), *db = xasprintf("%s/b", dir);
    assert_int_equal(mkdir(da, 0700), 0);
    assert_int_equal(mkdir(db, 0700), 0);
    char *fa = xasprintf("%s/config", da), *fb = xasprintf("%s/config", db),
         *fe = xasprintf("%s/empty", dir), *fbad = xasprintf("%s/bad", dir);
    static const struct {
        const char *name, *text;
    } files[] = {
        {"a/config", "current-context: dev\n"
                     "contexts: [{name: dev, context: {cluster: c1, user: u, namespace: ml}}]\n"
                     "users: [{name: u, user: {tokenFile: tok}}]\n"},
        {"b/config", "current-context: other\n"
                     "contexts:\n- {name: dev, context: {cluster: nope, user: nope}}\n"
                     "- {name: other, context: {cluster: c1, user: v}}\n"
                     "clusters: [{name: c1, cluster: {server: 'https://h', "
                     "certificate-authority: ca.pem}}]\n"
                     "users: [{name: u, user: {token: ignored}}, {name: v, user: {token: vt}}]\n"},
        {"empty", ""},
        {"bad", "clusters: [\n"},
        {"b/ca.pem", "not checked at load, only opened\n"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(files); i++) {
        char *p = xasprintf("%s/%s", dir, files[i].name);
        FILE *fp = fopen(p, "w");
        assert_non_null(fp);
        fputs(files[i].text, fp);
        fclose(fp);
        xfree(p);
    }
    struct kube_config c;
    struct kube_config_error e;
    const char *both[] = {fa, "/nonexistent/x", fe, fb};
    assert_int_equal(kube_config_load_files(both, 4, NULL, &c, &e), 0);
    assert_string_equal(c.context, "dev");          /* a's current-context, a's context */
    assert_string_equal(c.namespace_, "ml");
    assert_string_equal(c.server, "https://h");      /* the cluster from b */
    char *want = xasprintf("%s/ca.pem", db);         /* relative to b */
    assert_string_equal(c.ca_file, want);
    xfree(want);
    want = xasprintf("%s/tok", da);                  /* the user from a, relative to a */
    assert_string_equal(c.token_file, want);
    assert_null(c.token);
    xfree(want);
    kube_config_clear(&c);
    /* a context only b has */
    assert_int_equal(kube_config_load_files(both, 4, "other", &c, &e), 0);
    assert_string_equal(c.token, "vt");
    kube_config_clear(&c);
    /* through $KUBECONFIG, with an empty entry and a repeat */
    char *env = xasprintf("%s::%s:%s", fa, fb, fa);
    setenv("KUBECONFIG", env, 1);
    assert_int_equal(kube_config_resolve(NULL, NULL, &c, &e), 0);
    assert_string_equal(c.context, "dev");
    assert_string_equal(c.server, "https://h");
    kube_config_clear(&c);
    unsetenv("KUBECONFIG");
    xfree(env);
    /* errors: the file and line of a broken one; a context no file has */
    const char *withbad[] = {fa, fbad};
    assert_int_equal(kube_config_load_files(withbad, 2, NULL, &c, &e), -EINVAL);
    want = xasprintf("%s:2:", fbad);
    if (!strstr(e.msg, want))
        fail_msg("message \"%s\"", e.msg);
    xfree(want);
    assert_int_equal(kube_config_load_files(both, 4, "ghost", &c, &e), -EINVAL);
    if (!strstr(e.msg, "and 2 more: context \"ghost\" not found"))
        fail_msg("message \"%s\"", e.msg);
    const char *none[] = {"/nonexistent/1", "/nonexistent/2"};
    assert_int_equal(kube_config_load_files(none, 2, NULL, &c, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "/nonexistent/1, /nonexistent/2"));
    /* a certificate-authority file that cannot be opened is an error at load, as in client-go */
    char *ca = xasprintf("%s/ca.pem", db);
    unlink(ca);
    assert_int_equal(kube_config_load_files(both, 4, NULL, &c, &e), -EINVAL);
    want = xasprintf("context \"dev\": unable to read certificate-authority %s: ", ca);
    if (!strstr(e.msg, want) || !strstr(e.msg, "No such file"))
        fail_msg("message \"%s\"", e.msg);
    xfree(want);
    xfree(ca);
    unlink(fa);
    unlink(fb);
    unlink(fe);
    unlink(fbad);
    rmdir(da);
    rmdir(db);
    rmdir(dir);
    xfree(fa);
    xfree(fb);
    xfree(fe);
    xfree(fbad);
    xfree(da);
    xfree(db);
}

/* What client-go's loading and validation refuse, refused alike: a file with
 * two clusters, users or contexts of one name (used or not), a CA, client
 * certificate or key given both as a file and as data, a client certificate
 * or key file that cannot be opened at load. */
static void test_client_go_checks(void **state)
{
    (void)state;
    static const char head[] = "current-context: c\n"
                               "contexts: [{name: c, context: {cluster: k, user: u}}]\n";
    static const struct {
        const char *body, *want;
    } cases[] = {
        {"clusters: [{name: k, cluster: {server: 'https://h'}}, {name: o, cluster: {}},\n"
         "  {name: k, cluster: {server: 'https://other'}}]\nusers: [{name: u, user: {}}]\n",
         "clusters: the name \"k\" is given twice"},
        {"clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
         "users: [{name: x, user: {}}, {name: u, user: {}}, {name: x, user: {token: t}}]\n",
         "users: the name \"x\" is given twice"},
        {"clusters: [{name: k, cluster: {server: 'https://h'}}]\nusers: [{name: u, user: {}}]\n"
         "contexts: [{name: c, context: {cluster: k}}, {name: c, context: {cluster: k}}]\n",
         "contexts: the name \"c\" is given twice"},
        {"clusters: [{name: k, cluster: {server: 'https://h', certificate-authority: /ca.pem,\n"
         "  certificate-authority-data: Zm9v}}]\nusers: [{name: u, user: {}}]\n",
         "certificate-authority-data and certificate-authority are both specified"},
        {"clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
         "users: [{name: u, user: {client-certificate: /c.pem, client-certificate-data: Zm9v,\n"
         "  client-key: /k.pem}}]\n",
         "client-certificate-data and client-certificate are both specified"},
        {"clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
         "users: [{name: u, user: {client-certificate: /c.pem, client-key: /k.pem,\n"
         "  client-key-data: Zm9v}}]\n",
         "client-key-data and client-key are both specified"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        char *doc = xasprintf("%s%s", head, cases[i].body);
        struct kube_config c;
        struct kube_config_error e;
        int rc = kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e);
        if (rc != -EINVAL || !strstr(e.msg, cases[i].want))
            fail_msg("case %zu: rc %d \"%s\"", i, rc, e.msg);
        xfree(doc);
    }
    /* a name twice in a file merged after the one that has it: still refused */
    struct kube_config_doc docs[2] = {
        {.buf = "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
                "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"},
        {.buf = "users: [{name: z, user: {}}, {name: z, user: {}}]\n"},
    };
    docs[0].len = strlen(docs[0].buf);
    docs[1].len = strlen(docs[1].buf);
    struct kube_config c;
    struct kube_config_error e;
    assert_int_equal(kube_config_parse_docs(docs, 2, NULL, &c, &e), -EINVAL);
    assert_int_equal(e.doc, 1);
    assert_int_equal(e.line, 1);
    assert_non_null(strstr(e.msg, "users: the name \"z\" is given twice"));

    /* client certificate and key files: opened at load */
    char dir[] = "/tmp/kubecfg-files-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *cfgp = xasprintf("%s/config", dir), *certp = xasprintf("%s/c.pem", dir),
         *keyp = xasprintf("%s/k.pem", dir);
    FILE *fp = fopen(cfgp, "w");
    assert_non_null(fp);
    fputs("current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
          "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
          "users: [{name: u, user: {client-certificate: c.pem, client-key: k.pem}}]\n", fp);
    fclose(fp);
    fp = fopen(certp, "w");
    assert_non_null(fp);
    fclose(fp);
    assert_int_equal(kube_config_load_file(cfgp, NULL, &c, &e), -EINVAL);
    char *want = xasprintf("unable to read client-key %s: ", keyp);
    if (!strstr(e.msg, want))
        fail_msg("message \"%s\"", e.msg);
    xfree(want);
    fp = fopen(keyp, "w");
    assert_non_null(fp);
    fclose(fp);
    assert_int_equal(kube_config_load_file(cfgp, NULL, &c, &e), 0);
    assert_string_equal(c.cert_file, certp);
    kube_config_clear(&c);
    unlink(certp);
    assert_int_equal(kube_config_load_file(cfgp, NULL, &c, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "unable to read client-certificate"));
    unlink(keyp);
    unlink(cfgp);
    rmdir(dir);
    xfree(cfgp);
    xfree(certp);
    xfree(keyp);
}

/* String fields as client-go reads them: clientcmd's loader converts the
 * whole file with YAMLToJSON, untyped, so a plain `yes` is JSON true and
 * `12345` a number, and neither decodes into a Go string field ("cannot
 * unmarshal bool into Go struct field ExecEnvVar...value of type string"):
 * the kubeconfig fails to load. They used to load as the text written. A
 * plain null is JSON null: the field stays empty. */
static void test_typed_strings(void **state)
{
    (void)state;
    static const char head[] = "current-context: c\n"
                               "contexts: [{name: c, context: {cluster: k, user: u%s}}]\n"
                               "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
                               "users: [{name: u, user: %s}]\n";
    static const struct {
        const char *ctx, *user, *want;
    } bad[] = {
        {"", "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: c, "
             "env: [{name: A, value: yes}]}}",
         "value must be a string, and YAML reads 'yes' as a bool"},
        {"", "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: c, "
             "args: [get-token, --duration, 900]}}",
         "args[2] must be a string, and YAML reads '900' as a number"},
        {"", "{token: 12345}", "token must be a string, and YAML reads '12345' as a number"},
        {", namespace: 0x1F", "{}", "namespace must be a string"},
        {"", "{token: 1e3}", "as a number"},
        {"", "{token: on}", "as a bool"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        char *doc = xasprintf(head, bad[i].ctx, bad[i].user);
        struct kube_config c;
        struct kube_config_error e;
        int rc = kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e);
        if (rc != -EINVAL || !strstr(e.msg, bad[i].want))
            fail_msg("case %zu: rc %d \"%s\"", i, rc, e.msg);
        assert_int_equal(e.line, 4 - (bad[i].ctx[0] != '\0') * 2);
        xfree(doc);
    }
    /* quoted, or text go-yaml keeps (a date, a version), they are strings;
     * a plain null is no value */
    char *doc = xasprintf(head, ", namespace: ~",
                          "{exec: {apiVersion: client.authentication.k8s.io/v1beta1,"
                          " command: c, args: ['900', 2024-01-02, v1.2, ~], "
                          "env: [{name: A, value: 'yes'}]}}");
    struct kube_config c;
    struct kube_config_error e;
    int rc = kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e);
    if (rc != 0)
        fail_msg("rc %d: %s", rc, e.msg);
    assert_non_null(c.exec);
    assert_int_equal(c.exec->nargs, 4);
    assert_string_equal(c.exec->args[0], "900");
    assert_string_equal(c.exec->args[1], "2024-01-02");
    assert_string_equal(c.exec->args[2], "v1.2");
    assert_string_equal(c.exec->args[3], "");
    assert_int_equal(c.exec->nenv, 1);
    assert_string_equal(c.exec->env[0], "A=yes");
    assert_string_equal(c.namespace_, "default");
    kube_config_clear(&c);
    xfree(doc);
}

/* Bool fields and list names as client-go reads them (YAMLToJSON, untyped,
 * with go-yaml v2's resolver): a plain y, yes or on is true and n, no or
 * off false; a number, a quoted "true" or a map does not decode into a Go
 * bool, and a plain number or bool as a name does not decode into a Go
 * string, used or not: the file fails to load. */
static void test_typed_bools_and_names(void **state)
{
    (void)state;
    static const char fmt[] = "current-context: c\n"
                              "contexts: [{name: c, context: {cluster: k}}]\n"
                              "clusters: [{name: k, cluster: {server: 'https://h', "
                              "disable-compression: %s}}%s]\n";
    static const struct {
        const char *v;
        int want; /* 1 true, 0 false, -1 refused */
    } bools[] = {
        {"y", 1},  {"Yes", 1},  {"ON", 1},   {"true", 1}, {"n", 0},        {"off", 0},
        {"NO", 0}, {"False", 0}, {"~", 0},   {"1", -1},   {"0", -1},       {"'true'", -1},
        {"\"y\"", -1}, {"{a: 1}", -1}, {"[true]", -1}, {"maybe", -1},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bools); i++) {
        char *doc = xasprintf(fmt, bools[i].v, "");
        struct kube_config c;
        struct kube_config_error e;
        int rc = kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e);
        if (bools[i].want < 0) {
            if (rc != -EINVAL || !strstr(e.msg, "disable-compression must be true or false"))
                fail_msg("%s: rc %d \"%s\"", bools[i].v, rc, rc ? e.msg : "");
        } else {
            if (rc != 0)
                fail_msg("%s: rc %d \"%s\"", bools[i].v, rc, e.msg);
            assert_int_equal(c.disable_compression, bools[i].want);
            kube_config_clear(&c);
        }
        xfree(doc);
    }
    /* a name YAML types as a number or bool, in an entry not used */
    static const char *const names[] = {", {name: 8080, cluster: {}}", ", {name: yes}",
                                        ", {name: 1.5, cluster: {}}", ", {name: [k]}",
                                        ", {name: {a: 1}, cluster: {}}"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++) {
        char *doc = xasprintf(fmt, "true", names[i]);
        struct kube_config c;
        struct kube_config_error e;
        int rc = kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e);
        if (rc != -EINVAL || !strstr(e.msg, "clusters[1].name must be a string"))
            fail_msg("%s: rc %d \"%s\"", names[i], rc, rc ? e.msg : "");
        assert_int_equal(e.line, 3);
        xfree(doc);
    }
    /* quoted, the same names are strings, and a null name is the empty one */
    char *doc = xasprintf(fmt, "true", ", {name: '8080', cluster: {}}, {name: ~}");
    struct kube_config c;
    struct kube_config_error e;
    int rc = kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e);
    if (rc != 0)
        fail_msg("rc %d: %s", rc, e.msg);
    assert_true(c.disable_compression);
    kube_config_clear(&c);
    xfree(doc);
    /* refused, each with its message, as duplicates of the name "": two null
     * names, a missing name (client-go's conversion keys it "") beside an
     * empty one, a null entry (no name) beside an empty one; and an entry
     * that is no map, used or not */
    static const struct {
        const char *extra, *want;
    } refused[] = {
        {", {name: ~, cluster: {}}, {name: null}", "clusters: the name \"\" is given twice"},
        {", {cluster: {}}, {name: ''}", "clusters: the name \"\" is given twice"},
        {", ~, {name: ''}", "clusters: the name \"\" is given twice"},
        {", 5", "clusters[1] must be a map"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(refused); i++) {
        doc = xasprintf(fmt, "true", refused[i].extra);
        rc = kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e);
        if (rc != -EINVAL || !strstr(e.msg, refused[i].want))
            fail_msg("%s: rc %d \"%s\"", refused[i].extra, rc, rc ? e.msg : "");
        xfree(doc);
    }
    /* searched past, a null entry or one with no name is skipped (its name is
     * the empty one), not refused */
    static const char *const unnamed[] = {"~", "{context: {cluster: x}}"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(unnamed); i++) {
        doc = xasprintf("current-context: c\ncontexts: [%s, {name: c, context: {cluster: k}}]\n"
                        "clusters: [{name: k, cluster: {server: 'https://h'}}]\n",
                        unnamed[i]);
        rc = kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e);
        if (rc != 0)
            fail_msg("%s: rc %d \"%s\"", unnamed[i], rc, e.msg);
        assert_string_equal(c.server, "https://h");
        kube_config_clear(&c);
        xfree(doc);
    }
}

/* The cluster's disable-compression, and its client.authentication.k8s.io/exec
 * extension as JSON with YAML's plain scalars typed as client-go types them
 * (an exec plugin's spec.cluster.config). */
static void test_cluster_extension(void **state)
{
    (void)state;
    static const char doc[] =
        "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
        "clusters:\n- name: k\n  cluster:\n    server: https://h\n"
        "    disable-compression: true\n"
        "    extensions:\n"
        "    - name: other\n      extension: {a: 1}\n"
        "    - name: client.authentication.k8s.io/exec\n"
        "      extension:\n"
        "        audience: 06e3fbd18de8\n"
        "        n: 42\n        hex: 0x1F\n        oct: '0755'\n        f: 1.5\n"
        "        flag: on\n        q: 'true'\n        nothing: ~\n        list: [a, 2, no]\n";
    struct kube_config c;
    struct kube_config_error e;
    int rc = kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e);
    if (rc != 0)
        fail_msg("rc %d: %s", rc, e.msg);
    assert_true(c.disable_compression);
    assert_non_null(c.exec_cluster_config);
    json_t *j = json_loads(c.exec_cluster_config, 0, NULL);
    assert_non_null(j);
    /* the plain key n is YAML 1.1's false: client-go's JSON has "false" */
    json_t *want = json_pack("{s:s,s:i,s:i,s:s,s:f,s:b,s:s,s:n,s:[s,i,b]}", "audience",
                             "06e3fbd18de8", "false", 42, "hex", 31, "oct", "0755", "f", 1.5,
                             "flag", 1, "q", "true", "nothing", "list", "a", 2, 0);
    if (!json_equal(j, want))
        fail_msg("config %s", c.exec_cluster_config);
    json_decref(want);
    json_decref(j);
    kube_config_clear(&c);
    /* none: NULL, and compression on */
    static const char plain[] = "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
                                "clusters: [{name: k, cluster: {server: 'https://h'}}]\n";
    assert_int_equal(kube_config_parse(plain, strlen(plain), NULL, NULL, &c, &e), 0);
    assert_false(c.disable_compression);
    assert_null(c.exec_cluster_config);
    kube_config_clear(&c);
}

static char *ext_config(const char *ext, struct kube_config_error *e)
{
    char *doc = xasprintf("current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
                          "clusters:\n- name: k\n  cluster:\n    server: https://h\n"
                          "    extensions:\n    - name: client.authentication.k8s.io/exec\n"
                          "      extension:\n%s",
                          ext);
    struct kube_config c;
    char *out = NULL;
    if (kube_config_parse(doc, strlen(doc), NULL, NULL, &c, e) == 0) {
        out = c.exec_cluster_config ? xstrdup(c.exec_cluster_config) : NULL;
        kube_config_clear(&c);
    }
    xfree(doc);
    return out;
}

/* Map keys in the exec extension as client-go writes them: sigs.k8s.io/yaml
 * reads the YAML with go-yaml v2 (YAML 1.1) and turns the typed keys into
 * JSON's strings (bools "true"/"false", integers in decimal, floats with Go's
 * FormatFloat(k, 'g', -1, 32)); quoted keys stay as written. The expected
 * JSON is what sigs.k8s.io/yaml's YAMLToJSON (go-yaml v2.4.0, Go 1.19) gives
 * for these inputs. Keys were copied as written: `yes:` reached the plugin as
 * "yes", client-go sends "true". Timestamps keep their text, as go-yaml keeps
 * it decoding into interface{} (they were once rewritten as RFC 3339). */
static void test_extension_keys(void **state)
{
    (void)state;
    struct kube_config_error e;
    char *got = ext_config("        yes: 1\n        off: 2\n        'on': 3\n        \"no\": 4\n"
                           "        0x10: 5\n        010: 6\n        1_000: 7\n        +5: 8\n"
                           "        1.50: 9\n        1e6: 10\n        3.14159265358979: 11\n"
                           "        1e-5: 12\n        .5: 13\n        .inf: 14\n        -.Inf: 15\n"
                           "        .NaN: 16\n        -0.0: 17\n        1e400: 18\n"
                           "        1234567.0: 19\n        !!str 0x11: 20\n        Yes please: 21\n"
                           "        1_0.5: 22\n        0b101: 23\n        '~': 24\n"
                           "        at: 2024-1-2\n        t2: 2024-01-02t3:4:5.120Z\n"
                           "        t3: 2024-01-02T03:04:05.100-07:30\n        t4: 2024-01-02 03:04:05,5\n"
                           "        t5: 2024-02-30\n        t6: 2024-01-02T03:04:05\n"
                           "        t7: '2024-01-02'\n        u: 1_0.5\n        v: .5_0\n"
                           "        w: .5e1_0\n        x: ._5\n        z: .5__0\n"
                           "        .2_5: 25\n",
                           &e);
    if (!got)
        fail_msg("parse failed: %s", e.msg);
    json_t *j = json_loads(got, 0, NULL);
    assert_non_null(j);
    json_t *want = json_pack(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,"
        "s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:f,s:f,s:f,s:s,s:s,s:i}",
        "true", 1, "false", 2, "on", 3, "no", 4, "16", 5, "8", 6, "1000", 7, "5", 8, "1.5", 9,
        "1e+06", 10, "3.1415927", 11, "1e-05", 12, "0.5", 13, ".inf", 14, "-.inf", 15, ".nan", 16,
        "-0", 17, "1e400", 18, "1.234567e+06", 19, "0x11", 20, "Yes please", 21, "10.5", 22, "5",
        23, "~", 24, "at", "2024-1-2", "t2", "2024-01-02t3:4:5.120Z", "t3",
        "2024-01-02T03:04:05.100-07:30", "t4", "2024-01-02 03:04:05,5", "t5", "2024-02-30", "t6",
        "2024-01-02T03:04:05", "t7", "2024-01-02", "u", 10.5, "v", 0.5, "w", 5e9, "x", "._5", "z",
        ".5__0", "0.25", 25);
    assert_non_null(want);
    if (!json_equal(j, want))
        fail_msg("config %s", got);
    json_decref(want);
    json_decref(j);
    xfree(got);
    /* a later key of the same type and value replaces an earlier one, as in go-yaml's map */
    got = ext_config("        y: 1\n        true: 2\n", &e);
    assert_non_null(got);
    assert_string_equal(got, "{\"true\":2}");
    xfree(got);
    /* a plain `on` (the bool true) and a quoted 'on' are two keys in go-yaml's
     * map: YAMLToJSON gives {"on":2,"true":1}, not {"on":2} */
    got = ext_config("        on: 1\n        'on': 2\n", &e);
    assert_non_null(got);
    assert_string_equal(got, "{\"true\":1,\"on\":2}");
    xfree(got);
    got = ext_config("        'on': 1\n        on: 2\n        'on': 3\n"
                     "        x: {on: 4, \"on\": 5}\n",
                     &e);
    assert_non_null(got);
    assert_string_equal(got, "{\"on\":3,\"true\":2,\"x\":{\"true\":4,\"on\":5}}");
    xfree(got);
    /* and a plain `server` is the quoted 'server': one key, the later value */
    got = ext_config("        server: 1\n        'server': 2\n", &e);
    assert_non_null(got);
    assert_string_equal(got, "{\"server\":2}");
    xfree(got);
    /* keys of equal JSON text (the bool true, the string "true") are one JSON
     * key; client-go's pick is random (a Go map's order), ours the later */
    got = ext_config("        true: 1\n        'true': 2\n", &e);
    assert_non_null(got);
    assert_string_equal(got, "{\"true\":2}");
    xfree(got);

    /* merged and aliased keys keep how they were written */
    got = ext_config("        base: &b {on: 1, 'off': 2}\n        m: {<<: *b}\n"
                     "        k: &k yes\n        *k : 3\n",
                     &e);
    if (!got)
        fail_msg("parse failed: %s", e.msg);
    assert_string_equal(got, "{\"base\":{\"true\":1,\"off\":2},\"m\":{\"true\":1,\"off\":2},"
                             "\"k\":true,\"true\":3}");
    xfree(got);

    /* keys client-go cannot make JSON of: it fails to load the kubeconfig */
    static const struct {
        const char *ext, *type;
    } bad[] = {
        {"        ~: 1\n", "<nil>"},
        {"        null: 1\n", "<nil>"},
        {"        18446744073709551615: 1\n", "uint64"},
        {"        0x1FFFFFFFFFFFFFFFF: 1\n", "*big.Int"},
        {"        a: {b: [{? '' : 1, Null: 2}]}\n", "<nil>"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        got = ext_config(bad[i].ext, &e);
        if (got)
            fail_msg("%s: loaded as %s", bad[i].ext, got);
        if (!strstr(e.msg, bad[i].type) || !strstr(e.msg, "unsupported map key"))
            fail_msg("%s: %s", bad[i].ext, e.msg);
        assert_true(e.line >= 8);
    }
    /* anywhere in the kubeconfig, as client-go converts the whole file */
    static const char doc[] = "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
                              "clusters: [{name: k, cluster: {server: 'https://h'}}]\n"
                              "preferences: {~: x}\n";
    struct kube_config c;
    assert_int_equal(kube_config_parse(doc, strlen(doc), NULL, NULL, &c, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "unsupported map key"));
    assert_int_equal(e.line, 4);
    /* a date key is a string key: go-yaml keeps a timestamp's text */
    got = ext_config("        2024-01-02: 1\n        2024-1-2 10:00:00: 2\n", &e);
    if (!got)
        fail_msg("parse failed: %s", e.msg);
    assert_string_equal(got, "{\"2024-01-02\":1,\"2024-1-2 10:00:00\":2}");
    xfree(got);
    /* quoted, they are strings */
    got = ext_config("        '~': 1\n        \"18446744073709551615\": 2\n        '2024-01-02': 3\n",
                     &e);
    assert_non_null(got);
    j = json_loads(got, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "~")), 1);
    assert_int_equal(json_integer_value(json_object_get(j, "18446744073709551615")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "2024-01-02")), 3);
    json_decref(j);
    xfree(got);
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_and_current_context),
        cmocka_unit_test(test_cert_files_relative_paths),
        cmocka_unit_test(test_unsupported_auth),
        cmocka_unit_test(test_exec),
        cmocka_unit_test(test_structure_errors),
        cmocka_unit_test(test_proxy_url),
        cmocka_unit_test(test_tls_server_name),
        cmocka_unit_test(test_server_without_scheme),
        cmocka_unit_test(test_anchors_and_merge_keys),
        cmocka_unit_test(test_yaml_errors),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_in_cluster_and_files),
        cmocka_unit_test(test_merged_files),
        cmocka_unit_test(test_client_go_checks),
        cmocka_unit_test(test_typed_strings),
        cmocka_unit_test(test_typed_bools_and_names),
        cmocka_unit_test(test_cluster_extension),
        cmocka_unit_test(test_extension_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

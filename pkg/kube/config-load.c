/* SPDX-License-Identifier: Apache-2.0 */
/* kube/config-load: finding and reading the configuration: kubeconfig files
 * (--kubeconfig, KUBECONFIG's list merged as client-go merges it, or
 * ~/.kube/config) handed to kube_config_parse_docs(), and the in-cluster
 * service account.
 *
 * After a successful parse, the certificate and key files the result names
 * must open, as client-go's validation checks them at load. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/conf.h"
#include "kube-int.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static int read_small_file(const char *path, size_t max, struct util_buf *b)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = 0;
    char tmp[4096];
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (n == 0)
            break;
        if (b->len + (size_t)n > max) {
            rc = -EFBIG;
            break;
        }
        util_buf_append(b, tmp, (size_t)n);
    }
    close(fd);
    return rc;
}

/* The directory relative paths in the file at path resolve against (owned). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return xstrdup(".");
    if (slash == path)
        return xstrdup("/"); /* "/kubeconfig": the root */
    return xstrndup(path, (size_t)(slash - path));
}

/* The certificate-authority, client-certificate and client-key files must
 * open at load, as client-go's validation opens them ("unable to read
 * ..."): a path mistyped is told at start, not at the first request. They
 * are read again when used (a certificate pair renewed on disk). */
static int check_files(const struct kube_config *c, struct kube_config_error *err)
{
    const struct {
        const char *path, *what;
    } files[] = {
        {c->ca_file, "certificate-authority"},
        {c->cert_file, "client-certificate"},
        {c->key_file, "client-key"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(files); i++) {
        if (!files[i].path)
            continue;
        int fd = open(files[i].path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            continue;
        }
        int rc = -errno;
        if (err)
            snprintf(err->msg, sizeof(err->msg), "context \"%.100s\": unable to read %s %.200s: %s",
                     c->context ? c->context : "", files[i].what, files[i].path, strerror(-rc));
        return -EINVAL;
    }
    return 0;
}

/* Read the files and parse them merged; with skip_missing, files that do not
 * exist are left out, as client-go does with KUBECONFIG's list. */
static int load_files(const char *const *paths, size_t n, bool skip_missing, const char *context,
                      struct kube_config *out, struct kube_config_error *err)
{
    struct util_buf *bufs = xcalloc(n ? n : 1, sizeof(*bufs));
    struct kube_config_doc *docs = xcalloc(n ? n : 1, sizeof(*docs));
    const char **used = xcalloc(n ? n : 1, sizeof(*used));
    size_t nd = 0;
    int rc = 0;
    *out = (struct kube_config){0};
    if (err)
        *err = (struct kube_config_error){0};
    for (size_t i = 0; i < n; i++) {
        rc = read_small_file(paths[i], CONF_MAX_BYTES, &bufs[nd]);
        if (rc == -ENOENT && skip_missing) {
            util_buf_free(&bufs[nd]);
            rc = 0;
            continue;
        }
        if (rc < 0) {
            if (err)
                snprintf(err->msg, sizeof(err->msg), "%.200s: %s", paths[i], strerror(-rc));
            goto out;
        }
        docs[nd] = (struct kube_config_doc){.buf = bufs[nd].data ? bufs[nd].data : "",
                                            .len = bufs[nd].len, .base_dir = dir_of(paths[i])};
        used[nd++] = paths[i];
    }
    if (nd == 0) {
        rc = -ENOENT;
        if (err) {
            struct util_buf m = {0};
            for (size_t i = 0; i < n; i++)
                util_buf_printf(&m, "%s%s", i ? ", " : "", paths[i]);
            snprintf(err->msg, sizeof(err->msg), "no kubeconfig file exists of %.300s",
                     m.data ? m.data : "none");
            util_buf_free(&m);
        }
        goto out;
    }
    rc = kube_config_parse_docs(docs, nd, context, out, err);
    if (rc == 0 && (rc = check_files(out, err)) < 0) {
        kube_config_clear(out);
        goto out;
    }
    if (rc < 0 && err) {
        char msg[sizeof(err->msg)];
        if (err->line > 0 || nd == 1) {
            const char *f = used[err->doc < nd ? err->doc : 0];
            if (err->line > 0)
                snprintf(msg, sizeof(msg), "%.100s:%d: %.280s", f, err->line, err->msg);
            else
                snprintf(msg, sizeof(msg), "%.100s: %.290s", f, err->msg);
        } else {
            snprintf(msg, sizeof(msg), "%.100s and %u more: %.270s", used[0],
                     (unsigned)(nd - 1 > 999 ? 999 : nd - 1), err->msg);
        }
        memcpy(err->msg, msg, sizeof(msg));
    }
out:
    for (size_t i = 0; i < nd; i++)
        xfree((char *)docs[i].base_dir);
    for (size_t i = 0; i < n; i++)
        util_buf_free(&bufs[i]);
    xfree(bufs);
    xfree(docs);
    xfree(used);
    return rc;
}

int kube_config_load_file(const char *path, const char *context, struct kube_config *out,
                          struct kube_config_error *err)
{
    return load_files(&path, 1, false, context, out, err);
}

int kube_config_load_files(const char *const *paths, size_t n, const char *context,
                           struct kube_config *out, struct kube_config_error *err)
{
    return load_files(paths, n, true, context, out, err);
}

/* ---- in-cluster ----------------------------------------------------------- */

int kube_config_in_cluster(const struct kube_incluster_opts *o, struct kube_config *out,
                           struct kube_config_error *err)
{
    struct kube_incluster_opts d = o ? *o : (struct kube_incluster_opts){0};
    *out = (struct kube_config){0};
    if (err)
        *err = (struct kube_config_error){0};
    const char *host = d.host ? d.host : getenv("KUBERNETES_SERVICE_HOST");
    const char *port = d.port ? d.port : getenv("KUBERNETES_SERVICE_PORT");
    const char *tok = d.token_path ? d.token_path : SA_DIR "/token";
    const char *ca = d.ca_path ? d.ca_path : SA_DIR "/ca.crt";
    const char *nsp = d.namespace_path ? d.namespace_path : SA_DIR "/namespace";
    if (!host || !*host || !port || !*port) {
        if (err)
            snprintf(err->msg, sizeof(err->msg),
                     "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
        return -ENOENT;
    }
    if (access(tok, R_OK) != 0) {
        int rc = -errno;
        if (err)
            snprintf(err->msg, sizeof(err->msg), "service account token %s: %s", tok,
                     strerror(errno));
        return rc;
    }
    bool v6 = strchr(host, ':') != NULL;
    out->server = xasprintf("https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
    out->token_file = xstrdup(tok);
    if (access(ca, R_OK) == 0)
        out->ca_file = xstrdup(ca);
    struct util_buf b = {0};
    if (read_small_file(nsp, 1024, &b) == 0 && b.len > 0) {
        size_t n = b.len;
        while (n > 0 && (b.data[n - 1] == '\n' || b.data[n - 1] == ' ' || b.data[n - 1] == '\r'))
            n--;
        out->namespace_ = xstrndup(b.data, n);
    } else {
        out->namespace_ = xstrdup("default");
    }
    util_buf_free(&b);
    return 0;
}

/* rc of a kubeconfig's loading, or in-cluster's when that kubeconfig was
 * empty (or none of KUBECONFIG's files exists: -ENOENT) and gpuscaler runs
 * in a cluster, as DeferredLoadingClientConfig tries in-cluster then. */
static int or_in_cluster(int rc, struct kube_config *out, struct kube_config_error *err)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    if ((rc != -ENODATA && rc != -ENOENT) || !host || !*host)
        return rc;
    return kube_config_in_cluster(NULL, out, err);
}

int kube_config_resolve(const char *kubeconfig_path, const char *context, struct kube_config *out,
                        struct kube_config_error *err)
{
    if (kubeconfig_path && *kubeconfig_path) {
        /* a file named by the flag must exist (client-go's ExplicitPath) */
        int rc = kube_config_load_file(kubeconfig_path, context, out, err);
        return rc == -ENODATA ? or_in_cluster(rc, out, err) : rc;
    }
    const char *env = getenv("KUBECONFIG");
    if (env && *env) {
        /* a list like PATH: merged, missing files skipped, repeats read once */
        char *list = xstrdup(env);
        const char **paths = xcalloc(strlen(env) / 2 + 1, sizeof(*paths));
        size_t n = 0;
        for (char *t = list, *colon; t; t = colon ? colon + 1 : NULL) {
            colon = strchr(t, ':');
            if (colon)
                *colon = '\0';
            bool skip = *t == '\0';
            for (size_t i = 0; i < n && !skip; i++)
                skip = strcmp(paths[i], t) == 0;
            if (!skip)
                paths[n++] = t;
        }
        int rc = n ? kube_config_load_files(paths, n, context, out, err) : -ENOENT;
        xfree(paths);
        xfree(list);
        if (n)
            return or_in_cluster(rc, out, err);
    }
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    if (host && *host)
        return kube_config_in_cluster(NULL, out, err);
    const char *home = getenv("HOME");
    if (!home || !*home) {
        if (err)
            snprintf(err->msg, sizeof(err->msg),
                     "no kubeconfig: give --kubeconfig, set KUBECONFIG or run in a cluster");
        return -ENOENT;
    }
    char *path = xasprintf("%s/.kube/config", home);
    int rc = kube_config_load_file(path, context, out, err);
    xfree(path);
    return rc;
}

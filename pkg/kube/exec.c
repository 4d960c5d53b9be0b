/* SPDX-License-Identifier: Apache-2.0 */
/* kube/exec: kubeconfig exec credential plugins (client.authentication.k8s.io
 * v1 and v1beta1), as client-go runs them: the command with its args, the
 * environment plus the user's env entries and KUBERNETES_EXEC_INFO (an
 * ExecCredential whose spec says interactive: false and, with
 * provideClusterInfo, the cluster as rest.ConfigToExecCluster gives it: the
 * server, tls-server-name, insecure-skip-tls-verify, the CA's bytes, read
 * again for each run, proxy-url, disable-compression, and as config the
 * cluster's extension client.authentication.k8s.io/exec), stdin /dev/null; its
 * standard output is an ExecCredential whose status has a token or a client
 * certificate and key, and may expire.
 *
 * The plugin runs on the loop (uv_spawn), never blocking it: the client's
 * requests wait for the credential (kube/client.c). One run at a time, at
 * most EXEC_TIMEOUT_MS (then killed), output capped at EXEC_MAX_OUT; a run
 * starts no sooner than EXEC_MIN_INTERVAL_MS after the previous one ended,
 * so a plugin that fails, or gives credentials that expire at once, is not
 * run in a loop. A credential is used until EXEC_EARLY_MS (or a quarter of
 * its lifetime, when shorter) before it expires, or until the API server
 * answers 401 to it. Its stderr is kept (first EXEC_MAX_ERR bytes) for the
 * error message, not passed through: it would break the JSON log. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "kube-int.h"

#define EXEC_TIMEOUT_MS 30000
#define EXEC_MIN_INTERVAL_MS 1000
#define EXEC_EARLY_MS 10000
#define EXEC_PIPE_GRACE_MS 1000 /* after the exit, for a child's child holding the pipes */
#define EXEC_MAX_OUT ((size_t)1 << 20)
#define EXEC_MAX_ERR ((size_t)4096)
#define EXEC_MAX_TOKEN ((size_t)64 << 10)

extern char **environ;

/* ---- the credential (pure) ----------------------------------------------- */

void kube_exec_cred_clear(struct kube_exec_cred *c)
{
    if (c->token)
        explicit_bzero(c->token, strlen(c->token));
    if (c->key)
        explicit_bzero(c->key, c->key_len);
    xfree(c->token);
    xfree(c->cert);
    xfree(c->key);
    *c = (struct kube_exec_cred){0};
}

static int cred_fail(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return -EBADMSG;
}

/* A string member of o: NULL when absent; -1 when present and not a string. */
static int opt_str(const json_t *o, const char *key, const char **out, size_t *len)
{
    const json_t *v = json_object_get(o, key);
    *out = NULL;
    *len = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return -1;
    *out = json_string_value(v);
    *len = json_string_length(v);
    return 0;
}

int kube_exec_cred_parse(const char *buf, size_t len, const char *api_version,
                         struct kube_exec_cred *out, char *err, size_t errlen)
{
    *out = (struct kube_exec_cred){0};
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    int rc = -EBADMSG;
    char msg[300];
    if (!root) {
        snprintf(msg, sizeof(msg), "exec plugin output is not JSON: %.200s", je.text);
        rc = cred_fail(err, errlen, msg);
        goto out;
    }
    if (!json_is_object(root)) {
        rc = cred_fail(err, errlen, "exec plugin output is not a JSON object");
        goto out;
    }
    const char *api, *kind, *tok, *cert, *key, *exp;
    size_t api_n, kind_n, tok_n, cert_n, key_n, exp_n;
    if (opt_str(root, "apiVersion", &api, &api_n) < 0 || opt_str(root, "kind", &kind, &kind_n) < 0) {
        rc = cred_fail(err, errlen, "exec plugin output: apiVersion and kind must be strings");
        goto out;
    }
    if (!api || strlen(api) != api_n || strcmp(api, api_version) != 0) {
        snprintf(msg, sizeof(msg),
                 "exec plugin is configured to use API version %s, plugin returned version %.80s",
                 api_version, api && strlen(api) == api_n ? api : "(none)");
        rc = cred_fail(err, errlen, msg);
        goto out;
    }
    if (!kind || strcmp(kind, "ExecCredential") != 0 || strlen(kind) != kind_n) {
        rc = cred_fail(err, errlen, "exec plugin output: kind is not ExecCredential");
        goto out;
    }
    const json_t *st = json_object_get(root, "status");
    if (!json_is_object(st)) {
        rc = cred_fail(err, errlen, "exec plugin didn't return a status field");
        goto out;
    }
    if (opt_str(st, "token", &tok, &tok_n) < 0 ||
        opt_str(st, "clientCertificateData", &cert, &cert_n) < 0 ||
        opt_str(st, "clientKeyData", &key, &key_n) < 0 ||
        opt_str(st, "expirationTimestamp", &exp, &exp_n) < 0) {
        rc = cred_fail(err, errlen, "exec plugin output: a status field is not a string");
        goto out;
    }
    if (tok && tok_n == 0)
        tok = NULL;
    if (cert && cert_n == 0)
        cert = NULL;
    if (key && key_n == 0)
        key = NULL;
    if (!!cert != !!key) {
        rc = cred_fail(err, errlen, "exec plugin returned only certificate or key, not both");
        goto out;
    }
    if (!tok && !cert) {
        rc = cred_fail(err, errlen, "exec plugin didn't return a token or cert/key pair");
        goto out;
    }
    if (tok) {
        /* it goes into the Authorization header: printable ASCII only */
        bool ok = tok_n <= EXEC_MAX_TOKEN;
        for (size_t i = 0; ok && i < tok_n; i++)
            ok = (unsigned char)tok[i] > 0x20 && (unsigned char)tok[i] < 0x7f;
        if (!ok) {
            rc = cred_fail(err, errlen, "exec plugin returned a token with spaces, control "
                                        "characters or over 64 KiB");
            goto out;
        }
    }
    if (cert && (strlen(cert) != cert_n || strlen(key) != key_n)) {
        rc = cred_fail(err, errlen, "exec plugin returned a certificate or key with NUL bytes");
        goto out;
    }
    int64_t exp_ms = 0;
    if (exp && (strlen(exp) != exp_n || kube_parse_time(exp, &exp_ms) < 0 || exp_ms <= 0)) {
        rc = cred_fail(err, errlen, "exec plugin returned an expirationTimestamp that is not "
                                    "an RFC 3339 time");
        goto out;
    }
    out->token = tok ? xstrndup(tok, tok_n) : NULL;
    if (cert) {
        out->cert = xstrndup(cert, cert_n);
        out->cert_len = cert_n;
        out->key = xstrndup(key, key_n);
        out->key_len = key_n;
    }
    out->expires_ms = exp_ms;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* ---- the configuration's copy ---------------------------------------------- */

static char **dup_strv(char *const *v, size_t n)
{
    char **d = xcalloc(n ? n : 1, sizeof(*d));
    for (size_t i = 0; i < n; i++)
        d[i] = xstrdup(v[i]);
    return d;
}

struct kube_exec_config *kube_exec_config_dup(const struct kube_exec_config *e)
{
    if (!e)
        return NULL;
    struct kube_exec_config *d = xcalloc(1, sizeof(*d));
    d->api_version = xstrdup(e->api_version);
    d->command = xstrdup(e->command);
    d->args = dup_strv(e->args, e->nargs);
    d->nargs = e->nargs;
    d->env = dup_strv(e->env, e->nenv);
    d->nenv = e->nenv;
    d->install_hint = e->install_hint ? xstrdup(e->install_hint) : NULL;
    d->provide_cluster_info = e->provide_cluster_info;
    return d;
}

/* ---- running the plugin ------------------------------------------------------ */

struct kube_exec {
    uv_loop_t *loop;
    struct kube_exec_config *cfg;
    struct kube_config cluster;     /* with provideClusterInfo: the cluster's fields it passes */
    char *info_env;                 /* "KUBERNETES_EXEC_INFO=..." of the last run */
    char info_err[400];             /* why the last run could not start, or "" */
    kube_exec_done_cb done;
    void *arg;
    struct kube_exec_cred cred;
    bool have;                      /* cred holds a credential */
    bool rejected;                  /* the API server answered 401 to it */
    int64_t fetched_ms;
    uv_timer_t timer;               /* the delayed start, the timeout, the pipes' grace */
    uv_process_t proc;
    uv_pipe_t out, err;
    int run_handles;                /* of proc, out, err still open */
    bool pending;                   /* a run is due (delayed or running) */
    bool running, exited, killed, too_big;
    int64_t exit_status;
    int term_signal;
    int spawn_err;
    bool out_open, err_open;
    struct util_buf obuf, ebuf;
    uint64_t last_end;              /* loop ms when the last run ended; 0 = none */
    uint64_t runs, failures;
    bool closing;
    void (*close_cb)(void *);
    void *close_arg;
};

/* The CA bundle of a certificate-authority file, at most EXEC_MAX_OUT bytes;
 * -errno (-EFBIG: larger). */
static int read_ca(const char *path, struct util_buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    char tmp[4096];
    size_t n;
    int rc = 0;
    while (rc == 0 && (n = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        if (b->len + n > EXEC_MAX_OUT)
            rc = -EFBIG;
        else
            util_buf_append(b, tmp, n);
    }
    if (rc == 0 && ferror(f))
        rc = -EIO;
    fclose(f);
    return rc;
}

/* "KUBERNETES_EXEC_INFO=..." for a run (owned), or NULL with why in err: a
 * certificate-authority file that cannot be read fails as client-go's
 * ConfigToExecCluster does ("failed to load CA bundle for execProvider"),
 * rather than leaving the CA out. */
static char *exec_info(const struct kube_exec_config *cfg, const struct kube_config *cl,
                       char *err, size_t errlen)
{
    json_t *spec = json_pack("{s:b}", "interactive", 0);
    if (cfg->provide_cluster_info) {
        json_t *o = json_pack("{s:s}", "server", cl->server ? cl->server : "");
        struct util_buf ca = {0};
        if (cl->ca_data) {
            util_buf_append(&ca, cl->ca_data, cl->ca_data_len);
        } else if (cl->ca_file) {
            int rc = read_ca(cl->ca_file, &ca);
            if (rc < 0) {
                snprintf(err, errlen, "not run: its cluster's certificate-authority %s cannot "
                         "be read for provideClusterInfo: %s", cl->ca_file,
                         rc == -EFBIG ? "larger than 1 MiB" : strerror(-rc));
                util_buf_free(&ca);
                json_decref(o);
                json_decref(spec);
                return NULL;
            }
        }
        if (ca.len) {
            char *b64 = kube_base64_encode((const uint8_t *)ca.data, ca.len);
            json_object_set_new(o, "certificate-authority-data", json_string(b64));
            xfree(b64);
        }
        util_buf_free(&ca);
        /* as client-go's JSON: omitted when empty or false */
        if (cl->tls_server_name)
            json_object_set_new(o, "tls-server-name", json_string(cl->tls_server_name));
        if (cl->insecure)
            json_object_set_new(o, "insecure-skip-tls-verify", json_true());
        if (cl->proxy_url_orig)
            json_object_set_new(o, "proxy-url", json_string(cl->proxy_url_orig));
        if (cl->disable_compression)
            json_object_set_new(o, "disable-compression", json_true());
        /* the cluster's client.authentication.k8s.io/exec extension, as is */
        json_t *conf = cl->exec_cluster_config
                           ? json_loads(cl->exec_cluster_config, JSON_DECODE_ANY, NULL)
                           : NULL;
        if (conf)
            json_object_set_new(o, "config", conf);
        json_object_set_new(spec, "cluster", o);
    }
    json_t *o = json_pack("{s:s, s:s, s:o}", "apiVersion", cfg->api_version, "kind",
                          "ExecCredential", "spec", spec);
    char *s = json_dumps(o, JSON_COMPACT);
    char *env = xasprintf("KUBERNETES_EXEC_INFO=%s", s);
    free(s); /* style: allow (jansson's allocation) */
    json_decref(o);
    return env;
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

struct kube_exec *kube_exec_new(uv_loop_t *loop, const struct kube_exec_config *cfg,
                                const struct kube_config *cluster, kube_exec_done_cb done,
                                void *arg)
{
    struct kube_exec *e = xcalloc(1, sizeof(*e));
    e->loop = loop;
    e->cfg = kube_exec_config_dup(cfg);
    if (cfg->provide_cluster_info && cluster) {
        struct kube_config *c = &e->cluster;
        c->server = dup_or_null(cluster->server);
        c->tls_server_name = dup_or_null(cluster->tls_server_name);
        c->proxy_url_orig = dup_or_null(cluster->proxy_url_orig);
        c->insecure = cluster->insecure;
        c->disable_compression = cluster->disable_compression;
        c->exec_cluster_config = dup_or_null(cluster->exec_cluster_config);
        c->ca_file = dup_or_null(cluster->ca_file);
        if (cluster->ca_data) {
            c->ca_data = xmalloc(cluster->ca_data_len + 1);
            memcpy(c->ca_data, cluster->ca_data, cluster->ca_data_len);
            c->ca_data[cluster->ca_data_len] = '\0';
            c->ca_data_len = cluster->ca_data_len;
        }
    }
    e->done = done;
    e->arg = arg;
    uv_timer_init(loop, &e->timer);
    e->timer.data = e;
    return e;
}

const struct kube_exec_cred *kube_exec_valid(const struct kube_exec *e, int64_t now_ms)
{
    if (!e->have || e->rejected)
        return NULL;
    if (e->cred.expires_ms == 0)
        return &e->cred;
    int64_t early = (e->cred.expires_ms - e->fetched_ms) / 4;
    if (early > EXEC_EARLY_MS)
        early = EXEC_EARLY_MS;
    if (early < 0)
        early = 0;
    return now_ms < e->cred.expires_ms - early ? &e->cred : NULL;
}

const struct kube_exec_cred *kube_exec_last(const struct kube_exec *e)
{
    return e->have && !e->rejected ? &e->cred : NULL;
}

bool kube_exec_invalidate(struct kube_exec *e, uint64_t gen)
{
    /* only the credential that was refused: a 401 to an older one says nothing */
    if (!e->have || e->rejected || e->cred.gen != gen)
        return false;
    e->rejected = true;
    return true;
}

void kube_exec_stats(const struct kube_exec *e, uint64_t *runs, uint64_t *failures)
{
    *runs = e->runs;
    *failures = e->failures;
}

static void on_run_timer(uv_timer_t *t);
static void finish_close(struct kube_exec *e);

/* The run ended (its handles closed): judge it and tell the client. */
static void report(struct kube_exec *e)
{
    char msg[600];
    int err = 0;
    const char *cmd = e->cfg->command;
    e->running = false;
    e->pending = false;
    e->last_end = uv_now(e->loop);
    e->runs++;
    /* the first line of stderr, for the message */
    char first[240] = "";
    if (e->ebuf.len) {
        size_t n = 0;
        while (n < e->ebuf.len && n < sizeof(first) - 1 && e->ebuf.data[n] != '\n')
            n++;
        memcpy(first, e->ebuf.data, n);
        first[n] = '\0';
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)first[i] < 0x20)
                first[i] = ' ';
    }
    if (e->info_err[0]) {
        snprintf(msg, sizeof(msg), "exec plugin %s: %s", cmd, e->info_err);
        err = -ENOKEY;
    } else if (e->spawn_err) {
        snprintf(msg, sizeof(msg), "exec plugin %s: cannot run it: %s%s%s", cmd,
                 uv_strerror(e->spawn_err), e->cfg->install_hint ? "; " : "",
                 e->cfg->install_hint ? e->cfg->install_hint : "");
        err = -ENOKEY;
    } else if (e->killed) {
        snprintf(msg, sizeof(msg), "exec plugin %s: no answer in %d s, killed%s%s", cmd,
                 EXEC_TIMEOUT_MS / 1000, first[0] ? ": " : "", first);
        err = -ETIMEDOUT;
    } else if (e->too_big) {
        snprintf(msg, sizeof(msg), "exec plugin %s: output over %zu bytes", cmd, EXEC_MAX_OUT);
        err = -EMSGSIZE;
    } else if (e->term_signal || e->exit_status != 0) {
        if (e->term_signal)
            snprintf(msg, sizeof(msg), "exec plugin %s: killed by signal %d%s%s", cmd,
                     e->term_signal, first[0] ? ": " : "", first);
        else
            snprintf(msg, sizeof(msg), "exec plugin %s: exit status %lld%s%s", cmd,
                     (long long)e->exit_status, first[0] ? ": " : "", first);
        err = -ENOKEY;
    } else {
        struct kube_exec_cred c;
        char perr[320];
        if (kube_exec_cred_parse(e->obuf.data ? e->obuf.data : "", e->obuf.len,
                                 e->cfg->api_version, &c, perr, sizeof(perr)) < 0) {
            snprintf(msg, sizeof(msg), "exec plugin %s: %s", cmd, perr);
            err = -ENOKEY;
        } else {
            c.gen = e->cred.gen + 1;
            kube_exec_cred_clear(&e->cred);
            e->cred = c;
            e->have = true;
            e->rejected = false;
            e->fetched_ms = util_now_unix_ms();
        }
    }
    if (e->obuf.data)
        explicit_bzero(e->obuf.data, e->obuf.len);
    util_buf_free(&e->obuf);
    util_buf_free(&e->ebuf);
    if (err)
        e->failures++;
    if (e->closing) {
        finish_close(e);
        return;
    }
    e->done(e->arg, err, err ? msg : "");
}

static void on_run_handle_closed(uv_handle_t *h)
{
    struct kube_exec *e = h->data;
    if (--e->run_handles == 0)
        report(e);
}

/* Stop reading the run's output: its pipes are closed. */
static void close_pipes(struct kube_exec *e)
{
    if (e->out_open) {
        e->out_open = false;
        uv_close((uv_handle_t *)&e->out, on_run_handle_closed);
    }
    if (e->err_open) {
        e->err_open = false;
        uv_close((uv_handle_t *)&e->err, on_run_handle_closed);
    }
}

/* Close what the run still has open; report() runs when all are closed. */
static void close_run(struct kube_exec *e)
{
    uv_timer_stop(&e->timer);
    close_pipes(e);
    if (!uv_is_closing((uv_handle_t *)&e->proc))
        uv_close((uv_handle_t *)&e->proc, on_run_handle_closed);
}

static void maybe_done(struct kube_exec *e)
{
    if (e->exited && !e->out_open && !e->err_open)
        close_run(e);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    static char slab[16384]; /* one loop thread; the bytes are copied in on_read */
    (void)suggested;
    buf->base = slab;
    buf->len = sizeof(slab);
}

static void end_pipe(struct kube_exec *e, uv_pipe_t *p)
{
    bool *open = p == &e->out ? &e->out_open : &e->err_open;
    if (!*open)
        return;
    *open = false;
    uv_close((uv_handle_t *)p, on_run_handle_closed);
    maybe_done(e);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct kube_exec *e = s->data;
    bool is_out = s == (uv_stream_t *)&e->out;
    if (n < 0) {
        end_pipe(e, (uv_pipe_t *)s);
        return;
    }
    if (n == 0)
        return;
    struct util_buf *b = is_out ? &e->obuf : &e->ebuf;
    size_t cap = is_out ? EXEC_MAX_OUT : EXEC_MAX_ERR;
    size_t take = (size_t)n;
    if (b->len + take > cap) {
        take = cap - b->len;
        if (is_out && !e->too_big) {
            e->too_big = true;
            if (!e->exited)
                uv_process_kill(&e->proc, SIGKILL);
        }
    }
    if (take)
        util_buf_append(b, buf->base, take);
    explicit_bzero(buf->base, (size_t)n);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
    struct kube_exec *e = p->data;
    e->exited = true;
    e->exit_status = status;
    e->term_signal = term_signal;
    /* the pipes end with the process, unless a child of its own holds them */
    if (e->out_open || e->err_open)
        uv_timer_start(&e->timer, on_run_timer, EXEC_PIPE_GRACE_MS, 0);
    maybe_done(e);
}

static void spawn(struct kube_exec *e)
{
    const struct kube_exec_config *c = e->cfg;
    e->running = true;
    e->exited = e->killed = e->too_big = false;
    e->exit_status = 0;
    e->term_signal = 0;
    e->spawn_err = 0;
    e->info_err[0] = '\0';
    char *info = exec_info(c, &e->cluster, e->info_err, sizeof(e->info_err));
    if (!info) { /* not run: told at once, as a failed run */
        report(e);
        return;
    }
    xfree(e->info_env);
    e->info_env = info;
    size_t nenv = 0;
    while (environ && environ[nenv])
        nenv++;
    char **env = xcalloc(nenv + c->nenv + 2, sizeof(*env));
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++) {
        /* the user's entries and the exec info replace the inherited ones */
        const char *eq = strchr(environ[i], '=');
        size_t nl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool replaced = nl == 20 && strncmp(environ[i], "KUBERNETES_EXEC_INFO", 20) == 0;
        for (size_t j = 0; !replaced && j < c->nenv; j++)
            replaced = strncmp(c->env[j], environ[i], nl) == 0 && c->env[j][nl] == '=';
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < c->nenv; j++)
        env[k++] = c->env[j];
    env[k++] = e->info_env;
    env[k] = NULL;
    char **argv = xcalloc(c->nargs + 2, sizeof(*argv));
    argv[0] = c->command;
    for (size_t i = 0; i < c->nargs; i++)
        argv[i + 1] = c->args[i];

    uv_pipe_init(e->loop, &e->out, 0);
    uv_pipe_init(e->loop, &e->err, 0);
    e->out.data = e->err.data = e->proc.data = e;
    e->out_open = e->err_open = true;
    e->run_handles = 3;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&e->out},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&e->err},
    };
    uv_process_options_t o = {
        .exit_cb = on_exit_cb,
        .file = c->command,
        .args = argv,
        .env = env,
        .stdio_count = 3,
        .stdio = stdio,
        .flags = UV_PROCESS_DETACHED, /* a process group of its own: kill_run */
    };
    int rc = uv_spawn(e->loop, &e->proc, &o);
    xfree(argv);
    xfree(env);
    if (rc < 0) {
        /* libuv initialised the process handle all the same: close everything */
        e->spawn_err = rc;
        e->exited = true;
        e->out_open = e->err_open = false;
        uv_close((uv_handle_t *)&e->out, on_run_handle_closed);
        uv_close((uv_handle_t *)&e->err, on_run_handle_closed);
        uv_close((uv_handle_t *)&e->proc, on_run_handle_closed);
        return;
    }
    LOG_DEBUG("kube", "exec plugin %s started (pid %d)", c->command, e->proc.pid);
    uv_read_start((uv_stream_t *)&e->out, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&e->err, on_alloc, on_read);
    uv_timer_start(&e->timer, on_run_timer, EXEC_TIMEOUT_MS, 0);
}

/* Kill the plugin and what it started: it runs as the leader of a process
 * group of its own (UV_PROCESS_DETACHED), so a wrapper's children (a shell
 * script's sleep, a helper it forked) go with it instead of outliving it. */
static void kill_run(struct kube_exec *e)
{
    if (e->proc.pid > 0)
        kill(-e->proc.pid, SIGKILL);
    if (!e->exited)
        uv_process_kill(&e->proc, SIGKILL);
}

static void on_run_timer(uv_timer_t *t)
{
    struct kube_exec *e = t->data;
    if (!e->running) { /* the delayed start */
        spawn(e);
        return;
    }
    if (!e->exited) { /* the timeout */
        e->killed = true;
        kill_run(e);
        return;
    }
    /* exited, and the pipes are still open after the grace: a child of its
     * own holds them; what was read is the answer, and the child goes */
    kill_run(e);
    close_pipes(e);
    maybe_done(e);
}

void kube_exec_start(struct kube_exec *e)
{
    if (e->pending || e->closing)
        return;
    e->pending = true;
    uint64_t now = uv_now(e->loop);
    uint64_t at = e->last_end ? e->last_end + EXEC_MIN_INTERVAL_MS : now;
    uv_timer_start(&e->timer, on_run_timer, at > now ? at - now : 0, 0);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct kube_exec *e = h->data;
    void (*cb)(void *) = e->close_cb;
    void *arg = e->close_arg;
    kube_exec_cred_clear(&e->cred);
    kube_exec_config_free(e->cfg);
    kube_config_clear(&e->cluster);
    xfree(e->info_env);
    xfree(e);
    if (cb)
        cb(arg);
}

static void finish_close(struct kube_exec *e)
{
    uv_close((uv_handle_t *)&e->timer, on_timer_closed);
}

void kube_exec_close(struct kube_exec *e, void (*cb)(void *), void *arg)
{
    e->closing = true;
    e->close_cb = cb;
    e->close_arg = arg;
    uv_timer_stop(&e->timer);
    if (!e->running) {
        finish_close(e);
        return;
    }
    /* a run: killed, its output dropped; report() finishes the close once
     * its handles are closed (the exit comes promptly after SIGKILL) */
    if (!e->exited)
        kill_run(e);
    close_pipes(e);
    maybe_done(e);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* httpd/server: the listening socket, configuration defaults, certificate
 * reloading, the runtime client CA and the close sequence.
 *
 * The server owns three handles embedded in struct httpd (listener, reload
 * poll timer, shutdown grace timer); its memory is freed only after those
 * and every connection's handles have closed, then the close callback runs. */
#include "httpd-int.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *httpd_status_text(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
    }
}

const char *srv_date(struct httpd *srv)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != srv->date_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        strftime(srv->date, sizeof(srv->date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        srv->date_sec = ts.tv_sec;
    }
    return srv->date;
}

/* ---- closing ------------------------------------------------------------ */

static void maybe_finish(struct httpd *srv)
{
    if (!srv->closing)
        return;
    if (srv->nconns > 0 || srv->open_handles > 0)
        return;
    httpd_close_cb cb = srv->close_cb;
    void *arg = srv->close_arg;
    SSL_CTX_free(srv->ctx);
    X509_STORE_free(srv->client_store);
    xfree(srv->host);
    xfree(srv->cert_file);
    xfree(srv->key_file);
    xfree(srv->client_ca_file);
    xfree(srv->name);
    xfree(srv);
    if (cb)
        cb(arg);
}

static void on_srv_handle_closed(uv_handle_t *h)
{
    struct httpd *srv = h->data;
    srv->open_handles--;
    maybe_finish(srv);
}

void srv_conn_gone(struct httpd *srv)
{
    srv->nconns--;
    if (srv->closing && srv->nconns == 0 && !uv_is_closing((uv_handle_t *)&srv->grace_timer)) {
        uv_timer_stop(&srv->grace_timer);
        uv_close((uv_handle_t *)&srv->grace_timer, on_srv_handle_closed);
    }
    maybe_finish(srv);
}

static void on_grace(uv_timer_t *t)
{
    struct httpd *srv = t->data;
    if (srv->conns)
        LOG_INFO(srv->name, "shutdown grace period over: closing %u connections", srv->nconns);
    while (srv->conns)
        conn_close(srv->conns);
}

void httpd_close(struct httpd *srv, httpd_close_cb cb, void *arg)
{
    if (!srv || srv->closing)
        return;
    srv->closing = true;
    srv->close_cb = cb;
    srv->close_arg = arg;
    uv_close((uv_handle_t *)&srv->listener, on_srv_handle_closed);
    uv_close((uv_handle_t *)&srv->poll_timer, on_srv_handle_closed);
    struct conn *c = srv->conns, *next;
    for (; c; c = next) {
        next = c->next;
        conn_shutdown(c);
    }
    if (srv->nconns == 0) {
        uv_close((uv_handle_t *)&srv->grace_timer, on_srv_handle_closed);
    } else {
        uv_timer_start(&srv->grace_timer, on_grace, srv->cfg.shutdown_grace_ms, 0);
    }
}

void httpd_free(struct httpd *srv)
{
    httpd_close(srv, NULL, NULL);
}

/* ---- certificates ------------------------------------------------------- */

static int read_small_file(const char *path, struct util_buf *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char buf[8192];
    ssize_t n;
    int rc = 0;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        util_buf_append(out, buf, (size_t)n);
        if (out->len > (16u << 20)) {
            rc = -EFBIG;
            break;
        }
    }
    if (n < 0)
        rc = -errno;
    close(fd);
    return rc;
}

int httpd_set_client_ca(struct httpd *srv, const char *pem, size_t len)
{
    if (!srv->cfg.tls)
        return -ENOTSUP;
    if (!pem || len == 0) {
        X509_STORE_free(srv->client_store);
        srv->client_store = NULL;
        return 0;
    }
    X509_STORE *st = tls_store_from_pem(pem, len);
    if (!st) {
        LOG_ERROR(srv->name, "client CA bundle holds no usable certificate; keeping the old one");
        return -EINVAL;
    }
    X509_STORE_free(srv->client_store);
    srv->client_store = st;
    return 0;
}

static int load_client_ca_file(struct httpd *srv)
{
    struct util_buf b = {0};
    int rc = read_small_file(srv->client_ca_file, &b);
    if (rc == 0)
        rc = httpd_set_client_ca(srv, b.data, b.len);
    else
        LOG_ERROR(srv->name, "cannot read client CA %s: %s", srv->client_ca_file, strerror(-rc));
    util_buf_free(&b);
    return rc;
}

int httpd_reload_certs(struct httpd *srv)
{
    if (!srv->cfg.tls)
        return 0;
    int result = 0;
    if (srv->client_ca_file) {
        struct file_id ca;
        tls_file_id(srv->client_ca_file, &ca);
        if (!tls_file_id_eq(&ca, &srv->ca_id)) {
            srv->ca_id = ca;
            int rc = load_client_ca_file(srv);
            if (rc == 0) {
                LOG_INFO(srv->name, "reloaded client CA %s", srv->client_ca_file);
                result = 1;
            } else {
                result = rc;
            }
        }
    }
    if (!srv->cert_file)
        return result;
    struct file_id cert, key;
    tls_file_id(srv->cert_file, &cert);
    tls_file_id(srv->key_file, &key);
    if (tls_file_id_eq(&cert, &srv->cert_id) && tls_file_id_eq(&key, &srv->key_id))
        return result;
    /* remember what we saw, so a broken pair is reported once per change */
    srv->cert_id = cert;
    srv->key_id = key;
    SSL_CTX *ctx = tls_ctx_new(srv->name, srv->cert_file, srv->key_file);
    if (!ctx) {
        LOG_ERROR(srv->name, "new certificate %s / key %s rejected; still serving the previous one",
                  srv->cert_file, srv->key_file);
        return -EPROTO;
    }
    SSL_CTX_free(srv->ctx); /* live connections keep their own reference */
    srv->ctx = ctx;
    LOG_INFO(srv->name, "reloaded certificate %s", srv->cert_file);
    return result < 0 ? result : 1;
}

static void on_poll(uv_timer_t *t)
{
    httpd_reload_certs(t->data);
}

/* ---- listening ---------------------------------------------------------- */

static void on_connection(uv_stream_t *server, int status)
{
    struct httpd *srv = server->data;
    if (status < 0) {
        LOG_WARN(srv->name, "listen error: %s", uv_strerror(status));
        return;
    }
    conn_accept(srv);
}

static void apply_defaults(struct httpd_config *c)
{
    if (!c->cert_poll_ms)
        c->cert_poll_ms = 10000;
    if (!c->max_header_bytes)
        c->max_header_bytes = 16384;
    if (!c->max_headers)
        c->max_headers = 100;
    if (!c->max_body_bytes)
        c->max_body_bytes = 1u << 20;
    if (!c->max_connections)
        c->max_connections = 256;
    if (!c->max_connections_per_source)
        c->max_connections_per_source = 64;
    if (c->max_connections_per_source > c->max_connections)
        c->max_connections_per_source = c->max_connections;
    if (!c->idle_timeout_ms)
        c->idle_timeout_ms = 60000;
    if (!c->header_timeout_ms)
        c->header_timeout_ms = 10000;
    if (!c->body_timeout_ms)
        c->body_timeout_ms = c->idle_timeout_ms;
    if (!c->shutdown_grace_ms)
        c->shutdown_grace_ms = 5000;
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static int bind_listener(struct httpd *srv)
{
    struct sockaddr_storage ss;
    int rc;
    if (strchr(srv->host, ':'))
        rc = uv_ip6_addr(srv->host, srv->cfg.port, (struct sockaddr_in6 *)&ss);
    else
        rc = uv_ip4_addr(srv->host, srv->cfg.port, (struct sockaddr_in *)&ss);
    if (rc < 0) {
        LOG_ERROR(srv->name, "bad listen address %s", srv->host);
        return -EINVAL;
    }
    rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 511, on_connection);
    if (rc < 0) {
        LOG_ERROR(srv->name, "cannot listen on %s:%d: %s", srv->host, srv->cfg.port,
                  uv_strerror(rc));
        return rc;
    }
    int len = sizeof(ss);
    if (uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len) == 0)
        srv->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

static void free_unstarted(struct httpd *srv)
{
    SSL_CTX_free(srv->ctx);
    X509_STORE_free(srv->client_store);
    xfree(srv->host);
    xfree(srv->cert_file);
    xfree(srv->key_file);
    xfree(srv->client_ca_file);
    xfree(srv->name);
    xfree(srv);
}

static void on_failed_close(uv_handle_t *h)
{
    struct httpd *srv = h->data;
    if (--srv->open_handles == 0)
        free_unstarted(srv);
}

int httpd_new(uv_loop_t *loop, const struct httpd_config *cfg, httpd_request_cb cb, void *arg,
              struct httpd **out)
{
    if (!loop || !cfg || !cb || !out || cfg->port < 0 || cfg->port > 65535)
        return -EINVAL;
    if (!cfg->tls && (cfg->cert_file || cfg->key_file || cfg->client_ca_file))
        return -EINVAL;
    if (!cfg->cert_file != !cfg->key_file)
        return -EINVAL;
    struct httpd *srv = xcalloc(1, sizeof(*srv));
    int rc = 0;
    srv->loop = loop;
    srv->cfg = *cfg;
    apply_defaults(&srv->cfg);
    srv->host = xstrdup(cfg->host ? cfg->host : "127.0.0.1");
    srv->cert_file = dup_or_null(cfg->cert_file);
    srv->key_file = dup_or_null(cfg->key_file);
    srv->client_ca_file = dup_or_null(cfg->client_ca_file);
    srv->name = xstrdup(cfg->name ? cfg->name : "httpd");
    srv->cfg.host = srv->host;
    srv->cfg.cert_file = srv->cert_file;
    srv->cfg.key_file = srv->key_file;
    srv->cfg.client_ca_file = srv->client_ca_file;
    srv->cfg.name = srv->name;
    srv->cb = cb;
    srv->arg = arg;

    if (srv->cfg.tls) {
        tls_file_id(srv->cert_file, &srv->cert_id);
        tls_file_id(srv->key_file, &srv->key_id);
        srv->ctx = tls_ctx_new(srv->name, srv->cert_file, srv->key_file);
        if (!srv->ctx) {
            free_unstarted(srv);
            return -EPROTO;
        }
        if (!srv->cert_file)
            LOG_WARN(srv->name, "no TLS certificate configured: serving a self-signed certificate "
                                "generated at startup (clients cannot verify it)");
        if (srv->client_ca_file) {
            tls_file_id(srv->client_ca_file, &srv->ca_id);
            rc = load_client_ca_file(srv);
            if (rc < 0) {
                free_unstarted(srv);
                return rc;
            }
        }
    }

    uv_tcp_init(loop, &srv->listener);
    uv_timer_init(loop, &srv->poll_timer);
    uv_timer_init(loop, &srv->grace_timer);
    srv->listener.data = srv->poll_timer.data = srv->grace_timer.data = srv;
    srv->open_handles = 3;
    rc = bind_listener(srv);
    if (rc < 0) {
        /* handles exist: release through their close callbacks */
        uv_close((uv_handle_t *)&srv->listener, on_failed_close);
        uv_close((uv_handle_t *)&srv->poll_timer, on_failed_close);
        uv_close((uv_handle_t *)&srv->grace_timer, on_failed_close);
        return rc;
    }
    if (srv->cfg.tls && !srv->cfg.no_cert_poll && (srv->cert_file || srv->client_ca_file))
        uv_timer_start(&srv->poll_timer, on_poll, srv->cfg.cert_poll_ms, srv->cfg.cert_poll_ms);
    LOG_INFO(srv->name, "listening on %s:%d (%s)", srv->host, srv->port,
             srv->cfg.tls ? "https" : "http");
    *out = srv;
    return 0;
}

int httpd_port(const struct httpd *srv)
{
    return srv->port;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* httpc's request setup: httpc_request() turns a request's options into an
 * easy handle (from the client's pool) and hands it to the multi, or to
 * h1.c for a plain scrape (request-h1.c).
 *
 * Every option is borrowed for the call only: curl copies strings and blobs,
 * and what curl keeps a pointer to (the header list, the connect-to entry)
 * is copied into the request, which owns it until hc_req_free(). A header
 * block that holds a bearer token is wiped before it is freed. Inside a curl
 * callback the new handle is not added to the multi (libcurl forbids it):
 * it waits on the to-do list for hc_process(). */
#include "httpc.h"
#include "httpc-int.h"

#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "util/util.h"

static bool method_is(const char *m, const char *want)
{
    return strcasecmp(m, want) == 0;
}

/* A CA given is the only one trusted, as Go's tls.Config.RootCAs (client-go,
 * Prometheus' tls_config): libcurl would also load its built-in bundle
 * (beside a blob) and directory (beside either; Debian's /etc/ssl/certs),
 * so both are unset. */
static int setup_tls(CURL *e, const struct httpc_tls *t)
{
    if (!t)
        return 0;
    if (t->ca_blob && t->ca_blob_len) {
#if LIBCURL_VERSION_NUM >= 0x074d00
        struct curl_blob b = {(void *)t->ca_blob, t->ca_blob_len, CURL_BLOB_COPY};
        if (curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b) != CURLE_OK)
            return -ENOTSUP;
        curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
        curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
#else
        return -ENOTSUP;
#endif
    } else if (t->ca_file) {
        curl_easy_setopt(e, CURLOPT_CAINFO, t->ca_file);
        curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    }
    if (t->cert_blob && t->cert_blob_len) {
        struct curl_blob b = {(void *)t->cert_blob, t->cert_blob_len, CURL_BLOB_COPY};
        if (curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b) != CURLE_OK)
            return -ENOTSUP;
    } else if (t->cert_file) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, t->cert_file);
    }
    curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    if (t->key_blob && t->key_blob_len) {
        struct curl_blob b = {(void *)t->key_blob, t->key_blob_len, CURL_BLOB_COPY};
        if (curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b) != CURLE_OK)
            return -ENOTSUP;
    } else if (t->key_file) {
        curl_easy_setopt(e, CURLOPT_SSLKEY, t->key_file);
    }
    curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    if (t->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    return 0;
}

/* A connection's data unacknowledged for HTTPC_TCP_USER_TIMEOUT_MS ends it
 * (TCP_USER_TIMEOUT; it also bounds the keepalive probes). The API server's
 * connection is one HTTP/2 connection that every watch and write shares:
 * with a peer gone silently (a load balancer's state lost), a timed-out
 * request closes only its own stream, the next reuses the dead connection,
 * and with Lease renewals every 2 s there is always data in flight, so
 * keepalive never probes: the kernel retransmits for about 15 minutes.
 * client-go's HTTP/2 pings notice it in about 45 s. */
#define HTTPC_TCP_USER_TIMEOUT_MS 30000u

static int on_sockopt(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    (void)arg;
    if (purpose == CURLSOCKTYPE_IPCXN) {
        unsigned int ms = HTTPC_TCP_USER_TIMEOUT_MS;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms)); /* best effort */
    }
    return CURL_SOCKOPT_OK;
}

/* The header lines as a curl_slist in one block of our own, the nodes
 * followed by copies of the strings: one allocation instead of two per line
 * (libcurl only reads the list). *len gets the block's size. */
static struct curl_slist *header_block(const char *const *lines, size_t n, size_t *len)
{
    size_t bytes = n * sizeof(struct curl_slist);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(lines[i]) + 1;
    char *mem = xmalloc(bytes);
    struct curl_slist *nodes = (struct curl_slist *)(void *)mem;
    char *str = mem + n * sizeof(*nodes);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(lines[i]) + 1;
        memcpy(str, lines[i], l);
        nodes[i].data = str;
        nodes[i].next = i + 1 < n ? &nodes[i + 1] : NULL;
        str += l;
    }
    *len = bytes;
    return nodes;
}

int httpc_request(struct httpc *c, const struct httpc_opts *o, httpc_done_cb cb, void *arg,
                  struct httpc_req **out)
{
    struct httpc_req *r = NULL;
    int rc = 0;
    if (out)
        *out = NULL;
    if (!c || !o || !o->url || !cb)
        return -EINVAL;
    if (o->proxy && o->no_proxy)
        return -EINVAL;
    if (c->closing || c->dead)
        return -ESHUTDOWN;

    r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->cb = cb;
    r->arg = arg;
    r->on_data = o->on_data;
    r->max_body = o->max_body ? o->max_body : HTTPC_DEFAULT_MAX_BODY;
    struct sockaddr_storage sa;
    char *h1req;
    size_t h1len;
    if (h1_prepare(o, &sa, &h1req, &h1len)) {
        hc_h1_start(r, o, &sa, h1req, h1len);
        goto started;
    }
    r->easy = hc_easy_take(c);
    if (!r->easy) {
        rc = -EIO;
        goto out;
    }
    CURL *e = r->easy;
    if (curl_easy_setopt(e, CURLOPT_URL, o->url) != CURLE_OK) {
        rc = -EINVAL;
        goto out;
    }
    /* an IP literal needs no resolving: keep it out of curl's DNS cache, which
     * curl 7.88 walks on every request (O(hosts) with 10,000 pods) */
    const char *host = strstr(o->url, "://");
    if (host && (host[3] == '[' || (host[3] >= '0' && host[3] <= '9')))
        curl_easy_setopt(e, CURLOPT_DNS_CACHE_TIMEOUT, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, hc_on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, hc_on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    hc_backstop_watch_connect(r, e, o->timeout_ms);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* Wait for a connection that may multiplex (HTTP/2 over TLS) rather than
     * opening a second one; on plain HTTP/1.1 it would only serialise. */
    if (strncasecmp(o->url, "https:", 6) == 0)
        curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    if (!o->no_reuse) { /* not for a connection used once: setsockopt calls for nothing */
        curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
        /* probes after 30 s idle, every 15 s: a peer gone without a FIN or
         * RST (a node down, a load balancer's state lost) is noticed in about
         * 3 minutes with the kernel's 9 probes, not the 60 s + 75 s x 9 of
         * curl's defaults */
        curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 15L);
    }
    if (!o->no_compression)
        curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    if (o->no_reuse)
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    if (o->recv_buffer) {
        size_t b = o->recv_buffer < 1024 ? 1024 : o->recv_buffer > 524288 ? 524288 : o->recv_buffer;
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)b);
    }
    /* pod scrapes: never the environment's proxy, whatever no_proxy covers */
    if (o->no_proxy)
        curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    if (o->proxy && curl_easy_setopt(e, CURLOPT_PROXY, o->proxy) != CURLE_OK) {
        rc = -EINVAL;
        goto out;
    }
    /* a proxy given carries every request, as client-go's http.ProxyURL: libcurl
     * would still go around it for the hosts of NO_PROXY */
    if (o->proxy)
        curl_easy_setopt(e, CURLOPT_NOPROXY, "");
    if (o->connect_to) { /* curl keeps the list, not a copy: the request owns it */
        size_t n = strlen(o->connect_to) + 1;
        r->connect_to = xmalloc(sizeof(*r->connect_to) + n);
        r->connect_to->data = (char *)(r->connect_to + 1);
        r->connect_to->next = NULL;
        memcpy(r->connect_to->data, o->connect_to, n);
        if (curl_easy_setopt(e, CURLOPT_CONNECT_TO, r->connect_to) != CURLE_OK) {
            rc = -EINVAL;
            goto out;
        }
    }
    if (o->timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
    if (o->connect_timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)o->connect_timeout_ms);
    if (o->stall_timeout_ms > 0) {
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)((o->stall_timeout_ms + 999) / 1000));
    }
    if (!o->on_data)
        curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)r->max_body);

    const char *method = o->method ? o->method : (o->body ? "POST" : "GET");
    if (method_is(method, "GET")) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (method_is(method, "HEAD")) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else {
        if (!method_is(method, "POST"))
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        if (o->body || method_is(method, "POST")) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)(o->body ? o->body_len : 0));
            curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, o->body ? (const char *)o->body : "");
        }
    }

    rc = setup_tls(e, o->tls);
    if (rc < 0)
        goto out;

    size_t nextra = 0;
    for (const char *const *h = o->headers; h && *h; h++)
        nextra++;
    const char **lines = xmalloc((4 + nextra) * sizeof(*lines));
    size_t n = 0;
    char *ctype = NULL, *auth = NULL;
    lines[n++] = "Expect:";
    if (o->body || o->content_type)
        lines[n++] = ctype = xasprintf("Content-Type: %s", o->content_type
                                                               ? o->content_type
                                                               : "application/octet-stream");
    else
        lines[n++] = "Content-Type:"; /* no form default */
    if (o->bearer)
        lines[n++] = auth = xasprintf("Authorization: Bearer %s", o->bearer);
    if (o->no_reuse)
        lines[n++] = "Connection: close";
    for (size_t i = 0; i < nextra; i++)
        lines[n++] = o->headers[i];
    r->hdrs = header_block(lines, n, &r->hdrs_len);
    r->hdrs_secret = auth != NULL;
    if (auth)
        explicit_bzero(auth, strlen(auth));
    xfree(auth);
    xfree(ctype);
    xfree(lines);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);

    if (c->in_curl) {
        r->state = REQ_PENDING_ADD;
        hc_todo_push(r);
    } else {
        CURLMcode mc = curl_multi_add_handle(c->multi, e);
        if (mc != CURLM_OK) {
            LOG_ERROR("httpc", "curl_multi_add_handle: %s", curl_multi_strerror(mc));
            rc = -EIO;
            goto out;
        }
        r->state = REQ_ACTIVE;
    }
    hc_backstop_start(r, o->timeout_ms, o->connect_timeout_ms);
started:
    c->inflight++;
    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    if (out)
        *out = r;
    r = NULL;
out:
    if (r)
        hc_req_free(r);
    return rc;
}

void *httpc_req_arg(const struct httpc_req *r)
{
    return r->arg;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* httpc's response side: curl's header and body callbacks for a request,
 * the header lookups of the public API, and the translation of curl's
 * errors into negative errnos.
 *
 * The raw header block of the last response (after a 100 Continue, the
 * final one) is kept in the request and split into name/value pairs in place
 * when the request completes; the lookups read those pairs, valid until the
 * completion callback returns. A buffered body grows up to max_body, a
 * header block up to HTTPC_MAX_HEADER_BYTES; past either, the write is
 * refused and the request ends with -EMSGSIZE. Only 2xx bodies stream. */
#include "httpc.h"
#include "httpc-int.h"

#include <curl/curl.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/util.h"

int httpc_curl_errno(int code)
{
    switch ((CURLcode)code) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return -EHOSTUNREACH;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_USE_SSL_FAILED:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_BAD_CONTENT_ENCODING:
        return -EPROTO;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return -ECONNRESET;
    case CURLE_FILESIZE_EXCEEDED:
        return -EMSGSIZE;
    case CURLE_URL_MALFORMAT:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_UNKNOWN_OPTION:
        return -EINVAL;
    case CURLE_UNSUPPORTED_PROTOCOL:
        return -ENOTSUP;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    default:
        return -EIO;
    }
}

/* ---- easy handle callbacks --------------------------------------------- */

size_t hc_on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    struct httpc_req *r = ud;
    size_t len = size * nmemb;
    if (r->cancelled || r->err)
        return 0;
    long status = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    if (r->on_data && status >= 200 && status < 300) {
        r->in_data = true;
        int rc = r->on_data(r, status, p, len, r->arg);
        r->in_data = false;
        if (rc < 0) {
            r->err = rc;
            r->why = ABORT_DATA_CB;
            return 0;
        }
        return r->cancelled ? 0 : len;
    }
    if (r->body.len + len > r->max_body) {
        r->err = -EMSGSIZE;
        r->why = ABORT_BODY_CAP;
        return 0;
    }
    util_buf_append(&r->body, p, len);
    return len;
}

size_t hc_on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    struct httpc_req *r = ud;
    size_t len = size * nmemb;
    if (r->cancelled)
        return 0;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0)
        util_buf_reset(&r->hdrbuf); /* a new response (after 100 Continue) */
    if (r->hdrbuf.len + len > HTTPC_MAX_HEADER_BYTES) {
        r->err = -EMSGSIZE;
        r->why = ABORT_HEADER_CAP;
        return 0;
    }
    util_buf_append(&r->hdrbuf, p, len);
    return len;
}

/* Split the raw header block into name/value pairs in place. */
void hc_parse_headers(struct httpc_req *r)
{
    char *p = r->hdrbuf.data;
    if (!p)
        return;
    size_t cap = 0;
    while (*p) {
        char *eol = strchr(p, '\n');
        char *next = eol ? eol + 1 : p + strlen(p);
        char *end = eol ? eol : next;
        while (end > p && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
            end--;
        *end = '\0';
        char *colon = strchr(p, ':');
        if (colon && colon != p) {
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            if (r->nparsed == cap) {
                cap = cap ? cap * 2 : 16;
                r->parsed = xrealloc(r->parsed, cap * sizeof(*r->parsed));
            }
            r->parsed[r->nparsed++] = (struct hdr){p, v};
        }
        p = next;
    }
}

const char *httpc_req_content_type(const struct httpc_req *r)
{
    char *ct = NULL;
    if (r->in_data && !r->easy)
        return r->h1_ctype;
    if (!r->in_data || curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ct) != CURLE_OK)
        return NULL;
    return ct;
}

const char *httpc_resp_header(const struct httpc_resp *resp, const char *name)
{
    const struct httpc_req *r = resp->req_;
    if (!r)
        return NULL;
    for (size_t i = r->nparsed; i > 0; i--)
        if (strcasecmp(r->parsed[i - 1].name, name) == 0)
            return r->parsed[i - 1].value;
    return NULL;
}

const char *httpc_resp_header_nth(const struct httpc_resp *resp, const char *name, size_t i)
{
    const struct httpc_req *r = resp->req_;
    if (!r)
        return NULL;
    for (size_t k = 0; k < r->nparsed; k++)
        if (strcasecmp(r->parsed[k].name, name) == 0 && i-- == 0)
            return r->parsed[k].value;
    return NULL;
}

int64_t httpc_resp_retry_after_ms(const struct httpc_resp *resp, int64_t now_unix_ms)
{
    const char *v = httpc_resp_header(resp, "Retry-After");
    if (!v || !*v)
        return -1;
    int64_t secs;
    if (util_parse_int64(v, &secs) == 0)
        return secs < 0 ? -1 : (secs > 86400 ? 86400 : secs) * 1000;
    time_t t = curl_getdate(v, NULL);
    if (t <= 0)
        return -1;
    int64_t ms = (int64_t)t * 1000 - now_unix_ms;
    return ms < 0 ? 0 : ms;
}

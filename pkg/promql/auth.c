/* SPDX-License-Identifier: Apache-2.0 */
/* promql/auth: the extra headers and credentials of requests to Prometheus
 * (see auth.h and promql_header_check in promql.h). Secrets live in files,
 * never in the config (which is a ConfigMap), and are read for every request:
 * projected service-account tokens and mounted Secrets rotate in place. Every
 * buffer that held a secret is wiped before it is freed. */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/util.h"

#define MAX_SECRET (64u << 10)
#define MAX_HEADER_VALUE (8u << 10)

/* Headers the client sets itself, or that change the connection: those of
 * the ReservedHeaders of Prometheus' own HTTP client (prometheus/common
 * config) that a query can carry (its remote-write, scrape-timeout and SigV4
 * ones cannot), and those curl or HTTP framing own. */
static const char *const reserved[] = {
    "Accept",           "Accept-Encoding",  "Authorization",
    "Connection",       "Content-Encoding", "Content-Length",
    "Content-Type",     "Expect",           "Host",
    "Keep-Alive",       "Proxy-Authenticate", "Proxy-Authorization",
    "TE",               "Trailer",          "Transfer-Encoding",
    "Upgrade",          "User-Agent",       "WWW-Authenticate",
};

/* RFC 9110 tchar */
static bool tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

int promql_header_check(const char *name, const char *value, char *err, size_t errlen)
{
    if (!name || !*name) {
        snprintf(err, errlen, "a header needs a name");
        return -EINVAL;
    }
    size_t nl = strlen(name);
    for (size_t i = 0; i < nl; i++) {
        if (!tchar((unsigned char)name[i]) || nl > 256) {
            snprintf(err, errlen,
                     "header name '%.80s' is not an HTTP token (letters, digits and "
                     "!#$%%&'*+-.^_`|~, at most 256)",
                     name);
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < UTIL_ARRAY_LEN(reserved); i++) {
        if (strcasecmp(name, reserved[i]) == 0) {
            snprintf(err, errlen, "header %s is set by gpuscaler itself%s", reserved[i],
                     strcasecmp(name, "Authorization") == 0
                         ? " (use prometheus.token-file, or username and password-file)"
                         : "");
            return -EINVAL;
        }
    }
    if (!value)
        value = "";
    size_t vl = strlen(value);
    if (vl > MAX_HEADER_VALUE) {
        snprintf(err, errlen, "header %.80s: the value is over %u bytes", name, MAX_HEADER_VALUE);
        return -EINVAL;
    }
    for (size_t i = 0; i < vl; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            snprintf(err, errlen, "header %.80s: the value has a control character (0x%02x)",
                     name, c);
            return -EINVAL;
        }
    }
    return 0;
}

int promql_config_check(const struct promql_config *c, char *err, size_t errlen)
{
    bool token = c->token_file && *c->token_file, user = c->username && *c->username,
         pass = c->password_file && *c->password_file, cert = c->cert_file && *c->cert_file,
         key = c->key_file && *c->key_file;
    if (token && (user || pass)) {
        snprintf(err, errlen, "token-file and username/password-file exclude each other");
        return -EINVAL;
    }
    if (user != pass) {
        snprintf(err, errlen, "%s: set without %s (give both, or neither)",
                 user ? "username" : "password-file", user ? "password-file" : "username");
        return -EINVAL;
    }
    if (user) {
        for (const char *p = c->username; *p; p++) {
            if (*p == ':' || (unsigned char)*p < 0x20 || *p == 0x7f) {
                snprintf(err, errlen, "username: '%.80s' has a ':' or a control character",
                         c->username);
                return -EINVAL;
            }
        }
    }
    if (cert != key) {
        snprintf(err, errlen, "%s: set without %s (give both, or neither)",
                 cert ? "cert-file" : "key-file", cert ? "key-file" : "cert-file");
        return -EINVAL;
    }
    if (c->n_headers > PROMQL_MAX_HEADERS) {
        snprintf(err, errlen, "headers: at most %d", PROMQL_MAX_HEADERS);
        return -EINVAL;
    }
    for (size_t i = 0; i < c->n_headers; i++) {
        char why[200];
        if (promql_header_check(c->headers[i].name, c->headers[i].value, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "headers: %s", why);
            return -EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcasecmp(c->headers[i].name, c->headers[j].name) == 0) {
                snprintf(err, errlen, "headers: %.80s is given twice", c->headers[i].name);
                return -EINVAL;
            }
        }
    }
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s && *s ? xstrdup(s) : NULL;
}

void promql_auth_init(struct promql_auth *a, const struct promql_config *c)
{
    memset(a, 0, sizeof(*a));
    a->token_file = dup_or_null(c->token_file);
    a->username = dup_or_null(c->username);
    a->password_file = dup_or_null(c->password_file);
    a->lines = xcalloc(c->n_headers + 2, sizeof(*a->lines));
    a->lines[a->n_lines++] = xstrdup("Accept: application/json");
    for (size_t i = 0; i < c->n_headers; i++) {
        struct util_buf b = {0};
        const char *v = c->headers[i].value ? c->headers[i].value : "";
        /* curl drops a header given as "Name:" with no value; "Name;" sends it empty */
        if (*v)
            util_buf_printf(&b, "%s: %s", c->headers[i].name, v);
        else
            util_buf_printf(&b, "%s;", c->headers[i].name);
        a->lines[a->n_lines++] = util_buf_steal(&b);
    }
}

void promql_auth_free(struct promql_auth *a)
{
    xfree(a->token_file);
    xfree(a->username);
    xfree(a->password_file);
    for (size_t i = 0; i < a->n_lines; i++)
        xfree(a->lines[i]);
    xfree(a->lines);
    memset(a, 0, sizeof(*a));
}

static void wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        xfree(s);
    }
}

/* The file's content without white space around it, as Prometheus reads
 * its credentials files (strings.TrimSpace; ASCII white space here). what
 * names it in errors ("bearer token file"). */
static int read_secret(const char *path, const char *what, char **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot read the %s %.120s: %s", what, path, strerror(errno));
        return -EIO;
    }
    struct util_buf b = {0};
    char chunk[4096];
    ssize_t n;
    int rc = 0;
    while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
        util_buf_append(&b, chunk, (size_t)n);
        if (b.len > MAX_SECRET) {
            rc = -EIO;
            snprintf(err, errlen, "%s %.120s is over %u bytes", what, path, MAX_SECRET);
            break;
        }
    }
    if (n < 0 && rc == 0) {
        rc = -EIO;
        snprintf(err, errlen, "cannot read the %s %.120s: %s", what, path, strerror(errno));
    }
    close(fd);
    static const char space[] = " \t\n\r\v\f";
    while (b.len && memchr(space, b.data[b.len - 1], sizeof(space) - 1))
        b.data[--b.len] = '\0';
    size_t lead = 0;
    while (lead < b.len && memchr(space, b.data[lead], sizeof(space) - 1))
        lead++;
    if (lead) {
        memmove(b.data, b.data + lead, b.len - lead + 1);
        b.len -= lead;
        explicit_bzero(b.data + b.len + 1, lead); /* the moved tail's old copy */
    }
    if (rc == 0 && b.len == 0) {
        rc = -EIO;
        snprintf(err, errlen, "%s %.120s is empty", what, path);
    }
    if (rc == 0 && memchr(b.data, '\n', b.len)) {
        rc = -EIO;
        snprintf(err, errlen, "%s %.120s has more than one line", what, path);
    }
    if (rc == 0) {
        *out = util_buf_steal(&b);
    } else {
        explicit_bzero(b.data ? b.data : chunk, b.data ? b.len : sizeof(chunk));
        util_buf_free(&b);
    }
    explicit_bzero(chunk, sizeof(chunk));
    return rc;
}

static char *basic_line(const char *user, const char *pass)
{
    size_t ul = strlen(user), pl = strlen(pass), n = ul + 1 + pl;
    unsigned char *raw = xmalloc(n);
    memcpy(raw, user, ul);
    raw[ul] = ':';
    memcpy(raw + ul + 1, pass, pl);
    static const char prefix[] = "Authorization: Basic ";
    size_t enc = (n + 2) / 3 * 4;
    char *line = xmalloc(sizeof(prefix) + enc);
    memcpy(line, prefix, sizeof(prefix) - 1);
    /* n is under 2 * 64 KiB: one call */
    int w = EVP_EncodeBlock((unsigned char *)line + sizeof(prefix) - 1, raw, (int)n);
    line[sizeof(prefix) - 1 + (size_t)(w > 0 ? w : 0)] = '\0';
    explicit_bzero(raw, n);
    xfree(raw);
    return line;
}

int promql_auth_begin(const struct promql_auth *a, struct promql_auth_req *r, char *err,
                      size_t errlen)
{
    memset(r, 0, sizeof(*r));
    int rc = 0;
    if (a->token_file && (rc = read_secret(a->token_file, "bearer token file", &r->bearer, err,
                                           errlen)) < 0)
        return rc;
    if (a->username) {
        char *pass = NULL;
        if ((rc = read_secret(a->password_file, "password file", &pass, err, errlen)) < 0)
            return rc;
        r->basic = basic_line(a->username, pass);
        wipe_free(pass);
    }
    r->headers = xcalloc(a->n_lines + 2, sizeof(*r->headers));
    size_t n = 0;
    for (size_t i = 0; i < a->n_lines; i++)
        r->headers[n++] = a->lines[i];
    if (r->basic)
        r->headers[n++] = r->basic;
    r->headers[n] = NULL;
    return 0;
}

void promql_auth_end(struct promql_auth_req *r)
{
    wipe_free(r->bearer);
    wipe_free(r->basic);
    xfree(r->headers);
    memset(r, 0, sizeof(*r));
}

/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz-h1: feeds arbitrary bytes as a server's answer to httpc's plain
 * HTTP/1.1 response parser (h1.c), whole and in chunks whose size comes from
 * the first byte, then the end of the connection; checks that it settles on
 * one answer, delivers at most one header block and no more body than it
 * was given, and that both splits agree. */
#include "httpc/httpc-int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct tally {
    int headers;
    int status;
    size_t body;
};

static int on_headers(void *ud, int status, const char *block, size_t len)
{
    struct tally *t = ud;
    if (strlen(block) != len || status < 200 || status > 999)
        abort();
    t->headers++;
    t->status = status;
    return 0;
}

static int on_body(void *ud, const char *p, size_t n)
{
    struct tally *t = ud;
    (void)p;
    t->body += n;
    return t->body > (1u << 20) ? -EMSGSIZE : 0; /* a callback's refusal, as httpc's cap */
}

static const struct h1_parser_cb cbs = {on_headers, on_body};

static int run(const uint8_t *d, size_t n, size_t chunk, struct tally *t)
{
    struct h1_parser p;
    h1_parser_init(&p, &cbs, t);
    int rc = 0;
    for (size_t off = 0; off < n && rc == 0; off += chunk)
        rc = h1_parser_feed(&p, (const char *)d + off, n - off < chunk ? n - off : chunk);
    if (rc == 0)
        rc = h1_parser_eof(&p);
    if (rc == 0 || h1_parser_eof(&p) != rc || h1_parser_feed(&p, "x", 1) != rc)
        abort(); /* one answer, and it stays */
    if (t->headers > 1 || t->body > n || (rc == 1 && t->headers != 1))
        abort();
    h1_parser_free(&p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)(data[0] % 16) + 1;
    struct tally whole = {0}, split = {0};
    int a = run(data + 1, size - 1, size, &whole);
    int b = run(data + 1, size - 1, chunk, &split);
    if (a != b || whole.headers != split.headers || whole.status != split.status ||
        whole.body != split.body)
        abort();
    return 0;
}

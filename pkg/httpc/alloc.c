/* SPDX-License-Identifier: Apache-2.0 */
/* httpc/alloc: libcurl's allocator, counted, for httpc_memory_bytes().
 *
 * The one piece of process-wide state in httpc: libcurl's allocator is global
 * (set by curl_global_init_mem, with no user argument), so the bytes it holds
 * are counted in a file-scope atomic. The functions wrap the C library's;
 * each block carries its size in a header. */
#include <curl/curl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "httpc-int.h"
#include "httpc.h"

/* Each block libcurl gets carries its size in a header of HDR bytes (the
 * malloc alignment, so the block stays aligned). libcurl frees only what it
 * allocated through these functions (curl_global_init_mem's contract), so
 * every header is ours. */
#define HDR 16

static atomic_size_t curl_bytes; /* see the file comment */

static void *tag(void *p, size_t n)
{
    if (!p)
        return NULL;
    *(size_t *)p = n;
    atomic_fetch_add_explicit(&curl_bytes, n, memory_order_relaxed);
    return (char *)p + HDR;
}

static void *cm_malloc(size_t n)
{
    return n > SIZE_MAX - HDR ? NULL : tag(malloc(n + HDR), n); /* style: allow */
}

static void *cm_calloc(size_t nmemb, size_t size)
{
    if (size && nmemb > (SIZE_MAX - HDR) / size)
        return NULL;
    return tag(calloc(1, nmemb * size + HDR), nmemb * size); /* style: allow */
}

static char *cm_strdup(const char *str)
{
    size_t n = strlen(str) + 1;
    char *p = cm_malloc(n);
    if (p)
        memcpy(p, str, n);
    return p;
}

static void cm_free(void *q)
{
    if (!q)
        return;
    char *p = (char *)q - HDR;
    atomic_fetch_sub_explicit(&curl_bytes, *(size_t *)p, memory_order_relaxed);
    free(p); /* style: allow */
}

static void *cm_realloc(void *q, size_t n)
{
    if (!q)
        return cm_malloc(n);
    if (n == 0) {
        cm_free(q);
        return NULL;
    }
    if (n > SIZE_MAX - HDR)
        return NULL;
    char *p = (char *)q - HDR;
    size_t old = *(size_t *)p;
    char *np = realloc(p, n + HDR); /* style: allow */
    if (!np)
        return NULL; /* the old block is untouched */
    atomic_fetch_sub_explicit(&curl_bytes, old, memory_order_relaxed);
    return tag(np, n);
}

size_t httpc_memory_bytes(void)
{
    return atomic_load_explicit(&curl_bytes, memory_order_relaxed);
}

int httpc_global_init(void)
{
    /* the first init installs the functions; later ones only count up */
    return curl_global_init_mem(CURL_GLOBAL_DEFAULT, cm_malloc, cm_free, cm_realloc, cm_strdup,
                                cm_calloc) == CURLE_OK
               ? 0
               : -1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the fuzz targets whose input is "key=value" lines (the policy's
 * keys, the simulator's): splits a fuzz input into those lines. Header-only,
 * because a fuzz target links nothing but its module and standalone.c. */
#ifndef GPUSCALER_FUZZ_KEYLINES_H
#define GPUSCALER_FUZZ_KEYLINES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*fuzz_keyline_fn)(void *ctx, const char *key, const char *value);

/* Calls fn for each line of data that holds a '=': the key is what comes before
 * the first one, the value what follows it. Input after a NUL byte is ignored.
 * Returns -1 when out of memory, else 0. */
static inline int fuzz_keylines(const uint8_t *data, size_t size, fuzz_keyline_fn fn, void *ctx)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return -1;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        fn(ctx, line, eq + 1);
    }
    free(buf);
    return 0;
}

#endif

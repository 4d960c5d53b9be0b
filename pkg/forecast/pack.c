/* SPDX-License-Identifier: Apache-2.0 */
/* forecast: the packed state, a zlib envelope around the state codec's bytes
 * (forecast-state.c) for the checkpoint ConfigMaps, which hold at most 1 MiB.
 *
 * Layout (integers little-endian):
 *
 *   off size  field
 *     0    4  magic "GSFZ"
 *     4    4  length of the state inside (u32), at most the largest state
 *             the config admits (fc_state_max_len())
 *     8       one zlib stream (RFC 1950) of exactly that many bytes, and
 *             nothing after it
 *
 * The state inside is a plain one ("GSFC"), checked as any other: its CRC,
 * its version, its canonical form. Most of a young forecaster's state is
 * zeros (the recent seasons' ring before it has filled), so for days the
 * envelope is a fraction of the state; once the ring has filled, traffic's
 * noisy peaks and indices pack to about three quarters of it
 * (docs/operations.md, checkpoints).
 * Inflating is bounded by the length declared, which is bounded by the
 * config: a stream that inflates to more, less, or has bytes after it is
 * refused with a message, as is a packed state inside a packed state. */
#include "forecast-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "util/util.h"

#define PACK_MAGIC "GSFZ"
#define PACK_HEADER 8

void forecast_serialize_packed(const struct forecast *f, uint8_t **out, size_t *outlen)
{
    uint8_t *raw = NULL;
    size_t rawlen = 0;
    forecast_serialize(f, &raw, &rawlen);
    uLong bound = compressBound((uLong)rawlen);
    uint8_t *buf = xmalloc(PACK_HEADER + (size_t)bound);
    uLongf clen = bound;
    if (rawlen > UINT32_MAX ||
        compress2(buf + PACK_HEADER, &clen, raw, (uLong)rawlen, Z_BEST_COMPRESSION) != Z_OK) {
        /* not expected (the bound is zlib's own); the plain state is read too */
        xfree(buf);
        *out = raw;
        *outlen = rawlen;
        return;
    }
    memcpy(buf, PACK_MAGIC, 4);
    for (int i = 0; i < 4; i++)
        buf[4 + i] = (uint8_t)(rawlen >> (8 * i));
    xfree(raw);
    *out = buf;
    *outlen = PACK_HEADER + (size_t)clen;
}

bool fc_is_packed(const uint8_t *buf, size_t len)
{
    return buf && len >= 4 && memcmp(buf, PACK_MAGIC, 4) == 0;
}

int fc_unpack(const uint8_t *buf, size_t len, size_t max, uint8_t **out, size_t *outlen,
              char *err, size_t errlen)
{
    if (len < PACK_HEADER + 2) {
        fc_set_err(err, errlen, "truncated packed state: %zu bytes", len);
        return -EINVAL;
    }
    if (len - PACK_HEADER > UINT32_MAX) {
        fc_set_err(err, errlen, "packed state of %zu bytes is too long", len);
        return -EINVAL;
    }
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        n |= (size_t)buf[4 + i] << (8 * i);
    if (n == 0 || n > max) {
        fc_set_err(err, errlen,
                   "packed state declares %zu bytes; this config's states have 1 to %zu", n, max);
        return -EINVAL;
    }
    uint8_t *raw = xmalloc(n);
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit(&zs) != Z_OK) {
        xfree(raw);
        fc_set_err(err, errlen, "zlib: cannot start inflating");
        return -ENOMEM;
    }
    zs.next_in = (Bytef *)(uintptr_t)(buf + PACK_HEADER);
    zs.avail_in = (uInt)(len - PACK_HEADER);
    zs.next_out = raw;
    zs.avail_out = (uInt)n;
    int rc = inflate(&zs, Z_FINISH);
    size_t got = n - zs.avail_out, left = zs.avail_in;
    const char *why = zs.msg;
    int ret = 0;
    if (rc == Z_STREAM_END && left == 0 && got == n) {
        *out = raw;
        *outlen = n;
        raw = NULL;
    } else if (rc == Z_STREAM_END && left > 0) {
        fc_set_err(err, errlen, "%zu bytes after the packed state's stream", left);
        ret = -EINVAL;
    } else if (rc == Z_STREAM_END) {
        fc_set_err(err, errlen, "packed state inflates to %zu bytes, %zu declared", got, n);
        ret = -EINVAL;
    } else if (rc == Z_BUF_ERROR && zs.avail_out == 0) {
        fc_set_err(err, errlen, "packed state inflates to more than the %zu bytes declared", n);
        ret = -EINVAL;
    } else {
        fc_set_err(err, errlen, "corrupt packed state (zlib: %s)",
                   why ? why : rc == Z_BUF_ERROR ? "truncated stream" : "error");
        ret = -EINVAL;
    }
    inflateEnd(&zs);
    xfree(raw);
    return ret;
}

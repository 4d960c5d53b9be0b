/* SPDX-License-Identifier: Apache-2.0 */
/* kube/watch: incremental decoder of the API server's watch stream.
 *
 * The stream is newline-delimited JSON ({"type":..,"object":{..}}\n per event,
 * as kube-apiserver's JSON stream encoder writes it). Chunks of any size are
 * fed in; bytes after the last newline wait in a buffer capped at max_event.
 * Only the new bytes are scanned for a newline, so a large event arriving in
 * many small reads costs O(size), and when the buffer is empty complete lines
 * are parsed straight from the caller's chunk without copying. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube-int.h"

struct kube_watch_decoder {
    struct util_buf buf; /* the incomplete tail */
    size_t max_event;
    int err;
    char errmsg[256];
};

static const char *const type_names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

const char *kube_event_type_name(enum kube_event_type t)
{
    return (unsigned)t < UTIL_ARRAY_LEN(type_names) ? type_names[t] : "?";
}

struct kube_watch_decoder *kube_watch_decoder_new(size_t max_event)
{
    struct kube_watch_decoder *d = xcalloc(1, sizeof(*d));
    d->max_event = max_event ? max_event : KUBE_WATCH_MAX_EVENT;
    return d;
}

void kube_watch_decoder_free(struct kube_watch_decoder *d)
{
    if (!d)
        return;
    util_buf_free(&d->buf);
    xfree(d);
}

void kube_watch_decoder_reset(struct kube_watch_decoder *d)
{
    util_buf_free(&d->buf);
    d->err = 0;
    d->errmsg[0] = '\0';
}

const char *kube_watch_decoder_error(const struct kube_watch_decoder *d)
{
    return d->errmsg;
}

static int fail(struct kube_watch_decoder *d, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct kube_watch_decoder *d, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->errmsg, sizeof(d->errmsg), fmt, ap);
    va_end(ap);
    d->err = err;
    return err;
}

static bool blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n')
            return false;
    return true;
}

/* Parse one line (without its newline) and hand the event over. */
static int decode_line(struct kube_watch_decoder *d, const char *p, size_t n,
                       kube_watch_event_cb cb, void *arg)
{
    if (blank(p, n))
        return 0;
    json_error_t jerr;
    json_t *ev = json_loadb(p, n, JSON_REJECT_DUPLICATES | KUBE_JSON_FLAGS, &jerr);
    if (!ev)
        return fail(d, -EBADMSG, "watch event is not JSON: %s at byte %d", jerr.text,
                    jerr.position);
    int rc = 0;
    json_t *type = json_object_get(ev, "type");
    json_t *obj = json_object_get(ev, "object");
    if (!json_is_string(type) || !json_is_object(obj)) {
        rc = fail(d, -EBADMSG, "watch event lacks a string \"type\" and an object \"object\"");
        goto out;
    }
    const char *t = json_string_value(type);
    size_t i;
    for (i = 0; i < UTIL_ARRAY_LEN(type_names); i++)
        if (strcmp(t, type_names[i]) == 0)
            break;
    if (i == UTIL_ARRAY_LEN(type_names)) {
        rc = fail(d, -EBADMSG, "unknown watch event type \"%.40s\"", t);
        goto out;
    }
    rc = cb((enum kube_event_type)i, obj, arg);
    if (rc < 0)
        d->err = rc;
out:
    json_decref(ev);
    return rc < 0 ? rc : 0;
}

int kube_watch_decoder_feed(struct kube_watch_decoder *d, const char *buf, size_t len,
                            kube_watch_event_cb cb, void *arg)
{
    if (d->err)
        return d->err;
    size_t pos = 0;
    /* Complete the buffered tail first. */
    if (d->buf.len > 0) {
        const char *nl = memchr(buf, '\n', len);
        size_t take = nl ? (size_t)(nl - buf) : len;
        if (d->buf.len + take > d->max_event)
            return fail(d, -EMSGSIZE, "watch event larger than %zu bytes", d->max_event);
        util_buf_append(&d->buf, buf, take);
        if (!nl)
            return 0;
        int rc = decode_line(d, d->buf.data, d->buf.len, cb, arg);
        util_buf_reset(&d->buf);
        if (rc < 0)
            return rc;
        pos = take + 1;
    }
    /* Whole lines straight from the chunk. */
    while (pos < len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl)
            break;
        size_t n = (size_t)(nl - (buf + pos));
        if (n > d->max_event)
            return fail(d, -EMSGSIZE, "watch event larger than %zu bytes", d->max_event);
        int rc = decode_line(d, buf + pos, n, cb, arg);
        if (rc < 0)
            return rc;
        pos += n + 1;
    }
    if (pos < len) {
        if (len - pos > d->max_event)
            return fail(d, -EMSGSIZE, "watch event larger than %zu bytes", d->max_event);
        util_buf_append(&d->buf, buf + pos, len - pos);
    }
    return 0;
}

int kube_watch_decoder_finish(struct kube_watch_decoder *d)
{
    if (d->err)
        return d->err;
    if (d->buf.len > 0 && !blank(d->buf.data, d->buf.len))
        return fail(d, -ENODATA, "watch stream ended inside an event (%zu bytes)", d->buf.len);
    util_buf_reset(&d->buf);
    return 0;
}

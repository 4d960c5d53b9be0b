/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A checkpoint ConfigMap's queue of removals and what its keys weigh
 * (checkpoint.c writes the ConfigMaps): the keys to remove, each from the
 * maps (binaryData, data) it is to leave, taken off the queue map by map as
 * the saves carrying them are written; each key's bytes by map as last read
 * or written; and the removals a save carries with the bytes they take off.
 */
#include "controller-int.h"

#include <string.h>

int ctl_ckpt_home(const char *key)
{
    return strncmp(key, "unit.", 5) == 0 || strncmp(key, "uid.", 4) == 0 ? CTL_CKPT_IN_TEXT
                                                                          : CTL_CKPT_IN_BIN;
}

void ctl_ckpt_drops_free(struct ctl_ckpt *k)
{
    for (size_t i = 0; i < k->ndrop; i++)
        xfree(k->drop[i]);
    xfree(k->drop);
    json_decref(k->dropset);
    json_decref(k->requeued);
    json_decref(k->sizes[0]);
    json_decref(k->sizes[1]);
}

/* Once each: the queue's set finds a key in O(1) (a scan of the queue per
 * key was quadratic in the keys of a read); a key queued already gains the
 * maps. */
void ctl_ckpt_drop(struct ctl_ckpt *k, const char *key, int in)
{
    if (!k->dropset)
        k->dropset = json_object();
    if (k->patch_inflight) {
        /* queued again while a save is in flight: that save settles what it was
         * built with, not this */
        if (!k->requeued)
            k->requeued = json_object();
        json_t *r = json_object_get(k->requeued, key);
        json_object_set_new(k->requeued, key, json_integer(json_integer_value(r) | in));
    }
    json_t *was = json_object_get(k->dropset, key);
    if (was) {
        json_integer_set(was, json_integer_value(was) | in);
        return;
    }
    json_object_set_new(k->dropset, key, json_integer(in));
    if (k->ndrop == k->dropcap) {
        k->dropcap = k->dropcap ? 2 * k->dropcap : 16;
        k->drop = xrealloc(k->drop, k->dropcap * sizeof(*k->drop));
    }
    k->drop[k->ndrop++] = xstrdup(key);
}

int64_t ctl_ckpt_share(const struct ctl_ckpt *k, const char *key, int map)
{
    return (int64_t)json_integer_value(json_object_get(k->sizes[map == CTL_CKPT_IN_TEXT], key));
}

/* Core validation sums the values of data and the decoded values of
 * binaryData; each key's share is kept by map, since a removal may reach one
 * map only. */
void ctl_ckpt_note_size(struct ctl_ckpt *k, json_t *body)
{
    if (!json_is_object(body))
        return;
    int64_t n = 0;
    const char *key;
    json_t *v;
    json_t *sizes[2] = {json_object(), json_object()};
    json_object_foreach(json_object_get(body, "data"), key, v) {
        n += (int64_t)json_string_length(v);
        json_object_set_new(sizes[1], key, json_integer((json_int_t)json_string_length(v)));
    }
    json_object_foreach(json_object_get(body, "binaryData"), key, v) {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v), pad = 0;
        while (s && pad < 2 && pad < len && s[len - 1 - pad] == '=')
            pad++;
        int64_t b = (int64_t)(len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0) - pad);
        n += b;
        json_object_set_new(sizes[0], key, json_integer((json_int_t)b));
    }
    k->size = n;
    k->size_known = true;
    for (size_t i = 0; i < 2; i++) {
        json_decref(k->sizes[i]);
        k->sizes[i] = sizes[i];
    }
}

void ctl_ckpt_drops_done(struct ctl_ckpt *k, const json_t *done)
{
    json_t *requeued = k->requeued;
    k->requeued = NULL;
    const char *key;
    json_t *v;
    size_t gone = 0;
    json_object_foreach((json_t *)done, key, v) {
        json_t *was = json_object_get(k->dropset, key);
        if (!was)
            continue;
        json_int_t settled =
            json_integer_value(v) & ~json_integer_value(json_object_get(requeued, key));
        json_int_t left = json_integer_value(was) & ~settled;
        if (left) {
            json_integer_set(was, left);
        } else {
            json_object_del(k->dropset, key);
            gone++;
        }
    }
    json_decref(requeued);
    if (gone == 0)
        return;
    size_t n = 0;
    for (size_t i = 0; i < k->ndrop; i++) {
        if (json_object_get(k->dropset, k->drop[i]))
            k->drop[n++] = k->drop[i];
        else
            xfree(k->drop[i]);
    }
    k->ndrop = n;
}

/* Remove key from map in the save (nulls: its removals by map), once; the
 * bytes that takes off the ConfigMap. */
static int64_t null_key(const struct ctl_ckpt *k, json_t *const nulls[2], const char *key,
                        int map)
{
    json_t *m = nulls[map == CTL_CKPT_IN_TEXT];
    if (json_object_get(m, key))
        return 0;
    json_object_set_new(m, key, json_null());
    return ctl_ckpt_share(k, key, map);
}

int64_t ctl_ckpt_drops_plan(const struct ctl_ckpt *k, size_t ndrop, const json_t *tracked,
                            const json_t *carried, json_t *const nulls[2], json_t *done)
{
    int64_t gone = 0;
    for (size_t i = 0; i < ndrop; i++) {
        const char *key = k->drop[i];
        int in = (int)json_integer_value(json_object_get(k->dropset, key));
        json_object_set_new(done, key, json_integer(in));
        for (int map = CTL_CKPT_IN_BIN; map <= CTL_CKPT_IN_TEXT; map <<= 1)
            /* in its own map, tracked again meanwhile (saved now, or left out,
             * held, not ready: its state saved before stays): not removed, only
             * taken off the queue; in the other map it is never read */
            if ((in & map) && !(map == ctl_ckpt_home(key) && json_object_get(tracked, key)))
                gone += null_key(k, nulls, key, map);
    }
    /* A copy of a carried key in the other map goes with this save wherever it
     * waits in the queue: the key written beside it would stand in both maps,
     * which the API server refuses (ConfigMap validation: "duplicate of key
     * present in binaryData"), this save and every later one. */
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)carried, key, v) {
        int other = CTL_CKPT_IN_BIN + CTL_CKPT_IN_TEXT - ctl_ckpt_home(key);
        json_t *in = json_object_get(k->dropset, key);
        if (!(json_integer_value(in) & other))
            continue;
        gone += null_key(k, nulls, key, other);
        json_t *d = json_object_get(done, key);
        json_object_set_new(done, key, json_integer(json_integer_value(d) | other));
    }
    return gone;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checkpoint ConfigMaps' keys (checkpoint.c has the ConfigMaps): which
 * ConfigMap holds a Deployment's state, the keys of its entries, and the keys
 * of a ConfigMap read that no tracked Deployment owns, or that stand in the
 * other map than theirs (pruned in the next save), matched against an index
 * of the Deployments built once per read.
 */
#include "controller-int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"
#include "shard/shard.h"

#define KEY_MAX CTL_CKPT_KEY_MAX

size_t ctl_checkpoint_index(const char *ns, const char *name, size_t n)
{
    return n ? (size_t)(shard_hash(ns, name) % n) : 0; /* the shards' hash (shard.h) */
}

/* <what>.<ns>_<name>: '_' is in neither a namespace nor a Deployment name, so
 * the key says whose it is. Past 253 characters the name is cut and the hash
 * of namespace/name appended. */
void ctl_checkpoint_key(const char *what, const char *ns, const char *name, char *out, size_t len)
{
    int n = snprintf(out, len, "%s.%s_%s", what, ns, name);
    if (n >= 0 && (size_t)n <= KEY_MAX)
        return;
    int keep = KEY_MAX - (int)strlen(what) - 1 - (int)strlen(ns) - 1 - 17;
    snprintf(out, len, "%s.%s_%.*s.%016" PRIx64, what, ns, keep > 0 ? keep : 0, name,
             shard_hash(ns, name));
}

/* Whether a key is in the hashed form: exactly KEY_MAX long, ending in
 * .<16 hex digits>. A plain key of a name that itself ends so, exactly that
 * long, reads as hashed too: key_live then matches it as either. */
static bool key_hashed(const char *key)
{
    size_t n = strlen(key);
    if (n != KEY_MAX || key[n - 17] != '.')
        return false;
    for (size_t i = n - 16; i < n; i++)
        if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f')))
            return false;
    return true;
}

static bool lower_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

/* A namespace's name: a DNS-1123 label (lower-case alphanumerics and '-', at
 * most 63, alphanumeric at both ends; no '.'). */
static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 63 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* What ctl_checkpoint_key() writes after <ns>_ for a Deployment: its name, a
 * DNS-1123 subdomain (labels as above joined by '.'), or in the hashed form
 * (hashed) a cut of it, which may end anywhere, then .<16 hex digits>. */
static bool name_part(const char *s, bool hashed)
{
    size_t n = strlen(s);
    if (hashed && n < 18)
        return false;
    if (hashed) /* the cut: a prefix of a subdomain; then the hash */
        n -= 17;
    if (n < 1 || !lower_alnum(s[0]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (lower_alnum(s[i]))
            continue;
        if (s[i] != '-' && s[i] != '.')
            return false;
        /* a label starts and ends alphanumeric */
        if (s[i] == '.' && (!lower_alnum(s[i - 1]) || (i + 1 < n && !lower_alnum(s[i + 1]))))
            return false;
        if (s[i] == '-' && i + 1 < n && s[i + 1] == '.')
            return false;
    }
    return hashed || lower_alnum(s[n - 1]);
}

/* The parts of a key of ours, <what>.<ns>_<rest>: *what (its length in
 * *wlen) and *ns point into key and buf, *rest into buf. false when the key
 * is not one of ours: ns must be a namespace's name and rest what the writer
 * makes of a Deployment's name (a user's key such as forecast.a.b_c or
 * capacity.team_Q3_notes is never touched). */
static bool key_parts(const char *key, char *buf, size_t len, size_t *wlen, const char **ns,
                      const char **rest)
{
    const char *dot = strchr(key, '.');
    if (!dot || snprintf(buf, len, "%s", dot + 1) >= (int)len)
        return false;
    *wlen = (size_t)(dot - key);
    if (!((*wlen == 8 && strncmp(key, "forecast", 8) == 0) ||
          (*wlen == 8 && strncmp(key, "capacity", 8) == 0) ||
          (*wlen == 4 && strncmp(key, "unit", 4) == 0) ||
          (*wlen == 3 && strncmp(key, "uid", 3) == 0)))
        return false;
    char *us = strchr(buf, '_'); /* '_' is in neither a namespace nor a name */
    if (!us || us == buf || !us[1])
        return false;
    *us = '\0';
    *ns = buf;
    *rest = us + 1;
    return dns_label(buf) && name_part(us + 1, key_hashed(key));
}

/* The Deployments of ConfigMap idx, by "p<ns>/<name>" (a plain key's) and
 * by "h<ns>/<16 hex digits of the hash>" (a hashed key's; an array: names
 * may share a hash), each to its place in ds. Built once per read: the keys
 * are then matched in O(1) each (a scan per key made 80,000 keys of a
 * ConfigMap cost billions of comparisons). */
static json_t *live_index(const struct kube_deployment *const *ds, size_t nds, size_t idx,
                          size_t nckpt)
{
    json_t *ix = json_object();
    char k[2 * KEY_MAX + 8];
    for (size_t i = 0; i < nds; i++) {
        if (ctl_checkpoint_index(ds[i]->ns, ds[i]->name, nckpt) != idx)
            continue;
        snprintf(k, sizeof(k), "p%s/%s", ds[i]->ns, ds[i]->name);
        json_object_set_new(ix, k, json_integer((json_int_t)i));
        snprintf(k, sizeof(k), "h%s/%016" PRIx64, ds[i]->ns, shard_hash(ds[i]->ns, ds[i]->name));
        json_t *a = json_object_get(ix, k);
        if (!a) {
            a = json_array();
            json_object_set_new(ix, k, a);
        }
        json_array_append_new(a, json_integer((json_int_t)i));
    }
    return ix;
}

/* Whether the key of ours (parts as key_parts cut them) names a Deployment of
 * ConfigMap idx. A plain key names it; a hashed one (a cut name and the
 * hash) is matched against the names of that hash. */
static bool key_live(const json_t *ix, const struct kube_deployment *const *ds, const char *key,
                     size_t wlen, const char *ns, const char *rest)
{
    char k[2 * KEY_MAX + 8], what[16], want[KEY_MAX + 1];
    if (key_hashed(key)) {
        memcpy(what, key, wlen); /* at most 8: key_parts knows the four */
        what[wlen] = '\0';
        snprintf(k, sizeof(k), "h%s/%s", ns, key + KEY_MAX - 16);
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(ix, k), i, v) {
            const struct kube_deployment *d = ds[json_integer_value(v)];
            ctl_checkpoint_key(what, ns, d->name, want, sizeof(want));
            if (strcmp(want, key) == 0)
                return true;
        }
        /* else maybe a plain key of a name ending in .<hash>, exactly KEY_MAX long */
    }
    snprintf(k, sizeof(k), "p%s/%s", ns, rest);
    return json_object_get(ix, k) != NULL;
}

size_t ctl_checkpoint_stale(const json_t *body, size_t idx, size_t nckpt,
                            const struct kube_deployment *const *ds, size_t nds,
                            bool (*synced)(const void *arg, const char *ns), const void *arg,
                            char ***out, bool **in_data)
{
    static const char *const fields[] = {"binaryData", "data"};
    json_t *ix = NULL;
    size_t n = 0, cap = 0;
    *out = NULL;
    if (in_data)
        *in_data = NULL;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(fields); i++) {
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(body, fields[i]), key, v) {
            char buf[KEY_MAX + 1];
            size_t wlen;
            const char *ns, *rest;
            /* not ours: never removed */
            if (!key_parts(key, buf, sizeof(buf), &wlen, &ns, &rest))
                continue;
            /* a key of ours in the other map than the one it is written to
             * (forecast. and capacity. go to binaryData, unit. and uid. to
             * data) is never read: removed whoever it names */
            bool text_key = wlen <= 4; /* unit, uid */
            bool misplaced = text_key != (i == 1);
            /* else a namespace whose Deployments are not all listed yet (its
             * lists refused, or still running), or whose list+watch has failed
             * since (checkpoint.c's cache_current): its keys cannot be told gone */
            if (!misplaced) {
                if (!synced(arg, ns))
                    continue;
                if (!ix)
                    ix = live_index(ds, nds, idx, nckpt);
                if (key_live(ix, ds, key, wlen, ns, rest))
                    continue;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                *out = xrealloc(*out, cap * sizeof(**out));
                if (in_data)
                    *in_data = xrealloc(*in_data, cap * sizeof(**in_data));
            }
            if (in_data)
                (*in_data)[n] = i == 1;
            (*out)[n++] = xstrdup(key);
        }
    }
    json_decref(ix);
    return n;
}

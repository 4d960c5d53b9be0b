/* SPDX-License-Identifier: Apache-2.0 */
/* kube/map: the string-keyed hash map and the refcounted intern pool the
 * caches are built on.
 *
 * The map stores borrowed keys (each key lives inside its value, e.g. a pod's
 * "ns/name"), uses open addressing with linear probing and tombstones, and
 * grows at 50 % load counting tombstones, so lookups stay O(1) under churn. */
#include "kube-int.h"

#include <string.h>

uint32_t kmap_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h ^ (h >> 15);
}

static size_t find_slot(const struct kmap *m, const char *key, uint32_t h, bool *found)
{
    size_t mask = m->cap - 1, i = h & mask, first_tomb = SIZE_MAX;
    for (;;) {
        const struct kmap_ent *e = &m->ents[i];
        if (!e->key) {
            if (e->tomb) {
                if (first_tomb == SIZE_MAX)
                    first_tomb = i;
            } else {
                *found = false;
                return first_tomb != SIZE_MAX ? first_tomb : i;
            }
        } else if (e->hash == h && strcmp(e->key, key) == 0) {
            *found = true;
            return i;
        }
        i = (i + 1) & mask;
    }
}

static void grow(struct kmap *m)
{
    struct kmap old = *m;
    size_t cap = m->cap ? m->cap : 16;
    while (cap < (m->n + 1) * 4)
        cap *= 2;
    m->ents = xcalloc(cap, sizeof(*m->ents));
    m->cap = cap;
    m->used = m->n;
    for (size_t i = 0; i < old.cap; i++) {
        if (!old.ents[i].key)
            continue;
        bool found;
        size_t j = find_slot(m, old.ents[i].key, old.ents[i].hash, &found);
        m->ents[j] = old.ents[i];
    }
    xfree(old.ents);
}

void *kmap_get(const struct kmap *m, const char *key)
{
    if (m->n == 0)
        return NULL;
    bool found;
    size_t i = find_slot(m, key, kmap_hash(key), &found);
    return found ? m->ents[i].val : NULL;
}

void kmap_put(struct kmap *m, const char *key, void *val)
{
    if ((m->used + 1) * 2 > m->cap)
        grow(m);
    uint32_t h = kmap_hash(key);
    bool found;
    size_t i = find_slot(m, key, h, &found);
    struct kmap_ent *e = &m->ents[i];
    if (!found) {
        m->n++;
        if (!e->tomb)
            m->used++;
    }
    *e = (struct kmap_ent){.key = key, .val = val, .hash = h};
}

void *kmap_del(struct kmap *m, const char *key)
{
    if (m->n == 0)
        return NULL;
    bool found;
    size_t i = find_slot(m, key, kmap_hash(key), &found);
    if (!found)
        return NULL;
    void *v = m->ents[i].val;
    m->ents[i] = (struct kmap_ent){.tomb = true};
    m->n--;
    return v;
}

bool kmap_next(const struct kmap *m, size_t *i, void **val)
{
    for (; *i < m->cap; (*i)++) {
        if (m->ents[*i].key) {
            *val = m->ents[*i].val;
            (*i)++;
            return true;
        }
    }
    return false;
}

void kmap_free(struct kmap *m)
{
    xfree(m->ents);
    *m = (struct kmap){0};
}

/* ---- intern pool -------------------------------------------------------- */

struct istr {
    size_t refs;
    char s[];
};

const char *kintern_get(struct kintern *p, const char *s)
{
    struct istr *e = kmap_get(&p->map, s);
    if (!e) {
        size_t len = strlen(s);
        e = xmalloc(sizeof(*e) + len + 1);
        e->refs = 0;
        memcpy(e->s, s, len + 1);
        kmap_put(&p->map, e->s, e);
    }
    e->refs++;
    return e->s;
}

void kintern_put(struct kintern *p, const char *s)
{
    if (!s)
        return;
    struct istr *e = util_container_of(s, struct istr, s);
    if (--e->refs == 0) {
        kmap_del(&p->map, s);
        xfree(e);
    }
}

size_t kintern_count(const struct kintern *p)
{
    return p->map.n;
}

void kintern_free(struct kintern *p)
{
    void *v;
    for (size_t i = 0; kmap_next(&p->map, &i, &v);)
        xfree(v);
    kmap_free(&p->map);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by prom's unit tests (test-prom.c, test-prom-limits.c):
 * a callback that collects every sample, with its labels as one string,
 * and lookups in what it collected. */
#ifndef GPUSCALER_TEST_PROM_H
#define GPUSCALER_TEST_PROM_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "prom/prom.h"
#include "util/util.h"

/* ---- helpers ----------------------------------------------------------- */

struct rec {
    char *family, *name, *labels; /* labels as a="v",b="w" (raw unescaped values) */
    enum prom_type type;
    enum prom_suffix suffix;
    double value, le, quantile;
    bool has_ts;
    int64_t ts;
    size_t line;
};

struct coll {
    struct rec *v;
    size_t n, cap;
    struct util_buf ser; /* every field of every sample, for exact comparisons */
    int stop_after;      /* >0: return -EINTR on that sample */
    bool ser_only;       /* only fill ser (the every-split test is hot) */
};

static inline int collect(const struct prom_sample *s, void *arg)
{
    struct coll *c = arg;
    assert_int_equal(strlen(s->name), s->name_len);
    assert_int_equal(strlen(s->family), s->family_len);
    struct util_buf lb = {0};
    for (size_t i = 0; i < s->nlabels; i++) {
        assert_int_equal(strlen(s->labels[i].name), s->labels[i].name_len);
        assert_int_equal(s->labels[i].value[s->labels[i].value_len], '\0');
        util_buf_printf(&lb, "%s%s=\"", i ? "," : "", s->labels[i].name);
        util_buf_append(&lb, s->labels[i].value, s->labels[i].value_len);
        util_buf_puts(&lb, "\"");
    }
    if (c->ser_only) {
        c->n++;
        goto serialize;
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->v = xrealloc(c->v, c->cap * sizeof(*c->v));
    }
    c->v[c->n++] = (struct rec){
        .family = xstrdup(s->family),
        .name = xstrdup(s->name),
        .labels = xstrdup(lb.data ? lb.data : ""),
        .type = s->type,
        .suffix = s->suffix,
        .value = s->value,
        .le = s->le,
        .quantile = s->quantile,
        .has_ts = s->has_timestamp,
        .ts = s->timestamp_ms,
        .line = s->line,
    };
serialize:;
    uint64_t bits;
    memcpy(&bits, &s->value, sizeof(bits));
    util_buf_printf(&c->ser, "%zu|%s|%d|%s|%d|%s|%016llx|%d|%lld\n", s->line, s->family,
                    (int)s->type, s->name, (int)s->suffix, lb.data ? lb.data : "",
                    (unsigned long long)bits, s->has_timestamp, (long long)s->timestamp_ms);
    util_buf_free(&lb);
    if (c->stop_after > 0 && (int)c->n == c->stop_after)
        return -EINTR;
    return 0;
}

static inline void coll_free(struct coll *c)
{
    for (size_t i = 0; c->v && i < c->n; i++) {
        xfree(c->v[i].family);
        xfree(c->v[i].name);
        xfree(c->v[i].labels);
    }
    xfree(c->v);
    util_buf_free(&c->ser);
    memset(c, 0, sizeof(*c));
}

/* The sample with this name whose label string contains `labels` (NULL: any). */
static inline const struct rec *find(const struct coll *c, const char *name, const char *labels)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, name) == 0 && (!labels || strstr(c->v[i].labels, labels)))
            return &c->v[i];
    fail_msg("sample %s {%s} not found", name, labels ? labels : "");
    return NULL;
}

static inline size_t count_name(const struct coll *c, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += strcmp(c->v[i].name, name) == 0;
    return n;
}

static inline int parse_str(const char *text, enum prom_format fmt, struct coll *c,
                            struct prom_error *err)
{
    struct prom_parser_opts o = {.format = fmt};
    return prom_parse(text, strlen(text), &o, collect, c, err);
}

#endif

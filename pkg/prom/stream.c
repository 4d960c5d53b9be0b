/* SPDX-License-Identifier: Apache-2.0 */
/* prom: the push-parser object: chunking into lines, the size caps, the
 * want-filter and the public lifecycle API.
 *
 * feed() splits chunks into lines. A line that lies whole inside a chunk is
 * parsed in place; only the unfinished tail of a chunk is copied, into the
 * partial-line buffer (capped at max_line), and completed from the next
 * chunk. A line over max_line is an error, unless its first max_line bytes
 * show an unwanted sample (prom_line_skippable): that one is skipped unread
 * up to its '\n', however long, as Prometheus has no line limit. The total
 * fed is capped at max_total. Errors are recorded once in the parser and are
 * sticky until prom_parser_reset(). The parser owns every buffer; a sample's
 * pointers are valid only during its callback. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "prom/prom-int.h"
#include "prom/prom.h"
#include "util/util.h"

/* Record a stream-level error (caps) for the line being assembled. */
static void stream_fail(struct prom_parser *p, int code, const char *what, size_t cap)
{
    p->err.code = code;
    p->err.line = (size_t)p->lines + 1;
    p->err.column = 0;
    snprintf(p->err.msg, sizeof(p->err.msg), "%s %zu bytes", what, cap);
}

int prom_parser_want(struct prom_parser *p, const char *name, enum prom_match how)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || (how != PROM_MATCH_NAME && how != PROM_MATCH_PREFIX))
        return -EINVAL;
    if (!prom_name_valid(name, n))
        return -EINVAL;
    p->wants = xrealloc(p->wants, (p->nwants + 1) * sizeof(*p->wants));
    p->wants[p->nwants].s = xstrndup(name, n);
    p->wants[p->nwants].len = n;
    p->wants[p->nwants].how = how;
    p->nwants++;
    if (p->fam_len)
        p->fam_wanted = prom_family_wanted(p);
    return 0;
}

/* A line over max_line that prom_line_skippable() let go, now ended: counted
 * as the sample line it was, unread. */
static void skipped_line(struct prom_parser *p)
{
    p->skipping = false;
    p->lines++;
    p->samples++;
}

/* Make the partial-line buffer hold at least n bytes, keeping its content. */
static void grow_pend(struct prom_parser *p, size_t n)
{
    if (n > p->pend_cap) {
        p->pend_cap = n;
        p->pend = xrealloc(p->pend, p->pend_cap);
    }
}

static int set_err(const struct prom_parser *p, struct prom_error *err)
{
    if (err)
        *err = p->err;
    return p->err.code;
}

int prom_parser_feed(struct prom_parser *p, const void *data, size_t len, struct prom_error *err)
{
    if (p->err.code)
        return set_err(p, err);
    if (p->finished) {
        if (err) {
            *err = (struct prom_error){.code = -EINVAL};
            snprintf(err->msg, sizeof(err->msg), "feed after finish");
        }
        return -EINVAL;
    }
    if (len > p->opts.max_total - p->bytes) {
        stream_fail(p, -EFBIG, "exposition larger than", p->opts.max_total);
        return set_err(p, err);
    }
    p->bytes += len;
    const char *s = data, *end = s + len;
    size_t max = p->opts.max_line;
    if (p->skipping) {
        const char *nl = memchr(s, '\n', len);
        if (!nl)
            return 0;
        skipped_line(p);
        s = nl + 1;
    }
    if (p->pend_len > 0 && s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t take = (size_t)((nl ? nl : end) - s);
        if (take > max - p->pend_len) {
            /* over the cap: the line's first max bytes say whether it may be skipped */
            grow_pend(p, max);
            memcpy(p->pend + p->pend_len, s, max - p->pend_len);
            bool skip = prom_line_skippable(p, p->pend, max);
            p->pend_len = 0;
            if (!skip) {
                stream_fail(p, -E2BIG, "line longer than", max);
                return set_err(p, err);
            }
            if (!nl) {
                p->skipping = true;
                return 0;
            }
            skipped_line(p);
        } else {
            if (p->pend_len + take > p->pend_cap) {
                p->pend_cap = UTIL_MAX(p->pend_len + take, p->pend_cap * 2);
                p->pend_cap = UTIL_MIN(p->pend_cap, max);
                p->pend = xrealloc(p->pend, p->pend_cap);
            }
            memcpy(p->pend + p->pend_len, s, take);
            p->pend_len += take;
            if (!nl)
                return 0;
            size_t pl = p->pend_len;
            p->pend_len = 0;
            if (prom_line_parse(p, p->pend, pl) != 0)
                return set_err(p, err);
        }
        s = nl + 1;
    }
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl) {
            size_t rest = (size_t)(end - s);
            if (rest > max) {
                if (!prom_line_skippable(p, s, max)) {
                    stream_fail(p, -E2BIG, "line longer than", max);
                    return set_err(p, err);
                }
                p->skipping = true;
                break;
            }
            if (rest > p->pend_cap) {
                p->pend_cap = UTIL_MIN(UTIL_MAX(rest, (size_t)4096), max);
                xfree(p->pend);
                p->pend = xmalloc(p->pend_cap);
            }
            memcpy(p->pend, s, rest);
            p->pend_len = rest;
            break;
        }
        if ((size_t)(nl - s) > max) {
            if (!prom_line_skippable(p, s, max)) {
                stream_fail(p, -E2BIG, "line longer than", max);
                return set_err(p, err);
            }
            skipped_line(p);
            s = nl + 1;
            continue;
        }
        if (prom_line_parse(p, s, (size_t)(nl - s)) != 0)
            return set_err(p, err);
        s = nl + 1;
    }
    return 0;
}

int prom_parser_finish(struct prom_parser *p, struct prom_error *err)
{
    if (p->err.code)
        return set_err(p, err);
    if (p->finished)
        return 0;
    p->finished = true;
    if (p->skipping) /* a final line without '\n' */
        skipped_line(p);
    if (p->pend_len > 0) {
        size_t pl = p->pend_len;
        p->pend_len = 0;
        if (prom_line_parse(p, p->pend, pl) != 0)
            return set_err(p, err);
    }
    if (p->opts.format == PROM_FMT_OPENMETRICS && !p->saw_eof) {
        p->err = (struct prom_error){.code = -EINVAL, .line = (size_t)p->lines + 1};
        snprintf(p->err.msg, sizeof(p->err.msg), "missing # EOF at end of OpenMetrics exposition");
        return set_err(p, err);
    }
    return 0;
}

/* ---- lifecycle -------------------------------------------------------- */

struct prom_parser *prom_parser_new(const struct prom_parser_opts *opts, prom_sample_cb cb,
                                    void *arg)
{
    struct prom_parser *p = xcalloc(1, sizeof(*p));
    if (opts)
        p->opts = *opts;
    if (p->opts.max_line == 0)
        p->opts.max_line = PROM_DEFAULT_MAX_LINE;
    if (p->opts.max_total == 0)
        p->opts.max_total = PROM_DEFAULT_MAX_TOTAL;
    p->cb = cb;
    p->arg = arg;
    p->labels_cap = 16;
    p->labels = xmalloc(p->labels_cap * sizeof(*p->labels));
    return p;
}

void prom_parser_reset(struct prom_parser *p)
{
    p->pend_len = 0;
    p->fam_len = 0;
    p->fam_type = PROM_UNTYPED;
    p->fam_wanted = false;
    p->bytes = p->lines = p->samples = p->emitted = 0;
    p->saw_eof = p->finished = p->skipping = false;
    memset(&p->err, 0, sizeof(p->err));
}

void prom_parser_free(struct prom_parser *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nwants; i++)
        xfree(p->wants[i].s);
    xfree(p->wants);
    xfree(p->pend);
    xfree(p->fam);
    xfree(p->scratch);
    xfree(p->labels);
    xfree(p);
}

void prom_parser_stats(const struct prom_parser *p, struct prom_stats *out)
{
    out->bytes = p->bytes;
    out->lines = p->lines;
    out->samples = p->samples;
    out->emitted = p->emitted;
}

int prom_parse(const void *buf, size_t len, const struct prom_parser_opts *opts, prom_sample_cb cb,
               void *arg, struct prom_error *err)
{
    struct prom_parser *p = prom_parser_new(opts, cb, arg);
    int rc = prom_parser_feed(p, buf, len, err);
    if (rc == 0)
        rc = prom_parser_finish(p, err);
    prom_parser_free(p);
    return rc;
}

const char *prom_sample_label(const struct prom_sample *s, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < s->nlabels; i++)
        if (s->labels[i].name_len == n && memcmp(s->labels[i].name, name, n) == 0)
            return s->labels[i].value;
    return NULL;
}

enum prom_format prom_format_from_content_type(const char *ct)
{
    static const char om[] = "application/openmetrics-text";
    if (ct && strncasecmp(ct, om, sizeof(om) - 1) == 0)
        return PROM_FMT_OPENMETRICS;
    return PROM_FMT_TEXT;
}

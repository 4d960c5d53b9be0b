/* SPDX-License-Identifier: Apache-2.0 */
/* prom: the push-parser object: chunking into lines, the size caps, the
 * want-filter and the public lifecycle API.
 *
 * feed() splits chunks into lines. A line that lies whole inside a chunk is
 * parsed in place; only the unfinished tail of a chunk is copied, into the
 * partial-line buffer (capped at max_line), and completed from the next
 * chunk. A text-format line that ends inside a sample's quoted label value
 * goes on past its '\n' (Prometheus' lexer takes a raw line break there as
 * part of the value): it is assembled in the same buffer, where the small
 * lexer of skipped lines (skip_lex) follows it to the '\n' that ends it, and
 * is parsed once, whole (not again at each '\n' of the value).
 * A line over max_line is an error, unless its first max_line bytes
 * show an unwanted sample (prom_line_skippable): that one is skipped unread
 * up to the '\n' that ends it, however long, as Prometheus has no line
 * limit (in the text format a '\n' inside a quoted label value does not end
 * it: a small lexer follows the label set while skipping); so are a
 * comment and the rest of a # HELP past max_line (prom_line_over_cap). The total
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
    /* a classic name, or any UTF-8 one (a Prometheus 3 quoted name) */
    if (!prom_name_valid(name, n) && !prom_utf8_valid((const unsigned char *)name, n))
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
    p->samples += !p->skip_comment;
}

/* Where a skipped text-format sample line stands: in its name, in blanks
 * after it, in its label set, in a quoted value (just after a backslash
 * there), or past the set (or where no set can begin any more). As
 * in prom_line_parse(), a backslash takes the next byte with it, and a raw
 * '\n' in a quoted value is part of the value. */
enum skip_lex { SKIP_NAME, SKIP_BLANK, SKIP_LABELS, SKIP_QUOTE, SKIP_ESCAPE, SKIP_REST };

/* Follow s[0..n) of a skipped line: the '\n' that ends it (NULL: not in
 * s[0..n)), the '\n's inside its label values counted in *joined. The
 * OpenMetrics format has none (a raw '\n' in a value is an error there, and
 * the line ends at it). */
static const char *skip_lex(struct prom_parser *p, const char *s, size_t n, uint64_t *joined)
{
    if (p->opts.format == PROM_FMT_OPENMETRICS)
        return memchr(s, '\n', n);
    unsigned char st = p->skip_lex;
    const char *e = s + n;
    for (; s < e && st != SKIP_REST; s++) {
        char c = *s;
        bool blank = c == ' ' || c == '\t';
        if (st == SKIP_ESCAPE || (st == SKIP_QUOTE && c != '"' && c != '\\')) {
            *joined += c == '\n';
            st = SKIP_QUOTE;
        } else if (c == '\n') {
            break;
        } else if (st == SKIP_QUOTE) {
            st = c == '"' ? SKIP_LABELS : SKIP_ESCAPE;
        } else if (st == SKIP_LABELS) {
            st = c == '"' ? SKIP_QUOTE : c == '}' ? SKIP_REST : SKIP_LABELS;
        } else if (c == '{') {
            st = SKIP_LABELS;
        } else if (blank) {
            st = SKIP_BLANK;
        } else if (st == SKIP_BLANK || !prom_name_char(c)) {
            st = SKIP_REST; /* the value: no label set follows */
        }
    }
    p->skip_lex = st;
    if (s < e && st == SKIP_REST)
        return memchr(s, '\n', (size_t)(e - s));
    return s < e ? s : NULL;
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

/* Parse a complete line. In the text format, a line that ends inside a
 * quoted label value is no error yet: Prometheus' lexer takes a raw '\n'
 * there as part of the value (its label value rule is "(\\.|[^\\"])*"), so
 * the caller joins what follows up to the line's end and parses it whole.
 * Returns 1 for that, with the counters as they were; OpenMetrics forbids
 * the raw '\n'. */
static int parse_line(struct prom_parser *p, const char *s, size_t n)
{
    uint64_t lines = p->lines, samples = p->samples;
    p->open_quote = false;
    int rc = prom_line_parse(p, s, n);
    if (rc != 0 && p->open_quote && p->opts.format != PROM_FMT_OPENMETRICS) {
        p->err = (struct prom_error){0};
        p->lines = lines;
        p->samples = samples;
        return 1;
    }
    return rc;
}

/* The line being assembled is over the cap; head holds its first max bytes,
 * which the caller skips. As Prometheus has no line limit, an unwanted
 * sample's line is skipped unread (p->skipping: the rest of it up to the
 * '\n' that ends it), anything else is an error. newlines counts the '\n's
 * of a label value it spans before the line the cap falls in, which count
 * as lines. */
static int over_cap(struct prom_parser *p, const char *head, uint64_t newlines)
{
    size_t max = p->opts.max_line;
    p->skip_line = p->lines + 1;
    p->lines += newlines;
    int how = prom_line_over_cap(p, head, max);
    p->pend_len = 0;
    p->pend_joined = 0;
    if (how < 0)
        return how; /* a malformed # HELP, p->err set */
    if (how == PROM_OVER_FAIL) {
        stream_fail(p, -E2BIG, "line longer than", max);
        return p->err.code;
    }
    p->skipping = true;
    p->skip_comment = how == PROM_OVER_COMMENT;
    if (p->skip_comment) { /* no label values: the next '\n' ends it */
        p->skip_lex = SKIP_REST;
        return 0;
    }
    p->skip_lex = SKIP_NAME;
    size_t lead = 0; /* blanks before the name, which prom_line_skippable() found */
    while (head[lead] == ' ' || head[lead] == '\t')
        lead++;
    uint64_t counted = 0; /* the head's '\n's are in newlines */
    skip_lex(p, head + lead, max - lead, &counted);
    return 0;
}

/* Append s[0..n) to the line being assembled (it fits the cap). */
static void pend_append(struct prom_parser *p, const char *s, size_t n)
{
    if (p->pend_len + n > p->pend_cap) {
        p->pend_cap = UTIL_MAX(p->pend_len + n, p->pend_cap * 2);
        p->pend_cap = UTIL_MIN(p->pend_cap, p->opts.max_line);
        p->pend = xrealloc(p->pend, p->pend_cap);
    }
    memcpy(p->pend + p->pend_len, s, n);
    p->pend_len += n;
}

/* Keep s[0..n) as the start of a line the next chunk completes. */
static void carry(struct prom_parser *p, const char *s, size_t n)
{
    p->pend_len = 0;
    pend_append(p, s, n);
}

/* Parse line[0..ll) (in place, or p->pend, which the caller emptied), whose
 * '\n' has been read. A line that ends inside a quoted label value (text
 * format) goes on past the '\n': it is kept in p->pend with it, and
 * skip_lex follows the rest (p->joining) to the '\n' that ends it, outside
 * any quote, where the whole line is parsed once; parsing it again at each
 * '\n' of the value made a value of n line breaks cost n^2/2 bytes (1.3 s of
 * CPU for 65,000). 0, or the error code with p->err set. */
static int end_line(struct prom_parser *p, const char *line, size_t ll)
{
    int rc = parse_line(p, line, ll);
    if (rc == 1) {
        /* the label value goes on past the '\n', which is part of the line */
        if (ll == p->opts.max_line) {
            if (over_cap(p, line, p->pend_joined + 1) < 0)
                return p->err.code;
            uint64_t counted = 0; /* the '\n' after the head, counted above */
            skip_lex(p, "\n", 1, &counted);
            return 0;
        }
        if (line != p->pend)
            carry(p, line, ll);
        else
            p->pend_len = ll;
        pend_append(p, "\n", 1);
        p->pend_joined++;
        /* in the value, past the '\n' (a backslash the line ended in, or
         * before the '\r' parse_line left out, took the next byte with it) */
        p->joining = true;
        p->skip_lex = SKIP_QUOTE;
        return 0;
    }
    if (rc != 0)
        return rc;
    p->lines += p->pend_joined;
    p->pend_joined = 0;
    return 0;
}

/* The rest of a line being joined (p->joining), from *sp: appended to
 * p->pend up to the '\n' that ends it, then parsed (end_line); past the
 * cap, its head goes to over_cap. *sp ends past what was used. 0, or the
 * error code with p->err set. */
static int join_rest(struct prom_parser *p, const char **sp, const char *end)
{
    const char *s = *sp;
    size_t room = p->opts.max_line - p->pend_len;
    size_t n = UTIL_MIN((size_t)(end - s), room);
    uint64_t joined = 0;
    const char *eol = skip_lex(p, s, n, &joined);
    if (!eol && n < (size_t)(end - s)) { /* the byte past the cap: the line's end? */
        uint64_t past = 0;
        eol = skip_lex(p, s + n, 1, &past);
    }
    const char *stop = eol ? eol : s + n;
    pend_append(p, s, (size_t)(stop - s));
    p->pend_joined += joined;
    if (!eol) {
        *sp = stop;
        if (stop == end)
            return 0; /* the next chunk goes on with it */
        p->joining = false;
        /* over the cap: p->pend is its head, skipped from past it */
        return over_cap(p, p->pend, p->pend_joined) < 0 ? p->err.code : 0;
    }
    *sp = eol + 1;
    p->joining = false;
    size_t ll = p->pend_len;
    p->pend_len = 0;
    return end_line(p, p->pend, ll);
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
    while (s < end) {
        if (p->skipping) { /* the rest of a line over the cap */
            uint64_t joined = 0;
            const char *eol = skip_lex(p, s, (size_t)(end - s), &joined);
            p->lines += joined;
            if (!eol)
                return 0;
            skipped_line(p);
            s = eol + 1;
            continue;
        }
        if (p->joining) { /* a line going on past a '\n' in a label value */
            if (join_rest(p, &s, end) < 0)
                return set_err(p, err);
            continue;
        }
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t take = (size_t)((nl ? nl : end) - s);
        const char *line = s;
        size_t ll = take;
        if (p->pend_len > 0) { /* completing a line begun in an earlier chunk */
            if (take > max - p->pend_len) {
                size_t part = max - p->pend_len;
                grow_pend(p, max);
                memcpy(p->pend + p->pend_len, s, part);
                if (over_cap(p, p->pend, p->pend_joined) < 0)
                    return set_err(p, err);
                s += part; /* skipping from past the head */
                continue;
            }
            pend_append(p, s, take);
            if (!nl)
                return 0;
            line = p->pend;
            ll = p->pend_len;
            p->pend_len = 0;
        } else if (take > max) {
            if (over_cap(p, s, 0) < 0)
                return set_err(p, err);
            s += max; /* skipping from past the head */
            continue;
        } else if (!nl) { /* the start of a line the next chunk completes */
            carry(p, s, take);
            return 0;
        }
        if (end_line(p, line, ll) < 0)
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
    p->joining = false;
    if (p->skipping && (p->skip_lex == SKIP_QUOTE || p->skip_lex == SKIP_ESCAPE)) {
        /* the body ends inside a label value of the line skipped: it is
         * unterminated, as when the line is read whole (the lines after its
         * opening quote were taken into the value, unseen) */
        p->err = (struct prom_error){.code = -EINVAL, .line = (size_t)p->skip_line};
        snprintf(p->err.msg, sizeof(p->err.msg), "unterminated label value");
        return set_err(p, err);
    }
    if (p->skipping) /* a final line without '\n' */
        skipped_line(p);
    if (p->pend_len > 0) {
        size_t pl = p->pend_len;
        p->pend_len = 0;
        /* a label value still open here is unterminated after all */
        if (prom_line_parse(p, p->pend, pl) != 0)
            return set_err(p, err);
        p->lines += p->pend_joined;
        p->pend_joined = 0;
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
    if (p->opts.max_labels == 0)
        p->opts.max_labels = PROM_DEFAULT_MAX_LABELS;
    p->cb = cb;
    p->arg = arg;
    p->labels_cap = 16;
    p->labels = xmalloc(p->labels_cap * sizeof(*p->labels));
    return p;
}

void prom_parser_reset(struct prom_parser *p)
{
    p->pend_len = 0;
    p->pend_joined = 0;
    p->fam_len = 0;
    p->fam_type = PROM_UNTYPED;
    p->fam_wanted = false;
    p->fam_legacy = false;
    p->bytes = p->lines = p->samples = p->emitted = p->parsed = 0;
    p->saw_eof = p->finished = p->skipping = p->skip_comment = p->joining = false;
    p->skip_lex = SKIP_NAME;
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

/* SPDX-License-Identifier: Apache-2.0 */
/* scrape/selector: a metric annotation's value, a metric name with optional
 * label matchers in PromQL's syntax (`nv_inference_request_success{model=
 * "ensemble"}`), parsed strictly and matched against a sample's labels as
 * PromQL matches them (a missing label reads as ""). Regex matchers (`=~`,
 * `!~`) are checked here and compiled by regex.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "scrape-int.h"

static int bad(char *err, size_t errlen, const char *text, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad(char *err, size_t errlen, const char *text, const char *fmt, ...)
{
    if (errlen) {
        char why[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        snprintf(err, errlen, "'%.60s' is not a metric name with label matchers: %s", text,
                 why);
    }
    return -EINVAL;
}

static bool name_start(char c, bool colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

static bool name_char(char c, bool colon)
{
    return name_start(c, colon) || (c >= '0' && c <= '9');
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* A quoted string (either quote) with PromQL's escapes into out; returns the
 * character after the closing quote, or NULL. */
static const char *quoted(const char *p, char *out, size_t cap, const char **why)
{
    char q = *p++;
    size_t n = 0;
    for (;; p++) {
        char c = *p;
        if (!c) {
            *why = "a label value has no closing quote";
            return NULL;
        }
        if (c == q)
            break;
        if ((unsigned char)c < 0x20) {
            *why = "a label value holds a control character";
            return NULL;
        }
        if (c == '\\') {
            c = *++p;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c != '\\' && c != '"' && c != '\'') {
                *why = "a label value has an escape other than \\\\, \\\", \\', \\n or \\t";
                return NULL;
            }
        }
        if (n + 1 >= cap) {
            *why = "a label value is too long";
            return NULL;
        }
        out[n++] = c;
    }
    out[n] = '\0';
    return p + 1;
}

int scrape_selector_parse_syntax(const char *text, struct scrape_selector *out, char *err,
                                 size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (errlen)
        err[0] = '\0';
    if (strlen(text) >= SCRAPE_METRIC_MAX)
        return bad(err, errlen, text, "longer than %d characters", SCRAPE_METRIC_MAX - 1);
    const char *p = text;
    size_t n = 0;
    if (*p != '{') {
        if (!name_start(*p, true))
            return bad(err, errlen, text, "a metric name starts with a letter, '_' or ':'");
        while (name_char(*p, true))
            out->name[n++] = *p++;
        out->name[n] = '\0';
        if (!*p)
            return 0;
        if (*p != '{' && *p >= ' ' && *p <= '~')
            return bad(err, errlen, text, "'%c' after the name (a-z, A-Z, 0-9, '_', ':')", *p);
        if (*p != '{')
            return bad(err, errlen, text, "byte 0x%02x after the name (a-z, A-Z, 0-9, '_', ':')",
                       (unsigned char)*p);
    }
    p = skip_ws(p + 1);
    while (*p != '}') {
        if (!*p)
            return bad(err, errlen, text, "no closing '}'");
        const char *why = "";
        char qs[SCRAPE_METRIC_MAX];
        const char *q = NULL;
        if (*p == '"' || *p == '\'') { /* Prometheus 3: a quoted name */
            q = quoted(p, qs, sizeof(qs), &why);
            if (!q)
                return bad(err, errlen, text, "%s", why);
            if (strstr(qs, "{{") || strstr(qs, "}}")) /* written into the default PromQL */
                return bad(err, errlen, text,
                           "a quoted name holds {{ or }}, the PromQL templates' placeholders");
            const char *t = skip_ws(q);
            if (*t == ',' || *t == '}') { /* alone: the metric name, {"http.requests"} */
                if (out->name[0])
                    return bad(err, errlen, text, "the metric name is given twice");
                if (!qs[0])
                    return bad(err, errlen, text, "the quoted metric name is empty");
                snprintf(out->name, SCRAPE_METRIC_MAX, "%s", qs);
                p = *t == ',' ? skip_ws(t + 1) : t;
                continue;
            }
        }
        if (out->n == SCRAPE_MAX_MATCHERS)
            return bad(err, errlen, text, "more than %d matchers", SCRAPE_MAX_MATCHERS);
        struct scrape_matcher *m = &out->m[out->n];
        if (q) { /* a quoted label name, {"http.requests", "my.label"="x"} */
            if (!qs[0] || strlen(qs) >= sizeof(m->label))
                return bad(err, errlen, text, "a quoted label name is empty or too long");
            snprintf(m->label, sizeof(m->label), "%s", qs);
            p = q;
        } else {
            if (!name_start(*p, false))
                return bad(err, errlen, text, "a label name starts with a letter or '_'");
            n = 0;
            while (name_char(*p, false)) {
                if (n + 1 >= sizeof(m->label))
                    return bad(err, errlen, text, "a label name is too long");
                m->label[n++] = *p++;
            }
            m->label[n] = '\0';
        }
        if (strcmp(m->label, "le") == 0 || strcmp(m->label, "__name__") == 0)
            return bad(err, errlen, text, "'%s' cannot be matched (%s)", m->label,
                       m->label[0] == 'l' ? "the histogram's bucket bound"
                                          : "the name goes before the braces");
        p = skip_ws(p);
        if ((p[0] == '=' || p[0] == '!') && p[1] == '~') {
            m->regex = true;
            m->negate = p[0] == '!';
            p += 2;
        } else if (p[0] == '!' && p[1] == '=') {
            m->negate = true;
            p += 2;
        } else if (p[0] == '=') {
            p++;
        } else {
            return bad(err, errlen, text, "a matcher's operator is =, !=, =~ or !~");
        }
        p = skip_ws(p);
        if (*p != '"' && *p != '\'')
            return bad(err, errlen, text, "a label value is quoted");
        p = quoted(p, m->value, sizeof(m->value), &why);
        if (!p)
            return bad(err, errlen, text, "%s", why);
        if (strstr(m->value, "{{") || strstr(m->value, "}}"))
            return bad(err, errlen, text,
                       "a label value holds {{ or }}, the PromQL templates' placeholders");
        out->n++;
        p = skip_ws(p);
        if (*p == ',')
            p = skip_ws(p + 1);
        else if (*p && *p != '}')
            return bad(err, errlen, text, "matchers are separated by ','");
    }
    if (p[1])
        return bad(err, errlen, text, "text after the closing '}'");
    if (!out->name[0])
        return bad(err, errlen, text,
                   "a metric name starts with a letter, '_' or ':', or is quoted inside the "
                   "braces ({\"name\"})");
    return 0;
}

int scrape_selector_parse(const char *text, struct scrape_selector *out, char *err,
                          size_t errlen)
{
    int rc = scrape_selector_parse_syntax(text, out, err, errlen);
    for (size_t i = 0; rc == 0 && i < out->n; i++) {
        char why[120];
        if (out->m[i].regex && scrape_regex_check(out->m[i].value, why, sizeof(why)) != 0) {
            memset(out, 0, sizeof(*out));
            rc = bad(err, errlen, text, "%s", why);
        }
    }
    return rc;
}

bool scrape_selector_match(const struct scrape_selector *s, const struct prom_sample *ps)
{
    for (size_t i = 0; i < s->n; i++) {
        const char *v = prom_sample_label(ps, s->m[i].label);
        bool eq = s->m[i].regex ? scrape_regex_match(s, i, v ? v : "")
                                : strcmp(v ? v : "", s->m[i].value) == 0;
        if (eq == s->m[i].negate)
            return false;
    }
    return true;
}

size_t scrape_metric_name_len(const char *text)
{
    return strcspn(text, "{");
}

void scrape_metric_name(const char *text, char *out, size_t outlen)
{
    struct scrape_selector sel;
    if (scrape_selector_parse_syntax(text, &sel, NULL, 0) == 0)
        snprintf(out, outlen, "%s", sel.name);
    else
        snprintf(out, outlen, "%.*s", (int)scrape_metric_name_len(text), text);
}

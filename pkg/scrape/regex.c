/* SPDX-License-Identifier: Apache-2.0 */
/* scrape/regex: a label matcher's RE2 pattern (`model_name=~"llama.*"`)
 * turned into a POSIX extended regular expression that libc matches as
 * Prometheus matches the RE2 one: anchored at both ends, `.` matching any
 * character (newline too, as Prometheus' (?s:...) wrapping makes it), a
 * character a UTF-8 sequence rather than a byte. What the two dialects would
 * read differently is refused with a reason: non-ASCII in the pattern, Perl
 * classes other than \d \s \w (and their negations), assertions (\b, \A, \z),
 * flags other than a leading (?i) or (?s), lookarounds, backreferences, and
 * anchors inside the pattern (glibc reads them as line anchors). The byte
 * ranges below assume the C locale, which the daemon never changes. The
 * compiled forms are owned by the selector (scrape_selector_compile);
 * e2e/test_regex.py checks the answers against Go's regexp. */
#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scrape-int.h"
#include "util/util.h"

/* The last answers of one matcher: a label takes a few values again and
 * again (finish reasons, model names), and regexec costs microseconds. */
#define SEEN 4
#define SEEN_MAX 64 /* longer values are not remembered */
struct seen {
    char value[SEEN][SEEN_MAX];
    bool match[SEEN];
    unsigned n, next;
};

/* The matchers' compiled patterns, one slot per matcher of the selector. */
struct scrape_selector_re {
    regex_t re[SCRAPE_MAX_MATCHERS];
    bool used[SCRAPE_MAX_MATCHERS];
    struct seen seen[SCRAPE_MAX_MATCHERS];
};

/* One character of the pattern, whatever its bytes: a lead byte (or ASCII)
 * and its continuation bytes. */
#define RUNE "[^\x80-\xbf][\x80-\xbf]*"
/* A multi-byte character: a lead byte and its continuation bytes (what a
 * negated class matches besides the ASCII characters it leaves out). Values
 * are valid UTF-8, as Prometheus requires of label values. */
#define NOT_ASCII_RUNE "[\xc0-\xff][\x80-\xbf]*"

static int refuse(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(char *why, size_t whylen, const char *fmt, ...)
{
    if (whylen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* A set of ASCII characters (a bracket expression or a Perl class). */
struct set {
    bool has[128];
};

static void set_range(struct set *s, int lo, int hi)
{
    for (int c = lo; c <= hi; c++)
        s->has[c] = true;
}

/* \d \s \w into s (their negations are refused inside brackets); false when
 * c is not one of them. */
static bool perl_class(char c, struct set *s)
{
    switch (c) {
    case 'd':
        set_range(s, '0', '9');
        return true;
    case 's':
        s->has['\t'] = s->has['\n'] = s->has['\f'] = s->has['\r'] = s->has[' '] = true;
        return true;
    case 'w':
        set_range(s, '0', '9');
        set_range(s, 'A', 'Z');
        set_range(s, 'a', 'z');
        s->has['_'] = true;
        return true;
    default:
        return false;
    }
}

/* The character an escape \c stands for outside classes: a literal
 * punctuation mark or a control escape; -1 otherwise. */
static int escaped_char(char c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case 'r':
        return '\r';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    case 'a':
        return '\a';
    default:
        return ispunct((unsigned char)c) ? c : -1;
    }
}

/* POSIX [:name:] classes RE2 shares (RE2's ascii and word are not POSIX). */
static bool posix_class(const char *name, size_t len, struct set *s)
{
    static const struct {
        const char *name;
        int (*is)(int);
    } classes[] = {
        {"alnum", isalnum}, {"alpha", isalpha}, {"blank", isblank}, {"cntrl", iscntrl},
        {"digit", isdigit}, {"graph", isgraph}, {"lower", islower}, {"print", isprint},
        {"punct", ispunct}, {"space", isspace}, {"upper", isupper}, {"xdigit", isxdigit},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(classes); i++) {
        if (strlen(classes[i].name) == len && memcmp(classes[i].name, name, len) == 0) {
            for (int c = 1; c < 128; c++)
                if (classes[i].is(c))
                    s->has[c] = true;
            return true;
        }
    }
    return false;
}

/* Write the set as a POSIX bracket expression: ']' first, '-' last, '^'
 * not first; a negated set also excludes every byte of a multi-byte
 * character (its range before the '^' and '-'), which the alternative after
 * it matches whole. */
static int emit_set(struct util_buf *o, const struct set *s, bool negate, char *why, size_t whylen)
{
    char members[168];
    size_t n = 0, ascii = 0;
    if (s->has[']'])
        members[n++] = ']';
    for (int c = 1; c < 128; c++)
        if (s->has[c] && c != ']' && c != '-' && c != '^')
            members[n++] = (char)c;
    if (negate) {
        memcpy(members + n, "\x80-\xff", 3);
        n += 3;
    }
    if (s->has['^'])
        members[n++] = '^';
    if (s->has['-'])
        members[n++] = '-';
    members[n] = '\0';
    for (int c = 1; c < 128; c++)
        ascii += s->has[c];
    if (!negate) {
        if (!ascii)
            return refuse(why, whylen, "a class matches nothing");
        if (members[0] == '^') { /* only '^' and maybe '-': [^...] would negate */
            util_buf_puts(o, s->has['-'] ? "[-^]" : "\\^");
            return 0;
        }
        util_buf_puts(o, "[");
        util_buf_puts(o, members);
        util_buf_puts(o, "]");
        return 0;
    }
    if (ascii == 127) { /* every ASCII character: only multi-byte ones are left */
        util_buf_puts(o, "(" NOT_ASCII_RUNE ")");
        return 0;
    }
    util_buf_puts(o, "([^");
    util_buf_puts(o, members);
    util_buf_puts(o, "]|" NOT_ASCII_RUNE ")");
    return 0;
}

/* One member of a bracket expression at *pp: a character (or an escape for
 * one) into *c, or a class added to s (*c = -1). */
static int bracket_member(const char **pp, struct set *s, int *c, char *why, size_t whylen)
{
    const char *p = *pp;
    if (p[0] == '[' && p[1] == ':') {
        const char *end = strstr(p + 2, ":]");
        if (!end)
            return refuse(why, whylen, "a [: class has no closing :]");
        if (!posix_class(p + 2, (size_t)(end - p - 2), s))
            return refuse(why, whylen, "[:%.*s:] is not a POSIX class", (int)(end - p - 2),
                          p + 2);
        *pp = end + 2;
        *c = -1;
        return 0;
    }
    if (p[0] == '[' && (p[1] == '.' || p[1] == '='))
        return refuse(why, whylen, "[%c is not supported", p[1]);
    if (p[0] == '\\') {
        if (!p[1])
            return refuse(why, whylen, "a trailing \\");
        if (perl_class(p[1], s)) {
            *pp = p + 2;
            *c = -1;
            return 0;
        }
        int e = escaped_char(p[1]);
        if (e < 0)
            return refuse(why, whylen, "\\%c is not supported in a class", p[1]);
        *pp = p + 2;
        *c = e;
        return 0;
    }
    if ((unsigned char)p[0] >= 0x80)
        return refuse(why, whylen, "non-ASCII characters in a regular expression");
    *pp = p + 1;
    *c = (unsigned char)p[0];
    return 0;
}

/* A bracket expression from p (after its '['); returns the character after
 * its ']', or NULL with why set. */
static const char *bracket(const char *p, struct util_buf *o, char *why, size_t whylen)
{
    struct set s = {{0}};
    bool negate = *p == '^';
    if (negate)
        p++;
    bool first = true;
    while (*p != ']' || first) {
        if (!*p) {
            refuse(why, whylen, "a class has no closing ]");
            return NULL;
        }
        int lo;
        if (bracket_member(&p, &s, &lo, why, whylen) != 0)
            return NULL;
        first = false;
        if (lo >= 0 && p[0] == '-' && p[1] && p[1] != ']') {
            p++;
            int hi;
            if (bracket_member(&p, &s, &hi, why, whylen) != 0)
                return NULL;
            if (hi < 0 || hi < lo) {
                refuse(why, whylen, "a bad range in a class");
                return NULL;
            }
            set_range(&s, lo, hi);
        } else if (lo >= 0) {
            s.has[lo] = true;
        }
    }
    return emit_set(o, &s, negate, why, whylen) == 0 ? p + 1 : NULL;
}

/* A literal character, escaped as ERE needs (never with a backslash GNU reads
 * as an operator). */
static void literal(struct util_buf *o, int c)
{
    char ch = (char)c;
    if (c == '^')
        util_buf_puts(o, "\\^");
    else if (c && strchr(".[]{}()*+?|$\\", c))
        util_buf_printf(o, "[%c]", ch);
    else
        util_buf_append(o, &ch, 1);
}

/* {n}, {n,} or {n,m} at p: its length; 0 when p does not start one (RE2
 * reads the '{' literally then); -1 for bounds past 1000 or reversed, which
 * RE2 refuses. */
static long interval(const char *p)
{
    char *end;
    if (!isdigit((unsigned char)p[1]))
        return 0;
    long n = strtol(p + 1, &end, 10), m = n;
    if (*end == ',') {
        if (isdigit((unsigned char)end[1])) {
            m = strtol(end + 1, &end, 10);
        } else {
            m = 1000;
            end++;
        }
    }
    if (*end != '}')
        return 0;
    if (n > 1000 || m > 1000 || m < n)
        return -1;
    return (long)(end + 1 - p);
}

/* The translation into o; scrape_regex_translate's contract otherwise. */
static int translate(const char *re2, struct util_buf *o, int *cflags, char *why, size_t whylen)
{
    *cflags = REG_EXTENDED | REG_NOSUB;
    const char *p = re2;
    while (p[0] == '(' && p[1] == '?' && strspn(p + 2, "is") > 0 &&
           p[2 + strspn(p + 2, "is")] == ')') {
        size_t k = strspn(p + 2, "is");
        if (memchr(p + 2, 'i', k))
            *cflags |= REG_ICASE;
        p += k + 3;
    }
    util_buf_puts(o, "^(");
    bool operand = false; /* a repetition has something to repeat */
    int depth = 0;        /* open groups */
    bool branch_start = true; /* nothing yet in this top-level branch */
    while (*p) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x80)
            return refuse(why, whylen, "non-ASCII characters in a regular expression");
        long iv = c == '{' ? interval(p) : 0;
        if (iv < 0)
            return refuse(why, whylen, "a repetition count past 1000, or reversed");
        if (c == '*' || c == '+' || c == '?' || iv) {
            if (!operand)
                return refuse(why, whylen, "a repetition (%.*s) repeats nothing",
                              (int)(iv ? iv : 1), p);
            util_buf_append(o, p, iv ? (size_t)iv : 1);
            p += iv ? iv : 1;
            if (*p == '?') /* non-greedy: the same strings match in full */
                p++;
            operand = false;
            continue;
        }
        operand = true;
        if (c != '^')
            branch_start = c == '|' && depth == 0;
        switch (c) {
        case '\\': {
            if (!p[1])
                return refuse(why, whylen, "a trailing \\");
            struct set s = {{0}};
            char lower = (char)tolower((unsigned char)p[1]);
            if (perl_class(lower, &s)) {
                if (emit_set(o, &s, p[1] != lower, why, whylen) != 0)
                    return -EINVAL;
            } else {
                int e = escaped_char(p[1]);
                if (e < 0)
                    return refuse(why, whylen, "\\%c is not supported when scraping", p[1]);
                literal(o, e);
            }
            p += 2;
            break;
        }
        case '.':
            util_buf_puts(o, "(" RUNE ")");
            p++;
            break;
        case '[':
            p = bracket(p + 1, o, why, whylen);
            if (!p)
                return -EINVAL;
            break;
        case '(':
            if (p[1] == '?') {
                if (p[2] != ':')
                    return refuse(why, whylen, "(?%c is not supported when scraping (only "
                                  "(?:, and (?i) or (?s) at the start)", p[2] ? p[2] : ' ');
                p += 2;
            }
            util_buf_puts(o, "(");
            p++;
            depth++;
            operand = false;
            break;
        case '|':
            util_buf_puts(o, "|");
            p++;
            operand = false;
            break;
        case ')':
            if (depth-- == 0)
                return refuse(why, whylen, "a ')' without its '('");
            util_buf_puts(o, ")");
            p++;
            break;
        case '^':
        case '$':
            /* The match is anchored at both ends already, so a '^' that opens
             * a top-level branch and a '$' that closes one change nothing and
             * are left out. glibc reads any other as a line anchor (matching
             * at a newline inside the value), where RE2 reads the text's ends:
             * refused. */
            if (depth || (c == '^' ? !branch_start : p[1] && p[1] != '|'))
                return refuse(why, whylen, "'%c' only at the start or end of the pattern (or "
                              "of a top-level branch)", c);
            p++;
            operand = false;
            continue;
        default:
            literal(o, c);
            p++;
            break;
        }
    }
    if (depth)
        return refuse(why, whylen, "a '(' without its ')'");
    util_buf_puts(o, ")$");
    return 0;
}

int scrape_regex_translate(const char *re2, char *ere, size_t cap, int *cflags, char *why,
                           size_t whylen)
{
    struct util_buf b = {0};
    int rc = translate(re2, &b, cflags, why, whylen);
    if (rc == 0 && b.len >= cap)
        rc = refuse(why, whylen, "a regular expression too long to translate");
    if (cap)
        snprintf(ere, cap, "%s", rc == 0 ? b.data : "");
    util_buf_free(&b);
    return rc;
}

/* Compile one matcher's pattern into r; 0, or -EINVAL with why. */
static int compile(const char *re2, regex_t *r, char *why, size_t whylen)
{
    char ere[2048];
    int cflags;
    if (scrape_regex_translate(re2, ere, sizeof(ere), &cflags, why, whylen) != 0)
        return -EINVAL;
    int rc = regcomp(r, ere, cflags);
    if (rc != 0) {
        char msg[100];
        regerror(rc, r, msg, sizeof(msg));
        return refuse(why, whylen, "not a regular expression (%s)", msg);
    }
    return 0;
}

int scrape_regex_check(const char *re2, char *why, size_t whylen)
{
    regex_t r;
    if (compile(re2, &r, why, whylen) != 0)
        return -EINVAL;
    regfree(&r);
    return 0;
}

int scrape_selector_compile(struct scrape_selector *s)
{
    scrape_selector_release(s);
    bool any = false;
    for (size_t i = 0; i < s->n; i++)
        any |= s->m[i].regex;
    if (!any)
        return 0;
    struct scrape_selector_re *re = xcalloc(1, sizeof(*re));
    for (size_t i = 0; i < s->n; i++) {
        if (!s->m[i].regex)
            continue;
        if (compile(s->m[i].value, &re->re[i], NULL, 0) != 0) {
            s->re = re;
            scrape_selector_release(s);
            return -EINVAL;
        }
        re->used[i] = true;
    }
    s->re = re;
    return 0;
}

void scrape_selector_release(struct scrape_selector *s)
{
    if (!s->re)
        return;
    for (size_t i = 0; i < SCRAPE_MAX_MATCHERS; i++)
        if (s->re->used[i])
            regfree(&s->re->re[i]);
    xfree(s->re);
    s->re = NULL;
}

bool scrape_regex_match(const struct scrape_selector *s, size_t i, const char *value)
{
    if (!s->re || !s->re->used[i])
        return false;
    struct seen *seen = &s->re->seen[i];
    size_t len = strlen(value);
    for (unsigned k = 0; k < seen->n; k++)
        if (strcmp(seen->value[k], value) == 0)
            return seen->match[k];
    bool match = regexec(&s->re->re[i], value, 0, NULL, 0) == 0;
    if (len < SEEN_MAX) {
        unsigned k = seen->next;
        memcpy(seen->value[k], value, len + 1);
        seen->match[k] = match;
        seen->next = (k + 1) % SEEN;
        if (seen->n < SEEN)
            seen->n++;
    }
    return match;
}

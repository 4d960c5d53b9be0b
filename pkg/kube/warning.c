/* SPDX-License-Identifier: Apache-2.0 */
/* kube/warning: the API server's Warning response headers (see kube.h).
 * kube-apiserver writes `299 - "text"` for deprecated APIs, unknown or
 * duplicate fields it dropped, and admission warnings (PodSecurity, ...).
 * Parsed as client-go's ParseWarningHeader (apimachinery util/net): code,
 * agent and a quoted text with backslash escapes, an optional quoted date,
 * several warnings comma-separated; a malformed one ends the header's parse.
 * RFC 2047 encoded words are not decoded (kube-apiserver never sends them). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "kube.h"
#include "util/util.h"

/* Valid UTF-8 without control characters (C0, DEL, C1), as client-go's
 * utf8.ValidString and unicode.IsControl. */
static bool clean_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
        if (len == 0 || c > 0xf4 || i + len > n)
            return false;
        uint32_t cp = c & (0x7f >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0x80 && cp <= 0x9f))
            return false;
        i += len;
    }
    return true;
}

static const char *trim(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

int kube_warning_parse(const char *value, kube_warning_cb cb, void *arg)
{
    int n = 0;
    const char *p = trim(value);
    char *text = xmalloc(strlen(p) + 1); /* the unescaped text is never longer */
    while (*p) {
        /* warn-code: 3 digits, then one space */
        if (!(p[0] >= '0' && p[0] <= '9' && p[1] >= '0' && p[1] <= '9' && p[2] >= '0' &&
              p[2] <= '9' && p[3] == ' '))
            goto bad;
        int code = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
        /* warn-agent: up to the next space, not empty */
        const char *agent = p + 4, *sp = strchr(agent, ' ');
        if (!sp || sp == agent || !clean_utf8((const unsigned char *)agent, (size_t)(sp - agent)))
            goto bad;
        /* warn-text: quoted, backslash escapes */
        const char *q = sp + 1;
        if (*q != '"')
            goto bad;
        size_t t = 0;
        bool escaping = false, closed = false;
        for (q++; *q; q++) {
            if (*q == '"' && !escaping) {
                closed = true;
                q++;
                break;
            }
            if (*q == '\\' && !escaping) {
                escaping = true;
                continue;
            }
            escaping = false;
            text[t++] = *q;
        }
        if (!closed || !clean_utf8((const unsigned char *)text, t))
            goto bad;
        if (t >= KUBE_WARNING_MAX) { /* cut, on a character boundary */
            t = KUBE_WARNING_MAX - 1;
            while (t > 0 && ((unsigned char)text[t] & 0xc0) == 0x80)
                t--;
        }
        text[t] = '\0';
        /* an optional quoted warn-date, then a comma or the end */
        p = trim(q);
        if (*p == '"') {
            const char *end = strchr(p + 1, '"');
            if (!end)
                goto bad;
            p = trim(end + 1);
        }
        if (*p && *p != ',')
            goto bad;
        if (*p == ',')
            p = trim(p + 1);
        cb(arg, code, text);
        n++;
    }
    xfree(text);
    return n;
bad:
    xfree(text);
    return n ? n : -EBADMSG;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* regex-match: test tool that answers, for label-matcher patterns, what the
 * scraper does with each (scrape/regex.c), so a test can compare it with Go's
 * regexp, which Prometheus matches with.
 *
 *   regex-match < cases > answers
 *
 * stdin: lines "HEXPATTERN HEXVALUE" (the bytes in hex, either may be
 * empty); stdout: a line per case, "refused" when the pattern is refused, else
 * "1" or "0" for whether the value matches in full (as `label=~"pattern"`).
 * Exit 2 on a line it cannot read. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scrape/scrape-int.h"

/* The bytes of hex[0..n) into out (n / 2 + 1 bytes); -1 on a bad digit. */
static int unhex(const char *hex, size_t n, char *out)
{
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (char)v;
    }
    out[n / 2] = '\0';
    return 0;
}

int main(void)
{
    static char line[1 << 16], pat[1 << 15], val[1 << 15];
    while (fgets(line, sizeof(line), stdin)) {
        char *sp = strchr(line, ' ');
        char *end = strchr(line, '\n');
        if (!sp || !end || end < sp || unhex(line, (size_t)(sp - line), pat) != 0 ||
            unhex(sp + 1, (size_t)(end - sp - 1), val) != 0) {
            fprintf(stderr, "regex-match: bad line: %.60s\n", line);
            return 2;
        }
        struct scrape_selector s = {.n = 1};
        size_t plen = strlen(pat);
        if (plen >= sizeof(s.m[0].value)) { /* longer than an annotation holds */
            puts("refused");
            continue;
        }
        memcpy(s.m[0].value, pat, plen + 1);
        s.m[0].regex = true;
        if (scrape_regex_check(pat, NULL, 0) != 0 || scrape_selector_compile(&s) != 0) {
            puts("refused");
            continue;
        }
        puts(scrape_regex_match(&s, 0, val) ? "1" : "0");
        scrape_selector_release(&s);
    }
    return 0;
}

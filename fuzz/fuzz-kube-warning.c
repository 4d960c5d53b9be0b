/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for kube_warning_parse: the API server's Warning header
 * values. Any input must give -EBADMSG or the number of warnings handed to
 * the callback; each has a code of three digits and a text under
 * KUBE_WARNING_MAX bytes of UTF-8 without control characters. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-kube-warning: invariant violated: %s\n", what);
        abort();
    }
}

static void on_warning(void *arg, int code, const char *text)
{
    ++*(int *)arg;
    check(code >= 0 && code <= 999, "a three-digit code");
    size_t n = strlen(text);
    check(n < KUBE_WARNING_MAX, "text within the cap");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        check(c >= 0x20 && c != 0x7f, "no control characters");
    }
    /* the text ends on a character boundary: its last lead byte's sequence is whole */
    size_t k = n;
    while (k > 0 && ((unsigned char)text[k - 1] & 0xc0) == 0x80)
        k--;
    if (k > 0 && (unsigned char)text[k - 1] >= 0xc0) {
        unsigned char lead = (unsigned char)text[k - 1];
        size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
        check(n - (k - 1) == want, "the last character is whole");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 70000)
        return 0;
    char *v = xstrndup((const char *)data, size);
    int calls = 0;
    int n = kube_warning_parse(v, on_warning, &calls);
    check(n == -EBADMSG || n >= 0, "a count or -EBADMSG");
    check(n == (n < 0 ? 0 : calls) || (n < 0 && calls == 0), "the count is the callbacks'");
    xfree(v);
    return 0;
}

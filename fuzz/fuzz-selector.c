/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz-selector: label selectors as they arrive in ?labelSelector=, parsed
 * and, when valid, matched against a fixed label set. */
#include "extmetrics/extmetrics.h"
#include "util/util.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct extmetrics_label labels[] = {
        {"app", "llama"}, {"deployment", "llama-70b"}, {"n", "5"}, {"example.com/team", "ml"},
        {"empty", ""},
    };
    char *s = xstrndup((const char *)data, size); /* stops at an embedded NUL, like C callers */
    struct extmetrics_selector *sel = NULL;
    struct extmetrics_parse_error err;
    if (extmetrics_selector_parse(s, &sel, &err) == 0) {
        extmetrics_selector_matches(sel, labels, UTIL_ARRAY_LEN(labels));
        extmetrics_selector_free(sel);
    } else if (err.offset > size) {
        __builtin_trap(); /* the error must point inside the input */
    }
    xfree(s);
    return 0;
}

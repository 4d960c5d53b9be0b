/* SPDX-License-Identifier: Apache-2.0 */
/* prom: number syntax of the exposition formats (Go ParseFloat/ParseInt) and UTF-8 checks.
 *
 * Floats take a fast exact path when the decimal mantissa has at most 19
 * significant digits, fits in 53 bits and the power of ten is at most 22 in
 * size (both operands exact, so one IEEE multiply or divide rounds
 * correctly). Everything else is rewritten without a decimal point
 * ("12.5e3" -> "125e2") and handed to strtod, which then cannot be affected
 * by the process locale. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prom/prom-int.h"
#include "prom/prom.h"
#include "util/util.h"

static const double pow10_exact[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

static int lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

static int eq_nocase(const char *s, size_t len, const char *word)
{
    size_t wl = strlen(word);
    if (len != wl)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (lower((unsigned char)s[i]) != word[i])
            return 0;
    return 1;
}

/* Slow path: s[0..len) is already known to match the decimal grammar. */
static int slow_float(const char *s, size_t len, double *out)
{
    char stackbuf[128];
    /* Worst case: every byte a digit, plus sign, 'e', exponent, NUL. */
    size_t need = len + 32;
    char *buf = need <= sizeof(stackbuf) ? stackbuf : xmalloc(need);
    size_t o = 0, i = 0;
    long long exp_adj = 0, exp = 0;
    int rc = -EINVAL;

    if (s[i] == '+' || s[i] == '-')
        buf[o++] = s[i++];
    int seen_dot = 0;
    for (; i < len && s[i] != 'e' && s[i] != 'E'; i++) {
        if (s[i] == '.') {
            seen_dot = 1;
            continue;
        }
        buf[o++] = s[i];
        if (seen_dot)
            exp_adj--;
    }
    if (i < len) { /* exponent */
        i++;
        int eneg = 0;
        if (s[i] == '+' || s[i] == '-')
            eneg = s[i++] == '-';
        for (; i < len; i++) {
            if (exp < 1000000000LL)
                exp = exp * 10 + (s[i] - '0');
        }
        if (eneg)
            exp = -exp;
    }
    exp += exp_adj;
    if (exp > 1000000000LL)
        exp = 1000000000LL;
    if (exp < -1000000000LL)
        exp = -1000000000LL;
    int n = snprintf(buf + o, need - o, "e%lld", exp);
    if (n < 0 || (size_t)n >= need - o)
        goto out;
    errno = 0;
    char *end = NULL;
    double v = strtod(buf, &end);
    if (end == buf || *end != '\0')
        goto out;
    if (errno == ERANGE && isinf(v))
        goto out; /* overflow is an error, as in Go; underflow is not */
    *out = v;
    rc = 0;
out:
    if (buf != stackbuf)
        xfree(buf);
    return rc;
}

int prom_parse_float(const char *s, size_t len, double *out)
{
    if (len == 0)
        return -EINVAL;
    size_t i = 0;
    int neg = 0, has_sign = 0;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        has_sign = 1;
        i = 1;
    }
    if (i < len && (s[i] == 'i' || s[i] == 'I' || s[i] == 'n' || s[i] == 'N')) {
        if (eq_nocase(s + i, len - i, "inf") || eq_nocase(s + i, len - i, "infinity")) {
            *out = neg ? -INFINITY : INFINITY;
            return 0;
        }
        if (!has_sign && eq_nocase(s, len, "nan")) {
            *out = NAN;
            return 0;
        }
        return -EINVAL;
    }
    uint64_t mant = 0;
    int sig = 0, digits = 0, exp10 = 0, overflow = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        digits++;
        if (mant == 0 && s[i] == '0')
            continue;
        if (sig < 19) {
            mant = mant * 10 + (uint64_t)(s[i] - '0');
            sig++;
        } else {
            overflow = 1;
        }
    }
    if (i < len && s[i] == '.') {
        i++;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
            digits++;
            if (mant == 0 && s[i] == '0') {
                exp10--;
                continue;
            }
            if (sig < 19) {
                mant = mant * 10 + (uint64_t)(s[i] - '0');
                sig++;
                exp10--;
            } else {
                overflow = 1;
            }
        }
    }
    if (digits == 0)
        return -EINVAL;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        if (i == len)
            return -EINVAL;
        int e = 0;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
            if (e < 100000)
                e = e * 10 + (s[i] - '0');
        }
        if (i != len)
            return -EINVAL;
        exp10 += eneg ? -e : e;
    }
    if (i != len)
        return -EINVAL;
    if (mant == 0 && !overflow) {
        *out = neg ? -0.0 : 0.0;
        return 0;
    }
    if (!overflow && mant <= (UINT64_C(1) << 53) && exp10 >= -22 && exp10 <= 22) {
        double v = (double)mant;
        v = exp10 < 0 ? v / pow10_exact[-exp10] : v * pow10_exact[exp10];
        *out = neg ? -v : v;
        return 0;
    }
    return slow_float(s, len, out);
}

int prom_num_int64(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (len == 0)
        return -EINVAL;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == len)
        return -EINVAL;
    uint64_t v = 0;
    const uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool range = false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        unsigned d = (unsigned)(s[i] - '0');
        if (range || v > (lim - d) / 10) {
            range = true; /* keep checking the syntax of the rest */
            continue;
        }
        v = v * 10 + d;
    }
    if (range)
        return -ERANGE;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

int prom_utf8_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        unsigned min;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            min = 0x10000;
        } else {
            return 0;
        }
        if (len - i <= n)
            return 0;
        unsigned cp = c & (0x3fu >> n);
        for (size_t k = 1; k <= n; k++) {
            unsigned cc = s[i + k];
            if ((cc & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (cc & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += n + 1;
    }
    return 1;
}

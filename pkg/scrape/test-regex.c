/* SPDX-License-Identifier: Apache-2.0 */
/* Regex label matchers: RE2 patterns as Prometheus matches them (anchored,
 * `.` any character including newline, a character a UTF-8 sequence),
 * matched through their POSIX translation; and the patterns refused because
 * the two dialects would read them differently. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "scrape-int.h"
#include "util/util.h"

/* Whether value matches the pattern of `x{l=~"pattern"}` (pattern given
 * already unquoted, as the selector holds it). */
static bool matches(const char *pattern, const char *value)
{
    struct scrape_selector s = {.n = 1};
    snprintf(s.name, sizeof(s.name), "x");
    snprintf(s.m[0].label, sizeof(s.m[0].label), "l");
    snprintf(s.m[0].value, sizeof(s.m[0].value), "%s", pattern);
    s.m[0].regex = true;
    if (scrape_selector_compile(&s) != 0)
        fail_msg("'%s' does not compile", pattern);
    bool m = scrape_regex_match(&s, 0, value);
    scrape_selector_release(&s);
    assert_null(s.re);
    return m;
}

/* What RE2 (and so Prometheus) answers for each pair. */
static void test_matches_as_re2(void **state)
{
    (void)state;
    static const struct {
        const char *pattern, *value;
        bool want;
    } cases[] = {
        {"llama.*", "llama-3-8b", true},
        {"llama.*", "my-llama", false}, /* anchored at both ends */
        {"llama", "llama-3", false},
        {"a|b", "a", true},
        {"a|b", "ab", false},
        {"", "", true},
        {"", "x", false},
        {"a.b", "a\xc3\xa9" "b", true},  /* . is one character, two bytes here */
        {"a..b", "a\xc3\xa9" "b", false},
        {"a.b", "a\nb", true},            /* Prometheus matches with (?s) */
        {".*", "line\nbreak", true},
        {"[^a]", "\xc3\xa9", true},
        {"[^a]", "a", false},
        {"[^a]b", "\xe2\x82\xac" "b", true}, /* a three-byte character */
        {"\\d+", "123", true},
        {"\\d+", "12a", false},
        {"\\D", "\xc3\xa9", true},
        {"\\D", "5", false},
        {"\\w+", "abc_9", true},
        {"\\W", "-", true},
        {"\\W", "a", false},
        {"\\s", " ", true},
        {"\\S+", "ab", true},
        {"[a-c]+", "abcab", true},
        {"[a-c]+", "abd", false},
        {"[]a]", "]", true},
        {"[]a]", "a", true},
        {"[a-]", "-", true},
        {"[\\]]", "]", true},
        {"[\\d.]+", "1.5", true},
        {"[\\w-]+", "llama-3_8b", true},
        {"[[:digit:]]+", "42", true},
        {"[[:alpha:]]", "7", false},
        {"(?i)LLAMA", "llama", true},
        {"(?i)[A-C]", "b", true},
        {"(?s).", "\n", true},
        {"(?:a|b)c", "bc", true},
        {"(a|b)+c", "abbac", true},
        {"a{2,3}", "aaa", true},
        {"a{2,3}", "aaaa", false},
        {"a{2}", "aa", true},
        {"a{2,}", "aaaaa", true},
        {"a{,2}", "a{,2}", true}, /* not an interval: literal */
        {"x*?", "xx", true},       /* non-greedy: the same full matches */
        {"x+?y", "xxy", true},
        {"\\.", ".", true},
        {"\\.", "a", false},
        {"a\\+", "a+", true},
        {"\\-", "-", true},
        {"\\/", "/", true},
        {"\\<", "<", true}, /* literal, not GNU's word boundary */
        {"\\`", "`", true},
        {"^a$", "a", true},
        {"^a|^b$", "b", true},
        {"^(a|b)$", "a", true},
        {"a.*", "a\nb", true},
        {"[^]]", "a", true},
        {"[^]]", "]", false},
        {"[\\^]", "^", true},
        {"[\\^-]", "-", true},
        {"[\\^-]", "a", false},
        {"[^\\\\d-]", "e", true}, /* \\, d and -, negated */
        {"[^\\\\d-]", "-", false},
        {"[^\\\\d-]", "\\", false},
        {"[.[]", "[", true},
        {"[^^]", "^", false},
        {"[^^]", "a", true},
        {"a|", "", true},
        {"(|a)", "", true},
        {"()", "", true},
        {"{", "{", true},
        {"}", "}", true},
        {"]", "]", true},
        {"a\\tb", "a\tb", true},
        {"[.]", "x", false},
        {"prod|staging-.*", "staging-eu", true},
        {"meta/llama-3\\.1-.*", "meta/llama-3.1-8b-instruct", true},
        {"meta/llama-3\\.1-.*", "meta/llama-3x1-8b-instruct", false},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        if (matches(cases[i].pattern, cases[i].value) != cases[i].want)
            fail_msg("case %zu: '%s' against '%s': want %s", i, cases[i].pattern,
                     cases[i].value, cases[i].want ? "a match" : "none");
    }
}

/* Patterns Prometheus refuses, or reads differently from POSIX: refused in
 * the annotation, with the reason. */
static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *pattern, *why;
    } cases[] = {
        {"\\b", "\\b is not supported when scraping"},
        {"\\1", "\\1 is not supported"},
        {"\\pL", "\\p is not supported"},
        {"(?=a)", "(?= is not supported"},
        {"(?P<n>a)", "(?P is not supported"},
        {"a(?i)b", "(?i is not supported"},
        {"\xc3\xa9", "non-ASCII"},
        {"[^\xc3\xa9]", "non-ASCII"}, /* in a class too */
        {"a**", "repeats nothing"},
        {"*a", "repeats nothing"},
        {"(*)", "repeats nothing"},
        {"a|*", "repeats nothing"},
        {"^*", "repeats nothing"},
        {"a{1001}", "past 1000"},
        {"a{3,2}", "past 1000, or reversed"},
        {"[[.a.]]", "[. is not supported"},
        {"[[=a=]]", "[= is not supported"},
        {"[[:word:]]", "[:word:] is not a POSIX class"},
        {"[z-a]", "a bad range"},
        {"[a-\\d]", "a bad range"},
        {"[\\D]", "\\D is not supported in a class"},
        {"[a", "no closing ]"},
        {"(a", "'(' without its ')'"},
        {"a)", "')' without its '('"},
        {"a\\", "a trailing \\"},
        /* glibc would read these as line anchors, RE2 as the text's ends */
        {"a$.*", "only at the start or end of the pattern"},
        {".*^b", "only at the start or end"},
        {"(^a)", "only at the start or end"},
        {"a$b|c", "only at the start or end"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        char why[200] = "";
        int rc = scrape_regex_check(cases[i].pattern, why, sizeof(why));
        if (rc != -EINVAL || !strstr(why, cases[i].why))
            fail_msg("case %zu '%s': rc %d why '%s'", i, cases[i].pattern, rc, why);
    }
    /* the selector names the key's problem */
    struct scrape_selector s;
    char err[300];
    assert_int_equal(scrape_selector_parse("x{a=~\"b(\"}", &s, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "is not a metric name with label matchers"));
    assert_non_null(strstr(err, "'(' without its ')'"));
    /* a pattern whose translation would pass the buffer */
    char many[SCRAPE_METRIC_MAX];
    memset(many, '.', sizeof(many) - 1);
    many[sizeof(many) - 1] = '\0';
    char why[200];
    char ere[64];
    int cflags;
    assert_int_equal(scrape_regex_translate(many, ere, sizeof(ere), &cflags, why, sizeof(why)),
                     -EINVAL);
    assert_non_null(strstr(why, "too long"));
}

/* Parsing a regex matcher allocates nothing; compiling does, once, and a
 * second compile replaces the first; equality matchers compile to nothing;
 * remembered answers are the answers. */
static void test_compile_owns(void **state)
{
    (void)state;
    struct scrape_selector a, b;
    char err[200];
    const char *text = "x{model_name=~\"llama.*\",engine!~\"[2-9]\",reason!=\"abort\"}";
    assert_int_equal(scrape_selector_parse(text, &a, err, sizeof(err)), 0);
    assert_int_equal(scrape_selector_parse(text, &b, err, sizeof(err)), 0);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_null(a.re);
    assert_true(a.m[0].regex && !a.m[0].negate);
    assert_true(a.m[1].regex && a.m[1].negate);
    assert_true(!a.m[2].regex && a.m[2].negate);
    assert_int_equal(scrape_selector_compile(&a), 0);
    assert_non_null(a.re);
    assert_true(scrape_regex_match(&a, 0, "llama-8b"));
    assert_false(scrape_regex_match(&a, 2, "abort")); /* not a regex matcher */
    assert_int_equal(scrape_selector_compile(&a), 0); /* again: the first is freed */
    assert_true(scrape_regex_match(&a, 1, "3"));
    /* answers remembered for the last few values: the same answers, whether
     * remembered, evicted (more values than remembered) or too long to keep */
    char longval[100];
    memset(longval, 'l', sizeof(longval) - 1);
    longval[sizeof(longval) - 1] = '\0';
    const char *vals[] = {"llama-1", "mistral", "llama-2", "qwen", "llama", "phi", longval,
                          "xllama"};
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < UTIL_ARRAY_LEN(vals); i++)
            assert_int_equal(scrape_regex_match(&a, 0, vals[i]),
                             strncmp(vals[i], "llama", 5) == 0);
    scrape_selector_release(&a);
    scrape_selector_release(&a); /* twice is harmless */
    assert_false(scrape_regex_match(&a, 0, "llama-8b")); /* not compiled: nothing */
    assert_int_equal(scrape_selector_parse("x{a=\"b\"}", &b, err, sizeof(err)), 0);
    assert_int_equal(scrape_selector_compile(&b), 0);
    assert_null(b.re);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_as_re2),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_compile_owns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

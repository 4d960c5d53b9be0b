/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for prom's leniency and limits: comments and # HELP texts over
 * the line cap, the cap on a sample's labels, Prometheus 3's quoted UTF-8
 * metric and label names, and where a # HELP's name ends. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "prom/prom.h"
#include "prom/test-prom.h"
#include "util/util.h"

/* A comment or a # HELP text over the cap does not fail the scrape, as
 * Prometheus sets no limit on them: a comment is skipped, a # HELP's name
 * sets the family (its text is cut at the cap), with or without a filter,
 * whatever the chunks; memory stays within the cap. OpenMetrics has no
 * comments: its long # HELP is cut the same way. */
static void test_line_cap_comment(void **state)
{
    (void)state;
    struct util_buf b = {0};
    util_buf_puts(&b, "# a comment ");
    for (int i = 0; i < 200; i++)
        util_buf_puts(&b, "0123456789 \"{ ");
    util_buf_puts(&b, "\n# HELP w Requests \xc3\xa9");
    for (int i = 0; i < 200; i++)
        util_buf_puts(&b, "r\xc3\xa9quests ");
    util_buf_puts(&b, "\n# TYPE w counter\nw_total 1\n#tight ");
    for (int i = 0; i < 200; i++)
        util_buf_puts(&b, "xxxxxxxxxx");
    util_buf_puts(&b, "\nw_total{a=\"b\"} 3\n");
    for (int filtered = 0; filtered < 2; filtered++) {
        for (size_t step = 0; step < 40; step++) {
            struct coll c = {0};
            struct prom_error err;
            struct prom_parser_opts o = {.max_line = 64};
            struct prom_parser *p = prom_parser_new(&o, collect, &c);
            if (filtered)
                assert_int_equal(prom_parser_want(p, "w", PROM_MATCH_NAME), 0);
            int rc = 0;
            for (size_t off = 0; rc == 0 && off < b.len;) {
                size_t n = step && step < b.len - off ? step : b.len - off;
                rc = prom_parser_feed(p, b.data + off, n, &err);
                off += n;
            }
            if (rc == 0)
                rc = prom_parser_finish(p, &err);
            struct prom_stats st;
            prom_parser_stats(p, &st);
            if (rc != 0)
                fail_msg("filtered %d step %zu: rc %d line %zu: %s", filtered, step, rc, err.line,
                         err.msg);
            assert_int_equal(c.n, 2);
            assert_int_equal(st.samples, 2);
            assert_int_equal(st.lines, 6);
            assert_string_equal(c.v[1].family, "w");
            assert_int_equal(c.v[1].type, PROM_COUNTER);
            assert_int_equal(c.v[1].line, 6);
            prom_parser_free(p);
            coll_free(&c);
        }
    }
    util_buf_free(&b);
    /* the # HELP head is checked as a whole line would be */
    struct coll c = {0};
    struct prom_error err;
    struct prom_parser_opts o = {.max_line = 16};
    assert_int_equal(prom_parse("# HELP 9x aaaaaaaaaaaaaaaaaaaaaaaaa\n", 36, &o, collect, &c, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "invalid metric name"));
    /* OpenMetrics: a long # HELP is cut, a long comment is still an error */
    static const char om[] = "# HELP w aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
                             "# TYPE w gauge\nw 1\n# EOF\n";
    o.format = PROM_FMT_OPENMETRICS;
    assert_int_equal(prom_parse(om, strlen(om), &o, collect, &c, &err), 0);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.v[0].type, PROM_GAUGE);
    assert_int_not_equal(prom_parse("# aaaaaaaaaaaaaaaaaaaaaaaaa\n# EOF\n", 33, &o, collect, &c,
                                    &err),
                         0);
    coll_free(&c);
}

/* Prometheus 3's quoted names: a UTF-8 metric name quoted inside the
 * braces (anywhere among the labels), quoted label names, and quoted names
 * in # HELP and # TYPE, in both formats, with or without a filter; a name
 * set twice, or none, is an error as in Prometheus' parser. */
static void test_quoted_names(void **state)
{
    (void)state;
    static const char text[] =
        "# HELP \"http.server.requests\" Requests \"served\".\n"
        "# TYPE \"http.server.requests\" counter\n"
        "{\"http.server.requests\", method=\"GET\"} 3\n"
        "{method=\"POST\",\"http.server.requests\",} 4\n"
        "{\"http.server.requests_total\"  ,  \"my.label\"=\"v\"} 5\n"
        "plain{\"my.label\"=\"w\",\"\xc3\xa9t\xc3\xa9\"=\"x\"} 6\n"
        "{\"a\\\"b\"} 7\n"
        "{\"classic_name\"} 8\n";
    for (int f = 0; f < 2; f++) {
        struct util_buf b = {0};
        util_buf_puts(&b, text);
        if (f)
            util_buf_puts(&b, "# EOF\n");
        for (int filtered = 0; filtered < 2; filtered++) {
            for (size_t step = 0; step < 12; step += 11) {
                struct coll c = {0};
                struct prom_error err = {0};
                struct prom_parser_opts o = {.format = f ? PROM_FMT_OPENMETRICS : PROM_FMT_TEXT};
                struct prom_parser *p = prom_parser_new(&o, collect, &c);
                if (filtered) {
                    assert_int_equal(
                        prom_parser_want(p, "http.server.requests", PROM_MATCH_NAME), 0);
                    assert_int_equal(prom_parser_want(p, "a\"b", PROM_MATCH_NAME), 0);
                }
                int rc = 0;
                for (size_t off = 0; rc == 0 && off < b.len;) {
                    size_t n = step && step < b.len - off ? step : b.len - off;
                    rc = prom_parser_feed(p, b.data + off, n, &err);
                    off += n;
                }
                if (rc == 0)
                    rc = prom_parser_finish(p, &err);
                if (rc != 0)
                    fail_msg("format %d filtered %d: rc %d line %zu col %zu: %s", f, filtered, rc,
                             err.line, err.column, err.msg);
                struct prom_stats st;
                prom_parser_stats(p, &st);
                assert_int_equal(st.samples, 6);
                assert_int_equal(c.n, filtered ? 4 : 6);
                const struct rec *r = find(&c, "http.server.requests", "method=\"GET\"");
                assert_string_equal(r->family, "http.server.requests");
                assert_int_equal(r->type, PROM_COUNTER);
                assert_true(r->value == 3);
                assert_int_equal(r->line, 3);
                r = find(&c, "http.server.requests", "method=\"POST\"");
                assert_true(r->value == 4);
                r = find(&c, "http.server.requests_total", NULL);
                assert_string_equal(r->labels, "my.label=\"v\"");
                assert_int_equal(r->suffix, PROM_SUFFIX_TOTAL);
                assert_string_equal(r->family, "http.server.requests");
                assert_true(find(&c, "a\"b", NULL)->value == 7);
                if (!filtered) {
                    r = find(&c, "plain", NULL);
                    assert_string_equal(r->labels, "my.label=\"w\",\xc3\xa9t\xc3\xa9=\"x\"");
                    assert_true(find(&c, "classic_name", NULL)->value == 8);
                }
                prom_parser_free(p);
                coll_free(&c);
            }
        }
        util_buf_free(&b);
    }
    static const struct {
        const char *text;
        size_t column;
        const char *msg;
    } bad[] = {
        {"foo{\"bar\"} 1\n", 5, "metric name already set"},
        {"{\"a\",\"b\"} 1\n", 6, "metric name already set"},
        {"{a=\"b\"} 1\n", 1, "no metric name"},
        {"{} 1\n", 1, "no metric name"},
        {"{\"\"} 1\n", 2, "empty metric name"},
        {"{\"x\",\"\"=\"v\"} 1\n", 6, "empty label name"},
        {"{\"x\xff\"} 1\n", 3, "quoted name is not valid UTF-8"},
        {"{\"x\" 1\n", 6, "expected '=' after label name"},
        {"# TYPE \"x counter\n", 8, "unterminated quoted name"},
        {"# TYPE \"\" counter\n", 8, "invalid quoted name"},
        {"# TYPE \"x\"counter\n", 11, "invalid metric name"},
        {"x 1 # {\"y\"} 1\n", 8, "metric name in an exemplar"},
        /* a quoted family's name, unquoted on a sample line, is no legacy name
         * (the family's own name skipped the character check: it was taken) */
        {"# TYPE \"a.b\" counter\na.b 1\n", 2, "invalid character in metric name"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        struct coll c = {0};
        struct prom_error err = {0};
        int rc = parse_str(bad[i].text, PROM_FMT_TEXT, &c, &err);
        if (rc != -EINVAL || err.column != bad[i].column || !strstr(err.msg, bad[i].msg))
            fail_msg("case %zu: rc %d column %zu '%s'", i, rc, err.column, err.msg);
        coll_free(&c);
    }
    /* a raw line break in a quoted name is in the name, as in a label value */
    struct coll c = {0};
    struct prom_error err;
    assert_int_equal(parse_str("{\"a\nb\"} 1\n", PROM_FMT_TEXT, &c, &err), 0);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.v[0].name, "a\nb");
    coll_free(&c);
}

/* In the 0.0.4 format a # HELP's name ends where its characters do, and the
 * rest of the line is its text, as in Prometheus' lexer (promlex.l), which
 * drops the text's first byte as the blank expected there (a UTF-8 sequence
 * begun there leaves the text invalid, as it does in Prometheus); such a
 * line used to fail the scrape. Within the line cap or past it. # TYPE, and
 * OpenMetrics' # HELP, still need the blank, as in Prometheus. */
static void test_help_name_end(void **state)
{
    (void)state;
    static const char *const good[] = {
        "# HELP foo-bar requests served\n",
        "# HELP foo{x=\"y\"} z\n",
        "# HELP foo\"quoted\"\n",
        "# HELP foo.\n",
        "# HELP \"foo\"-bar x\n",
        "# HELP foo-bar aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", /* over the cap */
        "# HELP foo-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(good); i++) {
        for (size_t ml = 0; ml <= 24; ml += 24) {
            struct util_buf b = {0};
            util_buf_printf(&b, "%s# TYPE foo counter\nfoo_total 3\n", good[i]);
            struct coll c = {0};
            struct prom_error err = {0};
            struct prom_parser_opts o = {.max_line = ml};
            int rc = prom_parse(b.data, b.len, &o, collect, &c, &err);
            if (rc != 0)
                fail_msg("case %zu cap %zu: rc %d column %zu '%s'", i, ml, rc, err.column,
                         err.msg);
            assert_int_equal(c.n, 1);
            assert_string_equal(c.v[0].family, "foo");
            assert_int_equal(c.v[0].type, PROM_COUNTER);
            assert_true(c.v[0].value == 3);
            coll_free(&c);
            util_buf_free(&b);
        }
    }
    static const struct {
        const char *text;
        enum prom_format fmt;
        const char *msg;
    } bad[] = {
        {"# TYPE foo-bar counter\n", PROM_FMT_TEXT, "invalid metric name in # TYPE"},
        {"# HELP foo\xc3\xa9 x\n", PROM_FMT_TEXT, "not valid UTF-8"},
        {"# HELP foo-bar x\n# EOF\n", PROM_FMT_OPENMETRICS, "invalid metric name in # HELP"},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(bad); i++) {
        struct coll c = {0};
        struct prom_error err = {0};
        int rc = parse_str(bad[i].text, bad[i].fmt, &c, &err);
        if (rc != -EINVAL || err.line != 1 || !strstr(err.msg, bad[i].msg))
            fail_msg("bad case %zu: rc %d line %zu '%s'", i, rc, err.line, err.msg);
        coll_free(&c);
    }
}

/* A wanted sample may have PROM_DEFAULT_MAX_LABELS labels, not one more
 * (the label table stays within that many entries, where a 64 KiB line of
 * 5-byte labels made 13,107); an unwanted one's are not read; the cap is
 * an option. */
static void test_label_cap(void **state)
{
    (void)state;
    for (unsigned extra = 0; extra < 2; extra++) {
        struct util_buf b = {0};
        util_buf_puts(&b, "ok 1\nmany{");
        for (unsigned i = 0; i < PROM_DEFAULT_MAX_LABELS + extra; i++)
            util_buf_printf(&b, "l%u=\"\",", i);
        util_buf_puts(&b, "} 2\n");
        for (int filtered = 0; filtered < 3; filtered++) {
            struct coll c = {0};
            struct prom_error err;
            struct prom_parser *p = prom_parser_new(NULL, collect, &c);
            if (filtered)
                assert_int_equal(
                    prom_parser_want(p, filtered == 1 ? "many" : "ok", PROM_MATCH_NAME), 0);
            int rc = prom_parser_feed(p, b.data, b.len, &err);
            if (rc == 0)
                rc = prom_parser_finish(p, &err);
            if (extra && filtered != 2) {
                assert_int_equal(rc, -E2BIG);
                assert_int_equal(err.line, 2);
                assert_string_equal(err.msg, "more than 256 labels on a sample");
            } else {
                assert_int_equal(rc, 0);
                assert_int_equal(c.n, filtered == 2 ? 1 : filtered == 1 ? 1 : 2);
                if (filtered != 2)
                    assert_int_equal(count_name(&c, "many"), 1);
            }
            prom_parser_free(p);
            coll_free(&c);
        }
        util_buf_free(&b);
    }
    struct coll c = {0};
    struct prom_error err;
    struct prom_parser_opts o = {.max_labels = 2};
    static const char two[] = "x{a=\"1\",b=\"2\"} 1\n";
    static const char three[] = "x{a=\"1\",b=\"2\",c=\"3\"} 1\n";
    assert_int_equal(prom_parse(two, strlen(two), &o, collect, &c, &err), 0);
    assert_int_equal(prom_parse(three, strlen(three), &o, collect, &c, &err), -E2BIG);
    assert_int_equal(err.column, 15);
    coll_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_cap_comment),
        cmocka_unit_test(test_label_cap),
        cmocka_unit_test(test_quoted_names),
        cmocka_unit_test(test_help_name_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

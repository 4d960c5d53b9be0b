/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the incremental watch decoder: every split point, byte at a
 * time, large events, the size cap, garbage and truncated streams. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kube/kube.h"
#include "util/util.h"

struct seen {
    int n;
    struct util_buf log; /* "TYPE:name;" per event */
    int stop_at;         /* return -EINTR on this event (1-based), 0 = never */
};

static int on_ev(enum kube_event_type t, json_t *obj, void *arg)
{
    struct seen *s = arg;
    s->n++;
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    util_buf_printf(&s->log, "%s:%s;", kube_event_type_name(t), name ? name : "-");
    return s->n == s->stop_at ? -EINTR : 0;
}

static const char stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\\n\\u00e9\"}}}\r\n"
    "\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"c\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n";
static const char want[] = "ADDED:a;MODIFIED:b\n\xc3\xa9;BOOKMARK:-;DELETED:c;ERROR:-;";

static void test_every_split(void **state)
{
    (void)state;
    size_t len = strlen(stream);
    for (size_t cut = 0; cut <= len; cut++) {
        struct seen s = {0};
        struct kube_watch_decoder *d = kube_watch_decoder_new(0);
        assert_int_equal(kube_watch_decoder_feed(d, stream, cut, on_ev, &s), 0);
        assert_int_equal(kube_watch_decoder_feed(d, stream + cut, len - cut, on_ev, &s), 0);
        assert_int_equal(kube_watch_decoder_finish(d), 0);
        if (strcmp(s.log.data, want) != 0)
            fail_msg("cut %zu: %s", cut, s.log.data);
        util_buf_free(&s.log);
        kube_watch_decoder_free(d);
    }
    /* Byte at a time, and every two-cut split of a shorter prefix. */
    struct seen s = {0};
    struct kube_watch_decoder *d = kube_watch_decoder_new(0);
    for (size_t i = 0; i < len; i++)
        assert_int_equal(kube_watch_decoder_feed(d, stream + i, 1, on_ev, &s), 0);
    assert_int_equal(kube_watch_decoder_finish(d), 0);
    assert_string_equal(s.log.data, want);
    util_buf_free(&s.log);
    kube_watch_decoder_free(d);

    size_t plen = 140;
    for (size_t a = 0; a <= plen; a += 3)
        for (size_t b = a; b <= plen; b += 5) {
            struct seen t = {0};
            d = kube_watch_decoder_new(0);
            assert_int_equal(kube_watch_decoder_feed(d, stream, a, on_ev, &t), 0);
            assert_int_equal(kube_watch_decoder_feed(d, stream + a, b - a, on_ev, &t), 0);
            assert_int_equal(kube_watch_decoder_feed(d, stream + b, len - b, on_ev, &t), 0);
            assert_string_equal(t.log.data, want);
            util_buf_free(&t.log);
            kube_watch_decoder_free(d);
        }
}

static void test_large_event(void **state)
{
    (void)state;
    /* A 3 MiB annotation value, fed in 4000-byte reads. */
    size_t big = (size_t)3 << 20;
    struct util_buf b = {0};
    util_buf_puts(&b, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"big\","
                      "\"annotations\":{\"x\":\"");
    char *fill = xmalloc(big + 1);
    memset(fill, 'z', big);
    fill[big] = '\0';
    util_buf_puts(&b, fill);
    util_buf_puts(&b, "\"}}}}\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"x\"}}}\n");
    struct seen s = {0};
    struct kube_watch_decoder *d = kube_watch_decoder_new(0);
    for (size_t off = 0; off < b.len; off += 4000)
        assert_int_equal(kube_watch_decoder_feed(d, b.data + off, UTIL_MIN(4000, b.len - off),
                                                 on_ev, &s),
                         0);
    assert_string_equal(s.log.data, "ADDED:big;DELETED:x;");
    kube_watch_decoder_free(d);
    util_buf_free(&s.log);

    /* Over the cap: -EMSGSIZE, whether it arrives whole or in pieces. */
    d = kube_watch_decoder_new(1 << 20);
    s = (struct seen){0};
    assert_int_equal(kube_watch_decoder_feed(d, b.data, b.len, on_ev, &s), -EMSGSIZE);
    assert_non_null(strstr(kube_watch_decoder_error(d), "larger than"));
    assert_int_equal(s.n, 0);
    /* Sticky until reset. */
    assert_int_equal(kube_watch_decoder_feed(d, "\n", 1, on_ev, &s), -EMSGSIZE);
    kube_watch_decoder_reset(d);
    int rc = 0;
    for (size_t off = 0; off < b.len && rc == 0; off += 65536)
        rc = kube_watch_decoder_feed(d, b.data + off, UTIL_MIN(65536, b.len - off), on_ev, &s);
    assert_int_equal(rc, -EMSGSIZE);
    kube_watch_decoder_free(d);
    xfree(fill);
    util_buf_free(&b);
}

static void test_garbage(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int rc;
        int events; /* delivered before the error */
    } cases[] = {
        {"not json\n", -EBADMSG, 0},
        {"{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADDED\",\"object\":{}\n", -EBADMSG, 1},
        {"{\"type\":\"WHAT\",\"object\":{}}\n", -EBADMSG, 0},
        {"{\"type\":1,\"object\":{}}\n", -EBADMSG, 0},
        {"{\"type\":\"ADDED\",\"object\":[]}\n", -EBADMSG, 0},
        {"{\"type\":\"ADDED\"}\n", -EBADMSG, 0},
        {"[1,2]\n", -EBADMSG, 0},
        {"{\"type\":\"ADDED\",\"type\":\"DELETED\",\"object\":{}}\n", -EBADMSG, 0},
        {"\xff\xfe\n", -EBADMSG, 0},
        {"{\"type\":\"ADDED\",\"object\":{}} trailing\n", -EBADMSG, 0},
        {"  \n\r\n", 0, 0},
    };
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        struct seen s = {0};
        struct kube_watch_decoder *d = kube_watch_decoder_new(0);
        int rc = kube_watch_decoder_feed(d, cases[i].in, strlen(cases[i].in), on_ev, &s);
        if (rc != cases[i].rc || s.n != cases[i].events)
            fail_msg("case %zu: rc %d events %d (%s)", i, rc, s.n, kube_watch_decoder_error(d));
        if (rc)
            assert_true(kube_watch_decoder_error(d)[0] != '\0');
        util_buf_free(&s.log);
        kube_watch_decoder_free(d);
    }
    /* A stream that ends mid-event. */
    struct seen s = {0};
    struct kube_watch_decoder *d = kube_watch_decoder_new(0);
    assert_int_equal(kube_watch_decoder_feed(d, "{\"type\":\"ADD", 12, on_ev, &s), 0);
    assert_int_equal(kube_watch_decoder_finish(d), -ENODATA);
    kube_watch_decoder_reset(d);
    assert_int_equal(kube_watch_decoder_feed(d, "  ", 2, on_ev, &s), 0);
    assert_int_equal(kube_watch_decoder_finish(d), 0);
    kube_watch_decoder_free(d);
    kube_watch_decoder_free(NULL);
}

static void test_callback_stops(void **state)
{
    (void)state;
    struct seen s = {.stop_at = 2};
    struct kube_watch_decoder *d = kube_watch_decoder_new(0);
    assert_int_equal(kube_watch_decoder_feed(d, stream, strlen(stream), on_ev, &s), -EINTR);
    assert_int_equal(s.n, 2);
    util_buf_free(&s.log);
    kube_watch_decoder_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_large_event),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_callback_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

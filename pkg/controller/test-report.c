/* SPDX-License-Identifier: Apache-2.0 */
/* The report stage's bookkeeping, on workloads and a controller built by
 * hand (no API server): the Prometheus failures' log lines (one a kind of
 * reason, not one a tick), the Parked Event once a spell, the per-Deployment
 * series only while the annotations are valid, the Events' rate limits
 * across a wall clock step, a restored capacity state's runs, another
 * replica's decision served from its status annotation, and a --record
 * file continued after a restart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "controller/controller-int.h"
#include "forecast/forecast.h"
#include "kube/kube.h"
#include "util/util.h"

static struct ctl_wl *wl_new(const char *ns, const char *name)
{
    struct ctl_wl *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    w->ns = xstrdup(ns);
    w->name = xstrdup(name);
    w->uid = xstrdup("u-1");
    capacity_init(&w->cap);
    return w;
}

static void wl_free(struct ctl_wl *w)
{
    xfree(w->ns);
    xfree(w->name);
    xfree(w->uid);
    free(w);
}

/* A query failing tick after tick logs once; a timeout's milliseconds are
 * not another reason; another reason and the answer again each log once;
 * the parts are apart. */
static void test_prometheus_failures_logged_once_a_kind(void **state)
{
    (void)state;
    struct ctl_wl *w = wl_new("ns", "d");
    assert_false(ctl_pq_log(w, 0, NULL)); /* answering from the start: nothing to say */
    assert_true(ctl_pq_log(w, 0, "Prometheus: timed out after 2001 ms"));
    assert_false(ctl_pq_log(w, 0, "Prometheus: timed out after 2001 ms"));
    assert_false(ctl_pq_log(w, 0, "Prometheus: timed out after 2950 ms"));
    assert_true(ctl_pq_log(w, 0, "Prometheus: HTTP 503"));
    assert_true(ctl_pq_log(w, 1, "no histogram")); /* the p99 query's own line */
    assert_false(ctl_pq_log(w, 0, "Prometheus: HTTP 503"));
    assert_true(ctl_pq_log(w, 0, NULL)); /* "answers again" */
    assert_false(ctl_pq_log(w, 0, ""));
    assert_false(ctl_pq_log(w, 1, "no histogram"));
    assert_true(ctl_pq_log(w, 1, ""));
    wl_free(w);
}

static struct controller *ctl_new(void)
{
    struct controller *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->dry_run = true; /* an Event sent is one decided, not one written */
    c->identity = "test";
    return c;
}

static int told_slots(const struct ctl_wl *w)
{
    int n = 0;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(w->last_event_ms); i++)
        n += w->last_event_ms[i] != 0;
    return n;
}

/* Parked: no Event while the report budget is full, then one at the first
 * tick with room, none for the rest of the spell; a spell ended and begun
 * again is told again, within the Events' interval too. */
static void test_parked_told_once_a_spell(void **state)
{
    (void)state;
    struct controller *c = ctl_new();
    struct ctl_wl *w = wl_new("ns", "d");
    struct policy_decision parked = {.reason = POLICY_HOLD_PARKED,
                                     .explain = "spec.replicas is 0"};
    struct policy_decision hold = {.reason = POLICY_HOLD_WITHIN_BAND, .explain = "within the band"};
    c->report_inflight = CTL_REPORT_MAX_INFLIGHT;
    ctl_report_parked(c, w, &parked);
    assert_false(w->parked_told);
    assert_int_equal(told_slots(w), 0);
    c->report_inflight = 0;
    ctl_report_parked(c, w, &parked);
    assert_true(w->parked_told);
    assert_int_equal(told_slots(w), 1);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(w->last_event_ms); i++)
        w->last_event_ms[i] = w->last_event_ms[i] ? 1 : 0; /* told long ago: it would be due */
    ctl_report_parked(c, w, &parked);
    assert_true(w->parked_told);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(w->last_event_ms); i++)
        assert_true(w->last_event_ms[i] <= 1); /* not sent again */
    ctl_report_parked(c, w, &hold);
    assert_false(w->parked_told);
    ctl_report_parked(c, w, &parked);
    assert_true(w->parked_told);
    int64_t sent = 0;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(w->last_event_ms); i++)
        if (w->last_event_ms[i] > sent)
            sent = w->last_event_ms[i];
    assert_true(sent > 1); /* the new spell's */
    wl_free(w);
    free(c);
}

static void table_add(struct controller *c, struct ctl_wl *w)
{
    size_t b = (size_t)(strlen(w->name) % CTL_WL_BUCKETS);
    w->next = c->table[b];
    c->table[b] = w;
    c->nwl++;
}

/* The per-Deployment series: a Deployment decided with valid annotations
 * has them; one whose annotations turned invalid since its last decision
 * has none (its numbers would be served as current); one not decided yet
 * has none. */
static void test_series_only_while_valid(void **state)
{
    (void)state;
    struct controller *c = ctl_new();
    struct ctl_wl *ok = wl_new("ns", "good"), *bad = wl_new("ns", "broken"),
                  *fresh = wl_new("ns", "new");
    ok->have_last = ok->config_ok = true;
    ok->last.desired = 7;
    bad->have_last = true;
    bad->config_ok = false;
    bad->last.desired = 9;
    fresh->config_ok = true;
    table_add(c, ok);
    table_add(c, bad);
    table_add(c, fresh);
    struct util_buf b = {0};
    ctl_write_workload_metrics(c, &b);
    util_buf_append(&b, "", 1);
    assert_non_null(
        strstr(b.data, "gpuscaler_desired_replicas{namespace=\"ns\",deployment=\"good\"} 7\n"));
    assert_non_null(strstr(b.data, "deployment=\"good\",unit=\"requests\"} 1\n"));
    assert_null(strstr(b.data, "deployment=\"broken\""));
    assert_null(strstr(b.data, "deployment=\"new\""));
    /* valid again: served again */
    bad->config_ok = true;
    b.len = 0;
    ctl_write_workload_metrics(c, &b);
    util_buf_append(&b, "", 1);
    assert_non_null(
        strstr(b.data, "gpuscaler_desired_replicas{namespace=\"ns\",deployment=\"broken\"} 9\n"));
    util_buf_free(&b);
    wl_free(ok);
    wl_free(bad);
    wl_free(fresh);
    free(c);
}

/* A wall clock step between two ticks moves the Events' rate limits with
 * it (an Event told a minute before a 1-hour step back is still a minute
 * old), and the deadlines kept in wall time (a checkpoint's next save: set
 * back an hour, none was saved for an hour more); drift under the threshold
 * and a slot never used do not move. */
static void test_event_limits_move_with_a_clock_step(void **state)
{
    (void)state;
    struct controller *c = ctl_new();
    struct ctl_wl *w = wl_new("ns", "d");
    table_add(c, w);
    struct ctl_ckpt ck[2] = {{.next_save_ms = 1800000000000LL + 10000}, {.next_save_ms = 0}};
    c->ckpt = ck;
    c->nckpt = 2;
    w->status_written_ms = 1800000000000LL - 30000;
    const int64_t t0 = 1800000000000LL, boot0 = 5000000;
    struct forecast_config fc;
    policy_config_init(&w->cfg.policy);
    controller_forecast_config(&w->cfg.policy, &fc);
    w->fc = forecast_new(&fc);
    assert_int_equal(forecast_observe(w->fc, t0 - 60000, 5.0), 0);
    ctl_clock_step(c, t0, boot0); /* the first tick: nothing to compare */
    w->last_event_ms[2] = t0 - 60000;
    ctl_clock_step(c, t0 + 5000 + 1500, boot0 + 5000); /* 1.5 s of drift: no step */
    assert_int_equal(w->last_event_ms[2], t0 - 60000);
    assert_int_equal(c->clock_steps, 0);
    const int64_t back = -3600000;
    ctl_clock_step(c, t0 + 11500 + back, boot0 + 10000);
    assert_int_equal(c->clock_steps, 1);
    assert_int_equal(w->last_event_ms[2], t0 - 60000 + back);
    assert_int_equal(w->last_event_ms[0], 0); /* never told: stays never */
    assert_int_equal(ck[0].next_save_ms, t0 + 10000 + back);
    assert_int_equal(ck[1].next_save_ms, 0); /* not set yet: the first tick staggers it */
    assert_int_equal(w->status_written_ms, t0 - 30000 + back);
    assert_int_equal(w->ckpt_foreign_until, 0);
    /* and the forecaster's times (set back, it refused every observation
     * for the hour) */
    assert_int_equal(forecast_last_ms(w->fc), t0 - 60000 + back);
    ctl_clock_step(c, t0 + 16500 + back + 7200000, boot0 + 15000);
    assert_int_equal(c->clock_steps, 2);
    assert_int_equal(w->last_event_ms[2], t0 - 60000 + back + 7200000);
    assert_int_equal(ck[0].next_save_ms, t0 + 10000 + back + 7200000);
    c->ckpt = NULL;
    c->nckpt = 0;
    forecast_free(w->fc);
    wl_free(w);
    free(c);
}

static json_t *ckpt_body_v(const struct capacity *cap, const char *uid, uint8_t version)
{
    uint8_t buf[CAPACITY_STATE_SIZE];
    assert_int_equal(capacity_encode(cap, buf, sizeof(buf)), CAPACITY_STATE_SIZE);
    if (version)
        buf[4] = version; /* another release's format */
    char *b64 = kube_base64_encode(buf, sizeof(buf));
    json_t *body = json_pack("{s:{s:s, s:s}, s:{s:s}}", "data", "uid.ns_d", uid, "unit.ns_d",
                             "requests", "binaryData", "capacity.ns_d", b64);
    xfree(b64);
    assert_non_null(body);
    return body;
}

static json_t *ckpt_body(const struct capacity *cap, const char *uid)
{
    return ckpt_body_v(cap, uid, 0);
}

/* A restored capacity state keeps what was learned and forgets its runs of
 * ticks: a queue standing at the save has not stood since. A state of
 * another Deployment of that name (uid) is not taken. */
static void test_restore_forgets_the_runs(void **state)
{
    (void)state;
    struct capacity saved;
    capacity_init(&saved);
    saved.lower = 12.5;
    saved.lower_ms = 1000;
    saved.queue_since_ms = 424242;
    saved.recent[0] = 9.0f;
    saved.recent[1] = 9.5f;
    saved.nrecent = 2;
    saved.irecent = 2;
    saved.total = 17;
    struct ctl_wl *w = wl_new("ns", "d");
    json_t *other = ckpt_body(&saved, "u-old");
    ctl_checkpoint_restore(w, other, "gpuscaler-checkpoint-0");
    assert_true(w->cap.lower == 0.0);
    assert_int_equal(w->cap.total, 0);
    json_decref(other);
    json_t *body = ckpt_body(&saved, "u-1");
    ctl_checkpoint_restore(w, body, "gpuscaler-checkpoint-0");
    assert_true(w->cap.lower == 12.5);
    assert_int_equal(w->cap.total, 17);
    assert_int_equal(w->cap.queue_since_ms, -1);
    assert_int_equal(w->cap.nrecent, 0);
    assert_int_equal(w->cap.irecent, 0);
    json_decref(body);
    /* a state of another release's format (a newer one's, in a rollback) is
     * left as it is for an hour, not saved over at the next save */
    assert_int_equal(w->ckpt_foreign_until, 0);
    body = ckpt_body_v(&saved, "u-1", 200);
    ctl_checkpoint_restore(w, body, "gpuscaler-checkpoint-0");
    assert_true(w->ckpt_foreign_until > util_now_unix_ms() + CTL_CKPT_FOREIGN_HOLD_MS - 60000);
    json_decref(body);
    wl_free(w);
}

/* A ConfigMap without this Deployment's state: nothing restored, and
 * nothing said (a token-unit Deployment was told at every start that its
 * absent checkpoint was "written for demand unit requests"); with its state
 * of the other unit, that is said. stderr, where the log goes, is read
 * back from a file. */
static void test_restore_of_nothing_says_nothing(void **state)
{
    (void)state;
    struct ctl_wl *w = wl_new("ns", "tok");
    policy_config_init(&w->cfg.policy);
    w->cfg.policy.demand_unit = POLICY_UNIT_TOKENS;
    struct capacity saved;
    capacity_init(&saved);
    saved.lower = 12.5;
    json_t *other = ckpt_body(&saved, "u-1"); /* ns/d's state, in requests */
    json_t *mine = json_deep_copy(other);
    const char *k;
    json_t *v;
    void *tmp;
    json_t *bin = json_object_get(mine, "binaryData");
    json_object_foreach_safe(bin, tmp, k, v)
    {
        char key[300];
        snprintf(key, sizeof(key), "capacity.ns_tok");
        if (strncmp(k, "capacity.", 9) == 0) {
            json_object_set(bin, key, v);
            json_object_del(bin, k);
        }
    }
    char path[] = "/tmp/gpuscaler-test-report-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved_err = dup(2);
    assert_true(saved_err >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_INFO);
    ctl_checkpoint_restore(w, other, "gpuscaler-checkpoint-0");
    fflush(stderr);
    off_t quiet = lseek(fd, 0, SEEK_END);
    ctl_checkpoint_restore(w, mine, "gpuscaler-checkpoint-0");
    fflush(stderr);
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
    assert_int_equal(dup2(saved_err, 2), 2);
    close(saved_err);
    char text[4096] = "";
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n >= 0);
    text[n] = '\0';
    if (quiet != 0)
        fail_msg("nothing stored for ns/tok, yet: %s", text);
    assert_non_null(strstr(text, "written for demand unit requests, now tokens"));
    assert_true(w->cap.lower == 0.0);
    json_decref(other);
    json_decref(mine);
    wl_free(w);
}

/* Another replica's decision is served from its status annotation, and
 * only a count it could have written: a negative or huge one (an edit by
 * hand) is no decision to serve (-5 made an AverageValue HPA scale to its
 * minReplicas). */
static void test_status_view_counts(void **state)
{
    (void)state;
    struct ctl_config cfg;
    ctl_config_init(&cfg);
    struct controller *c = ctl_new();
    c->cfg = &cfg;
    const int64_t now = 1800000000000LL;
    char ts[40], st[300];
    util_format_rfc3339(now - 1000, ts, sizeof(ts));
    static const char *const counts[] = {"3", "0", "-5", "1e10", "2147483648", "\"3\""};
    static const bool served[] = {true, true, false, false, false, false};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(counts); i++) {
        snprintf(st, sizeof(st), "{\"desired\":%s,\"reason\":\"ScaledOut\",\"time\":\"%s\"}",
                 counts[i], ts);
        struct kube_label ann = {CTL_ANNOTATION_PREFIX "status", st};
        struct kube_deployment d = {.ns = "ns", .name = "d", .uid = "u", .spec_replicas = 3};
        d.annotations.items = &ann;
        d.annotations.n = 1;
        struct ctl_workload_view v;
        bool ok = ctl_status_view(c, &d, now, true, &v);
        if (ok != served[i])
            fail_msg("desired %s: served %d", counts[i], ok);
        if (ok)
            assert_int_equal(v.desired, strtol(counts[i], NULL, 10));
    }
    ctl_config_free(&cfg);
    free(c);
}

/* A --record file continued after a restart: the last row's time, so that
 * the next row comes after it (a restart within an interval wrote that time
 * again, and simulate and plan refused the file: "does not increase"). */
static void test_record_last_row(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int64_t want;
    } cases[] = {
        {"# gpuscaler run --record: t_seconds (UNIX), requests per interval\nt_seconds,requests\n",
         -1},
        {"t_seconds,requests\n1800000000,12.000\n1800000015,13.500\n", 1800000015},
        /* no line break after it: maybe cut in its number, so cut off */
        {"t_seconds,requests\n1800000000,12.000\n1800000015,13.500", 1800000000},
        {"t_seconds,requests\n1800000000,12.000\r\n", 1800000000},
        {"1800000000,1\n1800000015,", 1800000000}, /* a row cut: cut off */
        {"1800000000,1\n18000", 1800000000},
        {"x", -1},
    };
    char path[] = "/tmp/gpuscaler-record-XXXXXX";
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cases); i++) {
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        size_t n = strlen(cases[i].text);
        assert_int_equal(write(fd, cases[i].text, n), (ssize_t)n);
        int64_t size = (int64_t)n;
        int64_t got = ctl_record_last_t(fd, &size);
        if (got != cases[i].want)
            fail_msg("case %zu: %lld", i, (long long)got);
        /* what is left ends a line (or is empty): the next row starts its own */
        struct stat sb;
        assert_int_equal(fstat(fd, &sb), 0);
        assert_int_equal(sb.st_size, size);
        if (size > 0) {
            char last;
            assert_int_equal(pread(fd, &last, 1, size - 1), 1);
            assert_int_equal(last, '\n');
        }
        close(fd);
        unlink(path);
        memcpy(path + strlen(path) - 6, "XXXXXX", 6);
    }
    /* a long file: its last row, read from the end */
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    struct util_buf b = {0};
    util_buf_puts(&b, "t_seconds,requests\n");
    for (int k = 0; k < 100; k++)
        util_buf_printf(&b, "%d,%d.000\n", 1800000000 + 15 * k, k);
    assert_int_equal(write(fd, b.data, b.len), (ssize_t)b.len);
    int64_t size = (int64_t)b.len;
    assert_int_equal(ctl_record_last_t(fd, &size), 1800000000 + 15 * 99);
    util_buf_free(&b);
    close(fd);
    unlink(path);
}

/* The status and /scale writes in flight, which a Lease's release waits
 * for (a resend after a 429 would land over the next owner's), and no new
 * one starts while the controller closes. */
static void test_writes_in_flight(void **state)
{
    (void)state;
    struct controller *c = ctl_new();
    struct ctl_wl *a = wl_new("ns", "a"), *b = wl_new("ns", "bb"), *d = wl_new("ns", "ccc");
    table_add(c, a);
    table_add(c, b);
    table_add(c, d);
    assert_int_equal(ctl_writes_inflight(c, -1), 0);
    a->scaling = true;
    b->status_inflight = true;
    assert_int_equal(ctl_writes_inflight(c, -1), 2);
    assert_int_equal(ctl_writes_inflight(c, 3), 2); /* without sharding: every Deployment */
    assert_false(ctl_handing_over(c, "ns", "a"));
    c->closing = true;
    assert_true(ctl_handing_over(c, "ns", "a"));
    wl_free(a);
    wl_free(b);
    wl_free(d);
    free(c);
}

/* A state saved under a clock that ran ahead is refused: a forecaster whose
 * newest observation lies an hour ahead refused every observation until
 * this clock caught up, and a capacity state's lower bound would not decay
 * until then. One from the past is taken. */
static void test_restore_refuses_states_ahead(void **state)
{
    (void)state;
    struct ctl_wl *w = wl_new("ns", "d");
    policy_config_init(&w->cfg.policy);
    struct forecast_config fc;
    controller_forecast_config(&w->cfg.policy, &fc);
    const int64_t now = util_now_unix_ms();
    static const int64_t offsets[] = {3600000, -600000};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(offsets); i++) {
        struct forecast *saved = forecast_new(&fc);
        assert_non_null(saved);
        for (int k = 0; k < 30; k++)
            assert_int_equal(forecast_observe(saved, now + offsets[i] - 60000LL * (29 - k), 5.0),
                             0);
        uint8_t *buf = NULL;
        size_t len = 0;
        forecast_serialize_packed(saved, &buf, &len);
        forecast_free(saved);
        char *b64 = kube_base64_encode(buf, len);
        xfree(buf);
        struct capacity cap;
        capacity_init(&cap);
        cap.lower = 7;
        cap.lower_ms = now + offsets[i];
        uint8_t cb[CAPACITY_STATE_SIZE];
        capacity_encode(&cap, cb, sizeof(cb));
        char *cb64 = kube_base64_encode(cb, sizeof(cb));
        json_t *body = json_pack("{s:{s:s, s:s}, s:{s:s, s:s}}", "data", "uid.ns_d", "u-1",
                                 "unit.ns_d", "requests", "binaryData", "forecast.ns_d", b64,
                                 "capacity.ns_d", cb64);
        xfree(b64);
        xfree(cb64);
        w->fc = forecast_new(&fc);
        capacity_init(&w->cap);
        ctl_checkpoint_restore(w, body, "gpuscaler-checkpoint-0");
        bool ahead = offsets[i] > 0;
        assert_int_equal(forecast_last_ms(w->fc), ahead ? -1 : now + offsets[i]);
        assert_true(w->cap.lower == (ahead ? 0.0 : 7.0));
        json_decref(body);
        forecast_free(w->fc);
        w->fc = NULL;
    }
    wl_free(w);
}

/* A forecaster whose times lie ahead of the clock at a tick (a wall clock
 * stepped back beyond what ctl_clock_step saw) is moved to now and learns
 * the tick's rate, rather than refuse every observation until the clock
 * catches up. */
static void test_forecaster_ahead_follows_the_clock(void **state)
{
    (void)state;
    struct controller *c = ctl_new();
    struct ctl_wl *w = wl_new("ns", "d");
    policy_config_init(&w->cfg.policy);
    struct forecast_config fc;
    controller_forecast_config(&w->cfg.policy, &fc);
    w->fc = forecast_new(&fc);
    const int64_t now = 1800000000000LL;
    assert_int_equal(forecast_observe(w->fc, now + 3600000, 5.0), 0);
    struct ctl_obs o;
    memset(&o, 0, sizeof(o));
    o.m.valid = true;
    o.recent_rps = 6.0;
    o.arrival_rps = 6.0;
    struct policy_input in;
    memset(&in, 0, sizeof(in));
    ctl_forecast(c, w, &o, now, &in);
    assert_int_equal(forecast_last_ms(w->fc), now);
    forecast_free(w->fc);
    wl_free(w);
    free(c);
}

int main(void)
{
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prometheus_failures_logged_once_a_kind),
        cmocka_unit_test(test_parked_told_once_a_spell),
        cmocka_unit_test(test_series_only_while_valid),
        cmocka_unit_test(test_event_limits_move_with_a_clock_step),
        cmocka_unit_test(test_restore_forgets_the_runs),
        cmocka_unit_test(test_restore_of_nothing_says_nothing),
        cmocka_unit_test(test_status_view_counts),
        cmocka_unit_test(test_record_last_row),
        cmocka_unit_test(test_writes_in_flight),
        cmocka_unit_test(test_restore_refuses_states_ahead),
        cmocka_unit_test(test_forecaster_ahead_follows_the_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

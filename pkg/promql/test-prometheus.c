/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus source against a real Prometheus server (Debian's
 * prometheus package, /usr/bin/prometheus): fake vLLM pods on loopback serve
 * counters advancing at known rates and a histogram with a known p99;
 * Prometheus on 127.0.0.1 scrapes them every second with namespace and pod
 * target labels (two pods of the Deployment, plus decoys: a Deployment whose
 * name starts the same and the same pod name in another namespace). The
 * default queries must see exactly the two pods, for the busy time too, and
 * none once one pod lacks the busy counter; the per-pod query must name the
 * two pods as counted, with their running and waiting gauges (and not
 * count them under a custom rate query); errors, empty results and
 * unaggregated queries must come back invalid; a generic workload's
 * counter named by its family name must be found; query_range must seed a
 * forecaster. Prometheus is killed by PID and its temp dir removed in the
 * teardown, also when an assertion fails. Exits 77 (skipped) when
 * /usr/bin/prometheus is not installed. Bounded: about 15 s, 60 s at most. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "forecast/forecast.h"
#include "httpc/httpc.h"
#include "httpc/testsrv.h"
#include "promql/promql.h"
#include "scrape/test-fakepod.h"
#include "util/util.h"

#define PROMETHEUS "/usr/bin/prometheus"

extern char **environ;

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    struct promql *pq;
    struct fakepod *fpods[6];
    pid_t pid;
    char dir[64];
    int port;
    uv_timer_t timer;
    bool fired;
    int results, seeds, closes;
    struct scrape_result r;
    struct promql_pods pods; /* the last answer's copy; n 0 and no part seen when none */
    bool pods_answered;
    struct promql_seed_result sr;
};

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static void on_fire(uv_timer_t *t)
{
    ((struct fx *)t->data)->fired = true;
}

static void run_for(struct fx *f, uint64_t ms)
{
    f->fired = false;
    uv_timer_start(&f->timer, on_fire, ms, 0);
    assert_true(testsrv_run_until_flag(&f->loop, &f->fired, ms + 10000));
}

/* Run the loop until *counter reaches n, for at most timeout_ms. */
static void run_until(struct fx *f, int *counter, int n, uint64_t timeout_ms)
{
    assert_true(testsrv_run_until_count(&f->loop, counter, n, timeout_ms));
}

static void on_result(const struct scrape_result *r, const struct promql_pods *pods,
                      const struct promql_notes *notes, void *arg)
{
    struct fx *f = arg;
    (void)notes;
    f->results++;
    f->r = *r;
    promql_pods_free(&f->pods);
    f->pods_answered = pods != NULL;
    if (pods) {
        f->pods = *pods;
        f->pods.v = xcalloc(pods->n + 1, sizeof(*pods->v));
        for (size_t i = 0; i < pods->n; i++) {
            f->pods.v[i] = pods->v[i];
            f->pods.v[i].name = xstrdup(pods->v[i].name);
        }
    }
}

static void on_seed(const struct promql_seed_result *r, void *arg)
{
    struct fx *f = arg;
    f->seeds++;
    f->sr = *r;
}

static void on_closed(void *arg)
{
    ((struct fx *)arg)->closes++;
}

static void wait_results(struct fx *f, int n)
{
    run_until(f, &f->results, n, 15000);
}

/* Query ns/deploy with the given templates (NULL: defaults). */
static struct scrape_result query_spec(struct fx *f, const char *ns, const char *rate_tmpl,
                                       const struct scrape_spec *spec)
{
    struct promql_target t = {.ns = ns, .deployment = "chat", .spec = spec,
                              .rate_tmpl = rate_tmpl};
    char err[160];
    int before = f->results;
    assert_int_equal(promql_get(f->pq, &t, util_now_unix_ms(), on_result, f, err, sizeof(err)),
                     0);
    wait_results(f, before + 1);
    return f->r;
}

static struct scrape_result query(struct fx *f, const char *ns, const char *rate_tmpl)
{
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    return query_spec(f, ns, rate_tmpl, &spec);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    if (access(PROMETHEUS, X_OK) != 0)
        return -1; /* main() checked already */
    struct fx *f = xcalloc(1, sizeof(*f));
    *state = f;
    snprintf(f->dir, sizeof(f->dir), "/tmp/gpuscaler-prom-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    uv_timer_init(&f->loop, &f->timer);
    f->timer.data = f;
    /* two pods of team-a/chat (10 + 30 req/s) and decoys */
    f->fpods[0] = fakepod_start(&f->loop, 31, FAKEPOD_VLLM, 10, 2, 1);
    f->fpods[1] = fakepod_start(&f->loop, 32, FAKEPOD_VLLM, 30, 3, 0);
    f->fpods[2] = fakepod_start(&f->loop, 33, FAKEPOD_VLLM, 100, 1, 0);
    f->fpods[3] = fakepod_start(&f->loop, 34, FAKEPOD_VLLM, 1000, 1, 0);
    /* team-c's pod: two containers, each its own counter on its own port */
    f->fpods[4] = fakepod_start(&f->loop, 35, FAKEPOD_VLLM, 5, 1, 0);
    f->fpods[5] = fakepod_start(&f->loop, 36, FAKEPOD_VLLM, 7, 1, 0);
    static const char *const labels[4][2] = {
        {"team-a", "chat-7d9f8b6c4-xk2p9"},
        {"team-a", "chat-7d9f8b6c4-bx4cd"},
        {"team-a", "chat-v2-5c6d7f8b9-zz9yy"},
        {"team-b", "chat-7d9f8b6c4-qq2ww"},
    };
    char path[128];
    snprintf(path, sizeof(path), "%s/prometheus.yml", f->dir);
    FILE *cfg = fopen(path, "w");
    assert_non_null(cfg);
    fprintf(cfg, "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                 "scrape_configs:\n  - job_name: vllm\n    scrape_interval: 1s\n"
                 "    scrape_timeout: 900ms\n    static_configs:\n");
    for (int i = 0; i < 4; i++)
        fprintf(cfg, "      - targets: ['%s:%d']\n        labels: {namespace: '%s', pod: '%s'}\n",
                fakepod_ip(f->fpods[i]), fakepod_port(f->fpods[i]), labels[i][0], labels[i][1]);
    /* team-b's pod scraped by a second job too, as a PodMonitor beside a ServiceMonitor
     * does: every series of it twice, differing in job */
    fprintf(cfg, "  - job_name: vllm-again\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n"
                 "    static_configs:\n      - targets: ['%s:%d']\n"
                 "        labels: {namespace: '%s', pod: '%s'}\n",
            fakepod_ip(f->fpods[3]), fakepod_port(f->fpods[3]), labels[3][0], labels[3][1]);
    /* and team-c's two containers with `instance` relabelled to the pod's name, as some
     * scrape configs do: one instance, two containers, each port its own endpoint (as a
     * PodMonitor names them) */
    fprintf(cfg, "  - job_name: vllm-containers\n    scrape_interval: 1s\n"
                 "    scrape_timeout: 900ms\n    static_configs:\n");
    for (int i = 4; i < 6; i++)
        fprintf(cfg, "      - targets: ['%s:%d']\n        labels: {namespace: team-c, pod: "
                     "chat-7d9f8b6c4-cc4cc, instance: chat-7d9f8b6c4-cc4cc, container: c%d, "
                     "endpoint: port-c%d}\n",
                fakepod_ip(f->fpods[i]), fakepod_port(f->fpods[i]), i, i);
    /* team-d's pod (the 100 req/s one) through a monitor, which names its container, and an
     * annotation-based job, which names none; team-e's through one job that finds its
     * address under two containers (a job keeping the container label, whose containers
     * declare no port): each twice at one address */
    static const char *const twice[][3] = {
        {"vllm-monitor", "team-d", "container: vllm, endpoint: http"},
        {"kubernetes-pods", "team-d", "app: chat"},
        {"vllm-ports", "team-e", "container: vllm"},
        {"vllm-ports", "team-e", "container: sidecar"},
        /* team-f's: a monitor and an annotation job, `instance` relabelled to the pod's
         * name by both */
        {"vllm-monitor-f", "team-f", "container: vllm, instance: chat-7d9f8b6c4-dd4dd"},
        {"kubernetes-pods-f", "team-f", "instance: chat-7d9f8b6c4-dd4dd"},
    };
    for (size_t i = 0; i < sizeof(twice) / sizeof(twice[0]); i++) {
        if (i == 0 || strcmp(twice[i][0], twice[i - 1][0]) != 0)
            fprintf(cfg, "  - job_name: %s\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n"
                         "    static_configs:\n", twice[i][0]);
        fprintf(cfg, "      - targets: ['%s:%d']\n        labels: {namespace: %s, pod: "
                     "chat-7d9f8b6c4-dd4dd, %s}\n",
                fakepod_ip(f->fpods[2]), fakepod_port(f->fpods[2]), twice[i][1], twice[i][2]);
    }
    fclose(cfg);

    f->port = free_port();
    char a_cfg[160], a_data[160], a_listen[64], logpath[128];
    snprintf(a_cfg, sizeof(a_cfg), "--config.file=%s", path);
    snprintf(a_data, sizeof(a_data), "--storage.tsdb.path=%s/data", f->dir);
    snprintf(a_listen, sizeof(a_listen), "--web.listen-address=127.0.0.1:%d", f->port);
    snprintf(logpath, sizeof(logpath), "%s/prometheus.log", f->dir);
    char *argv[] = {PROMETHEUS, a_cfg, a_data, a_listen, "--log.level=warn", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    assert_int_equal(posix_spawn(&f->pid, PROMETHEUS, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);

    assert_int_equal(httpc_new(&f->loop, &f->http), 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", f->port);
    struct promql_config c;
    promql_config_init(&c);
    c.url = url;
    c.window = "10s";
    c.timeout_ms = 3000;
    assert_int_equal(promql_new(&f->loop, f->http, &c, &f->pq), 0);
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (!f)
        return 0;
    if (f->pid > 0) {
        kill(f->pid, SIGTERM);
        int status;
        for (int i = 0; i < 100 && waitpid(f->pid, &status, WNOHANG) == 0; i++)
            usleep(100000);
        if (waitpid(f->pid, &status, WNOHANG) == 0) {
            kill(f->pid, SIGKILL);
            waitpid(f->pid, &status, 0);
        }
    }
    promql_close(f->pq, on_closed, f);
    httpc_close(f->http, on_closed, f);
    for (int i = 0; i < 6; i++)
        fakepod_stop(f->fpods[i]);
    uv_close((uv_handle_t *)&f->timer, NULL);
    int rc = uv_run(&f->loop, UV_RUN_DEFAULT);
    int closes = f->closes;
    int lc = uv_loop_close(&f->loop);
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    promql_pods_free(&f->pods);
    bool gone = access(f->dir, F_OK) != 0;
    xfree(f);
    return rc == 0 && closes == 2 && lc == 0 && gone ? 0 : -1;
}

static void test_against_prometheus(void **state)
{
    struct fx *f = *state;
    /* wait until Prometheus has scraped enough for rate() over 10 s */
    struct scrape_result r = {0};
    uint64_t t0 = uv_hrtime();
    for (;;) {
        run_for(f, 500);
        r = query(f, "team-a", NULL);
        if (r.valid && fabs(r.request_rate - 40) < 4 && r.p99_ms > 0 && fabs(r.busy - 5) < 0.5)
            break;
        if (uv_hrtime() - t0 > 40ull * 1000000000ull) {
            char log[160];
            snprintf(log, sizeof(log), "%s/prometheus.log", f->dir);
            fail_msg("no usable data from prometheus after 40 s: valid %d rate %g busy %g why "
                     "'%s' (see %s)",
                     r.valid, r.request_rate, r.busy, r.why, log);
        }
    }
    /* exactly the two pods (10 + 30); the decoys would add 100 or 1000 */
    assert_true(fabs(r.request_rate - 40) < 4);
    assert_true(fabs(r.p99_ms - fakepod_p99_ms()) < 0.05 * fakepod_p99_ms());
    assert_true(llabs(r.time_ms - util_now_unix_ms()) < 5000);
    /* the busy time: 2 + 3 requests in service all along (within 10 %, as the rate: rate()
     * extrapolates to the window's edges) */
    assert_true(fabs(r.busy - 5) < 0.5);
    fprintf(stderr, "prometheus: rate %.3f req/s (want 40), p99 %.1f ms (want %.1f), %.3f in "
            "service (want 5)\n",
            r.request_rate, r.p99_ms, fakepod_p99_ms(), r.busy);

    /* the per-pod answer: exactly the two pods, both in the rate, with their gauges
     * (running 2 and 3, waiting 1 and 0), sorted by name */
    assert_true(f->pods_answered);
    assert_int_equal(f->pods.n, 2);
    assert_true(f->pods.running_seen && f->pods.waiting_seen && f->pods.counted_seen);
    assert_string_equal(f->pods.v[0].name, "chat-7d9f8b6c4-bx4cd");
    assert_string_equal(f->pods.v[1].name, "chat-7d9f8b6c4-xk2p9");
    assert_true(f->pods.v[0].counted && f->pods.v[1].counted);
    assert_true(f->pods.v[0].running == 3 && f->pods.v[0].waiting == 0);
    assert_true(f->pods.v[1].running == 2 && f->pods.v[1].waiting == 1);
    /* and each one's request counter with its newest sample's time (scraped every second) */
    for (int i = 0; i < 2; i++) {
        assert_true(f->pods.v[i].requests > 0);
        assert_true(llabs(f->pods.v[i].at_ms - util_now_unix_ms()) < 5000);
        assert_int_equal(f->pods.v[i].at_min_ms, f->pods.v[i].at_ms); /* one target each */
    }
    double before_req = f->pods.v[1].requests; /* 10 req/s */
    int64_t before_at = f->pods.v[1].at_ms;
    run_for(f, 2500);
    (void)query(f, "team-a", NULL);
    assert_true(f->pods.v[1].at_ms > before_at);
    double got = (f->pods.v[1].requests - before_req) /
                 ((double)(f->pods.v[1].at_ms - before_at) / 1000.0);
    fprintf(stderr, "prometheus: a pod's newest rate %.2f req/s (want 10)\n", got);
    assert_true(fabs(got - 10) < 1.5);

    /* the samples in the 10 s window and the newest before it (once the series are older
     * than the window): the scrape interval, 1 s, whatever the ticks' spacing */
    for (uint64_t t1 = uv_hrtime();;) {
        int64_t asked = util_now_unix_ms();
        (void)query(f, "team-a", NULL);
        assert_int_equal(f->pods.n, 2);
        if (f->pods.v[0].before_ms > 0 && f->pods.v[1].before_ms > 0) {
            for (int i = 0; i < 2; i++) {
                const struct promql_pod *p = &f->pods.v[i];
                double iv = (double)(p->at_ms - p->before_ms) / p->samples;
                fprintf(stderr, "prometheus: %s: %g samples in the window, the newest before "
                        "it %lld ms before its newest: a %.0f ms interval (want 1000)\n",
                        p->name, p->samples, (long long)(p->at_ms - p->before_ms), iv);
                assert_true(p->samples >= 7 && p->samples <= 12);
                assert_true(p->before_ms <= asked + 1000 - 10000 && p->at_ms > asked - 5000);
                assert_true(fabs(iv - 1000) < 50); /* a sample more or less: 909, 1111 */
            }
            break;
        }
        if (uv_hrtime() - t1 > 20ull * 1000000000ull)
            fail_msg("no sample before the 10 s window after 20 s");
        run_for(f, 1000);
    }

    /* no address of team-a's pods is scraped twice; team-b's pod is, by two jobs: its
     * one address is told, and counted once (a plain sum reads 2,000 req/s for the 1,000
     * it serves), its counter's newest value and its gauges too */
    for (int i = 0; i < 2; i++)
        assert_int_equal(f->pods.v[i].dup, 0);
    r = query(f, "team-b", NULL);
    assert_int_equal(f->pods.n, 1);
    assert_string_equal(f->pods.v[0].name, "chat-7d9f8b6c4-qq2ww");
    assert_int_equal(f->pods.v[0].dup, 1);
    fprintf(stderr, "prometheus: team-b's pod scraped by two jobs: %d address scraped twice, "
            "rate %.0f req/s (it serves 1000), %g running (1)\n", f->pods.v[0].dup,
            r.request_rate, f->pods.v[0].running);
    assert_true(r.valid && fabs(r.request_rate - 1000) < 100);
    assert_true(f->pods.v[0].running == 1);
    struct scrape_result plain = query(f, "team-b", "sum(rate(vllm:request_success_total{"
                                                    "namespace=\"{{namespace}}\",pod=~\"{{pods}}\""
                                                    "}[{{window}}]))");
    assert_true(plain.valid && plain.request_rate > 1800); /* the plain sum: twice */
    /* team-c's two containers under one instance label are two, not a duplicate: 12 */
    r = query(f, "team-c", NULL);
    fprintf(stderr, "prometheus: team-c's two containers under one instance: rate %.1f req/s "
            "(want 12), %g running (2)\n", r.request_rate, f->pods.v[0].running);
    assert_true(r.valid && fabs(r.request_rate - 12) < 1.5);
    assert_int_equal(f->pods.n, 1);
    assert_true(f->pods.v[0].running == 2);
    assert_int_equal(f->pods.v[0].dup, 0); /* each container once: no duplicate told */
    /* team-d's and team-e's pods: 100 req/s each, told, one running (a plain sum: 200) */
    static const char *const twice_ns[] = {"team-d", "team-e"};
    for (int i = 0; i < 2; i++) {
        r = query(f, twice_ns[i], NULL);
        fprintf(stderr, "prometheus: %s's pod at one address, its targets naming other containers: "
                "rate %.1f req/s (want 100), %g running (1), %d address scraped twice\n",
                twice_ns[i], r.request_rate, f->pods.n ? f->pods.v[0].running : -1,
                f->pods.n ? f->pods.v[0].dup : -1);
        assert_true(r.valid && fabs(r.request_rate - 100) < 10);
        assert_int_equal(f->pods.n, 1);
        assert_true(f->pods.v[0].running == 1);
        assert_int_equal(f->pods.v[0].dup, 1);
    }
    /* team-f's pod: told too, though not counted once (no container named on one side,
     * and `instance` no address: which container the annotation job scraped is unknown) */
    r = query(f, "team-f", NULL);
    fprintf(stderr, "prometheus: team-f's pod under a relabelled instance, a monitor and an "
            "annotation job: rate %.1f req/s (it serves 100), %d address scraped twice\n",
            r.request_rate, f->pods.n ? f->pods.v[0].dup : -1);
    assert_int_equal(f->pods.n, 1);
    assert_int_equal(f->pods.v[0].dup, 1);
    r = query(f, "team-a", NULL);

    /* a refused requests' counter (here the pods' `length` finishes, a quarter of their
     * 40 req/s): its window rate is a query of its own, and each pod's counter is a part
     * of the per-pod answer; none without one */
    assert_true(isnan(r.rejected_rate));
    struct scrape_spec rej;
    scrape_spec_init(&rej, SCRAPE_VLLM);
    snprintf(rej.rejected_metric, sizeof(rej.rejected_metric),
             "vllm:request_success_total{finished_reason=\"length\"}");
    r = query_spec(f, "team-a", NULL, &rej);
    fprintf(stderr, "prometheus: refused %.3f req/s (want 10)\n", r.rejected_rate);
    assert_true(r.valid && fabs(r.rejected_rate - 10) < 1);
    assert_int_equal(f->pods.n, 2);
    for (int i = 0; i < 2; i++)
        assert_true(f->pods.v[i].refused > 0 &&
                    fabs(f->pods.v[i].refused - f->pods.v[i].requests / 4) <
                        0.01 * f->pods.v[i].requests);

    /* a query too long for a GET goes as a POST of the same form: the same answer (a
     * label matcher that excludes nothing, 8 bytes a repeat once encoded) */
    struct util_buf lb = {0};
    util_buf_puts(&lb, "sum(rate(vllm:request_success_total{namespace=\"{{namespace}}\",pod=~\""
                       "{{pods}}\",nonexistent_label!~\"");
    for (int i = 0; i < 700; i++)
        util_buf_puts(&lb, "/v1|");
    util_buf_puts(&lb, "x\"}[{{window}}]))");
    r = query(f, "team-a", lb.data);
    util_buf_free(&lb);
    assert_true(r.valid);
    assert_true(fabs(r.request_rate - 40) < 4);
    /* under a rate query of the workload's own, which pods it counts is not asked */
    assert_true(f->pods_answered && f->pods.n == 2 && !f->pods.counted_seen);
    assert_true(!f->pods.v[0].counted && f->pods.v[0].running == 3);

    /* a generic workload naming the counter by its family name (Prometheus
     * stores it as the exposition's vllm:request_success_total), with a
     * matcher in single quotes holding an escaped double quote: the same
     * two pods (the query for the family name alone found nothing, and one
     * copying the matcher as written was refused by Prometheus' lexer).
     * The pods also expose a gauge vllm:request_success with the labels of
     * one of the counter's series: it is not counted (a regex on __name__
     * made rate() fail, "vector cannot contain metrics with the same
     * labelset", and added the gauge's 1e6 to a pod's requests) */
    struct scrape_spec gen;
    scrape_spec_init(&gen, SCRAPE_GENERIC);
    snprintf(gen.request_metric, sizeof(gen.request_metric),
             "vllm:request_success{model_name!='no \\\"such\\\" model'}");
    r = query_spec(f, "team-a", NULL, &gen);
    assert_true(r.valid);
    assert_true(fabs(r.request_rate - 40) < 4);
    assert_true(f->pods_answered && f->pods.n == 2 && f->pods.counted_seen);
    for (int i = 0; i < 2; i++) {
        assert_true(f->pods.v[i].counted);
        assert_true(f->pods.v[i].requests > 0 && f->pods.v[i].requests < 1e6);
        assert_true(llabs(f->pods.v[i].at_ms - util_now_unix_ms()) < 5000);
    }

    r = query(f, "team-x", NULL);
    assert_false(r.valid);
    assert_string_equal(r.why, "rate: the query returned no data");
    assert_true(isnan(r.request_rate));

    r = query(f, "team-a", "rate(vllm:request_success_total{namespace=\"{{namespace}}\","
                           "pod=~\"{{pods}}\"}[{{window}}])");
    assert_false(r.valid);
    assert_non_null(strstr(r.why, "series; it must aggregate to one"));

    r = query(f, "team-a", "sum(rate(vllm:request_success_total[{{window}}]");
    assert_false(r.valid);
    assert_non_null(strstr(r.why, "rate: HTTP 400: prometheus error (bad_data)"));

    /* query_range seeds a forecaster (1 s buckets here, so a few seconds
     * of history are enough for a prediction); the range starts once the
     * rate window is full of data */
    run_for(f, 8000);
    struct forecast_config fc;
    forecast_config_init(&fc);
    fc.bucket_ms = 1000;
    fc.season_ms = 4000;
    struct forecast *fo = forecast_new(&fc);
    assert_non_null(fo);
    struct scrape_spec spec;
    scrape_spec_init(&spec, SCRAPE_VLLM);
    struct promql_target t = {.ns = "team-a", .deployment = "chat", .spec = &spec};
    char err[160];
    int64_t now = util_now_unix_ms();
    assert_int_equal(promql_seed(f->pq, &t, now, 6000, 1000, fo, on_seed, f, err, sizeof(err)),
                     0);
    run_until(f, &f->seeds, 1, 60000);
    assert_int_equal(f->sr.err, 0);
    assert_true(f->sr.observed >= 5);
    struct forecast_result fr;
    assert_int_equal(forecast_predict(fo, now, 0, &fr), 0);
    fprintf(stderr, "prometheus: seeded %zu points (%zu skipped), forecast mean %.2f\n",
            f->sr.observed, f->sr.skipped, fr.mean);
    assert_true(fabs(fr.mean - 40) < 6);
    forecast_free(fo);

    /* the seed is of arrivals, as the demand counts them: with a refused requests' counter
     * (the `length` finishes again, 10 req/s) its rate is added; a counter no pod has yet
     * (TGI makes it with the first refusal) adds nothing and loses no point */
    struct {
        const char *rejected;
        double want;
    } seeds[] = {{"vllm:request_success_total{finished_reason=\"length\"}", 50},
                 {"tgi_request_failure{err=\"overloaded\"}", 40}};
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        snprintf(spec.rejected_metric, sizeof(spec.rejected_metric), "%s", seeds[i].rejected);
        fo = forecast_new(&fc);
        assert_non_null(fo);
        now = util_now_unix_ms();
        int before = f->seeds;
        assert_int_equal(
            promql_seed(f->pq, &t, now, 6000, 1000, fo, on_seed, f, err, sizeof(err)), 0);
        run_until(f, &f->seeds, before + 1, 60000);
        assert_int_equal(f->sr.err, 0);
        assert_true(f->sr.observed >= 5);
        assert_int_equal(forecast_predict(fo, now, 0, &fr), 0);
        fprintf(stderr, "prometheus: seeded with %s: forecast mean %.2f (want %.0f)\n",
                seeds[i].rejected, fr.mean, seeds[i].want);
        assert_true(fabs(fr.mean - seeds[i].want) < 6);
        forecast_free(fo);
    }
    spec.rejected_metric[0] = '\0';

    /* a pod without the busy-time counter (the OpenMetrics fake has none): the busy time
     * becomes unknown, not the other pod's share, and the rate stays valid */
    fakepod_set_mode(f->fpods[1], FAKEPOD_VLLM_OM);
    t0 = uv_hrtime();
    do {
        run_for(f, 500);
        r = query(f, "team-a", NULL);
        assert_true(uv_hrtime() - t0 < 20ull * 1000000000ull);
    } while (r.busy >= 0);
    assert_true(r.valid && fabs(r.request_rate - 40) < 4);
    assert_true(r.busy == -1);
}

int main(void)
{
    if (access(PROMETHEUS, X_OK) != 0) {
        printf("SKIP: %s is not installed (apt-get install prometheus); the Prometheus-source "
               "test needs a real server\n",
               PROMETHEUS);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_against_prometheus, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

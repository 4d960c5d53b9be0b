/* SPDX-License-Identifier: Apache-2.0 */
/* bench-scrape: how many pods one scraper keeps up with. A child process
 * serves a realistic ~18 KB vLLM exposition on 0.0.0.0:PORT, which answers
 * for every 127.x.y.z address; the parent scrapes N fake pods (127.0.x.y,
 * default 10,000 in 100 workloads) every 5 s through httpc for a while,
 * re-declaring the targets and reading every workload's result every 15 s as
 * the controller does. Prints pods/s, late scrapes, the scraping process's
 * CPU seconds (getrusage; the server is another process) and peak RSS.
 *
 * Usage: bench-scrape [seconds=40] [pods=10000] [httpc clients=16]
 *                     [request metric, e.g. with matchers; default vLLM's]
 *        bench-scrape --serve PORT   (only the server, until SIGTERM; PORT 0
 *                                     picks a free one. Prints "listening on
 *                                     0.0.0.0:N" on stdout once it accepts
 *                                     connections, or says why it cannot and
 *                                     exits 1.)
 *
 * The server answers every request and honours "Connection: close" (it
 * closes after the answer), as uvicorn and the other engines' servers do. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "httpc/httpc.h"
#include "scrape/scrape.h"
#include "util/util.h"

#define PODS_PER_WORKLOAD 100
#define RATE_PER_POD 3.0

/* ---- the fake server (child process) ----------------------------------- */

struct srv {
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_timer_t refresh;
    uv_signal_t term;
    unsigned long accepts, requests;
    struct util_buf body;
    char head[160];
    size_t head_len;
    uint64_t t0;
};

struct sconn {
    uv_tcp_t tcp;
    struct srv *srv;
    char in[4096];
    size_t len;
    bool closing;
};

struct swrite {
    uv_write_t w;
    char *data;
};

static void hist(struct util_buf *b, const char *name, const char *help, const double *le,
                 size_t n, double count)
{
    static const char *lab = "model_name=\"meta-llama/Llama-3.1-8B-Instruct\",engine=\"0\"";
    util_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t i = 0; i < n; i++)
        util_buf_printf(b, "%s_bucket{%s,le=\"%g\"} %.1f\n", name, lab, le[i],
                        floor(count * (1.0 - exp(-(double)(i + 1) / 4.0))));
    util_buf_printf(b, "%s_bucket{%s,le=\"+Inf\"} %.1f\n%s_count{%s} %.1f\n%s_sum{%s} %.3f\n",
                    name, lab, count, name, lab, count, name, lab, count * 1.7);
    util_buf_printf(b, "# HELP %s_created %s\n# TYPE %s_created gauge\n%s_created{%s} "
                       "1.7321004e+09\n",
                    name, help, name, name, lab);
}

static void build_body(struct srv *s)
{
    static const double lat[] = {0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20,
                                 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680};
    static const double ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                  0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
                                  20, 40, 80, 160, 640, 2560};
    static const double tok[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};
    static const char *lab = "model_name=\"meta-llama/Llama-3.1-8B-Instruct\",engine=\"0\"";
    double c = RATE_PER_POD * (double)(uv_now(&s->loop) - s->t0) / 1000.0 + 1000;
    struct util_buf *b = &s->body;
    util_buf_reset(b);
    for (int g = 0; g < 3; g++)
        util_buf_printf(b, "python_gc_objects_collected_total{generation=\"%d\"} %d.0\n", g,
                        1000 * (g + 1));
    util_buf_puts(b, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                     "# TYPE process_resident_memory_bytes gauge\n"
                     "process_resident_memory_bytes 2.1409792e+09\n");
    util_buf_printf(b, "# HELP vllm:num_requests_running Number of requests in model execution "
                       "batches.\n# TYPE vllm:num_requests_running gauge\n"
                       "vllm:num_requests_running{%s} 7.0\n"
                       "# HELP vllm:num_requests_waiting Number of requests waiting.\n"
                       "# TYPE vllm:num_requests_waiting gauge\n"
                       "vllm:num_requests_waiting{%s} 2.0\n"
                       "# HELP vllm:kv_cache_usage_perc KV-cache usage.\n"
                       "# TYPE vllm:kv_cache_usage_perc gauge\n"
                       "vllm:kv_cache_usage_perc{%s} 0.61\n",
                    lab, lab, lab);
    const char *counters[] = {"vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                              "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total",
                              "vllm:prefix_cache_hits_total"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(counters); i++)
        util_buf_printf(b, "# HELP %s A counter.\n# TYPE %s counter\n%s{%s} %.1f\n", counters[i],
                        counters[i], counters[i], lab, floor(c * 300 * (double)(i + 1)));
    util_buf_printf(b, "# HELP vllm:request_success_total Count of successfully processed "
                       "requests.\n# TYPE vllm:request_success_total counter\n"
                       "vllm:request_success_total{%s,finished_reason=\"stop\"} %.1f\n"
                       "vllm:request_success_total{%s,finished_reason=\"length\"} %.1f\n"
                       "vllm:request_success_total{%s,finished_reason=\"abort\"} 0.0\n",
                    lab, floor(c * 0.8), lab, c - floor(c * 0.8), lab);
    hist(b, "vllm:time_to_first_token_seconds", "Time to first token.", ttft,
         UTIL_ARRAY_LEN(ttft), c);
    const char *lats[] = {"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                          "vllm:request_decode_time_seconds"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(lats); i++)
        hist(b, lats[i], "Request latency.", lat, UTIL_ARRAY_LEN(lat), c);
    hist(b, "vllm:request_generation_tokens", "Generation tokens.", tok, UTIL_ARRAY_LEN(tok), c);
    s->head_len = (size_t)snprintf(s->head, sizeof(s->head),
                                   "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; "
                                   "charset=utf-8\r\nContent-Length: %zu\r\n\r\n",
                                   b->len);
}

static void on_refresh(uv_timer_t *t)
{
    build_body(util_container_of(t, struct srv, refresh));
}

static void on_swritten(uv_write_t *w, int status)
{
    struct swrite *sw = util_container_of(w, struct swrite, w);
    (void)status;
    xfree(sw->data);
    xfree(sw);
}

static void on_sclosed(uv_handle_t *h)
{
    xfree(util_container_of((uv_tcp_t *)h, struct sconn, tcp));
}

static void serve(struct sconn *c)
{
    struct srv *s = c->srv;
    uv_buf_t bufs[2] = {uv_buf_init(s->head, (unsigned)s->head_len),
                        uv_buf_init(s->body.data, (unsigned)s->body.len)};
    int n = uv_try_write((uv_stream_t *)&c->tcp, bufs, 2);
    size_t total = s->head_len + s->body.len, done = n > 0 ? (size_t)n : 0;
    if (done == total)
        return;
    /* the rest goes through a queued write with its own copy */
    struct swrite *sw = xcalloc(1, sizeof(*sw));
    sw->data = xmalloc(total - done);
    size_t off = 0;
    if (done < s->head_len) {
        memcpy(sw->data, s->head + done, s->head_len - done);
        off = s->head_len - done;
        memcpy(sw->data + off, s->body.data, s->body.len);
    } else {
        memcpy(sw->data, s->body.data + (done - s->head_len), total - done);
    }
    uv_buf_t rest = uv_buf_init(sw->data, (unsigned)(total - done));
    if (uv_write(&sw->w, (uv_stream_t *)&c->tcp, &rest, 1, on_swritten) != 0) {
        xfree(sw->data);
        xfree(sw);
    }
}

static void on_salloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct sconn *c = h->data;
    (void)hint;
    *buf = uv_buf_init(c->in + c->len, (unsigned)(sizeof(c->in) - c->len - 1));
}

static void sconn_close(struct sconn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, on_sclosed);
}

static void on_sshutdown(uv_shutdown_t *req, int status)
{
    struct sconn *c = req->handle->data;
    (void)status;
    xfree(req);
    sconn_close(c);
}

static void on_sread(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct sconn *c = st->data;
    (void)buf;
    if (c->closing)
        return;
    if (n < 0 || (n == 0 && c->len == sizeof(c->in) - 1)) {
        sconn_close(c);
        return;
    }
    c->len += (size_t)n;
    c->in[c->len] = '\0';
    char *end;
    while ((end = strstr(c->in, "\r\n\r\n")) != NULL) {
        size_t used = (size_t)(end + 4 - c->in);
        *end = '\0';
        bool close_after = strcasestr(c->in, "\r\nConnection: close") != NULL;
        memmove(c->in, c->in + used, c->len - used + 1);
        c->len -= used;
        c->srv->requests++;
        serve(c);
        if (close_after) { /* after the queued answer is written */
            uv_read_stop((uv_stream_t *)&c->tcp);
            uv_shutdown_t *req = xcalloc(1, sizeof(*req));
            if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_sshutdown) != 0) {
                xfree(req);
                sconn_close(c);
            }
            return;
        }
    }
}

static void on_sconn(uv_stream_t *l, int status)
{
    struct srv *s = l->data;
    if (status < 0)
        return;
    struct sconn *c = xcalloc(1, sizeof(*c));
    c->srv = s;
    uv_tcp_init(&s->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, on_sclosed);
        return;
    }
    s->accepts++;
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_salloc, on_sread);
}

static void on_term(uv_signal_t *h, int sig)
{
    struct srv *s = util_container_of(h, struct srv, term);
    (void)sig;
    printf("fake server         %lu connections accepted, %lu requests served\n", s->accepts,
           s->requests);
    fflush(stdout);
    _exit(0);
}

/* Runs until SIGTERM; writes its port to fd (when fd >= 0). */
static void server_main(int fd, int want_port)
{
    struct srv *s = xcalloc(1, sizeof(*s));
    uv_loop_init(&s->loop);
    s->t0 = uv_now(&s->loop);
    build_body(s);
    uv_timer_init(&s->loop, &s->refresh);
    uv_timer_start(&s->refresh, on_refresh, 100, 100);
    uv_signal_init(&s->loop, &s->term);
    uv_signal_start(&s->term, on_term, SIGTERM);
    struct sockaddr_in sa;
    uv_ip4_addr("0.0.0.0", want_port, &sa);
    uv_tcp_init(&s->loop, &s->listener);
    s->listener.data = s;
    int rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&sa, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 4096, on_sconn);
    if (rc != 0) {
        fprintf(stderr, "bench-scrape: fake server cannot listen on 0.0.0.0:%d: %s\n", want_port,
                uv_strerror(rc));
        _exit(1);
    }
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len);
    int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    fprintf(stderr, "server: pid %d, 0.0.0.0:%d, exposition %zu bytes\n", (int)getpid(), port,
            s->body.len);
    if (fd < 0) {
        printf("listening on 0.0.0.0:%d\n", port);
        fflush(stdout);
    }
    if (fd >= 0) {
        if (write(fd, &port, sizeof(port)) != (ssize_t)sizeof(port))
            _exit(1);
        close(fd);
    }
    uv_run(&s->loop, UV_RUN_DEFAULT);
    _exit(0);
}

/* ---- the scraper (this process) ---------------------------------------- */

struct bench {
    uv_loop_t loop;
    struct httpc *http;
    struct scrape *s;
    uv_timer_t tick;
    int port, npods, nwl;
    char (*names)[32];
    char (*ips)[20];
    struct scrape_pod *pods;
    struct scrape_spec spec;
    uint64_t start, end;
    int ticks, invalid, closes;
    double rate_err_max;
    size_t curl_peak;      /* libcurl's heap bytes, highest seen at a tick */
    struct scrape_stats st; /* at the last tick */
};

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void declare(struct bench *b)
{
    for (int w = 0; w < b->nwl; w++) {
        char name[32];
        snprintf(name, sizeof(name), "model-%03d", w);
        int first = w * PODS_PER_WORKLOAD;
        int n = UTIL_MIN(PODS_PER_WORKLOAD, b->npods - first);
        scrape_set_targets(b->s, "bench", name, &b->spec, b->pods + first, (size_t)n);
    }
}

static void on_closed(void *arg)
{
    ((struct bench *)arg)->closes++;
}

static void on_tick(uv_timer_t *t)
{
    struct bench *b = util_container_of(t, struct bench, tick);
    uint64_t now = uv_now(&b->loop);
    struct scrape_stats st;
    scrape_stats(b->s, &st);
    b->st = st;
    if (httpc_memory_bytes() > b->curl_peak)
        b->curl_peak = httpc_memory_bytes();
    b->ticks++;
    fprintf(stderr, "t=%3.0fs ok=%llu failed=%llu late=%llu skipped=%llu delay_max=%lldms "
                    "inflight=%zu cpu=%.1fs\n",
            (double)(now - b->start) / 1000, (unsigned long long)st.scrapes_ok,
            (unsigned long long)st.scrapes_failed, (unsigned long long)st.late,
            (unsigned long long)st.skipped, (long long)st.delay_max_ms, st.inflight,
            cpu_seconds());
    if (b->ticks % 3 == 0) { /* as the controller: re-declare, then read every workload */
        declare(b);
        b->invalid = 0;
        for (int w = 0; w < b->nwl; w++) {
            char name[32];
            snprintf(name, sizeof(name), "model-%03d", w);
            struct scrape_result r;
            scrape_get(b->s, "bench", name, util_now_boot_ms(), &r);
            if (!r.valid) {
                b->invalid++;
                continue;
            }
            /* the rate covers the counted pods (the controller divides by
             * their GPUs), so compare per counted pod */
            double err = fabs(r.request_rate / r.pods_counted - RATE_PER_POD) / RATE_PER_POD;
            if (err > b->rate_err_max)
                b->rate_err_max = err;
        }
    }
    if (now >= b->end) {
        uv_timer_stop(t);
        uv_stop(&b->loop);
    }
}

int main(int argc, char **argv)
{
    /* --serve PORT: only the fake exposition server (for bench/controller.py) */
    if (argc == 3 && strcmp(argv[1], "--serve") == 0) {
        char *end;
        long port = strtol(argv[2], &end, 10);
        if (*end || port < 0 || port > 65535) {
            fprintf(stderr, "bench-scrape: --serve needs a port 0..65535, not '%s'\n", argv[2]);
            return 2;
        }
        server_main(-1, (int)port);
        return 0;
    }
    int secs = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 40;
    int npods = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 10000;
    int clients = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 0;
    const char *request_metric = argc > 4 ? argv[4] : NULL;
    struct scrape_selector sel;
    char why[300];
    if (request_metric && scrape_selector_parse(request_metric, &sel, why, sizeof(why)) != 0) {
        fprintf(stderr, "bench-scrape: %s\n", why);
        return 2;
    }
    if (secs < 10 || npods < 1 || npods > 60000 || argc > 5) {
        fprintf(stderr, "usage: bench-scrape [seconds>=10] [pods<=60000] [clients 0..64] "
                        "[request metric]\n");
        return 2;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if ((rlim_t)npods + 512 > rl.rlim_cur)
        fprintf(stderr, "warning: RLIMIT_NOFILE %llu is below pods + 512\n",
                (unsigned long long)rl.rlim_cur);
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_WARN);

    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        close(fds[0]);
        server_main(fds[1], 0);
    }
    close(fds[1]);
    struct bench *b = xcalloc(1, sizeof(*b));
    if (read(fds[0], &b->port, sizeof(b->port)) != (ssize_t)sizeof(b->port)) {
        fprintf(stderr, "server did not start\n");
        return 1;
    }
    close(fds[0]);

    b->npods = npods;
    b->nwl = (npods + PODS_PER_WORKLOAD - 1) / PODS_PER_WORKLOAD;
    b->names = xcalloc((size_t)npods, sizeof(*b->names));
    b->ips = xcalloc((size_t)npods, sizeof(*b->ips));
    b->pods = xcalloc((size_t)npods, sizeof(*b->pods));
    for (int i = 0; i < npods; i++) {
        snprintf(b->names[i], sizeof(b->names[i]), "vllm-%05d-x7k2p", i);
        snprintf(b->ips[i], sizeof(b->ips[i]), "127.0.%d.%d", 1 + i / 250, 1 + i % 250);
        b->pods[i] = (struct scrape_pod){b->names[i], b->ips[i], b->port, true, 1};
    }
    scrape_spec_init(&b->spec, SCRAPE_VLLM);
    if (request_metric)
        snprintf(b->spec.request_metric, sizeof(b->spec.request_metric), "%s", request_metric);

    uv_loop_init(&b->loop);
    httpc_new(&b->loop, &b->http);
    struct scrape_config cfg;
    scrape_config_init(&cfg);
    cfg.clients = clients;
    if (scrape_new(&b->loop, b->http, &cfg, &b->s) != 0) {
        fprintf(stderr, "bad configuration (clients 1..64)\n");
        kill(child, SIGTERM);
        return 2;
    }

    double cpu0 = cpu_seconds();
    uint64_t t0 = uv_hrtime();
    b->start = uv_now(&b->loop);
    b->end = b->start + (uint64_t)secs * 1000;
    declare(b);
    uv_timer_init(&b->loop, &b->tick);
    uv_timer_start(&b->tick, on_tick, 5000, 5000);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    double wall = (double)(uv_hrtime() - t0) / 1e9, cpu = cpu_seconds() - cpu0;

    struct scrape_stats st;
    scrape_stats(b->s, &st);
    scrape_close(b->s, on_closed, b);
    httpc_close(b->http, on_closed, b);
    uv_close((uv_handle_t *)&b->tick, NULL);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(&b->loop);

    fflush(stdout);
    kill(child, SIGTERM);
    int status;
    waitpid(child, &status, 0);
    struct rusage ru, rc_child;
    getrusage(RUSAGE_SELF, &ru);
    getrusage(RUSAGE_CHILDREN, &rc_child);
    double server_cpu = (double)rc_child.ru_utime.tv_sec + (double)rc_child.ru_utime.tv_usec / 1e6 +
                        (double)rc_child.ru_stime.tv_sec + (double)rc_child.ru_stime.tv_usec / 1e6;

    printf("pods                %d in %d workloads, interval 5 s, timeout 2 s, %d httpc clients\n",
           npods, b->nwl, cfg.clients ? cfg.clients : SCRAPE_DEFAULT_CLIENTS);
    printf("run                 %.1f s wall\n", wall);
    printf("scrapes             %llu ok, %llu failed, %.0f pods/s (target %.0f)\n",
           (unsigned long long)st.scrapes_ok, (unsigned long long)st.scrapes_failed,
           (double)st.scrapes_ok / wall, npods / 5.0);
    printf("bytes               %.1f MB (%.1f MB/s)\n", (double)st.bytes / 1e6,
           (double)st.bytes / 1e6 / wall);
    printf("late                %llu scrapes > 1 interval late, %llu slots skipped, worst start "
           "delay %lld ms\n",
           (unsigned long long)st.late, (unsigned long long)st.skipped,
           (long long)st.delay_max_ms);
    printf("in flight           peak %zu, limit %zu, deferred %llu times, mean scrape %.1f ms\n",
           st.inflight_peak, b->st.inflight_limit, (unsigned long long)st.deferred,
           b->st.duration_ms);
    printf("cpu (scraper)       %.2f s = %.2f cores\n", cpu, cpu / wall);
    printf("cpu (fake server)   %.2f s (separate process, not counted)\n", server_cpu);
    printf("peak RSS (scraper)  %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
    printf("memory              scrape state %.1f MiB (%.0f B per pod), libcurl %.1f MiB (peak)\n",
           (double)b->st.memory_bytes / 1048576.0, (double)b->st.memory_bytes / npods,
           (double)b->curl_peak / 1048576.0);
    printf("results             %d of %d workloads invalid at the last check, worst error of a "
           "valid per-pod rate %.2f%%\n",
           b->invalid, b->nwl, b->rate_err_max * 100);
    printf("closed              %d of 2 close callbacks, uv_loop_close %d\n", b->closes, rc);
    xfree(b->names);
    xfree(b->ips);
    xfree(b->pods);
    xfree(b);
    return rc == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* bench-httpd: serves a tiny fixed JSON response over TLS (self-signed) on
 * 127.0.0.1 from one loop thread pinned to one CPU, drives it with wrk
 * (keep-alive, one wrk thread, pinned to another CPU when there is one) and
 * prints requests/s and the p99 latency.
 *
 *   bench-httpd [-d seconds] [-c connections] [-t wrk-threads] [--wrk-cpus list]
 *               [--delay-ms D] [--plain] [--wrk path]
 *
 * wrk is closed-loop (each connection sends its next request as soon as the
 * previous answer arrives), so by default it measures latency at saturation.
 * --delay-ms D makes every connection pause D ms between requests (a wrk Lua
 * delay() hook), which fixes the offered rate near connections * 1000 / D
 * requests/s and measures latency at that load instead.
 *
 * Target: >= 20000 req/s with p99 < 2 ms on one server core. */
#include "httpd/httpd.h"
#include "util/util.h"

#include <sched.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct bench {
    uv_loop_t loop;
    struct httpd *srv;
    uv_process_t proc;
    uv_pipe_t out;
    struct util_buf wrk_out;
    long requests;
    int exit_status;
    int handles;
};

static const char body[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\"}";

static void handler(struct httpd_request *req, void *arg)
{
    struct bench *b = arg;
    static const struct httpd_header h[] = {{"Content-Type", "application/json"}};
    b->requests++;
    httpd_respond(req, 200, h, 1, body, sizeof(body) - 1);
}

static void on_alloc(uv_handle_t *h, size_t s, uv_buf_t *buf)
{
    static char mem[65536];
    *buf = uv_buf_init(mem, sizeof(mem));
}

static void on_closed(uv_handle_t *h)
{
}

static void on_out(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct bench *b = s->data;
    if (n > 0) {
        util_buf_append(&b->wrk_out, buf->base, (size_t)n);
        return;
    }
    if (n < 0)
        uv_close((uv_handle_t *)s, on_closed);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    struct bench *b = p->data;
    b->exit_status = (int)status;
    uv_close((uv_handle_t *)p, on_closed);
    httpd_close(b->srv, NULL, NULL);
}

static double parse_latency_ms(const char *s)
{
    double v = strtod(s, NULL);
    const char *u = s;
    while (*u && ((*u >= '0' && *u <= '9') || *u == '.'))
        u++;
    if (strncmp(u, "us", 2) == 0)
        return v / 1000.0;
    if (strncmp(u, "ms", 2) == 0)
        return v;
    if (*u == 's')
        return v * 1000.0;
    return v;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
}

int main(int argc, char **argv)
{
    int seconds = 10, conns = 16, threads = 1;
    const char *wrk_cpus = NULL;
    int delay_ms = 0;
    bool tls = true;
    const char *wrk = "wrk";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
            seconds = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
            conns = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            threads = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--wrk-cpus") == 0 && i + 1 < argc)
            wrk_cpus = argv[++i];
        else if (strcmp(argv[i], "--delay-ms") == 0 && i + 1 < argc)
            delay_ms = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--plain") == 0)
            tls = false;
        else if (strcmp(argv[i], "--wrk") == 0 && i + 1 < argc)
            wrk = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [-d seconds] [-c connections] [-t wrk-threads] "
                    "[--wrk-cpus list] [--delay-ms D] [--plain] [--wrk path]\n",
                    argv[0]);
            return 2;
        }
    }
    util_log_setup(UTIL_LOG_LOGFMT, UTIL_LOG_ERROR);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    pin(0);

    struct bench b = {0};
    uv_loop_init(&b.loop);
    struct httpd_config cfg = {.host = "127.0.0.1", .tls = tls, .max_connections = 1024};
    if (httpd_new(&b.loop, &cfg, handler, &b, &b.srv) != 0) {
        fprintf(stderr, "cannot start server\n");
        return 1;
    }
    char url[128], dur[32], cs[32], ts[32], cpu[32];
    snprintf(url, sizeof(url), "%s://127.0.0.1:%d/apis/external.metrics.k8s.io/v1beta1",
             tls ? "https" : "http", httpd_port(b.srv));
    snprintf(dur, sizeof(dur), "%ds", seconds);
    snprintf(cs, sizeof(cs), "%d", conns);
    snprintf(ts, sizeof(ts), "-t%d", threads);
    if (wrk_cpus)
        snprintf(cpu, sizeof(cpu), "%s", wrk_cpus);
    else
        snprintf(cpu, sizeof(cpu), "%d", ncpu > 1 ? 1 : 0);
    char script[64] = "";
    if (delay_ms > 0) {
        snprintf(script, sizeof(script), "/tmp/bench-httpd-%d.lua", (int)getpid());
        FILE *f = fopen(script, "w");
        if (!f) {
            perror(script);
            return 1;
        }
        fprintf(f, "function delay()\n  return %d\nend\n", delay_ms);
        fclose(f);
    }
    char *args[] = {"taskset", "-c", cpu, (char *)wrk, ts, "-c", cs, "-d", dur, "--latency",
                    url, delay_ms > 0 ? "-s" : NULL, script, NULL};

    uv_pipe_init(&b.loop, &b.out, 0);
    b.out.data = &b;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&b.out},
        {.flags = UV_INHERIT_FD, .data.fd = 2},
    };
    uv_process_options_t po = {.file = "taskset", .args = args, .exit_cb = on_exit_cb,
                               .stdio = stdio, .stdio_count = 3};
    b.proc.data = &b;
    int rc = uv_spawn(&b.loop, &b.proc, &po);
    if (rc != 0) {
        fprintf(stderr, "cannot run wrk: %s (apt-get install wrk)\n", uv_strerror(rc));
        return 1;
    }
    uv_read_start((uv_stream_t *)&b.out, on_alloc, on_out);
    printf("server: %s on 127.0.0.1:%d, pinned to CPU 0; wrk: %d thread(s), %d connections, "
           "%d s, CPU %s\n",
           tls ? "TLS" : "plain", httpd_port(b.srv), threads, conns, seconds, cpu);
    fflush(stdout);
    if (delay_ms > 0)
        printf("offered load: ~%d requests/s (%d connections, %d ms pause)\n",
               conns * 1000 / delay_ms, conns, delay_ms);
    uint64_t t0 = uv_hrtime();
    uv_run(&b.loop, UV_RUN_DEFAULT);
    double wall = (double)(uv_hrtime() - t0) / 1e9;
    int closed = uv_loop_close(&b.loop);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* the server only: wrk is a child */
    double cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;

    const char *out = b.wrk_out.data ? b.wrk_out.data : "";
    fputs(out, stdout);
    const char *rps = strstr(out, "Requests/sec:");
    const char *p99 = strstr(out, " 99%");
    double r = rps ? strtod(rps + 13, NULL) : 0;
    double l = p99 ? parse_latency_ms(p99 + 4 + strspn(p99 + 4, " ")) : -1;
    printf("\nRESULT requests_per_sec=%.0f p99_ms=%.3f served=%ld server_cpu=%.0f%% "
           "server_us_per_req=%.1f target=%s loop_closed=%d\n",
           r, l, b.requests, wall > 0 ? 100.0 * cpu_s / wall : 0,
           b.requests ? 1e6 * cpu_s / (double)b.requests : 0,
           (r >= 20000 && l >= 0 && l < 2.0) ? "met" : "missed", closed == 0);
    util_buf_free(&b.wrk_out);
    if (script[0])
        unlink(script);
    return b.exit_status == 0 ? 0 : 1;
}

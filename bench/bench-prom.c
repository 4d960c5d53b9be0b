/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark for pkg/prom: generates a large real-world-shaped exposition
 * (vLLM-like engine families with many-bucket histograms, node-exporter-like
 * host families, 3-6 labels per series, a few MB), then parses it repeatedly
 * in 64 KiB chunks and prints MB/s and samples/s for the full parse
 * (callback on every sample) and for the filtered fast path (three wanted
 * families). Prints figures only; asserts nothing about time.
 *
 * Usage: bench-prom [target-MB] [iterations] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prom/prom.h"
#include "util/util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const double lat_buckets[] = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                     5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                     60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
static const double ttft_buckets[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                      0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                      20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};

static void histogram(struct util_buf *b, const char *name, const char *labels, const double *le,
                      size_t n, unsigned seed)
{
    util_buf_printf(b, "# HELP %s Histogram of %s.\n# TYPE %s histogram\n", name, name, name);
    double cum = 0;
    for (size_t i = 0; i <= n; i++) {
        cum += (double)((seed * 2654435761u + (unsigned)i * 40503u) % 97u);
        if (i < n)
            util_buf_printf(b, "%s_bucket{%s,le=\"%g\"} %.1f\n", name, labels, le[i], cum);
        else
            util_buf_printf(b, "%s_bucket{%s,le=\"+Inf\"} %.1f\n", name, labels, cum);
    }
    util_buf_printf(b, "%s_count{%s} %.1f\n", name, labels, cum);
    util_buf_printf(b, "%s_sum{%s} %.6f\n", name, labels, cum * 1.7371);
    util_buf_printf(b, "# HELP %s_created Histogram of %s.\n# TYPE %s_created gauge\n", name, name,
                    name);
    util_buf_printf(b, "%s_created{%s} 1.7523512345678902e+09\n", name, labels);
}

static void vllm_block(struct util_buf *b, unsigned k)
{
    char labels[256];
    snprintf(labels, sizeof(labels),
             "engine=\"%u\",model_name=\"org-%u/Llama-3.1-%uB-Instruct\",namespace=\"serving-%u\","
             "pod=\"vllm-%08x-%05u\"",
             k % 8, k % 5, 8 + k % 3 * 62, k % 4, k * 2654435761u, k);
    static const char *const gauges[] = {"vllm:num_requests_running", "vllm:num_requests_waiting",
                                         "vllm:kv_cache_usage_perc"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(gauges); i++)
        util_buf_printf(b, "# HELP %s Gauge.\n# TYPE %s gauge\n%s{%s} %u.0\n", gauges[i], gauges[i],
                        gauges[i], labels, (k * 7 + (unsigned)i) % 64);
    static const char *const counters[] = {"vllm:prompt_tokens", "vllm:generation_tokens",
                                           "vllm:num_preemptions", "vllm:prefix_cache_queries",
                                           "vllm:prefix_cache_hits"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(counters); i++)
        util_buf_printf(b, "# HELP %s_total Counter.\n# TYPE %s_total counter\n%s_total{%s} %.1f\n",
                        counters[i], counters[i], counters[i], labels,
                        (double)(k * 1000003u % 9999991u) * 1.5);
    util_buf_printf(b, "# HELP vllm:request_success_total Count.\n"
                       "# TYPE vllm:request_success_total counter\n");
    static const char *const reasons[] = {"stop", "length", "abort"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(reasons); i++)
        util_buf_printf(b, "vllm:request_success_total{%s,finished_reason=\"%s\"} %u.0\n", labels,
                        reasons[i], k * 31u + (unsigned)i);
    static const char *const lat[] = {
        "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
        "vllm:request_inference_time_seconds", "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(lat); i++)
        histogram(b, lat[i], labels, lat_buckets, UTIL_ARRAY_LEN(lat_buckets), k + (unsigned)i);
    histogram(b, "vllm:time_to_first_token_seconds", labels, ttft_buckets,
              UTIL_ARRAY_LEN(ttft_buckets), k + 11);
    histogram(b, "vllm:inter_token_latency_seconds", labels, ttft_buckets,
              UTIL_ARRAY_LEN(ttft_buckets), k + 13);
}

static void node_block(struct util_buf *b, unsigned host)
{
    util_buf_puts(b, "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n"
                     "# TYPE node_cpu_seconds_total counter\n");
    static const char *const modes[] = {"idle",    "iowait", "irq",    "nice",
                                        "softirq", "steal",  "system", "user"};
    for (unsigned cpu = 0; cpu < 64; cpu++)
        for (size_t m = 0; m < UTIL_ARRAY_LEN(modes); m++)
            util_buf_printf(b,
                            "node_cpu_seconds_total{cpu=\"%u\",instance=\"node-%u:9100\","
                            "job=\"node\",mode=\"%s\"} %.2f\n",
                            cpu, host, modes[m], (double)(cpu * 7919 + m * 104729) / 3.0);
    static const char *const net[] = {"receive_bytes", "receive_packets", "receive_errs",
                                      "receive_drop",  "transmit_bytes",  "transmit_packets",
                                      "transmit_errs", "transmit_drop"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(net); i++) {
        util_buf_printf(b,
                        "# HELP node_network_%s_total Network stat.\n"
                        "# TYPE node_network_%s_total counter\n",
                        net[i], net[i]);
        for (unsigned d = 0; d < 16; d++)
            util_buf_printf(b,
                            "node_network_%s_total{device=\"veth%04x\",instance=\"node-%u:9100\","
                            "job=\"node\"} %.6e\n",
                            net[i], d * 4099u + host, host, (double)(d + 1) * 1.234567e9);
    }
    static const char *const fs[] = {"avail_bytes", "free_bytes", "size_bytes",
                                     "files",       "files_free", "readonly"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(fs); i++) {
        util_buf_printf(b,
                        "# HELP node_filesystem_%s Filesystem stat.\n"
                        "# TYPE node_filesystem_%s gauge\n",
                        fs[i], fs[i]);
        for (unsigned d = 0; d < 20; d++)
            util_buf_printf(b,
                            "node_filesystem_%s{device=\"/dev/nvme%un1p%u\",fstype=\"ext4\","
                            "instance=\"node-%u:9100\",job=\"node\",mountpoint=\"/var/lib/"
                            "kubelet/pods/%08x/volumes\"} %u\n",
                            fs[i], d / 4, d % 4, host, d * 2246822519u, d * 1048576u);
    }
    util_buf_puts(b, "# HELP go_gc_duration_seconds A summary of the GC pause durations.\n"
                     "# TYPE go_gc_duration_seconds summary\n");
    static const char *const q[] = {"0", "0.25", "0.5", "0.75", "1"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(q); i++)
        util_buf_printf(b,
                        "go_gc_duration_seconds{instance=\"node-%u:9100\",job=\"node\","
                        "quantile=\"%s\"} %g\n",
                        host, q[i], 1.9e-05 * (double)(i + 1));
    util_buf_printf(b,
                    "go_gc_duration_seconds_sum{instance=\"node-%u:9100\",job=\"node\"} "
                    "0.049164224\n"
                    "go_gc_duration_seconds_count{instance=\"node-%u:9100\",job=\"node\"} "
                    "3512\n",
                    host, host);
}

struct sink {
    double sum;
    size_t samples;
};

static int on_sample(const struct prom_sample *s, void *arg)
{
    struct sink *k = arg;
    k->sum += s->value + (double)s->nlabels;
    k->samples++;
    return 0;
}

static double run(const struct util_buf *b, int iters, bool filtered, size_t *samples)
{
    struct sink k = {0};
    struct prom_parser_opts o = {.max_total = b->len + 1};
    struct prom_parser *p = prom_parser_new(&o, on_sample, &k);
    if (filtered) {
        prom_parser_want(p, "vllm:num_requests_running", PROM_MATCH_NAME);
        prom_parser_want(p, "vllm:num_requests_waiting", PROM_MATCH_NAME);
        prom_parser_want(p, "vllm:e2e_request_latency_seconds", PROM_MATCH_NAME);
    }
    double t0 = now_s();
    for (int it = 0; it < iters; it++) {
        prom_parser_reset(p);
        struct prom_error err;
        for (size_t off = 0; off < b->len; off += 65536) {
            size_t n = UTIL_MIN((size_t)65536, b->len - off);
            if (prom_parser_feed(p, b->data + off, n, &err) != 0) {
                fprintf(stderr, "parse error line %zu: %s\n", err.line, err.msg);
                exit(1);
            }
        }
        if (prom_parser_finish(p, &err) != 0) {
            fprintf(stderr, "parse error line %zu: %s\n", err.line, err.msg);
            exit(1);
        }
    }
    double dt = now_s() - t0;
    prom_parser_free(p);
    *samples = k.samples / (size_t)iters;
    if (k.sum == -1.0) /* keep the sum observable */
        printf("impossible\n");
    return dt;
}

int main(int argc, char **argv)
{
    double target_mb = argc > 1 ? strtod(argv[1], NULL) : 4.0;
    int iters = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 20;
    if (target_mb <= 0 || iters <= 0) {
        fprintf(stderr, "usage: bench-prom [target-MB] [iterations]\n");
        return 2;
    }
    struct util_buf b = {0};
    unsigned k = 0, host = 0;
    while ((double)b.len < target_mb * 1e6) {
        for (int i = 0; i < 16; i++)
            vllm_block(&b, k++);
        node_block(&b, host++);
    }
    size_t lines = 0;
    for (size_t i = 0; i < b.len; i++)
        lines += b.data[i] == '\n';
    printf("exposition: %.2f MB, %zu lines, %u vLLM engine blocks, %u node blocks\n",
           (double)b.len / 1e6, lines, k, host);

    size_t n_full = 0, n_filt = 0;
    run(&b, 1, false, &n_full); /* warm-up */
    double t_full = run(&b, iters, false, &n_full);
    double t_filt = run(&b, iters, true, &n_filt);
    double mb = (double)b.len * iters / 1e6;
    printf("full parse:     %8.1f MB/s  %10.0f samples/s  (%zu samples per pass, %d passes, "
           "%.3f s)\n",
           mb / t_full, (double)n_full * iters / t_full, n_full, iters, t_full);
    printf("filtered parse: %8.1f MB/s  %10.0f lines/s    (%zu wanted samples per pass, %d "
           "passes, %.3f s)\n",
           mb / t_filt, (double)lines * iters / t_filt, n_filt, iters, t_filt);
    util_buf_free(&b);
    return 0;
}

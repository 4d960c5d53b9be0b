/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuscaler plan`: wires flags, the plan file, the histories (trace files
 * or a Prometheus range query) to the planner (pkg/plan) and writes its
 * reports. Owns no model and no policy.
 *
 * Precedence: the planner's defaults, then the bundled demo's when no
 * history is named anywhere, then the --config file (its top level, then a
 * deployments entry), then flags. Every key goes through the one parser of
 * its module; an unknown key or a bad value is a usage error (exit 2)
 * naming the flag or file:line, and so are the planner's own refusals (too
 * little history, a horizon beyond it), which name the key's origin. A
 * Prometheus that cannot be reached is exit 1. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "cmd.h"
#include "conf/conf.h"
#include "httpc/httpc.h"
#include "flags.h"
#include "outfile.h"
#include "plan/plan.h"
#include "promql/promql.h"
#include "trace/trace.h"
#include "util/util.h"

#define PROG "gpuscaler plan"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuscaler plan [--trace FILE.csv | --prometheus URL --query Q [--since 30d]]\n"
            "                      [--config FILE.yaml] [--horizon 30d] [--growth 1.0,1.5,2.0]\n"
            "                      [--price-on-demand P] [--price-reserved P|N%%] [--price-spot "
            "P|N%%]\n"
            "                      [--backtest] [--json FILE|-] [--report FILE.svg] "
            "[--<key> VALUE ...]\n"
            "\n"
            "Forecasts a Deployment's demand from its history (seasonality and trend),\n"
            "replays the policy that will run on the forecast under growth scenarios, and\n"
            "prints GPU-hours, peaks, the always-on baseline, SLA minutes, costs and the\n"
            "reserved commitment that minimises the expected cost. Without a history it plans\n"
            "the bundled demo (a week of ServeGen LLM traffic). --config plans several\n"
            "Deployments (a `deployments:` list) and their total. --backtest plans from the\n"
            "history minus its last horizon and compares with the held-out part.\n"
            "\nPlan keys:\n");
    for (size_t i = 0; i < plan_config_key_count(); i++)
        fprintf(f, "  %-20s %s\n", plan_config_key_name(i), plan_config_key_help(i));
    fprintf(f,
            "Deployment keys:\n"
            "  %-20s %s\n  %-20s %s\n  %-20s %s\n  %-20s %s\n  %-20s %s\n  %-20s %s\n"
            "  %-20s %s\n  %-20s %s\n",
            "trace", "the history: a trace CSV (t_seconds,requests), may be gzipped",
            "prometheus, query", "or a Prometheus URL and a PromQL request rate (req/s)",
            "since, query-step", "how much history to ask for (30d) and its step (1m)",
            "prometheus-header", "'Name: value' on every query, e.g. 'X-Scope-OrgID: team-a'",
            "prometheus-*-file",
            "ca-file, cert-file, key-file, token-file, password-file (with\n"
            "                       prometheus-username): as the daemon's prometheus.* keys",
            "policy", "the policy that will run: predictive (default), reactive or hpa",
            "name", "the Deployment's name (in a deployments: entry)",
            "scale", "multiply the history's counts by this");
    fprintf(f, "and every policy and simulator key of `gpuscaler simulate --help`:\n ");
    size_t col = 1;
    for (size_t i = 0; i < policy_config_key_count() + sim_config_key_count(); i++) {
        const char *k = i < policy_config_key_count()
                            ? policy_config_key_name(i)
                            : sim_config_key_name(i - policy_config_key_count());
        if (!plan_workload_key(k) || strcmp(k, "policy") == 0 || strcmp(k, "scale") == 0)
            continue;
        if (col + strlen(k) + 2 > 78) {
            fprintf(f, "\n ");
            col = 1;
        }
        fprintf(f, " %s", k);
        col += strlen(k) + 1;
    }
    fprintf(f, "\n");
}

static bool is_file_flag(const char *k)
{
    return strcmp(k, "config") == 0 || strcmp(k, "json") == 0 || strcmp(k, "report") == 0;
}

static bool is_plan_key(const char *k)
{
    for (size_t i = 0; i < plan_config_key_count(); i++)
        if (strcmp(plan_config_key_name(i), k) == 0)
            return true;
    return false;
}

static bool is_backtest(const char *k)
{
    return strcmp(k, "backtest") == 0;
}

/* A flag this command knows: --backtest, the file flags, the plan's keys, a
 * Deployment's keys, and the simulator's (the replay window's: refused later
 * with the reason). */
static bool known_flag(const char *k)
{
    if (is_backtest(k) || is_file_flag(k) || is_plan_key(k) || plan_workload_key(k))
        return true;
    for (size_t i = 0; i < sim_config_key_count(); i++)
        if (strcmp(sim_config_key_name(i), k) == 0)
            return true;
    return false;
}

static bool is_source_key(const char *k)
{
    return strcmp(k, "trace") == 0 || strcmp(k, "query") == 0 || strcmp(k, "name") == 0;
}

static char *read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct util_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        util_buf_append(&b, chunk, n);
        if (b.len > CONF_MAX_BYTES) {
            snprintf(err, errlen, "%s: larger than %zu bytes", path, (size_t)CONF_MAX_BYTES);
            util_buf_free(&b);
            fclose(f);
            return NULL;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: read error", path);
        util_buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return util_buf_steal(&b);
}

/* ---- Prometheus ----------------------------------------------------------- */

struct fetch {
    uv_loop_t *loop;
    bool done;
    int err;
    char why[200];
    struct promql_series s;
};

static void on_range(struct promql_range_result *r, void *arg)
{
    struct fetch *f = arg;
    f->done = true;
    /* Stop the loop, not just set a flag: this may run from a timer, and a
     * loop that checks a flag between uv_run(UV_RUN_ONCE) calls runs due
     * timers before it polls, then waits in the poll for I/O that may never come. */
    uv_stop(f->loop);
    f->err = r->err;
    snprintf(f->why, sizeof(f->why), "%s", r->why);
    f->s = r->series;
    r->series.points = NULL;
    r->series.npoints = 0;
}

static void on_closed(void *arg)
{
    struct httpc **h = arg;
    httpc_close(*h, NULL, NULL);
    *h = NULL;
}

/* The client config of w's prometheus-* keys; hs holds the headers (their
 * strings are w's). */
static void prom_config(const struct plan_workload *w, struct promql_config *pc,
                        struct promql_header *hs)
{
    promql_config_init(pc);
    pc->url = w->prometheus;
    pc->ca_file = w->prom_ca_file;
    pc->cert_file = w->prom_cert_file;
    pc->key_file = w->prom_key_file;
    pc->token_file = w->prom_token_file;
    pc->username = w->prom_username;
    pc->password_file = w->prom_password_file;
    for (size_t i = 0; i < w->n_prom_headers; i++)
        hs[i] = (struct promql_header){w->prom_header_names[i], w->prom_header_values[i]};
    pc->headers = hs;
    pc->n_headers = w->n_prom_headers;
}

/* The request rate over the last `since` as a trace of query-step buckets
 * (a missing point is a missing bucket). Exit code (1 or 2) or 0. */
static int fetch_prometheus(const struct plan_workload *w, struct trace **out)
{
    uv_loop_t loop;
    struct httpc *h = NULL;
    struct promql *p = NULL;
    struct fetch f = {.loop = &loop};
    char err[240];
    int code = 1;
    uv_loop_init(&loop);
    int rc = httpc_new(&loop, &h);
    struct promql_config pc;
    struct promql_header hs[UTIL_ARRAY_LEN(w->prom_header_names)];
    prom_config(w, &pc, hs);
    pc.timeout_ms = 60000;
    if (rc == 0 && (rc = promql_new(&loop, h, &pc, &p)) != 0)
        fprintf(stderr, PROG ": --prometheus %s: %s\n", w->prometheus, strerror(-rc));
    int64_t step = w->query_step_ms;
    int64_t end = util_now_unix_ms() / step * step, start = end - w->since_ms;
    if (rc == 0) {
        rc = promql_range(p, w->query, start, end, step, on_range, &f, err, sizeof(err));
        if (rc != 0) {
            fprintf(stderr, PROG ": --query: %s\n", err);
            code = 2;
        }
    }
    while (rc == 0 && !f.done)
        uv_run(&loop, UV_RUN_DEFAULT);
    if (p)
        promql_close(p, on_closed, &h);
    else if (h)
        httpc_close(h, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    if (rc != 0)
        goto out;
    if (f.err != 0) {
        /* the server answered, but not with one series: the query is wrong */
        bool input = f.err == -EREMOTEIO || f.err == -ENODATA || f.err == -ERANGE ||
                     f.err == -EBADMSG || f.err == -E2BIG ||
                     (f.err == -EPROTO && strncmp(f.why, "HTTP 4", 6) == 0);
        fprintf(stderr, PROG ": --query on %s: %s\n", w->prometheus, f.why);
        code = input ? 2 : 1;
        goto out;
    }
    /* only the points of the range asked for: a server's stray times (one at
     * t=1, another in the year 5138) sized the trace over millennia */
    size_t first = 0, last = f.s.npoints;
    while (first < f.s.npoints && f.s.points[first].t_ms < start)
        first++;
    while (last > first && f.s.points[last - 1].t_ms > end)
        last--;
    if (first == last) {
        fprintf(stderr, PROG ": --query on %s: no point within the range asked for\n",
                w->prometheus);
        code = 1;
        goto out;
    }
    int64_t t_first = f.s.points[first].t_ms;
    int64_t t_last = f.s.points[last - 1].t_ms;
    struct trace *tr = xcalloc(1, sizeof(*tr));
    tr->dt_ms = step;
    tr->t0_ms = t_first - step; /* the rate at t covers the step before it */
    tr->n = (size_t)((t_last - t_first) / step + 1);
    tr->requests = xmalloc(tr->n * sizeof(double));
    for (size_t i = 0; i < tr->n; i++)
        tr->requests[i] = NAN;
    for (size_t i = first; i < last; i++) {
        int64_t k = (f.s.points[i].t_ms - t_first) / step;
        double v = f.s.points[i].v;
        if (k >= 0 && (size_t)k < tr->n && isfinite(v) && v >= 0)
            tr->requests[k] = v * (double)step / 1000.0;
    }
    *out = tr;
    code = 0;
out:
    promql_series_free(&f.s);
    return code;
}

/* ---- the command ---------------------------------------------------------- */

/* Where each plan-wide key's value came from, for the planner's refusals. */
struct origins {
    char *where[32];
};

static void origin_set(struct origins *o, const char *key, const char *where)
{
    for (size_t i = 0; i < plan_config_key_count() && i < 32; i++)
        if (strcmp(plan_config_key_name(i), key) == 0) {
            xfree(o->where[i]);
            o->where[i] = xstrdup(where);
        }
}

/* Print a planner error, naming the key's origin when it starts with one. */
static void plan_error(const struct origins *o, const char *who, const char *msg)
{
    for (size_t i = 0; i < plan_config_key_count() && i < 32; i++) {
        const char *k = plan_config_key_name(i);
        size_t kl = strlen(k);
        if (strncmp(msg, k, kl) == 0 && msg[kl] == ':') {
            char def[64];
            snprintf(def, sizeof(def), "--%s (default)", k);
            fprintf(stderr, PROG ": %s%s%s: %s\n", who, who[0] ? ": " : "",
                    o->where[i] ? o->where[i] : def, cmd_strip_key(k, msg));
            return;
        }
    }
    fprintf(stderr, PROG ": %s%s%s\n", who, who[0] ? ": " : "", msg);
}

/* The line of a scope's last setting of key, or 0. */
static int scope_line(const struct plan_scope *s, const char *key)
{
    for (size_t i = s->n; i-- > 0;)
        if (strcmp(s->v[i].key, key) == 0)
            return s->v[i].line;
    return 0;
}

/* A Deployment's refusal by sim_config_validate ("min-replicas: 5 is above
 * max-replicas 2"), named by where its key was set last: a flag, else the
 * Deployment's entry or the top level of the file; as it is for a default. */
static void workload_error(const char *who, const struct cmd_settings *flags,
                           const struct plan_file *file, const struct plan_scope *entry,
                           const char *config, const char *msg)
{
    const char *sep = who[0] ? ": " : "";
    const char *colon = strchr(msg, ':');
    if (colon && colon > msg && (size_t)(colon - msg) < 64) {
        char key[64];
        memcpy(key, msg, (size_t)(colon - msg));
        key[colon - msg] = '\0';
        const struct cmd_setting *st = cmd_settings_last(flags, key);
        int line = entry ? scope_line(entry, key) : 0;
        if (!line)
            line = scope_line(&file->top, key);
        if (st) {
            fprintf(stderr, PROG ": %s%s%s: %s\n", who, sep, st->where, cmd_strip_key(key, msg));
            return;
        }
        if (line) {
            fprintf(stderr, PROG ": %s%s%s:%d: %s\n", who, sep, config, line, msg);
            return;
        }
    }
    fprintf(stderr, PROG ": %s%s%s\n", who, sep, msg);
}

static int apply(struct plan_workload *w, const struct plan_scope *s, const char *base)
{
    char err[240];
    for (size_t i = 0; i < s->n; i++) {
        const struct plan_setting *st = &s->v[i];
        if (!plan_workload_key(st->key))
            continue;
        const char *v = st->value;
        char *path = NULL;
        size_t kl = strlen(st->key);
        bool is_path = strcmp(st->key, "trace") == 0 ||
                       (strncmp(st->key, "prometheus-", 11) == 0 && kl > 5 &&
                        strcmp(st->key + kl - 5, "-file") == 0);
        if (is_path && v[0] != '/' && base) {
            const char *slash = strrchr(base, '/');
            if (slash)
                v = path = xasprintf("%.*s/%s", (int)(slash - base), base, st->value);
        }
        if (strcmp(st->key, "trace") == 0) {
            xfree(w->query);
            w->query = NULL;
        } else if (strcmp(st->key, "query") == 0) {
            xfree(w->trace);
            w->trace = NULL;
        }
        int rc = plan_workload_set(w, st->key, v, err, sizeof(err));
        xfree(path);
        if (rc != 0) { /* checked by the parser already */
            fprintf(stderr, PROG ": %s:%d: %s\n", base, st->line, err);
            return -1;
        }
    }
    return 0;
}

int cmd_plan(int argc, char **argv)
{
    struct cmd_settings flags = {0};
    struct plan_file file = {0};
    struct origins orig = {0};
    char *config = NULL;
    struct outfile outs[] = {{PROG, "--report", NULL, -1, false, NULL},
                             {PROG, "--json", NULL, -1, false, NULL}};
    struct outfile *report = &outs[0], *json = &outs[1];
    bool backtest = false, json_stdout = false;
    struct plan_config pc;
    struct plan_workload *ws = NULL;
    struct trace **hist = NULL;
    struct plan_result **res = NULL, *total = NULL;
    struct plan_backtest *bts = NULL;
    struct plan_report_info *infos = NULL;
    const struct plan_workload **wptr = NULL;
    size_t n = 0;
    struct util_buf out = {0};
    char err[512];
    int code = 2;

    for (int i = 1; i < argc; i++) {
        char *key;
        const char *value;
        enum cmd_flag fl =
            cmd_flag_next(PROG, argc, argv, &i, known_flag, is_backtest, &key, &value);
        if (fl == CMD_FLAG_HELP) {
            usage(stdout);
            code = 0;
            goto out;
        }
        if (fl != CMD_FLAG_OK)
            goto out;
        if (is_backtest(key)) {
            xfree(key);
            if (value && util_parse_bool(value, &backtest) != 0) {
                fprintf(stderr, PROG ": --backtest: '%s' is not true or false\n", value);
                goto out;
            }
            if (!value)
                backtest = true;
            continue;
        }
        const struct cmd_path_flag paths[] = {
            {"config", &config}, {"report", &report->path}, {"json", &json->path}};
        if (cmd_flag_take(PROG, key, value, paths, UTIL_ARRAY_LEN(paths), &flags) != 0)
            goto out;
    }

    if (config) {
        size_t len = 0;
        char *buf = read_file(config, &len, err, sizeof(err));
        struct plan_error perr = {0};
        if (!buf) {
            fprintf(stderr, PROG ": --config %s\n", err);
            goto out;
        }
        int rc = plan_file_parse(buf, len, &file, &perr);
        xfree(buf);
        if (rc != 0) {
            if (perr.line > 0)
                fprintf(stderr, PROG ": %s:%d: %s\n", config, perr.line, perr.msg);
            else
                fprintf(stderr, PROG ": %s: %s\n", config, perr.msg);
            goto out;
        }
    }
    bool multi = file.has_deployments;
    bool has_source = multi;
    for (size_t i = 0; i < flags.n; i++) {
        const char *k = flags.v[i].key;
        has_source |= strcmp(k, "trace") == 0 || strcmp(k, "query") == 0;
        if (multi && is_source_key(k)) {
            fprintf(stderr, PROG ": %s: the deployments of --config %s name their own "
                            "histories\n", flags.v[i].where, config);
            goto out;
        }
        if (strcmp(k, "name") == 0) {
            fprintf(stderr, PROG ": --name: only inside a deployments entry of --config\n");
            goto out;
        }
    }
    for (size_t i = 0; i < file.top.n; i++)
        has_source |= strcmp(file.top.v[i].key, "trace") == 0 ||
                      strcmp(file.top.v[i].key, "query") == 0;
    bool demo = !has_source;

    /* plan-wide keys: defaults, demo, file, flags */
    plan_config_init(&pc);
    if (demo) {
        plan_config_demo(&pc);
        origin_set(&orig, "horizon", "--horizon (the demo's 7d)");
    }
    for (size_t i = 0; i < file.top.n; i++) {
        const struct plan_setting *st = &file.top.v[i];
        if (!is_plan_key(st->key))
            continue;
        plan_config_set(&pc, st->key, st->value, err, sizeof(err)); /* checked by the parser */
        char *where = xasprintf("%s:%d: %s", config, st->line, st->key);
        origin_set(&orig, st->key, where);
        xfree(where);
    }
    for (size_t i = 0; i < flags.n; i++) {
        const struct cmd_setting *st = &flags.v[i];
        if (!is_plan_key(st->key))
            continue;
        if (plan_config_set(&pc, st->key, st->value, err, sizeof(err)) != 0) {
            fprintf(stderr, PROG ": %s: %s\n", st->where, cmd_strip_key(st->key, err));
            goto out;
        }
        origin_set(&orig, st->key, st->where);
    }
    if (plan_config_validate(&pc, err, sizeof(err)) != 0) {
        plan_error(&orig, "", err);
        goto out;
    }

    /* the Deployments */
    n = multi ? file.ndeployments : 1;
    ws = xcalloc(n, sizeof(*ws));
    wptr = xcalloc(n, sizeof(*wptr));
    for (size_t d = 0; d < n; d++) {
        struct plan_workload *w = &ws[d];
        plan_workload_init(w);
        if (demo)
            plan_workload_demo(w);
        if (apply(w, &file.top, config) != 0 ||
            (multi && apply(w, &file.deployments[d], config) != 0))
            goto out;
        for (size_t i = 0; i < flags.n; i++) {
            const struct cmd_setting *st = &flags.v[i];
            if (is_plan_key(st->key))
                continue;
            if (strcmp(st->key, "trace") == 0) {
                xfree(w->query);
                w->query = NULL;
            } else if (strcmp(st->key, "query") == 0) {
                xfree(w->trace);
                w->trace = NULL;
            }
            int rc = plan_workload_set(w, st->key, st->value, err, sizeof(err));
            if (rc != 0) {
                fprintf(stderr, PROG ": %s: %s\n", st->where, cmd_strip_key(st->key, err));
                goto out;
            }
        }
        const char *who = w->name ? w->name : "";
        if (w->query && !w->prometheus) {
            fprintf(stderr, PROG ": %s%s--query needs --prometheus URL\n", who, who[0] ? ": " : "");
            goto out;
        }
        if (w->prometheus && !w->query && !w->trace) {
            fprintf(stderr, PROG ": %s%s--prometheus needs --query (the request rate, req/s)\n",
                    who, who[0] ? ": " : "");
            goto out;
        }
        if (w->query) { /* the client's own checks of the prometheus-* keys, named */
            struct promql_config qc;
            struct promql_header hs[UTIL_ARRAY_LEN(w->prom_header_names)];
            prom_config(w, &qc, hs);
            char why[240];
            if (promql_config_check(&qc, why, sizeof(why)) != 0) {
                bool hdr = strncmp(why, "headers: ", 9) == 0;
                fprintf(stderr, PROG ": %s%sprometheus-%s%s\n", who, who[0] ? ": " : "",
                        hdr ? "header: " : "", hdr ? why + 9 : why);
                goto out;
            }
        }
        if (plan_workload_validate(w, err, sizeof(err)) != 0) {
            workload_error(who, &flags, &file, multi ? &file.deployments[d] : NULL, config, err);
            goto out;
        }
        wptr[d] = w;
    }

    /* before the work: an unwritable output is a usage error, not a lost result */
    if (json->path && strcmp(json->path, "-") == 0) {
        json_stdout = true;
        xfree(json->path);
        json->path = NULL;
    }
    for (size_t k = 0; k < UTIL_ARRAY_LEN(outs); k++)
        if (outs[k].path && outfile_open(&outs[k]) != 0)
            goto out;

    hist = xcalloc(n, sizeof(*hist));
    infos = xcalloc(n, sizeof(*infos));
    for (size_t d = 0; d < n; d++) {
        struct plan_workload *w = &ws[d];
        struct trace_error terr = {0};
        int rc = 0;
        if (w->trace) {
            /* a row years past the others (a mistyped time) is refused with its line */
            const struct trace_opts topts = {.max_span_ms = PLAN_MAX_HISTORY_DAYS * 86400000LL};
            rc = trace_load_file_opts(w->trace, &topts, &hist[d], &terr);
            infos[d].source = w->trace;
            /* no row: missing for the planner (a recorder that did not run),
             * not zero traffic, as the Prometheus history's gaps are */
            for (size_t i = 0; rc == 0 && hist[d]->missing && i < hist[d]->n; i++)
                if (hist[d]->missing[i])
                    hist[d]->requests[i] = NAN;
        } else if (w->query) {
            int c = fetch_prometheus(w, &hist[d]);
            if (c != 0) {
                code = c;
                goto out;
            }
            infos[d].source = w->query;
        } else {
            size_t len;
            const char *csv = sim_demo_trace(&len);
            rc = trace_parse(csv, len, &hist[d], &terr);
            infos[d].source = sim_demo_trace_name();
        }
        if (rc != 0) {
            const char *name = w->trace ? w->trace : "bundled trace";
            if (terr.line == 0 && strstr(terr.msg, name))
                fprintf(stderr, PROG ": %s\n", terr.msg);
            else if (terr.line > 0)
                fprintf(stderr, PROG ": %s:%zu: %s\n", name, terr.line, terr.msg);
            else
                fprintf(stderr, PROG ": %s: %s\n", name, terr.msg[0] ? terr.msg : strerror(-rc));
            goto out;
        }
    }

    res = xcalloc(n, sizeof(*res));
    if (backtest)
        bts = xcalloc(n, sizeof(*bts));
    for (size_t d = 0; d < n; d++) {
        const char *who = ws[d].name ? ws[d].name : infos[d].source;
        int rc = backtest ? plan_backtest(&pc, &ws[d], hist[d], &bts[d], &res[d], err, sizeof(err))
                          : plan_run(&pc, &ws[d], hist[d], &res[d], err, sizeof(err));
        if (rc != 0) {
            if (backtest && strncmp(err, "backtest:", 9) == 0)
                fprintf(stderr, PROG ": %s: --backtest:%s\n", who, err + 9);
            else
                plan_error(&orig, who, err);
            goto out;
        }
    }
    if (multi && plan_total(&pc, res, n, &total, err, sizeof(err)) != 0) {
        fprintf(stderr, PROG ": %s\n", err);
        goto out;
    }

    code = 1;
    if (!json_stdout) {
        util_buf_reset(&out);
        for (size_t d = 0; d < n; d++) {
            if (d)
                util_buf_puts(&out, "\n");
            plan_report_table(&out, &pc, &ws[d], &infos[d], res[d]);
            if (backtest)
                plan_report_backtest(&out, &bts[d], res[d]);
        }
        if (total) {
            util_buf_puts(&out, "\n");
            plan_report_table(&out, &pc, NULL, NULL, total);
        }
        if (outfile_stdout(PROG, &out) != 0)
            goto out;
    }
    /* every file staged before any is put in place: all or none */
    if (json_stdout || json->fd >= 0) {
        util_buf_reset(&out);
        plan_report_json(&out, &pc, wptr, infos, res, n, total, bts);
        if (json_stdout ? outfile_stdout(PROG, &out) != 0 : outfile_stage(json, &out) != 0)
            goto out;
    }
    if (report->fd >= 0) {
        util_buf_reset(&out);
        plan_report_svg(&out, &pc, res, n, total);
        if (outfile_stage(report, &out) != 0)
            goto out;
    }
    for (size_t k = 0; k < UTIL_ARRAY_LEN(outs); k++)
        if (outs[k].fd >= 0 && outfile_commit(&outs[k]) != 0)
            goto out;
    code = 0;
out:
    for (size_t k = 0; k < UTIL_ARRAY_LEN(outs); k++) {
        outfile_abandon(&outs[k]);
        xfree(outs[k].path);
    }
    for (size_t d = 0; d < n; d++) {
        if (hist)
            trace_free(hist[d]);
        if (res)
            plan_result_free(res[d]);
        if (ws)
            plan_workload_clear(&ws[d]);
    }
    plan_result_free(total);
    xfree(hist);
    xfree(res);
    xfree(bts);
    xfree(infos);
    xfree(ws);
    xfree(wptr);
    for (size_t i = 0; i < 32; i++)
        xfree(orig.where[i]);
    util_buf_free(&out);
    plan_file_clear(&file);
    cmd_settings_free(&flags);
    xfree(config);
    return code;
}

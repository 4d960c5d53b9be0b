/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuscaler simulate`: wires flags, the YAML file and the trace file to the
 * simulator (pkg/sim) and writes its reports. Owns no policy and no model.
 *
 * Precedence: simulator defaults, then the bundled demo's parameters when no
 * trace is given, then the --config file, then flags. Every key is checked by
 * the one parser (sim_config_set -> policy_config_set); an unknown key or a
 * bad value is a usage error (exit 2) naming the flag or file:line, and so
 * is a cross-field refusal (sim_config_validate), by where its key was set.
 * The file is read by pkg/sim (sim_file_load). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "flags.h"
#include "outfile.h"
#include "sim/sim.h"
#include "trace/trace.h"
#include "util/util.h"

#define PROG "gpuscaler simulate"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuscaler simulate [--trace FILE.csv] [--config FILE.yaml]\n"
            "                          [--policy LIST] [--timeline FILE.csv]\n"
            "                          [--report FILE.svg] [--json FILE|-] [--scale-log FILE.csv]\n"
            "                          [--<key> VALUE ...]\n"
            "\n"
            "Replays a request trace (CSV t_seconds,requests) through the scaling policies on\n"
            "simulated time and prints GPU-hours and SLA misses of each. Without --trace it\n"
            "runs the bundled demo (a week of ServeGen LLM traffic) with demo parameters.\n"
            "Keys may be given as flags (--key VALUE or --key=VALUE) or in the YAML file\n"
            "(key: value); flags win. --policy picks some of predictive, reactive, hpa,\n"
            "oracle and static-peak (all by default). Policy keys (as the gpuscaler.io/\n"
            "annotations):\n ");
    for (size_t i = 0, col = 1; i < policy_config_key_count(); i++) {
        const char *k = policy_config_key_name(i);
        if (col + strlen(k) + 2 > 78) {
            fprintf(f, "\n ");
            col = 1;
        }
        fprintf(f, " %s", k);
        col += strlen(k) + 1;
    }
    fprintf(f, "\nSimulator keys:\n");
    for (size_t i = 0; i < sim_config_key_count(); i++)
        fprintf(f, "  %-28s %s\n", sim_config_key_name(i), sim_config_key_help(i));
    fprintf(f, "  %-28s %s\n", "trace", "the trace CSV (also --trace)");
}

static bool is_output_flag(const char *k)
{
    return strcmp(k, "config") == 0 || strcmp(k, "timeline") == 0 || strcmp(k, "report") == 0 ||
           strcmp(k, "json") == 0 || strcmp(k, "scale-log") == 0;
}

/* A flag this command knows: the file flags, and every simulator and policy key. */
static bool known_flag(const char *k)
{
    if (strcmp(k, "trace") == 0 || is_output_flag(k))
        return true;
    for (size_t i = 0; i < sim_config_key_count(); i++)
        if (strcmp(sim_config_key_name(i), k) == 0)
            return true;
    for (size_t i = 0; i < policy_config_key_count(); i++)
        if (strcmp(policy_config_key_name(i), k) == 0)
            return true;
    return false;
}

/* Load the YAML file's keys into s (in file order) and its trace, resolved
 * from the file's folder. Returns 0 or prints the error and returns -1. */
static int load_config(const char *path, struct cmd_settings *s, char **trace_path)
{
    struct sim_file f;
    struct sim_file_error ferr = {0};
    int rc = sim_file_load(path, &f, &ferr);
    if (rc != 0) {
        if (ferr.line > 0)
            fprintf(stderr, PROG ": %s:%d: %s\n", path, ferr.line, ferr.msg);
        else if (ferr.msg[0] && strncmp(ferr.msg, path, strlen(path)) == 0)
            fprintf(stderr, PROG ": %s\n", ferr.msg); /* it names the file already */
        else
            fprintf(stderr, PROG ": %s: %s\n", path, ferr.msg[0] ? ferr.msg : strerror(-rc));
        return -1;
    }
    for (size_t i = 0; i < f.n; i++) {
        const struct sim_file_setting *st = &f.v[i];
        if (is_output_flag(st->key)) {
            fprintf(stderr, PROG ": %s:%d: %s: only a flag, not a file key\n", path, st->line,
                    st->key);
            rc = -1;
            goto out;
        }
        cmd_settings_add(s, st->key, st->value, xasprintf("%s:%d", path, st->line), false);
    }
    if (f.trace) {
        const char *slash = strrchr(path, '/');
        xfree(*trace_path);
        if (f.trace[0] != '/' && slash)
            *trace_path = xasprintf("%.*s/%s", (int)(slash - path), path, f.trace);
        else
            *trace_path = xstrdup(f.trace);
    }
out:
    sim_file_clear(&f);
    return rc;
}

/* A cross-field error of sim_config_validate ("initial-replicas: 50 is
 * outside ..."), printed with where its key was set last: the flag, else the
 * file's line; as it is when the key kept its default. */
static void validate_error(const struct cmd_settings *file, const struct cmd_settings *flags,
                           const char *msg)
{
    const char *colon = strchr(msg, ':');
    if (colon && colon > msg && (size_t)(colon - msg) < 64) {
        char key[64];
        memcpy(key, msg, (size_t)(colon - msg));
        key[colon - msg] = '\0';
        const struct cmd_setting *st = cmd_settings_last(flags, key);
        if (st) {
            fprintf(stderr, PROG ": %s: %s\n", st->where, cmd_strip_key(key, msg));
            return;
        }
        if ((st = cmd_settings_last(file, key)) != NULL) {
            fprintf(stderr, PROG ": %s: %s\n", st->where, msg);
            return;
        }
    }
    fprintf(stderr, PROG ": %s\n", msg);
}

int cmd_simulate(int argc, char **argv)
{
    struct cmd_settings flags = {0}, file = {0};
    char *trace_path = NULL, *config = NULL;
    /* in the order they are written */
    struct outfile outs[] = {{PROG, "--timeline", NULL, -1, false, NULL},
                             {PROG, "--report", NULL, -1, false, NULL},
                             {PROG, "--json", NULL, -1, false, NULL},
                             {PROG, "--scale-log", NULL, -1, false, NULL}};
    struct outfile *timeline = &outs[0], *report = &outs[1], *json = &outs[2];
    struct outfile *scale_log = &outs[3];
    struct trace *tr = NULL;
    struct sim_result *res = NULL;
    struct util_buf out = {0};
    struct sim_config cfg;
    char err[512];
    int code = 2;

    for (int i = 1; i < argc; i++) {
        char *key;
        const char *value;
        enum cmd_flag fl = cmd_flag_next(PROG, argc, argv, &i, known_flag, NULL, &key, &value);
        if (fl == CMD_FLAG_HELP) {
            usage(stdout);
            code = 0;
            goto out;
        }
        if (fl != CMD_FLAG_OK)
            goto out;
        const struct cmd_path_flag paths[] = {
            {"trace", &trace_path},       {"config", &config},
            {"timeline", &timeline->path}, {"report", &report->path},
            {"json", &json->path},         {"scale-log", &scale_log->path}};
        if (cmd_flag_take(PROG, key, value, paths, UTIL_ARRAY_LEN(paths), &flags) != 0)
            goto out;
    }

    char *file_trace = NULL;
    if (config && load_config(config, &file, &file_trace) != 0) {
        xfree(file_trace);
        goto out;
    }
    if (!trace_path)
        trace_path = file_trace;
    else
        xfree(file_trace);

    sim_config_init(&cfg);
    if (!trace_path)
        sim_config_demo(&cfg);
    struct cmd_settings *lists[] = {&file, &flags};
    for (size_t l = 0; l < 2; l++) {
        for (size_t i = 0; i < lists[l]->n; i++) {
            const struct cmd_setting *st = &lists[l]->v[i];
            int rc = sim_config_set(&cfg, st->key, st->value, err, sizeof(err));
            if (rc == -ENOENT && st->from_flag) {
                fprintf(stderr, PROG ": unknown flag %s (see " PROG " --help)\n", st->where);
                goto out;
            }
            if (rc == -ENOENT) {
                fprintf(stderr, PROG ": %s: unknown key '%s'\n", st->where, st->key);
                goto out;
            }
            if (rc != 0) {
                fprintf(stderr, PROG ": %s: %s\n", st->where,
                        st->from_flag ? cmd_strip_key(st->key, err) : err);
                goto out;
            }
        }
    }
    if (sim_config_validate(&cfg, err, sizeof(err)) != 0) {
        validate_error(&file, &flags, err);
        goto out;
    }
    /* --json -: the JSON is the output on stdout (the table is not), as plan's */
    bool json_stdout = json->path && strcmp(json->path, "-") == 0;
    if (json_stdout) {
        xfree(json->path);
        json->path = NULL;
    }
    /* before the run: an unwritable output is a usage error, not a lost result */
    for (size_t k = 0; k < UTIL_ARRAY_LEN(outs); k++)
        if (outs[k].path && outfile_open(&outs[k]) != 0)
            goto out;

    struct trace_error terr = {0};
    struct sim_report_info info = {0};
    int rc;
    if (trace_path) {
        rc = trace_load_file(trace_path, &tr, &terr);
        info.trace_name = trace_path;
    } else {
        size_t len;
        const char *csv = sim_demo_trace(&len);
        rc = trace_parse(csv, len, &tr, &terr);
        info.trace_name = sim_demo_trace_name();
    }
    if (rc != 0) {
        const char *name = trace_path ? trace_path : "bundled trace";
        if (terr.line == 0 && strstr(terr.msg, name))
            fprintf(stderr, PROG ": %s\n", terr.msg);
        else if (terr.line > 0)
            fprintf(stderr, PROG ": %s:%zu: %s\n", name, terr.line, terr.msg);
        else
            fprintf(stderr, PROG ": %s: %s\n", name, terr.msg[0] ? terr.msg : strerror(-rc));
        goto out;
    }
    if (tr->dt_ms % 1000 != 0) {
        fprintf(stderr, PROG ": %s: buckets of %g s (the spacing of its rows); the simulator "
                             "replays whole seconds\n",
                trace_path ? trace_path : "bundled trace", (double)tr->dt_ms / 1000.0);
        goto out;
    }
    info.trace_dt_s = tr->dt_ms / 1000.0;
    info.trace_span_s = (double)tr->n * tr->dt_ms / 1000.0;
    info.trace_missing = tr->nmissing;
    info.trace_buckets = tr->n;

    if (sim_run(&cfg, tr, NULL, &res, err, sizeof(err)) != 0) {
        fprintf(stderr, PROG ": %s\n", err);
        goto out;
    }
    code = 1;
    if (!json_stdout) {
        sim_report_table(&out, &cfg, &info, res);
        if (outfile_stdout(PROG, &out) != 0)
            goto out;
    }
    /* every file staged before any is put in place: all or none */
    if (timeline->fd >= 0) {
        util_buf_reset(&out);
        sim_report_timeline_csv(&out, res);
        if (outfile_stage(timeline, &out) != 0)
            goto out;
    }
    if (scale_log->fd >= 0) {
        util_buf_reset(&out);
        sim_report_scale_log_csv(&out, res);
        if (outfile_stage(scale_log, &out) != 0)
            goto out;
    }
    if (report->fd >= 0) {
        util_buf_reset(&out);
        sim_report_svg(&out, &cfg, &info, res);
        if (outfile_stage(report, &out) != 0)
            goto out;
    }
    if (json_stdout || json->fd >= 0) {
        util_buf_reset(&out);
        sim_report_json(&out, &cfg, &info, res);
        if (json_stdout ? outfile_stdout(PROG, &out) != 0 : outfile_stage(json, &out) != 0)
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
    util_buf_free(&out);
    sim_result_free(res);
    trace_free(tr);
    cmd_settings_free(&flags);
    cmd_settings_free(&file);
    xfree(trace_path);
    xfree(config);
    return code;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the simulator's YAML file (sim_file_parse, what
 * `gpuscaler simulate --config` reads): any input must parse or fail with a
 * message (and a line when it is about one), never crash; a failed parse is
 * empty. A parsed file's settings carry their line and a value without NUL,
 * its trace is not empty, and the settings then go through sim_config_set as
 * simulate applies them (a failed set leaves the config as it was), on the
 * defaults and on the demo's parameters, before sim_config_validate. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-sim-yaml: invariant violated: %s\n", what);
        abort();
    }
}

static void apply(const struct sim_file *f, bool demo)
{
    struct sim_config cfg;
    sim_config_init(&cfg);
    if (demo)
        sim_config_demo(&cfg);
    char err[512];
    for (size_t i = 0; i < f->n; i++) {
        struct sim_config before = cfg;
        int rc = sim_config_set(&cfg, f->v[i].key, f->v[i].value, err, sizeof(err));
        if (rc != 0) {
            check(rc == -ENOENT || rc == -EINVAL, "set errors are -ENOENT or -EINVAL");
            check(memcmp(&before, &cfg, sizeof(cfg)) == 0, "a failed set changes nothing");
            check(memchr(err, '\0', sizeof(err)) && err[0], "a failed set says why");
        }
    }
    if (sim_config_validate(&cfg, err, sizeof(err)) != 0)
        check(memchr(err, '\0', sizeof(err)) && err[0], "a refusal says why");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sim_file f;
    struct sim_file_error e;
    memset(&e, 0x55, sizeof(e));
    int rc = sim_file_parse((const char *)data, size, &f, &e);
    if (rc != 0) {
        check(rc < 0, "errors are negative");
        check(memchr(e.msg, '\0', sizeof(e.msg)) != NULL && e.msg[0] != '\0',
              "an error says why");
        check(e.line >= 0, "an error's line is 0 or more");
        check(f.n == 0 && !f.v && !f.trace, "a failed parse is empty");
        sim_file_clear(&f);
        return 0;
    }
    for (size_t i = 0; i < f.n; i++) {
        check(f.v[i].key && f.v[i].value, "settings have a key and a value");
        check(f.v[i].line >= 1, "settings carry their line");
        check(strcmp(f.v[i].key, "trace") != 0, "the trace is not a setting");
    }
    check(!f.trace || (f.trace[0] != '\0' && f.trace_line >= 1), "a trace is a path, with a line");
    apply(&f, false);
    apply(&f, true);
    sim_file_clear(&f);
    sim_file_clear(&f); /* twice is safe */
    return 0;
}

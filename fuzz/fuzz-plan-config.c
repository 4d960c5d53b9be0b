/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the plan file (plan_file_parse) and the plan's value
 * parsers: any input must parse or fail with a line and a message, never
 * crash; a file that parses must apply to fresh configs without an error
 * (the parser promises every value was checked), and each line of the
 * input also goes through plan_config_set as "key: value" so the growth,
 * price and share parsers see arbitrary text. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-plan-config: invariant violated: %s\n", what);
        abort();
    }
}

static void apply_scope(const struct plan_scope *s, struct plan_config *pc,
                        struct plan_workload *w)
{
    char err[256];
    for (size_t i = 0; i < s->n; i++) {
        const struct plan_setting *st = &s->v[i];
        check(st->line >= 1, "settings carry their line");
        int rc = plan_workload_key(st->key) ? plan_workload_set(w, st->key, st->value, err,
                                                                sizeof(err))
                                            : plan_config_set(pc, st->key, st->value, err,
                                                              sizeof(err));
        check(rc == 0, "a parsed file applies without errors");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct plan_file f;
    struct plan_error e;
    int rc = plan_file_parse((const char *)data, size, &f, &e);
    if (rc != 0) {
        check(rc == -EINVAL, "errors are -EINVAL");
        check(e.msg[0] != '\0', "an error says why");
        check(memchr(e.msg, '\0', sizeof(e.msg)) != NULL, "the message is terminated");
        check(f.ndeployments == 0 && f.top.n == 0 && !f.deployments, "a failed parse is empty");
    } else {
        struct plan_config pc;
        struct plan_workload w;
        plan_config_init(&pc);
        plan_workload_init(&w);
        apply_scope(&f.top, &pc, &w);
        check(!f.has_deployments || f.ndeployments > 0, "a deployments list is not empty");
        for (size_t i = 0; i < f.ndeployments; i++) {
            check(f.deployments[i].name && f.deployments[i].name[0], "deployments are named");
            struct plan_workload wd;
            plan_workload_init(&wd);
            apply_scope(&f.deployments[i], &pc, &wd);
            plan_workload_clear(&wd);
        }
        plan_workload_clear(&w);
        plan_file_clear(&f);
    }
    /* each line as key: value, straight to the value parsers */
    const char *p = (const char *)data, *end = p + size;
    int lines = 0;
    while (p < end && lines++ < 64) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *colon = memchr(p, ':', len);
        if (colon && len < 512) {
            char key[512], value[512];
            size_t kl = (size_t)(colon - p), vl = len - kl - 1;
            memcpy(key, p, kl);
            key[kl] = '\0';
            memcpy(value, colon + 1, vl);
            value[vl] = '\0';
            char *v = value;
            while (*v == ' ')
                v++;
            struct plan_config pc, before;
            char err[256];
            plan_config_init(&pc);
            before = pc;
            if (memchr(key, '\0', kl) == NULL && memchr(v, '\0', vl) == NULL) {
                rc = plan_config_set(&pc, key, v, err, sizeof(err));
                check(rc == 0 || rc == -EINVAL || rc == -ENOENT, "set returns a known code");
                if (rc != 0)
                    check(memcmp(&pc, &before, sizeof(pc)) == 0, "a failed set changes nothing");
                else
                    (void)plan_config_validate(&pc, err, sizeof(err));
            }
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

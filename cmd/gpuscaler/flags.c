/* SPDX-License-Identifier: Apache-2.0 */
/* cmd/flags: one `--key VALUE` / `--key=VALUE` flag of a command line, and
 * the list of settings the flags and a file give. */
#include "flags.h"

#include <stdio.h>
#include <string.h>

#include "util/util.h"

enum cmd_flag cmd_flag_next(const char *prog, int argc, char **argv, int *i,
                            bool (*known)(const char *key), bool (*bare)(const char *key),
                            char **key, const char **value)
{
    const char *a = argv[*i];
    *key = NULL;
    *value = NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
        return CMD_FLAG_HELP;
    if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
        fprintf(stderr, "%s: unexpected argument '%s' (flags are --key VALUE)\n", prog, a);
        return CMD_FLAG_ERROR;
    }
    const char *eq = strchr(a + 2, '=');
    char *k = eq ? xstrndup(a + 2, (size_t)(eq - a - 2)) : xstrdup(a + 2);
    if (!known(k)) {
        fprintf(stderr, "%s: unknown flag --%s (see %s --help)\n", prog, k, prog);
        goto fail;
    }
    if (eq) {
        *value = eq + 1;
    } else if (!(bare && bare(k))) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "%s: --%s needs a value\n", prog, k);
            goto fail;
        }
        *value = argv[++*i];
    }
    *key = k;
    return CMD_FLAG_OK;
fail:
    xfree(k);
    return CMD_FLAG_ERROR;
}

const char *cmd_strip_key(const char *key, const char *msg)
{
    size_t kl = strlen(key);
    if (strncmp(msg, key, kl) == 0 && msg[kl] == ':')
        return msg + kl + (msg[kl + 1] == ' ' ? 2 : 1);
    return msg;
}

int cmd_flag_take(const char *prog, char *key, const char *value,
                  const struct cmd_path_flag *paths, size_t npaths, struct cmd_settings *s)
{
    size_t i = 0;
    int rc = 0;
    while (i < npaths && strcmp(paths[i].key, key) != 0)
        i++;
    if (i < npaths && !*value) { /* "--trace=" read the current folder, or "" */
        fprintf(stderr, "%s: --%s: missing value\n", prog, key);
        rc = -1;
    } else if (i < npaths) {
        xfree(*paths[i].path);
        *paths[i].path = xstrdup(value);
    } else {
        cmd_settings_add(s, key, value, xasprintf("--%s", key), true);
    }
    xfree(key);
    return rc;
}

void cmd_settings_add(struct cmd_settings *s, const char *key, const char *value, char *where,
                      bool from_flag)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = (struct cmd_setting){xstrdup(key), xstrdup(value), where, from_flag};
}

void cmd_settings_free(struct cmd_settings *s)
{
    for (size_t i = 0; i < s->n; i++) {
        xfree(s->v[i].key);
        xfree(s->v[i].value);
        xfree(s->v[i].where);
    }
    xfree(s->v);
    *s = (struct cmd_settings){0};
}

const struct cmd_setting *cmd_settings_last(const struct cmd_settings *s, const char *key)
{
    for (size_t i = s->n; i-- > 0;)
        if (strcmp(s->v[i].key, key) == 0)
            return &s->v[i];
    return NULL;
}

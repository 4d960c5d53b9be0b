/* SPDX-License-Identifier: Apache-2.0 */
/* sim/yaml: the simulator's YAML file (`gpuscaler simulate --config`) read
 * into key = value settings that remember their lines.
 *
 * The file is one flat map with the keys of the flags: a scalar value is
 * taken as written, a sequence of scalars (a policy list) is joined with
 * commas. Nothing is applied here: the caller sets the values in file order
 * with sim_config_set(), the one parser of their keys and values, after the
 * defaults and before the flags. `trace` is kept apart, being a path (the
 * caller resolves it from the file's folder): it must be a scalar and not
 * empty (`trace: ~` named the folder). sim_file_parse() is pure (conf_parse);
 * sim_file_load() is its thin file loader. On error the file is left empty
 * and the error names the line; nothing here logs. */
#include "sim-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"

static int fail(struct sim_file_error *err, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct sim_file_error *err, int line, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->line = line;
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* The settings of a parsed tree; on error f is left for the caller to clear. */
static int from_tree(const struct conf_node *root, struct sim_file *f, struct sim_file_error *err)
{
    if (root->type != CONF_MAP)
        return fail(err, root->line, "expected a map of key: value, found a %s",
                    conf_type_name(root->type));
    f->v = xcalloc(root->n ? root->n : 1, sizeof(*f->v));
    for (size_t i = 0; i < root->n; i++) {
        const struct conf_node *n = root->items[i];
        const char *key = root->keys[i];
        if (strcmp(key, "trace") == 0) {
            if (n->type != CONF_SCALAR)
                return fail(err, n->line, "trace: expected a path, found a %s",
                            conf_type_name(n->type));
            if (n->scalar[0] == '\0')
                return fail(err, n->line, "trace: missing value");
            f->trace = xstrdup(n->scalar);
            f->trace_line = n->line;
            continue;
        }
        char *value = conf_node_joined(n);
        if (!value)
            return fail(err, n->line, "%.60s: expected a value, found a %s", key,
                        conf_type_name(n->type));
        f->v[f->n++] = (struct sim_file_setting){xstrdup(key), value, n->line};
    }
    return 0;
}

int sim_file_parse(const char *buf, size_t len, struct sim_file *out, struct sim_file_error *err)
{
    struct conf_node *root = NULL;
    struct conf_error cerr = {0};
    memset(out, 0, sizeof(*out));
    int rc = conf_parse(buf, len, &root, &cerr);
    if (rc != 0) {
        fail(err, cerr.line, "%s", cerr.msg);
        goto out;
    }
    rc = from_tree(root, out, err);
out:
    if (rc != 0)
        sim_file_clear(out);
    conf_free(root);
    return rc;
}

int sim_file_load(const char *path, struct sim_file *out, struct sim_file_error *err)
{
    struct conf_node *root = NULL;
    struct conf_error cerr = {0};
    memset(out, 0, sizeof(*out));
    int rc = conf_load_file(path, &root, &cerr);
    if (rc != 0) {
        if (err) {
            err->line = cerr.line;
            snprintf(err->msg, sizeof(err->msg), "%s", cerr.msg[0] ? cerr.msg : strerror(-rc));
        }
        goto out;
    }
    rc = from_tree(root, out, err);
out:
    if (rc != 0)
        sim_file_clear(out);
    conf_free(root);
    return rc;
}

void sim_file_clear(struct sim_file *f)
{
    for (size_t i = 0; i < f->n; i++) {
        xfree(f->v[i].key);
        xfree(f->v[i].value);
    }
    xfree(f->v);
    xfree(f->trace);
    memset(f, 0, sizeof(*f));
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the daemon's config file, through conf_parse and
 * ctl_config_apply as `gpuscaler run --config` reads it. An error must carry
 * a message and a position no further than the input's lines; a success must
 * give a config that passes ctl_config_validate again, whose namespaces and
 * defaults are within their caps, and whose Prometheus headers each pass
 * promql_header_check and build a client config promql_config_check
 * accepts. Every path frees what it made (ASan's leak check). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "controller/controller.h"
#include "promql/promql.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-daemon-config: invariant violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    struct conf_node *root = NULL;
    struct conf_error err;
    if (conf_parse((const char *)data, size, &root, &err) != 0)
        return 0;
    /* an upper bound of libyaml's line count: CR, LF, and YAML 1.1's NEL,
     * LS and PS (UTF-8 C2 85, E2 80 A8, E2 80 A9) each break a line */
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n' || data[i] == '\r' || data[i] == 0x85 ||
                 (data[i] == 0xe2 && i + 2 < size && data[i + 1] == 0x80 &&
                  (data[i + 2] == 0xa8 || data[i + 2] == 0xa9));
    struct ctl_config c;
    ctl_config_init(&c);
    memset(&err, 0x55, sizeof(err));
    int rc = ctl_config_apply(&c, root, &err);
    if (rc != 0) {
        check(rc == -EINVAL, "an error is -EINVAL");
        check(memchr(err.msg, '\0', sizeof(err.msg)) != NULL && err.msg[0] != '\0',
              "error message set");
        /* an empty node at the end ("?") sits at the stream's end: one past */
        check(err.line >= 0 && (size_t)err.line <= lines + 1, "error line within the input");
    } else {
        char msg[256];
        const char *key = NULL;
        check(ctl_config_validate(&c, &key, msg, sizeof(msg)) == 0, "applied config validates");
        check(c.n_namespaces <= CTL_MAX_NAMESPACES && c.n_defaults <= CTL_MAX_DEFAULTS,
              "lists within their caps");
        check(c.prometheus.n_headers <= CTL_MAX_HEADERS, "headers within the cap");
        struct promql_header h[CTL_MAX_HEADERS];
        struct promql_config pc;
        ctl_config_promql(&c, &pc, h);
        for (size_t i = 0; i < pc.n_headers; i++)
            check(promql_header_check(h[i].name, h[i].value, msg, sizeof(msg)) == 0,
                  "every header passes its check");
        check(promql_config_check(&pc, msg, sizeof(msg)) == 0, "the client accepts the config");
    }
    ctl_config_free(&c);
    conf_free(root);
    return 0;
}

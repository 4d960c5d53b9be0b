/* SPDX-License-Identifier: Apache-2.0 */
/* promql/auth: internal to the promql module. What every request to the
 * Prometheus server carries besides its URL: the Accept line, the configured
 * extra headers, and the credentials (a bearer token or basic auth), the
 * secret read from its file for every request so rotated files take effect. */
#ifndef GPUSCALER_PROMQL_AUTH_H
#define GPUSCALER_PROMQL_AUTH_H

#include <stddef.h>

#include "promql.h"

/** Owned copies of the settings; lines are the fixed header lines. */
struct promql_auth {
    char *token_file, *username, *password_file;
    char **lines;  /* "Accept: application/json", then the extra headers; NULL-terminated */
    size_t n_lines;
};

/** One request's header lines and bearer token, built by promql_auth_begin. */
struct promql_auth_req {
    const char **headers; /* NULL-terminated, for httpc_opts.headers */
    char *bearer;         /* for httpc_opts.bearer, or NULL */
    char *basic;          /* the owned "Authorization: Basic ..." line, or NULL */
};

/** Copy c's credentials and headers (promql_config_check must have passed). */
void promql_auth_init(struct promql_auth *a, const struct promql_config *c);
void promql_auth_free(struct promql_auth *a);

/** Read the secret files for one request. Returns 0, or -EIO with err set
 *  (a file missing, empty or over 64 KiB); r is then empty. */
int promql_auth_begin(const struct promql_auth *a, struct promql_auth_req *r, char *err,
                      size_t errlen);
/** Wipe and free what promql_auth_begin made. */
void promql_auth_end(struct promql_auth_req *r);

#endif

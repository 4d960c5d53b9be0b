/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for kube_exec_cred_parse: an exec credential plugin's
 * standard output, as the API client reads it. The first byte picks the
 * apiVersion asked for (v1 or v1beta1). Any input is accepted or refused with
 * a message; an accepted one has a token of printable ASCII without spaces,
 * or a client certificate and key (both), and an expiry of 0 or after 1970. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-exec-credential: invariant violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *api = data[0] & 1 ? "client.authentication.k8s.io/v1beta1"
                                  : "client.authentication.k8s.io/v1";
    struct kube_exec_cred c;
    char err[300];
    err[0] = '\0';
    int rc = kube_exec_cred_parse((const char *)data + 1, size - 1, api, &c, err, sizeof(err));
    if (rc != 0) {
        check(rc == -EBADMSG, "-EBADMSG on refusal");
        check(err[0] != '\0', "a refusal says why");
        check(!c.token && !c.cert && !c.key, "nothing kept on refusal");
        return 0;
    }
    check(c.token || c.cert, "a token or a certificate");
    check(!!c.cert == !!c.key, "certificate and key together");
    if (c.token) {
        size_t n = strlen(c.token);
        check(n > 0, "a token is not empty");
        for (size_t i = 0; i < n; i++)
            check((unsigned char)c.token[i] > 0x20 && (unsigned char)c.token[i] < 0x7f,
                  "a token is printable ASCII without spaces");
    }
    if (c.cert)
        check(strlen(c.cert) == c.cert_len && strlen(c.key) == c.key_len && c.cert_len > 0,
              "PEM without NUL bytes");
    check(c.expires_ms >= 0, "an expiry of 0 or after 1970");
    kube_exec_cred_clear(&c);
    return 0;
}

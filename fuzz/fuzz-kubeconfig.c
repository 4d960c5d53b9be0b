/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for kube_config_parse: the current context and a fixed
 * context name, with a base directory for relative paths. */
#include <stdint.h>

#include "kube/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kube_config c;
    struct kube_config_error e;
    if (kube_config_parse((const char *)data, size, NULL, "/base", &c, &e) == 0)
        kube_config_clear(&c);
    if (kube_config_parse((const char *)data, size, "ctx", NULL, &c, &e) == 0)
        kube_config_clear(&c);
    return 0;
}

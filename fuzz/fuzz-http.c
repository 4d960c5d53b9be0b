/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz-http: feeds arbitrary bytes as one connection's decrypted stream to
 * httpd's request parser (llhttp + limits + pipelining), whole and in small
 * chunks whose size comes from the first byte. */
#include "httpd/httpd.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)(data[0] % 16) + 1;
    httpd_parse_stream_for_test(data + 1, size - 1, 0);
    httpd_parse_stream_for_test(data + 1, size - 1, chunk);
    return 0;
}

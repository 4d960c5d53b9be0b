/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholder for `gpuscaler run` until the controller module is built. */
#include <stdio.h>

#include "cmd.h"

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "gpuscaler run: not built yet (the controller module is missing)\n");
    return 1;
}

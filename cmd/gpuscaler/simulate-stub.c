/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholder for `gpuscaler simulate` until the simulator module is built. */
#include <stdio.h>

#include "cmd.h"

int cmd_simulate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "gpuscaler simulate: not built yet (the simulator module is missing)\n");
    return 1;
}

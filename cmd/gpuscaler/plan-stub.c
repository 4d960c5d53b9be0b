/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholder for `gpuscaler plan` until the planner and Prometheus modules are built. */
#include <stdio.h>

#include "cmd.h"

int cmd_plan(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "gpuscaler plan: not built yet (the plan or promql module is missing)\n");
    return 1;
}

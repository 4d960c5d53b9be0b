/* SPDX-License-Identifier: Apache-2.0 */
/* The subcommands of the gpuscaler binary. Each returns the process exit
 * code: 0 success, 1 runtime failure, 2 usage or input error. argv[0] is the
 * subcommand's name. */
#ifndef GPUSCALER_CMD_H
#define GPUSCALER_CMD_H

int cmd_run(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_plan(int argc, char **argv);

#endif

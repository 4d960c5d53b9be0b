/* SPDX-License-Identifier: Apache-2.0 */
/* gpuscaler: command-line entry point. Only dispatches to the subcommands;
 * each subcommand's file wires modules together and owns no policy. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "cmd.h"
#include "gpuscaler-version.h"

static void usage(FILE *f)
{
    fprintf(f,
            "gpuscaler %s: autoscaler for GPU inference Deployments on Kubernetes\n"
            "\n"
            "usage: gpuscaler <command> [flags]\n"
            "\n"
            "commands:\n"
            "  run        watch the Kubernetes API and scale annotated Deployments\n"
            "  simulate   replay a request trace through the policies and report\n"
            "  plan       forecast GPUs and cost for the next weeks from recorded traffic\n"
            "  version    print the version\n"
            "  help       this text; 'gpuscaler <command> --help' for a command's flags\n",
            GPUSCALER_VERSION);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0) {
        /* one kept-alive scrape connection per pod: lift the soft fd limit */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        return cmd_run(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "simulate") == 0)
        return cmd_simulate(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0)
        return cmd_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("gpuscaler %s\n", GPUSCALER_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "gpuscaler: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}

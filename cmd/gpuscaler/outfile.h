/* SPDX-License-Identifier: Apache-2.0 */
/* Output files named by a subcommand's flags (--report, --json, ...). Each
 * is opened (created if missing, never truncated) before the work starts,
 * so an unwritable path is a usage error at once; it is truncated and
 * written only once the results exist, and a file created for a run that
 * failed is removed. Errors are printed with the program's name and the
 * flag. */
#ifndef GPUSCALER_CMD_OUTFILE_H
#define GPUSCALER_CMD_OUTFILE_H

#include <stdbool.h>

#include "util/util.h"

struct outfile {
    const char *prog;   /* "gpuscaler simulate" */
    const char *flag;   /* "--report" */
    char *path;         /* owned by the caller */
    int fd;             /* -1 when closed */
    bool created;
};

/** Open o->path for writing without truncating it; prints the error naming
 *  the flag and returns -1 when it cannot be written. */
int outfile_open(struct outfile *o);
/** Replace the file's contents with b and close it; 0 or a negative errno
 *  (printed). */
int outfile_write(struct outfile *o, const struct util_buf *b);
/** Close an output that was not written; remove it if this run created it. */
void outfile_abandon(struct outfile *o);

#endif

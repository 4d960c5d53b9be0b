/* SPDX-License-Identifier: Apache-2.0 */
/* Output files named by a subcommand's flags (--report, --json, ...), and
 * stdout. Each file is opened (created if missing, never truncated) before
 * the work starts, so an unwritable path is a usage error at once. Once the
 * results exist, each output is staged (written in full to a temporary file
 * beside it), and only when every one is staged are they committed (renamed
 * over their paths): a run that fails, a full disk included, leaves every
 * existing file as it was and removes the files it created. A path that is
 * not a plain regular file of ours (a device, a FIFO, a symlink, a file with
 * other links or another owner) is written in place instead. Errors are
 * printed with the program's name and the flag. */
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
    char *tmp;          /* owned: the staged temporary file, or NULL */
};

/** Open o->path for writing without truncating it; prints the error naming
 *  the flag and returns -1 when it cannot be written. */
int outfile_open(struct outfile *o);
/** Write b in full to a temporary file beside the path (or, when the path
 *  cannot be replaced, to the path itself); 0 or a negative errno (printed,
 *  and the temporary file removed). */
int outfile_stage(struct outfile *o, const struct util_buf *b);
/** Put a staged output in place and close it; 0 or a negative errno
 *  (printed). Without a staged output, only closes. */
int outfile_commit(struct outfile *o);
/** Close an output that was not committed; remove its temporary file, and
 *  the file itself if this run created it. */
void outfile_abandon(struct outfile *o);
/** Write b to stdout and flush it; 0, or -1 with the error printed (a full
 *  disk, a closed pipe: the run then fails with exit code 1). */
int outfile_stdout(const char *prog, const struct util_buf *b);

#endif

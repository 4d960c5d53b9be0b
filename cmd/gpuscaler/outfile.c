/* SPDX-License-Identifier: Apache-2.0 */
/* Output files named by flags, opened before a run and written after it
 * (see outfile.h). Shared by `simulate` and `plan`. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int outfile_open(struct outfile *o)
{
    o->fd = open(o->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    o->created = o->fd >= 0;
    if (o->fd < 0 && errno == EEXIST)
        o->fd = open(o->path, O_WRONLY | O_CLOEXEC);
    if (o->fd < 0) {
        fprintf(stderr, "%s: %s %s: cannot write: %s\n", o->prog, o->flag, o->path,
                strerror(errno));
        return -1;
    }
    return 0;
}

int outfile_write(struct outfile *o, const struct util_buf *b)
{
    struct stat st;
    int rc = 0;
    if (fstat(o->fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(o->fd, 0) != 0)
        rc = -errno;
    const char *p = b->data ? b->data : "";
    size_t left = b->len;
    while (rc == 0 && left > 0) {
        ssize_t w = write(o->fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = w < 0 ? -errno : -EIO;
        else {
            p += w;
            left -= (size_t)w;
        }
    }
    if (close(o->fd) != 0 && rc == 0)
        rc = -errno;
    o->fd = -1;
    o->created = false; /* written: kept */
    if (rc != 0)
        fprintf(stderr, "%s: %s %s: write failed: %s\n", o->prog, o->flag, o->path,
                strerror(-rc));
    return rc;
}

void outfile_abandon(struct outfile *o)
{
    if (o->fd >= 0)
        close(o->fd);
    if (o->created)
        unlink(o->path);
    o->fd = -1;
    o->created = false;
}

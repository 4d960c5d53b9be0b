/* SPDX-License-Identifier: Apache-2.0 */
/* Output files named by flags, opened before a run, staged and committed
 * after it; stdout written with its errors seen (see outfile.h). Shared by
 * `simulate` and `plan`. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int outfile_open(struct outfile *o)
{
    o->tmp = NULL;
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

static int write_all(int fd, const struct util_buf *b)
{
    const char *p = b->data ? b->data : "";
    size_t left = b->len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        left -= (size_t)w;
    }
    return 0;
}

/* A temporary file beside the path, with the file's mode, when the path is
 * a regular file of ours with one link and not a symlink (a rename would
 * replace the link, or give the file to us); -1 otherwise. */
static int open_tmp(struct outfile *o, const struct stat *st)
{
    struct stat lst;
    if (!S_ISREG(st->st_mode) || st->st_nlink != 1 || st->st_uid != geteuid() ||
        lstat(o->path, &lst) != 0 || !S_ISREG(lst.st_mode) || lst.st_ino != st->st_ino ||
        lst.st_dev != st->st_dev)
        return -1;
    size_t n = strlen(o->path) + sizeof(".XXXXXX");
    o->tmp = xmalloc(n);
    snprintf(o->tmp, n, "%s.XXXXXX", o->path);
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    if (fd >= 0 && fchmod(fd, st->st_mode & 07777) == 0)
        return fd;
    if (fd >= 0) {
        close(fd);
        unlink(o->tmp);
    }
    xfree(o->tmp);
    o->tmp = NULL;
    return -1; /* a folder we cannot write in: in place */
}

int outfile_stage(struct outfile *o, const struct util_buf *b)
{
    struct stat st;
    int rc = 0;
    bool regular = fstat(o->fd, &st) == 0 && S_ISREG(st.st_mode);
    int fd = regular ? open_tmp(o, &st) : -1;
    if (fd >= 0) {
        rc = write_all(fd, b);
        if (close(fd) != 0 && rc == 0)
            rc = -errno;
    } else {
        if (regular && ftruncate(o->fd, 0) != 0)
            rc = -errno;
        if (rc == 0)
            rc = write_all(o->fd, b);
    }
    if (rc != 0) {
        fprintf(stderr, "%s: %s %s: write failed: %s\n", o->prog, o->flag, o->path,
                strerror(-rc));
        if (o->tmp) {
            unlink(o->tmp);
            xfree(o->tmp);
            o->tmp = NULL;
        }
    }
    return rc;
}

int outfile_commit(struct outfile *o)
{
    int rc = 0;
    if (close(o->fd) != 0 && !o->tmp)
        rc = -errno; /* written in place: its close reports a late write error */
    o->fd = -1;
    if (rc == 0 && o->tmp && rename(o->tmp, o->path) != 0)
        rc = -errno;
    if (o->tmp) {
        if (rc != 0)
            unlink(o->tmp);
        xfree(o->tmp);
        o->tmp = NULL;
    }
    if (rc != 0) {
        fprintf(stderr, "%s: %s %s: write failed: %s\n", o->prog, o->flag, o->path,
                strerror(-rc));
        if (o->created)
            unlink(o->path);
    }
    o->created = false; /* committed (or removed): kept as it is */
    return rc;
}

void outfile_abandon(struct outfile *o)
{
    if (o->fd >= 0)
        close(o->fd);
    if (o->tmp) {
        unlink(o->tmp);
        xfree(o->tmp);
        o->tmp = NULL;
    }
    if (o->created)
        unlink(o->path);
    o->fd = -1;
    o->created = false;
}

int outfile_stdout(const char *prog, const struct util_buf *b)
{
    if (b->len > 0 && fwrite(b->data, 1, b->len, stdout) != b->len) {
        fprintf(stderr, "%s: stdout: write failed: %s\n", prog, strerror(errno));
        return -1;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: stdout: write failed: %s\n", prog, strerror(errno));
        return -1;
    }
    return 0;
}

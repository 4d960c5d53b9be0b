/* SPDX-License-Identifier: Apache-2.0 */
/* Runs a libFuzzer target over files or directories of inputs without
 * libFuzzer, so every build (and the sanitizer build) replays the corpora as
 * ordinary regression tests. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    fclose(f);
    if (!buf)
        return -1;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int run_path(const char *path, int *count)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*count)++;
        return run_file(path);
    }
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4096];
        snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
        if (run_path(sub, count) != 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    int count = 0, rc = 0;
    for (int i = 1; i < argc; i++)
        if (run_path(argv[i], &count) != 0)
            rc = 1;
    printf("replayed %d inputs\n", count);
    if (count == 0) {
        fprintf(stderr, "no corpus inputs found\n");
        return 1;
    }
    return rc;
}

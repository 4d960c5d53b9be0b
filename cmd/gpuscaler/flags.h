/* SPDX-License-Identifier: Apache-2.0 */
/* The command lines of `simulate` and `plan`: flags written `--key VALUE` or
 * `--key=VALUE`, read one at a time (the errors are printed with the
 * program's name), and the settings they and a file give. */
#ifndef GPUSCALER_CMD_FLAGS_H
#define GPUSCALER_CMD_FLAGS_H

#include <stdbool.h>
#include <stddef.h>

enum cmd_flag { CMD_FLAG_OK, CMD_FLAG_HELP, CMD_FLAG_ERROR };

/**
 * Read the flag at argv[*i]. CMD_FLAG_OK: *key is its name (owned by the
 * caller, xfree) and *value its value, the text after '=' or else the next
 * argument (*i moves past it); for a key that bare() accepts alone (a
 * boolean like --backtest; bare may be NULL) and no '=', *value is NULL and
 * nothing more is read. CMD_FLAG_HELP for -h and --help. CMD_FLAG_ERROR,
 * printed as "<prog>: ...", for an argument that is not a flag, a key that
 * known() refuses, or a missing value.
 */
enum cmd_flag cmd_flag_next(const char *prog, int argc, char **argv, int *i,
                            bool (*known)(const char *key), bool (*bare)(const char *key),
                            char **key, const char **value);

/** msg without a leading "<key>: " (the message of a setter), for a line
 *  that names the flag already: "--scale: scale: ..." reads better as
 *  "--scale: ...". */
const char *cmd_strip_key(const char *key, const char *msg);

/** One key = value setting, with where it came from ("--scale",
 *  "sim.yaml:3") for messages; all three strings owned. */
struct cmd_setting {
    char *key, *value, *where;
    bool from_flag;
};

/** Settings in the order given (a later one of a key wins when applied). */
struct cmd_settings {
    struct cmd_setting *v;
    size_t n, cap;
};

/** Append a copy of key and value; takes ownership of where. */
void cmd_settings_add(struct cmd_settings *s, const char *key, const char *value, char *where,
                      bool from_flag);
void cmd_settings_free(struct cmd_settings *s);

/** A flag whose value is a path the command keeps (--trace, --json, ...). */
struct cmd_path_flag {
    const char *key;
    char **path; /**< owned by the command: replaced by a copy of the value */
};

/**
 * Take the flag cmd_flag_next() read: a key of paths[] sets its path (a later
 * one wins); any other becomes a setting of s, from the flag "--<key>".
 * Frees key. Returns 0, or -1 (printed as "<prog>: --<key>: missing value")
 * for an empty path ("--trace=").
 */
int cmd_flag_take(const char *prog, char *key, const char *value,
                  const struct cmd_path_flag *paths, size_t npaths, struct cmd_settings *s);

/** The setting of s that key was last given by (s applies in order, the last
 *  wins), or NULL. */
const struct cmd_setting *cmd_settings_last(const struct cmd_settings *s, const char *key);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* prom internals shared between the module's files; no other module includes this. */
#ifndef GPUSCALER_PROM_INT_H
#define GPUSCALER_PROM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prom/prom.h"

struct want {
    char *s;
    size_t len;
    enum prom_match how;
};

struct prom_parser {
    struct prom_parser_opts opts;
    prom_sample_cb cb;
    void *arg;
    struct want *wants;
    size_t nwants;

    char *pend; /* unfinished line carried between chunks */
    size_t pend_len, pend_cap;
    uint64_t pend_joined; /* raw '\n's inside it (a label value's), counted as lines at its end */
    bool joining; /* it goes on past a raw '\n' in a label value: skip_lex finds its end */

    char *fam; /* family of the last # HELP/# TYPE/# UNIT, NUL-terminated */
    size_t fam_len, fam_cap;
    enum prom_type fam_type;
    bool fam_wanted;
    bool fam_legacy; /* fam is a legacy name, which a sample line may start with */

    char *scratch; /* per-line: sample name, then label name/value pairs */
    size_t scratch_cap, scratch_off;
    struct prom_label *labels;
    size_t labels_cap;

    uint64_t bytes, lines, samples, emitted;
    bool saw_eof, finished;
    bool skipping; /* inside a line over max_line that is an unwanted sample's or a comment's */
    bool skip_comment; /* ... a comment's (or a long # HELP's): not counted as a sample */
    unsigned char skip_lex; /* where that line's lexer stands (stream.c, enum skip_lex) */
    uint64_t skip_line;     /* the line it began on */
    bool open_quote; /* the last line parsed failed inside a quoted label value */
    uint64_t parsed; /* bytes handed to prom_line_parse (its tests: each byte read once) */
    struct prom_error err; /* err.code != 0: sticky error */
};

/** Parse one complete line (no '\n'); counts it. 0, or the error code with p->err set. */
int prom_line_parse(struct prom_parser *p, const char *line, size_t n);

/** Whether a line longer than max_line, of which s[0..n) is the start, may be
 *  skipped unread: a sample line whose metric name (complete within s) the
 *  want-filter leaves out. Metadata, comments and wanted samples are not. */
bool prom_line_skippable(const struct prom_parser *p, const char *s, size_t n);

/** What to do with a line longer than max_line (prom_line_over_cap). */
enum { PROM_OVER_FAIL = 0, PROM_OVER_SAMPLE = 1, PROM_OVER_COMMENT = 2 };

/** A line longer than max_line, of which s[0..n) is the start (n = max_line):
 *  PROM_OVER_SAMPLE for an unwanted sample's (prom_line_skippable), whose rest
 *  is skipped as a sample line's; PROM_OVER_COMMENT for a comment of the text
 *  format, or a # HELP whose name is complete within s (the family is set
 *  from it, the text within s checked, as for a whole line), whose rest is
 *  skipped up to the next '\n'; PROM_OVER_FAIL for anything else (the line
 *  cap's error); or a negative errno with p->err set when the # HELP head is
 *  malformed. The line is not counted. */
int prom_line_over_cap(struct prom_parser *p, const char *s, size_t n);

/** Does a PROM_MATCH_NAME pattern name the current family? */
bool prom_family_wanted(const struct prom_parser *p);

/** Is s[0..n) a valid metric name (non-empty)? */
bool prom_name_valid(const char *s, size_t n);

/** May c be part of a metric name (after its first byte)? */
bool prom_name_char(char c);

/** Parse s[0..len) as a base-10 int64 with optional sign (Go ParseInt). 0, -EINVAL for bad
 *  syntax, or -ERANGE for a well-formed number beyond int64 (*out untouched). */
int prom_num_int64(const char *s, size_t len, int64_t *out);

/** 1 if s[0..len) is valid UTF-8 (no overlongs, no surrogates), else 0. */
int prom_utf8_valid(const unsigned char *s, size_t len);

#endif

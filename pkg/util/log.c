/* SPDX-License-Identifier: Apache-2.0 */
/* util/log: one line per event, logfmt or JSON, with namespace and deployment
 * on every line about a workload.
 *
 * The format and level are the only process-wide state in gpuscaler; main sets
 * them once before starting the loop. */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static enum util_log_format log_format = UTIL_LOG_LOGFMT;
static enum util_log_level log_min = UTIL_LOG_INFO;
static FILE *log_stream;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void util_log_setup(enum util_log_format fmt, enum util_log_level min)
{
    log_format = fmt;
    log_min = min;
}

void util_log_set_stream(void *file)
{
    log_stream = file;
}

int util_log_format_parse(const char *s, enum util_log_format *out)
{
    if (strcasecmp(s, "json") == 0)
        *out = UTIL_LOG_JSON;
    else if (strcasecmp(s, "logfmt") == 0)
        *out = UTIL_LOG_LOGFMT;
    else
        return -EINVAL;
    return 0;
}

int util_log_level_parse(const char *s, enum util_log_level *out)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(level_names); i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (enum util_log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

/* logfmt value: bare when safe, else quoted with escapes. */
static void logfmt_value(struct util_buf *b, const char *v)
{
    bool bare = *v != '\0';
    for (const char *p = v; *p; p++) {
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p >= 0x7f) {
            bare = false;
            break;
        }
    }
    if (bare)
        util_buf_puts(b, v);
    else
        util_buf_json_str(b, v);
}

static void field(struct util_buf *b, const char *k, const char *v, bool first)
{
    if (log_format == UTIL_LOG_JSON) {
        if (!first)
            util_buf_puts(b, ",");
        util_buf_json_str(b, k);
        util_buf_puts(b, ":");
        util_buf_json_str(b, v);
    } else {
        if (!first)
            util_buf_puts(b, " ");
        util_buf_puts(b, k);
        util_buf_puts(b, "=");
        logfmt_value(b, v);
    }
}

void util_log(enum util_log_level lvl, const char *subsys, const char *ns, const char *deploy,
              const char *fmt, ...)
{
    if (lvl < log_min)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    char ts[40];
    int64_t now = util_now_unix_ms();
    char base[32];
    util_format_rfc3339(now, base, sizeof(base));
    /* insert milliseconds before the Z */
    size_t bl = strlen(base);
    if (bl > 0)
        base[bl - 1] = '\0';
    snprintf(ts, sizeof(ts), "%s.%03dZ", base, (int)(now % 1000));

    struct util_buf b = {0};
    if (log_format == UTIL_LOG_JSON)
        util_buf_puts(&b, "{");
    field(&b, "time", ts, true);
    field(&b, "level", level_names[lvl], false);
    field(&b, "subsys", subsys ? subsys : "main", false);
    if (ns)
        field(&b, "namespace", ns, false);
    if (deploy)
        field(&b, "deployment", deploy, false);
    field(&b, "msg", msg, false);
    if (log_format == UTIL_LOG_JSON)
        util_buf_puts(&b, "}");
    util_buf_puts(&b, "\n");
    FILE *out = log_stream ? log_stream : stderr;
    fwrite(b.data, 1, b.len, out);
    fflush(out);
    util_buf_free(&b);
}

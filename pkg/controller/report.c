/* SPDX-License-Identifier: Apache-2.0 */
/* controller/report: what the controller tells the cluster and the user:
 * Kubernetes Events (rate-limited per workload and reason), trace recording
 * for `simulate`. The gpuscaler.io/status annotation is in status.c,
 * checkpoints in checkpoint.c, the HPAs beside gpuscaler in hpa.c. */
#include "controller-int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"
#include "trace/trace.h"

#define SUB "controller"
#define EVENT_MIN_INTERVAL_MS (60LL * 1000)
#define EVENT_WARN_INTERVAL_MS (10LL * 60 * 1000)

/* ---- events --------------------------------------------------------------- */

/* Rate-limit slots of the Event reasons; the actions come first. */
static const char *const event_reasons[] = {
    "ScaledOut",     "PredictiveScaleOut", "SLAScaleOut",       "LatencyScaleOut",
    "ScaledIn",      "PredictiveScaleIn",  "MetricsUnavailable", "InvalidAnnotation",
    "ScalerConflict", "AtMaxReplicas",      "CapacityMismatch",  "GPUCapacityExhausted",
    "ReplicasStalled", "Parked",        "ExternalMetricsNotServed", "Paused",
    "HPASettings",   "DuplicateScrape",
};
_Static_assert(UTIL_ARRAY_LEN(event_reasons) == CTL_EVENT_SLOTS,
               "ctl_wl.last_event_ms has a slot per reason");
#define ACTION_SLOTS 6
#define INVALID_SLOT 7

static int reason_slot(const char *reason)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(event_reasons); i++)
        if (strcmp(event_reasons[i], reason) == 0)
            return (int)i;
    return CTL_EVENT_SLOTS;
}

struct simple_req {
    struct controller *c;
    char *what;
    char *ns, *name; /* the workload the request is about, or NULL */
};

static void simple_free(struct simple_req *r)
{
    struct controller *c = r->c;
    c->report_inflight--;
    xfree(r->what);
    xfree(r->ns);
    xfree(r->name);
    xfree(r);
    ctl_status_pump(c); /* the budget has room again */
    ctl_io_end(c);
}

static bool budget(const struct controller *c)
{
    return c->report_inflight < CTL_REPORT_MAX_INFLIGHT;
}

static void simple_done(const struct kube_result *res, void *arg)
{
    struct simple_req *r = arg;
    if (res->err != 0)
        LOGW_WARN(SUB, r->ns, r->name, "%s failed: HTTP %ld %s %s", r->what, res->status,
                  res->reason, res->message);
    simple_free(r);
}

static struct simple_req *simple_new(struct controller *c, const struct ctl_wl *w,
                                     const char *what)
{
    struct simple_req *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->what = xstrdup(what);
    r->ns = w ? xstrdup(w->ns) : NULL;
    r->name = w ? xstrdup(w->name) : NULL;
    c->report_inflight++;
    ctl_io_begin(c);
    return r;
}

static void simple_fail(struct simple_req *r, int rc)
{
    LOGW_WARN(SUB, r->ns, r->name, "%s: %s", r->what, strerror(-rc));
    simple_free(r);
}

/* Returns whether the Event was sent (its create started, or a dry run). */
static bool event_send(struct controller *c, struct ctl_wl *w, const char *type,
                       const char *reason, const char *message, bool now_too)
{
    int64_t now = util_now_unix_ms();
    int slot = reason_slot(reason);
    int64_t min = strcmp(type, "Warning") == 0 ? EVENT_WARN_INTERVAL_MS : EVENT_MIN_INTERVAL_MS;
    /* actions and invalid annotations always get their Event; the rest wait
     * for a tick with room */
    bool action = slot < ACTION_SLOTS;
    /* another invalid annotation within the interval is news too; the same
     * one again (annotations flipping between a valid and that invalid
     * value) waits out the interval */
    bool news = now_too;
    if (slot == INVALID_SLOT) {
        uint64_t h = 14695981039346656037ULL; /* FNV-1a */
        for (const char *p = message; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        news = h != w->invalid_told;
        w->invalid_told = h;
    }
    if (!action && !news && w->last_event_ms[slot] && now - w->last_event_ms[slot] < min) {
        c->events_suppressed++;
        return false;
    }
    if (!action && slot != INVALID_SLOT && !budget(c))
        return false;
    w->last_event_ms[slot] = now;
    if (c->dry_run)
        return true;
    char ts[40], name[300];
    util_format_rfc3339(now, ts, sizeof(ts));
    /* messages quote outside input (annotation values, cut to a length):
     * jansson refuses invalid UTF-8, and the Event would be lost */
    char *msg = xstrdup(message);
    util_utf8_scrub(msg);
    /* a name cut to 200 bytes must still end its DNS label (not in '-' or
     * '.', or the API server refuses the Event) */
    int cut = (int)strnlen(w->name, 200);
    while (cut > 0 && (w->name[cut - 1] == '-' || w->name[cut - 1] == '.'))
        cut--;
    snprintf(name, sizeof(name), "%.*s.%" PRIx64 "%04x", cut, w->name, (uint64_t)now,
             (unsigned)(c->events_sent & 0xffff));
    json_t *ev = json_pack(
        "{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:{s:s,s:s},s:s,s:s,s:I,"
        "s:s,s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace", w->ns,
        "involvedObject", "apiVersion", "apps/v1", "kind", "Deployment", "name", w->name,
        "namespace", w->ns, "uid", w->uid, "reason", reason, "message", msg, "type", type,
        "source", "component", "gpuscaler", "host", c->identity, "firstTimestamp", ts,
        "lastTimestamp", ts, "count", (json_int_t)1, "reportingComponent", "gpuscaler",
        "reportingInstance", c->identity);
    xfree(msg);
    if (!ev)
        return false;
    c->events_sent++;
    struct simple_req *r = simple_new(c, w, "creating an Event");
    int rc = kube_event_create(c->kube, w->ns, ev, simple_done, r);
    json_decref(ev);
    if (rc != 0)
        simple_fail(r, rc);
    return rc == 0;
}

void ctl_event(struct controller *c, struct ctl_wl *w, const char *type, const char *reason,
               const char *message)
{
    event_send(c, w, type, reason, message, false);
}

bool ctl_event_now(struct controller *c, struct ctl_wl *w, const char *type, const char *reason,
                   const char *message)
{
    return event_send(c, w, type, reason, message, true);
}

/* ---- recording ------------------------------------------------------------- */

/* One write in flight per workload, so rows land in order; rows produced
 * meanwhile wait in rec_pending. A workload freed meanwhile leaves the
 * file's close to its write, which must not go to whatever file the number
 * is given to next. */
struct ctl_rec_write {
    uv_fs_t req;
    struct controller *c;
    char *ns, *name;
    char *data;
    uv_file fd;
    bool close_after; /* its workload is gone: close fd when written */
};

static void rec_flush(struct controller *c, struct ctl_wl *w);

static void rec_written(uv_fs_t *req)
{
    struct ctl_rec_write *r = util_container_of(req, struct ctl_rec_write, req);
    if (req->result < 0)
        LOGW_WARN(SUB, r->ns, r->name, "recording: write failed: %s",
                  uv_strerror((int)req->result));
    uv_fs_req_cleanup(req);
    if (r->close_after) {
        uv_fs_t creq;
        uv_fs_close(NULL, &creq, r->fd, NULL);
        uv_fs_req_cleanup(&creq);
    }
    /* its workload's, not one of that name made since */
    struct ctl_wl *w = ctl_wl_find(r->c, r->ns, r->name);
    if (w && w->rec_req == r) {
        w->rec_req = NULL;
        rec_flush(r->c, w);
    }
    struct controller *c = r->c;
    xfree(r->ns);
    xfree(r->name);
    xfree(r->data);
    xfree(r);
    ctl_io_end(c);
}

static void rec_flush(struct controller *c, struct ctl_wl *w)
{
    if (w->rec_req || w->record_fd < 0 || w->rec_pending.len == 0 || c->closing)
        return;
    struct ctl_rec_write *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->fd = w->record_fd;
    r->ns = xstrdup(w->ns);
    r->name = xstrdup(w->name);
    size_t len = w->rec_pending.len;
    r->data = util_buf_steal(&w->rec_pending);
    uv_buf_t b = uv_buf_init(r->data, (unsigned)len);
    ctl_io_begin(c);
    if (uv_fs_write(c->loop, &r->req, w->record_fd, &b, 1, -1, rec_written) != 0) {
        xfree(r->ns);
        xfree(r->name);
        xfree(r->data);
        xfree(r);
        ctl_io_end(c);
        return;
    }
    w->rec_req = r;
}

int64_t ctl_record_last_t(int fd, int64_t *size)
{
    char buf[256];
    int64_t off = *size > (int64_t)sizeof(buf) - 1 ? *size - (int64_t)sizeof(buf) + 1 : 0;
    uv_fs_t req;
    uv_buf_t b = uv_buf_init(buf, (unsigned)(*size - off));
    int n = uv_fs_read(NULL, &req, fd, &b, 1, off, NULL);
    uv_fs_req_cleanup(&req);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    if (buf[n - 1] != '\n') {
        /* a row cut by a crash or a full disk: cut back to the last whole
         * line, or the next row would be appended to it and the file no
         * longer parse (a line longer than the tail read is no row anyway:
         * ended with a line break) */
        char *nl = strrchr(buf, '\n');
        int64_t keep = nl ? off + (nl - buf) + 1 : off == 0 ? 0 : -1;
        int rc = -1;
        if (keep >= 0) {
            rc = uv_fs_ftruncate(NULL, &req, fd, keep, NULL);
            uv_fs_req_cleanup(&req);
        }
        if (rc == 0) {
            *size = keep;
            n = nl ? (int)(nl - buf) + 1 : 0;
            buf[n] = '\0';
        } else {
            uv_buf_t lf = uv_buf_init((char *)"\n", 1);
            (void)uv_fs_write(NULL, &req, fd, &lf, 1, -1, NULL);
            uv_fs_req_cleanup(&req);
            return -1;
        }
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    char *line = strrchr(buf, '\n');
    line = line ? line + 1 : (off == 0 ? buf : NULL); /* a line cut at the read's start: none */
    if (!line || *line < '0' || *line > '9')
        return -1;
    char *end;
    long long t = strtoll(line, &end, 10);
    return *end == ',' && t >= 0 && t < INT64_MAX / 1000 - 1 ? (int64_t)t : -1;
}

void ctl_record(struct controller *c, struct ctl_wl *w, int64_t now_ms, double rate)
{
    int64_t dt = c->cfg->decision_interval_ms;
    int64_t t = now_ms / dt * dt;
    if (t < w->record_next_ms)
        return;
    if (w->record_fd < 0) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s_%s.csv", c->record_dir, w->ns, w->name);
        uv_fs_t req;
        /* opened once per workload; the only synchronous file calls */
        int fd = uv_fs_open(NULL, &req, path, O_RDWR | O_CREAT | O_APPEND, 0644, NULL);
        uv_fs_req_cleanup(&req);
        if (fd < 0) {
            LOGW_WARN(SUB, w->ns, w->name, "recording: cannot open %s: %s", path,
                      uv_strerror(fd));
            w->record_next_ms = INT64_MAX; /* don't retry every tick */
            return;
        }
        w->record_fd = fd;
        int64_t size = uv_fs_fstat(NULL, &req, fd, NULL) == 0 ? (int64_t)req.statbuf.st_size
                                                              : -1;
        uv_fs_req_cleanup(&req);
        /* a file continued after a restart keeps its one header, and its
         * rows increasing: a restart within an interval of its last row
         * would write that row's time again, and the trace not parse */
        int64_t last = size > 0 ? ctl_record_last_t(fd, &size) : -1;
        if (size == 0)
            util_buf_puts(&w->rec_pending,
                          "# gpuscaler run --record: t_seconds (UNIX), requests per interval\n"
                          "t_seconds,requests\n");
        if (last >= 0 && (last + 1) * 1000 > w->record_next_ms)
            w->record_next_ms = (last + 1) * 1000;
        if (last >= 0 && last * 1000 > t + dt)
            LOGW_WARN(SUB, w->ns, w->name, "recording: %s ends %lld s ahead of this clock: rows "
                      "resume after it", path, (long long)(last - t / 1000));
        if (t < w->record_next_ms)
            return;
    }
    util_buf_printf(&w->rec_pending, "%lld,%.3f\n", (long long)(t / 1000),
                    rate * (double)dt / 1000.0);
    w->record_next_ms = t + dt;
    rec_flush(c, w);
}

void ctl_record_close(struct ctl_wl *w)
{
    if (w->rec_req) { /* closed once written */
        w->rec_req->close_after = true;
        w->rec_req = NULL;
    } else if (w->record_fd >= 0) {
        uv_fs_t req;
        uv_fs_close(NULL, &req, w->record_fd, NULL);
        uv_fs_req_cleanup(&req);
    }
    w->record_fd = -1;
    util_buf_free(&w->rec_pending);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* extmetrics/encode: metric names and the JSON documents of the API (APIGroup, APIResourceList, ExternalMetricValueList,
 * Status), built with jansson in the field order the Go apiserver uses. */
#include "extmetrics-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const metric_names[EXTMETRICS_METRIC_COUNT] = {
    [EXTMETRICS_DESIRED_REPLICAS] = "gpuscaler_desired_replicas",
    [EXTMETRICS_REQUESTS_PER_GPU] = "gpuscaler_requests_per_gpu",
    [EXTMETRICS_FORECAST_REQUESTS_PER_GPU] = "gpuscaler_forecast_requests_per_gpu",
    [EXTMETRICS_UTILIZATION] = "gpuscaler_utilization",
};

const char *extmetrics_metric_name(enum extmetrics_metric m)
{
    if ((int)m < 0 || m >= EXTMETRICS_METRIC_COUNT)
        return NULL;
    return metric_names[m];
}

int extmetrics_metric_lookup(const char *name)
{
    for (int i = 0; i < EXTMETRICS_METRIC_COUNT; i++)
        if (strcasecmp(name, metric_names[i]) == 0)
            return i;
    return -ENOENT;
}

char *em_json_dump(json_t *doc, size_t *len)
{
    const size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER;
    size_t n = json_dumpb(doc, NULL, 0, flags);
    char *s = xmalloc(n + 1);
    json_dumpb(doc, s, n, flags);
    s[n] = '\0';
    json_decref(doc);
    if (len)
        *len = n;
    return s;
}

/* Status messages quote client input: keep them printable ASCII. */
static char *printable(const char *m)
{
    char *s = xstrdup(m);
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            *p = '?';
    return s;
}

json_t *em_status(int code, const char *reason, const char *message)
{
    json_t *st = json_object();
    json_object_set_new(st, "kind", json_string("Status"));
    json_object_set_new(st, "apiVersion", json_string("v1"));
    json_object_set_new(st, "metadata", json_object());
    json_object_set_new(st, "status", json_string("Failure"));
    char *msg = printable(message);
    json_object_set_new(st, "message", json_string(msg));
    xfree(msg);
    json_object_set_new(st, "reason", json_string(reason));
    json_object_set_new(st, "code", json_integer(code));
    return st;
}

const char *em_reason(int code)
{
    switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 406: return "NotAcceptable";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "Unknown";
    }
}

json_t *em_api_group(void)
{
    json_t *gv = json_object();
    json_object_set_new(gv, "groupVersion", json_string(EXTMETRICS_GROUP "/" EXTMETRICS_VERSION));
    json_object_set_new(gv, "version", json_string(EXTMETRICS_VERSION));
    json_t *g = json_object();
    json_object_set_new(g, "kind", json_string("APIGroup"));
    json_object_set_new(g, "apiVersion", json_string("v1"));
    json_object_set_new(g, "name", json_string(EXTMETRICS_GROUP));
    json_t *versions = json_array();
    json_array_append(versions, gv);
    json_object_set_new(g, "versions", versions);
    json_object_set_new(g, "preferredVersion", gv);
    return g;
}

json_t *em_api_group_list(void)
{
    json_t *g = em_api_group();
    json_object_del(g, "kind");
    json_object_del(g, "apiVersion");
    json_t *groups = json_array();
    json_array_append_new(groups, g);
    json_t *l = json_object();
    json_object_set_new(l, "kind", json_string("APIGroupList"));
    json_object_set_new(l, "apiVersion", json_string("v1"));
    json_object_set_new(l, "groups", groups);
    return l;
}

json_t *em_resource_list(void)
{
    json_t *l = json_object();
    json_object_set_new(l, "kind", json_string("APIResourceList"));
    json_object_set_new(l, "apiVersion", json_string("v1"));
    json_object_set_new(l, "groupVersion", json_string(EXTMETRICS_GROUP "/" EXTMETRICS_VERSION));
    json_t *res = json_array();
    for (int i = 0; i < EXTMETRICS_METRIC_COUNT; i++) {
        json_t *r = json_object();
        json_object_set_new(r, "name", json_string(metric_names[i]));
        json_object_set_new(r, "singularName", json_string(""));
        json_object_set_new(r, "namespaced", json_true());
        json_object_set_new(r, "kind", json_string("ExternalMetricValueList"));
        json_t *verbs = json_array();
        json_array_append_new(verbs, json_string("get"));
        json_object_set_new(r, "verbs", verbs);
        json_array_append_new(res, r);
    }
    json_object_set_new(l, "resources", res);
    return l;
}

json_t *em_value_list(void)
{
    json_t *l = json_object();
    json_object_set_new(l, "kind", json_string("ExternalMetricValueList"));
    json_object_set_new(l, "apiVersion", json_string(EXTMETRICS_GROUP "/" EXTMETRICS_VERSION));
    json_object_set_new(l, "metadata", json_object());
    json_object_set_new(l, "items", json_array());
    return l;
}

int em_value_item(json_t *list, const char *metric, const struct extmetrics_label *labels,
                  size_t nlabels, const struct extmetrics_sample *s)
{
    char q[64], ts[40];
    if (extmetrics_quantity_milli(s->value, q, sizeof(q)) < 0)
        return -EINVAL;
    util_format_rfc3339(s->timestamp_ms, ts, sizeof(ts));
    json_t *it = json_object();
    json_object_set_new(it, "metricName", json_string(metric));
    json_t *ml = json_object();
    for (size_t i = 0; i < nlabels; i++)
        json_object_set_new(ml, labels[i].key, json_string(labels[i].value));
    json_object_set_new(it, "metricLabels", ml);
    json_object_set_new(it, "timestamp", json_string(ts));
    if (s->window_s > 0)
        json_object_set_new(it, "window", json_integer(s->window_s));
    json_object_set_new(it, "value", json_string(q));
    json_array_append_new(json_object_get(list, "items"), it);
    return 0;
}

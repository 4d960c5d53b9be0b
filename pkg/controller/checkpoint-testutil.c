/* SPDX-License-Identifier: Apache-2.0 */
/* Test support for the checkpoint code (see checkpoint-testutil.h): the
 * Deployments the checkpoint unit tests and fuzz target save and restore. */
#include "controller/checkpoint-testutil.h"

#include <stdlib.h>

#include "forecast/forecast.h"
#include "kube/kube.h"
#include "shard/shard.h"

struct ctl_wl *ctl_ckpt_test_wl_new(const char *ns, const char *name, const char *uid)
{
    struct ctl_wl *w = xcalloc(1, sizeof(*w));
    w->ns = xstrdup(ns);
    w->name = xstrdup(name);
    w->uid = xstrdup(uid);
    capacity_init(&w->cap);
    policy_config_init(&w->cfg.policy);
    struct forecast_config fc;
    controller_forecast_config(&w->cfg.policy, &fc);
    w->fc = forecast_new(&fc);
    if (!w->fc)
        abort(); /* the default configuration: never refused */
    return w;
}

int ctl_ckpt_test_wl_history(struct ctl_wl *w, int n)
{
    struct forecast_config fc;
    controller_forecast_config(&w->cfg.policy, &fc);
    int64_t t = util_now_unix_ms() - (int64_t)n * fc.bucket_ms;
    uint32_t h = (uint32_t)shard_hash(w->ns, w->name);
    for (int i = 0; i < n; i++) {
        h = h * 1103515245u + 12345u;
        int rc = forecast_observe(w->fc, t + (int64_t)i * fc.bucket_ms,
                                  5.0 + (double)(h >> 16) / 655.36);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void ctl_ckpt_test_wl_free(struct ctl_wl *w)
{
    if (!w)
        return;
    forecast_free(w->fc);
    xfree(w->ns);
    xfree(w->name);
    xfree(w->uid);
    xfree(w);
}

void ctl_ckpt_test_table_add(struct controller *c, struct ctl_wl *w)
{
    size_t b = (size_t)(shard_hash(w->ns, w->name) % CTL_WL_BUCKETS);
    w->next = c->table[b];
    c->table[b] = w;
    c->nwl++;
}

void ctl_ckpt_test_table_free(struct controller *c)
{
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++)
        while (c->table[b]) {
            struct ctl_wl *w = c->table[b];
            c->table[b] = w->next;
            ctl_ckpt_test_wl_free(w);
        }
    c->nwl = 0;
}

void ctl_ckpt_test_merge(json_t *cm, const json_t *bin, const json_t *text)
{
    static const char *const fields[] = {"binaryData", "data"};
    const json_t *maps[] = {bin, text};
    for (size_t f = 0; f < 2; f++) {
        json_t *m = json_object_get(cm, fields[f]);
        if (!json_is_object(m)) {
            m = json_object();
            json_object_set_new(cm, fields[f], m);
        }
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)maps[f], key, v) {
            if (json_is_null(v))
                json_object_del(m, key);
            else
                json_object_set(m, key, v);
        }
        if (json_object_size(m) == 0)
            json_object_del(cm, fields[f]);
    }
}

long long ctl_ckpt_test_size(const json_t *cm)
{
    long long n = 0;
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(cm, "data"), key, v)
        n += (long long)json_string_length(v);
    json_object_foreach(json_object_get(cm, "binaryData"), key, v) {
        char *raw = NULL;
        size_t len = 0;
        if (kube_base64_decode(json_string_value(v) ? json_string_value(v) : "",
                               json_string_length(v), &raw, &len) != 0)
            return -1;
        xfree(raw);
        n += (long long)len;
    }
    return n;
}

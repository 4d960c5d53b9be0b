/* SPDX-License-Identifier: Apache-2.0 */
/* controller/hpa: the HorizontalPodAutoscalers beside gpuscaler. Listed once
 * a minute in every namespace with a tracked Deployment:
 * - mode scale: an HPA (or the KEDA ScaledObject behind it) that targets a
 *   Deployment is another scaler, and gpuscaler does not write (decide.c);
 * - mode external-metric: the HPA is what applies gpuscaler's count, and
 *   its settings can keep it from doing so (no HPA, bounds narrower than
 *   gpuscaler's, the default 5-minute scale-down window, scale-up policies
 *   slower than the defaults, a tolerance):
 *   ctl_hpa_advice() says which, and the leader tells it in an HPASettings
 *   Warning (docs/external-metrics.md section 3). */
#include "controller-int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kube/kube.h"

#define SUB "controller"
#define HPA_DEFAULT_DOWN_WINDOW_S 300 /* behavior.scaleDown.stabilizationWindowSeconds */

/* ---- what an HPA asks (pure) --------------------------------------------------- */

/* A resource.Quantity as the HPA's fields carry it ("1", "1000m", "0.05"),
 * or a JSON number; NAN when it is neither. */
static double quantity(const json_t *v)
{
    if (json_is_number(v))
        return json_number_value(v);
    const char *s = json_string_value(v);
    if (!s || !*s)
        return NAN;
    char *end = NULL;
    double x = strtod(s, &end);
    if (end == s)
        return NAN;
    if (strcmp(end, "m") == 0)
        return x / 1000.0;
    return *end ? NAN : x;
}

/* KEDA's ScaledObject behind an HPA it made: the HPA's controller owner
 * (SetControllerReference), else its labels (app.kubernetes.io/managed-by
 * keda-operator, part-of the ScaledObject); NULL for any other HPA. */
static const char *keda_owner(const json_t *meta)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(meta, "ownerReferences"), i, o) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *name = json_string_value(json_object_get(o, "name"));
        if (kind && name && strcmp(kind, "ScaledObject") == 0)
            return name;
    }
    const json_t *labels = json_object_get(meta, "labels");
    const char *by = json_string_value(json_object_get(labels, "app.kubernetes.io/managed-by"));
    const char *of = json_string_value(json_object_get(labels, "app.kubernetes.io/part-of"));
    return by && of && strcmp(by, "keda-operator") == 0 ? of : NULL;
}

static int32_t int_or(const json_t *v, int32_t dflt)
{
    if (!json_is_integer(v))
        return dflt;
    json_int_t x = json_integer_value(v);
    return x < 0 ? 0 : x > INT32_MAX ? INT32_MAX : (int32_t)x;
}

void ctl_hpa_facts_add(struct ctl_hpa_facts *f, const json_t *hpa)
{
    f->count++;
    if (f->count > 1)
        return; /* the first one's settings; the count says there are more */
    const json_t *meta = json_object_get(hpa, "metadata");
    const json_t *spec = json_object_get(hpa, "spec");
    const char *name = json_string_value(json_object_get(meta, "name"));
    snprintf(f->name, sizeof(f->name), "%s", name && *name ? name : "?");
    f->keda = keda_owner(meta) != NULL;
    f->min_replicas = int_or(json_object_get(spec, "minReplicas"), 1);
    f->max_replicas = int_or(json_object_get(spec, "maxReplicas"), 0);
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(spec, "metrics"), i, m) {
        const char *type = json_string_value(json_object_get(m, "type"));
        const json_t *ext = json_object_get(m, "external");
        const char *metric =
            json_string_value(json_object_get(json_object_get(ext, "metric"), "name"));
        /* the HPA controller asks for the name lower-cased (client-go's
         * external metrics client), so any case reads gpuscaler's */
        if (!type || strcmp(type, "External") != 0 || !metric ||
            strncasecmp(metric, "gpuscaler_", 10) != 0)
            continue;
        f->reads_gpuscaler = true;
        if (strcasecmp(metric, "gpuscaler_desired_replicas") != 0)
            continue;
        f->reads_desired = true;
        /* no selector, or an empty one, selects every tracked Deployment of
         * the namespace, and the HPA sums their counts */
        const json_t *sel = json_object_get(json_object_get(ext, "metric"), "selector");
        f->desired_unselected =
            json_object_size(json_object_get(sel, "matchLabels")) == 0 &&
            json_array_size(json_object_get(sel, "matchExpressions")) == 0;
        const json_t *target = json_object_get(ext, "target");
        const char *ttype = json_string_value(json_object_get(target, "type"));
        if (ttype && strcmp(ttype, "AverageValue") == 0 &&
            quantity(json_object_get(target, "averageValue")) == 1.0)
            f->desired_average_one = true;
    }
    const json_t *beh = json_object_get(spec, "behavior");
    const json_t *up = json_object_get(beh, "scaleUp"), *down = json_object_get(beh, "scaleDown");
    f->up_window_s = int_or(json_object_get(up, "stabilizationWindowSeconds"), 0);
    f->down_window_s =
        int_or(json_object_get(down, "stabilizationWindowSeconds"), HPA_DEFAULT_DOWN_WINDOW_S);
    f->up_tolerance = quantity(json_object_get(up, "tolerance"));
    f->down_tolerance = quantity(json_object_get(down, "tolerance"));
    const char *sel = json_string_value(json_object_get(up, "selectPolicy"));
    f->up_disabled = sel && strcmp(sel, "Disabled") == 0;
    sel = json_string_value(json_object_get(down, "selectPolicy"));
    f->down_disabled = sel && strcmp(sel, "Disabled") == 0;
    sel = json_string_value(json_object_get(up, "selectPolicy"));
    f->up_select_min = sel && strcmp(sel, "Min") == 0;
    const json_t *pol;
    json_array_foreach(json_object_get(up, "policies"), i, pol) {
        const char *type = json_string_value(json_object_get(pol, "type"));
        int32_t v = int_or(json_object_get(pol, "value"), 0);
        int32_t per = int_or(json_object_get(pol, "periodSeconds"), 0);
        /* the API server admits Pods and Percent, value > 0, period 1-1800 s */
        if (!type || (strcmp(type, "Pods") != 0 && strcmp(type, "Percent") != 0) || v <= 0 ||
            per <= 0)
            continue;
        if (f->n_up_policies == CTL_HPA_POLICIES) {
            f->up_policies_more = true;
            continue;
        }
        f->up_policies[f->n_up_policies++] =
            (struct ctl_hpa_policy){.pods = strcmp(type, "Pods") == 0, .value = v,
                                    .period_s = per > 1800 ? 1800 : per};
    }
}

/* ---- how fast it scales up (pure) ----------------------------------------------- */

#define HPA_SYNC_S 15     /* kube-controller-manager's --horizontal-pod-autoscaler-sync-period */
#define HPA_UP_SYNCS 240  /* an hour of syncs: a slower HPA is "more than an hour" */

static const struct ctl_hpa_policy default_up[] = {
    {.pods = true, .value = 4, .period_s = 15},
    {.pods = false, .value = 100, .period_s = 15},
};

/* The syncs after the first it takes an HPA under these scale-up policies
 * to go from `from` to `to` replicas when asked for `to` (the HPA
 * controller's calculateScaleUpLimitWithScalingRules: each policy allows a
 * step from the count its period began with, the replicas added by the
 * scale-ups within the period taken off; selectPolicy Max takes the largest
 * step, Min the smallest; never below the current count), or
 * HPA_UP_SYNCS + 1 when it takes more. */
static int up_syncs(const struct ctl_hpa_policy *p, size_t n, bool sel_min, int32_t from,
                    int32_t to)
{
    int64_t pre[HPA_UP_SYNCS + 2] = {0}; /* pre[k]: replicas added before sync k */
    int64_t r = from;
    for (int k = 0; k <= HPA_UP_SYNCS; k++) {
        if (r >= to)
            return k ? k - 1 : 0;
        int64_t limit = sel_min ? INT64_MAX : INT64_MIN;
        for (size_t i = 0; i < n; i++) {
            /* scale-ups at syncs d = 1 .. back with d x 15 s < the period */
            int back = (p[i].period_s + HPA_SYNC_S - 1) / HPA_SYNC_S - 1;
            int64_t start = r - (pre[k] - pre[k - back > 0 ? k - back : 0]);
            double prop = p[i].pods ? (double)start + p[i].value
                                    : ceil((double)start * (1.0 + p[i].value / 100.0));
            int64_t q = prop >= (double)to ? to : (int64_t)prop;
            limit = sel_min ? (q < limit ? q : limit) : (q > limit ? q : limit);
        }
        int64_t next = limit > r ? (limit < to ? limit : to) : r;
        pre[k + 1] = pre[k] + (next - r);
        r = next;
    }
    return r >= to ? HPA_UP_SYNCS : HPA_UP_SYNCS + 1;
}

/* Appends a "; "-separated clause to out. */
static void clause(char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void clause(char *out, size_t len, const char *fmt, ...)
{
    size_t n = strlen(out);
    if (n && n + 3 < len) {
        memcpy(out + n, "; ", 3);
        n += 2;
    }
    if (n + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, len - n, fmt, ap);
    va_end(ap);
}

size_t ctl_hpa_advice(const struct ctl_hpa_facts *f, int32_t min, int32_t max,
                      int64_t up_step_s, char *out, size_t len)
{
    if (!len)
        return 0;
    out[0] = '\0';
    if (!f->listed)
        return 0;
    if (f->count == 0) {
        if (!f->none_confirmed)
            return 0; /* an HPA made just after the Deployment: seen at a later list */
        snprintf(out, len,
                 "gpuscaler.io/mode is external-metric, but no HorizontalPodAutoscaler targets "
                 "this Deployment, so nothing applies gpuscaler's count: create one that reads "
                 "gpuscaler_desired_replicas with an AverageValue target of 1 "
                 "(docs/external-metrics.md, section 3), or remove the mode annotation to let "
                 "gpuscaler scale it");
        return 1;
    }
    char why[1024] = "";
    size_t n = 0;
    if (f->count > 1) {
        clause(why, sizeof(why), "%d HorizontalPodAutoscalers target this Deployment, and the "
                                 "HPA controller scales with none of them (condition "
                                 "AmbiguousSelector): keep one",
               f->count);
        n++;
    }
    if (!f->reads_gpuscaler && !f->keda) { /* KEDA may read gpuscaler's /metrics */
        clause(why, sizeof(why), "it reads no gpuscaler_* external metric, so it does not "
                                 "follow gpuscaler: read gpuscaler_desired_replicas");
        n++;
    } else if (f->reads_desired && !f->desired_average_one) {
        clause(why, sizeof(why), "it reads gpuscaler_desired_replicas with a target other than "
                                 "AverageValue 1, so its count is not gpuscaler's");
        n++;
    }
    if (f->reads_desired && f->desired_unselected) {
        clause(why, sizeof(why), "its gpuscaler_desired_replicas metric has no selector, so it "
                                 "sums the counts of every tracked Deployment of the namespace: "
                                 "select deployment=<name>");
        n++;
    }
    if (f->max_replicas < max) {
        clause(why, sizeof(why), "its maxReplicas %d is below max-replicas %d: gpuscaler's "
                                 "counts above %d are not applied",
               f->max_replicas, max, f->max_replicas);
        n++;
    }
    /* min-replicas 0 asks for an HPA at 0, which needs the HPAScaleToZero
     * gate: annotations.md says so, and it is no setting to fix here */
    if (f->min_replicas > min && min > 0) {
        clause(why, sizeof(why), "its minReplicas %d is above min-replicas %d: gpuscaler's "
                                 "counts below %d are not applied",
               f->min_replicas, min, f->min_replicas);
        n++;
    }
    if (f->down_window_s > 0) {
        clause(why, sizeof(why), "its scale-down stabilization window (%d s%s) applies every "
                                 "scale-in that much later than gpuscaler decides it, and "
                                 "gpuscaler stabilizes already: set "
                                 "behavior.scaleDown.stabilizationWindowSeconds: 0",
               f->down_window_s,
               f->down_window_s == HPA_DEFAULT_DOWN_WINDOW_S ? ", the default" : "");
        n++;
    }
    if (f->up_window_s > 0) {
        clause(why, sizeof(why), "its scale-up stabilization window (%d s) applies every "
                                 "scale-out that much later: set "
                                 "behavior.scaleUp.stabilizationWindowSeconds: 0",
               f->up_window_s);
        n++;
    }
    if (f->up_disabled || f->down_disabled) {
        clause(why, sizeof(why), "its %s selectPolicy is Disabled: gpuscaler's %s are never "
                                 "applied",
               f->up_disabled && f->down_disabled ? "scaleUp and scaleDown"
               : f->up_disabled                   ? "scaleUp"
                                                  : "scaleDown",
               f->up_disabled && f->down_disabled ? "counts"
               : f->up_disabled                   ? "scale-outs"
                                                  : "scale-ins");
        n++;
    }
    /* a scale-out may be the whole range at once (sized a cold start ahead,
     * unless max-scale-up-step paces it): an HPA slower than both gpuscaler's
     * own pace and the default policies is told */
    int32_t lo = min > 1 ? min : 1;
    if (max > lo && !f->up_disabled && !f->up_policies_more) {
        bool own = f->n_up_policies > 0;
        int mine = own ? up_syncs(f->up_policies, f->n_up_policies, f->up_select_min, lo, max)
                       : up_syncs(default_up, 2, f->up_select_min, lo, max);
        int dflt = up_syncs(default_up, 2, false, lo, max);
        if ((int64_t)mine * HPA_SYNC_S > up_step_s && mine > dflt) {
            char took[48];
            if (mine > HPA_UP_SYNCS)
                snprintf(took, sizeof(took), "more than an hour");
            else
                snprintf(took, sizeof(took), "%d s", mine * HPA_SYNC_S);
            clause(why, sizeof(why), "under its scaleUp policies%s it takes %s to go from %d to "
                                     "%d replicas (%d s under the defaults), so gpuscaler's "
                                     "scale-outs are applied that much later: allow at least "
                                     "as much",
                   f->up_select_min ? " with selectPolicy Min" : "", took, lo, max,
                   dflt * HPA_SYNC_S);
            n++;
        }
    }
    /* a step of one from k replicas is a ratio of (k + 1) / k up, (k - 1) / k
     * down: inside a tolerance t (|ratio - 1| <= t, no change) from k >= 1 / t
     * on, up from at most max - 1, down from at most max. Only a tolerance
     * set here: an unset one is the cluster's (10 % unless changed), and
     * before Kubernetes 1.33 there is no field to set (external-metrics.md) */
    double up = f->up_tolerance, down = f->down_tolerance;
    bool up_lost = isfinite(up) && up > 0 && (double)(max - 1) * up >= 1.0 - 1e-9;
    bool down_lost = isfinite(down) && down > 0 && (double)max * down >= 1.0 - 1e-9;
    if (up_lost || down_lost) {
        double t = up_lost && down_lost ? fmin(up, down) : up_lost ? up : down;
        clause(why, sizeof(why), "its %s tolerance (%g %%) leaves a step of one replica "
                                 "unapplied from %d replicas on: set it to 0",
               up_lost && down_lost ? "scaleUp and scaleDown" : up_lost ? "scaleUp" : "scaleDown",
               t * 100, (int32_t)ceil(1.0 / t - 1e-9));
        n++;
    }
    if (n)
        snprintf(out, len, "the HorizontalPodAutoscaler %s: %s", f->name, why);
    return n;
}

/* ---- the lists ------------------------------------------------------------------ */

/* The Deployment an HPA targets, NULL for any other kind or group. The HPA
 * controller maps scaleTargetRef's group and kind to a resource whatever
 * the version (schema.ParseGroupVersion, then RESTMappings of the
 * GroupKind): the group is apiVersion's part before its one '/', and
 * without a '/' it is the core group, which has no Deployments. So
 * apps/v1 and apps/v1beta2 name our apps Deployments; example.com/v1 names
 * another resource, and extensions/v1beta1 Deployments are served no more
 * (since Kubernetes 1.16): such an HPA scales no apps Deployment. */
static const char *target_of(const json_t *hpa)
{
    const json_t *ref = json_object_get(json_object_get(hpa, "spec"), "scaleTargetRef");
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    const char *name = json_string_value(json_object_get(ref, "name"));
    const char *api = json_string_value(json_object_get(ref, "apiVersion"));
    bool apps = api && strncmp(api, "apps/", 5) == 0 && !strchr(api + 5, '/');
    return apps && kind && name && strcmp(kind, "Deployment") == 0 ? name : NULL;
}

struct hpa_list {
    struct controller *c;
    char *ns;
    int64_t sent_ms; /* wall ms */
};

/* What this namespace's HPAs ask of each Deployment here, as a list sent at
 * sent_ms saw them (a Deployment no HPA targets gets count 0; one tracked
 * since the list was sent is left for the next). */
static void set_facts(struct controller *c, const char *ns, const json_t *items, int64_t sent_ms)
{
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++) {
        for (struct ctl_wl *w = c->table[b]; w; w = w->next) {
            if (strcmp(w->ns, ns) != 0 || w->tracked_since_ms > sent_ms)
                continue;
            struct ctl_hpa_facts f = {.listed = true};
            size_t i;
            const json_t *it;
            json_array_foreach(items, i, it) {
                const char *name = target_of(it);
                if (name && strcmp(name, w->name) == 0)
                    ctl_hpa_facts_add(&f, it);
            }
            if (f.count == 0) {
                f.none_since_ms = w->hpa.listed && w->hpa.count == 0 ? w->hpa.none_since_ms
                                                                     : sent_ms;
                f.none_confirmed = sent_ms - f.none_since_ms >= CTL_HPA_NONE_GRACE_MS;
            }
            w->hpa = f;
        }
    }
}

static void round_end(struct controller *c);

void ctl_hpa_answer(struct controller *c, const char *ns, bool ok, const json_t *items,
                    int64_t sent_ms)
{
    if (ok) {
        const json_t *it;
        size_t i;
        json_array_foreach(items, i, it) {
            const char *name = target_of(it);
            const json_t *meta = json_object_get(it, "metadata");
            const char *hns = json_string_value(json_object_get(meta, "namespace"));
            const char *hpa = json_string_value(json_object_get(meta, "name"));
            if (!name || !hns)
                continue;
            const char *so = keda_owner(meta);
            c->hpa_targets_next = xrealloc(c->hpa_targets_next,
                                           (c->n_hpa_targets_next + 1) * sizeof(char *));
            c->hpa_targets_next[c->n_hpa_targets_next++] =
                so ? xasprintf("%s/%s\tthe KEDA ScaledObject %.60s (through its "
                               "HorizontalPodAutoscaler %.60s)",
                               hns, name, so, hpa ? hpa : "?")
                   : xasprintf("%s/%s\tthe HorizontalPodAutoscaler %.60s", hns, name,
                               hpa ? hpa : "?");
        }
        if (!c->closing)
            set_facts(c, ns, items, sent_ms);
    } else if (!c->closing) {
        c->hpa_failed_ns = xrealloc(c->hpa_failed_ns,
                                    (c->n_hpa_failed_ns + 1) * sizeof(*c->hpa_failed_ns));
        c->hpa_failed_ns[c->n_hpa_failed_ns++] = xstrdup(ns);
    }
    if (--c->hpa_lists_pending == 0)
        round_end(c);
}

static void hpa_listed(const struct kube_result *res, void *arg)
{
    struct hpa_list *l = arg;
    struct controller *c = l->c;
    if (res->err != 0 && !c->closing)
        LOGW_WARN(SUB, l->ns, NULL, "listing HorizontalPodAutoscalers failed: HTTP %ld %s; the "
                  "last list's conflicts in this namespace still hold", res->status,
                  res->message);
    ctl_hpa_answer(c, l->ns, res->err == 0, json_object_get(res->body, "items"), l->sent_ms);
    xfree(l->ns);
    xfree(l);
    ctl_io_end(c);
}

/* Whether target entry t ("ns/name\t...") is of a namespace whose list
 * failed this round. */
static bool of_failed_ns(const struct controller *c, const char *t)
{
    const char *slash = strchr(t, '/');
    size_t nl = slash ? (size_t)(slash - t) : 0;
    for (size_t i = 0; slash && i < c->n_hpa_failed_ns; i++)
        if (strlen(c->hpa_failed_ns[i]) == nl && strncmp(c->hpa_failed_ns[i], t, nl) == 0)
            return true;
    return false;
}

/* The round's lists have all answered: its targets replace the last round's,
 * but in a namespace whose list failed the last round's still hold (only
 * there: an HPA deleted in a namespace listed since is no conflict). */
static void round_end(struct controller *c)
{
    c->hpa_targets_next = xrealloc(c->hpa_targets_next, (c->n_hpa_targets_next +
                                                         c->n_hpa_targets + 1) * sizeof(char *));
    size_t fresh = c->n_hpa_targets_next;
    for (size_t i = 0; i < c->n_hpa_targets; i++) {
        bool keep = of_failed_ns(c, c->hpa_targets[i]);
        for (size_t j = 0; j < fresh && keep; j++) /* failures in a row pile no copies up */
            keep = strcmp(c->hpa_targets_next[j], c->hpa_targets[i]) != 0;
        if (keep)
            c->hpa_targets_next[c->n_hpa_targets_next++] = c->hpa_targets[i];
        else
            xfree(c->hpa_targets[i]);
    }
    c->n_hpa_targets = 0;
    for (size_t i = 0; i < c->n_hpa_failed_ns; i++)
        xfree(c->hpa_failed_ns[i]);
    xfree(c->hpa_failed_ns);
    c->hpa_failed_ns = NULL;
    c->n_hpa_failed_ns = 0;
    xfree(c->hpa_targets);
    c->hpa_targets = c->hpa_targets_next;
    c->n_hpa_targets = c->n_hpa_targets_next;
    c->hpa_targets_next = NULL;
    c->n_hpa_targets_next = 0;
}

void ctl_hpa_refresh(struct controller *c)
{
    if (c->hpa_lists_pending || c->closing)
        return;
    /* one list per namespace with a workload: in mode scale an HPA is a
     * conflict, in mode external-metric the one that applies its count */
    const char **done = NULL;
    size_t nd = 0;
    for (size_t b = 0; b < CTL_WL_BUCKETS; b++) {
        for (struct ctl_wl *w = c->table[b]; w; w = w->next) {
            /* its annotations invalid too: valid again, it acts only on a
             * list its namespace had since (ctl_act) */
            bool seen = false;
            for (size_t i = 0; i < nd && !seen; i++)
                seen = strcmp(done[i], w->ns) == 0;
            if (seen)
                continue;
            done = xrealloc(done, (nd + 1) * sizeof(*done));
            done[nd++] = w->ns;
            struct hpa_list *l = xcalloc(1, sizeof(*l));
            l->c = c;
            l->ns = xstrdup(w->ns);
            l->sent_ms = util_now_unix_ms();
            c->hpa_lists_pending++;
            ctl_io_begin(c);
            if (kube_hpa_list(c->kube, w->ns, hpa_listed, l) != 0) {
                c->hpa_lists_pending--;
                xfree(l->ns);
                xfree(l);
                ctl_io_end(c);
            }
        }
    }
    xfree(done);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for what gpuscaler reads of the HorizontalPodAutoscalers
 * in front of it (pkg/controller/hpa.c): anyone who can edit an HPA writes
 * them, and the API server passes odd values of the right JSON shape. Input:
 * two bytes (gpuscaler's min-replicas and max-replicas), then a JSON list of
 * HPA objects (or one object). Every item is added to one set of facts; the
 * advice must count its problems, fit its buffer (also a small one), and be
 * empty exactly when it counts none. The list is also one namespace's
 * answer of an HPA round (ctl_hpa_answer): each target it records is an
 * apps Deployment's, "ns/name\t...", at most one per item. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-hpa: invariant violated: %s\n", what);
        abort();
    }
}

static void advise(const struct ctl_hpa_facts *f, int32_t min, int32_t max, int64_t up_s,
                   size_t len)
{
    char out[1024];
    memset(out, 'x', sizeof(out));
    size_t n = ctl_hpa_advice(f, min, max, up_s, out, len);
    size_t k = strnlen(out, len);
    check(k < len, "the advice fits its buffer, terminated");
    check((n == 0) == (k == 0), "empty exactly when there is no problem");
    check(n <= 9, "at most one clause per check");
    check(f->listed || n == 0, "nothing before the first list");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 256 * 1024)
        return 0;
    int32_t min = data[0] % 8, max = min + data[1];
    json_t *doc = json_loadb((const char *)data + 2, size - 2, JSON_DECODE_ANY, NULL);
    if (!doc)
        return 0;
    struct ctl_hpa_facts f = {.listed = data[0] < 0xf0};
    if (json_is_array(doc)) {
        size_t i;
        json_t *it;
        json_array_foreach(doc, i, it) ctl_hpa_facts_add(&f, it);
    } else {
        ctl_hpa_facts_add(&f, doc);
    }
    check(f.name[sizeof(f.name) - 1] == '\0' && (f.count == 0 || f.name[0]), "a name");
    check(f.min_replicas >= 0 && f.max_replicas >= 0 && f.up_window_s >= 0 &&
              f.down_window_s >= 0,
          "counts and windows are not negative");
    advise(&f, min, max, 0, 1024);
    advise(&f, min, max, (int64_t)(data[0] / 8) * 30, 40);
    json_t *items = json_is_array(doc) ? json_incref(doc) : json_pack("[O]", doc);
    struct controller *c = xcalloc(1, sizeof(*c));
    c->hpa_lists_pending = 1;
    ctl_hpa_answer(c, "llm", true, items, 0);
    check(c->hpa_lists_pending == 0 && c->n_hpa_targets <= json_array_size(items),
          "one target at most per HPA, the round ended");
    size_t apps = 0, i;
    json_t *it;
    json_array_foreach(items, i, it) {
        const char *api = json_string_value(json_object_get(
            json_object_get(json_object_get(it, "spec"), "scaleTargetRef"), "apiVersion"));
        apps += api && strncmp(api, "apps/", 5) == 0;
    }
    check(c->n_hpa_targets <= apps, "only HPAs of an apps/ scaleTargetRef target a Deployment");
    for (i = 0; i < c->n_hpa_targets; i++) {
        check(strchr(c->hpa_targets[i], '/') && strchr(c->hpa_targets[i], '\t'),
              "ns/name\tdescription");
        xfree(c->hpa_targets[i]);
    }
    xfree(c->hpa_targets);
    xfree(c);
    json_decref(items);
    json_decref(doc);
    return 0;
}

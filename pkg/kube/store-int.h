/* SPDX-License-Identifier: Apache-2.0 */
/* kube/store-int: the store's private structs and the JSON-to-struct
 * extraction it uses (extract.c); shared by store.c, extract.c and tests. */
#ifndef GPUSCALER_KUBE_STORE_INT_H
#define GPUSCALER_KUBE_STORE_INT_H

#include "kube-int.h"

struct kns;

struct dep {
    struct kube_deployment pub;
    char *key; /* "ns/name" */
    struct kns *ns;
    size_t ns_idx;
    size_t all_idx;
    struct kube_pod **pods; /* index: matching pods, valid when !dirty */
    size_t npods, podcap;
    bool dirty;
    unsigned gen;
};

struct pod {
    struct kube_pod pub;
    char *key;
    char *rv;
    struct kns *ns;
    size_t ns_idx;
    unsigned gen;
};

struct kns {
    char *name;
    struct pod **pods;
    size_t npods, podcap;
    struct dep **deps; /* tracked deployments of this namespace */
    size_t ndeps, depcap;
    unsigned list_start[2];
};

struct kube_store {
    struct kmap deps, pods, nss;
    struct kube_deployment **all;
    size_t nall, allcap;
    struct kintern pool;
    unsigned gen;
    unsigned all_start[2];
    size_t rebuilds;
};

/**
 * Extract a Deployment. Strings in out are owned (free with
 * extract_deployment_clear). *tracked tells whether gpuscaler.io/enabled is
 * true; *rv points into obj. -EINVAL when metadata.namespace/name are missing.
 */
int extract_deployment(const json_t *obj, struct kube_deployment *out, bool *tracked,
                       const char **rv);
void extract_deployment_clear(struct kube_deployment *d);
/** Extract a Pod; ns and labels are interned in pool, name owned. */
int extract_pod(struct kintern *pool, const json_t *obj, struct kube_pod *out, const char **rv);
void extract_pod_clear(struct kintern *pool, struct kube_pod *p);
bool extract_selector_equal(const struct kube_selector *a, const struct kube_selector *b);
bool extract_labels_equal(const struct kube_labels *a, const struct kube_labels *b);

#endif

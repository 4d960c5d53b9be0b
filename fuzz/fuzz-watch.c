/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the watch stream decoder and the object-to-cache-entry
 * extraction: the input is a watch stream fed in chunks whose sizes come
 * from the input itself; every decoded object is applied to a store as a
 * Deployment and as a Pod, ERROR events start a relist scope and BOOKMARKs
 * end it, and every tracked Deployment's pod index is read back, the fields
 * of each pod's conditions (Ready, PodScheduled: bound when, or Pending for
 * want of a GPU) and container states (failing to start) included, and the
 * GPU counts (app, init and sidecar containers) checked in range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube-int.h"

static int on_event(enum kube_event_type t, json_t *obj, void *arg)
{
    struct kube_store *s = arg;
    switch (t) {
    case KUBE_EV_ERROR:
        kube_store_list_begin(s, KUBE_KIND_POD, NULL);
        kube_store_list_begin(s, KUBE_KIND_DEPLOYMENT, "ns");
        return 0;
    case KUBE_EV_BOOKMARK:
        kube_store_list_end(s, KUBE_KIND_POD, NULL);
        kube_store_list_end(s, KUBE_KIND_DEPLOYMENT, "ns");
        return 0;
    default:
        kube_store_apply(s, KUBE_KIND_DEPLOYMENT, t, obj);
        kube_store_apply(s, KUBE_KIND_POD, t, obj);
        return 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] % 64 + 1; /* chunk size */
    data++;
    size--;
    struct kube_store *s = kube_store_new();
    struct kube_watch_decoder *d = kube_watch_decoder_new(1 << 16);
    int rc = 0;
    for (size_t off = 0; off < size && rc == 0; off += step)
        rc = kube_watch_decoder_feed(d, (const char *)data + off,
                                     size - off < step ? size - off : step, on_event, s);
    if (rc == 0)
        kube_watch_decoder_finish(d);
    size_t n;
    const struct kube_deployment *const *deps = kube_store_deployments(s, &n);
    for (size_t i = 0; i < n; i++) {
        size_t np;
        const struct kube_pod *const *pods = kube_store_deployment_pods(s, deps[i], &np);
        for (size_t j = 0; j < np; j++) {
            (void)strlen(pods[j]->name);
            /* a GPU the scheduler named, or none: never another value */
            if (pods[j]->unschedulable_gpu > KUBE_GPU_AMD)
                abort();
            (void)strlen(kube_gpu_resource_name(pods[j]->unschedulable_gpu));
            /* a reason the kubelet writes for a container that cannot start, or none */
            if (pods[j]->failing > KUBE_FAILING_CONFIG)
                abort();
            (void)strlen(kube_pod_failing_name(pods[j]->failing));
            /* GPUs counted over app, init and sidecar containers stay in range */
            if (pods[j]->gpus < 0 || pods[j]->gpus > 1000000)
                abort();
        }
        if (deps[i]->gpus_per_replica < 0 || deps[i]->gpus_per_replica > 1000000)
            abort();
        struct util_buf b = {0};
        kube_selector_format(&deps[i]->selector, &b);
        util_buf_free(&b);
    }
    kube_watch_decoder_free(d);
    kube_store_free(s);
    return 0;
}

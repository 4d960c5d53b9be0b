/* SPDX-License-Identifier: Apache-2.0 */
/* Wiring of the external metrics API into `gpuscaler run`: the controller
 * (values) and the Deployment cache (labels) as the provider, the API server
 * (TokenReview, SubjectAccessReview) as the authorizer, and the front-proxy
 * and client-certificate trust read from
 * kube-system/extension-apiserver-authentication. */
#ifndef GPUSCALER_CMD_EXTMETRICS_GLUE_H
#define GPUSCALER_CMD_EXTMETRICS_GLUE_H

#include <stdbool.h>
#include <uv.h>

struct kube;
struct kube_cache;
struct controller;
struct ctl_config;
struct extmetrics_glue;

/**
 * Start serving; logs and returns a negative errno on failure. k, cache
 * (the Deployments' labels, served as metricLabels) and ctl are borrowed and
 * must outlive the glue (close it first).
 */
int extmetrics_glue_new(uv_loop_t *loop, struct kube *k, struct kube_cache *cache,
                        struct controller *ctl, const struct ctl_config *cfg,
                        struct extmetrics_glue **out);
/** Stop serving and free (asynchronously). */
void extmetrics_glue_close(struct extmetrics_glue *g);

/**
 * Whether kube-system/extension-apiserver-authentication has been read once:
 * until then no front proxy is trusted and the aggregator's requests would
 * get 401, so the pod is not Ready (/readyz) and the Service sends it none.
 */
bool extmetrics_glue_ready(const struct extmetrics_glue *g);

struct httpd;
/** The HTTPS listener (for its connection counters). */
const struct httpd *extmetrics_glue_httpd(struct extmetrics_glue *g);

#endif

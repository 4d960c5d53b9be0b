/* SPDX-License-Identifier: Apache-2.0 */
/* Wiring of the external metrics API into `gpuscaler run`: the controller as
 * the provider, the API server (TokenReview, SubjectAccessReview) as the
 * authorizer, and the front-proxy trust read from
 * kube-system/extension-apiserver-authentication. */
#ifndef GPUSCALER_CMD_EXTMETRICS_GLUE_H
#define GPUSCALER_CMD_EXTMETRICS_GLUE_H

#include <uv.h>

struct kube;
struct controller;
struct ctl_config;
struct extmetrics_glue;

/** Start serving; logs and returns a negative errno on failure. */
int extmetrics_glue_new(uv_loop_t *loop, struct kube *k, struct controller *ctl,
                        const struct ctl_config *cfg, struct extmetrics_glue **out);
/** Stop serving and free (asynchronously). */
void extmetrics_glue_close(struct extmetrics_glue *g);

#endif

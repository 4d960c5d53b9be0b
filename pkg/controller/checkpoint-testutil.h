/* SPDX-License-Identifier: Apache-2.0 */
/* Test support for the checkpoint code (checkpoint.c), shared by its unit
 * tests (test-checkpoint*.c) and its fuzz target (fuzz/fuzz-checkpoint.c):
 * a Deployment's tracking state made by hand, as the controller makes it
 * (default policy, a fresh forecaster and capacity estimator). Built only
 * into tests and fuzz targets, never into the daemon. */
#ifndef GPUSCALER_CONTROLLER_CHECKPOINT_TESTUTIL_H
#define GPUSCALER_CONTROLLER_CHECKPOINT_TESTUTIL_H

#include "controller/controller-int.h"

/** A Deployment ns/name of that uid, with the default policy, a fresh
 *  forecaster (never NULL) and a fresh capacity estimator; not in any table,
 *  not yet read from a checkpoint. Free with ctl_ckpt_test_wl_free(). */
struct ctl_wl *ctl_ckpt_test_wl_new(const char *ns, const char *name, const char *uid);
/** Feed w's forecaster n observations, one a bucket, ending now: a history of
 *  its own length and values (drawn from a generator seeded by ns/name), so
 *  that Deployments' states differ in size and content. 0, or the first
 *  forecast_observe() error. */
int ctl_ckpt_test_wl_history(struct ctl_wl *w, int n);
void ctl_ckpt_test_wl_free(struct ctl_wl *w);
/** Track w in c's table (c takes it; ctl_ckpt_test_table_free frees it). */
void ctl_ckpt_test_table_add(struct controller *c, struct ctl_wl *w);
/** Free every Deployment of c's table and empty it. */
void ctl_ckpt_test_table_free(struct controller *c);
/** Apply a save's binaryData and data (a JSON merge patch's: null removes a
 *  key) to a ConfigMap object, as the API server does; a map left empty is
 *  dropped, as the API server drops it. */
void ctl_ckpt_test_merge(json_t *cm, const json_t *bin, const json_t *text);
/** What the API server counts of a ConfigMap against its 1 MiB: the bytes of
 *  data's values and of binaryData's decoded values; -1 when a binaryData
 *  value is not base64. */
long long ctl_ckpt_test_size(const json_t *cm);

#endif

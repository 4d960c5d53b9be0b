/* SPDX-License-Identifier: Apache-2.0 */
/* httpc internals shared by httpc.c and alloc.c; no other module includes
 * this file. */
#ifndef GPUSCALER_HTTPC_INT_H
#define GPUSCALER_HTTPC_INT_H

/**
 * curl_global_init with counting allocation functions (alloc.c). Every
 * httpc_new calls it and httpc's free calls curl_global_cleanup, as libcurl
 * counts initialisations. 0, or -1 when libcurl cannot initialise.
 */
int httpc_global_init(void);

#endif

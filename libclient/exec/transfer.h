/* SPDX-License-Identifier: MIT */
/*
 * One attempt's transfer on a pooled easy handle: the handle's options,
 * libcurl's callbacks and curl_easy_perform. It knows nothing of the
 * bulkhead, the pool or the attempt loop: the pool asks it to configure a
 * new handle, a driver hands it a handle and a call for each attempt.
 * retryd_execute runs a transfer with retryd__transfer_perform; the multi
 * (multi.c) runs the same two halves around curl_multi instead.
 */
#ifndef RETRYD_TRANSFER_H
#define RETRYD_TRANSFER_H

#include <stdint.h>

#include "exec/executor.h"
#include "retryd/client.h"

struct call;

/* The options that never change for a profile's handles: set once, when
 * the pool creates the handle. */
void retryd__handle_configure(retryd_profile *p, easy *e);

/*
 * Before a transfer on handle @p e (the call holds its permit): the header
 * list and the per-request options, the transfer bounded by @p attempt_ns
 * through libcurl's timers (connecting by the profile's connect timeout
 * too). 0: no libcurl timer; the driver bounds the transfer itself, as the
 * multi does from its own timer heap (multi.c, transfer_due).
 * CURLE_OK: hand e->curl to curl_easy_perform or curl_multi; else the
 * transfer cannot run (CURLE_OUT_OF_MEMORY, the error text set) and
 * retryd__transfer_done is not due.
 */
int retryd__transfer_setup(struct call *c, easy *e, int64_t attempt_ns);

/*
 * After the transfer, with libcurl's result @p rc: what libcurl says about
 * it (the HTTP version into @p a, the bytes-written proof into the trace,
 * its error text), and the header list freed.
 */
void retryd__transfer_done(struct call *c, easy *e, retryd_attempt *a, int rc);

/*
 * The part of an attempt that holds a permit and handle @p e, blocking:
 * setup, curl_easy_perform bounded by @p attempt_ns, done. libcurl's
 * result code.
 */
int retryd__transfer_perform(struct call *c, easy *e, retryd_attempt *a,
                             int64_t attempt_ns);

#endif

/*
 * One attempt's transfer on a pooled easy handle: the handle's options,
 * libcurl's callbacks and curl_easy_perform. It knows nothing of the
 * bulkhead, the pool or the attempt loop: the pool asks it to configure a
 * new handle, the loop hands it a handle and a call for each attempt.
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
 * The part of an attempt that holds a permit and handle @p e: the header
 * list, the per-request options, curl_easy_perform bounded by
 * @p attempt_ns, then what libcurl says about it (the HTTP version into
 * @p a, the bytes-written proof into the trace). libcurl's result code.
 */
int retryd__transfer_perform(struct call *c, easy *e, retryd_attempt *a,
                             int64_t attempt_ns);

#endif

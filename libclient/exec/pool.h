/* SPDX-License-Identifier: MIT */
/*
 * A profile's bulkhead and its pool of easy handles (pool.c). Its own
 * header rather than executor.h, so that the transfer, which includes the
 * shared structs, does not see the pool's functions: the pool calls the
 * transfer, never the other way round.
 */
#ifndef RETRYD_POOL_H
#define RETRYD_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/executor.h"

/*
 * A bulkhead permit and an easy handle, under one lock: 0, or
 * RETRYD_ETIMEDOUT when no permit came by @p deadline_ns (monotonic), or
 * RETRYD_ENOMEM. A new handle is configured with the profile's constant
 * options (transfer.c: retryd__handle_configure).
 */
int retryd__slot_take(retryd_profile *p, int64_t deadline_ns, easy **ret);
/*
 * The same without waiting, for the event-loop driver: 0, RETRYD_EFULL
 * when every permit is taken (the caller queues and asks again), or
 * RETRYD_ENOMEM.
 */
int retryd__slot_try_take(retryd_profile *p, easy **ret);
/* Both back: the handle to the pool, or cleaned up when @p tainted
 * (libcurl's per-handle state may carry a stale retry count or a
 * refused-stream flag after a failure). */
void retryd__slot_give(retryd_profile *p, easy *e, bool tainted);

/* Clean up the idle handles, when the profile is freed. */
void retryd__pool_drain(retryd_profile *p);

#endif

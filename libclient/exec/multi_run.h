/* SPDX-License-Identifier: MIT */
/*
 * A request run to its end on an event loop of the client's (multi.c):
 * how retryd_execute (execute.c) runs a hedged request on the calling
 * thread.
 */
#ifndef RETRYD_MULTI_RUN_H
#define RETRYD_MULTI_RUN_H

#include "retryd/client.h"

/*
 * Run @p req (validated, of this library's size) through @p p on one of
 * its client's idle multis (made when none is idle, kept for the next
 * request: their connections with them), on the calling thread, until it
 * completes. Thread-safe: each caller has a multi to itself meanwhile.
 * retryd_execute()'s contract: 0 and *ret, or RETRYD_ENOMEM, RETRYD_ECURL.
 */
int retryd__multi_execute(retryd_profile *p, const retryd_request *req,
                          retryd_result **ret);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * retryd_execute: a request, validated, then run on the calling thread
 * (attempt.c: each step back to back, the transfer in curl_easy_perform)
 * or, when it is to be hedged, on one of the client's event loops
 * (multi.c): a hedge is a second transfer while the first still runs,
 * which curl_easy_perform cannot do, and the multi already drives any
 * number of transfers on one thread. One implementation of hedging, the
 * multi's, serves both executors (docs/hedging.md). Here, above both, so
 * that neither the attempt loop nor the multi calls the other's driver.
 */
#include "base/macros.h"
#include "exec/attempt.h"
#include "exec/multi_run.h"
#include "exec/validate.h"

/* @p req of this library's size. */
static inline int execute(retryd_profile *p, const retryd_request *req,
                          retryd_result **ret)
{
    if (retryd__validate_request(req) < 0)
        return RETRYD_EINVAL;
    if (retryd__hedge_wanted(p, req))
        return retryd__multi_execute(p, req, ret);
    return retryd__execute_blocking(p, req, ret);
}

/* A caller built against another header: its request copied to this
 * library's size (docs/abi.md). Out of line, so that the usual caller's
 * path has no copy on its stack and ends in a jump to its driver. */
static __attribute__((noinline)) int
execute_copy(retryd_profile *p, const retryd_request *caller_req,
             retryd_result **ret)
{
    retryd_request rq;
    int r = RETRYD_COPY_OPTS(&rq, caller_req, sizeof(size_t));
    return r < 0 ? r : execute(p, &rq, ret);
}

int retryd_execute(retryd_profile *p, const retryd_request *caller_req,
                   retryd_result **ret)
{
    if (p == NULL || caller_req == NULL || ret == NULL)
        return RETRYD_EINVAL;
    if (caller_req->sz != sizeof(*caller_req))
        return execute_copy(p, caller_req, ret);
    return execute(p, caller_req, ret);
}

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

int retryd_execute(retryd_profile *p, const retryd_request *caller_req,
                   retryd_result **ret)
{
    const retryd_request *req;
    retryd_request rq; /* a caller's of another size, at this library's */
    if (p == NULL || caller_req == NULL || ret == NULL)
        return RETRYD_EINVAL;
    /* The usual caller's request is read where it is; only one built
     * against another header is copied (docs/abi.md). */
    int r = RETRYD_OPTS_VIEW(req, &rq, caller_req, sizeof(size_t));
    if (r < 0)
        return r;
    if (retryd__validate_request(req) < 0)
        return RETRYD_EINVAL;
    if (retryd__hedge_wanted(p, req))
        return retryd__multi_execute(p, req, ret);
    return retryd__execute_blocking(p, req, ret);
}

/* SPDX-License-Identifier: MIT */
/*
 * Checks on a caller's request before anything is sent. A pure function of
 * the request: no libcurl, no call state.
 */
#ifndef RETRYD_VALIDATE_H
#define RETRYD_VALIDATE_H

#include "retryd/client.h"

/*
 * 0, or RETRYD_EINVAL when a part of @p r is out of range (the
 * idempotency, a negative deadline, an idempotency key empty or of 40
 * characters or more, over a thousand header lines) or could carry what
 * the caller did not mean to send: a method that is not a token of at most
 * 32 characters, a space or control character in the path, a header line
 * that is not "token: field-value".
 */
int retryd__validate_request(const retryd_request *r);

/*
 * A caller's hedging policy, at this library's size, into @p out: 0, or
 * RETRYD_EINVAL (a mode out of range, a fixed delay of 0 or less, more than
 * RETRYD_MAX_HEDGES hedges; max_hedges 0 reads as 1) or RETRYD_EOPTS.
 */
int retryd__hedge_policy_read(const retryd_hedge_policy *in,
                              retryd_hedge_policy *out);

#endif

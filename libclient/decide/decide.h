/* SPDX-License-Identifier: MIT */
/* The decide layer's internal parts, shared between its files. */
#ifndef RETRYD_DECIDE_H
#define RETRYD_DECIDE_H

#include <stdint.h>

#include "base/macros.h"
#include "retryd/backoff.h"
#include "retryd/decision.h"

/* The first version of each growable struct ends after these fields. */
#define RETRYD_BACKOFF_MIN_SZ                                                  \
    RETRYD_OPTS_MIN(retryd_backoff_policy, max_retry_after_ns)
#define RETRYD_FACTS_MIN_SZ RETRYD_OPTS_MIN(retryd_facts, transient_500)
#define RETRYD_ENV_MIN_SZ RETRYD_OPTS_MIN(retryd_decide_env, budget_ctx)
#define RETRYD_IFACE_MIN_SZ RETRYD_OPTS_MIN(retryd_budget_iface, take)
#define RETRYD_DECISION_MIN_SZ RETRYD_OPTS_MIN(retryd_decision, flags)

/* A caller's @p env at this library's size in @p e, its budget interface,
 * if any, in @p iface (e->budget then points to it): 0, or the error of
 * the copy. Which of the interface's functions must be there is the
 * caller's to check. */
int retryd__env_copy(const retryd_decide_env *env, retryd_decide_env *e,
                     retryd_budget_iface *iface);

/* retryd_backoff_delay() for a policy already validated and of this
 * library's size. */
int64_t retryd__backoff_delay(const retryd_backoff_policy *p, uint32_t retry,
                              int64_t prev_ns, retryd_random_fn random,
                              void *random_ctx);

/* A host hold of @p hold_ns (> 0) with its jitter: resumed attempts are
 * spread over [hold, hold + hold / 4 + 50 ms) (docs/health.md). */
int64_t retryd__pushback_wait(int64_t hold_ns, retryd_random_fn random,
                              void *random_ctx);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * retryd: the bridge between the host budget and the decision engine.
 *
 * The budget (retryd/budget.h) knows nothing of decisions and the engine
 * (retryd/decision.h) nothing of shared memory; this header is where the
 * two meet: the engine's view of an upstream budget, and the statistics a
 * decision adds to it. A service that decides by hand around its own HTTP
 * client includes this (or retryd/retryd.h).
 */
#ifndef RETRYD_BUDGET_DECIDE_H
#define RETRYD_BUDGET_DECIDE_H

#include "retryd/budget.h"
#include "retryd/decision.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Count a decision and the evidence of the attempt it followed in this
 * process's statistics for the upstream (what `retrydctl stats` shows).
 * Grants and failed withdrawals are counted by the budget itself, so a
 * RETRY, or a denial whose rule is budget_take_failed, adds only the
 * evidence. A decision whose sz does not cover the fields read (verdict,
 * reason, rule) is not counted.
 */
RETRYD_EXPORT void retryd_upstream_record(retryd_upstream *up,
                                          const retryd_decision *decision,
                                          retryd_evidence evidence);

/**
 * The decision engine's view of an upstream budget: pass it as
 * retryd_decide_env.budget with the retryd_upstream as budget_ctx.
 */
RETRYD_EXPORT extern const retryd_budget_iface retryd_upstream_budget;

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_BUDGET_DECIDE_H */

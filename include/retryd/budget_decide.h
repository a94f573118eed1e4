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
 * Upstream health (docs/health.md): ask before sending an attempt.
 *
 * A first attempt may be throttled by the host throttle (when
 * adaptive_throttle is on for the upstream: RETRYD_ADMIT_THROTTLED, not to
 * be sent, counted); a retry, and a first attempt when
 * pushback_first_attempts is on, waits out a host pushback
 * (RETRYD_ADMIT_HOLD: wait *ret_wait_ns, then ask again) or is refused
 * when the hold would pass the deadline (RETRYD_ADMIT_PAST_DEADLINE). The
 * usual case, a healthy upstream, reads one shared word and writes none.
 *
 * @param remaining_ns    time left before the request's deadline.
 * @param min_attempt_ns  an attempt needs at least this long.
 * @param ret_wait_ns     the hold to wait, or 0; may be NULL.
 */
RETRYD_EXPORT retryd_admission retryd_upstream_admit(retryd_upstream *up,
                                                     bool first_attempt,
                                                     int64_t remaining_ns,
                                                     int64_t min_attempt_ns,
                                                     int64_t *ret_wait_ns);

/**
 * What an attempt that was sent found, for the host's picture of the
 * upstream: its evidence, its final status (0 for none) and its parsed
 * Retry-After (-1 for none). Counts in the throttle's window
 * (retryd_health_classify()) and, for a 429 or 503 with a Retry-After,
 * starts a host pushback. NOT_SENT counts nothing.
 */
RETRYD_EXPORT void retryd_upstream_observe(retryd_upstream *up,
                                           retryd_evidence evidence, int status,
                                           int64_t retry_after_ns);

/** The host pushback left on the upstream, in ns (0 for none): one load
 * (retryd_facts.pushback_ns). */
RETRYD_EXPORT int64_t retryd_upstream_pushback(retryd_upstream *up);

/** An upstream's health as the host sees it now (retryd_upstream_health):
 * the window's counts are those the host's admissions throttle by, so
 * with fleet_health on (docs/fleet.md) they include the other hosts' while
 * the daemon's fleet view applies. */
typedef struct retryd_health {
    size_t sz;          /**< sizeof(retryd_health) (docs/abi.md) */
    bool throttle;      /**< adaptive_throttle is on for the upstream */
    bool engaged;       /**< the quorum of rejecting processes is met */
    double probability; /**< of throttling a first attempt now */
    uint64_t requests;  /**< R: in the window, from every process */
    uint64_t accepts;   /**< A */
    uint64_t rejecting_processes; /**< distinct, in the window */
    bool pushback;                /**< pushback is on for the upstream */
    int64_t pushback_ns;          /**< the hold left, 0 none */
} retryd_health;

/** Fill @p ret (its sz set by the caller). 0 or RETRYD_EINVAL. */
RETRYD_EXPORT int retryd_upstream_health(retryd_upstream *up,
                                         retryd_health *ret);

/*
 * Hedging (docs/hedging.md). The upstream's slot holds a host hedge bucket
 * (max_extra_load deposited per hedgeable first attempt, a floor, a cap),
 * the hedge counters and the latency picture every hedging process on the
 * host feeds; the parameters are the daemon's (retryd.conf(5)), or
 * retryd's defaults for a process-local slot.
 */

/**
 * Ask about a hedge of an attempt in flight, and when. Completes a copy of
 * @p facts with the host's part (an adaptive request's picture and delay,
 * whether the host throttle is engaged, the pushback left, draining) and
 * asks retryd_hedge_decide(), whose SEND took one token from the hedge
 * bucket and one from the upstream's retry bucket (all-or-nothing, so
 * retries and hedges together stay within the retry budget). Counts a
 * hedge sent, and one that was due and refused, by reason.
 *
 * @param facts  the request's part: idempotency, body, sink, hedges and
 *               max_hedges, elapsed, remaining, min_attempt, taken; its
 *               picture RETRYD_HEDGE_PICTURE_FIXED with delay_ns for a
 *               fixed delay, any other value for the host's picture.
 * @param ret    its sz set by the caller.
 * @return 0, or retryd_hedge_decide()'s error.
 */
RETRYD_EXPORT int retryd_upstream_hedge(retryd_upstream *up,
                                        const retryd_hedge_facts *facts,
                                        retryd_hedge_decision *ret);

/** A hedgeable request's first attempt: deposits max_extra_load of a token
 * in the upstream's hedge bucket (capped). */
RETRYD_EXPORT void retryd_upstream_hedge_deposit(retryd_upstream *up);

/**
 * For the latency picture: the first attempt of a hedgeable request (or
 * of one of its retries) ended after @p latency_ns, or, @p outlived, was
 * stopped because a hedge answered first (it counts as longer than any
 * latency). One atomic addition.
 */
RETRYD_EXPORT void retryd_upstream_hedge_observe(retryd_upstream *up,
                                                 int64_t latency_ns,
                                                 bool outlived);

/** A hedge answered its request first: counted. */
RETRYD_EXPORT void retryd_upstream_hedge_won(retryd_upstream *up);

/** An upstream's hedging as the host sees it now
 * (retryd_upstream_hedging). Counters are the slot's: every process's. */
typedef struct retryd_hedging {
    size_t sz;                 /**< sizeof(retryd_hedging) (docs/abi.md) */
    double max_extra_load;     /**< tokens per hedgeable first attempt */
    double min_hedges_per_sec; /**< the floor */
    double cap;                /**< tokens */
    double balance;            /**< tokens in the hedge bucket now */
    int64_t min_delay_ns;      /**< hedge_min_delay */
    int64_t window_ns;         /**< the picture's window */
    /** FRESH, NONE or NO_TAIL (never FIXED). */
    retryd_hedge_picture picture;
    int64_t delay_ns; /**< FRESH or NO_TAIL: the picture's delay */
    uint64_t sent, won;
    /** Hedges due and refused, by reason. */
    uint64_t refused_hedge_budget, refused_retry_budget, refused_throttled,
        refused_pushback, refused_deadline, refused_draining;
    /** The hedge bucket's ledger: balance = initial + deposits *
     * max_extra_load + refilled - sent - discarded. */
    uint64_t deposits;
    double refilled, discarded;
} retryd_hedging;

/** Fill @p ret (its sz set by the caller). 0 or RETRYD_EINVAL. */
RETRYD_EXPORT int retryd_upstream_hedging(retryd_upstream *up,
                                          retryd_hedging *ret);

/**
 * The decision engine's view of an upstream budget: pass it as
 * retryd_decide_env.budget with the retryd_upstream as budget_ctx. Its
 * take_for() takes the token with retryd_upstream_withdraw_for(), so a
 * refusal names its reason (budget empty, over the process's share, over
 * the request's: docs/budget.md#fair-shares).
 */
RETRYD_EXPORT const retryd_budget_iface *retryd_upstream_budget_iface(void);

/**
 * The first version of the same view, without take_for(): its take()
 * refuses a share like an empty bucket (rule budget_take_failed). Kept
 * for programs built against it; new code uses
 * retryd_upstream_budget_iface().
 */
RETRYD_EXPORT extern const retryd_budget_iface retryd_upstream_budget;

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_BUDGET_DECIDE_H */

/* SPDX-License-Identifier: MIT */
/*
 * retryd: the retry-eligibility decision.
 *
 * A pure function of the facts of one finished attempt: no I/O, no
 * allocation, no lock. It evaluates the rules of the retry specification in
 * their order (see docs/decision.md), and a later rule never re-enables what
 * an earlier one forbade. The only side effect it can cause is taking one
 * token from the budget interface, and only for a retry that will happen.
 */
#ifndef RETRYD_DECISION_H
#define RETRYD_DECISION_H

#include <stdbool.h>
#include <stdint.h>

#include "retryd/backoff.h"
#include "retryd/body.h"
#include "retryd/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What is proven about whether the server received the request. */
typedef enum retryd_evidence {
    /** Proven that the server never received the request. */
    RETRYD_EVIDENCE_NOT_SENT = 0,
    /** Some or all of the request was written; no final header arrived. */
    RETRYD_EVIDENCE_SENT_NO_RESPONSE = 1,
    /** The final header block arrived, whatever the status. */
    RETRYD_EVIDENCE_RESPONSE_RECEIVED = 2,
    /** Final headers and part of the body arrived, then the body failed. */
    RETRYD_EVIDENCE_PARTIAL_RESPONSE = 3,
} retryd_evidence;
#define RETRYD_EVIDENCE_COUNT 4

/** The operation's declared idempotency. The HTTP method never decides it. */
typedef enum retryd_idempotency {
    /** Read-only: executing it twice changes nothing. */
    RETRYD_IDEMPOTENCY_SAFE = 0,
    /** Executing it twice has the effect of executing it once. */
    RETRYD_IDEMPOTENCY_IDEMPOTENT = 1,
    /** Executing it twice may duplicate a side effect (a payment). */
    RETRYD_IDEMPOTENCY_NON_IDEMPOTENT = 2,
    /** Non-idempotent, made safe to replay by an Idempotency-Key header. */
    RETRYD_IDEMPOTENCY_BY_KEY = 3,
} retryd_idempotency;
#define RETRYD_IDEMPOTENCY_COUNT 4

/**
 * Why an attempt failed, as far as the transport knows. NONE when a final
 * response arrived (its status then speaks). The permanent categories are the
 * ones a retry cannot cure; retryd_failure_is_permanent() tells them apart.
 */
typedef enum retryd_failure {
    RETRYD_FAILURE_NONE = 0,
    /* transient */
    RETRYD_FAILURE_DNS = 1,           /**< name resolution failed */
    RETRYD_FAILURE_CONNECT = 2,       /**< TCP connect refused or timed out */
    RETRYD_FAILURE_TLS_HANDSHAKE = 3, /**< TLS failed before any request byte */
    RETRYD_FAILURE_POOL_TIMEOUT = 4,  /**< bulkhead or pool wait ran out */
    RETRYD_FAILURE_REFUSED_STREAM = 5,  /**< HTTP/2 REFUSED_STREAM */
    RETRYD_FAILURE_GOAWAY = 6,          /**< HTTP/2 GOAWAY below our stream */
    RETRYD_FAILURE_TIMEOUT = 7,         /**< attempt timeout after sending */
    RETRYD_FAILURE_CONNECTION_LOST = 8, /**< reset or close mid-exchange */
    RETRYD_FAILURE_IO = 9,              /**< any other transport error */
    /* permanent */
    RETRYD_FAILURE_TLS_CERTIFICATE = 10,  /**< peer certificate rejected */
    RETRYD_FAILURE_MALFORMED = 11,        /**< malformed URL or request */
    RETRYD_FAILURE_UNSUPPORTED = 12,      /**< protocol not supported */
    RETRYD_FAILURE_PROFILE_REJECTED = 13, /**< the profile refused it */
    RETRYD_FAILURE_TOO_MANY_REDIRECTS = 14,
    RETRYD_FAILURE_BODY_SOURCE = 15, /**< the caller's body source failed */
    RETRYD_FAILURE_ABORTED = 16,     /**< the caller aborted the transfer */
    /** Not sent: the host-health throttle kept a first attempt back, or a
     * host pushback would have held it past the deadline (docs/health.md). */
    RETRYD_FAILURE_THROTTLED = 17,
} retryd_failure;
#define RETRYD_FAILURE_COUNT 18

/** The three answers. */
typedef enum retryd_verdict {
    /** Send another attempt after decision.delay_ns. A token was taken. */
    RETRYD_VERDICT_RETRY = 0,
    /** No retry; the outcome of the last attempt stands. */
    RETRYD_VERDICT_DENIED = 1,
    /**
     * No retry, and the request may or may not have executed: the caller
     * must reconcile (query the upstream, or replay with an idempotency key).
     * decision.reason names the earlier rule that forbade a retry, or NONE
     * when the ambiguity itself decided.
     */
    RETRYD_VERDICT_AMBIGUOUS = 2,
} retryd_verdict;

/** Denial reasons, named as in the specification. */
typedef enum retryd_denial {
    RETRYD_DENIAL_NONE = 0,
    RETRYD_DENIAL_MAX_ATTEMPTS = 1,
    RETRYD_DENIAL_BUDGET_EXHAUSTED = 2,
    RETRYD_DENIAL_BODY_NOT_REPLAYABLE = 3,
    RETRYD_DENIAL_RESPONSE_ALREADY_DELIVERED = 4,
    RETRYD_DENIAL_RUNTIME_DRAINING = 5,
    RETRYD_DENIAL_DEADLINE = 6,
    RETRYD_DENIAL_PERMANENT_FAILURE = 7,
    RETRYD_DENIAL_STATUS_NOT_RETRYABLE = 8,
    /** The budget had tokens, but owed to other processes, or this request
     * had taken its share of them (docs/budget.md#fair-shares). */
    RETRYD_DENIAL_OVER_SHARE = 9,
} retryd_denial;
#define RETRYD_DENIAL_COUNT 10

/**
 * The rule that decided. Each has a stable short name (retryd_rule_name())
 * for logs and the CLI, and the number of the specification's rule it belongs
 * to (retryd_rule_order(): 1 to 9). Three checks can only run once rule 9
 * has asked for a retry: a Retry-After must be within the profile's
 * max_retry_after (RETRY_AFTER_EXCEEDS_MAX) and the wait must fit in the
 * deadline (WAIT_EXCEEDS_DEADLINE), both rule 6's concern, and the token
 * must be won (rule 2's concern, BUDGET_TAKE_FAILED); they carry the number
 * of the rule they belong to. New rules are only appended.
 */
#define RETRYD_RULE_MAP(XX)                                                    \
    XX(MAX_ATTEMPTS, 1, "max_attempts")                                        \
    XX(BUDGET_EMPTY, 2, "budget_empty")                                        \
    XX(BODY_NOT_REPLAYABLE, 3, "body_not_replayable")                          \
    XX(RESPONSE_DELIVERED, 4, "response_already_delivered")                    \
    XX(DRAINING, 5, "runtime_draining")                                        \
    XX(DEADLINE, 6, "deadline")                                                \
    XX(PERMANENT_FAILURE, 7, "permanent_failure")                              \
    XX(SENT_NO_RESPONSE_UNSAFE, 8, "sent_no_response_not_idempotent")          \
    XX(NOT_SENT, 9, "not_sent")                                                \
    XX(SENT_NO_RESPONSE_IDEMPOTENT, 9, "sent_no_response_idempotent")          \
    XX(STATUS_408, 9, "status_408")                                            \
    XX(STATUS_425_FIRST, 9, "status_425_first_attempt")                        \
    XX(STATUS_425_AGAIN, 9, "status_425_not_first_attempt")                    \
    XX(STATUS_429, 9, "status_429")                                            \
    XX(STATUS_401_REFRESH, 9, "status_401_refresh")                            \
    XX(STATUS_401_DENIED, 9, "status_401_no_refresh")                          \
    XX(STATUS_500_TRANSIENT, 9, "status_500_transient")                        \
    XX(STATUS_500_DENIED, 9, "status_500")                                     \
    XX(STATUS_GATEWAY_RETRY, 9, "status_gateway_idempotent")                   \
    XX(STATUS_GATEWAY_AMBIGUOUS, 9, "status_gateway_not_idempotent")           \
    XX(STATUS_4XX, 9, "status_4xx")                                            \
    XX(STATUS_5XX_OTHER, 9, "status_5xx_other")                                \
    XX(STATUS_FINAL, 9, "status_final")                                        \
    XX(PARTIAL_REREAD, 9, "partial_response_reread")                           \
    XX(PARTIAL_EXECUTED, 9, "partial_response_executed")                       \
    XX(WAIT_EXCEEDS_DEADLINE, 6, "wait_exceeds_deadline")                      \
    XX(BUDGET_TAKE_FAILED, 2, "budget_take_failed")                            \
    XX(RETRY_AFTER_EXCEEDS_MAX, 6, "retry_after_exceeds_max")                  \
    XX(HOST_THROTTLED, 2, "host_throttled")                                    \
    XX(PUSHBACK_EXCEEDS_DEADLINE, 6, "pushback_exceeds_deadline")              \
    XX(PROCESS_OVER_SHARE, 2, "process_over_share")                            \
    XX(REQUEST_OVER_SHARE, 2, "request_over_share")                            \
    XX(HEDGE_SIBLING_ANSWERED, 4, "hedge_sibling_answered")                    \
    XX(HEDGE_SIBLING_RUNNING, 9, "hedge_sibling_running")

typedef enum retryd_rule {
#define RETRYD__RULE_ENUM(name, order, text) RETRYD_RULE_##name,
    RETRYD_RULE_MAP(RETRYD__RULE_ENUM)
#undef RETRYD__RULE_ENUM
        RETRYD_RULE_COUNT
} retryd_rule;

/**
 * The facts of one finished attempt. Plain data, owned by the caller.
 * Durations are nanoseconds.
 */
typedef struct retryd_facts {
    size_t sz;             /**< sizeof(retryd_facts) (docs/abi.md) */
    uint32_t attempt;      /**< 1-based number of the attempt that finished */
    uint32_t max_attempts; /**< attempts allowed in all, >= 1 */
    retryd_evidence evidence;
    retryd_replayability replayability;
    retryd_idempotency idempotency;
    retryd_failure failure; /**< NONE when a final status arrived */
    int status;             /**< final HTTP status (200..999), 0 when none */
    /** Parsed Retry-After (retryd_retry_after_parse()), -1 when absent. */
    int64_t retry_after_ns;
    int64_t remaining_ns;    /**< time left before the request's deadline */
    int64_t min_attempt_ns;  /**< an attempt needs at least this long */
    int64_t prev_delay_ns;   /**< the previous backoff wait, 0 before any */
    bool response_delivered; /**< a response byte reached the caller */
    bool draining;           /**< this process or the host is draining */
    bool refresh_used;       /**< the one credential refresh is spent */
    bool transient_500;      /**< the upstream registered 500 as transient */
    /**
     * The host pushback left on this upstream (docs/health.md): a
     * Retry-After that some process on the host received. A retry waits
     * it out, spread by jitter, and one it would carry past the deadline
     * (or past the profile's max_retry_after) is denied with rule 6. 0 when
     * none is in force.
     */
    int64_t pushback_ns;
} retryd_facts;

/**
 * The budget as the engine sees it. peek() tells whether a token is likely
 * available without taking it (rule 2); take() withdraws one token,
 * all-or-nothing, and is called at most once, only for a retry that will
 * happen. Both must be safe to call from any thread. The host budget of
 * retryd_upstream provides one (budget.h); tests provide their own.
 */
typedef struct retryd_budget_iface {
    size_t sz; /**< sizeof(retryd_budget_iface) */
    bool (*peek)(void *ctx);
    bool (*take)(void *ctx);
    /**
     * Optional (NULL, or a sz that ends before it: take() is used): take a
     * token for a request that has taken @p taken already. 0, or why not:
     * RETRYD_EBUDGET (no token), RETRYD_ESHARE (the tokens are owed to
     * other processes), RETRYD_EREQSHARE (the request took its share).
     */
    int (*take_for)(void *ctx, uint32_t taken);
} retryd_budget_iface;

/** Everything besides the facts that a decision needs; caller-owned. */
typedef struct retryd_decide_env {
    size_t sz;                            /**< sizeof(retryd_decide_env) */
    const retryd_backoff_policy *backoff; /**< NULL: retryd's defaults */
    /** Random source for jitter; NULL: retryd_random_default(). */
    retryd_random_fn random;
    void *random_ctx;
    /** The retry budget; NULL: unlimited (no budget applies). */
    const retryd_budget_iface *budget;
    void *budget_ctx;
} retryd_decide_env;

/** Flags of a retry. */
#define RETRYD_RETRY_REFRESH_CREDENTIALS 0x1u /**< refresh, then replay */
#define RETRYD_RETRY_HONOURS_RETRY_AFTER 0x2u /**< delay is the server's */
#define RETRYD_RETRY_HELD_BY_PUSHBACK 0x4u /**< delay waits out a host hold */

/** A decision. Plain data, owned by the caller, who sets sz before asking
 * for one; the library writes only the first sz bytes. */
typedef struct retryd_decision {
    size_t sz; /**< sizeof(retryd_decision) */
    retryd_verdict verdict;
    retryd_denial reason;     /**< NONE for a retry */
    retryd_rule rule;         /**< the rule that decided */
    retryd_failure permanent; /**< the category, for PERMANENT_FAILURE */
    int64_t delay_ns;         /**< wait before the retry; 0 otherwise */
    unsigned flags;           /**< RETRYD_RETRY_* for a retry */
} retryd_decision;

/**
 * Decide whether the attempt described by @p facts may be followed by
 * another.
 *
 * Evaluates the specification's rules in order. A token is taken from
 * env->budget only when the verdict is RETRY; when the take fails (another
 * process won the last token) the answer is DENIED budget_exhausted. Any
 * denial, by whichever rule, leaves the budget untouched. A denial whose
 * attempt may have executed a non-idempotent operation comes back as
 * AMBIGUOUS, with the denying rule as its reason.
 *
 * Does not allocate, lock or block; safe from any thread.
 *
 * @param facts   the attempt; read only (its first facts->sz bytes).
 * @param env     backoff, random source and budget; NULL for all defaults.
 * @param ret     its sz set by the caller; its first ret->sz bytes are
 *                written, only on success.
 * @return 0, or RETRYD_EINVAL when the facts are inconsistent (attempt 0,
 *         attempt above max_attempts, an enum out of range, a status outside
 *         200..999, a response evidence without a status, negative
 *         durations) or a struct's sz is missing or too small, or
 *         RETRYD_EOPTS when a struct has non-zero fields this library does
 *         not know (docs/abi.md).
 */
RETRYD_EXPORT int retryd_decide(const retryd_facts *facts,
                                const retryd_decide_env *env,
                                retryd_decision *ret);

/**
 * Upstream health (docs/health.md): what the host says of an attempt about
 * to be sent. retryd_upstream_admit() (retryd/budget_decide.h) gathers the
 * facts from the host segment and asks this; `retrydctl decide --admit`
 * shows it.
 */
typedef enum retryd_admission {
    RETRYD_ADMIT_SEND = 0, /**< send it now */
    /** A first attempt the host throttle keeps back: not sent, not an
     * upstream failure. */
    RETRYD_ADMIT_THROTTLED = 1,
    /** A host pushback is in force: wait *ret_wait_ns, then ask again. */
    RETRYD_ADMIT_HOLD = 2,
    /** The pushback would hold it past the deadline: not sent. */
    RETRYD_ADMIT_PAST_DEADLINE = 3,
} retryd_admission;
#define RETRYD_ADMISSION_COUNT 4

/** The facts of an admission. Plain data, owned by the caller. */
typedef struct retryd_admit_facts {
    size_t sz;          /**< sizeof(retryd_admit_facts) (docs/abi.md) */
    bool first_attempt; /**< a first attempt (else a retry) */
    /** The host throttle's probability for a first attempt, in [0, 1]; 0
     * when the throttle is off or not engaged. */
    double throttle_probability;
    /** A uniform draw in [0, 1): throttled when below the probability. */
    double draw;
    int64_t pushback_ns;          /**< the host hold left; 0 none */
    bool pushback_first_attempts; /**< holds apply to first attempts too */
    int64_t remaining_ns;         /**< time left before the deadline */
    int64_t min_attempt_ns;       /**< an attempt needs at least this long */
} retryd_admit_facts;

/**
 * Decide an admission. A retry, and a first attempt when
 * pushback_first_attempts is set, waits out a hold (plus a jitter of up to
 * a quarter of it and 50 ms, so that held attempts do not resume in one
 * burst), or is refused when that wait leaves no minimum attempt before
 * the deadline. Otherwise a first attempt is throttled when draw is below
 * throttle_probability. Pure: no I/O, no randomness of its own.
 *
 * @param random      the jitter's source; NULL: retryd_random_default().
 * @param ret_wait_ns the wait for RETRYD_ADMIT_HOLD, else 0.
 * @return 0, RETRYD_EINVAL for facts out of range, RETRYD_EOPTS.
 */
RETRYD_EXPORT int retryd_admit(const retryd_admit_facts *facts,
                               retryd_random_fn random, void *random_ctx,
                               retryd_admission *ret, int64_t *ret_wait_ns);

/** "send", "throttled", "hold", "past_deadline"; "unknown" otherwise. */
RETRYD_EXPORT const char *retryd_admission_name(retryd_admission a);

/** How an attempt counts in the host throttle's window (docs/health.md). */
typedef enum retryd_health_count {
    /** Not at all: nothing reached the upstream (NOT_SENT). */
    RETRYD_HEALTH_NOT_COUNTED = 0,
    RETRYD_HEALTH_ACCEPT = 1, /**< a request the upstream took */
    /** A request the upstream turned away: 429, 502, 503, 504, or sent
     * with no response (a timeout, a reset). */
    RETRYD_HEALTH_REJECT = 2,
} retryd_health_count;

/** How an attempt with @p evidence and final @p status (0 for none)
 * counts. */
RETRYD_EXPORT retryd_health_count
retryd_health_classify(retryd_evidence evidence, int status);

/*
 * Hedging (docs/hedging.md): a second attempt sent while the first is
 * still running, the first answer winning. Whether a hedge is sent, and
 * when, is the engine's too: retryd_hedge_decide() is a pure function of
 * the facts below, which the budget layer gathers from the host segment
 * (retryd_upstream_hedge(), retryd/budget_decide.h).
 *
 * The two rules above are how an attempt of a hedged request ends when the
 * engine does not decide it alone: HEDGE_SIBLING_ANSWERED for an attempt
 * stopped because a sibling answered first (rule 4's concern: the request
 * was answered), HEDGE_SIBLING_RUNNING for one that ended without an
 * answer while a sibling still ran (the engine decides the request when
 * the last of them ends).
 */

/** Where a hedge's delay comes from (retryd_hedge_facts.picture). */
typedef enum retryd_hedge_picture {
    /** A fixed delay, the caller's: no picture is asked. */
    RETRYD_HEDGE_PICTURE_FIXED = 0,
    /** The host's latency picture of the upstream gives the delay. */
    RETRYD_HEDGE_PICTURE_FRESH = 1,
    /** Adaptive, but no picture: none refreshed yet, or within its window
     * too few attempts ended to place the delay. */
    RETRYD_HEDGE_PICTURE_NONE = 2,
    /** Adaptive, and the picture says a hedge would not answer first: the
     * attempts that outlive the delay do not outlive it by much (a slow
     * upstream, not a slow minority). */
    RETRYD_HEDGE_PICTURE_NO_TAIL = 3,
} retryd_hedge_picture;
#define RETRYD_HEDGE_PICTURE_COUNT 4

/** The three answers about a hedge. */
typedef enum retryd_hedge_verdict {
    /** Send a hedge now: its tokens were taken. */
    RETRYD_HEDGE_SEND = 0,
    /** Not yet: ask again after retryd_hedge_decision.delay_ns. */
    RETRYD_HEDGE_WAIT = 1,
    /** No hedge for this attempt; the rule says why. The attempts in
     * flight go on untouched. */
    RETRYD_HEDGE_NO = 2,
} retryd_hedge_verdict;
#define RETRYD_HEDGE_VERDICT_COUNT 3

/**
 * The rule behind a hedge decision, in the order they are evaluated
 * (docs/hedging.md); each has a stable name (retryd_hedge_rule_name()).
 * The first four hold for the whole request, whatever the caller asks:
 * only a safely idempotent operation with a replayable body whose response
 * has not started reaching the caller is ever sent twice at once. New
 * rules are only appended.
 */
#define RETRYD_HEDGE_RULE_MAP(XX)                                              \
    XX(SEND, "hedge_sent")                                                     \
    XX(WAIT, "hedge_wait")                                                     \
    XX(NOT_IDEMPOTENT, "hedge_not_idempotent")                                 \
    XX(BODY_NOT_REPLAYABLE, "hedge_body_not_replayable")                       \
    XX(STREAMED, "hedge_streamed")                                             \
    XX(RESPONSE_DELIVERED, "hedge_response_delivered")                         \
    XX(MAX_HEDGES, "hedge_max_hedges")                                         \
    XX(DRAINING, "hedge_draining")                                             \
    XX(NO_PICTURE, "hedge_no_picture")                                         \
    XX(NO_TAIL, "hedge_no_tail")                                               \
    XX(DEADLINE, "hedge_deadline")                                             \
    XX(HOST_THROTTLED, "hedge_host_throttled")                                 \
    XX(HOST_PUSHBACK, "hedge_host_pushback")                                   \
    XX(HEDGE_BUDGET, "hedge_budget_empty")                                     \
    XX(RETRY_BUDGET, "hedge_retry_budget_empty")                               \
    XX(PROCESS_OVER_SHARE, "hedge_process_over_share")                         \
    XX(REQUEST_OVER_SHARE, "hedge_request_over_share")

typedef enum retryd_hedge_rule {
#define RETRYD__HEDGE_RULE_ENUM(name, text) RETRYD_HEDGE_RULE_##name,
    RETRYD_HEDGE_RULE_MAP(RETRYD__HEDGE_RULE_ENUM)
#undef RETRYD__HEDGE_RULE_ENUM
        RETRYD_HEDGE_RULE_COUNT
} retryd_hedge_rule;

/** The facts of a hedge about to be due. Plain data, owned by the caller.
 * Durations are nanoseconds. */
typedef struct retryd_hedge_facts {
    size_t sz; /**< sizeof(retryd_hedge_facts) (docs/abi.md) */
    retryd_idempotency idempotency;
    retryd_replayability replayability;
    /** The response goes to the caller as it arrives (a sink). */
    bool streamed;
    bool response_delivered; /**< a response byte reached the caller */
    uint32_t hedges;         /**< hedges sent for the request so far */
    uint32_t max_hedges;     /**< hedges allowed in all, >= 1 */
    retryd_hedge_picture picture;
    /** The delay: the caller's fixed one, or the picture's (FRESH). */
    int64_t delay_ns;
    /** Since the attempt the hedge would follow started (or the last
     * hedge was sent). */
    int64_t elapsed_ns;
    int64_t remaining_ns;   /**< time left before the request's deadline */
    int64_t min_attempt_ns; /**< an attempt needs at least this long */
    bool draining;          /**< this process or the host is draining */
    bool throttle_engaged;  /**< the host throttle is engaged (health.md) */
    int64_t pushback_ns;    /**< the host pushback left; 0 none */
    /** Tokens the request took from the retry budget so far (its retries
     * and hedges): what the budget's take_for() hears. */
    uint32_t taken;
} retryd_hedge_facts;

/** A hedge decision. Plain data, owned by the caller, who sets sz. */
typedef struct retryd_hedge_decision {
    size_t sz; /**< sizeof(retryd_hedge_decision) */
    retryd_hedge_verdict verdict;
    retryd_hedge_rule rule; /**< why */
    int64_t delay_ns;       /**< WAIT: ask again after this; else 0 */
} retryd_hedge_decision;

/**
 * Decide whether a hedge is sent now, later, or not at all, by the rules
 * of RETRYD_HEDGE_RULE_MAP in their order (docs/hedging.md).
 *
 * A hedge pays a token from the host hedge budget and one from the
 * upstream's retry budget: @p env->budget's take_for() takes both,
 * all-or-nothing, and says which refused (0, RETRYD_EHEDGE for the hedge
 * budget, RETRYD_EBUDGET, RETRYD_ESHARE or RETRYD_EREQSHARE for the retry
 * budget); it is called at most once, only for a hedge that is sent. No
 * other verdict spends anything. Pure otherwise: no I/O, no allocation.
 *
 * @param facts  the hedge; read only (its first facts->sz bytes).
 * @param env    only its budget is read; NULL, or no budget: unlimited.
 * @param ret    its sz set by the caller; its first ret->sz bytes are
 *               written, only on success.
 * @return 0, RETRYD_EINVAL (facts out of range: an enum, max_hedges 0,
 *         negative durations; a struct's sz missing), RETRYD_EOPTS.
 */
RETRYD_EXPORT int retryd_hedge_decide(const retryd_hedge_facts *facts,
                                      const retryd_decide_env *env,
                                      retryd_hedge_decision *ret);

/**
 * Whether the attempt described by @p facts answers its request while a
 * sibling attempt is still running. A failure that a sibling may still
 * escape (NOT_SENT, SENT_NO_RESPONSE, a 2xx cut short, 408, 425, 429,
 * 502, 503, 504, a 500 the upstream registered as transient) does not:
 * the request waits for the sibling. Anything else does (a final status,
 * another 4xx or 5xx, a permanent failure), and the siblings are stopped.
 * Facts that retryd_decide() would refuse answer (true).
 */
RETRYD_EXPORT bool retryd_hedge_answers(const retryd_facts *facts);

/** Stable names, static strings; "unknown" when out of range. */
RETRYD_EXPORT const char *retryd_hedge_rule_name(retryd_hedge_rule r);
RETRYD_EXPORT const char *retryd_hedge_verdict_name(retryd_hedge_verdict v);
RETRYD_EXPORT const char *retryd_hedge_picture_name(retryd_hedge_picture p);

/**
 * True when a complete response with @p status ends the call: 2xx, 3xx and
 * anything beyond 599. Such an attempt did not fail, so there is nothing
 * to decide (retryd_decide() would answer it with rule status_final, after
 * the failed-attempt rules before it).
 */
RETRYD_EXPORT bool retryd_status_is_final(int status);

/** True for the failure categories a retry cannot cure. */
RETRYD_EXPORT bool retryd_failure_is_permanent(retryd_failure failure);

/** True for SAFE, IDEMPOTENT and BY_KEY: replaying cannot duplicate. */
RETRYD_EXPORT bool retryd_idempotency_is_safe(retryd_idempotency idem);

/** Stable names, static strings; "unknown" when out of range. */
RETRYD_EXPORT const char *retryd_evidence_name(retryd_evidence e);
RETRYD_EXPORT const char *retryd_idempotency_name(retryd_idempotency i);
RETRYD_EXPORT const char *retryd_failure_name(retryd_failure f);
RETRYD_EXPORT const char *retryd_verdict_name(retryd_verdict v);
RETRYD_EXPORT const char *retryd_denial_name(retryd_denial d);
RETRYD_EXPORT const char *retryd_rule_name(retryd_rule r);

/** The specification's rule number (1..9) of @p r; 0 when out of range. */
RETRYD_EXPORT int retryd_rule_order(retryd_rule r);

/**
 * Parse a stable name back (for the CLI and configuration).
 * @return 0 and writes *ret, or RETRYD_EINVAL for an unknown name.
 */
RETRYD_EXPORT int retryd_evidence_from_name(const char *name,
                                            retryd_evidence *ret);
RETRYD_EXPORT int retryd_idempotency_from_name(const char *name,
                                               retryd_idempotency *ret);
RETRYD_EXPORT int retryd_failure_from_name(const char *name,
                                           retryd_failure *ret);

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_DECISION_H */

/* SPDX-License-Identifier: MIT */
/*
 * The retry-eligibility engine. Read docs/decision.md first: it states the
 * order of the rules, the status table and the choices made where the
 * specification is silent. This file is that document as code, in the same
 * order, so the two can be read side by side.
 *
 * Invariants the tests hold us to:
 *   - the first rule whose condition holds decides; nothing later re-enables
 *     a retry an earlier rule forbade;
 *   - a token is taken only on the way out of a RETRY, so no denial ever
 *     spends budget;
 *   - no allocation, no lock, no system call (the default random source
 *     seeds itself once per thread with getrandom, outside this file).
 */
#include "decide/decide.h"
#include "retryd/decision.h"

static bool status_is_gateway(int status)
{
    return status == 502 || status == 503 || status == 504;
}

bool retryd_idempotency_is_safe(retryd_idempotency idem)
{
    return idem == RETRYD_IDEMPOTENCY_SAFE ||
           idem == RETRYD_IDEMPOTENCY_IDEMPOTENT ||
           idem == RETRYD_IDEMPOTENCY_BY_KEY;
}

bool retryd_status_is_final(int status)
{
    return status < 400 || status > 599;
}

bool retryd_failure_is_permanent(retryd_failure failure)
{
    return failure >= RETRYD_FAILURE_TLS_CERTIFICATE &&
           failure < RETRYD_FAILURE_COUNT;
}

static bool has_response(retryd_evidence e)
{
    return e == RETRYD_EVIDENCE_RESPONSE_RECEIVED ||
           e == RETRYD_EVIDENCE_PARTIAL_RESPONSE;
}

static int facts_validate(const retryd_facts *f)
{
    if (f->attempt < 1 || f->max_attempts < 1 || f->attempt > f->max_attempts)
        return RETRYD_EINVAL;
    if ((unsigned)f->evidence >= RETRYD_EVIDENCE_COUNT ||
        (unsigned)f->replayability >= RETRYD_REPLAYABILITY_COUNT ||
        (unsigned)f->idempotency >= RETRYD_IDEMPOTENCY_COUNT ||
        (unsigned)f->failure >= RETRYD_FAILURE_COUNT)
        return RETRYD_EINVAL;
    /* A status exists exactly when a final header block arrived, and an
     * attempt that produced none failed for some reason. */
    if (has_response(f->evidence)) {
        if (f->status < 200 || f->status > 999)
            return RETRYD_EINVAL;
    } else if (f->status != 0 || f->failure == RETRYD_FAILURE_NONE) {
        return RETRYD_EINVAL;
    }
    if (f->remaining_ns < 0 || f->min_attempt_ns < 0 || f->prev_delay_ns < 0 ||
        f->retry_after_ns < -1 || f->pushback_ns < 0)
        return RETRYD_EINVAL;
    return 0;
}

/*
 * Whether the attempt may have executed an operation that must not run
 * twice. Such an attempt never ends as a plain denial: whichever rule stops
 * the retry, the answer is AMBIGUOUS, because a plain failure would tell the
 * caller the request did not happen, which may be false.
 */
static bool execution_unknown(const retryd_facts *f)
{
    if (retryd_idempotency_is_safe(f->idempotency))
        return false;
    switch (f->evidence) {
    case RETRYD_EVIDENCE_SENT_NO_RESPONSE:
        return true;
    case RETRYD_EVIDENCE_RESPONSE_RECEIVED:
        return status_is_gateway(f->status);
    case RETRYD_EVIDENCE_PARTIAL_RESPONSE:
        return status_is_gateway(f->status) ||
               (f->status >= 200 && f->status <= 299);
    case RETRYD_EVIDENCE_NOT_SENT:
    default:
        return false;
    }
}

/*
 * Take the retry's token: RETRYD_RULE_COUNT when it was won, else the rule
 * that refused it. A budget with take_for() hears how many the request
 * took already (its retries so far: one per attempt after the first), so
 * it can hold one request to its share (docs/budget.md#fair-shares).
 */
static retryd_rule take_token(const retryd_budget_iface *b, void *ctx,
                              const retryd_facts *f)
{
    if (b->sz < RETRYD_OPTS_MIN(retryd_budget_iface, take_for) ||
        b->take_for == NULL)
        return b->take(ctx) ? RETRYD_RULE_COUNT
                            : RETRYD_RULE_BUDGET_TAKE_FAILED;
    switch (b->take_for(ctx, f->attempt > 1 ? f->attempt - 1 : 0)) {
    case 0:
        return RETRYD_RULE_COUNT;
    case RETRYD_ESHARE:
        return RETRYD_RULE_PROCESS_OVER_SHARE;
    case RETRYD_EREQSHARE:
        return RETRYD_RULE_REQUEST_OVER_SHARE;
    default:
        return RETRYD_RULE_BUDGET_TAKE_FAILED;
    }
}

static inline __attribute__((always_inline)) int stop(const retryd_facts *f,
                                                      retryd_decision *ret,
                                                      retryd_rule rule,
                                                      retryd_denial reason)
{
    *ret = (retryd_decision){
        .sz = sizeof(retryd_decision),
        .verdict = execution_unknown(f) ? RETRYD_VERDICT_AMBIGUOUS
                                        : RETRYD_VERDICT_DENIED,
        .reason = reason,
        .rule = rule,
        .permanent = reason == RETRYD_DENIAL_PERMANENT_FAILURE
                         ? f->failure
                         : RETRYD_FAILURE_NONE,
    };
    return 0;
}

static int ambiguous(retryd_decision *ret, retryd_rule rule)
{
    *ret = (retryd_decision){.sz = sizeof(retryd_decision),
                             .verdict = RETRYD_VERDICT_AMBIGUOUS,
                             .reason = RETRYD_DENIAL_NONE,
                             .rule = rule};
    return 0;
}

/*
 * The wait before the retry, or -1 when the server's Retry-After asks for
 * more than the profile will wait.
 *
 * A Retry-After replaces our backoff: it is the earliest moment the server
 * will take the next attempt, and it knows its own recovery time better
 * than a jittered guess. It is a floor, never shortened: a shorter wait
 * would hit a rate-limited upstream at exactly the moment it asked for
 * quiet, from every process of the fleet at once. So a Retry-After above
 * the profile's max_retry_after is not cut down to it; the retry is denied
 * (docs/decision.md).
 */
static int64_t retry_wait(const retryd_facts *f, const retryd_decide_env *env,
                          unsigned *flags)
{
    const retryd_backoff_policy *p =
        env->backoff ? env->backoff : &retryd_backoff_default;

    if (f->retry_after_ns >= 0) {
        *flags |= RETRYD_RETRY_HONOURS_RETRY_AFTER;
        return f->retry_after_ns <= p->max_retry_after_ns ? f->retry_after_ns
                                                          : -1;
    }
    return retryd__backoff_delay(p, f->attempt, f->prev_delay_ns, env->random,
                                 env->random_ctx);
}

/*
 * Rule 9 decided that a retry is wanted. Three checks remain that can only
 * be made now: a Retry-After must be one the profile honours, the wait
 * must leave a whole minimum attempt before the deadline, and the token
 * must actually be won (another process may have taken the last one since
 * rule 2 peeked).
 */
static int grant(const retryd_facts *f, const retryd_decide_env *env,
                 retryd_decision *ret, retryd_rule rule, unsigned flags)
{
    int64_t wait = retry_wait(f, env, &flags);

    if (wait < 0)
        return stop(f, ret, RETRYD_RULE_RETRY_AFTER_EXCEEDS_MAX,
                    RETRYD_DENIAL_DEADLINE);
    if (wait > f->remaining_ns - f->min_attempt_ns)
        return stop(f, ret, RETRYD_RULE_WAIT_EXCEEDS_DEADLINE,
                    RETRYD_DENIAL_DEADLINE);
    /* A host pushback is another process's Retry-After for this upstream:
     * a floor like our own, judged by the same bound, and spread so that
     * the processes it held do not resume in one burst. */
    if (f->pushback_ns > 0) {
        const retryd_backoff_policy *p =
            env->backoff ? env->backoff : &retryd_backoff_default;
        if (f->pushback_ns > p->max_retry_after_ns)
            return stop(f, ret, RETRYD_RULE_RETRY_AFTER_EXCEEDS_MAX,
                        RETRYD_DENIAL_DEADLINE);
        int64_t held =
            retryd__pushback_wait(f->pushback_ns, env->random, env->random_ctx);
        if (held > wait) {
            wait = held;
            flags |= RETRYD_RETRY_HELD_BY_PUSHBACK;
        }
        if (wait > f->remaining_ns - f->min_attempt_ns)
            return stop(f, ret, RETRYD_RULE_PUSHBACK_EXCEEDS_DEADLINE,
                        RETRYD_DENIAL_DEADLINE);
    }
    if (env->budget) {
        retryd_rule refused = take_token(env->budget, env->budget_ctx, f);
        if (refused != RETRYD_RULE_COUNT)
            return stop(f, ret, refused,
                        refused == RETRYD_RULE_BUDGET_TAKE_FAILED
                            ? RETRYD_DENIAL_BUDGET_EXHAUSTED
                            : RETRYD_DENIAL_OVER_SHARE);
    }
    *ret = (retryd_decision){.sz = sizeof(retryd_decision),
                             .verdict = RETRYD_VERDICT_RETRY,
                             .reason = RETRYD_DENIAL_NONE,
                             .rule = rule,
                             .delay_ns = wait,
                             .flags = flags};
    return 0;
}

/* The status table, for an attempt whose final status is known. */
static int decide_status(const retryd_facts *f, const retryd_decide_env *env,
                         retryd_decision *ret)
{
    bool safe = retryd_idempotency_is_safe(f->idempotency);
    int s = f->status;

    switch (s) {
    case 408:
        return grant(f, env, ret, RETRYD_RULE_STATUS_408, 0);
    case 425:
        if (f->attempt == 1)
            return grant(f, env, ret, RETRYD_RULE_STATUS_425_FIRST, 0);
        return stop(f, ret, RETRYD_RULE_STATUS_425_AGAIN,
                    RETRYD_DENIAL_STATUS_NOT_RETRYABLE);
    case 429:
        return grant(f, env, ret, RETRYD_RULE_STATUS_429, 0);
    case 401:
        if (safe && !f->refresh_used)
            return grant(f, env, ret, RETRYD_RULE_STATUS_401_REFRESH,
                         RETRYD_RETRY_REFRESH_CREDENTIALS);
        return stop(f, ret, RETRYD_RULE_STATUS_401_DENIED,
                    RETRYD_DENIAL_STATUS_NOT_RETRYABLE);
    case 500:
        if (safe && f->transient_500)
            return grant(f, env, ret, RETRYD_RULE_STATUS_500_TRANSIENT, 0);
        return stop(f, ret, RETRYD_RULE_STATUS_500_DENIED,
                    RETRYD_DENIAL_STATUS_NOT_RETRYABLE);
    case 502:
    case 503:
    case 504:
        if (safe)
            return grant(f, env, ret, RETRYD_RULE_STATUS_GATEWAY_RETRY, 0);
        return ambiguous(ret, RETRYD_RULE_STATUS_GATEWAY_AMBIGUOUS);
    default:
        break;
    }
    if (retryd_status_is_final(s))
        return stop(f, ret, RETRYD_RULE_STATUS_FINAL,
                    RETRYD_DENIAL_STATUS_NOT_RETRYABLE);
    if (s <= 499)
        return stop(f, ret, RETRYD_RULE_STATUS_4XX,
                    RETRYD_DENIAL_STATUS_NOT_RETRYABLE);
    return stop(f, ret, RETRYD_RULE_STATUS_5XX_OTHER,
                RETRYD_DENIAL_STATUS_NOT_RETRYABLE);
}

/* Rule 9: status- and failure-specific rules. */
static int decide_specific(const retryd_facts *f, const retryd_decide_env *env,
                           retryd_decision *ret)
{
    switch (f->evidence) {
    case RETRYD_EVIDENCE_NOT_SENT:
        /* Proven never received: retryable whatever the idempotency. */
        return grant(f, env, ret, RETRYD_RULE_NOT_SENT, 0);
    case RETRYD_EVIDENCE_SENT_NO_RESPONSE:
        /* Rule 8 already stopped the operations that are not safe. */
        return grant(f, env, ret, RETRYD_RULE_SENT_NO_RESPONSE_IDEMPOTENT, 0);
    case RETRYD_EVIDENCE_PARTIAL_RESPONSE:
        /* A success status proves the operation executed and only its
         * result was lost: read it again if that is harmless, otherwise the
         * caller must reconcile. Other statuses speak for themselves. */
        if (f->status >= 200 && f->status <= 299) {
            if (retryd_idempotency_is_safe(f->idempotency))
                return grant(f, env, ret, RETRYD_RULE_PARTIAL_REREAD, 0);
            return ambiguous(ret, RETRYD_RULE_PARTIAL_EXECUTED);
        }
        return decide_status(f, env, ret);
    case RETRYD_EVIDENCE_RESPONSE_RECEIVED:
    default:
        return decide_status(f, env, ret);
    }
}

int retryd__env_copy(const retryd_decide_env *env, retryd_decide_env *e,
                     retryd_budget_iface *iface)
{
    int r = RETRYD_COPY_OPTS(e, env, RETRYD_ENV_MIN_SZ);
    if (r == 0 && e->budget != NULL) {
        r = RETRYD_COPY_OPTS(iface, e->budget, RETRYD_IFACE_MIN_SZ);
        iface->sz = sizeof(*iface);
        e->budget = iface;
    }
    e->sz = sizeof(*e);
    return r;
}

/*
 * Structs of another version of the header (docs/abi.md): each is checked,
 * copied at this library's size, and decided on the fast path below; the
 * decision goes back at the caller's size. Out of line, so the usual call,
 * whose structs all have this library's size, pays a few compares for it.
 */
static int __attribute__((noinline))
decide_other_version(const retryd_facts *facts, const retryd_decide_env *env,
                     retryd_decision *ret)
{
    retryd_facts f;
    retryd_decide_env e = {.sz = sizeof(e)};
    retryd_budget_iface iface;
    retryd_backoff_policy backoff;
    retryd_decision d = {.sz = sizeof(d)};
    size_t sz = ret->sz;

    if (sz < RETRYD_DECISION_MIN_SZ || sz > RETRYD_OPTS_MAX)
        return RETRYD_EINVAL;
    int r = RETRYD_COPY_OPTS(&f, facts, RETRYD_FACTS_MIN_SZ);
    if (r == 0 && env != NULL)
        r = retryd__env_copy(env, &e, &iface);
    if (r == 0 && e.budget != NULL &&
        (iface.peek == NULL || iface.take == NULL))
        r = RETRYD_EINVAL;
    if (r == 0 && e.backoff != NULL) {
        r = RETRYD_COPY_OPTS(&backoff, e.backoff, RETRYD_BACKOFF_MIN_SZ);
        e.backoff = &backoff;
    }
    if (r < 0)
        return r;
    f.sz = sizeof(f);
    backoff.sz = sizeof(backoff);
    r = retryd_decide(&f, &e, &d);
    if (r < 0)
        return r;
    retryd__opts_out(ret, sz, &d, sizeof(d));
    return 0;
}

/* Whether every struct the call reads has this library's size. */
static bool same_version(const retryd_facts *f, const retryd_decide_env *env,
                         const retryd_decision *ret)
{
    if (f->sz != sizeof(*f) || ret->sz != sizeof(*ret))
        return false;
    return env == NULL ||
           (env->sz == sizeof(*env) &&
            (env->budget == NULL || env->budget->sz == sizeof(*env->budget)) &&
            (env->backoff == NULL ||
             env->backoff->sz == sizeof(*env->backoff)));
}

int retryd_decide(const retryd_facts *facts, const retryd_decide_env *env,
                  retryd_decision *ret)
{
    static const retryd_decide_env no_env = {.sz = sizeof(no_env)};
    const retryd_facts *f = facts;
    int r;

    if (f == NULL || ret == NULL)
        return RETRYD_EINVAL;
    if (!same_version(f, env, ret))
        return decide_other_version(f, env, ret);
    r = facts_validate(f);
    if (r < 0)
        return r;
    if (env == NULL)
        env = &no_env;

    /* 1 */
    if (f->attempt >= f->max_attempts)
        return stop(f, ret, RETRYD_RULE_MAX_ATTEMPTS,
                    RETRYD_DENIAL_MAX_ATTEMPTS);
    /* 2: only a peek; the token is taken in grant(), for a real retry. */
    if (env->budget && !env->budget->peek(env->budget_ctx))
        return stop(f, ret, RETRYD_RULE_BUDGET_EMPTY,
                    RETRYD_DENIAL_BUDGET_EXHAUSTED);
    /* 3 */
    if (f->replayability == RETRYD_ONE_SHOT)
        return stop(f, ret, RETRYD_RULE_BODY_NOT_REPLAYABLE,
                    RETRYD_DENIAL_BODY_NOT_REPLAYABLE);
    /* 4 */
    if (f->response_delivered)
        return stop(f, ret, RETRYD_RULE_RESPONSE_DELIVERED,
                    RETRYD_DENIAL_RESPONSE_ALREADY_DELIVERED);
    /* 5 */
    if (f->draining)
        return stop(f, ret, RETRYD_RULE_DRAINING,
                    RETRYD_DENIAL_RUNTIME_DRAINING);
    /* 6 */
    if (f->remaining_ns < f->min_attempt_ns)
        return stop(f, ret, RETRYD_RULE_DEADLINE, RETRYD_DENIAL_DEADLINE);
    /* 7 */
    if (retryd_failure_is_permanent(f->failure))
        return stop(f, ret, RETRYD_RULE_PERMANENT_FAILURE,
                    RETRYD_DENIAL_PERMANENT_FAILURE);
    /* 8 */
    if (f->evidence == RETRYD_EVIDENCE_SENT_NO_RESPONSE &&
        !retryd_idempotency_is_safe(f->idempotency))
        return ambiguous(ret, RETRYD_RULE_SENT_NO_RESPONSE_UNSAFE);
    /* 9 */
    return decide_specific(f, env, ret);
}

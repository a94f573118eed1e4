/* SPDX-License-Identifier: MIT */
/*
 * Hedging as the decision engine sees it (docs/hedging.md): whether a
 * hedge is sent now, later or not at all, and whether an attempt of a
 * hedged request answers it while a sibling still runs. Pure, like the
 * rest of the engine: the budget layer reads the host segment (the
 * latency picture, the throttle, the pushback) and passes what it found;
 * the only side effect is the hedge's tokens, taken through the budget
 * interface for a hedge that is sent.
 */
#include "decide/decide.h"
#include "retryd/decision.h"

#define HEDGE_FACTS_MIN_SZ RETRYD_OPTS_MIN(retryd_hedge_facts, taken)
#define HEDGE_DECISION_MIN_SZ RETRYD_OPTS_MIN(retryd_hedge_decision, delay_ns)

static int hedge_facts_validate(const retryd_hedge_facts *f)
{
    if ((unsigned)f->idempotency >= RETRYD_IDEMPOTENCY_COUNT ||
        (unsigned)f->replayability >= RETRYD_REPLAYABILITY_COUNT ||
        (unsigned)f->picture >= RETRYD_HEDGE_PICTURE_COUNT || f->max_hedges < 1)
        return RETRYD_EINVAL;
    if (f->delay_ns < 0 || f->elapsed_ns < 0 || f->remaining_ns < 0 ||
        f->min_attempt_ns < 0 || f->pushback_ns < 0)
        return RETRYD_EINVAL;
    return 0;
}

static int say(retryd_hedge_decision *ret, retryd_hedge_verdict v,
               retryd_hedge_rule rule, int64_t delay_ns)
{
    *ret = (retryd_hedge_decision){.sz = sizeof(retryd_hedge_decision),
                                   .verdict = v,
                                   .rule = rule,
                                   .delay_ns = delay_ns};
    return 0;
}

/* The rule that refuses a hedge whose tokens could not be taken: the
 * budget's code names the bucket, and the retry bucket's its share. */
static retryd_hedge_rule refused_by(int code)
{
    switch (code) {
    case RETRYD_EHEDGE:
        return RETRYD_HEDGE_RULE_HEDGE_BUDGET;
    case RETRYD_ESHARE:
        return RETRYD_HEDGE_RULE_PROCESS_OVER_SHARE;
    case RETRYD_EREQSHARE:
        return RETRYD_HEDGE_RULE_REQUEST_OVER_SHARE;
    default:
        return RETRYD_HEDGE_RULE_RETRY_BUDGET;
    }
}

/* The hedge's tokens: SEND, or the rule that refused them. A budget
 * without take_for() takes one retry token (it knows of no hedge bucket). */
static retryd_hedge_rule take_tokens(const retryd_decide_env *env,
                                     uint32_t taken)
{
    const retryd_budget_iface *b = env ? env->budget : NULL;
    if (b == NULL)
        return RETRYD_HEDGE_RULE_SEND;
    if (b->sz < RETRYD_OPTS_MIN(retryd_budget_iface, take_for) ||
        b->take_for == NULL)
        return b->take(env->budget_ctx) ? RETRYD_HEDGE_RULE_SEND
                                        : RETRYD_HEDGE_RULE_RETRY_BUDGET;
    int r = b->take_for(env->budget_ctx, taken);
    return r == 0 ? RETRYD_HEDGE_RULE_SEND : refused_by(r);
}

/* The rules that hold for the whole request, whatever it asks; COUNT when
 * none does. */
static retryd_hedge_rule never(const retryd_hedge_facts *f)
{
    if (!retryd_idempotency_is_safe(f->idempotency))
        return RETRYD_HEDGE_RULE_NOT_IDEMPOTENT;
    if (f->replayability == RETRYD_ONE_SHOT)
        return RETRYD_HEDGE_RULE_BODY_NOT_REPLAYABLE;
    if (f->streamed)
        return RETRYD_HEDGE_RULE_STREAMED;
    if (f->response_delivered)
        return RETRYD_HEDGE_RULE_RESPONSE_DELIVERED;
    return RETRYD_HEDGE_RULE_COUNT;
}

static int hedge_decide(const retryd_hedge_facts *f,
                        const retryd_decide_env *env,
                        retryd_hedge_decision *ret)
{
    retryd_hedge_rule r = never(f);
    if (r != RETRYD_HEDGE_RULE_COUNT)
        return say(ret, RETRYD_HEDGE_NO, r, 0);
    if (f->hedges >= f->max_hedges)
        return say(ret, RETRYD_HEDGE_NO, RETRYD_HEDGE_RULE_MAX_HEDGES, 0);
    if (f->draining)
        return say(ret, RETRYD_HEDGE_NO, RETRYD_HEDGE_RULE_DRAINING, 0);
    if (f->picture == RETRYD_HEDGE_PICTURE_NONE)
        return say(ret, RETRYD_HEDGE_NO, RETRYD_HEDGE_RULE_NO_PICTURE, 0);
    if (f->picture == RETRYD_HEDGE_PICTURE_NO_TAIL)
        return say(ret, RETRYD_HEDGE_NO, RETRYD_HEDGE_RULE_NO_TAIL, 0);
    /* A hedge that could not have a whole minimum attempt before the
     * deadline, when it would be due, only spends budget. */
    int64_t wait =
        f->delay_ns > f->elapsed_ns ? f->delay_ns - f->elapsed_ns : 0;
    if (f->remaining_ns - wait < f->min_attempt_ns)
        return say(ret, RETRYD_HEDGE_NO, RETRYD_HEDGE_RULE_DEADLINE, 0);
    if (wait > 0)
        return say(ret, RETRYD_HEDGE_WAIT, RETRYD_HEDGE_RULE_WAIT, wait);
    /* The host's health, as for a retry: an upstream that turns requests
     * away, or asked for quiet, gets no second copy of one. */
    if (f->throttle_engaged)
        return say(ret, RETRYD_HEDGE_NO, RETRYD_HEDGE_RULE_HOST_THROTTLED, 0);
    if (f->pushback_ns > 0)
        return say(ret, RETRYD_HEDGE_NO, RETRYD_HEDGE_RULE_HOST_PUSHBACK, 0);
    r = take_tokens(env, f->taken);
    return say(
        ret, r == RETRYD_HEDGE_RULE_SEND ? RETRYD_HEDGE_SEND : RETRYD_HEDGE_NO,
        r, 0);
}

int retryd_hedge_decide(const retryd_hedge_facts *facts,
                        const retryd_decide_env *env,
                        retryd_hedge_decision *ret)
{
    retryd_hedge_facts lf;
    const retryd_hedge_facts *f;
    retryd_decide_env le;
    retryd_budget_iface li;
    if (facts == NULL || ret == NULL || ret->sz < HEDGE_DECISION_MIN_SZ ||
        ret->sz > RETRYD_OPTS_MAX)
        return RETRYD_EINVAL;
    int r = RETRYD_OPTS_VIEW(f, &lf, facts, HEDGE_FACTS_MIN_SZ);
    if (r == 0 && env != NULL) {
        r = retryd__env_copy(env, &le, &li);
        if (r == 0 && le.budget != NULL && li.take == NULL)
            r = RETRYD_EINVAL;
        env = &le;
    }
    if (r == 0)
        r = hedge_facts_validate(f);
    if (r < 0)
        return r;
    retryd_hedge_decision d;
    hedge_decide(f, env, &d);
    retryd__opts_out(ret, ret->sz, &d, sizeof(d));
    return 0;
}

/* A failure a sibling attempt may escape: another connection, another
 * moment, another server behind the same name. */
static bool sibling_may_escape(const retryd_facts *f)
{
    switch (f->evidence) {
    case RETRYD_EVIDENCE_NOT_SENT:
    case RETRYD_EVIDENCE_SENT_NO_RESPONSE:
        return true;
    case RETRYD_EVIDENCE_PARTIAL_RESPONSE:
        if (f->status >= 200 && f->status <= 299)
            return true;
        break;
    case RETRYD_EVIDENCE_RESPONSE_RECEIVED:
    default:
        break;
    }
    switch (f->status) {
    case 408:
    case 425:
    case 429:
    case 502:
    case 503:
    case 504:
        return true;
    case 500:
        return f->transient_500;
    default:
        return false;
    }
}

bool retryd_hedge_answers(const retryd_facts *facts)
{
    retryd_facts lf;
    const retryd_facts *f;
    if (facts == NULL ||
        RETRYD_OPTS_VIEW(f, &lf, facts, RETRYD_FACTS_MIN_SZ) < 0 ||
        (unsigned)f->evidence >= RETRYD_EVIDENCE_COUNT ||
        (unsigned)f->failure >= RETRYD_FAILURE_COUNT)
        return true;
    if (retryd_failure_is_permanent(f->failure))
        return true; /* the caller aborted, a certificate: nobody escapes */
    return !sibling_may_escape(f);
}

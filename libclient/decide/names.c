/* SPDX-License-Identifier: MIT */
/*
 * Stable names of the decision's enumerations. They appear in logs, in the
 * CLI's output and in its options, so they never change once published.
 */
#include <string.h>

#include "retryd/client.h"
#include "retryd/decision.h"

static const char *const evidence_names[RETRYD_EVIDENCE_COUNT] = {
    "not_sent", "sent_no_response", "response_received", "partial_response"};

static const char *const idempotency_names[RETRYD_IDEMPOTENCY_COUNT] = {
    "safe", "idempotent", "non_idempotent", "idempotent_by_key"};

static const char *const failure_names[RETRYD_FAILURE_COUNT] = {
    "none",
    "dns",
    "connect",
    "tls_handshake",
    "pool_timeout",
    "refused_stream",
    "goaway",
    "timeout",
    "connection_lost",
    "io",
    "tls_certificate",
    "malformed",
    "unsupported_protocol",
    "profile_rejected",
    "too_many_redirects",
    "body_source",
    "aborted",
    "throttled"};

static const char *const verdict_names[] = {"retry", "denied", "ambiguous"};

static const char *const denial_names[RETRYD_DENIAL_COUNT] = {
    "none",
    "max_attempts",
    "budget_exhausted",
    "body_not_replayable",
    "response_already_delivered",
    "runtime_draining",
    "deadline",
    "permanent_failure",
    "status_not_retryable",
    "over_share"};

static const char *const rule_names[RETRYD_RULE_COUNT] = {
#define RETRYD__RULE_TEXT(name, order, text) text,
    RETRYD_RULE_MAP(RETRYD__RULE_TEXT)
#undef RETRYD__RULE_TEXT
};

static const unsigned char rule_orders[RETRYD_RULE_COUNT] = {
#define RETRYD__RULE_ORDER(name, order, text) order,
    RETRYD_RULE_MAP(RETRYD__RULE_ORDER)
#undef RETRYD__RULE_ORDER
};

static const char *const replayability_names[RETRYD_REPLAYABILITY_COUNT] = {
    "replayable", "reopenable", "one_shot"};

static const char *const outcome_names[] = {"response", "failure", "ambiguous",
                                            "throttled"};

static const char *const hedge_rule_names[RETRYD_HEDGE_RULE_COUNT] = {
#define RETRYD__HEDGE_RULE_TEXT(name, text) text,
    RETRYD_HEDGE_RULE_MAP(RETRYD__HEDGE_RULE_TEXT)
#undef RETRYD__HEDGE_RULE_TEXT
};

static const char *const hedge_verdict_names[RETRYD_HEDGE_VERDICT_COUNT] = {
    "send", "wait", "no"};

static const char *const hedge_picture_names[RETRYD_HEDGE_PICTURE_COUNT] = {
    "fixed", "fresh", "none", "no_tail"};

static const char *const role_names[RETRYD_ATTEMPT_ROLE_COUNT] = {
    "first", "hedge", "retry"};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Casting through unsigned makes a negative enum value out of range too. */
#define NAME_OF(table, v)                                                      \
    ((unsigned)(v) < COUNT_OF(table) ? (table)[(unsigned)(v)] : "unknown")

static int index_of(const char *const *table, size_t n, const char *name)
{
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i], name) == 0)
            return (int)i;
    return -1;
}

const char *retryd_evidence_name(retryd_evidence e)
{
    return NAME_OF(evidence_names, e);
}

const char *retryd_idempotency_name(retryd_idempotency i)
{
    return NAME_OF(idempotency_names, i);
}

const char *retryd_failure_name(retryd_failure f)
{
    return NAME_OF(failure_names, f);
}

const char *retryd_verdict_name(retryd_verdict v)
{
    return NAME_OF(verdict_names, v);
}

const char *retryd_denial_name(retryd_denial d)
{
    return NAME_OF(denial_names, d);
}

const char *retryd_rule_name(retryd_rule r)
{
    return NAME_OF(rule_names, r);
}

int retryd_rule_order(retryd_rule r)
{
    return (unsigned)r < RETRYD_RULE_COUNT ? rule_orders[r] : 0;
}

const char *retryd_replayability_name(retryd_replayability r)
{
    return NAME_OF(replayability_names, r);
}

const char *retryd_outcome_name(retryd_outcome o)
{
    return NAME_OF(outcome_names, o);
}

const char *retryd_hedge_rule_name(retryd_hedge_rule r)
{
    return NAME_OF(hedge_rule_names, r);
}

const char *retryd_hedge_verdict_name(retryd_hedge_verdict v)
{
    return NAME_OF(hedge_verdict_names, v);
}

const char *retryd_hedge_picture_name(retryd_hedge_picture p)
{
    return NAME_OF(hedge_picture_names, p);
}

const char *retryd_attempt_role_name(retryd_attempt_role r)
{
    return NAME_OF(role_names, r);
}

#define FROM_NAME(table, type, name, ret)                                      \
    do {                                                                       \
        int i_ = index_of((table), COUNT_OF(table), (name));                   \
        if (i_ < 0)                                                            \
            return RETRYD_EINVAL;                                              \
        *(ret) = (type)i_;                                                     \
        return 0;                                                              \
    } while (0)

int retryd_evidence_from_name(const char *name, retryd_evidence *ret)
{
    FROM_NAME(evidence_names, retryd_evidence, name, ret);
}

int retryd_idempotency_from_name(const char *name, retryd_idempotency *ret)
{
    FROM_NAME(idempotency_names, retryd_idempotency, name, ret);
}

int retryd_failure_from_name(const char *name, retryd_failure *ret)
{
    FROM_NAME(failure_names, retryd_failure, name, ret);
}

int retryd_replayability_from_name(const char *name, retryd_replayability *ret)
{
    FROM_NAME(replayability_names, retryd_replayability, name, ret);
}

/* SPDX-License-Identifier: MIT */
/*
 * One test per rule of the decision order and per row of the status table
 * (docs/decision.md). Each test changes one fact from a baseline that would
 * otherwise retry, so that it fails if that rule or row were wrong.
 */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "base/macros.h"
#include "retryd/decision.h"

#define MS 1000000LL
#define S 1000000000LL

typedef struct test_budget {
    int tokens;
    int peeks;
    int takes;      /* successful takes */
    int take_calls; /* every call, won or lost */
    bool lose_race; /* peek says yes, take says no */
} test_budget;

static bool tb_peek(void *ctx)
{
    test_budget *b = ctx;
    b->peeks++;
    return b->tokens > 0;
}

static bool tb_take(void *ctx)
{
    test_budget *b = ctx;
    b->take_calls++;
    if (b->lose_race || b->tokens <= 0)
        return false;
    b->tokens--;
    b->takes++;
    return true;
}

static const retryd_budget_iface tb_iface = {sizeof(retryd_budget_iface),
                                             tb_peek, tb_take, NULL};

/* Always the middle of the range, so waits are predictable. */
static uint64_t half_random(void *ctx)
{
    (void)ctx;
    return UINT64_C(1) << 63;
}

static const retryd_backoff_policy policy = {
    .sz = sizeof(retryd_backoff_policy),
    .jitter = RETRYD_JITTER_FULL,
    .base_ns = 100 * MS,
    .max_ns = 2 * S,
    .max_retry_after_ns = 30 * S,
};

static test_budget budget;

static retryd_facts baseline(void)
{
    return (retryd_facts){
        .sz = sizeof(retryd_facts),
        .attempt = 1,
        .max_attempts = 3,
        .evidence = RETRYD_EVIDENCE_RESPONSE_RECEIVED,
        .replayability = RETRYD_REPLAYABLE,
        .idempotency = RETRYD_IDEMPOTENCY_SAFE,
        .failure = RETRYD_FAILURE_NONE,
        .status = 503,
        .retry_after_ns = -1,
        .remaining_ns = 10 * S,
        .min_attempt_ns = 100 * MS,
    };
}

static retryd_decision decide(const retryd_facts *f)
{
    retryd_decide_env env = {
        .sz = sizeof(env),
        .backoff = &policy,
        .random = half_random,
        .budget = &tb_iface,
        .budget_ctx = &budget,
    };
    retryd_decision d = {.sz = sizeof(d)};
    cr_assert_eq(retryd_decide(f, &env, &d), 0);
    return d;
}

static void setup(void)
{
    budget = (test_budget){.tokens = 5};
}

TestSuite(decision, .init = setup);

static void expect(retryd_decision d, retryd_verdict v, retryd_denial reason,
                   retryd_rule rule)
{
    cr_expect_eq(d.verdict, v, "verdict %s, expected %s",
                 retryd_verdict_name(d.verdict), retryd_verdict_name(v));
    cr_expect_eq(d.reason, reason, "reason %s, expected %s",
                 retryd_denial_name(d.reason), retryd_denial_name(reason));
    cr_expect_eq(d.rule, rule, "rule %s, expected %s", retryd_rule_name(d.rule),
                 retryd_rule_name(rule));
    /* A token moves exactly when the answer is a retry. */
    cr_expect_eq(budget.takes, v == RETRYD_VERDICT_RETRY ? 1 : 0);
}

Test(decision, baseline_retries_and_takes_one_token)
{
    retryd_facts f = baseline();
    retryd_decision d = decide(&f);
    expect(d, RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
           RETRYD_RULE_STATUS_GATEWAY_RETRY);
    cr_expect_eq(budget.tokens, 4);
    /* Full jitter, first retry, random at half: half of the base. */
    cr_expect_eq(d.delay_ns, 50 * MS);
}

/* --- the decision order, rules 1 to 8 ------------------------------------ */

Test(decision, attempts_exhausted_is_max_attempts)
{
    retryd_facts f = baseline();
    f.attempt = 3;
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_MAX_ATTEMPTS,
           RETRYD_RULE_MAX_ATTEMPTS);
    cr_expect_eq(budget.peeks, 0, "rule 1 decides before the budget is read");
}

Test(decision, empty_budget_is_budget_exhausted_without_a_take)
{
    retryd_facts f = baseline();
    budget.tokens = 0;
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_BUDGET_EXHAUSTED,
           RETRYD_RULE_BUDGET_EMPTY);
    cr_expect_eq(budget.take_calls, 0);
}

Test(decision, one_shot_body_is_not_replayable)
{
    retryd_facts f = baseline();
    f.replayability = RETRYD_ONE_SHOT;
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_BODY_NOT_REPLAYABLE,
           RETRYD_RULE_BODY_NOT_REPLAYABLE);
}

Test(decision, reopenable_body_can_be_sent_again)
{
    retryd_facts f = baseline();
    f.replayability = RETRYD_REOPENABLE;
    expect(decide(&f), RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
           RETRYD_RULE_STATUS_GATEWAY_RETRY);
}

Test(decision, delivered_byte_is_response_already_delivered)
{
    retryd_facts f = baseline();
    f.response_delivered = true;
    expect(decide(&f), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_RESPONSE_ALREADY_DELIVERED,
           RETRYD_RULE_RESPONSE_DELIVERED);
}

Test(decision, draining_is_runtime_draining)
{
    retryd_facts f = baseline();
    f.draining = true;
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_RUNTIME_DRAINING,
           RETRYD_RULE_DRAINING);
}

Test(decision, remaining_below_minimum_attempt_is_deadline)
{
    retryd_facts f = baseline();
    f.remaining_ns = f.min_attempt_ns - 1;
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_DEADLINE,
           RETRYD_RULE_DEADLINE);
}

Test(decision, remaining_equal_to_minimum_attempt_passes_rule_6)
{
    retryd_facts f = baseline();
    f.remaining_ns = f.min_attempt_ns;
    f.retry_after_ns = 0; /* no wait, so the attempt exactly fits */
    expect(decide(&f), RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
           RETRYD_RULE_STATUS_GATEWAY_RETRY);
}

/* The categories docs/decision.md names permanent. */
static const retryd_failure permanent[] = {RETRYD_FAILURE_TLS_CERTIFICATE,
                                           RETRYD_FAILURE_MALFORMED,
                                           RETRYD_FAILURE_UNSUPPORTED,
                                           RETRYD_FAILURE_PROFILE_REJECTED,
                                           RETRYD_FAILURE_TOO_MANY_REDIRECTS,
                                           RETRYD_FAILURE_BODY_SOURCE,
                                           RETRYD_FAILURE_ABORTED,
                                           RETRYD_FAILURE_THROTTLED};
#define N_PERMANENT (sizeof(permanent) / sizeof(permanent[0]))

Test(decision, every_permanent_category_is_permanent_failure)
{
    for (size_t i = 0; i < N_PERMANENT; i++) {
        setup();
        retryd_facts f = baseline();
        f.evidence = RETRYD_EVIDENCE_NOT_SENT;
        f.status = 0;
        f.failure = permanent[i];
        retryd_decision d = decide(&f);
        expect(d, RETRYD_VERDICT_DENIED, RETRYD_DENIAL_PERMANENT_FAILURE,
               RETRYD_RULE_PERMANENT_FAILURE);
        cr_expect_eq(d.permanent, permanent[i], "category %s",
                     retryd_failure_name(permanent[i]));
    }
}

Test(decision, permanent_categories_are_the_named_ones)
{
    int n = 0;
    for (int c = 0; c < RETRYD_FAILURE_COUNT; c++)
        n += retryd_failure_is_permanent((retryd_failure)c);
    cr_expect_eq(n, (int)N_PERMANENT);
    for (size_t i = 0; i < N_PERMANENT; i++)
        cr_expect(retryd_failure_is_permanent(permanent[i]), "%s",
                  retryd_failure_name(permanent[i]));
}

Test(decision, too_many_redirects_with_a_response_is_permanent)
{
    retryd_facts f = baseline();
    f.status = 302;
    f.failure = RETRYD_FAILURE_TOO_MANY_REDIRECTS;
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_PERMANENT_FAILURE,
           RETRYD_RULE_PERMANENT_FAILURE);
}

Test(decision, sent_no_response_on_non_idempotent_is_ambiguous)
{
    retryd_facts f = baseline();
    f.evidence = RETRYD_EVIDENCE_SENT_NO_RESPONSE;
    f.status = 0;
    f.failure = RETRYD_FAILURE_TIMEOUT;
    f.idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    expect(decide(&f), RETRYD_VERDICT_AMBIGUOUS, RETRYD_DENIAL_NONE,
           RETRYD_RULE_SENT_NO_RESPONSE_UNSAFE);
}

Test(decision, sent_no_response_on_idempotent_retries)
{
    const retryd_idempotency safe[] = {RETRYD_IDEMPOTENCY_SAFE,
                                       RETRYD_IDEMPOTENCY_IDEMPOTENT,
                                       RETRYD_IDEMPOTENCY_BY_KEY};
    for (size_t i = 0; i < 3; i++) {
        setup();
        retryd_facts f = baseline();
        f.evidence = RETRYD_EVIDENCE_SENT_NO_RESPONSE;
        f.status = 0;
        f.failure = RETRYD_FAILURE_CONNECTION_LOST;
        f.idempotency = safe[i];
        expect(decide(&f), RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
               RETRYD_RULE_SENT_NO_RESPONSE_IDEMPOTENT);
    }
}

Test(decision, not_sent_retries_whatever_the_idempotency)
{
    for (int i = 0; i < RETRYD_IDEMPOTENCY_COUNT; i++) {
        setup();
        retryd_facts f = baseline();
        f.evidence = RETRYD_EVIDENCE_NOT_SENT;
        f.status = 0;
        f.failure = RETRYD_FAILURE_CONNECT;
        f.idempotency = (retryd_idempotency)i;
        expect(decide(&f), RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
               RETRYD_RULE_NOT_SENT);
    }
}

/* A later rule never re-enables what an earlier one forbade, and an
 * unknown execution is never reported as a plain failure. */
Test(decision, earlier_denial_of_unknown_execution_stays_ambiguous)
{
    retryd_facts f = baseline();
    f.evidence = RETRYD_EVIDENCE_SENT_NO_RESPONSE;
    f.status = 0;
    f.failure = RETRYD_FAILURE_TIMEOUT;
    f.idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    f.attempt = f.max_attempts;
    expect(decide(&f), RETRYD_VERDICT_AMBIGUOUS, RETRYD_DENIAL_MAX_ATTEMPTS,
           RETRYD_RULE_MAX_ATTEMPTS);
    f.attempt = 1;
    f.draining = true;
    expect(decide(&f), RETRYD_VERDICT_AMBIGUOUS, RETRYD_DENIAL_RUNTIME_DRAINING,
           RETRYD_RULE_DRAINING);
}

Test(decision, earlier_rule_wins_over_later_ones)
{
    retryd_facts f = baseline();
    f.replayability = RETRYD_ONE_SHOT; /* rule 3 */
    f.draining = true;                 /* rule 5 */
    f.remaining_ns = 0;                /* rule 6 */
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_BODY_NOT_REPLAYABLE,
           RETRYD_RULE_BODY_NOT_REPLAYABLE);
    budget.tokens = 0; /* rule 2 now also holds, and comes first */
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_BUDGET_EXHAUSTED,
           RETRYD_RULE_BUDGET_EMPTY);
}

/* --- the status table ---------------------------------------------------- */

static retryd_decision status_decision(int status, retryd_idempotency idem)
{
    retryd_facts f = baseline();
    f.status = status;
    f.idempotency = idem;
    return decide(&f);
}

Test(decision, status_408_retries_even_non_idempotent)
{
    expect(status_decision(408, RETRYD_IDEMPOTENCY_NON_IDEMPOTENT),
           RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE, RETRYD_RULE_STATUS_408);
}

Test(decision, status_425_retries_once_on_first_attempt_only)
{
    expect(status_decision(425, RETRYD_IDEMPOTENCY_NON_IDEMPOTENT),
           RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
           RETRYD_RULE_STATUS_425_FIRST);
    setup();
    retryd_facts f = baseline();
    f.status = 425;
    f.attempt = 2;
    expect(decide(&f), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_STATUS_NOT_RETRYABLE, RETRYD_RULE_STATUS_425_AGAIN);
}

Test(decision, status_429_waits_for_retry_after)
{
    retryd_facts f = baseline();
    f.status = 429;
    f.idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    f.retry_after_ns = 3 * S;
    retryd_decision d = decide(&f);
    expect(d, RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE, RETRYD_RULE_STATUS_429);
    cr_expect_eq(d.delay_ns, 3 * S);
    cr_expect(d.flags & RETRYD_RETRY_HONOURS_RETRY_AFTER);
}

Test(decision, status_429_whose_retry_after_overruns_deadline_is_deadline)
{
    retryd_facts f = baseline();
    f.status = 429;
    f.retry_after_ns = 9950 * MS; /* + 100 ms minimum attempt > 10 s left */
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_DEADLINE,
           RETRYD_RULE_WAIT_EXCEEDS_DEADLINE);
    f.retry_after_ns = 9900 * MS; /* exactly fits */
    expect(decide(&f), RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
           RETRYD_RULE_STATUS_429);
}

/* A Retry-After is a floor: one above the profile's maximum is a denial,
 * never a shorter wait; one at the maximum is waited for whole. */
Test(decision, retry_after_above_the_profile_maximum_is_denied_not_shortened)
{
    retryd_facts f = baseline();
    f.status = 429;
    f.remaining_ns = 100 * S;
    f.retry_after_ns = 45 * S; /* the policy's maximum is 30 s */
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_DEADLINE,
           RETRYD_RULE_RETRY_AFTER_EXCEEDS_MAX);
    cr_expect_eq(budget.take_calls, 0, "no token for a denial");
    f.retry_after_ns = policy.max_retry_after_ns;
    retryd_decision d = decide(&f);
    cr_expect_eq(d.verdict, RETRYD_VERDICT_RETRY);
    cr_expect_eq(d.delay_ns, policy.max_retry_after_ns);
}

/* RFC 9110 allows Retry-After on 503; the same floor holds for a gateway
 * retry of a safe operation, and an absurd value cannot overflow. */
Test(decision, gateway_retry_after_is_a_floor_too)
{
    retryd_facts f = baseline(); /* 503, safe */
    f.remaining_ns = 100 * S;
    f.retry_after_ns = 20 * S;
    retryd_decision d = decide(&f);
    expect(d, RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
           RETRYD_RULE_STATUS_GATEWAY_RETRY);
    cr_expect_eq(d.delay_ns, 20 * S);
    budget = (test_budget){.tokens = 5};
    f.retry_after_ns = INT64_MAX;
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_DEADLINE,
           RETRYD_RULE_RETRY_AFTER_EXCEEDS_MAX);
}

Test(decision, status_401_refreshes_once_for_safe_operations)
{
    retryd_decision d = status_decision(401, RETRYD_IDEMPOTENCY_IDEMPOTENT);
    expect(d, RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
           RETRYD_RULE_STATUS_401_REFRESH);
    cr_expect(d.flags & RETRYD_RETRY_REFRESH_CREDENTIALS);

    setup();
    retryd_facts f = baseline();
    f.status = 401;
    f.refresh_used = true;
    expect(decide(&f), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_STATUS_NOT_RETRYABLE, RETRYD_RULE_STATUS_401_DENIED);
}

Test(decision, status_401_is_not_replayed_for_non_idempotent)
{
    expect(status_decision(401, RETRYD_IDEMPOTENCY_NON_IDEMPOTENT),
           RETRYD_VERDICT_DENIED, RETRYD_DENIAL_STATUS_NOT_RETRYABLE,
           RETRYD_RULE_STATUS_401_DENIED);
}

Test(decision, status_500_retries_only_if_transient_and_idempotent)
{
    retryd_facts f = baseline();
    f.status = 500;
    expect(decide(&f), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_STATUS_NOT_RETRYABLE, RETRYD_RULE_STATUS_500_DENIED);
    f.transient_500 = true;
    expect(decide(&f), RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
           RETRYD_RULE_STATUS_500_TRANSIENT);
    setup();
    f.idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    expect(decide(&f), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_STATUS_NOT_RETRYABLE, RETRYD_RULE_STATUS_500_DENIED);
}

Test(decision, gateway_statuses_retry_idempotent_and_are_ambiguous_otherwise)
{
    const int statuses[] = {502, 503, 504};
    for (size_t i = 0; i < 3; i++) {
        setup();
        expect(status_decision(statuses[i], RETRYD_IDEMPOTENCY_BY_KEY),
               RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
               RETRYD_RULE_STATUS_GATEWAY_RETRY);
        setup();
        expect(status_decision(statuses[i], RETRYD_IDEMPOTENCY_NON_IDEMPOTENT),
               RETRYD_VERDICT_AMBIGUOUS, RETRYD_DENIAL_NONE,
               RETRYD_RULE_STATUS_GATEWAY_AMBIGUOUS);
    }
}

Test(decision, other_4xx_are_denied)
{
    const int statuses[] = {400, 403, 404, 405, 409, 410, 413, 422, 451, 499};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        setup();
        expect(status_decision(statuses[i], RETRYD_IDEMPOTENCY_SAFE),
               RETRYD_VERDICT_DENIED, RETRYD_DENIAL_STATUS_NOT_RETRYABLE,
               RETRYD_RULE_STATUS_4XX);
    }
}

Test(decision, other_5xx_are_denied_without_ambiguity)
{
    const int statuses[] = {501, 505, 507, 511, 599};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        setup();
        expect(status_decision(statuses[i], RETRYD_IDEMPOTENCY_NON_IDEMPOTENT),
               RETRYD_VERDICT_DENIED, RETRYD_DENIAL_STATUS_NOT_RETRYABLE,
               RETRYD_RULE_STATUS_5XX_OTHER);
    }
}

Test(decision, success_and_redirect_are_final)
{
    const int statuses[] = {200, 201, 204, 301, 304, 308, 600};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        setup();
        expect(status_decision(statuses[i], RETRYD_IDEMPOTENCY_SAFE),
               RETRYD_VERDICT_DENIED, RETRYD_DENIAL_STATUS_NOT_RETRYABLE,
               RETRYD_RULE_STATUS_FINAL);
    }
}

/* The predicate callers (the executor among them) use to skip the engine
 * agrees with the engine's own status table, status by status. */
Test(decision, status_is_final_matches_the_status_table)
{
    for (int s = 200; s <= 999; s++) {
        setup();
        retryd_decision d = status_decision(s, RETRYD_IDEMPOTENCY_SAFE);
        cr_expect_eq(retryd_status_is_final(s),
                     d.rule == RETRYD_RULE_STATUS_FINAL, "status %d: rule %s",
                     s, retryd_rule_name(d.rule));
    }
    cr_expect(retryd_status_is_final(200) && retryd_status_is_final(399) &&
              retryd_status_is_final(600));
    cr_expect(!retryd_status_is_final(400) && !retryd_status_is_final(503) &&
              !retryd_status_is_final(599));
}

Test(decision, partial_success_is_reread_when_safe)
{
    retryd_facts f = baseline();
    f.evidence = RETRYD_EVIDENCE_PARTIAL_RESPONSE;
    f.failure = RETRYD_FAILURE_CONNECTION_LOST;
    f.status = 200;
    expect(decide(&f), RETRYD_VERDICT_RETRY, RETRYD_DENIAL_NONE,
           RETRYD_RULE_PARTIAL_REREAD);
}

Test(decision, partial_success_of_non_idempotent_is_ambiguous)
{
    retryd_facts f = baseline();
    f.evidence = RETRYD_EVIDENCE_PARTIAL_RESPONSE;
    f.failure = RETRYD_FAILURE_CONNECTION_LOST;
    f.status = 201;
    f.idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    expect(decide(&f), RETRYD_VERDICT_AMBIGUOUS, RETRYD_DENIAL_NONE,
           RETRYD_RULE_PARTIAL_EXECUTED);
}

Test(decision, partial_error_status_follows_the_status_table)
{
    retryd_facts f = baseline();
    f.evidence = RETRYD_EVIDENCE_PARTIAL_RESPONSE;
    f.failure = RETRYD_FAILURE_CONNECTION_LOST;
    f.status = 404;
    expect(decide(&f), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_STATUS_NOT_RETRYABLE, RETRYD_RULE_STATUS_4XX);
}

/* --- the token, taken last ------------------------------------------------ */

Test(decision, losing_the_last_token_to_another_process_is_budget_exhausted)
{
    retryd_facts f = baseline();
    budget.lose_race = true;
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_BUDGET_EXHAUSTED,
           RETRYD_RULE_BUDGET_TAKE_FAILED);
    cr_expect_eq(budget.take_calls, 1);
    cr_expect_eq(budget.tokens, 5);
}

/* A budget that keeps fair shares: take_for() says why it refused, and
 * hears how many tokens the request took before. */
typedef struct share_budget {
    int answer;         /* take_for's return */
    uint32_t taken;     /* what take_for heard */
    int take_for_calls; /* take() must never be called beside it */
    int take_calls;
} share_budget;

static bool sb_peek(void *ctx)
{
    (void)ctx;
    return true;
}

static bool sb_take(void *ctx)
{
    ((share_budget *)ctx)->take_calls++;
    return true;
}

static int sb_take_for(void *ctx, uint32_t taken)
{
    share_budget *b = ctx;
    b->take_for_calls++;
    b->taken = taken;
    return b->answer;
}

static const retryd_budget_iface sb_iface = {sizeof(retryd_budget_iface),
                                             sb_peek, sb_take, sb_take_for};

static retryd_decision decide_shared(const retryd_facts *f, share_budget *b)
{
    retryd_decide_env env = {.sz = sizeof(env),
                             .random = half_random,
                             .budget = &sb_iface,
                             .budget_ctx = b};
    retryd_decision d = {.sz = sizeof(d)};
    cr_assert_eq(retryd_decide(f, &env, &d), 0);
    return d;
}

Test(decision, shares_refuse_a_token_with_their_own_rules)
{
    retryd_facts f = baseline();
    f.attempt = 2;
    share_budget b = {.answer = RETRYD_ESHARE};
    expect(decide_shared(&f, &b), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_OVER_SHARE, RETRYD_RULE_PROCESS_OVER_SHARE);
    cr_expect_eq(b.taken, 1, "the request's one retry so far");
    b.answer = RETRYD_EREQSHARE;
    expect(decide_shared(&f, &b), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_OVER_SHARE, RETRYD_RULE_REQUEST_OVER_SHARE);
    b.answer = RETRYD_EBUDGET;
    expect(decide_shared(&f, &b), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_BUDGET_EXHAUSTED, RETRYD_RULE_BUDGET_TAKE_FAILED);
    f.attempt = 1;
    b.answer = 0;
    cr_expect_eq(decide_shared(&f, &b).verdict, RETRYD_VERDICT_RETRY);
    cr_expect_eq(b.taken, 0, "a first attempt took nothing before");
    cr_expect_eq(b.take_for_calls, 4);
    cr_expect_eq(b.take_calls, 0, "take_for() replaces take()");
    cr_expect_str_eq(retryd_denial_name(RETRYD_DENIAL_OVER_SHARE),
                     "over_share");
}

Test(decision, denial_after_the_budget_check_takes_no_token)
{
    retryd_facts f = baseline();
    f.status = 404;
    expect(decide(&f), RETRYD_VERDICT_DENIED,
           RETRYD_DENIAL_STATUS_NOT_RETRYABLE, RETRYD_RULE_STATUS_4XX);
    cr_expect_eq(budget.take_calls, 0);
    cr_expect_eq(budget.tokens, 5);
}

Test(decision, wait_that_overruns_the_deadline_takes_no_token)
{
    retryd_facts f = baseline();
    f.retry_after_ns = 20 * S;
    expect(decide(&f), RETRYD_VERDICT_DENIED, RETRYD_DENIAL_DEADLINE,
           RETRYD_RULE_WAIT_EXCEEDS_DEADLINE);
    cr_expect_eq(budget.take_calls, 0);
}

Test(decision, no_budget_interface_means_unlimited)
{
    retryd_facts f = baseline();
    retryd_decision d = {.sz = sizeof(d)};
    cr_assert_eq(retryd_decide(&f, NULL, &d), 0);
    cr_expect_eq(d.verdict, RETRYD_VERDICT_RETRY);
    /* No policy: docs/decision.md's default base, 100 ms. */
    cr_expect(d.delay_ns >= 0 && d.delay_ns <= 100 * MS, "%lld",
              (long long)d.delay_ns);
}

static uint64_t top_random(void *ctx)
{
    (void)ctx;
    return UINT64_MAX;
}

/* Without a backoff policy the engine uses the defaults docs/decision.md
 * states (base 100 ms, largest Retry-After 60 s), checked as literals. */
Test(decision, no_policy_uses_the_documented_defaults)
{
    retryd_decide_env env = {.sz = sizeof(env), .random = top_random};
    retryd_facts f = baseline();
    retryd_decision d = {.sz = sizeof(d)};
    f.remaining_ns = 300 * S;
    cr_assert_eq(retryd_decide(&f, &env, &d), 0);
    cr_expect_eq(d.verdict, RETRYD_VERDICT_RETRY);
    cr_expect_eq(d.delay_ns, 100 * MS, "the first retry's window is the base");
    f.retry_after_ns = 59 * S;
    cr_assert_eq(retryd_decide(&f, &env, &d), 0);
    cr_expect_eq(d.delay_ns, 59 * S);
    f.retry_after_ns = 60 * S;
    cr_assert_eq(retryd_decide(&f, &env, &d), 0);
    cr_expect_eq(d.delay_ns, 60 * S, "the default maximum, waited whole");
    f.retry_after_ns = 60 * S + 1;
    cr_assert_eq(retryd_decide(&f, &env, &d), 0);
    cr_expect_eq(d.verdict, RETRYD_VERDICT_DENIED);
    cr_expect_eq(d.rule, RETRYD_RULE_RETRY_AFTER_EXCEEDS_MAX,
                 "past the default maximum: denied, not shortened");
}

/* --- inconsistent facts are refused, not guessed ------------------------- */

Test(decision, inconsistent_facts_are_einval)
{
    retryd_decision d = {.sz = sizeof(d)};
    retryd_facts f;

    cr_expect_eq(retryd_decide(NULL, NULL, &d), RETRYD_EINVAL);
    f = baseline();
    cr_expect_eq(retryd_decide(&f, NULL, NULL), RETRYD_EINVAL);
    f.attempt = 0;
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = baseline();
    f.attempt = 4;
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = baseline();
    f.status = 0;
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = baseline();
    f.status = 103; /* an interim status is never final */
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = baseline();
    f.evidence = RETRYD_EVIDENCE_NOT_SENT; /* with a status */
    f.failure = RETRYD_FAILURE_CONNECT;
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    f.status = 0;
    f.failure = RETRYD_FAILURE_NONE; /* failed without a reason */
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = baseline();
    f.evidence = (retryd_evidence)7;
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = baseline();
    f.remaining_ns = -1;
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = baseline();
    f.retry_after_ns = -2;
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
}

Test(decision, rule_names_are_stable)
{
    cr_expect_str_eq(retryd_rule_name(RETRYD_RULE_MAX_ATTEMPTS),
                     "max_attempts");
    cr_expect_str_eq(retryd_rule_name(RETRYD_RULE_SENT_NO_RESPONSE_UNSAFE),
                     "sent_no_response_not_idempotent");
    cr_expect_str_eq(retryd_rule_name(RETRYD_RULE_COUNT), "unknown");
    cr_expect_str_eq(
        retryd_denial_name(RETRYD_DENIAL_RESPONSE_ALREADY_DELIVERED),
        "response_already_delivered");
    cr_expect_eq(retryd_rule_order(RETRYD_RULE_PERMANENT_FAILURE), 7);
    cr_expect_eq(retryd_rule_order(RETRYD_RULE_COUNT), 0);
    for (int r = 0; r < RETRYD_RULE_COUNT; r++) {
        cr_expect(retryd_rule_order((retryd_rule)r) >= 1);
        cr_expect(retryd_rule_order((retryd_rule)r) <= 9);
        for (int q = 0; q < r; q++)
            cr_expect_str_neq(retryd_rule_name((retryd_rule)r),
                              retryd_rule_name((retryd_rule)q));
    }
}

/* --- growable structs (docs/abi.md) -------------------------------------- */

Test(decision, structs_without_their_size_are_refused)
{
    retryd_facts f = baseline();
    retryd_decision d = {.sz = sizeof(d)};
    f.sz = 0;
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = baseline();
    d.sz = 0;
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
    d.sz = sizeof(d);
    retryd_decide_env env = {.budget = &tb_iface}; /* sz forgotten */
    cr_expect_eq(retryd_decide(&f, &env, &d), RETRYD_EINVAL);
    const retryd_budget_iface no_sz = {.peek = tb_peek, .take = tb_take};
    env = (retryd_decide_env){.sz = sizeof(env), .budget = &no_sz};
    cr_expect_eq(retryd_decide(&f, &env, &d), RETRYD_EINVAL);
    f.sz = RETRYD_OPTS_MAX + 1; /* implausible */
    cr_expect_eq(retryd_decide(&f, NULL, &d), RETRYD_EINVAL);
}

/* A caller built against a newer header, whose structs have a field this
 * library does not know: accepted when it is unset, refused when set. */
typedef struct newer_facts {
    retryd_facts f;
    uint64_t unknown_field;
} newer_facts;

Test(decision, an_unknown_field_is_refused_only_when_set)
{
    newer_facts n = {.f = baseline()};
    n.f.sz = sizeof(n);
    retryd_decision d = {.sz = sizeof(d)};
    cr_expect_eq(retryd_decide(&n.f, NULL, &d), 0);
    cr_expect_eq(d.verdict, RETRYD_VERDICT_RETRY);
    n.unknown_field = 1;
    d.verdict = RETRYD_VERDICT_DENIED;
    cr_expect_eq(retryd_decide(&n.f, NULL, &d), RETRYD_EOPTS);
    cr_expect_eq(d.verdict, RETRYD_VERDICT_DENIED, "untouched on failure");
}

Test(decision, a_larger_env_decides_like_this_library_s_own)
{
    struct {
        retryd_decide_env env;
        uint64_t unknown_field;
    } big = {.env = {.sz = sizeof(big),
                     .backoff = &policy,
                     .random = half_random,
                     .budget = &tb_iface,
                     .budget_ctx = &budget}};
    retryd_facts f = baseline();
    retryd_decision mine = decide(&f);
    retryd_decision theirs = {.sz = sizeof(theirs)};
    cr_assert_eq(retryd_decide(&f, &big.env, &theirs), 0);
    cr_expect_eq(theirs.verdict, mine.verdict);
    cr_expect_eq(theirs.delay_ns, mine.delay_ns, "the same policy was read");
    cr_expect_eq(budget.takes, 2, "both paths spent from the budget");
    big.unknown_field = 7;
    cr_expect_eq(retryd_decide(&f, &big.env, &theirs), RETRYD_EOPTS);
}

/* An output struct of a newer caller: this library fills what it knows,
 * zeroes the rest, and says how much it filled. */
Test(decision, a_larger_decision_gets_its_tail_zeroed_and_its_size_told)
{
    struct {
        retryd_decision d;
        unsigned char tail[16];
    } out;
    memset(&out, 0xAA, sizeof(out));
    out.d.sz = sizeof(out);
    retryd_facts f = baseline();
    cr_assert_eq(retryd_decide(&f, NULL, &out.d), 0);
    cr_expect_eq(out.d.sz, sizeof(retryd_decision));
    cr_expect_eq(out.d.verdict, RETRYD_VERDICT_RETRY);
    for (size_t i = 0; i < sizeof(out.tail); i++)
        cr_expect_eq(out.tail[i], 0, "byte %zu", i);
}

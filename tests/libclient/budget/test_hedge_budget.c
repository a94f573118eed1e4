/* SPDX-License-Identifier: MIT */
/*
 * Hedging as a service sees it on a process-local budget (docs/hedging.md):
 * retryd_upstream_hedge() pays a hedge from the hedge bucket and the retry
 * bucket together, refuses and counts by reason, and never hedges what the
 * engine forbids; the state retryd_upstream_hedging() reports.
 */
#include <criterion/criterion.h>

#include "retryd/budget_decide.h"
#include "retryd/common.h"

#define MS INT64_C(1000000)
#define S (1000 * MS)

static retryd_host *host;
static retryd_upstream *up;

static void setup(void)
{
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .flags = RETRYD_HOST_LOCAL_ONLY};
    /* A retry bucket of 3 tokens (a second of its floor), nothing
     * deposited: its takes are countable within a test's milliseconds. */
    const retryd_budget_params bp = {sizeof(bp), 0, 3, 3};
    cr_assert_eq(retryd_host_open(&ho, &host), 0);
    cr_assert_eq(retryd_upstream_open(host, "hedged", &bp, &up), 0);
}

static void teardown(void)
{
    retryd_host_close(host);
}

TestSuite(hedge_budget, .init = setup, .fini = teardown);

/* A balance of @p want tokens, read a little later: both buckets refill
 * continuously (the hedge bucket's floor is 1 a second, the retry
 * bucket's 3), so a reading may be up to a quarter token more. */
#define expect_tokens(got, want, ...)                                          \
    cr_expect((got) >= (want) && (got) < (want) + 0.25, __VA_ARGS__)

static retryd_hedge_facts due_fixed(void)
{
    return (retryd_hedge_facts){.sz = sizeof(retryd_hedge_facts),
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                                .replayability = RETRYD_REPLAYABLE,
                                .max_hedges = 1,
                                .picture = RETRYD_HEDGE_PICTURE_FIXED,
                                .delay_ns = 10 * MS,
                                .elapsed_ns = 10 * MS,
                                .remaining_ns = 10 * S,
                                .min_attempt_ns = MS};
}

static retryd_hedge_decision ask(retryd_hedge_facts f)
{
    retryd_hedge_decision d = {.sz = sizeof(d)};
    cr_assert_eq(retryd_upstream_hedge(up, &f, &d), 0);
    return d;
}

static retryd_hedging state(void)
{
    retryd_hedging h = {.sz = sizeof(h)};
    cr_assert_eq(retryd_upstream_hedging(up, &h), 0);
    return h;
}

Test(hedge_budget, a_hedge_pays_a_token_of_each_bucket_or_none)
{
    double retry_before, retry_after;
    cr_assert_eq(retryd_upstream_balance(up, &retry_before), 0);
    retryd_hedging h = state();
    cr_expect_eq(h.max_extra_load, 0.02, "retryd's default, local");
    expect_tokens(h.balance, 1.0, "a second of a floor of 1 a second: %f",
                  h.balance);
    retryd_hedge_decision d = ask(due_fixed());
    cr_expect_eq(d.verdict, RETRYD_HEDGE_SEND);
    cr_assert_eq(retryd_upstream_balance(up, &retry_after), 0);
    expect_tokens(retry_after, retry_before - 1,
                  "a retry token went with it: %f then %f", retry_before,
                  retry_after);
    h = state();
    cr_expect_lt(h.balance, 0.5, "and a hedge token");
    cr_expect_eq(h.sent, 1);
    /* The hedge bucket is empty now: refused, counted, and the retry
     * bucket keeps its tokens. */
    d = ask(due_fixed());
    cr_expect_eq(d.rule, RETRYD_HEDGE_RULE_HEDGE_BUDGET);
    cr_assert_eq(retryd_upstream_balance(up, &retry_before), 0);
    expect_tokens(retry_before, retry_after, "%f then %f", retry_after,
                  retry_before);
    h = state();
    cr_expect_eq(h.refused_hedge_budget, 1);
    cr_expect_eq(h.sent, 1);
}

Test(hedge_budget, a_retry_bucket_that_refuses_gives_the_hedge_token_back)
{
    /* Spend the retry bucket's three tokens. */
    for (int i = 0; i < 3; i++)
        cr_assert_eq(retryd_upstream_withdraw(up), 0);
    retryd_hedge_decision d = ask(due_fixed());
    cr_expect_eq(d.verdict, RETRYD_HEDGE_NO);
    cr_expect_eq(d.rule, RETRYD_HEDGE_RULE_RETRY_BUDGET);
    retryd_hedging h = state();
    expect_tokens(h.balance, 1.0, "the hedge token went back: %f", h.balance);
    cr_expect_eq(h.refused_retry_budget, 1);
    cr_expect_eq(h.sent, 0);
}

Test(hedge_budget, nothing_is_spent_or_counted_before_a_hedge_is_due)
{
    retryd_hedge_facts f = due_fixed();
    f.elapsed_ns = 0;
    retryd_hedge_decision d = ask(f);
    cr_expect_eq(d.verdict, RETRYD_HEDGE_WAIT);
    cr_expect_eq(d.delay_ns, 10 * MS);
    f = due_fixed();
    f.idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    d = ask(f);
    cr_expect_eq(d.rule, RETRYD_HEDGE_RULE_NOT_IDEMPOTENT);
    retryd_hedging h = state();
    expect_tokens(h.balance, 1.0, "%f", h.balance);
    cr_expect_eq(h.sent + h.refused_hedge_budget + h.refused_retry_budget +
                     h.refused_deadline + h.refused_draining,
                 0);
}

Test(hedge_budget, a_draining_process_or_a_pushback_sends_no_hedge)
{
    retryd_host_set_draining(host, true);
    cr_expect_eq(ask(due_fixed()).rule, RETRYD_HEDGE_RULE_DRAINING);
    retryd_host_set_draining(host, false);
    cr_expect_eq(state().refused_draining, 1);
    /* Another process's Retry-After for the upstream (the local slot's
     * pushback is on by default). */
    retryd_upstream_observe(up, RETRYD_EVIDENCE_RESPONSE_RECEIVED, 503, 5 * S);
    cr_expect_eq(ask(due_fixed()).rule, RETRYD_HEDGE_RULE_HOST_PUSHBACK);
    retryd_hedging h = state();
    cr_expect_eq(h.refused_pushback, 1);
    expect_tokens(h.balance, 1.0, "%f", h.balance);
}

Test(hedge_budget, an_adaptive_request_waits_for_the_first_picture)
{
    retryd_hedge_facts f = due_fixed();
    f.picture = RETRYD_HEDGE_PICTURE_FRESH; /* asks for the host's */
    cr_expect_eq(ask(f).rule, RETRYD_HEDGE_RULE_NO_PICTURE);
    retryd_hedging h = state();
    cr_expect_eq(h.picture, RETRYD_HEDGE_PICTURE_NONE);
    cr_expect_eq(h.window_ns, S);
    cr_expect_eq(h.min_delay_ns, MS);
    retryd_upstream_hedge_deposit(up);
    retryd_upstream_hedge_won(up);
    h = state();
    cr_expect_eq(h.deposits, 1);
    cr_expect_eq(h.won, 1);
}

/* SPDX-License-Identifier: MIT */
/*
 * Hedged requests against a real server whose first execution of a
 * request stalls (docs/hedging.md): a safe GET is answered by its hedge
 * well before the stall, with two executions, the loser stopped and never
 * sent again; a payment, a one-shot body and a streamed response are never
 * hedged and wait the stall out; a 503 does not win over a sibling still
 * running; a hedge the budget refuses leaves the first attempt alone. Every
 * test checks both budgets' ledgers: retries and hedges within them.
 *
 * Compiled twice (CMakeLists.txt): retryd_execute() as it is, which runs a
 * hedged request on one of the client's event loops, and through a multi
 * of the test's (multi_execute.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "retryd/retryd.h"
#include "testsrv.h"

#include "exec_fixture.h"

#define MS INT64_C(1000000)
#define S INT64_C(1000000000)

TestSuite(hedge, .init = exec_setup, .fini = exec_teardown, .timeout = 60);

/* Retries and hedges countable in the retry bucket: each first attempt
 * deposits @p per_first tokens, nothing refills, the cap is never
 * reached. */
static retryd_profile *profile_paying(const retryd_hedge_policy *hedge,
                                      double per_first)
{
    char base[64];
    static int serial;
    char name[32];
    retryd_profile *p;
    const retryd_budget_params exact = {sizeof(retryd_budget_params), per_first,
                                        0, 1e6};
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    snprintf(name, sizeof(name), "hedge-%d-%d", testsrv_port(srv), serial++);
    retryd_profile_opts o = {
        .sz = sizeof(o),
        .base_url = base,
        .upstream = name,
        .attempt_timeout_ns = 20 * S,
        .max_attempts = 3,
        .backoff = &(const retryd_backoff_policy){sizeof(retryd_backoff_policy),
                                                  RETRYD_JITTER_FULL, 1 * MS,
                                                  4 * MS, 2 * S},
        .budget = &exact,
        .hedge = hedge,
    };
    cr_assert_eq(retryd_profile_new(client, &o, &p), 0);
    return p;
}

static retryd_profile *profile_with(const retryd_hedge_policy *hedge)
{
    return profile_paying(hedge, 1);
}

static const retryd_hedge_policy after_100ms = {
    sizeof(retryd_hedge_policy), RETRYD_HEDGE_FIXED, 100 * MS, 1};

typedef struct timed {
    retryd_result *r;
    int64_t ms;
} timed;

static timed run(retryd_profile *p, const retryd_request *req)
{
    timed t;
    int64_t start = testsrv_now_ms();
    cr_assert_eq(retryd_execute(p, req, &t.r), 0);
    t.ms = testsrv_now_ms() - start;
    return t;
}

/*
 * The budgets' ledgers after @p firsts first attempts that paid
 * @p per_first tokens each: the retry bucket holds that less one per
 * retry and per hedge (so retries and hedges together stayed within it);
 * the hedge bucket, initial + deposits * max_extra_load + refilled - sent
 * - discarded, exactly.
 */
static void expect_paid(retryd_profile *p, int firsts, double per_first,
                        int retries)
{
    retryd_upstream *up = retryd_profile_budget(p);
    retryd_hedging h = {.sz = sizeof(h)};
    double balance;
    cr_assert_eq(retryd_upstream_hedging(up, &h), 0);
    cr_assert_eq(retryd_upstream_balance(up, &balance), 0);
    cr_expect_eq(balance, firsts * per_first - retries - (double)h.sent,
                 "retry bucket: %d first attempts, %d retries, %llu hedges "
                 "leave %.6f",
                 firsts, retries, (unsigned long long)h.sent, balance);
    double ledger = h.min_hedges_per_sec +
                    (double)h.deposits * h.max_extra_load + h.refilled -
                    (double)h.sent - h.discarded;
    cr_expect_leq(fabs(h.balance - ledger), 1e-6,
                  "hedge bucket %.6f against its ledger %.6f", h.balance,
                  ledger);
}

static void expect_within_budget(retryd_profile *p, int firsts, int retries)
{
    expect_paid(p, firsts, 1, retries);
}

static const retryd_attempt *at(const retryd_result *r, size_t i)
{
    return retryd_result_attempt(r, i);
}

Test(hedge, a_stalled_safe_get_is_answered_by_its_hedge_well_before_the_stall)
{
    retryd_profile *p = profile_with(&after_100ms);
    retryd_request req = {.sz = sizeof(req),
                          .path = "/stall-first?ms=10000&id=get",
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    timed t = run(p, &req);
    retryd_result *r = t.r;
    cr_expect_geq(t.ms, 100, "no hedge before its delay");
    cr_expect_lt(t.ms, 5000, "answered in %lld ms of a 10 s stall",
                 (long long)t.ms);
    cr_expect_eq(retryd_result_outcome(r), RETRYD_OUTCOME_RESPONSE);
    cr_expect_eq(retryd_result_status(r), 200);
    size_t len;
    const char *body = retryd_result_body(r, &len);
    cr_expect(len == 16 && memcmp(body, "later execution\n", 16) == 0,
              "the hedge's answer, not the stalled one's: %.*s", (int)len,
              body);
    cr_assert_eq(retryd_result_attempt_count(r), 2);
    /* The loser first, stopped, proved written; the winner last. */
    cr_expect_eq(at(r, 0)->number, 1);
    cr_expect_eq(at(r, 0)->role, RETRYD_ROLE_FIRST);
    cr_expect_eq(at(r, 0)->evidence, RETRYD_EVIDENCE_SENT_NO_RESPONSE);
    cr_expect_eq(at(r, 0)->failure, RETRYD_FAILURE_ABORTED);
    cr_expect_eq(at(r, 0)->decision->rule, RETRYD_RULE_HEDGE_SIBLING_ANSWERED);
    cr_expect_eq(at(r, 1)->number, 2);
    cr_expect_eq(at(r, 1)->role, RETRYD_ROLE_HEDGE);
    cr_expect_geq(at(r, 1)->started_ns, 100 * MS);
    cr_expect_eq(at(r, 1)->decision->rule, RETRYD_RULE_STATUS_FINAL);
    bool won;
    cr_expect_eq(retryd_result_hedges(r, &won), 1);
    cr_expect(won);
    cr_expect_eq(retryd_result_hedge(r)->rule, RETRYD_HEDGE_RULE_MAX_HEDGES);
    /* Two executions, and the loser's connection closed under it: never
     * sent again. */
    cr_expect_eq(testsrv_wait_count(srv, "get", 2, 5000), 2);
    long gone = 0;
    for (int i = 0; i < 500 && (gone = testsrv_number(srv, "GONE", "get")) < 1;
         i++)
        usleep(10000);
    cr_expect_eq(gone, 1, "the server saw the loser's client leave");
    cr_expect_eq(testsrv_count(srv, "get"), 2, "and nothing sent again");
    retryd_result_free(r);
    expect_within_budget(p, 1, 0);
    retryd_profile_free(p);
}

/* A request that must never be hedged: one execution, the whole stall. */
static void expect_not_hedged(retryd_request *req, const char *id,
                              retryd_hedge_rule why)
{
    retryd_profile *p = profile_with(&after_100ms);
    timed t = run(p, req);
    cr_expect_geq(t.ms, 1500, "%s waited the stall: %lld ms", id,
                  (long long)t.ms);
    cr_expect_eq(retryd_result_attempt_count(t.r), 1, "%s", id);
    cr_expect_eq(retryd_result_status(t.r), 200);
    cr_expect_eq(retryd_result_hedges(t.r, NULL), 0);
    const retryd_hedge_decision *d = retryd_result_hedge(t.r);
    cr_assert_not_null(d, "%s: the policy applied, the result says why not",
                       id);
    cr_expect_eq(d->verdict, RETRYD_HEDGE_NO);
    cr_expect_eq(d->rule, why, "%s: %s", id, retryd_hedge_rule_name(d->rule));
    cr_expect_eq(testsrv_wait_count(srv, id, 2, 300), 1, "%s executed once",
                 id);
    retryd_result_free(t.r);
    expect_within_budget(p, 1, 0);
    retryd_hedging h = {.sz = sizeof(h)};
    cr_assert_eq(retryd_upstream_hedging(retryd_profile_budget(p), &h), 0);
    cr_expect_eq(h.deposits, 0, "nothing earned for a request never hedged");
    retryd_profile_free(p);
}

Test(hedge, a_payment_is_never_hedged_and_waits_the_stall)
{
    retryd_body *b;
    cr_assert_eq(retryd_body_new_bytes("amount=10", 9, &b), 0);
    retryd_request req = {.sz = sizeof(req),
                          .method = "POST",
                          .path = "/stall-first?ms=1500&id=pay",
                          .body = b,
                          .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT};
    expect_not_hedged(&req, "pay", RETRYD_HEDGE_RULE_NOT_IDEMPOTENT);
    retryd_body_free(b);
}

static long read_once(void *ctx, void *buf, size_t len)
{
    const char **src = ctx;
    size_t n = strlen(*src) < len ? strlen(*src) : len;
    memcpy(buf, *src, n);
    *src += n;
    return (long)n;
}

Test(hedge, a_one_shot_body_is_never_hedged_even_when_safe)
{
    const char *data = "streamed once", *cursor = data;
    retryd_body_reader rd = {sizeof(rd), read_once, NULL, &cursor,
                             (int64_t)strlen(data)};
    retryd_body *b;
    cr_assert_eq(retryd_body_new_stream(&rd, &b), 0);
    retryd_request req = {.sz = sizeof(req),
                          .method = "PUT",
                          .path = "/stall-first?ms=1500&id=oneshot",
                          .body = b,
                          .idempotency = RETRYD_IDEMPOTENCY_IDEMPOTENT};
    expect_not_hedged(&req, "oneshot", RETRYD_HEDGE_RULE_BODY_NOT_REPLAYABLE);
    retryd_body_free(b);
}

static size_t to_nowhere(const void *data, size_t len, void *ctx)
{
    (void)data;
    *(size_t *)ctx += len;
    return len;
}

Test(hedge, a_streamed_response_is_never_hedged)
{
    size_t got = 0;
    retryd_request req = {.sz = sizeof(req),
                          .path = "/stall-first?ms=1500&id=sink",
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                          .sink = to_nowhere,
                          .sink_ctx = &got};
    expect_not_hedged(&req, "sink", RETRYD_HEDGE_RULE_STREAMED);
    cr_expect_eq(got, 12, "the body reached the sink once: %zu", got);
}

Test(hedge, a_503_does_not_win_over_a_sibling_still_running)
{
    retryd_profile *p = profile_with(&after_100ms);
    retryd_request req = {.sz = sizeof(req),
                          .path = "/stall-first?ms=600&then=503&id=gw",
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    timed t = run(p, &req);
    retryd_result *r = t.r;
    cr_expect_geq(t.ms, 600, "it waited for the stalled first attempt");
    cr_expect_eq(retryd_result_status(r), 200, "the sibling's 200 answers");
    cr_assert_eq(retryd_result_attempt_count(r), 2);
    cr_expect_eq(at(r, 0)->role, RETRYD_ROLE_HEDGE);
    cr_expect_eq(at(r, 0)->status, 503);
    cr_expect_eq(at(r, 0)->decision->rule, RETRYD_RULE_HEDGE_SIBLING_RUNNING);
    cr_expect_eq(at(r, 1)->role, RETRYD_ROLE_FIRST);
    cr_expect_eq(at(r, 1)->status, 200);
    bool won;
    cr_expect_eq(retryd_result_hedges(r, &won), 1);
    cr_expect(!won, "the hedge did not answer");
    cr_expect_eq(testsrv_count(srv, "gw"), 2);
    retryd_result_free(r);
    expect_within_budget(p, 1, 0);
    retryd_profile_free(p);
}

Test(hedge, a_request_answered_before_its_delay_sends_no_hedge)
{
    retryd_profile *p = profile_with(&after_100ms);
    retryd_request req = {.sz = sizeof(req),
                          .path = "/ok?id=quick",
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    timed t = run(p, &req);
    cr_expect_eq(retryd_result_attempt_count(t.r), 1);
    cr_expect_eq(retryd_result_hedge(t.r)->verdict, RETRYD_HEDGE_WAIT,
                 "answered while the hedge was not yet due");
    cr_expect_eq(testsrv_count(srv, "quick"), 1);
    retryd_result_free(t.r);
    expect_within_budget(p, 1, 0);
    retryd_hedging h = {.sz = sizeof(h)};
    cr_assert_eq(retryd_upstream_hedging(retryd_profile_budget(p), &h), 0);
    cr_expect_eq(h.deposits, 1, "a hedgeable request earns max_extra_load");
    retryd_profile_free(p);
}

Test(hedge, a_hedge_the_budget_refuses_leaves_the_first_attempt_alone)
{
    retryd_profile *p = profile_with(&after_100ms);
    /* The process-local hedge bucket starts with one token: the first
     * stalled request spends it. */
    retryd_request req = {.sz = sizeof(req),
                          .path = "/stall-first?ms=10000&id=spend",
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    timed t = run(p, &req);
    cr_expect_eq(retryd_result_hedges(t.r, NULL), 1);
    retryd_result_free(t.r);
    req.path = "/stall-first?ms=700&id=refused";
    t = run(p, &req);
    cr_expect_geq(t.ms, 700, "no hedge: the first attempt ran its course");
    cr_expect_eq(retryd_result_status(t.r), 200);
    cr_expect_eq(retryd_result_attempt_count(t.r), 1);
    cr_expect_eq(retryd_result_hedge(t.r)->rule,
                 RETRYD_HEDGE_RULE_HEDGE_BUDGET);
    cr_expect_eq(testsrv_count(srv, "refused"), 1);
    retryd_result_free(t.r);
    retryd_hedging h = {.sz = sizeof(h)};
    cr_assert_eq(retryd_upstream_hedging(retryd_profile_budget(p), &h), 0);
    cr_expect_eq(h.refused_hedge_budget, 1);
    cr_expect_eq(h.sent, 1);
    expect_within_budget(p, 2, 0);
    retryd_profile_free(p);
}

Test(hedge, each_hedge_follows_the_last_by_the_delay)
{
    /* Two hedges of 600 ms: the first spends the bucket's initial token,
     * the second the floor's refill meanwhile (1 a second). The first two
     * executions stall; the third answers. */
    const retryd_hedge_policy two = {sizeof(retryd_hedge_policy),
                                     RETRYD_HEDGE_FIXED, 600 * MS, 2};
    retryd_profile *p = profile_paying(&two, 2);
    retryd_request req = {.sz = sizeof(req),
                          .path = "/stall-first?ms=10000&n=2&id=two",
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    timed t = run(p, &req);
    retryd_result *r = t.r;
    cr_expect_geq(t.ms, 1200);
    cr_expect_lt(t.ms, 6000);
    cr_assert_eq(retryd_result_attempt_count(r), 3);
    cr_expect_eq(at(r, 2)->number, 3, "the second hedge answered");
    cr_expect_eq(at(r, 2)->role, RETRYD_ROLE_HEDGE);
    cr_expect_geq(at(r, 2)->started_ns, 1200 * MS);
    for (size_t i = 0; i < 2; i++)
        cr_expect_eq(at(r, i)->decision->rule,
                     RETRYD_RULE_HEDGE_SIBLING_ANSWERED, "attempt %zu", i);
    cr_expect_eq(retryd_result_hedges(r, NULL), 2);
    cr_expect_eq(testsrv_wait_count(srv, "two", 3, 5000), 3);
    retryd_result_free(r);
    expect_paid(p, 1, 2, 0);
    retryd_profile_free(p);
}

Test(hedge, a_round_that_fails_everywhere_is_decided_once_and_retried)
{
    /* The first execution stalls 400 ms and answers 503; its hedge answers
     * 503 at once, which waits for its sibling; the sibling's 503 ends the
     * round, the engine decides it once (a retry, one token), and the
     * retry's execution answers 200. Two tokens: the hedge's and the
     * retry's. */
    retryd_profile *p = profile_paying(&after_100ms, 2);
    retryd_request req = {
        .sz = sizeof(req),
        .path = "/stall-first?ms=400&first=503&then=503,200&id=round",
        .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    timed t = run(p, &req);
    retryd_result *r = t.r;
    cr_expect_eq(retryd_result_status(r), 200);
    cr_assert_eq(retryd_result_attempt_count(r), 3);
    cr_expect_eq(at(r, 0)->role, RETRYD_ROLE_HEDGE);
    cr_expect_eq(at(r, 0)->decision->rule, RETRYD_RULE_HEDGE_SIBLING_RUNNING);
    cr_expect_eq(at(r, 1)->role, RETRYD_ROLE_FIRST);
    cr_expect_eq(at(r, 1)->status, 503);
    cr_expect_eq(at(r, 1)->decision->verdict, RETRYD_VERDICT_RETRY);
    cr_expect_eq(at(r, 2)->role, RETRYD_ROLE_RETRY);
    cr_expect_eq(at(r, 2)->number, 3);
    cr_expect_eq(at(r, 2)->status, 200);
    cr_expect_eq(testsrv_count(srv, "round"), 3);
    retryd_result_free(r);
    expect_paid(p, 1, 2, 1);
    retryd_profile_free(p);
}

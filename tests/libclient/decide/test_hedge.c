/* SPDX-License-Identifier: MIT */
/*
 * The engine's side of hedging (docs/hedging.md): the order of its rules,
 * what the budget interface is asked (once, only for a hedge sent) and how
 * its refusals are named, when an attempt of a hedged request answers it,
 * and the structs' sizes (docs/abi.md).
 */
#include <string.h>

#include <criterion/criterion.h>

#include "retryd/decision.h"

#define MS INT64_C(1000000)
#define S (1000 * MS)

/* A budget that answers take_for() with a set code and counts calls. */
typedef struct scripted_budget {
    int code;
    int takes;
    uint32_t taken_seen;
} scripted_budget;

static bool sb_peek(void *ctx)
{
    return ((scripted_budget *)ctx)->code == 0;
}

static bool sb_take(void *ctx)
{
    scripted_budget *b = ctx;
    b->takes++;
    return b->code == 0;
}

static int sb_take_for(void *ctx, uint32_t taken)
{
    scripted_budget *b = ctx;
    b->takes++;
    b->taken_seen = taken;
    return b->code;
}

static const retryd_budget_iface sb_iface = {sizeof(retryd_budget_iface),
                                             sb_peek, sb_take, sb_take_for};

/* A hedge due now of a safe GET, with everything allowing it. */
static retryd_hedge_facts due(void)
{
    return (retryd_hedge_facts){.sz = sizeof(retryd_hedge_facts),
                                .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                                .replayability = RETRYD_REPLAYABLE,
                                .max_hedges = 1,
                                .picture = RETRYD_HEDGE_PICTURE_FIXED,
                                .delay_ns = 100 * MS,
                                .elapsed_ns = 100 * MS,
                                .remaining_ns = 10 * S,
                                .min_attempt_ns = 50 * MS};
}

static retryd_hedge_decision decide(retryd_hedge_facts f, scripted_budget *b)
{
    retryd_decide_env env = {
        .sz = sizeof(env), .budget = &sb_iface, .budget_ctx = b};
    retryd_hedge_decision d = {.sz = sizeof(d)};
    cr_assert_eq(retryd_hedge_decide(&f, &env, &d), 0);
    return d;
}

static void expect_no(retryd_hedge_facts f, retryd_hedge_rule rule)
{
    scripted_budget b = {0};
    retryd_hedge_decision d = decide(f, &b);
    cr_expect_eq(d.verdict, RETRYD_HEDGE_NO, "%s",
                 retryd_hedge_rule_name(rule));
    cr_expect_eq(d.rule, rule, "%s, not %s", retryd_hedge_rule_name(rule),
                 retryd_hedge_rule_name(d.rule));
    cr_expect_eq(b.takes, 0, "%s took a token", retryd_hedge_rule_name(rule));
}

Test(hedge_decide, a_due_hedge_is_sent_and_takes_its_tokens_once)
{
    scripted_budget b = {0};
    retryd_hedge_facts f = due();
    f.taken = 3;
    retryd_hedge_decision d = decide(f, &b);
    cr_expect_eq(d.verdict, RETRYD_HEDGE_SEND);
    cr_expect_eq(d.rule, RETRYD_HEDGE_RULE_SEND);
    cr_expect_eq(b.takes, 1);
    cr_expect_eq(b.taken_seen, 3, "the budget hears what the request took");
}

Test(hedge_decide, before_its_delay_a_hedge_waits_and_spends_nothing)
{
    scripted_budget b = {0};
    retryd_hedge_facts f = due();
    f.elapsed_ns = 30 * MS;
    retryd_hedge_decision d = decide(f, &b);
    cr_expect_eq(d.verdict, RETRYD_HEDGE_WAIT);
    cr_expect_eq(d.delay_ns, 70 * MS);
    cr_expect_eq(b.takes, 0);
}

Test(hedge_decide, what_must_not_run_twice_is_never_hedged)
{
    retryd_hedge_facts f = due();
    f.idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    expect_no(f, RETRYD_HEDGE_RULE_NOT_IDEMPOTENT);
    f = due();
    f.replayability = RETRYD_ONE_SHOT;
    expect_no(f, RETRYD_HEDGE_RULE_BODY_NOT_REPLAYABLE);
    f = due();
    f.streamed = true;
    expect_no(f, RETRYD_HEDGE_RULE_STREAMED);
    f = due();
    f.response_delivered = true;
    expect_no(f, RETRYD_HEDGE_RULE_RESPONSE_DELIVERED);
    /* Declared, never the method: idempotent and keyed ones are hedged. */
    scripted_budget b = {0};
    f = due();
    f.idempotency = RETRYD_IDEMPOTENCY_BY_KEY;
    cr_expect_eq(decide(f, &b).verdict, RETRYD_HEDGE_SEND);
    f.idempotency = RETRYD_IDEMPOTENCY_IDEMPOTENT;
    f.replayability = RETRYD_REOPENABLE;
    cr_expect_eq(decide(f, &b).verdict, RETRYD_HEDGE_SEND);
}

Test(hedge_decide, the_rules_in_their_order)
{
    /* Each rule's condition, with every later one's too: the earlier
     * decides. */
    retryd_hedge_facts f = due();
    f.idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
    f.replayability = RETRYD_ONE_SHOT;
    f.streamed = f.response_delivered = f.draining = true;
    f.hedges = 1;
    f.picture = RETRYD_HEDGE_PICTURE_NONE;
    f.remaining_ns = 0;
    f.throttle_engaged = true;
    f.pushback_ns = S;
    static const retryd_hedge_rule order[] = {
        RETRYD_HEDGE_RULE_NOT_IDEMPOTENT, RETRYD_HEDGE_RULE_BODY_NOT_REPLAYABLE,
        RETRYD_HEDGE_RULE_STREAMED,       RETRYD_HEDGE_RULE_RESPONSE_DELIVERED,
        RETRYD_HEDGE_RULE_MAX_HEDGES,     RETRYD_HEDGE_RULE_DRAINING,
        RETRYD_HEDGE_RULE_NO_PICTURE,     RETRYD_HEDGE_RULE_DEADLINE,
        RETRYD_HEDGE_RULE_HOST_THROTTLED, RETRYD_HEDGE_RULE_HOST_PUSHBACK,
    };
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        expect_no(f, order[i]);
        switch (order[i]) { /* lift this rule's condition, keep the rest */
        case RETRYD_HEDGE_RULE_NOT_IDEMPOTENT:
            f.idempotency = RETRYD_IDEMPOTENCY_SAFE;
            break;
        case RETRYD_HEDGE_RULE_BODY_NOT_REPLAYABLE:
            f.replayability = RETRYD_REPLAYABLE;
            break;
        case RETRYD_HEDGE_RULE_STREAMED:
            f.streamed = false;
            break;
        case RETRYD_HEDGE_RULE_RESPONSE_DELIVERED:
            f.response_delivered = false;
            break;
        case RETRYD_HEDGE_RULE_MAX_HEDGES:
            f.max_hedges = 2;
            break;
        case RETRYD_HEDGE_RULE_DRAINING:
            f.draining = false;
            break;
        case RETRYD_HEDGE_RULE_NO_PICTURE:
            f.picture = RETRYD_HEDGE_PICTURE_FRESH;
            break;
        case RETRYD_HEDGE_RULE_DEADLINE:
            f.remaining_ns = 10 * S;
            break;
        case RETRYD_HEDGE_RULE_HOST_THROTTLED:
            f.throttle_engaged = false;
            break;
        default:
            f.pushback_ns = 0;
            break;
        }
    }
    scripted_budget b = {0};
    cr_expect_eq(decide(f, &b).verdict, RETRYD_HEDGE_SEND, "all lifted");
}

Test(hedge_decide, an_adaptive_hedge_needs_a_picture_with_a_tail)
{
    retryd_hedge_facts f = due();
    f.picture = RETRYD_HEDGE_PICTURE_NONE;
    expect_no(f, RETRYD_HEDGE_RULE_NO_PICTURE);
    f.picture = RETRYD_HEDGE_PICTURE_NO_TAIL;
    expect_no(f, RETRYD_HEDGE_RULE_NO_TAIL);
    scripted_budget b = {0};
    f.picture = RETRYD_HEDGE_PICTURE_FRESH;
    cr_expect_eq(decide(f, &b).verdict, RETRYD_HEDGE_SEND);
}

Test(hedge_decide, a_hedge_that_would_have_no_whole_attempt_is_not_waited_for)
{
    retryd_hedge_facts f = due();
    f.elapsed_ns = 0;
    /* Due in 100 ms, with 120 ms left and 50 ms an attempt's minimum. */
    f.remaining_ns = 120 * MS;
    expect_no(f, RETRYD_HEDGE_RULE_DEADLINE);
    f.remaining_ns = 150 * MS;
    scripted_budget b = {0};
    cr_expect_eq(decide(f, &b).verdict, RETRYD_HEDGE_WAIT);
}

Test(hedge_decide, refused_tokens_are_named_by_the_budget_that_refused)
{
    static const struct {
        int code;
        retryd_hedge_rule rule;
    } refusals[] = {
        {RETRYD_EHEDGE, RETRYD_HEDGE_RULE_HEDGE_BUDGET},
        {RETRYD_EBUDGET, RETRYD_HEDGE_RULE_RETRY_BUDGET},
        {RETRYD_ESHARE, RETRYD_HEDGE_RULE_PROCESS_OVER_SHARE},
        {RETRYD_EREQSHARE, RETRYD_HEDGE_RULE_REQUEST_OVER_SHARE},
    };
    for (size_t i = 0; i < 4; i++) {
        scripted_budget b = {.code = refusals[i].code};
        retryd_hedge_decision d = decide(due(), &b);
        cr_expect_eq(d.verdict, RETRYD_HEDGE_NO);
        cr_expect_eq(d.rule, refusals[i].rule, "%s",
                     retryd_hedge_rule_name(d.rule));
        cr_expect_eq(b.takes, 1);
    }
}

Test(hedge_decide, without_a_budget_anything_due_is_sent)
{
    retryd_hedge_facts f = due();
    retryd_hedge_decision d = {.sz = sizeof(d)};
    cr_assert_eq(retryd_hedge_decide(&f, NULL, &d), 0);
    cr_expect_eq(d.verdict, RETRYD_HEDGE_SEND);
}

Test(hedge_decide, facts_out_of_range_are_refused)
{
    retryd_hedge_decision d = {.sz = sizeof(d)};
    retryd_hedge_facts f = due();
    f.max_hedges = 0;
    cr_expect_eq(retryd_hedge_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = due();
    f.picture = (retryd_hedge_picture)9;
    cr_expect_eq(retryd_hedge_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = due();
    f.elapsed_ns = -1;
    cr_expect_eq(retryd_hedge_decide(&f, NULL, &d), RETRYD_EINVAL);
    f = due();
    f.sz = 8;
    cr_expect_eq(retryd_hedge_decide(&f, NULL, &d), RETRYD_EINVAL);
    cr_expect_eq(retryd_hedge_decide(NULL, NULL, &d), RETRYD_EINVAL);
    /* A field of a newer header, set: refused, not ignored. */
    struct {
        retryd_hedge_facts f;
        uint64_t newer;
    } big = {due(), 1};
    big.f.sz = sizeof(big);
    cr_expect_eq(retryd_hedge_decide(&big.f, NULL, &d), RETRYD_EOPTS);
    big.newer = 0;
    cr_expect_eq(retryd_hedge_decide(&big.f, NULL, &d), 0);
}

Test(hedge_decide, the_decision_is_written_only_as_far_as_its_size)
{
    struct {
        retryd_hedge_decision d;
        unsigned char canary[16];
    } out;
    memset(&out, 0xa5, sizeof(out));
    out.d.sz = sizeof(out.d);
    retryd_hedge_facts f = due();
    f.elapsed_ns = 0;
    cr_assert_eq(retryd_hedge_decide(&f, NULL, &out.d), 0);
    cr_expect_eq(out.d.verdict, RETRYD_HEDGE_WAIT);
    cr_expect_eq(out.d.delay_ns, 100 * MS);
    for (size_t i = 0; i < sizeof(out.canary); i++)
        cr_expect_eq(out.canary[i], 0xa5, "byte %zu past the decision", i);
    /* One too small for the first version's fields: refused, unwritten. */
    out.d.sz = offsetof(retryd_hedge_decision, delay_ns);
    out.d.verdict = (retryd_hedge_verdict)7;
    cr_expect_eq(retryd_hedge_decide(&f, NULL, &out.d), RETRYD_EINVAL);
    cr_expect_eq(out.d.verdict, (retryd_hedge_verdict)7);
}

static retryd_facts ended(retryd_evidence e, int status, retryd_failure fl)
{
    return (retryd_facts){.sz = sizeof(retryd_facts),
                          .attempt = 1,
                          .max_attempts = 3,
                          .evidence = e,
                          .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                          .failure = fl,
                          .status = status,
                          .retry_after_ns = -1,
                          .remaining_ns = 10 * S};
}

Test(hedge_answers, a_failure_a_sibling_may_escape_does_not_answer)
{
    const retryd_facts waiting[] = {
        ended(RETRYD_EVIDENCE_NOT_SENT, 0, RETRYD_FAILURE_CONNECT),
        ended(RETRYD_EVIDENCE_SENT_NO_RESPONSE, 0, RETRYD_FAILURE_TIMEOUT),
        ended(RETRYD_EVIDENCE_SENT_NO_RESPONSE, 0,
              RETRYD_FAILURE_CONNECTION_LOST),
        ended(RETRYD_EVIDENCE_PARTIAL_RESPONSE, 200,
              RETRYD_FAILURE_CONNECTION_LOST),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 503, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 502, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 504, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 429, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 408, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 425, RETRYD_FAILURE_NONE),
    };
    for (size_t i = 0; i < sizeof(waiting) / sizeof(waiting[0]); i++)
        cr_expect(!retryd_hedge_answers(&waiting[i]), "%s %d",
                  retryd_evidence_name(waiting[i].evidence), waiting[i].status);
    retryd_facts f =
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 500, RETRYD_FAILURE_NONE);
    cr_expect(retryd_hedge_answers(&f), "a 500 is the upstream's answer");
    f.transient_500 = true;
    cr_expect(!retryd_hedge_answers(&f), "unless registered transient");
}

Test(hedge_answers, a_final_answer_or_a_permanent_failure_answers)
{
    const retryd_facts answering[] = {
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 200, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 304, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 404, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 401, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_RESPONSE_RECEIVED, 501, RETRYD_FAILURE_NONE),
        ended(RETRYD_EVIDENCE_PARTIAL_RESPONSE, 404,
              RETRYD_FAILURE_CONNECTION_LOST),
        ended(RETRYD_EVIDENCE_NOT_SENT, 0, RETRYD_FAILURE_TLS_CERTIFICATE),
        ended(RETRYD_EVIDENCE_SENT_NO_RESPONSE, 0, RETRYD_FAILURE_ABORTED),
    };
    for (size_t i = 0; i < sizeof(answering) / sizeof(answering[0]); i++)
        cr_expect(retryd_hedge_answers(&answering[i]), "%s %d %s",
                  retryd_evidence_name(answering[i].evidence),
                  answering[i].status,
                  retryd_failure_name(answering[i].failure));
    cr_expect(retryd_hedge_answers(NULL));
}

Test(hedge_names, every_rule_verdict_and_picture_has_a_stable_name)
{
    for (int r = 0; r < RETRYD_HEDGE_RULE_COUNT; r++)
        cr_expect(strncmp(retryd_hedge_rule_name((retryd_hedge_rule)r),
                          "hedge_", 6) == 0,
                  "rule %d", r);
    cr_expect_str_eq(retryd_hedge_rule_name(RETRYD_HEDGE_RULE_HEDGE_BUDGET),
                     "hedge_budget_empty");
    cr_expect_str_eq(retryd_hedge_rule_name(RETRYD_HEDGE_RULE_COUNT),
                     "unknown");
    cr_expect_str_eq(retryd_hedge_verdict_name(RETRYD_HEDGE_WAIT), "wait");
    cr_expect_str_eq(retryd_hedge_picture_name(RETRYD_HEDGE_PICTURE_NO_TAIL),
                     "no_tail");
    cr_expect_str_eq(retryd_rule_name(RETRYD_RULE_HEDGE_SIBLING_ANSWERED),
                     "hedge_sibling_answered");
    cr_expect_eq(retryd_rule_order(RETRYD_RULE_HEDGE_SIBLING_ANSWERED), 4);
}

/* SPDX-License-Identifier: MIT */
/*
 * The engine's side of upstream health (docs/health.md): how an attempt
 * counts in the host throttle's window, and the admission of an attempt.
 */
#include <criterion/criterion.h>

#include "retryd/decision.h"

#define MS INT64_C(1000000)
#define S (1000 * MS)

static uint64_t fixed_random(void *ctx)
{
    return *(uint64_t *)ctx;
}

static retryd_admission admit(retryd_admit_facts f, uint64_t rnd, int64_t *wait)
{
    retryd_admission a = RETRYD_ADMISSION_COUNT;
    f.sz = sizeof(f);
    cr_assert_eq(retryd_admit(&f, fixed_random, &rnd, &a, wait), 0);
    return a;
}

Test(admit, classification_follows_the_evidence)
{
    cr_expect_eq(retryd_health_classify(RETRYD_EVIDENCE_NOT_SENT, 0),
                 RETRYD_HEALTH_NOT_COUNTED, "nothing reached the upstream");
    cr_expect_eq(retryd_health_classify(RETRYD_EVIDENCE_SENT_NO_RESPONSE, 0),
                 RETRYD_HEALTH_REJECT);
    static const int rejected[] = {429, 502, 503, 504};
    for (size_t i = 0; i < 4; i++) {
        cr_expect_eq(retryd_health_classify(RETRYD_EVIDENCE_RESPONSE_RECEIVED,
                                            rejected[i]),
                     RETRYD_HEALTH_REJECT, "%d", rejected[i]);
        cr_expect_eq(retryd_health_classify(RETRYD_EVIDENCE_PARTIAL_RESPONSE,
                                            rejected[i]),
                     RETRYD_HEALTH_REJECT, "%d", rejected[i]);
    }
    static const int accepted[] = {200, 204, 301, 400, 404, 408, 500, 501};
    for (size_t i = 0; i < 8; i++)
        cr_expect_eq(retryd_health_classify(RETRYD_EVIDENCE_RESPONSE_RECEIVED,
                                            accepted[i]),
                     RETRYD_HEALTH_ACCEPT, "%d", accepted[i]);
    cr_expect_eq(retryd_health_classify((retryd_evidence)9, 503),
                 RETRYD_HEALTH_NOT_COUNTED);
}

Test(admit, the_throttle_applies_to_first_attempts_only)
{
    int64_t wait = -1;
    retryd_admit_facts f = {.first_attempt = true,
                            .throttle_probability = 0.5,
                            .draw = 0.49,
                            .remaining_ns = 10 * S};
    cr_expect_eq(admit(f, 0, &wait), RETRYD_ADMIT_THROTTLED);
    cr_expect_eq(wait, 0);
    f.draw = 0.5;
    cr_expect_eq(admit(f, 0, &wait), RETRYD_ADMIT_SEND);
    f.draw = 0;
    f.first_attempt = false;
    cr_expect_eq(admit(f, 0, &wait), RETRYD_ADMIT_SEND, "a retry");
    f.first_attempt = true;
    f.throttle_probability = 0;
    cr_expect_eq(admit(f, 0, &wait), RETRYD_ADMIT_SEND, "never at p = 0");
}

Test(admit, holds_are_waited_with_jitter_or_refused_past_the_deadline)
{
    int64_t wait = -1;
    retryd_admit_facts f = {.pushback_ns = 2 * S,
                            .remaining_ns = 10 * S,
                            .min_attempt_ns = 50 * MS};
    cr_expect_eq(admit(f, 0, &wait), RETRYD_ADMIT_HOLD);
    cr_expect_eq(wait, 2 * S, "the smallest draw waits the hold exactly");
    /* The spread is [hold, hold + hold / 4 + 50 ms). */
    uint64_t top = (uint64_t)(2 * S / 4 + 50 * MS) - 1;
    cr_expect_eq(admit(f, top, &wait), RETRYD_ADMIT_HOLD);
    cr_expect_eq(wait, 2 * S + (int64_t)top);
    f.remaining_ns = 2 * S;
    cr_expect_eq(admit(f, 0, &wait), RETRYD_ADMIT_PAST_DEADLINE);
    cr_expect_eq(wait, 0);
    /* First attempts are held only when the upstream says so, and a hold
     * comes before the throttle. */
    f.remaining_ns = 10 * S;
    f.first_attempt = true;
    f.throttle_probability = 1;
    cr_expect_eq(admit(f, 0, &wait), RETRYD_ADMIT_THROTTLED);
    f.pushback_first_attempts = true;
    cr_expect_eq(admit(f, 0, &wait), RETRYD_ADMIT_HOLD);
}

Test(admit, facts_out_of_range_are_refused)
{
    retryd_admission a;
    int64_t wait;
    retryd_admit_facts f = {.sz = sizeof(f), .throttle_probability = 1.5};
    cr_expect_eq(retryd_admit(&f, NULL, NULL, &a, &wait), RETRYD_EINVAL);
    f = (retryd_admit_facts){.sz = sizeof(f), .draw = 1};
    cr_expect_eq(retryd_admit(&f, NULL, NULL, &a, &wait), RETRYD_EINVAL);
    f = (retryd_admit_facts){.sz = sizeof(f), .pushback_ns = -1};
    cr_expect_eq(retryd_admit(&f, NULL, NULL, &a, &wait), RETRYD_EINVAL);
    f = (retryd_admit_facts){.sz = 3};
    cr_expect_lt(retryd_admit(&f, NULL, NULL, &a, &wait), 0, "sz unset");
    cr_expect_eq(retryd_admit(NULL, NULL, NULL, &a, &wait), RETRYD_EINVAL);
    cr_expect_str_eq(retryd_admission_name(RETRYD_ADMIT_THROTTLED),
                     "throttled");
    cr_expect_str_eq(retryd_admission_name(RETRYD_ADMISSION_COUNT), "unknown");
}

/* The engine: a host hold is a floor for a retry, judged like a
 * Retry-After, spread by jitter; its own Retry-After still exact. */
Test(admit, the_engine_waits_out_a_host_hold)
{
    uint64_t rnd = 0;
    retryd_decide_env env = {
        .sz = sizeof(env), .random = fixed_random, .random_ctx = &rnd};
    retryd_facts f = {.sz = sizeof(f),
                      .attempt = 1,
                      .max_attempts = 3,
                      .evidence = RETRYD_EVIDENCE_RESPONSE_RECEIVED,
                      .replayability = RETRYD_REPLAYABLE,
                      .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                      .status = 503,
                      .retry_after_ns = -1,
                      .remaining_ns = 30 * S,
                      .min_attempt_ns = 100 * MS,
                      .pushback_ns = 2 * S};
    retryd_decision d = {.sz = sizeof(d)};
    cr_assert_eq(retryd_decide(&f, &env, &d), 0);
    cr_expect_eq(d.verdict, RETRYD_VERDICT_RETRY);
    cr_expect_eq(d.delay_ns, 2 * S);
    cr_expect(d.flags & RETRYD_RETRY_HELD_BY_PUSHBACK);
    f.retry_after_ns = 3 * S;
    cr_assert_eq(retryd_decide(&f, &env, &d), 0);
    cr_expect_eq(d.delay_ns, 3 * S, "its own longer Retry-After, exactly");
    cr_expect(!(d.flags & RETRYD_RETRY_HELD_BY_PUSHBACK));
    f.retry_after_ns = -1;
    f.remaining_ns = 2 * S;
    cr_assert_eq(retryd_decide(&f, &env, &d), 0);
    cr_expect_eq(d.verdict, RETRYD_VERDICT_DENIED);
    cr_expect_eq(d.reason, RETRYD_DENIAL_DEADLINE);
    cr_expect_eq(d.rule, RETRYD_RULE_PUSHBACK_EXCEEDS_DEADLINE);
    cr_expect_eq(retryd_rule_order(d.rule), 6);
    f.remaining_ns = 300 * S;
    f.pushback_ns = 61 * S;
    cr_assert_eq(retryd_decide(&f, &env, &d), 0);
    cr_expect_eq(d.rule, RETRYD_RULE_RETRY_AFTER_EXCEEDS_MAX);
    f.pushback_ns = -1;
    cr_expect_eq(retryd_decide(&f, &env, &d), RETRYD_EINVAL);
}

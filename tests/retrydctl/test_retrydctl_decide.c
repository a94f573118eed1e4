/* SPDX-License-Identifier: MIT */
/* retrydctl decide, run as a real process: the options reach the engine and
 * the decision and its rule come back, as text and as JSON. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "run.h"

#define DECIDE(...)                                                            \
    (char *[])                                                                 \
    {                                                                          \
        RETRYDCTL_PATH, "decide", __VA_ARGS__, NULL                            \
    }

static run_result res;

static void run(char *const argv[])
{
    cr_assert_eq(run_program(argv, 10000, &res), 0);
}

Test(retrydctl_decide, timeout_of_a_payment_is_ambiguous)
{
    run(DECIDE("--evidence", "sent_no_response", "--failure", "timeout"));
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect(strstr(res.out, "verdict:  ambiguous") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "sent_no_response_not_idempotent") != NULL);
}

Test(retrydctl_decide, json_reports_rule_delay_and_budget)
{
    run(DECIDE("--evidence", "response_received", "--status", "503",
               "--idempotency", "safe", "--retry-after", "2", "--budget", "1",
               "--json"));
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect_str_eq(res.out,
                     "{\"verdict\":\"retry\",\"rule\":\"status_gateway_"
                     "idempotent\",\"rule_order\":9,\"reason\":\"none\","
                     "\"permanent\":\"none\",\"delay_ns\":2000000000,"
                     "\"refresh_credentials\":false,\"honours_retry_after\":"
                     "true,\"held_by_pushback\":false,\"budget_before\":1,"
                     "\"budget_after\":0}\n");
}

/* --pushback is facts.pushback_ns: another process's Retry-After holds
 * this retry, spread by jitter (at most a quarter of it + 50 ms). */
Test(retrydctl_decide, pushback_holds_a_retry_with_jitter)
{
    run(DECIDE("--evidence", "response_received", "--status", "503",
               "--idempotency", "safe", "--pushback", "2s", "--seed", "7",
               "--json"));
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect(strstr(res.out, "\"verdict\":\"retry\"") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "\"held_by_pushback\":true") != NULL, "%s",
              res.out);
    long long delay = -1;
    const char *at = strstr(res.out, "\"delay_ns\":");
    cr_assert(at != NULL && sscanf(at, "\"delay_ns\":%lld", &delay) == 1);
    cr_expect(delay >= 2000000000LL && delay < 2550000000LL, "delay %lld",
              delay);

    run(DECIDE("--evidence", "response_received", "--status", "503",
               "--idempotency", "safe", "--pushback", "2s"));
    cr_expect(strstr(res.out, "(host pushback)") != NULL, "%s", res.out);
}

Test(retrydctl_decide, pushback_past_the_deadline_is_denied)
{
    run(DECIDE("--evidence", "response_received", "--status", "503",
               "--idempotency", "safe", "--pushback", "2s", "--remaining",
               "1s"));
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect(strstr(res.out, "verdict:  denied") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "rule:     pushback_exceeds_deadline") != NULL,
              "%s", res.out);
    cr_expect(strstr(res.out, "reason:   deadline") != NULL);
}

/* --admit prints retryd_admit's answer on the facts given. */
Test(retrydctl_decide, admit_throttles_a_first_attempt_below_the_probability)
{
    run(DECIDE("--admit", "--first-attempt", "--throttle-probability", "0.9",
               "--draw", "0.5"));
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect(strstr(res.out, "admission: throttled") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "not an upstream failure") != NULL, "%s",
              res.out);

    run(DECIDE("--admit", "--first-attempt", "--throttle-probability", "0.9",
               "--draw", "0.95", "--json"));
    cr_expect_str_eq(res.out,
                     "{\"admission\":\"send\",\"wait_ns\":0,\"first_"
                     "attempt\":true,\"throttle_probability\":0.900000,"
                     "\"draw\":0.950000,\"pushback_ns\":0}\n");

    /* A retry is never throttled: the throttle is about first attempts. */
    run(DECIDE("--admit", "--throttle-probability", "1", "--draw", "0"));
    cr_expect(strstr(res.out, "admission: send") != NULL, "%s", res.out);
}

Test(retrydctl_decide, admit_holds_retries_and_first_attempts_when_asked)
{
    run(DECIDE("--admit", "--pushback", "2s", "--seed", "1", "--json"));
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect(strstr(res.out, "\"admission\":\"hold\"") != NULL, "%s", res.out);
    long long wait = -1;
    const char *at = strstr(res.out, "\"wait_ns\":");
    cr_assert(at != NULL && sscanf(at, "\"wait_ns\":%lld", &wait) == 1);
    cr_expect(wait >= 2000000000LL && wait < 2550000000LL, "wait %lld", wait);

    /* A first attempt goes, unless holds apply to first attempts too. */
    run(DECIDE("--admit", "--first-attempt", "--pushback", "2s"));
    cr_expect(strstr(res.out, "admission: send") != NULL, "%s", res.out);
    run(DECIDE("--admit", "--first-attempt", "--pushback", "2s",
               "--pushback-first-attempts"));
    cr_expect(strstr(res.out, "admission: hold") != NULL, "%s", res.out);

    run(DECIDE("--admit", "--pushback", "2s", "--remaining", "1s"));
    cr_expect(strstr(res.out, "admission: past_deadline") != NULL, "%s",
              res.out);
}

Test(retrydctl_decide, admit_refuses_what_it_cannot_use)
{
    run(DECIDE("--admit", "--evidence", "not_sent"));
    cr_expect_eq(res.exit_code, 64, "%s", res.out);
    run(DECIDE("--admit", "--throttle-probability", "1.5"));
    cr_expect_eq(res.exit_code, 64);
    run(DECIDE("--admit", "--draw", "1"));
    cr_expect_eq(res.exit_code, 64);
}

/* The two commands of the report that found Retry-After being shortened:
 * a 120 s Retry-After was answered "retry after 1 s" (and after 60 s with
 * the default maximum). Both are denials now, and nothing waits. */
Test(retrydctl_decide, retry_after_above_the_maximum_is_denied_not_shortened)
{
    run(DECIDE("--evidence", "response_received", "--status", "429",
               "--retry-after", "120", "--idempotency", "idempotent",
               "--remaining", "5s", "--max-retry-after", "1s"));
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect(strstr(res.out, "verdict:  denied") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "rule:     retry_after_exceeds_max") != NULL);
    cr_expect(strstr(res.out, "reason:   deadline") != NULL);
    cr_expect(strstr(res.out, "delay") == NULL, "no wait: %s", res.out);

    run(DECIDE("--evidence", "response_received", "--status", "429",
               "--retry-after", "120", "--idempotency", "idempotent",
               "--remaining", "300s", "--json"));
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect(strstr(res.out, "\"verdict\":\"denied\"") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "\"rule\":\"retry_after_exceeds_max\"") != NULL);
    cr_expect(strstr(res.out, "\"delay_ns\":0") != NULL);
}

Test(retrydctl_decide, retry_after_within_the_maximum_is_waited_whole)
{
    run(DECIDE("--evidence", "response_received", "--status", "429",
               "--retry-after", "60", "--idempotency", "idempotent",
               "--remaining", "300s", "--json"));
    cr_expect_eq(res.exit_code, 0, "stderr: %s", res.err);
    cr_expect(strstr(res.out, "\"delay_ns\":60000000000") != NULL, "%s",
              res.out);
}

Test(retrydctl_decide, empty_budget_is_denied_before_the_status)
{
    run(DECIDE("--evidence", "not_sent", "--failure", "connect", "--budget",
               "0", "--json"));
    cr_expect_eq(res.exit_code, 0);
    cr_expect(strstr(res.out, "\"rule\":\"budget_empty\"") != NULL, "%s",
              res.out);
    cr_expect(strstr(res.out, "\"budget_after\":0") != NULL);
}

Test(retrydctl_decide, seeded_jitter_is_reproducible)
{
    run(DECIDE("--evidence", "not_sent", "--failure", "dns", "--seed", "42",
               "--json"));
    static char first[sizeof(res.out)];
    memcpy(first, res.out, sizeof(first));
    run(DECIDE("--evidence", "not_sent", "--failure", "dns", "--seed", "42",
               "--json"));
    cr_expect_str_eq(res.out, first);
    cr_expect(strstr(first, "\"verdict\":\"retry\"") != NULL);
}

Test(retrydctl_decide, refresh_is_announced_for_401)
{
    run(DECIDE("--evidence", "response_received", "--status", "401",
               "--idempotency", "idempotent"));
    cr_expect(strstr(res.out, "refresh credentials, then replay") != NULL, "%s",
              res.out);
}

Test(retrydctl_decide, bad_usage_exits_64_with_a_message)
{
    run(DECIDE("--evidence", "maybe"));
    cr_expect_eq(res.exit_code, 64);
    cr_expect(strstr(res.err, "invalid value 'maybe' for --evidence") != NULL,
              "%s", res.err);
    run(DECIDE("--status", "200"));
    cr_expect_eq(res.exit_code, 64);
    cr_expect(strstr(res.err, "--evidence is required") != NULL, "%s", res.err);
    run(DECIDE("--evidence", "response_received"));
    cr_expect_eq(res.exit_code, 64, "a response without a status");
    run(DECIDE("--evidence", "not_sent", "--remaining", "soon"));
    cr_expect_eq(res.exit_code, 64);
}

Test(retrydctl_decide, garbage_retry_after_is_absent_not_fatal)
{
    run(DECIDE("--evidence", "response_received", "--status", "429",
               "--retry-after", "tomorrow", "--seed", "1", "--json"));
    cr_expect_eq(res.exit_code, 0);
    cr_expect(strstr(res.err, "treated as absent") != NULL);
    cr_expect(strstr(res.out, "\"honours_retry_after\":false") != NULL);
}

/* SPDX-License-Identifier: MIT */
/* An out-of-tree program using the installed libretryd. */
#include <retryd/retryd.h>
#include <stdio.h>

int main(void)
{
    retryd_facts f = {
        .sz = sizeof(f),
        .attempt = 1,
        .max_attempts = 2,
        .evidence = RETRYD_EVIDENCE_SENT_NO_RESPONSE,
        .replayability = RETRYD_REPLAYABLE,
        .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
        .failure = RETRYD_FAILURE_TIMEOUT,
        .retry_after_ns = -1,
        .remaining_ns = 1000000000,
    };
    retryd_decision d = {.sz = sizeof(d)};
    int r = retryd_decide(&f, NULL, &d);
    if (r < 0) {
        fprintf(stderr, "consumer: %s\n", retryd_strerror(r));
        return 1;
    }
    printf("%s %s\n", retryd_verdict_name(d.verdict), retryd_rule_name(d.rule));
    return d.verdict == RETRYD_VERDICT_AMBIGUOUS ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
/*
 * Upstream health as the decision engine sees it (docs/health.md): how an
 * attempt counts in the host throttle's window, and the admission of an
 * attempt about to be sent. Pure, like the rest of the engine: the budget
 * layer reads the segment and passes what it found.
 */
#include "decide/decide.h"
#include "retryd/decision.h"

#define NS_PER_MS INT64_C(1000000)

retryd_health_count retryd_health_classify(retryd_evidence evidence, int status)
{
    switch (evidence) {
    case RETRYD_EVIDENCE_NOT_SENT:
        return RETRYD_HEALTH_NOT_COUNTED;
    case RETRYD_EVIDENCE_SENT_NO_RESPONSE:
        return RETRYD_HEALTH_REJECT;
    case RETRYD_EVIDENCE_RESPONSE_RECEIVED:
    case RETRYD_EVIDENCE_PARTIAL_RESPONSE:
        /* Overload and its messengers: the upstream (or the gateway in
         * front of it) did not do the work. Any other status, errors
         * included, is an upstream that answered. */
        return status == 429 || status == 502 || status == 503 || status == 504
                   ? RETRYD_HEALTH_REJECT
                   : RETRYD_HEALTH_ACCEPT;
    }
    return RETRYD_HEALTH_NOT_COUNTED; /* a value outside the enum */
}

int64_t retryd__pushback_wait(int64_t hold_ns, retryd_random_fn random,
                              void *random_ctx)
{
    if (random == NULL)
        random = retryd_random_default;
    int64_t spread = hold_ns / 4 + 50 * NS_PER_MS;
    uint64_t r = random(random_ctx);
    int64_t jitter = (int64_t)(r % (uint64_t)spread);
    return hold_ns > INT64_MAX - spread ? INT64_MAX : hold_ns + jitter;
}

int retryd_admit(const retryd_admit_facts *facts, retryd_random_fn random,
                 void *random_ctx, retryd_admission *ret, int64_t *ret_wait_ns)
{
    retryd_admit_facts local;
    const retryd_admit_facts *fp;
    if (facts == NULL || ret == NULL || ret_wait_ns == NULL)
        return RETRYD_EINVAL;
    int r = RETRYD_OPTS_VIEW(
        fp, &local, facts, RETRYD_OPTS_MIN(retryd_admit_facts, min_attempt_ns));
    if (r < 0)
        return r;
    const retryd_admit_facts f = *fp;
    if (!(f.throttle_probability >= 0 && f.throttle_probability <= 1) ||
        !(f.draw >= 0 && f.draw < 1) || f.pushback_ns < 0 ||
        f.remaining_ns < 0 || f.min_attempt_ns < 0)
        return RETRYD_EINVAL;
    *ret_wait_ns = 0;
    if (f.pushback_ns > 0 && (!f.first_attempt || f.pushback_first_attempts)) {
        int64_t wait = retryd__pushback_wait(f.pushback_ns, random, random_ctx);
        if (wait > f.remaining_ns - f.min_attempt_ns) {
            *ret = RETRYD_ADMIT_PAST_DEADLINE;
            return 0;
        }
        *ret = RETRYD_ADMIT_HOLD;
        *ret_wait_ns = wait;
        return 0;
    }
    *ret = f.first_attempt && f.draw < f.throttle_probability
               ? RETRYD_ADMIT_THROTTLED
               : RETRYD_ADMIT_SEND;
    return 0;
}

const char *retryd_admission_name(retryd_admission a)
{
    static const char *const names[RETRYD_ADMISSION_COUNT] = {
        "send", "throttled", "hold", "past_deadline"};
    return (unsigned)a < RETRYD_ADMISSION_COUNT ? names[a] : "unknown";
}

/* SPDX-License-Identifier: MIT */
/*
 * The whole fact space, enumerated: evidence x status class x replayability
 * x idempotency x attempt (first, middle, exhausted) x budget empty x
 * delivered x draining x deadline short x permanent failure x refresh used
 * x 500 registered transient. For every point it checks:
 *
 *  - ordering: when rule k's condition holds and no earlier one does, rule k
 *    decides (so no later rule ever re-enabled what k forbade);
 *  - when no condition of rules 1-8 holds, the answer is the status/failure
 *    table's, computed here by an independent table-driven oracle;
 *  - a token was taken exactly when the verdict is RETRY;
 *  - an unknown execution of a non-idempotent operation is never a plain
 *    denial and never a retry.
 */
#include <stdio.h>

#include <criterion/criterion.h>

#include "retryd/decision.h"

#define S 1000000000LL

typedef struct counting_budget {
    bool empty;
    int takes;
} counting_budget;

static bool cb_peek(void *ctx)
{
    return !((counting_budget *)ctx)->empty;
}

static bool cb_take(void *ctx)
{
    counting_budget *b = ctx;
    if (b->empty)
        return false;
    b->takes++;
    return true;
}

static const retryd_budget_iface cb_iface = {sizeof(retryd_budget_iface),
                                             cb_peek, cb_take, NULL};

static const int response_statuses[] = {200, 204, 302, 401, 403, 404, 408, 425,
                                        429, 500, 501, 502, 503, 504, 505};
#define N_STATUSES (sizeof(response_statuses) / sizeof(response_statuses[0]))

typedef struct point {
    retryd_facts f;
    bool budget_empty;
} point;

static bool safe_idem(retryd_idempotency i)
{
    return i != RETRYD_IDEMPOTENCY_NON_IDEMPOTENT;
}

/* Rule number of the first of rules 1..8 whose condition holds, or 9. */
static int first_rule(const point *p)
{
    const retryd_facts *f = &p->f;
    const bool conditions[8] = {
        f->attempt >= f->max_attempts,
        p->budget_empty,
        f->replayability == RETRYD_ONE_SHOT,
        f->response_delivered,
        f->draining,
        f->remaining_ns < f->min_attempt_ns,
        retryd_failure_is_permanent(f->failure),
        f->evidence == RETRYD_EVIDENCE_SENT_NO_RESPONSE &&
            !safe_idem(f->idempotency),
    };
    for (int k = 0; k < 8; k++)
        if (conditions[k])
            return k + 1;
    return 9;
}

/*
 * The specification's status table as data: for each status, the verdict
 * for a safely idempotent and for a non-idempotent operation. Conditions
 * beyond idempotency (first attempt, refresh, transient 500) are applied by
 * the oracle below.
 */
typedef struct status_row {
    int status;
    retryd_verdict safe;
    retryd_verdict unsafe;
} status_row;

static const status_row table[] = {
    {408, RETRYD_VERDICT_RETRY, RETRYD_VERDICT_RETRY},
    {425, RETRYD_VERDICT_RETRY, RETRYD_VERDICT_RETRY},
    {429, RETRYD_VERDICT_RETRY, RETRYD_VERDICT_RETRY},
    {401, RETRYD_VERDICT_RETRY, RETRYD_VERDICT_DENIED},
    {500, RETRYD_VERDICT_RETRY, RETRYD_VERDICT_DENIED},
    {502, RETRYD_VERDICT_RETRY, RETRYD_VERDICT_AMBIGUOUS},
    {503, RETRYD_VERDICT_RETRY, RETRYD_VERDICT_AMBIGUOUS},
    {504, RETRYD_VERDICT_RETRY, RETRYD_VERDICT_AMBIGUOUS},
};

static retryd_verdict oracle(const retryd_facts *f)
{
    bool safe = safe_idem(f->idempotency);

    if (f->evidence == RETRYD_EVIDENCE_NOT_SENT)
        return RETRYD_VERDICT_RETRY;
    if (f->evidence == RETRYD_EVIDENCE_SENT_NO_RESPONSE)
        return RETRYD_VERDICT_RETRY; /* only safe ones reach rule 9 */
    if (f->evidence == RETRYD_EVIDENCE_PARTIAL_RESPONSE && f->status / 100 == 2)
        return safe ? RETRYD_VERDICT_RETRY : RETRYD_VERDICT_AMBIGUOUS;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].status != f->status)
            continue;
        retryd_verdict v = safe ? table[i].safe : table[i].unsafe;
        if (f->status == 425 && f->attempt != 1)
            v = RETRYD_VERDICT_DENIED;
        if (f->status == 401 && f->refresh_used)
            v = RETRYD_VERDICT_DENIED;
        if (f->status == 500 && !f->transient_500)
            v = RETRYD_VERDICT_DENIED;
        return v;
    }
    return RETRYD_VERDICT_DENIED; /* other 4xx, other 5xx, 2xx, 3xx */
}

/*
 * What rule 9's retry becomes after the late checks, with the default
 * backoff (Retry-After waited for up to 60 s): a Retry-After is a floor,
 * so one above the maximum is denied, and a wait that leaves no whole
 * minimum attempt before the deadline is denied; no wait is ever shortened.
 */
static retryd_rule late_check(const retryd_facts *f)
{
    int64_t ra = f->retry_after_ns, pb = f->pushback_ns;
    if (ra > 60 * S)
        return RETRYD_RULE_RETRY_AFTER_EXCEEDS_MAX;
    if (ra >= 0 && ra > f->remaining_ns - f->min_attempt_ns)
        return RETRYD_RULE_WAIT_EXCEEDS_DEADLINE;
    /* A host pushback is judged like a Retry-After; its jitter only adds
     * to it, and none of the holds below is near the deadline's edge. */
    if (pb > 60 * S)
        return RETRYD_RULE_RETRY_AFTER_EXCEEDS_MAX;
    if (pb > 0 && pb > f->remaining_ns - f->min_attempt_ns)
        return RETRYD_RULE_PUSHBACK_EXCEEDS_DEADLINE;
    return RETRYD_RULE_COUNT; /* none: the retry stands */
}

/* The attempt may have executed an operation that must not run twice. */
static bool unknown_execution(const retryd_facts *f)
{
    if (safe_idem(f->idempotency))
        return false;
    int s = f->status;
    bool gateway = s == 502 || s == 503 || s == 504;
    return f->evidence == RETRYD_EVIDENCE_SENT_NO_RESPONSE ||
           (f->evidence == RETRYD_EVIDENCE_RESPONSE_RECEIVED && gateway) ||
           (f->evidence == RETRYD_EVIDENCE_PARTIAL_RESPONSE &&
            (gateway || s / 100 == 2));
}

/* What is wrong with decision @p d at point @p p, or NULL. */
static const char *wrong(const point *p, const retryd_decision *d, bool late,
                         int takes)
{
    int k = first_rule(p);
    int order = retryd_rule_order(d->rule);
    if (k < 9 && order != k)
        return "an earlier condition held but another rule decided";
    if (k == 9 && late &&
        (d->rule != late_check(&p->f) || d->verdict != RETRYD_VERDICT_DENIED))
        return "a Retry-After the retry may not honour was not denied by its "
               "late check";
    if (k == 9 && !late && order != 9)
        return "no condition of rules 1-8 held, yet one of them decided";
    if (k == 9 && !late && d->verdict != oracle(&p->f))
        return "verdict differs from the status table";
    if (d->verdict == RETRYD_VERDICT_RETRY && p->f.retry_after_ns >= 0 &&
        p->f.pushback_ns == 0 && d->delay_ns != p->f.retry_after_ns)
        return "a granted retry does not wait exactly the Retry-After";
    /* A host hold: at least the hold and the Retry-After, spread by at
     * most a quarter of the hold and 50 ms beyond the hold. */
    if (d->verdict == RETRYD_VERDICT_RETRY && p->f.pushback_ns > 0 &&
        (d->delay_ns < p->f.pushback_ns || d->delay_ns < p->f.retry_after_ns ||
         (d->delay_ns > p->f.retry_after_ns &&
          d->delay_ns >= p->f.pushback_ns + p->f.pushback_ns / 4 + S / 20)))
        return "a granted retry under a host hold does not wait it out, or "
               "waits longer than its jitter";
    if (takes != (d->verdict == RETRYD_VERDICT_RETRY))
        return "a token moved without a retry, or a retry took none";
    if (unknown_execution(&p->f) && d->verdict != RETRYD_VERDICT_AMBIGUOUS)
        return "unknown execution of a non-idempotent operation was not "
               "ambiguous";
    if (!unknown_execution(&p->f) && d->verdict == RETRYD_VERDICT_AMBIGUOUS)
        return "ambiguous although the execution is known";
    return NULL;
}

static char failure_text[512];
static long checked;
static long failures;
static bool seen[RETRYD_RULE_COUNT];

static void check(const point *p)
{
    counting_budget b = {.empty = p->budget_empty};
    retryd_decide_env env = {
        .sz = sizeof(env), .budget = &cb_iface, .budget_ctx = &b};
    retryd_decision d = {.sz = sizeof(d)};
    const char *what = NULL;

    /* Rule 9 wants a retry that a late check must deny. */
    bool late = oracle(&p->f) == RETRYD_VERDICT_RETRY &&
                late_check(&p->f) != RETRYD_RULE_COUNT;

    checked++;
    if (retryd_decide(&p->f, &env, &d) != 0) {
        what = "refused valid facts";
    } else {
        seen[d.rule] = true;
        what = wrong(p, &d, late, b.takes);
    }
    if (what == NULL)
        return;
    if (failures++ == 0)
        snprintf(failure_text, sizeof(failure_text),
                 "%s: evidence=%s status=%d idem=%s replay=%s attempt=%u/%u "
                 "budget_empty=%d delivered=%d draining=%d remaining=%lld "
                 "failure=%s refresh_used=%d transient_500=%d "
                 "retry_after=%lld pushback=%lld -> %s/%s/%s",
                 what, retryd_evidence_name(p->f.evidence), p->f.status,
                 retryd_idempotency_name(p->f.idempotency),
                 retryd_replayability_name(p->f.replayability), p->f.attempt,
                 p->f.max_attempts, p->budget_empty, p->f.response_delivered,
                 p->f.draining, (long long)p->f.remaining_ns,
                 retryd_failure_name(p->f.failure), p->f.refresh_used,
                 p->f.transient_500, (long long)p->f.retry_after_ns,
                 (long long)p->f.pushback_ns, retryd_verdict_name(d.verdict),
                 retryd_denial_name(d.reason), retryd_rule_name(d.rule));
}

/* The transport failure that goes with an evidence, permanent or not. */
static retryd_failure failure_for(retryd_evidence e, bool permanent)
{
    switch (e) {
    case RETRYD_EVIDENCE_NOT_SENT:
        return permanent ? RETRYD_FAILURE_TLS_CERTIFICATE
                         : RETRYD_FAILURE_CONNECT;
    case RETRYD_EVIDENCE_SENT_NO_RESPONSE:
        return permanent ? RETRYD_FAILURE_ABORTED : RETRYD_FAILURE_TIMEOUT;
    case RETRYD_EVIDENCE_PARTIAL_RESPONSE:
        return permanent ? RETRYD_FAILURE_BODY_SOURCE
                         : RETRYD_FAILURE_CONNECTION_LOST;
    case RETRYD_EVIDENCE_RESPONSE_RECEIVED:
    default:
        return permanent ? RETRYD_FAILURE_TOO_MANY_REDIRECTS
                         : RETRYD_FAILURE_NONE;
    }
}

static void enumerate_flags(point *p, retryd_evidence e)
{
    /* Bits: budget empty, delivered, draining, deadline short, permanent,
     * refresh used, transient 500. */
    for (unsigned bits = 0; bits < (1u << 7); bits++) {
        p->budget_empty = bits & 1;
        p->f.response_delivered = bits & 2;
        p->f.draining = bits & 4;
        p->f.remaining_ns = (bits & 8) ? S / 20 : 30 * S;
        p->f.failure = failure_for(e, bits & 16);
        p->f.refresh_used = bits & 32;
        p->f.transient_500 = bits & 64;
        check(p);
    }
}

/* Absent, now, one that fits, one past the 30 s deadline, one past the
 * default 60 s maximum, and the parser's overflow clamp. */
static const int64_t retry_afters[] = {-1, 0, 2 * S, 45 * S, 90 * S, INT64_MAX};
#define N_RETRY_AFTER (sizeof(retry_afters) / sizeof(retry_afters[0]))
/* Host pushbacks (docs/health.md): none, one that fits, one past the 30 s
 * deadline, one past the 60 s maximum. */
static const int64_t pushbacks[] = {0, 2 * S, 45 * S, 90 * S};
#define N_PUSHBACK (sizeof(pushbacks) / sizeof(pushbacks[0]))

static void enumerate_point(point *p, retryd_evidence e, int status)
{
    static const uint32_t attempts[] = {1, 2, 3};
    p->f.evidence = e;
    p->f.status = status;
    for (int r = 0; r < RETRYD_REPLAYABILITY_COUNT; r++)
        for (int i = 0; i < RETRYD_IDEMPOTENCY_COUNT; i++)
            for (size_t a = 0; a < 3; a++)
                for (size_t k = 0; k < N_RETRY_AFTER * N_PUSHBACK; k++) {
                    p->f.replayability = (retryd_replayability)r;
                    p->f.idempotency = (retryd_idempotency)i;
                    p->f.attempt = attempts[a];
                    p->f.retry_after_ns = retry_afters[k % N_RETRY_AFTER];
                    p->f.pushback_ns = pushbacks[k / N_RETRY_AFTER];
                    enumerate_flags(p, e);
                }
}

Test(decision_space, every_point_obeys_order_table_and_budget)
{
    point p = {.f = {.sz = sizeof(retryd_facts),
                     .max_attempts = 3,
                     .retry_after_ns = -1,
                     .min_attempt_ns = S / 10}};

    enumerate_point(&p, RETRYD_EVIDENCE_NOT_SENT, 0);
    enumerate_point(&p, RETRYD_EVIDENCE_SENT_NO_RESPONSE, 0);
    for (size_t s = 0; s < N_STATUSES; s++) {
        enumerate_point(&p, RETRYD_EVIDENCE_RESPONSE_RECEIVED,
                        response_statuses[s]);
        enumerate_point(&p, RETRYD_EVIDENCE_PARTIAL_RESPONSE,
                        response_statuses[s]);
    }
    cr_expect_eq(checked, (2 + 2 * (long)N_STATUSES) * 3 * 4 * 3 *
                              (long)N_RETRY_AFTER * (long)N_PUSHBACK * 128);
    cr_assert_eq(failures, 0, "%ld of %ld points wrong; first: %s", failures,
                 checked, failure_text);
    /* The space reaches every rule except the lost token race and the two
     * shares, which need a budget that refuses a take after a peek said
     * yes and are tested in test_decision.c, and the host throttle, which
     * is an admission's (retryd_admit), never a decision's. */
    /* Nor the two a hedged request's attempts are logged with when the
     * engine does not decide them alone (a sibling answered, or still
     * runs: docs/hedging.md). */
    for (int r = 0; r < RETRYD_RULE_COUNT; r++)
        if (r != RETRYD_RULE_BUDGET_TAKE_FAILED &&
            r != RETRYD_RULE_PROCESS_OVER_SHARE &&
            r != RETRYD_RULE_REQUEST_OVER_SHARE &&
            r != RETRYD_RULE_HOST_THROTTLED &&
            r != RETRYD_RULE_HEDGE_SIBLING_ANSWERED &&
            r != RETRYD_RULE_HEDGE_SIBLING_RUNNING)
            cr_expect(seen[r], "rule %s never decided", retryd_rule_name(r));
}

/* --- the hedge's fact space (docs/hedging.md) ---------------------------- */

typedef struct hedge_budget {
    int code; /* what take_for() answers */
    int takes;
} hedge_budget;

static bool hb_peek(void *ctx)
{
    return ((hedge_budget *)ctx)->code == 0;
}

static bool hb_take(void *ctx)
{
    hedge_budget *b = ctx;
    b->takes++;
    return b->code == 0;
}

static int hb_take_for(void *ctx, uint32_t taken)
{
    hedge_budget *b = ctx;
    (void)taken;
    b->takes++;
    return b->code;
}

static const retryd_budget_iface hb_iface = {sizeof(retryd_budget_iface),
                                             hb_peek, hb_take, hb_take_for};

static const int hedge_codes[] = {0, RETRYD_EHEDGE, RETRYD_EBUDGET,
                                  RETRYD_ESHARE, RETRYD_EREQSHARE};
#define N_HEDGE_CODES (sizeof(hedge_codes) / sizeof(hedge_codes[0]))

/* The rule an independent reading of docs/hedging.md gives. */
static retryd_hedge_rule hedge_oracle(const retryd_hedge_facts *f, int code)
{
    int64_t wait =
        f->delay_ns > f->elapsed_ns ? f->delay_ns - f->elapsed_ns : 0;
    const struct {
        bool holds;
        retryd_hedge_rule rule;
    } rules[] = {
        {!safe_idem(f->idempotency), RETRYD_HEDGE_RULE_NOT_IDEMPOTENT},
        {f->replayability == RETRYD_ONE_SHOT,
         RETRYD_HEDGE_RULE_BODY_NOT_REPLAYABLE},
        {f->streamed, RETRYD_HEDGE_RULE_STREAMED},
        {f->response_delivered, RETRYD_HEDGE_RULE_RESPONSE_DELIVERED},
        {f->hedges >= f->max_hedges, RETRYD_HEDGE_RULE_MAX_HEDGES},
        {f->draining, RETRYD_HEDGE_RULE_DRAINING},
        {f->picture == RETRYD_HEDGE_PICTURE_NONE, RETRYD_HEDGE_RULE_NO_PICTURE},
        {f->picture == RETRYD_HEDGE_PICTURE_NO_TAIL, RETRYD_HEDGE_RULE_NO_TAIL},
        {f->remaining_ns - wait < f->min_attempt_ns,
         RETRYD_HEDGE_RULE_DEADLINE},
        {wait > 0, RETRYD_HEDGE_RULE_WAIT},
        {f->throttle_engaged, RETRYD_HEDGE_RULE_HOST_THROTTLED},
        {f->pushback_ns > 0, RETRYD_HEDGE_RULE_HOST_PUSHBACK},
        {code == RETRYD_EHEDGE, RETRYD_HEDGE_RULE_HEDGE_BUDGET},
        {code == RETRYD_EBUDGET, RETRYD_HEDGE_RULE_RETRY_BUDGET},
        {code == RETRYD_ESHARE, RETRYD_HEDGE_RULE_PROCESS_OVER_SHARE},
        {code == RETRYD_EREQSHARE, RETRYD_HEDGE_RULE_REQUEST_OVER_SHARE},
    };
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        if (rules[i].holds)
            return rules[i].rule;
    return RETRYD_HEDGE_RULE_SEND;
}

static long hedge_checked, hedge_failures;
static char hedge_failure_text[512];

static void hedge_check(const retryd_hedge_facts *f, int code)
{
    hedge_budget b = {.code = code};
    retryd_decide_env env = {
        .sz = sizeof(env), .budget = &hb_iface, .budget_ctx = &b};
    retryd_hedge_decision d = {.sz = sizeof(d)};
    const char *what = NULL;
    retryd_hedge_rule want = hedge_oracle(f, code);
    hedge_checked++;
    if (retryd_hedge_decide(f, &env, &d) != 0)
        what = "refused valid facts";
    else if (d.rule != want)
        what = "another rule decided than the order gives";
    else if ((d.verdict == RETRYD_HEDGE_SEND) !=
             (want == RETRYD_HEDGE_RULE_SEND))
        what = "sent when a rule forbade it, or not sent when none did";
    else if (d.verdict == RETRYD_HEDGE_SEND &&
             (!safe_idem(f->idempotency) ||
              f->replayability == RETRYD_ONE_SHOT || f->streamed ||
              f->response_delivered))
        what = "a second copy of what must not run twice";
    else if (b.takes != (want == RETRYD_HEDGE_RULE_SEND ||
                         want >= RETRYD_HEDGE_RULE_HEDGE_BUDGET))
        what = "the budget was asked for a hedge not due, or twice";
    else if (d.verdict == RETRYD_HEDGE_WAIT &&
             d.delay_ns != f->delay_ns - f->elapsed_ns)
        what = "a wait other than what is left of the delay";
    if (what == NULL)
        return;
    if (hedge_failures++ == 0)
        snprintf(hedge_failure_text, sizeof(hedge_failure_text),
                 "%s: idem=%s replay=%s streamed=%d delivered=%d hedges=%u/%u "
                 "picture=%s elapsed=%lld remaining=%lld draining=%d "
                 "throttle=%d pushback=%lld code=%d -> %s/%s",
                 what, retryd_idempotency_name(f->idempotency),
                 retryd_replayability_name(f->replayability), f->streamed,
                 f->response_delivered, f->hedges, f->max_hedges,
                 retryd_hedge_picture_name(f->picture),
                 (long long)f->elapsed_ns, (long long)f->remaining_ns,
                 f->draining, f->throttle_engaged, (long long)f->pushback_ns,
                 code, retryd_hedge_verdict_name(d.verdict),
                 retryd_hedge_rule_name(d.rule));
}

/* Bits: streamed, delivered, draining, throttle engaged, pushback, a short
 * deadline, due (else half the delay to go); then hedges sent of one or
 * two allowed, the picture, and what the budget answers. */
static void hedge_enumerate_flags(retryd_hedge_facts *f)
{
    for (unsigned bits = 0; bits < (1u << 7); bits++)
        for (uint32_t hm = 0; hm < 4; hm++)
            for (int pic = 0; pic < RETRYD_HEDGE_PICTURE_COUNT; pic++)
                for (size_t c = 0; c < N_HEDGE_CODES; c++) {
                    f->streamed = bits & 1;
                    f->response_delivered = bits & 2;
                    f->draining = bits & 4;
                    f->throttle_engaged = bits & 8;
                    f->pushback_ns = (bits & 16) ? S : 0;
                    f->remaining_ns = (bits & 32) ? S / 10 : 30 * S;
                    f->elapsed_ns = (bits & 64) ? f->delay_ns : f->delay_ns / 2;
                    f->hedges = hm & 1;
                    f->max_hedges = 1 + (hm >> 1);
                    f->picture = (retryd_hedge_picture)pic;
                    hedge_check(f, hedge_codes[c]);
                }
}

Test(decision_space,
     no_hedge_ever_sends_a_second_copy_of_what_must_not_run_twice)
{
    retryd_hedge_facts f = {.sz = sizeof(retryd_hedge_facts),
                            .delay_ns = S / 5,
                            .min_attempt_ns = S / 20};
    for (int r = 0; r < RETRYD_REPLAYABILITY_COUNT; r++)
        for (int i = 0; i < RETRYD_IDEMPOTENCY_COUNT; i++) {
            f.replayability = (retryd_replayability)r;
            f.idempotency = (retryd_idempotency)i;
            hedge_enumerate_flags(&f);
        }
    cr_expect_eq(hedge_checked, 3L * 4 * 128 * 4 * RETRYD_HEDGE_PICTURE_COUNT *
                                    (long)N_HEDGE_CODES);
    cr_assert_eq(hedge_failures, 0, "%ld of %ld points wrong; first: %s",
                 hedge_failures, hedge_checked, hedge_failure_text);
}

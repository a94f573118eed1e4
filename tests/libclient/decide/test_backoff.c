/* SPDX-License-Identifier: MIT */
/* Backoff: the bounds of both jitters and their distribution. (The random
 * source's per-thread state is tested by thread_random.c.) */
#include <criterion/criterion.h>

#include "retryd/backoff.h"

#define MS 1000000LL
#define S 1000000000LL

static uint64_t fixed_value;
static uint64_t fixed_random(void *ctx)
{
    (void)ctx;
    return fixed_value;
}

static const retryd_backoff_policy full = {
    sizeof(retryd_backoff_policy), RETRYD_JITTER_FULL, 100 * MS, 5 * S, 60 * S};
static const retryd_backoff_policy decorrelated = {
    sizeof(retryd_backoff_policy), RETRYD_JITTER_DECORRELATED, 100 * MS, 5 * S,
    60 * S};

/* retryd_backoff_delay(), which must succeed. */
static int64_t delay(const retryd_backoff_policy *p, uint32_t retry,
                     int64_t prev_ns, retryd_random_fn random)
{
    int64_t ns = -1;
    cr_assert_eq(retryd_backoff_delay(p, retry, prev_ns, random, NULL, &ns), 0);
    return ns;
}

Test(backoff, full_jitter_spans_zero_to_the_exponential_bound)
{
    const int64_t caps[] = {100 * MS,  200 * MS,  400 * MS, 800 * MS,
                            1600 * MS, 3200 * MS, 5 * S,    5 * S};
    for (uint32_t retry = 1; retry <= 8; retry++) {
        fixed_value = 0;
        cr_expect_eq(delay(&full, retry, 0, fixed_random), 0);
        fixed_value = UINT64_MAX;
        cr_expect_eq(delay(&full, retry, 0, fixed_random), caps[retry - 1],
                     "retry %u", retry);
    }
}

Test(backoff, full_jitter_never_overflows_for_huge_retry_numbers)
{
    fixed_value = UINT64_MAX;
    cr_expect_eq(delay(&full, 63, 0, fixed_random), 5 * S);
    cr_expect_eq(delay(&full, UINT32_MAX, 0, fixed_random), 5 * S);
}

Test(backoff, decorrelated_jitter_stays_between_base_and_three_times_prev)
{
    fixed_value = 0;
    cr_expect_eq(delay(&decorrelated, 1, 0, fixed_random), 100 * MS);
    fixed_value = UINT64_MAX;
    cr_expect_eq(delay(&decorrelated, 1, 0, fixed_random), 300 * MS,
                 "no previous wait: the window is [base, 3 base]");
    cr_expect_eq(delay(&decorrelated, 2, 400 * MS, fixed_random), 1200 * MS);
    cr_expect_eq(delay(&decorrelated, 5, 4 * S, fixed_random), 5 * S,
                 "capped at max");
    cr_expect_eq(delay(&decorrelated, 5, INT64_MAX, fixed_random), 5 * S,
                 "a huge previous wait cannot overflow");
}

/* The defaults docs/decision.md states (full jitter, base 100 ms,
 * max_backoff 10 s), as literals: changing retryd_backoff_default must
 * fail here until the documentation and this test follow. */
Test(backoff, null_policy_uses_the_documented_defaults)
{
    fixed_value = 0;
    cr_expect_eq(delay(NULL, 1, 0, fixed_random), 0,
                 "full jitter: the window starts at 0");
    fixed_value = UINT64_MAX;
    cr_expect_eq(delay(NULL, 1, 0, fixed_random), 100 * MS, "base");
    cr_expect_eq(delay(NULL, 7, 0, fixed_random), 6400 * MS,
                 "base * 2^6, below the maximum");
    cr_expect_eq(delay(NULL, 8, 0, fixed_random), 10 * S,
                 "base * 2^7 is capped at max_backoff");
    cr_expect_eq(retryd_backoff_default.max_retry_after_ns, 60 * S,
                 "the largest Retry-After honoured");
}

/* 200k samples of the first retry's full jitter: uniform over [0, 100 ms].
 * Ten buckets each hold 10% +- 0.5% (about 7 standard deviations), and the
 * mean is within 0.5% of 50 ms. */
Test(backoff, full_jitter_is_uniform)
{
    enum { N = 200000, BUCKETS = 10 };
    long counts[BUCKETS] = {0};
    double sum = 0;
    for (int i = 0; i < N; i++) {
        int64_t d = delay(&full, 1, 0, NULL);
        cr_assert(d >= 0 && d <= 100 * MS);
        int b = (int)(d * BUCKETS / (100 * MS + 1));
        counts[b]++;
        sum += (double)d;
    }
    for (int b = 0; b < BUCKETS; b++)
        cr_expect(counts[b] > N / 10 * 0.95 && counts[b] < N / 10 * 1.05,
                  "bucket %d has %ld", b, counts[b]);
    double mean = sum / N;
    cr_expect(mean > 50 * MS * 0.995 && mean < 50 * MS * 1.005, "mean %f",
              mean);
}

Test(backoff, decorrelated_jitter_is_uniform_over_its_window)
{
    enum { N = 200000 };
    double sum = 0;
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < N; i++) {
        int64_t d = delay(&decorrelated, 3, 1 * S, NULL);
        cr_assert(d >= 100 * MS && d <= 3 * S);
        sum += (double)d;
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    double mean = sum / N;
    double expect = (100 * MS + 3 * S) / 2.0;
    cr_expect(mean > expect * 0.99 && mean < expect * 1.01, "mean %f", mean);
    cr_expect(lo < 110 * MS && hi > 2990 * MS, "range [%ld, %ld]", (long)lo,
              (long)hi);
}

Test(backoff, a_policy_without_its_size_is_refused)
{
    retryd_backoff_policy p = full;
    int64_t ns = 42;
    p.sz = 0;
    cr_expect_eq(retryd_backoff_delay(&p, 1, 0, NULL, NULL, &ns),
                 RETRYD_EINVAL);
    cr_expect_eq(ns, 42, "untouched on failure");
    cr_expect_eq(retryd_backoff_delay(&full, 1, 0, NULL, NULL, NULL),
                 RETRYD_EINVAL);
    struct {
        retryd_backoff_policy p;
        int64_t unknown_field;
    } newer = {.p = full, .unknown_field = 1};
    newer.p.sz = sizeof(newer);
    cr_expect_eq(retryd_backoff_delay(&newer.p, 1, 0, NULL, NULL, &ns),
                 RETRYD_EOPTS);
    newer.unknown_field = 0;
    cr_expect_eq(retryd_backoff_delay(&newer.p, 1, 0, NULL, NULL, &ns), 0);
    cr_expect(ns >= 0 && ns <= 100 * MS);
}

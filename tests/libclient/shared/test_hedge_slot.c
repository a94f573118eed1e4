/* SPDX-License-Identifier: MIT */
/*
 * Hedging's arithmetic on one slot, with the clock driven by the test
 * (docs/hedging.md): the latency histogram's accuracy, the picture judged
 * from it and refreshed once a window, the hedge bucket's ledger, and the
 * daemon's policing of scribbles.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "retryd/common.h"
#include "shared/hedge.h"

#define US UINT64_C(1000)
#define MS UINT64_C(1000000)
#define S UINT64_C(1000000000)
/* A clock far from zero, at the start of a window. */
#define T0 (UINT64_C(1000) * S)

static seg_hedge slot;

static void setup(void)
{
    memset(&slot, 0, sizeof(slot));
    retryd__hedge_init(&slot, &retryd__hedge_defaults, T0);
}

TestSuite(hedge, .init = setup);

static uint64_t counter(enum seg_hedge_counter c)
{
    return atomic_load(&slot.counters[c]);
}

static int64_t balance(void)
{
    return hedge_balance_of(atomic_load(&slot.tokens));
}

/* --- the histogram ------------------------------------------------------- */

Test(hedge, every_latency_in_range_is_reported_within_two_per_cent)
{
    double worst = 0;
    for (uint64_t us = 128; us < (UINT64_C(1) << 24); us += us / 97 + 1) {
        uint64_t ns = us * US;
        unsigned b = retryd__hedge_bucket_of(ns);
        cr_assert(b > 0 && b < HEDGE_HIST_BUCKETS - 1, "%llu us in bucket %u",
                  (unsigned long long)us, b);
        double err = fabs((double)retryd__hedge_bucket_mid_ns(b) - (double)ns) /
                     (double)ns;
        if (err > worst)
            worst = err;
    }
    cr_expect_leq(worst, 0.02, "worst relative error %.4f", worst);
    cr_expect_eq(retryd__hedge_bucket_of(50 * US), 0, "under the range");
    cr_expect_eq(retryd__hedge_bucket_of(20 * S), HEDGE_HIST_BUCKETS - 1,
                 "over it");
    /* Monotonic: a longer latency never lands in a lower bucket. */
    unsigned last = 0;
    for (uint64_t ns = 0; ns < 20 * S; ns = ns * 21 / 20 + 1000) {
        unsigned b = retryd__hedge_bucket_of(ns);
        cr_assert_geq(b, last, "%llu ns", (unsigned long long)ns);
        last = b;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A deterministic draw in [0, 1). */
static double uniform(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*state >> 11) * 0x1p-53;
}

enum shape { LOGNORMAL, EXPONENTIAL, STALLS, TIGHT };

static uint64_t draw(enum shape sh, uint64_t *st)
{
    double u = uniform(st), v = uniform(st);
    switch (sh) {
    case LOGNORMAL: {
        double z = sqrt(-2 * log(u + 1e-300)) * cos(2 * M_PI * v);
        return (uint64_t)(5e6 * exp(0.6 * z)); /* median 5 ms */
    }
    case EXPONENTIAL:
        return (uint64_t)(-4e6 * log(u + 1e-300)) + 200 * US;
    case STALLS: /* 1 % stall at 20x a median of 5 ms */
        return u < 0.01 ? (uint64_t)(100e6 * (1 + 0.05 * v))
                        : (uint64_t)(4.5e6 + 1e6 * v);
    case TIGHT: /* 100 ms give or take a millisecond */
    default:
        return (uint64_t)(100e6 + 2e6 * (v - 0.5));
    }
}

/* n draws of @p sh into a histogram and a sorted array. */
static uint64_t *sample(enum shape sh, size_t n, uint32_t *counts)
{
    uint64_t st = 42 + (uint64_t)sh, *v = malloc(n * sizeof(*v));
    cr_assert_not_null(v);
    memset(counts, 0, HEDGE_HIST_BUCKETS * sizeof(*counts));
    for (size_t i = 0; i < n; i++) {
        v[i] = draw(sh, &st);
        counts[retryd__hedge_bucket_of(v[i])]++;
    }
    qsort(v, n, sizeof(*v), cmp_u64);
    return v;
}

Test(hedge, the_quantile_is_the_samples_own_within_two_per_cent)
{
    static uint32_t counts[HEDGE_HIST_BUCKETS];
    const enum shape shapes[] = {LOGNORMAL, EXPONENTIAL, STALLS, TIGHT};
    const uint64_t ratios[] = {SEG_MICRO / 50, SEG_MICRO / 100, SEG_MICRO / 10};
    for (size_t k = 0; k < 4; k++)
        for (size_t r = 0; r < 3; r++) {
            size_t n = 20000;
            uint64_t *v = sample(shapes[k], n, counts);
            hedge_judgement j;
            retryd__hedge_judge(counts, ratios[r], 0, &j);
            size_t rank = (size_t)ceil((double)n * (1 - ratios[r] / 1e6));
            double exact = (double)v[rank - 1];
            cr_expect_neq(j.state, HEDGE_PIC_NONE);
            cr_expect_leq(fabs((double)j.quantile_ns - exact) / exact, 0.02,
                          "shape %zu, x %.2f: %llu against %.0f", k,
                          ratios[r] / 1e6, (unsigned long long)j.quantile_ns,
                          exact);
            double median = (double)v[(n + 1) / 2 - 1];
            cr_expect_leq(fabs((double)j.median_ns - median) / median, 0.02);
            free(v);
        }
}

Test(hedge, a_slow_minority_is_worth_a_hedge_a_slow_upstream_is_not)
{
    static uint32_t counts[HEDGE_HIST_BUCKETS];
    hedge_judgement j;
    free(sample(STALLS, 20000, counts));
    retryd__hedge_judge(counts, SEG_MICRO / 50, MS, &j);
    cr_expect_eq(j.state, HEDGE_PIC_FRESH, "1 %% stalls at 20x");
    cr_expect_lt(j.delay_ns, 10 * MS, "the delay is the body's, not a stall");
    free(sample(EXPONENTIAL, 20000, counts));
    retryd__hedge_judge(counts, SEG_MICRO / 50, MS, &j);
    cr_expect_eq(j.state, HEDGE_PIC_FRESH, "memoryless: a hedge may win");
    free(sample(TIGHT, 20000, counts));
    retryd__hedge_judge(counts, SEG_MICRO / 50, MS, &j);
    cr_expect_eq(j.state, HEDGE_PIC_NO_TAIL,
                 "every attempt as slow as the next: a hedge answers later");
    cr_expect_gt(j.delay_ns, 95 * MS, "the delay is still reported");
}

Test(hedge, attempts_a_hedge_answered_before_keep_the_tail_visible)
{
    /* Hedging at the delay cuts the stalls short: their first attempts
     * are stopped, and counted as outliving everything. */
    static uint32_t counts[HEDGE_HIST_BUCKETS];
    hedge_judgement j;
    uint64_t st = 7;
    memset(counts, 0, sizeof(counts));
    for (int i = 0; i < 20000; i++) {
        uint64_t ns = draw(STALLS, &st);
        counts[ns > 50 * MS ? HEDGE_HIST_BUCKETS - 1
                            : retryd__hedge_bucket_of(ns)]++;
    }
    retryd__hedge_judge(counts, SEG_MICRO / 50, MS, &j);
    cr_expect_eq(j.state, HEDGE_PIC_FRESH);
    cr_expect_lt(j.delay_ns, 10 * MS);
}

Test(hedge, too_few_samples_or_a_floor_of_a_delay)
{
    static uint32_t counts[HEDGE_HIST_BUCKETS];
    hedge_judgement j;
    memset(counts, 0, sizeof(counts));
    counts[retryd__hedge_bucket_of(5 * MS)] = 99;
    retryd__hedge_judge(counts, SEG_MICRO / 50, MS, &j);
    cr_expect_eq(j.state, HEDGE_PIC_NONE, "two beyond a p98 need 100");
    cr_expect_eq(retryd__hedge_min_samples(SEG_MICRO / 50), 100);
    cr_expect_eq(retryd__hedge_min_samples(SEG_MICRO / 2), 20);
    cr_expect_eq(retryd__hedge_min_samples(0), UINT64_MAX);
    free(sample(STALLS, 20000, counts));
    retryd__hedge_judge(counts, SEG_MICRO / 50, 30 * MS, &j);
    cr_expect_eq(j.delay_ns, 30 * MS, "never under the minimum delay");
    cr_expect_eq(j.state, HEDGE_PIC_FRESH, "the stalls outlive it still");
}

/* --- the picture --------------------------------------------------------- */

static void observe_stalls(int n, uint64_t seed)
{
    uint64_t st = seed;
    for (int i = 0; i < n; i++)
        retryd__hedge_observe(&slot, draw(STALLS, &st), false);
}

Test(hedge, no_picture_before_the_first_refresh_then_one_a_window)
{
    uint64_t delay = 1;
    cr_expect_eq(retryd__hedge_picture(&slot, T0, &delay), HEDGE_PIC_NONE,
                 "nothing observed yet");
    cr_expect_eq(delay, 0);
    cr_expect_eq(counter(SEG_H_REFRESHES), 1, "the window's one refresh");
    observe_stalls(5000, 1);
    cr_expect_eq(retryd__hedge_picture(&slot, T0 + S / 2, &delay),
                 HEDGE_PIC_NONE, "this window's picture is made");
    cr_expect_eq(counter(SEG_H_REFRESHES), 1);
    cr_expect_eq(retryd__hedge_pending_samples(&slot), 5000);
    /* The next window: its first caller sweeps and judges. */
    cr_expect_eq(retryd__hedge_picture(&slot, T0 + S, &delay), HEDGE_PIC_FRESH);
    cr_expect(delay >= MS && delay < 10 * MS, "delay %llu",
              (unsigned long long)delay);
    cr_expect_eq(counter(SEG_H_REFRESHES), 2);
    cr_expect_eq(retryd__hedge_pending_samples(&slot), 0, "swept");
    uint64_t again = 0;
    cr_expect_eq(retryd__hedge_picture(&slot, T0 + S + S / 2, &again),
                 HEDGE_PIC_FRESH, "the same window reads it");
    cr_expect_eq(again, delay);
    /* A window without traffic: the picture of nothing is none. */
    cr_expect_eq(retryd__hedge_picture(&slot, T0 + 2 * S, &delay),
                 HEDGE_PIC_NONE);
    bool fresh;
    cr_expect_eq(retryd__hedge_picture_peek(&slot, T0 + 5 * S, &delay, &fresh),
                 HEDGE_PIC_NONE);
    cr_expect(!fresh, "three windows on, stale");
}

Test(hedge, a_refresh_claimed_by_another_leaves_the_last_windows_picture)
{
    uint64_t delay;
    observe_stalls(5000, 2);
    (void)retryd__hedge_picture(&slot, T0, &delay);
    observe_stalls(5000, 3);
    cr_assert_eq(retryd__hedge_picture(&slot, T0 + S, &delay), HEDGE_PIC_FRESH);
    /* Another process claimed the next window's refresh and has not
     * published yet: the last window's picture holds meanwhile. */
    atomic_store(&slot.refresh_epoch, (T0 + 2 * S) / S + 1);
    uint64_t held = 0;
    cr_expect_eq(retryd__hedge_picture(&slot, T0 + 2 * S, &held),
                 HEDGE_PIC_FRESH);
    cr_expect_eq(held, delay);
    /* One window later it is too old. */
    atomic_store(&slot.refresh_epoch, (T0 + 3 * S) / S + 1);
    cr_expect_eq(retryd__hedge_picture(&slot, T0 + 3 * S, &held),
                 HEDGE_PIC_NONE);
}

/* --- the hedge bucket ---------------------------------------------------- */

/* initial + deposits * ratio + refilled - sent - discarded, where sent is
 * what take() granted and give_back() did not return. */
static void expect_ledger(int64_t initial, uint64_t sent)
{
    int64_t want = initial +
                   (int64_t)(counter(SEG_H_DEPOSITS) *
                             retryd__hedge_defaults.ratio_micro) +
                   (int64_t)counter(SEG_H_REFILLED_MICRO) -
                   (int64_t)(sent * SEG_MICRO) -
                   (int64_t)counter(SEG_H_DISCARDED_MICRO);
    cr_expect_eq(balance(), want, "balance %lld, ledger %lld",
                 (long long)balance(), (long long)want);
}

Test(hedge, the_bucket_starts_with_a_second_of_floor_and_keeps_its_ledger)
{
    cr_expect_eq(balance(), (int64_t)SEG_MICRO, "one second of 1 a second");
    cr_expect_eq(retryd__hedge_take(&slot, T0), 0);
    cr_expect_eq(retryd__hedge_take(&slot, T0), RETRYD_EHEDGE, "all or none");
    cr_expect_eq(balance(), 0);
    for (int i = 0; i < 49; i++)
        retryd__hedge_deposit(&slot);
    cr_expect_eq(retryd__hedge_take(&slot, T0), RETRYD_EHEDGE,
                 "49 deposits of 0.02 are not a token");
    retryd__hedge_deposit(&slot);
    cr_expect_eq(retryd__hedge_take(&slot, T0), 0, "50 are");
    /* The floor: refilled when a take finds less than a token. */
    cr_expect_eq(retryd__hedge_take(&slot, T0 + S / 2), RETRYD_EHEDGE);
    cr_expect_eq(retryd__hedge_take(&slot, T0 + S), 0, "a second of floor");
    expect_ledger((int64_t)SEG_MICRO, 3);
    /* The cap: a long quiet spell fills it, no more. */
    cr_expect_eq(retryd__hedge_take(&slot, T0 + 100 * S), 0);
    cr_expect_eq(balance(), 9 * (int64_t)SEG_MICRO);
    cr_expect_gt(counter(SEG_H_DISCARDED_MICRO), 0);
    retryd__hedge_give_back(&slot);
    retryd__hedge_give_back(&slot); /* one over the cap: discarded */
    cr_expect_eq(balance(), 10 * (int64_t)SEG_MICRO);
    retryd__hedge_deposit(&slot); /* into a full bucket: read only */
    expect_ledger((int64_t)SEG_MICRO, 4 - 2);
    cr_expect_eq(retryd__hedge_projected_balance(&slot, T0 + 200 * S),
                 10 * SEG_MICRO);
}

static void *taker(void *arg)
{
    uint64_t *granted = arg;
    for (int i = 0; i < 200000; i++) {
        retryd__hedge_deposit(&slot);
        if (retryd__hedge_take(&slot, T0) == 0)
            (*granted)++;
        if (i % 7 == 0)
            retryd__hedge_deposit(&slot);
    }
    return NULL;
}

Test(hedge, the_ledger_is_exact_under_four_threads)
{
    pthread_t t[4];
    uint64_t granted[4] = {0};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, taker, &granted[i]), 0);
    uint64_t sent = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        sent += granted[i];
    }
    cr_expect_gt(sent, 0);
    cr_expect_leq(balance(), 10 * (int64_t)SEG_MICRO);
    cr_expect_geq(balance(), 0);
    /* No floor at T0 (the clock never moved): the deposits alone paid. */
    cr_expect_leq(sent * SEG_MICRO,
                  SEG_MICRO + counter(SEG_H_DEPOSITS) *
                                  retryd__hedge_defaults.ratio_micro);
    expect_ledger((int64_t)SEG_MICRO, sent);
}

Test(hedge, a_lower_cap_binds_at_once_and_counts_what_it_discards)
{
    /* Empty, then a long quiet spell fills it to the cap (10). */
    cr_expect_eq(retryd__hedge_take(&slot, T0), 0);
    cr_expect_eq(retryd__hedge_take(&slot, T0 + 100 * S), 0);
    cr_expect_eq(balance(), 9 * (int64_t)SEG_MICRO);
    uint64_t discarded = counter(SEG_H_DISCARDED_MICRO);
    hedge_params p = retryd__hedge_defaults;
    p.cap_micro = 2 * SEG_MICRO;
    retryd__hedge_set_params(&slot, &p);
    cr_expect_eq(balance(), 2 * (int64_t)SEG_MICRO);
    cr_expect_eq(counter(SEG_H_DISCARDED_MICRO), discarded + 7 * SEG_MICRO);
    /* A higher one again does not give back what was discarded. */
    retryd__hedge_set_params(&slot, &retryd__hedge_defaults);
    cr_expect_eq(balance(), 2 * (int64_t)SEG_MICRO);
    cr_expect_eq(
        retryd__hedge_check(&slot, T0 + 100 * S, &retryd__hedge_defaults), 0,
        "sound after both");
}

/* --- policing ------------------------------------------------------------ */

Test(hedge, the_daemon_puts_back_what_no_writer_could_leave)
{
    const hedge_params *want = &retryd__hedge_defaults;
    cr_expect_eq(retryd__hedge_check(&slot, T0, want), 0, "sound");
    /* Parameters not the daemon's. */
    atomic_store(&slot.ratio_micro, SEG_MICRO);
    cr_expect_eq(retryd__hedge_check(&slot, T0, want), HEDGE_PARAMS_RESET);
    cr_expect_eq(atomic_load(&slot.ratio_micro), want->ratio_micro);
    /* A picture stamped for a window to come, with a delay of 1 us. */
    uint64_t e = T0 / S;
    atomic_store(&slot.picture, (e + 5) << 40 | UINT64_C(1) << 38 | 1);
    cr_expect_eq(retryd__hedge_check(&slot, T0, want), HEDGE_PICTURE_RESET);
    cr_expect_eq(atomic_load(&slot.picture), 0);
    /* This window's, but under the minimum delay. */
    atomic_store(&slot.picture, (e + 1) << 40 | UINT64_C(1) << 38 | 10);
    uint64_t delay;
    cr_expect_eq(retryd__hedge_check(&slot, T0, want), HEDGE_PICTURE_RESET);
    cr_expect_eq(retryd__hedge_picture(&slot, T0, &delay), HEDGE_PIC_NONE);
    /* A state no refresh writes. */
    atomic_store(&slot.picture, (e + 1) << 40 | UINT64_C(3) << 38 | 5000);
    cr_expect_eq(retryd__hedge_check(&slot, T0, want), HEDGE_PICTURE_RESET);
    /* A legitimate one stays. */
    atomic_store(&slot.picture, (e + 1) << 40 | UINT64_C(1) << 38 | 5000);
    cr_expect_eq(retryd__hedge_check(&slot, T0, want), 0);
    /* A balance of a million tokens, a refill stamp an hour ahead. */
    atomic_store(&slot.tokens, HEDGE_BIAS + 1000000 * SEG_MICRO);
    atomic_store(&slot.last_refill_ns, T0 + 3600 * S);
    cr_expect_eq(retryd__hedge_check(&slot, T0, want), HEDGE_BUCKET_REPAIRED);
    cr_expect_eq(balance(), (int64_t)want->cap_micro);
    cr_expect_eq(atomic_load(&slot.last_refill_ns), T0);
    /* One far below what takes in flight could leave. */
    atomic_store(&slot.tokens, HEDGE_BIAS - (UINT64_C(1) << 60));
    cr_expect_eq(retryd__hedge_check(&slot, T0, want), HEDGE_BUCKET_REPAIRED);
    cr_expect_eq(balance(), 0);
}

Test(hedge, defaults_are_sane_and_checked)
{
    cr_expect(retryd__hedge_params_ok(&retryd__hedge_defaults));
    hedge_params p = retryd__hedge_defaults;
    p.window_ns = 50 * MS;
    cr_expect(!retryd__hedge_params_ok(&p), "a window under 100 ms");
    p = retryd__hedge_defaults;
    p.window_ns = 4 * S;
    cr_expect(!retryd__hedge_params_ok(&p), "refreshed less than every 3 s");
    p = retryd__hedge_defaults;
    p.cap_micro = SEG_MICRO / 2;
    cr_expect(!retryd__hedge_params_ok(&p), "a cap under one hedge");
    p = retryd__hedge_defaults;
    p.ratio_micro = 2 * SEG_MICRO;
    cr_expect(!retryd__hedge_params_ok(&p), "more than one hedge a request");
}

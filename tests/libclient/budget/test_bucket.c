/* SPDX-License-Identifier: MIT */
/*
 * The bucket's arithmetic on one slot, with a simulated clock: deposits,
 * withdrawals, floor refill, the cap, and generations.
 */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include <criterion/criterion.h>

#include "shared/bucket.h"
#include "budget/host.h"
#include "retryd/common.h"

#define M SEG_MICRO
#define EXHAUSTED SEG_C_DENIED_BUDGET_EXHAUSTED
#define S UINT64_C(1000000000)

static uint64_t fake_now;
static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}
static const bucket_clock clk = {fake_clock, NULL};

static seg_upstream slot;
static _Atomic uint64_t counters[SEG_COUNTERS];
static const bucket_tally tally = {counters, false, NULL, NULL};
static uint64_t ident;

/* ratio 0.1, floor 10/s, cap 100, starting with @p balance tokens. */
static void setup_with(uint64_t balance)
{
    memset(&slot, 0, sizeof(slot));
    memset(counters, 0, sizeof(counters));
    fake_now = 1000 * S;
    ident = seg_ident(7, SEG_ACTIVE);
    atomic_store(&slot.ident, ident);
    retryd__bucket_init(&slot, 7, M / 10, 10 * M, 100 * M, balance * M,
                        fake_now);
}

static void setup(void)
{
    setup_with(0);
}

static uint64_t balance(void)
{
    uint64_t b;
    cr_assert_eq(retryd__bucket_balance(&slot, ident, &clk, &tally, &b), 0);
    return b;
}

TestSuite(bucket, .init = setup);

Test(bucket, ten_deposits_of_a_tenth_make_one_token)
{
    for (int i = 0; i < 9; i++)
        cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally),
                 RETRYD_EBUDGET, "0.9 tokens is not a token");
    cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally), 0);
    cr_expect_eq(balance(), 0);
    cr_expect_eq(atomic_load(&counters[SEG_C_DEPOSITS]), 10);
    cr_expect_eq(atomic_load(&counters[SEG_C_GRANTED]), 1);
    cr_expect_eq(atomic_load(&counters[EXHAUSTED]), 1);
}

Test(bucket, withdrawal_is_all_or_nothing)
{
    setup_with(2);
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally), 0);
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally), 0);
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally),
                 RETRYD_EBUDGET);
    cr_expect_eq(balance(), 0, "never below zero");
}

Test(bucket, refused_take_gives_its_token_back_exactly)
{
    for (int i = 0; i < 9; i++)
        cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    uint64_t before = atomic_load(&slot.tokens);
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally),
                 RETRYD_EBUDGET);
    cr_expect_eq(atomic_load(&slot.tokens), before,
                 "the word is exactly as the take found it");
    cr_expect_eq(atomic_load(&counters[SEG_C_DISCARDED_MICRO]), 0);
    cr_expect_eq(balance(), 9 * M / 10);
}

Test(bucket, floor_refills_with_time)
{
    fake_now += S / 10; /* 100 ms at 10/s: exactly one token */
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally), 0);
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally),
                 RETRYD_EBUDGET);
    fake_now += S / 20; /* half a token */
    cr_expect_eq(retryd__bucket_peek(&slot, ident, &clk, &tally), 0);
    fake_now += S / 20;
    cr_expect_eq(retryd__bucket_peek(&slot, ident, &clk, &tally), 1);
    cr_expect_eq(atomic_load(&counters[SEG_C_REFILLED_MICRO]), 2 * M);
}

Test(bucket, time_standing_still_refills_nothing)
{
    cr_expect_eq(balance(), 0);
    cr_expect_eq(balance(), 0);
    fake_now -= S; /* a clock that steps back claims nothing either */
    cr_expect_eq(balance(), 0);
    cr_expect_eq(atomic_load(&counters[SEG_C_REFILLED_MICRO]), 0);
}

Test(bucket, cap_bounds_deposits_and_refill)
{
    setup_with(99);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(balance(), 100 * M);
    fake_now += 3600 * S; /* an hour of floor: 36000 tokens offered */
    cr_expect_eq(balance(), 100 * M);
    /* Everything offered beyond the cap is counted as discarded. */
    cr_expect_eq(atomic_load(&counters[SEG_C_DISCARDED_MICRO]),
                 99 * M + 20 * (M / 10) + 36000 * M - 100 * M);
}

Test(bucket, deposit_crossing_the_cap_counts_exactly_what_it_discards)
{
    /* 99.95 tokens: a deposit of 0.1 keeps 0.05 and discards 0.05. */
    atomic_store(&slot.tokens, seg_token_word(7, 100 * M - M / 20));
    cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(atomic_load(&slot.tokens), seg_token_word(7, 100 * M),
                 "the word is back at the cap, in its own generation");
    cr_expect_eq(atomic_load(&counters[SEG_C_DISCARDED_MICRO]), M / 20);
    /* At the cap, a deposit discards all of itself. */
    cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(atomic_load(&slot.tokens), seg_token_word(7, 100 * M));
    cr_expect_eq(atomic_load(&counters[SEG_C_DISCARDED_MICRO]),
                 M / 20 + M / 10);
    cr_expect_eq(atomic_load(&counters[SEG_C_DEPOSITS]), 2);
}

Test(bucket, full_bucket_deposits_only_read_until_there_is_room)
{
    setup_with(100);
    /* The first deposit adds, finds the bucket was full, takes it all
     * back, and remembers the bucket as full for this thread. */
    cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(retryd__bucket_full, &slot);
    /* The next ones only read: the word is never written. */
    uint64_t word = atomic_load(&slot.tokens);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(atomic_load(&slot.tokens), word);
    cr_expect_eq(atomic_load(&counters[SEG_C_DISCARDED_MICRO]), 4 * (M / 10));
    /* A withdrawal makes room: the next deposit adds, and forgets. */
    cr_assert_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally), 0);
    cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_null(retryd__bucket_full);
    cr_expect_eq(balance(), 99 * M + M / 10);
    cr_expect_eq(atomic_load(&counters[SEG_C_DEPOSITS]), 5);
    cr_expect_eq(atomic_load(&counters[SEG_C_DISCARDED_MICRO]), 4 * (M / 10));
}

Test(bucket, balance_reads_an_overshoot_in_flight_as_the_cap)
{
    /* A deposit between its addition and taking the overshoot back. */
    atomic_store(&slot.tokens, seg_token_word(7, 100 * M + M / 10));
    cr_expect_eq(balance(), 100 * M);
    cr_expect_eq(retryd__bucket_projected_balance(&slot, fake_now), 100 * M);
}

Test(bucket, deposit_onto_another_generation_is_taken_back_exactly)
{
    /* A handle that passed the ident check just before the slot was
     * retired and given to another upstream: its addition lands on the
     * new bucket's word, and is taken back to the micro-token. Simulated
     * by changing only the token word. */
    atomic_store(&slot.tokens, seg_token_word(8, 50 * M));
    cr_expect_eq(retryd__bucket_deposit(&slot, ident, &tally), RETRYD_ESTALE);
    cr_expect_eq(atomic_load(&slot.tokens), seg_token_word(8, 50 * M));
    for (int i = 0; i < SEG_COUNTERS; i++)
        cr_expect_eq(atomic_load(&counters[i]), 0, "counter %d", i);
}

Test(bucket, deposit_that_carries_into_the_generation_is_undone)
{
    /* A balance at the very top of the field under a small cap (a cap
     * lowered under a huge balance, not yet clamped): the addition
     * carries into the generation. It is taken back, and the deposit made
     * by compare-and-swap instead, which clamps to the cap. */
    atomic_store(&slot.tokens, seg_token_word(7, SEG_MAX_CAP_MICRO));
    cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(atomic_load(&slot.tokens), seg_token_word(7, 100 * M));
    cr_expect_eq(atomic_load(&counters[SEG_C_DISCARDED_MICRO]),
                 SEG_MAX_CAP_MICRO + M / 10 - 100 * M);
    cr_expect_eq(atomic_load(&counters[SEG_C_DEPOSITS]), 1);
}

Test(bucket, cap_near_the_top_of_the_field_deposits_by_compare_and_swap)
{
    /* No room above this cap for deposits in flight: the addition could
     * carry into the generation, so it is never tried. */
    atomic_store(&slot.cap_micro, SEG_MAX_CAP_MICRO);
    atomic_store(&slot.tokens, seg_token_word(7, SEG_MAX_CAP_MICRO - M / 20));
    for (int i = 0; i < 3; i++)
        cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(atomic_load(&slot.tokens),
                 seg_token_word(7, SEG_MAX_CAP_MICRO));
    cr_expect_eq(atomic_load(&counters[SEG_C_DISCARDED_MICRO]),
                 3 * (M / 10) - M / 20);
    cr_expect_eq(atomic_load(&counters[SEG_C_DEPOSITS]), 3);
}

Test(bucket, lowered_cap_clamps_on_the_next_credit)
{
    setup_with(100);
    atomic_store(&slot.cap_micro, 50 * M);
    cr_assert_eq(retryd__bucket_deposit(&slot, ident, &tally), 0);
    cr_expect_eq(balance(), 50 * M);
}

Test(bucket, huge_elapsed_time_does_not_overflow)
{
    atomic_store(&slot.floor_micro_per_s, UINT64_C(1) << 40);
    fake_now = UINT64_MAX - 1;
    cr_expect_eq(balance(), 100 * M);
}

Test(bucket, stale_generation_cannot_spend)
{
    setup_with(10);
    /* The daemon retires the slot and hands it to a new upstream. */
    uint64_t fresh = seg_ident(8, SEG_ACTIVE);
    atomic_store(&slot.ident, fresh);
    atomic_store(&slot.tokens, seg_token_word(8, 50 * M));
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally),
                 RETRYD_ESTALE);
    cr_expect_eq(retryd__bucket_deposit(&slot, ident, &tally), RETRYD_ESTALE);
    cr_expect_eq(retryd__bucket_peek(&slot, ident, &clk, &tally),
                 RETRYD_ESTALE);
    uint64_t b;
    cr_expect_eq(retryd__bucket_balance(&slot, fresh, &clk, &tally, &b), 0);
    cr_expect_eq(b, 50 * M, "the new occupant's tokens are untouched");
}

Test(bucket, token_word_generation_alone_stops_a_racing_handle)
{
    /* A handle that passed the ident check just before the retirement
     * is still refused: its take sees the token word's new generation and
     * gives the token back, leaving the word as it was. Simulated by
     * changing only the token word. */
    setup_with(10);
    atomic_store(&slot.tokens, seg_token_word(8, 50 * M));
    cr_expect_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally),
                 RETRYD_ESTALE);
    cr_expect_eq(atomic_load(&slot.tokens), seg_token_word(8, 50 * M));
}

Test(bucket, exclusive_tally_counts_like_the_shared_one)
{
    _Atomic uint64_t mine[SEG_COUNTERS] = {0};
    bucket_tally own = {mine, true, NULL, NULL};
    setup_with(3);
    for (int i = 0; i < 5; i++)
        retryd__bucket_withdraw(&slot, ident, &clk, &own);
    cr_expect_eq(atomic_load(&mine[SEG_C_GRANTED]), 3);
    cr_expect_eq(atomic_load(&mine[EXHAUSTED]), 2);
}

Test(bucket, check_repairs_what_it_can_and_refuses_the_rest)
{
    setup_with(10);
    cr_expect_eq(retryd__bucket_check(&slot, ident, fake_now, &tally), 0,
                 "a sound bucket");
    /* Takes in flight may dip below zero: still sound. */
    atomic_store(&slot.tokens, seg_token_word(7, 0) - 3 * M);
    cr_expect_eq(retryd__bucket_check(&slot, ident, fake_now, &tally), 0);

    atomic_store(&slot.tokens, seg_token_word(7, 250 * M));
    atomic_store(&slot.last_refill_ns, fake_now + 10 * S);
    cr_expect_eq(retryd__bucket_check(&slot, ident, fake_now, &tally),
                 BUCKET_CLAMPED | BUCKET_REFILL_RESET);
    cr_expect_eq(balance(), 100 * M, "clamped to the cap");
    cr_expect_eq(atomic_load(&counters[SEG_C_DISCARDED_MICRO]), 150 * M,
                 "and the clamp counted as discarded");
    cr_expect_eq(atomic_load(&slot.last_refill_ns), fake_now);
    /* Half a second ahead is clock skew, not damage. */
    atomic_store(&slot.last_refill_ns, fake_now + S / 2);
    cr_expect_eq(retryd__bucket_check(&slot, ident, fake_now, &tally), 0);

    atomic_store(&slot.tokens, seg_token_word(8, 5 * M));
    cr_expect_eq(retryd__bucket_check(&slot, ident, fake_now, &tally),
                 BUCKET_BROKEN, "another generation");
    atomic_store(&slot.tokens,
                 seg_token_word(7, 0) - (uint64_t)BUCKET_MAX_DIP_MICRO - M);
    cr_expect_eq(retryd__bucket_check(&slot, ident, fake_now, &tally),
                 BUCKET_BROKEN, "a dip no takes in flight could make");
}

/* The projected balance at fake_now, then what a real refill claims
 * there: equal, and the projection wrote nothing (no token, no refill
 * stamp, no counter). */
static void expect_projection_claimed(const char *what)
{
    uint64_t word = atomic_load(&slot.tokens);
    uint64_t last = atomic_load(&slot.last_refill_ns);
    uint64_t before[SEG_COUNTERS];
    for (int i = 0; i < SEG_COUNTERS; i++)
        before[i] = atomic_load(&counters[i]);

    uint64_t projected = retryd__bucket_projected_balance(&slot, fake_now);
    cr_expect_eq(atomic_load(&slot.tokens), word, "%s: tokens written", what);
    cr_expect_eq(atomic_load(&slot.last_refill_ns), last, "%s: refill claimed",
                 what);
    for (int i = 0; i < SEG_COUNTERS; i++)
        cr_expect_eq(atomic_load(&counters[i]), before[i],
                     "%s: counter %d written", what, i);
    cr_expect_eq(projected, balance(), "%s", what);
}

Test(bucket, projected_balance_is_what_a_refill_then_claims)
{
    expect_projection_claimed("no time passed");
    fake_now += 1;
    expect_projection_claimed("a nanosecond: less than a micro-token");
    fake_now += S / 20 - 1;
    expect_projection_claimed("half a token");
    fake_now += S / 3;
    expect_projection_claimed(
        "a third of a second: a fraction of a micro-token");
    cr_assert_eq(retryd__bucket_withdraw(&slot, ident, &clk, &tally), 0);
    fake_now += 7 * S / 10;
    expect_projection_claimed("after a withdrawal");
    fake_now += 20 * S;
    expect_projection_claimed("past the cap");
    cr_expect_eq(retryd__bucket_projected_balance(&slot, fake_now), 100 * M);
}

Test(bucket, projected_balance_foresees_nothing_before_the_last_refill)
{
    setup_with(3);
    cr_expect_eq(retryd__bucket_projected_balance(&slot, fake_now - S), 3 * M);
    fake_now -= S; /* a clock stepped back: a refill claims nothing */
    expect_projection_claimed("clock behind the last refill");
}

Test(bucket, projected_balance_adds_the_refill_to_a_dip)
{
    /* Two takes in flight left the word two tokens below zero; half a
     * second of floor (5 tokens) is credited onto that, as credit() does. */
    atomic_store(&slot.tokens, seg_token_word(7, 0) - 2 * M);
    cr_expect_eq(retryd__bucket_projected_balance(&slot, fake_now), 0,
                 "a dip reads as empty");
    fake_now += S / 2;
    cr_expect_eq(retryd__bucket_projected_balance(&slot, fake_now), 3 * M);
    expect_projection_claimed("a dip refilled");
}

Test(bucket, projected_balance_is_capped_without_overflow)
{
    atomic_store(&slot.floor_micro_per_s, SEG_MAX_FLOOR_MICRO);
    atomic_store(&slot.cap_micro, SEG_MAX_CAP_MICRO);
    fake_now = UINT64_MAX - 1;
    expect_projection_claimed("every nanosecond at the largest floor");
    cr_expect_eq(balance(), SEG_MAX_CAP_MICRO);
}

Test(clock, monotonic_reads_clock_monotonic_in_nanoseconds)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t t1 = retryd__clock_monotonic_ns();
    uint64_t t2 = retryd__clock_monotonic_ns();
    clock_gettime(CLOCK_MONOTONIC, &b);
    cr_expect_geq(t1, (uint64_t)a.tv_sec * S + (uint64_t)a.tv_nsec);
    cr_expect_geq(t2, t1);
    cr_expect_leq(t2, (uint64_t)b.tv_sec * S + (uint64_t)b.tv_nsec);
}

static void *withdraw_thread(void *arg)
{
    return (void *)(intptr_t)retryd_upstream_withdraw(arg);
}

Test(handle, local_only_stays_off_the_slow_path)
{
    retryd_host_opts o = {.sz = sizeof(o), .flags = RETRYD_HOST_LOCAL_ONLY};
    retryd_host *h;
    retryd_upstream *up;
    cr_assert_eq(retryd_host_open(&o, &h), 0);
    cr_assert_eq(retryd_upstream_open(h, "payments", NULL, &up), 0);
    cr_assert(!retryd_upstream_shared(up));
    /* Due for another attempt to bind, with the slow path's lock held
     * elsewhere: a local-only handle neither waits for it nor books an
     * attempt. */
    atomic_store(&up->next_bind_ns, 0);
    pthread_mutex_lock(&h->lock);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, withdraw_thread, up), 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    void *ret = NULL;
    int joined = pthread_timedjoin_np(t, &ret, &until);
    pthread_mutex_unlock(&h->lock);
    if (joined != 0)
        pthread_join(t, &ret);
    cr_expect_eq(joined, 0, "the withdrawal waited for the host's lock");
    cr_expect_eq((intptr_t)ret, 0, "a token of the local bucket");
    cr_expect_eq(retryd_upstream_deposit(up), 0);
    cr_expect_eq(atomic_load(&up->next_bind_ns), 0);
    retryd_host_close(h);
}

/* The budget API's defaults are the segment's (budget is above shared:
 * the check lives here). */
Test(bucket, library_defaults_are_the_segment_defaults)
{
    cr_expect_eq(llround(retryd_budget_defaults.ratio * 1e6),
                 (long long)SEG_DEFAULT_RATIO_MICRO);
    cr_expect_eq(llround(retryd_budget_defaults.min_retries_per_sec * 1e6),
                 (long long)SEG_DEFAULT_FLOOR_MICRO_PER_S);
    cr_expect_eq(llround(retryd_budget_defaults.cap * 1e6),
                 (long long)SEG_DEFAULT_CAP_MICRO);
    /* As documented (docs/budget.md, retryd/budget.h). */
    cr_expect_eq(retryd_budget_defaults.ratio, 0.1);
    cr_expect_eq(retryd_budget_defaults.min_retries_per_sec, 10);
    cr_expect_eq(retryd_budget_defaults.cap, 100);
}

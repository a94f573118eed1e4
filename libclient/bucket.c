/*
 * The bucket. Invariants, under any interleaving of any number of
 * processes and threads:
 *   - the balance never goes below zero (a withdrawal is a compare-and-swap
 *     that fails rather than overdraw) and never above the cap (a credit is
 *     a compare-and-swap to min(cap, balance + amount));
 *   - every elapsed nanosecond of floor refill is claimed once: claiming is
 *     a compare-and-swap on last_refill_ns, and only the winner credits;
 *   - what was credited, spent and discarded is counted, so
 *     balance = initial + deposits * ratio + refilled - granted - discarded
 *     holds exactly (tests/libclient/budget_conservation.c checks it).
 *
 * The floor refill is claimed when a withdrawal or a peek finds less than
 * one token, and whenever the balance is read; not on every operation. The
 * hot path thus reads no clock. Credits commute under the cap
 * (min(cap, min(cap, b + x) + y) = min(cap, b + x + y) for x, y >= 0), so
 * deferring a claim changes only how much of a full bucket's refill the cap
 * discards, never the bounds.
 *
 * The token word carries the slot's generation (16 bits) beside the
 * balance, so a handle to a retired slot cannot spend from its successor:
 * its compare-and-swap fails. The full 32-bit ident is checked first.
 */
#include "bucket.h"

#include <time.h>

#include "retryd/common.h"

#define NS_PER_S UINT64_C(1000000000)

uint64_t retryd__clock_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static uint64_t coarse_now(void *ctx)
{
    (void)ctx;
    return retryd__clock_coarse_ns();
}

const bucket_clock retryd__coarse_clock = {coarse_now, NULL};

static inline void tally(const bucket_tally *t, int i, uint64_t n)
{
    _Atomic uint64_t *c = &t->counters[i];
    if (t->exclusive)
        atomic_store_explicit(c,
                              atomic_load_explicit(c, memory_order_relaxed) + n,
                              memory_order_relaxed);
    else
        atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static inline bool generation_ok(uint64_t word, uint64_t ident)
{
    return (uint16_t)(word >> SEG_BALANCE_BITS) ==
           (uint16_t)seg_ident_generation(ident);
}

static inline bool ident_ok(seg_upstream *s, uint64_t ident)
{
    return atomic_load_explicit(&s->ident, memory_order_acquire) == ident;
}

/*
 * Add @p amount to the balance, capped, and count what the cap discarded.
 * Returns 0 or RETRYD_ESTALE.
 */
static int credit(seg_upstream *s, uint64_t ident, uint64_t amount,
                  const bucket_tally *t)
{
    uint64_t old = atomic_load_explicit(&s->tokens, memory_order_relaxed);
    uint64_t cap = atomic_load_explicit(&s->cap_micro, memory_order_relaxed);
    uint64_t gen = seg_ident_generation(ident);
    uint64_t bal, nb;

    for (;;) {
        if (!generation_ok(old, ident))
            return RETRYD_ESTALE;
        bal = old & SEG_BALANCE_MASK;
        nb = bal + amount < cap ? bal + amount : cap;
        /* At the cap there is nothing to write: reading alone keeps the
         * line shared between cores, which is the steady state of a
         * healthy upstream (every first attempt deposits into a full
         * bucket). */
        if (nb == bal)
            break;
        if (atomic_compare_exchange_weak_explicit(
                &s->tokens, &old, seg_token_word((uint32_t)gen, nb),
                memory_order_acq_rel, memory_order_relaxed))
            break;
    }
    if (bal + amount != nb)
        tally(t, SEG_C_DISCARDED_MICRO, bal + amount - nb);
    return 0;
}

/* Claim the floor refill due since the last claim, if any. */
static int refill(seg_upstream *s, uint64_t ident, const bucket_clock *clk,
                  const bucket_tally *t)
{
    uint64_t now = clk->now(clk->ctx);
    uint64_t last =
        atomic_load_explicit(&s->last_refill_ns, memory_order_relaxed);

    if (now <= last)
        return 0;
    if (!atomic_compare_exchange_strong_explicit(&s->last_refill_ns, &last, now,
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed))
        return 0; /* another thread or process claimed this interval */

    uint64_t floor =
        atomic_load_explicit(&s->floor_micro_per_s, memory_order_relaxed);
    __extension__ typedef unsigned __int128 u128;
    u128 add = (u128)(now - last) * floor / NS_PER_S;
    uint64_t amount =
        add > SEG_MAX_CAP_MICRO ? SEG_MAX_CAP_MICRO : (uint64_t)add;
    if (amount == 0)
        return 0;
    tally(t, SEG_C_REFILLED_MICRO, amount);
    return credit(s, ident, amount, t);
}

int retryd__bucket_deposit(seg_upstream *s, uint64_t ident,
                           const bucket_tally *t)
{
    if (!ident_ok(s, ident))
        return RETRYD_ESTALE;
    uint64_t ratio =
        atomic_load_explicit(&s->ratio_micro, memory_order_relaxed);
    int r = credit(s, ident, ratio, t);
    if (r == 0)
        tally(t, SEG_C_DEPOSITS, 1);
    return r;
}

/* One compare-and-swap attempt loop; 0, RETRYD_EBUDGET or RETRYD_ESTALE. */
static int take_one(seg_upstream *s, uint64_t ident)
{
    uint64_t old = atomic_load_explicit(&s->tokens, memory_order_relaxed);

    for (;;) {
        if (!generation_ok(old, ident))
            return RETRYD_ESTALE;
        if ((old & SEG_BALANCE_MASK) < SEG_MICRO)
            return RETRYD_EBUDGET;
        if (atomic_compare_exchange_weak_explicit(
                &s->tokens, &old, old - SEG_MICRO, memory_order_acq_rel,
                memory_order_relaxed))
            return 0;
    }
}

int retryd__bucket_withdraw(seg_upstream *s, uint64_t ident,
                            const bucket_clock *clk, const bucket_tally *t)
{
    if (!ident_ok(s, ident))
        return RETRYD_ESTALE;
    int r = take_one(s, ident);
    if (r == RETRYD_EBUDGET) {
        /* Short of a token: claim the refill due, then try once more. */
        r = refill(s, ident, clk, t);
        if (r == 0)
            r = take_one(s, ident);
    }
    if (r == 0)
        tally(t, SEG_C_GRANTED, 1);
    else if (r == RETRYD_EBUDGET)
        tally(t, SEG_C_DENIED_FIRST + 1, 1); /* budget_exhausted */
    return r;
}

int retryd__bucket_balance(seg_upstream *s, uint64_t ident,
                           const bucket_clock *clk, const bucket_tally *t,
                           uint64_t *ret_micro)
{
    int r;

    if (!ident_ok(s, ident))
        return RETRYD_ESTALE;
    r = refill(s, ident, clk, t);
    if (r < 0)
        return r;
    uint64_t word = atomic_load_explicit(&s->tokens, memory_order_acquire);
    if (!generation_ok(word, ident))
        return RETRYD_ESTALE;
    *ret_micro = word & SEG_BALANCE_MASK;
    return 0;
}

int retryd__bucket_peek(seg_upstream *s, uint64_t ident,
                        const bucket_clock *clk, const bucket_tally *t)
{
    if (!ident_ok(s, ident))
        return RETRYD_ESTALE;
    uint64_t word = atomic_load_explicit(&s->tokens, memory_order_acquire);
    if (!generation_ok(word, ident))
        return RETRYD_ESTALE;
    if ((word & SEG_BALANCE_MASK) >= SEG_MICRO)
        return 1;
    uint64_t bal;
    int r = retryd__bucket_balance(s, ident, clk, t, &bal);
    return r < 0 ? r : bal >= SEG_MICRO;
}

void retryd__bucket_init(seg_upstream *s, uint32_t generation,
                         uint64_t ratio_micro, uint64_t floor_micro_per_s,
                         uint64_t cap_micro, uint64_t balance_micro,
                         uint64_t now_ns)
{
    if (cap_micro > SEG_MAX_CAP_MICRO)
        cap_micro = SEG_MAX_CAP_MICRO;
    if (balance_micro > cap_micro)
        balance_micro = cap_micro;
    atomic_store_explicit(&s->ratio_micro, ratio_micro, memory_order_relaxed);
    atomic_store_explicit(&s->floor_micro_per_s, floor_micro_per_s,
                          memory_order_relaxed);
    atomic_store_explicit(&s->cap_micro, cap_micro, memory_order_relaxed);
    atomic_store_explicit(&s->last_refill_ns, now_ns, memory_order_relaxed);
    atomic_store_explicit(&s->tokens, seg_token_word(generation, balance_micro),
                          memory_order_release);
}

/* SPDX-License-Identifier: MIT */
/*
 * Token-bucket arithmetic on one upstream slot: lock-free, integer fixed
 * point (micro-tokens), all-or-nothing withdrawals. The same code runs on a
 * shared segment slot and on a process-local slot (no daemon), so both
 * budgets behave the same. The clock is an argument, so tests drive time.
 */
#ifndef RETRYD_BUCKET_H
#define RETRYD_BUCKET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "retryd/common.h"
#include "base/clock.h"
#include "shared/segment.h"

/* Where an operation counts what it did: SEG_COUNTERS counters, written
 * with plain stores when the caller's thread owns them exclusively, with
 * atomic additions otherwise. */
typedef struct bucket_tally {
    _Atomic uint64_t *counters;
    bool exclusive;
    /* Fair shares (docs/budget.md#fair-shares): this process's claim on
     * the bucket and the factor its deposits claim by (its entry of the
     * process slot); NULL where it keeps no claim (a process-local
     * bucket, a process whose table of entries is full, the daemon). */
    _Atomic uint64_t *claim;
    _Atomic uint64_t *factor;
} bucket_tally;

/* A clock in nanoseconds; read only when a refill may be due. */
typedef struct bucket_clock {
    uint64_t (*now)(void *ctx);
    void *ctx;
} bucket_clock;

/* The real clock: retryd__clock_coarse_ns (clock.h). */
extern const bucket_clock retryd__coarse_clock;

/*
 * Deposits in flight can lift a balance above the cap by at most this many
 * deposits (2^20, a million: one per thread of every process, with room to
 * spare), the mirror of BUCKET_MAX_DIP_MICRO below zero.
 */
#define BUCKET_DEPOSITS_IN_FLIGHT_BITS 20

/* The out-of-line rest of retryd__bucket_deposit(), whose addition of
 * @p amount returned @p old and did not leave a balance within the cap of
 * its generation: brings the balance back to the cap, or takes the
 * addition back from another generation. 0 or RETRYD_ESTALE. */
int retryd__bucket_deposit_over(seg_upstream *s, uint64_t ident,
                                const bucket_tally *t, uint64_t old,
                                uint64_t amount);

/* A deposit by compare-and-swap, for the buckets too near the top of the
 * balance field for retryd__bucket_deposit()'s addition. */
int retryd__bucket_deposit_cas(seg_upstream *s, uint64_t ident,
                               const bucket_tally *t, uint64_t amount);

/* A deposit while fair shares are kept: the depositor's claim grows by
 * what its deposit adds to the balance (times its factor), first, so that
 * no other process's take can count the token as nobody's. */
int retryd__bucket_deposit_claiming(seg_upstream *s, uint64_t ident,
                                    const bucket_tally *t);

/* The out-of-line rest of retryd__bucket_withdraw(), whose subtraction
 * returned @p old (no whole token, another generation, or a balance some
 * processes hold claims on): keeps the token if the shares allow, else
 * gives it back, claims the refill due and tries once more. Not a
 * withdrawal on its own. 0, RETRYD_EBUDGET, RETRYD_ESHARE (tokens there,
 * owed to others) or RETRYD_ESTALE. */
int retryd__bucket_withdraw_short(seg_upstream *s, uint64_t ident,
                                  const bucket_clock *clk,
                                  const bucket_tally *t, uint64_t old);

static inline void bucket_tally_add(const bucket_tally *t, int i, uint64_t n)
{
    _Atomic uint64_t *c = &t->counters[i];
    if (t->exclusive)
        atomic_store_explicit(c,
                              atomic_load_explicit(c, memory_order_relaxed) + n,
                              memory_order_relaxed);
    else
        atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* The counting part of @p t as a value: the fast paths count through it,
 * so that their stores to the counters (which may alias anything) do not
 * make the compiler read the tally again after each. */
static inline bucket_tally bucket_tally_hot(const bucket_tally *t)
{
    return (bucket_tally){t->counters, t->exclusive, NULL, NULL};
}

static inline bool bucket_generation_ok(uint64_t word, uint64_t ident)
{
    return (uint16_t)seg_token_generation(word) ==
           (uint16_t)seg_ident_generation(ident);
}

static inline bool bucket_ident_ok(seg_upstream *s, uint64_t ident)
{
    return atomic_load_explicit(&s->ident, memory_order_acquire) == ident;
}

/*
 * Take one token. The common case is inline (it runs for every retry of
 * every request): subtract, and keep the token if the word held one; the
 * rest (giving it back, claiming the refill, another try) is out of line.
 */
static inline int retryd__bucket_withdraw(seg_upstream *s, uint64_t ident,
                                          const bucket_clock *clk,
                                          const bucket_tally *t)
{
    if (!bucket_ident_ok(s, ident))
        return RETRYD_ESTALE;
    uint64_t old =
        atomic_fetch_sub_explicit(&s->tokens, SEG_MICRO, memory_order_acq_rel);
    /* Nobody's claim on the balance: the token is the first comer's. The
     * sum of claims is on the line the subtraction just brought here, and
     * read after it, so a claim made before a deposit this take spends
     * is seen (the depositor claims first). */
    if (__builtin_expect(bucket_generation_ok(old, ident) &&
                             seg_token_balance(old) >= (int64_t)SEG_MICRO &&
                             atomic_load_explicit(&s->claimed_micro,
                                                  memory_order_acquire) == 0,
                         1)) {
        bucket_tally hot = bucket_tally_hot(t);
        bucket_tally_add(&hot, SEG_C_GRANTED, 1);
        return 0;
    }
    return retryd__bucket_withdraw_short(s, ident, clk, t, old);
}

/*
 * The bucket this thread's last deposit found full (its addition landed
 * entirely above the cap), or NULL: the thread's next deposit into it
 * reads before it adds (retryd__bucket_deposit). Thread-local, so it costs
 * no shared write; initial-exec, so reading it is one %fs-relative load.
 */
extern _Thread_local const seg_upstream *retryd__bucket_full
    __attribute__((tls_model("initial-exec"), visibility("hidden")));

/*
 * Whether @p s, which this thread last found full, still is: then a
 * deposit of any amount would be discarded whole, and only reading the
 * word keeps its cache line shared between the cores that deposit. Once
 * there is room, forgets it, so that deposits add at once again.
 */
static inline bool bucket_still_full(seg_upstream *s, uint64_t ident,
                                     uint64_t cap)
{
    uint64_t w = atomic_load_explicit(&s->tokens, memory_order_acquire);
    if (bucket_generation_ok(w, ident) && seg_token_balance(w) >= (int64_t)cap)
        return true;
    retryd__bucket_full = NULL;
    return false;
}

/*
 * Whether an addition of @p amount that returned @p old left a word of
 * @p ident's generation within @p cap: the deposit's common case, in one
 * unsigned comparison. Less the base of that generation, a word of it is
 * its biased balance field, within the cap when at most BIAS + cap (below
 * 2^48); a word of a higher generation, or one the addition carried into,
 * is 2^48 or more, and one of a lower generation wraps around to more.
 */
static inline bool bucket_added_within_cap(uint64_t old, uint64_t amount,
                                           uint64_t ident, uint64_t cap)
{
    uint64_t base = (uint64_t)(uint16_t)seg_ident_generation(ident)
                    << SEG_BALANCE_BITS;
    return old + amount - base <= SEG_BALANCE_BIAS + cap;
}

/*
 * A first attempt: deposit the slot's ratio, capped. 0, or RETRYD_ESTALE
 * when the slot's ident is no longer @p ident.
 *
 * Every first attempt of every process deposits, so the common case is
 * inline and one atomic addition, like a withdrawal's subtraction: a load
 * and a compare-and-swap would move the cache line between cores twice
 * under contention, and retry. The addition may overshoot the cap; the
 * overshooting deposit brings the balance back to the cap itself and
 * counts what that discards (retryd__bucket_deposit_over). So the word is
 * above the cap only by the deposits in flight, as it is below zero only
 * by the takes in flight.
 *
 * A full bucket is the steady state of a healthy upstream, and there an
 * addition and its correction would be two writes, bouncing the line
 * between all the cores that deposit, for nothing. So a thread whose last
 * deposit into this bucket found it full reads first (bucket_still_full),
 * and while it stays full, writes nothing but its own counters.
 *
 * Always inline: left to itself the compiler would call it, and the call
 * (and the tally spilled to the stack for it) is a good part of the cost.
 */
static inline __attribute__((always_inline)) int
retryd__bucket_deposit(seg_upstream *s, uint64_t ident, const bucket_tally *t)
{
    if (!bucket_ident_ok(s, ident))
        return RETRYD_ESTALE;
    uint64_t ratio =
        atomic_load_explicit(&s->ratio_micro, memory_order_relaxed);
    uint64_t cap = atomic_load_explicit(&s->cap_micro, memory_order_relaxed);
    if (retryd__bucket_full == s && bucket_still_full(s, ident, cap)) {
        bucket_tally hot = bucket_tally_hot(t);
        bucket_tally_add(&hot, SEG_C_DISCARDED_MICRO, ratio);
        bucket_tally_add(&hot, SEG_C_DEPOSITS, 1);
        return 0;
    }
    /* Shares kept (the bucket ran short within a window): the deposit
     * claims what it adds. Read on the line the ratio and cap came from. */
    if (__builtin_expect(
            atomic_load_explicit(&s->share_since_ns, memory_order_relaxed) != 0,
            0))
        return retryd__bucket_deposit_claiming(s, ident, t);
    /* The addition must never carry into the generation: it may only add
     * where a million deposits in flight above the cap still fit in the
     * balance's 47 bits. Any sane bucket does (the default cap is 10^8
     * micro-tokens, the field holds 1.4 * 10^14); one near the top takes
     * the compare-and-swap, which never overshoots. */
    if (__builtin_expect(ratio > (SEG_MAX_CAP_MICRO - cap) >>
                             BUCKET_DEPOSITS_IN_FLIGHT_BITS,
                         0))
        return retryd__bucket_deposit_cas(s, ident, t, ratio);
    uint64_t old =
        atomic_fetch_add_explicit(&s->tokens, ratio, memory_order_acq_rel);
    if (__builtin_expect(bucket_added_within_cap(old, ratio, ident, cap), 1)) {
        bucket_tally hot = bucket_tally_hot(t);
        bucket_tally_add(&hot, SEG_C_DEPOSITS, 1);
        return 0;
    }
    return retryd__bucket_deposit_over(s, ident, t, old, ratio);
}

/* --- fair shares (docs/budget.md#fair-shares) --------------------------- */

/* Add up to @p amount to the claim @p claim (capped at the bucket's cap)
 * and the same to the bucket's sum of claims; returns what was added. */
uint64_t retryd__share_claim_add(seg_upstream *s, _Atomic uint64_t *claim,
                                 uint64_t amount);

/* Take up to @p amount off the claim @p claim and the sum; returns what
 * was taken. The daemon decays claims with it, and empties a claim whose
 * process is gone. */
uint64_t retryd__share_claim_sub(seg_upstream *s, _Atomic uint64_t *claim,
                                 uint64_t amount);

/* Note that a withdrawal found no token it could take at @p now_ns: fair
 * shares are kept from now for a window (share_since_ns). */
void retryd__share_note_shortage(seg_upstream *s, uint64_t now_ns);

/*
 * The daemon's floor, while shares are kept: claim the refill due at
 * @p now_ns as a client would and return what the cap let into the
 * balance, which the daemon then hands out as claims. 0 when none was
 * due (or the slot was retired).
 */
uint64_t retryd__bucket_refill_at(seg_upstream *s, uint64_t ident,
                                  uint64_t now_ns, const bucket_tally *t);

/*
 * Whether a request that has taken @p taken retries already may take one
 * more from a balance of @p balance_micro: while shares are kept (the
 * bucket ran short within a window), at most request_share of the balance
 * it finds, and always its first; any number otherwise.
 */
static inline bool retryd__share_request_ok(seg_upstream *s, uint32_t taken,
                                            uint64_t balance_micro)
{
    uint64_t share =
        atomic_load_explicit(&s->request_share_micro, memory_order_relaxed);
    if (taken == 0 || share == 0 || share >= SEG_MICRO ||
        atomic_load_explicit(&s->share_since_ns, memory_order_relaxed) == 0)
        return true;
    __extension__ typedef unsigned __int128 u128;
    return (u128)(taken + 1) * SEG_MICRO * SEG_MICRO <=
           (u128)share * balance_micro;
}

/* 1 when at least one token is there, 0 when not, or RETRYD_ESTALE. */
int retryd__bucket_peek(seg_upstream *s, uint64_t ident,
                        const bucket_clock *clk, const bucket_tally *t);

/* The balance in micro-tokens, with the refill due now claimed; within
 * [0, cap] even while takes or deposits are in flight. */
int retryd__bucket_balance(seg_upstream *s, uint64_t ident,
                           const bucket_clock *clk, const bucket_tally *t,
                           uint64_t *ret_micro);

/*
 * The balance retryd__bucket_balance() would report at @p now_ns, with the
 * refill due by then foreseen but not claimed: writes nothing, so a reader
 * with no business changing a budget (the daemon's stats) can call it.
 * Checks no ident: a slot retired meanwhile reports its successor's.
 */
uint64_t retryd__bucket_projected_balance(seg_upstream *s, uint64_t now_ns);

/* What retryd__bucket_check() found in a slot's bucket. */
enum bucket_damage {
    BUCKET_CLAMPED = 1,      /* balance above the cap: clamped, discarded */
    BUCKET_REFILL_RESET = 2, /* refill stamp in the future: set to now */
    BUCKET_BROKEN = 4,       /* another generation, or an impossible dip */
};

/* Takes in flight cannot drive a balance lower than this (a million
 * tokens: one per thread of every process, with room to spare). */
#define BUCKET_MAX_DIP_MICRO (INT64_C(1) << 40)

/*
 * Check a bucket found in an adopted segment, and repair what can be: a
 * balance that stays above the cap (longer than deposits in flight leave
 * it there) is clamped as the next credit would (counted as discarded), a
 * refill stamp more than a second ahead of @p now_ns is brought back to
 * it. A token word of another generation than @p ident's or a balance
 * below -BUCKET_MAX_DIP_MICRO is BUCKET_BROKEN: nothing in it can be
 * trusted, the caller retires the slot. Safe while clients spend. Returns
 * a mask of enum bucket_damage, 0 for a sound bucket.
 */
unsigned retryd__bucket_check(seg_upstream *s, uint64_t ident, uint64_t now_ns,
                              const bucket_tally *t);

/* Initialise a slot's bucket: parameters, balance, refill clock. The daemon
 * does it on a shared slot, the library on a local one. */
void retryd__bucket_init(seg_upstream *s, uint32_t generation,
                         uint64_t ratio_micro, uint64_t floor_micro_per_s,
                         uint64_t cap_micro, uint64_t balance_micro,
                         uint64_t now_ns);

#endif /* RETRYD_BUCKET_H */

/* SPDX-License-Identifier: MIT */
/*
 * The bucket. Invariants, under any interleaving of any number of
 * processes and threads:
 *   - a withdrawal is granted only from a whole token: it subtracts one
 *     and keeps it only if the word held at least one before (a take that
 *     finds less gives it back, so the word dips below zero only by the
 *     takes in flight, and no grant ever overdraws);
 *   - the balance is above the cap only by the deposits in flight: a
 *     deposit adds first (one atomic instruction) and, when that overshot
 *     the cap, brings the word back to the cap itself, counting what it
 *     discards; the other credits (the floor refill, a refused take's
 *     give-back) are a compare-and-swap to min(cap, balance + amount);
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
 * its take sees the other generation and gives the token back, its
 * deposit sees it and takes the addition back. The full 32-bit ident is
 * checked first.
 */
#include "shared/bucket.h"
#include "shared/fleet.h"

#include "retryd/common.h"

#define NS_PER_S UINT64_C(1000000000)

static uint64_t coarse_now(void *ctx)
{
    (void)ctx;
    return retryd__clock_coarse_ns();
}

const bucket_clock retryd__coarse_clock = {coarse_now, NULL};

_Thread_local const seg_upstream *retryd__bucket_full;

/*
 * Add @p amount to the balance of a word of generation @p gen16, capped,
 * and count what the cap discarded; *@p landed (if not NULL) is what the
 * cap let in. Returns 0 or RETRYD_ESTALE (the word has another generation
 * now).
 */
static int credit_landed(seg_upstream *s, uint32_t gen16, uint64_t amount,
                         const bucket_tally *t, uint64_t *landed)
{
    uint64_t old = atomic_load_explicit(&s->tokens, memory_order_relaxed);
    int64_t cap =
        (int64_t)atomic_load_explicit(&s->cap_micro, memory_order_relaxed);
    int64_t bal, nb;

    for (;;) {
        if ((uint16_t)seg_token_generation(old) != (uint16_t)gen16)
            return RETRYD_ESTALE;
        bal = seg_token_balance(old);
        nb = bal + (int64_t)amount < cap ? bal + (int64_t)amount : cap;
        /* At the cap there is nothing to write: reading alone keeps the
         * line shared between cores, which is the steady state of a
         * healthy upstream (every first attempt deposits into a full
         * bucket). */
        if (nb == bal)
            break;
        if (atomic_compare_exchange_weak_explicit(
                &s->tokens, &old, seg_token_word(gen16, (uint64_t)nb),
                memory_order_acq_rel, memory_order_relaxed))
            break;
    }
    if (bal + (int64_t)amount != nb)
        bucket_tally_add(t, SEG_C_DISCARDED_MICRO,
                         (uint64_t)(bal + (int64_t)amount - nb));
    if (landed != NULL)
        *landed = amount - (uint64_t)(bal + (int64_t)amount - nb);
    return 0;
}

static int credit_gen(seg_upstream *s, uint32_t gen16, uint64_t amount,
                      const bucket_tally *t)
{
    return credit_landed(s, gen16, amount, t, NULL);
}

static int credit(seg_upstream *s, uint64_t ident, uint64_t amount,
                  const bucket_tally *t)
{
    return credit_gen(s, seg_ident_generation(ident), amount, t);
}

/* The floor refill due for the interval (@p last, @p now]: what refill()
 * credits and retryd__bucket_projected_balance() foresees, one formula.
 * The floor is the one in force at @p now: the host's share of the
 * fleet's while the daemon's fleet view applies one (docs/fleet.md), else
 * the slot's own. */
static uint64_t refill_due(const seg_upstream *s, uint64_t last, uint64_t now)
{
    if (now <= last)
        return 0;
    uint64_t floor =
        retryd__fleet_floor((seg_upstream *)(uintptr_t)s, now); /* reads */
    __extension__ typedef unsigned __int128 u128;
    u128 add = (u128)(now - last) * floor / NS_PER_S;
    return add > SEG_MAX_CAP_MICRO ? SEG_MAX_CAP_MICRO : (uint64_t)add;
}

/* Whether the daemon hands out the floor as claims now (shares kept, and
 * it said so within the last few seconds): then it claims the refill. */
static bool floor_by_daemon(const seg_upstream *s, uint64_t now)
{
    seg_upstream *m = (seg_upstream *)(uintptr_t)s; /* atomics only */
    return atomic_load_explicit(&m->share_since_ns, memory_order_relaxed) !=
               0 &&
           now < atomic_load_explicit(&m->share_floor_until_ns,
                                      memory_order_relaxed);
}

/* Claim the floor refill due since the last claim, if any. */
static int refill(seg_upstream *s, uint64_t ident, const bucket_clock *clk,
                  const bucket_tally *t)
{
    uint64_t now = clk->now(clk->ctx);
    uint64_t last =
        atomic_load_explicit(&s->last_refill_ns, memory_order_relaxed);

    if (now <= last || floor_by_daemon(s, now))
        return 0;
    if (!atomic_compare_exchange_strong_explicit(&s->last_refill_ns, &last, now,
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed))
        return 0; /* another thread or process claimed this interval */

    uint64_t amount = refill_due(s, last, now);
    if (amount == 0)
        return 0;
    bucket_tally_add(t, SEG_C_REFILLED_MICRO, amount);
    return credit(s, ident, amount, t);
}

int retryd__bucket_deposit_cas(seg_upstream *s, uint64_t ident,
                               const bucket_tally *t, uint64_t amount)
{
    int r = credit(s, ident, amount, t);
    if (r == 0)
        bucket_tally_add(t, SEG_C_DEPOSITS, 1);
    return r;
}

/*
 * Bring a word of generation @p gen that a deposit lifted above the cap
 * back to the cap, and count what that discards; @p w is the first guess
 * of the word (what the addition left). Deposits may overshoot together:
 * each compare-and-swap takes everything above the cap at that moment, so
 * every micro-token above it is discarded, and counted, exactly once, by
 * the deposit whose swap took it; the others then find the word within the
 * cap and stop. Withdrawals in between may spend part of an overshoot (it
 * was in the word); what they spent is not discarded twice.
 */
static void clamp_to_cap(seg_upstream *s, uint32_t gen, uint64_t w,
                         const bucket_tally *t)
{
    int64_t cap =
        (int64_t)atomic_load_explicit(&s->cap_micro, memory_order_relaxed);

    for (;;) {
        if ((uint16_t)seg_token_generation(w) != (uint16_t)gen)
            return; /* retired meanwhile: the overshoot went with the word */
        int64_t bal = seg_token_balance(w);
        if (bal <= cap)
            return;
        if (atomic_compare_exchange_weak_explicit(
                &s->tokens, &w, seg_token_word(gen, (uint64_t)cap),
                memory_order_acq_rel, memory_order_relaxed)) {
            bucket_tally_add(t, SEG_C_DISCARDED_MICRO, (uint64_t)(bal - cap));
            return;
        }
    }
}

/*
 * Take back, exactly, the @p amount an addition that returned @p old put
 * into a word that was not the deposit's to credit. That is a word of
 * another generation (the slot was retired, perhaps reused, after the
 * ident check), or the deposit's own word if the addition carried into
 * the generation bits (a word nearer the top of the field than the fast
 * path expects: a cap lowered under it, a damaged segment). So the undo
 * subtracts only from the generations the addition touched: @p old's, and
 * old + amount's (the same unless it carried; other additions may borrow
 * back across). A word of any other generation was stored afresh by the
 * daemon, retiring or reusing the slot: the addition went with the word it
 * replaced, and nothing is left to take back. In between, the word held
 * @p amount more: a take of that generation that found a whole token only
 * thanks to it leaves the word below zero by less than @p amount after
 * the undo, until its next credits. That needs the slot retired and given
 * to another upstream (two requests to the daemon) between this deposit's
 * ident check and its addition; a take racing the same way lowers the new
 * bucket instead.
 */
static void undo_add(seg_upstream *s, uint64_t old, uint64_t amount)
{
    uint64_t w = old + amount; /* what the addition left: the first guess */
    uint16_t g_old = (uint16_t)seg_token_generation(old);
    uint16_t g_new = (uint16_t)seg_token_generation(w);

    for (;;) {
        uint16_t g = (uint16_t)seg_token_generation(w);
        if (g != g_old && g != g_new)
            return;
        if (atomic_compare_exchange_weak_explicit(&s->tokens, &w, w - amount,
                                                  memory_order_acq_rel,
                                                  memory_order_relaxed))
            return;
    }
}

int retryd__bucket_deposit_over(seg_upstream *s, uint64_t ident,
                                const bucket_tally *t, uint64_t old,
                                uint64_t amount)
{
    uint64_t landed = old + amount;

    if (bucket_generation_ok(old, ident) &&
        bucket_generation_ok(landed, ident)) {
        /* Our word, above the cap: the usual case here. If it was full
         * before the addition, the next deposit reads first. */
        if (seg_token_balance(old) >=
            (int64_t)atomic_load_explicit(&s->cap_micro, memory_order_relaxed))
            retryd__bucket_full = s;
        clamp_to_cap(s, seg_ident_generation(ident), landed, t);
        bucket_tally_add(t, SEG_C_DEPOSITS, 1);
        return 0;
    }
    undo_add(s, old, amount);
    if (!bucket_generation_ok(old, ident))
        return RETRYD_ESTALE; /* the slot was retired after the ident check */
    /* The addition carried: this bucket is too near the top of the field
     * for additions, so the compare-and-swap, which never overshoots. */
    return retryd__bucket_deposit_cas(s, ident, t, amount);
}

/* --- fair shares (docs/budget.md#fair-shares) --------------------------- */

uint64_t retryd__share_claim_add(seg_upstream *s, _Atomic uint64_t *claim,
                                 uint64_t amount)
{
    uint64_t cap = atomic_load_explicit(&s->cap_micro, memory_order_relaxed);
    uint64_t c = atomic_load_explicit(claim, memory_order_relaxed), add;
    do {
        add = c >= cap ? 0 : cap - c < amount ? cap - c : amount;
        if (add == 0)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(
        claim, &c, c + add, memory_order_relaxed, memory_order_relaxed));
    /* Release: a take that sees the deposit made after this sees it. */
    atomic_fetch_add_explicit(&s->claimed_micro, add, memory_order_release);
    return add;
}

uint64_t retryd__share_claim_sub(seg_upstream *s, _Atomic uint64_t *claim,
                                 uint64_t amount)
{
    uint64_t c = atomic_load_explicit(claim, memory_order_relaxed), sub;
    do {
        sub = c < amount ? c : amount;
        if (sub == 0)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(
        claim, &c, c - sub, memory_order_relaxed, memory_order_relaxed));
    atomic_fetch_sub_explicit(&s->claimed_micro, sub, memory_order_release);
    return sub;
}

void retryd__share_note_shortage(seg_upstream *s, uint64_t now_ns)
{
    uint64_t since =
        atomic_load_explicit(&s->share_since_ns, memory_order_relaxed);
    uint64_t window =
        atomic_load_explicit(&s->share_window_ns, memory_order_relaxed);
    /* A few writes per window at most: the word is on the read-mostly
     * line that every deposit reads. 0 is "not kept", so never stored; a
     * window of 0 is fair_shares = off. */
    if (window == 0)
        return;
    if (since == 0 || now_ns >= since + window / 8)
        atomic_store_explicit(&s->share_since_ns, now_ns ? now_ns : 1,
                              memory_order_relaxed);
}

/* The micro-tokens a deposit of @p ratio claims for a process of factor
 * @p t (SEG_SHARE_FACTOR_ONE when it has none yet). */
static uint64_t claim_of(const bucket_tally *t, uint64_t ratio)
{
    uint64_t f = atomic_load_explicit(t->factor, memory_order_relaxed);
    if (f == 0)
        return ratio;
    __extension__ typedef unsigned __int128 u128;
    u128 c = (u128)ratio * f / SEG_SHARE_FACTOR_ONE;
    return c > SEG_MAX_CAP_MICRO ? SEG_MAX_CAP_MICRO : (uint64_t)c;
}

int retryd__bucket_deposit_claiming(seg_upstream *s, uint64_t ident,
                                    const bucket_tally *t)
{
    uint64_t ratio =
        atomic_load_explicit(&s->ratio_micro, memory_order_relaxed);
    if (t->claim == NULL)
        return retryd__bucket_deposit_cas(s, ident, t, ratio);
    /* Claim first: a take that finds the token finds the claim on it. */
    uint64_t want = claim_of(t, ratio);
    uint64_t claimed = retryd__share_claim_add(s, t->claim, want);
    uint64_t landed;
    int r = credit_landed(s, seg_ident_generation(ident), ratio, t, &landed);
    if (r == 0)
        bucket_tally_add(t, SEG_C_DEPOSITS, 1);
    else
        landed = 0;
    /* What the cap turned away (or a retired slot took) was never in the
     * balance: no claim on it. */
    __extension__ typedef unsigned __int128 u128;
    uint64_t keep = ratio == 0 ? 0 : (uint64_t)((u128)claimed * landed / ratio);
    if (claimed > keep)
        (void)retryd__share_claim_sub(s, t->claim, claimed - keep);
    return r;
}

/* Spend one whole token of the claim @p claim, if it holds one. */
static bool spend_claim(seg_upstream *s, _Atomic uint64_t *claim)
{
    uint64_t c = atomic_load_explicit(claim, memory_order_relaxed);
    do {
        if (c < SEG_MICRO)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        claim, &c, c - SEG_MICRO, memory_order_relaxed, memory_order_relaxed));
    atomic_fetch_sub_explicit(&s->claimed_micro, SEG_MICRO,
                              memory_order_release);
    return true;
}

/*
 * Whether the token a take holds, from a balance of @p bal before it,
 * is this process's to keep: nobody claims any of the balance; or the
 * process spends its own claim; or what is left covers every other
 * process's claim (a borrow). Counts the borrow.
 */
static bool may_keep(seg_upstream *s, int64_t bal, const bucket_tally *t)
{
    int64_t claimed =
        (int64_t)atomic_load_explicit(&s->claimed_micro, memory_order_acquire);
    bool kept =
        atomic_load_explicit(&s->share_since_ns, memory_order_relaxed) != 0;
    if (claimed > 0 && t->claim != NULL && spend_claim(s, t->claim))
        return true; /* earned */
    int64_t own =
        t->claim ? (int64_t)atomic_load_explicit(t->claim, memory_order_relaxed)
                 : 0;
    int64_t others = claimed > own ? claimed - own : 0;
    if (bal - (int64_t)SEG_MICRO < others)
        return false;
    if (kept)
        bucket_tally_add(t, SEG_C_BORROWED, 1);
    return true;
}

/*
 * Take one token: subtract first, then look at what was there (one atomic
 * instruction, where a load and a compare-and-swap would move the line
 * between cores twice under contention). A take that finds less than a
 * token, another generation, or only tokens others claim gives the token
 * back to the generation it took it from; if that word was replaced
 * meanwhile (the slot retired) the debt went with it. 0, RETRYD_EBUDGET,
 * RETRYD_ESHARE or RETRYD_ESTALE.
 */
static int take_one(seg_upstream *s, uint64_t ident, const bucket_tally *t)
{
    uint64_t old =
        atomic_fetch_sub_explicit(&s->tokens, SEG_MICRO, memory_order_acq_rel);
    bool same_gen = bucket_generation_ok(old, ident);
    int64_t bal = seg_token_balance(old);

    if (same_gen && bal >= (int64_t)SEG_MICRO && may_keep(s, bal, t))
        return 0;
    (void)credit_gen(s, seg_token_generation(old), SEG_MICRO, t);
    if (!same_gen)
        return RETRYD_ESTALE;
    return bal >= (int64_t)SEG_MICRO ? RETRYD_ESHARE : RETRYD_EBUDGET;
}

int retryd__bucket_withdraw_short(seg_upstream *s, uint64_t ident,
                                  const bucket_clock *clk,
                                  const bucket_tally *t, uint64_t old)
{
    bool same_gen = bucket_generation_ok(old, ident);
    int64_t bal = seg_token_balance(old);
    /* A whole token in hand, and claims on the balance: the shares say
     * whether to keep it. */
    if (same_gen && bal >= (int64_t)SEG_MICRO && may_keep(s, bal, t)) {
        bucket_tally_add(t, SEG_C_GRANTED, 1);
        return 0;
    }
    (void)credit_gen(s, seg_token_generation(old), SEG_MICRO, t);
    if (!same_gen)
        return RETRYD_ESTALE;
    /* Short of a token it may take: claim the refill due, then try once
     * more. */
    int r = refill(s, ident, clk, t);
    if (r == 0)
        r = take_one(s, ident, t);
    if (r == 0) {
        bucket_tally_add(t, SEG_C_GRANTED, 1);
    } else if (r == RETRYD_EBUDGET || r == RETRYD_ESHARE) {
        bucket_tally_add(t,
                         r == RETRYD_EBUDGET ? SEG_C_DENIED_BUDGET_EXHAUSTED
                                             : SEG_C_DENIED_OVER_SHARE,
                         1);
        retryd__share_note_shortage(s, clk->now(clk->ctx));
    }
    return r;
}

uint64_t retryd__bucket_refill_at(seg_upstream *s, uint64_t ident,
                                  uint64_t now_ns, const bucket_tally *t)
{
    uint64_t last =
        atomic_load_explicit(&s->last_refill_ns, memory_order_relaxed);
    if (!bucket_ident_ok(s, ident) || now_ns <= last ||
        !atomic_compare_exchange_strong_explicit(&s->last_refill_ns, &last,
                                                 now_ns, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return 0;
    uint64_t amount = refill_due(s, last, now_ns), landed;
    if (amount == 0)
        return 0;
    bucket_tally_add(t, SEG_C_REFILLED_MICRO, amount);
    return credit_landed(s, seg_ident_generation(ident), amount, t, &landed) ==
                   0
               ? landed
               : 0;
}

int retryd__bucket_balance(seg_upstream *s, uint64_t ident,
                           const bucket_clock *clk, const bucket_tally *t,
                           uint64_t *ret_micro)
{
    int r;

    if (!bucket_ident_ok(s, ident))
        return RETRYD_ESTALE;
    r = refill(s, ident, clk, t);
    if (r < 0)
        return r;
    uint64_t word = atomic_load_explicit(&s->tokens, memory_order_acquire);
    if (!bucket_generation_ok(word, ident))
        return RETRYD_ESTALE;
    /* Below zero only by takes giving back, above the cap only by
     * deposits taking their overshoot back: read as 0 and as the cap. */
    int64_t bal = seg_token_balance(word);
    int64_t cap =
        (int64_t)atomic_load_explicit(&s->cap_micro, memory_order_relaxed);
    *ret_micro = bal <= 0 ? 0 : bal > cap ? (uint64_t)cap : (uint64_t)bal;
    return 0;
}

uint64_t retryd__bucket_projected_balance(seg_upstream *s, uint64_t now_ns)
{
    uint64_t word = atomic_load_explicit(&s->tokens, memory_order_acquire);
    uint64_t last =
        atomic_load_explicit(&s->last_refill_ns, memory_order_relaxed);
    int64_t cap =
        (int64_t)atomic_load_explicit(&s->cap_micro, memory_order_relaxed);
    /* As credit() would: the refill onto the signed balance, capped. Both
     * are below 2^47, so the sum cannot overflow. */
    int64_t bal =
        seg_token_balance(word) + (int64_t)refill_due(s, last, now_ns);
    if (bal > cap)
        bal = cap;
    return bal > 0 ? (uint64_t)bal : 0; /* < 0: takes giving back */
}

int retryd__bucket_peek(seg_upstream *s, uint64_t ident,
                        const bucket_clock *clk, const bucket_tally *t)
{
    if (!bucket_ident_ok(s, ident))
        return RETRYD_ESTALE;
    uint64_t word = atomic_load_explicit(&s->tokens, memory_order_acquire);
    if (!bucket_generation_ok(word, ident))
        return RETRYD_ESTALE;
    if (seg_token_balance(word) >= (int64_t)SEG_MICRO)
        return 1;
    uint64_t bal;
    int r = retryd__bucket_balance(s, ident, clk, t, &bal);
    return r < 0 ? r : bal >= SEG_MICRO;
}

/* How many times retryd__bucket_check() reads a balance above the cap
 * before it calls that damage. */
#define SETTLE_READS 64

/*
 * Whether the balance of @p word stays above the cap while deposits in
 * flight would have brought it back: they do within nanoseconds (their
 * addition and their compare-and-swap are a few instructions apart), so
 * a balance still above the cap after SETTLE_READS reads is damage, or a
 * lowered cap, not the steady state of a full bucket. A change of
 * generation meanwhile counts as staying: the caller's credit then finds
 * the slot retired.
 */
static bool stays_above_cap(seg_upstream *s, uint64_t word, uint64_t ident)
{
    for (int i = 0; i < SETTLE_READS; i++) {
        int64_t cap =
            (int64_t)atomic_load_explicit(&s->cap_micro, memory_order_relaxed);
        if (!bucket_generation_ok(word, ident))
            return true;
        if (seg_token_balance(word) <= cap)
            return false;
        word = atomic_load_explicit(&s->tokens, memory_order_acquire);
    }
    return true;
}

unsigned retryd__bucket_check(seg_upstream *s, uint64_t ident, uint64_t now_ns,
                              const bucket_tally *t)
{
    unsigned found = 0;
    uint64_t word = atomic_load_explicit(&s->tokens, memory_order_acquire);
    if (!bucket_generation_ok(word, ident) ||
        seg_token_balance(word) < -BUCKET_MAX_DIP_MICRO)
        return BUCKET_BROKEN;
    if (stays_above_cap(s, word, ident)) {
        if (credit(s, ident, 0, t) < 0)
            return BUCKET_BROKEN; /* retired meanwhile */
        found |= BUCKET_CLAMPED;
    }
    uint64_t last =
        atomic_load_explicit(&s->last_refill_ns, memory_order_relaxed);
    while (last > now_ns + NS_PER_S) {
        if (atomic_compare_exchange_weak_explicit(&s->last_refill_ns, &last,
                                                  now_ns, memory_order_acq_rel,
                                                  memory_order_relaxed)) {
            found |= BUCKET_REFILL_RESET;
            break;
        }
    }
    return found;
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
    /* Shares start unkept, with the default window and request share
     * (the daemon writes its configured ones after). */
    atomic_store_explicit(&s->claimed_micro, 0, memory_order_relaxed);
    atomic_store_explicit(&s->share_since_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&s->share_floor_until_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&s->share_window_ns, SEG_DEFAULT_SHARE_WINDOW_NS,
                          memory_order_relaxed);
    atomic_store_explicit(&s->request_share_micro,
                          SEG_DEFAULT_REQUEST_SHARE_MICRO,
                          memory_order_relaxed);
    atomic_store_explicit(&s->tokens, seg_token_word(generation, balance_micro),
                          memory_order_release);
}

/* SPDX-License-Identifier: MIT */
/*
 * Hedging on one slot: the hedge bucket, the latency histogram and the
 * picture (hedge.h; docs/hedging.md). The bucket keeps the retry bucket's
 * ledger exactly:
 *   balance = initial + deposits * ratio + refilled - sent - discarded
 * where sent is the hedges whose tokens were taken (a token given back
 * nets to nothing but what the cap discards), so the hedges the host sent
 * are bounded by what its hedgeable first attempts and the floor put in.
 */
#include "shared/hedge.h"

#include <math.h>
#include <string.h>

#include "retryd/common.h"

#define NS_PER_S UINT64_C(1000000000)
#define NS_PER_US UINT64_C(1000)

/* The picture word: the window's stamp (epoch + 1, 24 bits; 0 never),
 * the state (2 bits), the delay in microseconds (38 bits, 76 hours). */
#define PIC_STAMP_SHIFT 40
#define PIC_STAMP_MASK ((UINT64_C(1) << 24) - 1)
#define PIC_STATE_SHIFT 38
#define PIC_DELAY_MASK ((UINT64_C(1) << 38) - 1)

const hedge_params retryd__hedge_defaults = {
    .ratio_micro = SEG_MICRO / 50, /* 0.02 */
    .floor_micro_per_s = SEG_MICRO,
    .cap_micro = 10 * SEG_MICRO,
    .min_delay_ns = UINT64_C(1000000),
    .window_ns = NS_PER_S,
};

bool retryd__hedge_params_ok(const hedge_params *p)
{
    return p->ratio_micro <= HEDGE_MAX_RATIO_MICRO &&
           p->floor_micro_per_s <= SEG_MAX_FLOOR_MICRO &&
           p->cap_micro >= SEG_MICRO && p->cap_micro <= SEG_MAX_CAP_MICRO &&
           p->min_delay_ns <= HEDGE_MAX_MIN_DELAY_NS &&
           p->window_ns >= HEDGE_MIN_WINDOW_NS &&
           p->window_ns <= HEDGE_MAX_WINDOW_NS;
}

static void write_params(seg_hedge *h, const hedge_params *p)
{
    atomic_store_explicit(&h->ratio_micro, p->ratio_micro,
                          memory_order_relaxed);
    atomic_store_explicit(&h->floor_micro_per_s, p->floor_micro_per_s,
                          memory_order_relaxed);
    atomic_store_explicit(&h->cap_micro, p->cap_micro, memory_order_relaxed);
    atomic_store_explicit(&h->min_delay_ns, p->min_delay_ns,
                          memory_order_relaxed);
    atomic_store_explicit(&h->window_ns, p->window_ns, memory_order_release);
}

void retryd__hedge_params_of(seg_hedge *h, hedge_params *ret)
{
    *ret = (hedge_params){
        .ratio_micro =
            atomic_load_explicit(&h->ratio_micro, memory_order_relaxed),
        .floor_micro_per_s =
            atomic_load_explicit(&h->floor_micro_per_s, memory_order_relaxed),
        .cap_micro = atomic_load_explicit(&h->cap_micro, memory_order_relaxed),
        .min_delay_ns =
            atomic_load_explicit(&h->min_delay_ns, memory_order_relaxed),
        .window_ns = atomic_load_explicit(&h->window_ns, memory_order_relaxed),
    };
}

void retryd__hedge_init(seg_hedge *h, const hedge_params *p, uint64_t now_ns)
{
    /* The window goes to zero first: a process in between reads "no
     * picture" rather than one of the old parameters. */
    atomic_store_explicit(&h->window_ns, 0, memory_order_release);
    atomic_store_explicit(&h->picture, 0, memory_order_relaxed);
    atomic_store_explicit(&h->refresh_epoch, 0, memory_order_relaxed);
    for (unsigned c = 0; c < SEG_H_COUNTERS; c++)
        atomic_store_explicit(&h->counters[c], 0, memory_order_relaxed);
    for (unsigned b = 0; b < HEDGE_HIST_BUCKETS; b++)
        atomic_store_explicit(&h->latency[b], 0, memory_order_relaxed);
    uint64_t initial = p->floor_micro_per_s < p->cap_micro
                           ? p->floor_micro_per_s
                           : p->cap_micro;
    atomic_store_explicit(&h->tokens, HEDGE_BIAS + initial,
                          memory_order_relaxed);
    atomic_store_explicit(&h->last_refill_ns, now_ns, memory_order_relaxed);
    write_params(h, p);
}

/* --- the hedge bucket ---------------------------------------------------- */

/* Bring a balance above @p cap back to it, counting what that removes as
 * discarded; of several overshoots, each micro-token is removed (and
 * counted) once, by whichever exchange took it. */
static void clamp_to_cap(seg_hedge *h, int64_t cap)
{
    uint64_t cur = atomic_load_explicit(&h->tokens, memory_order_relaxed);
    while (hedge_balance_of(cur) > cap) {
        if (atomic_compare_exchange_weak_explicit(
                &h->tokens, &cur, HEDGE_BIAS + (uint64_t)cap,
                memory_order_acq_rel, memory_order_relaxed)) {
            hedge_count(h, SEG_H_DISCARDED_MICRO,
                        (uint64_t)(hedge_balance_of(cur) - cap));
            return;
        }
    }
}

void retryd__hedge_set_params(seg_hedge *h, const hedge_params *p)
{
    hedge_params have;
    retryd__hedge_params_of(h, &have);
    if (have.ratio_micro != p->ratio_micro ||
        have.min_delay_ns != p->min_delay_ns || have.window_ns != p->window_ns)
        atomic_store_explicit(&h->picture, 0, memory_order_relaxed);
    write_params(h, p);
    /* A lower cap binds at once, not at the next deposit: what was saved
     * under the old one is discarded (and counted so) rather than spent. */
    if (p->cap_micro < have.cap_micro)
        clamp_to_cap(h, (int64_t)p->cap_micro);
}

/* Add @p amount, then give back what went above the cap. */
static void credit(seg_hedge *h, uint64_t amount)
{
    int64_t cap =
        (int64_t)atomic_load_explicit(&h->cap_micro, memory_order_relaxed);
    uint64_t old =
        atomic_fetch_add_explicit(&h->tokens, amount, memory_order_acq_rel);
    if (hedge_balance_of(old) + (int64_t)amount > cap)
        clamp_to_cap(h, cap);
}

void retryd__hedge_deposit(seg_hedge *h)
{
    uint64_t ratio =
        atomic_load_explicit(&h->ratio_micro, memory_order_relaxed);
    int64_t cap =
        (int64_t)atomic_load_explicit(&h->cap_micro, memory_order_relaxed);
    hedge_count(h, SEG_H_DEPOSITS, 1);
    if (ratio == 0)
        return;
    /* A full bucket, the steady state of an upstream whose hedges are few:
     * read, not written, so its line stays shared between the cores. */
    uint64_t w = atomic_load_explicit(&h->tokens, memory_order_relaxed);
    if (hedge_balance_of(w) >= cap) {
        hedge_count(h, SEG_H_DISCARDED_MICRO, ratio);
        return;
    }
    credit(h, ratio);
}

/* The floor's refill due at @p now_ns, claimed (once per nanosecond
 * host-wide: the stamp's exchange) and credited. */
static void refill(seg_hedge *h, uint64_t now_ns)
{
    uint64_t floor =
        atomic_load_explicit(&h->floor_micro_per_s, memory_order_relaxed);
    uint64_t last =
        atomic_load_explicit(&h->last_refill_ns, memory_order_relaxed);
    if (floor == 0 || now_ns <= last)
        return;
    __extension__ typedef unsigned __int128 u128;
    u128 due = (u128)floor * (now_ns - last) / NS_PER_S;
    uint64_t amount =
        due > SEG_MAX_CAP_MICRO ? SEG_MAX_CAP_MICRO : (uint64_t)due;
    /* Less than a micro-token: leave the time to accumulate. */
    if (amount == 0 || !atomic_compare_exchange_strong_explicit(
                           &h->last_refill_ns, &last, now_ns,
                           memory_order_acq_rel, memory_order_relaxed))
        return;
    hedge_count(h, SEG_H_REFILLED_MICRO, amount);
    credit(h, amount);
}

/* One take: kept when the word held a whole token, else given back. */
static bool take_once(seg_hedge *h)
{
    uint64_t old =
        atomic_fetch_sub_explicit(&h->tokens, SEG_MICRO, memory_order_acq_rel);
    if (hedge_balance_of(old) >= (int64_t)SEG_MICRO)
        return true;
    /* Exactly what was taken: the word was below one token, so this
     * cannot lift it above the cap (a cap is at least one token). */
    atomic_fetch_add_explicit(&h->tokens, SEG_MICRO, memory_order_acq_rel);
    return false;
}

int retryd__hedge_take(seg_hedge *h, uint64_t now_ns)
{
    if (take_once(h))
        return 0;
    refill(h, now_ns);
    return take_once(h) ? 0 : RETRYD_EHEDGE;
}

void retryd__hedge_give_back(seg_hedge *h)
{
    credit(h, SEG_MICRO);
}

uint64_t retryd__hedge_balance(seg_hedge *h, uint64_t now_ns)
{
    refill(h, now_ns);
    int64_t bal = hedge_balance_of(
        atomic_load_explicit(&h->tokens, memory_order_relaxed));
    int64_t cap =
        (int64_t)atomic_load_explicit(&h->cap_micro, memory_order_relaxed);
    return bal < 0 ? 0 : bal > cap ? (uint64_t)cap : (uint64_t)bal;
}

uint64_t retryd__hedge_projected_balance(seg_hedge *h, uint64_t now_ns)
{
    int64_t bal = hedge_balance_of(
        atomic_load_explicit(&h->tokens, memory_order_relaxed));
    uint64_t floor =
        atomic_load_explicit(&h->floor_micro_per_s, memory_order_relaxed);
    uint64_t last =
        atomic_load_explicit(&h->last_refill_ns, memory_order_relaxed);
    int64_t cap =
        (int64_t)atomic_load_explicit(&h->cap_micro, memory_order_relaxed);
    if (now_ns > last && floor > 0) {
        __extension__ typedef unsigned __int128 u128;
        u128 due = (u128)floor * (now_ns - last) / NS_PER_S;
        bal +=
            due > SEG_MAX_CAP_MICRO ? (int64_t)SEG_MAX_CAP_MICRO : (int64_t)due;
    }
    if (bal > cap)
        bal = cap;
    return bal > 0 ? (uint64_t)bal : 0;
}

/* --- latency ------------------------------------------------------------- */

unsigned retryd__hedge_bucket_of(uint64_t latency_ns)
{
    uint64_t us = latency_ns / NS_PER_US;
    if (us < (UINT64_C(1) << HEDGE_HIST_MIN_LOG2))
        return 0;
    if (us >= (UINT64_C(1) << HEDGE_HIST_MAX_LOG2))
        return HEDGE_HIST_BUCKETS - 1;
    double octaves = log2((double)us) - HEDGE_HIST_MIN_LOG2;
    unsigned b = 1 + (unsigned)(octaves * HEDGE_HIST_PER_OCTAVE);
    /* A latency on an edge may round either way: either bucket's middle
     * is within the bound of it. */
    return b < HEDGE_HIST_BUCKETS - 1 ? b : HEDGE_HIST_BUCKETS - 2;
}

uint64_t retryd__hedge_bucket_mid_ns(unsigned bucket)
{
    if (bucket == 0)
        return (UINT64_C(1) << HEDGE_HIST_MIN_LOG2) * NS_PER_US;
    if (bucket >= HEDGE_HIST_BUCKETS - 1)
        return (UINT64_C(1) << HEDGE_HIST_MAX_LOG2) * NS_PER_US;
    double log2_us =
        HEDGE_HIST_MIN_LOG2 + ((double)bucket - 0.5) / HEDGE_HIST_PER_OCTAVE;
    return (uint64_t)llround(exp2(log2_us) * (double)NS_PER_US);
}

void retryd__hedge_observe(seg_hedge *h, uint64_t latency_ns, bool outlived)
{
    unsigned b =
        outlived ? HEDGE_HIST_BUCKETS - 1 : retryd__hedge_bucket_of(latency_ns);
    atomic_fetch_add_explicit(&h->latency[b], 1, memory_order_relaxed);
}

uint64_t retryd__hedge_pending_samples(seg_hedge *h)
{
    uint64_t n = 0;
    for (unsigned b = 0; b < HEDGE_HIST_BUCKETS; b++)
        n += atomic_load_explicit(&h->latency[b], memory_order_relaxed);
    return n;
}

uint64_t retryd__hedge_min_samples(uint64_t ratio_micro)
{
    if (ratio_micro == 0)
        return UINT64_MAX; /* no quantile short of the largest: none */
    uint64_t n = (2 * SEG_MICRO + ratio_micro - 1) / ratio_micro;
    return n < 20 ? 20 : n;
}

/* The bucket holding the sample of rank @p rank (1-based) of @p n. */
static unsigned bucket_of_rank(const uint32_t *counts, uint64_t rank)
{
    uint64_t seen = 0;
    for (unsigned b = 0; b < HEDGE_HIST_BUCKETS; b++) {
        seen += counts[b];
        if (seen >= rank)
            return b;
    }
    return HEDGE_HIST_BUCKETS - 1;
}

/* Samples in the buckets above @p bucket. */
static uint64_t beyond(const uint32_t *counts, unsigned bucket)
{
    uint64_t n = 0;
    for (unsigned b = bucket + 1; b < HEDGE_HIST_BUCKETS; b++)
        n += counts[b];
    return n;
}

void retryd__hedge_judge(const uint32_t counts[HEDGE_HIST_BUCKETS],
                         uint64_t ratio_micro, uint64_t min_delay_ns,
                         hedge_judgement *ret)
{
    *ret = (hedge_judgement){.state = HEDGE_PIC_NONE};
    for (unsigned b = 0; b < HEDGE_HIST_BUCKETS; b++)
        ret->samples += counts[b];
    uint64_t n = ret->samples;
    if (n < retryd__hedge_min_samples(ratio_micro))
        return;
    /* The rank of p(100 (1 - x)): the ceiling of n (1 - x). */
    __extension__ typedef unsigned __int128 u128;
    uint64_t rank =
        (uint64_t)(((u128)n * (SEG_MICRO - ratio_micro) + SEG_MICRO - 1) /
                   SEG_MICRO);
    unsigned q = bucket_of_rank(counts, rank ? rank : 1);
    unsigned m = bucket_of_rank(counts, (n + 1) / 2);
    /* Beyond the histogram's range (or most attempts outlived by a
     * hedge): nothing to place a delay on. */
    if (q == HEDGE_HIST_BUCKETS - 1 || m == HEDGE_HIST_BUCKETS - 1)
        return;
    ret->quantile_ns = retryd__hedge_bucket_mid_ns(q);
    ret->median_ns = retryd__hedge_bucket_mid_ns(m);
    ret->delay_ns =
        ret->quantile_ns > min_delay_ns ? ret->quantile_ns : min_delay_ns;
    ret->beyond_delay = beyond(counts, retryd__hedge_bucket_of(ret->delay_ns));
    ret->beyond_hedge =
        beyond(counts, retryd__hedge_bucket_of(ret->delay_ns + ret->median_ns));
    ret->state =
        ret->beyond_delay > 0 && 4 * ret->beyond_hedge >= ret->beyond_delay
            ? HEDGE_PIC_FRESH
            : HEDGE_PIC_NO_TAIL;
}

/* --- the picture --------------------------------------------------------- */

static uint64_t pic_stamp(uint64_t word)
{
    return word >> PIC_STAMP_SHIFT;
}

static enum hedge_pic pic_decode(uint64_t word, uint64_t *ret_delay_ns)
{
    unsigned state = (unsigned)(word >> PIC_STATE_SHIFT) & 3u;
    *ret_delay_ns = (word & PIC_DELAY_MASK) * NS_PER_US;
    if (state == HEDGE_PIC_FRESH || state == HEDGE_PIC_NO_TAIL)
        return (enum hedge_pic)state;
    *ret_delay_ns = 0;
    return HEDGE_PIC_NONE;
}

static uint64_t pic_encode(uint64_t epoch, const hedge_judgement *j)
{
    uint64_t us = j->state == HEDGE_PIC_NONE ? 0 : j->delay_ns / NS_PER_US;
    if (us > PIC_DELAY_MASK)
        us = PIC_DELAY_MASK;
    return ((epoch + 1) & PIC_STAMP_MASK) << PIC_STAMP_SHIFT |
           (uint64_t)j->state << PIC_STATE_SHIFT | us;
}

/* The refresh this caller claimed for window @p epoch: the histogram
 * swept, judged, published. */
static uint64_t refresh(seg_hedge *h, uint64_t epoch)
{
    uint32_t counts[HEDGE_HIST_BUCKETS];
    for (unsigned b = 0; b < HEDGE_HIST_BUCKETS; b++)
        counts[b] =
            atomic_load_explicit(&h->latency[b], memory_order_relaxed) == 0
                ? 0
                : atomic_exchange_explicit(&h->latency[b], 0,
                                           memory_order_relaxed);
    hedge_params p;
    hedge_judgement j;
    retryd__hedge_params_of(h, &p);
    retryd__hedge_judge(counts, p.ratio_micro, p.min_delay_ns, &j);
    uint64_t word = pic_encode(epoch, &j);
    atomic_store_explicit(&h->picture, word, memory_order_release);
    hedge_count(h, SEG_H_REFRESHES, 1);
    return word;
}

enum hedge_pic retryd__hedge_picture(seg_hedge *h, uint64_t now_ns,
                                     uint64_t *ret_delay_ns)
{
    *ret_delay_ns = 0;
    uint64_t window = atomic_load_explicit(&h->window_ns, memory_order_acquire);
    if (window == 0)
        return HEDGE_PIC_NONE; /* being written */
    uint64_t e = now_ns / window;
    uint64_t word = atomic_load_explicit(&h->picture, memory_order_acquire);
    if (pic_stamp(word) == ((e + 1) & PIC_STAMP_MASK))
        return pic_decode(word, ret_delay_ns);
    uint64_t claimed =
        atomic_load_explicit(&h->refresh_epoch, memory_order_relaxed);
    if (claimed != e + 1 && atomic_compare_exchange_strong_explicit(
                                &h->refresh_epoch, &claimed, e + 1,
                                memory_order_acq_rel, memory_order_relaxed))
        return pic_decode(refresh(h, e), ret_delay_ns);
    /* Another process is computing this window's: the last one's holds
     * meanwhile. */
    if (pic_stamp(word) == (e & PIC_STAMP_MASK) && e > 0)
        return pic_decode(word, ret_delay_ns);
    return HEDGE_PIC_NONE;
}

enum hedge_pic retryd__hedge_picture_peek(seg_hedge *h, uint64_t now_ns,
                                          uint64_t *ret_delay_ns,
                                          bool *ret_fresh)
{
    uint64_t window = atomic_load_explicit(&h->window_ns, memory_order_acquire);
    uint64_t word = atomic_load_explicit(&h->picture, memory_order_acquire);
    uint64_t e = window ? now_ns / window : 0;
    *ret_fresh = window != 0 && word != 0 &&
                 (pic_stamp(word) == ((e + 1) & PIC_STAMP_MASK) ||
                  pic_stamp(word) == (e & PIC_STAMP_MASK));
    return pic_decode(word, ret_delay_ns);
}

/* --- the daemon's policing ----------------------------------------------- */

static bool params_equal(const hedge_params *a, const hedge_params *b)
{
    return a->ratio_micro == b->ratio_micro &&
           a->floor_micro_per_s == b->floor_micro_per_s &&
           a->cap_micro == b->cap_micro && a->min_delay_ns == b->min_delay_ns &&
           a->window_ns == b->window_ns;
}

/* A picture word no refresh of window @p e (or before) could have
 * written with parameters @p p. */
static bool picture_forged(uint64_t word, uint64_t e, const hedge_params *p)
{
    if (word == 0)
        return false;
    uint64_t stamp = pic_stamp(word), now = (e + 1) & PIC_STAMP_MASK;
    /* Ahead of this window (modulo the stamp's wrap, half of it ahead). */
    uint64_t ahead = (stamp - now) & PIC_STAMP_MASK;
    if (ahead != 0 && ahead < PIC_STAMP_MASK / 2)
        return true;
    unsigned state = (unsigned)(word >> PIC_STATE_SHIFT) & 3u;
    if (state == 3)
        return true;
    uint64_t delay = (word & PIC_DELAY_MASK) * NS_PER_US;
    return state == HEDGE_PIC_FRESH &&
           delay + NS_PER_US <= p->min_delay_ns; /* the µs the word cut */
}

static unsigned check_picture(seg_hedge *h, uint64_t now_ns,
                              const hedge_params *p)
{
    uint64_t e = now_ns / p->window_ns;
    unsigned damage = 0;
    uint64_t word = atomic_load_explicit(&h->picture, memory_order_relaxed);
    if (picture_forged(word, e, p) &&
        atomic_compare_exchange_strong_explicit(
            &h->picture, &word, 0, memory_order_relaxed, memory_order_relaxed))
        damage |= HEDGE_PICTURE_RESET;
    uint64_t claim =
        atomic_load_explicit(&h->refresh_epoch, memory_order_relaxed);
    if (claim > e + 2 && atomic_compare_exchange_strong_explicit(
                             &h->refresh_epoch, &claim, 0, memory_order_relaxed,
                             memory_order_relaxed))
        damage |= HEDGE_PICTURE_RESET;
    return damage;
}

/* Deposits in flight may lift a balance above the cap by a deposit each
 * (a million of them, one per thread of every process, at most); takes in
 * flight may drive it below zero by a token each. Beyond either, no writer
 * could have left it. */
#define HEDGE_IN_FLIGHT (INT64_C(1) << 20)

static unsigned check_bucket(seg_hedge *h, uint64_t now_ns,
                             const hedge_params *p)
{
    unsigned damage = 0;
    uint64_t w = atomic_load_explicit(&h->tokens, memory_order_relaxed);
    int64_t bal = hedge_balance_of(w);
    int64_t over =
        (int64_t)p->ratio_micro * HEDGE_IN_FLIGHT + (int64_t)SEG_MICRO;
    int64_t target = bal > (int64_t)p->cap_micro + over ? (int64_t)p->cap_micro
                     : bal < -(int64_t)SEG_MICRO * HEDGE_IN_FLIGHT ? 0
                                                                   : bal;
    if (target != bal && atomic_compare_exchange_strong_explicit(
                             &h->tokens, &w, HEDGE_BIAS + (uint64_t)target,
                             memory_order_acq_rel, memory_order_relaxed))
        damage |= HEDGE_BUCKET_REPAIRED;
    uint64_t last =
        atomic_load_explicit(&h->last_refill_ns, memory_order_relaxed);
    if (last > now_ns + NS_PER_S &&
        atomic_compare_exchange_strong_explicit(&h->last_refill_ns, &last,
                                                now_ns, memory_order_relaxed,
                                                memory_order_relaxed))
        damage |= HEDGE_BUCKET_REPAIRED;
    return damage;
}

unsigned retryd__hedge_check(seg_hedge *h, uint64_t now_ns,
                             const hedge_params *want)
{
    unsigned damage = 0;
    hedge_params have;
    retryd__hedge_params_of(h, &have);
    if (!params_equal(&have, want)) {
        retryd__hedge_set_params(h, want);
        atomic_store_explicit(&h->picture, 0, memory_order_relaxed);
        damage |= HEDGE_PARAMS_RESET;
    }
    damage |= check_picture(h, now_ns, want);
    damage |= check_bucket(h, now_ns, want);
    return damage;
}

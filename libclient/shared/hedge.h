/* SPDX-License-Identifier: MIT */
/*
 * Hedging on one upstream slot (docs/hedging.md): the host hedge bucket,
 * the latency histogram and the latency picture computed from it. Lock-
 * free like the bucket and the health window, and like them the same code
 * runs on a shared slot and on a process-local one; the clock is an
 * argument, so tests drive time. hedge_layout.h has the fields.
 *
 * The hedge bucket is the retry bucket's arithmetic without its
 * generation and shares: a hedgeable first attempt deposits
 * max_extra_load, a hedge takes one whole token, a floor refills with time
 * (claimed by whoever finds less than a token), a cap bounds the balance.
 *
 * The picture: every hedgeable request adds the latency of each of its
 * rounds' first attempt to the histogram (one atomic addition; an attempt
 * a hedge answered before counts as longer than anything). Once a window,
 * the first process that needs the picture claims its refresh, sweeps the
 * histogram (an exchange per bucket: no addition is lost or counted
 * twice) and publishes one word: the delay, p(100 (1 - max_extra_load)),
 * or why there is none. A process killed in the middle of a refresh loses
 * that window's picture, nothing else.
 */
#ifndef RETRYD_HEDGE_H
#define RETRYD_HEDGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shared/segment.h"

/* The hedge parameters of one upstream (retryd.conf(5)). */
typedef struct hedge_params {
    uint64_t ratio_micro;       /* max_extra_load, per first attempt */
    uint64_t floor_micro_per_s; /* min_hedges_per_sec */
    uint64_t cap_micro;         /* hedge_cap */
    uint64_t min_delay_ns;      /* hedge_min_delay */
    uint64_t window_ns;         /* hedge_window: the picture's */
} hedge_params;

/* Limits of the parameters, for whoever accepts them. */
#define HEDGE_MAX_RATIO_MICRO SEG_MICRO
#define HEDGE_MIN_WINDOW_NS (UINT64_C(100) * 1000000)
#define HEDGE_MAX_WINDOW_NS (UINT64_C(3) * 1000000000)
#define HEDGE_MAX_MIN_DELAY_NS (UINT64_C(60) * 1000000000)

/* max_extra_load 0.02, a floor of 1 hedge a second, a cap of 10, a
 * minimum delay of 1 ms, a picture a second: what a slot nobody
 * configured gets, shared or local. */
extern const hedge_params retryd__hedge_defaults;

bool retryd__hedge_params_ok(const hedge_params *p);

/* Write @p p into @p h and start afresh: one second of floor in the
 * bucket (like a new retry bucket), no picture, no latency, counters at
 * zero. The daemon does it on a new shared slot, the library on a local
 * one. */
void retryd__hedge_init(seg_hedge *h, const hedge_params *p, uint64_t now_ns);

/* New parameters on a slot in use (a reload): the balance stays, except
 * that a lower cap binds at once (what it removes is counted discarded);
 * the picture is dropped when what it was computed with changed. */
void retryd__hedge_set_params(seg_hedge *h, const hedge_params *p);

void retryd__hedge_params_of(seg_hedge *h, hedge_params *ret);

/* --- the hedge bucket ---------------------------------------------------- */

/* The balance field holds HEDGE_BIAS + balance: takes in flight may drive
 * it below zero (each gives its token back), never below the bias. */
#define HEDGE_BIAS (UINT64_C(1) << 62)

static inline int64_t hedge_balance_of(uint64_t word)
{
    return (int64_t)(word - HEDGE_BIAS);
}

/* A hedgeable first attempt: deposit max_extra_load, capped. A full bucket
 * is only read. */
void retryd__hedge_deposit(seg_hedge *h);

/* One token for a hedge, all-or-nothing, claiming the floor's refill when
 * short: 0 or RETRYD_EHEDGE. */
int retryd__hedge_take(seg_hedge *h, uint64_t now_ns);

/* A token taken for a hedge that was not sent after all (the retry bucket
 * refused its part): credited back, capped. */
void retryd__hedge_give_back(seg_hedge *h);

/* The balance in micro-tokens, with the refill due at @p now_ns claimed:
 * within [0, cap] even while takes or deposits are in flight. */
uint64_t retryd__hedge_balance(seg_hedge *h, uint64_t now_ns);

/* The balance at @p now_ns in micro-tokens, the refill due foreseen but
 * not claimed: writes nothing (the daemon's stats call it). */
uint64_t retryd__hedge_projected_balance(seg_hedge *h, uint64_t now_ns);

/* --- latency and the picture --------------------------------------------- */

/* The histogram bucket of a latency; and the geometric middle of a
 * bucket, what the picture reports for a latency in it (the underflow
 * bucket reports its top, the overflow bucket its bottom). */
unsigned retryd__hedge_bucket_of(uint64_t latency_ns);
uint64_t retryd__hedge_bucket_mid_ns(unsigned bucket);

/* A round's first attempt ended after @p latency_ns; @p outlived: a
 * hedge answered before it (it counts as longer than anything). */
void retryd__hedge_observe(seg_hedge *h, uint64_t latency_ns, bool outlived);

enum hedge_pic {
    HEDGE_PIC_NONE = 0,    /* no picture: too few samples, or none yet */
    HEDGE_PIC_FRESH = 1,   /* the delay */
    HEDGE_PIC_NO_TAIL = 2, /* a hedge would not answer first */
};

/* What a histogram says (retryd__hedge_judge). */
typedef struct hedge_judgement {
    enum hedge_pic state;
    uint64_t samples;
    uint64_t quantile_ns; /* p(100 (1 - max_extra_load)); 0 for NONE */
    uint64_t delay_ns;    /* the quantile, at least the minimum delay */
    uint64_t median_ns;
    /* Samples beyond the delay, and beyond the delay and a median more:
     * the attempts a hedge would be sent for, and those it would answer
     * before (typically). */
    uint64_t beyond_delay, beyond_hedge;
} hedge_judgement;

/* Fewer attempts in a window than this give no picture: at least two
 * beyond the quantile, and 20. */
uint64_t retryd__hedge_min_samples(uint64_t ratio_micro);

/*
 * The picture a histogram gives (pure): the delay is the quantile of the
 * samples, at least @p min_delay_ns; NO_TAIL when fewer than a quarter of
 * the samples beyond the delay are also beyond the delay plus the median
 * (a hedge sent at the delay answers about a median later, so it would
 * rarely answer first: a slow upstream, not a slow minority).
 */
void retryd__hedge_judge(const uint32_t counts[HEDGE_HIST_BUCKETS],
                         uint64_t ratio_micro, uint64_t min_delay_ns,
                         hedge_judgement *ret);

/*
 * The picture at @p now_ns: HEDGE_PIC_FRESH with *ret_delay_ns, or why
 * not. A picture is this window's, or the last one's while this window's
 * is being computed; the first caller of a window without one claims its
 * refresh and computes it (sweeping the histogram).
 */
enum hedge_pic retryd__hedge_picture(seg_hedge *h, uint64_t now_ns,
                                     uint64_t *ret_delay_ns);

/* The same, read only: no refresh (the daemon's stats). *ret_fresh says
 * whether the word is this window's or the last one's. */
enum hedge_pic retryd__hedge_picture_peek(seg_hedge *h, uint64_t now_ns,
                                          uint64_t *ret_delay_ns,
                                          bool *ret_fresh);

/* Latency buckets summed, read only: the attempts since the last
 * refresh. */
uint64_t retryd__hedge_pending_samples(seg_hedge *h);

static inline void hedge_count(seg_hedge *h, enum seg_hedge_counter c,
                               uint64_t n)
{
    atomic_fetch_add_explicit(&h->counters[c], n, memory_order_relaxed);
}

/* What retryd__hedge_check() found. */
enum hedge_damage {
    HEDGE_PARAMS_RESET = 1,    /* parameters not the daemon's */
    HEDGE_PICTURE_RESET = 2,   /* a picture no refresh could publish */
    HEDGE_BUCKET_REPAIRED = 4, /* a balance beyond the cap, a stamp ahead */
};

/*
 * The daemon's policing of a slot's hedge block at @p now_ns: parameters
 * that are not @p want are rewritten; a picture stamped ahead of the
 * current window, of no known state, or with a delay under the minimum is
 * dropped (the next refresh computes one), as is a refresh claim ahead;
 * a balance beyond the cap and the deposits in flight is clamped to it,
 * one below any takes in flight reset to zero, a refill stamp more than a
 * second ahead brought to now. Safe while clients use the slot. A mask of
 * enum hedge_damage, 0 for sound.
 */
unsigned retryd__hedge_check(seg_hedge *h, uint64_t now_ns,
                             const hedge_params *want);

#endif /* RETRYD_HEDGE_H */

/* SPDX-License-Identifier: MIT */
/*
 * Hedging's block of an upstream slot (docs/hedging.md, docs/segment.md):
 * the host hedge bucket, the parameters and published latency picture,
 * the hedge counters and the latency histogram. Included by segment.h,
 * which puts one in every upstream slot since layout version 5, before
 * layout 6's fleet block; hedge.h has the arithmetic on it.
 */
#ifndef RETRYD_HEDGE_LAYOUT_H
#define RETRYD_HEDGE_LAYOUT_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

/*
 * The latency histogram: an underflow bucket (below HEDGE_HIST_MIN_US),
 * HEDGE_HIST_PER_OCTAVE buckets per doubling up to HEDGE_HIST_MAX_US, and
 * an overflow bucket, which also holds the attempts a hedge answered
 * before (their latency is unknown, and longer than the hedge's). Bucket
 * edges grow by 2^(1/18), so a bucket's geometric middle is within
 * 2^(1/36) - 1 = 1.94 % of any latency in it.
 */
#define HEDGE_HIST_PER_OCTAVE 18u
#define HEDGE_HIST_MIN_LOG2 7u  /* 128 us */
#define HEDGE_HIST_MAX_LOG2 24u /* 16.8 s */
#define HEDGE_HIST_BUCKETS                                                     \
    ((HEDGE_HIST_MAX_LOG2 - HEDGE_HIST_MIN_LOG2) * HEDGE_HIST_PER_OCTAVE + 2u)

/* The hedge counters, per upstream slot (atomic additions: hedges are a
 * few per cent of the attempts at most). */
enum seg_hedge_counter {
    SEG_H_SENT = 0, /* hedges sent */
    SEG_H_WON = 1,  /* hedges that answered their request first */
    /* Hedges due but refused, by reason (docs/hedging.md). */
    SEG_H_REFUSED_HEDGE_BUDGET = 2,
    SEG_H_REFUSED_RETRY_BUDGET = 3, /* the retry bucket, its shares too */
    SEG_H_REFUSED_THROTTLED = 4,
    SEG_H_REFUSED_PUSHBACK = 5,
    SEG_H_REFUSED_DEADLINE = 6,
    SEG_H_REFUSED_DRAINING = 7,
    /* The hedge bucket's ledger: hedgeable first attempts that deposited,
     * micro-tokens the floor refilled and the cap discarded. */
    SEG_H_DEPOSITS = 8,
    SEG_H_REFILLED_MICRO = 9,
    SEG_H_DISCARDED_MICRO = 10,
    SEG_H_REFRESHES = 11, /* latency pictures computed */
    SEG_H_COUNTERS = 16,  /* 12..15 reserved for growth within a layout */
};

typedef struct seg_hedge {
    /* The host hedge bucket: HEDGE_BIAS + balance, in micro-tokens, and
     * the floor's refill stamp. Every hedgeable first attempt deposits and
     * every hedge takes: its own line. */
    alignas(64) _Atomic uint64_t tokens;
    _Atomic uint64_t last_refill_ns;
    /* Parameters, written by the daemon; the published latency picture
     * (hedge.h: stamp | state | delay), written once a window by the
     * process that claimed its refresh. Read by every hedgeable attempt. */
    alignas(64) _Atomic uint64_t ratio_micro; /* max_extra_load */
    _Atomic uint64_t floor_micro_per_s;       /* min_hedges_per_sec */
    _Atomic uint64_t cap_micro;
    _Atomic uint64_t min_delay_ns;
    _Atomic uint64_t window_ns;
    _Atomic uint64_t picture;
    _Atomic uint64_t refresh_epoch; /* epoch + 1 of the refresh claimed */
    alignas(64) _Atomic uint64_t counters[SEG_H_COUNTERS];
    /* Attempts ended since the last refresh, by latency bucket: added to
     * by every hedgeable request, swept by each refresh. */
    alignas(64) _Atomic uint32_t latency[HEDGE_HIST_BUCKETS];
} seg_hedge;

#endif /* RETRYD_HEDGE_LAYOUT_H */

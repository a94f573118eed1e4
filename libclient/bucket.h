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

#include "segment.h"

/* Where an operation counts what it did: SEG_COUNTERS counters, written
 * with plain stores when the caller's thread owns them exclusively, with
 * atomic additions otherwise. */
typedef struct bucket_tally {
    _Atomic uint64_t *counters;
    bool exclusive;
} bucket_tally;

/* A clock in nanoseconds; read only when a refill may be due. */
typedef struct bucket_clock {
    uint64_t (*now)(void *ctx);
    void *ctx;
} bucket_clock;

/* The real clock: CLOCK_MONOTONIC_COARSE. A few nanoseconds to read (vDSO),
 * ticking every 1-4 ms, far finer than any floor needs. */
extern const bucket_clock retryd__coarse_clock;
uint64_t retryd__clock_coarse_ns(void);

/*
 * A first attempt: deposit the slot's ratio, capped. 0, or RETRYD_ESTALE
 * when the slot's ident is no longer @p ident.
 */
int retryd__bucket_deposit(seg_upstream *s, uint64_t ident,
                           const bucket_tally *t);

/* A retry: take one token. 0, RETRYD_EBUDGET, or RETRYD_ESTALE. */
int retryd__bucket_withdraw(seg_upstream *s, uint64_t ident,
                            const bucket_clock *clk, const bucket_tally *t);

/* 1 when at least one token is there, 0 when not, or RETRYD_ESTALE. */
int retryd__bucket_peek(seg_upstream *s, uint64_t ident,
                        const bucket_clock *clk, const bucket_tally *t);

/* The balance in micro-tokens, with the refill due now claimed. */
int retryd__bucket_balance(seg_upstream *s, uint64_t ident,
                           const bucket_clock *clk, const bucket_tally *t,
                           uint64_t *ret_micro);

/* Initialise a slot's bucket: parameters, balance, refill clock. The daemon
 * does it on a shared slot, the library on a local one. */
void retryd__bucket_init(seg_upstream *s, uint32_t generation,
                         uint64_t ratio_micro, uint64_t floor_micro_per_s,
                         uint64_t cap_micro, uint64_t balance_micro,
                         uint64_t now_ns);

#endif /* RETRYD_BUCKET_H */

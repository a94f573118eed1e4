/* SPDX-License-Identifier: MIT */
/*
 * The daemon's part in fair shares (docs/budget.md#fair-shares), once per
 * heartbeat: it ends the shares of a bucket a window after its last
 * shortage, decays every claim over the window, gives each process its
 * share factor from the weights of [program NAME], hands out the floor's
 * refill as claims by weight while shares are kept, and puts back a sum
 * of claims that a peer rewrote. The clients do the rest, in the segment.
 */
#ifndef RETRYD_SHARES_H
#define RETRYD_SHARES_H

#include <stdint.h>

#include "core/config.h"
#include "segment/owner.h"

/* One sweep at @p now_ns (the coarse clock) with the weights of @p c.
 * Main thread. Returns how many sums of claims it had to put back. */
unsigned owner_shares_sweep(owner *o, const config *c, uint64_t now_ns);

/* The process in @p slot is gone: its claims leave the sums now, so its
 * unused entitlement returns to the pool. Called by
 * owner_process_release() before the slot is zeroed. */
void owner_shares_release(owner *o, uint32_t slot);

/* Free the sweep's state (owner_close). */
void owner_shares_free(owner *o);

#endif

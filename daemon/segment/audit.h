/* SPDX-License-Identifier: MIT */
/*
 * The ledger audit (docs/segment.md, "The ledger audit"), once per
 * heartbeat: every balance and refill stamp is checked against what the
 * ledgers explain. The ledgers are the counters: per upstream its own
 * (exited processes, overflow, the daemon's floor hand-outs) plus each
 * attached process's entries for it; between two heartbeats the balance
 * moves by exactly ratio x deposits + refilled - granted - discarded, and
 * the floor pays at most floor x the time its refill stamp advanced. What
 * a process wrote without counting (a balance held at the cap, a stamp
 * set back) does not add up: it is taken back from the balance as far as
 * the balance still holds it, counted, logged (rate-limited) and shown in
 * the stats, naming the process slot whose ledger does not match where
 * one does.
 */
#ifndef RETRYD_AUDIT_H
#define RETRYD_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "segment/owner.h"

/* The audit's state, made with the segment's owner (owner_open), before
 * the stats thread that reads its last finding starts. 0 or
 * RETRYD_ENOMEM. */
int owner_audit_open(owner *o);

/* One audit at @p now_ns (the coarse clock). Main thread, after the
 * heartbeat's policing, before its fair-share sweep (which claims the
 * floor: a stamp set back is put forward first). Each finding is counted
 * with owner_found(). */
void owner_audit(owner *o, uint64_t now_ns);

/* Upstream slot @p slot was just given out with @p balance micro-tokens
 * and counters at zero at @p now_ns: the audit's base is exact from the
 * start, so that even a scribble before the first heartbeat is seen. */
void owner_audit_fresh(owner *o, uint32_t slot, uint64_t balance,
                       uint64_t now_ns);

/* The last finding, a line naming the upstream and, where one is to
 * blame, the process slot ("" before any); any thread. */
void owner_audit_last(const owner *o, char *buf, size_t len);

/* Free the audit's state (owner_close). */
void owner_audit_free(owner *o);

#endif

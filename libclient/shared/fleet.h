/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier on one slot (docs/fleet.md): the block the daemon writes
 * from what the fleet's Redis says (shared/fleet_layout.h), what clients
 * make of it, and the fleet's share arithmetic.
 *
 * The arithmetic is a pure function of counts (no clock, no segment, no
 * I/O), so that the daemon and a simulator of a fleet run the same
 * figures: each host's floor is its share of the fleet's floor F, by its
 * share of the fleet's first attempts in a window, or an equal split among
 * the hosts when the window saw none. The shares of every host that read
 * the same window add up to 1, so the fleet's floor retries add up to F,
 * however many hosts there are.
 */
#ifndef RETRYD_FLEET_H
#define RETRYD_FLEET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shared/health.h"
#include "shared/segment.h"

/* The longest sync interval a configuration may set; a view is never in
 * force longer than two of them past its sync, so a valid_until further
 * ahead than that (a neighbour's scribble) is no view at all. */
#define FLEET_MAX_INTERVAL_NS (UINT64_C(60) * 1000000000)
#define FLEET_MAX_VALID_NS (2 * FLEET_MAX_INTERVAL_NS)
/* Counts read from another host are taken up to this (2^40): beyond it
 * they are damage, and the arithmetic must not overflow on them. */
#define FLEET_COUNT_MAX (UINT64_C(1) << 40)
/* A share in millionths. */
#define FLEET_PPM UINT64_C(1000000)

/*
 * The floor, in micro-tokens per second, of one host when the fleet's is
 * @p fleet_floor_micro: @p fleet_floor_micro x @p own / @p total, the
 * host's share of the fleet's @p total first attempts in the window; when
 * the window saw none, an equal split among @p hosts (the hosts that took
 * part in it). A host that is alone (@p hosts 0 or 1, no traffic) gets
 * the whole floor. @p own above @p total (figures read at different
 * moments) counts as @p total. Pure: the daemon and a simulator call it
 * alike.
 */
uint64_t retryd__fleet_floor_share(uint64_t fleet_floor_micro, uint64_t own,
                                   uint64_t total, uint64_t hosts);

/* The same share in millionths (FLEET_PPM is the whole floor). */
uint64_t retryd__fleet_share_ppm(uint64_t own, uint64_t total, uint64_t hosts);

/* A seg_fleet's words as values: what the daemon writes, and its copy. */
typedef struct fleet_view {
    uint64_t valid_until_ns, flags, floor_micro_per_s;
    uint64_t requests, accepts, rejecters;
    uint64_t pushback_until_ns, synced_ns;
    uint64_t fleet_floor_micro_per_s, share_ppm, hosts;
    uint64_t first_attempts, own_first_attempts, retries_granted;
    uint64_t window_ms;
} fleet_view;

/* Write @p v into @p f: valid_until_ns goes to 0 first and to its value
 * last, so a client never applies half of a new view as if it were
 * whole for longer than the writes take. The daemon's. */
void retryd__fleet_store(seg_fleet *f, const fleet_view *v);

/* What @p f holds now. */
void retryd__fleet_load(seg_fleet *f, fleet_view *ret);

/* Whether a view valid until @p valid_until_ns is current at @p now_ns:
 * not lapsed, and never further ahead than a view can be (a scribbled
 * deadline is no view). Whether @p f's view applies @p flag: the daemon
 * said so, and its view is current. */
static inline bool retryd__fleet_current(uint64_t valid_until_ns,
                                         uint64_t now_ns)
{
    return now_ns < valid_until_ns &&
           valid_until_ns - now_ns <= FLEET_MAX_VALID_NS;
}

static inline bool retryd__fleet_in_force(seg_fleet *f, uint64_t flag,
                                          uint64_t now_ns)
{
    if (!(atomic_load_explicit(&f->flags, memory_order_relaxed) & flag))
        return false;
    return retryd__fleet_current(
        atomic_load_explicit(&f->valid_until_ns, memory_order_acquire), now_ns);
}

/*
 * The floor refill of slot @p s at @p now_ns, micro-tokens per second:
 * the host's share of the fleet floor while a fleet view applies one,
 * else the slot's own (min_retries_per_sec, the host-only budget).
 */
static inline uint64_t retryd__fleet_floor(seg_upstream *s, uint64_t now_ns)
{
    if (retryd__fleet_in_force(&s->fleet, SEG_FLEET_FLOOR, now_ns)) {
        uint64_t f = atomic_load_explicit(&s->fleet.floor_micro_per_s,
                                          memory_order_relaxed);
        return f < SEG_MAX_FLOOR_MICRO ? f : SEG_MAX_FLOOR_MICRO;
    }
    return atomic_load_explicit(&s->floor_micro_per_s, memory_order_relaxed);
}

/*
 * The throttle's window of slot @p s at @p now_ns as the host's
 * admissions see it: retryd__health_view() (this host's processes), plus,
 * while a fleet view applies SEG_FLEET_HEALTH, the other hosts' requests,
 * accepts and rejecting processes, with the quorum and the probability
 * computed over the sum. Reads only.
 */
void retryd__health_view_fleet(seg_upstream *s, uint64_t now_ns,
                               health_view *ret);

#endif /* RETRYD_FLEET_H */

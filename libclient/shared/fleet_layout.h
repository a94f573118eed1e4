/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier's block of an upstream slot (docs/fleet.md): what the
 * daemon learned from the fleet's Redis about one upstream, for the
 * clients' arithmetic, and what the daemon's statistics show of it.
 * Included by shared/segment.h alone, inside its layout (layout 6);
 * shared/fleet.h has the functions that read and write it.
 *
 * Only the daemon writes it, from its fleet wing; clients read the first
 * line on the slow paths only (a floor refill, the throttle's sum once
 * per tick), never on a deposit, a withdrawal or an admission's fast
 * path. A view is in force until valid_until_ns: the daemon extends it at
 * each sync with the fleet, so a view nobody renews (Redis gone, the
 * daemon stopped or stuck) lapses by itself and every client is back on
 * its host's own figures within two sync intervals. Every word is
 * policed like the rest of the slot: the daemon keeps a copy and puts
 * back what a neighbour changes.
 */
#ifndef RETRYD_FLEET_LAYOUT_H
#define RETRYD_FLEET_LAYOUT_H

#ifndef SEG_LINE
#error "shared/fleet_layout.h is part of shared/segment.h's layout"
#endif

/* What a view applies (seg_fleet.flags). */
#define SEG_FLEET_FLOOR 0x1u    /* the host's share of the fleet floor */
#define SEG_FLEET_HEALTH 0x2u   /* the throttle adds other hosts' R and A */
#define SEG_FLEET_PUSHBACK 0x4u /* other hosts' holds hold this host */
#define SEG_FLEET_FLAGS_ALL 0x7u

typedef struct seg_fleet {
    /* What the clients read. */
    alignas(SEG_LINE) _Atomic uint64_t valid_until_ns; /* coarse; 0 none */
    _Atomic uint64_t flags;                            /* SEG_FLEET_* */
    _Atomic uint64_t floor_micro_per_s; /* the host's share of the floor */
    /* The other hosts' throttle windows: requests, accepts, and the
     * processes with a rejection in them. */
    _Atomic uint64_t requests;
    _Atomic uint64_t accepts;
    _Atomic uint64_t rejecters;
    /* The fleet's hold as this host last wrote it into pushback_until_ns
     * (coarse ns; 0 none): what the daemon must not publish as its own. */
    _Atomic uint64_t pushback_until_ns;
    _Atomic uint64_t synced_ns; /* when the view was taken (coarse) */
    /* What the daemon's statistics show (clients never read it). */
    alignas(SEG_LINE) _Atomic uint64_t fleet_floor_micro_per_s; /* F */
    _Atomic uint64_t share_ppm; /* the host's share of F, millionths */
    _Atomic uint64_t hosts;     /* in the fleet's last complete interval */
    /* First attempts and retries granted in the share window: the
     * fleet's, and this host's own first attempts. */
    _Atomic uint64_t first_attempts;
    _Atomic uint64_t own_first_attempts;
    _Atomic uint64_t retries_granted;
    _Atomic uint64_t window_ms; /* the share window */
    _Atomic uint64_t reserved;
} seg_fleet;

#endif /* RETRYD_FLEET_LAYOUT_H */

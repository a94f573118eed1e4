/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier's block of each upstream slot (fleet_slots.h). Only the
 * main thread writes it; what a neighbour writes there is put back at the
 * next heartbeat, so a scribbled floor, window or validity lasts at most
 * a second (and a validity beyond any a view can have is ignored by every
 * reader before that: shared/fleet.h).
 */
#include "segment/fleet_slots.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "retryd/common.h"

int owner_fleet_open(owner *o)
{
    o->fleet = calloc(o->view.upstream_capacity, sizeof(*o->fleet));
    if (o->fleet == NULL)
        return RETRYD_ENOMEM;
    const fleet_view none = {0};
    for (uint32_t i = 0; i < o->view.upstream_capacity; i++)
        retryd__fleet_store(&o->view.upstreams[i].fleet, &none);
    return 0;
}

void owner_fleet_free(owner *o)
{
    free(o->fleet);
    o->fleet = NULL;
}

/* Slot @p slot, when the daemon holds it ACTIVE in generation @p gen. */
static seg_upstream *active_slot(owner *o, uint32_t slot, uint32_t gen)
{
    seg_upstream *s = retryd__segment_upstream(&o->view, slot);
    if (s == NULL || o->fleet == NULL)
        return NULL;
    uint64_t id = o->slots[slot].ident; /* ours: the segment's may lie */
    return seg_ident_state(id) == SEG_ACTIVE && seg_ident_generation(id) == gen
               ? s
               : NULL;
}

void owner_fleet_write(owner *o, uint32_t slot, uint32_t gen,
                       const fleet_view *v)
{
    seg_upstream *s = active_slot(o, slot, gen);
    if (s == NULL)
        return;
    o->fleet[slot].copy = *v;
    if ((v->flags & SEG_FLEET_FLOOR) &&
        v->floor_micro_per_s > o->fleet[slot].floor_seen)
        o->fleet[slot].floor_seen = v->floor_micro_per_s;
    retryd__fleet_store(&s->fleet, v);
}

void owner_fleet_clear(owner *o, uint32_t slot)
{
    seg_upstream *s = retryd__segment_upstream(&o->view, slot);
    if (s == NULL || o->fleet == NULL)
        return;
    memset(&o->fleet[slot].copy, 0, sizeof(o->fleet[slot].copy));
    retryd__fleet_store(&s->fleet, &o->fleet[slot].copy);
}

void owner_fleet_forget(owner *o, uint32_t slot)
{
    owner_fleet_clear(o, slot);
    if (o->fleet != NULL && slot < o->view.upstream_capacity)
        atomic_store_explicit(&o->fleet[slot].hold_written, 0,
                              memory_order_relaxed);
}

void owner_fleet_hold(owner *o, uint32_t slot, uint32_t gen, uint64_t until_ns)
{
    seg_upstream *s = active_slot(o, slot, gen);
    if (s == NULL || !(o->slots[slot].params.pushback))
        return;
    uint64_t now = retryd__clock_coarse_ns();
    uint64_t max = o->slots[slot].params.pushback_max_ns;
    if (until_ns <= now)
        return;
    if (until_ns - now > max)
        until_ns = now + max;
    /* Remembered before it is written: the fleet thread, reading the
     * slot in between, must not take it for a hold of this host's. */
    atomic_store_explicit(&o->fleet[slot].hold_written, until_ns,
                          memory_order_release);
    uint64_t old =
        atomic_load_explicit(&s->pushback_until_ns, memory_order_relaxed);
    while (old < until_ns && !atomic_compare_exchange_weak_explicit(
                                 &s->pushback_until_ns, &old, until_ns,
                                 memory_order_relaxed, memory_order_relaxed))
        ;
}

uint64_t owner_fleet_hold_written(const owner *o, uint32_t slot)
{
    if (o->fleet == NULL || slot >= o->view.upstream_capacity)
        return 0;
    owner_fleet *f = (owner_fleet *)(uintptr_t)&o->fleet[slot]; /* atomics */
    return atomic_load_explicit(&f->hold_written, memory_order_acquire);
}

bool owner_fleet_police(owner *o, uint32_t slot)
{
    seg_upstream *s = retryd__segment_upstream(&o->view, slot);
    if (s == NULL || o->fleet == NULL)
        return false;
    fleet_view have;
    retryd__fleet_load(&s->fleet, &have);
    if (memcmp(&have, &o->fleet[slot].copy, sizeof(have)) == 0 &&
        atomic_load_explicit(&s->fleet.reserved, memory_order_relaxed) == 0)
        return false;
    retryd__fleet_store(&s->fleet, &o->fleet[slot].copy);
    return true;
}

/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier on one slot (fleet.h): the share arithmetic, and the
 * block's reads and writes.
 */
#include "shared/fleet.h"

_Static_assert(offsetof(seg_upstream, fleet) % SEG_LINE == 0,
               "the fleet block starts on its own line");
_Static_assert(sizeof(seg_fleet) == 2 * SEG_LINE,
               "the fleet block is two lines: the clients' and the stats'");

__extension__ typedef unsigned __int128 fleet_u128;

uint64_t retryd__fleet_floor_share(uint64_t fleet_floor_micro, uint64_t own,
                                   uint64_t total, uint64_t hosts)
{
    if (total == 0)
        return hosts > 1 ? fleet_floor_micro / hosts : fleet_floor_micro;
    if (own > total)
        own = total;
    /* At most F: the product fits 128 bits, the quotient 64. */
    return (uint64_t)((fleet_u128)fleet_floor_micro * own / total);
}

uint64_t retryd__fleet_share_ppm(uint64_t own, uint64_t total, uint64_t hosts)
{
    return retryd__fleet_floor_share(FLEET_PPM, own, total, hosts);
}

void retryd__fleet_store(seg_fleet *f, const fleet_view *v)
{
    atomic_store_explicit(&f->valid_until_ns, 0, memory_order_release);
    atomic_store_explicit(&f->flags, v->flags, memory_order_relaxed);
    atomic_store_explicit(&f->floor_micro_per_s, v->floor_micro_per_s,
                          memory_order_relaxed);
    atomic_store_explicit(&f->requests, v->requests, memory_order_relaxed);
    atomic_store_explicit(&f->accepts, v->accepts, memory_order_relaxed);
    atomic_store_explicit(&f->rejecters, v->rejecters, memory_order_relaxed);
    atomic_store_explicit(&f->pushback_until_ns, v->pushback_until_ns,
                          memory_order_relaxed);
    atomic_store_explicit(&f->synced_ns, v->synced_ns, memory_order_relaxed);
    atomic_store_explicit(&f->fleet_floor_micro_per_s,
                          v->fleet_floor_micro_per_s, memory_order_relaxed);
    atomic_store_explicit(&f->share_ppm, v->share_ppm, memory_order_relaxed);
    atomic_store_explicit(&f->hosts, v->hosts, memory_order_relaxed);
    atomic_store_explicit(&f->first_attempts, v->first_attempts,
                          memory_order_relaxed);
    atomic_store_explicit(&f->own_first_attempts, v->own_first_attempts,
                          memory_order_relaxed);
    atomic_store_explicit(&f->retries_granted, v->retries_granted,
                          memory_order_relaxed);
    atomic_store_explicit(&f->window_ms, v->window_ms, memory_order_relaxed);
    atomic_store_explicit(&f->reserved, 0, memory_order_relaxed);
    atomic_store_explicit(&f->valid_until_ns, v->valid_until_ns,
                          memory_order_release);
}

void retryd__fleet_load(seg_fleet *f, fleet_view *ret)
{
#define L(w) atomic_load_explicit(&f->w, memory_order_relaxed)
    *ret = (fleet_view){
        .valid_until_ns = L(valid_until_ns),
        .flags = L(flags),
        .floor_micro_per_s = L(floor_micro_per_s),
        .requests = L(requests),
        .accepts = L(accepts),
        .rejecters = L(rejecters),
        .pushback_until_ns = L(pushback_until_ns),
        .synced_ns = L(synced_ns),
        .fleet_floor_micro_per_s = L(fleet_floor_micro_per_s),
        .share_ppm = L(share_ppm),
        .hosts = L(hosts),
        .first_attempts = L(first_attempts),
        .own_first_attempts = L(own_first_attempts),
        .retries_granted = L(retries_granted),
        .window_ms = L(window_ms),
    };
#undef L
}

/* A count read from the block, no larger than FLEET_COUNT_MAX. */
static uint64_t bounded(_Atomic uint64_t *w)
{
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    return v < FLEET_COUNT_MAX ? v : FLEET_COUNT_MAX;
}

void retryd__health_view_fleet(seg_upstream *s, uint64_t now_ns,
                               health_view *ret)
{
    retryd__health_view(s, now_ns, ret);
    if (!(atomic_load_explicit(&s->health_flags, memory_order_relaxed) &
          SEG_HEALTH_THROTTLE) ||
        health_slot_ns(s) == 0 ||
        !retryd__fleet_in_force(&s->fleet, SEG_FLEET_HEALTH, now_ns))
        return;
    uint64_t r = bounded(&s->fleet.requests), a = bounded(&s->fleet.accepts);
    ret->requests += r;
    ret->accepts += a < r ? a : r; /* never more accepts than requests */
    ret->rejecters += bounded(&s->fleet.rejecters);
    health_view_judge(s, ret);
}

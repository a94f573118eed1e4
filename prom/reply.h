/* SPDX-License-Identifier: MIT */
/*
 * Reading a stats reply the same way in every view of it: the Prometheus
 * renderer, `retrydctl stats` (table and JSON) and `retrydctl top`. A
 * reply from an older daemon may carry shorter arrays or no segment
 * health; these read what is missing as zero.
 */
#ifndef RETRYD_PROM_REPLY_H
#define RETRYD_PROM_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "retryd.pb-c.h"

/* Micro-tokens (the wire's unit) to tokens. */
static inline double reply_tokens(uint64_t micro)
{
    return (double)micro / 1e6;
}

/* v[i], or 0 when the array is shorter (an older daemon). */
static inline uint64_t reply_at(const uint64_t *v, size_t n, size_t i)
{
    return i < n ? v[i] : 0;
}

/* Retries denied, every reason together (index 0 is unused). */
static inline uint64_t reply_denied_total(const Retryd__Counters *c)
{
    uint64_t sum = 0;
    for (size_t i = 1; i < c->n_denied; i++)
        sum += c->denied[i];
    return sum;
}

/* An upstream's health, or all zero for a reply from an older daemon
 * (throttle and pushback read as off). */
static inline const Retryd__UpstreamHealth *
reply_upstream_health(const Retryd__UpstreamStats *u)
{
    static const Retryd__UpstreamHealth none = RETRYD__UPSTREAM_HEALTH__INIT;
    return u->health ? u->health : &none;
}

/* An upstream's hedging, or all zero for a reply from an older daemon
 * (picture "none"). */
static inline const Retryd__UpstreamHedge *
reply_upstream_hedge(const Retryd__UpstreamStats *u)
{
    /* Zero, not the INIT macro (whose empty string is cast from const):
     * never packed, only read; its picture reads as "none". */
    static const Retryd__UpstreamHedge none;
    return u->hedge ? u->hedge : &none;
}

/* The picture's state, "none" when absent. */
static inline const char *reply_hedge_picture(const Retryd__UpstreamHedge *h)
{
    return h->picture && *h->picture ? h->picture : "none";
}

/* Hedges refused, every reason together. */
static inline uint64_t reply_hedges_refused(const Retryd__UpstreamHedge *h)
{
    return h->refused_hedge_budget + h->refused_retry_budget +
           h->refused_throttled + h->refused_pushback + h->refused_deadline +
           h->refused_draining;
}

/* The segment damage counts, named as in JSON and as Prometheus's kind
 * label, in the order every view prints them. */
typedef struct reply_health_item {
    const char *name;
    uint64_t n;
} reply_health_item;

#define REPLY_HEALTH_KINDS 16

static inline void reply_health_items(const Retryd__StatsReply *r,
                                      reply_health_item out[REPLY_HEALTH_KINDS])
{
    static const Retryd__SegmentHealth none; /* all zero: no damage */
    const Retryd__SegmentHealth *h =
        r->segment_health ? r->segment_health : &none;
    const reply_health_item items[REPLY_HEALTH_KINDS] = {
        {"header_repaired", h->header_repaired},
        {"slot_ident_repaired", h->slot_ident_repaired},
        {"params_reset", h->params_reset},
        {"balance_clamped", h->balance_clamped},
        {"refill_reset", h->refill_reset},
        {"slots_retired", h->slots_retired},
        {"forged_slots", h->forged_slots},
        {"process_repaired", h->process_repaired},
        {"health_repaired", h->health_repaired},
        {"shares_repaired", h->shares_repaired},
        {"freed_slot_writes", h->freed_slot_writes},
        {"balance_unexplained", h->balance_unexplained},
        {"refill_unexplained", h->refill_unexplained},
        {"ledger_rewritten", h->ledger_rewritten},
        {"hedge_repaired", h->hedge_repaired},
        {"fleet_repaired", h->fleet_repaired},
    };
    for (size_t i = 0; i < REPLY_HEALTH_KINDS; i++)
        out[i] = items[i];
}

/* Heartbeats that checked the segment, and the damage they found. */
static inline uint64_t reply_health_checks(const Retryd__StatsReply *r)
{
    return r->segment_health ? r->segment_health->checks : 0;
}

static inline uint64_t reply_damage_total(const Retryd__StatsReply *r)
{
    reply_health_item it[REPLY_HEALTH_KINDS];
    uint64_t sum = 0;
    reply_health_items(r, it);
    for (size_t i = 0; i < REPLY_HEALTH_KINDS; i++)
        sum += it[i].n;
    return sum;
}

#endif

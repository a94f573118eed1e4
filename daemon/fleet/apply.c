/* SPDX-License-Identifier: MIT */
/*
 * The main thread's half of the fleet wing (fleet.h): a sync's outcome
 * written into the slots' fleet blocks through the segment's owner. A view
 * is in force until two intervals after the sync it came from, so the
 * next sync renews it, and one that does not come lets it lapse by itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "core/log.h"
#include "fleet/fleet.h"
#include "fleet/state.h"
#include "segment/fleet_slots.h"

#define NS_PER_MS UINT64_C(1000000)

/* The fleet's hold on @p r's upstream, as this host's monotonic deadline,
 * or 0: the hold is in the fleet's clock (unix ms), the slot in this
 * host's. */
static uint64_t hold_here(const fleet_result *r, uint64_t now_ms,
                          uint64_t now_coarse)
{
    if (!r->pushback || r->hold_unix_ms <= now_ms)
        return 0;
    return now_coarse + (r->hold_unix_ms - now_ms) * NS_PER_MS;
}

static void apply_one(server *d, const fleet_batch *b, const fleet_result *r,
                      uint64_t now_ms, uint64_t now_coarse)
{
    uint64_t until = hold_here(r, now_ms, now_coarse);
    if (until != 0)
        owner_fleet_hold(&d->seg, r->slot, r->gen, until);
    if (!r->ready)
        return;
    fleet_view v = r->view;
    v.synced_ns = b->synced_ns;
    v.valid_until_ns = b->synced_ns + 2 * b->interval_ns;
    v.pushback_until_ns =
        until ? owner_fleet_hold_written(&d->seg, r->slot) : 0;
    owner_fleet_write(&d->seg, r->slot, r->gen, &v);
    d->fleet->applied[r->slot] = true;
}

static void apply(server *d, const fleet_batch *b)
{
    struct fleet *f = d->fleet;
    uint32_t cap = d->seg.view.upstream_capacity;
    bool *was = calloc(cap, sizeof(*was));
    if (was != NULL)
        memcpy(was, f->applied, cap * sizeof(*was));
    memset(f->applied, 0, cap * sizeof(*f->applied));
    uint64_t now_ms = retryd__clock_realtime_ms(),
             now_coarse = retryd__clock_coarse_ns();
    for (size_t i = 0; b->ok && i < b->n; i++)
        apply_one(d, b, &b->r[i], now_ms, now_coarse);
    /* What the fleet no longer says (a failed sync, an upstream that left
     * the fleet or is not in the interval read) goes now, not at its
     * lapse. */
    for (uint32_t i = 0; i < cap; i++)
        if ((was == NULL || was[i]) && !f->applied[i])
            owner_fleet_clear(&d->seg, i);
    free(was);
}

void fleet_wake(server *d)
{
    struct fleet *f = d->fleet;
    if (f == NULL)
        return;
    uint64_t v;
    if (read(f->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        log_limited(LOG_WARN, "fleet: %s", strerror(errno));
    pthread_mutex_lock(&f->lock);
    fleet_batch *b = f->ready;
    f->ready = NULL;
    pthread_mutex_unlock(&f->lock);
    if (b == NULL)
        return;
    apply(d, b);
    free(b);
}

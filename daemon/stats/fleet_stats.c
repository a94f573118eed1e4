/* SPDX-License-Identifier: MIT */
/* The fleet tier in a stats reply (fleet_stats.h). */
#include "stats/fleet_stats.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "shared/fleet.h"

#define NS_PER_MS UINT64_C(1000000)

static const char *state_name(int state)
{
    static const char *const names[] = {"off", "joining", "connected",
                                        "fallback"};
    return state >= FLEET_OFF && state <= FLEET_FALLBACK ? names[state]
                                                         : "fallback";
}

void stats_fleet_fill(server *d, const config *c, stats_fleet *sf,
                      Retryd__StatsReply *rep)
{
    if (!c->fleet.on)
        return;
    fleet_status st;
    pthread_mutex_lock(&d->fleet_lock);
    st = d->fleet_status;
    pthread_mutex_unlock(&d->fleet_lock);
    uint64_t now = retryd__clock_monotonic_ns();
    uint64_t iv = c->fleet.sync_interval_ns;
    /* Two intervals without a sync: every view lapsed, whatever the
     * thread (stuck, say, resolving a name) last said. */
    if ((st.state == FLEET_CONNECTED || st.state == FLEET_JOINING) &&
        st.last_sync_ns != 0 && now > st.last_sync_ns + 2 * iv)
        st.state = FLEET_FALLBACK;
    Retryd__FleetStatus *m = &sf->st;
    retryd__fleet_status__init(m);
    memcpy(sf->redis, c->fleet.redis, sizeof(sf->redis));
    memcpy(sf->name, c->fleet.name, sizeof(sf->name));
    memcpy(sf->host_id, c->fleet.host_id, sizeof(sf->host_id));
    memcpy(sf->error, st.last_error, sizeof(sf->error));
    snprintf(sf->state, sizeof(sf->state), "%s", state_name(st.state));
    m->state = sf->state;
    m->redis = sf->redis;
    m->name = sf->name;
    m->host_id = sf->host_id;
    m->last_error = sf->error;
    m->sync_interval_ms = iv / NS_PER_MS;
    m->last_sync_unix_ms = st.last_sync_unix_ms;
    m->last_sync_age_ms =
        st.last_sync_ns ? (now - st.last_sync_ns) / NS_PER_MS : 0;
    m->fallback_since_unix_ms = st.fallback_since_unix_ms;
    m->syncs = st.syncs;
    m->sync_failures = st.sync_failures;
    m->fallbacks = st.fallbacks;
    m->connects = st.connects;
    m->round_trip_us = st.round_trip_us;
    m->upstreams = st.upstreams;
    m->upstreams_applied =
        st.state == FLEET_FALLBACK ? 0 : st.upstreams_applied;
    rep->fleet = m;
}

bool stats_upstream_fleet(const reg_entry *e, seg_upstream *s, uint64_t now_ns,
                          Retryd__UpstreamFleet *out)
{
    const budget_params *p = &e->params;
    if (!budget_params_in_fleet(p))
        return false;
    fleet_view v;
    health_view h;
    retryd__fleet_load(&s->fleet, &v);
    retryd__health_view_fleet(s, now_ns, &h);
    bool applied = retryd__fleet_current(v.valid_until_ns, now_ns);
    retryd__upstream_fleet__init(out);
    out->applied = applied;
    out->floor = p->fleet_floor_micro_per_s != FLEET_FLOOR_UNSET;
    out->fleet_floor_micro_per_s = out->floor ? p->fleet_floor_micro_per_s : 0;
    out->floor_micro_per_s = retryd__fleet_floor(s, now_ns);
    out->health = p->fleet_health != 0;
    out->pushback = p->fleet_pushback != 0;
    out->probability = h.probability;
    if (!applied)
        return true; /* the figures of a lapsed view are no longer true */
    out->share_ppm = v.share_ppm;
    out->hosts = (uint32_t)(v.hosts < UINT32_MAX ? v.hosts : UINT32_MAX);
    out->first_attempts = v.first_attempts;
    out->own_first_attempts = v.own_first_attempts;
    out->retries_granted = v.retries_granted;
    out->window_ms = v.window_ms;
    out->requests = v.requests;
    out->accepts = v.accepts;
    out->rejecting_processes = v.rejecters;
    out->pushback_remaining_ms =
        v.pushback_until_ns > now_ns
            ? (v.pushback_until_ns - now_ns + NS_PER_MS - 1) / NS_PER_MS
            : 0;
    out->age_ms = v.synced_ns && now_ns > v.synced_ns
                      ? (now_ns - v.synced_ns) / NS_PER_MS
                      : 0;
    return true;
}

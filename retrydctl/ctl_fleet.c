/* SPDX-License-Identifier: MIT */
/* The fleet tier in retrydctl's views (ctl_fleet.h). */
#include "ctl_fleet.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "reply.h"

bool ctl_fleet_fallback(const Retryd__StatsReply *r)
{
    return r->fleet != NULL && r->fleet->state != NULL &&
           strcmp(r->fleet->state, "fallback") == 0;
}

/* A unix time in ms as the local HH:MM:SS. */
static void clock_of(uint64_t unix_ms, char *out, size_t len)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    if (localtime_r(&t, &tm) == NULL ||
        strftime(out, len, "%H:%M:%S", &tm) == 0)
        snprintf(out, len, "?");
}

void ctl_fleet_summary(const Retryd__StatsReply *r, char *out, size_t len)
{
    const Retryd__FleetStatus *f = r->fleet;
    out[0] = '\0';
    if (f == NULL)
        return;
    int n = snprintf(out, len, "fleet '%s' as %s through redis %s: ", f->name,
                     f->host_id, f->redis);
    if (n < 0 || (size_t)n >= len)
        return;
    char at[16];
    if (ctl_fleet_fallback(r)) {
        clock_of(f->fallback_since_unix_ms, at, sizeof(at));
        snprintf(out + n, len - (size_t)n,
                 "FALLBACK since %s (%s): host-only budgets; %" PRIu64
                 " syncs, %" PRIu64 " failed, %" PRIu64 " fallbacks",
                 at, f->last_error[0] ? f->last_error : "no sync", f->syncs,
                 f->sync_failures, f->fallbacks);
        return;
    }
    snprintf(out + n, len - (size_t)n,
             "%s, last sync %.1fs ago (round trip %.1f ms, every %.1fs), %u "
             "of %u upstreams applied; %" PRIu64 " syncs, %" PRIu64
             " failed, %" PRIu64 " fallbacks",
             f->state, (double)f->last_sync_age_ms / 1000,
             (double)f->round_trip_us / 1000,
             (double)f->sync_interval_ms / 1000, f->upstreams_applied,
             f->upstreams, f->syncs, f->sync_failures, f->fallbacks);
}

void ctl_fleet_upstream_line(const Retryd__UpstreamStats *u, char *out,
                             size_t len)
{
    const Retryd__UpstreamFleet *f = u->fleet;
    out[0] = '\0';
    if (f == NULL)
        return;
    if (!f->applied) {
        snprintf(out, len,
                 "fleet: not applied (host-only: floor %.2f/s, this host's "
                 "own throttle and holds)",
                 reply_tokens(f->floor_micro_per_s));
        return;
    }
    int n = 0;
    if (f->floor)
        n = snprintf(
            out, len,
            "fleet: floor %.2f/s = %.1f%% of %.2f (%u hosts, %" PRIu64
            " of %" PRIu64 " first attempts, %" PRIu64 " retries in %.0fs)",
            reply_tokens(f->floor_micro_per_s), (double)f->share_ppm / 1e4,
            reply_tokens(f->fleet_floor_micro_per_s), f->hosts,
            f->own_first_attempts, f->first_attempts, f->retries_granted,
            (double)f->window_ms / 1000);
    else
        n = snprintf(out, len, "fleet: %u hosts", f->hosts);
    if (n < 0 || (size_t)n >= len)
        return;
    if (f->health)
        n += snprintf(out + n, len - (size_t)n,
                      "  throttle +R=%" PRIu64 " +A=%" PRIu64
                      " +rejecting=%" PRIu64 " p=%.3f",
                      f->requests, f->accepts, f->rejecting_processes,
                      f->probability);
    if (f->pushback && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, "  hold %s%.1fs",
                 f->pushback_remaining_ms ? "HOLDING " : "",
                 (double)f->pushback_remaining_ms / 1000);
}

void ctl_fleet_json(const Retryd__StatsReply *r)
{
    const Retryd__FleetStatus *f = r->fleet;
    printf("\"fleet\":");
    if (f == NULL) {
        printf("null");
        return;
    }
    printf("{\"state\":");
    ctl_json_string(f->state);
    printf(",\"redis\":");
    ctl_json_string(f->redis);
    printf(",\"name\":");
    ctl_json_string(f->name);
    printf(",\"host_id\":");
    ctl_json_string(f->host_id);
    printf(",\"sync_interval_seconds\":%.3f,\"last_sync_unix_ms\":%" PRIu64
           ",\"last_sync_age_seconds\":%.3f,\"fallback_since_unix_ms\":%" PRIu64
           ",\"syncs\":%" PRIu64 ",\"sync_failures\":%" PRIu64
           ",\"fallbacks\":%" PRIu64 ",\"connects\":%" PRIu64
           ",\"round_trip_seconds\":%.6f,\"upstreams\":%u,"
           "\"upstreams_applied\":%u,\"last_error\":",
           (double)f->sync_interval_ms / 1000, f->last_sync_unix_ms,
           (double)f->last_sync_age_ms / 1000, f->fallback_since_unix_ms,
           f->syncs, f->sync_failures, f->fallbacks, f->connects,
           (double)f->round_trip_us / 1e6, f->upstreams, f->upstreams_applied);
    ctl_json_string(f->last_error);
    printf("}");
}

void ctl_fleet_json_upstream(const Retryd__UpstreamStats *u)
{
    const Retryd__UpstreamFleet *f = u->fleet;
    printf(",\"fleet\":");
    if (f == NULL) {
        printf("null");
        return;
    }
    printf("{\"applied\":%s,\"fleet_min_retries_per_sec\":",
           f->applied ? "true" : "false");
    if (f->floor)
        printf("%.6f", reply_tokens(f->fleet_floor_micro_per_s));
    else
        printf("null");
    printf(",\"floor_in_force\":%.6f,\"share\":%.6f,\"hosts\":%u,"
           "\"first_attempts\":%" PRIu64 ",\"own_first_attempts\":%" PRIu64
           ",\"retries_granted\":%" PRIu64 ",\"window_seconds\":%.3f,"
           "\"health\":%s,\"pushback\":%s,\"requests\":%" PRIu64
           ",\"accepts\":%" PRIu64 ",\"rejecting_processes\":%" PRIu64
           ",\"probability\":%.6f,\"pushback_seconds\":%.3f,"
           "\"age_seconds\":%.3f}",
           reply_tokens(f->floor_micro_per_s), (double)f->share_ppm / 1e6,
           f->hosts, f->first_attempts, f->own_first_attempts,
           f->retries_granted, (double)f->window_ms / 1000,
           f->health ? "true" : "false", f->pushback ? "true" : "false",
           f->requests, f->accepts, f->rejecting_processes, f->probability,
           (double)f->pushback_remaining_ms / 1000, (double)f->age_ms / 1000);
}

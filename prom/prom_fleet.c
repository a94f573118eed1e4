/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier's families (docs/fleet.md): the link's state and counts,
 * and per upstream that takes part, its share of the fleet's floor and the
 * fleet's figures this host sees. Only what the reply carries: nothing of
 * a daemon without the tier, nothing of an upstream outside it.
 */
#include "prom_fleet.h"
#include "prom_text.h"

#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

static void link_families(FILE *out, const Retryd__FleetStatus *f)
{
    bool up = strcmp(f->state, "fallback") != 0;
    prom_header(out, "retryd_fleet_up", "gauge",
                "1 while the fleet tier syncs with Redis (its views apply), 0 "
                "in fallback (host-only budgets).");
    fprintf(out, "retryd_fleet_up %d\n", up ? 1 : 0);
    prom_header(out, "retryd_fleet_info", "gauge",
                "The fleet tier's link: the state, the namespace, this host.");
    fputs("retryd_fleet_info{state=\"", out);
    prom_label(out, f->state);
    fputs("\",name=\"", out);
    prom_label(out, f->name);
    fputs("\",host_id=\"", out);
    prom_label(out, f->host_id);
    fputs("\",redis=\"", out);
    prom_label(out, f->redis);
    fputs("\"} 1\n", out);
    prom_header(out, "retryd_fleet_last_sync_timestamp_seconds", "gauge",
                "When the last sync with Redis succeeded (0: never).");
    fprintf(out, "retryd_fleet_last_sync_timestamp_seconds %.3f\n",
            (double)f->last_sync_unix_ms / 1000);
    prom_header(out, "retryd_fleet_sync_interval_seconds", "gauge",
                "The fleet tier's sync_interval.");
    fprintf(out, "retryd_fleet_sync_interval_seconds %.3f\n",
            (double)f->sync_interval_ms / 1000);
    prom_header(out, "retryd_fleet_syncs_total", "counter",
                "Syncs with Redis, by result.");
    fprintf(out,
            "retryd_fleet_syncs_total{result=\"ok\"} %" PRIu64 "\n"
            "retryd_fleet_syncs_total{result=\"failed\"} %" PRIu64 "\n",
            f->syncs, f->sync_failures);
    prom_header(out, "retryd_fleet_fallbacks_total", "counter",
                "Times the host fell back to its own budgets.");
    fprintf(out, "retryd_fleet_fallbacks_total %" PRIu64 "\n", f->fallbacks);
    prom_header(out, "retryd_fleet_round_trip_seconds", "gauge",
                "The last sync's round trip to Redis.");
    fprintf(out, "retryd_fleet_round_trip_seconds %.6f\n",
            (double)f->round_trip_us / 1e6);
    prom_header(
        out, "retryd_fleet_upstreams", "gauge",
        "Upstreams taking part in the fleet tier, and of them those with "
        "a view of the fleet in force.");
    fprintf(out,
            "retryd_fleet_upstreams{applied=\"true\"} %u\n"
            "retryd_fleet_upstreams{applied=\"false\"} %u\n",
            f->upstreams_applied,
            f->upstreams > f->upstreams_applied
                ? f->upstreams - f->upstreams_applied
                : 0);
}

enum fleet_gauge {
    G_APPLIED,
    G_FLEET_FLOOR,
    G_SHARE,
    G_FLOOR,
    G_HOSTS,
    G_FIRST,
    G_GRANTED,
    G_REQUESTS,
    G_ACCEPTS,
    G_REJECTING,
    G_PROBABILITY,
    G_PUSHBACK,
    G_COUNT
};

static const struct {
    const char *name, *help;
} gauges[G_COUNT] = {
    [G_APPLIED] = {"retryd_upstream_fleet_applied",
                   "1 while a view of the fleet is in force for the "
                   "upstream on this host."},
    [G_FLEET_FLOOR] = {"retryd_upstream_fleet_min_retries_per_second",
                       "The fleet's floor F (fleet_min_retries_per_sec)."},
    [G_SHARE] = {"retryd_upstream_fleet_share",
                 "This host's share of the fleet's floor, 0 to 1."},
    [G_FLOOR] = {"retryd_upstream_floor_in_force_per_second",
                 "The floor refilling the host's bucket now: its share of "
                 "the fleet's while a view applies, else its own."},
    [G_HOSTS] = {"retryd_upstream_fleet_hosts",
                 "Hosts in the fleet's last complete interval."},
    [G_FIRST] = {"retryd_upstream_fleet_first_attempts",
                 "The fleet's first attempts in the share window."},
    [G_GRANTED] = {"retryd_upstream_fleet_retries_granted",
                   "The fleet's retries granted in the share window."},
    [G_REQUESTS] = {"retryd_upstream_fleet_throttle_requests",
                    "Requests R in the other hosts' throttle windows."},
    [G_ACCEPTS] = {"retryd_upstream_fleet_throttle_accepts",
                   "Accepts A in the other hosts' throttle windows."},
    [G_REJECTING] = {"retryd_upstream_fleet_throttle_rejecting_processes",
                     "Processes with a rejection on the other hosts."},
    [G_PROBABILITY] = {"retryd_upstream_fleet_throttle_probability",
                       "The throttle's probability as this host's "
                       "admissions compute it, other hosts' counts in."},
    [G_PUSHBACK] = {"retryd_upstream_fleet_pushback_seconds",
                    "The fleet's hold left on this host (0: none)."},
};

static double fleet_value(const Retryd__UpstreamFleet *f, int g)
{
    switch (g) {
    case G_APPLIED:
        return f->applied;
    case G_FLEET_FLOOR:
        return (double)f->fleet_floor_micro_per_s / 1e6;
    case G_SHARE:
        return (double)f->share_ppm / 1e6;
    case G_FLOOR:
        return (double)f->floor_micro_per_s / 1e6;
    case G_HOSTS:
        return f->hosts;
    case G_FIRST:
        return (double)f->first_attempts;
    case G_GRANTED:
        return (double)f->retries_granted;
    case G_REQUESTS:
        return (double)f->requests;
    case G_ACCEPTS:
        return (double)f->accepts;
    case G_REJECTING:
        return (double)f->rejecting_processes;
    case G_PROBABILITY:
        return f->probability;
    default:
        return (double)f->pushback_remaining_ms / 1000;
    }
}

static void upstream_families(FILE *out, const Retryd__StatsReply *r)
{
    for (int g = 0; g < G_COUNT; g++) {
        prom_header(out, gauges[g].name, "gauge", gauges[g].help);
        for (size_t i = 0; i < r->n_upstreams; i++) {
            const Retryd__UpstreamStats *u = r->upstreams[i];
            if (u->fleet == NULL || (g == G_FLEET_FLOOR && !u->fleet->floor))
                continue;
            fprintf(out, "%s{upstream=\"", gauges[g].name);
            prom_label(out, u->name);
            fprintf(out, "\"} %.6f\n", fleet_value(u->fleet, g));
        }
    }
}

void prom_render_fleet(FILE *out, const Retryd__StatsReply *r)
{
    if (r->fleet == NULL)
        return;
    link_families(out, r->fleet);
    upstream_families(out, r);
}

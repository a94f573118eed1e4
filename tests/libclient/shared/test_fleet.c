/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier's arithmetic and its block in a slot (docs/fleet.md),
 * with the clock driven by the test: the floor shares of a fleet of any
 * size add up to the fleet's floor, a view in force changes the refill
 * and the throttle's window, and a view that lapses (or was scribbled far
 * ahead) changes nothing.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "shared/bucket.h"
#include "shared/fleet.h"

#define S UINT64_C(1000000000)
#define MS UINT64_C(1000000)
#define T0 (UINT64_C(1000) * S)

static seg_upstream slot;

static uint64_t clock_ns = T0;
static uint64_t test_now(void *ctx)
{
    (void)ctx;
    return clock_ns;
}
static const bucket_clock test_clock = {test_now, NULL};

Test(fleet_share, proportional_to_first_attempts)
{
    uint64_t F = 20 * SEG_MICRO;
    cr_expect_eq(retryd__fleet_floor_share(F, 25, 100, 4), 5 * SEG_MICRO);
    cr_expect_eq(retryd__fleet_floor_share(F, 0, 100, 4), 0,
                 "a host without traffic in the window gets nothing while "
                 "others have some");
    cr_expect_eq(retryd__fleet_floor_share(F, 100, 100, 4), F,
                 "the only host with traffic gets all of it");
    cr_expect_eq(retryd__fleet_share_ppm(1, 3, 3), 333333);
}

Test(fleet_share, equal_split_without_traffic)
{
    uint64_t F = 20 * SEG_MICRO;
    cr_expect_eq(retryd__fleet_floor_share(F, 0, 0, 8), F / 8);
    cr_expect_eq(retryd__fleet_floor_share(F, 0, 0, 1), F, "alone");
    cr_expect_eq(retryd__fleet_floor_share(F, 0, 0, 0), F,
                 "no host counted (a bucket lost): the whole floor, as alone");
    cr_expect_eq(retryd__fleet_share_ppm(0, 0, 4), FLEET_PPM / 4);
}

Test(fleet_share, figures_read_apart_never_exceed_the_floor)
{
    uint64_t F = 7 * SEG_MICRO;
    cr_expect_eq(retryd__fleet_floor_share(F, 500, 100, 4), F,
                 "own above the total counts as the total");
    uint64_t big = UINT64_MAX / 2;
    cr_expect_eq(retryd__fleet_floor_share(SEG_MAX_FLOOR_MICRO, big, big, 1),
                 SEG_MAX_FLOOR_MICRO, "no overflow at the limits");
    cr_expect_eq(retryd__fleet_floor_share(SEG_MAX_FLOOR_MICRO, 1, big, 1), 0);
}

/* The fleet's floor is flat in the number of hosts: with H hosts of any
 * traffic, the floors they get add up to F (less the rounding down of
 * each host's share, at most one micro-token a second each). */
Test(fleet_share, the_sum_is_the_fleets_floor_for_any_number_of_hosts)
{
    static const uint64_t hosts[] = {1, 2, 8, 100, 1000, 10000};
    uint64_t F = 10 * SEG_MICRO;
    srand(22);
    for (size_t k = 0; k < sizeof(hosts) / sizeof(hosts[0]); k++) {
        uint64_t H = hosts[k], total = 0;
        uint64_t *own = calloc(H, sizeof(*own));
        for (uint64_t h = 0; h < H; h++)
            total += own[h] = (uint64_t)(rand() % 1000);
        for (int idle = 0; idle < 2; idle++) {
            uint64_t sum = 0, t = idle ? 0 : total;
            for (uint64_t h = 0; h < H; h++)
                sum += retryd__fleet_floor_share(F, idle ? 0 : own[h], t, H);
            cr_expect(sum <= F && sum + H >= F,
                      "%llu hosts (%s): floors add up to %llu, not %llu",
                      (unsigned long long)H, idle ? "no traffic" : "traffic",
                      (unsigned long long)sum, (unsigned long long)F);
        }
        free(own);
    }
}

static void setup(void)
{
    memset(&slot, 0, sizeof(slot));
    clock_ns = T0;
    retryd__bucket_init(&slot, 1, 0, 10 * SEG_MICRO, 1000 * SEG_MICRO, 0, T0);
    atomic_store(&slot.ident, seg_ident(1, SEG_ACTIVE));
    health_params h = {.flags = SEG_HEALTH_THROTTLE | SEG_HEALTH_PUSHBACK,
                       .k_micro = 2 * SEG_MICRO,
                       .window_ns = 8 * S,
                       .min_processes = 2,
                       .pushback_max_ns = 60 * S};
    retryd__health_init(&slot, &h);
}

TestSuite(fleet_slot, .init = setup);

static fleet_view view_until(uint64_t flags, uint64_t until)
{
    return (fleet_view){.valid_until_ns = until,
                        .flags = flags,
                        .floor_micro_per_s = 1250000, /* 1.25/s */
                        .requests = 1000,
                        .accepts = 0,
                        .rejecters = 3,
                        .synced_ns = T0};
}

static uint64_t balance_now(void)
{
    uint64_t micro;
    bucket_tally t = {slot.counters, true, NULL, NULL};
    cr_assert_eq(retryd__bucket_balance(&slot, atomic_load(&slot.ident),
                                        &test_clock, &t, &micro),
                 0);
    return micro;
}

Test(fleet_slot, the_refill_runs_at_the_hosts_share_while_the_view_applies)
{
    fleet_view v = view_until(SEG_FLEET_FLOOR, T0 + 2 * S);
    retryd__fleet_store(&slot.fleet, &v);
    cr_expect_eq(retryd__fleet_floor(&slot, T0), 1250000);
    clock_ns = T0 + S;
    cr_expect_eq(balance_now(), 1250000, "a second at the share, 1.25");
    /* The view lapses two intervals after its sync: the host's own floor
     * again, with no word from anybody. */
    clock_ns = T0 + 3 * S;
    cr_expect_eq(retryd__fleet_floor(&slot, clock_ns), 10 * SEG_MICRO);
    cr_expect_eq(balance_now(), 1250000 + 20 * SEG_MICRO,
                 "two more seconds at the host's floor of 10/s");
}

Test(fleet_slot, a_view_without_the_floor_flag_or_scribbled_ahead_is_none)
{
    fleet_view v = view_until(SEG_FLEET_HEALTH, T0 + 2 * S);
    retryd__fleet_store(&slot.fleet, &v);
    cr_expect_eq(retryd__fleet_floor(&slot, T0), 10 * SEG_MICRO,
                 "no floor flag: the host's own");
    v = view_until(SEG_FLEET_FLAGS_ALL, T0 + FLEET_MAX_VALID_NS + S);
    retryd__fleet_store(&slot.fleet, &v);
    cr_expect(!retryd__fleet_in_force(&slot.fleet, SEG_FLEET_FLOOR, T0),
              "valid further ahead than any view can be");
    cr_expect_eq(retryd__fleet_floor(&slot, T0), 10 * SEG_MICRO);
}

Test(fleet_slot, the_throttle_sums_the_other_hosts_while_the_view_applies)
{
    _Atomic uint64_t mine = 0;
    /* This host: 10 requests, all accepted, one rejecting process: the
     * quorum of 2 not met, the throttle idle. */
    for (int i = 0; i < 10; i++)
        retryd__health_record(&slot, T0 + (uint64_t)i * MS, 1, 1);
    retryd__health_reject(&slot, T0, &mine);
    health_view host, all;
    retryd__health_view(&slot, T0 + 100 * MS, &host);
    cr_expect(!host.engaged && host.requests == 10);

    fleet_view v = view_until(SEG_FLEET_HEALTH, T0 + 2 * S);
    retryd__fleet_store(&slot.fleet, &v);
    retryd__health_view_fleet(&slot, T0 + 100 * MS, &all);
    cr_expect_eq(all.requests, 1010);
    cr_expect_eq(all.accepts, 10);
    cr_expect_eq(all.rejecters, 4, "three processes on other hosts");
    cr_expect(all.engaged, "the fleet's rejecters meet the quorum");
    cr_expect_float_eq(all.probability, (1010.0 - 20.0) / 1011.0, 1e-9);
    /* The host-only view (what the daemon publishes) is unchanged. */
    retryd__health_view(&slot, T0 + 100 * MS, &host);
    cr_expect_eq(host.requests, 10);

    retryd__health_view_fleet(&slot, T0 + 2 * S, &all);
    cr_expect(!all.engaged && all.requests == 10, "lapsed: the host's alone");
}

Test(fleet_slot, other_hosts_counts_are_bounded)
{
    fleet_view v = view_until(SEG_FLEET_HEALTH, T0 + 2 * S);
    v.requests = UINT64_MAX;
    v.accepts = UINT64_MAX;
    v.rejecters = UINT64_MAX;
    retryd__fleet_store(&slot.fleet, &v);
    health_view all;
    retryd__health_view_fleet(&slot, T0, &all);
    cr_expect_eq(all.requests, FLEET_COUNT_MAX);
    cr_expect_eq(all.accepts, FLEET_COUNT_MAX);
    cr_expect_eq(all.rejecters, FLEET_COUNT_MAX);
    /* Engaged (the rejecters meet any quorum), and with as many accepts
     * as requests and K = 2, nothing to throttle: the sums did not wrap
     * into a small window of rejections. */
    cr_expect(all.engaged);
    cr_expect_eq(all.probability, 0.0);
}

Test(fleet_slot, store_and_load_round_trip)
{
    fleet_view v = view_until(SEG_FLEET_FLAGS_ALL, T0 + S), back;
    v.pushback_until_ns = T0 + 5 * S;
    v.fleet_floor_micro_per_s = 20 * SEG_MICRO;
    v.share_ppm = 125000;
    v.hosts = 8;
    v.first_attempts = 800;
    v.own_first_attempts = 100;
    v.retries_granted = 160;
    v.window_ms = 8000;
    retryd__fleet_store(&slot.fleet, &v);
    retryd__fleet_load(&slot.fleet, &back);
    cr_expect_eq(memcmp(&v, &back, sizeof(v)), 0);
}

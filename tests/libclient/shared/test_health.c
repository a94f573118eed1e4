/* SPDX-License-Identifier: MIT */
/*
 * The health window's arithmetic on one slot, with the clock driven by the
 * test (docs/health.md): what counts where, how slots age out and rotate,
 * the quorum, the probe, holds, and the daemon's policing of scribbles.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "shared/health.h"

#define S UINT64_C(1000000000)
#define MS UINT64_C(1000000)

static seg_upstream slot;
/* 8 slots of 250 ms: a 2 s window. */
static const health_params on = {
    .flags = SEG_HEALTH_THROTTLE | SEG_HEALTH_PUSHBACK,
    .k_micro = 2 * SEG_MICRO,
    .window_ns = 2 * S,
    .min_processes = 1,
    .pushback_max_ns = 10 * S,
};
/* A clock far from zero, at the start of a slot. */
#define T0 (UINT64_C(1000) * S)

static void setup(void)
{
    memset(&slot, 0, sizeof(slot));
    retryd__health_init(&slot, &on);
}

TestSuite(health, .init = setup);

static health_view view_at(uint64_t now)
{
    health_view v;
    retryd__health_view(&slot, now, &v);
    return v;
}

Test(health, defaults_are_sane_and_checked)
{
    cr_expect(retryd__health_params_ok(&retryd__health_defaults));
    cr_expect_eq(retryd__health_defaults.flags, SEG_HEALTH_PUSHBACK,
                 "throttle off, pushback on by default");
    health_params p = on;
    p.window_ns = S - 1;
    cr_expect(!retryd__health_params_ok(&p), "a window under 1 s");
    p = on;
    p.min_processes = 0;
    cr_expect(!retryd__health_params_ok(&p), "a quorum of none");
    p = on;
    p.flags = 0x80;
    cr_expect(!retryd__health_params_ok(&p), "an unknown flag");
}

Test(health, formula_and_counting)
{
    _Atomic uint64_t mine = 0;
    for (int i = 0; i < 30; i++)
        retryd__health_record(&slot, T0 + (uint64_t)i * MS, 1, 1);
    for (int i = 0; i < 70; i++) {
        retryd__health_record(&slot, T0 + 40 * MS + (uint64_t)i * MS, 1, 0);
        retryd__health_reject(&slot, T0 + 40 * MS + (uint64_t)i * MS, &mine);
    }
    health_view v = view_at(T0 + 200 * MS);
    cr_expect_eq(v.requests, 100);
    cr_expect_eq(v.accepts, 30);
    cr_expect_eq(v.rejecters, 1, "one process, counted once");
    cr_expect(v.engaged);
    cr_expect_float_eq(v.probability, (100.0 - 2 * 30) / 101.0, 1e-12);
    cr_expect_float_eq(health_probability(10, 6, 2 * SEG_MICRO), 0.0, 0,
                       "more accepts than R / K: no throttling");
}

Test(health, off_records_nothing)
{
    health_params p = on;
    p.flags = SEG_HEALTH_PUSHBACK;
    retryd__health_init(&slot, &p);
    _Atomic uint64_t mine = 0;
    retryd__health_record(&slot, T0, 1, 0);
    retryd__health_reject(&slot, T0, &mine);
    for (unsigned i = 0; i < SEG_HEALTH_SLOTS; i++) {
        cr_expect_eq(atomic_load(&slot.window[i]), 0);
        cr_expect_eq(atomic_load(&slot.rejecters[i]), 0);
    }
    cr_expect(!view_at(T0).engaged);
    cr_expect_eq(view_at(T0).probability, 0);
}

Test(health, slots_age_out_after_one_window)
{
    retryd__health_record(&slot, T0, 1, 0);
    retryd__health_record(&slot, T0 + 1 * S, 1, 1);
    cr_expect_eq(view_at(T0 + 1 * S).requests, 2);
    /* The first slot leaves the window 8 slots (2 s) after it began. */
    cr_expect_eq(view_at(T0 + 2 * S - 1).requests, 2);
    cr_expect_eq(view_at(T0 + 2 * S).requests, 1);
    cr_expect_eq(view_at(T0 + 3 * S).requests, 0);
    cr_expect_eq(view_at(T0 + 3 * S).accepts, 0);
}

Test(health, a_stale_word_is_rotated_by_its_next_writer)
{
    retryd__health_record(&slot, T0, 5, 5);
    /* A full round of the ring later, the same word: the new epoch starts
     * with the new event, the old counts are gone. */
    retryd__health_record(&slot, T0 + 2 * S, 1, 0);
    health_view v = view_at(T0 + 2 * S);
    cr_expect_eq(v.requests, 1);
    cr_expect_eq(v.accepts, 0);
    /* Far later (the 20-bit epoch wrapped many times), still one event. */
    retryd__health_record(&slot, T0 + 100000 * S, 1, 1);
    v = view_at(T0 + 100000 * S);
    cr_expect_eq(v.requests, 1);
    cr_expect_eq(v.accepts, 1);
}

Test(health, a_full_slot_stops_counting_without_carrying)
{
    uint64_t e = health_epoch(T0, on.window_ns / SEG_HEALTH_SLOTS);
    atomic_store(&slot.window[e % SEG_HEALTH_SLOTS],
                 e << HEALTH_EPOCH_SHIFT | HEALTH_COUNT_LIMIT
                                               << HEALTH_COUNT_BITS);
    retryd__health_record(&slot, T0, 1, 1);
    uint64_t w = atomic_load(&slot.window[e % SEG_HEALTH_SLOTS]);
    cr_expect_eq(health_word_epoch(w), e, "the epoch is intact");
    cr_expect_eq(w >> HEALTH_COUNT_BITS & HEALTH_COUNT_MASK,
                 HEALTH_COUNT_LIMIT);
}

Test(health, quorum_counts_distinct_processes)
{
    health_params p = on;
    p.min_processes = 2;
    retryd__health_init(&slot, &p);
    _Atomic uint64_t a = 0, b = 0;
    for (int i = 0; i < 50; i++) {
        retryd__health_record(&slot, T0 + (uint64_t)i * 20 * MS, 1, 0);
        retryd__health_reject(&slot, T0 + (uint64_t)i * 20 * MS, &a);
    }
    health_view v = view_at(T0 + S);
    cr_expect_eq(v.rejecters, 1, "one process however many rejections");
    cr_expect(!v.engaged, "one process alone is no quorum");
    cr_expect_eq(v.probability, 0);
    retryd__health_reject(&slot, T0 + S, &b);
    v = view_at(T0 + S);
    cr_expect_eq(v.rejecters, 2);
    cr_expect(v.engaged);
    cr_expect_gt(v.probability, 0.9);
    /* A's count moved with its latest rejection: it stays in the window
     * while A keeps seeing rejections, and leaves one window after its
     * last one. */
    retryd__health_reject(&slot, T0 + 2500 * MS, &a);
    cr_expect_eq(view_at(T0 + 2500 * MS).rejecters, 2);
    cr_expect_eq(view_at(T0 + 3 * S + 100 * MS).rejecters, 1);
    cr_expect_eq(view_at(T0 + 4500 * MS + 100 * MS).rejecters, 0);
}

Test(health, one_probe_per_slot)
{
    cr_expect(retryd__health_claim_probe(&slot, T0));
    cr_expect(!retryd__health_claim_probe(&slot, T0 + 10 * MS));
    cr_expect(!retryd__health_claim_probe(&slot, T0 + 249 * MS));
    cr_expect(retryd__health_claim_probe(&slot, T0 + 250 * MS));
}

Test(health, holds_take_the_latest_deadline_and_are_bounded)
{
    retryd__health_push(&slot, T0, 2 * (int64_t)S);
    cr_expect_eq(retryd__health_hold(&slot, T0), 2 * (int64_t)S);
    retryd__health_push(&slot, T0 + 100 * MS, (int64_t)S);
    cr_expect_eq(retryd__health_hold(&slot, T0), 2 * (int64_t)S,
                 "a shorter hold does not shorten a longer one");
    retryd__health_push(&slot, T0, 3600 * (int64_t)S);
    cr_expect_eq(retryd__health_hold(&slot, T0), 10 * (int64_t)S,
                 "at most pushback_max");
    cr_expect_eq(retryd__health_hold(&slot, T0 + 10 * S), 0);
    /* Within the coarse clock's tick of its end a hold is over. */
    retryd__health_push(&slot, T0 + 20 * S, (int64_t)S);
    cr_expect_eq(retryd__health_hold(&slot, T0 + 21 * S - 4 * MS), 0);
    cr_expect_gt(retryd__health_hold(&slot, T0 + 21 * S - 10 * MS), 0);
    /* A scribbled deadline is read as no longer than pushback_max. */
    atomic_store(&slot.pushback_until_ns, UINT64_MAX);
    cr_expect_eq(retryd__health_hold(&slot, T0), 10 * (int64_t)S);
    health_params p = on;
    p.flags = SEG_HEALTH_THROTTLE;
    retryd__health_init(&slot, &p);
    retryd__health_push(&slot, T0, (int64_t)S);
    cr_expect_eq(retryd__health_hold(&slot, T0), 0, "pushback off");
}

Test(health, policing_clears_what_no_writer_leaves)
{
    uint64_t slot_ns = on.window_ns / SEG_HEALTH_SLOTS;
    uint64_t e = health_epoch(T0, slot_ns);
    /* A word stamped three slots ahead: it would come alive later. */
    uint64_t ahead = (e + 3) & HEALTH_EPOCH_MASK;
    atomic_store(&slot.window[ahead % SEG_HEALTH_SLOTS],
                 ahead << HEALTH_EPOCH_SHIFT | UINT64_C(1000)
                                                   << HEALTH_COUNT_BITS);
    /* More accepts than requests, in the current slot. */
    atomic_store(&slot.window[e % SEG_HEALTH_SLOTS],
                 e << HEALTH_EPOCH_SHIFT | UINT64_C(1) << HEALTH_COUNT_BITS |
                     5);
    /* More rejecters than processes. */
    atomic_store(&slot.rejecters[e % SEG_HEALTH_SLOTS],
                 e << HEALTH_EPOCH_SHIFT | 5000);
    atomic_store(&slot.pushback_until_ns, T0 + 3600 * S);
    unsigned d = retryd__health_check(&slot, T0, 1024, &on);
    cr_expect_eq(d, HEALTH_WINDOW_RESET | HEALTH_PUSHBACK_RESET);
    cr_expect_eq(atomic_load(&slot.window[ahead % SEG_HEALTH_SLOTS]), 0);
    cr_expect_eq(atomic_load(&slot.window[e % SEG_HEALTH_SLOTS]), 0);
    cr_expect_eq(atomic_load(&slot.rejecters[e % SEG_HEALTH_SLOTS]), 0);
    cr_expect_eq(retryd__health_hold(&slot, T0), 10 * (int64_t)S);
    /* A sound window is left alone, a writer one slot ahead included. */
    retryd__health_record(&slot, T0, 3, 1);
    retryd__health_record(&slot, T0 + slot_ns, 1, 1);
    cr_expect_eq(retryd__health_check(&slot, T0, 1024, &on), 0);
    cr_expect_eq(view_at(T0 + slot_ns).requests, 4);
    /* Parameters not the daemon's: rewritten, the window restarted. */
    atomic_store(&slot.health_slot_ns, 0);
    cr_expect_eq(retryd__health_check(&slot, T0, 1024, &on),
                 HEALTH_PARAMS_RESET);
    cr_expect_eq(health_slot_ns(&slot), slot_ns);
    cr_expect_eq(view_at(T0).requests, 0);
}

Test(health, a_spent_hold_is_cleared_by_the_library_only)
{
    retryd__health_push(&slot, T0, (int64_t)S);
    cr_expect_eq(retryd__health_hold_spent(&slot, T0), (int64_t)S);
    cr_expect_neq(atomic_load(&slot.pushback_until_ns), 0);
    /* Over: a reader leaves it, the library clears it. */
    cr_expect_eq(retryd__health_hold(&slot, T0 + 2 * S), 0);
    cr_expect_neq(atomic_load(&slot.pushback_until_ns), 0);
    cr_expect_eq(retryd__health_hold_spent(&slot, T0 + 2 * S), 0);
    cr_expect_eq(atomic_load(&slot.pushback_until_ns), 0);
}

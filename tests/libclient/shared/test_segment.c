/* SPDX-License-Identifier: MIT */
/*
 * A corrupted segment is an error, never a crash: every header field a
 * reader relies on is validated against the mapping. And the rules both
 * sides of the segment share: names, parameters, counters.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "retryd/budget.h"
#include "retryd/common.h"
#include "retryd/decision.h"
#include "segment_format.h"
#include "shared/segment.h"

static void *mem;
static size_t size;

static void setup(void)
{
    size = retryd__segment_size(8, 4);
    mem = aligned_alloc(4096, size);
    cr_assert(mem != NULL);
    test_segment_format(mem, 8, 4, 42, 0);
}

static void teardown(void)
{
    free(mem);
}

TestSuite(segment, .init = setup, .fini = teardown);

static seg_header *hdr(void)
{
    return mem;
}

Test(segment, fresh_segment_validates)
{
    seg_view v;
    cr_assert_eq(retryd__segment_view(mem, size, &v), 0);
    cr_expect_eq(v.upstream_capacity, 8);
    cr_expect_eq(v.process_capacity, 4);
    cr_expect_eq(v.hdr->generation, 42);
    cr_expect((char *)(v.processes + 4) <= (char *)mem + size);
}

Test(segment, bad_magic_is_corrupt)
{
    seg_view v;
    hdr()->magic ^= 1;
    cr_expect_eq(retryd__segment_view(mem, size, &v), RETRYD_ECORRUPT);
}

Test(segment, other_layout_version_is_refused)
{
    seg_view v;
    hdr()->layout_version = SEG_LAYOUT_VERSION + 1;
    cr_expect_eq(retryd__segment_view(mem, size, &v), RETRYD_EVERSION);
    hdr()->layout_version = SEG_LAYOUT_VERSION;
    hdr()->upstream_slot_size += 64;
    cr_expect_eq(retryd__segment_view(mem, size, &v), RETRYD_EVERSION);
}

Test(segment, offsets_and_sizes_outside_the_mapping_are_corrupt)
{
    seg_view v;
    struct {
        size_t off;
        uint64_t value;
        size_t width;
    } bad[] = {
        {offsetof(seg_header, total_size), 1, 8},
        {offsetof(seg_header, upstream_capacity), 0, 4},
        {offsetof(seg_header, upstream_capacity), 1000000, 4},
        {offsetof(seg_header, process_capacity), 70000, 4},
        {offsetof(seg_header, upstreams_offset), UINT64_MAX - 10, 8},
        {offsetof(seg_header, processes_offset), 1u << 30, 8},
        {offsetof(seg_header, processes_offset), 64, 8},
        {offsetof(seg_header, upstreams_offset), 4097, 8},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setup();
        memcpy((char *)mem + bad[i].off, &bad[i].value, bad[i].width);
        cr_expect_eq(retryd__segment_view(mem, size, &v), RETRYD_ECORRUPT,
                     "case %zu", i);
        teardown();
    }
    setup();
}

Test(segment, short_mapping_is_corrupt)
{
    seg_view v;
    cr_expect_eq(retryd__segment_view(mem, 100, &v), RETRYD_ECORRUPT);
    cr_expect_eq(retryd__segment_view(mem, size - 4096, &v), RETRYD_ECORRUPT);
    cr_expect_eq(retryd__segment_view(NULL, size, &v), RETRYD_ECORRUPT);
}

Test(segment, slot_indexes_are_bounds_checked)
{
    seg_view v;
    cr_assert_eq(retryd__segment_view(mem, size, &v), 0);
    cr_expect(retryd__segment_upstream(&v, 7) != NULL);
    cr_expect(retryd__segment_upstream(&v, 8) == NULL);
    cr_expect(retryd__segment_upstream(&v, UINT32_MAX) == NULL);
    cr_expect(retryd__segment_process(&v, 3) != NULL);
    cr_expect(retryd__segment_process(&v, 4) == NULL);
}

Test(segment, token_word_keeps_generation_and_balance_apart)
{
    uint64_t w = seg_token_word(0x12345, SEG_MAX_CAP_MICRO);
    cr_expect_eq(w >> SEG_BALANCE_BITS, 0x2345, "low 16 bits of the gen");
    cr_expect_eq(seg_token_balance(w), (int64_t)SEG_MAX_CAP_MICRO);
    cr_expect_eq(seg_token_balance(seg_token_word(7, 0)), 0);
    /* Takes in flight drive an empty bucket below zero by subtracting
     * from the word itself: the bias absorbs the borrow. */
    uint64_t empty = seg_token_word(0xffff, 0);
    uint64_t dipped = empty - 1000 * SEG_MICRO;
    cr_expect_eq(seg_token_generation(dipped), 0xffff,
                 "a borrow never reaches the generation");
    cr_expect_eq(seg_token_balance(dipped), -1000 * (int64_t)SEG_MICRO);
    cr_expect_eq(dipped + 1000 * SEG_MICRO, empty, "and giving back restores");
}

Test(segment, start_time_tells_a_live_process)
{
    cr_expect_gt(retryd__process_start_time((uint64_t)getpid()), 0);
    cr_expect_eq(retryd__process_start_time(UINT64_C(1) << 40), 0);
}

Test(shared, upstream_names_are_printable_and_bounded)
{
    char longest[SEG_NAME_MAX + 2];
    memset(longest, 'n', sizeof(longest));
    longest[SEG_NAME_MAX] = '\0';
    cr_expect(seg_name_valid(longest), "95 bytes");
    longest[SEG_NAME_MAX] = 'n';
    longest[SEG_NAME_MAX + 1] = '\0';
    cr_expect(!seg_name_valid(longest), "96 bytes");
    cr_expect(seg_name_valid("payments"));
    cr_expect(seg_name_valid("a-b_c.d:e/f@g"));
    cr_expect(!seg_name_valid(""));
    cr_expect(!seg_name_valid(NULL));
    cr_expect(!seg_name_valid("two words"));
    cr_expect(!seg_name_valid("tab\there"));
    cr_expect(!seg_name_valid("del\x7f"));
    cr_expect(!seg_name_valid("caf\xc3\xa9"));
}

Test(shared, name_hash_is_fnv1a_64)
{
    cr_expect_eq(seg_name_hash(""),
                 (unsigned long)UINT64_C(0xcbf29ce484222325));
    cr_expect_eq(seg_name_hash("a"),
                 (unsigned long)UINT64_C(0xaf63dc4c8601ec8c));
    cr_expect_eq(seg_name_hash("foobar"),
                 (unsigned long)UINT64_C(0x85944171f73967e8));
}

Test(shared, parameters_are_plausible_within_the_segment_range)
{
    cr_expect(seg_params_plausible(SEG_DEFAULT_RATIO_MICRO,
                                   SEG_DEFAULT_FLOOR_MICRO_PER_S,
                                   SEG_DEFAULT_CAP_MICRO));
    cr_expect(seg_params_plausible(0, 0, SEG_MICRO), "one token of cap");
    cr_expect(!seg_params_plausible(0, 0, SEG_MICRO - 1), "a retry needs one");
    cr_expect(seg_params_plausible(SEG_MAX_CAP_MICRO, SEG_MAX_FLOOR_MICRO,
                                   SEG_MAX_CAP_MICRO));
    cr_expect(!seg_params_plausible(SEG_MAX_CAP_MICRO + 1, 0, SEG_MICRO));
    cr_expect(!seg_params_plausible(0, SEG_MAX_FLOOR_MICRO + 1, SEG_MICRO));
    cr_expect(!seg_params_plausible(0, 0, SEG_MAX_CAP_MICRO + 1));
}

Test(shared, counter_numbers_are_frozen_by_the_layout)
{
    /* A daemon and older clients index the counter table by these numbers;
     * renumbering one is a layout change (SEG_LAYOUT_VERSION), never a
     * side effect of a new enum value in the public API. */
    cr_expect_eq(SEG_C_DEPOSITS, 0);
    cr_expect_eq(SEG_C_GRANTED, 1);
    cr_expect_eq(SEG_C_DENIED_MAX_ATTEMPTS, 2);
    cr_expect_eq(SEG_C_DENIED_BUDGET_EXHAUSTED, 3);
    cr_expect_eq(SEG_C_DENIED_STATUS_NOT_RETRYABLE, 9);
    cr_expect_eq(SEG_C_AMBIGUOUS, 10);
    cr_expect_eq(SEG_C_EVIDENCE_NOT_SENT, 11);
    cr_expect_eq(SEG_C_EVIDENCE_PARTIAL_RESPONSE, 14);
    cr_expect_eq(SEG_C_REFILLED_MICRO, 15);
    cr_expect_eq(SEG_C_DISCARDED_MICRO, 16);
    cr_expect_eq(SEG_C_DENIED_COUNT, RETRYD_DENIAL_COUNT - 1);
    cr_expect_eq(SEG_C_EVIDENCE_COUNT, RETRYD_EVIDENCE_COUNT);
    cr_expect_leq(SEG_C_DISCARDED_MICRO, SEG_COUNTERS - 1);
}

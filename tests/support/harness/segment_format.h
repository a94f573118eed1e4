/* SPDX-License-Identifier: MIT */
/*
 * A segment in memory of the test's own (tests only: the daemon formats a
 * fresh memfd, already zero, with retryd__segment_format_zeroed(), and the
 * library never formats one, so this is not shipped in libretryd).
 */
#ifndef RETRYD_TEST_SEGMENT_FORMAT_H
#define RETRYD_TEST_SEGMENT_FORMAT_H

#include <stdint.h>

/* Zero retryd__segment_size(upstreams, processes) bytes at @p mem and
 * write a fresh header there. */
void test_segment_format(void *mem, uint32_t upstreams, uint32_t processes,
                         uint64_t generation, uint64_t created_unix_ms);

#endif

/* SPDX-License-Identifier: MIT */
#include "segment_format.h"

#include <string.h>

#include "shared/segment.h"

void test_segment_format(void *mem, uint32_t upstreams, uint32_t processes,
                         uint64_t generation, uint64_t created_unix_ms)
{
    memset(mem, 0, retryd__segment_size(upstreams, processes));
    retryd__segment_format_zeroed(mem, upstreams, processes, generation,
                                  created_unix_ms);
}

/* SPDX-License-Identifier: MIT */
/* The time namespace's offset; see clock.h. */
#include "base/clock.h"

#include <stdio.h>

int64_t retryd__clock_offset_ns;

/* Read before main() and before any thread: a constant from then on, so
 * the clocks read it without synchronisation. */
__attribute__((constructor)) static void read_time_namespace_offset(void)
{
    FILE *f = fopen("/proc/self/timens_offsets", "re");
    if (f == NULL)
        return; /* no time namespaces (before Linux 5.6): no offset */
    char name[32];
    long long sec;
    long nsec;
    while (fscanf(f, "%31s %lld %ld", name, &sec, &nsec) == 3)
        if (name[0] == 'm') /* "monotonic"; the other is "boottime" */
            retryd__clock_offset_ns = sec * 1000000000LL + nsec;
    fclose(f);
}

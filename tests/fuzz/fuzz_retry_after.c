/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer: the input is a Retry-After field value from a server we do not
 * control, parsed at a few moments (the RFC 850 two-digit year depends on
 * now) and against a few ceilings.
 */
#include <stdint.h>

#include "retryd/backoff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The epoch, the RFC's example date, 2023, 2038 (INT32_MAX), 2100 and
     * 9999-12-31: the RFC 850 century rule moves with now. */
    static const int64_t nows[] = {0,         784111777,  1700000000,
                                   INT32_MAX, 4102444800, 253402300799};
    static const int64_t maxes[] = {0, 60000000000, INT64_MAX};

    for (size_t i = 0; i < sizeof(nows) / sizeof(nows[0]); i++) {
        for (size_t j = 0; j < sizeof(maxes) / sizeof(maxes[0]); j++) {
            int64_t ns = -1;
            int r = retryd_retry_after_parse((const char *)data, size, nows[i],
                                             maxes[j], &ns);
            if ((r == 0 && (ns < 0 || ns > maxes[j])) ||
                (r != 0 && (r != RETRYD_ENOENT || ns != -1)))
                __builtin_trap();
        }
    }
    return 0;
}

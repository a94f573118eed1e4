/* SPDX-License-Identifier: MIT */
/* Growable structs: the checks of base/macros.h (docs/abi.md). */
#include <stdint.h>
#include <string.h>

#include "base/macros.h"
#include "retryd/common.h"

int retryd__opts_check(const void *opts, size_t sz, size_t min, size_t known)
{
    if (sz < min || sz > RETRYD_OPTS_MAX)
        return RETRYD_EINVAL;
    const unsigned char *p = opts;
    for (size_t i = known; i < sz; i++)
        if (p[i] != 0)
            return RETRYD_EOPTS;
    return 0;
}

int retryd__opts_copy(void *dst, size_t known, const void *src, size_t min)
{
    /* sz is the first field of every growable struct. */
    size_t sz;
    memcpy(&sz, src, sizeof(sz));
    int r = retryd__opts_check(src, sz, min, known);
    if (r < 0)
        return r;
    memset(dst, 0, known);
    memcpy(dst, src, sz < known ? sz : known);
    return 0;
}

void retryd__opts_out(void *dst, size_t sz, void *src, size_t known)
{
    size_t n = sz < known ? sz : known;
    if (sz > known)
        memset((char *)dst + known, 0, sz - known);
    memcpy(src, &n, sizeof(n)); /* sz, the first field */
    memcpy(dst, src, n);
}

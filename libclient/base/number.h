/* SPDX-License-Identifier: MIT */
/*
 * A strict number from a command line: the whole string, decimal, within
 * [lo, hi]. For retrydctl's options and the benchmarks' arguments.
 */
#ifndef RETRYD_BASE_NUMBER_H
#define RETRYD_BASE_NUMBER_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

/* True and *@p ret set when @p s is all a decimal long in [lo, hi]. */
static inline bool retryd__parse_long(const char *s, long lo, long hi,
                                      long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *ret = v;
    return true;
}

/* True and *@p ret set when @p s is all a decimal number (strtod's forms)
 * in [lo, hi]; never for a NaN. */
static inline bool retryd__parse_double(const char *s, double lo, double hi,
                                        double *ret)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi))
        return false;
    *ret = v;
    return true;
}

#endif

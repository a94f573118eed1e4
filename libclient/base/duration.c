/* SPDX-License-Identifier: MIT */
/* Durations as people write them in configuration and on command lines. */
#include <string.h>

#include "retryd/common.h"

typedef struct unit {
    const char *name;
    int64_t ns;
} unit;

/* Longest suffix first, so "ms" is not read as "m" followed by junk. */
static const unit units[] = {
    {"ns", 1},
    {"us", 1000},
    {"ms", 1000000},
    {"s", 1000000000},
    {"m", 60LL * 1000000000},
    {"h", 3600LL * 1000000000},
};

static const unit *unit_lookup(const char *suffix)
{
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(suffix, units[i].name) == 0)
            return &units[i];
    return NULL;
}

int retryd_duration_parse(const char *s, int64_t *ret_ns)
{
    int64_t whole = 0, frac = 0, frac_scale = 1;
    const char *p = s;
    const unit *u;

    if (s == NULL || ret_ns == NULL)
        return RETRYD_EINVAL;
    if (strcmp(s, "0") == 0) {
        *ret_ns = 0;
        return 0;
    }
    if (*p < '0' || *p > '9')
        return RETRYD_EINVAL;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (INT64_MAX - 9) / 10)
            return RETRYD_ERANGE;
        whole = whole * 10 + (*p - '0');
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return RETRYD_EINVAL;
        /* Digits past nanosecond precision of the largest unit are dropped. */
        for (; *p >= '0' && *p <= '9'; p++) {
            if (frac_scale < 1000000000000LL) {
                frac = frac * 10 + (*p - '0');
                frac_scale *= 10;
            }
        }
    }
    u = unit_lookup(p);
    if (u == NULL)
        return RETRYD_EINVAL;
    if (whole > INT64_MAX / u->ns)
        return RETRYD_ERANGE;
    /* frac / frac_scale * u->ns, without overflow: frac_scale <= 10^12 and
     * u->ns <= 3.6 * 10^12, so divide the unit first when it is a multiple. */
    int64_t frac_ns =
        (u->ns % frac_scale == 0)
            ? frac * (u->ns / frac_scale)
            : (int64_t)((double)frac * (double)u->ns / (double)frac_scale);
    if (whole * u->ns > INT64_MAX - frac_ns)
        return RETRYD_ERANGE;
    *ret_ns = whole * u->ns + frac_ns;
    return 0;
}

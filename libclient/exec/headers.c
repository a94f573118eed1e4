/* SPDX-License-Identifier: MIT */
#include "exec/headers.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

void retryd__hdrs_init(header_arena *a, char *buf, size_t cap, uint32_t *off,
                       size_t cap_off)
{
    *a = (header_arena){.buf = buf,
                        .cap = cap,
                        .off = off,
                        .cap_off = cap_off,
                        .first_buf = buf,
                        .first_off = off};
}

void retryd__hdrs_clear(header_arena *a)
{
    a->len = 0;
    a->n = 0;
}

void retryd__hdrs_free(header_arena *a)
{
    if (a->buf != a->first_buf)
        free(a->buf);
    if (a->off != a->first_off)
        free(a->off);
    a->buf = a->first_buf;
    a->off = a->first_off;
    a->len = a->n = a->cap = a->cap_off = 0;
}

bool retryd__field_value_ok(const char *v)
{
    for (; *v; v++)
        if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f)
            return false;
    return true;
}

bool retryd__grow(void **p, size_t len, size_t *cap, size_t need,
                  const void *first)
{
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *n = *p == first ? malloc(c) : realloc(*p, c);
    if (n == NULL)
        return false;
    if (*p == first && len > 0)
        memcpy(n, *p, len);
    *p = n;
    *cap = c;
    return true;
}

bool retryd__hdrs_reserve(header_arena *a, size_t bytes)
{
    if (a->len + bytes > a->cap &&
        !retryd__grow((void **)&a->buf, a->len, &a->cap, a->len + bytes,
                      a->first_buf))
        return false;
    if (a->n == a->cap_off) {
        /* One more field; retryd__grow doubles. */
        size_t bytes_off = 2 * a->cap_off * sizeof(*a->off);
        if (!retryd__grow((void **)&a->off, bytes_off, &bytes_off,
                          bytes_off + 2 * sizeof(*a->off), a->first_off))
            return false;
        a->cap_off = bytes_off / (2 * sizeof(*a->off));
    }
    return true;
}

const char *retryd__hdrs_get(const header_arena *a, const char *name)
{
    const char *v = NULL;
    for (size_t i = 0; i < a->n; i++)
        if (strcasecmp(retryd__hdrs_name(a, i), name) == 0)
            v = retryd__hdrs_value(a, i);
    return v;
}

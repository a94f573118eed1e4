/* SPDX-License-Identifier: MIT */
/*
 * Response headers in one arena: "name\0value\0" records in a single
 * growing buffer, with their offsets. Both start in the caller's storage
 * and cost an allocation each only when that is outgrown; the result
 * copies the final block into its own allocation.
 */
#ifndef RETRYD_HEADERS_H
#define RETRYD_HEADERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct header_arena {
    char *buf;
    size_t len, cap;
    uint32_t *off; /* off[2i]: name i, off[2i+1]: its value */
    size_t n, cap_off;
    /* Storage the arena starts in (a caller's stack frame); it moves to
     * the heap only when that is outgrown. */
    char *first_buf;
    uint32_t *first_off;
} header_arena;

/*
 * Grow *p, of which @p len bytes are used, from *cap bytes to at least
 * @p need, doubling: realloc on the heap, or a first move out of the
 * caller's storage @p first (never freed). False when out of memory, *p
 * then unchanged. The buffers of a call (headers, body, attempt log) all
 * start on the stack this way.
 */
bool retryd__grow(void **p, size_t len, size_t *cap, size_t need,
                  const void *first);

/*
 * A header field value we are willing to send (RFC 9110 field-value):
 * visible characters, spaces, tabs and obs-text; no other control
 * character and no DEL, so nothing can end the line or hide in it.
 */
bool retryd__field_value_ok(const char *v);

/* Start in the given storage (cap bytes, cap_off fields). */
void retryd__hdrs_init(header_arena *a, char *buf, size_t cap, uint32_t *off,
                       size_t cap_off);
void retryd__hdrs_clear(header_arena *a);
/* Frees what moved to the heap; the first storage is the caller's. */
void retryd__hdrs_free(header_arena *a);
/* Room for @p bytes more and one more field; false when out of memory. */
bool retryd__hdrs_reserve(header_arena *a, size_t bytes);

/*
 * Add the field of a response header line as it came ("Name: value\r\n"):
 * the name is its first @p name_len bytes, the value the @p value_len bytes
 * from @p value_off (> name_len: after the colon and any blanks). One copy
 * of the line up to the value's end, terminated in place: the colon and
 * the byte after the value become '\0', so the arena keeps the blanks
 * between the two. Inline, with one copy, because every response's every
 * header line comes here. False when out of memory.
 */
static inline bool retryd__hdrs_add_line(header_arena *a, const char *line,
                                         size_t name_len, size_t value_off,
                                         size_t value_len)
{
    size_t bytes = value_off + value_len + 1;
    if ((a->len + bytes > a->cap || a->n == a->cap_off) &&
        !retryd__hdrs_reserve(a, bytes))
        return false;
    char *p = a->buf + a->len;
    memcpy(p, line, bytes - 1);
    p[name_len] = '\0';
    p[bytes - 1] = '\0';
    a->off[2 * a->n] = (uint32_t)a->len;
    a->off[2 * a->n + 1] = (uint32_t)(a->len + value_off);
    a->len += bytes;
    a->n++;
    return true;
}
/* The last value of @p name (case-insensitive), or NULL. */
const char *retryd__hdrs_get(const header_arena *a, const char *name);

static inline const char *retryd__hdrs_name(const header_arena *a, size_t i)
{
    return a->buf + a->off[2 * i];
}

static inline const char *retryd__hdrs_value(const header_arena *a, size_t i)
{
    return a->buf + a->off[2 * i + 1];
}

#endif

/* SPDX-License-Identifier: MIT */
/* Small internal macros shared by libretryd and the daemon. */
#ifndef RETRYD_MACROS_H
#define RETRYD_MACROS_H

#include <stddef.h>
#include <string.h>

/* The structure holding @p ptr as its @p member. Unlike liburcu's
 * caa_container_of it never casts a const pointer to a mutable one, so
 * clang's -Wcast-qual stays quiet. */
#define RETRYD_CONTAINER_OF(ptr, type, member)                                 \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* The same for a const @p ptr: a const structure. */
#define RETRYD_CONST_CONTAINER_OF(ptr, type, member)                           \
    ((const type *)(const void *)((const char *)(ptr)-offsetof(type, member)))

/*
 * Growable structs (docs/abi.md). Every public struct begins with its size,
 * `sz`, set by whoever built it: a caller's options, facts or output
 * struct, or the library's own. A struct of @p sz bytes is acceptable to a
 * library that knows @p known bytes of it when
 *   - sz reaches at least the end of the first version's fields (@p min),
 *   - sz is plausible (at most RETRYD_OPTS_MAX), and
 *   - every byte past what this library knows is zero: a caller built
 *     against a newer header may only leave unknown fields unset (libbpf's
 *     OPTS_VALID); a set field this library cannot honour is refused, never
 *     silently ignored.
 * Fields a caller built against an older header lacks read as zero.
 */
#define RETRYD_OPTS_MAX 4096u

/* 0, RETRYD_EINVAL (sz too small or implausible) or RETRYD_EOPTS (a
 * non-zero byte past @p known). */
int retryd__opts_check(const void *opts, size_t sz, size_t min, size_t known);

/*
 * Validate @p src (a caller's struct) and copy it into @p dst, a struct of
 * this library's size: fields @p src lacks are zero in @p dst. 0, or the
 * error of retryd__opts_check().
 */
int retryd__opts_copy(void *dst, size_t known, const void *src, size_t min);

#define RETRYD_COPY_OPTS(dst, src, min_sz)                                     \
    retryd__opts_copy((dst), sizeof(*(dst)), (src), (min_sz))

/*
 * The other way: @p src, a struct of this library's (@p known bytes), into
 * a caller's @p dst of @p sz bytes (a size already checked): its first sz
 * bytes, never more; fields of a newer caller's struct that this library
 * does not know read as zero, and the sz written (src's too) says how much
 * of it this library filled.
 */
void retryd__opts_out(void *dst, size_t sz, void *src, size_t known);

/*
 * A struct read in place when it has this library's exact size (the usual
 * case, and a hot path in retryd_decide), else through a zero-padded copy
 * in @p local. Sets *@p view to the struct to read; 0 or an error.
 */
#define RETRYD_OPTS_VIEW(view, local, src, min_sz)                             \
    ((src)->sz == sizeof(*(src))                                               \
         ? ((view) = (src), 0)                                                 \
         : ((view) = (local), RETRYD_COPY_OPTS((local), (src), (min_sz))))

/* The first version of a struct ends after @p field. */
#define RETRYD_OPTS_MIN(type, field)                                           \
    (offsetof(type, field) + sizeof(((type *)0)->field))

#endif

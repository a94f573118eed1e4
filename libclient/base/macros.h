/* Small internal macros shared by libretryd and the daemon. */
#ifndef RETRYD_MACROS_H
#define RETRYD_MACROS_H

#include <stddef.h>

/* The structure holding @p ptr as its @p member. Unlike liburcu's
 * caa_container_of it never casts a const pointer to a mutable one, so
 * clang's -Wcast-qual stays quiet. */
#define RETRYD_CONTAINER_OF(ptr, type, member)                                 \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/*
 * Copy a caller's options structure of @p src->sz bytes into @p dst, a
 * zeroed structure of this library's size: fields a caller built against
 * an older header does not have stay zero, fields of a newer one are
 * ignored. 0, or RETRYD_EINVAL when sz is below @p min_sz or implausibly
 * large.
 */
#define RETRYD_COPY_OPTS(dst, src, min_sz)                                     \
    ((src)->sz < (min_sz) || (src)->sz > 4 * sizeof(*(dst))                    \
         ? RETRYD_EINVAL                                                       \
         : (memcpy((dst), (src),                                               \
                   (src)->sz < sizeof(*(dst)) ? (src)->sz : sizeof(*(dst))),   \
            0))

#endif

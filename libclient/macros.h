/* Small internal macros shared by libretryd and the daemon. */
#ifndef RETRYD_MACROS_H
#define RETRYD_MACROS_H

#include <stddef.h>

/* The structure holding @p ptr as its @p member. Unlike liburcu's
 * caa_container_of it never casts a const pointer to a mutable one, so
 * clang's -Wcast-qual stays quiet. */
#define RETRYD_CONTAINER_OF(ptr, type, member)                                 \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#endif

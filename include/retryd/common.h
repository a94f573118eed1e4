/* retryd: shared definitions of the public API (export macro, error codes). */
#ifndef RETRYD_COMMON_H
#define RETRYD_COMMON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RETRYD_BUILDING) && defined(__GNUC__)
#define RETRYD_EXPORT __attribute__((visibility("default")))
#else
#define RETRYD_EXPORT
#endif

/*
 * Error codes. Every function that can fail returns 0 or one of these
 * negative numbers. The numbers are published: never renumber or reuse one,
 * only append.
 */
#define RETRYD_ERRNO_MAP(XX)                                                   \
    XX(EINVAL, -1, "invalid argument")                                         \
    XX(ENOMEM, -2, "out of memory")                                            \
    XX(ERANGE, -3, "value out of range")                                       \
    XX(ENOENT, -4, "absent or not found")                                      \
    XX(EBUDGET, -5, "retry budget exhausted")                                  \
    XX(ENOTCONN, -6, "retryd daemon not reachable")                            \
    XX(EPROTO, -7, "malformed or oversized message")                           \
    XX(EVERSION, -8, "incompatible protocol or layout version")                \
    XX(ECORRUPT, -9, "shared segment failed validation")                       \
    XX(EFULL, -10, "table full")                                               \
    XX(ECONFLICT, -11, "conflicts with existing parameters")                   \
    XX(EPERM, -12, "permission denied")                                        \
    XX(ESTALE, -13, "handle refers to a retired slot")                         \
    XX(ETIMEDOUT, -14, "timed out")                                            \
    XX(ECONFIG, -15, "invalid configuration")                                  \
    XX(EIO, -16, "input/output error")                                         \
    XX(ECURL, -17, "libcurl failure")                                          \
    XX(EDRAINING, -18, "runtime is draining")

typedef enum retryd_errno {
#define RETRYD__ERR_ENUM(name, value, text) RETRYD_##name = (value),
    RETRYD_ERRNO_MAP(RETRYD__ERR_ENUM)
#undef RETRYD__ERR_ENUM
} retryd_errno;

/**
 * Describe an error code.
 *
 * @param err  0 or a negative RETRYD_* code.
 * @return a static string owned by the library; "unknown error" for a number
 *         that is not in the list. Never NULL.
 */
RETRYD_EXPORT const char *retryd_strerror(int err);

/**
 * Name an error code ("EBUDGET" for RETRYD_EBUDGET).
 *
 * @return a static string owned by the library; "UNKNOWN" for a number that
 *         is not in the list. Never NULL.
 */
RETRYD_EXPORT const char *retryd_err_name(int err);

/**
 * Parse a duration such as "250ms", "5s", "1.5s", "2m" or "100us" (units ns,
 * us, ms, s, m, h; a decimal fraction is allowed; "0" needs no unit).
 *
 * @param s       NUL-terminated text.
 * @param ret_ns  nanoseconds; written only on success.
 * @return 0, RETRYD_EINVAL for text that is not a duration, or RETRYD_ERANGE
 *         when it does not fit in int64 nanoseconds.
 */
RETRYD_EXPORT int retryd_duration_parse(const char *s, int64_t *ret_ns);

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_COMMON_H */

/* SPDX-License-Identifier: MIT */
/* retryd: shared definitions of the public API (export macro, error codes). */
#ifndef RETRYD_COMMON_H
#define RETRYD_COMMON_H

#include <errno.h>
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
 * negative numbers, and the numbers are published: never renumber or reuse
 * one, only append (docs/abi.md).
 *
 * They follow negative errno, as libuv and systemd do: where a failure is
 * what a POSIX errno means, the code is that errno negated (RETRYD_EINVAL
 * is -EINVAL), so a caller can pass it on or print it with strerror(-err).
 * Failures that are retryd's own (an exhausted budget, a layout version, a
 * libcurl failure) take numbers from -4001 down, a block no Linux errno
 * reaches.
 */
#define RETRYD_ERRNO_MAP(XX)                                                   \
    XX(EINVAL, -EINVAL, "invalid argument")                                    \
    XX(ENOMEM, -ENOMEM, "out of memory")                                       \
    XX(ERANGE, -ERANGE, "value out of range")                                  \
    XX(ENOENT, -ENOENT, "absent or not found")                                 \
    XX(EBUDGET, -4001, "retry budget exhausted")                               \
    XX(ENOTCONN, -ENOTCONN, "retryd daemon not reachable")                     \
    XX(EPROTO, -EPROTO, "malformed or oversized message")                      \
    XX(EVERSION, -4002, "incompatible protocol or layout version")             \
    XX(ECORRUPT, -4003, "shared segment failed validation")                    \
    XX(EFULL, -4004, "table full")                                             \
    XX(ECONFLICT, -4005, "conflicts with existing parameters")                 \
    XX(EPERM, -EPERM, "permission denied")                                     \
    XX(ESTALE, -ESTALE, "handle refers to a retired slot")                     \
    XX(ETIMEDOUT, -ETIMEDOUT, "timed out")                                     \
    XX(ECONFIG, -4006, "invalid configuration")                                \
    XX(EIO, -EIO, "input/output error")                                        \
    XX(ECURL, -4007, "libcurl failure")                                        \
    XX(EDRAINING, -4008, "runtime is draining")                                \
    XX(EOPTS, -4009, "options struct has unknown non-zero fields")             \
    XX(ECANCELED, -ECANCELED, "canceled")                                      \
    XX(ESHARE, -4010, "over this process's share of the retry budget")         \
    XX(EREQSHARE, -4011, "over this request's share of the retry budget")      \
    XX(EHEDGE, -4012, "host hedge budget exhausted")

typedef enum retryd_errno {
#define RETRYD__ERR_ENUM(name, value, text) RETRYD_##name = (value),
    RETRYD_ERRNO_MAP(RETRYD__ERR_ENUM)
#undef RETRYD__ERR_ENUM
} retryd_errno;

/**
 * Describe an error code.
 *
 * @param err  0 or a negative RETRYD_* code.
 * @return a static string owned by the library: the list's text for a
 *         retryd code, the C library's description for any other negative
 *         errno, "unknown error" otherwise. Never NULL.
 */
RETRYD_EXPORT const char *retryd_strerror(int err);

/**
 * Name an error code ("EBUDGET" for RETRYD_EBUDGET).
 *
 * @return a static string owned by the library: "EBUDGET" for a retryd
 *         code, the errno name ("EACCES") for any other negative errno,
 *         "UNKNOWN" otherwise. Never NULL.
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

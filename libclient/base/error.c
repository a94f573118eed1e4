/* SPDX-License-Identifier: MIT */
/* Error strings: one table, generated from the X-macro in common.h. */
#include <string.h>

#include "retryd/common.h"

const char *retryd_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
#define RETRYD__ERR_TEXT(name, value, text)                                    \
    case (value):                                                              \
        return text;
        RETRYD_ERRNO_MAP(RETRYD__ERR_TEXT)
#undef RETRYD__ERR_TEXT
    default: {
        /* Any other negative errno, as a function may pass one on from
         * the system; glibc's table is static and thread-safe. */
        const char *t = err < 0 && err > -4096 ? strerrordesc_np(-err) : NULL;
        return t ? t : "unknown error";
    }
    }
}

const char *retryd_err_name(int err)
{
    switch (err) {
    case 0:
        return "OK";
#define RETRYD__ERR_NAME(name, value, text)                                    \
    case (value):                                                              \
        return #name;
        RETRYD_ERRNO_MAP(RETRYD__ERR_NAME)
#undef RETRYD__ERR_NAME
    default: {
        const char *t = err < 0 && err > -4096 ? strerrorname_np(-err) : NULL;
        return t ? t : "UNKNOWN";
    }
    }
}

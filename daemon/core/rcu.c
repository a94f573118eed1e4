/* SPDX-License-Identifier: MIT */
#include "core/rcu.h"

#if defined(__SANITIZE_THREAD__)
char rd_rcu_token;

/*
 * liburcu's own threads (the call_rcu worker, rculfhash's workqueue)
 * allocate, lock and free through intercepted calls whose ordering TSan
 * cannot see inside the uninstrumented library. Those calls, and only
 * those, are not reported; races in retryd's code still are (rcu.h
 * models the edges RCU guarantees to it).
 */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "called_from_lib:liburcu-memb.so.8\n"
           "called_from_lib:liburcu-cds.so.8\n"
           "called_from_lib:liburcu-common.so.8\n";
}
#endif

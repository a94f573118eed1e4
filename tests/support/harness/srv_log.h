/* SPDX-License-Identifier: MIT */
/* Test helper: reading a test server's execution log (the LOG control
 * command of srv_control.c). */
#ifndef RETRYD_TEST_SRV_LOG_H
#define RETRYD_TEST_SRV_LOG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testsrv.h"

/*
 * How often @p needle occurs in the server's LOG of request id @p id, or a
 * negative errno. LOG has one entry per execution: "<n> <method> <body
 * length> <body checksum> <Idempotency-Key> <Authorization>", and a tag
 * when the server records one; so " POST " counts the POSTs, a key's
 * value the executions that carried it.
 */
static inline long srv_log_count(testsrv *server, const char *id,
                                 const char *needle)
{
    char cmd[300], reply[8192];
    long n = 0;

    snprintf(cmd, sizeof(cmd), "LOG %s", id);
    int rc = testsrv_command(server, cmd, reply, sizeof(reply));
    if (rc < 0)
        return rc;
    for (const char *p = reply; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/*
 * The arrival times (CLOCK_MONOTONIC ms, the server's clock) of the
 * executions of request id @p id, into @p at (at most @p max): how many,
 * or a negative errno.
 */
static inline long srv_log_times(testsrv *server, const char *id, int64_t *at,
                                 size_t max)
{
    char cmd[300], reply[8192];
    snprintf(cmd, sizeof(cmd), "TIMES %s", id);
    int rc = testsrv_command(server, cmd, reply, sizeof(reply));
    if (rc < 0)
        return rc;
    size_t n = 0;
    char *p = reply, *end;
    for (long long v; n < max && (v = strtoll(p, &end, 10), end != p);
         p = end) {
        if (v == 0 && n == 0)
            break; /* "0": no execution */
        at[n++] = v;
    }
    return (long)n;
}

#endif

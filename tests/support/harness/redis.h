/* SPDX-License-Identifier: MIT */
/*
 * A real redis-server for the fleet tier's tests (docs/fleet.md): on a
 * free loopback port, in a temporary directory, with nothing saved
 * (--save "" --appendonly no), started, stopped, paused and restarted by
 * the test. Readiness is its answer to PING, waited for with a bound.
 */
#ifndef RETRYD_TEST_REDIS_H
#define RETRYD_TEST_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "run.h"

#define RD_REDIS_MAX_ARGS 24

typedef struct rd_redis {
    char bin[256]; /* redis-server */
    char dir[64];  /* its temporary directory */
    char log[128]; /* its stdout and stderr */
    char addr[32]; /* 127.0.0.1:PORT, for a [fleet] redis key */
    int port;
    pid_t pid;                                /* 0 when not running */
    const char *extra[RD_REDIS_MAX_ARGS + 1]; /* more arguments, kept */
} rd_redis;

/* How long a start waits for PING's answer. */
#define RD_REDIS_READY_MS 20000

/*
 * Start redis-server on loopback port @p port (0: a free one) with
 * @p extra (NULL-terminated arguments after the test's own, e.g. "--user",
 * "fleet", "on", ">pw", "~*", "+@all"; NULL for none; the strings must
 * outlive @p r). 0; -ENOENT when redis-server is not installed (skip,
 * saying so); another negative errno when it did not start (its log says
 * why).
 */
int rd_redis_start(rd_redis *r, int port, const char *const *extra);

/* Whether redis-server is installed. */
bool rd_redis_installed(void);

/* Start it again on the same port with the same arguments (after
 * rd_redis_kill): a Redis restarted, its data gone. */
int rd_redis_restart(rd_redis *r);

/* SIGKILL it and reap it: a Redis that died. */
void rd_redis_kill(rd_redis *r);

/* Stop it (and SIGCONT, in case the test stopped it), remove its
 * directory. */
void rd_redis_cleanup(rd_redis *r);

/* Run `redis-cli -p PORT ARGS...` (NULL-terminated, at most 16) bounded at
 * 10 s, into @p res: its exit code, or a negative errno. */
int rd_redis_cli(const rd_redis *r, run_result *res, const char *arg, ...)
    __attribute__((sentinel));

#endif

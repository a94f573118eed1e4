/* SPDX-License-Identifier: MIT */
/*
 * Test harness: a real retryd in a private temporary directory, started
 * and stopped by the test. Readiness is the daemon's own word (--notify-fd),
 * never a sleep.
 */
#ifndef RETRYD_TEST_HARNESS_H
#define RETRYD_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "run.h"

typedef struct rd_daemon {
    char dir[64];      /* the temporary directory */
    char config[160];  /* dir/retryd.conf */
    char runtime[160]; /* dir/run */
    char control[192]; /* the control socket */
    char stats[192];   /* the stats socket */
    char segment[192];
    char log[192]; /* the daemon's stderr */
    pid_t pid;     /* 0 when not running */
    /* RLIMIT_NOFILE the daemon starts with (set before exec): both 0 for
     * the test's own. */
    unsigned long nofile_soft, nofile_hard;
} rd_daemon;

/*
 * Make a temporary directory and write a configuration whose [retryd]
 * section points into it, followed by @p extra (more keys for [retryd],
 * then any other sections). Returns 0 or -errno.
 */
int rd_daemon_init(rd_daemon *d, const char *extra);

/* Rewrite the configuration with another @p extra. */
int rd_daemon_write_config(rd_daemon *d, const char *extra);

/* How long rd_daemon_start() waits for READY: a bound for a daemon that
 * hangs, generous enough for a sanitized one on a loaded machine. */
#define RD_DAEMON_READY_MS 60000

/* Start retryd and wait (at most RD_DAEMON_READY_MS) for it to be
 * serving: 0, -ECHILD when it exited first (its log says why), or
 * -ETIMEDOUT. */
int rd_daemon_start(rd_daemon *d);

/* Send @p sig (and SIGCONT, in case a test stopped it) and reap it (at
 * most 10 s, then SIGKILL). Returns the exit status as run_program does
 * (code, or -signal). */
int rd_daemon_stop(rd_daemon *d, int sig);

/* The daemon's log (its stdout and stderr) into @p buf, NUL-terminated
 * and truncated to @p len - 1 bytes: for a failure message, before
 * rd_daemon_cleanup removes it. Bytes read, or a negative errno. */
ssize_t rd_daemon_read_log(const rd_daemon *d, char *buf, size_t len);

/* rd_daemon_stop, and when the exit status is not 0 the daemon's log to
 * stderr (a sanitizer report is there) before the directory goes. */
int rd_daemon_stop_or_show_log(rd_daemon *d, int sig);

/* Stop it if running, remove the directory. */
void rd_daemon_cleanup(rd_daemon *d);

/* Wait until @p cond(arg) holds, checking every millisecond, at most
 * @p timeout_ms. The bound makes a failure a failure, not a hang. */
bool rd_wait_until(bool (*cond)(void *), void *arg, int timeout_ms);

/*
 * Run `retrydctl <cmd> <args...>` (NULL-terminated, at most 16) with
 * @p d's control and stats sockets, bounded at 20 s; its output lands in
 * @p res. For the subcommands that take both sockets (stats, upstreams,
 * drain, retire). Returns its exit status (res->exit_code, negative when
 * a signal ended it), or a negative errno when it could not be run.
 */
int rd_ctl(const rd_daemon *d, run_result *res, const char *cmd, ...)
    __attribute__((sentinel));

/*
 * The number after "key": in @p json, in the text after the first
 * occurrence of @p anchor (NULL: from the start), e.g. the fields of one
 * upstream in `retrydctl stats --json` with anchor "\"name\":\"pay\"".
 * NAN when the anchor or the key is missing, so an equality check with
 * it fails.
 */
double rd_json_number(const char *json, const char *anchor, const char *key);

#endif

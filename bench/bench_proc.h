/* SPDX-License-Identifier: MIT */
/*
 * Process and environment helpers of the benchmarks that start servers
 * (bench_budget, bench_executor): messages, a stop flag set by signals,
 * arguments, child processes (prepare, reap, stop, log tails), a free port,
 * the temporary directory, and a retryd daemon started in it.
 */
#ifndef RETRYD_BENCH_PROC_H
#define RETRYD_BENCH_PROC_H

#include <signal.h>
#include <stdbool.h>

#include "base/number.h"
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_START_TIMEOUT_MS 10000 /* READY, accepting, PONG */
#define BENCH_STOP_TIMEOUT_MS 10000  /* a signal to exit, then SIGKILL */

/* The benchmark's name, defined by each benchmark: every message of these
 * helpers starts with it. */
extern const char bench_prog[];

/* Set by SIGINT, SIGTERM and SIGHUP once bench_install_signals ran. */
extern volatile sig_atomic_t bench_stop;

/* "prog: message" on stderr; returns -1. */
int bench_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "prog: what: strerror(errno)" on stderr; returns -1. */
int bench_fail_errno(const char *what);

int64_t bench_now_ms(void);
void bench_sleep_ms(long ms);

/* SIGINT, SIGTERM and SIGHUP set bench_stop, without SA_RESTART: a signal
 * interrupts our waits, and cleanup runs. SIGPIPE is ignored: a dead peer
 * is an error return, not our death. 0 or -1. */
int bench_install_signals(void);

/* In a forked child: die with @p parent (@p deathsig, even when it is
 * killed outright), signals back to their defaults (an ignored signal
 * survives exec), and stdout and stderr to @p log unless it is NULL.
 * _exit(127) on failure. */
void bench_child_prepare(pid_t parent, int deathsig, const char *log);

/* Wait at most @p timeout_ms for @p pid, then SIGKILL it. 0 and its wait
 * status, or -1. */
int bench_reap(pid_t pid, int timeout_ms, int *status);

/* Signal *@p pid (when it is > 0) with @p sig, reap it, set it to 0; 0
 * when it exited with code 0. */
int bench_stop_child(pid_t *pid, int sig, const char *name);

/* The end of a log file on stderr, so that a failed start explains
 * itself. */
void bench_print_tail(const char *path);

int bench_write_file(const char *path, const char *text, size_t len);

/* A port of 127.0.0.1 the kernel just handed out, so most likely free; -1
 * with errno set. */
int bench_free_port(void);

#endif

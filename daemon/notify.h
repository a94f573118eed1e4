/* SPDX-License-Identifier: MIT */
/*
 * The service manager's notify protocol (sd_notify(3), through libsystemd):
 * READY=1 once serving, RELOADING=1 and READY=1 around a SIGHUP reload,
 * STOPPING=1 when shutdown begins, WATCHDOG=1 from the heartbeat while the
 * main loop turns. Without NOTIFY_SOCKET every call is a no-op, so the
 * daemon started by hand or by the tests behaves as before.
 *
 * Only the main process notifies: notify_init() remembers its pid and
 * every call made from another process (a forked child that reached this
 * code by mistake) sends nothing. The segment keeper also drops the whole
 * environment when it is forked (keeper.c), so NOTIFY_SOCKET and
 * WATCHDOG_* never reach it. docs/daemon.md, "systemd integration".
 */
#ifndef RETRYD_NOTIFY_H
#define RETRYD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

/* Reads the watchdog's interval (WATCHDOG_USEC, for us when WATCHDOG_PID
 * is unset or names this process). Call once in the main process, first. */
void notify_init(void);

/* The heartbeat timer's period: @p heartbeat_ns, or when a third of the
 * watchdog interval is shorter, the largest whole fraction of it (1/2,
 * 1/3, ...) within that third, so the loop can ping at least twice per
 * interval and the heartbeat keeps its cadence. */
uint64_t notify_tick_ns(uint64_t heartbeat_ns);

/* READY=1 with MAINPID= and STATUS=@p status. */
void notify_ready(const char *status);

/* RELOADING=1 with MONOTONIC_USEC= (now). */
void notify_reloading(void);

/* STOPPING=1 with STATUS=@p status. */
void notify_stopping(const char *status);

/* WATCHDOG=1 when a third of the interval has passed since the last one
 * (within half a tick); called from the heartbeat of the main loop only,
 * so a loop that no longer turns stops pinging and is killed. */
void notify_watchdog(uint64_t now_ns, uint64_t tick_ns);

#endif

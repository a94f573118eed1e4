/* SPDX-License-Identifier: MIT */
/*
 * sd_notify(3) for retryd: readiness, reload, stop and the watchdog.
 * notify.h says what is sent when, docs/daemon.md why.
 */
#include "notify.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

static pid_t main_pid;       /* the only process that notifies */
static uint64_t watchdog_ns; /* 0: no watchdog asked for */
static uint64_t last_ping_ns;

void notify_init(void)
{
    uint64_t usec = 0;
    main_pid = getpid();
    /* 0: keep the variables, sd_notify() reads NOTIFY_SOCKET at each
     * call; the keeper gets none of them (keeper.c). */
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        watchdog_ns = usec * 1000;
        log_info("watchdog: WATCHDOG=1 every %" PRIu64 " ms (interval %" PRIu64
                 " ms)",
                 watchdog_ns / 3000000, watchdog_ns / 1000000);
    }
}

uint64_t notify_tick_ns(uint64_t heartbeat_ns)
{
    uint64_t third = watchdog_ns / 3;
    if (third == 0 || third >= heartbeat_ns)
        return heartbeat_ns;
    /* A whole fraction of the heartbeat, so that stays on its second. */
    uint64_t tick = heartbeat_ns / ((heartbeat_ns + third - 1) / third);
    return tick < 1000000 ? 1000000 : tick; /* at least 1 ms */
}

static void send_state(const char *state)
{
    if (main_pid == 0 || getpid() != main_pid)
        return;
    int r = sd_notify(0, state);
    if (r < 0)
        log_limited(LOG_WARN, "sd_notify: %s", strerror(-r));
}

void notify_ready(const char *status)
{
    char buf[1024];
    snprintf(buf, sizeof(buf), "READY=1\nMAINPID=%ld\nSTATUS=%s",
             (long)main_pid, status);
    send_state(buf);
}

void notify_reloading(void)
{
    char buf[128];
    struct timespec ts;
    /* CLOCK_MONOTONIC itself, as the manager reads it (not the coarse
     * clock the daemon uses elsewhere). */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(buf, sizeof(buf),
             "RELOADING=1\nMONOTONIC_USEC=%" PRIu64
             "\nSTATUS=reloading the configuration",
             (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
    send_state(buf);
}

void notify_stopping(const char *status)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "STOPPING=1\nSTATUS=%s", status);
    send_state(buf);
}

void notify_watchdog(uint64_t now_ns, uint64_t tick_ns)
{
    if (watchdog_ns == 0 ||
        now_ns - last_ping_ns + tick_ns / 2 < watchdog_ns / 3)
        return;
    last_ping_ns = now_ns;
    send_state("WATCHDOG=1");
}

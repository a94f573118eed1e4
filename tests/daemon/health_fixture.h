/* SPDX-License-Identifier: MIT */
/*
 * What the upstream-health programs share (docs/health.md): a real retryd
 * started from a configuration, client processes forked from the test
 * that attach to it through the public API, and memory they all see (the
 * mapping is inherited), for the logs the test checks against. Plain
 * programs (check.h): a failed CHECK exits, and the daemon goes with the
 * process that started it.
 */
#ifndef RETRYD_TEST_HEALTH_FIXTURE_H
#define RETRYD_TEST_HEALTH_FIXTURE_H

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "check_fork.h"
#include "harness.h"
#include "retryd/retryd.h"
#include "run.h"

static rd_daemon hf_daemon;
static pid_t hf_main_pid;

static void hf_cleanup(void)
{
    if (getpid() == hf_main_pid)
        rd_daemon_cleanup(&hf_daemon);
}

/* Start retryd with @p extra (harness.h, rd_daemon_init); it is stopped
 * when the program exits, unless the program did it first. */
static inline void hf_daemon_start(const char *extra)
{
    CHECK(rd_daemon_init(&hf_daemon, extra) == 0, "init");
    if (hf_main_pid == 0)
        atexit(hf_cleanup);
    hf_main_pid = getpid();
    if (rd_daemon_start(&hf_daemon) != 0) {
        char log[4096];
        rd_daemon_read_log(&hf_daemon, log, sizeof(log));
        CHECK(false, "the daemon did not start: %s", log);
    }
}

/* Attach to the daemon and open upstream @p name; it must be shared. */
static inline retryd_upstream *hf_open(const char *name, retryd_host **ret)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = hf_daemon.control};
    retryd_upstream *up;
    CHECK(retryd_host_open(&o, ret) == 0 && retryd_host_attached(*ret),
          "attach: %s",
          retryd_share_status_name(retryd_host_share_status(*ret)));
    CHECK(retryd_upstream_open(*ret, name, NULL, &up) == 0, "open %s", name);
    CHECK(retryd_upstream_shared(up), "%s is shared", name);
    return up;
}

/* What the host says of @p up now. */
static inline retryd_health hf_health(retryd_upstream *up)
{
    retryd_health h = {.sz = sizeof(h)};
    CHECK(retryd_upstream_health(up, &h) == 0, "health");
    return h;
}

/* Reap @p n children (rd_reap, at most @p timeout_ms each): each must
 * exit 0. */
static inline void hf_reap(const pid_t *pids, int n, int timeout_ms)
{
    for (int i = 0; i < n; i++) {
        int rc = rd_reap(pids[i], timeout_ms);
        CHECK(rc == 0, "child %d (pid %d) ended with %d", i, (int)pids[i], rc);
    }
}

typedef struct hf_wait {
    _Atomic long *flag;
    long v;
} hf_wait;
static inline bool hf_at_least_cond(void *arg)
{
    hf_wait *w = arg;
    return atomic_load(w->flag) >= w->v;
}
/* Wait until *@p flag >= @p v, at most @p timeout_ms: a bounded wait on
 * another process. */
static inline bool hf_wait_for(_Atomic long *flag, long v, int timeout_ms)
{
    hf_wait w = {flag, v};
    return rd_wait_until(hf_at_least_cond, &w, timeout_ms);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * What the fleet tier's programs share (docs/fleet.md): a real
 * redis-server on loopback, several real retryd daemons on this machine,
 * each with its own runtime directory and segment, playing the hosts of
 * one fleet, and client processes forked from the test that attach to one
 * of them through the public API. Plain programs (check.h): a failed CHECK
 * exits, and the daemons and Redis go with the process that started them.
 */
#ifndef RETRYD_TEST_FLEET_FIXTURE_H
#define RETRYD_TEST_FLEET_FIXTURE_H

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "check_fork.h"
#include "harness.h"
#include "redis.h"
#include "retryd/retryd.h"
#include "run.h"

#define FX_MAX_HOSTS 8
#define FX_MS INT64_C(1000000)

static rd_redis fx_redis;
static rd_daemon fx_hosts[FX_MAX_HOSTS];
static int fx_n_hosts;
static pid_t fx_main_pid;
static run_result fx_res; /* the last stats read (big: not on a stack) */

static void fx_cleanup(void)
{
    if (getpid() != fx_main_pid)
        return;
    for (int i = 0; i < fx_n_hosts; i++)
        rd_daemon_cleanup(&fx_hosts[i]);
    rd_redis_cleanup(&fx_redis);
}

/* Redis, or a skip saying why there is none. */
static inline void fx_redis_start(const char *const *extra)
{
    fx_main_pid = getpid();
    atexit(fx_cleanup);
    int r = rd_redis_start(&fx_redis, 0, extra);
    if (r == -ENOENT)
        CHECK_SKIP("redis-server is not installed (Debian: redis-server, "
                   "deploy/install-deps.sh installs it)");
    CHECK(r == 0, "redis-server did not start: %s (see %s)", strerror(-r),
          fx_redis.log);
}

/* Host @p i (host_id "host<i+1>") with [fleet] @p fleet_extra and the
 * sections @p sections after it. */
static inline void fx_host_start(int i, const char *fleet_extra,
                                 const char *sections)
{
    char text[4096];
    snprintf(text, sizeof(text),
             "[fleet]\nredis = %s\nname = fleet-test-%d\nhost_id = "
             "host%d\n%s\n%s",
             fx_redis.addr, (int)fx_main_pid, i + 1,
             fleet_extra ? fleet_extra : "", sections);
    CHECK(rd_daemon_init(&fx_hosts[i], text) == 0, "init host %d", i + 1);
    if (i + 1 > fx_n_hosts)
        fx_n_hosts = i + 1;
    if (rd_daemon_start(&fx_hosts[i]) != 0) {
        char log[4096];
        rd_daemon_read_log(&fx_hosts[i], log, sizeof(log));
        CHECK(false, "host %d did not start: %s", i + 1, log);
    }
}

/* `retrydctl stats --json` of host @p i into fx_res. */
static inline void fx_stats(int i)
{
    CHECK(rd_ctl(&fx_hosts[i], &fx_res, "stats", "--json", NULL) == 0,
          "stats of host %d: %s", i + 1, fx_res.err);
}

/* The number after "key": in fx_res, after @p anchor. */
static inline double fx_number(const char *anchor, const char *key)
{
    double v = rd_json_number(fx_res.out, anchor, key);
    CHECK(!isnan(v), "no \"%s\" after '%s' in %s", key, anchor, fx_res.out);
    return v;
}

/* The JSON object of upstream @p name in fx_res (its text from there). */
static inline const char *fx_upstream(const char *name)
{
    char anchor[128];
    snprintf(anchor, sizeof(anchor), "{\"name\":\"%s\"", name);
    const char *p = strstr(fx_res.out, anchor);
    CHECK(p != NULL, "no upstream %s in %s", name, fx_res.out);
    return p;
}

/* A field of upstream @p name's "fleet" member in fx_res. */
static inline double fx_fleet_number(const char *name, const char *key)
{
    const char *u = fx_upstream(name);
    double v = rd_json_number(u, "\"fleet\":{", key);
    CHECK(!isnan(v), "no fleet \"%s\" of %s in %s", key, name, u);
    return v;
}

/* Whether upstream @p name's fleet view is in force on the last read. */
static inline bool fx_applied(const char *name)
{
    const char *u = fx_upstream(name);
    const char *f = strstr(u, "\"fleet\":{\"applied\":");
    return f != NULL && strncmp(f + 19, "true", 4) == 0;
}

/* The link's state on the last read: "connected", "fallback", ... */
static inline bool fx_state_is(const char *state)
{
    char want[64];
    snprintf(want, sizeof(want), "\"fleet\":{\"state\":\"%s\"", state);
    return strstr(fx_res.out, want) != NULL;
}

typedef struct fx_joined {
    const char *upstream;
    int hosts; /* every host sees this many */
} fx_joined;

/* Every host connected, @p arg's upstream's view in force with all the
 * hosts in it. */
static inline bool fx_all_joined(void *arg)
{
    fx_joined *j = arg;
    for (int i = 0; i < fx_n_hosts; i++) {
        fx_stats(i);
        if (!fx_state_is("connected") || !fx_applied(j->upstream) ||
            fx_fleet_number(j->upstream, "hosts") != j->hosts)
            return false;
    }
    return true;
}

/* A client of host @p i. */
static inline retryd_client *fx_client(int i)
{
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .control_socket = fx_hosts[i].control};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    retryd_client *c;
    CHECK(retryd_client_new(&co, &c) == 0, "client of host %d", i + 1);
    return c;
}

/* A profile of @p client for @p upstream at @p base_url: at most
 * @p attempts attempts, a backoff of a millisecond or two. */
static inline retryd_profile *fx_profile(retryd_client *client,
                                         const char *upstream,
                                         const char *base_url,
                                         uint32_t attempts)
{
    const retryd_backoff_policy backoff = {sizeof(backoff), RETRYD_JITTER_FULL,
                                           FX_MS, 2 * FX_MS, 60000 * FX_MS};
    retryd_profile_opts po = {.sz = sizeof(po),
                              .base_url = base_url,
                              .upstream = upstream,
                              .max_attempts = attempts,
                              .backoff = &backoff};
    retryd_profile *p;
    CHECK(retryd_profile_new(client, &po, &p) == 0, "profile %s", upstream);
    CHECK(retryd_upstream_shared(retryd_profile_budget(p)), "%s is shared",
          upstream);
    return p;
}

static inline void fx_sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * FX_MS};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

#endif

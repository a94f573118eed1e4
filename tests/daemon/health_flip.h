/* SPDX-License-Identifier: MIT */
/*
 * An upstream that fails and heals, for the upstream-health programs and
 * bench/bench_health: faultsrv's /flip answers what its control port's
 * FLIP set, and a busy process sends it requests through the executor at
 * a steady pace, counting those the host throttle kept back. Include
 * after health_fixture.h.
 */
#ifndef RETRYD_TEST_HEALTH_FLIP_H
#define RETRYD_TEST_HEALTH_FLIP_H

#include <stdio.h>
#include <time.h>

#include "srv_log.h"
#include "testsrv.h"

#define HF_MS INT64_C(1000000)

static testsrv *hf_srv;

/* What the busy process and the program share. */
typedef struct hf_busy_state {
    _Atomic long ready, go, stop;
    _Atomic long sent, throttled;
    int period_ms;
    char upstream[64];
} hf_busy_state;

static hf_busy_state *hf_busy_st;

static inline void hf_srv_start(void)
{
    CHECK(testsrv_start(FAULTSRV_PATH, NULL, &hf_srv) == 0, "faultsrv");
}

static inline void hf_sleep_until_ms(int64_t at)
{
    int64_t now = testsrv_now_ms();
    if (at <= now)
        return;
    struct timespec ts = {(at - now) / 1000, (long)((at - now) % 1000) * HF_MS};
    nanosleep(&ts, NULL);
}

/* A client (host flags @p flags) and a profile of upstream @p upstream on
 * the server, one attempt per request: the throttle is about first
 * attempts. */
static inline retryd_profile *hf_profile(retryd_client **client, unsigned flags,
                                         const char *upstream)
{
    const retryd_host_opts ho = {
        .sz = sizeof(ho), .control_socket = hf_daemon.control, .flags = flags};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    CHECK(retryd_client_new(&co, client) == 0, "client");
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(hf_srv));
    retryd_profile_opts po = {.sz = sizeof(po),
                              .base_url = base,
                              .upstream = upstream,
                              .max_attempts = 1};
    retryd_profile *p;
    CHECK(retryd_profile_new(*client, &po, &p) == 0, "profile");
    return p;
}

/* One request; whether the host's health kept it back. */
static inline bool hf_throttled(retryd_profile *p, const char *path)
{
    retryd_request q = {.sz = sizeof(q),
                        .method = "GET",
                        .path = path,
                        .idempotency = RETRYD_IDEMPOTENCY_SAFE};
    retryd_result *r;
    CHECK(retryd_execute(p, &q, &r) == 0, "execute %s", path);
    bool t = retryd_result_outcome(r) == RETRYD_OUTCOME_THROTTLED;
    retryd_result_free(r);
    return t;
}

static inline int hf_busy(int i)
{
    (void)i;
    retryd_client *client;
    retryd_profile *p = hf_profile(&client, 0, hf_busy_st->upstream);
    CHECK(retryd_upstream_shared(retryd_profile_budget(p)), "shared");
    atomic_fetch_add(&hf_busy_st->ready, 1);
    CHECK(hf_wait_for(&hf_busy_st->go, 1, 60000), "go");
    int64_t next = testsrv_now_ms();
    while (!atomic_load(&hf_busy_st->stop)) {
        atomic_fetch_add(hf_throttled(p, "/flip?id=busy")
                             ? &hf_busy_st->throttled
                             : &hf_busy_st->sent,
                         1);
        next += hf_busy_st->period_ms;
        hf_sleep_until_ms(next);
    }
    retryd_profile_free(p);
    retryd_client_free(client);
    return 0;
}

/* Fork the busy process: upstream @p upstream, a request every
 * @p period_ms from when go is set. */
static inline pid_t hf_busy_fork(const char *upstream, int period_ms)
{
    hf_busy_st = check_shared(sizeof(*hf_busy_st));
    hf_busy_st->period_ms = period_ms;
    snprintf(hf_busy_st->upstream, sizeof(hf_busy_st->upstream), "%s",
             upstream);
    return check_fork(hf_busy, 0);
}

/* What /flip answers from now on. */
static inline void hf_flip(int status)
{
    char cmd[32], reply[64];
    snprintf(cmd, sizeof(cmd), "FLIP %d", status);
    CHECK(testsrv_command(hf_srv, cmd, reply, sizeof(reply)) == 0 &&
              strcmp(reply, "OK") == 0,
          "%s: %s", cmd, reply);
}

/* Poll the host's throttle probability of @p up every millisecond, at
 * most @p bound_ms, until it is >= @p threshold (or, when @p rising is
 * false, < it): the milliseconds that took, or -1. *@p last gets the
 * last probability read. */
static inline int64_t hf_until_probability(retryd_upstream *up, bool rising,
                                           double threshold, int bound_ms,
                                           double *last)
{
    int64_t start = testsrv_now_ms();
    for (;;) {
        double p = hf_health(up).probability;
        int64_t now = testsrv_now_ms();
        *last = p;
        if (rising ? p >= threshold : p < threshold)
            return now - start;
        if (now - start > bound_ms)
            return -1;
        hf_sleep_until_ms(now + 1);
    }
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A brownout under adaptive hedging (docs/hedging.md). The upstream
 * answers in 20 ms, but 1 % of its requests stall for 300 ms: the host's
 * latency picture puts the hedge delay at its p98 (20-odd ms) and finds
 * the stalls worth a hedge, so about 2 % of first attempts are hedged.
 * Then every request becomes 10x slower (200 ms; the stalls, 300 ms, no
 * longer out of line): a hedge sent now would answer after its first
 * attempt, and the delay the picture had is stale. Within 3 s the hedge
 * rate must fall to at most 0.5 % of first attempts, measured over the
 * next 4 s: the picture is refreshed once a second, and its new delay
 * comes with the verdict that the tail is gone (no_tail).
 *
 * Then the same brownout with the stale delay kept fixed (25 ms), to show
 * the measurement catches what adaptation prevents: the hedges go on, at
 * what the hedge budget lets through (max_extra_load and its floor).
 *
 * 40 requests stay in flight, through one multi; the hedge rate is read
 * from the upstream's slot (every process's counts). Skipped under the
 * thread sanitizer, whose slowdown would be the upstream's latency.
 */
#include <stdio.h>
#include <string.h>

#include "health_fixture.h"
#include "retryd/multi.h"
#include "testsrv.h"

#define MS INT64_C(1000000)
#define IN_FLIGHT 40

static testsrv *srv;
static retryd_profile *profile;
static retryd_upstream *up;
static retryd_hedge_policy policy = {sizeof(retryd_hedge_policy),
                                     RETRYD_HEDGE_ADAPTIVE, 0, 1};

typedef struct slot {
    char path[96];
    retryd_request req;
    struct loop *loop;
} slot;

typedef struct loop {
    retryd_multi *m;
    slot slots[IN_FLIGHT];
    long next, failed;
    bool stopping;
} loop;

static void submit(loop *l, slot *s);

static void done(void *ctx, retryd_call *call, int err, retryd_result *r)
{
    slot *s = ctx;
    (void)call;
    if (err != 0 || retryd_result_status(r) != 200)
        s->loop->failed++;
    retryd_result_free(r);
    if (!s->loop->stopping)
        submit(s->loop, s);
}

static void submit(loop *l, slot *s)
{
    s->loop = l;
    snprintf(s->path, sizeof(s->path),
             "/tail?ms=20&stall_ms=300&per_mille=10&id=r%ld", l->next++);
    s->req = (retryd_request){.sz = sizeof(retryd_request),
                              .path = s->path,
                              .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                              .deadline_ns = 10000 * MS,
                              .hedge = &policy};
    CHECK(retryd_multi_submit(l->m, profile, &s->req, done, s, NULL) == 0,
          "submit");
}

/* Drive the loop until @p until_ms (the server's ids forgotten now and
 * then: its tables stay small). */
static void run_until(loop *l, int64_t until_ms)
{
    int64_t reset_at = testsrv_now_ms() + 2000;
    while (testsrv_now_ms() < until_ms) {
        int r = retryd_multi_run(l->m, 20 * MS);
        CHECK(r == 0 || r == RETRYD_ETIMEDOUT, "run: %d", r);
        if (testsrv_now_ms() >= reset_at) {
            (void)testsrv_reset(srv);
            reset_at += 2000;
        }
    }
}

static retryd_hedging hedging(void)
{
    retryd_hedging h = {.sz = sizeof(h)};
    CHECK(retryd_upstream_hedging(up, &h) == 0, "hedging");
    return h;
}

typedef struct rate {
    double rate;
    uint64_t sent, firsts;
} rate;

/* Hedges sent per hedgeable first attempt from @p a to @p b. */
static rate rate_between(const retryd_hedging *a, const retryd_hedging *b)
{
    rate r = {0, b->sent - a->sent, b->deposits - a->deposits};
    r.rate = r.firsts ? (double)r.sent / (double)r.firsts : 0;
    return r;
}

int main(void)
{
#if defined(__SANITIZE_THREAD__)
    CHECK_SKIP("the thread sanitizer's slowdown would be the upstream's "
               "latency: the brownout's timing means nothing there");
#endif
    hf_daemon_start("[upstream brown]\nratio = 1\nmin_retries_per_sec = 100\n"
                    "cap = 1000\nhedge_window = 1s\n");
    CHECK(testsrv_start(FAULTSRV_PATH, NULL, &srv) == 0, "faultsrv");
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .control_socket = hf_daemon.control};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    retryd_client *client;
    CHECK(retryd_client_new(&co, &client) == 0, "client");
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    retryd_profile_opts po = {.sz = sizeof(po),
                              .base_url = base,
                              .upstream = "brown",
                              .bulkhead = 4 * IN_FLIGHT,
                              .max_attempts = 1};
    CHECK(retryd_profile_new(client, &po, &profile) == 0, "profile");
    up = retryd_profile_budget(profile);
    loop l = {0};
    CHECK(retryd_multi_new(client, NULL, &l.m) == 0, "multi");
    for (int i = 0; i < IN_FLIGHT; i++)
        submit(&l, &l.slots[i]);

    /* Steady: the picture sees the stalls and hedges them. */
    run_until(&l, testsrv_now_ms() + 2000);
    retryd_hedging h0 = hedging();
    run_until(&l, testsrv_now_ms() + 2000);
    retryd_hedging h1 = hedging();
    rate steady = rate_between(&h0, &h1);
    CHECK(h1.picture == RETRYD_HEDGE_PICTURE_FRESH,
          "a steady upstream's picture is fresh: %s",
          retryd_hedge_picture_name(h1.picture));
    CHECK(steady.rate >= 0.005,
          "hedging was on before the brownout: %.4f (%llu of %llu)",
          steady.rate, (unsigned long long)steady.sent,
          (unsigned long long)steady.firsts);

    /* The brownout. */
    CHECK(testsrv_command(srv, "SCALE 1000", (char[16]){0}, 16) == 0, "SCALE");
    int64_t onset = testsrv_now_ms();
    run_until(&l, onset + 3000);
    retryd_hedging h2 = hedging();
    run_until(&l, onset + 7000);
    retryd_hedging h3 = hedging();
    rate brown = rate_between(&h2, &h3);
    CHECK(brown.firsts >= 400, "enough first attempts to measure: %llu",
          (unsigned long long)brown.firsts);
    CHECK(brown.rate <= 0.005,
          "3 s into the brownout the hedge rate is %.4f (%llu hedges of %llu "
          "first attempts)",
          brown.rate, (unsigned long long)brown.sent,
          (unsigned long long)brown.firsts);
    CHECK(h3.picture == RETRYD_HEDGE_PICTURE_NO_TAIL,
          "the picture says why: %s (delay %.1f ms)",
          retryd_hedge_picture_name(h3.picture), (double)h3.delay_ns / 1e6);

    /* The same brownout with the stale delay, fixed: the hedges go on. */
    policy = (retryd_hedge_policy){sizeof(retryd_hedge_policy),
                                   RETRYD_HEDGE_FIXED, 25 * MS, 1};
    retryd_hedging h4 = hedging();
    run_until(&l, testsrv_now_ms() + 3000);
    retryd_hedging h5 = hedging();
    rate stale = rate_between(&h4, &h5);
    CHECK(stale.rate > 0.005,
          "a fixed stale delay keeps hedging: %.4f (%llu of %llu)", stale.rate,
          (unsigned long long)stale.sent, (unsigned long long)stale.firsts);
    printf("hedge_brownout: hedge rate %.2f%% steady (%llu of %llu first "
           "attempts), %.2f%% from 3 s to 7 s into a 10x brownout (%llu of "
           "%llu; picture %s), %.2f%% with the stale delay fixed (%llu of "
           "%llu: the hedge budget's bound)\n",
           100 * steady.rate, (unsigned long long)steady.sent,
           (unsigned long long)steady.firsts, 100 * brown.rate,
           (unsigned long long)brown.sent, (unsigned long long)brown.firsts,
           retryd_hedge_picture_name(h3.picture), 100 * stale.rate,
           (unsigned long long)stale.sent, (unsigned long long)stale.firsts);

    l.stopping = true;
    CHECK(retryd_multi_run(l.m, 20000 * MS) == 0, "the last requests ended");
    CHECK(l.failed == 0, "%ld requests failed", l.failed);
    retryd_multi_free(l.m);
    retryd_profile_free(profile);
    retryd_client_free(client);
    testsrv_stop(srv);
    return 0;
}

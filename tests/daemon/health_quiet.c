/* SPDX-License-Identifier: MIT */
/*
 * Quiet processes under the host throttle (docs/health.md, issue 18's
 * first measurement): one busy process sends ~200 requests/s and 31 quiet
 * ones one request every 10 s each, all through the executor, to one real
 * upstream on loopback (faultsrv's /flip); the upstream flips to 100 %
 * 503 without Retry-After. During the outage each quiet process sends
 * every request twice, at the same moment:
 *
 *   host         through a client attached to the daemon, upstream "api"
 *                with adaptive_throttle = on and a 1 s window: the throttle
 *                fed by every process, the busy one above all;
 *   per process  through a second client of the same process, local only
 *                (RETRYD_HOST_LOCAL_ONLY), whose process-local slot gets
 *                the same health parameters: the same code, the same
 *                arithmetic, on a window that holds this process's own
 *                requests alone, as in every per-client throttle.
 *
 * Each request has one attempt (no retries: the throttle is about first
 * attempts). The server logs when each arrived; the quiet processes'
 * arrivals during the outage through the host throttle must be at most
 * 10 % of those through the per-process one. A quiet process sees one of
 * its own requests per window at most, so its own throttle never engages:
 * the regime where local estimates fail.
 */
#include <stdio.h>

#include "budget/host.h"
#include "health_fixture.h"
#include "health_flip.h"
#include "shared/health.h"

#define QUIET 31
#define BUSY_PERIOD_MS 5 /* ~200 requests/s */
#define QUIET_PERIOD_MS 10000
#define WARM_MS 2000 /* healthy, before the flip: two windows */
/* Four requests of every quiet process: what reaches the upstream through
 * the host throttle is the ones in its first window (before it engages)
 * and the few that claim a slot's probe (docs/health.md), about 2 % of
 * them; 124 per process make 10 % a bound with room. */
#define OUTAGE_MS 40000
#define WINDOW_NS (1000 * HF_MS)
#define BOUND_MS 70000

typedef struct shared {
    _Atomic long ready, flip_ms; /* the server's clock when the flip took */
} shared;

static shared *sh;

static int quiet(int i)
{
    retryd_client *host_client, *own_client;
    retryd_profile *host = hf_profile(&host_client, 0, "api");
    retryd_profile *own =
        hf_profile(&own_client, RETRYD_HOST_LOCAL_ONLY, "api");
    CHECK(retryd_upstream_shared(retryd_profile_budget(host)), "shared");
    retryd_upstream *local = retryd_profile_budget(own);
    CHECK(!retryd_upstream_shared(local), "local only");
    /* The host's parameters for "api", on this process's own slot. */
    const health_params params = {
        .flags = SEG_HEALTH_THROTTLE | SEG_HEALTH_PUSHBACK,
        .k_micro = 2 * SEG_MICRO,
        .window_ns = WINDOW_NS,
        .min_processes = 1,
        .pushback_max_ns = 60000 * HF_MS,
    };
    retryd__health_init(&local->local, &params);
    atomic_fetch_add(&sh->ready, 1);
    CHECK(hf_wait_for(&sh->flip_ms, 1, BOUND_MS), "the flip");
    /* Spread over the period, the same way in every run. */
    int64_t flip = atomic_load(&sh->flip_ms);
    for (int64_t at = flip + (2 * i + 1) * QUIET_PERIOD_MS / (2 * QUIET);
         at < flip + OUTAGE_MS; at += QUIET_PERIOD_MS) {
        hf_sleep_until_ms(at);
        (void)hf_throttled(host, "/flip?id=host");
        (void)hf_throttled(own, "/flip?id=own");
    }
    retryd_profile_free(own);
    retryd_profile_free(host);
    retryd_client_free(own_client);
    retryd_client_free(host_client);
    return 0;
}

/* Arrivals of @p id at the server in [from, to). */
static long arrivals_between(const char *id, int64_t from, int64_t to)
{
    static int64_t at[4096];
    long n = srv_log_times(hf_srv, id, at, sizeof(at) / sizeof(at[0]));
    CHECK(n >= 0, "TIMES %s", id);
    long in = 0;
    for (long k = 0; k < n; k++)
        in += at[k] >= from && at[k] < to;
    return in;
}

int main(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* 33 processes for 40 s measure a ratio of attempts, meaningful at the
     * plain build's speed; under a sanitizer they only load the machine
     * that the other suites share. Their code paths run sanitized in
     * health_window, health_pushback and health_reaction. */
    CHECK_SKIP("health_quiet runs in the plain build only");
#endif
    hf_daemon_start("process_capacity = 128\nprocess_slots_per_uid = 128\n"
                    "connections_unattached = 512\nconnections_per_uid = 512\n"
                    "[upstream api]\nadaptive_throttle = on\n"
                    "throttle_window = 1s\n");
    hf_srv_start();
    sh = check_shared(sizeof(*sh));
    pid_t pids[QUIET + 1];
    pids[0] = hf_busy_fork("api", BUSY_PERIOD_MS);
    for (int i = 0; i < QUIET; i++)
        pids[i + 1] = check_fork(quiet, i);
    CHECK(hf_wait_for(&sh->ready, QUIET, BOUND_MS) &&
              hf_wait_for(&hf_busy_st->ready, 1, BOUND_MS),
          "ready");

    atomic_store(&hf_busy_st->go, 1);
    hf_sleep_until_ms(testsrv_now_ms() + WARM_MS);
    hf_flip(503);
    int64_t flipped = testsrv_now_ms();
    atomic_store(&sh->flip_ms, (long)flipped);
    hf_sleep_until_ms(flipped + OUTAGE_MS);
    hf_flip(200);
    int64_t healed = testsrv_now_ms();
    hf_reap(pids + 1, QUIET, BOUND_MS);
    atomic_store(&hf_busy_st->stop, 1);
    hf_reap(pids, 1, BOUND_MS);

    long host = arrivals_between("host", flipped, healed);
    long own = arrivals_between("own", flipped, healed);
    long scheduled = QUIET * (OUTAGE_MS / QUIET_PERIOD_MS);
    printf("quiet: %d quiet processes, %ld requests each way in a %d s "
           "outage; reached the upstream: host throttle %ld, per-process "
           "throttle %ld (%.1f %%); busy: %ld sent, %ld throttled in the whole "
           "run\n",
           QUIET, scheduled, OUTAGE_MS / 1000, host, own,
           own ? 100.0 * (double)host / (double)own : 0.0,
           atomic_load(&hf_busy_st->sent), atomic_load(&hf_busy_st->throttled));
    CHECK(own >= scheduled * 9 / 10,
          "per process, %ld of %ld quiet requests reached the upstream: the "
          "quiet ones' own throttles were not supposed to engage",
          own, scheduled);
    CHECK(atomic_load(&hf_busy_st->throttled) > 0, "the host throttle engaged");
    CHECK(host * 10 <= own,
          "through the host throttle %ld quiet requests reached the upstream, "
          "more than 10 %% of the %ld per process",
          host, own);
    testsrv_stop(hf_srv);
    CHECK(rd_daemon_stop_or_show_log(&hf_daemon, SIGTERM) == 0,
          "the daemon exits cleanly");
    return 0;
}

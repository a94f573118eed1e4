/* SPDX-License-Identifier: MIT */
/*
 * The host throttle engages as an upstream fails and lets go once it
 * heals (docs/health.md): a busy process (~200 requests/s, through the
 * executor) and a real upstream on loopback that flips to 100 % 503, then
 * back to 200. Only the order of things is asserted, with generous
 * bounds: the host probability rises to 0.5 or more during the outage,
 * and falls below 0.05 after the healing. How fast, against issue 18's
 * targets, is bench/bench_health's to measure.
 */
#include "health_fixture.h"
#include "health_flip.h"

#define WINDOW_MS 1000
#define BOUND_MS 30000 /* thirty windows: an order, not a speed */

int main(void)
{
    hf_daemon_start("[upstream api]\nadaptive_throttle = on\n"
                    "throttle_window = 1s\n");
    hf_srv_start();
    pid_t busy = hf_busy_fork("api", 5);
    CHECK(hf_wait_for(&hf_busy_st->ready, 1, BOUND_MS), "ready");
    retryd_host *h;
    retryd_upstream *up = hf_open("api", &h);
    atomic_store(&hf_busy_st->go, 1);
    hf_sleep_until_ms(testsrv_now_ms() + 2 * WINDOW_MS);
    double p;
    CHECK(hf_health(up).probability == 0, "healthy: p %f",
          hf_health(up).probability);

    hf_flip(503);
    int64_t rose = hf_until_probability(up, true, 0.5, BOUND_MS, &p);
    CHECK(rose >= 0, "p only %f after %d ms of outage", p, BOUND_MS);
    long throttled = atomic_load(&hf_busy_st->throttled);
    /* Held at that for another window, then healed. */
    hf_sleep_until_ms(testsrv_now_ms() + WINDOW_MS);
    CHECK(hf_health(up).probability >= 0.5, "the outage goes on: p %f",
          hf_health(up).probability);
    hf_flip(200);
    int64_t fell = hf_until_probability(up, false, 0.05, BOUND_MS, &p);
    CHECK(fell >= 0, "p still %f %d ms after the healing", p, BOUND_MS);
    printf("reaction: p >= 0.5 after %lld ms of outage; < 0.05 %lld ms after "
           "the healing (window %d ms; bench_health measures these)\n",
           (long long)rose, (long long)fell, WINDOW_MS);
    CHECK(throttled > 0 || atomic_load(&hf_busy_st->throttled) > 0,
          "the busy process was throttled");
    atomic_store(&hf_busy_st->stop, 1);
    hf_reap(&busy, 1, BOUND_MS);
    retryd_host_close(h);
    testsrv_stop(hf_srv);
    CHECK(rd_daemon_stop_or_show_log(&hf_daemon, SIGTERM) == 0,
          "the daemon exits cleanly");
    return 0;
}

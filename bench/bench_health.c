/* SPDX-License-Identifier: MIT */
/*
 * The host throttle's reaction and recovery (issue 18, docs/health.md):
 * a real daemon, a busy process sending ~200 requests/s through the
 * executor, and a real upstream on loopback (faultsrv's /flip) that flips
 * to 100 % 503 and back. Per throttle_window and round it measures, on
 * the host probability as retryd_upstream_health() reads it every
 * millisecond:
 *
 *   reaction  from the flip to p >= 0.5      target: within 2 s
 *   recovery  from the healing to p < 0.05   target: within one window
 *                                            plus one slot (window / 8)
 *
 * The upstream stays down for two windows after the reaction, so the
 * window is full of the outage when it heals, and up for two windows
 * between rounds. The busy process's pace and what reached the upstream
 * are printed with the figures: the reaction depends on the traffic that
 * feeds the window.
 *
 * usage: bench_health [rounds] [window-seconds...]   (default: 3 1 2)
 */
#include <stdio.h>
#include <stdlib.h>

#include "health_fixture.h"
#include "health_flip.h"

#define BUSY_PERIOD_MS 5
#define BOUND_MS 60000

typedef struct figures {
    int64_t reaction_ms, recovery_ms;
} figures;

static figures round_of(retryd_upstream *up, int window_ms)
{
    double p;
    figures f;
    hf_flip(503);
    f.reaction_ms = hf_until_probability(up, true, 0.5, BOUND_MS, &p);
    CHECK(f.reaction_ms >= 0, "p only %f after %d ms of outage", p, BOUND_MS);
    hf_sleep_until_ms(testsrv_now_ms() + 2 * window_ms);
    hf_flip(200);
    f.recovery_ms = hf_until_probability(up, false, 0.05, BOUND_MS, &p);
    CHECK(f.recovery_ms >= 0, "p still %f %d ms after the healing", p,
          BOUND_MS);
    hf_sleep_until_ms(testsrv_now_ms() + 2 * window_ms);
    return f;
}

static void run_window(int window_s, int rounds)
{
    char config[256];
    snprintf(config, sizeof(config),
             "[upstream api]\nadaptive_throttle = on\nthrottle_window = %ds\n",
             window_s);
    hf_daemon_start(config);
    hf_srv_start();
    pid_t busy = hf_busy_fork("api", BUSY_PERIOD_MS);
    CHECK(hf_wait_for(&hf_busy_st->ready, 1, BOUND_MS), "ready");
    retryd_host *h;
    retryd_upstream *up = hf_open("api", &h);
    int window_ms = window_s * 1000;
    atomic_store(&hf_busy_st->go, 1);
    int64_t began = testsrv_now_ms();
    hf_sleep_until_ms(began + 2 * window_ms);
    for (int r = 0; r < rounds; r++) {
        figures f = round_of(up, window_ms);
        int64_t target = window_ms + window_ms / 8;
        printf("%-8d %-6d %8lld ms %-7s %8lld ms %-7s\n", window_s, r + 1,
               (long long)f.reaction_ms,
               f.reaction_ms <= 2000 ? "met" : "MISSED",
               (long long)f.recovery_ms,
               f.recovery_ms <= target ? "met" : "MISSED");
    }
    int64_t took = testsrv_now_ms() - began;
    long sent = atomic_load(&hf_busy_st->sent);
    long throttled = atomic_load(&hf_busy_st->throttled);
    printf("         busy: %.0f requests/s over %.1f s, %ld sent, %ld "
           "throttled\n",
           (double)(sent + throttled) * 1000.0 / (double)took,
           (double)took / 1000.0, sent, throttled);
    atomic_store(&hf_busy_st->stop, 1);
    hf_reap(&busy, 1, BOUND_MS);
    retryd_host_close(h);
    testsrv_stop(hf_srv);
    CHECK(rd_daemon_stop_or_show_log(&hf_daemon, SIGTERM) == 0,
          "the daemon exits cleanly");
    rd_daemon_cleanup(&hf_daemon);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    static const int default_windows[] = {1, 2};
    CHECK(rounds >= 1 && rounds <= 100, "usage: bench_health [rounds] "
                                        "[window-seconds...]");
    printf("bench_health: a busy process at ~%d requests/s; p as "
           "retryd_upstream_health reads it, every ms\n",
           1000 / BUSY_PERIOD_MS);
    printf("targets: reaction (flip -> p >= 0.5) <= 2000 ms; recovery "
           "(heal -> p < 0.05) <= window + window/8\n");
    printf("%-8s %-6s %11s %-7s %11s %-7s\n", "window", "round", "reaction", "",
           "recovery", "");
    if (argc > 2)
        for (int i = 2; i < argc; i++) {
            int w = atoi(argv[i]);
            CHECK(w >= 1 && w <= 3600, "a window of 1 to 3600 s: %s", argv[i]);
            run_window(w, rounds);
        }
    else
        for (size_t i = 0; i < sizeof(default_windows) / sizeof(int); i++)
            run_window(default_windows[i], rounds);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Fair shares of one host budget (docs/budget.md#fair-shares), with a real
 * daemon and real client processes forked from the test, through the
 * public budget API. Each upstream has ratio 1 and no floor, so a process
 * earns exactly one token per first attempt. A "request" is a deposit (its
 * first attempt), a pause (the attempt failing, and its backoff), then a
 * withdrawal (its retry).
 *
 *   greedy     a modest process makes 20 requests that fail once each:
 *              alone it gets 20 of 20 retries; beside a greedy process
 *              (2000 requests/s, every one failing, two retries each) it
 *              must keep at least 95 % of that, where the first-come
 *              bucket of an upstream with fair_shares = off, measured in
 *              the same run, leaves it almost nothing.
 *   jain       1 greedy + 9 modest processes: Jain's index over the
 *              entitlement-normalised grants (grants / tokens earned) is
 *              at least 0.95, against the first-come figure beside it.
 *   alone      a process alone, over its share all the time, gets every
 *              token it earned, and never a share refusal.
 *   weights    two programs weighted 3:1 ([program NAME] weight), equally
 *              busy and both over their shares: grants within 5 % of 3:1.
 *   exits      2000 processes deposit (and so claim) and are killed -9;
 *              afterwards every process slot is free again and a new
 *              process alone can spend every token they left: no claim
 *              outlives its process.
 *
 * Figures are printed, side by side where there is a baseline; the checks
 * are on the bounds the issue sets. Pauses are between a request's steps,
 * not waits for a condition: what they make is the contention.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

#include "health_fixture.h"

#define NS_PER_S 1000000000LL
#define BOUND_MS 60000
#define MODEST_REQUESTS 20
#define MODEST_GAP_NS                                                          \
    (10 * 1000000LL) /* between a modest process's requests                    \
                      */
#define MODEST_PAUSE_NS (20 * 1000000LL) /* its first attempt to its retry */
#define GREEDY_RATE 2000                 /* requests per second */
#define JAIN_MODEST 9
#define EXITS 2000
#define EXIT_WAVE 100

static const char *const config_text =
    "process_capacity = 2048\nprocess_slots_per_uid = 2048\n"
    "[defaults]\nratio = 1\nmin_retries_per_sec = 0\ncap = 20\n"
    "[upstream fs]\n[upstream fcfs]\nfair_shares = off\n"
    "[upstream jain]\n[upstream jain_fcfs]\nfair_shares = off\n"
    "[upstream alone]\ncap = 100000\n"
    "[upstream weights]\ncap = 100000\n"
    "[upstream exits]\ncap = 100000\nshare_window = 1h\n"
    "[program heavy]\nweight = 3\n[program light]\nweight = 1\n";

/* What the processes report, in memory they all share. */
typedef struct board {
    _Atomic long greedy_requests; /* the greedy process's, so far */
    _Atomic long stop;            /* the greedy processes stop */
    _Atomic long grants[16];      /* per process of a case */
    _Atomic long deposits[16];
    _Atomic long share_refusals[16];
    _Atomic long exits_ready;
} board;

static board *B;
static const char *upstream_of_case; /* the greedy and modest processes' */

static void sleep_ns(long long ns)
{
    struct timespec ts = {ns / NS_PER_S, ns % NS_PER_S};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* Sleep until @p at (CLOCK_MONOTONIC ns). */
static void sleep_until(long long at)
{
    struct timespec ts = {at / NS_PER_S, at % NS_PER_S};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void name_process(const char *name)
{
    CHECK(prctl(PR_SET_NAME, name, 0, 0, 0) == 0, "PR_SET_NAME");
}

/* A greedy process: GREEDY_RATE requests per second until told to stop,
 * each a deposit and two withdrawals (every request fails, twice). */
static int greedy(int i)
{
    retryd_host *h;
    retryd_upstream *up = hf_open(upstream_of_case, &h);
    long long start = now_ns();
    for (long n = 0; !atomic_load(&B->stop); n++) {
        sleep_until(start + n * NS_PER_S / GREEDY_RATE);
        CHECK(retryd_upstream_deposit(up) == 0, "deposit");
        atomic_fetch_add(&B->deposits[i], 1);
        for (int k = 0; k < 2; k++)
            if (retryd_upstream_withdraw(up) == 0)
                atomic_fetch_add(&B->grants[i], 1);
        atomic_fetch_add(&B->greedy_requests, 1);
    }
    retryd_host_close(h);
    return 0;
}

/* A modest process: MODEST_REQUESTS requests, each failing once. */
static int modest(int i)
{
    retryd_host *h;
    retryd_upstream *up = hf_open(upstream_of_case, &h);
    for (int n = 0; n < MODEST_REQUESTS; n++) {
        CHECK(retryd_upstream_deposit(up) == 0, "deposit");
        atomic_fetch_add(&B->deposits[i], 1);
        sleep_ns(MODEST_PAUSE_NS);
        int r = retryd_upstream_withdraw(up);
        if (r == 0)
            atomic_fetch_add(&B->grants[i], 1);
        else if (r == RETRYD_ESHARE)
            atomic_fetch_add(&B->share_refusals[i], 1);
        sleep_ns(MODEST_GAP_NS);
    }
    retryd_host_close(h);
    return 0;
}

static void clear_board(void)
{
    memset(B, 0, sizeof(*B));
}

/* Run @p n_modest modest processes (board slots 1..n) on @p upstream,
 * beside a greedy one (slot 0) when @p with_greedy, and wait for them.
 * The modest ones start once the greedy one has made a second's worth of
 * requests (the bucket has run short by then). */
static void run_case(const char *upstream, int n_modest, bool with_greedy)
{
    pid_t g = -1, m[JAIN_MODEST];
    clear_board();
    upstream_of_case = upstream;
    if (with_greedy) {
        g = check_fork(greedy, 0);
        CHECK(hf_wait_for(&B->greedy_requests, GREEDY_RATE, BOUND_MS),
              "the greedy process got going");
    }
    for (int i = 0; i < n_modest; i++)
        m[i] = check_fork(modest, i + 1);
    hf_reap(m, n_modest, BOUND_MS);
    atomic_store(&B->stop, 1);
    if (with_greedy)
        hf_reap(&g, 1, BOUND_MS);
}

static void case_greedy(void)
{
    run_case("fs", 1, false);
    long alone = atomic_load(&B->grants[1]);
    run_case("fs", 1, true);
    long fair = atomic_load(&B->grants[1]);
    long refused = atomic_load(&B->share_refusals[1]);
    long greedy_got = atomic_load(&B->grants[0]);
    long greedy_earned = atomic_load(&B->deposits[0]);
    run_case("fcfs", 1, true);
    long fcfs = atomic_load(&B->grants[1]);
    printf("greedy neighbour: the modest process got %ld of %d retries "
           "alone, %ld beside the greedy one with fair shares (%ld refused "
           "over its share; the greedy one got %ld for %ld earned), %ld "
           "first come, first served\n",
           alone, MODEST_REQUESTS, fair, refused, greedy_got, greedy_earned,
           fcfs);
    CHECK(alone == MODEST_REQUESTS, "alone it gets what it earned: %ld", alone);
    CHECK(fair * 100 >= alone * 95, "fair shares keep >= 95 %%: %ld of %ld",
          fair, alone);
    CHECK(greedy_got <= greedy_earned + MODEST_REQUESTS,
          "the greedy process took no more than there was");
}

/* Jain's index of @p x[0..n). */
static double jain(const double *x, int n)
{
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++)
        sum += x[i], sq += x[i] * x[i];
    return sq > 0 ? sum * sum / (n * sq) : 0;
}

static double jain_of_board(void)
{
    double x[JAIN_MODEST + 1];
    for (int i = 0; i <= JAIN_MODEST; i++) {
        long earned = atomic_load(&B->deposits[i]);
        x[i] = earned ? (double)atomic_load(&B->grants[i]) / (double)earned : 0;
    }
    return jain(x, JAIN_MODEST + 1);
}

static void case_jain(void)
{
    run_case("jain", JAIN_MODEST, true);
    double fair = jain_of_board();
    long modest_fair = 0;
    for (int i = 1; i <= JAIN_MODEST; i++)
        modest_fair += atomic_load(&B->grants[i]);
    run_case("jain_fcfs", JAIN_MODEST, true);
    double fcfs = jain_of_board();
    long modest_fcfs = 0;
    for (int i = 1; i <= JAIN_MODEST; i++)
        modest_fcfs += atomic_load(&B->grants[i]);
    printf("jain, 1 greedy + %d modest: index %.3f with fair shares (modest "
           "processes got %ld of %d), %.3f first come, first served (%ld)\n",
           JAIN_MODEST, fair, modest_fair, JAIN_MODEST * MODEST_REQUESTS, fcfs,
           modest_fcfs);
    CHECK(fair >= 0.95, "Jain's index %.3f >= 0.95", fair);
}

/* A process alone, always over its share: N requests that each want two
 * retries, then it spends until refused. It must get every token. */
static int alone_proc(int i)
{
    retryd_host *h;
    retryd_upstream *up = hf_open("alone", &h);
    enum { N = 5000 };
    long got = 0, share = 0;
    for (int n = 0; n < N; n++) {
        CHECK(retryd_upstream_deposit(up) == 0, "deposit");
        for (int k = 0; k < 2; k++) {
            int r = retryd_upstream_withdraw(up);
            got += r == 0;
            share += r == RETRYD_ESHARE;
        }
    }
    for (int r = 0; r == 0;) {
        r = retryd_upstream_withdraw(up);
        got += r == 0;
        share += r == RETRYD_ESHARE;
    }
    atomic_store(&B->grants[i], got);
    atomic_store(&B->share_refusals[i], share);
    retryd_host_close(h);
    return 0;
}

static void case_alone(void)
{
    clear_board();
    pid_t p = check_fork(alone_proc, 0);
    hf_reap(&p, 1, BOUND_MS);
    long got = atomic_load(&B->grants[0]);
    printf("alone: %ld of 5000 tokens earned were granted, %ld share "
           "refusals\n",
           got, atomic_load(&B->share_refusals[0]));
    CHECK(got == 5000, "a process alone gets the whole budget: %ld", got);
    CHECK(atomic_load(&B->share_refusals[0]) == 0, "and is never refused "
                                                   "over its share");
}

/* Weighted: equally busy, both over their shares, in programs "heavy"
 * and "light"; grants are counted once the daemon's factors are in force
 * (after two heartbeats). */
static int weighted(int i)
{
    name_process(i == 0 ? "heavy" : "light");
    retryd_host *h;
    retryd_upstream *up = hf_open("weights", &h);
    long long start = now_ns(), counted_from = start + 3 * NS_PER_S;
    for (long n = 0; !atomic_load(&B->stop); n++) {
        sleep_until(start + n * NS_PER_S / GREEDY_RATE);
        bool count = now_ns() >= counted_from;
        CHECK(retryd_upstream_deposit(up) == 0, "deposit");
        for (int k = 0; k < 2; k++)
            if (retryd_upstream_withdraw(up) == 0 && count)
                atomic_fetch_add(&B->grants[i], 1);
        if (count)
            atomic_fetch_add(&B->deposits[i], 1);
    }
    retryd_host_close(h);
    return 0;
}

static void case_weights(void)
{
    clear_board();
    pid_t p[2] = {check_fork(weighted, 0), check_fork(weighted, 1)};
    /* Three seconds to settle, then four counted at 2000 requests/s. */
    CHECK(hf_wait_for(&B->deposits[0], 4 * GREEDY_RATE, BOUND_MS) &&
              hf_wait_for(&B->deposits[1], 4 * GREEDY_RATE, BOUND_MS),
          "both ran");
    atomic_store(&B->stop, 1);
    hf_reap(p, 2, BOUND_MS);
    double heavy = (double)atomic_load(&B->grants[0]);
    double light = (double)atomic_load(&B->grants[1]);
    double ratio = light > 0 ? heavy / light : INFINITY;
    printf("weights 3:1: heavy got %.0f, light %.0f grants: %.3f:1\n", heavy,
           light, ratio);
    CHECK(fabs(ratio - 3) <= 0.15, "grants %.3f:1, within 5 %% of 3:1", ratio);
}

/* One of the exits case's processes: deposit (a claim, once the bucket
 * has run short), say so, and wait to be killed. */
static int exiting(int i)
{
    (void)i;
    /* A wave attaches at once: more than the daemon's unattached
     * connections (64), so some wait their turn; a generous bound on each
     * exchange keeps a loaded machine from sending them local. */
    retryd_host_opts o = {.sz = sizeof(o),
                          .control_socket = hf_daemon.control,
                          .timeout_ms = 20000};
    retryd_host *h;
    retryd_upstream *up;
    CHECK(retryd_host_open(&o, &h) == 0, "host");
    CHECK(retryd_upstream_open(h, "exits", NULL, &up) == 0, "open exits");
    /* A process whose unattached connection the daemon shed (one user
     * holds a bounded number of them, and a wave is 100 of that user's
     * processes) spends locally and attaches again at its next operation,
     * at most once a second: what this case proves is what an exit
     * leaves, so each waits until it shares (a peek is an operation that
     * spends nothing). */
    for (int t = 0; !retryd_upstream_shared(up); t++) {
        CHECK(t < 40, "attach: %s",
              retryd_share_status_name(retryd_host_share_status(h)));
        double b;
        (void)retryd_upstream_balance(up, &b);
        struct timespec nap = {0, 500000000};
        nanosleep(&nap, NULL);
    }
    for (int n = 0; n < 3; n++)
        CHECK(retryd_upstream_deposit(up) == 0, "deposit");
    atomic_fetch_add(&B->exits_ready, 1);
    for (;;)
        pause();
}

static bool no_process_attached(void *arg)
{
    (void)arg;
    run_result res;
    if (rd_ctl(&hf_daemon, &res, "stats", "--json", NULL) != 0)
        return false;
    return rd_json_number(res.out, "\"daemon\"", "attached_processes") == 0;
}

static void case_exits(void)
{
    clear_board();
    /* The bucket runs short first, so that the deposits below claim. */
    {
        retryd_host *h;
        retryd_upstream *up = hf_open("exits", &h);
        CHECK(retryd_upstream_withdraw(up) == RETRYD_EBUDGET, "empty");
        retryd_host_close(h);
    }
    pid_t *pids = calloc(EXITS, sizeof(*pids));
    CHECK(pids != NULL, "calloc");
    for (int w = 0; w < EXITS; w += EXIT_WAVE) {
        for (int i = w; i < w + EXIT_WAVE; i++)
            pids[i] = check_fork(exiting, i);
        if (!hf_wait_for(&B->exits_ready, w + EXIT_WAVE, BOUND_MS)) {
            static char log[1 << 22];
            ssize_t n = rd_daemon_read_log(&hf_daemon, log, sizeof(log));
            CHECK(false,
                  "wave %d: %ld of %d attached; the daemon's log "
                  "ends: %s",
                  w / EXIT_WAVE, atomic_load(&B->exits_ready) - w, EXIT_WAVE,
                  n > 4096 ? log + n - 4096
                  : n > 0  ? log
                           : "");
        }
        for (int i = w; i < w + EXIT_WAVE; i++)
            CHECK(kill(pids[i], SIGKILL) == 0, "kill");
        for (int i = w; i < w + EXIT_WAVE; i++)
            CHECK(rd_reap(pids[i], BOUND_MS) == -SIGKILL, "killed");
    }
    free(pids);
    CHECK(rd_wait_until(no_process_attached, NULL, BOUND_MS),
          "every slot is free again");
    /* Their 6000 tokens are nobody's now: a new process alone spends them
     * all, never refused over a share. */
    retryd_host *h;
    retryd_upstream *up = hf_open("exits", &h);
    long got = 0, share = 0;
    for (int r = 0; r == 0 || r == RETRYD_ESHARE;) {
        r = retryd_upstream_withdraw(up);
        got += r == 0;
        share += r == RETRYD_ESHARE;
        CHECK(share == 0,
              "refused over a share after %ld: a dead process's "
              "claim survived it",
              got);
    }
    retryd_host_close(h);
    printf("exits: %d processes killed -9; a new one spent the %ld tokens "
           "they left, none refused over a share\n",
           EXITS, got);
    CHECK(got == 3 * EXITS, "every token left: %ld of %d", got, 3 * EXITS);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    B = check_shared(sizeof(*B));
    hf_daemon_start(config_text);
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || strcmp(only, "greedy") == 0)
        case_greedy();
    if (!only || strcmp(only, "jain") == 0)
        case_jain();
    if (!only || strcmp(only, "alone") == 0)
        case_alone();
    if (!only || strcmp(only, "weights") == 0)
        case_weights();
    if (!only || strcmp(only, "exits") == 0)
        case_exits();
    CHECK(rd_daemon_stop_or_show_log(&hf_daemon, SIGTERM) == 0, "clean exit");
    return 0;
}

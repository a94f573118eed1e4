/* SPDX-License-Identifier: MIT */
/*
 * The host ledger stays exact under fair shares, across daemon kill -9s
 * (docs/budget.md#fair-shares): 4 client processes x 2 threads x 10^6
 * budget operations through the public API (deposits and withdrawals
 * mixed so that the bucket runs short and shares are kept throughout),
 * while the test kills the daemon with SIGKILL and starts it again 5
 * times. Then, with every client still attached:
 *   - what the threads saw (deposits, grants, refusals: empty bucket and
 *     over share) is, to the unit, what the upstream's counters say;
 *   - the per-process rows sum to the upstream's counters;
 *   - the balance is what the counters explain, to the micro-token:
 *     deposits x ratio - grants - discarded (no floor, so no refill).
 * A plain program, so that the sanitizer builds run it too.
 */
#include <pthread.h>
#include <stdio.h>

#include "health_fixture.h"

#define PROCS 4
#define THREADS 2
#define CHUNKS 20
#define KILLS 5
#define BOUND_MS 60000

static long ops = 1000000; /* per thread */

typedef struct tally {
    _Atomic long deposits, grants, empty, over_share;
} tally;

typedef struct board {
    _Atomic long attached; /* clients attached */
    _Atomic long restarts; /* daemon restarts done */
    _Atomic long done;     /* threads finished */
    _Atomic long release;  /* the clients may close and exit */
    tally t[PROCS][THREADS];
} board;

static board *B;

typedef struct job {
    retryd_upstream *up;
    tally *t;
    unsigned seed;
} job;

/* Ops in CHUNKS chunks; chunk k waits for k * KILLS / CHUNKS restarts, so
 * that every kill lands mid-run. */
static void *spend(void *arg)
{
    job *j = arg;
    long per = ops / CHUNKS;
    for (int k = 0; k < CHUNKS; k++) {
        CHECK(hf_wait_for(&B->restarts, (long)k * KILLS / CHUNKS, BOUND_MS),
              "restart %d", k * KILLS / CHUNKS);
        for (long i = 0; i < per; i++) {
            /* 11 deposits to 10 withdrawals at ratio 0.5: short often. */
            if (rand_r(&j->seed) % 21 < 11) {
                CHECK(retryd_upstream_deposit(j->up) == 0, "deposit");
                j->t->deposits++;
                continue;
            }
            int r = retryd_upstream_withdraw(j->up);
            if (r == 0)
                j->t->grants++;
            else if (r == RETRYD_EBUDGET)
                j->t->empty++;
            else if (r == RETRYD_ESHARE)
                j->t->over_share++;
            else
                CHECK(false, "withdraw: %s", retryd_strerror(r));
        }
    }
    atomic_fetch_add(&B->done, 1);
    return NULL;
}

static int client(int p)
{
    retryd_host *h;
    retryd_upstream *up = hf_open("ledger", &h);
    atomic_fetch_add(&B->attached, 1);
    pthread_t th[THREADS];
    job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (job){up, &B->t[p][i], (unsigned)(p * 7 + i + 1)};
        CHECK(pthread_create(&th[i], NULL, spend, &jobs[i]) == 0, "thread");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(retryd_upstream_shared(up), "still shared after the kills");
    CHECK(hf_wait_for(&B->release, 1, BOUND_MS), "released");
    retryd_host_close(h);
    return 0;
}

static double json_after(const char *json, const char *anchor, const char *key)
{
    double v = rd_json_number(json, anchor, key);
    CHECK(v == v, "no \"%s\" in the stats", key);
    return v;
}

/* The sums of what the processes' rows say, each process's counters
 * after its "pid" key. */
static double rows_sum(const char *json, const char *key)
{
    double sum = 0;
    const char *p = strstr(json, "\"processes\":[");
    for (int n = 0; p != NULL && (p = strstr(p + 1, "{\"pid\":")) != NULL; n++)
        sum += json_after(p, NULL, key);
    return sum;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1)
        ops = atol(argv[1]);
    B = check_shared(sizeof(*B));
    hf_daemon_start("[upstream ledger]\nratio = 0.5\nmin_retries_per_sec = "
                    "0\ncap = 50\n");
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++)
        pids[p] = check_fork(client, p);
    CHECK(hf_wait_for(&B->attached, PROCS, BOUND_MS), "the clients attached");
    for (int k = 1; k <= KILLS; k++) {
        CHECK(rd_daemon_stop(&hf_daemon, SIGKILL) == -SIGKILL, "kill -9");
        CHECK(rd_daemon_start(&hf_daemon) == 0, "restart %d", k);
        atomic_store(&B->restarts, k);
    }
    CHECK(hf_wait_for(&B->done, PROCS * THREADS, BOUND_MS),
          "the clients finished");

    run_result res;
    CHECK(rd_ctl(&hf_daemon, &res, "stats", "--json", NULL) == 0, "stats: %s",
          res.err);
    tally sum = {0};
    for (int p = 0; p < PROCS; p++)
        for (int i = 0; i < THREADS; i++) {
            sum.deposits += B->t[p][i].deposits;
            sum.grants += B->t[p][i].grants;
            sum.empty += B->t[p][i].empty;
            sum.over_share += B->t[p][i].over_share;
        }
    const char *up = strstr(res.out, "{\"name\":\"ledger\"");
    CHECK(up != NULL, "ledger in %s", res.out);
    double deposits = json_after(up, NULL, "deposits");
    double granted = json_after(up, NULL, "retries_granted");
    double empty = json_after(up, NULL, "budget_exhausted");
    double over = json_after(up, NULL, "over_share");
    double discarded = json_after(up, NULL, "discarded_tokens");
    double balance = json_after(up, NULL, "balance");
    printf("fair_ledger: %ld ops by %d processes x %d threads over %d "
           "daemon kill -9s: %ld deposits, %ld granted, %ld refused empty, "
           "%ld refused over share; the counters say %.0f, %.0f, %.0f, "
           "%.0f; balance %.6f, discarded %.6f\n",
           ops * PROCS * THREADS, PROCS, THREADS, KILLS, (long)sum.deposits,
           (long)sum.grants, (long)sum.empty, (long)sum.over_share, deposits,
           granted, empty, over, balance, discarded);
    CHECK(sum.deposits + sum.grants + sum.empty + sum.over_share ==
              ops / CHUNKS * CHUNKS * PROCS * THREADS,
          "every operation has an answer");
    CHECK(deposits == sum.deposits && granted == sum.grants &&
              empty == sum.empty && over == sum.over_share,
          "the host ledger is what the threads saw");
    CHECK(sum.over_share > 0 && sum.empty > 0,
          "shares were kept and the bucket ran short");
    CHECK(rows_sum(res.out, "deposits") == deposits &&
              rows_sum(res.out, "retries_granted") == granted &&
              rows_sum(res.out, "over_share") == over,
          "the per-process rows sum to the upstream's counters");
    /* Micro-tokens: 0.5 per deposit, 1 per grant; the JSON has 6
     * decimals, so the sums are exact in a double. */
    double explained = deposits * 0.5 - granted - discarded;
    CHECK(explained > balance - 1e-7 && explained < balance + 1e-7,
          "the balance %.6f is what the counters explain, %.6f", balance,
          explained);
    atomic_store(&B->release, 1);
    hf_reap(pids, PROCS, BOUND_MS);
    CHECK(rd_daemon_stop_or_show_log(&hf_daemon, SIGTERM) == 0, "clean exit");
    return 0;
}

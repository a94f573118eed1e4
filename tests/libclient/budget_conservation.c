/*
 * Conservation across real processes: 4 forked processes x 2 threads, a
 * million operations per thread, mixing deposits and withdrawals on one
 * shared bucket under a shared simulated clock. Afterwards the books must
 * balance exactly:
 *
 *   granted * 1 token = initial + deposits * ratio + floor * elapsed
 *                       - discarded at the cap - final balance
 *
 * every thread saw the balance within [-(takes in flight), cap] after
 * each of its operations (a take that finds less than a token dips the
 * word below zero until it gives the token back), and the per-process
 * counters (one exclusive lane per thread, as the library assigns them)
 * sum to exactly what the threads counted.
 *
 * usage: budget_conservation [ops-per-thread]
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shared/bucket.h"
#include "check.h"
#include "retryd/common.h"

#define PROCS 4
#define THREADS 2
#define M SEG_MICRO
#define RATIO (M / 10)               /* 0.1 token per first attempt */
#define FLOOR (UINT64_C(100000) * M) /* 100000 tokens/s: 0.1 per us */
#define CAP (50 * M)
#define INITIAL (5 * M)
#define STEP_NS 1000 /* the clock moves 1 us per op */

typedef struct thread_result {
    uint64_t deposits, granted, denied, bound_violations;
} thread_result;

typedef struct shared {
    pthread_barrier_t start;
    _Atomic uint64_t clock_ns;
    thread_result results[PROCS][THREADS];
    seg_view view; /* valid in every process: the mapping is inherited */
} shared;

static shared *sh;
static long ops_per_thread = 1000000;

static uint64_t shared_clock(void *ctx)
{
    (void)ctx;
    return atomic_load(&sh->clock_ns);
}

typedef struct worker {
    int proc, thread;
} worker;

static void *work(void *arg)
{
    const worker *w = arg;
    seg_upstream *s = &sh->view.upstreams[0];
    uint64_t ident = atomic_load(&s->ident);
    seg_process *p = &sh->view.processes[w->proc];
    /* Lane thread+1: owned by this thread alone, plain stores. */
    bucket_tally t = {p->counters[w->thread + 1][0], true};
    bucket_clock clk = {shared_clock, NULL};
    thread_result *r = &sh->results[w->proc][w->thread];
    unsigned seed = (unsigned)(w->proc * 31 + w->thread * 7 + 1);

    pthread_barrier_wait(&sh->start);
    for (long i = 0; i < ops_per_thread; i++) {
        atomic_fetch_add(&sh->clock_ns, STEP_NS);
        /* First half mostly deposits (the cap binds), second half mostly
         * withdrawals (the bucket runs dry). */
        int deposit_pct = i < ops_per_thread / 2 ? 95 : 30;
        if (rand_r(&seed) % 100 < deposit_pct) {
            CHECK(retryd__bucket_deposit(s, ident, &t) == 0, "deposit");
            r->deposits++;
        } else if (retryd__bucket_withdraw(s, ident, &clk, &t) == 0) {
            r->granted++;
        } else {
            r->denied++;
        }
        /* Below zero only by the takes in flight: at most one per
         * thread of every process. */
        int64_t bal = seg_token_balance(atomic_load(&s->tokens));
        r->bound_violations +=
            bal > (int64_t)CAP || bal < -(int64_t)(PROCS * THREADS * SEG_MICRO);
    }
    return NULL;
}

static void run_process(int proc)
{
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){proc, i};
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0, "thread");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

static uint64_t lane_sum(int c)
{
    uint64_t sum = atomic_load(&sh->view.upstreams[0].counters[c]);
    for (int p = 0; p < PROCS; p++)
        for (int lane = 0; lane < SEG_PROC_LANES; lane++)
            sum += atomic_load(&sh->view.processes[p].counters[lane][0][c]);
    return sum;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ops_per_thread = atol(argv[1]);
    CHECK(ops_per_thread > 0, "ops-per-thread must be positive");
    size_t seg_size = retryd__segment_size(4, PROCS);
    size_t total = sizeof(shared) + seg_size + 4096;
    char *mem = mmap(NULL, total, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED, "mmap");
    sh = (shared *)mem;
    void *seg = mem + ((sizeof(shared) + 4095) / 4096) * 4096;
    retryd__segment_format(seg, 4, PROCS, 1, 0);
    CHECK(retryd__segment_view(seg, seg_size, &sh->view) == 0, "view");
    seg_upstream *s = &sh->view.upstreams[0];
    atomic_store(&s->ident, seg_ident(1, SEG_ACTIVE));
    atomic_store(&sh->clock_ns, 1000000000);
    uint64_t start_clock = atomic_load(&sh->clock_ns);
    retryd__bucket_init(s, 1, RATIO, FLOOR, CAP, INITIAL, start_clock);

    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->start, &ba, PROCS * THREADS);

    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        CHECK(pids[p] >= 0, "fork");
        if (pids[p] == 0) {
            run_process(p);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status;
        CHECK(waitpid(pids[p], &status, 0) == pids[p], "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "worker process %d failed", p);
    }

    /* Claim the refill due up to the final clock, then read the books. */
    _Atomic uint64_t parent_counters[SEG_COUNTERS] = {0};
    bucket_tally pt = {parent_counters, false};
    bucket_clock clk = {shared_clock, NULL};
    uint64_t final;
    CHECK(retryd__bucket_balance(s, atomic_load(&s->ident), &clk, &pt,
                                 &final) == 0,
          "balance");

    thread_result sum = {0};
    for (int p = 0; p < PROCS; p++)
        for (int t = 0; t < THREADS; t++) {
            thread_result *r = &sh->results[p][t];
            sum.deposits += r->deposits;
            sum.granted += r->granted;
            sum.denied += r->denied;
            sum.bound_violations += r->bound_violations;
        }
    uint64_t ops = (uint64_t)ops_per_thread * PROCS * THREADS;
    CHECK(sum.deposits + sum.granted + sum.denied == ops, "ops lost");
    CHECK(sum.bound_violations == 0, "%llu reads above the cap",
          (unsigned long long)sum.bound_violations);
    CHECK(final <= CAP, "final balance above the cap");

    /* Counters sum exactly to what the threads saw. */
    CHECK(lane_sum(SEG_C_DEPOSITS) == sum.deposits, "deposit counters");
    CHECK(lane_sum(SEG_C_GRANTED) == sum.granted, "grant counters");
    CHECK(lane_sum(SEG_C_DENIED_FIRST + 1) == sum.denied, "denial counters");

    /* The floor refilled exactly floor x elapsed, claimed once each ns. */
    uint64_t elapsed = atomic_load(&sh->clock_ns) - start_clock;
    uint64_t refilled = lane_sum(SEG_C_REFILLED_MICRO) +
                        atomic_load(&parent_counters[SEG_C_REFILLED_MICRO]);
    CHECK(refilled == FLOOR / 1000000000 * elapsed,
          "refilled %llu, floor x elapsed %llu", (unsigned long long)refilled,
          (unsigned long long)(FLOOR / 1000000000 * elapsed));

    /* The ledger. */
    uint64_t discarded = lane_sum(SEG_C_DISCARDED_MICRO) +
                         atomic_load(&parent_counters[SEG_C_DISCARDED_MICRO]);
    uint64_t credited = INITIAL + sum.deposits * RATIO + refilled;
    CHECK(credited >= discarded + final, "more left than credited");
    CHECK(sum.granted * M == credited - discarded - final,
          "granted %llu tokens, the ledger allows %llu micro-tokens",
          (unsigned long long)sum.granted,
          (unsigned long long)(credited - discarded - final));
    CHECK(sum.granted > 0 && sum.denied > 0 && discarded > 0,
          "the mix should exercise grants, denials and the cap");

    printf("budget_conservation: %llu ops by %d processes x %d threads: "
           "%llu deposits, %llu granted, %llu denied, %.1f tokens refilled, "
           "%.1f discarded at the cap, final %.3f; ledger exact\n",
           (unsigned long long)ops, PROCS, THREADS,
           (unsigned long long)sum.deposits, (unsigned long long)sum.granted,
           (unsigned long long)sum.denied, (double)refilled / M,
           (double)discarded / M, (double) final / M);
    munmap(mem, total);
    return 0;
}

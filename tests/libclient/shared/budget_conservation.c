/* SPDX-License-Identifier: MIT */
/*
 * Conservation across real processes: 4 forked processes x 2 threads, a
 * million operations per thread, on shared buckets under a shared
 * simulated clock, in two phases:
 *
 *   mixed   deposits and withdrawals on one bucket with a fast floor
 *           refill: the cap binds in the first half, the bucket runs dry
 *           in the second;
 *   at cap  almost only deposits, into a bucket that starts just below its
 *           cap, with a ratio that does not divide the cap (so deposits
 *           cross the cap and keep part of their amount) and a few
 *           withdrawals that keep making room: every deposit in flight
 *           contends at the cap.
 *
 * Afterwards the books of each bucket must balance exactly:
 *
 *   granted * 1 token = initial + deposits * ratio + floor * elapsed
 *                       - discarded at the cap - final balance
 *
 * the final balance must be within [0, cap], every thread saw the balance
 * within [-(takes in flight), cap + (deposits in flight) * ratio] after
 * each of its operations (a take that finds less than a token dips the
 * word below zero until it gives the token back; a deposit that overshoots
 * the cap lifts the word above it until it takes the overshoot back), and
 * the per-process counters (one exclusive lane per thread, as the library
 * assigns them) sum to exactly what the threads counted.
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
#include "segment_format.h"
#include "retryd/common.h"

#define PROCS 4
#define THREADS 2
#define M SEG_MICRO
#define STEP_NS 1000 /* the clock moves 1 us per op */

/* One phase's bucket (upstream slot and counter entry @p slot) and mix. */
typedef struct phase_conf {
    const char *name;
    int slot;
    uint64_t ratio, floor, cap, initial;       /* micro-tokens (per second) */
    int deposit_pct_first, deposit_pct_second; /* per half of the ops */
} phase_conf;

static const phase_conf phases[] = {
    /* 0.1 token per first attempt, 100000 tokens/s: 0.1 per us. */
    {"mixed", 0, M / 10, UINT64_C(100000) * M, 50 * M, 5 * M, 95, 30},
    /* 0.3 token per deposit into a cap of 50 tokens (not a multiple), no
     * floor, starting 0.1 token below the cap. */
    {"at cap", 1, 3 * M / 10, 0, 50 * M, 50 * M - M / 10, 99, 99},
};
#define PHASES (int)(sizeof(phases) / sizeof(phases[0]))

typedef struct thread_result {
    uint64_t deposits, granted, denied, bound_violations;
    int64_t highest, lowest; /* balances seen */
} thread_result;

typedef struct shared {
    pthread_barrier_t start;
    _Atomic uint64_t clock_ns;
    thread_result results[PHASES][PROCS][THREADS];
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
    int proc, thread, phase;
} worker;

static void run_phase(const worker *w, const phase_conf *ph, thread_result *r)
{
    seg_upstream *s = &sh->view.upstreams[ph->slot];
    uint64_t ident = atomic_load(&s->ident);
    seg_process *p = &sh->view.processes[w->proc];
    /* Lane thread+1: owned by this thread alone, plain stores. */
    bucket_tally t = {p->counters[w->thread + 1][ph->slot], true,
                      &p->claim[ph->slot], &p->share_factor[ph->slot]};
    bucket_clock clk = {shared_clock, NULL};
    unsigned seed = (unsigned)(w->proc * 31 + w->thread * 7 + 1);
    /* Below zero only by the takes in flight, above the cap only by the
     * deposits in flight: at most one per thread of every process. */
    int64_t low = -(int64_t)(PROCS * THREADS * M);
    int64_t high = (int64_t)(ph->cap + PROCS * THREADS * ph->ratio);

    r->highest = INT64_MIN;
    r->lowest = INT64_MAX;
    pthread_barrier_wait(&sh->start);
    for (long i = 0; i < ops_per_thread; i++) {
        atomic_fetch_add(&sh->clock_ns, STEP_NS);
        int deposit_pct = i < ops_per_thread / 2 ? ph->deposit_pct_first
                                                 : ph->deposit_pct_second;
        if (rand_r(&seed) % 100 < deposit_pct) {
            CHECK(retryd__bucket_deposit(s, ident, &t) == 0, "deposit");
            r->deposits++;
        } else if (retryd__bucket_withdraw(s, ident, &clk, &t) == 0) {
            r->granted++;
        } else {
            r->denied++;
        }
        int64_t bal = seg_token_balance(atomic_load(&s->tokens));
        r->bound_violations += bal > high || bal < low;
        r->highest = bal > r->highest ? bal : r->highest;
        r->lowest = bal < r->lowest ? bal : r->lowest;
    }
}

static void *work(void *arg)
{
    const worker *w = arg;
    run_phase(w, &phases[w->phase], &sh->results[w->phase][w->proc][w->thread]);
    return NULL;
}

static void run_process(int proc, int phase)
{
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){proc, i, phase};
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0, "thread");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

static uint64_t lane_sum(int slot, int c)
{
    uint64_t sum = atomic_load(&sh->view.upstreams[slot].counters[c]);
    for (int p = 0; p < PROCS; p++)
        for (int lane = 0; lane < SEG_PROC_LANES; lane++)
            sum += atomic_load(&sh->view.processes[p].counters[lane][slot][c]);
    return sum;
}

static thread_result phase_sum(int ph)
{
    thread_result sum = {.highest = INT64_MIN, .lowest = INT64_MAX};
    for (int p = 0; p < PROCS; p++)
        for (int t = 0; t < THREADS; t++) {
            const thread_result *r = &sh->results[ph][p][t];
            sum.deposits += r->deposits;
            sum.granted += r->granted;
            sum.denied += r->denied;
            sum.bound_violations += r->bound_violations;
            sum.highest = r->highest > sum.highest ? r->highest : sum.highest;
            sum.lowest = r->lowest < sum.lowest ? r->lowest : sum.lowest;
        }
    return sum;
}

/* Claim the refill due up to the final clock, then balance the books of
 * phase @p ph's bucket; @p elapsed is how far the clock moved. */
static void check_books(int ph, uint64_t elapsed)
{
    const phase_conf *c = &phases[ph];
    seg_upstream *s = &sh->view.upstreams[c->slot];
    _Atomic uint64_t parent_counters[SEG_COUNTERS] = {0};
    bucket_tally pt = {parent_counters, false, NULL, NULL};
    bucket_clock clk = {shared_clock, NULL};
    uint64_t final;
    CHECK(retryd__bucket_balance(s, atomic_load(&s->ident), &clk, &pt,
                                 &final) == 0,
          "balance");
    /* Nothing is in flight now: the word itself must be within the cap. */
    int64_t word_bal = seg_token_balance(atomic_load(&s->tokens));
    CHECK(word_bal >= 0 && word_bal <= (int64_t)c->cap,
          "%s: final word %lld outside [0, cap]", c->name, (long long)word_bal);
    CHECK((uint64_t)word_bal == final, "%s: balance read %llu, word %lld",
          c->name, (unsigned long long) final, (long long)word_bal);

    thread_result sum = phase_sum(ph);
    uint64_t ops = (uint64_t)ops_per_thread * PROCS * THREADS;
    CHECK(sum.deposits + sum.granted + sum.denied == ops, "%s: ops lost",
          c->name);
    CHECK(sum.bound_violations == 0,
          "%s: %llu reads outside [-(takes in flight), cap + (deposits in "
          "flight) * ratio]; seen %lld to %lld",
          c->name, (unsigned long long)sum.bound_violations,
          (long long)sum.lowest, (long long)sum.highest);

    /* Counters sum exactly to what the threads saw. */
    CHECK(lane_sum(c->slot, SEG_C_DEPOSITS) == sum.deposits, "%s: deposits",
          c->name);
    CHECK(lane_sum(c->slot, SEG_C_GRANTED) == sum.granted, "%s: grants",
          c->name);
    CHECK(lane_sum(c->slot, SEG_C_DENIED_BUDGET_EXHAUSTED) +
                  lane_sum(c->slot, SEG_C_DENIED_OVER_SHARE) ==
              sum.denied,
          "%s: denials", c->name);
    /* Fair shares: every claim is in the sum, to the micro-token, and a
     * borrow is a grant. */
    uint64_t claims = 0;
    for (int p = 0; p < PROCS; p++)
        claims += atomic_load(&sh->view.processes[p].claim[c->slot]);
    CHECK(claims == atomic_load(&s->claimed_micro),
          "%s: claims sum to %llu, the bucket's sum says %llu", c->name,
          (unsigned long long)claims,
          (unsigned long long)atomic_load(&s->claimed_micro));
    CHECK(lane_sum(c->slot, SEG_C_BORROWED) <= sum.granted, "%s: borrows",
          c->name);
    printf("budget_conservation, %s: shares kept: %s, %llu grants borrowed, "
           "%llu refused over share, %.3f tokens claimed at the end\n",
           c->name, atomic_load(&s->share_since_ns) ? "yes" : "no",
           (unsigned long long)lane_sum(c->slot, SEG_C_BORROWED),
           (unsigned long long)lane_sum(c->slot, SEG_C_DENIED_OVER_SHARE),
           (double)claims / M);

    /* The floor refilled exactly floor x elapsed, claimed once each ns. */
    uint64_t refilled = lane_sum(c->slot, SEG_C_REFILLED_MICRO) +
                        atomic_load(&parent_counters[SEG_C_REFILLED_MICRO]);
    CHECK(refilled == c->floor / 1000000000 * elapsed,
          "%s: refilled %llu, floor x elapsed %llu", c->name,
          (unsigned long long)refilled,
          (unsigned long long)(c->floor / 1000000000 * elapsed));

    /* The ledger, to the micro-token. */
    uint64_t discarded = lane_sum(c->slot, SEG_C_DISCARDED_MICRO) +
                         atomic_load(&parent_counters[SEG_C_DISCARDED_MICRO]);
    uint64_t credited = c->initial + sum.deposits * c->ratio + refilled;
    CHECK(credited >= discarded + final, "%s: more left than credited",
          c->name);
    CHECK(sum.granted * M == credited - discarded - final,
          "%s: granted %llu tokens, the ledger allows %llu micro-tokens",
          c->name, (unsigned long long)sum.granted,
          (unsigned long long)(credited - discarded - final));
    CHECK(sum.granted > 0 && discarded > 0,
          "%s: the mix should exercise grants and the cap", c->name);
    CHECK(ph != 0 || sum.denied > 0, "%s: the mix should exercise denials",
          c->name);

    printf("budget_conservation, %s: %llu ops by %d processes x %d threads: "
           "%llu deposits, %llu granted, %llu denied, %.1f tokens refilled, "
           "%.1f discarded at the cap, final %.3f, balance seen %.3f to "
           "%.3f; ledger exact\n",
           c->name, (unsigned long long)ops, PROCS, THREADS,
           (unsigned long long)sum.deposits, (unsigned long long)sum.granted,
           (unsigned long long)sum.denied, (double)refilled / M,
           (double)discarded / M, (double) final / M, (double)sum.lowest / M,
           (double)sum.highest / M);
}

/* Fork the processes of phase @p ph and wait for them all to succeed. */
static void run_processes(int ph)
{
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        CHECK(pids[p] >= 0, "fork");
        if (pids[p] == 0) {
            run_process(p, ph);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status;
        CHECK(waitpid(pids[p], &status, 0) == pids[p], "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "phase %s: worker process %d failed", phases[ph].name, p);
    }
}

static void setup_segment(char *mem, size_t seg_size, uint64_t now)
{
    void *seg = mem + ((sizeof(shared) + 4095) / 4096) * 4096;
    test_segment_format(seg, 4, PROCS, 1, 0);
    CHECK(retryd__segment_view(seg, seg_size, &sh->view) == 0, "view");
    for (int ph = 0; ph < PHASES; ph++) {
        const phase_conf *c = &phases[ph];
        seg_upstream *s = &sh->view.upstreams[c->slot];
        atomic_store(&s->ident, seg_ident(1, SEG_ACTIVE));
        retryd__bucket_init(s, 1, c->ratio, c->floor, c->cap, c->initial, now);
    }
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
    atomic_store(&sh->clock_ns, 1000000000);
    setup_segment(mem, seg_size, atomic_load(&sh->clock_ns));

    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->start, &ba, PROCS * THREADS);

    for (int ph = 0; ph < PHASES; ph++) {
        uint64_t phase_start = atomic_load(&sh->clock_ns);
        run_processes(ph);
        /* The books are read before the next phase moves the clock on. */
        check_books(ph, atomic_load(&sh->clock_ns) - phase_start);
    }
    munmap(mem, total);
    return 0;
}

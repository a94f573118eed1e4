/* SPDX-License-Identifier: MIT */
/*
 * Nanoseconds per decision, beside the cost of an empty call loop measured
 * in the same run: the loop calls, through a function pointer the compiler
 * cannot see through, a function with the same signature that does nothing.
 * The decisions cycle through 1024 facts drawn from the whole fact space
 * (every evidence, status class, idempotency, ...), with a budget interface
 * that always has a token, and the default per-thread random source.
 *
 * usage: bench_decision [iterations-per-run] [runs]
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"
#include "retryd/decision.h"

#define N_FACTS 1024

static bool always(void *ctx)
{
    (void)ctx;
    return true;
}

static const retryd_budget_iface budget = {sizeof(retryd_budget_iface), always,
                                           always, NULL};

__attribute__((noinline)) static int empty_call(const retryd_facts *f,
                                                const retryd_decide_env *env,
                                                retryd_decision *ret)
{
    __asm__ volatile("" : : "r"(f), "r"(env), "r"(ret) : "memory");
    return 0;
}

typedef int (*decide_fn)(const retryd_facts *, const retryd_decide_env *,
                         retryd_decision *);

static void make_facts(retryd_facts *facts)
{
    static const int statuses[] = {200, 401, 404, 408, 425, 429,
                                   500, 502, 503, 504, 501};
    unsigned seed = 7;
    for (int i = 0; i < N_FACTS; i++) {
        retryd_facts *f = &facts[i];
        int e = rand_r(&seed) % 4;
        *f = (retryd_facts){
            .sz = sizeof(retryd_facts),
            .attempt = 1 + (uint32_t)(rand_r(&seed) % 3),
            .max_attempts = 3,
            .evidence = (retryd_evidence)e,
            .replayability = (retryd_replayability)(rand_r(&seed) % 3),
            .idempotency = (retryd_idempotency)(rand_r(&seed) % 4),
            .failure = e >= 2 ? RETRYD_FAILURE_NONE : RETRYD_FAILURE_TIMEOUT,
            .status = e >= 2 ? statuses[rand_r(&seed) % 11] : 0,
            .retry_after_ns = rand_r(&seed) % 4 == 0 ? 1000000000 : -1,
            .remaining_ns = 30000000000LL,
            .min_attempt_ns = 100000000,
            .draining = rand_r(&seed) % 16 == 0,
            .transient_500 = rand_r(&seed) % 2,
        };
    }
}

static double run_once(decide_fn fn, const retryd_facts *facts, long iters,
                       const retryd_decide_env *env, long *retries)
{
    retryd_decision d = {.sz = sizeof(d)};
    long n_retry = 0;
    int64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; i++) {
        fn(&facts[i & (N_FACTS - 1)], env, &d);
        n_retry += d.verdict == RETRYD_VERDICT_RETRY;
    }
    int64_t t1 = bench_now_ns();
    *retries += n_retry;
    return (double)(t1 - t0) / (double)iters;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 5000000;
    int runs = argc > 2 ? atoi(argv[2]) : 11;
    static retryd_facts facts[N_FACTS];
    retryd_decide_env env = {.sz = sizeof(env), .budget = &budget};
    volatile decide_fn empty = empty_call, real = retryd_decide;
    double t_empty[64], t_decide[64];
    long retries = 0;

    if (iters <= 0 || runs <= 0 || runs > 64) {
        fprintf(stderr, "usage: bench_decision [iterations>0] [runs 1..64]\n");
        return 64;
    }
    make_facts(facts);
    /* Warm up caches, the branch predictor and the thread's generator. */
    run_once(real, facts, iters / 10 + 1, &env, &retries);
    for (int r = 0; r < runs; r++) {
        /* Interleaved, so frequency changes hit both alike. */
        t_empty[r] = run_once(empty, facts, iters, &env, &retries);
        t_decide[r] = run_once(real, facts, iters, &env, &retries);
    }
    double e = bench_median(t_empty, (size_t)runs);
    double d = bench_median(t_decide, (size_t)runs);
    printf("bench_decision: %ld decisions x %d runs, medians\n", iters, runs);
    printf("  %-28s %8.2f ns/call\n", "empty call loop (baseline)", e);
    printf("  %-28s %8.2f ns/call\n", "retryd_decide", d);
    printf("  %-28s %8.2f ns\n", "decision cost above baseline", d - e);
    printf("  %-28s %8.2fx\n", "ratio decide / empty", d / e);
    printf("  (%ld retries granted, keeps the work observable)\n", retries);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The measuring loop the HTTP benchmarks (bench_executor, bench_async)
 * share: runs of interleaved blocks, each variant's requests per second
 * and CPU time per request in every run, and nginx's counters checked
 * around each run.
 *
 * In a run every variant makes the same number of requests, in blocks of
 * `block` requests, the variants taking turns block by block with the
 * order rotating, so that drift and a neighbour's bursts hit them all
 * alike. nginx's stub_status must count exactly the run's requests and no
 * new connection: a retry, a libcurl re-send or a lost keep-alive
 * connection fails the benchmark instead of skewing it.
 */
#ifndef RETRYD_BENCH_RUN_H
#define RETRYD_BENCH_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>

#include "bench_nginx.h"

#define BENCH_MAX_RUNS 64
#define BENCH_MAX_VARIANTS 8

/* @p n requests of variant @p v, each checked; 0, or -1 with a message. */
typedef int (*bench_block_fn)(void *ctx, int v, long n);

typedef struct bench_runs {
    int variants;       /* how many take turns */
    long block;         /* requests a variant makes before the next's turn */
    bench_block_fn run; /* one block of one variant */
    void *ctx;          /* run's */
    CURL *status;       /* stub_status queries, on their own connection */
    bench_sink *sk;     /* status's write buffer */
    int done;           /* runs measured so far */
    pid_t peer;         /* nginx, whose CPU time is counted too; 0: none */
    unsigned only;      /* 0: every variant; else one bit per variant run */
    /* Per variant and run: requests per second (wall time), and the
     * benchmark thread's CPU time per request in microseconds. */
    double rps[BENCH_MAX_VARIANTS][BENCH_MAX_RUNS];
    double cpu_us[BENCH_MAX_VARIANTS][BENCH_MAX_RUNS];
    /* The peer's CPU time per request during the variant's blocks, and
     * the rest of the wall time: when neither ran (other processes did,
     * or the CPU idled). */
    double peer_us[BENCH_MAX_VARIANTS][BENCH_MAX_RUNS];
    double other_us[BENCH_MAX_VARIANTS][BENCH_MAX_RUNS];
} bench_runs;

/* This thread's CPU time, user and system: not nginx's, and not the time
 * it waited or was preempted. */
int64_t bench_thread_cpu_ns(void);

/* @p runs runs (at most BENCH_MAX_RUNS) of @p n requests per variant,
 * after the caller's warm-up. 0, or -1 with a message. */
int bench_run_all(bench_runs *r, long n, int runs);

/* A variant's figures over the runs: the median, lowest and highest
 * requests per second, and the medians per request of the benchmark
 * thread's CPU time, the peer's, and the wall time neither ran. */
typedef struct bench_summary {
    double rps, rps_lo, rps_hi, cpu_us, peer_us, other_us;
} bench_summary;

void bench_summarize(const bench_runs *r, int v, bench_summary *s);

/*
 * Variant @p v's throughput over variant @p base's, run by run: each
 * ratio pairs figures of one run, measured under the same conditions.
 * @p ratio gets them in run order; the median, quartiles and extremes in
 * @p st (sorted, so st->sorted[0] is the lowest).
 */
typedef struct bench_ratios {
    double ratio[BENCH_MAX_RUNS];  /* in run order */
    double sorted[BENCH_MAX_RUNS]; /* ascending */
    double median, q1, q3;
    int n;
} bench_ratios;

void bench_ratios_of(const bench_runs *r, int v, int base, bench_ratios *st);

/*
 * The same for the requests per second the CPU time alone allows: n over
 * the benchmark thread's and the peer's CPU time, which the time others
 * took from the shared CPU does not enter. Needs a peer.
 */
void bench_cpu_ratios_of(const bench_runs *r, int v, int base,
                         bench_ratios *st);

/*
 * What both benchmarks do before setting up: the signals that stop them
 * (bench_install_signals), the CPUs of @p mode for the benchmark and
 * nginx (bench_place, into @p self and @p nginx), and libcurl's global
 * init, before any handle exists (retryd_client_new's own call is then a
 * no-op). 0, or -1 with a message.
 */
int bench_start(const char *mode, int *self, int *nginx);

/* "  cpus: ..." for the report, without the line's end. */
void bench_print_cpus(const char *mode, int self, int nginx);

#endif

/* SPDX-License-Identifier: MIT */
/* The measuring loop of the HTTP benchmarks (bench_run.h). */
#include "bench_run.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_proc.h"

int64_t bench_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The time a process's main thread has run on a CPU, in ns
 * (/proc/PID/schedstat); 0 for no @p pid. */
static int64_t ran_ns(pid_t pid)
{
    char path[64];
    long long ran = 0;
    if (pid <= 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%ld/schedstat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%lld", &ran) != 1)
        ran = 0;
    fclose(f);
    return ran;
}

/* A variant's time over a run: wall, this thread's CPU, the peer's. */
typedef struct block_ns {
    int64_t wall, cpu, peer;
} block_ns;

static int timed_block(bench_runs *r, int v, long m, block_ns *acc)
{
    int64_t p0 = ran_ns(r->peer);
    int64_t t0 = bench_now_ns(), c0 = bench_thread_cpu_ns();
    if (r->run(r->ctx, v, m) < 0)
        return -1;
    acc->cpu += bench_thread_cpu_ns() - c0;
    acc->wall += bench_now_ns() - t0;
    acc->peer += ran_ns(r->peer) - p0;
    return 0;
}

/* One run: @p n requests of each variant in blocks, the variants taking
 * turns, the order rotating; nginx's counters checked around it. */
static int timed_run(bench_runs *r, long n)
{
    long acc0, req0, acc1, req1;
    block_ns t[BENCH_MAX_VARIANTS];
    memset(t, 0, sizeof(t));

    if (bench_nginx_counters(r->status, r->sk, &acc0, &req0) < 0)
        return -1;
    for (long done = 0, round = 0; done < n; done += r->block, round++) {
        long m = n - done < r->block ? n - done : r->block;
        for (int k = 0; k < r->variants; k++) {
            int v = (int)((round + k) % r->variants);
            if (r->only != 0 && !(r->only & 1u << v))
                continue;
            if (bench_stop)
                return bench_fail("interrupted");
            if (timed_block(r, v, m, &t[v]) < 0)
                return -1;
        }
    }
    if (bench_nginx_counters(r->status, r->sk, &acc1, &req1) < 0)
        return -1;
    long ran = r->only ? __builtin_popcount(r->only) : r->variants;
    /* The second query is counted too; it reuses its own connection. */
    if (acc1 != acc0 || req1 - req0 != ran * n + 1)
        return bench_fail("nginx saw %ld requests and %ld new connections "
                          "for %ld requests on warm connections",
                          req1 - req0 - 1, acc1 - acc0, ran * n);
    for (int v = 0; v < r->variants; v++) {
        if (t[v].wall == 0)
            continue; /* not run: left 0 */
        r->rps[v][r->done] = (double)n * 1e9 / (double)t[v].wall;
        r->cpu_us[v][r->done] = (double)t[v].cpu / 1e3 / (double)n;
        r->peer_us[v][r->done] = (double)t[v].peer / 1e3 / (double)n;
        r->other_us[v][r->done] =
            (double)(t[v].wall - t[v].cpu - t[v].peer) / 1e3 / (double)n;
    }
    r->done++;
    return 0;
}

int bench_run_all(bench_runs *r, long n, int runs)
{
    if (r->variants > BENCH_MAX_VARIANTS || runs > BENCH_MAX_RUNS)
        return bench_fail("too many variants or runs");
    r->done = 0;
    for (int i = 0; i < runs; i++)
        if (timed_run(r, n) < 0)
            return -1;
    return 0;
}

void bench_summarize(const bench_runs *r, int v, bench_summary *s)
{
    double rps[BENCH_MAX_RUNS], cpu[BENCH_MAX_RUNS];
    size_t n = (size_t)r->done;
    memcpy(rps, r->rps[v], n * sizeof(*rps));
    memcpy(cpu, r->cpu_us[v], n * sizeof(*cpu));
    s->rps = bench_median(rps, n); /* sorts */
    s->rps_lo = rps[0];
    s->rps_hi = rps[n - 1];
    s->cpu_us = bench_median(cpu, n);
    memcpy(cpu, r->peer_us[v], n * sizeof(*cpu));
    s->peer_us = bench_median(cpu, n);
    memcpy(cpu, r->other_us[v], n * sizeof(*cpu));
    s->other_us = bench_median(cpu, n);
}

/* The value at fraction @p f of the sorted @p v, interpolated. */
static double quantile(const double *v, int n, double f)
{
    double at = f * (n - 1);
    int i = (int)at;
    return i + 1 < n ? v[i] + (at - i) * (v[i + 1] - v[i]) : v[i];
}

/* The median, quartiles and extremes of st->ratio. */
static void spread(bench_ratios *st)
{
    memcpy(st->sorted, st->ratio, (size_t)st->n * sizeof(*st->ratio));
    st->median = bench_median(st->sorted, (size_t)st->n); /* sorts */
    st->q1 = quantile(st->sorted, st->n, 0.25);
    st->q3 = quantile(st->sorted, st->n, 0.75);
}

void bench_ratios_of(const bench_runs *r, int v, int base, bench_ratios *st)
{
    st->n = r->done;
    for (int i = 0; i < st->n; i++)
        st->ratio[i] = r->rps[v][i] / r->rps[base][i];
    spread(st);
}

void bench_cpu_ratios_of(const bench_runs *r, int v, int base, bench_ratios *st)
{
    st->n = r->done;
    for (int i = 0; i < st->n; i++)
        st->ratio[i] = (r->cpu_us[base][i] + r->peer_us[base][i]) /
                       (r->cpu_us[v][i] + r->peer_us[v][i]);
    spread(st);
}

int bench_start(const char *mode, int *self, int *nginx)
{
    if (bench_install_signals() < 0 || bench_place(mode, self, nginx) < 0)
        return -1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return bench_fail("curl_global_init failed");
    return 0;
}

void bench_print_cpus(const char *mode, int self, int nginx)
{
    if (self < 0)
        printf("  cpus: none (not pinned)");
    else
        printf("  cpus: %s (benchmark on cpu %d, nginx on cpu %d)", mode, self,
               nginx);
}

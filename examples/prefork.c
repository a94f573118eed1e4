/* SPDX-License-Identifier: MIT */
/*
 * prefork: a pre-fork service whose workers share one host budget.
 *
 * The parent forks the workers before it touches retryd, and each worker
 * opens a client of its own after fork(). That is the rule of
 * docs/budget.md: a forked child never acts as its parent's process slot
 * (the library drops an attachment a child inherits, and the child takes
 * a slot of its own), and a client's connections and libcurl handles
 * belong to the process that opened them. The budget is still one: every
 * worker opens the same upstream name, and the retryd daemon keeps its
 * bucket in shared memory.
 *
 * usage: prefork BASE_URL [WORKERS]
 *
 * What it shows, against retryd's fault-injecting test server
 * (tests/support/faultsrv.c; examples/README.md says how to run it):
 *
 *   1. healthy: each worker sends HEALTHY requests to /ok. Each first
 *      attempt deposits `ratio` tokens, so each worker alone deposits a
 *      full bucket (HEALTHY * ratio = cap); but there is one bucket, and it
 *      holds `cap` tokens, not WORKERS * cap.
 *   2. outage: once every worker is ready (a barrier on two pipes), all
 *      of them send OUTAGE requests to a path that answers 503. Each
 *      wants two retries; the host grants what one bucket holds: at most
 *      cap + ratio * (the outage's own first attempts) retries in all,
 *      however many workers ask.
 *
 * The parent adds up what the workers report and checks that bound; it
 * exits 1 when a request failed to run or the bound was broken. Without a
 * daemon each worker spends from a process-local bucket (retryd still
 * works, but nothing is shared): it says so, and checks nothing.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <retryd/retryd.h>

#define MS INT64_C(1000000)
#define MAX_WORKERS 32
#define UPSTREAM "prefork-example"

/* The upstream's budget, registered by the first worker to open it (every
 * worker must pass the same parameters). No floor refill: every token
 * comes from a deposit, so the bound below does not depend on time. */
static const retryd_budget_params budget = {
    .sz = sizeof(budget),
    .ratio = 0.5,
    .min_retries_per_sec = 0,
    .cap = 4,
};
enum {
    HEALTHY = 8, /* HEALTHY * ratio = cap: a full bucket per worker */
    OUTAGE = 4,
    MAX_ATTEMPTS = 3, /* so each outage request wants two retries */
};

/* What a worker reports to the parent: one write of a small struct on a
 * pipe is atomic (PIPE_BUF), so all workers share one pipe. */
struct report {
    unsigned worker;
    pid_t pid;
    bool shared;            /* spent from the host's bucket */
    unsigned failed;        /* requests that could not run, or other
                               outcomes than expected */
    unsigned attempts;      /* of the outage requests */
    unsigned granted;       /* retries granted in the outage */
    unsigned budget_denied; /* retries the budget refused */
};

/* One request through the worker's own profile. */
static retryd_result *get(retryd_profile *profile, const char *path)
{
    const retryd_request req = {
        .sz = sizeof(req),
        .method = "GET",
        .path = path,
        .idempotency = RETRYD_IDEMPOTENCY_SAFE,
        .deadline_ns = 10000 * MS,
    };
    retryd_result *res = NULL;
    int r = retryd_execute(profile, &req, &res);
    if (r < 0)
        fprintf(stderr, "prefork: %s: %s\n", path, retryd_strerror(r));
    return res;
}

static void healthy_phase(retryd_profile *profile, struct report *rep)
{
    for (int i = 0; i < HEALTHY; i++) {
        retryd_result *res = get(profile, "/ok?id=prefork-ok");
        if (res == NULL || retryd_result_status(res) != 200)
            rep->failed++;
        retryd_result_free(res);
    }
}

static void outage_phase(retryd_profile *profile, struct report *rep)
{
    char path[64];
    snprintf(path, sizeof(path), "/status?code=503&id=prefork-fail-%u",
             rep->worker);
    for (int i = 0; i < OUTAGE; i++) {
        retryd_result *res = get(profile, path);
        if (res == NULL || retryd_result_status(res) != 503) {
            rep->failed++;
        } else {
            unsigned n = (unsigned)retryd_result_attempt_count(res);
            rep->attempts += n;
            rep->granted += n - 1; /* each attempt after the first */
            /* Why the last attempt was not retried: the budget, or the
             * profile's max_attempts after two granted retries. */
            if (retryd_result_decision(res)->reason ==
                RETRYD_DENIAL_BUDGET_EXHAUSTED)
                rep->budget_denied++;
        }
        retryd_result_free(res);
    }
}

/* Block until the parent closes the gate: read() then sees end of file. */
static void wait_for_gate(int gate)
{
    char c;
    while (read(gate, &c, 1) < 0 && errno == EINTR)
        ;
}

/* A worker: its own client, opened after fork(). */
static int worker(unsigned number, const char *base_url, int ready, int gate,
                  int out)
{
    struct report rep = {.worker = number, .pid = getpid()};
    const retryd_host_opts host = {.sz = sizeof(host),
                                   .client_name = "example prefork"};
    const retryd_client_opts copts = {.sz = sizeof(copts), .host = &host};
    const retryd_backoff_policy backoff = {.sz = sizeof(backoff),
                                           .base_ns = 1 * MS,
                                           .max_ns = 5 * MS,
                                           .max_retry_after_ns = 1000 * MS};
    const retryd_profile_opts popts = {
        .sz = sizeof(popts),
        .base_url = base_url,
        .upstream = UPSTREAM, /* the same name in every worker: one bucket */
        .max_attempts = MAX_ATTEMPTS,
        .backoff = &backoff,
        .budget = &budget,
    };
    retryd_client *client = NULL;
    retryd_profile *profile = NULL;
    int r = retryd_client_new(&copts, &client);
    if (r == 0)
        r = retryd_profile_new(client, &popts, &profile);
    if (r < 0) {
        fprintf(stderr, "prefork: worker %u: %s\n", number, retryd_strerror(r));
        rep.failed = 1;
    } else {
        rep.shared = retryd_upstream_shared(retryd_profile_budget(profile));
        healthy_phase(profile, &rep);
    }
    /* Reach the barrier even after a failure, or the others would wait
     * for this worker forever. */
    if (write(ready, "r", 1) != 1)
        rep.failed = 1;
    wait_for_gate(gate);
    if (profile != NULL)
        outage_phase(profile, &rep);
    retryd_profile_free(profile);
    retryd_client_free(client);
    return write(out, &rep, sizeof(rep)) == sizeof(rep) && rep.failed == 0 ? 0
                                                                           : 1;
}

/* The pipes every worker shares with the parent. */
struct pipes {
    int ready[2]; /* workers -> parent: one byte each, once ready */
    int gate[2];  /* parent closes its write end: "go" */
    int out[2];   /* workers -> parent: their reports */
};

static int fork_workers(unsigned n, const char *base_url, struct pipes *p,
                        pid_t *pids)
{
    fflush(stdout); /* or a child's exit() would print it again */
    for (unsigned i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0)
            return -1;
        if (pids[i] == 0) {
            close(p->ready[0]), close(p->gate[1]), close(p->out[0]);
            exit(worker(i, base_url, p->ready[1], p->gate[0], p->out[1]));
        }
    }
    /* The parent keeps only its ends; once the workers are gone, reads
     * of ready and out see end of file instead of blocking. */
    close(p->ready[1]), close(p->gate[0]), close(p->out[1]);
    return 0;
}

/* Wait for every worker to be ready, then open the gate. */
static void barrier(unsigned n, struct pipes *p)
{
    char c;
    for (unsigned got = 0; got < n;) {
        ssize_t k = read(p->ready[0], &c, 1);
        if (k == 0 || (k < 0 && errno != EINTR))
            break; /* every worker has exited: nobody to wait for */
        got += k == 1;
    }
    close(p->gate[1]);
}

/* Print each worker's report and the totals; 0 when all is as it must be. */
static int summarise(unsigned n, int in)
{
    struct report rep, sum = {.shared = true};
    unsigned reports = 0;
    while (read(in, &rep, sizeof(rep)) == (ssize_t)sizeof(rep)) {
        printf("worker %u (pid %d): budget %s; outage: %d requests, %u "
               "attempts, %u retries granted, %u refused by the budget\n",
               rep.worker, (int)rep.pid, rep.shared ? "shared" : "local",
               OUTAGE, rep.attempts, rep.granted, rep.budget_denied);
        sum.shared &= rep.shared;
        sum.failed += rep.failed;
        sum.attempts += rep.attempts;
        sum.granted += rep.granted;
        sum.budget_denied += rep.budget_denied;
        reports++;
    }
    /* The ledger of docs/budget.md with no floor: a retry spends a token
     * that a deposit made. The outage starts from at most cap tokens, and
     * its own first attempts add ratio each. */
    double bound = budget.cap + budget.ratio * OUTAGE * n;
    printf("outage: %u retries granted, %u refused by the budget; one bucket "
           "allows at most %.0f (cap %.0f + %.1f x %u first attempts); %u "
           "buckets of their own would allow %.0f\n",
           sum.granted, sum.budget_denied, bound, budget.cap, budget.ratio,
           OUTAGE * n, n, n * budget.cap + budget.ratio * OUTAGE * n);
    if (!sum.shared)
        printf("no retryd daemon shared the budget: start one "
               "(examples/README.md); the bound was not checked\n");
    bool ok = reports == n && sum.failed == 0 &&
              (!sum.shared || sum.granted <= bound);
    printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

static unsigned reap(unsigned n, const pid_t *pids)
{
    unsigned failed = 0;
    for (unsigned i = 0; i < n; i++) {
        int status;
        if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failed++;
    }
    return failed;
}

int main(int argc, char **argv)
{
    unsigned long n = argc > 2 ? strtoul(argv[2], NULL, 10) : 4;
    if (argc < 2 || argc > 3 || n < 1 || n > MAX_WORKERS) {
        fprintf(stderr, "usage: prefork BASE_URL [WORKERS (1..%d)]\n",
                MAX_WORKERS);
        return 64;
    }
    /* The parent's setup (configuration, listening sockets, ...) goes
     * here; retryd is opened by each worker after fork(). */
    struct pipes p;
    pid_t pids[MAX_WORKERS];
    if (pipe(p.ready) < 0 || pipe(p.gate) < 0 || pipe(p.out) < 0 ||
        fork_workers((unsigned)n, argv[1], &p, pids) < 0) {
        perror("prefork");
        return 70;
    }
    barrier((unsigned)n, &p);
    int rc = summarise((unsigned)n, p.out[0]);
    unsigned failed = reap((unsigned)n, pids);
    if (failed > 0)
        printf("%u worker%s did not exit cleanly\n", failed,
               failed == 1 ? "" : "s");
    return rc == 0 && failed == 0 ? 0 : 1;
}

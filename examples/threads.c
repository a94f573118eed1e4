/* SPDX-License-Identifier: MIT */
/*
 * threads: a multi-threaded service on retryd's executor.
 *
 * One retryd_client and one retryd_profile, made once at startup, are
 * shared by every thread: both are thread-safe, and sharing them is what
 * makes the threads share a connection pool, a bulkhead and the upstream's
 * budget handle. Each thread calls retryd_execute() and handles the three
 * outcomes.
 *
 * usage: threads BASE_URL [THREADS [ROUNDS]]
 *
 * Each thread runs ROUNDS rounds of the three requests of `jobs` below.
 * Their paths are those of retryd's fault-injecting test server
 * (tests/support/faultsrv.c), which misbehaves on request, so the outcome
 * of each is known in advance and the program exits 1 when any request
 * gets another: run it against that server (examples/README.md). Against
 * your own upstream, replace the table.
 *
 * The retries are paid from the host budget: through the retryd daemon
 * named by $RETRYD_CONTROL_SOCKET (default /run/retryd/control.sock), or
 * from a process-local budget when no daemon answers.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <retryd/retryd.h>

#define MS INT64_C(1000000)
#define MAX_THREADS 64

/* One kind of request, and the outcome it must end in. */
struct job {
    const char *name;
    const char *method;
    /* The path, to which "-<thread>-<round>" is appended: a request id
     * of its own for each request, which the server counts. */
    const char *path;
    retryd_idempotency idempotency;
    bool idempotency_key;
    retryd_outcome expect;
};

static const struct job jobs[] = {
    /* A read the upstream fails once (503, then 200). Safe, so the engine
     * retries it when the host budget affords a retry; a response either
     * way: the 200, or the 503 itself when the budget said no. */
    {"read", "GET", "/seq?codes=503,200&id=read", RETRYD_IDEMPOTENCY_SAFE,
     false, RETRYD_OUTCOME_RESPONSE},
    /* A payment whose connection closes after the server has read it: it
     * may have executed, so it is never sent again. The caller must
     * reconcile (ask the upstream whether it went through). */
    {"payment", "POST", "/close-after-read?id=pay",
     RETRYD_IDEMPOTENCY_NON_IDEMPOTENT, false, RETRYD_OUTCOME_AMBIGUOUS},
    /* The same payment with an Idempotency-Key (a UUID, the same on every
     * attempt): an upstream that honours keys executes it at most once, so
     * it can be retried, and ends as a plain failure, not an ambiguity. */
    {"keyed payment", "POST", "/close-after-read?id=keyed",
     RETRYD_IDEMPOTENCY_NON_IDEMPOTENT, true, RETRYD_OUTCOME_FAILURE},
};
#define N_JOBS (sizeof(jobs) / sizeof(jobs[0]))

/* What a thread did. Each thread counts in its own struct, and main reads
 * them after pthread_join(): no lock, no atomics. */
struct worker {
    pthread_t thread;
    unsigned number, rounds;
    retryd_profile *profile; /* shared by all threads */
    unsigned long outcomes[RETRYD_OUTCOME_COUNT], unexpected, errors, attempts;
};

/* One request: execute, check the outcome, print one line. */
static void run_job(struct worker *w, const struct job *job, unsigned round)
{
    char path[128];
    snprintf(path, sizeof(path), "%s-%u-%u", job->path, w->number, round);
    /* A body in memory is REPLAYABLE: the engine may send it again. */
    static const char amount[] = "{\"amount\":10}";
    retryd_body *body = NULL;
    if (strcmp(job->method, "POST") == 0 &&
        retryd_body_new_bytes(amount, sizeof(amount) - 1, &body) < 0) {
        w->errors++;
        return;
    }
    retryd_request req = {
        .sz = sizeof(req), /* every public struct starts with its size */
        .method = job->method,
        .path = path,
        .body = body,
        .idempotency = job->idempotency, /* declared: never the method */
        .idempotency_key = job->idempotency_key,
        .deadline_ns = 10000 * MS, /* for all attempts and waits */
    };
    retryd_result *res = NULL;
    int r = retryd_execute(w->profile, &req, &res);
    retryd_body_free(body);
    if (r < 0) { /* a bad request or no memory: not an outcome */
        fprintf(stderr, "threads: %s: %s\n", path, retryd_strerror(r));
        w->errors++;
        return;
    }
    retryd_outcome o = retryd_result_outcome(res);
    size_t attempts = retryd_result_attempt_count(res);
    w->outcomes[o]++;
    w->attempts += attempts;
    w->unexpected += o != job->expect;
    char status[8] = ""; /* a failure or an ambiguity may have none */
    if (retryd_result_status(res) != 0)
        snprintf(status, sizeof(status), " %d", retryd_result_status(res));
    /* One printf per line: stdio locks the stream, so lines of different
     * threads do not interleave. */
    printf("thread %u: %s %s %s -> %s%s (%s, %zu attempt%s)%s\n", w->number,
           job->name, job->method, path, retryd_outcome_name(o), status,
           retryd_evidence_name(retryd_result_evidence(res)), attempts,
           attempts == 1 ? "" : "s", o == job->expect ? "" : " UNEXPECTED");
    retryd_result_free(res);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (unsigned round = 0; round < w->rounds; round++)
        for (size_t j = 0; j < N_JOBS; j++)
            run_job(w, &jobs[j], round);
    return NULL;
}

/* The client and the profile every thread shares. */
static int setup(const char *base_url, retryd_client **client,
                 retryd_profile **profile)
{
    /* Nested option structs are pointers, each with its own sz. */
    const retryd_host_opts host = {.sz = sizeof(host),
                                   .client_name = "example threads"};
    const retryd_client_opts copts = {.sz = sizeof(copts), .host = &host};
    const retryd_backoff_policy backoff = {
        .sz = sizeof(backoff),
        .jitter = RETRYD_JITTER_FULL,
        .base_ns = 10 * MS,
        .max_ns = 200 * MS,
        .max_retry_after_ns = 2000 * MS,
    };
    const retryd_profile_opts popts = {
        .sz = sizeof(popts),
        .base_url = base_url,
        .max_attempts = 3,
        .attempt_timeout_ns = 2000 * MS,
        .backoff = &backoff, /* read and copied by retryd_profile_new */
    };
    int r = retryd_client_new(&copts, client);
    if (r == 0)
        r = retryd_profile_new(*client, &popts, profile);
    if (r < 0)
        fprintf(stderr, "threads: %s\n", retryd_strerror(r));
    return r;
}

static unsigned parse_count(const char *s, unsigned max)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    return *end == '\0' && v >= 1 && v <= max ? (unsigned)v : 0;
}

/* The totals, in a form a test can read back. */
static int report(const struct worker *w, unsigned n, retryd_profile *profile)
{
    unsigned long o[RETRYD_OUTCOME_COUNT] = {0}, unexpected = 0, errors = 0,
                  attempts = 0;
    for (unsigned i = 0; i < n; i++) {
        for (int k = 0; k < RETRYD_OUTCOME_COUNT; k++)
            o[k] += w[i].outcomes[k];
        unexpected += w[i].unexpected;
        errors += w[i].errors;
        attempts += w[i].attempts;
    }
    unsigned long requests = 0;
    for (int k = 0; k < RETRYD_OUTCOME_COUNT; k++)
        requests += o[k];
    retryd_upstream *budget = retryd_profile_budget(profile);
    printf("upstream %s, budget %s\n", retryd_upstream_name(budget),
           retryd_upstream_shared(budget)
               ? "shared through retryd"
               : "process-local (no retryd daemon answered)");
    printf("requests %lu: response %lu, failure %lu, ambiguous %lu; "
           "unexpected %lu, errors %lu; throttled %lu\n",
           requests, o[RETRYD_OUTCOME_RESPONSE], o[RETRYD_OUTCOME_FAILURE],
           o[RETRYD_OUTCOME_AMBIGUOUS], unexpected, errors,
           o[RETRYD_OUTCOME_THROTTLED]);
    /* Every attempt after a request's first was a retry the engine
     * granted and the budget paid for. */
    printf("attempts %lu, retries %lu\n", attempts, attempts - requests);
    return unexpected == 0 && errors == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    unsigned n = argc > 2 ? parse_count(argv[2], MAX_THREADS) : 4;
    unsigned rounds = argc > 3 ? parse_count(argv[3], 1000) : 3;
    if (argc < 2 || argc > 4 || n == 0 || rounds == 0) {
        fprintf(stderr, "usage: threads BASE_URL [THREADS [ROUNDS]]\n");
        return 64;
    }
    retryd_client *client = NULL;
    retryd_profile *profile = NULL;
    if (setup(argv[1], &client, &profile) < 0) {
        retryd_client_free(client);
        return 70;
    }
    struct worker w[MAX_THREADS] = {0};
    unsigned started = 0;
    for (; started < n; started++) {
        w[started] = (struct worker){
            .number = started, .rounds = rounds, .profile = profile};
        if (pthread_create(&w[started].thread, NULL, worker_main,
                           &w[started]) != 0)
            break;
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(w[i].thread, NULL);
    int rc = started == n ? report(w, n, profile) : 70;
    /* Profiles first, then the client (retryd_client_free's rule). */
    retryd_profile_free(profile);
    retryd_client_free(client);
    return rc;
}

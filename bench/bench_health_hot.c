/* SPDX-License-Identifier: MIT */
/*
 * Nanoseconds per request of upstream health on the hot path
 * (docs/health.md), on a real daemon's segment, beside the same request
 * without it and two baselines measured in the same run, for 1 thread and
 * for 2 threads of one process on the same upstream:
 *   (e) an empty call loop: a function that does nothing, called through
 *       a pointer the compiler cannot see through;
 *   (a) atomic_fetch_add on one shared cache line: the floor of any
 *       counter the threads share;
 *   decide + take: retryd_decide for a retry (a 503, idempotent, attempt 1
 *       of 3) with the upstream's budget, which takes the token: the
 *       request as it was before upstream health;
 * then, on three upstreams (the throttle off, the default, with pushback
 * on; on with a healthy window, only accepts; on and engaged, a throttle
 * probability near 0.1), two kinds of request:
 *   admit + decide + take: retryd_upstream_admit for the first attempt,
 *       then the same decision and take: what issue 18 asks to stay
 *       within 40 ns;
 *   executors' calls: the request as the executors run it
 *       (libclient/exec/attempt.c): the admission, then for the attempt's
 *       answer retryd_upstream_pushback and retryd_upstream_observe (the
 *       one atomic addition into the window), then the decision and take.
 * A throttled first attempt ends its request there.
 *
 * The decision is the same retry in every row; what the executors' rows
 * observe is what keeps each window as it is: accepts on the healthy
 * upstream, 200 and 503 in turn on the engaged one (with K = 2, a window
 * fed half accepts keeps its probability: (R - 2A) / R does not move; the
 * admission rows, which observe nothing, drift up by their throttled
 * requests, 0.1 to about 0.18 in a 2-thread phase). A window slot stops
 * counting at four million events (health.h), so every phase starts from
 * the same window: reset (retryd__health_init with the slot's own
 * parameters) and seeded with one addition of the seed's counts (and one
 * rejection observed, which makes this process the quorum), untimed, and
 * checked after the phase. Each phase's withdrawals find exactly the
 * tokens an untimed refill put in (ratio 1, no floor), so every retry is
 * granted.
 *
 * Each figure is a median over runs; in a run the rows take turns. A
 * phase starts its threads, lets each claim its counter lane untimed,
 * releases them through a barrier and takes the wall time from the first
 * start to the last finish divided by one thread's requests.
 *
 * A third argument, a row's name (decide, admit-off, admit-on,
 * admit-engaged, off, on, engaged), runs that row
 * alone and judges nothing: for profiling one row (callgrind, strace),
 * whose functions the rows share.
 *
 * usage: bench_health_hot [requests-per-thread] [runs] [row]
 */
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_proc.h"
#include "base/clock.h"
#include "budget/host.h"
#include "harness.h"
#include "retryd/budget_decide.h"

#define MAX_THREADS 2
#define MAX_RUNS 64
#define TARGET_NS 40.0      /* decision + throttle check + take (issue 18) */
#define SEED_EVENTS 2000000 /* the engaged window's requests at a start */
#define ENGAGED_P 0.1       /* its throttle probability */
#define HEALTHY_EVENTS 1000 /* the healthy window's accepts at a start */
#define NS_PER_S INT64_C(1000000000)
/* Two threads' requests and the seed stay below a window slot's limit
 * (HEALTH_COUNT_LIMIT), which a phase must not reach. */
#define MAX_REQUESTS 1000000

const char bench_prog[] = "bench_health_hot";

enum upstream_id { UP_OFF, UP_ON, UP_ENGAGED, N_UPSTREAMS };

static const char *const up_names[N_UPSTREAMS] = {"health_off", "health_on",
                                                  "health_engaged"};

/* Ratio 1 and no floor: the untimed refill is exactly what the timed
 * withdrawals take. A window of an hour: its slots (450 s) do not rotate
 * within a phase. */
static const char daemon_upstreams[] =
    "\n[upstream health_off]\nratio = 1\nmin_retries_per_sec = 0\n"
    "cap = 100000000\n"
    "\n[upstream health_on]\nratio = 1\nmin_retries_per_sec = 0\n"
    "cap = 100000000\nadaptive_throttle = on\nthrottle_window = 3600s\n"
    "\n[upstream health_engaged]\nratio = 1\nmin_retries_per_sec = 0\n"
    "cap = 100000000\nadaptive_throttle = on\nthrottle_window = 3600s\n"
    "throttle_k = 2\n";

typedef struct bench_env {
    rd_daemon d;
    retryd_host *host;
    retryd_upstream *up[N_UPSTREAMS];
    /* (a), on a line of its own. */
    alignas(64) _Atomic uint64_t counter;
    char after[64 - sizeof(uint64_t)];
} bench_env;

/* What one thread counts: requests granted a retry, first attempts the
 * throttle kept back. */
typedef struct tally {
    long retries, throttled;
} tally;

typedef struct kind_desc {
    const char *label;
    const char *name; /* the row argument */
    int upstream;     /* -1: no upstream */
    long (*loop)(bench_env *env, retryd_upstream *up, long n, tally *t);
} kind_desc;

/* --- the request ---------------------------------------------------------- */

static const retryd_facts retry_facts = {
    .sz = sizeof(retryd_facts),
    .attempt = 1,
    .max_attempts = 3,
    .evidence = RETRYD_EVIDENCE_RESPONSE_RECEIVED,
    .replayability = RETRYD_REPLAYABLE,
    .idempotency = RETRYD_IDEMPOTENCY_IDEMPOTENT,
    .failure = RETRYD_FAILURE_NONE,
    .status = 503,
    .retry_after_ns = -1,
    .remaining_ns = 30 * NS_PER_S,
    .min_attempt_ns = NS_PER_S / 10,
};

static void env_of(retryd_upstream *up, retryd_decide_env *env)
{
    *env = (retryd_decide_env){.sz = sizeof(*env),
                               .budget = retryd_upstream_budget_iface(),
                               .budget_ctx = up};
}

__attribute__((noinline)) static void empty_request(retryd_upstream *up, long i)
{
    __asm__ volatile("" : : "r"(up), "r"(i) : "memory");
}

static long loop_empty(bench_env *env, retryd_upstream *up, long n, tally *t)
{
    void (*volatile fn)(retryd_upstream *, long) = empty_request;
    (void)env;
    for (long i = 0; i < n; i++)
        fn(up, i);
    t->retries = n;
    return n;
}

static long loop_atomic(bench_env *env, retryd_upstream *up, long n, tally *t)
{
    (void)up;
    for (long i = 0; i < n; i++)
        atomic_fetch_add_explicit(&env->counter, 1, memory_order_relaxed);
    t->retries = n;
    return n;
}

/* The decision and its take, as before upstream health. */
static long loop_decide(bench_env *env, retryd_upstream *up, long n, tally *t)
{
    retryd_decide_env de;
    retryd_decision d = {.sz = sizeof(d)};
    (void)env;
    env_of(up, &de);
    for (long i = 0; i < n; i++) {
        if (retryd_decide(&retry_facts, &de, &d) < 0)
            return bench_fail("retryd_decide refused its facts");
        t->retries += d.verdict == RETRYD_VERDICT_RETRY;
    }
    return n;
}

/*
 * One request as the executors run it now: the first attempt's admission;
 * its answer (@p status) observed, and the hold read, before the decision;
 * the decision and its take. A throttled first attempt ends the request.
 */
static inline __attribute__((always_inline)) long
health_requests(retryd_upstream *up, long n, tally *t, bool alternate)
{
    retryd_decide_env de;
    retryd_decision d = {.sz = sizeof(d)};
    retryd_facts f = retry_facts;
    env_of(up, &de);
    for (long i = 0; i < n; i++) {
        retryd_admission a = retryd_upstream_admit(up, true, f.remaining_ns,
                                                   f.min_attempt_ns, NULL);
        if (a == RETRYD_ADMIT_THROTTLED) {
            t->throttled++;
            continue;
        }
        int status = alternate && (i & 1) ? 503 : 200;
        f.pushback_ns = retryd_upstream_pushback(up);
        retryd_upstream_observe(up, RETRYD_EVIDENCE_RESPONSE_RECEIVED,
                                alternate ? status : 200, -1);
        if (retryd_decide(&f, &de, &d) < 0)
            return bench_fail("retryd_decide refused its facts");
        t->retries += d.verdict == RETRYD_VERDICT_RETRY;
    }
    return n;
}

/* What issue 18 times: the throttle check of the first attempt, then the
 * decision and its take; nothing observed (the executors' rows below add
 * that). A throttled first attempt ends the request. */
static long loop_admit(bench_env *env, retryd_upstream *up, long n, tally *t)
{
    retryd_decide_env de;
    retryd_decision d = {.sz = sizeof(d)};
    (void)env;
    env_of(up, &de);
    for (long i = 0; i < n; i++) {
        if (retryd_upstream_admit(up, true, retry_facts.remaining_ns,
                                  retry_facts.min_attempt_ns,
                                  NULL) == RETRYD_ADMIT_THROTTLED) {
            t->throttled++;
            continue;
        }
        if (retryd_decide(&retry_facts, &de, &d) < 0)
            return bench_fail("retryd_decide refused its facts");
        t->retries += d.verdict == RETRYD_VERDICT_RETRY;
    }
    return n;
}

/* Named apart from each other and from loop_admit, so that a profile
 * (callgrind's --toggle-collect) can pick one row. */
static long loop_health(bench_env *env, retryd_upstream *up, long n, tally *t)
{
    (void)env;
    return health_requests(up, n, t, false);
}

static long loop_engaged(bench_env *env, retryd_upstream *up, long n, tally *t)
{
    (void)env;
    return health_requests(up, n, t, true);
}

enum kind {
    K_EMPTY,
    K_ATOMIC,
    K_DECIDE,
    K_ADMIT_OFF,
    K_ADMIT_ON,
    K_ADMIT_ENGAGED,
    K_OFF,
    K_ON,
    K_ENGAGED,
    N_KINDS
};

static const kind_desc kinds[N_KINDS] = {
    [K_EMPTY] = {"(e) empty call loop", "empty", -1, loop_empty},
    [K_ATOMIC] = {"(a) atomic_fetch_add, shared line", "atomic", -1,
                  loop_atomic},
    [K_DECIDE] = {"decide + take (before health)", "decide", UP_OFF,
                  loop_decide},
    [K_ADMIT_OFF] = {"admit + decide + take, throttle off", "admit-off", UP_OFF,
                     loop_admit},
    [K_ADMIT_ON] = {"admit + decide + take, on, healthy", "admit-on", UP_ON,
                    loop_admit},
    [K_ADMIT_ENGAGED] = {"admit + decide + take, on, engaged", "admit-engaged",
                         UP_ENGAGED, loop_admit},
    [K_OFF] = {"executors' calls, throttle off", "off", UP_OFF, loop_health},
    [K_ON] = {"executors' calls, on, healthy", "on", UP_ON, loop_health},
    [K_ENGAGED] = {"executors' calls, on, engaged", "engaged", UP_ENGAGED,
                   loop_engaged},
};

/* --- the window, reset and seeded between phases -------------------------- */

static seg_upstream *shared_slot(retryd_upstream *up)
{
    binding *b = atomic_load_explicit(&up->bind, memory_order_acquire);
    return b ? b->slot : NULL;
}

/* Start the window of @p id again, as the daemon does when its parameters
 * change; the engaged one with SEED_EVENTS requests at ENGAGED_P. */
static int reset_window(bench_env *env, int id)
{
    retryd_upstream *up = env->up[id];
    seg_upstream *s = shared_slot(up);
    health_params p;
    if (s == NULL)
        return bench_fail("%s is not bound to a shared slot", up_names[id]);
    retryd__health_params_of(s, &p);
    retryd__health_init(s, &p);
    /* The process's rejecter record pointed into the cleared ring. */
    atomic_store(&atomic_load(&up->bind)->reject_epoch, 0);
    uint64_t now = retryd__clock_coarse_ns();
    if (id == UP_ON) /* a healthy window: accepts only */
        retryd__health_record(s, now, HEALTHY_EVENTS, HEALTHY_EVENTS);
    if (id != UP_ENGAGED)
        return 0;
    /* One addition of the seed's counts, and one rejection observed,
     * which also makes this process the quorum. R - 2A = p (R + 1), with
     * R = SEED_EVENTS + 1: A = (R (1 - p) - p) / 2. */
    double r = SEED_EVENTS + 1.0;
    retryd__health_record(s, now, SEED_EVENTS,
                          (unsigned)((r * (1 - ENGAGED_P) - ENGAGED_P) / 2));
    retryd_upstream_observe(up, RETRYD_EVIDENCE_RESPONSE_RECEIVED, 503, -1);
    return 0;
}

/* The window of @p id is in its row's state: never engaged when healthy,
 * engaged near ENGAGED_P when engaged; nothing when the throttle is off. */
static int check_window(bench_env *env, int id, const char *when)
{
    retryd_health h = {.sz = sizeof(h)};
    if (retryd_upstream_health(env->up[id], &h) < 0)
        return bench_fail("retryd_upstream_health failed");
    bool ok = id == UP_OFF  ? !h.throttle && h.requests == 0
              : id == UP_ON ? h.throttle && !h.engaged && h.requests > 0
                            : h.engaged && h.probability > ENGAGED_P / 2 &&
                                  h.probability < ENGAGED_P * 2.5;
    if (ok)
        return 0;
    return bench_fail("%s %s the phase: throttle %d, engaged %d, p %.4f, "
                      "R %llu, A %llu",
                      up_names[id], when, h.throttle, h.engaged, h.probability,
                      (unsigned long long)h.requests,
                      (unsigned long long)h.accepts);
}

/* Put in the tokens the phase's retries will take. */
static int refill(retryd_upstream *up, long tokens)
{
    for (long i = 0; i < tokens; i++) {
        int r = retryd_upstream_deposit(up);
        if (r < 0)
            return bench_fail("retryd_upstream_deposit: %s",
                              retryd_strerror(r));
    }
    return 0;
}

/* --- one phase: nthreads threads, one barrier ----------------------------- */

typedef struct worker {
    bench_env *env;
    enum kind k;
    long n;
    pthread_barrier_t *ready, *go;
    int64_t t0, t1;
    long count;
    tally t;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    retryd_upstream *up =
        kinds[w->k].upstream >= 0 ? w->env->up[kinds[w->k].upstream] : NULL;
    double tokens;
    /* The thread's first budget operation claims its lane: untimed. */
    if (up != NULL && retryd_upstream_balance(up, &tokens) < 0)
        w->count = -1;
    pthread_barrier_wait(w->ready);
    pthread_barrier_wait(w->go);
    w->t0 = bench_now_ns();
    if (w->count == 0)
        w->count = kinds[w->k].loop(w->env, up, w->n, &w->t);
    w->t1 = bench_now_ns();
    return NULL;
}

typedef struct phase_result {
    double ns;
    tally t;
} phase_result;

static int prepare_phase(bench_env *env, enum kind k, long requests)
{
    int id = kinds[k].upstream;
    if (id < 0)
        return 0;
    if (refill(env->up[id], requests) < 0 || reset_window(env, id) < 0)
        return -1;
    return check_window(env, id, "before");
}

/* Start, release and join @p nth workers of @p k; the figure into @p res. */
static int run_threads(bench_env *env, enum kind k, int nth, long n,
                       phase_result *res)
{
    pthread_t tid[MAX_THREADS];
    worker w[MAX_THREADS];
    pthread_barrier_t ready, go;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    int rc = 0, started = 0;

    pthread_barrier_init(&ready, NULL, (unsigned)nth + 1);
    pthread_barrier_init(&go, NULL, (unsigned)nth + 1);
    for (int i = 0; i < nth; i++) {
        w[i] = (worker){.env = env, .k = k, .n = n, .ready = &ready, .go = &go};
        errno = pthread_create(&tid[i], NULL, worker_main, &w[i]);
        if (errno != 0) {
            /* The barriers count on every thread: nothing to recover. */
            bench_fail_errno("pthread_create");
            exit(1);
        }
        started++;
    }
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    *res = (phase_result){0};
    for (int i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
        rc = w[i].count != n ? -1 : rc;
        t0 = w[i].t0 < t0 ? w[i].t0 : t0;
        t1 = w[i].t1 > t1 ? w[i].t1 : t1;
        res->t.retries += w[i].t.retries;
        res->t.throttled += w[i].t.throttled;
    }
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&go);
    res->ns = (double)(t1 - t0) / (double)n;
    return rc < 0 ? bench_fail("%s: a thread failed", kinds[k].label) : 0;
}

static int run_phase(bench_env *env, enum kind k, int nth, long n,
                     phase_result *res)
{
    long requests = n * nth;
    if (prepare_phase(env, k, requests) < 0 ||
        run_threads(env, k, nth, n, res) < 0)
        return -1;
    int id = kinds[k].upstream;
    if (id >= 0 && check_window(env, id, "after") < 0)
        return -1;
    /* Every request that was not throttled must have had its retry. */
    if (res->t.retries + res->t.throttled != requests)
        return bench_fail("%s: %ld retries and %ld throttled of %ld requests",
                          kinds[k].label, res->t.retries, res->t.throttled,
                          requests);
    return 0;
}

/* --- the runs and the report ---------------------------------------------- */

typedef struct results {
    double ns[N_KINDS][MAX_THREADS][MAX_RUNS];
    long throttled[N_KINDS][MAX_THREADS], requests[N_KINDS][MAX_THREADS];
} results;

/* Every row, or only @p only (>= 0). */
static int measure(bench_env *env, long n, int runs, int only, results *res)
{
    for (int r = 0; r < runs; r++)
        for (int ti = 0; ti < MAX_THREADS; ti++)
            for (int k = 0; k < N_KINDS; k++) {
                phase_result p;
                if (only >= 0 && k != only)
                    continue;
                if (run_phase(env, (enum kind)k, ti + 1, n, &p) < 0)
                    return bench_fail("%s, %d thread(s), run %d failed",
                                      kinds[k].label, ti + 1, r + 1);
                res->ns[k][ti][r] = p.ns;
                res->throttled[k][ti] += p.t.throttled;
                res->requests[k][ti] += n * (ti + 1);
            }
    return 0;
}

static void print_results(long n, int runs, results *res)
{
    double m[N_KINDS][MAX_THREADS];
    for (int k = 0; k < N_KINDS; k++)
        for (int ti = 0; ti < MAX_THREADS; ti++)
            m[k][ti] = bench_median(res->ns[k][ti], (size_t)runs);
    printf("bench_health_hot: %ld requests per thread x %d runs, medians\n", n,
           runs);
    printf("  %-38s %9s %10s %12s %12s\n", "ns/request (wall / per thread)",
           "1 thread", "2 threads", "- decide, 1", "- decide, 2");
    for (int k = 0; k < N_KINDS; k++) {
        printf("  %-38s %9.1f %10.1f", kinds[k].label, m[k][0], m[k][1]);
        if (k > K_DECIDE)
            printf(" %12.1f %12.1f", m[k][0] - m[K_DECIDE][0],
                   m[k][1] - m[K_DECIDE][1]);
        printf("\n");
    }
    printf("  ratios to decide + take                 1 thread  2 threads\n");
    for (int k = K_ADMIT_OFF; k < N_KINDS; k++)
        printf("  %-38s %8.2fx %9.2fx\n", kinds[k].label,
               m[k][0] / m[K_DECIDE][0], m[k][1] / m[K_DECIDE][1]);
    /* Issue 18's figure is the admission rows'; the executors' rows hold
     * the answer's observation and the hold's read as well. */
    bool met = true;
    for (int k = K_ADMIT_OFF; k <= K_ADMIT_ENGAGED; k++)
        met = met && m[k][0] <= TARGET_NS;
    printf("  target: admit + decide + take <= %.0f ns/request, 1 thread, "
           "each throttle state: %s\n",
           TARGET_NS, met ? "met" : "MISSED");
    for (int k = K_ADMIT_ENGAGED; k <= K_ENGAGED;
         k += K_ENGAGED - K_ADMIT_ENGAGED)
        for (int ti = 0; ti < MAX_THREADS; ti++)
            printf(
                "  %s, %d thread(s): %.3f of first attempts throttled\n",
                kinds[k].label, ti + 1,
                (double)res->throttled[k][ti] /
                    (double)(res->requests[k][ti] ? res->requests[k][ti] : 1));
}

static int row_named(const char *name)
{
    for (int k = 0; k < N_KINDS; k++)
        if (strcmp(name, kinds[k].name) == 0)
            return k;
    return -1;
}

/* --- the environment ------------------------------------------------------ */

static int env_setup(bench_env *env)
{
    retryd_host_opts o = {.sz = sizeof(o), .client_name = "bench_health_hot"};
    if (rd_daemon_init(&env->d, daemon_upstreams) < 0)
        return bench_fail_errno("the daemon's directory");
    if (rd_daemon_start(&env->d) < 0) {
        bench_print_tail(env->d.log);
        return bench_fail("retryd did not become ready");
    }
    o.control_socket = env->d.control;
    int r = retryd_host_open(&o, &env->host);
    for (int i = 0; r == 0 && i < N_UPSTREAMS; i++)
        r = retryd_upstream_open(env->host, up_names[i], NULL, &env->up[i]);
    if (r < 0)
        return bench_fail("opening the upstreams: %s", retryd_strerror(r));
    for (int i = 0; i < N_UPSTREAMS; i++)
        if (!retryd_upstream_shared(env->up[i]) ||
            shared_slot(env->up[i]) == NULL)
            return bench_fail("%s is not on the daemon's segment: refusing "
                              "to time a local bucket",
                              up_names[i]);
    return 0;
}

static int env_teardown(bench_env *env)
{
    int rc = 0;
    retryd_host_close(env->host);
    if (env->d.pid > 0 && rd_daemon_stop(&env->d, SIGTERM) != 0)
        rc = bench_fail("retryd did not stop cleanly");
    rd_daemon_cleanup(&env->d);
    return rc;
}

int main(int argc, char **argv)
{
    static bench_env env;
    static results res;
    long n = 1000000, runs = 11;
    int only = argc > 3 ? row_named(argv[3]) : -1;

    if (argc > 4 ||
        (argc > 1 && !retryd__parse_long(argv[1], 1, MAX_REQUESTS, &n)) ||
        (argc > 2 && !retryd__parse_long(argv[2], 1, MAX_RUNS, &runs)) ||
        (argc > 3 && only < 0)) {
        fprintf(stderr,
                "usage: bench_health_hot [requests-per-thread 1..%d] "
                "[runs 1..64] [row: empty atomic decide admit-off admit-on "
                "admit-engaged off on engaged]\n",
                MAX_REQUESTS);
        return 64;
    }
    if (bench_install_signals() < 0)
        return 1;
    int rc = env_setup(&env);
    if (rc == 0)
        rc = measure(&env, n, (int)runs, only, &res);
    if (env_teardown(&env) < 0)
        rc = -1;
    if (rc == 0 && only < 0)
        print_results(n, (int)runs, &res);
    else if (rc == 0)
        printf("bench_health_hot: %s alone, %ld requests per thread x %ld runs "
               "(nothing judged)\n",
               kinds[only].label, n, runs);
    return rc == 0 ? 0 : 1;
}

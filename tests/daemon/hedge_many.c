/* SPDX-License-Identifier: MIT */
/*
 * Many hedged requests against a real upstream and a real daemon
 * (docs/hedging.md): 10^5 in the address-sanitizer build (fewer in the
 * others, whose runs are about time rather than memory), through a multi
 * keeping 32 in flight and two threads calling retryd_execute (which run
 * theirs on the client's own loops). A quarter go to a path whose first
 * execution stalls for 10 s, so each of them is answered by its hedge and
 * leaves a loser to stop; the rest are answered before any hedge is due.
 *
 * What must hold: every answer is the one that came first (the stalled
 * execution's body is never delivered); each stalled request ran exactly
 * twice and the server saw every loser's client leave (its connection
 * closed, never re-sent); no bulkhead permit is lost (a burst the size of
 * the bulkhead gets every permit afterwards); every connection is closed
 * once the client is freed; the sanitizers see no leak (easy handles,
 * calls, results); and the budgets' ledgers hold: retries and hedges
 * within the retry budget, hedges within the hedge budget.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "health_fixture.h"
#include "retryd/multi.h"
#include "srv_log.h"
#include "testsrv.h"

#if defined(__SANITIZE_ADDRESS__)
#define REQUESTS 100000 /* the 10^5: what the leak check is for */
#elif defined(__SANITIZE_THREAD__)
#define REQUESTS 3000
#else
#define REQUESTS 20000
#endif
#define BATCH 2000 /* the server's per-id tables are reset between */
#define IN_FLIGHT 32
#define THREADS 2
#define BULKHEAD 96
#define MS INT64_C(1000000)

static testsrv *srv;
static retryd_client *client;
static retryd_profile *profile;

/* What every request of a batch came to, checked as it completes. */
typedef struct tally {
    _Atomic long done, stalled, hedged_answers, firsts_answering, wrong;
    char first_wrong[256];
} tally;

static tally T;

static void wrong(const char *id, const char *what)
{
    if (atomic_fetch_add(&T.wrong, 1) == 0)
        snprintf(T.first_wrong, sizeof(T.first_wrong), "%s: %s", id, what);
}

/* A stalled request's answer is its hedge's (or, had the hedge reached
 * the server first, its first attempt's): "later execution", never the
 * stalled execution's body, with the other attempt stopped as a loser. */
static void check_stalled(const char *id, const retryd_result *r)
{
    size_t len, n = retryd_result_attempt_count(r);
    const char *body = retryd_result_body(r, &len);
    if (len != 16 || memcmp(body, "later execution\n", 16) != 0) {
        wrong(id, "delivered another body than the first answer's");
        return;
    }
    if (n != 2 || retryd_result_attempt(r, 0)->decision->rule !=
                      RETRYD_RULE_HEDGE_SIBLING_ANSWERED) {
        wrong(id, "not one loser then the answer");
        return;
    }
    retryd_attempt_role role = retryd_result_attempt(r, 1)->role;
    atomic_fetch_add(
        role == RETRYD_ROLE_HEDGE ? &T.hedged_answers : &T.firsts_answering, 1);
}

static void check(const char *id, const retryd_result *r)
{
    if (retryd_result_outcome(r) != RETRYD_OUTCOME_RESPONSE ||
        retryd_result_status(r) != 200) {
        wrong(id, retryd_outcome_name(retryd_result_outcome(r)));
        return;
    }
    if (id[0] == 's') {
        atomic_fetch_add(&T.stalled, 1);
        check_stalled(id, r);
    } else {
        size_t len;
        const char *body = retryd_result_body(r, &len);
        if (len != 2 || memcmp(body, "ok", 2) != 0)
            wrong(id, "delivered another body than ok");
    }
    atomic_fetch_add(&T.done, 1);
}

/* Request @p i of batch @p b: every fourth one stalls. */
static void path_of(int b, int i, char *id, char *path, size_t len)
{
    bool stall = i % 4 == 0;
    snprintf(id, 32, "%c%d-%d", stall ? 's' : 'q', b, i);
    if (stall)
        snprintf(path, len, "/stall-first?ms=10000&id=%s", id);
    else
        snprintf(path, len, "/ok?id=%s", id);
}

static retryd_request request_for(const char *path)
{
    return (retryd_request){.sz = sizeof(retryd_request),
                            .path = path,
                            .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                            .deadline_ns = 30000 * MS};
}

/* --- the multi's share ------------------------------------------------- */

typedef struct driver driver;

typedef struct slot {
    driver *d;
    char id[32], path[96];
    retryd_request req;
} slot;

struct driver {
    retryd_multi *m;
    slot slots[IN_FLIGHT];
    int batch, next, end;
};

static void submit(driver *d, slot *s);

static void on_done(void *ctx, retryd_call *call, int err,
                    retryd_result *result)
{
    slot *s = ctx;
    (void)call;
    if (err != 0 || result == NULL)
        wrong(s->id, retryd_strerror(err));
    else
        check(s->id, result);
    retryd_result_free(result);
    if (s->d->next < s->d->end)
        submit(s->d, s);
}

static void submit(driver *d, slot *s)
{
    s->d = d;
    path_of(d->batch, d->next++, s->id, s->path, sizeof(s->path));
    s->req = request_for(s->path);
    CHECK(retryd_multi_submit(d->m, profile, &s->req, on_done, s, NULL) == 0,
          "submit %s", s->id);
}

/* --- the threads' share (retryd_execute) -------------------------------- */

typedef struct worker {
    pthread_t t;
    int batch, from, to;
} worker;

static void *execute_range(void *arg)
{
    worker *w = arg;
    char id[32], path[96];
    for (int i = w->from; i < w->to; i++) {
        path_of(w->batch, i, id, path, sizeof(path));
        retryd_request req = request_for(path);
        retryd_result *r = NULL;
        int e = retryd_execute(profile, &req, &r);
        if (e != 0)
            wrong(id, retryd_strerror(e));
        else
            check(id, r);
        retryd_result_free(r);
    }
    return NULL;
}

/* One batch: the multi takes [0, n - THREADS * per), each thread its own
 * range after it; then the server's execution counts. */
static void run_batch(driver *d, int b, int n)
{
    int per = n / 8, multi_end = n - THREADS * per;
    worker w[THREADS];
    long before = atomic_load(&T.stalled);
    for (int k = 0; k < THREADS; k++) {
        w[k] = (worker){.batch = b,
                        .from = multi_end + k * per,
                        .to = multi_end + (k + 1) * per};
        CHECK(pthread_create(&w[k].t, NULL, execute_range, &w[k]) == 0,
              "thread");
    }
    d->batch = b;
    d->next = 0;
    d->end = multi_end;
    for (int i = 0; i < IN_FLIGHT && d->next < d->end; i++)
        submit(d, &d->slots[i]);
    CHECK(retryd_multi_run(d->m, 120000 * MS) == 0, "batch %d ran", b);
    for (int k = 0; k < THREADS; k++)
        pthread_join(w[k].t, NULL);
    long stalled = atomic_load(&T.stalled) - before;
    /* Two executions each, and each loser's client seen leaving. */
    long execs = 0, gone = 0;
    for (int i = 0; i < n; i += 4) {
        char id[32], path[96];
        path_of(b, i, id, path, sizeof(path));
        long c = testsrv_wait_count(srv, id, 2, 5000);
        if (c != 2)
            wrong(id, "not executed exactly twice");
        execs += c;
        long g = testsrv_number(srv, "GONE", id);
        for (int k = 0; k < 500 && g < 1; k++, usleep(10000))
            g = testsrv_number(srv, "GONE", id);
        gone += g;
    }
    CHECK(execs == 2 * stalled && gone == stalled,
          "batch %d: %ld stalled requests, %ld executions, %ld losers gone", b,
          stalled, execs, gone);
    CHECK(testsrv_reset(srv) == 0, "reset");
}

/* No permit lost: as many requests as the bulkhead has permits, each held
 * 2 s by the server, must all be executing at once (a permit lost by a
 * stopped loser would leave one waiting). */
static slot burst[BULKHEAD];
static _Atomic long burst_ok;

static void burst_done(void *ctx, retryd_call *call, int err,
                       retryd_result *result)
{
    (void)ctx, (void)call;
    if (err == 0 && retryd_result_status(result) == 200)
        atomic_fetch_add(&burst_ok, 1);
    retryd_result_free(result);
}

static long burst_started(void)
{
    long n = 0;
    for (int i = 0; i < BULKHEAD; i++)
        n += testsrv_count(srv, burst[i].id) > 0;
    return n;
}

static void every_permit_is_back(void)
{
    static const retryd_hedge_policy off = {sizeof(retryd_hedge_policy),
                                            RETRYD_HEDGE_OFF, 0, 0};
    retryd_multi *m;
    CHECK(retryd_multi_new(client, NULL, &m) == 0, "multi");
    for (int i = 0; i < BULKHEAD; i++) {
        snprintf(burst[i].id, sizeof(burst[i].id), "burst%d", i);
        snprintf(burst[i].path, sizeof(burst[i].path),
                 "/hold?ms=2000&id=burst%d", i);
        burst[i].req = request_for(burst[i].path);
        burst[i].req.hedge = &off;
        CHECK(retryd_multi_submit(m, profile, &burst[i].req, burst_done, NULL,
                                  NULL) == 0,
              "burst submit");
    }
    long started = 0;
    for (int64_t end = testsrv_now_ms() + 1500;
         (started = burst_started()) < BULKHEAD && testsrv_now_ms() < end;)
        (void)retryd_multi_run(m, 20 * MS);
    CHECK(started == BULKHEAD,
          "%ld of %d permits could be had at once: some were lost", started,
          BULKHEAD);
    CHECK(retryd_multi_run(m, 20000 * MS) == 0, "the burst completed");
    CHECK(atomic_load(&burst_ok) == BULKHEAD, "%ld of %d answered",
          atomic_load(&burst_ok), BULKHEAD);
    retryd_multi_free(m);
}

/* The budgets' ledgers, from the daemon's stats: the retry bucket's
 * exactly (balance = initial + deposits * ratio + refilled - granted -
 * discarded; its grants are the retries and the hedges), the hedge
 * bucket's hedges within what its deposits and floor put in. */
static void budgets_hold(long hedges_at_least)
{
    run_result res;
    CHECK(rd_ctl(&hf_daemon, &res, "stats", "--json", NULL) == 0, "stats");
    const char *u = strstr(res.out, "\"name\":\"hedged\"");
    CHECK(u != NULL, "%s", res.out);
#define N(key) rd_json_number(u, NULL, key)
    double granted = N("retries_granted"), sent = N("hedges_sent");
    CHECK(sent >= (double)hedges_at_least, "%.0f hedges sent", sent);
    CHECK(granted >= sent, "every hedge took a retry token: %.0f of %.0f",
          granted, sent);
    double ledger = 0 + N("deposits") * N("ratio") + N("refilled_tokens") -
                    granted - N("discarded_tokens");
    /* The balance shown is foreseen with its refill; there is none. */
    CHECK(fabs(N("balance") - ledger) < 1e-3,
          "retry bucket %.6f, its ledger %.6f", N("balance"), ledger);
    double hedge_in = N("min_hedges_per_sec") +
                      N("hedge_deposits") * N("max_extra_load") +
                      N("hedge_refilled");
    CHECK(sent <= hedge_in, "hedges %.0f within what the hedge bucket got %.0f",
          sent, hedge_in);
#undef N
}

int main(void)
{
    hf_daemon_start("[upstream hedged]\nratio = 2\nmin_retries_per_sec = 0\n"
                    "cap = 1000000\nmax_extra_load = 1\n"
                    "min_hedges_per_sec = 10000\nhedge_cap = 1000000\n");
    CHECK(testsrv_start(FAULTSRV_PATH, NULL, &srv) == 0, "faultsrv");
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .control_socket = hf_daemon.control};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    CHECK(retryd_client_new(&co, &client) == 0, "client");
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    const retryd_hedge_policy after = {sizeof(retryd_hedge_policy),
                                       RETRYD_HEDGE_FIXED, 10 * MS, 1};
    retryd_profile_opts po = {.sz = sizeof(po),
                              .base_url = base,
                              .upstream = "hedged",
                              .bulkhead = BULKHEAD,
                              .bulkhead_wait_ns = 10000 * MS,
                              .hedge = &after};
    CHECK(retryd_profile_new(client, &po, &profile) == 0, "profile");
    CHECK(retryd_upstream_shared(retryd_profile_budget(profile)), "shared");
    driver *d = calloc(1, sizeof(*d));
    CHECK(d != NULL && retryd_multi_new(client, NULL, &d->m) == 0, "multi");
    int64_t t0 = testsrv_now_ms();
    for (int b = 0; b * BATCH < REQUESTS; b++)
        run_batch(d, b,
                  REQUESTS - b * BATCH < BATCH ? REQUESTS - b * BATCH : BATCH);
    int64_t took = testsrv_now_ms() - t0;
    CHECK(atomic_load(&T.wrong) == 0, "%ld wrong; first: %s",
          atomic_load(&T.wrong), T.first_wrong);
    CHECK(atomic_load(&T.done) == REQUESTS, "%ld of %d done",
          atomic_load(&T.done), REQUESTS);
    budgets_hold(atomic_load(&T.hedged_answers));
    every_permit_is_back();
    retryd_multi_free(d->m);
    free(d);
    retryd_profile_free(profile);
    retryd_client_free(client);
    /* Every connection closed with the client: none leaked. */
    CHECK(testsrv_wait_idle(srv, 5000) == 0, "%ld connections left open",
          testsrv_number(srv, "ACTIVE", NULL));
    testsrv_stop(srv);
    printf("hedge_many: %d hedged requests in %lld ms: %ld stalled (%ld "
           "answered by their hedge, %ld by their first attempt), 0 losers "
           "delivered\n",
           REQUESTS, (long long)took, atomic_load(&T.stalled),
           atomic_load(&T.hedged_answers), atomic_load(&T.firsts_answering));
    return 0;
}

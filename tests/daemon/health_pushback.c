/* SPDX-License-Identifier: MIT */
/*
 * Host pushback through the executor (docs/health.md): 8 real processes
 * with a real daemon and a real upstream on loopback. Process 0 receives
 * 503 with Retry-After: 2; then the other 7 meet a plain 503 on the same
 * upstream, with a backoff of a few milliseconds. The server records when
 * each attempt arrived (its TIMES command), and:
 *
 *   - no retry from any of them arrives before the hold's end minus 50 ms
 *     (the hold ends no earlier than 2 s after process 0's attempt
 *     arrived: a lower bound that does not depend on the machine's speed);
 *   - every held process did retry, once the hold was over;
 *   - the resumed retries are not one burst: they do not all fall within
 *     10 ms (the jitter spreads them over a quarter of the hold + 50 ms).
 *
 * And a request whose deadline the hold passes is denied by the deadline
 * rule (pushback_exceeds_deadline, or wait_exceeds_deadline), which its
 * attempt log shows.
 */
#include <inttypes.h>
#include <stdio.h>

#include "health_fixture.h"
#include "srv_log.h"
#include "testsrv.h"

#define PROCS 8
#define MS INT64_C(1000000)
#define HOLD_MS 2000
#define SLACK_MS 50
#define BOUND_MS 20000

static testsrv *srv;

typedef struct shared {
    _Atomic long ready, go[PROCS], done;
    uint32_t attempts[PROCS];
    retryd_rule rule[PROCS];
} shared;

static shared *sh;

static retryd_profile *profile_for(retryd_client **client, int64_t base_ns)
{
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .control_socket = hf_daemon.control};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    CHECK(retryd_client_new(&co, client) == 0, "client");
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    /* A backoff of milliseconds: only the hold keeps the retries back. */
    const retryd_backoff_policy backoff = {sizeof(backoff), RETRYD_JITTER_FULL,
                                           base_ns, 2 * base_ns, 60000 * MS};
    retryd_profile_opts po = {.sz = sizeof(po),
                              .base_url = base,
                              .upstream = "api",
                              .max_attempts = 2,
                              .backoff = &backoff};
    retryd_profile *p;
    CHECK(retryd_profile_new(*client, &po, &p) == 0, "profile");
    CHECK(retryd_upstream_shared(retryd_profile_budget(p)), "shared");
    return p;
}

static retryd_result *get(retryd_profile *p, const char *path,
                          int64_t deadline_ns)
{
    retryd_request q = {.sz = sizeof(q),
                        .method = "GET",
                        .path = path,
                        .idempotency = RETRYD_IDEMPOTENCY_SAFE,
                        .deadline_ns = deadline_ns};
    retryd_result *r;
    CHECK(retryd_execute(p, &q, &r) == 0, "execute %s", path);
    return r;
}

static int process(int i)
{
    retryd_client *client;
    retryd_profile *p = profile_for(&client, 2 * MS);
    char path[96];
    snprintf(path, sizeof(path), "/status?code=503%s&id=p%d",
             i == 0 ? "&retry_after=2" : "", i);
    atomic_fetch_add(&sh->ready, 1);
    CHECK(hf_wait_for(&sh->go[i], 1, BOUND_MS), "go");
    retryd_result *r = get(p, path, 0);
    sh->attempts[i] = (uint32_t)retryd_result_attempt_count(r);
    sh->rule[i] = retryd_result_decision(r)->rule;
    retryd_result_free(r);
    retryd_profile_free(p);
    retryd_client_free(client);
    return 0;
}

/* The server's arrival times of id p<i>: exactly @p want of them. */
static void arrivals(int i, int64_t *at, long want)
{
    char id[16];
    snprintf(id, sizeof(id), "p%d", i);
    long n = srv_log_times(srv, id, at, 4);
    CHECK(n == want, "%s arrived %ld times, not %ld", id, n, want);
}

static bool held(void *arg)
{
    return retryd_upstream_pushback(arg) > 0;
}

/* A request the hold would carry past its deadline of 1 s. */
static void past_the_deadline(void)
{
    retryd_client *client;
    retryd_profile *p = profile_for(&client, 2 * MS);
    retryd_result *r = get(p, "/status?code=503&id=dl", 1000 * MS);
    size_t n = retryd_result_attempt_count(r);
    CHECK(n == 1, "%zu attempts", n);
    const retryd_decision *d = retryd_result_attempt(r, 0)->decision;
    CHECK(d->verdict == RETRYD_VERDICT_DENIED &&
              d->reason == RETRYD_DENIAL_DEADLINE &&
              (d->rule == RETRYD_RULE_PUSHBACK_EXCEEDS_DEADLINE ||
               d->rule == RETRYD_RULE_WAIT_EXCEEDS_DEADLINE),
          "attempt 1: %s %s (%s)", retryd_verdict_name(d->verdict),
          retryd_denial_name(d->reason), retryd_rule_name(d->rule));
    CHECK(retryd_result_decision(r)->rule == d->rule, "the result's decision");
    printf("deadline: a 1 s request during the hold: %s (%s)\n",
           retryd_denial_name(d->reason), retryd_rule_name(d->rule));
    retryd_result_free(r);
    CHECK(testsrv_count(srv, "dl") == 1, "one attempt reached the upstream");
    retryd_profile_free(p);
    retryd_client_free(client);
}

int main(void)
{
    hf_daemon_start("[upstream api]\nratio = 1\nmin_retries_per_sec = 100\n"
                    "cap = 100\npushback = on\n");
    CHECK(testsrv_start(FAULTSRV_PATH, NULL, &srv) == 0, "faultsrv");
    sh = check_shared(sizeof(*sh));
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++)
        pids[i] = check_fork(process, i);
    /* Attached after the forks: a child starts with a library of its own. */
    retryd_host *h;
    retryd_upstream *up = hf_open("api", &h);
    CHECK(hf_wait_for(&sh->ready, PROCS, BOUND_MS), "ready");

    atomic_store(&sh->go[0], 1);
    CHECK(rd_wait_until(held, up, BOUND_MS), "process 0's Retry-After holds");
    int64_t t0;
    arrivals(0, &t0, 1);
    past_the_deadline();
    for (int i = 1; i < PROCS; i++)
        atomic_store(&sh->go[i], 1);
    hf_reap(pids, PROCS, BOUND_MS);

    int64_t at[2], first_retry = INT64_MAX, last_retry = 0;
    int64_t hold_end = t0 + HOLD_MS;
    arrivals(0, at, 2);
    CHECK(at[1] >= hold_end - SLACK_MS,
          "process 0 retried %" PRId64 " ms after its Retry-After: 2",
          at[1] - t0);
    for (int i = 1; i < PROCS; i++) {
        arrivals(i, at, 2);
        /* Their first attempts met the upstream during the hold, with a
         * backoff that would have brought them back within milliseconds. */
        CHECK(at[0] < hold_end - 10 * SLACK_MS,
              "process %d's first attempt came %" PRId64
              " ms after the hold began: nothing held it",
              i, at[0] - t0);
        CHECK(at[1] >= hold_end - SLACK_MS,
              "process %d retried %" PRId64 " ms into a %d ms hold", i,
              at[1] - t0, HOLD_MS);
        CHECK(sh->attempts[i] == 2, "process %d: %u attempts", i,
              sh->attempts[i]);
        first_retry = at[1] < first_retry ? at[1] : first_retry;
        last_retry = at[1] > last_retry ? at[1] : last_retry;
    }
    printf("pushback: %d held processes retried from %+" PRId64 " to %+" PRId64
           " ms after the hold's earliest end (spread %" PRId64
           " ms; jitter bound %d ms)\n",
           PROCS - 1, first_retry - hold_end, last_retry - hold_end,
           last_retry - first_retry, HOLD_MS / 4 + 50);
    CHECK(last_retry - first_retry >= 10,
          "the resumed retries came in one burst: all within %" PRId64 " ms",
          last_retry - first_retry);
    retryd_host_close(h);
    testsrv_stop(srv);
    CHECK(rd_daemon_stop_or_show_log(&hf_daemon, SIGTERM) == 0,
          "the daemon exits cleanly");
    return 0;
}

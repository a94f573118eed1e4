/* SPDX-License-Identifier: MIT */
/*
 * The asynchronous executor inside a caller's event loop: a poll() loop
 * written here drives it through the socket and timer callbacks, as a
 * libuv or epoll service would (retryd_multi_run is not used). The socket
 * callback attaches a record to each descriptor with retryd_multi_assign()
 * and must get it back; the timer callback arms one timer; backoffs are
 * that timer, not a busy loop; callbacks cannot re-enter; a completion may
 * cancel another call; a failed timer fails the requests in flight.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "retryd/retryd.h"
#include "testsrv.h"

#include "exec_fixture.h"
#include "exec_profile.h"

#define MS INT64_C(1000000)
#define S INT64_C(1000000000)
#define LOOP_MAX 512

TestSuite(multi_loop, .init = exec_setup, .fini = exec_teardown, .timeout = 60);

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

/* One watched descriptor: the record the socket callback attaches. */
typedef struct watched {
    int fd;
    short events;
    bool used;
} watched;

typedef struct loop {
    retryd_multi *m;
    watched w[LOOP_MAX];
    int64_t timer_at; /* -1: no timer */
    long timer_calls, timer_zero, timer_longest_ms, timer_deletes;
    long socket_calls, socketp_back, assigns, removes;
    long iterations;
    bool fail_timer;    /* the timer callback fails */
    bool try_reentry;   /* the timer callback checks re-entry is refused */
    retryd_call *probe; /* for try_reentry */
} loop;

static int on_socket(void *ctx, int fd, int what, void *socketp)
{
    loop *l = ctx;
    watched *w = socketp;
    l->socket_calls++;
    if (w != NULL) {
        l->socketp_back++;
        cr_assert_eq(w->fd, fd, "the record attached to fd %d", fd);
    }
    if (what == RETRYD_POLL_REMOVE) {
        if (w != NULL) {
            w->used = false;
            l->removes++;
        }
        return 0;
    }
    if (w == NULL) {
        for (int i = 0; i < LOOP_MAX && w == NULL; i++)
            if (!l->w[i].used)
                w = &l->w[i];
        cr_assert(w != NULL, "more than %d descriptors", LOOP_MAX);
        *w = (watched){.fd = fd, .used = true};
        /* From inside the socket callback, as libcurl's examples do. */
        cr_assert_eq(retryd_multi_assign(l->m, fd, w), 0);
        l->assigns++;
    }
    w->events = (short)((what & RETRYD_POLL_IN ? POLLIN : 0) |
                        (what & RETRYD_POLL_OUT ? POLLOUT : 0));
    return 0;
}

static int on_timer(void *ctx, long ms)
{
    loop *l = ctx;
    l->timer_calls++;
    if (l->try_reentry) {
        l->try_reentry = false;
        cr_expect_eq(
            retryd_multi_socket_action(l->m, RETRYD_SOCKET_TIMEOUT, 0, NULL),
            RETRYD_EINVAL);
        cr_expect_eq(retryd_multi_cancel(l->m, l->probe), RETRYD_EINVAL);
    }
    if (ms < 0) {
        l->timer_at = -1;
        l->timer_deletes++;
    } else {
        l->timer_at = now_ns() + ms * MS;
        l->timer_zero += ms == 0;
        if (ms > l->timer_longest_ms)
            l->timer_longest_ms = ms;
    }
    return l->fail_timer ? -1 : 0;
}

static int events_of(short revents)
{
    return (revents & (POLLIN | POLLHUP | POLLERR) ? RETRYD_CSELECT_IN : 0) |
           (revents & (POLLOUT | POLLERR) ? RETRYD_CSELECT_OUT : 0) |
           (revents & POLLERR ? RETRYD_CSELECT_ERR : 0);
}

/* One turn of the loop: poll the watched descriptors until the timer,
 * hand over what is ready, then the timer if it expired. The first
 * error of retryd_multi_socket_action, or 0. */
static int loop_once(loop *l)
{
    struct pollfd pfd[LOOP_MAX];
    nfds_t n = 0;
    int r = 0;
    for (int i = 0; i < LOOP_MAX; i++)
        if (l->w[i].used)
            pfd[n++] =
                (struct pollfd){.fd = l->w[i].fd, .events = l->w[i].events};
    int64_t now = now_ns();
    int ms = l->timer_at < 0      ? 1000
             : l->timer_at <= now ? 0
                                  : (int)((l->timer_at - now + MS - 1) / MS);
    cr_assert_geq(poll(pfd, n, ms > 1000 ? 1000 : ms), 0);
    l->iterations++;
    for (nfds_t i = 0; i < n && r == 0; i++)
        if (pfd[i].revents != 0)
            r = retryd_multi_socket_action(l->m, pfd[i].fd,
                                           events_of(pfd[i].revents), NULL);
    if (r == 0 && l->timer_at >= 0 && now_ns() >= l->timer_at) {
        l->timer_at = -1; /* it fires once */
        r = retryd_multi_socket_action(l->m, RETRYD_SOCKET_TIMEOUT, 0, NULL);
    }
    return r;
}

static void loop_until_idle(loop *l, int64_t bound_ns)
{
    int64_t end = now_ns() + bound_ns;
    while (retryd_multi_in_flight(l->m) > 0) {
        cr_assert_lt(now_ns(), end, "%zu requests still in flight",
                     retryd_multi_in_flight(l->m));
        cr_assert_eq(loop_once(l), 0);
    }
}

static void loop_start(loop *l)
{
    retryd_multi_opts o = {.sz = sizeof(o),
                           .socket = on_socket,
                           .socket_ctx = l,
                           .timer = on_timer,
                           .timer_ctx = l};
    l->timer_at = -1;
    cr_assert_eq(retryd_multi_new(client, &o, &l->m), 0);
}

static retryd_profile *profile(uint32_t max_attempts,
                               const retryd_backoff_policy *backoff)
{
    return exec_profile((retryd_profile_opts){
        .max_attempts = max_attempts, .bulkhead = 1000, .backoff = backoff});
}

typedef struct job {
    char path[96];
    retryd_request q;
    retryd_call *call;
    int calls, err;
    retryd_result *r;
    int64_t done_ns;
    struct job *cancel; /* cancelled from this one's completion */
    retryd_multi *m;
} job;

static void on_done(void *ctx, retryd_call *call, int err, retryd_result *r)
{
    job *j = ctx;
    cr_expect_eq(call, j->call);
    j->calls++;
    j->err = err;
    j->r = r;
    j->done_ns = now_ns();
    if (j->cancel != NULL) {
        cr_expect_eq(retryd_multi_cancel(j->m, j->cancel->call), 0);
        cr_expect_eq(j->cancel->calls, 1, "completed inside the cancel");
    }
}

static void submit(loop *l, retryd_profile *p, job *j, const char *method,
                   const char *path, retryd_idempotency idem)
{
    snprintf(j->path, sizeof(j->path), "%s", path);
    j->q = (retryd_request){.sz = sizeof(j->q),
                            .method = method,
                            .path = j->path,
                            .idempotency = idem,
                            .deadline_ns = 20 * S};
    j->m = l->m;
    cr_assert_eq(retryd_multi_submit(l->m, p, &j->q, on_done, j, &j->call), 0);
}

/* --- the loop ---------------------------------------------------------------
 */

typedef struct kind {
    const char *path, *method;
    retryd_idempotency idem;
    retryd_outcome outcome;
    int status;
    long executions;
} kind;

static const kind kinds[] = {
    {"/ok", "GET", RETRYD_IDEMPOTENCY_SAFE, RETRYD_OUTCOME_RESPONSE, 200, 1},
    {"/status?code=503", "GET", RETRYD_IDEMPOTENCY_SAFE,
     RETRYD_OUTCOME_RESPONSE, 503, 3},
    {"/status?code=429&retry_after=0", "POST",
     RETRYD_IDEMPOTENCY_NON_IDEMPOTENT, RETRYD_OUTCOME_RESPONSE, 429, 3},
    {"/close-after-read", "POST", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
     RETRYD_OUTCOME_AMBIGUOUS, 0, 1},
    {"/seq?codes=503,200", "PUT", RETRYD_IDEMPOTENCY_IDEMPOTENT,
     RETRYD_OUTCOME_RESPONSE, 200, 2},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))
#define PER_KIND 40

Test(multi_loop, a_poll_loop_drives_hundreds_of_requests)
{
    static loop l;
    static job jobs[N_KINDS * PER_KIND];
    loop_start(&l);
    retryd_profile *p = profile(3, NULL);
    for (size_t i = 0; i < N_KINDS * PER_KIND; i++) {
        const kind *k = &kinds[i % N_KINDS];
        char path[96];
        snprintf(path, sizeof(path), "%s%cid=loop-%zu", k->path,
                 strchr(k->path, '?') ? '&' : '?', i);
        submit(&l, p, &jobs[i], k->method, path, k->idem);
    }
    loop_until_idle(&l, 30 * S);
    for (size_t i = 0; i < N_KINDS * PER_KIND; i++) {
        const kind *k = &kinds[i % N_KINDS];
        job *j = &jobs[i];
        char id[32];
        snprintf(id, sizeof(id), "loop-%zu", i);
        cr_assert_eq(j->calls, 1, "%s", id);
        cr_assert_eq(j->err, 0, "%s", id);
        cr_expect_eq(retryd_result_outcome(j->r), k->outcome, "%s", id);
        cr_expect_eq(retryd_result_status(j->r), k->status, "%s", id);
        cr_expect_eq(testsrv_wait_count(srv, id, k->executions, 5000),
                     k->executions, "%s", id);
        retryd_result_free(j->r);
    }
    cr_expect_gt(l.assigns, 0);
    cr_expect_gt(l.socketp_back, 0, "retryd_multi_assign's records came back");
    cr_expect_gt(l.timer_zero, 0);
    retryd_multi_free(l.m);
    /* Its kept connections closed, each through the socket callback. */
    for (int i = 0; i < LOOP_MAX; i++)
        cr_expect(!l.w[i].used, "fd %d still watched", l.w[i].fd);
    cr_expect_eq(l.removes, l.assigns);
    retryd_profile_free(p);
}

Test(multi_loop, a_backoff_is_the_loops_timer_not_a_busy_loop)
{
    static loop l;
    static const retryd_backoff_policy wait300 = {
        sizeof(wait300), RETRYD_JITTER_DECORRELATED, 300 * MS, 300 * MS, 5 * S};
    loop_start(&l);
    retryd_profile *p = profile(2, &wait300);
    job j = {0};
    submit(&l, p, &j, "GET", "/status?code=503&id=bo", RETRYD_IDEMPOTENCY_SAFE);
    l.try_reentry = true;
    l.probe = j.call;
    int64_t t0 = now_ns();
    loop_until_idle(&l, 10 * S);
    cr_expect_geq(j.done_ns - t0, 300 * MS);
    cr_expect_eq(retryd_result_attempt_count(j.r), 2);
    cr_expect_geq(l.timer_longest_ms, 250, "the wait was one timer");
    cr_expect_lt(l.iterations, 40, "%ld turns of the loop for two requests",
                 l.iterations);
    retryd_result_free(j.r);
    retryd_multi_free(l.m);
    retryd_profile_free(p);
}

Test(multi_loop, a_completion_may_cancel_another_call)
{
    static loop l;
    loop_start(&l);
    retryd_profile *p = profile(1, NULL);
    job held = {0}, quick = {0};
    submit(&l, p, &held, "GET", "/hold?ms=10000&id=held",
           RETRYD_IDEMPOTENCY_SAFE);
    quick.cancel = &held;
    submit(&l, p, &quick, "GET", "/ok?id=quick", RETRYD_IDEMPOTENCY_SAFE);
    loop_until_idle(&l, 10 * S);
    cr_expect_eq(quick.calls, 1);
    cr_expect_eq(retryd_result_status(quick.r), 200);
    cr_expect_eq(held.calls, 1);
    cr_expect_eq(held.err, RETRYD_ECANCELED);
    cr_expect_lt(held.done_ns - quick.done_ns, 1 * S);
    retryd_result_free(quick.r);
    retryd_result_free(held.r);
    retryd_multi_free(l.m);
    retryd_profile_free(p);
}

Test(multi_loop, a_timer_that_cannot_be_set_fails_the_requests)
{
    static loop l;
    loop_start(&l);
    retryd_profile *p = profile(1, NULL);
    job j[3] = {0};
    l.fail_timer = true;
    for (int i = 0; i < 3; i++)
        submit(&l, p, &j[i], "GET", "/hold?ms=10000&id=tf",
               RETRYD_IDEMPOTENCY_SAFE);
    cr_expect_eq(
        retryd_multi_socket_action(l.m, RETRYD_SOCKET_TIMEOUT, 0, NULL),
        RETRYD_ECURL);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(j[i].calls, 1);
        cr_expect_eq(j[i].err, RETRYD_ECURL);
        cr_expect_null(j[i].r);
    }
    cr_expect_eq(retryd_multi_in_flight(l.m), 0);
    retryd_multi_free(l.m);
    retryd_profile_free(p);
}

/* SPDX-License-Identifier: MIT */
/*
 * event_loop: an event-loop service on libuv, with many requests in
 * flight on one thread through retryd's asynchronous executor
 * (retryd/multi.h).
 *
 * The executor is driven the way libcurl's multi_socket API is: it asks,
 * through two callbacks, for descriptors to be watched (here a uv_poll_t
 * per descriptor) and for one timer (here a uv_timer_t), and the loop
 * hands readiness and timer expiry back with retryd_multi_socket_action().
 * A backoff wait between attempts is that timer, not a sleeping thread,
 * and no connection is held while it runs.
 *
 * usage: event_loop BASE_URL [HOLDS]
 *
 * It submits HOLDS (default 20) reads the server holds for HOLD_MS before
 * answering, all at once, plus a read that fails once and a payment whose
 * connection is lost, then runs the loop until every request is done. The
 * paths are those of retryd's fault-injecting test server
 * (tests/support/faultsrv.c), so each outcome is known in advance: it
 * exits 1 when one differs. The whole run takes about HOLD_MS, not
 * HOLDS * HOLD_MS: the holds overlap.
 *
 * Threads: a retryd_multi, like a libcurl multi handle, belongs to the
 * thread that drives it; every callback below runs on the loop's thread.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <retryd/multi.h>
#include <retryd/retryd.h>
#include <uv.h>

#define MS INT64_C(1000000)
#define HOLD_MS 1000
#define MAX_HOLDS 60 /* under the profile's bulkhead (64 attempts) */

/* One watched descriptor: attached to the executor's socket with
 * retryd_multi_assign(), so the socket callback finds it again. */
struct watch {
    uv_poll_t poll;
    int fd;
    struct app *app;
    bool closing;
    struct watch *next, *prev; /* the app's list, to close what is left */
};

/* One request, and the outcome it must end in. The request and its path
 * must stay valid until its completion callback: they live here. */
struct job {
    retryd_request req;
    char path[96];
    retryd_outcome expect;
    struct app *app;
};

struct app {
    uv_loop_t *loop;
    uv_timer_t timer;
    retryd_multi *multi;
    struct watch *watches;
    bool closing;   /* tearing down: callbacks change nothing */
    size_t pending; /* submitted, not completed */
    unsigned long outcomes[RETRYD_OUTCOME_COUNT], unexpected, errors, attempts;
};

static int64_t now_ms(uv_loop_t *loop)
{
    uv_update_time(loop);
    return (int64_t)uv_now(loop);
}

/* --- the loop's side: readiness and the timer go to the executor -------- */

static void on_poll(uv_poll_t *poll, int status, int events)
{
    struct watch *w = poll->data;
    int what = status < 0
                   ? RETRYD_CSELECT_ERR
                   : ((events & UV_READABLE) ? RETRYD_CSELECT_IN : 0) |
                         ((events & UV_WRITABLE) ? RETRYD_CSELECT_OUT : 0);
    /* Completion callbacks (on_done) run from inside this call. */
    retryd_multi_socket_action(w->app->multi, w->fd, what, NULL);
}

static void on_timeout(uv_timer_t *timer)
{
    struct app *app = timer->data;
    retryd_multi_socket_action(app->multi, RETRYD_SOCKET_TIMEOUT, 0, NULL);
}

/* --- the executor's side: what to watch, when to wake ------------------- */

static void free_watch(uv_handle_t *handle)
{
    free(handle->data);
}

/* Stop watching: the handle is freed once libuv has closed it. */
static void close_watch(struct watch *w)
{
    if (w->closing)
        return;
    w->closing = true;
    if (w->prev)
        w->prev->next = w->next;
    else
        w->app->watches = w->next;
    if (w->next)
        w->next->prev = w->prev;
    uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, free_watch);
}

static struct watch *new_watch(struct app *app, int fd)
{
    struct watch *w = calloc(1, sizeof(*w));
    if (w == NULL || uv_poll_init_socket(app->loop, &w->poll, fd) != 0) {
        free(w);
        return NULL;
    }
    /* Fields one by one: libuv's handle must not be copied. */
    w->fd = fd;
    w->app = app;
    w->poll.data = w;
    w->next = app->watches;
    if (w->next)
        w->next->prev = w;
    app->watches = w;
    retryd_multi_assign(app->multi, fd, w);
    return w;
}

/* retryd_socket_fn: watch @p fd for what the executor asks. */
static int on_socket(void *ctx, int fd, int what, void *socketp)
{
    struct app *app = ctx;
    struct watch *w = socketp;
    if (app->closing)
        return 0;
    if (what == RETRYD_POLL_REMOVE) {
        if (w != NULL)
            close_watch(w);
        return 0;
    }
    if (w == NULL && (w = new_watch(app, fd)) == NULL)
        return -1; /* the transfers on fd fail; nothing else does */
    int events = ((what & RETRYD_POLL_IN) ? UV_READABLE : 0) |
                 ((what & RETRYD_POLL_OUT) ? UV_WRITABLE : 0);
    return uv_poll_start(&w->poll, events, on_poll) == 0 ? 0 : -1;
}

/* retryd_timer_fn: one timer; 0 means "soon, from the loop", which a
 * zero-timeout uv_timer gives (it fires on the next turn). */
static int on_timer(void *ctx, long timeout_ms)
{
    struct app *app = ctx;
    if (app->closing)
        return 0;
    if (timeout_ms < 0)
        return uv_timer_stop(&app->timer) == 0 ? 0 : -1;
    return uv_timer_start(&app->timer, on_timeout, (uint64_t)timeout_ms, 0) == 0
               ? 0
               : -1;
}

/* retryd_done_fn: a request is finished; a result is ours to free. */
static void on_done(void *ctx, retryd_call *call, int err,
                    retryd_result *result)
{
    struct job *job = ctx;
    struct app *app = job->app;
    (void)call;
    app->pending--;
    if (err < 0) {
        /* Cancelled (the result, if any, has the attempts made so far: an
         * ambiguous one must still be reconciled), or the multi failed. */
        printf("%s: %s\n", job->path, retryd_strerror(err));
        app->errors++;
    } else {
        retryd_outcome o = retryd_result_outcome(result);
        size_t n = retryd_result_attempt_count(result);
        app->outcomes[o]++;
        app->attempts += n;
        app->unexpected += o != job->expect;
        char status[8] = ""; /* a failure or an ambiguity may have none */
        if (retryd_result_status(result) != 0)
            snprintf(status, sizeof(status), " %d",
                     retryd_result_status(result));
        printf("%s -> %s%s (%zu attempt%s)%s\n", job->path,
               retryd_outcome_name(o), status, n, n == 1 ? "" : "s",
               o == job->expect ? "" : " UNEXPECTED");
    }
    retryd_result_free(result); /* accepts NULL */
    if (app->pending == 0)
        uv_stop(app->loop); /* the service would go on; the example ends */
}

/* --- the requests -------------------------------------------------------- */

static int submit(struct app *app, retryd_profile *profile, struct job *job,
                  const char *method, retryd_idempotency idem,
                  retryd_outcome expect)
{
    job->app = app;
    job->expect = expect;
    job->req = (retryd_request){
        .sz = sizeof(job->req),
        .method = method,
        .path = job->path,
        .idempotency = idem,
        .deadline_ns = 10000 * MS,
    };
    int r =
        retryd_multi_submit(app->multi, profile, &job->req, on_done, job, NULL);
    if (r < 0)
        fprintf(stderr, "event_loop: %s: %s\n", job->path, retryd_strerror(r));
    else
        app->pending++;
    return r;
}

/* HOLDS held reads (one id: the server's TIMES shows when each arrived),
 * a read that fails once, then succeeds after a backoff timer, and a
 * payment whose connection closes after the server read it. */
static int submit_all(struct app *app, retryd_profile *profile,
                      struct job *jobs, unsigned holds)
{
    int r = 0;
    for (unsigned i = 0; i < holds && r == 0; i++) {
        snprintf(jobs[i].path, sizeof(jobs[i].path), "/hold?ms=%d&id=ev-hold",
                 HOLD_MS);
        r = submit(app, profile, &jobs[i], "GET", RETRYD_IDEMPOTENCY_SAFE,
                   RETRYD_OUTCOME_RESPONSE);
    }
    struct job *retry = &jobs[holds], *pay = &jobs[holds + 1];
    snprintf(retry->path, sizeof(retry->path), "/seq?codes=503,200&id=ev-seq");
    snprintf(pay->path, sizeof(pay->path), "/close-after-read?id=ev-pay");
    if (r == 0)
        r = submit(app, profile, retry, "GET", RETRYD_IDEMPOTENCY_SAFE,
                   RETRYD_OUTCOME_RESPONSE);
    if (r == 0)
        r = submit(app, profile, pay, "POST", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
                   RETRYD_OUTCOME_AMBIGUOUS);
    return r;
}

/* --- setup and teardown -------------------------------------------------- */

static int setup(struct app *app, const char *base_url, retryd_client **client,
                 retryd_profile **profile)
{
    const retryd_host_opts host = {.sz = sizeof(host),
                                   .client_name = "example event_loop"};
    const retryd_client_opts copts = {.sz = sizeof(copts), .host = &host};
    const retryd_backoff_policy backoff = {.sz = sizeof(backoff),
                                           .base_ns = 10 * MS,
                                           .max_ns = 100 * MS,
                                           .max_retry_after_ns = 1000 * MS};
    const retryd_profile_opts popts = {
        .sz = sizeof(popts),
        .base_url = base_url,
        .max_attempts = 3,
        .attempt_timeout_ns = (HOLD_MS + 4000) * MS,
        .backoff = &backoff,
    };
    const retryd_multi_opts mopts = {
        .sz = sizeof(mopts),
        .socket = on_socket,
        .socket_ctx = app,
        .timer = on_timer,
        .timer_ctx = app,
    };
    int r = retryd_client_new(&copts, client);
    if (r == 0)
        r = retryd_profile_new(*client, &popts, profile);
    if (r == 0)
        r = retryd_multi_new(*client, &mopts, &app->multi);
    if (r < 0)
        fprintf(stderr, "event_loop: %s\n", retryd_strerror(r));
    return r;
}

/* Close what the loop still watches, free the executor (which may call
 * the socket and timer callbacks: they see app->closing), and let libuv
 * run the close callbacks. */
static void teardown(struct app *app)
{
    app->closing = true;
    while (app->watches != NULL)
        close_watch(app->watches);
    retryd_multi_free(app->multi);
    uv_close((uv_handle_t *)&app->timer, NULL);
    uv_run(app->loop, UV_RUN_DEFAULT);
    uv_loop_close(app->loop);
}

static int report(const struct app *app, int64_t elapsed_ms)
{
    unsigned long requests = app->errors;
    for (int k = 0; k < RETRYD_OUTCOME_COUNT; k++)
        requests += app->outcomes[k];
    printf("requests %lu: response %lu, failure %lu, ambiguous %lu; "
           "unexpected %lu, errors %lu; throttled %lu\n",
           requests, app->outcomes[RETRYD_OUTCOME_RESPONSE],
           app->outcomes[RETRYD_OUTCOME_FAILURE],
           app->outcomes[RETRYD_OUTCOME_AMBIGUOUS], app->unexpected,
           app->errors, app->outcomes[RETRYD_OUTCOME_THROTTLED]);
    printf("attempts %lu; all done in %lld ms on one thread\n", app->attempts,
           (long long)elapsed_ms);
    return app->unexpected == 0 && app->errors == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    unsigned long holds = argc > 2 ? strtoul(argv[2], NULL, 10) : 20;
    if (argc < 2 || argc > 3 || holds < 1 || holds > MAX_HOLDS) {
        fprintf(stderr, "usage: event_loop BASE_URL [HOLDS (1..%d)]\n",
                MAX_HOLDS);
        return 64;
    }
    static struct job jobs[MAX_HOLDS + 2];
    struct app app = {.loop = uv_default_loop()};
    retryd_client *client = NULL;
    retryd_profile *profile = NULL;
    uv_timer_init(app.loop, &app.timer);
    app.timer.data = &app;
    int rc = 70;
    if (setup(&app, argv[1], &client, &profile) == 0) {
        int64_t start = now_ms(app.loop);
        if (submit_all(&app, profile, jobs, (unsigned)holds) == 0) {
            printf("in flight: %zu\n", retryd_multi_in_flight(app.multi));
            uv_run(app.loop, UV_RUN_DEFAULT); /* until on_done stops it */
            rc = report(&app, now_ms(app.loop) - start);
        }
    }
    teardown(&app);
    retryd_profile_free(profile);
    retryd_client_free(client);
    return rc;
}

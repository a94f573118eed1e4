/* SPDX-License-Identifier: MIT */
/*
 * The daemon under concurrent load, as a plain program so the thread
 * sanitizer build runs it too (the daemon's stats thread reads the RCU
 * registry and the segment while the main thread registers, reloads and
 * frees process slots). Four client processes x two threads register
 * upstreams and spend; meanwhile the test reads stats, reloads and toggles
 * draining. Afterwards every deposit is accounted for, and the daemon exits
 * cleanly (a sanitizer report would make its exit code non-zero).
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"
#include "retryd/retryd.h"
#include "run.h"

#define CLIENTS 4
#define THREADS 2
#define NAMES 8
#define ROUNDS 30

static rd_daemon D;
static int stop_fd; /* readable (EOF) when the clients should stop */

typedef struct job {
    retryd_upstream *shared, *own[NAMES];
    long deposits;
} job;

static bool told_to_stop(void)
{
    struct pollfd p = {.fd = stop_fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static void *spend(void *arg)
{
    job *j = arg;
    for (long i = 0; !(i % 1000 == 0 && told_to_stop()); i++) {
        CHECK(retryd_upstream_deposit(j->shared) == 0, "deposit");
        j->deposits++;
        (void)retryd_upstream_withdraw(j->own[i % NAMES]);
        if (i % 1000 == 0)
            (void)retryd_upstream_peek(j->shared);
    }
    return NULL;
}

/* Spends until told to stop; writes its deposit count to @p out. */
static int client(int id, int out)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    retryd_host *h;
    job j[THREADS];
    pthread_t t[THREADS];
    retryd_upstream *shared, *own[NAMES];

    CHECK(retryd_host_open(&o, &h) == 0 && retryd_host_attached(h), "attach");
    CHECK(retryd_upstream_open(h, "payments", NULL, &shared) == 0, "open");
    for (int k = 0; k < NAMES; k++) {
        char name[32];
        snprintf(name, sizeof(name), "svc-%d-%d", id, k);
        CHECK(retryd_upstream_open(h, name, NULL, &own[k]) == 0, "open");
    }
    long total = 0;
    for (int i = 0; i < THREADS; i++) {
        j[i].shared = shared;
        memcpy(j[i].own, own, sizeof(own));
        j[i].deposits = 0;
        CHECK(pthread_create(&t[i], NULL, spend, &j[i]) == 0, "thread");
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        total += j[i].deposits;
    }
    CHECK(retryd_upstream_shared(shared), "still shared at the end");
    retryd_host_close(h);
    CHECK(write(out, &total, sizeof(total)) == (ssize_t)sizeof(total),
          "report");
    return 0;
}

/* retrydctl against the test daemon; it must succeed. */
#define CTL(r, ...)                                                            \
    CHECK(rd_ctl(&D, r, __VA_ARGS__, NULL) == 0, "retrydctl: %s", (r)->err)

/* A failed CHECK exits: take the daemon and its directory along (only
 * in the process that started it, not in a forked client). */
static pid_t main_pid;
static void cleanup(void)
{
    if (getpid() == main_pid)
        rd_daemon_cleanup(&D);
}

static bool none_attached(void *arg)
{
    run_result *r = arg;
    CTL(r, "stats", "--json");
    return strstr(r->out, "\"attached_processes\":0,") != NULL;
}

int main(void)
{
    static run_result r;
    pid_t pids[CLIENTS];
    int stop[2], counts[2];

    CHECK(rd_daemon_init(&D,
                         "[upstream payments]\nratio = 0.1\ncap = 1000\n") == 0,
          "init");
    CHECK(rd_daemon_start(&D) == 0, "start (log: %s)", D.log);
    main_pid = getpid();
    atexit(cleanup);
    CHECK(pipe(stop) == 0 && pipe(counts) == 0, "pipes");
    stop_fd = stop[0];
    for (int c = 0; c < CLIENTS; c++) {
        pids[c] = fork();
        CHECK(pids[c] >= 0, "fork");
        if (pids[c] == 0) {
            close(stop[1]);
            _exit(client(c, counts[1]));
        }
    }
    close(stop[0]);
    close(counts[1]);
    /* Readers and writers in the daemon while the clients spend. */
    for (int round = 0; round < ROUNDS; round++) {
        CTL(&r, "stats", "--json");
        CTL(&r, "stats", "--prometheus");
        if (round % 3 == 0)
            kill(D.pid, SIGHUP);
        CTL(&r, "drain", round % 2 ? "off" : "on");
    }
    close(stop[1]); /* EOF: stop spending */
    long deposits = 0;
    for (int c = 0; c < CLIENTS; c++) {
        int status;
        long n;
        CHECK(read(counts[0], &n, sizeof(n)) == (ssize_t)sizeof(n), "count");
        deposits += n;
        CHECK(waitpid(pids[c], &status, 0) == pids[c], "wait");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "client %d failed",
              c);
    }
    CTL(&r, "drain", "off");
    /* The daemon folds each detached client's counters when it sees the
     * hang-up: wait for all of them. */
    CHECK(rd_wait_until(none_attached, &r, 10000), "clients still attached");
    double counted = rd_json_number(r.out, "\"name\":\"payments\"", "deposits");
    CHECK(counted == (double)deposits, "%ld deposits made, stats say %.0f: %s",
          deposits, counted, r.out);
    int code = rd_daemon_stop_or_show_log(&D, SIGTERM);
    CHECK(code == 0, "the daemon exited %d", code);
    printf("daemon_stress: %d rounds of stats/reload/drain under load; "
           "all %ld deposits accounted for\n",
           ROUNDS, deposits);
    return 0;
}

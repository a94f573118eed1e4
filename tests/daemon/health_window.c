/* SPDX-License-Identifier: MIT */
/*
 * The host throttle's window across real processes and a real daemon, as
 * the public API feeds and reads it (retryd_upstream_observe, _admit,
 * _health; docs/health.md):
 *
 *   exactness  8 processes observe 10^6 attempts in all, a known mix of
 *              accepts, rejections and NOT_SENT, each logging what it
 *              observed to a file; R and A as the hot path reads them are
 *              those the logs give offline, and the probability agrees
 *              with the one recomputed from them within 0.01. Then 10^4
 *              NOT_SENT failures move R, A and the probability by exactly 0.
 *              The window is an hour: nothing ages out meanwhile.
 *   quorum     throttle_min_processes = 2: one process seeing only
 *              rejections does not engage the throttle (probability 0,
 *              every first attempt admitted); a second one's rejections
 *              engage it.
 *   kill -9    8 processes observe in a loop and log each completed
 *              observation in shared memory; 4 are SIGKILLed at random
 *              moments. R and A are what all of them logged, plus at most
 *              one event per killed process; the rejecting processes never
 *              outnumber the processes; one window later everything has
 *              aged out to 0.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "health_fixture.h"

#define PROCS 8
#define EVENTS 1000000
#define NOT_SENT_EVENTS 10000
#define BOUND_MS 30000

/* The mix each exactness process draws from: what it observed. */
typedef struct kind {
    retryd_evidence evidence;
    int status;
    int weight; /* out of 100 */
    /* As docs/health.md counts it, written down here independently of
     * retryd_health_classify(): 0 not counted, 1 accept, 2 rejection. */
    int counts;
} kind;

static const kind kinds[] = {
    {RETRYD_EVIDENCE_RESPONSE_RECEIVED, 200, 25, 1},
    {RETRYD_EVIDENCE_RESPONSE_RECEIVED, 500, 5, 1},
    {RETRYD_EVIDENCE_RESPONSE_RECEIVED, 404, 3, 1},
    {RETRYD_EVIDENCE_RESPONSE_RECEIVED, 503, 25, 2},
    {RETRYD_EVIDENCE_RESPONSE_RECEIVED, 429, 10, 2},
    {RETRYD_EVIDENCE_RESPONSE_RECEIVED, 502, 5, 2},
    {RETRYD_EVIDENCE_RESPONSE_RECEIVED, 504, 5, 2},
    {RETRYD_EVIDENCE_PARTIAL_RESPONSE, 503, 2, 2},
    {RETRYD_EVIDENCE_SENT_NO_RESPONSE, 0, 10, 2},
    {RETRYD_EVIDENCE_NOT_SENT, 0, 10, 0},
};
#define KINDS (int)(sizeof(kinds) / sizeof(kinds[0]))

typedef struct shared {
    _Atomic long ready, go, stop;
    /* kill -9: completed observations, per process. */
    _Atomic long requests[PROCS], accepts[PROCS];
} shared;

static shared *sh;

static void log_path(int i, char *buf, size_t len)
{
    snprintf(buf, len, "%s/events-%d", hf_daemon.dir, i);
}

static int pick(unsigned *seed)
{
    int r = rand_r(seed) % 100;
    for (int k = 0; k < KINDS; k++) {
        if (r < kinds[k].weight)
            return k;
        r -= kinds[k].weight;
    }
    return KINDS - 1;
}

/* One exactness process: EVENTS / PROCS observations, one byte each in
 * its log. */
static int observer(int i)
{
    retryd_host *h;
    retryd_upstream *up = hf_open("exact", &h);
    char path[256];
    log_path(i, path, sizeof(path));
    FILE *log = fopen(path, "w");
    CHECK(log != NULL, "open %s", path);
    unsigned seed = (unsigned)i * 7919u + 1;
    for (long n = 0; n < EVENTS / PROCS; n++) {
        int k = pick(&seed);
        retryd_upstream_observe(up, kinds[k].evidence, kinds[k].status, -1);
        CHECK(fputc(k, log) != EOF, "log");
    }
    CHECK(fclose(log) == 0, "close the log");
    retryd_host_close(h);
    return 0;
}

static double offline_probability(uint64_t r, uint64_t a, double k)
{
    double num = (double)r - k * (double)a;
    return num <= 0 ? 0 : num / ((double)r + 1);
}

static void exactness(void)
{
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++)
        pids[i] = check_fork(observer, i);
    hf_reap(pids, PROCS, BOUND_MS);

    uint64_t r = 0, a = 0, not_counted = 0;
    for (int i = 0; i < PROCS; i++) {
        char path[256];
        log_path(i, path, sizeof(path));
        FILE *log = fopen(path, "r");
        CHECK(log != NULL, "open %s", path);
        long n = 0;
        for (int c; (c = fgetc(log)) != EOF; n++) {
            CHECK(c < KINDS, "a byte no observer wrote");
            r += kinds[c].counts != 0;
            a += kinds[c].counts == 1;
            not_counted += kinds[c].counts == 0;
        }
        fclose(log);
        CHECK(n == EVENTS / PROCS, "process %d logged %ld events", i, n);
    }
    CHECK(r + not_counted == EVENTS, "every event logged");

    retryd_host *h;
    retryd_upstream *up = hf_open("exact", &h);
    retryd_health v = hf_health(up);
    double p = offline_probability(r, a, 2.0);
    printf("exactness: %d events, R %llu A %llu (offline %llu %llu), p %.6f "
           "(offline %.6f)\n",
           EVENTS, (unsigned long long)v.requests,
           (unsigned long long)v.accepts, (unsigned long long)r,
           (unsigned long long)a, v.probability, p);
    CHECK(v.throttle && v.engaged, "engaged");
    CHECK(v.requests == r && v.accepts == a,
          "R %llu A %llu, the logs say %llu %llu",
          (unsigned long long)v.requests, (unsigned long long)v.accepts,
          (unsigned long long)r, (unsigned long long)a);
    CHECK(fabs(v.probability - p) <= 0.01, "p %f, offline %f", v.probability,
          p);
    CHECK(p > 0.1 && p < 0.9, "a mix that tests something: p %f", p);

    for (int n = 0; n < NOT_SENT_EVENTS; n++)
        retryd_upstream_observe(up, RETRYD_EVIDENCE_NOT_SENT, n % 2 ? 0 : 503,
                                -1);
    retryd_health after = hf_health(up);
    CHECK(after.requests == v.requests && after.accepts == v.accepts &&
              after.probability == v.probability &&
              after.rejecting_processes == v.rejecting_processes,
          "NOT_SENT moved the window: R %llu -> %llu, A %llu -> %llu, p %f "
          "-> %f",
          (unsigned long long)v.requests, (unsigned long long)after.requests,
          (unsigned long long)v.accepts, (unsigned long long)after.accepts,
          v.probability, after.probability);
    retryd_host_close(h);
}

#define QUORUM_EVENTS 200

/* The rejections of the second process, once the first one has seen what
 * it sees alone. */
static int second_rejecter(int i)
{
    (void)i;
    retryd_host *h;
    retryd_upstream *up = hf_open("quorum", &h);
    CHECK(hf_wait_for(&sh->go, 1, BOUND_MS), "the first one alone");
    for (int n = 0; n < QUORUM_EVENTS; n++)
        retryd_upstream_observe(up, RETRYD_EVIDENCE_RESPONSE_RECEIVED, 503, -1);
    retryd_host_close(h);
    atomic_store(&sh->ready, 1);
    return 0;
}

static int admitted(retryd_upstream *up)
{
    int sent = 0;
    for (int n = 0; n < QUORUM_EVENTS; n++)
        sent += retryd_upstream_admit(up, true, INT64_MAX / 2, 0, NULL) ==
                RETRYD_ADMIT_SEND;
    return sent;
}

/* The first process, alone, then with a second one. */
static int first_rejecter(int i)
{
    (void)i;
    retryd_host *h;
    retryd_upstream *up = hf_open("quorum", &h);
    for (int n = 0; n < QUORUM_EVENTS; n++)
        retryd_upstream_observe(up, RETRYD_EVIDENCE_RESPONSE_RECEIVED, 503, -1);
    retryd_health v = hf_health(up);
    CHECK(v.throttle && !v.engaged && v.probability == 0 &&
              v.rejecting_processes == 1 && v.requests == QUORUM_EVENTS,
          "alone: engaged %d p %f rejecting %llu R %llu", v.engaged,
          v.probability, (unsigned long long)v.rejecting_processes,
          (unsigned long long)v.requests);
    int sent = admitted(up);
    CHECK(sent == QUORUM_EVENTS, "alone: %d of %d first attempts sent", sent,
          QUORUM_EVENTS);

    atomic_store(&sh->go, 1);
    CHECK(hf_wait_for(&sh->ready, 1, BOUND_MS), "the second one's rejections");
    /* An admission reads the window once per tick of the coarse clock
     * (docs/health.md): the other process's rejections are its to see
     * from the next tick on, so wait for one to pass. */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t0);
    for (int ms = 0; ms < BOUND_MS; ms++) {
        clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
        if (t.tv_sec != t0.tv_sec || t.tv_nsec != t0.tv_nsec)
            break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    CHECK(t.tv_sec != t0.tv_sec || t.tv_nsec != t0.tv_nsec,
          "the coarse clock did not tick");
    v = hf_health(up);
    CHECK(v.engaged && v.rejecting_processes == 2 && v.probability > 0.9,
          "two: engaged %d p %f rejecting %llu", v.engaged, v.probability,
          (unsigned long long)v.rejecting_processes);
    sent = admitted(up);
    /* One probe per slot goes out whatever the throttle says; with p near
     * 1 hardly anything else. */
    CHECK(sent < QUORUM_EVENTS / 10, "two: %d of %d first attempts sent", sent,
          QUORUM_EVENTS);
    printf("quorum: alone p 0, %d/%d sent; with a second rejecter p %.4f, "
           "%d/%d sent\n",
           QUORUM_EVENTS, QUORUM_EVENTS, v.probability, sent, QUORUM_EVENTS);
    retryd_host_close(h);
    return 0;
}

static void quorum(void)
{
    pid_t pids[2] = {check_fork(first_rejecter, 0),
                     check_fork(second_rejecter, 1)};
    hf_reap(pids, 2, BOUND_MS);
    atomic_store(&sh->go, 0);
    atomic_store(&sh->ready, 0);
}

#define VICTIMS 4
#define KILL_WINDOW_NS INT64_C(2000000000)

/* A hammer's pace at most: a slot (250 ms) then holds at most a million
 * events of all 8, well below what it can count (HEALTH_COUNT_LIMIT), so
 * that a full slot dropping events cannot pass for a lost one. */
#define HAMMER_NS_PER_EVENT 2000

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int hammer(int i)
{
    retryd_host *h;
    retryd_upstream *up = hf_open("kill", &h);
    unsigned seed = (unsigned)i + 17;
    atomic_fetch_add(&sh->ready, 1);
    CHECK(hf_wait_for(&sh->go, 1, BOUND_MS), "go");
    int64_t start = now_ns();
    for (int64_t n = 0; !atomic_load(&sh->stop); n++) {
        while (n % 256 == 0 && now_ns() - start < n * HAMMER_NS_PER_EVENT)
            ;
        bool ok = rand_r(&seed) % 3 == 0;
        retryd_upstream_observe(up, RETRYD_EVIDENCE_RESPONSE_RECEIVED,
                                ok ? 200 : 503, -1);
        /* Logged once it returned: a kill in between costs the log one
         * event the window has. */
        if (ok)
            atomic_fetch_add_explicit(&sh->accepts[i], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&sh->requests[i], 1, memory_order_relaxed);
    }
    retryd_host_close(h);
    return 0;
}

static bool aged_out(void *arg)
{
    retryd_health v = hf_health(arg);
    return v.requests == 0 && v.accepts == 0 && v.rejecting_processes == 0;
}

static void kill_mid_update(void)
{
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++)
        pids[i] = check_fork(hammer, i);
    /* Attached after the forks: a child starts with a library of its own. */
    retryd_host *h;
    retryd_upstream *up = hf_open("kill", &h);
    CHECK(hf_wait_for(&sh->ready, PROCS, BOUND_MS), "ready");
    atomic_store(&sh->go, 1);
    unsigned seed = (unsigned)time(NULL);
    uint64_t most_rejecting = 0;
    /* The victims die at random moments while everyone is recording;
     * the window (2 s) keeps all of it: this takes well under a slot of
     * it times seven. */
    long samples = 0;
    for (int i = 0; i < VICTIMS; i++) {
        /* Reading the rejecters all the while, until the kill. */
        int64_t until = now_ns() + (rand_r(&seed) % 20 + 1) * 1000000;
        while (now_ns() < until) {
            retryd_health v = hf_health(up);
            most_rejecting = v.rejecting_processes > most_rejecting
                                 ? v.rejecting_processes
                                 : most_rejecting;
            samples++;
        }
        CHECK(kill(pids[i], SIGKILL) == 0, "kill");
    }
    for (int i = 0; i < VICTIMS; i++)
        CHECK(rd_reap(pids[i], BOUND_MS) == -SIGKILL, "victim %d", i);
    atomic_store(&sh->stop, 1);
    hf_reap(pids + VICTIMS, PROCS - VICTIMS, BOUND_MS);

    uint64_t r = 0, a = 0;
    for (int i = 0; i < PROCS; i++) {
        r += (uint64_t)atomic_load(&sh->requests[i]);
        a += (uint64_t)atomic_load(&sh->accepts[i]);
    }
    retryd_health v = hf_health(up);
    printf("kill -9: %d of %d killed; logged R %llu A %llu, window R %llu A "
           "%llu, rejecting processes at most %llu in %ld reads\n",
           VICTIMS, PROCS, (unsigned long long)r, (unsigned long long)a,
           (unsigned long long)v.requests, (unsigned long long)v.accepts,
           (unsigned long long)most_rejecting, samples);
    CHECK(r > 1000 * PROCS, "the processes did record: %llu",
          (unsigned long long)r);
    CHECK(v.requests >= r && v.requests <= r + VICTIMS,
          "R %llu, logged %llu, %d killed", (unsigned long long)v.requests,
          (unsigned long long)r, VICTIMS);
    CHECK(v.accepts >= a && v.accepts <= a + VICTIMS,
          "A %llu, logged %llu, %d killed", (unsigned long long)v.accepts,
          (unsigned long long)a, VICTIMS);
    CHECK(most_rejecting <= PROCS && v.rejecting_processes <= PROCS &&
              v.rejecting_processes >= 1,
          "rejecting processes %llu (at most %llu seen) of %d",
          (unsigned long long)v.rejecting_processes,
          (unsigned long long)most_rejecting, PROCS);
    /* One window and a slot (the one being filled) later: all gone. */
    CHECK(rd_wait_until(aged_out, up,
                        (int)(KILL_WINDOW_NS / 1000000 * 9 / 8) + 1000),
          "still in the window: R %llu",
          (unsigned long long)hf_health(up).requests);
    retryd_host_close(h);
}

int main(void)
{
    hf_daemon_start("[upstream exact]\nadaptive_throttle = on\n"
                    "throttle_window = 3600s\n"
                    "[upstream quorum]\nadaptive_throttle = on\n"
                    "throttle_window = 3600s\nthrottle_min_processes = 2\n"
                    "[upstream kill]\nadaptive_throttle = on\n"
                    "throttle_window = 2s\n");
    sh = check_shared(sizeof(*sh));
    exactness();
    quorum();
    kill_mid_update();
    CHECK(rd_daemon_stop_or_show_log(&hf_daemon, SIGTERM) == 0,
          "the daemon exits cleanly");
    return 0;
}

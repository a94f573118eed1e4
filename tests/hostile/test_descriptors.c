/* SPDX-License-Identifier: MIT */
/*
 * The daemon short of file descriptors (docs/reliability.md, issue 23's
 * first attack). Under a low RLIMIT_NOFILE, set in the daemon's fork
 * before exec, more processes than the limit has room for attach: the
 * daemon raises its soft limit to the hard one, says at start how many
 * processes that leaves room for, refuses the excess with a reason
 * (no-process-slot, never a misleading no-daemon) and still answers
 * stats. With the table run out under it (prlimit on the running daemon),
 * a flood of connections to both sockets neither makes it spin (its CPU
 * time, from /proc/PID/stat, stays low) nor keeps an attached process
 * from registering, and every newcomer is told why.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "hostile.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"
#include "run.h"
#include "shared/frame.h"

#define POT_CONFIG                                                             \
    "[upstream pot]\nratio = 1\nmin_retries_per_sec = 0\ncap = 100000\n"
/* A small unattached pool, so that the reserve (what the daemon sets apart
 * for connections without a process slot, stats readers, refused peers)
 * leaves a few dozen processes' room in a 256-descriptor limit. */
static const char *const base_config =
    "process_capacity = 64\nprocess_slots_per_uid = 64\n"
    "connections_unattached = 8\n"
    /* One log window for the whole test: the lines counted below are
     * bounded by the rate limit of one window, whatever the test lasts. */
    "log_limit_interval_s = 3600\n" POT_CONFIG;

#include "daemon_fixture.h"

/* At info, as an operator runs it: the out-of-descriptors lines are
 * counted. */
static void restart_info(unsigned long soft, unsigned long hard)
{
    rd_daemon_stop(&D, SIGTERM);
    cr_assert_eq(rd_write_config_at(D.config, D.runtime, "info", base_config),
                 0);
    D.nofile_soft = soft;
    D.nofile_hard = hard;
    cr_assert_eq(rd_daemon_start(&D), 0, "daemon did not start; see %s", D.log);
}

TestSuite(descriptors, .init = daemon_setup, .fini = daemon_teardown,
          .timeout = 120);

/* The daemon's CPU time so far (every thread's, user and system), in
 * seconds, from /proc/PID/stat; NAN when unreadable. */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return NAN;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold anything */
    unsigned long long utime, stime;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &utime, &stime) != 2)
        return NAN;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* The CPU the daemon uses over a second of wall time, as a fraction of
 * one core. Not a timing figure but a bound with a wide margin: a loop
 * that spins uses about 1 (or 2, both threads), an idle one about 0. */
#define CPU_WINDOW_MS 1000
#define CPU_SPINNING 0.3

static bool window_over(void *arg)
{
    return rd_now_ns() >= *(uint64_t *)arg;
}

static double cpu_share_over_a_window(void)
{
    double before = cpu_seconds(D.pid);
    uint64_t end = rd_now_ns() + CPU_WINDOW_MS * 1000000ull;
    /* The window itself is what is measured: waiting out its end is the
     * measurement, bounded by it. */
    rd_wait_until(window_over, &end, CPU_WINDOW_MS + 1000);
    double after = cpu_seconds(D.pid);
    cr_assert(!isnan(before) && !isnan(after), "cannot read the daemon's stat");
    double share = (after - before) / (CPU_WINDOW_MS / 1000.0);
    /* A figure beside the bound, as the socket attacks print theirs. */
    fprintf(stderr, "descriptors: the daemon used %.3f of a core over %d ms\n",
            share, CPU_WINDOW_MS);
    return share;
}

/* The "room for N attached processes" the daemon said at start. */
static long room_said(void)
{
    const char *log = daemon_log();
    const char *at = strstr(log, "file descriptors: limit 256 (inherited 128)");
    cr_assert(at != NULL, "no start line about the descriptor limit: %s", log);
    long room = -1;
    const char *r = strstr(at, "room for ");
    cr_assert(r != NULL && sscanf(r, "room for %ld", &room) == 1, "%s", at);
    return room;
}

static void expect_status(child *c, const char *want)
{
    char reply[256];
    cr_assert_eq(child_ask(c, "status", reply, sizeof(reply), ASK_MS), 0);
    cr_assert_str_eq(reply, want);
}

/* Whether client @p arg shares after spending (a spend is what makes a
 * process that does not share try again, at most once a second). */
static bool says_shared(void *arg)
{
    char reply[64];
    return child_ask(arg, "deposit 1", reply, sizeof(reply), ASK_MS) == 0 &&
           child_ask(arg, "shared", reply, sizeof(reply), ASK_MS) == 0 &&
           strcmp(reply, "shared 1") == 0;
}

#define SHARE_WAIT_MS 5000

#define EXTRA 8

Test(descriptors, a_low_limit_refuses_the_excess_with_a_reason)
{
    restart_info(128, 256);
    long room = room_said();
    /* Room for some, not for all 64 slots: else there is no excess. */
    cr_assert(room > 0 && room < 64 - EXTRA, "room for %ld", room);
    int n = (int)room + EXTRA;
    child *c = calloc((size_t)n, sizeof(*c));
    cr_assert(c != NULL);
    int shared = 0, refused = 0;
    for (int i = 0; i < n; i++) {
        char reply[256];
        start_client(&c[i]);
        cr_assert_eq(child_ask(&c[i], "open pot", reply, sizeof(reply), ASK_MS),
                     0);
        if (strcmp(reply, "ok shared=1") == 0) {
            shared++;
            continue;
        }
        cr_assert_str_eq(reply, "ok shared=0", "client %d", i);
        /* Told why: the daemon has no room for it, not "no daemon". */
        expect_status(&c[i], "status no-process-slot");
        refused++;
    }
    cr_expect_eq(shared, room, "shared %d of room %ld", shared, room);
    cr_expect_eq(refused, EXTRA);
    /* The reserve kept descriptors for the stats socket. */
    stats_json();
    cr_expect_geq(number_in_res("\"slots_refused\"", "capacity"), EXTRA);
    /* The refused ones ask again, once a second each: no spinning. */
    double cpu = cpu_share_over_a_window();
    cr_expect_lt(cpu, CPU_SPINNING, "the daemon used %.2f of a core", cpu);
    cr_expect(strstr(daemon_log(), "file descriptors are taken") != NULL);
    /* One attached process leaves: its room goes to the next that asks. */
    child_stop(&c[0]);
    child last;
    start_client(&last);
    char reply[64];
    cr_assert_eq(child_ask(&last, "open pot", reply, sizeof(reply), ASK_MS), 0);
    cr_expect(rd_wait_until(says_shared, &last, SHARE_WAIT_MS),
              "a slot freed went to nobody");
    child_stop(&last);
    for (int i = 1; i < n; i++)
        child_stop(&c[i]);
    free(c);
}

/* --- the table run out under the daemon ---------------------------------- */

/* The highest descriptor number the daemon holds. */
static int highest_fd(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *dir = opendir(path);
    cr_assert(dir != NULL);
    int top = -1;
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        if (e->d_name[0] != '.' && atoi(e->d_name) > top)
            top = atoi(e->d_name);
    closedir(dir);
    return top;
}

/* The daemon's soft descriptor limit, as if it had run out: the hard one
 * stays, so that raising it back needs no privilege. */
static void set_daemon_nofile(rlim_t n)
{
    struct rlimit rl;
    cr_assert_eq(prlimit(D.pid, RLIMIT_NOFILE, NULL, &rl), 0);
    rl.rlim_cur = n < rl.rlim_max ? n : rl.rlim_max;
    cr_assert_eq(prlimit(D.pid, RLIMIT_NOFILE, &rl, NULL), 0, "prlimit: %s",
                 strerror(errno));
}

static const unsigned char HELLO[] = {0, 0, 0, 4, 0x0a, 2, 0x08, 2};

/* What the daemon answered the hello sent on @p fd, waiting until
 * @p deadline_ns at most: its error code (0 for a hello reply), 1 for a
 * hang-up without a word, 2 for silence. */
static int hello_answer(int fd, uint64_t deadline_ns)
{
    uint64_t now = rd_now_ns();
    int ms = now < deadline_ns ? (int)((deadline_ns - now) / 1000000) : 0;
    uint8_t *body;
    size_t len;
    int r = retryd__frame_recv(fd, RETRYD_FRAME_REPLY_MAX, ms > 0 ? ms : 1,
                               &body, &len, NULL);
    if (r == RETRYD_ETIMEDOUT)
        return 2;
    if (r < 0)
        return 1;
    Retryd__ControlReply *rep = retryd__control_reply__unpack(NULL, len, body);
    free(body);
    cr_assert(rep != NULL);
    int code = rep->error;
    retryd__control_reply__free_unpacked(rep, NULL);
    return code;
}

#define FLOOD 50
/* The out-of-descriptors lines: per socket and window, at most the
 * daemon's rate limit (5) and its "suppressed" line. */
#define LOG_LINES_MAX (2 * (5 + 1))

Test(descriptors, out_of_descriptors_the_daemon_neither_spins_nor_goes_silent)
{
    restart_info(0, 0);
    child attached;
    start_client(&attached);
    ask(&attached, "open pot", "ok shared=1");
    /* No descriptor number left below the limit (holes below the highest
     * fill first: a few of the flood are served). */
    set_daemon_nofile((rlim_t)highest_fd(D.pid) + 1);
    int fds[FLOOD], stats_fds[FLOOD];
    for (int i = 0; i < FLOOD; i++) {
        fds[i] = rd_raw_connect(D.control, 0);
        stats_fds[i] = rd_raw_connect(D.stats, 0);
        cr_assert(fds[i] >= 0 && stats_fds[i] >= 0, "connect %d", i);
        /* It may fail: a refused peer's socket is closed at once. */
        (void)!send(fds[i], HELLO, sizeof(HELLO), MSG_NOSIGNAL);
    }
    /* Every newcomer is answered: a reply, or told that the daemon is full
     * (RETRYD_EFULL); none is left waiting in the backlog. */
    int told_full = 0;
    /* Bounds, not timings: a loaded machine (CI runs two suites at once)
     * takes longer to serve 50 newcomers one spare descriptor at a time. */
    uint64_t deadline = rd_now_ns() + 20000000000ull;
    for (int i = 0; i < FLOOD; i++) {
        int a = hello_answer(fds[i], deadline);
        cr_expect(a == 0 || a == RETRYD_EFULL, "connection %d: %d", i, a);
        told_full += a == RETRYD_EFULL;
    }
    cr_expect_gt(told_full, FLOOD / 2);
    /* The stats socket's newcomers are closed, not left in its backlog. */
    deadline = rd_now_ns() + 20000000000ull;
    for (int i = 0; i < FLOOD; i++) {
        char b;
        struct pollfd pf = {.fd = stats_fds[i], .events = POLLIN};
        uint64_t now = rd_now_ns();
        int ms = now < deadline ? (int)((deadline - now) / 1000000) : 0;
        ssize_t got = poll(&pf, 1, ms) == 1 ? recv(stats_fds[i], &b, 1, 0)
                                            : (errno = ETIMEDOUT, -1);
        cr_expect(got == 0 || (got < 0 && errno == ECONNRESET),
                  "stats connection %d: %zd (%s)", i, got, strerror(errno));
    }
    /* Both threads idle while the flood's descriptors stay open. */
    double cpu = cpu_share_over_a_window();
    cr_expect_lt(cpu, CPU_SPINNING, "the daemon used %.2f of a core", cpu);
    /* A library client is told why, not "no-daemon". */
    child late;
    start_client(&late);
    ask(&late, "open pot", "ok shared=0");
    expect_status(&late, "status no-process-slot");
    /* The attached process still registers on its connection. */
    ask(&attached, "open other", "ok shared=1");
    /* One rate-limited line per socket, not one per connection. */
    long lines = rd_file_lines_with(D.log, "out of file descriptors", NULL);
    cr_expect(lines >= 1 && lines <= LOG_LINES_MAX, "%ld lines", lines);
    /* Descriptors back: the late client attaches at its next attempt. */
    for (int i = 0; i < FLOOD; i++) {
        close(fds[i]);
        close(stats_fds[i]);
    }
    set_daemon_nofile(RLIM_INFINITY);
    cr_expect(rd_wait_until(says_shared, &late, SHARE_WAIT_MS),
              "the late client never shared");
    stats_json();
    child_stop(&late);
    child_stop(&attached);
}

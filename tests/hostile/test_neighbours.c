/* SPDX-License-Identifier: MIT */
/*
 * What one neighbour on the host must not take from the others, and what
 * the operator reads about it, with real processes (another user by setuid
 * in a forked child) against a real retryd (docs/reliability.md): a user's
 * quota of process slots, a client meeting a full listen backlog, the
 * socket limits as configuration keys of a running daemon, log levels
 * that mean something, with repetitive lines rate-limited, and no line a
 * peer's string can forge.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "control_request.h"
#include "harness.h"
#include "hostile.h"
#include "retryd/retryd.h"
#include "run.h"
#include "shared/frame.h"

#define POT_CONFIG                                                             \
    "[upstream pot]\nratio = 1\nmin_retries_per_sec = 0\ncap = 100000\n"
static const char *const base_config = "process_capacity = 8\n" POT_CONFIG;

#include "daemon_fixture.h"

TestSuite(neighbours, .init = daemon_setup, .fini = daemon_teardown,
          .timeout = 120);

/* What forked processes tell the test. */
typedef struct board {
    _Atomic int go;       /* the test says: start now */
    _Atomic int started;  /* ... and the process has */
    _Atomic int done;     /* processes finished with their attach */
    _Atomic int attached; /* ... that share the host budget */
    _Atomic int quota;    /* ... refused a slot (no-process-slot) */
    _Atomic int other;    /* ... anything else */
    _Atomic uint64_t lat_ns;
} board;

static board *B;

static void board_new(void)
{
    B = rd_shared_board(sizeof(*B));
    cr_assert(B != NULL);
}

static pid_t fork_or_die(void)
{
    pid_t pid = rd_fork_attacker();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    return pid;
}

/* Restart the daemon at log level @p level with @p extra in [retryd]
 * (then any sections). */
static void restart_at(const char *level, const char *extra)
{
    cr_assert_eq(rd_daemon_stop(&D, SIGTERM), 0);
    cr_assert_eq(rd_write_config_at(D.config, D.runtime, level, extra), 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "daemon did not start; see %s", D.log);
}

static bool board_done(void *arg)
{
    return atomic_load(&B->done) >= *(const int *)arg;
}

/* --- a user's quota of process slots ------------------------------------ */

/* Attach as user nobody, say how it went, hold the slot until @p hold
 * (a pipe) closes. */
static _Noreturn void nobody_hog(int hold)
{
    retryd_host_opts o = {
        .sz = sizeof(o), .control_socket = D.control, .client_name = "hog"};
    retryd_host *h;
    char x;
    if (rd_become(65534, 65534) < 0 || retryd_host_open(&o, &h) < 0)
        _exit(1);
    if (retryd_host_attached(h))
        atomic_fetch_add(&B->attached, 1);
    else if (retryd_host_share_status(h) == RETRYD_SHARE_NO_PROCESS_SLOT)
        atomic_fetch_add(&B->quota, 1);
    else
        atomic_fetch_add(&B->other, 1);
    atomic_fetch_add(&B->done, 1);
    if (read(hold, &x, 1) < 0)
        _exit(2);
    retryd_host_close(h);
    _exit(0);
}

/* User nobody (uid A) runs 5 processes against a quota of 3 slots of 8:
 * 3 attach, 2 are refused and told why; root (uid B) still attaches twice
 * and both share the one budget. No uid is exempt: the same would hold
 * with the users swapped. */
Test(neighbours, a_user_fills_its_slot_quota_and_another_still_shares)
{
    enum { HOGS = 5, QUOTA = 3 };
    if (geteuid() != 0)
        cr_skip_test("needs root to run processes as user nobody");
    struct group *g = getgrnam("nogroup");
    if (g == NULL || g->gr_gid != 65534)
        cr_skip_test("no group 'nogroup' (65534) on this machine");
    restart_at("info", "group = nogroup\nallow_groups = root nogroup\n"
                       "process_capacity = 8\nprocess_slots_per_uid = 3\n"
                       "[upstream pot]\nratio = 1\nmin_retries_per_sec = 0\n"
                       "cap = 100000\n");
    board_new();
    int hold[2];
    pid_t hogs[HOGS];
    cr_assert_eq(pipe2(hold, O_CLOEXEC), 0);
    for (int i = 0; i < HOGS; i++)
        if ((hogs[i] = fork_or_die()) == 0) {
            close(hold[1]);
            nobody_hog(hold[0]);
        }
    close(hold[0]);
    int all = HOGS;
    cr_assert(rd_wait_until(board_done, &all, 10000), "%d of %d hogs done",
              atomic_load(&B->done), HOGS);
    cr_expect_eq(atomic_load(&B->attached), QUOTA, "nobody attached %d",
                 atomic_load(&B->attached));
    cr_expect_eq(atomic_load(&B->quota), HOGS - QUOTA,
                 "%d refused a slot, %d failed otherwise",
                 atomic_load(&B->quota), atomic_load(&B->other));
    cr_expect_eq(daemon_stat("attached_processes"), QUOTA);
    /* The stats count the refusals under quota, none under capacity. */
    cr_expect_eq(rd_json_number(res.out, "\"slots_refused\"", "quota"),
                 HOGS - QUOTA, "%s", res.out);
    cr_expect_eq(rd_json_number(res.out, "\"slots_refused\"", "capacity"), 0,
                 "%s", res.out);
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--prometheus", NULL), 0);
    char want[96];
    snprintf(want, sizeof(want),
             "retryd_slot_refusals_total{reason=\"quota\"} %d\n", HOGS - QUOTA);
    cr_expect(strstr(res.out, want) != NULL, "no '%s' in %s", want, res.out);
    cr_expect_geq(
        rd_file_lines_with(D.log, "uid 65534", "process_slots_per_uid"), 1,
        "the refusal names the quota in the log");

    /* Root: two processes attach beside nobody's 3, and share. */
    child a, b;
    start_client(&a);
    start_client(&b);
    ask(&a, "open pot", "ok shared=1");
    ask(&b, "open pot", "ok shared=1");
    ask(&a, "deposit 3", "ok");
    ask(&b, "balance", "balance 3.000000");
    cr_expect_eq(daemon_stat("attached_processes"), QUOTA + 2);
    child_stop(&a);
    child_stop(&b);
    close(hold[1]);
    for (int i = 0; i < HOGS; i++)
        cr_expect_eq(rd_reap(hogs[i], 10000), 0, "hog %d", i);
}

/* --- a user's quota of upstream registrations ---------------------------- */

/* As user nobody: register upstreams n0..n(N-1), counting in the board
 * those that are shared (attached) and those that are not (quota). */
static _Noreturn void nobody_registers(int n)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    retryd_host *h;
    if (rd_become(65534, 65534) < 0 || retryd_host_open(&o, &h) < 0 ||
        !retryd_host_attached(h))
        _exit(1);
    for (int i = 0; i < n; i++) {
        char name[32];
        retryd_upstream *up;
        snprintf(name, sizeof(name), "hog-%d", i);
        if (retryd_upstream_open(h, name, NULL, &up) < 0)
            _exit(2);
        atomic_fetch_add(retryd_upstream_shared(up) ? &B->attached : &B->quota,
                         1);
    }
    atomic_fetch_add(&B->done, 1);
    retryd_host_close(h);
    _exit(0);
}

/* User nobody registers 12 new upstreams against upstreams_per_uid = 5:
 * 5 are shared, the other 7 are refused (their processes spend from local
 * budgets), counted and logged with the quota's name; root still registers
 * a new upstream and shares it. Once nobody's process is gone, its
 * registrations sit idle and are retired (upstream_idle_retire = 1s), so
 * its next process registers its quota again: it holds nothing forever. */
static bool hogs_retired(void *arg)
{
    (void)arg;
    return rd_ctl(&D, &res, "stats", "--json", NULL) == 0 &&
           strstr(res.out, "\"hog-") == NULL;
}

Test(neighbours, a_user_at_its_upstream_quota_leaves_the_table_to_others)
{
    enum { NAMES = 12, QUOTA = 5 };
    if (geteuid() != 0)
        cr_skip_test("needs root to run processes as user nobody");
    struct group *g = getgrnam("nogroup");
    if (g == NULL || g->gr_gid != 65534)
        cr_skip_test("no group 'nogroup' (65534) on this machine");
    restart_at("info",
               "group = nogroup\nallow_groups = root nogroup\n"
               "upstreams_per_uid = 5\nupstream_idle_retire = 1s\n" POT_CONFIG);
    board_new();
    pid_t pid = fork_or_die();
    if (pid == 0)
        nobody_registers(NAMES);
    cr_assert_eq(rd_reap(pid, 10000), 0, "the registering process");
    cr_expect_eq(atomic_load(&B->attached), QUOTA);
    cr_expect_eq(atomic_load(&B->quota), NAMES - QUOTA);
    stats_json();
    cr_expect_eq(rd_json_number(res.out, "\"upstreams_refused\"", "quota"),
                 NAMES - QUOTA, "%s", res.out);
    cr_expect_geq(rd_file_lines_with(D.log, "uid 65534", "upstreams_per_uid"),
                  1, "the refusal names the quota in the log");
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--prometheus", NULL), 0);
    char want[96];
    snprintf(want, sizeof(want),
             "retryd_upstream_refusals_total{reason=\"quota\"} %d\n",
             NAMES - QUOTA);
    cr_expect(strstr(res.out, want) != NULL, "no '%s' in %s", want, res.out);
    /* Root's quota is its own, and the configured upstream nobody's. */
    child a;
    start_client(&a);
    ask(&a, "open root-new", "ok shared=1");
    ask(&a, "open pot", "ok shared=1");
    child_stop(&a);
    cr_assert(rd_wait_until(hogs_retired, NULL, 10000),
              "nobody's idle registrations stayed: %s", res.out);
    cr_expect_geq(
        rd_file_lines_with(D.log, "idle for upstream_idle_retire", NULL), 1);
    atomic_store(&B->attached, 0);
    atomic_store(&B->quota, 0);
    pid = fork_or_die();
    if (pid == 0)
        nobody_registers(QUOTA);
    cr_assert_eq(rd_reap(pid, 10000), 0, "the registering process");
    cr_expect_eq(atomic_load(&B->attached), QUOTA, "its quota, again");
    cr_expect_eq(atomic_load(&B->quota), 0);
}

/* --- a full listen backlog ----------------------------------------------- */

static bool told_to_go(void *arg)
{
    (void)arg;
    return atomic_load(&B->go) != 0;
}

/* One attach once the test says go, timed; the client's own bound is 5 s. */
static _Noreturn void patient_client(void)
{
    retryd_host_opts o = {.sz = sizeof(o),
                          .control_socket = D.control,
                          .timeout_ms = 5000,
                          .client_name = "patient"};
    retryd_host *h;
    if (!rd_wait_until(told_to_go, NULL, 10000))
        _exit(2);
    atomic_store(&B->started, 1);
    uint64_t t0 = rd_now_ns();
    if (retryd_host_open(&o, &h) < 0)
        _exit(1);
    atomic_store(&B->lat_ns, rd_now_ns() - t0);
    if (retryd_host_attached(h))
        atomic_fetch_add(&B->attached, 1);
    else
        atomic_store(&B->other, (int)retryd_host_share_status(h));
    retryd_host_close(h);
    _exit(0);
}

static bool daemon_stopped(void *arg)
{
    (void)arg;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)D.pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && p[2] == 'T';
}

static bool client_started(void *arg)
{
    (void)arg;
    return atomic_load(&B->started) != 0;
}

/* More connections than the listen backlog holds: the daemon listens
 * with SOMAXCONN, which the kernel caps at net.core.somaxconn. */
static int flood_max(void)
{
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "re");
    int n = 4096;
    if (f != NULL) {
        if (fscanf(f, "%d", &n) != 1)
            n = 4096;
        fclose(f);
    }
    return (n < SOMAXCONN ? n : SOMAXCONN) + 64;
}
/* How long the daemon stays stopped once the client started connecting. */
#define STOPPED_MS 300

/*
 * The daemon is stopped (SIGSTOP) and a flood fills its listen backlog;
 * a client then starts to attach, the backlog still full for STOPPED_MS;
 * the flood goes and the daemon runs again. The client's connect, refused
 * with EAGAIN all that time, is tried again until the backlog has room: it
 * attaches within its deadline instead of falling back to a local budget.
 */
Test(neighbours, a_full_listen_backlog_delays_an_attach_but_does_not_fail_it)
{
    const int max = flood_max();
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (rlim_t)max + 64)
        cr_skip_test("RLIMIT_NOFILE's hard limit %llu is below the %d "
                     "descriptors that fill a listen backlog",
                     (unsigned long long)rl.rlim_max, max + 64);
    rl.rlim_cur = (rlim_t)max + 64;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    int *fds = calloc((size_t)max, sizeof(*fds));
    cr_assert_not_null(fds);
    board_new();
    pid_t client = fork_or_die(); /* before the flood: none of it inherited */
    if (client == 0)
        patient_client();

    cr_assert_eq(kill(D.pid, SIGSTOP), 0);
    cr_assert(rd_wait_until(daemon_stopped, NULL, 5000), "not stopped");
    int n = 0, last = 0;
    while (n < max && (last = rd_raw_connect(D.control, 1)) >= 0)
        fds[n++] = last;
    cr_assert_eq(last, -EAGAIN, "after %d connections: %s", n, strerror(-last));
    atomic_store(&B->go, 1);
    cr_assert(rd_wait_until(client_started, NULL, 5000));
    /* The stop is the attack's length, not a wait for anything. */
    struct timespec stop = {0, STOPPED_MS * 1000000L};
    nanosleep(&stop, NULL);
    int probe = rd_raw_connect(D.control, 1);
    cr_expect_eq(probe, -EAGAIN, "the backlog stayed full");
    if (probe >= 0)
        close(probe);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    free(fds);
    cr_assert_eq(kill(D.pid, SIGCONT), 0);

    cr_assert_eq(rd_reap(client, 20000), 0);
    uint64_t ms = atomic_load(&B->lat_ns) / 1000000;
    printf("full backlog (%d connections): the client attached after %llu "
           "ms\n",
           n, (unsigned long long)ms);
    cr_expect_eq(atomic_load(&B->attached), 1,
                 "the client fell back (%s) after %llu ms",
                 retryd_share_status_name(atomic_load(&B->other)),
                 (unsigned long long)ms);
    cr_expect_geq(ms, STOPPED_MS - 50, "it waited for the backlog");
    cr_expect_lt(ms, 5000, "within its deadline");
    cr_expect(daemon_running());
    stats_json();
}

/* --- limits as configuration in a running daemon ------------------------- */

static bool peer_closed(void *arg)
{
    char x;
    ssize_t r = recv(*(int *)arg, &x, 1, MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Whether the log holds more reloads than the *arg seen before. */
static bool reloaded_since(void *arg)
{
    return rd_file_lines_with(D.log, "configuration reloaded", NULL) >
           *(long *)arg;
}

/* A connection that stays silent is closed at hello_timeout_ms; a process
 * past connections_per_process is refused; a reload changes both. */
Test(neighbours, socket_limits_are_configuration_keys)
{
    restart_at("info",
               "hello_timeout_ms = 3000\nconnections_per_process = 2\n");
    int c1 = raw_connect(D.control), c2 = raw_connect(D.control);
    int c3 = raw_connect(D.control);
    cr_expect(rd_wait_until(peer_closed, &c3, 2000),
              "the third connection of a process was not refused");
    cr_expect(!peer_closed(&c1) && !peer_closed(&c2), "the first two stay");
    cr_expect_geq(rd_file_lines_with(D.log,
                                     "too many connections from this "
                                     "process",
                                     NULL),
                  1);
    close(c1), close(c2), close(c3);

    cr_assert_eq(rd_write_config_at(D.config, D.runtime, "info",
                                    "hello_timeout_ms = 100\n"),
                 0);
    long before = rd_file_lines_with(D.log, "configuration reloaded", NULL);
    cr_assert_eq(kill(D.pid, SIGHUP), 0);
    cr_assert(rd_wait_until(reloaded_since, &before, 5000),
              "no reload logged; see %s", D.log);
    uint64_t t0 = rd_now_ns();
    int silent = raw_connect(D.control);
    cr_expect(rd_wait_until(peer_closed, &silent, 2000),
              "a silent connection outlived hello_timeout_ms = 100");
    uint64_t ms = (rd_now_ns() - t0) / 1000000;
    cr_expect(ms >= 90 && ms < 900, "closed after %llu ms",
              (unsigned long long)ms);
    close(silent);
}

/* --- log levels ------------------------------------------------------------
 */

/* @p n processes, one after another, attach and detach. */
static void attach_processes(int n)
{
    for (int i = 0; i < n; i++) {
        pid_t pid = fork_or_die();
        if (pid == 0) {
            retryd_host_opts o = {.sz = sizeof(o),
                                  .control_socket = D.control,
                                  .client_name = "neighbour"};
            retryd_host *h;
            if (retryd_host_open(&o, &h) < 0 || !retryd_host_attached(h))
                _exit(1);
            retryd_host_close(h);
            _exit(0);
        }
        cr_assert_eq(rd_reap(pid, 10000), 0, "process %d did not attach", i);
    }
}

/* Attaches and detaches are debug: at info, 50 of them log nothing; at
 * debug, each hello and attach is a line. */
Test(neighbours, attaches_are_logged_at_debug_and_not_at_info)
{
    enum { N = 50 };
    restart_at("info", "process_capacity = 64\n");
    attach_processes(N);
    cr_expect_eq(rd_file_lines_with(D.log, "attached to process slot", NULL),
                 0);
    cr_expect_eq(rd_file_lines_with(D.log, "detached", NULL), 0);
    cr_expect_eq(rd_file_lines_with(D.log, "said hello", NULL), 0);

    restart_at("debug", "process_capacity = 64\n");
    attach_processes(N);
    cr_expect_eq(rd_file_lines_with(D.log,
                                    "(neighbour) attached to process "
                                    "slot",
                                    NULL),
                 N);
    cr_expect_eq(rd_file_lines_with(D.log, "(neighbour) said hello", NULL), N);
}

/* Lines that hold @p what, printed (not a "suppressed" line), plus the
 * counts of the "suppressed N similar lines" lines that name it. */
static long accounted(const char *what)
{
    FILE *f = fopen(D.log, "re");
    if (f == NULL)
        return -1;
    char line[2048];
    long n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, what) == NULL)
            continue;
        const char *s = strstr(line, "suppressed ");
        n += s != NULL ? strtol(s + strlen("suppressed "), NULL, 10) : 1;
    }
    fclose(f);
    return n;
}

static bool all_accounted(void *arg)
{
    return accounted("registered upstream") >= *(long *)arg &&
           accounted("retired upstream") >= *(long *)arg;
}

/* 1000 upstreams registered and retired by one peer: a few lines per
 * window of log_limit_interval_s, then a "suppressed N" line that counts
 * the rest, so every one is told and none floods the journal. */
Test(neighbours, register_and_retire_churn_is_rate_limited)
{
    enum { CHURN = 1000 };
    restart_at("info", "log_limit_interval_s = 2\n");
    int fd = raw_connect(D.control);
    cr_assert_eq(rd_control_hello(fd), 0);
    uint64_t t0 = rd_now_ns();
    for (int i = 0; i < CHURN; i++) {
        char name[32];
        snprintf(name, sizeof(name), "junk-%d", i);
        cr_assert_eq(rd_control_register_retire(fd, name), 0,
                     "register/retire %s", name);
    }
    uint64_t secs = (rd_now_ns() - t0) / 1000000000u;
    close(fd);
    long want = CHURN;
    cr_expect(rd_wait_until(all_accounted, &want, 10000),
              "told %ld registers and %ld retires of %d",
              accounted("registered upstream"), accounted("retired upstream"),
              CHURN);
    /* 5 lines per 2 s window the churn touched. */
    long windows = (long)secs / 2 + 2;
    long printed = rd_file_lines_with(D.log, "registered upstream 'junk", NULL);
    long retired = rd_file_lines_with(D.log, "retired upstream 'junk", NULL);
    printf("register/retire churn of %d in %llu s: %ld and %ld lines, %ld "
           "suppressed lines\n",
           CHURN, (unsigned long long)secs, printed, retired,
           rd_file_lines_with(D.log, "suppressed", NULL));
    cr_expect(printed >= 1 && printed <= 5 * windows, "%ld register lines",
              printed);
    cr_expect(retired >= 1 && retired <= 5 * windows, "%ld retire lines",
              retired);
    cr_expect_geq(rd_file_lines_with(D.log, "suppressed", "registered"), 1);
}

/* --- forged log lines ---------------------------------------------------- */

/* A client name that, logged raw, would end the daemon's line and forge
 * two: an error in the daemon's own words, and under journald a line of
 * priority 2 (critical). */
#define FORGED_NAME "evil\nretryd: error: forged\n<2>forged critical\r\x1b[2J"
#define FORGED_ESCAPED                                                         \
    "evil\\x0aretryd: error: forged\\x0a<2>forged critical\\x0d\\x1b[2J"

static void hello_as_forger(void)
{
    retryd_host_opts o = {.sz = sizeof(o),
                          .control_socket = D.control,
                          .client_name = FORGED_NAME};
    retryd_host *h;
    cr_assert_eq(retryd_host_open(&o, &h), 0);
    cr_assert_eq(retryd_host_share_status(h), RETRYD_SHARE_SHARED);
    retryd_host_close(h);
}

/* Lines of the daemon's log that begin with @p prefix. */
static long lines_starting(const char *prefix)
{
    FILE *f = fopen(D.log, "re");
    cr_assert(f != NULL);
    char line[4096];
    long n = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strncmp(line, prefix, strlen(prefix)) == 0;
    fclose(f);
    return n;
}

/* Whether every line of the log begins with one of the daemon's own
 * journald priorities (err, warning, info, debug). */
static bool every_line_a_daemon_priority(void)
{
    FILE *f = fopen(D.log, "re");
    cr_assert(f != NULL);
    char line[4096];
    bool ok = true;
    while (fgets(line, sizeof(line), f) != NULL)
        ok &= line[0] == '<' && strchr("3467", line[1]) != NULL &&
              line[1] != '\0' && line[2] == '>';
    fclose(f);
    return ok;
}

/* The hello and the attach lines (debug) name the client; both are
 * written before their replies, so they are in the log once the attach
 * returns. */
Test(neighbours, a_hostile_client_name_forges_no_log_line)
{
    hello_as_forger();
    cr_expect_eq(rd_file_lines_with(D.log, FORGED_ESCAPED, "said hello"), 1);
    cr_expect_eq(rd_file_lines_with(D.log, FORGED_ESCAPED, "attached"), 1);
    cr_expect_eq(lines_starting("retryd: error: forged"), 0);
    cr_expect_eq(lines_starting("<2>"), 0);
    cr_expect_eq(rd_file_lines_with(D.log, "\x1b", NULL), 0);

    /* Under journald every line begins with its priority: still only the
     * daemon's own. */
    cr_assert_eq(rd_daemon_stop(&D, SIGTERM), 0);
    cr_assert_eq(truncate(D.log, 0), 0);
    setenv("JOURNAL_STREAM", "8:1", 1); /* this test's process only */
    cr_assert_eq(rd_daemon_start(&D), 0, "daemon did not start; see %s", D.log);
    hello_as_forger();
    cr_expect_eq(rd_file_lines_with(D.log, FORGED_ESCAPED, "said hello"), 1);
    cr_expect_eq(lines_starting("<2>"), 0);
    cr_expect(every_line_a_daemon_priority(), "%s", daemon_log());
}

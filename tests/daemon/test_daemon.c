/* SPDX-License-Identifier: MIT */
/*
 * A real retryd in a temporary directory, real client processes, and the
 * operator's CLI: attach, register, stats in three formats, drain, reload,
 * restart, kill -9 of a client and of the daemon, hostile frames, the local
 * fallback, another user, fork, retirement, conflicting parameters.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "retryd/retryd.h"
#include "run.h"
#include "shared/segment.h"

/* Floor 0 keeps balances exact: nothing refills behind the test's back. */
static const char *const base_config =
    "[upstream payments]\nratio = 0.5\nmin_retries_per_sec = 0\ncap = 20\n"
    "[upstream orders]\nratio = 1\nmin_retries_per_sec = 0\ncap = 100\n";

#include "daemon_fixture.h"

TestSuite(daemon, .init = daemon_setup, .fini = daemon_teardown, .timeout = 60);

/* --- helpers ------------------------------------------------------------- */

/* Some one line of @p log holds both @p a and @p b. */
static bool line_with(const char *log, const char *a, const char *b)
{
    while (*log != '\0') {
        const char *nl = strchr(log, '\n');
        size_t len = nl ? (size_t)(nl - log) : strlen(log);
        if (memmem(log, len, a, strlen(a)) && memmem(log, len, b, strlen(b)))
            return true;
        log += len + (nl != NULL);
    }
    return false;
}

/* --- the tests ----------------------------------------------------------- */

Test(daemon, attach_register_and_stats_in_three_formats)
{
    child c;
    start_client(&c);
    ask(&c, "attached", "attached 1");
    ask(&c, "open payments", "ok shared=1");
    ask(&c, "deposit 10", "ok");
    ask(&c, "balance", "balance 5.000000");
    ask(&c, "withdraw 7", "granted 5 denied 2");

    cr_expect_eq(stat_of("payments", "deposits"), 10);
    cr_expect_eq(stat_of("payments", "retries_granted"), 5);
    cr_expect_eq(stat_of("payments", "budget_exhausted"), 2);
    cr_expect_eq(stat_of("payments", "balance"), 0);
    cr_expect_eq(stat_of("payments", "cap"), 20);
    cr_expect_eq(daemon_stat("attached_processes"), 1);
    cr_expect(strstr(res.out, "\"processes\":[{\"pid\":") != NULL);

    cr_assert_eq(rd_ctl(&D, &res, "stats", NULL), 0, "%s", res.err);
    cr_expect(strstr(res.out, "payments") != NULL, "%s", res.out);
    cr_expect(strstr(res.out, "denied: budget_exhausted=2") != NULL, "%s",
              res.out);

    cr_assert_eq(rd_ctl(&D, &res, "stats", "--prometheus", NULL), 0, "%s",
                 res.err);
    cr_expect(strstr(res.out, "# TYPE retryd_upstream_deposits_total "
                              "counter\n") != NULL);
    cr_expect(strstr(res.out, "retryd_upstream_deposits_total{upstream=\""
                              "payments\"} 10\n") != NULL,
              "%s", res.out);
    cr_expect(strstr(res.out,
                     "retryd_upstream_retries_denied_total{upstream="
                     "\"payments\",reason=\"budget_exhausted\"} 2\n") != NULL);
    cr_expect(strstr(res.out, "# HELP retryd_upstream_balance_tokens ") !=
              NULL);

    cr_assert_eq(rd_ctl(&D, &res, "upstreams", NULL), 0, "%s", res.err);
    cr_expect(strstr(res.out, "payments") && strstr(res.out, "orders"));
    child_stop(&c);
}

Test(daemon, drain_reaches_every_client)
{
    child c;
    start_client(&c);
    ask(&c, "draining", "draining 0");
    cr_expect(stats_say_draining(false), "%s", res.out);
    cr_assert_eq(rd_ctl(&D, &res, "drain", "on", NULL), 0, "%s", res.err);
    ask(&c, "draining", "draining 1");
    cr_expect(stats_say_draining(true), "%s", res.out);
    cr_assert_eq(rd_ctl(&D, &res, "drain", "off", NULL), 0, "%s", res.err);
    ask(&c, "draining", "draining 0");
    cr_expect(stats_say_draining(false), "%s", res.out);
    child_stop(&c);
}

/* Whether the stats say @p upstream's cap is @p cap (false when they
 * cannot be read: for rd_wait_until). */
static bool cap_is(const char *upstream, double cap)
{
    char anchor[128];
    if (rd_ctl(&D, &res, "stats", "--json", NULL) != 0)
        return false;
    snprintf(anchor, sizeof(anchor), "\"name\":\"%s\"", upstream);
    return rd_json_number(res.out, anchor, "cap") == cap;
}

static bool cap_is_30(void *arg)
{
    (void)arg;
    return cap_is("payments", 30);
}

#define RELOAD_REFUSED "reload refused, keeping the running configuration"

static bool reload_refused(void *arg)
{
    (void)arg;
    return strstr(daemon_log(), RELOAD_REFUSED) != NULL;
}

Test(daemon, sighup_reloads_parameters_and_refuses_a_broken_file)
{
    cr_assert_eq(rd_daemon_write_config(&D,
                                        "[upstream payments]\nratio = 0.5\n"
                                        "min_retries_per_sec = 0\ncap = 30\n"),
                 0);
    cr_assert_eq(kill(D.pid, SIGHUP), 0);
    cr_assert(rd_wait_until(cap_is_30, NULL, 5000),
              "reload not applied (daemon %s): %s",
              daemon_running() ? "running" : "gone", res.err);

    /* A file that would also move payments' cap to 40, broken further
     * down: refusing it must keep the cap at 30. */
    cr_assert_eq(rd_daemon_write_config(&D,
                                        "[upstream payments]\nratio = 0.5\n"
                                        "min_retries_per_sec = 0\ncap = 40\n"
                                        "[defaults]\nratio = lots\n"),
                 0);
    cr_assert_eq(kill(D.pid, SIGHUP), 0);
    cr_assert(rd_wait_until(reload_refused, NULL, 5000),
              "no refusal in the log: %s", daemon_log());
    const char *log = daemon_log();
    cr_expect(line_with(log, RELOAD_REFUSED, "'lots'"),
              "the refusal names the bad value: %s", log);
    /* Still serving, with the last good configuration. */
    cr_expect_eq(stat_of("payments", "cap"), 30,
                 "the refused file's cap was applied");
    cr_expect(daemon_running());
}

Test(daemon, restart_preserves_balances_and_counters)
{
    child c;
    start_client(&c);
    ask(&c, "open payments", "ok shared=1");
    ask(&c, "deposit 10", "ok");
    ask(&c, "withdraw 1", "granted 1 denied 0");
    cr_assert_eq(rd_daemon_stop(&D, SIGTERM), 0, "clean exit on SIGTERM");
    cr_assert_eq(rd_daemon_start(&D), 0);
    cr_expect_eq(stat_of("payments", "balance"), 4);
    cr_expect_eq(stat_of("payments", "deposits"), 10);
    cr_expect_eq(stat_of("payments", "retries_granted"), 1);
    /* The client never noticed: same segment, same slot. */
    ask(&c, "withdraw 1", "granted 1 denied 0");
    cr_expect_eq(daemon_stat("attached_processes"), 1);
    child_stop(&c);
}

static bool one_attached(void *arg)
{
    (void)arg;
    return rd_ctl(&D, &res, "stats", "--json", NULL) == 0 &&
           rd_json_number(res.out, "\"daemon\"", "attached_processes") == 1;
}

Test(daemon, kill9_of_a_client_frees_its_slot_and_keeps_its_counts)
{
    child a, b;
    start_client(&a);
    start_client(&b);
    ask(&a, "open payments", "ok shared=1");
    ask(&b, "open payments", "ok shared=1");
    ask(&a, "deposit 10", "ok");
    ask(&b, "deposit 4", "ok");
    cr_expect_eq(daemon_stat("attached_processes"), 2);
    kill(a.pid, SIGKILL);
    cr_expect_eq(child_stop(&a), -SIGKILL);
    cr_expect(rd_wait_until(one_attached, NULL, 5000),
              "the dead client's slot was not freed");
    cr_expect_eq(stat_of("payments", "deposits"), 14,
                 "its counts were folded into the upstream");
    child c;
    start_client(&c);
    ask(&c, "attached", "attached 1");
    child_stop(&c);
    child_stop(&b);
}

Test(daemon, kill9_of_the_daemon_leaves_clients_deciding)
{
    child c, late;
    start_client(&c);
    ask(&c, "open payments", "ok shared=1");
    ask(&c, "deposit 10", "ok");
    rd_daemon_stop(&D, SIGKILL);
    /* No daemon: the attached client keeps spending from the segment. */
    ask(&c, "withdraw 3", "granted 3 denied 0");
    ask(&c, "deposit 4", "ok");
    ask(&c, "shared", "shared 1");
    ask(&c, "open orders", "ok shared=1"); /* found in the segment itself */
    /* A client that starts now falls back to a local budget, with the
     * library's defaults (it cannot know the daemon's configuration):
     * one second of a 10/s floor. */
    start_client(&late);
    ask(&late, "attached", "attached 0");
    ask(&late, "open payments", "ok shared=0");
    char reply[64];
    long granted = -1, denied = -1;
    cr_assert_eq(
        child_ask(&late, "withdraw 1000", reply, sizeof(reply), ASK_MS), 0);
    cr_assert_eq(sscanf(reply, "granted %ld denied %ld", &granted, &denied), 2);
    /* 10 to start, plus whatever the floor refilled while we talked. */
    cr_expect(granted >= 10 && granted <= 40 && granted + denied == 1000, "%s",
              reply);

    cr_assert_eq(rd_daemon_start(&D), 0);
    cr_expect_eq(stat_of("payments", "deposits"), 14);
    cr_expect_eq(stat_of("payments", "retries_granted"), 3);
    cr_expect_eq(stat_of("payments", "balance"), 4);
    child_stop(&late);
    child_stop(&c);
}

/* Send @p bytes, then read until EOF: returns what came back. */
static ssize_t exchange_raw(const char *path, const void *bytes, size_t n,
                            char *out, size_t cap)
{
    int fd = raw_connect(path);
    send_all(fd, bytes, n);
    size_t got = 0;
    ssize_t r;
    while (got < cap && (r = read(fd, out + got, cap - got)) > 0)
        got += (size_t)r;
    close(fd);
    return (ssize_t)got;
}

Test(daemon, malformed_and_oversized_frames_get_an_error_and_a_close)
{
    char out[512];
    static const unsigned char oversized[] = {0xff, 0xff, 0xff, 0xff, 1, 2};
    static const unsigned char garbage[] = {0,    0,    0,    5,   0xff,
                                            0xff, 0xff, 0xff, 0xff};
    /* A register request (field 3) before any hello. */
    static const unsigned char no_hello[] = {0, 0, 0, 4, 0x1a, 2, 0x0a, 0};

    ssize_t n =
        exchange_raw(D.control, oversized, sizeof(oversized), out, sizeof(out));
    cr_expect_gt(n, 4, "an error reply before the close");
    n = exchange_raw(D.control, garbage, sizeof(garbage), out, sizeof(out));
    cr_expect_gt(n, 4);
    n = exchange_raw(D.control, no_hello, sizeof(no_hello), out, sizeof(out));
    cr_expect_gt(n, 4);
    n = exchange_raw(D.stats, oversized, sizeof(oversized), out, sizeof(out));
    cr_expect_gt(n, 4);
    n = exchange_raw(D.stats, garbage, sizeof(garbage), out, sizeof(out));
    cr_expect_gt(n, 4);
    /* Half a frame, then gone. */
    int fd = raw_connect(D.control);
    send_all(fd, "\0\0\0\x10zz", 6);
    close(fd);

    /* Still serving both sockets. */
    child c;
    start_client(&c);
    ask(&c, "open payments", "ok shared=1");
    cr_expect_eq(daemon_stat("attached_processes"), 1);
    cr_expect(daemon_running());
    child_stop(&c);
}

static child *poll_child;
static bool becomes_shared(void *arg)
{
    (void)arg;
    char reply[64];
    child_ask(poll_child, "deposit 1", reply, sizeof(reply), ASK_MS);
    child_ask(poll_child, "shared", reply, sizeof(reply), ASK_MS);
    return strcmp(reply, "shared 1") == 0;
}

Test(daemon, without_a_daemon_budgets_are_local_then_shared_again)
{
    child c;
    rd_daemon_stop(&D, SIGTERM);
    start_client(&c);
    ask(&c, "attached", "attached 0");
    ask(&c, "open payments", "ok shared=0");
    /* The local bucket has the same semantics: defaults, floor 10/s,
     * starting with one second of floor. */
    ask(&c, "withdraw 10", "granted 10 denied 0");
    cr_assert_eq(rd_daemon_start(&D), 0);
    poll_child = &c;
    cr_expect(rd_wait_until(becomes_shared, NULL, 5000),
              "the client did not re-attach");
    ask(&c, "attached", "attached 1");
    cr_expect_eq(daemon_stat("attached_processes"), 1);
    child_stop(&c);
}

Test(daemon, conflicting_parameters_are_a_clear_error)
{
    child c;
    start_client(&c);
    for (int i = 0; i < 3; i++)
        ask(&c, "open payments 0.1 10 100", "err ECONFLICT");
    /* Logged once, however often asked, with both sets of parameters. */
    const char *log = daemon_log();
    const char *line = strstr(log, "upstream 'payments': refused a client's "
                                   "parameters (ratio 0.1, floor 10/s, cap "
                                   "100): it is registered with (ratio 0.5, "
                                   "floor 0/s, cap 20)");
    cr_expect(line != NULL, "no refusal with both sets logged: %s", log);
    cr_expect(line == NULL ||
                  strstr(strchr(line, '\n') ? strchr(line, '\n') : line,
                         "refused a client's") == NULL,
              "the refusal was logged more than once: %s", log);
    ask(&c, "open payments 0.5 0 20", "ok shared=1");
    ask(&c, "open newcomer 0.2 5 50", "ok shared=1");
    cr_expect_eq(stat_of("newcomer", "ratio"), 0.2);
    child_stop(&c);
}

Test(daemon, retired_slot_cannot_be_spent_by_an_old_handle)
{
    child c;
    start_client(&c);
    ask(&c, "open orders", "ok shared=1");
    ask(&c, "deposit 20", "ok");
    double gen = stat_of("orders", "slot_generation");
    cr_assert_eq(rd_ctl(&D, &res, "retire", "orders", NULL), 0, "%s", res.err);
    /* The handle rebinds to a fresh registration: the 20 tokens of the
     * retired generation are gone, the new bucket starts empty. */
    ask(&c, "withdraw 1", "granted 0 denied 1");
    ask(&c, "shared", "shared 1");
    /* Re-registered in the slot it left (the first one not active): its
     * generation was bumped by the retirement and again by the reuse. */
    cr_expect_gt(stat_of("orders", "slot_generation"), gen);
    cr_expect_eq(stat_of("orders", "balance"), 0);
    ask(&c, "deposit 2", "ok");
    ask(&c, "withdraw 1", "granted 1 denied 0");
    child_stop(&c);
}

Test(daemon, forked_child_takes_a_slot_of_its_own)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    retryd_host *h;
    retryd_upstream *up;
    cr_assert_eq(retryd_host_open(&o, &h), 0);
    cr_assert_eq(retryd_upstream_open(h, "payments", NULL, &up), 0);
    cr_assert_eq(retryd_upstream_deposit(up), 0);
    int go[2], done[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(done), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char x;
        for (int i = 0; i < 6; i++)
            retryd_upstream_deposit(up);
        x = retryd_host_attached(h) && retryd_upstream_shared(up) ? 'y' : 'n';
        if (write(done[1], &x, 1) != 1 || read(go[0], &x, 1) != 1)
            _exit(2);
        _exit(0);
    }
    char x = 0;
    cr_assert_eq(read(done[0], &x, 1), 1);
    cr_expect_eq(x, 'y', "the child re-attached and shares the bucket");
    cr_expect_eq(daemon_stat("attached_processes"), 2);
    char mine[64], theirs[64];
    snprintf(mine, sizeof(mine), "{\"pid\":%d,", (int)getpid());
    snprintf(theirs, sizeof(theirs), "{\"pid\":%d,", (int)pid);
    cr_expect_eq(number_in_res(mine, "deposits"), 1);
    cr_expect_eq(number_in_res(theirs, "deposits"), 6);
    cr_assert_eq(write(go[1], "x", 1), 1);
    int status;
    waitpid(pid, &status, 0);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    retryd_host_close(h);
}

/* Run @p fn as user and group nobody (65534), in a child; its exit code. */
static int as_nobody(int (*fn)(void))
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
            _exit(99);
        _exit(fn());
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

/* retryd_host_open as the calling user succeeds without attaching, and
 * payments gets a local budget that nobody else sees: 0; else 1 (the host
 * did not open, or attached) or 2 (the upstream did not open, or is
 * shared). */
static int opens_locally_only(void)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    retryd_host *h;
    retryd_upstream *up;
    int r = 0;
    if (retryd_host_open(&o, &h) < 0)
        return 1;
    if (retryd_host_attached(h))
        r = 1;
    else if (retryd_upstream_open(h, "payments", NULL, &up) < 0 ||
             retryd_upstream_shared(up))
        r = 2;
    retryd_host_close(h);
    return r;
}

static int nobody_is_locked_out(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, D.control);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno != EACCES)
        return 1;
    if (open(D.segment, O_RDWR) >= 0 || errno != EACCES)
        return 2;
    /* It still works, on a budget of its own. */
    int r = opens_locally_only();
    return r != 0 ? 2 + r : 0;
}

Test(daemon, another_user_cannot_attach_register_or_write)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to run a process as another user");
    cr_expect_eq(as_nobody(nobody_is_locked_out), 0);
}

static int nobody_in_the_socket_group_is_refused(void)
{
    /* The socket lets it connect; the peer check refuses it. */
    int local = opens_locally_only();
    if (local != 0)
        return local;
    run_result r;
    if (rd_ctl(&D, &r, "drain", "on", NULL) != 70 ||
        strstr(r.err, "not authorised") == NULL)
        return 3;
    if (open(D.segment, O_RDWR) >= 0)
        return 4;
    /* The socket group is also the stats group (by default): it may read
     * the statistics it may not change. */
    if (rd_ctl(&D, &r, "stats", NULL) != 0 || strstr(r.out, "payments") == NULL)
        return 5;
    return 0;
}

Test(daemon, peer_credentials_refuse_a_user_outside_the_allow_lists)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to run a process as another user");
    if (getgrnam("nogroup") == NULL)
        cr_skip_test("no group 'nogroup' on this machine");
    rd_daemon_stop(&D, SIGTERM);
    char extra[512];
    snprintf(extra, sizeof(extra), "group = nogroup\nallow_groups = root\n%s",
             base_config);
    cr_assert_eq(rd_daemon_write_config(&D, extra), 0);
    cr_assert_eq(rd_daemon_start(&D), 0);
    cr_expect_eq(as_nobody(nobody_in_the_socket_group_is_refused), 0);
    cr_expect(stats_say_draining(false), "nobody could not drain the host: %s",
              res.out);
}

Test(daemon, corrupted_segment_is_retired_and_replaced)
{
    stats_json();
    char before[32];
    const char *g = strstr(res.out, "\"generation\":\"");
    cr_assert(g != NULL);
    memcpy(before, g + 14, 16);
    before[16] = '\0';
    cr_assert_eq(rd_daemon_stop(&D, SIGTERM), 0);

    int fd = open(D.segment, O_RDWR);
    cr_assert(fd >= 0);
    char junk[4096];
    memset(junk, 0xab, sizeof(junk));
    cr_assert_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    close(fd);

    cr_assert_eq(rd_daemon_start(&D), 0, "the daemon must not refuse to start");
    stats_json();
    cr_expect(strstr(res.out, before) == NULL, "a new generation");
    cr_expect_eq(stat_of("payments", "cap"), 20, "configured upstreams again");
    child c;
    start_client(&c);
    ask(&c, "open payments", "ok shared=1");
    child_stop(&c);
    const char *log = daemon_log();
    cr_expect(strstr(log, "retiring segment") != NULL, "%s", log);
}

/* The slot of upstream @p name in the segment mapped by @p v. */
static seg_upstream *slot_named(seg_view *v, const char *name)
{
    for (uint32_t i = 0; i < v->upstream_capacity; i++)
        if (strcmp(v->upstreams[i].name, name) == 0 &&
            seg_ident_state(atomic_load(&v->upstreams[i].ident)) == SEG_ACTIVE)
            return &v->upstreams[i];
    cr_assert_fail("no active slot holds '%s'", name);
    return NULL;
}

static _Atomic uint64_t *heartbeat;
static uint64_t heartbeat_seen;
static bool heartbeat_moved(void *arg)
{
    (void)arg;
    return atomic_load(heartbeat) > heartbeat_seen;
}

/* The header says which daemon owns the segment and that it is alive:
 * what a tool reading the segment alone relies on. */
Test(daemon, the_segment_header_names_its_daemon_and_its_heartbeat_moves)
{
    int fd = open(D.segment, O_RDONLY);
    cr_assert(fd >= 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    cr_assert(map != MAP_FAILED);
    seg_view v;
    cr_assert_eq(retryd__segment_view(map, (size_t)st.st_size, &v), 0);

    cr_expect_eq(atomic_load(&v.hdr->daemon_pid), (uint64_t)D.pid);
    cr_expect_eq(atomic_load(&v.hdr->daemon_start_time),
                 retryd__process_start_time((uint64_t)D.pid));
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ms =
        (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
    cr_expect(v.hdr->created_unix_ms <= now_ms &&
                  v.hdr->created_unix_ms + 60000 > now_ms,
              "created %llu ms, now %llu ms",
              (unsigned long long)v.hdr->created_unix_ms,
              (unsigned long long)now_ms);
    /* The heartbeat is stamped every second on CLOCK_MONOTONIC. */
    heartbeat = &v.hdr->heartbeat_ns;
    heartbeat_seen = atomic_load(heartbeat);
    cr_expect(rd_wait_until(heartbeat_moved, NULL, 5000),
              "no heartbeat after %llu", (unsigned long long)heartbeat_seen);
    clock_gettime(CLOCK_MONOTONIC, &now);
    cr_expect_leq(atomic_load(heartbeat),
                  (uint64_t)now.tv_sec * 1000000000 + (uint64_t)now.tv_nsec);
    munmap(map, (size_t)st.st_size);
}

Test(daemon, damaged_slots_are_repaired_or_retired_on_adoption)
{
    child c;
    start_client(&c);
    ask(&c, "open payments", "ok shared=1");
    ask(&c, "open orders", "ok shared=1");
    ask(&c, "deposit 10", "ok"); /* into orders, the last opened */
    double orders_gen = stat_of("orders", "slot_generation");
    cr_assert_eq(rd_daemon_stop(&D, SIGTERM), 0);

    /* What another process (or a bit flip) could leave behind. */
    int fd = open(D.segment, O_RDWR);
    cr_assert(fd >= 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                     MAP_SHARED, fd, 0);
    close(fd);
    cr_assert(map != MAP_FAILED);
    seg_view v;
    cr_assert_eq(retryd__segment_view(map, (size_t)st.st_size, &v), 0);
    seg_upstream *pay = slot_named(&v, "payments");
    seg_upstream *ord = slot_named(&v, "orders");
    uint32_t pay_gen = seg_ident_generation(atomic_load(&pay->ident));
    uint32_t ord_gen = seg_ident_generation(atomic_load(&ord->ident));
    /* payments: 1000 tokens under a cap of 20, a refill stamp far ahead. */
    atomic_store(&pay->tokens, seg_token_word(pay_gen, 1000 * SEG_MICRO));
    atomic_store(&pay->last_refill_ns, UINT64_MAX / 2);
    uint64_t discarded_before =
        atomic_load(&pay->counters[SEG_C_DISCARDED_MICRO]);
    /* orders: a token word of another generation. */
    atomic_store(&ord->tokens, seg_token_word(ord_gen + 5, 10 * SEG_MICRO));

    cr_assert_eq(rd_daemon_start(&D), 0, "the daemon must adopt the rest");
    cr_expect_eq(stat_of("payments", "balance"), 20, "clamped to the cap");
    cr_expect_eq(atomic_load(&pay->counters[SEG_C_DISCARDED_MICRO]) -
                     discarded_before,
                 980 * SEG_MICRO, "what the clamp took is counted");
    cr_expect_lt(atomic_load(&pay->last_refill_ns), UINT64_MAX / 4,
                 "the refill stamp is back to now");
    /* orders was retired: the client's handle rebinds to a fresh slot, and
     * the 10 tokens of the damaged word are gone. */
    ask(&c, "withdraw 1", "granted 0 denied 1");
    cr_expect_gt(stat_of("orders", "slot_generation"), orders_gen);
    cr_expect_eq(stat_of("orders", "balance"), 0);
    ask(&c, "deposit 2", "ok");
    ask(&c, "withdraw 1", "granted 1 denied 0");
    child_stop(&c);
    munmap(map, (size_t)st.st_size);

    /* One warning line per repair, naming the upstream it was done to. */
    const char *log = daemon_log();
    cr_expect(line_with(log, "'payments' (slot", "clamped to it"), "%s", log);
    cr_expect(line_with(log, "'payments' (slot", "refill time in the future"),
              "%s", log);
    cr_expect(line_with(log, "'orders' (slot", "retired"), "%s", log);
}

static bool cap_is_31(void *arg)
{
    (void)arg;
    return cap_is("payments", 31);
}

Test(daemon, reload_keeps_the_paths_it_cannot_move)
{
    char moved[256], extra[512];
    snprintf(moved, sizeof(moved), "%s/moved.sock", D.runtime);
    snprintf(extra, sizeof(extra),
             "control_socket = %s\n"
             "[upstream payments]\nratio = 0.5\nmin_retries_per_sec = 0\n"
             "cap = 31\n",
             moved);
    cr_assert_eq(rd_daemon_write_config(&D, extra), 0);
    kill(D.pid, SIGHUP);
    /* The reload applies (cap 31) and the daemon still serves the socket it
     * listens on. */
    cr_assert(rd_wait_until(cap_is_31, NULL, 5000), "reload not applied");
    cr_expect_eq(rd_ctl(&D, &res, "drain", "on", NULL), 0, "%s", res.err);
    cr_expect_eq(access(moved, F_OK), -1);
    cr_assert_eq(rd_daemon_stop(&D, SIGTERM), 0);
    /* It removed what it created, and nothing else. */
    cr_expect_eq(access(D.control, F_OK), -1, "%s left behind", D.control);
    cr_expect_eq(access(D.stats, F_OK), -1, "%s left behind", D.stats);
    cr_expect_eq(access(moved, F_OK), -1, "%s was created", moved);
    const char *log = daemon_log();
    cr_expect(strstr(log, "change only at restart") != NULL, "%s", log);
}

static bool orders_cap_is_5(void *arg)
{
    (void)arg;
    return cap_is("orders", 5);
}

Test(daemon, reload_that_lowers_the_cap_clamps_the_balance)
{
    child c;
    start_client(&c);
    ask(&c, "open orders", "ok shared=1");
    ask(&c, "deposit 50", "ok"); /* ratio 1, cap 100: 50 tokens */
    cr_expect_eq(stat_of("orders", "balance"), 50);
    double discarded = stat_of("orders", "discarded_tokens");
    cr_assert_eq(rd_daemon_write_config(&D,
                                        "[upstream orders]\nratio = 1\n"
                                        "min_retries_per_sec = 0\ncap = 5\n"),
                 0);
    kill(D.pid, SIGHUP);
    cr_assert(rd_wait_until(orders_cap_is_5, NULL, 5000), "reload not applied");
    cr_expect_eq(stat_of("orders", "balance"), 5);
    cr_expect_eq(stat_of("orders", "discarded_tokens") - discarded, 45,
                 "the clamp counts what it took");
    /* No client can spend above the new cap. */
    ask(&c, "withdraw 50", "granted 5 denied 45");
    child_stop(&c);
}

/* Writes Hello frames as fast as the daemon takes them, reads and drops
 * the replies, counting their bytes in *@p got; never returns. */
static _Noreturn void flood(_Atomic long *got)
{
    static const unsigned char hello[] = {0, 0, 0, 4, 0x0a, 2, 0x08, 2};
    unsigned char frames[512 * sizeof(hello)], sink[65536];
    for (size_t i = 0; i < sizeof(frames); i += sizeof(hello))
        memcpy(frames + i, hello, sizeof(hello));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, D.control);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0 || (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
                   errno != EINPROGRESS))
        _exit(1);
    size_t off = 0; /* into the endless stream of frames */
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT};
        if (poll(&p, 1, -1) < 0)
            _exit(1);
        if (p.revents & (POLLHUP | POLLERR))
            _exit(0);
        if (p.revents & POLLOUT) {
            ssize_t n =
                send(fd, frames + off, sizeof(frames) - off, MSG_NOSIGNAL);
            if (n > 0)
                off = (off + (size_t)n) % sizeof(frames);
        }
        if (p.revents & POLLIN) {
            ssize_t n = read(fd, sink, sizeof(sink));
            if (n == 0)
                _exit(0);
            if (n > 0)
                atomic_fetch_add(got, n);
        }
    }
}

static _Atomic long *flood_got;
static bool flooding(void *arg)
{
    (void)arg;
    return atomic_load(flood_got) > 64 * 1024;
}

Test(daemon, a_flooding_client_cannot_starve_the_others)
{
    flood_got = mmap(NULL, sizeof(*flood_got), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(flood_got != MAP_FAILED);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0)
        flood(flood_got);
    cr_assert(rd_wait_until(flooding, NULL, 5000), "the flood did not start");

    /* Another client on the control socket, then a signal, are each served
     * within retrydctl's and the harness's bounds while the flood goes on. */
    cr_expect_eq(rd_ctl(&D, &res, "drain", "on", NULL), 0,
                 "drain under a flood: %s", res.err);
    long before = atomic_load(flood_got);
    cr_expect_eq(rd_daemon_stop(&D, SIGTERM), 0, "clean exit under a flood");
    cr_expect_gt(before, 64 * 1024);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

#define CHURN_UPSTREAMS 200
#define CHURN_MS 8000

/* A configuration of CHURN_UPSTREAMS upstreams, all with cap @p cap,
 * replacing the file at once (the daemon may be reading it). */
static void write_churn_config(int cap)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s.new", D.config);
    FILE *f = fopen(tmp, "we");
    cr_assert(f != NULL);
    fprintf(f, "[retryd]\nruntime_dir = %s\n", D.runtime);
    for (int i = 0; i < CHURN_UPSTREAMS; i++)
        fprintf(f, "[upstream churn-%03d]\ncap = %d\n", i, cap);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(rename(tmp, D.config), 0);
}

/* Fetches stats without pause until the daemon goes away. */
static _Noreturn void stats_reader(_Atomic long *replies)
{
    static unsigned char body[1 << 20];
    for (;;) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strcpy(sa.sun_path, D.stats);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
            _exit(0);
        unsigned char hdr[4] = {0, 0, 0, 0}; /* an empty StatsRequest */
        if (send(fd, hdr, 4, MSG_NOSIGNAL) != 4)
            _exit(0);
        size_t got = 0, want = 4;
        while (got < want) {
            ssize_t n = read(fd, got < 4 ? hdr + got : body + got - 4,
                             got < 4 ? 4 - got : want - got);
            if (n <= 0)
                _exit(0);
            got += (size_t)n;
            if (got == 4)
                want = 4 + ((size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 |
                            (size_t)hdr[2] << 8 | hdr[3]);
            if (want > sizeof(body))
                _exit(2);
        }
        close(fd);
        atomic_fetch_add(replies, 1);
    }
}

/* The daemon's log, read on from where the last call stopped. */
static FILE *churn_log;
static bool reloaded(void *arg)
{
    (void)arg;
    char line[512];
    long at = ftell(churn_log);
    clearerr(churn_log);
    while (fgets(line, sizeof(line), churn_log) != NULL) {
        if (strchr(line, '\n') == NULL) {
            fseek(churn_log, at, SEEK_SET); /* the rest is being written */
            return false;
        }
        at = ftell(churn_log);
        if (strstr(line, "configuration reloaded") != NULL)
            return true;
    }
    return false;
}

static long long ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The stats thread reads registry entries while reloads replace every one
 * of them (the old ones freed after RCU readers). Under AddressSanitizer a
 * reply that still pointed into a freed entry would abort the daemon; the
 * race is timing-dependent, so this is a stress test, not a proof.
 */
Test(daemon, stats_while_reloads_replace_every_entry)
{
    _Atomic long *replies = mmap(NULL, sizeof(*replies), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(replies != MAP_FAILED);
    churn_log = fopen(D.log, "re");
    cr_assert(churn_log != NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0)
        stats_reader(replies);
    int rounds = 0;
    for (long long end = ms_now() + CHURN_MS; ms_now() < end; rounds++) {
        write_churn_config(10 + rounds % 2);
        kill(D.pid, SIGHUP);
        if (!rd_wait_until(reloaded, NULL, 5000)) {
            char why[256] = "";
            rewind(churn_log);
            while (fgets(why, sizeof(why), churn_log) != NULL &&
                   strstr(why, "ERROR: AddressSanitizer") == NULL)
                ;
            siginfo_t si = {0};
            waitid(P_PID, (id_t)D.pid, &si, WEXITED | WNOHANG | WNOWAIT);
            cr_assert_fail("round %d: no reload (daemon %s): %s", rounds,
                           si.si_pid == 0 ? "alive" : "gone", why);
        }
    }
    long n = atomic_load(replies);
    int code = rd_daemon_stop(&D, SIGTERM);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fclose(churn_log);
    cr_expect_gt(n, 10, "stats were served throughout");
    cr_expect_eq(code, 0, "clean exit after %d reloads", rounds);
}

Test(daemon, a_lookup_request_is_unknown)
{
    /* Hello, then what was Lookup (field 4) of "payments": no client ever
     * sent it, and the daemon no longer serves it. */
    static const unsigned char frames[] = {
        0,    0,  0,    4, 0x0a, 2,   0x08, 2,   0,   0,   0,   12,
        0x22, 10, 0x0a, 8, 'p',  'a', 'y',  'm', 'e', 'n', 't', 's'};
    char out[512];
    int fd = raw_connect(D.control);
    send_all(fd, frames, sizeof(frames));
    ssize_t r;
    size_t got = 0;
    while ((r = read(fd, out + got, sizeof(out) - got)) > 0)
        got += (size_t)r;
    close(fd);
    cr_expect_eq(r, 0, "closed by the daemon, not left open");
    cr_expect(memmem(out, got, "unknown request", 15) != NULL);
}

/* SPDX-License-Identifier: MIT */
/*
 * What docs/daemon.md promises operators, against a real retryd: one daemon
 * per runtime directory, a stats socket that cannot change a budget, slots
 * of clients that died while the daemon was down, SIGINT, the environment
 * variables retrydctl reads, `stats --processes`, and the Prometheus
 * attempts family.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "retryd/retryd.h"
#include "run.h"

/* Floor 0 keeps balances exact: nothing refills behind the test's back. */
static const char *const base_config =
    "[upstream payments]\nratio = 0.5\nmin_retries_per_sec = 0\ncap = 20\n"
    "[upstream orders]\nratio = 1\nmin_retries_per_sec = 0\ncap = 100\n";

#include "daemon_fixture.h"

TestSuite(ops, .init = daemon_setup, .fini = daemon_teardown, .timeout = 60);

/* --- helpers ------------------------------------------------------------- */

/* Read exactly @p n bytes (within the socket's read bound). */
static void recv_exactly(int fd, unsigned char *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, buf + got, n - got);
        cr_assert_gt(r, 0, "reply cut short after %zu of %zu bytes: %s", got, n,
                     r < 0 ? strerror(errno) : "EOF");
        got += (size_t)r;
    }
}

/* Read one length-prefixed reply frame and drop it. */
static void recv_frame(int fd)
{
    unsigned char hdr[4], body[4096];
    recv_exactly(fd, hdr, sizeof(hdr));
    size_t len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 |
                 (size_t)hdr[2] << 8 | hdr[3];
    cr_assert_leq(len, sizeof(body), "a %zu-byte reply", len);
    recv_exactly(fd, body, len);
}

/* ControlRequest frames (proto/retryd.proto), each a 4-byte big-endian
 * length and the message: Hello{protocol_version 2}, Drain{on true},
 * Retire{name "orders"}. */
static const unsigned char hello[] = {0, 0, 0, 4, 0x0a, 2, 0x08, 2};
static const unsigned char drain_on[] = {0, 0, 0, 4, 0x2a, 2, 0x08, 1};
static const unsigned char retire_orders[] = {0, 0,   0,   10,  0x32, 8,   0x0a,
                                              6, 'o', 'r', 'd', 'e',  'r', 's'};

/* Send @p frame (after a hello when @p with_hello) to the stats socket,
 * and read whatever comes back until the daemon closes: it serves one
 * request per connection, whatever the request says. */
static void to_stats_socket(const unsigned char *frame, size_t n,
                            bool with_hello)
{
    unsigned char out[1 << 16], both[sizeof(hello) + 64];
    size_t got = 0, len = 0;
    ssize_t r;
    cr_assert_leq(n, sizeof(both) - sizeof(hello));
    /* One send: the daemon may answer the hello and close before a
     * second send, which would then fail with EPIPE. */
    if (with_hello) {
        memcpy(both, hello, sizeof(hello));
        len = sizeof(hello);
    }
    memcpy(both + len, frame, n);
    len += n;
    int fd = raw_connect(D.stats);
    send_all(fd, both, len);
    while ((r = read(fd, out, sizeof(out))) > 0)
        got += (size_t)r;
    int why = r < 0 ? errno : 0;
    close(fd);
    /* A close with our second frame unread arrives as a reset. */
    cr_expect(r == 0 || (with_hello && why == ECONNRESET),
              "the stats socket did not close the connection: %s",
              strerror(why));
    cr_expect_gt(got, 4, "a reply (statistics or an error) came first");
}

/* Hello then @p frame on the control socket, both replies read: the
 * daemon has acted on the request when this returns. */
static void to_control_socket(const unsigned char *frame, size_t n)
{
    int fd = raw_connect(D.control);
    send_all(fd, hello, sizeof(hello));
    recv_frame(fd);
    send_all(fd, frame, n);
    recv_frame(fd);
    close(fd);
}

/* --- the tests ----------------------------------------------------------- */

Test(ops, a_second_daemon_on_the_same_runtime_directory_exits)
{
    char *argv[] = {RETRYD_PATH, "--config", D.config, NULL};
    run_result second;
    cr_assert_eq(run_program(argv, 10000, &second), 0);
    cr_expect_gt(second.exit_code, 0,
                 "exit status %d (a negative one is the "
                 "signal that ended it at the bound)",
                 second.exit_code);
    cr_expect(strstr(second.err, "retryd.lock") != NULL &&
                  strstr(second.err, "another retryd runs here") != NULL,
              "%s", second.err);
    /* The first one still serves both sockets, and its segment. */
    child c;
    start_client(&c);
    ask(&c, "attached", "attached 1");
    ask(&c, "open payments", "ok shared=1");
    ask(&c, "deposit 2", "ok");
    cr_expect_eq(stat_of("payments", "deposits"), 2);
    cr_expect_eq(rd_ctl(&D, &res, "drain", "on", NULL), 0, "%s", res.err);
    ask(&c, "draining", "draining 1");
    child_stop(&c);
}

Test(ops, the_stats_socket_cannot_drain_or_retire)
{
    child c;
    start_client(&c);
    ask(&c, "open orders", "ok shared=1");
    ask(&c, "deposit 3", "ok");
    double gen = stat_of("orders", "slot_generation");

    to_stats_socket(drain_on, sizeof(drain_on), false);
    to_stats_socket(retire_orders, sizeof(retire_orders), false);
    to_stats_socket(drain_on, sizeof(drain_on), true);
    to_stats_socket(retire_orders, sizeof(retire_orders), true);
    cr_expect(stats_say_draining(false), "drained through the stats socket");
    cr_expect_eq(stat_of("orders", "slot_generation"), gen,
                 "retired through the stats socket");
    cr_expect_eq(stat_of("orders", "balance"), 3);
    ask(&c, "draining", "draining 0");
    ask(&c, "withdraw 1", "granted 1 denied 0");

    /* The same frames on the control socket do what they say: the checks
     * above could see it. */
    to_control_socket(drain_on, sizeof(drain_on));
    cr_expect(stats_say_draining(true), "%s", res.out);
    to_control_socket(retire_orders, sizeof(retire_orders));
    stats_json();
    cr_expect(strstr(res.out, "\"name\":\"orders\"") == NULL,
              "orders was not retired: %s", res.out);
    child_stop(&c);
}

Test(ops, a_client_that_died_while_the_daemon_was_down_loses_its_slot)
{
    child dead, live;
    char dead_at[64], live_at[64];
    start_client(&dead);
    start_client(&live);
    pid_anchor(dead_at, sizeof(dead_at), (long)dead.pid);
    pid_anchor(live_at, sizeof(live_at), (long)live.pid);
    ask(&dead, "open payments", "ok shared=1");
    ask(&dead, "deposit 4", "ok");
    ask(&live, "open payments", "ok shared=1");
    ask(&live, "deposit 6", "ok");
    cr_assert_eq(daemon_stat("attached_processes"), 2);
    double live_slot = number_in_res(live_at, "slot");

    cr_assert_eq(rd_daemon_stop(&D, SIGTERM), 0);
    cr_assert_eq(kill(dead.pid, SIGKILL), 0);
    cr_assert_eq(child_stop(&dead), -SIGKILL, "reaped: gone for good");
    cr_assert_eq(rd_daemon_start(&D), 0);

    /* Adoption is done before the daemon says it is ready. */
    cr_expect_eq(daemon_stat("attached_processes"), 1);
    cr_expect(strstr(res.out, dead_at) == NULL, "the dead client's slot: %s",
              res.out);
    cr_expect_eq(number_in_res(live_at, "slot"), live_slot);
    cr_expect_eq(number_in_res(live_at, "deposits"), 6);
    cr_expect_eq(stat_of("payments", "deposits"), 10,
                 "the dead client's counts were folded into the upstream");
    const char *log = daemon_log();
    cr_expect(strstr(log, "adopted 1 live processes, freed 1 slots") != NULL,
              "%s", log);
    /* The live one spends on in the slot it kept. */
    ask(&live, "deposit 1", "ok");
    ask(&live, "shared", "shared 1");
    stats_json();
    cr_expect_eq(number_in_res(live_at, "deposits"), 7);
    child_stop(&live);
}

Test(ops, sigint_stops_cleanly_and_keeps_the_segment)
{
    cr_assert_eq(rd_daemon_stop(&D, SIGINT), 0, "exit status 0 on SIGINT");
    cr_expect(access(D.control, F_OK) < 0 && errno == ENOENT, "%s left behind",
              D.control);
    cr_expect(access(D.stats, F_OK) < 0 && errno == ENOENT, "%s left behind",
              D.stats);
    cr_expect_eq(access(D.segment, F_OK), 0, "the segment stays");
    const char *log = daemon_log();
    cr_expect(strstr(log, "signal 2: stopping") != NULL, "%s", log);
}

Test(ops, retrydctl_takes_the_sockets_from_the_environment)
{
    char *stats[] = {RETRYDCTL_PATH, "stats", "--json", NULL};
    char *drain[] = {RETRYDCTL_PATH, "drain", "on", NULL};
    char nowhere[256];
    run_result r;

    cr_assert_eq(setenv("RETRYD_STATS_SOCKET", D.stats, 1), 0);
    cr_assert_eq(setenv("RETRYD_CONTROL_SOCKET", D.control, 1), 0);
    cr_assert_eq(run_program(stats, 20000, &r), 0);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cr_expect(strstr(r.out, "\"name\":\"payments\"") != NULL, "%s", r.out);
    cr_assert_eq(run_program(drain, 20000, &r), 0);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cr_expect(stats_say_draining(true), "%s", res.out);

    /* Paths that lead nowhere are the ones it tries. */
    snprintf(nowhere, sizeof(nowhere), "%s/nowhere.sock", D.dir);
    cr_assert_eq(setenv("RETRYD_STATS_SOCKET", nowhere, 1), 0);
    cr_assert_eq(setenv("RETRYD_CONTROL_SOCKET", nowhere, 1), 0);
    cr_assert_eq(run_program(stats, 20000, &r), 0);
    cr_expect_eq(r.exit_code, 70);
    cr_expect(strstr(r.err, nowhere) != NULL, "%s", r.err);
    cr_assert_eq(run_program(drain, 20000, &r), 0);
    cr_expect_eq(r.exit_code, 70);
    cr_expect(strstr(r.err, nowhere) != NULL, "%s", r.err);
}

Test(ops, stats_processes_lists_an_attached_process)
{
    child c;
    char row[32];
    start_client(&c);
    ask(&c, "open payments", "ok shared=1");
    ask(&c, "deposit 3", "ok");
    ask(&c, "withdraw 1", "granted 1 denied 0");
    snprintf(row, sizeof(row), "\n%d ", (int)c.pid);

    cr_assert_eq(rd_ctl(&D, &res, "stats", "--processes", NULL), 0, "%s",
                 res.err);
    const char *line = strstr(res.out, row);
    cr_assert(line != NULL, "no row for pid %d in %s", (int)c.pid, res.out);
    unsigned pid, uid, slot;
    unsigned long deposits, granted;
    cr_assert_eq(sscanf(line, "%u %u %u %lu %lu", &pid, &uid, &slot, &deposits,
                        &granted),
                 5, "%s", line);
    cr_expect_eq(uid, (unsigned)getuid());
    cr_expect_eq(deposits, 3);
    cr_expect_eq(granted, 1);

    /* Without the option the table has no process rows. */
    cr_assert_eq(rd_ctl(&D, &res, "stats", NULL), 0, "%s", res.err);
    cr_expect(strstr(res.out, row) == NULL, "%s", res.out);
    child_stop(&c);
}

Test(ops, prometheus_counts_attempts_by_evidence)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    retryd_host *h;
    retryd_upstream *up;
    cr_assert_eq(retryd_host_open(&o, &h), 0);
    cr_assert_eq(retryd_upstream_open(h, "payments", NULL, &up), 0);
    cr_assert(retryd_upstream_shared(up));
    retryd_upstream_record(up, NULL, RETRYD_EVIDENCE_RESPONSE_RECEIVED);
    retryd_upstream_record(up, NULL, RETRYD_EVIDENCE_RESPONSE_RECEIVED);
    retryd_upstream_record(up, NULL, RETRYD_EVIDENCE_NOT_SENT);

    cr_assert_eq(rd_ctl(&D, &res, "stats", "--prometheus", NULL), 0, "%s",
                 res.err);
    static const char *const want[] = {
        "# HELP retryd_upstream_attempts_total ",
        "# TYPE retryd_upstream_attempts_total counter\n",
        "\nretryd_upstream_attempts_total{upstream=\"payments\","
        "evidence=\"response_received\"} 2\n",
        "\nretryd_upstream_attempts_total{upstream=\"payments\","
        "evidence=\"not_sent\"} 1\n",
        "\nretryd_upstream_attempts_total{upstream=\"payments\","
        "evidence=\"sent_no_response\"} 0\n",
        "\nretryd_upstream_attempts_total{upstream=\"orders\","
        "evidence=\"response_received\"} 0\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        cr_expect(strstr(res.out, want[i]) != NULL, "no '%s' in %s", want[i],
                  res.out);
    retryd_host_close(h);
}

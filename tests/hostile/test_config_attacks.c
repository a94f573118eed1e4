/* SPDX-License-Identifier: MIT */
/*
 * Hostile and broken configuration files, run through the real daemon
 * (retryd --check-config, and a running daemon's SIGHUP reload): each is a
 * clear error naming the file (and the line where there is one), read in
 * bounded time and memory; a reload onto one keeps the running
 * configuration and the daemon keeps serving.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "run.h"

static run_result res;
static char dir[] = "/tmp/retryd-hostile-conf-XXXXXX";

static void setup(void)
{
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(config_attacks, .init = setup, .fini = teardown, .timeout = 60);

/* retryd --config @p path --check-config, bounded at 10 s. */
static void check_config(const char *path)
{
    char copy[512];
    snprintf(copy, sizeof(copy), "%s", path);
    char *argv[] = {RETRYD_PATH, "--config", copy, "--check-config", NULL};
    cr_assert_eq(run_program(argv, 10000, &res), 0);
}

static void expect_refused(const char *path, const char *what)
{
    check_config(path);
    cr_expect_eq(res.exit_code, 78, "%s: exit %d, stderr %s", path,
                 res.exit_code, res.err);
    cr_expect(strstr(res.err, path) != NULL, "names the file: %s", res.err);
    cr_expect(strstr(res.err, what) != NULL, "expected '%s' in '%s'", what,
              res.err);
}

static char *write_file(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
    return path;
}

Test(config_attacks, a_directory_is_not_an_empty_valid_file)
{
    expect_refused(dir, "is a directory");
}

Test(config_attacks, an_endless_device_is_refused_at_once)
{
    /* Before: /dev/zero was read until memory ran out. */
    expect_refused("/dev/zero", "NUL byte in the file");
}

Test(config_attacks, a_file_over_one_mib_is_refused)
{
    char *path = write_file("big.conf", "");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 70000; i++) /* 16-byte comment lines: 1.1 MB */
        fputs("; padding line\n", f);
    cr_assert_eq(fclose(f), 0);
    expect_refused(path, "file larger than 1 MiB");
}

Test(config_attacks, an_unreadable_file_is_an_error_not_empty)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to run the daemon as another user");
    char *path = write_file("secret.conf", "[defaults]\ncap = 5\n");
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(chmod(dir, 0755), 0);
    /* The daemon as nobody, who may not read the root-owned file. */
    int out[2];
    cr_assert_eq(pipe(out), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 2);
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(99);
        execl(RETRYD_PATH, RETRYD_PATH, "--config", path, "--check-config",
              (char *)NULL);
        _exit(98);
    }
    close(out[1]);
    char err[512] = "";
    ssize_t n = read(out[0], err, sizeof(err) - 1);
    err[n > 0 ? n : 0] = '\0';
    close(out[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 78, "status %d: %s",
              status, err);
    cr_expect(strstr(err, "Permission denied") != NULL, "%s", err);
}

Test(config_attacks, repeated_sections_and_keys_name_both_lines)
{
    expect_refused(write_file("dup-key.conf", "[defaults]\nratio = 1\n"
                                              "cap = 5\nratio = 2\n"),
                   ":4: [defaults] ratio: set twice (first at line 2)");
    expect_refused(
        write_file("dup-section.conf", "[upstream pay]\ncap = 5\n"
                                       "[retryd]\nlog_level = info\n"
                                       "[upstream pay]\ncap = 500\n"),
        ":6: [upstream pay] cap: section repeated (first at line 1)");
    expect_refused(write_file("dup-daemon.conf",
                              "[retryd]\nprocess_capacity = 8\n"
                              "process_capacity = 9000\n"),
                   ":3: [retryd] process_capacity: set twice");
}

Test(config_attacks, numbers_are_decimal_only)
{
    static const char *const bad[] = {"0x10", "1e3", "inf", "+5",   " 5x",
                                      "5.",   ".5",  "-0",  "1_000"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[64];
        snprintf(text, sizeof(text), "[defaults]\ncap = %s\n", bad[i]);
        expect_refused(write_file("num.conf", text), "[defaults] cap:");
        snprintf(text, sizeof(text), "[retryd]\nprocess_capacity = %s\n",
                 bad[i]);
        expect_refused(write_file("num.conf", text), "process_capacity:");
    }
    check_config(write_file("ok.conf", "[defaults]\ncap = 10.5\nratio = "
                                       "0.25\n[retryd]\nprocess_capacity = "
                                       "0016\n"));
    cr_expect_eq(res.exit_code, 0, "decimal numbers pass: %s", res.err);
}

Test(config_attacks, check_config_checks_the_upstream_capacity)
{
    expect_refused(write_file("cap.conf", "[retryd]\nupstream_capacity = 2\n"
                                          "[upstream a]\ncap = 2\n"
                                          "[upstream b]\ncap = 2\n"
                                          "[upstream c]\ncap = 2\n"),
                   "3 upstreams configured, more than upstream_capacity (2)");
    check_config(write_file("cap.conf", "[retryd]\nupstream_capacity = 2\n"
                                        "[upstream a]\ncap = 2\n"
                                        "[upstream b]\ncap = 2\n"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
}

/* Whether the daemon's log holds @p arg's text yet. */
static rd_daemon D;
static bool log_has(void *arg)
{
    static char text[1 << 16];
    ssize_t n = rd_daemon_read_log(&D, text, sizeof(text));
    return n > 0 && strstr(text, arg) != NULL;
}

/* A running daemon whose file is replaced by a directory, then by a file
 * with a repeated key: each SIGHUP is refused and logged, the daemon keeps
 * its configuration (the upstream it had stays, with its cap) and answers. */
Test(config_attacks, a_reload_onto_a_broken_file_keeps_the_running_one)
{
    cr_assert_eq(rd_daemon_init(&D, "[upstream keep]\ncap = 7\n"), 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "see %s", D.log);
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--json", NULL), 0);
    cr_assert(strstr(res.out, "\"keep\"") != NULL, "%s", res.out);

    cr_assert_eq(unlink(D.config), 0);
    cr_assert_eq(mkdir(D.config, 0700), 0);
    cr_assert_eq(kill(D.pid, SIGHUP), 0);
    cr_expect(rd_wait_until(log_has, "is a directory", 5000),
              "the refusal of a directory is logged");
    cr_assert_eq(rmdir(D.config), 0);
    FILE *f = fopen(D.config, "w");
    cr_assert_not_null(f);
    fputs("[upstream keep]\ncap = 7\ncap = 700\n", f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(kill(D.pid, SIGHUP), 0);
    cr_expect(rd_wait_until(log_has, "set twice (first at line 2)", 5000),
              "the refusal of a repeated key is logged");

    cr_assert_eq(rd_ctl(&D, &res, "stats", "--json", NULL), 0,
                 "the daemon still answers");
    cr_expect(strstr(res.out, "\"keep\"") != NULL, "%s", res.out);
    cr_expect_eq(rd_json_number(res.out, "\"keep\"", "cap"), 7,
                 "the running cap, not 700: %s", res.out);
    rd_daemon_cleanup(&D);
}

/* The limits a neighbour meets are keys like any other: decimal, in
 * range, set once; one bounded by another may not exceed it; and the
 * defaults are the documented ones (--check-config passes without any). */
Test(config_attacks, socket_and_log_limits_are_strict_keys)
{
    static const struct {
        const char *key, *too_low, *too_high, *range;
    } k[] = {
        {"process_slots_per_uid", "0", "65537", "1..65536"},
        {"connections_unattached", "1", "1025", "2..1024"},
        {"connections_per_uid", "0", "1025", "1..1024"},
        {"connections_per_process", "0", "1025", "1..1024"},
        {"hello_timeout_ms", "9", "60001", "10..60000"},
        {"frame_timeout_ms", "9", "60001", "10..60000"},
        {"idle_timeout_ms", "99", "3600001", "100..3600000"},
        {"write_timeout_ms", "9", "60001", "10..60000"},
        {"stats_request_timeout_ms", "9", "60001", "10..60000"},
        {"stats_reply_timeout_ms", "9", "600001", "10..600000"},
        {"metrics_request_timeout_ms", "9", "60001", "10..60000"},
        {"metrics_reply_timeout_ms", "999", "600001", "1000..600000"},
        {"log_limit_lines", "0", "1001", "1..1000"},
        {"log_limit_interval_s", "0", "3601", "1..3600"},
    };
    /* Each range's upper end, which every key takes once. */
    const char *ok;
    char text[256], want[128];
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        const char *bad[] = {k[i].too_low, k[i].too_high, "0x10", "-5", ""};
        for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
            snprintf(text, sizeof(text), "[retryd]\n%s = %s\n", k[i].key,
                     bad[b]);
            snprintf(want, sizeof(want), ":2: [retryd] %s: '%s' is not in %s",
                     k[i].key, bad[b], k[i].range);
            expect_refused(write_file("limit.conf", text), want);
        }
        ok = strstr(k[i].range, "..") + 2;
        snprintf(text, sizeof(text), "[retryd]\n%s = %s\n%s = %s\n", k[i].key,
                 ok, k[i].key, ok);
        snprintf(want, sizeof(want),
                 ":3: [retryd] %s: set twice (first at "
                 "line 2)",
                 k[i].key);
        expect_refused(write_file("limit.conf", text), want);
    }
    expect_refused(write_file("limit.conf", "[retryd]\nprocess_capacity = 8\n"
                                            "process_slots_per_uid = 9\n"),
                   ":3: [retryd] process_slots_per_uid: 9 is more than "
                   "process_capacity (8)");
    expect_refused(write_file("limit.conf",
                              "[retryd]\nconnections_per_uid = 40\n"
                              "connections_unattached = 32\n"),
                   ":2: [retryd] connections_per_uid: 40 is more than "
                   "connections_unattached (32)");
    expect_refused(write_file("limit.conf",
                              "[retryd]\nconnections_per_process = 9\n"
                              "connections_per_uid = 8\n"),
                   ":2: [retryd] connections_per_process: 9 is more than "
                   "connections_per_uid (8)");
    check_config(
        write_file("limit.conf",
                   "[retryd]\nprocess_capacity = 4\nprocess_slots_per_uid = 4\n"
                   "connections_unattached = 1024\nconnections_per_uid = 1\n"
                   "connections_per_process = 1\nhello_timeout_ms = 60000\n"
                   "frame_timeout_ms = 10\nidle_timeout_ms = 100\n"
                   "write_timeout_ms = 10\nlog_limit_lines = 1000\n"
                   "log_limit_interval_s = 3600\n"
                   "stats_request_timeout_ms = 10\n"
                   "stats_reply_timeout_ms = 600000\n"
                   "metrics_request_timeout_ms = 60000\n"
                   "metrics_reply_timeout_ms = 1000\n"));
    cr_expect_eq(res.exit_code, 0, "every key at an end of its range: %s",
                 res.err);
}

/* An [upstream NAME] section without keys is an upstream of [defaults]
 * (issue 23: it was silently dropped), first, between others and last;
 * one with a key still takes it. */
Test(config_attacks, empty_upstream_sections_are_registered_with_defaults)
{
    const char *text = "[retryd]\n[defaults]\ncap = 42\n"
                       "[upstream first]\n"
                       "[upstream keyed]\ncap = 7\n"
                       "; a comment is no key\n[upstream between]\n"
                       "[upstream last]\n";
    check_config(write_file("empty.conf", text));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect(strstr(res.out, "(4 upstreams configured)") != NULL, "%s",
              res.out);

    cr_assert_eq(rd_daemon_init(&D, "[defaults]\ncap = 42\n"
                                    "[upstream first]\n"
                                    "[upstream keyed]\ncap = 7\n"
                                    "[upstream between]\n"
                                    "[upstream last]\n"),
                 0);
    cr_assert_eq(rd_daemon_start(&D), 0, "see %s", D.log);
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--json", NULL), 0);
    const char *names[] = {"first", "between", "last"};
    for (size_t i = 0; i < 3; i++) {
        char anchor[64];
        snprintf(anchor, sizeof(anchor), "\"name\":\"%s\"", names[i]);
        cr_expect_eq(rd_json_number(res.out, anchor, "cap"), 42, "%s: %s",
                     names[i], res.out);
    }
    cr_expect_eq(rd_json_number(res.out, "\"name\":\"keyed\"", "cap"), 7, "%s",
                 res.out);
    rd_daemon_cleanup(&D);
}

/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier's login (docs/fleet.md), against a real Redis with ACL
 * users: a right password joins; a wrong one, an ACL that refuses the
 * fleet's keys or one of its commands, a missing password, are each a
 * clear error naming Redis's refusal, at the start (exit 78, as a mistake
 * in the file), from --check-config, and at a reload (refused, the
 * running configuration and its link kept). A Redis that does not answer
 * at the start is no error: the daemon starts on its host's own budgets
 * and joins once Redis answers. And the [fleet] section's own mistakes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "metrics_http.h"
#include "redis.h"
#include "run.h"

static rd_redis redis;
static rd_daemon D;
static run_result res;

/* Three users: fleet may do it all on the fleet's keys; nokeys only on
 * others; nocmd everything but HINCRBY. Nobody gets in without a login. */
static const char *const acl[] = {
    "--user",   "fleet",  "on",      ">right", "~retryd:*", "+@all",
    "--user",   "nokeys", "on",      ">right", "~other:*",  "+@all",
    "--user",   "nocmd",  "on",      ">right", "~*",        "+@all",
    "-hincrby", "--user", "default", "off",    NULL};

static void setup(void)
{
    if (!rd_redis_installed())
        cr_skip_test("redis-server is not installed (Debian: redis-server, "
                     "deploy/install-deps.sh installs it)");
    cr_assert_eq(rd_redis_start(&redis, 0, acl), 0, "redis: see %s", redis.log);
}

static void teardown(void)
{
    rd_daemon_cleanup(&D);
    rd_redis_cleanup(&redis);
}

TestSuite(fleet_login, .init = setup, .fini = teardown, .timeout = 90);

/* A password file in D's directory holding @p line, mode @p mode; its
 * path. */
static const char *secret(const char *line, mode_t mode)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/fleet.secret", D.dir);
    FILE *f = fopen(path, "we");
    cr_assert(f != NULL);
    fprintf(f, "%s\n", line);
    fclose(f);
    cr_assert_eq(chmod(path, mode), 0);
    return path;
}

/* D's configuration: a [fleet] reaching @p addr with @p password_file
 * (NULL: none), and an upstream in the fleet. */
static void configure(const char *addr, const char *password_file)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "[fleet]\nredis = %s\n%s%s%sname = login\nsync_interval = 200ms\n"
             "[upstream api]\nfleet_min_retries_per_sec = 10\n",
             addr, password_file ? "password_file = " : "",
             password_file ? password_file : "", password_file ? "\n" : "");
    cr_assert_eq(rd_daemon_write_config(&D, text), 0);
}

static void init(void)
{
    cr_assert_eq(rd_daemon_init(&D, NULL), 0);
}

static const char *log_text(void)
{
    static char text[1 << 16];
    cr_assert_geq(rd_daemon_read_log(&D, text, sizeof(text)), 0);
    return text;
}

/* The daemon refuses to start: exit 78, @p want in its log. */
static void refused_at_start(const char *want)
{
    cr_assert_eq(rd_daemon_start(&D), -ECHILD, "the daemon started: %s",
                 log_text());
    const char *log = log_text();
    cr_expect(strstr(log, "[fleet] redis") != NULL, "%s", log);
    cr_expect(strstr(log, want) != NULL, "'%s' not in: %s", want, log);
}

static bool state_is(const char *state)
{
    char want[64];
    snprintf(want, sizeof(want), "\"fleet\":{\"state\":\"%s\"", state);
    return rd_ctl(&D, &res, "stats", "--json", NULL) == 0 &&
           strstr(res.out, want) != NULL;
}

static bool connected(void *arg)
{
    (void)arg;
    return state_is("connected");
}

Test(fleet_login, the_right_password_joins)
{
    init();
    configure(redis.addr, secret("fleet right", 0600));
    cr_assert_eq(rd_daemon_start(&D), 0, "%s", log_text());
    cr_expect(rd_wait_until(connected, NULL, 10000), "%s", res.out);
    cr_expect(strstr(log_text(), "right") == NULL,
              "the password appears in the log");
}

Test(fleet_login, a_wrong_password_stops_the_start)
{
    init();
    configure(redis.addr, secret("fleet wrong", 0600));
    refused_at_start("refused the login of user 'fleet': WRONGPASS");
}

Test(fleet_login, an_acl_without_the_fleets_keys_stops_the_start)
{
    init();
    configure(redis.addr, secret("nokeys right", 0600));
    refused_at_start("NOPERM");
}

Test(fleet_login, an_acl_without_a_command_stops_the_start)
{
    init();
    configure(redis.addr, secret("nocmd right", 0600));
    refused_at_start("NOPERM");
    cr_expect(strstr(log_text(), "hincrby") != NULL, "%s", log_text());
}

Test(fleet_login, no_password_where_redis_wants_one_stops_the_start)
{
    init();
    configure(redis.addr, NULL);
    refused_at_start("NOAUTH");
}

static int check_config(void)
{
    char *argv[] = {RETRYD_PATH, "--config", D.config, "--check-config", NULL};
    cr_assert_eq(run_program(argv, 20000, &res), 0);
    return res.exit_code;
}

/* A loopback port nothing listens on, held: the socket bound to it
 * (never listening: a connect is refused) stays open in *@p ret_fd, so no
 * other test's server can take the port until the caller closes it. */
static int dead_port(int *ret_fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, len), 0, "%s",
                 strerror(errno));
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *ret_fd = fd;
    return ntohs(a.sin_port);
}

Test(fleet_login, check_config_tries_the_login_where_it_can)
{
    init();
    configure(redis.addr, secret("fleet wrong", 0600));
    cr_expect_eq(check_config(), 78, "%s%s", res.out, res.err);
    cr_expect(strstr(res.err, "WRONGPASS") != NULL, "%s", res.err);
    configure(redis.addr, secret("fleet right", 0600));
    cr_expect_eq(check_config(), 0, "%s", res.err);
    cr_expect(strstr(res.out, "login and commands ok") != NULL, "%s", res.out);
    /* Nothing answers: nothing known about the login, so no error. */
    char addr[32];
    int held;
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", dead_port(&held));
    configure(addr, secret("fleet right", 0600));
    cr_expect_eq(check_config(), 0, "%s", res.err);
    cr_expect(strstr(res.err, "does not answer") != NULL, "%s", res.err);
    close(held);
}

static bool log_has(void *arg)
{
    return strstr(log_text(), arg) != NULL;
}

static double syncs(void)
{
    cr_assert_eq(rd_ctl(&D, &res, "stats", "--json", NULL), 0);
    return rd_json_number(res.out, "\"fleet\":{\"state\"", "syncs");
}

static bool syncs_above(void *arg)
{
    return syncs() > *(double *)arg;
}

Test(fleet_login, a_reload_with_a_wrong_password_is_refused_and_the_link_kept)
{
    init();
    const char *file = secret("fleet right", 0600);
    configure(redis.addr, file);
    cr_assert_eq(rd_daemon_start(&D), 0, "%s", log_text());
    cr_assert(rd_wait_until(connected, NULL, 10000), "%s", res.out);
    secret("fleet wrong", 0600); /* a rotation gone wrong */
    kill(D.pid, SIGHUP);
    cr_assert(rd_wait_until(log_has, "reload refused", 10000), "%s",
              log_text());
    cr_expect(strstr(log_text(), "WRONGPASS") != NULL, "%s", log_text());
    double n = syncs();
    cr_expect(rd_wait_until(syncs_above, &n, 5000),
              "the running link stopped syncing");
    cr_expect(state_is("connected"), "%s", res.out);
    secret("fleet right", 0600);
    kill(D.pid, SIGHUP);
    cr_expect(rd_wait_until(log_has, "configuration reloaded", 10000), "%s",
              log_text());
}

static bool fleet_off(void *arg)
{
    (void)arg;
    return rd_ctl(&D, &res, "stats", "--json", NULL) == 0 &&
           strstr(res.out, "\"fleet\":null},\"upstreams\"") != NULL;
}

/* The section removed by a reload: the thread stops, the views go (the
 * host's own floor at once, not at a lapse); brought back: it joins. */
Test(fleet_login, a_reload_turns_the_tier_off_and_on)
{
    init();
    configure(redis.addr, secret("fleet right", 0600));
    cr_assert_eq(rd_daemon_start(&D), 0, "%s", log_text());
    cr_assert(rd_wait_until(connected, NULL, 10000), "%s", res.out);
    cr_assert_eq(rd_daemon_write_config(&D, "[upstream api]\n"), 0);
    kill(D.pid, SIGHUP);
    cr_assert(rd_wait_until(fleet_off, NULL, 10000), "%s", res.out);
    cr_expect(strstr(log_text(), "fleet: the [fleet] section is gone") != NULL,
              "%s", log_text());
    cr_expect(strstr(res.out, "\"min_retries_per_sec\":10.000000") != NULL &&
                  strstr(res.out, "\"fleet\":null}") != NULL,
              "%s", res.out);
    configure(redis.addr, secret("fleet right", 0600));
    kill(D.pid, SIGHUP);
    cr_expect(rd_wait_until(connected, NULL, 10000), "%s", res.out);
}

Test(fleet_login, a_password_file_every_user_can_read_is_refused)
{
    init();
    configure(redis.addr, secret("fleet right", 0644));
    cr_expect_eq(check_config(), 78);
    cr_expect(strstr(res.err, ":6: [fleet] password_file:") != NULL, "%s",
              res.err);
    cr_expect(strstr(res.err, "open to every user") != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "right") == NULL, "the password in: %s", res.err);
}

static bool fell_back(void *arg)
{
    (void)arg;
    return state_is("fallback");
}

Test(fleet_login, redis_down_at_the_start_is_no_error_and_joined_later)
{
    init();
    int held, port = dead_port(&held);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    configure(addr, secret("fleet right", 0600));
    rd_redis later;
    cr_assert_eq(rd_daemon_start(&D), 0, "%s", log_text());
    cr_expect(strstr(log_text(), "does not answer") != NULL, "%s", log_text());
    cr_expect(rd_wait_until(fell_back, NULL, 10000), "%s", res.out);
    close(held); /* the port is Redis's from now on */
    cr_assert_eq(rd_redis_start(&later, port, acl), 0, "redis on %d", port);
    cr_expect(rd_wait_until(connected, NULL, 20000), "%s", res.out);
    rd_redis_cleanup(&later);
}

/* --- what the operators' tools see --------------------------------------- */

static bool prom_says(const char *line)
{
    return rd_ctl(&D, &res, "stats", "--prometheus", NULL) == 0 &&
           strstr(res.out, line) != NULL;
}

static bool prom_down(void *arg)
{
    (void)arg;
    return prom_says("\nretryd_fleet_up 0\n");
}

Test(fleet_login, the_fleet_families_pass_promtool_and_say_the_state)
{
    init();
    configure(redis.addr, secret("fleet right", 0600));
    cr_assert_eq(rd_daemon_start(&D), 0, "%s", log_text());
    cr_assert(rd_wait_until(connected, NULL, 10000), "%s", res.out);
    cr_assert(prom_says("\nretryd_fleet_up 1\n"), "%s", res.out);
    /* Alone in the fleet: the whole floor of 10 is this host's. */
    cr_expect(strstr(res.out, "retryd_upstream_fleet_applied{upstream=\"api\"}"
                              " 1.000000\n") != NULL,
              "%s", res.out);
    cr_expect(strstr(res.out, "retryd_upstream_fleet_share{upstream=\"api\"} "
                              "1.000000\n") != NULL,
              "%s", res.out);
    cr_expect(strstr(res.out, "retryd_upstream_floor_in_force_per_second{"
                              "upstream=\"api\"} 10.000000\n") != NULL,
              "%s", res.out);
    const char *promtool = rd_promtool();
    if (promtool != NULL) {
        char file[256];
        run_result r;
        snprintf(file, sizeof(file), "%s/metrics.txt", D.dir);
        cr_expect_eq(rd_promtool_check(promtool, file, res.out, &r), 0,
                     "promtool check metrics failed:\n%s%s", r.out, r.err);
    } else {
        cr_log_warn("promtool not found: the exposition format unchecked");
    }
    kill(redis.pid, SIGSTOP);
    cr_expect(rd_wait_until(prom_down, NULL, 10000), "%s", res.out);
    cr_expect(strstr(res.out, "retryd_upstream_fleet_applied{upstream=\"api\"}"
                              " 0.000000\n") != NULL,
              "%s", res.out);
    cr_expect(strstr(res.out, "retryd_fleet_fallbacks_total 1\n") != NULL, "%s",
              res.out);
    kill(redis.pid, SIGCONT);
}

/* --- the section's own mistakes ------------------------------------------ */

static void expect_error(const char *text, const char *want)
{
    cr_assert_eq(rd_daemon_write_config(&D, text), 0);
    cr_expect_eq(check_config(), 78, "exit code for:\n%s", text);
    cr_expect(strstr(res.err, want) != NULL, "'%s' not in '%s'", want, res.err);
}

Test(fleet_login, mistakes_in_the_fleet_section_name_their_line)
{
    init();
    expect_error("[fleet]\n", ":4: [fleet] redis: not set");
    expect_error("[fleet]\nredis = localhost\n",
                 ":5: [fleet] redis: 'localhost' is not HOST:PORT");
    expect_error("[fleet]\nredis = h:70000\n", "is not HOST:PORT");
    expect_error("[fleet]\nredis = [nope]:6379\n", "is not HOST:PORT");
    expect_error("[fleet]\nredis = h:1\nname = a b\n",
                 ":6: [fleet] name: 'a b' is not 1..64 letters");
    expect_error("[fleet]\nredis = h:1\nsync_interval = 10ms\n",
                 ":6: [fleet] sync_interval: '10ms' is not a duration");
    expect_error("[fleet]\nredis = h:1\npassword_file = relative\n",
                 "is not an absolute path");
    expect_error("[fleet]\nredis = h:1\npassword_file = /nonexistent/x\n",
                 "cannot open '/nonexistent/x'");
    expect_error("[fleet]\nredis = h:1\nhost_id = a b\n",
                 "[fleet] host_id: 'a b' is not 1..128 printable bytes");
    expect_error("[upstream api]\nfleet_min_retries_per_sec = 5\n",
                 ":5: [upstream api] fleet_min_retries_per_sec: the fleet "
                 "tier is off (no [fleet] section)");
    expect_error("[defaults]\nfleet_pushback = maybe\n",
                 "'maybe' is neither on nor off");
    expect_error("[fleet]\nredis = h:1\n[fleet]\nname = x\n",
                 "section repeated");
}

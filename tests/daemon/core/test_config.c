/* SPDX-License-Identifier: MIT */
/* retryd --check-config: a good file passes; each mistake is reported with
 * the file, the line and the key, and the exit code says "configuration".
 * The upstream health keys (docs/health.md) also in a running daemon: what
 * each upstream's slot holds, inherited key by key, and changed by a
 * reload. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "run.h"

static char path[] = "/tmp/retryd-config-XXXXXX";
static char checked[sizeof(path)]; /* the file check() last wrote */
static run_result res;

static void check(const char *text)
{
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    char *argv[] = {RETRYD_PATH, "--config", path, "--check-config", NULL};
    cr_assert_eq(run_program(argv, 10000, &res), 0);
    unlink(path);
    strcpy(checked, path);
    strcpy(path, "/tmp/retryd-config-XXXXXX");
}

static void expect_error(const char *text, int line, const char *what)
{
    char where[64];
    check(text);
    cr_expect_eq(res.exit_code, 78, "exit code for:\n%s", text);
    /* "retryd: <path>:<line>: ..." */
    snprintf(where, sizeof(where), ":%d: ", line);
    cr_expect(strstr(res.err, where) != NULL, "expected line %d in '%s'", line,
              res.err);
    cr_expect(strstr(res.err, what) != NULL, "expected '%s' in '%s'", what,
              res.err);
}

Test(config, a_complete_file_is_valid)
{
    check("[retryd]\nruntime_dir = /run/retryd\ngroup = root\n"
          "allow_users = root 0\nupstream_capacity = 128\n"
          "process_capacity = 64\nlog_level = warning\n"
          "[defaults]\nratio = 0.2\nmin_retries_per_sec = 5\ncap = 50\n"
          "[upstream payments]\ncap = 10\n");
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect(strstr(res.out, "ok (1 upstreams configured)") != NULL);
}

Test(config, each_mistake_names_line_section_and_key)
{
    expect_error("[defaults]\n\nratio = lots\n", 3,
                 "[defaults] ratio: 'lots' is not a number >= 0");
    expect_error("[defaults]\ncap = 0.5\n", 2,
                 "[defaults] cap: '0.5' is not a number >= 1");
    expect_error("[retryd]\nlisten = here\n", 2,
                 "[retryd] listen: unknown key");
    expect_error("[elsewhere]\nx = 1\n", 2, "unknown section [elsewhere]");
    expect_error("[retryd]\ngroup = no-such-group-here\n", 2,
                 "[retryd] group: unknown group 'no-such-group-here'");
    expect_error("[retryd]\nupstream_capacity = 70000\n", 2,
                 "is not in 1..65536");
    expect_error("[retryd]\nruntime_dir = relative\n", 2,
                 "is not an absolute path");
    expect_error("[retryd]\nlog_level = chatty\n", 2, "log_level: 'chatty'");
    expect_error("[retryd]\nthis line has no equals sign\n", 2, "syntax error");
    expect_error("[upstream  ]\nratio = 1\n", 2, "upstream name");
    expect_error("[defaults]\nratio = -1\n", 2, "is not a number >= 0");
    expect_error("[defaults]\nratio = nan\n", 2, "is not a number >= 0");
}

Test(config, first_of_several_mistakes_is_reported)
{
    expect_error("[retryd]\nbogus = 1\n[defaults]\nratio = x\n", 2,
                 "[retryd] bogus: unknown key");
    expect_error("[retryd]\nno equals\nbogus = 1\n", 2, "syntax error");
}

Test(config, overlong_lines_are_refused_not_cut)
{
    char text[1024] = "[defaults]\nratio = 0.";
    memset(text + strlen(text), '1', 600);
    strcat(text, "\n");
    expect_error(text, 2, "line longer than");
}

Test(config, missing_file_is_a_clear_error)
{
    char *argv[] = {RETRYD_PATH, "--config", "/nonexistent/retryd.conf",
                    "--check-config", NULL};
    cr_assert_eq(run_program(argv, 10000, &res), 0);
    cr_expect_eq(res.exit_code, 78);
    cr_expect(strstr(res.err, "/nonexistent/retryd.conf: cannot open") != NULL,
              "%s", res.err);
}

/* "[upstream " + @p name + "]" with @p name @p len times @p fill, then
 * @p last. */
static void upstream_header(char *out, size_t cap, char fill, size_t len,
                            char last)
{
    char name[128];
    memset(name, fill, len);
    name[len] = last;
    name[len + 1] = '\0';
    snprintf(out, cap, "[upstream %s]\ncap = 10\n", name);
}

Test(config, long_upstream_names_are_kept_whole)
{
    char a[160], b[160], text[512];
    /* 95 bytes each, the first 94 shared: far past inih's 49-byte section
     * buffer, so a cut name would merge the two. */
    upstream_header(a, sizeof(a), 'n', 94, 'a');
    upstream_header(b, sizeof(b), 'n', 94, 'b');
    snprintf(text, sizeof(text), "%s%s", a, b);
    check(text);
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect(strstr(res.out, "ok (2 upstreams configured)") != NULL, "%s",
              res.out);

    /* A long name repeated is still the same section, so it is refused as
     * a repeat (naming the first header's line), not taken for a second
     * upstream. */
    snprintf(text, sizeof(text), "%s%s", a, a);
    expect_error(text, 4, "section repeated (first at line 1)");
}

/* [retryd] is one section whichever keys it holds: a limit in one block
 * and another key in a second is a repeat, as two blocks of [defaults]
 * are. */
Test(config, a_repeated_retryd_section_is_refused_whatever_its_keys)
{
    expect_error("[retryd]\nhello_timeout_ms = 100\n[retryd]\n"
                 "log_level = info\n",
                 4, "[retryd] log_level: section repeated (first at line 1)");
    expect_error("[retryd]\nlog_level = info\n[retryd]\n"
                 "hello_timeout_ms = 100\n",
                 4,
                 "[retryd] hello_timeout_ms: section repeated (first at line "
                 "1)");
    expect_error("[retryd]\nhello_timeout_ms = 100\n[retryd]\nbogus = 1\n", 4,
                 "[retryd] bogus: section repeated (first at line 1)");
}

Test(config, an_upstream_name_over_95_bytes_is_refused_on_its_line)
{
    char a[160], text[512];
    upstream_header(a, sizeof(a), 'n', 95, 'x'); /* 96 bytes */
    snprintf(text, sizeof(text), "[defaults]\ncap = 5\n%s", a);
    expect_error(text, 4, "must be 1..95 printable bytes");
    cr_expect(strstr(res.err, "nnnnx'") != NULL, "the whole name: %s", res.err);
}

Test(config, sockets_segment_and_lock_need_paths_of_their_own)
{
    expect_error("[retryd]\ncontrol_socket = stats.sock\n", 2,
                 "[retryd] control_socket: '/run/retryd/stats.sock' is also "
                 "the stats_socket");
    expect_error("[retryd]\nruntime_dir = /run/x\n"
                 "stats_socket = /run/x/control.sock\n",
                 3,
                 "[retryd] stats_socket: '/run/x/control.sock' is also the "
                 "control_socket");
    expect_error("[retryd]\nsegment = retryd.lock\n", 2,
                 "[retryd] segment: '/run/retryd/retryd.lock' is also the "
                 "lock file");
    /* The later of two keys is named; spelling does not hide a clash. */
    expect_error("[retryd]\nsegment = s\ncontrol_socket = ./x/../s\n", 3,
                 "[retryd] control_socket: '/run/retryd/./x/../s' is also "
                 "the segment");
    expect_error("[retryd]\nsegment = /tmp//a\nstats_socket = /tmp/a\n", 3,
                 "is also the segment");
    check("[retryd]\ncontrol_socket = c\nstats_socket = s\nsegment = seg\n");
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
}

/* --- upstream health keys (docs/health.md) ------------------------------- */

/* The daemon of the tests that run one. */
static rd_daemon dm;

static void stop_daemon(void)
{
    rd_daemon_cleanup(&dm);
}

Test(config, the_health_keys_parse_in_defaults_and_upstreams)
{
    check("[defaults]\nadaptive_throttle = on\nthrottle_k = 1.5\n"
          "throttle_window = 10s\nthrottle_min_processes = 3\npushback = off\n"
          "pushback_first_attempts = yes\npushback_max = 500ms\n"
          "[upstream payments]\nadaptive_throttle = false\nthrottle_k = 0\n"
          "throttle_window = 1h\nthrottle_min_processes = 65536\n"
          "pushback = 1\npushback_first_attempts = off\npushback_max = 0\n"
          "[upstream orders]\nthrottle_k = 1000\nthrottle_window = 1s\n"
          "throttle_min_processes = 1\npushback_max = 1h\n");
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect(strstr(res.out, "ok (2 upstreams configured)") != NULL, "%s",
              res.out);
}

/* A bad value of a health key, in [defaults] and in an [upstream]: exit
 * 78, and the message names the file, the line, the section and the key
 * with the reason. */
/* A bad value of a key. */
struct bad_value {
    const char *key, *value, *why;
};

/* Each of @p bad in [defaults] and in an [upstream]: exit 78, named with
 * the file, its line, its section and its key. */
static void expect_bad_values(const struct bad_value *bad, size_t n)
{
    char text[256], want[256];
    for (size_t i = 0; i < n; i++) {
        snprintf(text, sizeof(text), "[defaults]\ncap = 5\n%s = %s\n",
                 bad[i].key, bad[i].value);
        snprintf(want, sizeof(want), "[defaults] %s: %s", bad[i].key,
                 bad[i].why);
        expect_error(text, 3, want);
        cr_expect(strstr(res.err, checked) != NULL, "names the file: %s",
                  res.err);
        snprintf(text, sizeof(text),
                 "[defaults]\ncap = 5\n[upstream payments]\nratio = 1\n"
                 "%s = %s\n",
                 bad[i].key, bad[i].value);
        snprintf(want, sizeof(want), "[upstream payments] %s: %s", bad[i].key,
                 bad[i].why);
        expect_error(text, 5, want);
    }
}

Test(config, bad_health_values_name_file_line_section_and_key)
{
    static const struct bad_value bad[] = {
        {"adaptive_throttle", "maybe", "'maybe' is neither on nor off"},
        {"adaptive_throttle", "", "'' is neither on nor off"},
        {"throttle_k", "-1", "'-1' is not a number from 0 to 1000"},
        {"throttle_k", "1000.5", "'1000.5' is not a number from 0 to 1000"},
        {"throttle_k", "lots", "'lots' is not a number from 0 to 1000"},
        {"throttle_window", "999ms",
         "'999ms' is not a duration from 1000ms to 3600s"},
        {"throttle_window", "2h",
         "'2h' is not a duration from 1000ms to 3600s"},
        {"throttle_window", "30", "'30' is not a duration from 1000ms"},
        {"throttle_window", "soon", "'soon' is not a duration"},
        {"throttle_min_processes", "0", "'0' is not in 1..65536"},
        {"throttle_min_processes", "65537", "'65537' is not in 1..65536"},
        {"throttle_min_processes", "two", "'two' is not in 1..65536"},
        {"pushback", "2", "'2' is neither on nor off"},
        {"pushback_first_attempts", "always", "'always' is neither on nor off"},
        {"pushback_max", "61m", "'61m' is not a duration from 0ms to 3600s"},
        {"pushback_max", "-1s", "'-1s' is not a duration from 0ms to 3600s"},
    };
    expect_bad_values(bad, sizeof(bad) / sizeof(bad[0]));
    /* Twice in one section is a mistake too, whichever the value. */
    expect_error("[upstream payments]\npushback = on\npushback = on\n", 3,
                 "[upstream payments] pushback: set twice (first at line 2)");
}

/* A key's value in [defaults] (first) and another one an [upstream] sets
 * (second), as the file says them and as `retrydctl stats --json` prints
 * them in the upstream's member for the key's subsystem. */
struct conf_key {
    const char *key, *in_defaults, *in_upstream; /* as the file says */
    const char *json, *json_defaults, *json_upstream;
};

/* The health keys, in the "health" member. */
static const struct conf_key health_keys[] = {
    {"adaptive_throttle", "on", "off", "adaptive_throttle", "true", "false"},
    {"throttle_k", "3", "1.5", "throttle_k", "3.000000", "1.500000"},
    {"throttle_window", "20s", "4s", "throttle_window_seconds", "20.000",
     "4.000"},
    {"throttle_min_processes", "4", "2", "throttle_min_processes", "4", "2"},
    {"pushback", "off", "on", "pushback", "false", "true"},
    {"pushback_first_attempts", "on", "off", "pushback_first_attempts", "true",
     "false"},
    {"pushback_max", "5s", "7s", "pushback_max_seconds", "5.000", "7.000"},
};
#define HEALTH_KEYS (sizeof(health_keys) / sizeof(health_keys[0]))

/* The @p member object ("health", "hedge") of upstream @p name in fresh
 * `stats --json`, into @p out; false when there is none. */
static bool member_json(const char *name, const char *member, char *out,
                        size_t len)
{
    char anchor[128];
    if (rd_ctl(&dm, &res, "stats", "--json", NULL) != 0)
        return false;
    snprintf(anchor, sizeof(anchor), "{\"name\":\"%s\",", name);
    const char *u = strstr(res.out, anchor);
    snprintf(anchor, sizeof(anchor), "\"%s\":{", member);
    const char *h = u ? strstr(u, anchor) : NULL;
    const char *end = h ? strchr(h, '}') : NULL;
    if (end == NULL || (size_t)(end - h) + 1 >= len)
        return false;
    memcpy(out, h, (size_t)(end - h) + 1);
    out[end - h + 1] = '\0';
    return true;
}

static bool health_json(const char *name, char *out, size_t len)
{
    return member_json(name, "health", out, len);
}

static bool hedge_json(const char *name, char *out, size_t len)
{
    return member_json(name, "hedge", out, len);
}

/* Whether the object @p obj holds "@p key":@p value. */
static bool json_says(const char *obj, const char *key, const char *value)
{
    char want[96];
    snprintf(want, sizeof(want), "\"%s\":%s,", key, value);
    if (strstr(obj, want) != NULL)
        return true;
    snprintf(want, sizeof(want), "\"%s\":%s}", key, value);
    return strstr(obj, want) != NULL;
}

static void start_daemon(const char *conf)
{
    cr_assert_eq(rd_daemon_init(&dm, conf), 0);
    int r = rd_daemon_start(&dm);
    if (r != 0) {
        char log[4096] = "";
        FILE *f = fopen(dm.log, "r");
        size_t n = f ? fread(log, 1, sizeof(log) - 1, f) : 0;
        log[n] = '\0';
        if (f)
            fclose(f);
        cr_assert_fail("the daemon did not start (%d): %s", r, log);
    }
}

/* A retryd-test-client attached to the daemon. */
static void start_client(child *c)
{
    char *argv[] = {TEST_CLIENT_PATH, dm.control, NULL};
    cr_assert_eq(child_start(c, argv), 0);
}

static void ask(child *c, const char *cmd, const char *expect)
{
    char reply[256];
    cr_assert_eq(child_ask(c, cmd, reply, sizeof(reply), 10000), 0,
                 "the client did not answer '%s'", cmd);
    cr_assert_str_eq(reply, expect, "after '%s'", cmd);
}

/*
 * [upstream <prefix>K] sets key K of @p keys alone: it holds its own value
 * of K and [defaults]'s of every other key, each inherited by itself, as
 * `stats --json` prints them in the upstream's @p member. The daemon runs
 * the file so made, with @p extra after it.
 */
static void expect_each_key_inherited(const struct conf_key *keys, size_t n,
                                      const char *prefix, const char *member,
                                      const char *extra)
{
    char conf[4096] = "[defaults]\n", line[128], obj[2048];
    for (size_t k = 0; k < n; k++) {
        snprintf(line, sizeof(line), "%s = %s\n", keys[k].key,
                 keys[k].in_defaults);
        strcat(conf, line);
    }
    for (size_t k = 0; k < n; k++) {
        snprintf(line, sizeof(line), "[upstream %s%zu]\n%s = %s\n", prefix, k,
                 keys[k].key, keys[k].in_upstream);
        strcat(conf, line);
    }
    strcat(conf, extra);
    start_daemon(conf);
    for (size_t u = 0; u < n; u++) {
        char name[64];
        snprintf(name, sizeof(name), "%s%zu", prefix, u);
        cr_assert(member_json(name, member, obj, sizeof(obj)),
                  "no %s for %s: %s", member, name, res.out);
        for (size_t k = 0; k < n; k++) {
            const char *want =
                k == u ? keys[k].json_upstream : keys[k].json_defaults;
            cr_expect(json_says(obj, keys[k].json, want),
                      "%s (sets %s only): %s should be %s: %s", name,
                      keys[u].key, keys[k].json, want, obj);
        }
    }
}

/* A client registers an upstream the file does not name. */
static void open_unnamed(void)
{
    child c;
    start_client(&c);
    ask(&c, "open unnamed", "ok shared=1");
    child_stop(&c);
}

/* An upstream the file does not name, registered by a client, holds
 * [defaults]'s health keys. */
Test(config, an_upstream_inherits_each_unset_health_key_from_defaults,
     .fini = stop_daemon)
{
    char health[1024];
    expect_each_key_inherited(health_keys, HEALTH_KEYS, "h", "health", "");
    open_unnamed();
    cr_assert(health_json("unnamed", health, sizeof(health)), "%s", res.out);
    for (size_t k = 0; k < HEALTH_KEYS; k++)
        cr_expect(json_says(health, health_keys[k].json,
                            health_keys[k].json_defaults),
                  "unnamed: %s should be %s: %s", health_keys[k].json,
                  health_keys[k].json_defaults, health);
}

static bool window_is_8s(void *arg)
{
    char health[1024];
    (void)arg;
    return health_json("flaky", health, sizeof(health)) &&
           json_says(health, "throttle_window_seconds", "8.000");
}

/* A reload that changes an upstream's health keys rewrites its slot
 * (the stats read the slot, and so does the client) and starts its window
 * afresh, as a window of another length cannot be read. */
Test(config, a_reload_changes_a_slots_health_params, .fini = stop_daemon)
{
    char health[1024];
    start_daemon("[upstream flaky]\nadaptive_throttle = on\n"
                 "throttle_window = 20s\n");
    child c;
    start_client(&c);
    ask(&c, "open flaky", "ok shared=1");
    ask(&c, "observe 503", "ok");
    ask(&c, "observe 503", "ok");
    ask(&c, "observe 0", "ok");
    ask(&c, "observe 200", "ok");
    cr_assert(health_json("flaky", health, sizeof(health)), "%s", res.out);
    cr_expect(json_says(health, "requests", "4"), "%s", health);
    cr_expect(json_says(health, "accepts", "1"), "%s", health);
    cr_expect(json_says(health, "engaged", "true"), "%s", health);
    cr_expect(json_says(health, "pushback", "true"), "%s", health);

    cr_assert_eq(rd_daemon_write_config(&dm, "[upstream flaky]\n"
                                             "adaptive_throttle = on\n"
                                             "throttle_window = 8s\n"
                                             "throttle_min_processes = 2\n"
                                             "pushback = off\n"),
                 0);
    cr_assert_eq(kill(dm.pid, SIGHUP), 0);
    cr_assert(rd_wait_until(window_is_8s, NULL, 5000),
              "the reload did not reach the slot: %s", res.out);
    cr_assert(health_json("flaky", health, sizeof(health)), "%s", res.out);
    cr_expect(json_says(health, "throttle_min_processes", "2"), "%s", health);
    cr_expect(json_says(health, "pushback", "false"), "%s", health);
    cr_expect(json_says(health, "requests", "0"), "a fresh window: %s", health);
    cr_expect(json_says(health, "engaged", "false"), "%s", health);
    /* The client reads the same slot. */
    ask(&c, "health",
        "health throttle=1 engaged=0 probability=0.000000 requests=0 "
        "accepts=0 rejecting=0 pushback_ms=0");
    child_stop(&c);
}

/* --- hedging (docs/hedging.md) ------------------------------------------ */

/* A bad value of a hedge key: exit 78, named with its line and section. */
Test(config, bad_hedge_values_name_file_line_section_and_key)
{
    check("[defaults]\nmax_extra_load = 0.05\nmin_hedges_per_sec = 0\n"
          "hedge_cap = 1\nhedge_min_delay = 0\nhedge_window = 100ms\n"
          "[upstream payments]\nmax_extra_load = 1\nhedge_window = 3s\n"
          "hedge_min_delay = 60s\nhedge_cap = 1000\n");
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    static const struct bad_value bad[] = {
        {"max_extra_load", "1.5", "'1.5' is not a number from 0 to 1"},
        {"max_extra_load", "-0.1", "'-0.1' is not a number from 0 to 1"},
        {"min_hedges_per_sec", "x", "'x' is not a number from 0 to"},
        {"hedge_cap", "0.5", "'0.5' is not a number >= 1"},
        {"hedge_min_delay", "61s", "'61s' is not a duration from 0ms to 60s"},
        {"hedge_window", "99ms", "'99ms' is not a duration from 100ms to 3s"},
        {"hedge_window", "4s", "'4s' is not a duration from 100ms to 3s"},
    };
    expect_bad_values(bad, sizeof(bad) / sizeof(bad[0]));
}

/* The hedge keys, in the "hedge" member. */
static const struct conf_key hedge_keys[] = {
    {"max_extra_load", "0.05", "0.1", "max_extra_load", "0.050000", "0.100000"},
    {"min_hedges_per_sec", "2", "0.5", "min_hedges_per_sec", "2.000000",
     "0.500000"},
    {"hedge_cap", "20", "4", "hedge_cap", "20.000000", "4.000000"},
    {"hedge_min_delay", "5ms", "250us", "hedge_min_delay_seconds", "0.005000",
     "0.000250"},
    {"hedge_window", "2s", "500ms", "hedge_window_seconds", "2.000", "0.500"},
};
#define HEDGE_KEYS (sizeof(hedge_keys) / sizeof(hedge_keys[0]))

/* An upstream a client registers holds retryd's defaults, which are the
 * library's for a process-local budget. */
Test(config, an_upstream_inherits_each_unset_hedge_key_from_defaults,
     .fini = stop_daemon)
{
    char hedge[2048];
    expect_each_key_inherited(hedge_keys, HEDGE_KEYS, "e", "hedge",
                              "[upstream plain]\nmax_extra_load = 0.02\n"
                              "min_hedges_per_sec = 1\nhedge_cap = 10\n"
                              "hedge_min_delay = 1ms\nhedge_window = 1s\n");
    /* The defaults written out ([upstream plain]) are what a file that
     * says nothing gives: an unnamed upstream of a daemon without them. */
    char plain[2048];
    cr_assert(hedge_json("plain", plain, sizeof(plain)), "%s", res.out);
    stop_daemon();
    start_daemon("");
    open_unnamed();
    cr_assert(hedge_json("unnamed", hedge, sizeof(hedge)), "%s", res.out);
    for (size_t k = 0; k < HEDGE_KEYS; k++) {
        char want[64];
        const char *at = strstr(plain, hedge_keys[k].json);
        cr_assert_not_null(at);
        snprintf(want, sizeof(want), "%.*s", (int)strcspn(at, ",}"), at);
        cr_expect(strstr(hedge, want) != NULL, "unnamed: %s, not in %s", want,
                  hedge);
    }
}

static bool hedge_cap_is_3(void *arg)
{
    char hedge[2048];
    (void)arg;
    return hedge_json("flaky", hedge, sizeof(hedge)) &&
           json_says(hedge, "hedge_cap", "3.000000");
}

/* A reload that changes an upstream's hedge keys rewrites its slot. */
Test(config, a_reload_changes_a_slots_hedge_params, .fini = stop_daemon)
{
    char hedge[2048];
    start_daemon("[upstream flaky]\nhedge_cap = 10\nhedge_window = 2s\n");
    child c;
    start_client(&c);
    ask(&c, "open flaky", "ok shared=1");
    child_stop(&c);
    cr_assert_eq(rd_daemon_write_config(&dm, "[upstream flaky]\n"
                                             "hedge_cap = 3\n"
                                             "hedge_window = 500ms\n"
                                             "max_extra_load = 0.5\n"),
                 0);
    cr_assert_eq(kill(dm.pid, SIGHUP), 0);
    cr_assert(rd_wait_until(hedge_cap_is_3, NULL, 5000),
              "the reload did not reach the slot: %s", res.out);
    cr_assert(hedge_json("flaky", hedge, sizeof(hedge)), "%s", res.out);
    cr_expect(json_says(hedge, "hedge_window_seconds", "0.500"), "%s", hedge);
    cr_expect(json_says(hedge, "max_extra_load", "0.500000"), "%s", hedge);
    double balance = rd_json_number(hedge, NULL, "hedge_balance");
    cr_expect(balance > 0 && balance <= 3, "within the new cap: %s", hedge);
}

/* --check-config lists every mistake of a file, each with its line, in
 * the file's order, not only the first. */
/* The position of the first report of line @p line in the output, or
 * NULL. */
static const char *at_line(int line)
{
    char where[32];
    snprintf(where, sizeof(where), ":%d: ", line);
    return strstr(res.err, where);
}

Test(config, every_mistake_is_listed_in_order)
{
    check("[retryd]\n"                     /* 1 */
          "listen = here\n"                /* 2: unknown key */
          "[defaults]\n"                   /* 3 */
          "ratio = lots\n"                 /* 4: not a number */
          "cap = 0.5\n"                    /* 5: below 1 */
          "[upstream x]\n"                 /* 6 */
          "adaptive_throttle = maybe\n"    /* 7: not a switch */
          "throttle_window = 10ms\n"       /* 8: below 1 s */
          "garbage line\n"                 /* 9: syntax */
          "[unclosed\n"                    /* 10: syntax */
          "throttle_min_processes = 0\n"); /* 11: below 1 */
    cr_expect_eq(res.exit_code, 78, "%s", res.err);
    static const int lines[] = {2, 4, 5, 7, 8, 9, 10};
    const char *prev = res.err;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        const char *p = at_line(lines[i]);
        cr_expect(p != NULL, "line %d not reported: %s", lines[i], res.err);
        cr_expect(p == NULL || p >= prev, "line %d out of order: %s", lines[i],
                  res.err);
        if (p != NULL)
            prev = p;
    }
    cr_expect(strstr(res.err, "adaptive_throttle: 'maybe' is neither on nor "
                              "off") != NULL,
              "%s", res.err);
    cr_expect(strstr(res.err, "syntax error") != NULL, "%s", res.err);
    /* One mistake per line of output, each with the program's prefix. */
    int reports = 0;
    for (const char *l = res.err; (l = strstr(l, "retryd: ")) != NULL; l++)
        reports++;
    cr_expect_geq(reports, 7, "%s", res.err);
}

Test(config, a_flood_of_mistakes_is_counted_not_cut_mid_line)
{
    /* 200 unknown keys: the first ones listed, the rest counted. */
    size_t cap = 200 * 32 + 16;
    char *text = malloc(cap);
    cr_assert(text != NULL);
    size_t used = (size_t)snprintf(text, cap, "[retryd]\n");
    for (int i = 0; i < 200; i++)
        used +=
            (size_t)snprintf(text + used, cap - used, "nonsense%d = 1\n", i);
    check(text);
    free(text);
    cr_expect_eq(res.exit_code, 78);
    cr_expect(at_line(2) != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "more mistakes)") != NULL, "%s", res.err);
    cr_expect(at_line(201) == NULL, "the 200th mistake should be counted");
}

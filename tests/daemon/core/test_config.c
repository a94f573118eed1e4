/* SPDX-License-Identifier: MIT */
/* retryd --check-config: a good file passes; each mistake is reported with
 * the file, the line and the key, and the exit code says "configuration". */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "run.h"

static char path[] = "/tmp/retryd-config-XXXXXX";
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

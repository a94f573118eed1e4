/* SPDX-License-Identifier: MIT */
/*
 * Containers on one host are many processes on one host (issue 23, item
 * 4; docs/containers.md): a client in its own PID namespace, where its
 * getpid() is 1 and means nothing to the daemon, and one that also has a
 * mount namespace of its own with the runtime directory bind-mounted
 * elsewhere, attach and share the budget with a process of the host;
 * retrydctl doctor run in the namespace says it shares; a client in a
 * time namespace whose clock runs a day ahead refills no faster than the
 * others and is no damage to the daemon. Real namespaces
 * made by unshare(1); skipped with the reason where the machine does not
 * permit them.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "child.h"
#include "harness.h"
#include "run.h"

/* Floor 0: the shared balance is exactly the deposits. "refill" earns a
 * token a second and nothing else: what a clock set ahead could read as a
 * cap's worth. */
static const char *const base_config =
    "[upstream pot]\nratio = 1\nmin_retries_per_sec = 0\ncap = 100000\n"
    "[upstream refill]\nratio = 0.000001\nmin_retries_per_sec = 1\n"
    "cap = 1000\n";

#include "daemon_fixture.h"

TestSuite(containers, .init = daemon_setup, .fini = daemon_teardown,
          .timeout = 60);

/* unshare(1)'s path (an argv word), or NULL. */
static char *unshare_path(void)
{
    static char where[][24] = {"/usr/bin/unshare", "/bin/unshare"};
    for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
        if (access(where[i], X_OK) == 0)
            return where[i];
    return NULL;
}

/* Whether unshare(1) with @p ns_args (a namespace's options, then a
 * command) runs here; skips the test with the reason when not. */
static void need(char *const argv[])
{
    if (argv[0] == NULL)
        cr_skip_test("unshare(1) is not installed (util-linux)");
    run_result r;
    int rc = run_program(argv, 10000, &r);
    if (rc < 0 || r.exit_code != 0)
        cr_skip_test("namespaces are not permitted here (%s: %s)", argv[1],
                     r.err);
}

/* A host process's view of the pot after @p container deposited: the
 * deposits it made are in the balance another process reads. */
static void expect_shared_with_the_host(child *container)
{
    ask(container, "open pot", "ok shared=1");
    ask(container, "status", "status shared");
    child host;
    start_client(&host);
    ask(&host, "open pot", "ok shared=1");
    ask(container, "deposit 10", "ok");
    ask(&host, "balance", "balance 10.000000");
    child_stop(&host);
}

Test(containers, a_client_in_its_own_pid_namespace_shares)
{
    char *probe[] = {unshare_path(), "--pid",     "--fork",
                     "--mount-proc", "/bin/true", NULL};
    need(probe);
    char *argv[] = {unshare_path(),   "--pid",   "--fork", "--mount-proc",
                    TEST_CLIENT_PATH, D.control, NULL};
    child c;
    cr_assert_eq(child_start(&c, argv), 0);
    /* Its own pid is 1, which is not what the daemon sees. */
    ask(&c, "pid", "pid 1");
    expect_shared_with_the_host(&c);
    child_stop(&c);

    /* doctor in the namespace neither blames the header nor fails. */
    char *doctor[] = {unshare_path(),     "--pid",        "--fork",
                      "--mount-proc",     RETRYDCTL_PATH, "doctor",
                      "--control-socket", D.control,      NULL};
    cr_assert_eq(run_program(doctor, 20000, &res), 0);
    cr_expect_eq(res.exit_code, 0, "%s%s", res.out, res.err);
    cr_expect(strstr(res.out, "verdict: this identity shares") != NULL, "%s",
              res.out);
    cr_expect(strstr(res.out, "FAIL") == NULL, "%s", res.out);
}

Test(containers, a_container_with_the_runtime_directory_bind_mounted_shares)
{
    /* The container's own view of the runtime directory, at another
     * path: as a container bind-mounts the host's /run/retryd. */
    char inside[256], sock[320], base[192];
    snprintf(inside, sizeof(inside), "%s/container-run", D.dir);
    cr_assert_eq(mkdir(inside, 0700), 0, "%s", strerror(errno));
    snprintf(base, sizeof(base), "%s", D.control);
    snprintf(sock, sizeof(sock), "%s/%s", inside, basename(base));
    char *probe[] = {
        unshare_path(), "--mount", "--pid", "--fork",
        "--mount-proc", "/bin/sh", "-c",    "mount --bind \"$0\" \"$1\"",
        D.runtime,      inside,    NULL};
    need(probe);
    char *argv[] = {unshare_path(),
                    "--mount",
                    "--pid",
                    "--fork",
                    "--mount-proc",
                    "/bin/sh",
                    "-c",
                    "mount --bind \"$0\" \"$1\" && exec \"$2\" \"$3\"",
                    D.runtime,
                    inside,
                    TEST_CLIENT_PATH,
                    sock,
                    NULL};
    child c;
    cr_assert_eq(child_start(&c, argv), 0);
    ask(&c, "pid", "pid 1");
    expect_shared_with_the_host(&c);
    child_stop(&c);
    /* The bind mount was the container's alone: the host never saw it. */
    cr_expect_neq(access(sock, F_OK), 0);
}

/* Tokens granted to @p c for 2000 withdrawals. */
static long granted_of(child *c)
{
    char reply[128];
    long g = -1, d = -1;
    cr_assert_eq(child_ask(c, "withdraw 2000", reply, sizeof(reply), ASK_MS),
                 0);
    cr_assert_eq(sscanf(reply, "granted %ld denied %ld", &g, &d), 2, "%s",
                 reply);
    return g;
}

static double checks_at_start;

static bool two_more_heartbeats(void *arg)
{
    (void)arg;
    return rd_ctl(&D, &res, "stats", "--json", NULL) == 0 &&
           rd_json_number(res.out, "\"segment_health\"", "checks") >=
               checks_at_start + 2;
}

/* A clock a day ahead (issue 23): it read one cap's refill per stamp it
 * met, and the daemon reset its stamps as damage every second. Both
 * clocks now read the host's monotonic time, the namespace's offset taken
 * away. */
Test(containers, a_client_whose_clock_runs_ahead_refills_no_faster)
{
    char *probe[] = {unshare_path(), "--time",    "--monotonic", "86400",
                     "--fork",       "/bin/true", NULL};
    need(probe);
    child host;
    start_client(&host);
    ask(&host, "open refill", "ok shared=1");
    granted_of(&host); /* the balance drained */
    char *argv[] = {unshare_path(), "--time",         "--monotonic", "86400",
                    "--fork",       TEST_CLIENT_PATH, D.control,     NULL};
    child ahead;
    cr_assert_eq(child_start(&ahead, argv), 0);
    ask(&ahead, "open refill", "ok shared=1");
    stats_json();
    checks_at_start = number_in_res("\"segment_health\"", "checks");
    /* A token a second since the drain: a few, not the cap of 1000. */
    long g = granted_of(&ahead);
    cr_expect_leq(g, 10, "the process ahead was granted %ld", g);
    cr_expect(rd_wait_until(two_more_heartbeats, NULL, 10000));
    cr_expect_eq(rd_json_number(res.out, "\"segment_health\"", "refill_reset"),
                 0, "its stamps taken for damage: %s", res.out);
    child_stop(&ahead);
    child_stop(&host);
}

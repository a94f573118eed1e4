/* SPDX-License-Identifier: MIT */
/*
 * Containers on one host are many processes on one host (issue 23, item
 * 4; docs/containers.md): a client in its own PID namespace, where its
 * getpid() is 1 and means nothing to the daemon, and one that also has a
 * mount namespace of its own with the runtime directory bind-mounted
 * elsewhere, attach and share the budget with a process of the host;
 * retrydctl doctor run in the namespace says it shares. Real namespaces
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

/* Floor 0: the shared balance is exactly the deposits. */
static const char *const base_config =
    "[upstream pot]\nratio = 1\nmin_retries_per_sec = 0\ncap = 100000\n";

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

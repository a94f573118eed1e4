/* SPDX-License-Identifier: MIT */
/*
 * What the executor suites share: per test, a test server and a client
 * whose budgets are process-local (budgets are tested apart), and a budget
 * that never runs dry. Include after <criterion/criterion.h>,
 * "retryd/retryd.h" and "testsrv.h". With FAULTSRV_PATH defined,
 * TestSuite(name, .init = exec_setup, .fini = exec_teardown) runs every
 * test against retryd-faultsrv.
 */
#ifndef RETRYD_TEST_EXEC_FIXTURE_H
#define RETRYD_TEST_EXEC_FIXTURE_H

static testsrv *srv;
static retryd_client *client;

/* Tests about safety, not money: a token for every retry. */
static const retryd_budget_params plenty = {sizeof(retryd_budget_params), 1,
                                            1e6, 1e6};

/* A suite compiled to share a daemon's budgets (tests/daemon's hedged
 * matrix) names its control socket and its cleanup; the others' budgets
 * are process-local. */
#ifndef EXEC_CONTROL_SOCKET
#define EXEC_CONTROL_SOCKET NULL
#define EXEC_HOST_FLAGS RETRYD_HOST_LOCAL_ONLY
#define EXEC_CLEANUP() ((void)0)
#endif

/* Starts @p server_path with @p argv (NULL: none) into srv, and client. */
static inline void exec_start(const char *server_path, char *const argv[])
{
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .control_socket = EXEC_CONTROL_SOCKET,
                                 .flags = EXEC_HOST_FLAGS};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    cr_assert_eq(testsrv_start(server_path, argv, &srv), 0);
    cr_assert_eq(retryd_client_new(&co, &client), 0);
}

static inline void exec_teardown(void)
{
    retryd_client_free(client);
    testsrv_stop(srv);
    EXEC_CLEANUP();
}

#ifdef FAULTSRV_PATH
static inline void exec_setup(void)
{
    exec_start(FAULTSRV_PATH, NULL);
}
#endif

#endif

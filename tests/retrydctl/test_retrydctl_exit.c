/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request's exit codes are curl's for what curl also sees: a
 * name that does not resolve (6), a refused connection (7), a write that
 * fails (23, the final flush's ENOSPC included), a timeout (28), a TLS
 * handshake that fails (35), an untrusted certificate (60); retryd's own
 * (2: ambiguous) stay, and win over a write error.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "run.h"
#include "testsrv.h"

static testsrv *plain, *tls;
static run_result res;
static char url[256];

static void setup(void)
{
    char *argv_tls[] = {"--tls", NULL};
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &plain), 0);
    cr_assert_eq(testsrv_start(H2SRV_PATH, argv_tls, &tls), 0);
}

static void teardown(void)
{
    testsrv_stop(plain);
    testsrv_stop(tls);
}

TestSuite(retrydctl_exit, .init = setup, .fini = teardown, .timeout = 60);

static char *at(const char *scheme, testsrv *srv, const char *path)
{
    snprintf(url, sizeof(url), "%s://127.0.0.1:%d%s", scheme, testsrv_port(srv),
             path);
    return url;
}

#define REQUEST(...)                                                           \
    do {                                                                       \
        char *argv_[] = {RETRYDCTL_PATH, "request", __VA_ARGS__, NULL};        \
        cr_assert_eq(run_program(argv_, 20000, &res), 0);                      \
    } while (0)

Test(retrydctl_exit, unresolvable_name_exits_6)
{
    /* .invalid never resolves (RFC 6761). */
    REQUEST("--safe", "--max-attempts", "1", "http://no-such-host.invalid/");
    cr_expect_eq(res.exit_code, 6, "%s", res.err);
}

Test(retrydctl_exit, refused_connection_exits_7)
{
    char target[64];
    snprintf(target, sizeof(target), "http://127.0.0.1:%d/",
             testsrv_unused_port());
    REQUEST("--safe", "--max-attempts", "1", target);
    cr_expect_eq(res.exit_code, 7, "%s", res.err);
}

Test(retrydctl_exit, safe_read_that_times_out_exits_28)
{
    REQUEST("--safe", "--max-attempts", "1", "--max-time", "0.5",
            at("http", plain, "/hold?ms=5000&id=to"));
    cr_expect_eq(res.exit_code, 28, "%s", res.err);
}

Test(retrydctl_exit, tls_to_a_plain_server_exits_35)
{
    REQUEST("--safe", "--max-attempts", "1", "-k",
            at("https", plain, "/ok?id=tls"));
    cr_expect_eq(res.exit_code, 35, "%s", res.err);
}

Test(retrydctl_exit, untrusted_certificate_exits_60)
{
    REQUEST("--safe", "--max-attempts", "1", at("https", tls, "/ok?id=cert"));
    cr_expect_eq(res.exit_code, 60, "%s", res.err);
    REQUEST("--safe", "-k", at("https", tls, "/ok?id=cert-k"));
    cr_expect_eq(res.exit_code, 0, "-k trusts it: %s", res.err);
}

/* A two-byte body sits in stdio's buffer until the final flush: that
 * flush's ENOSPC is the error. */
Test(retrydctl_exit, full_disk_on_the_final_flush_exits_23)
{
    REQUEST("--safe", "-o", "/dev/full", at("http", plain, "/ok?id=full"));
    cr_expect_eq(res.exit_code, 23, "%s", res.err);
    cr_expect(strstr(res.err, "No space left") != NULL, "%s", res.err);
    REQUEST("-sS", "--safe", "-i", "-o", "/dev/full",
            at("http", plain, "/ok?id=full-i"));
    cr_expect_eq(res.exit_code, 23, "buffered (-i) too: %s", res.err);
}

Test(retrydctl_exit, full_disk_mid_body_exits_23)
{
    REQUEST("--safe", "-o", "/dev/full",
            at("http", plain, "/ok?len=1000000&id=big"));
    cr_expect_eq(res.exit_code, 23, "%s", res.err);
}

Test(retrydctl_exit, unwritable_output_file_exits_23)
{
    REQUEST("--safe", "-o", "/nonexistent-dir/out",
            at("http", plain, "/ok?id=nodir"));
    cr_expect_eq(res.exit_code, 23, "%s", res.err);
}

/* That the request may have run matters more than where its answer went. */
Test(retrydctl_exit, ambiguous_stays_2_whatever_the_output)
{
    REQUEST("-o", "/dev/full", at("http", plain, "/status?code=503&id=amb"));
    cr_expect_eq(res.exit_code, 2, "%s", res.err);
}

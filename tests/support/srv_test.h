/* SPDX-License-Identifier: MIT */
/* Helpers shared by the test servers' own tests (test_faultsrv.c,
 * test_h2srv.c): both run their server through testsrv.h, compare LOG
 * checksums, and insist that the server exits cleanly after every test.
 * Header-only (static inline): each of those tests is a single criterion
 * translation unit, and nothing else uses these. */
#ifndef RETRYD_SRV_TEST_H
#define RETRYD_SRV_TEST_H

#include "testsrv.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

/* FNV-1a 64, the body checksum the servers print in LOG. Written out here
 * rather than taken from the servers, so the tests check their format. */
static inline uint64_t srvtest_fnv1a64(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* The server must exit with status 0 when asked to: under sanitizers that
 * is what turns a report inside the server (a leak, a race) into a failed
 * test. Not done in .fini: criterion 2.4 ignores assertion failures there.
 * The caller still frees srv (testsrv_stop). */
static inline void srvtest_assert_clean_exit(testsrv *srv, int timeout_ms)
{
    int st = -1;
    int rc = testsrv_terminate(srv, timeout_ms, &st);

    cr_assert_eq(rc, 0, "server did not exit: %s", strerror(-rc));
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "server exit status %#x (sanitizer report on stderr?)", st);
}

/* Test(suite, name) whose body is followed by expect_clean_exit(), so that
 * no test can forget it. The test file defines expect_clean_exit(): it
 * calls srvtest_assert_clean_exit() and frees what the suite set up. */
#define SRV_TEST(suite, name)                                                  \
    static void suite##_##name##_body(void);                                   \
    Test(suite, name)                                                          \
    {                                                                          \
        suite##_##name##_body();                                               \
        expect_clean_exit();                                                   \
    }                                                                          \
    static void suite##_##name##_body(void)

#endif

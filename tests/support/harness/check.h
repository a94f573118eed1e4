/* SPDX-License-Identifier: MIT */
/*
 * A minimal harness for tests that must also run under the thread
 * sanitizer, where criterion cannot (its BoxFort arena maps fixed addresses
 * outside TSan's application ranges; Criterion issue #274). Each such test
 * is a plain program: CHECK() failures print where and why, and the program
 * exits 1; ctest bounds its time.
 */
#ifndef RETRYD_TEST_CHECK_H
#define RETRYD_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__,   \
                    #cond);                                                    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* Exit code ctest reads as "skipped" (SKIP_RETURN_CODE). */
#define CHECK_SKIP_CODE 77

#define CHECK_SKIP(...)                                                        \
    do {                                                                       \
        fprintf(stderr, "SKIP: ");                                             \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
        exit(CHECK_SKIP_CODE);                                                 \
    } while (0)

#endif

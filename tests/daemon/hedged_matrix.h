/* SPDX-License-Identifier: MIT */
/*
 * The executor's fault x idempotency x body matrix with hedging on
 * (docs/hedging.md): tests/libclient/exec/test_executor.c compiled again
 * with -include this header. Every profile hedges after 1 us (at the
 * loop's next turn after an attempt goes out: every attempt that is not
 * answered at once is hedged, through every fault of the matrix), and the
 * budgets are a real daemon's, generous enough that every hedge due is
 * paid for; each test runs its own daemon. What must still hold: a
 * non-idempotent request, or one with a one-shot body, runs exactly as
 * often as without hedging (at most once where it must not run twice);
 * the rest keep their outcome, with at most one hedge a round.
 */
#ifndef RETRYD_TEST_HEDGED_MATRIX_H
#define RETRYD_TEST_HEDGED_MATRIX_H

#include <stdbool.h>

#include "harness.h"
#include "retryd/retryd.h"

static rd_daemon hedged_daemon;
static bool hedged_daemon_up;

/* The daemon of this test process, started on first use. */
static inline const char *hedged_control(void)
{
    if (!hedged_daemon_up) {
        if (rd_daemon_init(&hedged_daemon, "[defaults]\nmax_extra_load = 1\n"
                                           "min_hedges_per_sec = 1000\n"
                                           "hedge_cap = 100000\n") != 0 ||
            rd_daemon_start(&hedged_daemon) != 0)
            return "/nonexistent/control.sock"; /* the test then fails */
        hedged_daemon_up = true;
    }
    return hedged_daemon.control;
}

static inline void hedged_cleanup(void)
{
    if (hedged_daemon_up)
        rd_daemon_cleanup(&hedged_daemon);
    hedged_daemon_up = false;
}

#define EXEC_CONTROL_SOCKET hedged_control()
#define EXEC_HOST_FLAGS 0u
#define EXEC_CLEANUP() hedged_cleanup()
#define EXEC_HEDGE_POLICY                                                      \
    (&(const retryd_hedge_policy){sizeof(retryd_hedge_policy),                 \
                                  RETRYD_HEDGE_FIXED, 1000, 1})

#endif

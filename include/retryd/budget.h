/* SPDX-License-Identifier: MIT */
/*
 * retryd: the host retry budget.
 *
 * Every process on a host that calls an upstream draws its retries from one
 * token bucket per upstream, kept by the retryd daemon in a shared-memory
 * segment. First attempts deposit a fraction of a token ("ratio"); each
 * retry withdraws one whole token; a floor refills with time; a cap bounds
 * the balance. After the first lookup of a name, every operation is a few
 * atomic instructions on shared memory: no lock, no system call, no round
 * trip to the daemon.
 *
 * Without a daemon (not started, crashed, socket missing, or this process
 * not authorised) the same operations run on a process-local bucket with
 * the same semantics, and the library re-attaches when the daemon is back.
 * Services with their own HTTP stack use this API directly; the decision
 * engine reaches it through retryd_upstream_budget (retryd/budget_decide.h,
 * the one header that knows both the budget and the engine).
 */
#ifndef RETRYD_BUDGET_H
#define RETRYD_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "retryd/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An attachment to the host budget (or to the local fallback). */
typedef struct retryd_host retryd_host;
/** One upstream's budget, as seen by this process. */
typedef struct retryd_upstream retryd_upstream;

/** The control socket used when none is given. */
#define RETRYD_DEFAULT_CONTROL_SOCKET "/run/retryd/control.sock"
/** The environment variable that overrides it. */
#define RETRYD_CONTROL_SOCKET_ENV "RETRYD_CONTROL_SOCKET"

/** Never contact a daemon: process-local budgets only. */
#define RETRYD_HOST_LOCAL_ONLY 0x1u

/** Options of retryd_host_open(); zero-initialise, then set sz. */
typedef struct retryd_host_opts {
    size_t sz; /**< sizeof(retryd_host_opts), so the struct can grow */
    /** NULL: $RETRYD_CONTROL_SOCKET, else RETRYD_DEFAULT_CONTROL_SOCKET. */
    const char *control_socket;
    /** Bound on each exchange with the daemon; 0: 1000 ms. */
    int timeout_ms;
    unsigned flags; /**< RETRYD_HOST_* */
    /** Free text the daemon logs for this process (e.g. program name). */
    const char *client_name;
} retryd_host_opts;

/** Budget parameters of one upstream, in tokens. */
typedef struct retryd_budget_params {
    size_t sz;    /**< sizeof(retryd_budget_params) (docs/abi.md) */
    double ratio; /**< deposited per first attempt (0.1) */
    double min_retries_per_sec; /**< floor refill (10) */
    double cap;                 /**< the balance never exceeds it (100) */
} retryd_budget_params;

/** retryd's defaults: ratio 0.1, floor 10/s, cap 100 (docs/budget.md). */
RETRYD_EXPORT extern const retryd_budget_params retryd_budget_defaults;

/**
 * Attach this process to the host budget.
 *
 * Connects to the daemon's control socket, maps the segment and takes a
 * process slot. When no daemon answers this still succeeds: budgets are
 * then process-local until a daemon is reachable again.
 *
 * @param opts  NULL for all defaults; else opts->sz must be set.
 * @param ret   the new host, owned by the caller (retryd_host_close()).
 * @return 0, RETRYD_EINVAL (bad options), RETRYD_ENOMEM.
 */
RETRYD_EXPORT int retryd_host_open(const retryd_host_opts *opts,
                                   retryd_host **ret);

/**
 * Detach and free the host and every upstream handle it gave out. The
 * caller guarantees no thread still uses any of them. Accepts NULL.
 */
RETRYD_EXPORT void retryd_host_close(retryd_host *host);

/** True when budgets are shared through the daemon's segment right now. */
RETRYD_EXPORT bool retryd_host_attached(retryd_host *host);

/**
 * Mark this process as draining (or not). While this process or the host
 * (retrydctl drain on) drains, retry decisions deny retries.
 */
RETRYD_EXPORT void retryd_host_set_draining(retryd_host *host, bool on);

/** This process's or the host's draining flag. */
RETRYD_EXPORT bool retryd_host_draining(retryd_host *host);

/**
 * Whether this process shares the host budget, and if not why: what its
 * last attempt to attach found. A process that does not share spends
 * from process-local buckets (docs/budget.md). New values may be added.
 */
typedef enum retryd_share_status {
    RETRYD_SHARE_SHARED = 0,     /**< attached: spends from the host segment */
    RETRYD_SHARE_LOCAL_ONLY = 1, /**< RETRYD_HOST_LOCAL_ONLY: never asked */
    /** No daemon: its socket is missing, refuses or does not answer. */
    RETRYD_SHARE_NO_DAEMON = 2,
    /** The socket's mode or the daemon's allow lists refuse this user. */
    RETRYD_SHARE_NOT_AUTHORISED = 3,
    /** The segment's header failed validation (damaged?). */
    RETRYD_SHARE_SEGMENT_BAD_HEADER = 4,
    /** The segment has another layout version than this library's. */
    RETRYD_SHARE_SEGMENT_BAD_VERSION = 5,
    /** The segment is not of the size the daemon announced. */
    RETRYD_SHARE_SEGMENT_BAD_SIZE = 6,
    /** The descriptor is not sealed against resizing: refused unmapped. */
    RETRYD_SHARE_SEGMENT_NOT_SEALED = 7,
    /** The daemon has no free process slot (process_capacity). */
    RETRYD_SHARE_NO_PROCESS_SLOT = 8,
    /** The daemon answered something else (another protocol version?). */
    RETRYD_SHARE_PROTOCOL = 9,
} retryd_share_status;

/** Why @p host shares the host budget or not (RETRYD_SHARE_NO_DAEMON for
 * NULL). Cheap: one load. */
RETRYD_EXPORT retryd_share_status retryd_host_share_status(retryd_host *host);

/** The name of @p s ("shared", "no-daemon", ...); "unknown" for others. */
RETRYD_EXPORT const char *retryd_share_status_name(retryd_share_status s);

/**
 * The budget of the upstream named @p name (1 to 95 printable bytes).
 *
 * The first call for a name registers it with the daemon (idempotent by
 * name); later calls return the same handle without contacting anyone. The
 * handle belongs to @p host and lives until retryd_host_close(); there is
 * nothing to free. Safe from any thread.
 *
 * @param params  NULL: the daemon's configured or default parameters.
 *                Otherwise they must match what the upstream is registered
 *                with.
 * @return 0, RETRYD_EINVAL (bad name or parameters, or params->sz unset),
 *         RETRYD_EOPTS (a params field this library does not know is set),
 *         RETRYD_ECONFLICT (the
 *         name is registered with other parameters), RETRYD_ENOMEM.
 */
RETRYD_EXPORT int retryd_upstream_open(retryd_host *host, const char *name,
                                       const retryd_budget_params *params,
                                       retryd_upstream **ret);

/** Record a first attempt: deposits the ratio. 0, or a negative code. */
RETRYD_EXPORT int retryd_upstream_deposit(retryd_upstream *up);

/**
 * Take one token for a retry, all-or-nothing. While the bucket is short,
 * the host keeps fair shares (docs/budget.md#fair-shares): each process
 * may spend what its own first attempts earned, and borrow only what no
 * other process is owed.
 * @return 0, RETRYD_EBUDGET when there is no whole token, or RETRYD_ESHARE
 *         when the tokens there are owed to other processes.
 */
RETRYD_EXPORT int retryd_upstream_withdraw(retryd_upstream *up);

/**
 * retryd_upstream_withdraw() for a request that has taken @p taken tokens
 * already: one request may take at most the upstream's request_share
 * (20 % unless configured) of the balance it finds, and always its first.
 * @return 0, RETRYD_EBUDGET, RETRYD_ESHARE, or RETRYD_EREQSHARE when the
 *         request has taken its share (nothing is taken).
 */
RETRYD_EXPORT int retryd_upstream_withdraw_for(retryd_upstream *up,
                                               uint32_t taken);

/** Whether at least one token is there (takes nothing). */
RETRYD_EXPORT bool retryd_upstream_peek(retryd_upstream *up);

/** The balance, in tokens. @return 0, or a negative code. */
RETRYD_EXPORT int retryd_upstream_balance(retryd_upstream *up,
                                          double *ret_tokens);

/** True when this handle spends from the host's shared bucket. */
RETRYD_EXPORT bool retryd_upstream_shared(retryd_upstream *up);

/** The name the handle was opened with (owned by the handle). */
RETRYD_EXPORT const char *retryd_upstream_name(const retryd_upstream *up);

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_BUDGET_H */

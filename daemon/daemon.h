/* SPDX-License-Identifier: MIT */
/*
 * retryd's state, shared by its parts. The main thread runs the event loop
 * (control socket, pidfds, signals, heartbeat) and is the only writer of
 * the registry, the configuration pointer and the segment's slot tables.
 * The stats thread only reads, inside RCU read-side sections.
 *
 * One error convention in every wing: a function that can fail returns 0
 * (or a descriptor, a count) on success and a negative RETRYD_E* code on
 * failure, a negated errno where one fits (retryd/common.h). -1 means only
 * what a function documents as "none" (no deadline for epoll, no such
 * key) or, in a connection's input path, "close it".
 */
#ifndef RETRYD_DAEMON_H
#define RETRYD_DAEMON_H

#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/queue.h"
#include "core/config.h"
#include "core/fdlimit.h"
#include "segment/owner.h"
#include "segment/registry.h"
#include "retryd.pb-c.h"
#include "retryd/version.h"

#define RETRYD_DAEMON_VERSION RETRYD_VERSION_STRING

/*
 * What a peer of the control socket may hold (docs/daemon.md, "Limits").
 * A connection that attached a process slot is bounded by the slots (and
 * process_slots_per_uid); every other one ("unattached": handshaking, or
 * greeted without a slot, as retrydctl's) comes from a pool shared by all
 * peers. The pool's size, its share per user and per process, and the
 * hello, frame, idle and write deadlines are configuration keys
 * (config.h); what follows is fixed.
 */
/* Connections accepted per turn of the loop, so a connect storm cannot
 * hold it. */
#define CONTROL_ACCEPT_BATCH 32
/* Reply bytes queued for one connection; a peer that lets more pile up by
 * not reading is closed. Replies are a few hundred bytes. */
#define CONTROL_OUTPUT_MAX (16u * 1024)
/* The kernel's send buffer of a control connection (it doubles it): a few
 * replies a peer has not read, not the default's ~270, so one that never
 * reads is stopped (no request is read while a reply waits) after a few
 * round trips instead of hundreds. */
#define CONTROL_SNDBUF 4096
/* A refused (unauthorised) peer's descriptor is kept, half-closed and never
 * read, at most this long and at most this many at once, so that the peer
 * can read why before its first request fails on a closed socket. */
#define CONTROL_REFUSED_LINGER_MS 250
#define CONTROL_REFUSED_LINGER_MAX 64

typedef struct conn conn;

/* The control connections' deadlines: one FIFO per timeout. Each timeout
 * has one length, so a queue is sorted by deadline when every push goes
 * to its tail: expiring looks at heads only, pushing is O(1). */
enum conn_timer {
    CONN_T_HELLO, /* not greeted yet: accepted + hello_timeout_ms */
    CONN_T_FRAME, /* a frame begun: first byte + frame_timeout_ms */
    CONN_T_IDLE,  /* unattached: last traffic + idle_timeout_ms */
    CONN_T_WRITE, /* replies pending: last progress + write_timeout_ms */
    CONN_TIMERS
};

typedef struct conn_queue {
    retryd_queue q; /* of conn's t[k].node, oldest deadline first */
    unsigned n; /* its length: for CONN_T_IDLE, the unattached pool's size */
} conn_queue;

/* What an epoll event points at. */
typedef enum watch_kind {
    WATCH_CONTROL_LISTEN,
    WATCH_CONN,
    WATCH_PIDFD,
    WATCH_SIGNAL,
    WATCH_TIMER,
    WATCH_FLEET, /* the fleet thread has a sync's outcome (daemon/fleet) */
} watch_kind;

typedef struct watch {
    watch_kind kind;
    void *ptr;     /* conn for WATCH_CONN */
    uint32_t slot; /* process slot for WATCH_PIDFD */
} watch;

typedef struct proc_track {
    int pidfd; /* -1 when not watched */
    watch w;
    conn *conn; /* the connection that attached it, if still open */
} proc_track;

/*
 * The fleet tier's state as the statistics show it (docs/fleet.md):
 * written by the fleet thread under server.fleet_lock, copied out under it
 * by the stats thread. What the configuration says (redis, name, host_id,
 * sync_interval) is read from the configuration.
 */
enum fleet_state {
    FLEET_OFF,       /* no [fleet] section */
    FLEET_JOINING,   /* linked, not yet in a complete interval of the fleet */
    FLEET_CONNECTED, /* the last sync succeeded: the fleet's views apply */
    FLEET_FALLBACK,  /* Redis refused or did not answer: host-only budgets */
};

#define FLEET_ERROR_MAX 256

typedef struct fleet_status {
    int state;                       /* enum fleet_state */
    uint64_t last_sync_unix_ms;      /* the last sync that succeeded; 0 none */
    uint64_t last_sync_ns;           /* the same, CLOCK_MONOTONIC */
    uint64_t fallback_since_unix_ms; /* 0 unless in fallback */
    uint64_t syncs, sync_failures;   /* since the daemon started */
    uint64_t fallbacks;              /* times it went to fallback */
    uint64_t connects;               /* links made (logins) */
    uint64_t round_trip_us;          /* of the last sync */
    uint32_t upstreams;              /* taking part in the last sync */
    uint32_t upstreams_applied;      /* of them, with a view in force */
    char last_error[FLEET_ERROR_MAX];
} fleet_status;

typedef struct server {
    config *cfg; /* RCU: rcu_dereference() in readers */
    owner seg;
    registry *reg;
    proc_track *procs; /* one per process slot */
    uint32_t watched;  /* of them, with a pidfd open */
    /* Processes the descriptor limit leaves room for (each holds its
     * connection and its pidfd), the rest set apart for what else may be
     * open (core/fdlimit.h); an attach beyond it is refused, told why. */
    uint32_t fd_room;
    int epfd;
    int control_fd;
    accept_guard control_guard; /* its spare descriptor, its pauses */
    int stats_fd;
    int lock_fd;
    int name_lock_fd; /* the abstract-socket lock (retryd.c, take_lock) */
    int stop_fd;      /* eventfd: tells the stats thread to stop */
    int signal_fd;
    int timer_fd;
    retryd_queue conns; /* every open control connection (conn.link) */
    retryd_queue dead;  /* closed during this epoll batch, freed after it */
    conn_queue timers[CONN_TIMERS];
    /* Refused peers' descriptors, oldest first (a ring). */
    int refused_fd[CONTROL_REFUSED_LINGER_MAX];
    uint64_t refused_due_ns[CONTROL_REFUSED_LINGER_MAX];
    unsigned refused_first, refused_n;
    uint64_t started_ns;
    /* Attaches refused a process slot, by why (written by the main
     * thread, read by the stats thread). */
    _Atomic uint64_t slots_refused_capacity, slots_refused_quota;
    _Atomic uint64_t upstreams_refused_quota;
    pthread_t stats_thread;
    bool stats_running;
    /* The /metrics endpoint (metrics.h): opened by the main thread, handed
     * to the stats thread through these (under the lock), which serves it
     * and closes the one it replaces. */
    pthread_mutex_t metrics_lock;
    struct metrics *metrics_next; /* NULL: off */
    bool metrics_pending;         /* metrics_next waits to be taken */
    int metrics_wake_fd;          /* eventfd: wakes the stats thread */
    /* The per-program ledger (stats/programs.h): folded by the main
     * thread as slots are released, sampled on the heartbeat. */
    struct programs *programs;
    /* Per upstream slot, for upstream_idle_retire (upstreams.c): its
     * activity at the last heartbeat and since when it has not moved. */
    struct idle_slot {
        uint64_t activity, since_ns;
    } * idle;
    /* The fleet tier (daemon/fleet): its thread's state, and what the
     * statistics read of it (under fleet_lock). */
    struct fleet *fleet; /* NULL: off */
    pthread_mutex_t fleet_lock;
    fleet_status fleet_status;
} server;

#endif

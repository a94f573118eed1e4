/* SPDX-License-Identifier: MIT */
/*
 * retryd's state, shared by its parts. The main thread runs the event loop
 * (control socket, pidfds, signals, heartbeat) and is the only writer of
 * the registry, the configuration pointer and the segment's slot tables.
 * The stats thread only reads, inside RCU read-side sections.
 */
#ifndef RETRYD_DAEMON_H
#define RETRYD_DAEMON_H

#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "owner.h"
#include "registry.h"
#include "retryd.pb-c.h"

#define RETRYD_DAEMON_VERSION "0.2.0"

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
    conn *head, *tail;
    unsigned n; /* its length: for CONN_T_IDLE, the unattached pool's size */
} conn_queue;

/* What an epoll event points at. */
typedef enum watch_kind {
    WATCH_CONTROL_LISTEN,
    WATCH_CONN,
    WATCH_PIDFD,
    WATCH_SIGNAL,
    WATCH_TIMER,
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

typedef struct server {
    config *cfg; /* RCU: rcu_dereference() in readers */
    owner seg;
    registry *reg;
    proc_track *procs; /* one per process slot */
    int epfd;
    int control_fd;
    int stats_fd;
    int lock_fd;
    int stop_fd; /* eventfd: tells the stats thread to stop */
    int signal_fd;
    int timer_fd;
    conn *conns; /* every open control connection */
    conn *dead;  /* closed during this epoll batch, freed after it */
    conn_queue timers[CONN_TIMERS];
    /* Refused peers' descriptors, oldest first (a ring). */
    int refused_fd[CONTROL_REFUSED_LINGER_MAX];
    uint64_t refused_due_ns[CONTROL_REFUSED_LINGER_MAX];
    unsigned refused_first, refused_n;
    uint64_t started_ns;
    /* Attaches refused a process slot, by why (written by the main
     * thread, read by the stats thread). */
    _Atomic uint64_t slots_refused_capacity, slots_refused_quota;
    pthread_t stats_thread;
    bool stats_running;
    /* The /metrics endpoint (metrics.h): opened by the main thread, handed
     * to the stats thread through these (under the lock), which serves it
     * and closes the one it replaces. */
    pthread_mutex_t metrics_lock;
    struct metrics *metrics_next; /* NULL: off */
    bool metrics_pending;         /* metrics_next waits to be taken */
    int metrics_wake_fd;          /* eventfd: wakes the stats thread */
} server;

/* control.c: the control socket (main thread). */
/* Whether a peer may use a socket: root, our own user, a listed user, or
 * a member (primary or supplementary) of a listed group or, on the stats
 * socket, of stats_group. The one check both sockets make. */
bool daemon_peer_allowed(int fd, uid_t uid, gid_t gid, const config *c,
                         bool stats);
int control_accept(server *d);
void control_ready(server *d, conn *c, uint32_t events);
void control_close_all(server *d);
/* Milliseconds until the next control deadline (-1: none), for
 * epoll_wait(); control_expire() closes what is due. */
int control_next_timeout_ms(const server *d);
void control_expire(server *d);
/* Connections closed during an epoll batch stay allocated (events of the
 * same batch may name them) until control_reap() after the batch. */
bool control_dead(const conn *c);
void control_reap(server *d);
/* Watch a process slot's owner through @p pidfd, so its exit releases the
 * slot. On failure the descriptor stays the caller's to close. */
int daemon_watch_process(server *d, uint32_t slot, int pidfd);
/* A process slot's owner is gone (pidfd) or detached (hang-up). */
void daemon_release_process(server *d, uint32_t slot);

/* Registration, shared by the control handler, startup and reload. It
 * refuses a malformed name (RETRYD_EINVAL), so a client's name is checked
 * here; the configuration and an adopted segment check their own. */
int daemon_register(server *d, const char *name, const budget_params *given,
                    reg_entry *ret);

/* The eviction order of the stats socket's and /metrics's connections
 * when places run out: whether one (@p answered: its request is in;
 * accepted at @p at_ns) goes before another (@p other_answered,
 * @p other_at_ns): one still sending its request before one being
 * answered, then the oldest. */
static inline bool daemon_evict_before(bool answered, uint64_t at_ns,
                                       bool other_answered,
                                       uint64_t other_at_ns)
{
    return (other_answered && !answered) ||
           (other_answered == answered && at_ns < other_at_ns);
}

/* stats.c: the stats thread. It serves many readers at once (its own
 * epoll), each with a deadline; when all STATS_CONNECTIONS_MAX are taken
 * the oldest is closed for the newcomer. */
#define STATS_CONNECTIONS_MAX 64
/* The request must arrive this soon after the connection is accepted. */
#define STATS_REQUEST_TIMEOUT_MS 1000
/* The reply must be read this soon after it was built. */
#define STATS_REPLY_TIMEOUT_MS 5000
/* Reply bytes waiting for all readers together; a request that would go
 * over gets an error instead. */
#define STATS_OUTPUT_TOTAL_MAX (64u * 1024 * 1024)
int stats_start(server *d);
void stats_stop(server *d);

/* Per Counters message: denials (index 0 unused, as the proto's
 * Counters.denied is indexed by denial reason), then evidence. */
#define STATS_DENIED (SEG_C_DENIED_COUNT + 1)
#define STATS_NUMBERS (STATS_DENIED + SEG_C_EVIDENCE_COUNT)

typedef struct stats_build {
    const server *d;
    uint64_t (*totals)[SEG_COUNTERS];
    Retryd__UpstreamStats *ups;
    Retryd__UpstreamStats **up_ptrs;
    /* Copies: a registry entry may be freed once the read section ends,
     * before the reply is packed. */
    char (*names)[SEG_NAME_MAX + 1];
    Retryd__Params *params;
    Retryd__Counters *counters;
    uint64_t *numbers; /* denied and evidence arrays */
    size_t n, cap;
} stats_build;

/* A stats reply and the arrays it points into, copied out of one RCU
 * read-side section: what the stats socket packs and /metrics renders.
 * Only threads registered with RCU (the stats thread) take one. */
typedef struct stats_snapshot {
    Retryd__StatsReply rep;
    Retryd__SegmentHealth health;
    stats_build b;
    Retryd__ProcessStats *ps;
    Retryd__ProcessStats **pptr;
    Retryd__Counters *pcs;
    uint64_t *pnum;
    char (*programs)[OWNER_PROGRAM_MAX];
} stats_snapshot;
int stats_snapshot_take(server *d, bool processes, stats_snapshot *s);
void stats_snapshot_free(stats_snapshot *s);

/* upstreams.c */
int daemon_retire(server *d, const char *name);
/* Configured upstreams get the configuration's parameters (registered if
 * new); any other registered upstream keeps its own. */
void daemon_apply_config(server *d);
void daemon_adopt_upstreams(server *d);
#endif

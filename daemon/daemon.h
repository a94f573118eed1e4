/*
 * retryd's state, shared by its parts. The main thread runs the event loop
 * (control socket, pidfds, signals, heartbeat) and is the only writer of
 * the registry, the configuration pointer and the segment's slot tables.
 * The stats thread only reads, inside RCU read-side sections.
 */
#ifndef RETRYD_DAEMON_H
#define RETRYD_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "owner.h"
#include "registry.h"

#define RETRYD_DAEMON_VERSION "0.1.0"
/* Control connections beyond the process slots (operators, retrydctl). */
#define DAEMON_SPARE_CONNECTIONS 64

typedef struct conn conn;

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
    unsigned n_conns;
    uint64_t started_ns;
    pthread_t stats_thread;
    bool stats_running;
} server;

/* control.c: the control socket (main thread). */
/* Whether a peer may use a socket: root, our own user, a listed user, or
 * a member (primary or supplementary) of a listed group or, on the stats
 * socket, of stats_group. The one check both sockets make. */
bool daemon_peer_allowed(int fd, uid_t uid, gid_t gid, const config *c,
                         bool stats);
int control_accept(server *d);
void control_ready(server *d, conn *c);
void control_close_all(server *d);
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

/* stats.c: the stats thread. */
int stats_start(server *d);
void stats_stop(server *d);

/* upstreams.c */
int daemon_retire(server *d, const char *name);
/* Configured upstreams get the configuration's parameters (registered if
 * new); any other registered upstream keeps its own. */
void daemon_apply_config(server *d);
void daemon_adopt_upstreams(server *d);
#endif

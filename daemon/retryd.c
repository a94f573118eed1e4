/* SPDX-License-Identifier: MIT */
/*
 * retryd: the host daemon. It owns the budget segment, registers upstreams,
 * notices dead clients (socket hang-up, pidfd), serves statistics and the
 * host-wide draining flag. Budgets never wait for it: clients spend
 * directly in the segment, which survives this process and is adopted by
 * the next one. docs/daemon.md is the operator's guide.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sys/pidfd.h>
#include "core/rcu.h"

#include "shared/bucket.h"
#include "control/control.h"
#include "daemon.h"
#include "fleet/fleet.h"
#include "segment/keeper.h"
#include "segment/upstreams.h"
#include "stats/stats.h"
#include "core/fdlimit.h"
#include "core/log.h"
#include "notify.h"
#include "stats/metrics.h"
#include "stats/programs.h"
#include "base/macros.h"
#include "retryd/common.h"

#define DEFAULT_CONFIG "/etc/retryd/retryd.conf"
#define HEARTBEAT_MS 1000

/* The timer ticks every HEARTBEAT_MS, or faster when the watchdog needs
 * it (notify_tick_ns()); the heartbeat itself stays at HEARTBEAT_MS. */
static uint64_t tick_ns;
static uint64_t last_heartbeat_ns;
/* The descriptor limit in force, and the one inherited (fd_limit_raise). */
static uint64_t fd_limit, fd_limit_before;

/* --- the runtime directory and the sockets ------------------------------- */

/* What the runtime directory's paths named when the daemon made them:
 * the heartbeat checks they still do (runtime_dir_lost()). */
static struct stat control_st, stats_st;

static int prepare_runtime_dir(const config *c)
{
    /* Group members reach the sockets; others cannot even list the
     * directory. A separate stats group needs to traverse it. */
    mode_t mode =
        c->has_stats_group && c->has_group && c->stats_group != c->group ? 0751
                                                                         : 0750;
    struct stat st;
    if (mkdir(c->runtime_dir, mode) < 0 && errno != EEXIST) {
        int err = -errno;
        log_err("cannot create %s: %s", c->runtime_dir, strerror(-err));
        return err;
    }
    if (lstat(c->runtime_dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid()) {
        log_err("%s is not a directory of ours", c->runtime_dir);
        return RETRYD_EPERM;
    }
    if (chmod(c->runtime_dir, mode) < 0 ||
        (c->has_group && chown(c->runtime_dir, (uid_t)-1, c->group) < 0)) {
        int err = -errno;
        log_err("cannot set the mode or group of %s: %s", c->runtime_dir,
                strerror(-err));
        return err;
    }
    return 0;
}

/*
 * The runtime directory's second lock: a name in the abstract socket
 * namespace, made of the directory's path, which no file operation can
 * remove. The lock file goes with a removed directory, and a second
 * daemon would take a fresh one beside the first; this name stays bound
 * until the daemon's descriptor closes (the keeper closes every inherited
 * one). A path too long for the name is replaced by its FNV-1a hash.
 */
static int take_name_lock(server *d)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    const char *dir = d->cfg->runtime_dir;
    int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
                     "retryd-runtime-dir:%s", dir);
    if (n < 0 || (size_t)n >= sizeof(sa.sun_path) - 1) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (const char *p = dir; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
        n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
                     "retryd-runtime-dir-hash:%016llx", (unsigned long long)h);
    }
    d->name_lock_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (d->name_lock_fd < 0 ||
        bind(d->name_lock_fd, (struct sockaddr *)&sa, len) < 0) {
        int err = -errno;
        log_err("%s: %s", dir,
                err == -EADDRINUSE
                    ? "another retryd runs here (its lock file may have "
                      "been removed with the directory)"
                    : strerror(-err));
        return err;
    }
    return 0;
}

/* One daemon per runtime directory: the lock file says who owns it. */
static int take_lock(server *d)
{
    d->lock_fd = open(d->cfg->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (d->lock_fd < 0 || flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        int err = -errno;
        log_err("%s: %s", d->cfg->lock_path,
                err == -EWOULDBLOCK ? "another retryd runs here"
                                    : strerror(-err));
        return err;
    }
    return take_name_lock(d);
}

/* A listening socket at @p path; *ret_st is what the path names then. */
static int listen_at(const char *path, bool has_group, gid_t group,
                     struct stat *ret_st)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* The longest backlog the kernel allows (net.core.somaxconn): a
     * connect storm must outrun the accept loop longer before a client's
     * connect finds the queue full. */
    memcpy(sa.sun_path, path, strlen(path) + 1);
    unlink(path); /* a stale socket of a previous daemon; we hold the lock */
    mode_t old = umask(0117); /* born 0660: never a moment more open */
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (r < 0 || (has_group && chown(path, (uid_t)-1, group) < 0) ||
        chmod(path, 0660) < 0 || listen(fd, SOMAXCONN) < 0 ||
        stat(path, ret_st) < 0) {
        int err = -errno;
        log_err("cannot listen on %s: %s", path, strerror(-err));
        close(fd);
        return err;
    }
    return fd;
}

static bool same_file(const char *path, const struct stat *was)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_dev == was->st_dev &&
           st.st_ino == was->st_ino;
}

/*
 * Whether the runtime directory or a socket in it is gone (removed,
 * replaced): then no new process can reach the daemon, and a second
 * daemon could start there. Said once, as an error; the daemon exits
 * non-zero, so the service manager (Restart=on-failure) starts a fresh
 * one, which makes the directory and sockets again.
 */
static bool runtime_dir_lost(const server *d)
{
    const config *c = d->cfg;
    const char *gone =
        !same_file(c->control_socket, &control_st) ? c->control_socket
        : !same_file(c->stats_socket, &stats_st)   ? c->stats_socket
                                                   : NULL;
    if (gone == NULL)
        return false;
    log_err("%s is gone or replaced (was the runtime directory %s "
            "removed?): no process can reach this daemon; exiting so that "
            "the service manager starts a fresh one",
            gone, c->runtime_dir);
    return true;
}

/* --- processes ----------------------------------------------------------- */

/* After adopting a segment: keep the slots of live processes, watched by
 * pidfd until they exit or re-attach; fold and free the others. */
static void adopt_processes(server *d)
{
    unsigned kept = 0, freed = 0;
    for (uint32_t i = 0; i < d->seg.view.process_capacity; i++) {
        seg_process *p = &d->seg.view.processes[i];
        uint64_t id = atomic_load(&p->ident);
        if (seg_ident_state(id) == SEG_FREE)
            continue;
        uint64_t pid = atomic_load(&p->pid);
        int pidfd =
            seg_ident_state(id) == SEG_ACTIVE && pid > 0 && pid < (1u << 22)
                ? pidfd_open((pid_t)pid, 0)
                : -1;
        /* The start time is read after the pidfd exists, so a pid that
         * was recycled in between is caught here. */
        if (pidfd >= 0 &&
            retryd__process_start_time(pid) == atomic_load(&p->start_time) &&
            daemon_watch_process(d, i, pidfd) == 0) {
            kept++;
            continue;
        }
        if (pidfd >= 0)
            close(pidfd);
        owner_process_release(&d->seg, i);
        freed++;
    }
    log_info("adopted %u live processes, freed %u slots of gone ones", kept,
             freed);
}

/* The heartbeat, and the watchdog's ping: both from this turn of the
 * loop, so a loop that stops turning stops pinging and systemd kills it.
 * No sweep for dead processes is needed: every active process slot has a
 * pidfd (adopt_processes() frees a slot it cannot watch, attach_slot() one
 * it could not start watching), and the kernel reports each exit through
 * it. */
static bool on_timer(server *d)
{
    uint64_t expirations;
    if (read(d->timer_fd, &expirations, sizeof(expirations)) < 0 &&
        errno != EAGAIN)
        log_warn("timer: %s", strerror(errno));
    uint64_t now = retryd__clock_monotonic_ns();
    if (now - last_heartbeat_ns + tick_ns / 2 >= HEARTBEAT_MS * 1000000ull) {
        last_heartbeat_ns = now;
        if (runtime_dir_lost(d)) {
            notify_stopping("stopping: the runtime directory is gone");
            return true;
        }
        owner_heartbeat(&d->seg, d->cfg);
        daemon_retire_idle(d, retryd__clock_coarse_ns());
        programs_sample(d->programs);
        owner_check_envelope(&d->seg, d->cfg->segment_path);
        log_flush_suppressed();
    }
    notify_watchdog(now, tick_ns);
    return false;
}

static void on_pid_exit(server *d, uint32_t slot)
{
    seg_process *p = &d->seg.view.processes[slot];
    /* The event may be stale: earlier in this batch the slot may have been
     * released (hang-up) and even given to another process. Only a pidfd
     * that is readable now says this slot's process exited. */
    struct pollfd pf = {.fd = d->procs[slot].pidfd, .events = POLLIN};
    if (pf.fd < 0 || poll(&pf, 1, 0) != 1)
        return;
    log_debug("pid %llu exited: freeing process slot %u",
              (unsigned long long)atomic_load(&p->pid), slot);
    daemon_release_process(d, slot);
}

/* --- configuration ------------------------------------------------------- */

static void free_config_rcu(struct rcu_head *head)
{
    rd_rcu_reclaim();
    config_free(RETRYD_CONTAINER_OF(head, config, rcu));
}

/* How long a login check may take: at the start and at a reload the main
 * loop waits for it (no client is served during either for longer). */
#define FLEET_CHECK_NS (UINT64_C(1000) * 1000000)

/*
 * A [fleet] section that a reload brings or changes must log in: Redis
 * refusing it (a wrong password, an ACL) is a mistake in the file, and the
 * reload is refused like a syntax error; a Redis that does not answer
 * says nothing about the file, and the reload goes on (the host runs on
 * its own budgets until Redis answers). 0, or RETRYD_ECONFIG with @p err.
 */
static int reload_fleet_check(const config *o, const config *n, char *err,
                              size_t err_len)
{
    char why[512];
    if (!n->fleet.on || (o->fleet.on && fleet_same_link(&o->fleet, &n->fleet) &&
                         strcmp(o->fleet.name, n->fleet.name) == 0))
        return 0;
    int r = fleet_login_check(&n->fleet, FLEET_CHECK_NS, why, sizeof(why));
    if (r == RETRYD_EPERM) {
        snprintf(err, err_len, "%s: [fleet] redis %s: %s", n->path,
                 n->fleet.redis, why);
        return RETRYD_ECONFIG;
    }
    if (r < 0)
        log_warn("reload: [fleet] redis %s does not answer (%s): cannot "
                 "check the login now; the host runs on its own budgets "
                 "until it does",
                 n->fleet.redis, why);
    return 0;
}

/* Returns 0, or -1 with @p err saying why the file was refused (the
 * running configuration is kept). */
static int reload(server *d, char *err, size_t err_len)
{
    config *n;
    config *o = d->cfg;

    int r = config_load(o->path, &n, err, err_len);
    if (r == 0 && reload_fleet_check(o, n, err, err_len) < 0) {
        config_free(n);
        r = RETRYD_ECONFIG;
    }
    if (r < 0) {
        /* A log line per mistake; then one line for the caller's STATUS=
         * (a newline would end the notify message's assignment). */
        for (const char *l = err; *l != '\0';) {
            size_t len = strcspn(l, "\n");
            log_warn("reload refused, keeping the running configuration: %.*s",
                     (int)len, l);
            l += len + (l[len] == '\n');
        }
        for (char *nl = strchr(err, '\n'); nl != NULL; nl = strchr(nl, '\n'))
            *nl = ' ';
        return RETRYD_ECONFIG;
    }
    if (strcmp(n->runtime_dir, o->runtime_dir) != 0 ||
        strcmp(n->control_socket, o->control_socket) != 0 ||
        strcmp(n->stats_socket, o->stats_socket) != 0 ||
        strcmp(n->segment_path, o->segment_path) != 0 ||
        strcmp(n->lock_path, o->lock_path) != 0 ||
        n->upstream_capacity != o->upstream_capacity ||
        n->process_capacity != o->process_capacity)
        log_warn("reload: paths and capacities change only at restart");
    /* What is in use stays as it is, so the published configuration says
     * what the daemon does (teardown removes the sockets it names). */
    memcpy(n->runtime_dir, o->runtime_dir, sizeof(n->runtime_dir));
    memcpy(n->control_socket, o->control_socket, sizeof(n->control_socket));
    memcpy(n->stats_socket, o->stats_socket, sizeof(n->stats_socket));
    memcpy(n->segment_path, o->segment_path, sizeof(n->segment_path));
    memcpy(n->lock_path, o->lock_path, sizeof(n->lock_path));
    n->upstream_capacity = o->upstream_capacity;
    n->process_capacity = o->process_capacity;
    metrics_reload(d, o, n); /* a changed metrics_listen applies now */
    rd_rcu_publish();
    rcu_assign_pointer(d->cfg, n);
    log_set_level(n->log_level);
    daemon_apply_config(d);
    fleet_reconfigure(d, d->epfd);
    rd_call_rcu(&o->rcu, free_config_rcu);
    log_info("configuration reloaded from %s", n->path);
    return 0;
}

/* SIGHUP: RELOADING=1 before, READY=1 after, whether the new file was
 * taken or refused (then STATUS= says the old one runs, and why). */
static void reload_notified(server *d)
{
    char err[CONFIG_ERRORS_MAX_BYTES], status[700];
    notify_reloading();
    if (reload(d, err, sizeof(err)) == 0)
        snprintf(status, sizeof(status),
                 "serving; configuration reloaded from %.600s", d->cfg->path);
    else
        snprintf(
            status, sizeof(status),
            "serving with the previous configuration; reload refused: %.600s",
            err);
    notify_ready(status);
}

/* --- setup and the loop -------------------------------------------------- */

static int watch_fd(server *d, int fd, watch *w)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
    return epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* The signals the daemon reads from its signalfd. */
static void daemon_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
}

static int setup_signals_and_timer(server *d)
{
    sigset_t set;
    daemon_signals(&set); /* blocked since main(), in every thread */
    signal(SIGPIPE, SIG_IGN);
    d->signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    tick_ns = notify_tick_ns(HEARTBEAT_MS * 1000000ull);
    last_heartbeat_ns = retryd__clock_monotonic_ns();
    struct timespec tick = {.tv_sec = (time_t)(tick_ns / 1000000000),
                            .tv_nsec = (long)(tick_ns % 1000000000)};
    struct itimerspec its = {.it_interval = tick, .it_value = tick};
    if (d->signal_fd < 0 || d->timer_fd < 0 ||
        timerfd_settime(d->timer_fd, 0, &its, NULL) < 0)
        return -errno;
    return 0;
}

/* The loop's descriptors watched, and the threads started: the stats
 * thread (its socket, /metrics) and the fleet's. */
static int start_serving(server *d)
{
    static watch w_listen = {.kind = WATCH_CONTROL_LISTEN};
    static watch w_signal = {.kind = WATCH_SIGNAL};
    static watch w_timer = {.kind = WATCH_TIMER};
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &w_listen};
    if (watch_fd(d, d->control_fd, &w_listen) < 0 ||
        control_accept_guard(d, d->epfd, lev) < 0 ||
        watch_fd(d, d->signal_fd, &w_signal) < 0 ||
        watch_fd(d, d->timer_fd, &w_timer) < 0 || metrics_setup(d) < 0 ||
        stats_start(d) < 0 || fleet_start(d, d->epfd) < 0)
        return RETRYD_EIO;
    return 0;
}

static int setup(server *d)
{
    char why[512];
    bool adopted;

    d->started_ns = retryd__clock_monotonic_ns();
    fd_limit = fd_limit_raise(&fd_limit_before);
    int r;
    if ((r = prepare_runtime_dir(d->cfg)) < 0 || (r = take_lock(d)) < 0)
        return r;
    if ((r = owner_open(&d->seg, d->cfg, &adopted, why, sizeof(why))) < 0) {
        log_err("%s", why);
        return r;
    }
    log_info("%s segment %s (generation %016llx, %u upstreams, %u processes)",
             adopted ? "adopted" : "created", d->cfg->segment_path,
             (unsigned long long)d->seg.generation,
             d->seg.view.upstream_capacity, d->seg.view.process_capacity);
    d->procs = calloc(d->seg.view.process_capacity, sizeof(*d->procs));
    d->programs = programs_new(&d->seg);
    if (d->procs == NULL || d->programs == NULL)
        return RETRYD_ENOMEM;
    /* Before any slot is released (adopt_processes frees gone ones). */
    d->seg.on_released = programs_on_released;
    d->seg.on_released_arg = d->programs;
    if ((r = registry_new(&d->reg)) < 0)
        return r;
    for (uint32_t i = 0; i < d->seg.view.process_capacity; i++)
        d->procs[i].pidfd = -1;
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (d->epfd < 0)
        return -errno;
    if ((r = setup_signals_and_timer(d)) < 0)
        return r;
    if (adopted) {
        daemon_adopt_upstreams(d);
        adopt_processes(d);
    }
    daemon_apply_config(d);
    /* The drained-by window's baseline, before any client can attach: what
     * adopted processes were granted before this daemon is not in it. */
    programs_sample(d->programs);
    d->control_fd = listen_at(d->cfg->control_socket, d->cfg->has_group,
                              d->cfg->group, &control_st);
    d->stats_fd = listen_at(d->cfg->stats_socket, d->cfg->has_stats_group,
                            d->cfg->stats_group, &stats_st);
    if (d->control_fd < 0)
        return d->control_fd;
    if (d->stats_fd < 0)
        return d->stats_fd;

    return start_serving(d);
}

/* Returns true when the daemon should stop. */
static bool on_signal(server *d)
{
    struct signalfd_siginfo si;
    bool stop = false;
    while (read(d->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGHUP) {
            reload_notified(d);
        } else if (!stop) {
            char status[64];
            snprintf(status, sizeof(status), "stopping on signal %u",
                     si.ssi_signo);
            notify_stopping(status);
            log_info("signal %u: stopping; the segment stays for the next "
                     "daemon",
                     si.ssi_signo);
            stop = true;
        }
    }
    return stop;
}

/*
 * What the descriptor limit leaves room for, said once serving: every
 * attached process holds two (its connection, its pidfd); what else can
 * be open at once (the unattached pool, refused peers lingering, stats and
 * /metrics readers, the guards' spares) is set apart from what is open
 * now. A limit below what process_capacity needs is a warning: the
 * processes over it are refused, each told why (core/fdlimit.h).
 */
static void say_fd_room(server *d)
{
    uint64_t open = fd_open_count();
    uint64_t apart = (open > d->watched ? open - d->watched : 0) +
                     d->cfg->connections_unattached +
                     CONTROL_REFUSED_LINGER_MAX + STATS_CONNECTIONS_MAX +
                     (d->cfg->has_metrics ? METRICS_CONNECTIONS_MAX : 0) + 8;
    uint64_t room = fd_limit > apart ? (fd_limit - apart) / 2 : 0;
    uint32_t cap = d->seg.view.process_capacity;
    d->fd_room = room < cap ? (uint32_t)room : cap;
    if (room >= cap) {
        log_info("file descriptors: limit %llu (inherited %llu): room for "
                 "all %u process slots",
                 (unsigned long long)fd_limit,
                 (unsigned long long)fd_limit_before, cap);
        return;
    }
    log_warn("file descriptors: limit %llu (inherited %llu): room for %u "
             "attached processes of %u process slots; raise LimitNOFILE "
             "(ulimit -n)",
             (unsigned long long)fd_limit, (unsigned long long)fd_limit_before,
             d->fd_room, cap);
}

/* Tell whoever started us that the sockets accept connections: the
 * --notify-fd pipe, and the service manager (READY=1). */
static void announce_ready(const server *d, int fd)
{
    char status[600];
    snprintf(status, sizeof(status),
             "serving %zu configured upstreams on %.512s", d->cfg->n_upstreams,
             d->cfg->control_socket);
    notify_ready(status);
    if (fd < 0)
        return;
    if (write(fd, "READY\n", 6) != 6)
        log_warn("--notify-fd %d: %s", fd, strerror(errno));
    close(fd);
}

/* Serve until a signal stops it (0) or it cannot go on (1: the service
 * manager restarts it). */
static int run(server *d, int notify_fd)
{
    struct epoll_event evs[64];
    bool stop = false, failed = false;

    log_info("serving: control %s, stats %s", d->cfg->control_socket,
             d->cfg->stats_socket);
    say_fd_room(d);
    announce_ready(d, notify_fd);
    while (!stop) {
        /* Woken by the next connection deadline at the latest. */
        int n = epoll_wait(d->epfd, evs, 64, control_next_timeout_ms(d));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            log_err("epoll_wait: %s", strerror(errno));
            notify_stopping("stopping: the event loop failed");
            return 1;
        }
        for (int i = 0; i < n && !stop; i++) {
            watch *w = evs[i].data.ptr;
            switch (w->kind) {
            case WATCH_CONTROL_LISTEN:
                control_accept(d);
                break;
            case WATCH_CONN:
                if (!control_dead(w->ptr))
                    control_ready(d, w->ptr, evs[i].events);
                break;
            case WATCH_PIDFD:
                on_pid_exit(d, w->slot);
                break;
            case WATCH_SIGNAL:
                stop = on_signal(d);
                break;
            case WATCH_TIMER:
                stop = failed = on_timer(d);
                break;
            case WATCH_FLEET:
                fleet_wake(d);
                break;
            }
        }
        control_expire(d);
        control_reap(d);
    }
    return failed ? 1 : 0;
}

static void teardown(server *d)
{
    fleet_stop(d); /* before the segment goes: it empties the fleet blocks */
    stats_stop(d);
    metrics_drop_pending(d);
    if (d->procs != NULL)
        control_close_all(d);
    accept_guard_close(&d->control_guard);
    /* Only what is still ours: a path removed and made again by someone
     * else stays theirs. */
    if (d->control_fd >= 0) {
        close(d->control_fd);
        if (same_file(d->cfg->control_socket, &control_st))
            unlink(d->cfg->control_socket);
    }
    if (d->stats_fd >= 0) {
        close(d->stats_fd);
        if (same_file(d->cfg->stats_socket, &stats_st))
            unlink(d->cfg->stats_socket);
    }
    if (d->name_lock_fd >= 0)
        close(d->name_lock_fd);
    if (d->reg != NULL)
        registry_free(d->reg);
    owner_close(&d->seg);
    programs_free(d->programs);
    free(d->procs);
    free(d->idle);
    rd_rcu_barrier();
    config_free(d->cfg);
    if (d->lock_fd >= 0)
        close(d->lock_fd);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: retryd [--config FILE] [--check-config] [--notify-fd FD]\n"
            "              [--version]\n"
            "  --config FILE    configuration (default %s; when that file\n"
            "                   does not exist, built-in defaults)\n"
            "  --check-config   validate the configuration and exit\n"
            "  --notify-fd FD   write READY to FD once serving, then close it\n"
            "signals: SIGHUP reloads the configuration, SIGTERM stops\n",
            DEFAULT_CONFIG);
}

static int load_initial(const char *path, bool explicit_path, config **ret)
{
    char err[CONFIG_ERRORS_MAX_BYTES];
    if (!explicit_path && access(path, F_OK) < 0) {
        /* No file at the default place: an empty one means defaults. */
        path = "/dev/null";
    }
    int r = config_load(path, ret, err, sizeof(err));
    if (r < 0) {
        /* Every mistake, each on a line of its own. */
        for (const char *l = err; *l != '\0';) {
            size_t n = strcspn(l, "\n");
            fprintf(stderr, "retryd: %.*s\n", (int)n, l);
            l += n + (l[n] == '\n');
        }
        return r;
    }
    return 0;
}

/*
 * The [fleet] section's login, where it can be known: Redis refusing it is
 * a configuration error (exit 78, as a mistake in the file); Redis not
 * answering is a warning (the daemon starts on host-only budgets and
 * joins when it answers). @p checking: --check-config's wording.
 */
static int check_fleet(const config *c, bool checking)
{
    char why[512];
    if (!c->fleet.on)
        return 0;
    int r = fleet_login_check(&c->fleet, FLEET_CHECK_NS, why, sizeof(why));
    if (r == RETRYD_EPERM) {
        fprintf(stderr, "retryd: %s: [fleet] redis %s: %s\n", c->path,
                c->fleet.redis, why);
        return 78; /* EX_CONFIG */
    }
    if (r < 0)
        fprintf(stderr,
                "retryd: warning: [fleet] redis %s does not answer (%s): "
                "the login cannot be checked now; %s\n",
                c->fleet.redis, why,
                checking ? "the daemon would start on its own budgets"
                         : "starting on this host's own budgets until it "
                           "answers");
    else if (checking)
        printf("%s: [fleet] redis %s: login and commands ok\n", c->path,
               c->fleet.redis);
    return 0;
}

/* The command line. Returns -1 to go on, or the exit code. */
typedef struct cmdline {
    const char *path;
    bool explicit_path, check;
    int notify_fd;
} cmdline;

static int parse_args(int argc, char **argv, cmdline *cl)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", no_argument, NULL, 'k'},
        {"version", no_argument, NULL, 'V'},
        {"notify-fd", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;

    while ((o = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            cl->path = optarg;
            cl->explicit_path = true;
            break;
        case 'k':
            cl->check = true;
            break;
        case 'n':
            cl->notify_fd = atoi(optarg);
            if (cl->notify_fd < 3 || fcntl(cl->notify_fd, F_GETFD) < 0) {
                fprintf(stderr,
                        "retryd: --notify-fd %s is not an open "
                        "descriptor\n",
                        optarg);
                return 64;
            }
            fcntl(cl->notify_fd, F_SETFD, FD_CLOEXEC);
            break;
        case 'V':
            printf("retryd %s\n", RETRYD_DAEMON_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 64;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    cmdline cl = {.path = DEFAULT_CONFIG, .notify_fd = -1};
    server d = {.control_fd = -1,
                .control_guard.spare = -1,
                .stats_fd = -1,
                .lock_fd = -1,
                .name_lock_fd = -1,
                .epfd = -1,
                .signal_fd = -1,
                .timer_fd = -1,
                .stop_fd = -1,
                .metrics_lock = PTHREAD_MUTEX_INITIALIZER,
                .fleet_lock = PTHREAD_MUTEX_INITIALIZER,
                .metrics_wake_fd = -1};
    control_init(&d);
    int code = parse_args(argc, argv, &cl);
    keeper_title_area(argc, argv);
    if (code >= 0)
        return code;
    if (load_initial(cl.path, cl.explicit_path, &d.cfg) < 0)
        return 78; /* EX_CONFIG */
    if (cl.check) {
        code = check_fleet(d.cfg, true);
        if (code == 0)
            printf("%s: ok (%zu upstreams configured)\n", cl.path,
                   d.cfg->n_upstreams);
        config_free(d.cfg);
        return code;
    }
    log_set_level(d.cfg->log_level);
    if ((code = check_fleet(d.cfg, false)) != 0) {
        config_free(d.cfg);
        return code;
    }
    /* Blocked before any thread exists (liburcu starts some: the hash
     * table's resize worker, call_rcu's), so that threads inherit the
     * mask and only the signalfd sees these signals. A worker that ran
     * unblocked even briefly would take a SIGHUP's default action and kill
     * the daemon; one that arrives during setup waits, pending, for the
     * signalfd. */
    sigset_t stop_set;
    daemon_signals(&stop_set);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    urcu_memb_register_thread();
    notify_init();
    int rc = setup(&d) == 0 ? 0 : 1;
    if (rc == 0)
        rc = run(&d, cl.notify_fd);
    teardown(&d);
    urcu_memb_unregister_thread();
    return rc;
}

/* SPDX-License-Identifier: MIT */
/*
 * The stats socket, served by its own thread. It reads (the registry, the
 * configuration, the segment) inside RCU read-side sections and never
 * writes: a stats reader cannot change a budget.
 *
 * Many readers are served at once, none waited for: the thread runs its own
 * epoll over non-blocking connections, each with its request buffer, its
 * reply buffer and a deadline (daemon.h: STATS_*). An idle or slow reader
 * holds one of STATS_CONNECTIONS_MAX places until its deadline, or until a
 * newcomer finds them all taken and the oldest is closed for it; so it
 * never delays `retrydctl stats`.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/heap.h"
#include "core/fdlimit.h"
#include "core/frame_io.h"
#include "core/log.h"
#include "core/peer.h"
#include "core/rcu.h"
#include "shared/frame.h"
#include "stats/metrics.h"
#include "stats/evict.h"
#include "stats/snapshot.h"
#include "stats/stats.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"

typedef struct stats_loop stats_loop;

/* One reader: its request being read, then its reply being written. */
typedef struct stats_conn {
    stats_loop *loop;
    int fd;
    unsigned index; /* in loop->conns, and its epoll tag */
    bool replying;  /* the request is in; out holds the whole reply */
    frame_in in;
    uint8_t *out;
    size_t out_len, out_off;
    uint64_t accepted_ns, due_ns;
    /* In the loop's two orders while open: who a newcomer evicts first
     * (daemon_evict_before()), and whose deadline comes first. */
    retryd_heap_node by_evict, by_due;
} stats_conn;

/* epoll tags beyond the connections' indexes. */
#define STATS_TAG_LISTEN STATS_CONNECTIONS_MAX
#define STATS_TAG_STOP (STATS_CONNECTIONS_MAX + 1)
#define STATS_TAG_METRICS_WAKE (STATS_CONNECTIONS_MAX + 2)
#define STATS_TAG_METRICS_LISTEN (STATS_CONNECTIONS_MAX + 3)
#define STATS_TAG_METRICS_MHD (STATS_CONNECTIONS_MAX + 4)
/* Accepted per turn, so a connect storm cannot hold the loop. */
#define STATS_ACCEPT_BATCH 16

struct stats_loop {
    server *d;
    int epfd;
    stats_conn *conns[STATS_CONNECTIONS_MAX]; /* NULL: a free place */
    retryd_heap evict, due; /* the open ones, by_evict and by_due */
    size_t pending;         /* reply bytes queued, all readers together */
    metrics *metrics;       /* the /metrics endpoint, NULL when off */
    accept_guard guard;     /* the stats socket's, out of descriptors */
};
/* Queue @p msg as the reply, behind its frame header. RETRYD_EFULL when
 * the replies waiting would go over STATS_OUTPUT_TOTAL_MAX. */
static int queue_reply(stats_conn *c, const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n > RETRYD_FRAME_REPLY_MAX)
        return RETRYD_EPROTO;
    if (c->loop->pending + n > STATS_OUTPUT_TOTAL_MAX)
        return RETRYD_EFULL;
    uint8_t *buf = malloc(RETRYD_FRAME_HEADER + n);
    if (buf == NULL)
        return RETRYD_ENOMEM;
    retryd__frame_pack(msg, n, buf);
    free(c->out);
    c->loop->pending -= c->out_len - c->out_off;
    c->out = buf;
    c->out_len = RETRYD_FRAME_HEADER + n;
    c->out_off = 0;
    c->loop->pending += c->out_len;
    return 0;
}

/* Build and send the reply. */
static int serve(server *d, stats_conn *c, bool processes)
{
    stats_snapshot s;
    int r = stats_snapshot_take(d, processes, &s);
    if (r == 0)
        r = queue_reply(c, &s.rep.base);
    stats_snapshot_free(&s);
    return r;
}

static bool stats_allowed(const server *d, int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
        return false;
    rd_rcu_read_lock();
    const config *c = rcu_dereference(d->cfg);
    rd_rcu_dereferenced();
    bool ok = daemon_peer_allowed(fd, cr.uid, cr.gid, c, true);
    rd_rcu_read_unlock();
    if (!ok)
        log_limited(LOG_WARN,
                    "stats connection of pid %d uid %u refused: not "
                    "authorised (stats_group)",
                    (int)cr.pid, (unsigned)cr.uid);
    else
        log_debug("stats connection of pid %d uid %u", (int)cr.pid,
                  (unsigned)cr.uid);
    return ok;
}

/* An error reply; the connection is closed once it is sent. */
static void reply_error(stats_conn *c, int err, const char *message)
{
    Retryd__StatsReply rep;
    retryd__stats_reply__init(&rep);
    rep.error = err;
    rep.message = (char *)(uintptr_t)message;
    queue_reply(c, &rep.base);
}

static uint64_t ms_ns(uint64_t ms)
{
    return ms * 1000000u;
}

/* A deadline @p ms_of(config) from now, read under RCU: a reload may
 * change it. */
static uint64_t due_in(const server *d, uint32_t (*ms_of)(const config *))
{
    rd_rcu_read_lock();
    const config *c = rcu_dereference(d->cfg);
    rd_rcu_dereferenced();
    uint32_t ms = ms_of(c);
    rd_rcu_read_unlock();
    return retryd__clock_monotonic_ns() + ms_ns(ms);
}

static uint32_t request_ms(const config *c)
{
    return c->stats_request_timeout_ms;
}

static uint32_t reply_ms(const config *c)
{
    return c->stats_reply_timeout_ms;
}

static bool evicts_first(const retryd_heap_node *a, const retryd_heap_node *b)
{
    const stats_conn *x = RETRYD_HEAP_CDATA(a, stats_conn, by_evict);
    const stats_conn *y = RETRYD_HEAP_CDATA(b, stats_conn, by_evict);
    return daemon_evict_before(x->replying, x->accepted_ns, y->replying,
                               y->accepted_ns);
}

static bool due_first(const retryd_heap_node *a, const retryd_heap_node *b)
{
    return RETRYD_HEAP_CDATA(a, stats_conn, by_due)->due_ns <
           RETRYD_HEAP_CDATA(b, stats_conn, by_due)->due_ns;
}

static void track(stats_conn *c)
{
    retryd__heap_insert(&c->loop->evict, &c->by_evict, evicts_first);
    retryd__heap_insert(&c->loop->due, &c->by_due, due_first);
}

static void untrack(stats_conn *c)
{
    retryd__heap_remove(&c->loop->evict, &c->by_evict, evicts_first);
    retryd__heap_remove(&c->loop->due, &c->by_due, due_first);
}

/* @p c's request is in (or refused): it is being answered, under its
 * reply deadline when @p reply_due is not 0. Its keys change, so it leaves
 * both orders and comes back. */
static void start_reply(stats_conn *c, uint64_t reply_due)
{
    untrack(c);
    c->replying = true;
    if (reply_due != 0)
        c->due_ns = reply_due;
    track(c);
}

static void conn_close(stats_conn *c)
{
    stats_loop *l = c->loop;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    l->pending -= c->out_len - c->out_off;
    l->conns[c->index] = NULL;
    untrack(c);
    frame_in_reset(&c->in);
    free(c->out);
    free(c);
}

/* The request is whole: answer it (statistics, or an error). */
static void serve_request(server *d, stats_conn *c)
{
    Retryd__StatsRequest *req =
        retryd__stats_request__unpack(NULL, c->in.body_len, c->in.body);
    start_reply(c, due_in(d, reply_ms));
    if (req == NULL) {
        reply_error(c, RETRYD_EPROTO, "malformed request");
        return;
    }
    int r = serve(d, c, req->processes);
    retryd__stats_request__free_unpacked(req, NULL);
    if (r == RETRYD_EFULL)
        reply_error(c, RETRYD_EFULL, "too many replies waiting; try again");
    else if (r < 0)
        log_limited(LOG_WARN, "stats reply not built: %s", retryd_strerror(r));
}

/* One read toward the request: 1 when it is whole, 0 for more, < 0 to
 * close at once. An oversized length is answered, then closed. */
static int request_read(stats_conn *c)
{
    size_t n;
    int r = frame_in_read(&c->in, c->fd, &n);
    if (r == RETRYD_EPROTO) {
        start_reply(c, 0);
        reply_error(c, RETRYD_EPROTO, "frame length out of bounds");
        return 0;
    }
    return r < 0 ? -1 : r;
}

/* Write what the kernel takes; < 0 when done (all sent, or gone). */
static int reply_write(stats_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w <= 0)
            return -1;
        c->out_off += (size_t)w;
        c->loop->pending -= (size_t)w;
    }
    return -1; /* one request per connection: sent, so closed */
}

/* A readiness event (or a fresh connection): read the request until it is
 * whole, then write the reply, never waiting. */
static void conn_step(server *d, stats_conn *c)
{
    for (int reads = 0; !c->replying && reads < 2; reads++) {
        int r = request_read(c);
        if (r < 0) {
            conn_close(c);
            return;
        }
        if (r == 0)
            break;
        serve_request(d, c);
    }
    if (!c->replying)
        return;
    if (c->out == NULL || reply_write(c) < 0) {
        conn_close(c);
        return;
    }
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = c->index};
    epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* A place for a newcomer: a free one, or the place of the first in the
 * eviction order (readers still sending their request first, then the
 * oldest), closed for it. */
static int free_place(stats_loop *l)
{
    if (l->evict.n < STATS_CONNECTIONS_MAX) {
        for (unsigned i = 0; i < STATS_CONNECTIONS_MAX; i++)
            if (l->conns[i] == NULL)
                return (int)i;
    }
    stats_conn *oldest =
        RETRYD_HEAP_DATA(retryd__heap_min(&l->evict), stats_conn, by_evict);
    unsigned i = oldest->index;
    log_limited(LOG_WARN,
                "stats: all %d connections taken: closing the "
                "oldest for a newcomer",
                STATS_CONNECTIONS_MAX);
    conn_close(oldest);
    return (int)i;
}

static void on_accept(stats_loop *l)
{
    for (int n = 0; n < STATS_ACCEPT_BATCH; n++) {
        int fd = accept_guarded(&l->guard, NULL, NULL);
        if (fd == -EMFILE)
            continue; /* refused on the spare: the next may be too */
        if (fd < 0)
            return;
        stats_conn *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        int i = free_place(l);
        uint64_t now = retryd__clock_monotonic_ns();
        *c = (stats_conn){.loop = l,
                          .fd = fd,
                          .index = (unsigned)i,
                          .accepted_ns = now,
                          .due_ns = due_in(l->d, request_ms)};
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (unsigned)i};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        l->conns[i] = c;
        track(c);
        if (!stats_allowed(l->d, fd)) {
            start_reply(c, 0);
            reply_error(c, RETRYD_EPERM, "not authorised");
        }
        conn_step(l->d, c); /* the request is often there already */
    }
}

/* Close readers past their deadline; milliseconds to the next one. */
static int expire(stats_loop *l)
{
    uint64_t now = retryd__clock_monotonic_ns();
    retryd_heap_node *n;
    while ((n = retryd__heap_min(&l->due)) != NULL) {
        stats_conn *c = RETRYD_HEAP_DATA(n, stats_conn, by_due);
        if (c->due_ns > now)
            return (int)((c->due_ns - now + 999999) / 1000000);
        log_limited(LOG_WARN, "stats connection closed: %s",
                    c->replying ? "reply left unread" : "no request in time");
        conn_close(c);
    }
    return -1;
}

static void take_metrics(stats_loop *l)
{
    metrics_take(l->d, &l->metrics, l->epfd, STATS_TAG_METRICS_LISTEN,
                 STATS_TAG_METRICS_MHD);
}

/* The sooner of two epoll timeouts (-1: none). */
static int sooner(int a, int b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

static int loop_timeout(stats_loop *l)
{
    int t = sooner(expire(l), accept_guard_timeout_ms(&l->guard));
    return l->metrics ? sooner(t, metrics_timeout_ms(l->metrics)) : t;
}

static int loop_open(stats_loop *l, server *d)
{
    *l = (stats_loop){
        .d = d, .epfd = epoll_create1(EPOLL_CLOEXEC), .guard.spare = -1};
    struct epoll_event lev = {.events = EPOLLIN, .data.u64 = STATS_TAG_LISTEN};
    struct epoll_event sev = {.events = EPOLLIN, .data.u64 = STATS_TAG_STOP};
    struct epoll_event mev = {.events = EPOLLIN,
                              .data.u64 = STATS_TAG_METRICS_WAKE};
    if (l->epfd < 0 ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, d->stats_fd, &lev) < 0 ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, d->stop_fd, &sev) < 0 ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, d->metrics_wake_fd, &mev) < 0 ||
        accept_guard_init(&l->guard, "stats", d->stats_fd, l->epfd, lev) < 0) {
        int err = -errno;
        log_err("stats: cannot watch the socket: %s", strerror(-err));
        return err;
    }
    take_metrics(l); /* the endpoint setup opened, if any */
    return 0;
}

static void loop_close(stats_loop *l)
{
    for (unsigned i = 0; i < STATS_CONNECTIONS_MAX; i++)
        if (l->conns[i] != NULL)
            conn_close(l->conns[i]);
    metrics_close(l->metrics);
    l->metrics = NULL;
    accept_guard_close(&l->guard);
    if (l->epfd >= 0)
        close(l->epfd);
}

static void *stats_main(void *arg)
{
    server *d = arg;
    stats_loop l;
    struct epoll_event evs[32];
    bool stop = false;

    urcu_memb_register_thread();
    if (loop_open(&l, d) < 0)
        stop = true;
    while (!stop) {
        int n = epoll_wait(l.epfd, evs, 32, loop_timeout(&l));
        if (n < 0 && errno != EINTR)
            break;
        bool newcomers = false;
        for (int i = 0; i < n && !stop; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == STATS_TAG_STOP)
                stop = true;
            else if (tag == STATS_TAG_LISTEN)
                on_accept(&l);
            else if (tag == STATS_TAG_METRICS_WAKE)
                take_metrics(&l);
            else if (tag == STATS_TAG_METRICS_LISTEN)
                newcomers = true;
            else if (tag < STATS_CONNECTIONS_MAX && l.conns[tag] != NULL)
                conn_step(d, l.conns[tag]); /* not closed earlier */
        }
        if (l.metrics == NULL)
            continue;
        /* The requests that arrived are read before newcomers may evict
         * their connections (metrics.c, make_room); then the newcomers'. */
        metrics_run(l.metrics); /* ready or due; cheap when neither */
        if (newcomers) {
            metrics_accept(l.metrics);
            metrics_run(l.metrics);
        }
    }
    loop_close(&l);
    urcu_memb_unregister_thread();
    return NULL;
}

int stats_start(server *d)
{
    d->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (d->stop_fd < 0)
        return -errno;
    int r = pthread_create(&d->stats_thread, NULL, stats_main, d);
    if (r != 0)
        return -r;
    d->stats_running = true;
    return 0;
}

void stats_stop(server *d)
{
    if (!d->stats_running)
        return;
    uint64_t one = 1;
    if (write(d->stop_fd, &one, sizeof(one)) < 0)
        log_warn("cannot signal the stats thread");
    pthread_join(d->stats_thread, NULL);
    close(d->stop_fd);
    d->stats_running = false;
}

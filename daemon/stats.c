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
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rcu.h"

#include "shared/bucket.h"
#include "daemon.h"
#include "frame_io.h"
#include "shared/frame.h"
#include "log.h"
#include "metrics.h"
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
    size_t pending;   /* reply bytes queued, all readers together */
    metrics *metrics; /* the /metrics endpoint, NULL when off */
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

static void fill_counters(Retryd__Counters *c, const uint64_t t[SEG_COUNTERS],
                          uint64_t *numbers)
{
    retryd__counters__init(c);
    c->deposits = t[SEG_C_DEPOSITS];
    c->retries_granted = t[SEG_C_GRANTED];
    c->n_denied = STATS_DENIED;
    c->denied = numbers;
    numbers[0] = 0;
    for (int i = 1; i < STATS_DENIED; i++)
        numbers[i] = t[SEG_C_DENIED_FIRST + i - 1];
    c->ambiguous = t[SEG_C_AMBIGUOUS];
    c->n_evidence = SEG_C_EVIDENCE_COUNT;
    c->evidence = numbers + STATS_DENIED;
    for (int i = 0; i < SEG_C_EVIDENCE_COUNT; i++)
        c->evidence[i] = t[SEG_C_EVIDENCE_FIRST + i];
    c->refilled_micro = t[SEG_C_REFILLED_MICRO];
    c->discarded_micro = t[SEG_C_DISCARDED_MICRO];
}

static int add_upstream(const reg_entry *e, void *arg)
{
    stats_build *b = arg;
    if (b->n == b->cap)
        return 1;
    seg_upstream *s = retryd__segment_upstream(&b->d->seg.view, e->slot);
    if (s == NULL)
        return 0;
    size_t i = b->n++;
    Retryd__UpstreamStats *u = &b->ups[i];
    retryd__upstream_stats__init(u);
    retryd__params__init(&b->params[i]);
    b->params[i].ratio_micro = atomic_load(&s->ratio_micro);
    b->params[i].floor_micro_per_s = atomic_load(&s->floor_micro_per_s);
    b->params[i].cap_micro = atomic_load(&s->cap_micro);
    memcpy(b->names[i], e->name, sizeof(b->names[i]));
    u->name = b->names[i];
    u->slot = e->slot;
    u->slot_generation = e->generation;
    u->params = &b->params[i];
    /* Foreseen, not claimed: stats never write. The coarse clock is the
     * one the clients' refills read. */
    u->balance_micro =
        retryd__bucket_projected_balance(s, retryd__clock_coarse_ns());
    fill_counters(&b->counters[i], b->totals[e->slot],
                  b->numbers + i * STATS_NUMBERS);
    u->counters = &b->counters[i];
    b->up_ptrs[i] = u;
    return 0;
}

/* Per-process rows; the arrays are sized by the caller. */
static size_t add_processes(const server *d, stats_snapshot *s)
{
    size_t n = 0;
    for (uint32_t i = 0; i < d->seg.view.process_capacity; i++) {
        seg_process *p = &d->seg.view.processes[i];
        if (seg_ident_state(atomic_load(&p->ident)) != SEG_ACTIVE)
            continue;
        uint64_t t[SEG_COUNTERS];
        Retryd__ProcessStats *ps = &s->ps[n];
        owner_process_totals(&d->seg, i, t);
        retryd__process_stats__init(ps);
        ps->pid = (uint32_t)atomic_load(&p->pid);
        ps->start_time = atomic_load(&p->start_time);
        ps->uid = (uint32_t)atomic_load(&p->uid);
        ps->slot = i;
        owner_process_program(&d->seg, i, s->programs[n]);
        ps->program = s->programs[n];
        fill_counters(&s->pcs[n], t, s->pnum + n * STATS_NUMBERS);
        ps->counters = &s->pcs[n];
        s->pptr[n] = ps;
        n++;
    }
    return n;
}

void stats_snapshot_free(stats_snapshot *s)
{
    free(s->ps), free(s->pptr), free(s->pcs), free(s->pnum);
    free(s->programs);
    free(s->b.totals), free(s->b.ups), free(s->b.up_ptrs), free(s->b.names);
    free(s->b.params), free(s->b.counters), free(s->b.numbers);
    memset(s, 0, sizeof(*s));
}

static int snapshot_alloc(stats_snapshot *s, size_t ucap, size_t pcap)
{
    s->ps = calloc(pcap + 1, sizeof(*s->ps));
    s->pptr = calloc(pcap + 1, sizeof(*s->pptr));
    s->pcs = calloc(pcap + 1, sizeof(*s->pcs));
    s->pnum = calloc((pcap + 1) * STATS_NUMBERS, sizeof(*s->pnum));
    s->programs = calloc(pcap + 1, sizeof(*s->programs));
    s->b.totals = calloc(ucap, sizeof(*s->b.totals));
    s->b.ups = calloc(ucap, sizeof(*s->b.ups));
    s->b.up_ptrs = calloc(ucap, sizeof(*s->b.up_ptrs));
    s->b.names = calloc(ucap, sizeof(*s->b.names));
    s->b.params = calloc(ucap, sizeof(*s->b.params));
    s->b.counters = calloc(ucap, sizeof(*s->b.counters));
    s->b.numbers = calloc(ucap * STATS_NUMBERS, sizeof(*s->b.numbers));
    if (!s->ps || !s->pptr || !s->pcs || !s->pnum || !s->programs ||
        !s->b.totals || !s->b.ups || !s->b.up_ptrs || !s->b.names ||
        !s->b.params || !s->b.counters || !s->b.numbers)
        return RETRYD_ENOMEM;
    return 0;
}

/* The daemon's open descriptors (its /proc/self/fd, less the one reading
 * it) and soft limit, for the reply; 0 when they cannot be read. */
static void descriptors(Retryd__StatsReply *rep)
{
    struct rlimit rl;
    DIR *dir = opendir("/proc/self/fd");
    unsigned n = 0;
    for (; dir != NULL && readdir(dir) != NULL; n++)
        ;
    if (dir != NULL)
        closedir(dir);
    rep->descriptors_open = n > 3 ? n - 3 : 0; /* ".", "..", the dir's own */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        rep->descriptors_max = rl.rlim_cur;
}

/* Everything is read under one RCU section and copied out of it: what is
 * done with the reply (a socket send, a rendering) happens after. */
int stats_snapshot_take(server *d, bool processes, stats_snapshot *s)
{
    size_t ucap = d->seg.view.upstream_capacity;
    size_t pcap = processes ? d->seg.view.process_capacity : 0;
    memset(s, 0, sizeof(*s));
    s->b.d = d;
    s->b.cap = ucap;
    Retryd__StatsReply *rep = &s->rep;
    retryd__stats_reply__init(rep);
    if (snapshot_alloc(s, ucap, pcap) < 0) {
        stats_snapshot_free(s);
        return RETRYD_ENOMEM;
    }
    rd_rcu_read_lock();
    rep->attached_processes = owner_collect(&d->seg, s->b.totals);
    registry_for_each(d->reg, add_upstream, &s->b);
    rep->n_processes = processes ? add_processes(d, s) : 0;
    rd_rcu_read_unlock();

    rep->generation = d->seg.generation;
    rep->uptime_ms = (retryd__clock_monotonic_ns() - d->started_ns) / 1000000;
    rep->draining = owner_draining(&d->seg);
    rep->upstream_capacity = d->seg.view.upstream_capacity;
    rep->process_capacity = d->seg.view.process_capacity;
    rep->daemon_version = RETRYD_DAEMON_VERSION;
    retryd__segment_health__init(&s->health);
    owner_health_fill(&d->seg, &s->health);
    rep->segment_health = &s->health;
    rep->slots_refused_capacity =
        atomic_load_explicit(&d->slots_refused_capacity, memory_order_relaxed);
    rep->slots_refused_quota =
        atomic_load_explicit(&d->slots_refused_quota, memory_order_relaxed);
    descriptors(rep);
    rep->n_upstreams = s->b.n;
    rep->upstreams = s->b.up_ptrs;
    rep->processes = s->pptr;
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
    bool ok =
        daemon_peer_allowed(fd, cr.uid, cr.gid, rcu_dereference(d->cfg), true);
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

static void conn_close(stats_conn *c)
{
    stats_loop *l = c->loop;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    l->pending -= c->out_len - c->out_off;
    l->conns[c->index] = NULL;
    frame_in_reset(&c->in);
    free(c->out);
    free(c);
}

/* The request is whole: answer it (statistics, or an error). */
static void serve_request(server *d, stats_conn *c)
{
    Retryd__StatsRequest *req =
        retryd__stats_request__unpack(NULL, c->in.body_len, c->in.body);
    c->replying = true;
    c->due_ns = retryd__clock_monotonic_ns() + ms_ns(STATS_REPLY_TIMEOUT_MS);
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
        c->replying = true;
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

/* A place for a newcomer: a free one, or the oldest reader's, closed for
 * it (readers still sending their request first). */
static int free_place(stats_loop *l)
{
    stats_conn *oldest = NULL;
    for (unsigned i = 0; i < STATS_CONNECTIONS_MAX; i++) {
        stats_conn *c = l->conns[i];
        if (c == NULL)
            return (int)i;
        if (oldest == NULL ||
            daemon_evict_before(c->replying, c->accepted_ns, oldest->replying,
                                oldest->accepted_ns))
            oldest = c;
    }
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
        int fd =
            accept4(l->d->stats_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
                          .due_ns = now + ms_ns(STATS_REQUEST_TIMEOUT_MS)};
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (unsigned)i};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        l->conns[i] = c;
        if (!stats_allowed(l->d, fd)) {
            c->replying = true;
            reply_error(c, RETRYD_EPERM, "not authorised");
        }
        conn_step(l->d, c); /* the request is often there already */
    }
}

/* Close readers past their deadline; milliseconds to the next one. */
static int expire(stats_loop *l)
{
    uint64_t now = retryd__clock_monotonic_ns(), next = UINT64_MAX;
    for (unsigned i = 0; i < STATS_CONNECTIONS_MAX; i++) {
        stats_conn *c = l->conns[i];
        if (c != NULL && c->due_ns <= now) {
            log_limited(LOG_WARN, "stats connection closed: %s",
                        c->replying ? "reply left unread"
                                    : "no request in time");
            conn_close(c);
        } else if (c != NULL && c->due_ns < next) {
            next = c->due_ns;
        }
    }
    if (next == UINT64_MAX)
        return -1;
    return (int)((next - now + 999999) / 1000000);
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
    int t = expire(l);
    return l->metrics ? sooner(t, metrics_timeout_ms(l->metrics)) : t;
}

static int loop_open(stats_loop *l, server *d)
{
    *l = (stats_loop){.d = d, .epfd = epoll_create1(EPOLL_CLOEXEC)};
    struct epoll_event lev = {.events = EPOLLIN, .data.u64 = STATS_TAG_LISTEN};
    struct epoll_event sev = {.events = EPOLLIN, .data.u64 = STATS_TAG_STOP};
    struct epoll_event mev = {.events = EPOLLIN,
                              .data.u64 = STATS_TAG_METRICS_WAKE};
    if (l->epfd < 0 ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, d->stats_fd, &lev) < 0 ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, d->stop_fd, &sev) < 0 ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, d->metrics_wake_fd, &mev) < 0) {
        log_err("stats: cannot watch the socket: %s", strerror(errno));
        return -1;
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

/*
 * The stats socket, served by its own thread. It reads (the registry, the
 * configuration, the segment) inside RCU read-side sections and never
 * writes: a stats reader cannot change a budget. Each client is served in
 * turn with a time bound, so a stuck reader delays others by at most that.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rcu.h"

#include "shared/bucket.h"
#include "daemon.h"
#include "shared/frame.h"
#include "log.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"

#define STATS_TIMEOUT_MS 1000
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
static size_t add_processes(const server *d, Retryd__ProcessStats *ps,
                            Retryd__ProcessStats **ptrs, Retryd__Counters *cs,
                            uint64_t *numbers)
{
    size_t n = 0;
    for (uint32_t i = 0; i < d->seg.view.process_capacity; i++) {
        seg_process *p = &d->seg.view.processes[i];
        if (seg_ident_state(atomic_load(&p->ident)) != SEG_ACTIVE)
            continue;
        uint64_t t[SEG_COUNTERS];
        owner_process_totals(&d->seg, i, t);
        retryd__process_stats__init(&ps[n]);
        ps[n].pid = (uint32_t)atomic_load(&p->pid);
        ps[n].start_time = atomic_load(&p->start_time);
        ps[n].uid = (uint32_t)atomic_load(&p->uid);
        ps[n].slot = i;
        fill_counters(&cs[n], t, numbers + n * STATS_NUMBERS);
        ps[n].counters = &cs[n];
        ptrs[n] = &ps[n];
        n++;
    }
    return n;
}

/* Build and send the reply. Everything is read under one RCU section and
 * copied out of it: the socket send happens after, outside it. */
static int serve(server *d, int fd, bool processes)
{
    size_t ucap = d->seg.view.upstream_capacity;
    size_t pcap = processes ? d->seg.view.process_capacity : 0;
    stats_build b = {.d = d, .cap = ucap};
    Retryd__StatsReply rep;
    retryd__stats_reply__init(&rep);
    Retryd__ProcessStats *ps = calloc(pcap + 1, sizeof(*ps));
    Retryd__ProcessStats **pptr = calloc(pcap + 1, sizeof(*pptr));
    Retryd__Counters *pcs = calloc(pcap + 1, sizeof(*pcs));
    uint64_t *pnum = calloc((pcap + 1) * STATS_NUMBERS, sizeof(*pnum));
    b.totals = calloc(ucap, sizeof(*b.totals));
    b.ups = calloc(ucap, sizeof(*b.ups));
    b.up_ptrs = calloc(ucap, sizeof(*b.up_ptrs));
    b.names = calloc(ucap, sizeof(*b.names));
    b.params = calloc(ucap, sizeof(*b.params));
    b.counters = calloc(ucap, sizeof(*b.counters));
    b.numbers = calloc(ucap * STATS_NUMBERS, sizeof(*b.numbers));
    int r = RETRYD_ENOMEM;
    if (!ps || !pptr || !pcs || !pnum || !b.totals || !b.ups || !b.up_ptrs ||
        !b.names || !b.params || !b.counters || !b.numbers)
        goto out;

    rd_rcu_read_lock();
    rep.attached_processes = owner_collect(&d->seg, b.totals);
    registry_for_each(d->reg, add_upstream, &b);
    rep.n_processes = processes ? add_processes(d, ps, pptr, pcs, pnum) : 0;
    rd_rcu_read_unlock();

    rep.generation = d->seg.generation;
    rep.uptime_ms = (retryd__clock_monotonic_ns() - d->started_ns) / 1000000;
    rep.draining = owner_draining(&d->seg);
    rep.upstream_capacity = d->seg.view.upstream_capacity;
    rep.process_capacity = d->seg.view.process_capacity;
    rep.daemon_version = RETRYD_DAEMON_VERSION;
    rep.n_upstreams = b.n;
    rep.upstreams = b.up_ptrs;
    rep.processes = pptr;
    r = retryd__frame_send(fd, &rep.base, -1, STATS_TIMEOUT_MS * 2);
out:
    free(ps), free(pptr), free(pcs), free(pnum);
    free(b.totals), free(b.ups), free(b.up_ptrs), free(b.names);
    free(b.params);
    free(b.counters), free(b.numbers);
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
    return ok;
}

/* An error reply; the connection is closed after it. */
static void reply_error(int fd, int err, const char *message)
{
    Retryd__StatsReply rep;
    retryd__stats_reply__init(&rep);
    rep.error = err;
    rep.message = (char *)(uintptr_t)message;
    retryd__frame_send(fd, &rep.base, -1, STATS_TIMEOUT_MS);
}

static void serve_client(server *d, int fd)
{
    uint8_t *body;
    size_t len;

    if (!stats_allowed(d, fd)) {
        reply_error(fd, RETRYD_EPERM, "not authorised");
        return;
    }
    int r = retryd__frame_recv(fd, RETRYD_FRAME_REQUEST_MAX, STATS_TIMEOUT_MS,
                               &body, &len, NULL);
    if (r < 0) {
        if (r == RETRYD_EPROTO)
            reply_error(fd, RETRYD_EPROTO, "frame length out of bounds");
        return;
    }
    Retryd__StatsRequest *req = retryd__stats_request__unpack(NULL, len, body);
    free(body);
    if (req == NULL) {
        reply_error(fd, RETRYD_EPROTO, "malformed request");
        return;
    }
    r = serve(d, fd, req->processes);
    retryd__stats_request__free_unpacked(req, NULL);
    if (r < 0)
        log_debug("stats reply not sent: %s", retryd_strerror(r));
}

static void *stats_main(void *arg)
{
    server *d = arg;
    urcu_memb_register_thread();
    for (;;) {
        struct pollfd p[2] = {{d->stats_fd, POLLIN, 0},
                              {d->stop_fd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        int fd = accept4(d->stats_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        serve_client(d, fd);
        close(fd);
    }
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

/* SPDX-License-Identifier: MIT */
/*
 * The stats snapshot: the registry, the configuration and the segment's
 * counters copied out of one RCU read-side section into a StatsReply,
 * which the stats socket packs (stats.c) and /metrics renders
 * (metrics.c). Reads only.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/rcu.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"
#include "shared/bucket.h"
#include "shared/health.h"
#include "shared/hedge.h"
#include "stats/programs.h"
#include "stats/snapshot.h"

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
        numbers[i] = t[seg_denied_counter(i)];
    c->ambiguous = t[SEG_C_AMBIGUOUS];
    c->n_evidence = SEG_C_EVIDENCE_COUNT;
    c->evidence = numbers + STATS_DENIED;
    for (int i = 0; i < SEG_C_EVIDENCE_COUNT; i++)
        c->evidence[i] = t[SEG_C_EVIDENCE_FIRST + i];
    c->refilled_micro = t[SEG_C_REFILLED_MICRO];
    c->discarded_micro = t[SEG_C_DISCARDED_MICRO];
    c->throttled = t[SEG_C_THROTTLED];
    c->held = t[SEG_C_HELD];
    c->borrowed = t[SEG_C_BORROWED];
}

#define NS_PER_MS UINT64_C(1000000)

/* The health of slot @p s at @p now_ns (the coarse clock, which the
 * clients' windows and holds read): its parameters, its window summed and
 * its hold, by the clients' own functions, which only read. */
static void fill_health(Retryd__UpstreamHealth *h, seg_upstream *s,
                        uint64_t now_ns)
{
    health_params p;
    health_view v;
    retryd__upstream_health__init(h);
    retryd__health_params_of(s, &p);
    retryd__health_view(s, now_ns, &v);
    h->adaptive_throttle = (p.flags & SEG_HEALTH_THROTTLE) != 0;
    h->throttle_k_micro = p.k_micro;
    h->throttle_window_ms = p.window_ns / NS_PER_MS;
    h->throttle_min_processes = (uint32_t)p.min_processes;
    h->pushback = (p.flags & SEG_HEALTH_PUSHBACK) != 0;
    h->pushback_first_attempts = (p.flags & SEG_HEALTH_PUSHBACK_FIRST) != 0;
    h->pushback_max_ms = p.pushback_max_ns / NS_PER_MS;
    h->engaged = v.engaged;
    h->probability = v.probability;
    h->requests = v.requests;
    h->accepts = v.accepts;
    h->rejecting_processes = v.rejecters;
    /* Rounded up: a hold of half a millisecond is still one. */
    h->pushback_remaining_ms =
        ((uint64_t)retryd__health_hold(s, now_ns) + NS_PER_MS - 1) / NS_PER_MS;
}

/* Hedging (docs/hedging.md) on slot @p s at @p now_ns: its parameters,
 * its hedge bucket foreseen, its picture as published (read only: no
 * refresh, no refill claimed) and its counters. */
static char picture_none[] = "none", picture_fresh[] = "fresh",
            picture_no_tail[] = "no_tail";
static char *const picture_names[] = {picture_none, picture_fresh,
                                      picture_no_tail};

static void fill_hedge(Retryd__UpstreamHedge *h, seg_hedge *g, uint64_t now_ns)
{
    hedge_params p;
    uint64_t delay = 0;
    bool fresh;
    retryd__upstream_hedge__init(h);
    retryd__hedge_params_of(g, &p);
    h->max_extra_load_micro = p.ratio_micro;
    h->min_hedges_per_sec_micro = p.floor_micro_per_s;
    h->cap_micro = p.cap_micro;
    h->min_delay_us = p.min_delay_ns / 1000;
    h->window_ms = p.window_ns / NS_PER_MS;
    h->balance_micro = retryd__hedge_projected_balance(g, now_ns);
    enum hedge_pic pic = retryd__hedge_picture_peek(g, now_ns, &delay, &fresh);
    h->picture = picture_names[fresh ? pic : HEDGE_PIC_NONE];
    h->delay_us = fresh ? delay / 1000 : 0;
    h->pending_samples = retryd__hedge_pending_samples(g);
#define C(name, counter) h->name = atomic_load(&g->counters[counter])
    C(sent, SEG_H_SENT);
    C(won, SEG_H_WON);
    C(refused_hedge_budget, SEG_H_REFUSED_HEDGE_BUDGET);
    C(refused_retry_budget, SEG_H_REFUSED_RETRY_BUDGET);
    C(refused_throttled, SEG_H_REFUSED_THROTTLED);
    C(refused_pushback, SEG_H_REFUSED_PUSHBACK);
    C(refused_deadline, SEG_H_REFUSED_DEADLINE);
    C(refused_draining, SEG_H_REFUSED_DRAINING);
    C(deposits, SEG_H_DEPOSITS);
    C(refilled_micro, SEG_H_REFILLED_MICRO);
    C(discarded_micro, SEG_H_DISCARDED_MICRO);
    C(refreshes, SEG_H_REFRESHES);
#undef C
}

/* Who drained upstream row @p i (slot @p slot of generation @p gen) in the
 * ledger's window; absent when no retry was granted there. */
static void fill_drained(stats_build *b, size_t i, uint32_t slot, uint32_t gen)
{
    program_drain pd;
    Retryd__DrainedBy *db = &b->drained[i];
    if (!programs_drained(b->d->programs, slot, gen, &pd))
        return;
    retryd__drained_by__init(db);
    memcpy(b->drained_names[i], pd.name, sizeof(b->drained_names[i]));
    db->program = b->drained_names[i];
    db->grants = pd.grants;
    db->window_grants = pd.window_grants;
    db->window_ms = PROGRAMS_WINDOW_S * 1000u;
    b->ups[i].drained_by = db;
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
    uint64_t now = retryd__clock_coarse_ns();
    u->balance_micro = retryd__bucket_projected_balance(s, now);
    fill_health(&b->health[i], s, now);
    u->health = &b->health[i];
    fill_hedge(&b->hedge[i], &s->hedge, now);
    u->hedge = &b->hedge[i];
    u->claimed_micro = atomic_load(&s->claimed_micro);
    u->shares_kept = atomic_load(&s->share_since_ns) != 0;
    fill_drained(b, i, e->slot, e->generation);
    if (stats_upstream_fleet(e, s, now, &b->fleet[i]))
        u->fleet = &b->fleet[i];
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

/* Every program's row: exited + live (programs.h). */
static size_t add_programs(const server *d, stats_snapshot *s)
{
    size_t n = programs_read(d->programs, s->rows);
    for (size_t i = 0; i < n; i++) {
        Retryd__ProgramStats *ps = &s->prs[i];
        retryd__program_stats__init(ps);
        ps->program = s->rows[i].name;
        ps->processes = s->rows[i].processes;
        ps->exited = s->rows[i].exited;
        fill_counters(&s->prc[i], s->rows[i].t, s->prnum + i * STATS_NUMBERS);
        ps->counters = &s->prc[i];
        s->prptr[i] = ps;
    }
    return n;
}

void stats_snapshot_free(stats_snapshot *s)
{
    free(s->ps), free(s->pptr), free(s->pcs), free(s->pnum);
    free(s->programs);
    free(s->b.totals), free(s->b.ups), free(s->b.up_ptrs), free(s->b.names);
    free(s->b.params), free(s->b.counters), free(s->b.health);
    free(s->b.hedge);
    free(s->b.numbers), free(s->b.drained), free(s->b.drained_names);
    free(s->b.fleet);
    free(s->rows), free(s->prs), free(s->prptr), free(s->prc), free(s->prnum);
    memset(s, 0, sizeof(*s));
}

/* The per-program rows' arrays: room for every row the ledger has. */
static bool programs_alloc(stats_snapshot *s)
{
    size_t rcap = PROGRAMS_MAX + 1;
    s->rows = calloc(rcap, sizeof(*s->rows));
    s->prs = calloc(rcap, sizeof(*s->prs));
    s->prptr = calloc(rcap, sizeof(*s->prptr));
    s->prc = calloc(rcap, sizeof(*s->prc));
    s->prnum = calloc(rcap * STATS_NUMBERS, sizeof(*s->prnum));
    return s->rows && s->prs && s->prptr && s->prc && s->prnum;
}

static int snapshot_alloc(stats_snapshot *s, size_t ucap, size_t pcap)
{
    s->b.hedge = calloc(ucap, sizeof(*s->b.hedge));
    if (s->b.hedge == NULL)
        return RETRYD_ENOMEM;
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
    s->b.health = calloc(ucap, sizeof(*s->b.health));
    s->b.numbers = calloc(ucap * STATS_NUMBERS, sizeof(*s->b.numbers));
    s->b.drained = calloc(ucap, sizeof(*s->b.drained));
    s->b.drained_names = calloc(ucap, sizeof(*s->b.drained_names));
    s->b.fleet = calloc(ucap, sizeof(*s->b.fleet));
    if (!programs_alloc(s) || !s->ps || !s->pptr || !s->pcs || !s->pnum ||
        !s->programs || !s->b.totals || !s->b.ups || !s->b.up_ptrs ||
        !s->b.names || !s->b.params || !s->b.counters || !s->b.health ||
        !s->b.numbers || !s->b.drained || !s->b.drained_names || !s->b.fleet)
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
    rep->n_programs = add_programs(d, s);
    /* A reload may have published a configuration since the section
     * began: reaching it is an acquire of its own (core/rcu.h). */
    const config *c = rcu_dereference(d->cfg);
    rd_rcu_dereferenced();
    stats_fleet_fill(d, c, &s->fleet, rep);
    rd_rcu_read_unlock();

    rep->generation = d->seg.generation;
    rep->uptime_ms = (retryd__clock_monotonic_ns() - d->started_ns) / 1000000;
    rep->draining = owner_draining(&d->seg);
    rep->upstream_capacity = d->seg.view.upstream_capacity;
    rep->process_capacity = d->seg.view.process_capacity;
    rep->daemon_version = RETRYD_DAEMON_VERSION;
    retryd__segment_health__init(&s->health);
    owner_health_fill(&d->seg, &s->health, s->finding, sizeof(s->finding));
    rep->segment_health = &s->health;
    rep->slots_refused_capacity =
        atomic_load_explicit(&d->slots_refused_capacity, memory_order_relaxed);
    rep->slots_refused_quota =
        atomic_load_explicit(&d->slots_refused_quota, memory_order_relaxed);
    rep->upstreams_refused_quota =
        atomic_load_explicit(&d->upstreams_refused_quota, memory_order_relaxed);
    descriptors(rep);
    rep->n_upstreams = s->b.n;
    rep->upstreams = s->b.up_ptrs;
    rep->processes = s->pptr;
    rep->programs = s->prptr;
    return 0;
}

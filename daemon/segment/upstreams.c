/* SPDX-License-Identifier: MIT */
/*
 * Upstream registration: by name, idempotent, with parameters from the
 * client, the configuration or the defaults. Also what startup (adopting a
 * segment) and SIGHUP (a new configuration) do to the registered set.
 * Main thread only: the one writer of the registry and the slot table.
 */
#include <stdlib.h>
#include <string.h>

#include "shared/bucket.h"
#include "core/rcu.h"

#include "segment/upstreams.h"
#include "core/log.h"
#include "retryd/common.h"

static bool params_equal(const budget_params *a, const budget_params *b)
{
    return a->ratio_micro == b->ratio_micro &&
           a->floor_micro_per_s == b->floor_micro_per_s &&
           a->cap_micro == b->cap_micro;
}

/*
 * A refused parameter change is logged once per upstream and offered set,
 * with both sets: a client retrying its open every half second must not
 * flood the log, and an operator must see what was asked and what holds.
 * The refusals remembered are the last CONFLICTS_REMEMBERED; registration
 * runs on the control thread alone.
 */
#define CONFLICTS_REMEMBERED 64
static struct {
    unsigned long name_hash;
    budget_params offered;
} conflicts[CONFLICTS_REMEMBERED];
static unsigned conflicts_next;

static void log_conflict(const char *name, const budget_params *offered,
                         const budget_params *holds, const char *why)
{
    unsigned long h = seg_name_hash(name);
    for (unsigned i = 0; i < CONFLICTS_REMEMBERED; i++)
        if (conflicts[i].name_hash == h &&
            params_equal(&conflicts[i].offered, offered))
            return;
    conflicts[conflicts_next].name_hash = h;
    conflicts[conflicts_next].offered = *offered;
    conflicts_next = (conflicts_next + 1) % CONFLICTS_REMEMBERED;
    log_warn(
        "upstream '%s': refused a client's parameters (ratio %.6g, floor "
        "%.6g/s, cap %.6g): %s (ratio %.6g, floor %.6g/s, cap %.6g); the "
        "client keeps a local budget for it until they match",
        name, (double)offered->ratio_micro / 1e6,
        (double)offered->floor_micro_per_s / 1e6,
        (double)offered->cap_micro / 1e6, why, (double)holds->ratio_micro / 1e6,
        (double)holds->floor_micro_per_s / 1e6, (double)holds->cap_micro / 1e6);
}

static int register_as(server *d, int64_t uid, const char *name,
                       const budget_params *given, reg_entry *ret);

int daemon_register(server *d, const char *name, const budget_params *given,
                    reg_entry *ret)
{
    return register_as(d, -1, name, given, ret);
}

typedef struct uid_count {
    int64_t uid;
    uint32_t n;
} uid_count;

static int count_owned(const reg_entry *e, void *arg)
{
    uid_count *c = arg;
    c->n += e->owner_uid == c->uid;
    return 0;
}

int daemon_register_for(server *d, uid_t uid, const char *name,
                        const budget_params *given, reg_entry *ret,
                        bool *ret_quota)
{
    *ret_quota = false;
    rd_rcu_read_lock();
    bool known = registry_lookup(d->reg, name) != NULL;
    uid_count c = {(int64_t)uid, 0};
    if (!known)
        registry_for_each(d->reg, count_owned, &c);
    rd_rcu_read_unlock();
    if (!known && c.n >= d->cfg->upstreams_per_uid) {
        *ret_quota = true;
        atomic_fetch_add_explicit(&d->upstreams_refused_quota, 1,
                                  memory_order_relaxed);
        log_limited(LOG_WARN,
                    "uid %u registered %u upstreams, its quota "
                    "(upstreams_per_uid): '%s' refused; its processes spend "
                    "from local budgets for it",
                    (unsigned)uid, c.n, name);
        return RETRYD_EFULL;
    }
    return register_as(d, (int64_t)uid, name, given, ret);
}

static int register_as(server *d, int64_t uid, const char *name,
                       const budget_params *given, reg_entry *ret)
{
    reg_entry e = {.owner_uid = uid};
    int r = 0;

    if (!seg_name_valid(name))
        return RETRYD_EINVAL;
    rd_rcu_read_lock();
    reg_entry *found = registry_lookup(d->reg, name);
    budget_params holds = {0};
    if (found != NULL) {
        if (given != NULL && !params_equal(given, &found->params)) {
            r = RETRYD_ECONFLICT;
            holds = found->params;
        } else {
            *ret = *found;
        }
    }
    rd_rcu_read_unlock();
    if (r == RETRYD_ECONFLICT)
        log_conflict(name, given, &holds, "it is registered with");
    if (found != NULL)
        return r;

    const budget_params *conf = config_params_for(d->cfg, name);
    if (given != NULL && conf != &d->cfg->defaults &&
        !params_equal(given, conf)) {
        /* A configured upstream's are the file's. */
        log_conflict(name, given, conf, "the configuration says");
        return RETRYD_ECONFLICT;
    }
    /* A client names the budget; the upstream's health is the file's. */
    budget_params merged = *conf;
    if (given != NULL) {
        merged.ratio_micro = given->ratio_micro;
        merged.floor_micro_per_s = given->floor_micro_per_s;
        merged.cap_micro = given->cap_micro;
    }
    const budget_params *p = &merged;
    r = owner_upstream_alloc(&d->seg, name, p, &e.slot, &e.generation);
    if (r < 0) {
        log_limited(LOG_WARN,
                    "cannot register upstream '%s': %s (raise "
                    "upstream_capacity)",
                    name, retryd_strerror(r));
        return r;
    }
    strcpy(e.name, name);
    e.params = *p;
    r = registry_add(d->reg, &e);
    if (r < 0) {
        owner_upstream_retire(&d->seg, e.slot);
        return r;
    }
    log_limited(
        LOG_INFO,
        "registered upstream '%s' in slot %u (ratio %.3f, floor %.3f/s, "
        "cap %.1f)",
        name, e.slot, (double)p->ratio_micro / 1e6,
        (double)p->floor_micro_per_s / 1e6, (double)p->cap_micro / 1e6);
    *ret = e;
    return 0;
}

int daemon_retire(server *d, const char *name)
{
    rd_rcu_read_lock();
    reg_entry *found = registry_lookup(d->reg, name);
    rd_rcu_read_unlock();
    if (found == NULL)
        return RETRYD_ENOENT;
    /* Only this thread removes entries, so found stays valid here. */
    owner_upstream_retire(&d->seg, found->slot);
    log_limited(LOG_INFO, "retired upstream '%s' (slot %u)", name, found->slot);
    return registry_remove(d->reg, found);
}

/* Make an upstream's slot and registry entry carry @p p. */
static void update_params(server *d, reg_entry *found, const budget_params *p)
{
    reg_entry e = *found;
    if (params_equal(&found->params, p) &&
        budget_health_equal(&found->params, p) &&
        budget_hedge_equal(&found->params, p) &&
        budget_fleet_equal(&found->params, p))
        return;
    e.params = *p;
    owner_upstream_set_params(&d->seg, e.slot, p);
    if (registry_replace(d->reg, found, &e) == 0)
        log_limited(LOG_INFO,
                    "upstream '%s': parameters updated from the configuration",
                    e.name);
}

/* The heartbeat retired slot @p slot (damage beyond repair): the registry
 * forgets the upstream, so its clients' handles, refused by the new
 * generation, register it again into a fresh slot. */
static void forget_retired(void *arg, uint32_t slot, const char *name)
{
    server *d = arg;
    rd_rcu_read_lock();
    reg_entry *found = registry_lookup(d->reg, name);
    rd_rcu_read_unlock();
    /* Only this thread removes entries, so found stays valid here. */
    if (found != NULL && found->slot == slot)
        (void)registry_remove(d->reg, found);
}

void daemon_apply_config(server *d)
{
    const config *c = d->cfg;
    d->seg.on_retired = forget_retired;
    d->seg.on_retired_arg = d;
    /* At start and at every reload, as the log level is. */
    log_set_limit(c->log_limit_lines, c->log_limit_interval_s * 1000ull);
    for (size_t i = 0; i < c->n_upstreams; i++) {
        const upstream_conf *u = &c->upstreams[i];
        rd_rcu_read_lock();
        reg_entry *found = registry_lookup(d->reg, u->name);
        rd_rcu_read_unlock();
        reg_entry ignored;
        if (found != NULL)
            update_params(d, found, &u->params);
        else
            (void)daemon_register(d, u->name, NULL, &ignored);
    }
}

/* A name read back from the segment: NUL-terminated and well-formed. */
static bool slot_name(const seg_upstream *s, char out[SEG_NAME_MAX + 1])
{
    memcpy(out, s->name, SEG_NAME_MAX + 1);
    if (memchr(out, '\0', SEG_NAME_MAX + 1) == NULL)
        return false;
    return seg_name_valid(out);
}

void daemon_adopt_upstreams(server *d)
{
    for (uint32_t i = 0; i < d->seg.view.upstream_capacity; i++) {
        seg_upstream *s = &d->seg.view.upstreams[i];
        uint64_t id = atomic_load(&s->ident);
        if (seg_ident_state(id) != SEG_ACTIVE)
            continue;
        reg_entry e = {
            .slot = i, .generation = seg_ident_generation(id), .owner_uid = -1};
        if (!slot_name(s, e.name)) {
            log_limited(LOG_WARN, "slot %u holds a malformed name: retired", i);
            owner_upstream_retire(&d->seg, i);
            continue;
        }
        e.params = (budget_params){
            .ratio_micro = atomic_load(&s->ratio_micro),
            .floor_micro_per_s = atomic_load(&s->floor_micro_per_s),
            .cap_micro = atomic_load(&s->cap_micro),
        };
        budget_params_read_share(&e.params, s);
        /* The fleet keys are the daemon's alone and not in the slot: the
         * configuration's (its [defaults] for a client's upstream). */
        const budget_params *conf = config_params_for(d->cfg, e.name);
        e.params.fleet_floor_micro_per_s = conf->fleet_floor_micro_per_s;
        e.params.fleet_health = conf->fleet_health;
        e.params.fleet_pushback = conf->fleet_pushback;
        health_params h;
        retryd__health_params_of(s, &h);
        if (!retryd__health_params_ok(&h))
            h = budget_params_health(config_params_for(d->cfg, e.name));
        budget_params_set_health(&e.params, &h);
        hedge_params hp;
        retryd__hedge_params_of(&s->hedge, &hp);
        if (!retryd__hedge_params_ok(&hp))
            hp = budget_params_hedge(config_params_for(d->cfg, e.name));
        budget_params_set_hedge(&e.params, &hp);
        if (!budget_params_plausible(&e.params)) {
            log_limited(LOG_WARN,
                        "upstream '%s' (slot %u) holds implausible parameters: "
                        "retired",
                        e.name, i);
            owner_upstream_retire(&d->seg, i);
            continue;
        }
        bucket_tally t = {s->counters, false, NULL, NULL};
        unsigned damage =
            retryd__bucket_check(s, id, retryd__clock_coarse_ns(), &t);
        if (damage & BUCKET_BROKEN) {
            log_limited(LOG_WARN,
                        "upstream '%s' (slot %u) holds a token word of another "
                        "generation or an impossible balance: retired",
                        e.name, i);
            owner_upstream_retire(&d->seg, i);
            continue;
        }
        if (damage & BUCKET_CLAMPED)
            log_limited(LOG_WARN,
                        "upstream '%s' (slot %u): balance above the cap, "
                        "clamped to it",
                        e.name, i);
        if (damage & BUCKET_REFILL_RESET)
            log_limited(LOG_WARN,
                        "upstream '%s' (slot %u): refill time in the future, "
                        "reset to now",
                        e.name, i);
        if (registry_add(d->reg, &e) < 0) {
            log_limited(LOG_WARN, "slot %u repeats upstream '%s': retired", i,
                        e.name);
            owner_upstream_retire(&d->seg, i);
        }
    }
    log_info("adopted %lu upstreams", registry_count(d->reg));
}

/* --- idle registrations -------------------------------------------------- */

/* Retired per heartbeat at most: the rest wait for the next one. */
#define IDLE_RETIRE_MAX 256

typedef struct idle_scan {
    server *d;
    const bool *in_use; /* per slot: an attached process has an entry */
    uint64_t now_ns;
    char (*names)[SEG_NAME_MAX + 1];
    size_t n;
} idle_scan;

static bool configured(const config *c, const char *name)
{
    return config_params_for(c, name) != &c->defaults;
}

/* What moves while anybody uses the upstream: its own counters (exited
 * processes are folded into them). */
static uint64_t slot_activity(const seg_upstream *s)
{
    seg_upstream *m = (seg_upstream *)(uintptr_t)s; /* atomics only */
    return atomic_load(&m->counters[SEG_C_DEPOSITS]) +
           atomic_load(&m->counters[SEG_C_GRANTED]) +
           atomic_load(&m->counters[SEG_C_DENIED_BUDGET_EXHAUSTED]) +
           atomic_load(&m->counters[SEG_C_DENIED_OVER_SHARE]);
}

static int note_idle(const reg_entry *e, void *arg)
{
    idle_scan *sc = arg;
    server *d = sc->d;
    seg_upstream *s = retryd__segment_upstream(&d->seg.view, e->slot);
    if (s == NULL || configured(d->cfg, e->name))
        return 0;
    struct idle_slot *w = &d->idle[e->slot];
    uint64_t act = slot_activity(s);
    if (sc->in_use[e->slot] || act != w->activity || w->since_ns == 0) {
        w->activity = act;
        w->since_ns = sc->now_ns;
        return 0;
    }
    if (sc->now_ns - w->since_ns >= d->cfg->upstream_idle_retire_ns &&
        sc->n < IDLE_RETIRE_MAX)
        memcpy(sc->names[sc->n++], e->name, sizeof(e->name));
    return 0;
}

/* Which slots an attached process has an entry for (of their current
 * generation). */
static void mark_in_use(const server *d, bool *in_use)
{
    const seg_view *v = &d->seg.view;
    for (uint32_t i = 0; i < v->process_capacity; i++) {
        if (seg_ident_state(d->seg.procs[i].ident) != SEG_ACTIVE)
            continue;
        for (int e = 0; e < SEG_PROC_ENTRIES; e++) {
            uint64_t key = atomic_load(&v->processes[i].entry_upstream[e]);
            uint32_t slot = (uint32_t)(key >> 32) - 1;
            if (key != 0 && slot < v->upstream_capacity &&
                seg_ident_generation(d->seg.slots[slot].ident) == (uint32_t)key)
                in_use[slot] = true;
        }
    }
}

void daemon_retire_idle(server *d, uint64_t now_ns)
{
    uint32_t cap = d->seg.view.upstream_capacity;
    if (d->idle == NULL && (d->idle = calloc(cap, sizeof(*d->idle))) == NULL)
        return;
    bool *in_use = calloc(cap, sizeof(*in_use));
    idle_scan sc = {d, in_use, now_ns,
                    malloc(IDLE_RETIRE_MAX * sizeof(*sc.names)), 0};
    if (in_use == NULL || sc.names == NULL) {
        free(in_use), free(sc.names);
        return;
    }
    mark_in_use(d, in_use);
    rd_rcu_read_lock();
    registry_for_each(d->reg, note_idle, &sc);
    rd_rcu_read_unlock();
    for (size_t i = 0; i < sc.n; i++) {
        log_limited(LOG_INFO,
                    "upstream '%s' idle for upstream_idle_retire: retiring "
                    "its registration",
                    sc.names[i]);
        (void)daemon_retire(d, sc.names[i]);
    }
    free(in_use), free(sc.names);
}

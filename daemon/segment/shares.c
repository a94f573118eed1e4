/* SPDX-License-Identifier: MIT */
/*
 * Fair shares, the daemon's sweep (shares.h). Two passes over the process
 * slots' entries: the first decays each claim, notes what each process
 * deposited since the last sweep and whether it was active within the
 * window, and sums it all per upstream; the second ends or keeps each
 * upstream's shares and claims its floor; the third writes each entry's
 * factor and hands it its part of that floor. Everything it changes in a
 * claim it changes in the sum as well (retryd__share_claim_add/sub), so
 * the clients' invariant, the sum of claims is claimed_micro, holds
 * across a sweep.
 */
#include <stdlib.h>
#include <string.h>

#include "segment/shares.h"
#include "shared/bucket.h"

#define NS_PER_S UINT64_C(1000000000)
/* The floor's hand-out is the daemon's for this long after a sweep: past
 * it (a daemon stopped or gone), clients claim the refill again. */
#define FLOOR_HOLD_NS (3 * NS_PER_S)

__extension__ typedef unsigned __int128 u128;

/* What the sweep remembers of one entry of one process slot. */
typedef struct share_row {
    uint64_t proc_ident; /* the process slot's, when the row was started */
    uint64_t key;        /* the entry's upstream key then */
    uint64_t deposits;   /* the entry's deposits at the last sweep */
    uint64_t activity;   /* deposits + grants + denials at the last sweep */
    uint64_t active_ns;  /* when activity last moved; 0 never */
    uint64_t weight;     /* micro, the process's program's */
} share_row;

/* Per upstream slot, summed anew each sweep but for last_diff. */
typedef struct share_up {
    uint64_t weighted; /* sum of weight x deposits since the last sweep */
    uint64_t deposits; /* sum of deposits since the last sweep */
    uint64_t w_active; /* sum of the weights of the active entries */
    uint64_t n_active; /* entries active within the window */
    uint64_t claims;   /* sum of the claims, after the decay */
    uint64_t mean;     /* the mean weight the factors divide by */
    uint64_t floor;    /* micro-tokens of floor to hand out */
    int64_t last_diff; /* claimed_micro - claims at the previous sweep */
} share_up;

struct owner_shares {
    share_row *rows; /* process_capacity x SEG_PROC_ENTRIES */
    share_up *ups;   /* upstream_capacity */
    uint64_t last_ns;
};

static uint64_t entry_activity(const seg_process *p, int e)
{
    return owner_entry_sum(p, e, SEG_C_DEPOSITS) +
           owner_entry_sum(p, e, SEG_C_GRANTED) +
           owner_entry_sum(p, e, SEG_C_DENIED_BUDGET_EXHAUSTED) +
           owner_entry_sum(p, e, SEG_C_DENIED_OVER_SHARE);
}

static bool proc_active(const owner *o, uint32_t i)
{
    return seg_ident_state(o->procs[i].ident) == SEG_ACTIVE;
}

/*
 * A claim decays by dt/window of what it holds beyond one token (rounded
 * up), so that a process's claim follows what it earned over about the
 * last window; its last token stays while the process is active, so that
 * the retry a first attempt earned a moment ago is still its own after a
 * sweep. A process idle for a whole window loses its claim, and none
 * stays above the cap (a peer's scribble).
 */
static void decay(seg_upstream *s, _Atomic uint64_t *claim, uint64_t dt,
                  uint64_t window, bool idle)
{
    uint64_t c = atomic_load_explicit(claim, memory_order_relaxed);
    uint64_t cap = atomic_load_explicit(&s->cap_micro, memory_order_relaxed);
    if (c == 0)
        return;
    if (dt > window)
        dt = window;
    uint64_t keep = c < SEG_MICRO ? c : SEG_MICRO;
    uint64_t d =
        idle ? c : (uint64_t)(((u128)(c - keep) * dt + window - 1) / window);
    if (c > cap && c - cap > d)
        d = c - cap;
    (void)retryd__share_claim_sub(s, claim, d);
}

/* The first pass over one entry of process slot @p i. */
static void note_entry(owner *o, struct owner_shares *sh, uint32_t i, int e,
                       uint64_t weight, uint64_t dt, uint64_t now)
{
    seg_process *p = &o->view.processes[i];
    uint64_t key = atomic_load(&p->entry_upstream[e]);
    int64_t u = owner_key_slot(o, key);
    if (u < 0)
        return;
    seg_upstream *s = &o->view.upstreams[u];
    share_row *r = &sh->rows[(size_t)i * SEG_PROC_ENTRIES + (size_t)e];
    uint64_t dep = owner_entry_sum(p, e, SEG_C_DEPOSITS);
    uint64_t act = entry_activity(p, e);
    if (r->proc_ident != o->procs[i].ident || r->key != key)
        *r = (share_row){o->procs[i].ident, key, dep, act, now, weight};
    uint64_t window =
        atomic_load_explicit(&s->share_window_ns, memory_order_relaxed);
    share_up *up = &sh->ups[u];
    uint64_t d = dep - r->deposits;
    r->deposits = dep;
    r->weight = weight;
    if (act != r->activity) {
        r->activity = act;
        r->active_ns = now;
    }
    /* fair_shares = off (a window of 0): any claim left goes at once. */
    bool idle = window == 0 || now - r->active_ns > window;
    decay(s, &p->claim[e], dt, window ? window : 1, idle);
    if (!idle) {
        up->w_active += weight;
        up->n_active++;
    }
    up->weighted += weight * d;
    up->deposits += d;
    up->claims += atomic_load(&p->claim[e]);
}

/* A sum of claims off by the same amount at two sweeps in a row is no
 * update in flight (those land within nanoseconds) but a rewrite: put it
 * back. Returns whether it did. */
static bool repair_sum(seg_upstream *s, share_up *up)
{
    int64_t diff = (int64_t)(atomic_load(&s->claimed_micro) - up->claims);
    bool fix = diff != 0 && diff == up->last_diff;
    if (fix) {
        atomic_fetch_sub(&s->claimed_micro, (uint64_t)diff);
        diff = 0;
    }
    up->last_diff = diff;
    return fix;
}

/* The second pass, per upstream slot @p u: shares end a window after the
 * last shortage; while they are kept, the daemon claims the floor. */
static bool settle_upstream(owner *o, struct owner_shares *sh, uint32_t u,
                            uint64_t now)
{
    seg_upstream *s = &o->view.upstreams[u];
    share_up *up = &sh->ups[u];
    uint64_t ident = o->slots[u].ident;
    uint64_t since = atomic_load(&s->share_since_ns);
    uint64_t window = atomic_load(&s->share_window_ns);
    if (since != 0 && now >= since + window && /* a window of 0: off */
        atomic_compare_exchange_strong(&s->share_since_ns, &since, 0))
        since = 0;
    up->mean = up->deposits   ? up->weighted / up->deposits
               : up->n_active ? up->w_active / up->n_active
                              : CONFIG_DEFAULT_WEIGHT_MICRO;
    if (up->mean == 0)
        up->mean = CONFIG_DEFAULT_WEIGHT_MICRO;
    up->floor = 0;
    if (since != 0 && up->n_active > 0) {
        bucket_tally t = {s->counters, false, NULL, NULL};
        atomic_store(&s->share_floor_until_ns, now + FLOOR_HOLD_NS);
        up->floor = retryd__bucket_refill_at(s, ident, now, &t);
    } else {
        atomic_store(&s->share_floor_until_ns, 0);
    }
    return repair_sum(s, up);
}

/* The third pass over one entry: its factor, and its part of the floor. */
static void hand_out(owner *o, struct owner_shares *sh, uint32_t i, int e,
                     uint64_t now)
{
    seg_process *p = &o->view.processes[i];
    uint64_t key = atomic_load(&p->entry_upstream[e]);
    int64_t u = owner_key_slot(o, key);
    const share_row *r = &sh->rows[(size_t)i * SEG_PROC_ENTRIES + (size_t)e];
    if (u < 0 || r->key != key)
        return;
    seg_upstream *s = &o->view.upstreams[u];
    const share_up *up = &sh->ups[u];
    u128 f = (u128)r->weight * SEG_SHARE_FACTOR_ONE / up->mean;
    if (f > 1000 * SEG_SHARE_FACTOR_ONE)
        f = 1000 * SEG_SHARE_FACTOR_ONE;
    atomic_store(&p->share_factor[e], f ? (uint64_t)f : 1);
    uint64_t window = atomic_load(&s->share_window_ns);
    if (up->floor > 0 && up->w_active > 0 && now - r->active_ns <= window)
        (void)retryd__share_claim_add(
            s, &p->claim[e],
            (uint64_t)((u128)up->floor * r->weight / up->w_active));
}

static struct owner_shares *shares_of(owner *o)
{
    if (o->shares != NULL)
        return o->shares;
    struct owner_shares *sh = calloc(1, sizeof(*sh));
    if (sh == NULL)
        return NULL;
    sh->rows = calloc((size_t)o->view.process_capacity * SEG_PROC_ENTRIES,
                      sizeof(*sh->rows));
    sh->ups = calloc(o->view.upstream_capacity, sizeof(*sh->ups));
    if (sh->rows == NULL || sh->ups == NULL) {
        free(sh->rows), free(sh->ups), free(sh);
        return NULL;
    }
    o->shares = sh;
    return sh;
}

unsigned owner_shares_sweep(owner *o, const config *c, uint64_t now)
{
    struct owner_shares *sh = shares_of(o);
    unsigned repaired = 0;
    if (sh == NULL || o->slots == NULL || o->procs == NULL)
        return 0;
    uint64_t dt = sh->last_ns && now > sh->last_ns ? now - sh->last_ns : 0;
    sh->last_ns = now;
    for (uint32_t u = 0; u < o->view.upstream_capacity; u++) {
        int64_t keep = sh->ups[u].last_diff;
        sh->ups[u] = (share_up){.last_diff = keep};
    }
    for (uint32_t i = 0; i < o->view.process_capacity; i++) {
        if (!proc_active(o, i))
            continue;
        char program[OWNER_PROGRAM_MAX];
        owner_process_program(o, i, program);
        uint64_t w = config_weight_for(c, program);
        for (int e = 0; e < SEG_PROC_ENTRIES; e++)
            note_entry(o, sh, i, e, w, dt, now);
    }
    for (uint32_t u = 0; u < o->view.upstream_capacity; u++)
        if (seg_ident_state(o->slots[u].ident) == SEG_ACTIVE)
            repaired += settle_upstream(o, sh, u, now);
    for (uint32_t i = 0; i < o->view.process_capacity; i++)
        for (int e = 0; proc_active(o, i) && e < SEG_PROC_ENTRIES; e++)
            hand_out(o, sh, i, e, now);
    return repaired;
}

void owner_shares_free(owner *o)
{
    if (o->shares == NULL)
        return;
    free(o->shares->rows), free(o->shares->ups), free(o->shares);
    o->shares = NULL;
}

void owner_shares_release(owner *o, uint32_t slot)
{
    seg_process *p = retryd__segment_process(&o->view, slot);
    if (p == NULL)
        return;
    for (int e = 0; e < SEG_PROC_ENTRIES; e++) {
        int64_t u = owner_key_slot(o, atomic_load(&p->entry_upstream[e]));
        if (u >= 0)
            (void)retryd__share_claim_sub(&o->view.upstreams[u], &p->claim[e],
                                          UINT64_MAX);
    }
}

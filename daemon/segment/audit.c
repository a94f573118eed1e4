/* SPDX-License-Identifier: MIT */
/*
 * The ledger audit (audit.h). Two passes per heartbeat. The first walks
 * the attached processes' entries: it notices a ledger that went back (a
 * counter lower than at the last audit, an entry moved to another
 * upstream: an honest process only ever adds to its counters and never
 * reuses an entry), and links each entry to its upstream. The second,
 * per upstream, sums its ledgers anew from those links, then reads the
 * refill stamp and the balance right after, so that little traffic falls
 * between the sums and the reads, and compares.
 *
 * Why each comparison cannot fire on honest traffic:
 *   - Refill. A claim moves the stamp (compare-and-swap) before it counts
 *     what it refilled, so every claim the sums hold is in a stamp read
 *     after them, and an honest host's refills never exceed
 *     floor x (stamp - base) (each claim rounds down). That is exact, and
 *     cumulative from the base, so no claim in flight between two audits
 *     is seen twice or missed.
 *   - Balance. Grants, refused takes' dips, refills and discards reach
 *     the balance before or with their counts, so they can only make it
 *     read lower than the ledger says. Only a deposit in flight (added,
 *     not yet counted) makes it read higher, by a fraction of a token; the
 *     lowest of a few reads is taken, the tolerance is two tokens and four
 *     deposits, and an excess must be there at two audits in a row. A
 *     forged balance stays until it is spent; noise does not.
 * A base is taken again whenever something honest changes the rules: a
 * new or re-registered slot, new parameters, a ledger that was rewritten.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "retryd/common.h"
#include "segment/audit.h"
#include "segment/fleet_slots.h"

#define NS_PER_S UINT64_C(1000000000)
/* Reads of the balance per check: the lowest is compared, the highest
 * taken as a base (a take's dip or a deposit's overshoot in flight lasts
 * nanoseconds). */
#define BALANCE_READS 4
#define FINDING_MAX 384

__extension__ typedef unsigned __int128 u128;
__extension__ typedef __int128 i128;

/* The ledger's four counters, in the order of audit_row.n. */
enum { A_DEP, A_GRANT, A_REFILL, A_DISC, A_N };
static const int counter_of[A_N] = {
    SEG_C_DEPOSITS, SEG_C_GRANTED, SEG_C_REFILLED_MICRO, SEG_C_DISCARDED_MICRO};

/* One entry of one process slot, as the last audit saw it. */
typedef struct audit_row {
    uint64_t proc_ident; /* the process slot's, when the row was started */
    uint64_t key;        /* the entry's upstream key then; 0 unused */
    uint64_t n[A_N];
    int32_t next;      /* the next row of the same upstream this audit */
    uint64_t refilled; /* what this entry refilled since the last audit */
} audit_row;

/* One upstream slot: its base, and what this audit gathered. */
typedef struct audit_up {
    uint64_t ident; /* the slot's when the base was taken; 0: no base */
    uint64_t ratio, floor, cap;
    int64_t balance;  /* micro-tokens at the base */
    uint64_t n[A_N];  /* the summed ledgers at the base */
    uint64_t stamp;   /* the refill stamp at the last audit */
    uint64_t refills; /* the summed refills at the refill base */
    /* What the floor paid for the time the stamp advanced since the
     * refill base, and the floor in force at the last audit. */
    u128 allowed;
    uint64_t rate;
    uint64_t stamp_max; /* the latest stamp seen (never ahead of now) */
    uint64_t discards;  /* the summed discards at the last audit */
    int64_t suspect;    /* an excess seen at the last audit, else 0 */
    /* This audit's. */
    int32_t head; /* its first row, -1 none */
    int32_t top;  /* the row that refilled most, -1 none */
    uint32_t rows;
    bool rebase;
} audit_up;

struct owner_audit {
    audit_row *rows;      /* process_capacity x SEG_PROC_ENTRIES */
    audit_up *ups;        /* upstream_capacity */
    pthread_mutex_t lock; /* guards last */
    char last[FINDING_MAX];
};

int owner_audit_open(owner *o)
{
    struct owner_audit *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return RETRYD_ENOMEM;
    a->rows = calloc((size_t)o->view.process_capacity * SEG_PROC_ENTRIES,
                     sizeof(*a->rows));
    a->ups = calloc(o->view.upstream_capacity, sizeof(*a->ups));
    if (a->rows == NULL || a->ups == NULL) {
        free(a->rows), free(a->ups), free(a);
        return RETRYD_ENOMEM;
    }
    pthread_mutex_init(&a->lock, NULL);
    o->audit = a;
    return 0;
}

void owner_audit_free(owner *o)
{
    if (o->audit == NULL)
        return;
    pthread_mutex_destroy(&o->audit->lock);
    free(o->audit->rows), free(o->audit->ups), free(o->audit);
    o->audit = NULL;
}

void owner_audit_last(const owner *o, char *buf, size_t len)
{
    struct owner_audit *a = o->audit;
    if (len == 0)
        return;
    buf[0] = '\0';
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->lock);
    snprintf(buf, len, "%s", a->last);
    pthread_mutex_unlock(&a->lock);
}

/* Count a finding of @p kind, keep its line for the stats and log it
 * (at most a few lines per call site and window: a peer scribbling in a
 * loop must not flood the log). */
static void finding(owner *o, enum owner_damage kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finding(owner *o, enum owner_damage kind, const char *fmt, ...)
{
    struct owner_audit *a = o->audit;
    char line[FINDING_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    owner_found(o, kind);
    pthread_mutex_lock(&a->lock);
    memcpy(a->last, line, sizeof(line));
    pthread_mutex_unlock(&a->lock);
    log_limited(LOG_WARN, "ledger audit: %s", line);
}

/* "process slot 3 (pid 4242, program batch)", for a finding. */
static void name_slot(const owner *o, uint32_t slot, char *buf, size_t len)
{
    char program[OWNER_PROGRAM_MAX];
    owner_process_program(o, slot, program);
    snprintf(buf, len, "process slot %u (pid %llu, program %s)", slot,
             (unsigned long long)o->procs[slot].pid,
             program[0] ? program : "?");
}

static void read_entry(const seg_process *p, int e, uint64_t n[A_N])
{
    for (int c = 0; c < A_N; c++)
        n[c] = owner_entry_sum(p, e, counter_of[c]);
}

static void mark_rebase(struct owner_audit *a, const owner *o, uint64_t key)
{
    int64_t u = owner_key_slot(o, key);
    if (u >= 0)
        a->ups[u].rebase = true;
}

/* A ledger that went back: counted, named, and its upstreams' bases taken
 * again (what it held before is not known any more). */
static void rewritten(owner *o, uint32_t i, uint64_t old_key, uint64_t key,
                      const char *what)
{
    char who[96];
    name_slot(o, i, who, sizeof(who));
    mark_rebase(o->audit, o, old_key);
    mark_rebase(o->audit, o, key);
    finding(o, OWNER_D_LEDGER, "%s: %s", who, what);
}

/* The first pass over entry @p e of active process slot @p i. */
static void note_row(owner *o, uint32_t i, int e)
{
    struct owner_audit *a = o->audit;
    const seg_process *p = &o->view.processes[i];
    size_t idx = (size_t)i * SEG_PROC_ENTRIES + (size_t)e;
    audit_row *r = &a->rows[idx];
    uint64_t key = atomic_load(&p->entry_upstream[e]);
    if (r->proc_ident != o->procs[i].ident)
        *r = (audit_row){.proc_ident = o->procs[i].ident};
    r->refilled = 0;
    if (key == 0 && r->key == 0)
        return;
    uint64_t n[A_N];
    read_entry(p, e, n);
    if (r->key != key) {
        /* An unused entry's counts start from zero: all of them are
         * traffic since the process took it. */
        if (r->key != 0)
            rewritten(o, i, r->key, key,
                      "an entry of its ledger moved to another upstream");
        else
            r->refilled = n[A_REFILL];
        r->key = key;
    } else {
        bool back = false;
        for (int c = 0; c < A_N; c++)
            back |= n[c] < r->n[c];
        if (back)
            rewritten(o, i, key, 0, "a count of its ledger went back");
        else
            r->refilled = n[A_REFILL] - r->n[A_REFILL];
    }
    memcpy(r->n, n, sizeof(n));
    int64_t u = owner_key_slot(o, key);
    if (u < 0)
        return;
    audit_up *up = &a->ups[u];
    r->next = up->head;
    up->head = (int32_t)idx;
    up->rows++;
    if (r->refilled > 0 &&
        (up->top < 0 || r->refilled > a->rows[up->top].refilled))
        up->top = (int32_t)idx;
}

/* The ledgers of upstream @p u summed now: its own counters and its
 * rows' entries. */
static void sum_ledgers(const owner *o, uint32_t u, uint64_t n[A_N])
{
    const struct owner_audit *a = o->audit;
    const seg_upstream *s = &o->view.upstreams[u];
    for (int c = 0; c < A_N; c++)
        n[c] = atomic_load_explicit(&s->counters[counter_of[c]],
                                    memory_order_relaxed);
    for (int32_t r = a->ups[u].head; r >= 0; r = a->rows[r].next) {
        const seg_process *p = &o->view.processes[(size_t)r / SEG_PROC_ENTRIES];
        for (int c = 0; c < A_N; c++)
            n[c] += owner_entry_sum(p, r % SEG_PROC_ENTRIES, counter_of[c]);
    }
}

/* The balance read a few times: the lowest and the highest, as >= 0 (a
 * balance below zero is only takes in flight). */
static void read_balance(const seg_upstream *s, int64_t *lo, int64_t *hi)
{
    seg_upstream *m = (seg_upstream *)(uintptr_t)s; /* atomics only */
    *lo = INT64_MAX;
    *hi = 0;
    for (int k = 0; k < BALANCE_READS; k++) {
        int64_t b = seg_token_balance(atomic_load(&m->tokens));
        if (b < 0)
            b = 0;
        *lo = b < *lo ? b : *lo;
        *hi = b > *hi ? b : *hi;
    }
}

/* Take up to @p amount micro-tokens out of the balance, never below zero
 * and only from the slot's own generation. Returns what it took. */
static uint64_t take_back(seg_upstream *s, uint64_t ident, uint64_t amount)
{
    uint64_t old = atomic_load(&s->tokens);
    for (;;) {
        if ((uint16_t)seg_token_generation(old) !=
            (uint16_t)seg_ident_generation(ident))
            return 0;
        int64_t bal = seg_token_balance(old);
        uint64_t t = bal <= 0                 ? 0
                     : (uint64_t)bal < amount ? (uint64_t)bal
                                              : amount;
        if (t == 0)
            return 0;
        if (atomic_compare_exchange_weak(&s->tokens, &old, old - t))
            return t;
    }
}

/* The highest floor upstream @p u may have refilled at since the last
 * audit: its own, or the host's share of the fleet's while the daemon's
 * view applies one (docs/fleet.md; the clients' refill_due() reads the
 * same), any share written meanwhile included. */
static uint64_t floor_in_force(owner *o, uint32_t u)
{
    uint64_t own = o->slots[u].params.floor_micro_per_s;
    if (o->fleet == NULL)
        return own;
    const fleet_view *v = &o->fleet[u].copy;
    uint64_t f = o->fleet[u].floor_seen;
    o->fleet[u].floor_seen = 0;
    if ((v->flags & SEG_FLEET_FLOOR) && v->valid_until_ns != 0 &&
        v->floor_micro_per_s > f)
        f = v->floor_micro_per_s;
    return f > own ? f : own;
}

static void take_base(audit_up *up, uint64_t ident, const budget_params *p,
                      const uint64_t n[A_N], uint64_t stamp, int64_t balance,
                      uint64_t now)
{
    up->ident = ident;
    up->ratio = p->ratio_micro;
    up->floor = p->floor_micro_per_s;
    up->cap = p->cap_micro;
    up->balance = balance;
    memcpy(up->n, n, sizeof(up->n));
    up->stamp = stamp < now ? stamp : now;
    up->refills = n[A_REFILL];
    up->allowed = 0;
    up->rate = p->floor_micro_per_s;
    up->stamp_max = up->stamp;
    up->discards = n[A_DISC];
    up->suspect = 0;
}

static bool base_holds(const owner *o, const audit_up *up, uint32_t u,
                       const uint64_t n[A_N])
{
    const owner_slot *w = &o->slots[u];
    if (up->ident != w->ident || up->rebase ||
        up->ratio != w->params.ratio_micro ||
        up->floor != w->params.floor_micro_per_s ||
        up->cap != w->params.cap_micro)
        return false;
    for (int c = 0; c < A_N; c++)
        if (n[c] < up->n[c])
            return false; /* the upstream's own counters rewritten */
    return true;
}

/* The slot a finding about upstream @p u's refills names. */
static void refill_claimer(const owner *o, const audit_up *up, char *buf,
                           size_t len)
{
    if (up->top < 0) {
        snprintf(buf, len,
                 "the upstream's own counters (the daemon's "
                 "hand-out of the floor under fair shares, or a "
                 "process with more upstreams than entries)");
        return;
    }
    char who[96];
    const audit_row *r = &o->audit->rows[up->top];
    name_slot(o, (uint32_t)(up->top / SEG_PROC_ENTRIES), who, sizeof(who));
    snprintf(buf, len, "%s, which counted %llu.%06llu tokens of it", who,
             (unsigned long long)(r->refilled / SEG_MICRO),
             (unsigned long long)(r->refilled % SEG_MICRO));
}

/*
 * The refill check of upstream @p u: a stamp set back is put forward
 * again; refills beyond what the floor pays for the time the stamp
 * advanced are taken back from the balance, as far as the cap did not
 * discard them already. Returns what it took back.
 */
static uint64_t audit_refill(owner *o, uint32_t u, const uint64_t n[A_N],
                             uint64_t stamp, uint64_t now)
{
    audit_up *up = &o->audit->ups[u];
    seg_upstream *s = &o->view.upstreams[u];
    if (stamp < up->stamp_max) {
        uint64_t cur = stamp;
        while (cur < up->stamp_max &&
               !atomic_compare_exchange_weak(&s->last_refill_ns, &cur,
                                             up->stamp_max))
            ;
        finding(o, OWNER_D_REFILL_UNEXPLAINED,
                "upstream %s: its refill stamp was set back %.3f s; put "
                "forward again",
                o->slots[u].name,
                (double)(up->stamp_max - stamp) / (double)NS_PER_S);
        stamp = up->stamp_max;
    }
    uint64_t at = stamp < now ? stamp : now;
    if (at > up->stamp_max)
        up->stamp_max = at;
    /* The floor may have changed since the last audit (a fleet view
     * renewed or lapsed): the time since is paid at the higher of the two,
     * which a claim spanning the change cannot exceed. */
    uint64_t rate = floor_in_force(o, u);
    uint64_t paid_at = rate > up->rate ? rate : up->rate;
    if (at > up->stamp)
        up->allowed += (u128)(at - up->stamp) * paid_at / NS_PER_S;
    up->stamp = at;
    up->rate = rate;
    uint64_t used = n[A_REFILL] - up->refills;
    if ((u128)used <= up->allowed + SEG_MICRO)
        return 0;
    uint64_t excess = used - (uint64_t)up->allowed;
    uint64_t discarded = n[A_DISC] - up->discards;
    uint64_t landed = excess > discarded ? excess - discarded : 0;
    uint64_t took = take_back(s, o->slots[u].ident, landed);
    char who[160];
    refill_claimer(o, up, who, sizeof(who));
    finding(o, OWNER_D_REFILL_UNEXPLAINED,
            "upstream %s: %llu.%06llu tokens refilled beyond what a floor of "
            "%llu.%06llu/s pays for the time its stamp advanced, claimed "
            "through %s; %llu.%06llu taken back from the balance",
            o->slots[u].name, (unsigned long long)(excess / SEG_MICRO),
            (unsigned long long)(excess % SEG_MICRO),
            (unsigned long long)(up->rate / SEG_MICRO),
            (unsigned long long)(up->rate % SEG_MICRO), who,
            (unsigned long long)(took / SEG_MICRO),
            (unsigned long long)(took % SEG_MICRO));
    atomic_fetch_add(&o->audit_removed_micro, took);
    atomic_fetch_add(&o->audit_spent_micro, landed - took);
    up->refills = n[A_REFILL];
    up->allowed = 0;
    return took;
}

/* The balance the ledgers explain, from the base. */
static i128 explained(const audit_up *up, const uint64_t n[A_N])
{
    return (i128)up->balance +
           (i128)(n[A_DEP] - up->n[A_DEP]) * (i128)up->ratio +
           (i128)(n[A_REFILL] - up->n[A_REFILL]) -
           (i128)(n[A_GRANT] - up->n[A_GRANT]) * (i128)SEG_MICRO -
           (i128)(n[A_DISC] - up->n[A_DISC]);
}

/*
 * The balance check of upstream @p u: an excess over what the ledgers
 * explain, seen at two audits in a row, is taken back as far as the
 * balance still holds it; what was spent already is written off, so that
 * the next audit starts even.
 */
static void audit_balance(owner *o, uint32_t u, const uint64_t n[A_N],
                          int64_t lowest)
{
    audit_up *up = &o->audit->ups[u];
    i128 excess = (i128)lowest - explained(up, n);
    i128 tolerance = 2 * (i128)SEG_MICRO + 4 * (i128)up->ratio;
    if (excess <= tolerance) {
        up->suspect = 0;
        return;
    }
    if (up->suspect == 0) {
        up->suspect = excess > INT64_MAX ? INT64_MAX : (int64_t)excess;
        return;
    }
    uint64_t x = (uint64_t)(excess < up->suspect ? excess : up->suspect);
    uint64_t took = take_back(&o->view.upstreams[u], o->slots[u].ident, x);
    finding(o, OWNER_D_BALANCE_UNEXPLAINED,
            "upstream %s: %llu.%06llu tokens in its balance that no ledger "
            "explains (not counted by any of the %u entries of its "
            "processes, nor by its own counters); %llu.%06llu taken back, "
            "the rest already spent",
            o->slots[u].name, (unsigned long long)(x / SEG_MICRO),
            (unsigned long long)(x % SEG_MICRO), up->rows,
            (unsigned long long)(took / SEG_MICRO),
            (unsigned long long)(took % SEG_MICRO));
    atomic_fetch_add(&o->audit_removed_micro, took);
    atomic_fetch_add(&o->audit_spent_micro, x - took);
    /* The base moves so that the ledgers explain the balance again: up
     * by the excess (written off, as if it had been counted), down by
     * what was taken back. */
    up->balance += (int64_t)(x - took);
    /* What was not confirmed yet (a peer writing all the while) is the
     * next audit's suspect. */
    up->suspect =
        excess - (i128)x > tolerance ? (int64_t)(excess - (i128)x) : 0;
}

static void audit_upstream(owner *o, uint32_t u, uint64_t now)
{
    audit_up *up = &o->audit->ups[u];
    seg_upstream *s = &o->view.upstreams[u];
    uint64_t n[A_N];
    sum_ledgers(o, u, n);
    uint64_t stamp = atomic_load(&s->last_refill_ns);
    int64_t lo, hi;
    read_balance(s, &lo, &hi);
    if (!base_holds(o, up, u, n)) {
        take_base(up, o->slots[u].ident, &o->slots[u].params, n, stamp, hi,
                  now);
        return;
    }
    uint64_t took = audit_refill(o, u, n, stamp, now);
    up->balance -= (int64_t)took;
    audit_balance(o, u, n, lo - (int64_t)took);
    up->discards = n[A_DISC];
}

void owner_audit_fresh(owner *o, uint32_t slot, uint64_t balance, uint64_t now)
{
    struct owner_audit *a = o->audit;
    if (a == NULL || slot >= o->view.upstream_capacity)
        return;
    const uint64_t zero[A_N] = {0};
    take_base(&a->ups[slot], o->slots[slot].ident, &o->slots[slot].params, zero,
              now, (int64_t)balance, now);
}

void owner_audit(owner *o, uint64_t now)
{
    struct owner_audit *a = o->audit;
    if (a == NULL || o->slots == NULL || o->procs == NULL)
        return;
    for (uint32_t u = 0; u < o->view.upstream_capacity; u++) {
        a->ups[u].head = a->ups[u].top = -1;
        a->ups[u].rows = 0;
        a->ups[u].rebase = false;
    }
    for (uint32_t i = 0; i < o->view.process_capacity; i++) {
        if (seg_ident_state(o->procs[i].ident) != SEG_ACTIVE)
            continue;
        for (int e = 0; e < SEG_PROC_ENTRIES; e++)
            note_row(o, i, e);
    }
    for (uint32_t u = 0; u < o->view.upstream_capacity; u++)
        if (seg_ident_state(o->slots[u].ident) == SEG_ACTIVE)
            audit_upstream(o, u, now);
        else
            a->ups[u].ident = 0;
}

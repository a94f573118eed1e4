/* SPDX-License-Identifier: MIT */
/*
 * The program ledger (programs.h). Two open-addressing tables: program
 * names (never removed) and (program, upstream) pairs of the drained-by
 * window, the latter compacted and rebuilt on each sample, so neither
 * ever deletes in place.
 */
#include "stats/programs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PROG_HASH 2048u  /* a power of two above PROGRAMS_MAX + 1 */
#define PAIR_HASH 16384u /* a power of two, twice PROGRAMS_PAIRS_MAX */
#define RING (PROGRAMS_WINDOW_S + 1)

typedef struct prog {
    char name[OWNER_PROGRAM_MAX];
    uint64_t exited;
    uint64_t t[SEG_COUNTERS]; /* of its exited processes */
} prog;

/* A program's grants on one upstream (its entry key, which carries the
 * slot's generation): those of its exited processes, the live ones' at
 * the current sample, and the sum at each of the last RING samples. */
typedef struct pair {
    uint32_t prog;
    bool seen; /* a live process counted for it in this sample */
    uint64_t key;
    uint64_t exited, live;
    uint64_t ring[RING];
} pair;

/* Per upstream slot, as of the last sample. */
typedef struct drain {
    uint64_t key;
    uint32_t prog;
    uint64_t grants, total;
} drain;

struct programs {
    const owner *o;
    pthread_mutex_t lock;
    prog progs[PROGRAMS_MAX + 1];
    size_t n;
    int32_t prog_at[PROG_HASH]; /* -1: empty */
    pair *pairs;
    size_t npairs;
    int32_t *pair_at; /* PAIR_HASH; -1: empty */
    /* Per process slot: the ident it had when folded (0: none), so that a
     * reader does not count it live as well until its ident changes. */
    uint64_t *folded;
    drain *drains; /* per upstream slot */
    unsigned pos;  /* the ring's newest sample */
    bool primed;   /* a first sample taken */
};

programs *programs_new(const owner *o)
{
    programs *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->o = o;
    p->pairs = calloc(PROGRAMS_PAIRS_MAX, sizeof(*p->pairs));
    p->pair_at = malloc(PAIR_HASH * sizeof(*p->pair_at));
    p->folded = calloc(o->view.process_capacity, sizeof(*p->folded));
    p->drains = calloc(o->view.upstream_capacity, sizeof(*p->drains));
    if (p->pairs == NULL || p->pair_at == NULL || p->folded == NULL ||
        p->drains == NULL || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p->pairs), free(p->pair_at), free(p->folded), free(p->drains);
        free(p);
        return NULL;
    }
    memset(p->prog_at, 0xff, sizeof(p->prog_at));
    memset(p->pair_at, 0xff, PAIR_HASH * sizeof(*p->pair_at));
    return p;
}

void programs_free(programs *p)
{
    if (p == NULL)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p->pairs), free(p->pair_at), free(p->folded), free(p->drains);
    free(p);
}

/* --- the tables ----------------------------------------------------------- */

/* The row of program @p name, added when new; past PROGRAMS_MAX names,
 * the row of PROGRAMS_OTHER (the one name allowed beyond the bound). */
static uint32_t prog_of(programs *p, const char *name)
{
    unsigned h = (unsigned)seg_name_hash(name) & (PROG_HASH - 1);
    for (; p->prog_at[h] >= 0; h = (h + 1) & (PROG_HASH - 1))
        if (strcmp(p->progs[p->prog_at[h]].name, name) == 0)
            return (uint32_t)p->prog_at[h];
    if (p->n >= PROGRAMS_MAX && strcmp(name, PROGRAMS_OTHER) != 0)
        return prog_of(p, PROGRAMS_OTHER);
    prog *g = &p->progs[p->n];
    memset(g, 0, sizeof(*g));
    memcpy(g->name, name, strnlen(name, OWNER_PROGRAM_MAX - 1));
    p->prog_at[h] = (int32_t)p->n;
    return (uint32_t)p->n++;
}

static unsigned pair_hash(uint32_t g, uint64_t key)
{
    uint64_t x = (key ^ ((uint64_t)g << 48)) * UINT64_C(0x9e3779b97f4a7c15);
    return (unsigned)(x >> 40) & (PAIR_HASH - 1);
}

/* The pair (@p g, @p key), added when new (every sample in its ring
 * zero: what it has is all in the window); NULL when the table is full. */
static pair *pair_of(programs *p, uint32_t g, uint64_t key)
{
    unsigned h = pair_hash(g, key);
    for (; p->pair_at[h] >= 0; h = (h + 1) & (PAIR_HASH - 1)) {
        pair *x = &p->pairs[p->pair_at[h]];
        if (x->prog == g && x->key == key)
            return x;
    }
    if (p->npairs == PROGRAMS_PAIRS_MAX)
        return NULL;
    pair *x = &p->pairs[p->npairs];
    memset(x, 0, sizeof(*x));
    x->prog = g;
    x->key = key;
    p->pair_at[h] = (int32_t)p->npairs++;
    return x;
}

static void rebuild_pairs(programs *p)
{
    memset(p->pair_at, 0xff, PAIR_HASH * sizeof(*p->pair_at));
    for (size_t i = 0; i < p->npairs; i++) {
        unsigned h = pair_hash(p->pairs[i].prog, p->pairs[i].key);
        while (p->pair_at[h] >= 0)
            h = (h + 1) & (PAIR_HASH - 1);
        p->pair_at[h] = (int32_t)i;
    }
}

/* --- the main thread's side ----------------------------------------------- */

void programs_on_released(void *arg, uint32_t slot)
{
    programs *p = arg;
    const seg_process *sp = retryd__segment_process(&p->o->view, slot);
    char name[OWNER_PROGRAM_MAX];
    if (sp == NULL)
        return;
    owner_process_program(p->o, slot, name);
    pthread_mutex_lock(&p->lock);
    uint32_t g = prog_of(p, name);
    for (int e = 0; e < SEG_PROC_ENTRIES; e++) {
        uint64_t t[SEG_COUNTERS];
        uint64_t key = owner_entry_totals(p->o, slot, e, t);
        if (key == 0)
            continue;
        for (int c = 0; c < SEG_COUNTERS; c++)
            p->progs[g].t[c] += t[c];
        pair *x = pair_of(p, g, key);
        if (x != NULL)
            x->exited += t[SEG_C_GRANTED];
    }
    p->progs[g].exited++;
    p->folded[slot] = atomic_load(&sp->ident);
    pthread_mutex_unlock(&p->lock);
}

/* The live processes' grants, per pair. */
static void sample_live(programs *p)
{
    const owner *o = p->o;
    char name[OWNER_PROGRAM_MAX];
    for (size_t i = 0; i < p->npairs; i++)
        p->pairs[i].live = 0, p->pairs[i].seen = false;
    for (uint32_t i = 0; i < o->view.process_capacity; i++) {
        if (seg_ident_state(o->procs[i].ident) != SEG_ACTIVE)
            continue; /* the daemon's copy: this is the main thread */
        owner_process_program(o, i, name);
        uint32_t g = prog_of(p, name);
        for (int e = 0; e < SEG_PROC_ENTRIES; e++) {
            uint64_t t[SEG_COUNTERS];
            uint64_t key = owner_entry_totals(o, i, e, t);
            pair *x = key != 0 ? pair_of(p, g, key) : NULL;
            if (x != NULL)
                x->live += t[SEG_C_GRANTED], x->seen = true;
        }
    }
}

/* Whether @p key names upstream slot (key >> 32) - 1 as it is now. */
static bool key_current(const owner *o, uint64_t key, uint32_t *ret_slot)
{
    uint32_t slot = (uint32_t)(key >> 32) - 1;
    seg_upstream *s = retryd__segment_upstream(&o->view, slot);
    if (s == NULL)
        return false;
    uint64_t id = atomic_load(&s->ident);
    *ret_slot = slot;
    return seg_ident_state(id) == SEG_ACTIVE &&
           seg_ident_generation(id) == (uint32_t)key;
}

/* Pair @p x's grants in the window, counted towards its upstream's
 * drain: the most by one program (ties to the first name in byte order,
 * so the answer does not flicker), and the sum. */
static void account(programs *p, const pair *x, uint64_t window)
{
    uint32_t slot;
    if (window == 0 || !key_current(p->o, x->key, &slot))
        return;
    drain *d = &p->drains[slot];
    if (d->key != x->key)
        *d = (drain){.key = x->key};
    d->total += window;
    if (window > d->grants ||
        (window == d->grants &&
         strcmp(p->progs[x->prog].name, p->progs[d->prog].name) < 0))
        d->grants = window, d->prog = x->prog;
}

void programs_sample(programs *p)
{
    pthread_mutex_lock(&p->lock);
    sample_live(p);
    memset(p->drains, 0, p->o->view.upstream_capacity * sizeof(*p->drains));
    p->pos = (p->pos + 1) % RING;
    unsigned oldest = (p->pos + 1) % RING;
    size_t kept = 0;
    for (size_t i = 0; i < p->npairs; i++) {
        pair *x = &p->pairs[i];
        uint64_t cum = x->exited + x->live;
        /* The first sample (at startup) is the baseline: what adopted
         * processes did before this daemon started is not in its window. */
        for (unsigned k = 0; !p->primed && k < RING; k++)
            x->ring[k] = cum;
        x->ring[p->pos] = cum;
        uint64_t window = cum - x->ring[oldest];
        account(p, x, window);
        if (window == 0 && !x->seen)
            continue; /* idle a whole window, nobody live: forgotten */
        p->pairs[kept++] = *x;
    }
    p->npairs = kept;
    p->primed = true;
    rebuild_pairs(p);
    pthread_mutex_unlock(&p->lock);
}

/* --- the readers' side ---------------------------------------------------- */

size_t programs_read(programs *p, program_row *rows)
{
    const owner *o = p->o;
    char name[OWNER_PROGRAM_MAX];
    pthread_mutex_lock(&p->lock);
    memset(rows, 0, (PROGRAMS_MAX + 1) * sizeof(*rows));
    for (uint32_t i = 0; i < o->view.process_capacity; i++) {
        uint64_t id = atomic_load(&o->view.processes[i].ident);
        if (seg_ident_state(id) != SEG_ACTIVE || id == p->folded[i])
            continue;
        uint64_t t[SEG_COUNTERS];
        owner_process_program(o, i, name);
        program_row *r = &rows[prog_of(p, name)];
        owner_process_totals(o, i, t);
        r->processes++;
        for (int c = 0; c < SEG_COUNTERS; c++)
            r->t[c] += t[c];
    }
    for (size_t g = 0; g < p->n; g++) {
        memcpy(rows[g].name, p->progs[g].name, OWNER_PROGRAM_MAX);
        rows[g].exited = p->progs[g].exited;
        for (int c = 0; c < SEG_COUNTERS; c++)
            rows[g].t[c] += p->progs[g].t[c];
    }
    size_t n = p->n;
    pthread_mutex_unlock(&p->lock);
    return n;
}

bool programs_drained(programs *p, uint32_t slot, uint32_t gen,
                      program_drain *out)
{
    bool any = false;
    pthread_mutex_lock(&p->lock);
    if (slot < p->o->view.upstream_capacity) {
        const drain *d = &p->drains[slot];
        any = d->total > 0 && d->key != 0 && (uint32_t)d->key == gen;
        if (any) {
            memcpy(out->name, p->progs[d->prog].name, OWNER_PROGRAM_MAX);
            out->grants = d->grants;
            out->window_grants = d->total;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return any;
}

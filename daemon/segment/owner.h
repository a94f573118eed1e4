/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of the segment: creating or adopting it, allocating
 * and retiring upstream slots, allocating process slots and folding a gone
 * process's counters into its upstreams. Only the daemon's main thread
 * calls the writers; the stats thread calls owner_collect().
 */
#ifndef RETRYD_OWNER_H
#define RETRYD_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/config.h"
#include "shared/segment.h"

/* The kinds of damage the heartbeat finds in the segment (owner_police),
 * in the order of the stats reply's SegmentHealth. */
enum owner_damage {
    OWNER_D_HEADER,     /* header fields rewritten from the daemon's copy */
    OWNER_D_SLOT_IDENT, /* an upstream slot's ident or name restored */
    OWNER_D_PARAMS,     /* an upstream slot's parameters reset */
    OWNER_D_BALANCE,    /* a balance above the cap clamped (discarded) */
    OWNER_D_REFILL,     /* a refill stamp in the future brought to now */
    OWNER_D_RETIRED,    /* a slot beyond repair retired */
    OWNER_D_FORGED,     /* an ACTIVE slot the daemon never gave out, undone */
    OWNER_D_PROCESS,    /* a process slot's ident or owner restored */
    OWNER_D_HEALTH,     /* a health window word or pushback hold repaired */
    OWNER_D_SHARES,     /* a sum of fair-share claims put back */
    OWNER_D_FREED,      /* counts written into a freed process slot */
    /* The ledger audit's (audit.h): */
    OWNER_D_BALANCE_UNEXPLAINED, /* a balance above what ledgers explain */
    OWNER_D_REFILL_UNEXPLAINED,  /* a stamp set back, a refill beyond it */
    OWNER_D_LEDGER,              /* a process's counts went back or moved */
    OWNER_D_HEDGE,               /* a hedge picture or hedge balance repaired */
    OWNER_D_FLEET,               /* a fleet block put back (fleet_slots.h) */
    OWNER_DAMAGE_KINDS
};

/* What the daemon last wrote into an upstream slot: the segment is
 * writable by every attached process, this copy is not. */
typedef struct owner_slot {
    uint64_t ident;
    budget_params params;
    char name[SEG_NAME_MAX + 1];
} owner_slot;

/* The same for a process slot. */
typedef struct owner_proc {
    uint64_t ident, pid, start_time, uid;
    /* A freed slot's entry keys stay in the segment, watched for writes
     * (a process forked without the library's handler spends through the
     * parent's slot), until this many heartbeats have found none. */
    uint32_t watch_beats;
} owner_proc;

/* Heartbeats a freed slot is watched for writes (about a minute). */
#define OWNER_FREED_WATCH_BEATS 60

/* A process slot's program name as the kernel reports it (/proc/PID/comm,
 * at most 15 bytes, non-printable bytes as '?'), read by the daemon when
 * the process attaches or is adopted, and kept here rather than in the
 * segment, which neighbours can write. The main thread writes it, the
 * stats thread reads it: two relaxed atomic words, NUL-padded. The name
 * is written before the slot is published ACTIVE and a released slot is
 * reused only after an RCU grace period, so a reader normally sees one
 * whole name; but the reader trusts the segment's ident, which a
 * neighbour can forge, so it may read a slot being written: then it sees
 * a mix of two names, a wrong label for one scrape, never a torn number,
 * an unterminated string or a data race. */
#define OWNER_PROGRAM_MAX 16 /* with its NUL */
typedef struct owner_program {
    _Atomic uint64_t w[2];
} owner_program;

typedef struct owner {
    int fd; /* the sealed memfd, passed to clients */
    /* Its mode as made or adopted, and its inode: the heartbeat checks
     * both (owner_check_envelope()). */
    mode_t fd_mode;
    dev_t fd_dev;
    ino_t fd_ino;
    void *map;
    size_t size;
    seg_view view;
    uint64_t generation;
    /* The daemon's own copies (main thread only). */
    seg_header hdr_copy;
    owner_slot *slots;           /* one per upstream slot */
    owner_proc *procs;           /* one per process slot */
    owner_program *programs;     /* one per process slot; any thread reads */
    struct owner_shares *shares; /* the fair-share sweep's (shares.c) */
    struct owner_audit *audit;   /* the ledger audit's (audit.c) */
    /* Micro-tokens the audit found unexplained: taken back from balances,
     * and already spent when it found them. */
    _Atomic uint64_t audit_removed_micro;
    _Atomic uint64_t audit_spent_micro;
    struct owner_fleet *fleet; /* the fleet blocks' copies (fleet_slots.c) */
    _Atomic bool draining;
    /* Called when the heartbeat retired a slot beyond repair, so the
     * registry forgets it (upstreams.c sets it). */
    void (*on_retired)(void *arg, uint32_t slot, const char *name);
    void *on_retired_arg;
    /* Called as a process slot is released, before its counters are
     * folded and the slot freed: the per-program ledger keeps what the
     * process counted (the daemon sets it; stats/programs.h). */
    void (*on_released)(void *arg, uint32_t slot);
    void *on_released_arg;
    /* Damage found, per kind: totals for the stats thread; what the log
     * has not said yet and when it last said it, for one line per kind
     * per OWNER_DAMAGE_LOG_NS. */
    _Atomic uint64_t damage[OWNER_DAMAGE_KINDS];
    _Atomic uint64_t checks; /* heartbeats that policed the segment */
    _Atomic uint64_t last_damage_unix_ms;
    uint64_t unlogged[OWNER_DAMAGE_KINDS];
    uint64_t logged_ns[OWNER_DAMAGE_KINDS];
} owner;

/* The damage log's interval per kind. */
#define OWNER_DAMAGE_LOG_NS (10ull * 1000000000ull)

/*
 * Open the segment: adopt the sealed memfd that c->segment_path links to
 * (its keeper's, see keeper.h) when it is compatible (sealed against
 * resizing, the exact size, same layout and capacities, ours), keeping its
 * balances and counters; otherwise retire it (remove the link, which
 * dismisses its keeper) and create a new one: a memfd with its space
 * reserved, sealed, held by a new keeper. *ret_adopted tells which.
 * Clients receive the descriptor only over the control socket, after
 * authorisation.
 */
int owner_open(owner *o, const config *c, bool *ret_adopted, char *why,
               size_t why_len);
void owner_close(owner *o); /* unmaps; the file stays for the next server */

/* Stamp the heartbeat, police the segment (owner_police) and sweep the
 * fair shares with @p c's weights (shares.h). */
void owner_heartbeat(owner *o, const config *c);
/*
 * What keeps the segment across a restart, checked each heartbeat: the
 * keeper (its link at @p link_path must still lead to this memfd; when
 * the keeper died or the link went, a new keeper is started while the
 * daemon still holds the segment, so the next daemon adopts it instead of
 * starting afresh), and the memfd's owner and mode (a client holding the
 * descriptor with the privilege to fchown or fchmod it would make the next
 * daemon refuse it; put back when the daemon may, else said as an error).
 * Each finding is logged, rate-limited.
 */
void owner_check_envelope(owner *o, const char *link_path);
/*
 * Validate the header and every slot against the daemon's own copies;
 * repair what can be (header, idents, names, parameters, a balance above
 * the cap, a refill stamp in the future), retire what cannot, count and
 * log each kind of damage (docs/segment.md, "Trust"). Main thread.
 */
void owner_police(owner *o);
/* Count damage of @p kind, found now; the heartbeat logs it. */
void owner_found(owner *o, enum owner_damage kind);
struct Retryd__SegmentHealth;
/* The damage counts, for the stats reply (any thread); the audit's last
 * finding goes to @p finding (@p len bytes), which h->last_finding then
 * points to. */
void owner_health_fill(const owner *o, struct Retryd__SegmentHealth *h,
                       char *finding, size_t len);
void owner_set_draining(owner *o, bool on);
bool owner_draining(const owner *o);

/* A new upstream slot: parameters, name, initial balance (one second of
 * floor), then published ACTIVE. RETRYD_EFULL when none is free. */
int owner_upstream_alloc(owner *o, const char *name, const budget_params *p,
                         uint32_t *ret_slot, uint32_t *ret_gen);
/* New parameters; a balance above a lowered cap is clamped to it at once
 * (counted as discarded). */
void owner_upstream_set_params(owner *o, uint32_t slot, const budget_params *p);
/* Retire: a new generation, so handles to the old one can spend nothing. */
void owner_upstream_retire(owner *o, uint32_t slot);

int owner_process_alloc(owner *o, pid_t pid, uint64_t start_time, uid_t uid,
                        uint32_t *ret_slot);
/* The program name of process slot @p slot ("" when unknown); any
 * thread. */
void owner_process_program(const owner *o, uint32_t slot,
                           char out[OWNER_PROGRAM_MAX]);
/* Whether @p slot is active and held by this pid and start time. */
bool owner_process_matches(const owner *o, uint32_t slot, pid_t pid,
                           uint64_t start_time);
/* Fold the slot's counters into the upstreams and free it. Waits for RCU
 * readers of the process table (the stats thread) in between. */
void owner_process_release(owner *o, uint32_t slot);

/* Totals: per upstream slot (a zeroed array of capacity x SEG_COUNTERS)
 * the slot's own counters plus every active process's entries for it;
 * slots from the high-water mark on are left as they are. Returns the
 * number of active process slots summed. Call inside an RCU read-side
 * section. */
unsigned owner_collect(const owner *o, uint64_t (*per_upstream)[SEG_COUNTERS]);
/* One process slot's totals over its entries and lanes. */
void owner_process_totals(const owner *o, uint32_t slot,
                          uint64_t out[SEG_COUNTERS]);
/* The active upstream slot an entry key names, by the daemon's own copy of
 * the idents (the segment's may lie), or -1: none, or another generation
 * than the key's. */
int64_t owner_key_slot(const owner *o, uint64_t key);
/* Counter @p c of entry @p e of process slot @p p, its lanes summed. */
uint64_t owner_entry_sum(const seg_process *p, int e, int c);
/* Entry @p e of process slot @p slot: its totals over the lanes, and the
 * upstream key it counts for (0: unused, @p out left zero). */
uint64_t owner_entry_totals(const owner *o, uint32_t slot, int e,
                            uint64_t out[SEG_COUNTERS]);

#endif

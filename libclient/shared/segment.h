/* SPDX-License-Identifier: MIT */
/*
 * The host segment: its layout, and the checks every reader makes before
 * trusting it. Internal to retryd; shared by libretryd and the daemon.
 * docs/segment.md draws it; read that first.
 *
 * Everything a process may write concurrently with another is _Atomic.
 * Immutable header fields are written once by the daemon before it
 * publishes the magic number with release order.
 */
#ifndef RETRYD_SEGMENT_H
#define RETRYD_SEGMENT_H

#include <math.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/hedge_layout.h"

#define SEG_MAGIC UINT64_C(0x4753445952544552) /* "RETRYDSG", little-endian */
#define SEG_LAYOUT_VERSION                                                     \
    6u /* 5: hedging (docs/hedging.md); 6: the fleet tier (docs/fleet.md) */
#define SEG_LINE 64
#define SEG_HEADER_SIZE 4096u

/* Defaults and hard limits of the tables. */
#define SEG_DEFAULT_UPSTREAMS 4096u
#define SEG_DEFAULT_PROCESSES 1024u
#define SEG_MAX_UPSTREAMS 65536u
#define SEG_MAX_PROCESSES 65536u
#define SEG_NAME_MAX 95u /* bytes of an upstream name, without the NUL */

/* Header flags. */
#define SEG_FLAG_DRAINING 0x1u

/* Slot states, in the low 32 bits of a slot's ident word. */
enum seg_state {
    SEG_FREE = 0,
    SEG_ACTIVE = 1,
    SEG_RETIRED = 2,
};

/*
 * The counters kept per upstream and per process (see docs/segment.md).
 * Their numbers are part of the segment layout that a running daemon and
 * older clients agree on, so they are named and numbered here, by the
 * layout, and not derived from the decision engine's enums: a new denial
 * reason in the public API must be given a counter here on purpose (the
 * budget layer's mapping fails to compile until it is), and it never moves
 * the counters that follow.
 */
enum seg_counter {
    SEG_C_DEPOSITS = 0,
    SEG_C_GRANTED = 1,
    /* Denials by reason, in the order the proto's Counters.denied uses
     * (its index is this counter - SEG_C_DENIED_FIRST + 1). */
    SEG_C_DENIED_MAX_ATTEMPTS = 2,
    SEG_C_DENIED_BUDGET_EXHAUSTED = 3,
    SEG_C_DENIED_BODY_NOT_REPLAYABLE = 4,
    SEG_C_DENIED_RESPONSE_DELIVERED = 5,
    SEG_C_DENIED_RUNTIME_DRAINING = 6,
    SEG_C_DENIED_DEADLINE = 7,
    SEG_C_DENIED_PERMANENT_FAILURE = 8,
    SEG_C_DENIED_STATUS_NOT_RETRYABLE = 9,
    SEG_C_AMBIGUOUS = 10,
    /* Attempts by execution evidence, in the order of the proto's
     * Counters.evidence. */
    SEG_C_EVIDENCE_NOT_SENT = 11,
    SEG_C_EVIDENCE_SENT_NO_RESPONSE = 12,
    SEG_C_EVIDENCE_RESPONSE_RECEIVED = 13,
    SEG_C_EVIDENCE_PARTIAL_RESPONSE = 14,
    SEG_C_REFILLED_MICRO = 15,
    SEG_C_DISCARDED_MICRO = 16,
    /* Upstream health (docs/health.md): first attempts the host throttle
     * kept from being sent, and attempts a host pushback held back. */
    SEG_C_THROTTLED = 17,
    SEG_C_HELD = 18,
    /* Fair shares (docs/budget.md#fair-shares): retries refused because
     * the process, or the request, was over its share while others were
     * owed tokens (the ninth denial reason, after the first eight above);
     * and grants beyond the process's own claim while shares were kept. */
    SEG_C_DENIED_OVER_SHARE = 19,
    SEG_C_BORROWED = 20,
    SEG_COUNTERS = 24, /* 21..23 reserved for growth within a layout */
};

#define SEG_C_DENIED_FIRST SEG_C_DENIED_MAX_ATTEMPTS
/* Denial reasons with a counter: retryd_denial 1..SEG_C_DENIED_COUNT. */
#define SEG_C_DENIED_COUNT 9

/* The counter of denial reason @p reason (1..SEG_C_DENIED_COUNT, the
 * public retryd_denial), or -1: the first eight are contiguous, the ninth
 * came with layout 4. */
static inline int seg_denied_counter(int reason)
{
    if (reason >= 1 && reason <= 8)
        return SEG_C_DENIED_FIRST + reason - 1;
    return reason == 9 ? SEG_C_DENIED_OVER_SHARE : -1;
}
#define SEG_C_EVIDENCE_FIRST SEG_C_EVIDENCE_NOT_SENT
#define SEG_C_EVIDENCE_COUNT                                                   \
    (SEG_C_EVIDENCE_PARTIAL_RESPONSE - SEG_C_EVIDENCE_FIRST + 1)

/* Fixed point: balances and parameters are in micro-tokens. */
#define SEG_MICRO UINT64_C(1000000)
/*
 * The token word: generation (16 bits) above a biased balance (48 bits).
 * The field holds SEG_BALANCE_BIAS + balance, so a withdrawal can subtract
 * first and look afterwards (one atomic instruction): a balance driven
 * below zero by withdrawals in flight, each of which gives its token back,
 * borrows from the bias and never from the generation.
 */
#define SEG_BALANCE_BITS 48
#define SEG_BALANCE_MASK ((UINT64_C(1) << SEG_BALANCE_BITS) - 1)
#define SEG_BALANCE_BIAS (UINT64_C(1) << (SEG_BALANCE_BITS - 1))
#define SEG_MAX_CAP_MICRO (SEG_BALANCE_BIAS - 1)
/* The largest floor refill accepted, per second (about a million tokens). */
#define SEG_MAX_FLOOR_MICRO (UINT64_C(1) << 40)

/* The budget parameters of an upstream nobody configured, for the daemon
 * and for the library's local buckets alike (docs/budget.md). */
#define SEG_DEFAULT_RATIO_MICRO (SEG_MICRO / 10)       /* 0.1 per attempt */
#define SEG_DEFAULT_FLOOR_MICRO_PER_S (10 * SEG_MICRO) /* 10 per second */
#define SEG_DEFAULT_CAP_MICRO (100 * SEG_MICRO)        /* 100 tokens */
/* Fair shares: a claim decays over this window, and one request may take
 * at most this share of the balance (docs/budget.md#fair-shares). */
#define SEG_DEFAULT_SHARE_WINDOW_NS (UINT64_C(10) * 1000000000u)
#define SEG_DEFAULT_REQUEST_SHARE_MICRO (SEG_MICRO / 5) /* 20 % */
/* A share factor of 1: the weight of a process is the mean weight. */
#define SEG_SHARE_FACTOR_ONE (UINT64_C(1) << 20)

/* Whether budget parameters could come from a configuration or a client:
 * a cap of at least one token (a retry needs a whole one), every figure
 * within the segment's range. Checked by whoever accepts them, and by a
 * daemon adopting a segment written by another. */
static inline bool seg_params_plausible(uint64_t ratio_micro,
                                        uint64_t floor_micro_per_s,
                                        uint64_t cap_micro)
{
    return cap_micro >= SEG_MICRO && cap_micro <= SEG_MAX_CAP_MICRO &&
           ratio_micro <= SEG_MAX_CAP_MICRO &&
           floor_micro_per_s <= SEG_MAX_FLOOR_MICRO;
}

/* @p tokens in micro-tokens, rounded; false for a figure that is not a
 * finite number in [0, @p max_micro] micro-tokens. For the daemon's
 * configuration and the library's parameters alike. */
static inline bool seg_tokens_to_micro(double tokens, uint64_t max_micro,
                                       uint64_t *ret)
{
    if (!isfinite(tokens) || tokens < 0 ||
        tokens * (double)SEG_MICRO > (double)max_micro)
        return false;
    *ret = (uint64_t)llround(tokens * (double)SEG_MICRO);
    return true;
}

/* Whether @p name can name an upstream: 1..SEG_NAME_MAX printable ASCII
 * bytes, no space (a slot's name field holds SEG_NAME_MAX). */
static inline bool seg_name_valid(const char *name)
{
    size_t n = 0;
    if (name == NULL)
        return false;
    for (; name[n] != '\0'; n++)
        if (n == SEG_NAME_MAX || (unsigned char)name[n] <= 0x20 ||
            (unsigned char)name[n] >= 0x7f)
            return false;
    return n >= 1;
}

/* The hash of an upstream name (64-bit FNV-1a), for the tables that index
 * handles and registrations by name. */
static inline unsigned long seg_name_hash(const char *name)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (; *name != '\0'; name++)
        h = (h ^ (unsigned char)*name) * UINT64_C(0x100000001b3);
    return (unsigned long)h;
}

typedef struct seg_header {
    /* Immutable after creation. */
    uint64_t magic;
    uint32_t layout_version;
    uint32_t header_size;
    uint64_t total_size;
    uint32_t upstream_capacity;
    uint32_t process_capacity;
    uint32_t upstream_slot_size;
    uint32_t process_slot_size;
    uint64_t upstreams_offset;
    uint64_t processes_offset;
    uint64_t generation; /* random, new for each created segment */
    uint64_t created_unix_ms;
    /* Mutable, written by the daemon. */
    alignas(SEG_LINE) _Atomic uint64_t daemon_pid;
    _Atomic uint64_t daemon_start_time; /* clock ticks since boot */
    _Atomic uint64_t heartbeat_ns;      /* CLOCK_MONOTONIC */
    _Atomic uint32_t flags;             /* SEG_FLAG_* */
    /* Upstream slots [0, high_water) may be in use: bounds a scan. */
    _Atomic uint32_t upstream_high_water;
} seg_header;

/*
 * Upstream health (docs/health.md): the window of the host throttle has
 * SEG_HEALTH_SLOTS slots of window/SEG_HEALTH_SLOTS each, one word per
 * slot (one cache line in all), so that recording an attempt is one
 * atomic addition and reading the window one line.
 */
#define SEG_HEALTH_SLOTS 8u
/* Health flags (seg_upstream.health_flags), set by the daemon. */
#define SEG_HEALTH_THROTTLE 0x1u       /* adaptive_throttle = on */
#define SEG_HEALTH_PUSHBACK 0x2u       /* pushback = on */
#define SEG_HEALTH_PUSHBACK_FIRST 0x4u /* pushback_first_attempts = on */
#define SEG_HEALTH_FLAGS_ALL 0x7u

/* The fleet tier's block (seg_fleet, docs/fleet.md), in a file of its own. */
#include "shared/fleet_layout.h"

typedef struct seg_upstream {
    /* The bucket: the only line every process writes on the hot path. */
    alignas(SEG_LINE) _Atomic uint64_t tokens; /* gen16 | balance48 */
    _Atomic uint64_t last_refill_ns;
    /* Fair shares: the sum of every process's claim (seg_process.claim),
     * micro-tokens of the balance owed to those who earned them. On the
     * bucket's line, so that a withdrawal reads it where its subtraction
     * has just brought the line. */
    _Atomic uint64_t claimed_micro;
    /* Identity and parameters: read-mostly, written by the daemon. */
    alignas(SEG_LINE) _Atomic uint64_t ident; /* generation32 << 32 | state */
    _Atomic uint64_t ratio_micro;
    _Atomic uint64_t floor_micro_per_s;
    _Atomic uint64_t cap_micro;
    /* Fair shares are kept while this is not 0: the coarse time of the
     * latest shortage (a withdrawal that found no token it could take),
     * written at most a few times per window; the daemon sets it back to
     * 0 a window after the last. On this line because every deposit
     * reads it beside the ratio and the cap. */
    _Atomic uint64_t share_since_ns;
    char name[SEG_NAME_MAX + 1]; /* written before ident turns ACTIVE */
    /* Share parameters, written by the daemon; and until when the daemon
     * hands out the floor's refill as claims, which clients then leave to
     * it (docs/budget.md#fair-shares). */
    alignas(SEG_LINE) _Atomic uint64_t share_window_ns;
    _Atomic uint64_t request_share_micro;
    _Atomic uint64_t share_floor_until_ns;
    /* Health parameters, written by the daemon like the budget's; the
     * window's probe stamp (health.h), claimed once per slot; and the
     * host pushback's deadline. Read-mostly, all of it. */
    alignas(SEG_LINE) _Atomic uint64_t health_flags; /* SEG_HEALTH_* */
    _Atomic uint64_t throttle_k_micro;
    _Atomic uint64_t health_slot_ns; /* throttle_window / SEG_HEALTH_SLOTS */
    _Atomic uint64_t throttle_min_processes;
    _Atomic uint64_t pushback_max_ns;
    _Atomic uint64_t probe_epoch; /* epoch + 1 of the last probe; 0 none */
    /* Host pushback: no retry before this (coarse monotonic ns); 0 none.
     * Read before every attempt and written only when a Retry-After
     * arrives, so on this read-mostly line: on the bucket's, which every
     * deposit and withdrawal writes, each such read would be one more
     * transfer of the line between the cores of contending processes. */
    _Atomic uint64_t pushback_until_ns;
    /* The window: per slot, epoch20 | requests22 | accepts22. */
    alignas(SEG_LINE) _Atomic uint64_t window[SEG_HEALTH_SLOTS];
    /* Per slot, epoch20 | count44: the processes whose latest rejection
     * fell in that slot (each process counts in one slot at a time). */
    alignas(SEG_LINE) _Atomic uint64_t rejecters[SEG_HEALTH_SLOTS];
    /* Counters of exited processes (folded in by the daemon) and of
     * processes whose own table is full. */
    alignas(SEG_LINE) _Atomic uint64_t counters[SEG_COUNTERS];
    /* Hedging (docs/hedging.md): its bucket, parameters, picture,
     * counters and latency histogram, in a block of its own. */
    seg_hedge hedge;
    /* The fleet tier: what the daemon learned from the other hosts. */
    seg_fleet fleet;
} seg_upstream;

#define SEG_PROC_ENTRIES 32
/*
 * Counter lanes per entry. Lane 0 is shared by any thread of the process
 * (atomic additions); lanes 1..3 each belong to one thread, which counts
 * with plain loads and stores: no locked instruction on the hot path.
 * Readers sum the lanes.
 */
#define SEG_PROC_LANES 4

typedef struct seg_process {
    alignas(SEG_LINE) _Atomic uint64_t ident; /* generation32 << 32 | state */
    _Atomic uint64_t pid;
    _Atomic uint64_t start_time; /* /proc/<pid>/stat field 22 */
    _Atomic uint64_t uid;
    _Atomic uint64_t attached_unix_ms;
    /* Which upstream each entry counts for: (slot + 1) << 32 | slot
     * generation; 0 when unused. Written only by the owning process. */
    alignas(SEG_LINE) _Atomic uint64_t entry_upstream[SEG_PROC_ENTRIES];
    /* Fair shares, per entry: the micro-tokens of the balance this
     * process earned and has not spent (its claim, within [0, cap],
     * summed in the upstream's claimed_micro), written by the process and
     * decayed by the daemon; and the factor its deposits are claimed by
     * (its weight over the upstream's mean, SEG_SHARE_FACTOR_ONE for 1;
     * 0 reads as 1), written by the daemon. */
    alignas(SEG_LINE) _Atomic uint64_t claim[SEG_PROC_ENTRIES];
    alignas(SEG_LINE) _Atomic uint64_t share_factor[SEG_PROC_ENTRIES];
    alignas(SEG_LINE) _Atomic uint64_t
        counters[SEG_PROC_LANES][SEG_PROC_ENTRIES][SEG_COUNTERS];
} seg_process;

/* A validated view of a mapped segment. Pointers are derived from the
 * header only after every offset and size was checked against the mapping;
 * size is the mapping's own, not the header's (which a peer could
 * rewrite), so it is what to unmap. */
typedef struct seg_view {
    seg_header *hdr;
    seg_upstream *upstreams;
    seg_process *processes;
    uint32_t upstream_capacity;
    uint32_t process_capacity;
    size_t size;
} seg_view;

static inline uint64_t seg_ident(uint32_t generation, enum seg_state state)
{
    return (uint64_t)generation << 32 | (uint32_t)state;
}

static inline uint32_t seg_ident_generation(uint64_t ident)
{
    return (uint32_t)(ident >> 32);
}

static inline enum seg_state seg_ident_state(uint64_t ident)
{
    return (enum seg_state)(uint32_t)ident;
}

static inline uint64_t seg_token_word(uint32_t generation, uint64_t balance)
{
    return (uint64_t)(uint16_t)generation << SEG_BALANCE_BITS |
           ((SEG_BALANCE_BIAS + balance) & SEG_BALANCE_MASK);
}

/* The balance a token word holds; negative while withdrawals that found
 * the bucket short are still giving their tokens back. */
static inline int64_t seg_token_balance(uint64_t word)
{
    return (int64_t)(word & SEG_BALANCE_MASK) - (int64_t)SEG_BALANCE_BIAS;
}

static inline uint32_t seg_token_generation(uint64_t word)
{
    return (uint32_t)(word >> SEG_BALANCE_BITS);
}

/* Bytes a segment of these capacities occupies. */
size_t retryd__segment_size(uint32_t upstreams, uint32_t processes);

/*
 * Validate the header of @p mem (a mapping of @p size bytes) and fill a
 * view. Checks magic, layout version, header and slot sizes, that the
 * tables lie inside the mapping, and the capacity limits.
 * Returns 0, RETRYD_ECORRUPT or RETRYD_EVERSION.
 */
int retryd__segment_view(void *mem, size_t size, seg_view *ret);

/* Write only the header into @p mem, which must be all zeroes already: a
 * fresh memfd is, and writing every page of it would make the segment
 * resident for nothing (the daemon). */
void retryd__segment_format_zeroed(void *mem, uint32_t upstreams,
                                   uint32_t processes, uint64_t generation,
                                   uint64_t created_unix_ms);

/* Bounds-checked slot access; NULL for an index out of range. */
seg_upstream *retryd__segment_upstream(const seg_view *v, uint32_t index);
seg_process *retryd__segment_process(const seg_view *v, uint32_t index);

/* The start time of a process (field 22 of /proc/<pid>/stat), 0 when the
 * process does not exist. Tells a live process from a recycled pid. */
uint64_t retryd__process_start_time(uint64_t pid);

#endif /* RETRYD_SEGMENT_H */

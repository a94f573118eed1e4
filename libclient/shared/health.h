/* SPDX-License-Identifier: MIT */
/*
 * Upstream health on one slot: the host throttle's sliding window and the
 * host pushback (docs/health.md). Lock-free like the bucket, and like it
 * the same code runs on a shared slot and on a process-local one; the
 * clock is an argument, so tests drive time.
 *
 * The window has SEG_HEALTH_SLOTS slots of slot_ns each. A slot's word
 * holds the slot's epoch (now / slot_ns, 20 bits) above its request and
 * accept counts (22 bits each), so one atomic addition records an attempt
 * and a word from an older round of the ring tells itself apart: whoever
 * meets it first starts the slot's new epoch with a compare-and-swap (no
 * daemon needed), and a reader skips it. A process killed between two
 * instructions loses at most the event it was recording.
 */
#ifndef RETRYD_HEALTH_H
#define RETRYD_HEALTH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shared/segment.h"

#define HEALTH_EPOCH_BITS 20
#define HEALTH_EPOCH_MASK ((UINT64_C(1) << HEALTH_EPOCH_BITS) - 1)
#define HEALTH_COUNT_BITS 22
#define HEALTH_COUNT_MASK ((UINT64_C(1) << HEALTH_COUNT_BITS) - 1)
#define HEALTH_EPOCH_SHIFT (2 * HEALTH_COUNT_BITS)
/* A slot stops counting here, below the top of its field by more than the
 * additions in flight can carry (one per thread of every process). */
#define HEALTH_COUNT_LIMIT (HEALTH_COUNT_MASK - (UINT64_C(1) << 16))

/* The health parameters of one upstream (retryd.conf(5), docs/health.md). */
typedef struct health_params {
    uint64_t flags;           /* SEG_HEALTH_* */
    uint64_t k_micro;         /* throttle_k, in millionths */
    uint64_t window_ns;       /* throttle_window, >= 1 s */
    uint64_t min_processes;   /* throttle_min_processes, >= 1 */
    uint64_t pushback_max_ns; /* pushback_max: the longest hold */
} health_params;

/* Limits of the parameters, for whoever accepts them. */
#define HEALTH_MIN_WINDOW_NS UINT64_C(1000000000)
#define HEALTH_MAX_WINDOW_NS (UINT64_C(3600) * 1000000000)
#define HEALTH_MAX_K_MICRO (UINT64_C(1000) * SEG_MICRO)
#define HEALTH_MAX_PUSHBACK_NS (UINT64_C(3600) * 1000000000)

/* Throttle off, pushback on: k 2, window 30 s, quorum 1, holds of at most
 * 60 s. What a slot nobody configured gets, shared or local. */
extern const health_params retryd__health_defaults;

/* Whether @p p is within the limits above. */
bool retryd__health_params_ok(const health_params *p);

/* Write @p p into slot @p s and clear its window, probe and pushback (a
 * window of another slot length would be misread). The daemon does it on
 * a shared slot, the library on a local one. */
void retryd__health_init(seg_upstream *s, const health_params *p);

/* The parameters slot @p s holds. */
void retryd__health_params_of(seg_upstream *s, health_params *ret);

/* A thread's last epoch (health_epoch). */
typedef struct health_epoch_memo {
    uint64_t now_ns, slot_ns, epoch;
} health_epoch_memo;

extern _Thread_local health_epoch_memo retryd__health_epoch_tls
    __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* The window's epoch at @p now_ns for slots of @p slot_ns. A 64-bit
 * division takes tens of cycles, on every attempt that records, while the
 * coarse clock changes every 1 to 4 ms: each thread keeps its last
 * answer, a pure function of the two arguments. */
static inline uint64_t health_epoch(uint64_t now_ns, uint64_t slot_ns)
{
    health_epoch_memo *m = &retryd__health_epoch_tls;
    if (__builtin_expect(m->now_ns == now_ns && m->slot_ns == slot_ns, 1))
        return m->epoch;
    uint64_t e = (now_ns / slot_ns) & HEALTH_EPOCH_MASK;
    *m = (health_epoch_memo){now_ns, slot_ns, e};
    return e;
}

static inline uint64_t health_word_epoch(uint64_t w)
{
    return w >> HEALTH_EPOCH_SHIFT;
}

/* Whether a word stamped @p we, found in ring position @p i, belongs to
 * the window that ends with epoch @p e. */
static inline bool health_live(uint64_t we, unsigned i, uint64_t e)
{
    return (we % SEG_HEALTH_SLOTS) == i &&
           ((e - we) & HEALTH_EPOCH_MASK) < SEG_HEALTH_SLOTS;
}

/* The slot length of @p s: 0 when its parameters are unset (a slot being
 * written), which every operation then treats as "no window". */
static inline uint64_t health_slot_ns(seg_upstream *s)
{
    return atomic_load_explicit(&s->health_slot_ns, memory_order_relaxed);
}

/* Add @p add (requests << 22 | accepts, or a count) to the ring word of
 * epoch @p e: the common case, one load and one addition. */
void retryd__health_add_slow(_Atomic uint64_t *w, uint64_t old, uint64_t e,
                             uint64_t add);

static inline void health_add(_Atomic uint64_t *ring, uint64_t e, uint64_t add)
{
    _Atomic uint64_t *w = &ring[e % SEG_HEALTH_SLOTS];
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    if (__builtin_expect(health_word_epoch(old) == e &&
                             (old >> HEALTH_COUNT_BITS & HEALTH_COUNT_MASK) <
                                 HEALTH_COUNT_LIMIT,
                         1)) {
        atomic_fetch_add_explicit(w, add, memory_order_relaxed);
        return;
    }
    retryd__health_add_slow(w, old, e, add);
}

/*
 * Record @p requests requests of which @p accepts were accepted, at
 * @p now_ns. Does nothing while the throttle is off (nobody reads the
 * window then; a healthy host pays nothing for it).
 */
static inline void retryd__health_record(seg_upstream *s, uint64_t now_ns,
                                         unsigned requests, unsigned accepts)
{
    if (!(atomic_load_explicit(&s->health_flags, memory_order_relaxed) &
          SEG_HEALTH_THROTTLE))
        return;
    uint64_t slot = health_slot_ns(s);
    if (slot == 0)
        return;
    health_add(s->window, health_epoch(now_ns, slot),
               (uint64_t)requests << HEALTH_COUNT_BITS | accepts);
}

/*
 * A rejection seen by this process at @p now_ns: moves its count in the
 * rejecters ring to the current slot. @p mine is the process's own
 * record of where its count is (epoch + 1, 0 for nowhere), per upstream
 * binding; among the process's threads one moves it.
 */
void retryd__health_reject(seg_upstream *s, uint64_t now_ns,
                           _Atomic uint64_t *mine);

/* What the window holds at @p now_ns. */
typedef struct health_view {
    uint64_t requests, accepts;
    uint64_t rejecters; /* distinct processes with a rejection in it */
    bool engaged;       /* throttle on, quorum met, requests seen */
    double probability; /* of throttling a first attempt; 0 unless engaged */
} health_view;

/* Sum the window of @p s at @p now_ns (reads only). */
void retryd__health_view(seg_upstream *s, uint64_t now_ns, health_view *ret);

/*
 * max(0, (R - K·A) / (R + 1)) with K in millionths: the probability of
 * throttling, as the hot path and the daemon's stats compute it.
 */
static inline double health_probability(uint64_t requests, uint64_t accepts,
                                        uint64_t k_micro)
{
    double num = (double)requests - (double)k_micro / 1e6 * (double)accepts;
    return num <= 0 ? 0.0 : num / ((double)requests + 1.0);
}

/* Whether @p v's sums meet @p s's quorum, and then the probability they
 * give: the last step of retryd__health_view() and of the fleet's
 * (retryd__health_view_fleet, shared/fleet.h), over whatever was summed. */
static inline void health_view_judge(seg_upstream *s, health_view *v)
{
    uint64_t quorum =
        atomic_load_explicit(&s->throttle_min_processes, memory_order_relaxed);
    v->engaged = v->requests > 0 && v->rejecters >= quorum;
    v->probability =
        v->engaged
            ? health_probability(v->requests, v->accepts,
                                 atomic_load_explicit(&s->throttle_k_micro,
                                                      memory_order_relaxed))
            : 0.0;
}

/* Claim the probe of the slot at @p now_ns: true for exactly one caller
 * per slot host-wide, whose first attempt is sent whatever the throttle
 * says (docs/health.md: how a throttled host learns the upstream is back). */
bool retryd__health_claim_probe(seg_upstream *s, uint64_t now_ns);

/* A Retry-After of @p hold_ns received at @p now_ns: holds every process's
 * retries until then (the latest such deadline wins), at most
 * pushback_max. Nothing while pushback is off. */
void retryd__health_push(seg_upstream *s, uint64_t now_ns, int64_t hold_ns);

/* The coarse clock's tick, at most (clock.h): a hold is over this close
 * to its end. */
#define HEALTH_HOLD_SLACK_NS (UINT64_C(5) * 1000000)

/* The hold left at @p now_ns, 0 for none; never more than pushback_max
 * (a deadline scribbled far ahead holds no longer than one could). */
int64_t retryd__health_hold(seg_upstream *s, uint64_t now_ns);

/* retryd__health_hold(), and a hold found over is cleared: a client's fast
 * path (no hold ever set: no clock read) is then its own again. The
 * library's, never a reader's that must not write (the daemon's stats). */
int64_t retryd__health_hold_spent(seg_upstream *s, uint64_t now_ns);

/* What retryd__health_check() found. */
enum health_damage {
    HEALTH_WINDOW_RESET = 1,   /* a ring word no writer could have left */
    HEALTH_PUSHBACK_RESET = 2, /* a hold beyond pushback_max */
    HEALTH_PARAMS_RESET = 4,   /* parameters outside their limits */
};

/*
 * The daemon's policing of a slot's health at @p now_ns (docs/health.md):
 * a ring word stamped ahead of the current epoch, one with more accepts
 * than requests, or a rejecter count above @p max_rejecters (the process
 * capacity) is cleared; a hold beyond pushback_max is brought back to it;
 * parameters outside their limits are rewritten with @p want. Safe while
 * clients record. A mask of enum health_damage, 0 for sound.
 */
unsigned retryd__health_check(seg_upstream *s, uint64_t now_ns,
                              uint64_t max_rejecters,
                              const health_params *want);

#endif /* RETRYD_HEALTH_H */

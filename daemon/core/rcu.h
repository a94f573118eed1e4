/* SPDX-License-Identifier: MIT */
/*
 * RCU in the daemon: liburcu's memb flavour, plus the happens-before edges
 * RCU guarantees, spelled out for the thread sanitizer. liburcu 0.13 is not
 * instrumented, so TSan cannot see that a grace period orders a reader's
 * accesses before the reclaimer's free, or that a publication orders the
 * writer's initialisation before the reader's loads. Modelled as release
 * and acquire on one token:
 *
 *   writer:    initialise, rd_rcu_publish(), then add/replace/assign
 *   reader:    rd_rcu_read_lock() (acquire) ... rd_rcu_read_unlock()
 *              (release)
 *   reclaimer: rd_call_rcu() / rd_rcu_synchronize(), and a callback starts
 *              with rd_rcu_reclaim() (acquire)
 *
 * A reader still inside its section when the reclaimer runs has not
 * released yet, so a real use-after-grace-period is still reported. In
 * builds without TSan these are the plain liburcu calls.
 */
#ifndef RETRYD_RCU_H
#define RETRYD_RCU_H

#include <urcu/urcu-memb.h>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
extern char rd_rcu_token;
#define RD_TSAN_RELEASE() __tsan_release(&rd_rcu_token)
#define RD_TSAN_ACQUIRE() __tsan_acquire(&rd_rcu_token)
#else
#define RD_TSAN_RELEASE() ((void)0)
#define RD_TSAN_ACQUIRE() ((void)0)
#endif

static inline void rd_rcu_read_lock(void)
{
    urcu_memb_read_lock();
    RD_TSAN_ACQUIRE();
}

static inline void rd_rcu_read_unlock(void)
{
    RD_TSAN_RELEASE();
    urcu_memb_read_unlock();
}

/* A node reached through the table is an rcu_dereference: it may have
 * been published after this reader's section began, so each one
 * acquires again. */
static inline void rd_rcu_dereferenced(void)
{
    RD_TSAN_ACQUIRE();
}

static inline void rd_rcu_publish(void)
{
    RD_TSAN_RELEASE();
}

static inline void rd_rcu_synchronize(void)
{
    RD_TSAN_RELEASE();
    urcu_memb_synchronize_rcu();
    RD_TSAN_ACQUIRE();
}

static inline void rd_rcu_reclaim(void)
{
    RD_TSAN_ACQUIRE();
}

/* Wait for every queued callback (at exit). */
static inline void rd_rcu_barrier(void)
{
    urcu_memb_barrier();
    RD_TSAN_ACQUIRE();
}

static inline void rd_call_rcu(struct rcu_head *head,
                               void (*fn)(struct rcu_head *))
{
    RD_TSAN_RELEASE();
    urcu_memb_call_rcu(head, fn);
}

#endif

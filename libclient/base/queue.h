/* SPDX-License-Identifier: MIT */
/*
 * An intrusive doubly linked list (the shape of nginx's ngx_queue.h): the
 * element embeds a retryd_queue node and the list is a node of its own,
 * the sentinel, so that every list is circular and never empty of nodes.
 * Nothing is allocated and no operation can fail; inserting and removing
 * are a few pointer writes with no branch on "first" or "last", which is
 * why the executor's per-request lists use it.
 *
 * A node is in at most one list at a time. retryd__queue_remove leaves the
 * removed node pointing at itself, so removing it again is harmless and
 * retryd__queue_linked tells whether it is in a list; a node that was only
 * zeroed is in none and must not be removed.
 *
 * The sentinel's address is what the nodes point to: a list head must not
 * be moved (realloc'ed, copied by value) while the list holds nodes.
 */
#ifndef RETRYD_BASE_QUEUE_H
#define RETRYD_BASE_QUEUE_H

#include <stdbool.h>

#include "base/macros.h"

typedef struct retryd_queue {
    struct retryd_queue *prev, *next;
} retryd_queue;

/* An empty list, or a node in none. */
static inline void retryd__queue_init(retryd_queue *q)
{
    q->prev = q;
    q->next = q;
}

static inline bool retryd__queue_empty(const retryd_queue *h)
{
    return h->next == h;
}

/* Whether node @p n is in a list (after retryd__queue_init or a remove:
 * not). */
static inline bool retryd__queue_linked(const retryd_queue *n)
{
    return n->next != n;
}

/* The first and last nodes of @p h; @p h itself when it is empty. */
static inline retryd_queue *retryd__queue_head(const retryd_queue *h)
{
    return h->next;
}

static inline retryd_queue *retryd__queue_last(const retryd_queue *h)
{
    return h->prev;
}

/* @p n goes in right after @p at (a list head or a node in a list). */
static inline void retryd__queue_insert_after(retryd_queue *at, retryd_queue *n)
{
    n->next = at->next;
    n->prev = at;
    at->next->prev = n;
    at->next = n;
}

/* @p n becomes the first node of @p h. */
static inline void retryd__queue_insert_head(retryd_queue *h, retryd_queue *n)
{
    retryd__queue_insert_after(h, n);
}

/* @p n becomes the last node of @p h. */
static inline void retryd__queue_insert_tail(retryd_queue *h, retryd_queue *n)
{
    retryd__queue_insert_after(h->prev, n);
}

/* @p n leaves its list, and points at itself. */
static inline void retryd__queue_remove(retryd_queue *n)
{
    n->next->prev = n->prev;
    n->prev->next = n->next;
    retryd__queue_init(n);
}

/* The first node of @p h, removed; NULL when @p h is empty. */
static inline retryd_queue *retryd__queue_pop(retryd_queue *h)
{
    retryd_queue *n = h->next;
    if (n == h)
        return NULL;
    retryd__queue_remove(n);
    return n;
}

/* The element of type @p type whose member @p member is node @p n. */
#define RETRYD_QUEUE_DATA(n, type, member) RETRYD_CONTAINER_OF(n, type, member)

/* Every node of @p h, first to last; the body must not remove @p it (use
 * RETRYD_QUEUE_FOREACH_SAFE to remove while walking). */
#define RETRYD_QUEUE_FOREACH(it, h)                                            \
    for (retryd_queue *it = (h)->next; it != (h); it = it->next)

/* The same, where the body may remove @p it (and only @p it). */
#define RETRYD_QUEUE_FOREACH_SAFE(it, h)                                       \
    for (retryd_queue *it = (h)->next, *it##_next_ = it->next; it != (h);      \
         it = it##_next_, it##_next_ = it->next)

#endif

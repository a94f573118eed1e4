/* SPDX-License-Identifier: MIT */
/*
 * An intrusive binary min-heap (the shape of libuv's heap-inl.h): the
 * element embeds a retryd_heap_node, and the heap is a tree of those nodes
 * linked by pointers, kept complete, so that the node at position p
 * (counted from 1 at the top, level by level) has its children at 2p and
 * 2p + 1. The path from the top to position p is spelled by p's bits
 * below its highest one: 0 goes left, 1 right.
 *
 * Why a tree and not an array: nothing is allocated, so inserting cannot
 * fail and an element can always be timed (the executor's timers need no
 * out-of-memory path), and removing any element is O(log n) from its node
 * alone, with no index to keep beside it.
 *
 * The order is the caller's @p less, a strict weak order on the elements
 * (equal keys may come out in any order). An element's key must not change
 * while it is in the heap: remove it, change it, insert it again.
 */
#ifndef RETRYD_BASE_HEAP_H
#define RETRYD_BASE_HEAP_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macros.h"

typedef struct retryd_heap_node {
    struct retryd_heap_node *left, *right, *parent;
} retryd_heap_node;

typedef struct retryd_heap {
    retryd_heap_node *min; /* the top, NULL when empty */
    size_t n;
} retryd_heap;

/* Whether @p a goes before @p b. */
typedef bool (*retryd_heap_less_fn)(const retryd_heap_node *a,
                                    const retryd_heap_node *b);

static inline void retryd__heap_init(retryd_heap *h)
{
    h->min = NULL;
    h->n = 0;
}

/* The least element's node, NULL when the heap is empty. */
static inline retryd_heap_node *retryd__heap_min(const retryd_heap *h)
{
    return h->min;
}

/* The link that holds (or will hold) position @p pos, and the node it
 * belongs to (NULL for the top). */
static inline retryd_heap_node **retryd__heap_link(retryd_heap *h, size_t pos,
                                                   retryd_heap_node **ret_up)
{
    unsigned depth = 0;
    for (size_t p = pos; p > 1; p >>= 1)
        depth++;
    retryd_heap_node *up = NULL, **link = &h->min;
    while (depth-- > 0) {
        up = *link;
        link = (pos >> depth) & 1 ? &up->right : &up->left;
    }
    *ret_up = up;
    return link;
}

/* @p child takes the place of its parent @p up, which becomes its child:
 * every pointer to and from the two is rewritten, the keys stay put. */
static inline void retryd__heap_swap(retryd_heap *h, retryd_heap_node *up,
                                     retryd_heap_node *child)
{
    retryd_heap_node *grand = up->parent, *sibling;
    retryd_heap_node *cl = child->left, *cr = child->right;
    if (up->left == child) {
        sibling = up->right;
        child->left = up;
        child->right = sibling;
    } else {
        sibling = up->left;
        child->left = sibling;
        child->right = up;
    }
    if (sibling != NULL)
        sibling->parent = child;
    up->left = cl;
    up->right = cr;
    if (cl != NULL)
        cl->parent = up;
    if (cr != NULL)
        cr->parent = up;
    up->parent = child;
    child->parent = grand;
    if (grand == NULL)
        h->min = child;
    else if (grand->left == up)
        grand->left = child;
    else
        grand->right = child;
}

static inline void retryd__heap_sift_up(retryd_heap *h, retryd_heap_node *n,
                                        retryd_heap_less_fn less)
{
    while (n->parent != NULL && less(n, n->parent))
        retryd__heap_swap(h, n->parent, n);
}

static inline void retryd__heap_sift_down(retryd_heap *h, retryd_heap_node *n,
                                          retryd_heap_less_fn less)
{
    for (;;) {
        retryd_heap_node *least = n;
        if (n->left != NULL && less(n->left, least))
            least = n->left;
        if (n->right != NULL && less(n->right, least))
            least = n->right;
        if (least == n)
            return;
        retryd__heap_swap(h, n, least);
    }
}

/* @p n, in no heap, goes into @p h. Never fails. */
static inline void retryd__heap_insert(retryd_heap *h, retryd_heap_node *n,
                                       retryd_heap_less_fn less)
{
    retryd_heap_node *up;
    retryd_heap_node **link = retryd__heap_link(h, h->n + 1, &up);
    n->left = n->right = NULL;
    n->parent = up;
    *link = n;
    h->n++;
    retryd__heap_sift_up(h, n, less);
}

/* @p n, which is in @p h, leaves it: the last position's node takes its
 * place and moves down or up to where its key belongs. */
static inline void retryd__heap_remove(retryd_heap *h, retryd_heap_node *n,
                                       retryd_heap_less_fn less)
{
    retryd_heap_node *up;
    retryd_heap_node **link = retryd__heap_link(h, h->n, &up);
    retryd_heap_node *last = *link;
    *link = NULL;
    h->n--;
    if (last != n) {
        last->left = n->left;
        last->right = n->right;
        last->parent = n->parent;
        if (last->left != NULL)
            last->left->parent = last;
        if (last->right != NULL)
            last->right->parent = last;
        if (n->parent == NULL)
            h->min = last;
        else if (n->parent->left == n)
            n->parent->left = last;
        else
            n->parent->right = last;
        retryd__heap_sift_down(h, last, less);
        retryd__heap_sift_up(h, last, less);
    }
    n->left = n->right = n->parent = NULL;
}

/* The least element's node, removed; NULL when the heap is empty. */
static inline retryd_heap_node *retryd__heap_pop(retryd_heap *h,
                                                 retryd_heap_less_fn less)
{
    retryd_heap_node *n = h->min;
    if (n != NULL)
        retryd__heap_remove(h, n, less);
    return n;
}

/* The element of type @p type whose member @p member is node @p n. */
#define RETRYD_HEAP_DATA(n, type, member) RETRYD_CONTAINER_OF(n, type, member)
/* The same from a const node (in a retryd_heap_less_fn): a const element. */
#define RETRYD_HEAP_CDATA(n, type, member)                                     \
    RETRYD_CONST_CONTAINER_OF(n, type, member)

#endif

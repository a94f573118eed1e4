/* SPDX-License-Identifier: MIT */
/*
 * The intrusive min-heap (base/heap.h), against a sorted array: seeded
 * random inserts, removals of the least and removals of arbitrary
 * elements, the tree's shape and order checked after every step.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "base/heap.h"

#define N_ITEMS 512

typedef struct item {
    int64_t key;
    bool in; /* in the heap */
    retryd_heap_node node;
} item;

static bool item_less(const retryd_heap_node *a, const retryd_heap_node *b)
{
    return RETRYD_HEAP_CDATA(a, item, node)->key <
           RETRYD_HEAP_CDATA(b, item, node)->key;
}

static int64_t key_of(const retryd_heap_node *n)
{
    return RETRYD_HEAP_CDATA(n, item, node)->key;
}

/* xorshift64*, so that a failing seed replays on any libc. */
static uint64_t next_random(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* The sorted reference: the keys in the heap, ascending. */
typedef struct reference {
    int64_t keys[N_ITEMS];
    size_t n;
} reference;

static void ref_insert(reference *r, int64_t key)
{
    size_t i = r->n;
    while (i > 0 && r->keys[i - 1] > key) {
        r->keys[i] = r->keys[i - 1];
        i--;
    }
    r->keys[i] = key;
    r->n++;
}

static void ref_remove(reference *r, int64_t key)
{
    size_t i = 0;
    while (i < r->n && r->keys[i] != key)
        i++;
    cr_assert_lt(i, r->n, "key %lld not in the reference", (long long)key);
    memmove(&r->keys[i], &r->keys[i + 1], (r->n - i - 1) * sizeof(int64_t));
    r->n--;
}

/* Every node below @p n: parent links right, no child less than its
 * parent, and the tree complete (position p's children at 2p, 2p + 1).
 * The number of nodes. */
static size_t check_subtree(const retryd_heap_node *n, size_t pos, size_t size)
{
    if (n == NULL)
        return 0;
    cr_assert_leq(pos, size, "a node at position %zu of %zu", pos, size);
    const retryd_heap_node *kids[2] = {n->left, n->right};
    size_t count = 1;
    for (int i = 0; i < 2; i++) {
        if (kids[i] == NULL)
            continue;
        cr_assert_eq(kids[i]->parent, n, "child's parent link");
        cr_assert_geq(key_of(kids[i]), key_of(n), "heap order");
        count += check_subtree(kids[i], 2 * pos + (size_t)i, size);
    }
    return count;
}

static void check_heap(const retryd_heap *h, const reference *r)
{
    cr_assert_eq(h->n, r->n);
    if (r->n == 0) {
        cr_assert_null(retryd__heap_min(h));
        return;
    }
    cr_assert_not_null(h->min);
    cr_assert_null(h->min->parent);
    cr_assert_eq(key_of(retryd__heap_min(h)), r->keys[0]);
    cr_assert_eq(check_subtree(h->min, 1, h->n), h->n);
}

/* One seeded run: @p steps random operations over N_ITEMS elements whose
 * keys repeat (taken from a range smaller than the elements). */
static void random_run(uint64_t seed, int steps, int64_t key_range)
{
    static item items[N_ITEMS];
    retryd_heap h;
    reference ref = {.n = 0};
    uint64_t s = seed;
    memset(items, 0, sizeof(items));
    retryd__heap_init(&h);
    for (int step = 0; step < steps; step++) {
        item *it = &items[next_random(&s) % N_ITEMS];
        unsigned op = (unsigned)(next_random(&s) % 3);
        if (!it->in) {
            it->key = (int64_t)(next_random(&s) % (uint64_t)key_range);
            retryd__heap_insert(&h, &it->node, item_less);
            ref_insert(&ref, it->key);
            it->in = true;
        } else if (op == 0) {
            retryd_heap_node *n = retryd__heap_pop(&h, item_less);
            cr_assert_not_null(n);
            cr_assert_eq(key_of(n), ref.keys[0], "seed %llu step %d",
                         (unsigned long long)seed, step);
            ref_remove(&ref, key_of(n));
            RETRYD_HEAP_DATA(n, item, node)->in = false;
        } else {
            retryd__heap_remove(&h, &it->node, item_less);
            ref_remove(&ref, it->key);
            it->in = false;
        }
        check_heap(&h, &ref);
    }
    /* Drained in order. */
    for (size_t i = 0; ref.n > 0; i++) {
        retryd_heap_node *n = retryd__heap_pop(&h, item_less);
        cr_assert_not_null(n);
        cr_assert_eq(key_of(n), ref.keys[0], "draining, %zu", i);
        ref_remove(&ref, key_of(n));
        check_heap(&h, &ref);
    }
    cr_assert_null(retryd__heap_pop(&h, item_less));
}

Test(heap, empty_heap_has_no_min_and_pops_null)
{
    retryd_heap h;
    retryd__heap_init(&h);
    cr_expect_null(retryd__heap_min(&h));
    cr_expect_null(retryd__heap_pop(&h, item_less));
    cr_expect_eq(h.n, 0);
}

Test(heap, descending_inserts_come_out_ascending)
{
    item it[100];
    retryd_heap h;
    retryd__heap_init(&h);
    for (int i = 0; i < 100; i++) {
        it[i].key = 100 - i;
        retryd__heap_insert(&h, &it[i].node, item_less);
        cr_assert_eq(key_of(retryd__heap_min(&h)), 100 - i);
    }
    for (int want = 1; want <= 100; want++) {
        retryd_heap_node *n = retryd__heap_pop(&h, item_less);
        cr_assert_not_null(n);
        cr_assert_eq(key_of(n), want);
    }
    cr_expect_null(retryd__heap_min(&h));
}

Test(heap, removing_the_last_leaf_and_the_top_keeps_the_rest)
{
    item it[3] = {{.key = 1}, {.key = 2}, {.key = 3}};
    retryd_heap h;
    retryd__heap_init(&h);
    for (int i = 0; i < 3; i++)
        retryd__heap_insert(&h, &it[i].node, item_less);
    retryd__heap_remove(&h, &it[2].node, item_less); /* the last leaf */
    cr_expect_eq(h.n, 2);
    retryd__heap_remove(&h, &it[0].node, item_less); /* the top */
    cr_expect_eq(h.n, 1);
    cr_expect_eq(retryd__heap_min(&h), &it[1].node);
    cr_expect_null(it[1].node.parent);
    retryd__heap_remove(&h, &it[1].node, item_less);
    cr_expect_null(retryd__heap_min(&h));
}

Test(heap, random_operations_match_a_sorted_reference)
{
    for (uint64_t seed = 1; seed <= 20; seed++)
        random_run(seed * UINT64_C(0x9E3779B97F4A7C15), 4000, 1 << 20);
}

Test(heap, random_operations_with_many_equal_keys_match)
{
    for (uint64_t seed = 1; seed <= 20; seed++)
        random_run(seed * UINT64_C(0xD1B54A32D192ED03), 4000, 8);
}

/* SPDX-License-Identifier: MIT */
/* The intrusive list (base/queue.h): order, removal anywhere, walking. */
#include <stddef.h>

#include <criterion/criterion.h>

#include "base/queue.h"

typedef struct item {
    int key;
    retryd_queue node;
} item;

static int key_of(retryd_queue *n)
{
    return RETRYD_QUEUE_DATA(n, item, node)->key;
}

/* The keys of @p h first to last, and last to first, must be @p want. */
static void expect_keys(const retryd_queue *h, const int *want, size_t n)
{
    size_t i = 0;
    RETRYD_QUEUE_FOREACH(it, h)
    {
        cr_assert_lt(i, n, "more nodes than the %zu expected", n);
        cr_expect_eq(key_of(it), want[i], "node %zu: %d, wanted %d", i,
                     key_of(it), want[i]);
        i++;
    }
    cr_expect_eq(i, n);
    for (retryd_queue *it = h->prev; it != h; it = it->prev) {
        cr_assert_gt(i, 0);
        i--;
        cr_expect_eq(key_of(it), want[i], "backwards %zu", i);
    }
    cr_expect_eq(retryd__queue_empty(h), n == 0);
}

/* A list of @p n items keyed @p first, first + 1, ... in order. */
static void fill(retryd_queue *h, item *it, int n, int first)
{
    retryd__queue_init(h);
    for (int i = 0; i < n; i++) {
        it[i].key = first + i;
        retryd__queue_insert_tail(h, &it[i].node);
    }
}

Test(queue, new_list_is_empty_and_pop_returns_null)
{
    retryd_queue h;
    retryd__queue_init(&h);
    cr_expect(retryd__queue_empty(&h));
    cr_expect_eq(retryd__queue_head(&h), &h);
    cr_expect_eq(retryd__queue_last(&h), &h);
    cr_expect_null(retryd__queue_pop(&h));
}

Test(queue, tail_inserts_keep_order_and_head_inserts_reverse_it)
{
    retryd_queue h;
    item it[4] = {{.key = 0}, {.key = 1}, {.key = 2}, {.key = 3}};
    retryd__queue_init(&h);
    retryd__queue_insert_tail(&h, &it[1].node);
    retryd__queue_insert_tail(&h, &it[2].node);
    retryd__queue_insert_head(&h, &it[0].node);
    retryd__queue_insert_tail(&h, &it[3].node);
    expect_keys(&h, (int[]){0, 1, 2, 3}, 4);
    cr_expect_eq(key_of(retryd__queue_head(&h)), 0);
    cr_expect_eq(key_of(retryd__queue_last(&h)), 3);
}

Test(queue, removing_first_middle_and_last_relinks_the_rest)
{
    retryd_queue h;
    item it[5];
    fill(&h, it, 5, 0);
    retryd__queue_remove(&it[2].node);
    expect_keys(&h, (int[]){0, 1, 3, 4}, 4);
    retryd__queue_remove(&it[0].node);
    expect_keys(&h, (int[]){1, 3, 4}, 3);
    retryd__queue_remove(&it[4].node);
    expect_keys(&h, (int[]){1, 3}, 2);
    cr_expect_not(retryd__queue_linked(&it[4].node));
    cr_expect(retryd__queue_linked(&it[3].node));
    /* Removed twice: the node points at itself, the list is untouched. */
    retryd__queue_remove(&it[4].node);
    expect_keys(&h, (int[]){1, 3}, 2);
}

Test(queue, pop_takes_from_the_head_until_empty)
{
    retryd_queue h;
    item it[3];
    fill(&h, it, 3, 7);
    for (int want = 7; want <= 9; want++) {
        retryd_queue *n = retryd__queue_pop(&h);
        cr_assert_not_null(n);
        cr_expect_eq(key_of(n), want);
        cr_expect_not(retryd__queue_linked(n));
    }
    cr_expect_null(retryd__queue_pop(&h));
    cr_expect(retryd__queue_empty(&h));
}

Test(queue, safe_walk_may_remove_the_node_it_is_on)
{
    retryd_queue h;
    item it[6];
    fill(&h, it, 6, 0);
    RETRYD_QUEUE_FOREACH_SAFE(n, &h)
    {
        if (key_of(n) % 2 == 1)
            retryd__queue_remove(n);
    }
    expect_keys(&h, (int[]){0, 2, 4}, 3);
    RETRYD_QUEUE_FOREACH_SAFE(n, &h)
    {
        retryd__queue_remove(n);
    }
    expect_keys(&h, NULL, 0);
}

Test(queue, insert_after_a_node_puts_it_next)
{
    retryd_queue h;
    item it[3] = {{.key = 0}, {.key = 1}, {.key = 2}};
    retryd__queue_init(&h);
    retryd__queue_insert_tail(&h, &it[0].node);
    retryd__queue_insert_tail(&h, &it[2].node);
    retryd__queue_insert_after(&it[0].node, &it[1].node);
    expect_keys(&h, (int[]){0, 1, 2}, 3);
}

/* A node moves between two lists as the executor's calls move between its
 * queues: out of one, into the other, neither list disturbed. */
Test(queue, a_node_moves_from_one_list_to_another)
{
    retryd_queue a, b;
    item it[3];
    fill(&a, it, 3, 0);
    retryd__queue_init(&b);
    retryd__queue_remove(&it[1].node);
    retryd__queue_insert_tail(&b, &it[1].node);
    expect_keys(&a, (int[]){0, 2}, 2);
    expect_keys(&b, (int[]){1}, 1);
}

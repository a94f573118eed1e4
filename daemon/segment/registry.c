/* SPDX-License-Identifier: MIT */
#include "segment/registry.h"

#include "core/rcu.h"
#include "base/macros.h"

#include <stdlib.h>
#include <string.h>

#include "retryd/common.h"

struct registry {
    struct cds_lfht *ht;
};

static int match(struct cds_lfht_node *node, const void *key)
{
    return strcmp(RETRYD_CONTAINER_OF(node, reg_entry, node)->name, key) == 0;
}

int registry_new(registry **ret)
{
    registry *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return RETRYD_ENOMEM;
    r->ht = cds_lfht_new_flavor(64, 64, 0,
                                CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
                                &urcu_memb_flavor, NULL);
    if (r->ht == NULL) {
        free(r);
        return RETRYD_ENOMEM;
    }
    *ret = r;
    return 0;
}

static void entry_free_rcu(struct rcu_head *head)
{
    rd_rcu_reclaim();
    free(RETRYD_CONTAINER_OF(head, reg_entry, rcu));
}

void registry_free(registry *r)
{
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;

    if (r == NULL)
        return;
    rd_rcu_read_lock();
    cds_lfht_for_each(r->ht, &it, node)
    {
        if (cds_lfht_del(r->ht, node) == 0)
            rd_call_rcu(&RETRYD_CONTAINER_OF(node, reg_entry, node)->rcu,
                        entry_free_rcu);
    }
    rd_rcu_read_unlock();
    rd_rcu_barrier(); /* run the frees queued above */
    cds_lfht_destroy(r->ht, NULL);
    free(r);
}

reg_entry *registry_lookup(registry *r, const char *name)
{
    struct cds_lfht_iter it;
    cds_lfht_lookup(r->ht, seg_name_hash(name), match, name, &it);
    struct cds_lfht_node *node = cds_lfht_iter_get_node(&it);
    rd_rcu_dereferenced();
    return node ? RETRYD_CONTAINER_OF(node, reg_entry, node) : NULL;
}

void registry_for_each(registry *r, int (*fn)(const reg_entry *, void *),
                       void *arg)
{
    struct cds_lfht_iter it;
    struct cds_lfht_node *node;
    cds_lfht_for_each(r->ht, &it, node)
    {
        rd_rcu_dereferenced();
        if (fn(RETRYD_CONTAINER_OF(node, reg_entry, node), arg) != 0)
            break;
    }
}

static reg_entry *copy_of(const reg_entry *e)
{
    reg_entry *n = malloc(sizeof(*n));
    if (n != NULL) {
        *n = *e;
        cds_lfht_node_init(&n->node);
    }
    return n;
}

int registry_add(registry *r, const reg_entry *e)
{
    reg_entry *n = copy_of(e);
    if (n == NULL)
        return RETRYD_ENOMEM;
    rd_rcu_publish();
    rd_rcu_read_lock();
    struct cds_lfht_node *got = cds_lfht_add_unique(
        r->ht, seg_name_hash(n->name), match, n->name, &n->node);
    rd_rcu_read_unlock();
    if (got != &n->node) {
        free(n);
        return RETRYD_ECONFLICT;
    }
    return 0;
}

int registry_replace(registry *r, reg_entry *old, const reg_entry *e)
{
    reg_entry *n = copy_of(e);
    if (n == NULL)
        return RETRYD_ENOMEM;
    struct cds_lfht_iter it;
    int rc = RETRYD_ENOENT;
    rd_rcu_publish();
    rd_rcu_read_lock();
    cds_lfht_lookup(r->ht, seg_name_hash(old->name), match, old->name, &it);
    if (cds_lfht_iter_get_node(&it) == &old->node)
        rc = cds_lfht_replace(r->ht, &it, seg_name_hash(n->name), match,
                              n->name, &n->node);
    rd_rcu_read_unlock();
    if (rc != 0) {
        free(n);
        return RETRYD_ENOENT;
    }
    rd_call_rcu(&old->rcu, entry_free_rcu);
    return 0;
}

int registry_remove(registry *r, reg_entry *old)
{
    rd_rcu_read_lock();
    int rc = cds_lfht_del(r->ht, &old->node);
    rd_rcu_read_unlock();
    if (rc != 0)
        return RETRYD_ENOENT;
    rd_call_rcu(&old->rcu, entry_free_rcu);
    return 0;
}

unsigned long registry_count(registry *r)
{
    long split1, split2;
    unsigned long count;
    rd_rcu_read_lock();
    cds_lfht_count_nodes(r->ht, &split1, &count, &split2);
    rd_rcu_read_unlock();
    return count;
}

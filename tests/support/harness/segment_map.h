/* SPDX-License-Identifier: MIT */
/*
 * The daemon's segment as a neighbour sees it, for the hostile suites that
 * write where they must not (test_segment_attacks, test_ledger_audit):
 * mapped through the keeper's link as any process of the daemon's user
 * can, an upstream's slot found by name, and the daemon's segment-health
 * counts from fresh stats. Include after "daemon_fixture.h".
 */
#ifndef RETRYD_TEST_SEGMENT_MAP_H
#define RETRYD_TEST_SEGMENT_MAP_H

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shared/segment.h"

typedef struct mapped {
    void *map;
    size_t size;
    seg_view v;
} mapped;

/* Map D's segment; false on failure. Asserts nothing, so that attacker
 * processes forked from a test may call it. */
static inline bool try_map_segment(mapped *m)
{
    int fd = open(D.segment, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    m->size = (size_t)st.st_size;
    m->map = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return m->map != MAP_FAILED &&
           retryd__segment_view(m->map, m->size, &m->v) == 0;
}

static inline void map_segment(mapped *m)
{
    cr_assert(try_map_segment(m), "cannot map %s: %s", D.segment,
              strerror(errno));
}

/* The active slot named @p name, or NULL (asserts nothing). */
static inline seg_upstream *find_slot(const mapped *m, const char *name)
{
    for (uint32_t i = 0; i < m->v.upstream_capacity; i++)
        if (strcmp(m->v.upstreams[i].name, name) == 0 &&
            seg_ident_state(atomic_load(&m->v.upstreams[i].ident)) ==
                SEG_ACTIVE)
            return &m->v.upstreams[i];
    return NULL;
}

static inline seg_upstream *slot_named(const mapped *m, const char *name)
{
    seg_upstream *s = find_slot(m, name);
    cr_assert(s != NULL, "no active slot holds '%s'", name);
    return s;
}

/* A segment-health count from fresh stats. */
static inline double health(const char *key)
{
    stats_json();
    return number_in_res("\"segment_health\"", key);
}

typedef struct at_least {
    const char *key;
    double n;
} at_least;

static inline bool health_reaches(void *arg)
{
    at_least *a = arg;
    return health(a->key) >= a->n;
}

/* Wait (bounded: several heartbeats) until the daemon counted at least
 * @p n of damage @p key. */
static inline void wait_health(const char *key, double n)
{
    at_least a = {key, n};
    cr_assert(rd_wait_until(health_reaches, &a, 10000),
              "%s stayed below %g: %s", key, n, res.out);
}

#endif

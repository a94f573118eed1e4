/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer: the input is what a Redis (or the hosts writing into it)
 * sends back to a host's sync (docs/fleet.md). hiredis's reader parses the
 * stream as the fleet's link does; the replies it yields are read as one
 * upstream's sync, published or not, and each array as an interval's
 * hash. Whatever they hold, the sums stay within FLEET_COUNT_MAX and
 * nothing is read past a reply.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fleet/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_REPLIES (FLEET_SYNC_COMMANDS + FLEET_SYNC_HOLD_COMMANDS)

static void check(const fleet_gauges *g)
{
    if (g->hosts > FLEET_COUNT_MAX || g->fa > FLEET_COUNT_MAX ||
        g->rg > FLEET_COUNT_MAX || g->r > FLEET_COUNT_MAX ||
        g->a > FLEET_COUNT_MAX || g->rej > FLEET_COUNT_MAX)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisReader *rd = fleet_reader_new();
    redisReply *r[MAX_REPLIES];
    size_t n = 0;
    void *reply;
    if (rd == NULL)
        return 0;
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK)
        while (n < MAX_REPLIES && redisReaderGetReply(rd, &reply) == REDIS_OK &&
               reply != NULL)
            r[n++] = reply;
    redisReaderFree(rd);
    fleet_gauges g;
    uint64_t hold;
    char err[256];
    for (int published = 0; published < 2; published++)
        if (fleet_read_sync(r, n, published, &g, &hold, err, sizeof(err)) == 0)
            check(&g);
    for (size_t i = 0; i < n; i++) {
        if (fleet_gauges_parse(r[i], &g) == 0)
            check(&g);
        freeReplyObject(r[i]);
    }
    return 0;
}

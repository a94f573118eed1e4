/* SPDX-License-Identifier: MIT */
/*
 * What a host writes into the fleet's Redis and reads back (docs/fleet.md,
 * "Keys"), without the socket: the keys, the commands of one upstream's
 * sync, the parsing of their replies (another host's writes, so untrusted:
 * every number is checked and bounded) and the view they make. Pure
 * functions, tested and fuzzed on their own.
 *
 * Per upstream, the fleet's keys share one hash tag, {NAME:UPSTREAM}, so
 * they live in one slot of a Redis Cluster:
 *
 *   retryd:{NAME:UPSTREAM}:MS:B  a hash per interval B of MS ms (B counts
 *                                intervals since the epoch): every host
 *                                adds its gauges to it once (HINCRBY),
 *                                and it expires by itself
 *   retryd:{NAME:UPSTREAM}:pb    a sorted set whose one member's score is
 *                                the latest hold's end (unix ms; ZADD GT),
 *                                expiring when it ends (PEXPIREAT GT)
 */
#ifndef RETRYD_FLEET_RECORDS_H
#define RETRYD_FLEET_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "fleet/link.h"
#include "shared/fleet.h"

/* What one host adds to an interval's hash, and what the hash sums. */
typedef struct fleet_gauges {
    uint64_t hosts; /* 1 for one host; the sum: the hosts in it */
    uint64_t fa;    /* first attempts in the share window */
    uint64_t rg;    /* retries granted in the share window */
    uint64_t r, a;  /* the host throttle's window: requests, accepts */
    uint64_t rej;   /* processes with a rejection in it */
} fleet_gauges;

/* The share window, in syncs: first attempts over the last 8 intervals. */
#define FLEET_SHARE_SYNCS 8
/* An interval's hash lives this many intervals (and a second more). */
#define FLEET_KEEP_INTERVALS 4
/* A key's bytes at most: the prefix, a fleet name, an upstream name and
 * two numbers. */
#define FLEET_KEY_MAX (32 + FLEET_NAME_MAX + SEG_NAME_MAX + 48)

/* The hash of interval @p bucket of upstream @p up, or its hold's key
 * (@p bucket FLEET_KEY_HOLD). The bytes written, or -1 when @p cap is
 * short. */
#define FLEET_KEY_HOLD UINT64_MAX
int fleet_key(char *out, size_t cap, const fleet_conf *c, const char *up,
              uint64_t bucket);

/*
 * Append one upstream's sync to @p p: @p own added to interval @p bucket's
 * hash (which then expires), interval @p bucket - 1's hash read back, the
 * hold @p hold_unix_ms (0: none) published when it is after
 * @p now_unix_ms, and the fleet's hold read back. The number of commands
 * appended is p->n's growth; fleet_read_sync() needs @p published (whether
 * the hold was). 0 or RETRYD_ENOMEM.
 */
int fleet_pipe_sync(fleet_pipe *p, const fleet_conf *c, const char *up,
                    uint64_t bucket, const fleet_gauges *own,
                    uint64_t hold_unix_ms, uint64_t now_unix_ms,
                    bool *published);

/* The commands fleet_pipe_sync() appends. */
#define FLEET_SYNC_COMMANDS 9
#define FLEET_SYNC_HOLD_COMMANDS 3

/* An interval's hash as HGETALL returns it: each known field's sum,
 * bounded by FLEET_COUNT_MAX; unknown fields are ignored (a newer retryd
 * may write more). RETRYD_EPROTO for what no Redis sends (not an array of
 * field and value strings, a value that is no decimal). */
int fleet_gauges_parse(const redisReply *r, fleet_gauges *ret);

/*
 * The replies of one upstream's sync (@p n of them, from
 * fleet_pipe_sync(), @p published as it said): the previous interval's
 * sums into @p ret_total, the fleet's hold into @p ret_hold_unix_ms (0:
 * none). 0; RETRYD_EPERM for a refusal of rights (NOPERM: the ACL does
 * not allow a command or key), with Redis's words in @p err; RETRYD_EPROTO
 * for any other error or malformed reply.
 */
int fleet_read_sync(redisReply *const *r, size_t n, bool published,
                    fleet_gauges *ret_total, uint64_t *ret_hold_unix_ms,
                    char *err, size_t err_len);

/*
 * The view of one upstream of parameters @p p for this host, from the
 * previous interval's sums @p total and what this host added to it,
 * @p own: the host's share of the fleet's floor (when p sets one), the
 * other hosts' throttle windows (the sums less this host's), and the
 * figures the statistics show. Whether a part applies is in its flag;
 * the times (valid_until_ns, synced_ns) and the hold are the caller's.
 */
void fleet_view_compute(const budget_params *p, const fleet_gauges *total,
                        const fleet_gauges *own, uint64_t interval_ms,
                        fleet_view *ret);

/* Whether a host that added @p own to an interval whose sums are @p total
 * can use them: it is in them (and they are not less than what it added:
 * a Redis that lost the interval, restarted, says fewer). */
bool fleet_total_has(const fleet_gauges *total, const fleet_gauges *own);

#endif

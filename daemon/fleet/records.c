/* SPDX-License-Identifier: MIT */
/*
 * The fleet's keys and records (records.h). Another host's writes are
 * input like a neighbour's: strict decimals, every count bounded, an
 * unknown field skipped, anything else refused whole.
 */
#include "fleet/records.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "retryd/common.h"

int fleet_key(char *out, size_t cap, const fleet_conf *c, const char *up,
              uint64_t bucket)
{
    uint64_t ms = c->sync_interval_ns / 1000000;
    int n = bucket == FLEET_KEY_HOLD
                ? snprintf(out, cap, "retryd:{%s:%s}:pb", c->name, up)
                : snprintf(out, cap, "retryd:{%s:%s}:%" PRIu64 ":%" PRIu64,
                           c->name, up, ms, bucket);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* The hash fields, in the order of fleet_gauges. */
static const char *const fields[] = {"hosts", "fa", "rg", "r", "a", "rej"};
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

static uint64_t *gauge_field(fleet_gauges *g, size_t i)
{
    uint64_t *f[N_FIELDS] = {&g->hosts, &g->fa, &g->rg, &g->r, &g->a, &g->rej};
    return f[i];
}

static int add_hold(fleet_pipe *p, const char *hold, uint64_t hold_unix_ms)
{
    char at[24];
    snprintf(at, sizeof(at), "%" PRIu64, hold_unix_ms);
    /* GT: the latest hold wins, whoever saw it; the key goes when it ends
     * (NX gives a fresh key its expiry, GT moves it later, never sooner). */
    const char *zadd[] = {"ZADD", hold, "GT", at, "pb"};
    const char *nx[] = {"PEXPIREAT", hold, at, "NX"};
    const char *gt[] = {"PEXPIREAT", hold, at, "GT"};
    if (fleet_pipe_add(p, 5, zadd) < 0 || fleet_pipe_add(p, 4, nx) < 0 ||
        fleet_pipe_add(p, 4, gt) < 0)
        return RETRYD_ENOMEM;
    return 0;
}

int fleet_pipe_sync(fleet_pipe *p, const fleet_conf *c, const char *up,
                    uint64_t bucket, const fleet_gauges *own,
                    uint64_t hold_unix_ms, uint64_t now_unix_ms,
                    bool *published)
{
    char cur[FLEET_KEY_MAX], prev[FLEET_KEY_MAX], hold[FLEET_KEY_MAX];
    char v[24], ttl[24];
    if (bucket == 0 || fleet_key(cur, sizeof(cur), c, up, bucket) < 0 ||
        fleet_key(prev, sizeof(prev), c, up, bucket - 1) < 0 ||
        fleet_key(hold, sizeof(hold), c, up, FLEET_KEY_HOLD) < 0)
        return RETRYD_EINVAL;
    fleet_gauges g = *own;
    for (size_t i = 0; i < N_FIELDS; i++) {
        snprintf(v, sizeof(v), "%" PRIu64, *gauge_field(&g, i));
        if (fleet_pipe_add(p, 4,
                           (const char *[]){"HINCRBY", cur, fields[i], v}) < 0)
            return RETRYD_ENOMEM;
    }
    snprintf(ttl, sizeof(ttl), "%" PRIu64,
             FLEET_KEEP_INTERVALS * (c->sync_interval_ns / 1000000) + 1000);
    if (fleet_pipe_add(p, 3, (const char *[]){"PEXPIRE", cur, ttl}) < 0 ||
        fleet_pipe_add(p, 2, (const char *[]){"HGETALL", prev}) < 0)
        return RETRYD_ENOMEM;
    *published = hold_unix_ms > now_unix_ms;
    if (*published && add_hold(p, hold, hold_unix_ms) < 0)
        return RETRYD_ENOMEM;
    return fleet_pipe_add(p, 3, (const char *[]){"ZSCORE", hold, "pb"});
}

/* A decimal count of @p len bytes, bounded by FLEET_COUNT_MAX. */
static bool count_of(const char *s, size_t len, uint64_t *ret)
{
    uint64_t v = 0;
    if (len == 0 || len > 20)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > FLEET_COUNT_MAX)
            v = FLEET_COUNT_MAX; /* more digits cannot bring it back */
    }
    *ret = v;
    return true;
}

static bool is_string(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_STRING && r->str != NULL;
}

int fleet_gauges_parse(const redisReply *r, fleet_gauges *ret)
{
    *ret = (fleet_gauges){0};
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        return RETRYD_EPROTO;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (!is_string(k) || !is_string(v))
            return RETRYD_EPROTO;
        for (size_t f = 0; f < N_FIELDS; f++)
            if (k->len == strlen(fields[f]) &&
                memcmp(k->str, fields[f], k->len) == 0 &&
                !count_of(v->str, v->len, gauge_field(ret, f)))
                return RETRYD_EPROTO;
    }
    return 0;
}

/* ZSCORE's reply: nil, or a score (Redis writes integers as such). */
static int hold_of(const redisReply *r, uint64_t *ret)
{
    *ret = 0;
    if (r->type == REDIS_REPLY_NIL)
        return 0;
    if (!is_string(r))
        return RETRYD_EPROTO;
    /* A score another host wrote: an integer, or Redis's own notation of
     * one; anything else (a fraction, inf) is taken as no hold. */
    char buf[32];
    if (r->len == 0 || r->len >= sizeof(buf))
        return RETRYD_EPROTO;
    memcpy(buf, r->str, r->len);
    buf[r->len] = '\0';
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (*end != '\0' || errno != 0)
        return RETRYD_EPROTO;
    *ret = d > 0 && d < 1e15 ? (uint64_t)d : 0;
    return 0;
}

/* The first error reply of @p r, or NULL. */
static const redisReply *first_error(redisReply *const *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (r[i] == NULL || r[i]->type == REDIS_REPLY_ERROR)
            return r[i];
    return NULL;
}

int fleet_read_sync(redisReply *const *r, size_t n, bool published,
                    fleet_gauges *ret_total, uint64_t *ret_hold_unix_ms,
                    char *err, size_t err_len)
{
    size_t want =
        FLEET_SYNC_COMMANDS + (published ? FLEET_SYNC_HOLD_COMMANDS : 0);
    if (n != want) {
        snprintf(err, err_len, "%zu replies, not %zu", n, want);
        return RETRYD_EPROTO;
    }
    const redisReply *e = first_error(r, n);
    if (e != NULL) {
        snprintf(err, err_len, "%.200s", e->str ? e->str : "no reply");
        return e->str && fleet_refusal(e->str) ? RETRYD_EPERM : RETRYD_EPROTO;
    }
    /* The additions' and expiry's replies are integers; the read-back is
     * the 8th, the hold's the last. */
    for (size_t i = 0; i < N_FIELDS + 1; i++)
        if (r[i]->type != REDIS_REPLY_INTEGER) {
            snprintf(err, err_len, "reply %zu is not an integer", i + 1);
            return RETRYD_EPROTO;
        }
    if (fleet_gauges_parse(r[N_FIELDS + 1], ret_total) < 0 ||
        hold_of(r[n - 1], ret_hold_unix_ms) < 0) {
        snprintf(err, err_len, "a malformed interval or hold");
        return RETRYD_EPROTO;
    }
    return 0;
}

static uint64_t less(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

bool fleet_total_has(const fleet_gauges *total, const fleet_gauges *own)
{
    return own->hosts >= 1 && total->hosts >= own->hosts &&
           total->fa >= own->fa && total->rg >= own->rg && total->r >= own->r &&
           total->a >= own->a && total->rej >= own->rej;
}

void fleet_view_compute(const budget_params *p, const fleet_gauges *total,
                        const fleet_gauges *own, uint64_t interval_ms,
                        fleet_view *ret)
{
    bool floor = p->fleet_floor_micro_per_s != FLEET_FLOOR_UNSET;
    *ret = (fleet_view){
        .flags = (floor ? SEG_FLEET_FLOOR : 0u) |
                 (p->fleet_health ? SEG_FLEET_HEALTH : 0u) |
                 (p->fleet_pushback ? SEG_FLEET_PUSHBACK : 0u),
        .requests = less(total->r, own->r),
        .accepts = less(total->a, own->a),
        .rejecters = less(total->rej, own->rej),
        .share_ppm = retryd__fleet_share_ppm(own->fa, total->fa, total->hosts),
        .hosts = total->hosts,
        .first_attempts = total->fa,
        .own_first_attempts = own->fa,
        .retries_granted = total->rg,
        .window_ms = FLEET_SHARE_SYNCS * interval_ms,
    };
    if (floor) {
        ret->fleet_floor_micro_per_s = p->fleet_floor_micro_per_s;
        ret->floor_micro_per_s = retryd__fleet_floor_share(
            p->fleet_floor_micro_per_s, own->fa, total->fa, total->hosts);
    }
}

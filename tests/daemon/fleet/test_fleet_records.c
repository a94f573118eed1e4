/* SPDX-License-Identifier: MIT */
/*
 * The fleet's keys and records (daemon/fleet/records.h), without Redis:
 * the keys of one upstream share their hash slot whatever its name, a
 * sync's commands are what the format says, replies written by other
 * hosts are parsed strictly and bounded, and the view a host makes of
 * them is its share of the floor and the other hosts' counts. Replies are
 * made by hiredis's own reader from RESP text, as from a socket.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "fleet/records.h"
#include "retryd/common.h"

static fleet_conf conf(void)
{
    fleet_conf c = {.on = true, .sync_interval_ns = 500000000};
    strcpy(c.name, "prod");
    return c;
}

/* The hash tag Redis Cluster hashes: between the first '{' and the first
 * '}' after it, when not empty; else the whole key. */
static void tag_of(const char *key, char *out, size_t cap)
{
    const char *open = strchr(key, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    if (open && close && close > open + 1)
        snprintf(out, cap, "%.*s", (int)(close - open - 1), open + 1);
    else
        snprintf(out, cap, "%s", key);
}

Test(fleet_records, keys_of_one_upstream_share_a_slot_whatever_its_name)
{
    fleet_conf c = conf();
    char a[FLEET_KEY_MAX], b[FLEET_KEY_MAX], h[FLEET_KEY_MAX];
    cr_assert_gt(fleet_key(a, sizeof(a), &c, "payments", 7), 0);
    cr_expect_str_eq(a, "retryd:{prod:payments}:500:7");
    cr_assert_gt(fleet_key(h, sizeof(h), &c, "payments", FLEET_KEY_HOLD), 0);
    cr_expect_str_eq(h, "retryd:{prod:payments}:pb");
    static const char *const names[] = {"a}b", "{x}", "}", "a{b}c", "x:y"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char ta[128], tb[128], th[128];
        fleet_key(a, sizeof(a), &c, names[i], 41);
        fleet_key(b, sizeof(b), &c, names[i], 42);
        fleet_key(h, sizeof(h), &c, names[i], FLEET_KEY_HOLD);
        tag_of(a, ta, sizeof(ta));
        tag_of(b, tb, sizeof(tb));
        tag_of(h, th, sizeof(th));
        cr_expect(strcmp(ta, tb) == 0 && strcmp(ta, th) == 0 && strlen(ta) > 0,
                  "'%s': tags '%s' '%s' '%s'", names[i], ta, tb, th);
    }
    cr_expect_eq(fleet_key(a, 10, &c, "payments", 7), -1, "short buffer");
}

/* The replies in the RESP text @p resp of @p len bytes, as hiredis reads
 * them from a socket. */
static size_t read_resp(const char *resp, size_t len, redisReply **out,
                        size_t max)
{
    redisReader *r = fleet_reader_new();
    cr_assert_eq(redisReaderFeed(r, resp, len), REDIS_OK);
    size_t n = 0;
    void *reply;
    while (n < max && redisReaderGetReply(r, &reply) == REDIS_OK && reply)
        out[n++] = reply;
    redisReaderFree(r);
    return n;
}

/* The commands in @p p, each an array of strings, in order. */
static size_t commands(const fleet_pipe *p, redisReply **out, size_t max)
{
    return read_resp(p->buf, p->len, out, max);
}

static void expect_words(const redisReply *cmd, const char *const *want)
{
    size_t n = 0;
    while (want[n] != NULL)
        n++;
    cr_assert_eq(cmd->elements, n, "words of %s", want[0]);
    for (size_t i = 0; i < n; i++)
        cr_expect_str_eq(cmd->element[i]->str, want[i]);
}

Test(fleet_records, a_sync_adds_once_reads_the_interval_before_and_the_hold)
{
    fleet_conf c = conf();
    fleet_pipe p = {0};
    fleet_gauges own = {
        .hosts = 1, .fa = 80, .rg = 3, .r = 5, .a = 4, .rej = 1};
    bool published;
    cr_assert_eq(fleet_pipe_sync(&p, &c, "api", 100, &own, 0, 5000, &published),
                 0);
    cr_expect(!published);
    cr_expect_eq(p.n, FLEET_SYNC_COMMANDS);
    redisReply *cmd[16];
    cr_assert_eq(commands(&p, cmd, 16), FLEET_SYNC_COMMANDS);
    const char *cur = "retryd:{prod:api}:500:100";
    expect_words(cmd[0], (const char *[]){"HINCRBY", cur, "hosts", "1", NULL});
    expect_words(cmd[1], (const char *[]){"HINCRBY", cur, "fa", "80", NULL});
    expect_words(cmd[5], (const char *[]){"HINCRBY", cur, "rej", "1", NULL});
    /* Four intervals and a second: every host reads it after its own. */
    expect_words(cmd[6], (const char *[]){"PEXPIRE", cur, "3000", NULL});
    expect_words(cmd[7],
                 (const char *[]){"HGETALL", "retryd:{prod:api}:500:99", NULL});
    expect_words(
        cmd[8], (const char *[]){"ZSCORE", "retryd:{prod:api}:pb", "pb", NULL});
    for (size_t i = 0; i < FLEET_SYNC_COMMANDS; i++)
        freeReplyObject(cmd[i]);

    fleet_pipe_reset(&p);
    cr_assert_eq(
        fleet_pipe_sync(&p, &c, "api", 100, &own, 7000, 5000, &published), 0);
    cr_expect(published, "a hold that ends after now is published");
    cr_assert_eq(commands(&p, cmd, 16),
                 FLEET_SYNC_COMMANDS + FLEET_SYNC_HOLD_COMMANDS);
    const char *hold = "retryd:{prod:api}:pb";
    expect_words(cmd[8],
                 (const char *[]){"ZADD", hold, "GT", "7000", "pb", NULL});
    expect_words(cmd[9],
                 (const char *[]){"PEXPIREAT", hold, "7000", "NX", NULL});
    expect_words(cmd[10],
                 (const char *[]){"PEXPIREAT", hold, "7000", "GT", NULL});
    for (size_t i = 0; i < FLEET_SYNC_COMMANDS + FLEET_SYNC_HOLD_COMMANDS; i++)
        freeReplyObject(cmd[i]);
    fleet_pipe_free(&p);
}

/* Replies parsed from @p resp. */
static size_t replies(const char *resp, redisReply **out, size_t max)
{
    return read_resp(resp, strlen(resp), out, max);
}

static void free_all(redisReply **r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        freeReplyObject(r[i]);
}

static int parse_hash(const char *resp, fleet_gauges *g)
{
    redisReply *r[1];
    cr_assert_eq(replies(resp, r, 1), 1);
    int rc = fleet_gauges_parse(r[0], g);
    free_all(r, 1);
    return rc;
}

Test(fleet_records, an_interval_is_parsed_strictly_and_bounded)
{
    fleet_gauges g;
    cr_expect_eq(parse_hash("*6\r\n$5\r\nhosts\r\n$1\r\n8\r\n$2\r\nfa\r\n"
                            "$3\r\n800\r\n$4\r\nnext\r\n$3\r\nabc\r\n",
                            &g),
                 0, "an unknown field (a newer retryd's) is skipped");
    cr_expect(g.hosts == 8 && g.fa == 800 && g.rg == 0);
    cr_expect_eq(parse_hash("*0\r\n", &g), 0, "an interval nobody wrote");
    cr_expect_eq(g.hosts, 0);
    cr_expect_eq(parse_hash("*2\r\n$2\r\nfa\r\n$25\r\n"
                            "9999999999999999999999999\r\n",
                            &g),
                 RETRYD_EPROTO, "more than 20 digits");
    cr_expect_eq(parse_hash("*2\r\n$2\r\nfa\r\n$20\r\n"
                            "99999999999999999999\r\n",
                            &g),
                 0);
    cr_expect_eq(g.fa, FLEET_COUNT_MAX, "bounded, not wrapped");
    cr_expect_eq(parse_hash("*2\r\n$2\r\nfa\r\n$2\r\n-1\r\n", &g),
                 RETRYD_EPROTO, "a negative count");
    cr_expect_eq(parse_hash("*1\r\n$2\r\nfa\r\n", &g), RETRYD_EPROTO,
                 "a field without a value");
    cr_expect_eq(parse_hash("*2\r\n$2\r\nfa\r\n:5\r\n", &g), RETRYD_EPROTO,
                 "a value that is no string");
    cr_expect_eq(parse_hash("$2\r\nfa\r\n", &g), RETRYD_EPROTO, "no array");
}

/* A sync's replies: 7 integers, the interval @p hash, the hold @p hold
 * (a RESP reply). */
static void sync_replies(char *out, size_t cap, const char *hash,
                         const char *hold)
{
    snprintf(out, cap, ":1\r\n:80\r\n:3\r\n:5\r\n:4\r\n:1\r\n:1\r\n%s%s", hash,
             hold);
}

Test(fleet_records, a_syncs_replies_give_the_sums_and_the_hold)
{
    char text[512], err[256];
    redisReply *r[16];
    fleet_gauges t;
    uint64_t hold;
    sync_replies(text, sizeof(text),
                 "*4\r\n$5\r\nhosts\r\n$1\r\n2\r\n$2\r\nfa\r\n"
                 "$3\r\n100\r\n",
                 "$13\r\n1700000000500\r\n");
    size_t n = replies(text, r, 16);
    cr_assert_eq(n, FLEET_SYNC_COMMANDS);
    cr_expect_eq(fleet_read_sync(r, n, false, &t, &hold, err, sizeof(err)), 0,
                 "%s", err);
    cr_expect(t.hosts == 2 && t.fa == 100);
    cr_expect_eq(hold, UINT64_C(1700000000500));
    cr_expect_eq(fleet_read_sync(r, n, true, &t, &hold, err, sizeof(err)),
                 RETRYD_EPROTO, "the count of a sync that published");
    free_all(r, n);

    sync_replies(text, sizeof(text), "*0\r\n", "$-1\r\n");
    n = replies(text, r, 16);
    cr_expect_eq(fleet_read_sync(r, n, false, &t, &hold, err, sizeof(err)), 0);
    cr_expect_eq(hold, 0, "no hold");
    free_all(r, n);

    snprintf(text, sizeof(text),
             ":1\r\n-NOPERM this user has no permissions to access one of "
             "the keys\r\n:3\r\n:5\r\n:4\r\n:1\r\n:1\r\n*0\r\n$-1\r\n");
    n = replies(text, r, 16);
    cr_expect_eq(fleet_read_sync(r, n, false, &t, &hold, err, sizeof(err)),
                 RETRYD_EPERM, "an ACL's refusal");
    cr_expect(strstr(err, "NOPERM") != NULL, "%s", err);
    free_all(r, n);

    snprintf(text, sizeof(text),
             ":1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n"
             "*0\r\n-ERR syntax error\r\n");
    n = replies(text, r, 16);
    cr_expect_eq(fleet_read_sync(r, n, false, &t, &hold, err, sizeof(err)),
                 RETRYD_EPROTO, "another error");
    free_all(r, n);

    sync_replies(text, sizeof(text), "*0\r\n", "$3\r\nabc\r\n");
    n = replies(text, r, 16);
    cr_expect_eq(fleet_read_sync(r, n, false, &t, &hold, err, sizeof(err)),
                 RETRYD_EPROTO, "a hold that is no number");
    free_all(r, n);
}

Test(fleet_records, a_view_is_the_hosts_share_and_the_others_counts)
{
    budget_params p = {.fleet_floor_micro_per_s = 20 * SEG_MICRO,
                       .fleet_health = 1};
    fleet_gauges total = {
        .hosts = 8, .fa = 800, .rg = 160, .r = 1000, .a = 400, .rej = 9};
    fleet_gauges own = {
        .hosts = 1, .fa = 200, .rg = 40, .r = 100, .a = 90, .rej = 1};
    fleet_view v;
    fleet_view_compute(&p, &total, &own, 500, &v);
    cr_expect_eq(v.flags, SEG_FLEET_FLOOR | SEG_FLEET_HEALTH);
    cr_expect_eq(v.floor_micro_per_s, 5 * SEG_MICRO, "a quarter of F");
    cr_expect_eq(v.share_ppm, 250000);
    cr_expect(v.requests == 900 && v.accepts == 310 && v.rejecters == 8,
              "the other hosts': the sums less this host's");
    cr_expect(v.hosts == 8 && v.first_attempts == 800 &&
              v.retries_granted == 160 && v.own_first_attempts == 200);
    cr_expect_eq(v.window_ms, FLEET_SHARE_SYNCS * 500);
    p.fleet_floor_micro_per_s = FLEET_FLOOR_UNSET;
    p.fleet_health = 0;
    p.fleet_pushback = 1;
    fleet_view_compute(&p, &total, &own, 500, &v);
    cr_expect_eq(v.flags, SEG_FLEET_PUSHBACK, "no floor without F");
    cr_expect_eq(v.floor_micro_per_s, 0);
}

Test(fleet_records, a_host_uses_an_interval_only_when_it_is_in_it)
{
    fleet_gauges own = {.hosts = 1, .fa = 10, .r = 5};
    fleet_gauges total = {.hosts = 3, .fa = 40, .r = 20};
    cr_expect(fleet_total_has(&total, &own));
    fleet_gauges lost = {0}; /* Redis restarted: the interval is gone */
    cr_expect(!fleet_total_has(&lost, &own));
    fleet_gauges less = {.hosts = 3, .fa = 5, .r = 20};
    cr_expect(!fleet_total_has(&less, &own), "less than this host added");
    fleet_gauges none = {0};
    cr_expect(!fleet_total_has(&total, &none), "this host added nothing");
}

Test(fleet_records, an_array_announced_beyond_the_bound_is_an_error)
{
    /* hiredis would allocate 3.2 GB for this header alone. */
    redisReader *r = fleet_reader_new();
    void *reply = NULL;
    cr_assert_eq(redisReaderFeed(r, "*400000000\r\n", 12), REDIS_OK);
    cr_expect_eq(redisReaderGetReply(r, &reply), REDIS_ERR);
    cr_expect_null(reply);
    redisReaderFree(r);
    char text[64];
    snprintf(text, sizeof(text), "*%d\r\n", FLEET_REPLY_ELEMENTS_MAX);
    r = fleet_reader_new();
    cr_assert_eq(redisReaderFeed(r, text, strlen(text)), REDIS_OK);
    cr_expect_eq(redisReaderGetReply(r, &reply), REDIS_OK,
                 "at the bound: read on");
    redisReaderFree(r);
}

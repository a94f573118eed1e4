/* SPDX-License-Identifier: MIT */
/*
 * The table of keys and the parsers of their values (config_keys.h). A
 * parser checks a value against its row's bounds and says why it refuses
 * one; config.c adds the file, the line, the section and the key.
 */
#include "core/config_keys.h"

#include <errno.h>
#include <stdarg.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "core/config_fleet.h"
#include "core/log.h"
#include "prom.h"
#include "shared/fleet.h"
#include "retryd/common.h"

int config_refuse(char why[CONFIG_WHY_MAX], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, CONFIG_WHY_MAX, fmt, ap);
    va_end(ap);
    return RETRYD_ECONFIG;
}

/* Digits, then optionally a point and more digits: the only number
 * syntax a configuration takes. strtod() and strtoull() alone would also
 * take 0x10 (sixteen), 1e3, inf, nan, a sign and leading blanks. */
static bool decimal(const char *v, bool fraction)
{
    const char *p = v;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == v)
        return false;
    if (fraction && *p == '.') {
        const char *digits = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == digits)
            return false;
    }
    return *p == '\0';
}

bool config_parse_u32(const char *v, uint64_t lo, uint64_t hi, uint32_t *ret)
{
    char *end;
    if (!decimal(v, false))
        return false;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi)
        return false;
    *ret = (uint32_t)x;
    return true;
}

/* Tokens as a decimal number, into micro-tokens, within [0, max]. */
static bool parse_tokens(const char *v, uint64_t max_micro, uint64_t *ret)
{
    char *end;
    if (!decimal(v, true))
        return false;
    errno = 0;
    double x = strtod(v, &end);
    return errno == 0 && end != v && *end == '\0' &&
           seg_tokens_to_micro(x, max_micro, ret);
}

static bool lookup_gid(const char *name, gid_t *ret)
{
    uint32_t n;
    if (config_parse_u32(name, 0, UINT32_MAX - 1, &n)) {
        *ret = n;
        return true;
    }
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || res == NULL)
        return false;
    *ret = gr.gr_gid;
    return true;
}

static bool lookup_uid(const char *name, uid_t *ret)
{
    uint32_t n;
    if (config_parse_u32(name, 0, UINT32_MAX - 1, &n)) {
        *ret = n;
        return true;
    }
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) != 0 || res == NULL)
        return false;
    *ret = pw.pw_uid;
    return true;
}

/* A decimal in [lo, hi], into a uint32_t. */
static int parse_u32_key(const config_key *k, const char *v, void *field,
                         config *c, char why[CONFIG_WHY_MAX])
{
    (void)c;
    if (v == NULL) {
        *(uint32_t *)field = (uint32_t)k->dflt;
        return 0;
    }
    if (!config_parse_u32(v, k->lo, k->hi, field))
        return config_refuse(why, "'%s' is not in %llu..%llu", v,
                             (unsigned long long)k->lo,
                             (unsigned long long)k->hi);
    return 0;
}

/* Tokens, a decimal with a fraction, into micro-tokens in [lo, hi]. */
static int parse_tokens_key(const config_key *k, const char *v, void *field,
                            config *c, char why[CONFIG_WHY_MAX])
{
    uint64_t *micro = field;
    (void)c;
    if (v == NULL) {
        *micro = k->dflt;
        return 0;
    }
    if (parse_tokens(v, k->hi, micro) && *micro >= k->lo)
        return 0;
    /* A bound below the segment's own (throttle_k's, the floor's) is
     * worth naming. */
    if (k->hi < SEG_MAX_CAP_MICRO)
        return config_refuse(why, "'%s' is not a number from %llu to %llu", v,
                             (unsigned long long)(k->lo / SEG_MICRO),
                             (unsigned long long)(k->hi / SEG_MICRO));
    return config_refuse(why, "'%s' is not a number >= %llu", v,
                         (unsigned long long)(k->lo / SEG_MICRO));
}

/* on or off (also yes/no, true/false, 1/0), into a uint64_t 0 or 1. */
static int parse_switch_key(const config_key *k, const char *v, void *field,
                            config *c, char why[CONFIG_WHY_MAX])
{
    static const char *const on[] = {"on", "yes", "true", "1"};
    static const char *const off[] = {"off", "no", "false", "0"};
    uint64_t *out = field;
    (void)c;
    if (v == NULL) {
        *out = k->dflt;
        return 0;
    }
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        if (strcmp(v, on[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcmp(v, off[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return config_refuse(why, "'%s' is neither on nor off", v);
}

/* A duration (retryd_duration_parse: 30s, 250ms, 1m) in [lo, hi]
 * nanoseconds, into a uint64_t. */
static int parse_duration_key(const config_key *k, const char *v, void *field,
                              config *c, char why[CONFIG_WHY_MAX])
{
    uint64_t *out = field;
    int64_t ns;
    (void)c;
    if (v == NULL) {
        *out = k->dflt;
        return 0;
    }
    if (retryd_duration_parse(v, &ns) < 0 || ns < 0 || (uint64_t)ns < k->lo ||
        (uint64_t)ns > k->hi)
        return config_refuse(why, "'%s' is not a duration from %llums to %llus",
                             v, (unsigned long long)(k->lo / 1000000),
                             (unsigned long long)(k->hi / 1000000000));
    *out = (uint64_t)ns;
    return 0;
}

/* A file name, relative to runtime_dir or absolute, into a char array. */
static int parse_path_key(const config_key *k, const char *v, void *field,
                          config *c, char why[CONFIG_WHY_MAX])
{
    (void)c;
    if (v == NULL)
        v = k->dflt_text;
    if (*v == '\0' || strlen(v) >= k->size)
        return config_refuse(why, "'%s' is empty or too long", v);
    strcpy(field, v);
    return 0;
}

static int parse_abs_path_key(const config_key *k, const char *v, void *field,
                              config *c, char why[CONFIG_WHY_MAX])
{
    if (v != NULL && v[0] != '/')
        return config_refuse(why, "'%s' is not an absolute path", v);
    return parse_path_key(k, v, field, c, why);
}

/* A group by name or number. No default: the key's line says it is set. */
static int parse_group_key(const config_key *k, const char *v, void *field,
                           config *c, char why[CONFIG_WHY_MAX])
{
    (void)k, (void)c;
    if (v != NULL && !lookup_gid(v, field))
        return config_refuse(why, "unknown group '%s'", v);
    return 0;
}

/* A whitespace- or comma-separated list of users or groups. */
static int parse_ids(const char *value, bool groups, config *c,
                     char why[CONFIG_WHY_MAX])
{
    char copy[1024], *save = NULL;
    size_t *n = groups ? &c->n_allow_groups : &c->n_allow_users;

    if (value == NULL)
        return 0;
    if (strlen(value) >= sizeof(copy))
        return config_refuse(why, "%s", "list too long");
    strcpy(copy, value);
    *n = 0;
    for (char *t = strtok_r(copy, " \t,", &save); t;
         t = strtok_r(NULL, " \t,", &save)) {
        if (*n == CONFIG_MAX_IDS)
            return config_refuse(why, "more than %d entries", CONFIG_MAX_IDS);
        bool ok = groups ? lookup_gid(t, &c->allow_groups[*n])
                         : lookup_uid(t, &c->allow_users[*n]);
        if (!ok)
            return config_refuse(why, "unknown %s '%s'",
                                 groups ? "group" : "user", t);
        (*n)++;
    }
    return 0;
}

static int parse_users_key(const config_key *k, const char *v, void *field,
                           config *c, char why[CONFIG_WHY_MAX])
{
    (void)k, (void)field;
    return parse_ids(v, false, c, why);
}

static int parse_groups_key(const config_key *k, const char *v, void *field,
                            config *c, char why[CONFIG_WHY_MAX])
{
    (void)k, (void)field;
    return parse_ids(v, true, c, why);
}

static int parse_log_level_key(const config_key *k, const char *v, void *field,
                               config *c, char why[CONFIG_WHY_MAX])
{
    int *level = field;
    (void)c;
    *level = v == NULL ? (int)k->dflt : log_level_parse(v);
    if (*level < 0)
        return config_refuse(why, "'%s' is not error, warning, info or debug",
                             v);
    return 0;
}

static int parse_per_process_key(const config_key *k, const char *v,
                                 void *field, config *c,
                                 char why[CONFIG_WHY_MAX])
{
    int *per = field;
    (void)c;
    *per = v == NULL ? (int)k->dflt : prom_per_process_parse(v);
    if (*per < 0)
        return config_refuse(why, "'%s' is not program, pid or none", v);
    return 0;
}

enum listen_check { LISTEN_OK, LISTEN_NOT_ADDRESS, LISTEN_NOT_LOOPBACK };

/* The address of a metrics_listen value whose host part is @p host, into
 * @p c when it is a loopback one. */
static enum listen_check listen_address(config *c, const char *host, bool v6,
                                        uint32_t port)
{
    struct sockaddr_in *in4 = (struct sockaddr_in *)&c->metrics_addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&c->metrics_addr;
    memset(&c->metrics_addr, 0, sizeof(c->metrics_addr));
    int ok = v6 ? inet_pton(AF_INET6, host, &in6->sin6_addr)
                : inet_pton(AF_INET, host, &in4->sin_addr);
    if (ok != 1)
        return LISTEN_NOT_ADDRESS;
    bool loopback = v6 ? IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)
                       : (ntohl(in4->sin_addr.s_addr) >> 24) == 127;
    if (!loopback)
        return LISTEN_NOT_LOOPBACK;
    if (v6) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        c->metrics_addr_len = sizeof(*in6);
    } else {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        c->metrics_addr_len = sizeof(*in4);
    }
    return LISTEN_OK;
}

/* ADDRESS:PORT of the /metrics endpoint: a dotted IPv4 address in
 * 127.0.0.0/8 or [::1], and a port in 1..65535. Never a name to resolve:
 * what the daemon binds is what the file says. The text is kept as
 * written (logs, and reload's comparison); off when unset. */
static int parse_listen_key(const config_key *k, const char *v, void *field,
                            config *c, char why[CONFIG_WHY_MAX])
{
    char host[INET6_ADDRSTRLEN + 2];
    uint32_t port;

    if (v == NULL)
        return 0;
    const char *colon = strrchr(v, ':');
    size_t hl = colon ? (size_t)(colon - v) : 0;
    bool v6 = hl >= 2 && v[0] == '[' && v[hl - 1] == ']';
    if (colon == NULL || hl == 0 || hl >= sizeof(host) ||
        !config_parse_u32(colon + 1, 1, 65535, &port))
        return config_refuse(
            why,
            "'%s' is not ADDRESS:PORT with a port in 1..65535 (e.g. "
            "127.0.0.1:9464 or [::1]:9464)",
            v);
    memcpy(host, v + v6, hl - 2 * v6);
    host[hl - 2 * v6] = '\0';
    enum listen_check r = listen_address(c, host, v6, port);
    if (r == LISTEN_NOT_ADDRESS)
        return config_refuse(
            why,
            "'%s' is not an IPv4 address or [IPv6 address] with a "
            "port (e.g. 127.0.0.1:9464 or [::1]:9464)",
            v);
    if (r == LISTEN_NOT_LOOPBACK)
        return config_refuse(
            why,
            "'%s' is not a loopback address: the endpoint serves "
            "this host only (127.0.0.0/8 or [::1])",
            v);
    snprintf(field, k->size, "%s", v);
    return 0;
}

#define FIELD(type, f) offsetof(type, f), sizeof(((type *)0)->f)
#define DAEMON(name, parser, f, lo, hi, dflt, text)                            \
    {                                                                          \
        CONFIG_SECTION_DAEMON, name, parser, FIELD(config, f), lo, hi, dflt,   \
            text                                                               \
    }
#define PARAMS_OF(name, parser, f, lo, hi, dflt)                               \
    {                                                                          \
        CONFIG_SECTION_PARAMS, name, parser, FIELD(budget_params, f), lo, hi,  \
            dflt, NULL                                                         \
    }
#define PARAMS(name, f, lo, hi, dflt)                                          \
    PARAMS_OF(name, parse_tokens_key, f, lo, hi, dflt)
#define FLEET(name, parser, f, lo, hi, dflt, text)                             \
    {                                                                          \
        CONFIG_SECTION_FLEET, name, parser, FIELD(config, fleet.f), lo, hi,    \
            dflt, text                                                         \
    }
/* The limits a neighbour meets (docs/daemon.md, "Limits and timeouts"):
 * decimals in a range; a default of 0 is derived from another key. */
#define LIMIT(f, lo, hi, dflt) DAEMON(#f, parse_u32_key, f, lo, hi, dflt, NULL)

const config_key config_keys[CK_COUNT] = {
    /* [defaults] and [upstream NAME]; an upstream's unset key is the
     * [defaults] one, wherever in the file that is set. */
    [CK_RATIO] = PARAMS("ratio", ratio_micro, 0, SEG_MAX_CAP_MICRO,
                        SEG_DEFAULT_RATIO_MICRO),
    [CK_MIN_RETRIES_PER_SEC] =
        PARAMS("min_retries_per_sec", floor_micro_per_s, 0, SEG_MAX_FLOOR_MICRO,
               SEG_DEFAULT_FLOOR_MICRO_PER_S),
    [CK_CAP] = PARAMS("cap", cap_micro, SEG_MICRO, SEG_MAX_CAP_MICRO,
                      SEG_DEFAULT_CAP_MICRO),
    /* Upstream health (docs/health.md); the defaults are the library's
     * for a local slot (retryd__health_defaults). */
    [CK_ADAPTIVE_THROTTLE] = PARAMS_OF("adaptive_throttle", parse_switch_key,
                                       adaptive_throttle, 0, 1, 0),
    [CK_THROTTLE_K] = PARAMS("throttle_k", throttle_k_micro, 0,
                             HEALTH_MAX_K_MICRO, 2 * SEG_MICRO),
    [CK_THROTTLE_WINDOW] = PARAMS_OF(
        "throttle_window", parse_duration_key, throttle_window_ns,
        HEALTH_MIN_WINDOW_NS, HEALTH_MAX_WINDOW_NS, 30 * UINT64_C(1000000000)),
    [CK_THROTTLE_MIN_PROCESSES] =
        PARAMS_OF("throttle_min_processes", parse_u32_key,
                  throttle_min_processes, 1, SEG_MAX_PROCESSES, 1),
    [CK_PUSHBACK] = PARAMS_OF("pushback", parse_switch_key, pushback, 0, 1, 1),
    [CK_PUSHBACK_FIRST_ATTEMPTS] =
        PARAMS_OF("pushback_first_attempts", parse_switch_key,
                  pushback_first_attempts, 0, 1, 0),
    [CK_PUSHBACK_MAX] =
        PARAMS_OF("pushback_max", parse_duration_key, pushback_max_ns, 0,
                  HEALTH_MAX_PUSHBACK_NS, 60 * UINT64_C(1000000000)),
    /* Fair shares (docs/budget.md#fair-shares). */
    [CK_FAIR_SHARES] =
        PARAMS_OF("fair_shares", parse_switch_key, fair_shares, 0, 1, 1),
    [CK_SHARE_WINDOW] =
        PARAMS_OF("share_window", parse_duration_key, share_window_ns,
                  UINT64_C(1000000000), 3600 * UINT64_C(1000000000),
                  SEG_DEFAULT_SHARE_WINDOW_NS),
    [CK_REQUEST_SHARE] =
        PARAMS("request_share", request_share_micro, SEG_MICRO / 100, SEG_MICRO,
               SEG_DEFAULT_REQUEST_SHARE_MICRO),
    /* Hedging (docs/hedging.md); the defaults are the library's for a
     * local slot (retryd__hedge_defaults). */
    [CK_MAX_EXTRA_LOAD] = PARAMS("max_extra_load", max_extra_load_micro, 0,
                                 HEDGE_MAX_RATIO_MICRO, SEG_MICRO / 50),
    [CK_MIN_HEDGES_PER_SEC] =
        PARAMS("min_hedges_per_sec", hedge_floor_micro_per_s, 0,
               SEG_MAX_FLOOR_MICRO, SEG_MICRO),
    [CK_HEDGE_CAP] = PARAMS("hedge_cap", hedge_cap_micro, SEG_MICRO,
                            SEG_MAX_CAP_MICRO, 10 * SEG_MICRO),
    [CK_HEDGE_MIN_DELAY] =
        PARAMS_OF("hedge_min_delay", parse_duration_key, hedge_min_delay_ns, 0,
                  HEDGE_MAX_MIN_DELAY_NS, UINT64_C(1000000)),
    [CK_HEDGE_WINDOW] = PARAMS_OF("hedge_window", parse_duration_key,
                                  hedge_window_ns, HEDGE_MIN_WINDOW_NS,
                                  HEDGE_MAX_WINDOW_NS, UINT64_C(1000000000)),
    /* The fleet tier (docs/fleet.md): the fleet's floor (unset: none),
     * and whether the other hosts' health counts here. */
    [CK_FLEET_MIN_RETRIES_PER_SEC] =
        PARAMS("fleet_min_retries_per_sec", fleet_floor_micro_per_s, 0,
               SEG_MAX_FLOOR_MICRO, FLEET_FLOOR_UNSET),
    [CK_FLEET_HEALTH] =
        PARAMS_OF("fleet_health", parse_switch_key, fleet_health, 0, 1, 0),
    [CK_FLEET_PUSHBACK] =
        PARAMS_OF("fleet_pushback", parse_switch_key, fleet_pushback, 0, 1, 0),
    [CK_WEIGHT] = {CONFIG_SECTION_PROGRAM, "weight", parse_tokens_key,
                   FIELD(program_conf, weight_micro), SEG_MICRO / 1000,
                   CONFIG_MAX_WEIGHT_MICRO, CONFIG_DEFAULT_WEIGHT_MICRO, NULL},
    /* [retryd]: the sockets and the segment are relative to runtime_dir
     * unless absolute (joined when the file is done). */
    [CK_RUNTIME_DIR] = DAEMON("runtime_dir", parse_abs_path_key, runtime_dir, 0,
                              0, 0, "/run/retryd"),
    [CK_CONTROL_SOCKET] = DAEMON("control_socket", parse_path_key,
                                 control_socket, 0, 0, 0, "control.sock"),
    [CK_STATS_SOCKET] = DAEMON("stats_socket", parse_path_key, stats_socket, 0,
                               0, 0, "stats.sock"),
    [CK_SEGMENT] =
        DAEMON("segment", parse_path_key, segment_path, 0, 0, 0, "segment"),
    [CK_GROUP] = DAEMON("group", parse_group_key, group, 0, 0, 0, NULL),
    [CK_STATS_GROUP] =
        DAEMON("stats_group", parse_group_key, stats_group, 0, 0, 0, NULL),
    [CK_ALLOW_USERS] =
        DAEMON("allow_users", parse_users_key, allow_users, 0, 0, 0, NULL),
    [CK_ALLOW_GROUPS] =
        DAEMON("allow_groups", parse_groups_key, allow_groups, 0, 0, 0, NULL),
    [CK_UPSTREAM_CAPACITY] =
        DAEMON("upstream_capacity", parse_u32_key, upstream_capacity, 1,
               SEG_MAX_UPSTREAMS, SEG_DEFAULT_UPSTREAMS, NULL),
    [CK_PROCESS_CAPACITY] =
        DAEMON("process_capacity", parse_u32_key, process_capacity, 1,
               SEG_MAX_PROCESSES, SEG_DEFAULT_PROCESSES, NULL),
    [CK_LOG_LEVEL] = DAEMON("log_level", parse_log_level_key, log_level, 0, 0,
                            LOG_INFO, NULL),
    [CK_METRICS_LISTEN] = DAEMON("metrics_listen", parse_listen_key,
                                 metrics_listen, 0, 0, 0, NULL),
    [CK_METRICS_PER_PROCESS] =
        DAEMON("metrics_per_process", parse_per_process_key,
               metrics_per_process, 0, 0, PROM_PER_PROGRAM, NULL),
    [CK_PROCESS_SLOTS_PER_UID] =
        LIMIT(process_slots_per_uid, 1, SEG_MAX_PROCESSES, 0),
    [CK_UPSTREAMS_PER_UID] = LIMIT(upstreams_per_uid, 1, SEG_MAX_UPSTREAMS, 0),
    [CK_UPSTREAM_IDLE_RETIRE] = DAEMON(
        "upstream_idle_retire", parse_duration_key, upstream_idle_retire_ns,
        UINT64_C(1000000000), 30 * 86400 * UINT64_C(1000000000),
        3600 * UINT64_C(1000000000), NULL),
    [CK_CONNECTIONS_UNATTACHED] =
        LIMIT(connections_unattached, 2, CONFIG_UNATTACHED_MAX, 64),
    [CK_CONNECTIONS_PER_UID] =
        LIMIT(connections_per_uid, 1, CONFIG_UNATTACHED_MAX, 0),
    [CK_CONNECTIONS_PER_PROCESS] =
        LIMIT(connections_per_process, 1, CONFIG_UNATTACHED_MAX, 8),
    [CK_HELLO_TIMEOUT_MS] = LIMIT(hello_timeout_ms, 10, 60000, 1000),
    [CK_FRAME_TIMEOUT_MS] = LIMIT(frame_timeout_ms, 10, 60000, 1000),
    [CK_IDLE_TIMEOUT_MS] = LIMIT(idle_timeout_ms, 100, 3600000, 10000),
    [CK_WRITE_TIMEOUT_MS] = LIMIT(write_timeout_ms, 10, 60000, 2000),
    [CK_STATS_REQUEST_TIMEOUT_MS] =
        LIMIT(stats_request_timeout_ms, 10, 60000, 1000),
    [CK_STATS_REPLY_TIMEOUT_MS] =
        LIMIT(stats_reply_timeout_ms, 10, 600000, 5000),
    [CK_METRICS_REQUEST_TIMEOUT_MS] =
        LIMIT(metrics_request_timeout_ms, 10, 60000, 1000),
    [CK_METRICS_REPLY_TIMEOUT_MS] =
        LIMIT(metrics_reply_timeout_ms, 1000, 600000, 5000),
    [CK_LOG_LIMIT_LINES] = LIMIT(log_limit_lines, 1, 1000, LOG_LIMIT_LINES),
    [CK_LOG_LIMIT_INTERVAL_S] =
        LIMIT(log_limit_interval_s, 1, 3600, LOG_LIMIT_WINDOW_MS / 1000),
    /* [fleet] (docs/fleet.md): the section's presence turns the tier on. */
    [CK_FLEET_REDIS] = FLEET("redis", config_parse_redis, redis, 0, 0, 0, NULL),
    [CK_FLEET_PASSWORD_FILE] =
        FLEET("password_file", config_parse_password_file, password_file, 0, 0,
              0, NULL),
    [CK_FLEET_NAME] =
        FLEET("name", config_parse_fleet_name, name, 0, 0, 0, "default"),
    [CK_FLEET_HOST_ID] =
        FLEET("host_id", config_parse_host_id, host_id, 0, 0, 0, NULL),
    [CK_FLEET_SYNC_INTERVAL] = FLEET(
        "sync_interval", parse_duration_key, sync_interval_ns,
        UINT64_C(100000000), FLEET_MAX_INTERVAL_NS, UINT64_C(1000000000), NULL),
};
#undef FLEET
#undef LIMIT
#undef PARAMS
#undef PARAMS_OF
#undef DAEMON
#undef FIELD

int config_key_find(config_section s, const char *key)
{
    for (size_t i = 0; i < CK_COUNT; i++)
        if (config_keys[i].section == s && strcmp(config_keys[i].key, key) == 0)
            return (int)i;
    return -1;
}

void config_keys_set_defaults(config *c)
{
    char why[CONFIG_WHY_MAX];
    for (size_t i = 0; i < CK_COUNT; i++) {
        const config_key *k = &config_keys[i];
        if (k->section == CONFIG_SECTION_PROGRAM)
            continue; /* each [program NAME] is given its own */
        void *base = k->section == CONFIG_SECTION_PARAMS ? (void *)&c->defaults
                                                         : (void *)c;
        /* A default always parses: the table's own values. */
        (void)k->parse(k, NULL, config_key_field(k, base), c, why);
    }
}

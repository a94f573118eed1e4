/* SPDX-License-Identifier: MIT */
/*
 * The configuration's keys, one table (config_keys.c): each row names its
 * section, its key, the parser of its value, the field it fills (an offset
 * into the struct its section fills), its default and its bounds, as
 * systemd's load-fragment rows do. config.c reads the file and finds rows;
 * the parsers know nothing of files or lines.
 */
#ifndef RETRYD_CONFIG_KEYS_H
#define RETRYD_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

/* Which struct a section fills: [retryd] the config, [defaults] and each
 * [upstream NAME] a budget_params. */
typedef enum config_section {
    CONFIG_SECTION_DAEMON,
    CONFIG_SECTION_PARAMS,
    CONFIG_SECTION_PROGRAM, /* [program NAME]: a program_conf */
    CONFIG_SECTION_FLEET,   /* [fleet]: the config's fleet_conf */
} config_section;

/* Every row, in table order. The limits whose default depends on another
 * key's value (0 in the row) are finished by config.c. */
enum config_key_id {
    CK_RATIO,
    CK_MIN_RETRIES_PER_SEC,
    CK_CAP,
    CK_ADAPTIVE_THROTTLE,
    CK_THROTTLE_K,
    CK_THROTTLE_WINDOW,
    CK_THROTTLE_MIN_PROCESSES,
    CK_PUSHBACK,
    CK_PUSHBACK_FIRST_ATTEMPTS,
    CK_PUSHBACK_MAX,
    CK_FAIR_SHARES,
    CK_SHARE_WINDOW,
    CK_REQUEST_SHARE,
    CK_MAX_EXTRA_LOAD,
    CK_MIN_HEDGES_PER_SEC,
    CK_HEDGE_CAP,
    CK_HEDGE_MIN_DELAY,
    CK_HEDGE_WINDOW,
    CK_FLEET_MIN_RETRIES_PER_SEC,
    CK_FLEET_HEALTH,
    CK_FLEET_PUSHBACK,
    CK_WEIGHT,
    CK_RUNTIME_DIR,
    CK_CONTROL_SOCKET,
    CK_STATS_SOCKET,
    CK_SEGMENT,
    CK_GROUP,
    CK_STATS_GROUP,
    CK_ALLOW_USERS,
    CK_ALLOW_GROUPS,
    CK_UPSTREAM_CAPACITY,
    CK_PROCESS_CAPACITY,
    CK_LOG_LEVEL,
    CK_METRICS_LISTEN,
    CK_METRICS_PER_PROCESS,
    CK_PROCESS_SLOTS_PER_UID,
    CK_UPSTREAMS_PER_UID,
    CK_UPSTREAM_IDLE_RETIRE,
    CK_CONNECTIONS_UNATTACHED,
    CK_CONNECTIONS_PER_UID,
    CK_CONNECTIONS_PER_PROCESS,
    CK_HELLO_TIMEOUT_MS,
    CK_FRAME_TIMEOUT_MS,
    CK_IDLE_TIMEOUT_MS,
    CK_WRITE_TIMEOUT_MS,
    CK_STATS_REQUEST_TIMEOUT_MS,
    CK_STATS_REPLY_TIMEOUT_MS,
    CK_METRICS_REQUEST_TIMEOUT_MS,
    CK_METRICS_REPLY_TIMEOUT_MS,
    CK_LOG_LIMIT_LINES,
    CK_LOG_LIMIT_INTERVAL_S,
    CK_FLEET_REDIS,
    CK_FLEET_PASSWORD_FILE,
    CK_FLEET_NAME,
    CK_FLEET_HOST_ID,
    CK_FLEET_SYNC_INTERVAL,
    CK_COUNT
};

/* A parser's reason is cut to this many bytes less one. */
#define CONFIG_WHY_MAX 160

typedef struct config_key config_key;

/*
 * Parse @p value into @p field (the row's field in the struct its section
 * fills; @p c for a key that fills more than its field). @p value NULL
 * stores the row's default, if it has one. Returns 0, or RETRYD_ECONFIG
 * with the reason, without file, line or key, in @p why.
 */
typedef int config_parser(const config_key *k, const char *value, void *field,
                          config *c, char why[CONFIG_WHY_MAX]);

struct config_key {
    config_section section;
    const char *key;
    config_parser *parse;
    size_t off;            /* of the field in config or budget_params */
    size_t size;           /* of the field: a text's room, its NUL included */
    uint64_t lo, hi;       /* of a number; tokens in micro-tokens */
    uint64_t dflt;         /* of a number when unset */
    const char *dflt_text; /* of a text when unset */
};

extern const config_key config_keys[CK_COUNT];

/* The row of @p key in a section of kind @p s, or -1. */
int config_key_find(config_section s, const char *key);

/* Where row @p k's field is in @p base (a config or a budget_params). */
static inline void *config_key_field(const config_key *k, void *base)
{
    return (char *)base + k->off;
}

/* A parser's refusal: the reason (printf's @p fmt) into @p why;
 * RETRYD_ECONFIG. For the parsers of every file of the table. */
__attribute__((format(printf, 2, 3))) int
config_refuse(char why[CONFIG_WHY_MAX], const char *fmt, ...);

/* A decimal in [@p lo, @p hi] into *@p ret: digits only (no sign, blank,
 * 0x or exponent), the one integer syntax a configuration takes. */
bool config_parse_u32(const char *v, uint64_t lo, uint64_t hi, uint32_t *ret);

/* Each row's default stored into @p c (its [defaults] into c->defaults). */
void config_keys_set_defaults(config *c);

#endif

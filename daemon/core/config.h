/* SPDX-License-Identifier: MIT */
/*
 * The daemon's configuration file (INI, parsed with libinih). See
 * deploy/retryd.conf for every key with its default; docs/daemon.md says
 * what each does.
 */
#ifndef RETRYD_CONFIG_H
#define RETRYD_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <urcu/urcu-memb.h>

#include "shared/health.h"
#include "shared/hedge.h"
#include "shared/segment.h"

#define CONFIG_MAX_IDS 32
#define CONFIG_MAX_UPSTREAMS 4096
#define CONFIG_SOCKET_MAX 108 /* sizeof(sun_path) */
/* connections_unattached at most: admission keeps a table this long. */
#define CONFIG_UNATTACHED_MAX 1024
/* Mistakes config_load() lists; beyond, it counts them. */
#define CONFIG_MAX_ERRORS 32
/* Room for all of them in a message (retryd --check-config's). */
#define CONFIG_ERRORS_MAX_BYTES 8192

typedef struct budget_params {
    uint64_t ratio_micro;
    uint64_t floor_micro_per_s;
    uint64_t cap_micro;
    /* Upstream health (docs/health.md). The daemon's alone: a client's
     * registration names only the three above. Each key has a field of
     * its own, so that an [upstream NAME] inherits each one it leaves
     * unset from [defaults] by itself. */
    uint64_t adaptive_throttle; /* 0 or 1 */
    uint64_t throttle_k_micro;
    uint64_t throttle_window_ns;
    uint32_t throttle_min_processes;
    uint64_t pushback;                /* 0 or 1 */
    uint64_t pushback_first_attempts; /* 0 or 1 */
    uint64_t pushback_max_ns;
    /* Fair shares (docs/budget.md#fair-shares), the daemon's alone too:
     * the window a claim decays over, the share of the balance one
     * request may take. */
    uint64_t fair_shares; /* 0 or 1 */
    uint64_t share_window_ns;
    uint64_t request_share_micro;
    /* Hedging (docs/hedging.md), the daemon's alone too: the host hedge
     * bucket's ratio (max_extra_load), floor and cap, the shortest hedge
     * delay, the latency picture's window. */
    uint64_t max_extra_load_micro;
    uint64_t hedge_floor_micro_per_s;
    uint64_t hedge_cap_micro;
    uint64_t hedge_min_delay_ns;
    uint64_t hedge_window_ns;
    /* The fleet tier (docs/fleet.md), the daemon's alone too: the fleet's
     * floor (FLEET_FLOOR_UNSET: none), and whether this host obeys the
     * other hosts' health counts and holds. */
    uint64_t fleet_floor_micro_per_s;
    uint64_t fleet_health;   /* 0 or 1 */
    uint64_t fleet_pushback; /* 0 or 1 */
} budget_params;

/* The hedge parameters @p p configures, as a slot holds them. */
static inline hedge_params budget_params_hedge(const budget_params *p)
{
    return (hedge_params){
        .ratio_micro = p->max_extra_load_micro,
        .floor_micro_per_s = p->hedge_floor_micro_per_s,
        .cap_micro = p->hedge_cap_micro,
        .min_delay_ns = p->hedge_min_delay_ns,
        .window_ns = p->hedge_window_ns,
    };
}

/* @p p's hedge fields from what a slot holds (an adopted segment). */
static inline void budget_params_set_hedge(budget_params *p,
                                           const hedge_params *h)
{
    p->max_extra_load_micro = h->ratio_micro;
    p->hedge_floor_micro_per_s = h->floor_micro_per_s;
    p->hedge_cap_micro = h->cap_micro;
    p->hedge_min_delay_ns = h->min_delay_ns;
    p->hedge_window_ns = h->window_ns;
}

static inline bool budget_hedge_equal(const budget_params *a,
                                      const budget_params *b)
{
    hedge_params x = budget_params_hedge(a), y = budget_params_hedge(b);
    return memcmp(&x, &y, sizeof(x)) == 0;
}

/* fleet_min_retries_per_sec unset: the upstream has no fleet floor. */
#define FLEET_FLOOR_UNSET UINT64_MAX

/* Whether the upstream takes part in the fleet tier: any fleet key set. */
static inline bool budget_params_in_fleet(const budget_params *p)
{
    return p->fleet_floor_micro_per_s != FLEET_FLOOR_UNSET || p->fleet_health ||
           p->fleet_pushback;
}

static inline bool budget_fleet_equal(const budget_params *a,
                                      const budget_params *b)
{
    return a->fleet_floor_micro_per_s == b->fleet_floor_micro_per_s &&
           a->fleet_health == b->fleet_health &&
           a->fleet_pushback == b->fleet_pushback;
}

/* The share window a slot holds for @p p: 0 when fair shares are off. */
static inline uint64_t budget_params_slot_window(const budget_params *p)
{
    return p->fair_shares ? p->share_window_ns : 0;
}

typedef struct upstream_conf {
    char name[SEG_NAME_MAX + 1];
    budget_params params;
} upstream_conf;

/* A [program NAME] section: the weight of NAME's processes in the fair
 * shares of every budget (docs/budget.md#fair-shares). NAME as the daemon
 * labels processes: /proc/PID/comm, 1..15 bytes. */
#define CONFIG_PROGRAM_NAME_MAX 15
#define CONFIG_MAX_PROGRAMS 256
#define CONFIG_DEFAULT_WEIGHT_MICRO SEG_MICRO /* 1 */
#define CONFIG_MAX_WEIGHT_MICRO (1000 * SEG_MICRO)
typedef struct program_conf {
    char name[CONFIG_PROGRAM_NAME_MAX + 1];
    uint64_t weight_micro;
} program_conf;

/*
 * The fleet tier's link to Redis (docs/fleet.md), the [fleet] section; off
 * when the section is absent. The password is read from password_file
 * when the configuration is loaded (at start and at each reload), never
 * from the command line or the file itself.
 */
#define FLEET_ADDRESS_MAX 256 /* redis = HOST:PORT or a socket path */
#define FLEET_NAME_MAX 64     /* the key namespace */
#define FLEET_HOST_ID_MAX 128
#define FLEET_SECRET_MAX 256 /* an ACL user name, a password */
typedef struct fleet_conf {
    bool on;
    char redis[FLEET_ADDRESS_MAX]; /* as written: for logs and stats */
    bool unix_socket;              /* redis is a socket path */
    char host[FLEET_ADDRESS_MAX];  /* TCP: a name or an address */
    uint32_t port;
    char password_file[PATH_MAX];
    char user[FLEET_SECRET_MAX];     /* "": Redis's default user */
    char password[FLEET_SECRET_MAX]; /* "": no AUTH */
    char name[FLEET_NAME_MAX + 1];
    char host_id[FLEET_HOST_ID_MAX + 1]; /* this host in the fleet */
    uint64_t sync_interval_ns;
} fleet_conf;

typedef struct config {
    char path[PATH_MAX];
    char runtime_dir[PATH_MAX];
    char control_socket[CONFIG_SOCKET_MAX]; /* absolute */
    char stats_socket[CONFIG_SOCKET_MAX];   /* absolute */
    char segment_path[PATH_MAX];
    char lock_path[PATH_MAX];
    bool has_group;
    gid_t group; /* group of the runtime dir and the control socket */
    bool has_stats_group;
    gid_t stats_group; /* group of the stats socket */
    uid_t allow_users[CONFIG_MAX_IDS];
    size_t n_allow_users;
    gid_t allow_groups[CONFIG_MAX_IDS];
    size_t n_allow_groups;
    uint32_t upstream_capacity;
    uint32_t process_capacity;
    int log_level;
    budget_params defaults;
    /* Limits a neighbour meets (docs/daemon.md, "Limits and timeouts"):
     * process slots of one uid, the control socket's connections without
     * a slot and its deadlines, the rate limit of repetitive log lines. */
    uint32_t process_slots_per_uid;
    uint32_t upstreams_per_uid;       /* new upstreams one user may register */
    uint64_t upstream_idle_retire_ns; /* a client's idle upstream retires */
    uint32_t connections_unattached;
    uint32_t connections_per_uid;
    uint32_t connections_per_process;
    uint32_t hello_timeout_ms;
    uint32_t frame_timeout_ms;
    uint32_t idle_timeout_ms;
    uint32_t write_timeout_ms;
    /* The stats wing's deadlines (stats/stats.h, stats/metrics.h): a
     * request must be whole, a reply read, within them. */
    uint32_t stats_request_timeout_ms;
    uint32_t stats_reply_timeout_ms;
    uint32_t metrics_request_timeout_ms;
    uint32_t metrics_reply_timeout_ms;
    uint32_t log_limit_lines;
    uint32_t log_limit_interval_s;
    /* The /metrics endpoint (metrics.c): off unless metrics_listen is set;
     * a loopback address only. */
    bool has_metrics;
    char metrics_listen[64]; /* as written: logs, and reload's comparison */
    struct sockaddr_storage metrics_addr;
    socklen_t metrics_addr_len;
    int metrics_per_process; /* prom_per_process: program (0), pid, none */
    upstream_conf *upstreams;
    size_t n_upstreams;
    program_conf programs[CONFIG_MAX_PROGRAMS];
    size_t n_programs;
    fleet_conf fleet;
    struct rcu_head rcu;
} config;

/*
 * Parse @p path. On error returns a negative code and writes into @p err
 * every mistake found, one per line ("PATH:LINE: [section] key: why"), in
 * the file's order, as many as @p err_len holds (CONFIG_ERRORS_MAX_BYTES
 * holds CONFIG_MAX_ERRORS of them), then how many more there were.
 */
int config_load(const char *path, config **ret, char *err, size_t err_len);

/* Accepts NULL. */
void config_free(config *c);

/* seg_params_plausible() on a budget_params, which is what the daemon's
 * callers hold. */
static inline bool budget_params_plausible(const budget_params *p)
{
    return seg_params_plausible(p->ratio_micro, p->floor_micro_per_s,
                                p->cap_micro);
}

/* The health parameters @p p configures, as a slot holds them. */
static inline health_params budget_params_health(const budget_params *p)
{
    return (health_params){
        .flags = (p->adaptive_throttle ? SEG_HEALTH_THROTTLE : 0u) |
                 (p->pushback ? SEG_HEALTH_PUSHBACK : 0u) |
                 (p->pushback_first_attempts ? SEG_HEALTH_PUSHBACK_FIRST : 0u),
        .k_micro = p->throttle_k_micro,
        .window_ns = p->throttle_window_ns,
        .min_processes = p->throttle_min_processes,
        .pushback_max_ns = p->pushback_max_ns,
    };
}

/* @p p's health fields from what a slot holds (an adopted segment). */
static inline void budget_params_set_health(budget_params *p,
                                            const health_params *h)
{
    p->adaptive_throttle = (h->flags & SEG_HEALTH_THROTTLE) != 0;
    p->pushback = (h->flags & SEG_HEALTH_PUSHBACK) != 0;
    p->pushback_first_attempts = (h->flags & SEG_HEALTH_PUSHBACK_FIRST) != 0;
    p->throttle_k_micro = h->k_micro;
    p->throttle_window_ns = h->window_ns;
    p->throttle_min_processes = (uint32_t)h->min_processes;
    p->pushback_max_ns = h->pushback_max_ns;
}

static inline bool budget_health_equal(const budget_params *a,
                                       const budget_params *b)
{
    health_params x = budget_params_health(a), y = budget_params_health(b);
    return x.flags == y.flags && x.k_micro == y.k_micro &&
           x.window_ns == y.window_ns && x.min_processes == y.min_processes &&
           x.pushback_max_ns == y.pushback_max_ns;
}

/* @p p's share fields from what slot @p s holds (an adopted segment); the
 * defaults for figures out of the keys' ranges (the heartbeat then
 * writes the configured ones). */
static inline void budget_params_read_share(budget_params *p, seg_upstream *s)
{
    uint64_t w = atomic_load(&s->share_window_ns);
    uint64_t r = atomic_load(&s->request_share_micro);
    bool ok = (w == 0 || (w >= UINT64_C(1000000000) &&
                          w <= 3600 * UINT64_C(1000000000))) &&
              r >= SEG_MICRO / 100 && r <= SEG_MICRO;
    p->fair_shares = !ok || w != 0;
    p->share_window_ns = ok && w != 0 ? w : SEG_DEFAULT_SHARE_WINDOW_NS;
    p->request_share_micro = ok ? r : SEG_DEFAULT_REQUEST_SHARE_MICRO;
}

/* The configured parameters of @p name, or the defaults. */
const budget_params *config_params_for(const config *c, const char *name);

/* The weight of program @p name (micro), CONFIG_DEFAULT_WEIGHT_MICRO for a
 * program without a [program NAME] section. */
uint64_t config_weight_for(const config *c, const char *name);

#endif

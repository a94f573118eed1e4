/* SPDX-License-Identifier: MIT */
/*
 * Configuration: libinih reads the INI syntax; this file checks every
 * value against its range and names the file, line and key of the first
 * mistake. Nothing half-parsed is ever used: a reload that fails keeps the
 * running configuration.
 */
#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <ini.h>

#include "core/log.h"
#include "prom.h"
#include "retryd/common.h"

/* A configuration file is small; anything larger is a mistake (a device,
 * a log, /dev/zero) and is refused rather than read into memory. */
#define CONFIG_MAX_BYTES (1024 * 1024)

/* The keys of [retryd] and of a parameters section, numbered so that the
 * line each was set on can be kept (a key set twice is an error naming
 * both lines). */
static const char *const daemon_keys[] = {
    "runtime_dir",
    "control_socket",
    "stats_socket",
    "segment",
    "group",
    "stats_group",
    "allow_users",
    "allow_groups",
    "upstream_capacity",
    "process_capacity",
    "log_level",
    "metrics_listen",
    "metrics_per_process",
};
#define N_DAEMON_KEYS (sizeof(daemon_keys) / sizeof(daemon_keys[0]))
static const char *const params_keys[] = {"ratio", "min_retries_per_sec",
                                          "cap"};
#define N_PARAMS_KEYS 3

/* --- limits: [retryd] keys a neighbour meets ------------------------------
 * Each a decimal in a range, kept apart from daemon_keys (their own seen
 * lines) so that the limits read as one group. 0 in the field until
 * finish(): unset, so the default, which may follow another key. */
typedef struct limit_key {
    const char *key;
    size_t off; /* of its uint32_t in config */
    uint32_t lo, hi;
    uint32_t dflt; /* when unset; 0: derived (limits_finish) */
} limit_key;

#define LIMIT(name, lo, hi, dflt)                                              \
    {                                                                          \
#name, offsetof(config, name), lo, hi, dflt                            \
    }
static const limit_key limit_keys[] = {
    LIMIT(process_slots_per_uid, 1, SEG_MAX_PROCESSES, 0),
    LIMIT(connections_unattached, 2, CONFIG_UNATTACHED_MAX, 64),
    LIMIT(connections_per_uid, 1, CONFIG_UNATTACHED_MAX, 0),
    LIMIT(connections_per_process, 1, CONFIG_UNATTACHED_MAX, 8),
    LIMIT(hello_timeout_ms, 10, 60000, 1000),
    LIMIT(frame_timeout_ms, 10, 60000, 1000),
    LIMIT(idle_timeout_ms, 100, 3600000, 10000),
    LIMIT(write_timeout_ms, 10, 60000, 2000),
    LIMIT(stats_request_timeout_ms, 10, 60000, 1000),
    LIMIT(stats_reply_timeout_ms, 10, 600000, 5000),
    LIMIT(metrics_request_timeout_ms, 10, 60000, 1000),
    LIMIT(metrics_reply_timeout_ms, 1000, 600000, 5000),
    LIMIT(log_limit_lines, 1, 1000, LOG_LIMIT_LINES),
    LIMIT(log_limit_interval_s, 1, 3600, LOG_LIMIT_WINDOW_MS / 1000),
};
#undef LIMIT
#define N_LIMIT_KEYS (sizeof(limit_keys) / sizeof(limit_keys[0]))
enum {
    LK_SLOTS_PER_UID,
    LK_UNATTACHED,
    LK_PER_UID,
    LK_PER_PROCESS,
};

/* Where a section's header and each of its keys were first seen. */
typedef struct seen_lines {
    int header;
    int key[N_DAEMON_KEYS > N_LIMIT_KEYS ? N_DAEMON_KEYS : N_LIMIT_KEYS];
} seen_lines;

typedef struct parse_state {
    config *cfg;
    FILE *file;
    int line;        /* lines handed to inih so far */
    int error_line;  /* where st->error happened */
    size_t bytes;    /* read so far, against CONFIG_MAX_BYTES */
    int header_line; /* of the section header being read */
    seen_lines seen_daemon, seen_defaults, seen_limits;
    seen_lines *seen_upstreams; /* parallel to cfg->upstreams */
    size_t cap_upstreams;       /* of both arrays; grown by doubling */
    size_t last_upstream;       /* the section read last: its keys follow */
    bool allow_groups_set;
    char error[384]; /* the handler's reason; the line comes from inih */
    char rel_control[CONFIG_SOCKET_MAX];
    char rel_stats[CONFIG_SOCKET_MAX];
    char rel_segment[PATH_MAX];
    /* Lines of the path keys (0: the default), to name a clash. */
    int line_control, line_stats, line_segment;
    /* The last section header as written: inih cuts long names. */
    char section[128];
    bool after_key; /* inih reads an indented line as a continuation */
} parse_state;

/* inih's section buffer (its ini.c MAX_SECTION): longer names are cut to
 * one byte less, silently. */
#ifndef INI_MAX_SECTION
#define INI_MAX_SECTION 50
#endif

#define SECTION_DAEMON "retryd"
#define SECTION_DEFAULTS "defaults"
#define SECTION_UPSTREAM_PREFIX "upstream "

/* Record the first error only; inih goes on parsing after a failure. */
__attribute__((format(printf, 4, 5))) static int fail(parse_state *st,
                                                      const char *section,
                                                      const char *key,
                                                      const char *fmt, ...)
{
    char what[160];
    va_list ap;
    if (st->error[0] != '\0')
        return 0;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(st->error, sizeof(st->error), "[%s] %s: %s", section, key, what);
    st->error_line = st->line;
    return 0;
}

/* Where inih's search for @p stop ends: at one of those bytes, at an
 * inline comment (a ';' after white space) or at the end. */
static const char *ini_scan(const char *s, const char *stop)
{
    bool was_space = false;
    while (*s && !strchr(stop, *s) && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

/*
 * Keep the whole name of a section header, read as inih reads the line
 * (after a BOM and white space; an indented line after a key continues
 * its value), since inih keeps only INI_MAX_SECTION - 1 bytes of it.
 */
static void note_section(parse_state *st, const char *line)
{
    const char *s = line;
    if (st->line == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3;
    const char *start = s;
    while (isspace((unsigned char)*start))
        start++;
    if (*start == '\0' || *start == ';' || *start == '#')
        return;
    if (st->after_key && start > line)
        return;
    if (*start != '[') {
        const char *end = ini_scan(start, "=:");
        if (*end == '=' || *end == ':')
            st->after_key = true;
        return;
    }
    const char *end = ini_scan(start + 1, "]");
    if (*end != ']')
        return; /* inih reports the line */
    size_t n = (size_t)(end - start - 1);
    if (n >= sizeof(st->section))
        n = sizeof(st->section) - 1; /* still too long for any section */
    memcpy(st->section, start + 1, n);
    st->section[n] = '\0';
    st->after_key = false;
    st->header_line = st->line;
}

/* The whole name of the section inih calls @p section. */
static const char *whole_section(const parse_state *st, const char *section)
{
    size_t n = strlen(section);
    if (n == INI_MAX_SECTION - 1 && strncmp(st->section, section, n) == 0)
        return st->section;
    return section;
}

/* Record a reader's error unless one is already there. */
static char *read_error(parse_state *st, const char *what)
{
    if (st->error[0] == '\0') {
        snprintf(st->error, sizeof(st->error), "%s", what);
        st->error_line = st->line;
    }
    return NULL;
}

/*
 * inih's reader: one line per call, counted, so a handler error can name
 * its line. Bounded in every way a file can be hostile: a line longer than
 * inih's buffer, a NUL byte, a file past CONFIG_MAX_BYTES or a read error
 * end the parse with an error, never with a silently cut value or an
 * unbounded read.
 */
static char *read_line(char *str, int num, void *stream)
{
    parse_state *st = stream;
    int n = 0, ch = EOF;

    st->line++; /* the line being read, for the errors below */
    while (n < num - 1 && (ch = getc(st->file)) != EOF) {
        if (ch == '\0')
            return read_error(st, "NUL byte in the file");
        if (++st->bytes > CONFIG_MAX_BYTES)
            return read_error(st, "file larger than 1 MiB");
        str[n++] = (char)ch;
        if (ch == '\n')
            break;
    }
    if (ferror(st->file)) {
        char what[96];
        snprintf(what, sizeof(what), "read error: %s", strerror(errno));
        return read_error(st, what);
    }
    if (n == 0) {
        st->line--; /* there was no such line */
        return NULL;
    }
    if (ch != '\n' && n == num - 1 && (ch = getc(st->file)) != EOF &&
        ch != '\n') {
        char what[64];
        snprintf(what, sizeof(what), "line longer than %d bytes", num - 1);
        return read_error(st, what);
    }
    str[n] = '\0';
    note_section(st, str);
    return str;
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

static bool parse_u32(const char *v, uint32_t lo, uint32_t hi, uint32_t *ret)
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
    if (parse_u32(name, 0, UINT32_MAX - 1, &n)) {
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
    if (parse_u32(name, 0, UINT32_MAX - 1, &n)) {
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

/* A whitespace-separated list of users or groups. */
static int parse_ids(parse_state *st, const char *section, const char *key,
                     const char *value, bool groups)
{
    char copy[1024], *save = NULL;
    size_t *n = groups ? &st->cfg->n_allow_groups : &st->cfg->n_allow_users;

    if (strlen(value) >= sizeof(copy))
        return fail(st, section, key, "%s", "list too long");
    strcpy(copy, value);
    *n = 0;
    for (char *t = strtok_r(copy, " \t,", &save); t;
         t = strtok_r(NULL, " \t,", &save)) {
        if (*n == CONFIG_MAX_IDS)
            return fail(st, section, key, "more than %d entries",
                        CONFIG_MAX_IDS);
        bool ok = groups ? lookup_gid(t, &st->cfg->allow_groups[*n])
                         : lookup_uid(t, &st->cfg->allow_users[*n]);
        if (!ok)
            return fail(st, section, key, "unknown %s '%s'",
                        groups ? "group" : "user", t);
        (*n)++;
    }
    if (groups)
        st->allow_groups_set = true;
    return 1;
}

static int copy_path(parse_state *st, const char *section, const char *key,
                     const char *value, char *dst, size_t cap)
{
    if (*value == '\0' || strlen(value) >= cap)
        return fail(st, section, key, "'%s' is empty or too long", value);
    strcpy(dst, value);
    return 1;
}

/* ADDRESS:PORT of the /metrics endpoint: a dotted IPv4 address in
 * 127.0.0.0/8 or [::1], and a port in 1..65535. Never a name to resolve:
 * what the daemon binds is what the file says. */
static int metrics_listen_key(parse_state *st, const char *key, const char *v)
{
    config *c = st->cfg;
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon = strrchr(v, ':');
    uint32_t port;
    size_t hl = colon ? (size_t)(colon - v) : 0;
    bool v6 = hl >= 2 && v[0] == '[' && v[hl - 1] == ']';
    if (colon == NULL || hl == 0 || hl >= sizeof(host) ||
        !parse_u32(colon + 1, 1, 65535, &port))
        return fail(st, SECTION_DAEMON, key,
                    "'%s' is not ADDRESS:PORT with a port in 1..65535 (e.g. "
                    "127.0.0.1:9464 or [::1]:9464)",
                    v);
    memcpy(host, v + v6, hl - 2 * v6);
    host[hl - 2 * v6] = '\0';
    struct sockaddr_in *in4 = (struct sockaddr_in *)&c->metrics_addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&c->metrics_addr;
    memset(&c->metrics_addr, 0, sizeof(c->metrics_addr));
    int ok = v6 ? inet_pton(AF_INET6, host, &in6->sin6_addr)
                : inet_pton(AF_INET, host, &in4->sin_addr);
    if (ok != 1)
        return fail(st, SECTION_DAEMON, key,
                    "'%s' is not an IPv4 address or [IPv6 address] with a "
                    "port (e.g. 127.0.0.1:9464 or [::1]:9464)",
                    v);
    bool loopback = v6 ? IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)
                       : (ntohl(in4->sin_addr.s_addr) >> 24) == 127;
    if (!loopback)
        return fail(st, SECTION_DAEMON, key,
                    "'%s' is not a loopback address: the endpoint serves "
                    "this host only (127.0.0.0/8 or [::1])",
                    v);
    if (v6) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        c->metrics_addr_len = sizeof(*in6);
    } else {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        c->metrics_addr_len = sizeof(*in4);
    }
    snprintf(c->metrics_listen, sizeof(c->metrics_listen), "%s", v);
    c->has_metrics = true;
    return 1;
}

static int metrics_key(parse_state *st, const char *key, const char *v)
{
    if (strcmp(key, "metrics_listen") == 0)
        return metrics_listen_key(st, key, v);
    if (strcmp(key, "metrics_per_process") == 0) {
        st->cfg->metrics_per_process = prom_per_process_parse(v);
        if (st->cfg->metrics_per_process < 0)
            return fail(st, SECTION_DAEMON, key,
                        "'%s' is not program, pid or none", v);
        return 1;
    }
    return fail(st, SECTION_DAEMON, key, "%s", "unknown key");
}

static int daemon_key(parse_state *st, const char *key, const char *v)
{
    config *c = st->cfg;
    const char *s = SECTION_DAEMON;

    if (strcmp(key, "runtime_dir") == 0) {
        if (v[0] != '/')
            return fail(st, s, key, "'%s' is not an absolute path", v);
        return copy_path(st, s, key, v, c->runtime_dir, sizeof(c->runtime_dir));
    }
    if (strcmp(key, "control_socket") == 0) {
        st->line_control = st->line;
        return copy_path(st, s, key, v, st->rel_control,
                         sizeof(st->rel_control));
    }
    if (strcmp(key, "stats_socket") == 0) {
        st->line_stats = st->line;
        return copy_path(st, s, key, v, st->rel_stats, sizeof(st->rel_stats));
    }
    if (strcmp(key, "segment") == 0) {
        st->line_segment = st->line;
        return copy_path(st, s, key, v, st->rel_segment,
                         sizeof(st->rel_segment));
    }
    if (strcmp(key, "group") == 0) {
        if (!lookup_gid(v, &c->group))
            return fail(st, s, key, "unknown group '%s'", v);
        c->has_group = true;
        return 1;
    }
    if (strcmp(key, "stats_group") == 0) {
        if (!lookup_gid(v, &c->stats_group))
            return fail(st, s, key, "unknown group '%s'", v);
        c->has_stats_group = true;
        return 1;
    }
    if (strcmp(key, "allow_users") == 0)
        return parse_ids(st, s, key, v, false);
    if (strcmp(key, "allow_groups") == 0)
        return parse_ids(st, s, key, v, true);
    if (strcmp(key, "upstream_capacity") == 0) {
        if (!parse_u32(v, 1, SEG_MAX_UPSTREAMS, &c->upstream_capacity))
            return fail(st, s, key, "'%s' is not in 1..65536", v);
        return 1;
    }
    if (strcmp(key, "process_capacity") == 0) {
        if (!parse_u32(v, 1, SEG_MAX_PROCESSES, &c->process_capacity))
            return fail(st, s, key, "'%s' is not in 1..65536", v);
        return 1;
    }
    if (strcmp(key, "log_level") == 0) {
        c->log_level = log_level_parse(v);
        if (c->log_level < 0)
            return fail(st, s, key, "'%s' is not error, warning, info or debug",
                        v);
        return 1;
    }
    if (strncmp(key, "metrics_", 8) == 0)
        return metrics_key(st, key, v);
    return fail(st, s, key, "%s", "unknown key");
}

static int params_key(parse_state *st, const char *section, budget_params *p,
                      const char *key, const char *v)
{
    if (strcmp(key, "ratio") == 0) {
        if (!parse_tokens(v, SEG_MAX_CAP_MICRO, &p->ratio_micro))
            return fail(st, section, key, "'%s' is not a number >= 0", v);
        return 1;
    }
    if (strcmp(key, "min_retries_per_sec") == 0) {
        if (!parse_tokens(v, SEG_MAX_FLOOR_MICRO, &p->floor_micro_per_s))
            return fail(st, section, key, "'%s' is not a number >= 0", v);
        return 1;
    }
    if (strcmp(key, "cap") == 0) {
        if (!parse_tokens(v, SEG_MAX_CAP_MICRO, &p->cap_micro) ||
            p->cap_micro < SEG_MICRO)
            return fail(st, section, key, "'%s' is not a number >= 1", v);
        return 1;
    }
    return fail(st, section, key, "%s", "unknown key");
}

/*
 * A key of a section with @p seen lines: the first header of the section
 * and the first line of each key. Another header of the same section, or
 * a key set twice, is an error naming both lines (with "last one wins", a
 * copied block could silently change a budget). 1 to go on, 0 on error.
 */
static int note_key_at(parse_state *st, const char *section, seen_lines *seen,
                       int i, const char *key)
{
    if (seen->header == 0)
        seen->header = st->header_line;
    else if (seen->header != st->header_line)
        return fail(st, section, key,
                    "section repeated (first at line %d): set each "
                    "section's keys in one place",
                    seen->header);
    if (i < 0)
        return 1; /* an unknown key is its handler's to report */
    if (seen->key[i] != 0)
        return fail(st, section, key, "set twice (first at line %d)",
                    seen->key[i]);
    seen->key[i] = st->line;
    return 1;
}

/* note_key_at() for @p key found in @p keys (-1: unknown). */
static int note_key(parse_state *st, const char *section, seen_lines *seen,
                    const char *const *keys, size_t n_keys, const char *key)
{
    int at = -1;
    for (size_t i = 0; i < n_keys && at < 0; i++)
        if (strcmp(keys[i], key) == 0)
            at = (int)i;
    return note_key_at(st, section, seen, at, key);
}

static int limit_index(const char *key)
{
    for (size_t i = 0; i < N_LIMIT_KEYS; i++)
        if (strcmp(limit_keys[i].key, key) == 0)
            return (int)i;
    return -1;
}

static uint32_t *limit_field(config *c, size_t i)
{
    return (uint32_t *)(void *)((char *)c + limit_keys[i].off);
}

static int limit_value(parse_state *st, size_t i, const char *key,
                       const char *v)
{
    const limit_key *k = &limit_keys[i];
    if (!parse_u32(v, k->lo, k->hi, limit_field(st->cfg, i)))
        return fail(st, SECTION_DAEMON, key, "'%s' is not in %u..%u", v, k->lo,
                    k->hi);
    return 1;
}

/* Limit @p i above @p max, the value of the key @p of (the one it is part
 * of), or the default (at most @p max) when unset. */
static int limit_within(config *c, const parse_state *st, size_t i,
                        uint32_t max, const char *of, uint32_t dflt, char *err,
                        size_t err_len)
{
    uint32_t *v = limit_field(c, i);
    if (*v == 0) {
        *v = dflt < max ? dflt : max;
        return 0;
    }
    if (*v <= max)
        return 0;
    snprintf(err, err_len, "%s:%d: [%s] %s: %u is more than %s (%u)", c->path,
             st->seen_limits.key[i], SECTION_DAEMON, limit_keys[i].key, *v, of,
             max);
    return RETRYD_ECONFIG;
}

/*
 * The limits' defaults (today's constants; a share of the slots for one
 * uid: half of process_capacity, but at least 16 or all of them), and the
 * ones bounded by another: slots per uid by process_capacity, connections
 * per process by those per uid, by those of the pool.
 */
static int limits_finish(config *c, const parse_state *st, char *err,
                         size_t err_len)
{
    for (size_t i = LK_PER_PROCESS + 1; i < N_LIMIT_KEYS; i++)
        if (*limit_field(c, i) == 0)
            *limit_field(c, i) = limit_keys[i].dflt;
    if (c->connections_unattached == 0)
        c->connections_unattached = limit_keys[LK_UNATTACHED].dflt;
    uint32_t half = c->process_capacity / 2;
    if (limit_within(c, st, LK_SLOTS_PER_UID, c->process_capacity,
                     "process_capacity", half > 16 ? half : 16, err,
                     err_len) < 0 ||
        limit_within(c, st, LK_PER_UID, c->connections_unattached,
                     "connections_unattached", c->connections_unattached / 2,
                     err, err_len) < 0 ||
        limit_within(c, st, LK_PER_PROCESS, c->connections_per_uid,
                     "connections_per_uid", limit_keys[LK_PER_PROCESS].dflt,
                     err, err_len) < 0)
        return RETRYD_ECONFIG;
    return 0;
}

/* Room for one more upstream in cfg->upstreams and st->seen_upstreams.
 * Doubling: a file of thousands of sections is read in linear time. */
static int grow_upstreams(parse_state *st)
{
    config *c = st->cfg;
    if (c->n_upstreams < st->cap_upstreams)
        return 0;
    size_t cap = st->cap_upstreams ? 2 * st->cap_upstreams : 16;
    if (cap > CONFIG_MAX_UPSTREAMS)
        cap = CONFIG_MAX_UPSTREAMS;
    upstream_conf *more = realloc(c->upstreams, cap * sizeof(*more));
    if (more == NULL)
        return RETRYD_ENOMEM;
    c->upstreams = more;
    seen_lines *seen = realloc(st->seen_upstreams, cap * sizeof(*seen));
    if (seen == NULL)
        return RETRYD_ENOMEM;
    st->seen_upstreams = seen;
    st->cap_upstreams = cap;
    return 0;
}

static upstream_conf *upstream_section(parse_state *st, const char *name,
                                       seen_lines **ret_seen)
{
    config *c = st->cfg;
    size_t last = st->last_upstream;
    if (last < c->n_upstreams && strcmp(c->upstreams[last].name, name) == 0) {
        *ret_seen = &st->seen_upstreams[last];
        return &c->upstreams[last];
    }
    for (size_t i = 0; i < c->n_upstreams; i++)
        if (strcmp(c->upstreams[i].name, name) == 0) {
            st->last_upstream = i;
            *ret_seen = &st->seen_upstreams[i];
            return &c->upstreams[i];
        }
    if (c->n_upstreams == CONFIG_MAX_UPSTREAMS || grow_upstreams(st) < 0)
        return NULL;
    *ret_seen =
        memset(&st->seen_upstreams[c->n_upstreams], 0, sizeof(**ret_seen));
    st->last_upstream = c->n_upstreams;
    upstream_conf *u = &c->upstreams[c->n_upstreams++];
    memset(u, 0, sizeof(*u));
    strcpy(u->name, name);
    /* Unset keys take the defaults known when the file is done. */
    u->params.ratio_micro = UINT64_MAX;
    u->params.floor_micro_per_s = UINT64_MAX;
    u->params.cap_micro = UINT64_MAX;
    return u;
}

static int handler(void *user, const char *section, const char *key,
                   const char *value)
{
    parse_state *st = user;

    section = whole_section(st, section);
    if (strcmp(section, SECTION_DAEMON) == 0) {
        int limit = limit_index(key);
        if (limit >= 0)
            return note_key_at(st, section, &st->seen_limits, limit, key) &&
                   limit_value(st, (size_t)limit, key, value);
        return note_key(st, section, &st->seen_daemon, daemon_keys,
                        N_DAEMON_KEYS, key) &&
               daemon_key(st, key, value);
    }
    if (strcmp(section, SECTION_DEFAULTS) == 0)
        return note_key(st, section, &st->seen_defaults, params_keys,
                        N_PARAMS_KEYS, key) &&
               params_key(st, section, &st->cfg->defaults, key, value);
    if (strncmp(section, SECTION_UPSTREAM_PREFIX,
                strlen(SECTION_UPSTREAM_PREFIX)) == 0) {
        const char *name = section + strlen(SECTION_UPSTREAM_PREFIX);
        if (!seg_name_valid(name))
            return fail(st, section, key,
                        "upstream name '%s' must be 1..%u printable bytes",
                        name, SEG_NAME_MAX);
        seen_lines *seen = NULL;
        upstream_conf *u = upstream_section(st, name, &seen);
        if (u == NULL)
            return fail(st, section, key, "%s", "too many upstreams");
        return note_key(st, section, seen, params_keys, N_PARAMS_KEYS, key) &&
               params_key(st, section, &u->params, key, value);
    }
    return fail(st, section, key, "unknown section [%s]", section);
}

static int join(char *dst, size_t cap, const char *dir, const char *name)
{
    int n = name[0] == '/' ? snprintf(dst, cap, "%s", name)
                           : snprintf(dst, cap, "%s/%s", dir, name);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

static void set_defaults(config *c, parse_state *st)
{
    strcpy(c->runtime_dir, "/run/retryd");
    strcpy(st->rel_control, "control.sock");
    strcpy(st->rel_stats, "stats.sock");
    strcpy(st->rel_segment, "segment");
    c->upstream_capacity = SEG_DEFAULT_UPSTREAMS;
    c->process_capacity = SEG_DEFAULT_PROCESSES;
    c->log_level = LOG_INFO;
    c->defaults = (budget_params){
        .ratio_micro = SEG_DEFAULT_RATIO_MICRO,
        .floor_micro_per_s = SEG_DEFAULT_FLOOR_MICRO_PER_S,
        .cap_micro = SEG_DEFAULT_CAP_MICRO,
    };
}

/* @p path with "//", "." and ".." resolved by spelling alone. */
static void path_spelling(char out[PATH_MAX], const char *path)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (n > 0 && out[--n] != '/')
                ;
        } else if (len > 0 && !(len == 1 && p[0] == '.') &&
                   n + 1 + len < PATH_MAX) {
            out[n++] = '/';
            memcpy(out + n, p, len);
            n += len;
        }
        out[n] = '\0';
        p += len;
    }
}

/*
 * The daemon creates each of these files: two of them naming one file
 * would have it bind a socket over the other or map its lock file as the
 * segment. Names the key set last of a clashing pair.
 */
static int check_distinct(const config *c, const parse_state *st, char *err,
                          size_t err_len)
{
    const struct {
        const char *what;
        const char *path;
        int line; /* of its key, 0 for a default */
    } f[] = {
        {"control_socket", c->control_socket, st->line_control},
        {"stats_socket", c->stats_socket, st->line_stats},
        {"segment", c->segment_path, st->line_segment},
        {"lock file", c->lock_path, 0},
    };
    const size_t n = sizeof(f) / sizeof(f[0]);
    char a[PATH_MAX], b[PATH_MAX];

    for (size_t i = 0; i < n; i++) {
        path_spelling(a, f[i].path);
        for (size_t j = i + 1; j < n; j++) {
            path_spelling(b, f[j].path);
            if (strcmp(a, b) != 0)
                continue;
            size_t k = f[j].line > f[i].line ? j : i, o = i + j - k;
            snprintf(err, err_len,
                     "%s:%d: [%s] %s: '%s' is also the %s; control_socket, "
                     "stats_socket, segment and the lock file (retryd.lock) "
                     "each need a path of their own",
                     c->path, f[k].line, SECTION_DAEMON, f[k].what, f[k].path,
                     f[o].what);
            return RETRYD_ECONFIG;
        }
    }
    return 0;
}

static int finish(config *c, parse_state *st, char *err, size_t err_len)
{
    if (join(c->control_socket, sizeof(c->control_socket), c->runtime_dir,
             st->rel_control) < 0 ||
        join(c->stats_socket, sizeof(c->stats_socket), c->runtime_dir,
             st->rel_stats) < 0 ||
        join(c->segment_path, sizeof(c->segment_path), c->runtime_dir,
             st->rel_segment) < 0 ||
        join(c->lock_path, sizeof(c->lock_path), c->runtime_dir,
             "retryd.lock") < 0) {
        snprintf(err, err_len,
                 "%s: a socket or segment path is too long "
                 "(sockets: at most 107 bytes)",
                 c->path);
        return RETRYD_ECONFIG;
    }
    if (check_distinct(c, st, err, err_len) < 0 ||
        limits_finish(c, st, err, err_len) < 0)
        return RETRYD_ECONFIG;
    if (c->n_upstreams > c->upstream_capacity) {
        snprintf(err, err_len,
                 "%s: %zu upstreams configured, more than upstream_capacity "
                 "(%u): the segment could not hold them all",
                 c->path, c->n_upstreams, c->upstream_capacity);
        return RETRYD_ECONFIG;
    }
    if (!c->has_stats_group && c->has_group) {
        c->stats_group = c->group;
        c->has_stats_group = true;
    }
    if (!st->allow_groups_set && c->has_group)
        c->allow_groups[c->n_allow_groups++] = c->group;
    for (size_t i = 0; i < c->n_upstreams; i++) {
        budget_params *p = &c->upstreams[i].params;
        if (p->ratio_micro == UINT64_MAX)
            p->ratio_micro = c->defaults.ratio_micro;
        if (p->floor_micro_per_s == UINT64_MAX)
            p->floor_micro_per_s = c->defaults.floor_micro_per_s;
        if (p->cap_micro == UINT64_MAX)
            p->cap_micro = c->defaults.cap_micro;
    }
    return 0;
}

/* The file, open for reading, or NULL with @p err written. A directory
 * reads as an empty file through stdio, which would be a valid, empty
 * configuration: refused here by name. */
static FILE *open_regular(const char *path, char *err, size_t err_len)
{
    struct stat sb;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    const char *why = fstat(fileno(f), &sb) < 0 ? strerror(errno)
                      : S_ISDIR(sb.st_mode)     ? "is a directory"
                                                : NULL;
    if (why != NULL) {
        snprintf(err, err_len, "%s: cannot read: %s", path, why);
        fclose(f);
        return NULL;
    }
    return f;
}

int config_load(const char *path, config **ret, char *err, size_t err_len)
{
    parse_state st = {0};
    config *c = calloc(1, sizeof(*c));
    int r;

    if (c == NULL) {
        snprintf(err, err_len, "out of memory");
        return RETRYD_ENOMEM;
    }
    if (strlen(path) >= sizeof(c->path)) {
        snprintf(err, err_len, "configuration path too long");
        free(c);
        return RETRYD_ECONFIG;
    }
    strcpy(c->path, path);
    st.cfg = c;
    set_defaults(c, &st);

    st.file = open_regular(path, err, err_len);
    if (st.file == NULL) {
        config_free(c);
        return RETRYD_ECONFIG;
    }
    r = ini_parse_stream(read_line, &st, handler, &st);
    fclose(st.file);
    free(st.seen_upstreams);
    if (r == -2) {
        snprintf(err, err_len, "%s: out of memory", path);
    } else if (r > 0 && (st.error[0] == '\0' || r < st.error_line)) {
        snprintf(err, err_len,
                 "%s:%d: syntax error (expected "
                 "[section] or key = value)",
                 path, r);
    } else if (st.error[0] != '\0') {
        snprintf(err, err_len, "%s:%d: %s", path, st.error_line, st.error);
    } else if (finish(c, &st, err, err_len) == 0) {
        *ret = c;
        return 0;
    }
    config_free(c);
    return RETRYD_ECONFIG;
}

void config_free(config *c)
{
    if (c == NULL)
        return;
    free(c->upstreams);
    free(c);
}

const budget_params *config_params_for(const config *c, const char *name)
{
    for (size_t i = 0; i < c->n_upstreams; i++)
        if (strcmp(c->upstreams[i].name, name) == 0)
            return &c->upstreams[i].params;
    return &c->defaults;
}

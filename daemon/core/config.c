/* SPDX-License-Identifier: MIT */
/*
 * Configuration: libinih reads the INI syntax; this file finds each key's
 * row in the one table of keys (config_keys.c), which checks the value
 * against its range, and names the file, line and key of the first
 * mistake. Nothing half-parsed is ever used: a reload that fails keeps the
 * running configuration.
 */
#include "core/config.h"
#include "core/config_keys.h"
#include "core/config_fleet.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ini.h>

#include "retryd/common.h"

/* A configuration file is small; anything larger is a mistake (a device,
 * a log, /dev/zero) and is refused rather than read into memory. */
#define CONFIG_MAX_BYTES (1024 * 1024)

/* Where a section's header and each of its keys were first seen. */
typedef struct seen_lines {
    int header;
    int key[CK_COUNT]; /* by row of config_keys; 0: unset */
} seen_lines;

typedef struct parse_state {
    config *cfg;
    FILE *file;
    int line;        /* lines handed to inih so far */
    size_t bytes;    /* read so far, against CONFIG_MAX_BYTES */
    int header_line; /* of the section header being read */
    seen_lines seen_daemon, seen_defaults, seen_fleet;
    int fleet_header; /* the line of the [fleet] header, 0 without one */
    seen_lines seen_programs[CONFIG_MAX_PROGRAMS]; /* parallel to programs */
    seen_lines *seen_upstreams; /* parallel to cfg->upstreams */
    size_t cap_upstreams;       /* of both arrays; grown by doubling */
    size_t last_upstream;       /* the section read last: its keys follow */
    /* Every mistake found, in the order found (config_load sorts them by
     * line); beyond CONFIG_MAX_ERRORS only counted. */
    struct config_error {
        int line;
        char text[CONFIG_WHY_MAX + 272];
    } errors[CONFIG_MAX_ERRORS];
    size_t n_errors, n_unlisted;
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
#define SECTION_PROGRAM_PREFIX "program "
#define SECTION_FLEET "fleet"

/* Record a mistake at the current line; inih goes on parsing after one,
 * so that --check-config lists them all. */
static void add_error(parse_state *st, int line, const char *text)
{
    if (st->n_errors == CONFIG_MAX_ERRORS) {
        st->n_unlisted++;
        return;
    }
    struct config_error *e = &st->errors[st->n_errors++];
    e->line = line;
    snprintf(e->text, sizeof(e->text), "%s", text);
}

#define SYNTAX_ERROR "syntax error (expected [section] or key = value)"

static bool has_error_at(const parse_state *st, int line)
{
    for (size_t i = 0; i < st->n_errors; i++)
        if (st->errors[i].line == line)
            return true;
    return false;
}

__attribute__((format(printf, 4, 5))) static int fail(parse_state *st,
                                                      const char *section,
                                                      const char *key,
                                                      const char *fmt, ...)
{
    char what[CONFIG_WHY_MAX], text[CONFIG_WHY_MAX + 272];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(text, sizeof(text), "[%.127s] %.127s: %s", section, key, what);
    add_error(st, st->line, text);
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

static upstream_conf *upstream_section(parse_state *st, const char *name,
                                       seen_lines **ret_seen);

/* An [upstream NAME] header registers NAME even when no key follows (inih
 * calls the handler per key only): an empty section is an upstream of
 * [defaults], not one silently dropped. A bad name or one too many is
 * reported at its first key, as before; an empty one of those is not. */
static void note_upstream_header(parse_state *st)
{
    seen_lines *seen;
    size_t n = strlen(SECTION_UPSTREAM_PREFIX);
    if (strncmp(st->section, SECTION_UPSTREAM_PREFIX, n) == 0 &&
        seg_name_valid(st->section + n))
        (void)upstream_section(st, st->section + n, &seen);
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
    /* inih reports only its first bad line; each is noted here, so that
     * every one is listed. */
    if (*start != '[') {
        const char *end = ini_scan(start, "=:");
        if (*end == '=' || *end == ':')
            st->after_key = true;
        else
            add_error(st, st->line, SYNTAX_ERROR);
        return;
    }
    const char *end = ini_scan(start + 1, "]");
    if (*end != ']') {
        add_error(st, st->line, SYNTAX_ERROR);
        return;
    }
    size_t n = (size_t)(end - start - 1);
    if (n >= sizeof(st->section))
        n = sizeof(st->section) - 1; /* still too long for any section */
    memcpy(st->section, start + 1, n);
    st->section[n] = '\0';
    st->after_key = false;
    st->header_line = st->line;
    /* [fleet] turns the tier on even with no key under it (then finish()
     * says redis is missing); the first header is the one named. */
    if (strcmp(st->section, SECTION_FLEET) == 0 && st->fleet_header == 0)
        st->fleet_header = st->line;
    note_upstream_header(st);
}

/* The whole name of the section inih calls @p section. */
static const char *whole_section(const parse_state *st, const char *section)
{
    size_t n = strlen(section);
    if (n == INI_MAX_SECTION - 1 && strncmp(st->section, section, n) == 0)
        return st->section;
    return section;
}

/* Record a reader's error (it ends the file: nothing after it is read). */
static char *read_error(parse_state *st, const char *what)
{
    add_error(st, st->line, what);
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
        return 1; /* an unknown key is the handler's to report */
    if (seen->key[i] != 0)
        return fail(st, section, key, "set twice (first at line %d)",
                    seen->key[i]);
    seen->key[i] = st->line;
    return 1;
}

/* Limit @p i above the value of key @p of (the one it is part of), or, when
 * unset, @p dflt (at most that value). */
static int limit_within(config *c, const parse_state *st, size_t i, size_t of,
                        uint32_t dflt, char *err, size_t err_len)
{
    const config_key *k = &config_keys[i];
    uint32_t *v = config_key_field(k, c);
    uint32_t max = *(uint32_t *)config_key_field(&config_keys[of], c);
    if (st->seen_daemon.key[i] == 0) {
        *v = dflt < max ? dflt : max;
        return 0;
    }
    if (*v <= max)
        return 0;
    snprintf(err, err_len, "%s:%d: [%s] %s: %u is more than %s (%u)", c->path,
             st->seen_daemon.key[i], SECTION_DAEMON, k->key, *v,
             config_keys[of].key, max);
    return RETRYD_ECONFIG;
}

/*
 * The limits whose default or bound is another key's value: slots per uid
 * by process_capacity (by default half of it, but at least 16 or all of
 * them), connections per process by those per uid (by default 8), by those
 * of the pool (by default half of it).
 */
static int limits_finish(config *c, const parse_state *st, char *err,
                         size_t err_len)
{
    uint32_t half = c->process_capacity / 2;
    uint32_t quarter = c->upstream_capacity / 4;
    if (limit_within(c, st, CK_PROCESS_SLOTS_PER_UID, CK_PROCESS_CAPACITY,
                     half > 16 ? half : 16, err, err_len) < 0 ||
        limit_within(c, st, CK_UPSTREAMS_PER_UID, CK_UPSTREAM_CAPACITY,
                     quarter > 16 ? quarter : 16, err, err_len) < 0 ||
        limit_within(c, st, CK_CONNECTIONS_PER_UID, CK_CONNECTIONS_UNATTACHED,
                     c->connections_unattached / 2, err, err_len) < 0 ||
        limit_within(c, st, CK_CONNECTIONS_PER_PROCESS, CK_CONNECTIONS_PER_UID,
                     c->connections_per_process, err, err_len) < 0)
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

/* The upstream named @p name, a new one the first time; its unset keys
 * take the [defaults] known when the file is done (finish()). */
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
    return u;
}

/* Whether @p name can be a program's label: what /proc/PID/comm holds,
 * 1..15 printable bytes (the daemon writes any other byte as '?'). */
static bool program_name_valid(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] >= 0x7f)
            return false;
    return n >= 1 && n <= CONFIG_PROGRAM_NAME_MAX;
}

/* The [program NAME] section's struct, a new one the first time. */
static program_conf *program_section(parse_state *st, const char *section,
                                     const char *key, seen_lines **ret_seen)
{
    config *c = st->cfg;
    const char *name = section + strlen(SECTION_PROGRAM_PREFIX);
    if (!program_name_valid(name)) {
        fail(st, section, key,
             "program name '%s' must be 1..%d printable bytes, as "
             "/proc/PID/comm gives it",
             name, CONFIG_PROGRAM_NAME_MAX);
        return NULL;
    }
    for (size_t i = 0; i < c->n_programs; i++)
        if (strcmp(c->programs[i].name, name) == 0) {
            *ret_seen = &st->seen_programs[i];
            return &c->programs[i];
        }
    if (c->n_programs == CONFIG_MAX_PROGRAMS) {
        fail(st, section, key, "more than %d [program] sections",
             CONFIG_MAX_PROGRAMS);
        return NULL;
    }
    size_t i = c->n_programs++;
    *ret_seen = memset(&st->seen_programs[i], 0, sizeof(**ret_seen));
    program_conf *pc = &c->programs[i];
    snprintf(pc->name, sizeof(pc->name), "%s", name);
    pc->weight_micro = CONFIG_DEFAULT_WEIGHT_MICRO;
    return pc;
}

/*
 * The section inih calls @p section: the struct its keys fill, the lines
 * seen in it and its kind; NULL when it is no section of ours (the reason
 * recorded).
 */
static void *section_of(parse_state *st, const char *section, const char *key,
                        seen_lines **ret_seen, config_section *ret_kind)
{
    *ret_kind = CONFIG_SECTION_PARAMS;
    if (strcmp(section, SECTION_DAEMON) == 0) {
        *ret_kind = CONFIG_SECTION_DAEMON;
        *ret_seen = &st->seen_daemon;
        return st->cfg;
    }
    if (strcmp(section, SECTION_DEFAULTS) == 0) {
        *ret_seen = &st->seen_defaults;
        return &st->cfg->defaults;
    }
    if (strcmp(section, SECTION_FLEET) == 0) {
        *ret_kind = CONFIG_SECTION_FLEET;
        *ret_seen = &st->seen_fleet;
        return st->cfg;
    }
    if (strncmp(section, SECTION_PROGRAM_PREFIX,
                strlen(SECTION_PROGRAM_PREFIX)) == 0) {
        *ret_kind = CONFIG_SECTION_PROGRAM;
        return program_section(st, section, key, ret_seen);
    }
    if (strncmp(section, SECTION_UPSTREAM_PREFIX,
                strlen(SECTION_UPSTREAM_PREFIX)) != 0) {
        fail(st, section, key, "unknown section [%s]", section);
        return NULL;
    }
    const char *name = section + strlen(SECTION_UPSTREAM_PREFIX);
    if (!seg_name_valid(name)) {
        fail(st, section, key,
             "upstream name '%s' must be 1..%u printable bytes", name,
             SEG_NAME_MAX);
        return NULL;
    }
    upstream_conf *u = upstream_section(st, name, ret_seen);
    if (u == NULL) {
        fail(st, section, key, "%s", "too many upstreams");
        return NULL;
    }
    return &u->params;
}

static int handler(void *user, const char *section, const char *key,
                   const char *value)
{
    parse_state *st = user;
    seen_lines *seen = NULL;
    config_section kind;
    char why[CONFIG_WHY_MAX];

    section = whole_section(st, section);
    void *base = section_of(st, section, key, &seen, &kind);
    if (base == NULL)
        return 0;
    int i = config_key_find(kind, key);
    if (!note_key_at(st, section, seen, i, key))
        return 0;
    if (i < 0)
        return fail(st, section, key, "%s", "unknown key");
    const config_key *k = &config_keys[i];
    if (k->parse(k, value, config_key_field(k, base), st->cfg, why) < 0)
        return fail(st, section, key, "%s", why);
    return 1;
}

/* The file name in @p path (as written: relative to @p dir unless
 * absolute) made a path, in place, within @p cap bytes; RETRYD_ECONFIG
 * when it does not fit. */
static int join(char *path, size_t cap, const char *dir)
{
    char joined[PATH_MAX];
    int n = path[0] == '/' ? snprintf(joined, cap, "%s", path)
                           : snprintf(joined, cap, "%s/%s", dir, path);
    if (n <= 0 || (size_t)n >= cap)
        return RETRYD_ECONFIG;
    memcpy(path, joined, (size_t)n + 1);
    return 0;
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
    const int *set = st->seen_daemon.key;
    const struct {
        const char *what;
        const char *path;
        int line; /* of its key, 0 for a default */
    } f[] = {
        {"control_socket", c->control_socket, set[CK_CONTROL_SOCKET]},
        {"stats_socket", c->stats_socket, set[CK_STATS_SOCKET]},
        {"segment", c->segment_path, set[CK_SEGMENT]},
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

/* The sockets' and the segment's paths, and the lock file's. */
static int finish_paths(config *c, char *err, size_t err_len)
{
    const char *dir = c->runtime_dir;
    if (join(c->control_socket, sizeof(c->control_socket), dir) < 0 ||
        join(c->stats_socket, sizeof(c->stats_socket), dir) < 0 ||
        join(c->segment_path, sizeof(c->segment_path), dir) < 0 ||
        snprintf(c->lock_path, sizeof(c->lock_path), "%s/retryd.lock", dir) >=
            (int)sizeof(c->lock_path)) {
        snprintf(err, err_len,
                 "%s: a socket or segment path is too long "
                 "(sockets: at most 107 bytes)",
                 c->path);
        return RETRYD_ECONFIG;
    }
    return 0;
}

/* What follows from the keys set and not: the group's defaults, and each
 * upstream's unset keys, the [defaults] ones. */
static void finish_unset(config *c, const parse_state *st)
{
    const int *set = st->seen_daemon.key;
    c->has_group = set[CK_GROUP] != 0;
    c->has_stats_group = set[CK_STATS_GROUP] != 0 || c->has_group;
    if (set[CK_STATS_GROUP] == 0 && c->has_group)
        c->stats_group = c->group;
    if (set[CK_ALLOW_GROUPS] == 0 && c->has_group)
        c->allow_groups[c->n_allow_groups++] = c->group;
    c->has_metrics = set[CK_METRICS_LISTEN] != 0;
    for (size_t i = 0; i < c->n_upstreams; i++)
        for (size_t k = 0; k < CK_COUNT; k++) {
            const config_key *key = &config_keys[k];
            if (key->section == CONFIG_SECTION_PARAMS &&
                st->seen_upstreams[i].key[k] == 0)
                memcpy(config_key_field(key, &c->upstreams[i].params),
                       config_key_field(key, &c->defaults), key->size);
        }
}

/* The first line that sets a fleet key of [defaults] or an upstream in
 * @p seen, 0 for none; its key in *@p ret_key. */
static int fleet_key_line(const seen_lines *seen, const char **ret_key)
{
    static const int keys[] = {CK_FLEET_MIN_RETRIES_PER_SEC, CK_FLEET_HEALTH,
                               CK_FLEET_PUSHBACK};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (seen->key[keys[i]] != 0) {
            *ret_key = config_keys[keys[i]].key;
            return seen->key[keys[i]];
        }
    return 0;
}

/* A fleet key with no [fleet] section would share nothing: said at its
 * line rather than ignored. */
static int fleet_keys_need_section(const config *c, const parse_state *st,
                                   char *err, size_t err_len)
{
    const char *key = NULL, *prefix = "", *section = SECTION_DEFAULTS;
    int line = fleet_key_line(&st->seen_defaults, &key);
    for (size_t i = 0; line == 0 && i < c->n_upstreams; i++) {
        line = fleet_key_line(&st->seen_upstreams[i], &key);
        prefix = SECTION_UPSTREAM_PREFIX;
        section = c->upstreams[i].name;
    }
    if (c->fleet.on || line == 0)
        return 0;
    snprintf(err, err_len,
             "%s:%d: [%s%s] %s: the fleet tier is off (no [fleet] section): "
             "add one naming redis, or remove the key (docs/fleet.md)",
             c->path, line, prefix, section, key);
    return RETRYD_ECONFIG;
}

static int finish(config *c, parse_state *st, char *err, size_t err_len)
{
    if (finish_paths(c, err, err_len) < 0 ||
        check_distinct(c, st, err, err_len) < 0 ||
        limits_finish(c, st, err, err_len) < 0 ||
        config_fleet_finish(c, st->fleet_header,
                            st->seen_fleet.key[CK_FLEET_REDIS] != 0, err,
                            err_len) < 0 ||
        fleet_keys_need_section(c, st, err, err_len) < 0)
        return RETRYD_ECONFIG;
    if (c->n_upstreams > c->upstream_capacity) {
        snprintf(err, err_len,
                 "%s: %zu upstreams configured, more than upstream_capacity "
                 "(%u): the segment could not hold them all",
                 c->path, c->n_upstreams, c->upstream_capacity);
        return RETRYD_ECONFIG;
    }
    finish_unset(c, st);
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

static int by_line(const void *a, const void *b)
{
    const struct config_error *x = a, *y = b;
    return (x->line > y->line) - (x->line < y->line);
}

/* Every mistake, one "PATH:LINE: what" per line in the order of the file,
 * as many as @p err holds, then how many more there were. */
static void format_errors(parse_state *st, const char *path, char *err,
                          size_t err_len)
{
    size_t used = 0, shown = 0;
    qsort(st->errors, st->n_errors, sizeof(st->errors[0]), by_line);
    err[0] = '\0';
    for (; shown < st->n_errors; shown++) {
        int n = snprintf(err + used, err_len - used, "%s%s:%d: %s",
                         shown ? "\n" : "", path, st->errors[shown].line,
                         st->errors[shown].text);
        if (n < 0 || (size_t)n >= err_len - used - 40) {
            err[used] = '\0'; /* room left for the count below */
            break;
        }
        used += (size_t)n;
    }
    size_t more = st->n_errors - shown + st->n_unlisted;
    if (more > 0 && used < err_len)
        snprintf(err + used, err_len - used, "%s(and %zu more mistakes)",
                 shown ? "\n" : "", more);
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
    config_keys_set_defaults(c);

    st.file = open_regular(path, err, err_len);
    if (st.file == NULL) {
        config_free(c);
        return RETRYD_ECONFIG;
    }
    r = ini_parse_stream(read_line, &st, handler, &st);
    fclose(st.file);
    if (r == -2) {
        snprintf(err, err_len, "%s: out of memory", path);
    } else if (r > 0 || st.n_errors > 0) {
        /* inih names only the first line that failed, ours or its own: a
         * line none of ours is its syntax error. */
        if (r > 0 && !has_error_at(&st, r))
            add_error(&st, r, SYNTAX_ERROR);
        format_errors(&st, path, err, err_len);
    } else if (finish(c, &st, err, err_len) == 0) {
        free(st.seen_upstreams);
        *ret = c;
        return 0;
    }
    free(st.seen_upstreams);
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

uint64_t config_weight_for(const config *c, const char *name)
{
    for (size_t i = 0; i < c->n_programs; i++)
        if (strcmp(c->programs[i].name, name) == 0)
            return c->programs[i].weight_micro;
    return CONFIG_DEFAULT_WEIGHT_MICRO;
}

const budget_params *config_params_for(const config *c, const char *name)
{
    for (size_t i = 0; i < c->n_upstreams; i++)
        if (strcmp(c->upstreams[i].name, name) == 0)
            return &c->upstreams[i].params;
    return &c->defaults;
}

/* SPDX-License-Identifier: MIT */
/* Counters of the test servers and their control protocol.
 *
 * Everything a test asserts on ("how often did the server execute request
 * X, with which body and keys") lives here, behind one mutex. The servers
 * update the counters before they write anything that lets the client see
 * the outcome (a response, a close, a reset, an HTTP/2 frame), so by the
 * time the client has its result, the counters already say so.
 *
 * Control protocol (control port, one command per line, one reply line
 * per command, any number of commands per connection):
 *   COUNT <id>        executions of id
 *   REJECTS <id>      requests of id refused for their credentials
 *                     (faultsrv's /auth; always 0 on h2srv)
 *   LOG <id>          "0", or per execution, in order, separated by " ; ":
 *                     "<n> <method> <bodylen> <fnv1a64-hex16> <idem> <auth>"
 *                     (Idempotency-Key / Authorization percent-encoded so
 *                     they contain no space or ';'; "-" when absent),
 *                     followed by " <tag>" when the server records one
 *                     (h2srv: the protocol), then " cookie: <value>"
 *                     (percent-encoded) when the request had a Cookie
 *   CONNS             HTTP connections accepted so far
 *   ACTIVE            HTTP connections currently open
 *   IDLE <ms>         waits up to ms until ACTIVE is 0 -> OK | TIMEOUT <n>
 *   WAIT <n> <ms> <id> waits up to ms until COUNT id >= n -> <count>
 *   MODE accept-close|normal  accept-close: close each new HTTP connection
 *                     right after accept, before reading anything -> OK
 *   RESET             clears counters, logs and CONNS -> OK (MODE stays)
 *   FLIP <status>     what faultsrv's /flip answers from now on (200-599;
 *                     200 at start): an upstream that fails and heals
 *                     without its clients changing a thing -> OK
 *   SCALE <percent>   faultsrv's /tail holds every request this many per
 *                     cent of its base latency (1-100000; 100 at start):
 *                     an upstream that browns out and recovers -> OK
 *   the server's own  see its srv_ops.commands (h2srv: REFUSED, STREAMS)
 *   anything else     ERR <reason> */
#include "srv_common.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUCKETS 64
#define WAIT_MAX_MS 600000 /* IDLE and WAIT never block longer */

struct exec_rec {
    char method[32];
    size_t body_len;
    uint64_t body_fnv;
    char *idempotency_key; /* NULL: absent */
    char *authorization;   /* NULL: absent */
    char *cookie;          /* NULL: absent */
    char tag[16];          /* "": none; h2srv: "h2:<stream>", "http/1.1" */
    int64_t at_ms;         /* when it arrived (CLOCK_MONOTONIC) */
};

struct id_rec {
    struct id_rec *next;
    char *id;
    long tally[SRV_TALLIES];
    struct exec_rec *log; /* executions, in order */
    size_t n, cap;
};

struct srv_stats {
    pthread_mutex_t mu;
    /* Broadcast on every execution, tally, connection close and stop, for
     * the IDLE and WAIT commands (bounded server-side waits instead of
     * client polling). */
    pthread_cond_t changed;
    struct id_rec *buckets[BUCKETS];
    unsigned long conn_seq; /* connection ordinals, never reset */
    long conns;             /* HTTP connections accepted since start or RESET */
    long active;            /* HTTP connections currently open */
    long counter[SRV_COUNTERS];
    bool stopping;
};

/* FNV-1a 64: the body checksum of LOG, and the id hash. */
static uint64_t fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* --- the store ------------------------------------------------------------ */

struct srv_stats *srv_stats_new(void)
{
    struct srv_stats *st = calloc(1, sizeof *st);
    pthread_condattr_t attr;

    if (!st)
        return NULL;
    pthread_mutex_init(&st->mu, NULL);
    /* CLOCK_MONOTONIC: a wait must not stretch when the wall clock jumps. */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&st->changed, &attr);
    pthread_condattr_destroy(&attr);
    return st;
}

static void free_ids(struct srv_stats *st)
{
    for (size_t b = 0; b < BUCKETS; b++) {
        struct id_rec *r = st->buckets[b];

        while (r) {
            struct id_rec *next = r->next;

            for (size_t i = 0; i < r->n; i++) {
                free(r->log[i].idempotency_key);
                free(r->log[i].authorization);
                free(r->log[i].cookie);
            }
            free(r->log);
            free(r->id);
            free(r);
            r = next;
        }
        st->buckets[b] = NULL;
    }
}

void srv_stats_free(struct srv_stats *st)
{
    if (!st)
        return;
    free_ids(st);
    pthread_cond_destroy(&st->changed);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* Called with st->mu held. NULL when absent (and !add) or out of memory. */
static struct id_rec *find_id(struct srv_stats *st, const char *id, bool add)
{
    size_t b = fnv1a64(id, strlen(id)) % BUCKETS;
    struct id_rec *r;

    for (r = st->buckets[b]; r; r = r->next)
        if (strcmp(r->id, id) == 0)
            return r;
    if (!add)
        return NULL;
    r = calloc(1, sizeof *r);
    if (!r || !(r->id = strdup(id))) {
        free(r);
        return NULL;
    }
    r->next = st->buckets[b];
    st->buckets[b] = r;
    return r;
}

/* Called with st->mu held: room for one more log entry. */
static bool grow_log(struct id_rec *r)
{
    if (r->n < r->cap)
        return true;
    size_t cap = r->cap ? 2 * r->cap : 4;
    struct exec_rec *log = realloc(r->log, cap * sizeof *log);
    if (!log)
        return false;
    r->log = log;
    r->cap = cap;
    return true;
}

static char *strdup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Records one execution of request r (its id must be resolved); tag is
 * NULL or one more LOG field. Returns its 1-based ordinal among the
 * executions of that id (what faultsrv's /seq and /once425 answer by), or
 * -ENOMEM. */
long srv_stats_execute(struct srv_stats *st, const struct srv_request *r,
                       const char *tag)
{
    struct exec_rec rec = {
        .body_len = r->body_len,
        .body_fnv = fnv1a64(r->body, r->body_len),
        .idempotency_key = strdup_or_null(r->idempotency_key),
        .authorization = strdup_or_null(r->authorization),
        .cookie = strdup_or_null(r->cookie),
        .at_ms = srv_now_ms(),
    };
    long n = -ENOMEM;

    snprintf(rec.method, sizeof rec.method, "%s", r->method);
    snprintf(rec.tag, sizeof rec.tag, "%s", tag ? tag : "");
    if ((r->idempotency_key && !rec.idempotency_key) ||
        (r->authorization && !rec.authorization) || (r->cookie && !rec.cookie))
        goto out;
    pthread_mutex_lock(&st->mu);
    struct id_rec *ir = find_id(st, r->id, true);
    if (ir && grow_log(ir)) {
        ir->log[ir->n++] = rec;
        n = (long)ir->n;
        pthread_cond_broadcast(&st->changed);
    }
    pthread_mutex_unlock(&st->mu);
out:
    if (n < 0) {
        free(rec.idempotency_key);
        free(rec.authorization);
        free(rec.cookie);
    }
    return n;
}

/* Adds one to tally `which` of `id` (SRV_TALLY_REJECTS, or the server's
 * own). Out of memory the count is lost: the test then fails loudly. */
void srv_stats_tally(struct srv_stats *st, const char *id, int which)
{
    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, true);
    if (r)
        r->tally[which]++;
    pthread_cond_broadcast(&st->changed);
    pthread_mutex_unlock(&st->mu);
}

/* True exactly once per id and tally (until RESET), atomically: for "only
 * the first request of an id" (h2srv's /refuse-once), so that two
 * concurrent first requests cannot both be it. */
bool srv_stats_claim(struct srv_stats *st, const char *id, int which)
{
    bool first = false;

    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, true);
    if (r && r->tally[which] == 0) {
        r->tally[which] = 1;
        first = true;
    }
    pthread_mutex_unlock(&st->mu);
    return first;
}

/* Adds one to the server's global counter `which`. */
void srv_stats_count(struct srv_stats *st, int which)
{
    pthread_mutex_lock(&st->mu);
    st->counter[which]++;
    pthread_mutex_unlock(&st->mu);
}

/* Called by the accepting thread, before the connection's own thread
 * exists, so IDLE can never miss a connection that was accepted.
 * Returns the connection's ordinal (for stderr notes). */
unsigned long srv_stats_conn_accepted(struct srv_stats *st, bool active)
{
    unsigned long num;

    pthread_mutex_lock(&st->mu);
    num = ++st->conn_seq;
    st->conns++;
    if (active)
        st->active++;
    pthread_mutex_unlock(&st->mu);
    return num;
}

/* Called after the connection's socket is closed. */
void srv_stats_conn_closed(struct srv_stats *st)
{
    pthread_mutex_lock(&st->mu);
    st->active--;
    pthread_cond_broadcast(&st->changed);
    pthread_mutex_unlock(&st->mu);
}

/* Wakes IDLE/WAIT waiters for good: the server is shutting down. */
void srv_stats_stop(struct srv_stats *st)
{
    pthread_mutex_lock(&st->mu);
    st->stopping = true;
    pthread_cond_broadcast(&st->changed);
    pthread_mutex_unlock(&st->mu);
}

/* --- bounded waits -------------------------------------------------------- */

static struct timespec deadline_after(long ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Waits on st->changed once; false when the deadline has passed or the
 * server is stopping. Called with st->mu held; callers re-check their
 * condition in a loop (spurious wakeups). */
static bool wait_changed(struct srv_stats *st, const struct timespec *deadline)
{
    struct timespec now;

    if (st->stopping)
        return false;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > deadline->tv_sec ||
        (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec))
        return false;
    /* ETIMEDOUT needs no handling: the next call sees the deadline. */
    pthread_cond_timedwait(&st->changed, &st->mu, deadline);
    return !st->stopping;
}

/* --- replies -------------------------------------------------------------- */

/* A growable reply line: LOG can be long. On allocation failure `failed`
 * is set and the reply becomes an ERR line. */
struct sbuf {
    char *p;
    size_t len, cap;
    bool failed;
};

__attribute__((format(printf, 2, 3))) static void
sb_printf(struct sbuf *sb, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (sb->failed)
        return;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->failed = true;
        return;
    }
    if (sb->cap - sb->len <= (size_t)n) {
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap - sb->len <= (size_t)n)
            cap *= 2;
        char *p = realloc(sb->p, cap);
        if (!p) {
            sb->failed = true;
            return;
        }
        sb->p = p;
        sb->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(sb->p + sb->len, sb->cap - sb->len, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

/* Header values go into a space-separated line: percent-encode what would
 * break it (controls, space, ';', '%' itself). Absent or empty is "-". */
static void sb_field(struct sbuf *sb, const char *v)
{
    if (!v || !*v) {
        sb_printf(sb, " -");
        return;
    }
    sb_printf(sb, " ");
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p <= 0x20 || *p >= 0x7f || *p == ';' || *p == '%')
            sb_printf(sb, "%%%02X", *p);
        else
            sb_printf(sb, "%c", *p);
    }
}

/* --- commands --------------------------------------------------------------
 * Each gets the argument ("" when none) and writes its reply line. */

/* "<n>" for a per-id count: executions (which < 0) or a tally. */
static void reply_per_id(struct srv_stats *st, const char *id, int which,
                         struct sbuf *out)
{
    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, false);
    long v = !r ? 0 : which < 0 ? (long)r->n : r->tally[which];
    pthread_mutex_unlock(&st->mu);
    sb_printf(out, "%ld", v);
}

/* "<n>" for a global count: CONNS, ACTIVE, or a counter of the server. */
static void reply_scalar(struct srv_stats *st, const long *v, struct sbuf *out)
{
    pthread_mutex_lock(&st->mu);
    long n = *v;
    pthread_mutex_unlock(&st->mu);
    sb_printf(out, "%ld", n);
}

static void cmd_count(struct srv *srv, const char *arg, struct sbuf *out)
{
    reply_per_id(srv->stats, arg, -1, out);
}

static void cmd_rejects(struct srv *srv, const char *arg, struct sbuf *out)
{
    reply_per_id(srv->stats, arg, SRV_TALLY_REJECTS, out);
}

static void cmd_conns(struct srv *srv, const char *arg, struct sbuf *out)
{
    (void)arg;
    reply_scalar(srv->stats, &srv->stats->conns, out);
}

static void cmd_active(struct srv *srv, const char *arg, struct sbuf *out)
{
    (void)arg;
    reply_scalar(srv->stats, &srv->stats->active, out);
}

static void cmd_log(struct srv *srv, const char *id, struct sbuf *out)
{
    struct srv_stats *st = srv->stats;

    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, false);
    if (!r || r->n == 0)
        sb_printf(out, "0");
    for (size_t i = 0; r && i < r->n; i++) {
        const struct exec_rec *e = &r->log[i];

        sb_printf(out, "%s%zu %s %zu %016" PRIx64, i ? " ; " : "", i + 1,
                  e->method, e->body_len, e->body_fnv);
        sb_field(out, e->idempotency_key);
        sb_field(out, e->authorization);
        if (e->tag[0])
            sb_printf(out, " %s", e->tag);
        if (e->cookie) {
            sb_printf(out, " cookie:");
            sb_field(out, e->cookie);
        }
    }
    pthread_mutex_unlock(&st->mu);
}

/* TIMES <id>: when each execution of the id arrived, in CLOCK_MONOTONIC
 * milliseconds, in order ("0" for none): what a test measures a client's
 * waits between attempts by, on the server's side of the wire. */
static void cmd_times(struct srv *srv, const char *id, struct sbuf *out)
{
    struct srv_stats *st = srv->stats;

    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, false);
    if (!r || r->n == 0)
        sb_printf(out, "0");
    for (size_t i = 0; r && i < r->n; i++)
        sb_printf(out, "%s%" PRId64, i ? " " : "", r->log[i].at_ms);
    pthread_mutex_unlock(&st->mu);
}

static bool parse_ms(const char *s, long *ms)
{
    char *end;

    errno = 0;
    *ms = strtol(s, &end, 10);
    return !errno && end != s && *end == '\0' && *ms >= 0 && *ms <= WAIT_MAX_MS;
}

/* IDLE <ms>: wait until no HTTP connection is open. */
static void cmd_idle(struct srv *srv, const char *arg, struct sbuf *out)
{
    struct srv_stats *st = srv->stats;
    long ms;

    if (!parse_ms(arg, &ms)) {
        sb_printf(out, "ERR usage: IDLE <ms>");
        return;
    }
    struct timespec deadline = deadline_after(ms);
    pthread_mutex_lock(&st->mu);
    while (st->active > 0 && wait_changed(st, &deadline))
        ;
    if (st->active > 0)
        sb_printf(out, "TIMEOUT %ld", st->active);
    else
        sb_printf(out, "OK");
    pthread_mutex_unlock(&st->mu);
}

/* WAIT <n> <ms> <id>: wait until id has at least n executions. The id
 * comes last so that parsing never has to guess where it ends. */
static void cmd_wait(struct srv *srv, const char *arg, struct sbuf *out)
{
    struct srv_stats *st = srv->stats;
    long n, ms;
    int id_at = -1;

    if (sscanf(arg, "%ld %ld %n", &n, &ms, &id_at) != 2 || id_at < 0 ||
        !arg[id_at] || ms < 0 || ms > WAIT_MAX_MS) {
        sb_printf(out, "ERR usage: WAIT <n> <ms> <id>");
        return;
    }
    const char *id = arg + id_at;
    struct timespec deadline = deadline_after(ms);
    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, false);
    /* An id never seen has a count of 0: WAIT 0 returns at once. */
    while ((r ? (long)r->n : 0L) < n && wait_changed(st, &deadline))
        r = find_id(st, id, false);
    sb_printf(out, "%ld", r ? (long)r->n : 0L);
    pthread_mutex_unlock(&st->mu);
}

static void cmd_mode(struct srv *srv, const char *arg, struct sbuf *out)
{
    if (strcmp(arg, "accept-close") == 0)
        atomic_store(&srv->accept_close, true);
    else if (strcmp(arg, "normal") == 0)
        atomic_store(&srv->accept_close, false);
    else {
        sb_printf(out, "ERR usage: MODE accept-close|normal");
        return;
    }
    sb_printf(out, "OK");
}

static void cmd_flip(struct srv *srv, const char *arg, struct sbuf *out)
{
    long code;

    if (srv_parse_long(arg, 200, 599, &code) < 0) {
        sb_printf(out, "ERR usage: FLIP <status 200-599>");
        return;
    }
    atomic_store(&srv->flip_status, (int)code);
    sb_printf(out, "OK");
}

static void cmd_scale(struct srv *srv, const char *arg, struct sbuf *out)
{
    long pct;

    if (srv_parse_long(arg, 1, 100000, &pct) < 0) {
        sb_printf(out, "ERR usage: SCALE <percent 1-100000>");
        return;
    }
    atomic_store(&srv->latency_scale, (int)pct);
    sb_printf(out, "OK");
}

/* RESET: counters, logs, tallies, CONNS and the server's counters.
 * `active` is live state, not a counter: kept. */
static void cmd_reset(struct srv *srv, const char *arg, struct sbuf *out)
{
    struct srv_stats *st = srv->stats;

    (void)arg;
    pthread_mutex_lock(&st->mu);
    free_ids(st);
    st->conns = 0;
    memset(st->counter, 0, sizeof st->counter);
    pthread_mutex_unlock(&st->mu);
    sb_printf(out, "OK");
}

enum arg_rule { ARG_NONE, ARG_REQUIRED, ARG_ANY /* checked by the command */ };

static const struct {
    const char *verb;
    enum arg_rule arg;
    void (*run)(struct srv *srv, const char *arg, struct sbuf *out);
} common_commands[] = {
    {"COUNT", ARG_REQUIRED, cmd_count}, {"REJECTS", ARG_REQUIRED, cmd_rejects},
    {"LOG", ARG_REQUIRED, cmd_log},     {"CONNS", ARG_NONE, cmd_conns},
    {"ACTIVE", ARG_NONE, cmd_active},   {"IDLE", ARG_ANY, cmd_idle},
    {"WAIT", ARG_ANY, cmd_wait},        {"MODE", ARG_ANY, cmd_mode},
    {"RESET", ARG_NONE, cmd_reset},     {"TIMES", ARG_REQUIRED, cmd_times},
    {"FLIP", ARG_REQUIRED, cmd_flip},   {"SCALE", ARG_REQUIRED, cmd_scale},
};

static bool arg_fits(enum arg_rule rule, const char *arg)
{
    return rule == ARG_ANY || (rule == ARG_REQUIRED) == (*arg != '\0');
}

/* A command from the server's srv_ops.commands. False if there is none
 * by that name taking that argument. */
static bool run_own_command(struct srv *srv, const char *verb, const char *arg,
                            struct sbuf *out)
{
    for (size_t i = 0; i < srv->ops->n_commands; i++) {
        const struct srv_command *c = &srv->ops->commands[i];

        if (strcmp(verb, c->verb) != 0 ||
            !arg_fits(c->per_id ? ARG_REQUIRED : ARG_NONE, arg))
            continue;
        if (c->per_id)
            reply_per_id(srv->stats, arg, c->which, out);
        else
            reply_scalar(srv->stats, &srv->stats->counter[c->which], out);
        return true;
    }
    return false;
}

/* Runs one command line; the reply (without newline) goes to out. */
static void control_execute(struct srv *srv, char *line, struct sbuf *out)
{
    char *arg = strchr(line, ' ');

    if (arg)
        *arg++ = '\0';
    else
        arg = line + strlen(line); /* "" */
    for (size_t i = 0; i < sizeof common_commands / sizeof *common_commands;
         i++) {
        if (strcmp(line, common_commands[i].verb) == 0 &&
            arg_fits(common_commands[i].arg, arg)) {
            common_commands[i].run(srv, arg, out);
            return;
        }
    }
    if (!run_own_command(srv, line, arg, out))
        sb_printf(out, "ERR unknown command or missing argument: %s", line);
}

/* Serves one control connection: one reply line per command line, until
 * the client closes it or the server stops. */
void srv_control_serve(struct srv_conn *c)
{
    for (;;) {
        struct sbuf out = {0};
        char *line;
        size_t len;
        int r = srv_read_line(c, SRV_CTL_LINE_MAX, &line, &len);

        if (r == -EMSGSIZE) {
            static const char msg[] = "ERR line too long\n";

            srv_write_all(c, msg, sizeof msg - 1);
            return;
        }
        if (r < 0)
            return;
        control_execute(c->srv, line, &out);
        if (out.failed) {
            free(out.p);
            out = (struct sbuf){0};
            sb_printf(&out, "ERR out of memory");
        }
        sb_printf(&out, "\n");
        r = out.failed ? -ENOMEM : srv_write_all(c, out.p, out.len);
        free(out.p);
        if (r < 0)
            return;
    }
}

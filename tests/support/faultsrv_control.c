/* Counters of retryd-faultsrv and its control protocol.
 *
 * Everything a test asserts on ("how often did the server execute request
 * X, with which body and keys") lives here, behind one mutex. Counters are
 * updated before the server writes anything back, so by the time a client
 * observes a response, a close or a reset, the counters already say so. */
#include "faultsrv.h"

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
};

struct id_rec {
    struct id_rec *next;
    char *id;
    long rejects;         /* 401s of /auth */
    struct exec_rec *log; /* executions, in order */
    size_t n, cap;
};

struct fs_stats {
    pthread_mutex_t mu;
    /* Broadcast on every execution, connection close and stop, for the
     * IDLE and WAIT commands (bounded waits instead of client polling). */
    pthread_cond_t changed;
    struct id_rec *buckets[BUCKETS];
    long conns;  /* HTTP connections accepted since start or RESET */
    long active; /* HTTP connections currently open */
    bool stopping;
};

/* --- counters ----------------------------------------------------------- */

struct fs_stats *fs_stats_new(void)
{
    struct fs_stats *st = calloc(1, sizeof *st);
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

static void free_ids(struct fs_stats *st)
{
    for (size_t b = 0; b < BUCKETS; b++) {
        struct id_rec *r = st->buckets[b];

        while (r) {
            struct id_rec *next = r->next;

            for (size_t i = 0; i < r->n; i++) {
                free(r->log[i].idempotency_key);
                free(r->log[i].authorization);
            }
            free(r->log);
            free(r->id);
            free(r);
            r = next;
        }
        st->buckets[b] = NULL;
    }
}

void fs_stats_free(struct fs_stats *st)
{
    if (!st)
        return;
    free_ids(st);
    pthread_cond_destroy(&st->changed);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

static struct id_rec *find_id(struct fs_stats *st, const char *id, bool add)
{
    size_t b = fs_fnv1a64(id, strlen(id)) % BUCKETS;
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

static char *strdup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Records one execution of request `id`. Returns its 1-based ordinal among
 * the executions of that id (what /seq and /once425 answer by), or
 * -ENOMEM. */
long fs_stats_execute(struct fs_stats *st, const char *id,
                      const struct fs_exec *e)
{
    struct exec_rec rec = {
        .body_len = e->body_len,
        .body_fnv = e->body_fnv,
        .idempotency_key = strdup_or_null(e->idempotency_key),
        .authorization = strdup_or_null(e->authorization),
    };
    long n = -ENOMEM;

    snprintf(rec.method, sizeof rec.method, "%s", e->method);
    if ((e->idempotency_key && !rec.idempotency_key) ||
        (e->authorization && !rec.authorization))
        goto out;
    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, true);
    if (r && r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 4;
        struct exec_rec *log = realloc(r->log, cap * sizeof *log);

        if (log) {
            r->log = log;
            r->cap = cap;
        }
    }
    if (r && r->n < r->cap) {
        r->log[r->n++] = rec;
        n = (long)r->n;
        pthread_cond_broadcast(&st->changed);
    }
    pthread_mutex_unlock(&st->mu);
out:
    if (n < 0) {
        free(rec.idempotency_key);
        free(rec.authorization);
    }
    return n;
}

void fs_stats_reject(struct fs_stats *st, const char *id)
{
    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, true);
    if (r)
        r->rejects++;
    pthread_mutex_unlock(&st->mu);
}

/* Called by the accepting thread, before the connection's own thread
 * exists, so IDLE can never miss a connection that was accepted. */
void fs_stats_conn_accepted(struct fs_stats *st, bool active)
{
    pthread_mutex_lock(&st->mu);
    st->conns++;
    if (active)
        st->active++;
    pthread_mutex_unlock(&st->mu);
}

/* Called after the connection's socket is closed. */
void fs_stats_conn_closed(struct fs_stats *st)
{
    pthread_mutex_lock(&st->mu);
    st->active--;
    pthread_cond_broadcast(&st->changed);
    pthread_mutex_unlock(&st->mu);
}

/* Wakes IDLE/WAIT waiters for good: the server is shutting down. */
void fs_stats_stop(struct fs_stats *st)
{
    pthread_mutex_lock(&st->mu);
    st->stopping = true;
    pthread_cond_broadcast(&st->changed);
    pthread_mutex_unlock(&st->mu);
}

/* Waits on st->changed until the deadline; false once it has passed or
 * the server is stopping. Called with st->mu held. */
static bool wait_changed(struct fs_stats *st, const struct timespec *deadline)
{
    if (st->stopping)
        return false;
    /* ETIMEDOUT needs no handling: the caller re-checks the deadline. */
    pthread_cond_timedwait(&st->changed, &st->mu, deadline);
    return !st->stopping;
}

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

static bool passed(const struct timespec *deadline)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline->tv_sec ||
           (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
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
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(sb->p ? sb->p + sb->len : NULL,
                      sb->p ? sb->cap - sb->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            sb->failed = true;
            return;
        }
        if (sb->p && sb->len + (size_t)n < sb->cap) {
            sb->len += (size_t)n;
            return;
        }
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap <= sb->len + (size_t)n)
            cap *= 2;
        char *p = realloc(sb->p, cap);
        if (!p) {
            sb->failed = true;
            return;
        }
        sb->p = p;
        sb->cap = cap;
    }
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

static void cmd_count(struct fs_stats *st, const char *id, bool rejects,
                      struct sbuf *out)
{
    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, false);
    long v = !r ? 0 : rejects ? r->rejects : (long)r->n;
    pthread_mutex_unlock(&st->mu);
    sb_printf(out, "%ld", v);
}

static void cmd_log(struct fs_stats *st, const char *id, struct sbuf *out)
{
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
    }
    pthread_mutex_unlock(&st->mu);
}

static bool parse_ms(const char *s, long *ms)
{
    char *end;

    errno = 0;
    *ms = strtol(s, &end, 10);
    return !errno && end != s && (*end == '\0' || *end == ' ') && *ms >= 0 &&
           *ms <= WAIT_MAX_MS;
}

/* IDLE <ms>: wait until no HTTP connection is open. */
static void cmd_idle(struct fs_stats *st, const char *arg, struct sbuf *out)
{
    long ms;

    if (!parse_ms(arg, &ms)) {
        sb_printf(out, "ERR usage: IDLE <ms>");
        return;
    }
    struct timespec deadline = deadline_after(ms);
    pthread_mutex_lock(&st->mu);
    while (st->active > 0 && !passed(&deadline) && wait_changed(st, &deadline))
        ;
    if (st->active > 0)
        sb_printf(out, "TIMEOUT %ld", st->active);
    else
        sb_printf(out, "OK");
    pthread_mutex_unlock(&st->mu);
}

/* WAIT <n> <ms> <id>: wait until id has at least n executions. The id comes
 * last because it may contain anything but control characters. */
static void cmd_wait(struct fs_stats *st, const char *arg, struct sbuf *out)
{
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
    while ((!r || (long)r->n < n) && !passed(&deadline) &&
           wait_changed(st, &deadline))
        r = find_id(st, id, false);
    sb_printf(out, "%ld", r ? (long)r->n : 0L);
    pthread_mutex_unlock(&st->mu);
}

static void cmd_reset(struct fs_stats *st, struct sbuf *out)
{
    pthread_mutex_lock(&st->mu);
    free_ids(st);
    st->conns = 0; /* `active` is live state, not a counter: kept */
    pthread_mutex_unlock(&st->mu);
    sb_printf(out, "OK");
}

static void cmd_scalar(struct fs_stats *st, bool active, struct sbuf *out)
{
    pthread_mutex_lock(&st->mu);
    long v = active ? st->active : st->conns;
    pthread_mutex_unlock(&st->mu);
    sb_printf(out, "%ld", v);
}

static void cmd_mode(struct fs_server *srv, const char *arg, struct sbuf *out)
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

/* Runs one command line; the reply (without newline) goes to out. */
static void control_execute(struct fs_server *srv, char *line, struct sbuf *out)
{
    struct fs_stats *st = srv->stats;
    char *arg = strchr(line, ' ');

    if (arg)
        *arg++ = '\0';
    else
        arg = line + strlen(line); /* "" */

    if (strcmp(line, "COUNT") == 0 && *arg)
        cmd_count(st, arg, false, out);
    else if (strcmp(line, "REJECTS") == 0 && *arg)
        cmd_count(st, arg, true, out);
    else if (strcmp(line, "LOG") == 0 && *arg)
        cmd_log(st, arg, out);
    else if (strcmp(line, "CONNS") == 0 && !*arg)
        cmd_scalar(st, false, out);
    else if (strcmp(line, "ACTIVE") == 0 && !*arg)
        cmd_scalar(st, true, out);
    else if (strcmp(line, "IDLE") == 0)
        cmd_idle(st, arg, out);
    else if (strcmp(line, "WAIT") == 0)
        cmd_wait(st, arg, out);
    else if (strcmp(line, "MODE") == 0)
        cmd_mode(srv, arg, out);
    else if (strcmp(line, "RESET") == 0 && !*arg)
        cmd_reset(st, out);
    else
        sb_printf(out, "ERR unknown command or missing argument: %s", line);
}

/* Serves one control connection: one reply line per command line, until
 * the client closes it or the server stops. */
void fs_control_serve(struct fs_conn *c)
{
    for (;;) {
        struct sbuf out = {0};
        char *line;
        size_t len;
        int r = fs_read_line(c, FS_CTL_LINE_MAX, &line, &len);

        if (r == -EMSGSIZE) {
            static const char msg[] = "ERR line too long\n";

            fs_write_all(c, msg, sizeof msg - 1);
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
        r = out.failed ? -ENOMEM : fs_write_all(c, out.p, out.len);
        free(out.p);
        if (r < 0)
            return;
    }
}

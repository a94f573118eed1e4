/* Counters of retryd-h2srv and its control protocol.
 *
 * Everything a test asserts on ("how often did the server execute request
 * X, how many streams did it refuse") lives here, behind one mutex.
 * Counters are updated before the server writes the frames that let the
 * client see the outcome (a response, a RST_STREAM, a GOAWAY), so by the
 * time the client has its result, the counters already say so. */
#include "h2srv.h"

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
    char proto[16];        /* "h2:<stream>" or "http/1.1" */
};

struct id_rec {
    struct id_rec *next;
    char *id;
    long refused;          /* streams told "not processed" */
    bool refuse_once_used; /* /refuse-once already refused one */
    struct exec_rec *log;  /* executions, in order */
    size_t n, cap;
};

struct h2_stats {
    pthread_mutex_t mu;
    /* Broadcast on every execution, refusal, connection close and stop,
     * for the IDLE and WAIT commands (bounded server-side waits instead of
     * client polling). */
    pthread_cond_t changed;
    struct id_rec *buckets[BUCKETS];
    unsigned long conn_seq; /* connection ordinals, never reset */
    long conns;             /* HTTP connections accepted since start or RESET */
    long active;            /* HTTP connections currently open */
    long streams; /* HTTP/2 request streams opened since start or RESET */
    bool stopping;
};

/* --- counters ----------------------------------------------------------- */

struct h2_stats *h2_stats_new(void)
{
    struct h2_stats *st = calloc(1, sizeof *st);
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

static void free_ids(struct h2_stats *st)
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

void h2_stats_free(struct h2_stats *st)
{
    if (!st)
        return;
    free_ids(st);
    pthread_cond_destroy(&st->changed);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* Called with st->mu held. NULL when absent (and !add) or out of memory. */
static struct id_rec *find_id(struct h2_stats *st, const char *id, bool add)
{
    size_t b = h2_fnv1a64(id, strlen(id)) % BUCKETS;
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

/* Records one execution of request `id`. Returns its 1-based ordinal
 * among the executions of that id, or -ENOMEM. */
long h2_stats_execute(struct h2_stats *st, const char *id,
                      const struct h2_exec *e)
{
    struct exec_rec rec = {
        .body_len = e->body_len,
        .body_fnv = e->body_fnv,
        .idempotency_key = strdup_or_null(e->idempotency_key),
        .authorization = strdup_or_null(e->authorization),
    };
    long n = -ENOMEM;

    snprintf(rec.method, sizeof rec.method, "%s", e->method);
    if (e->stream_id > 0)
        snprintf(rec.proto, sizeof rec.proto, "%s:%" PRId32, e->proto,
                 e->stream_id);
    else
        snprintf(rec.proto, sizeof rec.proto, "%s", e->proto);
    if ((e->idempotency_key && !rec.idempotency_key) ||
        (e->authorization && !rec.authorization))
        goto out;
    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, true);
    if (r && grow_log(r)) {
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

/* A stream of `id` was refused: the server told the client it was not
 * processed (REFUSED_STREAM, HTTP_1_1_REQUIRED, above a GOAWAY). */
void h2_stats_refused(struct h2_stats *st, const char *id)
{
    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, true);
    if (r)
        r->refused++;
    pthread_cond_broadcast(&st->changed);
    pthread_mutex_unlock(&st->mu);
}

/* For /refuse-once: true exactly once per id (until RESET), atomically,
 * so two concurrent first streams cannot both be refused. */
bool h2_stats_claim_refuse_once(struct h2_stats *st, const char *id)
{
    bool first = false;

    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, true);
    if (r && !r->refuse_once_used) {
        r->refuse_once_used = true;
        first = true;
    }
    pthread_mutex_unlock(&st->mu);
    return first;
}

void h2_stats_stream_opened(struct h2_stats *st)
{
    pthread_mutex_lock(&st->mu);
    st->streams++;
    pthread_mutex_unlock(&st->mu);
}

/* Called by the accepting thread, before the connection's own thread
 * exists, so IDLE can never miss a connection that was accepted.
 * Returns the connection's ordinal (for stderr notes). */
unsigned long h2_stats_conn_accepted(struct h2_stats *st, bool active)
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
void h2_stats_conn_closed(struct h2_stats *st)
{
    pthread_mutex_lock(&st->mu);
    st->active--;
    pthread_cond_broadcast(&st->changed);
    pthread_mutex_unlock(&st->mu);
}

/* Wakes IDLE/WAIT waiters for good: the server is shutting down. */
void h2_stats_stop(struct h2_stats *st)
{
    pthread_mutex_lock(&st->mu);
    st->stopping = true;
    pthread_cond_broadcast(&st->changed);
    pthread_mutex_unlock(&st->mu);
}

/* --- bounded waits ------------------------------------------------------- */

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
static bool wait_changed(struct h2_stats *st, const struct timespec *deadline)
{
    struct timespec now;

    if (st->stopping)
        return false;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > deadline->tv_sec ||
        (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec))
        return false;
    pthread_cond_timedwait(&st->changed, &st->mu, deadline);
    return !st->stopping;
}

/* --- replies ------------------------------------------------------------- */

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

/* --- commands ------------------------------------------------------------ */

enum per_id { PER_ID_COUNT, PER_ID_REFUSED };

static void cmd_per_id(struct h2_stats *st, const char *id, enum per_id what,
                       struct sbuf *out)
{
    pthread_mutex_lock(&st->mu);
    struct id_rec *r = find_id(st, id, false);
    long v = !r ? 0 : what == PER_ID_COUNT ? (long)r->n : r->refused;
    pthread_mutex_unlock(&st->mu);
    sb_printf(out, "%ld", v);
}

static void cmd_log(struct h2_stats *st, const char *id, struct sbuf *out)
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
        sb_printf(out, " %s", e->proto);
    }
    pthread_mutex_unlock(&st->mu);
}

enum scalar { SCALAR_CONNS, SCALAR_ACTIVE, SCALAR_STREAMS };

static void cmd_scalar(struct h2_stats *st, enum scalar which, struct sbuf *out)
{
    pthread_mutex_lock(&st->mu);
    long v = which == SCALAR_CONNS    ? st->conns
             : which == SCALAR_ACTIVE ? st->active
                                      : st->streams;
    pthread_mutex_unlock(&st->mu);
    sb_printf(out, "%ld", v);
}

static bool parse_ms(const char *s, long *ms)
{
    char *end;

    errno = 0;
    *ms = strtol(s, &end, 10);
    return !errno && end != s && *end == '\0' && *ms >= 0 && *ms <= WAIT_MAX_MS;
}

/* IDLE <ms>: wait until no HTTP connection is open. */
static void cmd_idle(struct h2_stats *st, const char *arg, struct sbuf *out)
{
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
 * comes last because it may contain anything but spaces and controls. */
static void cmd_wait(struct h2_stats *st, const char *arg, struct sbuf *out)
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
    while ((!r || (long)r->n < n) && wait_changed(st, &deadline))
        r = find_id(st, id, false);
    sb_printf(out, "%ld", r ? (long)r->n : 0L);
    pthread_mutex_unlock(&st->mu);
}

/* RESET: counters, logs, /refuse-once state, CONNS and STREAMS. `active`
 * is live state, not a counter: kept. */
static void cmd_reset(struct h2_stats *st, struct sbuf *out)
{
    pthread_mutex_lock(&st->mu);
    free_ids(st);
    st->conns = 0;
    st->streams = 0;
    pthread_mutex_unlock(&st->mu);
    sb_printf(out, "OK");
}

static void cmd_mode(struct h2_server *srv, const char *arg, struct sbuf *out)
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
static void control_execute(struct h2_server *srv, char *line, struct sbuf *out)
{
    struct h2_stats *st = srv->stats;
    char *arg = strchr(line, ' ');

    if (arg)
        *arg++ = '\0';
    else
        arg = line + strlen(line); /* "" */

    if (strcmp(line, "COUNT") == 0 && *arg)
        cmd_per_id(st, arg, PER_ID_COUNT, out);
    else if (strcmp(line, "REFUSED") == 0 && *arg)
        cmd_per_id(st, arg, PER_ID_REFUSED, out);
    else if (strcmp(line, "REJECTS") == 0 && *arg)
        sb_printf(out, "0"); /* no /auth here; kept for testsrv_rejects */
    else if (strcmp(line, "LOG") == 0 && *arg)
        cmd_log(st, arg, out);
    else if (strcmp(line, "CONNS") == 0 && !*arg)
        cmd_scalar(st, SCALAR_CONNS, out);
    else if (strcmp(line, "ACTIVE") == 0 && !*arg)
        cmd_scalar(st, SCALAR_ACTIVE, out);
    else if (strcmp(line, "STREAMS") == 0 && !*arg)
        cmd_scalar(st, SCALAR_STREAMS, out);
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

/* Returns in *line the next input line, NUL-terminated in place without
 * its LF or CR LF; valid until the next read. 0, -EMSGSIZE when longer
 * than H2_CTL_LINE_MAX, or a negative errno (EOF: -ENODATA). */
static int read_line(struct h2_conn *c, char **line)
{
    size_t scanned = 0;

    for (;;) {
        char *start = (char *)c->in + c->in_pos;
        size_t avail = c->in_len - c->in_pos;
        char *nl = memchr(start + scanned, '\n', avail - scanned);

        if (nl) {
            size_t l = (size_t)(nl - start);

            if (l + 1 > H2_CTL_LINE_MAX)
                return -EMSGSIZE;
            c->in_pos += l + 1;
            if (l > 0 && start[l - 1] == '\r')
                l--;
            start[l] = '\0';
            *line = start;
            return 0;
        }
        if (avail >= H2_CTL_LINE_MAX)
            return -EMSGSIZE;
        scanned = avail; /* offsets from the line start survive compaction */
        ssize_t r = h2_io_fill(c, -1);
        if (r == 0)
            return -ENODATA;
        if (r < 0)
            return (int)r;
    }
}

/* Serves one control connection: one reply line per command line, until
 * the client closes it or the server stops. */
void h2_control_serve(struct h2_conn *c)
{
    for (;;) {
        struct sbuf out = {0};
        char *line = NULL;
        int r = read_line(c, &line);

        if (r == -EMSGSIZE) {
            static const char msg[] = "ERR line too long\n";

            h2_io_write_all(c, msg, sizeof msg - 1);
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
        r = out.failed ? -ENOMEM : h2_io_write_all(c, out.p, out.len);
        free(out.p);
        if (r < 0)
            return;
    }
}

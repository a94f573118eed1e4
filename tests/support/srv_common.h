/* SPDX-License-Identifier: MIT */
/* What retryd's two fault-injecting test servers share: retryd-faultsrv
 * (HTTP/1.1) and retryd-h2srv (HTTP/2). Both have the same startup contract
 * (testsrv.h) and the same control protocol (srv_control.c), so that one
 * harness drives either; the code behind that lives here, once:
 *   srv_main.c     listening sockets, the PORT line, SIGTERM/SIGINT and
 *                  stdin EOF, the stop eventfd, a thread per connection
 *   srv_io.c       waits that also watch the stop eventfd, and a buffered
 *                  plain-socket connection (control connections; all of
 *                  faultsrv's HTTP)
 *   srv_control.c  per-id counters and execution log, control protocol
 *   srv_request.c  the request fields every server has (struct
 *                  srv_request), query parameters, request ids, HTTP/1.1
 *                  request and response heads, reason phrases
 * A server supplies a struct srv_ops (how to serve one HTTP connection,
 * its own setup and control commands), calls srv_main() from main(), and
 * keeps its protocol to itself.
 *
 * Tests never include this header: they talk to the servers over HTTP and
 * over the control port. */
#ifndef RETRYD_SRV_COMMON_H
#define RETRYD_SRV_COMMON_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Limits both servers apply: a test server must not be the thing that
 * falls over when a test (or a bug in the client under test) sends
 * something huge. */
#define SRV_ID_MAX 255                  /* request id, in bytes */
#define SRV_PARAM_MAX 256               /* one decoded query parameter */
#define SRV_BODY_MAX (16 * 1024 * 1024) /* request body */
#define SRV_HOLD_MAX_MS 3600000L        /* /hold?ms= upper bound */
#define SRV_IN_CAP (64 * 1024)          /* input buffer of a srv_conn */
#define SRV_CTL_LINE_MAX 4096           /* one control command */

/* Per-id counts kept besides the executions (srv_stats_tally): REJECTS is
 * part of the common protocol; the others belong to the server (h2srv:
 * REFUSED and /refuse-once). Global counts of the server's own:
 * SRV_COUNTERS (h2srv: STREAMS). All of them are cleared by RESET. */
#define SRV_TALLY_REJECTS 0 /* refused for lack of credentials (/auth) */
#define SRV_TALLY_OWN 1     /* the first index a server may use */
#define SRV_TALLIES 3
#define SRV_COUNTERS 1

struct srv;
struct srv_stats;

/* A control command of one server only that reads a count kept here:
 * "<verb> <id>" answers tally `which` of that id, "<verb>" (per_id false)
 * the global counter `which`. */
struct srv_command {
    const char *verb;
    bool per_id;
    int which;
};

/* What differs between the servers. */
struct srv_ops {
    const char *name; /* "faultsrv": the prefix of stderr lines */
    /* Serves one accepted HTTP connection on its own thread, and closes
     * fd (also when it fails). num: the connection's ordinal, from 1. */
    void (*serve_http)(struct srv *srv, int fd, unsigned long num);
    /* Optional: sets up the server's own state (srv->data) before the
     * PORT line, with srv_main's `arg`; 0, or -1 after saying why. And
     * its undoing, called whatever start returned (srv->data may be
     * NULL). */
    int (*start)(struct srv *srv, void *arg);
    void (*stop)(struct srv *srv);
    const struct srv_command *commands; /* its own control commands */
    size_t n_commands;
};

/* State shared by every thread of a server. */
struct srv {
    /* eventfd that becomes (and stays) readable when the server stops:
     * every blocking wait polls it, so shutdown never waits on a client. */
    int stop_fd;
    atomic_bool accept_close; /* MODE accept-close */
    atomic_int flip_status;   /* FLIP: what faultsrv's /flip answers */
    atomic_int latency_scale; /* SCALE: percent of faultsrv's /tail holds */
    bool verbose;             /* one stderr line per request */
    bool watch_stdin;         /* exit on stdin EOF (not --ignore-stdin) */
    const char *bind;         /* the HTTP listener's address */
    struct srv_stats *stats;
    const struct srv_ops *ops;
    void *data; /* the server's own (h2srv: its TLS context, or NULL) */
    int sig_fd; /* signalfd for SIGTERM/SIGINT (srv_main.c) */
};

/* The options every server takes (srv_option). */
struct srv_options {
    bool watch_stdin; /* default true; --ignore-stdin clears it */
    bool verbose;     /* --verbose */
    const char *bind; /* --bind=ADDR: the HTTP listener's IPv4 loopback
                       * address (default 127.0.0.1; the control port
                       * stays there), so that a test has two hosts */
};

/* One accepted TCP connection read through a buffer, owned by one thread:
 * every control connection, and faultsrv's HTTP connections (h2srv has
 * its own, TLS-capable, struct h2_conn). */
struct srv_conn {
    struct srv *srv;
    int fd;            /* non-blocking; -1 once closed */
    unsigned long num; /* connection ordinal (0: control), for notes */
    char *in;          /* SRV_IN_CAP bytes of buffered input */
    size_t in_pos;     /* first unconsumed byte */
    size_t in_len;     /* end of buffered bytes */
};

/* A request as every server sees it, whatever the protocol: what a path
 * acts on and what an execution records. Each server embeds it, as `base`,
 * in its own request struct, next to what only its protocol has. */
struct srv_request {
    char method[32];
    char *target;             /* owned; its '?' is replaced by a NUL */
    const char *path;         /* into target; "" until known */
    const char *query;        /* into target; "" when absent */
    long long content_length; /* -1: not declared */
    char *request_id_hdr;     /* owned header values; NULL: absent */
    char *idempotency_key;
    char *authorization;
    char *cookie;
    char id[SRV_ID_MAX + 1]; /* "-" until srv_request_resolve_id */
    char *body;              /* owned, decoded */
    size_t body_len;
};

/* What an HTTP/1.1 request head says besides the fields of struct
 * srv_request: its framing and the connection's fate. */
struct srv_h1_head {
    bool http10;                      /* HTTP/1.0 rather than HTTP/1.1 */
    bool chunked;                     /* Transfer-Encoding: chunked */
    bool expect_continue;             /* Expect: 100-continue */
    bool conn_close, conn_keep_alive; /* Connection: tokens */
    bool keep_alive; /* the verdict (srv_h1_keep_alive); a server may clear
                        it to close after a malformed request */
};

/* What an HTTP/1.1 connection does after answering a request. */
enum srv_next {
    SRV_NEXT_KEEP,  /* read the next request from this connection */
    SRV_NEXT_CLOSE, /* our answer said Connection: close: close gracefully */
    SRV_NEXT_DONE,  /* already closed or reset, broken, client gone: close */
};

/* --- srv_main.c: startup, the accept loop, shutdown -------------------- */
struct srv_options srv_default_options(void);
bool srv_option(struct srv_options *o, const char *arg);
int srv_main(const struct srv_ops *ops, const struct srv_options *o, void *arg);

/* --- srv_io.c: waits that watch stop_fd; buffered plain connections ---- */
int64_t srv_now_ms(void);
int srv_poll(int fd, int stop_fd, short events, int timeout_ms);
int srv_wait_peer_close(int fd, int stop_fd, int timeout_ms);
ssize_t srv_recv(int fd, void *buf, size_t n);
ssize_t srv_send(int fd, const void *buf, size_t n);
void srv_linger(int fd, int stop_fd);
void srv_compact(void *buf, size_t *pos, size_t *len);
int srv_conn_init(struct srv_conn *c, struct srv *srv, int fd,
                  unsigned long num);
void srv_conn_free(struct srv_conn *c);
int srv_read_line(struct srv_conn *c, size_t max, char **line, size_t *len);
int srv_read_exact(struct srv_conn *c, char *dst, size_t n);
int srv_write_all(struct srv_conn *c, const void *buf, size_t n);
void srv_drain_output(const struct srv_conn *c, int timeout_ms);
void srv_close(struct srv_conn *c);
void srv_close_reset(struct srv_conn *c);
void srv_close_lingering(struct srv_conn *c);

/* --- srv_control.c: counters, execution log, control protocol ---------- */
struct srv_stats *srv_stats_new(void);
void srv_stats_free(struct srv_stats *st);
long srv_stats_execute(struct srv_stats *st, const struct srv_request *r,
                       const char *tag);
void srv_stats_tally(struct srv_stats *st, const char *id, int which);
bool srv_stats_claim(struct srv_stats *st, const char *id, int which);
void srv_stats_count(struct srv_stats *st, int which);
unsigned long srv_stats_conn_accepted(struct srv_stats *st, bool active);
void srv_stats_conn_closed(struct srv_stats *st);
void srv_stats_stop(struct srv_stats *st);
void srv_control_serve(struct srv_conn *c);

/* --- srv_request.c: requests, query strings, ids, header lines --------- */
void srv_request_init(struct srv_request *r);
void srv_request_free(struct srv_request *r);
int srv_request_set_target(struct srv_request *r, const char *t, size_t len);
int srv_request_field(struct srv_request *r, const char *name, size_t namelen,
                      const char *v, size_t len);
int srv_request_resolve_id(struct srv_request *r);
int srv_query_get(const char *query, const char *key, char *out, size_t outlen);
int srv_query_long(const char *query, const char *key, long def, long min,
                   long max, long *out);
int srv_parse_long(const char *s, long min, long max, long *out);
bool srv_header_safe(const char *s);
const char *srv_reason(int status);
int srv_h1_request_line(struct srv_request *r, struct srv_h1_head *h,
                        char *line);
int srv_h1_field(struct srv_request *r, struct srv_h1_head *h, char *line);
bool srv_h1_keep_alive(const struct srv_h1_head *h);
int srv_h1_status_head(char *buf, size_t len, int status, size_t content_length,
                       bool keep_alive, const char *extra);

#endif

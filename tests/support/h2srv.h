/* Internals shared by the source files of retryd-h2srv, the
 * fault-injecting HTTP/2 server the tests run as a child process (the
 * HTTP/2 counterpart of retryd-faultsrv; see h2srv.c for what it does).
 *
 * Tests never include this header: they talk to the server over HTTP and
 * over its line-based control port (see h2srv.c for the protocol). */
#ifndef RETRYD_H2SRV_H
#define RETRYD_H2SRV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Limits: a test server must not be the thing that falls over when a test
 * (or a bug in the client under test) sends something huge. */
#define H2_HEAD_MAX (32 * 1024)        /* decoded request header fields */
#define H2_BODY_MAX (16 * 1024 * 1024) /* request body */
#define H2_ID_MAX 255                  /* request id, in bytes */
#define H2_PARAM_MAX 256               /* one decoded query parameter */
#define H2_CTL_LINE_MAX 4096           /* one control command */
#define H2_IN_CAP (64 * 1024)          /* per-connection input buffer */
#define H2_MAX_STREAMS 100             /* SETTINGS_MAX_CONCURRENT_STREAMS */
#define H2_HOLD_MAX_MS 3600000L        /* /hold?ms= upper bound */

/* OpenSSL types, without pulling its headers into every file. */
struct ssl_st;
struct ssl_ctx_st;
struct h2_stats;

/* State shared by every thread of the server. */
struct h2_server {
    /* eventfd that becomes (and stays) readable when the server stops:
     * every wait polls it, so shutdown never waits on a client. */
    int stop_fd;
    atomic_bool accept_close; /* MODE accept-close */
    bool verbose;             /* one stderr line per request */
    struct ssl_ctx_st *tls;   /* NULL: --h2c (cleartext) */
    struct h2_stats *stats;
};

/* One accepted TCP connection (HTTP or control), owned by one thread. */
struct h2_conn {
    struct h2_server *srv;
    int fd;                /* non-blocking; -1 once closed */
    struct ssl_st *ssl;    /* NULL: cleartext */
    unsigned long num;     /* connection ordinal, for stderr notes */
    unsigned char *in;     /* H2_IN_CAP bytes of buffered input */
    size_t in_pos, in_len; /* unconsumed input is in[in_pos, in_len) */
    unsigned char *out;    /* pending output (HTTP/2 frames) */
    size_t out_pos, out_len, out_cap;
    /* What poll() must wait for before the next read or write can make
     * progress. POLLIN/POLLOUT for cleartext; TLS can need the other one
     * (a read may have to write, e.g. a TLS 1.3 KeyUpdate reply). */
    short rd_wait, wr_wait;
};

/* What a request asked for: filled by the HTTP/2 callbacks or the
 * HTTP/1.1 parser, consumed by h2srv_req.c. */
struct h2_request {
    char method[32];
    char *target;         /* owned; its '?' is replaced by a NUL */
    const char *path;     /* into target; "" until known */
    const char *query;    /* into target; "" when absent */
    char *request_id_hdr; /* owned header values; NULL: absent */
    char *idempotency_key;
    char *authorization;
    long long content_length; /* -1: not declared */
    size_t head_bytes;        /* header list size, RFC 9113 6.5.2 style */
    bool head_too_large;      /* over H2_HEAD_MAX: answered 431 */
    bool bad_head;            /* malformed field we care about: 400 */
    char id[H2_ID_MAX + 1];
    char *body; /* owned */
    size_t body_len, body_cap;
    const char *proto; /* "h2" or "http/1.1" */
    int32_t stream_id; /* 0 for HTTP/1.1 */
};

/* Decided by the path when the request headers are complete, before any
 * execution: the modes that prove "not processed". */
enum h2_early {
    EARLY_NONE,
    EARLY_REFUSE,      /* RST_STREAM(REFUSED_STREAM) */
    EARLY_REFUSE_ONCE, /* the same, only for the first stream of an id */
    EARLY_GOAWAY,      /* GOAWAY(last-stream-id below this stream) */
    EARLY_HTTP11,      /* RST_STREAM(HTTP_1_1_REQUIRED) */
};

/* What happens after an execution. */
enum h2_after {
    AFTER_RESPOND,       /* answer `resp` */
    AFTER_HOLD,          /* answer `resp` after hold_ms (-1: never) */
    AFTER_RESET,         /* RST_STREAM(INTERNAL_ERROR), no response */
    AFTER_RESET_PARTIAL, /* resp's HEADERS and send_len bytes, then RST */
    AFTER_GOAWAY,        /* answer, then GOAWAY(last-stream-id = stream) */
};

struct h2_response {
    int status;
    char retry_after[H2_PARAM_MAX]; /* "" when absent */
    char *body;                     /* owned; send_len bytes */
    size_t send_len;                /* body bytes actually sent */
    size_t content_length;          /* declared (> send_len: partial) */
    bool no_body;                   /* 204, 304, HEAD: none at all */
};

struct h2_plan {
    enum h2_after after;
    long hold_ms;
    struct h2_response resp;
};

struct h2_mode {
    const char *path;
    enum h2_early early;
    bool http1; /* also served over HTTP/1.1 (else 501 there) */
    int (*plan)(const struct h2_request *r, struct h2_plan *p);
};

/* What is recorded about one execution (see h2_stats_execute). */
struct h2_exec {
    const char *method;
    size_t body_len;
    uint64_t body_fnv;           /* FNV-1a 64 of the body */
    const char *idempotency_key; /* NULL when absent */
    const char *authorization;   /* NULL when absent */
    const char *proto;           /* "h2" or "http/1.1" */
    int32_t stream_id;
};

/* --- h2srv_io.c: non-blocking socket/TLS I/O that watches stop_fd ------ */
int64_t h2_now_ms(void);
int h2_io_poll(struct h2_conn *c, short events, int timeout_ms);
bool h2_io_pending(const struct h2_conn *c);
ssize_t h2_io_recv(struct h2_conn *c, void *buf, size_t len);
ssize_t h2_io_send(struct h2_conn *c, const void *buf, size_t len);
int h2_io_handshake(struct h2_conn *c, int timeout_ms);
ssize_t h2_io_fill(struct h2_conn *c, int timeout_ms);
int h2_io_write_all(struct h2_conn *c, const void *buf, size_t len);
int h2_io_out_append(struct h2_conn *c, const void *buf, size_t len);
int h2_io_flush(struct h2_conn *c);
size_t h2_io_out_pending(const struct h2_conn *c);
int h2_io_wait_peer_close(struct h2_conn *c, int timeout_ms);
void h2_io_close(struct h2_conn *c, bool graceful);
void h2_conn_free_buffers(struct h2_conn *c);

/* --- h2srv_tls.c: self-signed certificate and the TLS context ---------- */
struct ssl_ctx_st *h2_tls_context(const char *cert_out, bool http11_only);
void h2_tls_free(struct ssl_ctx_st *ctx);
bool h2_tls_alpn_is_h2(const struct h2_conn *c);

/* --- h2srv_stats.c: counters and the control protocol ------------------ */
struct h2_stats *h2_stats_new(void);
void h2_stats_free(struct h2_stats *st);
long h2_stats_execute(struct h2_stats *st, const char *id,
                      const struct h2_exec *e);
void h2_stats_refused(struct h2_stats *st, const char *id);
bool h2_stats_claim_refuse_once(struct h2_stats *st, const char *id);
void h2_stats_stream_opened(struct h2_stats *st);
unsigned long h2_stats_conn_accepted(struct h2_stats *st, bool active);
void h2_stats_conn_closed(struct h2_stats *st);
void h2_stats_stop(struct h2_stats *st);
void h2_control_serve(struct h2_conn *c);

/* --- h2srv_req.c: requests, ids, paths and what they do ---------------- */
void h2_request_init(struct h2_request *r, const char *proto);
void h2_request_free(struct h2_request *r);
int h2_request_keep(char **dst, const char *v, size_t len);
int h2_request_set_target(struct h2_request *r, const char *t, size_t len);
int h2_request_resolve_id(struct h2_request *r);
int h2_request_append_body(struct h2_request *r, const void *d, size_t n);
const struct h2_mode *h2_mode_find(const char *path);
int h2_mode_plan(const struct h2_mode *m, const struct h2_request *r,
                 struct h2_plan *p);
int h2_plan_text(struct h2_plan *p, int status, const char *text);
void h2_plan_free(struct h2_plan *p);
long h2_request_execute(struct h2_server *srv, const struct h2_request *r);
uint64_t h2_fnv1a64(const void *data, size_t len);
const char *h2_reason(int status);
void h2_note(const struct h2_conn *c, const struct h2_request *r,
             const char *outcome);

/* --- h2srv_session.c: one connection, HTTP/2 via nghttp2 --------------- */
void h2_conn_serve(struct h2_conn *c);

/* --- h2srv_http1.c: HTTP/1.1 fallback (downgrades, ALPN http/1.1) ------ */
bool h2_http1_serve(struct h2_conn *c);

#endif

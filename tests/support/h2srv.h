/* SPDX-License-Identifier: MIT */
/* Internals shared by the source files of retryd-h2srv, the
 * fault-injecting HTTP/2 server the tests run as a child process (the
 * HTTP/2 counterpart of retryd-faultsrv; see h2srv.c for what it does).
 * What both servers share (startup, counters, control protocol, query
 * parsing, waits) is in srv_common.h; the struct srv's `data` is the TLS
 * context here (SSL_CTX; NULL for --h2c).
 *
 * Tests never include this header: they talk to the server over HTTP and
 * over its line-based control port (see h2srv.c and srv_control.c for the
 * protocol). */
#ifndef RETRYD_H2SRV_H
#define RETRYD_H2SRV_H

#include "srv_common.h"

#define H2_HEAD_MAX (32 * 1024) /* decoded request header fields */
#define H2_IN_CAP (64 * 1024)   /* per-connection input buffer */
#define H2_MAX_STREAMS 100      /* SETTINGS_MAX_CONCURRENT_STREAMS */

/* What h2srv keeps in the common counters (srv_stats_tally/_claim/_count)
 * and answers through its own control commands (see h2srv.c). */
enum {
    H2_TALLY_REFUSED = SRV_TALLY_OWN, /* REFUSED <id> */
    H2_TALLY_REFUSE_ONCE,             /* /refuse-once already refused one */
};
enum { H2_COUNTER_STREAMS }; /* STREAMS */
_Static_assert(H2_TALLY_REFUSE_ONCE < SRV_TALLIES, "SRV_TALLIES too small");

/* OpenSSL types, without pulling its headers into every file. */
struct ssl_st;
struct ssl_ctx_st;

/* One accepted HTTP connection, owned by one thread. */
struct h2_conn {
    struct srv *srv;
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
 * HTTP/1.1 parser, consumed by h2srv_req.c. The common fields (method,
 * target, header values, id, body) are in base. */
struct h2_request {
    struct srv_request base;
    size_t head_bytes;   /* header list size, RFC 9113 6.5.2 style */
    bool head_too_large; /* over H2_HEAD_MAX: answered 431 */
    bool bad_head;       /* malformed field we care about: 400 */
    size_t body_cap;     /* allocated for base.body */
    const char *proto;   /* "h2" or "http/1.1" */
    int32_t stream_id;   /* 0 for HTTP/1.1 */
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
    char retry_after[SRV_PARAM_MAX]; /* "" when absent */
    char *body;                      /* owned; send_len bytes */
    size_t send_len;                 /* body bytes actually sent */
    size_t content_length;           /* declared (> send_len: partial) */
    bool no_body;                    /* 204, 304, HEAD: none at all */
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

/* --- h2srv_io.c: non-blocking socket/TLS I/O that watches stop_fd ------ */
int h2_io_poll(struct h2_conn *c, short events, int timeout_ms);
bool h2_io_pending(const struct h2_conn *c);
ssize_t h2_io_recv(struct h2_conn *c, void *buf, size_t len);
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

/* --- h2srv_req.c: requests, ids, paths and what they do ---------------- */
void h2_request_init(struct h2_request *r, const char *proto);
int h2_request_append_body(struct h2_request *r, const void *d, size_t n);
const struct h2_mode *h2_mode_find(const char *path);
int h2_mode_plan(const struct h2_mode *m, const struct h2_request *r,
                 struct h2_plan *p);
int h2_plan_text(struct h2_plan *p, int status, const char *text);
void h2_plan_free(struct h2_plan *p);
long h2_request_execute(struct srv *srv, const struct h2_request *r);
void h2_note(const struct h2_conn *c, const struct h2_request *r,
             const char *outcome);

/* --- h2srv_session.c: one connection, HTTP/2 via nghttp2 --------------- */
void h2_conn_serve(struct h2_conn *c);

/* --- h2srv_http1.c: HTTP/1.1 fallback (downgrades, ALPN http/1.1) ------ */
bool h2_http1_serve(struct h2_conn *c);

#endif

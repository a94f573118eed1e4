/* Internals shared by the source files of retryd-faultsrv, the
 * fault-injecting HTTP/1.1 server the tests run as a child process.
 *
 * Tests never include this header: they talk to the server over HTTP and
 * over its line-based control port (see faultsrv.c for the protocol). */
#ifndef RETRYD_FAULTSRV_H
#define RETRYD_FAULTSRV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Limits: a test server must not be the thing that falls over when a test
 * (or a bug in the client under test) sends something huge. */
#define FS_HEAD_MAX (64 * 1024)        /* request line + header fields */
#define FS_BODY_MAX (16 * 1024 * 1024) /* decoded request body */
#define FS_IN_CAP FS_HEAD_MAX          /* per-connection input buffer */
#define FS_ID_MAX 255                  /* request id, in bytes */
#define FS_CTL_LINE_MAX 4096           /* one control command */

struct fs_stats;

/* State shared by every thread of the server. */
struct fs_server {
    /* eventfd that becomes (and stays) readable when the server stops:
     * every blocking wait polls it, so shutdown never waits on a client. */
    int stop_fd;
    atomic_bool accept_close; /* MODE accept-close */
    bool verbose;             /* one stderr line per request */
    struct fs_stats *stats;
};

/* One accepted TCP connection (HTTP or control), owned by one thread. */
struct fs_conn {
    struct fs_server *srv;
    int fd;                 /* non-blocking; -1 once closed */
    char *in;               /* FS_IN_CAP bytes of buffered input */
    size_t in_pos;          /* first unconsumed byte */
    size_t in_len;          /* end of buffered bytes */
    unsigned long requests; /* HTTP requests begun on this connection */
};

/* What is recorded about one execution (see fs_stats_execute). */
struct fs_exec {
    const char *method;
    size_t body_len;
    uint64_t body_fnv;           /* FNV-1a 64 of the decoded body */
    const char *idempotency_key; /* NULL when absent */
    const char *authorization;   /* NULL when absent */
};

/* --- faultsrv_io.c: blocking-style I/O that always watches stop_fd ----- */
int64_t fs_now_ms(void);
int fs_poll(const struct fs_conn *c, short events, int timeout_ms);
ssize_t fs_fill(struct fs_conn *c);
int fs_read_line(struct fs_conn *c, size_t max, char **line, size_t *len);
int fs_read_exact(struct fs_conn *c, char *dst, size_t n);
int fs_write_all(struct fs_conn *c, const void *buf, size_t n);
int fs_wait_peer_close(const struct fs_conn *c, int timeout_ms);
void fs_drain_output(const struct fs_conn *c, int timeout_ms);
void fs_close(struct fs_conn *c);
void fs_close_reset(struct fs_conn *c);
void fs_close_lingering(struct fs_conn *c);

/* --- faultsrv_control.c: counters and the control protocol ------------- */
struct fs_stats *fs_stats_new(void);
void fs_stats_free(struct fs_stats *st);
long fs_stats_execute(struct fs_stats *st, const char *id,
                      const struct fs_exec *e);
void fs_stats_reject(struct fs_stats *st, const char *id);
void fs_stats_conn_accepted(struct fs_stats *st, bool active);
void fs_stats_conn_closed(struct fs_stats *st);
void fs_stats_stop(struct fs_stats *st);
void fs_control_serve(struct fs_conn *c);

/* --- faultsrv_http.c: HTTP/1.1 requests and the fault modes ------------ */
void fs_http_serve(struct fs_conn *c);
uint64_t fs_fnv1a64(const void *data, size_t len);

#endif

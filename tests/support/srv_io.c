/* SPDX-License-Identifier: MIT */
/* Connection I/O shared by the test servers.
 *
 * Sockets are non-blocking and every wait is a poll() that also watches
 * the server's stop eventfd: a client that stops reading or writing can
 * delay its own connection thread but never the server's shutdown.
 *
 * Two layers: waits on a bare descriptor (srv_poll and friends; h2srv
 * builds its TLS-capable I/O on them), and struct srv_conn, a plain
 * socket read through a buffer (control connections, faultsrv's HTTP). */
#include "srv_common.h"

#include <errno.h>
#include <limits.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How long a lingering close waits for the client's EOF, and how much it
 * reads and discards meanwhile (see srv_linger). */
#define LINGER_MS 2000
#define LINGER_DISCARD_MAX (32 * 1024 * 1024)

/* --- waits on a descriptor ---------------------------------------------- */

int64_t srv_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd reports one of `events` (POLLERR and POLLHUP are always
 * reported), for at most timeout_ms (-1: no limit). events may be 0: then
 * only the timeout, stop_fd and errors end the wait. Polls at least once,
 * so a timeout of 0 reports what is ready now.
 * Returns the revents (> 0), 0 on timeout, -ECANCELED if the server is
 * stopping, or -errno. */
int srv_poll(int fd, int stop_fd, short events, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : srv_now_ms() + timeout_ms;

    for (;;) {
        struct pollfd p[2] = {
            {.fd = fd, .events = events},
            {.fd = stop_fd, .events = POLLIN},
        };
        int wait = -1;

        if (deadline >= 0) {
            int64_t left = deadline - srv_now_ms();

            wait = left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
        }
        int n = poll(p, 2, wait);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (p[1].revents)
            return -ECANCELED;
        if (p[0].revents)
            return p[0].revents;
        if (wait == 0 || (deadline >= 0 && srv_now_ms() >= deadline))
            return 0;
    }
}

/* Waits up to timeout_ms (-1: forever) for the client to close or reset
 * the connection. Only POLLRDHUP is requested, not POLLIN: bytes the
 * client pipelines meanwhile must not wake us up again and again (that
 * would spin); they stay in the socket for the next request.
 * Returns 1 if the client closed, 0 on timeout, negative errno on stop. */
int srv_wait_peer_close(int fd, int stop_fd, int timeout_ms)
{
    int r = srv_poll(fd, stop_fd, POLLRDHUP, timeout_ms);

    if (r < 0)
        return r;
    return r > 0;
}

/* Closing a socket with unread input makes Linux send a RST, which can
 * destroy what the client has not read yet (a 413 sent while the client
 * is still uploading, a GOAWAY). So: send our FIN, then read and discard
 * until the client's EOF, bounded in time and bytes. The caller closes. */
void srv_linger(int fd, int stop_fd)
{
    int64_t deadline = srv_now_ms() + LINGER_MS;
    size_t discarded = 0;
    char buf[16384];

    shutdown(fd, SHUT_WR);
    while (discarded < LINGER_DISCARD_MAX) {
        int64_t left = deadline - srv_now_ms();

        if (left <= 0 || srv_poll(fd, stop_fd, POLLIN, (int)left) <= 0)
            break;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
            break;
        if (n > 0)
            discarded += (size_t)n;
    }
}

/* One recv() on a non-blocking socket, retried on EINTR. Returns the
 * bytes read (> 0), 0 on orderly EOF, -EAGAIN when there is nothing yet,
 * or -errno. */
ssize_t srv_recv(int fd, void *buf, size_t n)
{
    for (;;) {
        ssize_t r = recv(fd, buf, n, 0);

        if (r >= 0)
            return r;
        if (errno != EINTR)
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

/* One send() on a non-blocking socket, retried on EINTR. Returns the bytes
 * taken (>= 0), -EAGAIN when the socket is full, or -errno. MSG_NOSIGNAL:
 * a client that went away must produce EPIPE for this connection, not a
 * SIGPIPE for the whole server. */
ssize_t srv_send(int fd, const void *buf, size_t n)
{
    for (;;) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);

        if (w >= 0)
            return w;
        if (errno != EINTR)
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

/* Moves the unconsumed bytes buf[*pos, *len) to the start of buf, making
 * room at the end for more input (pointers into buf move with them). */
void srv_compact(void *buf, size_t *pos, size_t *len)
{
    if (*pos == 0)
        return;
    memmove(buf, (char *)buf + *pos, *len - *pos);
    *len -= *pos;
    *pos = 0;
}

/* --- buffered plain connections ----------------------------------------- */

/* Takes over fd (srv_conn_free closes it, whatever this returns) and
 * allocates the input buffer. Returns 0 or -ENOMEM. */
int srv_conn_init(struct srv_conn *c, struct srv *srv, int fd,
                  unsigned long num)
{
    *c = (struct srv_conn){.srv = srv, .fd = fd, .num = num};
    c->in = malloc(SRV_IN_CAP);
    return c->in ? 0 : -ENOMEM;
}

void srv_conn_free(struct srv_conn *c)
{
    srv_close(c);
    free(c->in);
    c->in = NULL;
}

static int conn_poll(const struct srv_conn *c, short events)
{
    return srv_poll(c->fd, c->srv->stop_fd, events, -1);
}

/* One recv() from the socket, waiting until there is something to read.
 * Returns the bytes read (> 0), 0 on orderly EOF, -ECANCELED on stop, or
 * -errno. */
static ssize_t recv_some(struct srv_conn *c, void *buf, size_t n)
{
    for (;;) {
        ssize_t r = srv_recv(c->fd, buf, n);

        if (r != -EAGAIN)
            return r;
        int p = conn_poll(c, POLLIN);
        if (p < 0)
            return p;
    }
}

/* Reads more input into c->in (compacting it first, which moves buffered
 * bytes: pointers into c->in are invalid afterwards).
 * Returns the number of bytes read (> 0), 0 on orderly EOF, -ENOBUFS if
 * the buffer is full, -ECANCELED on stop, or -errno. */
static ssize_t fill(struct srv_conn *c)
{
    srv_compact(c->in, &c->in_pos, &c->in_len);
    if (c->in_len == SRV_IN_CAP)
        return -ENOBUFS;
    ssize_t n = recv_some(c, c->in + c->in_len, SRV_IN_CAP - c->in_len);
    if (n > 0)
        c->in_len += (size_t)n;
    return n;
}

/* Returns in *line the next input line, NUL-terminated in place without its
 * LF or CR LF; it stays valid until the next read from the connection.
 * `max` bounds the line including its terminator (max <= SRV_IN_CAP).
 * Returns 0, -EMSGSIZE if the line is longer, -ENODATA on EOF before any
 * byte of the line, -EPROTO on EOF inside it, or another negative errno. */
int srv_read_line(struct srv_conn *c, size_t max, char **line, size_t *len)
{
    size_t scanned = 0;

    for (;;) {
        char *start = c->in + c->in_pos;
        size_t avail = c->in_len - c->in_pos;
        char *nl = memchr(start + scanned, '\n', avail - scanned);

        if (nl) {
            size_t n = (size_t)(nl - start) + 1;
            size_t l = n - 1;

            if (n > max)
                return -EMSGSIZE;
            if (l > 0 && start[l - 1] == '\r')
                l--;
            start[l] = '\0';
            c->in_pos += n;
            *line = start;
            *len = l;
            return 0;
        }
        if (avail >= max)
            return -EMSGSIZE;
        /* Offsets relative to the line start survive the compaction. */
        scanned = avail;
        ssize_t r = fill(c);
        if (r == 0)
            return avail == 0 ? -ENODATA : -EPROTO;
        if (r < 0)
            return (int)r;
    }
}

/* Reads exactly n bytes: first what is buffered, then straight from the
 * socket into dst (bodies can be far larger than the input buffer).
 * Returns 0, -EPROTO on EOF before n bytes, or another negative errno. */
int srv_read_exact(struct srv_conn *c, char *dst, size_t n)
{
    size_t avail = c->in_len - c->in_pos;
    size_t take = avail < n ? avail : n;

    if (take > 0) {
        memcpy(dst, c->in + c->in_pos, take);
        c->in_pos += take;
        dst += take;
        n -= take;
    }
    while (n > 0) {
        ssize_t r = recv_some(c, dst, n);

        if (r <= 0)
            return r == 0 ? -EPROTO : (int)r;
        dst += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Writes all n bytes, waiting for room as needed. Returns 0 or a negative
 * errno. */
int srv_write_all(struct srv_conn *c, const void *buf, size_t n)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t w = srv_send(c->fd, p, n);

        if (w < 0 && w != -EAGAIN)
            return (int)w;
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if ((w = conn_poll(c, POLLOUT)) < 0) {
            return (int)w;
        }
    }
    return 0;
}

/* Waits (bounded) until the kernel has sent and had acknowledged
 * everything written so far. Needed before an abortive close: a reset
 * discards unsent data, and faultsrv's /partial promises the client M body
 * bytes before the RST. Over loopback this is normally already true; the
 * rare wait is a short poll of SIOCOUTQ because no event signals "acked". */
void srv_drain_output(const struct srv_conn *c, int timeout_ms)
{
    int64_t deadline = srv_now_ms() + timeout_ms;
    int pending = 0;

    while (ioctl(c->fd, SIOCOUTQ, &pending) == 0 && pending > 0 &&
           srv_now_ms() < deadline) {
        struct pollfd p = {.fd = c->srv->stop_fd, .events = POLLIN};

        if (poll(&p, 1, 1) > 0)
            return;
    }
}

void srv_close(struct srv_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* SO_LINGER {1, 0}: close() sends a RST instead of a FIN, so the client's
 * next read fails with ECONNRESET rather than returning 0. */
void srv_close_reset(struct srv_conn *c)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    if (c->fd < 0)
        return;
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    srv_close(c);
}

/* A close that lets the client read our last answer (see srv_linger). */
void srv_close_lingering(struct srv_conn *c)
{
    if (c->fd < 0)
        return;
    srv_linger(c->fd, c->srv->stop_fd);
    srv_close(c);
}

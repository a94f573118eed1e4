/* Connection I/O for retryd-faultsrv.
 *
 * Sockets are non-blocking and every wait is a poll() that also watches the
 * server's stop eventfd: a client that stops reading or writing can delay
 * its own connection thread but never the server's shutdown. */
#include "faultsrv.h"

#include <errno.h>
#include <limits.h>
#include <linux/sockios.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How long a lingering close waits for the client's EOF, and how much it
 * reads and discards meanwhile (see fs_close_lingering). */
#define LINGER_MS 2000
#define LINGER_DISCARD_MAX (32 * 1024 * 1024)

int64_t fs_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until the socket reports one of `events` (POLLERR and POLLHUP are
 * always reported), for at most timeout_ms (-1: no limit).
 * Returns the revents (> 0), 0 on timeout, -ECANCELED if the server is
 * stopping, or -errno. */
int fs_poll(const struct fs_conn *c, short events, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : fs_now_ms() + timeout_ms;

    for (;;) {
        struct pollfd p[2] = {
            {.fd = c->fd, .events = events},
            {.fd = c->srv->stop_fd, .events = POLLIN},
        };
        int wait = -1;

        if (deadline >= 0) {
            int64_t left = deadline - fs_now_ms();

            if (left <= 0)
                return 0;
            wait = left > INT_MAX ? INT_MAX : (int)left;
        }
        if (poll(p, 2, wait) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (p[1].revents)
            return -ECANCELED;
        if (p[0].revents)
            return p[0].revents;
        /* Timed out: the loop re-checks the deadline and returns 0. */
    }
}

/* Reads more input into c->in (compacting it first, which moves buffered
 * bytes: pointers into c->in are invalid afterwards).
 * Returns the number of bytes read (> 0), 0 on orderly EOF, -ENOBUFS if
 * the buffer is full, -ECANCELED on stop, or -errno. */
ssize_t fs_fill(struct fs_conn *c)
{
    if (c->in_pos > 0) {
        memmove(c->in, c->in + c->in_pos, c->in_len - c->in_pos);
        c->in_len -= c->in_pos;
        c->in_pos = 0;
    }
    if (c->in_len == FS_IN_CAP)
        return -ENOBUFS;
    for (;;) {
        ssize_t n = recv(c->fd, c->in + c->in_len, FS_IN_CAP - c->in_len, 0);

        if (n >= 0) {
            c->in_len += (size_t)n;
            return n;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int r = fs_poll(c, POLLIN, -1);
        if (r < 0)
            return r;
    }
}

/* Returns in *line the next input line, NUL-terminated in place without its
 * LF or CR LF; it stays valid until the next read from the connection.
 * `max` bounds the line including its terminator (max <= FS_IN_CAP).
 * Returns 0, -EMSGSIZE if the line is longer, -ENODATA on EOF before any
 * byte of the line, -EPROTO on EOF inside it, or another negative errno. */
int fs_read_line(struct fs_conn *c, size_t max, char **line, size_t *len)
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
        ssize_t r = fs_fill(c);
        if (r == 0)
            return avail == 0 ? -ENODATA : -EPROTO;
        if (r < 0)
            return (int)r;
    }
}

/* Reads exactly n bytes: first what is buffered, then straight from the
 * socket into dst (bodies can be far larger than the input buffer).
 * Returns 0, -EPROTO on EOF before n bytes, or another negative errno. */
int fs_read_exact(struct fs_conn *c, char *dst, size_t n)
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
        ssize_t r = recv(c->fd, dst, n, 0);

        if (r > 0) {
            dst += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return -EPROTO;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int p = fs_poll(c, POLLIN, -1);
        if (p < 0)
            return p;
    }
    return 0;
}

/* Writes all n bytes. MSG_NOSIGNAL: a client that went away must produce
 * EPIPE for this connection, not a SIGPIPE for the whole server.
 * Returns 0 or a negative errno. */
int fs_write_all(struct fs_conn *c, const void *buf, size_t n)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);

        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int r = fs_poll(c, POLLOUT, -1);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Waits up to timeout_ms (-1: forever) for the client to close or reset
 * the connection. Only POLLRDHUP is requested, not POLLIN: bytes the
 * client pipelines meanwhile must not wake us up again and again (that
 * would spin); they stay in the socket for the next request.
 * Returns 1 if the client closed, 0 on timeout, negative errno on stop. */
int fs_wait_peer_close(const struct fs_conn *c, int timeout_ms)
{
    int r = fs_poll(c, POLLRDHUP, timeout_ms);

    if (r < 0)
        return r;
    return r > 0;
}

/* Waits (bounded) until the kernel has sent and had acknowledged
 * everything written so far. Needed before an abortive close: a reset
 * discards unsent data, and /partial promises the client M body bytes
 * before the RST. Over loopback this is normally already true; the rare
 * wait is a short poll of SIOCOUTQ because no event signals "acked". */
void fs_drain_output(const struct fs_conn *c, int timeout_ms)
{
    int64_t deadline = fs_now_ms() + timeout_ms;
    int pending = 0;

    while (ioctl(c->fd, SIOCOUTQ, &pending) == 0 && pending > 0 &&
           fs_now_ms() < deadline) {
        struct pollfd p = {.fd = c->srv->stop_fd, .events = POLLIN};

        if (poll(&p, 1, 1) > 0)
            return;
    }
}

void fs_close(struct fs_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* SO_LINGER {1, 0}: close() sends a RST instead of a FIN, so the client's
 * next read fails with ECONNRESET rather than returning 0. */
void fs_close_reset(struct fs_conn *c)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    if (c->fd < 0)
        return;
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    fs_close(c);
}

/* Closing a socket with unread input makes Linux send a RST, which can
 * destroy a response the client has not read yet (e.g. a 413 sent while
 * the client is still uploading). So: send our FIN, read and discard until
 * the client's EOF (bounded in time and bytes), then close. */
void fs_close_lingering(struct fs_conn *c)
{
    int64_t deadline = fs_now_ms() + LINGER_MS;
    size_t discarded = 0;
    char buf[16384];

    if (c->fd < 0)
        return;
    shutdown(c->fd, SHUT_WR);
    while (discarded < LINGER_DISCARD_MAX) {
        int64_t left = deadline - fs_now_ms();

        if (left <= 0 || fs_poll(c, POLLIN, (int)left) <= 0)
            break;
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
            break;
        if (n > 0)
            discarded += (size_t)n;
    }
    fs_close(c);
}

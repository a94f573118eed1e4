/* SPDX-License-Identifier: MIT */
/* Connection I/O for retryd-h2srv: cleartext or TLS, always non-blocking.
 *
 * Every wait is a srv_poll() (srv_io.c), which also watches the server's
 * stop eventfd, so a client that stops reading or writing can delay its
 * own connection thread but never the server's shutdown. The TLS variants
 * map OpenSSL's WANT_READ/WANT_WRITE onto the same -EAGAIN convention,
 * remembering in rd_wait/wr_wait which poll event unblocks them. */
#include "h2srv.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* srv_poll() on the connection's socket: the revents (> 0), 0 on
 * timeout, -ECANCELED if the server is stopping, or -errno. */
int h2_io_poll(struct h2_conn *c, short events, int timeout_ms)
{
    return srv_poll(c->fd, c->srv->stop_fd, events, timeout_ms);
}

/* TLS may hold decrypted bytes that poll() cannot see. */
bool h2_io_pending(const struct h2_conn *c)
{
    return c->ssl && SSL_has_pending(c->ssl);
}

/* Maps an OpenSSL result to our convention, setting *wait for -EAGAIN. */
static ssize_t tls_result(struct h2_conn *c, int rc, short *wait)
{
    int e = SSL_get_error(c->ssl, rc);

    switch (e) {
    case SSL_ERROR_WANT_READ:
        *wait = POLLIN;
        return -EAGAIN;
    case SSL_ERROR_WANT_WRITE:
        *wait = POLLOUT;
        return -EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0; /* close_notify: an orderly EOF */
    case SSL_ERROR_SYSCALL:
        /* EOF without close_notify shows up here with errno 0; treat it
         * as an EOF too: clients (curl) often just close. */
        ERR_clear_error();
        return errno ? -errno : 0;
    default:
        ERR_clear_error();
        return -EPROTO;
    }
}

/* One read: > 0 bytes, 0 on EOF, -EAGAIN (see rd_wait), or -errno. */
ssize_t h2_io_recv(struct h2_conn *c, void *buf, size_t len)
{
    if (len > INT_MAX)
        len = INT_MAX;
    if (c->ssl) {
        errno = 0;
        int n = SSL_read(c->ssl, buf, (int)len);

        if (n > 0) {
            c->rd_wait = POLLIN; /* whatever the last WANT_* was */
            return n;
        }
        return tls_result(c, n, &c->rd_wait);
    }
    ssize_t n = srv_recv(c->fd, buf, len);
    if (n == -EAGAIN)
        c->rd_wait = POLLIN;
    return n;
}

/* One write: > 0 bytes taken, -EAGAIN (see wr_wait), or -errno. */
static ssize_t io_send(struct h2_conn *c, const void *buf, size_t len)
{
    if (len > INT_MAX)
        len = INT_MAX;
    if (c->ssl) {
        errno = 0;
        int n = SSL_write(c->ssl, buf, (int)len);

        if (n > 0) {
            c->wr_wait = POLLOUT;
            return n;
        }
        ssize_t r = tls_result(c, n, &c->wr_wait);
        return r == 0 ? -EPIPE : r;
    }
    ssize_t n = srv_send(c->fd, buf, len);
    if (n == -EAGAIN)
        c->wr_wait = POLLOUT;
    return n;
}

/* Server side of the TLS handshake, bounded: a client that connects and
 * says nothing must not pin a thread forever. No-op for cleartext.
 * Returns 0, -ETIMEDOUT, -ECANCELED, or another negative errno. */
int h2_io_handshake(struct h2_conn *c, int timeout_ms)
{
    int64_t deadline = srv_now_ms() + timeout_ms;
    short wait = POLLIN;

    if (!c->ssl)
        return 0;
    for (;;) {
        errno = 0;
        int n = SSL_accept(c->ssl);

        if (n == 1)
            return 0;
        ssize_t r = tls_result(c, n, &wait);
        if (r != -EAGAIN)
            return r == 0 ? -ECONNRESET : (int)r;
        int64_t left = deadline - srv_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        int p = h2_io_poll(c, wait, (int)left);
        if (p < 0)
            return p;
    }
}

/* Reads more input into c->in, waiting up to timeout_ms (-1: no limit).
 * Compacts first, which moves buffered bytes: pointers into c->in are
 * invalid afterwards. Returns the bytes read (> 0), 0 on EOF, -ENOBUFS if
 * the buffer is full, -ETIMEDOUT, -ECANCELED, or -errno. */
ssize_t h2_io_fill(struct h2_conn *c, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : srv_now_ms() + timeout_ms;

    srv_compact(c->in, &c->in_pos, &c->in_len);
    if (c->in_len == H2_IN_CAP)
        return -ENOBUFS;
    for (;;) {
        ssize_t n = h2_io_recv(c, c->in + c->in_len, H2_IN_CAP - c->in_len);

        if (n > 0)
            c->in_len += (size_t)n;
        if (n != -EAGAIN)
            return n;
        int left = -1;
        if (deadline >= 0) {
            int64_t l = deadline - srv_now_ms();
            if (l <= 0)
                return -ETIMEDOUT;
            left = l > INT_MAX ? INT_MAX : (int)l;
        }
        int p = h2_io_poll(c, c->rd_wait, left);
        if (p < 0)
            return p;
    }
}

/* Writes all of buf, waiting as needed. Returns 0 or a negative errno. */
int h2_io_write_all(struct h2_conn *c, const void *buf, size_t len)
{
    const unsigned char *p = buf;

    while (len > 0) {
        ssize_t n = io_send(c, p, len);

        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n != -EAGAIN)
            return n < 0 ? (int)n : -EPIPE;
        int r = h2_io_poll(c, c->wr_wait, -1);
        if (r < 0)
            return r;
    }
    return 0;
}

size_t h2_io_out_pending(const struct h2_conn *c)
{
    return c->out_len - c->out_pos;
}

/* Queues bytes for h2_io_flush. The buffer grows as needed; callers keep
 * it bounded by not producing more while much is pending. */
int h2_io_out_append(struct h2_conn *c, const void *buf, size_t len)
{
    if (c->out_pos > 0 && c->out_pos == c->out_len)
        c->out_pos = c->out_len = 0;
    if (c->out_cap - c->out_len < len) {
        /* Compact before growing: most of the time that is enough. */
        if (c->out_pos > 0) {
            memmove(c->out, c->out + c->out_pos, c->out_len - c->out_pos);
            c->out_len -= c->out_pos;
            c->out_pos = 0;
        }
        if (c->out_cap - c->out_len < len) {
            size_t cap = c->out_cap ? c->out_cap : 16384;
            while (cap - c->out_len < len)
                cap *= 2;
            unsigned char *p = realloc(c->out, cap);
            if (!p)
                return -ENOMEM;
            c->out = p;
            c->out_cap = cap;
        }
    }
    memcpy(c->out + c->out_len, buf, len);
    c->out_len += len;
    return 0;
}

/* Writes queued output without waiting. Returns 0 when all of it went
 * out, -EAGAIN when the socket is full (see wr_wait), or -errno. The TLS
 * context has SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, so a retried write may
 * come from a compacted or reallocated buffer. */
int h2_io_flush(struct h2_conn *c)
{
    while (c->out_pos < c->out_len) {
        ssize_t n = io_send(c, c->out + c->out_pos, c->out_len - c->out_pos);

        if (n < 0)
            return (int)n;
        c->out_pos += (size_t)n;
    }
    c->out_pos = c->out_len = 0;
    return 0;
}

/* Waits up to timeout_ms (-1: forever) for the client to close or reset
 * the connection, without reading (see srv_wait_peer_close).
 * Returns 1 if the client closed, 0 on timeout, negative errno on stop. */
int h2_io_wait_peer_close(struct h2_conn *c, int timeout_ms)
{
    return srv_wait_peer_close(c->fd, c->srv->stop_fd, timeout_ms);
}

/* Closes the connection. Graceful: sends TLS close_notify, then our FIN,
 * and reads and discards until the client's EOF (bounded), because
 * closing a socket with unread input makes Linux send a RST, which can
 * destroy frames the client has not read yet (a GOAWAY, a response). */
void h2_io_close(struct h2_conn *c, bool graceful)
{
    if (c->fd < 0)
        return;
    if (graceful) {
        if (c->ssl)
            SSL_shutdown(c->ssl); /* best effort, non-blocking */
        /* Raw reads: after our close_notify, TLS records no longer
         * matter, and the client may well have half-closed. */
        srv_linger(c->fd, c->srv->stop_fd);
    }
    if (c->ssl) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    close(c->fd);
    c->fd = -1;
}

void h2_conn_free_buffers(struct h2_conn *c)
{
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
    c->in_pos = c->in_len = 0;
    c->out_pos = c->out_len = c->out_cap = 0;
}

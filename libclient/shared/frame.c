/* SPDX-License-Identifier: MIT */
/* Framing of the daemon's sockets; see frame.h. */
#include "shared/frame.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "retryd/common.h"

int retryd__frame_decode(const uint8_t *buf, size_t len, size_t cap,
                         const uint8_t **ret_body, size_t *ret_body_len,
                         size_t *ret_consumed)
{
    if (len < RETRYD_FRAME_HEADER)
        return 1;
    uint32_t n = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 |
                 (uint32_t)buf[2] << 8 | (uint32_t)buf[3];
    /* Checked before anything else is done with it: a hostile length
     * never makes anyone allocate or wait for it. (Zero is an empty
     * message: every field at its default.) */
    if (n > cap)
        return RETRYD_EPROTO;
    /* Told while the body is still to come too: a reader holding only the
     * header learns how much to read. */
    *ret_body_len = n;
    if (len - RETRYD_FRAME_HEADER < n)
        return 1;
    *ret_body = buf + RETRYD_FRAME_HEADER;
    *ret_consumed = RETRYD_FRAME_HEADER + (size_t)n;
    return 0;
}

static int64_t now_ms(void)
{
    return (int64_t)(retryd__clock_monotonic_ns() / 1000000);
}

/* Wait for @p events on @p fd until @p deadline (ms, CLOCK_MONOTONIC). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return RETRYD_ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 0;
        if (r == 0)
            return RETRYD_ETIMEDOUT;
        if (errno != EINTR)
            return RETRYD_EIO;
    }
}

static int errno_to_retryd(int e)
{
    switch (e) {
    case EPIPE:
    case ECONNRESET:
    case ENOTCONN:
    case ECONNREFUSED:
        return RETRYD_ENOTCONN;
    default:
        return RETRYD_EIO;
    }
}

ssize_t retryd__send_with_fd(int fd, const void *buf, size_t len, int pass_fd)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = (void *)(uintptr_t)buf, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.space;
        mh.msg_controllen = sizeof(ctl.space);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    return sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void retryd__frame_pack(const ProtobufCMessage *msg, size_t n, uint8_t *buf)
{
    buf[0] = (uint8_t)(n >> 24), buf[1] = (uint8_t)(n >> 16);
    buf[2] = (uint8_t)(n >> 8), buf[3] = (uint8_t)n;
    protobuf_c_message_pack(msg, buf + RETRYD_FRAME_HEADER);
}

int retryd__frame_send(int fd, const ProtobufCMessage *msg, int pass_fd,
                       int timeout_ms)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n > RETRYD_FRAME_REPLY_MAX)
        return RETRYD_EPROTO;
    uint8_t *buf = malloc(RETRYD_FRAME_HEADER + n);
    if (buf == NULL)
        return RETRYD_ENOMEM;
    retryd__frame_pack(msg, n, buf);

    int64_t deadline = now_ms() + timeout_ms;
    size_t total = RETRYD_FRAME_HEADER + n, sent = 0;
    int r = 0;
    while (sent < total) {
        /* The descriptor rides on the first byte only. */
        ssize_t w = retryd__send_with_fd(fd, buf + sent, total - sent,
                                         sent == 0 ? pass_fd : -1);
        if (w > 0) {
            sent += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            r = wait_fd(fd, POLLOUT, deadline);
            if (r < 0)
                break;
            continue;
        }
        r = errno_to_retryd(errno);
        break;
    }
    free(buf);
    return r;
}

/* Collect a descriptor passed with a message; close any extras. */
static void take_fds(struct msghdr *mh, int *ret_fd)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (ret_fd != NULL && *ret_fd < 0)
                *ret_fd = fd;
            else
                close(fd);
        }
    }
}

/* Read exactly @p len bytes, gathering a passed descriptor if any. */
static int recv_exact(int fd, uint8_t *buf, size_t len, int64_t deadline,
                      int *ret_fd)
{
    size_t got = 0;
    while (got < len) {
        union {
            struct cmsghdr h;
            char space[CMSG_SPACE(sizeof(int) * 4)];
        } ctl;
        struct iovec iov = {.iov_base = buf + got, .iov_len = len - got};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.space,
                            .msg_controllen = sizeof(ctl.space)};
        ssize_t r = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r > 0) {
            take_fds(&mh, ret_fd);
            got += (size_t)r;
            continue;
        }
        if (r == 0)
            return RETRYD_ENOTCONN;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_fd(fd, POLLIN, deadline);
            if (w < 0)
                return w;
            continue;
        }
        return errno_to_retryd(errno);
    }
    return 0;
}

int retryd__frame_recv(int fd, size_t cap, int timeout_ms, uint8_t **ret_body,
                       size_t *ret_len, int *ret_fd)
{
    uint8_t hdr[RETRYD_FRAME_HEADER];
    const uint8_t *body;
    size_t body_len, consumed;
    int64_t deadline = now_ms() + timeout_ms;
    int passed = -1;
    int r;

    r = recv_exact(fd, hdr, sizeof(hdr), deadline, &passed);
    if (r < 0)
        goto fail;
    /* Only the header is there: 1 (or 0 for an empty body), with the
     * body's length. */
    r = retryd__frame_decode(hdr, sizeof(hdr), cap, &body, &body_len,
                             &consumed);
    if (r < 0)
        goto fail;
    uint8_t *buf = malloc(body_len ? body_len : 1);
    if (buf == NULL) {
        r = RETRYD_ENOMEM;
        goto fail;
    }
    r = recv_exact(fd, buf, body_len, deadline, &passed);
    if (r < 0) {
        free(buf);
        goto fail;
    }
    *ret_body = buf;
    *ret_len = body_len;
    if (ret_fd != NULL)
        *ret_fd = passed;
    else if (passed >= 0)
        close(passed);
    return 0;
fail:
    if (passed >= 0)
        close(passed);
    return r;
}

int retryd__control_exchange(int fd, const Retryd__ControlRequest *req,
                             int timeout_ms, Retryd__ControlReply **ret,
                             int *ret_fd)
{
    uint8_t *body;
    size_t len;
    int r = retryd__frame_send(fd, &req->base, -1, timeout_ms);
    /* A daemon that cannot keep the connection (out of descriptors)
     * replies at once and hangs up, perhaps before the request was sent:
     * the reply waits in the socket, and says why. */
    if (r == 0 || r == RETRYD_ENOTCONN)
        r = retryd__frame_recv(fd, RETRYD_FRAME_REPLY_MAX, timeout_ms, &body,
                               &len, ret_fd);
    if (r < 0)
        return r;
    *ret = retryd__control_reply__unpack(NULL, len, body);
    free(body);
    if (*ret == NULL) {
        /* A descriptor that came with a reply nobody can read is nobody's. */
        if (ret_fd != NULL && *ret_fd >= 0) {
            close(*ret_fd);
            *ret_fd = -1;
        }
        return RETRYD_EPROTO;
    }
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The connection to Redis (link.h): non-blocking sockets polled against a
 * deadline, hiredis's formatter and reader on top.
 */
#include "fleet/link.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/clock.h"
#include "retryd/common.h"

/* --- the pipe ------------------------------------------------------------ */

int fleet_pipe_add(fleet_pipe *p, int argc, const char **argv)
{
    char *cmd;
    int n = redisFormatCommandArgv(&cmd, argc, argv, NULL);
    if (n < 0)
        return RETRYD_ENOMEM;
    if (p->len + (size_t)n > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->len + (size_t)n)
            cap *= 2;
        char *more = realloc(p->buf, cap);
        if (more == NULL) {
            redisFreeCommand(cmd);
            return RETRYD_ENOMEM;
        }
        p->buf = more;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, cmd, (size_t)n);
    p->len += (size_t)n;
    p->n++;
    redisFreeCommand(cmd);
    return 0;
}

void fleet_pipe_reset(fleet_pipe *p)
{
    p->len = 0;
    p->n = 0;
}

void fleet_pipe_free(fleet_pipe *p)
{
    free(p->buf);
    *p = (fleet_pipe){0};
}

/* --- the reader ---------------------------------------------------------- */

static redisReplyObjectFunctions bounded_fns;
static void *(*default_array)(const redisReadTask *, int);
static pthread_once_t bounded_once = PTHREAD_ONCE_INIT;

/* An array reply, when its count is within the bound; NULL makes the
 * reader fail (an out-of-memory error, which the link reports as a
 * malformed reply). */
static void *bounded_array(const redisReadTask *task, int elements)
{
    if (elements < 0 || elements > FLEET_REPLY_ELEMENTS_MAX)
        return NULL;
    return default_array(task, elements);
}

/* hiredis's own functions, kept but for the array's, taken from a reader
 * made with them (they are not exported otherwise). */
static void bounded_init(void)
{
    redisReader *r = redisReaderCreate();
    if (r == NULL)
        return;
    bounded_fns = *r->fn;
    default_array = bounded_fns.createArray;
    bounded_fns.createArray = bounded_array;
    redisReaderFree(r);
}

redisReader *fleet_reader_new(void)
{
    pthread_once(&bounded_once, bounded_init);
    if (default_array == NULL)
        return NULL;
    return redisReaderCreateWithFunctions(&bounded_fns);
}

/* --- waiting ------------------------------------------------------------- */

/* Until @p fd is ready for @p events, or @p deadline_ns passes, or
 * @p abort_fd (when not -1) becomes readable. */
static int wait_fd(int fd, short events, uint64_t deadline_ns, int abort_fd)
{
    for (;;) {
        uint64_t now = retryd__clock_monotonic_ns();
        if (now >= deadline_ns)
            return RETRYD_ETIMEDOUT;
        uint64_t ms = (deadline_ns - now + 999999) / 1000000;
        struct pollfd pf[2] = {{.fd = fd, .events = events},
                               {.fd = abort_fd, .events = POLLIN}};
        int r = poll(pf, abort_fd >= 0 ? 2 : 1, ms > 60000 ? 60000 : (int)ms);
        if (r > 0 && abort_fd >= 0 && (pf[1].revents & POLLIN))
            return RETRYD_ECANCELED;
        if (r > 0)
            return 0; /* ready, or an error the next call reports */
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

/* --- connecting ---------------------------------------------------------- */

/* A non-blocking connect of @p fd to @p sa, finished by @p deadline_ns. */
static int finish_connect(int fd, const struct sockaddr *sa, socklen_t len,
                          uint64_t deadline_ns, int abort_fd)
{
    if (connect(fd, sa, len) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return -errno;
    int r = wait_fd(fd, POLLOUT, deadline_ns, abort_fd);
    if (r < 0)
        return r;
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        return -errno;
    return soerr ? -soerr : 0;
}

static int connect_unix(const char *path, uint64_t deadline_ns, int abort_fd)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return RETRYD_EINVAL;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = finish_connect(fd, (struct sockaddr *)&sa, sizeof(sa), deadline_ns,
                           abort_fd);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

/* Each address of HOST:PORT in turn, until one connects. */
static int connect_tcp(const fleet_conf *c, uint64_t deadline_ns, int abort_fd,
                       char *err, size_t err_len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM},
                    *res;
    char port[8];
    snprintf(port, sizeof(port), "%u", c->port);
    int gr = getaddrinfo(c->host, port, &hints, &res);
    if (gr != 0) {
        snprintf(err, err_len, "cannot resolve %s: %s", c->host,
                 gai_strerror(gr));
        return RETRYD_EIO;
    }
    int r = RETRYD_EIO;
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
        int fd = socket(a->ai_family,
                        a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        r = finish_connect(fd, a->ai_addr, a->ai_addrlen, deadline_ns,
                           abort_fd);
        if (r == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            freeaddrinfo(res);
            return fd;
        }
        close(fd);
        if (r == RETRYD_ETIMEDOUT || r == RETRYD_ECANCELED)
            break;
    }
    freeaddrinfo(res);
    snprintf(err, err_len, "cannot connect: %s",
             r == RETRYD_ETIMEDOUT ? "timed out" : strerror(-r));
    return r == RETRYD_ETIMEDOUT || r == RETRYD_ECANCELED ? r : RETRYD_EIO;
}

bool fleet_refusal(const char *msg)
{
    static const char *const refusals[] = {
        "WRONGPASS", "NOAUTH", "NOPERM",
        /* AUTH with a password when Redis has none set. */
        "ERR AUTH", "ERR Client sent AUTH",
        /* Redis before 6: a wrong password. */
        "ERR invalid password"};
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
        if (strncmp(msg, refusals[i], strlen(refusals[i])) == 0)
            return true;
    return false;
}

/* AUTH [USER] PASSWORD, when @p c has a password. */
static int login(fleet_link *l, const fleet_conf *c, uint64_t deadline_ns,
                 char *err, size_t err_len)
{
    if (c->password[0] == '\0')
        return 0;
    fleet_pipe p = {0};
    const char *argv[] = {"AUTH", c->user, c->password};
    int r = c->user[0]
                ? fleet_pipe_add(&p, 3, argv)
                : fleet_pipe_add(&p, 2, (const char *[]){"AUTH", c->password});
    redisReply *reply = NULL;
    if (r == 0)
        r = fleet_link_exchange(l, &p, &reply, deadline_ns, 4096, err, err_len);
    explicit_bzero(p.buf, p.cap); /* the password was in it */
    fleet_pipe_free(&p);
    if (r < 0)
        return r;
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(err, err_len, "refused the login of user '%s': %.200s",
                 c->user[0] ? c->user : "default", reply->str);
        r = fleet_refusal(reply->str) ? RETRYD_EPERM : RETRYD_EIO;
    }
    freeReplyObject(reply);
    return r;
}

int fleet_link_open(fleet_link *l, const fleet_conf *c, uint64_t deadline_ns,
                    char *err, size_t err_len)
{
    int abort_fd = l->abort_fd;
    *l = (fleet_link)FLEET_LINK_INIT;
    l->abort_fd = abort_fd;
    int fd = c->unix_socket
                 ? connect_unix(c->redis, deadline_ns, abort_fd)
                 : connect_tcp(c, deadline_ns, abort_fd, err, err_len);
    if (fd < 0) {
        if (c->unix_socket)
            snprintf(err, err_len, "cannot connect: %s",
                     fd == RETRYD_ETIMEDOUT ? "timed out" : strerror(-fd));
        return fd == RETRYD_ETIMEDOUT || fd == RETRYD_ECANCELED ? fd
                                                                : RETRYD_EIO;
    }
    l->fd = fd;
    l->reader = fleet_reader_new();
    if (l->reader == NULL) {
        fleet_link_close(l);
        snprintf(err, err_len, "out of memory");
        return RETRYD_ENOMEM;
    }
    int r = login(l, c, deadline_ns, err, err_len);
    if (r < 0)
        fleet_link_close(l);
    return r;
}

void fleet_link_close(fleet_link *l)
{
    if (l->fd >= 0)
        close(l->fd);
    if (l->reader != NULL)
        redisReaderFree(l->reader);
    int abort_fd = l->abort_fd;
    *l = (fleet_link)FLEET_LINK_INIT;
    l->abort_fd = abort_fd;
}

/* --- one exchange -------------------------------------------------------- */

static int send_all(int fd, const char *buf, size_t len, uint64_t deadline_ns,
                    int abort_fd)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        int r = wait_fd(fd, POLLOUT, deadline_ns, abort_fd);
        if (r < 0)
            return r;
    }
    return 0;
}

/* More bytes from the socket into the reader. */
static int read_more(fleet_link *l, uint64_t deadline_ns, size_t *total,
                     size_t max_bytes)
{
    char buf[16384];
    for (;;) {
        ssize_t n = recv(l->fd, buf, sizeof(buf), 0);
        if (n == 0)
            return RETRYD_EIO; /* Redis closed the connection */
        if (n > 0) {
            *total += (size_t)n;
            if (*total > max_bytes)
                return RETRYD_EPROTO;
            return redisReaderFeed(l->reader, buf, (size_t)n) == REDIS_OK
                       ? 0
                       : RETRYD_EPROTO;
        }
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
        int r = wait_fd(l->fd, POLLIN, deadline_ns, l->abort_fd);
        if (r < 0)
            return r;
    }
}

static const char *what_failed(int r)
{
    return r == RETRYD_ETIMEDOUT   ? "no answer in time"
           : r == RETRYD_ECANCELED ? "stopped"
           : r == RETRYD_EPROTO    ? "a malformed or oversized reply"
           : r == RETRYD_EIO       ? "the connection closed"
                                   : strerror(-r);
}

int fleet_link_exchange(fleet_link *l, const fleet_pipe *p,
                        redisReply **replies, uint64_t deadline_ns,
                        size_t max_bytes, char *err, size_t err_len)
{
    size_t got = 0, total = 0;
    if (l->fd < 0)
        return RETRYD_EIO;
    int r = send_all(l->fd, p->buf, p->len, deadline_ns, l->abort_fd);
    while (r == 0 && got < p->n) {
        void *reply = NULL;
        if (redisReaderGetReply(l->reader, &reply) != REDIS_OK) {
            r = RETRYD_EPROTO;
        } else if (reply != NULL) {
            replies[got++] = reply;
        } else {
            r = read_more(l, deadline_ns, &total, max_bytes);
        }
    }
    if (r == 0)
        return 0;
    while (got > 0)
        freeReplyObject(replies[--got]);
    snprintf(err, err_len, "%s", what_failed(r));
    return r == RETRYD_ETIMEDOUT || r == RETRYD_EPROTO || r == RETRYD_ECANCELED
               ? r
               : RETRYD_EIO;
}

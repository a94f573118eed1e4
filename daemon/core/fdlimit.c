/* SPDX-License-Identifier: MIT */
/* Running out of file descriptors; see fdlimit.h. */
#include "core/fdlimit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/clock.h"

uint64_t fd_limit_raise(uint64_t *ret_before)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        *ret_before = 0;
        return 0;
    }
    *ret_before = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl.rlim_cur = rl.rlim_max;
    }
    return rl.rlim_cur;
}

unsigned fd_open_count(void)
{
    DIR *dir = opendir("/proc/self/fd");
    if (dir == NULL)
        return 0;
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(dir);
    return n > 0 ? n - 1 : 0; /* not the directory's own descriptor */
}

static int spare_open(void)
{
    return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

int accept_guard_init(accept_guard *g, const char *what, int listen_fd,
                      int epfd, struct epoll_event ev)
{
    *g = (accept_guard){.what = what,
                        .listen_fd = listen_fd,
                        .epfd = epfd,
                        .ev = ev,
                        .spare = spare_open(),
                        .pause_ms = ACCEPT_PAUSE_MIN_MS};
    return g->spare >= 0 ? 0 : -errno;
}

void accept_guard_close(accept_guard *g)
{
    if (g->spare >= 0)
        close(g->spare);
    g->spare = -1;
}

/* Stop watching the socket for the next back-off: the thread sleeps in
 * epoll_wait() until then instead of being woken by the same backlog. */
static void pause_accepting(accept_guard *g)
{
    if (g->resume_ns == 0)
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->listen_fd, NULL);
    g->resume_ns =
        retryd__clock_monotonic_ns() + (uint64_t)g->pause_ms * 1000000u;
    if (g->pause_ms < ACCEPT_PAUSE_MAX_MS)
        g->pause_ms *= 2;
}

/* Out of descriptors: take the waiting connection on the spare, refuse
 * it, and reserve the spare again; when that cannot be done, pause. */
static int exhausted(accept_guard *g, int err)
{
    bool answered = false;
    if (g->spare >= 0) {
        close(g->spare);
        g->spare = -1;
        int fd =
            accept4(g->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            if (g->refuse != NULL)
                g->refuse(fd, g->arg);
            close(fd);
            answered = true;
        }
        g->spare = spare_open(); /* another thread may have taken it */
    }
    log_limited_msg(&g->log, LOG_ERR,
                    "%s socket: out of file descriptors (%s): %s; raise the "
                    "limit (LimitNOFILE=, ulimit -n) or process_capacity "
                    "down",
                    g->what, strerror(err),
                    answered ? "refusing new connections"
                             : "not accepting for a moment");
    if (answered && g->spare >= 0)
        return -EMFILE;
    pause_accepting(g);
    return -EAGAIN;
}

int accept_guarded(accept_guard *g, struct sockaddr *sa, socklen_t *len)
{
    if (g->resume_ns != 0)
        return -EAGAIN;
    for (;;) {
        int fd = accept4(g->listen_fd, sa, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            g->pause_ms = ACCEPT_PAUSE_MIN_MS;
            if (g->spare < 0) /* used, and not taken back then */
                g->spare = spare_open();
            return fd;
        }
        if (errno == EINTR)
            continue;
        if (errno == EMFILE || errno == ENFILE)
            return exhausted(g, errno);
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

int accept_guard_timeout_ms(accept_guard *g)
{
    if (g->resume_ns == 0)
        return -1;
    uint64_t now = retryd__clock_monotonic_ns();
    if (now < g->resume_ns)
        return (int)((g->resume_ns - now + 999999) / 1000000);
    g->resume_ns = 0;
    if (g->spare < 0)
        g->spare = spare_open();
    struct epoll_event ev = g->ev;
    epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->listen_fd, &ev);
    return -1;
}

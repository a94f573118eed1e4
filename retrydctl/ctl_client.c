/* SPDX-License-Identifier: MIT */
#include "ctl_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "shared/frame.h"
#include "retryd/budget.h"
#include "retryd/common.h"

#define CTL_TIMEOUT_MS 5000

void ctl_sockets_init(ctl_sockets *ret)
{
    const char *c = getenv(RETRYD_CONTROL_SOCKET_ENV);
    const char *s = getenv(CTL_STATS_SOCKET_ENV);

    ret->control = c && *c ? c : RETRYD_DEFAULT_CONTROL_SOCKET;
    ret->stats = s && *s ? s : CTL_DEFAULT_STATS_SOCKET;
}

/* A connected socket, or -errno with the reason in @p err. */
static int connect_to(const char *path, char *err, size_t len)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(err, len, "socket path too long: %s", path);
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        snprintf(err, len, "cannot connect to %s: %s", path, strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    return fd;
}

/* connect_to, saying why it failed on stderr. */
static int connect_loud(const char *path)
{
    char err[CTL_ERR_MAX];
    int fd = connect_to(path, err, sizeof(err));
    if (fd < 0)
        fprintf(stderr, "retrydctl: %s\n", err);
    return fd;
}

/* Every part the printers read is there: a reply that decodes but omits
 * a submessage is refused here, once, rather than dereferenced later. */
static bool reply_complete(const Retryd__StatsReply *r)
{
    if (r->error < 0)
        return true; /* an error reply carries nothing else */
    if (r->daemon_version == NULL)
        return false;
    for (size_t i = 0; i < r->n_upstreams; i++)
        if (!r->upstreams[i]->name || !r->upstreams[i]->params ||
            !r->upstreams[i]->counters)
            return false;
    for (size_t i = 0; i < r->n_processes; i++)
        if (!r->processes[i]->counters)
            return false;
    return true;
}

/* The reply's own verdict: 0, or its error with the reason in @p err
 * (the reply freed). */
static int reply_verdict(Retryd__StatsReply **ret, char *err, size_t len)
{
    int r;
    if (!reply_complete(*ret)) {
        snprintf(err, len, "stats: incomplete reply");
        retryd__stats_reply__free_unpacked(*ret, NULL);
        return RETRYD_EPROTO;
    }
    if ((*ret)->error < 0) {
        snprintf(err, len, "stats: %s (%s)", retryd_strerror((*ret)->error),
                 (*ret)->message ? (*ret)->message : "");
        r = (*ret)->error;
        retryd__stats_reply__free_unpacked(*ret, NULL);
        return r;
    }
    return 0;
}

/* Connections the stats socket may shed before a reply, in a row. */
#define CTL_STATS_TRIES 3

int ctl_fetch_stats_quiet(const ctl_sockets *s, bool processes,
                          Retryd__StatsReply **ret, char *err, size_t len)
{
    Retryd__StatsRequest req;
    retryd__stats_request__init(&req);
    uint8_t *body;
    size_t blen;
    int r = RETRYD_ENOTCONN;

    req.processes = processes;
    /* A stats socket held full by idle neighbours sheds its idlest
     * connections, and one that was accepted just before a burst of
     * others may be among them before its request is read: a read-only
     * request, so asked again (a few times) on a connection closed
     * without a reply. */
    for (int tries = 0; tries < CTL_STATS_TRIES && r == RETRYD_ENOTCONN;
         tries++) {
        int fd = connect_to(s->stats, err, len);
        if (fd < 0)
            return RETRYD_ENOTCONN;
        r = retryd__frame_send(fd, &req.base, -1, CTL_TIMEOUT_MS);
        if (r == 0)
            r = retryd__frame_recv(fd, RETRYD_FRAME_REPLY_MAX, CTL_TIMEOUT_MS,
                                   &body, &blen, NULL);
        close(fd);
    }
    if (r < 0) {
        snprintf(err, len, "stats: %s", retryd_strerror(r));
        return r;
    }
    *ret = retryd__stats_reply__unpack(NULL, blen, body);
    free(body);
    if (*ret == NULL) {
        snprintf(err, len, "stats: malformed reply");
        return RETRYD_EPROTO;
    }
    return reply_verdict(ret, err, len);
}

int ctl_fetch_stats(const ctl_sockets *s, bool processes,
                    Retryd__StatsReply **ret)
{
    char err[CTL_ERR_MAX];
    int r = ctl_fetch_stats_quiet(s, processes, ret, err, sizeof(err));
    if (r < 0)
        fprintf(stderr, "retrydctl: %s\n", err);
    return r;
}

/* The daemon's verdict on a request; prints its reason. */
static int reply_status(Retryd__ControlReply *rep)
{
    int r = rep->error < 0 ? rep->error : 0;
    if (r < 0)
        fprintf(stderr, "retrydctl: %s (%s)\n", retryd_strerror(r),
                rep->message ? rep->message : "");
    retryd__control_reply__free_unpacked(rep, NULL);
    return r;
}

/* One exchange; a transport failure is reported here. */
static int ask(int fd, const Retryd__ControlRequest *req)
{
    Retryd__ControlReply *rep;
    int r = retryd__control_exchange(fd, req, CTL_TIMEOUT_MS, &rep, NULL);
    if (r < 0) {
        fprintf(stderr, "retrydctl: control: %s\n", retryd_strerror(r));
        return r;
    }
    return reply_status(rep);
}

/* The hello every control connection starts with, as @p client. */
static void hello_request(Retryd__Hello *hello, Retryd__ControlRequest *req,
                          char *client)
{
    retryd__hello__init(hello);
    retryd__control_request__init(req);
    hello->protocol_version = RETRYD_PROTOCOL_VERSION;
    hello->client = client;
    req->body_case = RETRYD__CONTROL_REQUEST__BODY_HELLO;
    req->hello = hello;
}

int ctl_control(const ctl_sockets *s, const Retryd__ControlRequest *req)
{
    Retryd__Hello hello;
    Retryd__ControlRequest hreq;
    int fd = connect_loud(s->control), r;

    if (fd < 0)
        return RETRYD_ENOTCONN;
    hello_request(&hello, &hreq, "retrydctl");
    r = ask(fd, &hreq);
    if (r == 0)
        r = ask(fd, req);
    close(fd);
    return r;
}

int ctl_hello(const char *control, char *version, size_t vlen, char *err,
              size_t len)
{
    Retryd__Hello hello;
    Retryd__ControlRequest hreq;
    Retryd__ControlReply *rep;
    int fd = connect_to(control, err, len), r;

    if (fd < 0)
        return fd == -EACCES || fd == -EPERM ? RETRYD_EPERM : RETRYD_ENOTCONN;
    hello_request(&hello, &hreq, "retrydctl doctor");
    r = retryd__control_exchange(fd, &hreq, CTL_TIMEOUT_MS, &rep, NULL);
    close(fd);
    if (r < 0) {
        snprintf(err, len, "no answer to hello: %s", retryd_strerror(r));
        return r;
    }
    r = rep->error < 0 ? rep->error : 0;
    snprintf(err, len, "%s%s%s", r < 0 ? retryd_strerror(r) : "",
             rep->message && *rep->message ? ": " : "",
             rep->message ? rep->message : "");
    if (rep->body_case == RETRYD__CONTROL_REPLY__BODY_HELLO && rep->hello &&
        rep->hello->daemon_version)
        snprintf(version, vlen, "%s", rep->hello->daemon_version);
    retryd__control_reply__free_unpacked(rep, NULL);
    return r;
}

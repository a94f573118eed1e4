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

void ctl_sockets_from_args(int *argc, char **argv, ctl_sockets *ret)
{
    const char *c = getenv(RETRYD_CONTROL_SOCKET_ENV);
    const char *s = getenv(CTL_STATS_SOCKET_ENV);
    int out = 1;

    ret->control = c && *c ? c : RETRYD_DEFAULT_CONTROL_SOCKET;
    ret->stats = s && *s ? s : CTL_DEFAULT_STATS_SOCKET;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < *argc)
            ret->control = argv[++i];
        else if (strcmp(argv[i], "--stats-socket") == 0 && i + 1 < *argc)
            ret->stats = argv[++i];
        else
            argv[out++] = argv[i];
    }
    argv[out] = NULL;
    *argc = out;
}

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "retrydctl: socket path too long: %s\n", path);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        fprintf(stderr, "retrydctl: cannot connect to %s: %s\n", path,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
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

int ctl_fetch_stats(const ctl_sockets *s, bool processes,
                    Retryd__StatsReply **ret)
{
    Retryd__StatsRequest req;
    retryd__stats_request__init(&req);
    uint8_t *body;
    size_t len;
    int fd = connect_to(s->stats), r;

    if (fd < 0)
        return RETRYD_ENOTCONN;
    req.processes = processes;
    r = retryd__frame_send(fd, &req.base, -1, CTL_TIMEOUT_MS);
    if (r == 0)
        r = retryd__frame_recv(fd, RETRYD_FRAME_REPLY_MAX, CTL_TIMEOUT_MS,
                               &body, &len, NULL);
    close(fd);
    if (r < 0) {
        fprintf(stderr, "retrydctl: stats: %s\n", retryd_strerror(r));
        return r;
    }
    *ret = retryd__stats_reply__unpack(NULL, len, body);
    free(body);
    if (*ret == NULL) {
        fprintf(stderr, "retrydctl: stats: malformed reply\n");
        return RETRYD_EPROTO;
    }
    if (!reply_complete(*ret)) {
        fprintf(stderr, "retrydctl: stats: incomplete reply\n");
        retryd__stats_reply__free_unpacked(*ret, NULL);
        return RETRYD_EPROTO;
    }
    if ((*ret)->error < 0) {
        fprintf(stderr, "retrydctl: stats: %s (%s)\n",
                retryd_strerror((*ret)->error),
                (*ret)->message ? (*ret)->message : "");
        r = (*ret)->error;
        retryd__stats_reply__free_unpacked(*ret, NULL);
        return r;
    }
    return 0;
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

int ctl_control(const ctl_sockets *s, const Retryd__ControlRequest *req)
{
    Retryd__Hello hello;
    retryd__hello__init(&hello);
    Retryd__ControlRequest hreq;
    retryd__control_request__init(&hreq);
    int fd = connect_to(s->control), r;

    if (fd < 0)
        return RETRYD_ENOTCONN;
    hello.protocol_version = RETRYD_PROTOCOL_VERSION;
    hello.client = "retrydctl";
    hreq.body_case = RETRYD__CONTROL_REQUEST__BODY_HELLO;
    hreq.hello = &hello;
    r = ask(fd, &hreq);
    if (r == 0)
        r = ask(fd, req);
    close(fd);
    return r;
}

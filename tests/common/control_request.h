/* SPDX-License-Identifier: MIT */
/*
 * One control-socket request on a raw connection, for the tests that
 * speak the protocol themselves (a peer that churns registers, say).
 */
#ifndef RETRYD_TEST_CONTROL_REQUEST_H
#define RETRYD_TEST_CONTROL_REQUEST_H

#include "retryd.pb-c.h"
#include "shared/frame.h"

/* Sends @p req on @p fd and waits (5 s at most) for the reply: its error
 * (0 or a negative RETRYD_E* code), or -1 when no reply came. */
static inline int rd_control_request(int fd, Retryd__ControlRequest *req)
{
    Retryd__ControlReply *rep;
    if (retryd__control_exchange(fd, req, 5000, &rep, NULL) < 0)
        return -1;
    int e = rep->error;
    retryd__control_reply__free_unpacked(rep, NULL);
    return e;
}

#endif

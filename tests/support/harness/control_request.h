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

/* The hello that opens a raw connection, at the current protocol. */
static inline int rd_control_hello(int fd)
{
    Retryd__ControlRequest req;
    Retryd__Hello hello;
    retryd__control_request__init(&req);
    retryd__hello__init(&hello);
    hello.protocol_version = RETRYD_PROTOCOL_VERSION;
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_HELLO;
    req.hello = &hello;
    return rd_control_request(fd, &req);
}

/* Register upstream @p name, then retire it: one turn of a peer that
 * churns slots. The first error, as rd_control_request() gives it. */
static inline int rd_control_register_retire(int fd, char *name)
{
    Retryd__ControlRequest req;
    Retryd__Register reg;
    Retryd__Retire ret;
    retryd__control_request__init(&req);
    retryd__register__init(&reg);
    reg.name = name;
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_REGISTER;
    req.register_ = &reg;
    int e = rd_control_request(fd, &req);
    if (e != 0)
        return e;
    retryd__retire__init(&ret);
    ret.name = name;
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_RETIRE;
    req.retire = &ret;
    return rd_control_request(fd, &req);
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Frames on the daemon's Unix sockets: a 4-byte big-endian length, then one
 * protobuf-c message. The length is checked against a cap before anything
 * is read or unpacked. Internal; shared by libretryd, retryd and retrydctl.
 */
#ifndef RETRYD_FRAME_H
#define RETRYD_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "retryd.pb-c.h"

#define RETRYD_PROTOCOL_VERSION 2u /* 2: error codes follow negative errno */
/* Requests (control and stats) are small; replies may list every slot. */
#define RETRYD_FRAME_REQUEST_MAX (64u * 1024)
#define RETRYD_FRAME_REPLY_MAX (32u * 1024 * 1024)
#define RETRYD_FRAME_HEADER 4u

/*
 * Decode the frame at the start of @p buf (@p len bytes buffered so far).
 * Returns 0 and sets the body's place when a whole frame is there, 1 when
 * more bytes are needed, RETRYD_EPROTO when the announced length is above
 * @p cap (the connection cannot be resynchronised: close it). A zero
 * length is an empty message.
 * *ret_body_len is the announced length whenever the header is whole (on 0,
 * and on 1 with at least RETRYD_FRAME_HEADER bytes), *ret_consumed the
 * frame's total size (header + body) on 0.
 */
int retryd__frame_decode(const uint8_t *buf, size_t len, size_t cap,
                         const uint8_t **ret_body, size_t *ret_body_len,
                         size_t *ret_consumed);

/* Pack @p msg, whose packed size is @p n, behind its frame header into
 * @p buf (RETRYD_FRAME_HEADER + @p n bytes): the one encoder of a frame,
 * for the client's sends and the daemon's replies. */
void retryd__frame_pack(const ProtobufCMessage *msg, size_t n, uint8_t *buf);

/*
 * Pack @p msg behind a header and send it on a connected socket, with
 * @p pass_fd attached by SCM_RIGHTS when >= 0. Blocks at most
 * @p timeout_ms in total. Returns 0, RETRYD_EPROTO (message above
 * RETRYD_FRAME_REPLY_MAX), RETRYD_ENOMEM, RETRYD_ETIMEDOUT, RETRYD_ENOTCONN
 * (the peer went away) or RETRYD_EIO.
 */
/* One non-blocking send of @p len bytes, with @p pass_fd (>= 0) passed
 * over SCM_RIGHTS on them; what sendmsg() returns. Never SIGPIPE. The
 * framed sender and the daemon's reply queue both send through it. */
ssize_t retryd__send_with_fd(int fd, const void *buf, size_t len, int pass_fd);

int retryd__frame_send(int fd, const ProtobufCMessage *msg, int pass_fd,
                       int timeout_ms);

/*
 * Receive one frame of at most @p cap bytes. On 0, *ret_body is a malloc'ed
 * buffer of *ret_len bytes the caller frees, and *ret_fd (when not NULL) is
 * a descriptor passed with it, or -1. Returns 0, RETRYD_EPROTO,
 * RETRYD_ETIMEDOUT, RETRYD_ENOTCONN, RETRYD_ENOMEM or RETRYD_EIO.
 */
int retryd__frame_recv(int fd, size_t cap, int timeout_ms, uint8_t **ret_body,
                       size_t *ret_len, int *ret_fd);

/*
 * One request on a control connection and its reply: send @p req, then
 * receive and unpack a ControlReply of at most RETRYD_FRAME_REPLY_MAX
 * bytes, each step within @p timeout_ms. On 0, *ret is freed with
 * retryd__control_reply__free_unpacked(), and *ret_fd (when not NULL) is
 * a descriptor passed with the reply, or -1; on an error any passed
 * descriptor is closed. Returns 0, RETRYD_EPROTO (a reply that does not
 * decode), or what retryd__frame_send() or retryd__frame_recv() returned.
 * The reply's own error field is the caller's to read.
 */
int retryd__control_exchange(int fd, const Retryd__ControlRequest *req,
                             int timeout_ms, Retryd__ControlReply **ret,
                             int *ret_fd);

#endif /* RETRYD_FRAME_H */

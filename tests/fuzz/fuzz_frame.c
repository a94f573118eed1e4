/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer: the input is the byte stream of one connection. Frames are
 * decoded from it as the daemon's connection buffer does (control.c,
 * drain_frames), and every whole frame's body is unpacked as each message
 * that crosses the sockets: the requests the daemon reads and the replies
 * libretryd and retrydctl read.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shared/frame.h"
#include "retryd.pb-c.h"
#include "retryd/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const size_t cap = RETRYD_FRAME_REQUEST_MAX;
    size_t off = 0;

    for (;;) {
        const uint8_t *body = NULL;
        size_t body_len = 0, used = 0;
        int r = retryd__frame_decode(data + off, size - off, cap, &body,
                                     &body_len, &used);
        if (r == 1 || r == RETRYD_EPROTO)
            return 0; /* needs more bytes, or the connection is closed */
        if (r != 0 || used > size - off || body_len > cap ||
            used != RETRYD_FRAME_HEADER + body_len ||
            body != data + off + RETRYD_FRAME_HEADER)
            __builtin_trap();
        off += used;

        /* The body in a buffer of its own size: ASan sees any overread. */
        uint8_t *b = malloc(body_len ? body_len : 1);
        if (b == NULL)
            return 0;
        if (body_len > 0)
            memcpy(b, body, body_len);
        Retryd__ControlRequest *req =
            retryd__control_request__unpack(NULL, body_len, b);
        /* dispatch() dereferences the body of every case it knows (the
         * oneof's members share one pointer; hello stands for all). */
        if (req != NULL && req->body_case != 0 && req->hello == NULL)
            __builtin_trap();
        retryd__control_request__free_unpacked(req, NULL);
        retryd__stats_request__free_unpacked(
            retryd__stats_request__unpack(NULL, body_len, b), NULL);
        Retryd__ControlReply *rep =
            retryd__control_reply__unpack(NULL, body_len, b);
        if (rep != NULL && rep->body_case != 0 && rep->hello == NULL)
            __builtin_trap();
        retryd__control_reply__free_unpacked(rep, NULL);
        retryd__stats_reply__free_unpacked(
            retryd__stats_reply__unpack(NULL, body_len, b), NULL);
        free(b);
    }
}

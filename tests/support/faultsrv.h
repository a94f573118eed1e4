/* SPDX-License-Identifier: MIT */
/* Internals of retryd-faultsrv, the fault-injecting HTTP/1.1 server the
 * tests run as a child process (see faultsrv.c). What it shares with the
 * HTTP/2 server (startup, counters, control protocol, plain-socket I/O,
 * query parsing) is in srv_common.h.
 *
 * Tests never include this header: they talk to the server over HTTP and
 * over its line-based control port (see srv_control.c for the protocol). */
#ifndef RETRYD_FAULTSRV_H
#define RETRYD_FAULTSRV_H

#include "srv_common.h"

/* Request line + header fields. A head line is read whole into the
 * connection's input buffer, so it has to fit there. */
#define FS_HEAD_MAX (64 * 1024)
_Static_assert(FS_HEAD_MAX <= SRV_IN_CAP, "a head line must fit the buffer");

/* Its own tally (srv_stats_tally): executions whose client left while a
 * hold held them (GONE <id>). */
#define FS_TALLY_GONE SRV_TALLY_OWN

/* --- faultsrv_http.c: HTTP/1.1 requests and the fault modes ------------ */
void fs_http_serve(struct srv_conn *c);

#endif

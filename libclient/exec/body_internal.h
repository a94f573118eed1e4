/* SPDX-License-Identifier: MIT */
/* Opening a body for one attempt; internal to libretryd. */
#ifndef RETRYD_BODY_INTERNAL_H
#define RETRYD_BODY_INTERNAL_H

#include "retryd/body.h"

/*
 * A reader for the next attempt. A one-shot body opens once; a second
 * open is RETRYD_EINVAL (the decision engine never asks for it: rule 3).
 * The reader is closed with retryd__body_close().
 */
int retryd__body_open(retryd_body *b, retryd_body_reader *ret);
void retryd__body_close(retryd_body_reader *r);

#endif

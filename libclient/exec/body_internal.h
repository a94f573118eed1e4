/* SPDX-License-Identifier: MIT */
/* Opening a body for one attempt; internal to libretryd. */
#ifndef RETRYD_BODY_INTERNAL_H
#define RETRYD_BODY_INTERNAL_H

#include <stdbool.h>

#include <curl/curl.h>

#include "retryd/body.h"

/*
 * A reader for the next attempt. A one-shot body opens once; a second
 * open is RETRYD_EINVAL (the decision engine never asks for it: rule 3).
 * The reader is closed with retryd__body_close().
 */
int retryd__body_open(retryd_body *b, retryd_body_reader *ret);
void retryd__body_close(retryd_body_reader *r);

/*
 * A MIME body (retryd_body_new_mime) has no reader: libcurl reads it, as a
 * curl_mime of the attempt's handle @p curl, built here for each attempt
 * (its files opened by that attempt) and freed with curl_mime_free once
 * the transfer is done. 0, RETRYD_EIO (a file cannot be read now),
 * RETRYD_ENOMEM.
 */
bool retryd__body_is_mime(const retryd_body *b);
int retryd__body_mime(const retryd_body *b, CURL *curl, curl_mime **ret);

#endif

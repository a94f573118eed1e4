/*
 * retryd: request bodies and whether they can be sent again.
 */
#ifndef RETRYD_BODY_H
#define RETRYD_BODY_H

#include <stddef.h>

#include "retryd/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Whether a body can be sent again, strongest first: the numeric order is
 * the order of weakness, so the weakest of two is the larger.
 */
typedef enum retryd_replayability {
    /** The same bytes can be sent again at no cost. */
    RETRYD_REPLAYABLE = 0,
    /** A fresh copy can be opened for each attempt. */
    RETRYD_REOPENABLE = 1,
    /** Once read, gone: no second attempt can carry it. */
    RETRYD_ONE_SHOT = 2,
} retryd_replayability;
#define RETRYD_REPLAYABILITY_COUNT 3

/** The kinds of body of the specification's table. */
typedef enum retryd_body_kind {
    RETRYD_BODY_BYTES = 0,    /**< immutable bytes: REPLAYABLE */
    RETRYD_BODY_DTO = 1,      /**< DTO + deterministic codec: REPLAYABLE */
    RETRYD_BODY_SUPPLIER = 2, /**< reopenable resource: REOPENABLE */
    RETRYD_BODY_STREAM = 3,   /**< a single stream: ONE_SHOT */
    RETRYD_BODY_PUBLISHER_FACTORY = 4, /**< as declared */
    RETRYD_BODY_PUBLISHER = 5,         /**< a publisher instance: ONE_SHOT */
    RETRYD_BODY_MULTIPART = 6,         /**< the weakest of its parts */
} retryd_body_kind;
#define RETRYD_BODY_KIND_COUNT 7

/**
 * The replayability of a body kind.
 *
 * @param kind      not MULTIPART (use retryd_replayability_weakest over the
 *                  parts).
 * @param declared  what a publisher factory declares; ignored otherwise.
 * @param ret       written only on success.
 * @return 0, or RETRYD_EINVAL for MULTIPART, an unknown kind, or an unknown
 *         declared value for a publisher factory.
 */
RETRYD_EXPORT int retryd_body_kind_replayability(retryd_body_kind kind,
                                                 retryd_replayability declared,
                                                 retryd_replayability *ret);

/** The weaker of two replayabilities (a multipart body is its weakest part). */
RETRYD_EXPORT retryd_replayability
retryd_replayability_weakest(retryd_replayability a, retryd_replayability b);

/** Stable names: "replayable", "reopenable", "one_shot"; "unknown". */
RETRYD_EXPORT const char *retryd_replayability_name(retryd_replayability r);

/** Parse a stable name back. @return 0, or RETRYD_EINVAL. */
RETRYD_EXPORT int retryd_replayability_from_name(const char *name,
                                                 retryd_replayability *ret);

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_BODY_H */

/* SPDX-License-Identifier: MIT */
/* The body-kind algebra of the specification's replayability table. */
#include "retryd/body.h"

int retryd_body_kind_replayability(retryd_body_kind kind,
                                   retryd_replayability declared,
                                   retryd_replayability *ret)
{
    retryd_replayability r;

    switch (kind) {
    case RETRYD_BODY_BYTES:
    case RETRYD_BODY_DTO:
        r = RETRYD_REPLAYABLE;
        break;
    case RETRYD_BODY_SUPPLIER:
        r = RETRYD_REOPENABLE;
        break;
    case RETRYD_BODY_STREAM:
    case RETRYD_BODY_PUBLISHER:
        r = RETRYD_ONE_SHOT;
        break;
    case RETRYD_BODY_PUBLISHER_FACTORY:
        if ((unsigned)declared >= RETRYD_REPLAYABILITY_COUNT)
            return RETRYD_EINVAL;
        r = declared;
        break;
    case RETRYD_BODY_MULTIPART: /* depends on the parts: see weakest() */
    case RETRYD_BODY_MIME:
    default:
        return RETRYD_EINVAL;
    }
    *ret = r;
    return 0;
}

retryd_replayability retryd_replayability_weakest(retryd_replayability a,
                                                  retryd_replayability b)
{
    /* The enum is ordered from strongest to weakest. Anything unknown is
     * treated as the weakest, so a bad value can never enable a replay. */
    if ((unsigned)a >= RETRYD_REPLAYABILITY_COUNT ||
        (unsigned)b >= RETRYD_REPLAYABILITY_COUNT)
        return RETRYD_ONE_SHOT;
    return a > b ? a : b;
}

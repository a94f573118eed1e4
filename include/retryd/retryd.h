/* SPDX-License-Identifier: MIT */
/* retryd: the whole public API. Include this, link libretryd. */
#ifndef RETRYD_RETRYD_H
#define RETRYD_RETRYD_H

#include "retryd/backoff.h"
#include "retryd/body.h"
#include "retryd/budget.h"
#include "retryd/budget_decide.h"
#include "retryd/client.h"
#include "retryd/common.h"
#include "retryd/decision.h"
#include "retryd/multi.h"

#define RETRYD_VERSION_MAJOR 0
#define RETRYD_VERSION_MINOR 2
#define RETRYD_VERSION_PATCH 0

#endif /* RETRYD_RETRYD_H */

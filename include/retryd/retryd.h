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
#include "retryd/version.h" /* written by CMake from project(VERSION) */

#endif /* RETRYD_RETRYD_H */

/* SPDX-License-Identifier: MIT */
/*
 * retryd_upstream_budget, the exported object, at the size it was first
 * exported with: peek() and take() only, 24 bytes. An executable that
 * refers to it directly gets a copy of it (a copy relocation) of the size
 * it was linked against, so the object can never grow: the library would
 * read past the copy. Its sz covers take() alone, and the engine then
 * never looks further. The whole interface, with take_for() (fair shares'
 * reasons, a request's share), is retryd_upstream_budget_iface()'s.
 *
 * This file alone defines the struct as it was, under its public name, so
 * that the object's type is the one the ABI baseline records; it includes
 * no header that declares the current one.
 */
#include <stdbool.h>
#include <stddef.h>

bool retryd__budget_peek(void *ctx);
bool retryd__budget_take(void *ctx);

typedef struct retryd_budget_iface {
    size_t sz;
    bool (*peek)(void *ctx);
    bool (*take)(void *ctx);
} retryd_budget_iface;

__attribute__((visibility("default")))
const retryd_budget_iface retryd_upstream_budget = {
    sizeof(retryd_budget_iface), retryd__budget_peek, retryd__budget_take};

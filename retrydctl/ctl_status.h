/* SPDX-License-Identifier: MIT */
/* retrydctl status and doctor: whether this process would share the host
 * budget, in one line or on one screen. */
#ifndef RETRYD_CTL_STATUS_H
#define RETRYD_CTL_STATUS_H

#include "retryd/budget.h"

/* Attach as any service would (retryd_host_open) and detach: what the
 * library found, in *ret. 0, or a negative code when the host could not
 * even be opened (then *ret is not set). */
int ctl_share_probe(const char *control, const char *client,
                    retryd_share_status *ret);

/* What a share status means and what to do about it, in one sentence. */
const char *ctl_share_advice(retryd_share_status s);

int ctl_status_main(int argc, char **argv);
int ctl_doctor_main(int argc, char **argv);

#endif
